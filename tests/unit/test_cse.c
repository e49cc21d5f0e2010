/*
 * test_cse.c: pass_cse, the common subexpressions: which repeats it merges,
 * which it must not, and that readers (in subgraphs too) follow.
 */
#include "ir/interp.h"
#include "model_builder.h"
#include "onnx/onnx.h"
#include "pass/pass.h"
#include "unit.h"

#include <stdlib.h>

static ir_model *load_infer(mb_model *mb)
{
    size_t n = 0;
    void *buf = mb_pack(mb, &n);
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    kiln_status st = onnx_load_buffer(buf, n, NULL, &m, &d);
    if (st == KILN_OK) st = ir_infer_shapes(m->graph, &d);
    if (st != KILN_OK) unit_fail(__FILE__, __LINE__, "load failed: %s", base_diag_text(&d));
    base_diag_free(&d);
    free(buf);
    return st == KILN_OK ? m : NULL;
}

static ir_node *node_named(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    return NULL;
}

static int run_cse(ir_graph *g)
{
    base_diag d;
    base_diag_init(&d);
    int merged = -1;
    UNIT_CHECK_EQ_INT(pass_cse(g, &merged, &d), KILN_OK);
    base_diag_free(&d);
    return merged;
}

/* BERT's per-layer mask: Where(m, x, c) with equal constants under other
 * names, then a Relu of each; a Where of another constant, LeakyRelus of
 * other alphas and repeats that are graph outputs stay. */
UNIT_TEST(cse_merges_repeats_and_keeps_the_rest)
{
    mb_model mb;
    mb_init(&mb, 17);
    mb_input(&mb, "x", KILN_F32, 2, (int64_t[]){4, 8});
    mb_input(&mb, "m", KILN_BOOL, 2, (int64_t[]){4, 8});
    const float big = -1e9f, other = -5.0f;
    mb_init_f32(&mb, "c1", 0, NULL, &big, 1);
    mb_init_f32(&mb, "c2", 0, NULL, &big, 1);
    mb_init_f32(&mb, "c3", 0, NULL, &other, 1);
    mb_node_io(&mb, "Where", "w1", 3, (const char *const[]){"m", "x", "c1"}, 1, (const char *const[]){"w1"});
    mb_node_io(&mb, "Where", "w2", 3, (const char *const[]){"m", "x", "c2"}, 1, (const char *const[]){"w2"});
    mb_node_io(&mb, "Where", "w3", 3, (const char *const[]){"m", "x", "c3"}, 1, (const char *const[]){"w3"});
    mb_node(&mb, "Relu", "r1", "w1", NULL, "r1");
    mb_node(&mb, "Relu", "r2", "w2", NULL, "r2");
    mb_attr_float(&mb, mb_node(&mb, "LeakyRelu", "l1", "w1", NULL, "l1"), "alpha", 0.1f);
    mb_attr_float(&mb, mb_node(&mb, "LeakyRelu", "l2", "w1", NULL, "l2"), "alpha", 0.2f);
    mb_node(&mb, "Add", "a1", "r1", "r2", "a1");
    mb_node(&mb, "Add", "a2", "a1", "w3", "a2");
    mb_node(&mb, "Add", "a3", "a2", "l1", "a3");
    mb_node(&mb, "Add", "y", "a3", "l2", "y");
    mb_node(&mb, "Neg", "o1", "x", NULL, "o1");
    mb_node(&mb, "Neg", "o2", "x", NULL, "o2");
    mb_output(&mb, "y");
    mb_output(&mb, "o1");
    mb_output(&mb, "o2");
    ir_model *m = load_infer(&mb);
    if (!m) return;
    ir_graph *g = m->graph;
    ir_node *w1 = node_named(g, "w1"), *r1 = node_named(g, "r1"), *a1 = node_named(g, "a1");
    ir_node *a2 = node_named(g, "a2"), *a3 = node_named(g, "a3"), *y = node_named(g, "y");
    ir_node *w2 = node_named(g, "w2"), *r2 = node_named(g, "r2");
    const int n_nodes = g->n_nodes;
    UNIT_CHECK_EQ_INT(run_cse(g), 2); /* w2 and then r2 */
    UNIT_CHECK(a1->in[0] == r1->out[0] && a1->in[1] == r1->out[0]);
    UNIT_CHECK_EQ_INT(r1->out[0]->n_uses, 2);
    /* the merged nodes are out of the graph, their values made and read by nobody */
    UNIT_CHECK_EQ_INT(g->n_nodes, n_nodes - 2);
    UNIT_CHECK(!node_named(g, "w2") && !node_named(g, "r2"));
    UNIT_CHECK(r2->out[0]->n_uses == 0 && !r2->out[0]->producer && w2->out[0]->n_uses == 0 && !w2->out[0]->producer);
    for (int i = 0; i < g->n_nodes; i++) UNIT_CHECK_EQ_INT(g->nodes[i]->id, i);
    UNIT_CHECK_EQ_INT(w1->out[0]->n_uses, 3);                   /* r1, l1, l2 */
    UNIT_CHECK(a2->in[1] == node_named(g, "w3")->out[0]);        /* another constant */
    UNIT_CHECK(a3->in[1] != y->in[1]);                           /* other alphas */
    /* o2 repeats o1 but is a graph output: both stay, each made by its node */
    UNIT_CHECK(g->outputs[1] == node_named(g, "o1")->out[0] && g->outputs[2] == node_named(g, "o2")->out[0]);
    UNIT_CHECK_EQ_INT(g->outputs[2]->n_uses, 1); /* the graph's output counts as a use */
    UNIT_CHECK_EQ_INT(run_cse(g), 0);                            /* a second plan: nothing more */
    UNIT_CHECK_EQ_INT(r1->out[0]->n_uses, 2);
    /* the rewired graph computes what the model says: x = 1 where m, else the constants */
    ir_tensor in[2] = {{0}}, out[3] = {{0}};
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&in[0], KILN_F32, 2, (int64_t[]){4, 8}), KILN_OK);
    UNIT_CHECK_EQ_INT(ir_tensor_alloc(&in[1], KILN_BOOL, 2, (int64_t[]){4, 8}), KILN_OK);
    for (int i = 0; i < 32; i++) {
        ((float *)in[0].data)[i] = (float)(i % 5) - 2.0f;
        ((unsigned char *)in[1].data)[i] = (unsigned char)(i % 3 != 0);
    }
    base_diag d;
    base_diag_init(&d);
    ir_interp_opts opts = {0};
    UNIT_CHECK_EQ_INT(ir_interp_run(g, in, out, &opts, &d), KILN_OK);
    for (int i = 0; i < 32 && out[0].data; i++) {
        const float x = ((float *)in[0].data)[i], w = i % 3 != 0 ? x : big, w3 = i % 3 != 0 ? x : other;
        const float want = 2.0f * (w > 0 ? w : 0) + w3 + (w > 0 ? w : 0.1f * w) + (w > 0 ? w : 0.2f * w);
        const float got = ((float *)out[0].data)[i], err = got - want;
        UNIT_CHECK((err < 0 ? -err : err) <= 1e-6f * (want < 0 ? -want : want) + 1e-6f);
    }
    base_diag_free(&d);
    for (int i = 0; i < 2; i++) ir_tensor_release(&in[i]);
    for (int i = 0; i < 3; i++) ir_tensor_release(&out[i]);
    ir_model_free(m);
}

/* Random ops draw anew each time; Dropout may too (training mode). */
UNIT_TEST(cse_leaves_random_ops)
{
    mb_model mb;
    mb_init(&mb, 17);
    mb_input(&mb, "x", KILN_F32, 2, (int64_t[]){2, 3});
    mb_attr_float(&mb, mb_node(&mb, "RandomNormalLike", "n1", "x", NULL, "n1"), "seed", 1.0f);
    mb_attr_float(&mb, mb_node(&mb, "RandomNormalLike", "n2", "x", NULL, "n2"), "seed", 1.0f);
    mb_node(&mb, "Dropout", "d1", "x", NULL, "d1");
    mb_node(&mb, "Dropout", "d2", "x", NULL, "d2");
    mb_node(&mb, "Add", "s1", "n1", "n2", "s1");
    mb_node(&mb, "Add", "s2", "d1", "d2", "s2");
    mb_node(&mb, "Add", "y", "s1", "s2", "y");
    mb_output(&mb, "y");
    ir_model *m = load_infer(&mb);
    if (!m) return;
    UNIT_CHECK_EQ_INT(run_cse(m->graph), 0);
    ir_model_free(m);
}

/* x -> e1 = Exp(x), e2 = Exp(x) (repeats), If(c): its then-branch reads
 * e2 through an Identity, or (returns_e2) returns e2 itself; its else-branch
 * reads e1. */
static ir_model *if_over_repeats(bool returns_e2)
{
    mb_model then_b;
    mb_init(&then_b, 17);
    if (returns_e2) mb_output(&then_b, "e2");
    else {
        mb_node(&then_b, "Identity", "t", "e2", NULL, "t_out");
        mb_output(&then_b, "t_out");
    }
    mb_model else_b;
    mb_init(&else_b, 17);
    mb_node(&else_b, "Identity", "e", "e1", NULL, "e_out");
    mb_output(&else_b, "e_out");
    mb_model mb;
    mb_init(&mb, 17);
    mb_input(&mb, "x", KILN_F32, 1, (int64_t[]){3});
    mb_input(&mb, "c", KILN_BOOL, 0, NULL);
    mb_node(&mb, "Exp", "e1", "x", NULL, "e1");
    mb_node(&mb, "Exp", "e2", "x", NULL, "e2");
    Onnx__NodeProto *n = mb_node(&mb, "If", "if", "c", NULL, "y");
    mb_attr_graph(&mb, n, "then_branch", &then_b.graph);
    mb_attr_graph(&mb, n, "else_branch", &else_b.graph);
    mb_output(&mb, "y");
    return load_infer(&mb);
}

/* A merged value read inside an If's branch: the branch reads the kept one. */
UNIT_TEST(cse_rewires_subgraph_readers)
{
    ir_model *m = if_over_repeats(false);
    if (!m) return;
    ir_graph *g = m->graph;
    ir_node *e1 = node_named(g, "e1"), *e2 = node_named(g, "e2"), *ifn = node_named(g, "if");
    UNIT_CHECK_EQ_INT(run_cse(g), 1);
    const ir_attr *then_a = ir_node_attr(ifn, "then_branch");
    UNIT_CHECK(then_a && then_a->g && then_a->g->n_nodes == 1 && then_a->g->nodes[0]->in[0] == e1->out[0]);
    UNIT_CHECK_EQ_INT(e1->out[0]->n_uses, 2);
    UNIT_CHECK_EQ_INT(e2->out[0]->n_uses, 0);
    ir_model_free(m);
}

/* Constants equal in their first 64 bytes (the hash) but not after, and
 * integer attributes (Transpose's perm, Softmax's axis): no merge; the
 * same constant under another name: one. */
UNIT_TEST(cse_compares_every_byte_and_attribute)
{
    mb_model mb;
    mb_init(&mb, 17);
    mb_input(&mb, "x", KILN_F32, 2, (int64_t[]){4, 8});
    mb_input(&mb, "s", KILN_F32, 2, (int64_t[]){8, 8});
    float ca[32], cb[32];
    for (int i = 0; i < 32; i++) ca[i] = cb[i] = (float)i;
    cb[20] = 100.0f;
    mb_init_f32(&mb, "ca", 2, (int64_t[]){4, 8}, ca, 32);
    mb_init_f32(&mb, "cb", 2, (int64_t[]){4, 8}, cb, 32);
    mb_init_f32(&mb, "ca2", 2, (int64_t[]){4, 8}, ca, 32);
    mb_node(&mb, "Add", "pa", "x", "ca", "pa");
    mb_node(&mb, "Add", "pb", "x", "cb", "pb");
    mb_node(&mb, "Add", "pa2", "x", "ca2", "pa2");
    mb_node(&mb, "Sub", "d1", "pa", "pb", "d1");
    mb_node(&mb, "Sub", "d2", "pa2", "pa", "d2");
    mb_attr_ints(&mb, mb_node(&mb, "Transpose", "t1", "s", NULL, "t1"), "perm", 2, (int64_t[]){0, 1});
    mb_attr_ints(&mb, mb_node(&mb, "Transpose", "t2", "s", NULL, "t2"), "perm", 2, (int64_t[]){1, 0});
    mb_attr_int(&mb, mb_node(&mb, "Softmax", "m1", "t1", NULL, "m1"), "axis", 0);
    mb_attr_int(&mb, mb_node(&mb, "Softmax", "m2", "t1", NULL, "m2"), "axis", 1);
    mb_node(&mb, "Sub", "e", "t1", "t2", "e");
    mb_node(&mb, "Sub", "f", "m1", "m2", "f");
    mb_output(&mb, "d1");
    mb_output(&mb, "d2");
    mb_output(&mb, "e");
    mb_output(&mb, "f");
    ir_model *m = load_infer(&mb);
    if (!m) return;
    ir_graph *g = m->graph;
    ir_node *pa = node_named(g, "pa"), *pb = node_named(g, "pb"), *d1 = node_named(g, "d1"), *d2 = node_named(g, "d2");
    ir_node *t1 = node_named(g, "t1"), *t2 = node_named(g, "t2"), *m1 = node_named(g, "m1"), *m2 = node_named(g, "m2");
    UNIT_CHECK_EQ_INT(run_cse(g), 1); /* pa2 */
    UNIT_CHECK(d1->in[0] == pa->out[0] && d1->in[1] == pb->out[0]);
    UNIT_CHECK(d2->in[0] == pa->out[0] && d2->in[1] == pa->out[0]);
    UNIT_CHECK(node_named(g, "e")->in[0] == t1->out[0] && node_named(g, "e")->in[1] == t2->out[0]);
    UNIT_CHECK(node_named(g, "f")->in[0] == m1->out[0] && node_named(g, "f")->in[1] == m2->out[0]);
    ir_model_free(m);
}

/* A subgraph that returns a repeated outer value: the loader makes the
 * value a graph output, so its node stays. */
UNIT_TEST(cse_keeps_a_value_a_subgraph_returns)
{
    ir_model *m = if_over_repeats(true);
    if (!m) return;
    ir_node *e2 = node_named(m->graph, "e2");
    UNIT_CHECK_EQ_INT(run_cse(m->graph), 0);
    const ir_attr *then_a = ir_node_attr(node_named(m->graph, "if"), "then_branch");
    UNIT_CHECK(then_a && then_a->g && then_a->g->n_outputs == 1 && then_a->g->outputs[0] == e2->out[0]);
    UNIT_CHECK(node_named(m->graph, "e2") == e2);
    ir_model_free(m);
}
