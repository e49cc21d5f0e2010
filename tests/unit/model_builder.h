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

#define MB_MAX 32
#define MB_MAX_IO 8    /* inputs and outputs of one node */
#define MB_MAX_ATTRS 8 /* attributes of one node (the mb_attr_* helpers) */
#define MB_MAX_LIST 16 /* elements of an ints / floats attribute */

typedef struct mb_model {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opset_ptr;
    Onnx__NodeProto nodes[MB_MAX], *node_ptrs[MB_MAX];
    char *node_in[MB_MAX][MB_MAX_IO], *node_out[MB_MAX][MB_MAX_IO];
    Onnx__AttributeProto attrs[MB_MAX][MB_MAX_ATTRS], *attr_ptrs[MB_MAX][MB_MAX_ATTRS];
    int64_t attr_ints[MB_MAX][MB_MAX_ATTRS][MB_MAX_LIST];
    float attr_floats[MB_MAX][MB_MAX_ATTRS][MB_MAX_LIST];
    Onnx__TensorProto attr_tensors[MB_MAX][MB_MAX_ATTRS];
    int64_t attr_tensor_dims[MB_MAX][MB_MAX_ATTRS][8];
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
/* An initializer of any dtype: `nbytes` bytes of little-endian elements from
 * `data` (borrowed until mb_pack) as raw_data. */
Onnx__TensorProto *mb_init_tensor(mb_model *m, const char *name, kiln_dtype t, int rank, const int64_t *dims,
                                  const void *data, size_t nbytes);
/* Marks an initializer as external: location, offset, length (-1: omit). */
void mb_external(mb_model *m, Onnx__TensorProto *t, const char *location, long long offset, long long length);
Onnx__NodeProto *mb_node(mb_model *m, const char *op, const char *name, const char *in0, const char *in1,
                         const char *out);
/* A node with any number of inputs and outputs (up to MB_MAX_IO each); an
 * empty name is an omitted optional input or output. Names are borrowed. */
Onnx__NodeProto *mb_node_io(mb_model *m, const char *op, const char *name, int n_in, const char *const *in,
                            int n_out, const char *const *out);
/* Attributes of node n (made by mb_node or mb_node_io on m, with no
 * attribute array of its own); lists are copied, strings and graphs borrowed. */
void mb_attr_int(mb_model *m, Onnx__NodeProto *n, const char *name, int64_t v);
void mb_attr_float(mb_model *m, Onnx__NodeProto *n, const char *name, float v);
void mb_attr_string(mb_model *m, Onnx__NodeProto *n, const char *name, const char *v);
void mb_attr_ints(mb_model *m, Onnx__NodeProto *n, const char *name, int count, const int64_t *v);
void mb_attr_floats(mb_model *m, Onnx__NodeProto *n, const char *name, int count, const float *v);
/* A tensor attribute (Constant's value...): data borrowed as raw_data. */
void mb_attr_tensor(mb_model *m, Onnx__NodeProto *n, const char *name, kiln_dtype t, int rank, const int64_t *dims,
                    const void *data, size_t nbytes);
/* A graph attribute (If/Loop/Scan bodies): g is borrowed, e.g. the graph of
 * another mb_model. */
void mb_attr_graph(mb_model *m, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g);
/* Serialized model; free() it. */
void *mb_pack(mb_model *m, size_t *n);

#endif
