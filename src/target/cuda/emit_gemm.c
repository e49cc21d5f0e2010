/*
 * emit_gemm.c: the cuda target's MatMul / Gemm groups, with their fused
 * epilogues (Bolt 3.2: scale, bias, residual, activation), as calls to the
 * kg_gemm_wgt / kg_gemm_wg / kg_gemm_tc / kg_gemm_simt / kg_gemm_gemv
 * templates (kernels/kg_gemm.cuh).
 *
 * A group becomes op_<id>(c, t): rTask t is one output tile of one batch.
 * Batch dims broadcast like numpy; when only A has batch dims they fold
 * into M (its rows are contiguous), as in the c target. The tensor-core
 * templates take A and B stored as the same 16-bit float with their
 * contiguous extents a multiple of 8 (16-byte rows): warpgroup MMA when
 * tuning for sm_90, mma.sync otherwise and for small tiles; the fp32 FMA
 * template takes everything else (float32 storage, mixed storage, odd
 * extents), except products of one row with A and B K-major, which the
 * matrix-vector template also offers to take.
 *
 * Configurations (Bolt 3.2.2): fixed tables of a few tens of tile shapes
 * per template, filtered by what fits the GPU and the problem, offered to
 * the tuner (cg_tune_choose); without a tuning result a cost model fitted
 * to H100 measurements (gemm_cost) picks one. With a wanted block size
 * (cg_emitter.want_block) only the configurations of that many threads
 * are offered, when there are any.
 */
#include "target/cuda/cuda-impl.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>


static bool is_fp(kiln_dtype t) { return t == KILN_F32 || t == KILN_F16 || t == KILN_BF16; }

static const char *dt_code(kiln_dtype t)
{
    return t == KILN_F16 ? "KG_DT_F16" : t == KILN_BF16 ? "KG_DT_BF16" : "KG_DT_F32";
}

/* ---- what compiles ------------------------------------------------------------------ */

bool cg_can_contract(const ir_node *n)
{
    if (n->op == KILN_OP_CONV) return cg_can_conv(n);
    if (n->op != KILN_OP_MAT_MUL && n->op != KILN_OP_GEMM) return false;
    if (n->n_in < 2 || n->n_out < 1) return false;
    const ir_value *a = n->in[0], *b = n->in[1], *y = n->out[0];
    if (!a || !b || !y || !a->shape_known || !b->shape_known || !y->shape_known) return false;
    kiln_dtype t = a->t.dtype;
    if (!is_fp(t) || b->t.dtype != t || y->t.dtype != t) return false;
    if (a->t.rank < 1 || b->t.rank < 1) return false;
    if (n->op == KILN_OP_GEMM) {
        if (a->t.rank != 2 || b->t.rank != 2) return false;
        if (n->n_in > 2 && n->in[2]) {
            const ir_value *cv = n->in[2];
            if (!cv->shape_known || cv->t.dtype != t || cv->t.rank > 2) return false;
        }
    }
    /* the templates index with 32-bit extents */
    for (int i = 0; i < a->t.rank; i++)
        if (a->t.dims[i] > INT32_MAX) return false;
    for (int i = 0; i < b->t.rank; i++)
        if (b->t.dims[i] > INT32_MAX) return false;
    for (int i = 0; i < y->t.rank; i++)
        if (y->t.dims[i] > INT32_MAX) return false;
    return true;
}

/* ---- the problem ---------------------------------------------------------------------- */

typedef struct gemm_problem {
    const ir_node *node;
    const ir_value *a, *b, *y;
    pass_epilogue ep;
    int64_t m, n, k;
    int la, lb;                      /* 0: K-major, 1: M-/N-major (KG_GEMM_*) */
    int64_t lda, ldb;
    int batch_rank;                  /* output batch dims, after folding */
    int64_t batch[IR_MAX_RANK];
    int64_t a_stride[IR_MAX_RANK], b_stride[IR_MAX_RANK]; /* elements per step of each batch dim (0: broadcast) */
    int64_t n_batch;
    bool folded;                     /* A's batch dims folded into m */
    bool b_kmajor;                   /* B a [k, n] weight stored as [n, k] (emit.c) */
    kiln_dtype sa, sb, sy, sbias, sres; /* storage dtypes */
    int64_t bias_rs, bias_cs;
    float alpha, beta;
    bool tc;                         /* the tensor-core template applies */
    /* kg_gemm_wgt applies (sm_90): A and B in the arena or the weights (spaces
     * and offsets for their tensor maps), one batch */
    bool tma;
    int space_a, space_b;
    uint64_t off_a, off_b;
    /* cg_conv_product's forms 5 and 6: the operand (1 A, 2 B; 0 none) that
     * is the im2col matrix of the convolution's NHWC x (kg_gemm_conv), and
     * its geometry */
    int im2col;
    cg_im2col cv;
} gemm_problem;

/* Whether kg_gemm_tc takes g: A and B stored as the same 16-bit float, and
 * rows of 16 bytes for cp.async (the contiguous extent of each operand and
 * its stride a multiple of 8 elements). */
static bool gemm_tc_ok(const gemm_problem *g)
{
    int64_t a_contig = g->la == 0 ? g->k : g->m, b_contig = g->lb == 0 ? g->k : g->n;
    return g->sa == g->sb && (g->sa == KILN_F16 || g->sa == KILN_BF16) && a_contig % 8 == 0 && b_contig % 8 == 0 &&
           g->lda % 8 == 0 && g->ldb % 8 == 0;
}

static kiln_status gemm_analyse(cg_emitter *e, const sched_group *grp, gemm_problem *g)
{
    memset(g, 0, sizeof(*g));
    const ir_node *n = grp->nodes[0];
    char lb[256];
    const int conv = n->op == KILN_OP_CONV ? cg_conv_product(e, grp) : 0;
    if (!conv && ((n->op != KILN_OP_MAT_MUL && n->op != KILN_OP_GEMM) || !cg_can_contract(n)))
        return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: not a MatMul / Gemm the cuda target compiles",
                             ir_node_label(n, lb, sizeof(lb)));
    KILN_TRY(pass_group_epilogue(grp, &g->ep, e->d));
    g->node = n;
    g->a = n->in[0];
    g->b = n->in[1];
    g->y = grp->nodes[grp->n_nodes - 1]->out[0];
    const ir_tensor *a = &g->a->t, *b = &g->b->t;
    g->alpha = g->ep.scale;
    g->beta = 1.0f;
    g->n_batch = 1;
    if (conv == 5 || conv == 6) {
        /* x NHWC, the weights OHWI (K-major) (cg_conv_product): y NHWC =
         * im2col(x) [n oh ow, kh kw c] w [k, kh kw c]^T (5), y NCHW of one
         * image = w im2col(x)^T (6); the im2col operand's "rows" are the
         * map's pixels, its ld nominal */
        g->im2col = conv == 5 ? 1 : 2;
        cg_conv_im2col(n, &g->cv);
        g->m = g->cv.imgs * g->cv.oh * g->cv.ow;
        g->n = b->dims[0];
        g->k = g->cv.c * g->cv.kh * g->cv.kw;
        g->la = g->lb = 0;
        g->lda = g->ldb = g->k;
        g->b_kmajor = conv == 5;
        if (conv == 6) {
            int64_t pixels = g->m;
            g->a = n->in[1];
            g->b = n->in[0];
            g->m = g->n;
            g->n = pixels;
        }
        if (g->ep.bias) { /* one per output channel: along y's rows or its columns */
            g->sbias = cg_store(e, g->ep.bias);
            g->bias_cs = conv == 5;
            g->bias_rs = conv == 6;
        }
    } else if (conv) {
        /* a 1x1 convolution (cg_conv_product): x stored NHWC [n h w, c]
         * (K-major) or NCHW [c, h w] (M- or N-major), the weights [k, c]
         * (OIHW and OHWI alike at 1x1, K-major) */
        const int64_t imgs = a->dims[0], c = a->dims[1], hw = a->dims[2] * a->dims[3], k = b->dims[0];
        const bool x_nchw = conv >= 3, y_nhwc = conv == 1 || conv == 3;
        g->k = c;
        if (y_nhwc) {
            g->m = imgs * hw; /* x w^T, or x^T w^T from NCHW x */
            g->n = k;
            g->la = x_nchw;
            g->lda = x_nchw ? hw : c;
            g->lb = 0;
            g->ldb = c;
            g->b_kmajor = true;
        } else {
            g->a = n->in[1]; /* w x^T, or w x from NCHW x */
            g->b = n->in[0];
            g->m = k;
            g->n = hw;
            g->la = 0;
            g->lda = c;
            g->lb = x_nchw;
            g->ldb = x_nchw ? hw : c;
        }
        if (g->ep.bias) { /* a float, one per output channel (cg_conv_product) */
            g->sbias = cg_store(e, g->ep.bias);
            g->bias_cs = y_nhwc;
            g->bias_rs = !y_nhwc;
        }
    } else if (n->op == KILN_OP_GEMM) {
        bool ta = ir_node_attr_int(n, "transA", 0) != 0, tb = ir_node_attr_int(n, "transB", 0) != 0;
        g->m = ta ? a->dims[1] : a->dims[0];
        g->k = ta ? a->dims[0] : a->dims[1];
        g->n = tb ? b->dims[0] : b->dims[1];
        g->la = ta ? 1 : 0;
        g->lda = a->dims[1];
        g->lb = tb ? 0 : 1;
        g->ldb = b->dims[1];
        g->alpha *= (float)ir_node_attr_float(n, "alpha", 1.0);
        if (g->ep.bias && n->n_in > 2 && g->ep.bias == n->in[2]) g->beta = (float)ir_node_attr_float(n, "beta", 1.0);
    } else {
        /* 1-D A is a row [1, k], 1-D B a column [k, 1] */
        g->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
        g->k = a->dims[a->rank - 1];
        g->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
        g->la = 0;
        g->lda = g->k;
        g->lb = 1;
        g->ldb = g->n;
        int ra = KILN_MAX(a->rank - 2, 0), rb = KILN_MAX(b->rank - 2, 0);
        int br = KILN_MAX(ra, rb);
        int64_t sa = g->m * g->k, sb = g->k * g->n;
        int64_t bat[IR_MAX_RANK], as[IR_MAX_RANK], bs[IR_MAX_RANK];
        for (int i = br - 1; i >= 0; i--) {
            int ia = i - (br - ra), ib = i - (br - rb);
            int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
            bat[i] = da == 1 ? db : da;
            as[i] = da == 1 ? 0 : sa;
            bs[i] = db == 1 ? 0 : sb;
            sa *= da;
            sb *= db;
        }
        int64_t a_batch = 1, b_batch = 1, out_batch = 1;
        for (int i = 0; i < br; i++) {
            out_batch *= bat[i];
            if (as[i]) a_batch *= bat[i];
            if (bs[i]) b_batch *= bat[i];
        }
        if (b_batch == 1 && a_batch == out_batch && out_batch * g->m <= INT32_MAX) {
            g->m *= out_batch; /* B is shared: A's rows of every batch are one tall matrix */
            g->folded = out_batch > 1;
        } else {
            /* keep the batch dims that are not 1 */
            for (int i = 0; i < br; i++) {
                if (bat[i] == 1) continue;
                g->batch[g->batch_rank] = bat[i];
                g->a_stride[g->batch_rank] = as[i];
                g->b_stride[g->batch_rank] = bs[i];
                g->batch_rank++;
            }
            g->n_batch = out_batch;
        }
    }
    if (!conv && e->kmajor && e->kmajor[g->b->id]) {
        /* a [k, n] weight that emit.c stores as [n, k] */
        g->lb = 0;
        g->ldb = g->k;
        g->b_kmajor = true;
    }
    if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX || g->n_batch > INT32_MAX)
        return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: extents beyond 2^31 are not supported",
                             ir_node_label(n, lb, sizeof(lb)));
    g->sa = cg_store(e, g->a);
    g->sb = cg_store(e, g->b);
    g->sy = cg_store(e, g->y);
    if (!is_fp(g->sa) || !is_fp(g->sb) || !is_fp(g->sy))
        return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: operands stored as %s x %s -> %s",
                             ir_node_label(n, lb, sizeof(lb)), kiln_dtype_name(g->sa), kiln_dtype_name(g->sb),
                             kiln_dtype_name(g->sy));
    if (g->ep.bias && !conv) {
        /* the bias right-aligned to the output [..., m, n]: its last dim runs
         * along n, the one before along m; dims of 1 broadcast */
        const ir_tensor *t = &g->ep.bias->t;
        g->sbias = cg_store(e, g->ep.bias);
        g->bias_cs = t->rank >= 1 && t->dims[t->rank - 1] != 1 ? 1 : 0;
        g->bias_rs = t->rank >= 2 && t->dims[t->rank - 2] != 1 ? t->dims[t->rank - 1] : 0;
        bool ok = is_fp(g->sbias) && (!g->bias_cs || t->dims[t->rank - 1] == g->n) && (!g->bias_rs || !g->folded);
        for (int i = 0; ok && i < t->rank - 2; i++) ok = t->dims[i] == 1;
        if (!ok) {
            char ts[96];
            return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: bias %s does not broadcast along rows and columns",
                                 ir_node_label(n, lb, sizeof(lb)), ir_tensor_type_str(t, ts, sizeof(ts)));
        }
    }
    if (g->ep.residual) {
        g->sres = cg_store(e, g->ep.residual);
        if (!is_fp(g->sres) || ir_numel(&g->ep.residual->t) != ir_numel(&g->y->t))
            return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "%s: residual of another shape or dtype",
                                 ir_node_label(n, lb, sizeof(lb)));
    }
    g->tc = gemm_tc_ok(g);
    g->tma = g->tc && g->n_batch == 1 && g->m > 0 && g->n > 0 && g->k > 0 &&
             cg_tmap_space(e, g->a, &g->space_a, &g->off_a) && cg_tmap_space(e, g->b, &g->space_b, &g->off_b) &&
             g->off_a % 16 == 0 && g->off_b % 16 == 0;
    if (g->im2col && (!g->tc || !g->tma)) /* what cg_conv_product checked */
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "%s: a convolution planned as an im2col product is not one",
                             ir_node_label(n, lb, sizeof(lb)));
    return KILN_OK;
}

/* ---- configurations ------------------------------------------------------------------- */

typedef enum gemm_kind { GEMM_TC, GEMM_WG, GEMM_SIMT, GEMM_WGT, GEMM_GEMV } gemm_kind;

typedef struct gemm_cfg {
    gemm_kind kind;  /* kg_gemm_tc, kg_gemm_wg, kg_gemm_simt, kg_gemm_wgt, kg_gemm_gemv */
    int bm, bn, bk;  /* block tile; bk 8 for simt; gemv: 1 row, wm x wn columns, 256 */
    int wm, wn;      /* warp tile (tc); gemv: warps, columns a warp */
    int ks;          /* warp slices along k (tc) */
    int stages;      /* copy stages (tc, wg) */
    int splits;      /* split-K across blocks (tc, wgt; 1 in the tables) */
    int cn;          /* wgt: 0 kg_gemm_wgt, else kg_gemm_wgt_ws (a producer warp) in clusters of cn blocks */
    int cs;          /* wgt, splits > 1: the splits are one cluster's blocks and sum in its shared memory
                      * (kg_gemm_wgt_csum) instead of through the split-K workspace (an int: the
                      * tuner's key hashes the candidates' bytes, so no padding) */
} gemm_cfg;

/* The registers a thread of c's template needs and ptxas cannot spill:
 * the warpgroup MMAs keep their accumulators (bn / 2 floats a thread) in
 * registers (a kg_gemm_wg 64 x 128 tile in a persistent kernel of 3
 * blocks of 256 threads a multiprocessor, 80 registers: "Insufficient
 * registers"); 0 for the other templates, which spill. */
static int acc_regs(const gemm_cfg *c) { return c->kind == GEMM_WG || c->kind == GEMM_WGT ? c->bn / 2 + 32 : 0; }

/* In how many parts kg_gemm_wgt_store stages a TMA tile's fp32
 * accumulators in its stages' shared memory (KG_GEMM_WGT_PARTS): 1, 2 (in
 * column halves; not through a cluster's split-K sum, kg_gemm_wgt_csum,
 * which stages the whole tile), or 3 where even a half does not fit (not
 * offered). 1 for the other templates. */
static int stage_parts(const gemm_cfg *c)
{
    if (c->kind != GEMM_WGT) return 1;
    const int room = c->stages * (c->bm + c->bn) * 128;
    if (c->bm * (c->bn + 8) * 4 <= room) return 1;
    return c->bn % 16 == 0 && c->bm * (c->bn / 2 + 8) * 4 <= room ? 2 : 3;
}

/* The splits offered for products with fewer tiles than multiprocessors. */
static const int split_cands[] = {2, 3, 4, 6, 8};

/* Tensor-core tiles: large ones for large problems (64 x 64 warp tiles:
 * the most mma per ldmatrix), small and k-sliced ones so that small
 * problems still spread over every multiprocessor. */
static const gemm_cfg tc_table[] = {
    {GEMM_TC, 128, 256, 32, 64, 64, 1, 3, 1, 0, 0}, {GEMM_TC, 128, 256, 32, 64, 64, 1, 4, 1, 0, 0},
    {GEMM_TC, 256, 128, 32, 64, 64, 1, 3, 1, 0, 0}, {GEMM_TC, 256, 128, 32, 64, 64, 1, 4, 1, 0, 0},
    {GEMM_TC, 128, 256, 64, 64, 64, 1, 3, 1, 0, 0}, {GEMM_TC, 256, 128, 64, 64, 64, 1, 3, 1, 0, 0},
    {GEMM_TC, 128, 128, 32, 64, 64, 1, 4, 1, 0, 0}, {GEMM_TC, 128, 128, 32, 64, 64, 1, 5, 1, 0, 0},
    {GEMM_TC, 128, 128, 64, 64, 64, 1, 3, 1, 0, 0}, {GEMM_TC, 128, 128, 64, 64, 64, 1, 4, 1, 0, 0},
    {GEMM_TC, 128, 128, 32, 64, 32, 1, 4, 1, 0, 0}, {GEMM_TC, 128, 128, 32, 32, 64, 1, 4, 1, 0, 0},
    {GEMM_TC, 128, 64, 32, 64, 32, 1, 4, 1, 0, 0}, {GEMM_TC, 128, 64, 64, 64, 32, 1, 3, 1, 0, 0},
    {GEMM_TC, 64, 128, 32, 32, 64, 1, 4, 1, 0, 0}, {GEMM_TC, 64, 128, 64, 32, 64, 1, 3, 1, 0, 0},
    {GEMM_TC, 64, 64, 32, 32, 32, 1, 4, 1, 0, 0}, {GEMM_TC, 64, 64, 64, 32, 32, 1, 3, 1, 0, 0},
    {GEMM_TC, 64, 64, 64, 32, 32, 2, 3, 1, 0, 0}, {GEMM_TC, 64, 64, 64, 32, 32, 2, 4, 1, 0, 0},
    {GEMM_TC, 64, 32, 64, 32, 32, 2, 3, 1, 0, 0}, {GEMM_TC, 32, 64, 64, 32, 32, 2, 3, 1, 0, 0},
    {GEMM_TC, 32, 64, 64, 32, 32, 4, 3, 1, 0, 0}, {GEMM_TC, 32, 32, 64, 32, 32, 4, 3, 1, 0, 0},
    {GEMM_TC, 32, 32, 128, 32, 32, 4, 3, 1, 0, 0}, {GEMM_TC, 64, 32, 64, 32, 32, 4, 3, 1, 0, 0},
    {GEMM_TC, 32, 64, 64, 16, 32, 2, 3, 1, 0, 0}, {GEMM_TC, 64, 64, 128, 32, 32, 4, 2, 1, 0, 0},
};

/* Warpgroup-MMA tiles (sm_90): m 64 per warpgroup, n up to 256 per wgmma.
 * Up to 113 KB two blocks share a multiprocessor, which hides one's
 * prologue and epilogue behind the other's main loop (short k). */
static const gemm_cfg wg_table[] = {
    {GEMM_WG, 128, 256, 64, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WG, 128, 256, 32, 0, 0, 1, 6, 1, 0, 0},
    {GEMM_WG, 128, 256, 32, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WG, 256, 128, 64, 0, 0, 1, 4, 1, 0, 0},
    {GEMM_WG, 128, 192, 64, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WG, 128, 192, 32, 0, 0, 1, 4, 1, 0, 0},
    {GEMM_WG, 128, 128, 64, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WG, 128, 128, 64, 0, 0, 1, 5, 1, 0, 0},
    {GEMM_WG, 128, 128, 32, 0, 0, 1, 6, 1, 0, 0}, {GEMM_WG, 128, 128, 64, 0, 0, 1, 3, 1, 0, 0},
    {GEMM_WG, 128, 64, 64, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WG, 64, 256, 64, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WG, 64, 128, 64, 0, 0, 1, 4, 1, 0, 0},
    {GEMM_WG, 64, 128, 32, 0, 0, 1, 6, 1, 0, 0}, {GEMM_WG, 64, 64, 64, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WG, 64, 64, 64, 0, 0, 1, 6, 1, 0, 0},
};

/* Tiles only the TMA template takes. Deeper pipelines (no thread issues
 * the copies, so their number costs nothing): a short M's whole K in
 * flight at once (BERT at batch 1: 12 k-tiles of 64). Widths that are not
 * multiples of 64 (a K-major B only): they cut BERT's 768, 2304 and 3072
 * columns into about one or two tiles per multiprocessor (128 x 96 at
 * 2048 x 768, 128 x 144 at 2048 x 2304, 64 x 48 at 128 x 3072), where
 * 128 x 128 tiles leave a quarter of them idle. Three warpgroups, 192 rows:
 * 11 x 12 tiles of 192 x 192 are one wave at 2048 x 2304, 11 x 24 of
 * 192 x 128 two at 2048 x 3072 (cuBLAS's picks on an H200), 11 x 12 of
 * 192 x 256 one (three stages, the epilogue staged in column halves:
 * stage_parts; BERT b16's FFN1 so, the waves schedule ran 1.025-1.030
 * ms on an H200 against 1.050-1.059 in 16 x 16 tiles of 128 x 192, six
 * runs each, outputs bit-identical). */
static const gemm_cfg wgt_deep_table[] = {
    {GEMM_WGT, 64, 64, 64, 0, 0, 1, 8, 1, 0, 0},  {GEMM_WGT, 64, 64, 64, 0, 0, 1, 12, 1, 0, 0},
    {GEMM_WGT, 64, 128, 64, 0, 0, 1, 8, 1, 0, 0}, {GEMM_WGT, 128, 64, 64, 0, 0, 1, 8, 1, 0, 0},
    {GEMM_WGT, 128, 96, 64, 0, 0, 1, 3, 1, 0, 0}, {GEMM_WGT, 128, 96, 64, 0, 0, 1, 4, 1, 0, 0},
    {GEMM_WGT, 128, 96, 64, 0, 0, 1, 6, 1, 0, 0}, {GEMM_WGT, 128, 96, 64, 0, 0, 1, 8, 1, 0, 0},
    {GEMM_WGT, 128, 144, 64, 0, 0, 1, 3, 1, 0, 0}, {GEMM_WGT, 128, 144, 64, 0, 0, 1, 4, 1, 0, 0},
    {GEMM_WGT, 64, 96, 64, 0, 0, 1, 8, 1, 0, 0},  {GEMM_WGT, 192, 128, 64, 0, 0, 1, 4, 1, 0, 0},
    {GEMM_WGT, 192, 192, 64, 0, 0, 1, 4, 1, 0, 0}, {GEMM_WGT, 192, 256, 64, 0, 0, 1, 3, 1, 0, 0},
    {GEMM_WGT, 64, 48, 64, 0, 0, 1, 8, 1, 0, 0},  {GEMM_WGT, 64, 48, 64, 0, 0, 1, 12, 1, 0, 0},
    {GEMM_WGT, 64, 32, 64, 0, 0, 1, 8, 1, 0, 0},  {GEMM_WGT, 64, 32, 64, 0, 0, 1, 12, 1, 0, 0},
};

static const gemm_cfg simt_table[] = {
    {GEMM_SIMT, 128, 128, 8, 0, 0, 1, 2, 1, 0, 0}, {GEMM_SIMT, 128, 64, 8, 0, 0, 1, 2, 1, 0, 0},
    {GEMM_SIMT, 64, 128, 8, 0, 0, 1, 2, 1, 0, 0}, {GEMM_SIMT, 64, 64, 8, 0, 0, 1, 2, 1, 0, 0},
    {GEMM_SIMT, 32, 64, 8, 0, 0, 1, 2, 1, 0, 0}, {GEMM_SIMT, 64, 32, 8, 0, 0, 1, 2, 1, 0, 0},
};

/* kg_gemm_gemv (products of one row): 4 or 8 warps, 1 or 2 columns a warp,
 * at most GEMV_COLS_MAX (KG_GEMV_COLS_MAX in kg_gemm.cuh). 4 columns took
 * 117-136 registers a thread (which a persistent kernel of three 256-thread
 * blocks a multiprocessor would spill) and were slower on every shape of
 * bench/gpu_gemm (ResNet-50's fc 6.9 and 10.1 us against 4.4). */
#define GEMV_COLS_MAX 2
/* Its `stages` is how many of a lane's 8-element chunks of K (256 apart)
 * it loads before their multiply-adds (gemv_ahead), at most GEMV_AHEAD_MAX
 * (KG_GEMV_AHEAD_MAX). */
#define GEMV_AHEAD_MAX 8
static const gemm_cfg gemv_table[] = {
    {GEMM_GEMV, 1, 4, 256, 4, 1, 1, 1, 1, 0, 0},
    {GEMM_GEMV, 1, 8, 256, 4, 2, 1, 1, 1, 0, 0},
    {GEMM_GEMV, 1, 8, 256, 8, 1, 1, 1, 1, 0, 0},
    {GEMM_GEMV, 1, 16, 256, 8, 2, 1, 1, 1, 0, 0},
};

/* The chunks of K a lane of kg_gemm_gemv loads ahead for cols columns: a
 * power of two covering K's (256 elements a chunk) up to GEMV_AHEAD_MAX,
 * fewer where their floats ((cols + 1) 8 a chunk) and about 40 more would
 * pass regs registers a thread (a persistent kernel of three 256-thread
 * blocks a multiprocessor has 80), or 168 (128 floats: 8 chunks of one
 * column, 4 of two), short of the 255 at which ptxas spills. */
static int gemv_ahead(int64_t k, int cols, int regs)
{
    int64_t chunks = (k + 255) / 256;
    int ahead = 1, room = KILN_MIN(regs, 168);
    while (ahead < GEMV_AHEAD_MAX && ahead < chunks && 40 + 2 * ahead * (cols + 1) * 8 <= room) ahead *= 2;
    return ahead;
}

/* Every table's tiles (the warpgroup ones twice: with and without TMA),
 * each but the matrix-vector ones also in every split (add_splits; the TMA
 * ones twice, summed through the workspace and in a cluster), and the TMA
 * ones twice more with a producer warp, alone and in clusters of two
 * (add_clusters). */
#define MAX_CANDS                                                                                                \
    ((int)((KILN_COUNT(tc_table) + 2 * KILN_COUNT(wg_table) + KILN_COUNT(wgt_deep_table) + KILN_COUNT(simt_table)) * \
               (1 + KILN_COUNT(split_cands)) +                                                                    \
           KILN_COUNT(gemv_table) +                                                                              \
           (KILN_COUNT(wg_table) + KILN_COUNT(wgt_deep_table)) * (2 + 2 * KILN_COUNT(split_cands))))

static int cfg_threads(const gemm_cfg *c)
{
    if (c->kind == GEMM_SIMT) return (c->bm / 8) * (c->bn / 8);
    if (c->kind == GEMM_GEMV) return c->wm * 32;
    if (c->kind == GEMM_WGT && c->cn) return c->bm / 64 * 128 + 32; /* and a producer warp */
    if (c->kind == GEMM_WG || c->kind == GEMM_WGT) return c->bm / 64 * 128;
    return (c->bm / c->wm) * (c->bn / c->wn) * c->ks * 32;
}

/* The same sums as KG_GEMM_TC_SMEM / KG_GEMM_WG_SMEM / KG_GEMM_WGT_SMEM /
 * KG_GEMM_SIMT_SMEM in kg_gemm.cuh. */
static int cfg_smem(const gemm_cfg *c)
{
    if (c->kind == GEMM_SIMT) return 2 * 8 * (c->bm + 4 + c->bn + 4) * 4;
    if (c->kind == GEMM_GEMV) return 0;
    if (c->kind == GEMM_WGT) return c->stages * (c->bm + c->bn) * 64 * 2 + 1024 + 16 * c->stages;
    if (c->kind == GEMM_WG) return c->stages * (c->bm + c->bn) * c->bk * 2 + 1024;
    int pipe = c->stages * (c->bm + c->bn) * c->bk * 2, red = (c->ks - 1) * c->bm * c->bn * 4;
    return pipe > red ? pipe : red;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int64_t cfg_tiles(const gemm_problem *g, const gemm_cfg *c)
{
    return g->n_batch * cdiv(g->m, c->bm) * cdiv(g->n, c->bn);
}

static int64_t cfg_rtasks(const gemm_problem *g, const gemm_cfg *c) { return cfg_tiles(g, c) * c->splits; }

/* The blocks of c's clusters (cg_op.cluster): 1 when it has none. */
static int cfg_cluster(const gemm_cfg *c) { return c->cs ? c->splits : KILN_MAX(1, c->cn); }

/* Whether c's rOperator may be narrow (cg_op.narrow): every template
 * meets only its own threads (kg.h, kg_sync_n), the producer-warp one too
 * when alone; a cluster's barriers take every thread of its blocks. */
static bool cfg_narrow(const gemm_cfg *c) { return c->cn <= 1 && !c->cs; }

/* How many of c's blocks a multiprocessor's 228 KB of shared memory hold
 * (each block also takes 1 KB of the system's). */
static int blocks_by_smem(const gemm_cfg *c) { return 228 * 1024 / (cfg_smem(c) + 1024); }

/* The blocks of c's tiles that clusters of up to 8 can hold at once on gpu:
 * a cluster's blocks share one GPC, and the GPCs' multiprocessors do not
 * divide evenly into clusters, so about three quarters of what the
 * multiprocessors hold (H100, BERT b1's 128 x 768 x 3072 summed in
 * clusters of 4: 96 blocks of 169 KB took 5.8 us, 128 blocks 9.9 us:
 * 32 clusters are more than one round). */
static int64_t cluster_room(const gemm_cfg *c, const cg_gpu *gpu)
{
    int n_sms = gpu->n_sms > 0 ? gpu->n_sms : 132;
    int per_sm = KILN_MAX(1, KILN_MIN(2, blocks_by_smem(c)));
    return (int64_t)(0.75 * n_sms * per_sm);
}

/* Split-K variants of the mma.sync and TMA candidates cands[0..n) of at
 * most 64 x 64 whose tiles do not fill the multiprocessors (larger ones,
 * 128 x 192 and 192 x 128 in two splits of BERT's 2048 x 768 x 3072, lost
 * to unsplit 128 x 96 on an H200): every split at least two k-tiles, at
 * most four rTasks per multiprocessor, the partials within the workspace.
 * TMA tiles up to 128 x 128 also split with a tile's splits in one cluster
 * (at most 8 blocks, the portable size), summed in its shared memory (cs),
 * where each split is at least 12 k-tiles deep and the clusters fit at once
 * (cluster_room): on an H100 the shorter ones lost to unsplit tiles in
 * every case of BERT b1's and ViT-B/16's 768-deep products. In a
 * persistent kernel (`persistent`), which runs no clusters, those TMA
 * tiles split through the workspace instead. Appended to cands; returns
 * the new count. */
static int add_splits(const gemm_problem *g, const cg_gpu *gpu, bool persistent, gemm_cfg *cands, int n)
{
    int n_sms = gpu->n_sms > 0 ? gpu->n_sms : 132, base = n;
    for (int i = 0; i < base; i++) {
        const gemm_cfg *c = &cands[i];
        int64_t tiles = cfg_tiles(g, c), k_tiles = cdiv(g->k, c->bk);
        /* wider tiles split in clusters (or, in a persistent kernel, through
         * the workspace) only, and only 64 or 128 wide: the sm_80 image runs
         * a 96-wide one as two strips of kg_gemm_tc, which would share one
         * tile's place in the split-K workspace */
        bool wide = c->bm * c->bn > 64 * 64;
        bool splittable = (c->kind == GEMM_WGT || c->kind == GEMM_TC) &&
                          (!wide || (c->kind == GEMM_WGT && c->bm <= 128 && c->bn <= 128 && c->bn % 64 == 0 &&
                                     c->cn == 0));
        if (!splittable || tiles >= n_sms || tiles > CG_SPLITK_SEMS) continue;
        for (int j = 0; j < (int)KILN_COUNT(split_cands); j++) {
            int sp = split_cands[j];
            if (k_tiles < 2 * sp || tiles * sp > 4 * n_sms || tiles * sp * c->bm * c->bn > CG_SPLITK_WS_FLOATS ||
                n == MAX_CANDS)
                continue;
            gemm_cfg v = *c;
            v.splits = sp;
            if (!wide || persistent) cands[n++] = v;
            if (c->kind == GEMM_WGT && sp <= 8 && k_tiles >= 12 * sp && tiles * sp <= cluster_room(c, gpu) &&
                stage_parts(c) == 1 && n < MAX_CANDS) {
                v.cs = 1;
                cands[n++] = v;
            }
        }
    }
    return n;
}

/* kg_gemm_wgt_ws variants of the unsplit TMA candidates cands[0..n) with
 * two warpgroups or more: alone, and in clusters of two blocks where the
 * columns of tiles pair up (A's halves whole 64-row atoms when MN-major).
 * Appended to cands, where the accumulators fit the registers the producer
 * warp's block leaves a thread; returns the new count. (A variant with one rTask per
 * multiprocessor looping over its tiles, the copies running on into the
 * next tile and C stored from the accumulators, took 26.2 us against 19.1
 * for BERT's 2048 x 3072 x 768 in 128 x 192 tiles on an H100: not kept.) */
static int add_clusters(const gemm_problem *g, gemm_cfg *cands, int n)
{
    int base = n;
    for (int i = 0; i < base; i++) {
        const gemm_cfg *c = &cands[i];
        if (c->kind != GEMM_WGT || c->splits > 1 || c->bm < 128) continue;
        for (int cn = 1; cn <= 2 && n < MAX_CANDS; cn++) {
            if (cdiv(g->n, c->bn) % cn || (g->la && (c->bm / 64) % cn)) continue;
            cands[n] = *c;
            cands[n].cn = cn;
            if (acc_regs(&cands[n]) <= cg_regs_per_thread(cfg_threads(&cands[n]), 1)) n++;
        }
    }
    return n;
}

/* The candidates for g on gpu: the templates' tables without tiles that
 * do not fit the GPU's shared memory or are far larger than the problem;
 * on sm_90 the warpgroup-MMA tiles (with the tensor memory accelerator
 * first, when the operands allow it: the 64-deep ones of the same table),
 * and of the mma.sync ones only those smaller than 128 x 128 (for small
 * problems). Deterministic: the tuner's candidate indices refer to this
 * list. Tiles whose accumulators (acc_regs) pass the registers a block of
 * their threads leaves a thread (cg_regs_per_thread) are left out, and
 * those whose epilogue stages in halves (stage_parts) unless the product
 * is alone in its kernel (`alone`). persistent: add_splits'; regs: the
 * registers a thread has, which size the matrix-vector tiles' chunks
 * loaded ahead (gemv_ahead). */
static int gemm_candidates(const gemm_problem *g, const cg_gpu *gpu, bool persistent, bool alone, int regs,
                           gemm_cfg *out)
{
    const gemm_cfg *tables[4] = {simt_table, NULL, NULL, NULL};
    int sizes[4] = {(int)KILN_COUNT(simt_table), 0, 0, 0}, n = 0;
    bool hopper = gpu->sm_major == 9, tma = hopper && g->tma;
    if (g->tc && hopper) {
        /* an im2col product's A is a tensor map's: TMA tiles only, unless
         * KILN_CONV_IM2COL=cp asks for the others, whose threads gather A
         * by cp.async as the sm_80 image does (kg_gemm_conv_load): what
         * checks that path on an H100 */
        bool cp = g->im2col && cg_env_is("KILN_CONV_IM2COL", "cp"), copied = !g->im2col || cp;
        tma = tma && !cp;
        tables[0] = tma ? wg_table : NULL; /* as GEMM_WGT */
        sizes[0] = tma ? (int)KILN_COUNT(wg_table) : 0;
        tables[1] = copied ? wg_table : NULL;
        sizes[1] = copied ? (int)KILN_COUNT(wg_table) : 0;
        tables[2] = copied ? tc_table : NULL;
        sizes[2] = copied ? (int)KILN_COUNT(tc_table) : 0;
        tables[3] = tma ? wgt_deep_table : NULL;
        sizes[3] = tma ? (int)KILN_COUNT(wgt_deep_table) : 0;
    } else if (g->tc) {
        tables[0] = tc_table;
        sizes[0] = (int)KILN_COUNT(tc_table);
    }
    int64_t m_fit = KILN_MAX(32, g->m), n_fit = KILN_MAX(32, g->n);
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < sizes[t]; i++) {
            gemm_cfg c = tables[t][i];
            if (tma && t == 0) {
                if (c.bk != 64) continue; /* 64-deep k-tiles */
                c.kind = GEMM_WGT;
            }
            /* the epilogue stages the fp32 tile in the stages' memory, or
             * in a kernel of its own its column halves (a kernel shares its
             * registers with every body it runs: in BERT b16's persistent
             * one, FFN1 in 192 x 256 tiles, 128 accumulators a thread at
             * 168 registers, made ptxas spill the layer norm's body, 3.6 ->
             * 6.2 us an rTask, mono 1.20 -> 1.27 ms on an H200); an
             * MN-major B comes in 64-wide atoms */
            if (c.kind == GEMM_WGT && (stage_parts(&c) > (alone ? 2 : 1) || (g->lb && c.bn % 64))) continue;
            if (cfg_smem(&c) > gpu->smem_per_block_optin || cfg_rtasks(g, &c) > INT32_MAX ||
                acc_regs(&c) > cg_regs_per_thread(cfg_threads(&c), 1))
                continue;
            /* a tile at most twice the problem in m and n */
            if (c.bm > 2 * m_fit || c.bn > 2 * n_fit) continue;
            if (hopper && c.kind == GEMM_TC && c.bm * c.bn >= 128 * 128) continue;
            out[n++] = c;
        }
    /* one row with A and B K-major: the matrix-vector template too (H100,
     * alone: ResNet-50's fc 4.39 us against 4.72 for the best other
     * candidate, BERT's pooler 2.51 against 3.92, ViT-B/16's head 2.32
     * against 3.31; 8 rows re-read A for every column, kg_gemm_gemv) */
    if (g->m == 1 && g->la == 0 && g->lb == 0 && !g->im2col)
        for (int i = 0; i < (int)KILN_COUNT(gemv_table); i++)
            if (cfg_rtasks(g, &gemv_table[i]) <= INT32_MAX) {
                out[n] = gemv_table[i];
                out[n].stages = gemv_ahead(g->k, out[n].wn, regs);
                n++;
            }
    if (n == 0) out[n++] = g->tc ? tc_table[KILN_COUNT(tc_table) - 5] : simt_table[3]; /* 32 x 32 / 64 x 64 */
    return add_clusters(g, out, add_splits(g, gpu, persistent, out, n));
}

/* Whether c's template compiles within regs registers a thread. */
static bool fits_regs(const gemm_cfg *c, int regs) { return acc_regs(c) <= regs; }

/* Whether share identical products in c's tiles, side by side in one wave
 * or stage, fit the split-K workspace together: else cg_splitk_place puts
 * them at overlapping places and emit.c runs them one after another (three
 * 197 x 768 x 768 products in 128 x 128 tiles in 3 splits took a stage
 * each). */
static bool fits_share(const gemm_problem *g, const gemm_cfg *c, int share)
{
    return c->splits < 2 || c->cs ||
           ((int64_t)share * cfg_rtasks(g, c) * c->bm * c->bn <= CG_SPLITK_WS_FLOATS &&
            (int64_t)share * cfg_tiles(g, c) <= CG_SPLITK_SEMS);
}

/* gemm_candidates narrowed to those of want_block threads (0: every size),
 * or with `narrow` (cg_emitter.narrow_ok) also of fewer threads where the
 * template may be narrow (cfg_narrow: run on the block's first threads
 * while the rest skip it, so a persistent kernel of 256-thread blocks
 * takes the one-warpgroup tiles too), in the same order, and without
 * clusters when the rOperator shares its
 * kernel: in a persistent one (want_block) or beside share - 1 identical
 * products (plan_gemm_share; a clustered rOperator is a kernel of its own),
 * and within regs registers a thread (cg_mono_regs: fits_regs), and
 * without splits through the workspace that share copies of would not
 * fit in it together (fits_share). Half-staged tiles only for a product
 * alone in its kernel: not persistent, no identical products beside it,
 * and not `shared` with the other members of a wave (cg_emitter.wave_shared).
 * When none is left (a small problem whose fitting tiles are all
 * narrower), the tiles of that many threads the problem allows at all,
 * larger than it or not: idle threads cost less than a kernel of its own
 * under --schedule=mono. Else all of them. */
static int sized_candidates(const gemm_problem *g, const cg_gpu *gpu, int want_block, int regs, bool narrow,
                            int share, bool shared, gemm_cfg *out)
{
    const bool alone = !want_block && share < 2 && !shared;
    int n = gemm_candidates(g, gpu, want_block > 0, alone, regs, out), kept = 0;
    if (!want_block && share < 2) return n;
    for (int i = 0; i < n; i++) {
        const int threads = cfg_threads(&out[i]);
        bool sized = !want_block || threads == want_block || (narrow && cfg_narrow(&out[i]) && threads < want_block);
        if (sized && cfg_cluster(&out[i]) < 2 && fits_regs(&out[i], regs) && fits_share(g, &out[i], share))
            out[kept++] = out[i];
    }
    if (kept > 0) return kept;
    if (!want_block) return gemm_candidates(g, gpu, false, alone, regs, out); /* only clusters fit: share nothing */
    const gemm_cfg *tables[2] = {simt_table, NULL};
    int sizes[2] = {(int)KILN_COUNT(simt_table), 0};
    if (g->tc) {
        tables[0] = tc_table;
        sizes[0] = (int)KILN_COUNT(tc_table);
        if (gpu->sm_major == 9) {
            tables[1] = wg_table;
            sizes[1] = (int)KILN_COUNT(wg_table);
        }
    }
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < sizes[t]; i++) {
            const gemm_cfg *c = &tables[t][i];
            if (cfg_threads(c) == want_block && cfg_smem(c) <= gpu->smem_per_block_optin &&
                cfg_rtasks(g, c) <= INT32_MAX && fits_regs(c, regs) && kept < MAX_CANDS)
                out[kept++] = *c;
        }
    if (kept > 0) return kept;
    /* no tile of want_block threads: any within the registers, else any */
    n = gemm_candidates(g, gpu, true, false, regs, out);
    for (int i = 0; i < n; i++)
        if (fits_regs(&out[i], regs)) out[kept++] = out[i];
    return kept > 0 ? kept : n; /* none fits: out still holds all n */
}

/* KILN_GEMM_CLUSTERS=1: the cost model counts a cluster's shared A (and so
 * picks clusters where L2 traffic dominates). */
static bool clusters_preferred(void) { return cg_env_is("KILN_GEMM_CLUSTERS", "1"); }

/* Estimated time of c on g in SM clocks: memory time plus the larger of
 * compute and latency time.
 *   - memory: every tile reads its A and B panels through L2, and A, B and
 *     C cross DRAM once;
 *   - compute: each multiprocessor's share of the tiles at the template's
 *     MMA rate (narrow wgmma and narrow mma.sync warp tiles are slower per
 *     MAC; small mma.sync blocks cannot keep the tensor cores busy);
 *   - latency: the tiles a multiprocessor holds at once (by shared memory,
 *     registers and warps) run side by side, each a chain of k-tiles no
 *     faster than the copy latency over the stages in flight;
 *   - rounds: each round of tiles held at once fills and drains once.
 * In a persistent kernel (per_sm_blocks > 0: the blocks a multiprocessor
 * holds; 0 elsewhere) an rTask holds a whole block, narrow or not, so
 * per_sm_blocks rTasks run side by side whatever the tile's own occupancy,
 * and a narrow SIMT or mma.sync tile has only its own warps to hide
 * latency with.
 * The rates and latencies are fitted, not derived: on an H200 the chosen
 * configuration of BERT's eight linear products runs within 2% of the
 * fastest candidate on average (the geometric mean over three runs of
 * bench/gpu_gemm.c; at worst 11%, batch 1's attention output, where a
 * split mma.sync tile wins). */
static double gemm_cost(const gemm_problem *g, const gemm_cfg *c, const cg_gpu *gpu, int per_sm_blocks)
{
    const double latency = 700.0, dram_bytes_per_clk = 1200.0, l2_bytes_per_clk = 6250.0, ingest_per_clk = 55.0;
    int n_sms = gpu->n_sms > 0 ? gpu->n_sms : 132;
    if (c->kind == GEMM_GEMV) {
        /* B's bytes from DRAM once; a lane's chunks of its columns all in
         * flight, so about one trip for the loads (more where a lane has
         * many) and one for the epilogue's loads and the stores, for each
         * round of the blocks a multiprocessor holds (by warps, or the
         * persistent kernel's) */
        double bytes = (double)g->n_batch * ((double)g->k * g->n * (g->sb == KILN_F32 ? 4.0 : 2.0) +
                                             (double)g->m * g->k * (g->sa == KILN_F32 ? 4.0 : 2.0));
        int bps = per_sm_blocks > 0 ? per_sm_blocks : KILN_MIN(32, 64 / c->wm);
        double rounds = ceil((double)cfg_rtasks(g, c) / ((double)n_sms * bps));
        double chunks = ceil(g->k / 256.0) * c->wn;
        return bytes / dram_bytes_per_clk + rounds * latency * (2.0 + chunks / 16.0);
    }
    int threads = cfg_threads(c);
    int regs, in_flight;
    double rate, copy_latency = latency;
    if (c->kind == GEMM_SIMT) {
        regs = 160;
        rate = 128.0 * 0.6;
        in_flight = 1;
    } else if (c->kind == GEMM_WGT) {
        /* the copies cost the threads nothing and run a stage further ahead,
         * but a tensor copy takes longer to land (deep pipelines pay off for
         * a short M); two warpgroups keep the tensor cores busy down to
         * 128 x 128 tiles, one does not (fitted on an H200). One warpgroup
         * rates 0.66 up to 192 wide: at 0.54 from 96 wide, ViT-B/16's 197 x
         * 2304 and 197 x 3072 products took 128 x 64 tiles with a producer
         * warp, 5.13 and 6.99 us on an H100 (bench/gpu_gemm), where 64 x 96
         * took 4.93 and 6.17; no other shape of bench/gpu_gemm changes its
         * pick */
        regs = c->bn / 2 + 90;
        double eff = c->bm >= 128 ? (c->bn >= 128 ? (c->bm > 192 ? 0.95 : 1.0) : c->bn >= 96 ? 0.9 : 0.8)
                                  : (c->bn >= 256 ? 0.6 : 0.66);
        /* narrow tiles of two warpgroups keep their tensor cores busier
         * when a producer warp issues the copies (BERT b16 FFN2 in 128 x 96
         * tiles: 5 to 17% faster on an H100 at every depth, 9% on an H200;
         * 128 x 128 tiles: no difference) */
        if (c->cn && c->bm >= 128 && c->bn < 128) eff *= 1.05;
        rate = 2000.0 * eff;
        /* with a producer warp (cn >= 1) a stage is refilled as soon as
         * every warp is done with it, not once the last warp done has
         * issued its next k-tile: one more k-tile in flight. A tensor copy
         * under a full GPU's load lands about 2 latencies later, so 128 x 96
         * tiles want 6 to 8 stages (BERT b16 FFN2 on an H100: 18.3, 18.9 and
         * 16.2 us at 4, 6 and 8 stages with a producer warp, 19.5 to 20.1
         * without one) */
        in_flight = c->stages - (c->cn ? 0 : 1);
        copy_latency = 2.0 * latency;
    } else if (c->kind == GEMM_WG) {
        regs = c->bn / 2 + 90;
        rate = 1800.0 * (c->bn >= 192 ? 1.0 : c->bn >= 128 ? 0.75 : 0.65) * (c->bm >= 128 ? 1.0 : 1.1);
        in_flight = c->stages - 2;
    } else {
        int mi = c->wm / 16, ni = c->wn / 8;
        regs = mi * ni * 4 + 2 * (mi * 4 + ni * 2) + 40;
        double frag = (double)(c->wm * c->wn) / (c->wm + c->wn) / 32.0;
        rate = 2200.0 * (frag >= 1.0 ? 1.0 : 0.45 + 0.55 * frag) * KILN_MIN(1.0, threads / 128.0);
        in_flight = c->stages - 1;
    }
    regs = (regs + 7) & ~7;
    int by_smem = blocks_by_smem(c), by_regs = 65536 / (threads * KILN_MIN(regs, 255));
    int bps = KILN_MAX(1, KILN_MIN(by_smem, KILN_MIN(by_regs, KILN_MIN(64 / (threads / 32), 32))));
    if (per_sm_blocks > 0) bps = per_sm_blocks;
    double tiles = (double)cfg_rtasks(g, c);
    double per_sm = ceil(tiles / n_sms), resident = KILN_MIN((double)bps, per_sm);
    if (per_sm_blocks > 0 && (c->kind == GEMM_SIMT || c->kind == GEMM_TC))
        rate *= KILN_MIN(1.0, threads * resident / 128.0);
    double k_tiles = (double)cdiv(cdiv(g->k, c->bk), c->splits), work = (double)c->bm * c->bn * c->bk;
    double t_compute = per_sm * k_tiles * work / rate;
    double t_latency = ceil(per_sm / resident) * k_tiles * fmax(work / rate, copy_latency / in_flight);
    double esize = g->sa == KILN_F32 ? 4.0 : 2.0;
    /* A cluster reads A's panel once for the blocks that share it, but its
     * blocks wait for each other: hardly cheaper on an H200 (17.5 against
     * 18.1 us for BERT b16 FFN2 alone) and dearer on an H100 (20.3 against
     * 18.3 us), so the model prices it as two blocks and leaves it to the
     * tuner, unless KILN_GEMM_CLUSTERS=1 asks it to count the sharing */
    double shared_a = c->cn > 1 && clusters_preferred() ? c->cn : 1;
    double l2 = (double)cfg_tiles(g, c) * ((double)c->bm / shared_a + c->bn) * (double)g->k * esize;
    double dram = (double)g->n_batch * ((double)g->m * g->k + (double)g->k * g->n + 2.0 * (double)g->m * g->n) * esize;
    /* split-K: the partials go out and come back through L2 (fp32), and the
     * last split waits for the stores, the fence, the counter and the loads
     * (three round trips), then sums every split's partial (a round trip
     * each), the trips overlapping about four ways (fitted on an H200 to
     * BERT's 128 x 768 products, where splitting 768-deep ones loses and
     * 3072-deep ones win by 4 with TMA tiles of 64 x 48) */
    double fixup = 0;
    if (c->splits > 1 && !c->cs) {
        l2 += 2.0 * tiles * c->bm * c->bn * 4.0;
        fixup = 0.25 * (3.0 + c->splits) * latency;
    } else if (c->splits > 1) {
        /* summed in a cluster: one barrier, then each block's rows of every
         * split's partial from the others' shared memory (a short trip each) */
        fixup = 0.25 * (1.0 + 0.5 * c->splits) * latency;
    }
    double t_memory = fmax(dram / dram_bytes_per_clk, l2 / l2_bytes_per_clk);
    /* each round of resident tiles fills its pipeline and drains its
     * epilogue once (one 192 x 192 tile per multiprocessor beats two of
     * 128 x 144 at 2048 x 2304 on an H100, the same work) */
    double t_rounds = ceil(per_sm / resident) * latency;
    /* a split's k-tiles cannot land faster than a multiprocessor takes in
     * bytes: its share of A and B for every tile it holds, about 55 bytes a
     * clock (fitted on an H100 to BERT b1's and ViT-B/16's products, where
     * splits of wider tiles win: 768 x 3072 in 64 x 64 tiles summed in
     * clusters of 4, 5.8 us, against 64 x 48 through the workspace, 6.5;
     * the unsplit tiles' fitted rates carry it already). Not in a
     * persistent kernel, whose picks it made slower (mono ViT-B/16 on an
     * H200: 659-667 -> 761-766 us) */
    double t_ingest = c->splits > 1 && per_sm_blocks == 0
                          ? per_sm * ((double)c->bm + c->bn) * k_tiles * c->bk * esize / ingest_per_clk
                          : 0;
    /* an epilogue staged in two halves syncs and passes over shared
     * memory twice, each round */
    double halves = stage_parts(c) > 1 ? 0.5 * t_rounds : 0;
    return t_memory + fmax(fmax(t_compute, t_latency), t_ingest) + t_rounds + fixup + halves;
}

/* The cost model's choice among cands[0..n): the fastest; with
 * e->wave_efficient the most efficient rKernel (Rammer's SelectRKernels):
 * the least estimated time x multiprocessors held; with e->stage_load the
 * one that ends its persistent kernel's stage soonest (cg_stage_time),
 * the fastest of those that end it alike. */
static int gemm_heuristic(const cg_emitter *e, const gemm_problem *g, const gemm_cfg *cands, int n)
{
    const int n_sms = e->gpu.n_sms > 0 ? e->gpu.n_sms : 132;
    int best = 0;
    double best_cost = 0, best_own = 0;
    for (int i = 0; i < n; i++) {
        double own = gemm_cost(g, &cands[i], &e->gpu, e->mono_per_sm), cost = own;
        if (e->wave_efficient) cost *= (double)KILN_MIN(cfg_rtasks(g, &cands[i]), (int64_t)n_sms);
        if (e->stage_load) cost = cg_stage_time(e, cfg_rtasks(g, &cands[i]), own);
        bool tie = e->stage_load && cost <= best_cost * 1.001 && own < best_own * 0.999;
        if (i == 0 || cost < best_cost * 0.999 || tie) {
            best = i;
            best_cost = tie ? fmin(best_cost, cost) : cost; /* ties do not raise the bar */
            best_own = own;
        }
    }
    return best;
}

/* ---- emission ---------------------------------------------------------------------------- */

static void dims_str(const ir_tensor *t, char *buf, size_t n)
{
    int len = snprintf(buf, n, "[");
    for (int i = 0; i < t->rank && len < (int)n; i++)
        len += snprintf(buf + len, n - (size_t)len, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    if (len < (int)n) snprintf(buf + len, n - (size_t)len, "]");
}

/* The start of op_<id>'s body: rTask t is split `split` of tile `slot`
 * (over all batches), and t becomes the tile. */
static void emit_split(base_str *s, const gemm_cfg *c)
{
    if (c->splits > 1)
        base_str_printf(s, "    const int split = t %% %d, slot = t / %d;\n    t = slot;\n", c->splits, c->splits);
    else base_str_cat(s, "    const int split = 0, slot = 0;\n");
}

/* The tensor maps kg_gemm_wgt reads for c: A's and B's 2-D views as they
 * are stored (the contiguous dim first), with the boxes kg_gemm_tma_issue
 * copies: 64 along k by the tile's rows for a K-major operand, 64 x 64
 * atoms for an MN-major one. */
static void gemm_tmaps(const gemm_problem *g, const gemm_cfg *c, rt_gtmap *ma, rt_gtmap *mb)
{
    kiln_gprec dt = g->sa == KILN_BF16 ? KILN_GPREC_BF16 : KILN_GPREC_FP16;
    *ma = (rt_gtmap){.space = g->space_a, .dtype = dt, .offset = g->off_a, .stride1 = (uint64_t)g->lda * 2, .box0 = 64};
    *mb = (rt_gtmap){.space = g->space_b, .dtype = dt, .offset = g->off_b, .stride1 = (uint64_t)g->ldb * 2, .box0 = 64};
    ma->dim0 = (uint64_t)(g->la ? g->m : g->k);
    ma->dim1 = (uint64_t)(g->la ? g->k : g->m);
    /* a block in a cluster copies its part */
    ma->box1 = g->la ? 64u : (unsigned)(c->cn ? c->bm / c->cn : c->bm);
    mb->dim0 = (uint64_t)(g->lb ? g->n : g->k);
    mb->dim1 = (uint64_t)(g->lb ? g->k : g->n);
    mb->box1 = g->lb ? 64u : (unsigned)c->bn;
    /* the im2col operand's: box1 pixels (A's rows of the tile or the
     * cluster block's part, B's columns) of 64 channels a copy */
    if (g->im2col) cg_im2col_map(&g->cv, g->im2col == 1 ? ma : mb);
}

void cg_im2col_map(const cg_im2col *v, rt_gtmap *m)
{
    m->im2col = 1;
    m->dim0 = (uint64_t)v->c;
    m->dim1 = (uint64_t)v->w;
    m->dim2 = (uint64_t)v->h;
    m->dim3 = (uint64_t)v->imgs;
    m->stride1 = (uint64_t)v->c * 2;
    m->stride2 = m->stride1 * (uint64_t)v->w;
    m->stride3 = m->stride2 * (uint64_t)v->h;
    m->lower_w = (int)-v->pw;
    m->lower_h = (int)-v->ph;
    m->upper_w = (int)((v->ow - 1) * v->sw - v->pw - (v->w - 1));
    m->upper_h = (int)((v->oh - 1) * v->sh - v->ph - (v->h - 1));
    m->step_w = (unsigned)v->sw;
    m->step_h = (unsigned)v->sh;
}

/* The body of op_<id> after emit_split and the batch offsets oa, ob, oc: fills the
 * kg_gemm_args and calls the template. pa..pres: typed pointer
 * expressions of the operands (pbias, pres NULL when absent); tmap_a,
 * tmap_b: the kg_tmaps indices of gemm_tmaps' maps (kg_gemm_wgt only);
 * pdep: what g.grid_dep is set to (NULL: 0); op: where a split-K
 * product's partials and counters are (cg_splitk_place).
 * Also what bench/gpu_gemm.c emits, so the bench times the code the
 * compiler makes. */
static void emit_call(base_str *s, const gemm_problem *g, const gemm_cfg *c, const char *pa, const char *pb,
                      const char *pc, const char *pbias, const char *pres, int tmap_a, int tmap_b,
                      const char *pdep, const cg_op *op)
{
    char f1[48], f2[48], f3[48], f4[48];
    base_str_printf(s, "    g.a = %s + oa;\n    g.b = %s + ob;\n    g.c = %s + oc;\n", pa, pb, pc);
    if (c->kind == GEMM_WGT)
        base_str_printf(s, "    g.tma_a = &kg_tmaps[%d];\n    g.tma_b = &kg_tmaps[%d];\n", tmap_a, tmap_b);
    else base_str_cat(s, "    g.tma_a = 0;\n    g.tma_b = 0;\n");
    if (pbias) base_str_printf(s, "    g.bias = %s;\n", pbias);
    else base_str_cat(s, "    g.bias = 0;\n");
    if (pres) base_str_printf(s, "    g.res = %s + oc;\n", pres);
    else base_str_cat(s, "    g.res = 0;\n");
    base_str_printf(s,
                    "    g.m = %lld; g.n = %lld; g.k = %lld;\n"
                    "    g.lda = %lld; g.ldb = %lld; g.ldc = %lld; g.ldr = %lld;\n"
                    "    g.bias_rs = %lld; g.bias_cs = %lld;\n"
                    "    g.la = %s; g.lb = %s;\n"
                    "    g.dt_a = %s; g.dt_b = %s; g.dt_c = %s; g.dt_bias = %s; g.dt_res = %s;\n"
                    "    g.alpha = %s; g.beta = %s;\n"
                    "    g.act = %s; g.act_p0 = %s; g.act_p1 = %s;\n",
                    (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->lda, (long long)g->ldb,
                    (long long)g->n, (long long)g->n, (long long)g->bias_rs, (long long)g->bias_cs,
                    g->la ? "KG_GEMM_MNMAJOR" : "KG_GEMM_KMAJOR", g->lb ? "KG_GEMM_MNMAJOR" : "KG_GEMM_KMAJOR",
                    dt_code(g->sa), dt_code(g->sb), dt_code(g->sy), dt_code(g->sbias), dt_code(g->sres),
                    cg_float_lit(g->alpha, f1, sizeof(f1)), cg_float_lit(g->beta, f2, sizeof(f2)), cg_act_name(g->ep.act),
                    cg_float_lit(g->ep.alpha, f3, sizeof(f3)), cg_float_lit(g->ep.beta, f4, sizeof(f4)));
    base_str_printf(s, "    g.splits = %d; g.split = split; g.slot = slot; g.csum = %d;\n    g.grid_dep = %s;\n",
                    c->splits, c->cs ? 1 : 0, pdep ? pdep : "0");
    base_str_printf(s, "    g.conv = %d;\n", g->im2col);
    if (g->im2col)
        base_str_printf(s,
                        "    g.cv.c = %lld; g.cv.h = %lld; g.cv.w = %lld; g.cv.oh = %lld; g.cv.ow = %lld; g.cv.kw = %lld;\n"
                        "    g.cv.sh = %lld; g.cv.sw = %lld; g.cv.ph = %lld; g.cv.pw = %lld; g.cv.dh = %lld; "
                        "g.cv.dw = %lld;\n",
                        (long long)g->cv.c, (long long)g->cv.h, (long long)g->cv.w, (long long)g->cv.oh,
                        (long long)g->cv.ow, (long long)g->cv.kw, (long long)g->cv.sh, (long long)g->cv.sw,
                        (long long)g->cv.ph, (long long)g->cv.pw, (long long)g->cv.dh, (long long)g->cv.dw);
    if (c->splits > 1)
        base_str_printf(s, "    g.ws = kg_splitk_ws + %lld;\n    g.sem = kg_splitk_sem + %d;\n", (long long)op->ws_at,
                        op->sem_at);
    else base_str_cat(s, "    g.ws = 0;\n    g.sem = 0;\n");
    if (c->cn > 1) /* rTasks 2j and 2j + 1 (a cluster's ranks 0 and 1) take columns 2j' and 2j' + 1 */
        base_str_printf(s,
                        "    int tm, tn;\n    kg_gemm_raster(t / 2, %lld, %lld, 8, &tm, &tn);\n"
                        "    tn = 2 * tn + t %% 2;\n",
                        (long long)cdiv(g->m, c->bm), (long long)cdiv(g->n, c->bn) / 2);
    else
        base_str_printf(s, "    int tm, tn;\n    kg_gemm_raster(t, %lld, %lld, 8, &tm, &tn);\n",
                        (long long)cdiv(g->m, c->bm), (long long)cdiv(g->n, c->bn));
    if (c->kind == GEMM_SIMT) base_str_printf(s, "    kg_gemm_simt(&g, tm, tn, %d, %d);\n}\n\n", c->bm, c->bn);
    else if (c->kind == GEMM_GEMV) {
        KILN_ASSERT(c->wn >= 1 && c->wn <= GEMV_COLS_MAX);
        base_str_printf(s, "    (void)tm;\n    kg_gemm_gemv(&g, tn, %d, %d, %d);\n}\n\n", c->wm, c->wn, c->stages);
    }
    else if (c->kind == GEMM_WGT)
        if (c->cn)
            base_str_printf(s, "    kg_gemm_wgt_ws(&g, tm, tn, %d, %d, %d, %d);\n}\n\n", c->bm, c->bn, c->stages,
                            c->cn);
        else base_str_printf(s, "    kg_gemm_wgt(&g, tm, tn, %d, %d, %d);\n}\n\n", c->bm, c->bn, c->stages);
    else if (c->kind == GEMM_WG)
        base_str_printf(s, "    kg_gemm_wg(&g, tm, tn, %d, %d, %d, %d);\n}\n\n", c->bm, c->bn, c->bk, c->stages);
    else
        base_str_printf(s, "    kg_gemm_tc(&g, tm, tn, %d, %d, %d, %d, %d, %d, %d);\n}\n\n", c->bm, c->bn, c->bk,
                        c->wm, c->wn, c->ks, c->stages);
}

/* ", producer warp" for kg_gemm_wgt_ws, with ", cluster of N" in clusters;
 * ", summed in a cluster" for the splits of kg_gemm_wgt_csum; else "". */
static void ws_note_of(const gemm_cfg *c, char *buf, size_t n)
{
    if (c->cn > 1) snprintf(buf, n, ", producer warp, cluster of %d", c->cn);
    else if (c->cn) snprintf(buf, n, ", producer warp");
    else snprintf(buf, n, "%s", c->cs ? ", summed in a cluster" : "");
}

/* The comment above op_<id>: the problem and the configuration. */
static void emit_summary(base_str *s, const gemm_problem *g, const gemm_cfg *c)
{
    char sa[96], sb[96], sy[96];
    dims_str(&g->a->t, sa, sizeof(sa));
    dims_str(&g->b->t, sb, sizeof(sb));
    dims_str(&g->y->t, sy, sizeof(sy));
    bool gemm = g->node->op == KILN_OP_GEMM;
    const char *what = gemm ? "Gemm" : "MatMul";
    if (g->im2col) what = g->im2col == 1 ? "Conv as im2col(x) w^T" : "Conv as w im2col(x)^T";
    else if (g->node->op == KILN_OP_CONV) /* cg_conv_product's forms */
        what = g->a == g->node->in[0] ? (g->la ? "Conv 1x1 as x^T w^T" : "Conv 1x1 as x w^T")
                                      : (g->lb ? "Conv 1x1 as w x" : "Conv 1x1 as w x^T");
    base_str_printf(s, "/* %s %s %s%s x %s%s -> %s%s; m=%lld n=%lld k=%lld batch=%lld; stored %s x %s -> %s",
                    what, kiln_dtype_name(g->a->t.dtype), sa, gemm && g->la ? "^T" : "", sb,
                    gemm && !g->lb ? "^T" : "", sy, g->folded ? " (batch folded into rows)" : "", (long long)g->m,
                    (long long)g->n, (long long)g->k, (long long)g->n_batch, kiln_dtype_name(g->sa),
                    kiln_dtype_name(g->sb), kiln_dtype_name(g->sy));
    if (g->b_kmajor) base_str_cat(s, "; B stored transposed");
    if (g->im2col)
        base_str_printf(s, "; filter %lldx%lld, stride %lldx%lld, pads %lldx%lld, dilation %lldx%lld",
                        (long long)g->cv.kh, (long long)g->cv.kw, (long long)g->cv.sh, (long long)g->cv.sw,
                        (long long)g->cv.ph, (long long)g->cv.pw, (long long)g->cv.dh, (long long)g->cv.dw);
    if (g->alpha != 1.0f) base_str_cat(s, "; scaled");
    if (g->ep.bias) base_str_cat(s, "; bias");
    if (g->ep.residual) base_str_cat(s, "; residual");
    if (g->ep.act != PASS_ACT_NONE) base_str_printf(s, "; %s", cg_act_name(g->ep.act) + strlen("KG_ACT_"));
    char ws_note[48];
    ws_note_of(c, ws_note, sizeof(ws_note));
    if (c->kind == GEMM_SIMT) base_str_printf(s, ".\n * kg_gemm_simt: %dx%d tiles, 8x8 per thread. */\n", c->bm, c->bn);
    else if (c->kind == GEMM_GEMV)
        base_str_printf(s, ".\n * kg_gemm_gemv: %d warps of %d column%s, lanes along K. */\n", c->wm, c->wn,
                        c->wn > 1 ? "s" : "");
    else if (c->kind == GEMM_WGT)
        base_str_printf(s,
                        ".\n * kg_gemm_wgt%s: %dx%dx64 tiles copied by TMA, %d warpgroups, %d stages, %d split%s%s. */\n",
                        c->cn ? "_ws" : "", c->bm, c->bn, c->bm / 64, c->stages, c->splits,
                        c->splits > 1 ? "s of K across blocks" : "", ws_note);
    else if (c->kind == GEMM_WG)
        base_str_printf(s, ".\n * kg_gemm_wg: %dx%dx%d tiles, %d warpgroups, %d stages. */\n", c->bm, c->bn, c->bk,
                        c->bm / 64, c->stages);
    else
        base_str_printf(s, ".\n * kg_gemm_tc: %dx%dx%d tiles, %dx%d warp tiles, %d k-slice%s, %d stages, %d split%s. */\n",
                        c->bm, c->bn, c->bk, c->wm, c->wn, c->ks, c->ks > 1 ? "s" : "", c->stages, c->splits,
                        c->splits > 1 ? "s of K across blocks" : "");
}

static kiln_status emit_op(cg_emitter *e, const sched_group *grp, const gemm_problem *g, const gemm_cfg *c, cg_op *op)
{
    base_str *s = &e->code;
    char pa[160], pb[160], pc[160], pbias[160], pres[160];
    int64_t tiles = cdiv(g->m, c->bm) * cdiv(g->n, c->bn);
    cg_comment(s, grp);
    emit_summary(s, g, c);
    /* a TMA template whose B is a weight (nothing in the program writes it)
     * may wait for the kernels before inside its rTask, after B's first
     * copies (grid_dep) */
    const bool prewait = c->kind == GEMM_WGT && g->space_b == 1;
    base_str_printf(s, "static __device__ void op_%d(const kiln_gctx *c, int t%s)\n{\n    kg_gemm_args g;\n", grp->id,
                    prewait ? CG_PRE_PARAM : "");
    emit_split(s, c);
    if (g->n_batch > 1) {
        /* rTask t: tile t % tiles of batch t / tiles */
        base_str_printf(s, "    int b = t / %lld, r = b;\n    kg_i64 oa = 0, ob = 0;\n    t %%= %lld;\n",
                        (long long)tiles, (long long)tiles);
        for (int i = g->batch_rank - 1; i >= 0; i--) {
            base_str_printf(s, "    oa += (kg_i64)(r %% %lld) * %lldLL;\n    ob += (kg_i64)(r %% %lld) * %lldLL;\n",
                            (long long)g->batch[i], (long long)g->a_stride[i], (long long)g->batch[i],
                            (long long)g->b_stride[i]);
            if (i) base_str_printf(s, "    r /= %lld;\n", (long long)g->batch[i]);
        }
        base_str_printf(s, "    kg_i64 oc = (kg_i64)b * %lldLL;\n", (long long)(g->m * g->n));
    } else {
        base_str_cat(s, "    const kg_i64 oa = 0, ob = 0, oc = 0;\n");
    }
    int tmap_a = -1, tmap_b = -1;
    if (c->kind == GEMM_WGT) {
        rt_gtmap ma, mb;
        gemm_tmaps(g, c, &ma, &mb);
        KILN_TRY(cg_tmap_add(e, &ma, &tmap_a));
        KILN_TRY(cg_tmap_add(e, &mb, &tmap_b));
    }
    op->n_rtasks = cfg_rtasks(g, c);
    op->splitk = false;
    op->ws_at = op->ws_floats = 0;
    op->sem_at = op->sems = 0;
    if (c->splits > 1) KILN_TRY(cg_splitk_place(e, grp, op->n_rtasks * c->bm * c->bn, op->n_rtasks / c->splits, op));
    emit_call(s, g, c, cg_ptr(e, g->a, pa, sizeof(pa)), cg_ptr(e, g->b, pb, sizeof(pb)),
              cg_ptr(e, g->y, pc, sizeof(pc)), g->ep.bias ? cg_ptr(e, g->ep.bias, pbias, sizeof(pbias)) : NULL,
              g->ep.residual ? cg_ptr(e, g->ep.residual, pres, sizeof(pres)) : NULL, tmap_a, tmap_b,
              prewait ? "grid_dep" : NULL, op);
    op->block = cfg_threads(c);
    op->smem_bytes = cfg_smem(c);
    /* the rows its rTasks write and read, for a persistent kernel's tile-row
     * waits: tile (tm, tn) of kg_gemm_raster's order writes rows tm of C and
     * reads those of a K-major A (of an im2col A, the window of x) and of
     * the residual; a cluster pair's rTasks are one tile's two columns */
    if (g->n_batch == 1 && c->kind != GEMM_GEMV) {
        const int64_t pair = c->cn > 1 ? 2 : 1;
        cg_tiles_set(op, g->y, g->n, c->splits * pair, cdiv(g->m, c->bm), cdiv(g->n, c->bn) / pair, 8, c->bm, g->m);
        if (g->im2col == 1) cg_rows_read(op, g->a, g->cv.c, &g->cv);
        else if (!g->im2col && !g->la) cg_rows_read(op, g->a, g->lda, NULL);
        else cg_rows_other(op, g->a);
        cg_rows_other(op, g->b);
        if (g->ep.residual) cg_rows_read(op, g->ep.residual, g->n, NULL);
        cg_rows_other(op, g->ep.bias);
    }
    if (c->kind == GEMM_SIMT) snprintf(op->config, sizeof(op->config), "kg_gemm_simt %dx%d", c->bm, c->bn);
    else if (c->kind == GEMM_GEMV)
        snprintf(op->config, sizeof(op->config), "kg_gemm_gemv %d warps x %d columns, %d chunk%s of K ahead", c->wm,
                 c->wn, c->stages, c->stages == 1 ? "" : "s");
    else if (c->kind == GEMM_WGT) {
        int len = snprintf(op->config, sizeof(op->config), "kg_gemm_wgt%s %dx%dx64 (TMA%s), %d stages, %d splits",
                           c->cn ? "_ws" : "", c->bm, c->bn, !g->im2col ? "" : g->im2col == 1 ? ", im2col A" : ", im2col B",
                           c->stages, c->splits);
        if (len > 0 && (size_t)len < sizeof(op->config))
            ws_note_of(c, op->config + len, sizeof(op->config) - (size_t)len);
    }
    else if (c->kind == GEMM_WG)
        snprintf(op->config, sizeof(op->config), "kg_gemm_wg %dx%dx%d, %d stages", c->bm, c->bn, c->bk, c->stages);
    else
        snprintf(op->config, sizeof(op->config), "kg_gemm_tc %dx%dx%d, warp %dx%d, %d k-slices, %d stages, %d splits",
                 c->bm, c->bn, c->bk, c->wm, c->wn, c->ks, c->stages, c->splits);
    if (g->im2col && c->kind != GEMM_WGT) {
        size_t len = strlen(op->config);
        snprintf(op->config + len, sizeof(op->config) - len, ", im2col %s by cp.async", g->im2col == 1 ? "A" : "B");
    }
    op->cluster = cfg_cluster(c);
    op->narrow = cfg_narrow(c);
    op->acc_regs = acc_regs(c);
    op->wgmma = c->kind == GEMM_WG || c->kind == GEMM_WGT;
    op->prewait = prewait;
    op->tmap = tmap_a >= 0 && tmap_b == tmap_a + 1 ? tmap_a + 1 : 0;
    KILN_TRY(cg_need(e, "kg_math.h"));
    KILN_TRY(cg_need(e, "kg_gemm.cuh"));
    return s->oom ? base_diag_add(e->d, KILN_ERR_OOM, "out of memory generating group '%s'", grp->name) : KILN_OK;
}

/* An empty output: nothing to compute, one idle rTask. */
static kiln_status emit_empty(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    cg_comment(&e->code, grp);
    base_str_printf(&e->code, "static __device__ void op_%d(const kiln_gctx *c, int t) { (void)c; (void)t; }\n\n",
                    grp->id);
    *op = (cg_op){.n_rtasks = 1, .block = e->want_block ? e->want_block : 32, .smem_bytes = 0};
    return KILN_OK;
}

/* How many identical products run beside each other with grp's, its own
 * included (plan_gemm_share in emit.c; 1 when not planned). */
static int gemm_share(const cg_emitter *e, const sched_group *grp)
{
    return e->gemm_share && e->gemm_share[grp->id] > 1 ? e->gemm_share[grp->id] : 1;
}

static kiln_status emit_candidate(cg_emitter *e, const sched_group *grp, int cand, cg_op *op)
{
    gemm_problem g;
    gemm_cfg cands[MAX_CANDS];
    KILN_TRY(gemm_analyse(e, grp, &g));
    int n = sized_candidates(&g, &e->gpu, e->want_block, cg_mono_regs(e), e->narrow_ok, gemm_share(e, grp),
                             e->wave_shared, cands);
    if (cand < 0 || cand >= n)
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "group '%s': no GEMM candidate %d (of %d)", grp->name, cand, n);
    return emit_op(e, grp, &g, &cands[cand], op);
}

/* What identifies g's work for tuning ("gemm tc f16.f16 m=2048 n=768
 * ..."), with the persistent kernel's block size and the identical
 * products beside it when there are (they narrow the candidates and
 * change the winner). */
static void gemm_key(const gemm_problem *g, int want_block, int share, char *key, size_t n)
{
    char block[32] = "", beside[32] = "", conv[160] = "";
    if (want_block) snprintf(block, sizeof(block), " block=%d", want_block);
    if (g->im2col)
        snprintf(conv, sizeof(conv), " im2col=%lldx%lldx%lld,%lldx%lld,s%lldx%lld,p%lldx%lld,d%lldx%lld,o%lldx%lld",
                 (long long)g->cv.h, (long long)g->cv.w, (long long)g->cv.c, (long long)g->cv.kh,
                 (long long)g->cv.kw, (long long)g->cv.sh, (long long)g->cv.sw, (long long)g->cv.ph,
                 (long long)g->cv.pw, (long long)g->cv.dh, (long long)g->cv.dw, (long long)g->cv.oh,
                 (long long)g->cv.ow);
    if (share > 1) snprintf(beside, sizeof(beside), " share=%d", share);
    snprintf(key, n,
             "gemm %s %s.%s m=%lld n=%lld k=%lld batch=%lld la=%d lb=%d out=%s bias=%s/%lld/%lld res=%s act=%d%s%s%s",
             g->tc ? "tc" : "simt", kiln_dtype_name(g->sa), kiln_dtype_name(g->sb), (long long)g->m, (long long)g->n,
             (long long)g->k, (long long)g->n_batch, g->la, g->lb, kiln_dtype_name(g->sy),
             g->ep.bias ? kiln_dtype_name(g->sbias) : "-", (long long)g->bias_rs, (long long)g->bias_cs,
             g->ep.residual ? kiln_dtype_name(g->sres) : "-", (int)g->ep.act, conv, block, beside);
}

bool cg_gemm_siblings(cg_emitter *e, const sched_group *a, const sched_group *b)
{
    if (a->kind != SCHED_GROUP_GEMM || b->kind != SCHED_GROUP_GEMM || !a->n_nodes || !b->n_nodes) return false;
    base_diag *saved = e->d, scratch;
    base_diag_init(&scratch);
    e->d = &scratch; /* a group the analysis refuses is nobody's sibling; its error comes when it is emitted */
    gemm_problem x, y;
    bool same = gemm_analyse(e, a, &x) == KILN_OK && gemm_analyse(e, b, &y) == KILN_OK && x.a == y.a &&
                ir_numel(&x.y->t) > 0 && x.tma == y.tma;
    e->d = saved;
    base_diag_free(&scratch);
    char kx[512], ky[512];
    if (same) {
        gemm_key(&x, 0, 1, kx, sizeof(kx));
        gemm_key(&y, 0, 1, ky, sizeof(ky));
    }
    return same && strcmp(kx, ky) == 0;
}

/* The configuration: the tuning database's or the tuner's choice, else the
 * cost model's. Beside share - 1 identical products (one wave, or one
 * stage of a persistent kernel), the tiles of all of them share the
 * multiprocessors: the cost model prices the lot (share times the batch),
 * and the tuner times share copies of the rTasks in one launch. BERT-base
 * at batch 16: query, key and value each alone pick 128 x 96 tiles (128
 * per product), together 192 x 192 (44 each: one wave of 132), as the
 * fused 2048 x 2304 product does. */
kiln_status cg_emit_gemm(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    gemm_problem g;
    gemm_cfg cands[MAX_CANDS];
    KILN_TRY(gemm_analyse(e, grp, &g));
    if (ir_numel(&g.y->t) == 0) return emit_empty(e, grp, op);
    int share = gemm_share(e, grp);
    int n = sized_candidates(&g, &e->gpu, e->want_block, cg_mono_regs(e), e->narrow_ok, share, e->wave_shared, cands);
    gemm_problem all = g;
    all.n_batch *= share;
    /* a wave's most efficient rKernels, and a stage's best fit, are the cost
     * model's, whatever the tuner measured alone */
    int pick = gemm_heuristic(e, &all, cands, n);
    if (!e->wave_efficient && !e->stage_load && n > 1) {
        char key[512];
        gemm_key(&g, e->want_block, share, key, sizeof(key));
        cg_tune_key_cands(key, sizeof(key), cands, (size_t)n * sizeof(cands[0]));
        e->tune_share = share;
        int tuned = cg_tune_choose(e, grp, key, n, pick, emit_candidate);
        e->tune_share = 1;
        if (tuned >= 0 && tuned < n) pick = tuned;
    }
    KILN_TRY(emit_op(e, grp, &g, &cands[pick], op));
    /* this product's share of what the cost model prices for all of them */
    op->est_clk = gemm_cost(&all, &cands[pick], &e->gpu, e->mono_per_sm) / share;
    return KILN_OK;
}
