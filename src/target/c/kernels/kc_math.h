/*
 * kc_math.h: branch-free float approximations for the `c` target's kernels
 * and for the elementwise code the target generates.
 *
 * Every function is static inline and free of data-dependent branches and
 * table lookups: a loop `for (i...) y[i] = kc_tanhf(x[i]);` compiled with
 * -O3 becomes straight SIMD code (bit tricks go through memcpy, selects
 * become blends). Special values: NaN propagates; kc_expf saturates to 0
 * below -87.33 and to +inf above 88.72; kc_logf gives -inf at 0, NaN below.
 *
 * Measured error against double-precision libm over dense sweeps (~4e-6
 * relative steps, tens of millions of points; 1 ulp = ulp of the result),
 * with FMA (the -mno-fma build differs by < 0.1 ulp except GELU's tail):
 *   kc_expf     [-87, 88]               1.0 ulp
 *   kc_logf     [1e-37, 3e38]           0.8 ulp (denormal inputs handled)
 *   kc_tanhf    [-10, 10]               1.3 ulp
 *   kc_erff     [-6, 6]                 2.5 ulp
 *   kc_sigmoidf [-87, 87]               2.5 ulp
 *   kc_geluf    [0, 10]                 2.2 ulp; [-3, 0): 1.2e-6 relative;
 *               [-5.5, -3): 4e-6 relative (log-erfc tail); below -5.56 it
 *               returns 0, absolute error < 8e-8
 *   kc_act_apply, every activation on [-30, 30]: within 2e-6 relative, or
 *               1e-7 absolute near zeros (HardSwish's clip, GELU's tail).
 * tests/kernels/test_kc.c re-measures and prints these on every run.
 */
#ifndef KILN_KC_MATH_H
#define KILN_KC_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kc.h"

static inline uint32_t kc_f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float kc_u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* a * b + c, fused where the hardware fuses; elsewhere fmaf would be a slow
 * libm emulation, and the approximations below do not need the fusion. */
static inline float kc_fmaf(float a, float b, float c)
{
#if defined(__FMA__) || defined(__AVX512F__)
    return fmaf(a, b, c);
#else
    return a * b + c;
#endif
}

/* c ? a : b by bit masks. gcc (12) will not if-convert a float `?:` while
 * -ftrapping-math is on (the default), which keeps such loops scalar; an
 * integer mask from the comparison vectorizes. */
static inline float kc_sel(int c, float a, float b)
{
    uint32_t m = 0u - (uint32_t)c;
    return kc_u2f((kc_f2u(a) & m) | (kc_f2u(b) & ~m));
}

/* min(max(x, lo), hi); NaN stays NaN, as in the reference interpreter. */
static inline float kc_clampf(float x, float lo, float hi)
{
    x = kc_sel(x < lo, lo, x);
    return kc_sel(x > hi, hi, x);
}

/* e^x: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial (Cephes'
 * coefficients), 2^n built in the exponent field. The rounding constant
 * 1.5 * 2^23 leaves n in the low mantissa bits of t, so no float-to-int
 * conversion (undefined for NaN) is needed. */
static inline float kc_expf(float x)
{
    const float hi = 88.7228394f, lo = -87.33f; /* hi = log(FLT_MAX) */
    float xc = kc_sel(x > hi, hi, x);
    xc = kc_sel(xc < lo, lo, xc);
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    float t = kc_fmaf(xc, 1.44269504088896341f, magic);
    float n = t - magic;
    float r = kc_fmaf(n, -0.693359375f, xc); /* ln2 split: hi part exact in n * hi */
    r = kc_fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = kc_fmaf(p, r, 1.3981999507e-3f);
    p = kc_fmaf(p, r, 8.3334519073e-3f);
    p = kc_fmaf(p, r, 4.1665795894e-2f);
    p = kc_fmaf(p, r, 1.6666665459e-1f);
    p = kc_fmaf(p, r, 5.0000001201e-1f);
    p = kc_fmaf(p, r * r, r) + 1.0f;
    /* 2^n in the exponent field; n reaches 128 near hi, which the field
     * cannot hold, so positive n scale by 2^(n-1) and then by 2 */
    float s_lo = kc_u2f((kc_f2u(t) + 127u) << 23), s_hi = kc_u2f((kc_f2u(t) + 126u) << 23);
    float y = kc_sel(n > 0.0f, (p * 2.0f) * s_hi, p * s_lo);
    y = kc_sel(x < lo, 0.0f, y);
    y = kc_sel(x > hi, INFINITY, y);
    return kc_sel(x == x, y, x); /* NaN in, NaN out */
}

/* log(x): x = 2^e m, m in [sqrt(1/2), sqrt 2), log(m) by Cephes' degree-9
 * polynomial in f = m - 1; denormals are scaled by 2^23 first. */
static inline float kc_logf(float x)
{
    int denorm = x < 1.17549435e-38f;
    float xs = kc_sel(denorm, x * 8388608.0f, x);
    uint32_t u = kc_f2u(xs);
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 126 - (23 & -denorm);
    float m = kc_u2f((u & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
    int small = m < 0.707106781186547524f;
    e -= small;
    float f = kc_sel(small, m + m, m) - 1.0f;
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = kc_fmaf(p, f, -1.1514610310e-1f);
    p = kc_fmaf(p, f, 1.1676998740e-1f);
    p = kc_fmaf(p, f, -1.2420140846e-1f);
    p = kc_fmaf(p, f, 1.4249322787e-1f);
    p = kc_fmaf(p, f, -1.6668057665e-1f);
    p = kc_fmaf(p, f, 2.0000714765e-1f);
    p = kc_fmaf(p, f, -2.4999993993e-1f);
    p = kc_fmaf(p, f, 3.3333331174e-1f);
    float fe = (float)e;
    float y = p * f * z;
    y = kc_fmaf(fe, -2.12194440e-4f, y);
    y = kc_fmaf(-0.5f, z, y);
    y = f + y;
    y = kc_fmaf(fe, 0.693359375f, y);
    y = kc_sel(x == INFINITY, INFINITY, y);
    y = kc_sel(x == 0.0f, -INFINITY, y);
    y = kc_sel(x < 0.0f, NAN, y);
    y = kc_sel(x != x, x, y);
    return y;
}

/* tanh: odd polynomial for |x| < 0.625 (no cancellation near 0), else
 * 1 - 2 / (e^2|x| + 1), which saturates to 1 through kc_expf's +inf. */
static inline float kc_tanhf(float x)
{
    float a = fabsf(x);
    float z = x * x;
    float p = -5.704982868e-03f;
    p = kc_fmaf(p, z, 2.063908417e-02f);
    p = kc_fmaf(p, z, -5.373971438e-02f);
    p = kc_fmaf(p, z, 1.333144219e-01f);
    p = kc_fmaf(p, z, -3.333328194e-01f);
    float small = kc_fmaf(p * z, x, x);
    float big = 1.0f - 2.0f / (kc_expf(a + a) + 1.0f);
    big = copysignf(big, x);
    return kc_sel(a < 0.625f, small, big);
}

/* erfc(t) for t in [0.921875, 3.93] as exp(q(t - 1)), q a degree-8 fit of
 * log erfc (max abs error 9e-9 before rounding; centred at 1 so that Horner
 * does not cancel at the low end, where erf needs it most). */
static inline float kc_erfc_tail(float t)
{
    float u = t - 1.0f;
    float q = 1.628782395e-06f;
    q = kc_fmaf(q, u, -3.282768735e-05f);
    q = kc_fmaf(q, u, 3.194217549e-04f);
    q = kc_fmaf(q, u, -2.051762173e-03f);
    q = kc_fmaf(q, u, 1.007351422e-02f);
    q = kc_fmaf(q, u, -4.157182201e-02f);
    q = kc_fmaf(q, u, -8.431065046e-01f);
    q = kc_fmaf(q, u, -2.638967392e+00f);
    q = kc_fmaf(q, u, -1.849605516e+00f);
    return kc_expf(q);
}

/* erf(x)/x as a degree-5 polynomial in x^2 for |x| < 0.921875. */
static inline float kc_erf_small(float x)
{
    float s = x * x;
    float p = -5.990920931e-04f;
    p = kc_fmaf(p, s, 4.993196231e-03f);
    p = kc_fmaf(p, s, -2.676663008e-02f);
    p = kc_fmaf(p, s, 1.128181669e-01f);
    p = kc_fmaf(p, s, -3.761249377e-01f);
    p = kc_fmaf(p, s, 1.128379150e+00f);
    return p * x;
}

static inline float kc_erff(float x)
{
    float t = fabsf(x);
    float tc = kc_clampf(t, 0.921875f, 3.93f); /* erf rounds to 1 beyond */
    float big = copysignf(1.0f - kc_erfc_tail(tc), x);
    float y = kc_sel(t < 0.921875f, kc_erf_small(x), big);
    return kc_sel(x == x, y, x); /* NaN in, NaN out */
}

static inline float kc_sigmoidf(float x)
{
    return 1.0f / (1.0f + kc_expf(-x));
}

/* x * Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2 taken from the erfc tail on
 * the negative side, so the result keeps its relative accuracy where
 * 1 + erf(x / sqrt 2) would cancel. Phi is 0 below x = -5.56 (|gelu| < 8e-8 there). */
static inline float kc_geluf(float x)
{
    float xs = x * 0.707106781186547524f;
    float t = fabsf(xs);
    float q = kc_erfc_tail(kc_clampf(t, 0.921875f, 3.93f));
    q = kc_sel(t > 3.93f, 0.0f, q);
    float phi_big = kc_sel(x > 0.0f, 1.0f - 0.5f * q, 0.5f * q);
    float phi_small = kc_fmaf(0.5f, kc_erf_small(xs), 0.5f);
    return x * kc_sel(t < 0.921875f, phi_small, phi_big);
}

/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|); log1p(u) = log(w) u / (w - 1)
 * with w = 1 + u corrects the rounding of w (Goldberg's trick). */
static inline float kc_softplusf(float x)
{
    float u = kc_expf(-fabsf(x));
    float w = 1.0f + u;
    float d = w - 1.0f;
    float l = kc_sel(d == 0.0f, u, kc_logf(w) * (u / d));
    return kc_sel(x > 0.0f, x, 0.0f) + l;
}

/* One activation, chosen at run time. In a loop over many elements prefer
 * kc_act_inplace, which hoists the choice out of the loop. */
static inline float kc_act_apply(int act, float x, float alpha, float beta)
{
    switch (act) {
    case KC_ACT_RELU: return kc_sel(x < 0.0f, 0.0f, x); /* NaN stays NaN */
    case KC_ACT_CLIP: return kc_clampf(x, alpha, beta);
    case KC_ACT_LEAKY_RELU: return kc_sel(x < 0.0f, alpha * x, x);
    case KC_ACT_SIGMOID: return kc_sigmoidf(x);
    case KC_ACT_TANH: return kc_tanhf(x);
    case KC_ACT_GELU: return kc_geluf(x);
    case KC_ACT_GELU_TANH: {
        /* 0.5 x (1 + tanh z) = x sigmoid(2z): no cancellation for x < 0. */
        float z = 0.7978845608028654f * kc_fmaf(0.044715f * x, x * x, x);
        return x / (1.0f + kc_expf(-2.0f * z));
    }
    case KC_ACT_SILU: return x / (1.0f + kc_expf(-x));
    case KC_ACT_HARD_SWISH: return x * kc_clampf(kc_fmaf(x, 1.0f / 6.0f, 0.5f), 0.0f, 1.0f);
    case KC_ACT_HARD_SIGMOID: return kc_clampf(kc_fmaf(alpha, x, beta), 0.0f, 1.0f);
    case KC_ACT_SOFTPLUS: return kc_softplusf(x);
    default: return x;
    }
}

/* x[i] = act(x[i]) for i < n, the switch outside the loops so that each
 * loop vectorizes. */
static inline void kc_act_inplace(int act, float *x, int64_t n, float alpha, float beta)
{
    int64_t i;
    switch (act) {
    case KC_ACT_NONE: break;
    case KC_ACT_RELU: for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_RELU, x[i], alpha, beta); break;
    case KC_ACT_CLIP: for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_CLIP, x[i], alpha, beta); break;
    case KC_ACT_LEAKY_RELU:
        for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_LEAKY_RELU, x[i], alpha, beta);
        break;
    case KC_ACT_SIGMOID: for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_SIGMOID, x[i], alpha, beta); break;
    case KC_ACT_TANH: for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_TANH, x[i], alpha, beta); break;
    case KC_ACT_GELU: for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_GELU, x[i], alpha, beta); break;
    case KC_ACT_GELU_TANH:
        for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_GELU_TANH, x[i], alpha, beta);
        break;
    case KC_ACT_SILU: for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_SILU, x[i], alpha, beta); break;
    case KC_ACT_HARD_SWISH:
        for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_HARD_SWISH, x[i], alpha, beta);
        break;
    case KC_ACT_HARD_SIGMOID:
        for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_HARD_SIGMOID, x[i], alpha, beta);
        break;
    case KC_ACT_SOFTPLUS: for (i = 0; i < n; i++) x[i] = kc_act_apply(KC_ACT_SOFTPLUS, x[i], alpha, beta); break;
    default: break;
    }
}

#endif
