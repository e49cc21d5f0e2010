/*
 * tensor.c: dense tensors: allocation with overflow checks, copies, and
 * element access through double / int64 for the reference interpreter.
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int64_t ir_dims_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

int64_t ir_numel(const ir_tensor *t) { return ir_dims_numel(t->rank, t->dims); }

kiln_status ir_tensor_alloc(ir_tensor *t, kiln_dtype dtype, int rank, const int64_t *dims)
{
    if (rank < 0 || rank > IR_MAX_RANK) return KILN_ERR_SHAPE;
    size_t esize = ir_dtype_size(dtype);
    if (esize == 0) return KILN_ERR_UNSUPPORTED;
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return KILN_ERR_SHAPE;
        if (!base_mul_ok(n, (size_t)dims[i], &n)) return KILN_ERR_SHAPE;
    }
    size_t bytes;
    if (!base_mul_ok(n, esize, &bytes) || bytes > ((size_t)1 << 40)) return KILN_ERR_SHAPE;
    void *p = base_calloc(bytes ? bytes : 1, 1);
    if (!p) return KILN_ERR_OOM;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->data = p;
    t->nbytes = bytes;
    t->owned = true;
    return KILN_OK;
}

void ir_tensor_release(ir_tensor *t)
{
    if (t->owned) base_free(t->data);
    t->data = NULL;
    t->nbytes = 0;
    t->owned = false;
}

kiln_status ir_tensor_copy(ir_tensor *dst, const ir_tensor *src)
{
    ir_tensor tmp = {0};
    KILN_TRY(ir_tensor_alloc(&tmp, src->dtype, src->rank, src->dims));
    if (src->data && tmp.nbytes == src->nbytes) memcpy(tmp.data, src->data, tmp.nbytes);
    *dst = tmp;
    return KILN_OK;
}

bool ir_same_shape(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

const char *ir_tensor_type_str(const ir_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", kiln_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* ---- element access ------------------------------------------------------- */

double ir_get_f64(const ir_tensor *t, int64_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case KILN_F32: return ((const float *)p)[i];
    case KILN_F64: return ((const double *)p)[i];
    case KILN_F16: return base_f16_to_f32(((const uint16_t *)p)[i]);
    case KILN_BF16: return base_bf16_to_f32(((const uint16_t *)p)[i]);
    case KILN_I8: return ((const int8_t *)p)[i];
    case KILN_U8: return ((const uint8_t *)p)[i];
    case KILN_I16: return ((const int16_t *)p)[i];
    case KILN_U16: return ((const uint16_t *)p)[i];
    case KILN_I32: return ((const int32_t *)p)[i];
    case KILN_U32: return ((const uint32_t *)p)[i];
    case KILN_I64: return (double)((const int64_t *)p)[i];
    case KILN_U64: return (double)((const uint64_t *)p)[i];
    case KILN_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: KILN_ASSERT(!"ir_get_f64: non-numeric dtype");
    }
    return 0;
}

int64_t ir_get_i64(const ir_tensor *t, int64_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case KILN_I8: return ((const int8_t *)p)[i];
    case KILN_U8: return ((const uint8_t *)p)[i];
    case KILN_I16: return ((const int16_t *)p)[i];
    case KILN_U16: return ((const uint16_t *)p)[i];
    case KILN_I32: return ((const int32_t *)p)[i];
    case KILN_U32: return ((const uint32_t *)p)[i];
    case KILN_I64: return ((const int64_t *)p)[i];
    case KILN_U64: return (int64_t)((const uint64_t *)p)[i];
    case KILN_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: {
        double v = ir_get_f64(t, i);
        if (isnan(v)) return INT64_MIN;
        if (v >= 9.2233720368547758e18) return INT64_MAX;
        if (v <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

/* Float to integer: truncation toward zero, as C casts and numpy do; values
 * outside the target range wrap the way a cast through int64 does. */
static int64_t f64_to_int(double v)
{
    if (isnan(v)) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

/* To uint64: as f64_to_int below 2^63 (negative values wrap), exact from
 * 2^63 and saturated from 2^64 (+inf too). No conversion out of range, whose
 * result C leaves undefined and x86's scalar and AVX-512 instructions
 * answer differently; generated code on every target uses the same rule. */
static uint64_t f64_to_u64(double v)
{
    if (v >= 18446744073709551616.0) return UINT64_MAX;
    if (v >= 9.2233720368547758e18) return (uint64_t)f64_to_int(v - 9.2233720368547758e18) + (UINT64_C(1) << 63);
    return (uint64_t)f64_to_int(v);
}

/* f16 and bf16 are reached through f32; rounding v to f32 "to odd" first
 * makes the second rounding give the correctly rounded result, as if v were
 * rounded once. */
static float f32_round_odd(double v)
{
    float f = (float)v;
    if (isnan(v) || isinf(f) || (double)f == v) return f;
    if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    u |= 1;
    memcpy(&f, &u, sizeof(u));
    return f;
}

void ir_set_f64(ir_tensor *t, int64_t i, double v)
{
    void *p = t->data;
    switch (t->dtype) {
    case KILN_F32: ((float *)p)[i] = (float)v; break;
    case KILN_F64: ((double *)p)[i] = v; break;
    case KILN_F16: ((uint16_t *)p)[i] = base_f32_to_f16(f32_round_odd(v)); break;
    case KILN_BF16: ((uint16_t *)p)[i] = base_f32_to_bf16(f32_round_odd(v)); break;
    case KILN_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case KILN_U64:
        ((uint64_t *)p)[i] = f64_to_u64(v);
        break;
    default: ir_set_i64(t, i, f64_to_int(v)); break;
    }
}

void ir_set_i64(ir_tensor *t, int64_t i, int64_t v)
{
    void *p = t->data;
    switch (t->dtype) {
    case KILN_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case KILN_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case KILN_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case KILN_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case KILN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case KILN_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case KILN_I64: ((int64_t *)p)[i] = v; break;
    case KILN_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case KILN_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: ir_set_f64(t, i, (double)v); break;
    }
}

double *ir_to_f64(const ir_tensor *t)
{
    int64_t n = ir_numel(t);
    double *d = base_malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!d) return NULL;
    if (t->dtype == KILN_F32) {
        const float *f = t->data;
        for (int64_t i = 0; i < n; i++) d[i] = f[i];
    } else {
        for (int64_t i = 0; i < n; i++) d[i] = ir_get_f64(t, i);
    }
    return d;
}

int64_t *ir_to_i64(const ir_tensor *t)
{
    int64_t n = ir_numel(t);
    int64_t *d = base_malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!d) return NULL;
    for (int64_t i = 0; i < n; i++) d[i] = ir_get_i64(t, i);
    return d;
}

void ir_from_f64(ir_tensor *t, const double *src)
{
    int64_t n = ir_numel(t);
    if (t->dtype == KILN_F32) {
        float *f = t->data;
        for (int64_t i = 0; i < n; i++) f[i] = (float)src[i];
    } else {
        for (int64_t i = 0; i < n; i++) ir_set_f64(t, i, src[i]);
    }
}

void ir_from_i64(ir_tensor *t, const int64_t *src)
{
    int64_t n = ir_numel(t);
    for (int64_t i = 0; i < n; i++) ir_set_i64(t, i, src[i]);
}
