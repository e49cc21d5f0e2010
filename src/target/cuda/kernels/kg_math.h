/*
 * kg_math.h: device helpers for the fused elementwise code the cuda target
 * generates (emit_ews.c; the expressions come from target/ews_expr.c, the
 * c target's builder, which names these kg_* helpers where the c target
 * names its kx_* prelude and kc_math.h). Included after kg.h.
 *
 *   - semantics of the reference interpreter (ir/interp_elementwise.c):
 *     integer division and modulo by zero give 0, INT_MIN / -1 wraps,
 *     Mod takes the divisor's sign unless fmod, integer Pow wraps,
 *     float-to-integer conversion truncates and saturates with NaN -> 0;
 *   - float32 activations. CUDA's own expf, logf, tanhf, erff, erfcf and
 *     expm1f are within 2 to 4 ulp; each activation is written so that it
 *     does not cancel (GELU as x * erfc(-x / sqrt 2) / 2, the tanh GELU as
 *     x * sigmoid(2z)), so the results stay within a few ulp of the
 *     interpreter's double precision everywhere;
 *   - the same activations in double, for float64 tensors;
 *   - rounding a float to float16 / bfloat16 (the value a node of that
 *     dtype holds: 16-bit tensors are computed in float);
 *   - vector loads and stores: kg_ldv_<dtype>(p, n, x) reads the n
 *     elements at p (2, 4, 8 or 16 bytes, aligned) into x[0 .. n) in the
 *     compute type (float for the float types, the integer type
 *     otherwise), kg_stv_<dtype>(p, n, x) writes them back. Called with a
 *     constant n on arrays indexed by constants of a fully unrolled loop,
 *     the arrays stay in registers; kg_ldv_stream_<dtype> and
 *     kg_ldv_keep_<dtype> are the same loads with kg.h's cache hints.
 */
#ifndef KILN_KG_MATH_H
#define KILN_KG_MATH_H

#define KG_INF __int_as_float(0x7f800000)
#define KG_NAN __int_as_float(0x7fc00000)

/* ---- integer semantics -------------------------------------------------------- */

static __device__ __forceinline__ kg_i64 kg_idiv(kg_i64 x, kg_i64 y)
{
    if (y == 0) return 0;
    if (y == -1) return (kg_i64)(0ull - (kg_u64)x); /* INT64_MIN / -1 wraps */
    return x / y;
}

static __device__ __forceinline__ kg_u64 kg_udiv(kg_u64 x, kg_u64 y) { return y == 0 ? 0 : x / y; }

/* Mod with fmod=0: the sign of the divisor, as Python's %. */
static __device__ __forceinline__ kg_i64 kg_imod(kg_i64 x, kg_i64 y)
{
    if (y == 0 || y == -1) return 0;
    kg_i64 r = x % y;
    if (r != 0 && (r < 0) != (y < 0)) r += y;
    return r;
}

static __device__ __forceinline__ kg_i64 kg_ifmod(kg_i64 x, kg_i64 y) { return y == 0 || y == -1 ? 0 : x % y; }

static __device__ __forceinline__ kg_u64 kg_umod(kg_u64 x, kg_u64 y) { return y == 0 ? 0 : x % y; }

/* base ** e with wrapping products; a negative exponent truncates the
 * reciprocal, so only bases 1 and -1 give non-zero. */
static __device__ __forceinline__ kg_i64 kg_ipow(kg_i64 base, kg_i64 e, int exp_uns)
{
    if (!exp_uns && e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
    kg_u64 r = 1, m = (kg_u64)base, k = (kg_u64)e;
    for (; k; k >>= 1) {
        if (k & 1) r *= m;
        m *= m;
    }
    return (kg_i64)r;
}

/* Float to integer: truncation, saturating at the int64 range, NaN -> 0;
 * narrower types then wrap. */
static __device__ __forceinline__ kg_i64 kg_f2i(double v)
{
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18) return (kg_i64)0x7fffffffffffffffull;
    if (v <= -9.2233720368547758e18) return (kg_i64)0x8000000000000000ull;
    return (kg_i64)v;
}

/* To uint64: as kg_f2i below 2^63, exact from 2^63, saturated from 2^64
 * (+inf too): the interpreter's rule (ir/tensor.c f64_to_u64). */
static __device__ __forceinline__ kg_u64 kg_f2u64(double v)
{
    if (v >= 18446744073709551616.0) return 0xffffffffffffffffull;
    if (v >= 9.2233720368547758e18) return (kg_u64)kg_f2i(v - 9.2233720368547758e18) + 0x8000000000000000ull;
    return (kg_u64)kg_f2i(v);
}

/* QuantizeLinear: round half to even, NaN -> 0, plus the zero point, saturated. */
static __device__ __forceinline__ kg_i64 kg_quantize(double v, double zp, double lo, double hi)
{
    double q = rint(v);
    if (q != q) q = 0;
    q += zp;
    return (kg_i64)(q < lo ? lo : q > hi ? hi : q);
}

/* ---- float32 activations ----------------------------------------------------- */

/* The names the shared expression builder gives the c target's fast
 * functions (kc_expf...): here CUDA's accurate ones. */
static __device__ __forceinline__ float kg_expf(float x) { return expf(x); }
static __device__ __forceinline__ float kg_logf(float x) { return logf(x); }
static __device__ __forceinline__ float kg_tanhf(float x) { return tanhf(x); }
static __device__ __forceinline__ float kg_erff(float x) { return erff(x); }

/* Clamps to [0, 1]; NaN stays NaN, as numpy's clip keeps it. */
static __device__ __forceinline__ float kg_clamp01f(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/* 1 / (1 + e^-x): e^-x overflows to inf for x < -88, giving 0. */
static __device__ __forceinline__ float kg_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/*
 * x * Phi(x) from q = erfc(z) / 2, z = |x| / sqrt 2 (so that neither tail
 * cancels): x (1 - q) for x >= 0, x q below. q = t e^(P(t) - z^2) with
 * t = 1 / (1 + z / 2) and P a degree-9 polynomial in t (the ln 2 of the
 * halving folded into its constant), fitted here to ln(erfc(z) e^(z^2) / t)
 * over all z >= 0 by reweighted least squares. In float32 with the
 * approximate reciprocal and exponential: within 2e-6 relative for
 * |x| <= 5 and 1e-5 beyond, where the value is below 1e-6 (double
 * precision against; tests/gpu/runtime.c checks 4M points). About 18
 * instructions, against about 45 for CUDA's erfcf, which a fused GEMM
 * epilogue runs for every element. KG_GELU_ERFC selects erfcf (for
 * comparison). inf gives inf, -inf NaN (as the interpreter's erf form).
 */
static __device__ __forceinline__ float kg_geluf(float x)
{
#if defined(KG_GELU_ERFC)
    return 0.5f * x * erfcf(-0.70710678118654752f * x);
#else
    const float z = fabsf(x) * 0.70710678118654752f;
    float t; /* in (0, 1]: 0 for z = inf */
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.5f, z, 1.0f)));
    float p = 1.688254476e-01f;
    p = fmaf(p, t, -8.136198521e-01f);
    p = fmaf(p, t, 1.473818898e+00f);
    p = fmaf(p, t, -1.121687531e+00f);
    p = fmaf(p, t, 2.717140317e-01f);
    p = fmaf(p, t, -1.841006428e-01f);
    p = fmaf(p, t, 9.641728550e-02f);
    p = fmaf(p, t, 3.741216362e-01f);
    p = fmaf(p, t, 1.000022888e+00f);
    p = fmaf(p, t, -1.958659410e+00f);
    const float q = t * __expf(fmaf(-z, z, p));
    return x * (x >= 0.0f ? 1.0f - q : q);
#endif
}

/* 0.5 x (1 + tanh z) = x sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3). */
static __device__ __forceinline__ float kg_gelu_tanhf(float x)
{
    float z = 0.79788456080286536f * fmaf(0.044715f * x, x * x, x);
    return x / (1.0f + expf(-2.0f * z));
}

/* log(1 + e^x) without overflow. */
static __device__ __forceinline__ float kg_softplusf(float x)
{
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

static __device__ __forceinline__ float kg_mishf(float x) { return x * tanhf(kg_softplusf(x)); }

static __device__ __forceinline__ float kg_celuf(float x, float alpha)
{
    if (x != x) return x;
    float neg = alpha * expm1f(x / alpha);
    return (x > 0.0f ? x : 0.0f) + (neg < 0.0f ? neg : 0.0f);
}

/* ---- float64 activations ----------------------------------------------------- */

static __device__ __forceinline__ double kg_clamp01(double v) { return v < 0 ? 0.0 : v > 1 ? 1.0 : v; }

static __device__ __forceinline__ double kg_softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static __device__ __forceinline__ double kg_sigmoid(double x)
{
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double z = exp(x);
    return z / (1.0 + z);
}

static __device__ __forceinline__ double kg_celu(double x, double alpha)
{
    if (x != x) return x;
    double neg = alpha * expm1(x / alpha);
    return (x > 0 ? x : 0.0) + (neg < 0 ? neg : 0.0);
}

static __device__ __forceinline__ double kg_gelu(double x) { return 0.5 * x * erfc(-0.70710678118654752440 * x); }

static __device__ __forceinline__ double kg_gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* ---- 16-bit floats: the value a float16 / bfloat16 node holds ------------------------- */

static __device__ __forceinline__ float kg_rnd_f16(float x) { return __half2float(__float2half_rn(x)); }
static __device__ __forceinline__ float kg_rnd_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
/* from double, rounded once */
static __device__ __forceinline__ float kg_rnd_f16d(double x) { return __half2float(__double2half(x)); }
static __device__ __forceinline__ float kg_rnd_bf16d(double x) { return __bfloat162float(__double2bfloat16(x)); }

/* ---- vector loads and stores -------------------------------------------------------- */

/* `bytes` (2, 4, 8 or 16; a constant once inlined) at p, aligned to their
 * size, as 32-bit words w[0 ..) (the 2-byte case in the low half of w[0]). */
static __device__ __forceinline__ void kg_ldw(const void *p, int bytes, unsigned *w)
{
    if (bytes == 16) {
        uint4 v = *(const uint4 *)p;
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if (bytes == 8) {
        uint2 v = *(const uint2 *)p;
        w[0] = v.x, w[1] = v.y;
    } else if (bytes == 4) {
        w[0] = *(const unsigned *)p;
    } else {
        w[0] = *(const unsigned short *)p;
    }
}

static __device__ __forceinline__ void kg_stw(void *p, int bytes, const unsigned *w)
{
    if (bytes == 16) *(uint4 *)p = make_uint4(w[0], w[1], w[2], w[3]);
    else if (bytes == 8) *(uint2 *)p = make_uint2(w[0], w[1]);
    else if (bytes == 4) *(unsigned *)p = w[0];
    else *(unsigned short *)p = (unsigned short)w[0];
}

/* kg_ldv_<dtype>(p, n, x): the n elements at p (n * element size is 2, 4,
 * 8 or 16 bytes, p aligned to it) into x[0 .. n) in the compute type;
 * kg_stv_<dtype>(p, n, x) stores them. Elements of 1 and 2 bytes are
 * packed low first, 8-byte ones take two words. kg_ldv_stream_<dtype> and
 * kg_ldv_keep_<dtype> load with kg.h's cache hints (also one element of 1
 * byte). */
/* kg_ldv<hint>_<sfx>: the n elements through kg_ldw<hint> (KG_VEC) */
#define KG_LDV(name, ldw, T, CT, size, get)                                                      \
    static __device__ __forceinline__ void name(const T *p, int n, CT *x)                        \
    {                                                                                            \
        unsigned w[4];                                                                           \
        ldw(p, n * (size), w);                                                                   \
        _Pragma("unroll") for (int i = 0; i < n; i++) x[i] = get;                                \
    }
#define KG_VEC(sfx, T, CT, size, get, put)                                                       \
    KG_LDV(kg_ldv_##sfx, kg_ldw, T, CT, size, get)                                               \
    KG_LDV(kg_ldv_stream_##sfx, kg_ldw_stream, T, CT, size, get)                                 \
    KG_LDV(kg_ldv_keep_##sfx, kg_ldw_keep, T, CT, size, get)                                     \
    static __device__ __forceinline__ void kg_stv_##sfx(T *p, int n, const CT *x)                \
    {                                                                                            \
        unsigned w[4] = {0u, 0u, 0u, 0u};                                                        \
        _Pragma("unroll") for (int i = 0; i < n; i++) put;                                       \
        kg_stw(p, n * (size), w);                                                                \
    }
/* the i-th field of `bits` bits, and storing v there */
#define KG_FIELD(bits) ((w[i * (bits) / 32] >> (i * (bits) % 32)) & (0xffffffffu >> (32 - (bits))))
#define KG_PUT(bits, v) (w[i * (bits) / 32] |= ((unsigned)(v) & (0xffffffffu >> (32 - (bits)))) << (i * (bits) % 32))
#define KG_U64(i) ((kg_u64)w[2 * (i)] | ((kg_u64)w[2 * (i) + 1] << 32))

KG_VEC(f32, float, float, 4, __uint_as_float(w[i]), w[i] = __float_as_uint(x[i]))
KG_VEC(f16, __half, float, 2, __half2float(__ushort_as_half((unsigned short)KG_FIELD(16))),
       KG_PUT(16, __half_as_ushort(__float2half_rn(x[i]))))
/* bfloat16 is the high half of a float32: widening is a shift */
KG_VEC(bf16, __nv_bfloat16, float, 2, __uint_as_float(KG_FIELD(16) << 16),
       KG_PUT(16, __bfloat16_as_ushort(__float2bfloat16_rn(x[i]))))
KG_VEC(f64, double, double, 8, __longlong_as_double((kg_i64)KG_U64(i)),
       (w[2 * i] = (unsigned)__double_as_longlong(x[i]), w[2 * i + 1] = (unsigned)((kg_u64)__double_as_longlong(x[i]) >> 32)))
KG_VEC(i64, kg_i64, kg_i64, 8, (kg_i64)KG_U64(i), (w[2 * i] = (unsigned)x[i], w[2 * i + 1] = (unsigned)((kg_u64)x[i] >> 32)))
KG_VEC(u64, kg_u64, kg_u64, 8, KG_U64(i), (w[2 * i] = (unsigned)x[i], w[2 * i + 1] = (unsigned)(x[i] >> 32)))
KG_VEC(i32, kg_i32, kg_i32, 4, (kg_i32)w[i], w[i] = (unsigned)x[i])
KG_VEC(u32, kg_u32, kg_u32, 4, w[i], w[i] = x[i])
KG_VEC(i16, kg_i16, kg_i16, 2, (kg_i16)KG_FIELD(16), KG_PUT(16, x[i]))
KG_VEC(u16, kg_u16, kg_u16, 2, (kg_u16)KG_FIELD(16), KG_PUT(16, x[i]))
KG_VEC(i8, kg_i8, kg_i8, 1, (kg_i8)KG_FIELD(8), KG_PUT(8, x[i]))
KG_VEC(u8, kg_u8, kg_u8, 1, (kg_u8)KG_FIELD(8), KG_PUT(8, x[i]))
#undef KG_VEC
#undef KG_FIELD
#undef KG_PUT
#undef KG_U64

/* ---- fused epilogue activations (GEMM, conv), numbered as pass_act ------------ */

#define KG_ACT_NONE 0
#define KG_ACT_RELU 1
#define KG_ACT_CLIP 2          /* min(max(x, p0), p1), NaN kept */
#define KG_ACT_LEAKY_RELU 3    /* x < 0 ? p0 x : x */
#define KG_ACT_SIGMOID 4
#define KG_ACT_TANH 5
#define KG_ACT_GELU 6          /* x Phi(x) */
#define KG_ACT_GELU_TANH 7     /* the tanh approximation */
#define KG_ACT_SILU 8          /* x sigmoid(x) */
#define KG_ACT_HARD_SWISH 9    /* x clip(x/6 + 1/2, 0, 1) */
#define KG_ACT_HARD_SIGMOID 10 /* clip(p0 x + p1, 0, 1) */
#define KG_ACT_SOFTPLUS 11     /* log(1 + exp(x)) */

/* act is a compile-time constant after inlining, so the switch folds away. */
static __device__ __forceinline__ float kg_actf(float x, int act, float p0, float p1)
{
    switch (act) {
    case KG_ACT_RELU: return x < 0.0f ? 0.0f : x; /* NaN stays NaN */
    case KG_ACT_CLIP: x = x < p0 ? p0 : x; return x > p1 ? p1 : x;
    case KG_ACT_LEAKY_RELU: return x < 0.0f ? p0 * x : x;
    case KG_ACT_SIGMOID: return kg_sigmoidf(x);
    case KG_ACT_TANH: return tanhf(x);
    case KG_ACT_GELU: return kg_geluf(x);
    case KG_ACT_GELU_TANH: return kg_gelu_tanhf(x);
    case KG_ACT_SILU: return x * kg_sigmoidf(x);
    case KG_ACT_HARD_SWISH: {
        float h = fmaf(x, 1.0f / 6.0f, 0.5f);
        h = h < 0.0f ? 0.0f : h;
        return x * (h > 1.0f ? 1.0f : h);
    }
    case KG_ACT_HARD_SIGMOID: /* NaN stays NaN, as in the interpreter */
        x = fmaf(p0, x, p1);
        x = x < 0.0f ? 0.0f : x;
        return x > 1.0f ? 1.0f : x;
    case KG_ACT_SOFTPLUS: return kg_softplusf(x);
    default: return x;
    }
}

#endif
