/*
 * ops.c: the op registry table built from ops.def, op lookup by ONNX name,
 * and the dtype table.
 */
#include "ir/interp_ops.h"

#include <string.h>

const ir_op_info ir_ops[KILN_OP_COUNT] = {
#define X(id, nm, mi, ma, mo, mx, fl, ev) \
    [KILN_OP_##id] = {.name = nm, .min_in = mi, .max_in = ma, .min_out = mo, .max_out = mx, .flags = fl, .eval = ev},
#include "ir/ops.def"
#undef X
};

kiln_op ir_op_lookup(const char *domain, const char *op_type)
{
    if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0) return KILN_OP_COUNT;
    for (int i = 0; i < KILN_OP_COUNT; i++)
        if (strcmp(ir_ops[i].name, op_type) == 0) return (kiln_op)i;
    return KILN_OP_COUNT;
}

/* ---- dtypes --------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtypes[KILN_DTYPE_COUNT] = {
    [KILN_UNDEF] = {"undefined", 0}, [KILN_F32] = {"f32", 4},   [KILN_U8] = {"u8", 1},
    [KILN_I8] = {"i8", 1},           [KILN_U16] = {"u16", 2},   [KILN_I16] = {"i16", 2},
    [KILN_I32] = {"i32", 4},         [KILN_I64] = {"i64", 8},   [KILN_STRING] = {"string", 0},
    [KILN_BOOL] = {"bool", 1},       [KILN_F16] = {"f16", 2},   [KILN_F64] = {"f64", 8},
    [KILN_U32] = {"u32", 4},         [KILN_U64] = {"u64", 8},   [KILN_C64] = {"c64", 8},
    [KILN_C128] = {"c128", 16},      [KILN_BF16] = {"bf16", 2},
};
_Static_assert(KILN_COUNT(dtypes) == KILN_DTYPE_COUNT, "dtype table out of date");

const char *kiln_dtype_name(kiln_dtype t)
{
    return (unsigned)t < KILN_DTYPE_COUNT ? dtypes[t].name : "invalid";
}

size_t ir_dtype_size(kiln_dtype t) { return (unsigned)t < KILN_DTYPE_COUNT ? dtypes[t].size : 0; }

bool ir_dtype_is_float(kiln_dtype t)
{
    return t == KILN_F32 || t == KILN_F64 || t == KILN_F16 || t == KILN_BF16;
}

bool ir_dtype_is_int(kiln_dtype t)
{
    switch (t) {
    case KILN_U8: case KILN_I8: case KILN_U16: case KILN_I16: case KILN_I32: case KILN_I64:
    case KILN_U32: case KILN_U64:
        return true;
    default:
        return false;
    }
}

bool ir_dtype_is_signed(kiln_dtype t)
{
    return t == KILN_I8 || t == KILN_I16 || t == KILN_I32 || t == KILN_I64 || ir_dtype_is_float(t);
}

bool ir_dtype_is_numeric(kiln_dtype t)
{
    return ir_dtype_is_float(t) || ir_dtype_is_int(t) || t == KILN_BOOL;
}
