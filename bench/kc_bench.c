/*
 * kc_bench.c: single-thread throughput of the `c` target's kernel templates
 * (src/target/c/kernels) on the shapes that dominate BERT-base, ResNet-50
 * and MobileNetV2, against the core's FMA peak measured by a register-only
 * FMA loop in the same run.
 *
 *   cc -std=c11 -O3 -march=native -Isrc/target/c/kernels bench/kc_bench.c \
 *      src/target/c/kernels/kc_*.c -lm -o build/kc_bench
 *   taskset -c 1 build/kc_bench [-t THREADS_FOR_TILING] [-T THREADS_TO_RUN [-S]] [-s SECONDS_PER_SHAPE] [-f NAME_PART]
 *                              [-m resnet50|mobilenetv2] [-k KB -p PB]
 *
 * Each shape runs all of its rTasks in order on the calling thread; tiles
 * are the kernels' defaults for THREADS_FOR_TILING (default 2, this
 * machine's vEU count), so the figure is the per-core rate kiln would get.
 * With -T N the rTasks run on N threads as the runtime deals them (t % N),
 * and rates are per thread, so tiling imbalance lowers them (-S: the
 * shares run one after another on one core and the slowest counts, which
 * a loaded machine disturbs less); -m sums a
 * model's convolutions; -f, -k and -p pick shapes and force tile sizes.
 * Warm-up excluded; the median of repeated timings is reported.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <stdatomic.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kc.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int n_threads = 2;
static double seconds = 0.3;
static const char *filter; /* -f: only shapes whose name contains it */
static const char *model;  /* -m: a model's convolutions */
static long force_kb, force_pb; /* -k, -p: conv tile sizes instead of the defaults */
static double peak;

static float *alloc_f(size_t n, int fill)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64 + 64);
    if (!p) abort();
    for (size_t i = 0; i < n; i++) p[i] = fill ? (float)((int)(i * 2654435761u % 2001u) - 1000) * 1e-3f : 0.0f;
    return p;
}

/* FMA peak: 12 independent chains hide the FMA latency on every x86 core. */
static double measure_peak(void)
{
    const long iters = 20000000;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        float sink;
#if defined(__AVX512F__)
        __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
        for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
        for (long it = 0; it < iters; it++)
            for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
        for (int i = 1; i < 12; i++) a[0] = _mm512_add_ps(a[0], a[i]);
        sink = _mm512_reduce_add_ps(a[0]);
        const double flops = 2.0 * 16 * 12 * iters;
#elif defined(__AVX2__) && defined(__FMA__)
        __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
        for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
        for (long it = 0; it < iters; it++)
            for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
        for (int i = 1; i < 12; i++) a[0] = _mm256_add_ps(a[0], a[i]);
        float t[8];
        _mm256_storeu_ps(t, a[0]);
        sink = t[0];
        const double flops = 2.0 * 8 * 12 * iters;
#else
        float a[12][4];
        for (int i = 0; i < 12; i++)
            for (int l = 0; l < 4; l++) a[i][l] = (float)i;
        for (long it = 0; it < iters; it++)
            for (int i = 0; i < 12; i++)
                for (int l = 0; l < 4; l++) a[i][l] = a[i][l] * 0.999999f + 1e-6f;
        sink = a[0][0] + a[11][3];
        const double flops = 2.0 * 4 * 12 * iters;
#endif
        double dt = now() - t0;
        if (sink == 12345.0f) puts("");
        if (flops / dt > best) best = flops / dt;
    }
    return best / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*run_fn)(void *ctx);

static double last_min; /* fastest call of the last time_it */

/* Median seconds of one call, over repeated calls filling `seconds`; the
 * fastest goes to last_min (on a shared machine the median can be inflated
 * by other people's load: print both). */
/* -T N: rTasks run on N threads, task t on thread t % N as in the
 * runtime's pool (scratch per thread), so that the imbalance of the tile
 * choice shows; each call ends at a barrier. */
static int run_threads = 1;
static int simulate;    /* -S: the threads' shares run one after another on this thread, timed apart */
static double sim_wall; /* the slowest share of the last call */
typedef void (*task_fn)(void *ctx, int64_t t, int thread);
static struct {
    task_fn fn;
    void *ctx;
    int64_t n;
    atomic_int gen, done;
} pool;

static void run_share(int me)
{
    for (int64_t t = me; t < pool.n; t += run_threads) pool.fn(pool.ctx, t, me);
}

static void *pool_worker(void *arg)
{
    int me = (int)(intptr_t)arg, seen = 0;
    for (;;) {
        while (atomic_load(&pool.gen) == seen) __asm__ volatile("pause");
        seen = atomic_load(&pool.gen);
        run_share(me);
        atomic_fetch_add(&pool.done, 1);
    }
    return NULL;
}

static void run_tasks(task_fn fn, void *ctx, int64_t n)
{
    static int started;
    if (simulate) {
        sim_wall = 0;
        for (int me = 0; me < run_threads; me++) {
            double t0 = now();
            for (int64_t t = me; t < n; t += run_threads) fn(ctx, t, me);
            double dt = now() - t0;
            if (dt > sim_wall) sim_wall = dt;
        }
        return;
    }
    if (run_threads == 1) {
        for (int64_t t = 0; t < n; t++) fn(ctx, t, 0);
        return;
    }
    if (!started) {
        started = 1;
        for (int i = 1; i < run_threads; i++) {
            pthread_t th;
            pthread_create(&th, NULL, pool_worker, (void *)(intptr_t)i);
        }
    }
    pool.fn = fn, pool.ctx = ctx, pool.n = n;
    atomic_store(&pool.done, 0);
    atomic_fetch_add(&pool.gen, 1);
    run_share(0);
    while (atomic_load(&pool.done) < run_threads - 1) __asm__ volatile("pause");
}

static double time_it(run_fn fn, void *ctx)
{
    fn(ctx); /* warm-up */
    double samples[200];
    int n = 0;
    double t_end = now() + seconds;
    while (n < 200 && (n < 5 || now() < t_end)) {
        double t0 = now();
        fn(ctx);
        samples[n++] = simulate ? sim_wall : now() - t0;
    }
    qsort(samples, n, sizeof(double), cmp_d);
    last_min = samples[0];
    return samples[n / 2];
}

static double last_ms, last_flops, last_best_ms;

static void report(const char *name, double flops, double sec)
{
    last_ms = sec * 1e3, last_flops = flops, last_best_ms = last_min * 1e3;
    double gf = flops / sec / 1e9 / run_threads, gf_best = flops / last_min / 1e9 / run_threads;
    printf("%-48s %8.3f ms %7.1f GFLOP/s %5.1f %%   | best %7.1f GFLOP/s %5.1f %%\n", name, sec * 1e3, gf,
           100.0 * gf / peak, gf_best, 100.0 * gf_best / peak);
}

/* ---- GEMM ---- */
typedef struct gemm_case {
    kc_gemm g;
    void *scratch[64];
} gemm_case;

static void gemm_task(void *ctx, int64_t t, int thread)
{
    gemm_case *c = ctx;
    kc_gemm_rtask(&c->g, t, c->scratch[thread]);
}

static void run_gemm(void *ctx)
{
    gemm_case *c = ctx;
    run_tasks(gemm_task, c, kc_gemm_rtasks(&c->g));
}

static void bench_gemm(const char *name, int64_t batch, int64_t M, int64_t N, int64_t K, int trans_b, int packed)
{
    if (filter && !strstr(name, filter)) return;
    gemm_case c;
    memset(&c, 0, sizeof c);
    kc_gemm *g = &c.g;
    g->M = M, g->N = N, g->K = K, g->batch = batch;
    float *A = alloc_f((size_t)(batch * M * K), 1), *B = alloc_f((size_t)(batch * K * N), 1);
    float *C = alloc_f((size_t)(batch * M * N), 0);
    g->A = A, g->lda = K, g->a_batch_stride = M * K;
    g->B = B, g->trans_b = trans_b, g->ldb = trans_b ? K : N, g->b_batch_stride = K * N;
    g->C = C, g->ldc = N, g->c_batch_stride = M * N;
    g->alpha = 1.0f;
    float *Bp = NULL;
    if (packed) {
        Bp = aligned_alloc(64, (kc_gemm_packed_b_bytes(K, N) + 63) / 64 * 64);
        kc_gemm_pack_b(B, g->ldb, trans_b, K, N, Bp);
        g->B_packed = Bp;
    }
    kc_gemm_default_tiles(batch, M, N, K, n_threads, &g->mb, &g->nb);
    for (int i = 0; i < run_threads; i++) c.scratch[i] = aligned_alloc(64, (kc_gemm_scratch_bytes(g) + 63) / 64 * 64);
    char label[128];
    snprintf(label, sizeof label, "%s [%ldx%ld tiles]", name, (long)g->mb, (long)g->nb);
    report(label, 2.0 * batch * M * N * K, time_it(run_gemm, &c));
    free(A), free(B), free(C), free(Bp);
    for (int i = 0; i < run_threads; i++) free(c.scratch[i]);
}


/* ---- convolution ---- */
typedef struct conv_case {
    kc_conv2d p;
    void *scratch[64];
} conv_case;

static void conv_task(void *ctx, int64_t t, int thread)
{
    conv_case *c = ctx;
    kc_conv2d_rtask(&c->p, t, c->scratch[thread]);
}

static void run_conv(void *ctx)
{
    conv_case *c = ctx;
    run_tasks(conv_task, c, kc_conv2d_rtasks(&c->p));
}

static void bench_conv(const char *name, int64_t C, int64_t H, int64_t K, int64_t R, int64_t stride, int64_t group,
                       int relu)
{
    if (filter && !strstr(name, filter)) return;
    conv_case c;
    memset(&c, 0, sizeof c);
    kc_conv2d *p = &c.p;
    int64_t pad = R / 2;
    *p = (kc_conv2d){.N = 1, .C = C, .H = H, .W = H, .K = K, .R = R, .S = R, .stride_h = stride,
                     .stride_w = stride, .pad_t = pad, .pad_l = pad, .dil_h = 1, .dil_w = 1, .group = group};
    p->OH = p->OW = (H + 2 * pad - R) / stride + 1;
    float *x = alloc_f((size_t)(C * H * H), 1), *w = alloc_f((size_t)(K * C / group * R * R), 1);
    float *y = alloc_f((size_t)(K * p->OH * p->OW), 0), *bias = alloc_f((size_t)K, 1);
    float *wp = aligned_alloc(64, (kc_conv2d_packed_w_bytes(p) + 63) / 64 * 64);
    kc_conv2d_pack_w(p, w, wp);
    p->x = x, p->w_packed = wp, p->y = y;
    p->ep.bias = bias;
    p->ep.act = relu ? KC_ACT_RELU : KC_ACT_NONE;
    kc_conv2d_default_tiles(p, n_threads);
    if (force_kb) p->kb = force_kb;
    if (force_pb) p->pb = force_pb;
    for (int i = 0; i < run_threads; i++)
        c.scratch[i] = aligned_alloc(64, (kc_conv2d_scratch_bytes(p) + 63) / 64 * 64);
    char label[128];
    snprintf(label, sizeof label, "%s [%ldx%ld tiles]", name, (long)p->kb, (long)p->pb);
    double flops = 2.0 * K * p->OH * p->OW * (C / group) * R * R;
    report(label, flops, time_it(run_conv, &c));
    free(x), free(w), free(y), free(bias), free(wp);
    for (int i = 0; i < run_threads; i++) free(c.scratch[i]);
}

/* ---- pooling ---- */
typedef struct pool_case {
    kc_pool2d p;
} pool_case;

static void pool_task(void *ctx, int64_t t, int thread)
{
    (void)thread;
    kc_pool2d_rtask(&((pool_case *)ctx)->p, t);
}

static void run_pool(void *ctx)
{
    pool_case *c = ctx;
    run_tasks(pool_task, c, kc_pool2d_rtasks(&c->p));
}

/* Rates are of input floats read (GFLOP/s column: G elements / s). */
static void bench_pool(const char *name, int64_t C, int64_t H, int64_t R, int64_t stride, int64_t pad)
{
    if (filter && !strstr(name, filter)) return;
    pool_case c;
    memset(&c, 0, sizeof c);
    kc_pool2d *p = &c.p;
    *p = (kc_pool2d){.kind = KC_POOL_MAX, .N = 1, .C = C, .H = H, .W = H, .R = R, .S = R, .stride_h = stride,
                     .stride_w = stride, .pad_t = pad, .pad_l = pad, .dil_h = 1, .dil_w = 1};
    p->OH = p->OW = (H + 2 * pad - R) / stride + 1;
    float *x = alloc_f((size_t)(C * H * H), 1), *y = alloc_f((size_t)(C * p->OH * p->OW), 0);
    p->x = x, p->y = y;
    p->cb = C / (4 * n_threads) > 0 ? C / (4 * n_threads) : 1; /* as emit_rows.c chooses */
    char label[128];
    snprintf(label, sizeof label, "%s [%ld planes a task]", name, (long)p->cb);
    report(label, (double)(C * H * H), time_it(run_pool, &c));
    free(x), free(y);
}

/* Every convolution of a model, with its count: -m resnet50 / mobilenetv2
 * prints each shape and the single-thread total, the kernels' share of a
 * run (ResNet-50 and MobileNetV2 as exported by tests/models/export.py). */
typedef struct model_conv {
    int C, H, K, R, stride, group, count;
} model_conv;

static const model_conv resnet50_convs[] = {
    {3, 224, 64, 7, 2, 1, 1},     {64, 56, 64, 1, 1, 1, 1},     {64, 56, 64, 3, 1, 1, 3},
    {64, 56, 256, 1, 1, 1, 4},    {256, 56, 64, 1, 1, 1, 2},    {256, 56, 128, 1, 1, 1, 1},
    {128, 56, 128, 3, 2, 1, 1},   {128, 28, 512, 1, 1, 1, 4},   {256, 56, 512, 1, 2, 1, 1},
    {512, 28, 128, 1, 1, 1, 3},   {128, 28, 128, 3, 1, 1, 3},   {512, 28, 256, 1, 1, 1, 1},
    {256, 28, 256, 3, 2, 1, 1},   {256, 14, 1024, 1, 1, 1, 6},  {512, 28, 1024, 1, 2, 1, 1},
    {1024, 14, 256, 1, 1, 1, 5},  {256, 14, 256, 3, 1, 1, 5},   {1024, 14, 512, 1, 1, 1, 1},
    {512, 14, 512, 3, 2, 1, 1},   {512, 7, 2048, 1, 1, 1, 3},   {1024, 14, 2048, 1, 2, 1, 1},
    {2048, 7, 512, 1, 1, 1, 2},   {512, 7, 512, 3, 1, 1, 2},    {0, 0, 0, 0, 0, 0, 0}};

static const model_conv mobilenetv2_convs[] = {
    {3, 224, 32, 3, 2, 1, 1},     {32, 112, 32, 3, 1, 32, 1},   {32, 112, 16, 1, 1, 1, 1},
    {16, 112, 96, 1, 1, 1, 1},    {96, 112, 96, 3, 2, 96, 1},   {96, 56, 24, 1, 1, 1, 1},
    {24, 56, 144, 1, 1, 1, 2},    {144, 56, 144, 3, 1, 144, 1}, {144, 56, 24, 1, 1, 1, 1},
    {144, 56, 144, 3, 2, 144, 1}, {144, 28, 32, 1, 1, 1, 1},    {32, 28, 192, 1, 1, 1, 3},
    {192, 28, 192, 3, 1, 192, 2}, {192, 28, 32, 1, 1, 1, 2},    {192, 28, 192, 3, 2, 192, 1},
    {192, 14, 64, 1, 1, 1, 1},    {64, 14, 384, 1, 1, 1, 4},    {384, 14, 384, 3, 1, 384, 4},
    {384, 14, 64, 1, 1, 1, 3},    {384, 14, 96, 1, 1, 1, 1},    {96, 14, 576, 1, 1, 1, 3},
    {576, 14, 576, 3, 1, 576, 2}, {576, 14, 96, 1, 1, 1, 2},    {576, 14, 576, 3, 2, 576, 1},
    {576, 7, 160, 1, 1, 1, 1},    {160, 7, 960, 1, 1, 1, 3},    {960, 7, 960, 3, 1, 960, 3},
    {960, 7, 160, 1, 1, 1, 2},    {960, 7, 320, 1, 1, 1, 1},    {320, 7, 1280, 1, 1, 1, 1},
    {0, 0, 0, 0, 0, 0, 0}};

static double conv_total_ms, conv_total_best_ms, conv_total_flops;

static void bench_model(const model_conv *m)
{
    conv_total_ms = conv_total_best_ms = conv_total_flops = 0;
    for (; m->C; m++) {
        char name[96];
        snprintf(name, sizeof name, "x%d %s%dx%d/%d %d->%d %d", m->count, m->group > 1 ? "dw " : "", m->R, m->R,
                 m->stride, m->C, m->K, m->H);
        bench_conv(name, m->C, m->H, m->K, m->R, m->stride, m->group, 1);
        conv_total_ms += last_ms * m->count;
        conv_total_best_ms += last_best_ms * m->count;
        conv_total_flops += last_flops * m->count;
    }
    printf("total, counts included: median %.3f ms (%.1f GFLOP/s), fastest %.3f ms\n", conv_total_ms,
           conv_total_flops / conv_total_ms / 1e6, conv_total_best_ms);
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) n_threads = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-s")) seconds = atof(argv[i + 1]);
        if (!strcmp(argv[i], "-f")) filter = argv[i + 1];
        if (!strcmp(argv[i], "-m")) model = argv[i + 1];
        if (!strcmp(argv[i], "-k")) force_kb = atol(argv[i + 1]);
        if (!strcmp(argv[i], "-S")) simulate = 1, i--;
        if (!strcmp(argv[i], "-T")) run_threads = atoi(argv[i + 1]) < 1 ? 1 : atoi(argv[i + 1]) > 64 ? 64 : atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-p")) force_pb = atol(argv[i + 1]);
    }
    peak = getenv("KC_BENCH_PEAK") ? atof(getenv("KC_BENCH_PEAK")) : measure_peak();
    printf("single-core FMA peak: %.1f GFLOP/s; tiles for %d threads; run on %d thread(s)%s\n\n", peak, n_threads,
           run_threads, run_threads > 1 ? simulate ? " simulated: shares timed one after another, the slowest counts"
                                                                   : " (rates are per thread)"
                           : "");
    printf("%-48s %11s %15s %7s   | %s\n", "shape", "median", "rate", "of peak", "fastest run");
    if (model) {
        bench_model(!strcmp(model, "resnet50") ? resnet50_convs : mobilenetv2_convs);
        return 0;
    }
    bench_gemm("sgemm 512^3", 1, 512, 512, 512, 0, 0);
    bench_gemm("sgemm 1024^3", 1, 1024, 1024, 1024, 0, 0);
    bench_gemm("sgemm 1024^3, B packed", 1, 1024, 1024, 1024, 0, 1);
    bench_gemm("BERT 128x768x768 (B packed)", 1, 128, 768, 768, 0, 1);
    bench_gemm("BERT 128x3072x768 (B packed)", 1, 128, 3072, 768, 0, 1);
    bench_gemm("BERT 128x768x3072 (B packed)", 1, 128, 768, 3072, 0, 1);
    bench_gemm("BERT attn QK^T 12x[128x64]x[64x128]", 12, 128, 128, 64, 1, 0);
    bench_gemm("BERT attn PV 12x[128x128]x[128x64]", 12, 128, 64, 128, 0, 0);
    bench_conv("R50 conv1 7x7/2 3->64 224", 3, 224, 64, 7, 2, 1, 1);
    bench_conv("R50 3x3 64->64 56", 64, 56, 64, 3, 1, 1, 1);
    bench_conv("R50 1x1 256->64 56", 256, 56, 64, 1, 1, 1, 1);
    bench_conv("R50 1x1 64->256 56", 64, 56, 256, 1, 1, 1, 0);
    bench_conv("R50 3x3/2 128->128 56->28", 128, 56, 128, 3, 2, 1, 1);
    bench_conv("R50 3x3 128->128 28", 128, 28, 128, 3, 1, 1, 1);
    bench_conv("R50 3x3 256->256 14", 256, 14, 256, 3, 1, 1, 1);
    bench_conv("R50 3x3 512->512 7", 512, 7, 512, 3, 1, 1, 1);
    bench_conv("R50 1x1 1024->256 14", 1024, 14, 256, 1, 1, 1, 1);
    bench_conv("MV2 dw 3x3 32 112", 32, 112, 32, 3, 1, 32, 1);
    bench_conv("MV2 dw 3x3/2 96 112->56", 96, 112, 96, 3, 2, 96, 1);
    bench_conv("MV2 dw 3x3 144 56", 144, 56, 144, 3, 1, 144, 1);
    bench_conv("MV2 dw 3x3/2 144 56->28", 144, 56, 144, 3, 2, 144, 1);
    bench_conv("MV2 dw 3x3 192 28", 192, 28, 192, 3, 1, 192, 1);
    bench_conv("MV2 dw 3x3 384 14", 384, 14, 384, 3, 1, 384, 1);
    bench_conv("MV2 dw 3x3 960 7", 960, 7, 960, 3, 1, 960, 1);
    bench_pool("R50 maxpool 3x3/2 64 112", 64, 112, 3, 2, 1);
    return 0;
}
