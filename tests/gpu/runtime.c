/*
 * runtime.c: the CUDA runtime (runtime/rt_cuda.c) on a real GPU, through
 * the public API (kiln_rt.h). Not part of `make check`, which runs where
 * there is no GPU; build with `make BUILD=... build/gpu_runtime` and run it
 * from the repository root (it reads src/target/cuda/kernels/kg.h).
 *
 * It builds `.kiln` artifacts of target "cuda" in memory, by hand: a tiny
 * CUDA program (kg.h's prelude, kernels written here) compiled with NVRTC
 * into an sm_80 and an sm_90a image, a CODE section from rt_gprog_encode,
 * the artifact from rt_artifact_encode, and host segments built with the
 * unit tests' model builder. Then, through kiln_rt_load_buffer:
 *   - two kernels (one with 64 KB of dynamic shared memory), run with host
 *     buffers (pageable, and page-locked from kiln_rt_host_alloc) and with
 *     device pointers, one CUDA graph per run;
 *   - host segments between kernels (a Relu on the arena, a NonZero on a
 *     model input giving an output of data-dependent shape), in fp32 and
 *     in fp16 storage, with host and device pointers;
 *   - a kernel recording a fault: the run fails naming the group and the
 *     launch, the next run is fine;
 *   - a persistent kernel (--schedule=mono) asking for more blocks than fit,
 *     its two stages ordered by a grid barrier; a barrier one block never
 *     reaches, which the watchdog turns into an error naming the stage;
 *   - kg_math.h's GELU against the host's double precision on a dense sweep;
 *   - early (programmatic dependent) launches: a kernel that waits is right
 *     after a slow one; one that does not wait shows the overlap;
 *   - launch counts, profiling (a stage per launch), the image choice
 *     (none for this GPU: KILN_ERR_UNSUPPORTED), $KILN_DEVICE, an absurd
 *     arena (KILN_ERR_OOM);
 *   - last, a kernel writing to an illegal address: the run fails with the
 *     driver's message, later runs fail cleanly, freeing does not crash.
 * Ends with "runtime: N passed, M failed"; exit status 1 on a failure, 7
 * without a GPU.
 */
#include "../unit/model_builder.h"
#include "runtime/artifact.h"
#include "runtime/cuda.h"
#include "runtime/gprog.h"
#include "target/cuda/nvrtc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 1000
#define ARENA_BYTES 8192
#define SEG_OUT_OFFSET 4096 /* where the Relu segment writes in the arena */

static int passed, failed;

static void check(bool ok, const char *what)
{
    printf("%-6s %s\n", ok ? "ok" : "FAIL", what);
    if (!ok && kiln_rt_last_error()[0]) printf("       last error: %s\n", kiln_rt_last_error());
    if (ok) passed++;
    else failed++;
}

/* ---- the CUDA program -------------------------------------------------------------- */

/* After kg.h. Defines: PREC16 (float32 arena/weights values stored as
 * __half), SRC_OFF (where k_c reads in the arena). io[0] = x f32[N],
 * io[1] = y f32[N]. */
static const char kernels_src[] =
    "#define N 1000\n"
    "#ifdef PREC16\n"
    "typedef __half st_t;\n"
    "#define LD(p) kg_ld_f16(p)\n"
    "#define ST(p, v) kg_st_f16(p, v)\n"
    "#else\n"
    "typedef float st_t;\n"
    "#define LD(p) kg_ld_f32(p)\n"
    "#define ST(p, v) kg_st_f32(p, v)\n"
    "#endif\n"
    "\n"
    "/* arena[0..N) = 2 x + w: 8 rTasks of 128 */\n"
    "__device__ void op_a(const kiln_gctx *c, int t)\n"
    "{\n"
    "    const float *x = (const float *)c->io[0];\n"
    "    const st_t *w = (const st_t *)c->weights;\n"
    "    st_t *a = (st_t *)c->arena;\n"
    "    int i = t * 128 + threadIdx.x;\n"
    "    if (i < N) ST(a + i, 2.0f * x[i] + LD(w + i));\n"
    "}\n"
    "extern \"C\" __global__ void k_a(const kiln_gctx *c)\n"
    "{ for (int t = blockIdx.x; t < 8; t += gridDim.x) op_a(c, t); }\n"
    "\n"
    "/* y = arena[SRC_OFF..] + 1, through the far end of 64 KB of shared memory: 4 rTasks of 256 */\n"
    "__device__ void op_c(const kiln_gctx *c, int t)\n"
    "{\n"
    "    const st_t *a = (const st_t *)(c->arena + SRC_OFF);\n"
    "    float *y = (float *)c->io[1];\n"
    "    float *s = (float *)kg_smem + (65536 / 4 - 256);\n"
    "    int i = t * 256 + threadIdx.x;\n"
    "    s[threadIdx.x] = i < N ? LD(a + i) + 1.0f : 0.0f;\n"
    "    __syncthreads();\n"
    "    if (i < N) y[i] = s[threadIdx.x];\n"
    "    __syncthreads();\n"
    "}\n"
    "extern \"C\" __global__ void k_c(const kiln_gctx *c)\n"
    "{ for (int t = blockIdx.x; t < 4; t += gridDim.x) op_c(c, t); }\n"
    "\n"
    "/* a gather whose index x[0] may be out of range: launch 1 of its program */\n"
    "__device__ void op_f(const kiln_gctx *c, int t)\n"
    "{\n"
    "    const float *x = (const float *)c->io[0];\n"
    "    if (threadIdx.x == 0 && x[0] > 1000.0f) kg_fault(c, KG_FAULT_INDEX, 1u);\n"
    "}\n"
    "extern \"C\" __global__ void k_fault(const kiln_gctx *c)\n"
    "{ for (int t = blockIdx.x; t < 2; t += gridDim.x) op_f(c, t); }\n"
    "\n"
    "/* k_a then k_c's sum as one persistent kernel (--schedule=mono): stage 1's\n"
    " * rTask t reads what stage 0's rTask t + 3 wrote, another block's work */\n"
    "extern \"C\" __global__ void k_p(const kiln_gctx *c)\n"
    "{\n"
    "    for (int t = blockIdx.x; t < 8; t += gridDim.x) op_a(c, t);\n"
    "    kg_grid_sync(c, 0u, 0u);\n"
    "    const st_t *a = (const st_t *)c->arena;\n"
    "    float *y = (float *)c->io[1];\n"
    "    for (int t = blockIdx.x; t < 8; t += gridDim.x) {\n"
    "        int i = ((t + 3) % 8) * 128 + threadIdx.x;\n"
    "        if (i < N) y[i] = LD(a + i) + 1.0f;\n"
    "    }\n"
    "    kg_grid_exit(2u);\n"
    "}\n"
    "\n"
    "/* k_p with completion counters instead of the barrier (--schedule=mono),\n"
    " * its two members profiled in slots 0 and 1 (kg_prof_slots, as emit.c\n"
    " * writes it; the third line names a kernel no program here launches) */\n"
    "static __device__ unsigned kg_done_w[2];\n"
    "static __device__ const kg_dep kg_deps_w[2] = {{0u, 8u}, {1u, 1000u}};\n"
    "extern \"C\" __device__ const char kg_prof_slots[] =\n"
    "    \"k_w 8 mul1+add1\\n\" \"k_w 8 add2 \\042quoted\\042\\n\" \"k_none 3 unused\\n\";\n"
    "extern \"C\" __global__ void k_w(const kiln_gctx *c)\n"
    "{\n"
    "    for (int t = blockIdx.x; t < 8; t += gridDim.x) {\n"
    "        const kg_u64 t0 = kg_prof_clock(c);\n"
    "        op_a(c, t);\n"
    "        kg_prof_rtask(c, 0u, t0, t0);\n"
    "        kg_signal(kg_done_w + 0);\n"
    "    }\n"
    "    const st_t *a = (const st_t *)c->arena;\n"
    "    float *y = (float *)c->io[1];\n"
    "    for (int t = blockIdx.x; t < 8; t += gridDim.x) {\n"
    "        const kg_u64 t0 = kg_prof_clock(c);\n"
    "        kg_wait_deps(c, 0u, 0u, kg_done_w, kg_deps_w, 1u);\n"
    "        const kg_u64 t1 = kg_prof_clock(c);\n"
    "        int i = ((t + 3) % 8) * 128 + threadIdx.x;\n"
    "        if (i < N) y[i] = LD(a + i) + 1.0f;\n"
    "        kg_prof_rtask(c, 1u, t0, t1);\n"
    "        kg_signal(kg_done_w + 1);\n"
    "    }\n"
    "    kg_waits_exit(kg_done_w, 2u);\n"
    "}\n"
    "\n"
    "/* early launches (gprog.h): k_slow is k_a after 50 us of waiting, then\n"
    " * k_e (k_c beginning with kg_grid_dep, as every generated kernel does) or\n"
    " * k_nowait (k_c without it: it reads the arena before k_slow wrote it) */\n"
    "extern \"C\" __global__ void k_slow(const kiln_gctx *c)\n"
    "{\n"
    "    kg_grid_dep();\n"
    "    unsigned long long t0 = kg_now_ns();\n"
    "    while (kg_now_ns() - t0 < 50000ull) {}\n"
    "    for (int t = blockIdx.x; t < 8; t += gridDim.x) op_a(c, t);\n"
    "}\n"
    "extern \"C\" __global__ void k_e(const kiln_gctx *c)\n"
    "{ kg_grid_dep(); for (int t = blockIdx.x; t < 4; t += gridDim.x) op_c(c, t); }\n"
    "extern \"C\" __global__ void k_nowait(const kiln_gctx *c)\n"
    "{ for (int t = blockIdx.x; t < 4; t += gridDim.x) op_c(c, t); }\n"
    "\n"
    "/* a counter that never reaches its count */\n"
    "extern \"C\" __global__ void k_whang(const kiln_gctx *c)\n"
    "{ kg_wait_deps(c, 0u, 3u, kg_done_w, kg_deps_w + 1, 1u); }\n"
    "\n"
    "/* block 0 never arrives: the others' watchdog ends the wait */\n"
    "extern \"C\" __global__ void k_hang(const kiln_gctx *c)\n"
    "{ if (blockIdx.x > 0) kg_grid_sync(c, 0u, 3u); }\n"
    "\n"
    "extern \"C\" __global__ void k_crash(const kiln_gctx *c)\n"
    "{ if (threadIdx.x == 0) *(volatile int *)(c->arena + (1ull << 46)) = 1; }\n";

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* A file of src/target/cuda/kernels, from the repository root or beside
 * this file's source. */
static char *read_kernel_file(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "src/target/cuda/kernels/%s", name);
    char *s = read_text(path);
    if (s) return s;
    snprintf(path, sizeof(path), "%s", __FILE__);
    char *slash = strrchr(path, '/');
    if (!slash) return NULL;
    snprintf(slash, sizeof(path) - (size_t)(slash - path), "/../../src/target/cuda/kernels/%s", name);
    return read_text(path);
}

/* kg_tiles.h then kg.h, as the compiler's prelude has them. */
static char *read_prelude(void)
{
    char *tiles = read_kernel_file("kg_tiles.h"), *kg = read_kernel_file("kg.h"), *s = NULL;
    if (tiles && kg) {
        size_t n = strlen(tiles) + strlen(kg) + 2;
        s = malloc(n);
        if (s) snprintf(s, n, "%s\n%s", tiles, kg);
    }
    free(tiles);
    free(kg);
    return s;
}

typedef struct images {
    void *cubin[2]; /* sm_80, sm_90a */
    size_t bytes[2];
} images;

static const char *prelude;

static bool compile(const char *defines, images *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = strlen(prelude) + strlen(defines) + sizeof(kernels_src) + 2;
    char *src = malloc(n);
    snprintf(src, n, "%s\n%s%s", prelude, defines, kernels_src);
    base_diag d;
    base_diag_init(&d);
    kiln_status st = cg_nvrtc_compile(src, "runtime_test.cu", 8, 0, false, &out->cubin[0], &out->bytes[0], &d);
    if (st == KILN_OK) st = cg_nvrtc_compile(src, "runtime_test.cu", 9, 0, true, &out->cubin[1], &out->bytes[1], &d);
    if (st != KILN_OK) printf("       NVRTC: %s\n", base_diag_text(&d));
    base_diag_free(&d);
    free(src);
    return st == KILN_OK;
}

static void images_free(images *im)
{
    base_free(im->cubin[0]);
    base_free(im->cubin[1]);
}

/* ---- artifacts ------------------------------------------------------------------- */

typedef struct spec {
    kiln_gprec prec;
    int n_launches;
    rt_glaunch launches[8];
    uint64_t arena_bytes;
    int only_image;          /* -1: both images; 0: sm_80 alone; 1: sm_90a alone */
    bool segments;           /* the Relu and NonZero segments, and the output nz */
} spec;

static void *relu_onnx(size_t *n)
{
    static mb_model mb; /* large: kept off the stack */
    mb_init(&mb, 17);
    mb_input(&mb, "z", KILN_F32, 1, (int64_t[]){N});
    mb_node(&mb, "Relu", "relu1", "z", NULL, "r");
    mb_output(&mb, "r");
    return mb_pack(&mb, n);
}

static void *nonzero_onnx(size_t *n)
{
    static mb_model mb;
    mb_init(&mb, 17);
    mb_input(&mb, "x", KILN_F32, 1, (int64_t[]){N});
    mb_node(&mb, "NonZero", "nonzero1", "x", NULL, "nz");
    mb_output(&mb, "nz");
    return mb_pack(&mb, n);
}

static float weight(int i) { return 0.25f * (float)(i % 40) - 3.0f; }

/* The artifact for s. OUT: *n; free() it. */
static uint8_t *build(const spec *s, const images *im, size_t *n)
{
    rt_gimage gi[2] = {{.sm = 80, .cubin = im->cubin[0], .bytes = im->bytes[0]},
                       {.sm = 90, .arch_specific = 1, .cubin = im->cubin[1], .bytes = im->bytes[1]}};
    unsigned max_smem = 0;
    for (int k = 0; k < s->n_launches; k++) max_smem = s->launches[k].smem > max_smem ? s->launches[k].smem : max_smem;
    /* the weights blob holds halves in fp16, at the offsets planned for floats */
    static uint8_t weights[4 * N];
    memset(weights, 0, sizeof(weights));
    for (int i = 0; i < N; i++) {
        if (s->prec == KILN_GPREC_FP16) {
            uint16_t h = base_f32_to_f16(weight(i));
            memcpy(weights + 2 * i, &h, 2);
        } else {
            float w = weight(i);
            memcpy(weights + 4 * i, &w, 4);
        }
    }
    rt_gprog p = {.precision = s->prec, .n_images = s->only_image < 0 ? 2 : 1,
                  .images = s->only_image < 0 ? gi : &gi[s->only_image], .n_launches = s->n_launches,
                  .launches = (rt_glaunch *)s->launches, .max_smem = max_smem, .arena_bytes = s->arena_bytes,
                  .weight_bytes = sizeof(weights)};
    void *code = NULL;
    size_t code_bytes = 0;
    base_diag d;
    base_diag_init(&d);
    if (rt_gprog_encode(&p, &code, &code_bytes, &d) != KILN_OK) {
        printf("       rt_gprog_encode: %s\n", base_diag_text(&d));
        base_diag_free(&d);
        return NULL;
    }
    kiln_rt_tensor_info io[3] = {
        {.name = "x", .dtype = KILN_F32, .rank = 1, .dims = {N}},
        {.name = "y", .dtype = KILN_F32, .rank = 1, .dims = {N}},
        {.name = "nz", .dtype = KILN_I64, .rank = 2, .dims = {1, -1}},
    };
    size_t relu_bytes = 0, nz_bytes = 0;
    void *relu = s->segments ? relu_onnx(&relu_bytes) : NULL;
    void *nz = s->segments ? nonzero_onnx(&nz_bytes) : NULL;
    rt_binding b[4] = {
        {.kind = RT_BIND_ARENA, .offset = 0, .dtype = KILN_F32, .rank = 1, .dims = {N}},
        {.kind = RT_BIND_ARENA, .offset = SEG_OUT_OFFSET, .dtype = KILN_F32, .rank = 1, .dims = {N}},
        {.kind = RT_BIND_INPUT, .io = 0, .dtype = KILN_F32, .rank = 1, .dims = {N}},
        {.kind = RT_BIND_OUTPUT, .io = 1, .dtype = KILN_I64, .rank = 2, .dims = {1, -1}},
    };
    rt_segment_desc segs[2] = {
        {.onnx = relu, .onnx_bytes = relu_bytes, .n_in = 1, .in = &b[0], .n_out = 1, .out = &b[1]},
        {.onnx = nz, .onnx_bytes = nz_bytes, .n_in = 1, .in = &b[2], .n_out = 1, .out = &b[3]},
    };
    rt_artifact_desc a = {.target = "cuda", .isa = "sm_80+sm_90a", .default_threads = 1, .n_inputs = 1,
                          .n_outputs = s->segments ? 2 : 1, .inputs = &io[0], .outputs = &io[1],
                          .arena_bytes = s->arena_bytes, .code = code, .code_bytes = code_bytes,
                          .weights = weights, .weight_bytes = sizeof(weights),
                          .n_segments = s->segments ? 2 : 0, .segments = segs};
    void *buf = NULL;
    if (rt_artifact_encode(&a, &buf, n, &d) != KILN_OK) printf("       rt_artifact_encode: %s\n", base_diag_text(&d));
    base_diag_free(&d);
    base_free(code);
    free(relu);
    free(nz);
    return buf;
}

static kiln_rt_model *load(const spec *s, const images *im, const char *what)
{
    size_t n;
    uint8_t *art = build(s, im, &n);
    kiln_rt_model *m = NULL;
    char line[256];
    snprintf(line, sizeof(line), "load: %s", what);
    check(art && kiln_rt_load_buffer(art, n, 0, &m) == KILN_OK, line);
    /* the buffer may go right after loading */
    if (art) memset(art, 0xab, n);
    free(art);
    return m;
}

/* ---- references ------------------------------------------------------------------- */

static float round_storage(float v, kiln_gprec prec)
{
    return prec == KILN_GPREC_FP16 ? base_f16_to_f32(base_f32_to_f16(v)) : v;
}

static void make_input(float *x, int run)
{
    for (int i = 0; i < N; i++) x[i] = i % 5 == 0 ? 0.0f : 0.25f * (float)(i - 600) + (float)(run % 4);
}

/* y[i] for x: 2 x + w + 1, through a Relu when there are segments. */
static float expected(const float *x, int i, const spec *s)
{
    float a = round_storage(2.0f * x[i] + round_storage(weight(i), s->prec), s->prec);
    if (s->segments) a = round_storage(a > 0 ? a : 0, s->prec);
    return a + 1.0f;
}

static int count_wrong(const float *x, const float *y, const spec *s)
{
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        float want = expected(x, i, s);
        if (y[i] != want && wrong++ < 3) printf("       y[%d] = %g, expected %g\n", i, y[i], want);
    }
    return wrong;
}

/* Checks kiln_rt_result's NonZero output against x. */
static bool check_nonzero(const kiln_rt_model *m, const float *x)
{
    kiln_rt_tensor_info info;
    const int64_t *nz = kiln_rt_result(m, 1, &info);
    int count = 0;
    for (int i = 0; i < N; i++) count += x[i] != 0;
    if (!nz || info.dtype != KILN_I64 || info.rank != 2 || info.dims[0] != 1 || info.dims[1] != count ||
        info.nbytes != (size_t)count * 8) {
        printf("       nonzero: %s, rank %d, dims %lld x %lld, expected 1 x %d\n", nz ? "a tensor" : "NULL",
               info.rank, (long long)info.dims[0], (long long)info.dims[1], count);
        return false;
    }
    for (int i = 0, k = 0; i < N; i++)
        if (x[i] != 0 && nz[k++] != i) return false;
    return true;
}

/* Runs m `runs` times on the host buffers x and y (N floats each); true
 * when every output is right. */
static bool run_host_on(kiln_rt_model *m, const spec *s, int runs, float *x, float *y)
{
    const void *in[1] = {x};
    void *out[2] = {y, NULL};
    for (int r = 0; r < runs; r++) {
        make_input(x, r);
        memset(y, 0xff, sizeof(float) * N);
        if (kiln_rt_run(m, in, out) != KILN_OK) {
            printf("       run %d: %s\n", r, kiln_rt_last_error());
            return false;
        }
        if (kiln_rt_result(m, 0, NULL) != y || count_wrong(x, y, s)) return false;
        if (s->segments && !check_nonzero(m, x)) return false;
    }
    return true;
}

/* The same on pageable buffers (the output comes through staging). */
static bool run_host(kiln_rt_model *m, const spec *s, int runs)
{
    float x[N], y[N];
    return run_host_on(m, s, runs, x, y);
}

/* The same on kiln_rt_host_alloc's page-locked buffers (copied directly). */
static bool run_pinned(kiln_rt_model *m, const spec *s, int runs)
{
    float *x = kiln_rt_host_alloc(m, sizeof(float) * N), *y = kiln_rt_host_alloc(m, sizeof(float) * N);
    if (!x || !y) printf("       kiln_rt_host_alloc: %s\n", kiln_rt_last_error());
    bool ok = x && y && rt_cuda_memory_of(x) == RT_CUDA_PAGE_LOCKED &&
              rt_cuda_memory_of(y) == RT_CUDA_PAGE_LOCKED && run_host_on(m, s, runs, x, y);
    ok = kiln_rt_host_free(m, x) == KILN_OK && ok;
    float local;
    ok = ok && kiln_rt_host_free(m, &local) == KILN_ERR_INVALID_ARG && rt_cuda_memory_of(&local) == RT_CUDA_PAGEABLE;
    /* y is left to kiln_rt_free */
    return ok;
}

/* The same with device buffers. */
static bool run_device(kiln_rt_model *m, const spec *s, int runs)
{
    const rt_cuda_api *cu = rt_cuda_api_get();
    CUdeviceptr dx = 0, dy = 0;
    base_diag d;
    base_diag_init(&d);
    bool ok = rt_cuda_alloc(sizeof(float) * N, &dx, &d) == KILN_OK && rt_cuda_alloc(sizeof(float) * N, &dy, &d) == KILN_OK;
    float x[N], y[N];
    for (int r = 0; ok && r < runs; r++) {
        make_input(x, r + 1);
        ok = rt_cuda_copy_to_device(dx, x, sizeof(x), &d) == KILN_OK &&
             KILN_CU_CHECK(&d, cu->cuMemsetD8(dy, 0xff, sizeof(y))) == KILN_OK &&
             KILN_CU_CHECK(&d, cu->cuCtxSynchronize()) == KILN_OK; /* the run waits for nothing of ours */
        const void *in[1] = {(const void *)(uintptr_t)dx};
        void *out[2] = {(void *)(uintptr_t)dy, NULL};
        if (ok && kiln_rt_run_device(m, in, out) != KILN_OK) {
            printf("       device run %d: %s\n", r, kiln_rt_last_error());
            ok = false;
        }
        ok = ok && rt_cuda_copy_to_host(y, dy, sizeof(y), &d) == KILN_OK;
        ok = ok && kiln_rt_result(m, 0, NULL) == (const void *)(uintptr_t)dy && count_wrong(x, y, s) == 0;
        if (ok && s->segments) ok = check_nonzero(m, x);
    }
    if (d.n_msgs) printf("       %s\n", base_diag_text(&d));
    base_diag_free(&d);
    rt_cuda_free(dx);
    rt_cuda_free(dy);
    return ok;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Prints the time of a run of two tiny kernels: what the runtime costs. */
static void time_runs(kiln_rt_model *m)
{
    float x[N], y[N];
    make_input(x, 0);
    const void *in[1] = {x};
    void *out[1] = {y};
    CUdeviceptr dx = 0, dy = 0;
    bool ok = rt_cuda_alloc(sizeof(x), &dx, NULL) == KILN_OK && rt_cuda_alloc(sizeof(y), &dy, NULL) == KILN_OK;
    const void *din[1] = {(const void *)(uintptr_t)dx};
    void *dout[1] = {(void *)(uintptr_t)dy};
    double host_us = 0, dev_us = 0;
    for (int rep = 0; ok && rep < 2; rep++) { /* the first round warms up */
        double t0 = now_us();
        for (int r = 0; ok && r < 1000; r++) ok = kiln_rt_run(m, in, out) == KILN_OK;
        double t1 = now_us();
        for (int r = 0; ok && r < 1000; r++) ok = kiln_rt_run_device(m, din, dout) == KILN_OK;
        host_us = (t1 - t0) / 1000;
        dev_us = (now_us() - t1) / 1000;
    }
    char what[200];
    snprintf(what, sizeof(what), "a run of 2 kernels: %.1f us with host buffers (4 KB each way), %.1f us with device "
             "pointers", host_us, dev_us);
    check(ok, what);
    rt_cuda_free(dx);
    rt_cuda_free(dy);
}

/* ---- the tests ---------------------------------------------------------------------- */

static const rt_glaunch K_A = {.segment = -1, .grid = 4, .block = 128, .name = "k_a", .label = "mul1+add1"};
static const rt_glaunch K_C = {.segment = -1, .grid = 3, .block = 256, .smem = 65536, .name = "k_c",
                               .label = "add2 (64 KB smem)"};
static const rt_glaunch K_FAULT = {.segment = -1, .grid = 2, .block = 32, .name = "k_fault", .label = "gather1"};
static const rt_glaunch SEG_RELU = {.segment = 0, .name = "", .label = "relu1 (fallback)"};
static const rt_glaunch SEG_NZ = {.segment = 1, .name = "", .label = "nonzero1 (fallback)"};

static void test_kernels(const images *im)
{
    spec s = {.prec = KILN_GPREC_FP32, .n_launches = 2, .launches = {K_A, K_C}, .arena_bytes = ARENA_BYTES,
              .only_image = -1};
    kiln_rt_model *m = load(&s, im, "two kernels, fp32");
    if (!m) return;
    check(strcmp(kiln_rt_target(m), "cuda") == 0 && kiln_rt_num_inputs(m) == 1 && kiln_rt_num_outputs(m) == 1 &&
              kiln_rt_arena_bytes(m) == ARENA_BYTES && kiln_rt_weight_bytes(m) == 4 * N,
          "target, signature, arena and weight bytes");
    int kernels = -1, graphs = -1;
    kiln_rt_num_launches(m, &kernels, &graphs);
    check(kernels == 2 && graphs == 1, "two kernel launches from one CUDA graph");
    check(run_host(m, &s, 50), "50 runs with host buffers");
    check(run_device(m, &s, 20), "20 runs with device pointers");
    check(run_host(m, &s, 5), "host buffers again after device pointers");
    check(run_pinned(m, &s, 20), "20 runs with kiln_rt_host_alloc's page-locked buffers");
    time_runs(m);

    /* profiling: a stage per launch, kernels one by one */
    check(kiln_rt_set_profiling(m, 1) == KILN_OK, "profiling on");
    kiln_rt_num_launches(m, &kernels, &graphs);
    check(kernels == 2 && graphs == 0, "while profiling: two kernels, no graph");
    check(run_host(m, &s, 10), "10 profiled runs");
    const char *name = NULL;
    int tasks = 0;
    double run_a = 0, run_c = 0, wait = -1;
    bool ok = kiln_rt_num_stages(m) == 2 && kiln_rt_stage_profile(m, 0, &name, &tasks, &run_a, &wait) == KILN_OK &&
              strcmp(name, "mul1+add1") == 0 && tasks == 4 && wait == 0 &&
              kiln_rt_stage_profile(m, 1, &name, &tasks, &run_c, NULL) == KILN_OK && tasks == 3;
    char what[256];
    snprintf(what, sizeof(what), "profile: '%s' %.1f us, 'add2' %.1f us over 10 runs", "mul1+add1", run_a * 1e6,
             run_c * 1e6);
    check(ok && run_a > 0 && run_c > 0 && run_a < 1 && run_c < 1, what);
    check(kiln_rt_stage_profile(m, 2, NULL, NULL, NULL, NULL) == KILN_ERR_INVALID_ARG, "no stage 2");
    check(kiln_rt_set_profiling(m, 0) == KILN_OK && run_host(m, &s, 3), "profiling off, graphs again");
    kiln_rt_num_launches(m, &kernels, &graphs);
    check(graphs == 1, "one graph launch once profiling is off");
    kiln_rt_free(m);
}

static const rt_glaunch K_SLOW = {.segment = -1, .grid = 4, .block = 128, .name = "k_slow", .label = "slow",
                                  .early = true};
/* 120 KB of shared memory: one block per multiprocessor, so the runtime
 * launches them early (rt_cuda.c, spreads_early) */
static const rt_glaunch K_E = {.segment = -1, .grid = 3, .block = 256, .smem = 120 * 1024, .name = "k_e",
                               .label = "add2 (waits)", .early = true};
static const rt_glaunch K_NOWAIT = {.segment = -1, .grid = 3, .block = 256, .smem = 120 * 1024, .name = "k_nowait",
                                    .label = "add2 (does not wait)", .early = true};

/* Early launches: a kernel that waits (kg_grid_dep) after a slow one is
 * right on every run; on sm_90, one that does not wait reads the arena
 * before the slow kernel wrote it, which shows that the launches really
 * overlap, unless KILN_EARLY_LAUNCH=0, or unless the kernel fits several
 * blocks per multiprocessor in less than a full wave (64 KB: three), which
 * the runtime launches in order so that its blocks spread out. */
static void test_early(const images *im, const rt_cuda_device *dev)
{
    spec s = {.prec = KILN_GPREC_FP32, .n_launches = 2, .launches = {K_SLOW, K_E}, .arena_bytes = ARENA_BYTES,
              .only_image = -1};
    kiln_rt_model *m = load(&s, im, "early launches, fp32");
    if (!m) return;
    check(run_host(m, &s, 20) && run_device(m, &s, 10), "early launch after a slow kernel: 30 runs right");
    kiln_rt_free(m);
    if (dev->sm_major < 9) return;

    s.launches[1] = K_NOWAIT;
    float x[N], y[N];
    const void *in[1] = {x};
    void *out[2] = {y, NULL};
    int stale[3] = {-1, -1, -1};
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1) setenv("KILN_EARLY_LAUNCH", "0", 1);
        if (pass == 2) s.launches[1].smem = 65536;
        m = load(&s, im, "early launches without the wait");
        if (pass == 1) unsetenv("KILN_EARLY_LAUNCH");
        if (!m) return;
        int wrong = 0;
        for (int r = 0; r < 10; r++) {
            make_input(x, r);
            bool ok = kiln_rt_run(m, in, out) == KILN_OK;
            for (int i = 0; ok && i < N; i++)
                if (y[i] != expected(x, i, &s)) { /* stale data is expected here: counted, not printed */
                    wrong++;
                    break;
                }
            if (!ok) wrong = 100;
        }
        kiln_rt_free(m);
        stale[pass] = wrong;
    }
    char what[200];
    snprintf(what, sizeof(what),
             "a kernel that does not wait runs early: %d of 10 runs read stale data; %d with KILN_EARLY_LAUNCH=0, "
             "%d with 3 blocks per multiprocessor",
             stale[0], stale[1], stale[2]);
    check(stale[0] > 0 && stale[0] <= 10 && stale[1] == 0 && stale[2] == 0, what);
}

static void test_segments(const images *im, kiln_gprec prec)
{
    spec s = {.prec = prec, .n_launches = 4, .launches = {K_A, SEG_RELU, SEG_NZ, K_C}, .arena_bytes = ARENA_BYTES,
              .only_image = -1, .segments = true};
    char what[256];
    snprintf(what, sizeof(what), "kernel, Relu and NonZero segments, kernel; %s", rt_gprec_name(prec));
    kiln_rt_model *m = load(&s, im, what);
    if (!m) return;
    int kernels = -1, graphs = -1;
    kiln_rt_num_launches(m, &kernels, &graphs);
    check(kernels == 2 && graphs == 2, "segments: two kernels, two graphs");
    const kiln_rt_tensor_info *nz = kiln_rt_output(m, 1);
    check(nz && nz->dims[1] == -1 && nz->nbytes == 0, "segments: the NonZero output's shape is data-dependent");
    snprintf(what, sizeof(what), "segments, %s: 20 runs with host buffers", rt_gprec_name(prec));
    check(run_host(m, &s, 20), what);
    snprintf(what, sizeof(what), "segments, %s: 10 runs with device pointers", rt_gprec_name(prec));
    check(run_device(m, &s, 10), what);
    snprintf(what, sizeof(what), "segments, %s: 10 runs with page-locked buffers", rt_gprec_name(prec));
    check(run_pinned(m, &s, 10), what);
    check(kiln_rt_set_profiling(m, 1) == KILN_OK && run_host(m, &s, 3), "segments: profiled runs");
    double seg_s = 0, k_s = 0;
    const char *name = NULL;
    int tasks = 0;
    kiln_rt_stage_profile(m, 1, &name, &tasks, &seg_s, NULL);
    kiln_rt_stage_profile(m, 3, NULL, NULL, &k_s, NULL);
    check(kiln_rt_num_stages(m) == 4 && strcmp(name, "relu1 (fallback)") == 0 && tasks == 1 && seg_s > 0 && k_s > 0,
          "segments: the profile times the segment on the host and the kernels on the GPU");
    kiln_rt_free(m);
}

static void test_fault(const images *im)
{
    spec s = {.prec = KILN_GPREC_FP32, .n_launches = 3, .launches = {K_A, K_FAULT, K_C}, .arena_bytes = ARENA_BYTES,
              .only_image = -1};
    kiln_rt_model *m = load(&s, im, "a kernel that checks its indices");
    if (!m) return;
    float x[N], y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    make_input(x, 0);
    x[0] = 5000;
    kiln_status st = kiln_rt_run(m, in, out);
    printf("       %s\n", kiln_rt_last_error());
    check(st == KILN_ERR_INVALID_ARG && strstr(kiln_rt_last_error(), "group 'gather1' (launch 1): index out of range"),
          "a fault fails the run, naming the group and the launch");
    check(run_host(m, &s, 5), "the fault does not outlive its run");
    /* through a device run too */
    x[0] = 5000;
    CUdeviceptr dx = 0, dy = 0;
    rt_cuda_alloc(sizeof(x), &dx, NULL);
    rt_cuda_alloc(sizeof(y), &dy, NULL);
    rt_cuda_copy_to_device(dx, x, sizeof(x), NULL);
    KILN_CU_CHECK(NULL, rt_cuda_api_get()->cuCtxSynchronize());
    const void *din[1] = {(const void *)(uintptr_t)dx};
    void *dout[1] = {(void *)(uintptr_t)dy};
    check(dx && dy && kiln_rt_run_device(m, din, dout) == KILN_ERR_INVALID_ARG &&
              strstr(kiln_rt_last_error(), "launch 1"),
          "a fault in a run with device pointers");
    const void *din_odd[1] = {(const void *)(uintptr_t)(dx + 4)};
    check(kiln_rt_run_device(m, din_odd, dout) == KILN_ERR_INVALID_ARG &&
              strstr(kiln_rt_last_error(), "is not 16-byte aligned"),
          "a device pointer that is not 16-byte aligned is refused before anything runs");
    const void *hin[1] = {x};
    void *hout[1] = {y};
    check(kiln_rt_run(m, din, hout) == KILN_ERR_INVALID_ARG &&
              strstr(kiln_rt_last_error(), "input 0 ('x') points at device memory") &&
              kiln_rt_run(m, hin, dout) == KILN_ERR_INVALID_ARG &&
              strstr(kiln_rt_last_error(), "output 0 ('y') points at device memory"),
          "kiln_rt_run refuses device pointers, naming the tensor");
    rt_cuda_free(dx);
    rt_cuda_free(dy);
    kiln_rt_free(m);
}

/* k_w's profile: a stage per member, named by kg_prof_slots, timed inside
 * the kernel; the second member's work ends after the first's; the runs
 * stay right while profiling and after. */
static void test_member_profile(kiln_rt_model *m, const spec *s)
{
    check(kiln_rt_set_profiling(m, 1) == KILN_OK && run_host(m, s, 10), "member profile: 10 profiled runs");
    const char *n0 = NULL, *n1 = NULL;
    int t0 = 0, t1 = 0;
    double run0 = 0, run1 = 0, wait = -1, st0 = 0, end0 = 0, st1 = 0, end1 = 0, busy0 = 0, busy1 = 0, w1 = 0;
    bool ok = kiln_rt_num_stages(m) == 2 && kiln_rt_stage_profile(m, 0, &n0, &t0, &run0, &wait) == KILN_OK &&
              kiln_rt_stage_profile(m, 1, &n1, &t1, &run1, NULL) == KILN_OK &&
              kiln_rt_stage_timeline(m, 0, &st0, &end0, &busy0, NULL) == KILN_OK &&
              kiln_rt_stage_timeline(m, 1, &st1, &end1, &busy1, &w1) == KILN_OK;
    char what[256];
    snprintf(what, sizeof(what),
             "member profile: '%s' %d rTasks %.2f..%.2f us busy %.2f us, '%s' %d rTasks %.2f..%.2f us busy %.2f us "
             "waited %.2f us (10 runs)", n0 ? n0 : "?", t0, st0 * 1e5, end0 * 1e5, busy0 * 1e5, n1 ? n1 : "?", t1,
             st1 * 1e5, end1 * 1e5, busy1 * 1e5, w1 * 1e5);
    check(ok && strcmp(n0, "mul1+add1") == 0 && strcmp(n1, "add2 \"quoted\"") == 0 && t0 == 8 && t1 == 8 && wait == 0,
          what);
    check(ok && st0 == 0 && end0 > 0 && busy0 > 0 && busy1 > 0 && end1 >= end0 && st1 >= st0 && w1 >= 0,
          "member profile: both members ran, the second ending after the first");
    check(ok && fabs(run0 + run1 - end1) < 1e-9 * 10, "member profile: the members' run times add up to the kernel's");
    check(kiln_rt_set_profiling(m, 0) == KILN_OK && run_host(m, s, 3), "member profile: off, runs right again");
}

/* A persistent kernel asks for far more blocks than fit: the runtime gives
 * it what is resident, and its grid barrier orders the two stages. */
static void test_persistent(const images *im, const char *kernel)
{
    const rt_glaunch k_p = {.segment = -1, .persistent = true, .grid = 1u << 20, .block = 128, .name = kernel,
                            .label = "mul1+add1 .. add2 (2 groups in 2 stages)"};
    spec s = {.prec = KILN_GPREC_FP32, .n_launches = 1, .launches = {k_p}, .arena_bytes = ARENA_BYTES,
              .only_image = -1};
    char what[80];
    snprintf(what, sizeof(what), "a persistent kernel of two stages (%s)", kernel);
    kiln_rt_model *m = load(&s, im, what);
    if (!m) return;
    int kernels = -1, graphs = -1;
    kiln_rt_num_launches(m, &kernels, &graphs);
    check(kernels == 1 && graphs == 1, "persistent: one kernel launch");
    check(run_host(m, &s, 50), "persistent: 50 runs, each stage reading other blocks' results");
    check(run_device(m, &s, 10), "persistent: 10 runs with device pointers");
    if (strcmp(kernel, "k_w") == 0) test_member_profile(m, &s);
    else check(kiln_rt_num_stages(m) == 1 && kiln_rt_stage_timeline(m, 0, NULL, NULL, NULL, NULL) == KILN_ERR_UNSUPPORTED,
               "persistent: a kernel without profile slots is one stage");
    kiln_rt_free(m);
}

/* A barrier one block never reaches (k_hang) or a counter that never
 * reaches its count (k_whang): the watchdog turns the hang into an error
 * naming the stage and the waiting block; the module is not run again. */
static void test_watchdog(const images *im, const char *kernel, int block)
{
    const rt_glaunch k_hang = {.segment = -1, .persistent = true, .grid = 2, .block = 32, .name = kernel,
                               .label = "hang1"};
    spec s = {.prec = KILN_GPREC_FP32, .n_launches = 1, .launches = {k_hang}, .arena_bytes = ARENA_BYTES,
              .only_image = -1};
    char what[96], where[96] = "stage 3 (a grid barrier or completion counters) timed out in block";
    snprintf(what, sizeof(what), "a persistent kernel whose wait is never over (%s)", kernel);
    if (block >= 0) /* else whichever block's watchdog goes off first */
        snprintf(where + strlen(where), sizeof(where) - strlen(where), " %d", block);
    kiln_rt_model *m = load(&s, im, what);
    if (!m) return;
    float x[N], y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    make_input(x, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kiln_status st = kiln_rt_run(m, in, out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s_taken = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("       %s (%.1f s)\n", kiln_rt_last_error(), s_taken);
    check(st == KILN_ERR_INTERNAL && strstr(kiln_rt_last_error(), "launch 0 ('hang1')") &&
              strstr(kiln_rt_last_error(), where),
          "a hung barrier fails the run, naming the launch, the stage and the block");
    check(kiln_rt_run(m, in, out) != KILN_OK && strstr(kiln_rt_last_error(), "earlier failure"),
          "after a timeout the model does not run again");
    kiln_rt_free(m);
}

static void test_load_errors(const images *im, const rt_cuda_device *dev)
{
    spec s = {.prec = KILN_GPREC_FP32, .n_launches = 2, .launches = {K_A, K_C}, .arena_bytes = ARENA_BYTES,
              .only_image = dev->sm_major == 9 ? 0 : 1};
    size_t n;
    uint8_t *art = build(&s, im, &n);
    kiln_rt_model *m = NULL;
    kiln_status st = art ? kiln_rt_load_buffer(art, n, 0, &m) : KILN_ERR_INTERNAL;
    printf("       %s\n", kiln_rt_last_error());
    check(st == KILN_ERR_UNSUPPORTED && strstr(kiln_rt_last_error(), "is built for sm_") && m == NULL,
          "no image for this GPU: KILN_ERR_UNSUPPORTED naming both architectures");
    free(art);

    s.only_image = -1;
    art = build(&s, im, &n);
    setenv("KILN_DEVICE", "4000", 1);
    st = art ? kiln_rt_load_buffer(art, n, 0, &m) : KILN_ERR_INTERNAL;
    check(st == KILN_ERR_NO_DEVICE && strstr(kiln_rt_last_error(), "device 4000"), "KILN_DEVICE=4000: no such device");
    setenv("KILN_DEVICE", "first", 1);
    st = art ? kiln_rt_load_buffer(art, n, 0, &m) : KILN_ERR_INTERNAL;
    check(st == KILN_ERR_INVALID_ARG && strstr(kiln_rt_last_error(), "KILN_DEVICE='first'"),
          "KILN_DEVICE=first: not a number");
    setenv("KILN_DEVICE", "0", 1);
    st = art ? kiln_rt_load_buffer(art, n, 0, &m) : KILN_ERR_INTERNAL;
    check(st == KILN_OK, "KILN_DEVICE=0");
    kiln_rt_free(m);
    unsetenv("KILN_DEVICE");
    free(art);

    /* 2^40 bytes of arena: a valid artifact no GPU holds */
    s.arena_bytes = ((uint64_t)1 << 40) - 64;
    art = build(&s, im, &n);
    st = art ? kiln_rt_load_buffer(art, n, 0, &m) : KILN_ERR_INTERNAL;
    printf("       %s\n", kiln_rt_last_error());
    check(st == KILN_ERR_OOM && strstr(kiln_rt_last_error(), "activation arena (1099511627712 bytes") && m == NULL,
          "an absurd arena is KILN_ERR_OOM naming the arena and its size");
    free(art);

    /* a kernel the module lacks */
    s.arena_bytes = ARENA_BYTES;
    s.launches[1].name = "k_missing";
    art = build(&s, im, &n);
    st = art ? kiln_rt_load_buffer(art, n, 0, &m) : KILN_ERR_INTERNAL;
    check(st == KILN_ERR_INVALID_MODEL && strstr(kiln_rt_last_error(), "k_missing"),
          "a launch of a kernel the image lacks is KILN_ERR_INVALID_MODEL");
    free(art);
}

/* Last: an illegal address loses the CUDA context for the process. */
static void test_crash(const images *im)
{
    static const rt_glaunch k_crash = {.segment = -1, .grid = 1, .block = 32, .name = "k_crash", .label = "bad1"};
    spec s = {.prec = KILN_GPREC_FP32, .n_launches = 2, .launches = {K_A, k_crash}, .arena_bytes = ARENA_BYTES,
              .only_image = -1};
    kiln_rt_model *m = load(&s, im, "a kernel writing to an illegal address");
    if (!m) return;
    float x[N], y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    make_input(x, 0);
    kiln_status st = kiln_rt_run(m, in, out);
    printf("       %s\n", kiln_rt_last_error());
    check(st != KILN_OK && strstr(kiln_rt_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS"),
          "an illegal address fails the run with the driver's message");
    st = kiln_rt_run(m, in, out);
    check(st != KILN_OK && strstr(kiln_rt_last_error(), "earlier failure"), "later runs fail at once");
    check(kiln_rt_set_profiling(m, 1) != KILN_OK || kiln_rt_run(m, in, out) != KILN_OK,
          "profiling after the failure fails cleanly");
    kiln_rt_free(m);
    check(true, "freeing the model after the failure");
}

/* kg_math.h's float GELU (kg_geluf, the fused epilogues' and elementwise
 * kernels' one) on a dense sweep of [-12, 12] against the host's double
 * x * erfc(-x / sqrt 2) / 2: within 4e-6 relative, or 2e-7 absolute in
 * the negative tail, where it underflows (kg_math.h's fit promises 2e-6
 * relative for |x| <= 5). */
#define ACT_SWEEP (1 << 22)
static const char act_src[] = "extern \"C\" __global__ void k_gelu(const float *x, float *y, int n)\n"
                              "{\n"
                              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                              "    if (i < n) y[i] = kg_geluf(x[i]);\n"
                              "}\n";

/* kg.h, kg_math.h and act_src, or NULL when kg_math.h cannot be read. */
static char *act_source(void)
{
    char *math = read_text("src/target/cuda/kernels/kg_math.h");
    if (!math) return NULL;
    size_t n_src = strlen(prelude) + strlen(math) + sizeof(act_src) + 4;
    char *src = malloc(n_src);
    if (src) snprintf(src, n_src, "%s\n%s\n%s", prelude, math, act_src);
    free(math);
    return src;
}

static void test_gelu_accuracy(const rt_cuda_device *dev)
{
    char *src = act_source();
    check(src != NULL, "read src/target/cuda/kernels/kg_math.h");
    if (!src) return;
    base_diag d;
    base_diag_init(&d);
    void *cubin = NULL;
    size_t n_cubin = 0;
    CUmodule mod = NULL;
    CUfunction fn = NULL;
    CUdeviceptr dx = 0, dy = 0;
    float *x = malloc(ACT_SWEEP * sizeof(float)), *y = malloc(ACT_SWEEP * sizeof(float));
    kiln_status st = x && y ? KILN_OK : KILN_ERR_OOM;
    if (st == KILN_OK)
        st = cg_nvrtc_compile(src, "gelu_test.cu", dev->sm_major, dev->sm_minor, dev->sm_major >= 9, &cubin, &n_cubin,
                              &d);
    free(src);
    if (st == KILN_OK) st = rt_cuda_module_load(cubin, n_cubin, &mod, &d);
    base_free(cubin);
    if (st == KILN_OK) st = rt_cuda_module_function(mod, "k_gelu", &fn, &d);
    if (st == KILN_OK) st = rt_cuda_alloc(ACT_SWEEP * sizeof(float), &dx, &d);
    if (st == KILN_OK) st = rt_cuda_alloc(ACT_SWEEP * sizeof(float), &dy, &d);
    for (int i = 0; x && i < ACT_SWEEP; i++) x[i] = -12.0f + 24.0f * (float)i / (float)(ACT_SWEEP - 1);
    if (x) x[0] = -0.0f, x[1] = 1e-30f, x[2] = -1e-30f, x[3] = NAN; /* signed zero, tiny inputs, NaN */
    if (st == KILN_OK) st = rt_cuda_copy_to_device(dx, x, ACT_SWEEP * sizeof(float), &d);
    int n = ACT_SWEEP;
    void *args[] = {&dx, &dy, &n};
    if (st == KILN_OK) st = rt_cuda_launch(fn, (ACT_SWEEP + 255) / 256, 256, 0, NULL, args, &d);
    if (st == KILN_OK) st = rt_cuda_stream_sync(NULL, &d);
    if (st == KILN_OK) st = rt_cuda_copy_to_host(y, dy, ACT_SWEEP * sizeof(float), &d);
    double max_rel = 0, max_abs_tail = 0, worst_x = 0;
    int n_bad = 0;
    for (int i = 4; st == KILN_OK && i < ACT_SWEEP; i++) {
        double ref = 0.5 * (double)x[i] * erfc(-(double)x[i] / sqrt(2.0)), err = fabs((double)y[i] - ref);
        if (fabs(ref) > 1e-6 && err / fabs(ref) > max_rel) max_rel = err / fabs(ref), worst_x = x[i];
        if (fabs(ref) <= 1e-6 && err > max_abs_tail) max_abs_tail = err;
        if (!(err <= 4e-6 * fabs(ref) + 2e-7) && n_bad++ < 3)
            printf("       kg_geluf(%.9g) = %.9g, double %.9g\n", x[i], y[i], ref);
    }
    char what[200];
    snprintf(what, sizeof(what),
             "kg_geluf on %d points of [-12, 12]: max %.2g relative (at %.4g), %.2g absolute where |gelu| <= 1e-6; "
             "%d beyond 4e-6 relative + 2e-7",
             ACT_SWEEP, max_rel, worst_x, max_abs_tail, n_bad);
    if (st != KILN_OK) printf("       %s\n", base_diag_text(&d));
    check(st == KILN_OK && n_bad == 0, what);
    check(st == KILN_OK && y[0] == 0.0f && fabs(y[1] - 0.5e-30) <= 2e-36 && fabs(y[2] + 0.5e-30) <= 2e-36 &&
              isnan(y[3]),
          "kg_geluf(-0) = 0, gelu(+-1e-30) = +-5e-31 within 4e-6, NaN stays NaN");
    rt_cuda_free(dx);
    rt_cuda_free(dy);
    rt_cuda_module_free(mod);
    free(x);
    free(y);
    base_diag_free(&d);
}

/* --compile-only: only the NVRTC builds of the test program (no GPU needed). */
static int compile_only(void)
{
    prelude = read_prelude();
    check(prelude != NULL, "read src/target/cuda/kernels/kg.h");
    images im[3];
    const char *const defines[3] = {"#define SRC_OFF 0\n", "#define SRC_OFF 4096\n",
                                    "#define PREC16 1\n#define SRC_OFF 4096\n"};
    const char *const what[3] = {"NVRTC: the test program, fp32", "NVRTC: the test program, fp32 with segments",
                                 "NVRTC: the test program, fp16 with segments"};
    for (int i = 0; i < 3; i++) {
        check(prelude && compile(defines[i], &im[i]), what[i]);
        for (int k = 0; k < 2; k++) base_free(im[i].cubin[k]);
    }
    char *src = prelude ? act_source() : NULL;
    void *cubin = NULL;
    size_t n_cubin = 0;
    base_diag d;
    base_diag_init(&d);
    bool ok = src && cg_nvrtc_compile(src, "gelu_test.cu", 9, 0, true, &cubin, &n_cubin, &d) == KILN_OK;
    if (src && !ok) printf("       NVRTC: %s\n", base_diag_text(&d));
    check(ok, "NVRTC: the GELU accuracy program for sm_90a");
    base_free(cubin);
    base_diag_free(&d);
    free(src);
    printf("runtime: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--compile-only") == 0) return compile_only();
    base_diag d;
    base_diag_init(&d);
    kiln_status st = rt_cuda_open(&d);
    if (st != KILN_OK || rt_cuda_device_count() == 0) {
        printf("no CUDA device (%s)\nruntime: 0 passed, 1 failed\n", base_diag_text(&d));
        base_diag_free(&d);
        return 7;
    }
    rt_cuda_device dev;
    if (rt_cuda_device_info(0, &dev, &d) != KILN_OK) {
        printf("device 0: %s\nruntime: 0 passed, 1 failed\n", base_diag_text(&d));
        return 1;
    }
    printf("device 0: %s, sm_%d%d\n", dev.name, dev.sm_major, dev.sm_minor);
    rt_cuda_ctx ctx;
    check(rt_cuda_ctx_init(0, &ctx, &d) == KILN_OK, "primary context on device 0 (for the test's own buffers)");
    prelude = read_prelude();
    check(prelude != NULL, "read src/target/cuda/kernels/kg.h");
    images fp32 = {0}, fp32_seg = {0}, fp16_seg = {0};
    bool compiled = prelude && compile("#define SRC_OFF 0\n", &fp32) &&
                    compile("#define SRC_OFF 4096\n", &fp32_seg) &&
                    compile("#define PREC16 1\n#define SRC_OFF 4096\n", &fp16_seg);
    check(compiled, "NVRTC: the test program for sm_80 and sm_90a");
    if (compiled) {
        test_kernels(&fp32);
        test_segments(&fp32_seg, KILN_GPREC_FP32);
        test_segments(&fp16_seg, KILN_GPREC_FP16);
        test_fault(&fp32);
        test_persistent(&fp32, "k_p");
        test_persistent(&fp32, "k_w");
        test_watchdog(&fp32, "k_hang", 1);
        test_watchdog(&fp32, "k_whang", -1);
        test_load_errors(&fp32, &dev);
        test_gelu_accuracy(&dev);
        test_early(&fp32, &dev);
        if (argc > 1 && strcmp(argv[1], "--no-crash") == 0) printf("       (the illegal address test is skipped)\n");
        else test_crash(&fp32);
    }
    images_free(&fp32);
    images_free(&fp32_seg);
    images_free(&fp16_seg);
    free((char *)prelude);
    rt_cuda_ctx_free(&ctx);
    base_diag_free(&d);
    printf("runtime: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
