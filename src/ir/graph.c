/*
 * graph.c: building graphs (values, nodes, attributes), topological order,
 * the structural verifier and the text printer.
 */
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

ir_model *ir_model_new(void)
{
    ir_model *m = base_calloc(1, sizeof(*m));
    if (!m) return NULL;
    base_arena_init(&m->arena);
    return m;
}

void ir_model_free(ir_model *m)
{
    if (!m) return;
    for (int i = 0; i < (int)KILN_COUNT(m->keep); i++)
        if (m->keep[i] && m->keep_free[i]) m->keep_free[i](m->keep[i]);
    for (int i = 0; i < m->n_maps; i++) base_file_map_close(&m->maps[i]);
    base_free(m->maps);
    base_arena_free(&m->arena);
    base_free(m);
}

ir_graph *ir_graph_new(base_arena *a, ir_graph *parent, const char *name)
{
    ir_graph *g = base_arena_alloc(a, sizeof(*g));
    if (!g) return NULL;
    g->arena = a;
    g->parent = parent;
    g->opset = parent ? parent->opset : 0;
    g->name = base_arena_strdup(a, name ? name : "");
    if (!g->name) return NULL;
    return g;
}

/* Arena-backed growth: the old array stays in the arena (freed at the end). */
static bool grow(base_arena *a, void ***arr, int *cap, int need)
{
    if (need <= *cap) return true;
    int cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need) cap2 *= 2;
    void **p = base_arena_alloc(a, (size_t)cap2 * sizeof(void *));
    if (!p) return false;
    if (*arr) memcpy(p, *arr, (size_t)*cap * sizeof(void *));
    *arr = p;
    *cap = cap2;
    return true;
}

ir_value *ir_graph_add_value(ir_graph *g, const char *name)
{
    if (!grow(g->arena, (void ***)&g->values, &g->cap_values, g->n_values + 1)) return NULL;
    ir_value *v = base_arena_alloc(g->arena, sizeof(*v));
    if (!v) return NULL;
    v->name = base_arena_strdup(g->arena, name ? name : "");
    if (!v->name) return NULL;
    v->graph = g;
    v->id = g->n_values;
    g->values[g->n_values++] = v;
    return v;
}

ir_node *ir_graph_add_node(ir_graph *g, const char *name, const char *op_type, const char *domain,
                           int n_in, int n_out)
{
    if (!grow(g->arena, (void ***)&g->nodes, &g->cap_nodes, g->n_nodes + 1)) return NULL;
    ir_node *n = base_arena_alloc(g->arena, sizeof(*n));
    if (!n) return NULL;
    n->name = base_arena_strdup(g->arena, name ? name : "");
    n->op_type = base_arena_strdup(g->arena, op_type ? op_type : "");
    n->domain = base_arena_strdup(g->arena, domain ? domain : "");
    n->in = base_arena_alloc(g->arena, (size_t)(n_in + 1) * sizeof(ir_value *));
    n->out = base_arena_alloc(g->arena, (size_t)(n_out + 1) * sizeof(ir_value *));
    if (!n->name || !n->op_type || !n->domain || !n->in || !n->out) return NULL;
    n->n_in = n_in;
    n->n_out = n_out;
    n->op = ir_op_lookup(n->domain, n->op_type);
    n->opset = g->opset;
    n->graph = g;
    n->id = g->n_nodes;
    g->nodes[g->n_nodes++] = n;
    return n;
}

const ir_attr *ir_node_attr(const ir_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ir_node_attr_int(const ir_node *n, const char *name, int64_t def)
{
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->kind == IR_ATTR_INT ? a->i : def;
}

double ir_node_attr_float(const ir_node *n, const char *name, double def)
{
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->kind == IR_ATTR_FLOAT ? a->f : def;
}

const char *ir_node_attr_str(const ir_node *n, const char *name, const char *def)
{
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->kind == IR_ATTR_STRING ? a->s : def;
}

int64_t ir_node_attr_ints_at(const ir_node *n, const char *name, int i, int64_t def)
{
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->kind == IR_ATTR_INTS && i < a->n ? a->ints[i] : def;
}

bool ir_node_attr_kind_ok(const ir_node *n, const char *name, ir_attr_kind kind)
{
    const ir_attr *a = ir_node_attr(n, name);
    return !a || a->kind == kind;
}

const char *ir_attr_kind_name(ir_attr_kind k)
{
    static const char *const names[IR_ATTR_KIND_COUNT] = {
        [IR_ATTR_UNDEF] = "undefined", [IR_ATTR_FLOAT] = "float",     [IR_ATTR_INT] = "int",
        [IR_ATTR_STRING] = "string",   [IR_ATTR_TENSOR] = "tensor",   [IR_ATTR_GRAPH] = "graph",
        [IR_ATTR_FLOATS] = "floats",   [IR_ATTR_INTS] = "ints",       [IR_ATTR_STRINGS] = "strings",
        [IR_ATTR_TENSORS] = "tensors", [IR_ATTR_GRAPHS] = "graphs",
    };
    return (unsigned)k < IR_ATTR_KIND_COUNT ? names[k] : "invalid";
}

const char *ir_node_label(const ir_node *n, char *buf, size_t size)
{
    if (n->name[0]) snprintf(buf, size, "node '%s' (%s)", n->name, n->op_type);
    else snprintf(buf, size, "node #%d (%s)", n->id, n->op_type);
    return buf;
}

/* ---- topological order -------------------------------------------------------
 * Kahn's algorithm over producer edges inside this graph. Values from an
 * enclosing graph, inputs and constants are ready from the start. A node
 * whose subgraph reads a value of this graph depends on that value's
 * producer too, so If/Loop bodies see their outer values computed. */

static void collect_subgraph_deps(const ir_graph *owner, const ir_graph *sub, int *deps, int *n_deps, int max)
{
    for (int i = 0; i < sub->n_nodes; i++) {
        const ir_node *n = sub->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            const ir_value *v = n->in[j];
            if (v && v->graph == owner && v->producer && *n_deps < max) deps[(*n_deps)++] = v->producer->id;
        }
        for (int a = 0; a < n->n_attrs; a++) {
            const ir_attr *at = &n->attrs[a];
            if (at->kind == IR_ATTR_GRAPH) collect_subgraph_deps(owner, at->g, deps, n_deps, max);
            for (int k = 0; at->kind == IR_ATTR_GRAPHS && k < at->n; k++)
                collect_subgraph_deps(owner, at->graphs[k], deps, n_deps, max);
        }
    }
    for (int i = 0; i < sub->n_outputs; i++) {
        const ir_value *v = sub->outputs[i];
        if (v && v->graph == owner && v->producer && *n_deps < max) deps[(*n_deps)++] = v->producer->id;
    }
}

/* The producer ids a node waits for (duplicates allowed). */
static int node_deps(const ir_graph *g, const ir_node *n, int *deps, int max)
{
    int k = 0;
    for (int j = 0; j < n->n_in; j++) {
        const ir_value *v = n->in[j];
        if (v && v->graph == g && v->producer && k < max) deps[k++] = v->producer->id;
    }
    for (int a = 0; a < n->n_attrs; a++) {
        const ir_attr *at = &n->attrs[a];
        if (at->kind == IR_ATTR_GRAPH) collect_subgraph_deps(g, at->g, deps, &k, max);
        for (int s = 0; at->kind == IR_ATTR_GRAPHS && s < at->n; s++)
            collect_subgraph_deps(g, at->graphs[s], deps, &k, max);
    }
    return k;
}

#define MAX_DEPS 4096

kiln_status ir_graph_sort(ir_graph *g, base_diag *d)
{
    int n = g->n_nodes;
    if (n == 0) return KILN_OK;
    int *indeg = base_calloc((size_t)n, sizeof(int));
    int *order = base_calloc((size_t)n, sizeof(int));
    int *deps = base_malloc(MAX_DEPS * sizeof(int));
    /* consumers as a CSR list built from deps */
    int *first = base_calloc((size_t)n + 1, sizeof(int));
    kiln_status st = KILN_OK;
    int *edges = NULL;
    if (!indeg || !order || !deps || !first) {
        st = KILN_ERR_OOM;
        goto out;
    }
    for (int i = 0; i < n; i++) g->nodes[i]->id = i;
    long n_edges = 0;
    for (int i = 0; i < n; i++) {
        int k = node_deps(g, g->nodes[i], deps, MAX_DEPS);
        for (int j = 0; j < k; j++) {
            if (deps[j] == i) continue; /* self-loop: found below as a cycle */
            first[deps[j]]++;
            n_edges++;
        }
        indeg[i] = 0;
    }
    edges = base_malloc((size_t)(n_edges ? n_edges : 1) * sizeof(int));
    if (!edges) {
        st = KILN_ERR_OOM;
        goto out;
    }
    /* prefix sums: first[p] = start of p's consumer list */
    int acc = 0;
    for (int i = 0; i <= n; i++) {
        int c = i < n ? first[i] : 0;
        first[i] = acc;
        acc += c;
    }
    int *fill = base_calloc((size_t)n, sizeof(int));
    if (!fill) {
        st = KILN_ERR_OOM;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int k = node_deps(g, g->nodes[i], deps, MAX_DEPS);
        for (int j = 0; j < k; j++) {
            if (deps[j] == i) {
                indeg[i]++; /* never satisfied: reported as a cycle */
                continue;
            }
            edges[first[deps[j]] + fill[deps[j]]++] = i;
            indeg[i]++;
        }
    }
    base_free(fill);
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0) order[tail++] = i;
    while (head < tail) {
        int p = order[head++];
        for (int e = first[p]; e < first[p + 1]; e++)
            if (--indeg[edges[e]] == 0) order[tail++] = edges[e];
    }
    if (tail < n) {
        char lb[256];
        for (int i = 0; i < n; i++) {
            if (indeg[i] > 0) {
                st = base_diag_add(d, KILN_ERR_INVALID_MODEL,
                                   "graph '%s': cycle: %s depends on its own output (%d nodes on cycles)",
                                   g->name, ir_node_label(g->nodes[i], lb, sizeof(lb)), n - tail);
                break;
            }
        }
        goto out;
    }
    ir_node **sorted = base_arena_alloc(g->arena, (size_t)n * sizeof(*sorted));
    if (!sorted) {
        st = KILN_ERR_OOM;
        goto out;
    }
    for (int i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
    for (int i = 0; i < n; i++) {
        g->nodes[i] = sorted[i];
        g->nodes[i]->id = i;
    }
out:
    base_free(indeg);
    base_free(order);
    base_free(deps);
    base_free(first);
    base_free(edges);
    return st;
}

/* ---- verifier ---------------------------------------------------------------- */

static bool visible(const ir_graph *g, const ir_value *v)
{
    for (; g; g = g->parent)
        if (v->graph == g) return true;
    return false;
}

kiln_status ir_graph_verify(const ir_graph *g, base_diag *d)
{
    kiln_status st = KILN_OK;
    char lb[256];
    /* The node that defines each value of this graph, in order. */
    int *seen = base_calloc((size_t)g->n_values + 1, sizeof(int));
    if (!seen) return KILN_ERR_OOM;
    for (int i = 0; i < g->n_values; i++) {
        const ir_value *v = g->values[i];
        seen[i] = v->is_input || v->is_const || !v->producer;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        ir_node_label(n, lb, sizeof(lb));
        if (n->op != KILN_OP_COUNT) {
            const ir_op_info *op = &ir_ops[n->op];
            if (n->n_in < op->min_in || (op->max_in >= 0 && n->n_in > op->max_in))
                st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "%s: %d inputs, the op takes %d to %d", lb,
                                   n->n_in, op->min_in, op->max_in);
            if (n->n_out < op->min_out || (op->max_out >= 0 && n->n_out > op->max_out))
                st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "%s: %d outputs, the op gives %d to %d", lb,
                                   n->n_out, op->min_out, op->max_out);
            for (int j = 0; j < op->min_in && j < n->n_in; j++)
                if (!n->in[j] && !(op->flags & IR_OPF_SUBGRAPH))
                    st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "%s: required input %d is missing", lb, j);
        }
        for (int j = 0; j < n->n_in; j++) {
            const ir_value *v = n->in[j];
            if (!v) continue;
            if (!visible(g, v))
                st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "%s: input '%s' is not in scope", lb, v->name);
            else if (v->graph == g && !seen[v->id])
                st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "%s: input '%s' is used before it is produced",
                                   lb, v->name);
        }
        for (int j = 0; j < n->n_out; j++) {
            const ir_value *v = n->out[j];
            if (!v) continue;
            if (v->producer != n || v->producer_slot != j)
                st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "%s: output '%s' has another producer", lb,
                                   v->name);
            seen[v->id] = 1;
        }
        for (int a = 0; a < n->n_attrs; a++) {
            const ir_attr *at = &n->attrs[a];
            if (at->kind == IR_ATTR_GRAPH && ir_graph_verify(at->g, d) != KILN_OK) st = KILN_ERR_INVALID_MODEL;
            for (int k = 0; at->kind == IR_ATTR_GRAPHS && k < at->n; k++)
                if (ir_graph_verify(at->graphs[k], d) != KILN_OK) st = KILN_ERR_INVALID_MODEL;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = g->outputs[i];
        if (!visible(g, v))
            st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "graph '%s': output '%s' is not in scope", g->name,
                               v->name);
        else if (v->graph == g && !seen[v->id])
            st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "graph '%s': output '%s' is never produced", g->name,
                               v->name);
    }
    base_free(seen);
    return st;
}

/* ---- printer -------------------------------------------------------------------- */

static void print_value(base_str *s, const ir_value *v)
{
    char buf[160];
    if (!v) {
        base_str_cat(s, "_");
        return;
    }
    base_str_printf(s, "%%%s", v->name);
    if (v->shape_known) base_str_printf(s, ":%s", ir_tensor_type_str(&v->t, buf, sizeof(buf)));
}

static void print_attr(base_str *s, const ir_attr *a)
{
    base_str_printf(s, " %s=", a->name);
    switch (a->kind) {
    case IR_ATTR_FLOAT: base_str_printf(s, "%g", a->f); break;
    case IR_ATTR_INT: base_str_printf(s, "%lld", (long long)a->i); break;
    case IR_ATTR_STRING: base_str_printf(s, "\"%s\"", a->s); break;
    case IR_ATTR_TENSOR: {
        char buf[160];
        base_str_printf(s, "<%s>", ir_tensor_type_str(a->t, buf, sizeof(buf)));
        break;
    }
    case IR_ATTR_GRAPH: base_str_printf(s, "<graph %s>", a->g->name); break;
    case IR_ATTR_INTS:
        base_str_cat(s, "[");
        for (int i = 0; i < a->n && i < 16; i++) base_str_printf(s, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        base_str_cat(s, a->n > 16 ? ",...]" : "]");
        break;
    case IR_ATTR_FLOATS:
        base_str_cat(s, "[");
        for (int i = 0; i < a->n && i < 16; i++) base_str_printf(s, "%s%g", i ? "," : "", a->floats[i]);
        base_str_cat(s, a->n > 16 ? ",...]" : "]");
        break;
    default: base_str_printf(s, "<%s x%d>", ir_attr_kind_name(a->kind), a->n); break;
    }
}

static void print_graph(const ir_graph *g, base_str *s, int indent)
{
    base_str_printf(s, "%*sgraph %s(", indent, "", g->name);
    for (int i = 0; i < g->n_inputs; i++) {
        if (i) base_str_cat(s, ", ");
        print_value(s, g->inputs[i]);
    }
    base_str_cat(s, ") {\n");
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        base_str_printf(s, "%*s  ", indent, "");
        for (int j = 0; j < n->n_out; j++) {
            if (j) base_str_cat(s, ", ");
            print_value(s, n->out[j]);
        }
        base_str_printf(s, " = %s(", n->op_type);
        for (int j = 0; j < n->n_in; j++) {
            if (j) base_str_cat(s, ", ");
            if (n->in[j]) base_str_printf(s, "%%%s", n->in[j]->name);
            else base_str_cat(s, "_");
        }
        base_str_cat(s, ")");
        for (int a = 0; a < n->n_attrs; a++) print_attr(s, &n->attrs[a]);
        if (n->name[0]) base_str_printf(s, "  # %s", n->name);
        base_str_cat(s, "\n");
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH) print_graph(n->attrs[a].g, s, indent + 4);
    }
    base_str_printf(s, "%*s  return ", indent, "");
    for (int i = 0; i < g->n_outputs; i++) {
        if (i) base_str_cat(s, ", ");
        print_value(s, g->outputs[i]);
    }
    base_str_printf(s, "\n%*s}\n", indent, "");
}

void ir_graph_print(const ir_graph *g, base_str *s) { print_graph(g, s, 0); }

void ir_graph_param_stats(const ir_graph *g, int64_t *n_params, int64_t *n_bytes)
{
    *n_params = 0;
    *n_bytes = 0;
    for (int i = 0; i < g->n_values; i++) {
        const ir_value *v = g->values[i];
        if (!v->is_const || v->producer) continue;
        *n_params += ir_numel(&v->t);
        *n_bytes += (int64_t)v->t.nbytes;
    }
}
