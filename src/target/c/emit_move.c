/*
 * emit_move.c: the `c` target's data-movement groups (one node each):
 * copies (Identity, Dropout, and Reshape-likes whose output is a graph
 * output), Transpose, Concat, Split, Slice, Expand, Tile, DepthToSpace,
 * SpaceToDepth, Gather, Pad, and the small reductions ReduceSum/Mean/Max/
 * Min/Prod/L1/L2/SumSquare/LogSum and ArgMax/ArgMin over constant axes.
 *
 * Most of these are one or more affine copies: every output element comes
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

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Tile views each of up to IR_MAX_RANK dims as two. */
#define MOVE_MAX_RANK (2 * IR_MAX_RANK)
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

static bool movable(const ir_value *v) { return v && v->shape_known && bits_type(ir_dtype_size(v->t.dtype)); }

static bool has_in(const ir_node *n, int i) { return i < n->n_in && n->in[i]; }

/* The integers of a constant scalar or 1-D integer tensor; false when v is
 * not one or holds more than max. */
static bool const_ints(const ir_value *v, int max, int64_t *out, int *n)
{
    if (!v || !v->is_const || !ir_dtype_is_int(v->t.dtype) || v->t.rank > 1) return false;
    int64_t count = ir_numel(&v->t);
    if (count > 0 && !v->t.data) return false;
    if (count > max) return false;
    for (int64_t i = 0; i < count; i++) out[i] = ir_get_i64(&v->t, i);
    *n = (int)count;
    return true;
}

/* The list from constant input i, or else from the attribute; *n = -1
 * when neither is there. False when the input is there but not constant. */
static bool ints_of(const ir_node *n, int i, const char *attr, int max, int64_t *out, int *count)
{
    if (has_in(n, i)) return const_ints(n->in[i], max, out, count);
    const ir_attr *a = ir_node_attr(n, attr);
    *count = -1;
    if (!a) return true;
    if (a->kind != IR_ATTR_INTS || a->n > max) return false;
    for (int k = 0; k < a->n; k++) out[k] = a->ints[k];
    *count = a->n;
    return true;
}

static int norm_axis(int64_t axis, int rank)
{
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void contiguous_strides(int rank, const int64_t *dims, int64_t *str)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        str[d] = s;
        s *= dims[d];
    }
}

/* The bits of value v in dtype t (for fills), as ir_set_f64 stores it. */
static uint64_t bits_of(kiln_dtype t, double v)
{
    unsigned char buf[16] = {0};
    ir_tensor x = {.dtype = t, .data = buf};
    ir_set_f64(&x, 0, v);
    uint64_t b = 0;
    memcpy(&b, buf, ir_dtype_size(t) <= 8 ? ir_dtype_size(t) : 8); /* little-endian hosts only */
    return b;
}

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

/* Slice's start and step per input dim (unsliced: 0, 1); false when the
 * parameters are not constant or do not give the inferred output shape. */
static bool slice_params(const ir_node *n, int64_t *start, int64_t *step)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int r = x->rank;
    int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes_in[IR_MAX_RANK], steps[IR_MAX_RANK];
    int ns, ne, na = -1, nt = -1;
    if (n->opset < 10) {
        if (!ints_of(n, 99, "starts", IR_MAX_RANK, starts, &ns) || !ints_of(n, 99, "ends", IR_MAX_RANK, ends, &ne) ||
            !ints_of(n, 99, "axes", IR_MAX_RANK, axes_in, &na))
            return false;
        if (ns < 0 || ne < 0) return false;
    } else {
        if (!has_in(n, 1) || !has_in(n, 2)) return false;
        if (!const_ints(n->in[1], IR_MAX_RANK, starts, &ns) || !const_ints(n->in[2], IR_MAX_RANK, ends, &ne)) return false;
        if (has_in(n, 3) && !const_ints(n->in[3], IR_MAX_RANK, axes_in, &na)) return false;
        if (has_in(n, 4) && !const_ints(n->in[4], IR_MAX_RANK, steps, &nt)) return false;
    }
    if (ne != ns || (na >= 0 && na != ns) || (nt >= 0 && nt != ns) || ns > r) return false;
    int64_t dims[IR_MAX_RANK];
    bool seen[IR_MAX_RANK] = {false};
    for (int k = 0; k < r; k++) {
        start[k] = 0;
        step[k] = 1;
        dims[k] = x->dims[k];
    }
    for (int i = 0; i < ns; i++) {
        int k = na >= 0 ? norm_axis(axes_in[i], r) : i;
        if (k < 0 || seen[k]) return false;
        seen[k] = true;
        int64_t d = x->dims[k], s = starts[i], t = ends[i], p = nt >= 0 ? steps[i] : 1;
        if (p == 0 || p == INT64_MIN) return false;
        if (s < 0) s += d;
        if (t < 0) t += d;
        int64_t count;
        if (p > 0) {
            s = KILN_MAX(0, KILN_MIN(s, d));
            t = KILN_MAX(0, KILN_MIN(t, d));
            count = t > s ? (int64_t)((uint64_t)(t - s - 1) / (uint64_t)p) + 1 : 0;
        } else {
            s = KILN_MAX(0, KILN_MIN(s, d - 1));
            t = KILN_MAX(-1, KILN_MIN(t, d - 1));
            count = s > t ? (int64_t)((uint64_t)(s - t - 1) / (0 - (uint64_t)p)) + 1 : 0;
        }
        start[k] = s;
        step[k] = p;
        dims[k] = count;
    }
    if (y->rank != r) return false;
    for (int k = 0; k < r; k++)
        if (dims[k] != y->dims[k]) return false;
    return true;
}

/* Pad's parameters, as ir_eval_pad reads them. */
typedef struct pad_params {
    int mode; /* 0 constant, 1 reflect, 2 edge, 3 wrap */
    int64_t lead[IR_MAX_RANK], crop[IR_MAX_RANK], kept[IR_MAX_RANK];
    uint64_t fill; /* constant mode: the value's bits */
} pad_params;

static bool pad_params_of(const ir_node *n, pad_params *pp)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int r = x->rank;
    memset(pp, 0, sizeof(*pp));
    if (r < 1 || !ir_node_attr_kind_ok(n, "mode", IR_ATTR_STRING)) return false;
    const char *mode = ir_node_attr_str(n, "mode", "constant");
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    pp->mode = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(mode, modes[i]) == 0) pp->mode = i;
    if (pp->mode < 0) return false;
    int64_t pads[2 * IR_MAX_RANK];
    int np;
    if (!ints_of(n, 1, "pads", 2 * IR_MAX_RANK, pads, &np)) return false;
    if (np < 0 && !has_in(n, 1) && !ints_of(n, 1, "paddings", 2 * IR_MAX_RANK, pads, &np)) return false;
    if (np < 0) return false;
    int axes[IR_MAX_RANK], na = r;
    if (has_in(n, 3)) {
        int64_t list[IR_MAX_RANK];
        if (!const_ints(n->in[3], IR_MAX_RANK, list, &na)) return false;
        bool seen[IR_MAX_RANK] = {false};
        for (int i = 0; i < na; i++) {
            axes[i] = norm_axis(list[i], r);
            if (axes[i] < 0 || seen[axes[i]]) return false;
            seen[axes[i]] = true;
        }
    } else {
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (np != 2 * na) return false;
    int64_t begin[IR_MAX_RANK] = {0}, end[IR_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        begin[axes[i]] = pads[i];
        end[axes[i]] = pads[na + i];
    }
    if (y->rank != r) return false;
    for (int k = 0; k < r; k++) {
        pp->crop[k] = begin[k] < 0 ? -begin[k] : 0;
        pp->lead[k] = begin[k] > 0 ? begin[k] : 0;
        int64_t crop_end = end[k] < 0 ? -end[k] : 0, trail = end[k] > 0 ? end[k] : 0;
        if (pp->crop[k] > x->dims[k] || crop_end > x->dims[k] - pp->crop[k]) return false;
        pp->kept[k] = x->dims[k] - pp->crop[k] - crop_end;
        if (pp->lead[k] > INT64_MAX / 4 || trail > INT64_MAX / 4) return false;
        if (pp->kept[k] + pp->lead[k] + trail != y->dims[k]) return false;
        if (pp->mode != 0 && pp->kept[k] == 0 && y->dims[k] > 0) return false;
    }
    if (pp->mode == 0) {
        size_t size = ir_dtype_size(x->dtype);
        if (has_in(n, 2)) {
            const ir_value *v = n->in[2];
            if (!v->is_const || !v->t.data || v->t.dtype != x->dtype || v->t.rank > 1 || ir_numel(&v->t) > 1)
                return false;
            if (ir_numel(&v->t) == 1) memcpy(&pp->fill, v->t.data, size);
        } else if (ir_node_attr(n, "value") && ir_dtype_is_numeric(x->dtype)) {
            const ir_attr *a = ir_node_attr(n, "value");
            if (a->kind != IR_ATTR_FLOAT) return false;
            pp->fill = bits_of(x->dtype, a->f);
        }
    }
    return true;
}

/* Which dims a Reduce reduces; false when its axes are not constant. */
static bool reduce_axes(const ir_node *n, bool *reduced)
{
    const ir_tensor *x = &n->in[0]->t;
    int64_t axes[IR_MAX_RANK];
    int na;
    memset(reduced, 0, IR_MAX_RANK * sizeof(bool));
    if (!ints_of(n, 1, "axes", IR_MAX_RANK, axes, &na)) return false;
    for (int i = 0; i < na; i++) {
        int d = norm_axis(axes[i], x->rank);
        if (d < 0 || reduced[d]) return false;
        reduced[d] = true;
    }
    if (na <= 0)
        for (int d = 0; d < x->rank; d++) reduced[d] = ir_node_attr_int(n, "noop_with_empty_axes", 0) == 0;
    return true;
}

bool c_can_move(const ir_node *n)
{
    if (n->op >= KILN_OP_COUNT || n->n_in < 1 || !n->in[0] || !movable(n->in[0])) return false;
    if (n->in[0]->graph != n->graph) return false;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] && !movable(n->out[j])) return false;
    if (n->n_out < 1 || !n->out[0]) return false;
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    switch (n->op) {
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY:
        return ir_numel(x) == ir_numel(y) && x->dtype == y->dtype;
    case KILN_OP_DROPOUT:
        return ir_numel(x) == ir_numel(y) &&
               (!has_in(n, 2) || (n->in[2]->is_const && n->in[2]->t.data && ir_get_f64(&n->in[2]->t, 0) == 0));
    case KILN_OP_TRANSPOSE: {
        const ir_attr *p = ir_node_attr(n, "perm");
        if (y->rank != x->rank) return false;
        if (!p) return true;
        if (p->kind != IR_ATTR_INTS || p->n != x->rank) return false;
        bool seen[IR_MAX_RANK] = {false};
        for (int i = 0; i < p->n; i++) {
            if (p->ints[i] < 0 || p->ints[i] >= x->rank || seen[p->ints[i]]) return false;
            seen[p->ints[i]] = true;
            if (y->dims[i] != x->dims[p->ints[i]]) return false;
        }
        return true;
    }
    case KILN_OP_CONCAT: {
        if (!ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT) || (!ir_node_attr(n, "axis") && n->opset >= 4) || x->rank == 0)
            return false;
        int axis = norm_axis(ir_node_attr_int(n, "axis", 1), x->rank);
        if (axis < 0 || y->rank != x->rank) return false;
        int64_t sum = 0;
        for (int i = 0; i < n->n_in; i++) {
            const ir_value *v = n->in[i];
            if (!v || !v->shape_known || v->t.dtype != x->dtype || v->t.rank != x->rank || v->graph != n->graph)
                return false;
            sum += v->t.dims[axis];
        }
        return sum == y->dims[axis];
    }
    case KILN_OP_SPLIT: {
        if (!ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT) || x->rank == 0) return false;
        int axis = norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
        if (axis < 0) return false;
        int64_t sum = 0;
        for (int j = 0; j < n->n_out; j++) {
            const ir_value *v = n->out[j];
            if (!v || v->t.rank != x->rank) return false;
            sum += v->t.dims[axis];
        }
        return sum == x->dims[axis];
    }
    case KILN_OP_SLICE: {
        int64_t start[IR_MAX_RANK], step[IR_MAX_RANK];
        return slice_params(n, start, step);
    }
    case KILN_OP_GATHER: {
        const ir_value *ind = has_in(n, 1) ? n->in[1] : NULL;
        if (!ind || !ind->shape_known || (ind->t.dtype != KILN_I32 && ind->t.dtype != KILN_I64) || x->rank == 0)
            return false;
        if (ind->graph != n->graph || !ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT)) return false;
        int axis = norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
        if (axis < 0 || y->rank != x->rank - 1 + ind->t.rank) return false;
        int64_t d = x->dims[axis];
        if (d == 0 && ir_numel(&ind->t) > 0) return false;
        if (ind->is_const && ind->t.data) /* constant indices out of range: the interpreter reports them */
            for (int64_t i = 0; i < ir_numel(&ind->t); i++) {
                int64_t v = ir_get_i64(&ind->t, i);
                if (v < -d || v >= d) return false;
            }
        return true;
    }
    case KILN_OP_EXPAND:
        if (y->rank < x->rank || y->dtype != x->dtype) return false;
        for (int d = 0; d < x->rank; d++) {
            int64_t xd = x->dims[d], yd = y->dims[y->rank - x->rank + d];
            if (xd != yd && xd != 1) return false;
        }
        return true;
    case KILN_OP_TILE: {
        int64_t reps[IR_MAX_RANK];
        int nr;
        if (!has_in(n, 1) || !const_ints(n->in[1], IR_MAX_RANK, reps, &nr) || nr != x->rank || y->rank != x->rank)
            return false;
        for (int d = 0; d < x->rank; d++)
            if (reps[d] < 0 || x->dims[d] * reps[d] != y->dims[d]) return false;
        return true;
    }
    case KILN_OP_PAD: {
        pad_params pp;
        return pad_params_of(n, &pp);
    }
    case KILN_OP_DEPTH_TO_SPACE: case KILN_OP_SPACE_TO_DEPTH: {
        int64_t b = ir_node_attr_int(n, "blocksize", 0);
        if (x->rank != 4 || y->rank != 4 || b < 1 || !ir_node_attr_kind_ok(n, "mode", IR_ATTR_STRING)) return false;
        if (n->op == KILN_OP_DEPTH_TO_SPACE) {
            const char *mode = ir_node_attr_str(n, "mode", "DCR");
            if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0) return false;
            return x->dims[1] % (b * b) == 0 && y->dims[1] == x->dims[1] / (b * b) && y->dims[2] == x->dims[2] * b &&
                   y->dims[3] == x->dims[3] * b;
        }
        return x->dims[2] % b == 0 && x->dims[3] % b == 0 && y->dims[1] == x->dims[1] * b * b &&
               y->dims[2] == x->dims[2] / b && y->dims[3] == x->dims[3] / b;
    }
    case KILN_OP_REDUCE_SUM: case KILN_OP_REDUCE_MEAN: case KILN_OP_REDUCE_MAX: case KILN_OP_REDUCE_MIN:
    case KILN_OP_REDUCE_PROD: case KILN_OP_REDUCE_L1: case KILN_OP_REDUCE_L2: case KILN_OP_REDUCE_SUM_SQUARE:
    case KILN_OP_REDUCE_LOG_SUM: {
        bool reduced[IR_MAX_RANK];
        if (x->dtype != KILN_F32 && x->dtype != KILN_F64) return false;
        if (!ir_node_attr_kind_ok(n, "keepdims", IR_ATTR_INT) || !ir_node_attr_kind_ok(n, "noop_with_empty_axes", IR_ATTR_INT))
            return false;
        return y->dtype == x->dtype && reduce_axes(n, reduced);
    }
    case KILN_OP_ARG_MAX: case KILN_OP_ARG_MIN: {
        if (!c_type(x->dtype) || y->dtype != KILN_I64 || x->rank == 0) return false;
        if (!ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT) || !ir_node_attr_kind_ok(n, "select_last_index", IR_ATTR_INT)) return false;
        int axis = norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
        return axis >= 0 && x->dims[axis] > 0;
    }
    default: return false;
    }
}

/* ---- the emitter ----------------------------------------------------------------------- */

/* A part of the op's work with its own rTasks (one input of a Concat...). */
typedef struct piece {
    base_str code; /* statements using u, the rTask within the piece */
    int64_t n_tasks;
} piece;

typedef struct move {
    c_emitter *e;
    const ir_node *n;
    int n_threads;
    piece *pieces;
    int n_pieces, cap_pieces;
    bool oom;
} move;

static bool placed(const move *m, const ir_value *v)
{
    return v && v->graph == m->e->g && m->e->p->place[v->id].loc != SCHED_LOC_NONE;
}

/* Takes ownership of code. */
static void add_piece(move *m, base_str *code, int64_t n_tasks)
{
    if (m->n_pieces == m->cap_pieces) {
        int cap = m->cap_pieces ? 2 * m->cap_pieces : 8;
        piece *p = base_realloc(m->pieces, (size_t)cap * sizeof(piece));
        if (!p) {
            m->oom = true;
            base_str_free(code);
            return;
        }
        m->pieces = p;
        m->cap_pieces = cap;
    }
    if (code->oom) m->oom = true;
    m->pieces[m->n_pieces++] = (piece){*code, n_tasks};
}

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

/* Coordinates i<d> of `row` along dims[0..r-2] where need[d] (the outermost
 * needed one and all after it are computed from q). */
static void emit_coords(base_str *s, const char *row, int r, const int64_t *dims, const bool *need, const char *ind)
{
    int lo = -1;
    for (int d = 0; d < r - 1 && lo < 0; d++)
        if (need[d]) lo = d;
    if (lo < 0) return;
    if (lo == 0 && r == 2) {
        base_str_printf(s, "%sconst int64_t i0 = %s;\n", ind, row);
        return;
    }
    base_str_printf(s, "%sint64_t q = %s;\n", ind, row);
    for (int d = r - 2; d > lo; d--) {
        if (need[d]) base_str_printf(s, "%sconst int64_t i%d = q %% %lld;\n", ind, d, (long long)dims[d]);
        base_str_printf(s, "%sq /= %lld;\n", ind, (long long)dims[d]);
    }
    if (lo == 0) base_str_printf(s, "%sconst int64_t i0 = q;\n", ind);
    else base_str_printf(s, "%sconst int64_t i%d = q %% %lld;\n", ind, lo, (long long)dims[lo]);
}

/* An affine view: element (i_0..i_r-1) of dims moves from src_off + sum
 * i_d src_str[d] to dst_off + sum i_d dst_str[d] (element units). */
typedef struct view {
    int rank;
    int64_t dims[MOVE_MAX_RANK];
    int64_t src_str[MOVE_MAX_RANK], dst_str[MOVE_MAX_RANK];
    int64_t src_off, dst_off;
} view;

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
static void piece_tiled(move *m, const char *what, const ir_value *src, const ir_value *dst, const view *v, int r,
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

static void piece_copy(move *m, const char *what, const ir_value *src, const ir_value *dst, view *v)
{
    c_emitter *e = m->e;
    if (!placed(m, dst)) return;
    size_t es = ir_dtype_size(src->t.dtype);
    const char *E = bits_type(es);
    int64_t total = ir_dims_numel(v->rank, v->dims);
    if (total == 0) return;
    int64_t *strs[2] = {v->src_str, v->dst_str};
    int r = c_collapse(v->rank, v->dims, 2, strs, 1);
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
    contiguous_strides(r, v->dims, cstr);
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
    emit_coords(&s, "row", r, v->dims, need, "            ");
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

/* A copy of all of src into dst (same element count). */
static void piece_flat_copy(move *m, const char *what, const ir_value *src, const ir_value *dst)
{
    view v = {.rank = 1, .dims = {ir_numel(&src->t)}, .src_str = {1}, .dst_str = {1}};
    piece_copy(m, what, src, dst, &v);
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

static void emit_transpose(move *m)
{
    const ir_node *n = m->n;
    const ir_tensor *x = &n->in[0]->t;
    int r = x->rank;
    const ir_attr *p = ir_node_attr(n, "perm");
    int64_t istr[IR_MAX_RANK];
    contiguous_strides(r, x->dims, istr);
    view v = {.rank = r};
    for (int k = 0; k < r; k++) {
        int pk = p ? (int)p->ints[k] : r - 1 - k;
        v.dims[k] = x->dims[pk];
        v.src_str[k] = istr[pk];
    }
    contiguous_strides(r, v.dims, v.dst_str);
    piece_copy(m, "transpose", n->in[0], n->out[0], &v);
}

static void emit_concat(move *m)
{
    const ir_node *n = m->n;
    const ir_tensor *y = &n->out[0]->t;
    int axis = norm_axis(ir_node_attr_int(n, "axis", 1), y->rank);
    int64_t ostr[IR_MAX_RANK], at = 0;
    contiguous_strides(y->rank, y->dims, ostr);
    for (int i = 0; i < n->n_in; i++) {
        const ir_tensor *x = &n->in[i]->t;
        view v = {.rank = x->rank, .dst_off = at * ostr[axis]};
        memcpy(v.dims, x->dims, (size_t)x->rank * sizeof(int64_t));
        contiguous_strides(x->rank, x->dims, v.src_str);
        memcpy(v.dst_str, ostr, (size_t)x->rank * sizeof(int64_t));
        char what[64];
        snprintf(what, sizeof what, "input %d", i);
        piece_copy(m, what, n->in[i], n->out[0], &v);
        at += x->dims[axis];
    }
}

static void emit_split(move *m)
{
    const ir_node *n = m->n;
    const ir_tensor *x = &n->in[0]->t;
    int axis = norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
    int64_t istr[IR_MAX_RANK], at = 0;
    contiguous_strides(x->rank, x->dims, istr);
    for (int j = 0; j < n->n_out; j++) {
        const ir_tensor *y = &n->out[j]->t;
        view v = {.rank = y->rank, .src_off = at * istr[axis]};
        memcpy(v.dims, y->dims, (size_t)y->rank * sizeof(int64_t));
        memcpy(v.src_str, istr, (size_t)y->rank * sizeof(int64_t));
        contiguous_strides(y->rank, y->dims, v.dst_str);
        char what[64];
        snprintf(what, sizeof what, "output %d", j);
        piece_copy(m, what, n->in[0], n->out[j], &v);
        at += y->dims[axis];
    }
}

static void emit_slice(move *m)
{
    const ir_node *n = m->n;
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], istr[IR_MAX_RANK];
    slice_params(n, start, step);
    contiguous_strides(x->rank, x->dims, istr);
    view v = {.rank = y->rank};
    for (int k = 0; k < y->rank; k++) {
        v.dims[k] = y->dims[k];
        v.src_str[k] = istr[k] * step[k];
        v.src_off += start[k] * istr[k];
    }
    contiguous_strides(y->rank, y->dims, v.dst_str);
    piece_copy(m, "slice", n->in[0], n->out[0], &v);
}

static void emit_expand(move *m)
{
    const ir_node *n = m->n;
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int64_t istr[IR_MAX_RANK];
    contiguous_strides(x->rank, x->dims, istr);
    view v = {.rank = y->rank};
    for (int d = 0; d < y->rank; d++) {
        int xd = d - (y->rank - x->rank);
        v.dims[d] = y->dims[d];
        v.src_str[d] = xd < 0 || x->dims[xd] == 1 ? 0 : istr[xd];
    }
    contiguous_strides(y->rank, y->dims, v.dst_str);
    piece_copy(m, "expand", n->in[0], n->out[0], &v);
}

static void emit_tile(move *m)
{
    const ir_node *n = m->n;
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int64_t reps[IR_MAX_RANK], istr[IR_MAX_RANK], ostr[IR_MAX_RANK];
    int nr;
    const_ints(n->in[1], IR_MAX_RANK, reps, &nr);
    contiguous_strides(x->rank, x->dims, istr);
    contiguous_strides(y->rank, y->dims, ostr);
    view v = {.rank = 2 * x->rank};
    for (int d = 0; d < x->rank; d++) {
        v.dims[2 * d] = reps[d];
        v.dims[2 * d + 1] = x->dims[d];
        v.src_str[2 * d] = 0;
        v.src_str[2 * d + 1] = istr[d];
        v.dst_str[2 * d] = x->dims[d] * ostr[d];
        v.dst_str[2 * d + 1] = ostr[d];
    }
    piece_copy(m, "tile", n->in[0], n->out[0], &v);
}

static void emit_depth_space(move *m)
{
    const ir_node *n = m->n;
    const ir_tensor *x = &n->in[0]->t;
    int64_t b = ir_node_attr_int(n, "blocksize", 1);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    view v = {.rank = 6};
    if (n->op == KILN_OP_DEPTH_TO_SPACE) {
        /* output viewed as [N, C/b^2, H, b, W, b]: (n, oc, h, bh, w, bw) */
        bool crd = strcmp(ir_node_attr_str(n, "mode", "DCR"), "CRD") == 0;
        int64_t cs = C / (b * b);
        int64_t d[6] = {N, cs, H, b, W, b};
        int64_t s[6] = {C * H * W, crd ? b * b * H * W : H * W, W, crd ? b * H * W : b * cs * H * W, 1,
                        crd ? H * W : cs * H * W};
        memcpy(v.dims, d, sizeof d);
        memcpy(v.src_str, s, sizeof s);
    } else {
        /* output viewed as [N, b, b, C, H/b, W/b]: (n, bh, bw, c, oh, ow) */
        int64_t d[6] = {N, b, b, C, H / b, W / b};
        int64_t s[6] = {C * H * W, W, 1, H * W, b * W, b};
        memcpy(v.dims, d, sizeof d);
        memcpy(v.src_str, s, sizeof s);
    }
    contiguous_strides(6, v.dims, v.dst_str);
    piece_copy(m, n->op == KILN_OP_DEPTH_TO_SPACE ? "depth to space" : "space to depth", n->in[0], n->out[0], &v);
}

static void emit_gather(move *m)
{
    const ir_node *n = m->n;
    c_emitter *e = m->e;
    const ir_tensor *x = &n->in[0]->t, *ind = &n->in[1]->t;
    if (!placed(m, n->out[0])) return;
    int axis = norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
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
    pad_params pp;
    pad_params_of(n, &pp);
    if (!placed(m, n->out[0])) return;
    int r = y->rank;
    int64_t total = ir_numel(y);
    if (total == 0) return;
    size_t es = ir_dtype_size(x->dtype);
    const char *E = bits_type(es);
    static const char *const fns[] = {NULL, "kx_pad_reflect", "kx_pad_edge", "kx_pad_wrap"};
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
    contiguous_strides(r, x->dims, istr);
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
    bool constant = pp.mode == 0;
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
    reduce_axes(n, reduced);
    int64_t total = ir_numel(x), outs = ir_numel(&n->out[0]->t);
    if (outs == 0) return;
    /* kept and reduced dims, each merged with its same-kind neighbours */
    int64_t kd[IR_MAX_RANK], ks[IR_MAX_RANK], rd[IR_MAX_RANK], rs[IR_MAX_RANK], istr[IR_MAX_RANK];
    int nk = 0, nr = 0, last = -1;
    contiguous_strides(x->rank, x->dims, istr);
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
    int axis = norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
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
    switch (n->op) {
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY:
        piece_flat_copy(&m, "copy", n->in[0], n->out[0]);
        break;
    case KILN_OP_DROPOUT:
        piece_flat_copy(&m, "copy", n->in[0], n->out[0]);
        if (n->n_out > 1 && n->out[1]) piece_fill(&m, "the mask: all ones", n->out[1], bits_of(n->out[1]->t.dtype, 1.0));
        break;
    case KILN_OP_TRANSPOSE: emit_transpose(&m); break;
    case KILN_OP_CONCAT: emit_concat(&m); break;
    case KILN_OP_SPLIT: emit_split(&m); break;
    case KILN_OP_SLICE: emit_slice(&m); break;
    case KILN_OP_GATHER: emit_gather(&m); break;
    case KILN_OP_EXPAND: emit_expand(&m); break;
    case KILN_OP_TILE: emit_tile(&m); break;
    case KILN_OP_PAD: emit_pad(&m); break;
    case KILN_OP_DEPTH_TO_SPACE: case KILN_OP_SPACE_TO_DEPTH: emit_depth_space(&m); break;
    case KILN_OP_ARG_MAX: case KILN_OP_ARG_MIN: emit_arg(&m); break;
    default: emit_reduce(&m); break;
    }

    int64_t n_tasks = 0;
    for (int i = 0; i < m.n_pieces; i++) n_tasks += m.pieces[i].n_tasks;
    base_str *s = &e->ops;
    base_str_printf(s, "/* group %d (data movement, %s): ", grp->id, n->op_type);
    cat_comment(s, grp->name);
    base_str_printf(s, "; %lld rTask%s */\nstatic void op_%d(const kiln_cctx *c, int t)\n{\n",
                    (long long)(n_tasks ? n_tasks : 1), n_tasks == 1 ? "" : "s", grp->id);
    if (m.n_pieces == 0) base_str_cat(s, "    (void)c;\n    (void)t;\n");
    int64_t at = 0;
    for (int i = 0; i < m.n_pieces; i++) {
        piece *p = &m.pieces[i];
        if (m.n_pieces == 1) base_str_cat(s, "    {\n        const int64_t u = t;\n");
        else if (at == 0) base_str_printf(s, "    if (t < %lld) {\n        const int64_t u = t;\n", (long long)p->n_tasks);
        else base_str_printf(s, "    if (t < %lld) {\n        const int64_t u = t - %lld;\n", (long long)(at + p->n_tasks),
                             (long long)at);
        base_str_cat(s, base_str_get(&p->code));
        if (m.n_pieces > 1) base_str_cat(s, "        return;\n");
        base_str_cat(s, "    }\n");
        at += p->n_tasks;
        base_str_free(&p->code);
    }
    base_str_cat(s, "}\n\n");
    base_str_printf(&e->init, "    stages[%d].n_rtasks = %lld;\n", grp->id, (long long)(n_tasks ? n_tasks : 1));
    base_free(m.pieces);
    return m.oom ? KILN_ERR_OOM : KILN_OK;
}
