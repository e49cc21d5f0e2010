/*
 * tune.c: the cuda target's profiler (Bolt 3.2.2): a template offering
 * several configurations of a group (tiles, stages, split-K) gets the one
 * that runs fastest on this GPU, found by timing them all.
 *
 * cg_tune_choose answers, per key (what identifies the work, not the group):
 *   1. from this compilation's memo: BERT's twelve layers ask the same few
 *      questions twelve times;
 *   2. from the tuning database (tune_db.c), keyed by GPU, driver and kiln
 *      build;
 *   3. by measurement, with --tune on a machine with a GPU. Each candidate is
 *      emitted into a scratch program of its own (the prelude, the group's
 *      rOperator with its real offsets, a kernel k_tune looping over its
 *      rTasks as emit.c's kernels do, and k_flush); NVRTC compiles the
 *      programs on several threads; each runs on device 0 against one arena
 *      of random values (floats in [-1, 1] in their storage precision,
 *      integers 0, so gathers stay in range) and the model's real weights.
 *      Time: the median of N_TIMED launches between CUDA events, with L2
 *      flushed before each, so weights come from memory as they do when the
 *      whole model runs. Before a candidate runs its outputs are set to NaN;
 *      afterwards they must match the first candidate's (a loose tolerance:
 *      summation order differs between tilings), so a configuration that
 *      skips tiles or races cannot win by being fast.
 * Whatever fails here (a candidate that does not compile or launch, a
 * device that cannot be set up, a database that cannot be written) becomes
 * a note on the progress line and the heuristic choice: tuning never fails
 * a compilation. One exception cannot be contained: a candidate that faults
 * (an illegal address) loses the CUDA context for the whole process, so
 * tuning stops there and the note says which candidate did it.
 */
#include "target/cuda/cuda-impl.h"

#include "runtime/cuda.h"
#include "target/cuda/nvrtc.h"
#include "target/cuda/tune_db.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_WARMUP 2
#define N_TIMED 11
#define MAX_COMPILE_THREADS 16
#define MAX_NOTES 3                      /* skipped-candidate lines per key */
#define MAX_CHECKED_BYTES (256u << 20)   /* outputs larger than this are not compared */
#define FLUSH_MIN_BYTES (32u << 20)

typedef struct memo {
    char *key;
    int cand; /* -1: the heuristic's (nothing measured was usable, or the budget was spent) */
} memo;

/* One candidate of the key being tuned. */
typedef struct tune_cand {
    cg_op op;
    int block;         /* threads a block of the timed launch: op.block, or a persistent kernel's */
    int per_sm;        /* blocks a multiprocessor it may hold (0: as many as fit) */
    char *src;         /* the scratch program */
    rt_gtmap *tmaps;   /* its tensor maps (kg_tmaps) */
    int n_tmaps;
    void *cubin;
    size_t cubin_bytes;
    bool ok;           /* still in the running */
    bool ran;
    char note[240];    /* why it dropped out */
    double us;
} tune_cand;

/* An output of the group being tuned, on the device. */
typedef struct out_region {
    CUdeviceptr at;
    uint64_t arena_offset; /* UINT64_MAX: not in the arena */
    size_t bytes;
    kiln_dtype store;
} out_region;

struct cg_tuner {
    const ir_graph *g;         /* borrowed, like everything the emitter holds */
    const sched_program *p;
    const target_options *o;
    const void *weights;       /* weight_bytes, in storage precision */
    rt_cuda_device dev;
    char kiln[64];             /* KILN_VERSION + hash of the templates */
    char db_path[4096];
    cg_tune_db *db;            /* NULL: results are not kept */
    bool measure;              /* --tune: time what the database does not know */
    bool ready, dead;          /* device state made; device unusable */
    bool busy;                 /* inside cg_tune_choose */
    memo *memos;
    int n_memos, cap_memos;
    int n_measured, n_from_db;
    double seconds;            /* spent measuring */
    double budget;             /* target_options.tune_budget_s: measure no new key beyond it; 0: no limit */
    int n_over_budget;         /* keys left to the heuristic for it */
    /* device state, made at the first measurement */
    bool have_ctx;
    rt_cuda_ctx ctx;
    CUdeviceptr arena, wts, io_table, gctx, fail, flush;
    CUdeviceptr *io;           /* n_io buffers: graph inputs, then outputs */
    int n_io;
    unsigned long long flush_words;
    unsigned char *arena_image; /* the arena's random contents, to restore outputs from */
    CUevent ev[2 * N_TIMED];
};

/* ---- small helpers ------------------------------------------------------------------------ */

static void say(const cg_tuner *t, const char *fmt, ...) KILN_PRINTF(2, 3);
static void say(const cg_tuner *t, const char *fmt, ...)
{
    if (!t->o->progress) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    t->o->progress(t->o->progress_user, line);
}

/* Each message of d as a progress line "PREFIX: message". */
static void say_diag(const cg_tuner *t, const char *prefix, const base_diag *d)
{
    for (int i = 0; i < d->n_msgs; i++) say(t, "%s: %s", prefix, d->msgs[i]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The most telling line of d, on one line, for a note: the first that
 * names an error, else the first. */
static void first_error(const base_diag *d, char *note, size_t n)
{
    const char *pick = d->n_msgs ? d->msgs[0] : "unknown error";
    for (int i = 0; i < d->n_msgs; i++)
        if (strstr(d->msgs[i], "error")) {
            pick = d->msgs[i];
            break;
        }
    while (*pick == ' ') pick++;
    snprintf(note, n, "%s", pick);
    for (char *q = note; *q; q++)
        if (*q == '\n') *q = ' ';
}

static const char *describe(const cg_op *op, char *buf, size_t n)
{
    snprintf(buf, n, "%lld rTasks x %d threads, %d B shared memory", (long long)op->n_rtasks, op->block,
             op->smem_bytes);
    return buf;
}

/* KILN_VERSION plus a hash of the embedded templates: a stored winner
 * names a configuration of templates that may since have changed. */
static void kiln_build(char *out, size_t n)
{
    uint64_t h = 0x6b696c6e;
    for (int i = 0; i < cg_kernel_sources_count; i++) {
        h = base_hash_bytes(cg_kernel_sources[i].name, strlen(cg_kernel_sources[i].name), h);
        h = base_hash_bytes(cg_kernel_sources[i].text, strlen(cg_kernel_sources[i].text), h);
    }
    snprintf(out, n, "%s+%08llx", KILN_VERSION, (unsigned long long)(h & 0xffffffffu));
}

static cg_tune_scope scope_of(const cg_tuner *t)
{
    return (cg_tune_scope){.gpu = t->dev.name, .sm = t->dev.sm_major * 10 + t->dev.sm_minor,
                           .driver = t->dev.driver_version, .kiln = t->kiln};
}

static const memo *memo_find(const cg_tuner *t, const char *key)
{
    for (int i = 0; i < t->n_memos; i++)
        if (strcmp(t->memos[i].key, key) == 0) return &t->memos[i];
    return NULL;
}

/* Remembers key's answer; forgetting (out of memory) only costs a repeat. */
static void memo_add(cg_tuner *t, const char *key, int cand)
{
    if (t->n_memos == t->cap_memos) {
        int cap = t->cap_memos ? 2 * t->cap_memos : 32;
        memo *m = base_realloc(t->memos, (size_t)cap * sizeof(*m));
        if (!m) return;
        t->memos = m;
        t->cap_memos = cap;
    }
    size_t n = strlen(key) + 1;
    char *k = base_malloc(n);
    if (!k) return;
    memcpy(k, key, n);
    t->memos[t->n_memos++] = (memo){.key = k, .cand = cand};
}

/* ---- random contents --------------------------------------------------------------------- */

static float rng_unit(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* n elements of dtype store at dst: floats uniform in [-1, 1), the rest 0. */
static void fill_random(void *dst, kiln_dtype store, int64_t n, uint64_t *s)
{
    switch (store) {
    case KILN_F32:
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = rng_unit(s);
        break;
    case KILN_F64:
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = rng_unit(s);
        break;
    case KILN_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = base_f32_to_f16(rng_unit(s));
        break;
    case KILN_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = base_f32_to_bf16(rng_unit(s));
        break;
    default: memset(dst, 0, (size_t)n * ir_dtype_size(store)); break;
    }
}

/* Bytes of v as stored at run time; 0 when its shape is not known. */
static size_t stored_bytes(const cg_emitter *e, const ir_value *v, int64_t *numel)
{
    *numel = v->shape_known ? ir_numel(&v->t) : 0;
    if (*numel < 0) *numel = 0;
    return (size_t)*numel * ir_dtype_size(cg_store(e, v));
}

/* ---- the device --------------------------------------------------------------------------- */

static void device_release(cg_tuner *t)
{
    for (int i = 0; i < 2 * N_TIMED; i++) rt_cuda_event_free(t->ev[i]);
    memset(t->ev, 0, sizeof(t->ev));
    for (int i = 0; i < t->n_io; i++) rt_cuda_free(t->io[i]);
    base_free(t->io);
    t->io = NULL;
    t->n_io = 0;
    rt_cuda_free(t->arena);
    rt_cuda_free(t->wts);
    rt_cuda_free(t->io_table);
    rt_cuda_free(t->gctx);
    rt_cuda_free(t->fail);
    rt_cuda_free(t->flush);
    t->arena = t->wts = t->io_table = t->gctx = t->fail = t->flush = 0;
    base_free(t->arena_image);
    t->arena_image = NULL;
    if (t->have_ctx) rt_cuda_ctx_free(&t->ctx);
    t->have_ctx = false;
    t->ready = false;
}

static kiln_status upload_arena(cg_tuner *t, const cg_emitter *e, base_diag *d)
{
    size_t bytes = t->p->arena_bytes ? (size_t)t->p->arena_bytes : 1;
    KILN_TRY(rt_cuda_alloc(bytes, &t->arena, d));
    t->arena_image = base_calloc(bytes, 1);
    if (!t->arena_image) return base_diag_add(d, KILN_ERR_OOM, "out of memory for a %zu-byte arena image", bytes);
    uint64_t s = 0x243f6a8885a308d3ull;
    for (int i = 0; i < t->g->n_values && i < t->p->n_values; i++) {
        const ir_value *v = t->g->values[i];
        const sched_place *pl = &t->p->place[i];
        int64_t n;
        size_t vb = stored_bytes(e, v, &n);
        if (pl->loc != SCHED_LOC_ARENA || vb == 0 || pl->offset > bytes || vb > bytes - pl->offset) continue;
        fill_random(t->arena_image + pl->offset, cg_store(e, v), n, &s);
    }
    return rt_cuda_copy_to_device(t->arena, t->arena_image, bytes, d);
}

/* One buffer per graph input (random) and output, and the table of their
 * addresses the kernels read as c->io. */
static kiln_status upload_io(cg_tuner *t, const cg_emitter *e, base_diag *d)
{
    t->n_io = t->g->n_inputs + t->g->n_outputs;
    t->io = base_calloc((size_t)t->n_io + 1, sizeof(*t->io));
    if (!t->io) return base_diag_add(d, KILN_ERR_OOM, "out of memory for the tuner's buffers");
    uint64_t s = 0x13198a2e03707344ull;
    for (int i = 0; i < t->n_io; i++) {
        const ir_value *v = i < t->g->n_inputs ? t->g->inputs[i] : t->g->outputs[i - t->g->n_inputs];
        int64_t n;
        size_t bytes = stored_bytes(e, v, &n);
        KILN_TRY(rt_cuda_alloc(bytes ? bytes : 1, &t->io[i], d));
        if (i >= t->g->n_inputs || bytes == 0) continue;
        void *host = base_malloc(bytes);
        if (!host) return base_diag_add(d, KILN_ERR_OOM, "out of memory for input '%s'", v->name);
        fill_random(host, cg_store(e, v), n, &s);
        kiln_status st = rt_cuda_copy_to_device(t->io[i], host, bytes, d);
        base_free(host);
        KILN_TRY(st);
    }
    KILN_TRY(rt_cuda_alloc((size_t)(t->n_io ? t->n_io : 1) * sizeof(CUdeviceptr), &t->io_table, d));
    return t->n_io ? rt_cuda_copy_to_device(t->io_table, t->io, (size_t)t->n_io * sizeof(CUdeviceptr), d) : KILN_OK;
}

static kiln_status device_setup(cg_tuner *t, const cg_emitter *e, base_diag *d)
{
    KILN_TRY(rt_cuda_ctx_init(0, &t->ctx, d));
    t->have_ctx = true;
    KILN_TRY(upload_arena(t, e, d));
    size_t wb = (size_t)t->p->weight_bytes;
    KILN_TRY(rt_cuda_alloc(wb ? wb : 1, &t->wts, d));
    if (wb && t->weights) KILN_TRY(rt_cuda_copy_to_device(t->wts, t->weights, wb, d));
    KILN_TRY(upload_io(t, e, d));
    KILN_TRY(rt_cuda_alloc(2 * sizeof(unsigned), &t->fail, d));
    kiln_gctx c = {.arena = t->arena, .weights = t->wts, .io = t->io_table, .fail = t->fail};
    KILN_TRY(rt_cuda_alloc(sizeof(c), &t->gctx, d));
    KILN_TRY(rt_cuda_copy_to_device(t->gctx, &c, sizeof(c), d));
    /* twice L2: every line the kernel could find cached is evicted */
    size_t flush = 2 * (size_t)(t->dev.l2_bytes > 0 ? t->dev.l2_bytes : 0);
    if (flush < FLUSH_MIN_BYTES) flush = FLUSH_MIN_BYTES;
    t->flush_words = flush / 4;
    KILN_TRY(rt_cuda_alloc(flush, &t->flush, d));
    for (int i = 0; i < 2 * N_TIMED; i++) KILN_TRY(rt_cuda_event_create(&t->ev[i], true, d));
    t->ready = true;
    return KILN_OK;
}

/* Whether the CUDA context still works: a kernel that faulted leaves it
 * broken for the rest of the process. */
static bool context_lost(void)
{
    const rt_cuda_api *cu = rt_cuda_api_get();
    return !cu || cu->cuCtxSynchronize() != CUDA_SUCCESS;
}

static kiln_status memset_device(CUdeviceptr p, unsigned char v, size_t bytes, base_diag *d)
{
    const rt_cuda_api *cu = rt_cuda_api_get();
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuMemsetD8(p, v, bytes));
}

/* ---- candidates -------------------------------------------------------------------------- */

static const char tune_kernels[] =
    "/* L2 eviction between timed launches: writes flush_words words */\n"
    "extern \"C\" __global__ void k_flush(unsigned int *p, unsigned long long n)\n"
    "{\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += (unsigned long long)gridDim.x * blockDim.x)\n"
    "        p[i] = (unsigned int)i;\n"
    "}\n";

/* Emits candidate c into a scratch program of its own: c->src, or
 * c->ok = false and a note. The emitter's code, diagnostics, template
 * list, tensor maps and split-K places are put back as they were. */
static void make_source(cg_emitter *e, const sched_group *grp, const char *key, int index, int n_cands,
                        cg_emit_cand_fn emit_cand, tune_cand *c)
{
    base_str saved_code = e->code;
    base_diag *saved_d = e->d;
    int saved_need = e->n_need;
    /* the candidate's tensor maps are its own kg_tmaps[0..] */
    rt_gtmap *saved_tmaps = e->tmaps;
    int saved_n_tmaps = e->n_tmaps, saved_cap_tmaps = e->cap_tmaps;
    /* and its split-K place the workspace's start: the program's places are not moved by it */
    const int64_t saved_ws_next = e->splitk_ws_next;
    const int saved_sem_next = e->splitk_sem_next;
    e->splitk_ws_next = e->splitk_sem_next = 0;
    e->tmaps = NULL;
    e->n_tmaps = e->cap_tmaps = 0;
    base_diag cd;
    base_diag_init(&cd);
    base_str_init(&e->code);
    e->d = &cd;
    c->op = (cg_op){.block = 256};
    kiln_status st = emit_cand(e, grp, index, &c->op);
    base_str code = e->code;
    e->code = saved_code;
    if (st == KILN_OK && code.oom) st = base_diag_add(&cd, KILN_ERR_OOM, "out of memory emitting it");
    const cg_op *op = &c->op;
    if (st == KILN_OK && (op->n_rtasks < 1 || op->n_rtasks > INT32_MAX || op->block < 32 || op->block > 1024 ||
                          op->block % 32 || op->smem_bytes < 0 || op->smem_bytes > KILN_GPROG_MAX_SMEM))
        st = base_diag_add(&cd, KILN_ERR_INTERNAL, "the emitter asked for %lld rTasks of %d threads and %d B of "
                           "shared memory", (long long)op->n_rtasks, op->block, op->smem_bytes);
    if (st == KILN_OK && op->smem_bytes > e->gpu.smem_per_block_optin)
        st = base_diag_add(&cd, KILN_ERR_UNSUPPORTED, "needs %d B of shared memory, the GPU gives a block %d",
                           op->smem_bytes, e->gpu.smem_per_block_optin);
    base_str s;
    base_str_init(&s);
    if (st == KILN_OK) {
        base_str_printf(&s, "/* kiln tuner: %s, candidate %d of %d */\n", key, index, n_cands);
        st = cg_prelude(e, &s);
    }
    if (st == KILN_OK) {
        base_str_printf(&s, "#define KG_SITE_%d 0u\n", grp->id);
        base_str_cat(&s, base_str_get(&code));
        base_str_cat(&s, "\n");
        /* under a mono schedule the candidate runs as in the persistent
         * kernel: in blocks of its threads (a narrow one on the first
         * op->block of them, the block meeting after each rTask) and as
         * many blocks a multiprocessor as the kernel-wide configuration
         * (MonoNN's schedule-independent tuning: timed alone, the narrow
         * 128-thread tiles of a 256x1 kernel ran several blocks a
         * multiprocessor and won, then lost in the kernel: ViT 825 -> 972
         * us, BERT b16 1880 -> 2095 on an H100) */
        const bool mono = e->want_block > 0 && e->mono_per_sm > 0;
        c->block = cg_block_in(op, mono ? e->want_block : 0);
        c->per_sm = mono ? e->mono_per_sm : 0;
        cg_kernel_head(&s, "k_tune", c->block, c->per_sm, op->cluster, true);
        /* the identical products beside it in its wave: as many copies of its rTasks */
        const long long n = (long long)op->n_rtasks, share = KILN_MAX(1, e->tune_share);
        char task[48] = "t";
        if (share > 1) snprintf(task, sizeof(task), "t %% %lld", n);
        if (c->block > op->block)
            base_str_printf(&s,
                            "    for (int t = blockIdx.x; t < %lld; t += gridDim.x) {\n"
                            "        if (threadIdx.x < %du) op_%d(c, %s%s);\n"
                            "        __syncthreads();\n    }\n}\n\n%s",
                            n * share, op->block, grp->id, task, cg_pre_arg(op, false), tune_kernels);
        else
            base_str_printf(&s, "    for (int t = blockIdx.x; t < %lld; t += gridDim.x) op_%d(c, %s%s);\n}\n\n%s",
                            n * share, grp->id, task, cg_pre_arg(op, false), tune_kernels);
        c->op.n_rtasks *= share;
        cg_tmaps_define(e, &s);
        if (s.oom) st = base_diag_add(&cd, KILN_ERR_OOM, "out of memory emitting it");
    }
    if (st == KILN_OK) {
        c->src = base_malloc(s.len + 1);
        if (c->src) memcpy(c->src, base_str_get(&s), s.len + 1);
        else st = base_diag_add(&cd, KILN_ERR_OOM, "out of memory emitting it");
    }
    c->ok = st == KILN_OK;
    if (!c->ok) {
        char why[200];
        first_error(&cd, why, sizeof(why));
        snprintf(c->note, sizeof(c->note), "not emitted: %s", why);
    }
    c->tmaps = e->tmaps;
    c->n_tmaps = e->n_tmaps;
    e->tmaps = saved_tmaps;
    e->n_tmaps = saved_n_tmaps;
    e->cap_tmaps = saved_cap_tmaps;
    e->splitk_ws_next = saved_ws_next;
    e->splitk_sem_next = saved_sem_next;
    e->d = saved_d;
    e->n_need = saved_need;
    base_str_free(&s);
    base_str_free(&code);
    base_diag_free(&cd);
}

typedef struct compile_job {
    tune_cand *cands;
    int n, next;
    int sm_major, sm_minor;
    bool arch_specific;
    pthread_mutex_t lock;
} compile_job;

static void *compile_worker(void *arg)
{
    compile_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int i = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->n) return NULL;
        tune_cand *c = &j->cands[i];
        if (!c->ok) continue;
        base_diag d;
        base_diag_init(&d);
        char name[32];
        snprintf(name, sizeof(name), "tune_%d.cu", i);
        if (cg_nvrtc_compile(c->src, name, j->sm_major, j->sm_minor, j->arch_specific, &c->cubin, &c->cubin_bytes,
                             &d) != KILN_OK) {
            char why[200];
            first_error(&d, why, sizeof(why));
            snprintf(c->note, sizeof(c->note), "NVRTC: %s", why);
            c->ok = false;
        }
        base_diag_free(&d);
    }
}

/* Compiles every candidate still in the running, on up to
 * MAX_COMPILE_THREADS threads (NVRTC is thread-safe, and most of its time
 * goes to parsing the same headers). */
static void compile_all(const cg_emitter *e, tune_cand *cands, int n)
{
    compile_job j = {.cands = cands, .n = n, .sm_major = e->gpu.sm_major, .sm_minor = e->gpu.sm_minor,
                     .arch_specific = e->gpu.sm_major == 9 && e->gpu.sm_minor == 0};
    pthread_mutex_init(&j.lock, NULL);
    int todo = 0;
    for (int i = 0; i < n; i++) todo += cands[i].ok;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n_threads = (int)KILN_MIN((long)KILN_MIN(todo, MAX_COMPILE_THREADS), cpus > 0 ? cpus : 1);
    pthread_t th[MAX_COMPILE_THREADS];
    int started = 0;
    /* this thread works too, so a refused pthread_create only costs speed */
    for (int i = 1; i < n_threads; i++)
        if (pthread_create(&th[started], NULL, compile_worker, &j) == 0) started++;
    compile_worker(&j);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&j.lock);
}

/* ---- measuring ----------------------------------------------------------------------------- */

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Runs candidate c: warm-up, then N_TIMED launches each after an L2 flush;
 * c->us is the median. Leaves its outputs on the device. On failure c->ok
 * is false with a note; *lost when the context did not survive. */
static void run_candidate(cg_tuner *t, const cg_emitter *e, tune_cand *c, bool *lost)
{
    base_diag d;
    base_diag_init(&d);
    CUmodule mod = NULL;
    CUfunction fn = NULL, flush = NULL;
    kiln_status st = rt_cuda_module_load(c->cubin, c->cubin_bytes, &mod, &d);
    if (st == KILN_OK)
        st = rt_cuda_fill_tmaps(mod, c->tmaps, c->n_tmaps, t->arena, t->p->arena_bytes ? t->p->arena_bytes : 1,
                                t->wts, t->p->weight_bytes ? t->p->weight_bytes : 1, &d);
    if (st == KILN_OK) st = rt_cuda_module_function(mod, "k_tune", &fn, &d);
    if (st == KILN_OK) st = rt_cuda_module_function(mod, "k_flush", &flush, &d);
    if (st == KILN_OK && c->op.smem_bytes > 48 * 1024) st = rt_cuda_function_set_smem(fn, c->op.smem_bytes, &d);
    int per_sm = 0;
    if (st == KILN_OK) st = rt_cuda_occupancy(fn, c->block, (size_t)c->op.smem_bytes, &per_sm, &d);
    if (st == KILN_OK && per_sm < 1)
        st = base_diag_add(&d, KILN_ERR_UNSUPPORTED, "no block of %d threads with %d B of shared memory fits on a "
                           "multiprocessor", c->block, c->op.smem_bytes);
    if (c->per_sm > 0 && per_sm > c->per_sm) per_sm = c->per_sm;
    int64_t most = (int64_t)per_sm * (e->gpu.n_sms > 0 ? e->gpu.n_sms : 1);
    unsigned grid = (unsigned)(c->op.n_rtasks < most ? c->op.n_rtasks : most);
    if (c->op.cluster > 1) grid -= grid % (unsigned)c->op.cluster; /* whole clusters (n_rtasks is a multiple) */
    unsigned flush_grid = (unsigned)(e->gpu.n_sms > 0 ? 4 * e->gpu.n_sms : 512);
    void *args[] = {&t->gctx};
    void *flush_args[] = {&t->flush, &t->flush_words};
    if (st == KILN_OK) st = memset_device(t->fail, 0, 2 * sizeof(unsigned), &d);
    for (int i = 0; i < N_WARMUP && st == KILN_OK; i++)
        st = rt_cuda_launch(fn, grid, (unsigned)c->block, (unsigned)c->op.smem_bytes, NULL, args, &d);
    if (st == KILN_OK) st = rt_cuda_stream_sync(NULL, &d);
    /* the flush before each launch keeps the queue full, so the events
     * time the kernel and not the host's launch latency */
    for (int i = 0; i < N_TIMED && st == KILN_OK; i++) {
        st = rt_cuda_launch(flush, flush_grid, 256, 0, NULL, flush_args, &d);
        if (st == KILN_OK) st = rt_cuda_event_record(t->ev[2 * i], NULL, &d);
        if (st == KILN_OK)
            st = rt_cuda_launch(fn, grid, (unsigned)c->block, (unsigned)c->op.smem_bytes, NULL, args, &d);
        if (st == KILN_OK) st = rt_cuda_event_record(t->ev[2 * i + 1], NULL, &d);
    }
    if (st == KILN_OK) st = rt_cuda_stream_sync(NULL, &d);
    double us[N_TIMED];
    for (int i = 0; i < N_TIMED && st == KILN_OK; i++) {
        float ms = 0;
        st = rt_cuda_event_elapsed(t->ev[2 * i], t->ev[2 * i + 1], &ms, &d);
        us[i] = (double)ms * 1e3;
    }
    if (st == KILN_OK) {
        qsort(us, N_TIMED, sizeof(us[0]), cmp_double);
        c->us = us[N_TIMED / 2];
        c->ran = true;
    } else {
        char why[200];
        first_error(&d, why, sizeof(why));
        snprintf(c->note, sizeof(c->note), "failed on the GPU: %s", why);
        c->ok = false;
        *lost = context_lost();
    }
    rt_cuda_module_free(mod);
    base_diag_free(&d);
}

/* The group's outputs on the device (arena or graph outputs). */
static int output_regions(const cg_tuner *t, const cg_emitter *e, const sched_group *grp, out_region *r, int max,
                          size_t *total)
{
    int n = 0;
    *total = 0;
    for (int i = 0; i < grp->n_out && n < max; i++) {
        const ir_value *v = grp->out[i];
        if (v->graph != t->g || v->id >= t->p->n_values) continue;
        const sched_place *pl = &t->p->place[v->id];
        int64_t numel;
        size_t bytes = stored_bytes(e, v, &numel);
        if (bytes == 0) continue;
        if (pl->loc == SCHED_LOC_ARENA && pl->offset <= t->p->arena_bytes && bytes <= t->p->arena_bytes - pl->offset)
            r[n] = (out_region){.at = t->arena + pl->offset, .arena_offset = pl->offset};
        else if (pl->loc == SCHED_LOC_OUTPUT && t->g->n_inputs + (int64_t)pl->offset < t->n_io)
            r[n] = (out_region){.at = t->io[t->g->n_inputs + (int)pl->offset], .arena_offset = UINT64_MAX};
        else continue;
        r[n].bytes = bytes;
        r[n].store = cg_store(e, v);
        *total += bytes;
        n++;
    }
    return n;
}

static double load_float(const void *p, kiln_dtype t, size_t i)
{
    switch (t) {
    case KILN_F32: return ((const float *)p)[i];
    case KILN_F64: return ((const double *)p)[i];
    case KILN_F16: return base_f16_to_f32(((const uint16_t *)p)[i]);
    default: return base_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* Whether got matches want: integers exactly; floats within 2% plus 0.2%
 * of want's largest magnitude (tilings sum in different orders, and a
 * broken candidate is far off or leaves NaN behind), NaN where want has NaN. */
static bool outputs_agree(const unsigned char *got, const unsigned char *want, const out_region *r, int n)
{
    for (int k = 0; k < n; k++) {
        if (!cg_is_float(r[k].store)) {
            if (memcmp(got, want, r[k].bytes) != 0) return false;
        } else {
            size_t m = r[k].bytes / ir_dtype_size(r[k].store);
            double big = 0;
            for (size_t i = 0; i < m; i++) {
                double w = fabs(load_float(want, r[k].store, i));
                if (isfinite(w) && w > big) big = w;
            }
            for (size_t i = 0; i < m; i++) {
                double g = load_float(got, r[k].store, i), w = load_float(want, r[k].store, i);
                if (isnan(w) || isnan(g)) {
                    if (isnan(w) != isnan(g)) return false;
                } else if (isinf(w) || isinf(g)) {
                    if (g != w) return false;
                } else if (fabs(g - w) > 2e-2 * fabs(w) + 2e-3 * big + 1e-30) {
                    return false;
                }
            }
        }
        got += r[k].bytes;
        want += r[k].bytes;
    }
    return true;
}

static kiln_status read_outputs(const out_region *r, int n, unsigned char *dst, base_diag *d)
{
    for (int k = 0; k < n; k++) {
        KILN_TRY(rt_cuda_copy_to_host(dst, r[k].at, r[k].bytes, d));
        dst += r[k].bytes;
    }
    return KILN_OK;
}

static kiln_status poison_outputs(const out_region *r, int n, base_diag *d)
{
    for (int k = 0; k < n; k++) KILN_TRY(memset_device(r[k].at, 0xff, r[k].bytes, d)); /* NaN in every float type */
    return KILN_OK;
}

/* Puts the arena's random contents back where the group wrote: later groups
 * may read those bytes as inputs. */
static kiln_status restore_outputs(const cg_tuner *t, const out_region *r, int n, base_diag *d)
{
    for (int k = 0; k < n; k++)
        if (r[k].arena_offset != UINT64_MAX)
            KILN_TRY(rt_cuda_copy_to_device(r[k].at, t->arena_image + r[k].arena_offset, r[k].bytes, d));
    return KILN_OK;
}

/* Times every compiled candidate and checks its outputs against the first
 * one that ran. Returns the fastest that agrees, or -1. */
static int measure_all(cg_tuner *t, const cg_emitter *e, const sched_group *grp, const char *key, tune_cand *cands,
                       int n)
{
    out_region r[64];
    size_t total;
    int n_r = output_regions(t, e, grp, r, (int)KILN_COUNT(r), &total);
    bool check = n_r > 0 && total <= MAX_CHECKED_BYTES;
    unsigned char *want = check ? base_malloc(total) : NULL, *got = check ? base_malloc(total) : NULL;
    check = want && got;
    base_diag d;
    base_diag_init(&d);
    int ref = -1, agree = 0, disagree = 0, last = -1;
    bool lost = false;
    for (int i = 0; i < n && !lost; i++) {
        tune_cand *c = &cands[i];
        if (!c->ok) continue;
        if (check && poison_outputs(r, n_r, &d) != KILN_OK) check = false;
        last = i;
        run_candidate(t, e, c, &lost);
        if (!c->ran || !check) continue;
        if (read_outputs(r, n_r, ref < 0 ? want : got, &d) != KILN_OK) {
            check = false;
            continue;
        }
        if (ref < 0) ref = i;
        else if (outputs_agree(got, want, r, n_r)) agree++;
        else {
            disagree++;
            c->ok = false;
            snprintf(c->note, sizeof(c->note), "outputs differ from candidate %d's (%.1f us)", ref, c->us);
        }
    }
    if (!lost && check) restore_outputs(t, r, n_r, &d);
    if (d.n_msgs) say(t, "tuning %s: outputs not compared: %s", key, d.msgs[0]);
    base_diag_free(&d);
    base_free(want);
    base_free(got);
    if (lost) {
        t->dead = true;
        say(t, "tuning %s: candidate %d broke the CUDA context (%s); no more tuning in this process", key, last,
            cands[last].note);
        return -1;
    }
    if (disagree > agree) {
        say(t, "tuning %s: candidate %d disagrees with %d of %d others: no choice made (a template bug?)", key, ref,
            disagree, agree + disagree);
        return -1;
    }
    int best = -1;
    for (int i = 0; i < n; i++)
        if (cands[i].ok && cands[i].ran && (best < 0 || cands[i].us < cands[best].us)) best = i;
    return best;
}

/* With KILN_TUNE_LOG=FILE, every candidate's time (us, -1 when it did not
 * run) is appended to FILE, a line each, tab-separated: key, candidate,
 * time, and the line of its rOperator's code that says what it is
 * (emit_conv.c's "implicit GEMM ..." comment, emit_gemm.c's summary): the
 * data emit_conv.c's tc_consts were fitted to. */
static void log_cands(const char *key, const tune_cand *cands, int n)
{
    const char *path = getenv("KILN_TUNE_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    for (int i = 0; i < n; i++) {
        const char *src = cands[i].src ? cands[i].src : "", *op = strstr(src, "#define KG_SITE_");
        const char *what = op ? strstr(op, "implicit GEMM") : NULL;
        if (op && !what) what = strstr(op, " * kg_gemm");
        int len = 0;
        if (what)
            while (what[len] && what[len] != '\n' && len < 400) len++;
        fprintf(f, "%s\t%d\t%.3f\t%.*s\n", key, i, cands[i].ok && cands[i].ran ? cands[i].us : -1.0, len,
                what ? what : "");
    }
    fclose(f);
}

/* Tunes one key on the device: -1 when no candidate could be measured. */
static int tune_key(cg_tuner *t, cg_emitter *e, const sched_group *grp, const char *key, int n_cands, int heuristic,
                    cg_emit_cand_fn emit_cand)
{
    double t0 = now_s();
    if (!t->ready) {
        base_diag d;
        base_diag_init(&d);
        kiln_status st = device_setup(t, e, &d);
        if (st != KILN_OK) {
            say(t, "tuning: cannot use the GPU (%s); choosing by heuristics", d.n_msgs ? d.msgs[0] : "unknown error");
            device_release(t);
            t->dead = true;
        }
        base_diag_free(&d);
        if (st != KILN_OK) return -1;
    }
    tune_cand *cands = base_calloc((size_t)n_cands, sizeof(*cands));
    if (!cands) return -1;
    for (int i = 0; i < n_cands; i++) make_source(e, grp, key, i, n_cands, emit_cand, &cands[i]);
    compile_all(e, cands, n_cands);
    int best = measure_all(t, e, grp, key, cands, n_cands);
    log_cands(key, cands, n_cands);
    int n_ran = 0, n_notes = 0, n_skipped = 0;
    for (int i = 0; i < n_cands; i++) {
        n_ran += cands[i].ran && cands[i].ok;
        if (cands[i].ok) continue;
        n_skipped++;
        if (n_notes++ < MAX_NOTES) say(t, "tuning %s: candidate %d skipped: %s", key, i, cands[i].note);
    }
    if (n_notes > MAX_NOTES) say(t, "tuning %s: ... and %d more skipped", key, n_notes - MAX_NOTES);
    double secs = now_s() - t0;
    t->seconds += secs;
    t->n_measured++;
    char spent[64] = "";
    if (t->budget > 0) snprintf(spent, sizeof(spent), " (%.0f of %.0f s of the budget)", t->seconds, t->budget);
    if (best >= 0) {
        char desc[96];
        char heur[64] = "";
        if (heuristic >= 0 && heuristic < n_cands && heuristic != best && cands[heuristic].ok && cands[heuristic].ran)
            snprintf(heur, sizeof(heur), "; the heuristic's, candidate %d, %.1f us", heuristic, cands[heuristic].us);
        else if (heuristic == best)
            snprintf(heur, sizeof(heur), "; the heuristic's choice");
        say(t, "tuning %s: %d/%d candidates, best %.1f us (candidate %d: %s)%s; %.1f s%s", key, n_ran, n_cands,
            cands[best].us, best, describe(&cands[best].op, desc, sizeof(desc)), heur, secs, spent);
        if (t->db && cg_tune_db_writable(t->db)) {
            cg_tune_row row = {.n_cands = n_cands, .cand = best, .us = cands[best].us};
            snprintf(row.desc, sizeof(row.desc), "candidate %d of %d: %s", best, n_cands, desc);
            cg_tune_scope s = scope_of(t);
            base_diag d;
            base_diag_init(&d);
            if (cg_tune_db_store(t->db, &s, key, &row, &d) != KILN_OK) {
                say_diag(t, "tuning: warning", &d);
                say(t, "tuning: warning: results are no longer kept in '%s'", t->db_path);
                cg_tune_db_close(t->db);
                t->db = NULL;
            }
            base_diag_free(&d);
        }
    } else if (!t->dead) {
        say(t, "tuning %s: no candidate could be measured (%d skipped); heuristic choice", key, n_skipped);
    }
    for (int i = 0; i < n_cands; i++) {
        base_free(cands[i].src);
        base_free(cands[i].tmaps);
        base_free(cands[i].cubin);
    }
    base_free(cands);
    return best;
}

/* ---- the API ------------------------------------------------------------------------------- */

void cg_tune_key_cands(char *key, size_t n, const void *list, size_t bytes)
{
    size_t len = strlen(key);
    if (len < n)
        snprintf(key + len, n - len, " cands=%08llx",
                 (unsigned long long)(base_hash_bytes(list, bytes, 0x63616e64) & 0xffffffffu));
}

int cg_tune_choose(cg_emitter *e, const sched_group *grp, const char *key, int n_cands, int heuristic,
                   cg_emit_cand_fn emit_cand)
{
    cg_tuner *t = e->tuner;
    if (!t || t->busy || !key || n_cands < 1 || !emit_cand) return -1;
    const memo *m = memo_find(t, key);
    if (m) return m->cand < n_cands ? m->cand : -1;
    if (t->db) {
        cg_tune_scope s = scope_of(t);
        cg_tune_row row;
        bool found = false;
        base_diag d;
        base_diag_init(&d);
        if (cg_tune_db_lookup(t->db, &s, key, &row, &found, &d) != KILN_OK) {
            say_diag(t, "tuning: warning", &d);
            say(t, "tuning: warning: the tuning database '%s' is not used any further", t->db_path);
            cg_tune_db_close(t->db);
            t->db = NULL;
        }
        base_diag_free(&d);
        /* a row for another number of candidates is from another template */
        if (found && row.n_cands == n_cands && row.cand >= 0 && row.cand < n_cands) {
            say(t, "tuning %s: candidate %d from the tuning database (%.1f us, %s)", key, row.cand, row.us, row.date);
            t->n_from_db++;
            memo_add(t, key, row.cand);
            return row.cand;
        }
    }
    if (!t->measure || t->dead) return -1;
    if (t->budget > 0 && t->seconds >= t->budget) {
        /* what is measured is in the database: a later run goes on from here */
        if (t->n_over_budget++ == 0)
            say(t, "tuning: the budget of %.0f s is spent; the rest keeps the heuristics' choices (run again to "
                   "go on: what was tuned is kept)", t->budget);
        memo_add(t, key, -1);
        return -1;
    }
    t->busy = true;
    int best = tune_key(t, e, grp, key, n_cands, heuristic, emit_cand);
    t->busy = false;
    memo_add(t, key, best);
    return best;
}

kiln_status cg_tuner_open(cg_emitter *e, const void *weights, cg_tuner **out, base_diag *d)
{
    *out = NULL;
    const target_options *o = e->o;
    if (!e->gpu.present) {
        if (o->tune && o->progress)
            o->progress(o->progress_user, "tuning: no CUDA device here; template configurations are chosen by "
                                          "heuristics");
        return KILN_OK;
    }
    /* without --tune, only answers from a database that exists */
    char path[4096];
    if (!o->tune) {
        base_diag w;
        base_diag_init(&w);
        bool have = cg_tune_db_path(o->tuning_db, path, sizeof(path), &w) == KILN_OK && access(path, R_OK) == 0;
        base_diag_free(&w);
        if (!have) return KILN_OK;
    }
    cg_tuner *t = base_calloc(1, sizeof(*t));
    if (!t) return base_diag_add(d, KILN_ERR_OOM, "out of memory opening the tuner");
    *t = (cg_tuner){.g = e->g, .p = e->p, .o = o, .weights = weights, .measure = o->tune,
                    .budget = o->tune_budget_s > 0 ? o->tune_budget_s : 0};
    kiln_build(t->kiln, sizeof(t->kiln));
    base_diag w;
    base_diag_init(&w);
    if (rt_cuda_device_info(0, &t->dev, &w) != KILN_OK) {
        say_diag(t, "tuning: cannot read device 0; choosing by heuristics", &w);
        base_diag_free(&w);
        base_free(t);
        return KILN_OK;
    }
    kiln_status st = cg_tune_db_path(o->tuning_db, t->db_path, sizeof(t->db_path), &w);
    if (st == KILN_OK) st = cg_tune_db_open(t->db_path, &t->db, &w);
    say_diag(t, "tuning: warning", &w);
    if (st != KILN_OK) say(t, "tuning: warning: tuning results are not kept");
    base_diag_free(&w);
    *out = t;
    return KILN_OK;
}

void cg_tuner_close(cg_tuner *t)
{
    if (!t) return;
    if (t->n_measured || t->n_from_db || t->n_over_budget) {
        char over[96] = "";
        if (t->n_over_budget)
            snprintf(over, sizeof(over), ", %d left to the heuristics (budget spent)", t->n_over_budget);
        say(t, "tuning: %d configurations measured in %.1f s, %d from the tuning database%s%s%s", t->n_measured,
            t->seconds, t->n_from_db, t->db ? " " : "", t->db ? t->db_path : "", over);
    }
    device_release(t);
    cg_tune_db_close(t->db);
    for (int i = 0; i < t->n_memos; i++) base_free(t->memos[i].key);
    base_free(t->memos);
    base_free(t);
}

/* ---- the mono schedules' kernel-wide configuration (MonoNN Alg. 1) ------------------------- *
 * `kiln tune --schedule mono` times the whole network once per configuration
 * (block size x blocks per multiprocessor, its groups tuned under it) and
 * keeps each time, and the winner, in the tuning database under the model's
 * key (target_cuda_mono_key): "mono-config KEY BLOCKxN" and "mono-config KEY".
 * A mono compile that names no configuration takes the winner. */

/* Part of every mono configuration's key, raised when what a configuration
 * compiles to changes, so that configurations timed before are not taken
 * for the model's best: 2 when convolutions became products in kernels of
 * one block a multiprocessor (ResNet-50's 256x1 went from 576 to 502 us on
 * an H100), which a timing of 256x3 and 256x1 before it would hide; 3 when
 * products were fitted to their stages (emit.c fit_stage) and
 * GlobalAveragePool's columns shared among threads; 4 when the shared
 * bodies with warpgroup MMAs were inlined (share.c: BERT b1 532 -> 453 us
 * on an H200); 5 when attention rTasks took query tiles side by side and
 * blocks of 384 threads joined the sweep (BERT b16). */
#define MONO_KEY_REVISION 5

void target_cuda_mono_key(const sched_program *p, const char *schedule, const char *precision, char *key, size_t n)
{
    uint64_t h = 0x6d6f6e6f + MONO_KEY_REVISION;
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        int head[2] = {grp->kind, grp->n_nodes};
        h = base_hash_bytes(head, sizeof(head), h);
        for (int i = 0; i < grp->n_nodes; i++) h = base_hash_bytes(&grp->nodes[i]->op, sizeof(grp->nodes[i]->op), h);
        for (int i = 0; i < grp->n_out; i++) {
            const ir_tensor *t = &grp->out[i]->t;
            h = base_hash_bytes(&t->dtype, sizeof(t->dtype), h);
            h = base_hash_bytes(t->dims, (size_t)t->rank * sizeof(t->dims[0]), h);
        }
    }
    h = base_hash_bytes(&p->arena_bytes, sizeof(p->arena_bytes), h);
    h = base_hash_bytes(&p->weight_bytes, sizeof(p->weight_bytes), h);
    char base[32] = "mono";
    if (schedule) snprintf(base, sizeof(base), "%.*s", (int)strcspn(schedule, ":"), schedule);
    snprintf(key, n, "%s %s model=%016llx", base, precision ? precision : "fp32", (unsigned long long)h);
}

/* The database and the scope (device 0, the driver, this kiln build) a
 * configuration is kept for. OUT: *db (NULL: no database), dev, build. */
static kiln_status mono_db_open(const char *tuning_db, cg_tune_db **db, rt_cuda_device *dev, char *build, size_t n,
                                base_diag *d)
{
    *db = NULL;
    KILN_TRY(rt_cuda_open(d));
    if (rt_cuda_device_count() < 1) return base_diag_add(d, KILN_ERR_NO_DEVICE, "no CUDA device");
    KILN_TRY(rt_cuda_device_info(0, dev, d));
    kiln_build(build, n);
    char path[4096];
    KILN_TRY(cg_tune_db_path(tuning_db, path, sizeof(path), d));
    return cg_tune_db_open(path, db, d);
}

static void mono_row_key(char *out, size_t n, const char *key, const char *config)
{
    snprintf(out, n, "mono-config %s%s%s", key, config ? " " : "", config ? config : "");
}

/* The row for config (NULL: the chosen one) in db under scope s. */
static kiln_status mono_row_read(cg_tune_db *db, const cg_tune_scope *s, const char *key, const char *config,
                                 target_mono_config *out, bool *found, base_diag *d)
{
    char row_key[256];
    cg_tune_row row;
    int block = 0, per_sm = 0;
    *found = false;
    mono_row_key(row_key, sizeof(row_key), key, config);
    KILN_TRY(cg_tune_db_lookup(db, s, row_key, &row, found, d));
    if (*found && (sscanf(row.desc, "%dx%d", &block, &per_sm) != 2 || !target_cuda_mono_block_ok(block) ||
                   per_sm < 1 || per_sm > 5))
        *found = false; /* not a row this code wrote */
    if (*found) *out = (target_mono_config){.block = block, .per_sm = per_sm, .us = row.us};
    if (*found) snprintf(out->date, sizeof(out->date), "%s", row.date);
    return KILN_OK;
}

kiln_status target_cuda_mono_lookup(const char *tuning_db, const char *key, const char *config,
                                    target_mono_config *out, bool *found, base_diag *d)
{
    *found = false;
    cg_tune_db *db = NULL;
    rt_cuda_device dev = {0};
    char build[64] = "";
    kiln_status st = mono_db_open(tuning_db, &db, &dev, build, sizeof(build), d);
    cg_tune_scope s = {.gpu = dev.name, .sm = dev.sm_major * 10 + dev.sm_minor, .driver = dev.driver_version,
                       .kiln = build};
    if (st == KILN_OK && db) st = mono_row_read(db, &s, key, config, out, found, d);
    cg_tune_db_close(db);
    return st;
}

bool cg_tuner_mono_config(cg_tuner *t, const char *key, target_mono_config *out)
{
    if (!t || !t->db) return false;
    cg_tune_scope s = scope_of(t);
    bool found = false;
    base_diag d;
    base_diag_init(&d);
    if (mono_row_read(t->db, &s, key, NULL, out, &found, &d) != KILN_OK) say_diag(t, "tuning: warning", &d);
    base_diag_free(&d);
    return found;
}

kiln_status target_cuda_mono_store(const char *tuning_db, const char *key, const char *config,
                                   const target_mono_config *c, base_diag *d)
{
    cg_tune_db *db = NULL;
    rt_cuda_device dev = {0};
    char build[64] = "", row_key[256];
    kiln_status st = mono_db_open(tuning_db, &db, &dev, build, sizeof(build), d);
    if (st == KILN_OK && (!db || !cg_tune_db_writable(db)))
        st = base_diag_add(d, KILN_ERR_IO, "the tuning database cannot be written");
    cg_tune_scope s = {.gpu = dev.name, .sm = dev.sm_major * 10 + dev.sm_minor, .driver = dev.driver_version,
                       .kiln = build};
    cg_tune_row row = {.n_cands = 0, .cand = 0, .us = c->us};
    snprintf(row.desc, sizeof(row.desc), "%dx%d", c->block, c->per_sm);
    mono_row_key(row_key, sizeof(row_key), key, config);
    if (st == KILN_OK) st = cg_tune_db_store(db, &s, row_key, &row, d);
    cg_tune_db_close(db);
    return st;
}
