/*
 * interp_reduce.c: the reference interpreter's ops that reduce along axes:
 * the Reduce family (L1, L2, LogSum, LogSumExp, Max, Mean, Min, Prod, Sum,
 * SumSquare), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum, TopK, the
 * normalizations (LayerNormalization, MeanVarianceNormalization,
 * LpNormalization) and the losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss).
 *
 * Floats are computed in double. Integers go through int64 values whose sums
 * and products are taken in uint64_t: wrapping is defined there and, once
 * truncated into the output dtype, equals the dtype's own wrapping. Unsigned
 * values are int64 bit patterns and are compared as unsigned.
 *
 * Most kernels view a tensor around one axis as [outer, n, inner]; the
 * Reduce family and MeanVarianceNormalization reduce an arbitrary set of
 * axes through a map from each input element to its output slot.
 */
#include "ir/interp_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

static kiln_status require_inputs(ir_eval *e, int n)
{
    for (int i = 0; i < n; i++)
        if (!ir_eval_has(e, i)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input %d is missing", i);
    return KILN_OK;
}

static kiln_status need_float(ir_eval *e, const ir_tensor *t, const char *what)
{
    if (ir_dtype_is_float(t->dtype)) return KILN_OK;
    return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s must be a float tensor, not %s", what,
                        kiln_dtype_name(t->dtype));
}

/* Floats and integers; bool only where allow_bool (it has no arithmetic). */
static kiln_status need_number(ir_eval *e, const ir_tensor *t, const char *what, bool allow_bool)
{
    if (ir_dtype_is_float(t->dtype) || ir_dtype_is_int(t->dtype)) return KILN_OK;
    if (allow_bool && t->dtype == KILN_BOOL) return KILN_OK;
    return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s has dtype %s, which this op does not compute", what,
                        kiln_dtype_name(t->dtype));
}

/* n elements of size bytes, at least one byte; NULL on overflow or OOM. */
static void *alloc_array(int64_t n, size_t size)
{
    size_t bytes;
    if (n < 0 || !base_mul_ok((size_t)n, size, &bytes)) return NULL;
    return base_malloc(bytes ? bytes : 1);
}

static kiln_status oom(ir_eval *e) { return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for temporaries"); }

/* Views x around axis as [outer, n, inner]: element (o, k, i) lies at
 * (o * n + k) * inner + i. */
static void split_at(const ir_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = ir_dims_numel(axis, x->dims);
    *n = x->dims[axis];
    *inner = ir_dims_numel(x->rank - axis - 1, x->dims + axis + 1);
}

/* An axis of a tensor that must have one: ir_eval_axis also accepts axis 0
 * of a scalar, which has no dims to index. */
static kiln_status tensor_axis(ir_eval *e, int64_t axis, const ir_tensor *x, int *out)
{
    if (x->rank == 0)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the input is a scalar; it has no axis %lld", (long long)axis);
    return ir_eval_axis(e, axis, x->rank, out);
}

static bool is_unsigned(kiln_dtype t) { return !ir_dtype_is_signed(t); }

/* a < b for int64 values read from a tensor of the given signedness. */
static bool int_less(int64_t a, int64_t b, bool uns) { return uns ? (uint64_t)a < (uint64_t)b : a < b; }

/* The range of an integer dtype as int64 bit patterns (u64's max is -1). */
static void int_range(kiln_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case KILN_BOOL: *lo = 0, *hi = 1; break;
    case KILN_I8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case KILN_U8: *lo = 0, *hi = UINT8_MAX; break;
    case KILN_I16: *lo = INT16_MIN, *hi = INT16_MAX; break;
    case KILN_U16: *lo = 0, *hi = UINT16_MAX; break;
    case KILN_I32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case KILN_U32: *lo = 0, *hi = UINT32_MAX; break;
    case KILN_U64: *lo = 0, *hi = -1; break;
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
    }
}

/* Marks axis v of a rank-`rank` tensor in reduced[]; refuses repeats. */
static kiln_status mark_axis(ir_eval *e, int64_t v, int rank, bool *reduced)
{
    if (v < -rank || v >= rank)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d", (long long)v, rank);
    int d = (int)(v < 0 ? v + rank : v);
    if (reduced[d]) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %lld is given more than once", (long long)v);
    reduced[d] = true;
    return KILN_OK;
}

/* For each element of x, the offset of the output element it reduces into:
 * its row-major offset in x's shape with the reduced dims collapsed to 1.
 * OUT: a base_malloc'd array of numel(x) entries, NULL on OOM. */
static int64_t *reduce_map(const ir_tensor *x, const bool *reduced)
{
    int64_t n = ir_numel(x);
    int64_t *map = alloc_array(n, sizeof *map);
    if (!map) return NULL;
    int64_t kdims[IR_MAX_RANK], kstrides[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++) kdims[d] = reduced[d] ? 1 : x->dims[d];
    ir_strides(x->rank, kdims, kstrides);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < x->rank; d++)
            if (!reduced[d]) off += idx[d] * kstrides[d];
        map[i] = off;
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d]) break;
            idx[d] = 0;
        }
    }
    return map;
}

/* ---- Reduce* ------------------------------------------------------------------ */

/* The axes of a Reduce: input 1 when given (ReduceSum from opset 13, every
 * Reduce from opset 18), else the `axes` attribute (earlier opsets). Marks
 * reduced[]; *n_axes says how many were listed (0: none, or an empty list). */
static kiln_status reduce_axes(ir_eval *e, int rank, bool *reduced, int *n_axes)
{
    memset(reduced, 0, IR_MAX_RANK * sizeof *reduced);
    *n_axes = 0;
    if (ir_eval_has(e, 1)) {
        KILN_TRY(ir_eval_need(e, 1));
        const ir_tensor *a = e->in[1];
        if (!ir_dtype_is_int(a->dtype) || a->rank > 1)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "the axes input must be a 1-D integer tensor, not %s of rank %d",
                                kiln_dtype_name(a->dtype), a->rank);
        int64_t n = ir_numel(a);
        if (n > rank)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "%lld axes given for an input of rank %d",
                                (long long)n, rank);
        for (int64_t i = 0; i < n; i++) KILN_TRY(mark_axis(e, ir_get_i64(a, i), rank, reduced));
        *n_axes = (int)n;
        return KILN_OK;
    }
    const int64_t *axes;
    int n = ir_eval_attr_ints(e, "axes", &axes);
    if (n > rank)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "%d axes given for an input of rank %d", n, rank);
    for (int i = 0; i < n; i++) KILN_TRY(mark_axis(e, axes[i], rank, reduced));
    *n_axes = n > 0 ? n : 0;
    return KILN_OK;
}

/* Float inputs, and the integer cases that need real arithmetic (L2, LogSum,
 * LogSumExp), which numpy computes in floating point and truncates. */
static kiln_status reduce_float(ir_eval *e, const ir_tensor *x, const int64_t *map, ir_tensor *y)
{
    kiln_op op = e->node->op;
    int64_t n = ir_numel(x), m = ir_numel(y);
    int64_t count = m ? n / m : 0;
    double *v = ir_to_f64(x);
    double *acc = alloc_array(m, sizeof *acc);
    double *peak = alloc_array(m, sizeof *peak);
    if (!v || !acc || !peak) {
        base_free(v), base_free(acc), base_free(peak);
        return oom(e);
    }
    double init = op == KILN_OP_REDUCE_MAX ? -INFINITY
                  : op == KILN_OP_REDUCE_MIN ? INFINITY
                  : op == KILN_OP_REDUCE_PROD ? 1.0
                                              : 0.0;
    for (int64_t j = 0; j < m; j++) acc[j] = init, peak[j] = -INFINITY;
    /* LogSumExp subtracts each group's maximum so exp cannot overflow. */
    if (op == KILN_OP_REDUCE_LOG_SUM_EXP)
        for (int64_t i = 0; i < n; i++)
            if (v[i] > peak[map[i]] || isnan(v[i])) peak[map[i]] = v[i];
    for (int64_t i = 0; i < n; i++) {
        double a = v[i], *s = &acc[map[i]];
        switch (op) {
        case KILN_OP_REDUCE_L1: *s += fabs(a); break;
        case KILN_OP_REDUCE_L2:
        case KILN_OP_REDUCE_SUM_SQUARE: *s += a * a; break;
        case KILN_OP_REDUCE_LOG_SUM_EXP: *s += exp(a - peak[map[i]]); break;
        case KILN_OP_REDUCE_MAX:
            if (a > *s || isnan(a)) *s = a;
            break;
        case KILN_OP_REDUCE_MIN:
            if (a < *s || isnan(a)) *s = a;
            break;
        case KILN_OP_REDUCE_PROD: *s *= a; break;
        default: *s += a; break; /* Sum, Mean, LogSum */
        }
    }
    for (int64_t j = 0; j < m; j++) {
        switch (op) {
        case KILN_OP_REDUCE_L2: acc[j] = sqrt(acc[j]); break;
        case KILN_OP_REDUCE_LOG_SUM: acc[j] = log(acc[j]); break;
        case KILN_OP_REDUCE_MEAN: acc[j] /= (double)count; break;
        case KILN_OP_REDUCE_LOG_SUM_EXP:
            /* An empty or all-infinite group: the peak itself is the answer. */
            acc[j] = isinf(peak[j]) ? peak[j] : peak[j] + log(acc[j]);
            break;
        default: break;
        }
    }
    ir_from_f64(y, acc);
    base_free(v), base_free(acc), base_free(peak);
    return KILN_OK;
}

/* Integer inputs of the ops that stay in integers, exactly. */
static kiln_status reduce_int(ir_eval *e, const ir_tensor *x, const int64_t *map, ir_tensor *y)
{
    kiln_op op = e->node->op;
    bool uns = is_unsigned(x->dtype);
    int64_t n = ir_numel(x), m = ir_numel(y);
    int64_t count = m ? n / m : 0;
    int64_t *v = ir_to_i64(x);
    int64_t *acc = alloc_array(m, sizeof *acc);
    if (!v || !acc) {
        base_free(v), base_free(acc);
        return oom(e);
    }
    int64_t lo, hi;
    int_range(x->dtype, &lo, &hi);
    int64_t init = op == KILN_OP_REDUCE_MAX ? lo : op == KILN_OP_REDUCE_MIN ? hi : op == KILN_OP_REDUCE_PROD ? 1 : 0;
    for (int64_t j = 0; j < m; j++) acc[j] = init;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = v[i], *s = &acc[map[i]];
        uint64_t ua = (uint64_t)a, us = (uint64_t)*s;
        switch (op) {
        case KILN_OP_REDUCE_L1: *s = (int64_t)(us + (!uns && a < 0 ? 0 - ua : ua)); break;
        case KILN_OP_REDUCE_SUM_SQUARE: *s = (int64_t)(us + ua * ua); break;
        case KILN_OP_REDUCE_PROD: *s = (int64_t)(us * ua); break;
        case KILN_OP_REDUCE_MAX:
            if (int_less(*s, a, uns)) *s = a;
            break;
        case KILN_OP_REDUCE_MIN:
            if (int_less(a, *s, uns)) *s = a;
            break;
        default: *s = (int64_t)(us + ua); break; /* Sum, Mean */
        }
    }
    if (op == KILN_OP_REDUCE_MEAN)
        for (int64_t j = 0; j < m; j++) {
            if (count == 0) acc[j] = 0;
            else if (uns) acc[j] = (int64_t)((uint64_t)acc[j] / (uint64_t)count);
            else acc[j] /= count;
        }
    ir_from_i64(y, acc);
    base_free(v), base_free(acc);
    return KILN_OK;
}

kiln_status ir_eval_reduce(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    kiln_op op = e->node->op;
    KILN_TRY(need_number(e, x, "the input", op == KILN_OP_REDUCE_MAX || op == KILN_OP_REDUCE_MIN));
    int64_t keepdims = ir_eval_attr_int(e, "keepdims", 1);
    int64_t noop = ir_eval_attr_int(e, "noop_with_empty_axes", 0);

    bool reduced[IR_MAX_RANK];
    int n_axes;
    KILN_TRY(reduce_axes(e, x->rank, reduced, &n_axes));
    /* No axes reduces everything, unless noop_with_empty_axes asks for the
     * reduction over no axes at all (which still applies abs, square, log...). */
    if (n_axes == 0)
        for (int d = 0; d < x->rank; d++) reduced[d] = !noop;

    int64_t dims[IR_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (!reduced[d]) dims[rank++] = x->dims[d];
        else if (keepdims) dims[rank++] = 1;
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, rank, dims));
    if (e->infer) return KILN_OK;

    int64_t *map = reduce_map(x, reduced);
    if (!map) return oom(e);
    bool in_ints = !ir_dtype_is_float(x->dtype) && op != KILN_OP_REDUCE_L2 && op != KILN_OP_REDUCE_LOG_SUM &&
                   op != KILN_OP_REDUCE_LOG_SUM_EXP;
    kiln_status st = in_ints ? reduce_int(e, x, map, &e->out[0]) : reduce_float(e, x, map, &e->out[0]);
    base_free(map);
    return st;
}

/* ---- ArgMax, ArgMin -------------------------------------------------------- */

kiln_status ir_eval_arg_reduce(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    KILN_TRY(need_number(e, x, "the input", true));
    int ax;
    KILN_TRY(tensor_axis(e, ir_eval_attr_int(e, "axis", 0), x, &ax));
    int64_t keepdims = ir_eval_attr_int(e, "keepdims", 1);
    bool last = ir_eval_attr_int(e, "select_last_index", 0) != 0;
    if (x->dims[ax] == 0)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot take the %s over axis %d, which has size 0",
                            e->node->op_type, ax);
    int64_t dims[IR_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != ax) dims[rank++] = x->dims[d];
        else if (keepdims) dims[rank++] = 1;
    }
    KILN_TRY(ir_eval_out(e, 0, KILN_I64, rank, dims));
    if (e->infer) return KILN_OK;

    bool is_max = e->node->op == KILN_OP_ARG_MAX;
    bool is_f = ir_dtype_is_float(x->dtype), uns = is_unsigned(x->dtype);
    int64_t outer, n, inner;
    split_at(x, ax, &outer, &n, &inner);
    int64_t *res = e->out[0].data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i, best = 0;
            for (int64_t k = 1; k < n; k++) {
                int64_t p = base + k * inner, q = base + best * inner;
                bool better, tie;
                if (is_f) {
                    double a = ir_get_f64(x, p), b = ir_get_f64(x, q);
                    /* NaN wins, as in numpy, and the first NaN stays. */
                    better = (is_max ? a > b : a < b) || (isnan(a) && !isnan(b));
                    tie = a == b;
                } else {
                    int64_t a = ir_get_i64(x, p), b = ir_get_i64(x, q);
                    better = is_max ? int_less(b, a, uns) : int_less(a, b, uns);
                    tie = a == b;
                }
                if (better || (last && tie)) best = k;
            }
            res[o * inner + i] = best;
        }
    return KILN_OK;
}

/* ---- Softmax, LogSoftmax, Hardmax ----------------------------------------- */

kiln_status ir_eval_softmax(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    KILN_TRY(need_float(e, x, "the input"));
    int64_t outer, n, inner;
    if (e->node->opset < 13) {
        /* Before opset 13 the input is coerced to 2-D [a0*..*a(k-1), ak*..*a(r-1)]
         * at axis k, which may be 0..r (the empty product being 1). */
        int64_t axis = ir_eval_attr_int(e, "axis", 1);
        if (axis < -x->rank || axis > x->rank)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d",
                                (long long)axis, x->rank);
        int ax = (int)(axis < 0 ? axis + x->rank : axis);
        outer = ir_dims_numel(ax, x->dims);
        n = ir_dims_numel(x->rank - ax, x->dims + ax);
        inner = 1;
    } else {
        int ax;
        KILN_TRY(tensor_axis(e, ir_eval_attr_int(e, "axis", -1), x, &ax));
        split_at(x, ax, &outer, &n, &inner);
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    double *v = ir_to_f64(x);
    if (!v) return oom(e);
    kiln_op op = e->node->op;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double *row = v + o * n * inner + i;
            if (n == 0) continue;
            int64_t best = 0;
            for (int64_t k = 1; k < n; k++) {
                double a = row[k * inner], b = row[best * inner];
                if (a > b || (isnan(a) && !isnan(b))) best = k;
            }
            double peak = row[best * inner];
            if (op == KILN_OP_HARDMAX) {
                for (int64_t k = 0; k < n; k++) row[k * inner] = k == best;
                continue;
            }
            /* Subtracting the maximum keeps exp in range. */
            double sum = 0;
            for (int64_t k = 0; k < n; k++) sum += exp(row[k * inner] - peak);
            for (int64_t k = 0; k < n; k++) {
                double *a = &row[k * inner];
                *a = op == KILN_OP_SOFTMAX ? exp(*a - peak) / sum : *a - peak - log(sum);
            }
        }
    ir_from_f64(&e->out[0], v);
    base_free(v);
    return KILN_OK;
}

/* ---- CumSum ------------------------------------------------------------------ */

/* CumSum's axis input: an integer scalar or one-element 1-D tensor. */
static kiln_status cum_sum_axis(ir_eval *e, const ir_tensor *x, int *ax)
{
    const ir_tensor *a = e->in[1];
    if (!ir_dtype_is_int(a->dtype) || a->rank > 1 || ir_numel(a) != 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the axis input must be an integer scalar, not %s of %lld elements",
                            kiln_dtype_name(a->dtype), (long long)ir_numel(a));
    return tensor_axis(e, ir_get_i64(a, 0), x, ax);
}

kiln_status ir_eval_cum_sum(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0];
    KILN_TRY(need_number(e, x, "the input", false));
    bool exclusive = ir_eval_attr_int(e, "exclusive", 0) != 0;
    bool reverse = ir_eval_attr_int(e, "reverse", 0) != 0;
    int ax;
    /* The axis does not change the shape: check it now only when known. */
    if (e->in[1]->data) KILN_TRY(cum_sum_axis(e, x, &ax));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;
    KILN_TRY(ir_eval_need(e, 1));
    KILN_TRY(cum_sum_axis(e, x, &ax));

    int64_t outer, n, inner;
    split_at(x, ax, &outer, &n, &inner);
    bool is_f = ir_dtype_is_float(x->dtype);
    ir_tensor *y = &e->out[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double fsum = 0;
            uint64_t isum = 0;
            for (int64_t step = 0; step < n; step++) {
                int64_t k = reverse ? n - 1 - step : step;
                int64_t p = (o * n + k) * inner + i;
                if (exclusive) {
                    if (is_f) ir_set_f64(y, p, fsum);
                    else ir_set_i64(y, p, (int64_t)isum);
                }
                if (is_f) fsum += ir_get_f64(x, p);
                else isum += (uint64_t)ir_get_i64(x, p);
                if (!exclusive) {
                    if (is_f) ir_set_f64(y, p, fsum);
                    else ir_set_i64(y, p, (int64_t)isum);
                }
            }
        }
    return KILN_OK;
}

/* ---- TopK ---------------------------------------------------------------------- */

/* One candidate. Floats compare by f (i is 0), integers by i (f is 0);
 * unsigned values are stored with the sign bit flipped so that signed order
 * is their unsigned order. */
typedef struct topk_item {
    double f;
    int64_t i;
    int64_t idx;
} topk_item;

/* Total order on values; NaN above everything, as numpy sorts it. */
static int value_cmp(const topk_item *a, const topk_item *b)
{
    int na = isnan(a->f) != 0, nb = isnan(b->f) != 0;
    if (na || nb) return na - nb;
    if (a->f != b->f) return a->f < b->f ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Ties go to the lower index in both directions. */
static int by_largest(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    int c = value_cmp(b, a);
    return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

static int by_smallest(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    int c = value_cmp(a, b);
    return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

kiln_status ir_eval_top_k(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    KILN_TRY(need_number(e, x, "the input", false));
    int ax;
    KILN_TRY(tensor_axis(e, ir_eval_attr_int(e, "axis", -1), x, &ax));
    bool largest = ir_eval_attr_int(e, "largest", 1) != 0;
    int64_t k;
    if (e->node->opset < 10) {
        if (!ir_eval_has_attr(e, "k"))
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "attribute 'k' is required before opset 10");
        k = ir_eval_attr_int(e, "k", 0);
    } else {
        KILN_TRY(ir_eval_need(e, 1));
        const ir_tensor *kt = e->in[1];
        if (!ir_dtype_is_int(kt->dtype) || kt->rank > 1 || ir_numel(kt) != 1)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "K must be a 1-D integer tensor of one element, not %s of %lld",
                                kiln_dtype_name(kt->dtype), (long long)ir_numel(kt));
        k = ir_get_i64(kt, 0);
    }
    if (k < 0 || k > x->dims[ax])
        return ir_eval_fail(e, KILN_ERR_SHAPE, "K = %lld is out of range for axis %d of size %lld", (long long)k, ax,
                            (long long)x->dims[ax]);
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[ax] = k;
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, dims));
    KILN_TRY(ir_eval_out(e, 1, KILN_I64, x->rank, dims));
    if (e->infer) return KILN_OK;

    /* sorted=0 allows any order; sorted order is one of them. */
    int64_t outer, n, inner;
    split_at(x, ax, &outer, &n, &inner);
    topk_item *items = alloc_array(n, sizeof *items);
    if (!items) return oom(e);
    bool is_f = ir_dtype_is_float(x->dtype), uns = is_unsigned(x->dtype);
    ir_tensor *vals = &e->out[0];
    int64_t *idxs = e->out[1].data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++) {
                int64_t p = (o * n + j) * inner + i;
                items[j].idx = j;
                items[j].f = is_f ? ir_get_f64(x, p) : 0;
                items[j].i = is_f ? 0 : ir_get_i64(x, p);
                if (uns) items[j].i = (int64_t)((uint64_t)items[j].i ^ ((uint64_t)1 << 63));
            }
            qsort(items, (size_t)n, sizeof *items, largest ? by_largest : by_smallest);
            for (int64_t j = 0; j < k; j++) {
                int64_t p = (o * k + j) * inner + i;
                int64_t src = (o * n + items[j].idx) * inner + i;
                if (is_f) ir_set_f64(vals, p, ir_get_f64(x, src));
                else ir_set_i64(vals, p, ir_get_i64(x, src));
                idxs[p] = items[j].idx;
            }
        }
    base_free(items);
    return KILN_OK;
}

/* ---- LayerNormalization ---------------------------------------------------- */

/* t (Scale or B) must broadcast to x's shape without growing it. */
static kiln_status broadcasts_to(ir_eval *e, const ir_tensor *t, const ir_tensor *x, const char *what)
{
    const ir_tensor *pair[2] = {x, t};
    int rank;
    int64_t dims[IR_MAX_RANK];
    KILN_TRY(ir_eval_broadcast(e, 2, pair, &rank, dims));
    bool same = rank == x->rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] == x->dims[d];
    if (!same) return ir_eval_fail(e, KILN_ERR_SHAPE, "%s does not broadcast to the input's shape", what);
    if (t->dtype != x->dtype)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s is %s but the input is %s", what, kiln_dtype_name(t->dtype),
                            kiln_dtype_name(x->dtype));
    return KILN_OK;
}

kiln_status ir_eval_layer_norm(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0], *scale = e->in[1];
    const ir_tensor *bias = ir_eval_has(e, 2) ? e->in[2] : NULL;
    KILN_TRY(need_float(e, x, "X"));
    int ax;
    KILN_TRY(tensor_axis(e, ir_eval_attr_int(e, "axis", -1), x, &ax));
    double eps = ir_eval_attr_float(e, "epsilon", 1e-5);
    kiln_dtype stash = (kiln_dtype)ir_eval_attr_int(e, "stash_type", KILN_F32);
    if (stash <= KILN_UNDEF || stash >= KILN_DTYPE_COUNT || !ir_dtype_is_float(stash))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "stash_type %d is not a float dtype", (int)stash);
    KILN_TRY(broadcasts_to(e, scale, x, "Scale"));
    if (bias) KILN_TRY(broadcasts_to(e, bias, x, "B"));

    /* Mean and InvStdDev keep X's rank with the normalized dims set to 1. */
    int64_t rdims[IR_MAX_RANK];
    for (int d = 0; d < x->rank; d++) rdims[d] = d < ax ? x->dims[d] : 1;
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    for (int i = 1; i < e->n_out; i++) KILN_TRY(ir_eval_out(e, i, stash, x->rank, rdims));
    if (e->infer) return KILN_OK;

    int64_t rows = ir_dims_numel(ax, x->dims), cols = ir_dims_numel(x->rank - ax, x->dims + ax);
    double *v = ir_to_f64(x);
    if (!v) return oom(e);
    const ir_tensor *ts[3] = {x, scale, bias};
    ir_bcast b;
    ir_bcast_init(&b, x->rank, x->dims, bias ? 3 : 2, ts);
    ir_tensor *y = &e->out[0];
    for (int64_t r = 0; r < rows; r++) {
        const double *row = v + r * cols;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < cols; c++) mean += row[c];
        mean /= (double)cols;
        for (int64_t c = 0; c < cols; c++) var += (row[c] - mean) * (row[c] - mean);
        var /= (double)cols;
        double inv = 1.0 / sqrt(var + eps);
        for (int64_t c = 0; c < cols; c++, ir_bcast_next(&b)) {
            double out = (row[c] - mean) * inv * ir_get_f64(scale, b.off[1]);
            if (bias) out += ir_get_f64(bias, b.off[2]);
            ir_set_f64(y, r * cols + c, out);
        }
        if (e->n_out > 1) ir_set_f64(&e->out[1], r, mean);
        if (e->n_out > 2) ir_set_f64(&e->out[2], r, inv);
    }
    base_free(v);
    return KILN_OK;
}

/* ---- MeanVarianceNormalization --------------------------------------------- */

kiln_status ir_eval_mvn(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    KILN_TRY(need_float(e, x, "the input"));
    static const int64_t default_axes[] = {0, 2, 3};
    const int64_t *axes = default_axes;
    int n_axes = ir_eval_attr_ints(e, "axes", &axes);
    if (n_axes < 0) n_axes = 3, axes = default_axes;
    bool reduced[IR_MAX_RANK] = {false};
    if (n_axes > x->rank)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "%d axes given for an input of rank %d", n_axes, x->rank);
    for (int i = 0; i < n_axes; i++) KILN_TRY(mark_axis(e, axes[i], x->rank, reduced));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    int64_t n = ir_numel(x), m = 1;
    for (int d = 0; d < x->rank; d++)
        if (!reduced[d]) m *= x->dims[d];
    int64_t count = m ? n / m : 0;
    double *v = ir_to_f64(x);
    double *mean = alloc_array(m, sizeof *mean), *var = alloc_array(m, sizeof *var);
    int64_t *map = reduce_map(x, reduced);
    kiln_status st = KILN_OK;
    if (!v || !mean || !var || !map) {
        st = oom(e);
        goto done;
    }
    for (int64_t j = 0; j < m; j++) mean[j] = var[j] = 0;
    for (int64_t i = 0; i < n; i++) mean[map[i]] += v[i];
    for (int64_t j = 0; j < m; j++) mean[j] /= (double)count;
    for (int64_t i = 0; i < n; i++) var[map[i]] += (v[i] - mean[map[i]]) * (v[i] - mean[map[i]]);
    for (int64_t j = 0; j < m; j++) var[j] /= (double)count;
    /* ONNX's function body adds epsilon to the standard deviation. */
    for (int64_t i = 0; i < n; i++) v[i] = (v[i] - mean[map[i]]) / (sqrt(var[map[i]]) + 1e-9);
    ir_from_f64(&e->out[0], v);
done:
    base_free(v), base_free(mean), base_free(var), base_free(map);
    return st;
}

/* ---- LpNormalization ----------------------------------------------------------- */

kiln_status ir_eval_lp_norm(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    KILN_TRY(need_float(e, x, "the input"));
    int ax;
    KILN_TRY(tensor_axis(e, ir_eval_attr_int(e, "axis", -1), x, &ax));
    int64_t p = ir_eval_attr_int(e, "p", 2);
    if (p != 1 && p != 2) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "p must be 1 or 2, not %lld", (long long)p);
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    int64_t outer, n, inner;
    split_at(x, ax, &outer, &n, &inner);
    double *v = ir_to_f64(x);
    if (!v) return oom(e);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double *row = v + o * n * inner + i, norm = 0;
            for (int64_t k = 0; k < n; k++) norm += p == 1 ? fabs(row[k * inner]) : row[k * inner] * row[k * inner];
            if (p == 2) norm = sqrt(norm);
            /* A zero vector stays zero rather than becoming 0/0. */
            for (int64_t k = 0; k < n; k++) row[k * inner] = norm == 0 ? 0 : row[k * inner] / norm;
        }
    ir_from_f64(&e->out[0], v);
    base_free(v);
    return KILN_OK;
}

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ------------------- */

enum { LOSS_NONE, LOSS_SUM, LOSS_MEAN };

/* What the two losses share: input [N, C, d1..dk] (float), target
 * [N, d1..dk] (int32/int64), optional weight [C]; and the attributes. */
typedef struct loss_args {
    const ir_tensor *x, *target, *weight;
    int reduction;
    bool has_ignore;
    int64_t ignore_index;
} loss_args;

static kiln_status loss_check(ir_eval *e, loss_args *a)
{
    KILN_TRY(require_inputs(e, 2));
    a->x = e->in[0];
    a->target = e->in[1];
    a->weight = ir_eval_has(e, 2) ? e->in[2] : NULL;
    const ir_tensor *x = a->x, *t = a->target, *w = a->weight;
    KILN_TRY(need_float(e, x, "the input"));
    if (x->rank < 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the input must have rank >= 2 ([N, C, ...]), not %d", x->rank);
    if (t->dtype != KILN_I32 && t->dtype != KILN_I64)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the target must be int32 or int64, not %s", kiln_dtype_name(t->dtype));
    bool fits = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
    for (int d = 1; fits && d < t->rank; d++) fits = t->dims[d] == x->dims[d + 1];
    if (!fits) {
        char bx[64], bt[64];
        ir_tensor_type_str(x, bx, sizeof bx);
        ir_tensor_type_str(t, bt, sizeof bt);
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the target %s does not fit the input %s ([N, d1..dk] for [N, C, d1..dk])",
                            bt, bx);
    }
    if (w && (w->rank != 1 || w->dims[0] != x->dims[1] || w->dtype != x->dtype))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the weight must be 1-D of C = %lld elements of the input's dtype",
                            (long long)x->dims[1]);
    const char *red = ir_eval_attr_str(e, "reduction", "mean");
    if (!strcmp(red, "none")) a->reduction = LOSS_NONE;
    else if (!strcmp(red, "sum")) a->reduction = LOSS_SUM;
    else if (!strcmp(red, "mean")) a->reduction = LOSS_MEAN;
    else return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "reduction '%s' is not none, sum or mean", red);
    a->has_ignore = ir_eval_has_attr(e, "ignore_index");
    a->ignore_index = ir_eval_attr_int(e, "ignore_index", 0);
    return KILN_OK;
}

static kiln_status loss_out(ir_eval *e, const loss_args *a)
{
    if (a->reduction == LOSS_NONE) return ir_eval_out(e, 0, a->x->dtype, a->target->rank, a->target->dims);
    int64_t none[1] = {0};
    return ir_eval_out(e, 0, a->x->dtype, 0, none);
}

/* loss[n, d] = -logp[n, target[n, d], d] * weight[target[n, d]], targets
 * equal to ignore_index contributing nothing, not even weight to the mean's
 * denominator. logp is the input as [N, C, D] in double. */
static kiln_status loss_compute(ir_eval *e, const loss_args *a, const double *logp)
{
    int64_t N = a->x->dims[0], C = a->x->dims[1];
    int64_t D = ir_dims_numel(a->x->rank - 2, a->x->dims + 2);
    double *loss = alloc_array(N * D, sizeof *loss);
    if (!loss) return oom(e);
    double total = 0, weight_sum = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            int64_t j = n * D + d, c = ir_get_i64(a->target, j);
            if (a->has_ignore && c == a->ignore_index) {
                loss[j] = 0;
                continue;
            }
            if (c < 0 || c >= C) {
                base_free(loss);
                return ir_eval_fail(e, KILN_ERR_SHAPE, "target %lld at element %lld is outside [0, %lld)",
                                    (long long)c, (long long)j, (long long)C);
            }
            double w = a->weight ? ir_get_f64(a->weight, c) : 1.0;
            loss[j] = -logp[(n * C + c) * D + d] * w;
            total += loss[j];
            weight_sum += w;
        }
    ir_tensor *y = &e->out[0];
    if (a->reduction == LOSS_NONE) ir_from_f64(y, loss);
    else ir_set_f64(y, 0, a->reduction == LOSS_SUM ? total : total / weight_sum);
    base_free(loss);
    return KILN_OK;
}

kiln_status ir_eval_nll_loss(ir_eval *e)
{
    loss_args a;
    KILN_TRY(loss_check(e, &a));
    KILN_TRY(loss_out(e, &a));
    if (e->infer) return KILN_OK;
    double *v = ir_to_f64(a.x);
    if (!v) return oom(e);
    kiln_status st = loss_compute(e, &a, v);
    base_free(v);
    return st;
}

kiln_status ir_eval_sce_loss(ir_eval *e)
{
    loss_args a;
    KILN_TRY(loss_check(e, &a));
    KILN_TRY(loss_out(e, &a));
    if (e->n_out > 1) KILN_TRY(ir_eval_out(e, 1, a.x->dtype, a.x->rank, a.x->dims));
    if (e->infer) return KILN_OK;

    /* log_prob = LogSoftmax over the class axis. */
    int64_t N = a.x->dims[0], C = a.x->dims[1];
    int64_t D = ir_dims_numel(a.x->rank - 2, a.x->dims + 2);
    double *v = ir_to_f64(a.x);
    if (!v) return oom(e);
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            double *row = v + n * C * D + d, peak = -INFINITY, sum = 0;
            for (int64_t c = 0; c < C; c++)
                if (row[c * D] > peak || isnan(row[c * D])) peak = row[c * D];
            for (int64_t c = 0; c < C; c++) sum += exp(row[c * D] - peak);
            double lse = peak + log(sum);
            for (int64_t c = 0; c < C; c++) row[c * D] -= lse;
        }
    kiln_status st = loss_compute(e, &a, v);
    if (st == KILN_OK && e->n_out > 1) ir_from_f64(&e->out[1], v);
    base_free(v);
    return st;
}
