/*
 * interp.h: the reference interpreter and the kernel interface its op
 * families (interp_*.c) implement.
 *
 * One function per op (or op family) does both shape inference and
 * evaluation, so the two can never disagree:
 *
 *     kiln_status ir_eval_foo(ir_eval *e)
 *     {
 *         const ir_tensor *x = e->in[0];
 *         ... check inputs and attributes, compute the output shape ...
 *         KILN_TRY(ir_eval_out(e, 0, x->dtype, x->rank, x->dims));
 *         if (e->infer) return KILN_OK;     // shape inference stops here
 *         ... compute e->out[0].data from the inputs' data ...
 *         return KILN_OK;
 *     }
 *
 * In infer mode (shape inference, constant folding) an input's data is NULL
 * unless the value is constant; an op that needs it calls ir_eval_need(),
 * which returns KILN_ERR_DYNAMIC so the driver marks the outputs unknown.
 *
 * Numerics: compute in double (fp64) or int64 and convert once at the end;
 * reductions and contractions accumulate in double. Simple and obviously
 * right beats fast here: this is the oracle every target is checked against.
 */
#ifndef KILN_IR_INTERP_H
#define KILN_IR_INTERP_H

#include "ir/ir.h"

#define IR_EVAL_MAX_IO 1024

typedef struct ir_interp ir_interp;

typedef struct ir_eval {
    const ir_node *node;
    int n_in;
    const ir_tensor *const *in; /* in[i] NULL: optional input omitted */
    int n_out;
    ir_tensor *out;             /* n_out tensors the op fills with ir_eval_out */
    bool infer;                 /* shape inference only: see above */
    base_diag *diag;
    kiln_status status;         /* first attribute error, checked by the driver */
    ir_interp *interp;          /* for subgraphs and random numbers */
} ir_eval;

/* Declares output i: dtype and shape; allocates zeroed data unless e->infer.
 * Fails with KILN_ERR_SHAPE for a negative dim or an overflowing size, and
 * KILN_ERR_OOM when allocation fails. An output the model omitted (NULL in
 * node->out) is still allocated so the op need not check. */
kiln_status ir_eval_out(ir_eval *e, int i, kiln_dtype dtype, int rank, const int64_t *dims);

/* Input i must be present and, in infer mode, known: KILN_ERR_DYNAMIC (no
 * message) when its data is unknown, KILN_ERR_INVALID_MODEL when missing. */
kiln_status ir_eval_need(ir_eval *e, int i);
/* True when input i was given (not omitted, not an empty name). */
bool ir_eval_has(const ir_eval *e, int i);

/* Adds "node 'n' (Op): <message>" to the diagnostics and returns st. */
kiln_status ir_eval_fail(ir_eval *e, kiln_status st, const char *fmt, ...) KILN_PRINTF(3, 4);

/* Attributes with defaults. A present attribute of the wrong kind records an
 * error in e->status (naming node, op, attribute, and both kinds) and the
 * default is returned; the driver fails the node afterwards. */
int64_t ir_eval_attr_int(ir_eval *e, const char *name, int64_t def);
double ir_eval_attr_float(ir_eval *e, const char *name, double def);
const char *ir_eval_attr_str(ir_eval *e, const char *name, const char *def);
/* List attributes: the count, or -1 when absent (*out untouched). */
int ir_eval_attr_ints(ir_eval *e, const char *name, const int64_t **out);
int ir_eval_attr_floats(ir_eval *e, const char *name, const double **out);
int ir_eval_attr_strings(ir_eval *e, const char *name, const char *const **out);
const ir_tensor *ir_eval_attr_tensor(ir_eval *e, const char *name); /* NULL when absent */
const ir_graph *ir_eval_attr_graph(ir_eval *e, const char *name);  /* NULL when absent */
bool ir_eval_has_attr(const ir_eval *e, const char *name);

/* Normalises axis (negative counts from the end) into [0, rank); fails with
 * a message naming the op when out of range. */
kiln_status ir_eval_axis(ir_eval *e, int64_t axis, int rank, int *out);

/* ---- broadcasting (numpy rules) ------------------------------------------ */

#define IR_BCAST_MAX 8

/* Output shape of broadcasting n tensors; KILN_ERR_SHAPE with a message when
 * they do not broadcast. */
kiln_status ir_eval_broadcast(ir_eval *e, int n, const ir_tensor *const *ts, int *rank, int64_t *dims);

/* Walks an output shape in row-major order, keeping each input's element
 * offset:
 *     ir_bcast b; ir_bcast_init(&b, rank, dims, n, ts);
 *     for (int64_t i = 0; i < total; i++, ir_bcast_next(&b)) use b.off[k];
 */
typedef struct ir_bcast {
    int rank, n;
    int64_t dims[IR_MAX_RANK];
    int64_t strides[IR_BCAST_MAX][IR_MAX_RANK]; /* 0 on broadcast dims */
    int64_t idx[IR_MAX_RANK];
    int64_t off[IR_BCAST_MAX];
} ir_bcast;
void ir_bcast_init(ir_bcast *b, int rank, const int64_t *dims, int n, const ir_tensor *const *ts);
void ir_bcast_next(ir_bcast *b);

/* Row-major strides (in elements) of a shape. */
void ir_strides(int rank, const int64_t *dims, int64_t *strides);

/* ---- subgraphs and randomness ---------------------------------------------- */

/* Runs a subgraph (If/Loop/Scan body) with the given inputs bound to its
 * graph inputs, in order; the outputs are allocated (owned) into out[]. Values
 * of enclosing graphs are visible. Infer mode runs inference only. */
kiln_status ir_eval_subgraph(ir_eval *e, const ir_graph *g, int n_in, const ir_tensor *in,
                             int n_out, ir_tensor *out);
/* Uniform in [0, 1) from the run's generator (seeded: runs are repeatable).
 * (ir_eval_random is the RandomUniform/RandomNormal/... op entry.) */
double ir_eval_uniform(ir_eval *e);

/* ---- the interpreter ----------------------------------------------------------- */

typedef struct ir_interp_opts {
    uint64_t seed;     /* for random ops */
    bool keep_all;     /* keep every intermediate value (for verify --all) */
} ir_interp_opts;

/* Runs g on the given inputs (in graph->inputs order; shapes must fit the
 * graph's). Outputs are allocated into out[] (g->n_outputs tensors, owned:
 * release with ir_tensor_release). Every problem lands in d. */
kiln_status ir_interp_run(const ir_graph *g, const ir_tensor *inputs, ir_tensor *out,
                          const ir_interp_opts *opts, base_diag *d);

/* Shape inference over a graph whose input shapes are set: fills every
 * value's dtype and shape (shape_known), folds nodes whose inputs are all
 * constant (is_const, data owned by the graph's arena... see infer.c).
 * Values depending on data not known before running stay !shape_known.
 * Fails only on errors (mismatched shapes, bad attributes). */
kiln_status ir_infer_shapes(ir_graph *g, base_diag *d);

#endif
