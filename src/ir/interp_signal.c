/*
 * interp_signal.c: the reference interpreter's signal-processing ops (opset
 * 17): DFT, STFT, the window generators HannWindow, HammingWindow and
 * BlackmanWindow, and MelWeightMatrix.
 *
 * Complex tensors are real tensors whose last dim is 2 (real, imaginary); a
 * last dim of 1 is a real signal. Transforms are the direct O(n^2) sums in
 * double, with twiddles indexed by (k * j) mod n so large products lose no
 * accuracy: this is the oracle, an FFT would only add places to be wrong.
 */
#include "ir/interp_ops.h"

#include <math.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

/* The integer scalar (or one-element 1-D tensor) held by input i, which must
 * be known: shapes depend on it. */
static kiln_status scalar_int(ir_eval *e, int i, const char *what, int64_t *out)
{
    KILN_TRY(ir_eval_need(e, i));
    const ir_tensor *t = e->in[i];
    if (!ir_dtype_is_int(t->dtype) || t->rank > 1 || ir_numel(t) != 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s (input %d) must be an integer scalar, not %s of %lld elements",
                            what, i, kiln_dtype_name(t->dtype), (long long)ir_numel(t));
    *out = ir_get_i64(t, 0);
    return KILN_OK;
}

/* The float scalar held by input i (known at run time). */
static kiln_status scalar_float(ir_eval *e, int i, const char *what, double *out)
{
    if (!ir_eval_has(e, i)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "%s (input %d) is missing", what, i);
    const ir_tensor *t = e->in[i];
    if (!ir_dtype_is_float(t->dtype) || t->rank > 1 || ir_numel(t) != 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s (input %d) must be a float scalar, not %s of %lld elements",
                            what, i, kiln_dtype_name(t->dtype), (long long)ir_numel(t));
    *out = e->infer && !t->data ? 0 : ir_get_f64(t, 0);
    return KILN_OK;
}

/* The `output_datatype` attribute (default float): any numeric dtype. */
static kiln_status output_dtype(ir_eval *e, kiln_dtype *out)
{
    int64_t v = ir_eval_attr_int(e, "output_datatype", KILN_F32);
    kiln_dtype t = v > KILN_UNDEF && v < KILN_DTYPE_COUNT ? (kiln_dtype)v : KILN_UNDEF;
    if (t == KILN_UNDEF || !ir_dtype_is_numeric(t))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "output_datatype %lld is not a numeric dtype", (long long)v);
    *out = t;
    return KILN_OK;
}

static kiln_status oom(ir_eval *e) { return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for temporaries"); }

/* cos and sin of sign * 2 pi k / n for k in [0, n). OUT: base_malloc'd. */
static kiln_status twiddles(ir_eval *e, int64_t n, double sign, double **c, double **s)
{
    size_t bytes;
    if (!base_mul_ok((size_t)n, sizeof(double), &bytes)) return oom(e);
    *c = base_malloc(bytes ? bytes : 1);
    *s = base_malloc(bytes ? bytes : 1);
    if (!*c || !*s) {
        base_free(*c), base_free(*s);
        return oom(e);
    }
    for (int64_t k = 0; k < n; k++) {
        double a = sign * 2.0 * M_PI * (double)k / (double)n;
        (*c)[k] = cos(a);
        (*s)[k] = sin(a);
    }
    return KILN_OK;
}

/* out[k] = scale * sum_j in[j] * w^(k j) for k < n_out, where in has n
 * complex values (re, im interleaved) and w = cos + i sin from twiddles(n). */
static void dft_1d(const double *in, int64_t n, int64_t n_out, const double *c, const double *s, double scale,
                   double *out)
{
    for (int64_t k = 0; k < n_out; k++) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t t = (k * j) % n;
            re += in[2 * j] * c[t] - in[2 * j + 1] * s[t];
            im += in[2 * j] * s[t] + in[2 * j + 1] * c[t];
        }
        out[2 * k] = re * scale;
        out[2 * k + 1] = im * scale;
    }
}

/* ---- DFT ---------------------------------------------------------------------- */

kiln_status ir_eval_dft(ir_eval *e)
{
    if (!ir_eval_has(e, 0)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input 0 is missing");
    const ir_tensor *x = e->in[0];
    if (!ir_dtype_is_float(x->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the input must be a float tensor, not %s",
                            kiln_dtype_name(x->dtype));
    int r = x->rank;
    if (r < 2 || (x->dims[r - 1] != 1 && x->dims[r - 1] != 2))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the input must be [..., signal, 1 or 2]; its rank is %d", r);
    bool inverse = ir_eval_attr_int(e, "inverse", 0) != 0;
    bool onesided = ir_eval_attr_int(e, "onesided", 0) != 0;
    int64_t axis = ir_eval_attr_int(e, "axis", 1);
    if (e->node->opset >= 20) {
        /* Opset 20 moved axis to input 2 and made an inverse one-sided DFT a
         * real-output IRFFT, which this opset-17 kernel does not compute. */
        axis = -2;
        if (ir_eval_has(e, 2)) KILN_TRY(scalar_int(e, 2, "axis", &axis));
        if (inverse && onesided)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "an inverse one-sided DFT (opset 20) is not supported");
    }
    /* The last dim holds (re, im) and cannot be transformed. */
    if (axis < -r || axis > r - 2)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %lld is out of range [%d, %d] for rank %d",
                            (long long)axis, -r, r - 2, r);
    int ax = (int)(axis < 0 ? axis + r : axis);
    if (ax == r - 1)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %lld is the (re, im) dim", (long long)axis);
    int64_t len = x->dims[ax], n = len;
    if (ir_eval_has(e, 1)) {
        KILN_TRY(scalar_int(e, 1, "dft_length", &n));
        if (n <= 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "dft_length %lld must be positive", (long long)n);
    }
    if (n == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "the signal along axis %d is empty", ax);
    int64_t n_out = onesided ? n / 2 + 1 : n;
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[ax] = n_out;
    dims[r - 1] = 2;
    KILN_TRY(ir_eval_out(e, 0, x->dtype, r, dims));
    if (e->infer) return KILN_OK;

    int64_t outer = ir_dims_numel(ax, x->dims), inner = ir_dims_numel(r - ax - 2, x->dims + ax + 1);
    int64_t ch = x->dims[r - 1];
    double *c, *s;
    KILN_TRY(twiddles(e, n, inverse ? 1.0 : -1.0, &c, &s));
    double *sig = base_malloc((size_t)n * 2 * sizeof(double));
    double *res = base_malloc((size_t)n_out * 2 * sizeof(double));
    if (!sig || !res) {
        base_free(c), base_free(s), base_free(sig), base_free(res);
        return oom(e);
    }
    ir_tensor *y = &e->out[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            /* dft_length pads the signal with zeros or truncates it. */
            for (int64_t j = 0; j < n; j++) {
                int64_t p = ((o * len + j) * inner + i) * ch;
                sig[2 * j] = j < len ? ir_get_f64(x, p) : 0;
                sig[2 * j + 1] = j < len && ch == 2 ? ir_get_f64(x, p + 1) : 0;
            }
            dft_1d(sig, n, n_out, c, s, inverse ? 1.0 / (double)n : 1.0, res);
            for (int64_t k = 0; k < n_out; k++) {
                int64_t q = ((o * n_out + k) * inner + i) * 2;
                ir_set_f64(y, q, res[2 * k]);
                ir_set_f64(y, q + 1, res[2 * k + 1]);
            }
        }
    base_free(c), base_free(s), base_free(sig), base_free(res);
    return KILN_OK;
}

/* ---- STFT --------------------------------------------------------------------- */

kiln_status ir_eval_stft(ir_eval *e)
{
    if (!ir_eval_has(e, 0)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input 0 is missing");
    const ir_tensor *x = e->in[0];
    const ir_tensor *win = ir_eval_has(e, 2) ? e->in[2] : NULL;
    if (!ir_dtype_is_float(x->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "the signal must be a float tensor, not %s",
                            kiln_dtype_name(x->dtype));
    if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the signal must be [batch, length, 1 or 2]; its rank is %d", x->rank);
    if (win && (win->rank != 1 || win->dtype != x->dtype))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the window must be 1-D of the signal's dtype, not %s of rank %d",
                            kiln_dtype_name(win->dtype), win->rank);
    bool onesided = ir_eval_attr_int(e, "onesided", 1) != 0;
    int64_t step, len = x->dims[1];
    KILN_TRY(scalar_int(e, 1, "frame_step", &step));
    if (step <= 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "frame_step %lld must be positive", (long long)step);
    /* Without frame_length the window's length is the frame's; without
     * either, the whole signal is one frame. */
    int64_t fl = win ? win->dims[0] : len;
    if (ir_eval_has(e, 3)) {
        KILN_TRY(scalar_int(e, 3, "frame_length", &fl));
        if (win && win->dims[0] != fl)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "the window has %lld elements but frame_length is %lld",
                                (long long)win->dims[0], (long long)fl);
    }
    if (fl <= 0 || fl > len)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "frame_length %lld must be in [1, %lld] (the signal length)",
                            (long long)fl, (long long)len);
    int64_t frames = (len - fl) / step + 1, bins = onesided ? fl / 2 + 1 : fl;
    int64_t dims[4] = {x->dims[0], frames, bins, 2};
    KILN_TRY(ir_eval_out(e, 0, x->dtype, 4, dims));
    if (e->infer) return KILN_OK;

    int64_t ch = x->dims[2];
    double *c, *s;
    KILN_TRY(twiddles(e, fl, -1.0, &c, &s));
    double *sig = base_malloc((size_t)fl * 2 * sizeof(double));
    double *res = base_malloc((size_t)bins * 2 * sizeof(double));
    if (!sig || !res) {
        base_free(c), base_free(s), base_free(sig), base_free(res);
        return oom(e);
    }
    ir_tensor *y = &e->out[0];
    for (int64_t b = 0; b < x->dims[0]; b++)
        for (int64_t f = 0; f < frames; f++) {
            for (int64_t j = 0; j < fl; j++) {
                int64_t p = (b * len + f * step + j) * ch;
                double w = win ? ir_get_f64(win, j) : 1.0;
                sig[2 * j] = w * ir_get_f64(x, p);
                sig[2 * j + 1] = ch == 2 ? w * ir_get_f64(x, p + 1) : 0;
            }
            dft_1d(sig, fl, bins, c, s, 1.0, res);
            for (int64_t k = 0; k < bins; k++) {
                int64_t q = ((b * frames + f) * bins + k) * 2;
                ir_set_f64(y, q, res[2 * k]);
                ir_set_f64(y, q + 1, res[2 * k + 1]);
            }
        }
    base_free(c), base_free(s), base_free(sig), base_free(res);
    return KILN_OK;
}

/* ---- HannWindow, HammingWindow, BlackmanWindow -------------------------------- */

kiln_status ir_eval_window(ir_eval *e)
{
    int64_t size;
    KILN_TRY(scalar_int(e, 0, "size", &size));
    if (size < 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "window size %lld is negative", (long long)size);
    kiln_dtype dt;
    KILN_TRY(output_dtype(e, &dt));
    bool periodic = ir_eval_attr_int(e, "periodic", 1) != 0;
    KILN_TRY(ir_eval_out(e, 0, dt, 1, &size));
    if (e->infer) return KILN_OK;

    /* A periodic window is the symmetric one of size + 1, cut short. A
     * symmetric window of one element would divide by zero; it is 1. */
    double N = (double)(periodic ? size : size - 1);
    kiln_op op = e->node->op;
    for (int64_t i = 0; i < size; i++) {
        double t = N > 0 ? 2.0 * M_PI * (double)i / N : 0, w;
        if (op == KILN_OP_HANN_WINDOW) w = 0.5 - 0.5 * cos(t);
        else if (op == KILN_OP_HAMMING_WINDOW) w = 25.0 / 46.0 - 21.0 / 46.0 * cos(t);
        else w = 0.42 - 0.5 * cos(t) + 0.08 * cos(2.0 * t);
        if (N <= 0) w = 1.0;
        ir_set_f64(&e->out[0], i, w);
    }
    return KILN_OK;
}

/* ---- MelWeightMatrix ------------------------------------------------------------ */

kiln_status ir_eval_mel_weight_matrix(ir_eval *e)
{
    int64_t n_mel, dft_len, rate;
    KILN_TRY(scalar_int(e, 0, "num_mel_bins", &n_mel));
    KILN_TRY(scalar_int(e, 1, "dft_length", &dft_len));
    if (n_mel < 0 || dft_len <= 0)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "num_mel_bins %lld and dft_length %lld must be positive",
                            (long long)n_mel, (long long)dft_len);
    if (!ir_eval_has(e, 2)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "sample_rate (input 2) is missing");
    double lo, hi;
    KILN_TRY(scalar_float(e, 3, "lower_edge_hertz", &lo));
    KILN_TRY(scalar_float(e, 4, "upper_edge_hertz", &hi));
    kiln_dtype dt;
    KILN_TRY(output_dtype(e, &dt));
    int64_t n_spec = dft_len / 2 + 1;
    int64_t dims[2] = {n_spec, n_mel};
    KILN_TRY(ir_eval_out(e, 0, dt, 2, dims));
    if (e->infer) return KILN_OK;
    KILN_TRY(scalar_int(e, 2, "sample_rate", &rate));
    if (rate <= 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "sample_rate %lld must be positive", (long long)rate);

    /* num_mel_bins + 2 points evenly spaced on the mel scale from the lower
     * to the upper edge (the step divides by the point count, as ONNX's
     * reference does), mapped to DFT bins; bin i is the triangle rising from
     * point i to point i+1 and falling to point i+2. */
    int64_t n_pts = n_mel + 2;
    int64_t *bin = base_malloc((size_t)n_pts * sizeof *bin);
    double *w = base_calloc((size_t)(n_spec * (n_mel ? n_mel : 1)), sizeof *w);
    if (!bin || !w) {
        base_free(bin), base_free(w);
        return oom(e);
    }
    double mel_lo = 2595.0 * log10(1.0 + lo / 700.0), mel_hi = 2595.0 * log10(1.0 + hi / 700.0);
    double step = (mel_hi - mel_lo) / (double)n_pts;
    for (int64_t i = 0; i < n_pts; i++) {
        double hz = 700.0 * (pow(10.0, (mel_lo + step * (double)i) / 2595.0) - 1.0);
        double b = floor((double)(dft_len + 1) * hz / (double)rate);
        if (!(b >= 0 && b < (double)n_spec)) {
            base_free(bin), base_free(w);
            return ir_eval_fail(e, KILN_ERR_SHAPE,
                                "edges [%g, %g] Hz fall outside the %lld DFT bins of sample rate %lld", lo, hi,
                                (long long)n_spec, (long long)rate);
        }
        bin[i] = (int64_t)b;
    }
    for (int64_t m = 0; m < n_mel; m++) {
        int64_t left = bin[m], center = bin[m + 1], right = bin[m + 2];
        if (center == left) w[center * n_mel + m] = 1;
        else
            for (int64_t j = left; j <= center; j++) w[j * n_mel + m] = (double)(j - left) / (double)(center - left);
        for (int64_t j = center; j < right; j++) w[j * n_mel + m] = (double)(right - j) / (double)(right - center);
    }
    ir_from_f64(&e->out[0], w);
    base_free(bin), base_free(w);
    return KILN_OK;
}
