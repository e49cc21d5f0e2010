/*
 * interp_rnn.c: the recurrent ops RNN, GRU and LSTM for the reference
 * interpreter, one entry for all three (they share inputs, directions,
 * layouts, sequence lengths and the activation table).
 *
 * Each (direction, batch entry) pair is run on its own, step by step, so a
 * batch entry with a shorter sequence_lens simply stops early: its Y rows past
 * the end stay zero (ir_eval_out zeroes them) and Y_h / Y_c hold the state
 * after its last valid step (zero for an empty sequence, as onnxruntime has
 * it). Reverse runs walk t = len-1 .. 0 and write Y at the original time
 * index. Everything is computed in double.
 *
 * Gate orders follow ONNX: GRU W/R/B are [z r h], LSTM [i o f c], peepholes
 * P [i o f]. Activations are consumed per direction (forward first), and
 * activation_alpha / activation_beta are consumed in activation order by
 * the activations that take them, the defaults being those of the
 * corresponding ONNX ops. clip bounds the gates' pre-activations (the
 * inputs of f and g), as onnxruntime does.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "ir/interp.h"
#include "ir/interp_ops.h"

#define MAX_ACTS 3 /* LSTM's f, g, h */

typedef enum act_kind {
    ACT_RELU,
    ACT_TANH,
    ACT_SIGMOID,
    ACT_AFFINE,
    ACT_LEAKY_RELU,
    ACT_THRESHOLDED_RELU,
    ACT_SCALED_TANH,
    ACT_HARD_SIGMOID,
    ACT_ELU,
    ACT_SOFTSIGN,
    ACT_SOFTPLUS,
} act_kind;

static const struct {
    const char *name;
    act_kind kind;
    bool has_alpha, has_beta;
    double alpha, beta; /* defaults, as the ONNX op of that name has them */
} act_table[] = {
    {"Relu", ACT_RELU, false, false, 0, 0},
    {"Tanh", ACT_TANH, false, false, 0, 0},
    {"Sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"Affine", ACT_AFFINE, true, true, 1.0, 0.0},
    {"LeakyRelu", ACT_LEAKY_RELU, true, false, 0.01, 0},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, true, false, 1.0, 0},
    {"ScaledTanh", ACT_SCALED_TANH, true, true, 1.0, 1.0},
    {"HardSigmoid", ACT_HARD_SIGMOID, true, true, 0.2, 0.5},
    {"Elu", ACT_ELU, true, false, 1.0, 0},
    {"Softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"Softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

typedef struct act {
    act_kind kind;
    double alpha, beta;
} act;

typedef struct rnn {
    kiln_op op;
    int n_dir;            /* 1 or 2 */
    bool reverse;         /* direction "reverse" (n_dir 1) */
    int64_t seq, batch, in_size, hidden;
    int n_gates;          /* 1 RNN, 3 GRU, 4 LSTM */
    int layout;           /* 0: [seq, batch, ...], 1: [batch, seq, ...] */
    bool has_clip;
    double clip;
    bool linear_before_reset; /* GRU */
    bool input_forget;        /* LSTM */
    act acts[2][MAX_ACTS];    /* [direction][f, g, h] */
} rnn;

static double act_eval(const act *a, double x)
{
    switch (a->kind) {
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_TANH: return tanh(x);
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ACT_AFFINE: return a->alpha * x + a->beta;
    case ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0;
    case ACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
    case ACT_HARD_SIGMOID: {
        double y = a->alpha * x + a->beta;
        return y < 0 ? 0 : y > 1 ? 1 : y;
    }
    case ACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1.0);
    case ACT_SOFTSIGN: return x / (1.0 + fabs(x));
    case ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    }
    return x;
}

/* An activation applied to a gate's pre-activation, which clip bounds. */
static double act_apply(const rnn *r, const act *a, double x)
{
    if (r->has_clip) x = x < -r->clip ? -r->clip : x > r->clip ? r->clip : x;
    return act_eval(a, x);
}

/* Reads activations / activation_alpha / activation_beta into r->acts. */
static kiln_status parse_activations(ir_eval *e, rnn *r)
{
    static const char *const defaults[3][MAX_ACTS] = {
        {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int n_act = r->op == KILN_OP_RNN ? 1 : r->op == KILN_OP_GRU ? 2 : 3;
    const char *const *def = defaults[n_act - 1];

    const char *const *names = NULL;
    int n_names = ir_eval_attr_strings(e, "activations", &names);
    if (n_names < 0) n_names = 0;
    if (n_names != 0 && n_names != n_act && n_names != n_act * r->n_dir)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL,
                            "activations has %d entries, expected %d (%d per direction)", n_names,
                            n_act * r->n_dir, n_act);

    const double *alphas = NULL, *betas = NULL;
    int n_alpha = ir_eval_attr_floats(e, "activation_alpha", &alphas);
    int n_beta = ir_eval_attr_floats(e, "activation_beta", &betas);
    int next_alpha = 0, next_beta = 0;

    for (int d = 0; d < r->n_dir; d++) {
        for (int k = 0; k < n_act; k++) {
            const char *name = n_names == 0 ? def[k] : names[n_names == n_act ? k : d * n_act + k];
            size_t t = 0;
            while (t < KILN_COUNT(act_table) && strcasecmp(name, act_table[t].name) != 0) t++;
            if (t == KILN_COUNT(act_table))
                return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "unknown activation '%s'", name);
            act *a = &r->acts[d][k];
            a->kind = act_table[t].kind;
            a->alpha = act_table[t].alpha;
            a->beta = act_table[t].beta;
            if (act_table[t].has_alpha && next_alpha < n_alpha) a->alpha = alphas[next_alpha++];
            if (act_table[t].has_beta && next_beta < n_beta) a->beta = betas[next_beta++];
        }
    }
    return KILN_OK;
}

static const ir_tensor *opt_in(const ir_eval *e, int i)
{
    return i < e->n_in ? e->in[i] : NULL;
}

/* Checks a float input's shape against the expected dims. */
static kiln_status check_input(ir_eval *e, int i, const char *what, int rank, const int64_t *dims)
{
    const ir_tensor *t = e->in[i];
    char buf[96];
    if (!ir_dtype_is_float(t->dtype))
        return ir_eval_fail(e, KILN_ERR_UNSUPPORTED, "input %s must be a float tensor, got %s", what,
                            ir_tensor_type_str(t, buf, sizeof buf));
    bool ok = t->rank == rank;
    for (int k = 0; ok && k < rank; k++) ok = t->dims[k] == dims[k];
    if (!ok) {
        char want[96];
        ir_tensor tw = {.dtype = t->dtype, .rank = rank};
        memcpy(tw.dims, dims, (size_t)rank * sizeof dims[0]);
        return ir_eval_fail(e, KILN_ERR_SHAPE, "input %s is %s, expected %s", what,
                            ir_tensor_type_str(t, buf, sizeof buf),
                            ir_tensor_type_str(&tw, want, sizeof want));
    }
    return KILN_OK;
}

/* Offsets into the layout-dependent tensors. */
static int64_t x_at(const rnn *r, int64_t t, int64_t b)
{
    return (r->layout == 0 ? t * r->batch + b : b * r->seq + t) * r->in_size;
}

static int64_t y_at(const rnn *r, int64_t t, int d, int64_t b)
{
    return (r->layout == 0 ? (t * r->n_dir + d) * r->batch + b : (b * r->seq + t) * r->n_dir + d) *
           r->hidden;
}

static int64_t state_at(const rnn *r, int d, int64_t b)
{
    return (r->layout == 0 ? d * r->batch + b : b * r->n_dir + d) * r->hidden;
}

/* The inputs as doubles; NULL for the optional ones that are absent. */
typedef struct rnn_data {
    double *x, *w, *r, *b, *p, *h0, *c0;
    int64_t *lens;
} rnn_data;

/* Row `row` of W (times x) plus its bias, and of R (times h) plus its bias. */
static double w_dot(const rnn *r, const rnn_data *in, int d, int64_t row, const double *x)
{
    const double *w = in->w + ((int64_t)d * r->n_gates * r->hidden + row) * r->in_size;
    double s = in->b ? in->b[(int64_t)d * 2 * r->n_gates * r->hidden + row] : 0.0;
    for (int64_t i = 0; i < r->in_size; i++) s += w[i] * x[i];
    return s;
}

static double r_dot(const rnn *r, const rnn_data *in, int d, int64_t row, const double *h)
{
    int64_t gh = (int64_t)r->n_gates * r->hidden;
    const double *rw = in->r + ((int64_t)d * gh + row) * r->hidden;
    double s = in->b ? in->b[(int64_t)d * 2 * gh + gh + row] : 0.0;
    for (int64_t i = 0; i < r->hidden; i++) s += rw[i] * h[i];
    return s;
}

/* One time step of direction d: h (and c) are updated in place; tmp holds
 * 3 * hidden scratch values. */
static void step(const rnn *r, const rnn_data *in, int d, const double *x, double *h, double *c,
                 double *tmp)
{
    int64_t H = r->hidden;
    const act *f = &r->acts[d][0], *g = &r->acts[d][1], *hh = &r->acts[d][2];
    double *nh = tmp, *a = tmp + H, *b = tmp + 2 * H;

    if (r->op == KILN_OP_RNN) {
        for (int64_t j = 0; j < H; j++) nh[j] = act_apply(r, f, w_dot(r, in, d, j, x) + r_dot(r, in, d, j, h));
    } else if (r->op == KILN_OP_GRU) {
        double *z = a, *rg = b;
        for (int64_t j = 0; j < H; j++) {
            z[j] = act_apply(r, f, w_dot(r, in, d, j, x) + r_dot(r, in, d, j, h));
            rg[j] = act_apply(r, f, w_dot(r, in, d, H + j, x) + r_dot(r, in, d, H + j, h));
        }
        if (r->linear_before_reset) {
            for (int64_t j = 0; j < H; j++)
                nh[j] = act_apply(r, g, w_dot(r, in, d, 2 * H + j, x) + rg[j] * r_dot(r, in, d, 2 * H + j, h));
        } else {
            for (int64_t j = 0; j < H; j++) rg[j] *= h[j];
            for (int64_t j = 0; j < H; j++)
                nh[j] = act_apply(r, g, w_dot(r, in, d, 2 * H + j, x) + r_dot(r, in, d, 2 * H + j, rg));
        }
        for (int64_t j = 0; j < H; j++) nh[j] = (1.0 - z[j]) * nh[j] + z[j] * h[j];
    } else {
        const double *p = in->p ? in->p + (int64_t)d * 3 * H : NULL;
        for (int64_t j = 0; j < H; j++) {
            double gi = w_dot(r, in, d, j, x) + r_dot(r, in, d, j, h);
            double go = w_dot(r, in, d, H + j, x) + r_dot(r, in, d, H + j, h);
            double gf = w_dot(r, in, d, 2 * H + j, x) + r_dot(r, in, d, 2 * H + j, h);
            double gc = w_dot(r, in, d, 3 * H + j, x) + r_dot(r, in, d, 3 * H + j, h);
            if (p) gi += p[j] * c[j];
            if (p) gf += p[2 * H + j] * c[j];
            double i_t = act_apply(r, f, gi);
            double f_t = r->input_forget ? 1.0 - i_t : act_apply(r, f, gf);
            double c_t = f_t * c[j] + i_t * act_apply(r, g, gc);
            if (p) go += p[H + j] * c_t;
            double o_t = act_apply(r, f, go);
            /* The cell state is not a gate: onnxruntime leaves h's input
             * unclipped, and so do we. */
            nh[j] = o_t * act_eval(hh, c_t);
            a[j] = c_t;
        }
        memcpy(c, a, (size_t)H * sizeof *c);
    }
    memcpy(h, nh, (size_t)H * sizeof *h);
}

static void free_data(rnn_data *in)
{
    base_free(in->x);
    base_free(in->w);
    base_free(in->r);
    base_free(in->b);
    base_free(in->p);
    base_free(in->h0);
    base_free(in->c0);
    base_free(in->lens);
}

static kiln_status run(ir_eval *e, const rnn *r)
{
    rnn_data in = {0};
    double *scratch = NULL;
    bool lstm = r->op == KILN_OP_LSTM;
    const ir_tensor *t;

    in.x = ir_to_f64(e->in[0]);
    in.w = ir_to_f64(e->in[1]);
    in.r = ir_to_f64(e->in[2]);
    bool oom = !in.x || !in.w || !in.r;
    if ((t = opt_in(e, 3)) != NULL) oom |= !(in.b = ir_to_f64(t));
    if ((t = opt_in(e, 4)) != NULL) oom |= !(in.lens = ir_to_i64(t));
    if ((t = opt_in(e, 5)) != NULL) oom |= !(in.h0 = ir_to_f64(t));
    if (lstm && (t = opt_in(e, 6)) != NULL) oom |= !(in.c0 = ir_to_f64(t));
    if (lstm && (t = opt_in(e, 7)) != NULL) oom |= !(in.p = ir_to_f64(t));
    scratch = base_malloc((size_t)(5 * r->hidden) * sizeof(double));
    if (oom || !scratch) {
        free_data(&in);
        base_free(scratch);
        return ir_eval_fail(e, KILN_ERR_OOM, "out of memory for the recurrence");
    }

    kiln_status st = KILN_OK;
    for (int64_t b = 0; b < r->batch && st == KILN_OK; b++) {
        int64_t len = in.lens ? in.lens[b] : r->seq;
        if (len < 0 || len > r->seq)
            st = ir_eval_fail(e, KILN_ERR_INVALID_MODEL,
                              "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                              (long long)len, (long long)r->seq);
    }

    double *h = scratch, *c = scratch + r->hidden, *tmp = scratch + 2 * r->hidden;
    for (int d = 0; d < r->n_dir && st == KILN_OK; d++) {
        bool backward = d == 1 || r->reverse;
        for (int64_t b = 0; b < r->batch; b++) {
            int64_t len = in.lens ? in.lens[b] : r->seq;
            int64_t s0 = state_at(r, d, b);
            for (int64_t j = 0; j < r->hidden; j++) {
                h[j] = in.h0 ? in.h0[s0 + j] : 0.0;
                c[j] = in.c0 ? in.c0[s0 + j] : 0.0;
            }
            for (int64_t s = 0; s < len; s++) {
                int64_t ts = backward ? len - 1 - s : s;
                step(r, &in, d, in.x + x_at(r, ts, b), h, c, tmp);
                int64_t y0 = y_at(r, ts, d, b);
                for (int64_t j = 0; j < r->hidden; j++) ir_set_f64(&e->out[0], y0 + j, h[j]);
            }
            /* An empty sequence has no last step: its states stay zero
             * rather than echoing initial_h. */
            if (len == 0) continue;
            if (e->n_out > 1)
                for (int64_t j = 0; j < r->hidden; j++) ir_set_f64(&e->out[1], s0 + j, h[j]);
            if (e->n_out > 2)
                for (int64_t j = 0; j < r->hidden; j++) ir_set_f64(&e->out[2], s0 + j, c[j]);
        }
    }
    free_data(&in);
    base_free(scratch);
    return st;
}

kiln_status ir_eval_rnn(ir_eval *e)
{
    rnn r = {.op = e->node->op};
    r.n_gates = r.op == KILN_OP_RNN ? 1 : r.op == KILN_OP_GRU ? 3 : 4;
    bool lstm = r.op == KILN_OP_LSTM;
    int max_in = lstm ? 8 : 6, max_out = lstm ? 3 : 2;
    char buf[96];

    if (e->n_in < 3 || e->n_in > max_in || !e->in[0] || !e->in[1] || !e->in[2])
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "needs inputs X, W and R");
    if (e->n_out > max_out)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "has %d outputs, at most %d", e->n_out, max_out);

    const char *dir = ir_eval_attr_str(e, "direction", "forward");
    if (strcmp(dir, "forward") == 0) {
        r.n_dir = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        r.n_dir = 1;
        r.reverse = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        r.n_dir = 2;
    } else {
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "unknown direction '%s'", dir);
    }
    int64_t layout = ir_eval_attr_int(e, "layout", 0);
    if (layout != 0 && layout != 1)
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "layout %lld is not 0 or 1", (long long)layout);
    r.layout = (int)layout;
    r.has_clip = ir_eval_has_attr(e, "clip");
    r.clip = ir_eval_attr_float(e, "clip", 0.0);
    if (r.has_clip && !(r.clip > 0))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "clip %g must be positive", r.clip);
    if (r.op == KILN_OP_GRU) r.linear_before_reset = ir_eval_attr_int(e, "linear_before_reset", 0) != 0;
    if (lstm) r.input_forget = ir_eval_attr_int(e, "input_forget", 0) != 0;
    KILN_TRY(parse_activations(e, &r));

    const ir_tensor *x = e->in[0], *rt = e->in[2];
    if (!ir_dtype_is_float(x->dtype) || x->rank != 3)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "X must be a 3-D float tensor, got %s",
                            ir_tensor_type_str(x, buf, sizeof buf));
    if (rt->rank != 3)
        return ir_eval_fail(e, KILN_ERR_SHAPE, "R must be 3-D, got %s", ir_tensor_type_str(rt, buf, sizeof buf));
    r.seq = r.layout == 0 ? x->dims[0] : x->dims[1];
    r.batch = r.layout == 0 ? x->dims[1] : x->dims[0];
    r.in_size = x->dims[2];
    r.hidden = ir_eval_attr_int(e, "hidden_size", rt->dims[2]);
    if (r.hidden <= 0 || r.hidden > (INT64_C(1) << 30))
        return ir_eval_fail(e, KILN_ERR_INVALID_MODEL, "hidden_size %lld is not in [1, 2^30]", (long long)r.hidden);

    int64_t gh = r.n_gates * r.hidden;
    KILN_TRY(check_input(e, 1, "W", 3, (int64_t[]){r.n_dir, gh, r.in_size}));
    KILN_TRY(check_input(e, 2, "R", 3, (int64_t[]){r.n_dir, gh, r.hidden}));
    if (opt_in(e, 3)) KILN_TRY(check_input(e, 3, "B", 2, (int64_t[]){r.n_dir, 2 * gh}));
    const ir_tensor *lens = opt_in(e, 4);
    if (lens && (!ir_dtype_is_int(lens->dtype) || lens->rank != 1 || lens->dims[0] != r.batch))
        return ir_eval_fail(e, KILN_ERR_SHAPE, "sequence_lens is %s, expected an integer vector of %lld",
                            ir_tensor_type_str(lens, buf, sizeof buf), (long long)r.batch);
    int64_t state_dims[3] = {r.n_dir, r.batch, r.hidden};
    if (r.layout == 1) state_dims[0] = r.batch, state_dims[1] = r.n_dir;
    if (opt_in(e, 5)) KILN_TRY(check_input(e, 5, "initial_h", 3, state_dims));
    if (lstm && opt_in(e, 6)) KILN_TRY(check_input(e, 6, "initial_c", 3, state_dims));
    if (lstm && opt_in(e, 7)) KILN_TRY(check_input(e, 7, "P", 2, (int64_t[]){r.n_dir, 3 * r.hidden}));

    int64_t y_dims[4] = {r.seq, r.n_dir, r.batch, r.hidden};
    if (r.layout == 1) y_dims[0] = r.batch, y_dims[1] = r.seq, y_dims[2] = r.n_dir;
    for (int i = 0; i < e->n_out; i++) {
        if (i == 0)
            KILN_TRY(ir_eval_out(e, 0, x->dtype, 4, y_dims));
        else
            KILN_TRY(ir_eval_out(e, i, x->dtype, 3, state_dims));
    }
    if (e->infer || e->n_out == 0) return KILN_OK;
    return run(e, &r);
}
