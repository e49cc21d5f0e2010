/*
 * sched.h: groups, rOperators, rPrograms and the memory plan: what passes
 * and targets exchange between fusion and code emission.
 *
 * A group is the unit of scheduling (DESIGN.md "Group"): a contraction
 * (Conv, MatMul, Gemm) with its fused epilogue, a fused elementwise
 * subgraph (MonoNN's EWS), a row-wise normalisation, a fused attention
 * (MatMul-Softmax-MatMul, for targets that ask for it), a data-movement op,
 * or a fallback segment run by the reference interpreter. Each group becomes
 * one rOperator (Rammer 3.1): a function computing rTask t of n_rtasks.
 * The rProgram orders them in stages with waits; the memory plan places
 * every activation in one arena by liveness.
 */
#ifndef KILN_SCHED_H
#define KILN_SCHED_H

#include "ir/ir.h"

typedef enum sched_group_kind {
    SCHED_GROUP_CONV,        /* Conv (+ bias, residual, activation) */
    SCHED_GROUP_GEMM,        /* MatMul / Gemm (+ bias, residual, activation, scale) */
    SCHED_GROUP_POOL,        /* MaxPool / AveragePool */
    SCHED_GROUP_ROWS,        /* Softmax, LogSoftmax, LayerNormalization, GlobalAveragePool, RMSNorm */
    SCHED_GROUP_ELEMENTWISE, /* a fused subgraph of elementwise ops with one output shape */
    SCHED_GROUP_MOVE,        /* data movement: Transpose, Concat, Slice, Gather, Expand, ... */
    SCHED_GROUP_ALIAS,       /* Reshape-like: output shares the input's memory, no code */
    SCHED_GROUP_FALLBACK,    /* a segment run by the reference interpreter */
    SCHED_GROUP_ATTENTION,   /* MatMul-Softmax-MatMul attention (pass.h PASS_PATTERN_ATTENTION) */
    SCHED_GROUP_KIND_COUNT
} sched_group_kind;

const char *sched_group_kind_name(sched_group_kind k);

/* Where a value lives at run time. */
typedef enum sched_loc {
    SCHED_LOC_NONE = 0,
    SCHED_LOC_ARENA,   /* offset into the activation arena */
    SCHED_LOC_WEIGHTS, /* offset into the weights blob */
    SCHED_LOC_INPUT,   /* the caller's input buffer io[index] */
    SCHED_LOC_OUTPUT,  /* the caller's output buffer io[n_inputs + index] */
} sched_loc;

typedef struct sched_place {
    sched_loc loc;
    uint64_t offset; /* ARENA / WEIGHTS: bytes; INPUT / OUTPUT: io index */
} sched_place;

typedef struct sched_group {
    sched_group_kind kind;
    int id;
    ir_node **nodes;   /* in topological order; nodes[0] is the anchor */
    int n_nodes;
    ir_value **in;     /* values read from outside the group */
    int n_in;
    ir_value **out;    /* values produced here and read outside (or graph outputs) */
    int n_out;
    const char *name;  /* "conv1+relu1": the ONNX nodes it computes */
    int64_t n_rtasks;  /* set by the target's lowering */
    int step;          /* position in the rProgram */
} sched_group;

typedef struct sched_program {
    sched_group **groups; /* in execution order */
    int n_groups;
    sched_place *place;   /* indexed by value id of the top graph */
    uint64_t arena_bytes;
    uint64_t weight_bytes;
    int n_values;
    int merged_nodes;     /* repeated nodes pass_cse left out (api_plan) */
} sched_program;

/* Frees what the program owns outside the arena (its arrays). */
void sched_program_free(sched_program *p);

/* The memory plan: every non-constant value of g gets a place. Graph
 * inputs and outputs live in the caller's buffers; aliases share their
 * source's place; activations share arena space when their lifetimes (in
 * group order, or with by_wave in waves of the data graph) do not overlap,
 * a lifetime lasting `hold` more steps or waves past its last reader's.
 * Greedy by size, 64-byte aligned offsets. Constants are placed in the
 * weights blob in order of first use. */
kiln_status sched_plan_memory(const ir_graph *g, sched_program *p, base_arena *a, bool by_wave, int hold,
                              base_diag *d);

/* Whether group b, later in g's program p, must wait for group a: b reads
 * bytes a writes, or writes bytes a reads or writes (deps.c). */
bool sched_group_depends(const ir_graph *g, const sched_program *p, const sched_group *a, const sched_group *b);
/* Whether b depends on a only by reading v, one of a's outputs: b reads
 * nothing else that shares bytes with a's outputs, and writes nothing that
 * shares bytes with a's inputs or outputs (deps.c). The cuda target's
 * persistent kernels then let b's rTasks wait for the rows of v they read. */
bool sched_group_depends_via(const ir_graph *g, const sched_program *p, const sched_group *a, const sched_group *b,
                             const ir_value *v);

/* A persistent kernel's stage deals its rTasks out round-robin: the
 * stage's rTask t (its members' rTasks one after another, in member
 * order) runs on block t % blocks, whenever the block gets to it, so a
 * stage of more rTasks than blocks lasts as long as its busiest block
 * (dispatch.c). load[0..blocks) holds each block's busy time so far;
 * sched_stage_add adds n rTasks of `each` that follow `before` rTasks of
 * the stage, and sched_stage_time is the stage's time were they added
 * (load unchanged). */
void sched_stage_add(double *load, int blocks, int64_t before, int64_t n, double each);
double sched_stage_time(const double *load, int blocks, int64_t before, int64_t n, double each);

#endif
