/*
 * kc_pool.c: NCHW max and average pooling for the `c` target; rTask t
 * covers planes [t*cb, min(N*C, (t+1)*cb)).
 *
 * Each output row is accumulated tap by tap over the range of output
 * columns for which that tap lies inside the input row (computed, not
 * tested per element), so the inner loops are plain vectorizable max / add
 * loops. Average pooling without count_include_pad divides by the number of
 * taps inside the image; with it, by R*S (the pads are taken to cover every
 * window, which holds unless ceil_mode pushed a window past them).
 */
#include <math.h>

#include "kc.h"
#include "kc_math.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int64_t kc_pool2d_rtasks(const kc_pool2d *p)
{
    int64_t cb = p->cb > 0 ? p->cb : 1;
    return p->N * p->C > 0 ? cdiv(p->N * p->C, cb) : 0;
}

enum { CHUNK = 256 }; /* output columns per pass: accumulators on the stack */

/* acc[j] = max(acc[j], x[j * stride]); inlined with a constant stride, the
 * loop vectorizes (stride 2 as a de-interleave). */
static inline __attribute__((always_inline)) void max_run(float *acc, const float *x, int64_t n, int64_t stride)
{
    for (int64_t j = 0; j < n; j++) {
        float v = x[j * stride];
        acc[j] = kc_sel(v > acc[j], v, acc[j]);
    }
}

/* Max pooling, separably: the window's rows are first reduced to one
 * (contiguous, vectorizing loops), then each tap of it is one strided pass;
 * 0 if the chunk's input columns do not fit the buffer. */
enum { SPAN = 4096 };
static int max_row_separable(const kc_pool2d *p, const float *x, float *out, int64_t oh)
{
    const int64_t W = p->W, sw = p->stride_w, dw = p->dil_w;
    for (int64_t c0 = 0; c0 < p->OW; c0 += CHUNK) {
        const int64_t c1 = min64(p->OW, c0 + CHUNK), n = c1 - c0;
        /* input columns [i0, i1) of the chunk's windows, clipped to the row */
        const int64_t i0 = max64(0, c0 * sw - p->pad_l), i1 = min64(W, (c1 - 1) * sw - p->pad_l + (p->S - 1) * dw + 1);
        if (i1 - i0 > SPAN) return 0;
        float m[SPAN], acc[CHUNK];
        for (int64_t j = 0; j < i1 - i0; j++) m[j] = -INFINITY;
        for (int64_t r = 0; r < p->R; r++) {
            int64_t ih = oh * p->stride_h - p->pad_t + r * p->dil_h;
            if (ih < 0 || ih >= p->H) continue;
            const float *xr = x + ih * W + i0;
            for (int64_t j = 0; j < i1 - i0; j++) m[j] = kc_sel(xr[j] > m[j], xr[j], m[j]);
        }
        for (int64_t j = 0; j < n; j++) acc[j] = -INFINITY;
        for (int64_t s = 0; s < p->S; s++) {
            /* columns ow with 0 <= ow*sw - pad_l + s*dw < W */
            int64_t off = s * dw - p->pad_l;
            int64_t lo = max64(c0, cdiv(-off > 0 ? -off : 0, sw));
            int64_t hi = min64(c1, fdiv(W - 1 - off, sw) + 1);
            if (hi <= lo) continue;
            const float *src = m + lo * sw + off - i0;
            if (sw == 1)
                max_run(acc + lo - c0, src, hi - lo, 1);
            else if (sw == 2)
                max_run(acc + lo - c0, src, hi - lo, 2);
            else
                max_run(acc + lo - c0, src, hi - lo, sw);
        }
        for (int64_t j = 0; j < n; j++) out[c0 + j] = acc[j];
    }
    return 1;
}

static void pool_row(const kc_pool2d *p, const float *x, float *out, int64_t oh)
{
    const int64_t W = p->W, sw = p->stride_w, dw = p->dil_w;
    const int is_max = p->kind == KC_POOL_MAX;
    if (is_max && max_row_separable(p, x, out, oh)) return;
    for (int64_t c0 = 0; c0 < p->OW; c0 += CHUNK) {
        const int64_t c1 = min64(p->OW, c0 + CHUNK), n = c1 - c0;
        float acc[CHUNK], cnt[CHUNK];
        for (int64_t j = 0; j < n; j++) {
            acc[j] = is_max ? -INFINITY : 0.0f;
            cnt[j] = 0.0f;
        }
        int64_t rows = 0;
        for (int64_t r = 0; r < p->R; r++) {
            int64_t ih = oh * p->stride_h - p->pad_t + r * p->dil_h;
            if (ih < 0 || ih >= p->H) continue;
            rows++;
            const float *xr = x + ih * W;
            for (int64_t s = 0; s < p->S; s++) {
                /* columns ow with 0 <= ow*sw - pad_l + s*dw < W */
                int64_t off = s * dw - p->pad_l;
                int64_t lo = max64(c0, cdiv(-off > 0 ? -off : 0, sw));
                int64_t hi = min64(c1, fdiv(W - 1 - off, sw) + 1);
                if (is_max) {
                    if (sw == 1)
                        max_run(acc + lo - c0, xr + lo + off, hi - lo, 1);
                    else if (sw == 2)
                        max_run(acc + lo - c0, xr + 2 * lo + off, hi - lo, 2);
                    else
                        max_run(acc + lo - c0, xr + lo * sw + off, hi - lo, sw);
                } else {
                    for (int64_t ow = lo; ow < hi; ow++) acc[ow - c0] += xr[ow * sw + off];
                    if (rows == 1)
                        for (int64_t ow = lo; ow < hi; ow++) cnt[ow - c0] += 1.0f;
                }
            }
        }
        if (is_max) {
            for (int64_t j = 0; j < n; j++) out[c0 + j] = acc[j];
        } else if (p->count_include_pad) {
            float inv = 1.0f / (float)(p->R * p->S);
            for (int64_t j = 0; j < n; j++) out[c0 + j] = acc[j] * inv;
        } else {
            /* taps inside = rows inside x columns inside */
            for (int64_t j = 0; j < n; j++) out[c0 + j] = acc[j] / ((float)rows * cnt[j]);
        }
    }
}

void kc_pool2d_rtask(const kc_pool2d *p, int64_t t)
{
    int64_t cb = p->cb > 0 ? p->cb : 1;
    int64_t end = min64(p->N * p->C, (t + 1) * cb);
    for (int64_t plane = t * cb; plane < end; plane++) {
        const float *x = p->x + plane * p->H * p->W;
        float *y = p->y + plane * p->OH * p->OW;
        for (int64_t oh = 0; oh < p->OH; oh++) pool_row(p, x, y + oh * p->OW, oh);
    }
}
