/*
 * move_params.c: the data-movement ops' parameters, support test and
 * affine views, shared by the targets' emit_move.c (see move_params.h).
 *
 * Everything here follows the reference interpreter (ir/interp_tensor.c,
 * ir/interp_reduce.c): a parameter the interpreter would read differently,
 * or one that is not constant, makes the support test refuse the node, and
 * the node then runs in a fallback segment.
 *
 * The views: Transpose permutes the source strides; Concat and Split shift
 * one side by the part's position along the axis; Slice scales the source
 * strides by the steps; Expand gives broadcast dims stride 0; Tile views
 * each dim as (repeat, dim) with the repeat's source stride 0; DepthToSpace
 * and SpaceToDepth are 6-D transposes of [N, C, H, W].
 */
#include "target/move_params.h"

#include <stdio.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------------------ */

static bool has_in(const ir_node *n, int i) { return i < n->n_in && n->in[i]; }

static bool movable(const ir_value *v)
{
    if (!v || !v->shape_known) return false;
    size_t size = ir_dtype_size(v->t.dtype);
    return size == 1 || size == 2 || size == 4 || size == 8;
}

void move_contiguous_strides(int rank, const int64_t *dims, int64_t *str)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        str[d] = s;
        s *= dims[d];
    }
}

uint64_t move_bits_of(kiln_dtype t, double v)
{
    unsigned char buf[16] = {0};
    ir_tensor x = {.dtype = t, .data = buf};
    ir_set_f64(&x, 0, v);
    uint64_t b = 0;
    memcpy(&b, buf, ir_dtype_size(t) <= 8 ? ir_dtype_size(t) : 8); /* little-endian hosts only */
    return b;
}

/* ---- parameters ---------------------------------------------------------------------- */

static const char *const pad_modes[] = {[MOVE_PAD_CONSTANT] = "constant", [MOVE_PAD_REFLECT] = "reflect",
                                        [MOVE_PAD_EDGE] = "edge", [MOVE_PAD_WRAP] = "wrap"};

const char *move_pad_mode_name(move_pad_mode m) { return (unsigned)m < KILN_COUNT(pad_modes) ? pad_modes[m] : "?"; }

bool move_pad_params(const ir_node *n, move_pad *pp)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int r = x->rank;
    memset(pp, 0, sizeof(*pp));
    if (r < 1 || !ir_node_attr_kind_ok(n, "mode", IR_ATTR_STRING)) return false;
    const char *mode = ir_node_attr_str(n, "mode", "constant");
    int found = -1;
    for (int i = 0; i < (int)KILN_COUNT(pad_modes); i++)
        if (strcmp(mode, pad_modes[i]) == 0) found = i;
    if (found < 0) return false;
    pp->mode = (move_pad_mode)found;
    int64_t pads[2 * IR_MAX_RANK];
    int np;
    if (!ir_node_ints(n, 1, "pads", 2 * IR_MAX_RANK, pads, &np)) return false;
    if (np < 0 && !has_in(n, 1) && !ir_node_ints(n, 1, "paddings", 2 * IR_MAX_RANK, pads, &np)) return false;
    if (np < 0) return false;
    int axes[IR_MAX_RANK], na = r;
    if (has_in(n, 3)) {
        int64_t list[IR_MAX_RANK];
        if (!ir_const_ints(n->in[3], IR_MAX_RANK, list, &na)) return false;
        bool seen[IR_MAX_RANK] = {false};
        for (int i = 0; i < na; i++) {
            axes[i] = ir_norm_axis(list[i], r);
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
        if (pp->mode != MOVE_PAD_CONSTANT && pp->kept[k] == 0 && y->dims[k] > 0) return false;
    }
    if (pp->mode == MOVE_PAD_CONSTANT) {
        size_t size = ir_dtype_size(x->dtype);
        if (has_in(n, 2)) {
            const ir_value *v = n->in[2];
            if (!v->is_const || !v->t.data || v->t.dtype != x->dtype || v->t.rank > 1 || ir_numel(&v->t) > 1)
                return false;
            if (ir_numel(&v->t) == 1) memcpy(&pp->fill, v->t.data, size);
        } else if (ir_node_attr(n, "value") && ir_dtype_is_numeric(x->dtype)) {
            const ir_attr *a = ir_node_attr(n, "value");
            if (a->kind != IR_ATTR_FLOAT) return false;
            pp->fill = move_bits_of(x->dtype, a->f);
        }
    }
    return true;
}

bool move_reduce_axes(const ir_node *n, bool *reduced)
{
    const ir_tensor *x = &n->in[0]->t;
    int64_t axes[IR_MAX_RANK];
    int na;
    memset(reduced, 0, IR_MAX_RANK * sizeof(bool));
    if (!ir_node_ints(n, 1, "axes", IR_MAX_RANK, axes, &na)) return false;
    for (int i = 0; i < na; i++) {
        int d = ir_norm_axis(axes[i], x->rank);
        if (d < 0 || reduced[d]) return false;
        reduced[d] = true;
    }
    if (na <= 0)
        for (int d = 0; d < x->rank; d++) reduced[d] = ir_node_attr_int(n, "noop_with_empty_axes", 0) == 0;
    return true;
}

/* ---- the support test ------------------------------------------------------------------ */

static bool transpose_ok(const ir_node *n, const ir_tensor *x, const ir_tensor *y)
{
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

static bool concat_ok(const ir_node *n, const ir_tensor *x, const ir_tensor *y)
{
    if (!ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT) || (!ir_node_attr(n, "axis") && n->opset >= 4) || x->rank == 0)
        return false;
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 1), x->rank);
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

static bool split_ok(const ir_node *n, const ir_tensor *x)
{
    if (!ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT) || x->rank == 0) return false;
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
    if (axis < 0) return false;
    int64_t sum = 0;
    for (int j = 0; j < n->n_out; j++) {
        const ir_value *v = n->out[j];
        if (!v || v->t.rank != x->rank) return false;
        sum += v->t.dims[axis];
    }
    return sum == x->dims[axis];
}

static bool gather_ok(const ir_node *n, const ir_tensor *x, const ir_tensor *y)
{
    const ir_value *ind = has_in(n, 1) ? n->in[1] : NULL;
    if (!ind || !ind->shape_known || (ind->t.dtype != KILN_I32 && ind->t.dtype != KILN_I64) || x->rank == 0)
        return false;
    if (ind->graph != n->graph || !ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT)) return false;
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
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

static bool tile_ok(const ir_node *n, const ir_tensor *x, const ir_tensor *y)
{
    int64_t reps[IR_MAX_RANK];
    int nr;
    if (!has_in(n, 1) || !ir_const_ints(n->in[1], IR_MAX_RANK, reps, &nr) || nr != x->rank || y->rank != x->rank)
        return false;
    for (int d = 0; d < x->rank; d++)
        if (reps[d] < 0 || x->dims[d] * reps[d] != y->dims[d]) return false;
    return true;
}

static bool depth_space_ok(const ir_node *n, const ir_tensor *x, const ir_tensor *y)
{
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

bool move_node_ok(const ir_node *n)
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
    case KILN_OP_TRANSPOSE: return transpose_ok(n, x, y);
    case KILN_OP_CONCAT: return concat_ok(n, x, y);
    case KILN_OP_SPLIT: return split_ok(n, x);
    case KILN_OP_SLICE: {
        int64_t start[IR_MAX_RANK], step[IR_MAX_RANK];
        return ir_slice_params(n, start, step);
    }
    case KILN_OP_GATHER: return gather_ok(n, x, y);
    case KILN_OP_EXPAND:
        if (y->rank < x->rank || y->dtype != x->dtype) return false;
        for (int d = 0; d < x->rank; d++) {
            int64_t xd = x->dims[d], yd = y->dims[y->rank - x->rank + d];
            if (xd != yd && xd != 1) return false;
        }
        return true;
    case KILN_OP_TILE: return tile_ok(n, x, y);
    case KILN_OP_PAD: {
        move_pad pp;
        return move_pad_params(n, &pp);
    }
    case KILN_OP_DEPTH_TO_SPACE: case KILN_OP_SPACE_TO_DEPTH: return depth_space_ok(n, x, y);
    case KILN_OP_REDUCE_SUM: case KILN_OP_REDUCE_MEAN: case KILN_OP_REDUCE_MAX: case KILN_OP_REDUCE_MIN:
    case KILN_OP_REDUCE_PROD: case KILN_OP_REDUCE_L1: case KILN_OP_REDUCE_L2: case KILN_OP_REDUCE_SUM_SQUARE:
    case KILN_OP_REDUCE_LOG_SUM: {
        bool reduced[IR_MAX_RANK];
        if (!ir_node_attr_kind_ok(n, "keepdims", IR_ATTR_INT) ||
            !ir_node_attr_kind_ok(n, "noop_with_empty_axes", IR_ATTR_INT))
            return false;
        return y->dtype == x->dtype && move_reduce_axes(n, reduced);
    }
    case KILN_OP_ARG_MAX: case KILN_OP_ARG_MIN: {
        if (y->dtype != KILN_I64 || x->rank == 0) return false;
        if (!ir_node_attr_kind_ok(n, "axis", IR_ATTR_INT) || !ir_node_attr_kind_ok(n, "select_last_index", IR_ATTR_INT))
            return false;
        int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
        return axis >= 0 && x->dims[axis] > 0;
    }
    default: return false;
    }
}

/* ---- views ------------------------------------------------------------------------------- */

int move_n_copies(const ir_node *n)
{
    switch (n->op) {
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY: case KILN_OP_DROPOUT: case KILN_OP_TRANSPOSE: case KILN_OP_SLICE: case KILN_OP_EXPAND:
    case KILN_OP_TILE: case KILN_OP_DEPTH_TO_SPACE: case KILN_OP_SPACE_TO_DEPTH:
        return 1;
    case KILN_OP_CONCAT: return n->n_in;
    case KILN_OP_SPLIT: return n->n_out;
    default: return 0;
    }
}

/* All of src into dst, element by element in order (same element count). */
static void view_flat(move_copy *cp)
{
    cp->v.rank = 1;
    cp->v.dims[0] = ir_numel(&cp->src->t);
    cp->v.src_str[0] = cp->v.dst_str[0] = 1;
    snprintf(cp->what, sizeof cp->what, "copy");
}

static void view_transpose(const ir_node *n, move_copy *cp)
{
    const ir_tensor *x = &n->in[0]->t;
    int r = x->rank;
    const ir_attr *p = ir_node_attr(n, "perm");
    int64_t istr[IR_MAX_RANK];
    move_contiguous_strides(r, x->dims, istr);
    move_view *v = &cp->v;
    v->rank = r;
    for (int k = 0; k < r; k++) {
        int pk = p ? (int)p->ints[k] : r - 1 - k;
        v->dims[k] = x->dims[pk];
        v->src_str[k] = istr[pk];
    }
    move_contiguous_strides(r, v->dims, v->dst_str);
    snprintf(cp->what, sizeof cp->what, "transpose");
}

/* Concat input i (split: output i) sits at `at` along the axis of the whole. */
static void view_part(const ir_node *n, int i, bool concat, move_copy *cp)
{
    const ir_tensor *whole = concat ? &n->out[0]->t : &n->in[0]->t;
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", concat ? 1 : 0), whole->rank);
    int64_t wstr[IR_MAX_RANK], at = 0;
    move_contiguous_strides(whole->rank, whole->dims, wstr);
    for (int k = 0; k < i; k++) at += (concat ? n->in[k] : n->out[k])->t.dims[axis];
    const ir_tensor *part = concat ? &n->in[i]->t : &n->out[i]->t;
    move_view *v = &cp->v;
    v->rank = part->rank;
    memcpy(v->dims, part->dims, (size_t)part->rank * sizeof(int64_t));
    int64_t *part_str = concat ? v->src_str : v->dst_str, *whole_str = concat ? v->dst_str : v->src_str;
    move_contiguous_strides(part->rank, part->dims, part_str);
    memcpy(whole_str, wstr, (size_t)part->rank * sizeof(int64_t));
    if (concat) v->dst_off = at * wstr[axis];
    else v->src_off = at * wstr[axis];
    snprintf(cp->what, sizeof cp->what, "%s %d", concat ? "input" : "output", i);
}

static void view_slice(const ir_node *n, move_copy *cp)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], istr[IR_MAX_RANK];
    ir_slice_params(n, start, step);
    move_contiguous_strides(x->rank, x->dims, istr);
    move_view *v = &cp->v;
    v->rank = y->rank;
    for (int k = 0; k < y->rank; k++) {
        v->dims[k] = y->dims[k];
        v->src_str[k] = istr[k] * step[k];
        v->src_off += start[k] * istr[k];
    }
    move_contiguous_strides(y->rank, y->dims, v->dst_str);
    snprintf(cp->what, sizeof cp->what, "slice");
}

static void view_expand(const ir_node *n, move_copy *cp)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int64_t istr[IR_MAX_RANK];
    move_contiguous_strides(x->rank, x->dims, istr);
    move_view *v = &cp->v;
    v->rank = y->rank;
    for (int d = 0; d < y->rank; d++) {
        int xd = d - (y->rank - x->rank);
        v->dims[d] = y->dims[d];
        v->src_str[d] = xd < 0 || x->dims[xd] == 1 ? 0 : istr[xd];
    }
    move_contiguous_strides(y->rank, y->dims, v->dst_str);
    snprintf(cp->what, sizeof cp->what, "expand");
}

static void view_tile(const ir_node *n, move_copy *cp)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int64_t reps[IR_MAX_RANK], istr[IR_MAX_RANK], ostr[IR_MAX_RANK];
    int nr;
    ir_const_ints(n->in[1], IR_MAX_RANK, reps, &nr);
    move_contiguous_strides(x->rank, x->dims, istr);
    move_contiguous_strides(y->rank, y->dims, ostr);
    move_view *v = &cp->v;
    v->rank = 2 * x->rank;
    for (int d = 0; d < x->rank; d++) {
        v->dims[2 * d] = reps[d];
        v->dims[2 * d + 1] = x->dims[d];
        v->src_str[2 * d] = 0;
        v->src_str[2 * d + 1] = istr[d];
        v->dst_str[2 * d] = x->dims[d] * ostr[d];
        v->dst_str[2 * d + 1] = ostr[d];
    }
    snprintf(cp->what, sizeof cp->what, "tile");
}

static void view_depth_space(const ir_node *n, move_copy *cp)
{
    const ir_tensor *x = &n->in[0]->t;
    int64_t b = ir_node_attr_int(n, "blocksize", 1);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    move_view *v = &cp->v;
    v->rank = 6;
    if (n->op == KILN_OP_DEPTH_TO_SPACE) {
        /* output viewed as [N, C/b^2, H, b, W, b]: (n, oc, h, bh, w, bw) */
        bool crd = strcmp(ir_node_attr_str(n, "mode", "DCR"), "CRD") == 0;
        int64_t cs = C / (b * b);
        int64_t d[6] = {N, cs, H, b, W, b};
        int64_t s[6] = {C * H * W, crd ? b * b * H * W : H * W, W, crd ? b * H * W : b * cs * H * W, 1,
                        crd ? H * W : cs * H * W};
        memcpy(v->dims, d, sizeof d);
        memcpy(v->src_str, s, sizeof s);
        snprintf(cp->what, sizeof cp->what, "depth to space");
    } else {
        /* output viewed as [N, b, b, C, H/b, W/b]: (n, bh, bw, c, oh, ow) */
        int64_t d[6] = {N, b, b, C, H / b, W / b};
        int64_t s[6] = {C * H * W, W, 1, H * W, b * W, b};
        memcpy(v->dims, d, sizeof d);
        memcpy(v->src_str, s, sizeof s);
        snprintf(cp->what, sizeof cp->what, "space to depth");
    }
    move_contiguous_strides(6, v->dims, v->dst_str);
}

void move_copy_of(const ir_node *n, int i, move_copy *out)
{
    memset(out, 0, sizeof(*out));
    out->src = n->op == KILN_OP_CONCAT ? n->in[i] : n->in[0];
    out->dst = n->op == KILN_OP_SPLIT ? n->out[i] : n->out[0];
    switch (n->op) {
    case KILN_OP_TRANSPOSE: view_transpose(n, out); break;
    case KILN_OP_CONCAT: view_part(n, i, true, out); break;
    case KILN_OP_SPLIT: view_part(n, i, false, out); break;
    case KILN_OP_SLICE: view_slice(n, out); break;
    case KILN_OP_EXPAND: view_expand(n, out); break;
    case KILN_OP_TILE: view_tile(n, out); break;
    case KILN_OP_DEPTH_TO_SPACE: case KILN_OP_SPACE_TO_DEPTH: view_depth_space(n, out); break;
    default: view_flat(out); break;
    }
}

void move_view_collapse(move_view *v)
{
    int r = 0;
    for (int d = 0; d < v->rank; d++) {
        if (v->dims[d] == 1) continue;
        bool merge = r > 0 && v->src_str[r - 1] == v->src_str[d] * v->dims[d] &&
                     v->dst_str[r - 1] == v->dst_str[d] * v->dims[d];
        if (merge) {
            v->dims[r - 1] *= v->dims[d];
            v->src_str[r - 1] = v->src_str[d];
            v->dst_str[r - 1] = v->dst_str[d];
            continue;
        }
        v->dims[r] = v->dims[d];
        v->src_str[r] = v->src_str[d];
        v->dst_str[r] = v->dst_str[d];
        r++;
    }
    if (r == 0) {
        v->dims[0] = 1;
        v->src_str[0] = v->dst_str[0] = 1;
        r = 1;
    }
    v->rank = r;
}

/* ---- rOperators made of pieces --------------------------------------------------------- */

void move_pieces_add(move_pieces *ps, base_str *code, int64_t n_tasks)
{
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 8;
        move_piece *p = base_realloc(ps->p, (size_t)cap * sizeof(move_piece));
        if (!p) {
            ps->oom = true;
            base_str_free(code);
            return;
        }
        ps->p = p;
        ps->cap = cap;
    }
    if (code->oom) ps->oom = true;
    ps->p[ps->n++] = (move_piece){*code, n_tasks};
    ps->n_tasks += n_tasks;
}

void move_pieces_emit(move_pieces *ps, base_str *out, const char *u_type)
{
    if (ps->n == 0) base_str_cat(out, "    (void)c;\n    (void)t;\n");
    int64_t at = 0;
    for (int i = 0; i < ps->n; i++) {
        move_piece *p = &ps->p[i];
        bool last = i == ps->n - 1;
        if (last) base_str_cat(out, "    {\n");
        else base_str_printf(out, "    if (t < %lld) {\n", (long long)(at + p->n_tasks));
        if (at) base_str_printf(out, "        %s u = t - %lld;\n", u_type, (long long)at);
        else base_str_printf(out, "        %s u = t;\n", u_type);
        base_str_cat(out, base_str_get(&p->code));
        if (!last) base_str_cat(out, "        return;\n");
        base_str_cat(out, "    }\n");
        at += p->n_tasks;
        base_str_free(&p->code);
    }
    base_free(ps->p);
    ps->p = NULL;
    ps->n = ps->cap = 0;
}

void move_emit_coords(base_str *s, const char *type, const char *lin, int rank, const int64_t *dims, const bool *need,
                      const char *ind)
{
    int lo = -1;
    for (int d = 0; d < rank && lo < 0; d++)
        if (need[d]) lo = d;
    if (lo < 0) return;
    if (rank == 1) {
        base_str_printf(s, "%sconst %s i0 = %s;\n", ind, type, lin);
        return;
    }
    base_str_printf(s, "%s%s q = %s;\n", ind, type, lin);
    for (int d = rank - 1; d > lo; d--) {
        if (need[d]) base_str_printf(s, "%sconst %s i%d = q %% %lld;\n", ind, type, d, (long long)dims[d]);
        base_str_printf(s, "%sq /= %lld;\n", ind, (long long)dims[d]);
    }
    if (lo == 0) base_str_printf(s, "%sconst %s i0 = q;\n", ind, type);
    else base_str_printf(s, "%sconst %s i%d = q %% %lld;\n", ind, type, lo, (long long)dims[lo]);
}
