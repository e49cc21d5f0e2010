/*
 * model_builder.c: see model_builder.h.
 */
#include "model_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mb_init(mb_model *m, int opset)
{
    memset(m, 0, sizeof(*m));
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.domain = "";
    m->opset.has_version = 1;
    m->opset.version = opset;
    m->opset_ptr = &m->opset;
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.n_opset_import = 1;
    m->model.opset_import = &m->opset_ptr;
    m->model.graph = &m->graph;
    m->graph.name = "test";
    m->graph.node = m->node_ptrs;
    m->graph.initializer = m->init_ptrs;
    m->graph.input = m->in_ptrs;
    m->graph.output = m->out_ptrs;
}

static Onnx__ValueInfoProto *new_vi(mb_model *m, const char *name, kiln_dtype t, int rank, const int64_t *dims)
{
    int k = m->n_vis++;
    Onnx__ValueInfoProto *vi = &m->vis[k];
    onnx__value_info_proto__init(vi);
    vi->name = (char *)name;
    if (t == KILN_UNDEF) return vi;
    onnx__type_proto__init(&m->types[k]);
    onnx__type_proto__tensor__init(&m->ttypes[k]);
    onnx__tensor_shape_proto__init(&m->shapes[k]);
    m->types[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    m->types[k].tensor_type = &m->ttypes[k];
    m->ttypes[k].has_elem_type = 1;
    m->ttypes[k].elem_type = (int32_t)t;
    m->ttypes[k].shape = &m->shapes[k];
    for (int i = 0; i < rank; i++) {
        onnx__tensor_shape_proto__dimension__init(&m->dims[k][i]);
        m->dims[k][i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        m->dims[k][i].dim_value = dims[i];
        m->dim_ptrs[k][i] = &m->dims[k][i];
    }
    m->shapes[k].n_dim = (size_t)rank;
    m->shapes[k].dim = m->dim_ptrs[k];
    vi->type = &m->types[k];
    return vi;
}

void mb_input(mb_model *m, const char *name, kiln_dtype t, int rank, const int64_t *dims)
{
    m->in_ptrs[m->graph.n_input++] = new_vi(m, name, t, rank, dims);
}

void mb_output(mb_model *m, const char *name)
{
    m->out_ptrs[m->graph.n_output++] = new_vi(m, name, KILN_UNDEF, 0, NULL);
}

Onnx__TensorProto *mb_init_f32(mb_model *m, const char *name, int rank, const int64_t *dims, const float *values,
                               size_t n_values)
{
    int k = (int)m->graph.n_initializer++;
    Onnx__TensorProto *t = &m->inits[k];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    memcpy(m->init_dims[k], dims, (size_t)rank * sizeof(int64_t));
    t->n_dims = (size_t)rank;
    t->dims = m->init_dims[k];
    t->has_raw_data = 1;
    t->raw_data.len = n_values * sizeof(float);
    t->raw_data.data = (uint8_t *)values;
    m->init_ptrs[k] = t;
    return t;
}

void mb_external(mb_model *m, Onnx__TensorProto *t, const char *location, long long offset, long long length)
{
    int k = (int)(t - m->inits);
    static char bufs[MB_MAX][2][32];
    t->has_raw_data = 0;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    int n = 0;
    onnx__string_string_entry_proto__init(&m->ext[k][n]);
    m->ext[k][n].key = "location";
    m->ext[k][n].value = (char *)location;
    m->ext_ptrs[k][n] = &m->ext[k][n];
    n++;
    snprintf(bufs[k][0], 32, "%lld", offset);
    onnx__string_string_entry_proto__init(&m->ext[k][n]);
    m->ext[k][n].key = "offset";
    m->ext[k][n].value = bufs[k][0];
    m->ext_ptrs[k][n] = &m->ext[k][n];
    n++;
    if (length >= 0) {
        snprintf(bufs[k][1], 32, "%lld", length);
        onnx__string_string_entry_proto__init(&m->ext[k][n]);
        m->ext[k][n].key = "length";
        m->ext[k][n].value = bufs[k][1];
        m->ext_ptrs[k][n] = &m->ext[k][n];
        n++;
    }
    t->n_external_data = (size_t)n;
    t->external_data = m->ext_ptrs[k];
}

Onnx__NodeProto *mb_node(mb_model *m, const char *op, const char *name, const char *in0, const char *in1,
                         const char *out)
{
    int k = (int)m->graph.n_node++;
    Onnx__NodeProto *n = &m->nodes[k];
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    int ni = 0;
    if (in0) m->node_in[k][ni++] = (char *)in0;
    if (in1) m->node_in[k][ni++] = (char *)in1;
    n->n_input = (size_t)ni;
    n->input = m->node_in[k];
    m->node_out[k][0] = (char *)out;
    n->n_output = 1;
    n->output = m->node_out[k];
    m->node_ptrs[k] = n;
    return n;
}

void *mb_pack(mb_model *m, size_t *n)
{
    *n = onnx__model_proto__get_packed_size(&m->model);
    void *buf = malloc(*n ? *n : 1);
    if (buf) onnx__model_proto__pack(&m->model, buf);
    return buf;
}
