/*
 * rt-impl.h: the CPU runtime's private interfaces: the worker pool (pool.c)
 * that rt.c drives, and small helpers both share.
 */
#ifndef KILN_RUNTIME_RT_IMPL_H
#define KILN_RUNTIME_RT_IMPL_H

#include "base/base.h"
#include "runtime/cprog.h"

/* ---- the worker pool: the vDevice --------------------------------------------
 *
 * n_veu vEUs: the thread calling rt_pool_run is vEU 0, the others are
 * threads started by rt_pool_init and kept until rt_pool_free. A run walks
 * the stages in order on every vEU; vEU v runs rTasks v, v + n_veu, ... of
 * each stage, and before a stage with `wait` set it waits until every vEU
 * finished every earlier stage. rt_pool_run returns when all vEUs finished
 * all stages. Nothing is allocated while running. */
typedef struct rt_pool rt_pool;

/* Starts n_veu - 1 worker threads (1 <= n_veu <= RT_MAX_THREADS).
 * OUT: *out, free with rt_pool_free. */
kiln_status rt_pool_init(rt_pool **out, int n_veu, base_diag *d);
/* Stops and joins the workers; NULL is fine. */
void rt_pool_free(rt_pool *p);
int rt_pool_size(const rt_pool *p);

/* Runs the stages; ctx[v] is what vEU v's rTasks see (borrowed for the
 * run). One run at a time per pool. */
void rt_pool_run(rt_pool *p, const kiln_cstage *stages, int n_stages, const kiln_cctx *ctx);

/* The vEU the calling thread is while it runs rTasks; -1 outside a run. */
int rt_pool_self(void);
/* Index of the stage vEU `veu` is running; valid only from that vEU's own
 * rTasks (it names the stage in error messages). */
int rt_pool_stage(const rt_pool *p, int veu);

/* Makes the vEUs skip the stages of the current run they have not started
 * (after a failure, so later stages do not compute on garbage). The run
 * still ends normally; the flag resets at the next run. */
void rt_pool_abort(rt_pool *p);
/* Profiling: counters (2 per stage: run ns, wait ns, as vEU 0 sees them)
 * that each run adds to; NULL stops. Not while a run is in progress. */
void rt_pool_set_profile(rt_pool *p, uint64_t *counters);

/* ---- helpers ---------------------------------------------------------------- */

#define RT_ALIGN 64

static inline size_t rt_align_up(size_t n) { return (n + RT_ALIGN - 1) & ~(size_t)(RT_ALIGN - 1); }

/* n zeroed bytes aligned to 64, taken from base_calloc (so tests can inject
 * failures); free *raw with base_free. NULL on OOM or overflow. */
static inline void *rt_calloc_aligned(size_t n, void **raw)
{
    *raw = NULL;
    if (n > SIZE_MAX - RT_ALIGN) return NULL;
    uint8_t *p = base_calloc(n + RT_ALIGN, 1);
    if (!p) return NULL;
    *raw = p;
    return p + (RT_ALIGN - (uintptr_t)p % RT_ALIGN) % RT_ALIGN;
}

/* Tests set this to load code through a temporary file instead of
 * memfd_create, to exercise the fallback. */
extern int rt_code_avoid_memfd;

#endif
