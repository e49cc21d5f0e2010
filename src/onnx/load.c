/*
 * load.c: ONNX ModelProto -> IR graph.
 *
 * Two passes per graph: first every name a graph defines (inputs,
 * initializers, node outputs) enters its scope, then node inputs and
 * subgraphs are resolved against the scope chain, so nodes out of order and
 * subgraphs reading outer values both work. Then the graph is sorted
 * (finding cycles) and verified.
 */
#include "onnx/onnx-impl.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>

/* ---- scopes: name -> value, chained to the enclosing graph's scope ---------- */

typedef struct scope_entry {
    const char *name;
    ir_value *v;
    struct scope_entry *next;
} scope_entry;

typedef struct scope {
    scope_entry **buckets;
    size_t n_buckets;
    const struct scope *parent;
    base_arena *a;
} scope;

static kiln_status scope_init(scope *s, base_arena *a, const scope *parent, size_t expect)
{
    size_t n = 16;
    while (n < expect * 2) n *= 2;
    s->buckets = base_arena_alloc(a, n * sizeof(scope_entry *));
    if (!s->buckets) return KILN_ERR_OOM;
    s->n_buckets = n;
    s->parent = parent;
    s->a = a;
    return KILN_OK;
}

static ir_value *scope_find_local(const scope *s, const char *name)
{
    size_t h = base_hash_str(name) & (s->n_buckets - 1);
    for (scope_entry *e = s->buckets[h]; e; e = e->next)
        if (strcmp(e->name, name) == 0) return e->v;
    return NULL;
}

static ir_value *scope_find(const scope *s, const char *name)
{
    for (; s; s = s->parent) {
        ir_value *v = scope_find_local(s, name);
        if (v) return v;
    }
    return NULL;
}

static kiln_status scope_add(scope *s, ir_value *v)
{
    scope_entry *e = base_arena_alloc(s->a, sizeof(*e));
    if (!e) return KILN_ERR_OOM;
    size_t h = base_hash_str(v->name) & (s->n_buckets - 1);
    e->name = v->name;
    e->v = v;
    e->next = s->buckets[h];
    s->buckets[h] = e;
    return KILN_OK;
}

/* ---- types ------------------------------------------------------------------- */

static kiln_status import_type(onnx_ctx *c, const Onnx__ValueInfoProto *vi, ir_value *v, const char *what)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp) return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s '%s' has no type", what, v->name);
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        const char *kind = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE   ? "a sequence"
                           : tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE      ? "a map"
                           : tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "an optional"
                           : tp->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE
                               ? "a sparse tensor"
                               : "of unknown kind";
        return base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "%s '%s' is %s; kiln supports dense tensors only", what,
                             v->name, kind);
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt || !tt->has_elem_type || tt->elem_type <= 0 || tt->elem_type >= KILN_DTYPE_COUNT)
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s '%s' has an unknown element type", what, v->name);
    v->t.dtype = (kiln_dtype)tt->elem_type;
    if (!ir_dtype_is_numeric(v->t.dtype))
        return base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "%s '%s' has dtype %s, which kiln does not support", what,
                             v->name, kiln_dtype_name(v->t.dtype));
    if (!tt->shape) { /* rank unknown */
        v->t.rank = -1;
        return KILN_OK;
    }
    if (tt->shape->n_dim > IR_MAX_RANK)
        return base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "%s '%s' has rank %zu; kiln supports up to %d", what,
                             v->name, tt->shape->n_dim, IR_MAX_RANK);
    v->t.rank = (int)tt->shape->n_dim;
    bool known = true;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dm->dim_value < 0 || dm->dim_value > ONNX_MAX_DIM)
                return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s '%s': dimension %zu is %lld", what,
                                     v->name, i, (long long)dm->dim_value);
            v->t.dims[i] = dm->dim_value;
        } else {
            v->t.dims[i] = -1; /* symbolic: bound when inputs are given */
            known = false;
        }
    }
    v->shape_known = known;
    return KILN_OK;
}

/* ---- attributes ----------------------------------------------------------------- */

static kiln_status import_graph(onnx_ctx *c, const Onnx__GraphProto *gp, ir_graph *g, const scope *parent,
                                int depth);

/* Old models omit AttributeProto.type; infer it from the field that is set. */
static int attr_type(const Onnx__AttributeProto *ap)
{
    if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return ap->type;
    if (ap->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (ap->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (ap->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (ap->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (ap->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (ap->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (ap->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (ap->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    if (ap->n_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
    if (ap->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static kiln_status import_attr(onnx_ctx *c, const Onnx__AttributeProto *ap, ir_attr *at, const char *lb,
                               ir_graph *g, const scope *sc, int depth)
{
    base_arena *a = g->arena;
    if (!ap->name || !ap->name[0])
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s: attribute without a name", lb);
    at->name = base_arena_strdup(a, ap->name);
    if (!at->name) return KILN_ERR_OOM;
    if (ap->ref_attr_name && ap->ref_attr_name[0])
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                             "%s: attribute '%s' refers to a function attribute outside a function", lb, ap->name);
    switch (attr_type(ap)) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        at->kind = IR_ATTR_FLOAT;
        at->f = ap->f;
        return KILN_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        at->kind = IR_ATTR_INT;
        at->i = ap->i;
        return KILN_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        at->kind = IR_ATTR_STRING;
        at->s = base_arena_strndup(a, ap->s.data ? (const char *)ap->s.data : "", ap->s.len);
        at->s_len = ap->s.len;
        return at->s ? KILN_OK : KILN_ERR_OOM;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        at->kind = IR_ATTR_TENSOR;
        if (!ap->t) return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s: tensor attribute '%s' is empty", lb, ap->name);
        at->t = base_arena_alloc(a, sizeof(ir_tensor));
        if (!at->t) return KILN_ERR_OOM;
        return onnx_tensor_from_proto(c, ap->t, a, at->t);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
        at->kind = IR_ATTR_GRAPH;
        if (!ap->g) return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s: graph attribute '%s' is empty", lb, ap->name);
        at->g = ir_graph_new(a, g, ap->g->name ? ap->g->name : ap->name);
        if (!at->g) return KILN_ERR_OOM;
        return import_graph(c, ap->g, at->g, sc, depth + 1);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        at->kind = IR_ATTR_FLOATS;
        at->n = (int)ap->n_floats;
        at->floats = base_arena_alloc(a, (ap->n_floats + 1) * sizeof(double));
        if (!at->floats) return KILN_ERR_OOM;
        for (size_t i = 0; i < ap->n_floats; i++) at->floats[i] = ap->floats[i];
        return KILN_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        at->kind = IR_ATTR_INTS;
        at->n = (int)ap->n_ints;
        at->ints = base_arena_alloc(a, (ap->n_ints + 1) * sizeof(int64_t));
        if (!at->ints) return KILN_ERR_OOM;
        if (ap->n_ints) memcpy(at->ints, ap->ints, ap->n_ints * sizeof(int64_t));
        return KILN_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        at->kind = IR_ATTR_STRINGS;
        at->n = (int)ap->n_strings;
        at->strings = base_arena_alloc(a, (ap->n_strings + 1) * sizeof(char *));
        if (!at->strings) return KILN_ERR_OOM;
        for (size_t i = 0; i < ap->n_strings; i++) {
            at->strings[i] = base_arena_strndup(a, ap->strings[i].data ? (const char *)ap->strings[i].data : "",
                                                ap->strings[i].len);
            if (!at->strings[i]) return KILN_ERR_OOM;
        }
        return KILN_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
        at->kind = IR_ATTR_TENSORS;
        at->n = (int)ap->n_tensors;
        at->tensors = base_arena_alloc(a, (ap->n_tensors + 1) * sizeof(ir_tensor));
        if (!at->tensors) return KILN_ERR_OOM;
        for (size_t i = 0; i < ap->n_tensors; i++) KILN_TRY(onnx_tensor_from_proto(c, ap->tensors[i], a, &at->tensors[i]));
        return KILN_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        at->kind = IR_ATTR_GRAPHS;
        at->n = (int)ap->n_graphs;
        at->graphs = base_arena_alloc(a, (ap->n_graphs + 1) * sizeof(ir_graph *));
        if (!at->graphs) return KILN_ERR_OOM;
        for (size_t i = 0; i < ap->n_graphs; i++) {
            at->graphs[i] = ir_graph_new(a, g, ap->graphs[i]->name ? ap->graphs[i]->name : ap->name);
            if (!at->graphs[i]) return KILN_ERR_OOM;
            KILN_TRY(import_graph(c, ap->graphs[i], at->graphs[i], sc, depth + 1));
        }
        return KILN_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
        /* Kept as an attribute kiln cannot read: an op that needs it says so. */
        at->kind = IR_ATTR_UNDEF;
        return KILN_OK;
    default:
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s: attribute '%s' has no valid type", lb, ap->name);
    }
}

/* ---- graphs ------------------------------------------------------------------------ */

static kiln_status define(onnx_ctx *c, scope *sc, ir_value *v, const char *what)
{
    if (scope_find_local(sc, v->name))
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "value '%s' is defined twice (again as %s)", v->name,
                             what);
    return scope_add(sc, v);
}

static kiln_status import_graph(onnx_ctx *c, const Onnx__GraphProto *gp, ir_graph *g, const scope *parent,
                                int depth)
{
    if (depth > ONNX_MAX_DEPTH)
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "subgraphs nested deeper than %d", ONNX_MAX_DEPTH);
    kiln_status st = KILN_OK;
    scope sc;
    KILN_TRY(scope_init(&sc, g->arena, parent, gp->n_initializer + gp->n_input + gp->n_node * 2));

    /* initializers */
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !tp->name[0]) {
            st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "graph '%s': initializer %zu has no name", g->name, i);
            continue;
        }
        ir_value *v = ir_graph_add_value(g, tp->name);
        if (!v) return KILN_ERR_OOM;
        kiln_status s = onnx_tensor_from_proto(c, tp, g->arena, &v->t);
        if (s == KILN_ERR_OOM) return s;
        /* A bad initializer is still defined, so its readers do not add
         * follow-on errors; the first error is the one returned. */
        v->is_const = s == KILN_OK;
        v->shape_known = s == KILN_OK;
        if (s != KILN_OK && st == KILN_OK) st = s;
        if (define(c, &sc, v, "an initializer") != KILN_OK && st == KILN_OK) st = KILN_ERR_INVALID_MODEL;
    }
    if (gp->n_sparse_initializer)
        st = base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "graph '%s': sparse initializers are not supported", g->name);

    /* inputs (an input named like an initializer is that initializer's default) */
    g->inputs = base_arena_alloc(g->arena, (gp->n_input + 1) * sizeof(ir_value *));
    if (!g->inputs) return KILN_ERR_OOM;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !vi->name[0]) {
            st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "graph '%s': input %zu has no name", g->name, i);
            continue;
        }
        if (scope_find_local(&sc, vi->name)) continue;
        ir_value *v = ir_graph_add_value(g, vi->name);
        if (!v) return KILN_ERR_OOM;
        v->is_input = true;
        /* Subgraph inputs may leave their type to the op that runs the body. */
        kiln_status s = depth > 0 && !vi->type ? KILN_OK : import_type(c, vi, v, "input");
        if (depth > 0 && !vi->type) v->t.rank = -1;
        if (s != KILN_OK) st = s;
        if (v->t.rank < 0) {
            /* Rank unknown: allowed for subgraph inputs, whose shapes come from the op. */
            if (depth == 0) st = base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "input '%s' has no shape", vi->name);
            v->t.rank = 0;
        }
        if (define(c, &sc, v, "an input") != KILN_OK) st = KILN_ERR_INVALID_MODEL;
        g->inputs[g->n_inputs++] = v;
    }

    /* pass 1: node outputs */
    ir_node **nodes = base_malloc((gp->n_node + 1) * sizeof(*nodes));
    if (!nodes) return KILN_ERR_OOM;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        nodes[i] = NULL;
        if (!np->op_type || !np->op_type[0]) {
            st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "graph '%s': node %zu ('%s') has no op type", g->name, i,
                               np->name ? np->name : "");
            continue;
        }
        if (np->n_input > 100000 || np->n_output > 100000 || np->n_attribute > 100000) {
            st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "graph '%s': node %zu has absurd arity", g->name, i);
            continue;
        }
        ir_node *n = ir_graph_add_node(g, np->name, np->op_type, np->domain, (int)np->n_input, (int)np->n_output);
        if (!n) {
            base_free(nodes);
            return KILN_ERR_OOM;
        }
        nodes[i] = n;
        if (n->opset == 0 && (!n->domain[0] || strcmp(n->domain, "ai.onnx") == 0))
            st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                               "node '%s' (%s) is in the default domain, but the model imports no default opset",
                               n->name, n->op_type);
        if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) {
            n->opset = 0;
            for (int k = 0; k < c->n_domains; k++)
                if (strcmp(c->domains[k].name, n->domain) == 0) n->opset = c->domains[k].version;
        }
        for (size_t j = 0; j < np->n_output; j++) {
            const char *nm = np->output[j];
            if (!nm || !nm[0]) continue; /* omitted optional output */
            ir_value *v = ir_graph_add_value(g, nm);
            if (!v) {
                base_free(nodes);
                return KILN_ERR_OOM;
            }
            v->producer = n;
            v->producer_slot = (int)j;
            n->out[j] = v;
            if (define(c, &sc, v, "a node output") != KILN_OK) st = KILN_ERR_INVALID_MODEL;
        }
    }

    /* pass 2: node inputs and attributes */
    char lb[256];
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        ir_node *n = nodes[i];
        if (!n) continue;
        ir_node_label(n, lb, sizeof(lb));
        for (size_t j = 0; j < np->n_input; j++) {
            const char *nm = np->input[j];
            if (!nm || !nm[0]) continue; /* omitted optional input */
            ir_value *v = scope_find(&sc, nm);
            if (!v) {
                st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                                   "%s: input '%s' is not defined by any node, initializer or graph input", lb, nm);
                continue;
            }
            v->n_uses++;
            n->in[j] = v;
        }
        n->attrs = base_arena_alloc(g->arena, (np->n_attribute + 1) * sizeof(ir_attr));
        if (!n->attrs) {
            base_free(nodes);
            return KILN_ERR_OOM;
        }
        for (size_t k = 0; k < np->n_attribute; k++) {
            kiln_status s = import_attr(c, np->attribute[k], &n->attrs[n->n_attrs], lb, g, &sc, depth);
            if (s == KILN_ERR_OOM) {
                base_free(nodes);
                return s;
            }
            if (s != KILN_OK) {
                st = s;
                continue;
            }
            for (int q = 0; q < n->n_attrs; q++)
                if (strcmp(n->attrs[q].name, n->attrs[n->n_attrs].name) == 0) {
                    st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "%s: attribute '%s' given twice", lb,
                                       n->attrs[q].name);
                    s = KILN_ERR_INVALID_MODEL;
                }
            if (s == KILN_OK) n->n_attrs++;
        }
    }
    base_free(nodes);

    /* outputs */
    g->outputs = base_arena_alloc(g->arena, (gp->n_output + 1) * sizeof(ir_value *));
    if (!g->outputs) return KILN_ERR_OOM;
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        ir_value *v = vi->name ? scope_find(&sc, vi->name) : NULL;
        if (!v) {
            st = base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "graph '%s': output '%s' is not produced by anything",
                               g->name, vi->name ? vi->name : "");
            continue;
        }
        if (vi->type && vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
            vi->type->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET)
            st = base_diag_add(c->d, KILN_ERR_UNSUPPORTED,
                               "graph '%s': output '%s' is not a tensor; kiln supports dense tensors only", g->name,
                               vi->name);
        /* The declared element type stands until inference knows better:
         * an output whose shape depends on data still has a dtype. */
        if (v->t.dtype == KILN_UNDEF && vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
            vi->type->tensor_type && vi->type->tensor_type->has_elem_type && vi->type->tensor_type->elem_type > 0 &&
            vi->type->tensor_type->elem_type < KILN_DTYPE_COUNT)
            v->t.dtype = (kiln_dtype)vi->type->tensor_type->elem_type;
        v->is_output = true;
        v->n_uses++;
        g->outputs[g->n_outputs++] = v;
    }
    if (st != KILN_OK) return st;
    KILN_TRY(ir_graph_sort(g, c->d));
    return ir_graph_verify(g, c->d);
}

/* ---- models -------------------------------------------------------------------------- */

static void free_model_proto(void *p) { onnx__model_proto__free_unpacked(p, NULL); }

kiln_status onnx_load_buffer(const void *buf, size_t n, const char *base_dir, ir_model **out, base_diag *d)
{
    *out = NULL;
    if (n == 0) return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the model file is empty");
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, n, buf);
    if (!mp)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "not a valid ONNX model: the protobuf data is truncated or corrupt");
    ir_model *m = ir_model_new();
    if (!m) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return KILN_ERR_OOM;
    }
    m->keep[0] = mp;
    m->keep_free[0] = free_model_proto;
    onnx_ctx c = {.model = m, .base_dir = base_dir, .d = d};
    kiln_status st = KILN_OK;
    m->ir_version = mp->has_ir_version ? (int)mp->ir_version : 0;
    m->producer = base_arena_strdup(&m->arena, mp->producer_name ? mp->producer_name : "");
    /* opsets */
    m->opset = -1;
    c.domains = base_arena_alloc(&m->arena, (mp->n_opset_import + 1) * sizeof(*c.domains));
    if (!m->producer || !c.domains) {
        st = KILN_ERR_OOM;
        goto fail;
    }
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = mp->opset_import[i];
        const char *dom = os->domain ? os->domain : "";
        if (!dom[0] || strcmp(dom, "ai.onnx") == 0) m->opset = os->version;
        c.domains[c.n_domains].name = dom;
        c.domains[c.n_domains++].version = (int)os->version;
    }
    if (m->opset < 0) {
        /* Very old models import nothing; others import only other domains
         * (then default-domain nodes are an error, found below). */
        if (mp->n_opset_import == 0 && m->ir_version >= 3) {
            st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "the model (IR version %d) imports no opset",
                               m->ir_version);
            goto fail;
        }
        m->opset = mp->n_opset_import == 0 ? 1 : 0;
    }
    if (m->opset > ONNX_MAX_OPSET) {
        st = base_diag_add(d, KILN_ERR_UNSUPPORTED, "the model uses ONNX opset %lld; kiln reads opsets 1 to %d",
                           (long long)m->opset, ONNX_MAX_OPSET);
        goto fail;
    }
    if (!mp->graph) {
        st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "the model has no graph");
        goto fail;
    }
    m->graph = ir_graph_new(&m->arena, NULL, mp->graph->name ? mp->graph->name : "main");
    if (!m->graph) {
        st = KILN_ERR_OOM;
        goto fail;
    }
    m->graph->opset = (int)m->opset;
    st = import_graph(&c, mp->graph, m->graph, NULL, 0);
    if (st != KILN_OK) goto fail;
    base_free(c.map_paths);
    *out = m;
    return KILN_OK;
fail:
    if (st == KILN_ERR_OOM) base_diag_add(d, st, "out of memory while loading the model");
    base_free(c.map_paths);
    ir_model_free(m);
    return st;
}

kiln_status onnx_load_file(const char *path, ir_model **out, base_diag *d)
{
    *out = NULL;
    base_file_map fm;
    KILN_TRY(base_file_map_open(path, &fm, d));
    char *dup = strdup(path);
    if (!dup) {
        base_file_map_close(&fm);
        return KILN_ERR_OOM;
    }
    const char *dir = dirname(dup);
    kiln_status st = onnx_load_buffer(fm.data, fm.size, dir, out, d);
    base_file_map_close(&fm);
    free(dup);
    if (st == KILN_OK) (*out)->path = base_arena_strdup(&(*out)->arena, path);
    return st;
}
