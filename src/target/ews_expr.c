/*
 * ews_expr.c: the per-element code of fused elementwise groups, shared by
 * the c and cuda targets (ews_expr.h): which nodes a group can hold, and
 * one C expression per node.
 *
 * Semantics follow the reference interpreter (ir/interp_elementwise.c,
 * ir/interp_quant.c): integers wrap (arithmetic goes through the unsigned
 * type of the dtype's width: C promotes narrower types to int, whose
 * overflow is undefined), Div truncates with x / 0 = 0, Mod takes the
 * divisor's sign unless fmod, float-to-integer conversions saturate with
 * NaN -> 0 (the <helper>* functions), comparisons with NaN are false, Max
 * and Min let NaN win. Floats compute in their own precision where the
 * interpreter uses double: +, -, *, / and sqrt round once either way; exp,
 * log, tanh, erf, sigmoid and gelu call the target's float32 functions;
 * other library functions run in double and round once, or in float where
 * the target says so (ews_lang.f32_native: the GPU, whose float functions
 * are within a few ulp). float16 and bfloat16 compute in float and round
 * to their dtype at each node's output, where the interpreter rounds.
 */
#include "target/ews_expr.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- dtypes ------------------------------------------------------------------------ */

static bool is_half(const ews_lang *L, kiln_dtype t) { return L->half && (t == KILN_F16 || t == KILN_BF16); }
static bool is_float(const ews_lang *L, kiln_dtype t) { return t == KILN_F32 || t == KILN_F64 || is_half(L, t); }
/* Computed in float (rather than double). */
static bool in_f32(const ews_lang *L, kiln_dtype t) { return t == KILN_F32 || is_half(L, t); }
static bool is_sint(kiln_dtype t) { return t == KILN_I8 || t == KILN_I16 || t == KILN_I32 || t == KILN_I64; }
static bool is_uint(kiln_dtype t) { return t == KILN_U8 || t == KILN_U16 || t == KILN_U32 || t == KILN_U64; }
static bool is_int(kiln_dtype t) { return is_sint(t) || is_uint(t); }
static bool is_num(const ews_lang *L, kiln_dtype t) { return is_float(L, t) || is_int(t); }

/* The unsigned type integer arithmetic of dtype t wraps in. */
static const char *wrap_type(const ews_lang *L, kiln_dtype t)
{
    return L->type(ir_dtype_size(t) == 8 ? KILN_U64 : KILN_U32);
}

static bool has_in(const ir_node *n, int i) { return i < n->n_in && n->in[i]; }

/* ---- literals ---------------------------------------------------------------------- */

/* A literal of value v in float (f32) or double (exact: hex floats). */
static const char *lit_float(const ews_lang *L, double v, bool f32, char *buf, size_t n)
{
    if (f32) v = (float)v;
    if (isnan(v)) snprintf(buf, n, f32 ? "%s" : "(double)%s", L->nan);
    else if (isinf(v)) snprintf(buf, n, f32 ? "(%s%s)" : "(%s(double)%s)", v > 0 ? "" : "-", L->inf);
    else if (v < 0 || (v == 0 && signbit(v))) snprintf(buf, n, f32 ? "(%af)" : "(%a)", v);
    else snprintf(buf, n, f32 ? "%af" : "%a", v);
    return buf;
}

/* A literal of an integer or bool dtype holding v (a u64 as its bits). */
static const char *lit_int(const ews_lang *L, kiln_dtype t, int64_t v, char *buf, size_t n)
{
    const char *T = L->type(t);
    if (t == KILN_U64) snprintf(buf, n, "((%s)%lluULL)", T, (unsigned long long)v);
    else if (t == KILN_I64 && v == INT64_MIN) snprintf(buf, n, "((%s)(-9223372036854775807LL - 1))", T);
    else if (t == KILN_I64) snprintf(buf, n, "((%s)%lldLL)", T, (long long)v);
    else snprintf(buf, n, "((%s)%lld)", T, (long long)v);
    return buf;
}

void ews_operand_lit(const ews_lang *L, ews_operand *o)
{
    const ir_value *v = o->v;
    if (!v->is_const || ir_numel(&v->t) != 1 || !v->t.data) return;
    o->is_lit = true;
    if (is_float(L, v->t.dtype)) lit_float(L, ir_get_f64(&v->t, 0), in_f32(L, v->t.dtype), o->name, sizeof o->name);
    else lit_int(L, v->t.dtype, ir_get_i64(&v->t, 0), o->name, sizeof o->name);
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
               "ews_expr.c reads op ranges from the order of ops.def");

static bool is_unary(kiln_op op) { return op <= KILN_OP_MISH; }

static bool is_binary(kiln_op op) { return op >= KILN_OP_ADD && op <= KILN_OP_BITWISE_XOR; }

static bool is_compare(kiln_op op)
{
    return op == KILN_OP_EQUAL || op == KILN_OP_GREATER || op == KILN_OP_GREATER_OR_EQUAL || op == KILN_OP_LESS ||
           op == KILN_OP_LESS_OR_EQUAL;
}

static bool unary_ok(const ews_lang *L, const ir_node *n, kiln_dtype t)
{
    kiln_op op = n->op;
    if (unary_float_only(op)) {
        if (!is_float(L, t)) return false;
    } else if (op == KILN_OP_NOT) {
        if (t != KILN_BOOL) return false;
    } else if (op == KILN_OP_BITWISE_NOT) {
        if (!is_int(t)) return false;
    } else if (op == KILN_OP_NEG || op == KILN_OP_RELU) {
        if (!is_float(L, t) && !is_sint(t)) return false;
    } else if (!is_num(L, t)) {
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

static bool binary_ok(const ews_lang *L, const ir_node *n)
{
    kiln_dtype a = n->in[0]->t.dtype, b = n->in[1]->t.dtype;
    kiln_op op = n->op;
    /* Before opset 7, broadcasting was spelled with attributes (and PRelu's
     * slope ran along axis 1): rare enough to leave to the interpreter. */
    if (n->opset < 7) return false;
    if (op != KILN_OP_POW && a != b) return false;
    switch (op) {
    case KILN_OP_AND: case KILN_OP_OR: case KILN_OP_XOR: return a == KILN_BOOL;
    case KILN_OP_EQUAL: return is_num(L, a) || a == KILN_BOOL;
    case KILN_OP_BIT_SHIFT: {
        if (!is_uint(a) || !ir_node_attr_kind_ok(n, "direction", IR_ATTR_STRING)) return false;
        const char *dir = ir_node_attr_str(n, "direction", "");
        return strcmp(dir, "LEFT") == 0 || strcmp(dir, "RIGHT") == 0;
    }
    case KILN_OP_BITWISE_AND: case KILN_OP_BITWISE_OR: case KILN_OP_BITWISE_XOR: return is_int(a);
    case KILN_OP_POW: return is_num(L, a) && is_num(L, b);
    case KILN_OP_MOD:
        if (!ir_node_attr_kind_ok(n, "fmod", IR_ATTR_INT)) return false;
        return is_int(a) || (is_float(L, a) && ir_node_attr_int(n, "fmod", 0) != 0);
    default: return is_num(L, a);
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

bool ews_can_elementwise(const ews_lang *L, const ir_node *n)
{
    if (n->op >= KILN_OP_COUNT || !(ir_ops[n->op].flags & IR_OPF_ELEMENTWISE)) return false;
    if (n->n_out != 1 || !n->out[0] || !n->out[0]->shape_known || !L->type(n->out[0]->t.dtype)) return false;
    if (n->n_in < 1 || !n->in[0]) return false;
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = n->in[i];
        if (!v) continue;
        if (!v->shape_known || !L->type(v->t.dtype)) return false;
        if (v->t.rank > n->out[0]->t.rank && !(n->op == KILN_OP_CAST_LIKE && i == 1)) return false;
        if (v->graph != n->graph) return false;
    }
    kiln_dtype t = n->in[0]->t.dtype;
    kiln_op op = n->op;
    if (is_unary(op)) return unary_ok(L, n, t);
    if (is_binary(op)) return n->n_in == 2 && n->in[1] && binary_ok(L, n);
    switch (op) {
    case KILN_OP_MAX: case KILN_OP_MIN: case KILN_OP_SUM: case KILN_OP_MEAN:
        for (int i = 0; i < n->n_in; i++)
            if (!n->in[i] || n->in[i]->t.dtype != t) return false;
        return op == KILN_OP_MAX || op == KILN_OP_MIN ? is_num(L, t) : is_float(L, t);
    case KILN_OP_CLIP:
        if (n->opset < 11)
            return is_float(L, t) && ir_node_attr_kind_ok(n, "min", IR_ATTR_FLOAT) &&
                   ir_node_attr_kind_ok(n, "max", IR_ATTR_FLOAT);
        for (int i = 1; i < n->n_in; i++)
            if (n->in[i] && !scalar_of(n->in[i], t)) return false;
        return is_num(L, t);
    case KILN_OP_WHERE:
        return n->n_in == 3 && n->in[1] && n->in[2] && t == KILN_BOOL && n->in[1]->t.dtype == n->in[2]->t.dtype;
    case KILN_OP_CAST: return ir_node_attr_kind_ok(n, "to", IR_ATTR_INT) && n->out[0]->t.dtype != KILN_UNDEF;
    case KILN_OP_CAST_LIKE: return n->n_in == 2 && n->in[1];
    case KILN_OP_QUANTIZE_LINEAR: case KILN_OP_DEQUANTIZE_LINEAR: return n->n_in >= 2 && n->in[1] && quant_ok(n);
    default: return false;
    }
}

/* ---- per-node code --------------------------------------------------------------------- */

/* The name of v in the per-element code: its operand's name, or v<id> for
 * a value computed in the group. Marks operands used. */
static const char *ref(ews_expr *x, const ir_value *v, char *buf, size_t n)
{
    for (int k = 0; k < x->n_ops; k++) {
        ews_operand *o = &x->ops[k];
        if (o->v != v) continue;
        if (!o->is_lit) o->used = true;
        return o->name;
    }
    snprintf(buf, n, "v%d", v->id);
    return buf;
}

/* const T v<id> = expr; float16 and bfloat16 results are rounded to their
 * dtype unless `rounded`. */
static void def_as(ews_expr *x, const ir_node *n, const char *expr, bool rounded)
{
    const ews_lang *L = x->lang;
    kiln_dtype t = n->out[0]->t.dtype;
    base_str_printf(x->body, "%sconst %s v%d = ", x->indent, L->type(t), n->out[0]->id);
    if (is_half(L, t) && !rounded) base_str_printf(x->body, "%srnd_%s(%s);\n", L->helper, t == KILN_F16 ? "f16" : "bf16", expr);
    else base_str_printf(x->body, "%s;\n", expr);
}

static void def(ews_expr *x, const ir_node *n, const char *expr) { def_as(x, n, expr, false); }

/* x converted from a double expression into dtype t, as ir_set_f64 does. */
static void from_double(const ews_lang *L, kiln_dtype t, const char *x, char *buf, size_t n)
{
    switch (t) {
    case KILN_F32: case KILN_F16: case KILN_BF16: snprintf(buf, n, "(float)(%s)", x); break;
    case KILN_F64: snprintf(buf, n, "(%s)", x); break;
    case KILN_BOOL: snprintf(buf, n, "(%s)((%s) != 0)", L->type(KILN_BOOL), x); break;
    case KILN_U64: snprintf(buf, n, "%sf2u64(%s)", L->helper, x); break;
    default: snprintf(buf, n, "(%s)%sf2i(%s)", L->type(t), L->helper, x); break;
    }
}

/* fn of a float value a: in double rounded once, or fn's float version
 * (fnf) where the target computes float32 natively; fn itself for f64. */
static void libm1(const ews_lang *L, char *buf, size_t n, const char *fn, const char *a, bool f32)
{
    if (f32 && L->f32_native) snprintf(buf, n, "%sf(%s)", fn, a);
    else if (f32) snprintf(buf, n, "(float)%s((double)%s)", fn, a);
    else snprintf(buf, n, "%s(%s)", fn, a);
}

static bool emit_int_unary(ews_expr *x, const ir_node *n, const char *a)
{
    const ews_lang *L = x->lang;
    kiln_dtype t = n->in[0]->t.dtype;
    const char *T = L->type(t), *W = wrap_type(L, t);
    char e[512];
    switch (n->op) {
    case KILN_OP_ABS:
        if (is_uint(t)) snprintf(e, sizeof e, "%s", a);
        else snprintf(e, sizeof e, "(%s)(%s < 0 ? 0 - (%s)%s : (%s)%s)", T, a, W, a, W, a);
        break;
    case KILN_OP_NEG: snprintf(e, sizeof e, "(%s)(0 - (%s)%s)", T, W, a); break;
    case KILN_OP_SIGN:
        if (is_uint(t)) snprintf(e, sizeof e, "(%s)(%s != 0)", T, a);
        else snprintf(e, sizeof e, "(%s)((%s > 0) - (%s < 0))", T, a, a);
        break;
    case KILN_OP_RELU: snprintf(e, sizeof e, "(%s < 0 ? (%s)0 : %s)", a, T, a); break;
    case KILN_OP_NOT: snprintf(e, sizeof e, "(%s)(%s == 0)", L->type(KILN_BOOL), a); break;
    case KILN_OP_BITWISE_NOT: snprintf(e, sizeof e, "(%s)~%s", T, a); break;
    default: return false;
    }
    def(x, n, e);
    return true;
}

static bool emit_unary(ews_expr *x, const ir_node *n)
{
    const ews_lang *L = x->lang;
    char ab[32], e[2048], l1[96], l2[512], l3[512];
    const char *a = ref(x, n->in[0], ab, sizeof ab);
    kiln_dtype t = n->in[0]->t.dtype;
    if (!is_float(L, t)) return emit_int_unary(x, n, a);
    bool f32 = in_f32(L, t);
    const char *sfx = f32 ? "f" : "", *B = L->type(KILN_BOOL), *M = L->math, *H = L->helper;
    switch (n->op) {
    case KILN_OP_ABS: snprintf(e, sizeof e, "fabs%s(%s)", sfx, a); break;
    case KILN_OP_NEG: snprintf(e, sizeof e, "-%s", a); break;
    case KILN_OP_CEIL: snprintf(e, sizeof e, "ceil%s(%s)", sfx, a); break;
    case KILN_OP_FLOOR: snprintf(e, sizeof e, "floor%s(%s)", sfx, a); break;
    case KILN_OP_ROUND: snprintf(e, sizeof e, "nearbyint%s(%s)", sfx, a); break; /* half to even */
    case KILN_OP_SQRT: snprintf(e, sizeof e, "sqrt%s(%s)", sfx, a); break;
    case KILN_OP_RECIPROCAL: snprintf(e, sizeof e, "%s / %s", lit_float(L, 1.0, f32, l1, sizeof l1), a); break;
    case KILN_OP_ACOS: libm1(L, e, sizeof e, "acos", a, f32); break;
    case KILN_OP_ACOSH: libm1(L, e, sizeof e, "acosh", a, f32); break;
    case KILN_OP_ASIN: libm1(L, e, sizeof e, "asin", a, f32); break;
    case KILN_OP_ASINH: libm1(L, e, sizeof e, "asinh", a, f32); break;
    case KILN_OP_ATAN: libm1(L, e, sizeof e, "atan", a, f32); break;
    case KILN_OP_ATANH: libm1(L, e, sizeof e, "atanh", a, f32); break;
    case KILN_OP_COS: libm1(L, e, sizeof e, "cos", a, f32); break;
    case KILN_OP_COSH: libm1(L, e, sizeof e, "cosh", a, f32); break;
    case KILN_OP_SIN: libm1(L, e, sizeof e, "sin", a, f32); break;
    case KILN_OP_SINH: libm1(L, e, sizeof e, "sinh", a, f32); break;
    case KILN_OP_TAN: libm1(L, e, sizeof e, "tan", a, f32); break;
    case KILN_OP_SOFTPLUS:
        if (f32 && L->f32_native) {
            snprintf(e, sizeof e, "%ssoftplusf(%s)", M, a);
        } else {
            snprintf(l1, sizeof l1, "%ssoftplus", H); /* in double */
            libm1(L, e, sizeof e, l1, a, f32);
        }
        break;
    /* the target's float32 versions (kc_expf), libm's for f64 */
    case KILN_OP_EXP: snprintf(e, sizeof e, "%sexp%s(%s)", f32 ? M : "", sfx, a); break;
    case KILN_OP_LOG: snprintf(e, sizeof e, "%slog%s(%s)", f32 ? M : "", sfx, a); break;
    case KILN_OP_TANH: snprintf(e, sizeof e, "%stanh%s(%s)", f32 ? M : "", sfx, a); break;
    case KILN_OP_ERF: snprintf(e, sizeof e, "%serf%s(%s)", f32 ? M : "", sfx, a); break;
    case KILN_OP_SIGMOID: snprintf(e, sizeof e, "%ssigmoid%s(%s)", f32 ? M : H, sfx, a); break;
    case KILN_OP_SIGN:
        snprintf(e, sizeof e, "(%s > 0 ? %s : %s < 0 ? %s : %s)", a, lit_float(L, 1, f32, l1, sizeof l1), a,
                 lit_float(L, -1, f32, l2, sizeof l2), a);
        break;
    case KILN_OP_RELU: snprintf(e, sizeof e, "(%s < 0 ? %s : %s)", a, lit_float(L, 0, f32, l1, sizeof l1), a); break;
    case KILN_OP_IS_NAN: snprintf(e, sizeof e, "(%s)(%s != %s)", B, a, a); break;
    case KILN_OP_IS_INF: {
        bool pos = ir_node_attr_int(n, "detect_positive", 1) != 0, neg = ir_node_attr_int(n, "detect_negative", 1) != 0;
        if (pos && neg) snprintf(e, sizeof e, "(%s)(fabs%s(%s) == %s)", B, sfx, a, L->inf);
        else if (pos) snprintf(e, sizeof e, "(%s)(%s == %s)", B, a, L->inf);
        else if (neg) snprintf(e, sizeof e, "(%s)(%s == -%s)", B, a, L->inf);
        else snprintf(e, sizeof e, "(%s)0", B);
        break;
    }
    case KILN_OP_SOFTSIGN:
        snprintf(e, sizeof e, "%s / (%s + fabs%s(%s))", a, lit_float(L, 1, f32, l1, sizeof l1), sfx, a);
        break;
    case KILN_OP_ELU: {
        double al = ir_node_attr_float(n, "alpha", 1.0);
        if (f32 && L->f32_native) {
            snprintf(l3, sizeof l3, "%s * expm1f(%s)", lit_float(L, al, true, l1, sizeof l1), a);
        } else {
            snprintf(l2, sizeof l2, "%s * expm1((double)%s)", lit_float(L, al, false, l1, sizeof l1), a);
            from_double(L, t, l2, l3, sizeof l3);
        }
        snprintf(e, sizeof e, "(%s < 0 ? %s : %s)", a, l3, a);
        break;
    }
    case KILN_OP_SELU: {
        double al = ir_node_attr_float(n, "alpha", 1.67326319217681884765625);
        double ga = ir_node_attr_float(n, "gamma", 1.05070102214813232421875);
        char g[64], neg[512], pos[512];
        if (f32 && L->f32_native) {
            snprintf(neg, sizeof neg, "%s * expm1f(%s)", lit_float(L, ga * al, true, l1, sizeof l1), a);
            snprintf(pos, sizeof pos, "%s * %s", lit_float(L, ga, true, g, sizeof g), a);
        } else {
            lit_float(L, ga, false, g, sizeof g);
            snprintf(l2, sizeof l2, "%s * %s * expm1((double)%s)", g, lit_float(L, al, false, l1, sizeof l1), a);
            from_double(L, t, l2, neg, sizeof neg);
            snprintf(l2, sizeof l2, "%s * (double)%s", g, a);
            from_double(L, t, l2, pos, sizeof pos);
        }
        snprintf(e, sizeof e, "(%s <= 0 ? %s : %s)", a, neg, pos);
        break;
    }
    case KILN_OP_CELU: {
        double al = ir_node_attr_float(n, "alpha", 1.0);
        if (f32 && L->f32_native) {
            snprintf(e, sizeof e, "%sceluf(%s, %s)", M, a, lit_float(L, al, true, l1, sizeof l1));
        } else {
            snprintf(l2, sizeof l2, "%scelu((double)%s, %s)", H, a, lit_float(L, al, false, l1, sizeof l1));
            from_double(L, t, l2, e, sizeof e);
        }
        break;
    }
    case KILN_OP_LEAKY_RELU:
        snprintf(e, sizeof e, "(%s < 0 ? %s * %s : %s)", a,
                 lit_float(L, ir_node_attr_float(n, "alpha", (double)0.01f), f32, l1, sizeof l1), a, a);
        break;
    case KILN_OP_HARD_SIGMOID:
        snprintf(e, sizeof e, "%sclamp01%s(%s * %s + %s)", H, sfx,
                 lit_float(L, ir_node_attr_float(n, "alpha", (double)0.2f), f32, l1, sizeof l1), a,
                 lit_float(L, ir_node_attr_float(n, "beta", 0.5), f32, l2, sizeof l2));
        break;
    case KILN_OP_HARD_SWISH:
        snprintf(e, sizeof e, "%s * %sclamp01%s(%s / %s + %s)", a, H, sfx, a, lit_float(L, 6, f32, l1, sizeof l1),
                 lit_float(L, 0.5, f32, l2, sizeof l2));
        break;
    case KILN_OP_THRESHOLDED_RELU:
        snprintf(e, sizeof e, "(%s > %s ? %s : %s)", a,
                 lit_float(L, ir_node_attr_float(n, "alpha", 1.0), f32, l1, sizeof l1), a,
                 lit_float(L, 0, f32, l2, sizeof l2));
        break;
    case KILN_OP_SHRINK: {
        double bias = ir_node_attr_float(n, "bias", 0.0), lambd = ir_node_attr_float(n, "lambd", 0.5);
        char lb[64], nl[64];
        lit_float(L, bias, f32, lb, sizeof lb);
        snprintf(e, sizeof e, "(%s < %s ? %s + %s : %s > %s ? %s - %s : %s)", a, lit_float(L, -lambd, f32, nl, sizeof nl),
                 a, lb, a, lit_float(L, lambd, f32, l1, sizeof l1), a, lb, lit_float(L, 0, f32, l2, sizeof l2));
        break;
    }
    case KILN_OP_GELU:
        if (strcmp(ir_node_attr_str(n, "approximate", "none"), "tanh") == 0) {
            if (f32 && L->f32_native)
                snprintf(e, sizeof e, "%sgelu_tanhf(%s)", M, a);
            else if (f32)
                snprintf(e, sizeof e,
                         "0.5f * %s * (1.0f + %stanhf(0.79788456080286536f * (%s + 0.044715f * %s * %s * %s)))", a, M,
                         a, a, a, a);
            else snprintf(e, sizeof e, "%sgelu_tanh(%s)", H, a);
        } else {
            snprintf(e, sizeof e, "%sgelu%s(%s)", f32 ? M : H, sfx, a);
        }
        break;
    case KILN_OP_MISH:
        if (f32 && L->f32_native) {
            snprintf(e, sizeof e, "%smishf(%s)", M, a);
        } else {
            snprintf(l2, sizeof l2, "(double)%s * tanh(%ssoftplus((double)%s))", a, H, a);
            from_double(L, t, l2, e, sizeof e);
        }
        break;
    default: return false;
    }
    def(x, n, e);
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
static bool const_exponent(const ews_lang *L, const ir_value *y, double v)
{
    return y->is_const && ir_numel(&y->t) == 1 && is_float(L, y->t.dtype) && ir_get_f64(&y->t, 0) == v;
}

static bool emit_binary(ews_expr *x, const ir_node *n)
{
    const ews_lang *L = x->lang;
    char ab[32], bb[32], e[1024];
    const char *a = ref(x, n->in[0], ab, sizeof ab), *b = ref(x, n->in[1], bb, sizeof bb);
    kiln_dtype t = n->in[0]->t.dtype, tb = n->in[1]->t.dtype;
    const char *T = L->type(t), *W = wrap_type(L, t), *B = L->type(KILN_BOOL), *H = L->helper;
    bool f = is_float(L, t), f32 = in_f32(L, t), uns = is_uint(t);
    kiln_op op = n->op;
    if (is_compare(op)) {
        if (t == KILN_BOOL) snprintf(e, sizeof e, "(%s)((%s != 0) %s (%s != 0))", B, a, compare_op(op), b);
        else snprintf(e, sizeof e, "(%s)(%s %s %s)", B, a, compare_op(op), b);
        def(x, n, e);
        return true;
    }
    switch (op) {
    case KILN_OP_ADD: case KILN_OP_SUB: case KILN_OP_MUL: {
        const char *o = op == KILN_OP_ADD ? "+" : op == KILN_OP_SUB ? "-" : "*";
        if (f) snprintf(e, sizeof e, "%s %s %s", a, o, b);
        else snprintf(e, sizeof e, "(%s)((%s)%s %s (%s)%s)", T, W, a, o, W, b);
        break;
    }
    case KILN_OP_DIV:
        if (f) snprintf(e, sizeof e, "%s / %s", a, b);
        else if (uns) snprintf(e, sizeof e, "(%s)%sudiv(%s, %s)", T, H, a, b);
        else snprintf(e, sizeof e, "(%s)%sidiv(%s, %s)", T, H, a, b);
        break;
    case KILN_OP_MOD:
        if (f) snprintf(e, sizeof e, f32 ? "fmodf(%s, %s)" : "fmod(%s, %s)", a, b);
        else if (uns) snprintf(e, sizeof e, "(%s)%sumod(%s, %s)", T, H, a, b);
        else snprintf(e, sizeof e, "(%s)%s%s(%s, %s)", T, H, ir_node_attr_int(n, "fmod", 0) ? "ifmod" : "imod", a, b);
        break;
    case KILN_OP_POW:
        if (f && const_exponent(L, n->in[1], 2.0)) {
            snprintf(e, sizeof e, "%s * %s", a, a); /* exact in double; one rounding in float */
        } else if (f && const_exponent(L, n->in[1], 1.0)) {
            snprintf(e, sizeof e, "%s", a);
        } else if (f32 && L->f32_native) {
            snprintf(e, sizeof e, "powf(%s, (float)%s)", a, b);
        } else if (f || is_float(L, tb)) {
            char p[256];
            snprintf(p, sizeof p, "pow((double)%s, (double)%s)", a, b);
            from_double(L, t, p, e, sizeof e);
        } else {
            const char *I = L->type(KILN_I64);
            snprintf(e, sizeof e, "(%s)%sipow((%s)%s, (%s)%s, %d)", T, H, I, a, I, b, is_uint(tb));
        }
        break;
    case KILN_OP_PRELU:
        if (f) snprintf(e, sizeof e, "(%s < 0 ? %s * %s : %s)", a, a, b, a);
        else if (uns) snprintf(e, sizeof e, "%s", a);
        else snprintf(e, sizeof e, "(%s < 0 ? (%s)((%s)%s * (%s)%s) : %s)", a, T, W, a, W, b, a);
        break;
    case KILN_OP_AND: snprintf(e, sizeof e, "(%s)((%s != 0) & (%s != 0))", B, a, b); break;
    case KILN_OP_OR: snprintf(e, sizeof e, "(%s)((%s != 0) | (%s != 0))", B, a, b); break;
    case KILN_OP_XOR: snprintf(e, sizeof e, "(%s)((%s != 0) ^ (%s != 0))", B, a, b); break;
    case KILN_OP_BITWISE_AND: snprintf(e, sizeof e, "(%s)(%s & %s)", T, a, b); break;
    case KILN_OP_BITWISE_OR: snprintf(e, sizeof e, "(%s)(%s | %s)", T, a, b); break;
    case KILN_OP_BITWISE_XOR: snprintf(e, sizeof e, "(%s)(%s ^ %s)", T, a, b); break;
    case KILN_OP_BIT_SHIFT: {
        bool left = strcmp(ir_node_attr_str(n, "direction", ""), "LEFT") == 0;
        const char *U = L->type(KILN_U64);
        snprintf(e, sizeof e, "((%s)%s >= %d ? (%s)0 : (%s)((%s)%s %s (%s)%s))", U, b, (int)(8 * ir_dtype_size(t)), T,
                 T, U, a, left ? "<<" : ">>", U, b);
        break;
    }
    default: return false;
    }
    def(x, n, e);
    return true;
}

/* Max, Min, Sum, Mean: folded left to right, as the interpreter does. */
static bool emit_variadic(ews_expr *x, const ir_node *n)
{
    const ews_lang *L = x->lang;
    kiln_dtype t = n->in[0]->t.dtype;
    int id = n->out[0]->id;
    const char *I = x->indent;
    char ab[32];
    base_str_printf(x->body, "%s%s v%d = %s;\n", I, L->type(t), id, ref(x, n->in[0], ab, sizeof ab));
    for (int i = 1; i < n->n_in; i++) {
        const char *a = ref(x, n->in[i], ab, sizeof ab);
        switch (n->op) {
        case KILN_OP_MAX: case KILN_OP_MIN: {
            const char *cmp = n->op == KILN_OP_MAX ? ">" : "<";
            if (is_float(L, t)) /* NaN wins, as in numpy.maximum */
                base_str_printf(x->body, "%sv%d = %s %s v%d || %s != %s ? %s : v%d;\n", I, id, a, cmp, id, a, a, a, id);
            else base_str_printf(x->body, "%sv%d = %s %s v%d ? %s : v%d;\n", I, id, a, cmp, id, a, id);
            break;
        }
        default: base_str_printf(x->body, "%sv%d += %s;\n", I, id, a); break;
        }
    }
    if (n->op == KILN_OP_MEAN && n->n_in > 1) {
        char l[64];
        base_str_printf(x->body, "%sv%d /= %s;\n", I, id, lit_float(L, n->n_in, in_f32(L, t), l, sizeof l));
    }
    /* a sum of float16 values rounds once, at the end (Max and Min select) */
    if (is_half(L, t) && (n->op == KILN_OP_SUM || n->op == KILN_OP_MEAN) && n->n_in > 1)
        base_str_printf(x->body, "%sv%d = %srnd_%s(v%d);\n", I, id, L->helper, t == KILN_F16 ? "f16" : "bf16", id);
    return true;
}

static bool emit_clip(ews_expr *x, const ir_node *n)
{
    const ews_lang *L = x->lang;
    kiln_dtype t = n->in[0]->t.dtype;
    int id = n->out[0]->id;
    const char *I = x->indent;
    char ab[32], lb[96], hb[96];
    const char *lo = NULL, *hi = NULL;
    if (n->opset < 11) {
        const ir_attr *mn = ir_node_attr(n, "min"), *mx = ir_node_attr(n, "max");
        if (mn) lo = lit_float(L, mn->f, in_f32(L, t), lb, sizeof lb);
        if (mx) hi = lit_float(L, mx->f, in_f32(L, t), hb, sizeof hb);
    } else {
        if (has_in(n, 1)) lo = ref(x, n->in[1], lb, sizeof lb);
        if (has_in(n, 2)) hi = ref(x, n->in[2], hb, sizeof hb);
    }
    base_str_printf(x->body, "%s%s v%d = %s;\n", I, L->type(t), id, ref(x, n->in[0], ab, sizeof ab));
    /* min first, then max: max wins when min > max; NaN stays NaN */
    if (lo) base_str_printf(x->body, "%sv%d = v%d < %s ? %s : v%d;\n", I, id, id, lo, lo, id);
    if (hi) base_str_printf(x->body, "%sv%d = v%d > %s ? %s : v%d;\n", I, id, id, hi, hi, id);
    if (is_half(L, t) && n->opset < 11) /* attribute bounds are float32 */
        base_str_printf(x->body, "%sv%d = %srnd_%s(v%d);\n", I, id, L->helper, t == KILN_F16 ? "f16" : "bf16", id);
    return true;
}

static bool emit_cast(ews_expr *x, const ir_node *n)
{
    const ews_lang *L = x->lang;
    char ab[32], e[512];
    const char *a = ref(x, n->in[0], ab, sizeof ab);
    kiln_dtype from = n->in[0]->t.dtype, to = n->out[0]->t.dtype;
    const char *T = L->type(to);
    if (from == to) {
        snprintf(e, sizeof e, "%s", a);
    } else if (from == KILN_F64 && is_half(L, to)) {
        /* one rounding, from double */
        snprintf(e, sizeof e, "%srnd_%sd(%s)", L->helper, to == KILN_F16 ? "f16" : "bf16", a);
        def_as(x, n, e, true);
        return true;
    } else if (is_float(L, from)) {
        char d[160];
        snprintf(d, sizeof d, "(double)%s", a);
        if (is_float(L, to)) snprintf(e, sizeof e, "(%s)%s", T, a);
        else from_double(L, to, d, e, sizeof e);
    } else if (to == KILN_BOOL) {
        snprintf(e, sizeof e, "(%s)(%s != 0)", T, a);
    } else if (from == KILN_BOOL) {
        snprintf(e, sizeof e, "(%s)(%s != 0)", T, a);
    } else {
        snprintf(e, sizeof e, "(%s)%s", T, a); /* integers wrap; integers into floats round once */
    }
    def(x, n, e);
    return true;
}

static bool emit_quant(ews_expr *x, const ir_node *n)
{
    const ews_lang *L = x->lang;
    char ab[32], sb[32], zb[32], e[512];
    const char *a = ref(x, n->in[0], ab, sizeof ab), *s = ref(x, n->in[1], sb, sizeof sb);
    const char *z = has_in(n, 2) ? ref(x, n->in[2], zb, sizeof zb) : "0";
    if (n->op == KILN_OP_DEQUANTIZE_LINEAR) {
        const char *I = L->type(KILN_I64);
        snprintf(e, sizeof e, "(float)((double)((%s)%s - (%s)%s) * (double)%s)", I, a, I, z, s);
    } else {
        kiln_dtype q = n->out[0]->t.dtype;
        double lo = q == KILN_U8 || q == KILN_U16 ? 0 : q == KILN_I8 ? -128 : -32768;
        double hi = q == KILN_U8 ? 255 : q == KILN_I8 ? 127 : q == KILN_U16 ? 65535 : 32767;
        /* x / scale is an f32 division (see interp_quant.c) */
        snprintf(e, sizeof e, "(%s)%squantize((double)(float)((double)%s / (double)%s), (double)%s, %g, %g)",
                 L->type(q), L->helper, a, s, z, lo, hi);
    }
    def(x, n, e);
    return true;
}

bool ews_expr_node(ews_expr *x, const ir_node *n)
{
    char ab[32], bb[32], cb[32], e[512];
    if (is_unary(n->op)) return emit_unary(x, n);
    if (is_binary(n->op)) return emit_binary(x, n);
    switch (n->op) {
    case KILN_OP_MAX: case KILN_OP_MIN: case KILN_OP_SUM: case KILN_OP_MEAN: return emit_variadic(x, n);
    case KILN_OP_CLIP: return emit_clip(x, n);
    case KILN_OP_WHERE: {
        /* three refs: the names live in separate buffers */
        const char *c = ref(x, n->in[0], cb, sizeof cb), *a = ref(x, n->in[1], ab, sizeof ab);
        snprintf(e, sizeof e, "%s ? %s : %s", c, a, ref(x, n->in[2], bb, sizeof bb));
        def(x, n, e);
        return true;
    }
    case KILN_OP_CAST: case KILN_OP_CAST_LIKE: return emit_cast(x, n);
    case KILN_OP_QUANTIZE_LINEAR: case KILN_OP_DEQUANTIZE_LINEAR: return emit_quant(x, n);
    default: return false;
    }
}

void ews_bcast_strides(const ir_tensor *v, int rank, const int64_t *dims, int64_t *str)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int od = d - (rank - v->rank);
        if (od < 0 || v->dims[od] == 1 || dims[d] == 1) str[d] = 0;
        else str[d] = s;
        if (od >= 0) s *= v->dims[od];
    }
}
