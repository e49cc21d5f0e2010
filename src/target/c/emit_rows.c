/*
 * emit_rows.c: the `c` target's pooling and row-wise groups: MaxPool and
 * AveragePool (2-D, NCHW) as kc_pool2d; Softmax, LogSoftmax,
 * LayerNormalization and GlobalAveragePool as row kernels over a [rows,
 * cols] view of the tensor.
 */
#include "target/c/c-impl.h"

#include <stdio.h>
#include <string.h>

static bool only_first_output(const ir_node *n)
{
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j]) return false;
    return true;
}

/* A 2-D pool's window geometry, with auto_pad resolved into the leading pads. */
typedef struct pool_geom {
    int64_t R, S, sh, sw, dh, dw, pt, pl;
} pool_geom;

static void pool_geometry(const ir_node *n, pool_geom *g)
{
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    g->R = ir_node_attr_ints_at(n, "kernel_shape", 0, 1);
    g->S = ir_node_attr_ints_at(n, "kernel_shape", 1, 1);
    g->sh = ir_node_attr_ints_at(n, "strides", 0, 1);
    g->sw = ir_node_attr_ints_at(n, "strides", 1, 1);
    g->dh = ir_node_attr_ints_at(n, "dilations", 0, 1);
    g->dw = ir_node_attr_ints_at(n, "dilations", 1, 1);
    g->pt = ir_node_attr_ints_at(n, "pads", 0, 0);
    g->pl = ir_node_attr_ints_at(n, "pads", 1, 0);
    c_auto_pads(n, x->dims + 2, y->dims + 2, (int64_t[]){g->R, g->S}, (int64_t[]){g->sh, g->sw},
                (int64_t[]){g->dh, g->dw}, &g->pt, &g->pl);
}

/* Whether every one of the `out` windows along a dim reads an input
 * element. On a window wholly in the padding (pads as large as the kernel,
 * or a dilated window straddling a short input) kc_pool2d's MaxPool gives
 * -inf and the interpreter 0, so such MaxPools are left to the interpreter
 * (AveragePool agrees: 0 / 0, or 0 / the padded count). */
static bool windows_read_input(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil, int64_t pad)
{
    for (int64_t o = 0; o < out; o++) {
        bool hit = false;
        for (int64_t j = 0; j < k && !hit; j++) {
            int64_t p = o * stride - pad + j * dil;
            hit = p >= 0 && p < in;
        }
        if (!hit) return false;
    }
    return true;
}

bool c_can_pool(const ir_node *n)
{
    const ir_value *x = n->in[0];
    if (x->t.dtype != KILN_F32 || x->t.rank != 4 || !only_first_output(n)) return false;
    if (n->op == KILN_OP_AVERAGE_POOL && ir_node_attr_int(n, "ceil_mode", 0) != 0) return false;
    const ir_attr *ap = ir_node_attr(n, "auto_pad");
    if (ap && ap->kind != IR_ATTR_STRING) return false;
    const ir_tensor *y = &n->out[0]->t;
    if (y->rank != 4) return false;
    if (n->op != KILN_OP_MAX_POOL) return true;
    pool_geom g;
    pool_geometry(n, &g);
    return windows_read_input(x->t.dims[2], y->dims[2], g.R, g.sh, g.dh, g.pt) &&
           windows_read_input(x->t.dims[3], y->dims[3], g.S, g.sw, g.dw, g.pl);
}

/* Rows and columns of the [rows, cols] view a row op works on; false when
 * the op's axis is not a split of the shape into leading and trailing dims. */
static bool row_view(const ir_node *n, int64_t *rows, int64_t *cols)
{
    const ir_tensor *x = &n->in[0]->t;
    int r = x->rank;
    int64_t axis;
    if (n->op == KILN_OP_GLOBAL_AVERAGE_POOL) {
        if (r < 3) return false;
        *rows = x->dims[0] * x->dims[1];
        *cols = ir_dims_numel(r - 2, x->dims + 2);
        return true;
    }
    if (n->op == KILN_OP_LAYER_NORMALIZATION) axis = ir_node_attr_int(n, "axis", -1);
    else axis = ir_node_attr_int(n, "axis", n->opset < 13 ? 1 : -1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r || (r > 0 && axis == r)) return false;
    /* Softmax-13 works along one axis: only the last one is a row view */
    if ((n->op == KILN_OP_SOFTMAX || n->op == KILN_OP_LOG_SOFTMAX) && n->opset >= 13 && axis != r - 1) return false;
    *rows = ir_dims_numel((int)axis, x->dims);
    *cols = ir_dims_numel(r - (int)axis, x->dims + axis);
    return *cols > 0;
}

bool c_can_rows(const ir_node *n)
{
    const ir_value *x = n->in[0];
    int64_t rows, cols;
    if (x->t.dtype != KILN_F32 || !only_first_output(n) || !row_view(n, &rows, &cols)) return false;
    if (n->op == KILN_OP_LAYER_NORMALIZATION) {
        const ir_value *g = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
        if (!g->is_const || g->t.dtype != KILN_F32 || ir_numel(&g->t) != cols) return false;
        if (b && (!b->is_const || b->t.dtype != KILN_F32 || ir_numel(&b->t) != cols)) return false;
    }
    return true;
}

kiln_status c_emit_pool(c_emitter *e, const sched_group *grp)
{
    const ir_node *n = grp->nodes[0];
    const ir_tensor *x = &n->in[0]->t, *y = &n->out[0]->t;
    bool is_max = n->op == KILN_OP_MAX_POOL;
    pool_geom pg;
    pool_geometry(n, &pg);
    int64_t R = pg.R, S = pg.S, sh = pg.sh, sw = pg.sw, dh = pg.dh, dw = pg.dw, pt = pg.pt, pl = pg.pl;
    int64_t planes = x->dims[0] * x->dims[1];
    int64_t cb = planes / (4 * e->o->n_threads);
    if (cb < 1) cb = 1;
    int id = grp->id;
    char buf[200];
    base_str_printf(&e->decls,
                    "static const kc_pool2d Q%d = {.kind = %s, .N = %lld, .C = %lld, .H = %lld, .W = %lld, "
                    ".OH = %lld, .OW = %lld,\n    .R = %lld, .S = %lld, .stride_h = %lld, .stride_w = %lld, "
                    ".pad_t = %lld, .pad_l = %lld, .dil_h = %lld, .dil_w = %lld,\n    .count_include_pad = %d, "
                    ".cb = %lld};\n",
                    id, is_max ? "KC_POOL_MAX" : "KC_POOL_AVG", (long long)x->dims[0], (long long)x->dims[1],
                    (long long)x->dims[2], (long long)x->dims[3], (long long)y->dims[2], (long long)y->dims[3],
                    (long long)R, (long long)S, (long long)sh, (long long)sw, (long long)pt, (long long)pl,
                    (long long)dh, (long long)dw, (int)ir_node_attr_int(n, "count_include_pad", 0), (long long)cb);
    base_str_printf(&e->init, "    stages[%d].n_rtasks = (int)kc_pool2d_rtasks(&Q%d);\n", id, id);
    base_str_printf(&e->ops, "/* group %d (pool): %s */\nstatic void op_%d(const kiln_cctx *c, int t)\n{\n"
                             "    kc_pool2d p = Q%d;\n",
                    id, grp->name, id, id);
    base_str_printf(&e->ops, "    p.x = %s;\n", c_ptr(e, n->in[0], "float", buf, sizeof(buf)));
    base_str_printf(&e->ops, "    p.y = %s;\n", c_ptr(e, n->out[0], "float", buf, sizeof(buf)));
    base_str_cat(&e->ops, "    kc_pool2d_rtask(&p, t);\n}\n\n");
    return KILN_OK;
}

kiln_status c_emit_rows(c_emitter *e, const sched_group *grp)
{
    const ir_node *n = grp->nodes[0];
    int64_t rows, cols;
    if (!row_view(n, &rows, &cols)) return KILN_ERR_INTERNAL;
    int64_t rb = (rows + 4 * e->o->n_threads - 1) / (4 * e->o->n_threads);
    if (rb < 1) rb = 1;
    int id = grp->id;
    char buf[200];
    const char *fn = n->op == KILN_OP_LAYER_NORMALIZATION   ? "kc_layernorm_rtask"
                     : n->op == KILN_OP_GLOBAL_AVERAGE_POOL ? "kc_row_mean_rtask"
                                                            : "kc_softmax_rtask";
    double eps = 1e-5;
    const ir_attr *ea = ir_node_attr(n, "epsilon");
    if (ea && ea->kind == IR_ATTR_FLOAT) eps = ea->f;
    char epsb[48];
    base_str_printf(&e->decls, "static const kc_rows R%d = {.rows = %lld, .cols = %lld, .rb = %lld, .eps = %s, .log = %d};\n",
                    id, (long long)rows, (long long)cols, (long long)rb, c_float_lit(eps, epsb, sizeof(epsb)),
                    n->op == KILN_OP_LOG_SOFTMAX);
    base_str_printf(&e->init, "    stages[%d].n_rtasks = (int)kc_rows_rtasks(&R%d);\n", id, id);
    base_str_printf(&e->ops, "/* group %d (rows): %s */\nstatic void op_%d(const kiln_cctx *c, int t)\n{\n"
                             "    kc_rows p = R%d;\n",
                    id, grp->name, id, id);
    base_str_printf(&e->ops, "    p.x = %s;\n", c_ptr(e, n->in[0], "float", buf, sizeof(buf)));
    base_str_printf(&e->ops, "    p.y = %s;\n", c_ptr(e, n->out[0], "float", buf, sizeof(buf)));
    if (n->op == KILN_OP_LAYER_NORMALIZATION) {
        base_str_printf(&e->ops, "    p.gamma = %s;\n", c_ptr(e, n->in[1], "float", buf, sizeof(buf)));
        if (n->n_in > 2 && n->in[2])
            base_str_printf(&e->ops, "    p.beta = %s;\n", c_ptr(e, n->in[2], "float", buf, sizeof(buf)));
    }
    base_str_printf(&e->ops, "    %s(&p, t);\n}\n\n", fn);
    return KILN_OK;
}
