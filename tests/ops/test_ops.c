/*
 * test_ops.c: the per-op differential test of the `c` target (ggml's
 * test-backend-ops): every op the target compiles runs on random shapes,
 * inputs and attributes through api_compile + kiln_rt and through the
 * reference interpreter, and every output is compared with the per-dtype
 * tolerances of api/tolerance.h.
 *
 *   test_ops [--filter SUBSTR] [--seed N] [--verbose] [--list] [--dump DIR]
 *
 * A case builds a small ONNX model (one node, or a fused pattern such as
 * Conv+Add+Relu) for each of its shapes; shapes, attributes and inputs come
 * from a generator seeded by --seed, the case's name and the shape's index,
 * so a run is repeatable and a failure is reported with what reproduces it.
 * Artifacts are built for 1 and 2 threads alternately. A case also says
 * where its nodes must run: compiled from templates (the point of most
 * cases: a case that silently fell back would test nothing), in a fallback
 * segment (the cases for the fallback path), or either; a case that tests
 * a fusion also says how many groups the partition must make of it.
 *
 * The completeness check is the rule "an op without a differential case is
 * not supported on the target": every op that no compiled case covers must
 * be refused by target_c.can_compile on a canonical instance, so it runs in
 * a fallback segment.
 *
 * Each shape runs in a child process with a time limit, so a crash is a
 * failure of that shape. Output: one line per case (and one per failing
 * shape), then "N passed, N failed" counting cases.
 */
#include "api/compile.h"
#include "api/tolerance.h"
#include "ir/interp.h"
#include "kiln_rt.h"
#include "../unit/model_builder.h"
#include "onnx/onnx.h"
#include "pass/pass.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_SHAPES 4         /* shapes per case unless the case says otherwise */
#define CASE_TIMEOUT_S 60 /* per shape, in the child */
#define MAX_KEEP 2048

static int verbose;
static uint64_t seed = 1;
static int n_compiles; /* alternates the thread count */
static const char *dump_dir; /* --dump: failing shapes' models are kept here */

/* ---- random numbers ------------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) /* splitmix64 */
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unif(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

/* Uniform in [lo, hi]. */
static int64_t rng_int(rng *r, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* ---- input generators ------------------------------------------------------------ */

typedef enum gen {
    G_NORMAL,   /* floats in [-2, 2]; integers in [-50, 50] ([0, 100] unsigned) */
    G_POS,      /* floats in [0.1, 4]; integers in [1, 20] */
    G_UNIT,     /* floats in (-0.95, 0.95) */
    G_GT1,      /* floats in [1.05, 4] */
    G_NONZERO,  /* |x| in [0.5, 2]; integers nonzero in [-20, 20] */
    G_HALVES,   /* multiples of 0.5 in [-4, 4]: ties for rounding and comparisons */
    G_SPECIAL,  /* G_NORMAL with some inf, -inf, nan, -0 */
    G_SMALL,    /* integers in [-4, 4] ([0, 7] unsigned) as any dtype: many ties */
    G_EXPON,    /* exponents: integers in [0, 5], floats in [-2, 2] */
    G_WIDE,     /* floats in [-300, 300] with fractions: narrowing casts wrap */
    G_NEAR1,    /* floats in [0.8, 1.25] (products) */
    G_EXP,      /* floats in [-6, 6] */
    G_BOOL,     /* 0 or 1 in any dtype */
    G_SHIFT,    /* shift amounts: [0, bits - 1] */
    G_PROB,     /* floats in [0, 1) */
} gen;

static void fill(ir_tensor *t, gen g, rng *r)
{
    int64_t n = ir_numel(t);
    bool fl = ir_dtype_is_float(t->dtype), uns = ir_dtype_is_int(t->dtype) && !ir_dtype_is_signed(t->dtype);
    if (t->dtype == KILN_BOOL) g = G_BOOL;
    if (!fl && g == G_SPECIAL) g = G_NORMAL;
    for (int64_t i = 0; i < n; i++) {
        double u = rng_unif(r), v;
        switch (g) {
        case G_POS: v = fl ? 0.1 + 3.9 * u : (double)rng_int(r, 1, 20); break;
        case G_UNIT: v = -0.95 + 1.9 * u; break;
        case G_GT1: v = 1.05 + 2.95 * u; break;
        case G_NONZERO:
            if (fl) v = (0.5 + 1.5 * u) * (rng_next(r) & 1 ? -1 : 1);
            else {
                v = (double)rng_int(r, uns ? 1 : -20, 20);
                if (v == 0) v = 1;
            }
            break;
        case G_HALVES: v = 0.5 * (double)rng_int(r, -8, 8); break;
        case G_SPECIAL: {
            int64_t k = rng_int(r, 0, 15);
            v = k == 0 ? INFINITY : k == 1 ? -INFINITY : k == 2 ? NAN : k == 3 ? -0.0 : -2 + 4 * u;
            break;
        }
        case G_SMALL: v = (double)(uns ? rng_int(r, 0, 7) : rng_int(r, -4, 4)); break;
        case G_EXPON: v = fl ? -2 + 4 * u : (double)rng_int(r, 0, 5); break;
        case G_WIDE: v = -300 + 600 * u; break;
        case G_NEAR1: v = 0.8 + 0.45 * u; break;
        case G_EXP: v = -6 + 12 * u; break;
        case G_BOOL: v = (double)(rng_next(r) & 1); break;
        case G_SHIFT: v = (double)rng_int(r, 0, 8 * (int64_t)ir_dtype_size(t->dtype) - 1); break;
        case G_PROB: v = u; break;
        default: v = fl ? -2 + 4 * u : (double)(uns ? rng_int(r, 0, 100) : rng_int(r, -50, 50)); break;
        }
        if (fl) ir_set_f64(t, i, v);
        else ir_set_i64(t, i, (int64_t)v);
    }
}

/* ---- a case under construction ----------------------------------------------------- */

typedef enum expect {
    EXPECT_C,        /* every node compiles from templates */
    EXPECT_FALLBACK, /* some node runs in a fallback segment */
    EXPECT_ANY,
} expect;

struct tc;

/* A row of the case table: a builder and what it needs. */
typedef struct op_case {
    const char *name;
    void (*build)(struct tc *c); /* adds the model's inputs, nodes and outputs for shape c->variant */
    const char *op;              /* the ONNX op of generic builders */
    unsigned dtypes;             /* DT_* bits the generic elementwise builders instantiate */
    gen g;                       /* their input generator */
    int opset;                   /* 0: 17 */
    expect want;                 /* where the nodes must run */
    int n_shapes;                /* 0: N_SHAPES */
} op_case;

/* One shape of a case under construction. */
typedef struct tc {
    const op_case *cs;
    mb_model *mb;
    rng r;
    int variant;                /* which of the case's shapes */
    int n_in;
    ir_tensor in[MB_MAX];       /* data of the graph inputs, in order */
    char desc[512];             /* attributes and other choices, for the report */
    int want_groups;            /* > 0: the groups the partition must make (a case that tests a fusion) */
    unsigned want_patterns;     /* PASS_PATTERN_* the target must have for want_groups to apply */
    int want_moves;             /* >= 0: the move groups (copies) the partition must make; -1: any */
    /* Where a target fuses attention: how its group reads q, k^T and v from
     * one value (ViT's projection): each one's offset and the stride of
     * each of its dims (dims of extent 1 unchecked). */
    bool want_attn_reads;
    int64_t want_attn_off[3], want_attn_st[3][4];
    /* a persistent kernel's configuration ("256x1") the case compiles with
     * under a plain --schedule mono or mono-barriers, for a template choice
     * that depends on the block (NULL: the compiler's) */
    const char *mono_config;
    void *keep[MAX_KEEP];       /* names and initializer data, freed with the case */
    int n_keep;
    int n_nodes;
} tc;

static void *tc_keep(tc *c, void *p)
{
    if (!p || c->n_keep == MAX_KEEP) {
        fprintf(stderr, "test_ops: out of memory or MAX_KEEP\n");
        abort();
    }
    c->keep[c->n_keep++] = p;
    return p;
}

static const char *tc_str(tc *c, const char *fmt, ...) KILN_PRINTF(2, 3);
static const char *tc_str(tc *c, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return tc_keep(c, strdup(buf));
}

/* Appends printf-style text to the string in buf (n bytes). */
static void appendf(char *buf, size_t n, const char *fmt, ...) KILN_PRINTF(3, 4);
static void appendf(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

/* Appends a note on the case's choices ("axis=1") to the report. */
static void tc_note(tc *c, const char *fmt, ...) KILN_PRINTF(2, 3);
static void tc_note(tc *c, const char *fmt, ...)
{
    size_t len = strlen(c->desc);
    if (len + 2 >= sizeof(c->desc)) return;
    if (len) {
        c->desc[len++] = ' ';
        c->desc[len] = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->desc + len, sizeof(c->desc) - len, fmt, ap);
    va_end(ap);
}

/* A dim in [lo, hi], 1 one time in five when lo <= 1. */
static int64_t rdim(tc *c, int64_t lo, int64_t hi)
{
    if (lo <= 1 && rng_int(&c->r, 0, 4) == 0) return 1;
    return rng_int(&c->r, lo, hi);
}

static int64_t rint_(tc *c, int64_t lo, int64_t hi) { return rng_int(&c->r, lo, hi); }
static double runif(tc *c, double lo, double hi) { return lo + (hi - lo) * rng_unif(&c->r); }

/* A random shape of rank in [min_rank, max_rank], dims in [1, max_dim]. */
static int rshape(tc *c, int min_rank, int max_rank, int64_t max_dim, int64_t *dims)
{
    int rank = (int)rint_(c, min_rank, max_rank);
    for (int i = 0; i < rank; i++) dims[i] = rdim(c, 1, max_dim);
    return rank;
}

/* The shapes the cases draw: variant 0 small (size-1 dims likely), 1 and 2
 * medium with odd sizes, 3 large enough that compiled groups split into
 * several rTasks. Elementwise ranks 0..4. */
static int rshape_ew(tc *c, int64_t *dims)
{
    switch (c->variant % 4) {
    case 0: return rshape(c, 0, 3, 3, dims);
    case 1: return rshape(c, 1, 4, 7, dims);
    case 2: return rshape(c, 2, 4, 13, dims);
    default:
        dims[0] = rdim(c, 2, 4);
        dims[1] = rint_(c, 40, 70) | 1;
        dims[2] = rint_(c, 100, 140) | 1;
        return 3;
    }
}

/* A graph input with random data. OUT: the tensor (filled; the caller may
 * overwrite its data). */
static ir_tensor *tc_input(tc *c, const char *name, kiln_dtype t, int rank, const int64_t *dims, gen g)
{
    if (c->n_in == MB_MAX) {
        fprintf(stderr, "test_ops: more than %d graph inputs in case %s\n", MB_MAX, c->cs->name);
        abort();
    }
    ir_tensor *x = &c->in[c->n_in++];
    if (ir_tensor_alloc(x, t, rank, dims) != KILN_OK) abort();
    fill(x, g, &c->r);
    mb_input(c->mb, name, t, rank, dims);
    return x;
}

/* An initializer with random data. OUT: the tensor, whose data the caller
 * may overwrite before the model is packed. */
static ir_tensor *tc_const(tc *c, const char *name, kiln_dtype t, int rank, const int64_t *dims, gen g)
{
    ir_tensor *x = tc_keep(c, calloc(1, sizeof(ir_tensor)));
    int64_t n = ir_dims_numel(rank, dims);
    x->dtype = t;
    x->rank = rank;
    if (rank > 0) memcpy(x->dims, dims, (size_t)rank * sizeof(int64_t));
    x->nbytes = (size_t)n * ir_dtype_size(t);
    x->data = tc_keep(c, calloc(1, x->nbytes + 1));
    fill(x, g, &c->r);
    mb_init_tensor(c->mb, name, t, rank, dims, x->data, x->nbytes);
    return x;
}

/* A 1-D int64 initializer (rank 0 when n < 0: the scalar v[0]). */
static void tc_ints(tc *c, const char *name, int n, const int64_t *v)
{
    int64_t d = n < 0 ? 1 : n;
    ir_tensor *x = tc_const(c, name, KILN_I64, n < 0 ? 0 : 1, &d, G_NORMAL);
    memcpy(x->data, v, (size_t)d * sizeof(int64_t));
}

/* A scalar initializer of dtype t holding v. */
static void tc_scalar(tc *c, const char *name, kiln_dtype t, double v)
{
    ir_tensor *x = tc_const(c, name, t, 0, NULL, G_NORMAL);
    if (ir_dtype_is_float(t)) ir_set_f64(x, 0, v);
    else ir_set_i64(x, 0, (int64_t)v);
}

/* A node; ins and outs are comma-separated names, an empty name an omitted
 * optional input ("x,,max"). */
static Onnx__NodeProto *tc_node(tc *c, const char *op, const char *ins, const char *outs)
{
    const char *in[MB_MAX_IO], *out[MB_MAX_IO];
    int n_in = 0, n_out = 0;
    for (int pass = 0; pass < 2; pass++) {
        const char *s = pass ? outs : ins;
        const char **list = pass ? out : in;
        int *count = pass ? &n_out : &n_in;
        if (!s || !*s) continue;
        for (;;) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            list[(*count)++] = tc_keep(c, strndup(s, len));
            if (!e) break;
            s = e + 1;
        }
    }
    return mb_node_io(c->mb, op, tc_str(c, "%s_%d", op, c->n_nodes++), n_in, in, n_out, out);
}

static void tc_out(tc *c, const char *name) { mb_output(c->mb, name); }

static void ai(tc *c, Onnx__NodeProto *n, const char *name, int64_t v) { mb_attr_int(c->mb, n, name, v); }
static void af(tc *c, Onnx__NodeProto *n, const char *name, double v) { mb_attr_float(c->mb, n, name, (float)v); }
static void as(tc *c, Onnx__NodeProto *n, const char *name, const char *v) { mb_attr_string(c->mb, n, name, v); }
static void ais(tc *c, Onnx__NodeProto *n, const char *name, int k, const int64_t *v)
{
    mb_attr_ints(c->mb, n, name, k, v);
}

/* ---- dtypes of the elementwise cases ---------------------------------------------------- */

/* dtype bits of the elementwise cases: one model computes the op for each. */
enum { DT_F32 = 1, DT_F64 = 2, DT_I32 = 4, DT_I64 = 8, DT_BOOL = 16, DT_U8 = 32, DT_I8 = 64, DT_U32 = 128,
       DT_U64 = 256, DT_I16 = 512, DT_U16 = 1024 };
static const kiln_dtype dt_of_bit[] = {KILN_F32, KILN_F64, KILN_I32, KILN_I64, KILN_BOOL, KILN_U8,
                                       KILN_I8,  KILN_U32, KILN_U64, KILN_I16, KILN_U16};
#define DT_FLOAT (DT_F32 | DT_F64)
#define DT_SINT (DT_I32 | DT_I64 | DT_I8)
#define DT_NUM (DT_FLOAT | DT_SINT | DT_U8)
#define N_DT_BITS 11


/* ---- elementwise builders -------------------------------------------------------------- */

/* An operand shape that broadcasts to dims: mode 0 the same, 1 fewer
 * leading dims, 2 some dims 1, 3 a scalar, 4 [1]. */
static int bcast_shape(tc *c, int mode, int rank, const int64_t *dims, int64_t *out)
{
    switch (mode) {
    case 1: {
        int drop = rank ? (int)rint_(c, 1, rank) : 0;
        memcpy(out, dims + drop, (size_t)(rank - drop) * sizeof(int64_t));
        return rank - drop;
    }
    case 2:
        for (int i = 0; i < rank; i++) out[i] = rint_(c, 0, 1) ? 1 : dims[i];
        return rank;
    case 3: return 0;
    case 4: out[0] = 1; return 1;
    default: memcpy(out, dims, (size_t)rank * sizeof(int64_t)); return rank;
    }
}

/* For each dtype bit of the case: calls one(c, dtype, suffix). */
static void each_dtype(tc *c, void (*one)(tc *c, kiln_dtype t, const char *sfx))
{
    for (int b = 0; b < N_DT_BITS; b++)
        if (c->cs->dtypes & (1u << b)) one(c, dt_of_bit[b], kiln_dtype_name(dt_of_bit[b]));
}

static bool op_is(const tc *c, const char *op) { return strcmp(c->cs->op, op) == 0; }

/* Shape 2 of the elementwise cases feeds floats with inf, -inf, NaN and -0
 * mixed in: the target must give the interpreter's special values too. */
static gen special(const tc *c, kiln_dtype t, gen g)
{
    return c->variant == 2 && ir_dtype_is_float(t) ? G_SPECIAL : g;
}

/* Random attributes of the unary activations. */
static void unary_attrs(tc *c, Onnx__NodeProto *n)
{
    const char *op = c->cs->op;
    if (!strcmp(op, "Elu") || !strcmp(op, "Celu") || !strcmp(op, "ThresholdedRelu")) {
        double a = runif(c, 0.3, 2.0);
        af(c, n, "alpha", a);
        tc_note(c, "alpha=%.3g", a);
    } else if (!strcmp(op, "LeakyRelu")) {
        if (c->variant != 0) {
            double a = runif(c, -0.5, 0.5);
            af(c, n, "alpha", a);
            tc_note(c, "alpha=%.3g", a);
        }
    } else if (!strcmp(op, "Selu")) {
        if (c->variant != 0) {
            double a = runif(c, 0.5, 2), g = runif(c, 0.5, 2);
            af(c, n, "alpha", a);
            af(c, n, "gamma", g);
            tc_note(c, "alpha=%.3g gamma=%.3g", a, g);
        }
    } else if (!strcmp(op, "HardSigmoid")) {
        if (c->variant != 0) {
            double a = runif(c, 0.05, 0.5), b = runif(c, 0.2, 0.8);
            af(c, n, "alpha", a);
            af(c, n, "beta", b);
            tc_note(c, "alpha=%.3g beta=%.3g", a, b);
        }
    } else if (!strcmp(op, "Shrink")) {
        if (c->variant != 0) {
            double b = runif(c, -0.5, 0.5), l = runif(c, 0, 1.5);
            af(c, n, "bias", b);
            af(c, n, "lambd", l);
            tc_note(c, "bias=%.3g lambd=%.3g", b, l);
        }
    } else if (!strcmp(op, "Gelu")) {
        if (c->variant & 1) {
            as(c, n, "approximate", "tanh");
            tc_note(c, "approximate=tanh");
        }
    } else if (!strcmp(op, "IsInf")) {
        int pos = c->variant != 1, neg = c->variant != 2;
        if (c->variant) {
            ai(c, n, "detect_positive", pos);
            ai(c, n, "detect_negative", neg);
            tc_note(c, "detect_positive=%d detect_negative=%d", pos, neg);
        }
    }
}

static void unary_one(tc *c, kiln_dtype t, const char *sfx)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    const char *x = tc_str(c, "x_%s", sfx), *y = tc_str(c, "y_%s", sfx);
    tc_input(c, x, t, rank, dims, special(c, t, c->cs->g));
    Onnx__NodeProto *n = tc_node(c, c->cs->op, x, y);
    unary_attrs(c, n);
    tc_out(c, y);
}

static void b_unary(tc *c) { each_dtype(c, unary_one); }

/* The second operand's generator for op on dtype t. */
static gen rhs_gen(const tc *c, kiln_dtype t)
{
    bool fl = ir_dtype_is_float(t);
    if (op_is(c, "Div") || op_is(c, "Mod")) return fl ? G_NONZERO : G_SMALL; /* integer x / 0 is defined: 0 */
    if (op_is(c, "Pow")) return G_EXPON;
    if (op_is(c, "BitShift")) return G_SHIFT;
    return c->cs->g;
}

static gen lhs_gen(const tc *c, kiln_dtype t)
{
    if (op_is(c, "Pow")) return ir_dtype_is_float(t) ? G_POS : G_SMALL;
    return c->cs->g;
}

static void binary_one(tc *c, kiln_dtype t, const char *sfx)
{
    int64_t dims[IR_MAX_RANK], da[IR_MAX_RANK], db[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    static const int modes[4][2] = {{0, 0}, {0, 3}, {2, 2}, {0, 1}};
    const int *m = modes[c->variant % 4];
    bool prelu = op_is(c, "PRelu");
    int ra = bcast_shape(c, prelu ? 0 : m[0], rank, dims, da);
    int rb = bcast_shape(c, prelu ? (c->variant % 4) : m[1], rank, dims, db);
    if (rint_(c, 0, 1) && !prelu) { /* either side may be the broadcast one */
        int64_t tmp[IR_MAX_RANK];
        memcpy(tmp, da, sizeof(tmp));
        memcpy(da, db, sizeof(tmp));
        memcpy(db, tmp, sizeof(tmp));
        int r = ra;
        ra = rb;
        rb = r;
    }
    const char *a = tc_str(c, "a_%s", sfx), *b = tc_str(c, "b_%s", sfx), *y = tc_str(c, "y_%s", sfx);
    tc_input(c, a, t, ra, da, special(c, t, lhs_gen(c, t)));
    tc_input(c, b, t, rb, db, special(c, t, rhs_gen(c, t)));
    Onnx__NodeProto *n = tc_node(c, c->cs->op, tc_str(c, "%s,%s", a, b), y);
    if (op_is(c, "Mod")) {
        int fmod_ = ir_dtype_is_float(t) || (c->variant & 1);
        ai(c, n, "fmod", fmod_);
        tc_note(c, "fmod=%d", fmod_);
    } else if (op_is(c, "BitShift")) {
        as(c, n, "direction", c->variant & 1 ? "RIGHT" : "LEFT");
    }
    tc_out(c, y);
}

static void b_binary(tc *c) { each_dtype(c, binary_one); }

/* Pow with a base and an exponent of different dtypes. */
static void b_pow_mixed(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    tc_input(c, "base_f32", KILN_F32, rank, dims, G_POS);
    tc_input(c, "exp_i64", KILN_I64, rank, dims, G_EXPON);
    tc_input(c, "base_i32", KILN_I32, rank, dims, G_SMALL);
    tc_input(c, "exp_f32", KILN_F32, 0, NULL, G_EXPON);
    ir_set_f64(&c->in[c->n_in - 1], 0, (double)rint_(c, 0, 4));
    tc_node(c, "Pow", "base_f32,exp_i64", "y_f32");
    tc_node(c, "Pow", "base_i32,exp_f32", "y_i32");
    tc_out(c, "y_f32");
    tc_out(c, "y_i32");
}

static void variadic_one(tc *c, kiln_dtype t, const char *sfx)
{
    int64_t dims[IR_MAX_RANK], d[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    int k = (int)rint_(c, 1, 4);
    char ins[256] = "";
    for (int i = 0; i < k; i++) {
        int r = bcast_shape(c, i == 0 ? 0 : (int)rint_(c, 0, 4), rank, dims, d);
        const char *x = tc_str(c, "x%d_%s", i, sfx);
        tc_input(c, x, t, r, d, special(c, t, c->cs->g));
        strcat(ins, i ? "," : "");
        strcat(ins, x);
    }
    const char *y = tc_str(c, "y_%s", sfx);
    tc_node(c, c->cs->op, ins, y);
    tc_out(c, y);
}

static void b_variadic(tc *c) { each_dtype(c, variadic_one); }

/* Clip from opset 11: min and max are optional scalar inputs, constant or fed. */
static void clip_one(tc *c, kiln_dtype t, const char *sfx)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    const char *x = tc_str(c, "x_%s", sfx), *y = tc_str(c, "y_%s", sfx);
    tc_input(c, x, t, rank, dims, special(c, t, G_NORMAL));
    bool fl = ir_dtype_is_float(t), uns = ir_dtype_is_int(t) && !ir_dtype_is_signed(t);
    double lo = fl ? runif(c, -1.5, 0) : (double)rint_(c, uns ? 0 : -30, uns ? 30 : 0);
    double hi = fl ? runif(c, 0, 1.5) : (double)rint_(c, uns ? 40 : 0, uns ? 90 : 30);
    const char *mn = "", *mx = "";
    int which = c->variant % 4; /* 0 both constant, 1 min only, 2 max only fed, 3 both fed */
    if (which != 2) {
        mn = tc_str(c, "min_%s", sfx);
        if (which == 3) ir_set_f64(tc_input(c, mn, t, 0, NULL, G_NORMAL), 0, lo);
        else tc_scalar(c, mn, t, lo);
    }
    if (which != 1) {
        mx = tc_str(c, "max_%s", sfx);
        if (which >= 2) ir_set_f64(tc_input(c, mx, t, 0, NULL, G_NORMAL), 0, hi);
        else tc_scalar(c, mx, t, hi);
    }
    tc_node(c, "Clip", tc_str(c, "%s,%s,%s", x, mn, mx), y);
    tc_out(c, y);
}

static void b_clip(tc *c) { each_dtype(c, clip_one); }

/* Clip before opset 11: float attributes. */
static void clip6_one(tc *c, kiln_dtype t, const char *sfx)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    const char *x = tc_str(c, "x_%s", sfx), *y = tc_str(c, "y_%s", sfx);
    tc_input(c, x, t, rank, dims, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "Clip", x, y);
    if (c->variant != 1) af(c, n, "min", runif(c, -1.5, 0));
    if (c->variant != 2) af(c, n, "max", runif(c, 0, 1.5));
    tc_out(c, y);
}

static void b_clip6(tc *c) { each_dtype(c, clip6_one); }

static void where_one(tc *c, kiln_dtype t, const char *sfx)
{
    int64_t dims[IR_MAX_RANK], d[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    const char *names[3] = {tc_str(c, "cond_%s", sfx), tc_str(c, "x_%s", sfx), tc_str(c, "y_%s", sfx)};
    for (int i = 0; i < 3; i++) {
        int r = bcast_shape(c, c->variant == 0 ? 0 : (int)rint_(c, 0, 4), rank, dims, d);
        tc_input(c, names[i], i == 0 ? KILN_BOOL : t, r, d, special(c, t, G_NORMAL));
    }
    const char *y = tc_str(c, "out_%s", sfx);
    tc_node(c, "Where", tc_str(c, "%s,%s,%s", names[0], names[1], names[2]), y);
    tc_out(c, y);
}

static void b_where(tc *c) { each_dtype(c, where_one); }

/* Cast from the case's dtype to every dtype the c target moves. */
static void b_cast(tc *c)
{
    static const kiln_dtype to[] = {KILN_F32, KILN_F64, KILN_I32, KILN_I64, KILN_I8, KILN_U8, KILN_BOOL, KILN_U16,
                                    KILN_I16, KILN_U32, KILN_U64};
    kiln_dtype from = dt_of_bit[__builtin_ctz(c->cs->dtypes)];
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    tc_input(c, "x", from, rank, dims, ir_dtype_is_float(from) ? (c->variant & 1 ? G_SPECIAL : G_WIDE) : G_NORMAL);
    for (size_t i = 0; i < sizeof(to) / sizeof(to[0]); i++) {
        if (to[i] == from) continue;
        const char *y = tc_str(c, "to_%s", kiln_dtype_name(to[i]));
        ai(c, tc_node(c, "Cast", "x", y), "to", to[i]);
        tc_out(c, y);
    }
}

static void castlike_one(tc *c, kiln_dtype t, const char *sfx)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    const char *x = tc_str(c, "x_%s", sfx), *like = tc_str(c, "like_%s", sfx), *y = tc_str(c, "y_%s", sfx);
    tc_input(c, x, KILN_F32, rank, dims, G_WIDE);
    tc_input(c, like, t, 0, NULL, G_NORMAL); /* a scalar: its rank must not exceed the output's */
    tc_node(c, "CastLike", tc_str(c, "%s,%s", x, like), y);
    tc_out(c, y);
}

static void b_castlike(tc *c) { each_dtype(c, castlike_one); }

/* QuantizeLinear (f32 -> u8 / i8 and without a zero point) and
 * DequantizeLinear (u8 / i8 / i32 -> f32) with a per-tensor scale. */
static void b_quant(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    double scale = runif(c, 0.005, 0.05);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_scalar(c, "scale", KILN_F32, scale);
    tc_scalar(c, "zp_u8", KILN_U8, (double)rint_(c, 0, 255));
    tc_scalar(c, "zp_i8", KILN_I8, (double)rint_(c, -128, 127));
    tc_node(c, "QuantizeLinear", "x,scale,zp_u8", "q_u8");
    tc_node(c, "QuantizeLinear", "x,scale,zp_i8", "q_i8");
    tc_node(c, "QuantizeLinear", "x,scale", "q_default");
    tc_out(c, "q_u8");
    tc_out(c, "q_i8");
    tc_out(c, "q_default");
    tc_note(c, "scale=%.4g", scale);
}

static void b_dequant(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    double scale = runif(c, 0.005, 0.05);
    tc_scalar(c, "scale", KILN_F32, scale);
    tc_input(c, "q_u8", KILN_U8, rank, dims, G_NORMAL);
    tc_input(c, "q_i8", KILN_I8, rank, dims, G_NORMAL);
    tc_input(c, "q_i32", KILN_I32, rank, dims, G_WIDE);
    tc_scalar(c, "zp_u8", KILN_U8, (double)rint_(c, 0, 255));
    tc_scalar(c, "zp_i8", KILN_I8, (double)rint_(c, -128, 127));
    tc_node(c, "DequantizeLinear", "q_u8,scale,zp_u8", "y_u8");
    tc_node(c, "DequantizeLinear", "q_i8,scale,zp_i8", "y_i8");
    tc_node(c, "DequantizeLinear", "q_i32,scale", "y_i32");
    tc_out(c, "y_u8");
    tc_out(c, "y_i8");
    tc_out(c, "y_i32");
    tc_note(c, "scale=%.4g", scale);
}

/* Elementwise chains: fused groups with broadcasting, several outputs,
 * mixed dtypes. */
static void b_chain_bcast(tc *c)
{
    int64_t dims[IR_MAX_RANK], d[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    if (rank == 0) dims[0] = 3, rank = 1;
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    int r1 = bcast_shape(c, 2, rank, dims, d);
    tc_input(c, "y", KILN_F32, r1, d, G_NORMAL);
    int r2 = bcast_shape(c, 1, rank, dims, d);
    tc_input(c, "z", KILN_F32, r2, d, G_NONZERO);
    tc_scalar(c, "k", KILN_F32, runif(c, 0.5, 2));
    tc_node(c, "Add", "x,y", "t1");
    tc_node(c, "Mul", "t1,z", "t2");
    tc_node(c, "Sigmoid", "t2", "t3");
    tc_node(c, "Sub", "t3,x", "t4");
    tc_node(c, "Div", "t4,k", "t5");
    tc_node(c, "Tanh", "t5", "t6");
    tc_node(c, "Mul", "t6,t1", "out");
    tc_out(c, "out");
    tc_out(c, "t1"); /* an intermediate read inside the group and outside */
}

static void b_chain_mixed(tc *c)
{
    int64_t dims[IR_MAX_RANK], d[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_input(c, "i", KILN_I32, rank, dims, G_NORMAL);
    int r = bcast_shape(c, 1, rank, dims, d);
    tc_input(c, "thr", KILN_I32, r, d, G_NORMAL);
    tc_node(c, "Greater", "i,thr", "m");       /* bool */
    tc_node(c, "Neg", "x", "nx");
    tc_node(c, "Where", "m,x,nx", "w");        /* |x| where i > thr */
    ai(c, tc_node(c, "Cast", "m", "mf"), "to", KILN_F32); /* bool -> f32 */
    tc_node(c, "Add", "w,mf", "s");
    ai(c, tc_node(c, "Cast", "i", "i64"), "to", KILN_I64);
    tc_node(c, "Mul", "i64,i64", "sq");
    tc_node(c, "Not", "m", "nm");
    tc_out(c, "s");
    tc_out(c, "sq");
    tc_out(c, "nm");
}

/* A producer of a smaller shape feeding a broadcast consumer: two groups. */
static void b_chain_shapes(tc *c)
{
    int64_t a = rdim(c, 1, c->variant == 3 ? 300 : 9), b = rdim(c, 1, c->variant == 3 ? 200 : 9);
    tc_input(c, "x", KILN_F32, 2, (int64_t[]){a, 1}, G_NORMAL);
    tc_input(c, "y", KILN_F32, 2, (int64_t[]){a, b}, G_NORMAL);
    tc_node(c, "Exp", "x", "e");
    tc_node(c, "Add", "e,y", "s");
    tc_node(c, "Relu", "s", "r");
    tc_node(c, "Sqrt", "e", "q"); /* back on the small shape */
    tc_out(c, "r");
    tc_out(c, "q");
}

/* ---- contractions -------------------------------------------------------------------------- */

/* Conv geometry drawn for one shape. */
typedef struct conv_geo {
    int64_t N, C, H, W, K, R, S, group, sh, sw, dh, dw, pads[4];
    const char *auto_pad; /* NULL: explicit pads */
    int64_t OH, OW;
} conv_geo;

/* Output size of a window op; 0 when the window does not fit. */
static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, const char *ap)
{
    if (ap && strcmp(ap, "VALID") != 0) return (in + s - 1) / s;
    if (ap) p0 = p1 = 0;
    int64_t room = in + p0 + p1 - d * (k - 1) - 1;
    return room < 0 ? 0 : room / s + 1;
}

/* kind: 0 any, 1 depthwise, 2 grouped. */
static void conv_draw(tc *c, int kind, conv_geo *g)
{
    memset(g, 0, sizeof(*g));
    bool big = c->variant == 3;
    g->N = rdim(c, 1, 2);
    if (kind == 1) {
        g->C = rint_(c, 1, big ? 24 : 9);
        g->group = g->C;
        g->K = g->C * rint_(c, 1, 2);
    } else if (kind == 2) {
        g->group = rint_(c, 2, 3);
        g->C = g->group * rint_(c, 1, 4);
        g->K = g->group * rint_(c, 1, 4);
    } else {
        g->group = 1;
        g->C = rdim(c, 1, big ? 24 : 8);
        g->K = rdim(c, 1, big ? 40 : 12);
    }
    for (;;) {
        g->H = rdim(c, 1, big ? 28 : 11);
        g->W = rdim(c, 1, big ? 28 : 11);
        static const int64_t ks[] = {1, 1, 2, 3, 3, 3, 5};
        g->R = ks[rint_(c, 0, 6)];
        g->S = rint_(c, 0, 2) ? g->R : ks[rint_(c, 0, 6)];
        g->sh = rint_(c, 0, 2) ? 1 : rint_(c, 2, 3);
        g->sw = rint_(c, 0, 2) ? g->sh : rint_(c, 1, 3);
        g->dh = rint_(c, 0, 3) ? 1 : 2;
        g->dw = rint_(c, 0, 3) ? g->dh : rint_(c, 1, 2);
        int ap = (int)rint_(c, 0, 5);
        g->auto_pad = ap == 0 ? "SAME_UPPER" : ap == 1 ? "SAME_LOWER" : ap == 2 ? "VALID" : NULL;
        for (int i = 0; i < 4; i++) g->pads[i] = g->auto_pad ? 0 : rint_(c, 0, i % 2 ? g->S - 1 : g->R - 1);
        g->OH = conv_out(g->H, g->R, g->sh, g->dh, g->pads[0], g->pads[2], g->auto_pad);
        g->OW = conv_out(g->W, g->S, g->sw, g->dw, g->pads[1], g->pads[3], g->auto_pad);
        if (g->OH >= 1 && g->OW >= 1) break;
    }
}

/* Conv node reading x and weights "w" (constant), bias b_name or "". */
static Onnx__NodeProto *conv_node(tc *c, const conv_geo *g, const char *x, const char *b, const char *y)
{
    Onnx__NodeProto *n = tc_node(c, "Conv", tc_str(c, "%s,w%s%s", x, b[0] ? "," : "", b), y);
    if (rint_(c, 0, 1)) ais(c, n, "kernel_shape", 2, (int64_t[]){g->R, g->S});
    if (g->group != 1) ai(c, n, "group", g->group);
    if (g->sh != 1 || g->sw != 1) ais(c, n, "strides", 2, (int64_t[]){g->sh, g->sw});
    if (g->dh != 1 || g->dw != 1) ais(c, n, "dilations", 2, (int64_t[]){g->dh, g->dw});
    if (g->auto_pad) as(c, n, "auto_pad", g->auto_pad);
    else if (g->pads[0] || g->pads[1] || g->pads[2] || g->pads[3]) ais(c, n, "pads", 4, g->pads);
    tc_note(c, "K=%lld k=%lldx%lld g=%lld s=%lld,%lld d=%lld,%lld", (long long)g->K, (long long)g->R,
            (long long)g->S, (long long)g->group, (long long)g->sh, (long long)g->sw, (long long)g->dh,
            (long long)g->dw);
    if (g->auto_pad) tc_note(c, "auto_pad=%s", g->auto_pad);
    else tc_note(c, "pads=%lld,%lld,%lld,%lld", (long long)g->pads[0], (long long)g->pads[1], (long long)g->pads[2],
                 (long long)g->pads[3]);
    return n;
}

static void conv_inputs(tc *c, const conv_geo *g, bool w_const)
{
    tc_input(c, "x", KILN_F32, 4, (int64_t[]){g->N, g->C, g->H, g->W}, G_NORMAL);
    int64_t wd[4] = {g->K, g->C / g->group, g->R, g->S};
    if (w_const) tc_const(c, "w", KILN_F32, 4, wd, G_NORMAL);
    else tc_input(c, "w", KILN_F32, 4, wd, G_NORMAL);
}

static void conv_kind(tc *c, int kind, bool bias)
{
    conv_geo g;
    conv_draw(c, kind, &g);
    conv_inputs(c, &g, true);
    if (bias) tc_const(c, "b", KILN_F32, 1, &g.K, G_NORMAL);
    conv_node(c, &g, "x", bias ? "b" : "", "y");
    tc_out(c, "y");
}

static void b_conv(tc *c) { conv_kind(c, 0, c->variant & 1); }
static void b_conv_depthwise(tc *c) { conv_kind(c, 1, c->variant != 1); }
static void b_conv_grouped(tc *c) { conv_kind(c, 2, c->variant != 2); }

/* A late layer at batch 1: few output tiles over a long K, where the cuda
 * target splits K across blocks (kg.h split-K). */
static void b_conv_long_k(tc *c)
{
    conv_geo g = {.N = 1, .C = (int64_t[]){256, 192, 320, 136}[c->variant % 4], .H = 7, .W = 7,
                  .K = rint_(c, 48, 160), .R = 3, .S = 3, .group = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
                  .pads = {1, 1, 1, 1}};
    g.OH = conv_out(g.H, g.R, g.sh, g.dh, 1, 1, NULL);
    g.OW = conv_out(g.W, g.S, g.sw, g.dw, 1, 1, NULL);
    conv_inputs(c, &g, true);
    tc_const(c, "b", KILN_F32, 1, &g.K, G_NORMAL);
    conv_node(c, &g, "x", "b", "t");
    tc_node(c, "Relu", "t", "y");
    tc_note(c, "C=%lld", (long long)g.C);
    tc_out(c, "y");
}

/* Late layers side by side: two or three convolutions of long K reading
 * one x, each split across blocks, in one stage of a persistent kernel
 * or one wave (each has its own place in kg.h's split-K workspace:
 * cg_splitk_place). Their outputs are the graph's. On variant 2 the
 * branches are alike but for their weights, so a persistent kernel runs
 * one shared body (share.c) at two places. */
static void b_conv_split_k_branches(tc *c)
{
    conv_geo g = {.N = 1, .C = (int64_t[]){256, 512, 384, 136}[c->variant % 4], .H = 7, .W = 7,
                  .K = rint_(c, 48, 160), .R = 3, .S = 3, .group = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
                  .pads = {1, 1, 1, 1}};
    g.OH = g.H;
    g.OW = g.W;
    conv_inputs(c, &g, true);
    conv_node(c, &g, "x", "", "y0");
    tc_out(c, "y0");
    int branches = c->variant & 1 ? 3 : 2;
    for (int i = 1; i < branches; i++) {
        int64_t k = c->variant == 2 ? g.K : rint_(c, 48, 160);
        tc_const(c, tc_str(c, "w%d", i), KILN_F32, 4, (int64_t[]){k, g.C, 3, 3}, G_NORMAL);
        Onnx__NodeProto *n = tc_node(c, "Conv", tc_str(c, "x,w%d", i), tc_str(c, "y%d", i));
        ais(c, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
        tc_note(c, "K%d=%lld", i, (long long)k);
        tc_out(c, tc_str(c, "y%d", i));
    }
}

/* A square convolution of x into k channels (weight w [k, ch, r, r], unit
 * values; `pads` 1 when r is 3), with a normal bias named b when b is
 * given: returns the node, whose output is y. */
static Onnx__NodeProto *conv_sq(tc *c, const char *x, const char *w, const char *b, int64_t k, int64_t ch, int r,
                                const char *y)
{
    tc_const(c, w, KILN_F32, 4, (int64_t[]){k, ch, r, r}, G_UNIT);
    if (b) tc_const(c, b, KILN_F32, 1, &k, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "Conv", b ? tc_str(c, "%s,%s,%s", x, w, b) : tc_str(c, "%s,%s", x, w), y);
    if (r == 3) ais(c, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    return n;
}

/* 1x1 convolutions that the cuda target computes with its GEMM templates
 * (cg_conv_product), in each of its forms:
 *   variants 0 and 3: x -> a 3x3 convolution + Relu (stored NHWC: only a
 *     convolution reads it) -> a 1x1 one + bias + Relu (NHWC in and out:
 *     x w^T) -> a 1x1 one + bias + x as the residual (NHWC in, NCHW out:
 *     w x^T for one image; variant 3 has two images, where it stays a
 *     convolution);
 *   variant 1: Relu(x) (NCHW: the residual reads it too) -> a 1x1
 *     convolution + Relu (NCHW in, NHWC out: x^T w^T) -> a 1x1 one + bias
 *     + Relu(x) as the residual (w x^T);
 *   variant 2: Relu(x) -> a 1x1 convolution + bias + Relu(x) (NCHW in and
 *     out: w x).
 * NCHW x needs pixels in multiples of 8: W is 8 or 16 here. */
static void b_conv_product(tc *c)
{
    int64_t n = c->variant == 3 ? 2 : 1, ch = 8 * rint_(c, 1, 4), h = rint_(c, 2, 12);
    int64_t w = c->variant == 1 || c->variant == 2 ? 8 * rint_(c, 1, 2) : rint_(c, 2, 12);
    int64_t c1 = 8 * rint_(c, 1, 6), c2 = 8 * rint_(c, 1, 6);
    tc_input(c, "x", KILN_F32, 4, (int64_t[]){n, ch, h, w}, G_NORMAL);
    tc_note(c, "n=%lld c=%lld %lldx%lld c1=%lld c2=%lld", (long long)n, (long long)ch, (long long)h, (long long)w,
            (long long)c1, (long long)c2);
    const char *res = "x";
    if (c->variant == 1 || c->variant == 2) {
        tc_node(c, "Relu", "x", "xr");
        res = "xr";
    }
    if (c->variant == 2) {
        tc_const(c, "w1", KILN_F32, 4, (int64_t[]){ch, ch, 1, 1}, G_UNIT);
        tc_const(c, "b1", KILN_F32, 1, &ch, G_NORMAL);
        tc_node(c, "Conv", "xr,w1,b1", "c1");
        tc_node(c, "Add", "c1,xr", "y");
        tc_out(c, "y");
        return;
    }
    if (c->variant == 1) {
        tc_const(c, "w1", KILN_F32, 4, (int64_t[]){c2, ch, 1, 1}, G_UNIT);
        tc_node(c, "Conv", "xr,w1", "c2");
    } else {
        conv_sq(c, "x", "w1", NULL, c1, ch, 3, "c1");
        tc_node(c, "Relu", "c1", "r1");
        conv_sq(c, "r1", "w2", "b2", c2, c1, 1, "c2");
    }
    tc_node(c, "Relu", "c2", "r2");
    tc_const(c, "w3", KILN_F32, 4, (int64_t[]){ch, c2, 1, 1}, G_UNIT);
    tc_const(c, "b3", KILN_F32, 1, &ch, G_NORMAL);
    tc_node(c, "Conv", "r2,w3,b3", "c3");
    tc_node(c, "Add", tc_str(c, "c3,%s", res), "y");
    tc_out(c, "y");
}

/* ResNet-50 layer 1's pointwise pair at 48..56 pixels square: x [1, 64,
 * h, w] -> Relu(Conv1x1 to 256 + bias) -> Conv1x1 back to 64 (+ bias, +
 * x on variant 1). At least 2^25 multiply-adds each, so the mono schedule
 * at fp16 takes one block a multiprocessor and runs them as TMA products
 * inside the persistent kernel (emit.c large_pointwise). */
static void b_conv_product_large(tc *c)
{
    int64_t hw = rint_(c, 48, 56), wide = 256;
    tc_input(c, "x", KILN_F32, 4, (int64_t[]){1, 64, hw, hw}, G_NORMAL);
    tc_note(c, "%lldx%lld", (long long)hw, (long long)hw);
    conv_sq(c, "x", "w1", "b1", wide, 64, 1, "c1");
    tc_node(c, "Relu", "c1", "r1");
    conv_sq(c, "r1", "w2", "b2", 64, wide, 1, c->variant ? "c2" : "y");
    if (c->variant) tc_node(c, "Add", "c2,x", "y");
    tc_out(c, "y");
}

/* x [n, ch, h, w] and a bottleneck block on it, as in ResNet: b0 =
 * Relu(Conv r0 x r0 (x)) feeds a convolution r1 x r1 into c1 channels +
 * Relu and, as the residual, the 1x1 one after it: out = Relu(Conv1x1(..)
 * + bias + b0). */
static void bottleneck(tc *c, int64_t n, int64_t ch, int64_t h, int64_t w, int64_t c1, int r0, int r1,
                       const char *out)
{
    tc_input(c, "x", KILN_F32, 4, (int64_t[]){n, ch, h, w}, G_NORMAL);
    tc_note(c, "n=%lld c=%lld %lldx%lld c1=%lld", (long long)n, (long long)ch, (long long)h, (long long)w,
            (long long)c1);
    conv_sq(c, "x", "w0", NULL, ch, ch, r0, "c0");
    tc_node(c, "Relu", "c0", "b0");
    conv_sq(c, "b0", "w1", NULL, c1, ch, r1, "c1");
    tc_node(c, "Relu", "c1", "r1");
    conv_sq(c, "r1", "w2", "b2", ch, c1, 1, "c2");
    tc_node(c, "Add", "c2,b0", "s2");
    tc_node(c, "Relu", "s2", out);
}

/* Block outputs read by convolutions both as x and as the residual, as in
 * ResNet (the cuda target stores them NHWC, cg_plan_conv_layouts): a
 * bottleneck of a 3x3 and two 1x1 convolutions into b1. Then
 *   variants 0 and 1 (two images): y = Conv3x3(b1) + b1, one group reading
 *     b1 twice, so b1 stays NCHW and its writer is a convolution with an
 *     NHWC residual and an NCHW output;
 *   variants 2 and 3 (two images): y = Conv3x3 stride 2 (b1) + Conv1x1
 *     stride 2 (b1): b1 is NHWC (its writer a product with an NHWC
 *     residual), the projection read only as the residual. */
static void b_conv_residual_nhwc(tc *c)
{
    int64_t n = c->variant % 2 ? 2 : 1, ch = 8 * rint_(c, 1, 4), h = rint_(c, 2, 12), w = rint_(c, 2, 12);
    int64_t c1 = 8 * rint_(c, 1, 6);
    bottleneck(c, n, ch, h, w, c1, 3, 1, "b1");
    Onnx__NodeProto *c3 = conv_sq(c, "b1", "w3", NULL, ch, ch, 3, "c3");
    if (c->variant >= 2) {
        ais(c, c3, "strides", 2, (int64_t[]){2, 2});
        ais(c, conv_sq(c, "b1", "wd", NULL, ch, ch, 1, "d"), "strides", 2, (int64_t[]){2, 2});
        tc_node(c, "Add", "c3,d", "y");
    } else {
        tc_node(c, "Add", "c3,b1", "y");
    }
    tc_out(c, "y");
}

/* GlobalAveragePool of a bottleneck's output r2 (1x1, 3x3 and 1x1
 * convolutions), as at the end of ResNet: only the pool reads r2. The
 * cuda target stores b0 and r2 NHWC (the last convolution a product with
 * an NHWC residual) and averages r2's columns, which it does for at least
 * 512 of them of at most 256 pixels (emit_conv.c gap_columns_ok), 1 to 36
 * pixels a column here: 1 to 8 threads share one (emit_rows.c emit_cols),
 * and the channels, 512 to 640 in eights, leave the last rTask's columns
 * part empty. Two images on odd variants; 1 x 1 pixels on variant 3. */
static void b_conv_pool_nhwc(tc *c)
{
    int64_t n = c->variant % 2 ? 2 : 1, ch = 8 * rint_(c, 64, 80), c1 = 8 * rint_(c, 1, 6);
    int64_t h = c->variant == 3 ? 1 : rint_(c, 1, 6), w = c->variant == 3 ? 1 : rint_(c, 1, 6);
    bottleneck(c, n, ch, h, w, c1, 1, 3, "r2");
    tc_node(c, "GlobalAveragePool", "r2", "y");
    tc_out(c, "y");
}

/* Convolutions the cuda target runs on sm_90 as products of which the
 * tensor memory accelerator copies one operand in im2col mode
 * (cg_conv_product forms 5 and 6): x NHWC (b0, a 1x1 convolution's
 * output) of 64 or 128 channels, H and W drawn apart so that the map's W
 * and H corners and steps are told apart. Variants 0 to 4 have y NHWC
 * (r1, read only by the 1x1 convolution after it; A the im2col operand):
 *   0: 3x3, pads 1, + b0 as the 1x1 convolution's residual;
 *   1: two images, 3x3 stride 2, pads 1;
 *   2: 3x3 dilation 2, pads 2, + the residual;
 *   3: 1x3, stride 1 x 2, pads 0 x 1, output channels not a multiple of 64;
 *   4: two images, 5x5, leading pads 2 (H) and 1 (W), trailing 1 and 2.
 * Variants 5 and 6 write y NCHW, the model's output, of one image (B the
 * im2col operand, y = w im2col(x)^T):
 *   5: 3x3, pads 1, + bias, Relu;
 *   6: 3x3 stride 2, pads 1, + bias + an input as the residual, Relu.
 * Whether such convolutions take that path is checked on a model of the
 * same layout by tests/cli/test_cli.sh (cuda_conv_products). */
static void b_conv_im2col(tc *c)
{
    const int v = c->variant;
    int64_t n = v == 1 || v == 4 ? 2 : 1, ch = 64 * rint_(c, 1, 2), h = rint_(c, 3, 13), w = rint_(c, 3, 13);
    int64_t c1 = v == 3 || v >= 5 ? 8 * rint_(c, 1, 9) : 64 * rint_(c, 1, 2);
    static const int64_t kh[7] = {3, 3, 3, 1, 5, 3, 3}, kw[7] = {3, 3, 3, 3, 5, 3, 3};
    static const int64_t pads[7][4] = {{1, 1, 1, 1}, {1, 1, 1, 1}, {2, 2, 2, 2}, {0, 1, 0, 1},
                                       {2, 1, 1, 2}, {1, 1, 1, 1}, {1, 1, 1, 1}};
    tc_input(c, "x", KILN_F32, 4, (int64_t[]){n, ch, h, w}, G_NORMAL);
    tc_note(c, "n=%lld c=%lld %lldx%lld k=%lld", (long long)n, (long long)ch, (long long)h, (long long)w,
            (long long)c1);
    conv_sq(c, "x", "w0", NULL, ch, ch, 1, "c0");
    tc_node(c, "Relu", "c0", "b0");
    tc_const(c, "w1", KILN_F32, 4, (int64_t[]){c1, ch, kh[v], kw[v]}, G_UNIT);
    tc_const(c, "b1", KILN_F32, 1, &c1, G_NORMAL);
    Onnx__NodeProto *k = tc_node(c, "Conv", "b0,w1,b1", "c1");
    ais(c, k, "pads", 4, pads[v]);
    if (v == 1 || v == 6) ais(c, k, "strides", 2, (int64_t[]){2, 2});
    if (v == 2) ais(c, k, "dilations", 2, (int64_t[]){2, 2});
    if (v == 3) ais(c, k, "strides", 2, (int64_t[]){1, 2});
    if (v >= 5) {
        if (v == 6) {
            int64_t oh = (h + 2 - 3) / 2 + 1, ow = (w + 2 - 3) / 2 + 1;
            tc_input(c, "res", KILN_F32, 4, (int64_t[]){1, c1, oh, ow}, G_NORMAL);
            tc_node(c, "Add", "c1,res", "s1");
        }
        tc_node(c, "Relu", v == 6 ? "s1" : "c1", "y");
        tc_out(c, "y");
        return;
    }
    tc_node(c, "Relu", "c1", "r1");
    bool res = v == 0 || v == 2;
    conv_sq(c, "r1", "w2", "b2", res ? ch : 8, c1, 1, res ? "c2" : "y");
    if (res) {
        tc_node(c, "Add", "c2,b0", "s2");
        tc_node(c, "Relu", "s2", "y");
    }
    tc_out(c, "y");
}

/* Weights fed at run time: the target wants them constant, so a fallback. */
static void b_conv_w_input(tc *c)
{
    conv_geo g;
    conv_draw(c, 0, &g);
    conv_inputs(c, &g, false);
    conv_node(c, &g, "x", "", "y");
    tc_out(c, "y");
}

/* The epilogue activations of contractions, one per shape. */
static const char *const act_ops[] = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid",
                                      "Softplus"};

static void act_node(tc *c, int which, const char *x, const char *y)
{
    const char *op = act_ops[which % 8];
    tc_note(c, "act=%s", op);
    if (strcmp(op, "Clip") == 0) {
        tc_scalar(c, "clip_lo", KILN_F32, runif(c, -1, 0));
        tc_scalar(c, "clip_hi", KILN_F32, runif(c, 0.5, 6));
        tc_node(c, "Clip", tc_str(c, "%s,clip_lo,clip_hi", x), y);
        return;
    }
    Onnx__NodeProto *n = tc_node(c, op, x, y);
    if (strcmp(op, "LeakyRelu") == 0) af(c, n, "alpha", runif(c, 0.01, 0.3));
    if (strcmp(op, "HardSigmoid") == 0) {
        af(c, n, "alpha", runif(c, 0.1, 0.3));
        af(c, n, "beta", runif(c, 0.3, 0.7));
    }
}

/* Conv -> Add(bias, [K,1,1] or [1,K,1,1]) -> Relu. */
static void b_conv_add_relu(tc *c)
{
    conv_geo g;
    conv_draw(c, c->variant == 2 ? 1 : 0, &g);
    conv_inputs(c, &g, true);
    if (c->variant & 1) tc_const(c, "bias", KILN_F32, 4, (int64_t[]){1, g.K, 1, 1}, G_NORMAL);
    else tc_const(c, "bias", KILN_F32, 3, (int64_t[]){g.K, 1, 1}, G_NORMAL);
    conv_node(c, &g, "x", "", "cv");
    tc_node(c, "Add", "cv,bias", "cb");
    tc_node(c, "Relu", "cb", "y");
    tc_out(c, "y");
}

/* Conv(+B) -> Add(residual) -> activation (ResNet's block end). */
static void b_conv_residual(tc *c)
{
    conv_geo g;
    conv_draw(c, 0, &g);
    conv_inputs(c, &g, true);
    tc_const(c, "b", KILN_F32, 1, &g.K, G_NORMAL);
    tc_input(c, "res", KILN_F32, 4, (int64_t[]){g.N, g.K, g.OH, g.OW}, G_NORMAL);
    conv_node(c, &g, "x", "b", "cv");
    tc_node(c, "Add", c->variant & 1 ? "res,cv" : "cv,res", "sum");
    act_node(c, c->variant * 2, "sum", "y");
    tc_out(c, "y");
}

/* Conv -> activation, every epilogue activation over the shapes. */
static void b_conv_act(tc *c)
{
    conv_geo g;
    conv_draw(c, c->variant == 1 ? 1 : 0, &g);
    conv_inputs(c, &g, true);
    tc_const(c, "b", KILN_F32, 1, &g.K, G_NORMAL);
    conv_node(c, &g, "x", "b", "cv");
    act_node(c, c->variant * 2 + 1, "cv", "y");
    tc_out(c, "y");
}

/* Conv whose output is read twice (no fusion) and a second Conv after it. */
static void b_conv_chain(tc *c)
{
    conv_geo g;
    conv_draw(c, 0, &g);
    conv_inputs(c, &g, true);
    conv_node(c, &g, "x", "", "c1");
    tc_node(c, "Relu", "c1", "r1");
    int64_t k2 = rdim(c, 1, 6);
    tc_const(c, "w2", KILN_F32, 4, (int64_t[]){k2, g.K, 1, 1}, G_NORMAL);
    tc_const(c, "b2", KILN_F32, 1, &k2, G_NORMAL);
    tc_node(c, "Conv", "r1,w2,b2", "c2");
    tc_node(c, "Sigmoid", "c1", "s1");
    tc_out(c, "c2");
    tc_out(c, "s1");
}

/* g's output size from its input's, then y = Conv(x, w, b) with w and b
 * constants; on odd variants x passes through a Relu first, so that the
 * convolution reads it in 16 bits. */
static void conv_biased(tc *c, conv_geo *g, const char *y)
{
    g->OH = conv_out(g->H, g->R, g->sh, g->dh, g->pads[0], g->pads[2], NULL);
    g->OW = conv_out(g->W, g->S, g->sw, g->dw, g->pads[1], g->pads[3], NULL);
    conv_inputs(c, g, true);
    tc_const(c, "b", KILN_F32, 1, &g->K, G_NORMAL);
    if (c->variant & 1) tc_node(c, "Relu", "x", "xr");
    conv_node(c, g, c->variant & 1 ? "xr" : "x", "b", y);
}

/* Stems (ResNet-50's and GoogLeNet's 7x7 of stride 2 over 3 channels): a
 * kernel 5 to 7 wide over NCHW x of few channels, which the cuda target
 * gathers through its im2col table: windows that run off the image on
 * either side or both, strides 1 to 3, dilation 2 along W on variant 2, a
 * narrow image on variant 3, and x through a Relu (16-bit) on odd
 * variants. */
static void b_conv_stem(tc *c)
{
    conv_geo g = {.N = rdim(c, 1, 2), .C = rint_(c, 1, 4), .group = 1, .dh = 1};
    g.S = rint_(c, 5, 7);
    g.R = rint_(c, 0, 1) ? g.S : rint_(c, 1, 7);
    g.dw = c->variant == 2 ? 2 : 1;
    g.sh = rint_(c, 1, 3);
    g.sw = rint_(c, 0, 1) ? g.sh : rint_(c, 1, 3);
    for (int i = 0; i < 4; i++) g.pads[i] = rint_(c, 0, (i % 2 ? g.S : g.R) - 1);
    g.H = rint_(c, 1, 30);
    g.W = c->variant == 3 ? 1 : rint_(c, 1, 40);
    g.K = rint_(c, 1, 72);
    /* a window larger than the padded image: the image grows to hold one */
    if (conv_out(g.H, g.R, g.sh, g.dh, g.pads[0], g.pads[2], NULL) < 1) g.H += g.R;
    if (conv_out(g.W, g.S, g.sw, g.dw, g.pads[1], g.pads[3], NULL) < 1) g.W += (g.S - 1) * g.dw + 1;
    conv_biased(c, &g, "t");
    tc_node(c, "Relu", "t", "y");
    tc_out(c, "y");
}

/* Patch embeddings (ViT's 16x16 convolution of stride 16): kw, the W
 * stride, the leading W pad and W all multiples of 8, so the cuda target
 * gathers 8 elements a load (kg_conv_row_vec); on odd variants x passes
 * through a Relu first, so the convolution reads it in 16 bits. */
static void b_conv_patch(tc *c)
{
    conv_geo g = {.N = rdim(c, 1, 2), .C = rint_(c, 1, 6), .group = 1, .dh = 1, .dw = 1};
    g.S = 8 * rint_(c, 1, 2);
    g.R = rint_(c, 0, 1) ? g.S : rint_(c, 1, 5);
    g.sw = 8 * rint_(c, 1, 2);
    g.sh = rint_(c, 1, 3);
    g.pads[1] = c->variant == 2 ? 8 : 0;
    g.pads[3] = rint_(c, 0, 1) ? 8 : 0;
    g.pads[0] = rint_(c, 0, 1);
    g.pads[2] = rint_(c, 0, 1);
    g.H = g.R + rint_(c, 0, c->variant == 3 ? 30 : 6);
    g.W = 8 * rint_(c, (g.S + 7) / 8, c->variant == 3 ? 28 : 5);
    g.K = rint_(c, 1, c->variant == 3 ? 72 : 20);
    conv_biased(c, &g, "y");
    tc_out(c, "y");
}

/* Convolutions reading convolutions with channels in multiples of 8, which
 * the cuda target stores NHWC between them (emit_conv.c
 * cg_plan_conv_layouts): r1 (a pointwise Conv + Relu) is read by two
 * convolutions of drawn geometry, one of them grouped on variant 2, and
 * r2 by a pointwise one; on odd variants r2's producer adds an NCHW
 * residual as it writes r2. K2 is not always a multiple of 8 (then r2
 * stays NCHW). */
static void b_conv_nhwc(tc *c)
{
    conv_geo g;
    conv_draw(c, 0, &g);
    int64_t c0 = rdim(c, 1, 12);
    g.group = c->variant == 2 ? 2 : 1;
    g.C = 8 * g.group * rint_(c, 1, c->variant == 3 ? 4 : 2);
    g.K = rint_(c, 0, 2) ? 8 * rint_(c, 1, 3) : rint_(c, 1, 20);
    g.K = (g.K + g.group - 1) / g.group * g.group;
    tc_input(c, "x", KILN_F32, 4, (int64_t[]){g.N, c0, g.H, g.W}, G_NORMAL);
    tc_const(c, "w1", KILN_F32, 4, (int64_t[]){g.C, c0, 1, 1}, G_UNIT);
    tc_const(c, "b1", KILN_F32, 1, &g.C, G_UNIT);
    tc_node(c, "Conv", "x,w1,b1", "c1");
    tc_node(c, "Relu", "c1", "r1");
    tc_const(c, "w", KILN_F32, 4, (int64_t[]){g.K, g.C / g.group, g.R, g.S}, G_UNIT);
    tc_const(c, "b", KILN_F32, 1, &g.K, G_UNIT);
    conv_node(c, &g, "r1", "b", "c2");
    if (c->variant & 1) {
        tc_input(c, "res", KILN_F32, 4, (int64_t[]){g.N, g.K, g.OH, g.OW}, G_NORMAL);
        tc_node(c, "Add", "c2,res", "s2");
        tc_node(c, "Relu", "s2", "r2");
    } else {
        tc_node(c, "Relu", "c2", "r2");
    }
    int64_t k3 = rdim(c, 1, 12), k4 = rdim(c, 1, 12);
    tc_const(c, "w3", KILN_F32, 4, (int64_t[]){k3, g.K, 1, 1}, G_UNIT);
    tc_node(c, "Conv", "r2,w3", "y");
    tc_const(c, "w4", KILN_F32, 4, (int64_t[]){k4, g.C, 3, 3}, G_UNIT);
    Onnx__NodeProto *n4 = tc_node(c, "Conv", "r1,w4", "z");
    ais(c, n4, "pads", 4, (int64_t[]){1, 1, 1, 1});
    if (c->variant == 3) ais(c, n4, "strides", 2, (int64_t[]){2, 2});
    tc_note(c, "C0=%lld C=%lld K3=%lld K4=%lld", (long long)c0, (long long)g.C, (long long)k3, (long long)k4);
    tc_out(c, "y");
    tc_out(c, "z");
}

/* MatMul shapes: 0 2-D, 1 batched A with 2-D B, 2 batched both, 3 large 2-D. */
static void matmul_shapes(tc *c, int *ra, int64_t *da, int *rb, int64_t *db, int64_t *n_out)
{
    bool big = c->variant == 3;
    int64_t M = rdim(c, 1, big ? 70 : 17), K = rdim(c, 1, big ? 100 : 19), N = rdim(c, 1, big ? 140 : 23);
    int nb = c->variant == 1 ? (int)rint_(c, 1, 2) : c->variant == 2 ? (int)rint_(c, 1, 2) : 0;
    int64_t batch[2] = {rdim(c, 1, 4), rdim(c, 1, 3)};
    *ra = nb + 2;
    memcpy(da, batch, (size_t)nb * sizeof(int64_t));
    da[nb] = M;
    da[nb + 1] = K;
    if (c->variant == 2) {
        *rb = nb + 2;
        memcpy(db, batch, (size_t)nb * sizeof(int64_t));
        db[nb] = K;
        db[nb + 1] = N;
    } else {
        *rb = 2;
        db[0] = K;
        db[1] = N;
    }
    *n_out = N;
}

static void matmul_b(tc *c, bool b_const)
{
    int ra, rb;
    int64_t da[4], db[4], N;
    matmul_shapes(c, &ra, da, &rb, db, &N);
    tc_input(c, "a", KILN_F32, ra, da, G_NORMAL);
    if (b_const && rb == 2) tc_const(c, "b", KILN_F32, rb, db, G_NORMAL);
    else tc_input(c, "b", KILN_F32, rb, db, G_NORMAL);
    tc_node(c, "MatMul", "a,b", "y");
    tc_out(c, "y");
}

static void b_matmul(tc *c) { matmul_b(c, false); }
static void b_matmul_const(tc *c) { matmul_b(c, true); }

/* Few rows over a long K (a classifier at batch 1, BERT's second FFN
 * product): the cuda target splits K across blocks. Variant 3's K and N
 * are odd (the fp32 template). */
/* y = Tanh(x [M, K]) w [K, N] + bias: the Tanh puts A in the arena (16-bit
 * under fp16), as inside a model. */
static void tanh_product(tc *c, int64_t M, int64_t K, int64_t N, const char *y)
{
    tc_input(c, "x", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    tc_const(c, "w", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
    tc_const(c, "bias", KILN_F32, 1, &N, G_NORMAL);
    tc_node(c, "Tanh", "x", "a");
    tc_node(c, "MatMul", "a,w", "t");
    tc_node(c, "Add", "t,bias", y);
}

static void b_matmul_long_k(tc *c)
{
    bool odd = c->variant == 3; /* the tensor cores need K and N multiples of 8 */
    int64_t M = rint_(c, 1, 40), K = odd ? rint_(c, 700, 1500) | 1 : 8 * rint_(c, 150, 400),
            N = odd ? rint_(c, 24, 200) | 1 : 8 * rint_(c, 3, 25);
    tanh_product(c, M, K, N, "y");
    tc_out(c, "y");
}

/* Deep products of few tiles, as BERT-base's and ViT-B/16's second MLP
 * products at batch 1 (128 or 197 rows, 3072 deep, 768 wide, with bias and
 * residual): the cuda target splits K across the blocks of a cluster and
 * sums the splits in its shared memory (kg_gemm_wgt_csum), each block
 * storing its share of the tile's rows. Variant 2: 150 rows (a ragged
 * tile) and 3000 deep: three splits, the last one shorter and its last
 * k-tile partial, and 21, 21 and 22 rows a block. */
static void b_matmul_deep_split(tc *c)
{
    const int64_t M = (int64_t[]){128, 197, 150}[c->variant % 3], K = c->variant == 2 ? 3000 : 3072, N = 768;
    tanh_product(c, M, K, N, "u");
    tc_input(c, "res", KILN_F32, 2, (int64_t[]){M, N}, G_NORMAL);
    tc_node(c, "Add", "u,res", "y");
    tc_out(c, "y");
}

/* Batch dims that broadcast (B [1,K,N] against A [b,M,K]), or a 1-D
 * operand: the target leaves these to the interpreter. */
static void b_matmul_bcast(tc *c)
{
    int64_t b = rint_(c, 2, 4), M = rdim(c, 1, 9), K = rdim(c, 1, 9), N = rdim(c, 1, 9);
    if (c->variant & 1) {
        tc_input(c, "a", KILN_F32, 3, (int64_t[]){b, M, K}, G_NORMAL);
        tc_input(c, "b", KILN_F32, 3, (int64_t[]){1, K, N}, G_NORMAL);
    } else {
        tc_input(c, "a", KILN_F32, 1, &K, G_NORMAL);
        tc_input(c, "b", KILN_F32, 3, (int64_t[]){b, K, N}, G_NORMAL);
    }
    tc_node(c, "MatMul", "a,b", "y");
    tc_out(c, "y");
}

/* MatMul -> Add(bias) -> GELU spelled out (BERT's erf form, or the tanh form). */
static void b_matmul_gelu(tc *c)
{
    int ra, rb;
    int64_t da[4], db[4], N;
    matmul_shapes(c, &ra, da, &rb, db, &N);
    tc_input(c, "a", KILN_F32, ra, da, G_NORMAL);
    tc_const(c, "w", KILN_F32, 2, (int64_t[]){db[rb - 2], N}, G_NORMAL);
    tc_const(c, "bias", KILN_F32, 1, &N, G_NORMAL);
    tc_node(c, "MatMul", "a,w", "mm");
    tc_node(c, "Add", c->variant & 1 ? "bias,mm" : "mm,bias", "h");
    tc_scalar(c, "half", KILN_F32, 0.5);
    tc_scalar(c, "one", KILN_F32, 1.0);
    if (c->variant < 2) {
        tc_note(c, "gelu=erf");
        tc_scalar(c, "sqrt2", KILN_F32, 1.4142135623730951);
        tc_node(c, "Div", "h,sqrt2", "hs");
        tc_node(c, "Erf", "hs", "e");
        tc_node(c, "Add", "e,one", "e1");
        tc_node(c, "Mul", "h,e1", "he");
        tc_node(c, "Mul", "he,half", "y");
    } else {
        tc_note(c, "gelu=tanh");
        tc_scalar(c, "three", KILN_F32, 3.0);
        tc_scalar(c, "k", KILN_F32, 0.044715);
        tc_scalar(c, "s", KILN_F32, 0.7978845608028654);
        tc_node(c, "Pow", "h,three", "h3");
        tc_node(c, "Mul", "h3,k", "h3k");
        tc_node(c, "Add", "h,h3k", "in");
        tc_node(c, "Mul", "in,s", "ins");
        tc_node(c, "Tanh", "ins", "t");
        tc_node(c, "Add", "t,one", "t1");
        tc_node(c, "Mul", "h,t1", "ht");
        tc_node(c, "Mul", "ht,half", "y");
    }
    tc_out(c, "y");
}

/* MatMul -> Add(bias) -> the erf GELU as opset-17 exports spell it, which
 * the partition makes the contraction's epilogue activation: both node
 * orders (Mul by x then by 0.5, or by 0.5 first), Div by sqrt 2 or Mul by
 * 1/sqrt 2 (constants rounded as exporters write them), operands either way
 * round. Shape 3 also outputs the GELU's input, which keeps it unfused. */
static void b_matmul_gelu_erf(tc *c)
{
    int ra, rb;
    int64_t da[4], db[4], N;
    matmul_shapes(c, &ra, da, &rb, db, &N);
    bool half_first = c->variant & 1, swap = c->variant == 1 || c->variant == 2;
    tc_input(c, "a", KILN_F32, ra, da, G_NORMAL);
    tc_const(c, "w", KILN_F32, 2, (int64_t[]){db[rb - 2], N}, G_NORMAL);
    tc_const(c, "bias", KILN_F32, 1, &N, G_NORMAL);
    tc_node(c, "MatMul", "a,w", "mm");
    tc_node(c, "Add", "mm,bias", "h");
    tc_scalar(c, "half", KILN_F32, 0.5);
    tc_scalar(c, "one", KILN_F32, 1.0);
    if (c->variant == 1 || c->variant == 2) {
        tc_scalar(c, "rsqrt2", KILN_F32, 0.70710678);
        tc_node(c, "Mul", swap ? "rsqrt2,h" : "h,rsqrt2", "hs");
    } else {
        tc_scalar(c, "sqrt2", KILN_F32, c->variant ? 1.41421356 : 1.4142135623730951);
        tc_node(c, "Div", "h,sqrt2", "hs");
    }
    tc_node(c, "Erf", "hs", "e");
    tc_node(c, "Add", swap ? "one,e" : "e,one", "e1");
    if (half_first) {
        tc_node(c, "Mul", swap ? "half,h" : "h,half", "hh");
        tc_node(c, "Mul", swap ? "e1,hh" : "hh,e1", "y");
    } else {
        tc_node(c, "Mul", swap ? "e1,h" : "h,e1", "he");
        tc_node(c, "Mul", swap ? "half,he" : "he,half", "y");
    }
    tc_note(c, "%s, %s%s", half_first ? "0.5 x first" : "x (1 + erf) first",
            c->variant == 1 || c->variant == 2 ? "Mul by 1/sqrt 2" : "Div by sqrt 2", swap ? ", operands swapped" : "");
    tc_out(c, "y");
    if (c->variant == 3) tc_out(c, "h"); /* a fused GELU would leave h unwritten */
    else c->want_groups = 1;
}

/* Attention as BERT and ViT export it: MatMul(q, Transpose(k)) -> Div(sqrt
 * d) [-> Add(mask)] -> Softmax -> MatMul(., v) -> Transpose that keeps the
 * head dim last, rank 4 (perm 0,2,1,3, then Reshape and a projection in
 * shape 1) or rank 3 (perm 1,0,2). Targets with an attention kernel make
 * it one group that writes through the trailing Transpose. */
static void b_attention_transposed(tc *c)
{
    bool r4 = c->variant < 2, mask = c->variant & 1;
    int64_t B = rdim(c, 1, 2), H = rdim(c, 1, 4), Sq = rdim(c, 1, 40), Sk = rdim(c, 1, 70);
    int64_t D = c->variant == 3 ? rdim(c, 1, 24) : 16 * rint_(c, 1, 4), Dv = c->variant == 3 ? rdim(c, 1, 24) : D;
    int64_t dq[4] = {B, H, Sq, D}, dk[4] = {B, H, Sk, D}, dv[4] = {B, H, Sk, Dv};
    int off = r4 ? 0 : 1, rank = 4 - off;
    tc_input(c, "q", KILN_F32, rank, dq + off, G_NORMAL);
    tc_input(c, "k", KILN_F32, rank, dk + off, G_NORMAL);
    tc_input(c, "v", KILN_F32, rank, dv + off, G_NORMAL);
    ais(c, tc_node(c, "Transpose", "k", "kt"), "perm", rank, r4 ? (int64_t[]){0, 1, 3, 2} : (int64_t[]){0, 2, 1});
    tc_node(c, "MatMul", "q,kt", "s");
    tc_scalar(c, "sqrt_d", KILN_F32, sqrt((double)D));
    tc_node(c, "Div", "s,sqrt_d", "ss");
    if (mask) {
        int64_t dm[4] = {B, 1, 1, Sk};
        tc_input(c, "mask", KILN_F32, rank, dm + off, G_NORMAL);
        tc_node(c, "Add", "ss,mask", "sm");
    }
    ai(c, tc_node(c, "Softmax", mask ? "sm" : "ss", "p"), "axis", -1);
    tc_node(c, "MatMul", "p,v", "o");
    ais(c, tc_node(c, "Transpose", "o", "y"), "perm", rank, r4 ? (int64_t[]){0, 2, 1, 3} : (int64_t[]){1, 0, 2});
    tc_note(c, "rank %d%s", rank, mask ? ", mask" : "");
    c->want_patterns = PASS_PATTERN_ATTENTION;
    if (c->variant == 1) {
        /* BERT: the heads merged, then the output projection */
        int64_t E = rdim(c, 1, 20);
        tc_ints(c, "merged", 3, (int64_t[]){B, Sq, H * Dv});
        tc_const(c, "wo", KILN_F32, 2, (int64_t[]){H * Dv, E}, G_NORMAL);
        tc_node(c, "Reshape", "y,merged", "ym");
        tc_node(c, "MatMul", "ym,wo", "z");
        tc_out(c, "z");
        c->want_groups = 3; /* attention, the Reshape's alias, the projection */
    } else {
        tc_out(c, "y");
        c->want_groups = 1;
    }
}

/* q, k and v of an attention case, [1 or B, H, S, D], computed in the
 * model (half of a graph input each) so that they live in the arena: in
 * 16-bit storage the tensor-core kernel reads them (graph inputs keep
 * float32, which the fp32 kernel takes). */
static void att_staged_qkv(tc *c, const int64_t *dq, const int64_t *dk, const int64_t *dv)
{
    tc_input(c, "q_in", KILN_F32, 4, dq, G_NORMAL);
    tc_input(c, "k_in", KILN_F32, 4, dk, G_NORMAL);
    tc_input(c, "v_in", KILN_F32, 4, dv, G_NORMAL);
    tc_scalar(c, "half_", KILN_F32, 0.5);
    tc_node(c, "Mul", "q_in,half_", "q");
    tc_node(c, "Mul", "k_in,half_", "k");
    tc_node(c, "Mul", "v_in,half_", "v");
}

/* softmax(q k^T / sqrt(D) [+ mask]) v into `out`, from the q, k and v
 * att_staged_qkv made; the mask, on `mask`, a graph input of [1, 1, 1, Sk]
 * (a key padding mask). */
static void att_padded(tc *c, int64_t D, int64_t Sk, bool mask, const char *out)
{
    ais(c, tc_node(c, "Transpose", "k", "kt"), "perm", 4, (int64_t[]){0, 1, 3, 2});
    tc_node(c, "MatMul", "q,kt", "s");
    tc_scalar(c, "sqrt_d", KILN_F32, sqrt((double)D));
    tc_node(c, "Div", "s,sqrt_d", "ss");
    if (mask) {
        tc_input(c, "mask", KILN_F32, 4, (int64_t[]){1, 1, 1, Sk}, G_NORMAL);
        tc_node(c, "Add", "ss,mask", "sm");
    }
    ai(c, tc_node(c, "Softmax", mask ? "sm" : "ss", "p"), "axis", -1);
    tc_node(c, "MatMul", "p,v", out);
}

/* Attention over more key tiles than an rTask's key groups take in one
 * pass (kg_att.kv_split: at most 4), so each group walks several, double
 * buffered, with a partial last tile; a mask on odd variants, d 128 on
 * variants 2 and 3. */
static void b_attention_long(tc *c)
{
    bool mask = c->variant & 1;
    int64_t H = rdim(c, 1, 3), Sq = rdim(c, 1, 48), Sk = rdim(c, 260, 330), D = c->variant & 2 ? 128 : 64;
    int64_t dq[4] = {1, H, Sq, D}, dk[4] = {1, H, Sk, D};
    att_staged_qkv(c, dq, dk, dk);
    att_padded(c, D, Sk, mask, "o");
    ais(c, tc_node(c, "Transpose", "o", "y"), "perm", 4, (int64_t[]){0, 2, 1, 3});
    tc_out(c, "y");
    tc_note(c, "%lld keys, d %lld%s", (long long)Sk, (long long)D, mask ? ", mask" : "");
    c->want_patterns = PASS_PATTERN_ATTENTION;
    c->want_groups = 0; /* as in b_attention_query_mask */
}

/* Attention over enough query tiles that a persistent kernel of 256-thread
 * blocks, one a multiprocessor, gives an rTask two tiles side by side
 * (emit_attention.c plan_units: more tiles of 64 queries than blocks; here
 * more than twice 148, a margin for the heuristic): 33 to 37 heads (odd, so
 * the last rTask has a spare unit) of 513 to 576 queries, 9 tiles each; a
 * key padding mask on odd variants. Under --schedule mono or mono-barriers
 * the case takes the 256x1 configuration; the tensor-core kernel, and so
 * the units, only run with --precision fp16 or bf16. */
static void b_attention_many_tiles(tc *c)
{
    bool mask = c->variant & 1;
    int64_t H = 2 * rint_(c, 16, 18) + 1, Sq = rint_(c, 513, 576), Sk = rint_(c, 60, 140), D = 64;
    int64_t dq[4] = {1, H, Sq, D}, dk[4] = {1, H, Sk, D};
    att_staged_qkv(c, dq, dk, dk);
    att_padded(c, D, Sk, mask, "y");
    tc_out(c, "y");
    tc_note(c, "%lld heads, %lld queries, %lld keys%s", (long long)H, (long long)Sq, (long long)Sk,
            mask ? ", mask" : "");
    c->want_patterns = PASS_PATTERN_ATTENTION;
    c->want_groups = 0; /* as in b_attention_query_mask */
    c->mono_config = "256x1";
}

/* Attention with a mask per query row (a padding or causal-style mask of
 * [B, 1, Sq, Sk] or [1, H, Sq, Sk]): the mma kernel copies such a mask's
 * key tiles with k's where its rows are 16-byte aligned (kg_att.m_smem)
 * and loads it into registers otherwise. Variants 0 and 1: a float32 graph
 * input (any key count); 2 and 3: a mask computed in the model, so stored
 * in the precision, over a multiple of 8 keys (aligned rows in 16 bits),
 * longer on variant 3. */
static void b_attention_query_mask(tc *c)
{
    int64_t B = rdim(c, 1, 2), H = rdim(c, 1, 3), Sq = rdim(c, 1, 40), D = 16 * rint_(c, 1, 4);
    int64_t Sk = c->variant < 2 ? rdim(c, 1, 70) : 8 * rint_(c, c->variant == 3 ? 17 : 2, c->variant == 3 ? 40 : 9);
    int64_t dq[4] = {B, H, Sq, D}, dk[4] = {B, H, Sk, D};
    int64_t dm[4] = {c->variant == 1 ? 1 : B, c->variant == 1 ? H : 1, Sq, Sk};
    att_staged_qkv(c, dq, dk, dk);
    ais(c, tc_node(c, "Transpose", "k", "kt"), "perm", 4, (int64_t[]){0, 1, 3, 2});
    tc_node(c, "MatMul", "q,kt", "s");
    tc_scalar(c, "sqrt_d", KILN_F32, sqrt((double)D));
    tc_node(c, "Div", "s,sqrt_d", "ss");
    if (c->variant < 2) {
        tc_input(c, "mask", KILN_F32, 4, dm, G_NORMAL);
    } else {
        tc_input(c, "mraw", KILN_F32, 4, dm, G_NORMAL);
        tc_scalar(c, "three", KILN_F32, 3.0);
        tc_node(c, "Mul", "mraw,three", "mask");
    }
    tc_node(c, "Add", "ss,mask", "sm");
    ai(c, tc_node(c, "Softmax", "sm", "p"), "axis", -1);
    tc_node(c, "MatMul", "p,v", "o");
    ais(c, tc_node(c, "Transpose", "o", "y"), "perm", 4, (int64_t[]){0, 2, 1, 3});
    tc_out(c, "y");
    tc_note(c, "mask [%lld, %lld, %lld, %lld]%s", (long long)dm[0], (long long)dm[1], (long long)Sq, (long long)Sk,
            c->variant < 2 ? "" : ", computed");
    c->want_patterns = PASS_PATTERN_ATTENTION;
    c->want_groups = 0; /* the staging's groups vary with the shapes (some merge); a fused attention leaves 2 or 3 */
}

/* Attention as torchvision's ViT exports it: one projection [S, B, 3E]
 * (here computed, so it lives in the arena) sliced into q, k and v along
 * its last axis, each reshaped to [S, B*H, D] and transposed to heads;
 * the group reads the three straight from the projection (pass.h
 * pass_attn_operand: strides and offsets). Variant 1 has a batch of 2,
 * whose Reshape merges batch and heads into one dim no single stride
 * walks, and variant 2 slices with a step of 2 (head dims not contiguous):
 * the slices stay copies, the group reads those. Variant 3 has a head dim
 * that is not a multiple of 16 (the fp32 kernel). */
static void b_attention_gathered(tc *c);

static void b_attention_sliced(tc *c)
{
    if (c->variant == 4) {
        b_attention_gathered(c);
        return;
    }
    int64_t B = c->variant == 1 ? 2 : 1, H = c->variant == 3 ? rdim(c, 1, 4) : rint_(c, 2, 4), S = rdim(c, 1, 50);
    int64_t D = c->variant == 3 ? rdim(c, 1, 24) : 16 * rint_(c, 1, 4), E = H * D, st = c->variant == 2 ? 2 : 1;
    tc_input(c, "x", KILN_F32, 3, (int64_t[]){S, B, 3 * E * st}, G_NORMAL);
    tc_node(c, "Relu", "x", "qkv");
    /* names outlive the builder's packing: literals */
    static const char *start[3] = {"q_start", "k_start", "v_start"}, *end[3] = {"q_end", "k_end", "v_end"};
    static const char *cut[3] = {"qkv,q_start,q_end,axes", "qkv,k_start,k_end,axes", "qkv,v_start,v_end,axes"};
    static const char *cut2[3] = {"qkv,q_start,q_end,axes,steps", "qkv,k_start,k_end,axes,steps",
                                  "qkv,v_start,v_end,axes,steps"};
    static const char *sliced[3] = {"q_cut", "k_cut", "v_cut"}, *heads[3] = {"q_heads", "k_heads", "v_heads"};
    static const char *reshape[3] = {"q_cut,shape", "k_cut,shape", "v_cut,shape"};
    tc_ints(c, "axes", 1, (int64_t[]){-1});
    if (st == 2) tc_ints(c, "steps", 1, (int64_t[]){2});
    tc_ints(c, "shape", 3, (int64_t[]){S, B * H, D});
    for (int i = 0; i < 3; i++) {
        tc_ints(c, start[i], 1, (int64_t[]){i * E * st});
        tc_ints(c, end[i], 1, (int64_t[]){(i + 1) * E * st});
        tc_node(c, "Slice", st == 2 ? cut2[i] : cut[i], sliced[i]);
        tc_node(c, "Reshape", reshape[i], heads[i]);
    }
    ais(c, tc_node(c, "Transpose", "q_heads", "qt"), "perm", 3, (int64_t[]){1, 0, 2});
    ais(c, tc_node(c, "Transpose", "k_heads", "kt"), "perm", 3, (int64_t[]){1, 2, 0});
    ais(c, tc_node(c, "Transpose", "v_heads", "vt"), "perm", 3, (int64_t[]){1, 0, 2});
    tc_scalar(c, "sqrt_d", KILN_F32, sqrt((double)D));
    tc_node(c, "Div", "qt,sqrt_d", "qs");
    tc_node(c, "MatMul", "qs,kt", "s");
    ai(c, tc_node(c, "Softmax", "s", "p"), "axis", -1);
    tc_node(c, "MatMul", "p,vt", "o");
    ais(c, tc_node(c, "Transpose", "o", "y"), "perm", 3, (int64_t[]){1, 0, 2});
    tc_note(c, "S %lld, B %lld, H %lld, D %lld%s", (long long)S, (long long)B, (long long)H, (long long)D,
            st == 2 ? ", slices of step 2" : "");
    tc_out(c, "y");
    c->want_patterns = PASS_PATTERN_ATTENTION;
    /* the Relu and the attention, + 3 copies where the slices stay */
    c->want_groups = st == 2 || B > 1 ? 5 : 2;
    if (st == 1 && B == 1) {
        /* [H, S, D] of the projection's rows of 3E: q and v heads D apart, k^T [H, D, S] */
        int64_t q[3] = {D, 3 * E, 1}, kt[3] = {D, 1, 3 * E};
        c->want_attn_reads = true;
        for (int i = 0; i < 3; i++) {
            c->want_attn_off[i] = i * E;
            c->want_attn_st[0][i] = c->want_attn_st[2][i] = q[i];
            c->want_attn_st[1][i] = kt[i];
        }
    }
}

/* Variant 4 of Attention/sliced_heads, as torch 2's exporter writes ViT's
 * attention: the projection [S, 1, 3E] unflattened to [S, 1, 3, E], moved
 * to [3, S, 1, E] (Unsqueeze, Transpose, Squeeze), q, k and v Gathered out
 * of it, split into heads [S, H, D], transposed, given a batch dim
 * [1, H, S, D] and each scaled by sqrt(1 / sqrt(D)), a factor computed
 * from q's Shape: all views, read in place by the attention (the Shape
 * is folded into a constant and reads nothing). */
static void b_attention_gathered(tc *c)
{
    int64_t H = rint_(c, 2, 4), S = rdim(c, 1, 50), D = 16 * rint_(c, 1, 4), E = H * D;
    tc_input(c, "x", KILN_F32, 3, (int64_t[]){S, 1, 3 * E}, G_NORMAL);
    tc_node(c, "Relu", "x", "qkv");
    tc_ints(c, "unflat", 4, (int64_t[]){S, 1, 3, E});
    tc_node(c, "Reshape", "qkv,unflat", "u");
    tc_ints(c, "ax0", 1, (int64_t[]){0});
    tc_node(c, "Unsqueeze", "u,ax0", "u5");
    ais(c, tc_node(c, "Transpose", "u5", "t5"), "perm", 5, (int64_t[]){3, 1, 2, 0, 4});
    tc_ints(c, "ax3", 1, (int64_t[]){3});
    tc_node(c, "Squeeze", "t5,ax3", "three");
    tc_ints(c, "heads", 3, (int64_t[]){S, H, D});
    tc_ints(c, "batched", 4, (int64_t[]){1, H, S, D});
    static const char *idx[3] = {"i0", "i1", "i2"}, *gin[3] = {"three,i0", "three,i1", "three,i2"};
    static const char *g[3] = {"gq", "gk", "gv"}, *rin[3] = {"gq,heads", "gk,heads", "gv,heads"};
    static const char *h[3] = {"hq", "hk", "hv"}, *t[3] = {"tq", "tk", "tv"};
    static const char *bin[3] = {"tq,batched", "tk,batched", "tv,batched"}, *b4[3] = {"bq", "bk", "bv"};
    for (int i = 0; i < 3; i++) {
        tc_ints(c, idx[i], -1, (int64_t[]){i});
        ai(c, tc_node(c, "Gather", gin[i], g[i]), "axis", 0);
        tc_node(c, "Reshape", rin[i], h[i]);
        ais(c, tc_node(c, "Transpose", h[i], t[i]), "perm", 3, (int64_t[]){1, 0, 2});
        tc_node(c, "Reshape", bin[i], b4[i]);
    }
    /* the factor from q's shape, as exported: a Shape read of q, folded */
    tc_node(c, "Shape", "bq", "qshape");
    tc_ints(c, "last", -1, (int64_t[]){-1});
    ai(c, tc_node(c, "Gather", "qshape,last", "dq"), "axis", 0);
    ai(c, tc_node(c, "Cast", "dq", "dqf"), "to", 1);
    tc_node(c, "Sqrt", "dqf", "sqd");
    tc_node(c, "Reciprocal", "sqd", "inv");
    tc_node(c, "Sqrt", "inv", "root");
    ais(c, tc_node(c, "Transpose", "bk", "bkt"), "perm", 4, (int64_t[]){0, 1, 3, 2});
    tc_node(c, "Mul", "bq,root", "sq");
    tc_node(c, "Mul", "bkt,root", "sk");
    tc_node(c, "MatMul", "sq,sk", "s");
    ai(c, tc_node(c, "Softmax", "s", "p"), "axis", -1);
    tc_node(c, "MatMul", "p,bv", "o");
    ais(c, tc_node(c, "Transpose", "o", "y"), "perm", 4, (int64_t[]){2, 0, 1, 3});
    tc_note(c, "torch 2's ViT export: S %lld, H %lld, D %lld", (long long)S, (long long)H, (long long)D);
    tc_out(c, "y");
    c->want_patterns = PASS_PATTERN_ATTENTION;
    c->want_groups = 2; /* the Relu and the attention */
    /* [1, H, S, D] of the projection's rows of 3E, k^T [1, H, D, S] */
    int64_t q[4] = {0, D, 3 * E, 1}, kt[4] = {0, D, 1, 3 * E};
    c->want_attn_reads = true;
    for (int i = 0; i < 3; i++) c->want_attn_off[i] = i * E;
    for (int i = 0; i < 4; i++) {
        c->want_attn_st[0][i] = c->want_attn_st[2][i] = q[i];
        c->want_attn_st[1][i] = kt[i];
    }
}

/* Attention as PyTorch exports transformers' BERT: q, k and v stored
 * [B, S, H, D] and transposed in (k to [B, H, D, S]), q and k^T each
 * scaled by a Mul, an additive mask [B, 1, Sq, Sk], then the NaN guard
 * Where(IsNaN(p), 0, p) on the probabilities. Variant 1 masks one query
 * row entirely (its softmax is NaN, its output 0); variant 2 puts a NaN
 * into q and +inf into the mask; variant 3 has no mask. One group where the
 * target fuses attention. */
static void b_attention_nan_guard(tc *c)
{
    bool mask = c->variant != 3;
    int64_t B = rdim(c, 1, 2), H = rdim(c, 1, 3), Sq = rdim(c, 2, 40), Sk = rdim(c, 1, 70);
    int64_t D = 16 * rint_(c, 1, 4);
    ir_tensor *q = tc_input(c, "q", KILN_F32, 4, (int64_t[]){B, Sq, H, D}, G_NORMAL);
    tc_input(c, "k", KILN_F32, 4, (int64_t[]){B, Sk, H, D}, G_NORMAL);
    tc_input(c, "v", KILN_F32, 4, (int64_t[]){B, Sk, H, D}, G_NORMAL);
    ais(c, tc_node(c, "Transpose", "q", "qt"), "perm", 4, (int64_t[]){0, 2, 1, 3});
    ais(c, tc_node(c, "Transpose", "k", "kt"), "perm", 4, (int64_t[]){0, 2, 3, 1});
    ais(c, tc_node(c, "Transpose", "v", "vt"), "perm", 4, (int64_t[]){0, 2, 1, 3});
    double s = 1.0 / sqrt(sqrt((double)D));
    tc_scalar(c, "sq", KILN_F32, s);
    tc_scalar(c, "sk", KILN_F32, s);
    tc_node(c, "Mul", "qt,sq", "qs");
    tc_node(c, "Mul", "kt,sk", "ks");
    tc_node(c, "MatMul", "qs,ks", "sc");
    if (mask) {
        ir_tensor *m = tc_input(c, "mask", KILN_F32, 4, (int64_t[]){B, 1, Sq, Sk}, G_NORMAL);
        for (int64_t i = 0; i < ir_numel(m); i++)
            if (rint_(c, 0, 3) == 0) ir_set_f64(m, i, -INFINITY);
        int64_t row = rint_(c, 0, B * Sq - 1);
        if (c->variant == 1)
            for (int64_t k = 0; k < Sk; k++) ir_set_f64(m, row * Sk + k, -INFINITY);
        if (c->variant == 2) {
            ir_set_f64(m, row * Sk + rint_(c, 0, Sk - 1), INFINITY);
            ir_set_f64(q, rint_(c, 0, ir_numel(q) - 1), NAN);
        }
        tc_node(c, "Add", "sc,mask", "sm");
    }
    ai(c, tc_node(c, "Softmax", mask ? "sm" : "sc", "p"), "axis", -1);
    tc_node(c, "IsNaN", "p", "isnan");
    tc_scalar(c, "zero", KILN_F32, 0.0);
    tc_node(c, "Where", "isnan,zero,p", "pg");
    tc_node(c, "MatMul", "pg,vt", "o");
    ais(c, tc_node(c, "Transpose", "o", "y"), "perm", 4, (int64_t[]){0, 2, 1, 3});
    static const char *what[] = {"mask", "a fully masked row", "NaN in q, +inf in the mask", "no mask"};
    tc_note(c, "%s", what[c->variant & 3]);
    tc_out(c, "y");
    c->want_patterns = PASS_PATTERN_ATTENTION;
    c->want_groups = 1;
}

/* Attention-style MatMul(A, B fed) -> scale (Mul or Div by a constant) ->
 * Add(residual) -> activation. */
static void b_matmul_scale_res(tc *c)
{
    int ra, rb;
    int64_t da[4], db[4], N;
    matmul_shapes(c, &ra, da, &rb, db, &N);
    tc_input(c, "a", KILN_F32, ra, da, G_NORMAL);
    tc_input(c, "b", KILN_F32, rb, db, G_NORMAL);
    int64_t dy[4];
    memcpy(dy, da, sizeof(dy));
    dy[ra - 1] = N;
    tc_input(c, "res", KILN_F32, ra, dy, G_NORMAL);
    double s = runif(c, 0.1, 3);
    tc_scalar(c, "s", KILN_F32, s);
    tc_node(c, "MatMul", "a,b", "mm");
    tc_node(c, c->variant & 1 ? "Div" : "Mul", "mm,s", "sc");
    tc_node(c, "Add", "sc,res", "sum");
    act_node(c, c->variant + 3, "sum", "y");
    tc_out(c, "y");
}

static void b_gemm(tc *c)
{
    bool big = c->variant == 3;
    int64_t M = rdim(c, 1, big ? 60 : 17), K = rdim(c, 1, big ? 90 : 19), N = rdim(c, 1, big ? 130 : 23);
    int ta = (int)rint_(c, 0, 1), tb = (int)rint_(c, 0, 1);
    tc_input(c, "a", KILN_F32, 2, ta ? (int64_t[]){K, M} : (int64_t[]){M, K}, G_NORMAL);
    int64_t bd[2] = {tb ? N : K, tb ? K : N};
    if (c->variant & 1) tc_const(c, "b", KILN_F32, 2, bd, G_NORMAL);
    else tc_input(c, "b", KILN_F32, 2, bd, G_NORMAL);
    int cmode = c->variant % 3; /* 0 none, 1 [N], 2 [1,N] */
    if (cmode == 1) tc_const(c, "c", KILN_F32, 1, &N, G_NORMAL);
    if (cmode == 2) tc_const(c, "c", KILN_F32, 2, (int64_t[]){1, N}, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "Gemm", cmode ? "a,b,c" : "a,b", "y");
    double alpha = c->variant == 0 ? 1.0 : runif(c, -2, 2);
    if (ta) ai(c, n, "transA", 1);
    if (tb) ai(c, n, "transB", 1);
    if (alpha != 1.0) af(c, n, "alpha", alpha);
    if (cmode && rint_(c, 0, 1)) af(c, n, "beta", 1.0);
    tc_note(c, "transA=%d transB=%d alpha=%.3g C=%s", ta, tb, alpha,
            cmode == 0 ? "none" : cmode == 1 ? "[N]" : "[1,N]");
    tc_out(c, "y");
}

/* Gemm + activation, and Gemm with a full [M,N] C or beta != 1 (fallback). */
static void b_gemm_act(tc *c)
{
    int64_t M = rdim(c, 1, 17), K = rdim(c, 1, 19), N = rdim(c, 1, 23);
    tc_input(c, "a", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    tc_const(c, "b", KILN_F32, 2, (int64_t[]){N, K}, G_NORMAL);
    tc_const(c, "c", KILN_F32, 1, &N, G_NORMAL);
    ai(c, tc_node(c, "Gemm", "a,b,c", "g"), "transB", 1);
    act_node(c, c->variant + 4, "g", "y");
    tc_out(c, "y");
}

/* Products of one row (a classifier at batch 1), which the cuda target
 * computes with kg_gemm_gemv where A and B are K-major: variant 0, Gemm
 * transB=1 + bias + Relu, K a multiple of 8; 1, an odd K (a lane's last
 * chunk short) and N past the last warp's columns; 2, ResNet-50's fc, K
 * 2048 and N 1000; 3, MatMul of B [K, N] + bias (stored K-major for the
 * product with 16-bit storage on sm_90; else another template). */
static void b_gemm_one_row(tc *c)
{
    int64_t M = 1;
    int64_t K = c->variant == 1 ? rint_(c, 20, 300) | 1 : c->variant == 2 ? 2048 : 8 * rint_(c, 2, 40);
    int64_t N = c->variant == 2 ? 1000 : rint_(c, 1, 300);
    tc_note(c, "M=%lld K=%lld N=%lld", (long long)M, (long long)K, (long long)N);
    tc_input(c, "a", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    tc_const(c, "bias", KILN_F32, 1, &N, G_NORMAL);
    if (c->variant == 3) {
        tc_const(c, "b", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
        tc_node(c, "MatMul", "a,b", "t");
        tc_node(c, "Add", "t,bias", "y");
    } else {
        tc_const(c, "b", KILN_F32, 2, (int64_t[]){N, K}, G_NORMAL);
        ai(c, tc_node(c, "Gemm", "a,b,bias", "g"), "transB", 1);
        tc_node(c, "Relu", "g", "y");
    }
    tc_out(c, "y");
}

/* A residual Add after views of a contraction's output joins its epilogue
 * (ViT's out-projection: Gemm, Reshape [M,1,N], Transpose to [1,M,N], Add).
 * Variant 0: that; 1: MatMul [1,M,K] x [K,N], Reshape to [M,N], Add; 2: the
 * Add's other operand a constant after the view, which stays out (a bias
 * after a view would broadcast along other axes). */
static void b_gemm_viewed_residual(tc *c)
{
    int64_t M = rdim(c, 1, 40), K = rdim(c, 1, 24), N = rdim(c, 1, 40);
    if (c->variant == 0) {
        tc_input(c, "a", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
        tc_const(c, "b", KILN_F32, 2, (int64_t[]){N, K}, G_NORMAL);
        tc_const(c, "c", KILN_F32, 1, &N, G_NORMAL);
        tc_input(c, "r", KILN_F32, 3, (int64_t[]){1, M, N}, G_NORMAL);
        ai(c, tc_node(c, "Gemm", "a,b,c", "g"), "transB", 1);
        tc_ints(c, "shape", 3, (int64_t[]){M, 1, N});
        tc_node(c, "Reshape", "g,shape", "v");
        ais(c, tc_node(c, "Transpose", "v", "t"), "perm", 3, (int64_t[]){1, 0, 2});
        tc_node(c, "Add", "t,r", "y");
        c->want_groups = 1;
    } else {
        tc_input(c, "a", KILN_F32, 3, (int64_t[]){1, M, K}, G_NORMAL);
        tc_const(c, "b", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
        tc_node(c, "MatMul", "a,b", "g");
        tc_ints(c, "shape", 2, (int64_t[]){M, N});
        tc_node(c, "Reshape", "g,shape", "v");
        if (c->variant == 1) {
            tc_input(c, "r", KILN_F32, 2, (int64_t[]){M, N}, G_NORMAL);
            c->want_groups = 1;
        } else {
            tc_const(c, "r", KILN_F32, 2, (int64_t[]){M, N}, G_NORMAL);
        }
        tc_node(c, "Add", "v,r", "y");
    }
    tc_note(c, "%s", (const char *[]){"Gemm, Reshape, Transpose, Add", "MatMul, Reshape, Add",
                                      "MatMul, Reshape, Add of a constant"}[c->variant % 3]);
    tc_out(c, "y");
}

/* A contraction whose output holds inf, -inf and NaN (a few special
 * inputs), through each epilogue activation: the activations must treat
 * them as the interpreter does (Relu(NaN) is NaN). */
static void b_epilogue_special(tc *c)
{
    int64_t M = rint_(c, 4, 12), K = rint_(c, 2, 9), N = rint_(c, 2, 20);
    ir_tensor *a = tc_input(c, "a", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    static const double sp[] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 3; k++) ir_set_f64(a, rint_(c, 0, M - 1) * K + rint_(c, 0, K - 1), sp[k]);
    tc_const(c, "b", KILN_F32, 2, (int64_t[]){K, N}, G_NONZERO);
    tc_const(c, "bias", KILN_F32, 1, &N, G_NORMAL);
    tc_node(c, "MatMul", "a,b", "mm");
    tc_node(c, "Add", "mm,bias", "h");
    act_node(c, c->variant, "h", "y");
    tc_out(c, "y");
}

static void b_gemm_full_c(tc *c)
{
    int64_t M = rint_(c, 2, 17), K = rdim(c, 1, 19), N = rdim(c, 1, 23);
    tc_input(c, "a", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    tc_input(c, "b", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
    tc_const(c, "c", KILN_F32, 2, (int64_t[]){M, N}, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "Gemm", "a,b,c", "y");
    if (c->variant & 1) af(c, n, "beta", 0.5);
    tc_out(c, "y");
}

/* ---- pooling and row groups ---------------------------------------------------------------- */

/* The test's copy of the rule in emit_rows.c: does every window along a
 * dim read an input element? */
static bool windows_read_input(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil, int64_t pad)
{
    for (int64_t o = 0; o < out; o++) {
        bool hit = false;
        for (int64_t j = 0; j < k && !hit; j++) {
            int64_t at = o * stride - pad + j * dil;
            hit = at >= 0 && at < in;
        }
        if (!hit) return false;
    }
    return true;
}

/* The leading pad of a window op along a dim, auto_pad resolved as the
 * interpreter does. */
static int64_t lead_pad(const char *ap, int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad)
{
    if (!ap) return pad;
    if (strcmp(ap, "VALID") == 0) return 0;
    int64_t total = KILN_MAX(0, (out - 1) * s + (k - 1) * d + 1 - in);
    return strcmp(ap, "SAME_LOWER") == 0 ? total - total / 2 : total / 2;
}

/* empty: 0 no MaxPool window wholly in the padding (the target compiles
 * those), 1 some (the target leaves them to the interpreter). */
static void pool_case(tc *c, const char *op, int empty)
{
    bool big = c->variant == 3, avg = strcmp(op, "AveragePool") == 0;
    int64_t N = rdim(c, 1, 2), C = rdim(c, 1, big ? 16 : 5), H, W, R, S, sh, sw, dh = 1, dw = 1, p[4] = {0};
    const char *ap = NULL;
    int ceil_mode = 0;
    for (;;) {
        H = rdim(c, 1, big ? 40 : 12);
        W = rdim(c, 1, big ? 40 : 12);
        R = rint_(c, 1, 3);
        S = rint_(c, 1, 3);
        sh = rint_(c, 1, 3);
        sw = rint_(c, 1, 3);
        if (!avg && rint_(c, 0, 2) == 0) {
            dh = rint_(c, 1, 2);
            dw = rint_(c, 1, 2);
        }
        int a = (int)rint_(c, 0, 4);
        ap = a == 0 ? "SAME_UPPER" : a == 1 ? "SAME_LOWER" : a == 2 ? "VALID" : NULL;
        for (int i = 0; i < 4; i++) p[i] = ap ? 0 : rint_(c, 0, (i % 2 ? S : R) - (c->variant == 2 || empty ? 0 : 1));
        ceil_mode = !avg && !ap && (c->variant == 1 || rint_(c, 0, 2) == 0);
        int64_t OH = conv_out(H, R, sh, dh, p[0], p[2], ap), OW = conv_out(W, S, sw, dw, p[1], p[3], ap);
        if (ceil_mode && OH >= 1 && OW >= 1) { /* the interpreter's (PyTorch's) rule */
            if ((H + p[0] + p[2] - dh * (R - 1) - 1) % sh) OH++;
            if ((OH - 1) * sh >= H + p[0]) OH--;
            if ((W + p[1] + p[3] - dw * (S - 1) - 1) % sw) OW++;
            if ((OW - 1) * sw >= W + p[1]) OW--;
        }
        if (OH < 1 || OW < 1) continue;
        bool full = windows_read_input(H, OH, R, sh, dh, lead_pad(ap, H, OH, R, sh, dh, p[0])) &&
                    windows_read_input(W, OW, S, sw, dw, lead_pad(ap, W, OW, S, sw, dw, p[1]));
        if (avg || full == !empty) break;
    }
    tc_input(c, "x", KILN_F32, 4, (int64_t[]){N, C, H, W}, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, op, "x", "y");
    ais(c, n, "kernel_shape", 2, (int64_t[]){R, S});
    if (sh != 1 || sw != 1) ais(c, n, "strides", 2, (int64_t[]){sh, sw});
    if (dh != 1 || dw != 1) ais(c, n, "dilations", 2, (int64_t[]){dh, dw});
    if (ap) as(c, n, "auto_pad", ap);
    else ais(c, n, "pads", 4, p);
    if (ceil_mode) ai(c, n, "ceil_mode", 1);
    int cip = avg && rint_(c, 0, 1);
    if (cip) ai(c, n, "count_include_pad", 1);
    tc_note(c, "k=%lldx%lld s=%lld,%lld d=%lld,%lld", (long long)R, (long long)S, (long long)sh, (long long)sw,
            (long long)dh, (long long)dw);
    if (ap) tc_note(c, "auto_pad=%s", ap);
    else tc_note(c, "pads=%lld,%lld,%lld,%lld", (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
    tc_note(c, "ceil_mode=%d count_include_pad=%d", ceil_mode, cip);
    tc_out(c, "y");
}

static void b_maxpool(tc *c) { pool_case(c, "MaxPool", 0); }
static void b_maxpool_empty(tc *c) { pool_case(c, "MaxPool", 1); }
static void b_avgpool(tc *c) { pool_case(c, "AveragePool", 0); }

/* AveragePool with ceil_mode, MaxPool with indices, 1-D pooling: fallback. */
static void b_pool_other(tc *c)
{
    int64_t N = rdim(c, 1, 2), C = rdim(c, 1, 4), H = rint_(c, 3, 9), W = rint_(c, 3, 9);
    if (c->variant == 0) {
        tc_input(c, "x", KILN_F32, 4, (int64_t[]){N, C, H, W}, G_NORMAL);
        Onnx__NodeProto *n = tc_node(c, "AveragePool", "x", "y");
        ais(c, n, "kernel_shape", 2, (int64_t[]){2, 2});
        ais(c, n, "strides", 2, (int64_t[]){2, 2});
        ai(c, n, "ceil_mode", 1);
        tc_out(c, "y");
    } else if (c->variant == 1) {
        tc_input(c, "x", KILN_F32, 4, (int64_t[]){N, C, H, W}, G_NORMAL);
        ais(c, tc_node(c, "MaxPool", "x", "y,idx"), "kernel_shape", 2, (int64_t[]){3, 3});
        tc_out(c, "y");
        tc_out(c, "idx");
    } else {
        tc_input(c, "x", KILN_F32, 3, (int64_t[]){N, C, H * W}, G_NORMAL);
        ais(c, tc_node(c, c->variant == 2 ? "MaxPool" : "AveragePool", "x", "y"), "kernel_shape", 1,
            (int64_t[]){3});
        tc_out(c, "y");
    }
}

static void softmax_case(tc *c, const char *op, bool last_axis)
{
    int64_t dims[IR_MAX_RANK];
    int rank = c->variant == 3 ? 2 : rshape(c, last_axis ? 1 : 2, 4, 9, dims);
    if (c->variant == 3) {
        dims[0] = rint_(c, 50, 90);
        dims[1] = rint_(c, 200, 500);
    }
    tc_input(c, "x", KILN_F32, rank, dims, G_EXP);
    Onnx__NodeProto *n = tc_node(c, op, "x", "y");
    int opset = c->cs->opset ? c->cs->opset : 17;
    int64_t axis;
    if (last_axis) axis = rint_(c, 0, 1) ? -1 : rank - 1;
    else if (opset >= 13) axis = rint_(c, 0, rank - 2) - (rint_(c, 0, 1) ? rank : 0);
    else axis = rint_(c, -rank, rank - 1);
    if (!(opset < 13 && axis == 1 && rint_(c, 0, 1)) && !(opset >= 13 && axis == -1 && c->variant == 0))
        ai(c, n, "axis", axis);
    tc_note(c, "axis=%lld", (long long)axis);
    tc_out(c, "y");
}

/* Attention-style rows: -inf where masked (never a whole row), and large
 * logits that overflow exp without the row maximum subtracted. */
static void b_softmax_masked(tc *c)
{
    int64_t rows = rdim(c, 1, c->variant == 3 ? 300 : 9), cols = rint_(c, 1, c->variant == 3 ? 300 : 40);
    ir_tensor *x = tc_input(c, "x", KILN_F32, 2, (int64_t[]){rows, cols}, G_NORMAL);
    double scale = c->variant & 1 ? 200 : 10;
    for (int64_t r = 0; r < rows; r++) {
        int64_t keep = rint_(c, 0, cols - 1);
        for (int64_t k = 0; k < cols; k++) {
            double v = runif(c, -scale, scale);
            ir_set_f64(x, r * cols + k, k != keep && rint_(c, 0, 2) == 0 ? -INFINITY : v);
        }
    }
    tc_node(c, c->cs->op, "x", "y");
    tc_note(c, "logits in [-%g, %g], some -inf", scale, scale);
    tc_out(c, "y");
}

/* Rows with a large common offset: a one-pass variance in f32 cancels. */
static void b_layernorm_offset(tc *c)
{
    int64_t rows = rdim(c, 1, 20), cols = rint_(c, 2, c->variant == 1 ? 1000 : 64);
    ir_tensor *x = tc_input(c, "x", KILN_F32, 2, (int64_t[]){rows, cols}, G_NORMAL);
    double offset = (double[]){100, 1000, -300, 30}[c->variant % 4];
    for (int64_t i = 0; i < ir_numel(x); i++) ir_set_f64(x, i, offset + ir_get_f64(x, i));
    tc_const(c, "gamma", KILN_F32, 1, &cols, G_NORMAL);
    tc_const(c, "beta", KILN_F32, 1, &cols, G_NORMAL);
    tc_node(c, "LayerNormalization", "x,gamma,beta", "y");
    tc_note(c, "offset=%g", offset);
    tc_out(c, "y");
}

static void b_softmax13(tc *c) { softmax_case(c, c->cs->op, true); }
static void b_softmax13_inner(tc *c) { softmax_case(c, c->cs->op, false); }
static void b_softmax11(tc *c) { softmax_case(c, c->cs->op, false); }

static void b_layernorm(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = c->variant == 3 ? 3 : rshape(c, 1, 4, 9, dims);
    if (c->variant == 3) {
        dims[0] = 2;
        dims[1] = rint_(c, 30, 70);
        dims[2] = rint_(c, 200, 400);
    }
    int64_t axis = rint_(c, -rank, rank - 1);
    int a = (int)(axis < 0 ? axis + rank : axis);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_const(c, "gamma", KILN_F32, rank - a, dims + a, G_NORMAL);
    bool bias = c->variant != 1;
    if (bias) tc_const(c, "beta", KILN_F32, rank - a, dims + a, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "LayerNormalization", bias ? "x,gamma,beta" : "x,gamma", "y");
    if (axis != -1 || c->variant == 2) ai(c, n, "axis", axis);
    double eps = c->variant == 2 ? 1e-3 : 1e-5;
    if (c->variant == 2) af(c, n, "epsilon", eps);
    tc_note(c, "axis=%lld eps=%g bias=%d", (long long)axis, eps, bias);
    tc_out(c, "y");
}

/* RMSNorm as a graph spells it (the CUDA target's rows pattern, pass.h
 * PASS_PATTERN_RMS_NORM): x / sqrt(mean(x^2) + eps), optionally times a
 * per-column scale. Variant 0: Pow and Div, a scale, 256 to 512 columns
 * (x is a graph input, float32: 4-element chunks, at most 4 a lane, the
 * scale loaded ahead, kg_row_gb); 1: Mul(x, x) and Reciprocal then Mul, no
 * scale; 2: Div(1, .) then Mul, a scale, over 1100 columns; 3: between two
 * Tanh, so that under 16-bit storage x and y are 16-bit: [2, S, 768], 8
 * elements a chunk, 3 a lane, the scale held packed. */
static void b_rms_norm(tc *c)
{
    int64_t dims[3] = {rdim(c, 1, 40), rint_(c, 2, 300), 768};
    if (c->variant == 0) dims[1] = 4 * rint_(c, 64, 128);
    if (c->variant == 2) dims[1] = rint_(c, 1100, 2100);
    int rank = 2;
    if (c->variant == 3) dims[0] = 2, dims[1] = rint_(c, 30, 70), rank = 3;
    int64_t cols = dims[rank - 1];
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    const char *x = "x";
    if (c->variant == 3) tc_node(c, "Tanh", "x", x = "h");
    tc_scalar(c, "two", KILN_F32, 2.0);
    tc_scalar(c, "one", KILN_F32, 1.0);
    tc_scalar(c, "eps", KILN_F32, 1e-6);
    tc_node(c, c->variant == 1 ? "Mul" : "Pow", tc_str(c, c->variant == 1 ? "%s,%s" : "%s,two", x, x), "sq");
    ais(c, tc_node(c, "ReduceMean", "sq", "ms"), "axes", 1, (int64_t[]){-1});
    tc_node(c, "Add", "ms,eps", "mse");
    tc_node(c, "Sqrt", "mse", "rms");
    bool scale = c->variant != 1;
    const char *normed = scale ? "n" : "y";
    if (c->variant == 0) {
        tc_node(c, "Div", tc_str(c, "%s,rms", x), normed);
    } else {
        tc_node(c, c->variant == 1 ? "Reciprocal" : "Div", c->variant == 1 ? "rms" : "one,rms", "inv");
        tc_node(c, "Mul", tc_str(c, c->variant == 1 ? "%s,inv" : "inv,%s", x), normed);
    }
    if (scale) {
        tc_const(c, "w", KILN_F32, 1, &cols, G_NORMAL);
        tc_node(c, "Mul", "n,w", c->variant == 3 ? "s" : "y");
    }
    if (c->variant == 3) tc_node(c, "Tanh", "s", "y");
    tc_out(c, "y");
}

/* LayerNormalization between two Tanh, so that under 16-bit storage its x
 * and y are 16-bit (a graph's own inputs and outputs stay float32): 8
 * elements a chunk, g and b loaded ahead and held packed (kg_row_gb), as in
 * BERT and ViT. Variant 0: [16, S, 768] with a bias (BERT b16's rows: in a
 * persistent kernel more than a row a warp, kg_rows_held); 1: [2, S, 768]
 * without; 2: 384 columns, lanes past the row's end on their second chunk;
 * 3: 1000, 4 chunks a lane, past the end on the fourth. */
static void b_layernorm_16bit(tc *c)
{
    int64_t cols = (int64_t[]){768, 768, 384, 1000}[c->variant & 3];
    int64_t dims[3] = {c->variant == 0 ? 16 : 2, c->variant == 0 ? rint_(c, 100, 128) : rint_(c, 30, 70), cols};
    tc_input(c, "x", KILN_F32, 3, dims, G_NORMAL);
    tc_node(c, "Tanh", "x", "h");
    tc_const(c, "gamma", KILN_F32, 1, &cols, G_NORMAL);
    bool bias = c->variant != 1;
    if (bias) tc_const(c, "beta", KILN_F32, 1, &cols, G_NORMAL);
    tc_node(c, "LayerNormalization", bias ? "h,gamma,beta" : "h,gamma", "n");
    tc_node(c, "Tanh", "n", "y");
    tc_note(c, "bias=%d", bias);
    tc_out(c, "y");
}

static void b_global_avgpool(tc *c)
{
    int64_t dims[5];
    int rank = (int)rint_(c, 3, 5);
    for (int i = 0; i < rank; i++) dims[i] = rdim(c, 1, c->variant == 3 ? (i < 2 ? 8 : 40) : 7);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_node(c, "GlobalAveragePool", "x", "y");
    tc_out(c, "y");
}

/* ---- data movement ----------------------------------------------------------------------- */

/* The dtype of movement cases: a different one per shape (bytes are bytes). */
static kiln_dtype move_dtype(tc *c)
{
    static const kiln_dtype ts[] = {KILN_F32, KILN_I64, KILN_U8, KILN_F64, KILN_BOOL, KILN_I32, KILN_I16};
    kiln_dtype t = ts[(c->variant + (int)(hash_str(0, c->cs->name) % 7)) % 7];
    tc_note(c, "%s", kiln_dtype_name(t));
    return t;
}

/* Movement shapes: small, medium, or (variant 3) large. */
static int rshape_move(tc *c, int min_rank, int max_rank, int64_t *dims)
{
    if (c->variant == 3) {
        int rank = (int)rint_(c, KILN_MAX(min_rank, 2), KILN_MAX(min_rank, 4));
        int64_t budget = 60000;
        for (int i = 0; i < rank; i++) {
            int64_t room = budget;
            for (int j = i + 1; j < rank; j++) room /= 2;
            dims[i] = rint_(c, 2, KILN_MAX(2, KILN_MIN(room, 90)));
            budget /= dims[i];
        }
        return rank;
    }
    return rshape(c, min_rank, max_rank, c->variant == 0 ? 4 : 8, dims);
}

static int rand_axis(tc *c, int rank) { return (int)rint_(c, -rank, rank - 1); }
static int norm(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

static void b_transpose(tc *c)
{
    int64_t dims[IR_MAX_RANK], perm[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 5, dims);
    kiln_dtype t = move_dtype(c);
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "Transpose", "x", "y");
    if (c->variant != 0) {
        for (int i = 0; i < rank; i++) perm[i] = i;
        for (int i = rank - 1; i > 0; i--) {
            int j = (int)rint_(c, 0, i);
            int64_t tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        ais(c, n, "perm", rank, perm);
        char buf[64] = "perm=";
        for (int i = 0; i < rank; i++) appendf(buf, sizeof(buf), "%lld", (long long)perm[i]);
        tc_note(c, "%s", buf);
    }
    tc_out(c, "y");
}

static void b_concat(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    int axis = rand_axis(c, rank), a = norm(axis, rank), k = (int)rint_(c, 1, 4);
    kiln_dtype t = move_dtype(c);
    char ins[128] = "";
    for (int i = 0; i < k; i++) {
        dims[a] = rdim(c, 1, c->variant == 3 ? 20 : 6);
        const char *x = tc_str(c, "x%d", i);
        if (c->variant == 2 && i == 1) tc_const(c, x, t, rank, dims, G_NORMAL);
        else tc_input(c, x, t, rank, dims, G_NORMAL);
        strcat(ins, i ? "," : "");
        strcat(ins, x);
    }
    ai(c, tc_node(c, "Concat", ins, "y"), "axis", axis);
    tc_note(c, "axis=%d n=%d", axis, k);
    tc_out(c, "y");
}

/* Split with a constant split input (opset 13), or equal parts. */
static void b_split(tc *c)
{
    int64_t dims[IR_MAX_RANK], split[6];
    int rank = rshape_move(c, 1, 4, dims);
    int axis = rand_axis(c, rank), a = norm(axis, rank), k = (int)rint_(c, 1, 4);
    kiln_dtype t = move_dtype(c);
    bool given = c->variant != 1;
    int64_t total = 0;
    for (int i = 0; i < k; i++) total += split[i] = rdim(c, 1, 5);
    if (!given) total = k * rdim(c, 1, 5);
    dims[a] = total;
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    if (given) tc_ints(c, "split", k, split);
    char outs[128] = "";
    for (int i = 0; i < k; i++) {
        appendf(outs, sizeof(outs), "%sy%d", i ? "," : "", i);
        tc_out(c, tc_str(c, "y%d", i));
    }
    ai(c, tc_node(c, "Split", given ? "x,split" : "x", outs), "axis", axis);
    tc_note(c, "axis=%d parts=%d%s", axis, k, given ? " (split given)" : "");
}

/* Split-18: num_outputs, the last part smaller. */
static void b_split18(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    int axis = rand_axis(c, rank), a = norm(axis, rank), k = (int)rint_(c, 2, 4);
    kiln_dtype t = move_dtype(c);
    int64_t chunk = rint_(c, 1, 4);
    dims[a] = chunk * (k - 1) + rint_(c, 1, chunk);
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    char outs[128] = "";
    for (int i = 0; i < k; i++) {
        appendf(outs, sizeof(outs), "%sy%d", i ? "," : "", i);
        tc_out(c, tc_str(c, "y%d", i));
    }
    Onnx__NodeProto *n = tc_node(c, "Split", "x", outs);
    ai(c, n, "axis", axis);
    ai(c, n, "num_outputs", k);
    tc_note(c, "axis=%d num_outputs=%d", axis, k);
}

/* Three large parts of a float32 [rows, 1024] (0.4 to 2.8 MB in all):
 * a GPU run's outputs come through its staging ring (rt_cuda.c) in several
 * laps, a slot holding the end of one output and the start of the next. */
static void b_split_large(tc *c)
{
    int64_t split[3], total = 0;
    for (int i = 0; i < 3; i++) total += split[i] = rint_(c, 1, 200) + (i == 0 ? 100 : 0);
    int64_t dims[2] = {total, 1024};
    tc_input(c, "x", KILN_F32, 2, dims, G_NORMAL);
    tc_ints(c, "split", 3, split);
    for (int i = 0; i < 3; i++) tc_out(c, tc_str(c, "y%d", i));
    ai(c, tc_node(c, "Split", "x,split", "y0,y1,y2"), "axis", 0);
    tc_note(c, "rows %lld + %lld + %lld of 1024", (long long)split[0], (long long)split[1], (long long)split[2]);
}

static void b_slice(tc *c)
{
    int64_t dims[IR_MAX_RANK], starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    kiln_dtype t = move_dtype(c);
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    int k = (int)rint_(c, 1, rank);
    bool with_axes = c->variant != 0, with_steps = c->variant >= 2;
    int order[IR_MAX_RANK];
    for (int i = 0; i < rank; i++) order[i] = i;
    for (int i = rank - 1; i > 0 && with_axes; i--) {
        int j = (int)rint_(c, 0, i), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    char note[256] = "";
    for (int i = 0; i < k; i++) {
        int ax = order[i];
        int64_t d = dims[ax];
        for (;;) {
            int64_t step = with_steps ? (int64_t[]){1, 1, 2, 3, -1, -2}[rint_(c, 0, 5)] : 1;
            int64_t s = rint_(c, -d - 2, d + 1), e = rint_(c, -d - 2, d + 1);
            if (rint_(c, 0, 5) == 0) e = step > 0 ? INT64_MAX : INT64_MIN;
            /* the element count, as ONNX clamps */
            int64_t cs = s < 0 ? s + d : s, ce = e == INT64_MAX || e == INT64_MIN ? e : e < 0 ? e + d : e, cnt;
            if (step > 0) {
                cs = KILN_MAX(0, KILN_MIN(cs, d));
                ce = KILN_MAX(0, KILN_MIN(ce, d));
                cnt = ce > cs ? (ce - cs + step - 1) / step : 0;
            } else {
                cs = KILN_MAX(0, KILN_MIN(cs, d - 1));
                ce = KILN_MAX(-1, KILN_MIN(ce, d - 1));
                cnt = cs > ce ? (cs - ce - step - 1) / -step : 0;
            }
            if (cnt < 1) continue;
            starts[i] = s;
            ends[i] = e;
            steps[i] = step;
            break;
        }
        axes[i] = with_axes && rint_(c, 0, 1) ? ax - rank : ax;
        appendf(note, sizeof(note), "%s[%lld:%lld:%lld]@%lld", i ? "," : "",
                 (long long)starts[i], (long long)ends[i], (long long)steps[i], (long long)axes[i]);
    }
    tc_ints(c, "starts", k, starts);
    tc_ints(c, "ends", k, ends);
    if (with_axes) tc_ints(c, "axes", k, axes);
    if (with_steps) tc_ints(c, "steps", k, steps);
    tc_node(c, "Slice", with_steps ? "x,starts,ends,axes,steps" : with_axes ? "x,starts,ends,axes" : "x,starts,ends",
            "y");
    tc_note(c, "%s", note);
    tc_out(c, "y");
}

static void b_gather(tc *c)
{
    int64_t dims[IR_MAX_RANK], idims[3];
    int rank = rshape_move(c, 1, 4, dims);
    if (rank + 2 > IR_MAX_RANK) rank = IR_MAX_RANK - 2;
    int axis = rand_axis(c, rank), a = norm(axis, rank);
    kiln_dtype t = move_dtype(c);
    int irank = (int)rint_(c, 0, 2);
    for (int i = 0; i < irank; i++) idims[i] = rdim(c, 1, 5);
    kiln_dtype it = c->variant & 1 ? KILN_I32 : KILN_I64;
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    ir_tensor *ind = c->variant == 2 ? tc_const(c, "i", it, irank, idims, G_NORMAL)
                                     : tc_input(c, "i", it, irank, idims, G_NORMAL);
    for (int64_t j = 0; j < ir_numel(ind); j++) ir_set_i64(ind, j, rint_(c, -dims[a], dims[a] - 1));
    ai(c, tc_node(c, "Gather", "x,i", "y"), "axis", axis);
    tc_note(c, "axis=%d indices=%s%s", axis, kiln_dtype_name(it), c->variant == 2 ? " (constant)" : "");
    tc_out(c, "y");
}

static void b_expand(tc *c)
{
    int64_t out[IR_MAX_RANK], xd[IR_MAX_RANK], shape[IR_MAX_RANK];
    int orank = rshape_move(c, 1, 5, out);
    int xrank = (int)rint_(c, 0, orank);
    kiln_dtype t = move_dtype(c);
    for (int i = 0; i < xrank; i++) xd[i] = rint_(c, 0, 1) ? 1 : out[orank - xrank + i];
    for (int i = 0; i < orank; i++) {
        shape[i] = out[i];
        /* a 1 in the shape keeps the input's dim (broadcasting both ways) */
        int xi = i - (orank - xrank);
        if (xi >= 0 && xd[xi] == out[i] && rint_(c, 0, 2) == 0) shape[i] = 1;
    }
    tc_input(c, "x", t, xrank, xd, G_NORMAL);
    tc_ints(c, "shape", orank, shape);
    tc_node(c, "Expand", "x,shape", "y");
    tc_out(c, "y");
}

static void b_tile(tc *c)
{
    int64_t dims[IR_MAX_RANK], reps[IR_MAX_RANK];
    int rank = rshape(c, 1, 4, c->variant == 3 ? 30 : 5, dims);
    kiln_dtype t = move_dtype(c);
    char note[64] = "repeats=";
    for (int i = 0; i < rank; i++) {
        reps[i] = rint_(c, 1, 3);
        appendf(note, sizeof(note), "%lld", (long long)reps[i]);
    }
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    tc_ints(c, "repeats", rank, reps);
    tc_node(c, "Tile", "x,repeats", "y");
    tc_note(c, "%s", note);
    tc_out(c, "y");
}

/* Pad in every mode, with negative pads (crops), a constant value, and
 * (opset 18) an axes input. */
static void b_pad(tc *c)
{
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    int64_t dims[IR_MAX_RANK], pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    const char *mode = modes[(c->variant + seed) % 4]; /* every mode once per run */
    bool refl = strcmp(mode, "reflect") == 0;
    kiln_dtype t = move_dtype(c);
    int na = rank;
    bool with_axes = c->variant == 3;
    if (with_axes) {
        na = (int)rint_(c, 1, rank);
        for (int i = 0; i < na; i++) axes[i] = i + (rank - na); /* the last na axes */
        if (rint_(c, 0, 1)) axes[0] -= rank;
    }
    char note[256];
    snprintf(note, sizeof(note), "mode=%s pads=", mode);
    for (int i = 0; i < na; i++) {
        int ax = with_axes ? norm((int)axes[i], rank) : i;
        int64_t d = dims[ax];
        int64_t lo = rint_(c, d > 2 ? -1 : 0, refl ? KILN_MIN(3, d - 1 - (d > 2)) : 3);
        int64_t hi = rint_(c, d > 2 && lo >= 0 ? -1 : 0, refl ? KILN_MIN(3, d - 1 - (lo < 0)) : 3);
        if (refl) { /* reflect needs the pads smaller than what is kept */
            int64_t kept = d - (lo < 0 ? -lo : 0) - (hi < 0 ? -hi : 0);
            if (lo >= kept) lo = kept - 1;
            if (hi >= kept) hi = kept - 1;
        }
        pads[i] = lo;
        pads[na + i] = hi;
    }
    for (int i = 0; i < 2 * na; i++)
        appendf(note, sizeof(note), "%s%lld", i ? "," : "", (long long)pads[i]);
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    tc_ints(c, "pads", 2 * na, pads);
    const char *cv = "";
    if (strcmp(mode, "constant") == 0 && c->variant != 0 && t != KILN_BOOL) {
        cv = "cv";
        tc_scalar(c, "cv", t, 3.0);
    }
    if (with_axes) tc_ints(c, "axes", na, axes);
    Onnx__NodeProto *n = tc_node(c, "Pad", tc_str(c, "x,pads%s%s%s", with_axes || cv[0] ? "," : "", cv,
                                                  with_axes ? ",axes" : ""),
                                 "y");
    if (strcmp(mode, "constant") != 0 || rint_(c, 0, 1)) as(c, n, "mode", mode);
    tc_note(c, "%s%s", note, cv[0] ? " value=3" : "");
    tc_out(c, "y");
}

/* Reshape-likes. As the only node their output is a graph output: a copy. */
static void b_reshape(tc *c)
{
    int64_t dims[IR_MAX_RANK], shape[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    kiln_dtype t = move_dtype(c);
    /* merge neighbouring dims, maybe spell one as -1 and a kept one as 0 */
    int k = 0;
    for (int i = 0; i < rank; i++) {
        if (k > 0 && rint_(c, 0, 1)) shape[k - 1] *= dims[i];
        else shape[k++] = dims[i];
    }
    if (rint_(c, 0, 1)) shape[rint_(c, 0, k - 1)] = -1;
    else if (shape[0] == dims[0] && rint_(c, 0, 1)) shape[0] = 0;
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    tc_ints(c, "shape", k, shape);
    tc_node(c, "Reshape", "x,shape", "y");
    tc_out(c, "y");
}

static void b_flatten(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    kiln_dtype t = move_dtype(c);
    int axis = (int)rint_(c, -rank, rank);
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    ai(c, tc_node(c, "Flatten", "x", "y"), "axis", axis);
    tc_note(c, "axis=%d", axis);
    tc_out(c, "y");
}

static void b_squeeze(tc *c)
{
    int64_t dims[IR_MAX_RANK], axes[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 5, dims);
    kiln_dtype t = move_dtype(c);
    int na = 0;
    for (int i = 0; i < rank; i++) {
        if (rint_(c, 0, 2) == 0) dims[i] = 1;
        if (dims[i] == 1 && rint_(c, 0, 1)) axes[na++] = rint_(c, 0, 1) ? i - rank : i;
    }
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    if (na) tc_ints(c, "axes", na, axes);
    tc_node(c, "Squeeze", na ? "x,axes" : "x", "y");
    tc_note(c, "axes=%d given", na);
    tc_out(c, "y");
}

static void b_unsqueeze(tc *c)
{
    int64_t dims[IR_MAX_RANK], axes[IR_MAX_RANK];
    int rank = rshape_move(c, 0, 4, dims);
    kiln_dtype t = move_dtype(c);
    int na = (int)rint_(c, 1, 2), out_rank = rank + na;
    bool used[IR_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int ax;
        do ax = (int)rint_(c, 0, out_rank - 1);
        while (used[ax]);
        used[ax] = true;
        axes[i] = rint_(c, 0, 1) ? ax - out_rank : ax;
    }
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    tc_ints(c, "axes", na, axes);
    tc_node(c, "Unsqueeze", "x,axes", "y");
    tc_out(c, "y");
}

static void b_identity(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_move(c, 0, 4, dims);
    tc_input(c, "x", move_dtype(c), rank, dims, G_NORMAL);
    tc_node(c, "Identity", "x", "y");
    tc_out(c, "y");
}

/* Inference-mode Dropout: a copy, and an all-true mask when asked for. */
static void b_dropout(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    bool ratio = c->variant & 1, mask = c->variant >= 2;
    if (ratio) tc_scalar(c, "ratio", KILN_F32, 0.3);
    tc_node(c, "Dropout", ratio ? "x,ratio" : "x", mask ? "y,mask" : "y");
    tc_out(c, "y");
    if (mask) tc_out(c, "mask");
}

/* Reshape-likes between compiled groups: aliases with no code of their own. */
static void b_alias_chain(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_move(c, 2, 4, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_node(c, "Relu", "x", "r");
    tc_ints(c, "shape", 1, (int64_t[]){-1});
    tc_node(c, "Reshape", "r,shape", "flat");
    tc_node(c, "Sigmoid", "flat", "s");
    tc_ints(c, "ax", 1, (int64_t[]){0});
    tc_node(c, "Unsqueeze", "s,ax", "u");
    tc_node(c, "Flatten", "u", "f");
    tc_node(c, "Identity", "f", "id");
    tc_node(c, "Squeeze", "id,ax", "sq");
    tc_node(c, "Neg", "sq", "y");
    tc_out(c, "y");
    tc_out(c, "flat"); /* an alias that is also a graph output */
}

static void b_depth_to_space(tc *c)
{
    int64_t b = rint_(c, 1, 3), N = rdim(c, 1, 2), C = rdim(c, 1, c->variant == 3 ? 8 : 3);
    int64_t H = rdim(c, 1, c->variant == 3 ? 30 : 6), W = rdim(c, 1, c->variant == 3 ? 30 : 6);
    kiln_dtype t = move_dtype(c);
    const char *mode = c->variant & 1 ? "CRD" : "DCR";
    tc_input(c, "x", t, 4, (int64_t[]){N, C * b * b, H, W}, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "DepthToSpace", "x", "y");
    ai(c, n, "blocksize", b);
    if (c->variant != 0) as(c, n, "mode", mode);
    tc_note(c, "blocksize=%lld mode=%s", (long long)b, mode);
    tc_out(c, "y");
}

static void b_space_to_depth(tc *c)
{
    int64_t b = rint_(c, 1, 3), N = rdim(c, 1, 2), C = rdim(c, 1, c->variant == 3 ? 8 : 3);
    int64_t H = rdim(c, 1, c->variant == 3 ? 30 : 6), W = rdim(c, 1, c->variant == 3 ? 30 : 6);
    kiln_dtype t = move_dtype(c);
    tc_input(c, "x", t, 4, (int64_t[]){N, C, H * b, W * b}, G_NORMAL);
    ai(c, tc_node(c, "SpaceToDepth", "x", "y"), "blocksize", b);
    tc_note(c, "blocksize=%lld", (long long)b);
    tc_out(c, "y");
}

/* ---- reductions ------------------------------------------------------------------------------- */

/* Reduce with random axes (as an attribute, or as input 1 for ReduceSum-13
 * and every Reduce from opset 18), keepdims, noop_with_empty_axes. */
static void b_reduce(tc *c)
{
    int64_t dims[IR_MAX_RANK], axes[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    kiln_dtype t = c->variant & 1 ? KILN_F64 : KILN_F32;
    const char *op = c->cs->op;
    gen g = !strcmp(op, "ReduceProd") ? G_NEAR1 : !strcmp(op, "ReduceLogSum") ? G_POS : G_NORMAL;
    if (c->variant == 1) g = G_SPECIAL;
    tc_input(c, "x", t, rank, dims, g);
    int na = 0;
    for (int i = 0; i < rank; i++)
        if (rint_(c, 0, 1)) axes[na++] = rint_(c, 0, 1) ? i - rank : i;
    if (c->variant == 2) na = 0; /* every axis, or with noop_with_empty_axes none */
    int opset = c->cs->opset ? c->cs->opset : 17;
    bool axes_input = opset >= 18 || (!strcmp(op, "ReduceSum") && opset >= 13);
    int keep = (int)rint_(c, 0, 1);
    if (na && axes_input) tc_ints(c, "axes", na, axes);
    Onnx__NodeProto *n = tc_node(c, op, na && axes_input ? "x,axes" : "x", "y");
    if (na && !axes_input) ais(c, n, "axes", na, axes);
    if (keep == 0 || rint_(c, 0, 1)) ai(c, n, "keepdims", keep);
    int noop = axes_input && na == 0 && rint_(c, 0, 1);
    if (noop) ai(c, n, "noop_with_empty_axes", 1);
    char note[64] = "axes=";
    for (int i = 0; i < na; i++)
        appendf(note, sizeof(note), "%s%lld", i ? "," : "", (long long)axes[i]);
    tc_note(c, "%s%s keepdims=%d noop=%d %s", note, na ? "" : "(none)", keep, noop, kiln_dtype_name(t));
    tc_out(c, "y");
}

static void b_argreduce(tc *c)
{
    static const kiln_dtype ts[] = {KILN_I32, KILN_I64, KILN_F32, KILN_U8};
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_move(c, 1, 4, dims);
    kiln_dtype t = ts[c->variant % 4];
    tc_input(c, "x", t, rank, dims, c->variant == 2 ? G_SPECIAL : G_SMALL); /* ties: select_last_index matters */
    int axis = rand_axis(c, rank), keep = (int)rint_(c, 0, 1), last = (int)rint_(c, 0, 1);
    Onnx__NodeProto *n = tc_node(c, c->cs->op, "x", "y");
    ai(c, n, "axis", axis);
    if (!keep || rint_(c, 0, 1)) ai(c, n, "keepdims", keep);
    if (last || rint_(c, 0, 1)) ai(c, n, "select_last_index", last);
    tc_note(c, "axis=%d keepdims=%d select_last_index=%d %s", axis, keep, last, kiln_dtype_name(t));
    tc_out(c, "y");
}

/* ---- fallback segments --------------------------------------------------------------------- */

/* Ops the target leaves to the interpreter, with static output shapes:
 * these test the segment bindings (graph inputs and outputs, arena values,
 * constants carried in the segment). */

static void nchw(tc *c, int64_t *d, int64_t maxc, int64_t maxhw)
{
    d[0] = rdim(c, 1, 2);
    d[1] = rdim(c, 1, maxc);
    d[2] = rdim(c, 1, maxhw);
    d[3] = rdim(c, 1, maxhw);
}

static void b_resize(tc *c)
{
    static const char *const modes[] = {"nearest", "linear", "cubic", "nearest"};
    static const char *const ctms[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"};
    int64_t d[4];
    nchw(c, d, 3, 7);
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    Onnx__NodeProto *n;
    if (c->variant & 1) {
        float sc[4] = {1, 1, (float)rint_(c, 1, 3), 0.5f * (float)rint_(c, 2, 5)};
        ir_tensor *s = tc_const(c, "scales", KILN_F32, 1, (int64_t[]){4}, G_NORMAL);
        memcpy(s->data, sc, sizeof(sc));
        n = tc_node(c, "Resize", "x,,scales", "y");
    } else {
        tc_ints(c, "sizes", 4, (int64_t[]){d[0], d[1], rint_(c, 1, 12), rint_(c, 1, 12)});
        n = tc_node(c, "Resize", "x,,,sizes", "y");
    }
    as(c, n, "mode", modes[c->variant]);
    as(c, n, "coordinate_transformation_mode", ctms[c->variant]);
    tc_note(c, "mode=%s ctm=%s", modes[c->variant], ctms[c->variant]);
    tc_out(c, "y");
}

static void b_lstm(tc *c)
{
    int64_t T = rdim(c, 1, 5), B = rdim(c, 1, 3), I = rdim(c, 1, 6), H = rdim(c, 1, 5);
    int dirs = c->variant == 1 ? 2 : 1;
    tc_input(c, "x", KILN_F32, 3, (int64_t[]){T, B, I}, G_NORMAL);
    tc_const(c, "W", KILN_F32, 3, (int64_t[]){dirs, 4 * H, I}, G_UNIT);
    tc_const(c, "R", KILN_F32, 3, (int64_t[]){dirs, 4 * H, H}, G_UNIT);
    tc_const(c, "B", KILN_F32, 2, (int64_t[]){dirs, 8 * H}, G_UNIT);
    Onnx__NodeProto *n = tc_node(c, "LSTM", "x,W,R,B", "Y,Y_h,Y_c");
    ai(c, n, "hidden_size", H);
    if (dirs == 2) as(c, n, "direction", "bidirectional");
    tc_out(c, "Y");
    tc_out(c, "Y_h");
    tc_out(c, "Y_c");
}

static void b_gru(tc *c)
{
    int64_t T = rdim(c, 1, 5), B = rdim(c, 1, 3), I = rdim(c, 1, 6), H = rdim(c, 1, 5);
    tc_input(c, "x", KILN_F32, 3, (int64_t[]){T, B, I}, G_NORMAL);
    tc_const(c, "W", KILN_F32, 3, (int64_t[]){1, 3 * H, I}, G_UNIT);
    tc_const(c, "R", KILN_F32, 3, (int64_t[]){1, 3 * H, H}, G_UNIT);
    tc_input(c, "B", KILN_F32, 2, (int64_t[]){1, 6 * H}, G_UNIT);
    Onnx__NodeProto *n = tc_node(c, "GRU", "x,W,R,B", "Y,Y_h");
    ai(c, n, "hidden_size", H);
    ai(c, n, "linear_before_reset", c->variant & 1);
    tc_out(c, "Y_h");
}

static void b_einsum(tc *c)
{
    int64_t b = rdim(c, 1, 3), i = rdim(c, 1, 6), j = rdim(c, 1, 6), k = rdim(c, 1, 6);
    tc_input(c, "a", KILN_F32, 3, (int64_t[]){b, i, j}, G_NORMAL);
    if (c->variant & 1) {
        tc_input(c, "b", KILN_F32, 3, (int64_t[]){b, j, k}, G_NORMAL);
        as(c, tc_node(c, "Einsum", "a,b", "y"), "equation", "bij,bjk->bik");
    } else {
        as(c, tc_node(c, "Einsum", "a", "y"), "equation", "bij->jb");
    }
    tc_out(c, "y");
}

static void b_topk(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape(c, 1, 3, 7, dims);
    int axis = rand_axis(c, rank);
    int64_t k = rint_(c, 1, dims[norm(axis, rank)]);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_ints(c, "k", 1, &k);
    Onnx__NodeProto *n = tc_node(c, "TopK", "x,k", "v,i");
    ai(c, n, "axis", axis);
    ai(c, n, "largest", c->variant != 1);
    tc_note(c, "axis=%d k=%lld", axis, (long long)k);
    tc_out(c, "v");
    tc_out(c, "i");
}

static void b_cumsum(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape(c, 1, 4, 7, dims);
    int axis = rand_axis(c, rank);
    tc_input(c, "x", c->variant == 2 ? KILN_I64 : KILN_F32, rank, dims, G_NORMAL);
    tc_ints(c, "axis", -1, (int64_t[]){axis});
    Onnx__NodeProto *n = tc_node(c, "CumSum", "x,axis", "y");
    ai(c, n, "exclusive", c->variant & 1);
    ai(c, n, "reverse", c->variant >= 2);
    tc_out(c, "y");
}

static void b_reduce_lse(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape(c, 1, 4, 7, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_EXP);
    ais(c, tc_node(c, "ReduceLogSumExp", "x", "y"), "axes", 1, (int64_t[]){rand_axis(c, rank)});
    tc_out(c, "y");
}

static void b_conv_transpose(tc *c)
{
    int64_t d[4];
    nchw(c, d, 4, 6);
    int64_t K = rdim(c, 1, 4), R = rint_(c, 1, 3), s = rint_(c, 1, 2);
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    tc_const(c, "w", KILN_F32, 4, (int64_t[]){d[1], K, R, R}, G_NORMAL);
    tc_const(c, "b", KILN_F32, 1, &K, G_NORMAL);
    Onnx__NodeProto *n = tc_node(c, "ConvTranspose", "x,w,b", "y");
    ais(c, n, "strides", 2, (int64_t[]){s, s});
    if (s > 1 && c->variant & 1) ais(c, n, "output_padding", 2, (int64_t[]){1, 0});
    tc_out(c, "y");
}

static void b_instance_norm(tc *c)
{
    int64_t d[4];
    nchw(c, d, 5, 7);
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    tc_const(c, "s", KILN_F32, 1, d + 1, G_NORMAL);
    tc_const(c, "b", KILN_F32, 1, d + 1, G_NORMAL);
    af(c, tc_node(c, "InstanceNormalization", "x,s,b", "y"), "epsilon", 1e-4);
    tc_out(c, "y");
}

static void b_hardmax(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape(c, 1, 4, 7, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    ai(c, tc_node(c, "Hardmax", "x", "y"), "axis", rand_axis(c, rank));
    tc_out(c, "y");
}

static void b_grid_sample(tc *c)
{
    static const char *const modes[] = {"bilinear", "nearest", "bicubic", "bilinear"};
    static const char *const pm[] = {"zeros", "border", "reflection", "zeros"};
    int64_t d[4];
    nchw(c, d, 3, 6);
    int64_t Ho = rdim(c, 1, 5), Wo = rdim(c, 1, 5);
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    ir_tensor *g = tc_input(c, "grid", KILN_F32, 4, (int64_t[]){d[0], Ho, Wo, 2}, G_UNIT);
    for (int64_t i = 0; i < ir_numel(g); i++) ir_set_f64(g, i, ir_get_f64(g, i) * 1.1);
    Onnx__NodeProto *n = tc_node(c, "GridSample", "x,grid", "y");
    as(c, n, "mode", modes[c->variant]);
    as(c, n, "padding_mode", pm[c->variant]);
    ai(c, n, "align_corners", c->variant & 1);
    tc_out(c, "y");
}

/* f16 and bf16 elementwise ops: the target leaves them to the
 * interpreter, so 2-byte values cross the segment bindings. */
static void b_half_ew(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape_ew(c, dims);
    kiln_dtype t = c->variant & 1 ? KILN_BF16 : KILN_F16;
    tc_input(c, "x", t, rank, dims, G_NORMAL);
    tc_input(c, "y", t, rank, dims, G_NORMAL);
    tc_node(c, "Add", "x,y", "s");
    tc_node(c, "Relu", "s", "r");
    ai(c, tc_node(c, "Cast", "r", "f"), "to", KILN_F32);
    tc_node(c, "Sigmoid", "f", "out");
    tc_out(c, "out");
    tc_out(c, "r");
    tc_note(c, "%s", kiln_dtype_name(t));
}

static void b_unary_fb(tc *c)
{
    int64_t d[4];
    nchw(c, d, 4, 6);
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    tc_node(c, c->cs->op, "x", "y");
    tc_out(c, "y");
}

static void b_gather_elements(tc *c)
{
    int64_t dims[IR_MAX_RANK], id[IR_MAX_RANK];
    int rank = rshape(c, 1, 3, 6, dims);
    int axis = rand_axis(c, rank), a = norm(axis, rank);
    for (int i = 0; i < rank; i++) id[i] = i == a ? rdim(c, 1, 5) : rint_(c, 1, dims[i]);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    ir_tensor *ind = tc_input(c, "i", KILN_I64, rank, id, G_NORMAL);
    for (int64_t j = 0; j < ir_numel(ind); j++) ir_set_i64(ind, j, rint_(c, -dims[a], dims[a] - 1));
    ai(c, tc_node(c, "GatherElements", "x,i", "y"), "axis", axis);
    tc_out(c, "y");
}

static void b_scatter_nd(tc *c)
{
    int64_t a = rint_(c, 2, 6), b = rdim(c, 1, 4);
    int64_t n_up = rint_(c, 1, a);
    tc_input(c, "x", KILN_F32, 2, (int64_t[]){a, b}, G_NORMAL);
    ir_tensor *ind = tc_const(c, "i", KILN_I64, 2, (int64_t[]){n_up, 1}, G_NORMAL);
    for (int64_t j = 0; j < n_up; j++) ir_set_i64(ind, j, j); /* distinct rows */
    tc_input(c, "u", KILN_F32, 2, (int64_t[]){n_up, b}, G_NORMAL);
    tc_node(c, "ScatterND", "x,i,u", "y");
    tc_out(c, "y");
}

static void b_batch_norm(tc *c)
{
    int64_t d[4];
    nchw(c, d, 5, 6);
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    tc_const(c, "s", KILN_F32, 1, d + 1, G_NORMAL);
    tc_const(c, "b", KILN_F32, 1, d + 1, G_NORMAL);
    tc_const(c, "m", KILN_F32, 1, d + 1, G_NORMAL);
    tc_const(c, "v", KILN_F32, 1, d + 1, G_POS);
    tc_node(c, "BatchNormalization", "x,s,b,m,v", "y");
    tc_out(c, "y");
}

static void b_lrn(tc *c)
{
    int64_t d[4];
    nchw(c, d, 6, 5);
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    ai(c, tc_node(c, "LRN", "x", "y"), "size", 2 * rint_(c, 0, 2) + 1);
    tc_out(c, "y");
}

static void b_trilu(tc *c)
{
    int64_t d[3] = {rdim(c, 1, 3), rdim(c, 1, 7), rdim(c, 1, 7)};
    tc_input(c, "x", KILN_F32, 3, d, G_NORMAL);
    tc_ints(c, "k", -1, (int64_t[]){rint_(c, -2, 2)});
    ai(c, tc_node(c, "Trilu", "x,k", "y"), "upper", c->variant & 1);
    tc_out(c, "y");
}

/* Compiled -> fallback -> compiled: segment values in the arena. */
static void b_mixed_chain(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = c->variant == 3 ? 2 : rshape(c, 1, 4, 7, dims);
    if (c->variant == 3) {
        dims[0] = rint_(c, 30, 60);
        dims[1] = rint_(c, 200, 400);
    }
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_node(c, "Relu", "x", "r");
    ai(c, tc_node(c, "Hardmax", "r", "h"), "axis", -1);
    tc_node(c, "Mul", "h,x", "m");
    tc_node(c, "Sigmoid", "m", "y");
    tc_out(c, "y");
}

/* Conv -> TopK along channels: the values go on to a compiled Relu, the
 * indices straight to a graph output from the segment. */
static bool stores_16bit(void);

/* Under fp16 or bf16 the conv's output is rounded before TopK, so values
 * that differ in float32 may tie: the indices are then compared only in
 * float32, the values always. */
static void b_mixed_topk(tc *c)
{
    conv_geo g;
    conv_draw(c, 0, &g);
    conv_inputs(c, &g, true);
    conv_node(c, &g, "x", "", "cv");
    int64_t k = rint_(c, 1, g.K);
    tc_ints(c, "k", 1, &k);
    ai(c, tc_node(c, "TopK", "cv,k", "v,i"), "axis", 1);
    tc_node(c, "Relu", "v", "y");
    tc_out(c, "y");
    if (!stores_16bit()) tc_out(c, "i");
}

/* A segment reading a graph input and a constant that a compiled group
 * also reads (MatMul with a 1-D B falls back), two fallback nodes in one
 * segment, its output both a graph output and read by compiled code through
 * an alias. */
static void b_mixed_io(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape(c, 2, 4, 7, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_const(c, "k", KILN_F32, 1, dims + rank - 1, G_NORMAL);
    tc_node(c, "Add", "x,k", "a");
    tc_node(c, "MatMul", "x,k", "mm");
    ai(c, tc_node(c, "Hardmax", "mm", "hm"), "axis", -1);
    tc_ints(c, "ax", 1, (int64_t[]){-1});
    tc_node(c, "Unsqueeze", "hm,ax", "u");
    tc_node(c, "Add", "a,u", "y");
    tc_out(c, "y");
    tc_out(c, "hm");
}

/* ---- large shapes: across the kernels' cache blocks and tile limits --------------------- */

/* K beyond one KC block (256), M beyond one 96-row tile, N beyond 512. */
static void b_matmul_large(tc *c)
{
    int64_t M = rint_(c, 97, 130), K = rint_(c, 257, 600), N = c->variant ? rint_(c, 513, 530) : rint_(c, 20, 40);
    tc_input(c, "a", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    if (c->variant) tc_const(c, "b", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
    else tc_input(c, "b", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
    tc_node(c, "MatMul", "a,b", "y");
    tc_out(c, "y");
}

/* Three products of one A side by side, as BERT b16's query, key and
 * value (1800 to 2048 rows, 768 columns, K 64 to 128): in a persistent
 * kernel of 384-thread blocks (the case takes mono:384x1 under a mono
 * schedule) sm_90 builds them as 192 x 192 TMA tiles of three warpgroups
 * in fp16 and bf16; a bias on odd variants. */
static void b_matmul_three_warpgroups(tc *c)
{
    int64_t M = rint_(c, 1800, 2048), K = 16 * rint_(c, 4, 8), N = 768;
    tc_input(c, "x", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    tc_node(c, "Tanh", "x", "h");
    for (int i = 0; i < 3; i++) {
        const char *w = tc_str(c, "w%d", i), *y = tc_str(c, "y%d", i);
        tc_const(c, w, KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
        if (c->variant & 1) {
            const char *b = tc_str(c, "b%d", i), *t = tc_str(c, "t%d", i);
            tc_const(c, b, KILN_F32, 1, (int64_t[]){N}, G_NORMAL);
            tc_node(c, "MatMul", tc_str(c, "h,%s", w), t);
            tc_node(c, "Add", tc_str(c, "%s,%s", t, b), y);
        } else {
            tc_node(c, "MatMul", tc_str(c, "h,%s", w), y);
        }
        tc_out(c, y);
    }
    c->mono_config = "384x1";
}

/* u = Tanh(x) w + b, x [M, K] an input, w and b constants: a product of
 * BERT's shapes whose A is computed (stored in 16 bits when the precision
 * is) and whose epilogue adds a bias. */
static void tanh_product_bias(tc *c, int64_t M, int64_t K, int64_t N)
{
    tc_input(c, "x", KILN_F32, 2, (int64_t[]){M, K}, G_NORMAL);
    tc_const(c, "w", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
    tc_const(c, "b", KILN_F32, 1, (int64_t[]){N}, G_NORMAL);
    tc_node(c, "Tanh", "x", "h");
    tc_node(c, "MatMul", "h,w", "t");
    tc_node(c, "Add", "t,b", "u");
}

/* A product with a bias and a residual, as BERT b16's out-projection
 * and FFN2 (1800 to 2048 rows, 768 columns, K 64 to 512): in 384-thread
 * blocks (mono:384x1 under a mono schedule) sm_90 builds it in 16 bits as
 * the producer-warp 128 x 96 TMA tile on 288 of the threads, the other 96
 * leaving the rTask early; K past the tile's 4 stages on odd variants. */
static void b_matmul_producer_warp_narrow(tc *c)
{
    int64_t M = rint_(c, 1800, 2048), K = 16 * (c->variant ? rint_(c, 20, 32) : rint_(c, 4, 12)), N = 768;
    tanh_product_bias(c, M, K, N);
    tc_input(c, "r", KILN_F32, 2, (int64_t[]){M, N}, G_NORMAL);
    tc_node(c, "Add", "u,r", "y");
    tc_out(c, "y");
    c->mono_config = "384x1";
}

/* A product with a bias and an activation, as BERT b16's FFN1 (1800 to
 * 1900 rows, 2936 to 3064 columns; K 64 or 128, 256 on odd variants: past
 * the three stages): sm_90 builds it in 16 bits alone in a kernel (waves,
 * kernels; not in a persistent one) as 192 x 256 TMA tiles of three warpgroups in
 * three stages, whose epilogue stages the accumulators in two column
 * halves (CLI test cuda_wide_tile checks the choice); the last row and
 * column of tiles are partial, the second half of the last column partial
 * or empty. */
static void b_matmul_wide_tile(tc *c)
{
    int64_t M = rint_(c, 1800, 1900), K = 64 * (c->variant & 1 ? 4 : rint_(c, 1, 2)), N = 3072 - 8 * rint_(c, 1, 17);
    tanh_product_bias(c, M, K, N);
    tc_node(c, "Relu", "u", "y");
    tc_out(c, "y");
}

/* A Transpose that only moves dims of extent 1 (ViT's [1, S, E] -> [S, 1,
 * E]) between computed values: it shares its input's memory, no copy.
 * Variant 3 also moves a dim of extent > 1, which must copy. */
static void b_transpose_unit_dims(tc *c)
{
    int64_t S = rint_(c, 2, 40), E = rint_(c, 2, 33);
    int64_t d[4] = {1, S, 1, E};
    tc_input(c, "x", KILN_F32, 4, d, G_NORMAL);
    tc_node(c, "Relu", "x", "r");
    static const int64_t perms[4][4] = {{1, 0, 2, 3}, {1, 2, 0, 3}, {0, 2, 1, 3}, {3, 1, 0, 2}};
    ais(c, tc_node(c, "Transpose", "r", "t"), "perm", 4, perms[c->variant & 3]);
    tc_node(c, "Sigmoid", "t", "y");
    tc_note(c, "perm %lld%lld%lld%lld", (long long)perms[c->variant & 3][0], (long long)perms[c->variant & 3][1],
            (long long)perms[c->variant & 3][2], (long long)perms[c->variant & 3][3]);
    tc_out(c, "y");
    c->want_moves = c->variant == 3 ? 1 : 0;
}

/* Contractions whose operands are computed (in the arena) or constants (in
 * the weights): on sm_90 the tensor-memory-accelerator template takes them
 * (model inputs, whose addresses change per run, are not). Extents that
 * are multiples of 8 but not of the 64-element boxes, so the copies' zero
 * fill at the edges counts. Variant 0: MatMul(relu(x), W), B n-major;
 * 1: Gemm transB=1, B k-major; 2: Gemm transA=1, A m-major; 3: MatMul
 * of two computed values, longer K. */
static void b_matmul_tma(tc *c)
{
    int64_t M = rint_(c, 1, 200), K = 8 * rint_(c, 1, c->variant == 3 ? 80 : 30), N = 8 * rint_(c, 1, 40);
    bool ta = c->variant == 2, tb = c->variant == 1;
    tc_input(c, "x", KILN_F32, 2, ta ? (int64_t[]){K, M} : (int64_t[]){M, K}, G_NORMAL);
    tc_node(c, "Relu", "x", "a");
    if (c->variant == 3) {
        tc_input(c, "w", KILN_F32, 2, (int64_t[]){K, N}, G_NORMAL);
        tc_node(c, "Sigmoid", "w", "b");
    } else {
        tc_const(c, "b", KILN_F32, 2, tb ? (int64_t[]){N, K} : (int64_t[]){K, N}, G_NORMAL);
    }
    if (c->variant == 1 || c->variant == 2) {
        Onnx__NodeProto *n = tc_node(c, "Gemm", "a,b", "y");
        if (ta) ai(c, n, "transA", 1);
        if (tb) ai(c, n, "transB", 1);
    } else {
        tc_node(c, "MatMul", "a,b", "y");
    }
    tc_note(c, "%s", (const char *[]){"B n-major", "Gemm transB", "Gemm transA", "both computed"}[c->variant & 3]);
    tc_out(c, "y");
}

/* C*R*S beyond 256, K beyond one 132-channel tile, more than 256 pixels. */
static void b_conv_large(tc *c)
{
    conv_geo g = {.N = 1, .C = rint_(c, 30, 48), .H = rint_(c, 17, 24), .W = rint_(c, 17, 24),
                  .K = rint_(c, 133, 150), .R = 3, .S = 3, .group = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
                  .pads = {1, 1, 1, 1}};
    if (c->variant) g.K = rint_(c, 7, 20), g.C = rint_(c, 60, 90); /* 1 tile of K, a long reduction */
    g.OH = g.H;
    g.OW = g.W;
    conv_inputs(c, &g, true);
    tc_const(c, "b", KILN_F32, 1, &g.K, G_NORMAL);
    conv_node(c, &g, "x", "b", "y");
    tc_out(c, "y");
}

/* ---- empty tensors ------------------------------------------------------------------------------- */

/* A dim of 0 somewhere: nothing to compute, or (MatMul with K = 0) zeros. */
static void b_empty(tc *c)
{
    switch (c->variant) {
    case 0: /* elementwise with broadcasting */
        tc_input(c, "x", KILN_F32, 3, (int64_t[]){2, 0, 3}, G_NORMAL);
        tc_input(c, "y", KILN_F32, 1, (int64_t[]){3}, G_NORMAL);
        tc_node(c, "Add", "x,y", "s");
        tc_node(c, "Relu", "s", "out");
        tc_out(c, "out");
        break;
    case 1: /* Concat with an empty part, Transpose of an empty tensor */
        tc_input(c, "x", KILN_F32, 2, (int64_t[]){3, 0}, G_NORMAL);
        tc_input(c, "y", KILN_F32, 2, (int64_t[]){3, 4}, G_NORMAL);
        ai(c, tc_node(c, "Concat", "x,y", "cat"), "axis", 1);
        tc_node(c, "Transpose", "x", "xt");
        tc_out(c, "cat");
        tc_out(c, "xt");
        break;
    case 2: /* MatMul and Gemm over K = 0: zeros, and Gemm's bias */
        tc_input(c, "a", KILN_F32, 2, (int64_t[]){5, 0}, G_NORMAL);
        tc_input(c, "b", KILN_F32, 2, (int64_t[]){0, 7}, G_NORMAL);
        tc_const(c, "bias", KILN_F32, 1, (int64_t[]){7}, G_NORMAL);
        tc_node(c, "MatMul", "a,b", "mm");
        tc_node(c, "Gemm", "a,b,bias", "gm");
        tc_out(c, "mm");
        tc_out(c, "gm");
        break;
    default: /* a Reduce over an empty axis and Slice to nothing */
        tc_input(c, "x", KILN_F32, 2, (int64_t[]){0, 4}, G_NORMAL);
        tc_ints(c, "rax", 1, (int64_t[]){0});
        tc_node(c, "ReduceSum", "x,rax", "rs");
        tc_input(c, "z", KILN_F32, 2, (int64_t[]){3, 4}, G_NORMAL);
        tc_ints(c, "st", 1, (int64_t[]){2});
        tc_ints(c, "en", 1, (int64_t[]){2});
        tc_node(c, "Slice", "z,st,en", "sl");
        tc_out(c, "rs");
        tc_out(c, "sl");
        break;
    }
}

/* ---- graph-level cases ---------------------------------------------------------------------------- */

/* Graph outputs that no node writes: an input passed through, an
 * initializer; a Reshape of a graph input feeding a fallback segment. */
static void b_graph_io(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape(c, 2, 4, 6, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_const(c, "w", KILN_F32, 1, dims + rank - 1, G_NORMAL);
    tc_node(c, "Mul", "x,w", "y");
    tc_ints(c, "shape", 2, (int64_t[]){-1, dims[rank - 1]});
    tc_node(c, "Reshape", "x,shape", "x2");
    ai(c, tc_node(c, "Hardmax", "x2", "h"), "axis", c->variant & 1 ? 0 : -1);
    tc_out(c, "y");
    tc_out(c, "x");
    tc_out(c, "w");
    tc_out(c, "h");
}

/* Elementwise groups writing in place of an input that dies there: over an
 * arena value (allowed, with a second output computed from the same
 * input), and over aliases of a graph input and of a graph output (which
 * must not be written). */
static void b_in_place(tc *c)
{
    int64_t a = rdim(c, 1, c->variant == 3 ? 90 : 7), b = rdim(c, 1, c->variant == 3 ? 300 : 9);
    tc_input(c, "x", KILN_F32, 2, (int64_t[]){a, b}, G_NORMAL);
    tc_input(c, "y", KILN_F32, 2, (int64_t[]){a, b}, G_NORMAL);
    tc_const(c, "k", KILN_F32, 1, &a, G_NORMAL);
    tc_ints(c, "shape", 2, (int64_t[]){b, a});
    tc_node(c, "Reshape", "x,shape", "xr");        /* an alias of input x */
    tc_node(c, "Add", "xr,k", "s");               /* dies here: must not be overwritten */
    tc_node(c, "Transpose", "s", "st");
    tc_node(c, "Relu", "y", "r");                 /* a graph output */
    tc_node(c, "Reshape", "r,shape", "rr");       /* an alias of it */
    tc_node(c, "Sigmoid", "rr", "t");             /* must not write over r */
    tc_node(c, "Transpose", "t", "tt2");
    tc_node(c, "Exp", "y", "e");
    tc_node(c, "Transpose", "e", "et");           /* an arena value */
    tc_node(c, "Neg", "et", "n");                 /* may write over et */
    tc_node(c, "Tanh", "et", "th");               /* a second output from et */
    tc_node(c, "Transpose", "n", "nt");
    tc_node(c, "Transpose", "th", "tt");
    tc_node(c, "Add", "nt,tt", "z");
    tc_out(c, "st");
    tc_out(c, "r");
    tc_out(c, "tt2");
    tc_out(c, "z");
}

/* Nodes whose results nobody reads (legal ONNX): a compiled one, a
 * fallback one, and a dead chain feeding a dead node. */
static void b_dead_nodes(tc *c)
{
    int64_t dims[IR_MAX_RANK];
    int rank = rshape(c, 1, 3, 6, dims);
    tc_input(c, "x", KILN_F32, rank, dims, G_NORMAL);
    tc_node(c, "Sigmoid", "x", "y");
    if (c->variant != 1) tc_node(c, "Relu", "x", "dead_relu");
    if (c->variant != 0) ai(c, tc_node(c, "Hardmax", "x", "dead_hardmax"), "axis", -1);
    tc_node(c, "Transpose", "y", "dead_t");
    tc_node(c, "Exp", "dead_t", "dead_e");
    tc_out(c, "y");
}

/* A random program: a chain of compiled and fallback ops on one f32
 * tensor, reading earlier values again (residuals, concatenations), so
 * that groups of every kind meet in the arena plan and the stage barriers. */
typedef struct pv {
    const char *name;
    int rank;
    int64_t dims[IR_MAX_RANK];
} pv;

static int64_t pv_numel(const pv *v) { return ir_dims_numel(v->rank, v->dims); }

static void b_program(tc *c)
{
    pv vals[40];
    int nv = 0;
    vals[0].name = "x";
    vals[0].rank = (int)rint_(c, 2, 4);
    for (int i = 0; i < vals[0].rank; i++) vals[0].dims[i] = rint_(c, 2, 9);
    tc_input(c, "x", KILN_F32, vals[0].rank, vals[0].dims, G_NORMAL);
    nv = 1;
    int steps = (int)rint_(c, 6, 14);
    char note[512] = "";
    for (int step = 0; step < steps && c->mb->graph.n_node < MB_MAX - 3; step++) {
        const pv *v = &vals[rint_(c, 0, 3) ? nv - 1 : rint_(c, 0, nv - 1)];
        pv o = *v;
        o.name = tc_str(c, "v%d", nv);
        int r = v->rank, ax = (int)rint_(c, 0, r - 1);
        int kind = (int)rint_(c, 0, 15);
        const char *opname = "";
        switch (kind) {
        case 0: case 1: {
            static const char *const un[] = {"Relu", "Tanh", "Sigmoid", "Neg", "Abs", "Softsign"};
            opname = un[rint_(c, 0, 5)];
            tc_node(c, opname, v->name, o.name);
            break;
        }
        case 2: case 3: { /* binary with a constant or an earlier value of the same shape */
            static const char *const bin[] = {"Add", "Mul", "Sub", "Max"};
            opname = bin[rint_(c, 0, 3)];
            const char *other = NULL;
            for (int k = nv - 2; k >= 0 && !other; k--)
                if (vals[k].rank == r && !memcmp(vals[k].dims, v->dims, (size_t)r * sizeof(int64_t)) &&
                    vals[k].name != v->name && rint_(c, 0, 1))
                    other = vals[k].name;
            if (!other) {
                int64_t bd[IR_MAX_RANK];
                int br = bcast_shape(c, (int)rint_(c, 0, 2), r, v->dims, bd);
                other = tc_str(c, "k%d", nv);
                tc_const(c, other, KILN_F32, br, bd, G_NORMAL);
            }
            tc_node(c, opname, tc_str(c, "%s,%s", v->name, other), o.name);
            break;
        }
        case 4: { /* Transpose */
            int64_t perm[IR_MAX_RANK];
            for (int i = 0; i < r; i++) perm[i] = i;
            for (int i = r - 1; i > 0; i--) {
                int j = (int)rint_(c, 0, i);
                int64_t t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            for (int i = 0; i < r; i++) o.dims[i] = v->dims[perm[i]];
            opname = "Transpose";
            ais(c, tc_node(c, opname, v->name, o.name), "perm", r, perm);
            break;
        }
        case 5: { /* Slice */
            if (v->dims[ax] < 2) continue;
            int64_t st = rint_(c, 0, v->dims[ax] / 2), step_ = rint_(c, 1, 2);
            o.dims[ax] = (v->dims[ax] - st + step_ - 1) / step_;
            const char *sn = tc_str(c, "s%d", nv), *en = tc_str(c, "e%d", nv), *an = tc_str(c, "a%d", nv),
                       *pn = tc_str(c, "p%d", nv);
            tc_ints(c, sn, 1, &st);
            tc_ints(c, en, 1, (int64_t[]){INT64_MAX});
            tc_ints(c, an, 1, (int64_t[]){ax});
            tc_ints(c, pn, 1, &step_);
            opname = "Slice";
            tc_node(c, opname, tc_str(c, "%s,%s,%s,%s,%s", v->name, sn, en, an, pn), o.name);
            break;
        }
        case 6: { /* Concat with an earlier value that fits, or itself */
            const pv *w = v;
            for (int k = 0; k < nv; k++) {
                bool fits = vals[k].rank == r;
                for (int i = 0; i < r && fits; i++) fits = i == ax || vals[k].dims[i] == v->dims[i];
                if (fits && rint_(c, 0, 1)) w = &vals[k];
            }
            o.dims[ax] = v->dims[ax] + w->dims[ax];
            if (pv_numel(&o) > 40000) continue;
            opname = "Concat";
            ai(c, tc_node(c, opname, tc_str(c, "%s,%s", w->name, v->name), o.name), "axis", ax);
            break;
        }
        case 7: { /* Pad */
            int64_t pads[2 * IR_MAX_RANK] = {0};
            pads[ax] = rint_(c, 0, 2);
            pads[r + ax] = rint_(c, 1, 2);
            o.dims[ax] += pads[ax] + pads[r + ax];
            const char *pn = tc_str(c, "pads%d", nv);
            tc_ints(c, pn, 2 * r, pads);
            opname = "Pad";
            Onnx__NodeProto *n = tc_node(c, opname, tc_str(c, "%s,%s", v->name, pn), o.name);
            as(c, n, "mode", rint_(c, 0, 1) ? "edge" : "constant");
            break;
        }
        case 8: { /* Reduce, keepdims */
            opname = rint_(c, 0, 1) ? "ReduceMean" : "ReduceMax";
            o.dims[ax] = 1;
            ais(c, tc_node(c, opname, v->name, o.name), "axes", 1, (int64_t[]){ax});
            break;
        }
        case 9: opname = "Softmax"; tc_node(c, opname, v->name, o.name); break;
        case 10: { /* MatMul with constant weights, maybe + bias + Relu fused */
            int64_t n = rint_(c, 1, 12);
            const char *wn = tc_str(c, "w%d", nv);
            tc_const(c, wn, KILN_F32, 2, (int64_t[]){v->dims[r - 1], n}, G_UNIT);
            o.dims[r - 1] = n;
            opname = "MatMul";
            tc_node(c, opname, tc_str(c, "%s,%s", v->name, wn), o.name);
            break;
        }
        case 11: { /* Reshape: merge the last two dims (an alias) */
            if (r < 2) continue;
            o.rank = r - 1;
            o.dims[r - 2] = v->dims[r - 2] * v->dims[r - 1];
            int64_t shape[IR_MAX_RANK];
            for (int i = 0; i < o.rank; i++) shape[i] = o.dims[i];
            const char *sn = tc_str(c, "shape%d", nv);
            tc_ints(c, sn, o.rank, shape);
            opname = "Reshape";
            tc_node(c, opname, tc_str(c, "%s,%s", v->name, sn), o.name);
            break;
        }
        case 12: { /* Unsqueeze */
            if (r >= 5) continue;
            int at = (int)rint_(c, 0, r);
            memmove(o.dims + at + 1, v->dims + at, (size_t)(r - at) * sizeof(int64_t));
            o.dims[at] = 1;
            o.rank = r + 1;
            const char *an = tc_str(c, "ax%d", nv);
            tc_ints(c, an, 1, (int64_t[]){at});
            opname = "Unsqueeze";
            tc_node(c, opname, tc_str(c, "%s,%s", v->name, an), o.name);
            break;
        }
        case 13: { /* a fallback op */
            static const char *const fb[] = {"Hardmax", "LpNormalization", "CumSum"};
            opname = fb[rint_(c, 0, 2)];
            if (!strcmp(opname, "CumSum")) {
                const char *an = tc_str(c, "cax%d", nv);
                tc_ints(c, an, -1, (int64_t[]){ax});
                tc_node(c, opname, tc_str(c, "%s,%s", v->name, an), o.name);
            } else {
                ai(c, tc_node(c, opname, v->name, o.name), "axis", ax);
            }
            break;
        }
        case 14: { /* Split in two, then Add (equal halves) or Concat them back swapped */
            if (v->dims[ax] < 2) continue;
            int64_t a = rint_(c, 1, v->dims[ax] - 1);
            const char *h1 = tc_str(c, "h%da", nv), *h2 = tc_str(c, "h%db", nv), *sp = tc_str(c, "sp%d", nv);
            tc_ints(c, sp, 2, (int64_t[]){a, v->dims[ax] - a});
            ai(c, tc_node(c, "Split", tc_str(c, "%s,%s", v->name, sp), tc_str(c, "%s,%s", h1, h2)), "axis", ax);
            if (2 * a == v->dims[ax]) {
                o.dims[ax] = a;
                opname = "Split+Add";
                tc_node(c, "Add", tc_str(c, "%s,%s", h1, h2), o.name);
            } else {
                opname = "Split+Concat";
                ai(c, tc_node(c, "Concat", tc_str(c, "%s,%s", h2, h1), o.name), "axis", ax);
            }
            break;
        }
        default: { /* LayerNormalization on the last axis */
            const char *gn = tc_str(c, "g%d", nv);
            tc_const(c, gn, KILN_F32, 1, &v->dims[r - 1], G_NORMAL);
            opname = "LayerNorm";
            tc_node(c, "LayerNormalization", tc_str(c, "%s,%s", v->name, gn), o.name);
            break;
        }
        }
        appendf(note, sizeof(note), "%s%s", step ? "," : "", opname);
        vals[nv++] = o;
    }
    tc_out(c, vals[nv - 1].name);
    for (int k = 1; k < nv - 1; k++)
        if (rint_(c, 0, 4) == 0) tc_out(c, vals[k].name);
    tc_note(c, "%s", note);
}

/* ---- the case table ------------------------------------------------------------------------ */

#define UN(op, dt, g) {op, b_unary, op, dt, g, 0, EXPECT_C, 0}
#define UN18(op, dt, g) {op, b_unary, op, dt, g, 18, EXPECT_C, 0}
#define BIN(op, dt, g) {op, b_binary, op, dt, g, 0, EXPECT_C, 0}
#define BIN18(op, dt, g) {op, b_binary, op, dt, g, 18, EXPECT_C, 0}
#define CASE(name, fn) {name, fn, "", 0, G_NORMAL, 0, EXPECT_C, 0}
#define CASE_OP(name, fn, op, opset) {name, fn, op, 0, G_NORMAL, opset, EXPECT_C, 0}
#define FB(name, fn, n) {name, fn, "", 0, G_NORMAL, 0, EXPECT_FALLBACK, n}
#define FB_OP(name, fn, op, n) {name, fn, op, 0, G_NORMAL, 0, EXPECT_FALLBACK, n}

static const op_case case_table[] = {
    /* unary elementwise, every dtype the op takes */
    UN("Abs", DT_NUM, G_NORMAL),
    UN("Acos", DT_FLOAT, G_UNIT),
    UN("Acosh", DT_FLOAT, G_GT1),
    UN("Asin", DT_FLOAT, G_UNIT),
    UN("Asinh", DT_FLOAT, G_NORMAL),
    UN("Atan", DT_FLOAT, G_NORMAL),
    UN("Atanh", DT_FLOAT, G_UNIT),
    UN("Ceil", DT_FLOAT, G_WIDE),
    UN("Cos", DT_FLOAT, G_NORMAL),
    UN("Cosh", DT_FLOAT, G_NORMAL),
    UN("Erf", DT_FLOAT, G_NORMAL),
    UN("Exp", DT_FLOAT, G_EXP),
    UN("Floor", DT_FLOAT, G_WIDE),
    UN("Log", DT_FLOAT, G_POS),
    UN("Neg", DT_FLOAT | DT_SINT, G_NORMAL),
    UN("Reciprocal", DT_FLOAT, G_NONZERO),
    UN("Round", DT_FLOAT, G_HALVES),
    UN("Sigmoid", DT_FLOAT, G_EXP),
    UN("Sign", DT_NUM, G_SMALL),
    UN("Sin", DT_FLOAT, G_NORMAL),
    UN("Sinh", DT_FLOAT, G_NORMAL),
    UN("Sqrt", DT_FLOAT, G_POS),
    UN("Tan", DT_FLOAT, G_UNIT),
    UN("Tanh", DT_FLOAT, G_EXP),
    UN("Relu", DT_FLOAT | DT_SINT, G_NORMAL),
    UN("Not", DT_BOOL, G_BOOL),
    UN18("BitwiseNot", DT_I32 | DT_I64 | DT_U8 | DT_I8, G_NORMAL),
    UN("IsInf", DT_FLOAT, G_SPECIAL),
    UN("IsNaN", DT_FLOAT, G_SPECIAL),
    UN("Softplus", DT_FLOAT, G_EXP),
    UN("Softsign", DT_FLOAT, G_EXP),
    UN("Elu", DT_FLOAT, G_NORMAL),
    UN("Selu", DT_FLOAT, G_NORMAL),
    UN("Celu", DT_FLOAT, G_NORMAL),
    UN("LeakyRelu", DT_FLOAT, G_NORMAL),
    UN("HardSigmoid", DT_FLOAT, G_EXP),
    UN("HardSwish", DT_FLOAT, G_EXP),
    UN("ThresholdedRelu", DT_FLOAT, G_NORMAL),
    UN("Shrink", DT_FLOAT, G_NORMAL),
    UN18("Gelu", DT_FLOAT, G_EXP),
    UN18("Mish", DT_FLOAT, G_EXP),
    /* binary elementwise, with broadcasting */
    BIN("Add", DT_NUM, G_NORMAL),
    BIN("Sub", DT_NUM | DT_U32, G_NORMAL),
    BIN("Mul", DT_NUM, G_NORMAL),
    BIN("Div", DT_NUM, G_NORMAL),
    BIN("Pow", DT_FLOAT | DT_I32 | DT_I64, G_NORMAL),
    CASE("Pow/mixed_dtypes", b_pow_mixed),
    BIN("Mod", DT_NUM, G_NORMAL),
    BIN("PRelu", DT_FLOAT | DT_I32 | DT_I64, G_NORMAL),
    BIN("And", DT_BOOL, G_BOOL),
    BIN("Or", DT_BOOL, G_BOOL),
    BIN("Xor", DT_BOOL, G_BOOL),
    BIN("Equal", DT_NUM | DT_BOOL, G_SMALL),
    BIN("Greater", DT_NUM, G_HALVES),
    BIN("GreaterOrEqual", DT_NUM, G_HALVES),
    BIN("Less", DT_NUM, G_HALVES),
    BIN("LessOrEqual", DT_NUM, G_HALVES),
    BIN("BitShift", DT_U8 | DT_U32 | DT_U64 | DT_U16, G_NORMAL),
    BIN18("BitwiseAnd", DT_I32 | DT_I64 | DT_U8, G_NORMAL),
    BIN18("BitwiseOr", DT_I32 | DT_I64 | DT_U8, G_NORMAL),
    BIN18("BitwiseXor", DT_I32 | DT_I64 | DT_U8, G_NORMAL),
    /* variadic, Clip, Where, casts, quantization */
    {"Max", b_variadic, "Max", DT_NUM, G_SMALL, 0, EXPECT_C, 0},
    {"Min", b_variadic, "Min", DT_NUM, G_SMALL, 0, EXPECT_C, 0},
    {"Sum", b_variadic, "Sum", DT_FLOAT, G_NORMAL, 0, EXPECT_C, 0},
    {"Mean", b_variadic, "Mean", DT_FLOAT, G_NORMAL, 0, EXPECT_C, 0},
    {"Clip", b_clip, "Clip", DT_NUM, G_NORMAL, 0, EXPECT_C, 0},
    {"Clip/opset6", b_clip6, "Clip", DT_FLOAT, G_NORMAL, 6, EXPECT_C, 0},
    {"Where", b_where, "Where", DT_FLOAT | DT_I32 | DT_I64 | DT_BOOL | DT_U8, G_NORMAL, 0, EXPECT_C, 0},
    {"Cast/from_f32", b_cast, "Cast", DT_F32, G_NORMAL, 0, EXPECT_C, 0},
    {"Cast/from_f64", b_cast, "Cast", DT_F64, G_NORMAL, 0, EXPECT_C, 0},
    {"Cast/from_i32", b_cast, "Cast", DT_I32, G_NORMAL, 0, EXPECT_C, 0},
    {"Cast/from_i64", b_cast, "Cast", DT_I64, G_NORMAL, 0, EXPECT_C, 0},
    {"Cast/from_bool", b_cast, "Cast", DT_BOOL, G_NORMAL, 0, EXPECT_C, 0},
    {"Cast/from_u8", b_cast, "Cast", DT_U8, G_NORMAL, 0, EXPECT_C, 0},
    {"Cast/from_i8", b_cast, "Cast", DT_I8, G_NORMAL, 0, EXPECT_C, 0},
    {"CastLike", b_castlike, "CastLike", DT_F64 | DT_I32 | DT_BOOL | DT_U8, G_NORMAL, 0, EXPECT_C, 0},
    CASE("QuantizeLinear", b_quant),
    CASE("DequantizeLinear", b_dequant),
    /* elementwise chains */
    CASE("Chain/broadcast_f32", b_chain_bcast),
    CASE("Chain/mixed_dtypes", b_chain_mixed),
    CASE("Chain/two_shapes", b_chain_shapes),
    /* contractions and their epilogues */
    CASE("Conv", b_conv),
    CASE("Conv/depthwise", b_conv_depthwise),
    CASE("Conv/grouped", b_conv_grouped),
    CASE("Conv/long_K", b_conv_long_k),
    CASE("Conv/split_K_branches", b_conv_split_k_branches),
    CASE("Conv/pointwise_product", b_conv_product),
    {"Conv/pointwise_large", b_conv_product_large, "", 0, G_NORMAL, 0, EXPECT_C, 2},
    CASE("Conv/residual_nhwc", b_conv_residual_nhwc),
    {"Conv/im2col_product", b_conv_im2col, "", 0, G_NORMAL, 0, EXPECT_C, 7},
    CASE("Conv/pool_nhwc", b_conv_pool_nhwc),
    FB("Conv/weights_fed", b_conv_w_input, 2),
    CASE("Conv+Add+Relu", b_conv_add_relu),
    CASE("Conv+Add(residual)+act", b_conv_residual),
    CASE("Conv+act", b_conv_act),
    CASE("Conv/chain", b_conv_chain),
    CASE("Conv/nhwc_chain", b_conv_nhwc),
    CASE("Conv/patch_embedding", b_conv_patch),
    CASE("Conv/stem", b_conv_stem),
    CASE("MatMul", b_matmul),
    CASE("MatMul/const_B", b_matmul_const),
    CASE("MatMul/long_K", b_matmul_long_k),
    {"MatMul/deep_split", b_matmul_deep_split, "", 0, G_NORMAL, 0, EXPECT_C, 3},
    FB("MatMul/broadcast_batch_or_1d", b_matmul_bcast, 2),
    CASE("MatMul+Add+Gelu", b_matmul_gelu),
    CASE("MatMul+Add+GELU/erf_epilogue", b_matmul_gelu_erf),
    CASE("Attention/transposed_output", b_attention_transposed),
    CASE("Attention/nan_guard", b_attention_nan_guard),
    CASE("Attention/long_keys", b_attention_long),
    CASE("Attention/query_mask", b_attention_query_mask),
    {"Attention/many_tiles", b_attention_many_tiles, "", 0, G_NORMAL, 0, EXPECT_C, 4},
    {"Attention/sliced_heads", b_attention_sliced, "", 0, G_NORMAL, 0, EXPECT_C, 5},
    CASE("MatMul+scale+residual+act", b_matmul_scale_res),
    CASE("Gemm", b_gemm),
    CASE("Gemm+act", b_gemm_act),
    {"Gemm/one_row", b_gemm_one_row, "", 0, G_NORMAL, 0, EXPECT_C, 4},
    {"Gemm+views+residual", b_gemm_viewed_residual, "", 0, G_NORMAL, 0, EXPECT_C, 3},
    FB("Gemm/full_C_or_beta", b_gemm_full_c, 2),
    {"MatMul+act/special_values", b_epilogue_special, "", 0, G_NORMAL, 0, EXPECT_C, 8},
    {"MatMul/large", b_matmul_large, "", 0, G_NORMAL, 0, EXPECT_C, 2},
    {"MatMul/three_warpgroups", b_matmul_three_warpgroups, "", 0, G_NORMAL, 0, EXPECT_C, 2},
    {"MatMul/producer_warp_narrow", b_matmul_producer_warp_narrow, "", 0, G_NORMAL, 0, EXPECT_C, 2},
    {"MatMul/wide_tile", b_matmul_wide_tile, "", 0, G_NORMAL, 0, EXPECT_C, 2},
    {"MatMul/tma_operands", b_matmul_tma, "", 0, G_NORMAL, 0, EXPECT_C, 4},
    {"Conv/large", b_conv_large, "", 0, G_NORMAL, 0, EXPECT_C, 2},
    /* pooling and row groups */
    CASE("MaxPool", b_maxpool),
    FB("MaxPool/windows_in_padding", b_maxpool_empty, 4),
    CASE("AveragePool", b_avgpool),
    {"Pool/other_forms", b_pool_other, "", 0, G_NORMAL, 0, EXPECT_FALLBACK, 4},
    CASE_OP("Softmax", b_softmax13, "Softmax", 13),
    CASE_OP("LogSoftmax", b_softmax13, "LogSoftmax", 13),
    CASE_OP("Softmax/opset11", b_softmax11, "Softmax", 11),
    CASE_OP("LogSoftmax/opset11", b_softmax11, "LogSoftmax", 11),
    {"Softmax/inner_axis", b_softmax13_inner, "Softmax", 0, G_NORMAL, 13, EXPECT_FALLBACK, 2},
    CASE_OP("Softmax/masked_and_large", b_softmax_masked, "Softmax", 13),
    CASE_OP("LogSoftmax/masked_and_large", b_softmax_masked, "LogSoftmax", 13),
    CASE("LayerNormalization", b_layernorm),
    {"RMSNorm/pattern", b_rms_norm, "", 0, G_NORMAL, 0, EXPECT_C, 4},
    {"LayerNormalization/16bit", b_layernorm_16bit, "", 0, G_NORMAL, 0, EXPECT_C, 4},
    CASE("LayerNormalization/offset_rows", b_layernorm_offset),
    CASE("GlobalAveragePool", b_global_avgpool),
    /* data movement */
    CASE("Transpose", b_transpose),
    CASE("Transpose/unit_dims_alias", b_transpose_unit_dims),
    CASE("Concat", b_concat),
    CASE_OP("Split", b_split, "Split", 13),
    CASE_OP("Split/num_outputs", b_split18, "Split", 18),
    CASE_OP("Split/large_outputs", b_split_large, "Split", 13),
    CASE("Slice", b_slice),
    CASE("Gather", b_gather),
    CASE("Expand", b_expand),
    CASE("Tile", b_tile),
    CASE_OP("Pad", b_pad, "Pad", 18),
    CASE("Reshape", b_reshape),
    CASE("Flatten", b_flatten),
    CASE("Squeeze", b_squeeze),
    CASE("Unsqueeze", b_unsqueeze),
    CASE("Identity", b_identity),
    CASE("Dropout", b_dropout),
    CASE("Reshape/aliases", b_alias_chain),
    CASE("DepthToSpace", b_depth_to_space),
    CASE("SpaceToDepth", b_space_to_depth),
    /* reductions */
    CASE_OP("ReduceSum", b_reduce, "ReduceSum", 13),
    CASE_OP("ReduceMean", b_reduce, "ReduceMean", 0),
    CASE_OP("ReduceMax", b_reduce, "ReduceMax", 0),
    CASE_OP("ReduceMin", b_reduce, "ReduceMin", 0),
    CASE_OP("ReduceProd", b_reduce, "ReduceProd", 0),
    CASE_OP("ReduceL1", b_reduce, "ReduceL1", 0),
    CASE_OP("ReduceL2", b_reduce, "ReduceL2", 0),
    CASE_OP("ReduceSumSquare", b_reduce, "ReduceSumSquare", 0),
    CASE_OP("ReduceLogSum", b_reduce, "ReduceLogSum", 0),
    CASE_OP("ReduceMean/opset18", b_reduce, "ReduceMean", 18),
    CASE_OP("ReduceMax/opset18", b_reduce, "ReduceMax", 18),
    CASE_OP("ArgMax", b_argreduce, "ArgMax", 0),
    CASE_OP("ArgMin", b_argreduce, "ArgMin", 0),
    /* fallback segments */
    FB("Resize", b_resize, 4),
    FB("LSTM", b_lstm, 2),
    FB("GRU", b_gru, 2),
    FB("Einsum", b_einsum, 2),
    FB("TopK", b_topk, 2),
    FB("CumSum", b_cumsum, 4),
    FB("ReduceLogSumExp", b_reduce_lse, 2),
    FB("ConvTranspose", b_conv_transpose, 2),
    FB("InstanceNormalization", b_instance_norm, 2),
    FB("Hardmax", b_hardmax, 2),
    FB("GridSample", b_grid_sample, 4),
    FB_OP("LpNormalization", b_unary_fb, "LpNormalization", 2),
    FB_OP("MeanVarianceNormalization", b_unary_fb, "MeanVarianceNormalization", 2),
    FB_OP("GlobalMaxPool", b_unary_fb, "GlobalMaxPool", 2),
    FB("GatherElements", b_gather_elements, 2),
    FB("ScatterND", b_scatter_nd, 2),
    FB("BatchNormalization", b_batch_norm, 2),
    FB("LRN", b_lrn, 2),
    FB("Trilu", b_trilu, 2),
    FB("Fallback/f16_bf16_elementwise", b_half_ew, 4),
    FB("Fallback/compiled_segment_compiled", b_mixed_chain, 4),
    FB("Fallback/conv_topk", b_mixed_topk, 4),
    FB("Fallback/io_and_weights", b_mixed_io, 4),
    /* whole graphs */
    CASE("Empty", b_empty),
    {"Graph/io_passthrough", b_graph_io, "", 0, G_NORMAL, 0, EXPECT_FALLBACK, 2},
    {"Graph/dead_nodes", b_dead_nodes, "", 0, G_NORMAL, 0, EXPECT_C, 3},
    CASE("Graph/in_place", b_in_place),
    {"Graph/random_program", b_program, "", 0, G_NORMAL, 0, EXPECT_ANY, 32},
};

static const op_case *all_cases(int *n)
{
    *n = (int)(sizeof(case_table) / sizeof(case_table[0]));
    return case_table;
}

/* ---- running one shape -------------------------------------------------------------------- */

static void free_tc(tc *c)
{
    for (int i = 0; i < c->n_in; i++) ir_tensor_release(&c->in[i]);
    for (int i = 0; i < c->n_keep; i++) free(c->keep[i]);
    free(c->mb);
    memset(c, 0, sizeof(*c));
}

/* Builds shape `variant` of case cs. OUT: c (free_tc), *buf (free), *n. */
static void build_model(const op_case *cs, int variant, tc *c, void **buf, size_t *n)
{
    memset(c, 0, sizeof(*c));
    c->cs = cs;
    c->variant = variant;
    c->want_moves = -1;
    c->r.s = hash_str(seed * 0x9e3779b97f4a7c15ull + (uint64_t)variant * 7919u, cs->name);
    c->mb = calloc(1, sizeof(mb_model));
    if (!c->mb) abort();
    mb_init(c->mb, cs->opset ? cs->opset : 17);
    cs->build(c);
    *buf = mb_pack(c->mb, n);
}

/* DIR/<case>_<shape>.onnx, with the case name's odd characters as '_'. */
static void dump_path(const op_case *cs, int variant, char *path, size_t n)
{
    char name[256];
    snprintf(name, sizeof(name), "%s", cs->name);
    for (char *q = name; *q; q++)
        if (!(*q >= 'a' && *q <= 'z') && !(*q >= 'A' && *q <= 'Z') && !(*q >= '0' && *q <= '9')) *q = '_';
    snprintf(path, n, "%s/%s_%d.onnx", dump_dir, name, variant);
}

/* "x=f32[2,3] w=f32[4,3]": the graph's inputs and their shapes. */
static void input_desc(const ir_graph *g, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < g->n_inputs && len + 1 < n; i++) {
        char t[160];
        len += (size_t)snprintf(buf + len, n - len, "%s%s=%s", i ? " " : "", g->inputs[i]->name,
                                ir_tensor_type_str(&g->inputs[i]->t, t, sizeof(t)));
    }
}

/* The target under test (--target), its precision (--precision) and
 * whether cases only compile (--compile-only: where the target's device is
 * missing, e.g. CUDA through NVRTC on a machine without a GPU). */
static const target *tgt = &target_c;
static const char *precision;

static bool stores_16bit(void) { return precision && strcmp(precision, "fp32") != 0; }
static const char *schedule; /* cuda: --schedule kernels|waves|mono|mono-barriers */
static int compile_only;

/* The attention group of g as the target partitions it reads q, k^T and v
 * from one value at c's offsets and strides; else false and why. */
static bool attn_reads_ok(const tc *c, ir_graph *g, char *why, size_t n_why)
{
    sched_program p;
    memset(&p, 0, sizeof(p));
    base_arena a;
    base_arena_init(&a);
    base_diag d;
    base_diag_init(&d);
    bool ok = false;
    if (api_plan(g, tgt, schedule, &p, &a, &d) != KILN_OK) {
        snprintf(why, n_why, "plan: %s", base_diag_text(&d));
        goto out;
    }
    const sched_group *grp = NULL;
    for (int i = 0; i < p.n_groups && !grp; i++)
        if (p.groups[i]->kind == SCHED_GROUP_ATTENTION) grp = p.groups[i];
    pass_attention at;
    if (!grp || pass_group_attention(grp, &at, &d) != KILN_OK) {
        snprintf(why, n_why, "no attention group");
        goto out;
    }
    const pass_attn_operand *ops[3] = {&at.q, &at.kt, &at.v};
    static const char *names[3] = {"q", "k^T", "v"};
    for (int k = 0; k < 3; k++) {
        const pass_attn_operand *op = ops[k];
        if (op->v != at.q.v) {
            snprintf(why, n_why, "%s is read from '%s', q from '%s'", names[k], op->v->name, at.q.v->name);
            goto out;
        }
        if (op->offset != c->want_attn_off[k]) {
            snprintf(why, n_why, "%s read from offset %lld, want %lld", names[k], (long long)op->offset,
                     (long long)c->want_attn_off[k]);
            goto out;
        }
        for (int i = 0; i < op->rank; i++) {
            int64_t dim = op->dims[i], st = op->st[i];
            if (dim != 1 && st != c->want_attn_st[k][i]) {
                snprintf(why, n_why, "%s dim %d (of %lld) steps by %lld, want %lld", names[k], i, (long long)dim,
                         (long long)st, (long long)c->want_attn_st[k][i]);
                goto out;
            }
        }
    }
    ok = true;
out:
    sched_program_free(&p);
    base_arena_free(&a);
    base_diag_free(&d);
    return ok;
}

/* Compiles m for the target with n_threads and runs it on ins. OUT: got[]. */
static kiln_status run_compiled(ir_model *m, int n_threads, const ir_tensor *ins, ir_tensor *got,
                                const char *mono_config, api_compile_report *rep, base_diag *d)
{
    char path[64], sched[64];
    snprintf(path, sizeof(path), "/tmp/kiln-ops-%d.kiln", (int)getpid());
    api_compile_opts o = {.target = tgt->name, .n_threads = n_threads, .precision = precision,
                          .schedule = schedule};
    if (mono_config && schedule && (!strcmp(schedule, "mono") || !strcmp(schedule, "mono-barriers"))) {
        snprintf(sched, sizeof(sched), "%s:%s", schedule, mono_config);
        o.schedule = sched;
    }
    kiln_status st = api_compile(m, &o, path, rep, d);
    if (st != KILN_OK || compile_only) {
        unlink(path);
        return st;
    }
    kiln_rt_model *rm;
    st = kiln_rt_load(path, n_threads, &rm);
    unlink(path);
    if (st != KILN_OK) return base_diag_add(d, st, "load: %s", kiln_rt_last_error());
    const ir_graph *g = m->graph;
    const void *in_ptrs[MB_MAX];
    void *out_ptrs[MB_MAX];
    for (int i = 0; i < g->n_inputs && st == KILN_OK; i++) {
        const kiln_rt_tensor_info *info = kiln_rt_input(rm, i);
        if (!info || info->dtype != ins[i].dtype || info->nbytes != ins[i].nbytes)
            st = base_diag_add(d, KILN_ERR_INTERNAL, "the artifact's input %d does not match the model's", i);
        in_ptrs[i] = ins[i].data;
    }
    for (int i = 0; i < g->n_outputs && st == KILN_OK; i++) {
        const kiln_rt_tensor_info *info = kiln_rt_output(rm, i);
        st = ir_tensor_alloc(&got[i], info->dtype, info->rank, info->dims);
        /* NaN, -1, 255: an output the program never writes cannot pass */
        if (st == KILN_OK) memset(got[i].data, 0xff, got[i].nbytes);
        out_ptrs[i] = got[i].data;
    }
    ir_tensor before[MB_MAX] = {{0}};
    for (int i = 0; i < g->n_inputs && st == KILN_OK; i++) st = ir_tensor_copy(&before[i], &ins[i]);
    if (st == KILN_OK) {
        st = kiln_rt_run(rm, in_ptrs, out_ptrs);
        if (st != KILN_OK) base_diag_add(d, st, "run: %s", kiln_rt_last_error());
    }
    for (int i = 0; i < g->n_inputs; i++) {
        if (st == KILN_OK && memcmp(before[i].data, ins[i].data, ins[i].nbytes) != 0)
            st = base_diag_add(d, KILN_ERR_INTERNAL, "the run wrote into input '%s'", g->inputs[i]->name);
        ir_tensor_release(&before[i]);
    }
    kiln_rt_free(rm);
    return st;
}

/* Runs shape `variant` of cs; 0 when it passes. `why` gets the inputs'
 * shapes and the case's choices and, on failure, what went wrong. */
static int run_shape(const op_case *cs, int variant, int n_threads, char *why, size_t n_why, int *fallback_nodes)
{
    tc c;
    void *buf;
    size_t n;
    build_model(cs, variant, &c, &buf, &n);
    if (dump_dir) { /* written before anything can crash; the parent removes it when the shape passes */
        char path[1024];
        dump_path(cs, variant, path, sizeof(path));
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(buf, 1, n, f);
            fclose(f);
        }
    }
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    ir_tensor want[MB_MAX] = {{0}}, got[MB_MAX] = {{0}};
    char ins[1024] = "";
    int rc = 1;
    if (onnx_load_buffer(buf, n, NULL, &m, &d) != KILN_OK || ir_infer_shapes(m->graph, &d) != KILN_OK) {
        snprintf(why, n_why, "model: %s", base_diag_text(&d));
        goto out;
    }
    const ir_graph *g = m->graph;
    input_desc(g, ins, sizeof(ins));
    ir_interp_opts opts = {.seed = 1};
    if (ir_interp_run(g, c.in, want, &opts, &d) != KILN_OK) {
        snprintf(why, n_why, "%s %s: interpreter: %s", ins, c.desc, base_diag_text(&d));
        goto out;
    }
    if (c.want_attn_reads && (tgt->patterns & PASS_PATTERN_ATTENTION)) {
        char wr[256];
        if (!attn_reads_ok(&c, m->graph, wr, sizeof(wr))) {
            snprintf(why, n_why, "%s %s: the attention group's reads: %s", ins, c.desc, wr);
            goto out;
        }
    }
    api_compile_report rep;
    if (run_compiled(m, n_threads, c.in, got, c.mono_config, &rep, &d) != KILN_OK) {
        snprintf(why, n_why, "%s %s [%dt]: %s", ins, c.desc, n_threads, base_diag_text(&d));
        goto out;
    }
    *fallback_nodes = rep.n_fallback_nodes;
    int n_groups = 0;
    for (int k = 0; k < SCHED_GROUP_KIND_COUNT; k++) n_groups += rep.n_groups_by_kind[k];
    if (c.want_moves >= 0 && rep.n_groups_by_kind[SCHED_GROUP_MOVE] != c.want_moves) {
        snprintf(why, n_why, "%s %s: %d move groups (copies); the case wants %d", ins, c.desc,
                 rep.n_groups_by_kind[SCHED_GROUP_MOVE], c.want_moves);
        goto out;
    }
    if (c.want_groups > 0 && (tgt->patterns & c.want_patterns) == c.want_patterns && n_groups != c.want_groups) {
        snprintf(why, n_why, "%s %s: %d groups; the fusion the case tests leaves %d", ins, c.desc, n_groups,
                 c.want_groups);
        goto out;
    }
    if (compile_only) {
        snprintf(why, n_why, "%s %s: compiled (%d fallback)", ins, c.desc, rep.n_fallback_nodes);
        rc = 0;
        goto out;
    }
    /* which nodes compile is the c target's contract; other targets differ */
    if (tgt == &target_c && cs->want == EXPECT_C && rep.n_fallback_nodes > 0) {
        snprintf(why, n_why, "%s %s: %d node(s) ran in fallback segments; the case expects compiled code", ins,
                 c.desc, rep.n_fallback_nodes);
        goto out;
    }
    if (tgt == &target_c && cs->want == EXPECT_FALLBACK && rep.n_fallback_nodes == 0) {
        snprintf(why, n_why, "%s %s: every node compiled; the case tests a fallback segment", ins, c.desc);
        goto out;
    }
    rc = 0;
    for (int i = 0; i < g->n_outputs && rc == 0; i++) {
        const ir_value *v = g->outputs[i];
        api_compare cmp = api_compare_tensors(&got[i], &want[i], api_tolerance_for_precision(want[i].dtype, precision));
        char a[160], b[160];
        if (!cmp.shape_ok) {
            snprintf(why, n_why, "%s %s [%dt]: output '%s' is %s, the interpreter gives %s", ins, c.desc, n_threads,
                     v->name, ir_tensor_type_str(&got[i], a, sizeof(a)), ir_tensor_type_str(&want[i], b, sizeof(b)));
            rc = 1;
        } else if (cmp.n_bad > 0) {
            int64_t k = cmp.first_bad;
            snprintf(why, n_why,
                     "%s %s [%dt]: output '%s' %s: %lld of %lld differ, max abs err %.3g, max rel err %.3g; "
                     "first at %lld: got %.9g, want %.9g",
                     ins, c.desc, n_threads, v->name, ir_tensor_type_str(&want[i], b, sizeof(b)),
                     (long long)cmp.n_bad, (long long)ir_numel(&want[i]), cmp.max_abs, cmp.max_rel, (long long)k,
                     ir_get_f64(&got[i], k), ir_get_f64(&want[i], k));
            rc = 1;
        }
    }
    if (rc == 0) snprintf(why, n_why, "%s %s [%dt, %d fallback]", ins, c.desc, n_threads, rep.n_fallback_nodes);
out:
    for (int i = 0; i < MB_MAX; i++) {
        ir_tensor_release(&want[i]);
        ir_tensor_release(&got[i]);
    }
    ir_model_free(m);
    base_diag_free(&d);
    free(buf);
    free_tc(&c);
    return rc;
}

/* What a shape's child reports back through the pipe. */
typedef struct shape_result {
    int rc;             /* 0 pass */
    int fallback_nodes;
    char why[4000];
} shape_result;

/* Runs one shape in a child with a time limit, so that a crash or a hang is
 * that shape's failure and the other shapes still run. */
static void run_shape_isolated(const op_case *cs, int variant, shape_result *res)
{
    int fds[2];
    memset(res, 0, sizeof(*res));
    int n_threads = 1 + (n_compiles++ & 1);
    fflush(stdout);
    if (pipe(fds) != 0) {
        snprintf(res->why, sizeof(res->why), "cannot make a pipe");
        res->rc = 1;
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(CASE_TIMEOUT_S);
        res->rc = run_shape(cs, variant, n_threads, res->why, sizeof(res->why), &res->fallback_nodes);
        ssize_t w = write(fds[1], res, sizeof(*res));
        _exit(w == (ssize_t)sizeof(*res) ? 0 : 1);
    }
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(res->why, sizeof(res->why), "cannot start a child process");
        res->rc = 1;
        return;
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(*res) && (r = read(fds[0], (char *)res + got, sizeof(*res) - got)) > 0) got += (size_t)r;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != sizeof(*res) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        res->rc = 1;
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            snprintf(res->why, sizeof(res->why), "timed out after %d s", CASE_TIMEOUT_S);
        else if (WIFSIGNALED(status))
            snprintf(res->why, sizeof(res->why), "crashed: %s", strsignal(WTERMSIG(status)));
        else
            snprintf(res->why, sizeof(res->why), "the child failed");
    }
}

/* Runs every shape of a case, printing its line(s); 0 when all pass. */
static int run_case(const op_case *cs)
{
    int shapes = cs->n_shapes ? cs->n_shapes : N_SHAPES, failed = 0, fb_total = 0;
    for (int v = 0; v < shapes; v++) {
        shape_result res;
        run_shape_isolated(cs, v, &res);
        fb_total += res.fallback_nodes;
        if (res.rc) {
            printf("FAIL  %s #%d (seed %llu): %s\n", cs->name, v, (unsigned long long)seed, res.why);
            failed++;
        } else if (dump_dir) {
            char path[1024];
            dump_path(cs, v, path, sizeof(path));
            unlink(path);
        }
        if (!res.rc && verbose) {
            printf("  ok  %s #%d: %s\n", cs->name, v, res.why);
        }
        fflush(stdout);
    }
    if (!failed)
        printf("ok    %s (%d shapes%s)\n", cs->name, shapes,
               cs->want == EXPECT_FALLBACK ? ", fallback" : fb_total ? ", some fallback" : "");
    return failed ? 1 : 0;
}

/* ---- completeness ------------------------------------------------------------------------------ */

/* A canonical instance of an op, for ops no compiled case covers:
 *   ins    "name:dtype[d,d]" per input, ';'-separated; "=v,v" makes it a
 *          constant holding those values, "=r" a random constant; an empty
 *          entry is an omitted optional input
 *   attrs  "name=i:1;name=f:0.5;name=s:text;name=is:1,2;name=fs:1,2"
 * Ops without an entry get every minimum input as a graph input f32[2,3,4,5]. */
typedef struct canon {
    const char *op;
    int opset;
    const char *ins, *attrs;
    int n_out;
} canon;

static const canon canon_table[] = {
    {"GatherND", 0, "x:f32[2,3,4];i:i64[2,1]=0,1", "", 1},
    {"Scatter", 10, "x:f32[3,4];i:i64[1,4]=0,1,2,0;u:f32[1,4]", "axis=i:0", 1},
    {"ScatterElements", 0, "x:f32[3,4];i:i64[1,4]=0,1,2,0;u:f32[1,4]", "axis=i:0", 1},
    {"Constant", 0, "", "value_float=f:1.5", 1},
    {"ConstantOfShape", 0, "s:i64[2]=2,3", "", 1},
    {"Range", 0, "a:f32[]=0;b:f32[]=5;d:f32[]=1", "", 1},
    {"Range", 0, "a:i64[]=0;b:i64[]=7;d:i64[]=2", "", 1},
    {"OneHot", 0, "i:i64[2,3]=0,1,2,0,1,2;d:i64[]=4;v:f32[2]=0,1", "", 1},
    {"EyeLike", 0, "x:f32[3,4]", "", 1},
    {"Compress", 0, "x:f32[3,4];c:bool[3]", "axis=i:0", 1},
    {"ReverseSequence", 0, "x:f32[4,2,3];l:i64[2]=4,2", "", 1},
    {"Trilu", 0, "x:f32[3,4]", "", 1},
    {"NonZero", 0, "x:f32[3,4]", "", 1},
    {"Unique", 0, "x:f32[6]", "", 1},
    {"NegativeLogLikelihoodLoss", 0, "x:f32[3,5];t:i64[3]=0,4,2", "", 1},
    {"SoftmaxCrossEntropyLoss", 0, "x:f32[3,5];t:i64[3]=0,4,2", "", 1},
    {"MatMulInteger", 0, "a:u8[3,4];b:u8[4,5]", "", 1},
    {"QLinearMatMul", 0,
     "a:u8[3,4];as:f32[]=0.1;az:u8[]=3;b:u8[4,5];bs:f32[]=0.2;bz:u8[]=1;ys:f32[]=0.5;yz:u8[]=2", "", 1},
    {"ConvInteger", 0, "x:u8[1,2,5,5];w:u8[3,2,3,3]=r", "", 1},
    {"QLinearConv", 0,
     "x:u8[1,2,5,5];xs:f32[]=0.1;xz:u8[]=3;w:u8[3,2,3,3]=r;ws:f32[]=0.2;wz:u8[]=1;ys:f32[]=0.5;yz:u8[]=2", "", 1},
    {"LpPool", 0, "x:f32[1,2,5,5]", "kernel_shape=is:2,2", 1},
    {"GlobalLpPool", 0, "x:f32[1,2,5,5]", "", 1},
    {"MaxUnpool", 0, "x:f32[1,1,2,2];i:i64[1,1,2,2]=0,3,8,15", "kernel_shape=is:2,2;strides=is:2,2", 1},
    {"Det", 0, "x:f32[2,3,3]", "", 1},
    {"DynamicQuantizeLinear", 0, "x:f32[2,3]", "", 3},
    {"RNN", 0, "x:f32[3,2,4];w:f32[1,5,4]=r;r:f32[1,5,5]=r", "hidden_size=i:5", 2},
    {"Upsample", 9, "x:f32[1,1,2,3];s:f32[4]=1,1,2,2", "", 1},
    {"RoiAlign", 0, "x:f32[1,2,6,6];r:f32[2,4]=0,0,3,3,1,1,5,4;b:i64[2]=0,0", "output_height=i:2;output_width=i:2", 1},
    {"NonMaxSuppression", 0, "b:f32[1,3,4];s:f32[1,1,3]", "", 1},
    {"DFT", 17, "x:f32[1,8,1]", "", 1},
    {"STFT", 17, "x:f32[1,16,1];st:i64[]=4;w:f32[8]=r", "", 1},
    {"HannWindow", 17, "n:i64[]=8", "", 1},
    {"HammingWindow", 17, "n:i64[]=8", "", 1},
    {"BlackmanWindow", 17, "n:i64[]=8", "", 1},
    {"MelWeightMatrix", 17, "a:i64[]=4;b:i64[]=16;c:i64[]=8000;d:f32[]=0;e:f32[]=4000", "", 1},
    {"RandomUniform", 0, "", "shape=is:2,3", 1},
    {"RandomNormal", 0, "", "shape=is:2,3", 1},
    {"Multinomial", 0, "x:f32[2,5]", "sample_size=i:3", 1},
    {"Bernoulli", 0, "x:f32[2,3]", "", 1},
    {"RandomUniformLike", 0, "x:f32[2,3]", "", 1},
    {"RandomNormalLike", 0, "x:f32[2,3]", "", 1},
};

static kiln_dtype dtype_named(const char *s, size_t n)
{
    for (int t = 1; t < KILN_DTYPE_COUNT; t++)
        if (strlen(kiln_dtype_name((kiln_dtype)t)) == n && strncmp(kiln_dtype_name((kiln_dtype)t), s, n) == 0)
            return (kiln_dtype)t;
    fprintf(stderr, "test_ops: unknown dtype '%.*s' in a canonical instance\n", (int)n, s);
    abort();
}

/* Parses "2,3,4" (up to end) into v; returns the count. */
static int parse_nums(const char *s, const char *end, double *v, int max)
{
    int n = 0;
    while (s < end && n < max) {
        char *e;
        v[n++] = strtod(s, &e);
        s = e;
        if (*s == ',') s++;
        else break;
    }
    return n;
}

static void build_canon(tc *c, const canon *k)
{
    char ins[512] = "";
    const char *s = k->ins;
    int idx = 0;
    while (s && *s) {
        const char *end = strchr(s, ';');
        if (!end) end = s + strlen(s);
        if (idx++) strcat(ins, ",");
        if (end > s) {
            const char *colon = memchr(s, ':', (size_t)(end - s)), *lb = memchr(s, '[', (size_t)(end - s));
            const char *rb = memchr(s, ']', (size_t)(end - s)), *eq = memchr(s, '=', (size_t)(end - s));
            const char *name = tc_keep(c, strndup(s, (size_t)(colon - s)));
            kiln_dtype t = dtype_named(colon + 1, (size_t)(lb - colon - 1));
            double dv[IR_MAX_RANK], vals[64];
            int rank = lb + 1 == rb ? 0 : parse_nums(lb + 1, rb, dv, IR_MAX_RANK);
            int64_t dims[IR_MAX_RANK];
            for (int i = 0; i < rank; i++) dims[i] = (int64_t)dv[i];
            gen g = t == KILN_F32 ? G_PROB : G_SMALL;
            if (!eq) {
                tc_input(c, name, t, rank, dims, g);
            } else {
                ir_tensor *x = tc_const(c, name, t, rank, dims, g);
                if (eq[1] != 'r') {
                    int nv = parse_nums(eq + 1, end, vals, 64);
                    for (int i = 0; i < nv && i < ir_numel(x); i++) {
                        if (ir_dtype_is_float(t)) ir_set_f64(x, i, vals[i]);
                        else ir_set_i64(x, i, (int64_t)vals[i]);
                    }
                }
            }
            strcat(ins, name);
        }
        s = *end ? end + 1 : end;
    }
    char outs[64] = "";
    for (int i = 0; i < k->n_out; i++) appendf(outs, sizeof(outs), "%so%d", i ? "," : "", i);
    Onnx__NodeProto *n = tc_node(c, k->op, ins, outs);
    for (int i = 0; i < k->n_out; i++) tc_out(c, tc_str(c, "o%d", i));
    for (s = k->attrs; s && *s;) {
        const char *end = strchr(s, ';');
        if (!end) end = s + strlen(s);
        const char *eq = memchr(s, '=', (size_t)(end - s)), *colon = memchr(s, ':', (size_t)(end - s));
        const char *name = tc_keep(c, strndup(s, (size_t)(eq - s)));
        const char *kind = tc_keep(c, strndup(eq + 1, (size_t)(colon - eq - 1)));
        double v[MB_MAX_LIST];
        if (!strcmp(kind, "s")) {
            as(c, n, name, tc_keep(c, strndup(colon + 1, (size_t)(end - colon - 1))));
        } else {
            int nv = parse_nums(colon + 1, end, v, MB_MAX_LIST);
            if (!strcmp(kind, "i")) ai(c, n, name, (int64_t)v[0]);
            else if (!strcmp(kind, "f")) af(c, n, name, v[0]);
            else if (!strcmp(kind, "is")) {
                int64_t iv[MB_MAX_LIST];
                for (int i = 0; i < nv; i++) iv[i] = (int64_t)v[i];
                ais(c, n, name, nv, iv);
            } else {
                float fv[MB_MAX_LIST];
                for (int i = 0; i < nv; i++) fv[i] = (float)v[i];
                mb_attr_floats(c->mb, n, name, nv, fv);
            }
        }
        s = *end ? end + 1 : end;
    }
}

/* If, Loop and Scan, with bodies built in sub (a model's graph borrowed). */
static void build_control(tc *c, kiln_op op, mb_model *sub, mb_model *sub2)
{
    int64_t two = 2;
    mb_init(sub, 17);
    mb_init(sub2, 17);
    if (op == KILN_OP_IF) {
        tc_input(c, "x", KILN_F32, 1, &two, G_NORMAL);
        tc_input(c, "cond", KILN_BOOL, 0, NULL, G_BOOL);
        mb_node(sub, "Identity", "then_id", "x", NULL, "t");
        mb_output(sub, "t");
        mb_node(sub2, "Neg", "else_neg", "x", NULL, "e");
        mb_output(sub2, "e");
        Onnx__NodeProto *n = tc_node(c, "If", "cond", "y");
        mb_attr_graph(c->mb, n, "then_branch", &sub->graph);
        mb_attr_graph(c->mb, n, "else_branch", &sub2->graph);
    } else if (op == KILN_OP_LOOP) {
        tc_ints(c, "trips", -1, (int64_t[]){3});
        tc_input(c, "v", KILN_F32, 1, &two, G_NORMAL);
        mb_input(sub, "i", KILN_I64, 0, NULL);
        mb_input(sub, "cin", KILN_BOOL, 0, NULL);
        mb_input(sub, "vin", KILN_F32, 1, &two);
        mb_node(sub, "Identity", "keep", "cin", NULL, "cout");
        mb_node(sub, "Add", "dbl", "vin", "vin", "vout");
        mb_output(sub, "cout");
        mb_output(sub, "vout");
        Onnx__NodeProto *n = tc_node(c, "Loop", "trips,,v", "y");
        mb_attr_graph(c->mb, n, "body", &sub->graph);
    } else {
        tc_input(c, "init", KILN_F32, 1, &two, G_NORMAL);
        tc_input(c, "xs", KILN_F32, 2, (int64_t[]){3, 2}, G_NORMAL);
        mb_input(sub, "s", KILN_F32, 1, &two);
        mb_input(sub, "xt", KILN_F32, 1, &two);
        mb_node(sub, "Add", "acc", "s", "xt", "sout");
        mb_node(sub, "Identity", "emit", "sout", NULL, "yt");
        mb_output(sub, "sout");
        mb_output(sub, "yt");
        Onnx__NodeProto *n = tc_node(c, "Scan", "init,xs", "final,ys");
        mb_attr_graph(c->mb, n, "body", &sub->graph);
        ai(c, n, "num_scan_inputs", 1);
    }
    tc_out(c, c->mb->graph.node[0]->output[0]);
}

/* The default instance: min_in inputs f32[2,3,4,5]. */
static void build_default(tc *c, kiln_op op)
{
    char ins[256] = "", outs[64] = "";
    for (int i = 0; i < ir_ops[op].min_in; i++) {
        const char *x = tc_str(c, "x%d", i);
        tc_input(c, x, KILN_F32, 4, (int64_t[]){2, 3, 4, 5}, G_PROB);
        appendf(ins, sizeof(ins), "%s%s", i ? "," : "", x);
    }
    int n_out = ir_ops[op].min_out > 0 ? ir_ops[op].min_out : 1;
    for (int i = 0; i < n_out; i++) appendf(outs, sizeof(outs), "%so%d", i ? "," : "", i);
    tc_node(c, ir_ops[op].name, ins, outs);
    for (int i = 0; i < n_out; i++) tc_out(c, tc_str(c, "o%d", i));
}

typedef enum canon_result {
    CANON_REFUSED,   /* static shapes, and the target refuses it: as it should */
    CANON_DYNAMIC,   /* its output shape depends on data: never compiled */
    CANON_COMPILES,  /* the target accepts it: a violation */
    CANON_NO_INSTANCE,
} canon_result;

/* Loads the model c built and asks the target about every node of op. */
static canon_result judge(tc *c, kiln_op op, char *why, size_t n_why)
{
    size_t n;
    void *buf = mb_pack(c->mb, &n);
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    canon_result r = CANON_NO_INSTANCE;
    if (onnx_load_buffer(buf, n, NULL, &m, &d) != KILN_OK || ir_infer_shapes(m->graph, &d) != KILN_OK) {
        snprintf(why, n_why, "%s", base_diag_text(&d));
        goto out;
    }
    for (int i = 0; i < m->graph->n_nodes; i++) {
        const ir_node *node = m->graph->nodes[i];
        if (node->op != op) continue;
        bool known = true;
        for (int j = 0; j < node->n_out; j++)
            if (node->out[j] && !node->out[j]->shape_known) known = false;
        if (tgt->can_compile(node)) r = CANON_COMPILES;
        else if (r != CANON_COMPILES && known) r = CANON_REFUSED;
        else if (r != CANON_COMPILES && (ir_ops[op].flags & (IR_OPF_DATA_DEP | IR_OPF_SUBGRAPH))) r = CANON_DYNAMIC;
        else if (r != CANON_COMPILES) snprintf(why, n_why, "its output shape is not static");
    }
    if (r == CANON_NO_INSTANCE && why[0]) goto out;
    if (r == CANON_NO_INSTANCE) snprintf(why, n_why, "no node of the op in the model");
out:
    ir_model_free(m);
    base_diag_free(&d);
    free(buf);
    return r;
}

static canon_result judge_canonical(kiln_op op, int which, char *why, size_t n_why, bool *more)
{
    tc c;
    memset(&c, 0, sizeof(c));
    c.r.s = seed;
    c.mb = calloc(1, sizeof(mb_model));
    mb_model *sub = calloc(2, sizeof(mb_model));
    if (!c.mb || !sub) abort();
    int found = 0;
    const canon *k = NULL;
    for (size_t i = 0; i < sizeof(canon_table) / sizeof(canon_table[0]); i++)
        if (strcmp(canon_table[i].op, ir_ops[op].name) == 0 && found++ == which) k = &canon_table[i];
    *more = found > which + 1;
    mb_init(c.mb, k && k->opset ? k->opset : 17);
    if (op == KILN_OP_IF || op == KILN_OP_LOOP || op == KILN_OP_SCAN) build_control(&c, op, sub, sub + 1);
    else if (k) build_canon(&c, k);
    else build_default(&c, op);
    canon_result r = judge(&c, op, why, n_why);
    free(sub);
    free_tc(&c);
    return r;
}

/* Every op either has a case where the target compiles it, or the target
 * refuses it. Returns 0 when the rule holds. */
static int check_completeness(const op_case *cases, int n_cases)
{
    static const char *compiled_in[KILN_OP_COUNT], *fallback_in[KILN_OP_COUNT];
    for (int i = 0; i < n_cases; i++) {
        int shapes = cases[i].n_shapes ? cases[i].n_shapes : N_SHAPES;
        for (int v = 0; v < shapes; v++) {
            tc c;
            void *buf;
            size_t n;
            build_model(&cases[i], v, &c, &buf, &n);
            base_diag d;
            base_diag_init(&d);
            ir_model *m = NULL;
            if (onnx_load_buffer(buf, n, NULL, &m, &d) == KILN_OK && ir_infer_shapes(m->graph, &d) == KILN_OK)
                for (int k = 0; k < m->graph->n_nodes; k++) {
                    const ir_node *node = m->graph->nodes[k];
                    if (node->op >= KILN_OP_COUNT) continue;
                    if (tgt->can_compile(node)) compiled_in[node->op] = cases[i].name;
                    else fallback_in[node->op] = cases[i].name;
                }
            ir_model_free(m);
            base_diag_free(&d);
            free(buf);
            free_tc(&c);
        }
    }
    int n_compiled = 0, n_refused = 0, n_dynamic = 0, bad = 0;
    for (int op = 0; op < KILN_OP_COUNT; op++) {
        if (compiled_in[op]) {
            n_compiled++;
            continue;
        }
        canon_result worst = CANON_NO_INSTANCE;
        char why[1024] = "";
        bool more = true;
        for (int which = 0; more; which++) {
            char w[1024];
            canon_result r = judge_canonical((kiln_op)op, which, w, sizeof(w), &more);
            if (r == CANON_COMPILES || worst == CANON_NO_INSTANCE || (r == CANON_REFUSED && worst == CANON_DYNAMIC)) {
                if (worst != CANON_COMPILES) {
                    worst = r;
                    snprintf(why, sizeof(why), "%s", w);
                }
            }
        }
        if (worst == CANON_COMPILES) {
            printf("FAIL  completeness: %s has no case where target c compiles it, yet target c compiles its "
                   "canonical instance: add a case, or refuse the op\n",
                   ir_ops[op].name);
            bad++;
        } else if (worst == CANON_NO_INSTANCE && !fallback_in[op]) {
            printf("FAIL  completeness: no canonical instance of %s with static shapes: %s\n", ir_ops[op].name, why);
            bad++;
        } else if (worst == CANON_DYNAMIC) {
            n_dynamic++;
        } else {
            n_refused++;
        }
        if (verbose)
            printf("  completeness: %s %s\n", ir_ops[op].name,
                   worst == CANON_DYNAMIC ? "has data-dependent shapes or subgraphs" : "is refused by target c");
    }
    if (!bad)
        printf("ok    completeness (%d ops compiled with cases, %d refused by the target, %d with data-dependent "
               "shapes or subgraphs)\n",
               n_compiled, n_refused, n_dynamic);
    return bad ? 1 : 0;
}

/* ---- main ------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: test_ops [--target c|cuda] [--precision fp32|fp16|bf16] [--schedule kernels|waves|mono|mono-barriers]\n"
               "                [--compile-only]\n"
               "                [--filter SUBSTR] [--seed N] [--verbose] [--list] [--dump DIR]\n"
               "Compiles every op for the target (default c) on random shapes and compares with the\n"
               "reference interpreter; then checks that ops without a case are refused by the target.\n"
               "--compile-only stops after compiling (cuda on a machine without a GPU: NVRTC still\n"
               "builds every kernel). --dump DIR keeps the model of every failing shape as\n"
               "DIR/<case>_<shape>.onnx.\n");
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    int list = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (strcmp(argv[i], "--list") == 0) list = 1;
        else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) dump_dir = argv[++i];
        else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) precision = argv[++i];
        else if (strcmp(argv[i], "--schedule") == 0 && i + 1 < argc) schedule = argv[++i];
        else if (strcmp(argv[i], "--compile-only") == 0) compile_only = 1;
        else if (strcmp(argv[i], "--target") == 0 && i + 1 < argc) {
            tgt = target_lookup(argv[++i]);
            if (!tgt) {
                fprintf(stderr, "test_ops: unknown target '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    int n_cases;
    const op_case *cases = all_cases(&n_cases);
    int passed = 0, failed = 0;
    for (int i = 0; i < n_cases; i++) {
        if (filter && !strstr(cases[i].name, filter)) continue;
        if (list) {
            printf("%s\n", cases[i].name);
            continue;
        }
        if (run_case(&cases[i])) failed++;
        else passed++;
    }
    if (!list && (!filter || strstr("completeness", filter))) {
        if (check_completeness(cases, n_cases)) failed++;
        else passed++;
    }
    if (!list) printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
