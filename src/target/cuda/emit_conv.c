/*
 * emit_conv.c: the cuda target's convolution and pooling groups (Bolt 3.2):
 * a Conv with its fused epilogue (bias, residual, activation) becomes a
 * call of a kg_conv.cuh template instantiated for the group's geometry and
 * storage dtypes, with the tile configuration the tuner or the heuristic
 * picks; MaxPool and AveragePool become kg_pool.
 *
 *   depthwise (group == C == K)           kg_conv_dw, one thread per output
 *   16-bit weights (--precision fp16/bf16) kg_conv_tc, implicit GEMM on tensor cores
 *   fp32 weights                          kg_conv_simt, implicit GEMM in FMAs
 *
 * Configurations. The implicit GEMMs offer the configurations of a fixed
 * table (tiles, k-slices, stages, and how many stages ahead the scalar
 * gathers run) that fit the shape and the GPU's shared memory, ranked by a
 * cost model; cg_tune_choose times the first MAX_CANDS when tuning, else
 * the first is used. The model: each SM runs its share of the tiles, a
 * few at a time; a tile is its k-tiles in sequence, each costing the
 * largest of its issue time (gathers at 14-16 instructions an element, MMAs
 * or FMAs), its operand traffic and the memory latency over the stages in
 * flight, plus a fixed latency and the epilogue. Its constants were first
 * fitted to every candidate's time on ResNet-50's convolutions at batch 1
 * on an H100, where it picked within ~15% of the best candidate in total;
 * kg_conv_tc's were fitted again to the tuner's times (tc_consts): small
 * tiles with several k-slices for the late layers (M = 49 pixels at 7x7,
 * so that the 132 SMs all stream weights), larger ones early. With a
 * wanted block size (cg_emitter.want_block) only the configurations of
 * that many threads are offered, when any fit.
 *
 * Layout (Bolt 3.2.3). Activations are NCHW and weights in the ONNX layout,
 * and the templates gather the im2col tile element by element, except for
 * pointwise convolutions, whose activations are a plain matrix and go by
 * cp.async (kg_conv.cuh), and for values cg_plan_conv_layouts stores NHWC:
 * one tensor-core convolution writes them and only tensor-core
 * convolutions read them (ResNet's 3x3 convolutions read what a 1x1 one
 * wrote), so the layout never leaves the conv templates. Their readers'
 * activations go by 16-byte cp.async too, 8 channels of one tap at a time,
 * and their weights are stored [Cout][KH][KW][Cin/group] so that K runs
 * (kh, kw, cin) on both sides.
 */
#include "target/cuda/cuda-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- geometry ------------------------------------------------------------------------ */

/* A sliding window seen as 2-D (a 1-D op has H = 1): sizes, strides,
 * dilations, leading and trailing pads with auto_pad resolved. */
typedef struct conv_geom {
    int64_t n, c, h, w;  /* input */
    int64_t k, oh, ow;   /* output channels and spatial size */
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t ph, pw;      /* leading pads */
    int64_t pe_h, pe_w;  /* trailing pads */
    int64_t groups;
} conv_geom;

/* kernel: the window's spatial sizes (1 or 2 of them, as x has). */
static void window_geometry(const ir_node *n, const int64_t *kernel, conv_geom *g)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int nsp = x->rank - 2;
    int64_t in[2], out[2], k[2], s[2], d[2], pb[2], pe[2];
    for (int i = 0; i < 2; i++) {
        int a = i - (2 - nsp); /* the attribute's index; -1: the H of a 1-D op */
        bool real = a >= 0;
        in[i] = real ? x->dims[2 + a] : 1;
        out[i] = real ? y->dims[2 + a] : 1;
        k[i] = real ? kernel[a] : 1;
        s[i] = real ? ir_node_attr_ints_at(n, "strides", a, 1) : 1;
        d[i] = real ? ir_node_attr_ints_at(n, "dilations", a, 1) : 1;
        pb[i] = real ? ir_node_attr_ints_at(n, "pads", a, 0) : 0;
        pe[i] = real ? ir_node_attr_ints_at(n, "pads", nsp + a, 0) : 0;
        const char *ap = ir_node_attr_str(n, "auto_pad", "NOTSET");
        if (real && strcmp(ap, "VALID") == 0) {
            pb[i] = pe[i] = 0;
        } else if (real && (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0)) {
            int64_t total = (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i];
            if (total < 0) total = 0;
            pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
            pe[i] = total - pb[i];
        }
    }
    *g = (conv_geom){.n = x->dims[0], .c = x->dims[1], .h = in[0], .w = in[1], .k = y->dims[1], .oh = out[0],
                     .ow = out[1], .kh = k[0], .kw = k[1], .sh = s[0], .sw = s[1], .dh = d[0], .dw = d[1],
                     .ph = pb[0], .pw = pb[1], .pe_h = pe[0], .pe_w = pe[1], .groups = 1};
}

static void conv_geometry(const ir_node *n, conv_geom *g)
{
    const ir_tensor *w = &n->in[1]->t;
    window_geometry(n, w->dims + 2, g);
    g->groups = ir_node_attr_int(n, "group", 1);
}

static void pool_geometry(const ir_node *n, conv_geom *g)
{
    int64_t kernel[2];
    int nsp = n->in[0]->t.rank - 2;
    for (int i = 0; i < nsp; i++) kernel[i] = ir_node_attr_ints_at(n, "kernel_shape", i, 1);
    window_geometry(n, kernel, g);
}

static bool is_depthwise(const conv_geom *g) { return g->groups > 1 && g->groups == g->c && g->groups == g->k; }

/* The group's epilogue, or false where it has none the emitters read
 * (its diagnostics dropped: the caller then leaves the group as it is). */
static bool epilogue_of(const sched_group *grp, pass_epilogue *ep)
{
    base_diag scratch;
    base_diag_init(&scratch);
    bool ok = pass_group_epilogue(grp, ep, &scratch) == KILN_OK;
    base_diag_free(&scratch);
    return ok;
}

/* ---- what compiles ---------------------------------------------------------------------- */

static bool is_float_value(const ir_value *v)
{
    return v && v->shape_known &&
           (v->t.dtype == KILN_F32 || v->t.dtype == KILN_F16 || v->t.dtype == KILN_BF16);
}

static bool only_first_output(const ir_node *n)
{
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j]) return false;
    return true;
}

/* Every index the templates compute fits in an int. */
static bool fits_int(const ir_value *v) { return ir_numel(&v->t) > 0 && ir_numel(&v->t) <= INT32_MAX; }

/* Strides and dilations >= 1, pads >= 0, each attribute as long as the
 * window has dims (or absent), and a window no larger than an int holds. */
static bool window_attrs_ok(const ir_node *n, int nsp)
{
    static const char *const names[] = {"strides", "dilations", "pads", "kernel_shape"};
    for (int a = 0; a < 4; a++) {
        const ir_attr *at = ir_node_attr(n, names[a]);
        if (!at) continue;
        int want = a == 2 ? 2 * nsp : nsp;
        if (at->kind != IR_ATTR_INTS || (at->n != 0 && at->n != want)) return false;
        for (int i = 0; i < at->n; i++)
            if (at->ints[i] < (a == 2 ? 0 : 1) || at->ints[i] > (1 << 20)) return false;
    }
    const ir_attr *ap = ir_node_attr(n, "auto_pad");
    return !ap || ap->kind == IR_ATTR_STRING;
}

bool cg_can_conv(const ir_node *n)
{
    if (n->op != KILN_OP_CONV || n->n_in < 2 || n->n_out < 1 || !only_first_output(n)) return false;
    const ir_value *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL, *y = n->out[0];
    if (!is_float_value(x) || !is_float_value(w) || !is_float_value(y)) return false;
    kiln_dtype dt = x->t.dtype;
    if (w->t.dtype != dt || y->t.dtype != dt || !w->is_const) return false;
    int rank = x->t.rank;
    if ((rank != 3 && rank != 4) || w->t.rank != rank || y->t.rank != rank) return false;
    if (!fits_int(x) || !fits_int(w) || !fits_int(y) || !window_attrs_ok(n, rank - 2)) return false;
    int64_t group = ir_node_attr_int(n, "group", 1), c = x->t.dims[1], k = w->t.dims[0];
    if (group < 1 || c % group != 0 || k % group != 0 || w->t.dims[1] * group != c || y->t.dims[1] != k) return false;
    if (b && (!b->is_const || !b->shape_known || b->t.dtype != dt || ir_numel(&b->t) != k)) return false;
    return true;
}

bool cg_can_pool(const ir_node *n)
{
    if ((n->op != KILN_OP_MAX_POOL && n->op != KILN_OP_AVERAGE_POOL) || n->n_out < 1 || !only_first_output(n))
        return false;
    const ir_value *x = n->in[0], *y = n->out[0];
    if (!is_float_value(x) || !is_float_value(y) || y->t.dtype != x->t.dtype) return false;
    int rank = x->t.rank;
    if ((rank != 3 && rank != 4) || y->t.rank != rank || !fits_int(x) || !fits_int(y)) return false;
    const ir_attr *ks = ir_node_attr(n, "kernel_shape");
    return ks && ks->kind == IR_ATTR_INTS && ks->n == rank - 2 && window_attrs_ok(n, rank - 2);
}

/* ---- configurations --------------------------------------------------------------------- */

/* kg_conv_tc's tile: block BM x BN x BK, warp WM x WN, KS k-slices, ST
 * stages; each is offered with 1 to 3 register sets of gathered elements in
 * flight (DA), as many as the registers allow. */
typedef struct tc_cfg {
    int bm, bn, bk, wm, wn, ks, st;
} tc_cfg;

static const tc_cfg tc_table[] = {
    {128, 128, 32, 64, 32, 1, 3}, {128, 64, 32, 64, 32, 1, 3},
    {128, 64, 32, 32, 32, 1, 4},  {64, 128, 32, 32, 64, 1, 3},  {64, 128, 32, 32, 32, 1, 4},
    {64, 64, 32, 32, 32, 1, 4},   {64, 64, 64, 32, 32, 2, 3},   {64, 32, 64, 32, 16, 2, 3},
    {32, 64, 64, 16, 32, 2, 3},   {32, 64, 64, 32, 32, 4, 3},   {32, 32, 64, 16, 16, 2, 4},
    {32, 32, 128, 32, 16, 4, 3},  {16, 64, 128, 16, 32, 4, 3},  {64, 16, 128, 32, 16, 4, 3},
    {16, 32, 128, 16, 16, 4, 4},  {32, 16, 128, 16, 16, 4, 4},  {16, 16, 128, 16, 16, 8, 4},
    {16, 16, 256, 16, 16, 8, 3},
};

#define TC_MAX_DA 3

/* Split-K across blocks (kg.h): the splits offered to tensor-core tiles
 * that do not fill the GPU. */
static const int split_cands[] = {2, 3, 4, 6, 8};

/* kg_conv_simt's tile: block BM x BN x BK, thread TM x TN, KS k-slices. */
typedef struct simt_cfg {
    int bm, bn, bk, tm, tn, ks;
} simt_cfg;

static const simt_cfg simt_table[] = {
    {128, 128, 8, 8, 8, 1}, {128, 64, 8, 8, 4, 1}, {64, 128, 8, 4, 8, 1},  {64, 64, 8, 4, 4, 1},
    {64, 64, 16, 8, 8, 2},  {64, 32, 16, 4, 4, 2}, {32, 64, 16, 4, 4, 2},  {32, 32, 16, 4, 4, 4},
    {16, 32, 32, 4, 4, 8},  {32, 16, 32, 4, 4, 8}, {16, 16, 32, 4, 4, 8},  {16, 16, 64, 4, 4, 8},
    {16, 32, 64, 4, 4, 8},  {32, 16, 64, 4, 4, 8},
};

#define KG_MAX_LD 8   /* KG_CONV_MAX_LD */
#define KG_MAX_ROWS 4 /* KG_CONV_MAX_ROWS */

static int tc_threads(const tc_cfg *c) { return 32 * (c->bm / c->wm) * (c->bn / c->wn) * c->ks; }

static int tc_smem(const tc_cfg *c)
{
    int pipe = c->st * (c->bm + c->bn) * c->bk * 2, ep = c->ks * c->bn * (c->bm + 4) * 4;
    return pipe > ep ? pipe : ep;
}

static int simt_threads(const simt_cfg *c) { return (c->bm / c->tm) * (c->bn / c->tn) * c->ks; }

static int simt_smem(const simt_cfg *c)
{
    int pipe = 2 * c->bk * (c->bm + c->bn) * 4, ep = c->ks * c->bn * (c->bm + 4) * 4;
    return pipe > ep ? pipe : ep;
}

/* The 16-byte chunks per thread of kg_conv_tc's loader for an operand of
 * `rows` rows of cpr chunks (as kg_conv_ld_map splits it); 0 when it does
 * not fit the register arrays. */
static int loader_chunks(int rows, int cpr, int threads)
{
    int tpr = threads >= rows ? threads / rows : 1, rpt = threads >= rows ? 1 : rows / threads;
    int cpt = cpr >= tpr ? cpr / tpr : 1;
    return rpt <= KG_MAX_ROWS && rpt * cpt <= KG_MAX_LD ? rpt * cpt : 0;
}

/* How a convolution's operands reach kg_conv_tc's shared memory. */
typedef struct tc_operands {
    bool a_async; /* pointwise: A by cp.async (kg_conv_pointwise_vec), no gather */
    bool b_async; /* weight rows of a multiple of 8 (K, or kpad's padding): B by cp.async */
    bool row_vec; /* gathered A read 8 elements a load (kg_conv_row_vec: patch embeddings) */
    bool tab;     /* gathered A through the im2col table (kg_conv_tab_build) */
} tc_operands;

/* The most entries of an im2col table (K padded to the widest stage, BK
 * 256): 8 KB of shared memory. */
#define TC_TAB_MAX 1024

/* The most register sets of gathered elements in flight a configuration
 * takes: those and the accumulators within about 200 registers, at most
 * TC_MAX_DA; 1 when nothing is gathered (the ring goes unused). */
static int tc_max_da(const tc_cfg *c, const tc_operands *o)
{
    int threads = tc_threads(c);
    int chunks = (o->a_async ? 0 : loader_chunks(c->bm, c->bk / 8, threads)) +
                 (o->b_async ? 0 : loader_chunks(c->bn, c->bk / 8, threads));
    if (chunks == 0) return 1;
    int room = 200 - c->wm * c->wn / 32 - 4 * (c->wm / 16) - 2 * (c->wn / 8) - 48;
    int da = room / (8 * chunks);
    return da < 1 ? 1 : da < TC_MAX_DA ? da : TC_MAX_DA;
}

static bool tc_valid(const tc_cfg *c, int tab_bytes, const cg_gpu *gpu)
{
    int threads = tc_threads(c);
    return threads <= 1024 && c->bk % (16 * c->ks) == 0 && c->wm / 16 <= 4 && c->wn / 8 <= 8 &&
           loader_chunks(c->bm, c->bk / 8, threads) && loader_chunks(c->bn, c->bk / 8, threads) && c->st >= 2 &&
           c->st <= 5 && tc_smem(c) + tab_bytes <= gpu->smem_per_block_optin;
}

/* Elements per thread and stage of kg_conv_simt's loader (A and B). */
static int simt_elems(const simt_cfg *c)
{
    int threads = simt_threads(c);
    int a_tpr = threads >= c->bm ? threads / c->bm : 1, a_rpt = threads >= c->bm ? 1 : c->bm / threads;
    int a_kpt = c->bk / a_tpr < 1 ? 1 : c->bk / a_tpr;
    return a_rpt * a_kpt + (c->bn * c->bk + threads - 1) / threads;
}

/* Register sets in flight: 24 registers of loaded elements at most. */
static int simt_max_da(const simt_cfg *c)
{
    int da = 24 / simt_elems(c);
    return da < 1 ? 1 : da < TC_MAX_DA ? da : TC_MAX_DA;
}

static bool simt_valid(const simt_cfg *c, const cg_gpu *gpu)
{
    int threads = simt_threads(c);
    int a_tpr = threads >= c->bm ? threads / c->bm : 1, a_rpt = threads >= c->bm ? 1 : c->bm / threads;
    int a_kpt = c->bk / a_tpr < 1 ? 1 : c->bk / a_tpr;
    return threads <= 1024 && threads >= c->bk && c->bk % c->ks == 0 && c->tm <= 8 && c->tn <= 8 &&
           a_rpt <= KG_MAX_ROWS && a_rpt * a_kpt <= KG_MAX_LD && (c->bn * c->bk + threads - 1) / threads <= KG_MAX_LD &&
           simt_smem(c) <= gpu->smem_per_block_optin;
}

/* The GEMM view of a convolution (per group). */
typedef struct gemm_dims {
    int64_t m, n, k, groups;
} gemm_dims;

static gemm_dims conv_gemm(const conv_geom *g)
{
    return (gemm_dims){g->n * g->oh * g->ow, g->k / g->groups, g->c / g->groups * g->kh * g->kw, g->groups};
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int64_t pow2_at_least(int64_t v)
{
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
}

/* A tile dim worth offering: no larger than the problem's rounded up. */
static bool tile_fits(int tile, int64_t dim) { return tile <= 16 || tile <= pow2_at_least(dim); }

/* The cost model's constants, per template (clock cycles, bytes). */
typedef struct cost_consts {
    double latency;        /* of an asynchronous copy stage, and a tile's fixed cost */
    double gather_latency; /* of a stage of gathered elements (loads into registers) */
    double row_latency;    /* the same for gathers of 8-element rows (kg_conv_row_vec) */
    double bytes_per_clk;  /* operand traffic an SM takes */
    double warp_issue;     /* instructions a warp issues per k-tile besides gathers */
    double epi;            /* epilogue cycles per output element a thread stores */
    double gather_instr;   /* instructions per gathered element (not 8-element rows) */
    double fixup;          /* split-K: latencies before the last split's epilogue */
    double fixup_elem;     /* split-K: cycles per element a thread sums, per split */
    double l2_bytes_per_clk; /* operand traffic the whole GPU's L2 serves (0: unbounded) */
} cost_consts;

/* kg_conv_tc in a kernel of its own (waves, kernels): fitted on an H100
 * (bench/conv_cost_fit.py) to the tuner's times of the first 12
 * candidates of each convolution of ResNet-50 and GoogLeNet at batch 1
 * (KILN_TUNE_LOG, waves; the mono:256x3 logs were in the fit too, ranked
 * as here): on the waves logs the picks sum to 732 us against 775 with
 * tc_consts_persistent and 701 for the best of each. Gathered
 * elements wait longer than cp.async stages, so more of them in flight
 * (DA) pay; split-K pays on late layers; small tiles of a large problem
 * pay for the L2 traffic. H100, one call, three rounds, against
 * tc_consts_persistent: waves ResNet-50 490 / 485 / 496 -> 475 / 476 /
 * 488 us, GoogLeNet 238 / 236 / 237 -> 240 / 238 / 240. Neither model
 * gathers 8-element rows; row_latency is set from ViT-B/16's patch
 * embedding (float32 x, M 196 x N 768 x K 768), whose rTasks take about
 * as long whatever their share of K (tuner, H100: 19.6 us for 12 k-tiles
 * 2 stages ahead, 18.3 3 ahead, 15.1 in 3 splits of 4): any value from
 * 2000 to 4000 ranks the 3 splits first, against 3 ahead without splits
 * at 1000 and 2 ahead at 575. */
static const cost_consts tc_consts = {.latency = 111.0, .gather_latency = 575.0, .row_latency = 3000.0,
                                      .bytes_per_clk = 27.4, .warp_issue = 194.0, .epi = 88.4, .gather_instr = 17.1,
                                      .fixup = 14.2, .fixup_elem = 26.0, .l2_bytes_per_clk = 2890.0};
/* kg_conv_tc in a persistent kernel: the fit before (to the same models'
 * tuner times when activations were NCHW, without the L2 term). There the
 * refit's larger tiles lost: mono GoogLeNet 297 / 293 / 293 -> 365 / 363 /
 * 369 us, ResNet-50 676 / 675 / 677 -> 705 / 639 / 715 (the tuner times
 * each convolution alone, not beside the other rOperators of its stage). */
static const cost_consts tc_consts_persistent = {.latency = 200.0, .gather_latency = 680.0, .row_latency = 680.0,
                                                 .bytes_per_clk = 40.0, .warp_issue = 110.0, .epi = 28.0,
                                                 .gather_instr = 16.0, .fixup = 7.0, .fixup_elem = 50.0,
                                                 .l2_bytes_per_clk = 0.0};
/* kg_conv_simt: the constants of the first fit (before tc_consts_persistent's), which both
 * templates had then. */
static const cost_consts simt_consts = {.latency = 300.0, .gather_latency = 300.0, .row_latency = 300.0,
                                        .bytes_per_clk = 64.0, .warp_issue = 40.0, .epi = 100.0, .gather_instr = 14.0,
                                        .fixup = 7.0, .fixup_elem = 50.0, .l2_bytes_per_clk = 0.0};

/* What the cost model needs of a configuration. */
typedef struct tile_shape {
    int bm, bn, bk, threads, smem, regs;
    int in_flight;       /* stages of operand loads in flight per block */
    int splits;          /* split-K across blocks */
    double flop_per_clk; /* the SM's multiply-add rate, in flops */
    double elem_bytes;
    double gather_instr; /* instructions per gathered element */
    bool row_vec;        /* gathers of 8-element rows (kg_conv_row_vec) */
    bool gathered;       /* the stages in flight are gathers (else cp.async copies) */
    const cost_consts *k;
} tile_shape;

/* Estimated clock cycles of a launch. Each SM runs its share of the tiles,
 * `res` at a time; a tile is its k-tiles in sequence, each taking the
 * largest of its issue time (gathers, MMAs or FMAs, sharing the SM's four
 * schedulers with the other resident tiles), its operand traffic and the
 * memory latency divided by the stages in flight; plus the prologue's and
 * the epilogue's latencies. */
static double launch_cost(const cg_gpu *gpu, const gemm_dims *d, const tile_shape *s, int per_sm_blocks)
{
    const double latency = s->k->latency, bytes_per_clk = s->k->bytes_per_clk;
    int64_t n_kt = ceil_div(ceil_div(d->k, s->bk), s->splits);
    int64_t tiles = ceil_div(d->m, s->bm) * ceil_div(d->n, s->bn) * d->groups * s->splits;
    int sms = gpu->n_sms > 0 ? gpu->n_sms : 1;
    int64_t smem_sm = (int64_t)gpu->smem_per_block_optin + 1024;
    int64_t bps = 2048 / s->threads;
    if (s->smem > 0 && smem_sm / s->smem < bps) bps = smem_sm / s->smem;
    if (65536 / (s->threads * s->regs) < bps) bps = 65536 / (s->threads * s->regs);
    if (bps < 1) bps = 1;
    /* a persistent kernel: exactly its configuration's blocks a multiprocessor, each
     * running an rTask at a time (gpu->smem_per_block_optin is then a block's share) */
    if (per_sm_blocks > 0) bps = per_sm_blocks;
    int64_t per_sm = ceil_div(tiles, sms), res = per_sm < bps ? per_sm : bps;
    double warps = s->threads / 32.0;
    double gather = (double)s->bm * s->bk / 32.0 * s->gather_instr;
    double math = 2.0 * s->bm * s->bn * s->bk / s->flop_per_clk;
    double issue = (double)res * (gather / 4.0 + s->k->warp_issue * warps / 4.0);
    double busy = (double)res * math > issue ? (double)res * math : issue;
    double traffic = (double)res * (s->bm + s->bn) * s->bk * s->elem_bytes / bytes_per_clk;
    double step = busy > traffic ? busy : traffic;
    const double wait = !s->gathered ? latency : s->row_vec ? s->k->row_latency : s->k->gather_latency;
    if (wait / s->in_flight > step) step = wait / s->in_flight;
    double tile = (double)n_kt * step + latency + (double)s->bm * s->bn / s->threads * s->k->epi;
    /* split-K: the partial tiles' round trip through L2, the fence and the
     * counter before the last split's epilogue (a guess, as in emit_gemm.c) */
    double fixup = s->splits > 1 ? s->k->fixup * latency + (double)s->bm * s->bn / s->threads * s->k->fixup_elem * s->splits
                                 : 0.0;
    double t = (double)ceil_div(per_sm, res) * tile + fixup;
    /* every tile reads its A and B panels through L2: small tiles of a
     * large problem read them many times over (GoogLeNet's 3 x 3
     * convolution of 56 x 56 x 64 into 192 channels: 27.7 us in 64 x 32
     * tiles, 18.4 in 128 x 64) */
    if (s->k->l2_bytes_per_clk > 0) {
        double l2 = (double)tiles * (s->bm + s->bn) * s->bk * (double)n_kt * s->elem_bytes;
        if (l2 / s->k->l2_bytes_per_clk + latency > t) t = l2 / s->k->l2_bytes_per_clk + latency;
    }
    return t;
}

/* The bytes of configuration c's im2col table (0: none): K padded to whole
 * stages, 8 bytes an entry. */
static int tc_tab_bytes(const tc_cfg *c, const tc_operands *o, const gemm_dims *d)
{
    return o->tab ? (int)(ceil_div(d->k, c->bk) * c->bk * 8) : 0;
}

static double tc_cost(const cg_emitter *e, const gemm_dims *d, const tc_cfg *c, const tc_operands *o, int da, int sk)
{
    const cost_consts *k = e->want_block ? &tc_consts_persistent : &tc_consts;
    tile_shape s = {.bm = c->bm, .bn = c->bn, .bk = c->bk, .threads = tc_threads(c),
                    .smem = tc_smem(c) + tc_tab_bytes(c, o, d), .splits = sk,
                    .regs = 48 + c->wm * c->wn / 32 + 8 * da * loader_chunks(c->bm, c->bk / 8, tc_threads(c)),
                    .in_flight = o->a_async ? c->st - 1 : da, .flop_per_clk = 1024.0, .elem_bytes = 2.0,
                    .gather_instr = o->a_async ? 1.0 : o->row_vec ? 3.0 : k->gather_instr, .gathered = !o->a_async,
                    .row_vec = !o->a_async && o->row_vec, .k = k};
    if (s.regs > 255) s.regs = 255;
    return launch_cost(&e->gpu, d, &s, e->want_block ? e->mono_per_sm : 0);
}

static double simt_cost(const cg_emitter *e, const gemm_dims *d, const simt_cfg *c, int da)
{
    tile_shape s = {.bm = c->bm, .bn = c->bn, .bk = c->bk, .threads = simt_threads(c), .smem = simt_smem(c),
                    .regs = 48 + c->tm * c->tn + c->tm + c->tn + da * simt_elems(c), .in_flight = da, .splits = 1,
                    .flop_per_clk = 256.0,
                    .elem_bytes = 4.0, .gather_instr = simt_consts.gather_instr, .gathered = true, .k = &simt_consts};
    return launch_cost(&e->gpu, d, &s, e->want_block ? e->mono_per_sm : 0);
}

/* The candidates for a group, best first by the cost model: (index into
 * tc_table or simt_table, DA, splits). The tuner times the first MAX_CANDS. */
#define MAX_CANDS 12

typedef struct cand_list {
    int idx[MAX_CANDS], da[MAX_CANDS], sk[MAX_CANDS];
    double cost[MAX_CANDS];
    int n;
} cand_list;

/* Inserts a candidate in cost order (ties keep table order), dropping the
 * costliest beyond MAX_CANDS. */
static void cand_insert(cand_list *cl, int idx, int da, int sk, double cost)
{
    int at = cl->n;
    while (at > 0 && cl->cost[at - 1] > cost) at--;
    if (at >= MAX_CANDS) return;
    int last = cl->n < MAX_CANDS ? cl->n : MAX_CANDS - 1;
    for (int i = last; i > at; i--) {
        cl->idx[i] = cl->idx[i - 1];
        cl->da[i] = cl->da[i - 1];
        cl->sk[i] = cl->sk[i - 1];
        cl->cost[i] = cl->cost[i - 1];
    }
    cl->idx[at] = idx;
    cl->da[at] = da;
    cl->sk[at] = sk;
    cl->cost[at] = cost;
    if (cl->n < MAX_CANDS) cl->n++;
}

/* The candidates of `threads` threads per block (0: any size) among the
 * tiles no larger than the problem (pass 0) or any tile that fits the GPU
 * (pass 1, for a GPU with little shared memory). */
static void list_pass(const cg_emitter *e, const conv_geom *g, bool tc, const tc_operands *o, int pass, int threads,
                      cand_list *out)
{
    gemm_dims d = conv_gemm(g);
    out->n = 0;
    int n_table = tc ? (int)(sizeof(tc_table) / sizeof(tc_table[0])) : (int)(sizeof(simt_table) / sizeof(simt_table[0]));
    for (int i = 0; i < n_table; i++) {
        int bm = tc ? tc_table[i].bm : simt_table[i].bm, bn = tc ? tc_table[i].bn : simt_table[i].bn;
        bool ok = tc ? tc_valid(&tc_table[i], tc_tab_bytes(&tc_table[i], o, &d), &e->gpu)
                     : simt_valid(&simt_table[i], &e->gpu);
        if (threads && (tc ? tc_threads(&tc_table[i]) : simt_threads(&simt_table[i])) != threads) continue;
        if (!ok || (pass == 0 && (!tile_fits(bm, d.m) || !tile_fits(bn, d.n)))) continue;
        int max_da = tc ? tc_max_da(&tc_table[i], o) : simt_max_da(&simt_table[i]);
        for (int da = 1; da <= max_da; da++)
            cand_insert(out, i, da, 1,
                        tc ? tc_cost(e, &d, &tc_table[i], o, da, 1) : simt_cost(e, &d, &simt_table[i], da));
        if (!tc) continue;
        /* split-K for tiles that leave multiprocessors idle: every split
         * two k-tiles or more, at most four rTasks per multiprocessor */
        const tc_cfg *c = &tc_table[i];
        int64_t tiles = ceil_div(d.m, bm) * ceil_div(d.n, bn) * d.groups, n_kt = ceil_div(d.k, c->bk);
        int sms = e->gpu.n_sms > 0 ? e->gpu.n_sms : 132;
        if (tiles >= sms || tiles > CG_SPLITK_SEMS) continue;
        for (int j = 0; j < (int)(sizeof(split_cands) / sizeof(split_cands[0])); j++) {
            int sk = split_cands[j];
            if (n_kt < 2 * sk || tiles * sk > 4 * sms || tiles * sk * bm * bn > CG_SPLITK_WS_FLOATS) continue;
            for (int da = 1; da <= max_da; da++) cand_insert(out, i, da, sk, tc_cost(e, &d, c, o, da, sk));
        }
    }
}

/* The candidates of a group: pass 0's, or pass 1's when pass 0 has none;
 * narrowed to the wanted block size (cg_emitter.want_block) when that
 * leaves any. */
static void list_candidates(const cg_emitter *e, const conv_geom *g, bool tc, const tc_operands *o, cand_list *out)
{
    int pass = 0;
    list_pass(e, g, tc, o, pass, 0, out);
    if (out->n == 0) list_pass(e, g, tc, o, ++pass, 0, out);
    if (e->want_block) {
        cand_list sized;
        list_pass(e, g, tc, o, pass, e->want_block, &sized);
        if (sized.n > 0) *out = sized;
    }
}

/* ---- emission ------------------------------------------------------------------------ */

static const char *storage_name(kiln_dtype t)
{
    switch (t) {
    case KILN_F32: return "KG_CONV_F32";
    case KILN_F16: return "KG_CONV_F16";
    case KILN_BF16: return "KG_CONV_BF16";
    default: return NULL;
    }
}

static const char *short_dtype(kiln_dtype t) { return t == KILN_F16 ? "f16" : t == KILN_BF16 ? "bf16" : "f32"; }

/* A storage dtype the templates handle, else an error naming the node. */
static kiln_status storage_of(cg_emitter *e, const ir_node *n, const ir_value *v, const char **name)
{
    *name = storage_name(cg_store(e, v));
    if (*name) return KILN_OK;
    char lb[256];
    return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: value '%s' is stored as a dtype the conv templates do not read",
                         ir_node_label(n, lb, sizeof(lb)), v->name ? v->name : "?");
}

typedef enum conv_kind { CONV_DW, CONV_TC, CONV_SIMT } conv_kind;

static conv_kind kind_of(const cg_emitter *e, const ir_node *n, const conv_geom *g)
{
    if (is_depthwise(g)) return CONV_DW;
    kiln_dtype wt = cg_store(e, n->in[1]);
    return wt == KILN_F16 || wt == KILN_BF16 ? CONV_TC : CONV_SIMT;
}

/* The length of a weight row as stored: K (C/group KH KW), or kpad's padding. */
static int64_t weight_ld(const cg_emitter *e, const ir_node *n, const conv_geom *g)
{
    const ir_value *w = n->in[1];
    return e->kpad && e->kpad[w->id] ? e->kpad[w->id] : g->c / g->groups * g->kh * g->kw;
}

/* As kg_conv_pointwise_vec, kg_conv_row_vec and kg_conv_tc decide at compile time. */
static tc_operands tc_operands_of(const cg_emitter *e, const ir_node *n, const conv_geom *g)
{
    gemm_dims d = conv_gemm(g);
    int64_t hw = g->h * g->w;
    bool pointwise = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
                     g->oh == g->h && g->ow == g->w && cg_store(e, n->in[0]) == cg_store(e, n->in[1]) && hw % 2 == 0;
    bool a_async = pointwise || cg_is_nhwc(e, n->in[0]);
    bool row_vec = !a_async && g->kw % 8 == 0 && g->dw == 1 && g->sw % 8 == 0 && g->pw % 8 == 0 && g->w % 8 == 0;
    /* the table's packing (kg_conv_tab_build): tap offsets in 15 bits, and
     * its row past K (0x7fff) past the image's last row from any pixel's
     * first: -PH, or -1 - (KH - 1) DH for the pixels past M (kg_conv_pixel) */
    bool tab = !a_async && !row_vec && ceil_div(d.k, 256) * 256 <= TC_TAB_MAX && /* any BK */
               !cg_env_is("KILN_CONV_TAB", "0") && (g->kh - 1) * g->dh < 0x7fff && (g->kw - 1) * g->dw < 0x7fff &&
               g->w < 0x7fff && g->h + g->ph <= 0x7fff && g->h + 1 + (g->kh - 1) * g->dh <= 0x7fff;
    return (tc_operands){.a_async = a_async, .b_async = weight_ld(e, n, g) % 8 == 0, .row_vec = row_vec, .tab = tab};
}

/* Appends the const kg_conv of the group: geometry, dtypes, epilogue, pointers. */
static kiln_status emit_conv_params(cg_emitter *e, const sched_group *grp, const conv_geom *g, base_str *s)
{
    const ir_node *n = grp->nodes[0];
    const ir_value *y = grp->nodes[grp->n_nodes - 1]->out[0];
    pass_epilogue ep;
    KILN_TRY(pass_group_epilogue(grp, &ep, e->d));
    char lb[256];
    if (ep.scale != 1.0f)
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "%s: a convolution group with a scale epilogue",
                             ir_node_label(n, lb, sizeof(lb)));
    const char *xt, *wt, *yt, *bt = "KG_CONV_F32", *rt = "KG_CONV_F32";
    KILN_TRY(storage_of(e, n, n->in[0], &xt));
    KILN_TRY(storage_of(e, n, n->in[1], &wt));
    KILN_TRY(storage_of(e, n, y, &yt));
    if (ep.bias) KILN_TRY(storage_of(e, n, ep.bias, &bt));
    if (ep.residual) KILN_TRY(storage_of(e, n, ep.residual, &rt));
    char px[160], pw[160], pb[160], pr[160], py[160], fa[48], fb[48];
    /* positional, in kg_conv's field order (NVRTC takes no designated initializers) */
    base_str_printf(s,
                    "    const kg_conv p = {%lld, %lld, %lld, %lld, /* x: n c h w */\n"
                    "                       %lld, %lld, %lld, /* y: k oh ow */\n"
                    "                       %lld, %lld, /* kernel */\n"
                    "                       %lld, %lld, %lld, %lld, %lld, %lld, /* strides, pads, dilations */\n"
                    "                       %lld, %lld, /* groups, weight row */\n"
                    "                       %s, %s, %s, /* layouts of x y res */\n"
                    "                       %s, %s, %s, %s, %s, /* storage of x w y bias res */\n"
                    "                       %s, %s, %s, /* activation, alpha, beta */\n"
                    "                       %s, /* x */\n"
                    "                       %s, /* w */\n"
                    "                       %s, /* bias */\n"
                    "                       %s, /* res */\n"
                    "                       %s}; /* y */\n",
                    (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w, (long long)g->k,
                    (long long)g->oh, (long long)g->ow, (long long)g->kh, (long long)g->kw, (long long)g->sh,
                    (long long)g->sw, (long long)g->ph, (long long)g->pw, (long long)g->dh, (long long)g->dw,
                    (long long)g->groups, (long long)weight_ld(e, n, g),
                    cg_is_nhwc(e, n->in[0]) ? "KG_CONV_NHWC" : "KG_CONV_NCHW",
                    cg_is_nhwc(e, y) ? "KG_CONV_NHWC" : "KG_CONV_NCHW",
                    cg_is_nhwc(e, ep.residual) ? "KG_CONV_NHWC" : "KG_CONV_NCHW", xt, wt, yt, bt, rt,
                    cg_act_name(ep.act),
                    cg_float_lit(ep.alpha, fa, sizeof(fa)), cg_float_lit(ep.beta, fb, sizeof(fb)),
                    cg_ptr(e, n->in[0], px, sizeof(px)), cg_ptr(e, n->in[1], pw, sizeof(pw)),
                    ep.bias ? cg_ptr(e, ep.bias, pb, sizeof(pb)) : "0",
                    ep.residual ? cg_ptr(e, ep.residual, pr, sizeof(pr)) : "0", cg_ptr(e, y, py, sizeof(py)));
    return KILN_OK;
}

/* Outputs per thread of the one-thread-per-output templates (kg_conv_dw,
 * kg_pool_rtask). In a kernel of its own: enough rTasks for 4 per SM where
 * the size allows, fewer, longer ones beyond. In a persistent kernel, whose
 * resident blocks run every stage: about one wave of them, at most 8
 * outputs a thread (cg_mono_factor; KILN_MONO_ILP=0, one). ResNet-50's
 * max pool at 256 x 1 took 784 rTasks, 6 waves (14 us in the mono
 * profile); now 6 outputs a thread, 131 rTasks (H100, fp16, one call,
 * outputs bit-identical: 256 x 1 with conv products 502 / 502 -> 498 / 497
 * us). MobileNetV2's depthwise convolutions and GoogLeNet's pools at mono's
 * default, 256 x 3 (H100, one call against the build before, three rounds,
 * outputs bit-identical): MobileNetV2 249 / 252 / 244 -> 228 / 226 / 230
 * us, GoogLeNet 271 / 271 / 269 -> 266 / 262 / 261. */
static int items_per_thread(const cg_emitter *e, int64_t total, int block)
{
    cg_mono_ctx m;
    cg_mono_ctx_init(e, &m);
    if (m.resident > 0) return cg_mono_factor(&m, ceil_div(total, block), 8);
    int sms = e->gpu.n_sms > 0 ? e->gpu.n_sms : 1;
    for (int items = 8; items > 1; items /= 2)
        if (ceil_div(total, (int64_t)block * items) >= 4 * sms) return items;
    return 1;
}

/* Whether the group's epilogue reads a residual stored NHWC. */
static bool residual_nhwc(const cg_emitter *e, const sched_group *grp)
{
    pass_epilogue ep;
    return grp->n_nodes > 1 && epilogue_of(grp, &ep) && cg_is_nhwc(e, ep.residual);
}

static void emit_head(cg_emitter *e, const sched_group *grp, const char *what)
{
    cg_comment(&e->code, grp);
    base_str_printf(&e->code, "/* %s */\n__device__ void op_%d(const kiln_gctx *c, int t)\n{\n", what, grp->id);
}

static kiln_status emit_conv_cand(cg_emitter *e, const sched_group *grp, int cand, cg_op *op)
{
    const ir_node *n = grp->nodes[0];
    conv_geom g;
    conv_geometry(n, &g);
    conv_kind kind = kind_of(e, n, &g);
    gemm_dims d = conv_gemm(&g);
    const bool xn = cg_is_nhwc(e, n->in[0]), yn = cg_is_nhwc(e, grp->nodes[grp->n_nodes - 1]->out[0]);
    const bool rn = residual_nhwc(e, grp);
    char what[256];
    base_str body;
    base_str_init(&body);
    kiln_status st = emit_conv_params(e, grp, &g, &body);
    if (st == KILN_OK && kind != CONV_TC && (xn || yn || rn)) {
        char lb[256];
        st = base_diag_add(e->d, KILN_ERR_INTERNAL, "%s: an NHWC value planned for a convolution not on tensor cores",
                           ir_node_label(n, lb, sizeof(lb)));
    }
    if (st == KILN_OK && kind == CONV_DW) {
        int64_t total = g.n * g.k * g.oh * g.ow;
        int block = e->want_block ? e->want_block : 256; /* kg_conv_dw strides by blockDim.x */
        int items = items_per_thread(e, total, block);
        snprintf(what, sizeof(what), "depthwise convolution, one thread per output, %d per thread", items);
        base_str_printf(&body, "    kg_conv_dw(&p, t, %d);\n", items);
        *op = (cg_op){.n_rtasks = ceil_div(total, (int64_t)block * items), .block = block, .smem_bytes = 0};
    } else if (st == KILN_OK) {
        cand_list cl;
        tc_operands ops = tc_operands_of(e, n, &g);
        list_candidates(e, &g, kind == CONV_TC, &ops, &cl);
        if (cl.n == 0 || cand < 0 || cand >= cl.n) {
            char lb[256];
            base_str_free(&body);
            return base_diag_add(e->d, KILN_ERR_INTERNAL, "%s: no convolution configuration %d fits this GPU",
                                 ir_node_label(n, lb, sizeof(lb)), cand);
        }
        int64_t tiles;
        if (kind == CONV_TC) {
            const tc_cfg *c = &tc_table[cl.idx[cand]];
            int da = cl.da[cand], sk = cl.sk[cand];
            char ahead[160];
            if (xn) snprintf(ahead, sizeof(ahead), "NHWC activations by cp.async");
            else if (ops.a_async) snprintf(ahead, sizeof(ahead), "pointwise: activations by cp.async");
            else snprintf(ahead, sizeof(ahead), "gathers%s %d stage%s ahead", ops.row_vec ? " of 8-element rows"
                                                                               : ops.tab ? " by an im2col table" : "",
                          da, da > 1 ? "s" : "");
            if (!ops.b_async) snprintf(ahead + strlen(ahead), sizeof(ahead) - strlen(ahead), ", weights gathered");
            else if (weight_ld(e, n, &g) != d.k)
                snprintf(ahead + strlen(ahead), sizeof(ahead) - strlen(ahead), ", weight rows padded to %lld",
                         (long long)weight_ld(e, n, &g));
            if (yn) snprintf(ahead + strlen(ahead), sizeof(ahead) - strlen(ahead), ", output NHWC");
            snprintf(what, sizeof(what),
                     "implicit GEMM on tensor cores: M %lld x N %lld x K %lld, tile %dx%dx%d, warp %dx%d, "
                     "%d k-slices, %d stages, %s, %d split%s",
                     (long long)d.m, (long long)d.n, (long long)d.k, c->bm, c->bn, c->bk, c->wm, c->wn, c->ks, c->st,
                     ahead, sk, sk > 1 ? "s of K across blocks" : "");
            int64_t out_tiles = ceil_div(d.m, c->bm) * ceil_div(d.n, c->bn) * d.groups;
            tiles = out_tiles * sk;
            *op = (cg_op){
                .n_rtasks = tiles, .block = tc_threads(c), .smem_bytes = tc_smem(c) + tc_tab_bytes(c, &ops, &d)};
            if (sk > 1) {
                kiln_status pst = cg_splitk_place(e, grp, tiles * c->bm * c->bn, out_tiles, op);
                if (pst != KILN_OK) {
                    base_str_free(&body);
                    return pst;
                }
            }
            char ws[64] = "0, 0";
            if (sk > 1)
                snprintf(ws, sizeof(ws), "kg_splitk_ws + %lld, kg_splitk_sem + %d", (long long)op->ws_at, op->sem_at);
            base_str_printf(&body, "    kg_conv_tc(&p, t, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %s);\n", c->bm,
                            c->bn, c->bk, c->wm, c->wn, c->ks, c->st, da, sk, ops.tab, ws);
            /* the rows its rTasks write and read, for a persistent kernel's
             * tile-row waits (kg_conv_tile's order: down the tile rows) */
            pass_epilogue ep;
            if (yn && epilogue_of(grp, &ep)) {
                cg_im2col v;
                cg_conv_im2col(n, &v);
                cg_tiles_set(op, grp->nodes[grp->n_nodes - 1]->out[0], g.k, sk, ceil_div(d.m, c->bm),
                             ceil_div(d.n, c->bn), ceil_div(d.m, c->bm), c->bm, d.m);
                if (xn) cg_rows_read(op, n->in[0], g.c, &v);
                else cg_rows_other(op, n->in[0]);
                if (rn) cg_rows_read(op, ep.residual, g.k, NULL);
                else cg_rows_other(op, ep.residual);
                cg_rows_other(op, ep.bias);
                for (int i = 1; i < n->n_in; i++) cg_rows_other(op, n->in[i]); /* the weights, the bias */
            }
            snprintf(op->config, sizeof(op->config),
                     "kg_conv_tc %dx%dx%d, warp %dx%d, %d k-slices, %d stages, %d splits%s%s", c->bm, c->bn, c->bk,
                     c->wm, c->wn, c->ks, c->st, sk,
                     xn && yn ? ", NHWC in and out" : xn ? ", NHWC in" : yn ? ", NHWC out" : "",
                     rn ? ", NHWC residual" : "");
        } else {
            const simt_cfg *c = &simt_table[cl.idx[cand]];
            int da = cl.da[cand];
            snprintf(what, sizeof(what),
                     "implicit GEMM in fp32: M %lld x N %lld x K %lld, tile %dx%dx%d, thread %dx%d, %d k-slices, "
                     "loads %d stage%s ahead",
                     (long long)d.m, (long long)d.n, (long long)d.k, c->bm, c->bn, c->bk, c->tm, c->tn, c->ks, da,
                     da > 1 ? "s" : "");
            base_str_printf(&body, "    kg_conv_simt(&p, t, %d, %d, %d, %d, %d, %d, %d);\n", c->bm, c->bn, c->bk, c->tm,
                            c->tn, c->ks, da);
            tiles = ceil_div(d.m, c->bm) * ceil_div(d.n, c->bn) * d.groups;
            *op = (cg_op){.n_rtasks = tiles, .block = simt_threads(c), .smem_bytes = simt_smem(c)};
            snprintf(op->config, sizeof(op->config), "kg_conv_simt %dx%dx%d, thread %dx%d, %d k-slices", c->bm, c->bn,
                     c->bk, c->tm, c->tn, c->ks);
        }
        if (tiles > INT32_MAX) {
            char lb[256];
            base_str_free(&body);
            return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: %lld tiles are more rTasks than a launch takes",
                                 ir_node_label(n, lb, sizeof(lb)), (long long)tiles);
        }
    }
    if (st == KILN_OK) {
        emit_head(e, grp, what);
        base_str_cat(&e->code, base_str_get(&body));
        base_str_cat(&e->code, "}\n\n");
        if (e->code.oom || body.oom) st = KILN_ERR_OOM;
    }
    base_str_free(&body);
    return st;
}

/* "conv tc f16 x=f32 y=f16 n=1 c=64 h=56 w=56 k=64 kernel=3x3 stride=1x1 pad=1x1 dil=1x1 group=1 +bias relu",
 * then " block=256" when candidates are narrowed to a block size */
static void tune_key(const cg_emitter *e, const sched_group *grp, const conv_geom *g, bool tc, char *buf, size_t n)
{
    const ir_node *nd = grp->nodes[0];
    const ir_value *y = grp->nodes[grp->n_nodes - 1]->out[0];
    pass_epilogue ep;
    if (!epilogue_of(grp, &ep)) memset(&ep, 0, sizeof(ep));
    static const char *const acts[PASS_ACT_COUNT] = {"", " relu", " clip", " leaky_relu", " sigmoid", " tanh",
                                                     " gelu", " gelu_tanh", " silu", " hard_swish",
                                                     " hard_sigmoid", " softplus"};
    char block[32] = "";
    if (e->want_block) snprintf(block, sizeof(block), " block=%d", e->want_block);
    /* how the operands arrive changes the code a configuration runs (the im2col table, padded weight rows) */
    tc_operands o = tc_operands_of(e, nd, g);
    char how[16];
    snprintf(how, sizeof(how), "%s%s", tc && o.tab ? " tab" : "",
             tc && weight_ld(e, nd, g) != g->c / g->groups * g->kh * g->kw ? " wpad" : "");
    snprintf(buf, n,
             "conv %s %s x=%s%s y=%s%s n=%lld c=%lld h=%lld w=%lld k=%lld kernel=%lldx%lld stride=%lldx%lld "
             "pad=%lldx%lld dil=%lldx%lld group=%lld%s%s%s%s%s",
             tc ? "tc" : "simt", short_dtype(cg_store(e, nd->in[1])), short_dtype(cg_store(e, nd->in[0])),
             cg_is_nhwc(e, nd->in[0]) ? ",nhwc" : "", short_dtype(cg_store(e, y)), cg_is_nhwc(e, y) ? ",nhwc" : "",
             (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w,
             (long long)g->k, (long long)g->kh, (long long)g->kw, (long long)g->sh, (long long)g->sw, (long long)g->ph,
             (long long)g->pw, (long long)g->dh, (long long)g->dw, (long long)g->groups, ep.bias ? " +bias" : "",
             !ep.residual ? "" : cg_is_nhwc(e, ep.residual) ? " +res,nhwc" : " +res",
             (unsigned)ep.act < PASS_ACT_COUNT ? acts[ep.act] : "", how, block);
}

/* Whether n (its geometry g) runs as a product of which one operand is the
 * im2col matrix of x, copied by the tensor memory accelerator's im2col
 * mode (kg_gemm_conv): on sm_90, x NHWC 16-bit, one group, C a multiple
 * of 64 (a k-tile is 64 channels of one tap), and a pixel box (the first
 * tap's corners) and strides the tensor map takes (rt_gtmap: corners
 * within -128..127, steps 1..8), with the filter's offsets (its last
 * tap's (kw - 1) dw, (kh - 1) dh) within the 0..255 that a 4-D im2col
 * copy takes. KILN_CONV_IM2COL=0: never. */
static bool im2col_ok(const cg_emitter *e, const ir_node *n, const conv_geom *g)
{
    const ir_value *x = n->in[0];
    if (e->gpu.sm_major != 9 || cg_env_is("KILN_CONV_IM2COL", "0") || x->t.rank != 4 || g->groups != 1 ||
        g->c % 64 || !cg_is_nhwc(e, x) || !e->ohwi || !e->ohwi[n->in[1]->id] ||
        (g->kw - 1) * g->dw > 255 || (g->kh - 1) * g->dh > 255)
        return false;
    /* x's map as gemm_tmaps will make it, checked as the runtime will */
    cg_im2col v;
    cg_conv_im2col(n, &v);
    rt_gtmap m = {.dtype = KILN_GPREC_FP16, .box0 = 64, .box1 = 64};
    cg_im2col_map(&v, &m);
    const char *why;
    int space;
    uint64_t off;
    return cg_tmap_space(e, x, &m.space, &m.offset) &&
           rt_gtmap_check(&m, m.space ? e->p->weight_bytes : e->p->arena_bytes, &why) &&
           cg_tmap_space(e, n->in[1], &space, &off) && off % 16 == 0;
}

/* cg_conv_product's form of grp, whatever the schedule. */
static int product_form(const cg_emitter *e, const sched_group *grp)
{
    const ir_node *n = grp->n_nodes ? grp->nodes[0] : NULL;
    if (!n || n->op != KILN_OP_CONV || !cg_can_conv(n) || n->in[0]->t.rank != 4) return 0;
    conv_geom g;
    conv_geometry(n, &g);
    const ir_value *x = n->in[0], *w = n->in[1], *y = grp->nodes[grp->n_nodes - 1]->out[0];
    const bool pointwise = cg_conv_pointwise_macs(n) > 0, im2col = !pointwise && im2col_ok(e, n, &g);
    if ((!pointwise && !im2col) || kind_of(e, n, &g) != CONV_TC || cg_store(e, x) != cg_store(e, w)) return 0;
    /* x NCHW: one image whose pixels, its contiguous dim, come in 16-byte rows */
    if (!cg_is_nhwc(e, x) && (g.n != 1 || (g.h * g.w) % 8)) return 0;
    pass_epilogue ep;
    bool ok = epilogue_of(grp, &ep) && ep.scale == 1.0f;
    /* what gemm_analyse then requires: a float bias, one per output channel; M within 2^31 */
    kiln_dtype bt = ep.bias ? cg_store(e, ep.bias) : KILN_F32;
    ok = ok && (bt == KILN_F32 || bt == KILN_F16 || bt == KILN_BF16) && g.n * g.h * g.w <= INT32_MAX &&
         (!ep.bias || ir_numel(&ep.bias->t) == g.k);
    if (!ok) return 0;
    /* y NHWC: [n h w, k] rows, as the product writes them; y NCHW of one
     * image: [k, h w], the product of the weights and x transposed. The
     * epilogue reads a residual as it writes y: in y's layout. */
    if (ep.residual && cg_is_nhwc(e, ep.residual) != cg_is_nhwc(e, y)) return 0;
    if (im2col) return cg_is_nhwc(e, y) ? 5 : g.n == 1 ? 6 : 0;
    if (cg_is_nhwc(e, y)) return cg_is_nhwc(e, x) ? 1 : 3;
    return g.n != 1 ? 0 : cg_is_nhwc(e, x) ? 2 : 4;
}

int cg_conv_product(const cg_emitter *e, const sched_group *grp)
{
    /* in a persistent kernel (mono) only at one block a multiprocessor,
     * whose whole shared memory lets the product take TMA tiles: with
     * three, the products (kg_gemm_tc tiles) ran no faster (ResNet-50 618
     * / 655 / 640 -> 641 / 640 / 640 us on an H100) and MobileNetV2 slower
     * (243 / 243 -> 311 / 305); at 256 x 1 ResNet-50 went 576 / 554 -> 502
     * / 502 (H100, one call, outputs within fp16 rounding) */
    if ((e->want_block && e->mono_per_sm != 1) || cg_env_is("KILN_CONV_PRODUCT", "0")) return 0;
    return product_form(e, grp);
}

void cg_conv_im2col(const ir_node *n, cg_im2col *v)
{
    conv_geom g;
    conv_geometry(n, &g);
    *v = (cg_im2col){.imgs = g.n, .c = g.c, .h = g.h, .w = g.w, .oh = g.oh, .ow = g.ow, .kh = g.kh, .kw = g.kw,
                     .sh = g.sh, .sw = g.sw, .ph = g.ph, .pw = g.pw, .dh = g.dh, .dw = g.dw};
}

int64_t cg_conv_pointwise_macs(const ir_node *n)
{
    if (n->op != KILN_OP_CONV || !cg_can_conv(n) || n->in[0]->t.rank != 4) return 0;
    conv_geom g;
    conv_geometry(n, &g);
    bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.pe_h == 0 &&
                     g.pe_w == 0 && g.groups == 1 && g.oh == g.h && g.ow == g.w && g.c % 8 == 0;
    return pointwise ? g.oh * g.ow * g.k * g.c : 0;
}

kiln_status cg_emit_conv(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    const ir_node *n = grp->nodes[0];
    if (!cg_can_conv(n)) {
        char lb[256];
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "%s: not a convolution the cuda target compiles",
                             ir_node_label(n, lb, sizeof(lb)));
    }
    if (cg_conv_product(e, grp)) return cg_emit_gemm(e, grp, op);
    KILN_TRY(cg_need(e, "kg_math.h"));
    KILN_TRY(cg_need(e, "kg_conv.cuh"));
    conv_geom g;
    conv_geometry(n, &g);
    conv_kind kind = kind_of(e, n, &g);
    if (kind == CONV_DW) return emit_conv_cand(e, grp, 0, op);
    cand_list cl;
    tc_operands ops = tc_operands_of(e, n, &g);
    list_candidates(e, &g, kind == CONV_TC, &ops, &cl);
    int cand = 0; /* the cost model's choice */
    if (cl.n > 1) {
        char key[512];
        tune_key(e, grp, &g, kind == CONV_TC, key, sizeof(key));
        int ids[3 * MAX_CANDS]; /* what each candidate is: cl's order follows the cost model */
        for (int i = 0; i < cl.n; i++) ids[3 * i] = cl.idx[i], ids[3 * i + 1] = cl.da[i], ids[3 * i + 2] = cl.sk[i];
        cg_tune_key_cands(key, sizeof(key), ids, (size_t)cl.n * 3 * sizeof(int));
        int tuned = cg_tune_choose(e, grp, key, cl.n, 0, emit_conv_cand);
        if (tuned >= 0 && tuned < cl.n) cand = tuned;
    }
    return emit_conv_cand(e, grp, cand, op);
}

kiln_status cg_emit_pool(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    const ir_node *n = grp->nodes[0];
    if (!cg_can_pool(n)) {
        char lb[256];
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "%s: not a pool the cuda target compiles",
                             ir_node_label(n, lb, sizeof(lb)));
    }
    KILN_TRY(cg_need(e, "kg_math.h"));
    KILN_TRY(cg_need(e, "kg_conv.cuh"));
    conv_geom g;
    pool_geometry(n, &g);
    const char *xt, *yt;
    KILN_TRY(storage_of(e, n, n->in[0], &xt));
    KILN_TRY(storage_of(e, n, n->out[0], &yt));
    bool is_max = n->op == KILN_OP_MAX_POOL;
    int64_t total = g.n * g.c * g.oh * g.ow;
    int block = e->want_block ? e->want_block : 256; /* kg_pool_rtask strides by blockDim.x */
    int items = items_per_thread(e, total, block);
    char what[128], px[160], py[160];
    snprintf(what, sizeof(what), "%s, one thread per output, %d per thread", is_max ? "max pool" : "average pool", items);
    emit_head(e, grp, what);
    base_str_printf(&e->code,
                    "    const kg_pool p = {%lld, %lld, %lld, %lld, /* x: n c h w */\n"
                    "                       %lld, %lld, /* y: oh ow */\n"
                    "                       %lld, %lld, /* kernel */\n"
                    "                       %lld, %lld, %lld, %lld, %lld, %lld, /* strides, pads, dilations */\n"
                    "                       %lld, %lld, /* trailing pads */\n"
                    "                       %d, %d, /* max, count_include_pad */\n"
                    "                       %s, %s, /* storage of x y */\n"
                    "                       %s, /* x */\n"
                    "                       %s}; /* y */\n"
                    "    kg_pool_rtask(&p, t, %d);\n}\n\n",
                    (long long)g.n, (long long)g.c, (long long)g.h, (long long)g.w, (long long)g.oh, (long long)g.ow,
                    (long long)g.kh, (long long)g.kw, (long long)g.sh, (long long)g.sw, (long long)g.ph,
                    (long long)g.pw, (long long)g.dh, (long long)g.dw, (long long)g.pe_h, (long long)g.pe_w,
                    is_max, !is_max && ir_node_attr_int(n, "count_include_pad", 0) != 0, xt, yt,
                    cg_ptr(e, n->in[0], px, sizeof(px)), cg_ptr(e, n->out[0], py, sizeof(py)), items);
    *op = (cg_op){.n_rtasks = ceil_div(total, (int64_t)block * items), .block = block, .smem_bytes = 0};
    return e->code.oom ? KILN_ERR_OOM : KILN_OK;
}

/* ---- layouts ---------------------------------------------------------------------------- */

/* A convolution kg_conv_tc computes, and when x may be NHWC: C/group a
 * multiple of 8 (a 16-byte chunk is 8 channels of one tap) and a weight
 * only it reads, stored in 16 bits among the weights, so it can be
 * reordered. */
static bool tc_conv(const cg_emitter *e, const ir_node *n, bool nhwc_x)
{
    if (!cg_can_conv(n) || n->in[0]->t.rank != 4) return false;
    conv_geom g;
    conv_geometry(n, &g);
    if (kind_of(e, n, &g) != CONV_TC) return false;
    if (!nhwc_x) return true;
    const ir_value *w = n->in[1];
    bool ok = (g.c / g.groups) % 8 == 0 && w->is_const && w->n_uses == 1 && w->graph == e->g &&
              e->p->place[w->id].loc == SCHED_LOC_WEIGHTS && n->in[0] != w;
    for (int i = 0; ok && i < e->g->n_outputs; i++) ok = e->g->outputs[i] != w;
    return ok;
}

/* How many inputs of the group's nodes read v, and whether the one use is
 * the x of its first node (a convolution) or its epilogue's residual of
 * the convolution's own shape (no view between them), which kg_conv's
 * epilogue then indexes as it does y. */
static int uses_in_group(const sched_group *grp, const ir_value *v, bool *as_x, bool *as_res)
{
    int uses = 0;
    for (int k = 0; k < grp->n_nodes; k++)
        for (int j = 0; j < grp->nodes[k]->n_in; j++)
            if (grp->nodes[k]->in[j] == v) uses++;
    *as_x = uses == 1 && grp->nodes[0]->in[0] == v;
    *as_res = false;
    /* a convolution's epilogue only (pass_group_epilogue reads a
     * contraction group's nodes: a host segment's may lack outputs) */
    if (uses != 1 || *as_x || grp->kind != SCHED_GROUP_CONV || grp->nodes[0]->op != KILN_OP_CONV) return uses;
    pass_epilogue ep;
    if (epilogue_of(grp, &ep) && ep.residual == v) {
        const ir_tensor *c = &grp->nodes[0]->out[0]->t;
        bool same = ir_same_shape(c, &v->t);
        for (int k = 1; same && k < grp->n_nodes; k++) same = grp->nodes[k]->out[0]->t.rank == c->rank;
        *as_res = same;
    }
    return uses;
}

/* Whether GlobalAveragePool may read x [N, C, H, W] stored NHWC: a
 * thread a column (channel) sums its H W pixels one after another
 * (kg_cols), so only short columns, and enough of them to spread over the
 * multiprocessors (ResNet-50: 2048 columns of 49); else the row kernel's
 * teams of an NCHW x are faster. */
static bool gap_columns_ok(const ir_value *x)
{
    const int64_t *d = x->t.dims;
    return x->t.rank == 4 && d[2] * d[3] <= 256 && d[0] * d[1] >= 512;
}

/* Activations stored NHWC, and their readers' weights OHWI. */
static void plan_nhwc(cg_emitter *e)
{
    const ir_graph *g = e->g;
    for (int s = 0; s < e->p->n_groups; s++) {
        const sched_group *grp = e->p->groups[s];
        if (grp->kind != SCHED_GROUP_CONV || !grp->n_nodes || grp->n_out != 1) continue;
        const ir_value *y = grp->nodes[grp->n_nodes - 1]->out[0];
        if (!y) continue;
        kiln_dtype st = cg_store(e, y);
        bool ok = grp->out[0] == y && y->graph == g && y->t.rank == 4 && tc_conv(e, grp->nodes[0], false) &&
                  e->p->place[y->id].loc == SCHED_LOC_ARENA && (st == KILN_F16 || st == KILN_BF16);
        for (int i = 0; ok && i < g->n_outputs; i++) ok = g->outputs[i] != y;
        /* every reader a tensor-core convolution group reading y once (as
         * its x, or as its residual), or a GlobalAveragePool of y
         * (emit_rows.c: the mean of each column of [N, H W, C]) */
        int uses = 0;
        for (int r = 0; ok && r < e->p->n_groups; r++) {
            const sched_group *h = e->p->groups[r];
            if (h == grp) continue;
            bool as_x, as_res;
            int u = uses_in_group(h, y, &as_x, &as_res);
            if (!u) continue;
            if (h->kind == SCHED_GROUP_ROWS && h->n_nodes == 1 && h->nodes[0]->op == KILN_OP_GLOBAL_AVERAGE_POOL &&
                u == 1 && as_x && gap_columns_ok(y)) {
                uses += u;
                continue;
            }
            ok = h->kind == SCHED_GROUP_CONV && h->nodes[0]->op == KILN_OP_CONV &&
                 ((as_x && tc_conv(e, h->nodes[0], true) && cg_store(e, h->nodes[0]->in[1]) == st) ||
                  (as_res && tc_conv(e, h->nodes[0], false)));
            uses += u;
        }
        if (!ok || uses == 0 || uses != y->n_uses) continue;
        e->nhwc[y->id] = true;
        for (int r = 0; r < e->p->n_groups; r++) {
            const sched_group *h = e->p->groups[r];
            if (h != grp && h->kind == SCHED_GROUP_CONV && h->nodes[0]->in[0] == y)
                e->ohwi[h->nodes[0]->in[1]->id] = true; /* its readers' weights */
        }
    }
}

/* Weight rows padded to a multiple of 8 elements (kpad), so that
 * kg_conv_tc's weight tiles come by cp.async instead of scalar gathers: a
 * convolution's weights whose K (C/group KH KW) is not a multiple of 8 (a
 * stem's 3 KH KW) when kg_conv_tc reads them, and only it (no product form
 * in any schedule), stored in 16 bits from 32, so that the padded rows fit
 * in the weight's planned bytes. ResNet-50's stem (K 147) gathered 64 x
 * 192 weights a 32 x 64 rTask besides its 32 x 192 activations: under ncu
 * (H100, waves) 19.3 us, 16.5 padded, 17.1 with the im2col table alone,
 * 14.8 with both. Only where K > 64, more than one stage of the smallest
 * BK: MobileNetV2's stem (K 27, one stage) went 5.8 -> 9.0 us padded (its
 * few weights gathered through L1 arrive sooner than by cp.async). Only
 * 2-D convolutions (tc_conv: x of rank 4). */
static void plan_kpad(cg_emitter *e)
{
    for (int s = 0; s < e->p->n_groups; s++) {
        const sched_group *grp = e->p->groups[s];
        if (grp->kind != SCHED_GROUP_CONV || !grp->n_nodes || grp->nodes[0]->op != KILN_OP_CONV) continue;
        const ir_node *n = grp->nodes[0];
        if (!tc_conv(e, n, false) || product_form(e, grp) != 0) continue;
        conv_geom g;
        conv_geometry(n, &g);
        const ir_value *w = n->in[1];
        int64_t kdim = g.c / g.groups * g.kh * g.kw, ld = (kdim + 7) / 8 * 8;
        kiln_dtype st = cg_store(e, w);
        bool ok = kdim % 8 != 0 && kdim > 64 && w->is_const && w->n_uses == 1 && w->graph == e->g && n->in[0] != w &&
                  e->p->place[w->id].loc == SCHED_LOC_WEIGHTS && e->p->place[w->id].offset % 16 == 0 &&
                  w->t.dtype == KILN_F32 && (st == KILN_F16 || st == KILN_BF16) && !e->ohwi[w->id] &&
                  g.k * ld * 2 <= ir_numel(&w->t) * 4;
        for (int i = 0; ok && i < e->g->n_outputs; i++) ok = e->g->outputs[i] != w;
        if (ok) e->kpad[w->id] = ld;
    }
}

kiln_status cg_plan_conv_layouts(cg_emitter *e)
{
    const ir_graph *g = e->g;
    e->nhwc = base_calloc((size_t)g->n_values + 1, sizeof(bool));
    e->ohwi = base_calloc((size_t)g->n_values + 1, sizeof(bool));
    e->kpad = base_calloc((size_t)g->n_values + 1, sizeof(int64_t));
    if (!e->nhwc || !e->ohwi || !e->kpad)
        return base_diag_add(e->d, KILN_ERR_OOM, "out of memory planning activation layouts");
    if (!cg_env_is("KILN_CONV_NHWC", "0")) plan_nhwc(e);
    if (!cg_env_is("KILN_CONV_KPAD", "0")) plan_kpad(e);
    return KILN_OK;
}
