/*
 * rt_cuda.c: the runtime of `.kiln` artifacts of target "cuda" (rt.c
 * dispatches here; the program's format is gprog.h).
 *
 * Loading does every check and every allocation a run needs, once: the
 * CUDA program is decoded and checked against the artifact before any
 * device is touched, then the device ($KILN_DEVICE, else 0) is opened, the
 * image for its compute capability loaded, every kernel looked up (with the
 * dynamic shared memory limit raised where a launch needs more than 48 KB),
 * and ONE device arena, the weights (uploaded once), a buffer per model
 * input and output, the io pointer array, the kernels' context (kiln_gctx),
 * the fault words (mapped host memory the host reads without a copy) and
 * a ring of page-locked staging slots for host outputs are allocated.
 *
 * The program is a list of launches cut by host segments into pieces: a
 * piece of kernels becomes one CUDA graph, recorded at the first run, so a
 * run without segments is: clear the fault words, copy the inputs in, one
 * graph launch, copy the outputs out, one stream synchronisation. Host
 * outputs bound for pageable memory come through a small ring of
 * page-locked staging slots (allocated at load), each slot copied out on
 * the host, once its event is done, while the next cross the bus (the
 * driver's own copy into pageable memory is slower); outputs bound for
 * page-locked memory (kiln_rt_host_alloc's) are copied into directly. A host
 * segment waits for the stream, copies its inputs from the device into
 * host mirrors of the arena and the io tensors (same offsets; the weights
 * are kept on the host where a segment reads them), runs the reference
 * interpreter (rt.c's rt_segment_exec) and copies its outputs back. Under
 * --precision fp16/bf16 the float32 values of the arena and the weights
 * hold 16-bit elements; segments convert them to float32 and back.
 *
 * With profiling on, kernels are launched one by one between CUDA events
 * and each launch's time is kept (a profile stage is a launch).
 *
 * Errors: a kernel that meets bad data records a fault (kg_fault) and the
 * run fails naming the group; a kernel that crashes (an illegal address)
 * fails the synchronisation with the driver's message, and since that
 * loses the CUDA context for the whole process, later runs fail at once
 * with the same message instead of calling the driver.
 */
#include "runtime/cuda.h"
#include "runtime/gprog.h"
#include "runtime/rt-impl.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SMEM_DEFAULT_BYTES (48 * 1024) /* dynamic shared memory a kernel gets without opting in */
#define MESSAGE_BYTES 1024

/* A stretch of the program: one host segment, or the kernel launches
 * between two segments, replayed as one CUDA graph. */
typedef struct piece {
    int first, n;        /* launches first .. first + n - 1 */
    bool segment;
    rt_cuda_graph graph; /* kernels: recorded at the first run without profiling */
} piece;

/* A member of a persistent kernel, as its rTasks record themselves while
 * profiling. The times are summed over the profiled runs: start and end of
 * its work after the kernel's first member began, its run time (how far
 * it moved the latest end of work of the members before it: the kernel's
 * time shared out so that it adds up), and its rTasks' work and waits. */
typedef struct prof_slot {
    int launch;                /* -1: the program does not launch its kernel */
    int n_rtasks;
    const char *name;
    double run_s, start_s, end_s, busy_s, wait_s;
} prof_slot;

typedef struct stage_ref {
    int launch, slot;          /* slot -1: the whole launch */
} stage_ref;

/* Staging for host outputs bound for pageable memory: a ring of up to
 * STAGE_SLOTS page-locked slots. A slot is filled by the copies of pieces of
 * one or more outputs, then an event; the host copies its pieces out once
 * the event is done, before the slot is filled again. A piece: n bytes at
 * `at` in its slot, for dst in the caller's buffer. */
typedef struct stage_piece {
    uint8_t *dst;
    size_t at, n;
    int output;
} stage_piece;

typedef struct stage_slot {
    CUevent ev;
    stage_piece *pieces; /* at most one per output */
    int n_pieces;
    bool pending;        /* copies enqueued, not yet handed out */
} stage_slot;

/* Slots large enough that each copy runs at the bus's speed, and a ring
 * small enough that a model with large outputs pins little memory (at most
 * STAGE_SLOTS x SLOT_MAX_BYTES). */
#define STAGE_SLOTS 8
#define SLOT_MIN_BYTES (64 * 1024)
#define SLOT_MAX_BYTES (1024 * 1024)

struct rt_gpu {
    const rt_artifact_desc *a; /* borrowed from the model */
    const rt_segment *segs;    /* borrowed: the artifact's segments, parsed */
    rt_gprog prog;             /* strings owned; image pointers dropped after loading */
    const rt_cuda_api *cu;

    rt_cuda_ctx ctx;           /* the device's primary context; ctx.ctx NULL until opened */
    CUstream stream;
    CUmodule module;
    CUfunction *fns;           /* per launch; NULL for segments */
    int n_kernels;

    CUdeviceptr arena, weights, io_array, gctx;
    int n_io;                  /* model inputs + outputs */
    CUdeviceptr *io_own;       /* per io tensor: the runtime's buffer (0: the tensor has no bytes) */
    CUdeviceptr *io_cur;       /* what the device io array holds: io_own, or the last device run's pointers */
    bool io_cur_is_own;
    rt_cuda_memory *io_memory; /* host runs: what each io buffer is (start_run) */
    void *fail_host;           /* KILN_GFAIL_WORDS unsigned (gprog.h); mapped into the device */
    volatile unsigned *fail;
    CUdeviceptr fail_dev;

    uint8_t *stage;            /* page-locked: n_ring slots of slot_bytes; NULL: outputs copied directly */
    size_t slot_bytes;
    stage_slot ring[STAGE_SLOTS];
    int n_ring;

    piece *pieces;
    int n_pieces, n_graphs;
    bool graphs_ready;

    uint8_t *host_arena;       /* the arena's mirror (same offsets); NULL without segments */
    uint8_t *host_weights;     /* the weights segments read (others left zero); NULL when none do */
    uint8_t **host_io;         /* per io tensor a segment binds: its mirror */

    bool profiling;
    CUevent *events;           /* 2 per launch (before, after); NULL for segments */
    double *prof_s;            /* per launch: seconds summed over profiled runs */

    /* the in-kernel profile of persistent kernels (kg.h, kg_prof_rtask) */
    prof_slot *slots;          /* per line of the module's kg_prof_slots */
    int n_slots;
    char *slot_text;           /* kg_prof_slots' text: the slots' names point into it */
    stage_ref *stages;         /* the profile's stages: the launches, a persistent kernel's slots in its place */
    int n_stages;
    CUdeviceptr prof_dev;      /* 4 words a slot, while profiling */
    uint64_t *prof_words;      /* their host copy */

    kiln_status broken;        /* not KILN_OK: the CUDA context was lost in an earlier run */
    char broken_msg[MESSAGE_BYTES];
};

/* ---- small helpers ------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Device memory for `what`; out of memory names it and its size. */
static kiln_status dev_alloc(size_t bytes, const char *what, CUdeviceptr *out, base_diag *d)
{
    base_diag sub;
    base_diag_init(&sub);
    /* cuMemAlloc refuses 0 bytes; an empty arena or weight blob gets a token allocation */
    kiln_status st = rt_cuda_alloc(bytes ? bytes : 256, out, &sub);
    if (st != KILN_OK) /* the first message is the driver's; the wrapper's size line is said here */
        st = base_diag_add(d, st, "cannot allocate %s (%zu bytes, %.2f GiB) on the GPU: %s", what, bytes,
                           (double)bytes / (1024.0 * 1024.0 * 1024.0), sub.n_msgs ? sub.msgs[0] : "");
    base_diag_free(&sub);
    return st;
}

static const char *launch_label(const rt_gpu *g, unsigned k)
{
    return k < (unsigned)g->prog.n_launches ? g->prog.launches[k].label : "?";
}

/* Whether a binding's bytes hold 16-bit floats standing for float32. */
/* Whether a segment's binding holds 16-bit floats: under fp16/bf16 the cuda
 * target stores every float32 arena and weights value in 16 bits
 * (plan_storage in target/cuda/emit.c); segments see float32. */
static bool stored_16bit(const rt_gpu *g, const rt_binding *b)
{
    return g->prog.precision != KILN_GPREC_FP32 && b->dtype == KILN_F32 &&
           (b->kind == RT_BIND_ARENA || b->kind == RT_BIND_WEIGHTS);
}

/* The bytes a binding occupies where it is stored. */
static size_t stored_bytes(const rt_gpu *g, const rt_binding *b)
{
    ir_tensor t;
    rt_binding_type(b, &t);
    return stored_16bit(g, b) ? t.nbytes / 2 : t.nbytes;
}

static uint8_t *host_address(const rt_gpu *g, const rt_binding *b)
{
    uint8_t *base = NULL;
    switch (b->kind) {
    case RT_BIND_ARENA: base = g->host_arena; break;
    case RT_BIND_WEIGHTS: base = g->host_weights; break;
    case RT_BIND_INPUT: base = g->host_io[b->io]; break;
    case RT_BIND_OUTPUT: base = g->host_io[g->a->n_inputs + b->io]; break;
    default: KILN_ASSERT(!"binding kind checked by the reader");
    }
    return base ? base + b->offset : NULL;
}

static CUdeviceptr dev_address(const rt_gpu *g, const rt_binding *b)
{
    CUdeviceptr base = 0;
    switch (b->kind) {
    case RT_BIND_ARENA: base = g->arena; break;
    case RT_BIND_WEIGHTS: base = g->weights; break;
    case RT_BIND_INPUT: base = g->io_cur[b->io]; break;
    case RT_BIND_OUTPUT: base = g->io_cur[g->a->n_inputs + b->io]; break;
    default: KILN_ASSERT(!"binding kind checked by the reader");
    }
    return base ? base + b->offset : 0;
}

/* ---- errors during a run ----------------------------------------------------- */

/* The errors a kernel leaves behind that lose the CUDA context for the
 * whole process ("the process must be terminated and relaunched"). */
static bool error_is_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case 702: /* CUDA_ERROR_LAUNCH_TIMEOUT */
    case 710: /* CUDA_ERROR_ASSERT */
    case 714: /* CUDA_ERROR_HARDWARE_STACK_ERROR */
    case 715: /* CUDA_ERROR_ILLEGAL_INSTRUCTION */
    case 716: /* CUDA_ERROR_MISALIGNED_ADDRESS */
    case 717: /* CUDA_ERROR_INVALID_ADDRESS_SPACE */
    case 718: /* CUDA_ERROR_INVALID_PC */
    case CUDA_ERROR_LAUNCH_FAILED: return true;
    default: return false;
    }
}

/* Waits for the stream. A failure here is a kernel that crashed; when it
 * lost the context, the model refuses further runs. `what` names the
 * launches that ran since the last wait. */
static kiln_status sync_stream(rt_gpu *g, const char *what, base_diag *d)
{
    CUresult r = g->cu->cuStreamSynchronize(g->stream);
    if (r == CUDA_SUCCESS) return KILN_OK;
    base_diag sub;
    base_diag_init(&sub);
    kiln_status st = rt_cuda_check(r, "cuStreamSynchronize", __FILE__, __LINE__, &sub);
    char msg[MESSAGE_BYTES];
    snprintf(msg, sizeof(msg), "%s failed on the GPU: %s", what, base_diag_text(&sub));
    base_diag_free(&sub);
    if (error_is_sticky(r)) {
        g->broken = st;
        snprintf(g->broken_msg, sizeof(g->broken_msg), "%s", msg);
    }
    return base_diag_add(d, st, "%s", msg);
}

/* The first fault a kernel recorded in this run, as an error. */
static kiln_status check_fault(const rt_gpu *g, base_diag *d)
{
    unsigned code = g->fail[0], launch = g->fail[1];
    if (code == KILN_GFAULT_NONE) return KILN_OK;
    const char *label = launch_label(g, launch);
    switch (code) {
    case KILN_GFAULT_INDEX:
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "group '%s' (launch %u): index out of range", label, launch);
    case KILN_GFAULT_VALUE:
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "group '%s' (launch %u): a value the operator does not accept",
                             label, launch);
    case KILN_GFAULT_TIMEOUT:
        return base_diag_add(d, KILN_ERR_INTERNAL,
                             "launch %u ('%s'): the wait after stage %u (a grid barrier or completion counters) "
                             "timed out in block %u (a vEU waited longer than the watchdog allows; the GPU was "
                             "left running nothing)",
                             launch, label, g->fail[2], g->fail[3]);
    default:
        return base_diag_add(d, KILN_ERR_INTERNAL, "group '%s' (launch %u): unknown fault code %u", label, launch,
                             code);
    }
}

/* Names launches first .. last for messages: "launch 3 ('conv1')" or
 * "launches 3..9 ('conv1' .. 'fc')". */
static void describe_launches(const rt_gpu *g, int first, int last, char *buf, size_t n)
{
    if (first == last)
        snprintf(buf, n, "launch %d ('%s')", first, launch_label(g, (unsigned)first));
    else
        snprintf(buf, n, "launches %d..%d ('%s' .. '%s')", first, last, launch_label(g, (unsigned)first),
                 launch_label(g, (unsigned)last));
}

/* ---- launching ------------------------------------------------------------------ */

static kiln_status launch_kernel(rt_gpu *g, int k, base_diag *d)
{
    const rt_glaunch *l = &g->prog.launches[k];
    void *args[] = {&g->gctx};
    base_diag sub;
    base_diag_init(&sub);
    /* profiled launches go one after another, so that each one's time is its own */
    bool early = l->early && !g->profiling;
    kiln_status st = rt_cuda_launch_ex(g->fns[k], l->grid, l->block, l->smem, g->stream, args, early, &sub);
    if (st != KILN_OK)
        st = base_diag_add(d, st, "launch %d ('%s', kernel %s): %s", k, l->label, l->name, base_diag_text(&sub));
    base_diag_free(&sub);
    return st;
}

/* Records each piece of kernels into a CUDA graph. */
static kiln_status record_graphs(rt_gpu *g, base_diag *d)
{
    for (int p = 0; p < g->n_pieces; p++) {
        piece *pc = &g->pieces[p];
        if (pc->segment) continue;
        kiln_status st = rt_cuda_graph_begin(g->stream, d);
        for (int k = pc->first; st == KILN_OK && k < pc->first + pc->n; k++) st = launch_kernel(g, k, d);
        /* end the capture even after a failed launch, or the stream stays capturing */
        kiln_status end = rt_cuda_graph_end(g->stream, &pc->graph, st == KILN_OK ? d : NULL);
        if (st == KILN_OK) st = end;
        if (st != KILN_OK) {
            for (int q = 0; q <= p; q++) rt_cuda_graph_free(&g->pieces[q].graph);
            return st;
        }
    }
    g->graphs_ready = true;
    return KILN_OK;
}

/* Runs the host segment of launch k: its inputs come from the device
 * (or the weights kept on the host), its outputs go back to the device or,
 * for model outputs of data-dependent shape, into dyn. */
static kiln_status run_segment(rt_gpu *g, int k, ir_tensor *dyn, base_diag *d)
{
    int s = g->prog.launches[k].segment;
    const rt_segment *seg = &g->segs[s];
    const rt_segment_desc *sd = seg->desc;
    const char *label = g->prog.launches[k].label;
    ir_tensor *ts = base_calloc((size_t)sd->n_in + (size_t)sd->n_out + 1, sizeof(ir_tensor));
    void **tmp = base_calloc((size_t)sd->n_in + 1, sizeof(void *)); /* float32 copies of 16-bit inputs */
    if (!ts || !tmp) {
        base_free(ts);
        base_free(tmp);
        return base_diag_add(d, KILN_ERR_OOM, "group '%s' (launch %d): out of memory running segment %d", label, k, s);
    }
    ir_tensor *in = ts, *out = ts + sd->n_in;
    kiln_status st = KILN_OK;

    for (int i = 0; st == KILN_OK && i < sd->n_in; i++) {
        const rt_binding *b = &sd->in[i];
        size_t bytes = stored_bytes(g, b);
        if (b->kind != RT_BIND_WEIGHTS && bytes)
            st = rt_cuda_copy_to_host_async(host_address(g, b), dev_address(g, b), bytes, g->stream, d);
    }
    char what[256];
    snprintf(what, sizeof(what), "copying the inputs of segment %d (launch %d, '%s')", s, k, label);
    if (st == KILN_OK) st = sync_stream(g, what, d);
    for (int i = 0; st == KILN_OK && i < sd->n_in; i++) {
        const rt_binding *b = &sd->in[i];
        rt_binding_type(b, &in[i]);
        in[i].data = host_address(g, b);
        if (!stored_16bit(g, b) || !in[i].nbytes) continue;
        float *f = base_malloc(in[i].nbytes);
        if (!f) {
            st = base_diag_add(d, KILN_ERR_OOM, "group '%s' (launch %d): out of memory converting %zu bytes", label,
                               k, in[i].nbytes);
            break;
        }
        const uint16_t *h = in[i].data;
        size_t n = in[i].nbytes / sizeof(float);
        for (size_t e = 0; e < n; e++)
            f[e] = g->prog.precision == KILN_GPREC_FP16 ? base_f16_to_f32(h[e]) : base_bf16_to_f32(h[e]);
        tmp[i] = f;
        in[i].data = f;
    }

    char err[MESSAGE_BYTES];
    if (st == KILN_OK) {
        st = rt_segment_exec(seg, s, in, out, dyn, err, sizeof(err));
        if (st != KILN_OK) st = base_diag_add(d, st, "group '%s' (launch %d): %s", label, k, err);
    }
    for (int i = 0; st == KILN_OK && i < sd->n_out; i++) {
        const rt_binding *b = &sd->out[i];
        if (!out[i].nbytes) continue; /* moved into dyn, or empty */
        uint8_t *h = host_address(g, b);
        size_t bytes = out[i].nbytes;
        if (stored_16bit(g, b)) {
            const float *f = out[i].data;
            uint16_t *dst = (uint16_t *)h;
            size_t n = bytes / sizeof(float);
            for (size_t e = 0; e < n; e++)
                dst[e] = g->prog.precision == KILN_GPREC_FP16 ? base_f32_to_f16(f[e]) : base_f32_to_bf16(f[e]);
            bytes /= 2;
        } else {
            memcpy(h, out[i].data, bytes);
        }
        /* from pageable memory: staged before the call returns, ordered before later kernels */
        st = rt_cuda_copy_to_device_async(dev_address(g, b), h, bytes, g->stream, d);
    }
    for (int i = 0; i < sd->n_out; i++) ir_tensor_release(&out[i]);
    for (int i = 0; i < sd->n_in; i++) base_free(tmp[i]);
    base_free(tmp);
    base_free(ts);
    return st;
}

/* Kernel launches first .. first + n - 1 one by one, between events. */
static kiln_status launch_profiled(rt_gpu *g, int first, int n, base_diag *d)
{
    for (int k = first; k < first + n; k++) {
        KILN_TRY(rt_cuda_event_record(g->events[2 * k], g->stream, d));
        KILN_TRY(launch_kernel(g, k, d));
        KILN_TRY(rt_cuda_event_record(g->events[2 * k + 1], g->stream, d));
    }
    return KILN_OK;
}

static kiln_status run_pieces(rt_gpu *g, ir_tensor *dyn, base_diag *d)
{
    for (int p = 0; p < g->n_pieces; p++) {
        const piece *pc = &g->pieces[p];
        if (!pc->segment) {
            if (g->profiling) KILN_TRY(launch_profiled(g, pc->first, pc->n, d));
            else KILN_TRY(rt_cuda_graph_launch(&pc->graph, g->stream, d));
            continue;
        }
        /* the kernels before it must be done, and must not have faulted */
        char what[256];
        if (p > 0) {
            describe_launches(g, g->pieces[p - 1].first, pc->first - 1, what, sizeof(what));
            KILN_TRY(sync_stream(g, what, d));
            KILN_TRY(check_fault(g, d));
        }
        double t0 = now_s();
        KILN_TRY(run_segment(g, pc->first, dyn, d));
        if (g->profiling) {
            describe_launches(g, pc->first, pc->first, what, sizeof(what));
            KILN_TRY(sync_stream(g, what, d));
            g->prof_s[pc->first] += now_s() - t0;
        }
    }
    return KILN_OK;
}

/* Points the device io array at the runtime's buffers (host runs) or the
 * caller's device pointers (device runs), and copies host inputs in. */
static kiln_status start_run(rt_gpu *g, const void *const *inputs, void *const *outputs, bool device, base_diag *d)
{
    const rt_artifact_desc *a = g->a;
    bool repoint = device || !g->io_cur_is_own;
    if (device) {
        for (int i = 0; i < a->n_inputs; i++) g->io_cur[i] = (CUdeviceptr)(uintptr_t)inputs[i];
        for (int i = 0; i < a->n_outputs; i++) g->io_cur[a->n_inputs + i] = (CUdeviceptr)(uintptr_t)outputs[i];
    } else {
        memcpy(g->io_cur, g->io_own, (size_t)g->n_io * sizeof(CUdeviceptr));
    }
    g->io_cur_is_own = !device;
    /* from pageable memory: staged before the call returns, so io_cur may change after */
    if (repoint && g->n_io)
        KILN_TRY(rt_cuda_copy_to_device_async(g->io_array, g->io_cur, (size_t)g->n_io * sizeof(CUdeviceptr),
                                              g->stream, d));
    /* host buffers: what each is, before anything runs */
    for (int i = 0; !device && i < g->n_io; i++) {
        bool in = i < a->n_inputs;
        const kiln_rt_tensor_info *t = in ? &a->inputs[i] : &a->outputs[i - a->n_inputs];
        g->io_memory[i] = t->nbytes ? rt_cuda_memory_of(in ? inputs[i] : outputs[i - a->n_inputs]) : RT_CUDA_PAGEABLE;
        if (g->io_memory[i] == RT_CUDA_DEVICE_MEMORY)
            return base_diag_add(d, KILN_ERR_INVALID_ARG,
                                 "%s %d ('%s') points at device memory: kiln_rt_run takes host buffers (for device "
                                 "pointers, kiln_rt_run_device)", in ? "input" : "output", in ? i : i - a->n_inputs,
                                 t->name);
    }
    for (int i = 0; !device && i < a->n_inputs; i++)
        if (a->inputs[i].nbytes)
            KILN_TRY(rt_cuda_copy_to_device_async(g->io_own[i], inputs[i], a->inputs[i].nbytes, g->stream, d));
    return KILN_OK;
}

/* "copying output i ('name') after <the last launches>: <sub>" */
static kiln_status output_copy_failed(rt_gpu *g, int i, kiln_status st, base_diag *sub, base_diag *d)
{
    char what[256];
    int last = g->n_pieces ? g->pieces[g->n_pieces - 1].first : 0;
    describe_launches(g, last, g->prog.n_launches - 1, what, sizeof(what));
    return base_diag_add(d, st, "copying output %d ('%s') after %s: %s", i, g->a->outputs[i].name, what,
                         base_diag_text(sub));
}

/* Waits for a filled slot's copies and hands its pieces to the caller's
 * buffers. */
static kiln_status drain_slot(rt_gpu *g, int k, base_diag *d)
{
    stage_slot *s = &g->ring[k];
    if (!s->pending) return KILN_OK;
    s->pending = false;
    base_diag sub;
    base_diag_init(&sub);
    kiln_status st = rt_cuda_event_sync(s->ev, &sub);
    if (st != KILN_OK) st = output_copy_failed(g, s->pieces[0].output, st, &sub, d);
    base_diag_free(&sub);
    KILN_TRY(st);
    for (int i = 0; i < s->n_pieces; i++)
        memcpy(s->pieces[i].dst, g->stage + (size_t)k * g->slot_bytes + s->pieces[i].at, s->pieces[i].n);
    s->n_pieces = 0;
    return KILN_OK;
}

/* Ends the filling of slot *cur: an event after its copies, then the next
 * slot. */
static kiln_status close_slot(rt_gpu *g, int *cur, size_t *fill, base_diag *d)
{
    stage_slot *s = &g->ring[*cur];
    kiln_status st = rt_cuda_event_record(s->ev, g->stream, d);
    s->pending = st == KILN_OK;
    *cur = (*cur + 1) % g->n_ring;
    *fill = 0;
    return st;
}

/* Output i (bytes from src) into the pageable buffer dst through the
 * staging ring: *cur is the slot being filled, *fill its bytes so far. */
static kiln_status stage_output(rt_gpu *g, int i, uint8_t *dst, CUdeviceptr src, size_t bytes, int *cur,
                                size_t *fill, base_diag *d)
{
    for (size_t off = 0; off < bytes;) {
        stage_slot *s = &g->ring[*cur];
        if (*fill == 0) KILN_TRY(drain_slot(g, *cur, d)); /* its last lap's pieces */
        size_t n = KILN_MIN(bytes - off, g->slot_bytes - *fill);
        base_diag sub;
        base_diag_init(&sub);
        kiln_status st = rt_cuda_copy_to_host_async(g->stage + (size_t)*cur * g->slot_bytes + *fill, src + off, n,
                                                    g->stream, &sub);
        s->pieces[s->n_pieces++] = (stage_piece){.dst = dst + off, .at = *fill, .n = n, .output = i};
        *fill += n;
        off += n;
        if (st == KILN_OK && *fill == g->slot_bytes) st = close_slot(g, cur, fill, &sub);
        if (st != KILN_OK) st = output_copy_failed(g, i, st, &sub, d);
        base_diag_free(&sub);
        KILN_TRY(st);
    }
    return KILN_OK;
}

/* Copies the host outputs out: into page-locked buffers directly, into
 * pageable ones through the staging ring, each slot handed out as soon as
 * its copies are done, while the next cross the bus. The copies wait for the
 * kernels before them, so a crashed kernel shows here first. */
static kiln_status finish_run(rt_gpu *g, void *const *outputs, bool device, base_diag *d)
{
    const rt_artifact_desc *a = g->a;
    int cur = 0;
    size_t fill = 0;
    for (int k = 0; k < g->n_ring; k++) {
        g->ring[k].pending = false;
        g->ring[k].n_pieces = 0;
    }
    for (int i = 0; !device && i < a->n_outputs; i++) {
        size_t bytes = a->outputs[i].nbytes;
        if (!bytes) continue;
        CUdeviceptr src = g->io_own[a->n_inputs + i];
        if (g->stage && g->io_memory[a->n_inputs + i] == RT_CUDA_PAGEABLE) {
            KILN_TRY(stage_output(g, i, outputs[i], src, bytes, &cur, &fill, d));
            continue;
        }
        base_diag sub;
        base_diag_init(&sub);
        kiln_status st = rt_cuda_copy_to_host_async(outputs[i], src, bytes, g->stream, &sub);
        if (st != KILN_OK) st = output_copy_failed(g, i, st, &sub, d);
        base_diag_free(&sub);
        KILN_TRY(st);
    }
    if (fill > 0) { /* the last slot, part full */
        base_diag sub;
        base_diag_init(&sub);
        const stage_slot *s = &g->ring[cur];
        int last = s->pieces[s->n_pieces - 1].output;
        kiln_status st = close_slot(g, &cur, &fill, &sub);
        if (st != KILN_OK) st = output_copy_failed(g, last, st, &sub, d);
        base_diag_free(&sub);
        KILN_TRY(st);
    }
    for (int k = 0; k < g->n_ring; k++) KILN_TRY(drain_slot(g, (cur + k) % g->n_ring, d)); /* oldest first */
    return KILN_OK;
}

/* Adds the run's slot words to the slots, a persistent kernel's slots
 * (consecutive, in program order) measured from its first member's start. */
static void add_slot_times(rt_gpu *g)
{
    const uint64_t *w = g->prof_words;
    for (int i = 0, j; i < g->n_slots; i = j) {
        for (j = i; j < g->n_slots && g->slots[j].launch == g->slots[i].launch;) j++;
        uint64_t start = UINT64_MAX;
        for (int s = i; s < j; s++)
            if (w[4 * s] && ~w[4 * s] < start) start = ~w[4 * s];
        if (g->slots[i].launch < 0 || start == UINT64_MAX) continue;
        uint64_t frontier = start;
        for (int s = i; s < j; s++) {
            prof_slot *sl = &g->slots[s];
            if (!w[4 * s]) continue; /* no rTask ran */
            uint64_t first = ~w[4 * s], last = w[4 * s + 1];
            sl->start_s += (double)(first - start) * 1e-9;
            sl->end_s += (double)(last - start) * 1e-9;
            if (last > frontier) {
                sl->run_s += (double)(last - frontier) * 1e-9;
                frontier = last;
            }
            sl->busy_s += (double)w[4 * s + 2] * 1e-9;
            sl->wait_s += (double)w[4 * s + 3] * 1e-9;
        }
    }
}

/* Adds the profiled runs' kernel times (the events are complete) and the
 * persistent kernels' slot times. */
static kiln_status collect_profile(rt_gpu *g, base_diag *d)
{
    if (g->prof_dev) {
        KILN_TRY(rt_cuda_copy_to_host(g->prof_words, g->prof_dev, (size_t)g->n_slots * 4 * sizeof(uint64_t), d));
        add_slot_times(g);
    }
    for (int k = 0; k < g->prog.n_launches; k++) {
        if (!g->fns[k]) continue;
        float ms;
        KILN_TRY(rt_cuda_event_elapsed(g->events[2 * k], g->events[2 * k + 1], &ms, d));
        g->prof_s[k] += (double)ms * 1e-3;
    }
    return KILN_OK;
}

kiln_status rt_gpu_host_alloc(rt_gpu *g, size_t bytes, void **out, base_diag *d)
{
    *out = NULL;
    if (g->broken != KILN_OK)
        return base_diag_add(d, g->broken, "the GPU cannot be used by this model after an earlier failure: %s",
                             g->broken_msg);
    KILN_TRY(rt_cuda_ctx_bind(&g->ctx, d));
    base_diag sub;
    base_diag_init(&sub);
    kiln_status st = rt_cuda_host_alloc(bytes, out, &sub);
    if (st != KILN_OK)
        st = base_diag_add(d, st, "cannot allocate %zu bytes of page-locked host memory: %s", bytes,
                           base_diag_text(&sub));
    base_diag_free(&sub);
    return st;
}

void rt_gpu_host_free(rt_gpu *g, void *p)
{
    if (!p) return;
    rt_cuda_ctx_bind(&g->ctx, NULL);
    rt_cuda_host_free(p);
}

kiln_status rt_gpu_run(rt_gpu *g, const void *const *inputs, void *const *outputs, bool device, ir_tensor *dyn,
                       base_diag *d)
{
    if (g->broken != KILN_OK)
        return base_diag_add(d, g->broken,
                             "the GPU cannot run this model again in this process after an earlier failure: %s",
                             g->broken_msg);
    KILN_TRY(rt_cuda_ctx_bind(&g->ctx, d));
    if (!g->profiling && !g->graphs_ready) KILN_TRY(record_graphs(g, d));

    for (int i = 0; i < KILN_GFAIL_WORDS; i++) g->fail[i] = 0;
    atomic_thread_fence(memory_order_seq_cst); /* cleared before the first launch is enqueued */

    kiln_status st = start_run(g, inputs, outputs, device, d);
    if (st == KILN_OK && g->profiling && g->prof_dev) {
        size_t bytes = (size_t)g->n_slots * 4 * sizeof(uint64_t);
        memset(g->prof_words, 0, bytes);
        st = rt_cuda_copy_to_device_async(g->prof_dev, g->prof_words, bytes, g->stream, d);
    }
    if (st == KILN_OK) st = run_pieces(g, dyn, d);
    if (st == KILN_OK) st = finish_run(g, outputs, device, d);
    /* wait also after a failure: nothing of this run may still be running
     * when the caller reuses its buffers */
    char what[256];
    int last = g->n_pieces ? g->pieces[g->n_pieces - 1].first : 0;
    describe_launches(g, last, g->prog.n_launches ? g->prog.n_launches - 1 : 0, what, sizeof(what));
    kiln_status sync = sync_stream(g, what, st == KILN_OK ? d : NULL);
    if (st == KILN_OK) st = sync;
    if (st == KILN_OK || sync == KILN_OK) {
        /* a fault explains whatever else went wrong after it */
        base_diag fault;
        base_diag_init(&fault);
        kiln_status fst = check_fault(g, &fault);
        if (fst != KILN_OK) {
            base_diag_clear(d);
            st = base_diag_add(d, fst, "%s", base_diag_text(&fault));
            /* a barrier that gave up leaves its counters mid-count: the
             * module's later barriers could not be trusted */
            if (g->fail[0] == KILN_GFAULT_TIMEOUT) {
                g->broken = fst;
                snprintf(g->broken_msg, sizeof(g->broken_msg), "%s", base_diag_text(&fault));
            }
        }
        base_diag_free(&fault);
    }
    if (st == KILN_OK && g->profiling) st = collect_profile(g, d);
    return st;
}

/* ---- information and profiling ----------------------------------------------------- */

int rt_gpu_num_launches(const rt_gpu *g, int *kernels, int *graphs)
{
    if (kernels) *kernels = g->n_kernels;
    if (graphs) *graphs = g->profiling ? 0 : g->n_graphs;
    return g->prog.n_launches;
}

const char *rt_gpu_precision(const rt_gpu *g) { return rt_gprec_name(g->prog.precision); }

static void free_events(rt_gpu *g)
{
    for (int k = 0; g->events && k < 2 * g->prog.n_launches; k++) rt_cuda_event_free(g->events[k]);
    base_free(g->events);
    g->events = NULL;
}

static bool has_slots(const rt_gpu *g)
{
    for (int i = 0; i < g->n_slots; i++)
        if (g->slots[i].launch >= 0) return true;
    return false;
}

/* Points the kernels' context at the slot words (0: none, no profile).
 * Between runs: the copy goes on the legacy stream and is waited for. */
static kiln_status point_prof(rt_gpu *g, CUdeviceptr words, base_diag *d)
{
    if (!g->gctx) return KILN_OK;
    uint64_t v = words;
    KILN_TRY(rt_cuda_copy_to_device(g->gctx + offsetof(kiln_gctx, prof), &v, sizeof(v), d));
    return KILN_CU_CHECK(d, g->cu->cuCtxSynchronize());
}

kiln_status rt_gpu_set_profiling(rt_gpu *g, bool on, base_diag *d)
{
    KILN_TRY(rt_cuda_ctx_bind(&g->ctx, d));
    if (!on) {
        g->profiling = false;
        free_events(g);
        return point_prof(g, 0, d);
    }
    if (!g->prof_dev && has_slots(g)) {
        size_t bytes = (size_t)g->n_slots * 4 * sizeof(uint64_t);
        g->prof_words = base_calloc(1, bytes);
        if (!g->prof_words) return base_diag_add(d, KILN_ERR_OOM, "out of memory for the profile of %d members", g->n_slots);
        KILN_TRY(dev_alloc(bytes, "the persistent kernels' profile", &g->prof_dev, d));
    }
    for (int i = 0; i < g->n_slots; i++) {
        prof_slot *sl = &g->slots[i];
        sl->run_s = sl->start_s = sl->end_s = sl->busy_s = sl->wait_s = 0;
    }
    KILN_TRY(point_prof(g, g->prof_dev, d));
    size_t n = (size_t)g->prog.n_launches;
    if (!g->prof_s) g->prof_s = base_calloc(n + 1, sizeof(double));
    if (!g->events) g->events = base_calloc(2 * n + 1, sizeof(CUevent));
    if (!g->prof_s || !g->events) {
        free_events(g);
        return base_diag_add(d, KILN_ERR_OOM, "out of memory for the profile of %zu launches", n);
    }
    memset(g->prof_s, 0, (n + 1) * sizeof(double));
    for (size_t k = 0; k < n; k++) {
        if (!g->fns[k] || g->events[2 * k]) continue;
        kiln_status st = rt_cuda_event_create(&g->events[2 * k], true, d);
        if (st == KILN_OK) st = rt_cuda_event_create(&g->events[2 * k + 1], true, d);
        if (st != KILN_OK) {
            free_events(g);
            return st;
        }
    }
    g->profiling = true;
    return KILN_OK;
}

int rt_gpu_num_stages(const rt_gpu *g) { return g->n_stages; }

bool rt_gpu_stage_timeline(const rt_gpu *g, int i, double *start_s, double *end_s, double *busy_s, double *wait_s)
{
    if (g->stages[i].slot < 0) return false;
    const prof_slot *sl = &g->slots[g->stages[i].slot];
    if (start_s) *start_s = sl->start_s;
    if (end_s) *end_s = sl->end_s;
    if (busy_s) *busy_s = sl->busy_s;
    if (wait_s) *wait_s = sl->wait_s;
    return true;
}

void rt_gpu_stage(const rt_gpu *g, int i, const char **name, int *n_rtasks, double *run_s)
{
    if (g->stages[i].slot >= 0) {
        const prof_slot *sl = &g->slots[g->stages[i].slot];
        if (name) *name = sl->name;
        if (n_rtasks) *n_rtasks = sl->n_rtasks;
        if (run_s) *run_s = sl->run_s;
        return;
    }
    i = g->stages[i].launch;
    const rt_glaunch *l = &g->prog.launches[i];
    if (name) *name = l->label;
    if (n_rtasks) *n_rtasks = l->segment >= 0 ? 1 : (int)l->grid;
    if (run_s) *run_s = g->prof_s ? g->prof_s[i] : 0;
}

/* ---- loading ------------------------------------------------------------------------ */

/* What the reader cannot check alone: the program against its artifact. */
static kiln_status check_program(const rt_gpu *g, base_diag *d)
{
    const rt_gprog *p = &g->prog;
    const rt_artifact_desc *a = g->a;
    if (p->arena_bytes != a->arena_bytes)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "the artifact's cuda program expects an arena of %llu bytes; its plan has %llu",
                             (unsigned long long)p->arena_bytes, (unsigned long long)a->arena_bytes);
    if (p->weight_bytes != a->weight_bytes)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "the artifact's cuda program expects %llu bytes of weights; its WEIGHTS section has %zu",
                             (unsigned long long)p->weight_bytes, a->weight_bytes);
    for (int k = 0; k < p->n_launches; k++)
        if (p->launches[k].segment >= a->n_segments)
            return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                                 "the artifact's cuda program: launch %d ('%s') runs segment %d; the artifact has %d",
                                 k, p->launches[k].label, p->launches[k].segment, a->n_segments);
    return KILN_OK;
}

/* Cuts the launches into pieces: each segment alone, the kernels between. */
static kiln_status plan_pieces(rt_gpu *g, base_diag *d)
{
    const rt_gprog *p = &g->prog;
    g->pieces = base_calloc((size_t)p->n_launches + 1, sizeof(piece));
    g->fns = base_calloc((size_t)p->n_launches + 1, sizeof(CUfunction));
    if (!g->pieces || !g->fns)
        return base_diag_add(d, KILN_ERR_OOM, "out of memory loading a cuda program of %d launches", p->n_launches);
    for (int k = 0; k < p->n_launches; k++) {
        bool seg = p->launches[k].segment >= 0;
        piece *last = g->n_pieces ? &g->pieces[g->n_pieces - 1] : NULL;
        if (!seg) g->n_kernels++;
        if (!seg && last && !last->segment) {
            last->n++;
            continue;
        }
        g->pieces[g->n_pieces++] = (piece){.first = k, .n = 1, .segment = seg};
        if (!seg) g->n_graphs++;
    }
    return KILN_OK;
}

/* Opens the device and picks the image built for it. */
static kiln_status open_device(rt_gpu *g, rt_cuda_device *info, const rt_gimage **image, base_diag *d)
{
    int dev;
    KILN_TRY(rt_cuda_run_device(&dev, d));
    base_diag sub;
    base_diag_init(&sub);
    kiln_status st = rt_cuda_open(&sub);
    if (st != KILN_OK) {
        st = base_diag_add(d, st, "cannot run a 'cuda' artifact: %s", base_diag_text(&sub));
        base_diag_free(&sub);
        return st;
    }
    base_diag_free(&sub);
    g->cu = rt_cuda_api_get();
    int n = rt_cuda_device_count();
    if (dev >= n)
        return n == 0 ? base_diag_add(d, KILN_ERR_NO_DEVICE, "cannot run a 'cuda' artifact: the driver sees no GPU")
                      : base_diag_add(d, KILN_ERR_NO_DEVICE,
                                      "cannot run a 'cuda' artifact on device %d (KILN_DEVICE): there %s %d", dev,
                                      n == 1 ? "is" : "are", n);
    KILN_TRY(rt_cuda_device_info(dev, info, d));
    /* a program of host segments alone needs no image */
    *image = g->n_kernels ? rt_gprog_pick_image(&g->prog, info->sm_major, info->sm_minor) : NULL;
    if (g->n_kernels && !*image) {
        char built[256] = "";
        size_t at = 0;
        for (int i = 0; i < g->prog.n_images && at < sizeof(built); i++) {
            int k = snprintf(built + at, sizeof(built) - at, "%ssm_%d%s", i ? "/" : "", g->prog.images[i].sm,
                             g->prog.images[i].arch_specific ? "a" : "");
            if (k < 0) break;
            at += (size_t)k;
        }
        return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                             "the artifact's code is built for %s, device %d (%s) is sm_%d%d: compile the model again "
                             "for this GPU", built, dev, info->name, info->sm_major, info->sm_minor);
    }
    if ((int)g->prog.max_smem > info->smem_per_block_optin_bytes)
        return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                             "the artifact's code needs %u bytes of shared memory per block; device %d (%s) allows %d",
                             g->prog.max_smem, dev, info->name, info->smem_per_block_optin_bytes);
    return rt_cuda_ctx_init(dev, &g->ctx, d);
}

/* A persistent kernel's blocks wait for each other at its barriers: the
 * grid must fit on the device at once. Lowers l->grid to the blocks the
 * occupancy API says are resident. */
static kiln_status size_persistent(CUfunction fn, rt_glaunch *l, int n_sms, base_diag *d)
{
    int per_sm = 0;
    KILN_TRY(rt_cuda_occupancy(fn, (int)l->block, l->smem, &per_sm, d));
    if (per_sm < 1)
        return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                             "persistent kernel %s: not one block of %u threads with %u bytes of shared memory fits "
                             "a multiprocessor; compile with --schedule kernels",
                             l->name, l->block, l->smem);
    int64_t most = (int64_t)per_sm * n_sms;
    if ((int64_t)l->grid > most) l->grid = (unsigned)most;
    return KILN_OK;
}

/* Whether launch l may go early (gprog.h) without crowding. Blocks
 * launched early land on the multiprocessors the previous kernel leaves
 * free at that moment, as many on each as fit: a grid of less than a full
 * wave of a kernel that fits several blocks per multiprocessor would be
 * packed onto a few of them while the others sit idle once the previous
 * kernel ends (ResNet-50 ran 25% slower so on an H200). Early only when
 * one block fits per multiprocessor, or the grid fills every slot anyway;
 * not when the occupancy is unknown. */
static bool spreads_early(CUfunction fn, const rt_glaunch *l, int n_sms)
{
    int per_sm = 0;
    if (rt_cuda_occupancy(fn, (int)l->block, l->smem, &per_sm, NULL) != KILN_OK || per_sm < 1) return false;
    return per_sm == 1 || (int64_t)l->grid >= (int64_t)per_sm * n_sms;
}

/* The profile's stages: each launch, or in place of a persistent kernel
 * the slots of its members (kg_prof_slots: "KERNEL RTASKS NAME" lines,
 * emit.c; a module without it has none). A slot whose kernel the program
 * does not launch keeps launch -1. */
static kiln_status load_slots(rt_gpu *g, base_diag *d)
{
    CUdeviceptr at;
    size_t bytes;
    KILN_TRY(rt_cuda_module_global(g->module, "kg_prof_slots", &at, &bytes, d));
    int n = 0;
    if (bytes) {
        g->slot_text = base_malloc(bytes + 1);
        if (!g->slot_text) return base_diag_add(d, KILN_ERR_OOM, "out of memory for the profile's slots");
        KILN_TRY(rt_cuda_copy_to_host(g->slot_text, at, bytes, d));
        g->slot_text[bytes] = '\0';
        for (size_t i = 0; i < bytes; i++) n += g->slot_text[i] == '\n';
    }
    g->slots = base_calloc((size_t)n + 1, sizeof(prof_slot));
    g->stages = base_calloc((size_t)g->prog.n_launches + (size_t)n + 1, sizeof(stage_ref));
    if (!g->slots || !g->stages) return base_diag_add(d, KILN_ERR_OOM, "out of memory for the profile's stages");
    for (char *line = g->slot_text; line && g->n_slots < n;) {
        char *end = strchr(line, '\n'), *sp = strchr(line, ' '), *num_end;
        *end = '\0';
        long rtasks = sp && sp < end ? strtol(sp + 1, &num_end, 10) : -1;
        if (rtasks < 0 || *num_end != ' ')
            return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the module's kg_prof_slots: bad line %d '%.80s'",
                                 g->n_slots + 1, line);
        *sp = '\0';
        prof_slot *sl = &g->slots[g->n_slots++];
        *sl = (prof_slot){.launch = -1, .n_rtasks = (int)rtasks, .name = num_end + 1};
        for (int k = 0; k < g->prog.n_launches && sl->launch < 0; k++)
            if (g->fns[k] && g->prog.launches[k].persistent && strcmp(g->prog.launches[k].name, line) == 0)
                sl->launch = k;
        line = end + 1;
    }
    for (int k = 0; k < g->prog.n_launches; k++) {
        int before = g->n_stages;
        for (int i = 0; i < g->n_slots; i++)
            if (g->slots[i].launch == k) g->stages[g->n_stages++] = (stage_ref){.launch = k, .slot = i};
        if (g->n_stages == before) g->stages[g->n_stages++] = (stage_ref){.launch = k, .slot = -1};
    }
    return KILN_OK;
}

/* Loads image im and each launch's kernel. early: launches marked early
 * may go early on this device (load_module keeps the mark only where
 * spreads_early allows). */
static kiln_status load_module(rt_gpu *g, const rt_gimage *im, int n_sms, bool early, base_diag *d)
{
    /* the driver reads the ELF in place: give it an aligned copy when the
     * artifact's buffer puts it at an odd address */
    void *copy = NULL;
    const void *cubin = im->cubin;
    if ((uintptr_t)cubin % 16) {
        copy = base_malloc(im->bytes);
        if (!copy) return base_diag_add(d, KILN_ERR_OOM, "out of memory copying a cubin of %zu bytes", im->bytes);
        memcpy(copy, cubin, im->bytes);
        cubin = copy;
    }
    base_diag sub;
    base_diag_init(&sub);
    kiln_status st = rt_cuda_module_load(cubin, im->bytes, &g->module, &sub);
    if (st != KILN_OK)
        st = base_diag_add(d, st == KILN_ERR_INVALID_ARG ? KILN_ERR_INVALID_MODEL : st,
                           "the artifact's sm_%d%s image: %s", im->sm, im->arch_specific ? "a" : "",
                           base_diag_text(&sub));
    base_diag_free(&sub);
    base_free(copy);
    KILN_TRY(st);

    for (int k = 0; k < g->prog.n_launches; k++) {
        const rt_glaunch *l = &g->prog.launches[k];
        if (l->segment >= 0) continue;
        base_diag_init(&sub);
        st = rt_cuda_module_function(g->module, l->name, &g->fns[k], &sub);
        /* a launch above 48 KB opts in; one limit per kernel, the program's largest */
        if (st == KILN_OK && l->smem > SMEM_DEFAULT_BYTES)
            st = rt_cuda_function_set_smem(g->fns[k], (int)g->prog.max_smem, &sub);
        if (st == KILN_OK && l->persistent) st = size_persistent(g->fns[k], &g->prog.launches[k], n_sms, &sub);
        if (st == KILN_OK && l->early) g->prog.launches[k].early = early && spreads_early(g->fns[k], l, n_sms);
        if (st != KILN_OK)
            st = base_diag_add(d, st == KILN_ERR_INVALID_ARG ? KILN_ERR_INVALID_MODEL : st,
                               "the artifact's cuda program, launch %d ('%s'): %s", k, l->label,
                               base_diag_text(&sub));
        base_diag_free(&sub);
        KILN_TRY(st);
    }
    return load_slots(g, d);
}

/* Device memory: the arena (zeroed), the weights, io buffers and their
 * pointer array, the kernels' context, the fault words. */
static kiln_status alloc_device(rt_gpu *g, base_diag *d)
{
    const rt_artifact_desc *a = g->a;
    KILN_TRY(dev_alloc((size_t)a->arena_bytes, "the activation arena", &g->arena, d));
    KILN_TRY(KILN_CU_CHECK(d, g->cu->cuMemsetD8(g->arena, 0, (size_t)a->arena_bytes)));
    KILN_TRY(dev_alloc(a->weight_bytes, "the weights", &g->weights, d));
    if (a->weight_bytes) KILN_TRY(rt_cuda_copy_to_device(g->weights, a->weights, a->weight_bytes, d));
    char what[RT_ARTIFACT_MAX_NAME + 64];
    for (int i = 0; i < g->n_io; i++) {
        bool in = i < a->n_inputs;
        const kiln_rt_tensor_info *t = in ? &a->inputs[i] : &a->outputs[i - a->n_inputs];
        if (!t->nbytes) continue;
        snprintf(what, sizeof(what), "model %s %d ('%s')", in ? "input" : "output", in ? i : i - a->n_inputs, t->name);
        KILN_TRY(dev_alloc(t->nbytes, what, &g->io_own[i], d));
    }
    memcpy(g->io_cur, g->io_own, (size_t)g->n_io * sizeof(CUdeviceptr));
    g->io_cur_is_own = true;
    KILN_TRY(dev_alloc((size_t)g->n_io * sizeof(CUdeviceptr), "the io pointer array", &g->io_array, d));
    if (g->n_io) KILN_TRY(rt_cuda_copy_to_device(g->io_array, g->io_cur, (size_t)g->n_io * sizeof(CUdeviceptr), d));

    base_diag sub;
    base_diag_init(&sub);
    kiln_status st = rt_cuda_host_alloc_mapped(KILN_GFAIL_WORDS * sizeof(unsigned), &g->fail_host, &g->fail_dev, &sub);
    if (st != KILN_OK) st = base_diag_add(d, st, "cannot allocate the fault words: %s", base_diag_text(&sub));
    base_diag_free(&sub);
    KILN_TRY(st);
    g->fail = g->fail_host;
    for (int i = 0; i < KILN_GFAIL_WORDS; i++) g->fail[i] = 0;

    kiln_gctx c = {.arena = g->arena, .weights = g->weights, .io = g->io_array, .fail = g->fail_dev};
    KILN_TRY(dev_alloc(sizeof(c), "the kernel context", &g->gctx, d));
    KILN_TRY(rt_cuda_copy_to_device(g->gctx, &c, sizeof(c), d));
    /* the copies above ran on the legacy stream, which runs do not wait for */
    return KILN_CU_CHECK(d, g->cu->cuCtxSynchronize());
}

static void free_staging(rt_gpu *g)
{
    for (int k = 0; k < g->n_ring; k++) {
        rt_cuda_event_free(g->ring[k].ev);
        base_free(g->ring[k].pieces);
    }
    rt_cuda_host_free(g->stage);
    memset(g->ring, 0, sizeof(g->ring));
    g->stage = NULL;
    g->n_ring = 0;
}

/* The staging ring for host outputs (stage_output): slots of 64 KB to 1 MB,
 * about a 32nd of the outputs' bytes, as many as the outputs fill, at most
 * STAGE_SLOTS. Without it (page-locked memory or events refused) outputs are
 * copied directly, as correctly and more slowly: a load does not fail for
 * it. */
static void alloc_staging(rt_gpu *g)
{
    const rt_artifact_desc *a = g->a;
    size_t total = 0;
    for (int i = 0; i < a->n_outputs; i++) total += a->outputs[i].nbytes; /* each at most 2^40 (artifact.c) */
    if (!total) return;
    size_t slot = (total / 32 + 4095) / 4096 * 4096;
    g->slot_bytes = KILN_MIN(KILN_MAX(slot, (size_t)SLOT_MIN_BYTES), (size_t)SLOT_MAX_BYTES);
    size_t n = (total + g->slot_bytes - 1) / g->slot_bytes;
    int n_ring = n < STAGE_SLOTS ? (int)n : STAGE_SLOTS;
    bool ok = rt_cuda_host_alloc((size_t)n_ring * g->slot_bytes, (void **)&g->stage, NULL) == KILN_OK;
    for (int k = 0; ok && k < n_ring; k++) {
        g->n_ring = k + 1; /* freed by free_staging whatever happens next */
        g->ring[k].pieces = base_calloc((size_t)a->n_outputs, sizeof(stage_piece));
        ok = g->ring[k].pieces && rt_cuda_event_create(&g->ring[k].ev, false, NULL) == KILN_OK;
    }
    if (!ok) free_staging(g);
}

/* Host mirrors for the segments: the arena (calloc'd: only the pages
 * segments touch are ever backed), the weights they read, the io tensors
 * they bind. */
static kiln_status alloc_host_side(rt_gpu *g, base_diag *d)
{
    const rt_artifact_desc *a = g->a;
    g->host_io = base_calloc((size_t)g->n_io + 1, sizeof(uint8_t *));
    if (!g->host_io) return base_diag_add(d, KILN_ERR_OOM, "out of memory loading the model");
    if (a->n_segments == 0) return KILN_OK;
    g->host_arena = base_calloc((size_t)a->arena_bytes + 1, 1);
    if (!g->host_arena)
        return base_diag_add(d, KILN_ERR_OOM, "out of host memory for the arena's mirror (%llu bytes)",
                             (unsigned long long)a->arena_bytes);
    for (int s = 0; s < a->n_segments; s++) {
        const rt_segment_desc *sd = &a->segments[s];
        for (int i = 0; i < sd->n_in + sd->n_out; i++) {
            const rt_binding *b = i < sd->n_in ? &sd->in[i] : &sd->out[i - sd->n_in];
            if (b->kind == RT_BIND_WEIGHTS) {
                if (!g->host_weights) g->host_weights = base_calloc(a->weight_bytes + 1, 1);
                if (!g->host_weights)
                    return base_diag_add(d, KILN_ERR_OOM, "out of host memory for the weights (%zu bytes)",
                                         a->weight_bytes);
                memcpy(g->host_weights + b->offset, (const uint8_t *)a->weights + b->offset, stored_bytes(g, b));
            } else if (b->kind == RT_BIND_INPUT || b->kind == RT_BIND_OUTPUT) {
                int io = b->kind == RT_BIND_INPUT ? b->io : a->n_inputs + b->io;
                size_t bytes = io < a->n_inputs ? a->inputs[io].nbytes : a->outputs[io - a->n_inputs].nbytes;
                if (g->host_io[io] || !bytes) continue;
                g->host_io[io] = base_malloc(bytes);
                if (!g->host_io[io])
                    return base_diag_add(d, KILN_ERR_OOM, "out of host memory for a mirror of %zu bytes", bytes);
            }
        }
    }
    return KILN_OK;
}

kiln_status rt_gpu_load(const rt_artifact *art, const rt_segment *segs, rt_gpu **out, base_diag *d)
{
    rt_gpu *g = base_calloc(1, sizeof(*g));
    *out = g;
    if (!g) return base_diag_add(d, KILN_ERR_OOM, "out of memory loading the model");
    base_arena_init(&g->prog.arena);
    g->a = &art->desc;
    g->segs = segs;
    g->n_io = g->a->n_inputs + g->a->n_outputs;
    KILN_TRY(rt_gprog_decode(g->a->code, g->a->code_bytes, &g->prog, d));
    KILN_TRY(check_program(g, d));
    KILN_TRY(plan_pieces(g, d));
    g->io_own = base_calloc((size_t)g->n_io + 1, sizeof(CUdeviceptr));
    g->io_cur = base_calloc((size_t)g->n_io + 1, sizeof(CUdeviceptr));
    g->io_memory = base_calloc((size_t)g->n_io + 1, sizeof(rt_cuda_memory));
    if (!g->io_own || !g->io_cur || !g->io_memory)
        return base_diag_add(d, KILN_ERR_OOM, "out of memory loading the model");

    rt_cuda_device info;
    const rt_gimage *image = NULL;
    KILN_TRY(open_device(g, &info, &image, d));
    KILN_TRY(rt_cuda_stream_create(&g->stream, d));
    /* early launches from sm_90 on (the sm_80 image's kernels do not wait);
     * KILN_EARLY_LAUNCH=0 turns them off (for comparison) */
    const char *early = getenv("KILN_EARLY_LAUNCH");
    if (image) KILN_TRY(load_module(g, image, info.n_sms, image->sm >= 90 && !(early && strcmp(early, "0") == 0), d));
    KILN_TRY(alloc_device(g, d));
    /* the tensor maps hold the arena's and weights' addresses; only the
     * sm_90a image's kernels read them */
    if (image && image->sm >= 90 && g->prog.n_tmaps) {
        base_diag sub;
        base_diag_init(&sub);
        kiln_status st = rt_cuda_fill_tmaps(g->module, g->prog.tmaps, g->prog.n_tmaps, g->arena, g->a->arena_bytes,
                                            g->weights, g->a->weight_bytes, &sub);
        if (st != KILN_OK) st = base_diag_add(d, st, "the artifact's cuda program: %s", base_diag_text(&sub));
        base_diag_free(&sub);
        KILN_TRY(st);
    }
    KILN_TRY(alloc_host_side(g, d));
    alloc_staging(g);
    /* the cubins pointed into the artifact's buffer, which may go now */
    for (int i = 0; i < g->prog.n_images; i++) g->prog.images[i].cubin = NULL;
    return KILN_OK;
}

void rt_gpu_free(rt_gpu *g)
{
    if (!g) return;
    if (g->ctx.ctx) {
        /* on another thread than the load's, or after the context was lost:
         * every call may fail, none may crash */
        rt_cuda_ctx_bind(&g->ctx, NULL);
        if (g->stream && g->broken == KILN_OK) rt_cuda_stream_sync(g->stream, NULL);
        for (int p = 0; g->pieces && p < g->n_pieces; p++) rt_cuda_graph_free(&g->pieces[p].graph);
        free_events(g);
        rt_cuda_module_free(g->module);
        rt_cuda_free(g->arena);
        rt_cuda_free(g->weights);
        for (int i = 0; g->io_own && i < g->n_io; i++) rt_cuda_free(g->io_own[i]);
        rt_cuda_free(g->io_array);
        rt_cuda_free(g->gctx);
        rt_cuda_free(g->prof_dev);
        rt_cuda_host_free(g->fail_host);
        free_staging(g);
        rt_cuda_stream_free(g->stream);
        rt_cuda_ctx_free(&g->ctx);
    }
    for (int i = 0; g->host_io && i < g->n_io; i++) base_free(g->host_io[i]);
    base_free(g->host_io);
    base_free(g->host_arena);
    base_free(g->host_weights);
    base_free(g->io_own);
    base_free(g->io_cur);
    base_free(g->io_memory);
    base_free(g->pieces);
    base_free(g->fns);
    base_free(g->prof_s);
    base_free(g->prof_words);
    base_free(g->slots);
    base_free(g->slot_text);
    base_free(g->stages);
    rt_gprog_free(&g->prog);
    base_free(g);
}
