/*
 * roundtrip.c: checks that exporting a model and loading it back keeps its
 * meaning exactly, over the ONNX backend test cases (Debian's
 * libonnx-testdata). The `c` target relies on this: its fallback segments
 * are exported with onnx_export_nodes and reloaded at run time.
 *
 *   roundtrip [--filter SUBSTR] [--verbose] [--timeout SECONDS] DIR...
 *
 * For every case folder (model.onnx, test_data_set_0/) in each DIR: load,
 * bind the input shapes of test_data_set_0, run shape inference, export the
 * whole graph (onnx_export_graph), reload the export, infer again, run both
 * graphs on the same inputs and require bit-identical outputs (dtype, shape
 * and every byte). A case kiln cannot load, infer or run in the first place
 * is skipped: it says nothing about the exporter. Then the graph runs again
 * as one exported segment per node, each reloaded and run in turn, the way
 * the c target runs fallback segments, and must give the same bits again. Each case runs in a child
 * process with a time limit, like conformance.c.
 *
 * Prints a line per failure, per-folder counts and "N passed, N failed";
 * exits 1 when any case failed.
 */
#include "ir/interp.h"
#include "onnx/onnx.h"
#include "cases.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_IO 64

enum { CASE_PASS = 0, CASE_FAIL = 1, CASE_SKIP = 2 };

static int verbose;
static int timeout_s = 120;
static const char *filter;

/* Binds the inputs' shapes, infers and runs g. 0 on success. */
static int bind_infer_run(ir_graph *g, const ir_tensor *ins, ir_tensor *outs, base_diag *d)
{
    for (int i = 0; i < g->n_inputs; i++) {
        ir_value *v = g->inputs[i];
        v->t.rank = ins[i].rank;
        memcpy(v->t.dims, ins[i].dims, sizeof(v->t.dims));
        v->shape_known = true;
    }
    if (ir_infer_shapes(g, d) != KILN_OK) return 1;
    ir_interp_opts opts = {.seed = 1};
    return ir_interp_run(g, ins, outs, &opts, d) != KILN_OK;
}

/* Byte equality of two tensors; a reason in why when they differ. */
static bool identical(const ir_tensor *a, const ir_tensor *b, char *why, size_t n)
{
    char sa[160], sb[160];
    if (a->dtype != b->dtype || !ir_same_shape(a, b)) {
        snprintf(why, n, "reloaded gives %s, the original %s", ir_tensor_type_str(b, sb, sizeof(sb)),
                 ir_tensor_type_str(a, sa, sizeof(sa)));
        return false;
    }
    if (a->nbytes != b->nbytes || (a->nbytes && memcmp(a->data, b->data, a->nbytes) != 0)) {
        size_t esize = ir_dtype_size(a->dtype), first = 0;
        while (first < a->nbytes && first < b->nbytes &&
               ((const unsigned char *)a->data)[first] == ((const unsigned char *)b->data)[first])
            first++;
        snprintf(why, n, "%s differs from element %zu on", ir_tensor_type_str(a, sa, sizeof(sa)),
                 esize ? first / esize : first);
        return false;
    }
    return true;
}

/* ---- segments: every node exported on its own, run in turn ----------------- */

typedef struct seg_env {
    const ir_graph *g;
    ir_tensor *vals; /* by value id */
    bool *have;
    ir_value **ins;  /* the segment's inputs being collected */
    int n_ins;
} seg_env;

/* Adds v to the segment's inputs when it was computed by an earlier segment
 * or is a graph input; constants not computed yet become initializers. */
static void seg_read(seg_env *s, ir_value *v)
{
    if (!v || v->graph != s->g || !s->have[v->id]) return;
    for (int i = 0; i < s->n_ins; i++)
        if (s->ins[i] == v) return;
    s->ins[s->n_ins++] = v;
}

/* The values of s->g that sub (a subgraph, at any depth) reads. */
static void seg_read_subgraph(seg_env *s, const ir_graph *sub)
{
    for (int i = 0; i < sub->n_nodes; i++) {
        const ir_node *n = sub->nodes[i];
        for (int j = 0; j < n->n_in; j++) seg_read(s, n->in[j]);
        for (int a = 0; a < n->n_attrs; a++) {
            const ir_attr *at = &n->attrs[a];
            if (at->kind == IR_ATTR_GRAPH) seg_read_subgraph(s, at->g);
            for (int k = 0; at->kind == IR_ATTR_GRAPHS && k < at->n; k++) seg_read_subgraph(s, at->graphs[k]);
        }
    }
    for (int i = 0; i < sub->n_outputs; i++) seg_read(s, sub->outputs[i]);
}

/* Runs g (inferred already) as one exported segment per node, the way the
 * c target runs fallback segments, into outs. 0 on success. Values whose
 * shape inference left unknown get the shape the run gave them, since a
 * segment's inputs need static shapes. */
static int run_segments(ir_graph *g, const ir_tensor *ins, ir_tensor *outs, char *why, size_t why_n)
{
    base_diag d;
    base_diag_init(&d);
    seg_env s = {.g = g};
    s.vals = calloc((size_t)g->n_values + 1, sizeof(ir_tensor));
    s.have = calloc((size_t)g->n_values + 1, sizeof(bool));
    s.ins = calloc((size_t)g->n_values + 1, sizeof(ir_value *));
    ir_tensor *seg_in = calloc((size_t)g->n_values + 1, sizeof(ir_tensor));
    int rc = 1;
    for (int i = 0; i < g->n_inputs; i++) {
        s.vals[g->inputs[i]->id] = ins[i];
        s.vals[g->inputs[i]->id].owned = false;
        s.have[g->inputs[i]->id] = true;
    }
    char lb[256];
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *node = g->nodes[i];
        ir_node_label(node, lb, sizeof(lb));
        s.n_ins = 0;
        for (int j = 0; j < node->n_in; j++) seg_read(&s, node->in[j]);
        for (int a = 0; a < node->n_attrs; a++) {
            const ir_attr *at = &node->attrs[a];
            if (at->kind == IR_ATTR_GRAPH) seg_read_subgraph(&s, at->g);
            for (int k = 0; at->kind == IR_ATTR_GRAPHS && k < at->n; k++) seg_read_subgraph(&s, at->graphs[k]);
        }
        ir_value *seg_out[MAX_IO];
        int n_out = 0;
        for (int j = 0; j < node->n_out && n_out < MAX_IO; j++)
            if (node->out[j]) seg_out[n_out++] = node->out[j];
        if (n_out == 0) continue;
        for (int k = 0; k < s.n_ins; k++) {
            ir_value *v = s.ins[k];
            const ir_tensor *t = &s.vals[v->id];
            if (!v->shape_known) {
                v->t.dtype = t->dtype;
                v->t.rank = t->rank;
                memcpy(v->t.dims, t->dims, sizeof(v->t.dims));
                v->shape_known = true;
            }
            seg_in[k] = *t;
            seg_in[k].owned = false;
        }
        void *buf = NULL;
        size_t size = 0;
        ir_model *m = NULL;
        ir_tensor got[MAX_IO] = {{0}};
        if (onnx_export_nodes(g, &node, 1, s.ins, s.n_ins, seg_out, n_out, &buf, &size, &d) != KILN_OK) {
            snprintf(why, why_n, "segment %s: export: %s", lb, base_diag_text(&d));
            goto out;
        }
        kiln_status st = onnx_load_buffer(buf, size, NULL, &m, &d);
        base_free(buf);
        if (st != KILN_OK) {
            snprintf(why, why_n, "segment %s: reload: %s", lb, base_diag_text(&d));
            goto out;
        }
        ir_interp_opts opts = {.seed = 1};
        if (ir_infer_shapes(m->graph, &d) != KILN_OK || ir_interp_run(m->graph, seg_in, got, &opts, &d) != KILN_OK) {
            snprintf(why, why_n, "segment %s: run: %s", lb, base_diag_text(&d));
            ir_model_free(m);
            goto out;
        }
        ir_model_free(m);
        for (int j = 0; j < n_out; j++) {
            s.vals[seg_out[j]->id] = got[j];
            s.have[seg_out[j]->id] = true;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = g->outputs[i];
        const ir_tensor *t = v->graph == g && s.have[v->id] ? &s.vals[v->id] : v->is_const ? &v->t : NULL;
        if (!t || ir_tensor_copy(&outs[i], t) != KILN_OK) {
            snprintf(why, why_n, "segments: output '%s' has no value", v->name);
            goto out;
        }
    }
    rc = 0;
out:
    for (int i = 0; i < g->n_values; i++)
        if (s.have[i]) ir_tensor_release(&s.vals[i]);
    free(s.vals);
    free(s.have);
    free(s.ins);
    free(seg_in);
    base_diag_free(&d);
    return rc;
}

/* ---- one case --------------------------------------------------------------------- */

static int run_case(const char *case_dir, char *why, size_t n)
{
    base_diag d;
    base_diag_init(&d);
    char path[4096], sdir[4096];
    snprintf(path, sizeof(path), "%s/model.onnx", case_dir);
    snprintf(sdir, sizeof(sdir), "%s/test_data_set_0", case_dir);
    ir_model *m = NULL, *m2 = NULL;
    void *buf = NULL;
    size_t size = 0;
    ir_tensor ins[MAX_IO] = {{0}}, got[MAX_IO] = {{0}}, got2[MAX_IO] = {{0}};
    int rc = CASE_SKIP, n_in = 0;
    if (onnx_load_file(path, &m, &d) != KILN_OK || onnx_check_support(m->graph, &d) != KILN_OK) {
        snprintf(why, n, "load: %s", base_diag_text(&d));
        goto out;
    }
    ir_graph *g = m->graph;
    n_in = cases_read_set(sdir, "input", ins, MAX_IO, &d);
    if (n_in != g->n_inputs || g->n_outputs > MAX_IO) {
        snprintf(why, n, "test data: %d inputs for %d graph inputs %s", n_in, g->n_inputs, base_diag_text(&d));
        goto out;
    }
    for (int i = 0; i < n_in; i++) /* onnx 1.12 stores bfloat16 test data as uint16 */
        if (g->inputs[i]->t.dtype == KILN_BF16 && ins[i].dtype == KILN_U16) ins[i].dtype = KILN_BF16;
    if (bind_infer_run(g, ins, got, &d) != 0) {
        snprintf(why, n, "original: %s", base_diag_text(&d));
        goto out;
    }
    rc = CASE_FAIL;
    if (onnx_export_graph(g, &buf, &size, &d) != KILN_OK) {
        snprintf(why, n, "export: %s", base_diag_text(&d));
        goto out;
    }
    if (onnx_load_buffer(buf, size, NULL, &m2, &d) != KILN_OK) {
        snprintf(why, n, "reload: %s", base_diag_text(&d));
        goto out;
    }
    ir_graph *g2 = m2->graph;
    if (g2->n_inputs != g->n_inputs || g2->n_outputs != g->n_outputs) {
        snprintf(why, n, "reloaded graph has %d inputs and %d outputs, the original %d and %d", g2->n_inputs,
                 g2->n_outputs, g->n_inputs, g->n_outputs);
        goto out;
    }
    if (bind_infer_run(g2, ins, got2, &d) != 0) {
        snprintf(why, n, "reloaded: %s", base_diag_text(&d));
        goto out;
    }
    for (int i = 0; i < g->n_outputs; i++) {
        char w[512];
        if (!identical(&got[i], &got2[i], w, sizeof(w))) {
            snprintf(why, n, "output '%s': %s", g->outputs[i]->name, w);
            goto out;
        }
        ir_tensor_release(&got2[i]);
    }
    /* Random ops restart their generator in every segment: only a graph
     * with at most one of them computes the same values node by node. */
    int n_random = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n_random += g->nodes[i]->op < KILN_OP_COUNT && (ir_ops[g->nodes[i]->op].flags & IR_OPF_RANDOM);
    if (n_random <= 1) {
        if (run_segments(g, ins, got2, why, n) != 0) goto out;
        for (int i = 0; i < g->n_outputs; i++) {
            char w[512];
            if (!identical(&got[i], &got2[i], w, sizeof(w))) {
                snprintf(why, n, "segments: output '%s': %s", g->outputs[i]->name, w);
                goto out;
            }
        }
    }
    rc = CASE_PASS;
out:
    for (int i = 0; i < MAX_IO; i++) {
        ir_tensor_release(&ins[i]);
        ir_tensor_release(&got[i]);
        ir_tensor_release(&got2[i]);
    }
    base_free(buf);
    ir_model_free(m);
    ir_model_free(m2);
    base_diag_free(&d);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: roundtrip [--filter SUBSTR] [--verbose] [--timeout SECONDS] DIR...\n"
               "Exports every ONNX test model, reloads it and checks both give bit-identical outputs.\n"
               "Exit status: 0 when no case failed, 1 otherwise.\n");
}

int main(int argc, char **argv)
{
    const char *dirs[16];
    int n_dirs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) timeout_s = atoi(argv[++i]);
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            usage(stderr);
            return 2;
        } else if (n_dirs < 16) dirs[n_dirs++] = argv[i];
    }
    if (n_dirs == 0) {
        usage(stderr);
        return 2;
    }
    int total_pass = 0, total_fail = 0, total_skip = 0;
    for (int k = 0; k < n_dirs; k++) {
        char **cases;
        int n = cases_list_dirs(dirs[k], NULL, &cases);
        if (n < 0) {
            fprintf(stderr, "roundtrip: cannot read %s\n", dirs[k]);
            return 2;
        }
        const char *folder = strrchr(dirs[k], '/');
        folder = folder && folder[1] ? folder + 1 : dirs[k];
        int pass = 0, fail = 0, skip = 0;
        for (int i = 0; i < n; i++) {
            if (filter && !strstr(cases[i], filter)) continue;
            char cdir[4096], why[4096];
            snprintf(cdir, sizeof(cdir), "%s/%s", dirs[k], cases[i]);
            int rc = cases_run_isolated(run_case, cdir, timeout_s, CASE_FAIL, why, sizeof(why));
            if (rc == CASE_PASS) {
                pass++;
                if (verbose) printf("PASS  %s/%s\n", folder, cases[i]);
            } else if (rc == CASE_SKIP) {
                skip++;
                if (verbose) printf("SKIP  %s/%s: %.300s\n", folder, cases[i], why);
            } else {
                fail++;
                printf("FAIL  %s/%s: %s\n", folder, cases[i], why);
            }
            fflush(stdout);
        }
        printf("== %s: %d passed, %d failed, %d skipped (kiln cannot load or run them)\n", folder, pass, fail,
               skip);
        total_pass += pass;
        total_fail += fail;
        total_skip += skip;
        for (int i = 0; i < n; i++) free(cases[i]);
        free(cases);
    }
    printf("roundtrip: %d skipped\n", total_skip);
    printf("%d passed, %d failed\n", total_pass, total_fail);
    return total_fail ? 1 : 0;
}
