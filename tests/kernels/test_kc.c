/*
 * test_kc.c: correctness of the `c` target's kernel templates
 * (src/target/c/kernels) against naive double-precision references.
 *
 *   make build/test_kc && build/test_kc [SEED]
 *   (by hand: cc -std=c11 -O2 -march=native -Isrc/target/c/kernels
 *    tests/kernels/test_kc.c src/target/c/kernels/kc_*.c -lm)
 *
 * Random shapes (odd sizes, dimensions of 1, batches, transposes, every
 * activation and epilogue), every rTask run in a shuffled order with a
 * scratch buffer full of NaN (a kernel that reads scratch it did not write
 * fails), outputs surrounded by sentinels (a kernel that writes outside its
 * output fails). The vector math is swept densely and its error printed.
 * Prints "N passed, N failed"; exits non-zero on failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc.h"
#include "kc_math.h"

static int n_pass, n_fail;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static int64_t rnd(int64_t lo, int64_t hi) { return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1)); }
static float frnd(float lo, float hi) { return lo + (hi - lo) * (float)(rng() >> 40) / (float)(1 << 24); }

static void check(int ok, const char *what)
{
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL: %s\n", what);
    }
}

static const float SENTINEL = 12345.5f;

static float *falloc(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64 + 64);
    if (!p) abort();
    return p;
}
static void fill(float *p, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) p[i] = frnd(lo, hi);
}
static void fill_val(float *p, size_t n, float v)
{
    for (size_t i = 0; i < n; i++) p[i] = v;
}
static void *scratch_alloc(size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 16 + 16;
    float *s = falloc(n);
    fill_val(s, n, NAN);
    return s;
}

/* A random order of 0..n-1. */
static int64_t *shuffled(int64_t n)
{
    int64_t *o = malloc((size_t)(n > 0 ? n : 1) * sizeof *o);
    for (int64_t i = 0; i < n; i++) o[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng() % (uint64_t)(i + 1)), t = o[i];
        o[i] = o[j];
        o[j] = t;
    }
    return o;
}

/* ---- double-precision references ---- */

static double ref_act(int act, double x, double a, double b)
{
    switch (act) {
    case KC_ACT_RELU: return x > 0 ? x : 0;
    case KC_ACT_CLIP: return x < a ? a : x > b ? b : x;
    case KC_ACT_LEAKY_RELU: return x < 0 ? a * x : x;
    case KC_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case KC_ACT_TANH: return tanh(x);
    case KC_ACT_GELU: return x * 0.5 * erfc(-x / sqrt(2.0));
    case KC_ACT_GELU_TANH: /* 0.5 x (1 + tanh z), written without the cancellation */
        return x / (1 + exp(-2 * 0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    case KC_ACT_SILU: return x / (1 + exp(-x));
    case KC_ACT_HARD_SWISH: {
        double h = x / 6 + 0.5;
        return x * (h < 0 ? 0 : h > 1 ? 1 : h);
    }
    case KC_ACT_HARD_SIGMOID: {
        double h = a * x + b;
        return h < 0 ? 0 : h > 1 ? 1 : h;
    }
    case KC_ACT_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
    default: return x;
    }
}

static void rand_act(kc_epilogue *ep)
{
    ep->act = (kc_act)rnd(0, KC_ACT_COUNT - 1);
    ep->alpha = 0.0f, ep->beta = 0.0f;
    if (ep->act == KC_ACT_CLIP) ep->alpha = frnd(-1, 0), ep->beta = frnd(0, 1);
    if (ep->act == KC_ACT_LEAKY_RELU) ep->alpha = frnd(0, 0.3f);
    if (ep->act == KC_ACT_HARD_SIGMOID) ep->alpha = 0.2f, ep->beta = 0.5f;
}

/* |got - want| within accumulation error (terms of total size `mag` summed
 * over k) plus the activation approximations' error. */
static int close_enough(double got, double want, double mag, int64_t k)
{
    double tol = 4e-7 * sqrt((double)k + 1) * (mag + 1) + 1e-5 * (1 + fabs(want));
    return fabs(got - want) <= tol && got == got;
}

/* ---- GEMM ---- */

static void test_gemm_case(int64_t batch, int64_t M, int64_t N, int64_t K, int trans_a, int trans_b, int packed,
                           int bias_mode, int res_mode, int tiles_mode)
{
    kc_gemm g;
    memset(&g, 0, sizeof g);
    g.M = M, g.N = N, g.K = K, g.batch = batch;
    g.trans_a = trans_a, g.trans_b = trans_b;
    g.lda = (trans_a ? M : K) + rnd(0, 3);
    g.ldb = (trans_b ? K : N) + rnd(0, 3);
    g.ldc = N + rnd(0, 3);
    int64_t a_rows = trans_a ? K : M, b_rows = trans_b ? N : K;
    g.a_batch_stride = a_rows * g.lda + rnd(0, 5);
    g.b_batch_stride = packed ? 0 : b_rows * g.ldb + rnd(0, 5);
    g.c_batch_stride = M * g.ldc + rnd(0, 5);
    size_t a_n = (size_t)(g.a_batch_stride * batch + 1), b_n = (size_t)(g.b_batch_stride * batch + b_rows * g.ldb + 1);
    size_t c_n = (size_t)(g.c_batch_stride * batch + 1);
    float *A = falloc(a_n), *B = falloc(b_n), *C = falloc(c_n), *R = NULL, *bias = NULL;
    fill(A, a_n, -1, 1);
    fill(B, b_n, -1, 1);
    fill_val(C, c_n, SENTINEL);
    g.A = A, g.B = B, g.C = C;
    g.alpha = rng() % 2 ? 1.0f : frnd(-2, 2);
    if (bias_mode) {
        g.ep.bias_per_row = bias_mode == 2;
        bias = falloc((size_t)(bias_mode == 2 ? M : N));
        fill(bias, (size_t)(bias_mode == 2 ? M : N), -1, 1);
        g.ep.bias = bias;
    }
    float *Rsave = NULL;
    if (res_mode == 1) {
        g.ep.ldr = N + rnd(0, 2);
        g.ep.r_batch_stride = M * g.ep.ldr + rnd(0, 3);
        size_t r_n = (size_t)(g.ep.r_batch_stride * batch + 1);
        R = falloc(r_n);
        fill(R, r_n, -1, 1);
        g.ep.residual = R;
    } else if (res_mode == 2) { /* in place: residual is C */
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < M; i++) fill(C + b * g.c_batch_stride + i * g.ldc, (size_t)N, -1, 1);
        Rsave = falloc(c_n);
        memcpy(Rsave, C, c_n * sizeof(float));
        g.ep.residual = C, g.ep.ldr = g.ldc, g.ep.r_batch_stride = g.c_batch_stride;
    }
    rand_act(&g.ep);
    float *Bp = NULL;
    if (packed) {
        Bp = falloc(kc_gemm_packed_b_bytes(K, N) / sizeof(float) + 1);
        kc_gemm_pack_b(B, g.ldb, trans_b, K, N, Bp);
        g.B_packed = Bp;
        if (rng() % 2) g.B = NULL;
    }
    if (tiles_mode == 0)
        kc_gemm_default_tiles(batch, M, N, K, (int)rnd(1, 8), &g.mb, &g.nb);
    else
        g.mb = rnd(1, M + 7), g.nb = rnd(1, N + 20);
    void *scratch = scratch_alloc(kc_gemm_scratch_bytes(&g));
    int64_t nt = kc_gemm_rtasks(&g), *order = shuffled(nt);
    for (int64_t i = 0; i < nt; i++) kc_gemm_rtask(&g, order[i], scratch);

    int ok = 1;
    double worst = 0;
    for (int64_t b = 0; b < batch && ok; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < g.ldc; j++) {
                float got = C[b * g.c_batch_stride + i * g.ldc + j];
                if (j >= N) {
                    if (got != SENTINEL) ok = 0;
                    continue;
                }
                double acc = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    double a = trans_a ? A[b * g.a_batch_stride + k * g.lda + i] : A[b * g.a_batch_stride + i * g.lda + k];
                    double bb = trans_b ? B[b * g.b_batch_stride + j * g.ldb + k] : B[b * g.b_batch_stride + k * g.ldb + j];
                    acc += a * bb;
                    mag += fabs(a * bb);
                }
                double want = g.alpha * acc;
                mag *= fabs(g.alpha);
                if (bias) want += bias[g.ep.bias_per_row ? i : j];
                if (res_mode == 1) want += R[b * g.ep.r_batch_stride + i * g.ep.ldr + j];
                if (res_mode == 2) want += Rsave[b * g.c_batch_stride + i * g.ldc + j];
                want = ref_act(g.ep.act, want, g.ep.alpha, g.ep.beta);
                if (!close_enough(got, want, mag + 2, K)) {
                    if (ok)
                        printf("  gemm b%ld i%ld j%ld: got %.7g want %.7g\n", (long)b, (long)i, (long)j, got, want);
                    ok = 0;
                }
                if (fabs(got - want) > worst) worst = fabs(got - want);
            }
    if (C[g.c_batch_stride * batch] != SENTINEL) ok = 0;
    char what[256];
    snprintf(what, sizeof what,
             "gemm batch=%ld M=%ld N=%ld K=%ld ta=%d tb=%d packed=%d bias=%d res=%d act=%d tiles=%ldx%ld",
             (long)batch, (long)M, (long)N, (long)K, trans_a, trans_b, packed, bias_mode, res_mode, g.ep.act,
             (long)g.mb, (long)g.nb);
    check(ok, what);
    free(A), free(B), free(C), free(R), free(bias), free(Bp), free(scratch), free(order), free(Rsave);
}

static void test_gemm(void)
{
    for (int it = 0; it < 400; it++) {
        int big = it % 10 == 0;
        int64_t M = rnd(1, big ? 200 : 40), N = rnd(1, big ? 200 : 70), K = rnd(0, big ? 700 : 40);
        if (it % 17 == 0) M = 1;
        if (it % 19 == 0) N = 1;
        if (it % 23 == 0) K = 1;
        int packed = rng() % 3 == 0;
        int64_t batch = packed && rng() % 2 ? 1 : rnd(1, 3);
        test_gemm_case(batch, M, N, K, (int)(rng() % 2), (int)(rng() % 2), packed, (int)rnd(0, 2), (int)rnd(0, 2),
                       (int)(rng() % 2));
    }
    /* shapes of the benchmarks, once each */
    test_gemm_case(1, 128, 768, 768, 0, 0, 1, 1, 1, 0);
    test_gemm_case(12, 128, 128, 64, 0, 1, 0, 0, 0, 0);
    test_gemm_case(1, 97, 131, 1031, 1, 1, 0, 2, 2, 0);
}

/* ---- convolution ---- */

static void test_conv_case(kc_conv2d *p, int64_t pad_b, int64_t pad_r, int bias_on, int res_on, int tiles_mode)
{
    p->OH = (p->H + p->pad_t + pad_b - p->dil_h * (p->R - 1) - 1) / p->stride_h + 1;
    p->OW = (p->W + p->pad_l + pad_r - p->dil_w * (p->S - 1) - 1) / p->stride_w + 1;
    if (p->OH < 1 || p->OW < 1) return;
    int64_t cg = p->C / p->group, kg = p->K / p->group;
    size_t xn = (size_t)(p->N * p->C * p->H * p->W), wn = (size_t)(p->K * cg * p->R * p->S);
    size_t yn = (size_t)(p->N * p->K * p->OH * p->OW);
    float *x = falloc(xn), *w = falloc(wn), *y = falloc(yn + 1), *bias = NULL, *res = NULL;
    fill(x, xn, -1, 1);
    fill(w, wn, -1, 1);
    fill_val(y, yn + 1, SENTINEL);
    float *wp = falloc(kc_conv2d_packed_w_bytes(p) / sizeof(float) + 1);
    kc_conv2d_pack_w(p, w, wp);
    p->x = x, p->w_packed = wp, p->y = y;
    memset(&p->ep, 0, sizeof p->ep);
    if (bias_on) {
        bias = falloc((size_t)p->K);
        fill(bias, (size_t)p->K, -1, 1);
        p->ep.bias = bias;
    }
    if (res_on) {
        res = falloc(yn);
        fill(res, yn, -1, 1);
        p->ep.residual = res;
    }
    rand_act(&p->ep);
    if (tiles_mode == 0)
        kc_conv2d_default_tiles(p, (int)rnd(1, 8));
    else
        p->kb = rnd(1, kg + 7), p->pb = rnd(1, p->OH * p->OW + 20);
    void *scratch = scratch_alloc(kc_conv2d_scratch_bytes(p));
    int64_t nt = kc_conv2d_rtasks(p), *order = shuffled(nt);
    for (int64_t i = 0; i < nt; i++) kc_conv2d_rtask(p, order[i], scratch);

    int ok = y[yn] == SENTINEL;
    for (int64_t n = 0; n < p->N && ok; n++)
        for (int64_t k = 0; k < p->K && ok; k++) {
            int64_t g = k / kg;
            for (int64_t oh = 0; oh < p->OH && ok; oh++)
                for (int64_t ow = 0; ow < p->OW; ow++) {
                    double acc = 0, mag = 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < p->R; r++)
                            for (int64_t s = 0; s < p->S; s++) {
                                int64_t ih = oh * p->stride_h - p->pad_t + r * p->dil_h;
                                int64_t iw = ow * p->stride_w - p->pad_l + s * p->dil_w;
                                if (ih < 0 || ih >= p->H || iw < 0 || iw >= p->W) continue;
                                double v = (double)x[((n * p->C + g * cg + c) * p->H + ih) * p->W + iw] *
                                           w[((k * cg + c) * p->R + r) * p->S + s];
                                acc += v;
                                mag += fabs(v);
                            }
                    int64_t yi = ((n * p->K + k) * p->OH + oh) * p->OW + ow;
                    if (bias) acc += bias[k];
                    if (res) acc += res[yi];
                    double want = ref_act(p->ep.act, acc, p->ep.alpha, p->ep.beta);
                    if (!close_enough(y[yi], want, mag + 2, cg * p->R * p->S)) {
                        printf("  conv n%ld k%ld oh%ld ow%ld: got %.7g want %.7g\n", (long)n, (long)k, (long)oh,
                               (long)ow, y[yi], want);
                        ok = 0;
                        break;
                    }
                }
        }
    char what[320];
    snprintf(what, sizeof what,
             "conv N=%ld C=%ld H=%ld W=%ld K=%ld R=%ld S=%ld stride=%ld,%ld pad=%ld,%ld,%ld,%ld dil=%ld,%ld "
             "group=%ld bias=%d res=%d act=%d tiles=%ldx%ld",
             (long)p->N, (long)p->C, (long)p->H, (long)p->W, (long)p->K, (long)p->R, (long)p->S, (long)p->stride_h,
             (long)p->stride_w, (long)p->pad_t, (long)p->pad_l, (long)pad_b, (long)pad_r, (long)p->dil_h,
             (long)p->dil_w, (long)p->group, bias_on, res_on, p->ep.act, (long)p->kb, (long)p->pb);
    check(ok, what);
    free(x), free(w), free(y), free(bias), free(res), free(wp), free(scratch), free(order);
}

static void test_conv(void)
{
    for (int it = 0; it < 300; it++) {
        kc_conv2d p;
        memset(&p, 0, sizeof p);
        int kind = it % 5; /* 0,1: general; 2: grouped; 3: depthwise; 4: pointwise */
        p.N = rnd(1, 2);
        p.H = rnd(1, 14), p.W = rnd(1, 20);
        p.R = rnd(1, 5), p.S = rnd(1, 5);
        if (it % 13 == 0) p.R = p.S = 7;
        p.stride_h = rnd(1, 3), p.stride_w = rnd(1, 3);
        p.dil_h = rng() % 4 ? 1 : 2, p.dil_w = rng() % 4 ? 1 : 2;
        p.pad_t = rnd(0, p.R - 1 < 3 ? p.R - 1 : 3), p.pad_l = rnd(0, p.S - 1 < 3 ? p.S - 1 : 3);
        int64_t pad_b = rnd(0, p.pad_t), pad_r = rnd(0, p.pad_l);
        p.group = 1;
        p.C = rnd(1, 12), p.K = rnd(1, 20);
        if (kind == 2) {
            p.group = rnd(2, 4);
            p.C = p.group * rnd(1, 4), p.K = p.group * rnd(1, 8);
        } else if (kind == 3) {
            p.C = p.K = p.group = rnd(1, 12);
            p.R = p.S = rng() % 2 ? 3 : 5;
            if (it % 7 == 0) p.R = rnd(1, 4), p.S = rnd(1, 4);
            p.stride_h = p.stride_w = rnd(1, 2);
            p.pad_t = p.pad_l = pad_b = pad_r = p.R / 2;
            if (it % 3 == 0) pad_b = pad_r = 0;
            if (it % 4 == 0) /* uneven padding: the direct kernels' edge masks */
                p.pad_t = rnd(0, p.R - 1), p.pad_l = rnd(0, p.S - 1), pad_b = rnd(0, p.pad_t),
                pad_r = rnd(0, p.pad_l);
            p.H = rnd(1, 24), p.W = rnd(1, it % 2 ? 40 : 75);
        } else if (kind == 4) {
            p.R = p.S = 1, p.stride_h = p.stride_w = 1, p.pad_t = p.pad_l = pad_b = pad_r = 0;
            p.dil_h = p.dil_w = 1;
            p.C = rnd(1, 300), p.K = rnd(1, 40);
        }
        test_conv_case(&p, pad_b, pad_r, (int)(rng() % 2), (int)(rng() % 2), (int)(rng() % 2));
    }
    /* ResNet / MobileNet-like layers, scaled down */
    kc_conv2d p;
    memset(&p, 0, sizeof p);
    p = (kc_conv2d){.N = 1, .C = 64, .H = 14, .W = 14, .K = 64, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1,
                    .pad_t = 1, .pad_l = 1, .dil_h = 1, .dil_w = 1, .group = 1};
    test_conv_case(&p, 1, 1, 1, 1, 0);
    p = (kc_conv2d){.N = 1, .C = 3, .H = 30, .W = 30, .K = 16, .R = 7, .S = 7, .stride_h = 2, .stride_w = 2,
                    .pad_t = 3, .pad_l = 3, .dil_h = 1, .dil_w = 1, .group = 1};
    test_conv_case(&p, 3, 3, 1, 0, 0);
    p = (kc_conv2d){.N = 1, .C = 32, .H = 28, .W = 28, .K = 32, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2,
                    .pad_t = 1, .pad_l = 1, .dil_h = 1, .dil_w = 1, .group = 32};
    test_conv_case(&p, 1, 1, 1, 0, 0);
    p = (kc_conv2d){.N = 2, .C = 40, .H = 9, .W = 9, .K = 300, .R = 1, .S = 1, .stride_h = 1, .stride_w = 1,
                    .pad_t = 0, .pad_l = 0, .dil_h = 1, .dil_w = 1, .group = 1};
    test_conv_case(&p, 0, 0, 1, 1, 0);

    /* each orientation and source of the general kernel, tiles by default
     * and at random: channel mode (small images, Y^T transposed out),
     * staged or reading x directly (no padding), grouped; pixel mode with
     * many row segments a panel, and strided 1x1; depthwise on rows wide
     * enough for interior and edge chunks; no input channels at all */
    static const struct {
        int64_t N, C, H, W, K, R, stride, pad, pad_end, group;
    } cases[] = {
        {2, 24, 7, 7, 48, 3, 1, 1, 1, 1},   {1, 40, 14, 14, 32, 1, 2, 0, 0, 1}, {1, 20, 13, 13, 64, 3, 2, 1, 1, 1},
        {1, 16, 7, 7, 64, 3, 1, 1, 1, 2},   {1, 70, 8, 6, 40, 3, 1, 0, 0, 1},   {1, 8, 5, 5, 12, 3, 1, 1, 1, 1},
        {1, 16, 30, 30, 24, 1, 2, 0, 0, 1}, {1, 3, 33, 35, 20, 7, 2, 3, 2, 1},  {2, 9, 10, 3, 22, 3, 1, 1, 1, 1},
        {1, 600, 7, 7, 33, 1, 1, 0, 0, 1},  {1, 5, 9, 70, 5, 3, 1, 1, 1, 5},    {1, 6, 11, 67, 6, 3, 2, 1, 0, 6},
        {1, 4, 9, 61, 4, 5, 2, 2, 2, 4},    {1, 4, 12, 50, 4, 5, 1, 0, 0, 4},   {1, 0, 5, 5, 4, 3, 1, 1, 1, 1},
        {1, 0, 7, 7, 32, 1, 1, 0, 0, 1},
    };
    /* an empty output: no rTasks, and nothing divides by zero on the way */
    p = (kc_conv2d){.N = 1, .C = 4, .H = 3, .W = 3, .K = 8, .OH = 0, .OW = 3, .R = 3, .S = 3, .stride_h = 1,
                    .stride_w = 1, .dil_h = 1, .dil_w = 1, .group = 1};
    kc_conv2d_default_tiles(&p, 2);
    check(kc_conv2d_rtasks(&p) == 0 && kc_conv2d_scratch_bytes(&p) > 0, "conv with an empty output");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int mode = 0; mode < 2; mode++) {
            p = (kc_conv2d){.N = cases[i].N, .C = cases[i].C, .H = cases[i].H, .W = cases[i].W, .K = cases[i].K,
                            .R = cases[i].R, .S = cases[i].R, .stride_h = cases[i].stride,
                            .stride_w = cases[i].stride, .pad_t = cases[i].pad, .pad_l = cases[i].pad, .dil_h = 1,
                            .dil_w = 1, .group = cases[i].group};
            test_conv_case(&p, cases[i].pad_end, cases[i].pad_end, 1, mode, mode);
        }
}

/* ---- pooling ---- */

static void test_pool(void)
{
    for (int it = 0; it < 200; it++) {
        kc_pool2d p;
        memset(&p, 0, sizeof p);
        p.kind = rng() % 2 ? KC_POOL_MAX : KC_POOL_AVG;
        p.N = rnd(1, 2), p.C = rnd(1, 5), p.H = rnd(1, 15), p.W = rnd(1, it % 10 == 0 ? 600 : 20);
        p.R = rnd(1, 4), p.S = rnd(1, 4), p.stride_h = rnd(1, 3), p.stride_w = rnd(1, 3);
        p.dil_h = rng() % 4 ? 1 : 2, p.dil_w = rng() % 4 ? 1 : 2;
        p.pad_t = rnd(0, p.R - 1), p.pad_l = rnd(0, p.S - 1);
        int64_t pad_b = rnd(0, p.pad_t), pad_r = rnd(0, p.pad_l);
        p.count_include_pad = (int)(rng() % 2);
        p.OH = (p.H + p.pad_t + pad_b - p.dil_h * (p.R - 1) - 1) / p.stride_h + 1;
        p.OW = (p.W + p.pad_l + pad_r - p.dil_w * (p.S - 1) - 1) / p.stride_w + 1;
        if (p.OH < 1 || p.OW < 1) continue;
        p.cb = rnd(1, 4);
        size_t xn = (size_t)(p.N * p.C * p.H * p.W), yn = (size_t)(p.N * p.C * p.OH * p.OW);
        float *x = falloc(xn), *y = falloc(yn + 1);
        fill(x, xn, -1, 1);
        fill_val(y, yn + 1, SENTINEL);
        p.x = x, p.y = y;
        int64_t nt = kc_pool2d_rtasks(&p), *order = shuffled(nt);
        for (int64_t i = 0; i < nt; i++) kc_pool2d_rtask(&p, order[i]);
        int ok = y[yn] == SENTINEL;
        for (int64_t pl = 0; pl < p.N * p.C; pl++)
            for (int64_t oh = 0; oh < p.OH; oh++)
                for (int64_t ow = 0; ow < p.OW; ow++) {
                    double m = -INFINITY, s = 0;
                    int cnt = 0;
                    for (int64_t r = 0; r < p.R; r++)
                        for (int64_t c = 0; c < p.S; c++) {
                            int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
                            int64_t iw = ow * p.stride_w - p.pad_l + c * p.dil_w;
                            if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
                            double v = x[(pl * p.H + ih) * p.W + iw];
                            m = v > m ? v : m;
                            s += v;
                            cnt++;
                        }
                    double want = p.kind == KC_POOL_MAX ? m : s / (p.count_include_pad ? p.R * p.S : cnt);
                    float got = y[(pl * p.OH + oh) * p.OW + ow];
                    if (cnt == 0) /* window all padding: -inf (max) or NaN (avg, 0 / 0) */
                        ok &= p.kind == KC_POOL_MAX ? got == -INFINITY : (p.count_include_pad ? got == 0 : got != got);
                    else if (!(fabs(got - want) <= 1e-6 * (1 + fabs(want))))
                        ok = 0;
                }
        char what[256];
        snprintf(what, sizeof what, "pool kind=%d H=%ld W=%ld R=%ld S=%ld stride=%ld,%ld pad=%ld,%ld dil=%ld,%ld cip=%d",
                 p.kind, (long)p.H, (long)p.W, (long)p.R, (long)p.S, (long)p.stride_h, (long)p.stride_w,
                 (long)p.pad_t, (long)p.pad_l, (long)p.dil_h, (long)p.dil_w, p.count_include_pad);
        check(ok, what);
        free(x), free(y), free(order);
    }
}

/* ---- row-wise ---- */

static void test_rows(void)
{
    for (int it = 0; it < 150; it++) {
        kc_rows p;
        memset(&p, 0, sizeof p);
        p.rows = rnd(1, 9), p.cols = rnd(1, it % 5 == 0 ? 3000 : 100), p.rb = rnd(1, 4);
        p.eps = 1e-5f, p.log = (int)(rng() % 2);
        float offset = it % 3 == 0 ? frnd(-1000, 1000) : 0.0f, scale = it % 4 == 0 ? 30.0f : 3.0f;
        size_t n = (size_t)(p.rows * p.cols);
        float *x = falloc(n), *y = falloc(n + 1), *gamma = falloc((size_t)p.cols), *beta = falloc((size_t)p.cols);
        for (size_t i = 0; i < n; i++) x[i] = offset + frnd(-scale, scale);
        fill(gamma, (size_t)p.cols, 0.5f, 1.5f);
        fill(beta, (size_t)p.cols, -1, 1);
        p.x = x, p.y = y, p.gamma = gamma, p.beta = rng() % 2 ? beta : NULL;
        int64_t nt = kc_rows_rtasks(&p);
        for (int op = 0; op < 3; op++) {
            fill_val(y, n + 1, SENTINEL);
            int64_t *order = shuffled(nt);
            for (int64_t i = 0; i < nt; i++) {
                if (op == 0) kc_softmax_rtask(&p, order[i]);
                if (op == 1) kc_layernorm_rtask(&p, order[i]);
                if (op == 2) kc_row_mean_rtask(&p, order[i]);
            }
            free(order);
            int ok = op == 2 ? y[p.rows] == SENTINEL : y[n] == SENTINEL;
            for (int64_t r = 0; r < p.rows; r++) {
                const float *xr = x + r * p.cols;
                double mx = -INFINITY, sum = 0, mean = 0, var = 0;
                for (int64_t j = 0; j < p.cols; j++) mx = xr[j] > mx ? xr[j] : mx, mean += xr[j];
                mean /= (double)p.cols;
                for (int64_t j = 0; j < p.cols; j++) sum += exp(xr[j] - mx), var += (xr[j] - mean) * (xr[j] - mean);
                var /= (double)p.cols;
                if (op == 2) {
                    if (!(fabs(y[r] - mean) <= 1e-6 * (1 + fabs(mean)))) ok = 0;
                    continue;
                }
                for (int64_t j = 0; j < p.cols; j++) {
                    double want, tol;
                    if (op == 0) {
                        want = p.log ? xr[j] - mx - log(sum) : exp(xr[j] - mx) / sum;
                        tol = p.log ? 2e-6 * (fabs(xr[j]) + fabs(mx) + 1) : 1e-5 * want + 1e-12;
                    } else {
                        want = (xr[j] - mean) / sqrt(var + p.eps) * gamma[j] + (p.beta ? beta[j] : 0);
                        /* x - mean is rounded to float: relative ~ |x| / std ulp */
                        tol = 2e-6 * (1 + fabs(want)) + 1.2e-7 * fabs(xr[j]) / sqrt(var + p.eps) * 2;
                    }
                    if (!(fabs(y[r * p.cols + j] - want) <= tol)) {
                        if (ok) printf("  rows op%d r%ld j%ld: got %.9g want %.9g\n", op, (long)r, (long)j,
                                       y[r * p.cols + j], want);
                        ok = 0;
                    }
                }
            }
            char what[128];
            snprintf(what, sizeof what, "%s rows=%ld cols=%ld log=%d offset=%g",
                     op == 0 ? "softmax" : op == 1 ? "layernorm" : "row_mean", (long)p.rows, (long)p.cols, p.log,
                     offset);
            check(ok, what);
        }
        free(x), free(y), free(gamma), free(beta);
    }
}

/* ---- vector math ---- */

static double ulp_of(double want)
{
    float w = (float)fabs(want);
    if (w < FLT_MIN) return FLT_MIN * FLT_EPSILON;
    return nextafterf(w, INFINITY) - w;
}

typedef float (*f32_fn)(float);
static double r_exp(double x) { return exp(x); }
static double r_log(double x) { return log(x); }
static double r_tanh(double x) { return tanh(x); }
static double r_erf(double x) { return erf(x); }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_gelu(double x) { return x * 0.5 * erfc(-x / sqrt(2.0)); }

/* Max error over [lo, hi] in steps of ~4e-6 relative (tens of millions of points);
 * fails if over max_ulp ulps or max_rel relative. */
static void sweep(const char *name, f32_fn f, double (*ref)(double), float lo, float hi, double max_ulp,
                  double max_rel)
{
    double worst_ulp = 0, worst_rel = 0, at = 0;
    long n = 0;
    for (float x = lo; x <= hi; n++) {
        double want = ref(x), got = f(x);
        double e = fabs(got - want), u = e / ulp_of(want), r = e / (fabs(want) + 1e-300);
        if (u > worst_ulp) worst_ulp = u, at = x;
        if (r > worst_rel) worst_rel = r;
        if (got != got && want == want) worst_ulp = worst_rel = INFINITY;
        float nx = x + fabsf(x) * 4e-6f;
        if (nx == x) nx = nextafterf(x, INFINITY);
        if (x < 0 && nx > -1e-30f) nx = 1e-30f; /* skip the denormal results around 0 */
        x = nx;
    }
    printf("  %-8s [%g, %g] %ld points: max %.2f ulp (at %g), max rel %.3g\n", name, lo, hi, n, worst_ulp, at,
           worst_rel);
    char what[96];
    snprintf(what, sizeof what, "%s error within %.1f ulp / %.1g rel", name, max_ulp, max_rel);
    check(worst_ulp <= max_ulp && worst_rel <= max_rel, what);
}

static float w_sigmoid(float x) { return kc_sigmoidf(x); }

static void test_math(void)
{
    printf("vector math (vs double libm):\n");
    sweep("expf", kc_expf, r_exp, -87.0f, 88.0f, 2, 2.5e-7);
    sweep("logf", kc_logf, r_log, 1e-37f, 3e38f, 2, 2.5e-7);
    sweep("tanhf", kc_tanhf, r_tanh, -10.0f, 10.0f, 3, 3.5e-7);
    sweep("erff", kc_erff, r_erf, -6.0f, 6.0f, 3, 3.5e-7);
    sweep("sigmoid", w_sigmoid, r_sigmoid, -87.0f, 87.0f, 3, 3.5e-7);
    sweep("gelu", kc_geluf, r_gelu, 1e-30f, 10.0f, 3, 2.5e-7);
    sweep("gelu", kc_geluf, r_gelu, -3.0f, 10.0f, 24, 1.5e-6);
    sweep("gelu", kc_geluf, r_gelu, -5.5f, 10.0f, 80, 5e-6);
    /* special values */
    check(kc_expf(-100.0f) == 0.0f && kc_expf(100.0f) == INFINITY && isnan(kc_expf(NAN)), "expf specials");
    check(kc_logf(0.0f) == -INFINITY && isnan(kc_logf(-1.0f)) && kc_logf(INFINITY) == INFINITY &&
              fabs(kc_logf(1e-40f) - log(1e-40)) < 1e-5 && isnan(kc_logf(NAN)),
          "logf specials");
    check(kc_tanhf(50.0f) == 1.0f && kc_tanhf(-50.0f) == -1.0f && kc_erff(10.0f) == 1.0f && kc_erff(-10.0f) == -1.0f,
          "tanh/erf saturation");
    check(fabs(kc_geluf(-20.0f)) < 1e-10 && kc_sigmoidf(-100.0f) >= 0.0f && kc_sigmoidf(100.0f) == 1.0f,
          "gelu/sigmoid tails");

    /* every activation against its definition */
    for (int act = 0; act < KC_ACT_COUNT; act++) {
        float a = act == KC_ACT_CLIP ? -0.5f : act == KC_ACT_HARD_SIGMOID ? 0.2f : 0.1f;
        float b = act == KC_ACT_CLIP ? 2.0f : 0.5f;
        double worst = 0, at = 0;
        for (float x = -30.0f; x <= 30.0f; x += 0.000731f) {
            double want = ref_act(act, x, a, b), got = kc_act_apply(act, x, a, b);
            /* relative, but absolute 1e-7 near zeros (cancellation in
             * HardSwish's clip, GELU's tail) */
            double e = fabs(got - want) / (fabs(want) + 1e-30);
            if (fabs(got - want) < 1e-7) e = 0;
            if (e > worst) worst = e, at = x;
        }
        float v[1000];
        for (int i = 0; i < 1000; i++) v[i] = -30.0f + 0.06f * (float)i;
        kc_act_inplace(act, v, 1000, a, b);
        int same = 1;
        for (int i = 0; i < 1000; i++) same &= v[i] == kc_act_apply(act, -30.0f + 0.06f * (float)i, a, b);
        char what[96];
        snprintf(what, sizeof what, "activation %d: max rel %.3g (at %g), inplace matches", act, worst, at);
        if (worst > 1e-6) printf("  %s\n", what);
        check(worst <= 2e-6 && same, what);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) rng_state = strtoull(argv[1], NULL, 0) | 1;
    test_math();
    test_gemm();
    test_conv();
    test_pool();
    test_rows();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail != 0;
}
