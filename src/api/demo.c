/*
 * demo.c: the embedded default model: a small CNN classifier (two
 * convolutions, pooling, a dense layer, softmax) written as a real ONNX
 * ModelProto with deterministic pseudo-random weights, serialized, so the
 * default run goes through the same loader as any model file.
 */
#include "api/demo.h"

#include "onnx.pb-c.h"

#include <string.h>

/* Deterministic weights: a small LCG, scaled like Kaiming init. */
static float next_weight(uint64_t *s, float scale)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return ((float)((*s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f) * scale;
}

typedef struct builder {
    Onnx__TensorProto inits[8];
    Onnx__TensorProto *init_ptrs[8];
    int64_t dims[8][4];
    float *data[8];
    int n_inits;
    Onnx__NodeProto nodes[12];
    Onnx__NodeProto *node_ptrs[12];
    char *node_io[12][2][3];
    Onnx__AttributeProto attrs[12][4];
    Onnx__AttributeProto *attr_ptrs[12][4];
    int64_t attr_ints[12][4][4];
    int n_nodes;
    uint64_t seed;
    bool oom;
} builder;

static void add_init(builder *b, const char *name, int rank, const int64_t *dims, float scale)
{
    int k = b->n_inits++;
    Onnx__TensorProto *t = &b->inits[k];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    memcpy(b->dims[k], dims, (size_t)rank * sizeof(int64_t));
    t->dims = b->dims[k];
    size_t n = (size_t)ir_dims_numel(rank, dims);
    b->data[k] = base_malloc(n * sizeof(float));
    if (!b->data[k]) {
        b->oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) b->data[k][i] = next_weight(&b->seed, scale);
    t->n_float_data = n;
    t->float_data = b->data[k];
    b->init_ptrs[k] = t;
}

/* Adds a node; attrs as name=ints pairs (n_ints 0: an int attribute). */
static Onnx__NodeProto *add_node(builder *b, const char *op, const char *name, const char *in0,
                                 const char *in1, const char *in2, const char *out)
{
    int k = b->n_nodes++;
    Onnx__NodeProto *n = &b->nodes[k];
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    int ni = 0;
    const char *ins[3] = {in0, in1, in2};
    for (int i = 0; i < 3; i++)
        if (ins[i]) b->node_io[k][0][ni++] = (char *)ins[i];
    n->n_input = (size_t)ni;
    n->input = b->node_io[k][0];
    b->node_io[k][1][0] = (char *)out;
    n->n_output = 1;
    n->output = b->node_io[k][1];
    n->attribute = b->attr_ptrs[k];
    b->node_ptrs[k] = n;
    return n;
}

static void add_ints(builder *b, Onnx__NodeProto *n, const char *name, int count, int64_t v0, int64_t v1,
                     int64_t v2, int64_t v3)
{
    int k = (int)(n - b->nodes), a = (int)n->n_attribute++;
    Onnx__AttributeProto *at = &b->attrs[k][a];
    onnx__attribute_proto__init(at);
    at->name = (char *)name;
    at->has_type = 1;
    int64_t *v = b->attr_ints[k][a];
    v[0] = v0, v[1] = v1, v[2] = v2, v[3] = v3;
    if (count == 0) {
        at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        at->has_i = 1;
        at->i = v0;
    } else {
        at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        at->n_ints = (size_t)count;
        at->ints = v;
    }
    b->attr_ptrs[k][a] = at;
}

kiln_status api_demo_model(void **out, size_t *n_bytes)
{
    builder *b = base_calloc(1, sizeof(*b));
    if (!b) return KILN_ERR_OOM;
    b->seed = 20261122;
    add_init(b, "conv1.weight", 4, (int64_t[]){16, 3, 3, 3}, 0.27f);
    add_init(b, "conv1.bias", 1, (int64_t[]){16}, 0.1f);
    add_init(b, "conv2.weight", 4, (int64_t[]){32, 16, 3, 3}, 0.12f);
    add_init(b, "conv2.bias", 1, (int64_t[]){32}, 0.1f);
    add_init(b, "fc.weight", 2, (int64_t[]){10, 32}, 0.25f);
    add_init(b, "fc.bias", 1, (int64_t[]){10}, 0.1f);

    Onnx__NodeProto *n;
    n = add_node(b, "Conv", "conv1", "image", "conv1.weight", "conv1.bias", "c1");
    add_ints(b, n, "kernel_shape", 2, 3, 3, 0, 0);
    add_ints(b, n, "pads", 4, 1, 1, 1, 1);
    add_node(b, "Relu", "relu1", "c1", NULL, NULL, "r1");
    n = add_node(b, "MaxPool", "pool1", "r1", NULL, NULL, "p1");
    add_ints(b, n, "kernel_shape", 2, 2, 2, 0, 0);
    add_ints(b, n, "strides", 2, 2, 2, 0, 0);
    n = add_node(b, "Conv", "conv2", "p1", "conv2.weight", "conv2.bias", "c2");
    add_ints(b, n, "kernel_shape", 2, 3, 3, 0, 0);
    add_ints(b, n, "pads", 4, 1, 1, 1, 1);
    add_node(b, "Relu", "relu2", "c2", NULL, NULL, "r2");
    add_node(b, "GlobalAveragePool", "gap", "r2", NULL, NULL, "g");
    n = add_node(b, "Flatten", "flatten", "g", NULL, NULL, "f");
    add_ints(b, n, "axis", 0, 1, 0, 0, 0);
    n = add_node(b, "Gemm", "fc", "f", "fc.weight", "fc.bias", "logits");
    add_ints(b, n, "transB", 0, 1, 0, 0, 0);
    n = add_node(b, "Softmax", "softmax", "logits", NULL, NULL, "probs");
    add_ints(b, n, "axis", 0, 1, 0, 0, 0);

    /* graph input / output types */
    Onnx__TensorShapeProto__Dimension dims_in[4], dims_out[2];
    Onnx__TensorShapeProto__Dimension *pin[4], *pout[2];
    const int64_t in_shape[4] = {1, 3, 32, 32}, out_shape[2] = {1, 10};
    for (int i = 0; i < 4; i++) {
        onnx__tensor_shape_proto__dimension__init(&dims_in[i]);
        dims_in[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims_in[i].dim_value = in_shape[i];
        pin[i] = &dims_in[i];
    }
    for (int i = 0; i < 2; i++) {
        onnx__tensor_shape_proto__dimension__init(&dims_out[i]);
        dims_out[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims_out[i].dim_value = out_shape[i];
        pout[i] = &dims_out[i];
    }
    Onnx__TensorShapeProto shp_in, shp_out;
    onnx__tensor_shape_proto__init(&shp_in);
    onnx__tensor_shape_proto__init(&shp_out);
    shp_in.n_dim = 4, shp_in.dim = pin;
    shp_out.n_dim = 2, shp_out.dim = pout;
    Onnx__TypeProto__Tensor tt_in, tt_out;
    onnx__type_proto__tensor__init(&tt_in);
    onnx__type_proto__tensor__init(&tt_out);
    tt_in.has_elem_type = tt_out.has_elem_type = 1;
    tt_in.elem_type = tt_out.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt_in.shape = &shp_in;
    tt_out.shape = &shp_out;
    Onnx__TypeProto ty_in, ty_out;
    onnx__type_proto__init(&ty_in);
    onnx__type_proto__init(&ty_out);
    ty_in.value_case = ty_out.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty_in.tensor_type = &tt_in;
    ty_out.tensor_type = &tt_out;
    Onnx__ValueInfoProto vi_in, vi_out, *pvi_in = &vi_in, *pvi_out = &vi_out;
    onnx__value_info_proto__init(&vi_in);
    onnx__value_info_proto__init(&vi_out);
    vi_in.name = "image", vi_in.type = &ty_in;
    vi_out.name = "probs", vi_out.type = &ty_out;

    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = "kiln_demo_cnn";
    g.n_node = (size_t)b->n_nodes, g.node = b->node_ptrs;
    g.n_initializer = (size_t)b->n_inits, g.initializer = b->init_ptrs;
    g.n_input = 1, g.input = &pvi_in;
    g.n_output = 1, g.output = &pvi_out;
    Onnx__OperatorSetIdProto os, *pos = &os;
    onnx__operator_set_id_proto__init(&os);
    os.domain = "";
    os.has_version = 1;
    os.version = 17;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.producer_name = "kiln-demo";
    m.n_opset_import = 1, m.opset_import = &pos;
    m.graph = &g;

    kiln_status st = KILN_OK;
    *out = NULL;
    if (b->oom) st = KILN_ERR_OOM;
    else {
        size_t n_packed = onnx__model_proto__get_packed_size(&m);
        uint8_t *buf = base_malloc(n_packed);
        if (!buf) st = KILN_ERR_OOM;
        else {
            onnx__model_proto__pack(&m, buf);
            *out = buf;
            *n_bytes = n_packed;
        }
    }
    for (int i = 0; i < b->n_inits; i++) base_free(b->data[i]);
    base_free(b);
    return st;
}
