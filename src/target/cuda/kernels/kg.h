/*
 * kg.h: the prelude of every CUDA file kiln generates (C-style CUDA, no
 * templates): fixed-width integer types, 16-bit float storage, the kernel
 * context (runtime/gprog.h), dynamic shared memory and fault reporting.
 *
 * Storage vs compute. Float tensors are stored as float, __half or
 * __nv_bfloat16 (--precision) and always computed in float: loads go
 * through kg_ld_<dtype> and stores through kg_st_<dtype>, so the same
 * generated expression serves every precision.
 */
#ifndef KILN_KG_H
#define KILN_KG_H

#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef signed char kg_i8;
typedef short kg_i16;
typedef int kg_i32;
typedef long long kg_i64;
typedef unsigned char kg_u8;
typedef unsigned short kg_u16;
typedef unsigned int kg_u32;
typedef unsigned long long kg_u64;

/* The context every kernel receives (runtime/gprog.h kiln_gctx). */
typedef struct kiln_gctx {
    unsigned char *arena;
    const unsigned char *weights;
    void *const *io;
    unsigned int *fail;
    kg_u64 *prof; /* while the runtime profiles: the profile slots (kg_prof_rtask); else NULL */
} kiln_gctx;

/* A kernel launched in clusters of n blocks (blocks n j .. n j + n - 1):
 * on sm_90, where rOperators use them (kg_gemm_wgt_ws, kg_gemm_wgt_csum); the sm_80
 * image runs the same rTasks without. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KG_CLUSTER(n) __cluster_dims__(n, 1, 1)
#else
#define KG_CLUSTER(n)
#endif

/* The first statement of every kernel (cg_kernel_head), or, in a kernel
 * of rOperators that do it themselves (kg_gemm_wgt's g->grid_dep), of
 * every rTask once it has issued what reads no kernel's output. On sm_90 the
 * runtime launches kernels as programmatic dependent launches (gprog.h,
 * `early`): a kernel's blocks may be scheduled while the kernel before it
 * still runs. griddepcontrol.wait holds them until every kernel before
 * this one has completed and its writes are visible (at once when the
 * launch was an ordinary one), so nothing is read or written early; then
 * launch_dependents lets the next kernel's launch begin, which the driver
 * does once every block of this one has got here or exited: the launch
 * latency between kernels overlaps this kernel's work. The sm_80 image
 * has neither (there the runtime launches kernels one after another). */
static __device__ __forceinline__ void kg_grid_dep(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Dynamic shared memory of the rTask (its size is the launch's smem). */
extern __shared__ __align__(16) unsigned char kg_smem[];

#define KG_FAULT_INDEX 1u
#define KG_FAULT_VALUE 2u
#define KG_FAULT_TIMEOUT 3u

/* Records the first fault of the run: its code and the launch it came from. */
static __device__ __forceinline__ void kg_fault(const kiln_gctx *c, unsigned code, unsigned launch)
{
    if (atomicCAS(&c->fail[0], 0u, code) == 0u) atomicExch(&c->fail[1], launch);
}

/* ---- 16-bit storage, float compute ------------------------------------------- */

static __device__ __forceinline__ float kg_ld_f32(const float *p) { return *p; }
static __device__ __forceinline__ float kg_ld_f16(const __half *p) { return __half2float(*p); }
static __device__ __forceinline__ float kg_ld_bf16(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
static __device__ __forceinline__ void kg_st_f32(float *p, float v) { *p = v; }
static __device__ __forceinline__ void kg_st_f16(__half *p, float v) { *p = __float2half_rn(v); }
static __device__ __forceinline__ void kg_st_bf16(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* ---- cache hints (MonoNN 4.3; emit_ews.c and kg_rows.cuh under --schedule=mono) ---- *
 * kg_ldw_stream / kg_ldw_keep(p, bytes, w): the `bytes` (1, 2, 4, 8 or 16,
 * a constant once inlined; p aligned to them) at p as 32-bit words, laid
 * out as kg_math.h's kg_ldw lays them (1 and 2 bytes in the low bits of
 * w[0]), with an eviction priority:
 *   - stream: data each element of which the rOperator reads once, and no
 *     later one reads: ld.cs, which allocates its lines evict-first in L1
 *     and L2, so that it displaces little that others read again;
 *   - keep: data many output elements read (a broadcast operand, layer
 *     norm's gamma and beta): L1::evict_last, so that it stays in L1.
 * No L2 priority beyond .cs: on sm_80 and sm_90 an ld takes one only as a
 * cache policy (createpolicy, L2::cache_hint; ld's own .L2::evict_* need
 * 32-byte vectors, sm_100), and on an H100 loads with a policy, even
 * evict_normal, made memory-bound groups 10 to 35% slower (a layer norm of
 * 4096 x 768 halves in a persistent kernel: 58 us against 46 without hints,
 * 43 with these). Plain coherent loads (never .nc): a persistent kernel
 * reads what earlier stages of the same launch wrote. Volatile, so that no
 * load moves above the wait or barrier that makes its data visible. Never
 * used for stores. */
#define KG_LDW_HINTED(name, q)                                                                                \
    static __device__ __forceinline__ void name(const void *p, int bytes, unsigned *w)                        \
    {                                                                                                         \
        if (bytes == 16) {                                                                                    \
            asm volatile("ld.global" q ".v4.u32 {%0, %1, %2, %3}, [%4];"                                      \
                         : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])                                     \
                         : "l"(p));                                                                           \
        } else if (bytes == 8) {                                                                              \
            asm volatile("ld.global" q ".v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));          \
        } else if (bytes == 4) {                                                                              \
            asm volatile("ld.global" q ".u32 %0, [%1];" : "=r"(w[0]) : "l"(p));                               \
        } else {                                                                                              \
            unsigned short h;                                                                                 \
            if (bytes == 2) asm volatile("ld.global" q ".u16 %0, [%1];" : "=h"(h) : "l"(p));                  \
            else asm volatile("ld.global" q ".u8 %0, [%1];" : "=h"(h) : "l"(p));                              \
            w[0] = h;                                                                                         \
        }                                                                                                     \
    }
KG_LDW_HINTED(kg_ldw_stream, ".cs")
KG_LDW_HINTED(kg_ldw_keep, ".L1::evict_last")
#undef KG_LDW_HINTED

/* ---- rTasks of fewer threads than the block (Rammer 4.1.3) -------------------- *
 * A persistent kernel's block has the threads of its widest rOperator; an
 * rOperator built for n of them (cg_op.narrow) runs its rTasks on threads
 * 0 .. n-1 while the others skip them (early exit: emit.c's member_call
 * guards the call). Such an rOperator never reads blockDim.x and meets its
 * own threads with kg_sync_n(n): the block's barrier 0 (__syncthreads) when
 * n is the whole block, else named barrier 1 counting its n threads only,
 * which the threads that skipped never touch, so it cannot deadlock. Every
 * barrier outside rTasks (waits, signals, grid barriers) stays the whole
 * block's, and the whole block meets after each narrow rTask (kg_signal or
 * a __syncthreads emit.c adds), so barrier 1 never holds two thread counts
 * at once. Named barriers 2 .. 5 are the attention rTask's units'
 * (kg_attention.cuh, kg_att_sync): no other template may take them. */
static __device__ __forceinline__ void kg_sync_n(int n)
{
    if (n == (int)blockDim.x) __syncthreads();
    else asm volatile("bar.sync 1, %0;" ::"r"(n) : "memory");
}

/* kg_sync_n that also tells whether pred held in any of the n threads. */
static __device__ __forceinline__ bool kg_sync_or_n(bool pred, int n)
{
    if (n == (int)blockDim.x) return __syncthreads_or(pred) != 0;
    unsigned any;
    asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred p, 1, %2, p;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(any)
                 : "r"((unsigned)pred), "r"(n)
                 : "memory");
    return any != 0;
}

/* ---- split-K across blocks (kg_gemm_tc, kg_conv_tc) ---------------------------- *
 * The splits of one output tile are separate rTasks over ranges of K. Each
 * writes its fp32 partial tile to kg_splitk_ws (L2 only, .cg: another SM's
 * partials must not come from this SM's L1) and counts itself in the tile's
 * slot of kg_splitk_sem; the last to arrive resets the slot and sums every
 * partial, its own re-read too, in split order, so the result does not
 * depend on which split came last. The workspace is the module's: each
 * split-K rOperator is given its own floats and counters of it (ws, sem:
 * cg_splitk_place), and rOperators whose places overlap run one after the
 * other. Zero when the module loads; the emitters offer split-K only when
 * tiles x splits x tile size fit it and the tiles fit the counters. */
#define KG_SPLITK_WS_FLOATS (1 << 20)
#define KG_SPLITK_SEMS 4096
static __device__ float kg_splitk_ws[KG_SPLITK_WS_FLOATS];
static __device__ unsigned kg_splitk_sem[KG_SPLITK_SEMS];

static __device__ __forceinline__ void kg_st_cg(float *p, float v)
{
    asm volatile("st.global.cg.f32 [%0], %1;\n" ::"l"(p), "f"(v) : "memory");
}

static __device__ __forceinline__ float kg_ld_cg(const float *p)
{
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p) : "memory");
    return v;
}

/* After the rTask wrote its partial: counts it in at *sem (its tile's
 * counter); true in the last of `splits` rTasks, whose later loads see
 * every partial. Each of the rTask's n threads (the block's first:
 * kg_sync_n) calls it (it synchronises; no static shared memory, which
 * would push a 48 KB pipeline past the limit without opt-in). */
static __device__ __forceinline__ bool kg_splitk_arrive(unsigned *sem, int splits, int n)
{
    __threadfence();
    kg_sync_n(n);
    bool last = false;
    if (threadIdx.x == 0) {
        last = atomicAdd(sem, 1u) == (unsigned)(splits - 1);
        if (last) *sem = 0u; /* every split has arrived: ready for the next launch */
    }
    if (!kg_sync_or_n(last, n)) return false;
    __threadfence();
    return true;
}

/* ---- persistent kernels (--schedule=mono) ----------------------------------- *
 * The stages of one kernel are separated by barriers across the grid: one
 * counter of arrivals that only grows during a launch. After stage s every
 * block adds 1 and waits until the count reaches (s + 1) x the grid. After
 * the last stage every block arrives once more without waiting
 * (kg_grid_exit); the last of those, when every block is past every wait,
 * puts the count back to 0 for the next launch (launches of a stream run one
 * after another). One atomic per block and no reset inside the kernel:
 * 1.43 us a barrier for 396 blocks on an H100 (cooperative groups' grid
 * sync 1.47 us; a count reset by the last arrival plus a generation word
 * took 2.4 us): bench/gpu_barrier.cu. The arrival is a gpu-scope release after the block's
 * __syncthreads (so it covers every thread's writes) and the wait uses
 * acquire loads, the ordering a cooperative-groups grid sync gives.
 * The runtime sizes the grid so that every block is resident (the
 * occupancy API), so no block waits for one that cannot start. A wait
 * longer than KG_WATCHDOG_NS records KG_FAULT_TIMEOUT with the stage and
 * the block and lets the block go on, so the run ends with an error instead
 * of a hung GPU (the runtime then marks the model broken: the count is
 * left wrong). */
#define KG_WATCHDOG_NS 5000000000ull
static __device__ unsigned kg_grid_bar; /* arrivals in this launch */

static __device__ __forceinline__ unsigned long long kg_now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ unsigned kg_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Adds 1 with acq_rel ordering; returns the count before. (A red.release,
 * without the result, measured 0.35 us slower a barrier.) */
static __device__ __forceinline__ unsigned kg_arrive(unsigned *p)
{
    unsigned old;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(p) : "memory");
    return old;
}

static __device__ __noinline__ void kg_grid_timeout(const kiln_gctx *c, unsigned launch, unsigned stage)
{
    if (atomicCAS(&c->fail[0], 0u, KG_FAULT_TIMEOUT) == 0u) {
        c->fail[2] = stage;
        c->fail[3] = blockIdx.x;
        __threadfence_system();
        atomicExch(&c->fail[1], launch);
    }
}

/* Poll i of a wait after stage `stage` that began at *start (0 until the
 * first reading): whether the watchdog has gone off (then the fault is
 * recorded). The clock is read every 256 polls. */
static __device__ __forceinline__ bool kg_wait_expired(const kiln_gctx *c, unsigned launch, unsigned stage, unsigned i,
                                                       unsigned long long *start)
{
    if (i % 256u) return false;
    unsigned long long now = kg_now_ns();
    if (!*start) *start = now;
    else if (now - *start > KG_WATCHDOG_NS) {
        kg_grid_timeout(c, launch, stage);
        return true;
    }
    return false;
}

/* Every thread of every block calls it after stage `stage` (0, 1, ... in
 * order) of launch `launch`. */
static __device__ __noinline__ void kg_grid_sync(const kiln_gctx *c, unsigned launch, unsigned stage)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned target = (stage + 1u) * gridDim.x;
        (void)kg_arrive(&kg_grid_bar);
        unsigned long long start = 0;
        for (unsigned i = 1; (int)(kg_ld_acquire(&kg_grid_bar) - target) < 0; i++)
            if (kg_wait_expired(c, launch, stage, i, &start)) break;
    }
    __syncthreads();
}

/* Every block calls it after the last of a persistent kernel's `stages`
 * stages (stages - 1 barriers before it). */
static __device__ __noinline__ void kg_grid_exit(unsigned stages)
{
    if (threadIdx.x == 0 && atomicAdd(&kg_grid_bar, 1u) == stages * gridDim.x - 1u) atomicExch(&kg_grid_bar, 0u);
}

/* ---- the in-kernel profile (kiln bench --profile of a persistent kernel) -------- *
 * Each member of a persistent kernel has a profile slot, listed in
 * kg_prof_slots (the kernel, its rTask count, its group; emit.c). While the
 * runtime profiles, c->prof points at 4 words a slot, zeroed before each
 * run, which every rTask's thread 0 updates from the global timer (ns):
 * the complement of the earliest start of work (so that 0 means none and
 * a max finds it), the latest end, the summed run time and the summed time
 * waited for producers before the work. The rTask's threads meet before
 * its end is read, and it is read before kg_signal lets a consumer start.
 * Otherwise c->prof is NULL: one load and a branch. */
static __device__ __forceinline__ kg_u64 kg_prof_clock(const kiln_gctx *c)
{
    return c->prof && threadIdx.x == 0 ? kg_now_ns() : 0ull;
}

/* After the rTask of profile slot `slot` that began waiting at t0 and
 * working at t1 (kg_prof_clock). */
static __device__ __forceinline__ void kg_prof_rtask(const kiln_gctx *c, unsigned slot, kg_u64 t0, kg_u64 t1)
{
    kg_u64 *p = c->prof;
    if (!p) return;
    __syncthreads();
    if (threadIdx.x) return;
    const kg_u64 end = kg_now_ns();
    p += 4u * slot;
    atomicMax(p, ~t1);
    atomicMax(p + 1, end);
    atomicAdd(p + 2, end - t1);
    atomicAdd(p + 3, t1 - t0);
}

/* ---- completion counters (--schedule=mono, waits instead of barriers) ---------- *
 * A persistent kernel's rOperators each count their finished rTasks in
 * kg_done_<kernel>[member]: after an rTask the block's threads meet and one
 * adds 1 with release ordering. Before an rTask, the block waits (acquire
 * loads) until the counters of the members it depends on reach their rTask
 * counts: only those, not every block of the grid. Every block takes the
 * stages in order and waits only on earlier stages, so the earliest
 * unfinished rTask can always run: no deadlock while all blocks are
 * resident. The last block to leave (kg_waits_exit, counted on
 * kg_grid_bar) puts the counters back to 0 for the next launch. */
static __device__ __forceinline__ void kg_signal(unsigned *done)
{
    __syncthreads();
    if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(done) : "memory");
}

/* Asks for the tensor map at map (a kg_tmaps[] entry, in global memory)
 * ahead of its first copy, so that the copy need not fetch it (sm_90;
 * nothing before). */
static __device__ __forceinline__ void kg_tmap_prefetch(const void *map)
{
#if __CUDA_ARCH__ >= 900 && !defined(KG_NO_TMAP_PREFETCH)
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
#else
    (void)map;
#endif
}

/* ---- a persistent kernel's rProgram as data (emit.c) ---------------------------- *
 * A persistent kernel holds one loop that runs its stages from tables, not
 * code of its own for each member: the code of a member's wait, profile
 * and signal was 3 KB of sm_90a code (BERT-base: 323 KB in all, with
 * 107 KB of bodies), fetched cold by every block once a run, and it pushed
 * the shared bodies out of the instruction cache between layers. A stage's
 * members are kg_members[first .. end), their rTasks numbered 0 .. rtasks
 * - 1 in that order; a member's rTask t is its own t - first. */
typedef struct __align__(16) kg_stage {
    unsigned first, end; /* its members in the kernel's kg_member table */
    unsigned rtasks;     /* all of theirs */
    unsigned pad;
} kg_stage;

typedef struct __align__(16) kg_member {
    unsigned first, end;  /* its rTasks' numbers in the stage */
    unsigned deps, n_deps; /* its waits: the kernel's kg_dep table [deps, deps + n_deps) */
    unsigned call;        /* which call of the kernel's switch runs an rTask */
    unsigned threads;     /* the block's first `threads` run it (a narrow rOperator's early exit) */
    unsigned counter;     /* its completion counter and profile slot, counted from the kernel's first */
    unsigned tmap;        /* 0, or 1 + the first of the two tensor maps its rTasks copy with (kg_tmaps[]) */
} kg_member;

typedef struct kg_dep {
    unsigned counter; /* a member it waits for */
    unsigned rtasks;  /* until that member has finished this many rTasks: all of them */
} kg_dep;

/* A persistent kernel's tile-row waits (kg_tiles.h), where it has any:
 * beside kg_members_<kernel>, kg_mtiles_<kernel> gives each member 0 or 1 +
 * its kg_tiles (its rTasks count themselves by tile row too, or wait on
 * tile rows); beside kg_deps_<kernel>, kg_dwins_<kernel> gives each wait 0,
 * or 1 + its kg_win: only the tile rows of that member that the rTask
 * reads, each until all of the row's rTasks have finished (its kg_dep's
 * rtasks unused). */
typedef struct kg_row_waits {
    const kg_tiles *tiles;
    const kg_win *wins;
    const unsigned *dwins; /* the waiting member's, from its first wait on */
    const unsigned *rows;
} kg_row_waits;

/* Counter e of a wait's list (kg_wait_rows): its address and count
 * in *p and *need; false past the last. The counters are d's in order,
 * each window's tile rows in its place. */
static __device__ __forceinline__ bool kg_wait_entry(const unsigned *done, const kg_dep *d, unsigned n,
                                                     const kg_row_waits *rw, const kg_tiles *mine, unsigned r,
                                                     unsigned e, const unsigned **p, unsigned *need)
{
    for (unsigned j = 0; j < n; j++) {
        if (rw && rw->dwins[j]) {
            const kg_win *w = rw->wins + rw->dwins[j] - 1u;
            const kg_tiles *prod = rw->tiles + w->tiles;
            unsigned first, last;
            kg_win_rows(w, mine, prod, r, &first, &last);
            if (e <= last - first) {
                *p = rw->rows + prod->rows + first + e;
                *need = prod->per_row;
                return true;
            }
            e -= last - first + 1u;
        } else if (e == 0) {
            *p = done + d[j].counter;
            *need = d[j].rtasks;
            return true;
        } else {
            e--;
        }
    }
    return false;
}

#define KG_WAIT_LANE 2 /* counters a lane of the polling warp holds; past 64, it finds them each poll */

/* The block waits until each of the n counters in d has reached its count
 * (acquire loads); uniform across the block. stage: the stage before the
 * waiting one, for the watchdog's fault. A dep with a window (rw not NULL,
 * for rTask r of a member with tiles `mine`) waits for the counters of the
 * producer's tile rows it reads instead. The lanes of warp 0 poll, counter
 * e on lane e % 32, so that the counters are read at once rather than one
 * round trip after another (a thread's acquire loads wait for each other),
 * and a lane stops reading a counter once it has reached its count.
 * Inlined into the persistent kernel's loop: out of line, where the tables
 * come through generic pointers, ResNet-50 with tile-row waits took 563 us
 * against 515 (H100). */
static __device__ __forceinline__ void kg_wait_rows(const kiln_gctx *c, unsigned launch, unsigned stage,
                                                    const unsigned *done, const kg_dep *d, unsigned n,
                                                    const kg_row_waits *rw, const kg_tiles *mine, unsigned r)
{
    if (threadIdx.x < 32) {
        const unsigned lane = threadIdx.x;
        const unsigned *p[KG_WAIT_LANE];
        unsigned need[KG_WAIT_LANE];
        bool ok[KG_WAIT_LANE], more = false;
#pragma unroll
        for (int k = 0; k < KG_WAIT_LANE; k++)
            ok[k] = !kg_wait_entry(done, d, n, rw, mine, r, lane + 32u * k, &p[k], &need[k]);
        const unsigned *q;
        unsigned nq;
        more = kg_wait_entry(done, d, n, rw, mine, r, 32u * KG_WAIT_LANE, &q, &nq);
        unsigned long long start = 0;
        for (unsigned i = 1;; i++) {
            bool ready = true;
#pragma unroll
            for (int k = 0; k < KG_WAIT_LANE; k++) {
                if (!ok[k]) ok[k] = kg_ld_acquire(p[k]) >= need[k];
                ready &= ok[k];
            }
            if (more) /* rare: more counters than the lanes hold */
                for (unsigned e = lane + 32u * KG_WAIT_LANE; kg_wait_entry(done, d, n, rw, mine, r, e, &q, &nq); e += 32u)
                    ready &= kg_ld_acquire(q) >= nq;
            ready = __all_sync(0xffffffffu, ready);
            /* lane 0's clock decides, for the whole warp */
            const bool expired =
                __shfl_sync(0xffffffffu, lane == 0 && !ready && kg_wait_expired(c, launch, stage, i, &start), 0);
            if (ready || expired) break;
        }
    }
    __syncthreads();
}

/* The block waits until each of the n counters in d has reached its count
 * (thread 0's acquire loads); uniform across the block. stage: the stage
 * before the waiting one, for the watchdog's fault. (A member that waits
 * on tile rows calls kg_wait_rows instead.) */
static __device__ __forceinline__ void kg_wait_deps(const kiln_gctx *c, unsigned launch, unsigned stage,
                                                    const unsigned *done, const kg_dep *d, unsigned n)
{
    if (threadIdx.x == 0) {
        unsigned long long start = 0;
        for (unsigned i = 1;; i++) {
            bool ready = true;
            for (unsigned j = 0; j < n; j++) ready &= kg_ld_acquire(done + d[j].counter) >= d[j].rtasks;
            if (ready || kg_wait_expired(c, launch, stage, i, &start)) break;
        }
    }
    __syncthreads();
}

/* kg_signal for rTask r of a member with tiles x that counts its tile
 * rows: its tile row's count, then its own, behind one fence. */
static __device__ __forceinline__ void kg_signal_rows(unsigned *done, unsigned *rows, const kg_tiles *x, unsigned r)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(rows + x->rows + kg_tile_row(x, r)) : "memory");
        asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(done) : "memory");
    }
}

/* The block's last signal (a release add by thread 0) is ordered before
 * its arrival by a fence, and the last arrival before the zeroing: else a
 * late add could land after the zero and count for the next launch. */
static __device__ __noinline__ void kg_waits_exit(unsigned *done, unsigned n)
{
    if (threadIdx.x != 0) return;
    __threadfence();
    if (atomicAdd(&kg_grid_bar, 1u) == gridDim.x - 1u) {
        __threadfence();
        for (unsigned i = 0; i < n; i++) done[i] = 0u;
        atomicExch(&kg_grid_bar, 0u);
    }
}

/* kg_waits_exit of a kernel with tile-row counters: every thread calls it,
 * and the last block to leave puts the n member counters in done and the
 * n_rows tile-row counters in rows back to 0, all its threads storing.
 * Each block's last counts (kg_signal_rows' relaxed adds) are ordered
 * before its arrival, and the arrivals before the zeroing, by fences. */
static __device__ __noinline__ void kg_waits_exit_rows(unsigned *done, unsigned n, unsigned *rows, unsigned n_rows)
{
    __syncthreads();
    bool mine = false;
    if (threadIdx.x == 0) {
        __threadfence();
        mine = atomicAdd(&kg_grid_bar, 1u) == gridDim.x - 1u;
        if (mine) __threadfence();
    }
    if (!__syncthreads_or(mine)) return;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) done[i] = 0u;
    for (unsigned i = threadIdx.x; i < n_rows; i += blockDim.x) rows[i] = 0u;
    __syncthreads();
    if (threadIdx.x == 0) atomicExch(&kg_grid_bar, 0u);
}

/* ---- block reductions (blockDim.x a multiple of 32, at most 1024) ------------- */

static __device__ __forceinline__ float kg_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float kg_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block; every thread gets the result. red: 32 floats of
 * shared memory, free for reuse after the call returns. */
static __device__ __forceinline__ float kg_block_sum(float v, float *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    v = kg_warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < n_warps ? red[lane] : 0.0f;
    return kg_warp_sum(v);
}

static __device__ __forceinline__ float kg_block_max(float v, float *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    v = kg_warp_max(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < n_warps ? red[lane] : -__int_as_float(0x7f800000);
    return kg_warp_max(v);
}

#endif
