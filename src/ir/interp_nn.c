/*
 * interp_nn.c: the reference interpreter's neural-network ops: the
 * contractions (MatMul, MatMulInteger, QLinearMatMul, Gemm, Conv,
 * ConvInteger, QLinearConv, ConvTranspose, Einsum), the pools (AveragePool,
 * MaxPool, LpPool and their Global forms, MaxUnpool), the normalizations
 * (BatchNormalization, InstanceNormalization, LRN) and Det.
 *
 * Everything is computed in double, or in int64 with uint64 wrapping for
 * integer MatMul, Gemm and Einsum, and converted once into the output dtype.
 * Whole models (ResNet-50, BERT) run through this file, so the two hot loops
 * stream through memory instead of chasing indices: matmuls are tiled i-k-j
 * loops over double copies of the operands, and convolutions are direct
 * loops that, for each weight, add a shifted input row into an accumulator
 * row, with the padding bounds worked out once per row rather than per
 * element (a 1x1 convolution is a plain matmul).
 *
 * The quantized ops (ConvInteger, QLinearConv) subtract their zero points up
 * front and reuse the double convolution: products of 8-bit values summed in
 * double are exact integers as long as the sum stays below 2^53, which is
 * checked against the kernel size. Requantization follows the ONNX reference:
 * the multiplier scale_a * scale_b / scale_y is formed in float32 when the
 * scales are float32, the product in double, then rounded half to even and
 * saturated.
 *
 * Spatial ops handle 1 to 3 spatial dims by padding their geometry to 3 dims
 * with leading size-1 dims, so one loop nest serves all three.
 */
#include "ir/interp_ops.h"

#include <math.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

/* Input i when given, NULL when omitted. */
static const ir_tensor *opt_in(const ir_eval *e, int i) { return ir_eval_has(e, i) ? e->in[i] : NULL; }

static kiln_status req_in(ir_eval *e, int i, const char *what, const ir_tensor **t)
{
    *t = opt_in(e, i);
    if (!*t) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input %d (%s) is missing", i, what);
    return KILN_OK;
}

static kiln_status need_float(ir_eval *e, const ir_tensor *t, const char *what)
{
    if (ir_dtype_is_float(t->dtype)) return KILN_OK;
    return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s must be a float tensor, not %s", what,
                        kiln_dtype_name(t->dtype));
}

static kiln_status need_dtype(ir_eval *e, const ir_tensor *t, kiln_dtype want, const char *what)
{
    if (t->dtype == want) return KILN_OK;
    return ir_eval_fail(e, KILN_ERR_SHAPE, "%s has dtype %s, expected %s", what, kiln_dtype_name(t->dtype),
                        kiln_dtype_name(want));
}

static bool is_8bit(kiln_dtype t) { return t == KILN_U8 || t == KILN_I8; }

static kiln_status need_8bit(ir_eval *e, const ir_tensor *t, const char *what)
{
    if (is_8bit(t->dtype)) return KILN_OK;
    return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s must be uint8 or int8, not %s", what,
                        kiln_dtype_name(t->dtype));
}

static kiln_status oom(ir_eval *e) { return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for temporaries"); }

/* n elements of size bytes, zeroed, at least one element; NULL on overflow or OOM. */
static void *zalloc(int64_t n, size_t size)
{
    if (n < 0) return NULL;
    return base_calloc((size_t)(n ? n : 1), size);
}

static kiln_status load_f64(ir_eval *e, const ir_tensor *t, double **out)
{
    *out = ir_to_f64(t);
    return *out ? KILN_OK : oom(e);
}

static kiln_status load_i64(ir_eval *e, const ir_tensor *t, int64_t **out)
{
    *out = ir_to_i64(t);
    return *out ? KILN_OK : oom(e);
}

static kiln_status alloc_f64(ir_eval *e, int64_t n, double **out)
{
    *out = zalloc(n, sizeof(double));
    return *out ? KILN_OK : oom(e);
}

static kiln_status alloc_i64(ir_eval *e, int64_t n, int64_t **out)
{
    *out = zalloc(n, sizeof(int64_t));
    return *out ? KILN_OK : oom(e);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The range [lo, hi) of o in [0, n_o) for which o * step + off lies in [0, n_i).
 * Hoists the padding checks out of the convolution and pool inner loops. */
static void valid_range(int64_t off, int64_t step, int64_t n_i, int64_t n_o, int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + step - 1) / step;
    int64_t h = n_i - off <= 0 ? 0 : (n_i - off - 1) / step + 1;
    if (h > n_o) h = n_o;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Saturating requantization: round half to even, then clamp into the 8-bit dtype. */
static int64_t saturate(double v, kiln_dtype t)
{
    double lo = t == KILN_I8 ? -128 : 0, hi = t == KILN_I8 ? 127 : 255;
    v = nearbyint(v);
    if (!(v >= lo)) return (int64_t)lo; /* also NaN */
    if (v > hi) return (int64_t)hi;
    return (int64_t)v;
}

/* scale_a * scale_b / scale_y as the ONNX reference forms it: in float32 when
 * all scales are float32 (numpy keeps float32 there), else in double. */
static double requant_mult(bool f32, double sa, double sb, double sy)
{
    if (f32) {
        float p = (float)sa * (float)sb;
        return (double)(p / (float)sy);
    }
    return sa * sb / sy;
}

/* C[m][n] (row stride ldc) += A * B, with A's element (i, p) at
 * a[i * a_rs + p * a_cs] and B row-major [k][n] with row stride ldb.
 * Tiled so a 64 x 256 block of B stays in L2 while every row of A sweeps
 * it; four rows of B per pass halve the accumulator's loads and stores. */
static void gemm_f64(int64_t m, int64_t n, int64_t k, const double *a, int64_t a_rs, int64_t a_cs,
                     const double *b, int64_t ldb, double *c, int64_t ldc)
{
    enum { NB = 256, KB = 64 };
    for (int64_t j0 = 0; j0 < n; j0 += NB) {
        int64_t jn = KILN_MIN(n - j0, (int64_t)NB);
        for (int64_t p0 = 0; p0 < k; p0 += KB) {
            int64_t p1 = KILN_MIN(k, p0 + KB);
            for (int64_t i = 0; i < m; i++) {
                double *restrict cr = c + i * ldc + j0;
                const double *ar = a + i * a_rs;
                int64_t p = p0;
                for (; p + 4 <= p1; p += 4) {
                    double a0 = ar[p * a_cs], a1 = ar[(p + 1) * a_cs];
                    double a2 = ar[(p + 2) * a_cs], a3 = ar[(p + 3) * a_cs];
                    const double *restrict b0 = b + p * ldb + j0;
                    const double *restrict b1 = b0 + ldb;
                    const double *restrict b2 = b1 + ldb;
                    const double *restrict b3 = b2 + ldb;
                    for (int64_t j = 0; j < jn; j++) cr[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
                }
                for (; p < p1; p++) {
                    double a0 = ar[p * a_cs];
                    const double *restrict b0 = b + p * ldb + j0;
                    for (int64_t j = 0; j < jn; j++) cr[j] += a0 * b0[j];
                }
            }
        }
    }
}

/* Integer C[m][n] += A[m][k] * B[k][n], all row-major, wrapping in uint64. */
static void gemm_i64(int64_t m, int64_t n, int64_t k, const int64_t *a, int64_t a_rs, int64_t a_cs,
                     const int64_t *b, int64_t *c)
{
    for (int64_t i = 0; i < m; i++) {
        uint64_t *cr = (uint64_t *)(c + i * n);
        for (int64_t p = 0; p < k; p++) {
            uint64_t av = (uint64_t)a[i * a_rs + p * a_cs];
            const int64_t *br = b + p * n;
            for (int64_t j = 0; j < n; j++) cr[j] += av * (uint64_t)br[j];
        }
    }
}

/* ---- MatMul, MatMulInteger, QLinearMatMul ----------------------------------- */

/* A [..., m, k] times B [..., k, n] with numpy batch broadcasting; a 1-D A is
 * a row [1, k] and a 1-D B a column [k, 1], whose unit dim the output drops. */
typedef struct mm_dims {
    int64_t m, n, k;
    int batch_rank;
    int64_t batch[IR_MAX_RANK];
    int64_t n_batch;
    int out_rank;
    int64_t out_dims[IR_MAX_RANK];
} mm_dims;

static kiln_status matmul_dims(ir_eval *e, const ir_tensor *a, const ir_tensor *b, mm_dims *d)
{
    char sa[96], sb[96];
    if (a->rank < 1 || b->rank < 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "operands must have rank >= 1, got %s and %s",
                            ir_tensor_type_str(a, sa, sizeof sa), ir_tensor_type_str(b, sb, sizeof sb));
    d->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    d->k = a->dims[a->rank - 1];
    int64_t kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
    d->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if (kb != d->k)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "inner dimensions differ: %s times %s",
                            ir_tensor_type_str(a, sa, sizeof sa), ir_tensor_type_str(b, sb, sizeof sb));
    int ra = KILN_MAX(a->rank - 2, 0), rb = KILN_MAX(b->rank - 2, 0);
    d->batch_rank = KILN_MAX(ra, rb);
    d->n_batch = 1;
    for (int i = 0; i < d->batch_rank; i++) {
        int ia = i - (d->batch_rank - ra), ib = i - (d->batch_rank - rb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "batch dimensions do not broadcast: %s times %s",
                                ir_tensor_type_str(a, sa, sizeof sa), ir_tensor_type_str(b, sb, sizeof sb));
        d->batch[i] = da == 1 ? db : da;
        d->n_batch *= d->batch[i];
    }
    d->out_rank = 0;
    for (int i = 0; i < d->batch_rank; i++) d->out_dims[d->out_rank++] = d->batch[i];
    if (a->rank >= 2) d->out_dims[d->out_rank++] = d->m;
    if (b->rank >= 2) d->out_dims[d->out_rank++] = d->n;
    return KILN_OK;
}

/* For each output batch, the linear index of x's batch (x's batch dims are
 * right-aligned to the output's and broadcast where they are 1). */
static void batch_index(const mm_dims *d, const ir_tensor *x, int64_t *out)
{
    int rx = KILN_MAX(x->rank - 2, 0);
    int64_t idx[IR_MAX_RANK] = {0};
    for (int64_t bi = 0; bi < d->n_batch; bi++) {
        int64_t lin = 0, stride = 1;
        for (int i = d->batch_rank - 1, ix = rx - 1; ix >= 0; i--, ix--) {
            if (x->dims[ix] != 1) lin += idx[i] * stride;
            stride *= x->dims[ix];
        }
        out[bi] = lin;
        for (int i = d->batch_rank - 1; i >= 0; i--) {
            if (++idx[i] < d->batch[i]) break;
            idx[i] = 0;
        }
    }
}

/* A quantization parameter (zero point or scale) of matmul operand x is a
 * scalar, one value per row of A / per column of B, or an N-D tensor that
 * broadcasts to x's shape with the contracted axis set to 1 ([..., m, 1] for
 * A, [..., 1, n] for B). Checks q and, when out is given, expands it to one
 * value per entry of that shape. A 1-D per-row parameter of A reads as
 * [m, 1]. */
static kiln_status qparam_expand(ir_eval *e, const ir_tensor *q, const ir_tensor *x, bool is_a,
                                 const char *what, double *out)
{
    ir_tensor target = *x;
    int axis = is_a || x->rank == 1 ? x->rank - 1 : x->rank - 2;
    target.dims[axis] = 1;
    int64_t n = ir_numel(&target);
    if (ir_numel(q) == 1) {
        if (out) {
            double v = ir_get_f64(q, 0);
            for (int64_t i = 0; i < n; i++) out[i] = v;
        }
        return KILN_OK;
    }
    ir_tensor view = *q;
    if (is_a && q->rank == 1 && x->rank >= 2) {
        view.rank = 2;
        view.dims[0] = q->dims[0];
        view.dims[1] = 1;
    }
    bool ok = view.rank <= target.rank;
    for (int i = 0; ok && i < view.rank; i++) {
        int64_t dv = view.dims[view.rank - 1 - i], dt = target.dims[target.rank - 1 - i];
        ok = dv == 1 || dv == dt;
    }
    if (!ok) {
        char sq[96], sx[96];
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s %s does not fit operand %s (per tensor, per %s or broadcast)",
                            what, ir_tensor_type_str(q, sq, sizeof sq), ir_tensor_type_str(x, sx, sizeof sx),
                            is_a ? "row" : "column");
    }
    if (!out) return KILN_OK;
    const ir_tensor *ts[1] = {&view};
    ir_bcast it;
    ir_bcast_init(&it, target.rank, target.dims, 1, ts);
    for (int64_t i = 0; i < n; i++, ir_bcast_next(&it)) out[i] = ir_get_f64(q, it.off[0]);
    return KILN_OK;
}

/* Number of quantization parameters qparam_expand produces for x. */
static int64_t qparam_count(const ir_tensor *x, bool is_a)
{
    int axis = is_a || x->rank == 1 ? x->rank - 1 : x->rank - 2;
    int64_t n = 1;
    for (int i = 0; i < x->rank; i++)
        if (i != axis) n *= x->dims[i];
    return n;
}

static kiln_status matmul_float(ir_eval *e, const ir_tensor *a, const ir_tensor *b, const mm_dims *d)
{
    kiln_status st;
    double *a64 = NULL, *b64 = NULL, *y = NULL;
    int64_t *ai = NULL, *bi = NULL;
    if ((st = load_f64(e, a, &a64)) || (st = load_f64(e, b, &b64)) ||
        (st = alloc_f64(e, d->n_batch * d->m * d->n, &y)) || (st = alloc_i64(e, d->n_batch, &ai)) ||
        (st = alloc_i64(e, d->n_batch, &bi)))
        goto done;
    batch_index(d, a, ai);
    batch_index(d, b, bi);
    for (int64_t t = 0; t < d->n_batch; t++)
        gemm_f64(d->m, d->n, d->k, a64 + ai[t] * d->m * d->k, d->k, 1, b64 + bi[t] * d->k * d->n, d->n,
                 y + t * d->m * d->n, d->n);
    ir_from_f64(&e->out[0], y);
done:
    base_free(a64);
    base_free(b64);
    base_free(y);
    base_free(ai);
    base_free(bi);
    return st;
}

/* The integer matmuls: MatMul on integers, MatMulInteger and QLinearMatMul.
 * Zero points are subtracted up front; the exact int64 products are then
 * either the output (int32 for MatMulInteger) or requantized. */
static kiln_status matmul_int(ir_eval *e, const ir_tensor *a, const ir_tensor *b, const mm_dims *d)
{
    kiln_op op = e->node->op;
    bool qlinear = op == KILN_OP_QLINEAR_MAT_MUL;
    /* a_zero_point is input 2 of both quantized forms; b_zero_point is 3 or 5. */
    const ir_tensor *azp = op == KILN_OP_MAT_MUL ? NULL : opt_in(e, 2);
    const ir_tensor *bzp = op == KILN_OP_MAT_MUL ? NULL : opt_in(e, qlinear ? 5 : 3);
    int64_t na = qparam_count(a, true), nb = qparam_count(b, false), nout = d->n_batch * d->m * d->n;
    kiln_status st;
    int64_t *a64 = NULL, *b64 = NULL, *acc = NULL, *ai = NULL, *bi = NULL;
    double *pa = NULL, *pb = NULL, *sa = NULL, *sb = NULL;
    if ((st = load_i64(e, a, &a64)) || (st = load_i64(e, b, &b64)) || (st = alloc_i64(e, nout, &acc)) ||
        (st = alloc_i64(e, d->n_batch, &ai)) || (st = alloc_i64(e, d->n_batch, &bi)) ||
        (st = alloc_f64(e, na, &pa)) || (st = alloc_f64(e, nb, &pb)))
        goto done;
    if (azp) {
        if ((st = qparam_expand(e, azp, a, true, "a_zero_point", pa))) goto done;
        for (int64_t r = 0; r < na; r++)
            for (int64_t p = 0; p < d->k; p++) a64[r * d->k + p] -= (int64_t)pa[r];
    }
    if (bzp) {
        /* B's parameters are [batch, 1, n]: element (t, p, j) uses entry (t, j). */
        if ((st = qparam_expand(e, bzp, b, false, "b_zero_point", pb))) goto done;
        for (int64_t r = 0; r < nb; r++) {
            int64_t t = r / d->n, j = r % d->n;
            for (int64_t p = 0; p < d->k; p++) b64[(t * d->k + p) * d->n + j] -= (int64_t)pb[r];
        }
    }
    batch_index(d, a, ai);
    batch_index(d, b, bi);
    for (int64_t t = 0; t < d->n_batch; t++)
        gemm_i64(d->m, d->n, d->k, a64 + ai[t] * d->m * d->k, d->k, 1, b64 + bi[t] * d->k * d->n,
                 acc + t * d->m * d->n);
    if (!qlinear) {
        ir_from_i64(&e->out[0], acc);
        goto done;
    }

    const ir_tensor *as = e->in[1], *bs = e->in[4], *ys = e->in[6], *yzp = opt_in(e, 7);
    kiln_dtype out_dt = e->out[0].dtype;
    bool f32 = as->dtype == KILN_F32 && bs->dtype == KILN_F32 && ys->dtype == KILN_F32;
    double y_scale = ir_get_f64(ys, 0), y_zp = yzp ? (double)ir_get_i64(yzp, 0) : 0;
    if ((st = alloc_f64(e, na, &sa)) || (st = alloc_f64(e, nb, &sb)) ||
        (st = qparam_expand(e, as, a, true, "a_scale", sa)) || (st = qparam_expand(e, bs, b, false, "b_scale", sb)))
        goto done;
    for (int64_t t = 0; t < d->n_batch; t++)
        for (int64_t i = 0; i < d->m; i++)
            for (int64_t j = 0; j < d->n; j++) {
                int64_t o = (t * d->m + i) * d->n + j;
                double mult = requant_mult(f32, sa[ai[t] * d->m + i], sb[bi[t] * d->n + j], y_scale);
                acc[o] = saturate((double)acc[o] * mult + y_zp, out_dt);
            }
    ir_from_i64(&e->out[0], acc);
done:
    base_free(a64);
    base_free(b64);
    base_free(acc);
    base_free(ai);
    base_free(bi);
    base_free(pa);
    base_free(pb);
    base_free(sa);
    base_free(sb);
    return st;
}

/* Checks a per-tensor quantization parameter: one element. */
static kiln_status need_scalar(ir_eval *e, const ir_tensor *t, const char *what)
{
    if (ir_numel(t) == 1) return KILN_OK;
    char s[96];
    return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s must hold one value (per-tensor), got %s", what,
                        ir_tensor_type_str(t, s, sizeof s));
}

static kiln_status check_qlinear_matmul(ir_eval *e, const ir_tensor *a, const ir_tensor *b, kiln_dtype *out_dt)
{
    static const char *const names[8] = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point",
                                         "y_scale", "y_zero_point"};
    const ir_tensor *t[8];
    for (int i = 0; i < 8; i++) {
        t[i] = opt_in(e, i);
        if (!t[i] && i != 2 && i != 5 && i != 7)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input %d (%s) is missing", i, names[i]);
    }
    KILN_TRY(need_8bit(e, a, "a"));
    KILN_TRY(need_8bit(e, b, "b"));
    KILN_TRY(need_float(e, t[1], "a_scale"));
    KILN_TRY(need_float(e, t[4], "b_scale"));
    KILN_TRY(need_float(e, t[6], "y_scale"));
    KILN_TRY(qparam_expand(e, t[1], a, true, "a_scale", NULL));
    KILN_TRY(qparam_expand(e, t[4], b, false, "b_scale", NULL));
    KILN_TRY(need_scalar(e, t[6], "y_scale"));
    if (t[2]) {
        KILN_TRY(need_dtype(e, t[2], a->dtype, "a_zero_point"));
        KILN_TRY(qparam_expand(e, t[2], a, true, "a_zero_point", NULL));
    }
    if (t[5]) {
        KILN_TRY(need_dtype(e, t[5], b->dtype, "b_zero_point"));
        KILN_TRY(qparam_expand(e, t[5], b, false, "b_zero_point", NULL));
    }
    *out_dt = a->dtype;
    if (t[7]) {
        KILN_TRY(need_8bit(e, t[7], "y_zero_point"));
        KILN_TRY(need_scalar(e, t[7], "y_zero_point"));
        *out_dt = t[7]->dtype;
    }
    return KILN_OK;
}

kiln_status ir_eval_matmul(ir_eval *e)
{
    kiln_op op = e->node->op;
    const ir_tensor *a, *b;
    KILN_TRY(req_in(e, 0, "A", &a));
    KILN_TRY(req_in(e, op == KILN_OP_QLINEAR_MAT_MUL ? 3 : 1, "B", &b));
    mm_dims d;
    KILN_TRY(matmul_dims(e, a, b, &d));
    kiln_dtype out_dt = KILN_UNDEF;
    if (op == KILN_OP_MAT_MUL) {
        if (a->dtype != b->dtype)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "A is %s but B is %s", kiln_dtype_name(a->dtype),
                                kiln_dtype_name(b->dtype));
        if (!ir_dtype_is_float(a->dtype) && !ir_dtype_is_int(a->dtype))
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "MatMul of %s is not supported", kiln_dtype_name(a->dtype));
        out_dt = a->dtype;
    } else if (op == KILN_OP_MAT_MUL_INTEGER) {
        KILN_TRY(need_8bit(e, a, "A"));
        KILN_TRY(need_8bit(e, b, "B"));
        const ir_tensor *azp = opt_in(e, 2), *bzp = opt_in(e, 3);
        if (azp) {
            KILN_TRY(need_dtype(e, azp, a->dtype, "a_zero_point"));
            KILN_TRY(qparam_expand(e, azp, a, true, "a_zero_point", NULL));
        }
        if (bzp) {
            KILN_TRY(need_dtype(e, bzp, b->dtype, "b_zero_point"));
            KILN_TRY(qparam_expand(e, bzp, b, false, "b_zero_point", NULL));
        }
        out_dt = KILN_I32;
    } else {
        KILN_TRY(check_qlinear_matmul(e, a, b, &out_dt));
    }
    KILN_TRY(ir_eval_out(e, 0, out_dt, d.out_rank, d.out_dims));
    if (e->infer) return KILN_OK;
    if (op == KILN_OP_MAT_MUL && ir_dtype_is_float(a->dtype)) return matmul_float(e, a, b, &d);
    return matmul_int(e, a, b, &d);
}

/* ---- Gemm ----------------------------------------------------------------------- */

/* Offset of C's element broadcast to (i, j) of [m, n]. */
static int64_t gemm_c_index(const ir_tensor *c, int64_t i, int64_t j)
{
    if (c->rank == 0) return 0;
    if (c->rank == 1) return c->dims[0] == 1 ? 0 : j;
    return (c->dims[0] == 1 ? 0 : i) * c->dims[1] + (c->dims[1] == 1 ? 0 : j);
}

static kiln_status gemm_float(ir_eval *e, const ir_tensor *a, const ir_tensor *b, const ir_tensor *c, bool ta,
                              bool tb, double alpha, double beta, int64_t m, int64_t n, int64_t k)
{
    kiln_status st;
    double *a64 = NULL, *b64 = NULL, *bt = NULL, *c64 = NULL, *y = NULL;
    if ((st = load_f64(e, a, &a64)) || (st = load_f64(e, b, &b64)) || (st = alloc_f64(e, m * n, &y)))
        goto done;
    if (c && beta != 0 && (st = load_f64(e, c, &c64))) goto done;
    const double *bk = b64;
    if (tb) {
        /* The inner loop wants B's rows contiguous: transpose [n, k] once. */
        if ((st = alloc_f64(e, k * n, &bt))) goto done;
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < k; p++) bt[p * n + j] = b64[j * k + p];
        bk = bt;
    }
    gemm_f64(m, n, k, a64, ta ? 1 : k, ta ? m : 1, bk, n, y, n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double v = alpha * y[i * n + j];
            if (c64) v += beta * c64[gemm_c_index(c, i, j)];
            y[i * n + j] = v;
        }
    ir_from_f64(&e->out[0], y);
done:
    base_free(a64);
    base_free(b64);
    base_free(bt);
    base_free(c64);
    base_free(y);
    return st;
}

static kiln_status gemm_int(ir_eval *e, const ir_tensor *a, const ir_tensor *b, const ir_tensor *c, bool ta,
                            bool tb, double alpha, double beta, int64_t m, int64_t n, int64_t k)
{
    if (alpha != floor(alpha) || beta != floor(beta) || fabs(alpha) > 9e18 || fabs(beta) > 9e18)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "integer Gemm with non-integral alpha %g or beta %g", alpha,
                            beta);
    kiln_status st;
    int64_t *a64 = NULL, *b64 = NULL, *bt = NULL, *c64 = NULL, *y = NULL;
    if ((st = load_i64(e, a, &a64)) || (st = load_i64(e, b, &b64)) || (st = alloc_i64(e, m * n, &y))) goto done;
    if (c && (st = load_i64(e, c, &c64))) goto done;
    const int64_t *bk = b64;
    if (tb) {
        if ((st = alloc_i64(e, k * n, &bt))) goto done;
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < k; p++) bt[p * n + j] = b64[j * k + p];
        bk = bt;
    }
    gemm_i64(m, n, k, a64, ta ? 1 : k, ta ? m : 1, bk, y);
    uint64_t ia = (uint64_t)(int64_t)alpha, ib = (uint64_t)(int64_t)beta;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            uint64_t v = ia * (uint64_t)y[i * n + j];
            if (c64) v += ib * (uint64_t)c64[gemm_c_index(c, i, j)];
            y[i * n + j] = (int64_t)v;
        }
    ir_from_i64(&e->out[0], y);
done:
    base_free(a64);
    base_free(b64);
    base_free(bt);
    base_free(c64);
    base_free(y);
    return st;
}

kiln_status ir_eval_gemm(ir_eval *e)
{
    const ir_tensor *a, *b, *c = opt_in(e, 2);
    KILN_TRY(req_in(e, 0, "A", &a));
    KILN_TRY(req_in(e, 1, "B", &b));
    bool ta = ir_eval_attr_int(e, "transA", 0) != 0, tb = ir_eval_attr_int(e, "transB", 0) != 0;
    double alpha = ir_eval_attr_float(e, "alpha", 1.0), beta = ir_eval_attr_float(e, "beta", 1.0);
    char sa[96], sb[96];
    if (a->rank != 2 || b->rank != 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "A and B must be matrices, got %s and %s",
                            ir_tensor_type_str(a, sa, sizeof sa), ir_tensor_type_str(b, sb, sizeof sb));
    if (a->dtype != b->dtype || (c && c->dtype != a->dtype))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "A, B and C must share a dtype: %s, %s, %s",
                            kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype),
                            c ? kiln_dtype_name(c->dtype) : "-");
    if (!ir_dtype_is_float(a->dtype) && !ir_dtype_is_int(a->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "Gemm of %s is not supported", kiln_dtype_name(a->dtype));
    int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
    int64_t kb = tb ? b->dims[1] : b->dims[0], n = tb ? b->dims[0] : b->dims[1];
    if (k != kb)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "inner dimensions differ: %s%s times %s%s",
                            ir_tensor_type_str(a, sa, sizeof sa), ta ? "^T" : "",
                            ir_tensor_type_str(b, sb, sizeof sb), tb ? "^T" : "");
    if (c) {
        bool ok = c->rank <= 2;
        int64_t want[2] = {m, n};
        for (int i = 0; ok && i < c->rank; i++) {
            int64_t dc = c->dims[c->rank - 1 - i], dw = want[1 - i];
            ok = dc == 1 || dc == dw;
        }
        if (!ok)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "C %s does not broadcast to [%lld,%lld]",
                                ir_tensor_type_str(c, sa, sizeof sa), (long long)m, (long long)n);
    }
    int64_t dims[2] = {m, n};
    KILN_TRY(ir_eval_out(e, 0, a->dtype, 2, dims));
    if (e->infer) return KILN_OK;
    if (ir_dtype_is_float(a->dtype)) return gemm_float(e, a, b, c, ta, tb, alpha, beta, m, n, k);
    return gemm_int(e, a, b, c, ta, tb, alpha, beta, m, n, k);
}

/* ---- convolution and pooling geometry --------------------------------------------- */

enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

/* Attribute values beyond this are nonsense and would overflow the size arithmetic. */
#define GEOM_LIMIT ((int64_t)1 << 31)

static kiln_status read_auto_pad(ir_eval *e, int *ap)
{
    const char *s = ir_eval_attr_str(e, "auto_pad", "NOTSET");
    if (!strcmp(s, "NOTSET") || !*s) *ap = PAD_NOTSET;
    else if (!strcmp(s, "SAME_UPPER")) *ap = PAD_SAME_UPPER;
    else if (!strcmp(s, "SAME_LOWER")) *ap = PAD_SAME_LOWER;
    else if (!strcmp(s, "VALID")) *ap = PAD_VALID;
    else
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID",
                            s);
    return KILN_OK;
}

/* An ints attribute of exactly n values in [lo, GEOM_LIMIT]; def fills it when
 * absent (or given empty, as some exporters write it). */
static kiln_status read_ints(ir_eval *e, const char *name, int n, int64_t lo, int64_t def, int64_t *out)
{
    const int64_t *v = NULL;
    int cnt = ir_eval_attr_ints(e, name, &v);
    if (cnt <= 0) {
        for (int i = 0; i < n; i++) out[i] = def;
        return KILN_OK;
    }
    if (cnt != n) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "%s has %d values, expected %d", name, cnt, n);
    for (int i = 0; i < n; i++) {
        if (v[i] < lo || v[i] > GEOM_LIMIT)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "%s[%d] = %lld is out of range", name, i,
                                (long long)v[i]);
        out[i] = v[i];
    }
    return KILN_OK;
}

/* Spatial geometry padded to 3 dims: slot 3 - nsp + i holds spatial dim i;
 * the leading unused slots are size 1 with unit kernel, stride and dilation. */
typedef struct geom {
    int nsp;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t in_vol, out_vol, k_vol;
} geom;

/* Rank check shared by the spatial ops: [N, C, D1..Dn] with 1 <= n <= 3. */
static kiln_status need_spatial(ir_eval *e, const ir_tensor *x, const char *what)
{
    char s[96];
    if (x->rank < 3)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s must be [N, C, spatial...], got %s", what,
                            ir_tensor_type_str(x, s, sizeof s));
    if (x->rank > 5)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s %s has %d spatial dims; only 1 to 3 are supported", what,
                            ir_tensor_type_str(x, s, sizeof s), x->rank - 2);
    return KILN_OK;
}

/* Fills in, k, strides, dilations and the explicit pads from x's spatial dims,
 * the kernel and the attributes; out is left to the caller. */
static kiln_status geom_init(ir_eval *e, const ir_tensor *x, const int64_t *kernel, geom *g)
{
    int nsp = x->rank - 2;
    int64_t s[3], d[3], p[6];
    KILN_TRY(read_ints(e, "strides", nsp, 1, 1, s));
    KILN_TRY(read_ints(e, "dilations", nsp, 1, 1, d));
    KILN_TRY(read_ints(e, "pads", 2 * nsp, 0, 0, p));
    g->nsp = nsp;
    for (int j = 0; j < 3; j++) {
        int i = j - (3 - nsp);
        bool real = i >= 0;
        g->in[j] = real ? x->dims[2 + i] : 1;
        g->out[j] = 1;
        g->k[j] = real ? kernel[i] : 1;
        g->s[j] = real ? s[i] : 1;
        g->d[j] = real ? d[i] : 1;
        g->pb[j] = real ? p[i] : 0;
        g->pe[j] = real ? p[nsp + i] : 0;
    }
    return KILN_OK;
}

static void geom_volumes(geom *g)
{
    g->in_vol = g->in[0] * g->in[1] * g->in[2];
    g->out_vol = g->out[0] * g->out[1] * g->out[2];
    g->k_vol = g->k[0] * g->k[1] * g->k[2];
}

/* Output size and final pads of a sliding window (Conv and the pools):
 * SAME_* pads so that out = ceil(in / stride), putting the odd pixel at the
 * end (UPPER) or the start (LOWER); ceil_mode rounds the last partial window
 * up unless it would start past the input and its start padding (PyTorch's
 * rule, which the ONNX reference follows). */
static kiln_status geom_forward(ir_eval *e, geom *g, int ap, bool ceil_mode)
{
    for (int j = 3 - g->nsp; j < 3; j++) {
        int64_t dk = (g->k[j] - 1) * g->d[j] + 1;
        if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
            g->out[j] = (g->in[j] + g->s[j] - 1) / g->s[j];
            int64_t total = (g->out[j] - 1) * g->s[j] + dk - g->in[j];
            if (total < 0) total = 0;
            g->pb[j] = ap == PAD_SAME_UPPER ? total / 2 : total - total / 2;
            g->pe[j] = total - g->pb[j];
            continue;
        }
        if (ap == PAD_VALID) g->pb[j] = g->pe[j] = 0;
        int64_t span = g->in[j] + g->pb[j] + g->pe[j] - dk;
        if (span < 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE,
                                "spatial dim %d: input %lld with pads %lld+%lld is smaller than the kernel's "
                                "extent %lld",
                                j - (3 - g->nsp), (long long)g->in[j], (long long)g->pb[j], (long long)g->pe[j],
                                (long long)dk);
        g->out[j] = span / g->s[j] + 1;
        if (ceil_mode) {
            if (span % g->s[j]) g->out[j]++;
            if ((g->out[j] - 1) * g->s[j] >= g->in[j] + g->pb[j]) g->out[j]--;
        }
    }
    geom_volumes(g);
    return KILN_OK;
}

/* The kernel's spatial shape: W's trailing dims, which kernel_shape (when
 * given) must repeat. */
static kiln_status conv_kernel(ir_eval *e, const ir_tensor *w, int nsp, int64_t *kernel)
{
    char s[96];
    for (int i = 0; i < nsp; i++) {
        kernel[i] = w->dims[2 + i];
        if (kernel[i] < 1 || kernel[i] > GEOM_LIMIT)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "weight %s has an empty or huge kernel",
                                ir_tensor_type_str(w, s, sizeof s));
    }
    const int64_t *ks = NULL;
    int cnt = ir_eval_attr_ints(e, "kernel_shape", &ks);
    if (cnt <= 0) return KILN_OK;
    bool ok = cnt == nsp;
    for (int i = 0; ok && i < nsp; i++) ok = ks[i] == kernel[i];
    if (!ok)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "kernel_shape (%d values) does not match weight %s", cnt,
                            ir_tensor_type_str(w, s, sizeof s));
    return KILN_OK;
}

/* ---- Conv, ConvInteger, QLinearConv ---------------------------------------------------- */

/* acc (nb <= 4 output planes) += the correlation of cg input planes x with
 * the weights w [nb][cg][kvol] of nb consecutive output channels. For each
 * kernel position, every output row within bounds gets a shifted input row
 * added, so the inner loop is a bounds-free axpy; doing four output channels
 * at once loads each input row once for four accumulator rows. */
static void conv_direct(const geom *g, int nb, int64_t cg, const double *x, const double *w, double *acc)
{
    int64_t wstride = cg * g->k_vol, sw = g->s[2];
    for (int64_t c = 0; c < cg; c++) {
        const double *xp = x + c * g->in_vol;
        const double *wp = w + c * g->k_vol;
        for (int64_t kd = 0; kd < g->k[0]; kd++) {
            int64_t offd = kd * g->d[0] - g->pb[0], d0, d1;
            valid_range(offd, g->s[0], g->in[0], g->out[0], &d0, &d1);
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                int64_t offh = kh * g->d[1] - g->pb[1], h0, h1;
                valid_range(offh, g->s[1], g->in[1], g->out[1], &h0, &h1);
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t offw = kw * g->d[2] - g->pb[2], w0, w1;
                    valid_range(offw, g->s[2], g->in[2], g->out[2], &w0, &w1);
                    int64_t kpos = (kd * g->k[1] + kh) * g->k[2] + kw;
                    double wv[4] = {0, 0, 0, 0};
                    for (int q = 0; q < nb; q++) wv[q] = wp[q * wstride + kpos];
                    for (int64_t od = d0; od < d1; od++)
                        for (int64_t oh = h0; oh < h1; oh++) {
                            const double *restrict xr =
                                xp + ((od * g->s[0] + offd) * g->in[1] + oh * g->s[1] + offh) * g->in[2] + offw;
                            double *restrict a0 = acc + (od * g->out[1] + oh) * g->out[2];
                            if (nb == 4) {
                                double *restrict a1 = a0 + g->out_vol;
                                double *restrict a2 = a1 + g->out_vol;
                                double *restrict a3 = a2 + g->out_vol;
                                for (int64_t ow = w0; ow < w1; ow++) {
                                    double xv = xr[ow * sw];
                                    a0[ow] += wv[0] * xv;
                                    a1[ow] += wv[1] * xv;
                                    a2[ow] += wv[2] * xv;
                                    a3[ow] += wv[3] * xv;
                                }
                            } else {
                                for (int q = 0; q < nb; q++) {
                                    double *restrict aq = a0 + q * g->out_vol;
                                    for (int64_t ow = w0; ow < w1; ow++) aq[ow] += wv[q] * xr[ow * sw];
                                }
                            }
                        }
                }
            }
        }
    }
}

/* Inputs of the three convolutions, by role. */
typedef struct conv_args {
    const ir_tensor *x, *w, *bias;
    const ir_tensor *x_zp, *w_zp;             /* ConvInteger, QLinearConv */
    const ir_tensor *x_scale, *w_scale, *y_scale, *y_zp; /* QLinearConv */
    int64_t group;
} conv_args;

/* A per-tensor or per-output-channel parameter of m channels. */
static kiln_status need_per_channel(ir_eval *e, const ir_tensor *t, int64_t m, const char *what)
{
    int64_t n = ir_numel(t);
    if (n == 1 || (t->rank == 1 && n == m)) return KILN_OK;
    char s[96];
    return ir_eval_fail(e, KILN_ERR_SHAPE, "%s %s must hold 1 or %lld (output channels) values", what,
                        ir_tensor_type_str(t, s, sizeof s), (long long)m);
}

static kiln_status conv_check_quant(ir_eval *e, conv_args *ca, int64_t m, kiln_dtype *out_dt)
{
    kiln_op op = e->node->op;
    KILN_TRY(need_8bit(e, ca->x, "x"));
    KILN_TRY(need_8bit(e, ca->w, "w"));
    if (ca->x_zp) {
        KILN_TRY(need_dtype(e, ca->x_zp, ca->x->dtype, "x_zero_point"));
        KILN_TRY(need_scalar(e, ca->x_zp, "x_zero_point"));
    }
    if (ca->w_zp) {
        KILN_TRY(need_dtype(e, ca->w_zp, ca->w->dtype, "w_zero_point"));
        KILN_TRY(need_per_channel(e, ca->w_zp, m, "w_zero_point"));
    }
    if (op == KILN_OP_CONV_INTEGER) {
        *out_dt = KILN_I32;
        return KILN_OK;
    }
    if (!ca->x_scale || !ca->w_scale || !ca->y_scale)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "x_scale, w_scale and y_scale are required");
    KILN_TRY(need_float(e, ca->x_scale, "x_scale"));
    KILN_TRY(need_float(e, ca->w_scale, "w_scale"));
    KILN_TRY(need_float(e, ca->y_scale, "y_scale"));
    KILN_TRY(need_scalar(e, ca->x_scale, "x_scale"));
    KILN_TRY(need_per_channel(e, ca->w_scale, m, "w_scale"));
    KILN_TRY(need_scalar(e, ca->y_scale, "y_scale"));
    *out_dt = ca->x->dtype;
    if (ca->y_zp) {
        KILN_TRY(need_8bit(e, ca->y_zp, "y_zero_point"));
        KILN_TRY(need_scalar(e, ca->y_zp, "y_zero_point"));
        *out_dt = ca->y_zp->dtype;
    }
    if (ca->bias) {
        KILN_TRY(need_dtype(e, ca->bias, KILN_I32, "B"));
        if (ca->bias->rank != 1 || ca->bias->dims[0] != m)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "B must be [%lld]", (long long)m);
    }
    return KILN_OK;
}

static kiln_status conv_run(ir_eval *e, const conv_args *ca, const geom *g)
{
    kiln_op op = e->node->op;
    int64_t n = ca->x->dims[0], c = ca->x->dims[1], m = ca->w->dims[0];
    int64_t cg = c / ca->group, mg = m / ca->group, kvol = g->k_vol;
    bool quant = op != KILN_OP_CONV;
    if (quant && (double)cg * (double)kvol * 65536.0 + 4294967296.0 > 9007199254740992.0)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED,
                            "kernel of %lld x %lld values is too large to accumulate exactly", (long long)cg,
                            (long long)kvol);
    kiln_status st;
    double *x64 = NULL, *w64 = NULL, *y = NULL, *b64 = NULL;
    int64_t *yi = NULL;
    int64_t n_out = n * m * g->out_vol;
    if ((st = load_f64(e, ca->x, &x64)) || (st = load_f64(e, ca->w, &w64)) || (st = alloc_f64(e, n_out, &y)))
        goto done;
    if (ca->bias && (st = load_f64(e, ca->bias, &b64))) goto done;
    if (ca->x_zp) {
        double zp = ir_get_f64(ca->x_zp, 0);
        int64_t nx = ir_numel(ca->x);
        for (int64_t i = 0; i < nx; i++) x64[i] -= zp;
    }
    if (ca->w_zp) {
        bool per = ir_numel(ca->w_zp) > 1;
        for (int64_t oc = 0; oc < m; oc++) {
            double zp = ir_get_f64(ca->w_zp, per ? oc : 0);
            for (int64_t i = 0; i < cg * kvol; i++) w64[oc * cg * kvol + i] -= zp;
        }
    }

    bool pointwise = kvol == 1;
    for (int j = 0; j < 3; j++) pointwise &= g->s[j] == 1 && g->pb[j] == 0 && g->pe[j] == 0;
    for (int64_t in = 0; in < n; in++)
        for (int64_t gi = 0; gi < ca->group; gi++) {
            const double *xg = x64 + (in * c + gi * cg) * g->in_vol;
            const double *wg = w64 + gi * mg * cg * kvol;
            double *yg = y + (in * m + gi * mg) * g->out_vol;
            if (pointwise)
                gemm_f64(mg, g->out_vol, cg, wg, cg, 1, xg, g->in_vol, yg, g->out_vol);
            else
                for (int64_t oc = 0; oc < mg; oc += 4)
                    conv_direct(g, (int)KILN_MIN(mg - oc, (int64_t)4), cg, xg, wg + oc * cg * kvol,
                                yg + oc * g->out_vol);
        }

    if (op == KILN_OP_CONV) {
        if (b64)
            for (int64_t i = 0; i < n * m; i++)
                for (int64_t p = 0; p < g->out_vol; p++) y[i * g->out_vol + p] += b64[i % m];
        ir_from_f64(&e->out[0], y);
        goto done;
    }
    if ((st = alloc_i64(e, n_out, &yi))) goto done;
    if (op == KILN_OP_CONV_INTEGER) {
        for (int64_t i = 0; i < n_out; i++) yi[i] = (int64_t)y[i];
    } else {
        kiln_dtype out_dt = e->out[0].dtype;
        bool f32 = ca->x_scale->dtype == KILN_F32 && ca->w_scale->dtype == KILN_F32 && ca->y_scale->dtype == KILN_F32;
        bool per = ir_numel(ca->w_scale) > 1;
        double xs = ir_get_f64(ca->x_scale, 0), ys = ir_get_f64(ca->y_scale, 0);
        double yzp = ca->y_zp ? ir_get_f64(ca->y_zp, 0) : 0;
        for (int64_t i = 0; i < n * m; i++) {
            int64_t oc = i % m;
            double mult = requant_mult(f32, xs, ir_get_f64(ca->w_scale, per ? oc : 0), ys);
            double bias = b64 ? b64[oc] : 0;
            for (int64_t p = 0; p < g->out_vol; p++) {
                int64_t o = i * g->out_vol + p;
                yi[o] = saturate((y[o] + bias) * mult + yzp, out_dt);
            }
        }
    }
    ir_from_i64(&e->out[0], yi);
done:
    base_free(x64);
    base_free(w64);
    base_free(y);
    base_free(b64);
    base_free(yi);
    return st;
}

kiln_status ir_eval_conv(ir_eval *e)
{
    kiln_op op = e->node->op;
    conv_args ca = {0};
    if (op == KILN_OP_QLINEAR_CONV) {
        KILN_TRY(req_in(e, 0, "x", &ca.x));
        KILN_TRY(req_in(e, 3, "w", &ca.w));
        ca.x_scale = opt_in(e, 1);
        ca.x_zp = opt_in(e, 2);
        ca.w_scale = opt_in(e, 4);
        ca.w_zp = opt_in(e, 5);
        ca.y_scale = opt_in(e, 6);
        ca.y_zp = opt_in(e, 7);
        ca.bias = opt_in(e, 8);
    } else {
        KILN_TRY(req_in(e, 0, "X", &ca.x));
        KILN_TRY(req_in(e, 1, "W", &ca.w));
        if (op == KILN_OP_CONV) {
            ca.bias = opt_in(e, 2);
        } else {
            ca.x_zp = opt_in(e, 2);
            ca.w_zp = opt_in(e, 3);
        }
    }
    const ir_tensor *x = ca.x, *w = ca.w;
    char sx[96], sw[96];
    KILN_TRY(need_spatial(e, x, "X"));
    if (w->rank != x->rank)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "weight %s does not match input %s",
                            ir_tensor_type_str(w, sw, sizeof sw),
                            ir_tensor_type_str(x, sx, sizeof sx));
    ca.group = ir_eval_attr_int(e, "group", 1);
    if (ca.group < 1) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "group %lld must be >= 1", (long long)ca.group);
    int64_t n = x->dims[0], c = x->dims[1], m = w->dims[0];
    if (w->dims[1] * ca.group != c || m % ca.group)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "input %s and weight %s do not fit group %lld",
                            ir_tensor_type_str(x, sx, sizeof sx), ir_tensor_type_str(w, sw, sizeof sw),
                            (long long)ca.group);

    kiln_dtype out_dt = KILN_UNDEF;
    if (op == KILN_OP_CONV) {
        KILN_TRY(need_float(e, x, "X"));
        KILN_TRY(need_dtype(e, w, x->dtype, "W"));
        if (ca.bias) {
            KILN_TRY(need_dtype(e, ca.bias, x->dtype, "B"));
            if (ca.bias->rank != 1 || ca.bias->dims[0] != m)
                return ir_eval_fail(e, KILN_ERR_SHAPE, "B %s must be [%lld]",
                                    ir_tensor_type_str(ca.bias, sx, sizeof sx), (long long)m);
        }
        out_dt = x->dtype;
    } else {
        KILN_TRY(conv_check_quant(e, &ca, m, &out_dt));
    }

    int nsp = x->rank - 2, ap;
    int64_t kernel[3];
    geom g;
    KILN_TRY(conv_kernel(e, w, nsp, kernel));
    KILN_TRY(geom_init(e, x, kernel, &g));
    KILN_TRY(read_auto_pad(e, &ap));
    KILN_TRY(geom_forward(e, &g, ap, false));
    int64_t dims[5] = {n, m};
    for (int i = 0; i < nsp; i++) dims[2 + i] = g.out[3 - nsp + i];
    KILN_TRY(ir_eval_out(e, 0, out_dt, x->rank, dims));
    if (e->infer) return KILN_OK;
    return conv_run(e, &ca, &g);
}

/* ---- ConvTranspose ------------------------------------------------------------------ */

/* Scatters one input plane x through the weights w [mg][kvol] of one input
 * channel into mg output planes y: the transpose of conv_direct's gather,
 * with the same per-row bounds. */
static void conv_transpose_direct(const geom *g, int64_t mg, const double *x, const double *w, double *y)
{
    for (int64_t oc = 0; oc < mg; oc++) {
        double *yp = y + oc * g->out_vol;
        const double *wp = w + oc * g->k_vol;
        for (int64_t kd = 0; kd < g->k[0]; kd++) {
            int64_t offd = kd * g->d[0] - g->pb[0], d0, d1;
            valid_range(offd, g->s[0], g->out[0], g->in[0], &d0, &d1);
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                int64_t offh = kh * g->d[1] - g->pb[1], h0, h1;
                valid_range(offh, g->s[1], g->out[1], g->in[1], &h0, &h1);
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t offw = kw * g->d[2] - g->pb[2], w0, w1;
                    valid_range(offw, g->s[2], g->out[2], g->in[2], &w0, &w1);
                    double wv = wp[(kd * g->k[1] + kh) * g->k[2] + kw];
                    int64_t sw = g->s[2];
                    for (int64_t id = d0; id < d1; id++)
                        for (int64_t ih = h0; ih < h1; ih++) {
                            const double *restrict xr = x + (id * g->in[1] + ih) * g->in[2];
                            double *restrict yr =
                                yp + ((id * g->s[0] + offd) * g->out[1] + ih * g->s[1] + offh) * g->out[2] + offw;
                            for (int64_t iw = w0; iw < w1; iw++) yr[iw * sw] += wv * xr[iw];
                        }
                }
            }
        }
    }
}

/* Splits the total padding of a transposed convolution: SAME_UPPER puts the
 * larger half at the end, everything else (SAME_LOWER, an explicit
 * output_shape) at the start. Floor division keeps a negative total (an
 * output_shape larger than the natural one) consistent. */
static void split_pads(int64_t total, bool upper, int64_t *pb, int64_t *pe)
{
    int64_t half = floor_div(total, 2);
    *pb = upper ? half : total - half;
    *pe = total - *pb;
}

kiln_status ir_eval_conv_transpose(ir_eval *e)
{
    const ir_tensor *x, *w, *bias = opt_in(e, 2);
    KILN_TRY(req_in(e, 0, "X", &x));
    KILN_TRY(req_in(e, 1, "W", &w));
    char sx[96], sw[96];
    KILN_TRY(need_spatial(e, x, "X"));
    KILN_TRY(need_float(e, x, "X"));
    KILN_TRY(need_dtype(e, w, x->dtype, "W"));
    if (w->rank != x->rank)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "weight %s does not match input %s",
                            ir_tensor_type_str(w, sw, sizeof sw),
                            ir_tensor_type_str(x, sx, sizeof sx));
    int64_t group = ir_eval_attr_int(e, "group", 1);
    if (group < 1) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "group %lld must be >= 1", (long long)group);
    int64_t n = x->dims[0], c = x->dims[1], mg = w->dims[1], m = mg * group;
    if (w->dims[0] != c || c % group)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "input %s and weight %s do not fit group %lld",
                            ir_tensor_type_str(x, sx, sizeof sx), ir_tensor_type_str(w, sw, sizeof sw),
                            (long long)group);
    if (bias) {
        KILN_TRY(need_dtype(e, bias, x->dtype, "B"));
        if (bias->rank != 1 || bias->dims[0] != m)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "B %s must be [%lld]", ir_tensor_type_str(bias, sx, sizeof sx),
                                (long long)m);
    }

    int nsp = x->rank - 2, ap;
    int64_t kernel[3], opad[3], oshape[5];
    geom g;
    KILN_TRY(conv_kernel(e, w, nsp, kernel));
    KILN_TRY(geom_init(e, x, kernel, &g));
    KILN_TRY(read_auto_pad(e, &ap));
    KILN_TRY(read_ints(e, "output_padding", nsp, 0, 0, opad));
    const int64_t *os = NULL;
    int n_os = ir_eval_attr_ints(e, "output_shape", &os);
    if (n_os > 0) {
        /* Usually the spatial dims; some exporters write the full [N, C, ...]. */
        if (n_os != nsp && n_os != nsp + 2)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "output_shape has %d values for %d spatial dims", n_os,
                                nsp);
        os += n_os - nsp;
        for (int i = 0; i < nsp; i++)
            if (os[i] < 0 || os[i] > GEOM_LIMIT)
                return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "output_shape[%d] = %lld is out of range", i,
                                    (long long)os[i]);
    }
    for (int i = 0; i < nsp; i++) {
        int j = 3 - nsp + i;
        int64_t natural = g.s[j] * (g.in[j] - 1) + opad[i] + (g.k[j] - 1) * g.d[j] + 1;
        if (n_os > 0) {
            g.out[j] = os[i];
            split_pads(natural - g.out[j], ap == PAD_SAME_UPPER, &g.pb[j], &g.pe[j]);
        } else if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
            g.out[j] = g.in[j] * g.s[j];
            split_pads(natural - g.out[j], ap == PAD_SAME_UPPER, &g.pb[j], &g.pe[j]);
        } else {
            if (ap == PAD_VALID) g.pb[j] = g.pe[j] = 0;
            g.out[j] = natural - g.pb[j] - g.pe[j];
        }
        if (g.out[j] < 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "spatial dim %d: the output size %lld is negative", i,
                                (long long)g.out[j]);
        oshape[2 + i] = g.out[j];
    }
    geom_volumes(&g);
    oshape[0] = n;
    oshape[1] = m;
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, oshape));
    if (e->infer) return KILN_OK;

    kiln_status st;
    double *x64 = NULL, *w64 = NULL, *y = NULL, *b64 = NULL;
    int64_t cg = c / group, kvol = g.k_vol;
    if ((st = load_f64(e, x, &x64)) || (st = load_f64(e, w, &w64)) || (st = alloc_f64(e, n * m * g.out_vol, &y)))
        goto done;
    if (bias && (st = load_f64(e, bias, &b64))) goto done;
    for (int64_t in = 0; in < n; in++)
        for (int64_t gi = 0; gi < group; gi++)
            for (int64_t ic = 0; ic < cg; ic++) {
                int64_t ch = gi * cg + ic;
                conv_transpose_direct(&g, mg, x64 + (in * c + ch) * g.in_vol, w64 + ch * mg * kvol,
                                      y + (in * m + gi * mg) * g.out_vol);
            }
    if (b64)
        for (int64_t i = 0; i < n * m; i++)
            for (int64_t p = 0; p < g.out_vol; p++) y[i * g.out_vol + p] += b64[i % m];
    ir_from_f64(&e->out[0], y);
done:
    base_free(x64);
    base_free(w64);
    base_free(y);
    base_free(b64);
    return st;
}

/* ---- pools ------------------------------------------------------------------------- */

/* LpPool's p: a float before opset 2, an int since. */
static double read_p(ir_eval *e)
{
    const ir_attr *a = ir_node_attr(e->node, "p");
    if (a && a->kind == IR_ATTR_FLOAT) return a->f;
    return (double)ir_eval_attr_int(e, "p", 2);
}

static double pow_abs(double v, double p) { return p == 2 ? v * v : p == 1 ? fabs(v) : pow(fabs(v), p); }

static double root_p(double s, double p) { return p == 2 ? sqrt(s) : p == 1 ? s : pow(s, 1.0 / p); }

static kiln_status global_pool(ir_eval *e, const ir_tensor *x)
{
    kiln_op op = e->node->op;
    char s[96];
    if (x->rank < 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "X must be [N, C, spatial...], got %s",
                            ir_tensor_type_str(x, s, sizeof s));
    if (!ir_dtype_is_float(x->dtype) && !(op == KILN_OP_GLOBAL_MAX_POOL && is_8bit(x->dtype)))
        return need_float(e, x, "X");
    double p = op == KILN_OP_GLOBAL_LP_POOL ? read_p(e) : 2;
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i < 2 ? x->dims[i] : 1;
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, dims));
    if (e->infer) return KILN_OK;

    int64_t nc = x->dims[0] * x->dims[1], vol = ir_dims_numel(x->rank - 2, x->dims + 2);
    double *x64, *y;
    KILN_TRY(load_f64(e, x, &x64));
    kiln_status st = alloc_f64(e, nc, &y);
    if (st) {
        base_free(x64);
        return st;
    }
    for (int64_t i = 0; i < nc; i++) {
        const double *xp = x64 + i * vol;
        double acc = op == KILN_OP_GLOBAL_MAX_POOL ? -INFINITY : 0;
        for (int64_t q = 0; q < vol; q++) {
            if (op == KILN_OP_GLOBAL_MAX_POOL) {
                if (xp[q] > acc || isnan(xp[q])) acc = xp[q];
            } else if (op == KILN_OP_GLOBAL_LP_POOL) {
                acc += pow_abs(xp[q], p);
            } else {
                acc += xp[q];
            }
        }
        if (op == KILN_OP_GLOBAL_AVERAGE_POOL) acc /= (double)vol;
        if (op == KILN_OP_GLOBAL_LP_POOL) acc = root_p(acc, p);
        y[i] = acc;
    }
    ir_from_f64(&e->out[0], y);
    base_free(x64);
    base_free(y);
    return KILN_OK;
}

/* The pool options that vary by op. */
typedef struct pool_opts {
    kiln_op op;
    bool count_include_pad; /* AveragePool */
    bool col_major;         /* MaxPool's storage_order = 1 */
    double p;               /* LpPool */
} pool_opts;

/* One window of a local pool over plane xp (index base: the plane's
 * flattened offset, for MaxPool's Indices). */
static double pool_window(const geom *g, const pool_opts *po, const double *xp, const int64_t *start,
                          int64_t base, int64_t *index)
{
    int64_t lo[3], hi[3], count = 1, padded = 1;
    for (int j = 0; j < 3; j++) {
        valid_range(start[j], g->d[j], g->in[j], g->k[j], &lo[j], &hi[j]);
        count *= hi[j] - lo[j];
        if (po->count_include_pad) {
            /* ONNX counts the window's positions inside the explicitly padded input. */
            int64_t plo, phi;
            valid_range(start[j] + g->pb[j], g->d[j], g->in[j] + g->pb[j] + g->pe[j], g->k[j], &plo, &phi);
            padded *= phi - plo;
        }
    }
    double acc = 0;
    bool first = true;
    *index = -1;
    for (int64_t a = lo[0]; a < hi[0]; a++) {
        int64_t i0 = start[0] + a * g->d[0];
        for (int64_t b = lo[1]; b < hi[1]; b++) {
            int64_t i1 = start[1] + b * g->d[1];
            const double *xr = xp + (i0 * g->in[1] + i1) * g->in[2];
            for (int64_t c = lo[2]; c < hi[2]; c++) {
                int64_t i2 = start[2] + c * g->d[2];
                double v = xr[i2];
                if (po->op == KILN_OP_MAX_POOL) {
                    if (first || v > acc) {
                        acc = v;
                        first = false;
                        *index = base + (po->col_major ? i0 + i1 * g->in[0] + i2 * g->in[0] * g->in[1]
                                                       : (i0 * g->in[1] + i1) * g->in[2] + i2);
                    }
                } else if (po->op == KILN_OP_LP_POOL) {
                    acc += pow_abs(v, po->p);
                } else {
                    acc += v;
                }
            }
        }
    }
    if (po->op == KILN_OP_AVERAGE_POOL) return acc / (double)(po->count_include_pad ? padded : count);
    if (po->op == KILN_OP_LP_POOL) return root_p(acc, po->p);
    return acc;
}

kiln_status ir_eval_pool(ir_eval *e)
{
    kiln_op op = e->node->op;
    const ir_tensor *x;
    KILN_TRY(req_in(e, 0, "X", &x));
    if (op == KILN_OP_GLOBAL_AVERAGE_POOL || op == KILN_OP_GLOBAL_MAX_POOL || op == KILN_OP_GLOBAL_LP_POOL)
        return global_pool(e, x);
    KILN_TRY(need_spatial(e, x, "X"));
    if (op != KILN_OP_MAX_POOL || !is_8bit(x->dtype)) KILN_TRY(need_float(e, x, "X"));
    int nsp = x->rank - 2, ap;
    int64_t kernel[3];
    const int64_t *ks = NULL;
    if (ir_eval_attr_ints(e, "kernel_shape", &ks) != nsp)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "kernel_shape must have %d values", nsp);
    KILN_TRY(read_ints(e, "kernel_shape", nsp, 1, 1, kernel));
    pool_opts po = {.op = op};
    po.count_include_pad = op == KILN_OP_AVERAGE_POOL && ir_eval_attr_int(e, "count_include_pad", 0) != 0;
    po.col_major = op == KILN_OP_MAX_POOL && ir_eval_attr_int(e, "storage_order", 0) != 0;
    po.p = op == KILN_OP_LP_POOL ? read_p(e) : 2;
    if (op == KILN_OP_LP_POOL && !(po.p > 0))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "p = %g must be positive", po.p);
    bool ceil_mode = ir_eval_attr_int(e, "ceil_mode", 0) != 0;
    geom g;
    KILN_TRY(geom_init(e, x, kernel, &g));
    KILN_TRY(read_auto_pad(e, &ap));
    KILN_TRY(geom_forward(e, &g, ap, ceil_mode));
    int64_t dims[5] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < nsp; i++) dims[2 + i] = g.out[3 - nsp + i];
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, dims));
    bool want_index = op == KILN_OP_MAX_POOL && e->n_out > 1;
    if (want_index) KILN_TRY(ir_eval_out(e, 1, KILN_I64, x->rank, dims));
    if (e->infer) return KILN_OK;

    int64_t nc = x->dims[0] * x->dims[1];
    kiln_status st;
    double *x64 = NULL, *y = NULL;
    int64_t *idx = NULL;
    if ((st = load_f64(e, x, &x64)) || (st = alloc_f64(e, nc * g.out_vol, &y)) ||
        (st = alloc_i64(e, nc * g.out_vol, &idx)))
        goto done;
    for (int64_t i = 0; i < nc; i++) {
        const double *xp = x64 + i * g.in_vol;
        int64_t o = i * g.out_vol;
        for (int64_t o0 = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++, o++) {
                    int64_t start[3] = {o0 * g.s[0] - g.pb[0], o1 * g.s[1] - g.pb[1], o2 * g.s[2] - g.pb[2]};
                    y[o] = pool_window(&g, &po, xp, start, i * g.in_vol, &idx[o]);
                }
    }
    ir_from_f64(&e->out[0], y);
    if (want_index) ir_from_i64(&e->out[1], idx);
done:
    base_free(x64);
    base_free(y);
    base_free(idx);
    return st;
}

/* ---- MaxUnpool ---------------------------------------------------------------------- */

kiln_status ir_eval_max_unpool(ir_eval *e)
{
    const ir_tensor *x, *ind, *os = opt_in(e, 2);
    KILN_TRY(req_in(e, 0, "X", &x));
    KILN_TRY(req_in(e, 1, "I", &ind));
    char sx[96], si[96];
    KILN_TRY(need_spatial(e, x, "X"));
    KILN_TRY(need_float(e, x, "X"));
    KILN_TRY(need_dtype(e, ind, KILN_I64, "I"));
    if (!ir_same_shape(x, ind))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "indices %s do not match X %s", ir_tensor_type_str(ind, si, sizeof si),
                            ir_tensor_type_str(x, sx, sizeof sx));
    int nsp = x->rank - 2;
    int64_t kernel[3], s[3], p[6];
    const int64_t *ks = NULL;
    if (ir_eval_attr_ints(e, "kernel_shape", &ks) != nsp)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "kernel_shape must have %d values", nsp);
    KILN_TRY(read_ints(e, "kernel_shape", nsp, 1, 1, kernel));
    KILN_TRY(read_ints(e, "strides", nsp, 1, 1, s));
    KILN_TRY(read_ints(e, "pads", 2 * nsp, 0, 0, p));
    /* The size MaxPool came from; indices address it, flattened over N and C too. */
    int64_t pooled[5] = {x->dims[0], x->dims[1]}, dims[5];
    for (int i = 0; i < nsp; i++) {
        pooled[2 + i] = (x->dims[2 + i] - 1) * s[i] - p[i] - p[nsp + i] + kernel[i];
        if (pooled[2 + i] < 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "spatial dim %d: the unpooled size %lld is negative", i,
                                (long long)pooled[2 + i]);
    }
    memcpy(dims, pooled, sizeof dims);
    if (os) {
        KILN_TRY(ir_eval_need(e, 2));
        if (!ir_dtype_is_int(os->dtype) || os->rank != 1 || os->dims[0] != x->rank)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "output_shape %s must be an integer vector of %d values",
                                ir_tensor_type_str(os, sx, sizeof sx), x->rank);
        for (int i = 0; i < x->rank; i++) {
            dims[i] = ir_get_i64(os, i);
            if (dims[i] < 0)
                return ir_eval_fail(e, KILN_ERR_SHAPE, "output_shape[%d] = %lld is negative", i, (long long)dims[i]);
        }
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, dims));
    if (e->infer) return KILN_OK;

    /* As in the ONNX spec's example, an output_shape larger than the pooled
     * shape keeps the values at their pooled coordinates (the rest is zero). */
    int64_t n_pooled = ir_dims_numel(x->rank, pooled), nx = ir_numel(x);
    int64_t ostr[5];
    ir_strides(x->rank, dims, ostr);
    double *x64, *y;
    KILN_TRY(load_f64(e, x, &x64));
    kiln_status st = alloc_f64(e, ir_numel(&e->out[0]), &y);
    if (st) goto done;
    const int64_t *iv = ind->data;
    for (int64_t i = 0; i < nx; i++) {
        int64_t at = iv[i];
        if (at < 0 || at >= n_pooled) {
            st = ir_eval_fail(e, KILN_ERR_SHAPE, "index %lld at position %lld is outside the unpooled %lld elements",
                              (long long)at, (long long)i, (long long)n_pooled);
            goto done;
        }
        int64_t o = 0;
        bool inside = true;
        for (int d = x->rank - 1; d >= 0; d--) {
            int64_t coord = at % pooled[d];
            at /= pooled[d];
            inside &= coord < dims[d];
            o += coord * ostr[d];
        }
        if (inside) y[o] = x64[i];
    }
    ir_from_f64(&e->out[0], y);
done:
    base_free(x64);
    base_free(y);
    return st;
}

/* ---- BatchNormalization, InstanceNormalization, LRN -------------------------------------- */

kiln_status ir_eval_batch_norm(ir_eval *e)
{
    static const char *const names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    const ir_tensor *t[5];
    for (int i = 0; i < 5; i++) {
        KILN_TRY(req_in(e, i, names[i], &t[i]));
        KILN_TRY(need_float(e, t[i], names[i]));
    }
    const ir_tensor *x = t[0];
    char s[96];
    if (x->rank < 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "X must be [N, C, ...], got %s", ir_tensor_type_str(x, s, sizeof s));
    int opset = e->node->opset;
    double eps = ir_eval_attr_float(e, "epsilon", 1e-5), momentum = ir_eval_attr_float(e, "momentum", 0.9);
    bool spatial = opset >= 9 || ir_eval_attr_int(e, "spatial", 1) != 0;
    bool training = opset >= 14 && ir_eval_attr_int(e, "training_mode", 0) != 0;
    if (opset < 14)
        for (int i = 1; i < e->node->n_out; i++)
            if (e->node->out[i])
                return ir_eval_fail(e, KILN_ERR_UNSUPPORTED,
                                    "training-mode outputs of BatchNormalization before opset 14 are not supported");
    int64_t c = x->dims[1], inner = ir_dims_numel(x->rank - 2, x->dims + 2), nb = x->dims[0];
    /* spatial = 0 (opsets 7-8): statistics per activation, shaped like X[0]. */
    bool per_act[5] = {false};
    for (int i = 1; i < 5; i++) {
        int64_t got = ir_numel(t[i]);
        per_act[i] = !spatial && got != c;
        if (got != (per_act[i] ? c * inner : c))
            return ir_eval_fail(e, KILN_ERR_SHAPE, "%s %s must hold %lld values", names[i],
                                ir_tensor_type_str(t[i], s, sizeof s), (long long)(spatial ? c : c * inner));
    }
    if (training && !spatial)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "training mode with spatial = 0 is not supported");
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    for (int i = 1; i < e->n_out && i < 3; i++) KILN_TRY(ir_eval_out(e, i, t[2 + i]->dtype, 1, &c));
    if (e->infer) return KILN_OK;

    kiln_status st;
    double *x64 = NULL, *p[5] = {NULL}, *mean = NULL, *var = NULL;
    if ((st = load_f64(e, x, &x64)) || (st = alloc_f64(e, c, &mean)) || (st = alloc_f64(e, c, &var))) goto done;
    for (int i = 1; i < 5; i++)
        if ((st = load_f64(e, t[i], &p[i]))) goto done;
    if (training) {
        /* Batch statistics (population variance) normalize X; the running
         * statistics blend them into the inputs with the momentum. */
        double count = (double)(nb * inner);
        for (int64_t ch = 0; ch < c; ch++) {
            double sum = 0, sq = 0;
            for (int64_t b = 0; b < nb; b++)
                for (int64_t q = 0; q < inner; q++) sum += x64[(b * c + ch) * inner + q];
            mean[ch] = sum / count;
            for (int64_t b = 0; b < nb; b++)
                for (int64_t q = 0; q < inner; q++) {
                    double dv = x64[(b * c + ch) * inner + q] - mean[ch];
                    sq += dv * dv;
                }
            var[ch] = sq / count;
        }
    }
    for (int64_t b = 0; b < nb; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t q = 0; q < inner; q++) {
                double v[5];
                for (int i = 1; i < 5; i++) v[i] = p[i][per_act[i] ? ch * inner + q : ch];
                if (training) {
                    v[3] = mean[ch];
                    v[4] = var[ch];
                }
                int64_t o = (b * c + ch) * inner + q;
                x64[o] = (x64[o] - v[3]) / sqrt(v[4] + eps) * v[1] + v[2];
            }
    ir_from_f64(&e->out[0], x64);
    /* Outside training the running statistics pass through unchanged. */
    for (int64_t ch = 0; ch < c; ch++) {
        mean[ch] = training ? p[3][ch] * momentum + mean[ch] * (1 - momentum) : p[3][ch];
        var[ch] = training ? p[4][ch] * momentum + var[ch] * (1 - momentum) : p[4][ch];
    }
    if (e->n_out > 1) ir_from_f64(&e->out[1], mean);
    if (e->n_out > 2) ir_from_f64(&e->out[2], var);
done:
    base_free(x64);
    for (int i = 1; i < 5; i++) base_free(p[i]);
    base_free(mean);
    base_free(var);
    return st;
}

kiln_status ir_eval_instance_norm(ir_eval *e)
{
    const ir_tensor *x, *scale, *bias;
    KILN_TRY(req_in(e, 0, "input", &x));
    KILN_TRY(req_in(e, 1, "scale", &scale));
    KILN_TRY(req_in(e, 2, "B", &bias));
    KILN_TRY(need_float(e, x, "input"));
    KILN_TRY(need_float(e, scale, "scale"));
    KILN_TRY(need_float(e, bias, "B"));
    char s[96];
    if (x->rank < 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "input must be [N, C, ...], got %s", ir_tensor_type_str(x, s, sizeof s));
    int64_t c = x->dims[1];
    if (ir_numel(scale) != c || ir_numel(bias) != c || scale->rank != 1 || bias->rank != 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "scale and B must be [%lld]", (long long)c);
    double eps = ir_eval_attr_float(e, "epsilon", 1e-5);
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    kiln_status st;
    double *x64 = NULL, *sc = NULL, *b64 = NULL;
    if ((st = load_f64(e, x, &x64)) || (st = load_f64(e, scale, &sc)) || (st = load_f64(e, bias, &b64))) goto done;
    int64_t inner = ir_dims_numel(x->rank - 2, x->dims + 2), nc = x->dims[0] * c;
    for (int64_t i = 0; i < nc; i++) {
        double *xp = x64 + i * inner, sum = 0, sq = 0;
        for (int64_t q = 0; q < inner; q++) sum += xp[q];
        double mean = sum / (double)inner;
        for (int64_t q = 0; q < inner; q++) sq += (xp[q] - mean) * (xp[q] - mean);
        double inv = 1.0 / sqrt(sq / (double)inner + eps);
        for (int64_t q = 0; q < inner; q++) xp[q] = (xp[q] - mean) * inv * sc[i % c] + b64[i % c];
    }
    ir_from_f64(&e->out[0], x64);
done:
    base_free(x64);
    base_free(sc);
    base_free(b64);
    return st;
}

kiln_status ir_eval_lrn(ir_eval *e)
{
    const ir_tensor *x;
    KILN_TRY(req_in(e, 0, "X", &x));
    KILN_TRY(need_float(e, x, "X"));
    char s[96];
    if (x->rank < 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "X must be [N, C, ...], got %s", ir_tensor_type_str(x, s, sizeof s));
    if (!ir_eval_has_attr(e, "size")) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "attribute size is required");
    int64_t size = ir_eval_attr_int(e, "size", 1);
    if (size < 1 || size > GEOM_LIMIT)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "size %lld must be positive", (long long)size);
    double alpha = ir_eval_attr_float(e, "alpha", 1e-4), beta = ir_eval_attr_float(e, "beta", 0.75);
    double bias = ir_eval_attr_float(e, "bias", 1.0);
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    kiln_status st;
    double *x64 = NULL, *y = NULL;
    if ((st = load_f64(e, x, &x64)) || (st = alloc_f64(e, ir_numel(x), &y))) goto done;
    int64_t nb = x->dims[0], c = x->dims[1], inner = ir_dims_numel(x->rank - 2, x->dims + 2);
    int64_t before = (size - 1) / 2, after = size - 1 - before; /* floor and ceil of (size - 1) / 2 */
    for (int64_t b = 0; b < nb; b++)
        for (int64_t ch = 0; ch < c; ch++) {
            int64_t c0 = KILN_MAX(ch - before, (int64_t)0), c1 = KILN_MIN(ch + after, c - 1);
            for (int64_t q = 0; q < inner; q++) {
                double sq = 0;
                for (int64_t k = c0; k <= c1; k++) {
                    double v = x64[(b * c + k) * inner + q];
                    sq += v * v;
                }
                int64_t o = (b * c + ch) * inner + q;
                y[o] = x64[o] / pow(bias + alpha / (double)size * sq, beta);
            }
        }
    ir_from_f64(&e->out[0], y);
done:
    base_free(x64);
    base_free(y);
    return st;
}

/* ---- Einsum -------------------------------------------------------------------------- */

/* Label ids: letters by ASCII order (A-Z then a-z, numpy's order for the
 * implicit output), then one id per ellipsis dim, right-aligned across the
 * operands as numpy broadcasts them. */
enum { EIN_LETTERS = 52, EIN_IDS = EIN_LETTERS + IR_MAX_RANK };

static int ein_letter(char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return 26 + ch - 'a';
    return -1;
}

static char ein_char(int id) { return id < 26 ? (char)('A' + id) : (char)('a' + id - 26); }

/* One term of the equation as written: its letters and where "..." sits. */
typedef struct ein_term {
    int n;
    int letter[IR_MAX_RANK];
    int ell; /* position of "..." among the letters, -1 when absent */
} ein_term;

static kiln_status ein_parse_term(ir_eval *e, const char *s, size_t len, ein_term *t)
{
    t->n = 0;
    t->ell = -1;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == ' ' || ch == '\t') continue;
        if (ch == '.') {
            if (i + 2 < len && s[i + 1] == '.' && s[i + 2] == '.' && t->ell < 0) {
                t->ell = t->n;
                i += 2;
                continue;
            }
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "misplaced '.' in the equation term '%.*s'", (int)len, s);
        }
        int id = ein_letter(ch);
        if (id < 0)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unexpected character '%c' in the equation term '%.*s'", ch,
                                (int)len, s);
        if (t->n == IR_MAX_RANK)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the equation term '%.*s' has too many subscripts", (int)len,
                                s);
        t->letter[t->n++] = id;
    }
    return KILN_OK;
}

/* The parsed equation: per input, the label id of each dim; the output's ids;
 * each id's size. */
typedef struct ein_plan {
    int n_in;
    int *ids;   /* n_in * IR_MAX_RANK */
    int n_out;
    int out_ids[IR_MAX_RANK];
    int n_sum;
    int sum_ids[EIN_IDS];
    int64_t size[EIN_IDS];
} ein_plan;

static kiln_status ein_plan_build(ir_eval *e, const char *eq, ein_plan *pl)
{
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int count[EIN_IDS] = {0}, n_ell = 0;
    for (int i = 0; i < EIN_IDS; i++) pl->size[i] = -1;
    const char *p = eq;
    for (int k = 0; k < pl->n_in; k++) {
        const char *end = memchr(p, ',', (size_t)(eq + lhs_len - p));
        bool last = k == pl->n_in - 1;
        if (last ? end != NULL : end == NULL)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "equation '%s' does not have %d input terms", eq, pl->n_in);
        if (!end) end = eq + lhs_len;
        ein_term t;
        KILN_TRY(ein_parse_term(e, p, (size_t)(end - p), &t));
        const ir_tensor *x = e->in[k];
        int er = x->rank - t.n;
        if ((t.ell < 0 && er != 0) || er < 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "equation term %d ('%.*s') does not fit input rank %d", k,
                                (int)(end - p), p, x->rank);
        if (er > n_ell) n_ell = er;
        int *ids = pl->ids + k * IR_MAX_RANK, d = 0;
        for (int i = 0; i <= t.n; i++) {
            if (i == t.ell)
                for (int q = 0; q < er; q++) ids[d++] = -(er - q); /* ellipsis dim: minus its place from the right */
            if (i < t.n) ids[d++] = t.letter[i];
        }
        p = end + 1;
    }
    /* Resolve ellipsis ids now that the widest ellipsis is known, then sizes. */
    for (int k = 0; k < pl->n_in; k++) {
        const ir_tensor *x = e->in[k];
        int *ids = pl->ids + k * IR_MAX_RANK;
        for (int d = 0; d < x->rank; d++) {
            if (ids[d] < 0) ids[d] = EIN_LETTERS + n_ell + ids[d];
            int id = ids[d];
            int64_t dim = x->dims[d];
            count[id]++;
            if (pl->size[id] < 0 || pl->size[id] == 1) {
                if (pl->size[id] < 0 || dim != 1) pl->size[id] = dim;
            } else if (dim != pl->size[id] && dim != 1) {
                if (id < EIN_LETTERS)
                    return ir_eval_fail(e, KILN_ERR_SHAPE, "label '%c' has sizes %lld and %lld", ein_char(id),
                                        (long long)pl->size[id], (long long)dim);
                return ir_eval_fail(e, KILN_ERR_SHAPE, "the dims under '...' do not broadcast");
            }
        }
    }

    pl->n_out = 0;
    bool in_out[EIN_IDS] = {false};
    if (arrow) {
        const char *rhs = arrow + 2;
        ein_term t;
        KILN_TRY(ein_parse_term(e, rhs, strlen(rhs), &t));
        if (t.ell < 0 && n_ell > 0)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL,
                                "the inputs have dims under '...' but the output '%s' has no '...'", rhs);
        if (t.n + (t.ell >= 0 ? n_ell : 0) > IR_MAX_RANK)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the output of '%s' has too many dims", eq);
        for (int i = 0; i <= t.n; i++) {
            if (i == t.ell)
                for (int q = 0; q < n_ell; q++) pl->out_ids[pl->n_out++] = EIN_LETTERS + q;
            if (i == t.n) break;
            int id = t.letter[i];
            if (!count[id])
                return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "output label '%c' does not appear in the inputs",
                                    ein_char(id));
            if (in_out[id])
                return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "output label '%c' is repeated", ein_char(id));
            in_out[id] = true;
            pl->out_ids[pl->n_out++] = id;
        }
    } else {
        for (int q = 0; q < n_ell; q++) pl->out_ids[pl->n_out++] = EIN_LETTERS + q;
        for (int id = 0; id < EIN_LETTERS; id++)
            if (count[id] == 1) {
                if (pl->n_out == IR_MAX_RANK)
                    return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the output of '%s' has too many dims", eq);
                pl->out_ids[pl->n_out++] = id;
            }
    }
    for (int i = 0; i < pl->n_out; i++) in_out[pl->out_ids[i]] = true;
    pl->n_sum = 0;
    for (int id = 0; id < EIN_IDS; id++)
        if (count[id] && !in_out[id]) pl->sum_ids[pl->n_sum++] = id;
    return KILN_OK;
}

/* Walk state over the label space: positions 0..n_out-1 are the output's
 * labels, the rest the summed ones; each input's offset follows the indices
 * through per-position strides (a label repeated within an input adds its
 * strides, which walks the diagonal). */
typedef struct ein_walk {
    int n_pos, n_in;
    int64_t size[EIN_IDS];
    int64_t idx[EIN_IDS];
    int64_t *stride; /* n_in * n_pos */
    int64_t *off;    /* n_in */
} ein_walk;

/* Advances positions [lo, hi) like an odometer; false once they wrap to 0. */
static bool ein_next(ein_walk *w, int lo, int hi)
{
    for (int q = hi - 1; q >= lo; q--) {
        w->idx[q]++;
        for (int k = 0; k < w->n_in; k++) w->off[k] += w->stride[k * w->n_pos + q];
        if (w->idx[q] < w->size[q]) return true;
        for (int k = 0; k < w->n_in; k++) w->off[k] -= w->stride[k * w->n_pos + q] * w->size[q];
        w->idx[q] = 0;
    }
    return false;
}

static kiln_status einsum_run(ir_eval *e, const ein_plan *pl, ein_walk *w, int64_t n_out_elems, int64_t n_sum_elems)
{
    bool is_float = ir_dtype_is_float(e->in[0]->dtype);
    int n_in = pl->n_in;
    kiln_status st = KILN_OK;
    void **xs = zalloc(n_in, sizeof(void *));
    void *y = is_float ? zalloc(n_out_elems, sizeof(double)) : zalloc(n_out_elems, sizeof(int64_t));
    if (!xs || !y) {
        st = oom(e);
        goto done;
    }
    for (int k = 0; k < n_in; k++) {
        xs[k] = is_float ? (void *)ir_to_f64(e->in[k]) : (void *)ir_to_i64(e->in[k]);
        if (!xs[k]) {
            st = oom(e);
            goto done;
        }
    }
    for (int64_t o = 0; o < n_out_elems; o++) {
        if (is_float) {
            double acc = 0;
            for (int64_t s = 0; s < n_sum_elems; s++) {
                double prod = 1;
                for (int k = 0; k < n_in; k++) prod *= ((const double *)xs[k])[w->off[k]];
                acc += prod;
                ein_next(w, pl->n_out, w->n_pos);
            }
            ((double *)y)[o] = acc;
        } else {
            uint64_t acc = 0;
            for (int64_t s = 0; s < n_sum_elems; s++) {
                uint64_t prod = 1;
                for (int k = 0; k < n_in; k++) prod *= (uint64_t)((const int64_t *)xs[k])[w->off[k]];
                acc += prod;
                ein_next(w, pl->n_out, w->n_pos);
            }
            ((int64_t *)y)[o] = (int64_t)acc;
        }
        ein_next(w, 0, pl->n_out);
    }
    if (is_float) ir_from_f64(&e->out[0], y);
    else ir_from_i64(&e->out[0], y);
done:
    if (xs)
        for (int k = 0; k < n_in; k++) base_free(xs[k]);
    base_free(xs);
    base_free(y);
    return st;
}

kiln_status ir_eval_einsum(ir_eval *e)
{
    const char *eq = ir_eval_attr_str(e, "equation", NULL);
    if (!eq) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "attribute equation is required");
    if (e->n_in < 1) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "Einsum needs at least one input");
    for (int k = 0; k < e->n_in; k++) {
        const ir_tensor *x;
        KILN_TRY(req_in(e, k, "Inputs", &x));
        if (x->dtype != e->in[0]->dtype)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "input %d is %s but input 0 is %s", k, kiln_dtype_name(x->dtype),
                                kiln_dtype_name(e->in[0]->dtype));
    }
    kiln_dtype dt = e->in[0]->dtype;
    if (!ir_dtype_is_float(dt) && !ir_dtype_is_int(dt))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "Einsum of %s is not supported", kiln_dtype_name(dt));

    ein_plan pl = {.n_in = e->n_in};
    ein_walk w = {0};
    kiln_status st;
    pl.ids = zalloc((int64_t)e->n_in * IR_MAX_RANK, sizeof(int));
    if (!pl.ids) return oom(e);
    if ((st = ein_plan_build(e, eq, &pl))) goto done;
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < pl.n_out; i++) dims[i] = pl.size[pl.out_ids[i]];
    if ((st = ir_eval_out(e, 0, dt, pl.n_out, dims)) || e->infer) goto done;

    w.n_pos = pl.n_out + pl.n_sum;
    w.n_in = pl.n_in;
    w.stride = zalloc((int64_t)w.n_in * w.n_pos, sizeof(int64_t));
    w.off = zalloc(w.n_in, sizeof(int64_t));
    if (!w.stride || !w.off) {
        st = oom(e);
        goto done;
    }
    int64_t n_out_elems = 1, n_sum_elems = 1;
    for (int q = 0; q < w.n_pos; q++) {
        int id = q < pl.n_out ? pl.out_ids[q] : pl.sum_ids[q - pl.n_out];
        w.size[q] = pl.size[id];
        if (q < pl.n_out) n_out_elems *= w.size[q];
        else n_sum_elems *= w.size[q];
        for (int k = 0; k < w.n_in; k++) {
            const ir_tensor *x = e->in[k];
            int64_t xs[IR_MAX_RANK];
            ir_strides(x->rank, x->dims, xs);
            for (int d = 0; d < x->rank; d++)
                if (pl.ids[k * IR_MAX_RANK + d] == id && x->dims[d] != 1) w.stride[k * w.n_pos + q] += xs[d];
        }
    }
    st = einsum_run(e, &pl, &w, n_out_elems, n_sum_elems);
done:
    base_free(pl.ids);
    base_free(w.stride);
    base_free(w.off);
    return st;
}

/* ---- Det ----------------------------------------------------------------------------- */

/* Determinant of the n x n matrix a (destroyed) by LU with partial pivoting. */
static double det_lu(double *a, int64_t n)
{
    double det = 1;
    for (int64_t col = 0; col < n; col++) {
        int64_t piv = col;
        for (int64_t r = col + 1; r < n; r++)
            if (fabs(a[r * n + col]) > fabs(a[piv * n + col])) piv = r;
        if (a[piv * n + col] == 0) return 0;
        if (piv != col) {
            for (int64_t j = 0; j < n; j++) {
                double t = a[col * n + j];
                a[col * n + j] = a[piv * n + j];
                a[piv * n + j] = t;
            }
            det = -det;
        }
        double pv = a[col * n + col];
        det *= pv;
        for (int64_t r = col + 1; r < n; r++) {
            double f = a[r * n + col] / pv;
            if (f == 0) continue;
            for (int64_t j = col + 1; j < n; j++) a[r * n + j] -= f * a[col * n + j];
        }
    }
    return det;
}

kiln_status ir_eval_det(ir_eval *e)
{
    const ir_tensor *x;
    KILN_TRY(req_in(e, 0, "X", &x));
    KILN_TRY(need_float(e, x, "X"));
    char s[96];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return ir_eval_fail(e, KILN_ERR_SHAPE, "X must be [..., M, M], got %s", ir_tensor_type_str(x, s, sizeof s));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank - 2, x->dims));
    if (e->infer) return KILN_OK;

    int64_t n = x->dims[x->rank - 1], nb = ir_dims_numel(x->rank - 2, x->dims);
    kiln_status st;
    double *x64 = NULL, *y = NULL;
    if ((st = load_f64(e, x, &x64)) || (st = alloc_f64(e, nb, &y))) goto done;
    for (int64_t b = 0; b < nb; b++) y[b] = det_lu(x64 + b * n * n, n);
    ir_from_f64(&e->out[0], y);
done:
    base_free(x64);
    base_free(y);
    return st;
}
