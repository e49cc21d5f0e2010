/*
 * partition.c: the graph -> groups partition (DESIGN.md "Group"; MonoNN
 * 4.2.1 for elementwise subgraphs, Bolt 3.2 for epilogue fusion).
 *
 * Nodes are visited in topological order. A contraction (Conv, MatMul,
 * Gemm) absorbs its single-consumer epilogue chain: a scale by a constant
 * scalar, a constant bias, a residual of the output's shape, one
 * activation. Elementwise nodes join the group of an elementwise producer
 * with the same output shape when every other input comes from a group
 * created earlier, which keeps the group order a valid schedule. Nodes the
 * target cannot compile become fallback segments, merged by the same rule.
 * Nodes whose results nobody reads (ONNX allows them) get no group.
 */
#include "pass/pass.h"

#include <math.h>
#include <string.h>

const char *sched_group_kind_name(sched_group_kind k)
{
    static const char *const names[SCHED_GROUP_KIND_COUNT] = {
        [SCHED_GROUP_CONV] = "conv",       [SCHED_GROUP_GEMM] = "gemm",
        [SCHED_GROUP_POOL] = "pool",       [SCHED_GROUP_ROWS] = "rows",
        [SCHED_GROUP_ELEMENTWISE] = "ews", [SCHED_GROUP_MOVE] = "move",
        [SCHED_GROUP_ALIAS] = "alias",     [SCHED_GROUP_FALLBACK] = "fallback",
    };
    return (unsigned)k < SCHED_GROUP_KIND_COUNT ? names[k] : "?";
}

static sched_group_kind kind_of(const ir_node *n)
{
    switch (n->op) {
    case KILN_OP_CONV: return SCHED_GROUP_CONV;
    case KILN_OP_MAT_MUL: case KILN_OP_GEMM: return SCHED_GROUP_GEMM;
    case KILN_OP_MAX_POOL: case KILN_OP_AVERAGE_POOL: return SCHED_GROUP_POOL;
    case KILN_OP_SOFTMAX: case KILN_OP_LOG_SOFTMAX: case KILN_OP_LAYER_NORMALIZATION:
    case KILN_OP_GLOBAL_AVERAGE_POOL:
        return SCHED_GROUP_ROWS;
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY: case KILN_OP_DROPOUT:
        /* The output shares the input's memory, unless it is a graph output
         * (the caller's buffer) or a Dropout mask is wanted: then a copy. */
        if (n->out[0]->is_output || (n->n_out > 1 && n->out[1])) return SCHED_GROUP_MOVE;
        return SCHED_GROUP_ALIAS;
    default:
        return (ir_ops[n->op].flags & IR_OPF_ELEMENTWISE) ? SCHED_GROUP_ELEMENTWISE : SCHED_GROUP_MOVE;
    }
}

/* ---- group construction ----------------------------------------------------- */

typedef struct builder {
    sched_program *p;
    base_arena *a;
    int *group_of;   /* node id -> group index, -1 when unassigned */
    int *value_grp;  /* value id -> producing group index, -1 for inputs/constants */
    int cap_groups;
    ir_node ***node_lists; /* per group, growable */
    int *node_caps;
} builder;

static kiln_status new_group(builder *b, sched_group_kind kind, ir_node *n, int *out)
{
    sched_program *p = b->p;
    if (p->n_groups == b->cap_groups) {
        int cap = b->cap_groups ? b->cap_groups * 2 : 64;
        sched_group **g2 = base_realloc(p->groups, (size_t)cap * sizeof(*g2));
        if (!g2) return KILN_ERR_OOM;
        p->groups = g2;
        int *caps = base_realloc(b->node_caps, (size_t)cap * sizeof(int));
        if (!caps) return KILN_ERR_OOM;
        b->node_caps = caps;
        b->cap_groups = cap;
    }
    sched_group *grp = base_arena_alloc(b->a, sizeof(*grp));
    if (!grp) return KILN_ERR_OOM;
    grp->kind = kind;
    grp->id = p->n_groups;
    b->node_caps[grp->id] = 0;
    p->groups[p->n_groups++] = grp;
    *out = grp->id;
    (void)n;
    return KILN_OK;
}

static kiln_status add_node(builder *b, int gi, ir_node *n)
{
    sched_group *grp = b->p->groups[gi];
    if (grp->n_nodes == b->node_caps[gi]) {
        int cap = b->node_caps[gi] ? b->node_caps[gi] * 2 : 4;
        ir_node **nodes = base_arena_alloc(b->a, (size_t)cap * sizeof(*nodes));
        if (!nodes) return KILN_ERR_OOM;
        if (grp->nodes) memcpy(nodes, grp->nodes, (size_t)grp->n_nodes * sizeof(*nodes));
        grp->nodes = nodes;
        b->node_caps[gi] = cap;
    }
    grp->nodes[grp->n_nodes++] = n;
    b->group_of[n->id] = gi;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j]) b->value_grp[n->out[j]->id] = gi;
    return KILN_OK;
}

/* Every input of n comes from group gi, or from a group created before it
 * (or is an input or constant): adding n to gi keeps the order valid. */
static bool inputs_before(const builder *b, const ir_node *n, int gi)
{
    for (int j = 0; j < n->n_in; j++) {
        const ir_value *v = n->in[j];
        if (!v || v->graph != n->graph) continue;
        int pg = b->value_grp[v->id];
        if (pg > gi) return false;
        /* produced by a node not placed in any group yet: it comes later */
        if (pg < 0 && v->producer && !v->is_const) return false;
    }
    return true;
}

/* Number of reads of v by nodes outside group gi (graph outputs count).
 * Nodes in no group (dead, or folded into constants) read nothing. */
static int outside_uses(const builder *b, const ir_graph *g, const ir_value *v, int gi)
{
    int n_out = v->is_output ? 1 : 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (b->group_of[n->id] == gi || b->group_of[n->id] < 0) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v) n_out++;
    }
    return n_out;
}

static bool is_const_scalar(const ir_value *v, double *out)
{
    if (!v || !v->is_const || ir_numel(&v->t) != 1 || !ir_dtype_is_float(v->t.dtype)) return false;
    *out = ir_get_f64(&v->t, 0);
    return true;
}

/* The only consumer of v (a node in g), or NULL when v has zero or several
 * readers or is a graph output. */
static ir_node *sole_consumer(const ir_graph *g, const ir_value *v)
{
    if (v->is_output || v->n_uses != 1) return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = g->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v) return n;
    }
    return NULL;
}

/* Output channel / column count of a contraction's output (for bias shapes). */
static bool bias_fits(const sched_group *grp, const ir_value *out, const ir_value *bias)
{
    if (!bias->is_const || bias->t.dtype != KILN_F32) return false;
    const ir_tensor *o = &out->t, *b = &bias->t;
    if (b->rank > o->rank) return false;
    if (grp->kind == SCHED_GROUP_CONV) {
        /* [K], [K,1,1] or [1,K,1,1]: all dims 1 but the channel axis */
        int64_t k = o->dims[1];
        int off = o->rank - b->rank;
        for (int i = 0; i < b->rank; i++) {
            int axis = off + i;
            int64_t want = axis == 1 ? k : 1;
            if (b->dims[i] != want && !(b->dims[i] == 1 && want == 1)) return false;
        }
        return b->rank >= o->rank - 1 && (b->rank != 1 || o->rank == 2);
    }
    /* GEMM: per column, [N] or [1,..,N] */
    for (int i = 0; i < b->rank - 1; i++)
        if (b->dims[i] != 1) return false;
    return b->rank >= 1 && b->dims[b->rank - 1] == o->dims[o->rank - 1];
}

static int act_of(const ir_node *n)
{
    switch (n->op) {
    case KILN_OP_RELU: return PASS_ACT_RELU;
    case KILN_OP_SIGMOID: return PASS_ACT_SIGMOID;
    case KILN_OP_TANH: return PASS_ACT_TANH;
    case KILN_OP_LEAKY_RELU: return PASS_ACT_LEAKY_RELU;
    case KILN_OP_HARD_SWISH: return PASS_ACT_HARD_SWISH;
    case KILN_OP_HARD_SIGMOID: return PASS_ACT_HARD_SIGMOID;
    case KILN_OP_SOFTPLUS: return PASS_ACT_SOFTPLUS;
    case KILN_OP_CLIP: {
        /* min/max as attributes (opset < 11) or constant inputs */
        for (int j = 1; j < n->n_in; j++)
            if (n->in[j] && (!n->in[j]->is_const || ir_numel(&n->in[j]->t) != 1)) return PASS_ACT_NONE;
        return PASS_ACT_CLIP;
    }
    default: return PASS_ACT_NONE;
    }
}

/* Absorbs the epilogue chain after a contraction anchor. */
static kiln_status fuse_epilogue(builder *b, const ir_graph *g, int gi)
{
    sched_group *grp = b->p->groups[gi];
    ir_value *cur = grp->nodes[0]->out[0];
    const ir_node *anchor = grp->nodes[0];
    bool has_bias = anchor->op != KILN_OP_MAT_MUL && anchor->n_in > 2 && anchor->in[2]; /* Conv B, Gemm C */
    bool has_res = false, has_act = false, any = has_bias;
    while (cur && cur->t.dtype == KILN_F32) {
        ir_node *n = sole_consumer(g, cur);
        if (!n || n->n_out < 1 || !n->out[0] || !n->out[0]->shape_known || !ir_same_shape(&n->out[0]->t, &cur->t))
            break;
        bool take = false;
        if ((n->op == KILN_OP_MUL || n->op == KILN_OP_DIV) && !any && !has_act && anchor->op != KILN_OP_CONV) {
            const ir_value *other = n->in[0] == cur ? n->in[1] : n->in[0];
            double s;
            take = is_const_scalar(other, &s) && (n->op == KILN_OP_MUL || n->in[1] == other) && s != 0;
        } else if (n->op == KILN_OP_ADD && !has_act && !has_res) {
            const ir_value *other = n->in[0] == cur ? n->in[1] : n->in[0];
            if (other == cur) break;
            if (!has_bias && bias_fits(grp, cur, other)) {
                has_bias = true;
                take = true;
            } else if (!other->is_const && other->shape_known && ir_same_shape(&other->t, &cur->t) &&
                       other->t.dtype == KILN_F32) {
                has_res = true;
                take = true;
            }
        } else if (!has_act && act_of(n) != PASS_ACT_NONE && n->in[0] == cur) {
            has_act = true;
            take = true;
        }
        if (!take || !inputs_before(b, n, gi)) break;
        KILN_TRY(add_node(b, gi, n));
        any = true;
        cur = n->out[0];
    }
    return KILN_OK;
}

kiln_status pass_group_epilogue(const sched_group *grp, pass_epilogue *ep, base_diag *d)
{
    memset(ep, 0, sizeof(*ep));
    ep->scale = 1.0f;
    const ir_node *anchor = grp->nodes[0];
    if (anchor->op != KILN_OP_MAT_MUL && anchor->n_in > 2 && anchor->in[2]) ep->bias = anchor->in[2];
    const ir_value *cur = anchor->out[0];
    for (int i = 1; i < grp->n_nodes; i++) {
        const ir_node *n = grp->nodes[i];
        const ir_value *other = n->n_in > 1 ? (n->in[0] == cur ? n->in[1] : n->in[0]) : NULL;
        double s;
        if (n->op == KILN_OP_MUL && is_const_scalar(other, &s)) ep->scale *= (float)s;
        else if (n->op == KILN_OP_DIV && is_const_scalar(other, &s)) ep->scale /= (float)s;
        else if (n->op == KILN_OP_ADD && other->is_const && !ep->bias) ep->bias = other;
        else if (n->op == KILN_OP_ADD) ep->residual = other;
        else {
            ep->act = (pass_act)act_of(n);
            if (ep->act == PASS_ACT_LEAKY_RELU) {
                const ir_attr *at = ir_node_attr(n, "alpha");
                ep->alpha = at && at->kind == IR_ATTR_FLOAT ? (float)at->f : 0.01f;
            } else if (ep->act == PASS_ACT_HARD_SIGMOID) {
                const ir_attr *al = ir_node_attr(n, "alpha"), *be = ir_node_attr(n, "beta");
                ep->alpha = al && al->kind == IR_ATTR_FLOAT ? (float)al->f : 0.2f;
                ep->beta = be && be->kind == IR_ATTR_FLOAT ? (float)be->f : 0.5f;
            } else if (ep->act == PASS_ACT_CLIP) {
                ep->alpha = -INFINITY;
                ep->beta = INFINITY;
                if (n->opset < 11) {
                    const ir_attr *mn = ir_node_attr(n, "min"), *mx = ir_node_attr(n, "max");
                    if (mn && mn->kind == IR_ATTR_FLOAT) ep->alpha = (float)mn->f;
                    if (mx && mx->kind == IR_ATTR_FLOAT) ep->beta = (float)mx->f;
                } else {
                    if (n->n_in > 1 && n->in[1]) ep->alpha = (float)ir_get_f64(&n->in[1]->t, 0);
                    if (n->n_in > 2 && n->in[2]) ep->beta = (float)ir_get_f64(&n->in[2]->t, 0);
                }
            } else if (ep->act == PASS_ACT_NONE) {
                char lb[256];
                return base_diag_add(d, KILN_ERR_INTERNAL, "%s is not an epilogue op",
                                     ir_node_label(n, lb, sizeof(lb)));
            }
        }
        cur = n->out[0];
    }
    return KILN_OK;
}

/* ---- the partition ------------------------------------------------------------- */

/* Marks the values of g that subgraph `sub` (and its subgraphs) reads. */
static void mark_subgraph_reads(const ir_graph *g, const ir_graph *sub, bool *needed)
{
    for (int i = 0; i < sub->n_nodes; i++) {
        const ir_node *n = sub->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && n->in[j]->graph == g) needed[n->in[j]->id] = true;
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH) mark_subgraph_reads(g, n->attrs[a].g, needed);
    }
    for (int i = 0; i < sub->n_outputs; i++)
        if (sub->outputs[i]->graph == g) needed[sub->outputs[i]->id] = true;
}

/* live[node id]: some output of the node is a graph output or is read by a
 * live node. ONNX allows nodes whose results nobody reads; they get no
 * group, as their outputs get no place to be written to. */
static kiln_status live_nodes(const ir_graph *g, bool *live)
{
    bool *needed = base_calloc((size_t)g->n_values + 1, sizeof(bool));
    if (!needed) return KILN_ERR_OOM;
    for (int i = 0; i < g->n_outputs; i++) needed[g->outputs[i]->id] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ir_node *n = g->nodes[i];
        live[n->id] = false;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] && needed[n->out[j]->id]) live[n->id] = true;
        if (!live[n->id]) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && n->in[j]->graph == g) needed[n->in[j]->id] = true;
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH) mark_subgraph_reads(g, n->attrs[a].g, needed);
    }
    base_free(needed);
    return KILN_OK;
}

static bool all_static(const ir_graph *g)
{
    for (int i = 0; i < g->n_values; i++)
        if (!g->values[i]->shape_known) return false;
    return true;
}

/* Adds v to the group's inputs unless it is there (or produced inside). */
static kiln_status add_input(builder *b, const ir_graph *g, sched_group *grp, ir_value *v, ir_value ***in, int *n_in,
                             int *cap_in)
{
    if (!v || v->graph != g || b->value_grp[v->id] == grp->id) return KILN_OK;
    for (int k = 0; k < *n_in; k++)
        if ((*in)[k] == v) return KILN_OK;
    if (*n_in == *cap_in) {
        ir_value **in2 = base_arena_alloc(b->a, sizeof(ir_value *) * (size_t)*cap_in * 2);
        if (!in2) return KILN_ERR_OOM;
        memcpy(in2, *in, sizeof(ir_value *) * (size_t)*n_in);
        *in = in2;
        *cap_in *= 2;
    }
    (*in)[(*n_in)++] = v;
    return KILN_OK;
}

/* Values of g read inside a node's subgraphs (If/Loop/Scan bodies). */
static kiln_status add_subgraph_reads(builder *b, const ir_graph *g, sched_group *grp, const ir_graph *sub,
                                      ir_value ***in, int *n_in, int *cap_in)
{
    for (int i = 0; i < sub->n_nodes; i++) {
        const ir_node *n = sub->nodes[i];
        for (int j = 0; j < n->n_in; j++) KILN_TRY(add_input(b, g, grp, n->in[j], in, n_in, cap_in));
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH)
                KILN_TRY(add_subgraph_reads(b, g, grp, n->attrs[a].g, in, n_in, cap_in));
    }
    for (int i = 0; i < sub->n_outputs; i++) KILN_TRY(add_input(b, g, grp, sub->outputs[i], in, n_in, cap_in));
    return KILN_OK;
}

/* Fills grp->in / grp->out / grp->name. */
static kiln_status finish_group(builder *b, const ir_graph *g, sched_group *grp)
{
    ir_value **in = base_arena_alloc(b->a, sizeof(ir_value *) * 64);
    int cap_in = 64, n_in = 0, n_out = 0, cap_out = 16;
    ir_value **out = base_arena_alloc(b->a, sizeof(ir_value *) * 16);
    if (!in || !out) return KILN_ERR_OOM;
    base_str name;
    base_str_init(&name);
    for (int i = 0; i < grp->n_nodes; i++) {
        const ir_node *n = grp->nodes[i];
        if (i) base_str_cat(&name, "+");
        base_str_cat(&name, n->name[0] ? n->name : n->op_type);
        for (int j = 0; j < n->n_in; j++) KILN_TRY(add_input(b, g, grp, n->in[j], &in, &n_in, &cap_in));
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH)
                KILN_TRY(add_subgraph_reads(b, g, grp, n->attrs[a].g, &in, &n_in, &cap_in));
        for (int j = 0; j < n->n_out; j++) {
            ir_value *v = n->out[j];
            if (!v || outside_uses(b, g, v, grp->id) == 0) continue;
            if (n_out == cap_out) {
                ir_value **o2 = base_arena_alloc(b->a, sizeof(ir_value *) * (size_t)cap_out * 2);
                if (!o2) return KILN_ERR_OOM;
                memcpy(o2, out, sizeof(ir_value *) * (size_t)n_out);
                out = o2;
                cap_out *= 2;
            }
            out[n_out++] = v;
        }
    }
    grp->in = in;
    grp->n_in = n_in;
    grp->out = out;
    grp->n_out = n_out;
    const char *nm = base_str_get(&name);
    /* Long fused names are cut: they appear in generated code and reports. */
    grp->name = base_arena_strndup(b->a, nm, strlen(nm) > 200 ? 200 : strlen(nm));
    bool oom = name.oom;
    base_str_free(&name);
    return grp->name && !oom ? KILN_OK : KILN_ERR_OOM;
}

kiln_status pass_partition(ir_graph *g, const pass_support *s, sched_program *p, base_arena *a, base_diag *d)
{
    kiln_status st = KILN_OK;
    builder b = {.p = p, .a = a};
    b.group_of = base_malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    b.value_grp = base_malloc(((size_t)g->n_values + 1) * sizeof(int));
    bool *live = base_malloc(((size_t)g->n_nodes + 1) * sizeof(bool));
    if (!b.group_of || !b.value_grp || !live) {
        st = KILN_ERR_OOM;
        goto out;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        g->nodes[i]->id = i;
        b.group_of[i] = -1;
    }
    for (int i = 0; i < g->n_values; i++) b.value_grp[i] = -1;
    st = live_nodes(g, live);
    bool dynamic = !all_static(g);

    for (int i = 0; i < g->n_nodes && st == KILN_OK; i++) {
        ir_node *n = g->nodes[i];
        if (b.group_of[n->id] >= 0 || !live[n->id]) continue; /* fused already, or dead */
        if (n->n_out >= 1 && n->out[0] && n->out[0]->is_const && !(ir_ops[n->op].flags & IR_OPF_RANDOM))
            continue; /* folded by shape inference: its outputs are weights */
        bool fallback = dynamic || n->op == KILN_OP_COUNT || !s->can_compile(n);
        sched_group_kind kind = fallback ? SCHED_GROUP_FALLBACK : kind_of(n);
        int gi = -1;
        /* Shapes that depend on data: the whole graph is one segment, so no
         * value of unknown size has to be placed between groups. */
        if (dynamic && p->n_groups > 0) gi = 0;
        if (gi < 0 && (kind == SCHED_GROUP_ELEMENTWISE || kind == SCHED_GROUP_FALLBACK)) {
            /* join the latest producer group of the same kind (and shape) */
            for (int j = 0; j < n->n_in; j++) {
                const ir_value *v = n->in[j];
                if (!v || v->graph != g || b.value_grp[v->id] < 0) continue;
                int pg = b.value_grp[v->id];
                const sched_group *pgrp = p->groups[pg];
                if (pgrp->kind != kind || pg <= gi) continue;
                if (kind == SCHED_GROUP_ELEMENTWISE &&
                    !ir_same_shape(&pgrp->nodes[0]->out[0]->t, &n->out[0]->t))
                    continue;
                if (inputs_before(&b, n, pg)) gi = pg;
            }
        }
        if (gi < 0) {
            st = new_group(&b, kind, n, &gi);
            if (st != KILN_OK) break;
        }
        st = add_node(&b, gi, n);
        if (st == KILN_OK && (kind == SCHED_GROUP_CONV || kind == SCHED_GROUP_GEMM)) st = fuse_epilogue(&b, g, gi);
    }
    for (int i = 0; i < p->n_groups && st == KILN_OK; i++) {
        st = finish_group(&b, g, p->groups[i]);
        p->groups[i]->step = i;
    }
out:
    if (st == KILN_ERR_OOM) base_diag_add(d, st, "out of memory while partitioning the graph");
    base_free(live);
    base_free(b.group_of);
    base_free(b.value_grp);
    base_free(b.node_caps);
    return st;
}
