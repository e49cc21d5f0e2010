/*
 * kc.h: the CPU kernel templates of the `c` target (Bolt's "hardware-native
 * templates" for a CPU): parameterised C kernels that code generated per
 * model calls, one rTask (tile) at a time.
 *
 * These files are compiled together with each model's generated code when
 * an artifact is built, with -O3 and the instruction set of the machine
 * (-march=native): explicit SIMD is chosen by the preprocessor (AVX-512F,
 * AVX2+FMA, or plain C). They depend on nothing but libc and libm, since
 * they are shipped inside the kiln binary as text.
 *
 * Generated code fills a parameter struct on the stack (pointers into the
 * runtime's arena and weights), then calls *_rtask(p, t, scratch) for the
 * rTasks t its vEU owns. Every rTask writes a disjoint part of the output,
 * so rTasks of one kernel run in any order and in parallel. `scratch` is the
 * calling vEU's private buffer of at least *_scratch_bytes(p) bytes, 64-byte
 * aligned.
 *
 * Epilogues are fused: y = act(alpha * acc + bias + residual).
 */
#ifndef KILN_KC_H
#define KILN_KC_H

#include <stddef.h>
#include <stdint.h>

typedef enum kc_act {
    KC_ACT_NONE = 0,
    KC_ACT_RELU,
    KC_ACT_CLIP,        /* min(max(x, alpha), beta) (Relu6: 0, 6) */
    KC_ACT_LEAKY_RELU,  /* x < 0 ? alpha * x : x */
    KC_ACT_SIGMOID,
    KC_ACT_TANH,
    KC_ACT_GELU,        /* x * 0.5 * (1 + erf(x / sqrt 2)) */
    KC_ACT_GELU_TANH,   /* the tanh approximation */
    KC_ACT_SILU,        /* x * sigmoid(x) */
    KC_ACT_HARD_SWISH,  /* x * clip(x / 6 + 0.5, 0, 1) */
    KC_ACT_HARD_SIGMOID, /* clip(alpha * x + beta, 0, 1) */
    KC_ACT_SOFTPLUS,
    KC_ACT_COUNT
} kc_act;

typedef struct kc_epilogue {
    const float *bias;     /* NULL: none */
    int bias_per_row;      /* 0: bias[col] (GEMM: per output column); 1: bias[row] (conv: per output channel) */
    const float *residual; /* NULL: none; same layout as the output (its own leading dim below) */
    int64_t ldr;           /* residual leading dimension (GEMM); conv: unused (same as y) */
    int64_t r_batch_stride;
    kc_act act;
    float alpha, beta;     /* activation parameters (see kc_act) */
} kc_epilogue;

/* ---- GEMM: C[b] = epilogue(alpha * op(A[b]) op(B[b])) ------------------------
 * op(A) is M x K, op(B) is K x N, row-major with leading dimensions. When B
 * is constant (weights), the compiler packs it once with kc_gemm_pack_b and
 * passes B_packed (batch must then be 1, or b_batch_stride 0: the same B for
 * every batch). rTasks: batch x ceil(M / mb) x ceil(N / nb) tiles. */
typedef struct kc_gemm {
    int64_t M, N, K, batch;
    const float *A;
    int64_t lda, a_batch_stride;
    int trans_a;
    const float *B;
    int64_t ldb, b_batch_stride;
    int trans_b;
    const float *B_packed; /* from kc_gemm_pack_b, or NULL */
    float *C;
    int64_t ldc, c_batch_stride;
    float alpha;
    kc_epilogue ep;
    int64_t mb, nb;        /* tile sizes: from kc_gemm_default_tiles or tuning */
} kc_gemm;

int64_t kc_gemm_rtasks(const kc_gemm *g);
size_t kc_gemm_scratch_bytes(const kc_gemm *g);
void kc_gemm_rtask(const kc_gemm *g, int64_t t, void *scratch);
size_t kc_gemm_packed_b_bytes(int64_t K, int64_t N);
void kc_gemm_pack_b(const float *B, int64_t ldb, int trans_b, int64_t K, int64_t N, float *out);
/* Tile sizes giving at least ~4 rTasks per thread where the shape allows. */
void kc_gemm_default_tiles(int64_t batch, int64_t M, int64_t N, int64_t K, int n_threads, int64_t *mb,
                           int64_t *nb);

/* ---- 2-D convolution, NCHW ---------------------------------------------------
 * Any group count; group == C == K (depthwise) takes a direct kernel. The
 * weights [K, C/group, R, S] are packed once by kc_conv2d_pack_w (layout
 * chosen by the shape). Tiles hold at most kb output channels x pb output
 * pixels, rounded to the kernel's units (micro-tile rows and columns;
 * depthwise: channels x whole output rows), the units split evenly. rTasks:
 * N x group (depthwise: N) x channel tiles x pixel tiles. */
typedef struct kc_conv2d {
    int64_t N, C, H, W;
    int64_t K, OH, OW;
    int64_t R, S;
    int64_t stride_h, stride_w, pad_t, pad_l, dil_h, dil_w, group;
    const float *x;
    const float *w_packed;
    float *y;
    kc_epilogue ep; /* bias per output channel; residual shaped like y */
    int64_t kb, pb;
} kc_conv2d;

int64_t kc_conv2d_rtasks(const kc_conv2d *p);
size_t kc_conv2d_scratch_bytes(const kc_conv2d *p);
void kc_conv2d_rtask(const kc_conv2d *p, int64_t t, void *scratch);
/* Packed weight size and packing; p's shape fields must be set. */
size_t kc_conv2d_packed_w_bytes(const kc_conv2d *p);
void kc_conv2d_pack_w(const kc_conv2d *p, const float *w, float *out);
/* Sets kb, pb: the tiling that loads the busiest of n_threads least. */
void kc_conv2d_default_tiles(kc_conv2d *p, int n_threads);

/* ---- 2-D pooling, NCHW: rTasks over N x C planes, in blocks of `cb` ---------- */
typedef enum kc_pool_kind { KC_POOL_MAX, KC_POOL_AVG } kc_pool_kind;
typedef struct kc_pool2d {
    kc_pool_kind kind;
    int64_t N, C, H, W, OH, OW;
    int64_t R, S, stride_h, stride_w, pad_t, pad_l, dil_h, dil_w;
    int count_include_pad; /* average pooling */
    const float *x;
    float *y;
    int64_t cb;
} kc_pool2d;
int64_t kc_pool2d_rtasks(const kc_pool2d *p);
void kc_pool2d_rtask(const kc_pool2d *p, int64_t t);

/* ---- row-wise normalisations: rTask t covers rows [t*rb, min(rows, (t+1)*rb)) ---- */
typedef struct kc_rows {
    int64_t rows, cols, rb;
    const float *x;
    float *y;
    const float *gamma, *beta; /* layer norm scale and shift (per column); beta may be NULL */
    float eps;
    int log;                   /* softmax: 1 gives log-softmax */
} kc_rows;
int64_t kc_rows_rtasks(const kc_rows *p);
void kc_softmax_rtask(const kc_rows *p, int64_t t);
void kc_layernorm_rtask(const kc_rows *p, int64_t t);
/* Mean over each row (GlobalAveragePool, ReduceMean over the last axis). */
void kc_row_mean_rtask(const kc_rows *p, int64_t t);

/* ---- internal: the GEMM macro-kernel, shared by kc_gemm.c and kc_conv.c ------
 * Not for generated code. Packed layouts, fixed for every instruction set so
 * that weights packed by the compiler fit any build of these kernels:
 *   A: panels of KC_MR rows; panel p holds rows [p*KC_MR, +KC_MR) as
 *      k x KC_MR floats, k-major; rows past m are zero.
 *   B: panels of KC_NR columns; panel q holds columns [q*KC_NR, +KC_NR) as
 *      k x KC_NR floats, k-major; columns past n are zero.
 * kc_gemm_block computes one k-block of an m x n tile of C:
 *   first: C = alpha * A B + bias + residual, else C += alpha * A B;
 *   last:  then C = act(C).
 * B comes either packed (b, b_panel_stride) or, when b is NULL, from
 * pack_b(ctx, q0, nq, k, out) called for groups of panels just before they
 * are used (out: nq panels of k x KC_NR, contiguous), into b_buf. */
enum { KC_MR = 6, KC_NR = 16, KC_KC = 256 };

typedef struct kc_block {
    int64_t m, n, k;
    const float *a;
    int64_t a_panel_stride; /* floats */
    const float *b;         /* packed panels, or NULL: use pack_b */
    int64_t b_panel_stride; /* floats */
    void (*pack_b)(const void *ctx, int64_t q0, int64_t nq, int64_t k, float *out);
    const void *pack_ctx;
    float *b_buf;           /* KC_NR * 4 * k floats, 64-byte aligned */
    float *c;
    int64_t ldc;
    float alpha;
    int first, last;
    const float *bias;      /* at the tile's first row (bias_per_row) or column */
    int bias_per_row;
    const float *res;       /* at the tile's first element */
    int64_t ldr;
    kc_act act;
    float act_alpha, act_beta;
} kc_block;

void kc_gemm_block(const kc_block *blk);

/* ---- vector math: kc_math.h --------------------------------------------------
 * Branch-free float approximations (static inline, so loops calling them
 * vectorize): kc_expf, kc_logf, kc_tanhf, kc_erff, kc_sigmoidf, kc_geluf,
 * and kc_act_apply(act, x, alpha, beta). Error bounds are stated there. */

#endif
