/*
 * rt.c: the runtime's public API (include/kiln_rt.h): loading a `.kiln`
 * artifact of target "c" and running it on the worker pool; artifacts of
 * target "cuda" share the signature, the segments and the outputs of
 * data-dependent shape kept here, and go to rt_cuda.c for the rest.
 *
 * Loading does every check and every allocation a run needs, once: the
 * artifact is validated (artifact.c), the ISA the code was built for is
 * checked against this CPU before any of the code runs, the shared object is
 * written to an anonymous file (memfd) and opened with dlopen, its program
 * description is checked against the artifact's plan, the arena and the
 * per-vEU scratch are allocated, the weights are mapped in place or copied
 * to aligned memory and handed to the program's prepare() to be repacked,
 * and every fallback segment is parsed into an IR graph.
 * A run then only publishes the io pointers and wakes the pool.
 *
 * Fallback segments run on the reference interpreter (ir/interp), called
 * back from generated code through kiln_host.run_segment; that is the one
 * place a run allocates, inside the interpreter.
 */
#include "runtime/artifact.h"
#include "runtime/cprog.h"
#include "runtime/rt-impl.h"

#include "ir/interp.h"
#include "onnx/onnx.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* memfd_create */
#include <unistd.h>

#define MAX_STAGES (1 << 24)
#define RUN_ERROR_BYTES 2048

int rt_code_avoid_memfd;

struct kiln_rt_model {
    rt_artifact art;        /* signature, plan, bindings; its buffer pointers are dropped after loading */
    base_file_map map;      /* the artifact file, kept mapped while the weights are used in place */
    int n_threads;

    void *dl;               /* the program's shared object */
    int code_fd;            /* its memfd, open while loaded so its /proc name stays unique; -1: none */
    const kiln_cprog *prog;

    uint8_t *arena;
    void *arena_raw;
    uint8_t *scratch;       /* n_threads slices of scratch_stride bytes */
    void *scratch_raw;
    size_t scratch_stride;
    const uint8_t *weights;
    void *weights_raw;      /* NULL when the weights are used in place */
    uint8_t *packed;        /* weights repacked by the program's prepare() */
    void *packed_raw;

    rt_segment *segs;
    int n_segs;
    rt_gpu *gpu;            /* target "cuda": the device side; NULL for target "c" */

    rt_pool *pool;
    kiln_cctx *ctx;         /* per vEU */
    void **io;              /* inputs, then outputs, of the current run */
    ir_tensor *dyn;         /* per output: the last run's tensor when its shape depends on data */
    uint64_t *profile;      /* NULL, or 2 counters per stage (rt_pool_set_profile) */
    bool ran;
    kiln_host host;

    _Atomic bool running;
    _Atomic int failed;     /* first failure of the run wins the message below */
    kiln_status run_status;
    char run_error[RUN_ERROR_BYTES];

    /* kiln_rt_host_alloc's live buffers (raw: what to free; target "c") */
    struct host_buf {
        void *p, *raw;
    } *host_bufs;
    int n_host_bufs, cap_host_bufs;
    pthread_mutex_t host_bufs_lock;
};

/* 64-byte aligned stand-in for empty weights, so generated code never sees NULL. */
static _Alignas(64) const uint8_t no_weights[64];

/* ---- errors ------------------------------------------------------------------------ */

static _Thread_local char last_error[RUN_ERROR_BYTES];

const char *kiln_rt_last_error(void) { return last_error; }

static kiln_status set_error(kiln_status st, const char *fmt, ...) KILN_PRINTF(2, 3);
static kiln_status set_error(kiln_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return st;
}

/* Records the first failure of a run (called from rTasks, on any vEU). */
static void run_fail(kiln_rt_model *m, kiln_status st, const char *fmt, ...) KILN_PRINTF(3, 4);
static void run_fail(kiln_rt_model *m, kiln_status st, const char *fmt, ...)
{
    if (atomic_exchange(&m->failed, 1)) return;
    int veu = rt_pool_self();
    int s = veu >= 0 && veu < m->n_threads ? rt_pool_stage(m->pool, veu) : -1;
    const char *name = s >= 0 && s < m->prog->n_stages && m->prog->stages[s].name ? m->prog->stages[s].name : "?";
    int k = snprintf(m->run_error, sizeof(m->run_error), "stage %d '%s': ", s, name);
    if (k < 0 || k >= (int)sizeof(m->run_error)) k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->run_error + k, sizeof(m->run_error) - (size_t)k, fmt, ap);
    va_end(ap);
    m->run_status = st;
    rt_pool_abort(m->pool);
}

/* ---- fallback segments ------------------------------------------------------------------ */

static void *binding_address(kiln_rt_model *m, const rt_binding *b)
{
    uint8_t *base = NULL;
    switch (b->kind) {
    case RT_BIND_ARENA: base = m->arena; break;
    case RT_BIND_WEIGHTS: base = (uint8_t *)(uintptr_t)m->weights; break;
    case RT_BIND_INPUT: base = m->io[b->io]; break;
    case RT_BIND_OUTPUT: base = m->io[m->art.desc.n_inputs + b->io]; break;
    default: KILN_ASSERT(!"binding kind checked by the reader");
    }
    return base ? base + b->offset : NULL; /* NULL: an empty io tensor the caller gave no buffer */
}

bool rt_binding_is_dynamic(const rt_binding *b)
{
    for (int k = 0; k < b->rank; k++)
        if (b->dims[k] < 0) return true;
    return false;
}

void rt_binding_type(const rt_binding *b, ir_tensor *t)
{
    memset(t, 0, sizeof(*t));
    t->dtype = b->dtype;
    t->rank = b->rank;
    memcpy(t->dims, b->dims, sizeof(t->dims));
    t->nbytes = rt_binding_is_dynamic(b) ? 0 : (size_t)ir_numel(t) * ir_dtype_size(b->dtype);
}

kiln_status rt_segment_exec(const rt_segment *seg, int index, const ir_tensor *in, ir_tensor *out, ir_tensor *dyn,
                            char *err, size_t n_err)
{
    const rt_segment_desc *sd = seg->desc;
    const ir_graph *g = seg->model->graph;
    for (int i = 0; i < sd->n_out; i++) memset(&out[i], 0, sizeof(out[i]));
    base_diag d;
    base_diag_init(&d);
    /* each segment draws its random ops' numbers from a generator of its
     * own (the same every run): from one seed, two RandomUniformLike in
     * separate segments drew the same numbers */
    ir_interp_opts opts = {.seed = (uint64_t)index * 0x9e3779b97f4a7c15ull};
    kiln_status st = ir_interp_run(g, in, out, &opts, &d);
    if (st != KILN_OK) snprintf(err, n_err, "segment %d: %s", index, base_diag_text(&d));
    base_diag_free(&d);
    for (int i = 0; st == KILN_OK && i < sd->n_out; i++) {
        const rt_binding *ob = &sd->out[i];
        if (ob->kind == RT_BIND_OUTPUT && rt_binding_is_dynamic(ob)) {
            /* kept for kiln_rt_result, whatever its shape */
            if (out[i].dtype != ob->dtype) {
                snprintf(err, n_err, "segment %d output %d ('%s') has dtype %s; its binding expects %s", index, i,
                         g->outputs[i]->name, kiln_dtype_name(out[i].dtype), kiln_dtype_name(ob->dtype));
                st = KILN_ERR_SHAPE;
                break;
            }
            ir_tensor_release(&dyn[ob->io]);
            dyn[ob->io] = out[i];
            memset(&out[i], 0, sizeof(out[i]));
            continue;
        }
        ir_tensor want;
        rt_binding_type(ob, &want);
        if (out[i].dtype != want.dtype || !ir_same_shape(&out[i], &want)) {
            char a[160], b[160];
            snprintf(err, n_err, "segment %d output %d ('%s') is %s; its binding expects %s", index, i,
                     g->outputs[i]->name, ir_tensor_type_str(&out[i], a, sizeof(a)),
                     ir_tensor_type_str(&want, b, sizeof(b)));
            st = KILN_ERR_SHAPE;
        }
    }
    if (st != KILN_OK)
        for (int i = 0; i < sd->n_out; i++) ir_tensor_release(&out[i]);
    return st;
}

static int host_run_segment(const kiln_host *h, const kiln_cctx *c, int seg)
{
    kiln_rt_model *m = h->impl;
    if (seg < 0 || seg >= m->n_segs) {
        run_fail(m, KILN_ERR_INVALID_MODEL, "the code runs segment %d; the artifact has %d", seg, m->n_segs);
        return 1;
    }
    const rt_segment_desc *sd = m->segs[seg].desc;
    ir_tensor *ts = base_calloc((size_t)sd->n_in + (size_t)sd->n_out + 1, sizeof(ir_tensor));
    if (!ts) {
        run_fail(m, KILN_ERR_OOM, "segment %d: out of memory", seg);
        return 1;
    }
    ir_tensor *in = ts, *out = ts + sd->n_in;
    for (int i = 0; i < sd->n_in; i++) {
        rt_binding_type(&sd->in[i], &in[i]);
        in[i].data = binding_address(m, &sd->in[i]);
    }
    char err[RUN_ERROR_BYTES];
    kiln_status st = rt_segment_exec(&m->segs[seg], seg, in, out, m->dyn, err, sizeof(err));
    if (st != KILN_OK) {
        run_fail(m, st, "%s", err);
    } else {
        for (int i = 0; i < sd->n_out; i++) {
            if (out[i].nbytes) memcpy(binding_address(m, &sd->out[i]), out[i].data, out[i].nbytes);
            ir_tensor_release(&out[i]);
        }
    }
    base_free(ts);
    return st != KILN_OK;
}

static void host_fail(const kiln_host *h, const char *msg)
{
    run_fail(h->impl, KILN_ERR_INVALID_ARG, "%s", msg ? msg : "(no message)");
}

static bool same_type(const ir_value *v, const rt_binding *b, bool unknown_dims_ok)
{
    if (v->t.dtype != b->dtype || v->t.rank != b->rank) return false;
    for (int k = 0; k < b->rank; k++)
        if (v->t.dims[k] != b->dims[k] && !(unknown_dims_ok && v->t.dims[k] < 0)) return false;
    return true;
}

kiln_status rt_segment_load(const rt_segment_desc *sd, int s, rt_segment *seg, base_diag *d)
{
    seg->desc = sd;
    base_diag sdiag;
    base_diag_init(&sdiag);
    kiln_status st = onnx_load_buffer(sd->onnx, sd->onnx_bytes, NULL, &seg->model, &sdiag);
    if (st != KILN_OK) {
        st = base_diag_add(d, st == KILN_ERR_OOM ? st : KILN_ERR_INVALID_MODEL, "artifact segment %d: %s", s,
                           base_diag_text(&sdiag));
        goto out;
    }
    ir_graph *g = seg->model->graph;
    if (g->n_inputs != sd->n_in || g->n_outputs != sd->n_out) {
        st = base_diag_add(d, KILN_ERR_INVALID_MODEL,
                           "artifact segment %d: the graph has %d inputs and %d outputs; the artifact binds %d and %d",
                           s, g->n_inputs, g->n_outputs, sd->n_in, sd->n_out);
        goto out;
    }
    char a[160], b[160];
    for (int i = 0; i < sd->n_in; i++) {
        ir_value *v = g->inputs[i];
        ir_tensor want;
        rt_binding_type(&sd->in[i], &want);
        if (!same_type(v, &sd->in[i], true)) {
            st = base_diag_add(d, KILN_ERR_INVALID_MODEL,
                               "artifact segment %d input %d ('%s'): the graph takes %s, the binding is %s", s, i,
                               v->name, ir_tensor_type_str(&v->t, a, sizeof(a)),
                               ir_tensor_type_str(&want, b, sizeof(b)));
            goto out;
        }
        memcpy(v->t.dims, want.dims, sizeof(v->t.dims));
        v->shape_known = true;
    }
    st = ir_infer_shapes(g, &sdiag);
    if (st != KILN_OK) {
        st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact segment %d: %s", s, base_diag_text(&sdiag));
        goto out;
    }
    for (int i = 0; i < sd->n_out; i++) {
        const ir_value *v = g->outputs[i];
        if (!v->shape_known || rt_binding_is_dynamic(&sd->out[i]) || same_type(v, &sd->out[i], false)) continue;
        ir_tensor want;
        rt_binding_type(&sd->out[i], &want);
        st = base_diag_add(d, KILN_ERR_INVALID_MODEL,
                           "artifact segment %d output %d ('%s'): the graph computes %s, the binding is %s", s, i,
                           v->name, ir_tensor_type_str(&v->t, a, sizeof(a)), ir_tensor_type_str(&want, b, sizeof(b)));
        goto out;
    }
out:
    base_diag_free(&sdiag);
    return st;
}

/* ---- the code ------------------------------------------------------------------------------ */

/* The instruction sets an ISA name needs: the x86-64 psABI levels the `c`
 * target compiles for (generic = v2, avx2 = v3, avx512 = v4). Checked before
 * any of the code runs (dlopen runs its constructors). */
static kiln_status check_isa(const char *isa, base_diag *d)
{
    const char *level = strcmp(isa, "generic") == 0  ? "x86-64-v2"
                        : strcmp(isa, "avx2") == 0   ? "x86-64-v3"
                        : strcmp(isa, "avx512") == 0 ? "x86-64-v4"
                                                     : NULL;
    if (!level)
        return base_diag_add(d, KILN_ERR_UNSUPPORTED, "the artifact's code is built for ISA '%s', unknown to this runtime",
                             isa);
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool ok = strcmp(level, "x86-64-v2") == 0   ? __builtin_cpu_supports("x86-64-v2")
              : strcmp(level, "x86-64-v3") == 0 ? __builtin_cpu_supports("x86-64-v3")
                                                : __builtin_cpu_supports("x86-64-v4");
    if (!ok)
        return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                             "the artifact's code is built for '%s' (%s), which this CPU does not support: compile "
                             "the model on this machine",
                             isa, level);
    return KILN_OK;
#else
    return base_diag_add(d, KILN_ERR_UNSUPPORTED, "the artifact's code is built for x86 '%s'; this CPU is not x86",
                         isa);
#endif
}

static bool write_all(int fd, const void *p, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const uint8_t *)p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        done += (size_t)w;
    }
    return true;
}

/* dlopen of a name already loaded returns the loaded object, whatever the
 * file now holds: never reuse a name (a /proc/self/fd number, a temporary
 * file's name) that is still loaded. */
static void *open_fresh(const char *path, char *err, size_t n_err)
{
    void *old = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (old) {
        dlclose(old);
        snprintf(err, n_err, "'%s' is already loaded", path);
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* "PATH: why"; the path is a file that is about to vanish: keep the why */
        const char *e = dlerror();
        size_t k = strlen(path);
        if (e && strncmp(e, path, k) == 0 && strncmp(e + k, ": ", 2) == 0) e += k + 2;
        snprintf(err, n_err, "%s", e ? e : "dlopen failed");
    }
    return h;
}

static kiln_status open_code(kiln_rt_model *m, const void *code, size_t n, base_diag *d)
{
    if (n < 4 || memcmp(code, "\177ELF", 4) != 0)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact CODE section: not an ELF shared object");
    char err[1280] = "", err2[1280] = "";
    if (!rt_code_avoid_memfd) {
        int fd = memfd_create("kiln-code", MFD_CLOEXEC);
        if (fd >= 0) {
            char path[64];
            snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
            if (write_all(fd, code, n)) m->dl = open_fresh(path, err, sizeof(err));
            else snprintf(err, sizeof(err), "cannot write the code to a memfd: %s", strerror(errno));
            if (m->dl) m->code_fd = fd;
            else close(fd);
        }
    }
    if (!m->dl) {
        /* No memfd (old kernel, no /proc, a noexec policy): a temporary file,
         * unlinked as soon as it is loaded. */
        const char *dir = getenv("TMPDIR");
        char path[1024];
        snprintf(path, sizeof(path), "%s/kiln-code-XXXXXX", dir && dir[0] ? dir : "/tmp");
        int fd = mkstemp(path);
        if (fd < 0) {
            snprintf(err2, sizeof(err2), "cannot create '%s': %s", path, strerror(errno));
        } else {
            if (write_all(fd, code, n)) m->dl = open_fresh(path, err2, sizeof(err2));
            else snprintf(err2, sizeof(err2), "cannot write '%s': %s", path, strerror(errno));
            unlink(path);
            close(fd);
        }
    }
    /* Both ways usually fail alike (an undefined symbol, a foreign ELF): the
     * first reason is the one to show. */
    if (!m->dl)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "cannot load the artifact's code: %s", err[0] ? err : err2);

    kiln_cprog_get_fn get = (kiln_cprog_get_fn)dlsym(m->dl, "kiln_cprog_get");
    if (!get)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "the artifact's code does not export kiln_cprog_get: not a kiln program");
    const kiln_cprog *p = get();
    const rt_artifact_desc *a = &m->art.desc;
    if (!p) return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the artifact's kiln_cprog_get returned NULL");
    if (p->abi != KILN_CPROG_ABI)
        return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                             "the artifact's code speaks runtime ABI %d, this runtime ABI %d: compile the model again "
                             "with this kiln", p->abi, KILN_CPROG_ABI);
    if (p->arena_bytes != a->arena_bytes)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "the artifact's code expects an arena of %zu bytes; its plan has %llu", p->arena_bytes,
                             (unsigned long long)a->arena_bytes);
    if (p->weight_bytes != a->weight_bytes)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "the artifact's code expects %zu bytes of weights; its WEIGHTS section has %zu",
                             p->weight_bytes, a->weight_bytes);
    if (p->scratch_bytes > RT_ARTIFACT_MAX_BYTES || p->packed_bytes > RT_ARTIFACT_MAX_BYTES)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "the artifact's code asks for %zu scratch bytes per vEU and %zu bytes of packed "
                             "weights: above 2^40", p->scratch_bytes, p->packed_bytes);
    if (!p->isa || strcmp(p->isa, a->isa) != 0)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the artifact's code is built for ISA '%s'; its header says '%s'",
                             p->isa ? p->isa : "(none)", a->isa);
    if (p->n_stages < 0 || p->n_stages > MAX_STAGES || (p->n_stages > 0 && !p->stages))
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the artifact's code has a bad stage list (%d stages)",
                             p->n_stages);
    for (int s = 0; s < p->n_stages; s++) {
        const kiln_cstage *st = &p->stages[s];
        if (st->n_rtasks < 0 || (st->n_rtasks > 0 && !st->fn))
            return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the artifact's code: stage %d '%s' has %s", s,
                                 st->name ? st->name : "?",
                                 st->n_rtasks < 0 ? "a negative rTask count" : "rTasks but no function");
        if (st->wait < 0 || st->wait > s) /* a wait on itself or a later stage never ends */
            return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the artifact's code: stage %d '%s' waits for %d stages",
                                 s, st->name ? st->name : "?", st->wait);
    }
    m->prog = p;
    return KILN_OK;
}

/* ---- loading ----------------------------------------------------------------------------------- */

/* What both targets keep on the host: the io pointers of a run, the
 * outputs of data-dependent shape, the parsed fallback segments. */
static kiln_status load_host_side(kiln_rt_model *m, base_diag *d)
{
    const rt_artifact_desc *a = &m->art.desc;
    m->io = base_calloc((size_t)a->n_inputs + (size_t)a->n_outputs + 1, sizeof(void *));
    m->dyn = base_calloc((size_t)a->n_outputs + 1, sizeof(ir_tensor));
    m->segs = base_calloc((size_t)a->n_segments + 1, sizeof(rt_segment));
    if (!m->io || !m->dyn || !m->segs)
        return base_diag_add(d, KILN_ERR_OOM, "out of memory loading the model (%d segments)", a->n_segments);
    for (int s = 0; s < a->n_segments; s++) {
        m->n_segs = s + 1; /* freed from here on, also when loading it fails */
        KILN_TRY(rt_segment_load(&a->segments[s], s, &m->segs[s], d));
    }
    return KILN_OK;
}

/* Target "cuda": the device side is rt_cuda.c's; the CUDA program runs
 * from the calling thread (n_threads does not apply). */
static kiln_status load_cuda(kiln_rt_model *m, base_diag *d)
{
    m->n_threads = 1;
    KILN_TRY(load_host_side(m, d));
    KILN_TRY(rt_gpu_load(&m->art, m->segs, &m->gpu, d));
    rt_artifact_forget_buffer(&m->art);
    return KILN_OK;
}

static kiln_status load(const void *buf, size_t n, base_file_map *map, int n_threads, kiln_rt_model *m,
                        base_diag *d)
{
    KILN_TRY(rt_artifact_read(buf, n, &m->art, d));
    const rt_artifact_desc *a = &m->art.desc;
    if (strcmp(a->target, "cuda") == 0) return load_cuda(m, d);
    if (strcmp(a->target, "c") != 0)
        return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                             "the artifact is for target '%s'; this runtime runs targets 'c' (CPU) and 'cuda'",
                             a->target);
    KILN_TRY(check_isa(a->isa, d));
    m->n_threads = n_threads ? n_threads : a->default_threads;

    /* Weights: in place when the file is mapped (sections are 64-byte
     * aligned in the file, the mapping page-aligned), else an aligned copy. */
    if (a->weight_bytes == 0) {
        m->weights = no_weights;
    } else if (map && map->mapped && (uintptr_t)a->weights % RT_ALIGN == 0) {
        m->weights = a->weights;
        m->map = *map;
        memset(map, 0, sizeof(*map));
    } else {
        uint8_t *w = rt_calloc_aligned(a->weight_bytes, &m->weights_raw);
        if (!w) return base_diag_add(d, KILN_ERR_OOM, "out of memory copying %zu bytes of weights", a->weight_bytes);
        memcpy(w, a->weights, a->weight_bytes);
        m->weights = w;
    }

    KILN_TRY(open_code(m, a->code, a->code_bytes, d));

    /* Scratch: the plan's or what the code asks for, whichever is more (the
     * code may only know its tile sizes once it runs on this machine). */
    m->arena = rt_calloc_aligned((size_t)a->arena_bytes, &m->arena_raw);
    m->scratch_stride = rt_align_up(KILN_MAX((size_t)a->scratch_bytes, m->prog->scratch_bytes));
    size_t scratch_total;
    if (!base_mul_ok(m->scratch_stride, (size_t)m->n_threads, &scratch_total)) scratch_total = SIZE_MAX;
    m->scratch = rt_calloc_aligned(scratch_total, &m->scratch_raw);
    m->ctx = base_calloc((size_t)m->n_threads, sizeof(kiln_cctx));
    m->packed = rt_calloc_aligned(m->prog->packed_bytes, &m->packed_raw);
    if (!m->arena || !m->scratch || !m->packed || !m->ctx)
        return base_diag_add(d, KILN_ERR_OOM,
                             "out of memory allocating the arena (%llu bytes), scratch (%zu bytes) and packed weights "
                             "(%zu bytes)", (unsigned long long)a->arena_bytes, scratch_total, m->prog->packed_bytes);
    if (m->prog->prepare) m->prog->prepare(m->weights, m->packed);
    KILN_TRY(load_host_side(m, d));

    KILN_TRY(rt_pool_init(&m->pool, m->n_threads, d));
    m->host.run_segment = host_run_segment;
    m->host.fail = host_fail;
    m->host.impl = m;
    for (int v = 0; v < m->n_threads; v++)
        m->ctx[v] = (kiln_cctx){.arena = m->arena, .weights = m->weights, .packed = m->packed, .io = m->io,
                                .scratch = m->scratch + (size_t)v * m->scratch_stride, .veu = v,
                                .n_veu = m->n_threads, .host = &m->host};
    rt_artifact_forget_buffer(&m->art);
    return KILN_OK;
}

static kiln_status load_and_report(const void *buf, size_t n, base_file_map *map, int n_threads,
                                   kiln_rt_model **out)
{
    if (!out) return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_load: out is NULL");
    *out = NULL;
    if (n_threads < 0 || n_threads > RT_MAX_THREADS)
        return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_load: thread count %d is not in 0..%d", n_threads,
                         RT_MAX_THREADS);
    kiln_rt_model *m = base_calloc(1, sizeof(*m));
    if (!m) return set_error(KILN_ERR_OOM, "kiln_rt_load: out of memory");
    m->code_fd = -1;
    pthread_mutex_init(&m->host_bufs_lock, NULL);
    base_diag d;
    base_diag_init(&d);
    kiln_status st = load(buf, n, map, n_threads, m, &d);
    if (st != KILN_OK) {
        set_error(st, "%s", d.n_msgs ? base_diag_text(&d) : kiln_status_name(st));
        kiln_rt_free(m);
    } else {
        *out = m;
    }
    base_diag_free(&d);
    return st;
}

kiln_status kiln_rt_load_buffer(const void *buf, size_t n, int n_threads, kiln_rt_model **out)
{
    if (!buf && n) return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_load_buffer: buf is NULL");
    return load_and_report(buf, n, NULL, n_threads, out);
}

kiln_status kiln_rt_load(const char *path, int n_threads, kiln_rt_model **out)
{
    if (!path) return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_load: path is NULL");
    base_file_map map;
    base_diag d;
    base_diag_init(&d);
    kiln_status st = base_file_map_open(path, &map, &d);
    if (st != KILN_OK) {
        set_error(st, "%s", base_diag_text(&d));
        base_diag_free(&d);
        if (out) *out = NULL;
        return st;
    }
    base_diag_free(&d);
    st = load_and_report(map.data, map.size, &map, n_threads, out);
    if (st != KILN_OK) {
        char msg[RUN_ERROR_BYTES];
        snprintf(msg, sizeof(msg), "%s", last_error);
        set_error(st, "%s: %s", path, msg);
    }
    base_file_map_close(&map); /* a no-op when the model took it */
    return st;
}

void kiln_rt_free(kiln_rt_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_host_bufs; i++) {
        if (m->gpu) rt_gpu_host_free(m->gpu, m->host_bufs[i].p);
        base_free(m->host_bufs[i].raw);
    }
    base_free(m->host_bufs);
    pthread_mutex_destroy(&m->host_bufs_lock);
    rt_gpu_free(m->gpu);
    rt_pool_free(m->pool);
    for (int s = 0; s < m->n_segs; s++) ir_model_free(m->segs[s].model);
    base_free(m->segs);
    if (m->dl) dlclose(m->dl);
    if (m->code_fd >= 0) close(m->code_fd);
    base_free(m->arena_raw);
    base_free(m->scratch_raw);
    base_free(m->weights_raw);
    base_free(m->packed_raw);
    base_free(m->ctx);
    base_free(m->io);
    for (int i = 0; m->dyn && i < m->art.desc.n_outputs; i++) ir_tensor_release(&m->dyn[i]);
    base_free(m->profile);
    base_free(m->dyn);
    base_file_map_close(&m->map);
    rt_artifact_free(&m->art);
    base_free(m);
}

/* ---- running ------------------------------------------------------------------------------------ */

/* Checks a run's arguments; `fn` names the public function in messages. */
static kiln_status check_run_args(const kiln_rt_model *m, const void *const *inputs, void *const *outputs,
                                  const char *fn)
{
    if (!m) return set_error(KILN_ERR_INVALID_ARG, "%s: model is NULL", fn);
    const rt_artifact_desc *a = &m->art.desc;
    if ((a->n_inputs && !inputs) || (a->n_outputs && !outputs))
        return set_error(KILN_ERR_INVALID_ARG, "%s: the %s array is NULL", fn, !inputs ? "inputs" : "outputs");
    for (int i = 0; i < a->n_inputs; i++)
        if (!inputs[i] && a->inputs[i].nbytes)
            return set_error(KILN_ERR_INVALID_ARG, "%s: input %d ('%s') is NULL", fn, i, a->inputs[i].name);
    for (int i = 0; i < a->n_outputs; i++)
        if (!outputs[i] && a->outputs[i].nbytes)
            return set_error(KILN_ERR_INVALID_ARG, "%s: output %d ('%s') is NULL", fn, i, a->outputs[i].name);
    return KILN_OK;
}

/* A run on the GPU, with host buffers or device pointers. */
static kiln_status run_gpu(kiln_rt_model *m, const void *const *inputs, void *const *outputs, bool device)
{
    const rt_artifact_desc *a = &m->art.desc;
    for (int i = 0; i < a->n_inputs; i++) m->io[i] = (void *)(uintptr_t)inputs[i];
    for (int i = 0; i < a->n_outputs; i++) m->io[a->n_inputs + i] = outputs[i];
    base_diag d;
    base_diag_init(&d);
    kiln_status st = rt_gpu_run(m->gpu, inputs, outputs, device, m->dyn, &d);
    if (st != KILN_OK) set_error(st, "%s", d.n_msgs ? base_diag_text(&d) : kiln_status_name(st));
    base_diag_free(&d);
    return st;
}

kiln_status kiln_rt_run(kiln_rt_model *m, const void *const *inputs, void *const *outputs)
{
    KILN_TRY(check_run_args(m, inputs, outputs, "kiln_rt_run"));
    const rt_artifact_desc *a = &m->art.desc;
    if (atomic_exchange(&m->running, true))
        return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_run: the model is already running (one run at a time)");
    kiln_status st = KILN_OK;
    if (m->gpu) {
        st = run_gpu(m, inputs, outputs, false);
    } else {
        for (int i = 0; i < a->n_inputs; i++) m->io[i] = (void *)(uintptr_t)inputs[i];
        for (int i = 0; i < a->n_outputs; i++) m->io[a->n_inputs + i] = outputs[i];
        atomic_store_explicit(&m->failed, 0, memory_order_relaxed);
        rt_pool_run(m->pool, m->prog->stages, m->prog->n_stages, m->ctx);
        if (atomic_load_explicit(&m->failed, memory_order_relaxed)) /* the pool's end of run orders the message */
            st = set_error(m->run_status, "%s", m->run_error);
    }
    m->ran = st == KILN_OK;
    atomic_store(&m->running, false);
    return st;
}

kiln_status kiln_rt_run_device(kiln_rt_model *m, const void *const *inputs, void *const *outputs)
{
    KILN_TRY(check_run_args(m, inputs, outputs, "kiln_rt_run_device"));
    if (!m->gpu)
        return set_error(KILN_ERR_UNSUPPORTED,
                         "kiln_rt_run_device: the model is for target '%s', which runs on host memory: use kiln_rt_run",
                         m->art.desc.target);
    /* the kernels move 16 bytes at a time (vector loads and stores, tensor copies) */
    const rt_artifact_desc *a = &m->art.desc;
    for (int i = 0; i < a->n_inputs + a->n_outputs; i++) {
        bool in = i < a->n_inputs;
        const void *p = in ? inputs[i] : outputs[i - a->n_inputs];
        if ((uintptr_t)p % 16)
            return set_error(KILN_ERR_INVALID_ARG,
                             "kiln_rt_run_device: the device pointer of %s '%s' is not 16-byte aligned (as cudaMalloc's "
                             "are)",
                             in ? "input" : "output", in ? a->inputs[i].name : a->outputs[i - a->n_inputs].name);
    }
    if (atomic_exchange(&m->running, true))
        return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_run_device: the model is already running (one run at a time)");
    kiln_status st = run_gpu(m, inputs, outputs, true);
    m->ran = st == KILN_OK;
    atomic_store(&m->running, false);
    return st;
}

const void *kiln_rt_result(const kiln_rt_model *m, int i, kiln_rt_tensor_info *info)
{
    if (!m || !m->ran || i < 0 || i >= m->art.desc.n_outputs) return NULL;
    const kiln_rt_tensor_info *sig = &m->art.desc.outputs[i];
    const ir_tensor *t = &m->dyn[i];
    if (t->data) {
        if (info) {
            *info = *sig;
            info->rank = t->rank;
            memcpy(info->dims, t->dims, sizeof(info->dims));
            info->nbytes = t->nbytes;
        }
        return t->data;
    }
    if (info) *info = *sig;
    return m->io[m->art.desc.n_inputs + i];
}

/* ---- information -------------------------------------------------------------------------------- */

int kiln_rt_num_inputs(const kiln_rt_model *m) { return m ? m->art.desc.n_inputs : 0; }
int kiln_rt_num_outputs(const kiln_rt_model *m) { return m ? m->art.desc.n_outputs : 0; }

const kiln_rt_tensor_info *kiln_rt_input(const kiln_rt_model *m, int i)
{
    return m && i >= 0 && i < m->art.desc.n_inputs ? &m->art.desc.inputs[i] : NULL;
}

const kiln_rt_tensor_info *kiln_rt_output(const kiln_rt_model *m, int i)
{
    return m && i >= 0 && i < m->art.desc.n_outputs ? &m->art.desc.outputs[i] : NULL;
}

size_t kiln_rt_arena_bytes(const kiln_rt_model *m) { return m ? (size_t)m->art.desc.arena_bytes : 0; }
size_t kiln_rt_weight_bytes(const kiln_rt_model *m) { return m ? m->art.desc.weight_bytes : 0; }
int kiln_rt_num_threads(const kiln_rt_model *m) { return m ? m->n_threads : 0; }

/* ---- profiling ------------------------------------------------------------------------------------ */

kiln_status kiln_rt_set_profiling(kiln_rt_model *m, int on)
{
    if (!m) return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_set_profiling: model is NULL");
    if (atomic_load(&m->running)) return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_set_profiling: a run is in progress");
    if (m->gpu) {
        base_diag d;
        base_diag_init(&d);
        kiln_status st = rt_gpu_set_profiling(m->gpu, on != 0, &d);
        if (st != KILN_OK) set_error(st, "kiln_rt_set_profiling: %s", base_diag_text(&d));
        base_diag_free(&d);
        return st;
    }
    if (on && !m->profile) {
        m->profile = base_calloc((size_t)m->prog->n_stages * 2 + 2, sizeof(uint64_t));
        if (!m->profile) return set_error(KILN_ERR_OOM, "kiln_rt_set_profiling: out of memory");
    } else if (on) {
        memset(m->profile, 0, ((size_t)m->prog->n_stages * 2 + 2) * sizeof(uint64_t));
    }
    rt_pool_set_profile(m->pool, on ? m->profile : NULL);
    return KILN_OK;
}

int kiln_rt_num_stages(const kiln_rt_model *m)
{
    if (!m) return 0;
    return m->gpu ? rt_gpu_num_stages(m->gpu) : m->prog->n_stages;
}

kiln_status kiln_rt_stage_profile(const kiln_rt_model *m, int stage, const char **name, int *n_rtasks, double *run_s,
                                  double *wait_s)
{
    if (!m || stage < 0 || stage >= kiln_rt_num_stages(m))
        return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_stage_profile: no stage %d", stage);
    if (m->gpu) {
        rt_gpu_stage(m->gpu, stage, name, n_rtasks, run_s);
        if (wait_s) *wait_s = 0;
        return KILN_OK;
    }
    const kiln_cstage *st = &m->prog->stages[stage];
    if (name) *name = st->name ? st->name : "";
    if (n_rtasks) *n_rtasks = st->n_rtasks;
    if (run_s) *run_s = m->profile ? (double)m->profile[2 * stage] * 1e-9 : 0;
    if (wait_s) *wait_s = m->profile ? (double)m->profile[2 * stage + 1] * 1e-9 : 0;
    return KILN_OK;
}

kiln_status kiln_rt_stage_timeline(const kiln_rt_model *m, int stage, double *start_s, double *end_s, double *busy_s,
                                   double *wait_s)
{
    if (!m || stage < 0 || stage >= kiln_rt_num_stages(m))
        return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_stage_timeline: no stage %d", stage);
    if (!m->gpu || !rt_gpu_stage_timeline(m->gpu, stage, start_s, end_s, busy_s, wait_s))
        return set_error(KILN_ERR_UNSUPPORTED, "kiln_rt_stage_timeline: stage %d is not a member of a persistent kernel",
                         stage);
    return KILN_OK;
}

/* ---- the CUDA target ---------------------------------------------------------------------------- */

const char *kiln_rt_target(const kiln_rt_model *m) { return m ? m->art.desc.target : NULL; }

const char *kiln_rt_precision(const kiln_rt_model *m) { return m && m->gpu ? rt_gpu_precision(m->gpu) : NULL; }

void *kiln_rt_host_alloc(kiln_rt_model *m, size_t bytes)
{
    if (!m) {
        set_error(KILN_ERR_INVALID_ARG, "kiln_rt_host_alloc: model is NULL");
        return NULL;
    }
    void *p = NULL, *raw = NULL;
    if (m->gpu) {
        base_diag d;
        base_diag_init(&d);
        kiln_status st = rt_gpu_host_alloc(m->gpu, bytes, &p, &d);
        if (st != KILN_OK) set_error(st, "kiln_rt_host_alloc: %s", base_diag_text(&d));
        base_diag_free(&d);
        if (st != KILN_OK) return NULL;
    } else {
        p = rt_calloc_aligned(bytes ? bytes : 1, &raw);
        if (!p) {
            set_error(KILN_ERR_OOM, "kiln_rt_host_alloc: out of memory for %zu bytes", bytes);
            return NULL;
        }
    }
    /* the list only under the lock: allocations may take milliseconds */
    pthread_mutex_lock(&m->host_bufs_lock);
    bool listed = m->n_host_bufs < m->cap_host_bufs;
    if (!listed) {
        int cap = m->cap_host_bufs ? 2 * m->cap_host_bufs : 8;
        struct host_buf *b = base_realloc(m->host_bufs, (size_t)cap * sizeof(*b));
        if (b) {
            m->host_bufs = b;
            m->cap_host_bufs = cap;
            listed = true;
        }
    }
    if (listed) m->host_bufs[m->n_host_bufs++] = (struct host_buf){p, raw};
    pthread_mutex_unlock(&m->host_bufs_lock);
    if (listed) return p;
    if (m->gpu) rt_gpu_host_free(m->gpu, p);
    base_free(raw);
    set_error(KILN_ERR_OOM, "kiln_rt_host_alloc: out of memory");
    return NULL;
}

kiln_status kiln_rt_host_free(kiln_rt_model *m, void *p)
{
    if (!p) return KILN_OK;
    if (!m) return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_host_free: model is NULL");
    pthread_mutex_lock(&m->host_bufs_lock);
    int i = 0;
    while (i < m->n_host_bufs && m->host_bufs[i].p != p) i++;
    struct host_buf b = {0};
    bool found = i < m->n_host_bufs;
    if (found) {
        b = m->host_bufs[i];
        m->host_bufs[i] = m->host_bufs[--m->n_host_bufs];
    }
    pthread_mutex_unlock(&m->host_bufs_lock);
    if (!found)
        return set_error(KILN_ERR_INVALID_ARG,
                         "kiln_rt_host_free: %p was not allocated by kiln_rt_host_alloc on this model, or was freed "
                         "already", p);
    if (m->gpu) rt_gpu_host_free(m->gpu, b.p);
    base_free(b.raw);
    return KILN_OK;
}

kiln_status kiln_rt_num_launches(const kiln_rt_model *m, int *kernels, int *graphs)
{
    if (kernels) *kernels = 0;
    if (graphs) *graphs = 0;
    if (!m) return set_error(KILN_ERR_INVALID_ARG, "kiln_rt_num_launches: model is NULL");
    if (m->gpu) rt_gpu_num_launches(m->gpu, kernels, graphs);
    return KILN_OK;
}
