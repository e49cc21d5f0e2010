/*
 * kc_gemm.c: the `c` target's GEMM, C[b] = act(alpha op(A[b]) op(B[b]) +
 * bias + residual), one rTask (an mb x nb tile of one batch) at a time.
 *
 * The structure is the BLIS/GotoBLAS one (Goto & van de Geijn, "Anatomy of
 * high-performance matrix multiplication", 2008), cut to rTask size: per
 * k-block of KC_KC, the tile's A rows are packed into KC_MR-row panels
 * (L2-resident), then for each group of B panels (packed on the fly, or
 * taken from the compile-time packed weights; L1-resident) every A panel
 * runs the register-blocked micro-kernel. Partial sums live in C between
 * k-blocks: the first block writes alpha AB + bias + residual (so the
 * residual may alias C), later ones accumulate, and the last applies the
 * activation to the micro-tile while it is still in L1.
 *
 * Micro-kernels, chosen by the preprocessor:
 *   AVX-512F     6 x 64 (4 B panels of 16, 24 zmm accumulators)
 *   AVX2 + FMA   6 x 16 (12 ymm accumulators; a 2 x 16 one for the last
 *                1 or 2 rows of m, and while the first A panel of a packed
 *                B group runs, the next group is prefetched)
 *   plain C      6 x 16 loops that gcc vectorizes as it can
 * ReLU and Clip are applied to the accumulators as they are stored; other
 * activations go over the micro-tile in L1 afterwards.
 * Packed layouts do not depend on the choice (see kc.h), so weights packed
 * by any build of this file serve every build.
 */
#include <string.h>

#include "kc.h"
#include "kc_math.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define KC_NRB (4 * KC_NR) /* columns of one micro-tile */
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KC_NRB KC_NR
#else
#define KC_NRB KC_NR
#endif

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }

/* How C is updated from a micro-tile's accumulators. Pointers are already
 * offset to the micro-tile's first row / column. */
typedef struct upd {
    float alpha;
    int first;
    const float *bias_col, *bias_row;
    const float *res;
    int64_t ldr;
    int act;            /* KC_ACT_NONE, or RELU / CLIP applied before the store (last k-block) */
    float act_lo, act_hi;
} upd;

/* Activations cheap enough to apply to the accumulators on their way out. */
static int act_in_update(kc_act act) { return act == KC_ACT_RELU || act == KC_ACT_CLIP; }

/* Update an m x n corner of C from accumulators in memory (edge tiles, and
 * the plain-C kernel). */
static void update_tile(float *c, int64_t ldc, const float *acc, int64_t ld_acc, int64_t m, int64_t n,
                        const upd *u)
{
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        const float *ai = acc + i * ld_acc;
        if (!u->first) {
            for (int64_t j = 0; j < n; j++) ci[j] = kc_fmaf(ai[j], u->alpha, ci[j]);
        } else {
            float br = u->bias_row ? u->bias_row[i] : 0.0f;
            const float *ri = u->res ? u->res + i * u->ldr : NULL;
            for (int64_t j = 0; j < n; j++) {
                float v = ai[j] * u->alpha;
                if (u->bias_col) v += u->bias_col[j];
                v += br;
                if (ri) v += ri[j];
                ci[j] = v;
            }
        }
        if (u->act != KC_ACT_NONE)
            for (int64_t j = 0; j < n; j++) ci[j] = kc_act_apply(u->act, ci[j], u->act_lo, u->act_hi);
    }
}

#if defined(__AVX512F__)

/* One row of 16 columns of a full micro-tile, in registers. */
static inline __attribute__((always_inline)) void upd_zmm(float *c, __m512 x, int64_t i, int64_t j, const upd *u)
{
    __m512 al = _mm512_set1_ps(u->alpha);
    if (!u->first) {
        x = _mm512_fmadd_ps(x, al, _mm512_loadu_ps(c));
    } else {
        x = _mm512_mul_ps(x, al);
        if (u->bias_col) x = _mm512_add_ps(x, _mm512_loadu_ps(u->bias_col + j));
        if (u->bias_row) x = _mm512_add_ps(x, _mm512_set1_ps(u->bias_row[i]));
        if (u->res) x = _mm512_add_ps(x, _mm512_loadu_ps(u->res + i * u->ldr + j));
    }
    if (u->act == KC_ACT_RELU) x = _mm512_max_ps(x, _mm512_setzero_ps());
    if (u->act == KC_ACT_CLIP)
        x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(u->act_lo)), _mm512_set1_ps(u->act_hi));
    _mm512_storeu_ps(c, x);
}

/* 6 x (16 np): np B panels at b + j * bps. Called with constant np so that
 * the accumulator array lives in registers. */
static inline __attribute__((always_inline)) void ukr_np(const int np, int64_t k, const float *a, const float *b,
                                                         int64_t bps, float *c, int64_t ldc, int64_t m, int64_t n,
                                                         const upd *u)
{
    __m512 acc[KC_MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < KC_MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < np; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        __m512 bv[4];
#pragma GCC unroll 4
        for (int j = 0; j < np; j++) bv[j] = _mm512_loadu_ps(b + j * bps + p * KC_NR);
#pragma GCC unroll 6
        for (int i = 0; i < KC_MR; i++) {
            __m512 av = _mm512_set1_ps(a[p * KC_MR + i]);
#pragma GCC unroll 4
            for (int j = 0; j < np; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    if (n == np * KC_NR) { /* whole rows: in registers, m of them */
#pragma GCC unroll 6
        for (int i = 0; i < KC_MR; i++)
            if (i < m)
#pragma GCC unroll 4
                for (int j = 0; j < np; j++) upd_zmm(c + i * ldc + j * KC_NR, acc[i][j], i, j * KC_NR, u);
    } else {
        _Alignas(64) float t[KC_MR * KC_NRB];
        for (int i = 0; i < KC_MR; i++)
            for (int j = 0; j < np; j++) _mm512_store_ps(t + i * KC_NRB + j * KC_NR, acc[i][j]);
        update_tile(c, ldc, t, KC_NRB, m, n, u);
    }
}

static void ukernel(int64_t k, const float *a, const float *b, int64_t bps, float *c, int64_t ldc, int64_t m,
                    int64_t n, const upd *u, const float *pf)
{
    (void)pf;
    switch (cdiv(n, KC_NR)) {
    case 1: ukr_np(1, k, a, b, bps, c, ldc, m, n, u); break;
    case 2: ukr_np(2, k, a, b, bps, c, ldc, m, n, u); break;
    case 3: ukr_np(3, k, a, b, bps, c, ldc, m, n, u); break;
    default: ukr_np(4, k, a, b, bps, c, ldc, m, n, u); break;
    }
}

#elif defined(__AVX2__) && defined(__FMA__)

static inline __attribute__((always_inline)) void upd_ymm2(float *c, __m256 x0, __m256 x1, int64_t i, const upd *u)
{
    __m256 al = _mm256_set1_ps(u->alpha);
    if (!u->first) {
        x0 = _mm256_fmadd_ps(x0, al, _mm256_loadu_ps(c));
        x1 = _mm256_fmadd_ps(x1, al, _mm256_loadu_ps(c + 8));
    } else {
        x0 = _mm256_mul_ps(x0, al);
        x1 = _mm256_mul_ps(x1, al);
        if (u->bias_col) {
            x0 = _mm256_add_ps(x0, _mm256_loadu_ps(u->bias_col));
            x1 = _mm256_add_ps(x1, _mm256_loadu_ps(u->bias_col + 8));
        }
        if (u->bias_row) {
            __m256 br = _mm256_set1_ps(u->bias_row[i]);
            x0 = _mm256_add_ps(x0, br);
            x1 = _mm256_add_ps(x1, br);
        }
        if (u->res) {
            x0 = _mm256_add_ps(x0, _mm256_loadu_ps(u->res + i * u->ldr));
            x1 = _mm256_add_ps(x1, _mm256_loadu_ps(u->res + i * u->ldr + 8));
        }
    }
    /* max / min return their second operand for NaN, as kc_act_apply does */
    if (u->act == KC_ACT_RELU) {
        x0 = _mm256_max_ps(x0, _mm256_setzero_ps());
        x1 = _mm256_max_ps(x1, _mm256_setzero_ps());
    } else if (u->act == KC_ACT_CLIP) {
        __m256 lo = _mm256_set1_ps(u->act_lo), hi = _mm256_set1_ps(u->act_hi);
        x0 = _mm256_min_ps(_mm256_max_ps(x0, lo), hi);
        x1 = _mm256_min_ps(_mm256_max_ps(x1, lo), hi);
    }
    _mm256_storeu_ps(c, x0);
    _mm256_storeu_ps(c + 8, x1);
}

/* 6 x 16: per k, two B vectors and six broadcasts feed 12 FMAs. pf: a
 * panel to prefetch, one line (KC_NR floats) per k (the next B panel, which
 * would otherwise come from memory at the start of the next pass). */
/* At most 2 rows of a panel (the last one of m = 6q + 1 or 6q + 2, such as
 * the 49 pixels of a 7x7 image): the full kernel would spend its 12 FMAs a k
 * on them; here 8 accumulators (two k in flight) do only the useful ones. */
static __attribute__((noinline)) void ukernel_m2(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                                                  int64_t m, int64_t n,
                       const upd *u)
{
    __m256 e00 = _mm256_setzero_ps(), e01 = _mm256_setzero_ps(), e10 = _mm256_setzero_ps();
    __m256 e11 = _mm256_setzero_ps(), o00 = _mm256_setzero_ps(), o01 = _mm256_setzero_ps();
    __m256 o10 = _mm256_setzero_ps(), o11 = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 2 <= k; p += 2) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 a0 = _mm256_broadcast_ss(a), a1 = _mm256_broadcast_ss(a + 1);
        e00 = _mm256_fmadd_ps(a0, b0, e00);
        e01 = _mm256_fmadd_ps(a0, b1, e01);
        e10 = _mm256_fmadd_ps(a1, b0, e10);
        e11 = _mm256_fmadd_ps(a1, b1, e11);
        b0 = _mm256_loadu_ps(b + KC_NR), b1 = _mm256_loadu_ps(b + KC_NR + 8);
        a0 = _mm256_broadcast_ss(a + KC_MR), a1 = _mm256_broadcast_ss(a + KC_MR + 1);
        o00 = _mm256_fmadd_ps(a0, b0, o00);
        o01 = _mm256_fmadd_ps(a0, b1, o01);
        o10 = _mm256_fmadd_ps(a1, b0, o10);
        o11 = _mm256_fmadd_ps(a1, b1, o11);
        a += 2 * KC_MR;
        b += 2 * KC_NR;
    }
    if (p < k) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 a0 = _mm256_broadcast_ss(a), a1 = _mm256_broadcast_ss(a + 1);
        e00 = _mm256_fmadd_ps(a0, b0, e00);
        e01 = _mm256_fmadd_ps(a0, b1, e01);
        e10 = _mm256_fmadd_ps(a1, b0, e10);
        e11 = _mm256_fmadd_ps(a1, b1, e11);
    }
    e00 = _mm256_add_ps(e00, o00), e01 = _mm256_add_ps(e01, o01);
    e10 = _mm256_add_ps(e10, o10), e11 = _mm256_add_ps(e11, o11);
    if (n == KC_NR) {
        upd_ymm2(c, e00, e01, 0, u);
        if (m > 1) upd_ymm2(c + ldc, e10, e11, 1, u);
    } else {
        _Alignas(32) float t[2 * KC_NR];
        _mm256_store_ps(t, e00);
        _mm256_store_ps(t + 8, e01);
        _mm256_store_ps(t + KC_NR, e10);
        _mm256_store_ps(t + KC_NR + 8, e11);
        update_tile(c, ldc, t, KC_NR, m, n, u);
    }
}

static void ukernel(int64_t k, const float *a, const float *b, int64_t bps, float *c, int64_t ldc, int64_t m,
                    int64_t n, const upd *u, const float *pf)
{
    (void)bps;
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 av;
        av = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(av, b0, c00);
        c01 = _mm256_fmadd_ps(av, b1, c01);
        av = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(av, b0, c10);
        c11 = _mm256_fmadd_ps(av, b1, c11);
        av = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(av, b0, c20);
        c21 = _mm256_fmadd_ps(av, b1, c21);
        av = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(av, b0, c30);
        c31 = _mm256_fmadd_ps(av, b1, c31);
        av = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(av, b0, c40);
        c41 = _mm256_fmadd_ps(av, b1, c41);
        av = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(av, b0, c50);
        c51 = _mm256_fmadd_ps(av, b1, c51);
        _mm_prefetch((const char *)pf, _MM_HINT_T0);
        a += KC_MR;
        b += KC_NR;
        pf += KC_NR;
    }
    if (n == KC_NR) { /* whole rows: in registers, m of them */
        upd_ymm2(c + 0 * ldc, c00, c01, 0, u);
        if (m > 1) upd_ymm2(c + 1 * ldc, c10, c11, 1, u);
        if (m > 2) upd_ymm2(c + 2 * ldc, c20, c21, 2, u);
        if (m > 3) upd_ymm2(c + 3 * ldc, c30, c31, 3, u);
        if (m > 4) upd_ymm2(c + 4 * ldc, c40, c41, 4, u);
        if (m > 5) upd_ymm2(c + 5 * ldc, c50, c51, 5, u);
    } else {
        _Alignas(32) float t[KC_MR * KC_NR];
        _mm256_store_ps(t + 0 * KC_NR, c00);
        _mm256_store_ps(t + 0 * KC_NR + 8, c01);
        _mm256_store_ps(t + 1 * KC_NR, c10);
        _mm256_store_ps(t + 1 * KC_NR + 8, c11);
        _mm256_store_ps(t + 2 * KC_NR, c20);
        _mm256_store_ps(t + 2 * KC_NR + 8, c21);
        _mm256_store_ps(t + 3 * KC_NR, c30);
        _mm256_store_ps(t + 3 * KC_NR + 8, c31);
        _mm256_store_ps(t + 4 * KC_NR, c40);
        _mm256_store_ps(t + 4 * KC_NR + 8, c41);
        _mm256_store_ps(t + 5 * KC_NR, c50);
        _mm256_store_ps(t + 5 * KC_NR + 8, c51);
        update_tile(c, ldc, t, KC_NR, m, n, u);
    }
}

#else

static void ukernel(int64_t k, const float *a, const float *b, int64_t bps, float *c, int64_t ldc, int64_t m,
                    int64_t n, const upd *u, const float *pf)
{
    (void)bps, (void)pf;
    float t[KC_MR * KC_NR];
    memset(t, 0, sizeof t);
    for (int64_t p = 0; p < k; p++) {
        for (int i = 0; i < KC_MR; i++) {
            float av = a[p * KC_MR + i];
            for (int j = 0; j < KC_NR; j++) t[i * KC_NR + j] += av * b[p * KC_NR + j];
        }
    }
    update_tile(c, ldc, t, KC_NR, m, n, u);
}

#endif

void kc_gemm_block(const kc_block *blk)
{
    const int64_t m = blk->m, n = blk->n, k = blk->k;
    for (int64_t q0 = 0; q0 < n; q0 += KC_NRB) {
        int64_t nn = min64(KC_NRB, n - q0);
        const float *bp;
        int64_t bps;
        if (blk->b) {
            bp = blk->b + (q0 / KC_NR) * blk->b_panel_stride;
            bps = blk->b_panel_stride;
        } else {
            blk->pack_b(blk->pack_ctx, q0 / KC_NR, cdiv(nn, KC_NR), k, blk->b_buf);
            bp = blk->b_buf;
            bps = k * KC_NR;
        }
        for (int64_t p0 = 0; p0 < m; p0 += KC_MR) {
            int64_t mm = min64(KC_MR, m - p0);
            upd u = {blk->alpha, blk->first, NULL, NULL, NULL, blk->ldr, KC_ACT_NONE, blk->act_alpha, blk->act_beta};
            if (blk->last && act_in_update(blk->act)) u.act = blk->act;
            if (blk->first) {
                if (blk->bias && blk->bias_per_row) u.bias_row = blk->bias + p0;
                if (blk->bias && !blk->bias_per_row) u.bias_col = blk->bias + q0;
                if (blk->res) u.res = blk->res + p0 * blk->ldr + q0;
            }
            float *c = blk->c + p0 * blk->ldc + q0;
            /* while the first A panel runs, fetch the next packed B panels */
            const float *pf = bp;
            if (p0 == 0 && blk->b && q0 + KC_NRB < n) pf = bp + (KC_NRB / KC_NR) * bps;
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
            if (mm <= 2)
                ukernel_m2(k, blk->a + (p0 / KC_MR) * blk->a_panel_stride, bp, c, blk->ldc, mm, nn, &u);
            else
#endif
                ukernel(k, blk->a + (p0 / KC_MR) * blk->a_panel_stride, bp, bps, c, blk->ldc, mm, nn, &u, pf);
            if (blk->last && blk->act != KC_ACT_NONE && !act_in_update(blk->act))
                for (int64_t i = 0; i < mm; i++)
                    kc_act_inplace(blk->act, c + i * blk->ldc, nn, blk->act_alpha, blk->act_beta);
        }
    }
}

/* ---- packing ------------------------------------------------------------ */

/* Rows [i0, i0 + m) x columns [k0, k0 + k) of op(A) into KC_MR-row panels. */
static void pack_a(const float *A, int64_t lda, int trans_a, int64_t i0, int64_t m, int64_t k0, int64_t k,
                   float *out)
{
    for (int64_t p = 0; p < m; p += KC_MR) {
        int64_t rows = min64(KC_MR, m - p);
        float *o = out + (p / KC_MR) * KC_MR * k;
        if (trans_a) {
            for (int64_t kk = 0; kk < k; kk++) {
                const float *s = A + (k0 + kk) * lda + i0 + p;
                int64_t r = 0;
                for (; r < rows; r++) o[kk * KC_MR + r] = s[r];
                for (; r < KC_MR; r++) o[kk * KC_MR + r] = 0.0f;
            }
        } else if (rows == KC_MR) {
            const float *s0 = A + (i0 + p) * lda + k0, *s1 = s0 + lda, *s2 = s1 + lda;
            const float *s3 = s2 + lda, *s4 = s3 + lda, *s5 = s4 + lda;
            for (int64_t kk = 0; kk < k; kk++) {
                o[0] = s0[kk];
                o[1] = s1[kk];
                o[2] = s2[kk];
                o[3] = s3[kk];
                o[4] = s4[kk];
                o[5] = s5[kk];
                o += KC_MR;
            }
        } else {
            for (int64_t kk = 0; kk < k; kk++) {
                int64_t r = 0;
                for (; r < rows; r++) o[kk * KC_MR + r] = A[(i0 + p + r) * lda + k0 + kk];
                for (; r < KC_MR; r++) o[kk * KC_MR + r] = 0.0f;
            }
        }
    }
}

/* Rows [k0, k0 + k) x columns [n0 + q0*KC_NR, + nq*KC_NR) of op(B), columns
 * at or past n_end zero, into nq KC_NR-column panels of k rows. */
static void pack_b_panels(const float *B, int64_t ldb, int trans_b, int64_t k0, int64_t k, int64_t n0,
                          int64_t n_end, int64_t q0, int64_t nq, float *out)
{
    for (int64_t q = 0; q < nq; q++) {
        int64_t j0 = n0 + (q0 + q) * KC_NR;
        int64_t cols = min64(KC_NR, n_end - j0);
        float *o = out + q * k * KC_NR;
        if (!trans_b) {
            const float *s = B + k0 * ldb + j0;
            if (cols == KC_NR) {
                for (int64_t kk = 0; kk < k; kk++) memcpy(o + kk * KC_NR, s + kk * ldb, KC_NR * sizeof(float));
            } else {
                for (int64_t kk = 0; kk < k; kk++) {
                    int64_t c = 0;
                    for (; c < cols; c++) o[kk * KC_NR + c] = s[kk * ldb + c];
                    for (; c < KC_NR; c++) o[kk * KC_NR + c] = 0.0f;
                }
            }
        } else {
            /* B is stored N x K: each column of op(B) is a contiguous row;
             * 16 rows are read in step, 8 k at a time, so every cache line
             * read is used whole. */
            int64_t kk = 0;
            if (cols == KC_NR) {
                const float *s = B + j0 * ldb + k0;
                for (; kk + 8 <= k; kk += 8)
                    for (int64_t c = 0; c < KC_NR; c++)
                        for (int64_t e = 0; e < 8; e++) o[(kk + e) * KC_NR + c] = s[c * ldb + kk + e];
            }
            for (; kk < k; kk++) {
                int64_t c = 0;
                for (; c < cols; c++) o[kk * KC_NR + c] = B[(j0 + c) * ldb + k0 + kk];
                for (; c < KC_NR; c++) o[kk * KC_NR + c] = 0.0f;
            }
        }
    }
}

size_t kc_gemm_packed_b_bytes(int64_t K, int64_t N)
{
    return (size_t)(round_up(N, KC_NR) * K) * sizeof(float);
}

/* Whole-K panels: panel q at out + q * K * KC_NR, so a k-block [k0, +kc) of
 * it is the contiguous run at k0 * KC_NR with panel stride K * KC_NR. */
void kc_gemm_pack_b(const float *B, int64_t ldb, int trans_b, int64_t K, int64_t N, float *out)
{
    pack_b_panels(B, ldb, trans_b, 0, K, 0, N, 0, cdiv(N, KC_NR), out);
}

/* ---- rTasks --------------------------------------------------------------- */

/* Tile sizes as used: whole micro-tiles (and B_packed panels stay aligned). */
static int64_t tile_m(const kc_gemm *g) { return round_up(g->mb > 0 ? g->mb : g->M, KC_MR); }
static int64_t tile_n(const kc_gemm *g) { return round_up(g->nb > 0 ? g->nb : g->N, KC_NR); }

/* k-blocks of equal size, at most KC_KC. */
static int64_t k_block(int64_t K)
{
    if (K <= 0) return 0;
    return cdiv(K, cdiv(K, KC_KC));
}

int64_t kc_gemm_rtasks(const kc_gemm *g)
{
    if (g->M <= 0 || g->N <= 0 || g->batch <= 0) return 0;
    return g->batch * cdiv(g->M, tile_m(g)) * cdiv(g->N, tile_n(g));
}

size_t kc_gemm_scratch_bytes(const kc_gemm *g)
{
    int64_t kc = k_block(g->K);
    size_t a = (size_t)(tile_m(g) * kc) * sizeof(float);
    size_t b = g->B_packed ? 0 : (size_t)(KC_NRB * kc) * sizeof(float);
    return round_up((int64_t)a, 64) + b + 64;
}

typedef struct gemm_b_ctx {
    const float *B;
    int64_t ldb;
    int trans_b;
    int64_t k0, n0, n_end;
} gemm_b_ctx;

static void gemm_pack_b(const void *ctx, int64_t q0, int64_t nq, int64_t k, float *out)
{
    const gemm_b_ctx *x = ctx;
    pack_b_panels(x->B, x->ldb, x->trans_b, x->k0, k, x->n0, x->n_end, q0, nq, out);
}

void kc_gemm_rtask(const kc_gemm *g, int64_t t, void *scratch)
{
    int64_t mb = tile_m(g), nb = tile_n(g);
    int64_t tm = cdiv(g->M, mb), tn = cdiv(g->N, nb);
    int64_t b = t / (tm * tn), im = t / tn % tm, in = t % tn;
    int64_t m0 = im * mb, n0 = in * nb;
    int64_t m = min64(mb, g->M - m0), n = min64(nb, g->N - n0);
    const float *A = g->A + b * g->a_batch_stride;
    const float *B = g->B ? g->B + b * g->b_batch_stride : NULL;
    float *C = g->C + b * g->c_batch_stride + m0 * g->ldc + n0;
    int64_t kc = k_block(g->K);

    float *a_buf = scratch;
    float *b_buf = (float *)((char *)scratch + round_up((int64_t)(mb * kc * sizeof(float)), 64));

    const kc_epilogue *ep = &g->ep;
    kc_block blk = {0};
    blk.m = m;
    blk.n = n;
    blk.a = a_buf;
    blk.c = C;
    blk.ldc = g->ldc;
    blk.alpha = g->alpha;
    blk.bias = ep->bias ? ep->bias + (ep->bias_per_row ? m0 : n0) : NULL;
    blk.bias_per_row = ep->bias_per_row;
    blk.res = ep->residual ? ep->residual + b * ep->r_batch_stride + m0 * ep->ldr + n0 : NULL;
    blk.ldr = ep->ldr;
    blk.act = ep->act;
    blk.act_alpha = ep->alpha;
    blk.act_beta = ep->beta;
    blk.b_buf = b_buf;
    blk.pack_b = gemm_pack_b;
    gemm_b_ctx bctx = {B, g->ldb, g->trans_b, 0, n0, g->N};
    blk.pack_ctx = &bctx;

    int64_t k0 = 0;
    do { /* at least once: K == 0 still writes the epilogue */
        int64_t k = min64(kc, g->K - k0);
        blk.k = k;
        blk.a_panel_stride = KC_MR * k;
        blk.first = k0 == 0;
        blk.last = k0 + k >= g->K;
        if (k > 0) pack_a(A, g->lda, g->trans_a, m0, m, k0, k, a_buf);
        if (g->B_packed) {
            blk.b = g->B_packed + (n0 / KC_NR) * g->K * KC_NR + k0 * KC_NR;
            blk.b_panel_stride = g->K * KC_NR;
        } else {
            bctx.k0 = k0;
        }
        kc_gemm_block(&blk);
        k0 += k;
    } while (k0 < g->K);
}

/* Big tiles amortise packing (A over nb columns, B over mb rows); split them
 * (N first, down to 64 columns, then M down to 24 rows) until there are
 * about 4 rTasks per thread, then even them out. */
void kc_gemm_default_tiles(int64_t batch, int64_t M, int64_t N, int64_t K, int n_threads, int64_t *mb,
                           int64_t *nb)
{
    (void)K;
    int64_t want = 4 * (int64_t)(n_threads > 0 ? n_threads : 1);
    int64_t m = min64(round_up(M > 0 ? M : 1, KC_MR), 96);
    int64_t n = min64(round_up(N > 0 ? N : 1, KC_NR), 512);
    if (batch < 1) batch = 1;
    while (batch * cdiv(M, m) * cdiv(N, n) < want) {
        if (n > 64)
            n = round_up(n / 2, KC_NR);
        else if (m > 24)
            m = round_up(m / 2, KC_MR);
        else
            break;
    }
    *mb = round_up(cdiv(M, cdiv(M, m)), KC_MR);
    *nb = round_up(cdiv(N, cdiv(N, n)), KC_NR);
}
