/*
 * compile.h: the compile driver: a loaded model with bound input shapes ->
 * a .kiln artifact, through partition, memory plan and a target.
 */
#ifndef KILN_API_COMPILE_H
#define KILN_API_COMPILE_H

#include "target/target.h"

typedef struct api_compile_opts {
    const char *target;  /* "c" (default) or "cuda" */
    int n_threads;       /* the vEUs the program is tuned for */
    const char *emit_dir;
    const char *meta;    /* free text stored in the artifact */
    void (*progress)(void *user, const char *line);
    void *progress_user;
    const char *precision; /* cuda: "fp32" (default), "fp16", "bf16" */
    bool tune;             /* cuda: time template candidates on the device */
    const char *schedule;  /* cuda: NULL (waves), "waves", "kernels", or a mono one ("mono", "mono:256x1", ...) */
    const char *tuning_db; /* cuda: NULL for the default database */
    double tune_budget_s;  /* cuda with tune: seconds of measuring, then the cost model's choices; 0: no limit */
} api_compile_opts;

/* What compiling found, for reports. */
typedef struct api_compile_report {
    int n_groups_by_kind[SCHED_GROUP_KIND_COUNT];
    int n_stages, n_fallback_nodes;
    uint64_t arena_bytes, weight_bytes, code_bytes;
    double seconds_partition, seconds_build, seconds_total;
} api_compile_report;

/* Partitions and plans g (shapes inferred; sets the byte sizes of inferred
 * values) for a target and schedule (target_options.schedule; NULL: the
 * default) without building: what `kiln inspect` reports and what the
 * compile builds. OUT: p (sched_program_free). */
kiln_status api_plan(ir_graph *g, const target *t, const char *schedule, sched_program *p, base_arena *a,
                     base_diag *d);

/* Compiles m's graph (input shapes bound, shapes inferred) into an artifact at out_path. */
kiln_status api_compile(ir_model *m, const api_compile_opts *o, const char *out_path, api_compile_report *rep,
                        base_diag *d);

#endif
