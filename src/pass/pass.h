/*
 * pass.h: graph passes and the partition into groups.
 */
#ifndef KILN_PASS_H
#define KILN_PASS_H

#include "sched/sched.h"

/* Which ops a target can compile as templates, and how: the target's
 * support table (designated initializers indexed by KILN_OP_*). */
typedef struct pass_support {
    bool (*can_compile)(const ir_node *n); /* false: the node goes to a fallback segment */
} pass_support;

/* Partitions g (shapes inferred) into groups in execution order (out:
 * p->groups, p->n_groups: the array is base_malloc'd (sched_program_free),
 * the groups live in a). Fuses contraction epilogues
 * (bias, residual, activation, scale) and connected elementwise subgraphs
 * of one shape; nodes the target cannot compile become fallback segments;
 * a graph with values of data-dependent shape becomes one segment. Nodes
 * whose results no graph output depends on are left out. */
kiln_status pass_partition(ir_graph *g, const pass_support *s, sched_program *p, base_arena *a, base_diag *d);

/* Activations a contraction epilogue can apply (the c target's kc_act has
 * the same order, checked there). */
typedef enum pass_act {
    PASS_ACT_NONE = 0,
    PASS_ACT_RELU,
    PASS_ACT_CLIP,
    PASS_ACT_LEAKY_RELU,
    PASS_ACT_SIGMOID,
    PASS_ACT_TANH,
    PASS_ACT_GELU,
    PASS_ACT_GELU_TANH,
    PASS_ACT_SILU,
    PASS_ACT_HARD_SWISH,
    PASS_ACT_HARD_SIGMOID,
    PASS_ACT_SOFTPLUS,
    PASS_ACT_COUNT
} pass_act;

/* Epilogue description of a contraction group (filled by pass_partition
 * when it fuses; read by the target's emitter). */
typedef struct pass_epilogue {
    const ir_value *bias;     /* constant, per output channel / column */
    const ir_value *residual; /* same shape as the output */
    pass_act act;
    float alpha, beta;        /* activation parameters */
    float scale;              /* multiplies the accumulator (1 when none) */
} pass_epilogue;

/* The epilogue of a contraction group: its nodes after the anchor. */
kiln_status pass_group_epilogue(const sched_group *grp, pass_epilogue *ep, base_diag *d);

#endif
