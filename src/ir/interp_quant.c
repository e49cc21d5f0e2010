/*
 * interp_quant.c: the reference interpreter's linear quantization ops:
 * QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.
 *
 *     QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
 *     DequantizeLinear: y = (x - zero_point) * scale
 *
 * The scale and zero point are per tensor (a scalar or one-element tensor)
 * or, from opset 13, per axis: a 1-D tensor with one entry per index of the
 * 'axis' dimension (default 1). Quantized dtypes are u8 and i8 (u16 and i16
 * of later opsets too); without a zero point QuantizeLinear produces u8.
 * A NaN quantizes to the zero point, an infinity saturates.
 *
 * x / scale is the division of the scale's float type (f32 up to opset 17),
 * not of double: ORT and the ONNX reference divide in f32, and when the
 * quotient lands on k + 0.5 in f32 but just below it in double, the f32
 * value decides the rounding (test_dynamicquantizelinear has such a case).
 * Dequantizing is computed in double and rounded once.
 *
 * DynamicQuantizeLinear follows the spec's formulas in f32, as ORT and the
 * ONNX reference compute them: the range includes 0, scale = (max - min) /
 * 255 (1/255 for an all-zero input, where the range is empty), zero point =
 * saturate(round(-min / scale)); y then quantizes x with that scale and zero
 * point as QuantizeLinear would.
 */
#include "ir/interp_ops.h"

#include <math.h>
#include <string.h>

/* Where each element of x finds its scale and zero point: entry
 * (i / inner) % n_ch; n_ch 1 for per-tensor. */
typedef struct qlayout {
    int64_t n_ch;
    int64_t inner;
} qlayout;

static int64_t channel(const qlayout *q, int64_t i) { return q->n_ch == 1 ? 0 : (i / q->inner) % q->n_ch; }

/* Checks the scale (input 1) and optional zero point (input 2) against x. */
static kiln_status quant_layout(ir_eval *e, qlayout *q)
{
    const ir_tensor *x = e->in[0], *scale = e->in[1];
    const ir_tensor *zp = ir_eval_has(e, 2) ? e->in[2] : NULL;
    char b1[160], b2[160];
    if (!ir_dtype_is_float(scale->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the scale has dtype %s; it must be a float tensor",
                            kiln_dtype_name(scale->dtype));
    q->n_ch = 1;
    q->inner = 1;
    if (scale->rank > 1 || (scale->rank == 1 && ir_numel(scale) != 1)) {
        if (scale->rank != 1)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "the scale %s must be a scalar or 1-D",
                                ir_tensor_type_str(scale, b1, sizeof(b1)));
        if (e->node->opset < 13)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "a per-axis scale %s needs opset 13 (the model has %d)",
                                ir_tensor_type_str(scale, b1, sizeof(b1)), e->node->opset);
        if (x->rank == 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "a per-axis scale %s needs a non-scalar input",
                                ir_tensor_type_str(scale, b1, sizeof(b1)));
        int axis;
        KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 1), x->rank, &axis));
        if (scale->dims[0] != x->dims[axis])
            return ir_eval_fail(e, KILN_ERR_SHAPE, "the scale %s has %lld entries but axis %d of the input %s has %lld",
                                ir_tensor_type_str(scale, b1, sizeof(b1)), (long long)scale->dims[0], axis,
                                ir_tensor_type_str(x, b2, sizeof(b2)), (long long)x->dims[axis]);
        q->n_ch = scale->dims[0];
        for (int d = axis + 1; d < x->rank; d++) q->inner *= x->dims[d];
    }
    if (zp && (zp->rank > 1 || ir_numel(zp) != ir_numel(scale)))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the zero point %s does not match the scale %s",
                            ir_tensor_type_str(zp, b1, sizeof(b1)), ir_tensor_type_str(scale, b2, sizeof(b2)));
    return KILN_OK;
}

static bool quant_range(kiln_dtype t, double *lo, double *hi)
{
    switch (t) {
    case KILN_U8: *lo = 0, *hi = 255; return true;
    case KILN_I8: *lo = -128, *hi = 127; return true;
    case KILN_U16: *lo = 0, *hi = 65535; return true;
    case KILN_I16: *lo = -32768, *hi = 32767; return true;
    default: return false;
    }
}

/* x / s rounded to the float type t, which is what dividing in t gives:
 * the exact quotient rounded once (double's rounding first is harmless,
 * its 53 bits being more than twice t's precision plus two). */
static double div_in(kiln_dtype t, double x, double s)
{
    double q = x / s;
    switch (t) {
    case KILN_F32: return (float)q;
    case KILN_F16: return base_f16_to_f32(base_f32_to_f16((float)q));
    case KILN_BF16: return base_bf16_to_f32(base_f32_to_bf16((float)q));
    default: return q;
    }
}

/* round_half_even(v) + zp, saturated to [lo, hi]; NaN gives the zero point. */
static double quantize(double v, double zp, double lo, double hi)
{
    double q = nearbyint(v); /* the default rounding mode is half to even */
    if (isnan(q)) q = 0;
    q += zp;
    return q < lo ? lo : q > hi ? hi : q;
}

static kiln_status need_inputs(ir_eval *e, int n)
{
    for (int i = 0; i < n; i++)
        if (!ir_eval_has(e, i)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input %d is missing", i);
    return KILN_OK;
}

kiln_status ir_eval_quantize(ir_eval *e)
{
    KILN_TRY(need_inputs(e, 2));
    const ir_tensor *x = e->in[0], *scale = e->in[1];
    const ir_tensor *zp = ir_eval_has(e, 2) ? e->in[2] : NULL;
    if (!ir_dtype_is_float(x->dtype) && x->dtype != KILN_I32)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the input has dtype %s; QuantizeLinear takes float or i32",
                            kiln_dtype_name(x->dtype));
    qlayout q;
    KILN_TRY(quant_layout(e, &q));
    /* Opset 21's output_dtype names the type when there is no zero point. */
    kiln_dtype out_dtype = zp ? zp->dtype : (kiln_dtype)ir_eval_attr_int(e, "output_dtype", KILN_U8);
    if (out_dtype == KILN_UNDEF) out_dtype = KILN_U8;
    double lo, hi;
    if (!quant_range(out_dtype, &lo, &hi))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "quantizing to %s is not supported (u8, i8, u16, i16 are)",
                            kiln_dtype_name(out_dtype));
    KILN_TRY(ir_eval_out(e, 0, out_dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = channel(&q, i);
        double z = zp ? (double)ir_get_i64(zp, c) : 0.0;
        double v = div_in(scale->dtype, ir_get_f64(x, i), ir_get_f64(scale, c));
        ir_set_i64(y, i, (int64_t)quantize(v, z, lo, hi));
    }
    return KILN_OK;
}

kiln_status ir_eval_dequantize(ir_eval *e)
{
    KILN_TRY(need_inputs(e, 2));
    const ir_tensor *x = e->in[0], *scale = e->in[1];
    const ir_tensor *zp = ir_eval_has(e, 2) ? e->in[2] : NULL;
    double lo, hi;
    if (!quant_range(x->dtype, &lo, &hi) && x->dtype != KILN_I32)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED,
                            "the input has dtype %s; DequantizeLinear takes u8, i8, u16, i16 or i32",
                            kiln_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the zero point is %s but the input is %s; they must match",
                            kiln_dtype_name(zp->dtype), kiln_dtype_name(x->dtype));
    qlayout q;
    KILN_TRY(quant_layout(e, &q));
    /* f32 up to opset 17; the scale's type (f16, bf16) from opset 19 on. */
    KILN_TRY(ir_eval_out(e, 0, scale->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = channel(&q, i);
        int64_t z = zp ? ir_get_i64(zp, c) : 0;
        ir_set_f64(y, i, (double)(ir_get_i64(x, i) - z) * ir_get_f64(scale, c));
    }
    return KILN_OK;
}

kiln_status ir_eval_dynamic_quantize(ir_eval *e)
{
    KILN_TRY(need_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    if (x->dtype != KILN_F32)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the input has dtype %s; DynamicQuantizeLinear takes f32",
                            kiln_dtype_name(x->dtype));
    KILN_TRY(ir_eval_out(e, 0, KILN_U8, x->rank, x->dims));
    const int64_t scalar[1] = {0};
    KILN_TRY(ir_eval_out(e, 1, KILN_F32, 0, scalar));
    KILN_TRY(ir_eval_out(e, 2, KILN_U8, 0, scalar));
    if (e->infer) return KILN_OK;

    const float *xd = x->data;
    int64_t n = ir_numel(x);
    float maxx = 0.0f, minx = 0.0f; /* the range always includes 0; NaNs are skipped */
    for (int64_t i = 0; i < n; i++) {
        if (xd[i] > maxx) maxx = xd[i];
        if (xd[i] < minx) minx = xd[i];
    }
    float scale = (maxx == minx ? 1.0f : maxx - minx) / 255.0f;
    float zp_f = 0.0f - minx / scale;
    zp_f = zp_f < 0.0f ? 0.0f : zp_f > 255.0f ? 255.0f : zp_f;
    double zp = nearbyint((double)zp_f);

    uint8_t *y = e->out[0].data;
    for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)quantize(div_in(KILN_F32, xd[i], scale), zp, 0, 255);
    *(float *)e->out[1].data = scale;
    *(uint8_t *)e->out[2].data = (uint8_t)zp;
    return KILN_OK;
}
