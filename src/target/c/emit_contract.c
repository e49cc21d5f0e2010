/*
 * emit_contract.c: the `c` target's contraction groups: Conv (NCHW, 2-D)
 * and MatMul / Gemm, with their fused epilogues (Bolt 3.2: bias, residual,
 * activation, scale), as calls to the kc_conv2d / kc_gemm templates.
 *
 * Constant weights are packed once at load (prepare) into the ISA's panel
 * layout; tile sizes, rTask counts and scratch sizes are computed when the
 * program initialises, by the same kernel code that runs the tiles.
 */
#include "target/c/c-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const kc_act_names[PASS_ACT_COUNT] = {
    [PASS_ACT_NONE] = "KC_ACT_NONE",          [PASS_ACT_RELU] = "KC_ACT_RELU",
    [PASS_ACT_CLIP] = "KC_ACT_CLIP",          [PASS_ACT_LEAKY_RELU] = "KC_ACT_LEAKY_RELU",
    [PASS_ACT_SIGMOID] = "KC_ACT_SIGMOID",    [PASS_ACT_TANH] = "KC_ACT_TANH",
    [PASS_ACT_GELU] = "KC_ACT_GELU",          [PASS_ACT_GELU_TANH] = "KC_ACT_GELU_TANH",
    [PASS_ACT_SILU] = "KC_ACT_SILU",          [PASS_ACT_HARD_SWISH] = "KC_ACT_HARD_SWISH",
    [PASS_ACT_HARD_SIGMOID] = "KC_ACT_HARD_SIGMOID", [PASS_ACT_SOFTPLUS] = "KC_ACT_SOFTPLUS",
};

static bool is_f32(const ir_value *v) { return v && v->shape_known && v->t.dtype == KILN_F32; }

bool c_can_contract(const ir_node *n)
{
    const ir_value *a = n->in[0], *b = n->in[1];
    if (!is_f32(a) || !is_f32(b) || !is_f32(n->out[0])) return false;
    if (n->op == KILN_OP_CONV) {
        if (a->t.rank != 4 || b->t.rank != 4 || !b->is_const) return false;
        if (n->n_in > 2 && n->in[2] && (!n->in[2]->is_const || n->in[2]->t.dtype != KILN_F32)) return false;
        const ir_attr *ap = ir_node_attr(n, "auto_pad");
        if (ap && ap->kind != IR_ATTR_STRING) return false;
        return true;
    }
    if (n->op == KILN_OP_GEMM) {
        if (a->t.rank != 2 || b->t.rank != 2) return false;
        if (n->n_in > 2 && n->in[2]) {
            const ir_value *cv = n->in[2];
            int64_t N = n->out[0]->t.dims[1];
            if (!cv->is_const || cv->t.dtype != KILN_F32 || ir_node_attr_float(n, "beta", 1.0f) != 1.0f) return false;
            bool per_col = (cv->t.rank == 1 && cv->t.dims[0] == N) || (cv->t.rank == 2 && cv->t.dims[0] == 1 && cv->t.dims[1] == N);
            if (!per_col) return false;
        }
        return true;
    }
    /* MatMul: B 2-D, or batched with exactly A's batch dims */
    if (a->t.rank < 2 || b->t.rank < 2) return false;
    if (b->t.rank == 2) return true;
    if (a->t.rank != b->t.rank) return false;
    for (int i = 0; i < a->t.rank - 2; i++)
        if (a->t.dims[i] != b->t.dims[i]) return false;
    return true;
}

static void emit_epilogue_ptrs(c_emitter *e, const pass_epilogue *ep, const char *var)
{
    char buf[200];
    if (ep->bias) base_str_printf(&e->ops, "    %s.ep.bias = %s;\n", var, c_ptr(e, ep->bias, "float", buf, sizeof(buf)));
    if (ep->residual)
        base_str_printf(&e->ops, "    %s.ep.residual = %s;\n", var, c_ptr(e, ep->residual, "float", buf, sizeof(buf)));
}

kiln_status c_emit_conv(c_emitter *e, const sched_group *grp)
{
    const ir_node *n = grp->nodes[0];
    const ir_tensor *x = &n->in[0]->t, *w = &n->in[1]->t;
    const ir_value *y = grp->nodes[grp->n_nodes - 1]->out[0];
    const ir_tensor *yt = &n->out[0]->t;
    pass_epilogue ep;
    KILN_TRY(pass_group_epilogue(grp, &ep, e->d));
    int64_t H = x->dims[2], W = x->dims[3], R = w->dims[2], S = w->dims[3];
    int64_t sh = ir_node_attr_ints_at(n, "strides", 0, 1), sw = ir_node_attr_ints_at(n, "strides", 1, 1);
    int64_t dh = ir_node_attr_ints_at(n, "dilations", 0, 1), dw = ir_node_attr_ints_at(n, "dilations", 1, 1);
    int64_t pt = ir_node_attr_ints_at(n, "pads", 0, 0), pl = ir_node_attr_ints_at(n, "pads", 1, 0);
    int64_t OH = yt->dims[2], OW = yt->dims[3];
    c_auto_pads(n, (int64_t[]){H, W}, (int64_t[]){OH, OW}, (int64_t[]){R, S}, (int64_t[]){sh, sw},
                (int64_t[]){dh, dw}, &pt, &pl);
    int id = grp->id, slot = e->n_packed++;
    char buf[200], fa[32], fb[32];
    base_str_printf(&e->decls, "static kc_conv2d P%d;\n", id);
    base_str_printf(&e->init,
                    "    P%d = (kc_conv2d){.N = %lld, .C = %lld, .H = %lld, .W = %lld, .K = %lld, .OH = %lld, "
                    ".OW = %lld, .R = %lld, .S = %lld,\n        .stride_h = %lld, .stride_w = %lld, .pad_t = %lld, "
                    ".pad_l = %lld, .dil_h = %lld, .dil_w = %lld, .group = %lld,\n"
                    "        .ep = {.bias_per_row = 1, .act = %s, .alpha = %s, .beta = %s}};\n"
                    "    kc_conv2d_default_tiles(&P%d, %d);\n"
                    "    stages[%d].n_rtasks = (int)kc_conv2d_rtasks(&P%d);\n"
                    "    if (kc_conv2d_scratch_bytes(&P%d) > scratch) scratch = kc_conv2d_scratch_bytes(&P%d);\n"
                    "    packed_ofs[%d] = packed;\n"
                    "    packed += (kc_conv2d_packed_w_bytes(&P%d) + 63) & ~(size_t)63;\n",
                    id, (long long)x->dims[0], (long long)x->dims[1], (long long)H, (long long)W,
                    (long long)yt->dims[1], (long long)OH, (long long)OW, (long long)R, (long long)S, (long long)sh,
                    (long long)sw, (long long)pt, (long long)pl, (long long)dh, (long long)dw,
                    (long long)ir_node_attr_int(n, "group", 1), kc_act_names[ep.act], c_float_lit(ep.alpha, fa, sizeof(fa)),
                    c_float_lit(ep.beta, fb, sizeof(fb)), id, e->o->n_threads, id, id, id, id, slot, id);
    base_str_printf(&e->prep, "    kc_conv2d_pack_w(&P%d, (const float *)(w + %llu), (float *)(pk + packed_ofs[%d]));\n",
                    id, (unsigned long long)e->p->place[n->in[1]->id].offset, slot);
    base_str_printf(&e->ops, "/* group %d (conv): %s */\nstatic void op_%d(const kiln_cctx *c, int t)\n{\n"
                             "    kc_conv2d p = P%d;\n",
                    id, grp->name, id, id);
    base_str_printf(&e->ops, "    p.x = %s;\n", c_ptr(e, n->in[0], "float", buf, sizeof(buf)));
    base_str_printf(&e->ops, "    p.w_packed = (const float *)(c->packed + packed_ofs[%d]);\n", slot);
    base_str_printf(&e->ops, "    p.y = %s;\n", c_ptr(e, y, "float", buf, sizeof(buf)));
    emit_epilogue_ptrs(e, &ep, "p");
    base_str_cat(&e->ops, "    kc_conv2d_rtask(&p, t, c->scratch);\n}\n\n");
    return KILN_OK;
}

kiln_status c_emit_gemm(c_emitter *e, const sched_group *grp)
{
    const ir_node *n = grp->nodes[0];
    const ir_value *av = n->in[0], *bv = n->in[1];
    const ir_tensor *a = &av->t, *b = &bv->t, *yt = &n->out[0]->t;
    const ir_value *y = grp->nodes[grp->n_nodes - 1]->out[0];
    pass_epilogue ep;
    KILN_TRY(pass_group_epilogue(grp, &ep, e->d));
    int trans_a = 0, trans_b = 0;
    float alpha = ep.scale;
    int64_t M, N, K, batch = 1, a_bs = 0, b_bs = 0, c_bs = 0;
    if (n->op == KILN_OP_GEMM) {
        trans_a = (int)ir_node_attr_int(n, "transA", 0);
        trans_b = (int)ir_node_attr_int(n, "transB", 0);
        alpha *= ir_node_attr_float(n, "alpha", 1.0f);
        M = yt->dims[0];
        N = yt->dims[1];
        K = trans_a ? a->dims[0] : a->dims[1];
    } else {
        M = a->dims[a->rank - 2];
        K = a->dims[a->rank - 1];
        N = b->dims[b->rank - 1];
        int64_t ab = ir_dims_numel(a->rank - 2, a->dims);
        if (b->rank == 2) {
            M *= ab; /* rows of every batch are one tall matrix */
        } else {
            batch = ab;
            a_bs = M * K;
            b_bs = K * N;
            c_bs = M * N;
        }
    }
    int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
    bool packed = bv->is_const && batch == 1;
    int id = grp->id, slot = packed ? e->n_packed++ : -1;
    char buf[200], fa[32], fb[32], fs[32];
    base_str_printf(&e->decls, "static kc_gemm G%d;\n", id);
    base_str_printf(&e->init,
                    "    G%d = (kc_gemm){.M = %lld, .N = %lld, .K = %lld, .batch = %lld, .lda = %lld, "
                    ".a_batch_stride = %lld, .trans_a = %d,\n        .ldb = %lld, .b_batch_stride = %lld, "
                    ".trans_b = %d, .ldc = %lld, .c_batch_stride = %lld, .alpha = %s,\n"
                    "        .ep = {.bias_per_row = 0, .ldr = %lld, .r_batch_stride = %lld, .act = %s, .alpha = %s, "
                    ".beta = %s}};\n"
                    "    kc_gemm_default_tiles(%lld, %lld, %lld, %lld, %d, &G%d.mb, &G%d.nb);\n"
                    "    stages[%d].n_rtasks = (int)kc_gemm_rtasks(&G%d);\n"
                    "    if (kc_gemm_scratch_bytes(&G%d) > scratch) scratch = kc_gemm_scratch_bytes(&G%d);\n",
                    id, (long long)M, (long long)N, (long long)K, (long long)batch, (long long)lda, (long long)a_bs,
                    trans_a, (long long)ldb, (long long)b_bs, trans_b, (long long)N, (long long)c_bs,
                    c_float_lit(alpha, fs, sizeof(fs)), (long long)N, (long long)c_bs, kc_act_names[ep.act],
                    c_float_lit(ep.alpha, fa, sizeof(fa)), c_float_lit(ep.beta, fb, sizeof(fb)), (long long)batch,
                    (long long)M, (long long)N, (long long)K, e->o->n_threads, id, id, id, id, id, id);
    if (packed) {
        base_str_printf(&e->init,
                        "    packed_ofs[%d] = packed;\n    packed += (kc_gemm_packed_b_bytes(%lld, %lld) + 63) & "
                        "~(size_t)63;\n",
                        slot, (long long)K, (long long)N);
        const sched_place *pl = &e->p->place[bv->id];
        base_str_printf(&e->prep,
                        "    kc_gemm_pack_b((const float *)(w + %llu), %lld, %d, %lld, %lld, (float *)(pk + "
                        "packed_ofs[%d]));\n",
                        (unsigned long long)pl->offset, (long long)ldb, trans_b, (long long)K, (long long)N, slot);
    }
    base_str_printf(&e->ops, "/* group %d (gemm): %s */\nstatic void op_%d(const kiln_cctx *c, int t)\n{\n"
                             "    kc_gemm g = G%d;\n",
                    id, grp->name, id, id);
    base_str_printf(&e->ops, "    g.A = %s;\n", c_ptr(e, av, "float", buf, sizeof(buf)));
    if (packed) base_str_printf(&e->ops, "    g.B_packed = (const float *)(c->packed + packed_ofs[%d]);\n", slot);
    else base_str_printf(&e->ops, "    g.B = %s;\n", c_ptr(e, bv, "float", buf, sizeof(buf)));
    base_str_printf(&e->ops, "    g.C = %s;\n", c_ptr(e, y, "float", buf, sizeof(buf)));
    emit_epilogue_ptrs(e, &ep, "g");
    base_str_cat(&e->ops, "    kc_gemm_rtask(&g, t, c->scratch);\n}\n\n");
    return KILN_OK;
}
