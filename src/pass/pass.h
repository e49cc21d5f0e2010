/*
 * pass.h: graph passes and the partition into groups.
 */
#ifndef KILN_PASS_H
#define KILN_PASS_H

#include "sched/sched.h"

/* Multi-node patterns the partition can make into one group, for targets
 * with a kernel for the whole pattern (pass_support.patterns). */
enum {
    /* MatMul(Q, K^T) [Mul|Div by a scalar] [Add(mask)] -> Softmax(last axis)
     * -> MatMul(., V) [-> Transpose keeping the last dim]: one
     * SCHED_GROUP_ATTENTION (pass_group_attention) */
    PASS_PATTERN_ATTENTION = 1 << 0,
    /* Pow(x, 2) or Mul(x, x) -> ReduceMean(last axis) -> Add(eps) -> Sqrt
     * -> Div(x, .) (or Reciprocal / Div(1, .) and Mul by x) [-> Mul(scale)]:
     * one SCHED_GROUP_ROWS of several nodes (pass_group_rms_norm) */
    PASS_PATTERN_RMS_NORM = 1 << 1,
};

/* Which ops a target can compile as templates, and how: the target's
 * support table (designated initializers indexed by KILN_OP_*). */
typedef struct pass_support {
    bool (*can_compile)(const ir_node *n); /* false: the node goes to a fallback segment */
    unsigned patterns;                     /* PASS_PATTERN_* the target has kernels for (0: none) */
} pass_support;

/* Partitions g (shapes inferred) into groups in execution order (out:
 * p->groups, p->n_groups: the array is base_malloc'd (sched_program_free),
 * the groups live in a). Fuses contraction epilogues
 * (bias, residual, activation, scale) and connected elementwise subgraphs
 * of one shape; nodes the target cannot compile become fallback segments;
 * a graph with values of data-dependent shape becomes one segment. Nodes
 * whose results no graph output depends on are left out. */
kiln_status pass_partition(ir_graph *g, const pass_support *s, sched_program *p, base_arena *a, base_diag *d);

/* Common subexpressions (cse.c): every reader of a node identical to an
 * earlier one (same op, attributes and inputs, constants compared by
 * their bytes; not random ops, unknown ops, ops with subgraphs, folded
 * nodes or graph outputs) reads the earlier one's outputs instead, which
 * leaves the repeat dead for pass_partition. OUT: *merged, how many. A
 * second run on the same graph merges nothing more. */
kiln_status pass_cse(ir_graph *g, int *merged, base_diag *d);

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

/* One operand of an attention group's MatMuls as the MatMul sees it:
 * dim i of the operand is dim perm[i] of the value read (a Transpose that
 * only feeds the MatMul is part of the group, so no copy is made). */
typedef struct pass_attn_operand {
    const ir_value *v;      /* the value read from outside the group */
    int rank;               /* the operand's rank (the MatMul input's) */
    /* The operand's dims, and the element strides and offset at which v
     * holds it: v itself, contiguous, unless the group absorbed views of v
     * (Transposes, reshapes, Slices, Gathers: ViT's q, k and v cut from
     * one [S, 1, 3E] projection and split into heads). */
    int64_t dims[IR_MAX_RANK], st[IR_MAX_RANK];
    int64_t offset;
} pass_attn_operand;

/* An attention group: out = softmax(scale * (q @ kt) + mask) @ v, the
 * softmax along the last axis, batch dims broadcast as MatMul does. The
 * head dims (q's last, v's last) are at most PASS_ATTN_MAX_HEAD. */
#define PASS_ATTN_MAX_HEAD 256
typedef struct pass_attention {
    pass_attn_operand q, kt, v; /* q [.., Sq, D], kt [.., D, Sk], v [.., Sk, Dv] */
    const ir_value *mask;       /* broadcast to [.., Sq, Sk]; NULL when none */
    double scale;               /* scalar Mul/Div on q, kt or the scores (1 when none) */
    const ir_value *scores;     /* the first MatMul's output (its shape; no place) */
    /* The value written: the second MatMul's output o [.., Sq, Dv], or the
     * output of a Transpose that only o feeds and that keeps o's last dim
     * last (BERT's and ViT's heads merge: perm 0,2,1,3). Then dim i of out
     * is dim out_perm[i] of o, whose shape is scores' batch dims, Sq, Dv. */
    const ir_value *out;
    bool out_transposed;
    int out_perm[IR_MAX_RANK];  /* identity when !out_transposed */
    /* The probabilities pass through Where(IsNaN(p), 0, p) before the second
     * MatMul (PyTorch's exports of masked attention): a row whose softmax is
     * NaN (all keys -inf, or a NaN or +inf score: then every element of the
     * row is NaN) contributes zeros instead. */
    bool nan_to_zero;
} pass_attention;

kiln_status pass_group_attention(const sched_group *grp, pass_attention *at, base_diag *d);

/* An RMSNorm group (PASS_PATTERN_RMS_NORM):
 * out = x / sqrt(mean(x^2 along the last axis) + eps) [* scale]. */
typedef struct pass_rms_norm {
    const ir_value *x;
    const ir_value *scale; /* [.., cols] with every dim but the last 1; NULL when none */
    double eps;
    const ir_value *out;
} pass_rms_norm;

kiln_status pass_group_rms_norm(const sched_group *grp, pass_rms_norm *rn, base_diag *d);

#endif
