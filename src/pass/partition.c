/*
 * partition.c: the graph -> groups partition (DESIGN.md "Group"; MonoNN
 * 4.2.1 for elementwise subgraphs, Bolt 3.2 for epilogue fusion).
 *
 * Nodes are visited in topological order. A contraction (Conv, MatMul,
 * Gemm) absorbs its single-consumer epilogue chain: a scale by a constant
 * scalar, a constant bias, a residual of the output's shape, one
 * activation (also the five-node erf GELU of ONNX exports, which reads its
 * input twice). Elementwise nodes join the group of an elementwise producer
 * with the same output shape when every other input comes from a group
 * created earlier, which keeps the group order a valid schedule. Nodes the
 * target cannot compile become fallback segments, merged by the same rule.
 * Nodes whose results nobody reads (ONNX allows them) get no group.
 *
 * Targets with kernels for whole patterns (pass_support.patterns) get them
 * as one group: attention (MatMul-Softmax-MatMul with the scale, mask,
 * operand Transposes and an output Transpose keeping the head dim last
 * around it, FlashAttention's fusion) and RMSNorm. They
 * are matched before the walk; the walk skips their nodes until it reaches
 * the last one, where every input of the pattern has been produced.
 */
#include "pass/pass.h"

#include "ir/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *sched_group_kind_name(sched_group_kind k)
{
    static const char *const names[SCHED_GROUP_KIND_COUNT] = {
        [SCHED_GROUP_CONV] = "conv",       [SCHED_GROUP_GEMM] = "gemm",
        [SCHED_GROUP_POOL] = "pool",       [SCHED_GROUP_ROWS] = "rows",
        [SCHED_GROUP_ELEMENTWISE] = "ews", [SCHED_GROUP_MOVE] = "move",
        [SCHED_GROUP_ALIAS] = "alias",     [SCHED_GROUP_FALLBACK] = "fallback",
        [SCHED_GROUP_ATTENTION] = "attention",
    };
    return (unsigned)k < SCHED_GROUP_KIND_COUNT ? names[k] : "?";
}

static bool transpose_perm(const ir_node *n, int *perm);

/* A Transpose that moves only dims of extent 1 past the others (ViT's
 * [1, 197, 768] -> [197, 1, 768]) leaves every element at its offset. */
static bool transpose_keeps_layout(const ir_node *n)
{
    const ir_value *x = n->in[0], *y = n->n_out ? n->out[0] : NULL;
    int perm[IR_MAX_RANK];
    if (!x || !y || !x->shape_known || !y->shape_known || !transpose_perm(n, perm)) return false;
    int last = -1;
    for (int i = 0; i < x->t.rank; i++) {
        if (x->t.dims[perm[i]] == 1) continue;
        if (perm[i] < last) return false;
        last = perm[i];
    }
    return true;
}

static sched_group_kind kind_of(const ir_node *n)
{
    switch (n->op) {
    case KILN_OP_TRANSPOSE:
        /* an alias when the order in memory stays (below), else a move */
        if (!n->out[0]->is_output && transpose_keeps_layout(n)) return SCHED_GROUP_ALIAS;
        return SCHED_GROUP_MOVE;
    case KILN_OP_CONV: return SCHED_GROUP_CONV;
    case KILN_OP_MAT_MUL: case KILN_OP_GEMM: return SCHED_GROUP_GEMM;
    case KILN_OP_MAX_POOL: case KILN_OP_AVERAGE_POOL: return SCHED_GROUP_POOL;
    case KILN_OP_SOFTMAX: case KILN_OP_LOG_SOFTMAX: case KILN_OP_LAYER_NORMALIZATION:
    case KILN_OP_GLOBAL_AVERAGE_POOL:
        return SCHED_GROUP_ROWS;
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY: case KILN_OP_DROPOUT:
        /* The output shares the input's memory, unless it is a graph output
         * (the caller's buffer) or a Dropout mask is wanted: then a copy. So
         * does a Transpose that keeps the order in memory (above). */
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
    int *pattern_of; /* node id -> index into patterns, -1 when in none */
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

/* Input v of node n comes from group gi, or from a group created before it
 * (or is an input or constant). */
static bool input_before(const builder *b, const ir_node *n, const ir_value *v, int gi)
{
    if (!v || v->graph != n->graph) return true;
    int pg = b->value_grp[v->id];
    if (pg > gi) return false;
    /* produced by a node not placed in any group yet: it comes later */
    return !(pg < 0 && v->producer && !v->is_const);
}

/* Every input of n is input_before: adding n to gi keeps the order valid. */
static bool inputs_before(const builder *b, const ir_node *n, int gi)
{
    for (int j = 0; j < n->n_in; j++)
        if (!input_before(b, n, n->in[j], gi)) return false;
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

/* Shape inference folded n into constants: its outputs are weights and it
 * runs nowhere (so it reads nothing). */
static bool folded(const ir_node *n)
{
    return n->n_out >= 1 && n->out[0] && n->out[0]->is_const && !(ir_ops[n->op].flags & IR_OPF_RANDOM);
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

/* v is a constant scalar within 1e-6 relative of want (exporters round
 * the constants of spelled-out activations to float32, or to 8 digits). */
static bool is_scalar_near(const ir_value *v, double want)
{
    double c;
    return is_const_scalar(v, &c) && fabs(c - want) <= 1e-6 * fabs(want);
}

/* The input of the two-input node n that is not v; NULL when n does not
 * read v, or reads it twice. */
static const ir_value *other_input(const ir_node *n, const ir_value *v)
{
    if (n->n_in != 2 || (n->in[0] == v) == (n->in[1] == v)) return NULL;
    return n->in[0] == v ? n->in[1] : n->in[0];
}

/* The first output of n, NULL when it has none. */
static const ir_value *out0(const ir_node *n) { return n->n_out >= 1 ? n->out[0] : NULL; }

/* GELU in the erf form ONNX exporters spell out (opset-17 PyTorch: BERT,
 * ViT), starting at x:
 *     Div(x, sqrt 2) or Mul(x, 1/sqrt 2) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5)
 * or with the halving first, Mul(x, 0.5) -> Mul(., the Add's output);
 * either operand order for Mul and Add. These nodes must be x's only two
 * readers and each intermediate must be read once. OUT: nodes[5]: the
 * scaling, Erf, Add, the Mul reading x, the last Mul (in this order,
 * a topological one for both spellings). Shapes and dtypes are the caller's
 * to check. */
static bool match_gelu_erf(const ir_graph *g, const ir_value *x, ir_node **nodes)
{
    if (x->is_output || x->n_uses != 2) return false;
    ir_node *rd[2];
    int n_rd = 0;
    for (int i = 0; i < g->n_nodes && n_rd < 2; i++) {
        ir_node *n = g->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == x) {
                rd[n_rd++] = n;
                break;
            }
    }
    if (n_rd != 2) return false; /* one node reads x twice */
    for (int k = 0; k < 2; k++) {
        ir_node *sc = rd[k], *mx = rd[1 - k];
        const ir_value *c = other_input(sc, x);
        bool scales = c && out0(sc) &&
                      ((sc->op == KILN_OP_DIV && sc->in[0] == x && is_scalar_near(c, 1.4142135623730951)) ||
                       (sc->op == KILN_OP_MUL && is_scalar_near(c, 0.7071067811865476)));
        if (!scales || mx->op != KILN_OP_MUL || !out0(mx)) continue;
        ir_node *erf = sole_consumer(g, sc->out[0]);
        if (!erf || erf->op != KILN_OP_ERF || !out0(erf)) continue;
        ir_node *add = sole_consumer(g, erf->out[0]);
        if (!add || add->op != KILN_OP_ADD || !out0(add) || !is_scalar_near(other_input(add, erf->out[0]), 1.0))
            continue;
        ir_node *after = sole_consumer(g, add->out[0]), *last;
        if (after == mx) { /* Mul(x, 1 + erf) -> Mul(., 0.5) */
            last = sole_consumer(g, mx->out[0]);
            if (!last || last->op != KILN_OP_MUL || !is_scalar_near(other_input(last, mx->out[0]), 0.5)) continue;
        } else { /* Mul(x, 0.5) -> Mul(., 1 + erf) */
            last = after;
            if (!last || last->op != KILN_OP_MUL || !is_scalar_near(other_input(mx, x), 0.5) ||
                sole_consumer(g, mx->out[0]) != last || other_input(last, mx->out[0]) != add->out[0])
                continue;
        }
        if (!out0(last)) continue;
        nodes[0] = sc;
        nodes[1] = erf;
        nodes[2] = add;
        nodes[3] = mx;
        nodes[4] = last;
        return true;
    }
    return false;
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

/* The five nodes of match_gelu_erf on cur can join group gi after cur's
 * producer: each belongs to no pattern, keeps cur's shape in float32, and
 * reads only what the group or the nodes before it produce, or earlier
 * groups, inputs and constants. */
static bool gelu_fits(const builder *b, ir_node *const *nodes, const ir_value *cur, int gi)
{
    for (int k = 0; k < 5; k++) {
        const ir_node *n = nodes[k];
        const ir_value *o = n->out[0];
        if (b->pattern_of[n->id] >= 0 || o->t.dtype != KILN_F32 || !o->shape_known || !ir_same_shape(&o->t, &cur->t))
            return false;
        for (int j = 0; j < n->n_in; j++) {
            bool inside = false;
            for (int i = 0; i < k; i++) inside |= n->in[j] == nodes[i]->out[0];
            if (!inside && !input_before(b, n, n->in[j], gi)) return false;
        }
    }
    return true;
}

/* A node whose output is its input's elements at the same offsets, in
 * another shape (a reshape, or a Transpose of unit dims): a view. */
static bool is_view(const ir_node *n)
{
    switch (n->op) {
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY:
        return true;
    case KILN_OP_TRANSPOSE: return transpose_keeps_layout(n);
    default: return false;
    }
}

/* After a GEMM's epilogue so far (ending in cur): views of cur, then an Add
 * of another value of the viewed shape (ViT's out-projection: Gemm,
 * Reshape, Transpose, residual Add). The element at offset i of the view is
 * the product's element at offset i, so the residual joins the epilogue.
 * Fills chain (VIEW_CHAIN_MAX nodes) with the views and the Add; returns
 * their count, 0 when the chain is not that. */
#define VIEW_CHAIN_MAX 8

static int viewed_residual(const builder *b, const ir_graph *g, const ir_value *cur, int gi, ir_node **chain)
{
    int k = 0;
    const ir_value *v = cur;
    ir_node *n;
    while ((n = sole_consumer(g, v)) && is_view(n) && k < VIEW_CHAIN_MAX - 1) {
        const ir_value *o = n->n_out ? n->out[0] : NULL;
        bool before = true; /* inputs other than v (a shape) */
        for (int j = 1; j < n->n_in; j++) before &= input_before(b, n, n->in[j], gi);
        if (b->pattern_of[n->id] >= 0 || n->in[0] != v || !o || !o->shape_known || o->t.dtype != KILN_F32 ||
            ir_numel(&o->t) != ir_numel(&v->t) || !before)
            return 0;
        chain[k++] = n;
        v = o;
    }
    if (k == 0 || !n || n->op != KILN_OP_ADD || b->pattern_of[n->id] >= 0) return 0;
    const ir_value *other = n->in[0] == v ? n->in[1] : n->in[0];
    if (other == v || other->is_const || !other->shape_known || other->t.dtype != KILN_F32 ||
        !ir_same_shape(&other->t, &v->t) || !n->out[0] || !ir_same_shape(&n->out[0]->t, &v->t) ||
        !input_before(b, n, other, gi))
        return 0;
    chain[k++] = n;
    return k;
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
        /* the erf GELU reads cur twice, so it is no chain of sole consumers */
        ir_node *gelu[5];
        if (!has_act && match_gelu_erf(g, cur, gelu)) {
            if (!gelu_fits(b, gelu, cur, gi)) break;
            for (int k = 0; k < 5; k++) KILN_TRY(add_node(b, gi, gelu[k]));
            has_act = any = true;
            cur = gelu[4]->out[0];
            continue;
        }
        ir_node *chain[VIEW_CHAIN_MAX];
        int k = !has_act && !has_res && anchor->op != KILN_OP_CONV ? viewed_residual(b, g, cur, gi, chain) : 0;
        if (k > 0) {
            /* the views and a residual Add: the end of the chain */
            for (int i = 0; i < k; i++) KILN_TRY(add_node(b, gi, chain[i]));
            break;
        }
        ir_node *n = sole_consumer(g, cur);
        if (!n || n->n_out < 1 || !n->out[0] || !n->out[0]->shape_known || !ir_same_shape(&n->out[0]->t, &cur->t))
            break;
        if (b->pattern_of[n->id] >= 0) break; /* it belongs to a pattern's group */
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
    if (!cur && grp->n_nodes > 1) {
        char lb[256];
        return base_diag_add(d, KILN_ERR_INTERNAL, "%s: an epilogue after an anchor without an output",
                             ir_node_label(anchor, lb, sizeof(lb)));
    }
    for (int i = 1; i < grp->n_nodes; i++) {
        const ir_node *n = grp->nodes[i];
        ir_node *gelu[5];
        if (i + 5 <= grp->n_nodes && match_gelu_erf(anchor->graph, cur, gelu) &&
            memcmp(gelu, grp->nodes + i, sizeof(gelu)) == 0) {
            /* fuse_epilogue's order */
            ep->act = PASS_ACT_GELU;
            cur = gelu[4]->out[0];
            i += 4;
            continue;
        }
        const ir_value *other = n->n_in > 1 ? (n->in[0] == cur ? n->in[1] : n->in[0]) : NULL;
        double s;
        if (is_view(n) && n->in[0] == cur) {
            /* a view before a residual (viewed_residual): nothing to compute */
        } else if (n->op == KILN_OP_MUL && is_const_scalar(other, &s)) ep->scale *= (float)s;
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

/* ---- patterns (pass_support.patterns) --------------------------------------------- */

#define PATTERN_MAX 48 /* attention: 7 nodes, and up to 12 (ATTN_CHAIN_MAX) for each operand */

/* The nodes of one multi-node pattern, sorted by node id (topological
 * order) once matched. */
typedef struct pattern {
    sched_group_kind kind;
    ir_node *nodes[PATTERN_MAX];
    int n_nodes;
} pattern;

static bool pattern_has(const pattern *pt, const ir_node *n)
{
    for (int i = 0; pt && i < pt->n_nodes; i++)
        if (pt->nodes[i] == n) return true;
    return false;
}

/* Adds n (once: a view several operands read through is taken once). */
static bool pattern_take(pattern *pt, ir_node *n)
{
    if (pattern_has(pt, n)) return true;
    if (pt->n_nodes == PATTERN_MAX || n->n_out != 1 || !n->out[0] || n->out[0]->is_const) return false;
    pt->nodes[pt->n_nodes++] = n;
    return true;
}

/* The node producing v when `user` is v's only reader: a node the pattern
 * ending at user may absorb. */
static ir_node *sole_producer(const ir_graph *g, const ir_value *v, const ir_node *user)
{
    if (!v || v->graph != g || v->is_const || !v->producer || v->producer->n_out != 1) return NULL;
    return sole_consumer(g, v) == user ? v->producer : NULL;
}

static bool is_float_dtype(kiln_dtype t) { return t == KILN_F32 || t == KILN_F16 || t == KILN_BF16; }

/* n multiplies one input by a constant scalar (Mul on either side, or Div
 * by it) and keeps its shape: *in is that input, *s the factor. */
static bool scalar_factor(const ir_node *n, ir_value **in, double *s)
{
    if ((n->op != KILN_OP_MUL && n->op != KILN_OP_DIV) || n->n_out != 1 || !n->out[0]) return false;
    double c;
    int k = -1;
    if (is_const_scalar(n->in[1], &c)) k = 0;
    else if (n->op == KILN_OP_MUL && is_const_scalar(n->in[0], &c)) k = 1;
    if (k < 0 || !isfinite(c) || (n->op == KILN_OP_DIV && c == 0)) return false;
    if (n->in[k]->is_const || !n->in[k]->shape_known || !ir_same_shape(&n->in[k]->t, &n->out[0]->t)) return false;
    *in = n->in[k];
    *s = n->op == KILN_OP_DIV ? 1.0 / c : c;
    return true;
}

/* A Transpose's permutation (without the attribute ONNX reverses the dims). */
static bool transpose_perm(const ir_node *n, int *perm)
{
    int r = n->in[0]->t.rank;
    const ir_attr *a = ir_node_attr(n, "perm");
    if (!a) {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
        return true;
    }
    if (a->kind != IR_ATTR_INTS || a->n != r) return false;
    for (int i = 0; i < r; i++) {
        if (a->ints[i] < 0 || a->ints[i] >= r) return false;
        perm[i] = (int)a->ints[i];
    }
    return true;
}

/* An operand read through views: dims, element strides and an offset over
 * the value the chain starts from. */
typedef struct strided {
    int rank;
    int64_t dims[IR_MAX_RANK], st[IR_MAX_RANK], offset;
} strided;

/* The view as reshaped to dims e[0..m): each run of dims that step through
 * memory as one block splits or merges into new dims (the rule a strided
 * tensor library uses to decide that a reshape is a view). */
static bool strided_reshape(strided *w, int m, const int64_t *e)
{
    int64_t nst[IR_MAX_RANK];
    int vd = m - 1;
    int64_t base = w->rank ? w->st[w->rank - 1] : 1, t_numel = 1, v_numel = 1;
    for (int td = w->rank - 1; td >= 0; td--) {
        t_numel *= w->dims[td];
        if (td == 0 || (w->dims[td - 1] != 1 && w->st[td - 1] != t_numel * base)) {
            while (vd >= 0 && (v_numel < t_numel || e[vd] == 1)) {
                nst[vd] = v_numel * base;
                v_numel *= e[vd];
                vd--;
            }
            if (v_numel != t_numel) return false;
            if (td > 0) {
                base = w->st[td - 1];
                t_numel = v_numel = 1;
            }
        }
    }
    while (vd >= 0 && e[vd] == 1) nst[vd--] = 1; /* leading unit dims */
    if (vd != -1) return false;
    w->rank = m;
    memcpy(w->dims, e, (size_t)m * sizeof(int64_t));
    memcpy(w->st, nst, (size_t)m * sizeof(int64_t));
    return true;
}

/* The view after node n (a Transpose, a reshape, a Gather of one constant
 * index, or a Slice of constant bounds and positive steps), or false. */
static bool strided_step(strided *w, const ir_node *n)
{
    const ir_value *y = n->out[0];
    int r = w->rank;
    switch (n->op) {
    case KILN_OP_TRANSPOSE: {
        int perm[IR_MAX_RANK];
        if (!transpose_perm(n, perm) || y->t.rank != r) return false;
        strided o = *w;
        for (int i = 0; i < r; i++) {
            o.dims[i] = w->dims[perm[i]];
            o.st[i] = w->st[perm[i]];
        }
        *w = o;
        return true;
    }
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY:
        return strided_reshape(w, y->t.rank, y->t.dims);
    case KILN_OP_GATHER: {
        int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), r), n_idx;
        const ir_value *ix = n->n_in > 1 ? n->in[1] : NULL;
        int64_t idx;
        if (axis < 0 || !ir_const_ints(ix, 1, &idx, &n_idx) || n_idx != 1) return false;
        if (idx < 0) idx += w->dims[axis];
        if (idx < 0 || idx >= w->dims[axis]) return false;
        w->offset += idx * w->st[axis];
        if (ix->t.rank == 1) w->dims[axis] = 1; /* [1] keeps the axis */
        else {
            for (int i = axis; i + 1 < r; i++) {
                w->dims[i] = w->dims[i + 1];
                w->st[i] = w->st[i + 1];
            }
            w->rank--;
        }
        return y->t.rank == w->rank;
    }
    case KILN_OP_SLICE: {
        int64_t start[IR_MAX_RANK], step[IR_MAX_RANK];
        if (n->opset < 10 || !ir_slice_params(n, start, step)) return false;
        for (int k = 0; k < r; k++) {
            if (step[k] <= 0) return false;
            w->offset += start[k] * w->st[k];
            w->dims[k] = y->t.dims[k];
            w->st[k] *= step[k];
        }
        return true;
    }
    default: return false;
    }
}

static bool is_strided_view(const ir_node *n)
{
    switch (n->op) {
    case KILN_OP_TRANSPOSE: case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE:
    case KILN_OP_UNSQUEEZE: case KILN_OP_IDENTITY: case KILN_OP_GATHER: case KILN_OP_SLICE:
        return true;
    default: return false;
    }
}

#define ATTN_CHAIN_MAX 12

/* The node producing v when every reader of v is `user` or a node of
 * `also` (NULL: user alone). Nodes folded into constants (a Shape of v:
 * torch 2 exports one for the attention's scale) read nothing. */
static ir_node *producer_read_by(const ir_graph *g, const ir_value *v, const ir_node *user, const pattern *also)
{
    if (!v || v->graph != g || v->is_const || v->is_output || !v->producer || v->producer->n_out != 1) return NULL;
    int readers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (folded(n)) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v) {
                if (n != user && !pattern_has(also, n)) return NULL;
                readers++;
                break;
            }
    }
    return readers ? v->producer : NULL;
}

/* Operand `slot` of the MatMul `mm`: the chain of nodes that feed only it,
 * back from mm, of views (is_strided_view) and, when scale is non-NULL,
 * scalar Mul/Div (elementwise: they commute with the views). The longest
 * tail of the chain whose views compose into one strided read of the value
 * before it joins the pattern (the factors multiply *scale), if that read
 * keeps one of the last two dims contiguous and every other stride and the
 * offset a multiple of 8 elements where a head dim is a multiple of 16
 * (16-byte rows for the tensor-core kernel; a view without them would cost
 * it more than a copy does). Else
 * the operand is mm's input as it is. ViT's q, k and v come out of one
 * projection through a Reshape, a Transpose, Gathers and per-head
 * Reshapes and Transposes, all read in place. `prev` (NULL at first)
 * holds the nodes an earlier try took for every operand: a view whose
 * output they alone read may be taken too. */
static bool attn_operand(const ir_graph *g, ir_node *mm, int slot, double *scale, pattern *pt, const pattern *prev,
                         pass_attn_operand *op)
{
    ir_value *v = mm->in[slot];
    if (!v || !v->shape_known || v->t.rank < 2 || v->t.rank > 4) return false;
    int r = v->t.rank;
    ir_node *chain[ATTN_CHAIN_MAX];
    ir_value *src[ATTN_CHAIN_MAX]; /* chain[i] reads src[i] */
    double factor[ATTN_CHAIN_MAX]; /* chain[i]'s scale factor, 1 for a view */
    int n = 0;
    ir_node *user = mm;
    ir_value *cur = v, *in;
    for (ir_node *p; n < ATTN_CHAIN_MAX; n++) {
        /* a view may feed other nodes of the pattern (ViT's q, k and v
         * Gathered from one tensor), a scale factor only this operand */
        factor[n] = 1.0;
        if ((p = sole_producer(g, cur, user)) && scale && scalar_factor(p, &in, &factor[n])) {
            /* in is the factor's other operand */
        } else if ((p = producer_read_by(g, cur, user, prev)) && is_strided_view(p) && p->in[0] &&
                   p->in[0]->shape_known) {
            in = p->in[0];
        } else {
            break;
        }
        chain[n] = p;
        src[n] = in;
        cur = in;
        user = p;
    }
    /* the farthest start whose views compose (k = 0: none taken) */
    for (int k = n; k >= 0; k--) {
        const ir_value *x = k ? src[k - 1] : v;
        strided w = {.rank = x->t.rank, .offset = 0};
        int64_t st = 1;
        for (int i = w.rank - 1; i >= 0; i--) {
            w.dims[i] = x->t.dims[i];
            w.st[i] = st;
            st *= x->t.dims[i];
        }
        bool ok = true;
        for (int i = k - 1; i >= 0 && ok; i--)
            if (is_strided_view(chain[i])) ok = strided_step(&w, chain[i]);
        ok = ok && w.rank == r && pt->n_nodes + k <= PATTERN_MAX;
        for (int i = 0; ok && i < r; i++) ok = w.dims[i] == v->t.dims[i];
        /* alignment matters where the tensor-core kernel could run: a head
         * dim (the last, or k^T's second last) a multiple of 16 */
        if (ok && k > 0 && (v->t.dims[r - 1] % 16 == 0 || v->t.dims[r - 2] % 16 == 0)) {
            bool unit_last = w.st[r - 1] == 1 || w.dims[r - 1] == 1, unit_prev = w.st[r - 2] == 1 || w.dims[r - 2] == 1;
            ok = (unit_last || unit_prev) && w.offset % 8 == 0;
            for (int i = 0; ok && i < r; i++)
                if (w.st[i] != 1 && w.dims[i] != 1) ok = w.st[i] % 8 == 0;
        }
        if (!ok) continue;
        for (int i = 0; i < k; i++) {
            if (!pattern_take(pt, chain[i])) return false;
            if (scale) *scale *= factor[i];
        }
        op->v = x;
        op->rank = r;
        op->offset = w.offset;
        memcpy(op->dims, w.dims, (size_t)r * sizeof(int64_t));
        memcpy(op->st, w.st, (size_t)r * sizeof(int64_t));
        return true;
    }
    return false;
}

/* m broadcasts to t without growing it (dims aligned right, equal or 1). */
static bool broadcasts_into(const ir_tensor *m, const ir_tensor *t)
{
    if (m->rank > t->rank) return false;
    for (int i = 1; i <= m->rank; i++)
        if (m->dims[m->rank - i] != t->dims[t->rank - i] && m->dims[m->rank - i] != 1) return false;
    return true;
}

/* Whether the probabilities p (a Softmax output) are read only by
 * Where(IsNaN(p), 0, p), the NaN guard PyTorch exports after a masked
 * softmax: *isnan and *where are its two nodes. */
static bool nan_guard(const ir_graph *g, const ir_value *p, ir_node **isnan_node, ir_node **where)
{
    if (p->is_output || p->n_uses != 2) return false;
    ir_node *isn = NULL, *wh = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = g->nodes[i];
        if (n->op == KILN_OP_IS_NAN && n->n_in == 1 && n->in[0] == p) isn = n;
        else if (n->op == KILN_OP_WHERE && n->n_in == 3 && n->in[2] == p && n->in[0] != p && n->in[1] != p) wh = n;
    }
    double zero;
    if (!isn || !wh || isn->n_out != 1 || !isn->out[0] || sole_consumer(g, isn->out[0]) != wh ||
        wh->in[0] != isn->out[0] || !is_const_scalar(wh->in[1], &zero) || zero != 0.0 || wh->n_out != 1 ||
        !wh->out[0] || !wh->out[0]->shape_known || wh->out[0]->t.dtype != p->t.dtype ||
        !ir_same_shape(&wh->out[0]->t, &p->t))
        return false;
    *isnan_node = isn;
    *where = wh;
    return true;
}

/* Attention around Softmax `sm`: MatMul(q, kt) [scalar Mul/Div]*
 * [Add(mask)] -> sm [-> Where(IsNaN(.), 0, .)] -> MatMul(., v)
 * [-> Transpose], every intermediate read once (the probabilities twice,
 * by the guard). */
static bool match_attention(const ir_graph *g, ir_node *sm, pattern *pt, pass_attention *at)
{
    memset(pt, 0, sizeof(*pt));
    memset(at, 0, sizeof(*at));
    pt->kind = SCHED_GROUP_ATTENTION;
    at->scale = 1.0;
    if (sm->op != KILN_OP_SOFTMAX || !sm->in[0]->shape_known) return false;
    ir_value *v = sm->in[0];
    int r = v->t.rank;
    int64_t axis = ir_node_attr_int(sm, "axis", sm->opset < 13 ? 1 : -1);
    if (r < 2 || r > 4 || !is_float_dtype(v->t.dtype) || (axis < 0 ? axis + r : axis) != r - 1) return false;
    if (sm->n_out != 1 || !sm->out[0]) return false;
    ir_node *mm2 = sole_consumer(g, sm->out[0]), *isn = NULL, *wh = NULL;
    if (!mm2 && nan_guard(g, sm->out[0], &isn, &wh)) mm2 = sole_consumer(g, wh->out[0]);
    const ir_value *probs = wh ? wh->out[0] : sm->out[0];
    if (!mm2 || mm2->op != KILN_OP_MAT_MUL || mm2->in[0] != probs || mm2->in[1] == probs) return false;
    if (!pattern_take(pt, sm) || (wh && (!pattern_take(pt, isn) || !pattern_take(pt, wh))) || !pattern_take(pt, mm2))
        return false;
    at->nan_to_zero = wh != NULL;

    ir_node *user = sm, *p = sole_producer(g, v, sm);
    ir_value *in;
    double s;
    if (p && p->op == KILN_OP_ADD) {
        /* which side is the mask: the other comes from the MatMul or a scale */
        int k = -1;
        for (int j = 0; j < 2 && k < 0; j++) {
            ir_value *c = p->in[j], *m = p->in[1 - j];
            if (m == c || !m->shape_known || !is_float_dtype(m->t.dtype) || !c->shape_known ||
                !ir_same_shape(&c->t, &v->t) || !broadcasts_into(&m->t, &v->t))
                continue;
            ir_node *cp = sole_producer(g, c, p);
            if (cp && (cp->op == KILN_OP_MAT_MUL || scalar_factor(cp, &in, &s))) k = j;
        }
        if (k < 0 || !pattern_take(pt, p)) return false;
        at->mask = p->in[1 - k];
        v = p->in[k];
        user = p;
        p = sole_producer(g, v, user);
    }
    while (p && scalar_factor(p, &in, &s)) {
        at->scale *= s;
        if (!pattern_take(pt, p)) return false;
        v = in;
        user = p;
        p = sole_producer(g, v, user);
    }
    ir_node *mm1 = p;
    if (!mm1 || mm1->op != KILN_OP_MAT_MUL || !pattern_take(pt, mm1)) return false;
    /* the operands, again while a try takes more than the one before: the
     * views they share join once every reader has */
    pattern base = *pt, prev;
    double scale0 = at->scale;
    for (int attempt = 0; attempt < 4; attempt++) {
        *pt = base;
        at->scale = scale0;
        if (!attn_operand(g, mm1, 0, &at->scale, pt, attempt ? &prev : NULL, &at->q) ||
            !attn_operand(g, mm1, 1, &at->scale, pt, attempt ? &prev : NULL, &at->kt) ||
            !attn_operand(g, mm2, 1, NULL, pt, attempt ? &prev : NULL, &at->v))
            return false;
        if (attempt > 0 && pt->n_nodes == prev.n_nodes) break;
        prev = *pt;
    }
    at->scores = mm1->out[0];
    at->out = mm2->out[0];
    for (int i = 0; i < r; i++) at->out_perm[i] = i;

    /* q [.., Sq, D] kt [.., D, Sk] -> scores [.., Sq, Sk]; v [.., Sk, Dv] -> out [.., Sq, Dv] */
    const ir_tensor *q = &mm1->in[0]->t, *kt = &mm1->in[1]->t, *vt = &mm2->in[1]->t;
    const ir_tensor *sc = &at->scores->t, *o = &at->out->t;
    if (!at->scores->shape_known || !at->out->shape_known || sc->rank != r || o->rank != r) return false;
    kiln_dtype dt = sc->dtype;
    if (q->dtype != dt || kt->dtype != dt || vt->dtype != dt || o->dtype != dt || v->t.dtype != dt) return false;
    int64_t D = q->dims[q->rank - 1], Dv = vt->dims[vt->rank - 1];
    if (D < 1 || Dv < 1 || D > PASS_ATTN_MAX_HEAD || Dv > PASS_ATTN_MAX_HEAD) return false;
    if (ir_numel(sc) == 0 || ir_numel(o) == 0) return false; /* nothing to compute, or softmax over no keys */
    if (kt->dims[kt->rank - 2] != D || vt->dims[vt->rank - 2] != sc->dims[r - 1]) return false;
    for (int i = 0; i < r - 2; i++)
        if (o->dims[i] != sc->dims[i]) return false; /* v must not widen the batch */
    if (o->dims[r - 2] != sc->dims[r - 2] || o->dims[r - 1] != Dv) return false;

    /* A Transpose after the second MatMul that keeps the head dim last (the
     * heads merging back): the kernel writes through it, as the output
     * rows stay contiguous. Without it the pattern still matches. */
    ir_node *tr = sole_consumer(g, at->out);
    int tp[IR_MAX_RANK];
    if (tr && tr->op == KILN_OP_TRANSPOSE && tr->in[0] == at->out && transpose_perm(tr, tp) && tp[r - 1] == r - 1 &&
        tr->n_out == 1 && tr->out[0] && tr->out[0]->shape_known && tr->out[0]->t.rank == r &&
        tr->out[0]->t.dtype == dt && pattern_take(pt, tr)) {
        memcpy(at->out_perm, tp, (size_t)r * sizeof(int));
        at->out_transposed = true;
        at->out = tr->out[0];
    }
    /* every value the group computes, but its output, stays inside it */
    for (int i = 0; i < pt->n_nodes; i++) {
        const ir_value *ov = pt->nodes[i]->out[0];
        if (ov != at->out && producer_read_by(g, ov, NULL, pt) != pt->nodes[i]) return false;
    }
    return true;
}

/* ReduceMean over the last axis of a rank-r input, keeping it. */
static bool reduces_last_axis(const ir_node *rm, int r)
{
    if (ir_node_attr_int(rm, "keepdims", 1) != 1) return false;
    int64_t ax;
    const ir_attr *a = ir_node_attr(rm, "axes");
    if (a) {
        if (a->kind != IR_ATTR_INTS || a->n != 1) return false;
        ax = a->ints[0];
    } else if (rm->n_in > 1 && rm->in[1]) {
        const ir_value *av = rm->in[1];
        if (!av->is_const || !ir_dtype_is_int(av->t.dtype) || ir_numel(&av->t) != 1) return false;
        ax = ir_get_i64(&av->t, 0);
    } else {
        /* no axes: all of them, which is the last one at rank 1 */
        return r == 1 && ir_node_attr_int(rm, "noop_with_empty_axes", 0) == 0;
    }
    return ax == r - 1 || ax == -1;
}

/* RMSNorm starting at `p` (Pow(x, 2) or Mul(x, x)). */
static bool match_rms_norm(const ir_graph *g, ir_node *p, pattern *pt, pass_rms_norm *rn)
{
    memset(pt, 0, sizeof(*pt));
    memset(rn, 0, sizeof(*rn));
    pt->kind = SCHED_GROUP_ROWS;
    ir_value *x = p->in[0];
    double c;
    if (!x || !x->shape_known || !is_float_dtype(x->t.dtype) || x->t.rank < 1 || x->t.dims[x->t.rank - 1] < 1)
        return false;
    if (p->op == KILN_OP_POW ? !(is_const_scalar(p->in[1], &c) && c == 2.0) : !(p->op == KILN_OP_MUL && p->in[1] == x))
        return false;
    int r = x->t.rank;
    ir_node *rm = p->n_out == 1 && p->out[0] ? sole_consumer(g, p->out[0]) : NULL;
    if (!rm || rm->op != KILN_OP_REDUCE_MEAN || rm->in[0] != p->out[0] || !reduces_last_axis(rm, r)) return false;
    ir_node *ad = sole_consumer(g, rm->out[0]);
    if (!ad || ad->op != KILN_OP_ADD) return false;
    const ir_value *ev = ad->in[0] == rm->out[0] ? ad->in[1] : ad->in[0];
    if (!is_const_scalar(ev, &rn->eps) || !ir_same_shape(&ad->out[0]->t, &rm->out[0]->t)) return false;
    ir_node *sq = sole_consumer(g, ad->out[0]);
    ir_node *nx = sq && sq->op == KILN_OP_SQRT ? sole_consumer(g, sq->out[0]) : NULL;
    if (!nx || !pattern_take(pt, p) || !pattern_take(pt, rm) || !pattern_take(pt, ad) || !pattern_take(pt, sq))
        return false;
    ir_node *last = nx;
    if (!(nx->op == KILN_OP_DIV && nx->in[0] == x && nx->in[1] == sq->out[0])) {
        /* 1 / sqrt(...) as Reciprocal or Div(1, .), then Mul by x */
        bool recip = nx->op == KILN_OP_RECIPROCAL ||
                     (nx->op == KILN_OP_DIV && nx->in[1] == sq->out[0] && is_const_scalar(nx->in[0], &c) && c == 1.0);
        ir_node *mu = recip && nx->out[0] ? sole_consumer(g, nx->out[0]) : NULL;
        if (!mu || mu->op != KILN_OP_MUL || !pattern_take(pt, nx)) return false;
        if (!((mu->in[0] == x && mu->in[1] == nx->out[0]) || (mu->in[1] == x && mu->in[0] == nx->out[0]))) return false;
        last = mu;
    }
    if (!pattern_take(pt, last) || !ir_same_shape(&last->out[0]->t, &x->t)) return false;
    /* an optional Mul by a per-column scale */
    ir_node *ms = sole_consumer(g, last->out[0]);
    if (ms && ms->op == KILN_OP_MUL) {
        const ir_value *w = ms->in[0] == last->out[0] ? ms->in[1] : ms->in[0];
        bool fits = w != last->out[0] && w->shape_known && w->t.dtype == x->t.dtype && w->t.rank <= r &&
                    w->t.rank >= 1 && w->t.dims[w->t.rank - 1] == x->t.dims[r - 1] &&
                    ir_numel(&w->t) == x->t.dims[r - 1] && ms->out[0] && ir_same_shape(&ms->out[0]->t, &x->t);
        if (fits && pattern_take(pt, ms)) {
            rn->scale = w;
            last = ms;
        }
    }
    for (int i = 0; i < pt->n_nodes; i++)
        if (pt->nodes[i]->out[0]->t.dtype != x->t.dtype) return false;
    rn->x = x;
    rn->out = last->out[0];
    return true;
}

static int by_node_id(const void *a, const void *b)
{
    const ir_node *x = *(ir_node *const *)a, *y = *(ir_node *const *)b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Finds the patterns the target asked for. OUT: *pats (base_malloc'd),
 * *n_pats; b->pattern_of marks their nodes. */
static kiln_status find_patterns(builder *b, const ir_graph *g, const pass_support *s, const bool *live,
                                 pattern **pats, int *n_pats)
{
    int cap = 0, n = 0;
    pattern *list = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *nd = g->nodes[i];
        pattern pt;
        pass_attention at;
        pass_rms_norm rn;
        bool ok = false;
        if ((s->patterns & PASS_PATTERN_ATTENTION) && nd->op == KILN_OP_SOFTMAX) ok = match_attention(g, nd, &pt, &at);
        else if ((s->patterns & PASS_PATTERN_RMS_NORM) && (nd->op == KILN_OP_POW || nd->op == KILN_OP_MUL))
            ok = match_rms_norm(g, nd, &pt, &rn);
        if (!ok) continue;
        qsort(pt.nodes, (size_t)pt.n_nodes, sizeof(pt.nodes[0]), by_node_id);
        ok = live[pt.nodes[pt.n_nodes - 1]->id];
        for (int k = 0; k < pt.n_nodes && ok; k++) ok = b->pattern_of[pt.nodes[k]->id] < 0;
        if (!ok) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            pattern *l2 = base_realloc(list, (size_t)cap * sizeof(*l2));
            if (!l2) {
                base_free(list);
                return KILN_ERR_OOM;
            }
            list = l2;
        }
        for (int k = 0; k < pt.n_nodes; k++) b->pattern_of[pt.nodes[k]->id] = n;
        list[n++] = pt;
    }
    *pats = list;
    *n_pats = n;
    return KILN_OK;
}

kiln_status pass_group_attention(const sched_group *grp, pass_attention *at, base_diag *d)
{
    pattern pt;
    for (int i = 0; i < grp->n_nodes; i++) {
        ir_node *n = grp->nodes[i];
        if (n->op == KILN_OP_SOFTMAX && match_attention(n->graph, n, &pt, at) && pt.n_nodes == grp->n_nodes)
            return KILN_OK;
    }
    return base_diag_add(d, KILN_ERR_INTERNAL, "group '%s' is not an attention pattern", grp->name);
}

kiln_status pass_group_rms_norm(const sched_group *grp, pass_rms_norm *rn, base_diag *d)
{
    pattern pt;
    if (grp->n_nodes > 1 && match_rms_norm(grp->nodes[0]->graph, grp->nodes[0], &pt, rn) && pt.n_nodes == grp->n_nodes)
        return KILN_OK;
    return base_diag_add(d, KILN_ERR_INTERNAL, "group '%s' is not an RMSNorm pattern", grp->name);
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
    b.pattern_of = base_malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    pattern *pats = NULL;
    int n_pats = 0;
    if (!b.group_of || !b.value_grp || !live || !b.pattern_of) {
        st = KILN_ERR_OOM;
        goto out;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        g->nodes[i]->id = i;
        b.group_of[i] = -1;
        b.pattern_of[i] = -1;
    }
    for (int i = 0; i < g->n_values; i++) b.value_grp[i] = -1;
    st = live_nodes(g, live);
    bool dynamic = !all_static(g);
    if (st == KILN_OK && !dynamic && s->patterns) st = find_patterns(&b, g, s, live, &pats, &n_pats);

    for (int i = 0; i < g->n_nodes && st == KILN_OK; i++) {
        ir_node *n = g->nodes[i];
        if (b.group_of[n->id] >= 0 || !live[n->id]) continue; /* fused already, or dead */
        if (folded(n)) continue; /* its outputs are weights */
        if (b.pattern_of[n->id] >= 0) {
            /* a pattern becomes a group at its last node, when all its inputs exist */
            const pattern *pt = &pats[b.pattern_of[n->id]];
            if (n != pt->nodes[pt->n_nodes - 1]) continue;
            int gi;
            st = new_group(&b, pt->kind, n, &gi);
            for (int k = 0; k < pt->n_nodes && st == KILN_OK; k++) st = add_node(&b, gi, pt->nodes[k]);
            continue;
        }
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
    base_free(pats);
    base_free(b.pattern_of);
    base_free(b.group_of);
    base_free(b.value_grp);
    base_free(b.node_caps);
    return st;
}
