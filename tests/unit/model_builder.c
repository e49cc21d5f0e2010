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

/* Builder limits are the test's own bugs: stop loudly. */
static void check_limit(int k, int max, const char *what)
{
    if (k < max) return;
    fprintf(stderr, "model_builder: more than %d %s\n", max, what);
    abort();
}

static void fill_tensor(Onnx__TensorProto *t, int64_t *dim_store, const char *name, kiln_dtype type, int rank,
                        const int64_t *dims, const void *data, size_t nbytes)
{
    check_limit(rank, 9, "tensor dims");
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = (int32_t)type;
    if (rank > 0) memcpy(dim_store, dims, (size_t)rank * sizeof(int64_t));
    t->n_dims = (size_t)rank;
    t->dims = dim_store;
    t->has_raw_data = 1;
    t->raw_data.len = nbytes;
    t->raw_data.data = (uint8_t *)data;
}

Onnx__TensorProto *mb_init_tensor(mb_model *m, const char *name, kiln_dtype type, int rank, const int64_t *dims,
                                  const void *data, size_t nbytes)
{
    check_limit((int)m->graph.n_initializer, MB_MAX, "initializers");
    int k = (int)m->graph.n_initializer++;
    Onnx__TensorProto *t = &m->inits[k];
    fill_tensor(t, m->init_dims[k], name, type, rank, dims, data, nbytes);
    m->init_ptrs[k] = t;
    return t;
}

Onnx__TensorProto *mb_init_f32(mb_model *m, const char *name, int rank, const int64_t *dims, const float *values,
                               size_t n_values)
{
    return mb_init_tensor(m, name, KILN_F32, rank, dims, values, n_values * sizeof(float));
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

Onnx__NodeProto *mb_node_io(mb_model *m, const char *op, const char *name, int n_in, const char *const *in,
                            int n_out, const char *const *out)
{
    check_limit((int)m->graph.n_node, MB_MAX, "nodes");
    check_limit(n_in, MB_MAX_IO + 1, "node inputs");
    check_limit(n_out, MB_MAX_IO + 1, "node outputs");
    int k = (int)m->graph.n_node++;
    Onnx__NodeProto *n = &m->nodes[k];
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    for (int i = 0; i < n_in; i++) m->node_in[k][i] = (char *)in[i];
    for (int i = 0; i < n_out; i++) m->node_out[k][i] = (char *)out[i];
    n->n_input = (size_t)n_in;
    n->input = m->node_in[k];
    n->n_output = (size_t)n_out;
    n->output = m->node_out[k];
    m->node_ptrs[k] = n;
    return n;
}

/* A new attribute on node n, of the given type. */
static Onnx__AttributeProto *new_attr(mb_model *m, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type, int *node, int *slot)
{
    int k = (int)(n - m->nodes);
    check_limit((int)n->n_attribute, MB_MAX_ATTRS, "attributes on one node");
    int a = (int)n->n_attribute++;
    Onnx__AttributeProto *at = &m->attrs[k][a];
    onnx__attribute_proto__init(at);
    at->name = (char *)name;
    at->has_type = 1;
    at->type = type;
    m->attr_ptrs[k][a] = at;
    n->attribute = m->attr_ptrs[k];
    *node = k;
    *slot = a;
    return at;
}

void mb_attr_int(mb_model *m, Onnx__NodeProto *n, const char *name, int64_t v)
{
    int k, a;
    Onnx__AttributeProto *at = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, &k, &a);
    at->has_i = 1;
    at->i = v;
}

void mb_attr_float(mb_model *m, Onnx__NodeProto *n, const char *name, float v)
{
    int k, a;
    Onnx__AttributeProto *at = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, &k, &a);
    at->has_f = 1;
    at->f = v;
}

void mb_attr_string(mb_model *m, Onnx__NodeProto *n, const char *name, const char *v)
{
    int k, a;
    Onnx__AttributeProto *at = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, &k, &a);
    at->has_s = 1;
    at->s.data = (uint8_t *)v;
    at->s.len = strlen(v);
}

void mb_attr_ints(mb_model *m, Onnx__NodeProto *n, const char *name, int count, const int64_t *v)
{
    int k, a;
    Onnx__AttributeProto *at = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, &k, &a);
    check_limit(count, MB_MAX_LIST + 1, "ints in an attribute");
    if (count > 0) memcpy(m->attr_ints[k][a], v, (size_t)count * sizeof(int64_t));
    at->n_ints = (size_t)count;
    at->ints = m->attr_ints[k][a];
}

void mb_attr_floats(mb_model *m, Onnx__NodeProto *n, const char *name, int count, const float *v)
{
    int k, a;
    Onnx__AttributeProto *at = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS, &k, &a);
    check_limit(count, MB_MAX_LIST + 1, "floats in an attribute");
    if (count > 0) memcpy(m->attr_floats[k][a], v, (size_t)count * sizeof(float));
    at->n_floats = (size_t)count;
    at->floats = m->attr_floats[k][a];
}

void mb_attr_tensor(mb_model *m, Onnx__NodeProto *n, const char *name, kiln_dtype t, int rank, const int64_t *dims,
                    const void *data, size_t nbytes)
{
    int k, a;
    Onnx__AttributeProto *at = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, &k, &a);
    fill_tensor(&m->attr_tensors[k][a], m->attr_tensor_dims[k][a], "", t, rank, dims, data, nbytes);
    at->t = &m->attr_tensors[k][a];
}

void mb_attr_graph(mb_model *m, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g)
{
    int k, a;
    Onnx__AttributeProto *at = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, &k, &a);
    at->g = g;
}

void *mb_pack(mb_model *m, size_t *n)
{
    *n = onnx__model_proto__get_packed_size(&m->model);
    void *buf = malloc(*n ? *n : 1);
    if (buf) onnx__model_proto__pack(&m->model, buf);
    return buf;
}
