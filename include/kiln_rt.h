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
 * the calling thread is one of them). Every size in the file is checked.
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

/* Output i of the last run: its data, and its actual dtype and shape in
 * *info. For outputs of data-dependent shape the memory belongs to the
 * model and stays valid until the next run or kiln_rt_free; for the others
 * it is the caller's buffer. NULL when i is out of range or nothing ran. */
KILN_API const void *kiln_rt_result(const kiln_rt_model *m, int i, kiln_rt_tensor_info *info);

/* Profiling (off by default). While on, every run adds each stage's time to
 * counters, as the calling thread sees it: the time running its share of
 * the stage's rTasks, and the time it waited before the stage for the other
 * threads. kiln_rt_set_profiling resets the counters. */
KILN_API kiln_status kiln_rt_set_profiling(kiln_rt_model *m, int on);
KILN_API int kiln_rt_num_stages(const kiln_rt_model *m);
/* Stage `stage`: its name (the ONNX nodes), rTask count and the seconds
 * summed over the profiled runs. */
KILN_API kiln_status kiln_rt_stage_profile(const kiln_rt_model *m, int stage, const char **name, int *n_rtasks,
                                           double *run_s, double *wait_s);

/* Bytes of the planned activation arena and of the weights. */
KILN_API size_t kiln_rt_arena_bytes(const kiln_rt_model *m);
KILN_API size_t kiln_rt_weight_bytes(const kiln_rt_model *m);
KILN_API int kiln_rt_num_threads(const kiln_rt_model *m);
/* The target the artifact was built for: "c" or "cuda". */
KILN_API const char *kiln_rt_target(const kiln_rt_model *m);

/* The message of the last failure on this thread ("" when none). */
KILN_API const char *kiln_rt_last_error(void);

#endif
