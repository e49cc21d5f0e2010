/*
 * kiln.c: the command line.
 *
 *   kiln inspect MODEL          what a model holds and whether kiln supports it
 *   kiln run [MODEL]            run a model (the embedded default when none is given)
 *   kiln ops                    the supported-op table
 *
 * `kiln help COMMAND` or `kiln COMMAND --help` explains each. The library
 * never prints; this file does all the printing.
 */
#include "api/demo.h"
#include "api/npy.h"
#include "ir/interp.h"
#include "onnx/onnx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- exit codes ---------------------------------------------------------------- */

static const char exit_codes_text[] =
    "EXIT CODES\n"
    "  0   success\n"
    "  1   bad command line\n"
    "  2   a file could not be read or written\n"
    "  3   the model is malformed\n"
    "  4   the model uses something kiln does not support\n"
    "  5   shapes or dtypes do not fit (inputs, or inside the model)\n"
    "  6   out of memory\n"
    "  7   no device\n"
    "  10  internal error (a bug in kiln: please report it)\n";

static int exit_code(kiln_status st)
{
    switch (st) {
    case KILN_OK: return 0;
    case KILN_ERR_INVALID_ARG: return 1;
    case KILN_ERR_IO: return 2;
    case KILN_ERR_INVALID_MODEL: return 3;
    case KILN_ERR_UNSUPPORTED: return 4;
    case KILN_ERR_SHAPE: return 5;
    case KILN_ERR_OOM: return 6;
    case KILN_ERR_NO_DEVICE: return 7;
    default: return 10;
    }
}

static int fail(kiln_status st, base_diag *d, const char *what)
{
    fprintf(stderr, "kiln: %s: %s\n", what, kiln_status_name(st));
    if (d && d->n_msgs) fprintf(stderr, "%s\n", base_diag_text(d));
    return exit_code(st);
}

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see 'kiln %s --help')\n", cmd);
    return 1;
}

/* ---- help ------------------------------------------------------------------------ */

static const char main_help[] =
    "kiln " KILN_VERSION ": an optimizing compiler and runtime for ONNX models\n"
    "\n"
    "USAGE\n"
    "  kiln COMMAND [ARGS]\n"
    "\n"
    "COMMANDS\n"
    "  inspect MODEL   inputs, outputs, op histogram, parameters, unsupported ops\n"
    "  run [MODEL]     run a model on inputs from .npy/.npz files or random ones;\n"
    "                  without MODEL, runs the embedded default model\n"
    "  ops             the table of supported ops\n"
    "  help [COMMAND]  this text, or a command's\n"
    "\n"
    "OPTIONS\n"
    "  --version       print the version\n"
    "\n";

static const char inspect_help[] =
    "USAGE\n"
    "  kiln inspect MODEL [--shape NAME=D0xD1x...]... [--graph]\n"
    "\n"
    "Prints the model's opset and producer, its inputs and outputs with dtypes and\n"
    "shapes, a histogram of its ops, its parameter count and bytes, and every node\n"
    "kiln does not support (all of them, with the reason).\n"
    "\n"
    "  --shape NAME=DIMS  bind a symbolic input dimension (e.g. --shape input_ids=1x128)\n"
    "                     so shapes can be inferred through the graph\n"
    "  --graph            also print the graph as text, with inferred shapes\n"
    "\n";

static const char run_help[] =
    "USAGE\n"
    "  kiln run [MODEL] [--input NAME=FILE.npy]... [--inputs FILE.npz]\n"
    "           [--shape NAME=D0xD1x...]... [--seed N] [--output FILE.npz] [--quiet]\n"
    "\n"
    "Runs MODEL (.onnx) on the reference interpreter and prints each output's\n"
    "dtype, shape and summary. Without MODEL, runs the embedded default model (a\n"
    "small CNN). Inputs not given as files are random with a fixed seed: floats\n"
    "uniform in [-1, 1), integers in [0, 10), bools 0/1.\n"
    "\n"
    "  --input NAME=FILE  a .npy file for input NAME\n"
    "  --inputs FILE      a .npz file holding inputs by name\n"
    "  --shape NAME=DIMS  dims of a random input whose shape is symbolic (default 1)\n"
    "  --seed N           seed of the random inputs (default 0)\n"
    "  --output FILE      write the outputs to a .npz file, by output name\n"
    "  --quiet            print nothing but errors\n"
    "\n";

static const char ops_help[] =
    "USAGE\n"
    "  kiln ops\n"
    "\n"
    "Prints every op kiln knows: ONNX name, input and output arity, flags, and\n"
    "whether the reference interpreter implements it.\n"
    "\n";

static int print_help(const char *cmd)
{
    if (!cmd) printf("%s%s", main_help, exit_codes_text);
    else if (strcmp(cmd, "inspect") == 0) printf("%s%s", inspect_help, exit_codes_text);
    else if (strcmp(cmd, "run") == 0) printf("%s%s", run_help, exit_codes_text);
    else if (strcmp(cmd, "ops") == 0) printf("%s", ops_help);
    else {
        fprintf(stderr, "kiln help: unknown command '%s'\n", cmd);
        return 1;
    }
    return 0;
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* ---- shared: loading and shapes --------------------------------------------------------- */

typedef struct named_shape {
    const char *name;
    int rank;
    int64_t dims[IR_MAX_RANK];
} named_shape;

/* "NAME=1x3x224x224" (an empty DIMS is a scalar). */
static bool parse_shape(const char *arg, named_shape *out)
{
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg) return false;
    static char names[64][256];
    static int n_names;
    if (n_names >= 64 || (size_t)(eq - arg) >= sizeof(names[0])) return false;
    char *nm = names[n_names++];
    memcpy(nm, arg, (size_t)(eq - arg));
    nm[eq - arg] = 0;
    out->name = nm;
    out->rank = 0;
    const char *p = eq + 1;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || out->rank >= IR_MAX_RANK) return false;
        out->dims[out->rank++] = v;
        p = end;
        if (*p == 'x' || *p == ',') p++;
        else if (*p) return false;
    }
    return true;
}

static kiln_status load_model(const char *path, ir_model **m, base_diag *d)
{
    if (path) return onnx_load_file(path, m, d);
    void *buf;
    size_t n;
    KILN_TRY(api_demo_model(&buf, &n));
    kiln_status st = onnx_load_buffer(buf, n, NULL, m, d);
    base_free(buf);
    return st;
}

/* Binds input shapes (from --shape, else from given tensors, else 1 for
 * symbolic dims) and runs shape inference. */
static kiln_status bind_shapes(ir_graph *g, const named_shape *shapes, int n_shapes, const ir_tensor *given,
                               base_diag *d)
{
    kiln_status st = KILN_OK;
    for (int s = 0; s < n_shapes; s++) {
        bool found = false;
        for (int i = 0; i < g->n_inputs; i++) found |= strcmp(g->inputs[i]->name, shapes[s].name) == 0;
        if (!found) st = base_diag_add(d, KILN_ERR_INVALID_ARG, "--shape: the model has no input '%s'", shapes[s].name);
    }
    for (int i = 0; i < g->n_inputs && st == KILN_OK; i++) {
        ir_value *v = g->inputs[i];
        const named_shape *sh = NULL;
        for (int s = 0; s < n_shapes; s++)
            if (strcmp(shapes[s].name, v->name) == 0) sh = &shapes[s];
        if (given && given[i].data) {
            bool fits = given[i].dtype == v->t.dtype && given[i].rank == v->t.rank;
            for (int k = 0; fits && k < v->t.rank; k++) fits = v->t.dims[k] < 0 || v->t.dims[k] == given[i].dims[k];
            if (!fits) {
                char want[160], got[160];
                st = base_diag_add(d, KILN_ERR_SHAPE, "input '%s': the model expects %s, the file holds %s", v->name,
                                   ir_tensor_type_str(&v->t, want, sizeof(want)),
                                   ir_tensor_type_str(&given[i], got, sizeof(got)));
                continue;
            }
            v->t.rank = given[i].rank;
            memcpy(v->t.dims, given[i].dims, sizeof(v->t.dims));
        } else if (sh) {
            if (sh->rank != v->t.rank)
                st = base_diag_add(d, KILN_ERR_SHAPE, "--shape %s: rank %d, the model's input has rank %d", v->name,
                                   sh->rank, v->t.rank);
            for (int k = 0; k < sh->rank && st == KILN_OK; k++) {
                if (v->t.dims[k] >= 0 && v->t.dims[k] != sh->dims[k])
                    st = base_diag_add(d, KILN_ERR_SHAPE, "--shape %s: dim %d is %lld in the model, not %lld",
                                       v->name, k, (long long)v->t.dims[k], (long long)sh->dims[k]);
                v->t.dims[k] = sh->dims[k];
            }
        } else {
            for (int k = 0; k < v->t.rank; k++)
                if (v->t.dims[k] < 0) v->t.dims[k] = 1;
        }
        v->shape_known = true;
    }
    if (st != KILN_OK) return st;
    return ir_infer_shapes(g, d);
}

/* ---- inspect ------------------------------------------------------------------------------ */

static void print_value_line(const ir_value *v)
{
    char buf[200];
    printf("  %-32s %s%s\n", v->name, ir_tensor_type_str(&v->t, buf, sizeof(buf)),
           v->shape_known ? "" : "  (shape unknown until run)");
}

static void count_ops(const ir_graph *g, int *hist, int *unknown, int64_t *n_nodes)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        (*n_nodes)++;
        if (n->op == KILN_OP_COUNT) (*unknown)++;
        else hist[n->op]++;
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH) count_ops(n->attrs[a].g, hist, unknown, n_nodes);
    }
}

static int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    named_shape shapes[64];
    int n_shapes = 0;
    bool print_graph = false;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) return print_help("inspect");
        if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            if (n_shapes >= 64 || !parse_shape(argv[++i], &shapes[n_shapes++]))
                return usage_error("inspect", "bad --shape '%s' (want NAME=D0xD1x...)", argv[i]);
        } else if (strcmp(argv[i], "--graph") == 0) print_graph = true;
        else if (argv[i][0] == '-') return usage_error("inspect", "unknown option '%s'", argv[i]);
        else if (!path) path = argv[i];
        else return usage_error("inspect", "unexpected argument '%s'", argv[i]);
    }
    if (!path) return usage_error("inspect", "%s", "a MODEL is required");
    base_diag d;
    base_diag_init(&d);
    ir_model *m;
    kiln_status st = load_model(path, &m, &d);
    if (st != KILN_OK) {
        int rc = fail(st, &d, path);
        base_diag_free(&d);
        return rc;
    }
    ir_graph *g = m->graph;
    base_diag infer_d;
    base_diag_init(&infer_d);
    kiln_status infer_st = bind_shapes(g, shapes, n_shapes, NULL, &infer_d);
    printf("model      %s\n", path);
    printf("producer   %s\n", m->producer[0] ? m->producer : "(none)");
    printf("ir         %d, opset %lld\n", m->ir_version, (long long)m->opset);
    printf("inputs     %d\n", g->n_inputs);
    for (int i = 0; i < g->n_inputs; i++) print_value_line(g->inputs[i]);
    printf("outputs    %d\n", g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) print_value_line(g->outputs[i]);
    int hist[KILN_OP_COUNT] = {0}, unknown = 0;
    int64_t n_nodes = 0;
    count_ops(g, hist, &unknown, &n_nodes);
    printf("nodes      %lld\n", (long long)n_nodes);
    for (int i = 0; i < KILN_OP_COUNT; i++)
        if (hist[i]) printf("  %-32s %d\n", ir_ops[i].name, hist[i]);
    if (unknown) printf("  %-32s %d\n", "(unknown ops)", unknown);
    int64_t n_params, n_bytes;
    ir_graph_param_stats(g, &n_params, &n_bytes);
    printf("parameters %lld (%.2f MB)\n", (long long)n_params, (double)n_bytes / 1e6);
    base_diag sd;
    base_diag_init(&sd);
    st = onnx_check_support(g, &sd);
    if (st == KILN_OK) printf("support    every op is supported\n");
    else printf("support    %s\n", base_diag_text(&sd));
    if (infer_st != KILN_OK) printf("shapes     inference failed:\n%s\n", base_diag_text(&infer_d));
    if (print_graph) {
        base_str s;
        base_str_init(&s);
        ir_graph_print(g, &s);
        printf("\n%s", base_str_get(&s));
        base_str_free(&s);
    }
    base_diag_free(&sd);
    base_diag_free(&infer_d);
    base_diag_free(&d);
    ir_model_free(m);
    return exit_code(st != KILN_OK ? st : infer_st);
}

/* ---- run ---------------------------------------------------------------------------------- */

static uint64_t rng_state;

static double rng_uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static kiln_status random_input(const ir_value *v, ir_tensor *t)
{
    KILN_TRY(ir_tensor_alloc(t, v->t.dtype, v->t.rank, v->t.dims));
    int64_t n = ir_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (ir_dtype_is_float(t->dtype)) ir_set_f64(t, i, rng_uniform() * 2 - 1);
        else if (t->dtype == KILN_BOOL) ir_set_i64(t, i, rng_uniform() < 0.5);
        else ir_set_i64(t, i, (int64_t)(rng_uniform() * 10));
    }
    return KILN_OK;
}

static void print_summary(const char *name, const ir_tensor *t)
{
    char buf[200];
    int64_t n = ir_numel(t);
    printf("  %-24s %s", name, ir_tensor_type_str(t, buf, sizeof(buf)));
    if (n == 0) {
        printf("  (empty)\n");
        return;
    }
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ir_get_f64(t, i);
        lo = fmin(lo, x);
        hi = fmax(hi, x);
        sum += x;
    }
    printf("  min %.6g  max %.6g  mean %.6g\n    [", lo, hi, sum / (double)n);
    for (int64_t i = 0; i < n && i < 8; i++) printf("%s%.6g", i ? ", " : "", ir_get_f64(t, i));
    printf("%s]\n", n > 8 ? ", ..." : "");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmd_run(int argc, char **argv)
{
    const char *path = NULL, *out_path = NULL, *npz_path = NULL;
    named_shape shapes[64];
    int n_shapes = 0;
    struct {
        const char *name, *file;
    } files[64];
    int n_files = 0;
    bool quiet = false;
    uint64_t seed = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (is_help(a)) return print_help("run");
        if (strcmp(a, "--input") == 0 && has_val) {
            const char *v = argv[++i], *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1] || n_files >= 64)
                return usage_error("run", "bad --input '%s' (want NAME=FILE.npy)", v);
            files[n_files].name = strndup(v, (size_t)(eq - v));
            files[n_files++].file = eq + 1;
        } else if (strcmp(a, "--inputs") == 0 && has_val) npz_path = argv[++i];
        else if (strcmp(a, "--shape") == 0 && has_val) {
            if (n_shapes >= 64 || !parse_shape(argv[++i], &shapes[n_shapes++]))
                return usage_error("run", "bad --shape '%s' (want NAME=D0xD1x...)", argv[i]);
        } else if (strcmp(a, "--seed") == 0 && has_val) seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(a, "--output") == 0 && has_val) out_path = argv[++i];
        else if (strcmp(a, "--quiet") == 0) quiet = true;
        else if (a[0] == '-') return usage_error("run", "unknown option or missing value '%s'", a);
        else if (!path) path = a;
        else return usage_error("run", "unexpected argument '%s'", a);
    }
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    ir_tensor ins[IR_EVAL_MAX_IO] = {{0}}, outs[IR_EVAL_MAX_IO] = {{0}};
    api_npz npz = {0};
    int rc = 0;
    kiln_status st = load_model(path, &m, &d);
    const char *what = path ? path : "embedded default model";
    if (st != KILN_OK) goto done;
    ir_graph *g = m->graph;
    if (g->n_inputs > IR_EVAL_MAX_IO || g->n_outputs > IR_EVAL_MAX_IO) {
        st = base_diag_add(&d, KILN_ERR_UNSUPPORTED, "too many inputs or outputs");
        goto done;
    }
    st = onnx_check_support(g, &d);
    if (st != KILN_OK) goto done;
    /* inputs from files */
    if (npz_path) {
        st = api_npz_load(npz_path, &npz, &d);
        if (st != KILN_OK) goto done;
    }
    for (int f = 0; f < n_files; f++) {
        int i = 0;
        while (i < g->n_inputs && strcmp(g->inputs[i]->name, files[f].name) != 0) i++;
        if (i == g->n_inputs) {
            st = base_diag_add(&d, KILN_ERR_INVALID_ARG, "--input: the model has no input '%s'", files[f].name);
            goto done;
        }
        ir_tensor_release(&ins[i]);
        st = api_npy_load(files[f].file, &ins[i], &d);
        if (st != KILN_OK) goto done;
    }
    for (int k = 0; k < npz.n; k++) {
        int i = 0;
        while (i < g->n_inputs && strcmp(g->inputs[i]->name, npz.names[k]) != 0) i++;
        if (i == g->n_inputs) {
            st = base_diag_add(&d, KILN_ERR_INVALID_ARG, "%s: the model has no input '%s'", npz_path, npz.names[k]);
            goto done;
        }
        if (!ins[i].data) {
            st = ir_tensor_copy(&ins[i], &npz.tensors[k]);
            if (st != KILN_OK) goto done;
        }
    }
    st = bind_shapes(g, shapes, n_shapes, ins, &d);
    if (st != KILN_OK) goto done;
    rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < g->n_inputs; i++) {
        if (ins[i].data) continue; /* given as a file */
        st = random_input(g->inputs[i], &ins[i]);
        if (st != KILN_OK) goto done;
    }
    if (!quiet) {
        printf("model   %s\ninputs\n", what);
        for (int i = 0; i < g->n_inputs; i++) print_summary(g->inputs[i]->name, &ins[i]);
    }
    ir_interp_opts opts = {.seed = seed};
    double t0 = now_s();
    st = ir_interp_run(g, ins, outs, &opts, &d);
    double t1 = now_s();
    if (st != KILN_OK) goto done;
    if (!quiet) {
        printf("outputs (reference interpreter, %.1f ms)\n", (t1 - t0) * 1e3);
        for (int i = 0; i < g->n_outputs; i++) print_summary(g->outputs[i]->name, &outs[i]);
    }
    if (out_path) {
        const char *names[IR_EVAL_MAX_IO];
        for (int i = 0; i < g->n_outputs; i++) names[i] = g->outputs[i]->name;
        st = api_npz_save(out_path, g->n_outputs, names, outs, &d);
        if (st != KILN_OK) goto done;
        if (!quiet) printf("wrote   %s\n", out_path);
    }
done:
    if (st != KILN_OK) rc = fail(st, &d, what);
    for (int i = 0; i < IR_EVAL_MAX_IO; i++) {
        ir_tensor_release(&ins[i]);
        ir_tensor_release(&outs[i]);
    }
    for (int f = 0; f < n_files; f++) free((char *)files[f].name);
    api_npz_free(&npz);
    ir_model_free(m);
    base_diag_free(&d);
    return rc;
}

/* ---- ops ---------------------------------------------------------------------------------- */

static int cmd_ops(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) return print_help("ops");
        return usage_error("ops", "unexpected argument '%s'", argv[i]);
    }
    static const struct {
        unsigned flag;
        const char *name;
    } flags[] = {
        {IR_OPF_ELEMENTWISE, "elementwise"}, {IR_OPF_REDUCTION, "reduction"}, {IR_OPF_CONTRACTION, "contraction"},
        {IR_OPF_LAYOUT, "layout"},           {IR_OPF_LAX, "lax"},             {IR_OPF_SHAPE_ONLY, "shape-only"},
        {IR_OPF_DATA_DEP, "data-dependent"}, {IR_OPF_RANDOM, "random"},       {IR_OPF_SUBGRAPH, "subgraph"},
    };
    printf("%-28s %-9s %-9s %-12s %s\n", "op", "inputs", "outputs", "interpreter", "flags");
    int n_impl = 0;
    for (int i = 0; i < KILN_OP_COUNT; i++) {
        const ir_op_info *op = &ir_ops[i];
        char in[16], out[16];
        snprintf(in, sizeof(in), op->max_in < 0 ? "%d+" : op->min_in == op->max_in ? "%d" : "%d-%d", op->min_in,
                 op->max_in);
        snprintf(out, sizeof(out), op->max_out < 0 ? "%d+" : op->min_out == op->max_out ? "%d" : "%d-%d",
                 op->min_out, op->max_out);
        printf("%-28s %-9s %-9s %-12s", op->name, in, out, op->eval ? "yes" : "no");
        const char *sep = "";
        for (size_t f = 0; f < KILN_COUNT(flags); f++)
            if (op->flags & flags[f].flag) {
                printf("%s%s", sep, flags[f].name);
                sep = ",";
            }
        printf("\n");
        n_impl += op->eval != NULL;
    }
    printf("%d ops, %d on the reference interpreter\n", KILN_OP_COUNT, n_impl);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return print_help(NULL) == 0 ? 1 : 1;
    const char *cmd = argv[1];
    if (is_help(cmd)) return print_help(NULL);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("kiln %s\n", KILN_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) return print_help(argc > 2 ? argv[2] : NULL);
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "ops") == 0) return cmd_ops(argc - 2, argv + 2);
    fprintf(stderr, "kiln: unknown command '%s' (see 'kiln --help')\n", cmd);
    return 1;
}
