/*
 * ir.h: kiln's graph IR.
 *
 * A graph is values and nodes in one arena. A value has a dtype and a static
 * shape (once inferred) and, when it is constant, its data. A node is an op
 * from the registry (ops.def) with attributes, input values and output values.
 * Subgraphs (If/Loop/Scan bodies) are graphs whose parent is the enclosing
 * graph; their nodes may read values of any enclosing graph.
 *
 * Pipeline position: onnx/ builds it, pass/ rewrites it, ir/interp runs it,
 * targets lower it.
 */
#ifndef KILN_IR_H
#define KILN_IR_H

#include "base/base.h"

#define IR_MAX_RANK 8

/* ---- op registry (ops.def) ----------------------------------------------- */

/* Op flags: what passes and targets may assume about an op. */
enum {
    IR_OPF_ELEMENTWISE = 1 << 0, /* output[i] depends on input[i] only (after broadcasting) */
    IR_OPF_REDUCTION = 1 << 1,   /* reduces along axes */
    IR_OPF_CONTRACTION = 1 << 2, /* matmul / conv: compute-intensive */
    IR_OPF_LAYOUT = 1 << 3,      /* meaning depends on data layout (NCHW...) */
    IR_OPF_LAX = 1 << 4,         /* in Mirage's Lax fragment (superoptimisable) */
    IR_OPF_SHAPE_ONLY = 1 << 5,  /* reads only input shapes, never input data */
    IR_OPF_DATA_DEP = 1 << 6,    /* output shape depends on input data */
    IR_OPF_RANDOM = 1 << 7,      /* nondeterministic: never constant-folded */
    IR_OPF_SUBGRAPH = 1 << 8,    /* has graph attributes (If, Loop, Scan) */
};

typedef enum kiln_op {
#define X(id, name, min_in, max_in, min_out, max_out, flags, family) KILN_OP_##id,
#include "ir/ops.def"
#undef X
    KILN_OP_COUNT
} kiln_op;

struct ir_eval;
typedef kiln_status (*ir_eval_fn)(struct ir_eval *e);

typedef struct ir_op_info {
    const char *name; /* ONNX op_type */
    int min_in, max_in;   /* max -1: variadic */
    int min_out, max_out;
    unsigned flags;
    ir_eval_fn eval;      /* reference interpreter entry; NULL: not implemented */
} ir_op_info;

extern const ir_op_info ir_ops[KILN_OP_COUNT];

/* KILN_OP_COUNT when the name is unknown. Only the default ONNX domain
 * ("" or "ai.onnx") has ops. */
kiln_op ir_op_lookup(const char *domain, const char *op_type);

/* ---- dtypes ----------------------------------------------------------------- */
size_t ir_dtype_size(kiln_dtype t); /* 0 for STRING and UNDEF */
bool ir_dtype_is_float(kiln_dtype t); /* f16 bf16 f32 f64 */
bool ir_dtype_is_int(kiln_dtype t);   /* signed and unsigned integers, not bool */
bool ir_dtype_is_signed(kiln_dtype t);
bool ir_dtype_is_numeric(kiln_dtype t); /* float, int or bool: what the interpreter computes */

/* ---- tensors ---------------------------------------------------------------- */

/* A dense row-major tensor. `data` is NULL when unknown (shape inference). */
typedef struct ir_tensor {
    kiln_dtype dtype;
    int rank;
    int64_t dims[IR_MAX_RANK];
    void *data;
    size_t nbytes;
    bool owned; /* data was allocated by ir_tensor_alloc and is freed with the tensor */
} ir_tensor;

int64_t ir_numel(const ir_tensor *t);              /* product of dims; 1 for a scalar */
int64_t ir_dims_numel(int rank, const int64_t *dims);
/* Sets dtype and shape, and allocates zeroed data (owned). Checks the element
 * count and byte size for overflow; KILN_ERR_OOM when allocation fails. */
kiln_status ir_tensor_alloc(ir_tensor *t, kiln_dtype dtype, int rank, const int64_t *dims);
void ir_tensor_release(ir_tensor *t); /* frees owned data; keeps the shape */
/* Deep copy into dst (owned). */
kiln_status ir_tensor_copy(ir_tensor *dst, const ir_tensor *src);
bool ir_same_shape(const ir_tensor *a, const ir_tensor *b);
/* "f32[1,3,224,224]" into buf. */
const char *ir_tensor_type_str(const ir_tensor *t, char *buf, size_t n);

/* Element access converting through double / int64. Slow but obviously
 * right: the interpreter uses these where speed does not matter. */
double ir_get_f64(const ir_tensor *t, int64_t i);
void ir_set_f64(ir_tensor *t, int64_t i, double v);
int64_t ir_get_i64(const ir_tensor *t, int64_t i);
void ir_set_i64(ir_tensor *t, int64_t i, int64_t v);
/* Whole-tensor conversions; the result is malloc'd (base_free it), NULL on OOM. */
double *ir_to_f64(const ir_tensor *t);
int64_t *ir_to_i64(const ir_tensor *t);
void ir_from_f64(ir_tensor *t, const double *src); /* converts into t's dtype */
void ir_from_i64(ir_tensor *t, const int64_t *src);

/* ---- graph --------------------------------------------------------------------- */

typedef struct ir_node ir_node;
typedef struct ir_graph ir_graph;

typedef struct ir_value {
    const char *name;
    ir_tensor t;       /* dtype and shape; t.data set when the value is constant */
    bool shape_known;  /* t's dtype and shape are valid */
    bool is_const;     /* an initializer or a folded value: t.data is valid */
    bool is_input;     /* a graph input to be fed at run time */
    bool is_output;
    ir_graph *graph;   /* owning graph */
    ir_node *producer; /* NULL for inputs and constants */
    int producer_slot;
    int n_uses;        /* node input slots (in any graph) reading it, plus one for each graph
                        * (or subgraph) output it is */
    int id;            /* index in graph->values */
} ir_value;

typedef enum ir_attr_kind {
    IR_ATTR_UNDEF = 0,
    IR_ATTR_FLOAT,
    IR_ATTR_INT,
    IR_ATTR_STRING,
    IR_ATTR_TENSOR,
    IR_ATTR_GRAPH,
    IR_ATTR_FLOATS,
    IR_ATTR_INTS,
    IR_ATTR_STRINGS,
    IR_ATTR_TENSORS,
    IR_ATTR_GRAPHS,
    IR_ATTR_KIND_COUNT
} ir_attr_kind;

typedef struct ir_attr {
    const char *name;
    ir_attr_kind kind;
    double f;
    int64_t i;
    const char *s; /* NUL-terminated; s_len bytes (strings may hold NULs) */
    size_t s_len;
    ir_tensor *t;
    ir_graph *g;
    int n;          /* element count of the list kinds */
    double *floats;
    int64_t *ints;
    const char **strings;
    ir_tensor *tensors;
    ir_graph **graphs;
} ir_attr;

struct ir_node {
    const char *name;    /* never NULL; "" when the model gave none */
    const char *op_type; /* as written in the model */
    const char *domain;
    kiln_op op;          /* KILN_OP_COUNT: unsupported */
    int opset;           /* opset version of the node's domain */
    int n_in;
    ir_value **in;       /* NULL entries: omitted optional inputs */
    int n_out;
    ir_value **out;      /* NULL entries: omitted optional outputs */
    int n_attrs;
    ir_attr *attrs;
    ir_graph *graph;
    int id;
};

struct ir_graph {
    base_arena *arena;  /* shared with subgraphs */
    const char *name;
    ir_graph *parent;   /* enclosing graph of a subgraph; NULL at top level */
    int opset;          /* default-domain opset */
    ir_node **nodes;    /* topological order once ir_graph_sort ran */
    int n_nodes, cap_nodes;
    ir_value **values;
    int n_values, cap_values;
    ir_value **inputs;  /* fed at run time (initializers excluded) */
    int n_inputs;
    ir_value **outputs;
    int n_outputs;
};

/* A whole model: the top graph and what keeps its weights alive. */
typedef struct ir_model {
    base_arena arena;
    ir_graph *graph;
    int ir_version;
    int64_t opset;
    const char *producer;
    const char *path;        /* the file it came from, or NULL */
    void *keep[4];           /* buffers weights point into, freed with the model */
    void (*keep_free[4])(void *);
    base_file_map *maps;     /* external-data files mapped for weights */
    int n_maps, cap_maps;
} ir_model;

ir_model *ir_model_new(void);
void ir_model_free(ir_model *m);

ir_graph *ir_graph_new(base_arena *a, ir_graph *parent, const char *name);
/* NULL on OOM. The name is copied. */
ir_value *ir_graph_add_value(ir_graph *g, const char *name);
ir_node *ir_graph_add_node(ir_graph *g, const char *name, const char *op_type, const char *domain,
                           int n_in, int n_out);
/* Sorts nodes topologically; reports a cycle as KILN_ERR_INVALID_MODEL naming a node on it. */
kiln_status ir_graph_sort(ir_graph *g, base_diag *d);
/* Structural checks: arities, known ops, inputs defined before use, single
 * producers, outputs produced. Reports every problem. */
kiln_status ir_graph_verify(const ir_graph *g, base_diag *d);
/* Text form of the graph (one node a line) appended to s. */
void ir_graph_print(const ir_graph *g, base_str *s);
/* Number of scalar parameters and their bytes (constant values). */
void ir_graph_param_stats(const ir_graph *g, int64_t *n_params, int64_t *n_bytes);

/* Attribute lookup: NULL when absent. */
const ir_attr *ir_node_attr(const ir_node *n, const char *name);
/* Typed lookups for passes and targets: def when absent or of another kind
 * (the interpreter has already rejected attributes of the wrong kind). */
int64_t ir_node_attr_int(const ir_node *n, const char *name, int64_t def);
double ir_node_attr_float(const ir_node *n, const char *name, double def);
const char *ir_node_attr_str(const ir_node *n, const char *name, const char *def);
/* Element i of an ints attribute; def when absent or shorter. */
int64_t ir_node_attr_ints_at(const ir_node *n, const char *name, int i, int64_t def);
/* True when the attribute is absent or of this kind. */
bool ir_node_attr_kind_ok(const ir_node *n, const char *name, ir_attr_kind kind);
const char *ir_attr_kind_name(ir_attr_kind k);
/* "node 'conv1' (Conv)" into buf, for messages. */
const char *ir_node_label(const ir_node *n, char *buf, size_t size);

#endif
