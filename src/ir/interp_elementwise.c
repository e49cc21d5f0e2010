/*
 * interp_elementwise.c: the reference interpreter's elementwise ops: the
 * unary math and activation functions (Abs ... Tanh, Relu, Elu, Selu, Celu,
 * LeakyRelu, HardSigmoid, HardSwish, ThresholdedRelu, Shrink, Gelu, Mish,
 * Softplus, Softsign), the tests IsInf and IsNaN, Not and BitwiseNot; the
 * broadcasting binary ops (arithmetic, Pow, Mod, PRelu, logic, comparisons,
 * BitShift, Bitwise*); the variadic Max, Min, Sum and Mean; Clip, Where,
 * Cast and CastLike.
 *
 * Numerics. Floats (f16, bf16, f32, f64) are read as double, computed in
 * double and rounded once into the output dtype; f16 and bf16 go through a
 * round-to-odd f32 (in ir_set_f64) so that this one rounding is exact. Integers
 * are computed in int64 with wrapping (unsigned) arithmetic, so results are
 * exact modulo the dtype's width, as numpy and ORT give them; a u64 element
 * rides in the int64 as its bit pattern, and every op whose result depends
 * on signedness (division, comparisons, shifts) checks `uns`. Where ONNX
 * leaves a result undefined, kiln picks numpy's value when it has one:
 * integer division or modulo by zero gives 0, INT_MIN / -1 wraps.
 *
 * Dtypes are checked against the union of an op's type lists over opsets
 * 7 to the newest, so an older model that uses a type added later still
 * computes; inputs that must agree (Add's two, Where's x and y) must have
 * the same dtype, as ONNX never converts implicitly.
 */
#include "ir/interp_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- dtype classes ----------------------------------------------------------- */

enum { C_FLOAT = 1, C_SINT = 2, C_UINT = 4, C_BOOL = 8 };
#define C_INT (C_SINT | C_UINT)
#define C_NUM (C_FLOAT | C_INT)

static unsigned dtype_class(kiln_dtype t)
{
    if (ir_dtype_is_float(t)) return C_FLOAT;
    if (t == KILN_BOOL) return C_BOOL;
    if (ir_dtype_is_int(t)) return ir_dtype_is_signed(t) ? C_SINT : C_UINT;
    return 0; /* string, complex, undefined */
}

/* "float, integer or bool" for messages. */
static const char *class_names(unsigned classes, char *buf, size_t n)
{
    const char *parts[3];
    int k = 0;
    if (classes & C_FLOAT) parts[k++] = "float";
    if ((classes & C_INT) == C_INT)
        parts[k++] = "integer";
    else if (classes & C_SINT)
        parts[k++] = "signed integer";
    else if (classes & C_UINT)
        parts[k++] = "unsigned integer";
    if (classes & C_BOOL) parts[k++] = "bool";
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < k && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i == 0 ? "" : i == k - 1 ? " or " : ", ", parts[i]);
    return buf;
}

/* Input i must be given and have a dtype of one of the classes. */
static kiln_status check_dtype(ir_eval *e, int i, unsigned classes)
{
    if (!ir_eval_has(e, i)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input %d is missing", i);
    kiln_dtype t = e->in[i]->dtype;
    if (dtype_class(t) & classes) return KILN_OK;
    char buf[96];
    return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "input %d has dtype %s; the op takes %s tensors", i,
                        kiln_dtype_name(t), class_names(classes, buf, sizeof(buf)));
}

/* Inputs i and j (both given) must have the same dtype. */
static kiln_status check_same_dtype(ir_eval *e, int i, int j)
{
    kiln_dtype a = e->in[i]->dtype, b = e->in[j]->dtype;
    if (a == b) return KILN_OK;
    return ir_eval_fail(e, KILN_ERR_SHAPE, "input %d is %s but input %d is %s; they must have the same dtype", i,
                        kiln_dtype_name(a), j, kiln_dtype_name(b));
}

/* ---- rounding into the output ---------------------------------------------- */

/* ---- unary ------------------------------------------------------------------- */

typedef struct unary_params {
    double alpha, beta, gamma; /* Elu, Selu, Celu, LeakyRelu, HardSigmoid, ThresholdedRelu */
    double bias, lambd;        /* Shrink */
    bool gelu_tanh;            /* Gelu approximate="tanh" */
    bool detect_pos, detect_neg; /* IsInf */
} unary_params;

static unsigned unary_dtypes(kiln_op op)
{
    switch (op) {
    case KILN_OP_ABS:
    case KILN_OP_SIGN:
    case KILN_OP_ERF:
    case KILN_OP_SHRINK: return C_NUM;
    case KILN_OP_NEG:
    case KILN_OP_RELU: return C_FLOAT | C_SINT;
    case KILN_OP_NOT: return C_BOOL;
    case KILN_OP_BITWISE_NOT: return C_INT;
    default: return C_FLOAT;
    }
}

/* Ops that keep integer inputs in int64; the others compute integers in
 * double and truncate back (Erf, Shrink: what numpy's astype does). */
static bool unary_int_exact(kiln_op op)
{
    return op == KILN_OP_ABS || op == KILN_OP_NEG || op == KILN_OP_SIGN || op == KILN_OP_RELU ||
           op == KILN_OP_NOT || op == KILN_OP_BITWISE_NOT;
}

/* Attribute defaults are the f32 values a model would store, so a node
 * with the attribute spelled out computes the same as one without it. */
static kiln_status unary_attrs(ir_eval *e, kiln_op op, unary_params *p)
{
    memset(p, 0, sizeof(*p));
    switch (op) {
    case KILN_OP_ELU: p->alpha = ir_eval_attr_float(e, "alpha", 1.0); break;
    case KILN_OP_SELU:
        p->alpha = ir_eval_attr_float(e, "alpha", 1.67326319217681884765625);
        p->gamma = ir_eval_attr_float(e, "gamma", 1.05070102214813232421875);
        break;
    case KILN_OP_CELU:
        p->alpha = ir_eval_attr_float(e, "alpha", 1.0);
        if (p->alpha == 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "alpha must not be 0");
        break;
    case KILN_OP_LEAKY_RELU: p->alpha = ir_eval_attr_float(e, "alpha", (double)0.01f); break;
    case KILN_OP_HARD_SIGMOID:
        p->alpha = ir_eval_attr_float(e, "alpha", (double)0.2f);
        p->beta = ir_eval_attr_float(e, "beta", 0.5);
        break;
    case KILN_OP_THRESHOLDED_RELU: p->alpha = ir_eval_attr_float(e, "alpha", 1.0); break;
    case KILN_OP_SHRINK:
        p->bias = ir_eval_attr_float(e, "bias", 0.0);
        p->lambd = ir_eval_attr_float(e, "lambd", 0.5);
        break;
    case KILN_OP_GELU: {
        const char *a = ir_eval_attr_str(e, "approximate", "none");
        if (strcmp(a, "tanh") == 0)
            p->gelu_tanh = true;
        else if (strcmp(a, "none") != 0)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "approximate is '%s'; expected 'none' or 'tanh'", a);
        break;
    }
    case KILN_OP_IS_INF:
        p->detect_pos = ir_eval_attr_int(e, "detect_positive", 1) != 0;
        p->detect_neg = ir_eval_attr_int(e, "detect_negative", 1) != 0;
        break;
    default: break;
    }
    return KILN_OK;
}

/* log(1 + e^x) without overflow for large x. */
static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double sigmoid(double x)
{
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double z = exp(x);
    return z / (1.0 + z);
}

/* Clamps to [0, 1]; NaN stays NaN, as numpy's clip keeps it. */
static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static double unary_f64(kiln_op op, double x, const unary_params *p)
{
    switch (op) {
    case KILN_OP_ABS: return fabs(x);
    case KILN_OP_ACOS: return acos(x);
    case KILN_OP_ACOSH: return acosh(x);
    case KILN_OP_ASIN: return asin(x);
    case KILN_OP_ASINH: return asinh(x);
    case KILN_OP_ATAN: return atan(x);
    case KILN_OP_ATANH: return atanh(x);
    case KILN_OP_CEIL: return ceil(x);
    case KILN_OP_COS: return cos(x);
    case KILN_OP_COSH: return cosh(x);
    case KILN_OP_ERF: return erf(x);
    case KILN_OP_EXP: return exp(x);
    case KILN_OP_FLOOR: return floor(x);
    case KILN_OP_LOG: return log(x);
    case KILN_OP_NEG: return -x;
    case KILN_OP_RECIPROCAL: return 1.0 / x;
    case KILN_OP_ROUND: return nearbyint(x); /* the default mode rounds halves to even, as ONNX asks */
    case KILN_OP_SIGMOID: return sigmoid(x);
    case KILN_OP_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* keeps 0 and NaN */
    case KILN_OP_SIN: return sin(x);
    case KILN_OP_SINH: return sinh(x);
    case KILN_OP_SQRT: return sqrt(x);
    case KILN_OP_TAN: return tan(x);
    case KILN_OP_TANH: return tanh(x);
    case KILN_OP_RELU: return x < 0 ? 0.0 : x;
    case KILN_OP_IS_INF: return isinf(x) && (x > 0 ? p->detect_pos : p->detect_neg);
    case KILN_OP_IS_NAN: return isnan(x) != 0;
    case KILN_OP_SOFTPLUS: return softplus(x);
    case KILN_OP_SOFTSIGN: return x / (1.0 + fabs(x));
    case KILN_OP_ELU: return x < 0 ? p->alpha * expm1(x) : x;
    case KILN_OP_SELU: return x <= 0 ? p->gamma * p->alpha * expm1(x) : p->gamma * x;
    case KILN_OP_CELU: {
        if (isnan(x)) return x;
        double neg = p->alpha * expm1(x / p->alpha);
        return (x > 0 ? x : 0.0) + (neg < 0 ? neg : 0.0);
    }
    case KILN_OP_LEAKY_RELU: return x < 0 ? p->alpha * x : x;
    case KILN_OP_HARD_SIGMOID: return clamp01(p->alpha * x + p->beta);
    case KILN_OP_HARD_SWISH: return x * clamp01(x / 6.0 + 0.5);
    case KILN_OP_THRESHOLDED_RELU: return x > p->alpha ? x : 0.0;
    case KILN_OP_SHRINK: return x < -p->lambd ? x + p->bias : x > p->lambd ? x - p->bias : 0.0;
    case KILN_OP_GELU:
        if (p->gelu_tanh) return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case KILN_OP_MISH: return x * tanh(softplus(x));
    default: KILN_ASSERT(!"unary_f64: not a unary op"); return 0;
    }
}

/* Exact integer forms; negation wraps (abs(INT_MIN) is INT_MIN, as in numpy). */
static int64_t unary_i64(kiln_op op, int64_t x, bool uns)
{
    uint64_t u = (uint64_t)x;
    switch (op) {
    case KILN_OP_ABS: return uns || x >= 0 ? x : (int64_t)(0 - u);
    case KILN_OP_NEG: return (int64_t)(0 - u);
    case KILN_OP_SIGN: return uns ? u != 0 : (x > 0) - (x < 0);
    case KILN_OP_RELU: return x < 0 ? 0 : x;
    case KILN_OP_NOT: return x == 0;
    case KILN_OP_BITWISE_NOT: return (int64_t)~u;
    default: KILN_ASSERT(!"unary_i64: not an integer unary op"); return 0;
    }
}

kiln_status ir_eval_unary(ir_eval *e)
{
    kiln_op op = e->node->op;
    KILN_TRY(check_dtype(e, 0, unary_dtypes(op)));
    const ir_tensor *x = e->in[0];
    unary_params p;
    KILN_TRY(unary_attrs(e, op, &p));
    kiln_dtype out_dtype = op == KILN_OP_IS_INF || op == KILN_OP_IS_NAN ? KILN_BOOL : x->dtype;
    KILN_TRY(ir_eval_out(e, 0, out_dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_numel(x);
    unsigned cls = dtype_class(x->dtype);
    if (cls != C_FLOAT && unary_int_exact(op)) {
        bool uns = cls == C_UINT;
        for (int64_t i = 0; i < n; i++) ir_set_i64(y, i, unary_i64(op, ir_get_i64(x, i), uns));
    } else {
        for (int64_t i = 0; i < n; i++) ir_set_f64(y, i, unary_f64(op, ir_get_f64(x, i), &p));
    }
    return KILN_OK;
}

/* ---- binary ------------------------------------------------------------------ */

typedef struct binop {
    kiln_op op;
    bool uns;        /* integer inputs are unsigned (Pow: the exponent's signedness is exp_uns) */
    bool exp_uns;    /* Pow: the exponent is unsigned */
    bool fmod;       /* Mod: C's fmod (sign of the dividend) rather than Python's % (sign of the divisor) */
    bool shift_left; /* BitShift direction */
    int bits;        /* BitShift: width of the dtype */
} binop;

static bool is_compare(kiln_op op)
{
    return op == KILN_OP_EQUAL || op == KILN_OP_GREATER || op == KILN_OP_GREATER_OR_EQUAL ||
           op == KILN_OP_LESS || op == KILN_OP_LESS_OR_EQUAL;
}

/* Checks the two inputs' dtypes and reads the attributes. */
static kiln_status binary_setup(ir_eval *e, binop *b, kiln_dtype *out_dtype)
{
    kiln_op op = e->node->op;
    memset(b, 0, sizeof(*b));
    b->op = op;
    unsigned classes;
    switch (op) {
    case KILN_OP_AND:
    case KILN_OP_OR:
    case KILN_OP_XOR: classes = C_BOOL; break;
    case KILN_OP_EQUAL: classes = C_NUM | C_BOOL; break;
    case KILN_OP_BIT_SHIFT: classes = C_UINT; break;
    case KILN_OP_BITWISE_AND:
    case KILN_OP_BITWISE_OR:
    case KILN_OP_BITWISE_XOR: classes = C_INT; break;
    default: classes = C_NUM; break;
    }
    KILN_TRY(check_dtype(e, 0, classes));
    KILN_TRY(check_dtype(e, 1, classes));
    /* Pow alone takes a base and an exponent of different types (opset 12+). */
    if (op != KILN_OP_POW) KILN_TRY(check_same_dtype(e, 0, 1));
    kiln_dtype t = e->in[0]->dtype;
    b->uns = dtype_class(t) == C_UINT;
    b->exp_uns = dtype_class(e->in[1]->dtype) == C_UINT;
    *out_dtype = is_compare(op) ? KILN_BOOL : t;

    if (op == KILN_OP_MOD) {
        b->fmod = ir_eval_attr_int(e, "fmod", 0) != 0;
        if (!b->fmod && ir_dtype_is_float(t))
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "Mod of %s tensors needs fmod=1", kiln_dtype_name(t));
    }
    if (op == KILN_OP_BIT_SHIFT) {
        const char *dir = ir_eval_attr_str(e, "direction", NULL);
        if (!dir) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the 'direction' attribute is missing");
        if (strcmp(dir, "LEFT") == 0)
            b->shift_left = true;
        else if (strcmp(dir, "RIGHT") != 0)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "direction is '%s'; expected 'LEFT' or 'RIGHT'", dir);
        b->bits = (int)(8 * ir_dtype_size(t));
    }
    return KILN_OK;
}

static double binary_f64(const binop *b, double x, double y)
{
    switch (b->op) {
    case KILN_OP_ADD: return x + y;
    case KILN_OP_SUB: return x - y;
    case KILN_OP_MUL: return x * y;
    case KILN_OP_DIV: return x / y;
    case KILN_OP_POW: return pow(x, y);
    case KILN_OP_MOD: return fmod(x, y); /* floats always have fmod=1 */
    case KILN_OP_PRELU: return x < 0 ? x * y : x;
    default: KILN_ASSERT(!"binary_f64: not a float binary op"); return 0;
    }
}

/* base**exp with wrapping multiplication; a negative exponent truncates the
 * reciprocal to an integer, so only bases 1 and -1 give non-zero. */
static int64_t ipow(int64_t base, int64_t exp, bool exp_uns)
{
    if (!exp_uns && exp < 0) {
        if (base == 1) return 1;
        if (base == -1) return (exp & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, m = (uint64_t)base, k = (uint64_t)exp;
    for (; k; k >>= 1) {
        if (k & 1) r *= m;
        m *= m;
    }
    return (int64_t)r;
}

static int64_t int_div(int64_t x, int64_t y, bool uns)
{
    if (y == 0) return 0;
    if (uns) return (int64_t)((uint64_t)x / (uint64_t)y);
    if (y == -1) return (int64_t)(0 - (uint64_t)x); /* INT64_MIN / -1 wraps */
    return x / y;                                     /* C truncates toward zero, as ONNX asks */
}

static int64_t int_mod(int64_t x, int64_t y, bool uns, bool c_fmod)
{
    if (y == 0) return 0;
    if (uns) return (int64_t)((uint64_t)x % (uint64_t)y);
    if (y == -1) return 0;
    int64_t r = x % y;
    if (!c_fmod && r != 0 && (r < 0) != (y < 0)) r += y; /* Python: the sign of the divisor */
    return r;
}

static int64_t binary_i64(const binop *b, int64_t x, int64_t y)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (b->op) {
    case KILN_OP_ADD: return (int64_t)(ux + uy);
    case KILN_OP_SUB: return (int64_t)(ux - uy);
    case KILN_OP_MUL: return (int64_t)(ux * uy);
    case KILN_OP_DIV: return int_div(x, y, b->uns);
    case KILN_OP_POW: return ipow(x, y, b->exp_uns);
    case KILN_OP_MOD: return int_mod(x, y, b->uns, b->fmod);
    case KILN_OP_PRELU: return !b->uns && x < 0 ? (int64_t)(ux * uy) : x;
    case KILN_OP_AND: return x && y;
    case KILN_OP_OR: return x || y;
    case KILN_OP_XOR: return (x != 0) != (y != 0);
    case KILN_OP_BIT_SHIFT: /* numpy: shifting by the width or more gives 0 */
        if (uy >= (uint64_t)b->bits) return 0;
        return (int64_t)(b->shift_left ? ux << uy : ux >> uy);
    case KILN_OP_BITWISE_AND: return x & y;
    case KILN_OP_BITWISE_OR: return x | y;
    case KILN_OP_BITWISE_XOR: return x ^ y;
    default: KILN_ASSERT(!"binary_i64: not an integer binary op"); return 0;
    }
}

/* -1, 0, 1 for x < y, x == y, x > y; 2 when unordered (NaN), which makes
 * every comparison false. */
static int order_f64(double x, double y) { return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2; }

static int order_i64(int64_t x, int64_t y, bool uns)
{
    if (uns) return (uint64_t)x < (uint64_t)y ? -1 : (uint64_t)x > (uint64_t)y;
    return x < y ? -1 : x > y;
}

static bool compare(kiln_op op, int ord)
{
    switch (op) {
    case KILN_OP_EQUAL: return ord == 0;
    case KILN_OP_GREATER: return ord == 1;
    case KILN_OP_GREATER_OR_EQUAL: return ord == 0 || ord == 1;
    case KILN_OP_LESS: return ord == -1;
    case KILN_OP_LESS_OR_EQUAL: return ord == 0 || ord == -1;
    default: KILN_ASSERT(!"compare: not a comparison"); return false;
    }
}

/* Before opset 7 the binary ops broadcast only with broadcast=1, and then
 * B's shape matches the run of A's dims starting at 'axis' (a suffix when
 * no axis is given); PRelu's 1-D slope ran along the channel axis 1. Both
 * become numpy broadcasting once B's shape is padded with trailing ones,
 * which keeps its elements in place: *view is that padded B. */
static kiln_status legacy_broadcast(ir_eval *e, const ir_tensor **ab, ir_tensor *view)
{
    const ir_tensor *a = ab[0], *b = ab[1];
    if (e->node->opset >= 7) return KILN_OK;
    int64_t axis;
    if (e->node->op == KILN_OP_PRELU) {
        if (b->rank != 1 || a->rank < 2 || b->dims[0] == 1 || b->dims[0] != a->dims[1]) return KILN_OK;
        axis = 1;
    } else {
        if (!ir_eval_attr_int(e, "broadcast", 0) || !ir_eval_has_attr(e, "axis")) return KILN_OK;
        axis = ir_eval_attr_int(e, "axis", 0);
        if (axis < 0) axis += a->rank;
        if (axis < 0 || axis + b->rank > a->rank) {
            char b1[160], b2[160];
            return ir_eval_fail(e, KILN_ERR_SHAPE, "axis %lld cannot place %s within %s",
                                (long long)ir_eval_attr_int(e, "axis", 0), ir_tensor_type_str(b, b1, sizeof(b1)),
                                ir_tensor_type_str(a, b2, sizeof(b2)));
        }
    }
    *view = *b;
    view->rank = a->rank - (int)axis;
    for (int i = b->rank; i < view->rank; i++) view->dims[i] = 1;
    ab[1] = view;
    return KILN_OK;
}

kiln_status ir_eval_binary(ir_eval *e)
{
    binop b;
    kiln_dtype out_dtype;
    KILN_TRY(binary_setup(e, &b, &out_dtype));
    const ir_tensor *ab[2] = {e->in[0], e->in[1]};
    ir_tensor b_view;
    KILN_TRY(legacy_broadcast(e, ab, &b_view));
    int rank;
    int64_t dims[IR_MAX_RANK];
    KILN_TRY(ir_eval_broadcast(e, 2, ab, &rank, dims));
    if (b.op == KILN_OP_PRELU) {
        /* The slope broadcasts to x, never x to the slope. */
        if (rank != ab[0]->rank || memcmp(dims, ab[0]->dims, (size_t)rank * sizeof(int64_t)) != 0) {
            char b1[160], b2[160];
            return ir_eval_fail(e, KILN_ERR_SHAPE, "slope %s does not broadcast to the input %s",
                                ir_tensor_type_str(ab[1], b1, sizeof(b1)), ir_tensor_type_str(ab[0], b2, sizeof(b2)));
        }
    }
    KILN_TRY(ir_eval_out(e, 0, out_dtype, rank, dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_dims_numel(rank, dims);
    /* Pow with a float on either side computes in double (an integer base
     * with a float exponent truncates back, like numpy's astype). */
    bool in_double = ir_dtype_is_float(ab[0]->dtype) || ir_dtype_is_float(ab[1]->dtype);
    ir_bcast bc;
    ir_bcast_init(&bc, rank, dims, 2, ab);
    for (int64_t i = 0; i < n; i++, ir_bcast_next(&bc)) {
        if (is_compare(b.op)) {
            int ord = in_double ? order_f64(ir_get_f64(ab[0], bc.off[0]), ir_get_f64(ab[1], bc.off[1]))
                                : order_i64(ir_get_i64(ab[0], bc.off[0]), ir_get_i64(ab[1], bc.off[1]), b.uns);
            ((uint8_t *)y->data)[i] = compare(b.op, ord);
        } else if (in_double) {
            ir_set_f64(y, i, binary_f64(&b, ir_get_f64(ab[0], bc.off[0]), ir_get_f64(ab[1], bc.off[1])));
        } else {
            ir_set_i64(y, i, binary_i64(&b, ir_get_i64(ab[0], bc.off[0]), ir_get_i64(ab[1], bc.off[1])));
        }
    }
    return KILN_OK;
}

/* ---- variadic: Max, Min, Sum, Mean ---------------------------------------------- */

kiln_status ir_eval_variadic(ir_eval *e)
{
    kiln_op op = e->node->op;
    if (e->n_in < 1) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "needs at least one input");
    unsigned classes = op == KILN_OP_MAX || op == KILN_OP_MIN ? C_NUM : C_FLOAT;
    for (int k = 0; k < e->n_in; k++) {
        KILN_TRY(check_dtype(e, k, classes));
        KILN_TRY(check_same_dtype(e, 0, k));
    }
    int rank;
    int64_t dims[IR_MAX_RANK];
    KILN_TRY(ir_eval_broadcast(e, e->n_in, e->in, &rank, dims));
    kiln_dtype dtype = e->in[0]->dtype;
    KILN_TRY(ir_eval_out(e, 0, dtype, rank, dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_dims_numel(rank, dims);
    size_t bytes = (size_t)(n ? n : 1) * 8;
    bool is_float = ir_dtype_is_float(dtype), uns = dtype_class(dtype) == C_UINT;
    double *accf = is_float ? base_malloc(bytes) : NULL;
    int64_t *acci = is_float ? NULL : base_malloc(bytes);
    if (!accf && !acci) return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for %lld accumulators", (long long)n);

    /* Inputs are folded in one at a time, so any number of them broadcasts. */
    for (int k = 0; k < e->n_in; k++) {
        const ir_tensor *x = e->in[k];
        ir_bcast bc;
        ir_bcast_init(&bc, rank, dims, 1, &e->in[k]);
        for (int64_t i = 0; i < n; i++, ir_bcast_next(&bc)) {
            if (is_float) {
                double v = ir_get_f64(x, bc.off[0]), *a = &accf[i];
                if (k == 0)
                    *a = v;
                else if (op == KILN_OP_MAX)
                    *a = v > *a || isnan(v) ? v : *a; /* NaN wins, as in numpy.maximum */
                else if (op == KILN_OP_MIN)
                    *a = v < *a || isnan(v) ? v : *a;
                else
                    *a += v;
            } else {
                int64_t v = ir_get_i64(x, bc.off[0]), *a = &acci[i];
                if (k == 0 || (op == KILN_OP_MAX && order_i64(v, *a, uns) > 0) ||
                    (op == KILN_OP_MIN && order_i64(v, *a, uns) < 0))
                    *a = v;
            }
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if (is_float)
            ir_set_f64(y, i, op == KILN_OP_MEAN ? accf[i] / e->n_in : accf[i]);
        else
            ir_set_i64(y, i, acci[i]);
    }
    base_free(accf);
    base_free(acci);
    return KILN_OK;
}

/* ---- Clip ---------------------------------------------------------------------- */

/* Clip's bound input i, when given, must be a one-element tensor of x's dtype. */
static kiln_status clip_bound(ir_eval *e, int i, const char *what)
{
    if (!ir_eval_has(e, i)) return KILN_OK;
    KILN_TRY(check_same_dtype(e, 0, i));
    const ir_tensor *t = e->in[i];
    if (t->rank > 1 || ir_numel(t) != 1) {
        char buf[160];
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s (input %d) must be a scalar, not %s", what, i,
                            ir_tensor_type_str(t, buf, sizeof(buf)));
    }
    return KILN_OK;
}

kiln_status ir_eval_clip(ir_eval *e)
{
    /* Before opset 11 the bounds were float attributes and only floats were clipped. */
    bool attrs = e->node->opset < 11;
    KILN_TRY(check_dtype(e, 0, attrs ? C_FLOAT : C_NUM));
    const ir_tensor *x = e->in[0];
    if (!attrs) {
        KILN_TRY(clip_bound(e, 1, "min"));
        KILN_TRY(clip_bound(e, 2, "max"));
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_numel(x);
    bool has_lo = !attrs && ir_eval_has(e, 1), has_hi = !attrs && ir_eval_has(e, 2);
    /* Clamping to min first and then to max gives max everywhere when
     * min > max, as the spec asks. */
    if (ir_dtype_is_float(x->dtype)) {
        double lo = -INFINITY, hi = INFINITY;
        if (attrs) {
            lo = ir_eval_attr_float(e, "min", -INFINITY);
            hi = ir_eval_attr_float(e, "max", INFINITY);
        }
        if (has_lo) lo = ir_get_f64(e->in[1], 0);
        if (has_hi) hi = ir_get_f64(e->in[2], 0);
        for (int64_t i = 0; i < n; i++) {
            double v = ir_get_f64(x, i); /* NaN stays NaN */
            if (v < lo) v = lo;
            if (v > hi) v = hi;
            ir_set_f64(y, i, v);
        }
    } else {
        bool uns = dtype_class(x->dtype) == C_UINT;
        int64_t lo = uns ? 0 : INT64_MIN, hi = uns ? -1 /* UINT64_MAX */ : INT64_MAX;
        if (has_lo) lo = ir_get_i64(e->in[1], 0);
        if (has_hi) hi = ir_get_i64(e->in[2], 0);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = ir_get_i64(x, i);
            if (order_i64(v, lo, uns) < 0) v = lo;
            if (order_i64(v, hi, uns) > 0) v = hi;
            ir_set_i64(y, i, v);
        }
    }
    return KILN_OK;
}

/* ---- Where ----------------------------------------------------------------------- */

kiln_status ir_eval_where(ir_eval *e)
{
    KILN_TRY(check_dtype(e, 0, C_BOOL));
    KILN_TRY(check_dtype(e, 1, C_NUM | C_BOOL));
    KILN_TRY(check_dtype(e, 2, C_NUM | C_BOOL));
    KILN_TRY(check_same_dtype(e, 1, 2));
    int rank;
    int64_t dims[IR_MAX_RANK];
    KILN_TRY(ir_eval_broadcast(e, 3, e->in, &rank, dims));
    kiln_dtype dtype = e->in[1]->dtype;
    KILN_TRY(ir_eval_out(e, 0, dtype, rank, dims));
    if (e->infer) return KILN_OK;

    /* Elements are copied as bytes: every dtype comes through bit-exact. */
    size_t size = ir_dtype_size(dtype);
    const uint8_t *cond = e->in[0]->data;
    const char *xd = e->in[1]->data, *yd = e->in[2]->data;
    char *out = e->out[0].data;
    int64_t n = ir_dims_numel(rank, dims);
    ir_bcast bc;
    ir_bcast_init(&bc, rank, dims, 3, e->in);
    for (int64_t i = 0; i < n; i++, ir_bcast_next(&bc)) {
        const char *src = cond[bc.off[0]] ? xd + (size_t)bc.off[1] * size : yd + (size_t)bc.off[2] * size;
        memcpy(out + (size_t)i * size, src, size);
    }
    return KILN_OK;
}

/* ---- Cast, CastLike ------------------------------------------------------------------ */

/* Converts element i of x into element i of y (different dtypes). Floats
 * round once to the nearest (even); float to integer truncates toward zero,
 * NaN and out-of-range values as ir_set_f64 defines them (ONNX leaves them
 * undefined); integers wrap to narrower ones; anything non-zero is true. */
static void cast_element(const ir_tensor *x, ir_tensor *y, int64_t i)
{
    if (ir_dtype_is_float(x->dtype)) {
        ir_set_f64(y, i, ir_get_f64(x, i));
        return;
    }
    int64_t v = ir_get_i64(x, i);
    if (!ir_dtype_is_float(y->dtype)) {
        ir_set_i64(y, i, v);
        return;
    }
    /* An integer into a float: f32 directly, so a 64-bit integer rounds once. */
    if (x->dtype == KILN_U64) {
        uint64_t u = (uint64_t)v;
        if (y->dtype == KILN_F32)
            ((float *)y->data)[i] = (float)u;
        else
            ir_set_f64(y, i, (double)u);
    } else if (y->dtype == KILN_F32) {
        ((float *)y->data)[i] = (float)v;
    } else {
        ir_set_f64(y, i, (double)v);
    }
}

kiln_status ir_eval_cast(ir_eval *e)
{
    if (!ir_eval_has(e, 0)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input 0 is missing");
    const ir_tensor *x = e->in[0];
    kiln_dtype to;
    if (e->node->op == KILN_OP_CAST_LIKE) {
        if (!ir_eval_has(e, 1)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input 1 is missing");
        to = e->in[1]->dtype;
    } else {
        if (!ir_eval_has_attr(e, "to")) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the 'to' attribute is missing");
        int64_t v = ir_eval_attr_int(e, "to", KILN_UNDEF);
        if (v <= KILN_UNDEF || v >= KILN_DTYPE_COUNT)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "Cast to ONNX data type %lld is not supported",
                                (long long)v);
        to = (kiln_dtype)v;
    }
    if (x->dtype == KILN_STRING || to == KILN_STRING)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED,
                            "Cast from %s to %s: conversions between strings and numbers are not supported",
                            kiln_dtype_name(x->dtype), kiln_dtype_name(to));
    if (!ir_dtype_is_numeric(x->dtype) || !ir_dtype_is_numeric(to))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "Cast from %s to %s is not supported",
                            kiln_dtype_name(x->dtype), kiln_dtype_name(to));
    KILN_TRY(ir_eval_out(e, 0, to, x->rank, x->dims));
    if (e->infer) return KILN_OK;

    ir_tensor *y = &e->out[0];
    int64_t n = ir_numel(x);
    if (x->dtype == to) {
        if (n) memcpy(y->data, x->data, (size_t)n * ir_dtype_size(to));
        return KILN_OK;
    }
    for (int64_t i = 0; i < n; i++) cast_element(x, y, i);
    return KILN_OK;
}
