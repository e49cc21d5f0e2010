/*
 * export.c: IR -> serialized ONNX ModelProto, the inverse of load.c.
 *
 * The `c` target runs ops without a C template in fallback segments: a run of
 * nodes exported here into the artifact and loaded back with onnx_load_buffer
 * at run time, where the reference interpreter executes it. So a round trip
 * must keep the semantics exactly: every attribute kind, subgraphs and the
 * values they read from enclosing graphs, constants bit for bit.
 *
 * The protobuf-c structs are built in one arena and point into the IR (names,
 * tensor data) rather than copying it; packing reads them once and the arena
 * goes away.
 *
 * Names: ONNX refers to values by name, the IR by pointer. Every exported
 * value gets a name unique across the whole exported model (its own name when
 * free, else a suffixed one), so scoping on reload cannot resolve a reference
 * to the wrong value even when the IR has values sharing a name (a subgraph
 * value shadowing an outer one, or passes that create values freely).
 *
 * Which values the exported model defines, per graph:
 *   top level   the listed inputs; constants read but not produced by an
 *               exported node (initializers); outputs of exported nodes, in
 *               the order given, so a read of a later node's output is an
 *               error;
 *   subgraphs   exported whole: their inputs, their node outputs, and their
 *               constants that are read (initializers of that subgraph).
 * A subgraph's read of a value of an enclosing graph resolves in the graph
 * that value belongs to; values of graphs outside the export (the enclosing
 * graphs of g when g is itself a subgraph) follow the top-level rule.
 */
#include "onnx/onnx-impl.h"

#include <stdio.h>
#include <string.h>

/* raw_data is little endian; kiln's tensors are in host order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "export.c writes tensors as raw_data, which ONNX defines as little endian"
#endif

/* IR version written into the model (onnx 1.12: IR 8 with opsets up to 17/18). */
#define EXPORT_IR_VERSION 8

/* ---- a small hash table: pointer or string key -> entry ------------------- */

typedef struct entry {
    const void *key;    /* a pointer, or a NUL-terminated string */
    const char *name;   /* value entries: the exported name */
    bool defined;       /* value entries: defined in the model so far */
    struct entry *next;
} entry;

typedef struct table {
    entry **buckets;
    size_t n_buckets, n;
    bool str_keys;
} table;

static uint64_t key_hash(const table *t, const void *key)
{
    return t->str_keys ? base_hash_str(key) : base_hash_bytes(&key, sizeof(key), 0);
}

static bool key_eq(const table *t, const void *a, const void *b)
{
    return t->str_keys ? strcmp(a, b) == 0 : a == b;
}

static entry *table_find(const table *t, const void *key)
{
    if (!t->n_buckets) return NULL;
    for (entry *e = t->buckets[key_hash(t, key) & (t->n_buckets - 1)]; e; e = e->next)
        if (key_eq(t, e->key, key)) return e;
    return NULL;
}

/* Adds key (absent) and returns its entry; NULL on OOM. Buckets live on the
 * heap (table_free), entries in the arena. */
static entry *table_add(table *t, base_arena *a, const void *key)
{
    if (t->n + 1 > t->n_buckets) {
        size_t nb = t->n_buckets ? t->n_buckets * 2 : 64;
        entry **b = base_calloc(nb, sizeof(entry *));
        if (!b) return NULL;
        for (size_t i = 0; i < t->n_buckets; i++)
            for (entry *e = t->buckets[i], *next; e; e = next) {
                next = e->next;
                size_t h = key_hash(t, e->key) & (nb - 1);
                e->next = b[h];
                b[h] = e;
            }
        base_free(t->buckets);
        t->buckets = b;
        t->n_buckets = nb;
    }
    entry *e = base_arena_alloc(a, sizeof(*e));
    if (!e) return NULL;
    size_t h = key_hash(t, key) & (t->n_buckets - 1);
    e->key = key;
    e->next = t->buckets[h];
    t->buckets[h] = e;
    t->n++;
    return e;
}

static void table_free(table *t) { base_free(t->buckets); }

/* ---- growable pointer lists in the arena --------------------------------- */

typedef struct plist {
    void **items;
    size_t n, cap;
} plist;

static bool plist_push(plist *l, base_arena *a, void *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        void **items = base_arena_alloc(a, cap * sizeof(void *));
        if (!items) return false;
        if (l->n) memcpy(items, l->items, l->n * sizeof(void *));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = p;
    return true;
}

/* ---- the exporter ----------------------------------------------------------- */

/* One graph being built: the top graph or a subgraph, chained outwards. */
typedef struct gbuild {
    const ir_graph *g;
    const struct gbuild *parent; /* the builder of the enclosing graph; NULL at top */
    const char *where;           /* "" at top, else " in subgraph 'body' of node 'loop' (Loop)..." */
    plist nodes, inits;          /* Onnx__NodeProto *, Onnx__TensorProto * */
} gbuild;

typedef struct exporter {
    base_arena a;      /* every protobuf struct of the model */
    base_diag *d;
    kiln_status st;    /* first error; the walk goes on to report the others */
    table values;      /* ir_value * -> name, defined */
    table names;       /* exported names in use */
    table nodes;       /* the exported top-level nodes */
    plist domains;     /* Onnx__OperatorSetIdProto * of non-default domains */
    int default_opset; /* highest opset of default-domain nodes */
} exporter;

static kiln_status fail(exporter *x, kiln_status st, const char *fmt, ...) KILN_PRINTF(3, 4);
static kiln_status fail(exporter *x, kiln_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    base_diag_vadd(x->d, st, fmt, ap);
    va_end(ap);
    if (x->st == KILN_OK) x->st = st;
    return st;
}

#define OOM_IF(cond)                              \
    do {                                          \
        if (cond) return KILN_ERR_OOM;            \
    } while (0)

/* The value's entry, giving it a model-unique name on first sight. */
static kiln_status value_entry(exporter *x, const ir_value *v, entry **out)
{
    entry *e = table_find(&x->values, v);
    if (!e) {
        const char *base = v->name && v->name[0] ? v->name : "v";
        const char *name = base;
        char *buf = NULL;
        for (long k = 1; table_find(&x->names, name); k++) {
            buf = base_arena_printf(&x->a, "%s__%ld", base, k);
            OOM_IF(!buf);
            name = buf;
        }
        OOM_IF(!table_add(&x->names, &x->a, name));
        e = table_add(&x->values, &x->a, v);
        OOM_IF(!e);
        e->name = name;
    }
    *out = e;
    return KILN_OK;
}

static kiln_status tensor_proto(exporter *x, const ir_tensor *t, const char *name, const char *what,
                                Onnx__TensorProto **out)
{
    *out = NULL;
    size_t esize = ir_dtype_size(t->dtype);
    if (esize == 0 || !ir_dtype_is_numeric(t->dtype))
        return fail(x, KILN_ERR_UNSUPPORTED, "%s: %s tensors cannot be exported", what, kiln_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > IR_MAX_RANK)
        return fail(x, KILN_ERR_INVALID_ARG, "%s: rank %d", what, t->rank);
    int64_t numel = ir_numel(t);
    if (numel < 0 || t->nbytes != (size_t)numel * esize || (numel > 0 && !t->data)) {
        char ty[160];
        return fail(x, KILN_ERR_INVALID_ARG, "%s: %s holds %zu bytes%s", what, ir_tensor_type_str(t, ty, sizeof(ty)),
                    t->nbytes, t->data ? "" : " and no data");
    }
    Onnx__TensorProto *tp = base_arena_alloc(&x->a, sizeof(*tp));
    int64_t *dims = base_arena_alloc(&x->a, (size_t)(t->rank + 1) * sizeof(int64_t));
    OOM_IF(!tp || !dims);
    onnx__tensor_proto__init(tp);
    if (name) tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    memcpy(dims, t->dims, (size_t)t->rank * sizeof(int64_t));
    tp->n_dims = (size_t)t->rank;
    tp->dims = dims;
    tp->has_raw_data = 1;
    tp->raw_data.len = t->nbytes;
    tp->raw_data.data = t->nbytes ? t->data : NULL; /* packed straight from the IR */
    *out = tp;
    return KILN_OK;
}

/* A ValueInfoProto for v under its exported name. Known shapes are written in
 * full; graph inputs of unknown shape keep their rank with symbolic dims
 * where the loader gave one (dims -1); otherwise only the element type. */
static kiln_status value_info(exporter *x, const ir_value *v, Onnx__ValueInfoProto **out)
{
    entry *e;
    KILN_TRY(value_entry(x, v, &e));
    Onnx__ValueInfoProto *vi = base_arena_alloc(&x->a, sizeof(*vi));
    OOM_IF(!vi);
    onnx__value_info_proto__init(vi);
    vi->name = (char *)e->name;
    *out = vi;
    if (v->t.dtype == KILN_UNDEF) return KILN_OK; /* untyped (subgraph inputs may be) */
    Onnx__TypeProto *tp = base_arena_alloc(&x->a, sizeof(*tp));
    Onnx__TypeProto__Tensor *tt = base_arena_alloc(&x->a, sizeof(*tt));
    OOM_IF(!tp || !tt);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)v->t.dtype;
    vi->type = tp;
    bool symbolic = false;
    for (int i = 0; v->is_input && i < v->t.rank && i < IR_MAX_RANK; i++) symbolic |= v->t.dims[i] < 0;
    if (!v->shape_known && !symbolic) return KILN_OK;
    if (v->t.rank < 0 || v->t.rank > IR_MAX_RANK) return KILN_OK;
    Onnx__TensorShapeProto *sp = base_arena_alloc(&x->a, sizeof(*sp));
    Onnx__TensorShapeProto__Dimension **dims =
        base_arena_alloc(&x->a, (size_t)(v->t.rank + 1) * sizeof(*dims));
    OOM_IF(!sp || !dims);
    onnx__tensor_shape_proto__init(sp);
    for (int i = 0; i < v->t.rank; i++) {
        dims[i] = base_arena_alloc(&x->a, sizeof(**dims));
        OOM_IF(!dims[i]);
        onnx__tensor_shape_proto__dimension__init(dims[i]);
        if (v->t.dims[i] >= 0) {
            dims[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dims[i]->dim_value = v->t.dims[i];
        } /* else: an unnamed symbolic dim */
    }
    sp->n_dim = (size_t)v->t.rank;
    sp->dim = dims;
    tt->shape = sp;
    return KILN_OK;
}

/* Makes v (read by `reader` as its `role`: a node's input, a graph's output)
 * defined where the reading builder b can see it, adding an initializer when
 * v is a constant not yet in the model. Errors name the reader and the value. */
static kiln_status resolve(exporter *x, gbuild *b, const ir_value *v, const char *reader, const char *role)
{
    entry *e;
    KILN_TRY(value_entry(x, v, &e));
    if (e->defined) return KILN_OK;
    gbuild *owner = b;
    while (owner->parent && owner->g != v->graph) owner = (gbuild *)owner->parent;
    /* owner: the subgraph v belongs to, else the top builder (v of g, or of a
     * graph outside the export) */
    if (owner->parent == NULL && v->producer && table_find(&x->nodes, v->producer)) {
        char lb[256];
        return fail(x, KILN_ERR_INVALID_ARG, "%s: %s '%s' is produced by %s, which comes later in the node list",
                    reader, role, v->name, ir_node_label(v->producer, lb, sizeof(lb)));
    }
    if (!v->is_const)
        return fail(x, KILN_ERR_INVALID_ARG,
                    "%s: %s '%s' is neither produced by an earlier exported node, nor listed in the inputs, "
                    "nor constant",
                    reader, role, v->name);
    char what[300];
    snprintf(what, sizeof(what), "constant '%s'", v->name);
    Onnx__TensorProto *tp;
    KILN_TRY(tensor_proto(x, &v->t, e->name, what, &tp));
    OOM_IF(!plist_push(&owner->inits, &x->a, tp));
    e->defined = true;
    return KILN_OK;
}

static kiln_status note_domain(exporter *x, const ir_node *n)
{
    if (!n->domain[0] || strcmp(n->domain, "ai.onnx") == 0) {
        if (n->opset > x->default_opset) x->default_opset = n->opset;
        return KILN_OK;
    }
    if (n->opset <= 0) return KILN_OK; /* not imported by the source model either */
    for (size_t i = 0; i < x->domains.n; i++) {
        Onnx__OperatorSetIdProto *os = x->domains.items[i];
        if (strcmp(os->domain, n->domain) == 0) {
            if (n->opset > os->version) os->version = n->opset;
            return KILN_OK;
        }
    }
    Onnx__OperatorSetIdProto *os = base_arena_alloc(&x->a, sizeof(*os));
    OOM_IF(!os);
    onnx__operator_set_id_proto__init(os);
    os->domain = (char *)n->domain;
    os->has_version = 1;
    os->version = n->opset;
    OOM_IF(!plist_push(&x->domains, &x->a, os));
    return KILN_OK;
}

static kiln_status subgraph_proto(exporter *x, gbuild *parent, const ir_graph *g, const char *lb,
                                  Onnx__GraphProto **out);

/* lb: the node's label, with where it sits. */
static kiln_status attr_proto(exporter *x, gbuild *b, const ir_attr *at, const char *lb, Onnx__AttributeProto **out)
{
    Onnx__AttributeProto *ap = base_arena_alloc(&x->a, sizeof(*ap));
    OOM_IF(!ap);
    onnx__attribute_proto__init(ap);
    *out = ap;
    ap->name = (char *)at->name;
    ap->has_type = 1;
    char what[1400];
    snprintf(what, sizeof(what), "%s: attribute '%s'", lb, at->name);
    switch (at->kind) {
    case IR_ATTR_FLOAT:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        ap->has_f = 1;
        ap->f = (float)at->f; /* read from a float: exact */
        return KILN_OK;
    case IR_ATTR_INT:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        ap->has_i = 1;
        ap->i = at->i;
        return KILN_OK;
    case IR_ATTR_STRING:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        ap->has_s = 1;
        ap->s.data = (uint8_t *)at->s;
        ap->s.len = at->s ? at->s_len : 0;
        return KILN_OK;
    case IR_ATTR_TENSOR:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        if (!at->t) return fail(x, KILN_ERR_INVALID_ARG, "%s has no tensor", what);
        return tensor_proto(x, at->t, NULL, what, &ap->t);
    case IR_ATTR_GRAPH:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        if (!at->g) return fail(x, KILN_ERR_INVALID_ARG, "%s has no graph", what);
        return subgraph_proto(x, b, at->g, lb, &ap->g);
    case IR_ATTR_FLOATS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        ap->floats = base_arena_alloc(&x->a, ((size_t)at->n + 1) * sizeof(float));
        OOM_IF(!ap->floats);
        for (int i = 0; i < at->n; i++) ap->floats[i] = (float)at->floats[i];
        ap->n_floats = (size_t)at->n;
        return KILN_OK;
    case IR_ATTR_INTS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        ap->ints = at->ints;
        ap->n_ints = at->ints ? (size_t)at->n : 0;
        return KILN_OK;
    case IR_ATTR_STRINGS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        ap->strings = base_arena_alloc(&x->a, ((size_t)at->n + 1) * sizeof(ProtobufCBinaryData));
        OOM_IF(!ap->strings);
        for (int i = 0; i < at->n; i++) {
            /* the IR keeps list strings NUL-terminated, without lengths */
            ap->strings[i].data = (uint8_t *)at->strings[i];
            ap->strings[i].len = at->strings[i] ? strlen(at->strings[i]) : 0;
        }
        ap->n_strings = (size_t)at->n;
        return KILN_OK;
    case IR_ATTR_TENSORS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
        ap->tensors = base_arena_alloc(&x->a, ((size_t)at->n + 1) * sizeof(Onnx__TensorProto *));
        OOM_IF(!ap->tensors);
        for (int i = 0; i < at->n; i++) {
            kiln_status s = tensor_proto(x, &at->tensors[i], NULL, what, &ap->tensors[i]);
            if (s != KILN_OK) return s;
        }
        ap->n_tensors = (size_t)at->n;
        return KILN_OK;
    case IR_ATTR_GRAPHS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
        ap->graphs = base_arena_alloc(&x->a, ((size_t)at->n + 1) * sizeof(Onnx__GraphProto *));
        OOM_IF(!ap->graphs);
        for (int i = 0; i < at->n; i++) {
            if (!at->graphs[i]) return fail(x, KILN_ERR_INVALID_ARG, "%s: graph %d is missing", what, i);
            KILN_TRY(subgraph_proto(x, b, at->graphs[i], lb, &ap->graphs[i]));
        }
        ap->n_graphs = (size_t)at->n;
        return KILN_OK;
    default:
        /* The loader keeps sparse-tensor attributes as UNDEF: their content is gone. */
        return fail(x, KILN_ERR_UNSUPPORTED, "%s is of kind %s, which cannot be exported", what,
                    ir_attr_kind_name(at->kind));
    }
}

/* Validation errors are recorded in x->st and the walk goes on, so one call
 * reports them all; only OOM stops it. */
#define KEEP_GOING(expr)                                \
    do {                                                \
        kiln_status kg_ = (expr);                       \
        if (kg_ == KILN_ERR_OOM) return kg_;            \
    } while (0)

/* A NodeProto for n, reading through builder b. */
static kiln_status node_proto(exporter *x, gbuild *b, const ir_node *n)
{
    char lb[1024], nl[256];
    snprintf(lb, sizeof(lb), "%s%s", ir_node_label(n, nl, sizeof(nl)), b->where);
    Onnx__NodeProto *np = base_arena_alloc(&x->a, sizeof(*np));
    OOM_IF(!np);
    onnx__node_proto__init(np);
    np->name = (char *)n->name;
    np->op_type = (char *)n->op_type;
    if (n->domain[0]) np->domain = (char *)n->domain;
    np->input = base_arena_alloc(&x->a, (size_t)(n->n_in + 1) * sizeof(char *));
    np->output = base_arena_alloc(&x->a, (size_t)(n->n_out + 1) * sizeof(char *));
    np->attribute = base_arena_alloc(&x->a, (size_t)(n->n_attrs + 1) * sizeof(*np->attribute));
    OOM_IF(!np->input || !np->output || !np->attribute);
    for (int j = 0; j < n->n_in; j++) {
        np->input[j] = ""; /* an omitted optional input */
        const ir_value *v = n->in[j];
        if (!v) continue;
        entry *e;
        KILN_TRY(value_entry(x, v, &e));
        np->input[j] = (char *)e->name;
        KEEP_GOING(resolve(x, b, v, lb, "input"));
    }
    np->n_input = (size_t)n->n_in;
    /* Attributes before outputs: a subgraph cannot read its own node's outputs. */
    for (int k = 0; k < n->n_attrs; k++) KEEP_GOING(attr_proto(x, b, &n->attrs[k], lb, &np->attribute[k]));
    np->n_attribute = (size_t)n->n_attrs;
    for (int j = 0; j < n->n_out; j++) {
        np->output[j] = "";
        const ir_value *v = n->out[j];
        if (!v) continue;
        entry *e;
        KILN_TRY(value_entry(x, v, &e));
        np->output[j] = (char *)e->name;
        if (b->parent) continue; /* subgraph outputs were defined up front */
        if (e->defined)
            KEEP_GOING(fail(x, KILN_ERR_INVALID_ARG, "%s: output '%s' is produced by an earlier node too", lb,
                            v->name));
        e->defined = true;
    }
    np->n_output = (size_t)n->n_out;
    KILN_TRY(note_domain(x, n));
    OOM_IF(!plist_push(&b->nodes, &x->a, np));
    return KILN_OK;
}

static void finish_graph(gbuild *b, Onnx__GraphProto *gp)
{
    gp->node = (Onnx__NodeProto **)b->nodes.items;
    gp->n_node = b->nodes.n;
    gp->initializer = (Onnx__TensorProto **)b->inits.items;
    gp->n_initializer = b->inits.n;
}

/* A subgraph, exported whole: its inputs and node outputs are defined up
 * front (the loader resolves names in two passes, so order inside does not
 * matter); its reads of enclosing values resolve through the parent chain. */
static kiln_status subgraph_proto(exporter *x, gbuild *parent, const ir_graph *g, const char *lb,
                                  Onnx__GraphProto **out)
{
    gbuild b = {.g = g, .parent = parent, .where = base_arena_printf(&x->a, " in subgraph '%s' of %s", g->name, lb)};
    Onnx__GraphProto *gp = base_arena_alloc(&x->a, sizeof(*gp));
    OOM_IF(!gp || !b.where);
    onnx__graph_proto__init(gp);
    *out = gp;
    gp->name = (char *)(g->name && g->name[0] ? g->name : "body");
    gp->input = base_arena_alloc(&x->a, (size_t)(g->n_inputs + 1) * sizeof(*gp->input));
    gp->output = base_arena_alloc(&x->a, (size_t)(g->n_outputs + 1) * sizeof(*gp->output));
    OOM_IF(!gp->input || !gp->output);
    for (int i = 0; i < g->n_inputs; i++) {
        entry *e;
        KILN_TRY(value_entry(x, g->inputs[i], &e));
        e->defined = true;
        KILN_TRY(value_info(x, g->inputs[i], &gp->input[i]));
    }
    gp->n_input = (size_t)g->n_inputs;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i]->n_out; j++) {
            const ir_value *v = g->nodes[i]->out[j];
            entry *e;
            if (!v) continue;
            KILN_TRY(value_entry(x, v, &e));
            e->defined = true;
        }
    for (int i = 0; i < g->n_nodes; i++) KILN_TRY(node_proto(x, &b, g->nodes[i]));
    const char *what = b.where + 4; /* "subgraph '...' of node ..." */
    for (int i = 0; i < g->n_outputs; i++) {
        KEEP_GOING(resolve(x, &b, g->outputs[i], what, "output"));
        KILN_TRY(value_info(x, g->outputs[i], &gp->output[i]));
    }
    gp->n_output = (size_t)g->n_outputs;
    finish_graph(&b, gp);
    return KILN_OK;
}

static kiln_status check_args(exporter *x, const ir_graph *g, ir_node *const *nodes, int n_nodes,
                              ir_value *const *inputs, int n_inputs, ir_value *const *outputs, int n_outputs)
{
    if (!g) return fail(x, KILN_ERR_INVALID_ARG, "export: no graph");
    if (n_nodes < 0 || (n_nodes > 0 && !nodes))
        return fail(x, KILN_ERR_INVALID_ARG, "export: %d nodes given without a node list", n_nodes);
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return fail(x, KILN_ERR_INVALID_ARG, "export: %d inputs given without an input list", n_inputs);
    if (n_outputs <= 0 || !outputs)
        return fail(x, KILN_ERR_INVALID_ARG, "export: the model needs at least one output (%d given)", n_outputs);
    char lb[256];
    for (int i = 0; i < n_nodes; i++) {
        const ir_node *n = nodes[i];
        if (!n) {
            fail(x, KILN_ERR_INVALID_ARG, "export: node %d of the list is NULL", i);
            continue;
        }
        if (n->graph != g) {
            fail(x, KILN_ERR_INVALID_ARG, "export: %s is not a node of graph '%s'", ir_node_label(n, lb, sizeof(lb)),
                 g->name);
            continue;
        }
        if (table_find(&x->nodes, n)) {
            fail(x, KILN_ERR_INVALID_ARG, "export: %s is listed twice", ir_node_label(n, lb, sizeof(lb)));
            continue;
        }
        OOM_IF(!table_add(&x->nodes, &x->a, n));
    }
    for (int i = 0; i < n_inputs; i++) {
        const ir_value *v = inputs[i];
        if (!v) {
            fail(x, KILN_ERR_INVALID_ARG, "export: input %d of the list is NULL", i);
            continue;
        }
        if (!ir_dtype_is_numeric(v->t.dtype))
            fail(x, KILN_ERR_INVALID_ARG, "export: input '%s' has no known numeric dtype (%s)", v->name,
                 kiln_dtype_name(v->t.dtype));
        if (v->producer && table_find(&x->nodes, v->producer))
            fail(x, KILN_ERR_INVALID_ARG, "export: input '%s' is produced by exported %s", v->name,
                 ir_node_label(v->producer, lb, sizeof(lb)));
        for (int k = 0; k < i; k++)
            if (inputs[k] == v) fail(x, KILN_ERR_INVALID_ARG, "export: input '%s' is listed twice", v->name);
    }
    for (int i = 0; i < n_outputs; i++)
        if (!outputs[i]) fail(x, KILN_ERR_INVALID_ARG, "export: output %d of the list is NULL", i);
    return x->st;
}

static kiln_status build_model(exporter *x, const ir_graph *g, ir_node *const *nodes, int n_nodes,
                               ir_value *const *inputs, int n_inputs, ir_value *const *outputs, int n_outputs,
                               Onnx__ModelProto **out)
{
    KILN_TRY(check_args(x, g, nodes, n_nodes, inputs, n_inputs, outputs, n_outputs));
    Onnx__ModelProto *mp = base_arena_alloc(&x->a, sizeof(*mp));
    Onnx__GraphProto *gp = base_arena_alloc(&x->a, sizeof(*gp));
    OOM_IF(!mp || !gp);
    onnx__model_proto__init(mp);
    onnx__graph_proto__init(gp);
    gp->name = (char *)(g->name && g->name[0] ? g->name : "main");
    gp->input = base_arena_alloc(&x->a, (size_t)(n_inputs + 1) * sizeof(*gp->input));
    gp->output = base_arena_alloc(&x->a, (size_t)(n_outputs + 1) * sizeof(*gp->output));
    OOM_IF(!gp->input || !gp->output);

    /* The model's own inputs and outputs claim their names first. */
    entry *e;
    for (int i = 0; i < n_inputs; i++) {
        KILN_TRY(value_entry(x, inputs[i], &e));
        e->defined = true;
        KILN_TRY(value_info(x, inputs[i], &gp->input[i]));
    }
    gp->n_input = (size_t)n_inputs;
    for (int i = 0; i < n_outputs; i++) KILN_TRY(value_entry(x, outputs[i], &e));

    gbuild top = {.g = g, .where = ""};
    x->default_opset = g->opset;
    for (int i = 0; i < n_nodes; i++) KILN_TRY(node_proto(x, &top, nodes[i]));
    for (int i = 0; i < n_outputs; i++) {
        KEEP_GOING(resolve(x, &top, outputs[i], "export", "output"));
        KILN_TRY(value_info(x, outputs[i], &gp->output[i]));
    }
    gp->n_output = (size_t)n_outputs;
    finish_graph(&top, gp);
    if (x->st != KILN_OK) return x->st;

    /* opset imports: the default domain first, then the others the nodes use */
    Onnx__OperatorSetIdProto **os = base_arena_alloc(&x->a, (x->domains.n + 1) * sizeof(*os));
    OOM_IF(!os);
    size_t n_os = 0;
    if (x->default_opset > 0) {
        os[n_os] = base_arena_alloc(&x->a, sizeof(**os));
        OOM_IF(!os[n_os]);
        onnx__operator_set_id_proto__init(os[n_os]);
        os[n_os]->domain = "";
        os[n_os]->has_version = 1;
        os[n_os]->version = x->default_opset;
        n_os++;
    }
    for (size_t i = 0; i < x->domains.n; i++) os[n_os++] = x->domains.items[i];
    mp->has_ir_version = 1;
    mp->ir_version = EXPORT_IR_VERSION;
    mp->producer_name = "kiln";
    mp->producer_version = KILN_VERSION;
    mp->opset_import = os;
    mp->n_opset_import = n_os;
    mp->graph = gp;
    *out = mp;
    return KILN_OK;
}

kiln_status onnx_export_nodes(const ir_graph *g, ir_node *const *nodes, int n_nodes, ir_value *const *inputs,
                              int n_inputs, ir_value *const *outputs, int n_outputs, void **buf, size_t *n,
                              base_diag *d)
{
    if (!buf || !n) return base_diag_add(d, KILN_ERR_INVALID_ARG, "export: no output buffer");
    *buf = NULL;
    *n = 0;
    exporter x = {.d = d, .names = {.str_keys = true}};
    base_arena_init(&x.a);
    Onnx__ModelProto *mp = NULL;
    kiln_status st = build_model(&x, g, nodes, n_nodes, inputs, n_inputs, outputs, n_outputs, &mp);
    if (st == KILN_OK) {
        size_t size = onnx__model_proto__get_packed_size(mp);
        void *p = base_malloc(size);
        if (p) {
            size_t packed = onnx__model_proto__pack(mp, p);
            KILN_ASSERT(packed == size);
            *buf = p;
            *n = size;
        } else {
            st = KILN_ERR_OOM;
        }
    }
    if (st == KILN_ERR_OOM) base_diag_add(d, st, "out of memory while exporting the model");
    table_free(&x.values);
    table_free(&x.names);
    table_free(&x.nodes);
    base_arena_free(&x.a);
    return st;
}

kiln_status onnx_export_graph(const ir_graph *g, void **buf, size_t *n, base_diag *d)
{
    if (!g) {
        if (buf) *buf = NULL;
        if (n) *n = 0;
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "export: no graph");
    }
    return onnx_export_nodes(g, g->nodes, g->n_nodes, g->inputs, g->n_inputs, g->outputs, g->n_outputs, buf, n,
                             d);
}
