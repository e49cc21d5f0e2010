/*
 * params.c: constant parameters of ops as the reference interpreter reads
 * them (ir/interp_tensor.c), for the passes and the targets alike: axes,
 * integer lists from a constant input or an attribute, Slice's starts and
 * steps.
 */
#include "ir/params.h"

static bool has_in(const ir_node *n, int i) { return i < n->n_in && n->in[i]; }

int ir_norm_axis(int64_t axis, int rank)
{
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

bool ir_const_ints(const ir_value *v, int max, int64_t *out, int *n)
{
    if (!v || !v->is_const || !ir_dtype_is_int(v->t.dtype) || v->t.rank > 1) return false;
    int64_t count = ir_numel(&v->t);
    if (count > 0 && !v->t.data) return false;
    if (count > max) return false;
    for (int64_t i = 0; i < count; i++) out[i] = ir_get_i64(&v->t, i);
    *n = (int)count;
    return true;
}

bool ir_node_ints(const ir_node *n, int i, const char *attr, int max, int64_t *out, int *count)
{
    if (has_in(n, i)) return ir_const_ints(n->in[i], max, out, count);
    const ir_attr *a = ir_node_attr(n, attr);
    *count = -1;
    if (!a) return true;
    if (a->kind != IR_ATTR_INTS || a->n > max) return false;
    for (int k = 0; k < a->n; k++) out[k] = a->ints[k];
    *count = a->n;
    return true;
}

int64_t ir_slice_range(int64_t d, int64_t s, int64_t t, int64_t p, int64_t *count)
{
    if (s < 0) s += d;
    if (t < 0) t += d;
    if (p > 0) {
        s = KILN_MAX(0, KILN_MIN(s, d));
        t = KILN_MAX(0, KILN_MIN(t, d));
        *count = t > s ? (int64_t)((uint64_t)(t - s - 1) / (uint64_t)p) + 1 : 0;
    } else {
        s = KILN_MAX(0, KILN_MIN(s, d - 1));
        t = KILN_MAX(-1, KILN_MIN(t, d - 1));
        /* -(uint64_t)p: p may be INT64_MIN */
        *count = s > t ? (int64_t)((uint64_t)(s - t - 1) / (0 - (uint64_t)p)) + 1 : 0;
    }
    return s;
}

bool ir_slice_params(const ir_node *n, int64_t *start, int64_t *step)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    int r = x->rank;
    int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes_in[IR_MAX_RANK], steps[IR_MAX_RANK];
    int ns, ne, na = -1, nt = -1;
    if (n->opset < 10) {
        if (!ir_node_ints(n, 99, "starts", IR_MAX_RANK, starts, &ns) ||
            !ir_node_ints(n, 99, "ends", IR_MAX_RANK, ends, &ne) || !ir_node_ints(n, 99, "axes", IR_MAX_RANK, axes_in, &na))
            return false;
        if (ns < 0 || ne < 0) return false;
    } else {
        if (!has_in(n, 1) || !has_in(n, 2)) return false;
        if (!ir_const_ints(n->in[1], IR_MAX_RANK, starts, &ns) || !ir_const_ints(n->in[2], IR_MAX_RANK, ends, &ne))
            return false;
        if (has_in(n, 3) && !ir_const_ints(n->in[3], IR_MAX_RANK, axes_in, &na)) return false;
        if (has_in(n, 4) && !ir_const_ints(n->in[4], IR_MAX_RANK, steps, &nt)) return false;
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
        int k = na >= 0 ? ir_norm_axis(axes_in[i], r) : i;
        if (k < 0 || seen[k]) return false;
        seen[k] = true;
        int64_t d = x->dims[k], s = starts[i], t = ends[i], p = nt >= 0 ? steps[i] : 1;
        if (p == 0 || p == INT64_MIN) return false;
        start[k] = ir_slice_range(d, s, t, p, &dims[k]);
        step[k] = p;
    }
    if (y->rank != r) return false;
    for (int k = 0; k < r; k++)
        if (dims[k] != y->dims[k]) return false;
    return true;
}
