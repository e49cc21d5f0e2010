/*
 * model_builder.h: builds small ONNX models in memory for loader tests,
 * including deliberately malformed ones.
 *
 *     mb_model mb; mb_init(&mb, 17);
 *     mb_input(&mb, "x", KILN_F32, 2, (int64_t[]){2, 3});
 *     mb_node(&mb, "Relu", "relu", "x", NULL, "y");
 *     mb_output(&mb, "y");
 *     size_t n; void *buf = mb_pack(&mb, &n);
 */
#ifndef KILN_TESTS_MODEL_BUILDER_H
#define KILN_TESTS_MODEL_BUILDER_H

#include "onnx.pb-c.h"
#include "kiln.h"

#include <stddef.h>
#include <stdint.h>

#define MB_MAX 16

typedef struct mb_model {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opset_ptr;
    Onnx__NodeProto nodes[MB_MAX], *node_ptrs[MB_MAX];
    char *node_in[MB_MAX][3], *node_out[MB_MAX][1];
    Onnx__TensorProto inits[MB_MAX], *init_ptrs[MB_MAX];
    int64_t init_dims[MB_MAX][8];
    Onnx__StringStringEntryProto ext[MB_MAX][3], *ext_ptrs[MB_MAX][3];
    Onnx__ValueInfoProto vis[2 * MB_MAX], *in_ptrs[MB_MAX], *out_ptrs[MB_MAX];
    Onnx__TypeProto types[2 * MB_MAX];
    Onnx__TypeProto__Tensor ttypes[2 * MB_MAX];
    Onnx__TensorShapeProto shapes[2 * MB_MAX];
    Onnx__TensorShapeProto__Dimension dims[2 * MB_MAX][8], *dim_ptrs[2 * MB_MAX][8];
    int n_vis;
} mb_model;

void mb_init(mb_model *m, int opset);
void mb_input(mb_model *m, const char *name, kiln_dtype t, int rank, const int64_t *dims);
void mb_output(mb_model *m, const char *name);
/* A float initializer holding `n_values` floats from `values` as raw_data. */
Onnx__TensorProto *mb_init_f32(mb_model *m, const char *name, int rank, const int64_t *dims,
                               const float *values, size_t n_values);
/* Marks an initializer as external: location, offset, length (-1: omit). */
void mb_external(mb_model *m, Onnx__TensorProto *t, const char *location, long long offset, long long length);
Onnx__NodeProto *mb_node(mb_model *m, const char *op, const char *name, const char *in0, const char *in1,
                         const char *out);
/* Serialized model; free() it. */
void *mb_pack(mb_model *m, size_t *n);

#endif
