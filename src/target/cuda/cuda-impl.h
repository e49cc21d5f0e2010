/*
 * cuda-impl.h: what the `cuda` target's files share: the emitter state, the
 * helpers every group emitter uses (typed pointers, loads and stores in the
 * storage precision), the per-group emitters (emit_*.c) and the tuner.
 *
 * Every group becomes one rOperator (runtime/gprog.h):
 *
 *     __device__ void op_<id>(const kiln_gctx *c, int t)   // rTask t, one block
 *
 * appended to e->code by the group's emitter, which also fills a cg_op:
 * how many rTasks, how many threads per block, how much dynamic shared
 * memory. emit.c then writes the kernel `k_<id>` that loops over the rTasks,
 * and the launch. Rules for rOperators:
 *   - every thread of the block calls op_<id> for every t (the loop is
 *     uniform), so __syncthreads() inside is fine; threads with no work in
 *     an rTask must still reach every __syncthreads();
 *   - the rTask reads only blockDim.x (== cg_op.block), threadIdx.x, t and
 *     kg_smem (cg_op.smem_bytes of it): never blockIdx / gridDim, so the same
 *     function runs in a persistent kernel (--schedule=mono);
 *   - a narrow rOperator (cg_op.narrow) does not read blockDim.x either: it
 *     is written for cg_op.block threads and meets them with kg_sync_n, so
 *     a persistent kernel of wider blocks may run it on its first
 *     cg_op.block threads while the rest skip its rTasks (Rammer's early
 *     exit; emit.c);
 *   - a comment before the function names the ONNX nodes (cg_comment);
 *   - an rOperator with cg_op.prewait takes a third parameter, CG_PRE_PARAM:
 *     with grid_dep 1, its rTask does griddepcontrol.wait (kg_grid_dep)
 *     itself, after work that needs nothing the kernels before write, and
 *     the kernel's head leaves it out.
 */
#ifndef KILN_TARGET_CUDA_IMPL_H
#define KILN_TARGET_CUDA_IMPL_H

#include "runtime/gprog.h"
#include "target/cuda/kernels/kg_tiles.h"
#include "target/target.h"

/* Rows of values that an rOperator's rTasks write and read (kernels/kg_tiles.h),
 * for a persistent kernel's tile-row waits (emit.c plan_waits). A row is a
 * row of the value's storage, `len` elements: an NHWC pixel, a matrix row. */
typedef struct cg_tiles {
    int64_t div, tiles_m, tiles_n, group; /* rTask t's tile row, kg_tile_row */
    int64_t bm, m;                        /* rows a tile row holds; all of them (0: no tiles) */
    const ir_value *v;                    /* rTask t writes rows [tm bm, min(m, tm bm + bm)) of v, nothing else */
    int64_t len;
} cg_tiles;

typedef struct cg_rowread {
    const ir_value *v; /* read by rows, nothing else of it */
    int64_t len;
    /* win.h 0: the rows the rTask's tile writes; else a convolution's NHWC
     * input: the image rows its output rows read (win.tiles: the producer's,
     * set where the wait is emitted) */
    kg_win win;
} cg_rowread;

#define CG_ROWREADS 3

typedef struct cg_op {
    int64_t n_rtasks;  /* 1 .. INT32_MAX */
    int block;         /* threads per block: a multiple of 32, 32 .. 1024 */
    int smem_bytes;    /* dynamic shared memory per rTask (0 .. 227 KB) */
    bool splitk;       /* uses kg.h's split-K workspace: its place there is below */
    int64_t ws_at, ws_floats; /* split-K: the floats of kg_splitk_ws it uses (cg_splitk_place) */
    int sem_at, sems;  /* split-K: the counters of kg_splitk_sem it uses */
    int cluster;       /* blocks per cluster: 0 or 1 none, else 2..8 (a kernel of its own, KG_CLUSTER) */
    bool narrow;       /* may run on the first `block` threads of a wider persistent block (kg_sync_n) */
    int acc_regs;      /* registers a thread its template needs and ptxas cannot spill (warpgroup-MMA
                        * accumulators): a narrow op joins a wider block only where they fit; 0: any */
    double est_clk;    /* the cost model's time for the rTasks run alone, in SM clocks (0: no estimate) */
    bool fitted;       /* mono: built for the room its stage left (emit.c, fit_stage), not as the fastest */
    bool wgmma;        /* its template issues warpgroup MMAs (sm_90a), which ptxas serializes across a call */
    bool prewait;      /* op_<id> takes CG_PRE_PARAM: may do griddepcontrol.wait inside the rTask */
    int tmap;          /* 0, or 1 + the first of the two tensor maps (kg_tmaps[]) its rTasks copy with */
    char config[128];  /* the template configuration chosen, for listings ("" when there is no choice) */
    cg_tiles tiles;    /* the rows its rTasks write (tiles.m 0: not known) */
    cg_rowread reads[CG_ROWREADS]; /* values its rTasks read only by rows, beside tiles */
    int n_reads;
} cg_op;

/* The third parameter of a cg_op.prewait rOperator's op_<id>. */
#define CG_PRE_PARAM ", int grid_dep"

/* What a call of op's op_<id> passes after (c, t): nothing, or for a
 * cg_op.prewait one its grid_dep. */
static inline const char *cg_pre_arg(const cg_op *op, bool grid_dep)
{
    return !op->prewait ? "" : grid_dep ? ", 1" : ", 0";
}

/* The threads a block runs op's rTasks in, inside a kernel whose blocks
 * have `wide` threads (0: a kernel of op's own): wide for a narrow op of
 * fewer threads (its rTasks on the first op->block of them, the rest
 * skipping them), else op's own. */
static inline int cg_block_in(const cg_op *op, int wide)
{
    return op->narrow && op->block < wide ? wide : op->block;
}

/* The GPU the code is tuned for (the compiling machine's device 0, else a
 * default: an H100-like sm_90 with 132 SMs). */
typedef struct cg_gpu {
    int sm_major, sm_minor;
    int n_sms;
    int smem_per_block_optin;  /* bytes */
    int l2_bytes;
    bool present;              /* a device is here: the tuner can time on it */
} cg_gpu;

typedef struct cg_tuner cg_tuner;

typedef struct cg_emitter {
    const ir_graph *g;
    const sched_program *p;
    const target_options *o;
    base_diag *d;
    kiln_gprec prec;
    kiln_dtype *store;       /* per value id of g: the dtype its bytes hold at run time */
    bool *kmajor;            /* per value id: a [k, n] weight stored transposed, as [n, k] (emit.c) */
    bool *nhwc;              /* per value id: an activation stored NHWC (cg_plan_conv_layouts) */
    bool *ohwi;              /* per value id: a conv weight stored [Cout][KH][KW][Cin/group] (same) */
    int64_t *kpad;           /* per value id: a conv weight's rows padded with zeros to this many
                              * elements, 0: not (same) */
    base_str code;           /* the rOperators and kernels, in group order */
    cg_gpu gpu;
    cg_tuner *tuner;         /* NULL: choose by heuristics only */
    int site;                /* the group being emitted: its faults name KG_SITE_<site> (cg_fault_stmt) */
    /* 0 (--schedule=kernels): every emitter picks its own block size. Else
     * (--schedule=mono) the block size of the persistent kernel: an emitter
     * that can build its rOperator for exactly this many threads does
     * (op->block == want_block), choosing among the configurations of that
     * size; one that cannot keeps its own size and the kernel ends there
     * (emit.c). Tuning keys name it, since it narrows the candidates. */
    int want_block;
    /* mono schedules: whether an emitter may build a narrow rOperator
     * (cg_op.narrow) of fewer threads than want_block, its rTasks' other
     * threads exiting early (Rammer 4.1.3); KILN_MONO_NARROW=0 turns it off */
    bool narrow_ok;
    /* --schedule=waves (Rammer's SelectRKernels): build the most efficient
     * rKernel (least SM time: estimated time x multiprocessors held) instead
     * of the fastest, for a wave whose fastest rKernels overfill the GPU */
    bool wave_efficient;
    /* --schedule=waves: the member being built is one of several in its
     * wave (build_wave), so may share a kernel, and its registers, with
     * other bodies: no tile whose epilogue stages in halves (emit_gemm.c) */
    bool wave_shared;
    /* mono schedules, while a product is built again for a stage its fastest
     * rKernel overfills (emit.c, fit_stage): the busy clocks of the stage's
     * stage_blocks blocks so far (sched_stage_add) and the rTasks before
     * it there; the cost model then picks the rKernel that ends the stage
     * soonest. NULL otherwise */
    const double *stage_load;
    int stage_blocks;
    int64_t stage_before;
    /* mono schedules: the blocks of want_block threads resident on each
     * multiprocessor (the kernel-wide configuration), so n_sms * mono_per_sm
     * blocks run every stage; 0 in the kernels schedule */
    int mono_per_sm;
    /* per group id: how many identical products (its own included) run side
     * by side with a GEMM group's, or NULL (emit.c, plan_gemm_share) */
    int *gemm_share;
    int tune_share;          /* while tuning a group: copies of its rTasks a timed launch runs (1: one) */
    /* where the next split-K rOperator's partials and counters go in kg.h's
     * workspace (cg_splitk_place) */
    int64_t splitk_ws_next;
    int splitk_sem_next;
    int need[32];            /* cg_kernel_sources indices the program includes, in order */
    int n_need;
    rt_gtmap *tmaps;         /* the tensor maps kg_tmaps[] holds (runtime/gprog.h), in order */
    int n_tmaps, cap_tmaps;
} cg_emitter;

/* kg.h's split-K workspace: floats of partial tiles (KG_SPLITK_WS_FLOATS)
 * and tile counters (KG_SPLITK_SEMS): keep the two in step. */
#define CG_SPLITK_WS_FLOATS (1 << 20)
#define CG_SPLITK_SEMS 4096

/* Gives a split-K rOperator (group grp) its floats and counters of the
 * workspace: the ones after the previous split-K rOperator's of its
 * kernel, or the first when those would not fit; sets op->splitk and its
 * place. Split-K rOperators whose places overlap run one after the other
 * (cg_splitk_overlap: emit.c's stages and waits); the others may share a
 * stage, as Inception's branches do. An internal error when the workspace
 * cannot hold it at all (the emitters offer split-K only where it can). */
kiln_status cg_splitk_place(cg_emitter *e, const sched_group *grp, int64_t floats, int64_t sems, cg_op *op);
/* Whether the places of split-K rOperators a and b overlap (false when
 * either is not split-K). */
bool cg_splitk_overlap(const cg_op *a, const cg_op *b);

/* Whether GEMM groups a and b are the same product (one tuning key) of
 * the same A: BERT's query, key and value (emit_gemm.c). */
bool cg_gemm_siblings(cg_emitter *e, const sched_group *a, const sched_group *b);

/* ---- helpers (emit.c) --------------------------------------------------------- */

/* The CUDA type a dtype is stored as ("float", "__half", "__nv_bfloat16",
 * "kg_i64", "kg_u8" for bool...); NULL when the target does not handle it. */
const char *cg_type(kiln_dtype t);
/* The dtype v's bytes hold at run time: its own, except float32 values in
 * the arena or the weights under --precision fp16/bf16. */
kiln_dtype cg_store(const cg_emitter *e, const ir_value *v);
/* Whether v is a floating-point value (computed in float whatever its storage). */
bool cg_is_float(kiln_dtype t);
/* The time, in SM clocks, of the stage cg_emitter.stage_load describes
 * were an rOperator of n_rtasks rTasks that the cost model gives est_clk
 * (all of them, in rounds of the stage's blocks) added to it. */
double cg_stage_time(const cg_emitter *e, int64_t n_rtasks, double est_clk);
/* Whether environment variable `name` is set to exactly `value` (the
 * switches for experiments: KILN_MONO_NARROW=0, KILN_GEMM_CLUSTERS=1...). */
bool cg_env_is(const char *name, const char *value);
/* A pointer expression of v's storage type to its data:
 * "((const __half *)(c->weights + 4096))", "((float *)c->io[3])". */
const char *cg_ptr(const cg_emitter *e, const ir_value *v, char *buf, size_t n);
/* The value of element `index` (a C expression) of v, in its compute type
 * (float for every float storage; the integer type otherwise):
 * "kg_ld_f16(((const __half *)(c->arena + 64)) + (i))". */
const char *cg_load(const cg_emitter *e, const ir_value *v, const char *index, char *buf, size_t n);
/* Appends "kg_st_f16(<ptr> + (index), value);\n" (or a plain store) to s. */
void cg_store_stmt(const cg_emitter *e, base_str *s, const ir_value *v, const char *index, const char *value);
/* Load/store helper names for a storage dtype: "kg_ld_f16" / "kg_st_f16";
 * NULL for non-float dtypes (plain loads and stores). */
const char *cg_ld_fn(kiln_dtype store);
const char *cg_st_fn(kiln_dtype store);
/* "/ * conv1+relu1 * /" line naming the group's ONNX nodes, safe in a comment. */
void cg_comment(base_str *s, const sched_group *grp);
/* The kg_math.h constant of a fused activation ("KG_ACT_GELU"); emitters that
 * use kg_actf ask for kg_math.h with cg_need. */
const char *cg_act_name(pass_act a);
/* A float literal that round-trips ("0x1.8p+1f", "__int_as_float(0x7f800000)"). */
const char *cg_float_lit(double v, char *buf, size_t n);
/* Appends a statement recording fault `code` (KG_FAULT_*) for this launch. */
void cg_fault_stmt(const cg_emitter *e, base_str *s, const char *code);

/* Appends a tensor map to the program's kg_tmaps; OUT: *index. */
kiln_status cg_tmap_add(cg_emitter *e, const rt_gtmap *m, int *index);
/* Where v lives when the runtime can make a tensor map of it: the arena
 * (space 0) or the weights (1), at *offset; false for model inputs and
 * outputs, whose addresses change from run to run. */
bool cg_tmap_space(const cg_emitter *e, const ir_value *v, int *space, uint64_t *offset);
/* Appends the definition of kg_tmaps (when the program has tensor maps). */
void cg_tmaps_define(const cg_emitter *e, base_str *s);
/* Appends `extern "C" __global__ void <attributes> NAME(const kiln_gctx *c)\n{\n`
 * and, with grid_dep, the first statement, kg_grid_dep() (the wait that
 * lets the runtime launch the kernel early: gprog.h; without it, every
 * rTask of the kernel does that wait, cg_op.prewait):
 * __launch_bounds__(block[, min_blocks]) (min_blocks 0: none) and, for
 * cluster > 1, KG_CLUSTER(cluster). Every kernel kiln builds, tunes or
 * benchmarks opens so. */
void cg_kernel_head(base_str *s, const char *name, int block, int min_blocks, int cluster, bool grid_dep);

/* share.c: one copy of the code of rOperators that differ only in their
 * tensors' places (--schedule=mono). cg_share_op rewrites op_<id>, which
 * the emitter just appended to e->code at `start`, into a call of a shared
 * body with its constants as arguments; *call tells whether it did and
 * with what (a persistent kernel calls the body from its tables: emit.c);
 * inline_body writes a new body __forceinline__ instead of __noinline__. */
typedef struct cg_share cg_share;
typedef struct cg_share_call {
    int body;     /* op_<id> calls opb_<body>; -1: op_<id> was left as it is */
    int n_values; /* the constants it passes after (c, t[, grid_dep]) */
    char *values; /* their C expressions, ", "-joined; the caller frees it (base_free); NULL when body < 0 */
} cg_share_call;
cg_share *cg_share_new(void); /* NULL when out of memory */
void cg_share_free(cg_share *sh);
kiln_status cg_share_op(cg_emitter *e, cg_share *sh, int id, size_t start, bool inline_body, cg_share_call *call);
/* rOperators rewritten so far; *bodies: the distinct bodies among them. */
int cg_share_count(const cg_share *sh, int *bodies);

/* membound.c: what a memory-bound rOperator (emit_ews.c, emit_rows.c) makes of
 * the persistent kernel it runs in (MonoNN 4.2.2, 4.3). */
typedef struct cg_mono_ctx {
    int resident; /* blocks that run every stage, n_sms x mono_per_sm; 0 outside the mono schedules */
    int regs;     /* 32-bit registers a thread of the persistent kernel may hold (its launch bounds) */
    bool ilp;     /* steps per thread chosen by cg_mono_factor (KILN_MONO_ILP=0: one) */
    bool hints;   /* cache hints on loads, kg.h's stream and keep (only with KILN_MONO_CACHE=1) */
} cg_mono_ctx;
/* The 32-bit registers a thread may hold in a kernel of `block` threads a
 * block and `per_sm` blocks a multiprocessor (its launch bounds; per_sm 0
 * or 1: one); 255 for block 0. */
int cg_regs_per_thread(int block, int per_sm);
/* The same for e's persistent kernel; 255 for a kernel of its own. */
int cg_mono_regs(const cg_emitter *e);
/* OUT: *m for the group e is about to emit (reads the environment). */
void cg_mono_ctx_init(const cg_emitter *e, cg_mono_ctx *m);
/* Steps per thread, 1 .. min(cap, 32), for work of `units` rTasks at one
 * step: enough that the rTasks make about one wave of the resident blocks,
 * and no more than needed for as few waves. 1 outside mono or with ILP off. */
int cg_mono_factor(const cg_mono_ctx *m, int64_t units, int cap);
/* Whether grp is v's only reader, so that a load of it may be streamed. */
bool cg_mono_read_here_only(const sched_group *grp, const ir_value *v);

/* ---- what compiles, by group kind (emit_*.c) ------------------------------------ */

bool cg_can_contract(const ir_node *n);   /* Conv, MatMul, Gemm */
bool cg_can_conv(const ir_node *n);       /* Conv (emit_conv.c; cg_can_contract asks it) */
bool cg_can_pool(const ir_node *n);       /* MaxPool, AveragePool */
bool cg_can_rows(const ir_node *n);       /* Softmax, LogSoftmax, LayerNormalization, GlobalAveragePool */
bool cg_can_elementwise(const ir_node *n);
bool cg_can_move(const ir_node *n);       /* Transpose, Concat, Slice, Gather, Reduce*, ... */

/* ---- the emitters: each appends op_<grp->id> to e->code and fills *op ------------- */

kiln_status cg_emit_conv(cg_emitter *e, const sched_group *grp, cg_op *op);
/* Whether convolution group grp is a product the GEMM templates compute
 * (cg_emit_conv hands it to cg_emit_gemm), in a kernel of its own (waves,
 * kernels) or in a persistent kernel of one block a multiprocessor: 1 to 4,
 * a 1x1 convolution of stride 1, no padding, one group, 16-bit, channels a
 * multiple of 8, with x stored NHWC, or NCHW for one image of a multiple
 * of 8 pixels. With x NHWC:
 * 1, y NHWC too, y [n h w, k] = x [n h w, c] w [k, c]^T; 2, y NCHW of one
 * image, y [k, h w] = w [k, c] x [h w, c]^T (ResNet-50's last convolution,
 * whose y GlobalAveragePool reads). With x NCHW [c, h w]: 3, y NHWC, y =
 * x^T w^T; 4, y NCHW, y = w x. And any other convolution of one group on
 * sm_90, x NHWC, channels a multiple of 64, with its im2col matrix copied
 * by the tensor memory accelerator's im2col mode (kg_gemm.cuh
 * kg_gemm_conv): 5, y NHWC [n oh ow, k] = im2col(x) [n oh ow, kh kw c]
 * w [k, kh kw c]^T; 6, y NCHW of one image [k, oh ow] = w im2col(x)^T.
 * A residual only stored as y is (the epilogue reads it as it writes y).
 * 0: none of these.
 * KILN_CONV_PRODUCT=0: never. */
int cg_conv_product(const cg_emitter *e, const sched_group *grp);
/* A convolution's geometry as an im2col product sees it (kg_gemm_conv):
 * x NHWC [imgs][h][w][c], y's oh x ow pixels, the filter kh x kw, its
 * strides, leading pads and dilations. */
typedef struct cg_im2col {
    int64_t imgs, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
} cg_im2col;
/* Node n's (a 2-D convolution's) geometry, auto_pad resolved (emit_conv.c). */
void cg_conv_im2col(const ir_node *n, cg_im2col *v);
/* An rOperator's tiles (cg_tiles; emitters call it once op->n_rtasks is
 * set): nothing when they do not account for every rTask or do not fit
 * kg_tiles.h's 32 bits. */
void cg_tiles_set(cg_op *op, const ir_value *v, int64_t len, int64_t div, int64_t tiles_m, int64_t tiles_n,
                  int64_t group, int64_t bm, int64_t m);
/* That op's rTasks read v only by rows of len elements: the rows their
 * tiles write (conv NULL) or the input rows of that convolution's output
 * rows (v its NHWC x). A value read twice, or also otherwise
 * (cg_rows_other), is read by no window. */
void cg_rows_read(cg_op *op, const ir_value *v, int64_t len, const cg_im2col *conv);
void cg_rows_other(cg_op *op, const ir_value *v);
/* The im2col tensor map of v's x (emit_gemm.c): its kind, dimensions,
 * strides, pixel box (the first tap's positions) and steps; the caller's
 * space, dtype, offset and box stay. */
void cg_im2col_map(const cg_im2col *v, rt_gtmap *m);
/* Node n's multiply-adds per image where it is a pointwise convolution
 * (1x1, stride 1, no padding, one group, channels a multiple of 8: the
 * geometry cg_conv_product asks for), else 0. */
int64_t cg_conv_pointwise_macs(const ir_node *n);
/* Which activations are stored NHWC (and their readers' weights reordered):
 * those a tensor-core convolution writes and only tensor-core convolutions
 * read (as x or as the residual), or a GlobalAveragePool (emit_conv.c);
 * KILN_CONV_NHWC=0: none. */
kiln_status cg_plan_conv_layouts(cg_emitter *e);
/* Whether v is stored NHWC (cg_plan_conv_layouts). */
static inline bool cg_is_nhwc(const cg_emitter *e, const ir_value *v) { return e->nhwc && v && e->nhwc[v->id]; }
kiln_status cg_emit_gemm(cg_emitter *e, const sched_group *grp, cg_op *op);
kiln_status cg_emit_pool(cg_emitter *e, const sched_group *grp, cg_op *op);
kiln_status cg_emit_rows(cg_emitter *e, const sched_group *grp, cg_op *op);
kiln_status cg_emit_attention(cg_emitter *e, const sched_group *grp, cg_op *op); /* SCHED_GROUP_ATTENTION */
kiln_status cg_emit_elementwise(cg_emitter *e, const sched_group *grp, cg_op *op);
kiln_status cg_emit_move(cg_emitter *e, const sched_group *grp, cg_op *op);

/* ---- the device templates, as text (build/gen/kg_sources.c from kernels/) ---------- */

typedef struct cg_source {
    const char *name; /* "kg.h", "kg_gemm.cuh", ... */
    const char *text;
} cg_source;
extern const cg_source cg_kernel_sources[];
extern const int cg_kernel_sources_count;

/* Asks for a template file in the generated source (once per model, in the
 * order first asked): cg_need(e, "kg_gemm.cuh"). */
kiln_status cg_need(cg_emitter *e, const char *file);
/* Appends the prelude of a program: kg.h, then every file asked for so far. */
kiln_status cg_prelude(const cg_emitter *e, base_str *out);

/* ---- tuning (tune.c; Bolt 3.2.2) ------------------------------------------------------
 *
 * A template with parameters (tiles, stages, split-K) offers n_cands
 * configurations of one group. cg_tune_choose returns the one to use:
 *   - the winner stored in the tuning database for (GPU, driver, kiln
 *     version, key), when there is one;
 *   - else, when tuning is on (target_options.tune) and a device is here,
 *     it emits each candidate with emit_cand into a scratch program (the
 *     group alone, its real offsets), compiles them with NVRTC, times each on
 *     the device with the model's real weights and shapes, stores the
 *     winner and returns it; progress lines go to the progress callback;
 *   - else -1: the caller uses its heuristic choice.
 * key: what identifies the work, independent of the group's position
 * ("gemm f16 m=128 n=768 k=768 bias gelu"): identical groups are tuned once.
 * heuristic: the candidate the caller would choose without tuning; its time
 * goes on the progress line next to the best one's. */
typedef kiln_status (*cg_emit_cand_fn)(cg_emitter *e, const sched_group *grp, int cand, cg_op *op);
int cg_tune_choose(cg_emitter *e, const sched_group *grp, const char *key, int n_cands, int heuristic,
                   cg_emit_cand_fn emit_cand);
/* Appends " cands=XXXXXXXX" to the key (of n bytes) for a candidate list
 * whose identity is the bytes at list: the database stores a winner by
 * its index in the list, so a list that changed since (a new table entry,
 * candidates ordered by a revised cost model) must not find it. */
void cg_tune_key_cands(char *key, size_t n, const void *list, size_t bytes);

/* The tuner for e (*out NULL: heuristics only): with target_options.tune,
 * one that measures what the database lacks; without, where a GPU is here
 * and its database file exists, one that only answers from it (so that a
 * compile after `kiln tune` takes what was measured). */
kiln_status cg_tuner_open(cg_emitter *e, const void *weights, cg_tuner **out, base_diag *d);
void cg_tuner_close(cg_tuner *t);
/* The mono configuration kiln tune chose for key (target_cuda_mono_key),
 * from t's database; false when there is none (or no t, no database). */
bool cg_tuner_mono_config(cg_tuner *t, const char *key, target_mono_config *out);

#endif
