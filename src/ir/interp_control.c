/*
 * interp_control.c: control flow: If, Loop and Scan, which run subgraphs
 * (attributes then_branch / else_branch / body) through ir_eval_subgraph.
 * Bodies see the values of enclosing graphs.
 */
#include "ir/interp_ops.h"

#include <string.h>

/* A Loop whose condition never turns false stops here with an error
 * instead of hanging. */
#define LOOP_MAX_ITERS 10000000

kiln_status ir_eval_if(ir_eval *e)
{
    KILN_TRY(ir_eval_need(e, 0));
    const ir_tensor *c = e->in[0];
    if (ir_numel(c) != 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the condition must have one element, it has %lld",
                            (long long)ir_numel(c));
    const ir_graph *then_g = ir_eval_attr_graph(e, "then_branch");
    const ir_graph *else_g = ir_eval_attr_graph(e, "else_branch");
    if (!then_g || !else_g) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "then_branch and else_branch are required");
    const ir_graph *g = ir_get_f64(c, 0) != 0 ? then_g : else_g;
    return ir_eval_subgraph(e, g, 0, NULL, e->n_out, e->out);
}

/* out = t[idx] along axis (a copy, rank - 1). */
static kiln_status take_slice(ir_eval *e, const ir_tensor *t, int axis, int64_t idx, ir_tensor *out)
{
    int64_t dims[IR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t->rank; i++)
        if (i != axis) dims[r++] = t->dims[i];
    kiln_status st = ir_tensor_alloc(out, t->dtype, r, dims);
    if (st != KILN_OK) return ir_eval_fail(e, st, "cannot allocate a scan slice");
    size_t es = ir_dtype_size(t->dtype);
    int64_t outer = ir_dims_numel(axis, t->dims), inner = ir_dims_numel(t->rank - axis - 1, t->dims + axis + 1);
    size_t row = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)out->data + (size_t)o * row,
               (const char *)t->data + ((size_t)(o * t->dims[axis] + idx)) * row, row);
    return KILN_OK;
}

/* Stacks n equally shaped tensors along a new axis into out (allocated via
 * ir_eval_out as output slot). reverse: parts[n-1] first. */
static kiln_status stack(ir_eval *e, int slot, ir_tensor *parts, int64_t n, int axis, bool reverse)
{
    if (n == 0) {
        int64_t zero = 0;
        return ir_eval_out(e, slot, parts ? parts[0].dtype : KILN_F32, 1, &zero);
    }
    const ir_tensor *p0 = &parts[0];
    for (int64_t i = 1; i < n; i++)
        if (parts[i].dtype != p0->dtype || !ir_same_shape(&parts[i], p0))
            return ir_eval_fail(e, KILN_ERR_SHAPE, "scan output %d changes shape between iterations", slot);
    if (p0->rank + 1 > IR_MAX_RANK) return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "scan output rank too large");
    if (axis < 0) axis += p0->rank + 1;
    if (axis < 0 || axis > p0->rank) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "scan output axis out of range");
    int64_t dims[IR_MAX_RANK];
    for (int i = 0, k = 0; i <= p0->rank; i++) dims[i] = i == axis ? n : p0->dims[k++];
    KILN_TRY(ir_eval_out(e, slot, p0->dtype, p0->rank + 1, dims));
    ir_tensor *out = &e->out[slot];
    size_t es = ir_dtype_size(p0->dtype);
    int64_t outer = ir_dims_numel(axis, p0->dims), inner = ir_dims_numel(p0->rank - axis, p0->dims + axis);
    size_t row = (size_t)inner * es;
    for (int64_t i = 0; i < n; i++) {
        const ir_tensor *src = &parts[reverse ? n - 1 - i : i];
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out->data + ((size_t)(o * n + i)) * row, (const char *)src->data + (size_t)o * row, row);
    }
    return KILN_OK;
}

static void release_all(ir_tensor *t, int64_t n)
{
    for (int64_t i = 0; t && i < n; i++) ir_tensor_release(&t[i]);
}

kiln_status ir_eval_loop(ir_eval *e)
{
    const ir_graph *body = ir_eval_attr_graph(e, "body");
    if (!body) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "attribute 'body' is required");
    if (e->infer) return KILN_ERR_DYNAMIC;
    int n_carried = e->n_in - 2;
    int n_scan = e->n_out - n_carried;
    if (n_carried < 0 || n_scan < 0 || body->n_inputs != n_carried + 2 || body->n_outputs != 1 + n_carried + n_scan)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL,
                            "the body takes %d inputs and gives %d outputs; the node has %d inputs and %d outputs",
                            body->n_inputs, body->n_outputs, e->n_in, e->n_out);
    int64_t max_trip = -1;
    if (ir_eval_has(e, 0)) {
        if (ir_numel(e->in[0]) != 1) return ir_eval_fail(e, KILN_ERR_SHAPE, "M must be a scalar");
        max_trip = ir_get_i64(e->in[0], 0);
    }
    bool cond = true;
    if (ir_eval_has(e, 1)) {
        if (ir_numel(e->in[1]) != 1) return ir_eval_fail(e, KILN_ERR_SHAPE, "cond must be a scalar");
        cond = ir_get_f64(e->in[1], 0) != 0;
    }
    if (max_trip < 0 && !ir_eval_has(e, 1))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "a Loop without a trip count or a condition never ends");

    kiln_status st = KILN_OK;
    int n_body_in = 2 + n_carried, n_body_out = 1 + n_carried + n_scan;
    ir_tensor *bin = base_calloc((size_t)n_body_in, sizeof(ir_tensor));
    ir_tensor *bout = base_calloc((size_t)n_body_out, sizeof(ir_tensor));
    ir_tensor *carried = base_calloc((size_t)n_carried + 1, sizeof(ir_tensor));
    ir_tensor **scans = base_calloc((size_t)n_scan + 1, sizeof(ir_tensor *));
    int64_t cap = 0, iters = 0;
    if (!bin || !bout || !carried || !scans) {
        st = ir_eval_fail(e, KILN_ERR_OOM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n_carried; i++) {
        if (!ir_eval_has(e, 2 + i)) {
            st = ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "loop-carried input %d is missing", i);
            goto out;
        }
        st = ir_tensor_copy(&carried[i], e->in[2 + i]);
        if (st != KILN_OK) goto out;
    }
    while ((max_trip < 0 || iters < max_trip) && cond) {
        if (iters >= LOOP_MAX_ITERS) {
            st = ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "stopped after %d iterations", LOOP_MAX_ITERS);
            goto out;
        }
        st = ir_tensor_alloc(&bin[0], KILN_I64, 0, NULL);
        if (st == KILN_OK) st = ir_tensor_alloc(&bin[1], KILN_BOOL, 0, NULL);
        if (st != KILN_OK) goto out;
        *(int64_t *)bin[0].data = iters;
        *(uint8_t *)bin[1].data = cond;
        for (int i = 0; i < n_carried; i++) bin[2 + i] = carried[i]; /* moved in */
        memset(carried, 0, (size_t)n_carried * sizeof(ir_tensor));
        st = ir_eval_subgraph(e, body, n_body_in, bin, n_body_out, bout);
        release_all(bin, n_body_in);
        if (st != KILN_OK) goto out;
        if (ir_numel(&bout[0]) != 1) {
            st = ir_eval_fail(e, KILN_ERR_SHAPE, "the body's condition output must be a scalar");
            goto out;
        }
        cond = ir_get_f64(&bout[0], 0) != 0;
        ir_tensor_release(&bout[0]);
        for (int i = 0; i < n_carried; i++) carried[i] = bout[1 + i];
        if (iters == cap) {
            cap = cap ? cap * 2 : 8;
            for (int k = 0; k < n_scan; k++) {
                ir_tensor *p = base_realloc(scans[k], (size_t)cap * sizeof(ir_tensor));
                if (!p) {
                    st = ir_eval_fail(e, KILN_ERR_OOM, "out of memory");
                    goto out;
                }
                scans[k] = p;
            }
        }
        for (int k = 0; k < n_scan; k++) scans[k][iters] = bout[1 + n_carried + k];
        memset(bout, 0, (size_t)n_body_out * sizeof(ir_tensor));
        iters++;
    }
    for (int i = 0; i < n_carried; i++) {
        KILN_ASSERT(i < e->n_out);
        st = ir_eval_out(e, i, carried[i].dtype, carried[i].rank, carried[i].dims);
        if (st != KILN_OK) goto out;
        memcpy(e->out[i].data, carried[i].data, carried[i].nbytes);
    }
    for (int k = 0; k < n_scan; k++) {
        st = stack(e, n_carried + k, scans[k], iters, 0, false);
        if (st != KILN_OK) goto out;
    }
out:
    release_all(bin, n_body_in);
    release_all(bout, n_body_out);
    release_all(carried, n_carried);
    for (int k = 0; scans && k < n_scan; k++) {
        release_all(scans[k], iters);
        base_free(scans[k]);
    }
    base_free(bin);
    base_free(bout);
    base_free(carried);
    base_free(scans);
    return st;
}

kiln_status ir_eval_scan(ir_eval *e)
{
    const ir_graph *body = ir_eval_attr_graph(e, "body");
    if (!body) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "attribute 'body' is required");
    if (e->node->opset < 9)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "Scan before opset 9 (with sequence_lens) is not supported");
    int m = (int)ir_eval_attr_int(e, "num_scan_inputs", -1);
    int n_state = e->n_in - m;
    int k_out = e->n_out - n_state;
    if (m <= 0 || n_state < 0 || k_out < 0 || body->n_inputs != e->n_in || body->n_outputs != e->n_out)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "num_scan_inputs %d does not fit the node and its body", m);
    if (e->infer) return KILN_ERR_DYNAMIC;
    const int64_t *in_axes = NULL, *in_dirs = NULL, *out_axes = NULL, *out_dirs = NULL;
    int n_in_axes = ir_eval_attr_ints(e, "scan_input_axes", &in_axes);
    int n_in_dirs = ir_eval_attr_ints(e, "scan_input_directions", &in_dirs);
    int n_out_axes = ir_eval_attr_ints(e, "scan_output_axes", &out_axes);
    int n_out_dirs = ir_eval_attr_ints(e, "scan_output_directions", &out_dirs);
    if ((n_in_axes >= 0 && n_in_axes != m) || (n_in_dirs >= 0 && n_in_dirs != m) ||
        (n_out_axes >= 0 && n_out_axes != k_out) || (n_out_dirs >= 0 && n_out_dirs != k_out))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "scan axes/directions lists have the wrong length");
    int64_t seq = -1;
    int axes[IR_EVAL_MAX_IO];
    for (int j = 0; j < m; j++) {
        KILN_TRY(ir_eval_need(e, n_state + j));
        const ir_tensor *x = e->in[n_state + j];
        KILN_TRY(ir_eval_axis(e, n_in_axes >= 0 ? in_axes[j] : 0, x->rank, &axes[j]));
        int64_t len = x->dims[axes[j]];
        if (seq >= 0 && len != seq)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "scan inputs have different lengths (%lld and %lld)",
                                (long long)seq, (long long)len);
        seq = len;
    }
    kiln_status st = KILN_OK;
    ir_tensor *bin = base_calloc((size_t)e->n_in, sizeof(ir_tensor));
    ir_tensor *bout = base_calloc((size_t)e->n_out, sizeof(ir_tensor));
    ir_tensor *state = base_calloc((size_t)n_state + 1, sizeof(ir_tensor));
    ir_tensor **outs = base_calloc((size_t)k_out + 1, sizeof(ir_tensor *));
    if (!bin || !bout || !state || !outs) {
        st = ir_eval_fail(e, KILN_ERR_OOM, "out of memory");
        goto out;
    }
    for (int k = 0; k < k_out; k++) {
        outs[k] = base_calloc((size_t)seq + 1, sizeof(ir_tensor));
        if (!outs[k]) {
            st = ir_eval_fail(e, KILN_ERR_OOM, "out of memory");
            goto out;
        }
    }
    for (int i = 0; i < n_state; i++) {
        st = ir_tensor_copy(&state[i], e->in[i]);
        if (st != KILN_OK) goto out;
    }
    for (int64_t t = 0; t < seq; t++) {
        for (int i = 0; i < n_state; i++) bin[i] = state[i];
        memset(state, 0, (size_t)n_state * sizeof(ir_tensor));
        for (int j = 0; j < m; j++) {
            bool rev = n_in_dirs >= 0 && in_dirs[j] == 1;
            st = take_slice(e, e->in[n_state + j], axes[j], rev ? seq - 1 - t : t, &bin[n_state + j]);
            if (st != KILN_OK) goto out;
        }
        st = ir_eval_subgraph(e, body, e->n_in, bin, e->n_out, bout);
        release_all(bin, e->n_in);
        if (st != KILN_OK) goto out;
        for (int i = 0; i < n_state; i++) state[i] = bout[i];
        for (int k = 0; k < k_out; k++) outs[k][t] = bout[n_state + k];
        memset(bout, 0, (size_t)e->n_out * sizeof(ir_tensor));
    }
    for (int i = 0; i < n_state; i++) {
        st = ir_eval_out(e, i, state[i].dtype, state[i].rank, state[i].dims);
        if (st != KILN_OK) goto out;
        memcpy(e->out[i].data, state[i].data, state[i].nbytes);
    }
    for (int k = 0; k < k_out; k++) {
        bool rev = n_out_dirs >= 0 && out_dirs[k] == 1;
        st = stack(e, n_state + k, outs[k], seq, n_out_axes >= 0 ? (int)out_axes[k] : 0, rev);
        if (st != KILN_OK) goto out;
    }
out:
    release_all(bin, e->n_in);
    release_all(bout, e->n_out);
    release_all(state, n_state);
    for (int k = 0; outs && k < k_out; k++) {
        release_all(outs[k], seq);
        base_free(outs[k]);
    }
    base_free(bin);
    base_free(bout);
    base_free(state);
    base_free(outs);
    return st;
}
