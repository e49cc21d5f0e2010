/*
 * gpu_gemm.c: the cuda target's GEMM templates (kernels/kg_gemm.cuh) on a
 * real GPU, candidate by candidate, on the shapes that matter: 8192^3 and
 * BERT-base's at batch 1 and 16 (seq 128) and ViT-B/16's at batch 1 (197
 * rows, with the model's epilogues), two of BERT's with the epilogue
 * the model fuses (bias + GELU after FFN1, bias + residual after FFN2),
 * plus small shapes of every operand layout, odd extents, dtype and
 * epilogue that check correctness only. The conv_ shapes are convolutions
 * as emit_gemm.c computes them on sm_90 (gemm_analyse's im2col form: A the
 * im2col matrix of an NHWC x, read through an im2col tensor map): ResNet-50's
 * 3x3 ones at batch 1, and chk_conv_ ones of awkward geometry. Their A is
 * x itself; the reference reads x through the im2col definition.
 * KILN_CONV_IM2COL=cp checks the candidates that gather A by cp.async.
 *
 *   make BUILD=build build/gpu_gemm
 *   build/gpu_gemm [--shapes NAME,...] [--heuristic-only] [--csv FILE] [--compile-only [--rank]] [--rank-only] [--save DIR]
 *                  [--min-blocks2] [--define NAME=VALUE,...] [--cands NAME;...]
 *
 * For each shape it builds every configuration emit_gemm.c offers (this
 * file includes emit_gemm.c: the same candidate table, cost model and
 * op_<id> body the compiler emits), compiles them with NVRTC for the
 * device, and for each: fills a NaN-poisoned output, compares every
 * element (small shapes) or a sample plus the last row and column (large
 * ones) with a double-precision host reference, and times a CUDA graph of
 * repeated launches between events (median of 5 replays). Prints one line
 * per candidate, then per shape the heuristic's pick and the fastest, and
 * "RESULT {json}" lines that bench/gpu_gemm.py reads to put cuBLAS beside.
 * --min-blocks2 compiles configurations of at most 113 KB of shared memory
 * with __launch_bounds__(threads, 2) (emit.c's kernels have no minimum).
 * --define puts #defines before the templates (variants they select).
 * --cands "wgt 128x96x64 st8 ws1;..." runs only the candidates so named
 * (one kernel each under ncu); a shape whose heuristic choice is not among
 * them prints no RESULT line.
 * --save DIR writes each shape's program and cubin there (DIR/NAME.cu,
 * DIR/NAME.cubin) for cuobjdump. --compile-only needs no GPU: it builds every program for sm_90a (an
 * H100 with 132 SMs stands in for the device) and stops; with --rank it also lists each shape's candidates
 * by the cost model's estimate, cheapest first. --rank-only lists them without building anything.
 * Exit status 1 when any candidate computes a wrong result, 7 without a GPU.
 */
#include "../src/target/cuda/emit_gemm.c" /* the candidates, the cost model and emit_call */

#include "runtime/cuda.h"
#include "target/cuda/nvrtc.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

enum { EPI_NONE, EPI_BIAS_GELU, EPI_BIAS_RES };
static const char *const epi_names[] = {"none", "bias_gelu", "bias_res"};

typedef struct shape {
    const char *name;
    int64_t batch, m, n, k;
    int la, lb;        /* 0: K contiguous; 1: M / N contiguous */
    kiln_dtype dt;     /* storage of A, B and C */
    int epi;           /* epilogue: EPI_NONE, EPI_BIAS_GELU (per-column bias, GELU), EPI_BIAS_RES (bias, residual) */
    bool timed;        /* correctness only when false */
} shape;

/* The linear layers' weights are K-major (lb 0): the cuda target stores a
 * MatMul's weight transposed (emit.c, plan_kmajor_weights). */
#define BERT(tag, m)                                                                                          \
    {tag "_qkv", 1, m, 2304, 768, 0, 0, KILN_F16, EPI_NONE, true},                                            \
        {tag "_attn_out", 1, m, 768, 768, 0, 0, KILN_F16, EPI_NONE, true},                                    \
        {tag "_ffn1", 1, m, 3072, 768, 0, 0, KILN_F16, EPI_NONE, true},                                       \
        {tag "_ffn2", 1, m, 768, 3072, 0, 0, KILN_F16, EPI_NONE, true},                                       \
        {tag "_qk", (m) / 128 * 12, 128, 128, 64, 0, 1, KILN_F16, EPI_NONE, true},                            \
        {tag "_pv", (m) / 128 * 12, 128, 64, 128, 0, 1, KILN_F16, EPI_NONE, true}

static const shape shapes[] = {
    {"sq8192", 1, 8192, 8192, 8192, 0, 1, KILN_F16, EPI_NONE, true},
    BERT("bert1", 128),
    BERT("bert16", 2048),
    /* ViT-B/16 at batch 1: 197 tokens */
    {"vit_qkv", 1, 197, 2304, 768, 0, 0, KILN_F16, EPI_NONE, true},
    {"vit_out", 1, 197, 768, 768, 0, 0, KILN_F16, EPI_BIAS_RES, true},
    {"vit_fc1", 1, 197, 3072, 768, 0, 0, KILN_F16, EPI_BIAS_GELU, true},
    {"vit_fc2", 1, 197, 768, 3072, 0, 0, KILN_F16, EPI_BIAS_RES, true},
    {"bert16_ffn1_bias_gelu", 1, 2048, 3072, 768, 0, 0, KILN_F16, EPI_BIAS_GELU, true},
    /* BERT's FFN2 as the model has it */
    {"bert16_ffn2_bias_res", 1, 2048, 768, 3072, 0, 0, KILN_F16, EPI_BIAS_RES, true},
    {"bert16_ffn1_nmajor", 1, 2048, 3072, 768, 0, 1, KILN_F16, EPI_NONE, true}, /* B as ONNX stores it */
    /* one row: ResNet-50's fc (bias only in the model; the residual here exercises the epilogue), BERT's
     * pooler, ViT-B/16's head at batch 1 (kg_gemm_gemv among the candidates); 8 rows, where it is not */
    {"resnet_fc", 1, 1, 1000, 2048, 0, 0, KILN_F16, EPI_BIAS_RES, true},
    {"bert1_pooler", 1, 1, 768, 768, 0, 0, KILN_F16, EPI_BIAS_GELU, true},
    {"vit_head", 1, 1, 1000, 768, 0, 0, KILN_F16, EPI_NONE, true},
    {"rows8_8x3072x768", 1, 8, 3072, 768, 0, 0, KILN_F16, EPI_BIAS_GELU, true},
    {"sq4096_bf16", 1, 4096, 4096, 4096, 0, 1, KILN_BF16, EPI_NONE, true},
    {"sq2048_f32", 1, 2048, 2048, 2048, 0, 1, KILN_F32, EPI_NONE, true},
    /* correctness: every layout, edges of tiles and k-tiles */
    {"chk_104x72x40_kk", 1, 104, 72, 40, 0, 0, KILN_F16, EPI_NONE, false},
    {"chk_104x72x40_kn", 1, 104, 72, 40, 0, 1, KILN_F16, EPI_NONE, false},
    {"chk_104x72x40_mk", 1, 104, 72, 40, 1, 0, KILN_F16, EPI_NONE, false},
    {"chk_104x72x40_mn", 1, 104, 72, 40, 1, 1, KILN_F16, EPI_BIAS_GELU, false},
    {"chk_100x72x40_kn", 1, 100, 72, 40, 0, 1, KILN_F16, EPI_NONE, false},
    {"chk_264x48x264_kn", 1, 264, 48, 264, 0, 1, KILN_F16, EPI_NONE, false},
    {"chk_264x48x264_mk", 1, 264, 48, 264, 1, 0, KILN_BF16, EPI_BIAS_GELU, false},
    {"chk_b3_257x136x96_kn", 3, 257, 136, 96, 0, 1, KILN_F16, EPI_BIAS_GELU, false},
    {"chk_b3_264x136x96_mn", 3, 264, 136, 96, 1, 1, KILN_BF16, EPI_BIAS_RES, false},
    {"chk_b3_100x72x1000_kn", 3, 100, 72, 1000, 0, 1, KILN_F16, EPI_BIAS_GELU, false}, /* split-K, uneven splits */
    {"chk_200x300x200_kk", 1, 200, 300, 200, 0, 0, KILN_F16, EPI_BIAS_RES, false},    /* widths 32..144, ragged */
    {"chk_200x100x1000_kk", 1, 200, 100, 1000, 0, 0, KILN_BF16, EPI_BIAS_GELU, false}, /* TMA split-K, ragged */
    /* splits summed in a cluster: ragged rows and columns, the last split shorter */
    {"chk_150x200x1600_kk", 1, 150, 200, 1600, 0, 0, KILN_F16, EPI_BIAS_RES, false},
    /* kg_gemm_wgt_ws in clusters: every layout, ragged rows, columns and k */
    {"chk_pair_264x256x200_mn", 1, 264, 256, 200, 1, 1, KILN_F16, EPI_BIAS_GELU, false},
    {"chk_pair_264x248x200_km", 1, 264, 248, 200, 0, 1, KILN_BF16, EPI_BIAS_RES, false},
    {"chk_pair_200x384x136_mk", 1, 200, 384, 136, 1, 0, KILN_F16, EPI_NONE, false},
    {"chk_odd_f16_37x45x29", 1, 37, 45, 29, 0, 1, KILN_F16, EPI_BIAS_GELU, false},
    {"chk_odd_f32_37x45x29_kk", 2, 37, 45, 29, 0, 0, KILN_F32, EPI_BIAS_GELU, false},
    {"chk_odd_f32_37x45x29_mn", 1, 37, 45, 29, 1, 1, KILN_F32, EPI_BIAS_RES, false},
    {"chk_k0_16x24x0", 1, 16, 24, 0, 0, 1, KILN_F16, EPI_BIAS_GELU, false},
    /* kg_gemm_gemv: a short last chunk, columns past the last warp's, batches, fp32 and bf16 */
    {"chk_gemv_b2_1x37x203_kk", 2, 1, 37, 203, 0, 0, KILN_F16, EPI_BIAS_RES, false},
    {"chk_gemv_1x300x40_kk", 1, 1, 300, 40, 0, 0, KILN_BF16, EPI_BIAS_GELU, false},
    {"chk_gemv_f32_1x45x29_kk", 1, 1, 45, 29, 0, 0, KILN_F32, EPI_BIAS_RES, false},
};

#define N_SHAPES ((int)KILN_COUNT(shapes))

/* A convolution as the product gemm_analyse makes of it (its form 5, A the
 * im2col matrix of x; emit_gemm.c's cg_im2col): x NHWC [imgs][h][w][c],
 * the weights [n][kh][kw][c] (B K-major, k ordered kh, kw, c), y NHWC
 * [imgs oh ow][n]; ph, pw the leading pads. s is its product: one batch of
 * m = imgs oh ow rows, k = kh kw c, A and B K-major. */
typedef struct conv_shape {
    shape s;
    int64_t imgs, h, w, c, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
    int operand; /* the im2col one: 1 A (form 5, m = imgs oh ow, y NHWC), 2 B (form 6, one image, n = oh ow, y NCHW) */
} conv_shape;

/* A convolution's output extent along one axis: `in` pixels, a filter of
 * f taps dilated by d, stride s, pads p0 before and p1 after (ONNX's). */
#define CONV_OUT(in, f, s, d, p0, p1) (((in) + (p0) + (p1) - (d) * ((f) - 1) - 1) / (s) + 1)

/* x [imgs][h][w][c] by n filters of kh x kw taps: strides sh x sw,
 * dilations dh x dw, pads ph x pw before and qh x qw after. */
#define CONV(name, imgs, h, w, c, n, kh, kw, sh, sw, dh, dw, ph, pw, qh, qw, dt, epi, timed)                        \
    {{name, 1, (imgs) * CONV_OUT(h, kh, sh, dh, ph, qh) * CONV_OUT(w, kw, sw, dw, pw, qw), n, (kh) * (kw) * (c),    \
      0, 0, dt, epi, timed},                                                                                         \
     imgs, h, w, c, kh, kw, sh, sw, ph, pw, dh, dw, CONV_OUT(h, kh, sh, dh, ph, qh), CONV_OUT(w, kw, sw, dw, pw, qw), 1}

/* The same of one image with B the im2col operand (form 6): y [n][oh ow]. */
#define CONV_B(name, h, w, c, n, kh, kw, sh, sw, dh, dw, ph, pw, qh, qw, dt, epi, timed)                             \
    {{name, 1, n, CONV_OUT(h, kh, sh, dh, ph, qh) * CONV_OUT(w, kw, sw, dw, pw, qw), (kh) * (kw) * (c), 0, 0, dt,    \
      epi, timed},                                                                                                   \
     1, h, w, c, kh, kw, sh, sw, ph, pw, dh, dw, CONV_OUT(h, kh, sh, dh, ph, qh), CONV_OUT(w, kw, sw, dw, pw, qw), 2}

static const conv_shape convs[] = {
    /* ResNet-50's 3x3 convolutions at batch 1, one of each stage (the
     * stride-2 one opens stage 2; 56 + 2 - 3 is odd, so the last row of
     * taps stops short of the trailing pad) */
    CONV("conv_r50_l1", 1, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, KILN_F16, EPI_NONE, true),
    CONV("conv_r50_l2s2", 1, 56, 56, 128, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, KILN_F16, EPI_NONE, true),
    CONV("conv_r50_l3", 1, 14, 14, 256, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, KILN_F16, EPI_NONE, true),
    CONV("conv_r50_l4", 1, 7, 7, 512, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, KILN_F16, EPI_NONE, true),
    /* correctness: tiles that start mid-row of y and cross images, ragged
     * rows; two images, H != W, a stride along W only, 40 filters (ragged
     * columns), splits through the workspace */
    CONV("chk_conv_b2_9x13_sw2", 2, 9, 13, 64, 40, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, KILN_F16, EPI_BIAS_GELU, false),
    /* dilation 2, a stride along H only; kg_gemm_wgt_ws in clusters of two */
    CONV("chk_conv_15x14_sh2_d2", 1, 15, 14, 64, 128, 3, 3, 2, 1, 2, 2, 2, 2, 2, 2, KILN_BF16, EPI_BIAS_RES, false),
    /* 5x5 taps, leading pads 2 x 1 and trailing 1 x 2; 25 k-tiles, so also
     * two splits summed in a cluster, the last one shorter */
    CONV("chk_conv_b2_12x10_5x5_p21", 2, 12, 10, 64, 72, 5, 5, 1, 1, 1, 1, 2, 1, 1, 2, KILN_F16, EPI_BIAS_GELU, false),
    /* 1x3 taps of 192 channels (three k-tiles a tap) */
    CONV("chk_conv_b2_7x20_1x3", 2, 7, 20, 192, 256, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, KILN_F16, EPI_NONE, false),
    /* B the im2col operand: GoogLeNet's inception 3b 3x3 (128 -> 192 on
     * 28 x 28, y read by a Concat); 35 ragged pixels by 40 filters, stride
     * 2; 5x5 with asymmetric pads and a residual in bf16 */
    CONV_B("conv_g3b_b", 28, 28, 128, 192, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, KILN_F16, EPI_NONE, true),
    CONV_B("chk_conv_b_9x13_s2", 9, 13, 64, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, KILN_F16, EPI_BIAS_GELU, false),
    CONV_B("chk_conv_b_12x10_5x5_p21", 12, 10, 128, 72, 5, 5, 1, 1, 1, 1, 2, 1, 1, 2, KILN_BF16, EPI_BIAS_RES, false),
};

#define N_CONVS ((int)KILN_COUNT(convs))

/* The convolution whose product s is, NULL for the plain products of shapes[]. */
static const conv_shape *conv_of(const shape *s)
{
    for (int i = 0; i < N_CONVS; i++)
        if (s == &convs[i].s) return &convs[i];
    return NULL;
}

#define N_REPLAYS 5
#define N_SAMPLES 2048

static int n_failed;
static bool ctx_lost; /* a kernel faulted: the CUDA context is gone */
static cg_gpu dv_gpu; /* the device, as emit_gemm.c's cost model sees it */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t dt_bytes(kiln_dtype t) { return t == KILN_F32 ? 4 : 2; }

static float load_elem(const void *p, int64_t i, kiln_dtype t)
{
    if (t == KILN_F16) return base_f16_to_f32(((const uint16_t *)p)[i]);
    if (t == KILN_BF16) return base_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

static void store_elem(void *p, int64_t i, float v, kiln_dtype t)
{
    if (t == KILN_F16) ((uint16_t *)p)[i] = base_f32_to_f16(v);
    else if (t == KILN_BF16) ((uint16_t *)p)[i] = base_f32_to_bf16(v);
    else ((float *)p)[i] = v;
}

static uint64_t rng_state = 88172645463325252ull;
static float rnd(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The problem emit_gemm.c would see for s (no IR behind it: emit_call and
 * the candidate functions read only these fields). */
static void problem_of(const shape *s, gemm_problem *g)
{
    memset(g, 0, sizeof(*g));
    g->m = s->m;
    g->n = s->n;
    g->k = s->k;
    g->la = s->la;
    g->lb = s->lb;
    g->lda = s->la ? s->m : s->k;
    g->ldb = s->lb ? s->n : s->k;
    g->n_batch = s->batch;
    g->sa = g->sb = g->sy = s->dt;
    g->sbias = g->sres = s->dt;
    g->alpha = g->beta = 1.0f;
    g->ep.scale = 1.0f;
    if (s->epi != EPI_NONE) g->bias_cs = 1;
    if (s->epi == EPI_BIAS_GELU) g->ep.act = PASS_ACT_GELU;
    const conv_shape *v = conv_of(s);
    if (v) { /* gemm_analyse's form 5: m, n, k, la, lb, lda and ldb are already its */
        g->im2col = v->operand;
        g->cv.imgs = v->imgs;
        g->cv.c = v->c;
        g->cv.h = v->h;
        g->cv.w = v->w;
        g->cv.oh = v->oh;
        g->cv.ow = v->ow;
        g->cv.kh = v->kh;
        g->cv.kw = v->kw;
        g->cv.sh = v->sh;
        g->cv.sw = v->sw;
        g->cv.ph = v->ph;
        g->cv.pw = v->pw;
        g->cv.dh = v->dh;
        g->cv.dw = v->dw;
        g->b_kmajor = v->operand == 1;
    }
    g->tc = gemm_tc_ok(g);
}

/* The elements A (operand 1) or B (2) is stored in: a convolution's x
 * where it is the im2col operand (the matrix is never stored), else
 * batch x m x k or batch x k x n. */
static int64_t operand_elems(const shape *s, int operand)
{
    const conv_shape *v = conv_of(s);
    if (v && v->operand == operand) return v->imgs * v->h * v->w * v->c;
    return s->batch * s->k * (operand == 1 ? s->m : s->n);
}

/* Offsets in the device buffer: A, B, C, bias, residual, each 256-byte aligned. */
typedef struct layout {
    size_t a, b, c, bias, res, total;
} layout;

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static layout layout_of(const shape *s)
{
    size_t e = dt_bytes(s->dt);
    layout l;
    l.a = 0;
    l.b = align256(l.a + (size_t)operand_elems(s, 1) * e + 16);
    l.c = align256(l.b + (size_t)operand_elems(s, 2) * e + 16);
    l.bias = align256(l.c + (size_t)(s->batch * s->m * s->n) * e);
    l.res = align256(l.bias + (size_t)s->n * e);
    l.total = align256(l.res + (size_t)(s->batch * s->m * s->n) * e) + 256;
    return l;
}

/* kg_gemm_wgt's operands for one batch: A and B at their layout_of offsets
 * in the one buffer, which stands for the arena. */
static void problem_tma(const shape *s, gemm_problem *g)
{
    layout l = layout_of(s);
    g->tma = g->tc && s->batch == 1 && s->m > 0 && s->n > 0 && s->k > 0;
    g->off_a = l.a;
    g->off_b = l.b;
    /* what cg_conv_product checks before it plans an im2col product: a
     * table row that breaks it is a mistake in this file */
    KILN_ASSERT(!g->im2col || (g->tma && g->cv.c % 64 == 0));
}

/* One CUDA file with every candidate of s: op_i and kernel k_i. */
static bool min_blocks2; /* --min-blocks2: __launch_bounds__(threads, 2) where two blocks fit by shared memory */
static const char *defines; /* --define NAME=VALUE[,NAME=VALUE...]: #defines before the prelude (template variants) */
static const char *only_cands; /* --cands NAME;NAME...: time only these candidates (cfg_name) */

static char *source_of(const shape *s, const gemm_problem *g, const gemm_cfg *cands, int n, rt_gtmap *tmaps,
                       int *n_tmaps)
{
    base_str src;
    base_str_init(&src);
    for (const char *p = defines; p && *p;) {
        size_t len = strcspn(p, ","), eq = strcspn(p, "=");
        if (eq < len) base_str_printf(&src, "#define %.*s %.*s\n", (int)eq, p, (int)(len - eq - 1), p + eq + 1);
        p += len + (p[len] == ',');
    }
    /* the prelude exactly as the compiler writes it */
    base_diag d;
    base_diag_init(&d);
    cg_emitter pe = {.d = &d};
    if (cg_need(&pe, "kg_math.h") != KILN_OK || cg_need(&pe, "kg_gemm.cuh") != KILN_OK ||
        cg_prelude(&pe, &src) != KILN_OK) {
        fprintf(stderr, "gpu_gemm: %s\n", base_diag_text(&d));
        exit(1);
    }
    base_diag_free(&d);
    layout l = layout_of(s);
    const char *ty = cg_type(s->dt);
    char pa[96], pb[96], pc[96], pbias[96], pres[96];
    snprintf(pa, sizeof(pa), "((const %s *)(c->arena + %zu))", ty, l.a);
    snprintf(pb, sizeof(pb), "((const %s *)(c->arena + %zu))", ty, l.b);
    snprintf(pc, sizeof(pc), "((%s *)(c->arena + %zu))", ty, l.c);
    snprintf(pbias, sizeof(pbias), "((const %s *)(c->arena + %zu))", ty, l.bias);
    snprintf(pres, sizeof(pres), "((const %s *)(c->arena + %zu))", ty, l.res);
    for (int i = 0; i < n; i++) {
        int64_t tiles = cdiv(g->m, cands[i].bm) * cdiv(g->n, cands[i].bn);
        base_str_printf(&src, "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n    kg_gemm_args g;\n", i);
        emit_split(&src, &cands[i]);
        base_str_printf(&src,
                        "    int b = t / %lld;\n    t %%= %lld;\n    kg_i64 oa = (kg_i64)b * %lldLL, ob = (kg_i64)b * "
                        "%lldLL, oc = (kg_i64)b * %lldLL;\n",
                        (long long)tiles, (long long)tiles, (long long)(s->m * s->k), (long long)(s->k * s->n),
                        (long long)(s->m * s->n));
        int ta = -1, tb = -1;
        if (cands[i].kind == GEMM_WGT) {
            ta = (*n_tmaps)++;
            tb = (*n_tmaps)++;
            gemm_tmaps(g, &cands[i], &tmaps[ta], &tmaps[tb]);
        }
        /* one candidate timed at a time: its split-K partials at the workspace's start */
        cg_op at_start = {.splitk = cands[i].splits > 1};
        emit_call(&src, g, &cands[i], pa, pb, pc, s->epi != EPI_NONE ? pbias : NULL,
                  s->epi == EPI_BIAS_RES ? pres : NULL, ta, tb, NULL, &at_start);
        /* two blocks: half the shared memory, and 128 registers a thread at 256 threads (bn/2 accumulators) */
        bool two = cfg_smem(&cands[i]) <= 113 * 1024 && (cfg_threads(&cands[i]) <= 128 || cands[i].bn <= 128);
        int min_blocks = min_blocks2 && two ? 2 : 1;
        char kname[32];
        snprintf(kname, sizeof(kname), "k_%d", i);
        cg_kernel_head(&src, kname, cfg_threads(&cands[i]), min_blocks, cfg_cluster(&cands[i]), true);
        base_str_printf(&src, "    for (int t = blockIdx.x; t < %lld; t += gridDim.x) op_%d(c, t);\n}\n\n",
                        (long long)cfg_rtasks(g, &cands[i]), i);
    }
    if (*n_tmaps) base_str_printf(&src, "__device__ kg_tmap kg_tmaps[%d];\n", *n_tmaps);
    char *out = src.oom ? NULL : strdup(base_str_get(&src));
    base_str_free(&src);
    return out;
}

/* ---- compiling every shape's program on several threads --------------------------- */

typedef struct job {
    const shape *s;
    gemm_problem g;
    gemm_cfg cands[MAX_CANDS];
    int n_cands, heuristic;
    rt_gtmap tmaps[2 * MAX_CANDS]; /* two per kg_gemm_wgt candidate */
    int n_tmaps;
    char *src;
    void *cubin;
    size_t cubin_bytes;
    kiln_status st;
    char err[2048];
    double compile_s;
} job;

typedef struct pool {
    job *jobs;
    int n, next;
    int sm_major, sm_minor;
    pthread_mutex_t lock;
} pool;

static void *compile_worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n) return NULL;
        job *j = &p->jobs[i];
        base_diag d;
        base_diag_init(&d);
        double t0 = now_s();
        j->st = j->src ? cg_nvrtc_compile(j->src, j->s->name, p->sm_major, p->sm_minor, p->sm_major >= 9, &j->cubin,
                                          &j->cubin_bytes, &d)
                       : KILN_ERR_OOM;
        j->compile_s = now_s() - t0;
        if (j->st != KILN_OK) snprintf(j->err, sizeof(j->err), "%s", base_diag_text(&d));
        base_diag_free(&d);
    }
}

/* ---- running one shape --------------------------------------------------------------- */

static double act_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* Where element (pixel i, k) of convolution v's im2col matrix is in x; -1
 * where the tap falls in the padding (a zero). Pixel i is output pixel
 * (img, oh, ow), k tap (fh, fw) of channel ch: x at pixel (oh sh - ph +
 * fh dh, ow sw - pw + fw dw) of image img. */
static int64_t im2col_index(const conv_shape *v, int64_t i, int64_t k)
{
    int64_t img = i / (v->oh * v->ow), oh = i / v->ow % v->oh, ow = i % v->ow;
    int64_t tap = k / v->c, ch = k % v->c, fh = tap / v->kw, fw = tap % v->kw;
    int64_t ih = oh * v->sh - v->ph + fh * v->dh, iw = ow * v->sw - v->pw + fw * v->dw;
    if (ih < 0 || ih >= v->h || iw < 0 || iw >= v->w) return -1;
    return ((img * v->h + ih) * v->w + iw) * v->c + ch;
}

/* The reference of C[b][i][j] from the host copies. */
static double reference(const shape *s, const void *ha, const void *hb, const void *hbias, const void *hres,
                        int64_t b, int64_t i, int64_t j)
{
    const conv_shape *v = conv_of(s);
    double acc = 0;
    for (int64_t k = 0; k < s->k; k++) {
        int64_t ia = v && v->operand == 1 ? im2col_index(v, i, k)
                                          : b * s->m * s->k + (s->la ? k * s->m + i : i * s->k + k);
        int64_t ib = v && v->operand == 2 ? im2col_index(v, j, k)
                                          : b * s->k * s->n + (s->lb ? k * s->n + j : j * s->k + k);
        if (ia < 0 || ib < 0) continue;
        acc += (double)load_elem(ha, ia, s->dt) * (double)load_elem(hb, ib, s->dt);
    }
    if (s->epi == EPI_BIAS_GELU) acc = act_gelu(acc + load_elem(hbias, j, s->dt));
    if (s->epi == EPI_BIAS_RES)
        acc = acc + load_elem(hbias, j, s->dt) + load_elem(hres, (b * s->m + i) * s->n + j, s->dt);
    return acc;
}

/* The elements checked: all of them (small shapes) or a sample plus the
 * last row and column of the last batch; and their reference values. */
typedef struct checks {
    int64_t n, *idx;
    double *ref, rms;
} checks;

static bool checks_init(checks *c, const shape *s, const void *ha, const void *hb, const void *hbias,
                        const void *hres)
{
    int64_t total = s->batch * s->m * s->n;
    c->n = !s->timed || total <= 65536 ? total : N_SAMPLES + s->m + s->n;
    c->ref = malloc((size_t)(c->n + 1) * sizeof(double));
    c->idx = malloc((size_t)(c->n + 1) * sizeof(int64_t));
    if (!c->ref || !c->idx) return false;
    uint64_t st = 12345;
    int64_t last = (s->batch - 1) * s->m * s->n;
    for (int64_t t = 0; t < c->n; t++) {
        if (c->n == total) c->idx[t] = t;
        else if (t < N_SAMPLES) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            c->idx[t] = (int64_t)((st >> 17) % (uint64_t)total);
        } else if (t < N_SAMPLES + s->m) {
            c->idx[t] = last + (t - N_SAMPLES) * s->n + s->n - 1;
        } else {
            c->idx[t] = last + (s->m - 1) * s->n + (t - N_SAMPLES - s->m);
        }
    }
    double ss = 0;
    for (int64_t t = 0; t < c->n; t++) {
        int64_t e = c->idx[t], b = e / (s->m * s->n), i = e / s->n % s->m, j = e % s->n;
        c->ref[t] = reference(s, ha, hb, hbias, hres, b, i, j);
        ss += c->ref[t] * c->ref[t];
    }
    c->rms = sqrt(ss / (double)(c->n ? c->n : 1)) + 1e-30;
    return true;
}

/* Worst error of the output hc over the checked elements, relative to
 * |ref| + the reference's RMS; NaN (an unwritten output) stays NaN. */
static double checks_worst(const checks *c, const shape *s, const void *hc)
{
    double worst = 0;
    for (int64_t t = 0; t < c->n; t++) {
        double out = load_elem(hc, c->idx[t], s->dt);
        double err = fabs(out - c->ref[t]) / (fabs(c->ref[t]) + c->rms);
        if (!(err <= worst)) worst = err;
    }
    return worst;
}

static double tolerance(kiln_dtype t) { return t == KILN_F32 ? 1e-5 : t == KILN_F16 ? 4e-3 : 3e-2; }

typedef struct device {
    const rt_cuda_api *cu;
    CUstream stream;
    CUevent e0, e1;
} device;

/* Microseconds per launch of fn: a graph of `reps` launches, median of
 * N_REPLAYS replays between events; < 0 on error. */
static double time_kernel(device *dv, CUfunction fn, unsigned grid, unsigned block, unsigned smem, void **args,
                          int reps, base_diag *d)
{
    rt_cuda_graph gr = {0};
    kiln_status st = rt_cuda_graph_begin(dv->stream, d);
    for (int i = 0; i < reps && st == KILN_OK; i++) st = rt_cuda_launch(fn, grid, block, smem, dv->stream, args, d);
    kiln_status end = rt_cuda_graph_end(dv->stream, &gr, d);
    if (st == KILN_OK) st = end;
    double t[N_REPLAYS];
    if (st == KILN_OK) st = rt_cuda_graph_launch(&gr, dv->stream, d); /* warm-up */
    for (int r = 0; r < N_REPLAYS && st == KILN_OK; r++) {
        float ms = 0;
        st = KILN_CU_CHECK(d, dv->cu->cuEventRecord(dv->e0, dv->stream));
        if (st == KILN_OK) st = rt_cuda_graph_launch(&gr, dv->stream, d);
        if (st == KILN_OK) st = KILN_CU_CHECK(d, dv->cu->cuEventRecord(dv->e1, dv->stream));
        if (st == KILN_OK) st = rt_cuda_stream_sync(dv->stream, d);
        if (st == KILN_OK) st = KILN_CU_CHECK(d, dv->cu->cuEventElapsedTime(&ms, dv->e0, dv->e1));
        t[r] = (double)ms * 1e3 / reps;
    }
    rt_cuda_graph_free(&gr);
    if (st != KILN_OK) return -1;
    for (int a = 1; a < N_REPLAYS; a++) /* insertion sort for the median */
        for (int b = a; b > 0 && t[b - 1] > t[b]; b--) {
            double x = t[b];
            t[b] = t[b - 1];
            t[b - 1] = x;
        }
    return t[N_REPLAYS / 2];
}

static void cfg_name(const gemm_cfg *c, char *buf, size_t n)
{
    if (c->kind == GEMM_SIMT) snprintf(buf, n, "simt %dx%d", c->bm, c->bn);
    else if (c->kind == GEMM_GEMV) snprintf(buf, n, "gemv w%dx%d a%d", c->wm, c->wn, c->stages);
    else if (c->kind == GEMM_WG) snprintf(buf, n, "wg %dx%dx%d st%d", c->bm, c->bn, c->bk, c->stages);
    else {
        int len = c->kind == GEMM_WGT
                      ? snprintf(buf, n, "wgt %dx%dx64 st%d", c->bm, c->bn, c->stages)
                      : snprintf(buf, n, "tc %dx%dx%d w%dx%d ks%d st%d", c->bm, c->bn, c->bk, c->wm, c->wn, c->ks,
                                 c->stages);
        if (c->splits > 1 && len > 0 && (size_t)len < n)
            len += snprintf(buf + len, n - (size_t)len, " sk%d", c->splits);
        if (c->cn && len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, " ws%d", c->cn);
        if (c->cs && len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, " cs");
    }
}

/* --rank: the candidates by the cost model's estimate, cheapest first. */
static void print_ranking(const job *j)
{
    int order[MAX_CANDS];
    double cost[MAX_CANDS];
    for (int i = 0; i < j->n_cands; i++) {
        order[i] = i;
        cost[i] = gemm_cost(&j->g, &j->cands[i], &dv_gpu, 0);
    }
    for (int i = 1; i < j->n_cands; i++) /* insertion sort: a few tens */
        for (int k = i; k > 0 && cost[order[k]] < cost[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    for (int i = 0; i < j->n_cands; i++) {
        char cn[64];
        cfg_name(&j->cands[order[i]], cn, sizeof(cn));
        printf("    %-34s model %.4g\n", cn, cost[order[i]]);
    }
}

/* Whether `name` is one of the ';'-separated names in `list`. */
static bool name_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static void run_shape(device *dv, job *j, bool heuristic_only, FILE *csv, base_diag *d)
{
    const shape *s = j->s;
    if (j->st != KILN_OK) {
        printf("FAIL %s: does not compile\n%s\n", s->name, j->err);
        n_failed++;
        return;
    }
    layout l = layout_of(s);
    size_t e = dt_bytes(s->dt);
    int64_t na = operand_elems(s, 1), nb = operand_elems(s, 2), nc = s->batch * s->m * s->n;
    void *host = calloc(1, l.total);
    void *hc = malloc((size_t)nc * e + 1);
    CUdeviceptr buf = 0, gctx = 0;
    CUmodule mod = NULL;
    checks chk = {0};
    if (!host || !hc) {
        printf("FAIL %s: out of host memory\n", s->name);
        n_failed++;
        free(host);
        free(hc);
        return;
    }
    unsigned char *hbase = host;
    for (int64_t i = 0; i < na; i++) store_elem(hbase + l.a, i, rnd(), s->dt);
    for (int64_t i = 0; i < nb; i++) store_elem(hbase + l.b, i, rnd(), s->dt);
    for (int64_t i = 0; i < s->n; i++) store_elem(hbase + l.bias, i, rnd(), s->dt);
    for (int64_t i = 0; s->epi == EPI_BIAS_RES && i < nc; i++) store_elem(hbase + l.res, i, rnd(), s->dt);
    kiln_status st = rt_cuda_alloc(l.total, &buf, d);
    if (st == KILN_OK) st = rt_cuda_alloc(64, &gctx, d);
    if (st == KILN_OK) st = rt_cuda_copy_to_device(buf, host, l.total, d);
    if (st == KILN_OK) {
        kiln_gctx ctx = {.arena = buf, .weights = buf, .io = 0, .fail = gctx + 32};
        st = rt_cuda_copy_to_device(gctx, &ctx, sizeof(ctx), d);
        if (st == KILN_OK) st = KILN_CU_CHECK(d, dv->cu->cuMemsetD8(gctx + 32, 0, 8));
    }
    if (st == KILN_OK) st = rt_cuda_module_load(j->cubin, j->cubin_bytes, &mod, d);
    if (st == KILN_OK) st = rt_cuda_fill_tmaps(mod, j->tmaps, j->n_tmaps, buf, l.total, buf, l.total, d);
    if (st != KILN_OK) {
        printf("FAIL %s: %s\n", s->name, base_diag_text(d));
        base_diag_clear(d);
        n_failed++;
        goto done;
    }
    if (!checks_init(&chk, s, hbase + l.a, hbase + l.b, hbase + l.bias, hbase + l.res)) {
        printf("FAIL %s: out of host memory\n", s->name);
        n_failed++;
        goto done;
    }
    double flop = 2.0 * (double)s->batch * (double)s->m * (double)s->n * (double)s->k;
    int best = -1;
    double best_us = 0, heur_us = -1, heur_err = 0;
    const conv_shape *v = conv_of(s);
    char a_what[160];
    if (v)
        snprintf(a_what, sizeof(a_what), "%s im2col of x %lldx%lldx%lldx%lld, filter %lldx%lld, stride %lldx%lld, "
                 "dilation %lldx%lld, leading pads %lldx%lld", v->operand == 1 ? "A" : "B", (long long)v->imgs,
                 (long long)v->h, (long long)v->w,
                 (long long)v->c, (long long)v->kh, (long long)v->kw, (long long)v->sh, (long long)v->sw,
                 (long long)v->dh, (long long)v->dw, (long long)v->ph, (long long)v->pw);
    else snprintf(a_what, sizeof(a_what), "%s", s->la ? "A m-major" : "A k-major");
    printf("%s: batch %lld, m %lld n %lld k %lld, %s, %s%s; %d candidates (compiled in %.1f s)\n", s->name,
           (long long)s->batch, (long long)s->m, (long long)s->n, (long long)s->k, kiln_dtype_name(s->dt), a_what,
           s->lb ? ", B n-major" : ", B k-major", j->n_cands, j->compile_s);
    for (int i = 0; i < j->n_cands; i++) {
        if (heuristic_only && i != j->heuristic) continue;
        const gemm_cfg *c = &j->cands[i];
        char name[16], cn[64];
        snprintf(name, sizeof(name), "k_%d", i);
        cfg_name(c, cn, sizeof(cn));
        if (only_cands && !name_listed(only_cands, cn)) continue;
        CUfunction fn;
        unsigned grid = (unsigned)KILN_MIN(cfg_rtasks(&j->g, c), 1 << 20), block = (unsigned)cfg_threads(c),
                 smem = (unsigned)cfg_smem(c);
        void *args[] = {&gctx};
        st = rt_cuda_module_function(mod, name, &fn, d);
        if (st == KILN_OK && smem > 48 * 1024) st = rt_cuda_function_set_smem(fn, (int)smem, d);
        if (st == KILN_OK) st = KILN_CU_CHECK(d, dv->cu->cuMemsetD8(buf + l.c, 0xff, (size_t)nc * e));
        if (st == KILN_OK) st = rt_cuda_launch(fn, grid, block, smem, dv->stream, args, d);
        if (st == KILN_OK) st = rt_cuda_stream_sync(dv->stream, d);
        if (st == KILN_OK) st = rt_cuda_copy_to_host(hc, buf + l.c, (size_t)nc * e, d);
        if (st != KILN_OK) {
            /* a failed launch or synchronisation usually means a fault: the
             * context is gone, nothing more can run */
            printf("  FAIL %-34s %s\n", cn, base_diag_text(d));
            base_diag_clear(d);
            n_failed++;
            ctx_lost = true;
            break;
        }
        double err = checks_worst(&chk, s, hc);
        bool ok = err <= tolerance(s->dt);
        if (!ok) n_failed++;
        double us = 0;
        if (s->timed) {
            double t1 = time_kernel(dv, fn, grid, block, smem, args, 1, d);
            int reps = t1 > 0 ? (int)KILN_MAX(1.0, KILN_MIN(500.0, 3000.0 / t1)) : 1;
            us = t1 > 0 ? time_kernel(dv, fn, grid, block, smem, args, reps, d) : -1;
            if (us < 0) {
                printf("  FAIL %-34s timing: %s\n", cn, base_diag_text(d));
                base_diag_clear(d);
                n_failed++;
                continue;
            }
            /* once more after the timed launches: split-K's tile counters
             * must have come back to zero */
            st = KILN_CU_CHECK(d, dv->cu->cuMemsetD8(buf + l.c, 0xff, (size_t)nc * e));
            if (st == KILN_OK) st = rt_cuda_launch(fn, grid, block, smem, dv->stream, args, d);
            if (st == KILN_OK) st = rt_cuda_stream_sync(dv->stream, d);
            if (st == KILN_OK) st = rt_cuda_copy_to_host(hc, buf + l.c, (size_t)nc * e, d);
            double again = st == KILN_OK ? checks_worst(&chk, s, hc) : INFINITY;
            if (st != KILN_OK) base_diag_clear(d);
            if (ok && !(again <= tolerance(s->dt))) {
                ok = false;
                n_failed++;
                err = again;
            }
        }
        printf("  %s%-34s %4d x %4u thr, %6.1f KB smem  err %.2e%s", i == j->heuristic ? "*" : " ", cn,
               (int)cfg_rtasks(&j->g, c), block, smem / 1024.0, err, ok ? "" : "  WRONG");
        if (s->timed) printf("  %9.2f us  %7.1f TFLOP/s  model %.3g", us, flop / us * 1e-6, gemm_cost(&j->g, c, &dv_gpu, 0));
        printf("\n");
        if (csv)
            fprintf(csv, "%s,%d,%s,%d,%.4f,%.3e,%d,%.4g\n", s->name, i, cn, i == j->heuristic, us, err, ok,
                    gemm_cost(&j->g, c, &dv_gpu, 0));
        if (ok && s->timed && (best < 0 || us < best_us)) {
            best = i;
            best_us = us;
        }
        if (i == j->heuristic) {
            heur_us = us;
            heur_err = err;
        }
    }
    if (s->timed && best >= 0 && heur_us < 0) { /* --cands left the heuristic's out */
        char bn[64];
        cfg_name(&j->cands[best], bn, sizeof(bn));
        printf("  => best of those run %s: %.2f us (%.1f TFLOP/s)\n", bn, best_us, flop / best_us * 1e-6);
    } else if (s->timed && best >= 0) {
        char bn[64], hn[64];
        cfg_name(&j->cands[best], bn, sizeof(bn));
        cfg_name(&j->cands[j->heuristic], hn, sizeof(hn));
        printf("  => heuristic %s: %.2f us (%.1f TFLOP/s); best %s: %.2f us (%.1f TFLOP/s)\n", hn, heur_us,
               flop / heur_us * 1e-6, bn, best_us, flop / best_us * 1e-6);
        printf("RESULT {\"name\": \"%s\", \"batch\": %lld, \"m\": %lld, \"n\": %lld, \"k\": %lld, \"la\": %d, \"lb\": %d, "
               "\"dtype\": \"%s\", \"epilogue\": \"%s\", \"heuristic_us\": %.4f, \"best_us\": %.4f, \"heuristic\": \"%s\", "
               "\"best\": \"%s\", \"heuristic_err\": %.3e}\n",
               s->name, (long long)s->batch, (long long)s->m, (long long)s->n, (long long)s->k, s->la, s->lb,
               kiln_dtype_name(s->dt), epi_names[s->epi], heur_us, best_us, hn, bn, heur_err);
    }
    fflush(stdout);
done:
    free(chk.ref);
    free(chk.idx);
    rt_cuda_module_free(mod);
    rt_cuda_free(buf);
    rt_cuda_free(gctx);
    free(host);
    free(hc);
}

int main(int argc, char **argv)
{
    const char *only = NULL, *csv_path = NULL, *save = NULL;
    bool heuristic_only = false, compile_only = false, rank = false, rank_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (!strcmp(argv[i], "--heuristic-only")) heuristic_only = true;
        else if (!strcmp(argv[i], "--compile-only")) compile_only = true;
        else if (!strcmp(argv[i], "--rank")) rank = true;
        else if (!strcmp(argv[i], "--rank-only")) rank_only = compile_only = rank = true;
        else if (!strcmp(argv[i], "--save") && i + 1 < argc) save = argv[++i];
        else if (!strcmp(argv[i], "--min-blocks2")) min_blocks2 = true;
        else if (!strcmp(argv[i], "--define") && i + 1 < argc) defines = argv[++i];
        else if (!strcmp(argv[i], "--cands") && i + 1 < argc) only_cands = argv[++i];
        else {
            fprintf(stderr, "usage: gpu_gemm [--shapes NAME,...] [--heuristic-only] [--csv FILE] [--compile-only [--rank]] [--rank-only] "
                            "[--save DIR] [--min-blocks2] [--define NAME=VALUE,...] [--cands NAME;...]\n");
            return 1;
        }
    }
    base_diag d;
    base_diag_init(&d);
    rt_cuda_ctx ctx;
    rt_cuda_device info = {.name = "no device (compiling only)", .sm_major = 9, .n_sms = 132,
                           .smem_per_block_optin_bytes = 227 * 1024, .l2_bytes = 50 << 20};
    if (!compile_only && (rt_cuda_open(&d) != KILN_OK || rt_cuda_device_info(0, &info, &d) != KILN_OK ||
                          rt_cuda_ctx_init(0, &ctx, &d) != KILN_OK)) {
        printf("no CUDA device (%s)\n", base_diag_text(&d));
        return 7;
    }
    dv_gpu = (cg_gpu){.sm_major = info.sm_major, .sm_minor = info.sm_minor, .n_sms = info.n_sms,
                      .smem_per_block_optin = info.smem_per_block_optin_bytes, .l2_bytes = info.l2_bytes,
                      .present = true};
    printf("%s: sm_%d%d, %d SMs, %d KB shared memory per block; NVRTC %d\n", info.name, info.sm_major, info.sm_minor,
           info.n_sms, info.smem_per_block_optin_bytes / 1024, cg_nvrtc_version());

    static job jobs[N_SHAPES + N_CONVS]; /* megabytes: not on the stack */
    int n_jobs = 0;
    for (int i = 0; i < N_SHAPES + N_CONVS; i++) {
        const shape *s = i < N_SHAPES ? &shapes[i] : &convs[i - N_SHAPES].s;
        if (only) {
            const char *p = strstr(only, s->name);
            size_t len = strlen(s->name);
            if (!p || (p != only && p[-1] != ',') || (p[len] && p[len] != ',')) continue;
        }
        job *j = &jobs[n_jobs++];
        memset(j, 0, sizeof(*j));
        j->s = s;
        problem_of(s, &j->g);
        problem_tma(s, &j->g);
        j->n_cands = gemm_candidates(&j->g, &dv_gpu, false, true, 255, j->cands); /* a kernel of its own: every register */
        const cg_emitter he = {.gpu = dv_gpu}; /* the kernels schedule's fastest */
        j->heuristic = gemm_heuristic(&he, &j->g, j->cands, j->n_cands);
        if (rank_only) {
            char hn[64];
            cfg_name(&j->cands[j->heuristic], hn, sizeof(hn));
            printf("%-24s %2d candidates; heuristic %s\n", s->name, j->n_cands, hn);
            print_ranking(j);
            continue;
        }
        j->src = source_of(s, &j->g, j->cands, j->n_cands, j->tmaps, &j->n_tmaps);
    }
    if (rank_only) return 0;
    pool p = {.jobs = jobs, .n = n_jobs, .sm_major = info.sm_major, .sm_minor = info.sm_minor};
    pthread_mutex_init(&p.lock, NULL);
    pthread_t th[16];
    int n_th = KILN_MIN(16, n_jobs);
    double t0 = now_s();
    for (int i = 0; i < n_th; i++) pthread_create(&th[i], NULL, compile_worker, &p);
    for (int i = 0; i < n_th; i++) pthread_join(th[i], NULL);
    printf("compiled %d programs in %.1f s\n", n_jobs, now_s() - t0);
    for (int i = 0; save && i < n_jobs; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s.cu", save, jobs[i].s->name);
        FILE *f = fopen(path, "w");
        if (f && jobs[i].src) fputs(jobs[i].src, f);
        if (f) fclose(f);
        snprintf(path, sizeof(path), "%s/%s.cubin", save, jobs[i].s->name);
        f = fopen(path, "wb");
        if (f && jobs[i].cubin) fwrite(jobs[i].cubin, 1, jobs[i].cubin_bytes, f);
        if (f) fclose(f);
    }
    if (compile_only) {
        for (int i = 0; i < n_jobs; i++) {
            char hn[64];
            cfg_name(&jobs[i].cands[jobs[i].heuristic], hn, sizeof(hn));
            printf("%-24s %2d candidates, %5.1f s, %7zu KB cubin; heuristic %s%s%s\n", jobs[i].s->name,
                   jobs[i].n_cands, jobs[i].compile_s, jobs[i].cubin_bytes / 1024, hn,
                   jobs[i].st == KILN_OK ? "" : "\n", jobs[i].st == KILN_OK ? "" : jobs[i].err);
            if (jobs[i].st != KILN_OK) n_failed++;
            if (rank) print_ranking(&jobs[i]);
            free(jobs[i].src);
            base_free(jobs[i].cubin);
        }
        return n_failed ? 1 : 0;
    }

    device dv = {.cu = rt_cuda_api_get()};
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv) fprintf(csv, "shape,cand,config,heuristic,us,err,ok,model\n");
    kiln_status st = rt_cuda_stream_create(&dv.stream, &d);
    if (st == KILN_OK) st = KILN_CU_CHECK(&d, dv.cu->cuEventCreate(&dv.e0, CU_EVENT_DEFAULT));
    if (st == KILN_OK) st = KILN_CU_CHECK(&d, dv.cu->cuEventCreate(&dv.e1, CU_EVENT_DEFAULT));
    for (int i = 0; i < n_jobs && st == KILN_OK && !ctx_lost; i++) run_shape(&dv, &jobs[i], heuristic_only, csv, &d);
    if (st != KILN_OK) {
        printf("FAIL setting up the stream: %s\n", base_diag_text(&d));
        n_failed++;
    }
    if (csv) fclose(csv);
    for (int i = 0; i < n_jobs; i++) {
        free(jobs[i].src);
        base_free(jobs[i].cubin);
    }
    printf("gpu_gemm: %s (%d wrong or failing candidates)\n", n_failed ? "FAILED" : "all correct", n_failed);
    base_diag_free(&d);
    return n_failed ? 1 : 0;
}
