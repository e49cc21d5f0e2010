/*
 * gpu_barrier.cu: the cost of one grid barrier of a persistent kernel
 * (--schedule=mono) against cooperative groups' grid sync, for the grids
 * kiln launches (1 to 4 resident blocks of 128 or 256 threads per
 * multiprocessor). kiln's barrier is kg.h's own code, included as is.
 *
 *   nvcc -O3 -arch=sm_90a -I src/target/cuda/kernels -o gpu_barrier bench/gpu_barrier.cu
 *   ./gpu_barrier [barriers per launch, default 2000]
 *
 * Prints microseconds per barrier (best of 5 launches) and the ratio
 * cooperative groups / kiln (above 1: kiln's is faster). Exits 1 when a
 * barrier timed out or a launch failed.
 */
#include "kg_tiles.h" /* kg.h's waits take its types */
#include "kg.h"

#include <cooperative_groups.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __global__ void k_kiln(const kiln_gctx *c, int n)
{
    for (int i = 0; i < n; i++) kg_grid_sync(c, 0u, (unsigned)i);
    kg_grid_exit((unsigned)n + 1u);
}

static __global__ void k_cg(int n)
{
    cooperative_groups::grid_group g = cooperative_groups::this_grid();
    for (int i = 0; i < n; i++) g.sync();
}

#define CHECK(x)                                                                                                      \
    do {                                                                                                              \
        cudaError_t e_ = (x);                                                                                         \
        if (e_ != cudaSuccess) {                                                                                      \
            fprintf(stderr, "gpu_barrier: %s: %s\n", #x, cudaGetErrorString(e_));                                    \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

/* Best of 5 launches, in microseconds per barrier. */
static double time_us(int which, int grid, int block, int n, kiln_gctx *ctx)
{
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int rep = 0; rep < 5; rep++) {
        CHECK(cudaEventRecord(e0));
        if (which == 0) {
            k_kiln<<<grid, block>>>(ctx, n);
        } else {
            void *args[] = {&n};
            CHECK(cudaLaunchCooperativeKernel((void *)k_cg, grid, block, args, 0, 0));
        }
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaGetLastError());
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (ms < best) best = ms;
    }
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    return best * 1000.0 / n;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n < 1) {
        fprintf(stderr, "usage: gpu_barrier [barriers per launch >= 1]\n");
        return 1;
    }
    int sms;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    kiln_gctx *ctx;
    CHECK(cudaMallocManaged(&ctx, sizeof(*ctx)));
    memset(ctx, 0, sizeof(*ctx));
    unsigned *fail;
    CHECK(cudaMallocManaged(&fail, 4 * sizeof(unsigned)));
    memset(fail, 0, 4 * sizeof(unsigned));
    ctx->fail = fail;
    printf("grid barriers on %s (%d multiprocessors), %d per launch\n", prop.name, sms, n);
    printf("%6s %5s %12s %12s %8s\n", "block", "grid", "kiln us", "cg us", "cg/kiln");
    const int blocks[] = {128, 256};
    for (int b = 0; b < 2; b++)
        for (int per_sm = 1; per_sm <= 4; per_sm++) {
            int grid = sms * per_sm;
            double k = time_us(0, grid, blocks[b], n, ctx), g = time_us(1, grid, blocks[b], n, ctx);
            printf("%6d %5d %12.3f %12.3f %8.2f\n", blocks[b], grid, k, g, g / k);
        }
    if (fail[0]) {
        fprintf(stderr, "gpu_barrier: a barrier timed out (fault %u, stage %u, block %u)\n", fail[0], fail[2], fail[3]);
        return 1;
    }
    return 0;
}
