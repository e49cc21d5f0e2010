/*
 * kiln_rt.h: the runtime-only API. A deployment links libkiln_rt (this API,
 * the artifact reader, the worker pool) and loads .kiln artifacts made by
 * `kiln compile`; it does not need the compiler.
 *
 *     kiln_rt_model *m;
 *     if (kiln_rt_load("resnet50.kiln", 2, &m) != KILN_OK) {
 *         fprintf(stderr, "%s\n", kiln_rt_last_error());
 *         return 1;
 *     }
 *     const void *in[1] = {image};            // caller-owned, dtypes/shapes as in kiln_rt_input()
 *     void *out[1] = {logits};
 *     kiln_rt_run(m, in, out);                // no allocation while running
 *     kiln_rt_free(m);
 *
 * An artifact compiled with --target cuda loads the same way and runs on
 * the GPU ($KILN_DEVICE, else device 0): kiln_rt_run copies host buffers in
 * and out (fastest from and into kiln_rt_host_alloc's page-locked ones);
 * kiln_rt_run_device takes device pointers (16-byte aligned, as
 * cudaMalloc's are) and copies nothing:
 *
 *     void *d_in[1] = {(void *)d_image};    // CUdeviceptr, cudaMalloc'd, filled and synchronized
 *     void *d_out[1] = {(void *)d_logits};
 *     kiln_rt_run_device(m, (const void *const *)d_in, d_out);   // returns when d_logits is written
 *
 * On sm_90 and later, kernels start while the kernel before them still
 * runs (programmatic dependent launch: each waits for its predecessor's
 * writes before touching memory); $KILN_EARLY_LAUNCH=0 at load launches
 * them one after another instead.
 *
 * Tensors are dense and row-major; their dtype and shape are fixed by the
 * artifact (kiln_rt_input / kiln_rt_output tell them), except model outputs
 * whose shape depends on the input data (NonZero, NonMaxSuppression, a
 * Reshape to a computed shape...): their dims are -1, the caller passes
 * NULL for them, and kiln_rt_result gives the run's tensor.
 */
#ifndef KILN_RT_H
#define KILN_RT_H

#include "kiln.h"

#define KILN_RT_MAX_RANK 8

typedef struct kiln_rt_model kiln_rt_model;

typedef struct kiln_rt_tensor_info {
    const char *name;        /* owned by the model */
    kiln_dtype dtype;
    int rank;
    int64_t dims[KILN_RT_MAX_RANK];
    size_t nbytes;
} kiln_rt_tensor_info;

/* Loads an artifact and starts n_threads workers (0: the artifact's default;
 * the calling thread is one of them; a "cuda" artifact runs from the
 * calling thread and ignores it). Every size in the file is checked.
 * "cuda" artifacts: KILN_ERR_NO_DEVICE without a driver or GPU,
 * KILN_ERR_UNSUPPORTED when no image runs on the GPU, KILN_ERR_OOM naming
 * what did not fit in GPU memory.
 * OUT: *out, free with kiln_rt_free. On failure kiln_rt_last_error() says why. */
KILN_API kiln_status kiln_rt_load(const char *path, int n_threads, kiln_rt_model **out);
/* The same from memory (the buffer may be freed after the call). */
KILN_API kiln_status kiln_rt_load_buffer(const void *buf, size_t n, int n_threads, kiln_rt_model **out);
KILN_API void kiln_rt_free(kiln_rt_model *m);

KILN_API int kiln_rt_num_inputs(const kiln_rt_model *m);
KILN_API int kiln_rt_num_outputs(const kiln_rt_model *m);
/* NULL when i is out of range. */
KILN_API const kiln_rt_tensor_info *kiln_rt_input(const kiln_rt_model *m, int i);
KILN_API const kiln_rt_tensor_info *kiln_rt_output(const kiln_rt_model *m, int i);

/* Runs the model: inputs[i] and outputs[j] point at caller-owned buffers of
 * the sizes above. Not reentrant on one model: one run at a time. */
KILN_API kiln_status kiln_rt_run(kiln_rt_model *m, const void *const *inputs, void *const *outputs);

/* "cuda" artifacts: runs with inputs[i] and outputs[j] pointing at device
 * memory (CUdeviceptr values cast to void *) of the sizes above; nothing is
 * copied between host and device, except for host segments. The run is
 * ordered after nothing of the caller's: finish writing the inputs first
 * (synchronize). It returns when the outputs are written. Outputs of
 * data-dependent shape still come from kiln_rt_result, in host memory.
 * Target "c": KILN_ERR_UNSUPPORTED. */
KILN_API kiln_status kiln_rt_run_device(kiln_rt_model *m, const void *const *inputs, void *const *outputs);

/* Host memory for the inputs and outputs of kiln_rt_run, from this
 * model: for "cuda" artifacts page-locked (pinned) memory of the model's
 * device, which a run's copies move at the bus's full speed, without
 * staging (on an H100, 600 KB took 13-18 us instead of 40-75 from or into
 * malloc'd memory); for target "c" 64-byte aligned memory. Any host buffer
 * works with kiln_rt_run; these make its copies fastest. Page-locked
 * memory is scarce: allocate once, reuse every run. NULL on failure
 * (kiln_rt_last_error() says why). The buffer lives until
 * kiln_rt_host_free or kiln_rt_free(m). */
KILN_API void *kiln_rt_host_alloc(kiln_rt_model *m, size_t bytes);
/* Frees a buffer of kiln_rt_host_alloc on m (NULL is fine); not while a
 * run uses it. KILN_ERR_INVALID_ARG for any other pointer. These two may
 * be called from any thread, also while m runs on another. */
KILN_API kiln_status kiln_rt_host_free(kiln_rt_model *m, void *p);

/* Output i of the last run: its data, and its actual dtype and shape in
 * *info. For outputs of data-dependent shape the memory belongs to the
 * model and stays valid until the next run or kiln_rt_free; for the others
 * it is the caller's buffer. NULL when i is out of range or nothing ran. */
KILN_API const void *kiln_rt_result(const kiln_rt_model *m, int i, kiln_rt_tensor_info *info);

/* Profiling (off by default). While on, every run adds each stage's time to
 * counters, as the calling thread sees it: the time running its share of
 * the stage's rTasks, and the time it waited before the stage for the other
 * threads. kiln_rt_set_profiling resets the counters. For "cuda" artifacts a
 * stage is a launch (a kernel, or a host segment): while profiling, kernels
 * run one by one between CUDA events instead of from CUDA graphs; a
 * kernel's rTask count is its grid, its wait time 0. A persistent kernel
 * (--schedule=mono) is instead a stage per member (group), timed inside the
 * kernel by the global timer: its run time is how far it moved the latest
 * end of work of the members before it, so that the members add up to the
 * kernel; kiln_rt_stage_timeline tells the rest. */
KILN_API kiln_status kiln_rt_set_profiling(kiln_rt_model *m, int on);
KILN_API int kiln_rt_num_stages(const kiln_rt_model *m);
/* Stage `stage`: its name (the ONNX nodes), rTask count and the seconds
 * summed over the profiled runs. */
KILN_API kiln_status kiln_rt_stage_profile(const kiln_rt_model *m, int stage, const char **name, int *n_rtasks,
                                           double *run_s, double *wait_s);

/* A member of a persistent kernel (else KILN_ERR_UNSUPPORTED): seconds
 * summed over the profiled runs from the kernel's first work to the
 * member's first and last work, and its rTasks' work and waits for the
 * members they read, summed over rTasks. Any output may be NULL. */
KILN_API kiln_status kiln_rt_stage_timeline(const kiln_rt_model *m, int stage, double *start_s, double *end_s,
                                            double *busy_s, double *wait_s);

/* Bytes of the planned activation arena and of the weights. */
KILN_API size_t kiln_rt_arena_bytes(const kiln_rt_model *m);
KILN_API size_t kiln_rt_weight_bytes(const kiln_rt_model *m);
KILN_API int kiln_rt_num_threads(const kiln_rt_model *m);
/* The target the artifact was compiled for: "c" or "cuda"; NULL for NULL. */
KILN_API const char *kiln_rt_target(const kiln_rt_model *m);
/* The storage precision of a cuda artifact: "fp32", "fp16" or "bf16"; NULL
 * for the c target (float32 throughout) and for NULL. */
KILN_API const char *kiln_rt_precision(const kiln_rt_model *m);
/* What one run issues: *kernels kernel launches, from *graphs CUDA graph
 * launches (0 while profiling). Both 0 for target "c". */
KILN_API kiln_status kiln_rt_num_launches(const kiln_rt_model *m, int *kernels, int *graphs);

/* The message of the last failure on this thread ("" when none). */
KILN_API const char *kiln_rt_last_error(void);

#endif
