/*
 * interp_random.c: the reference interpreter's random ops: RandomUniform,
 * RandomUniformLike, RandomNormal, RandomNormalLike, Bernoulli, Multinomial.
 *
 * Every draw comes from the run's seeded generator (ir_eval_uniform), so runs
 * are repeatable; the `seed` attribute is ignored, since no other runtime's
 * generator could be matched anyway. What must be exact are the output
 * dtypes and shapes, and that each value lies in its distribution's range.
 */
#include "ir/interp_ops.h"

#include <math.h>

/* The `dtype` attribute as a dtype; def when absent. Fails unless it is a
 * float dtype, or any numeric one when any_numeric. */
static kiln_status dtype_attr(ir_eval *e, kiln_dtype def, bool any_numeric, kiln_dtype *out)
{
    int64_t v = ir_eval_attr_int(e, "dtype", def);
    kiln_dtype t = v > KILN_UNDEF && v < KILN_DTYPE_COUNT ? (kiln_dtype)v : KILN_UNDEF;
    bool ok = t != KILN_UNDEF && (ir_dtype_is_float(t) || (any_numeric && ir_dtype_is_numeric(t)));
    if (!ok)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "dtype %lld (%s) is not a dtype this op can produce",
                            (long long)v, t != KILN_UNDEF ? kiln_dtype_name(t) : "unknown");
    *out = t;
    return KILN_OK;
}

/* Standard normal by Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
static double normal(ir_eval *e)
{
    double u1 = 1.0 - ir_eval_uniform(e), u2 = ir_eval_uniform(e);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* RandomUniform[Like], RandomNormal[Like]: shape from the `shape` attribute
 * or from the input, dtype from `dtype` or (for *Like) from the input. */
static kiln_status eval_fill(ir_eval *e, bool like, bool is_normal)
{
    int rank;
    int64_t dims[IR_MAX_RANK];
    kiln_dtype dt;
    if (like) {
        if (!ir_eval_has(e, 0)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input 0 is missing");
        const ir_tensor *x = e->in[0];
        rank = x->rank;
        for (int d = 0; d < rank; d++) dims[d] = x->dims[d];
        if (ir_eval_has_attr(e, "dtype")) KILN_TRY(dtype_attr(e, KILN_F32, false, &dt));
        else if (ir_dtype_is_float(x->dtype)) dt = x->dtype;
        else
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL,
                                "the input is %s, so the float output dtype must be given by the dtype attribute",
                                kiln_dtype_name(x->dtype));
    } else {
        const int64_t *shape;
        int n = ir_eval_attr_ints(e, "shape", &shape);
        if (n < 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "attribute 'shape' is required");
        if (n > IR_MAX_RANK)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "shape has rank %d; kiln supports up to %d", n, IR_MAX_RANK);
        rank = n;
        for (int d = 0; d < rank; d++) dims[d] = shape[d];
        KILN_TRY(dtype_attr(e, KILN_F32, false, &dt));
    }
    double a, b;
    if (is_normal) {
        a = ir_eval_attr_float(e, "mean", 0.0);
        b = ir_eval_attr_float(e, "scale", 1.0);
    } else {
        a = ir_eval_attr_float(e, "low", 0.0);
        b = ir_eval_attr_float(e, "high", 1.0);
        if (!(a <= b))
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "low (%g) must not exceed high (%g)", a, b);
    }
    KILN_TRY(ir_eval_out(e, 0, dt, rank, dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_numel(y);
    for (int64_t i = 0; i < n; i++) {
        if (is_normal) {
            ir_set_f64(y, i, a + b * normal(e));
            continue;
        }
        /* Rounding into f32/f16 can turn a draw just below high into high
         * itself; draw again to keep the interval half-open, a bounded
         * number of times since the dtype may have nothing in [low, high). */
        for (int tries = 0; tries < 64; tries++) {
            ir_set_f64(y, i, a + (b - a) * ir_eval_uniform(e));
            if (!(a < b && ir_get_f64(y, i) >= b)) break;
        }
    }
    return KILN_OK;
}

/* Bernoulli: 1 with the input's probability, in `dtype` or the input's dtype. */
static kiln_status eval_bernoulli(ir_eval *e)
{
    if (!ir_eval_has(e, 0)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input 0 is missing");
    const ir_tensor *p = e->in[0];
    if (!ir_dtype_is_float(p->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the probabilities must be a float tensor, not %s",
                            kiln_dtype_name(p->dtype));
    kiln_dtype dt;
    KILN_TRY(dtype_attr(e, p->dtype, true, &dt));
    KILN_TRY(ir_eval_out(e, 0, dt, p->rank, p->dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_numel(p);
    for (int64_t i = 0; i < n; i++) ir_set_i64(y, i, ir_eval_uniform(e) < ir_get_f64(p, i));
    return KILN_OK;
}

/* Multinomial: input [batch, classes] of unnormalized log-probabilities;
 * output [batch, sample_size] of class indices (int32 or int64). */
static kiln_status eval_multinomial(ir_eval *e)
{
    if (!ir_eval_has(e, 0)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input 0 is missing");
    const ir_tensor *x = e->in[0];
    if (!ir_dtype_is_float(x->dtype) || x->rank != 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the input must be a 2-D float tensor [batch, classes], not %s of rank %d",
                            kiln_dtype_name(x->dtype), x->rank);
    int64_t v = ir_eval_attr_int(e, "dtype", KILN_I32);
    if (v != KILN_I32 && v != KILN_I64)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "dtype %lld must be int32 (6) or int64 (7)", (long long)v);
    int64_t samples = ir_eval_attr_int(e, "sample_size", 1);
    if (samples < 0)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "sample_size %lld is negative", (long long)samples);
    int64_t batch = x->dims[0], classes = x->dims[1];
    if (classes == 0 && batch > 0 && samples > 0)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot sample from zero classes");
    int64_t dims[2] = {batch, samples};
    KILN_TRY(ir_eval_out(e, 0, (kiln_dtype)v, 2, dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    for (int64_t b = 0; b < batch; b++) {
        /* Weights exp(x - max) need no normalizing: the draw scales by their sum. */
        double peak = -INFINITY, total = 0;
        for (int64_t c = 0; c < classes; c++) peak = fmax(peak, ir_get_f64(x, b * classes + c));
        for (int64_t c = 0; c < classes; c++) total += exp(ir_get_f64(x, b * classes + c) - peak);
        for (int64_t s = 0; s < samples; s++) {
            double u = ir_eval_uniform(e) * total, cum = 0;
            int64_t pick = classes - 1; /* rounding may leave u just above the last sum */
            for (int64_t c = 0; c < classes; c++) {
                cum += exp(ir_get_f64(x, b * classes + c) - peak);
                if (u < cum) {
                    pick = c;
                    break;
                }
            }
            ir_set_i64(y, b * samples + s, pick);
        }
    }
    return KILN_OK;
}

kiln_status ir_eval_random(ir_eval *e)
{
    switch (e->node->op) {
    case KILN_OP_RANDOM_UNIFORM: return eval_fill(e, false, false);
    case KILN_OP_RANDOM_UNIFORM_LIKE: return eval_fill(e, true, false);
    case KILN_OP_RANDOM_NORMAL: return eval_fill(e, false, true);
    case KILN_OP_RANDOM_NORMAL_LIKE: return eval_fill(e, true, true);
    case KILN_OP_BERNOULLI: return eval_bernoulli(e);
    case KILN_OP_MULTINOMIAL: return eval_multinomial(e);
    default: return ir_eval_fail(e, KILN_ERR_INTERNAL, "not a random op");
    }
}
