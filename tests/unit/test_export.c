/*
 * test_export.c: the ONNX exporter (onnx/export.c). Models built in memory
 * are loaded, exported and loaded back: structure and every attribute kind
 * must survive, sub-ranges of a graph (the c target's fallback segments)
 * must compute the same bits as the original, subgraphs must still reach
 * the outer values they read, and bad arguments are reported.
 */
#include "ir/interp.h"
#include "model_builder.h"
#include "onnx/onnx.h"
#include "unit.h"

#include <stdlib.h>

/* ---- building protos the model builder cannot (attributes, subgraphs) ------ */

typedef struct pb_graph {
    Onnx__GraphProto g;
    Onnx__NodeProto *nodes[16];
    Onnx__ValueInfoProto *ins[8], *outs[8];
    Onnx__TensorProto *inits[8];
} pb_graph;

static pb_graph *pb_graph_new(base_arena *a, const char *name)
{
    pb_graph *g = base_arena_alloc(a, sizeof(*g));
    onnx__graph_proto__init(&g->g);
    g->g.name = (char *)name;
    g->g.node = g->nodes;
    g->g.input = g->ins;
    g->g.output = g->outs;
    g->g.initializer = g->inits;
    return g;
}

/* t KILN_UNDEF: untyped; rank -1: no shape. */
static Onnx__ValueInfoProto *pb_vi(base_arena *a, const char *name, kiln_dtype t, int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = base_arena_alloc(a, sizeof(*vi));
    onnx__value_info_proto__init(vi);
    vi->name = (char *)name;
    if (t == KILN_UNDEF) return vi;
    Onnx__TypeProto *tp = base_arena_alloc(a, sizeof(*tp));
    Onnx__TypeProto__Tensor *tt = base_arena_alloc(a, sizeof(*tt));
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)t;
    vi->type = tp;
    if (rank < 0) return vi;
    Onnx__TensorShapeProto *sp = base_arena_alloc(a, sizeof(*sp));
    onnx__tensor_shape_proto__init(sp);
    sp->dim = base_arena_alloc(a, (size_t)(rank + 1) * sizeof(*sp->dim));
    for (int i = 0; i < rank; i++) {
        sp->dim[i] = base_arena_alloc(a, sizeof(**sp->dim));
        onnx__tensor_shape_proto__dimension__init(sp->dim[i]);
        sp->dim[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        sp->dim[i]->dim_value = dims[i];
    }
    sp->n_dim = (size_t)rank;
    tt->shape = sp;
    return vi;
}

static void pb_input(base_arena *a, pb_graph *g, const char *name, kiln_dtype t, int rank, const int64_t *dims)
{
    g->ins[g->g.n_input++] = pb_vi(a, name, t, rank, dims);
}

static void pb_output(base_arena *a, pb_graph *g, const char *name)
{
    g->outs[g->g.n_output++] = pb_vi(a, name, KILN_UNDEF, 0, NULL);
}

/* "a,,b" -> {"a", "", "b"} */
static char **pb_names(base_arena *a, const char *list, size_t *n)
{
    *n = 0;
    if (!list) return NULL;
    char **out = base_arena_alloc(a, 16 * sizeof(char *));
    char *s = base_arena_strdup(a, list);
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma) *comma = 0;
        out[(*n)++] = s;
        if (!comma) break;
        s = comma + 1;
    }
    return out;
}

static Onnx__NodeProto *pb_node(base_arena *a, pb_graph *g, const char *op, const char *name, const char *ins,
                                const char *outs)
{
    Onnx__NodeProto *n = base_arena_alloc(a, sizeof(*n));
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    n->input = pb_names(a, ins, &n->n_input);
    n->output = pb_names(a, outs, &n->n_output);
    n->attribute = base_arena_alloc(a, 16 * sizeof(*n->attribute));
    if (g) g->nodes[g->g.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *pb_attr(base_arena *a, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *at = base_arena_alloc(a, sizeof(*at));
    onnx__attribute_proto__init(at);
    at->name = (char *)name;
    at->has_type = 1;
    at->type = type;
    n->attribute[n->n_attribute++] = at;
    return at;
}

static Onnx__TensorProto *pb_tensor(base_arena *a, const char *name, kiln_dtype t, int rank, const int64_t *dims,
                                    const void *data, size_t nbytes)
{
    Onnx__TensorProto *tp = base_arena_alloc(a, sizeof(*tp));
    onnx__tensor_proto__init(tp);
    tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t;
    tp->dims = base_arena_alloc(a, (size_t)(rank + 1) * sizeof(int64_t));
    if (rank) memcpy(tp->dims, dims, (size_t)rank * sizeof(int64_t));
    tp->n_dims = (size_t)rank;
    tp->has_raw_data = 1;
    tp->raw_data.data = (uint8_t *)data;
    tp->raw_data.len = nbytes;
    return tp;
}

static void pb_init(base_arena *a, pb_graph *g, const char *name, kiln_dtype t, int rank, const int64_t *dims,
                    const void *data, size_t nbytes)
{
    g->inits[g->g.n_initializer++] = pb_tensor(a, name, t, rank, dims, data, nbytes);
}

/* Serialized model of graph g importing the default opset 17 (plus `domain`
 * at version 3 when not NULL). base_free the result. */
static void *pb_pack(pb_graph *g, const char *domain, size_t *n)
{
    Onnx__OperatorSetIdProto os[2], *osp[2] = {&os[0], &os[1]};
    onnx__operator_set_id_proto__init(&os[0]);
    onnx__operator_set_id_proto__init(&os[1]);
    os[0].domain = "";
    os[0].has_version = 1;
    os[0].version = 17;
    os[1].domain = (char *)domain;
    os[1].has_version = 1;
    os[1].version = 3;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.opset_import = osp;
    m.n_opset_import = domain ? 2 : 1;
    m.graph = &g->g;
    *n = onnx__model_proto__get_packed_size(&m);
    void *buf = base_malloc(*n);
    onnx__model_proto__pack(&m, buf);
    return buf;
}

/* ---- helpers ------------------------------------------------------------------ */

static ir_model *load_ok(const void *buf, size_t n)
{
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    kiln_status st = onnx_load_buffer(buf, n, NULL, &m, &d);
    if (st != KILN_OK) unit_fail(__FILE__, __LINE__, "load failed: %s", base_diag_text(&d));
    base_diag_free(&d);
    return m;
}

/* Exports and reloads; NULL (with a failed check) on error. */
static ir_model *export_reload(const ir_graph *g, ir_node *const *nodes, int n_nodes, ir_value *const *ins,
                               int n_ins, ir_value *const *outs, int n_outs)
{
    base_diag d;
    base_diag_init(&d);
    void *buf = NULL;
    size_t n = 0;
    kiln_status st = nodes ? onnx_export_nodes(g, nodes, n_nodes, ins, n_ins, outs, n_outs, &buf, &n, &d)
                           : onnx_export_graph(g, &buf, &n, &d);
    if (st != KILN_OK) unit_fail(__FILE__, __LINE__, "export failed: %s", base_diag_text(&d));
    base_diag_free(&d);
    ir_model *m = st == KILN_OK ? load_ok(buf, n) : NULL;
    base_free(buf);
    return m;
}

static ir_node *find_node(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    unit_fail(__FILE__, __LINE__, "no node '%s'", name);
    return NULL;
}

static ir_value *find_value(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i]->name, name) == 0) return g->values[i];
    unit_fail(__FILE__, __LINE__, "no value '%s'", name);
    return NULL;
}

static bool same_tensor(const ir_tensor *a, const ir_tensor *b)
{
    return a->dtype == b->dtype && ir_same_shape(a, b) && a->nbytes == b->nbytes &&
           (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

static void check_same_graph(const ir_graph *a, const ir_graph *b);

static void check_same_attr(const ir_attr *x, const ir_attr *y)
{
    UNIT_CHECK(strcmp(x->name, y->name) == 0);
    UNIT_CHECK_EQ_INT(x->kind, y->kind);
    if (x->kind != y->kind) return;
    switch (x->kind) {
    case IR_ATTR_FLOAT: UNIT_CHECK(x->f == y->f); break;
    case IR_ATTR_INT: UNIT_CHECK_EQ_INT(x->i, y->i); break;
    case IR_ATTR_STRING: UNIT_CHECK(x->s_len == y->s_len && memcmp(x->s, y->s, x->s_len) == 0); break;
    case IR_ATTR_TENSOR: UNIT_CHECK(same_tensor(x->t, y->t)); break;
    case IR_ATTR_GRAPH: check_same_graph(x->g, y->g); break;
    default:
        UNIT_CHECK_EQ_INT(x->n, y->n);
        for (int i = 0; i < x->n && x->n == y->n; i++) {
            if (x->kind == IR_ATTR_FLOATS) UNIT_CHECK(x->floats[i] == y->floats[i]);
            if (x->kind == IR_ATTR_INTS) UNIT_CHECK_EQ_INT(x->ints[i], y->ints[i]);
            if (x->kind == IR_ATTR_STRINGS) UNIT_CHECK(strcmp(x->strings[i], y->strings[i]) == 0);
            if (x->kind == IR_ATTR_TENSORS) UNIT_CHECK(same_tensor(&x->tensors[i], &y->tensors[i]));
            if (x->kind == IR_ATTR_GRAPHS) check_same_graph(x->graphs[i], y->graphs[i]);
        }
    }
}

static void check_same_value(const ir_value *x, const ir_value *y)
{
    UNIT_CHECK((x == NULL) == (y == NULL));
    if (!x || !y) return;
    UNIT_CHECK_STR_CONTAINS(y->name, x->name);
    UNIT_CHECK_EQ_INT(x->is_const, y->is_const);
    if (x->is_const && y->is_const) UNIT_CHECK(same_tensor(&x->t, &y->t));
}

/* Same nodes, attributes, inputs and outputs (names may gain a suffix). */
static void check_same_graph(const ir_graph *a, const ir_graph *b)
{
    UNIT_CHECK_EQ_INT(a->n_nodes, b->n_nodes);
    UNIT_CHECK_EQ_INT(a->n_inputs, b->n_inputs);
    UNIT_CHECK_EQ_INT(a->n_outputs, b->n_outputs);
    if (a->n_nodes != b->n_nodes || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs) return;
    for (int i = 0; i < a->n_inputs; i++) {
        const ir_value *x = a->inputs[i], *y = b->inputs[i];
        check_same_value(x, y);
        UNIT_CHECK_EQ_INT(x->t.dtype, y->t.dtype);
        UNIT_CHECK_EQ_INT(x->shape_known, y->shape_known);
        if (x->shape_known) UNIT_CHECK(ir_same_shape(&x->t, &y->t));
    }
    for (int i = 0; i < a->n_outputs; i++) check_same_value(a->outputs[i], b->outputs[i]);
    for (int i = 0; i < a->n_nodes; i++) {
        const ir_node *x = a->nodes[i], *y = b->nodes[i];
        UNIT_CHECK(strcmp(x->name, y->name) == 0);
        UNIT_CHECK(strcmp(x->op_type, y->op_type) == 0);
        UNIT_CHECK(strcmp(x->domain, y->domain) == 0);
        UNIT_CHECK_EQ_INT(x->opset, y->opset);
        UNIT_CHECK_EQ_INT(x->n_in, y->n_in);
        UNIT_CHECK_EQ_INT(x->n_out, y->n_out);
        UNIT_CHECK_EQ_INT(x->n_attrs, y->n_attrs);
        for (int j = 0; j < x->n_in && x->n_in == y->n_in; j++) check_same_value(x->in[j], y->in[j]);
        for (int j = 0; j < x->n_out && x->n_out == y->n_out; j++) check_same_value(x->out[j], y->out[j]);
        for (int k = 0; k < x->n_attrs && x->n_attrs == y->n_attrs; k++) check_same_attr(&x->attrs[k], &y->attrs[k]);
    }
}

/* Runs g on ins into out (g->n_outputs tensors); a failed check on error. */
static void run(const ir_graph *g, const ir_tensor *ins, ir_tensor *out)
{
    base_diag d;
    base_diag_init(&d);
    ir_interp_opts opts = {.seed = 1};
    if (ir_interp_run(g, ins, out, &opts, &d) != KILN_OK)
        unit_fail(__FILE__, __LINE__, "run failed: %s", base_diag_text(&d));
    base_diag_free(&d);
}

static void infer(ir_graph *g)
{
    base_diag d;
    base_diag_init(&d);
    if (ir_infer_shapes(g, &d) != KILN_OK) unit_fail(__FILE__, __LINE__, "inference failed: %s", base_diag_text(&d));
    base_diag_free(&d);
}

static ir_tensor f32_tensor(int rank, const int64_t *dims, const float *values)
{
    ir_tensor t = {0};
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&t, KILN_F32, rank, dims), KILN_OK);
    if (t.data) memcpy(t.data, values, t.nbytes);
    return t;
}

/* ---- (1) round trips of whole models -------------------------------------------- */

static const float w12[12] = {0.5f, -1, 2, 0.25f, 3, -0.125f, 1, 1, -2, 0.75f, 0, 4};
static const float bias4[4] = {0.1f, -0.2f, 0.3f, -0.4f};
static const int64_t i64_2[2] = {5, -6};
static const int8_t i8_2[2] = {-1, 1};
static const float f_1[1] = {3.5f};

/* Custom op "Custom" (domain kiln.test, not runnable) carrying one attribute
 * of every kind, next to runnable Gemm + LeakyRelu. */
static void attr_model(mb_model *m, base_arena *a)
{
    mb_init(m, 17);
    mb_input(m, "x", KILN_F32, 2, (int64_t[]){2, 3});
    mb_init_f32(m, "w", 2, (int64_t[]){4, 3}, w12, 12);
    mb_init_f32(m, "b", 1, (int64_t[]){4}, bias4, 4);
    Onnx__NodeProto *gemm = mb_node(m, "Gemm", "gemm", "x", "w", "g");
    gemm->input[2] = "b";
    gemm->n_input = 3;
    gemm->attribute = base_arena_alloc(a, 4 * sizeof(*gemm->attribute));
    Onnx__AttributeProto *at = pb_attr(a, gemm, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    at->has_f = 1;
    at->f = 0.3f;
    at = pb_attr(a, gemm, "transB", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    at->has_i = 1;
    at->i = 1;
    Onnx__NodeProto *lrelu = mb_node(m, "LeakyRelu", "lrelu", "g", NULL, "y");
    lrelu->attribute = base_arena_alloc(a, 2 * sizeof(*lrelu->attribute));
    at = pb_attr(a, lrelu, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    at->has_f = 1;
    at->f = 0.1f;

    Onnx__NodeProto *c = mb_node(m, "Custom", "custom", "x", NULL, "c");
    c->domain = "kiln.test";
    c->attribute = base_arena_alloc(a, 16 * sizeof(*c->attribute));
    at = pb_attr(a, c, "f", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    at->has_f = 1;
    at->f = 0.1f;
    at = pb_attr(a, c, "i", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    at->has_i = 1;
    at->i = -7;
    at = pb_attr(a, c, "s", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    at->has_s = 1;
    at->s.data = (uint8_t *)"a\0b";
    at->s.len = 3; /* an embedded NUL survives */
    at = pb_attr(a, c, "t", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    at->t = pb_tensor(a, "", KILN_I64, 1, (int64_t[]){2}, i64_2, sizeof(i64_2));
    pb_graph *sub = pb_graph_new(a, "sub");
    pb_input(a, sub, "si", KILN_F32, -1, NULL);
    pb_node(a, sub, "Mul", "mul_outer", "si,x", "so"); /* reads the outer x */
    pb_output(a, sub, "so");
    at = pb_attr(a, c, "g", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    at->g = &sub->g;
    at = pb_attr(a, c, "fs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    static float fs[2] = {1.5f, -2.25f};
    at->floats = fs;
    at->n_floats = 2;
    at = pb_attr(a, c, "is", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    static int64_t is[3] = {1, 2, 3};
    at->ints = is;
    at->n_ints = 3;
    pb_attr(a, c, "empty", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    at = pb_attr(a, c, "ss", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    static ProtobufCBinaryData ss[2] = {{1, (uint8_t *)"p"}, {2, (uint8_t *)"qq"}};
    at->strings = ss;
    at->n_strings = 2;
    at = pb_attr(a, c, "ts", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS);
    at->tensors = base_arena_alloc(a, 2 * sizeof(*at->tensors));
    at->tensors[0] = pb_tensor(a, "", KILN_F32, 1, (int64_t[]){1}, f_1, sizeof(f_1));
    at->tensors[1] = pb_tensor(a, "", KILN_I8, 1, (int64_t[]){2}, i8_2, sizeof(i8_2));
    at->n_tensors = 2;
    pb_graph *ga = pb_graph_new(a, "ga"), *gb = pb_graph_new(a, "gb");
    pb_node(a, ga, "Identity", "ida", "w", "oa"); /* reads the outer initializer w */
    pb_output(a, ga, "oa");
    pb_init(a, gb, "k", KILN_I64, 1, (int64_t[]){2}, i64_2, sizeof(i64_2)); /* a subgraph initializer */
    pb_node(a, gb, "Identity", "idb", "k", "ob");
    pb_output(a, gb, "ob");
    at = pb_attr(a, c, "gs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS);
    at->graphs = base_arena_alloc(a, 2 * sizeof(*at->graphs));
    at->graphs[0] = &ga->g;
    at->graphs[1] = &gb->g;
    at->n_graphs = 2;
    mb_output(m, "y");
    mb_output(m, "c");
}

UNIT_TEST(export_round_trips_attributes_of_every_kind)
{
    base_arena a;
    base_arena_init(&a);
    static mb_model mb; /* large: kept off the stack */
    attr_model(&mb, &a);
    Onnx__OperatorSetIdProto custom, *ops[2] = {&mb.opset, &custom};
    onnx__operator_set_id_proto__init(&custom);
    custom.domain = "kiln.test";
    custom.has_version = 1;
    custom.version = 3;
    mb.model.opset_import = ops;
    mb.model.n_opset_import = 2;
    size_t n;
    void *buf = mb_pack(&mb, &n);
    ir_model *m = load_ok(buf, n);
    free(buf);
    ir_model *m2 = m ? export_reload(m->graph, NULL, 0, NULL, 0, NULL, 0) : NULL;
    if (m2) {
        check_same_graph(m->graph, m2->graph);
        UNIT_CHECK_EQ_INT(m2->opset, 17);
        UNIT_CHECK_EQ_INT(find_node(m2->graph, "custom")->opset, 3);
        const ir_attr *s = ir_node_attr(find_node(m2->graph, "custom"), "s");
        UNIT_CHECK(s && s->s_len == 3 && memcmp(s->s, "a\0b", 3) == 0);
        /* the subgraph's read of x still reaches the top-level input */
        const ir_attr *g = ir_node_attr(find_node(m2->graph, "custom"), "g");
        UNIT_CHECK(g && g->g->nodes[0]->in[1] == m2->graph->inputs[0]);
        /* exporting the reloaded model gives the same bytes */
        base_diag d;
        base_diag_init(&d);
        void *b1 = NULL, *b2 = NULL;
        size_t n1 = 0, n2 = 0;
        UNIT_CHECK_EQ_INT(onnx_export_graph(m->graph, &b1, &n1, &d), KILN_OK);
        UNIT_CHECK_EQ_INT(onnx_export_graph(m2->graph, &b2, &n2, &d), KILN_OK);
        UNIT_CHECK(n1 == n2 && b1 && b2 && memcmp(b1, b2, n1) == 0);
        base_free(b1);
        base_free(b2);
        base_diag_free(&d);
    }
    ir_model_free(m);
    ir_model_free(m2);
    base_arena_free(&a);
}

UNIT_TEST(export_round_trip_computes_the_same_bits)
{
    base_arena a;
    base_arena_init(&a);
    static mb_model mb; /* large: kept off the stack */
    attr_model(&mb, &a);
    mb.graph.n_node = 2; /* Gemm and LeakyRelu only */
    mb.graph.n_output = 1;
    size_t n;
    void *buf = mb_pack(&mb, &n);
    ir_model *m = load_ok(buf, n);
    free(buf);
    if (m) infer(m->graph);
    ir_model *m2 = m ? export_reload(m->graph, NULL, 0, NULL, 0, NULL, 0) : NULL;
    if (m2) {
        const float xs[6] = {1, -2, 3, -4, 5, -6.5f};
        ir_tensor x = f32_tensor(2, (int64_t[]){2, 3}, xs), y1 = {0}, y2 = {0};
        run(m->graph, &x, &y1);
        run(m2->graph, &x, &y2);
        UNIT_CHECK(y1.data && same_tensor(&y1, &y2));
        /* inferred shapes are written: the reloaded output type is known up front */
        UNIT_CHECK(m2->graph->inputs[0]->shape_known);
        ir_tensor_release(&x);
        ir_tensor_release(&y1);
        ir_tensor_release(&y2);
    }
    ir_model_free(m);
    ir_model_free(m2);
    base_arena_free(&a);
}

/* ---- (2) sub-ranges: the c target's fallback segments ------------------------------ */

static const float six[6] = {-1, 2, -3, 4, -5, 6};

/* y = -((Relu(x) * (w + w)) + b); w + w is folded by inference. */
static void chain_model(mb_model *m)
{
    mb_init(m, 17);
    mb_input(m, "x", KILN_F32, 2, (int64_t[]){2, 3});
    mb_init_f32(m, "w", 2, (int64_t[]){2, 3}, six, 6);
    mb_init_f32(m, "b", 1, (int64_t[]){3}, six + 3, 3);
    mb_node(m, "Add", "ww", "w", "w", "w2");
    mb_node(m, "Relu", "relu", "x", NULL, "r");
    mb_node(m, "Mul", "mul", "r", "w2", "p");
    mb_node(m, "Add", "add", "p", "b", "s");
    mb_node(m, "Neg", "neg", "s", NULL, "y");
    mb_output(m, "y");
}

UNIT_TEST(export_of_a_middle_range_computes_the_same_values)
{
    static mb_model mb; /* large: kept off the stack */
    chain_model(&mb);
    size_t n;
    void *buf = mb_pack(&mb, &n);
    ir_model *m = load_ok(buf, n);
    free(buf);
    if (!m) return;
    ir_graph *g = m->graph;
    infer(g);
    UNIT_CHECK(find_value(g, "w2")->is_const);
    ir_node *relu = find_node(g, "relu"), *mid[2] = {find_node(g, "mul"), find_node(g, "add")},
            *neg = find_node(g, "neg");
    ir_value *x = g->inputs[0], *r = find_value(g, "r"), *s = find_value(g, "s"), *y = g->outputs[0];
    /* three segments: [relu] [mul add] [neg], run one after the other */
    ir_model *s1 = export_reload(g, &relu, 1, &x, 1, &r, 1);
    ir_model *s2 = export_reload(g, mid, 2, &r, 1, &s, 1);
    ir_model *s3 = export_reload(g, &neg, 1, &s, 1, &y, 1);
    if (s1 && s2 && s3) {
        /* the middle segment: one input, w2 and b as initializers, no Add(w, w) */
        UNIT_CHECK_EQ_INT(s2->graph->n_inputs, 1);
        UNIT_CHECK_EQ_INT(s2->graph->n_nodes, 2);
        UNIT_CHECK(find_value(s2->graph, "w2")->is_const && !find_value(s2->graph, "w2")->producer);
        UNIT_CHECK(find_value(s2->graph, "b")->is_const);
        UNIT_CHECK(s2->graph->inputs[0]->shape_known && s2->graph->inputs[0]->t.dims[1] == 3);
        const float xs[6] = {0.5f, -1, 1.25f, 3, -0.0f, 7};
        ir_tensor xt = f32_tensor(2, (int64_t[]){2, 3}, xs), want = {0}, t1 = {0}, t2 = {0}, t3 = {0};
        run(g, &xt, &want);
        run(s1->graph, &xt, &t1);
        run(s2->graph, &t1, &t2);
        run(s3->graph, &t2, &t3);
        UNIT_CHECK(want.data && same_tensor(&want, &t3));
        ir_tensor_release(&xt);
        ir_tensor_release(&want);
        ir_tensor_release(&t1);
        ir_tensor_release(&t2);
        ir_tensor_release(&t3);
    }
    /* a constant listed as an input becomes a graph input, not an initializer */
    ir_value *w2 = find_value(g, "w2"), *ins[2] = {r, w2};
    ir_model *s4 = export_reload(g, mid, 2, ins, 2, &s, 1);
    if (s4) {
        UNIT_CHECK_EQ_INT(s4->graph->n_inputs, 2);
        UNIT_CHECK(!s4->graph->inputs[1]->is_const);
    }
    ir_model_free(s1);
    ir_model_free(s2);
    ir_model_free(s3);
    ir_model_free(s4);
    ir_model_free(m);
}

/* Passes may leave values sharing a name or without one: the export gives
 * every value a name of its own, so references still reach the right one. */
UNIT_TEST(export_renames_clashing_and_empty_names)
{
    static mb_model mb; /* large: kept off the stack */
    chain_model(&mb);
    size_t n;
    void *buf = mb_pack(&mb, &n);
    ir_model *m = load_ok(buf, n);
    free(buf);
    if (!m) return;
    ir_graph *g = m->graph;
    infer(g);
    find_value(g, "p")->name = "r"; /* Relu's output is "r" too */
    find_value(g, "w2")->name = "";
    ir_model *m2 = export_reload(g, NULL, 0, NULL, 0, NULL, 0);
    if (m2) {
        UNIT_CHECK_EQ_INT(m2->graph->n_nodes, 5);
        const float xs[6] = {0.5f, -1, 1.25f, 3, -0.0f, 7};
        ir_tensor xt = f32_tensor(2, (int64_t[]){2, 3}, xs), y1 = {0}, y2 = {0};
        run(g, &xt, &y1);
        run(m2->graph, &xt, &y2);
        UNIT_CHECK(y1.data && same_tensor(&y1, &y2));
        ir_tensor_release(&xt);
        ir_tensor_release(&y1);
        ir_tensor_release(&y2);
    }
    ir_model_free(m2);
    ir_model_free(m);
}

/* ---- (3) subgraphs reading outer values -------------------------------------------- */

static const float w3[3] = {10, 20, 30};
static const int64_t trip3 = 3;
static const uint8_t yes = 1;

/* x f32[3], c bool[]:
 *   r = Relu(x)
 *   y = If(c) then { x' = Neg(w); t = Add(x', r) }    (x' named "x": shadows the input)
 *             else { e = Sub(x, w) }
 *   z = Loop(3, true, x) body(i, cond, v) { s = Add(v, r); v' = Mul(s, w) } */
static void *control_model(base_arena *a, size_t *n)
{
    pb_graph *g = pb_graph_new(a, "main");
    pb_input(a, g, "x", KILN_F32, 1, (int64_t[]){3});
    pb_input(a, g, "c", KILN_BOOL, 0, NULL);
    pb_init(a, g, "w", KILN_F32, 1, (int64_t[]){3}, w3, sizeof(w3));
    pb_init(a, g, "M", KILN_I64, 0, NULL, &trip3, sizeof(trip3));
    pb_init(a, g, "true", KILN_BOOL, 0, NULL, &yes, 1);
    pb_node(a, g, "Relu", "relu", "x", "r");

    pb_graph *then_g = pb_graph_new(a, "then"), *else_g = pb_graph_new(a, "else");
    pb_node(a, then_g, "Neg", "neg_w", "w", "x");
    pb_node(a, then_g, "Add", "add_r", "x,r", "t");
    pb_output(a, then_g, "t");
    pb_node(a, else_g, "Sub", "sub_w", "x,w", "e");
    pb_output(a, else_g, "e");
    Onnx__NodeProto *if_n = pb_node(a, g, "If", "if", "c", "y");
    pb_attr(a, if_n, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = &then_g->g;
    pb_attr(a, if_n, "else_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = &else_g->g;

    pb_graph *body = pb_graph_new(a, "body");
    pb_input(a, body, "i", KILN_I64, 0, NULL);
    pb_input(a, body, "cond", KILN_BOOL, 0, NULL);
    pb_input(a, body, "v", KILN_F32, -1, NULL);
    pb_node(a, body, "Identity", "keep", "cond", "cond_out");
    pb_node(a, body, "Add", "add_v", "v,r", "sv");
    pb_node(a, body, "Mul", "mul_w", "sv,w", "v_out");
    pb_output(a, body, "cond_out");
    pb_output(a, body, "v_out");
    Onnx__NodeProto *loop = pb_node(a, g, "Loop", "loop", "M,true,x", "z");
    pb_attr(a, loop, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = &body->g;
    pb_output(a, g, "y");
    pb_output(a, g, "z");
    return pb_pack(g, NULL, n);
}

/* Runs g(x, c) and a segment model seg on the given inputs; compares outputs
 * 0..n_out-1 of g, starting at g_out, with seg's. */
static void check_segment(const ir_graph *g, const ir_graph *seg, const ir_tensor *seg_in, int g_out, int n_out,
                          bool c)
{
    const float xs[3] = {-1.5f, 2, 0.25f};
    ir_tensor in[2] = {f32_tensor(1, (int64_t[]){3}, xs), {0}};
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&in[1], KILN_BOOL, 0, NULL), KILN_OK);
    *(uint8_t *)in[1].data = c;
    ir_tensor want[2] = {{0}}, got[2] = {{0}};
    run(g, in, want);
    if (seg_in) {
        run(seg, seg_in, got);
    } else {
        run(seg, in, got);
    }
    for (int i = 0; i < n_out; i++) UNIT_CHECK(want[g_out + i].data && same_tensor(&want[g_out + i], &got[i]));
    for (int i = 0; i < 2; i++) {
        ir_tensor_release(&in[i]);
        ir_tensor_release(&want[i]);
        ir_tensor_release(&got[i]);
    }
}

UNIT_TEST(export_keeps_subgraph_reads_of_outer_values)
{
    base_arena a;
    base_arena_init(&a);
    size_t n;
    void *buf = control_model(&a, &n);
    ir_model *m = load_ok(buf, n);
    base_free(buf);
    if (!m) {
        base_arena_free(&a);
        return;
    }
    ir_graph *g = m->graph;
    infer(g);
    /* the whole model, both branches */
    ir_model *m2 = export_reload(g, NULL, 0, NULL, 0, NULL, 0);
    if (m2) {
        check_same_graph(g, m2->graph);
        check_segment(g, m2->graph, NULL, 0, 2, true);
        check_segment(g, m2->graph, NULL, 0, 2, false);
    }
    /* the If alone: c read directly, x and r only inside the branches, w
     * becomes an initializer; the branch's local "x" must not capture the
     * input x */
    ir_node *if_n = find_node(g, "if"), *loop = find_node(g, "loop");
    ir_value *c = find_value(g, "c"), *x = g->inputs[0], *r = find_value(g, "r");
    ir_value *if_ins[3] = {c, x, r};
    ir_model *s_if = export_reload(g, &if_n, 1, if_ins, 3, &g->outputs[0], 1);
    if (s_if) {
        UNIT_CHECK_EQ_INT(s_if->graph->n_inputs, 3);
        const float xs[3] = {-1.5f, 2, 0.25f}, rs[3] = {0, 2, 0.25f};
        for (int k = 0; k < 2; k++) {
            ir_tensor in[3] = {{0}, f32_tensor(1, (int64_t[]){3}, xs), f32_tensor(1, (int64_t[]){3}, rs)};
            UNIT_CHECK_EQ_INT(ir_tensor_alloc(&in[0], KILN_BOOL, 0, NULL), KILN_OK);
            *(uint8_t *)in[0].data = k == 0;
            check_segment(g, s_if->graph, in, 0, 1, k == 0);
            for (int i = 0; i < 3; i++) ir_tensor_release(&in[i]);
        }
    }
    /* the Loop alone: M and true are initializers, r and x inputs */
    ir_value *loop_ins[2] = {x, r};
    ir_model *s_loop = export_reload(g, &loop, 1, loop_ins, 2, &g->outputs[1], 1);
    if (s_loop) {
        const float xs[3] = {-1.5f, 2, 0.25f}, rs[3] = {0, 2, 0.25f};
        ir_tensor in[2] = {f32_tensor(1, (int64_t[]){3}, xs), f32_tensor(1, (int64_t[]){3}, rs)};
        check_segment(g, s_loop->graph, in, 1, 1, true);
        for (int i = 0; i < 2; i++) ir_tensor_release(&in[i]);
    }
    /* r produced by an exported node before the Loop: fine; after it: an error */
    ir_node *relu = find_node(g, "relu");
    ir_node *ordered[2] = {relu, loop}, *reversed[2] = {loop, relu};
    ir_model *s_rl = export_reload(g, ordered, 2, &x, 1, &g->outputs[1], 1);
    if (s_rl) check_segment(g, s_rl->graph, NULL, 1, 1, true);
    base_diag d;
    base_diag_init(&d);
    void *out = NULL;
    size_t out_n = 0;
    UNIT_CHECK_EQ_INT(onnx_export_nodes(g, reversed, 2, &x, 1, &g->outputs[1], 1, &out, &out_n, &d),
                      KILN_ERR_INVALID_ARG);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "node 'add_v' (Add) in subgraph 'body' of node 'loop' (Loop): "
                                                "input 'r' is produced by node 'relu' (Relu), which comes later");
    UNIT_CHECK(out == NULL && out_n == 0);
    /* r neither listed nor produced: the error names the reading node, where it sits, and r */
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(onnx_export_nodes(g, &loop, 1, &x, 1, &g->outputs[1], 1, &out, &out_n, &d),
                      KILN_ERR_INVALID_ARG);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "node 'add_v' (Add) in subgraph 'body' of node 'loop' (Loop): "
                                                "input 'r' is neither produced");
    base_diag_free(&d);
    ir_model_free(s_if);
    ir_model_free(s_loop);
    ir_model_free(s_rl);
    ir_model_free(m2);
    ir_model_free(m);
    base_arena_free(&a);
}

/* ---- (4) errors ------------------------------------------------------------------------ */

UNIT_TEST(export_reports_bad_arguments)
{
    static mb_model mb; /* large: kept off the stack */
    chain_model(&mb);
    size_t n;
    void *buf = mb_pack(&mb, &n);
    ir_model *m = load_ok(buf, n), *other = load_ok(buf, n);
    free(buf);
    if (!m || !other) {
        ir_model_free(m);
        ir_model_free(other);
        return;
    }
    ir_graph *g = m->graph;
    infer(g);
    ir_node *relu = find_node(g, "relu"), *mul = find_node(g, "mul"), *add = find_node(g, "add");
    ir_value *x = g->inputs[0], *r = find_value(g, "r"), *p = find_value(g, "p"), *s = find_value(g, "s");
    base_diag d;
    base_diag_init(&d);
    void *out = (void *)&d;
    size_t out_n = 1;
#define EXPECT_FAIL(call, st, msg)                          \
    do {                                                    \
        base_diag_clear(&d);                                \
        UNIT_CHECK_EQ_INT(call, st);                        \
        UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), msg);   \
        UNIT_CHECK(out == NULL && out_n == 0);              \
        out = (void *)&d;                                   \
        out_n = 1;                                          \
    } while (0)

    EXPECT_FAIL(onnx_export_graph(NULL, &out, &out_n, &d), KILN_ERR_INVALID_ARG, "no graph");
    EXPECT_FAIL(onnx_export_nodes(g, &mul, 1, &r, 1, NULL, 0, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "at least one output");
    EXPECT_FAIL(onnx_export_nodes(g, NULL, 2, &r, 1, &p, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "without a node list");
    /* mul reads r, which is neither listed nor produced */
    EXPECT_FAIL(onnx_export_nodes(g, &mul, 1, NULL, 0, &p, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "node 'mul' (Mul): input 'r' is neither produced by an earlier exported node");
    /* out of order */
    ir_node *rev[2] = {add, mul};
    EXPECT_FAIL(onnx_export_nodes(g, rev, 2, &r, 1, &s, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "node 'add' (Add): input 'p' is produced by node 'mul' (Mul), which comes later");
    /* an output nothing defines */
    EXPECT_FAIL(onnx_export_nodes(g, &relu, 1, &x, 1, &s, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "export: output 's' is neither produced");
    /* a node of another graph, a node twice, NULL entries */
    ir_node *foreign = find_node(other->graph, "relu");
    EXPECT_FAIL(onnx_export_nodes(g, &foreign, 1, &x, 1, &r, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "node 'relu' (Relu) is not a node of graph");
    ir_node *twice[2] = {relu, relu};
    EXPECT_FAIL(onnx_export_nodes(g, twice, 2, &x, 1, &r, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "listed twice");
    ir_node *null_node = NULL;
    EXPECT_FAIL(onnx_export_nodes(g, &null_node, 1, &x, 1, &r, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "node 0 of the list is NULL");
    ir_value *null_value = NULL;
    EXPECT_FAIL(onnx_export_nodes(g, &relu, 1, &null_value, 1, &r, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "input 0 of the list is NULL");
    /* an input the exported nodes produce, an input listed twice */
    ir_value *xr[2] = {x, r}, *xx[2] = {x, x};
    EXPECT_FAIL(onnx_export_nodes(g, &relu, 1, xr, 2, &r, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "input 'r' is produced by exported node 'relu' (Relu)");
    EXPECT_FAIL(onnx_export_nodes(g, &relu, 1, xx, 2, &r, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG,
                "input 'x' is listed twice");
    /* an attribute kind the loader could not read (sparse tensors) */
    ir_attr sparse = {.name = "sparse_value", .kind = IR_ATTR_UNDEF};
    relu->attrs = &sparse;
    relu->n_attrs = 1;
    EXPECT_FAIL(onnx_export_nodes(g, &relu, 1, &x, 1, &r, 1, &out, &out_n, &d), KILN_ERR_UNSUPPORTED,
                "node 'relu' (Relu): attribute 'sparse_value' is of kind undefined");
    relu->n_attrs = 0;
    /* several problems are reported at once */
    ir_node *two[2] = {mul, add};
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(onnx_export_nodes(g, two, 2, NULL, 0, &s, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG);
    UNIT_CHECK(d.n_msgs == 1); /* only r is missing: p, w2 and b resolve */
    UNIT_CHECK_EQ_INT(onnx_export_nodes(g, &add, 1, NULL, 0, &r, 1, &out, &out_n, &d), KILN_ERR_INVALID_ARG);
    UNIT_CHECK(d.n_msgs == 3); /* add reads p; the output r is undefined */
    UNIT_CHECK_EQ_INT(onnx_export_graph(g, NULL, &out_n, &d), KILN_ERR_INVALID_ARG);
#undef EXPECT_FAIL
    base_diag_free(&d);
    ir_model_free(m);
    ir_model_free(other);
}

UNIT_TEST(export_allocation_failures_become_errors)
{
    base_arena a;
    base_arena_init(&a);
    size_t n;
    void *buf = control_model(&a, &n);
    ir_model *m = load_ok(buf, n);
    base_free(buf);
    bool done = false;
    for (long k = 0; m && k < 100000 && !done; k++) {
        base_diag d;
        base_diag_init(&d);
        void *out = NULL;
        size_t out_n = 0;
        base_fail_alloc_after(k);
        kiln_status st = onnx_export_graph(m->graph, &out, &out_n, &d);
        base_fail_alloc_after(-1);
        UNIT_CHECK(st == KILN_OK || st == KILN_ERR_OOM);
        UNIT_CHECK((st == KILN_OK) == (out != NULL));
        done = st == KILN_OK;
        base_free(out);
        base_diag_free(&d);
    }
    UNIT_CHECK(done);
    ir_model_free(m);
    base_arena_free(&a);
}
