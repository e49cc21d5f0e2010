/*
 * rt-impl.h: the runtime's private interfaces: the worker pool (pool.c)
 * that rt.c drives for target "c", the fallback segments both targets run
 * on the reference interpreter (rt.c), the CUDA side of the runtime
 * (rt_cuda.c) that rt.c dispatches to for target "cuda", and small helpers.
 */
#ifndef KILN_RUNTIME_RT_IMPL_H
#define KILN_RUNTIME_RT_IMPL_H

#include "base/base.h"
#include "ir/ir.h"
#include "runtime/artifact.h"
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

/* ---- fallback segments (rt.c) -------------------------------------------------
 *
 * A segment is an ONNX subgraph the reference interpreter runs; its inputs
 * and outputs are bindings into the arena, the weights or the io tensors
 * (artifact.h). Where those bytes live is the caller's business: the CPU
 * runtime points at them, the CUDA runtime copies them through host
 * mirrors. */
typedef struct rt_segment {
    ir_model *model;
    const rt_segment_desc *desc; /* bindings, owned by the model's artifact */
} rt_segment;

/* Parses segment s and checks its graph against its bindings: inputs must
 * fit them (their unknown dims are fixed by the bindings), outputs whose
 * shapes inference knows must equal them. OUT: seg->model, free with
 * ir_model_free (also after a failure). */
kiln_status rt_segment_load(const rt_segment_desc *sd, int s, rt_segment *seg, base_diag *d);

/* Whether a binding's shape is known only after a run (dims of -1). */
bool rt_binding_is_dynamic(const rt_binding *b);
/* t = b's dtype and shape, nbytes (0 when dynamic), data NULL. */
void rt_binding_type(const rt_binding *b, ir_tensor *t);

/* Runs segment `index` on the interpreter. in[i]: input binding i's data
 * (borrowed), typed as rt_binding_type says. On success out[i] (the caller's
 * n_out tensors) is output binding i's tensor, checked against the binding,
 * to copy where the binding says and release with ir_tensor_release;
 * outputs of data-dependent shape are moved into dyn[io] (for
 * kiln_rt_result), out[i] left empty. On failure every out[i] is released
 * and err (n_err bytes) says what went wrong, naming the segment. */
kiln_status rt_segment_exec(const rt_segment *seg, int index, const ir_tensor *in, ir_tensor *out, ir_tensor *dyn,
                            char *err, size_t n_err);

/* ---- the CUDA runtime (rt_cuda.c) ---------------------------------------------
 *
 * A model of target "cuda": its CUDA program (gprog.h) loaded on a device,
 * with the device memory, stream, CUDA graphs and profiling events it
 * needs. rt.c keeps what both targets share (the artifact, the io pointers
 * of the last run, the segments, the outputs of data-dependent shape) and
 * calls these. Calls on one rt_gpu are not concurrent (rt.c's `running`). */
typedef struct rt_gpu rt_gpu;

/* Checks art's CUDA program against the artifact, opens the device
 * ($KILN_DEVICE, else 0), loads the image for it and allocates and uploads
 * everything a run needs. art and segs (its n_segments parsed segments) are
 * borrowed for the life of *out; the buffer art was read from only during
 * the call. OUT: *out, free with rt_gpu_free (also after a failure). */
kiln_status rt_gpu_load(const rt_artifact *art, const rt_segment *segs, rt_gpu **out, base_diag *d);
void rt_gpu_free(rt_gpu *g); /* NULL is fine */

/* One run: inputs/outputs are host buffers, or device pointers
 * (CUdeviceptr cast to void *) when `device`; both checked by the caller
 * (non-NULL where the tensor has bytes). dyn: per model output, where
 * segments leave outputs of data-dependent shape. */
kiln_status rt_gpu_run(rt_gpu *g, const void *const *inputs, void *const *outputs, bool device, ir_tensor *dyn,
                       base_diag *d);

/* Page-locked host memory of the model's device, for the io of host runs
 * (kiln_rt_host_alloc): copies from and into it run asynchronously at the
 * bus's speed. OUT: *out, free with rt_gpu_host_free before rt_gpu_free. */
kiln_status rt_gpu_host_alloc(rt_gpu *g, size_t bytes, void **out, base_diag *d);
void rt_gpu_host_free(rt_gpu *g, void *p); /* NULL is fine */

/* The program's launches (kernels and host segments: the profile's
 * stages). *kernels: kernel launches per run; *graphs: CUDA graph launches
 * per run (0 while profiling: kernels are then launched one by one). Either
 * may be NULL. */
int rt_gpu_num_launches(const rt_gpu *g, int *kernels, int *graphs);
const char *rt_gpu_precision(const rt_gpu *g); /* "fp32", "fp16", "bf16" */
/* Profiling on (counters reset) or off; events are made here, not in runs. */
kiln_status rt_gpu_set_profiling(rt_gpu *g, bool on, base_diag *d);
/* The profile's stages: the launches, except that a persistent kernel
 * built with profile slots (--schedule=mono) is replaced by its members. */
int rt_gpu_num_stages(const rt_gpu *g);
/* Stage i: its label, rTasks (blocks for a launch, 1 for a segment) and
 * seconds summed over the profiled runs (for a member: how far it moved
 * its kernel's latest end of work). Any output may be NULL; i is in range. */
void rt_gpu_stage(const rt_gpu *g, int i, const char **name, int *n_rtasks, double *run_s);
/* Stage i's timeline when it is a member of a persistent kernel (else
 * false): its start and end after the kernel's first member began and its
 * rTasks' summed work and waits, seconds summed over the profiled runs. */
bool rt_gpu_stage_timeline(const rt_gpu *g, int i, double *start_s, double *end_s, double *busy_s, double *wait_s);

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
