/*
 * cse.c: common subexpressions. Exporters repeat work that a graph needs
 * once: Hugging Face's BERT computes its attention mask's Where in every
 * layer, twelve nodes of the same op on the same inputs. pass_cse keeps
 * the first of each set of identical nodes, points every reader of the
 * others' outputs at the first one's and takes the others out of the
 * graph (their outputs stay as values no node makes or reads).
 *
 * Two nodes are identical when they run the same op (type and domain)
 * with the same attributes on the same inputs: the same values, or
 * constants of the same type, shape and bytes. Never merged: random ops
 * (IR_OPF_RANDOM, and Dropout, random in training mode), ops kiln does not
 * know (they may be anything), ops with subgraphs, nodes whose outputs are
 * folded constants (they cost nothing at run time) or graph outputs (their
 * values must stay; a value a subgraph returns is one too, for the
 * loader), and dead nodes (no reader, no graph output). A second run on
 * the same graph (kiln inspect and kiln tune plan it more than once) finds
 * nothing to do.
 */
#include "pass/pass.h"

#include <string.h>

/* Bytes of a constant hashed (the comparison reads all of them). */
#define HASH_BYTES 64

/* The hashes chain base_hash_bytes through its seed. */
static uint64_t mix(uint64_t h, uint64_t v) { return base_hash_bytes(&v, sizeof(v), h); }

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) { return base_hash_bytes(p, n, h); }

static uint64_t hash_str(uint64_t h, const char *s) { return s ? hash_bytes(h, s, strlen(s)) : mix(h, 0); }

/* A constant whose bytes stand for it: an initializer or a folded value,
 * not one a caller may feed (an initializer that is also a graph input). */
static bool by_content(const ir_value *v) { return v->is_const && !v->is_input && v->shape_known; }

static bool same_tensor(const ir_tensor *a, const ir_tensor *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank || a->nbytes != b->nbytes) return false;
    if (memcmp(a->dims, b->dims, (size_t)a->rank * sizeof(a->dims[0])) != 0) return false;
    if (a->nbytes == 0) return true;
    return a->data && b->data && memcmp(a->data, b->data, a->nbytes) == 0;
}

static uint64_t hash_tensor(uint64_t h, const ir_tensor *t)
{
    h = mix(mix(mix(h, (uint64_t)t->dtype), (uint64_t)t->rank), (uint64_t)t->nbytes);
    for (int i = 0; i < t->rank; i++) h = mix(h, (uint64_t)t->dims[i]);
    if (t->data) h = hash_bytes(h, t->data, t->nbytes < HASH_BYTES ? t->nbytes : HASH_BYTES);
    return h;
}

static bool same_value(const ir_value *a, const ir_value *b)
{
    if (a == b) return true;
    return a && b && by_content(a) && by_content(b) && same_tensor(&a->t, &b->t);
}

static uint64_t hash_value(uint64_t h, const ir_value *v)
{
    if (!v) return mix(h, 1);
    if (by_content(v)) return hash_tensor(mix(h, 2), &v->t);
    return mix(mix(h, 3), (uint64_t)(uintptr_t)v);
}

static bool same_attr(const ir_attr *a, const ir_attr *b)
{
    if (a->kind != b->kind || strcmp(a->name, b->name) != 0) return false;
    switch (a->kind) {
    case IR_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof(a->f)) == 0;
    case IR_ATTR_INT: return a->i == b->i;
    case IR_ATTR_STRING: return a->s_len == b->s_len && (a->s_len == 0 || memcmp(a->s, b->s, a->s_len) == 0);
    case IR_ATTR_TENSOR: return a->t && b->t && same_tensor(a->t, b->t);
    case IR_ATTR_FLOATS:
        return a->n == b->n && (a->n == 0 || memcmp(a->floats, b->floats, (size_t)a->n * sizeof(double)) == 0);
    case IR_ATTR_INTS:
        return a->n == b->n && (a->n == 0 || memcmp(a->ints, b->ints, (size_t)a->n * sizeof(int64_t)) == 0);
    case IR_ATTR_STRINGS:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (strcmp(a->strings[i], b->strings[i]) != 0) return false;
        return true;
    case IR_ATTR_TENSORS:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (!same_tensor(&a->tensors[i], &b->tensors[i])) return false;
        return true;
    default: return false; /* graphs (such nodes are never candidates), or undefined */
    }
}

static const ir_attr *find_attr(const ir_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

static bool same_node(const ir_node *a, const ir_node *b)
{
    if (a->op != b->op || strcmp(a->op_type, b->op_type) != 0 || strcmp(a->domain, b->domain) != 0 ||
        a->opset != b->opset || a->n_in != b->n_in || a->n_out != b->n_out || a->n_attrs != b->n_attrs)
        return false;
    for (int j = 0; j < a->n_in; j++)
        if (!same_value(a->in[j], b->in[j])) return false;
    for (int j = 0; j < a->n_out; j++)
        if ((a->out[j] == NULL) != (b->out[j] == NULL)) return false;
    for (int i = 0; i < a->n_attrs; i++) {
        const ir_attr *other = find_attr(b, a->attrs[i].name);
        if (!other || !same_attr(&a->attrs[i], other)) return false;
    }
    return true;
}

/* An attribute's name, kind and value (tensors by their shape and first
 * bytes): nodes that differ only in attributes, Slices of one tensor with
 * their bounds as attributes, land apart. */
static uint64_t hash_attr(const ir_attr *a)
{
    uint64_t h = mix(hash_str(0, a->name), (uint64_t)a->kind);
    switch (a->kind) {
    case IR_ATTR_FLOAT: return hash_bytes(h, &a->f, sizeof(a->f));
    case IR_ATTR_INT: return mix(h, (uint64_t)a->i);
    case IR_ATTR_STRING: return a->s_len ? hash_bytes(h, a->s, a->s_len) : h;
    case IR_ATTR_TENSOR: return a->t ? hash_tensor(h, a->t) : h;
    case IR_ATTR_FLOATS: return a->n ? hash_bytes(h, a->floats, (size_t)a->n * sizeof(double)) : h;
    case IR_ATTR_INTS: return a->n ? hash_bytes(h, a->ints, (size_t)a->n * sizeof(int64_t)) : h;
    case IR_ATTR_STRINGS:
        for (int i = 0; i < a->n; i++) h = hash_str(h, a->strings[i]);
        return h;
    default: return mix(h, (uint64_t)a->n);
    }
}

static uint64_t hash_node(const ir_node *n)
{
    uint64_t h = mix(hash_str(hash_str(mix(0, (uint64_t)n->op), n->op_type), n->domain), (uint64_t)n->n_in);
    for (int j = 0; j < n->n_in; j++) h = hash_value(h, n->in[j]);
    h = mix(h, (uint64_t)n->n_out);
    for (int j = 0; j < n->n_out; j++) h = mix(h, n->out[j] != NULL);
    /* attributes in any order: summed */
    uint64_t attrs = 0;
    for (int i = 0; i < n->n_attrs; i++) attrs += hash_attr(&n->attrs[i]);
    return mix(h, attrs);
}

/* Whether n may stand for, or be merged into, an identical node. */
static bool candidate(const ir_node *n)
{
    if (n->op == KILN_OP_COUNT || n->op == KILN_OP_DROPOUT || (ir_ops[n->op].flags & (IR_OPF_RANDOM | IR_OPF_SUBGRAPH)))
        return false;
    bool live = false, any = false;
    for (int j = 0; j < n->n_out; j++) {
        const ir_value *v = n->out[j];
        if (!v) continue;
        any = true;
        if (v->is_output || v->n_uses > 0) live = true;
        if (v->is_const) return false; /* folded */
    }
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].kind == IR_ATTR_GRAPH || n->attrs[i].kind == IR_ATTR_GRAPHS) return false;
    return any && live;
}

static bool has_graph_output(const ir_node *n)
{
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] && n->out[j]->is_output) return true;
    return false;
}

/* Points input slot j of n at repl[its value] where g's merges replaced
 * it (values of g only; n may be in a subgraph). */
static void rewire(const ir_graph *g, ir_value **repl, ir_node *n, int j)
{
    ir_value *v = n->in[j];
    if (!v || v->graph != g || !repl[v->id]) return;
    v->n_uses--;
    n->in[j] = repl[v->id];
    n->in[j]->n_uses++;
}

static void rewire_subgraph(const ir_graph *g, ir_value **repl, ir_graph *sub);

/* The readers of g's merged values inside n's subgraphs. */
static void rewire_subgraphs_of(const ir_graph *g, ir_value **repl, const ir_node *n)
{
    for (int a = 0; a < n->n_attrs; a++) {
        if (n->attrs[a].kind == IR_ATTR_GRAPH) rewire_subgraph(g, repl, n->attrs[a].g);
        if (n->attrs[a].kind == IR_ATTR_GRAPHS)
            for (int k = 0; k < n->attrs[a].n; k++) rewire_subgraph(g, repl, n->attrs[a].graphs[k]);
    }
}

static void rewire_subgraph(const ir_graph *g, ir_value **repl, ir_graph *sub)
{
    for (int i = 0; i < sub->n_nodes; i++) {
        ir_node *n = sub->nodes[i];
        for (int j = 0; j < n->n_in; j++) rewire(g, repl, n, j);
        rewire_subgraphs_of(g, repl, n);
    }
}

kiln_status pass_cse(ir_graph *g, int *merged, base_diag *d)
{
    *merged = 0;
    size_t cap = 16;
    while (cap < 2 * (size_t)g->n_nodes) cap *= 2;
    ir_node **table = base_calloc(cap, sizeof(*table));
    ir_value **repl = base_calloc((size_t)g->n_values + 1, sizeof(*repl));
    bool *gone = base_calloc((size_t)g->n_nodes + 1, sizeof(*gone));
    if (!table || !repl || !gone) {
        base_free(table);
        base_free(repl);
        base_free(gone);
        return base_diag_add(d, KILN_ERR_OOM, "out of memory looking for repeated nodes");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = g->nodes[i];
        /* readers of a merged node's outputs read the kept node's (the
         * kept one comes first: the order stays topological) */
        for (int j = 0; j < n->n_in; j++) rewire(g, repl, n, j);
        if (!candidate(n)) continue;
        size_t at = (size_t)hash_node(n) & (cap - 1);
        while (table[at] && !same_node(table[at], n)) at = (at + 1) & (cap - 1);
        if (!table[at]) {
            table[at] = n;
            continue;
        }
        if (has_graph_output(n)) continue;
        const ir_node *kept = table[at];
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j]) repl[n->out[j]->id] = kept->out[j];
        /* n leaves the graph: it reads nothing any more */
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j]) n->in[j]->n_uses--;
        gone[i] = true;
        (*merged)++;
    }
    if (*merged) {
        /* readers in subgraphs (a subgraph's own outputs never name a merged
         * value: a value a subgraph returns is a graph output, never merged) */
        for (int i = 0; i < g->n_nodes; i++)
            if (!gone[i]) rewire_subgraphs_of(g, repl, g->nodes[i]);
        /* the merged nodes out of the list (still in topological order) */
        int kept = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            ir_node *n = g->nodes[i];
            if (gone[i]) {
                for (int j = 0; j < n->n_out; j++)
                    if (n->out[j]) n->out[j]->producer = NULL;
                continue;
            }
            n->id = kept;
            g->nodes[kept++] = n;
        }
        g->n_nodes = kept;
    }
    base_free(table);
    base_free(repl);
    base_free(gone);
    return KILN_OK;
}
