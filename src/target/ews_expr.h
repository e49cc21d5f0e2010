/*
 * ews_expr.h: the per-element code of fused elementwise groups (MonoNN's
 * EWS), shared by the targets that generate C-like code (`c` and `cuda`).
 * A target decides the loops and the loads; this builder writes, for each
 * node of a group, the statements computing one element of its output from
 * named operands, with the reference interpreter's semantics
 * (ir/interp_elementwise.c, ir/interp_quant.c).
 *
 *     static const ews_lang lang = {.type = c_type, .math = "kc_", .helper = "kx_", ...};
 *     if (ews_can_elementwise(&lang, node)) ...          // the support test
 *     ews_operand ops[n];                                // grp->in, named by the target
 *     ews_operand_lit(&lang, &ops[k]);                   // constant scalars become literals
 *     ews_expr x = {.lang = &lang, .ops = ops, .n_ops = n, .body = &body, .indent = "    "};
 *     for (i...) if (!ews_expr_node(&x, grp->nodes[i])) ...   // "const float v12 = x0 + x1;"
 *
 * Node outputs are named v<value id>; the target stores the ones the group
 * writes. What differs between targets is in the ews_lang: type names, the
 * prefixes of the helper functions the generated code calls (the c target
 * defines them in its generated prelude and kc_math.h, the cuda target in
 * kernels/kg_math.h), how float32 library functions are computed, and
 * whether float16/bfloat16 values are computed (in float).
 */
#ifndef KILN_TARGET_EWS_EXPR_H
#define KILN_TARGET_EWS_EXPR_H

#include "base/base.h"
#include "ir/ir.h"

typedef struct ews_lang {
    /* The C type a value of dtype t is computed in ("float" for float32;
     * "uint8_t" or "kg_u8" for bool); NULL: the target does not handle t. */
    const char *(*type)(kiln_dtype t);
    /* Prefix of the float32 functions exp, log, tanh, erf, sigmoid, gelu:
     * "kc_" gives kc_expf(x). */
    const char *math;
    /* Prefix of the semantic helpers (integer division and modulo, saturating
     * float-to-integer conversion, quantization, double activations):
     * "kx_" gives kx_idiv(x, y). */
    const char *helper;
    /* Spellings of float infinity and NaN ("INFINITY", "NAN"). */
    const char *inf, *nan;
    /* true: float32 library functions in float (acosf(x)); false: in double,
     * rounded once ((float)acos((double)x)), as the interpreter computes. */
    bool f32_native;
    /* true: float16 and bfloat16 values are computed in float and rounded to
     * their dtype at each node's output (<helper>rnd_f16(x)). */
    bool half;
} ews_lang;

/* A value the group reads from outside. */
typedef struct ews_operand {
    const ir_value *v;
    char name[96];   /* how the per-element code reads it: "x3", "x3[k]" or a literal */
    bool is_lit;     /* a constant scalar: name is its literal (ews_operand_lit) */
    bool used;       /* the code reads it (CastLike's second input is not read) */
} ews_operand;

typedef struct ews_expr {
    const ews_lang *lang;
    ews_operand *ops;
    int n_ops;
    base_str *body;     /* statements are appended here */
    const char *indent; /* before each statement */
} ews_expr;

/* Whether node n can be part of a fused elementwise group of this target. */
bool ews_can_elementwise(const ews_lang *L, const ir_node *n);

/* Makes o a literal (is_lit, name) when its value is a constant scalar;
 * other operands are left for the target to name. */
void ews_operand_lit(const ews_lang *L, ews_operand *o);

/* Appends to x->body the statements defining v<id> of n's output from the
 * operands and earlier nodes' values; marks the operands read. false: n is
 * not an op the builder handles (ews_can_elementwise refused it). */
bool ews_expr_node(ews_expr *x, const ir_node *n);

/* Element strides of a tensor of type v broadcast (numpy rules, aligned
 * at the right) to dims[0..rank): 0 along broadcast dims. */
void ews_bcast_strides(const ir_tensor *v, int rank, const int64_t *dims, int64_t *str);

#endif
