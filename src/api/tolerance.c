/*
 * tolerance.c: per-dtype tolerances and tensor comparison (tolerance.h).
 */
#include "api/tolerance.h"

#include <math.h>
#include <string.h>

api_tolerance api_tolerance_for(kiln_dtype t)
{
    switch (t) {
    case KILN_F64: return (api_tolerance){.rtol = 1e-6, .atol = 1e-9};
    case KILN_F32: return (api_tolerance){.rtol = 1e-3, .atol = 1e-4};
    case KILN_F16: return (api_tolerance){.rtol = 1e-2, .atol = 1e-3};
    case KILN_BF16: return (api_tolerance){.rtol = 5e-2, .atol = 1e-2};
    default: return (api_tolerance){.rtol = 0, .atol = 0};
    }
}

api_tolerance api_tolerance_for_precision(kiln_dtype t, const char *precision)
{
    api_tolerance tol = api_tolerance_for(t);
    if (!ir_dtype_is_float(t) || !precision) return tol;
    kiln_dtype storage = strcmp(precision, "fp16") == 0 ? KILN_F16 : strcmp(precision, "bf16") == 0 ? KILN_BF16 : t;
    if (storage == t) return tol;
    api_tolerance s = api_tolerance_for(storage);
    if (s.rtol > tol.rtol) tol.rtol = s.rtol;
    if (s.atol > tol.atol) tol.atol = s.atol;
    tol.scale = s.rtol;
    return tol;
}

api_compare api_compare_tensors(const ir_tensor *got, const ir_tensor *want, api_tolerance tol)
{
    api_compare c = {.first_bad = -1};
    c.shape_ok = got->dtype == want->dtype && ir_same_shape(got, want);
    if (!c.shape_ok) return c;
    int64_t n = ir_numel(want);
    bool is_float = ir_dtype_is_float(want->dtype);
    double by_scale = 0; /* tol.scale * rms of want's finite elements */
    if (is_float && tol.scale > 0) {
        double sq = 0;
        int64_t finite = 0;
        for (int64_t i = 0; i < n; i++) {
            double w = ir_get_f64(want, i);
            if (isfinite(w)) sq += w * w, finite++;
        }
        by_scale = finite ? tol.scale * sqrt(sq / (double)finite) : 0;
    }
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (is_float) {
            double g = ir_get_f64(got, i), w = ir_get_f64(want, i);
            if (isnan(w) || isnan(g)) ok = isnan(w) && isnan(g);
            else if (isinf(w)) ok = g == w;
            else {
                double err = fabs(g - w);
                if (err > c.max_abs) c.max_abs = err;
                /* relative error where it means something: |want| above atol */
                if (fabs(w) > tol.atol && err / fabs(w) > c.max_rel) c.max_rel = err / fabs(w);
                ok = err <= tol.atol + tol.rtol * fabs(w) || err <= by_scale;
            }
        } else {
            ok = ir_get_i64(got, i) == ir_get_i64(want, i);
            if (!ok) c.max_abs = fmax(c.max_abs, fabs((double)ir_get_i64(got, i) - (double)ir_get_i64(want, i)));
        }
        if (!ok && c.n_bad++ == 0) c.first_bad = i;
    }
    return c;
}
