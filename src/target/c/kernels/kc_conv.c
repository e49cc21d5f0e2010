/*
 * kc_conv.c: NCHW 2-D convolution for the `c` target, one rTask (a block of
 * output channels x output pixels of one image and group) at a time.
 *
 * General case: implicit GEMM over k-blocks of whole input channels. The
 * input rows a tile needs are staged once per k-block, zero-padded and split
 * into stride phases (stage_geom): every (channel, tap) row of the im2col
 * matrix is then a plain shifted run of the staged rows, gathered without
 * bounds checks or divisions. Two orientations, chosen by shape alone (so
 * that the weight layout is fixed):
 *
 *   pixel mode:   Y[Kg x pix] = W X'; the weights are the A operand (KC_MR-row
 *                 panels, packed once); B panels of KC_NR pixels are built
 *                 from the staged rows just before use, one blend of shifted
 *                 loads per output row a panel spans. The tile's channels go
 *                 in chunks of KC_MC, all from one staging of the input.
 *   channel mode: Y^T[pix x Kg] = X'^T W^T for small images (7x7 ...), where
 *                 KC_NR-pixel panels would be mostly padding: the weights are
 *                 the B operand (KC_NR-channel panels), KC_MR-pixel A panels
 *                 are gathered, Y^T accumulates in scratch and is transposed
 *                 into y with the epilogue.
 *
 * Where no tap reads padding (1x1 stride 1 in pixel mode; any unpadded
 * conv in channel mode) the gathering reads x itself, without staging.
 *
 * Depthwise (group == C == K): direct kernels vectorised over 8 output
 * columns, all taps' weights in registers. With AVX2, 3x3 and 5x5 at stride
 * 1 or 2 read x directly (stride 2 de-interleaved by shuffles; rows outside
 * the image read a zero row, edge columns go through masked loads); other
 * shapes, and builds without AVX2, stage blocks of rows as above.
 *
 * rTasks: tiles of whole units (micro-tile rows / columns; depthwise one
 * channel x one output row), the units split as evenly as possible, sized
 * by kc_conv2d_default_tiles from an estimate of each tile's cost so that
 * the runtime's round-robin deal leaves the threads evenly loaded.
 *
 * Epilogue: y = act(acc + bias[channel] + residual), residual shaped like y.
 */
#include <string.h>

#include "kc.h"
#include "kc_math.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KC_CONV_AVX2 1
#else
#define KC_CONV_AVX2 0
#endif

/* Pixel mode: output channels per pass over a k-block (44 micro-tile rows:
 * their packed weights, 264 x KC_KC floats, stay in L2). */
enum { KC_MC = 264 };

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }
/* floor(a / b) and ceil(a / b) for b > 0 and any sign of a. */
static int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t cdivs(int64_t a, int64_t b) { return -fdiv(-a, b); }

static int is_depthwise(const kc_conv2d *p) { return p->group == p->C && p->group == p->K; }
static int64_t k_per_group(const kc_conv2d *p) { return p->K / p->group; }
static int64_t c_per_group(const kc_conv2d *p) { return p->C / p->group; }
static int64_t crs(const kc_conv2d *p) { return c_per_group(p) * p->R * p->S; }
static int is_pointwise(const kc_conv2d *p)
{
    return p->R == 1 && p->S == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_t == 0 && p->pad_l == 0 &&
           p->OH == p->H && p->OW == p->W;
}

/* Channel mode where pixel panels would waste much: small images with
 * enough output channels to fill KC_NR-wide panels. Shape only. */
static int is_cmode(const kc_conv2d *p)
{
    if (is_depthwise(p)) return 0;
    int64_t pix = p->OH * p->OW, kg = k_per_group(p);
    if (kg < KC_NR) return 0;
    /* useful fraction of the FMAs in each orientation */
    double ep = (double)pix / (double)round_up(pix, KC_NR) * (double)kg / (double)round_up(kg, KC_MR);
    double ec = (double)pix / (double)round_up(pix, KC_MR) * (double)kg / (double)round_up(kg, KC_NR);
    return pix <= 256 && ec > ep * 1.08;
}

/* ---- 8-float vectors and exact copies ------------------------------------------ */

#if KC_CONV_AVX2
typedef __m256 v8;
static inline v8 v8_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v8_store(float *p, v8 v) { _mm256_storeu_ps(p, v); }
static inline v8 v8_set1(float x) { return _mm256_set1_ps(x); }
static inline v8 v8_fma(v8 a, v8 b, v8 c) { return _mm256_fmadd_ps(a, b, c); }
static inline v8 v8_add(v8 a, v8 b) { return _mm256_add_ps(a, b); }
static inline __m256i tail_mask(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* The first n < 8 lanes; nothing else is read or written. Masked loads are
 * cheap; masked stores are not on AMD cores, so stores go in pieces. */
static inline v8 v8_load_n(const float *p, int64_t n) { return _mm256_maskload_ps(p, tail_mask(n)); }
static inline void v8_store_n(float *p, v8 v, int64_t n)
{
    __m128 x = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(p, x);
        x = _mm256_extractf128_ps(v, 1);
        p += 4;
    }
    if (n & 2) {
        _mm_storel_pi((__m64 *)p, x);
        x = _mm_movehl_ps(x, x);
        p += 2;
    }
    if (n & 1) _mm_store_ss(p, x);
}
#else
typedef struct v8 {
    float f[8];
} v8;
static inline v8 v8_load(const float *p)
{
    v8 v;
    memcpy(v.f, p, sizeof v.f);
    return v;
}
static inline void v8_store(float *p, v8 v) { memcpy(p, v.f, sizeof v.f); }
static inline v8 v8_set1(float x)
{
    v8 v;
    for (int i = 0; i < 8; i++) v.f[i] = x;
    return v;
}
static inline v8 v8_fma(v8 a, v8 b, v8 c)
{
    for (int i = 0; i < 8; i++) c.f[i] = kc_fmaf(a.f[i], b.f[i], c.f[i]);
    return c;
}
static inline v8 v8_add(v8 a, v8 b)
{
    for (int i = 0; i < 8; i++) a.f[i] += b.f[i];
    return a;
}
static inline v8 v8_load_n(const float *p, int64_t n)
{
    v8 v = v8_set1(0.0f);
    for (int64_t i = 0; i < n; i++) v.f[i] = p[i];
    return v;
}
static inline void v8_store_n(float *p, v8 v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = v.f[i];
}
#endif

/* dst[0, n) = src[0, n), touching nothing else (short runs: no libc call). */
static inline void copy_f(float *dst, const float *src, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) v8_store(dst + j, v8_load(src + j));
    if (j < n) v8_store_n(dst + j, v8_load_n(src + j, n - j), n - j);
}

static inline void zero_f(float *dst, int64_t n)
{
    v8 z = v8_set1(0.0f);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) v8_store(dst + j, z);
    if (j < n) v8_store_n(dst + j, z, n - j);
}

/* ---- staging ------------------------------------------------------------------
 * The input rows for output rows [oh0, oh0 + n_oh) of one channel, zero-
 * padded and split into stride phases: padded row rho = ih + pad_t and
 * column kappa = iw + pad_l go to phase plane (rho % sh, kappa % sw), row
 * rho / sh - oh0, column kappa / sw. Output (oh, ow) tap (r, s) then reads
 * plane ((r dh) % sh, (s dw) % sw) at row oh - oh0 + (r dh) / sh, column
 * ow + (s dw) / sw: every tap is a shifted run over ow. Planes are hq rows
 * of wq floats (wq a multiple of 8), plane (a, b) at (a sw + b) plane;
 * only the phases some tap reads are filled. */
typedef struct stage_geom {
    int64_t oh0, hq, wq, plane, cstride;
} stage_geom;

static int row_phase_used(const kc_conv2d *p, int64_t a)
{
    for (int64_t r = 0; r < p->R; r++)
        if (r * p->dil_h % p->stride_h == a) return 1;
    return 0;
}

static int col_phase_used(const kc_conv2d *p, int64_t b)
{
    for (int64_t s = 0; s < p->S; s++)
        if (s * p->dil_w % p->stride_w == b) return 1;
    return 0;
}

/* The phase planes some tap reads, with their columns: staged columns
 * [lo, hi) come from input columns col0 + (j - lo) sw, the rest are zero. */
typedef struct stage_plane {
    int64_t a, b, lo, hi, col0;
} stage_plane;

static int64_t stage_plan_max(const kc_conv2d *p) { return p->stride_h * p->stride_w; }

static int64_t stage_plan(const kc_conv2d *p, int64_t wq, stage_plane *out)
{
    const int64_t sw = p->stride_w, W = p->W, pl = p->pad_l;
    int64_t n = 0;
    for (int64_t a = 0; a < p->stride_h; a++) {
        if (!row_phase_used(p, a)) continue;
        for (int64_t b = 0; b < sw; b++) {
            if (!col_phase_used(p, b)) continue;
            stage_plane *e = &out[n++];
            e->a = a, e->b = b;
            e->lo = max64(0, cdivs(pl - b, sw));
            e->hi = min64(wq, fdiv(W - 1 + pl - b, sw) + 1);
            if (e->hi < e->lo) e->hi = e->lo;
            e->col0 = e->lo * sw + b - pl;
        }
    }
    return n;
}

/* One staged row: row[lo + j] = src[j sw] for j < n, zeros elsewhere in
 * [0, wq). With AVX2, whole vectors are stored: up to 7 zeros may land past
 * the row, so rows are written in increasing address order (the next row
 * overwrites them) and staging buffers end in slack. `avail` floats are
 * readable at src. */
static inline void stage_row(float *row, int64_t wq, const float *src, int64_t lo, int64_t n, int64_t sw,
                             int64_t avail)
{
    if (n <= 0) {
        zero_f(row, wq);
        return;
    }
    float *dst = row + lo;
#if KC_CONV_AVX2
    const v8 z = v8_set1(0.0f);
    for (int64_t j = 0; j < lo; j += 8) v8_store(row + j, z);
    int64_t j = 0, end;
    if (sw == 1) {
        for (; j + 8 <= n; j += 8) v8_store(dst + j, v8_load(src + j));
        if (j < n) v8_store(dst + j, v8_load_n(src + j, n - j)), j += 8;
        end = lo + j;
    } else if (sw == 2) {
        for (; j < n; j += 8) {
            __m256 a0, a1;
            int64_t i = 2 * j;
            if (i + 16 <= avail) {
                a0 = _mm256_loadu_ps(src + i);
                a1 = _mm256_loadu_ps(src + i + 8);
            } else {
                a0 = v8_load_n(src + i, min64(8, avail - i));
                a1 = avail - i > 8 ? v8_load_n(src + i + 8, avail - i - 8) : z;
            }
            /* even lanes of a0 then of a1 */
            __m256 e = _mm256_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
            e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
            v8_store(dst + j, e);
        }
        end = lo + j;
    } else {
        for (; j < n; j++) dst[j] = src[j * sw];
        end = lo + n;
        if (end % 8) v8_store_n(row + end, z, 8 - end % 8), end = round_up(end, 8);
    }
    for (; end < wq; end += 8) v8_store(row + end, z);
#else
    (void)avail;
    for (int64_t j = 0; j < lo; j++) row[j] = 0.0f;
    if (sw == 1)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else
        for (int64_t j = 0; j < n; j++) dst[j] = src[j * sw];
    for (int64_t j = lo + n; j < wq; j++) row[j] = 0.0f;
#endif
}

/* Stage one channel xc (H x W) into its planes at dst. */
static void stage_channel(const kc_conv2d *p, const float *xc, const stage_geom *g, const stage_plane *plan,
                          int64_t n_plan, float *dst)
{
    const int64_t sh = p->stride_h, sw = p->stride_w, H = p->H, W = p->W, wq = g->wq;
    for (int64_t e = 0; e < n_plan; e++) {
        const stage_plane *P = &plan[e];
        float *row = dst + (P->a * sw + P->b) * g->plane;
        int64_t ih = g->oh0 * sh + P->a - p->pad_t, n = P->hi - P->lo;
        for (int64_t q = 0; q < g->hq; q++, ih += sh, row += wq) {
            if (ih < 0 || ih >= H)
                zero_f(row, wq);
            else
                stage_row(row, wq, xc + ih * W + P->col0, P->lo, n, sw, W - P->col0);
        }
    }
}

/* Offset of tap (r, s) from a pixel's position in the staged planes. */
static int64_t tap_offset(const kc_conv2d *p, const stage_geom *g, int64_t r, int64_t s)
{
    int64_t rr = r * p->dil_h, ss = s * p->dil_w;
    return ((rr % p->stride_h) * p->stride_w + ss % p->stride_w) * g->plane + rr / p->stride_h * g->wq +
           ss / p->stride_w;
}

/* ---- tiles and scratch ---------------------------------------------------------
 * A tile is a block of output channels x output pixels of one image and
 * group, counted in units: pixel mode KC_MR channels x KC_NR pixels,
 * channel mode KC_NR channels x KC_MR pixels, depthwise one channel x one
 * output row. kb and pb (channels, pixels per tile) give the tile counts
 * tk = ceil(units / ceil(kb / unit)) and likewise tp; the units are then
 * split as evenly as possible, so tiles differ by at most one unit. */
typedef struct tiling {
    int64_t uk, up; /* unit sizes: output channels, output pixels */
    int64_t nk, np; /* units in all */
    int64_t tk, tp; /* tiles */
} tiling;

static tiling tiling_of(const kc_conv2d *p)
{
    tiling T;
    int dw = is_depthwise(p), cm = is_cmode(p);
    T.uk = dw ? 1 : cm ? KC_NR : KC_MR;
    T.up = dw ? p->OW : cm ? KC_MR : KC_NR;
    T.nk = cdiv(dw ? p->C : k_per_group(p), T.uk);
    T.np = cdiv(p->OH * p->OW, T.up);
    int64_t ku = p->kb > 0 ? min64(T.nk, cdiv(p->kb, T.uk)) : T.nk;
    int64_t pu = p->pb > 0 ? min64(T.np, cdiv(p->pb, T.up)) : T.np;
    T.tk = cdiv(T.nk, ku);
    T.tp = cdiv(T.np, pu);
    return T;
}

/* Part i of n units split t ways. */
static int64_t part_lo(int64_t n, int64_t t, int64_t i) { return i * n / t; }

/* No tap reads padding: every tap of every output pixel is inside x. */
static int is_unpadded(const kc_conv2d *p)
{
    return p->pad_t == 0 && p->pad_l == 0 && (p->OH - 1) * p->stride_h + (p->R - 1) * p->dil_h < p->H &&
           (p->OW - 1) * p->stride_w + (p->S - 1) * p->dil_w < p->W;
}

/* k-blocks of whole channels, about KC_KC rows each, of equal size. */
static int64_t k_block_channels(const kc_conv2d *p)
{
    int64_t cg = c_per_group(p), per = max64(1, KC_KC / max64(1, p->R * p->S));
    if (cg <= 0) return 1;
    return cdiv(cg, cdiv(cg, per));
}

typedef struct seg {
    int32_t j0, len; /* pixels [j0, j0 + len) of a panel */
    int64_t v;       /* the first one's position in the source (staged planes, or x) */
} seg;

typedef struct conv_layout {
    int cmode, direct;    /* direct: taps read x itself (no staging) */
    tiling T;
    int64_t kb, pb;       /* largest tile */
    int64_t kch, kc, n_oh;
    stage_geom sg;        /* oh0 set per tile */
    int64_t max_segs;
    size_t o_pack, o_stage, o_plan, o_off, o_segs, o_seg_at, o_pv, o_ct, total;
} conv_layout;

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

static void conv_layout_of(const kc_conv2d *p, conv_layout *L)
{
    memset(L, 0, sizeof *L);
    const int64_t pix = p->OH * p->OW;
    L->cmode = is_cmode(p);
    L->direct = is_pointwise(p) || (L->cmode && is_unpadded(p));
    L->T = tiling_of(p);
    L->kb = cdiv(L->T.nk, L->T.tk) * L->T.uk;
    L->pb = min64(pix, cdiv(L->T.np, L->T.tp) * L->T.up);
    L->kch = k_block_channels(p);
    L->kc = L->kch * p->R * p->S;
    L->n_oh = min64(p->OH, 1 + cdiv(L->pb - 1, p->OW));
    L->sg.wq = round_up(p->OW + (p->S - 1) * p->dil_w / p->stride_w, 8);
    L->sg.hq = L->n_oh + (p->R - 1) * p->dil_h / p->stride_h;
    L->sg.plane = L->sg.hq * L->sg.wq;
    L->sg.cstride = p->stride_h * p->stride_w * L->sg.plane;
    const int64_t pb_r = round_up(L->pb, L->cmode ? KC_MR : KC_NR), panels_p = pb_r / KC_NR + 1;
    L->max_segs = panels_p * (2 + cdiv(KC_NR - 1, p->OW));
    size_t o = 0;
    L->o_pack = o;
    if (L->cmode)
        o += align64((size_t)(pb_r * L->kc) * sizeof(float));
    else
        o += align64((size_t)(4 * KC_NR * L->kc + KC_NR) * sizeof(float)); /* + spill of the last row */
    L->o_stage = o;
    if (!L->direct) o += align64((size_t)(L->kch * L->sg.cstride + 2 * KC_NR) * sizeof(float));
    L->o_plan = o;
    if (!L->direct) o += align64((size_t)stage_plan_max(p) * sizeof(stage_plane));
    L->o_off = o;
    o += align64((size_t)L->kc * sizeof(int64_t));
    L->o_segs = o;
    if (!L->cmode) o += align64((size_t)L->max_segs * sizeof(seg));
    L->o_seg_at = o;
    if (!L->cmode) o += align64((size_t)(panels_p + 1) * sizeof(int32_t));
    L->o_pv = o;
    if (L->cmode) o += align64((size_t)pb_r * sizeof(int64_t));
    L->o_ct = o;
    if (L->cmode) o += align64((size_t)(pb_r * L->kb) * sizeof(float));
    L->total = o + 64;
}

/* ---- weights ---------------------------------------------------------------- */

size_t kc_conv2d_packed_w_bytes(const kc_conv2d *p)
{
    if (is_depthwise(p)) return (size_t)(p->C * p->R * p->S) * sizeof(float);
    if (is_cmode(p)) return (size_t)(p->group * round_up(k_per_group(p), KC_NR) * crs(p)) * sizeof(float);
    return (size_t)(p->group * round_up(k_per_group(p), KC_MR) * crs(p)) * sizeof(float);
}

/* Pixel mode, per group: ceil(Kg / KC_MR) panels of crs x KC_MR (the A
 * layout of kc.h), rows past Kg zero. Channel mode, per group: W^T in the
 * B layout (ceil(Kg / KC_NR) panels of crs x KC_NR). Depthwise: w as it
 * is, [C][R][S]. */
void kc_conv2d_pack_w(const kc_conv2d *p, const float *w, float *out)
{
    if (is_depthwise(p)) {
        memcpy(out, w, kc_conv2d_packed_w_bytes(p));
        return;
    }
    int64_t kg = k_per_group(p), n = crs(p);
    if (is_cmode(p)) {
        for (int64_t g = 0; g < p->group; g++)
            kc_gemm_pack_b(w + g * kg * n, n, 1, n, kg, out + g * round_up(kg, KC_NR) * n);
        return;
    }
    int64_t panels = cdiv(kg, KC_MR);
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

static int is_empty(const kc_conv2d *p) { return p->N <= 0 || p->K <= 0 || p->OH <= 0 || p->OW <= 0; }

int64_t kc_conv2d_rtasks(const kc_conv2d *p)
{
    if (is_empty(p)) return 0;
    tiling T = tiling_of(p);
    return p->N * (is_depthwise(p) ? 1 : p->group) * T.tk * T.tp;
}

static size_t dw_scratch_bytes(const kc_conv2d *p);
static void dw_rtask(const kc_conv2d *p, int64_t n, int64_t c0, int64_t nc, int64_t p0, int64_t np, void *scratch);

size_t kc_conv2d_scratch_bytes(const kc_conv2d *p)
{
    if (is_empty(p)) return 64;
    if (is_depthwise(p)) return dw_scratch_bytes(p);
    conv_layout L;
    conv_layout_of(p, &L);
    return L.total;
}

/* Pixel mode: B panels from the staged planes (or x), one k-block. */
typedef struct pack_ctx {
    const float *src;      /* staged planes of the k-block, or x at its first channel */
    const int64_t *off;    /* per k-block row: its tap's offset in src */
    const seg *segs;       /* segments of each panel: a run of pixels in one output row */
    const int32_t *seg_at; /* panel q's segments: [seg_at[q], seg_at[q + 1]) */
    int exact;             /* src is x: copy exactly (no over-read) */
} pack_ctx;

static inline void copy16(float *dst, const float *src)
{
    v8_store(dst, v8_load(src));
    v8_store(dst + 8, v8_load(src + 8));
}

/* Every row of a panel is written in order, each segment as a whole
 * KC_NR-float copy: the excess of one segment is overwritten by the next,
 * that of a row's last segment by the next row (and the last row's falls
 * in the buffer's slack); columns past the panel's pixels are don't-care.
 * Exact mode copies only what exists. */
static void pack_b_conv(const void *vctx, int64_t q0, int64_t nq, int64_t k, float *out)
{
    const pack_ctx *x = vctx;
    for (int64_t q = 0; q < nq; q++) {
        float *o = out + q * k * KC_NR;
        const seg *s0 = x->segs + x->seg_at[q0 + q], *s1 = x->segs + x->seg_at[q0 + q + 1];
        if (x->exact) {
            const float *src = x->src + s0->v;
            int64_t len = s0->len;
            if (len == KC_NR) {
                for (int64_t kk = 0; kk < k; kk++) copy16(o + kk * KC_NR, src + x->off[kk]);
            } else {
                for (int64_t kk = 0; kk < k; kk++) {
                    copy_f(o + kk * KC_NR, src + x->off[kk], len);
                    zero_f(o + kk * KC_NR + len, KC_NR - len);
                }
            }
        } else if (s1 - s0 == 1) {
            const float *src = x->src + s0->v;
            for (int64_t kk = 0; kk < k; kk++) copy16(o + kk * KC_NR, src + x->off[kk]);
        } else {
#if KC_CONV_AVX2
            /* Segment g fills lanes [j0, ...) of the row: load it shifted
             * back by j0 so that its pixels sit in their lanes, and blend
             * over the earlier ones (2 + 2 per segment loads, 2 aligned
             * stores a row, rather than unaligned stores that overlap). */
            enum { MAXS = 2 + KC_NR };
            int64_t base[MAXS];
            __m256i m0[MAXS], m1[MAXS];
            int64_t ns = s1 - s0;
            const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            for (int64_t g = 0; g < ns; g++) {
                base[g] = s0[g].v - s0[g].j0;
                m0[g] = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(s0[g].j0 - 1));
                m1[g] = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(s0[g].j0 - 9));
            }
            for (int64_t kk = 0; kk < k; kk++) {
                const float *src = x->src + x->off[kk];
                __m256 r0 = _mm256_loadu_ps(src + base[0]), r1 = _mm256_loadu_ps(src + base[0] + 8);
                for (int64_t g = 1; g < ns; g++) {
                    r0 = _mm256_blendv_ps(r0, _mm256_loadu_ps(src + base[g]), _mm256_castsi256_ps(m0[g]));
                    r1 = _mm256_blendv_ps(r1, _mm256_loadu_ps(src + base[g] + 8), _mm256_castsi256_ps(m1[g]));
                }
                _mm256_storeu_ps(o + kk * KC_NR, r0);
                _mm256_storeu_ps(o + kk * KC_NR + 8, r1);
            }
#else
            for (int64_t kk = 0; kk < k; kk++) {
                const float *src = x->src + x->off[kk];
                for (const seg *g = s0; g < s1; g++) copy16(o + kk * KC_NR + g->j0, src + g->v);
            }
#endif
        }
    }
}

/* Split the tile's pixels [p0, p0 + np) into segments, panel by panel. */
static void build_segs(const kc_conv2d *p, int64_t p0, int64_t np, int direct, const stage_geom *sg,
                       seg *segs, int32_t *seg_at)
{
    int32_t n = 0;
    int64_t panels = cdiv(np, KC_NR);
    for (int64_t q = 0; q < panels; q++) {
        seg_at[q] = n;
        int64_t j = 0, end = min64(KC_NR, np - q * KC_NR);
        if (direct) { /* pointwise: the panel is one run of x */
            segs[n].j0 = 0;
            segs[n].len = (int32_t)end;
            segs[n].v = p0 + q * KC_NR;
            n++;
            continue;
        }
        while (j < end) {
            int64_t pix = p0 + q * KC_NR + j, oh = pix / p->OW, ow = pix % p->OW;
            int64_t len = min64(end - j, p->OW - ow);
            segs[n].j0 = (int32_t)j;
            segs[n].len = (int32_t)len;
            segs[n].v = (oh - sg->oh0) * sg->wq + ow;
            n++;
            j += len;
        }
    }
    seg_at[panels] = n;
}

/* Channel mode: the A panels (KC_MR pixels x k) of all the tile's pixels. */
static void pack_a_pixels(const float *src, const int64_t *off, const int64_t *pv, int64_t np, int64_t k,
                          float *out)
{
    for (int64_t i0 = 0; i0 < np; i0 += KC_MR) {
        float *o = out + i0 * k;
        int64_t v[KC_MR];
        int consecutive = 1;
        for (int i = 0; i < KC_MR; i++) {
            v[i] = pv[min64(i0 + i, np - 1)];
            consecutive &= v[i] == v[0] + i;
        }
        if (consecutive) {
            const float *s = src + v[0];
            for (int64_t kk = 0; kk < k; kk++) memcpy(o + kk * KC_MR, s + off[kk], KC_MR * sizeof(float));
        } else {
            for (int64_t kk = 0; kk < k; kk++) {
                const float *s = src + off[kk];
#pragma GCC unroll 6
                for (int i = 0; i < KC_MR; i++) o[kk * KC_MR + i] = s[v[i]];
            }
        }
    }
}

/* y[j][i] = act(ct[i][j] + bias[j] + res[j][i]) for j < m channels, i < np
 * pixels; y and res rows ld apart. */
static void transpose_out(const float *ct, int64_t ldct, int64_t np, int64_t m, float *y, int64_t ld,
                          const float *bias, const float *res, const kc_epilogue *ep)
{
    int64_t j0 = 0;
#if KC_CONV_AVX2
    for (; j0 + 8 <= m; j0 += 8) {
        int64_t i0 = 0;
        for (; i0 + 8 <= np; i0 += 8) {
            const float *c = ct + i0 * ldct + j0;
            __m256 r0 = _mm256_loadu_ps(c + 0 * ldct), r1 = _mm256_loadu_ps(c + 1 * ldct);
            __m256 r2 = _mm256_loadu_ps(c + 2 * ldct), r3 = _mm256_loadu_ps(c + 3 * ldct);
            __m256 r4 = _mm256_loadu_ps(c + 4 * ldct), r5 = _mm256_loadu_ps(c + 5 * ldct);
            __m256 r6 = _mm256_loadu_ps(c + 6 * ldct), r7 = _mm256_loadu_ps(c + 7 * ldct);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            __m256 o[8];
            o[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
            o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
            o[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
            o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
            o[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
            o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
            o[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
            o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
            for (int j = 0; j < 8; j++) {
                __m256 v = o[j];
                if (bias) v = _mm256_add_ps(v, _mm256_set1_ps(bias[j0 + j]));
                if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + (j0 + j) * ld + i0));
                _mm256_storeu_ps(y + (j0 + j) * ld + i0, v);
            }
        }
        for (int64_t j = j0; j < j0 + 8; j++) {
            float b = bias ? bias[j] : 0.0f;
            for (int64_t i = i0; i < np; i++) {
                float v = ct[i * ldct + j] + b;
                if (res) v += res[j * ld + i];
                y[j * ld + i] = v;
            }
            kc_act_inplace(ep->act, y + j * ld, np, ep->alpha, ep->beta);
        }
    }
#endif
    for (int64_t j = j0; j < m; j++) {
        float b = bias ? bias[j] : 0.0f;
        for (int64_t i = 0; i < np; i++) {
            float v = ct[i * ldct + j] + b;
            if (res) v += res[j * ld + i];
            y[j * ld + i] = v;
        }
        kc_act_inplace(ep->act, y + j * ld, np, ep->alpha, ep->beta);
    }
}

void kc_conv2d_rtask(const kc_conv2d *p, int64_t t, void *scratch)
{
    const int64_t pix = p->OH * p->OW;
    if (is_depthwise(p)) {
        tiling T = tiling_of(p);
        int64_t ip = t % T.tp, ic = t / T.tp % T.tk, n = t / (T.tp * T.tk);
        int64_t c0 = part_lo(T.nk, T.tk, ic), c1 = part_lo(T.nk, T.tk, ic + 1);
        int64_t r0 = part_lo(T.np, T.tp, ip), r1 = part_lo(T.np, T.tp, ip + 1);
        dw_rtask(p, n, c0, c1 - c0, r0 * p->OW, (r1 - r0) * p->OW, scratch);
        return;
    }
    conv_layout L;
    conv_layout_of(p, &L);
    const tiling T = L.T;
    const int64_t ip = t % T.tp, ik = t / T.tp % T.tk, g = t / (T.tp * T.tk) % p->group;
    const int64_t n = t / (T.tp * T.tk * p->group);
    const int64_t kg = k_per_group(p), k_lo = part_lo(T.nk, T.tk, ik) * T.uk;
    const int64_t m = min64(kg, part_lo(T.nk, T.tk, ik + 1) * T.uk) - k_lo;
    const int64_t p0 = part_lo(T.np, T.tp, ip) * T.up, np = min64(pix, part_lo(T.np, T.tp, ip + 1) * T.up) - p0;
    const int64_t K = crs(p), cg = c_per_group(p), RS = p->R * p->S;
    const int64_t HW = p->H * p->W, y_off = (n * p->K + g * kg + k_lo) * pix + p0;
    const float *xg = p->x + (n * p->C + g * cg) * HW;

    char *base = scratch;
    float *pack = (float *)(base + L.o_pack), *staged = (float *)(base + L.o_stage);
    stage_plane *plan = (stage_plane *)(base + L.o_plan);
    int64_t *off = (int64_t *)(base + L.o_off);
    seg *segs = (seg *)(base + L.o_segs);
    int32_t *seg_at = (int32_t *)(base + L.o_seg_at);
    int64_t *pv = (int64_t *)(base + L.o_pv);
    float *ct = (float *)(base + L.o_ct);

    stage_geom sg = L.sg;
    sg.oh0 = p0 / p->OW;
    int64_t n_plan = L.direct ? 0 : stage_plan(p, sg.wq, plan);
    if (L.cmode) {
        for (int64_t i = 0; i < np; i++) {
            int64_t oh = (p0 + i) / p->OW, ow = (p0 + i) % p->OW;
            pv[i] = L.direct ? oh * p->stride_h * p->W + ow * p->stride_w : (oh - sg.oh0) * sg.wq + ow;
        }
    } else {
        build_segs(p, p0, np, L.direct, &sg, segs, seg_at);
    }
    /* tap offsets of a k-block's rows, the same for every block */
    for (int64_t c = 0, kk = 0; c < L.kch; c++)
        for (int64_t r = 0; r < p->R; r++)
            for (int64_t s = 0; s < p->S; s++, kk++)
                off[kk] = L.direct ? c * HW + r * p->dil_h * p->W + s * p->dil_w
                                   : c * sg.cstride + tap_offset(p, &sg, r, s);

    pack_ctx pc = {NULL, off, segs, seg_at, L.direct};
    kc_block blk = {0};
    blk.alpha = 1.0f;
    if (L.cmode) {
        blk.m = np;
        blk.n = m;
        blk.a = pack;
        blk.b_panel_stride = KC_NR * K;
        blk.c = ct;
        blk.ldc = L.kb;
        blk.act = KC_ACT_NONE;
    } else {
        blk.m = m;
        blk.n = np;
        blk.a_panel_stride = KC_MR * K;
        blk.pack_b = pack_b_conv;
        blk.pack_ctx = &pc;
        blk.b_buf = pack;
        blk.c = p->y + y_off;
        blk.ldc = pix;
        blk.bias = p->ep.bias ? p->ep.bias + g * kg + k_lo : NULL;
        blk.bias_per_row = 1;
        blk.res = p->ep.residual ? p->ep.residual + y_off : NULL;
        blk.ldr = pix;
        blk.act = p->ep.act;
        blk.act_alpha = p->ep.alpha;
        blk.act_beta = p->ep.beta;
    }
    const float *wa = p->w_packed + (g * cdiv(kg, KC_MR) + k_lo / KC_MR) * KC_MR * K;
    const int64_t mc = round_up(cdiv(m, cdiv(m, KC_MC)), KC_MR);
    const float *wb = p->w_packed + (g * cdiv(kg, KC_NR) + k_lo / KC_NR) * KC_NR * K;
    int64_t c0 = 0;
    do { /* at least once: no input channels still writes the epilogue */
        int64_t nc = min64(L.kch, cg - c0), k0 = c0 * RS, k = nc * RS;
        const float *src;
        if (L.direct) {
            src = xg + c0 * HW;
        } else {
            for (int64_t c = 0; c < nc; c++)
                stage_channel(p, xg + (c0 + c) * HW, &sg, plan, n_plan, staged + c * sg.cstride);
            src = staged;
        }
        blk.k = k;
        blk.first = c0 == 0;
        blk.last = c0 + nc >= cg;
        if (L.cmode) {
            pack_a_pixels(src, off, pv, np, k, pack);
            blk.a_panel_stride = KC_MR * k;
            blk.b = wb + k0 * KC_NR;
            kc_gemm_block(&blk);
            c0 += L.kch;
            continue;
        }
        /* pixel mode: the tile's channels in chunks of at most MC rows, so
         * that a k-block of their packed weights stays in L2 while the
         * input, staged once, serves them all */
        pc.src = src;
        for (int64_t i0 = 0; i0 < m; i0 += mc) {
            blk.m = min64(mc, m - i0);
            blk.a = wa + i0 * K + k0 * KC_MR;
            blk.c = p->y + y_off + i0 * pix;
            blk.bias = p->ep.bias ? p->ep.bias + g * kg + k_lo + i0 : NULL;
            blk.res = p->ep.residual ? p->ep.residual + y_off + i0 * pix : NULL;
            kc_gemm_block(&blk);
        }
        c0 += L.kch;
    } while (c0 < cg);
    if (L.cmode)
        transpose_out(ct, L.kb, np, m, p->y + y_off, pix, p->ep.bias ? p->ep.bias + g * kg + k_lo : NULL,
                      p->ep.residual ? p->ep.residual + y_off : NULL, &p->ep);
}

/* ---- depthwise ---------------------------------------------------------------- */

/* The staged kernels (shapes the direct ones below do not take, and builds
 * without AVX2): output rows in blocks of DW_ROWS (whole planes up to twice
 * that), each from its staged input rows (stage_geom with oh0 = the block's
 * first row; wq covers whole 8-column chunks). */
enum { DW_ROWS = 8 };

static int64_t dw_rows(const kc_conv2d *p) { return p->OH <= 2 * DW_ROWS ? p->OH : DW_ROWS; }

static stage_geom dw_geom(const kc_conv2d *p)
{
    stage_geom g;
    g.oh0 = 0;
    g.wq = round_up(round_up(p->OW, 8) + (p->S - 1) * p->dil_w / p->stride_w, 8);
    g.hq = dw_rows(p) + (p->R - 1) * p->dil_h / p->stride_h;
    g.plane = g.hq * g.wq;
    g.cstride = p->stride_h * p->stride_w * g.plane;
    return g;
}

static size_t dw_direct_bytes(const kc_conv2d *p);

static size_t dw_scratch_bytes(const kc_conv2d *p)
{
    stage_geom g = dw_geom(p);
    size_t b = (size_t)(g.cstride + 16) * sizeof(float) + (size_t)(p->R * p->S) * sizeof(int64_t) +
               (size_t)stage_plan_max(p) * sizeof(stage_plane) + 128;
    size_t d = dw_direct_bytes(p) + 128;
    return b > d ? b : d; /* either kernel: the ISA decides */
}

/* Output rows [0, nr) of a block: y row i at y + i OW, its chunk of 8
 * columns at ow written whole while it ends inside the tile's output
 * (the part past the row is overwritten by the next row), else in part. */
typedef struct dw_args {
    const float *st;  /* staged planes */
    const int64_t *toff; /* tap offsets (generic kernel) */
    int64_t wq, plane, nr, OW, R, S;
    const float *w;
    float bias;
    float *y;          /* the block's first output row */
    const float *res;  /* same place in the residual, or NULL */
    int64_t room;      /* floats from y to the end of the tile's output */
} dw_args;

static inline __attribute__((always_inline)) void dw_store(const dw_args *a, int64_t o, v8 acc)
{
    if (o + 8 <= a->room) {
        if (a->res) acc = v8_add(acc, v8_load(a->res + o));
        v8_store(a->y + o, acc);
    } else {
        int64_t n = a->room - o;
        if (a->res) acc = v8_add(acc, v8_load_n(a->res + o, n));
        v8_store_n(a->y + o, acc, n);
    }
}

/* Constant shapes, dilation 1: all taps' weights in registers. */
static inline __attribute__((always_inline)) void dw_fixed(const int R, const int S, const int SH, const int SW,
                                                           const dw_args *a)
{
    const int64_t wq = a->wq, pl = a->plane;
    v8 wv[25];
    for (int i = 0; i < R * S; i++) wv[i] = v8_set1(a->w[i]);
    const v8 bv = v8_set1(a->bias);
    for (int64_t i = 0; i < a->nr; i++) {
        const float *rows[5][2];
        for (int r = 0; r < R; r++)
            for (int b = 0; b < SW && b < S; b++)
                rows[r][b] = a->st + ((r % SH) * SW + b) * pl + (i + r / SH) * wq;
        for (int64_t ow = 0; ow < a->OW; ow += 8) {
            v8 acc = bv;
#pragma GCC unroll 5
            for (int r = 0; r < R; r++)
#pragma GCC unroll 5
                for (int s = 0; s < S; s++) acc = v8_fma(wv[r * S + s], v8_load(rows[r][s % SW] + ow + s / SW), acc);
            dw_store(a, i * a->OW + ow, acc);
        }
    }
}

/* Any shape: taps from the offset table. */
static void dw_generic(const dw_args *a)
{
    const int64_t taps = a->R * a->S;
    const v8 bv = v8_set1(a->bias);
    for (int64_t i = 0; i < a->nr; i++) {
        const float *row = a->st + i * a->wq;
        for (int64_t ow = 0; ow < a->OW; ow += 8) {
            v8 acc = bv;
            for (int64_t t = 0; t < taps; t++) acc = v8_fma(v8_set1(a->w[t]), v8_load(row + a->toff[t] + ow), acc);
            dw_store(a, i * a->OW + ow, acc);
        }
    }
}

static size_t dw_direct_bytes(const kc_conv2d *p)
{
    int64_t chunks = cdiv(p->OW, 8);
    return (size_t)(chunks * 2 * p->S) * 32 + (size_t)round_up(chunks, 32) +
           (size_t)(2 * round_up(p->OW, 8) + p->S + 24) * sizeof(float);
}

#if KC_CONV_AVX2
/* Stride 1, dilation 1, constant R x S: straight from x, no staging. Rows
 * outside the image read a zero row; 8-column chunks at the image's left or
 * right edge read through per-tap lane masks (masked loads do not fault,
 * and are cheap, unlike masked stores). */
typedef struct dw_direct {
    const float *zero;    /* a row of zeros as long as any a chunk reads */
    const __m256i *masks; /* edge chunk c, load i: masks[c * dw_loads + i] */
    const uint8_t *edge;  /* per chunk: needs masks */
} dw_direct;

/* 3 or 5 for 3x3 / 5x5 with stride 1 or 2 (equal), dilation 1; else 0. */
static int64_t dw_direct_key(const kc_conv2d *p)
{
    if (p->stride_h != p->stride_w || p->stride_h > 2 || p->dil_h != 1 || p->dil_w != 1 || p->R != p->S) return 0;
    return p->R == 3 || p->R == 5 ? p->R : 0;
}

/* The vector loads of a chunk, at offsets from its first input column:
 * stride 1: tap s at s; stride 2: pairs (2t, 2t + 8) de-interleaved into
 * taps 2t and 2t + 1. */
static int64_t dw_loads(const kc_conv2d *p) { return p->stride_w == 1 ? p->S : 2 * ((p->S + 1) / 2); }
static int64_t dw_load_off(const kc_conv2d *p, int64_t i) { return p->stride_w == 1 ? i : 2 * (i / 2) + 8 * (i % 2); }

static void dw_direct_init(const kc_conv2d *p, void *scratch, dw_direct *d)
{
    const int64_t nl = dw_loads(p), W = p->W, pl = p->pad_l, sw = p->stride_w, chunks = cdiv(p->OW, 8);
    __m256i *masks = scratch;
    uint8_t *edge = (uint8_t *)(masks + chunks * nl);
    float *zero = (float *)(edge + round_up(chunks, 32));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t c = 0; c < chunks; c++) {
        int64_t iw0 = 8 * c * sw - pl; /* the chunk's first input column */
        edge[c] = iw0 < 0 || iw0 + dw_load_off(p, nl - 1) + 8 > W;
        for (int64_t i = 0; i < nl; i++) {
            int64_t lo = -(iw0 + dw_load_off(p, i)), hi = W + lo; /* valid lanes [lo, hi) */
            masks[c * nl + i] = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)max64(-1, lo - 1))),
                                                 _mm256_cmpgt_epi32(_mm256_set1_epi32((int)min64(8, hi)), lane));
        }
    }
    zero_f(zero, 2 * round_up(p->OW, 8) + p->S + 16);
    d->zero = zero, d->masks = masks, d->edge = edge;
}

/* act(v) in registers where that is simple; 0 if a separate pass is needed. */
static inline int act_in_regs(int act) { return act == KC_ACT_NONE || act == KC_ACT_RELU || act == KC_ACT_CLIP; }
static inline __m256 act_v8(int act, __m256 v, __m256 lo, __m256 hi)
{
    if (act == KC_ACT_RELU) return _mm256_max_ps(v, _mm256_setzero_ps());
    if (act == KC_ACT_CLIP) return _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    return v;
}

/* Rows [oh_a, oh_b) of one plane. */
static inline __attribute__((always_inline)) void dw_s1(const int R, const int S, const kc_conv2d *p,
                                                        const dw_direct *d, const float *xc, const float *w,
                                                        float bias, float *yc, const float *rc, int64_t oh_a,
                                                        int64_t oh_b)
{
    const int64_t W = p->W, H = p->H, OW = p->OW, pt = p->pad_t, pl = p->pad_l, end = oh_b * OW;
    const int act = act_in_regs(p->ep.act) ? p->ep.act : KC_ACT_NONE;
    const __m256 lo = _mm256_set1_ps(p->ep.alpha), hi = _mm256_set1_ps(p->ep.beta), bv = _mm256_set1_ps(bias);
    __m256 wv[25];
    for (int i = 0; i < R * S; i++) wv[i] = _mm256_set1_ps(w[i]);
    for (int64_t oh = oh_a; oh < oh_b; oh++) {
        const float *rows[5];
        for (int r = 0; r < R; r++) {
            int64_t ih = oh - pt + r;
            rows[r] = ih >= 0 && ih < H ? xc + ih * W - pl : d->zero;
        }
        for (int64_t ow0 = 0, c = 0; ow0 < OW; ow0 += 8, c++) {
            __m256 a0 = bv, a1 = _mm256_setzero_ps();
            if (!d->edge[c]) {
#pragma GCC unroll 5
                for (int r = 0; r < R; r++)
#pragma GCC unroll 5
                    for (int s = 0; s < S; s++) {
                        __m256 x = _mm256_loadu_ps(rows[r] + ow0 + s);
                        if (r & 1)
                            a1 = _mm256_fmadd_ps(wv[r * S + s], x, a1);
                        else
                            a0 = _mm256_fmadd_ps(wv[r * S + s], x, a0);
                    }
            } else {
                const __m256i *m = d->masks + c * S;
#pragma GCC unroll 5
                for (int r = 0; r < R; r++)
#pragma GCC unroll 5
                    for (int s = 0; s < S; s++) {
                        __m256 x = _mm256_maskload_ps(rows[r] + ow0 + s, m[s]);
                        if (r & 1)
                            a1 = _mm256_fmadd_ps(wv[r * S + s], x, a1);
                        else
                            a0 = _mm256_fmadd_ps(wv[r * S + s], x, a0);
                    }
            }
            __m256 acc = _mm256_add_ps(a0, a1);
            int64_t o = oh * OW + ow0;
            if (o + 8 <= end) {
                if (rc) acc = _mm256_add_ps(acc, _mm256_loadu_ps(rc + o));
                _mm256_storeu_ps(yc + o, act_v8(act, acc, lo, hi));
            } else {
                if (rc) acc = _mm256_add_ps(acc, v8_load_n(rc + o, end - o));
                v8_store_n(yc + o, act_v8(act, acc, lo, hi), end - o);
            }
        }
    }
    if (!act_in_regs(p->ep.act))
        kc_act_inplace(p->ep.act, yc + oh_a * OW, (oh_b - oh_a) * OW, p->ep.alpha, p->ep.beta);
}

/* Stride 2: per tap row, loads at 2t and 2t + 8 (16 input columns) are
 * split into even and odd columns (taps 2t and 2t + 1) by one shuffle
 * each. The shuffles leave lanes in the order 0 1 4 5 2 3 6 7, the same
 * for every tap, so the accumulator is put in order once at the end. */
static inline __attribute__((always_inline)) void dw_s2(const int R, const int S, const kc_conv2d *p,
                                                        const dw_direct *d, const float *xc, const float *w,
                                                        float bias, float *yc, const float *rc, int64_t oh_a,
                                                        int64_t oh_b)
{
    enum { T = 3 }; /* load pairs, at most (5 + 1) / 2 */
    const int nt = (S + 1) / 2;
    const int64_t W = p->W, H = p->H, OW = p->OW, pt = p->pad_t, pl = p->pad_l, end = oh_b * OW;
    const int act = act_in_regs(p->ep.act) ? p->ep.act : KC_ACT_NONE;
    const __m256 lo = _mm256_set1_ps(p->ep.alpha), hi = _mm256_set1_ps(p->ep.beta), bv = _mm256_set1_ps(bias);
    __m256 wv[25];
    for (int i = 0; i < R * S; i++) wv[i] = _mm256_set1_ps(w[i]);
    for (int64_t oh = oh_a; oh < oh_b; oh++) {
        const float *rows[5];
        for (int r = 0; r < R; r++) {
            int64_t ih = 2 * oh - pt + r;
            rows[r] = ih >= 0 && ih < H ? xc + ih * W - pl : d->zero;
        }
        for (int64_t ow0 = 0, c = 0; ow0 < OW; ow0 += 8, c++) {
            __m256 a0 = bv, a1 = _mm256_setzero_ps();
            const int e = d->edge[c];
            const __m256i *m = d->masks + c * 2 * nt;
#pragma GCC unroll 5
            for (int r = 0; r < R; r++) {
                const float *b = rows[r] + 2 * ow0;
#pragma GCC unroll 3
                for (int t = 0; t < nt && t < T; t++) {
                    __m256 x0, x1;
                    if (!e) {
                        x0 = _mm256_loadu_ps(b + 2 * t);
                        x1 = _mm256_loadu_ps(b + 2 * t + 8);
                    } else {
                        x0 = _mm256_maskload_ps(b + 2 * t, m[2 * t]);
                        x1 = _mm256_maskload_ps(b + 2 * t + 8, m[2 * t + 1]);
                    }
                    __m256 ev = _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0));
                    if (r & 1)
                        a1 = _mm256_fmadd_ps(wv[r * S + 2 * t], ev, a1);
                    else
                        a0 = _mm256_fmadd_ps(wv[r * S + 2 * t], ev, a0);
                    if (2 * t + 1 < S) {
                        __m256 od = _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1));
                        if (r & 1)
                            a1 = _mm256_fmadd_ps(wv[r * S + 2 * t + 1], od, a1);
                        else
                            a0 = _mm256_fmadd_ps(wv[r * S + 2 * t + 1], od, a0);
                    }
                }
            }
            /* bias went in lane-uniform, so only the sum needs reordering */
            __m256 acc = _mm256_add_ps(a0, a1);
            acc = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc), _MM_SHUFFLE(3, 1, 2, 0)));
            int64_t o = oh * OW + ow0;
            if (o + 8 <= end) {
                if (rc) acc = _mm256_add_ps(acc, _mm256_loadu_ps(rc + o));
                _mm256_storeu_ps(yc + o, act_v8(act, acc, lo, hi));
            } else {
                if (rc) acc = _mm256_add_ps(acc, v8_load_n(rc + o, end - o));
                v8_store_n(yc + o, act_v8(act, acc, lo, hi), end - o);
            }
        }
    }
    if (!act_in_regs(p->ep.act))
        kc_act_inplace(p->ep.act, yc + oh_a * OW, (oh_b - oh_a) * OW, p->ep.alpha, p->ep.beta);
}
#endif

static void dw_rtask(const kc_conv2d *p, int64_t n, int64_t c0, int64_t nc, int64_t p0, int64_t np, void *scratch)
{
    const int64_t OW = p->OW, pix = p->OH * OW, R = p->R, S = p->S, HW = p->H * p->W;
    const int64_t oh_a = p0 / OW, oh_b = (p0 + np) / OW, rows = dw_rows(p);
#if KC_CONV_AVX2
    if (dw_direct_key(p)) {
        dw_direct d;
        dw_direct_init(p, scratch, &d);
        for (int64_t ch = c0; ch < c0 + nc; ch++) {
            const float *xc = p->x + (n * p->C + ch) * HW, *w = p->w_packed + ch * R * S;
            float *yc = p->y + (n * p->K + ch) * pix, bias = p->ep.bias ? p->ep.bias[ch] : 0.0f;
            const float *rc = p->ep.residual ? p->ep.residual + (n * p->K + ch) * pix : NULL;
            switch (R * 10 + p->stride_h) {
            case 31: dw_s1(3, 3, p, &d, xc, w, bias, yc, rc, oh_a, oh_b); break;
            case 51: dw_s1(5, 5, p, &d, xc, w, bias, yc, rc, oh_a, oh_b); break;
            case 32: dw_s2(3, 3, p, &d, xc, w, bias, yc, rc, oh_a, oh_b); break;
            default: dw_s2(5, 5, p, &d, xc, w, bias, yc, rc, oh_a, oh_b); break;
            }
        }
        return;
    }
#endif
    stage_geom g = dw_geom(p);
    float *st = scratch;
    int64_t *toff = (int64_t *)(st + g.cstride + 16);
    stage_plane *plan = (stage_plane *)(toff + R * S);
    int64_t n_plan = stage_plan(p, g.wq, plan);
    int key = 0;
    if (p->dil_h == 1 && p->dil_w == 1 && R == S && p->stride_h == p->stride_w && (R == 3 || R == 5) &&
        p->stride_h <= 2)
        key = (int)(R * 10 + p->stride_h);
    for (int64_t r = 0; r < R; r++)
        for (int64_t s = 0; s < S; s++) toff[r * S + s] = tap_offset(p, &g, r, s);
    for (int64_t ch = c0; ch < c0 + nc; ch++) {
        const float *xc = p->x + (n * p->C + ch) * HW;
        float *yc = p->y + (n * p->K + ch) * pix;
        const float *rc = p->ep.residual ? p->ep.residual + (n * p->K + ch) * pix : NULL;
        dw_args a = {st, toff, g.wq, g.plane, 0, OW, R, S, p->w_packed + ch * R * S, p->ep.bias ? p->ep.bias[ch] : 0.0f,
                     NULL, NULL, 0};
        for (int64_t oh = oh_a; oh < oh_b; oh += rows) {
            a.nr = min64(rows, oh_b - oh);
            g.oh0 = oh;
            g.hq = a.nr + (R - 1) * p->dil_h / p->stride_h;
            stage_channel(p, xc, &g, plan, n_plan, st);
            a.y = yc + oh * OW;
            a.res = rc ? rc + oh * OW : NULL;
            a.room = (oh_b - oh) * OW;
            switch (key) {
            case 31: dw_fixed(3, 3, 1, 1, &a); break;
            case 32: dw_fixed(3, 3, 2, 2, &a); break;
            case 51: dw_fixed(5, 5, 1, 1, &a); break;
            case 52: dw_fixed(5, 5, 2, 2, &a); break;
            default: dw_generic(&a); break;
            }
            kc_act_inplace(p->ep.act, a.y, a.nr * OW, p->ep.alpha, p->ep.beta);
        }
    }
}

/* ---- tiles ---------------------------------------------------------------------- */

/* Estimated cycles of one tile of m output channels x np pixels (rough
 * constants measured on Zen 3): FMAs at 16 a cycle and 90 % (padding of the
 * micro-tiles included), the gathering and copying around them, reading
 * the tile's input and weights from outside L2 (each tile reads them
 * again), writing its output, and a fixed cost per rTask. */
static double tile_cost(const kc_conv2d *p, const conv_layout *L, int64_t m, int64_t np)
{
    double c = 2000.0;
    const double rows_out = (double)min64(p->OH, cdiv(np, p->OW) + 1);
    const double rows_in = min64(p->H, (int64_t)rows_out * p->stride_h + (p->R - 1) * p->dil_h);
    if (is_depthwise(p)) {
        double chunk = (double)(p->R * p->S) * (p->stride_w == 1 ? 0.6 : 1.1) + 3.0;
        c += (double)m * (150.0 + (double)(np / p->OW) * (12.0 + (double)cdiv(p->OW, 8) * chunk));
        return c + (double)m * (rows_in * (double)p->W + (double)np) * 0.3;
    }
    const double K = (double)crs(p), cg = (double)c_per_group(p);
    if (L->cmode) {
        c += (double)round_up(np, KC_MR) * (double)round_up(m, KC_NR) * K / 14.4;
        c += (double)cdiv(np, KC_MR) * K * 3.0 + (double)(m * np) * 0.5;
    } else {
        double segs = 1.0 + (double)KC_NR / (double)p->OW;
        c += (double)round_up(m, KC_MR) * (double)round_up(np, KC_NR) * K / 14.4;
        c += (double)(cdiv(np, KC_NR) * cdiv(m, KC_MC)) * K * (1.0 + 1.5 * segs);
    }
    if (!L->direct) c += cg * rows_out * (double)(p->stride_h * p->stride_w) * ((double)L->sg.wq / 8.0 + 10.0);
    c += cg * rows_in * (double)p->W * (p->stride_h > 1 ? 1.0 : 0.5); /* input; strided rows stream badly */
    c += (double)m * K * 0.25 + (double)(m * np) * 0.25;               /* weights, output */
    return c;
}

/* The tiling with the least work on the busiest thread, rTask t going to
 * thread t % n_threads (the runtime's order), among tiles small enough to
 * stay in cache: pixel mode at most 1024 pixels (any channels: they go in
 * chunks of KC_MC); channel mode at most 128 pixels x 512 channels and 32K
 * floats of Y^T. */
void kc_conv2d_default_tiles(kc_conv2d *p, int n_threads)
{
    enum { MAX_THREADS = 64 };
    int nt = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
    const int dw = is_depthwise(p), cm = is_cmode(p);
    const int64_t pix = p->OH * p->OW, jobs = p->N * (dw ? 1 : p->group);
    p->kb = p->pb = 0;
    if (is_empty(p)) return;
    conv_layout L;
    conv_layout_of(p, &L); /* units, mode; tile sizes do not matter here */
    const tiling T = L.T;
    const int64_t kmax = dw ? p->C : cm ? 512 : round_up(k_per_group(p), KC_MR), pmax = dw ? pix : cm ? 128 : 1024;
    const int64_t kall = dw ? p->C : k_per_group(p);
    /* from the fewest tiles the caps allow, up to 64 more counts each way
     * (counts that split the units the same way as a smaller one skipped) */
    const int64_t tk_min = cdiv(T.nk, min64(T.nk, max64(1, kmax / T.uk)));
    const int64_t tp_min = cdiv(T.np, min64(T.np, max64(1, pmax / T.up)));
    const int64_t max_tasks = max64(32 * nt, jobs * tk_min * tp_min);
    double best = -1.0;
    int64_t best_ku = cdiv(T.nk, tk_min), best_pu = cdiv(T.np, tp_min);
    for (int64_t tk = tk_min; tk <= min64(T.nk, tk_min + 63); tk++) {
        const int64_t ku = cdiv(T.nk, tk);
        if (cdiv(T.nk, ku) != tk) continue;
        for (int64_t tp = tp_min; tp <= min64(T.np, tp_min + 63); tp++) {
            const int64_t pu = cdiv(T.np, tp), tasks = jobs * tk * tp;
            if (cdiv(T.np, pu) != tp) continue;
            if (tasks > max_tasks) break;
            if (cm && pu * T.up * ku * T.uk > 32768 && (tk > tk_min || tp > tp_min)) continue;
            double load[MAX_THREADS] = {0}, worst = 0.0;
            if (tasks <= 4096) {
                for (int64_t t = 0; t < tasks; t++) {
                    int64_t ip = t % tp, ik = t / tp % tk;
                    int64_t k0 = part_lo(T.nk, tk, ik) * T.uk, k1 = min64(kall, part_lo(T.nk, tk, ik + 1) * T.uk);
                    int64_t p0 = part_lo(T.np, tp, ip) * T.up, p1 = min64(pix, part_lo(T.np, tp, ip + 1) * T.up);
                    load[t % nt] += tile_cost(p, &L, k1 - k0, p1 - p0);
                }
                for (int i = 0; i < nt; i++) worst = load[i] > worst ? load[i] : worst;
            } else { /* many tasks: they even out; count the largest */
                worst = (double)cdiv(tasks, nt) * tile_cost(p, &L, min64(kall, ku * T.uk), min64(pix, pu * T.up));
            }
            if (best < 0.0 || worst < best * 0.999) best = worst, best_ku = ku, best_pu = pu;
        }
    }
    p->kb = best_ku * T.uk;
    p->pb = best_pu * T.up;
}
