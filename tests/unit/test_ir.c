/*
 * test_ir.c: graph construction, topological sort and cycle detection, the
 * verifier, the printer, tensors and broadcasting.
 */
#include "ir/interp.h"
#include "unit.h"

/* x -> Relu -> a -> Neg -> y, built out of order. */
static ir_graph *small_graph(base_arena *a, bool cycle)
{
    ir_graph *g = ir_graph_new(a, NULL, "g");
    g->opset = 17;
    ir_value *x = ir_graph_add_value(g, "x"), *va = ir_graph_add_value(g, "a"), *y = ir_graph_add_value(g, "y");
    x->is_input = true;
    x->t.dtype = KILN_F32;
    x->t.rank = 1;
    x->t.dims[0] = 4;
    x->shape_known = true;
    g->inputs = base_arena_alloc(a, sizeof(ir_value *));
    g->inputs[g->n_inputs++] = x;
    ir_node *neg = ir_graph_add_node(g, "neg", "Neg", "", 1, 1);
    ir_node *relu = ir_graph_add_node(g, "relu", "Relu", "", 1, 1);
    neg->in[0] = va;
    neg->out[0] = y;
    y->producer = neg;
    relu->in[0] = cycle ? y : x;
    relu->out[0] = va;
    va->producer = relu;
    g->outputs = base_arena_alloc(a, sizeof(ir_value *));
    g->outputs[g->n_outputs++] = y;
    y->is_output = true;
    return g;
}

UNIT_TEST(graph_sorts_nodes_topologically)
{
    base_arena a;
    base_arena_init(&a);
    base_diag d;
    base_diag_init(&d);
    ir_graph *g = small_graph(&a, false);
    UNIT_CHECK(ir_graph_verify(g, &d) != KILN_OK); /* Neg reads 'a' before Relu makes it */
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(ir_graph_sort(g, &d), KILN_OK);
    UNIT_CHECK(strcmp(g->nodes[0]->op_type, "Relu") == 0);
    UNIT_CHECK_EQ_INT(ir_graph_verify(g, &d), KILN_OK);
    base_str s;
    base_str_init(&s);
    ir_graph_print(g, &s);
    UNIT_CHECK_STR_CONTAINS(base_str_get(&s), "%a = Relu(%x)");
    UNIT_CHECK_STR_CONTAINS(base_str_get(&s), "%y = Neg(%a)");
    base_str_free(&s);
    base_diag_free(&d);
    base_arena_free(&a);
}

UNIT_TEST(graph_sort_reports_a_cycle)
{
    base_arena a;
    base_arena_init(&a);
    base_diag d;
    base_diag_init(&d);
    ir_graph *g = small_graph(&a, true);
    UNIT_CHECK_EQ_INT(ir_graph_sort(g, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "cycle");
    base_diag_free(&d);
    base_arena_free(&a);
}

UNIT_TEST(op_registry_lookup)
{
    UNIT_CHECK_EQ_INT(ir_op_lookup("", "Conv"), KILN_OP_CONV);
    UNIT_CHECK_EQ_INT(ir_op_lookup("ai.onnx", "MatMul"), KILN_OP_MAT_MUL);
    UNIT_CHECK_EQ_INT(ir_op_lookup("com.example", "MatMul"), KILN_OP_COUNT);
    UNIT_CHECK_EQ_INT(ir_op_lookup("", "NoSuchOp"), KILN_OP_COUNT);
    for (int i = 0; i < KILN_OP_COUNT; i++) {
        UNIT_CHECK(ir_ops[i].name != NULL);
        UNIT_CHECK(ir_ops[i].min_in >= 0 && (ir_ops[i].max_in < 0 || ir_ops[i].max_in >= ir_ops[i].min_in));
        UNIT_CHECK_EQ_INT(ir_op_lookup("", ir_ops[i].name), i); /* names are unique */
    }
}

UNIT_TEST(tensor_alloc_rejects_overflow)
{
    ir_tensor t = {0};
    int64_t huge[2] = {INT64_MAX / 2, 4};
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&t, KILN_F32, 2, huge), KILN_ERR_SHAPE);
    int64_t neg[1] = {-1};
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&t, KILN_F32, 1, neg), KILN_ERR_SHAPE);
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&t, KILN_STRING, 1, (int64_t[]){2}), KILN_ERR_UNSUPPORTED);
    int64_t ok[2] = {2, 3};
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&t, KILN_F16, 2, ok), KILN_OK);
    UNIT_CHECK_EQ_INT(t.nbytes, 12);
    ir_set_f64(&t, 5, 1.5);
    UNIT_CHECK(ir_get_f64(&t, 5) == 1.5);
    ir_tensor_release(&t);
    UNIT_CHECK(t.data == NULL);
}

UNIT_TEST(element_access_converts_exactly)
{
    ir_tensor t = {0};
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&t, KILN_I64, 1, (int64_t[]){3}), KILN_OK);
    ir_set_i64(&t, 0, INT64_MAX);
    ir_set_i64(&t, 1, -7);
    UNIT_CHECK(ir_get_i64(&t, 0) == INT64_MAX);
    UNIT_CHECK(ir_get_i64(&t, 1) == -7);
    ir_tensor_release(&t);
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&t, KILN_U8, 1, (int64_t[]){2}), KILN_OK);
    ir_set_f64(&t, 0, 200.7);
    UNIT_CHECK_EQ_INT(ir_get_i64(&t, 0), 200);
    ir_tensor_release(&t);
}

UNIT_TEST(broadcast_walks_offsets)
{
    ir_tensor a = {.dtype = KILN_F32, .rank = 2, .dims = {2, 3}};
    ir_tensor b = {.dtype = KILN_F32, .rank = 1, .dims = {3}};
    ir_tensor c = {.dtype = KILN_F32, .rank = 2, .dims = {2, 1}};
    const ir_tensor *ts[3] = {&a, &b, &c};
    ir_node n = {.name = "n", .op_type = "Add"};
    base_diag d;
    base_diag_init(&d);
    ir_eval e = {.node = &n, .diag = &d};
    int rank;
    int64_t dims[IR_MAX_RANK];
    UNIT_CHECK_EQ_INT(ir_eval_broadcast(&e, 3, ts, &rank, dims), KILN_OK);
    UNIT_CHECK_EQ_INT(rank, 2);
    UNIT_CHECK(dims[0] == 2 && dims[1] == 3);
    ir_bcast it;
    ir_bcast_init(&it, rank, dims, 3, ts);
    int64_t want_b[6] = {0, 1, 2, 0, 1, 2}, want_c[6] = {0, 0, 0, 1, 1, 1};
    for (int i = 0; i < 6; i++, ir_bcast_next(&it)) {
        UNIT_CHECK_EQ_INT(it.off[0], i);
        UNIT_CHECK_EQ_INT(it.off[1], want_b[i]);
        UNIT_CHECK_EQ_INT(it.off[2], want_c[i]);
    }
    ir_tensor bad = {.dtype = KILN_F32, .rank = 1, .dims = {4}};
    const ir_tensor *ts2[2] = {&a, &bad};
    UNIT_CHECK_EQ_INT(ir_eval_broadcast(&e, 2, ts2, &rank, dims), KILN_ERR_SHAPE);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "do not broadcast");
    base_diag_free(&d);
}
