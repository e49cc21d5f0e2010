/*
 * kc_conv.c: NCHW 2-D convolution for the `c` target, one rTask (a block of
 * kb output channels x pb output pixels of one image and group) at a time.
 *
 * General case: implicit GEMM. Per group, Y[Kg x OH*OW] = W[Kg x Cg*R*S]
 * X'[Cg*R*S x OH*OW], where X' (the im2col matrix) is never built: the GEMM
 * macro-kernel (kc_gemm_block) asks for B panels of 16 pixels x one k-block
 * just before it uses them, and they are gathered from x here. Weights are
 * the A operand, packed once into KC_MR-row panels by kc_conv2d_pack_w.
 * Gathering works on "segments": the run of a panel's pixels that share one
 * output row, so each (channel, tap) row of a panel is one or two copies
 * with the padding cut off at the ends, not a per-pixel bounds check.
 * 1x1 stride-1 unpadded convs copy x rows straight into the panels.
 *
 * Depthwise (group == C == K): a direct kernel. The rows an rTask needs are
 * staged zero-padded and split into stride phases, after which every tap is
 * a contiguous shifted run and the whole block of output rows is a single
 * vectorizable loop (all taps fused for 3x3 and 5x5, stride 1 and 2).
 *
 * Epilogue: y = act(acc + bias[channel] + residual), residual shaped like y.
 */
#include <string.h>

#include "kc.h"
#include "kc_math.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }
/* floor(a / b) for b > 0 and any sign of a. */
static int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static int is_depthwise(const kc_conv2d *p) { return p->group == p->C && p->group == p->K; }
static int64_t k_per_group(const kc_conv2d *p) { return p->K / p->group; }
static int64_t crs(const kc_conv2d *p) { return p->C / p->group * p->R * p->S; }
static int64_t tile_k(const kc_conv2d *p)
{
    if (is_depthwise(p)) return 1;
    return round_up(p->kb > 0 ? p->kb : k_per_group(p), KC_MR);
}
static int64_t tile_p(const kc_conv2d *p)
{
    int64_t pix = p->OH * p->OW;
    if (is_depthwise(p)) return p->pb > 0 ? p->pb : pix;
    return round_up(p->pb > 0 ? p->pb : pix, KC_NR);
}
static int64_t k_block(int64_t K) { return K <= 0 ? 0 : cdiv(K, cdiv(K, KC_KC)); }
static int is_pointwise(const kc_conv2d *p)
{
    return p->R == 1 && p->S == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_t == 0 && p->pad_l == 0 &&
           p->OH == p->H && p->OW == p->W;
}

static size_t dw_scratch_floats(const kc_conv2d *p);
static void dw_rtask(const kc_conv2d *p, int64_t n, int64_t ch, int64_t p0, int64_t np, void *scratch);

/* ---- weights ---------------------------------------------------------------- */

size_t kc_conv2d_packed_w_bytes(const kc_conv2d *p)
{
    if (is_depthwise(p)) return (size_t)(p->C * p->R * p->S) * sizeof(float);
    return (size_t)(p->group * round_up(k_per_group(p), KC_MR) * crs(p)) * sizeof(float);
}

/* Per group: ceil(Kg / KC_MR) panels of crs x KC_MR (the A layout of kc.h),
 * rows past Kg zero. Depthwise: w as it is, [C][R][S]. */
void kc_conv2d_pack_w(const kc_conv2d *p, const float *w, float *out)
{
    if (is_depthwise(p)) {
        memcpy(out, w, kc_conv2d_packed_w_bytes(p));
        return;
    }
    int64_t kg = k_per_group(p), n = crs(p), panels = cdiv(kg, KC_MR);
    for (int64_t g = 0; g < p->group; g++)
        for (int64_t q = 0; q < panels; q++) {
            float *o = out + (g * panels + q) * KC_MR * n;
            for (int64_t kk = 0; kk < n; kk++)
                for (int64_t r = 0; r < KC_MR; r++) {
                    int64_t row = q * KC_MR + r;
                    o[kk * KC_MR + r] = row < kg ? w[(g * kg + row) * n + kk] : 0.0f;
                }
        }
}

/* ---- rTasks --------------------------------------------------------------- */

int64_t kc_conv2d_rtasks(const kc_conv2d *p)
{
    if (p->N <= 0 || p->K <= 0 || p->OH <= 0 || p->OW <= 0) return 0;
    return p->N * p->group * cdiv(k_per_group(p), tile_k(p)) * cdiv(p->OH * p->OW, tile_p(p));
}

/* One output-row run of a B panel: pixels [j0, j0 + len) of the panel are
 * output row oh, columns ow0...; ih0 / iw0 are their first input row and
 * column before the tap offsets. */
typedef struct seg {
    int32_t j0, len;
    int64_t ih0, iw0;
} seg;

static int64_t max_segs(int64_t pb, int64_t OW) { return cdiv(pb, KC_NR) * (cdiv(KC_NR, OW) + 2); }

size_t kc_conv2d_scratch_bytes(const kc_conv2d *p)
{
    if (is_depthwise(p)) return dw_scratch_floats(p) * sizeof(float) + 64;
    size_t b = (size_t)(4 * KC_NR * k_block(crs(p))) * sizeof(float);
    size_t s = (size_t)(max_segs(tile_p(p), p->OW) + cdiv(tile_p(p), KC_NR) + 1) * sizeof(seg);
    return b + s + 128;
}

typedef struct patch_ctx {
    const kc_conv2d *p;
    const float *x;        /* this image and group */
    int64_t k0;            /* first row of the k-block in Cg*R*S */
    int64_t p0, np;        /* the tile's pixels */
    const seg *segs;       /* segments, panel by panel */
    const int32_t *seg_at; /* panel q's segments: [seg_at[q], seg_at[q + 1]) */
} patch_ctx;

static void copy_run(float *dst, const float *src, int64_t len)
{
    if (len == KC_NR)
        memcpy(dst, src, KC_NR * sizeof(float));
    else
        for (int64_t j = 0; j < len; j++) dst[j] = src[j];
}

/* 1x1, stride 1, no padding: row c of B is x's channel c. */
static void pack_pointwise(const void *ctx, int64_t q0, int64_t nq, int64_t k, float *out)
{
    const patch_ctx *x = ctx;
    int64_t hw = x->p->H * x->p->W;
    for (int64_t q = 0; q < nq; q++) {
        int64_t j0 = (q0 + q) * KC_NR, cols = min64(KC_NR, x->np - j0);
        float *o = out + q * k * KC_NR;
        const float *s = x->x + x->k0 * hw + x->p0 + j0;
        for (int64_t kk = 0; kk < k; kk++) {
            copy_run(o + kk * KC_NR, s + kk * hw, cols);
            for (int64_t j = cols; j < KC_NR; j++) o[kk * KC_NR + j] = 0.0f;
        }
    }
}

static void pack_patches(const void *ctx, int64_t q0, int64_t nq, int64_t k, float *out)
{
    const patch_ctx *x = ctx;
    const kc_conv2d *p = x->p;
    const int64_t H = p->H, W = p->W, R = p->R, S = p->S, sw = p->stride_w;
    const int64_t dh = p->dil_h, dw = p->dil_w;
    for (int64_t q = 0; q < nq; q++) {
        float *o = out + q * k * KC_NR;
        const seg *s0 = x->segs + x->seg_at[q0 + q], *s1 = x->segs + x->seg_at[q0 + q + 1];
        int64_t valid = min64(KC_NR, x->np - (q0 + q) * KC_NR);
        int64_t c = x->k0 / (R * S), r = x->k0 / S % R, s = x->k0 % S;
        for (int64_t kk = 0; kk < k; kk++) {
            float *row = o + kk * KC_NR;
            const float *xc = x->x + c * H * W;
            for (const seg *g = s0; g < s1; g++) {
                float *dst = row + g->j0;
                int64_t len = g->len, ih = g->ih0 + r * dh;
                if (ih < 0 || ih >= H) {
                    memset(dst, 0, (size_t)len * sizeof(float));
                    continue;
                }
                const float *src = xc + ih * W;
                int64_t iw0 = g->iw0 + s * dw;
                /* taps j in [lo, hi) fall inside the row (no division for
                 * stride 1: it would dominate the gathering) */
                int64_t lo, hi;
                if (sw == 1) {
                    lo = min64(len, max64(0, -iw0));
                    hi = max64(lo, min64(len, W - iw0));
                } else {
                    lo = min64(len, max64(0, cdiv(-iw0, sw)));
                    hi = max64(lo, min64(len, fdiv(W - 1 - iw0, sw) + 1));
                }
                int64_t j = 0;
                for (; j < lo; j++) dst[j] = 0.0f;
                if (sw == 1) {
                    if (lo == 0 && hi == len)
                        copy_run(dst, src + iw0, len);
                    else
                        for (j = lo; j < hi; j++) dst[j] = src[iw0 + j];
                } else {
                    for (j = lo; j < hi; j++) dst[j] = src[iw0 + j * sw];
                }
                for (j = hi; j < len; j++) dst[j] = 0.0f;
            }
            for (int64_t j = valid; j < KC_NR; j++) row[j] = 0.0f;
            if (++s == S) {
                s = 0;
                if (++r == R) r = 0, c++;
            }
        }
    }
}

/* Split the tile's pixels [p0, p0 + np) into segments, panel by panel. */
static void build_segs(const kc_conv2d *p, int64_t p0, int64_t np, seg *segs, int32_t *seg_at)
{
    int32_t n = 0;
    int64_t panels = cdiv(np, KC_NR);
    for (int64_t q = 0; q < panels; q++) {
        seg_at[q] = n;
        int64_t j = 0, end = min64(KC_NR, np - q * KC_NR);
        while (j < end) {
            int64_t pix = p0 + q * KC_NR + j, oh = pix / p->OW, ow = pix % p->OW;
            int64_t len = min64(end - j, p->OW - ow);
            segs[n].j0 = (int32_t)j;
            segs[n].len = (int32_t)len;
            segs[n].ih0 = oh * p->stride_h - p->pad_t;
            segs[n].iw0 = ow * p->stride_w - p->pad_l;
            n++;
            j += len;
        }
    }
    seg_at[panels] = n;
}

void kc_conv2d_rtask(const kc_conv2d *p, int64_t t, void *scratch)
{
    const int64_t kg = k_per_group(p), kb = tile_k(p), pb = tile_p(p), pix = p->OH * p->OW;
    const int64_t tk = cdiv(kg, kb), tp = cdiv(pix, pb);
    const int64_t ip = t % tp, ik = t / tp % tk, g = t / (tp * tk) % p->group, n = t / (tp * tk * p->group);
    const int64_t p0 = ip * pb, np = min64(pb, pix - p0);
    if (is_depthwise(p)) {
        dw_rtask(p, n, g, p0, np, scratch);
        return;
    }
    const int64_t k_lo = ik * kb, m = min64(kb, kg - k_lo), K = crs(p), kc = k_block(K);
    const int64_t cg = p->C / p->group;
    const int64_t y_off = (n * p->K + g * kg + k_lo) * pix + p0;

    float *b_buf = scratch;
    seg *segs = (seg *)((char *)scratch + round_up((int64_t)(4 * KC_NR * kc * sizeof(float)), 64));
    int32_t *seg_at = (int32_t *)(segs + max_segs(pb, p->OW));

    patch_ctx ctx = {p, p->x + (n * p->C + g * cg) * p->H * p->W, 0, p0, np, segs, seg_at};
    int pointwise = is_pointwise(p);
    if (!pointwise) build_segs(p, p0, np, segs, seg_at);

    const float *a = p->w_packed + (g * cdiv(kg, KC_MR) + k_lo / KC_MR) * KC_MR * K;
    kc_block blk = {0};
    blk.m = m;
    blk.n = np;
    blk.a_panel_stride = KC_MR * K;
    blk.pack_b = pointwise ? pack_pointwise : pack_patches;
    blk.pack_ctx = &ctx;
    blk.b_buf = b_buf;
    blk.c = p->y + y_off;
    blk.ldc = pix;
    blk.alpha = 1.0f;
    blk.bias = p->ep.bias ? p->ep.bias + g * kg + k_lo : NULL;
    blk.bias_per_row = 1;
    blk.res = p->ep.residual ? p->ep.residual + y_off : NULL;
    blk.ldr = pix;
    blk.act = p->ep.act;
    blk.act_alpha = p->ep.alpha;
    blk.act_beta = p->ep.beta;
    int64_t k0 = 0;
    do {
        int64_t k = min64(kc, K - k0);
        blk.k = k;
        blk.a = a + k0 * KC_MR;
        blk.first = k0 == 0;
        blk.last = k0 + k >= K;
        ctx.k0 = k0;
        kc_gemm_block(&blk);
        k0 += k;
    } while (k0 < K);
}

/* ---- depthwise ---------------------------------------------------------------- */

/* An rTask stages the input rows its output rows need, zero-padded and split
 * into stride phases: padded row rho, column kappa goes to phase plane
 * (rho % sh, kappa % sw) at [rho / sh][kappa / sw], planes hq x wq. Then
 * output (oh, ow) tap (r, s) reads phase (r dh % sh, s dw % sw) at
 * v + (r dh / sh) wq + s dw / sw with v = oh wq + ow: every tap is a
 * contiguous run, so the whole block of output rows is one vectorizable
 * loop over v (columns ow >= OW are computed and dropped). */
typedef struct dw_geom {
    int64_t n_oh, hq, wq, plane;
} dw_geom;

static dw_geom dw_geometry(const kc_conv2d *p, int64_t n_oh)
{
    dw_geom g;
    g.n_oh = n_oh;
    g.wq = cdiv((p->OW - 1) * p->stride_w + (p->S - 1) * p->dil_w + 1, p->stride_w) + 1;
    g.hq = n_oh + cdiv((p->R - 1) * p->dil_h, p->stride_h) + 1;
    g.plane = g.hq * g.wq;
    return g;
}

static size_t dw_scratch_floats(const kc_conv2d *p)
{
    dw_geom g = dw_geometry(p, p->OH);
    return (size_t)(p->stride_h * p->stride_w * g.plane + g.n_oh * g.wq);
}

static void dw_stage(const kc_conv2d *p, const float *x, int64_t oh0, const dw_geom *g, float *planes)
{
    const int64_t sh = p->stride_h, sw = p->stride_w, W = p->W, pl = p->pad_l, wq = g->wq;
    for (int64_t ph = 0; ph < sw; ph++) {
        /* input columns iw = iw0 + j sw land in this column phase at i0 + j */
        int64_t iw0 = ((ph - pl) % sw + sw) % sw, i0 = min64((iw0 + pl) / sw, wq);
        int64_t n = max64(0, min64(cdiv(W - iw0, sw), wq - i0));
        for (int64_t q = 0; q < g->hq; q++)
            for (int64_t rph = 0; rph < sh; rph++) {
                int64_t ih = (oh0 + q) * sh - p->pad_t + rph;
                float *row = planes + (rph * sw + ph) * g->plane + q * wq;
                if (ih < 0 || ih >= p->H) {
                    memset(row, 0, (size_t)wq * sizeof(float));
                    continue;
                }
                const float *src = x + ih * W + iw0;
                float *dst = row + i0;
                for (int64_t j = 0; j < i0; j++) row[j] = 0.0f;
                if (sw == 1)
                    memcpy(dst, src, (size_t)n * sizeof(float));
                else if (sw == 2) /* constant stride: vectorized de-interleave */
                    for (int64_t j = 0; j < n; j++) dst[j] = src[2 * j];
                else
                    for (int64_t j = 0; j < n; j++) dst[j] = src[j * sw];
                for (int64_t j = i0 + n; j < wq; j++) row[j] = 0.0f;
            }
    }
}

/* All taps in one pass, for constant shapes (dilation 1). */
static inline __attribute__((always_inline)) void dw_fused(const int R, const int S, const int SH, const int SW,
                                                           float *restrict out, const float *planes,
                                                           const dw_geom *g, const float *w, float bias,
                                                           int64_t v0, int64_t v1)
{
    const float *base[5][2];
    for (int r = 0; r < R; r++)
        for (int ph = 0; ph < SW && ph < S; ph++)
            base[r][ph] = planes + ((r % SH) * SW + ph) * g->plane + (r / SH) * g->wq;
    float wt[25];
    for (int i = 0; i < R * S; i++) wt[i] = w[i];
    for (int64_t v = v0; v < v1; v++) {
        float acc = bias;
#pragma GCC unroll 5
        for (int r = 0; r < R; r++)
#pragma GCC unroll 5
            for (int s = 0; s < S; s++) acc = kc_fmaf(wt[r * S + s], base[r][s % SW][v + s / SW], acc);
        out[v - v0] = acc;
    }
}

/* Any shape: one pass per tap. */
static void dw_taps(const kc_conv2d *p, float *out, const float *planes, const dw_geom *g, const float *w,
                    float bias)
{
    const int64_t n = g->n_oh * g->wq, sh = p->stride_h, sw = p->stride_w;
    for (int64_t v = 0; v < n; v++) out[v] = bias;
    for (int64_t r = 0; r < p->R; r++)
        for (int64_t s = 0; s < p->S; s++) {
            int64_t rr = r * p->dil_h, ss = s * p->dil_w;
            const float *src = planes + ((rr % sh) * sw + ss % sw) * g->plane + (rr / sh) * g->wq + ss / sw;
            float wv = w[r * p->S + s];
            for (int64_t v = 0; v < n; v++) out[v] = kc_fmaf(wv, src[v], out[v]);
        }
}

/* out[v - v0] for v in [v0, v1) with the fused kernel if one fits; 0 if
 * none does. */
static int dw_fused_any(const kc_conv2d *p, float *out, const float *planes, const dw_geom *g, const float *w,
                        float bias, int64_t v0, int64_t v1)
{
    if (p->dil_h != 1 || p->dil_w != 1 || p->R != p->S || p->stride_h != p->stride_w) return 0;
    int64_t key = p->R * 10 + p->stride_h;
    switch (key) {
    case 31: dw_fused(3, 3, 1, 1, out, planes, g, w, bias, v0, v1); return 1;
    case 32: dw_fused(3, 3, 2, 2, out, planes, g, w, bias, v0, v1); return 1;
    case 51: dw_fused(5, 5, 1, 1, out, planes, g, w, bias, v0, v1); return 1;
    case 52: dw_fused(5, 5, 2, 2, out, planes, g, w, bias, v0, v1); return 1;
    default: return 0;
    }
}

static void dw_rtask(const kc_conv2d *p, int64_t n, int64_t ch, int64_t p0, int64_t np, void *scratch)
{
    const int64_t OW = p->OW, pix = p->OH * OW, R = p->R, S = p->S;
    const int64_t oh0 = p0 / OW, oh1 = (p0 + np - 1) / OW;
    const dw_geom g = dw_geometry(p, oh1 - oh0 + 1);
    float *planes = scratch, *out = planes + p->stride_h * p->stride_w * g.plane;
    const float *w = p->w_packed + ch * R * S;
    float bias = p->ep.bias ? p->ep.bias[ch] : 0.0f;
    float *y = p->y + (n * p->K + ch) * pix;
    const float *res = p->ep.residual ? p->ep.residual + (n * p->K + ch) * pix : NULL;

    dw_stage(p, p->x + (n * p->C + ch) * p->H * p->W, oh0, &g, planes);
    /* Wide rows: each output row straight into y. Narrow ones (14x14,
     * 7x7): the whole block as one run into `out`, then copied. */
    int direct = OW >= 32 && dw_fused_any(p, NULL, planes, &g, w, bias, 0, 0);
    if (!direct && !dw_fused_any(p, out, planes, &g, w, bias, 0, g.n_oh * g.wq)) dw_taps(p, out, planes, &g, w, bias);
    for (int64_t pix0 = p0; pix0 < p0 + np;) {
        int64_t oh = pix0 / OW, a = pix0 % OW, b = min64(OW, a + (p0 + np - pix0));
        float *yr = y + oh * OW;
        int64_t v = (oh - oh0) * g.wq;
        if (direct) {
            dw_fused_any(p, yr + a, planes, &g, w, bias, v + a, v + b);
            if (res)
                for (int64_t ow = a; ow < b; ow++) yr[ow] += res[oh * OW + ow];
        } else if (res) {
            for (int64_t ow = a; ow < b; ow++) yr[ow] = out[v + ow] + res[oh * OW + ow];
        } else {
            memcpy(yr + a, out + v + a, (size_t)(b - a) * sizeof(float));
        }
        kc_act_inplace(p->ep.act, yr + a, b - a, p->ep.alpha, p->ep.beta);
        pix0 += b - a;
    }
}

/* kb: all of a group's output channels up to 132 (22 micro-tile rows), so
 * that each gathered patch panel feeds many FMAs; pb: 256 pixels. Both are
 * split (pixels first, down to 64) until there are about 4 rTasks per
 * thread, then evened out. Depthwise: whole planes unless there are too few
 * planes. */
void kc_conv2d_default_tiles(kc_conv2d *p, int n_threads)
{
    int64_t want = 4 * (int64_t)(n_threads > 0 ? n_threads : 1), pix = p->OH * p->OW;
    if (is_depthwise(p)) {
        int64_t planes = p->N * p->C, pb = pix;
        while (planes * cdiv(pix, pb) < want && pb > 2 * p->OW) pb = cdiv(pb, 2);
        p->kb = 1;
        p->pb = pb;
        return;
    }
    int64_t kg = k_per_group(p), jobs = p->N * p->group;
    int64_t kb = min64(round_up(kg, KC_MR), 132), pb = min64(round_up(pix, KC_NR), 256);
    while (jobs * cdiv(kg, kb) * cdiv(pix, pb) < want) {
        if (pb > 64)
            pb = round_up(pb / 2, KC_NR);
        else if (kb > 24)
            kb = round_up(kb / 2, KC_MR);
        else
            break;
    }
    p->kb = round_up(cdiv(kg, cdiv(kg, kb)), KC_MR);
    p->pb = round_up(cdiv(pix, cdiv(pix, pb)), KC_NR);
}
