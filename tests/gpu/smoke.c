/*
 * smoke.c: the CUDA foundation on a real GPU (not part of `make check`,
 * which runs where there is none). Build with `make build/gpu_smoke`; it
 * needs only libc and libdl, and the driver and NVRTC at run time.
 *
 * Opens the driver and lists the devices, compiles a vector add with NVRTC
 * for device 0's architecture, runs it on 1M elements against a host
 * reference, times 100 launches issued one by one and replayed from one CUDA
 * graph (launch overhead per kernel), and checks that a 10 TB allocation is
 * KILN_ERR_OOM and a cubin for another architecture KILN_ERR_UNSUPPORTED.
 * Ends with "smoke: N passed, M failed"; exit status 1 on a failure,
 * 7 without a GPU.
 */
#include "runtime/cuda.h"
#include "target/cuda/nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char kernels_src[] =
    "#include <cuda_fp16.h>\n"
    "\n"
    "extern \"C\" __global__ void vadd(const __half *a, const __half *b, float *c, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) c[i] = __half2float(a[i]) + __half2float(b[i]);\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void empty(void) {}\n";

#define N_ELEMS (1 << 20)
#define BLOCK 256
#define N_LAUNCHES 100
#define N_REPEATS 7

static int passed, failed;

static void check(bool ok, const char *what, base_diag *d)
{
    printf("%-6s %s\n", ok ? "ok" : "FAIL", what);
    if (!ok && d && d->n_msgs) printf("       %s\n", base_diag_text(d));
    if (d) base_diag_clear(d);
    if (ok) passed++;
    else failed++;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over N_REPEATS of the time per kernel of N_LAUNCHES launches of fn,
 * issued one by one (graph NULL) or replayed from graph; -1 on error. */
static double time_launches(CUfunction fn, unsigned n_blocks, void **args, const rt_cuda_graph *graph, CUstream s,
                            base_diag *d)
{
    double t[N_REPEATS];
    for (int r = 0; r < N_REPEATS; r++) {
        double t0 = now_us();
        kiln_status st = KILN_OK;
        if (graph) st = rt_cuda_graph_launch(graph, s, d);
        for (int i = 0; !graph && i < N_LAUNCHES && st == KILN_OK; i++)
            st = rt_cuda_launch(fn, n_blocks, BLOCK, 0, s, args, d);
        if (st == KILN_OK) st = rt_cuda_stream_sync(s, d);
        if (st != KILN_OK) return -1;
        t[r] = (now_us() - t0) / N_LAUNCHES;
    }
    qsort(t, N_REPEATS, sizeof(t[0]), cmp_double);
    return t[N_REPEATS / 2];
}

/* Times fn plain and from a graph of N_LAUNCHES launches; prints one line. */
static void time_kernel(const char *label, CUfunction fn, unsigned n_blocks, void **args, CUstream s, base_diag *d)
{
    /* warm up: the first launches load the module onto the GPU */
    double plain = time_launches(fn, n_blocks, args, NULL, s, d);
    plain = time_launches(fn, n_blocks, args, NULL, s, d);
    rt_cuda_graph g = {0};
    kiln_status st = rt_cuda_graph_begin(s, d);
    for (int i = 0; i < N_LAUNCHES && st == KILN_OK; i++) st = rt_cuda_launch(fn, n_blocks, BLOCK, 0, s, args, d);
    /* end the capture even after a failed launch, or the stream stays capturing */
    kiln_status end_st = rt_cuda_graph_end(s, &g, d);
    if (st == KILN_OK) st = end_st;
    double graphed = -1;
    if (st == KILN_OK) {
        time_launches(fn, n_blocks, args, &g, s, d);
        graphed = time_launches(fn, n_blocks, args, &g, s, d);
    }
    rt_cuda_graph_free(&g);
    char what[200];
    snprintf(what, sizeof(what), "%-24s %d launches: %7.2f us/kernel plain, %7.2f us/kernel in one CUDA graph", label,
             N_LAUNCHES, plain, graphed);
    check(plain > 0 && graphed > 0, what, d);
}

int main(void)
{
    base_diag d;
    base_diag_init(&d);
    kiln_status st = rt_cuda_open(&d);
    if (st != KILN_OK) {
        printf("no CUDA device (%s)\nsmoke: 0 passed, 1 failed\n", base_diag_text(&d));
        base_diag_free(&d);
        return 7;
    }
    int n_dev = rt_cuda_device_count();
    printf("%d CUDA device(s); NVRTC %d\n", n_dev, cg_nvrtc_version());
    rt_cuda_device info = {0};
    for (int i = 0; i < n_dev; i++) {
        rt_cuda_device x;
        if (rt_cuda_device_info(i, &x, &d) != KILN_OK) break;
        if (i == 0) info = x;
        printf("  %d: %s, sm_%d%d, %d SMs, %d threads/SM, %.1f GiB, L2 %d MiB, smem %d KiB/SM, %d KiB/block (opt-in), "
               "driver %d.%d\n",
               i, x.name, x.sm_major, x.sm_minor, x.n_sms, x.max_threads_per_sm, (double)x.mem_bytes / (1u << 30),
               x.l2_bytes >> 20, x.smem_per_sm_bytes >> 10, x.smem_per_block_optin_bytes >> 10,
               x.driver_version / 1000, x.driver_version % 1000 / 10);
    }
    check(n_dev > 0 && info.n_sms > 0, "device info", &d);

    rt_cuda_ctx ctx;
    CUstream s = NULL;
    CUmodule mod = NULL;
    CUfunction vadd = NULL, empty = NULL;
    CUdeviceptr da = 0, db = 0, dc = 0;
    st = rt_cuda_ctx_init(0, &ctx, &d);
    check(st == KILN_OK, "primary context on device 0", &d);
    if (st != KILN_OK) goto done;

    /* compile for the device's own architecture, with its arch-specific
     * features from Hopper on (sm_90a) */
    bool arch_specific = info.sm_major >= 9;
    void *cubin = NULL;
    size_t n_cubin = 0;
    double t0 = now_us();
    st = cg_nvrtc_compile(kernels_src, "smoke.cu", info.sm_major, info.sm_minor, arch_specific, &cubin, &n_cubin, &d);
    char what[200];
    snprintf(what, sizeof(what), "NVRTC: sm_%d%d%s cubin of %zu bytes in %.0f ms", info.sm_major, info.sm_minor,
             arch_specific ? "a" : "", n_cubin, (now_us() - t0) / 1e3);
    check(st == KILN_OK, what, &d);
    if (st != KILN_OK) goto done;
    st = rt_cuda_module_load(cubin, n_cubin, &mod, &d);
    if (st == KILN_OK) st = rt_cuda_module_function(mod, "vadd", &vadd, &d);
    if (st == KILN_OK) st = rt_cuda_module_function(mod, "empty", &empty, &d);
    base_free(cubin);
    check(st == KILN_OK, "module load, kernels vadd and empty found", &d);
    if (st != KILN_OK) goto done;
    CUfunction none;
    check(rt_cuda_module_function(mod, "no_such_kernel", &none, &d) == KILN_ERR_INVALID_ARG,
          "a missing kernel is KILN_ERR_INVALID_ARG", NULL);
    base_diag_clear(&d);

    int per_sm = 0;
    st = rt_cuda_occupancy(vadd, BLOCK, 0, &per_sm, &d);
    snprintf(what, sizeof(what), "occupancy: %d blocks of %d threads per SM", per_sm, BLOCK);
    check(st == KILN_OK && per_sm > 0, what, &d);

    /* 1M-element vector add against the host, on random halves, into a
     * poisoned output */
    st = rt_cuda_stream_create(&s, &d);
    if (st == KILN_OK) st = rt_cuda_alloc(N_ELEMS * sizeof(uint16_t), &da, &d);
    if (st == KILN_OK) st = rt_cuda_alloc(N_ELEMS * sizeof(uint16_t), &db, &d);
    if (st == KILN_OK) st = rt_cuda_alloc(N_ELEMS * sizeof(float), &dc, &d);
    uint16_t *ha = malloc(N_ELEMS * sizeof(uint16_t)), *hb = malloc(N_ELEMS * sizeof(uint16_t));
    float *hc = malloc(N_ELEMS * sizeof(float));
    if (!ha || !hb || !hc) {
        fprintf(stderr, "out of host memory\n");
        return 1;
    }
    srand((unsigned)time(NULL));
    for (int i = 0; i < N_ELEMS; i++) {
        ha[i] = base_f32_to_f16((float)rand() / (float)RAND_MAX * 20.0f - 10.0f);
        hb[i] = base_f32_to_f16((float)rand() / (float)RAND_MAX * 20.0f - 10.0f);
    }
    if (st == KILN_OK) st = rt_cuda_copy_to_device(da, ha, N_ELEMS * sizeof(uint16_t), &d);
    if (st == KILN_OK) st = rt_cuda_copy_to_device(db, hb, N_ELEMS * sizeof(uint16_t), &d);
    if (st == KILN_OK) st = KILN_CU_CHECK(&d, rt_cuda_api_get()->cuMemsetD8(dc, 0xff, N_ELEMS * sizeof(float)));
    int n = N_ELEMS;
    void *vadd_args[] = {&da, &db, &dc, &n};
    unsigned n_blocks = (N_ELEMS + BLOCK - 1) / BLOCK;
    if (st == KILN_OK) st = rt_cuda_launch(vadd, n_blocks, BLOCK, 0, s, vadd_args, &d);
    if (st == KILN_OK) st = rt_cuda_stream_sync(s, &d);
    if (st == KILN_OK) st = rt_cuda_copy_to_host(hc, dc, N_ELEMS * sizeof(float), &d);
    int n_wrong = 0;
    for (int i = 0; st == KILN_OK && i < N_ELEMS; i++) {
        float ref = base_f16_to_f32(ha[i]) + base_f16_to_f32(hb[i]);
        if (!(hc[i] == ref) && n_wrong++ < 5) printf("       c[%d] = %g, expected %g\n", i, hc[i], ref);
    }
    snprintf(what, sizeof(what), "vadd on %d halves: %d wrong", N_ELEMS, n_wrong);
    check(st == KILN_OK && n_wrong == 0, what, &d);
    free(ha);
    free(hb);
    free(hc);

    if (st == KILN_OK) {
        time_kernel("empty kernel, 1 block", empty, 1, NULL, s, &d);
        time_kernel("vadd, 1M elements", vadd, n_blocks, vadd_args, s, &d);
    }

    /* failures that must come back as the right status */
    CUdeviceptr huge = 0;
    st = rt_cuda_alloc((size_t)10 << 40, &huge, &d);
    printf("       10 TB allocation: %s\n", base_diag_text(&d));
    check(st == KILN_ERR_OOM && huge == 0, "a 10 TB allocation is KILN_ERR_OOM", NULL);
    base_diag_clear(&d);
    if (info.sm_major != 8) {
        /* a cubin runs only on its own major architecture */
        CUmodule other = NULL;
        st = cg_nvrtc_compile(kernels_src, "other.cu", 8, 0, false, &cubin, &n_cubin, &d);
        if (st == KILN_OK) {
            st = rt_cuda_module_load(cubin, n_cubin, &other, &d);
            base_free(cubin);
        }
        printf("       sm_80 cubin on sm_%d%d: %s\n", info.sm_major, info.sm_minor, base_diag_text(&d));
        check(st == KILN_ERR_UNSUPPORTED, "a cubin for another architecture is KILN_ERR_UNSUPPORTED", NULL);
        base_diag_clear(&d);
        rt_cuda_module_free(other);
    }

done:
    rt_cuda_free(da);
    rt_cuda_free(db);
    rt_cuda_free(dc);
    rt_cuda_stream_free(s);
    rt_cuda_module_free(mod);
    rt_cuda_ctx_free(&ctx);
    base_diag_free(&d);
    printf("smoke: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
