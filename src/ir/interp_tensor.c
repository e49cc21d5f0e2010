/*
 * interp_tensor.c: the reference interpreter's data-movement ops: reshapes
 * (Reshape, Flatten, Squeeze, Unsqueeze), copies (Identity, Dropout at
 * inference), layout (Transpose, DepthToSpace, SpaceToDepth), joins and cuts
 * (Concat, Split, Slice, Compress), indexing (Gather*, Scatter*, OneHot),
 * replication (Expand, Tile, Pad), generators (Shape, Size, Constant,
 * ConstantOfShape, Range, EyeLike) and the data-dependent NonZero, Unique,
 * Trilu and ReverseSequence.
 *
 * Elements are moved as raw bytes of ir_dtype_size, never converted, so
 * every fixed-size dtype (f16, bf16, bool, the integers) comes through
 * bit-exact; strings have no size and are refused. Only the Scatter
 * reductions do arithmetic, through int64 for integers and double for floats.
 *
 * Shape and Size read only their input's shape, and Constant has no inputs,
 * so their outputs are known in shape-inference mode too: those ops allocate
 * and fill their output even when e->infer, and the driver keeps it as a
 * constant.
 */
#include "ir/interp_ops.h"
#include "ir/params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

/* Advances a row-major multi-index over dims; false after the last one. */
static bool index_next(int rank, const int64_t *dims, int64_t *idx)
{
    for (int k = rank - 1; k >= 0; k--) {
        if (++idx[k] < dims[k]) return true;
        idx[k] = 0;
    }
    return false;
}

static int64_t prod(int from, int to, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= dims[i];
    return n;
}

/* "[2,3,4]" into buf, for messages. */
static const char *dims_str(char *buf, size_t n, int rank, const int64_t *dims)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Byte size of t's elements; strings (and undefined dtypes) have none and
 * cannot be moved by this file. */
static kiln_status elem_size(ir_eval *e, const ir_tensor *t, const char *what, size_t *size)
{
    *size = ir_dtype_size(t->dtype);
    if (*size == 0)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s has dtype %s, which the interpreter does not support",
                            what, kiln_dtype_name(t->dtype));
    return KILN_OK;
}

/* Inputs 0..n-1 must be given. */
static kiln_status require_inputs(ir_eval *e, int n)
{
    for (int i = 0; i < n; i++)
        if (!ir_eval_has(e, i)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "required input %d is missing", i);
    return KILN_OK;
}

static void copy_all(ir_tensor *dst, const ir_tensor *src, size_t size)
{
    size_t n = (size_t)ir_numel(src) * size;
    if (n) memcpy(dst->data, src->data, n);
}

/* The integer list held by input i (a scalar or 1-D int tensor), which must
 * be known: at most max entries into out, the count into *n. */
static kiln_status read_ints(ir_eval *e, int i, const char *what, int max, int64_t *out, int *n)
{
    KILN_TRY(ir_eval_need(e, i));
    const ir_tensor *t = e->in[i];
    if (!ir_dtype_is_int(t->dtype))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s (input %d) must be an integer tensor, not %s", what, i,
                            kiln_dtype_name(t->dtype));
    if (t->rank > 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s (input %d) must be 1-D, not of rank %d", what, i, t->rank);
    int64_t count = ir_numel(t);
    if (count > max)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s (input %d) has %lld entries, more than the %d supported",
                            what, i, (long long)count, max);
    for (int64_t k = 0; k < count; k++) out[k] = ir_get_i64(t, k);
    *n = (int)count;
    return KILN_OK;
}

/* The list from input i when given, else from the attribute (the form the op
 * had before the attribute became an input); *n = -1 when neither is there. */
static kiln_status input_or_attr_ints(ir_eval *e, int i, const char *attr, int max, int64_t *out, int *n)
{
    if (ir_eval_has(e, i)) return read_ints(e, i, attr, max, out, n);
    const int64_t *a;
    int na = ir_eval_attr_ints(e, attr, &a);
    if (na > max)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "attribute '%s' has %d entries, more than the %d supported",
                            attr, na, max);
    for (int k = 0; k < na; k++) out[k] = a[k];
    *n = na;
    return KILN_OK;
}

/* A scalar input (rank 0, or one element) that must be known. */
static kiln_status one_element(ir_eval *e, int i, const char *what)
{
    KILN_TRY(ir_eval_need(e, i));
    const ir_tensor *t = e->in[i];
    if (t->rank > 1 || ir_numel(t) != 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s (input %d) must be a scalar, not of shape %s", what, i,
                            ir_tensor_type_str(t, (char[64]){0}, 64));
    if (!ir_dtype_is_numeric(t->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "%s (input %d) has dtype %s", what, i,
                            kiln_dtype_name(t->dtype));
    return KILN_OK;
}

/* Checks that axes (already normalised) hold no duplicates. */
static kiln_status unique_axes(ir_eval *e, int n, const int *axes)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (axes[i] == axes[j])
                return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %d is given more than once", axes[i]);
    return KILN_OK;
}

/* Index value v along a dim of size d: negative counts from the end;
 * out of range fails, naming the op's input. */
static kiln_status fix_index(ir_eval *e, int64_t v, int64_t d, const char *what, int64_t *out)
{
    int64_t w = v < 0 ? v + d : v;
    *out = 0;
    if (w < 0 || w >= d)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%s value %lld is out of range for a dimension of size %lld", what,
                            (long long)v, (long long)d);
    *out = w;
    return KILN_OK;
}

/* For the ops whose output is known without running (Shape, Size, Constant):
 * in infer mode the output still gets data, which the driver keeps. */
static kiln_status out_with_data(ir_eval *e, kiln_dtype dtype, int rank, const int64_t *dims)
{
    KILN_TRY(ir_eval_out(e, 0, dtype, rank, dims));
    if (!e->infer) return KILN_OK;
    ir_tensor_release(&e->out[0]);
    kiln_status st = ir_tensor_alloc(&e->out[0], dtype, rank, dims);
    if (st != KILN_OK) return ir_eval_fail(e, st, "cannot allocate the %s output", kiln_dtype_name(dtype));
    return KILN_OK;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze --------------------------------------- */

static kiln_status reshape_shape(ir_eval *e, const ir_tensor *x, int *rank, int64_t *dims)
{
    int64_t shape[IR_MAX_RANK];
    int n;
    /* Reshape-1 took the shape as an attribute. */
    KILN_TRY(input_or_attr_ints(e, 1, "shape", IR_MAX_RANK, shape, &n));
    if (n < 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the shape input is missing");
    bool allowzero = ir_eval_attr_int(e, "allowzero", 0) != 0;
    char buf[160];
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        int64_t s = shape[i];
        if (s == -1) {
            if (infer_at >= 0)
                return ir_eval_fail(e, KILN_ERR_SHAPE, "shape %s has more than one -1",
                                    dims_str(buf, sizeof buf, n, shape));
            infer_at = i;
            continue;
        }
        if (s < -1)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "shape %s has a negative dimension",
                                dims_str(buf, sizeof buf, n, shape));
        if (s == 0 && !allowzero) {
            if (i >= x->rank)
                return ir_eval_fail(e, KILN_ERR_SHAPE, "shape %s copies dimension %d, but the input has rank %d",
                                    dims_str(buf, sizeof buf, n, shape), i, x->rank);
            s = x->dims[i];
        }
        if (s != 0 && known > INT64_MAX / s)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "shape %s overflows", dims_str(buf, sizeof buf, n, shape));
        dims[i] = s;
        known *= s;
    }
    int64_t total = ir_numel(x);
    if (infer_at >= 0) {
        if (known == 0 || total % known != 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot reshape %lld elements into %s", (long long)total,
                                dims_str(buf, sizeof buf, n, shape));
        dims[infer_at] = total / known;
    } else if (known != total) {
        return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot reshape %lld elements into %s", (long long)total,
                            dims_str(buf, sizeof buf, n, dims));
    }
    *rank = n;
    return KILN_OK;
}

static kiln_status flatten_shape(ir_eval *e, const ir_tensor *x, int *rank, int64_t *dims)
{
    int64_t axis = ir_eval_attr_int(e, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d", (long long)axis,
                            x->rank);
    int a = (int)(axis < 0 ? axis + x->rank : axis);
    dims[0] = prod(0, a, x->dims);
    dims[1] = prod(a, x->rank, x->dims);
    *rank = 2;
    return KILN_OK;
}

static kiln_status squeeze_shape(ir_eval *e, const ir_tensor *x, int *rank, int64_t *dims)
{
    int64_t list[IR_MAX_RANK];
    int n;
    KILN_TRY(input_or_attr_ints(e, 1, "axes", IR_MAX_RANK, list, &n));
    bool drop[IR_MAX_RANK] = {false};
    /* No axes, or an empty list (as onnxruntime reads it): every 1-dim goes. */
    if (n <= 0) {
        for (int i = 0; i < x->rank; i++) drop[i] = x->dims[i] == 1;
    } else {
        int axes[IR_MAX_RANK];
        for (int i = 0; i < n; i++) {
            KILN_TRY(ir_eval_axis(e, list[i], x->rank, &axes[i]));
            if (x->dims[axes[i]] != 1)
                return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot squeeze axis %d of size %lld", axes[i],
                                    (long long)x->dims[axes[i]]);
            drop[axes[i]] = true;
        }
        KILN_TRY(unique_axes(e, n, axes));
    }
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) dims[r++] = x->dims[i];
    *rank = r;
    return KILN_OK;
}

static kiln_status unsqueeze_shape(ir_eval *e, const ir_tensor *x, int *rank, int64_t *dims)
{
    int64_t list[IR_MAX_RANK];
    int n;
    KILN_TRY(input_or_attr_ints(e, 1, "axes", IR_MAX_RANK, list, &n));
    if (n < 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the axes are missing");
    int r = x->rank + n;
    if (r > IR_MAX_RANK)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "output rank %d exceeds the maximum %d", r, IR_MAX_RANK);
    bool inserted[IR_MAX_RANK] = {false};
    int axes[IR_MAX_RANK];
    for (int i = 0; i < n; i++) {
        KILN_TRY(ir_eval_axis(e, list[i], r, &axes[i]));
        inserted[axes[i]] = true;
    }
    KILN_TRY(unique_axes(e, n, axes));
    for (int i = 0, j = 0; i < r; i++) dims[i] = inserted[i] ? 1 : x->dims[j++];
    *rank = r;
    return KILN_OK;
}

kiln_status ir_eval_reshape(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    int rank = 0;
    int64_t dims[IR_MAX_RANK];
    switch (e->node->op) {
    case KILN_OP_RESHAPE: KILN_TRY(reshape_shape(e, x, &rank, dims)); break;
    case KILN_OP_FLATTEN: KILN_TRY(flatten_shape(e, x, &rank, dims)); break;
    case KILN_OP_SQUEEZE: KILN_TRY(squeeze_shape(e, x, &rank, dims)); break;
    case KILN_OP_UNSQUEEZE: KILN_TRY(unsqueeze_shape(e, x, &rank, dims)); break;
    default: return ir_eval_fail(e, KILN_ERR_INTERNAL, "not a reshape op");
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, rank, dims));
    if (e->infer) return KILN_OK;
    copy_all(&e->out[0], x, size);
    return KILN_OK;
}

/* ---- Identity, Dropout --------------------------------------------------------- */

kiln_status ir_eval_identity(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;
    copy_all(&e->out[0], x, size);
    return KILN_OK;
}

/* Inference only: the output is the input, the mask all ones. */
kiln_status ir_eval_dropout(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    if (ir_eval_has(e, 2)) {
        const ir_tensor *t = e->in[2];
        if (t->rank > 1 || ir_numel(t) != 1 || !ir_dtype_is_numeric(t->dtype))
            return ir_eval_fail(e, KILN_ERR_SHAPE, "training_mode must be a bool scalar, not %s",
                                ir_tensor_type_str(t, (char[64]){0}, 64));
        /* Unknown at inference time: checked again when the model runs. */
        if (t->data && ir_get_f64(t, 0) != 0)
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "training-mode Dropout");
    }
    /* Dropout-7 gave the mask the input's type; Dropout-10 made it bool. */
    kiln_dtype mask_dtype = e->node->opset < 10 ? x->dtype : KILN_BOOL;
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->n_out > 1) KILN_TRY(ir_eval_out(e, 1, mask_dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;
    copy_all(&e->out[0], x, size);
    if (e->n_out > 1) {
        int64_t n = ir_numel(x);
        for (int64_t i = 0; i < n; i++) ir_set_f64(&e->out[1], i, 1.0);
    }
    return KILN_OK;
}

/* ---- Transpose ------------------------------------------------------------------ */

kiln_status ir_eval_transpose(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    int r = x->rank;
    int perm[IR_MAX_RANK];
    const int64_t *p;
    int np = ir_eval_attr_ints(e, "perm", &p);
    if (np < 0) {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    } else {
        if (np != r)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "perm has %d entries for an input of rank %d", np, r);
        bool seen[IR_MAX_RANK] = {false};
        for (int i = 0; i < r; i++) {
            if (p[i] < 0 || p[i] >= r || seen[p[i]])
                return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "perm is not a permutation of 0..%d (entry %d is %lld)",
                                    r - 1, i, (long long)p[i]);
            seen[p[i]] = true;
            perm[i] = (int)p[i];
        }
    }
    int64_t dims[IR_MAX_RANK], in_strides[IR_MAX_RANK], strides[IR_MAX_RANK];
    for (int i = 0; i < r; i++) dims[i] = x->dims[perm[i]];
    KILN_TRY(ir_eval_out(e, 0, x->dtype, r, dims));
    if (e->infer) return KILN_OK;
    ir_strides(r, x->dims, in_strides);
    for (int i = 0; i < r; i++) strides[i] = in_strides[perm[i]];
    int64_t n = ir_numel(x), idx[IR_MAX_RANK] = {0};
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int k = 0; k < r; k++) off += idx[k] * strides[k];
        memcpy(dst + (size_t)i * size, src + (size_t)off * size, size);
        index_next(r, dims, idx);
    }
    return KILN_OK;
}

/* ---- Concat, Split ------------------------------------------------------------- */

kiln_status ir_eval_concat(ir_eval *e)
{
    KILN_TRY(require_inputs(e, e->n_in));
    const ir_tensor *x0 = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x0, "input 0", &size));
    /* Concat-1 defaulted the axis to 1; from Concat-4 it is required. */
    if (!ir_eval_has_attr(e, "axis") && e->node->opset >= 4)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the axis attribute is required");
    if (x0->rank == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot concatenate scalars");
    int axis;
    KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 1), x0->rank, &axis));
    int64_t dims[IR_MAX_RANK];
    for (int k = 0; k < x0->rank; k++) dims[k] = x0->dims[k];
    dims[axis] = 0;
    char b0[64], b1[64];
    for (int i = 0; i < e->n_in; i++) {
        const ir_tensor *x = e->in[i];
        bool fits = x->dtype == x0->dtype && x->rank == x0->rank;
        for (int k = 0; fits && k < x->rank; k++) fits = k == axis || x->dims[k] == x0->dims[k];
        if (!fits)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "input %d (%s) does not fit input 0 (%s) along axis %d", i,
                                ir_tensor_type_str(x, b1, sizeof b1), ir_tensor_type_str(x0, b0, sizeof b0), axis);
        if (dims[axis] > INT64_MAX - x->dims[axis]) return ir_eval_fail(e, KILN_ERR_SHAPE, "the output overflows");
        dims[axis] += x->dims[axis];
    }
    KILN_TRY(ir_eval_out(e, 0, x0->dtype, x0->rank, dims));
    if (e->infer) return KILN_OK;
    int64_t outer = prod(0, axis, dims);
    size_t inner = (size_t)prod(axis + 1, x0->rank, dims) * size;
    size_t out_row = (size_t)dims[axis] * inner;
    char *dst = e->out[0].data;
    size_t at = 0;
    for (int i = 0; i < e->n_in; i++) {
        const ir_tensor *x = e->in[i];
        size_t row = (size_t)x->dims[axis] * inner;
        if (row == 0) continue;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)o * out_row + at, (const char *)x->data + (size_t)o * row, row);
        at += row;
    }
    return KILN_OK;
}

kiln_status ir_eval_split(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    if (x->rank == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot split a scalar");
    int axis;
    KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 0), x->rank, &axis));
    int n_out = e->n_out;
    int64_t d = x->dims[axis];
    int64_t split[IR_EVAL_MAX_IO];
    int n;
    /* Split-13 moved the split sizes from an attribute to input 1. */
    KILN_TRY(input_or_attr_ints(e, 1, "split", IR_EVAL_MAX_IO, split, &n));
    if (n >= 0) {
        if (n != n_out)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "split has %d entries for %d outputs", n, n_out);
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            if (split[i] < 0 || split[i] > d - sum)
                return ir_eval_fail(e, KILN_ERR_SHAPE, "split sizes do not add up to the axis size %lld",
                                    (long long)d);
            sum += split[i];
        }
        if (sum != d)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "split sizes add up to %lld, not the axis size %lld",
                                (long long)sum, (long long)d);
    } else if (ir_eval_has_attr(e, "num_outputs")) {
        /* Split-18: chunks of ceil(d / n), the last one smaller. */
        int64_t num = ir_eval_attr_int(e, "num_outputs", n_out);
        if (num != n_out || num < 1)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "num_outputs %lld does not match the %d outputs",
                                (long long)num, n_out);
        int64_t chunk = (d + num - 1) / num, left = d;
        for (int i = 0; i < n_out; i++) {
            split[i] = KILN_MIN(chunk, left);
            left -= split[i];
        }
    } else {
        if (d % n_out != 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "axis size %lld does not split into %d equal parts",
                                (long long)d, n_out);
        for (int i = 0; i < n_out; i++) split[i] = d / n_out;
    }
    int64_t dims[IR_MAX_RANK];
    for (int k = 0; k < x->rank; k++) dims[k] = x->dims[k];
    for (int i = 0; i < n_out; i++) {
        dims[axis] = split[i];
        KILN_TRY(ir_eval_out(e, i, x->dtype, x->rank, dims));
    }
    if (e->infer) return KILN_OK;
    int64_t outer = prod(0, axis, x->dims);
    size_t inner = (size_t)prod(axis + 1, x->rank, x->dims) * size;
    size_t in_row = (size_t)d * inner, at = 0;
    for (int i = 0; i < n_out; i++) {
        size_t row = (size_t)split[i] * inner;
        char *dst = e->out[i].data;
        if (row == 0) continue;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)o * row, (const char *)x->data + (size_t)o * in_row + at, row);
        at += row;
    }
    return KILN_OK;
}

/* ---- Slice ---------------------------------------------------------------------- */

kiln_status ir_eval_slice(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    int r = x->rank;
    int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes_in[IR_MAX_RANK], steps[IR_MAX_RANK];
    int ns, ne, na = -1, nt = -1;
    if (e->node->opset < 10) {
        const int64_t *a;
        ns = ir_eval_attr_ints(e, "starts", &a);
        if (ns > IR_MAX_RANK) ns = IR_MAX_RANK + 1;
        for (int i = 0; i < ns && i < IR_MAX_RANK; i++) starts[i] = a[i];
        ne = ir_eval_attr_ints(e, "ends", &a);
        if (ne > IR_MAX_RANK) ne = IR_MAX_RANK + 1;
        for (int i = 0; i < ne && i < IR_MAX_RANK; i++) ends[i] = a[i];
        na = ir_eval_attr_ints(e, "axes", &a);
        if (na > IR_MAX_RANK) na = IR_MAX_RANK + 1;
        for (int i = 0; i < na && i < IR_MAX_RANK; i++) axes_in[i] = a[i];
        if (ns < 0 || ne < 0)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the starts and ends attributes are required");
        if (ns > IR_MAX_RANK || ne > IR_MAX_RANK || na > IR_MAX_RANK)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "more starts, ends or axes than the input's rank %d", r);
    } else {
        KILN_TRY(require_inputs(e, 3));
        KILN_TRY(read_ints(e, 1, "starts", IR_MAX_RANK, starts, &ns));
        KILN_TRY(read_ints(e, 2, "ends", IR_MAX_RANK, ends, &ne));
        if (ir_eval_has(e, 3)) KILN_TRY(read_ints(e, 3, "axes", IR_MAX_RANK, axes_in, &na));
        if (ir_eval_has(e, 4)) KILN_TRY(read_ints(e, 4, "steps", IR_MAX_RANK, steps, &nt));
    }
    if (ne != ns || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "starts, ends, axes and steps differ in length (%d, %d, %d, %d)", ns,
                            ne, na, nt);
    if (ns > r) return ir_eval_fail(e, KILN_ERR_SHAPE, "%d starts for an input of rank %d", ns, r);

    /* Unsliced axes keep start 0, step 1 and their full size. */
    int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], dims[IR_MAX_RANK];
    for (int k = 0; k < r; k++) {
        start[k] = 0;
        step[k] = 1;
        dims[k] = x->dims[k];
    }
    int axes[IR_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        if (na >= 0) KILN_TRY(ir_eval_axis(e, axes_in[i], r, &axes[i]));
        else axes[i] = i;
    }
    KILN_TRY(unique_axes(e, ns, axes));
    for (int i = 0; i < ns; i++) {
        int k = axes[i];
        int64_t d = x->dims[k], s = starts[i], t = ends[i], p = nt >= 0 ? steps[i] : 1;
        if (p == 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "steps[%d] is 0", i);
        start[k] = ir_slice_range(d, s, t, p, &dims[k]);
        step[k] = p;
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, r, dims));
    if (e->infer) return KILN_OK;
    int64_t strides[IR_MAX_RANK], n = ir_dims_numel(r, dims), idx[IR_MAX_RANK] = {0};
    ir_strides(r, x->dims, strides);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int k = 0; k < r; k++) off += (start[k] + idx[k] * step[k]) * strides[k];
        memcpy(dst + (size_t)i * size, src + (size_t)off * size, size);
        index_next(r, dims, idx);
    }
    return KILN_OK;
}

/* ---- Gather, GatherElements, GatherND ---------------------------------------------- */

static kiln_status check_indices(ir_eval *e, int i)
{
    const ir_tensor *t = e->in[i];
    if (t->dtype != KILN_I32 && t->dtype != KILN_I64)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "indices (input %d) must be int32 or int64, not %s", i,
                            kiln_dtype_name(t->dtype));
    return KILN_OK;
}

kiln_status ir_eval_gather(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0], *ind = e->in[1];
    size_t size;
    KILN_TRY(elem_size(e, x, "the data", &size));
    KILN_TRY(check_indices(e, 1));
    if (x->rank == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot gather from a scalar");
    int axis;
    KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 0), x->rank, &axis));
    int r = x->rank - 1 + ind->rank;
    if (r > IR_MAX_RANK)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "output rank %d exceeds the maximum %d", r, IR_MAX_RANK);
    int64_t dims[IR_MAX_RANK];
    int k = 0;
    for (int i = 0; i < axis; i++) dims[k++] = x->dims[i];
    for (int i = 0; i < ind->rank; i++) dims[k++] = ind->dims[i];
    for (int i = axis + 1; i < x->rank; i++) dims[k++] = x->dims[i];
    KILN_TRY(ir_eval_out(e, 0, x->dtype, r, dims));
    if (e->infer) return KILN_OK;
    int64_t outer = prod(0, axis, x->dims), d = x->dims[axis], n_ind = ir_numel(ind);
    size_t inner = (size_t)prod(axis + 1, x->rank, x->dims) * size;
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t j = 0; j < n_ind; j++) {
        int64_t at;
        KILN_TRY(fix_index(e, ir_get_i64(ind, j), d, "an index", &at));
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + ((size_t)o * (size_t)n_ind + (size_t)j) * inner, src + ((size_t)o * (size_t)d + (size_t)at) * inner,
                   inner);
    }
    return KILN_OK;
}

/* GatherElements and ScatterElements address data with the indices' own
 * coordinates, so every non-axis dim of the indices must fit in the data. */
static kiln_status check_elements_shape(ir_eval *e, const ir_tensor *x, const ir_tensor *ind, int axis)
{
    char b0[64], b1[64];
    bool fits = ind->rank == x->rank;
    for (int k = 0; fits && k < x->rank; k++) fits = k == axis || ind->dims[k] <= x->dims[k];
    if (!fits)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "indices %s do not fit data %s along axis %d",
                            ir_tensor_type_str(ind, b1, sizeof b1), ir_tensor_type_str(x, b0, sizeof b0), axis);
    return KILN_OK;
}

kiln_status ir_eval_gather_elements(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0], *ind = e->in[1];
    size_t size;
    KILN_TRY(elem_size(e, x, "the data", &size));
    KILN_TRY(check_indices(e, 1));
    if (x->rank == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot gather from a scalar");
    int axis;
    KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 0), x->rank, &axis));
    KILN_TRY(check_elements_shape(e, x, ind, axis));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, ind->rank, ind->dims));
    if (e->infer) return KILN_OK;
    int64_t strides[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, n = ir_numel(ind);
    ir_strides(x->rank, x->dims, strides);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < n; i++) {
        int64_t at, off = 0;
        KILN_TRY(fix_index(e, ir_get_i64(ind, i), x->dims[axis], "an index", &at));
        for (int k = 0; k < x->rank; k++) off += (k == axis ? at : idx[k]) * strides[k];
        memcpy(dst + (size_t)i * size, src + (size_t)off * size, size);
        index_next(ind->rank, ind->dims, idx);
    }
    return KILN_OK;
}

/* GatherND and ScatterND: the last dim of the indices (m) addresses the
 * leading m dims of the data (after batch_dims); the rest are slices. Returns
 * the element offset of tuple j, reading m indices at ind[j*m...]. */
static kiln_status nd_offset(ir_eval *e, const ir_tensor *ind, int64_t j, int m, const int64_t *dims,
                             const int64_t *slices, int64_t *off)
{
    *off = 0;
    for (int k = 0; k < m; k++) {
        int64_t at;
        KILN_TRY(fix_index(e, ir_get_i64(ind, j * m + k), dims[k], "an index", &at));
        *off += at * slices[k];
    }
    return KILN_OK;
}

kiln_status ir_eval_gather_nd(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0], *ind = e->in[1];
    size_t size;
    KILN_TRY(elem_size(e, x, "the data", &size));
    if (ind->dtype != KILN_I64)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "indices must be int64, not %s", kiln_dtype_name(ind->dtype));
    int r = x->rank, q = ind->rank;
    int64_t b = ir_eval_attr_int(e, "batch_dims", 0);
    if (r < 1 || q < 1) return ir_eval_fail(e, KILN_ERR_SHAPE, "data and indices must have rank >= 1");
    if (b < 0 || b >= KILN_MIN(r, q))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "batch_dims %lld must be in [0, %d)", (long long)b,
                            KILN_MIN(r, q));
    int nb = (int)b;
    int64_t m64 = ind->dims[q - 1];
    if (m64 < 1 || m64 > r - nb)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the last indices dim %lld must be in [1, %d]", (long long)m64, r - nb);
    int m = (int)m64;
    for (int k = 0; k < nb; k++)
        if (ind->dims[k] != x->dims[k])
            return ir_eval_fail(e, KILN_ERR_SHAPE, "batch dim %d differs: data %lld, indices %lld", k,
                                (long long)x->dims[k], (long long)ind->dims[k]);
    int orank = q - 1 + r - nb - m;
    if (orank > IR_MAX_RANK)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "output rank %d exceeds the maximum %d", orank, IR_MAX_RANK);
    int64_t dims[IR_MAX_RANK];
    int k = 0;
    for (int i = 0; i < q - 1; i++) dims[k++] = ind->dims[i];
    for (int i = nb + m; i < r; i++) dims[k++] = x->dims[i];
    KILN_TRY(ir_eval_out(e, 0, x->dtype, orank, dims));
    if (e->infer) return KILN_OK;
    int64_t batches = prod(0, nb, x->dims), per_batch = prod(nb, q - 1, ind->dims);
    int64_t slice = prod(nb + m, r, x->dims), batch_elems = prod(nb, r, x->dims);
    int64_t slices[IR_MAX_RANK];
    for (int i = 0; i < m; i++) slices[i] = prod(nb + i + 1, r, x->dims);
    const char *src = x->data;
    char *dst = e->out[0].data;
    size_t slice_bytes = (size_t)slice * size;
    for (int64_t bi = 0; bi < batches; bi++) {
        for (int64_t j = 0; j < per_batch; j++) {
            int64_t t = bi * per_batch + j, off;
            KILN_TRY(nd_offset(e, ind, t, m, x->dims + nb, slices, &off));
            if (slice_bytes)
                memcpy(dst + (size_t)t * slice_bytes, src + (size_t)(bi * batch_elems + off) * size, slice_bytes);
        }
    }
    return KILN_OK;
}

/* ---- ScatterElements, ScatterND ---------------------------------------------------- */

typedef enum reduction { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

static kiln_status get_reduction(ir_eval *e, reduction *r)
{
    const char *s = ir_eval_attr_str(e, "reduction", "none");
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    for (int i = 0; i < (int)KILN_COUNT(names); i++)
        if (strcmp(s, names[i]) == 0) {
            *r = (reduction)i;
            return KILN_OK;
        }
    return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown reduction '%s'", s);
}

/* out[oi] = out[oi] (reduction) upd[ui]: none copies the bytes; integers
 * combine exactly (wrapping like the fixed-width type), floats in double. */
static void scatter_one(ir_tensor *out, int64_t oi, const ir_tensor *upd, int64_t ui, reduction red, size_t size)
{
    char *dst = (char *)out->data + (size_t)oi * size;
    if (red == RED_NONE) {
        memcpy(dst, (const char *)upd->data + (size_t)ui * size, size);
        return;
    }
    kiln_dtype t = out->dtype;
    if (ir_dtype_is_float(t)) {
        double a = ir_get_f64(out, oi), b = ir_get_f64(upd, ui), v = a;
        switch (red) {
        case RED_ADD: v = a + b; break;
        case RED_MUL: v = a * b; break;
        case RED_MAX: v = a >= b || isnan(a) ? a : b; break;
        case RED_MIN: v = a <= b || isnan(a) ? a : b; break;
        default: break;
        }
        if (red == RED_MAX || red == RED_MIN) v = isnan(b) ? b : v;
        ir_set_f64(out, oi, v);
    } else if (t == KILN_BOOL) {
        bool a = ir_get_i64(out, oi) != 0, b = ir_get_i64(upd, ui) != 0;
        bool v = red == RED_ADD || red == RED_MAX ? a || b : a && b;
        *(uint8_t *)dst = v;
    } else {
        int64_t a = ir_get_i64(out, oi), b = ir_get_i64(upd, ui), v = a;
        /* Unsigned wrap-around arithmetic: no signed overflow. */
        uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
        bool u64 = t == KILN_U64;
        switch (red) {
        case RED_ADD: v = (int64_t)(ua + ub); break;
        case RED_MUL: v = (int64_t)(ua * ub); break;
        case RED_MAX: v = (u64 ? ua >= ub : a >= b) ? a : b; break;
        case RED_MIN: v = (u64 ? ua <= ub : a <= b) ? a : b; break;
        default: break;
        }
        ir_set_i64(out, oi, v);
    }
}

kiln_status ir_eval_scatter_elements(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 3));
    const ir_tensor *x = e->in[0], *ind = e->in[1], *upd = e->in[2];
    size_t size;
    KILN_TRY(elem_size(e, x, "the data", &size));
    KILN_TRY(check_indices(e, 1));
    char b0[64], b1[64];
    if (upd->dtype != x->dtype || !ir_same_shape(upd, ind))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "updates %s must have the data's dtype and the indices' shape %s",
                            ir_tensor_type_str(upd, b0, sizeof b0), ir_tensor_type_str(ind, b1, sizeof b1));
    if (x->rank == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot scatter into a scalar");
    int axis;
    KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 0), x->rank, &axis));
    KILN_TRY(check_elements_shape(e, x, ind, axis));
    reduction red = RED_NONE;
    if (e->node->op == KILN_OP_SCATTER_ELEMENTS) KILN_TRY(get_reduction(e, &red));
    if (red != RED_NONE && !ir_dtype_is_numeric(x->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "reduction on dtype %s", kiln_dtype_name(x->dtype));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;
    ir_tensor *out = &e->out[0];
    copy_all(out, x, size);
    int64_t strides[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, n = ir_numel(ind);
    ir_strides(x->rank, x->dims, strides);
    for (int64_t i = 0; i < n; i++) {
        int64_t at, off = 0;
        KILN_TRY(fix_index(e, ir_get_i64(ind, i), x->dims[axis], "an index", &at));
        for (int k = 0; k < x->rank; k++) off += (k == axis ? at : idx[k]) * strides[k];
        scatter_one(out, off, upd, i, red, size);
        index_next(ind->rank, ind->dims, idx);
    }
    return KILN_OK;
}

kiln_status ir_eval_scatter_nd(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 3));
    const ir_tensor *x = e->in[0], *ind = e->in[1], *upd = e->in[2];
    size_t size;
    KILN_TRY(elem_size(e, x, "the data", &size));
    if (ind->dtype != KILN_I64)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "indices must be int64, not %s", kiln_dtype_name(ind->dtype));
    int r = x->rank, q = ind->rank;
    if (q < 1) return ir_eval_fail(e, KILN_ERR_SHAPE, "indices must have rank >= 1");
    int64_t m64 = ind->dims[q - 1];
    if (m64 > r) return ir_eval_fail(e, KILN_ERR_SHAPE, "the last indices dim %lld exceeds the data rank %d",
                                     (long long)m64, r);
    int m = (int)m64;
    /* updates must be indices.shape[:-1] + data.shape[m:] */
    char b0[64], b1[64], b2[64];
    bool fits = upd->dtype == x->dtype && upd->rank == q - 1 + r - m;
    for (int k = 0; fits && k < q - 1; k++) fits = upd->dims[k] == ind->dims[k];
    for (int k = m; fits && k < r; k++) fits = upd->dims[q - 1 + k - m] == x->dims[k];
    if (!fits)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "updates %s do not fit data %s and indices %s",
                            ir_tensor_type_str(upd, b0, sizeof b0), ir_tensor_type_str(x, b1, sizeof b1),
                            ir_tensor_type_str(ind, b2, sizeof b2));
    reduction red = RED_NONE;
    KILN_TRY(get_reduction(e, &red));
    if (red != RED_NONE && !ir_dtype_is_numeric(x->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "reduction on dtype %s", kiln_dtype_name(x->dtype));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, r, x->dims));
    if (e->infer) return KILN_OK;
    ir_tensor *out = &e->out[0];
    copy_all(out, x, size);
    int64_t n_tuples = prod(0, q - 1, ind->dims), slice = prod(m, r, x->dims);
    int64_t slices[IR_MAX_RANK];
    for (int i = 0; i < m; i++) slices[i] = prod(i + 1, r, x->dims);
    for (int64_t j = 0; j < n_tuples; j++) {
        int64_t off;
        KILN_TRY(nd_offset(e, ind, j, m, x->dims, slices, &off));
        for (int64_t s = 0; s < slice; s++) scatter_one(out, off + s, upd, j * slice + s, red, size);
    }
    return KILN_OK;
}

/* ---- Expand, Tile ------------------------------------------------------------------- */

kiln_status ir_eval_expand(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    ir_tensor shape = {.dtype = x->dtype};
    int n;
    KILN_TRY(read_ints(e, 1, "shape", IR_MAX_RANK, shape.dims, &n));
    shape.rank = n;
    for (int i = 0; i < n; i++)
        if (shape.dims[i] < 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "shape %s has a negative dimension",
                                dims_str((char[160]){0}, 160, n, shape.dims));
    const ir_tensor *both[2] = {x, &shape};
    int rank;
    int64_t dims[IR_MAX_RANK];
    KILN_TRY(ir_eval_broadcast(e, 2, both, &rank, dims));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, rank, dims));
    if (e->infer) return KILN_OK;
    ir_bcast b;
    ir_bcast_init(&b, rank, dims, 1, &x);
    int64_t total = ir_dims_numel(rank, dims);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < total; i++, ir_bcast_next(&b))
        memcpy(dst + (size_t)i * size, src + (size_t)b.off[0] * size, size);
    return KILN_OK;
}

kiln_status ir_eval_tile(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    int64_t reps[IR_MAX_RANK];
    int n;
    KILN_TRY(read_ints(e, 1, "repeats", IR_MAX_RANK, reps, &n));
    if (n != x->rank)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%d repeats for an input of rank %d", n, x->rank);
    int64_t dims[IR_MAX_RANK];
    for (int k = 0; k < n; k++) {
        if (reps[k] < 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "repeat %d is negative (%lld)", k, (long long)reps[k]);
        if (reps[k] > 0 && x->dims[k] > INT64_MAX / reps[k])
            return ir_eval_fail(e, KILN_ERR_SHAPE, "the output overflows");
        dims[k] = x->dims[k] * reps[k];
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, n, dims));
    if (e->infer) return KILN_OK;
    int64_t strides[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, total = ir_dims_numel(n, dims);
    ir_strides(n, x->dims, strides);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < total; i++) {
        int64_t off = 0;
        for (int k = 0; k < n; k++) off += idx[k] % x->dims[k] * strides[k];
        memcpy(dst + (size_t)i * size, src + (size_t)off * size, size);
        index_next(n, dims, idx);
    }
    return KILN_OK;
}

/* ---- Pad -------------------------------------------------------------------------------- */

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

/* Maps coordinate i (maybe outside [0, d)) into [0, d) for the non-constant
 * modes, the way numpy.pad extends an axis; d > 0. */
static int64_t pad_source(pad_mode mode, int64_t i, int64_t d)
{
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : i >= d ? d - 1 : i;
    case PAD_WRAP: return ((i % d) + d) % d;
    default: {
        if (d == 1) return 0;
        int64_t period = 2 * (d - 1), j = ((i % period) + period) % period;
        return j < d ? j : period - j;
    }
    }
}

kiln_status ir_eval_pad(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    int r = x->rank;
    const char *mode_s = ir_eval_attr_str(e, "mode", "constant");
    pad_mode mode;
    if (strcmp(mode_s, "constant") == 0) mode = PAD_CONSTANT;
    else if (strcmp(mode_s, "reflect") == 0) mode = PAD_REFLECT;
    else if (strcmp(mode_s, "edge") == 0) mode = PAD_EDGE;
    else if (strcmp(mode_s, "wrap") == 0) mode = PAD_WRAP;
    else return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown mode '%s'", mode_s);

    /* Pad-11 moved pads and the value from attributes to inputs 1 and 2;
     * Pad-1 called the pads 'paddings'. */
    int64_t pads[2 * IR_MAX_RANK];
    int np;
    KILN_TRY(input_or_attr_ints(e, 1, "pads", 2 * IR_MAX_RANK, pads, &np));
    if (np < 0 && !ir_eval_has(e, 1))
        KILN_TRY(input_or_attr_ints(e, 1, "paddings", 2 * IR_MAX_RANK, pads, &np));
    if (np < 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the pads are missing");
    int axes[IR_MAX_RANK], na = r;
    if (ir_eval_has(e, 3)) {
        int64_t list[IR_MAX_RANK];
        KILN_TRY(read_ints(e, 3, "axes", IR_MAX_RANK, list, &na));
        for (int i = 0; i < na; i++) KILN_TRY(ir_eval_axis(e, list[i], r, &axes[i]));
        KILN_TRY(unique_axes(e, na, axes));
    } else {
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (np != 2 * na)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "%d pads for %d axes (need %d)", np, na, 2 * na);
    int64_t begin[IR_MAX_RANK] = {0}, end[IR_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        begin[axes[i]] = pads[i];
        end[axes[i]] = pads[na + i];
    }

    /* Negative pads crop first; the padding modes then extend what is left. */
    int64_t crop[IR_MAX_RANK], kept[IR_MAX_RANK], lead[IR_MAX_RANK], dims[IR_MAX_RANK];
    for (int k = 0; k < r; k++) {
        crop[k] = begin[k] < 0 ? -begin[k] : 0;
        lead[k] = begin[k] > 0 ? begin[k] : 0;
        int64_t crop_end = end[k] < 0 ? -end[k] : 0, trail = end[k] > 0 ? end[k] : 0;
        if (crop[k] > x->dims[k] || crop_end > x->dims[k] - crop[k])
            return ir_eval_fail(e, KILN_ERR_SHAPE, "pads %lld, %lld crop more than axis %d's size %lld",
                                (long long)begin[k], (long long)end[k], k, (long long)x->dims[k]);
        kept[k] = x->dims[k] - crop[k] - crop_end;
        if (lead[k] > INT64_MAX / 4 || trail > INT64_MAX / 4)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "pads %lld, %lld are too large", (long long)begin[k],
                                (long long)end[k]);
        dims[k] = kept[k] + lead[k] + trail;
        if (mode != PAD_CONSTANT && kept[k] == 0 && dims[k] > 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot %s-pad axis %d, which is empty", mode_s, k);
    }

    /* The fill value's bytes, in the input's dtype. */
    unsigned char fill[16] = {0};
    if (mode == PAD_CONSTANT && ir_eval_has(e, 2)) {
        const ir_tensor *v = e->in[2];
        if (v->dtype != x->dtype || v->rank > 1 || ir_numel(v) > 1)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "constant_value must be a %s scalar, not %s",
                                kiln_dtype_name(x->dtype), ir_tensor_type_str(v, (char[64]){0}, 64));
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, r, dims));
    if (e->infer) return KILN_OK;
    if (mode == PAD_CONSTANT) {
        if (ir_eval_has(e, 2)) {
            const ir_tensor *v = e->in[2];
            if (ir_numel(v) == 1) memcpy(fill, v->data, size);
        } else if (ir_eval_has_attr(e, "value") && ir_dtype_is_numeric(x->dtype)) {
            ir_tensor f = {.dtype = x->dtype, .data = fill};
            ir_set_f64(&f, 0, ir_eval_attr_float(e, "value", 0.0));
        }
    }
    int64_t strides[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, total = ir_dims_numel(r, dims);
    ir_strides(r, x->dims, strides);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < total; i++) {
        int64_t off = 0;
        bool inside = true;
        for (int k = 0; k < r; k++) {
            int64_t j = idx[k] - lead[k];
            if (j < 0 || j >= kept[k]) {
                if (mode == PAD_CONSTANT) {
                    inside = false;
                    break;
                }
                j = pad_source(mode, j, kept[k]);
            }
            off += (crop[k] + j) * strides[k];
        }
        memcpy(dst + (size_t)i * size, inside ? src + (size_t)off * size : (const char *)fill, size);
        index_next(r, dims, idx);
    }
    return KILN_OK;
}

/* ---- Shape, Size, Constant, ConstantOfShape, Range, EyeLike ------------------------------- */

kiln_status ir_eval_shape(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    if (e->node->op == KILN_OP_SIZE) {
        KILN_TRY(out_with_data(e, KILN_I64, 0, NULL));
        *(int64_t *)e->out[0].data = ir_numel(x);
        return KILN_OK;
    }
    /* Shape-15's start and end clamp like Python slicing. */
    int r = x->rank;
    int64_t start = ir_eval_attr_int(e, "start", 0), end = ir_eval_attr_int(e, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = KILN_MAX(0, KILN_MIN(start, r));
    end = KILN_MAX(0, KILN_MIN(end, r));
    int64_t n = end > start ? end - start : 0;
    KILN_TRY(out_with_data(e, KILN_I64, 1, &n));
    int64_t *dst = e->out[0].data;
    for (int64_t i = 0; i < n; i++) dst[i] = x->dims[start + i];
    return KILN_OK;
}

kiln_status ir_eval_constant(ir_eval *e)
{
    static const char *const refused[] = {"value_string", "value_strings", "sparse_value"};
    for (int i = 0; i < (int)KILN_COUNT(refused); i++)
        if (ir_eval_has_attr(e, refused[i]))
            return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "Constant with attribute '%s'", refused[i]);
    const ir_tensor *t = ir_eval_attr_tensor(e, "value");
    if (t) {
        size_t size;
        KILN_TRY(elem_size(e, t, "the value", &size));
        KILN_TRY(out_with_data(e, t->dtype, t->rank, t->dims));
        size_t bytes = (size_t)ir_numel(t) * size;
        if (bytes && !t->data) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the value tensor has no data");
        if (bytes) memcpy(e->out[0].data, t->data, bytes);
        return KILN_OK;
    }
    const double *fs;
    const int64_t *is;
    int n;
    if (ir_eval_has_attr(e, "value_float")) {
        KILN_TRY(out_with_data(e, KILN_F32, 0, NULL));
        *(float *)e->out[0].data = (float)ir_eval_attr_float(e, "value_float", 0);
    } else if (ir_eval_has_attr(e, "value_int")) {
        KILN_TRY(out_with_data(e, KILN_I64, 0, NULL));
        *(int64_t *)e->out[0].data = ir_eval_attr_int(e, "value_int", 0);
    } else if ((n = ir_eval_attr_floats(e, "value_floats", &fs)) >= 0) {
        int64_t dim = n;
        KILN_TRY(out_with_data(e, KILN_F32, 1, &dim));
        for (int i = 0; i < n; i++) ((float *)e->out[0].data)[i] = (float)fs[i];
    } else if ((n = ir_eval_attr_ints(e, "value_ints", &is)) >= 0) {
        int64_t dim = n;
        KILN_TRY(out_with_data(e, KILN_I64, 1, &dim));
        for (int i = 0; i < n; i++) ((int64_t *)e->out[0].data)[i] = is[i];
    } else {
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "Constant has no value attribute");
    }
    return KILN_OK;
}

kiln_status ir_eval_constant_of_shape(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *v = ir_eval_attr_tensor(e, "value");
    kiln_dtype dtype = KILN_F32;
    size_t size = 4;
    if (v) {
        KILN_TRY(elem_size(e, v, "the value", &size));
        if (ir_numel(v) != 1 || !v->data)
            return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the value must hold one element, not %lld",
                                (long long)ir_numel(v));
        dtype = v->dtype;
    }
    int64_t dims[IR_MAX_RANK];
    int n;
    KILN_TRY(read_ints(e, 0, "shape", IR_MAX_RANK, dims, &n));
    if (e->in[0]->rank != 1)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "the shape input must be 1-D, not of rank %d", e->in[0]->rank);
    KILN_TRY(ir_eval_out(e, 0, dtype, n, dims));
    if (e->infer || !v) return KILN_OK; /* the default value is zero, already there */
    int64_t total = ir_dims_numel(n, dims);
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < total; i++) memcpy(dst + (size_t)i * size, v->data, size);
    return KILN_OK;
}

kiln_status ir_eval_range(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 3));
    static const char *const names[] = {"start", "limit", "delta"};
    kiln_dtype t = e->in[0]->dtype;
    for (int i = 0; i < 3; i++) {
        KILN_TRY(one_element(e, i, names[i]));
        if (e->in[i]->dtype != t)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "%s is %s but start is %s", names[i],
                                kiln_dtype_name(e->in[i]->dtype), kiln_dtype_name(t));
    }
    if (t == KILN_BOOL) return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "Range on bool");
    int64_t n;
    if (ir_dtype_is_float(t)) {
        double start = ir_get_f64(e->in[0], 0), limit = ir_get_f64(e->in[1], 0), delta = ir_get_f64(e->in[2], 0);
        if (delta == 0 || isnan(delta)) return ir_eval_fail(e, KILN_ERR_SHAPE, "delta is %g", delta);
        /* The distance in the input's precision, as onnxruntime takes it. */
        double dist = t == KILN_F32 ? (double)(float)(limit - start) : limit - start;
        double count = ceil(dist / delta);
        if (!(count > 0)) count = 0;
        if (count > 9e15) return ir_eval_fail(e, KILN_ERR_SHAPE, "Range has too many elements (%g)", count);
        n = (int64_t)count;
        KILN_TRY(ir_eval_out(e, 0, t, 1, &n));
        if (e->infer) return KILN_OK;
        for (int64_t i = 0; i < n; i++) ir_set_f64(&e->out[0], i, start + (double)i * delta);
        return KILN_OK;
    }
    /* Integers: exact, with the distance taken in uint64 so extreme start and
     * limit values cannot overflow. */
    int64_t start = ir_get_i64(e->in[0], 0), limit = ir_get_i64(e->in[1], 0), delta = ir_get_i64(e->in[2], 0);
    if (delta == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "delta is 0");
    uint64_t count = 0;
    if (delta > 0 && limit > start) count = ((uint64_t)limit - (uint64_t)start - 1) / (uint64_t)delta + 1;
    if (delta < 0 && start > limit) count = ((uint64_t)start - (uint64_t)limit - 1) / (0 - (uint64_t)delta) + 1;
    if (count > (uint64_t)INT64_MAX)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "Range has too many elements (%llu)", (unsigned long long)count);
    n = (int64_t)count;
    KILN_TRY(ir_eval_out(e, 0, t, 1, &n));
    if (e->infer) return KILN_OK;
    for (int64_t i = 0; i < n; i++)
        ir_set_i64(&e->out[0], i, (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)delta));
    return KILN_OK;
}

kiln_status ir_eval_eye_like(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    if (x->rank != 2) return ir_eval_fail(e, KILN_ERR_SHAPE, "the input must be 2-D, not of rank %d", x->rank);
    int64_t dt = ir_eval_attr_int(e, "dtype", x->dtype);
    if (dt <= KILN_UNDEF || dt >= KILN_DTYPE_COUNT || !ir_dtype_is_numeric((kiln_dtype)dt))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "dtype %lld", (long long)dt);
    int64_t k = ir_eval_attr_int(e, "k", 0);
    KILN_TRY(ir_eval_out(e, 0, (kiln_dtype)dt, 2, x->dims));
    if (e->infer) return KILN_OK;
    int64_t rows = x->dims[0], cols = x->dims[1];
    for (int64_t i = 0; i < rows; i++) {
        /* j = i + k, compared without overflowing for huge k */
        if (k >= cols || k < -i || i >= cols - k) continue;
        ir_set_f64(&e->out[0], i * cols + i + k, 1.0);
    }
    return KILN_OK;
}

/* ---- OneHot, Trilu ---------------------------------------------------------------------- */

kiln_status ir_eval_one_hot(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 3));
    const ir_tensor *ind = e->in[0], *values = e->in[2];
    size_t size;
    KILN_TRY(elem_size(e, values, "the values", &size));
    if (!ir_dtype_is_numeric(ind->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "indices of dtype %s", kiln_dtype_name(ind->dtype));
    if (values->rank != 1 || values->dims[0] != 2)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "values must be [off, on], not %s",
                            ir_tensor_type_str(values, (char[64]){0}, 64));
    KILN_TRY(one_element(e, 1, "depth"));
    /* A float depth is truncated, as a cast to int64 would. */
    int64_t depth = ir_get_i64(e->in[1], 0);
    if (depth < 1) return ir_eval_fail(e, KILN_ERR_SHAPE, "depth %lld must be positive", (long long)depth);
    int r = ind->rank + 1;
    if (r > IR_MAX_RANK)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "output rank %d exceeds the maximum %d", r, IR_MAX_RANK);
    int axis;
    KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", -1), r, &axis));
    int64_t dims[IR_MAX_RANK];
    for (int k = 0, j = 0; k < r; k++) dims[k] = k == axis ? depth : ind->dims[j++];
    KILN_TRY(ir_eval_out(e, 0, values->dtype, r, dims));
    if (e->infer) return KILN_OK;
    int64_t outer = prod(0, axis, ind->dims), inner = prod(axis, ind->rank, ind->dims);
    const char *off = values->data, *on = off + size;
    char *dst = e->out[0].data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            /* Indices outside [-depth, depth) give an all-off row. */
            int64_t v = ir_get_i64(ind, o * inner + i);
            if (v < 0) v += depth;
            for (int64_t d = 0; d < depth; d++)
                memcpy(dst + (size_t)((o * depth + d) * inner + i) * size, d == v ? on : off, size);
        }
    }
    return KILN_OK;
}

kiln_status ir_eval_trilu(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    if (x->rank < 2) return ir_eval_fail(e, KILN_ERR_SHAPE, "the input must have rank >= 2, not %d", x->rank);
    bool upper = ir_eval_attr_int(e, "upper", 1) != 0;
    if (ir_eval_has(e, 1) && (!ir_dtype_is_int(e->in[1]->dtype) || ir_numel(e->in[1]) != 1))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "k must be an int64 scalar, not %s",
                            ir_tensor_type_str(e->in[1], (char[64]){0}, 64));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;
    int64_t k = ir_eval_has(e, 1) ? ir_get_i64(e->in[1], 0) : 0;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    int64_t mats = prod(0, x->rank - 2, x->dims);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t m = 0; m < mats; m++) {
        for (int64_t i = 0; i < rows; i++) {
            for (int64_t j = 0; j < cols; j++) {
                /* j - i cannot overflow; k may be anything */
                bool keep = upper ? j - i >= k : j - i <= k;
                size_t at = (size_t)((m * rows + i) * cols + j) * size;
                if (keep) memcpy(dst + at, src + at, size);
            }
        }
    }
    return KILN_OK;
}

/* ---- Compress, NonZero ---------------------------------------------------------------------- */

kiln_status ir_eval_compress(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    KILN_TRY(ir_eval_need(e, 1));
    const ir_tensor *cond = e->in[1];
    if (cond->rank != 1 || !ir_dtype_is_numeric(cond->dtype))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "condition must be a 1-D bool tensor, not %s",
                            ir_tensor_type_str(cond, (char[64]){0}, 64));
    bool has_axis = ir_eval_has_attr(e, "axis");
    int axis = 0;
    /* Without an axis the input is compressed as if flattened. */
    int rank = 1;
    int64_t in_dims[IR_MAX_RANK] = {0};
    if (has_axis) {
        if (x->rank == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot compress a scalar along an axis");
        KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 0), x->rank, &axis));
        rank = x->rank;
        for (int k = 0; k < rank; k++) in_dims[k] = x->dims[k];
    } else {
        in_dims[0] = ir_numel(x);
    }
    int64_t d = in_dims[axis], nc = cond->dims[0], kept = 0;
    /* numpy.compress: a shorter condition truncates; a longer one may only
     * select within the axis. */
    for (int64_t i = 0; i < nc; i++) {
        if (ir_get_f64(cond, i) == 0) continue;
        if (i >= d)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "condition selects index %lld of an axis of size %lld",
                                (long long)i, (long long)d);
        kept++;
    }
    int64_t dims[IR_MAX_RANK];
    for (int k = 0; k < rank; k++) dims[k] = in_dims[k];
    dims[axis] = kept;
    KILN_TRY(ir_eval_out(e, 0, x->dtype, rank, dims));
    if (e->infer) return KILN_OK;
    int64_t outer = prod(0, axis, in_dims);
    size_t inner = (size_t)prod(axis + 1, rank, in_dims) * size;
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < nc && i < d; i++)
            if (ir_get_f64(cond, i) != 0) {
                memcpy(dst, src + ((size_t)o * (size_t)d + (size_t)i) * inner, inner);
                dst += inner;
            }
    return KILN_OK;
}

kiln_status ir_eval_non_zero(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    KILN_TRY(ir_eval_need(e, 0));
    const ir_tensor *x = e->in[0];
    if (!ir_dtype_is_numeric(x->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "input of dtype %s", kiln_dtype_name(x->dtype));
    int64_t n = ir_numel(x), nnz = 0;
    for (int64_t i = 0; i < n; i++) nnz += ir_get_f64(x, i) != 0;
    /* A scalar counts as a 1-element vector, as numpy and onnxruntime do. */
    int r = x->rank ? x->rank : 1;
    int64_t in_dims[IR_MAX_RANK] = {1};
    for (int k = 0; k < x->rank; k++) in_dims[k] = x->dims[k];
    int64_t dims[2] = {r, nnz};
    KILN_TRY(ir_eval_out(e, 0, KILN_I64, 2, dims));
    if (e->infer) return KILN_OK;
    int64_t *dst = e->out[0].data, idx[IR_MAX_RANK] = {0}, j = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ir_get_f64(x, i) != 0) {
            for (int k = 0; k < r; k++) dst[k * nnz + j] = idx[k];
            j++;
        }
        index_next(r, in_dims, idx);
    }
    return KILN_OK;
}

/* ---- Unique --------------------------------------------------------------------------------- */

/* The items Unique compares: item k is the slice x[o, k, i] over o < outer,
 * i < inner (single elements when there is no axis), ordered
 * lexicographically the way numpy.unique orders them. */
typedef struct unique_items {
    const ir_tensor *x;
    int64_t outer, n, inner;
} unique_items;

/* NaN sorts after every number and equals other NaNs, as in numpy.unique. */
static int compare_elems(const ir_tensor *x, int64_t a, int64_t b)
{
    if (ir_dtype_is_float(x->dtype)) {
        double u = ir_get_f64(x, a), v = ir_get_f64(x, b);
        if (isnan(u) || isnan(v)) return (int)isnan(u) - (int)isnan(v);
        return (u > v) - (u < v);
    }
    if (x->dtype == KILN_U64) {
        uint64_t u = (uint64_t)ir_get_i64(x, a), v = (uint64_t)ir_get_i64(x, b);
        return (u > v) - (u < v);
    }
    int64_t u = ir_get_i64(x, a), v = ir_get_i64(x, b);
    return (u > v) - (u < v);
}

static int compare_items(const unique_items *it, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < it->outer; o++)
        for (int64_t i = 0; i < it->inner; i++) {
            int64_t base = o * it->n * it->inner + i;
            int c = compare_elems(it->x, base + a * it->inner, base + b * it->inner);
            if (c) return c;
        }
    return 0;
}

/* Stable bottom-up merge sort of item numbers: equal items keep their input
 * order, so each run of equal items starts with the first occurrence. */
static void sort_items(const unique_items *it, int64_t *v, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = KILN_MIN(lo + w, n), hi = KILN_MIN(lo + 2 * w, n);
            int64_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) tmp[k++] = compare_items(it, v[b], v[a]) < 0 ? v[b++] : v[a++];
            while (a < mid) tmp[k++] = v[a++];
            while (b < hi) tmp[k++] = v[b++];
        }
        memcpy(v, tmp, (size_t)n * sizeof *v);
    }
}

kiln_status ir_eval_unique(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    KILN_TRY(ir_eval_need(e, 0));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    if (!ir_dtype_is_numeric(x->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "input of dtype %s", kiln_dtype_name(x->dtype));
    bool sorted = ir_eval_attr_int(e, "sorted", 1) != 0;
    bool has_axis = ir_eval_has_attr(e, "axis");
    int axis = 0;
    unique_items it = {.x = x, .outer = 1, .n = ir_numel(x), .inner = 1};
    if (has_axis) {
        if (x->rank == 0) return ir_eval_fail(e, KILN_ERR_SHAPE, "cannot take unique slices of a scalar");
        KILN_TRY(ir_eval_axis(e, ir_eval_attr_int(e, "axis", 0), x->rank, &axis));
        it.outer = prod(0, axis, x->dims);
        it.n = x->dims[axis];
        it.inner = prod(axis + 1, x->rank, x->dims);
    }
    int64_t n = it.n;
    /* order, tmp, group of each item, and per group: first item, count, output position */
    int64_t *buf = base_malloc((size_t)(n ? n : 1) * 6 * sizeof(int64_t));
    if (!buf) return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for %lld items", (long long)n);
    int64_t *order = buf, *tmp = buf + n, *group = buf + 2 * n;
    int64_t *first = buf + 3 * n, *count = buf + 4 * n, *pos = buf + 5 * n;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    sort_items(&it, order, tmp, n);
    int64_t ng = 0;
    for (int64_t s = 0; s < n; s++) {
        if (ng == 0 || compare_items(&it, order[s], first[ng - 1]) != 0) {
            first[ng] = order[s];
            count[ng] = 0;
            ng++;
        }
        group[order[s]] = ng - 1;
        count[ng - 1]++;
    }
    if (sorted) {
        for (int64_t g = 0; g < ng; g++) pos[g] = g;
    } else {
        int64_t next = 0;
        for (int64_t g = 0; g < ng; g++) pos[g] = -1;
        for (int64_t i = 0; i < n; i++)
            if (pos[group[i]] < 0) pos[group[i]] = next++;
    }

    int64_t dims[IR_MAX_RANK];
    int rank = has_axis ? x->rank : 1;
    for (int k = 0; k < x->rank; k++) dims[k] = x->dims[k];
    dims[has_axis ? axis : 0] = ng;
    kiln_status st = ir_eval_out(e, 0, x->dtype, rank, dims);
    for (int i = 1; i < e->n_out && st == KILN_OK; i++) st = ir_eval_out(e, i, KILN_I64, 1, i == 2 ? &n : &ng);
    if (st != KILN_OK || e->infer) {
        base_free(buf);
        return st;
    }
    const char *src = x->data;
    char *dst = e->out[0].data;
    size_t inner = (size_t)it.inner * size;
    for (int64_t g = 0; g < ng; g++) {
        int64_t p = pos[g];
        for (int64_t o = 0; o < it.outer; o++)
            memcpy(dst + (size_t)(o * ng + p) * inner, src + (size_t)(o * n + first[g]) * inner, inner);
        if (e->n_out > 1) ((int64_t *)e->out[1].data)[p] = first[g];
        if (e->n_out > 3) ((int64_t *)e->out[3].data)[p] = count[g];
    }
    if (e->n_out > 2)
        for (int64_t i = 0; i < n; i++) ((int64_t *)e->out[2].data)[i] = pos[group[i]];
    base_free(buf);
    return KILN_OK;
}

/* ---- ReverseSequence, DepthToSpace, SpaceToDepth ---------------------------------------------- */

kiln_status ir_eval_reverse_sequence(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 2));
    const ir_tensor *x = e->in[0], *lens = e->in[1];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    if (x->rank < 2) return ir_eval_fail(e, KILN_ERR_SHAPE, "the input must have rank >= 2, not %d", x->rank);
    int64_t ba = ir_eval_attr_int(e, "batch_axis", 1), ta = ir_eval_attr_int(e, "time_axis", 0);
    if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "batch_axis %lld and time_axis %lld must be 0 and 1",
                            (long long)ba, (long long)ta);
    int64_t batch = x->dims[ba], steps = x->dims[ta];
    if (!ir_dtype_is_int(lens->dtype) || lens->rank != 1 || lens->dims[0] != batch)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "sequence_lens must be int64[%lld], not %s", (long long)batch,
                            ir_tensor_type_str(lens, (char[64]){0}, 64));
    KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
    if (e->infer) return KILN_OK;
    for (int64_t b = 0; b < batch; b++) {
        int64_t len = ir_get_i64(lens, b);
        if (len < 0 || len > steps)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                                (long long)len, (long long)steps);
    }
    int64_t strides[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, n = ir_numel(x);
    ir_strides(x->rank, x->dims, strides);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < n; i++) {
        int64_t t = idx[ta], len = ir_get_i64(lens, idx[ba]);
        int64_t from = t < len ? len - 1 - t : t;
        int64_t off = (int64_t)i + (from - t) * strides[ta];
        memcpy(dst + (size_t)i * size, src + (size_t)off * size, size);
        index_next(x->rank, x->dims, idx);
    }
    return KILN_OK;
}

/* DepthToSpace moves channel blocks into b x b spatial tiles; DCR takes the
 * tile position as the outer part of the channel, CRD as the inner part.
 * SpaceToDepth is the inverse of DCR. */
kiln_status ir_eval_depth_space(ir_eval *e)
{
    KILN_TRY(require_inputs(e, 1));
    const ir_tensor *x = e->in[0];
    size_t size;
    KILN_TRY(elem_size(e, x, "the input", &size));
    bool to_space = e->node->op == KILN_OP_DEPTH_TO_SPACE;
    if (x->rank != 4) return ir_eval_fail(e, KILN_ERR_SHAPE, "the input must be 4-D (NCHW), not of rank %d", x->rank);
    if (!ir_eval_has_attr(e, "blocksize"))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "the blocksize attribute is required");
    int64_t b = ir_eval_attr_int(e, "blocksize", 0);
    if (b < 1 || b > (1 << 20))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "blocksize %lld must be positive", (long long)b);
    bool crd = false;
    if (to_space) {
        const char *mode = ir_eval_attr_str(e, "mode", "DCR");
        if (strcmp(mode, "CRD") == 0) crd = true;
        else if (strcmp(mode, "DCR") != 0) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
    }
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], dims[4];
    if (to_space) {
        if (C % (b * b) != 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "channels %lld are not a multiple of blocksize^2 = %lld",
                                (long long)C, (long long)(b * b));
        if (H > INT64_MAX / b || W > INT64_MAX / b) return ir_eval_fail(e, KILN_ERR_SHAPE, "the output overflows");
        int64_t d[4] = {N, C / (b * b), H * b, W * b};
        memcpy(dims, d, sizeof d);
    } else {
        if (H % b != 0 || W % b != 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "height %lld and width %lld must be multiples of blocksize %lld",
                                (long long)H, (long long)W, (long long)b);
        if (C > INT64_MAX / (b * b)) return ir_eval_fail(e, KILN_ERR_SHAPE, "the output overflows");
        int64_t d[4] = {N, C * b * b, H / b, W / b};
        memcpy(dims, d, sizeof d);
    }
    KILN_TRY(ir_eval_out(e, 0, x->dtype, 4, dims));
    if (e->infer) return KILN_OK;
    int64_t idx[4] = {0}, n = ir_dims_numel(4, dims);
    const char *src = x->data;
    char *dst = e->out[0].data;
    for (int64_t i = 0; i < n; i++) {
        int64_t on = idx[0], oc = idx[1], oh = idx[2], ow = idx[3], c, h, w;
        if (to_space) {
            int64_t bh = oh % b, bw = ow % b, cs = dims[1];
            c = crd ? (oc * b + bh) * b + bw : (bh * b + bw) * cs + oc;
            h = oh / b;
            w = ow / b;
        } else {
            int64_t tile = oc / C, bh = tile / b, bw = tile % b;
            c = oc % C;
            h = oh * b + bh;
            w = ow * b + bw;
        }
        int64_t off = ((on * C + c) * H + h) * W + w;
        memcpy(dst + (size_t)i * size, src + (size_t)off * size, size);
        index_next(4, dims, idx);
    }
    return KILN_OK;
}
