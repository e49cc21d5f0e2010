/*
 * emit_rows.c: the cuda target's row-wise groups: Softmax and LogSoftmax
 * (any axis), LayerNormalization, GlobalAveragePool and the RMSNorm pattern
 * (pass.h PASS_PATTERN_RMS_NORM), as calls to kernels/kg_rows.cuh.
 *
 * The tensor is viewed as [rows, cols] with contiguous rows, the way the c
 * target's emit_rows.c views it (Softmax before opset 13 flattens at its
 * axis; from 13 on it works along one axis, and an axis other than the last
 * runs in column mode: one thread per column, neighbours reading
 * neighbours; so does GlobalAveragePool of an NHWC x, cg_plan_conv_layouts,
 * its columns the channels). A row of at most 1024 elements belongs to one warp, a longer
 * one to a whole block; each thread keeps its part of the row in registers
 * when it is short enough and reads it with 16-byte loads when the row
 * length allows (kg_rows.cuh).
 *
 * In a persistent kernel (mono schedules; membound.c, MonoNN 4.2.2 and
 * 4.3) a warp team whose rows are held takes several rows at once, their
 * loads in flight together: as many as make the rTasks about one wave of
 * the resident blocks, within the registers. With KILN_MONO_CACHE=1, x is
 * streamed when it is held (each element read once) and this group is its
 * only reader, and gamma and beta, which every row reads, are kept (kg.h's
 * cache hints).
 */
#include "target/cuda/cuda-impl.h"

#include <stdio.h>
#include <string.h>

/* Rows of at most this many elements go to one warp each. */
#define WARP_ROW_MAX 1024
/* Elements per thread a block team aims at (a 16-byte load or two). */
#define BLOCK_ROW_PER_THREAD 8
/* kg_rows.cuh's KG_ROW_HELD: chunks a thread keeps in registers. */
#define ROW_HELD 16
/* Floats a thread holds: with more than 512 threads a block gets at most 64
 * registers per thread, so it holds half as many. */
#define HELD_FLOATS 64
/* kg_rows.cuh's KG_ROW_MULTI_CHUNKS: chunks a thread holds over the rows
 * of its warp (kg_rows_held). */
#define ROW_MULTI_CHUNKS 64
/* kg_rows.cuh's KG_ROW_PRE_CHUNKS: the most chunks of a row whose g and b
 * are loaded ahead. */
#define ROW_PRE_CHUNKS 4
/* A persistent kernel's thread holds rows in the registers of its share
 * but ROWS_MONO_REGS_OTHER, each row costing its floats and
 * ROWS_MONO_REGS_ROW more (its sums, addresses, g and b): layer norm's
 * rows of 768 halves, 24 floats a thread, took 40 + 32 r registers for r
 * rows a warp (ptxas, sm_90a), and spilled from r = 8 at 255. */
#define ROWS_MONO_REGS_OTHER 40
#define ROWS_MONO_REGS_ROW 8

static bool is_fp(kiln_dtype t) { return t == KILN_F32 || t == KILN_F16 || t == KILN_BF16; }

/* Outputs after the first are absent or read by nobody (LayerNormalization's
 * Mean and InvStdDev, which the kernels do not write). */
static bool only_first_output(const ir_node *n)
{
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] && (n->out[j]->n_uses > 0 || n->out[j]->is_output)) return false;
    return true;
}

/* The [rows, cols] view of a row op, or for Softmax-13 on an inner axis the
 * [outer, cols, inner] split (*inner > 1). False when the axis is out of
 * range (the interpreter rejects those nodes anyway). */
static bool row_view(const ir_node *n, int64_t *rows, int64_t *cols, int64_t *inner)
{
    const ir_tensor *x = &n->in[0]->t;
    int r = x->rank;
    *inner = 1;
    if (n->op == KILN_OP_GLOBAL_AVERAGE_POOL) {
        if (r < 3) return false;
        *rows = x->dims[0] * x->dims[1];
        *cols = ir_dims_numel(r - 2, x->dims + 2);
        return true;
    }
    bool soft = n->op == KILN_OP_SOFTMAX || n->op == KILN_OP_LOG_SOFTMAX;
    int64_t axis = ir_node_attr_int(n, "axis", soft && n->opset < 13 ? 1 : -1);
    if (axis < 0) axis += r;
    if (soft && n->opset < 13) {
        /* coerced to 2-D at axis, which may be 0..r */
        if (axis < 0 || axis > r) return false;
        *rows = ir_dims_numel((int)axis, x->dims);
        *cols = ir_dims_numel(r - (int)axis, x->dims + axis);
        return true;
    }
    if (axis < 0 || axis >= r) return false;
    *rows = ir_dims_numel((int)axis, x->dims);
    if (soft) {
        *cols = x->dims[axis];
        *inner = ir_dims_numel(r - (int)axis - 1, x->dims + axis + 1);
    } else {
        *cols = ir_dims_numel(r - (int)axis, x->dims + axis);
    }
    return true;
}

/* LayerNormalization's scale or bias covers the normalised dims exactly:
 * aligned right with x, every dim before the axis 1, every later dim x's. */
static bool per_column(const ir_value *v, const ir_tensor *x, int axis)
{
    if (!v->shape_known || !is_fp(v->t.dtype) || v->t.rank > x->rank) return false;
    for (int i = 1; i <= v->t.rank; i++) {
        int xd = x->rank - i;
        int64_t want = xd >= axis ? x->dims[xd] : 1;
        if (v->t.dims[v->t.rank - i] != want) return false;
    }
    return ir_numel(&v->t) == ir_dims_numel(x->rank - axis, x->dims + axis);
}

bool cg_can_rows(const ir_node *n)
{
    const ir_value *x = n->in[0], *y = n->out[0];
    int64_t rows, cols, inner;
    if (!x || !y || !x->shape_known || !y->shape_known || !is_fp(x->t.dtype) || y->t.dtype != x->t.dtype) return false;
    if (!only_first_output(n) || x->t.rank < 1 || !row_view(n, &rows, &cols, &inner)) return false;
    if (cols > (1 << 30) || rows * inner > INT32_MAX) return false; /* int column indices in the kernel */
    if (cols < 1 && ir_numel(&y->t) > 0) return false; /* a mean or norm over nothing */
    if (n->op == KILN_OP_LAYER_NORMALIZATION) {
        int64_t axis = ir_node_attr_int(n, "axis", -1);
        if (axis < 0) axis += x->t.rank;
        const ir_value *g = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
        if (!per_column(g, &x->t, (int)axis) || (b && !per_column(b, &x->t, (int)axis))) return false;
    }
    return true;
}

/* ---- emission ------------------------------------------------------------------------- */

static const char *st_code(kiln_dtype t)
{
    return t == KILN_F16 ? "KG_ST_F16" : t == KILN_BF16 ? "KG_ST_BF16" : "KG_ST_F32";
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The row kernel's work: what kg_rows holds, and the launch shape. */
typedef struct rows_plan {
    const char *op;                /* KG_ROW_* */
    const ir_value *x, *y, *g, *b; /* g, b: NULL when absent */
    int64_t rows, cols;
    double eps;
    int vec, per, held, team_block, block;
    int64_t n_rtasks;
    int rows_a_warp;               /* kg_rows_held's r (mono; 1 otherwise) */
    const char *hx, *hg;           /* hints of x's loads and of g's and b's (KG_HINT_*) */
} rows_plan;

/* Largest chunk (8, 4, 2 or 1 elements) that divides the row and makes at
 * most 16-byte accesses on every tensor the row touches. */
static int chunk_elems(const cg_emitter *e, const rows_plan *rp)
{
    const ir_value *vals[4] = {rp->x, rp->y, rp->g, rp->b};
    int vec = 8;
    for (int i = 0; i < 4; i++) {
        if (!vals[i] || (i == 1 && strcmp(rp->op, "KG_ROW_MEAN") == 0)) continue;
        int lim = 16 / (int)ir_dtype_size(cg_store(e, vals[i]));
        if (lim < vec) vec = lim;
    }
    while (vec > 1 && rp->cols % vec) vec /= 2;
    return vec;
}

/* Team and block: a warp per row for rows up to WARP_ROW_MAX (as many warps
 * per block as keep two rTasks per multiprocessor), else a block per row
 * sized for BLOCK_ROW_PER_THREAD elements per thread. A wanted block size
 * (cg_emitter.want_block) replaces either choice: kg_rows.cuh takes its
 * team size and rows per rTask from blockDim.x. */
static void plan_launch(const cg_emitter *e, rows_plan *rp)
{
    int64_t chunks = rp->cols / rp->vec;
    if (rp->cols <= WARP_ROW_MAX) {
        int warps = 8;
        while (warps > 1 && cdiv(rp->rows, warps) < 2 * (int64_t)e->gpu.n_sms) warps /= 2;
        if (e->want_block) warps = e->want_block / 32;
        rp->team_block = 0;
        rp->block = 32 * warps;
        rp->per = (int)cdiv(chunks, 32);
        rp->n_rtasks = cdiv(rp->rows, warps);
    } else {
        int64_t threads = cdiv(cdiv(rp->cols, BLOCK_ROW_PER_THREAD), 32) * 32;
        if (threads < 128) threads = 128;
        if (threads > 1024) threads = 1024;
        if (e->want_block) threads = e->want_block;
        rp->team_block = 1;
        rp->block = (int)threads;
        rp->per = (int)cdiv(chunks, threads);
        rp->n_rtasks = rp->rows;
    }
    rp->held = rp->per <= ROW_HELD && rp->per * rp->vec <= (rp->block > 512 ? HELD_FLOATS / 2 : HELD_FLOATS);
    rp->rows_a_warp = 1;
}

/* In a persistent kernel: the rows a warp takes (kg_rows_held), as many as
 * make the rTasks about one wave of the resident blocks (cg_mono_factor),
 * their values held within the registers; and the loads' hints. */
static void plan_mono(const cg_mono_ctx *m, const sched_group *grp, rows_plan *rp)
{
    if (!rp->team_block && rp->held) {
        int per_row = rp->per * rp->vec + ROWS_MONO_REGS_ROW;
        /* a row of a few chunks has its g and b loaded ahead (kg_rows.cuh kg_row_gb): counted as 16
         * registers a chunk, what float32 ones take; 16-bit ones are held packed in 8, so the spare
         * registers keep a called body clear of spills (BERT b16's spilled at 384 threads) */
        int other = ROWS_MONO_REGS_OTHER + (rp->per <= ROW_PRE_CHUNKS ? 16 * rp->per : 0);
        int cap = KILN_MIN(ROW_MULTI_CHUNKS / rp->per, (m->regs - other) / per_row);
        rp->rows_a_warp = cg_mono_factor(m, rp->n_rtasks, cap);
        rp->n_rtasks = cdiv(rp->rows, (int64_t)(rp->block / 32) * rp->rows_a_warp);
    }
    bool stream = m->hints && rp->held && cg_mono_read_here_only(grp, rp->x);
    rp->hx = stream ? "KG_HINT_STREAM" : "KG_HINT_NONE";
    rp->hg = m->hints && (rp->g || rp->b) ? "KG_HINT_KEEP" : "KG_HINT_NONE";
}

static kiln_status emit_plan(cg_emitter *e, const sched_group *grp, rows_plan *rp, cg_op *op)
{
    base_str *s = &e->code;
    char px[160], py[160], pg[160], pb[160], eps[48];
    if (rp->cols > (1 << 30) || rp->rows > INT32_MAX)
        return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "group '%s': %lld rows of %lld elements are too many",
                             grp->name, (long long)rp->rows, (long long)rp->cols);
    rp->vec = chunk_elems(e, rp);
    plan_launch(e, rp);
    cg_mono_ctx mono;
    cg_mono_ctx_init(e, &mono);
    if (mono.resident > 0) plan_mono(&mono, grp, rp);
    KILN_TRY(cg_need(e, "kg_rows.cuh"));
    cg_comment(s, grp);
    base_str_printf(s, "/* %lld rows of %lld, %s; %d-element chunks, %d per thread%s", (long long)rp->rows,
                    (long long)rp->cols,
                    rp->team_block ? "a block of threads per row" : "a warp per row", rp->vec, rp->per,
                    rp->held ? ", held in registers" : ", read again for every pass");
    if (mono.ilp && !rp->team_block && rp->held)
        base_str_printf(s, "; ILP %d (rows a warp) for %d resident blocks", rp->rows_a_warp, mono.resident);
    base_str_cat(s, " */\n");
    base_str_printf(s, "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n    kg_rows p;\n", grp->id);
    base_str_printf(s, "    p.op = %s;\n", rp->op);
    base_str_printf(s, "    p.x = %s;\n", cg_ptr(e, rp->x, px, sizeof(px)));
    base_str_printf(s, "    p.y = %s;\n", cg_ptr(e, rp->y, py, sizeof(py)));
    base_str_printf(s, "    p.g = %s;\n", rp->g ? cg_ptr(e, rp->g, pg, sizeof(pg)) : "0");
    base_str_printf(s, "    p.b = %s;\n", rp->b ? cg_ptr(e, rp->b, pb, sizeof(pb)) : "0");
    base_str_printf(s, "    p.sx = %s;\n    p.sy = %s;\n    p.sg = %s;\n    p.sb = %s;\n", st_code(cg_store(e, rp->x)),
                    st_code(cg_store(e, rp->y)), st_code(rp->g ? cg_store(e, rp->g) : KILN_F32),
                    st_code(rp->b ? cg_store(e, rp->b) : KILN_F32));
    base_str_printf(s,
                    "    p.rows = %lldLL;\n    p.cols = %lld;\n    p.vec = %d;\n    p.per = %d;\n    p.held = %d;\n"
                    "    p.block = %d;\n",
                    (long long)rp->rows, (long long)rp->cols, rp->vec, rp->per, rp->held, rp->team_block);
    base_str_printf(s, "    p.eps = %s;\n", cg_float_lit(rp->eps, eps, sizeof(eps)));
    if (mono.ilp || mono.hints)
        base_str_printf(s, "    kg_rows_rtask_mono(&p, t, %d, %s, %s);\n}\n\n", rp->rows_a_warp, rp->hx, rp->hg);
    else
        base_str_cat(s, "    kg_rows_rtask(&p, t);\n}\n\n");
    *op = (cg_op){.n_rtasks = rp->n_rtasks, .block = rp->block, .smem_bytes = rp->team_block ? 32 * 4 : 0};
    if (mono.ilp && !rp->team_block && rp->held)
        snprintf(op->config, sizeof op->config, "ILP %d (rows a warp)", rp->rows_a_warp);
    return s->oom ? base_diag_add(e->d, KILN_ERR_OOM, "out of memory generating group '%s'", grp->name) : KILN_OK;
}

/* Softmax on an inner axis: one thread per (outer, inner) column; or
 * GlobalAveragePool of an NHWC x (mean over its pixels): a column's pixels
 * among `slices` threads (kg_cols_mean_rtask), or one where there are
 * fewer than 8. */
static kiln_status emit_cols(cg_emitter *e, const sched_group *grp, const ir_node *n, int64_t outer, int64_t len,
                             int64_t inner, cg_op *op)
{
    const bool mean = n->op == KILN_OP_GLOBAL_AVERAGE_POOL;
    base_str *s = &e->code;
    char px[160], py[160];
    /* the means: few columns (ResNet-50's 2048), each a chain of loads, so
     * a column's rows are split among `slices` threads (kg_cols_mean_rtask:
     * at least 4 rows each, a warp's worth of columns at least: 8 threads
     * in a block of 256) and the rTasks spread over more multiprocessors;
     * a mean of fewer than 8 rows takes a thread a column (outside mono in
     * blocks of 64) */
    const int block = e->want_block ? e->want_block : mean && len < 8 ? 64 : 256;
    int slices = 1;
    while (mean && 2 * slices * 32 <= block && len >= 8 * slices) slices *= 2;
    KILN_TRY(cg_need(e, "kg_rows.cuh"));
    cg_comment(s, grp);
    if (slices > 1)
        base_str_printf(s, "/* %lld x %lld columns of %lld, their means (x NHWC), %d threads a column */\n",
                        (long long)outer, (long long)inner, (long long)len, slices);
    else
        base_str_printf(s, "/* %lld x %lld columns of %lld, a thread per column%s */\n", (long long)outer,
                        (long long)inner, (long long)len, mean ? ", their means (x NHWC)" : "");
    base_str_printf(s, "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n    kg_cols p;\n", grp->id);
    base_str_printf(s, "    p.x = %s;\n", cg_ptr(e, n->in[0], px, sizeof(px)));
    base_str_printf(s, "    p.y = %s;\n", cg_ptr(e, n->out[0], py, sizeof(py)));
    base_str_printf(s, "    p.sx = %s;\n    p.sy = %s;\n", st_code(cg_store(e, n->in[0])),
                    st_code(cg_store(e, n->out[0])));
    base_str_printf(s,
                    "    p.outer = %lldLL;\n    p.n = %lldLL;\n    p.inner = %lldLL;\n    p.log = %d;\n"
                    "    p.mean = %d;\n",
                    (long long)outer, (long long)len, (long long)inner, n->op == KILN_OP_LOG_SOFTMAX, mean);
    if (slices > 1) base_str_printf(s, "    kg_cols_mean_rtask(&p, t, %d, %d);\n}\n\n", block / slices, slices);
    else base_str_cat(s, "    kg_cols_rtask(&p, t);\n}\n\n");
    *op = (cg_op){.n_rtasks = cdiv(outer * inner, block / slices), .block = block,
                  .smem_bytes = slices > 1 ? block * 4 : 0};
    if (mean && slices > 1) snprintf(op->config, sizeof op->config, "columns: x NHWC, %d threads a column", slices);
    else if (mean) snprintf(op->config, sizeof op->config, "columns: x NHWC");
    return s->oom ? base_diag_add(e->d, KILN_ERR_OOM, "out of memory generating group '%s'", grp->name) : KILN_OK;
}

/* Nothing to compute (an empty tensor): one idle rTask. */
static kiln_status emit_empty(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    cg_comment(&e->code, grp);
    base_str_printf(&e->code, "static __device__ void op_%d(const kiln_gctx *c, int t) { (void)c; (void)t; }\n\n",
                    grp->id);
    *op = (cg_op){.n_rtasks = 1, .block = e->want_block ? e->want_block : 32, .smem_bytes = 0};
    return KILN_OK;
}

kiln_status cg_emit_rows(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    const ir_node *n = grp->nodes[0];
    char lb[256];
    rows_plan rp = {0};
    if (grp->n_nodes > 1) {
        pass_rms_norm rn;
        KILN_TRY(pass_group_rms_norm(grp, &rn, e->d));
        const ir_tensor *x = &rn.x->t;
        rp = (rows_plan){.op = "KG_ROW_RMS_NORM", .x = rn.x, .y = rn.out, .g = rn.scale, .eps = rn.eps};
        rp.cols = x->dims[x->rank - 1];
        rp.rows = ir_numel(x) / (rp.cols ? rp.cols : 1);
        if (ir_numel(x) == 0) return emit_empty(e, grp, op);
        if (!cg_ld_fn(cg_store(e, rn.x)) || !cg_ld_fn(cg_store(e, rn.out)) ||
            (rn.scale && !cg_ld_fn(cg_store(e, rn.scale))))
            return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "group '%s' (RMSNorm): unsupported storage", grp->name);
        return emit_plan(e, grp, &rp, op);
    }
    int64_t rows, cols, inner;
    if (!cg_can_rows(n) || !row_view(n, &rows, &cols, &inner))
        return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: not a row op the cuda target compiles",
                             ir_node_label(n, lb, sizeof(lb)));
    if (rows * cols * inner == 0) return emit_empty(e, grp, op);
    if (n->op == KILN_OP_GLOBAL_AVERAGE_POOL && cg_is_nhwc(e, n->in[0])) {
        /* [N, H W, C] (cg_plan_conv_layouts: rank 4): the mean of each column */
        const ir_tensor *x = &n->in[0]->t;
        if (x->rank != 4)
            return base_diag_add(e->d, KILN_ERR_INTERNAL, "%s: an NHWC input of rank %d",
                                 ir_node_label(n, lb, sizeof(lb)), x->rank);
        return emit_cols(e, grp, n, x->dims[0], cols, x->dims[1], op);
    }
    if (inner > 1) return emit_cols(e, grp, n, rows, cols, inner, op);
    rp.x = n->in[0];
    rp.y = n->out[0];
    rp.rows = rows;
    rp.cols = cols;
    switch (n->op) {
    case KILN_OP_SOFTMAX: rp.op = "KG_ROW_SOFTMAX"; break;
    case KILN_OP_LOG_SOFTMAX: rp.op = "KG_ROW_LOG_SOFTMAX"; break;
    case KILN_OP_GLOBAL_AVERAGE_POOL: rp.op = "KG_ROW_MEAN"; break;
    default:
        rp.op = "KG_ROW_LAYER_NORM";
        rp.g = n->in[1];
        rp.b = n->n_in > 2 ? n->in[2] : NULL;
        rp.eps = ir_node_attr_float(n, "epsilon", 1e-5);
        break;
    }
    return emit_plan(e, grp, &rp, op);
}
