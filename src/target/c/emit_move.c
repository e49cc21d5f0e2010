/*
 * emit_move.c: the `c` target's data-movement groups (one node each):
 * copies (Identity, Dropout, and Reshape-likes whose output is a graph
 * output), Transpose, Concat, Split, Slice, Expand, Tile, DepthToSpace,
 * SpaceToDepth, Gather, Pad, and the small reductions ReduceSum/Mean/Max/
 * Min/Prod/L1/L2/SumSquare/LogSum and ArgMax/ArgMin over constant axes.
 *
 * Most of these are one or more affine copies (target/move_params.c builds
 * their views and reads every op's parameters): every output element comes
 * from the input element at a linear function of its coordinates (Tile
 * views each dim as (repeat, dim), DepthToSpace as a 6-D transpose). A copy
 * collapses the dims both sides walk contiguously; the innermost dim is a
 * memcpy when both sides are contiguous along it, an element loop
 * otherwise. Elements move as raw bytes (uintN_t of the element size), so
 * every fixed-size dtype comes through bit-exact, as in
 * ir/interp_tensor.c. rTasks split the rows of each copy (or a long row in
 * chunks); small tensors get one.
 *
 * Gather checks run-time indices: a negative one counts from the end, and
 * one out of range is clamped to a valid row (nothing reads out of
 * bounds) and reported through the host's fail(), so the run fails as the
 * interpreter would.
 */
#include "target/c/c-impl.h"
#include "target/move_params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* An rTask moves at least this many bytes; a thread gets at most
 * MOVE_TASKS_PER_THREAD rTasks of one piece. */
#define MOVE_MIN_TASK_BYTES 32768
#define MOVE_TASKS_PER_THREAD 4
/* Chunks of a split row start at multiples of this many elements. */
#define MOVE_CHUNK_ALIGN 64

/* ---- small helpers ------------------------------------------------------------------ */

static const char *bits_type(size_t size)
{
    switch (size) {
    case 1: return "uint8_t";
    case 2: return "uint16_t";
    case 4: return "uint32_t";
    case 8: return "uint64_t";
    default: return NULL;
    }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static const char *bits_lit(size_t size, uint64_t b, char *buf, size_t n)
{
    if (size == 8) snprintf(buf, n, "UINT64_C(0x%llx)", (unsigned long long)b);
    else snprintf(buf, n, "((%s)0x%llxu)", bits_type(size), (unsigned long long)b);
    return buf;
}

/* s, safe inside a C comment. */
static void cat_comment(base_str *out, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '*' && p[1] == '/') base_str_cat(out, "* ");
        else if ((unsigned char)*p < 32) base_str_cat(out, "?");
        else base_str_printf(out, "%c", *p);
    }
}

/* s, safe inside a C string literal ('?' escaped against trigraphs). */
static void cat_cstring(base_str *out, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '?') base_str_printf(out, "\\%c", *p);
        else if ((unsigned char)*p < 32 || (unsigned char)*p >= 127) base_str_printf(out, "\\%03o", (unsigned char)*p);
        else base_str_printf(out, "%c", *p);
    }
}

/* ---- what compiles ------------------------------------------------------------------ */

/* move_node_ok, and the dtypes this target computes: Reduce* in float32
 * and float64 (accumulated in double), ArgMax/ArgMin over what c_type
 * names. */
bool c_can_move(const ir_node *n)
{
    if (!move_node_ok(n)) return false;
    kiln_dtype t = n->in[0]->t.dtype;
    if (ir_ops[n->op].flags & IR_OPF_REDUCTION) {
        if (n->op == KILN_OP_ARG_MAX || n->op == KILN_OP_ARG_MIN) return c_type(t) != NULL;
        return t == KILN_F32 || t == KILN_F64;
    }
    return true;
}

/* ---- the emitter ----------------------------------------------------------------------- */

typedef struct move {
    c_emitter *e;
    const ir_node *n;
    int n_threads;
    move_pieces pieces;
} move;

static bool placed(const move *m, const ir_value *v)
{
    return v && v->graph == m->e->g && m->e->p->place[v->id].loc != SCHED_LOC_NONE;
}

/* Takes ownership of code. */
static void add_piece(move *m, base_str *code, int64_t n_tasks) { move_pieces_add(&m->pieces, code, n_tasks); }

/* How many rTasks `bytes` of work over `items` items deserve. */
static int64_t tasks_for(const move *m, int64_t bytes, int64_t items)
{
    int64_t want = bytes / MOVE_MIN_TASK_BYTES, most = (int64_t)m->n_threads * MOVE_TASKS_PER_THREAD;
    if (want > most) want = most;
    if (want > items) want = items;
    return want < 1 ? 1 : want;
}

/* The item range [it0, it1) of rTask u when `items` are cut into n_tasks
 * runs of `per`. */
static void emit_range(base_str *s, int64_t items, int64_t per, int64_t n_tasks)
{
    if (n_tasks > 1)
        base_str_printf(s, "        const int64_t it0 = u * %lld, it1 = it0 + %lld < %lld ? it0 + %lld : %lld;\n",
                        (long long)per, (long long)per, (long long)items, (long long)per, (long long)items);
    else base_str_printf(s, "        (void)u;\n        const int64_t it0 = 0, it1 = %lld;\n", (long long)items);
}

/* Offset expression along the outer dims of a stride array (row * inner
 * when it is contiguous). */
static void offset_expr(char *buf, size_t n, int r, const int64_t *dims, const int64_t *str, bool contiguous)
{
    size_t k = 0;
    buf[0] = 0;
    if (contiguous) {
        if (r > 1) snprintf(buf, n, " + row * %lld", (long long)dims[r - 1]);
        return;
    }
    for (int d = 0; d < r - 1 && k < n; d++)
        if (str[d] == 1) k += (size_t)snprintf(buf + k, n - k, " + i%d", d);
        else if (str[d] != 0) k += (size_t)snprintf(buf + k, n - k, " + i%d * %lld", d, (long long)str[d]);
}

/* Bytes along each side of a transpose tile. */
#define MOVE_TILE_BYTES 64

/* A transposing copy whose source is contiguous along outer dim a (of the
 * collapsed view) while the destination is contiguous along the inner dim:
 * square tiles of (a, inner), so that both sides stream whole cache lines
 * instead of the source being read one element per line. */
static void piece_tiled(move *m, const char *what, const ir_value *src, const ir_value *dst, const move_view *v, int r,
                        int a, size_t es)
{
    c_emitter *e = m->e;
    const char *E = bits_type(es);
    int64_t tb = MOVE_TILE_BYTES / (int64_t)es, inner = v->dims[r - 1], da = v->dims[a];
    int64_t od[MOVE_MAX_RANK], os[MOVE_MAX_RANK], ot[MOVE_MAX_RANK], others = 1;
    int no = 0;
    for (int d = 0; d < r - 1; d++) {
        if (d == a) continue;
        od[no] = v->dims[d], os[no] = v->src_str[d], ot[no++] = v->dst_str[d];
        others *= v->dims[d];
    }
    int64_t na = ceil_div(da, tb), items = others * na, total = others * da * inner;
    int64_t want = tasks_for(m, total * (int64_t)es, items), per = ceil_div(items, want);
    int64_t n_tasks = ceil_div(items, per);
    base_str s;
    base_str_init(&s);
    char pb[256];
    base_str_printf(&s, "        /* %s: ", what);
    for (int d = 0; d < r; d++) base_str_printf(&s, "%s%lld", d ? "x" : "", (long long)v->dims[d]);
    base_str_printf(&s, " elements of %zu bytes, in %lldx%lld tiles along dims %d and %d */\n", es, (long long)tb,
                    (long long)tb, a, r - 1);
    base_str_printf(&s, "        const %s *sp = %s", E, c_ptr(e, src, E, pb, sizeof pb));
    if (v->src_off) base_str_printf(&s, " + %lld", (long long)v->src_off);
    base_str_printf(&s, ";\n        %s *dp = %s", E, c_ptr(e, dst, E, pb, sizeof pb));
    if (v->dst_off) base_str_printf(&s, " + %lld", (long long)v->dst_off);
    base_str_cat(&s, ";\n");
    emit_range(&s, items, per, n_tasks);
    base_str_cat(&s, "        for (int64_t it = it0; it < it1; it++) {\n");
    if (others > 1) {
        base_str_printf(&s, "            const int64_t ta = it %% %lld;\n            int64_t q = it / %lld;\n",
                        (long long)na, (long long)na);
        for (int k = no - 1; k > 0; k--)
            base_str_printf(&s, "            const int64_t i%d = q %% %lld;\n            q /= %lld;\n", k,
                            (long long)od[k], (long long)od[k]);
        base_str_cat(&s, "            const int64_t i0 = q;\n");
    } else {
        base_str_cat(&s, "            const int64_t ta = it;\n");
    }
    base_str_cat(&s, "            const int64_t so = 0");
    for (int k = 0; k < no; k++)
        if (os[k]) base_str_printf(&s, " + i%d * %lld", k, (long long)os[k]);
    base_str_cat(&s, ", dof = 0");
    for (int k = 0; k < no; k++)
        if (ot[k]) base_str_printf(&s, " + i%d * %lld", k, (long long)ot[k]);
    base_str_cat(&s, ";\n");
    base_str_printf(&s, "            const int64_t a0 = ta * %lld, a1 = a0 + %lld < %lld ? a0 + %lld : %lld;\n",
                    (long long)tb, (long long)tb, (long long)da, (long long)tb, (long long)da);
    base_str_printf(&s, "            for (int64_t jb = 0; jb < %lld; jb += %lld) {\n", (long long)inner, (long long)tb);
    base_str_printf(&s, "                const int64_t j1 = jb + %lld < %lld ? jb + %lld : %lld;\n", (long long)tb,
                    (long long)inner, (long long)tb, (long long)inner);
    base_str_cat(&s, "                for (int64_t ia = a0; ia < a1; ia++)\n");
    base_str_printf(&s, "                    for (int64_t j = jb; j < j1; j++) dp[dof + ia * %lld + j] = sp[so + ia + j * %lld];\n",
                    (long long)v->dst_str[a], (long long)v->src_str[r - 1]);
    base_str_cat(&s, "            }\n        }\n");
    add_piece(m, &s, n_tasks);
}

static void piece_copy(move *m, const char *what, const ir_value *src, const ir_value *dst, move_view *v)
{
    c_emitter *e = m->e;
    if (!placed(m, dst)) return;
    size_t es = ir_dtype_size(src->t.dtype);
    const char *E = bits_type(es);
    int64_t total = ir_dims_numel(v->rank, v->dims);
    if (total == 0) return;
    move_view_collapse(v);
    int r = v->rank;
    int64_t inner = v->dims[r - 1], rows = total / inner;
    int64_t ss = v->src_str[r - 1], ds = v->dst_str[r - 1];
    bool run = ss == 1 && ds == 1;
    int64_t tb = MOVE_TILE_BYTES / (int64_t)es;
    if (!run && ds == 1 && ss > 1 && inner >= tb)
        for (int d = 0; d < r - 1; d++)
            if (v->src_str[d] == 1 && v->dims[d] >= tb) {
                piece_tiled(m, what, src, dst, v, r, d, es);
                return;
            }

    int64_t want = tasks_for(m, total * (int64_t)es, total), nch = 1, cs = inner;
    if (want > rows) {
        nch = ceil_div(want, rows);
        cs = ceil_div(ceil_div(inner, nch), MOVE_CHUNK_ALIGN) * MOVE_CHUNK_ALIGN;
        nch = ceil_div(inner, cs);
    }
    int64_t items = rows * nch, per = ceil_div(items, want), n_tasks = ceil_div(items, per);

    int64_t cstr[MOVE_MAX_RANK];
    move_contiguous_strides(r, v->dims, cstr);
    bool src_c = true, dst_c = true;
    for (int d = 0; d < r; d++) {
        src_c = src_c && v->src_str[d] == cstr[d];
        dst_c = dst_c && v->dst_str[d] == cstr[d];
    }
    bool need[MOVE_MAX_RANK] = {false};
    for (int d = 0; d < r - 1; d++)
        need[d] = (!src_c && v->src_str[d] != 0) || (!dst_c && v->dst_str[d] != 0);

    base_str s;
    base_str_init(&s);
    char pb[256], so[512], dof[512];
    base_str_printf(&s, "        /* %s: ", what);
    for (int d = 0; d < r; d++) base_str_printf(&s, "%s%lld", d ? "x" : "", (long long)v->dims[d]);
    base_str_printf(&s, " elements of %zu bytes */\n", es);
    base_str_printf(&s, "        const %s *sp = %s", E, c_ptr(e, src, E, pb, sizeof pb));
    if (v->src_off) base_str_printf(&s, " + %lld", (long long)v->src_off);
    base_str_printf(&s, ";\n        %s *dp = %s", E, c_ptr(e, dst, E, pb, sizeof pb));
    if (v->dst_off) base_str_printf(&s, " + %lld", (long long)v->dst_off);
    base_str_cat(&s, ";\n");
    emit_range(&s, items, per, n_tasks);
    base_str_cat(&s, "        for (int64_t it = it0; it < it1; it++) {\n");
    const char *j0 = "0";
    char j1[64];
    snprintf(j1, sizeof j1, "%lld", (long long)inner);
    if (nch > 1) {
        if (rows > 1) base_str_printf(&s, "            const int64_t row = it / %lld, j0 = it %% %lld * %lld;\n",
                                      (long long)nch, (long long)nch, (long long)cs);
        else base_str_printf(&s, "            const int64_t j0 = it * %lld;\n", (long long)cs);
        base_str_printf(&s, "            const int64_t j1 = j0 + %lld < %lld ? j0 + %lld : %lld;\n", (long long)cs,
                        (long long)inner, (long long)cs, (long long)inner);
        j0 = "j0";
        snprintf(j1, sizeof j1, "j1");
    } else if (rows > 1) {
        base_str_cat(&s, "            const int64_t row = it;\n");
    } else {
        base_str_cat(&s, "            (void)it;\n");
    }
    move_emit_coords(&s, "int64_t", "row", r - 1, v->dims, need, "            ");
    offset_expr(so, sizeof so, r, v->dims, v->src_str, src_c);
    offset_expr(dof, sizeof dof, r, v->dims, v->dst_str, dst_c);
    if (run) {
        if (nch > 1)
            base_str_printf(&s, "            memcpy(dp%s + j0, sp%s + j0, (size_t)(j1 - j0) * %zu);\n", dof, so, es);
        else base_str_printf(&s, "            memcpy(dp%s, sp%s, %llu);\n", dof, so, (unsigned long long)(inner * (int64_t)es));
    } else {
        char sj[64] = "", dj[64] = "";
        if (ss == 1) snprintf(sj, sizeof sj, " + j");
        else if (ss != 0) snprintf(sj, sizeof sj, " + j * %lld", (long long)ss);
        if (ds == 1) snprintf(dj, sizeof dj, " + j");
        else if (ds != 0) snprintf(dj, sizeof dj, " + j * %lld", (long long)ds);
        char di[600], si[600];
        snprintf(di, sizeof di, "%s%s", dof, dj);
        snprintf(si, sizeof si, "%s%s", so, sj);
        base_str_printf(&s, "            for (int64_t j = %s; j < %s; j++) dp[%s] = sp[%s];\n", j0, j1,
                        di[0] ? di + 3 : "0", si[0] ? si + 3 : "0");
    }
    base_str_cat(&s, "        }\n");
    add_piece(m, &s, n_tasks);
}

/* Fills dst with one value's bits. */
static void piece_fill(move *m, const char *what, const ir_value *dst, uint64_t bits)
{
    if (!placed(m, dst)) return;
    size_t es = ir_dtype_size(dst->t.dtype);
    const char *E = bits_type(es);
    int64_t total = ir_numel(&dst->t);
    if (total == 0) return;
    int64_t n_tasks = tasks_for(m, total * (int64_t)es, total), per = ceil_div(total, n_tasks);
    n_tasks = ceil_div(total, per);
    base_str s;
    base_str_init(&s);
    char pb[256], lb[64];
    base_str_printf(&s, "        /* %s */\n        %s *dp = %s;\n", what, E, c_ptr(m->e, dst, E, pb, sizeof pb));
    emit_range(&s, total, per, n_tasks);
    base_str_printf(&s, "        for (int64_t it = it0; it < it1; it++) dp[it] = %s;\n", bits_lit(es, bits, lb, sizeof lb));
    add_piece(m, &s, n_tasks);
}

/* ---- the ops ----------------------------------------------------------------------------- */

static void emit_gather(move *m)
{
    const ir_node *n = m->n;
    c_emitter *e = m->e;
    const ir_tensor *x = &n->in[0]->t, *ind = &n->in[1]->t;
    if (!placed(m, n->out[0])) return;
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
    int64_t outer = ir_dims_numel(axis, x->dims), d = x->dims[axis];
    int64_t inner = ir_dims_numel(x->rank - axis - 1, x->dims + axis + 1), n_ind = ir_numel(ind);
    int64_t items = outer * n_ind;
    if (items == 0 || inner == 0) return;
    size_t es = ir_dtype_size(x->dtype);
    const char *E = bits_type(es), *IT = c_type(ind->dtype);
    int64_t n_tasks = tasks_for(m, items * inner * (int64_t)es, items), per = ceil_div(items, n_tasks);
    n_tasks = ceil_div(items, per);
    base_str s;
    base_str_init(&s);
    char pb[256], lb[256];
    base_str_printf(&s, "        /* gather %lld x %lld rows of %lld elements from %lld */\n", (long long)outer,
                    (long long)n_ind, (long long)inner, (long long)d);
    base_str_printf(&s, "        const %s *sp = %s;\n", E, c_ptr(e, n->in[0], E, pb, sizeof pb));
    base_str_printf(&s, "        const %s *ix = %s;\n", IT, c_ptr(e, n->in[1], IT, pb, sizeof pb));
    base_str_printf(&s, "        %s *dp = %s;\n", E, c_ptr(e, n->out[0], E, pb, sizeof pb));
    emit_range(&s, items, per, n_tasks);
    base_str_cat(&s, "        for (int64_t it = it0; it < it1; it++) {\n");
    if (outer > 1)
        base_str_printf(&s, "            const int64_t o = it / %lld;\n            int64_t at = (int64_t)ix[it %% %lld];\n",
                        (long long)n_ind, (long long)n_ind);
    else base_str_cat(&s, "            int64_t at = (int64_t)ix[it];\n");
    base_str_printf(&s, "            if (at < 0) at += %lld;\n            if (at < 0 || at >= %lld) {\n", (long long)d,
                    (long long)d);
    base_str_cat(&s, "                c->host->fail(c->host, \"");
    cat_cstring(&s, ir_node_label(n, lb, sizeof lb));
    base_str_printf(&s, ": index out of range\");\n                at = at < 0 ? 0 : %lld;\n            }\n",
                    (long long)d - 1);
    char ob[64] = "";
    if (outer > 1) snprintf(ob, sizeof ob, "o * %lld + ", (long long)d);
    base_str_printf(&s, "            memcpy(dp + it * %lld, sp + (%sat) * %lld, %llu);\n        }\n", (long long)inner, ob,
                    (long long)inner, (unsigned long long)(inner * (int64_t)es));
    add_piece(m, &s, n_tasks);
}

static void emit_pad(move *m)
{
    const ir_node *n = m->n;
    c_emitter *e = m->e;
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    move_pad pp;
    move_pad_params(n, &pp);
    if (!placed(m, n->out[0])) return;
    int r = y->rank;
    int64_t total = ir_numel(y);
    if (total == 0) return;
    size_t es = ir_dtype_size(x->dtype);
    const char *E = bits_type(es);
    static const char *const fns[] = {[MOVE_PAD_CONSTANT] = NULL, [MOVE_PAD_REFLECT] = "kx_pad_reflect",
                                      [MOVE_PAD_EDGE] = "kx_pad_edge", [MOVE_PAD_WRAP] = "kx_pad_wrap"};
    const char *fn = fns[pp.mode];
    if (fn && !strstr(base_str_get(&e->decls), "kx_pad_reflect("))
        base_str_cat(&e->decls,
                     "/* Pad's source coordinate of an out-of-range coordinate i along a dim of d (emit_move.c). */\n"
                     "static inline int64_t kx_pad_reflect(int64_t i, int64_t d)\n"
                     "{\n    if (d == 1) return 0;\n    int64_t p = 2 * (d - 1), j = ((i % p) + p) % p;\n"
                     "    return j < d ? j : p - j;\n}\n"
                     "static inline int64_t kx_pad_edge(int64_t i, int64_t d) { return i < 0 ? 0 : i >= d ? d - 1 : i; }\n"
                     "static inline int64_t kx_pad_wrap(int64_t i, int64_t d) { return ((i % d) + d) % d; }\n\n");
    int64_t istr[IR_MAX_RANK];
    move_contiguous_strides(r, x->dims, istr);
    int64_t wdt = y->dims[r - 1], rows = total / wdt;
    int64_t n_tasks = tasks_for(m, total * (int64_t)es, rows), per = ceil_div(rows, n_tasks);
    n_tasks = ceil_div(rows, per);
    base_str s;
    base_str_init(&s);
    char pb[256], fill[64];
    bits_lit(es, pp.fill, fill, sizeof fill);
    base_str_printf(&s, "        /* pad (%s) */\n", ir_node_attr_str(n, "mode", "constant"));
    if (ir_numel(x) > 0) base_str_printf(&s, "        const %s *sp = %s;\n", E, c_ptr(e, n->in[0], E, pb, sizeof pb));
    base_str_printf(&s, "        %s *dp = %s;\n", E, c_ptr(e, n->out[0], E, pb, sizeof pb));
    emit_range(&s, rows, per, n_tasks);
    base_str_printf(&s, "        for (int64_t row = it0; row < it1; row++) {\n            %s *dr = dp + row * %lld;\n",
                    E, (long long)wdt);
    bool constant = pp.mode == MOVE_PAD_CONSTANT;
    int64_t lead = pp.lead[r - 1], kept = pp.kept[r - 1], crop = pp.crop[r - 1];
    if (ir_numel(x) == 0) {
        base_str_printf(&s, "            for (int64_t j = 0; j < %lld; j++) dr[j] = %s;\n        }\n", (long long)wdt, fill);
        add_piece(m, &s, n_tasks);
        return;
    }
    if (r > 1) {
        base_str_cat(&s, "            int64_t q = row, so = 0;\n");
        if (constant) base_str_cat(&s, "            int inside = 1;\n");
        for (int d = r - 2; d >= 0; d--) {
            base_str_printf(&s, "            {\n                int64_t i = q %% %lld;\n", (long long)y->dims[d]);
            base_str_printf(&s, "                q /= %lld;\n", (long long)y->dims[d]);
            if (pp.lead[d] || pp.crop[d] || pp.kept[d] != y->dims[d]) {
                base_str_printf(&s, "                i -= %lld;\n", (long long)pp.lead[d]);
                if (constant) base_str_printf(&s, "                if (i < 0 || i >= %lld) inside = 0;\n", (long long)pp.kept[d]);
                else base_str_printf(&s, "                if (i < 0 || i >= %lld) i = %s(i, %lld);\n", (long long)pp.kept[d],
                                     fn, (long long)pp.kept[d]);
                if (pp.crop[d]) base_str_printf(&s, "                i += %lld;\n", (long long)pp.crop[d]);
            }
            base_str_printf(&s, "                so += i * %lld;\n            }\n", (long long)istr[d]);
        }
        base_str_cat(&s, "            (void)q;\n");
        if (constant)
            base_str_printf(&s, "            if (!inside) {\n                for (int64_t j = 0; j < %lld; j++) dr[j] = %s;\n"
                                "                continue;\n            }\n",
                            (long long)wdt, fill);
    } else {
        base_str_cat(&s, "            const int64_t so = 0;\n");
    }
    if (crop) base_str_printf(&s, "            const %s *sr = sp + so + %lld;\n", E, (long long)crop);
    else base_str_printf(&s, "            const %s *sr = sp + so;\n", E);
    if (lead > 0) {
        if (constant) base_str_printf(&s, "            for (int64_t j = 0; j < %lld; j++) dr[j] = %s;\n", (long long)lead, fill);
        else base_str_printf(&s, "            for (int64_t j = 0; j < %lld; j++) dr[j] = sr[%s(j - %lld, %lld)];\n",
                             (long long)lead, fn, (long long)lead, (long long)kept);
    }
    if (kept > 0)
        base_str_printf(&s, "            memcpy(dr + %lld, sr, %llu);\n", (long long)lead,
                        (unsigned long long)(kept * (int64_t)es));
    if (lead + kept < wdt) {
        if (constant)
            base_str_printf(&s, "            for (int64_t j = %lld; j < %lld; j++) dr[j] = %s;\n", (long long)(lead + kept),
                            (long long)wdt, fill);
        else base_str_printf(&s, "            for (int64_t j = %lld; j < %lld; j++) dr[j] = sr[%s(j - %lld, %lld)];\n",
                             (long long)(lead + kept), (long long)wdt, fn, (long long)lead, (long long)kept);
    }
    base_str_cat(&s, "        }\n");
    add_piece(m, &s, n_tasks);
}

static void emit_reduce(move *m)
{
    const ir_node *n = m->n;
    c_emitter *e = m->e;
    const ir_tensor *x = &n->in[0]->t;
    if (!placed(m, n->out[0])) return;
    bool reduced[IR_MAX_RANK];
    move_reduce_axes(n, reduced);
    int64_t total = ir_numel(x), outs = ir_numel(&n->out[0]->t);
    if (outs == 0) return;
    /* kept and reduced dims, each merged with its same-kind neighbours */
    int64_t kd[IR_MAX_RANK], ks[IR_MAX_RANK], rd[IR_MAX_RANK], rs[IR_MAX_RANK], istr[IR_MAX_RANK];
    int nk = 0, nr = 0, last = -1;
    move_contiguous_strides(x->rank, x->dims, istr);
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] == 1) continue;
        int kind = reduced[d];
        if (kind == last) {
            if (kind) rd[nr - 1] *= x->dims[d], rs[nr - 1] = istr[d];
            else kd[nk - 1] *= x->dims[d], ks[nk - 1] = istr[d];
        } else if (kind) {
            rd[nr] = x->dims[d], rs[nr++] = istr[d];
        } else {
            kd[nk] = x->dims[d], ks[nk++] = istr[d];
        }
        last = kind;
    }
    int64_t count = outs ? total / outs : 0;
    const char *T = c_type(x->dtype);
    kiln_op op = n->op;
    int64_t n_tasks = tasks_for(m, total * (int64_t)ir_dtype_size(x->dtype), outs), per = ceil_div(outs, n_tasks);
    n_tasks = ceil_div(outs, per);
    base_str s;
    base_str_init(&s);
    char pb[256];
    base_str_printf(&s, "        /* %s: %lld outputs over %lld elements each, in double */\n", n->op_type, (long long)outs,
                    (long long)count);
    base_str_printf(&s, "        const %s *xp = %s;\n", T, c_ptr(e, n->in[0], T, pb, sizeof pb));
    base_str_printf(&s, "        %s *yp = %s;\n", T, c_ptr(e, n->out[0], T, pb, sizeof pb));
    emit_range(&s, outs, per, n_tasks);
    base_str_cat(&s, "        for (int64_t o = it0; o < it1; o++) {\n");
    /* the output's coordinates along the kept dims */
    if (nk == 1) base_str_cat(&s, "            const int64_t i0 = o;\n");
    if (nk > 1) {
        base_str_cat(&s, "            int64_t q = o;\n");
        for (int k = nk - 1; k > 0; k--)
            base_str_printf(&s, "            const int64_t i%d = q %% %lld;\n            q /= %lld;\n", k,
                            (long long)kd[k], (long long)kd[k]);
        base_str_cat(&s, "            const int64_t i0 = q;\n");
    }
    base_str_cat(&s, "            const int64_t base = 0");
    for (int k = 0; k < nk; k++) base_str_printf(&s, " + i%d * %lld", k, (long long)ks[k]);
    base_str_cat(&s, ";\n");
    const char *init = op == KILN_OP_REDUCE_MAX ? "-INFINITY" : op == KILN_OP_REDUCE_MIN ? "INFINITY"
                       : op == KILN_OP_REDUCE_PROD                        ? "1.0"
                                                                          : "0.0";
    base_str_printf(&s, "            double acc = %s;\n", init);
    for (int k = 0; k < nr; k++)
        base_str_printf(&s, "%*sfor (int64_t r%d = 0; r%d < %lld; r%d++) {\n", 12 + 4 * k, "", k, k, (long long)rd[k], k);
    int ind = 12 + 4 * nr;
    base_str_printf(&s, "%*sconst double a = xp[base", ind, "");
    for (int k = 0; k < nr; k++) base_str_printf(&s, " + r%d * %lld", k, (long long)rs[k]);
    base_str_cat(&s, "];\n");
    switch (op) {
    case KILN_OP_REDUCE_MAX: base_str_printf(&s, "%*sif (a > acc || a != a) acc = a;\n", ind, ""); break;
    case KILN_OP_REDUCE_MIN: base_str_printf(&s, "%*sif (a < acc || a != a) acc = a;\n", ind, ""); break;
    case KILN_OP_REDUCE_PROD: base_str_printf(&s, "%*sacc *= a;\n", ind, ""); break;
    case KILN_OP_REDUCE_L1: base_str_printf(&s, "%*sacc += fabs(a);\n", ind, ""); break;
    case KILN_OP_REDUCE_L2: case KILN_OP_REDUCE_SUM_SQUARE: base_str_printf(&s, "%*sacc += a * a;\n", ind, ""); break;
    default: base_str_printf(&s, "%*sacc += a;\n", ind, ""); break;
    }
    for (int k = nr - 1; k >= 0; k--) base_str_printf(&s, "%*s}\n", 12 + 4 * k, "");
    const char *fin = op == KILN_OP_REDUCE_L2 ? "sqrt(acc)" : op == KILN_OP_REDUCE_LOG_SUM ? "log(acc)" : "acc";
    if (op == KILN_OP_REDUCE_MEAN)
        base_str_printf(&s, "            yp[o] = (%s)(acc / %lld.0);\n", T, (long long)count);
    else base_str_printf(&s, "            yp[o] = (%s)%s;\n", T, fin);
    base_str_cat(&s, "        }\n");
    add_piece(m, &s, n_tasks);
}

static void emit_arg(move *m)
{
    const ir_node *n = m->n;
    c_emitter *e = m->e;
    const ir_tensor *x = &n->in[0]->t;
    if (!placed(m, n->out[0])) return;
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
    int64_t outer = ir_dims_numel(axis, x->dims), len = x->dims[axis];
    int64_t inner = ir_dims_numel(x->rank - axis - 1, x->dims + axis + 1), outs = outer * inner;
    if (outs == 0) return;
    bool is_max = n->op == KILN_OP_ARG_MAX, last = ir_node_attr_int(n, "select_last_index", 0) != 0;
    bool f = x->dtype == KILN_F32 || x->dtype == KILN_F64;
    const char *T = c_type(x->dtype);
    int64_t n_tasks = tasks_for(m, ir_numel(x) * (int64_t)ir_dtype_size(x->dtype), outs), per = ceil_div(outs, n_tasks);
    n_tasks = ceil_div(outs, per);
    base_str s;
    base_str_init(&s);
    char pb[256];
    base_str_printf(&s, "        /* %s over %lld elements, %lld apart */\n", n->op_type, (long long)len, (long long)inner);
    base_str_printf(&s, "        const %s *xp = %s;\n", T, c_ptr(e, n->in[0], T, pb, sizeof pb));
    base_str_printf(&s, "        int64_t *yp = %s;\n", c_ptr(e, n->out[0], "int64_t", pb, sizeof pb));
    emit_range(&s, outs, per, n_tasks);
    base_str_cat(&s, "        for (int64_t o = it0; o < it1; o++) {\n");
    if (inner > 1)
        base_str_printf(&s, "            const %s *xr = xp + o / %lld * %lld + o %% %lld;\n", T, (long long)inner,
                        (long long)(len * inner), (long long)inner);
    else base_str_printf(&s, "            const %s *xr = xp + o * %lld;\n", T, (long long)len);
    base_str_printf(&s, "            int64_t best = 0;\n            %s bv = xr[0];\n", T);
    base_str_printf(&s, "            for (int64_t k = 1; k < %lld; k++) {\n                const %s a = xr[k * %lld];\n",
                    (long long)len, T, (long long)inner);
    const char *cmp = is_max ? ">" : "<";
    /* NaN wins, and the first NaN stays (as the interpreter) */
    if (f) base_str_printf(&s, "                if ((a %s bv || (a != a && bv == bv))%s) {\n", cmp, last ? " || a == bv" : "");
    else base_str_printf(&s, "                if (a %s bv%s) {\n", cmp, last ? " || a == bv" : "");
    base_str_cat(&s, "                    best = k;\n                    bv = a;\n                }\n            }\n"
                     "            yp[o] = best;\n        }\n");
    add_piece(m, &s, n_tasks);
}

kiln_status c_emit_move(c_emitter *e, const sched_group *grp)
{
    const ir_node *n = grp->nodes[0];
    move m = {.e = e, .n = n, .n_threads = e->o->n_threads > 0 ? e->o->n_threads : 1};
    if (grp->n_nodes != 1 || !c_can_move(n)) {
        char lb[256];
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "the c target cannot emit %s as data movement",
                             ir_node_label(n, lb, sizeof lb));
    }
    for (int i = 0; i < move_n_copies(n); i++) {
        move_copy cp;
        move_copy_of(n, i, &cp);
        piece_copy(&m, cp.what, cp.src, cp.dst, &cp.v);
    }
    switch (n->op) {
    case KILN_OP_DROPOUT:
        if (n->n_out > 1 && n->out[1])
            piece_fill(&m, "the mask: all ones", n->out[1], move_bits_of(n->out[1]->t.dtype, 1.0));
        break;
    case KILN_OP_GATHER: emit_gather(&m); break;
    case KILN_OP_PAD: emit_pad(&m); break;
    case KILN_OP_ARG_MAX: case KILN_OP_ARG_MIN: emit_arg(&m); break;
    default:
        if (ir_ops[n->op].flags & IR_OPF_REDUCTION) emit_reduce(&m);
        break;
    }

    int64_t n_tasks = m.pieces.n_tasks;
    bool oom = m.pieces.oom;
    base_str *s = &e->ops;
    base_str_printf(s, "/* group %d (data movement, %s): ", grp->id, n->op_type);
    cat_comment(s, grp->name);
    base_str_printf(s, "; %lld rTask%s */\nstatic void op_%d(const kiln_cctx *c, int t)\n{\n",
                    (long long)(n_tasks ? n_tasks : 1), n_tasks == 1 ? "" : "s", grp->id);
    move_pieces_emit(&m.pieces, s, "const int64_t");
    base_str_cat(s, "}\n\n");
    base_str_printf(&e->init, "    stages[%d].n_rtasks = %lld;\n", grp->id, (long long)(n_tasks ? n_tasks : 1));
    return oom ? KILN_ERR_OOM : KILN_OK;
}
