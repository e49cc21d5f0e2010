/*
 * interp.c: the reference interpreter's driver and the helpers its kernels
 * share (outputs, attributes, axes, broadcasting, subgraphs), plus shape
 * inference with constant folding, which runs the same kernels in infer mode.
 *
 * The interpreter walks the nodes in topological order, keeping one tensor
 * per value and freeing each after its last use. Kernels live in
 * interp_*.c, one file per op family; ops.def maps ops to them.
 */
#include "ir/interp_ops.h"

#include <stdio.h>
#include <string.h>

struct ir_interp {
    uint64_t rng;
    bool keep_all;
    base_diag *diag;
};

/* One activation of a graph: the tensors of its values. */
typedef struct env {
    const ir_graph *g;
    ir_tensor *vals;
    bool *have;
    const struct env *parent;
} env;

/* ---- kernel helpers -------------------------------------------------------- */

kiln_status ir_eval_fail(ir_eval *e, kiln_status st, const char *fmt, ...)
{
    char lb[256], msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    base_diag_add(e->diag, st, "%s: %s", ir_node_label(e->node, lb, sizeof(lb)), msg);
    return st;
}

kiln_status ir_eval_out(ir_eval *e, int i, kiln_dtype dtype, int rank, const int64_t *dims)
{
    KILN_ASSERT(i >= 0 && i < e->n_out);
    ir_tensor *t = &e->out[i];
    ir_tensor_release(t);
    if (rank < 0 || rank > IR_MAX_RANK)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "output %d has rank %d; kiln supports up to %d", i, rank,
                            IR_MAX_RANK);
    if (ir_dtype_size(dtype) == 0)
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "output %d has dtype %s, which kiln does not compute", i,
                            kiln_dtype_name(dtype));
    size_t n = 1;
    for (int k = 0; k < rank; k++) {
        if (dims[k] < 0)
            return ir_eval_fail(e, KILN_ERR_SHAPE, "output %d would have a negative dimension (%lld)", i,
                                (long long)dims[k]);
        if (!base_mul_ok(n, (size_t)dims[k], &n) || n > ((size_t)1 << 40))
            return ir_eval_fail(e, KILN_ERR_SHAPE, "output %d would be too large", i);
    }
    if (e->infer) {
        t->dtype = dtype;
        t->rank = rank;
        for (int k = 0; k < rank; k++) t->dims[k] = dims[k];
        return KILN_OK;
    }
    kiln_status st = ir_tensor_alloc(t, dtype, rank, dims);
    if (st == KILN_ERR_OOM) {
        char buf[160];
        ir_tensor tmp = {.dtype = dtype, .rank = rank};
        memcpy(tmp.dims, dims, (size_t)rank * sizeof(int64_t));
        return ir_eval_fail(e, st, "out of memory allocating output %d (%s)", i,
                            ir_tensor_type_str(&tmp, buf, sizeof(buf)));
    }
    if (st != KILN_OK) return ir_eval_fail(e, st, "cannot allocate output %d", i);
    return KILN_OK;
}

bool ir_eval_has(const ir_eval *e, int i) { return i >= 0 && i < e->n_in && e->in[i] != NULL; }

kiln_status ir_eval_need(ir_eval *e, int i)
{
    if (!ir_eval_has(e, i)) return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "input %d is required", i);
    if (!e->in[i]->data && ir_numel(e->in[i]) > 0) return KILN_ERR_DYNAMIC;
    return KILN_OK;
}

static const ir_attr *attr_of(ir_eval *e, const char *name, ir_attr_kind want)
{
    const ir_attr *a = ir_node_attr(e->node, name);
    if (!a) return NULL;
    if (a->kind != want) {
        kiln_status st = ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "attribute '%s' is %s, expected %s", name,
                                      ir_attr_kind_name(a->kind), ir_attr_kind_name(want));
        if (e->status == KILN_OK) e->status = st;
        return NULL;
    }
    return a;
}

int64_t ir_eval_attr_int(ir_eval *e, const char *name, int64_t def)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_INT);
    return a ? a->i : def;
}

double ir_eval_attr_float(ir_eval *e, const char *name, double def)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_FLOAT);
    return a ? a->f : def;
}

const char *ir_eval_attr_str(ir_eval *e, const char *name, const char *def)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_STRING);
    return a ? a->s : def;
}

int ir_eval_attr_ints(ir_eval *e, const char *name, const int64_t **out)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_INTS);
    if (!a) return -1;
    *out = a->ints;
    return a->n;
}

int ir_eval_attr_floats(ir_eval *e, const char *name, const double **out)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_FLOATS);
    if (!a) return -1;
    *out = a->floats;
    return a->n;
}

int ir_eval_attr_strings(ir_eval *e, const char *name, const char *const **out)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_STRINGS);
    if (!a) return -1;
    *out = a->strings;
    return a->n;
}

const ir_tensor *ir_eval_attr_tensor(ir_eval *e, const char *name)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_TENSOR);
    return a ? a->t : NULL;
}

const ir_graph *ir_eval_attr_graph(ir_eval *e, const char *name)
{
    const ir_attr *a = attr_of(e, name, IR_ATTR_GRAPH);
    return a ? a->g : NULL;
}

bool ir_eval_has_attr(const ir_eval *e, const char *name) { return ir_node_attr(e->node, name) != NULL; }

kiln_status ir_eval_axis(ir_eval *e, int64_t axis, int rank, int *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= (rank > 0 ? rank : 1))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d", (long long)axis,
                            rank);
    *out = (int)a;
    return KILN_OK;
}

void ir_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

kiln_status ir_eval_broadcast(ir_eval *e, int n, const ir_tensor *const *ts, int *rank, int64_t *dims)
{
    int r = 0;
    for (int k = 0; k < n; k++)
        if (ts[k] && ts[k]->rank > r) r = ts[k]->rank;
    for (int i = 0; i < r; i++) dims[i] = 1;
    for (int k = 0; k < n; k++) {
        if (!ts[k]) continue;
        int off = r - ts[k]->rank;
        for (int i = 0; i < ts[k]->rank; i++) {
            int64_t d = ts[k]->dims[i], *o = &dims[off + i];
            if (d == *o || d == 1) continue;
            if (*o == 1) {
                *o = d;
                continue;
            }
            char b1[160], b2[160];
            return ir_eval_fail(e, KILN_ERR_SHAPE, "input shapes %s and %s do not broadcast",
                                ir_tensor_type_str(ts[0], b1, sizeof(b1)),
                                ir_tensor_type_str(ts[k], b2, sizeof(b2)));
        }
    }
    *rank = r;
    return KILN_OK;
}

void ir_bcast_init(ir_bcast *b, int rank, const int64_t *dims, int n, const ir_tensor *const *ts)
{
    KILN_ASSERT(n <= IR_BCAST_MAX && rank <= IR_MAX_RANK);
    memset(b, 0, sizeof(*b));
    b->rank = rank;
    b->n = n;
    memcpy(b->dims, dims, (size_t)rank * sizeof(int64_t));
    for (int k = 0; k < n; k++) {
        const ir_tensor *t = ts[k];
        if (!t) continue;
        int off = rank - t->rank;
        int64_t s = 1;
        for (int i = t->rank - 1; i >= 0; i--) {
            b->strides[k][off + i] = t->dims[i] == 1 ? 0 : s;
            s *= t->dims[i];
        }
    }
}

void ir_bcast_next(ir_bcast *b)
{
    for (int i = b->rank - 1; i >= 0; i--) {
        b->idx[i]++;
        for (int k = 0; k < b->n; k++) b->off[k] += b->strides[k][i];
        if (b->idx[i] < b->dims[i]) return;
        for (int k = 0; k < b->n; k++) b->off[k] -= b->strides[k][i] * b->idx[i];
        b->idx[i] = 0;
    }
}

double ir_eval_uniform(ir_eval *e)
{
    /* splitmix64: tiny, good enough for test inputs and random ops. */
    uint64_t z = (e->interp->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- running a graph ---------------------------------------------------------- */

static const ir_tensor *env_lookup(const env *en, const ir_value *v)
{
    for (; en; en = en->parent) {
        if (en->g != v->graph) continue;
        if (en->have[v->id]) return &en->vals[v->id];
        break;
    }
    if (v->is_const) return &v->t;
    return NULL;
}

/* Index of the last node of g reading v (directly or inside a subgraph). */
static void mark_uses(const ir_graph *g, const ir_graph *sub, int node_idx, int *last_use)
{
    for (int i = 0; i < sub->n_nodes; i++) {
        const ir_node *n = sub->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && n->in[j]->graph == g) last_use[n->in[j]->id] = node_idx;
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH) mark_uses(g, n->attrs[a].g, node_idx, last_use);
    }
    for (int i = 0; i < sub->n_outputs; i++)
        if (sub->outputs[i]->graph == g) last_use[sub->outputs[i]->id] = node_idx;
}

static kiln_status run_node(ir_interp *it, env *en, const ir_node *n)
{
    char lb[256];
    if (n->op == KILN_OP_COUNT || !ir_ops[n->op].eval)
        return base_diag_add(it->diag, KILN_ERR_UNSUPPORTED, "%s: op '%s%s%s' is not supported",
                             ir_node_label(n, lb, sizeof(lb)), n->domain, n->domain[0] ? "." : "", n->op_type);
    const ir_tensor *ins[IR_EVAL_MAX_IO];
    ir_tensor outs[IR_EVAL_MAX_IO];
    if (n->n_in > IR_EVAL_MAX_IO || n->n_out > IR_EVAL_MAX_IO)
        return base_diag_add(it->diag, KILN_ERR_UNSUPPORTED, "%s: too many inputs or outputs",
                             ir_node_label(n, lb, sizeof(lb)));
    for (int j = 0; j < n->n_in; j++) {
        ins[j] = NULL;
        if (!n->in[j]) continue;
        ins[j] = env_lookup(en, n->in[j]);
        if (!ins[j])
            return base_diag_add(it->diag, KILN_ERR_INVALID_MODEL, "%s: input '%s' has no value",
                                 ir_node_label(n, lb, sizeof(lb)), n->in[j]->name);
    }
    memset(outs, 0, (size_t)n->n_out * sizeof(outs[0]));
    ir_eval e = {.node = n, .n_in = n->n_in, .in = ins, .n_out = n->n_out, .out = outs,
                 .diag = it->diag, .interp = it};
    int n_msgs = it->diag ? it->diag->n_msgs : 0;
    kiln_status st = ir_ops[n->op].eval(&e);
    if (st == KILN_OK) st = e.status;
    if (st == KILN_ERR_DYNAMIC) st = KILN_ERR_INTERNAL;
    if (st == KILN_OK) {
        for (int j = 0; j < n->n_out; j++) {
            if (!outs[j].data && ir_numel(&outs[j]) > 0) {
                st = base_diag_add(it->diag, KILN_ERR_INTERNAL, "%s: output %d was not produced",
                                   ir_node_label(n, lb, sizeof(lb)), j);
                break;
            }
        }
    } else if (it->diag && it->diag->n_msgs == n_msgs) {
        base_diag_add(it->diag, st, "%s: %s", ir_node_label(n, lb, sizeof(lb)), kiln_status_name(st));
    }
    for (int j = 0; j < n->n_out; j++) {
        const ir_value *v = n->out[j];
        if (st == KILN_OK && v && v->graph == en->g) {
            en->vals[v->id] = outs[j];
            en->have[v->id] = true;
        } else {
            ir_tensor_release(&outs[j]);
        }
    }
    return st;
}

/* The environment of the node being evaluated, so subgraphs see outer values. */
static _Thread_local const env *current_env;

/* Runs g; outputs are copied or moved into out[] (owned). */
static kiln_status run_graph(ir_interp *it, const ir_graph *g, const env *parent, const ir_tensor *inputs,
                             ir_tensor *out)
{
    kiln_status st = KILN_OK;
    env en = {.g = g, .parent = parent};
    en.vals = base_calloc((size_t)g->n_values + 1, sizeof(ir_tensor));
    en.have = base_calloc((size_t)g->n_values + 1, sizeof(bool));
    int *last_use = base_malloc(((size_t)g->n_values + 1) * sizeof(int));
    if (!en.vals || !en.have || !last_use) {
        st = base_diag_add(it->diag, KILN_ERR_OOM, "out of memory running graph '%s'", g->name);
        goto out;
    }
    for (int i = 0; i < g->n_values; i++) last_use[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && n->in[j]->graph == g) last_use[n->in[j]->id] = i;
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH) mark_uses(g, n->attrs[a].g, i, last_use);
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->graph == g) last_use[g->outputs[i]->id] = g->n_nodes;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = g->inputs[i];
        en.vals[v->id] = inputs[i];
        en.vals[v->id].owned = false; /* borrowed from the caller */
        en.have[v->id] = true;
    }
    for (int i = 0; i < g->n_nodes && st == KILN_OK; i++) {
        current_env = &en;
        st = run_node(it, &en, g->nodes[i]);
        if (it->keep_all) continue;
        const ir_node *n = g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            const ir_value *v = n->in[j];
            if (v && v->graph == g && last_use[v->id] == i && en.have[v->id] && !v->is_const) {
                ir_tensor_release(&en.vals[v->id]);
                en.have[v->id] = false;
            }
        }
        for (int j = 0; j < n->n_out; j++) {
            const ir_value *v = n->out[j];
            if (v && last_use[v->id] < 0 && en.have[v->id]) { /* dead output */
                ir_tensor_release(&en.vals[v->id]);
                en.have[v->id] = false;
            }
        }
    }
    for (int i = 0; i < g->n_outputs && st == KILN_OK; i++) {
        const ir_value *v = g->outputs[i];
        const ir_tensor *t = env_lookup(&en, v);
        if (!t) {
            st = base_diag_add(it->diag, KILN_ERR_INVALID_MODEL, "graph '%s': output '%s' has no value", g->name,
                               v->name);
            break;
        }
        if (v->graph == g && t->owned) { /* move */
            out[i] = *t;
            en.have[v->id] = false;
            memset(&en.vals[v->id], 0, sizeof(ir_tensor));
            continue;
        }
        ir_tensor copy;
        st = ir_tensor_copy(&copy, t);
        if (st != KILN_OK) {
            base_diag_add(it->diag, st, "out of memory copying output '%s'", v->name);
            break;
        }
        out[i] = copy;
    }
    if (st != KILN_OK)
        for (int i = 0; i < g->n_outputs; i++) ir_tensor_release(&out[i]);
out:
    if (en.vals)
        for (int i = 0; i < g->n_values; i++)
            if (en.have && en.have[i]) ir_tensor_release(&en.vals[i]);
    base_free(en.vals);
    base_free(en.have);
    base_free(last_use);
    return st;
}


kiln_status ir_eval_subgraph(ir_eval *e, const ir_graph *g, int n_in, const ir_tensor *in, int n_out,
                             ir_tensor *out)
{
    if (e->infer) return KILN_ERR_DYNAMIC;
    if (n_in != g->n_inputs)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "subgraph '%s' takes %d inputs, given %d", g->name,
                            g->n_inputs, n_in);
    if (n_out != g->n_outputs)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "subgraph '%s' gives %d outputs, %d expected", g->name,
                            g->n_outputs, n_out);
    const env *saved = current_env;
    kiln_status st = run_graph(e->interp, g, saved, in, out);
    current_env = saved;
    return st;
}

static kiln_status check_inputs(const ir_graph *g, const ir_tensor *inputs, base_diag *d)
{
    kiln_status st = KILN_OK;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = g->inputs[i];
        const ir_tensor *t = &inputs[i];
        char want[160], got[160];
        if (!t->data && ir_numel(t) > 0) {
            st = base_diag_add(d, KILN_ERR_INVALID_ARG, "input '%s' has no data", v->name);
            continue;
        }
        bool ok = t->dtype == v->t.dtype && t->rank == v->t.rank;
        for (int k = 0; ok && k < t->rank; k++) ok = v->t.dims[k] < 0 || v->t.dims[k] == t->dims[k];
        if (!ok)
            st = base_diag_add(d, KILN_ERR_SHAPE, "input '%s': expected %s, got %s", v->name,
                               ir_tensor_type_str(&v->t, want, sizeof(want)),
                               ir_tensor_type_str(t, got, sizeof(got)));
    }
    return st;
}

kiln_status ir_interp_run(const ir_graph *g, const ir_tensor *inputs, ir_tensor *out,
                          const ir_interp_opts *opts, base_diag *d)
{
    KILN_TRY(check_inputs(g, inputs, d));
    ir_interp it = {.rng = opts ? opts->seed : 0, .keep_all = opts && opts->keep_all, .diag = d};
    for (int i = 0; i < g->n_outputs; i++) memset(&out[i], 0, sizeof(out[i]));
    const env *saved = current_env;
    current_env = NULL;
    kiln_status st = run_graph(&it, g, NULL, inputs, out);
    current_env = saved;
    return st;
}

/* ---- shape inference and constant folding --------------------------------------- */

#define IR_FOLD_MAX_BYTES ((size_t)64 << 20)

static kiln_status infer_node(ir_node *n, base_diag *d)
{
    char lb[256];
    if (n->op == KILN_OP_COUNT || !ir_ops[n->op].eval) return KILN_OK; /* reported by the verifier */
    const ir_op_info *op = &ir_ops[n->op];
    const ir_tensor *ins[IR_EVAL_MAX_IO];
    ir_tensor outs[IR_EVAL_MAX_IO];
    if (n->n_in > IR_EVAL_MAX_IO || n->n_out > IR_EVAL_MAX_IO) return KILN_OK;
    bool all_const = !(op->flags & (IR_OPF_RANDOM | IR_OPF_SUBGRAPH));
    for (int j = 0; j < n->n_in; j++) {
        ins[j] = NULL;
        if (!n->in[j]) continue;
        if (!n->in[j]->shape_known) return KILN_OK; /* unknown upstream: stays unknown */
        ins[j] = &n->in[j]->t;
        if (!n->in[j]->is_const) all_const = false;
    }
    memset(outs, 0, (size_t)n->n_out * sizeof(outs[0]));
    ir_interp it = {.diag = d};
    ir_eval e = {.node = n, .n_in = n->n_in, .in = ins, .n_out = n->n_out, .out = outs,
                 .infer = true, .diag = d, .interp = &it};
    int n_msgs = d ? d->n_msgs : 0;
    kiln_status st = op->eval(&e);
    if (st == KILN_OK) st = e.status;
    /* Fold when every input is constant and the outputs are small: a huge
     * folded constant would cost memory for nothing. */
    if (st == KILN_OK && all_const) {
        size_t bytes = 0;
        for (int j = 0; j < n->n_out; j++) bytes += (size_t)ir_numel(&outs[j]) * ir_dtype_size(outs[j].dtype);
        if (bytes <= IR_FOLD_MAX_BYTES) {
            for (int j = 0; j < n->n_out; j++) ir_tensor_release(&outs[j]);
            memset(outs, 0, (size_t)n->n_out * sizeof(outs[0]));
            e.infer = false;
            st = op->eval(&e);
            if (st == KILN_OK) st = e.status;
        }
    }
    if (st == KILN_OK) {
        for (int j = 0; j < n->n_out; j++) {
            ir_value *v = n->out[j];
            if (!v) continue;
            v->t.dtype = outs[j].dtype;
            v->t.rank = outs[j].rank;
            memcpy(v->t.dims, outs[j].dims, sizeof(v->t.dims));
            v->shape_known = true;
            if (outs[j].data || ir_numel(&outs[j]) == 0) {
                /* folded: keep the data in the graph's arena */
                void *p = base_arena_alloc(n->graph->arena, outs[j].nbytes ? outs[j].nbytes : 1);
                if (!p) {
                    st = KILN_ERR_OOM;
                    break;
                }
                if (outs[j].data) memcpy(p, outs[j].data, outs[j].nbytes);
                v->t.data = p;
                v->t.nbytes = outs[j].nbytes;
                v->t.owned = false;
                v->is_const = true;
            }
        }
    } else if (st == KILN_ERR_DYNAMIC) {
        st = KILN_OK; /* outputs stay unknown until run time */
    } else if (d && d->n_msgs == n_msgs) {
        base_diag_add(d, st, "%s: %s", ir_node_label(n, lb, sizeof(lb)), kiln_status_name(st));
    }
    for (int j = 0; j < n->n_out; j++) ir_tensor_release(&outs[j]);
    return st;
}

kiln_status ir_infer_shapes(ir_graph *g, base_diag *d)
{
    kiln_status st = KILN_OK;
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_status s = infer_node(g->nodes[i], d);
        if (s != KILN_OK) st = s; /* keep going: report every problem */
    }
    return st;
}
