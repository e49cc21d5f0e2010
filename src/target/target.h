/*
 * target.h: the target interface (DESIGN.md "Target"): what a backend
 * supplies to turn a partitioned, planned graph into code.
 *
 * Targets are const vtables; `c` (any CPU) is the first. The compile driver
 * (api/compile.c) partitions the graph with the target's support test,
 * plans memory, and asks the target to emit and build the program.
 */
#ifndef KILN_TARGET_H
#define KILN_TARGET_H

#include "pass/pass.h"

typedef struct target_options {
    int n_threads;           /* vEUs the program is tuned for */
    const char *emit_dir;    /* non-NULL: also write the generated source here */
    const char *cc;          /* C compiler (default: $CC or "cc") */
    bool verbose;            /* progress lines to the progress callback */
    void (*progress)(void *user, const char *line); /* optional */
    void *progress_user;
    /* GPU targets */
    const char *precision;   /* "fp32" (default), "fp16" or "bf16": storage of float activations and weights */
    bool tune;               /* time template candidates on the device (Bolt's profiler) */
    const char *schedule;    /* cuda: NULL (waves), "waves", "kernels", or a mono one ("mono", "mono:256x1", ...) */
    const char *tuning_db;   /* SQLite file; NULL: $KILN_TUNING_DB or ~/.cache/kiln/tuning.db */
    double tune_budget_s;    /* with tune: seconds of measuring, then the heuristics' choices; 0: no limit */
    const void *weights;     /* the planned weights blob (the model's dtypes), weight_bytes long */
    bool listing_only;       /* cuda: stop before building; target_output.listing describes the rProgram */
} target_options;

/* What building produced: the code for the artifact and its fallback
 * segments (serialized ONNX models with their bindings). */
typedef struct target_segment {
    void *onnx;              /* base_malloc'd serialized model */
    size_t onnx_bytes;
    int group;               /* the group it runs */
} target_segment;

typedef struct target_output {
    void *code;              /* the shared object (base_malloc'd) */
    size_t code_bytes;
    const char *isa;         /* what the code needs from the CPU */
    target_segment *segments;
    int n_segments;
    void *weights;           /* non-NULL: replaces the weights blob (base_malloc'd, same size):
                                the cuda target stores float32 weights in 16 bits */
    char *listing;           /* listing_only: the rProgram as text (base_malloc'd) */
} target_output;

void target_output_free(target_output *o);

/* Adds group grp (run by the reference interpreter) to o's segments: its
 * nodes exported as an ONNX model whose inputs are the group's non-constant
 * inputs. OUT: *index, the segment's position. */
kiln_status target_add_segment(target_output *o, const ir_graph *g, const sched_group *grp, int *index, base_diag *d);

typedef struct target {
    const char *name;
    /* Whether node n (shapes inferred) compiles to a template; others run
     * in fallback segments. */
    bool (*can_compile)(const ir_node *n);
    /* Optional (0: none): multi-node patterns (PASS_PATTERN_*) the target
     * compiles as one group each. */
    unsigned patterns;
    /* Emits and builds the program for the partitioned, planned graph. */
    kiln_status (*build)(const ir_graph *g, const sched_program *p, const target_options *o, target_output *out,
                         base_diag *d);
    /* Optional (NULL: never): whether `schedule` (target_options.schedule)
     * runs the groups of a wave of the data graph at once, so that the
     * memory plan should pass arena bytes only from wave to wave
     * (sched_plan_memory's by_wave). */
    bool (*plan_by_wave)(const char *schedule);
    /* Optional (NULL: 0): how many more steps (waves, with plan_by_wave)
     * arena bytes stay a value's after its last reader's, so that a group
     * that may start while the groups a few before it still run does not
     * take bytes they use (sched_plan_memory's hold). */
    int (*plan_hold)(const char *schedule);
} target;

/* NULL when unknown. */
const target *target_lookup(const char *name);

extern const target target_c;
extern const target target_cuda;

/* KILN_OK when `schedule` is one target_cuda takes (target_options.schedule),
 * else KILN_ERR_INVALID_ARG with what it takes in d. */
kiln_status target_cuda_check_schedule(const char *schedule, base_diag *d);

/* The mono schedules' kernel-wide configuration as `kiln tune` measured it
 * (MonoNN Alg. 1): kept in the tuning database (tuning_db; NULL: the
 * default) for GPU 0, its driver and this kiln build, under the model's key. */
typedef struct target_mono_config {
    int block, per_sm;  /* threads a block, blocks resident on a multiprocessor */
    double us;          /* the whole network's latency, microseconds */
    char date[32];      /* when it was measured (lookups) */
} target_mono_config;

/* The key of planned program p under schedule (its name before any ':')
 * and precision: "mono fp16 model=0123456789abcdef". OUT: key, n bytes. */
void target_cuda_mono_key(const sched_program *p, const char *schedule, const char *precision, char *key, size_t n);
/* Whether a persistent kernel may have blocks of `block` threads: 128,
 * 256 or 384 (three warpgroups: the 192 x 192 GEMM tiles). */
bool target_cuda_mono_block_ok(long block);
/* The configuration a mono compile of p at precision ("fp16"; NULL: fp32)
 * takes when neither the schedule nor the tuning database names one, on
 * an sm_90 GPU (on an older one 256 threads where this says 384).
 * OUT: *block, *per_sm. */
void target_cuda_mono_heuristic(const sched_program *p, const char *precision, int *block, int *per_sm);
/* The row for config ("128x3"), or with config NULL the chosen one. No GPU
 * or no database: an error in d. OUT: *found, *out when found. */
kiln_status target_cuda_mono_lookup(const char *tuning_db, const char *key, const char *config,
                                    target_mono_config *out, bool *found, base_diag *d);
kiln_status target_cuda_mono_store(const char *tuning_db, const char *key, const char *config,
                                   const target_mono_config *c, base_diag *d);

#endif
