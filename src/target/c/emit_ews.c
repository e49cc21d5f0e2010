/*
 * emit_ews.c: the `c` target's fused elementwise groups (MonoNN's EWS,
 * DESIGN.md "Group"): one loop nest per group that computes every node of
 * the group for one element at a time, the group's internal values living
 * in locals (registers), and stores only the values read outside.
 *
 * Loop structure. The output shape's dims are collapsed wherever every
 * operand is contiguous (or broadcast) across them. What is left is rows
 * of an inner dim along which each operand's stride is 1 or 0, so the
 * inner loop has constant strides and gcc -O3 vectorizes it; an operand
 * constant along the inner dim is loaded once per row, a scalar once per
 * rTask, a constant scalar is written into the code. rTasks take runs of
 * rows, or chunks of a row when there are fewer rows than rTasks wanted.
 *
 * Semantics follow the reference interpreter (ir/interp_elementwise.c):
 * integers wrap, Div truncates with x / 0 = 0, Mod takes the divisor's
 * sign unless fmod, float-to-integer casts saturate with NaN -> 0; these
 * live in the kx_* helpers of the generated prelude. Floats compute in
 * their own precision where the interpreter uses double: exp, log, tanh,
 * erf, sigmoid and gelu go through kc_math.h's vectorizable functions,
 * other transcendental functions through libm in double, rounded once.
 * f16, bf16 and strings are not handled: such nodes run in fallback
 * segments.
 */
#include "target/c/c-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* An rTask gets at least this many elements, and a thread at most
 * EWS_TASKS_PER_THREAD rTasks of one group. */
#define EWS_MIN_TASK_ELEMS 4096
#define EWS_TASKS_PER_THREAD 4
/* Chunks of a split row start at multiples of this many elements. */
#define EWS_CHUNK_ALIGN 16

/* ---- dtypes and attributes ------------------------------------------------------ */

static bool is_float(kiln_dtype t) { return t == KILN_F32 || t == KILN_F64; }
static bool is_sint(kiln_dtype t) { return t == KILN_I8 || t == KILN_I16 || t == KILN_I32 || t == KILN_I64; }
static bool is_uint(kiln_dtype t) { return t == KILN_U8 || t == KILN_U16 || t == KILN_U32 || t == KILN_U64; }
static bool is_int(kiln_dtype t) { return is_sint(t) || is_uint(t); }
static bool is_num(kiln_dtype t) { return is_float(t) || is_int(t); }

/* The unsigned type integer arithmetic of dtype t wraps in (C promotes
 * narrower types to int, whose overflow is undefined). */
static const char *wrap_type(kiln_dtype t) { return ir_dtype_size(t) == 8 ? "uint64_t" : "uint32_t"; }

static bool has_in(const ir_node *n, int i) { return i < n->n_in && n->in[i]; }

/* ---- literals ---------------------------------------------------------------------- */

/* A C literal of value v in a float type (exact: hex floats). */
static const char *lit_float(double v, bool f32, char *buf, size_t n)
{
    if (f32) v = (float)v;
    if (isnan(v)) snprintf(buf, n, f32 ? "NAN" : "(double)NAN");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? (f32 ? "INFINITY" : "(double)INFINITY") : (f32 ? "(-INFINITY)" : "(-(double)INFINITY)"));
    else if (v < 0 || (v == 0 && signbit(v))) snprintf(buf, n, f32 ? "(%af)" : "(%a)", v);
    else snprintf(buf, n, f32 ? "%af" : "%a", v);
    return buf;
}

/* A C literal of an integer or bool dtype holding v (a u64 as its bits). */
static const char *lit_int(kiln_dtype t, int64_t v, char *buf, size_t n)
{
    if (t == KILN_U64) snprintf(buf, n, "UINT64_C(%llu)", (unsigned long long)v);
    else if (t == KILN_I64 && v == INT64_MIN) snprintf(buf, n, "INT64_MIN");
    else if (t == KILN_I64) snprintf(buf, n, "INT64_C(%lld)", (long long)v);
    else snprintf(buf, n, "((%s)%lld)", c_type(t), (long long)v);
    return buf;
}

/* ---- what compiles ------------------------------------------------------------------- */

static bool unary_float_only(kiln_op op)
{
    switch (op) {
    case KILN_OP_ABS: case KILN_OP_NEG: case KILN_OP_SIGN: case KILN_OP_RELU: case KILN_OP_NOT:
    case KILN_OP_BITWISE_NOT:
        return false;
    default: return true;
    }
}

/* The unary ops open ops.def (Abs .. Mish), the binary ones follow (Add .. BitwiseXor). */
_Static_assert(KILN_OP_ABS == 0 && KILN_OP_MISH + 1 == KILN_OP_ADD && KILN_OP_BITWISE_XOR + 1 == KILN_OP_MAX,
               "emit_ews.c reads op ranges from the order of ops.def");

static bool is_unary(kiln_op op) { return op <= KILN_OP_MISH; }

static bool is_binary(kiln_op op) { return op >= KILN_OP_ADD && op <= KILN_OP_BITWISE_XOR; }

static bool is_compare(kiln_op op)
{
    return op == KILN_OP_EQUAL || op == KILN_OP_GREATER || op == KILN_OP_GREATER_OR_EQUAL || op == KILN_OP_LESS ||
           op == KILN_OP_LESS_OR_EQUAL;
}

static bool unary_ok(const ir_node *n, kiln_dtype t)
{
    kiln_op op = n->op;
    if (unary_float_only(op)) {
        if (!is_float(t)) return false;
    } else if (op == KILN_OP_NOT) {
        if (t != KILN_BOOL) return false;
    } else if (op == KILN_OP_BITWISE_NOT) {
        if (!is_int(t)) return false;
    } else if (op == KILN_OP_NEG || op == KILN_OP_RELU) {
        if (!is_float(t) && !is_sint(t)) return false;
    } else if (!is_num(t)) {
        return false;
    }
    switch (op) {
    case KILN_OP_ELU: case KILN_OP_LEAKY_RELU: case KILN_OP_THRESHOLDED_RELU:
        return ir_node_attr_kind_ok(n, "alpha", IR_ATTR_FLOAT);
    case KILN_OP_CELU: return ir_node_attr_kind_ok(n, "alpha", IR_ATTR_FLOAT) && ir_node_attr_float(n, "alpha", 1.0) != 0;
    case KILN_OP_SELU: return ir_node_attr_kind_ok(n, "alpha", IR_ATTR_FLOAT) && ir_node_attr_kind_ok(n, "gamma", IR_ATTR_FLOAT);
    case KILN_OP_HARD_SIGMOID: return ir_node_attr_kind_ok(n, "alpha", IR_ATTR_FLOAT) && ir_node_attr_kind_ok(n, "beta", IR_ATTR_FLOAT);
    case KILN_OP_SHRINK: return ir_node_attr_kind_ok(n, "bias", IR_ATTR_FLOAT) && ir_node_attr_kind_ok(n, "lambd", IR_ATTR_FLOAT);
    case KILN_OP_GELU: {
        if (!ir_node_attr_kind_ok(n, "approximate", IR_ATTR_STRING)) return false;
        const char *a = ir_node_attr_str(n, "approximate", "none");
        return strcmp(a, "none") == 0 || strcmp(a, "tanh") == 0;
    }
    case KILN_OP_IS_INF:
        return ir_node_attr_kind_ok(n, "detect_positive", IR_ATTR_INT) && ir_node_attr_kind_ok(n, "detect_negative", IR_ATTR_INT);
    default: return true;
    }
}

static bool binary_ok(const ir_node *n)
{
    kiln_dtype a = n->in[0]->t.dtype, b = n->in[1]->t.dtype;
    kiln_op op = n->op;
    /* Before opset 7, broadcasting was spelled with attributes (and PRelu's
     * slope ran along axis 1): rare enough to leave to the interpreter. */
    if (n->opset < 7) return false;
    if (op != KILN_OP_POW && a != b) return false;
    switch (op) {
    case KILN_OP_AND: case KILN_OP_OR: case KILN_OP_XOR: return a == KILN_BOOL;
    case KILN_OP_EQUAL: return is_num(a) || a == KILN_BOOL;
    case KILN_OP_BIT_SHIFT: {
        if (!is_uint(a) || !ir_node_attr_kind_ok(n, "direction", IR_ATTR_STRING)) return false;
        const char *dir = ir_node_attr_str(n, "direction", "");
        return strcmp(dir, "LEFT") == 0 || strcmp(dir, "RIGHT") == 0;
    }
    case KILN_OP_BITWISE_AND: case KILN_OP_BITWISE_OR: case KILN_OP_BITWISE_XOR: return is_int(a);
    case KILN_OP_POW: return is_num(a) && is_num(b);
    case KILN_OP_MOD:
        if (!ir_node_attr_kind_ok(n, "fmod", IR_ATTR_INT)) return false;
        return is_int(a) || (is_float(a) && ir_node_attr_int(n, "fmod", 0) != 0);
    default: return is_num(a);
    }
}

static bool scalar_of(const ir_value *v, kiln_dtype t)
{
    return v && v->shape_known && v->t.dtype == t && v->t.rank <= 1 && ir_numel(&v->t) == 1;
}

/* QuantizeLinear / DequantizeLinear with a per-tensor f32 scale. */
static bool quant_ok(const ir_node *n)
{
    const ir_value *x = n->in[0], *scale = n->in[1], *zp = has_in(n, 2) ? n->in[2] : NULL;
    if (!scalar_of(scale, KILN_F32)) return false;
    if (ir_node_attr(n, "block_size") && ir_node_attr_int(n, "block_size", 0) != 0) return false;
    kiln_dtype q = n->op == KILN_OP_QUANTIZE_LINEAR ? n->out[0]->t.dtype : x->t.dtype;
    bool range = q == KILN_U8 || q == KILN_I8 || q == KILN_U16 || q == KILN_I16;
    if (zp && !scalar_of(zp, q)) return false;
    if (n->op == KILN_OP_QUANTIZE_LINEAR) {
        /* saturate=0 only matters for the float8 types, which are refused */
        return range && (x->t.dtype == KILN_F32 || x->t.dtype == KILN_I32);
    }
    return (range || q == KILN_I32) && n->out[0]->t.dtype == KILN_F32;
}

bool c_can_elementwise(const ir_node *n)
{
    if (n->op >= KILN_OP_COUNT || !(ir_ops[n->op].flags & IR_OPF_ELEMENTWISE)) return false;
    if (n->n_out != 1 || !n->out[0] || !n->out[0]->shape_known || !c_type(n->out[0]->t.dtype)) return false;
    if (n->n_in < 1 || !n->in[0]) return false;
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = n->in[i];
        if (!v) continue;
        if (!v->shape_known || !c_type(v->t.dtype)) return false;
        if (v->t.rank > n->out[0]->t.rank && !(n->op == KILN_OP_CAST_LIKE && i == 1)) return false;
        if (v->graph != n->graph) return false;
    }
    kiln_dtype t = n->in[0]->t.dtype;
    kiln_op op = n->op;
    if (is_unary(op)) return unary_ok(n, t);
    if (is_binary(op)) return n->n_in == 2 && n->in[1] && binary_ok(n);
    switch (op) {
    case KILN_OP_MAX: case KILN_OP_MIN: case KILN_OP_SUM: case KILN_OP_MEAN:
        for (int i = 0; i < n->n_in; i++)
            if (!n->in[i] || n->in[i]->t.dtype != t) return false;
        return op == KILN_OP_MAX || op == KILN_OP_MIN ? is_num(t) : is_float(t);
    case KILN_OP_CLIP:
        if (n->opset < 11)
            return is_float(t) && ir_node_attr_kind_ok(n, "min", IR_ATTR_FLOAT) && ir_node_attr_kind_ok(n, "max", IR_ATTR_FLOAT);
        for (int i = 1; i < n->n_in; i++)
            if (n->in[i] && !scalar_of(n->in[i], t)) return false;
        return is_num(t);
    case KILN_OP_WHERE:
        return n->n_in == 3 && n->in[1] && n->in[2] && t == KILN_BOOL && n->in[1]->t.dtype == n->in[2]->t.dtype;
    case KILN_OP_CAST: return ir_node_attr_kind_ok(n, "to", IR_ATTR_INT) && n->out[0]->t.dtype != KILN_UNDEF;
    case KILN_OP_CAST_LIKE: return n->n_in == 2 && n->in[1];
    case KILN_OP_QUANTIZE_LINEAR: case KILN_OP_DEQUANTIZE_LINEAR: return n->n_in >= 2 && n->in[1] && quant_ok(n);
    default: return false;
    }
}

/* ---- the generated prelude ----------------------------------------------------------- */

static const char prelude[] =
    "/* Elementwise helpers (emit_ews.c): the reference interpreter's integer and\n"
    " * conversion semantics, and activations it computes in double. */\n"
    "static inline int64_t kx_idiv(int64_t x, int64_t y)\n"
    "{\n"
    "    if (y == 0) return 0;\n"
    "    if (y == -1) return (int64_t)(0 - (uint64_t)x); /* INT64_MIN / -1 wraps */\n"
    "    return x / y;\n"
    "}\n"
    "static inline uint64_t kx_udiv(uint64_t x, uint64_t y) { return y == 0 ? 0 : x / y; }\n"
    "/* Mod with fmod=0: the sign of the divisor, as Python's %. */\n"
    "static inline int64_t kx_imod(int64_t x, int64_t y)\n"
    "{\n"
    "    if (y == 0 || y == -1) return 0;\n"
    "    int64_t r = x % y;\n"
    "    if (r != 0 && (r < 0) != (y < 0)) r += y;\n"
    "    return r;\n"
    "}\n"
    "static inline int64_t kx_ifmod(int64_t x, int64_t y) { return y == 0 || y == -1 ? 0 : x % y; }\n"
    "static inline uint64_t kx_umod(uint64_t x, uint64_t y) { return y == 0 ? 0 : x % y; }\n"
    "static inline int64_t kx_ipow(int64_t base, int64_t e, int exp_uns)\n"
    "{\n"
    "    if (!exp_uns && e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;\n"
    "    uint64_t r = 1, m = (uint64_t)base, k = (uint64_t)e;\n"
    "    for (; k; k >>= 1) {\n"
    "        if (k & 1) r *= m;\n"
    "        m *= m;\n"
    "    }\n"
    "    return (int64_t)r;\n"
    "}\n"
    "/* Float to integer: truncation, saturating at the int64 range, NaN -> 0;\n"
    " * narrower types then wrap. */\n"
    "static inline int64_t kx_f2i(double v)\n"
    "{\n"
    "    if (v != v) return 0;\n"
    "    if (v >= 9.2233720368547758e18) return INT64_MAX;\n"
    "    if (v <= -9.2233720368547758e18) return INT64_MIN;\n"
    "    return (int64_t)v;\n"
    "}\n"
    "static inline uint64_t kx_f2u64(double v) { return v >= 9.2233720368547758e18 ? (uint64_t)v : (uint64_t)kx_f2i(v); }\n"
    "static inline float kx_clamp01f(float v) { return v < 0 ? 0.0f : v > 1 ? 1.0f : v; }\n"
    "static inline double kx_clamp01(double v) { return v < 0 ? 0.0 : v > 1 ? 1.0 : v; }\n"
    "static inline double kx_softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }\n"
    "static inline double kx_sigmoid(double x)\n"
    "{\n"
    "    if (x >= 0) return 1.0 / (1.0 + exp(-x));\n"
    "    double z = exp(x);\n"
    "    return z / (1.0 + z);\n"
    "}\n"
    "static inline double kx_celu(double x, double alpha)\n"
    "{\n"
    "    if (x != x) return x;\n"
    "    double neg = alpha * expm1(x / alpha);\n"
    "    return (x > 0 ? x : 0.0) + (neg < 0 ? neg : 0.0);\n"
    "}\n"
    "static inline double kx_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }\n"
    "static inline double kx_gelu_tanh(double x)\n"
    "{\n"
    "    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));\n"
    "}\n"
    "/* QuantizeLinear: round half to even, NaN -> 0, plus the zero point, saturated. */\n"
    "static inline int64_t kx_quantize(double v, double zp, double lo, double hi)\n"
    "{\n"
    "    double q = nearbyint(v);\n"
    "    if (q != q) q = 0;\n"
    "    q += zp;\n"
    "    return (int64_t)(q < lo ? lo : q > hi ? hi : q);\n"
    "}\n\n";

static void need_prelude(c_emitter *e)
{
    if (!strstr(base_str_get(&e->decls), "kx_idiv(")) base_str_cat(&e->decls, prelude);
}

/* ---- the emitter ------------------------------------------------------------------------ */

/* A value the group reads from outside. */
typedef struct operand {
    const ir_value *v;
    bool is_lit;                /* a constant scalar written into the code as lit */
    char lit[80];
    int64_t str[IR_MAX_RANK];   /* element strides along the (collapsed) output dims; 0: broadcast */
    bool used;                  /* read by the code (CastLike's second input is not) */
} operand;

typedef struct ews {
    c_emitter *e;
    const sched_group *grp;
    operand *ops;
    int n_ops;
    base_str body;              /* the inner loop's statements */
    kiln_status st;
    const ir_node *bad;         /* the node the emitter could not handle */
} ews;

/* The C name of v inside the inner loop: x<k> for operand k, v<id> for a
 * value computed in the group, or a literal. Marks operands used. */
static const char *ref(ews *w, const ir_value *v, char *buf, size_t n)
{
    for (int k = 0; k < w->n_ops; k++) {
        operand *o = &w->ops[k];
        if (o->v != v) continue;
        if (o->is_lit) return o->lit;
        o->used = true;
        snprintf(buf, n, "x%d", k);
        return buf;
    }
    snprintf(buf, n, "v%d", v->id);
    return buf;
}

static void def(ews *w, const ir_node *n, const char *expr)
{
    base_str_printf(&w->body, "            const %s v%d = %s;\n", c_type(n->out[0]->t.dtype), n->out[0]->id, expr);
}

/* x converted from a double expression into dtype t, as ir_set_f64 does. */
static void from_double(kiln_dtype t, const char *x, char *buf, size_t n)
{
    switch (t) {
    case KILN_F32: snprintf(buf, n, "(float)(%s)", x); break;
    case KILN_F64: snprintf(buf, n, "(%s)", x); break;
    case KILN_BOOL: snprintf(buf, n, "(uint8_t)((%s) != 0)", x); break;
    case KILN_U64: snprintf(buf, n, "kx_f2u64(%s)", x); break;
    default: snprintf(buf, n, "(%s)kx_f2i(%s)", c_type(t), x); break;
    }
}

/* f32: fn computed in double and rounded once; f64: fn itself. */
static void libm1(char *buf, size_t n, const char *fn, const char *a, bool f32)
{
    if (f32) snprintf(buf, n, "(float)%s((double)%s)", fn, a);
    else snprintf(buf, n, "%s(%s)", fn, a);
}

static bool emit_unary(ews *w, const ir_node *n)
{
    char ab[32], x[1024], l1[96], l2[96], l3[96];
    const char *a = ref(w, n->in[0], ab, sizeof ab);
    kiln_dtype t = n->in[0]->t.dtype;
    const char *T = c_type(t);
    bool f32 = t == KILN_F32;
    const char *sfx = f32 ? "f" : "";
    if (!is_float(t)) {
        const char *W = wrap_type(t);
        switch (n->op) {
        case KILN_OP_ABS:
            if (is_uint(t)) snprintf(x, sizeof x, "%s", a);
            else snprintf(x, sizeof x, "(%s)(%s < 0 ? 0 - (%s)%s : (%s)%s)", T, a, W, a, W, a);
            break;
        case KILN_OP_NEG: snprintf(x, sizeof x, "(%s)(0 - (%s)%s)", T, W, a); break;
        case KILN_OP_SIGN:
            if (is_uint(t)) snprintf(x, sizeof x, "(%s)(%s != 0)", T, a);
            else snprintf(x, sizeof x, "(%s)((%s > 0) - (%s < 0))", T, a, a);
            break;
        case KILN_OP_RELU: snprintf(x, sizeof x, "(%s < 0 ? (%s)0 : %s)", a, T, a); break;
        case KILN_OP_NOT: snprintf(x, sizeof x, "(uint8_t)(%s == 0)", a); break;
        case KILN_OP_BITWISE_NOT: snprintf(x, sizeof x, "(%s)~%s", T, a); break;
        default: return false;
        }
        def(w, n, x);
        return true;
    }
    switch (n->op) {
    case KILN_OP_ABS: snprintf(x, sizeof x, "fabs%s(%s)", sfx, a); break;
    case KILN_OP_NEG: snprintf(x, sizeof x, "-%s", a); break;
    case KILN_OP_CEIL: snprintf(x, sizeof x, "ceil%s(%s)", sfx, a); break;
    case KILN_OP_FLOOR: snprintf(x, sizeof x, "floor%s(%s)", sfx, a); break;
    case KILN_OP_ROUND: snprintf(x, sizeof x, "nearbyint%s(%s)", sfx, a); break; /* half to even */
    case KILN_OP_SQRT: snprintf(x, sizeof x, "sqrt%s(%s)", sfx, a); break;
    case KILN_OP_RECIPROCAL: snprintf(x, sizeof x, "%s / %s", lit_float(1.0, f32, l1, sizeof l1), a); break;
    case KILN_OP_ACOS: libm1(x, sizeof x, "acos", a, f32); break;
    case KILN_OP_ACOSH: libm1(x, sizeof x, "acosh", a, f32); break;
    case KILN_OP_ASIN: libm1(x, sizeof x, "asin", a, f32); break;
    case KILN_OP_ASINH: libm1(x, sizeof x, "asinh", a, f32); break;
    case KILN_OP_ATAN: libm1(x, sizeof x, "atan", a, f32); break;
    case KILN_OP_ATANH: libm1(x, sizeof x, "atanh", a, f32); break;
    case KILN_OP_COS: libm1(x, sizeof x, "cos", a, f32); break;
    case KILN_OP_COSH: libm1(x, sizeof x, "cosh", a, f32); break;
    case KILN_OP_SIN: libm1(x, sizeof x, "sin", a, f32); break;
    case KILN_OP_SINH: libm1(x, sizeof x, "sinh", a, f32); break;
    case KILN_OP_TAN: libm1(x, sizeof x, "tan", a, f32); break;
    case KILN_OP_SOFTPLUS: libm1(x, sizeof x, "kx_softplus", a, f32); break;
    case KILN_OP_EXP: snprintf(x, sizeof x, f32 ? "kc_expf(%s)" : "exp(%s)", a); break;
    case KILN_OP_LOG: snprintf(x, sizeof x, f32 ? "kc_logf(%s)" : "log(%s)", a); break;
    case KILN_OP_TANH: snprintf(x, sizeof x, f32 ? "kc_tanhf(%s)" : "tanh(%s)", a); break;
    case KILN_OP_ERF: snprintf(x, sizeof x, f32 ? "kc_erff(%s)" : "erf(%s)", a); break;
    case KILN_OP_SIGMOID: snprintf(x, sizeof x, f32 ? "kc_sigmoidf(%s)" : "kx_sigmoid(%s)", a); break;
    case KILN_OP_SIGN:
        snprintf(x, sizeof x, "(%s > 0 ? %s : %s < 0 ? %s : %s)", a, lit_float(1, f32, l1, sizeof l1), a,
                 lit_float(-1, f32, l2, sizeof l2), a);
        break;
    case KILN_OP_RELU: snprintf(x, sizeof x, "(%s < 0 ? %s : %s)", a, lit_float(0, f32, l1, sizeof l1), a); break;
    case KILN_OP_IS_NAN: snprintf(x, sizeof x, "(uint8_t)(%s != %s)", a, a); break;
    case KILN_OP_IS_INF: {
        bool pos = ir_node_attr_int(n, "detect_positive", 1) != 0, neg = ir_node_attr_int(n, "detect_negative", 1) != 0;
        if (pos && neg) snprintf(x, sizeof x, "(uint8_t)(fabs%s(%s) == INFINITY)", sfx, a);
        else if (pos) snprintf(x, sizeof x, "(uint8_t)(%s == INFINITY)", a);
        else if (neg) snprintf(x, sizeof x, "(uint8_t)(%s == -INFINITY)", a);
        else snprintf(x, sizeof x, "(uint8_t)0");
        break;
    }
    case KILN_OP_SOFTSIGN:
        snprintf(x, sizeof x, "%s / (%s + fabs%s(%s))", a, lit_float(1, f32, l1, sizeof l1), sfx, a);
        break;
    case KILN_OP_ELU: {
        double al = ir_node_attr_float(n, "alpha", 1.0);
        snprintf(l2, sizeof l2, "%s * expm1((double)%s)", lit_float(al, false, l1, sizeof l1), a);
        from_double(t, l2, l3, sizeof l3);
        snprintf(x, sizeof x, "(%s < 0 ? %s : %s)", a, l3, a);
        break;
    }
    case KILN_OP_SELU: {
        double al = ir_node_attr_float(n, "alpha", 1.67326319217681884765625);
        double ga = ir_node_attr_float(n, "gamma", 1.05070102214813232421875);
        char g[64], neg[256], pos[256];
        lit_float(ga, false, g, sizeof g);
        snprintf(l2, sizeof l2, "%s * %s * expm1((double)%s)", g, lit_float(al, false, l1, sizeof l1), a);
        from_double(t, l2, neg, sizeof neg);
        snprintf(l2, sizeof l2, "%s * (double)%s", g, a);
        from_double(t, l2, pos, sizeof pos);
        snprintf(x, sizeof x, "(%s <= 0 ? %s : %s)", a, neg, pos);
        break;
    }
    case KILN_OP_CELU:
        snprintf(l2, sizeof l2, "kx_celu((double)%s, %s)", a, lit_float(ir_node_attr_float(n, "alpha", 1.0), false, l1, sizeof l1));
        from_double(t, l2, x, sizeof x);
        break;
    case KILN_OP_LEAKY_RELU:
        snprintf(x, sizeof x, "(%s < 0 ? %s * %s : %s)", a, lit_float(ir_node_attr_float(n, "alpha", (double)0.01f), f32, l1, sizeof l1),
                 a, a);
        break;
    case KILN_OP_HARD_SIGMOID:
        snprintf(x, sizeof x, "kx_clamp01%s(%s * %s + %s)", sfx,
                 lit_float(ir_node_attr_float(n, "alpha", (double)0.2f), f32, l1, sizeof l1), a,
                 lit_float(ir_node_attr_float(n, "beta", 0.5), f32, l2, sizeof l2));
        break;
    case KILN_OP_HARD_SWISH:
        snprintf(x, sizeof x, "%s * kx_clamp01%s(%s / %s + %s)", a, sfx, a, lit_float(6, f32, l1, sizeof l1),
                 lit_float(0.5, f32, l2, sizeof l2));
        break;
    case KILN_OP_THRESHOLDED_RELU:
        snprintf(x, sizeof x, "(%s > %s ? %s : %s)", a, lit_float(ir_node_attr_float(n, "alpha", 1.0), f32, l1, sizeof l1), a,
                 lit_float(0, f32, l2, sizeof l2));
        break;
    case KILN_OP_SHRINK: {
        double bias = ir_node_attr_float(n, "bias", 0.0), lambd = ir_node_attr_float(n, "lambd", 0.5);
        char lb[64], nl[64];
        lit_float(bias, f32, lb, sizeof lb);
        snprintf(x, sizeof x, "(%s < %s ? %s + %s : %s > %s ? %s - %s : %s)", a, lit_float(-lambd, f32, nl, sizeof nl), a,
                 lb, a, lit_float(lambd, f32, l1, sizeof l1), a, lb, lit_float(0, f32, l2, sizeof l2));
        break;
    }
    case KILN_OP_GELU:
        if (strcmp(ir_node_attr_str(n, "approximate", "none"), "tanh") == 0) {
            if (f32)
                snprintf(x, sizeof x,
                         "0.5f * %s * (1.0f + kc_tanhf(0.79788456080286536f * (%s + 0.044715f * %s * %s * %s)))", a, a,
                         a, a, a);
            else snprintf(x, sizeof x, "kx_gelu_tanh(%s)", a);
        } else {
            snprintf(x, sizeof x, f32 ? "kc_geluf(%s)" : "kx_gelu(%s)", a);
        }
        break;
    case KILN_OP_MISH:
        snprintf(l2, sizeof l2, "(double)%s * tanh(kx_softplus((double)%s))", a, a);
        from_double(t, l2, x, sizeof x);
        break;
    default: return false;
    }
    def(w, n, x);
    return true;
}

static const char *compare_op(kiln_op op)
{
    switch (op) {
    case KILN_OP_EQUAL: return "==";
    case KILN_OP_GREATER: return ">";
    case KILN_OP_GREATER_OR_EQUAL: return ">=";
    case KILN_OP_LESS: return "<";
    default: return "<=";
    }
}

/* A constant scalar exponent of value v. */
static bool const_exponent(const ir_value *y, double v)
{
    return y->is_const && ir_numel(&y->t) == 1 && is_float(y->t.dtype) && ir_get_f64(&y->t, 0) == v;
}

static bool emit_binary(ews *w, const ir_node *n)
{
    char ab[32], bb[32], x[1024];
    const char *a = ref(w, n->in[0], ab, sizeof ab), *b = ref(w, n->in[1], bb, sizeof bb);
    kiln_dtype t = n->in[0]->t.dtype, tb = n->in[1]->t.dtype;
    const char *T = c_type(t), *W = wrap_type(t);
    bool f = is_float(t), f32 = t == KILN_F32, uns = is_uint(t);
    kiln_op op = n->op;
    if (is_compare(op)) {
        if (t == KILN_BOOL) snprintf(x, sizeof x, "(uint8_t)((%s != 0) %s (%s != 0))", a, compare_op(op), b);
        else snprintf(x, sizeof x, "(uint8_t)(%s %s %s)", a, compare_op(op), b);
        def(w, n, x);
        return true;
    }
    switch (op) {
    case KILN_OP_ADD: case KILN_OP_SUB: case KILN_OP_MUL: {
        const char *o = op == KILN_OP_ADD ? "+" : op == KILN_OP_SUB ? "-" : "*";
        if (f) snprintf(x, sizeof x, "%s %s %s", a, o, b);
        else snprintf(x, sizeof x, "(%s)((%s)%s %s (%s)%s)", T, W, a, o, W, b);
        break;
    }
    case KILN_OP_DIV:
        if (f) snprintf(x, sizeof x, "%s / %s", a, b);
        else if (uns) snprintf(x, sizeof x, "(%s)kx_udiv(%s, %s)", T, a, b);
        else snprintf(x, sizeof x, "(%s)kx_idiv(%s, %s)", T, a, b);
        break;
    case KILN_OP_MOD:
        if (f) snprintf(x, sizeof x, f32 ? "fmodf(%s, %s)" : "fmod(%s, %s)", a, b);
        else if (uns) snprintf(x, sizeof x, "(%s)kx_umod(%s, %s)", T, a, b);
        else snprintf(x, sizeof x, "(%s)%s(%s, %s)", T, ir_node_attr_int(n, "fmod", 0) ? "kx_ifmod" : "kx_imod", a, b);
        break;
    case KILN_OP_POW:
        if (f && const_exponent(n->in[1], 2.0)) {
            snprintf(x, sizeof x, "%s * %s", a, a); /* exact: the square of a float fits in double */
        } else if (f && const_exponent(n->in[1], 1.0)) {
            snprintf(x, sizeof x, "%s", a);
        } else if (f || is_float(tb)) {
            char p[256];
            snprintf(p, sizeof p, "pow((double)%s, (double)%s)", a, b);
            from_double(t, p, x, sizeof x);
        } else {
            snprintf(x, sizeof x, "(%s)kx_ipow((int64_t)%s, (int64_t)%s, %d)", T, a, b, is_uint(tb));
        }
        break;
    case KILN_OP_PRELU:
        if (f) snprintf(x, sizeof x, "(%s < 0 ? %s * %s : %s)", a, a, b, a);
        else if (uns) snprintf(x, sizeof x, "%s", a);
        else snprintf(x, sizeof x, "(%s < 0 ? (%s)((%s)%s * (%s)%s) : %s)", a, T, W, a, W, b, a);
        break;
    case KILN_OP_AND: snprintf(x, sizeof x, "(uint8_t)((%s != 0) & (%s != 0))", a, b); break;
    case KILN_OP_OR: snprintf(x, sizeof x, "(uint8_t)((%s != 0) | (%s != 0))", a, b); break;
    case KILN_OP_XOR: snprintf(x, sizeof x, "(uint8_t)((%s != 0) ^ (%s != 0))", a, b); break;
    case KILN_OP_BITWISE_AND: snprintf(x, sizeof x, "(%s)(%s & %s)", T, a, b); break;
    case KILN_OP_BITWISE_OR: snprintf(x, sizeof x, "(%s)(%s | %s)", T, a, b); break;
    case KILN_OP_BITWISE_XOR: snprintf(x, sizeof x, "(%s)(%s ^ %s)", T, a, b); break;
    case KILN_OP_BIT_SHIFT: {
        bool left = strcmp(ir_node_attr_str(n, "direction", ""), "LEFT") == 0;
        snprintf(x, sizeof x, "((uint64_t)%s >= %d ? (%s)0 : (%s)((uint64_t)%s %s (uint64_t)%s))", b,
                 (int)(8 * ir_dtype_size(t)), T, T, a, left ? "<<" : ">>", b);
        break;
    }
    default: return false;
    }
    def(w, n, x);
    return true;
}

/* Max, Min, Sum, Mean: folded left to right, as the interpreter does. */
static bool emit_variadic(ews *w, const ir_node *n)
{
    kiln_dtype t = n->in[0]->t.dtype;
    const char *T = c_type(t);
    int id = n->out[0]->id;
    char ab[32];
    base_str_printf(&w->body, "            %s v%d = %s;\n", T, id, ref(w, n->in[0], ab, sizeof ab));
    for (int i = 1; i < n->n_in; i++) {
        const char *a = ref(w, n->in[i], ab, sizeof ab);
        switch (n->op) {
        case KILN_OP_MAX: case KILN_OP_MIN: {
            const char *cmp = n->op == KILN_OP_MAX ? ">" : "<";
            if (is_float(t)) /* NaN wins, as in numpy.maximum */
                base_str_printf(&w->body, "            v%d = %s %s v%d || %s != %s ? %s : v%d;\n", id, a, cmp, id, a, a,
                                a, id);
            else base_str_printf(&w->body, "            v%d = %s %s v%d ? %s : v%d;\n", id, a, cmp, id, a, id);
            break;
        }
        default: base_str_printf(&w->body, "            v%d += %s;\n", id, a); break;
        }
    }
    if (n->op == KILN_OP_MEAN && n->n_in > 1) {
        char l[64];
        base_str_printf(&w->body, "            v%d /= %s;\n", id, lit_float(n->n_in, t == KILN_F32, l, sizeof l));
    }
    return true;
}

static bool emit_clip(ews *w, const ir_node *n)
{
    kiln_dtype t = n->in[0]->t.dtype;
    int id = n->out[0]->id;
    char ab[32], lb[80], hb[80];
    const char *lo = NULL, *hi = NULL;
    if (n->opset < 11) {
        const ir_attr *mn = ir_node_attr(n, "min"), *mx = ir_node_attr(n, "max");
        if (mn) lo = lit_float(mn->f, t == KILN_F32, lb, sizeof lb);
        if (mx) hi = lit_float(mx->f, t == KILN_F32, hb, sizeof hb);
    } else {
        if (has_in(n, 1)) lo = ref(w, n->in[1], lb, sizeof lb);
        if (has_in(n, 2)) hi = ref(w, n->in[2], hb, sizeof hb);
    }
    base_str_printf(&w->body, "            %s v%d = %s;\n", c_type(t), id, ref(w, n->in[0], ab, sizeof ab));
    /* min first, then max: max wins when min > max; NaN stays NaN */
    if (lo) base_str_printf(&w->body, "            v%d = v%d < %s ? %s : v%d;\n", id, id, lo, lo, id);
    if (hi) base_str_printf(&w->body, "            v%d = v%d > %s ? %s : v%d;\n", id, id, hi, hi, id);
    return true;
}

static bool emit_cast(ews *w, const ir_node *n)
{
    char ab[32], x[256];
    const char *a = ref(w, n->in[0], ab, sizeof ab);
    kiln_dtype from = n->in[0]->t.dtype, to = n->out[0]->t.dtype;
    const char *T = c_type(to);
    if (from == to) snprintf(x, sizeof x, "%s", a);
    else if (is_float(from)) {
        char d[64];
        snprintf(d, sizeof d, "(double)%s", a);
        if (is_float(to)) snprintf(x, sizeof x, "(%s)%s", T, a);
        else from_double(to, d, x, sizeof x);
    } else if (to == KILN_BOOL) snprintf(x, sizeof x, "(uint8_t)(%s != 0)", a);
    else if (from == KILN_BOOL) snprintf(x, sizeof x, "(%s)(%s != 0)", T, a);
    else snprintf(x, sizeof x, "(%s)%s", T, a); /* integers wrap; integers into floats round once */
    def(w, n, x);
    return true;
}

static bool emit_quant(ews *w, const ir_node *n)
{
    char ab[32], sb[32], zb[32], x[512];
    const char *a = ref(w, n->in[0], ab, sizeof ab), *s = ref(w, n->in[1], sb, sizeof sb);
    const char *z = has_in(n, 2) ? ref(w, n->in[2], zb, sizeof zb) : "0";
    if (n->op == KILN_OP_DEQUANTIZE_LINEAR) {
        snprintf(x, sizeof x, "(float)((double)((int64_t)%s - (int64_t)%s) * (double)%s)", a, z, s);
    } else {
        kiln_dtype q = n->out[0]->t.dtype;
        double lo = q == KILN_U8 || q == KILN_U16 ? 0 : q == KILN_I8 ? -128 : -32768;
        double hi = q == KILN_U8 ? 255 : q == KILN_I8 ? 127 : q == KILN_U16 ? 65535 : 32767;
        /* x / scale is an f32 division (see interp_quant.c) */
        snprintf(x, sizeof x, "(%s)kx_quantize((double)(float)((double)%s / (double)%s), (double)%s, %g, %g)",
                 c_type(q), a, s, z, lo, hi);
    }
    def(w, n, x);
    return true;
}

static bool emit_node(ews *w, const ir_node *n)
{
    char ab[32], bb[32], cb[32], x[256];
    if (is_unary(n->op)) return emit_unary(w, n);
    if (is_binary(n->op)) return emit_binary(w, n);
    switch (n->op) {
    case KILN_OP_MAX: case KILN_OP_MIN: case KILN_OP_SUM: case KILN_OP_MEAN: return emit_variadic(w, n);
    case KILN_OP_CLIP: return emit_clip(w, n);
    case KILN_OP_WHERE:
        snprintf(x, sizeof x, "%s ? %s : %s", ref(w, n->in[0], cb, sizeof cb), ref(w, n->in[1], ab, sizeof ab),
                 ref(w, n->in[2], bb, sizeof bb));
        def(w, n, x);
        return true;
    case KILN_OP_CAST: case KILN_OP_CAST_LIKE: return emit_cast(w, n);
    case KILN_OP_QUANTIZE_LINEAR: case KILN_OP_DEQUANTIZE_LINEAR: return emit_quant(w, n);
    default: return false;
    }
}

/* ---- loops ------------------------------------------------------------------------------ */

/* Strides of v broadcast (numpy rules: aligned at the right) to dims. */
static void bcast_strides(const ir_tensor *v, int rank, const int64_t *dims, int64_t *str)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int od = d - (rank - v->rank);
        if (od < 0 || v->dims[od] == 1 || dims[d] == 1) {
            str[d] = 0;
        } else {
            str[d] = s;
        }
        if (od >= 0) s *= v->dims[od];
    }
}

/* The group's name, safe inside a C comment. */
static void cat_comment(base_str *s, const char *name)
{
    for (const char *p = name; *p; p++) {
        if (*p == '*' && p[1] == '/') base_str_cat(s, "* ");
        else if ((unsigned char)*p < 32) base_str_cat(s, "?");
        else base_str_printf(s, "%c", *p);
    }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

kiln_status c_emit_elementwise(c_emitter *e, const sched_group *grp)
{
    const ir_value *out0 = grp->nodes[0]->out[0];
    const ir_tensor *shape = &out0->t;
    char tb[256], pb[256];
    need_prelude(e);
    ews w = {.e = e, .grp = grp};
    base_str_init(&w.body);
    w.n_ops = grp->n_in;
    w.ops = base_calloc((size_t)grp->n_in + 1, sizeof(operand));
    int64_t **strs = base_calloc((size_t)grp->n_in + 2, sizeof(int64_t *));
    int64_t out_str[IR_MAX_RANK];
    if (!w.ops || !strs) {
        base_free(w.ops);
        base_free(strs);
        return KILN_ERR_OOM;
    }

    /* operands: constant scalars become literals */
    for (int k = 0; k < grp->n_in; k++) {
        operand *o = &w.ops[k];
        const ir_value *v = grp->in[k];
        o->v = v;
        if (v->is_const && ir_numel(&v->t) == 1 && v->t.data) {
            o->is_lit = true;
            if (is_float(v->t.dtype)) lit_float(ir_get_f64(&v->t, 0), v->t.dtype == KILN_F32, o->lit, sizeof o->lit);
            else lit_int(v->t.dtype, ir_get_i64(&v->t, 0), o->lit, sizeof o->lit);
        }
    }

    /* the per-element code (which marks the operands it reads) */
    for (int i = 0; i < grp->n_nodes && !w.bad; i++)
        if (!emit_node(&w, grp->nodes[i])) w.bad = grp->nodes[i];
    if (w.bad) {
        char lb[256];
        base_diag_add(e->d, KILN_ERR_INTERNAL, "the c target cannot emit %s in a fused elementwise loop",
                      ir_node_label(w.bad, lb, sizeof lb));
        base_free(w.ops);
        base_free(strs);
        base_str_free(&w.body);
        return KILN_ERR_INTERNAL;
    }

    /* strides of what is read and written, then the collapsed dims */
    int rank = shape->rank;
    int64_t dims[IR_MAX_RANK];
    for (int d = 0; d < rank; d++) dims[d] = shape->dims[d];
    int n_strs = 0;
    for (int k = 0; k < grp->n_in; k++) {
        operand *o = &w.ops[k];
        if (!o->used) continue;
        bcast_strides(&o->v->t, rank, dims, o->str);
        strs[n_strs++] = o->str;
    }
    bcast_strides(shape, rank, dims, out_str);
    strs[n_strs++] = out_str;
    int64_t total = ir_numel(shape);
    rank = c_collapse(rank, dims, n_strs, strs, 0);
    base_free(strs);

    /* rTasks: rows, or chunks of rows */
    int64_t inner = dims[rank - 1], rows = total / (inner ? inner : 1);
    int n_threads = e->o->n_threads > 0 ? e->o->n_threads : 1;
    int64_t want = total / EWS_MIN_TASK_ELEMS;
    if (want > (int64_t)n_threads * EWS_TASKS_PER_THREAD) want = (int64_t)n_threads * EWS_TASKS_PER_THREAD;
    if (want < 1) want = 1;
    int64_t nch = 1, cs = inner;
    if (want > rows) {
        nch = ceil_div(want, rows);
        cs = ceil_div(ceil_div(inner, nch), EWS_CHUNK_ALIGN) * EWS_CHUNK_ALIGN;
        nch = ceil_div(inner, cs);
    }
    int64_t items = rows * nch, per = ceil_div(items, want), n_tasks = items ? ceil_div(items, per) : 1;

    base_str *s = &e->ops;
    base_str_printf(s, "/* group %d (fused elementwise, %d node%s): ", grp->id, grp->n_nodes,
                    grp->n_nodes == 1 ? "" : "s");
    cat_comment(s, grp->name);
    base_str_printf(s, "\n * %s; %lld row%s of %lld", ir_tensor_type_str(shape, tb, sizeof tb), (long long)rows,
                    rows == 1 ? "" : "s", (long long)inner);
    if (nch > 1) base_str_printf(s, " in %lld chunks of %lld", (long long)nch, (long long)cs);
    base_str_printf(s, "; %lld rTask%s */\nstatic void op_%d(const kiln_cctx *c, int t)\n{\n", (long long)n_tasks,
                    n_tasks == 1 ? "" : "s", grp->id);
    base_str_printf(&e->init, "    stages[%d].n_rtasks = %lld;\n", grp->id, (long long)n_tasks);
    if (total == 0) {
        base_str_cat(s, "    (void)c;\n    (void)t;\n}\n\n");
        base_free(w.ops);
        base_str_free(&w.body);
        return KILN_OK;
    }

    /* which operands vary along what */
    bool need_coord[IR_MAX_RANK] = {false};
    for (int k = 0; k < w.n_ops; k++) {
        operand *o = &w.ops[k];
        if (!o->used) continue;
        bool like_out = true, outer = false;
        for (int d = 0; d < rank; d++) like_out = like_out && o->str[d] == out_str[d];
        for (int d = 0; d < rank - 1; d++) outer = outer || o->str[d] != 0;
        if (like_out || !outer || rows == 1) continue;
        for (int d = 0; d < rank - 1; d++)
            if (o->str[d] != 0) need_coord[d] = true;
    }

    /* pointers; scalars are loaded once */
    for (int k = 0; k < w.n_ops; k++) {
        operand *o = &w.ops[k];
        if (!o->used) continue;
        const char *T = c_type(o->v->t.dtype);
        bool scalar = true;
        for (int d = 0; d < rank; d++) scalar = scalar && o->str[d] == 0;
        if (scalar) base_str_printf(s, "    const %s x%d = %s[0];\n", T, k, c_ptr(e, o->v, T, pb, sizeof pb));
        else base_str_printf(s, "    const %s *p%d = %s;\n", T, k, c_ptr(e, o->v, T, pb, sizeof pb));
    }
    for (int k = 0; k < grp->n_out; k++) {
        const char *T = c_type(grp->out[k]->t.dtype);
        base_str_printf(s, "    %s *q%d = %s;\n", T, k, c_ptr(e, grp->out[k], T, pb, sizeof pb));
    }
    if (n_tasks > 1) {
        base_str_printf(s, "    const int64_t it0 = (int64_t)t * %lld, it1 = it0 + %lld < %lld ? it0 + %lld : %lld;\n",
                        (long long)per, (long long)per, (long long)items, (long long)per, (long long)items);
    } else {
        base_str_printf(s, "    (void)t;\n    const int64_t it0 = 0, it1 = %lld;\n", (long long)items);
    }
    base_str_cat(s, "    for (int64_t it = it0; it < it1; it++) {\n");
    const char *j0 = "0";
    char jend[64];
    snprintf(jend, sizeof jend, "%lld", (long long)inner);
    if (nch > 1) {
        if (rows > 1) base_str_printf(s, "        const int64_t row = it / %lld, j0 = it %% %lld * %lld;\n",
                                      (long long)nch, (long long)nch, (long long)cs);
        else base_str_printf(s, "        const int64_t j0 = it * %lld;\n", (long long)cs);
        base_str_printf(s, "        const int64_t j1 = j0 + %lld < %lld ? j0 + %lld : %lld;\n", (long long)cs,
                        (long long)inner, (long long)cs, (long long)inner);
        j0 = "j0";
        snprintf(jend, sizeof jend, "j1");
    } else if (rows > 1) {
        base_str_cat(s, "        const int64_t row = it;\n");
    } else {
        base_str_cat(s, "        (void)it;\n");
    }

    /* the row's coordinates along the collapsed outer dims */
    int lo = -1;
    for (int d = 0; d < rank - 1 && lo < 0; d++)
        if (need_coord[d]) lo = d;
    if (lo == 0 && rank == 2) {
        base_str_cat(s, "        const int64_t i0 = row;\n");
    } else if (lo >= 0) {
        base_str_cat(s, "        int64_t q = row;\n");
        for (int d = rank - 2; d > lo; d--) {
            if (need_coord[d]) base_str_printf(s, "        const int64_t i%d = q %% %lld;\n", d, (long long)dims[d]);
            base_str_printf(s, "        q /= %lld;\n", (long long)dims[d]);
        }
        if (lo == 0) base_str_cat(s, "        const int64_t i0 = q;\n");
        else base_str_printf(s, "        const int64_t i%d = q %% %lld;\n", lo, (long long)dims[lo]);
    }

    /* the row's pointers, and operands constant along it */
    for (int k = 0; k < grp->n_out; k++) {
        const char *T = c_type(grp->out[k]->t.dtype);
        base_str_printf(s, "        %s *restrict w%d = q%d", T, k, k);
        if (rows > 1) base_str_printf(s, " + row * %lld", (long long)inner);
        base_str_cat(s, ";\n");
    }
    for (int k = 0; k < w.n_ops; k++) {
        operand *o = &w.ops[k];
        if (!o->used) continue;
        bool scalar = true, like_out = true;
        for (int d = 0; d < rank; d++) {
            scalar = scalar && o->str[d] == 0;
            like_out = like_out && o->str[d] == out_str[d];
        }
        if (scalar) continue;
        const char *T = c_type(o->v->t.dtype);
        /* An operand the memory plan put in place of an output is read
         * through that output's pointer, so the compiler sees one array
         * (read before write at each element) and still vectorizes. */
        int same = -1;
        for (int m = 0; m < grp->n_out && like_out; m++) {
            const sched_place *po = &e->p->place[grp->out[m]->id], *pi = &e->p->place[o->v->id];
            if (po->loc == pi->loc && po->offset == pi->offset && grp->out[m]->t.dtype == o->v->t.dtype) same = m;
        }
        if (same >= 0) {
            base_str_printf(s, "        const %s *r%d = w%d;\n", T, k, same);
            continue;
        }
        base_str_printf(s, "        const %s *restrict r%d = p%d", T, k, k);
        if (rows > 1 && like_out) {
            base_str_printf(s, " + row * %lld", (long long)inner);
        } else if (rows > 1) {
            for (int d = 0; d < rank - 1; d++)
                if (o->str[d] == 1) base_str_printf(s, " + i%d", d);
                else if (o->str[d] != 0) base_str_printf(s, " + i%d * %lld", d, (long long)o->str[d]);
        }
        base_str_cat(s, ";\n");
        if (o->str[rank - 1] == 0) base_str_printf(s, "        const %s x%d = r%d[0];\n", T, k, k);
    }

    /* the inner loop */
    base_str_printf(s, "        for (int64_t j = %s; j < %s; j++) {\n", j0, jend);
    for (int k = 0; k < w.n_ops; k++) {
        operand *o = &w.ops[k];
        bool scalar = true;
        for (int d = 0; d < rank; d++) scalar = scalar && o->str[d] == 0;
        if (!o->used || scalar || o->str[rank - 1] == 0) continue;
        const char *T = c_type(o->v->t.dtype);
        if (o->str[rank - 1] == 1) base_str_printf(s, "            const %s x%d = r%d[j];\n", T, k, k);
        else base_str_printf(s, "            const %s x%d = r%d[j * %lld];\n", T, k, k, (long long)o->str[rank - 1]);
    }
    base_str_cat(s, base_str_get(&w.body));
    for (int k = 0; k < grp->n_out; k++) base_str_printf(s, "            w%d[j] = v%d;\n", k, grp->out[k]->id);
    base_str_cat(s, "        }\n    }\n}\n\n");

    base_free(w.ops);
    bool oom = w.body.oom;
    base_str_free(&w.body);
    return oom ? KILN_ERR_OOM : KILN_OK;
}
