/*
 * pool.c: the persistent worker pool, the CPU's vDevice (DESIGN.md
 * "Execution on a CPU"; Rammer 3.2's vEUs, MonoNN's persistent blocks).
 *
 * Synchronisation is step counters, as on the GPU: vEU v's counter counts
 * the stages it has finished since the pool started (monotonic over runs,
 * 64-bit, never wraps). A run starting at step `base` needs, before its
 * stage with `wait` = k > 0, every counter >= base + k (every vEU past the
 * stages that stage depends on, not necessarily the ones just before it,
 * which may still run elsewhere); it ends when every
 * counter reaches base + n_stages. A counter's store releases and the
 * waiters' loads acquire, so what a stage wrote is visible to the stages
 * waiting for it (the stores are sequentially consistent, for the sleepers
 * below).
 *
 * Workers idle between runs on a generation counter: the caller publishes the
 * run, then bumps the generation. Waiting spins first (pause, then
 * sched_yield, so an oversubscribed machine still makes progress), then
 * sleeps on a futex; back-to-back runs never reach the futex. Sleepers are
 * counted, so a wake-up syscall happens only when someone sleeps. The
 * sleeper count and the awaited value form a Dekker pair (both sides
 * sequentially consistent), so no wake-up is lost.
 */
#include "runtime/rt-impl.h"
#include "runtime/artifact.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax(void) { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax(void) { __asm__ __volatile__("yield"); }
#else
static inline void cpu_relax(void) {}
#endif

/* Spin budgets: pause alone for the first microseconds, then yield, then
 * sleep. Idle workers give up sooner than vEUs waiting inside a run, which
 * will surely be woken soon. With more vEUs than CPUs the awaited vEU may
 * not be running at all: yield at once. */
#define PAUSE_ONLY_NS 20000
#define IDLE_SPIN_NS 200000
#define BARRIER_SPIN_NS 1000000

/* One vEU's state, alone on its cache line(s). */
typedef struct veu {
    _Alignas(64) _Atomic uint64_t step; /* stages finished since the pool started */
    int stage;                          /* stage being run; read by its own thread only */
    int index;
    rt_pool *pool;
} veu;

struct rt_pool {
    void *raw;       /* the allocation holding this struct */
    int n_veu;
    int n_started;   /* worker threads running */
    uint64_t pause_ns; /* PAUSE_ONLY_NS, or 0 when there are more vEUs than CPUs */
    pthread_t *threads;
    veu *veus;
    void *veus_raw;

    /* The run being executed: written by the caller before it bumps the
     * generation, read-only for the workers until the run ends. */
    _Alignas(64) const kiln_cstage *stages;
    int n_stages;
    const kiln_cctx *ctx;
    uint64_t base;   /* the step every counter had when the run started */
    uint64_t *profile; /* NULL, or per stage: [2s] run ns, [2s+1] wait ns of vEU 0 */

    _Alignas(64) _Atomic uint32_t generation; /* bumped per run: the idle futex word */
    _Atomic int idle_sleepers;
    _Atomic bool stop;
    _Alignas(64) _Atomic uint32_t epoch;      /* bumped when a barrier sleeper must look again */
    _Atomic int barrier_sleepers;
    _Alignas(64) _Atomic bool abort;
};

/* ---- waiting ------------------------------------------------------------------- */

static void futex_wait(_Atomic uint32_t *word, uint32_t value)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct spinner {
    unsigned i;
    bool yield;
    uint64_t t0;
    uint64_t pause_ns; /* pause only for this long, then yield */
} spinner;

/* One step of busy waiting; false once `budget_ns` has passed: time to sleep. */
static bool spin(spinner *s, uint64_t budget_ns)
{
    if ((s->i++ & 63) == 0) {
        uint64_t t = now_ns();
        if (!s->t0) s->t0 = t;
        uint64_t elapsed = t - s->t0;
        if (elapsed > budget_ns) return false;
        s->yield = elapsed >= s->pause_ns;
    }
    if (s->yield) sched_yield();
    else cpu_relax();
    return true;
}

/* Waits until the generation differs from `seen`; returns the new one. */
static uint32_t wait_generation(rt_pool *p, uint32_t seen)
{
    spinner s = {.pause_ns = p->pause_ns};
    uint32_t g;
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
        if (!spin(&s, IDLE_SPIN_NS)) break;
    while (g == seen) {
        atomic_fetch_add(&p->idle_sleepers, 1);
        if ((g = atomic_load(&p->generation)) == seen) futex_wait(&p->generation, seen);
        atomic_fetch_sub(&p->idle_sleepers, 1);
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
    }
    return g;
}

/* True when every vEU's counter reached target. *from remembers the first
 * vEU not there yet, so repeated calls do not rescan finished ones. */
static bool all_reached(rt_pool *p, uint64_t target, int *from, memory_order mo)
{
    for (int u = *from; u < p->n_veu; u++)
        if (atomic_load_explicit(&p->veus[u].step, mo) < target) {
            *from = u;
            return false;
        }
    return true;
}

static void wait_all(rt_pool *p, uint64_t target)
{
    int from = 0;
    spinner s = {.pause_ns = p->pause_ns};
    while (!all_reached(p, target, &from, memory_order_acquire))
        if (!spin(&s, BARRIER_SPIN_NS)) break;
    for (;;) {
        atomic_fetch_add(&p->barrier_sleepers, 1);
        uint32_t e = atomic_load(&p->epoch);
        bool done = all_reached(p, target, &from, memory_order_seq_cst);
        if (!done) futex_wait(&p->epoch, e);
        atomic_fetch_sub(&p->barrier_sleepers, 1);
        if (done || all_reached(p, target, &from, memory_order_acquire)) return;
    }
}

static void finish_stage(rt_pool *p, veu *v, uint64_t step)
{
    atomic_store(&v->step, step);
    if (atomic_load(&p->barrier_sleepers) > 0) {
        atomic_fetch_add(&p->epoch, 1);
        futex_wake_all(&p->epoch);
    }
}

/* ---- running ------------------------------------------------------------------- */

/* The calling thread's vEU while it runs stages; -1 elsewhere. */
static _Thread_local int self_veu = -1;

static void run_veu(rt_pool *p, veu *v)
{
    const kiln_cstage *stages = p->stages;
    const int n_stages = p->n_stages, n_veu = p->n_veu, me = v->index;
    const uint64_t base = p->base;
    const kiln_cctx *c = &p->ctx[me];
    self_veu = me;
    uint64_t *prof = me == 0 ? p->profile : NULL;
    for (int s = 0; s < n_stages; s++) {
        const kiln_cstage *st = &stages[s];
        uint64_t t0 = prof ? now_ns() : 0;
        if (st->wait && n_veu > 1) wait_all(p, base + (uint64_t)st->wait);
        uint64_t t1 = prof ? now_ns() : 0;
        v->stage = s;
        if (!atomic_load_explicit(&p->abort, memory_order_relaxed))
            for (int t = me; t < st->n_rtasks; t += n_veu) st->fn(c, t);
        finish_stage(p, v, base + (uint64_t)s + 1);
        if (prof) {
            prof[2 * s] += now_ns() - t1;
            prof[2 * s + 1] += t1 - t0;
        }
    }
    self_veu = -1;
}

static void *worker_main(void *arg)
{
    veu *v = arg;
    rt_pool *p = v->pool;
    uint32_t seen = 0;
    for (;;) {
        seen = wait_generation(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        run_veu(p, v);
    }
    return NULL;
}

void rt_pool_run(rt_pool *p, const kiln_cstage *stages, int n_stages, const kiln_cctx *ctx)
{
    /* Workers read the run's description before they finish their first
     * stage; the end-of-run wait on those steps is what lets the next run
     * overwrite it. A run without stages would skip that wait: skip the run. */
    if (n_stages <= 0) return;
    p->stages = stages;
    p->n_stages = n_stages;
    p->ctx = ctx;
    atomic_store_explicit(&p->abort, false, memory_order_relaxed);
    if (p->n_veu > 1) {
        atomic_fetch_add(&p->generation, 1);
        if (atomic_load(&p->idle_sleepers) > 0) futex_wake_all(&p->generation);
    }
    run_veu(p, &p->veus[0]);
    if (p->n_veu > 1) wait_all(p, p->base + (uint64_t)n_stages);
    p->base += (uint64_t)n_stages;
}

void rt_pool_set_profile(rt_pool *p, uint64_t *counters) { p->profile = counters; }

int rt_pool_self(void) { return self_veu; }

int rt_pool_stage(const rt_pool *p, int veu_index) { return p->veus[veu_index].stage; }

void rt_pool_abort(rt_pool *p) { atomic_store_explicit(&p->abort, true, memory_order_relaxed); }

int rt_pool_size(const rt_pool *p) { return p->n_veu; }

/* ---- life cycle ------------------------------------------------------------------ */

static void stop_workers(rt_pool *p)
{
    if (p->n_started == 0) return;
    atomic_store(&p->stop, true);
    atomic_fetch_add(&p->generation, 1);
    futex_wake_all(&p->generation);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    p->n_started = 0;
}

kiln_status rt_pool_init(rt_pool **out, int n_veu, base_diag *d)
{
    *out = NULL;
    if (n_veu < 1 || n_veu > RT_MAX_THREADS)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "thread count %d is not in 1..%d", n_veu, RT_MAX_THREADS);
    void *raw;
    rt_pool *p = rt_calloc_aligned(sizeof(*p), &raw);
    if (!p) return base_diag_add(d, KILN_ERR_OOM, "out of memory starting %d threads", n_veu);
    p->raw = raw;
    p->n_veu = n_veu;
    cpu_set_t cpus;
    int n_cpus = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    p->pause_ns = n_cpus > 0 && n_veu > n_cpus ? 0 : PAUSE_ONLY_NS;
    p->veus = rt_calloc_aligned((size_t)n_veu * sizeof(veu), &p->veus_raw);
    p->threads = base_calloc((size_t)n_veu, sizeof(pthread_t));
    if (!p->veus || !p->threads) {
        base_free(p->veus_raw);
        base_free(p->threads);
        base_free(raw);
        return base_diag_add(d, KILN_ERR_OOM, "out of memory starting %d threads", n_veu);
    }
    for (int i = 0; i < n_veu; i++) {
        p->veus[i].index = i;
        p->veus[i].pool = p;
    }
    /* Workers block every signal: signals belong to the application's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    kiln_status st = KILN_OK;
    for (int i = 1; i < n_veu; i++) {
        int e = pthread_create(&p->threads[i - 1], NULL, worker_main, &p->veus[i]);
        if (e != 0) {
            st = base_diag_add(d, KILN_ERR_OOM, "cannot start worker thread %d of %d: %s", i, n_veu - 1, strerror(e));
            break;
        }
        p->n_started++;
#if defined(__GLIBC__)
        char name[32];
        snprintf(name, sizeof(name), "kiln-veu%d", i);
        name[15] = 0; /* the kernel's limit */
        pthread_setname_np(p->threads[i - 1], name);
#endif
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (st != KILN_OK) {
        rt_pool_free(p);
        return st;
    }
    *out = p;
    return KILN_OK;
}

void rt_pool_free(rt_pool *p)
{
    if (!p) return;
    stop_workers(p);
    base_free(p->veus_raw);
    base_free(p->threads);
    base_free(p->raw);
}
