/*
 * test_onnx.c: the ONNX loader on valid and malformed models: truncation,
 * raw_data sizes, huge and negative dims, external data confined to the
 * model's folder, cycles, missing inputs, unsupported ops, allocation
 * failures.
 */
#include "ir/interp.h"
#include "model_builder.h"
#include "onnx/onnx.h"
#include "unit.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const float six[6] = {-1, 2, -3, 4, -5, 6};

/* y = Relu(x) + w, w a [2,3] initializer. */
static void relu_add_model(mb_model *m)
{
    mb_init(m, 17);
    mb_input(m, "x", KILN_F32, 2, (int64_t[]){2, 3});
    mb_init_f32(m, "w", 2, (int64_t[]){2, 3}, six, 6);
    mb_node(m, "Relu", "relu", "x", NULL, "r");
    mb_node(m, "Add", "add", "r", "w", "y");
    mb_output(m, "y");
}

/* Loads buf; returns the status and leaves the messages in d. */
static kiln_status load(const void *buf, size_t n, const char *dir, base_diag *d)
{
    ir_model *model = NULL;
    kiln_status st = onnx_load_buffer(buf, n, dir, &model, d);
    ir_model_free(model);
    return st;
}

UNIT_TEST(loads_and_runs_a_small_model)
{
    static mb_model m; /* large: kept off the stack */
    relu_add_model(&m);
    size_t n;
    void *buf = mb_pack(&m, &n);
    base_diag d;
    base_diag_init(&d);
    ir_model *model = NULL;
    UNIT_CHECK_EQ_INT(onnx_load_buffer(buf, n, NULL, &model, &d), KILN_OK);
    if (model) {
        ir_graph *g = model->graph;
        UNIT_CHECK_EQ_INT(g->n_inputs, 1);
        UNIT_CHECK_EQ_INT(g->n_outputs, 1);
        UNIT_CHECK_EQ_INT(g->n_nodes, 2);
        UNIT_CHECK_EQ_INT(ir_infer_shapes(g, &d), KILN_OK);
        UNIT_CHECK(g->outputs[0]->shape_known && g->outputs[0]->t.dims[1] == 3);
        ir_tensor x = {0}, y = {0};
        UNIT_CHECK_EQ_INT(ir_tensor_alloc(&x, KILN_F32, 2, (int64_t[]){2, 3}), KILN_OK);
        for (int i = 0; i < 6; i++) ((float *)x.data)[i] = (float)(i - 3);
        UNIT_CHECK_EQ_INT(ir_interp_run(g, &x, &y, NULL, &d), KILN_OK);
        if (y.data) {
            const float want[6] = {-1, 2, -3, 4, -4, 8};
            for (int i = 0; i < 6; i++) UNIT_CHECK(((float *)y.data)[i] == want[i]);
        }
        /* a wrongly shaped input is an error, not a wrong answer */
        ir_tensor bad = {0};
        UNIT_CHECK_EQ_INT(ir_tensor_alloc(&bad, KILN_F32, 2, (int64_t[]){3, 2}), KILN_OK);
        ir_tensor y2 = {0};
        UNIT_CHECK_EQ_INT(ir_interp_run(g, &bad, &y2, NULL, &d), KILN_ERR_SHAPE);
        UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "input 'x'");
        ir_tensor_release(&bad);
        ir_tensor_release(&x);
        ir_tensor_release(&y);
    }
    ir_model_free(model);
    base_diag_free(&d);
    free(buf);
}

UNIT_TEST(every_truncation_is_an_error)
{
    static mb_model m; /* large: kept off the stack */
    relu_add_model(&m);
    size_t n;
    unsigned char *buf = mb_pack(&m, &n);
    for (size_t len = 0; len < n; len++) {
        base_diag d;
        base_diag_init(&d);
        kiln_status st = load(buf, len, NULL, &d);
        UNIT_CHECK(st == KILN_ERR_INVALID_MODEL || st == KILN_ERR_UNSUPPORTED);
        UNIT_CHECK(d.n_msgs > 0);
        base_diag_free(&d);
    }
    free(buf);
}

UNIT_TEST(raw_data_must_match_the_shape)
{
    static mb_model m; /* large: kept off the stack */
    relu_add_model(&m);
    m.inits[0].raw_data.len = 5 * sizeof(float);
    size_t n;
    void *buf = mb_pack(&m, &n);
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(load(buf, n, NULL, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "tensor 'w': raw_data has 20 bytes, but f32[2,3] needs 24");
    base_diag_free(&d);
    free(buf);
}

UNIT_TEST(huge_and_negative_dims_are_rejected)
{
    const int64_t bad[3][2] = {{-2, 3}, {(int64_t)1 << 62, 4}, {(int64_t)1 << 31, (int64_t)1 << 31}};
    for (int k = 0; k < 3; k++) {
        static mb_model m; /* large: kept off the stack */
        relu_add_model(&m);
        m.init_dims[0][0] = bad[k][0];
        m.init_dims[0][1] = bad[k][1];
        size_t n;
        void *buf = mb_pack(&m, &n);
        base_diag d;
        base_diag_init(&d);
        UNIT_CHECK_EQ_INT(load(buf, n, NULL, &d), KILN_ERR_INVALID_MODEL);
        UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "tensor 'w'");
        base_diag_free(&d);
        free(buf);
    }
    /* a graph input with a negative dim */
    static mb_model m; /* large: kept off the stack */
    relu_add_model(&m);
    m.dims[0][0].dim_value = -5;
    size_t n;
    void *buf = mb_pack(&m, &n);
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(load(buf, n, NULL, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "input 'x': dimension 0 is -5");
    base_diag_free(&d);
    free(buf);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    UNIT_CHECK(f != NULL);
    if (!f) return;
    UNIT_CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* Loads relu_add with w stored externally at `location`, from dir. */
static kiln_status load_external(const char *dir, const char *location, long long offset, long long length,
                                 base_diag *d)
{
    static mb_model m; /* large: kept off the stack */
    relu_add_model(&m);
    mb_external(&m, &m.inits[0], location, offset, length);
    size_t n;
    void *buf = mb_pack(&m, &n);
    kiln_status st = load(buf, n, dir, d);
    free(buf);
    return st;
}

UNIT_TEST(external_data_stays_in_the_model_folder)
{
    char dir[512], outside[512], path[1024];
    snprintf(dir, sizeof(dir), "%s/model", unit_tmpdir());
    snprintf(outside, sizeof(outside), "%s/secret.bin", unit_tmpdir());
    UNIT_CHECK(mkdir(dir, 0755) == 0);
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    snprintf(path, sizeof(path), "%s/weights.bin", dir);
    write_file(path, data, sizeof(data));
    write_file(outside, data, sizeof(data));
    base_diag d;
    base_diag_init(&d);

    UNIT_CHECK_EQ_INT(load_external(dir, "weights.bin", 8, 24, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(load_external(dir, "weights.bin", 16, -1, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "has 32 bytes, the tensor needs 24 at offset 16");
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(load_external(dir, "weights.bin", 0, 20, &d), KILN_ERR_INVALID_MODEL);
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(load_external(dir, outside, 0, -1, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "must be relative");
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(load_external(dir, "../secret.bin", 0, -1, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "leaves the model's folder");
    base_diag_clear(&d);
    snprintf(path, sizeof(path), "%s/link.bin", dir);
    UNIT_CHECK(symlink(outside, path) == 0);
    UNIT_CHECK_EQ_INT(load_external(dir, "link.bin", 0, -1, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "resolves outside");
    base_diag_clear(&d);
    snprintf(path, sizeof(path), "%s/hard.bin", dir);
    UNIT_CHECK(link(outside, path) == 0);
    UNIT_CHECK_EQ_INT(load_external(dir, "hard.bin", 0, -1, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "hard link");
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(load_external(dir, "missing.bin", 0, -1, &d), KILN_ERR_IO);
    base_diag_clear(&d);
    UNIT_CHECK_EQ_INT(load_external(NULL, "weights.bin", 0, -1, &d), KILN_ERR_INVALID_MODEL);
    base_diag_free(&d);
}

UNIT_TEST(cycles_and_missing_inputs_are_reported)
{
    static mb_model m; /* large: kept off the stack */
    mb_init(&m, 17);
    mb_input(&m, "x", KILN_F32, 1, (int64_t[]){4});
    mb_node(&m, "Add", "a", "x", "c", "b");
    mb_node(&m, "Relu", "r", "b", NULL, "c");
    mb_output(&m, "c");
    size_t n;
    void *buf = mb_pack(&m, &n);
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(load(buf, n, NULL, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "cycle");
    free(buf);

    base_diag_clear(&d);
    mb_init(&m, 17);
    mb_input(&m, "x", KILN_F32, 1, (int64_t[]){4});
    mb_node(&m, "Add", "a", "x", "nowhere", "y");
    mb_output(&m, "y");
    mb_output(&m, "ghost");
    buf = mb_pack(&m, &n);
    UNIT_CHECK_EQ_INT(load(buf, n, NULL, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "node 'a' (Add): input 'nowhere' is not defined");
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "output 'ghost' is not produced");
    free(buf);

    base_diag_clear(&d);
    mb_init(&m, 17);
    mb_input(&m, "x", KILN_F32, 1, (int64_t[]){4});
    mb_node(&m, "Relu", "r1", "x", NULL, "y");
    mb_node(&m, "Relu", "r2", "x", NULL, "y");
    mb_output(&m, "y");
    buf = mb_pack(&m, &n);
    UNIT_CHECK_EQ_INT(load(buf, n, NULL, &d), KILN_ERR_INVALID_MODEL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "defined twice");
    free(buf);
    base_diag_free(&d);
}

UNIT_TEST(unsupported_ops_are_all_listed_at_once)
{
    static mb_model m; /* large: kept off the stack */
    mb_init(&m, 17);
    mb_input(&m, "x", KILN_F32, 1, (int64_t[]){4});
    mb_node(&m, "FancyOp", "f1", "x", NULL, "a");
    mb_node(&m, "Relu", "r", "a", NULL, "b");
    mb_node(&m, "SequenceEmpty", "s1", NULL, NULL, "c");
    mb_node(&m, "OtherOp", "f2", "b", NULL, "y");
    mb_output(&m, "y");
    size_t n;
    void *buf = mb_pack(&m, &n);
    base_diag d;
    base_diag_init(&d);
    ir_model *model = NULL;
    UNIT_CHECK_EQ_INT(onnx_load_buffer(buf, n, NULL, &model, &d), KILN_OK);
    if (model) {
        UNIT_CHECK_EQ_INT(onnx_check_support(model->graph, &d), KILN_ERR_UNSUPPORTED);
        const char *t = base_diag_text(&d);
        UNIT_CHECK_STR_CONTAINS(t, "3 nodes");
        UNIT_CHECK_STR_CONTAINS(t, "node 'f1' (FancyOp): unknown op");
        UNIT_CHECK_STR_CONTAINS(t, "node 'f2' (OtherOp): unknown op");
        UNIT_CHECK_STR_CONTAINS(t, "node 's1' (SequenceEmpty): sequences and optionals are not supported");
    }
    ir_model_free(model);
    base_diag_free(&d);
    free(buf);
}

UNIT_TEST(opset_out_of_range_is_reported)
{
    static mb_model m; /* large: kept off the stack */
    relu_add_model(&m);
    m.opset.version = 99;
    size_t n;
    void *buf = mb_pack(&m, &n);
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(load(buf, n, NULL, &d), KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "opset 99");
    base_diag_free(&d);
    free(buf);
}

UNIT_TEST(allocation_failures_become_errors)
{
    static mb_model m; /* large: kept off the stack */
    relu_add_model(&m);
    size_t n;
    void *buf = mb_pack(&m, &n);
    bool loaded = false;
    for (long k = 0; k < 10000 && !loaded; k++) {
        base_diag d;
        base_diag_init(&d);
        ir_model *model = NULL;
        base_fail_alloc_after(k);
        kiln_status st = onnx_load_buffer(buf, n, NULL, &model, &d);
        base_fail_alloc_after(-1);
        UNIT_CHECK(st == KILN_OK || st == KILN_ERR_OOM || st == KILN_ERR_INVALID_MODEL);
        loaded = st == KILN_OK;
        ir_model_free(model);
        base_diag_free(&d);
    }
    UNIT_CHECK(loaded);
    free(buf);
}
