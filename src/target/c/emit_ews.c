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
 * The per-element code comes from target/ews_expr.c, shared with the cuda
 * target, with the reference interpreter's semantics; its integer and
 * conversion helpers (kx_*) live in the generated prelude below. Floats
 * compute in their own precision where the interpreter uses double: exp,
 * log, tanh, erf, sigmoid and gelu go through kc_math.h's vectorizable
 * functions, other transcendental functions through libm in double,
 * rounded once. f16, bf16 and strings are not handled: such nodes run in
 * fallback segments.
 */
#include "target/c/c-impl.h"
#include "target/ews_expr.h"

#include <stdio.h>
#include <string.h>

/* An rTask gets at least this many elements, and a thread at most
 * EWS_TASKS_PER_THREAD rTasks of one group. */
#define EWS_MIN_TASK_ELEMS 4096
#define EWS_TASKS_PER_THREAD 4
/* Chunks of a split row start at multiples of this many elements. */
#define EWS_CHUNK_ALIGN 16

/* The generated code's dialect (ews_expr.h): float32 library functions
 * in double, rounded once; no 16-bit floats. */
static const ews_lang c_lang = {
    .type = c_type, .math = "kc_", .helper = "kx_", .inf = "INFINITY", .nan = "NAN", .f32_native = false, .half = false,
};

bool c_can_elementwise(const ir_node *n) { return ews_can_elementwise(&c_lang, n); }

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
    "/* To uint64: as kx_f2i below 2^63, exact from 2^63, saturated from 2^64\n"
    " * (the interpreter's rule; no out-of-range conversion, which C leaves undefined). */\n"
    "static inline uint64_t kx_f2u64(double v)\n"
    "{\n"
    "    if (v >= 18446744073709551616.0) return UINT64_MAX;\n"
    "    if (v >= 9.2233720368547758e18) return (uint64_t)kx_f2i(v - 9.2233720368547758e18) + ((uint64_t)1 << 63);\n"
    "    return (uint64_t)kx_f2i(v);\n"
    "}\n"
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
    int n_ops = grp->n_in;
    ews_operand *xo = base_calloc((size_t)n_ops + 1, sizeof(ews_operand));
    int64_t(*str)[IR_MAX_RANK] = base_calloc((size_t)n_ops + 1, sizeof(*str)); /* strides along the (collapsed) output dims */
    int64_t **strs = base_calloc((size_t)n_ops + 2, sizeof(int64_t *));
    int64_t out_str[IR_MAX_RANK];
    base_str body; /* the inner loop's statements */
    base_str_init(&body);
    if (!xo || !str || !strs) {
        base_free(xo);
        base_free(str);
        base_free(strs);
        return KILN_ERR_OOM;
    }

    /* operands: x<k>, or a literal for a constant scalar */
    for (int k = 0; k < n_ops; k++) {
        xo[k].v = grp->in[k];
        snprintf(xo[k].name, sizeof xo[k].name, "x%d", k);
        ews_operand_lit(&c_lang, &xo[k]);
    }

    /* the per-element code (which marks the operands it reads) */
    ews_expr x = {.lang = &c_lang, .ops = xo, .n_ops = n_ops, .body = &body, .indent = "            "};
    for (int i = 0; i < grp->n_nodes; i++) {
        if (ews_expr_node(&x, grp->nodes[i])) continue;
        char lb[256];
        base_diag_add(e->d, KILN_ERR_INTERNAL, "the c target cannot emit %s in a fused elementwise loop",
                      ir_node_label(grp->nodes[i], lb, sizeof lb));
        base_free(xo);
        base_free(str);
        base_free(strs);
        base_str_free(&body);
        return KILN_ERR_INTERNAL;
    }

    /* strides of what is read and written, then the collapsed dims */
    int rank = shape->rank;
    int64_t dims[IR_MAX_RANK];
    for (int d = 0; d < rank; d++) dims[d] = shape->dims[d];
    int n_strs = 0;
    for (int k = 0; k < n_ops; k++) {
        if (!xo[k].used) continue;
        ews_bcast_strides(&xo[k].v->t, rank, dims, str[k]);
        strs[n_strs++] = str[k];
    }
    ews_bcast_strides(shape, rank, dims, out_str);
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
        base_free(xo);
        base_free(str);
        base_str_free(&body);
        return KILN_OK;
    }

    /* which operands vary along what */
    bool need_coord[IR_MAX_RANK] = {false};
    for (int k = 0; k < n_ops; k++) {
        const ews_operand *o = &xo[k];
        if (!o->used) continue;
        bool like_out = true, outer = false;
        for (int d = 0; d < rank; d++) like_out = like_out && str[k][d] == out_str[d];
        for (int d = 0; d < rank - 1; d++) outer = outer || str[k][d] != 0;
        if (like_out || !outer || rows == 1) continue;
        for (int d = 0; d < rank - 1; d++)
            if (str[k][d] != 0) need_coord[d] = true;
    }

    /* pointers; scalars are loaded once */
    for (int k = 0; k < n_ops; k++) {
        const ews_operand *o = &xo[k];
        if (!o->used) continue;
        const char *T = c_type(o->v->t.dtype);
        bool scalar = true;
        for (int d = 0; d < rank; d++) scalar = scalar && str[k][d] == 0;
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
    for (int k = 0; k < n_ops; k++) {
        const ews_operand *o = &xo[k];
        if (!o->used) continue;
        bool scalar = true, like_out = true;
        for (int d = 0; d < rank; d++) {
            scalar = scalar && str[k][d] == 0;
            like_out = like_out && str[k][d] == out_str[d];
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
                if (str[k][d] == 1) base_str_printf(s, " + i%d", d);
                else if (str[k][d] != 0) base_str_printf(s, " + i%d * %lld", d, (long long)str[k][d]);
        }
        base_str_cat(s, ";\n");
        if (str[k][rank - 1] == 0) base_str_printf(s, "        const %s x%d = r%d[0];\n", T, k, k);
    }

    /* the inner loop */
    base_str_printf(s, "        for (int64_t j = %s; j < %s; j++) {\n", j0, jend);
    for (int k = 0; k < n_ops; k++) {
        const ews_operand *o = &xo[k];
        bool scalar = true;
        for (int d = 0; d < rank; d++) scalar = scalar && str[k][d] == 0;
        if (!o->used || scalar || str[k][rank - 1] == 0) continue;
        const char *T = c_type(o->v->t.dtype);
        if (str[k][rank - 1] == 1) base_str_printf(s, "            const %s x%d = r%d[j];\n", T, k, k);
        else base_str_printf(s, "            const %s x%d = r%d[j * %lld];\n", T, k, k, (long long)str[k][rank - 1]);
    }
    base_str_cat(s, base_str_get(&body));
    for (int k = 0; k < grp->n_out; k++) base_str_printf(s, "            w%d[j] = v%d;\n", k, grp->out[k]->id);
    base_str_cat(s, "        }\n    }\n}\n\n");

    base_free(xo);
    base_free(str);
    bool oom = body.oom;
    base_str_free(&body);
    return oom ? KILN_ERR_OOM : KILN_OK;
}
