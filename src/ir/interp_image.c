/*
 * interp_image.c: image-space ops for the reference interpreter: Resize and
 * Upsample, GridSample, RoiAlign and NonMaxSuppression.
 *
 * Resize is separable: for every axis and every output index we precompute
 * the input taps (index, weight) once, then each output element is the sum
 * over the product of its axes' taps. Nearest has one tap, linear two, cubic
 * four; taps of weight zero are dropped, so an axis that is not resized costs
 * nothing. This N-D form makes linear multilinear over every resized axis,
 * as ONNX defines it. The coordinate mapping follows the ONNX reference
 * implementation, including its use of in_len * scale (not the floored
 * output length) as length_resized when the output comes from scales, but
 * maps pytorch_half_pixel to 0 for a length-1 output as the spec and
 * onnxruntime do. Upsample and opset-10 Resize use the legacy mapping
 * x / scale and, for nearest, onnxruntime's legacy rounding (ceil when
 * downsampling, floor otherwise).
 *
 * GridSample, RoiAlign and NonMaxSuppression follow the ONNX reference
 * implementations (which mirror PyTorch and onnxruntime) step by step, except
 * that bicubic GridSample pads its taps rather than its sampling point, as
 * PyTorch and onnxruntime do, and opset-10 RoiAlign keeps its
 * output_half_pixel mapping. NMS needs its inputs' data even in shape
 * inference, since the number of boxes kept is its output's shape.
 *
 * Integer outputs are rounded half to even and saturated, as the reference
 * does; everything else is computed in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/interp_ops.h"

static const ir_tensor *opt_in(const ir_eval *e, int i)
{
    return i < e->n_in ? e->in[i] : NULL;
}

/* Stores v into element i, rounding and saturating for integer dtypes. */
static void store(ir_tensor *t, int64_t i, double v)
{
    if (!ir_dtype_is_int(t->dtype)) {
        ir_set_f64(t, i, v);
        return;
    }
    double lo, hi;
    switch (t->dtype) {
    case KILN_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case KILN_U8: lo = 0, hi = UINT8_MAX; break;
    case KILN_I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case KILN_U16: lo = 0, hi = UINT16_MAX; break;
    case KILN_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case KILN_U32: lo = 0, hi = UINT32_MAX; break;
    case KILN_U64: lo = 0, hi = 18446744073709549568.0; break; /* largest double below 2^64 */
    default: lo = (double)INT64_MIN, hi = 9223372036854774784.0; break; /* below 2^63 */
    }
    v = isnan(v) ? 0 : nearbyint(v);
    v = v < lo ? lo : v > hi ? hi : v;
    ir_set_i64(t, i, t->dtype == KILN_U64 ? (int64_t)(uint64_t)v : (int64_t)v);
}

/* Keys' cubic convolution weights for the taps at -1, 0, 1, 2 around a
 * point at fraction t past tap 0. */
static void cubic_coeffs(double t, double a, double c[4])
{
    double t1 = t + 1, s = 1 - t, s1 = s + 1;
    c[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
    c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
    c[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
    c[3] = ((a * s1 - 5 * a) * s1 + 8 * a) * s1 - 4 * a;
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- Resize / Upsample ---------------------------------------------------- */

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC,
       CT_TF_HALF_PIXEL_FOR_NN, CT_TF_CROP_AND_RESIZE };
enum { NR_ROUND_PREFER_FLOOR, NR_ROUND_PREFER_CEIL, NR_FLOOR, NR_CEIL, NR_LEGACY };

static const char *const mode_names[] = {"nearest", "linear", "cubic"};
static const char *const ctm_names[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
static const char *const nearest_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

typedef struct resize_cfg {
    int mode, ctm, nearest;
    double cubic_a;
    bool exclude_outside;
    double extrapolation;
} resize_cfg;

/* The input taps of one output index along one axis. */
typedef struct taps {
    int64_t idx[4];
    double w[4];
    int n;
    bool outside; /* tf_crop_and_resize: the point is off the input */
} taps;

static int find_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

/* Taps for output index o of an axis of in_len inputs resized by `scale`
 * to `len_resized` (fractional when it comes from scales). */
static void axis_taps(const resize_cfg *c, int64_t o, int64_t in_len, double scale,
                      double len_resized, double roi_start, double roi_end, taps *t)
{
    double x;
    switch (c->ctm) {
    case CT_HALF_PIXEL: x = (o + 0.5) / scale - 0.5; break;
    case CT_PYTORCH_HALF_PIXEL: x = len_resized > 1 ? (o + 0.5) / scale - 0.5 : 0; break;
    case CT_ALIGN_CORNERS: x = len_resized == 1 ? 0 : o * (double)(in_len - 1) / (len_resized - 1); break;
    case CT_TF_HALF_PIXEL_FOR_NN: x = (o + 0.5) / scale; break;
    case CT_TF_CROP_AND_RESIZE:
        x = len_resized > 1 ? roi_start * (in_len - 1) + o * (roi_end - roi_start) * (in_len - 1) / (len_resized - 1)
                            : 0.5 * (roi_start + roi_end) * (in_len - 1);
        break;
    default: x = o / scale; break;
    }
    memset(t, 0, sizeof *t);
    if (c->ctm == CT_TF_CROP_AND_RESIZE && !(x >= 0 && x <= (double)(in_len - 1))) {
        t->outside = true;
        t->n = 1;
        return;
    }
    /* Taps past either edge read the edge element, so moving x further out
     * changes nothing; the bound keeps floor() within int64. */
    if (!(x >= -4)) x = -4;
    if (x > (double)in_len + 4) x = (double)in_len + 4;
    double fl = floor(x), frac = x - fl;
    int64_t i0 = (int64_t)fl, last = in_len - 1;

    if (c->mode == M_NEAREST) {
        int64_t i = i0;
        if (c->nearest == NR_LEGACY)
            i = scale < 1 ? (int64_t)ceil(x) : i0;
        else if (frac > 0) {
            bool up = c->nearest == NR_CEIL ||
                      (c->nearest == NR_ROUND_PREFER_FLOOR && frac > 0.5) ||
                      (c->nearest == NR_ROUND_PREFER_CEIL && frac >= 0.5);
            i = up ? i0 + 1 : i0;
        }
        t->idx[0] = clamp_i64(i, 0, last);
        t->w[0] = 1;
        t->n = 1;
        return;
    }

    int64_t raw[4];
    double w[4];
    int n;
    if (c->mode == M_LINEAR) {
        n = 2;
        raw[0] = i0, raw[1] = i0 + 1;
        w[0] = 1 - frac, w[1] = frac;
    } else {
        n = 4;
        for (int k = 0; k < 4; k++) raw[k] = i0 - 1 + k;
        cubic_coeffs(frac, c->cubic_a, w);
        if (c->exclude_outside) {
            double sum = 0;
            for (int k = 0; k < 4; k++) {
                if (raw[k] < 0 || raw[k] > last) w[k] = 0;
                sum += w[k];
            }
            if (sum != 0)
                for (int k = 0; k < 4; k++) w[k] /= sum;
        }
    }
    for (int k = 0; k < n; k++) {
        if (w[k] == 0) continue;
        t->idx[t->n] = clamp_i64(raw[k], 0, last);
        t->w[t->n] = w[k];
        t->n++;
    }
    if (t->n == 0) { /* every weight zero: keep one tap so the sum is 0, not empty */
        t->idx[0] = clamp_i64(i0, 0, last);
        t->n = 1;
    }
}

/* Output shape and per-axis scale / resized length from scales or sizes. */
typedef struct resize_shape {
    int64_t out[IR_MAX_RANK];
    double scale[IR_MAX_RANK];
    double len_resized[IR_MAX_RANK];
} resize_shape;

static kiln_status shape_from_scales(ir_eval *e, const ir_tensor *x, const double *scales, bool upsample,
                                     resize_shape *sh)
{
    for (int a = 0; a < x->rank; a++) {
        double s = scales[a];
        if (!(s > 0) || !isfinite(s) || (upsample && s < 1))
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "scale %g on axis %d is not %s", s, a,
                                upsample ? ">= 1" : "positive");
        double len = (double)x->dims[a] * s;
        if (len > (double)(INT64_C(1) << 52))
            return ir_eval_fail(e, KILN_ERR_SHAPE, "scale %g on axis %d makes the output too large", s, a);
        sh->scale[a] = s;
        sh->len_resized[a] = len;
        sh->out[a] = (int64_t)floor(len);
    }
    return KILN_OK;
}

kiln_status ir_eval_resize(ir_eval *e)
{
    bool upsample = e->node->op == KILN_OP_UPSAMPLE;
    bool legacy = upsample || e->node->opset < 11;
    const ir_tensor *x = opt_in(e, 0);
    char buf[96];

    if (!x) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "input X is missing");
    if (!ir_dtype_is_numeric(x->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "X of type %s is not supported",
                            ir_tensor_type_str(x, buf, sizeof buf));
    int rank = x->rank;

    resize_cfg c = {.ctm = CT_ASYMMETRIC, .nearest = NR_LEGACY, .cubic_a = -0.75};
    const char *mode = ir_eval_attr_str(e, "mode", "nearest");
    c.mode = find_name(mode, mode_names, 3);
    if (legacy && strcmp(mode, "bilinear") == 0) c.mode = M_LINEAR;
    if (c.mode < 0 || (legacy && c.mode == M_CUBIC))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "mode '%s' is not valid at opset %d", mode, e->node->opset);
    if (!legacy) {
        const char *ctm = ir_eval_attr_str(e, "coordinate_transformation_mode", "half_pixel");
        c.ctm = find_name(ctm, ctm_names, (int)KILN_COUNT(ctm_names));
        if (c.ctm < 0)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "unknown coordinate_transformation_mode '%s'", ctm);
        const char *nm = ir_eval_attr_str(e, "nearest_mode", "round_prefer_floor");
        c.nearest = find_name(nm, nearest_names, (int)KILN_COUNT(nearest_names));
        if (c.nearest < 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown nearest_mode '%s'", nm);
        c.cubic_a = ir_eval_attr_float(e, "cubic_coeff_a", -0.75);
        c.exclude_outside = ir_eval_attr_int(e, "exclude_outside", 0) != 0;
        c.extrapolation = ir_eval_attr_float(e, "extrapolation_value", 0.0);
        if (ir_eval_attr_int(e, "antialias", 0) != 0 || ir_eval_has_attr(e, "axes") ||
            strcmp(ir_eval_attr_str(e, "keep_aspect_ratio_policy", "stretch"), "stretch") != 0)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "antialias, axes and keep_aspect_ratio_policy are not supported");
    }

    /* Where the output size comes from: a scales attribute (Upsample-7), a
     * scales input (Upsample-9, Resize-10), or roi/scales/sizes (Resize-11+),
     * where an empty tensor stands for an absent one. */
    resize_shape sh;
    const ir_tensor *roi = NULL, *scales = NULL, *sizes = NULL;
    int scales_at = 1;
    if (legacy) {
        scales = opt_in(e, 1);
    } else {
        roi = opt_in(e, 1);
        scales = opt_in(e, 2);
        sizes = opt_in(e, 3);
        scales_at = 2;
        if (roi && ir_numel(roi) == 0) roi = NULL;
        if (scales && ir_numel(scales) == 0) scales = NULL;
        if (sizes && ir_numel(sizes) == 0) sizes = NULL;
    }
    if (upsample && e->node->opset < 9) {
        const double *attr = NULL;
        int n = ir_eval_attr_floats(e, "scales", &attr);
        if (n != rank)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "scales attribute has %d values for rank %d", n, rank);
        KILN_TRY(shape_from_scales(e, x, attr, true, &sh));
    } else if (scales && sizes) {
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "only one of scales and sizes may be given");
    } else if (scales) {
        if (!ir_dtype_is_float(scales->dtype) || scales->rank != 1 || scales->dims[0] != rank)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "scales is %s, expected %d floats",
                                ir_tensor_type_str(scales, buf, sizeof buf), rank);
        KILN_TRY(ir_eval_need(e, scales_at));
        double s[IR_MAX_RANK];
        for (int a = 0; a < rank; a++) s[a] = ir_get_f64(scales, a);
        KILN_TRY(shape_from_scales(e, x, s, upsample, &sh));
    } else if (sizes) {
        if (sizes->dtype != KILN_I64 || sizes->rank != 1 || sizes->dims[0] != rank)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "sizes is %s, expected %d int64 values",
                                ir_tensor_type_str(sizes, buf, sizeof buf), rank);
        KILN_TRY(ir_eval_need(e, 3));
        for (int a = 0; a < rank; a++) {
            int64_t n = ir_get_i64(sizes, a);
            if (n < 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "sizes[%d] = %lld is negative", a, (long long)n);
            if (x->dims[a] == 0 && n > 0)
                return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot resize the empty axis %d to %lld", a, (long long)n);
            sh.out[a] = n;
            sh.len_resized[a] = (double)n;
            sh.scale[a] = x->dims[a] ? (double)n / (double)x->dims[a] : 1.0;
        }
    } else {
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "needs scales or sizes");
    }
    if (c.ctm == CT_TF_CROP_AND_RESIZE &&
        (!roi || !ir_dtype_is_float(roi->dtype) || roi->rank != 1 || roi->dims[0] != 2 * rank))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "tf_crop_and_resize needs roi of %d floats", 2 * rank);

    KILN_TRY(ir_eval_out(e, 0, x->dtype, rank, sh.out));
    if (e->infer) return KILN_OK;
    ir_tensor *y = &e->out[0];
    int64_t total = ir_numel(y);
    if (total == 0) return KILN_OK;

    /* Every output axis is non-empty here, so each is at most `total` long. */
    int64_t n_taps = 0, first[IR_MAX_RANK];
    for (int a = 0; a < rank; a++) {
        first[a] = n_taps;
        n_taps += sh.out[a];
    }
    taps *tp = base_malloc((size_t)(n_taps ? n_taps : 1) * sizeof *tp);
    double *xd = ir_to_f64(x);
    if (!tp || !xd) {
        base_free(tp);
        base_free(xd);
        return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for Resize");
    }
    for (int a = 0; a < rank; a++) {
        double r0 = 0, r1 = 1;
        if (c.ctm == CT_TF_CROP_AND_RESIZE) r0 = ir_get_f64(roi, a), r1 = ir_get_f64(roi, rank + a);
        for (int64_t o = 0; o < sh.out[a]; o++)
            axis_taps(&c, o, x->dims[a], sh.scale[a], sh.len_resized[a], r0, r1, &tp[first[a] + o]);
    }

    int64_t in_strides[IR_MAX_RANK], o[IR_MAX_RANK] = {0};
    ir_strides(rank, x->dims, in_strides);
    for (int64_t i = 0; i < total; i++) {
        const taps *t[IR_MAX_RANK];
        bool outside = false;
        for (int a = 0; a < rank; a++) {
            t[a] = &tp[first[a] + o[a]];
            outside |= t[a]->outside;
        }
        double v = c.extrapolation;
        if (!outside) {
            int k[IR_MAX_RANK] = {0};
            int a;
            v = 0;
            do {
                double w = 1;
                int64_t off = 0;
                for (a = 0; a < rank; a++) {
                    w *= t[a]->w[k[a]];
                    off += t[a]->idx[k[a]] * in_strides[a];
                }
                v += w * xd[off];
                for (a = rank - 1; a >= 0 && ++k[a] == t[a]->n; a--) k[a] = 0;
            } while (a >= 0);
        }
        store(y, i, v);
        for (int a = rank - 1; a >= 0 && ++o[a] == sh.out[a]; a--) o[a] = 0;
    }
    base_free(tp);
    base_free(xd);
    return KILN_OK;
}

/* ---- GridSample ------------------------------------------------------------- */

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECTION };

/* Reflects x into [lo, hi] by its near border, repeatedly. */
static double reflect(double x, double lo, double hi)
{
    double range = hi - lo;
    if (range <= 0) return lo;
    if (x < lo) {
        double dx = lo - x, n = floor(dx / range), r = dx - n * range;
        return fmod(n, 2) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, n = floor(dx / range), r = dx - n * range;
        return fmod(n, 2) == 0 ? hi - r : lo + r;
    }
    return x;
}

typedef struct grid_cfg {
    int mode, padding;
    bool align_corners;
} grid_cfg;

/* Pixel (iy, ix) of an h x w plane under the padding mode. */
static double grid_pixel(const grid_cfg *g, const double *plane, int64_t h, int64_t w, int64_t iy, int64_t ix)
{
    if (g->padding == PAD_ZEROS) {
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) return 0;
    } else if (g->padding == PAD_REFLECTION) {
        double lo_y = g->align_corners ? 0 : -0.5, hi_y = g->align_corners ? h - 1 : h - 0.5;
        double lo_x = g->align_corners ? 0 : -0.5, hi_x = g->align_corners ? w - 1 : w - 0.5;
        iy = (int64_t)reflect((double)iy, lo_y, hi_y);
        ix = (int64_t)reflect((double)ix, lo_x, hi_x);
    }
    return plane[clamp_i64(iy, 0, h - 1) * w + clamp_i64(ix, 0, w - 1)];
}

/* Grid coordinate n in [-1, 1] to a pixel coordinate, with the padding mode
 * applied to the coordinate itself (border clamps, reflection folds). */
static double grid_coord(const grid_cfg *g, double n, int64_t len)
{
    double x = g->align_corners ? (n + 1) / 2 * (double)(len - 1) : ((n + 1) * (double)len - 1) / 2;
    if (g->mode == GS_NEAREST) x = nearbyint(x);
    double lo = g->align_corners ? 0 : -0.5, hi = g->align_corners ? (double)len - 1 : (double)len - 0.5;
    /* Bicubic pads its taps, not the point (PyTorch and onnxruntime): a
     * clamped point would give the edge pixels other weights. Reflecting the
     * point first is the same as reflecting each tap, and keeps x near. */
    if (x < lo || x > hi) {
        if (g->padding == PAD_BORDER && g->mode != GS_BICUBIC) x = x < 0 ? 0 : x > (double)len - 1 ? (double)len - 1 : x;
        else if (g->padding == PAD_REFLECTION) x = reflect(x, lo, hi);
    }
    /* Only zeros padding (or a reflection of an infinite point, NaN) can
     * leave x far outside, where every tap reads 0 or the edge anyway; the
     * bound keeps the tap indices within int64. */
    if (!(x >= -4)) x = -4;
    if (x > (double)len + 4) x = (double)len + 4;
    return x;
}

/* Taps along one axis for the interpolation mode; returns their count. */
static int grid_taps(const grid_cfg *g, double x, int64_t idx[4], double w[4])
{
    if (g->mode == GS_NEAREST) {
        idx[0] = (int64_t)x; /* x is already rounded; truncation as in the reference */
        w[0] = 1;
        return 1;
    }
    double fl = floor(x), t = x - fl;
    int64_t i0 = (int64_t)fl;
    if (g->mode == GS_BILINEAR) {
        idx[0] = i0, idx[1] = i0 + 1;
        w[0] = 1 - t, w[1] = t;
        return 2;
    }
    for (int k = 0; k < 4; k++) idx[k] = i0 - 1 + k;
    cubic_coeffs(t, -0.75, w);
    return 4;
}

kiln_status ir_eval_grid_sample(ir_eval *e)
{
    const ir_tensor *x = opt_in(e, 0), *grid = opt_in(e, 1);
    char b1[96], b2[96];
    if (!x || !grid) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "needs inputs X and grid");
    if (!ir_dtype_is_numeric(x->dtype) || x->rank != 4 || !ir_dtype_is_float(grid->dtype) || grid->rank != 4 ||
        grid->dims[0] != x->dims[0] || grid->dims[3] != 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "X %s and grid %s: expected X [N,C,H,W] and grid [N,Ho,Wo,2]",
                            ir_tensor_type_str(x, b1, sizeof b1), ir_tensor_type_str(grid, b2, sizeof b2));

    grid_cfg g;
    const char *mode = ir_eval_attr_str(e, "mode", "bilinear");
    if (strcmp(mode, "bilinear") == 0 || strcmp(mode, "linear") == 0) g.mode = GS_BILINEAR;
    else if (strcmp(mode, "nearest") == 0) g.mode = GS_NEAREST;
    else if (strcmp(mode, "bicubic") == 0 || strcmp(mode, "cubic") == 0) g.mode = GS_BICUBIC;
    else return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
    const char *pad = ir_eval_attr_str(e, "padding_mode", "zeros");
    if (strcmp(pad, "zeros") == 0) g.padding = PAD_ZEROS;
    else if (strcmp(pad, "border") == 0) g.padding = PAD_BORDER;
    else if (strcmp(pad, "reflection") == 0) g.padding = PAD_REFLECTION;
    else return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown padding_mode '%s'", pad);
    g.align_corners = ir_eval_attr_int(e, "align_corners", 0) != 0;

    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t Ho = grid->dims[1], Wo = grid->dims[2];
    KILN_TRY(ir_eval_out(e, 0, x->dtype, 4, (int64_t[]){N, C, Ho, Wo}));
    if (e->infer) return KILN_OK;
    if (ir_numel(&e->out[0]) == 0) return KILN_OK;
    if (H == 0 || W == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "X %s has an empty spatial axis",
                                              ir_tensor_type_str(x, b1, sizeof b1));

    double *xd = ir_to_f64(x), *gd = ir_to_f64(grid);
    if (!xd || !gd) {
        base_free(xd);
        base_free(gd);
        return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for GridSample");
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t p = 0; p < Ho * Wo; p++) {
            double gx = gd[(n * Ho * Wo + p) * 2], gy = gd[(n * Ho * Wo + p) * 2 + 1];
            int64_t iy[4], ix[4];
            double wy[4], wx[4];
            int ny = 0, nx = 0;
            bool nan = isnan(gx) || isnan(gy); /* no pixel to read: the output is 0 */
            if (!nan) {
                ny = grid_taps(&g, grid_coord(&g, gy, H), iy, wy);
                nx = grid_taps(&g, grid_coord(&g, gx, W), ix, wx);
            }
            for (int64_t ch = 0; ch < C; ch++) {
                const double *plane = xd + (n * C + ch) * H * W;
                double v = 0;
                for (int i = 0; i < ny; i++) {
                    double row = 0;
                    for (int j = 0; j < nx; j++) row += wx[j] * grid_pixel(&g, plane, H, W, iy[i], ix[j]);
                    v += wy[i] * row;
                }
                store(&e->out[0], (n * C + ch) * Ho * Wo + p, v);
            }
        }
    }
    base_free(xd);
    base_free(gd);
    return KILN_OK;
}

/* ---- RoiAlign ------------------------------------------------------------------ */

/* One bilinear sample: four pixel offsets and their weights. */
typedef struct roi_sample {
    int64_t pos[4];
    double w[4];
} roi_sample;

static roi_sample roi_bilinear(double y, double x, int64_t h, int64_t w)
{
    roi_sample s = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w) return s;
    if (y < 0) y = 0;
    if (x < 0) x = 0;
    int64_t y_lo = (int64_t)y, x_lo = (int64_t)x, y_hi, x_hi;
    if (y_lo >= h - 1) {
        y_hi = y_lo = h - 1;
        y = (double)y_lo;
    } else {
        y_hi = y_lo + 1;
    }
    if (x_lo >= w - 1) {
        x_hi = x_lo = w - 1;
        x = (double)x_lo;
    } else {
        x_hi = x_lo + 1;
    }
    double ly = y - (double)y_lo, lx = x - (double)x_lo, hy = 1 - ly, hx = 1 - lx;
    s.pos[0] = y_lo * w + x_lo, s.w[0] = hy * hx;
    s.pos[1] = y_lo * w + x_hi, s.w[1] = hy * lx;
    s.pos[2] = y_hi * w + x_lo, s.w[2] = ly * hx;
    s.pos[3] = y_hi * w + x_hi, s.w[3] = ly * lx;
    return s;
}

#define ROI_MAX_SAMPLES (INT64_C(1) << 24) /* per bin: beyond this a roi is garbage */

kiln_status ir_eval_roi_align(ir_eval *e)
{
    const ir_tensor *x = opt_in(e, 0), *rois = opt_in(e, 1), *bi = opt_in(e, 2);
    char b1[96], b2[96], b3[96];
    if (!x || !rois || !bi) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "needs inputs X, rois and batch_indices");
    if (!ir_dtype_is_float(x->dtype) || x->rank != 4 || !ir_dtype_is_float(rois->dtype) || rois->rank != 2 ||
        rois->dims[1] != 4 || !ir_dtype_is_int(bi->dtype) || bi->rank != 1 || bi->dims[0] != rois->dims[0])
        return ir_eval_fail(e, KILN_ERR_SHAPE,
                            "X %s, rois %s, batch_indices %s: expected [N,C,H,W], [R,4] and integer [R]",
                            ir_tensor_type_str(x, b1, sizeof b1), ir_tensor_type_str(rois, b2, sizeof b2),
                            ir_tensor_type_str(bi, b3, sizeof b3));

    const char *mode = ir_eval_attr_str(e, "mode", "avg");
    bool max_mode = strcmp(mode, "max") == 0;
    if (!max_mode && strcmp(mode, "avg") != 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
    int64_t oh = ir_eval_attr_int(e, "output_height", 1), ow = ir_eval_attr_int(e, "output_width", 1);
    int64_t ratio = ir_eval_attr_int(e, "sampling_ratio", 0);
    double scale = ir_eval_attr_float(e, "spatial_scale", 1.0);
    if (oh <= 0 || ow <= 0 || ratio < 0 || ratio > (1 << 12))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "output %lldx%lld and sampling_ratio %lld are not valid",
                            (long long)oh, (long long)ow, (long long)ratio);
    /* Opset 10 had no attribute and behaved as output_half_pixel. */
    const char *ctm = ir_eval_attr_str(e, "coordinate_transformation_mode",
                                       e->node->opset >= 16 ? "half_pixel" : "output_half_pixel");
    bool half_pixel = strcmp(ctm, "half_pixel") == 0;
    if (!half_pixel && strcmp(ctm, "output_half_pixel") != 0)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown coordinate_transformation_mode '%s'", ctm);

    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0];
    KILN_TRY(ir_eval_out(e, 0, x->dtype, 4, (int64_t[]){R, C, oh, ow}));
    if (e->infer) return KILN_OK;
    if (ir_numel(&e->out[0]) == 0) return KILN_OK;
    if (H == 0 || W == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "X %s has an empty spatial axis",
                                              ir_tensor_type_str(x, b1, sizeof b1));

    double *xd = ir_to_f64(x), *rd = ir_to_f64(rois);
    int64_t *bd = ir_to_i64(bi);
    kiln_status st = KILN_OK;
    if (!xd || !rd || !bd) st = ir_eval_fail(e, KILN_ERR_OOM, "out of memory for RoiAlign");
    ir_tensor *y = &e->out[0];
    for (int64_t r = 0; r < R && st == KILN_OK; r++) {
        if (bd[r] < 0 || bd[r] >= N) {
            st = ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "batch_indices[%lld] = %lld is outside [0, %lld)",
                              (long long)r, (long long)bd[r], (long long)N);
            break;
        }
        double offset = half_pixel ? 0.5 : 0.0;
        const double *box = rd + r * 4;
        double x0 = box[0] * scale - offset, y0 = box[1] * scale - offset;
        double rw = box[2] * scale - offset - x0, rh = box[3] * scale - offset - y0;
        if (!half_pixel) { /* malformed rois become 1x1 */
            rw = rw > 1 ? rw : 1;
            rh = rh > 1 ? rh : 1;
        }
        double bin_h = rh / (double)oh, bin_w = rw / (double)ow;
        double gh_f = ratio > 0 ? (double)ratio : ceil(rh / (double)oh);
        double gw_f = ratio > 0 ? (double)ratio : ceil(rw / (double)ow);
        bool sane = isfinite(x0) && isfinite(y0) && isfinite(gh_f) && isfinite(gw_f) &&
                    (gh_f <= 0 || gw_f <= 0 || gh_f * gw_f <= (double)ROI_MAX_SAMPLES);
        if (!sane) {
            st = ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "roi %lld (%g, %g, %g, %g) is not a usable box",
                              (long long)r, box[0], box[1], box[2], box[3]);
            break;
        }
        int64_t gh = gh_f > 0 ? (int64_t)gh_f : 0, gw = gw_f > 0 ? (int64_t)gw_f : 0;
        double count = gh * gw > 0 ? (double)(gh * gw) : 1.0;
        for (int64_t c = 0; c < C; c++) {
            const double *plane = xd + (bd[r] * C + c) * H * W;
            for (int64_t ph = 0; ph < oh; ph++) {
                for (int64_t pw = 0; pw < ow; pw++) {
                    double acc = 0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double sy = y0 + ph * bin_h + (iy + 0.5) * bin_h / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double sx = x0 + pw * bin_w + (ix + 0.5) * bin_w / (double)gw;
                            roi_sample s = roi_bilinear(sy, sx, H, W);
                            if (!max_mode) {
                                for (int k = 0; k < 4; k++) acc += s.w[k] * plane[s.pos[k]];
                                continue;
                            }
                            /* The reference's max mode: the largest weighted
                             * corner of each sample, maximised over samples. */
                            double v = s.w[0] * plane[s.pos[0]];
                            for (int k = 1; k < 4; k++) v = fmax(v, s.w[k] * plane[s.pos[k]]);
                            acc = first ? v : fmax(acc, v);
                            first = false;
                        }
                    }
                    store(y, ((r * C + c) * oh + ph) * ow + pw, max_mode ? acc : acc / count);
                }
            }
        }
    }
    base_free(xd);
    base_free(rd);
    base_free(bd);
    return st;
}

/* ---- NonMaxSuppression ------------------------------------------------------------ */

typedef struct nms_box {
    double score;
    int64_t idx;
} nms_box;

/* Highest score first, then lowest index; NaN scores sort last. */
static int nms_cmp(const void *pa, const void *pb)
{
    const nms_box *a = pa, *b = pb;
    bool na = isnan(a->score), nb = isnan(b->score);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Corners of a box as (y_min, x_min, y_max, x_max). */
static void nms_corners(const double *b, bool center, double out[4])
{
    if (center) {
        out[0] = b[1] - b[3] / 2, out[1] = b[0] - b[2] / 2;
        out[2] = b[1] + b[3] / 2, out[3] = b[0] + b[2] / 2;
    } else {
        out[0] = fmin(b[0], b[2]), out[1] = fmin(b[1], b[3]);
        out[2] = fmax(b[0], b[2]), out[3] = fmax(b[1], b[3]);
    }
}

static bool nms_suppress(const double *b1, const double *b2, bool center, double iou_threshold)
{
    double p[4], q[4];
    nms_corners(b1, center, p);
    nms_corners(b2, center, q);
    double ix0 = fmax(p[1], q[1]), ix1 = fmin(p[3], q[3]);
    double iy0 = fmax(p[0], q[0]), iy1 = fmin(p[2], q[2]);
    if (ix1 <= ix0 || iy1 <= iy0) return false;
    double inter = (ix1 - ix0) * (iy1 - iy0);
    double a1 = (p[3] - p[1]) * (p[2] - p[0]), a2 = (q[3] - q[1]) * (q[2] - q[0]);
    double uni = a1 + a2 - inter;
    if (inter <= 0 || a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > iou_threshold;
}

kiln_status ir_eval_nms(ir_eval *e)
{
    const ir_tensor *boxes = opt_in(e, 0), *scores = opt_in(e, 1);
    const ir_tensor *max_t = opt_in(e, 2), *iou_t = opt_in(e, 3), *score_t = opt_in(e, 4);
    char b1[96], b2[96];
    if (!boxes || !scores) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "needs inputs boxes and scores");
    if (!ir_dtype_is_float(boxes->dtype) || boxes->rank != 3 || boxes->dims[2] != 4 ||
        !ir_dtype_is_float(scores->dtype) || scores->rank != 3 || scores->dims[0] != boxes->dims[0] ||
        scores->dims[2] != boxes->dims[1])
        return ir_eval_fail(e, KILN_ERR_SHAPE, "boxes %s and scores %s: expected [B,S,4] and [B,C,S]",
                            ir_tensor_type_str(boxes, b1, sizeof b1), ir_tensor_type_str(scores, b2, sizeof b2));
    if (max_t && ir_numel(max_t) == 0) max_t = NULL;
    if (iou_t && ir_numel(iou_t) == 0) iou_t = NULL;
    if (score_t && ir_numel(score_t) == 0) score_t = NULL;
    if ((max_t && (!ir_dtype_is_int(max_t->dtype) || ir_numel(max_t) != 1)) ||
        (iou_t && (!ir_dtype_is_float(iou_t->dtype) || ir_numel(iou_t) != 1)) ||
        (score_t && (!ir_dtype_is_float(score_t->dtype) || ir_numel(score_t) != 1)))
        return ir_eval_fail(e, KILN_ERR_SHAPE,
                            "max_output_boxes_per_class, iou_threshold and score_threshold must be single values");
    int64_t center = ir_eval_attr_int(e, "center_point_box", 0);
    if (center != 0 && center != 1)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "center_point_box %lld is not 0 or 1", (long long)center);

    /* The output's length is the number of boxes kept: data decides it. */
    for (int i = 0; i < 5; i++)
        if (opt_in(e, i) && ir_numel(e->in[i]) > 0) KILN_TRY(ir_eval_need(e, i));

    int64_t B = boxes->dims[0], C = scores->dims[1], S = boxes->dims[1];
    int64_t max_out = max_t ? ir_get_i64(max_t, 0) : 0;
    double iou = iou_t ? ir_get_f64(iou_t, 0) : 0.0;
    double score_min = score_t ? ir_get_f64(score_t, 0) : 0.0;
    if (!(iou >= 0 && iou <= 1))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "iou_threshold %g is outside [0, 1]", iou);
    if (max_out < 0) max_out = 0;
    if (max_out > S) max_out = S;

    int64_t cap = B * C * max_out;
    double *bd = ir_to_f64(boxes), *sd = ir_to_f64(scores);
    nms_box *cand = base_malloc((size_t)(S ? S : 1) * sizeof *cand);
    int64_t *kept = base_malloc((size_t)(max_out ? max_out : 1) * sizeof *kept);
    int64_t *sel = base_malloc((size_t)(cap ? cap : 1) * 3 * sizeof *sel);
    int64_t n_sel = 0;
    kiln_status st = KILN_OK;
    if (!bd || !sd || !cand || !kept || !sel) {
        st = ir_eval_fail(e, KILN_ERR_OOM, "out of memory for NonMaxSuppression");
        goto done;
    }
    for (int64_t b = 0; b < B && max_out > 0; b++) {
        for (int64_t c = 0; c < C; c++) {
            const double *sc = sd + (b * C + c) * S;
            int64_t n_cand = 0, n_kept = 0;
            for (int64_t i = 0; i < S; i++)
                if (!score_t || sc[i] > score_min) cand[n_cand++] = (nms_box){sc[i], i};
            qsort(cand, (size_t)n_cand, sizeof *cand, nms_cmp);
            for (int64_t k = 0; k < n_cand && n_kept < max_out; k++) {
                const double *box = bd + (b * S + cand[k].idx) * 4;
                bool keep = true;
                for (int64_t j = 0; j < n_kept && keep; j++)
                    keep = !nms_suppress(box, bd + (b * S + kept[j]) * 4, center, iou);
                if (!keep) continue;
                kept[n_kept++] = cand[k].idx;
                sel[n_sel * 3] = b, sel[n_sel * 3 + 1] = c, sel[n_sel * 3 + 2] = cand[k].idx;
                n_sel++;
            }
        }
    }
    st = ir_eval_out(e, 0, KILN_I64, 2, (int64_t[]){n_sel, 3});
    if (st == KILN_OK && !e->infer)
        for (int64_t i = 0; i < n_sel * 3; i++) ir_set_i64(&e->out[0], i, sel[i]);
done:
    base_free(bd);
    base_free(sd);
    base_free(cand);
    base_free(kept);
    base_free(sel);
    return st;
}
