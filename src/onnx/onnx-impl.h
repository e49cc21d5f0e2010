/*
 * onnx-impl.h: what the ONNX reader's files share.
 */
#ifndef KILN_ONNX_IMPL_H
#define KILN_ONNX_IMPL_H

#include "onnx/onnx.h"
#include "onnx.pb-c.h"

/* Largest element count kiln accepts in one tensor (2^40). */
#define ONNX_MAX_DIM ((int64_t)1 << 40)
/* Deepest nesting of subgraphs (If inside Loop inside ...). */
#define ONNX_MAX_DEPTH 64

typedef struct onnx_ctx {
    ir_model *model;
    const char *base_dir; /* NULL: no external data */
    base_diag *d;
    char **map_paths;     /* resolved paths of model->maps */
    struct {
        const char *name;
        int version;
    } *domains;           /* the model's opset imports */
    int n_domains;
} onnx_ctx;

/* Validates tp and fills t; data points into tp, a mapped file, or a (where
 * a copy is needed). */
kiln_status onnx_tensor_from_proto(onnx_ctx *c, const Onnx__TensorProto *tp, base_arena *a, ir_tensor *t);

#endif
