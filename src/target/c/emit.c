/*
 * emit.c: the `c` target: generated C for a partitioned, planned graph.
 *
 * One C file per model: each group becomes an rOperator `op_<id>(c, t)`
 * computing rTask t (Rammer 3.1), calling the kernel templates of
 * kernels/kc.h for contractions, pooling and row normalisations, and
 * looping directly for fused elementwise groups and data movement. The
 * stage table is the rProgram: stages run in order on the worker pool, with
 * a barrier only where a stage touches bytes an unfinished stage reads or
 * writes. Groups without a template run as fallback segments on the
 * reference interpreter inside the runtime. Code names the ONNX nodes it
 * comes from.
 */
#include "target/c/c-impl.h"

#include "onnx/onnx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *c_type(kiln_dtype t)
{
    switch (t) {
    case KILN_F32: return "float";
    case KILN_F64: return "double";
    case KILN_I64: return "int64_t";
    case KILN_I32: return "int32_t";
    case KILN_I16: return "int16_t";
    case KILN_I8: return "int8_t";
    case KILN_U8: return "uint8_t";
    case KILN_U16: return "uint16_t";
    case KILN_U32: return "uint32_t";
    case KILN_U64: return "uint64_t";
    case KILN_BOOL: return "uint8_t";
    default: return NULL;
    }
}

const char *c_float_lit(double v, char *buf, size_t n)
{
    float f = (float)v;
    if (f != f) snprintf(buf, n, "NAN");
    else if (f == (float)INFINITY) snprintf(buf, n, "INFINITY");
    else if (f == -(float)INFINITY) snprintf(buf, n, "(-INFINITY)");
    else snprintf(buf, n, "%af", (double)f);
    return buf;
}

int c_collapse(int rank, int64_t *dims, int n, int64_t **str, int64_t scalar_stride)
{
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1) continue;
        bool merge = r > 0;
        for (int k = 0; k < n && merge; k++) merge = str[k][r - 1] == str[k][d] * dims[d];
        if (merge) {
            dims[r - 1] *= dims[d];
            for (int k = 0; k < n; k++) str[k][r - 1] = str[k][d];
        } else {
            dims[r] = dims[d];
            for (int k = 0; k < n; k++) str[k][r] = str[k][d];
            r++;
        }
    }
    if (r == 0) {
        dims[0] = 1;
        for (int k = 0; k < n; k++) str[k][0] = scalar_stride;
        r = 1;
    }
    return r;
}

void c_auto_pads(const ir_node *n, const int64_t *in_hw, const int64_t *out_hw, const int64_t *k_hw,
                 const int64_t *stride, const int64_t *dil, int64_t *pt, int64_t *pl)
{
    const char *ap = ir_node_attr_str(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "VALID") == 0) {
        *pt = *pl = 0;
        return;
    }
    if (strcmp(ap, "SAME_UPPER") != 0 && strcmp(ap, "SAME_LOWER") != 0) return;
    int64_t total[2];
    for (int i = 0; i < 2; i++) {
        total[i] = (out_hw[i] - 1) * stride[i] + (k_hw[i] - 1) * dil[i] + 1 - in_hw[i];
        if (total[i] < 0) total[i] = 0;
    }
    bool lower = strcmp(ap, "SAME_LOWER") == 0;
    *pt = lower ? total[0] - total[0] / 2 : total[0] / 2;
    *pl = lower ? total[1] - total[1] / 2 : total[1] / 2;
}

const char *c_ptr(const c_emitter *e, const ir_value *v, const char *ctype, char *buf, size_t n)
{
    const sched_place *pl = &e->p->place[v->id];
    switch (pl->loc) {
    case SCHED_LOC_ARENA: snprintf(buf, n, "((%s *)(c->arena + %llu))", ctype, (unsigned long long)pl->offset); break;
    case SCHED_LOC_WEIGHTS:
        snprintf(buf, n, "((const %s *)(c->weights + %llu))", ctype, (unsigned long long)pl->offset);
        break;
    case SCHED_LOC_INPUT: snprintf(buf, n, "((const %s *)c->io[%llu])", ctype, (unsigned long long)pl->offset); break;
    case SCHED_LOC_OUTPUT:
        snprintf(buf, n, "((%s *)c->io[%d])", ctype, e->g->n_inputs + (int)pl->offset);
        break;
    default: KILN_ASSERT(!"value without a place");
    }
    return buf;
}

/* ---- what compiles -------------------------------------------------------------- */

static bool c_can_compile(const ir_node *n)
{
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] && !n->out[j]->shape_known) return false;
    switch (n->op) {
    case KILN_OP_CONV: case KILN_OP_MAT_MUL: case KILN_OP_GEMM: return c_can_contract(n);
    case KILN_OP_MAX_POOL: case KILN_OP_AVERAGE_POOL: return c_can_pool(n);
    case KILN_OP_SOFTMAX: case KILN_OP_LOG_SOFTMAX: case KILN_OP_LAYER_NORMALIZATION:
    case KILN_OP_GLOBAL_AVERAGE_POOL:
        return c_can_rows(n);
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY:
        return true;
    case KILN_OP_DROPOUT: return n->n_in < 3 || !n->in[2] || (n->in[2]->is_const && ir_get_f64(&n->in[2]->t, 0) == 0);
    default:
        if (n->op < KILN_OP_COUNT && (ir_ops[n->op].flags & IR_OPF_ELEMENTWISE)) return c_can_elementwise(n);
        return c_can_move(n);
    }
}

/* ---- waits ------------------------------------------------------------------------- */

/* wait[s]: how many leading stages stage s needs finished by every vEU
 * first (cprog.h; 0: none). One past the latest earlier stage it depends on
 * (sched_group_depends), unless a wait earlier in every vEU's order already
 * covers it (the waits only grow: `covered`). A fallback segment waits for
 * every stage before it, and the stage after it waits for it. Alias groups
 * have no code and never wait. */
static void plan_waits(const c_emitter *e, int *wait)
{
    const sched_program *p = e->p;
    int covered = 0, last_fallback = -1;
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        wait[s] = 0;
        if (grp->kind == SCHED_GROUP_ALIAS) continue;
        bool fallback = grp->kind == SCHED_GROUP_FALLBACK;
        int need = fallback ? s : last_fallback + 1;
        for (int j = s - 1; j >= KILN_MAX(covered, need); j--)
            if (p->groups[j]->kind != SCHED_GROUP_ALIAS && sched_group_depends(e->g, p, p->groups[j], grp)) {
                need = j + 1;
                break;
            }
        if (need > covered) wait[s] = covered = need;
        if (fallback) last_fallback = s;
    }
}

/* ---- fallback segments ------------------------------------------------------------------ */

static kiln_status emit_fallback(c_emitter *e, const sched_group *grp)
{
    int seg;
    KILN_TRY(target_add_segment(e->out, e->g, grp, &seg, e->d));
    base_str_printf(&e->ops,
                    "/* group %d (fallback segment %d, reference interpreter): %s */\n"
                    "static void op_%d(const kiln_cctx *c, int t)\n{\n    (void)t;\n"
                    "    c->host->run_segment(c->host, c, %d);\n}\n\n",
                    grp->id, seg, grp->name, grp->id, seg);
    base_str_printf(&e->init, "    stages[%d].n_rtasks = 1;\n", grp->id);
    return KILN_OK;
}

/* ---- the program -------------------------------------------------------------------------- */

/* Graph outputs that no group writes (an input or a constant passed
 * through) are copied in a last stage. */
static void emit_output_copies(c_emitter *e, int id, bool *any)
{
    base_str body;
    base_str_init(&body);
    for (int i = 0; i < e->g->n_outputs; i++) {
        const ir_value *v = e->g->outputs[i];
        const sched_place *pl = &e->p->place[v->id];
        if (pl->loc == SCHED_LOC_OUTPUT && pl->offset == (uint64_t)i) continue;
        char src[160];
        c_ptr(e, v, "uint8_t", src, sizeof(src));
        base_str_printf(&body, "    memcpy(c->io[%d], %s, %zu); /* output '%s' */\n", e->g->n_inputs + i, src,
                        v->t.nbytes, v->name);
    }
    *any = body.len > 0;
    if (*any)
        base_str_printf(&e->ops, "/* stage %d: graph outputs that are inputs or constants */\n"
                                 "static void op_%d(const kiln_cctx *c, int t)\n{\n    (void)t;\n%s}\n\n",
                        id, id, base_str_get(&body));
    base_str_free(&body);
}

static kiln_status emit_program(c_emitter *e, base_str *src)
{
    const sched_program *p = e->p;
    kiln_status st = KILN_OK;
    for (int s = 0; s < p->n_groups && st == KILN_OK; s++) {
        const sched_group *grp = p->groups[s];
        switch (grp->kind) {
        case SCHED_GROUP_CONV: st = c_emit_conv(e, grp); break;
        case SCHED_GROUP_GEMM: st = c_emit_gemm(e, grp); break;
        case SCHED_GROUP_POOL: st = c_emit_pool(e, grp); break;
        case SCHED_GROUP_ROWS: st = c_emit_rows(e, grp); break;
        case SCHED_GROUP_ELEMENTWISE: st = c_emit_elementwise(e, grp); break;
        case SCHED_GROUP_MOVE: st = c_emit_move(e, grp); break;
        case SCHED_GROUP_FALLBACK: st = emit_fallback(e, grp); break;
        case SCHED_GROUP_ALIAS:
            base_str_printf(&e->ops, "/* group %d (alias, no code): %s */\n", grp->id, grp->name);
            break;
        default: st = KILN_ERR_INTERNAL;
        }
    }
    if (st != KILN_OK) return st;
    bool copies;
    emit_output_copies(e, p->n_groups, &copies);
    int n_stages = p->n_groups + (copies ? 1 : 0);
    int *wait = base_calloc((size_t)n_stages + 1, sizeof(int));
    if (!wait) return KILN_ERR_OOM;
    plan_waits(e, wait);
    if (copies) {
        wait[p->n_groups] = p->n_groups; /* every stage before it */
        base_str_printf(&e->init, "    stages[%d].n_rtasks = 1;\n", p->n_groups);
    }

    base_str_printf(src,
                    "/*\n * Generated by kiln %s (target c, %d threads): do not edit.\n"
                    " * %d stages; arena %llu bytes; weights %llu bytes.\n */\n"
                    "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n"
                    "#include \"cprog.h\"\n#include \"kc.h\"\n#include \"kc_math.h\"\n\n",
                    KILN_VERSION, e->o->n_threads, n_stages, (unsigned long long)p->arena_bytes,
                    (unsigned long long)p->weight_bytes);
    base_str_printf(src, "static kiln_cstage stages[%d];\nstatic size_t packed_ofs[%d];\n\n", n_stages + 1,
                    e->n_packed + 1);
    base_str_cat(src, base_str_get(&e->decls));
    base_str_cat(src, "\n");
    base_str_cat(src, base_str_get(&e->ops));
    base_str_cat(src, "static void prepare(const uint8_t *w, uint8_t *pk)\n{\n    (void)w;\n    (void)pk;\n"
                      "    (void)packed_ofs;\n");
    base_str_cat(src, base_str_get(&e->prep));
    base_str_cat(src, "}\n\n");
    base_str_printf(src, "static kiln_cprog prog = {\n    .abi = KILN_CPROG_ABI,\n    .n_stages = %d,\n"
                         "    .stages = stages,\n    .arena_bytes = %llu,\n    .weight_bytes = %llu,\n"
                         "    .prepare = prepare,\n"
                         "#if defined(__AVX512F__)\n    .isa = \"avx512\",\n"
                         "#elif defined(__AVX2__) && defined(__FMA__)\n    .isa = \"avx2\",\n"
                         "#else\n    .isa = \"generic\",\n#endif\n};\n\n",
                    n_stages, (unsigned long long)p->arena_bytes, (unsigned long long)p->weight_bytes);
    base_str_cat(src, "static void init_program(void)\n{\n    size_t packed = 0, scratch = 0;\n");
    for (int s = 0; s < n_stages; s++) {
        const char *name = s < p->n_groups ? p->groups[s]->name : "output copies";
        bool has_code = s == p->n_groups || p->groups[s]->kind != SCHED_GROUP_ALIAS;
        if (has_code) base_str_printf(src, "    stages[%d] = (kiln_cstage){op_%d, 0, %d, \"", s, s, wait[s]);
        else base_str_printf(src, "    stages[%d] = (kiln_cstage){0, 0, 0, \"", s);
        for (const char *q = name; *q; q++) {
            if (*q == '"' || *q == '\\') base_str_printf(src, "\\%c", *q);
            else if ((unsigned char)*q < 32) base_str_cat(src, "?");
            else base_str_printf(src, "%c", *q);
        }
        base_str_cat(src, "\"};\n");
    }
    base_free(wait);
    base_str_cat(src, base_str_get(&e->init));
    base_str_cat(src, "    prog.packed_bytes = packed;\n    prog.scratch_bytes = scratch;\n}\n\n"
                      "__attribute__((visibility(\"default\"))) const kiln_cprog *kiln_cprog_get(void);\n"
                      "const kiln_cprog *kiln_cprog_get(void)\n{\n    static int ready;\n"
                      "    if (!ready) {\n        init_program();\n        ready = 1;\n    }\n    return &prog;\n}\n");
    return src->oom ? KILN_ERR_OOM : KILN_OK;
}

/* ---- the target ---------------------------------------------------------------------------- */

static kiln_status c_build(const ir_graph *g, const sched_program *p, const target_options *o, target_output *out,
                           base_diag *d)
{
    memset(out, 0, sizeof(*out));
    c_emitter e = {.g = g, .p = p, .o = o, .d = d, .out = out};
    base_str_init(&e.ops);
    base_str_init(&e.decls);
    base_str_init(&e.init);
    base_str_init(&e.prep);
    base_str src;
    base_str_init(&src);
    kiln_status st = emit_program(&e, &src);
    if (st == KILN_OK && (e.ops.oom || e.decls.oom || e.init.oom || e.prep.oom)) st = KILN_ERR_OOM;
    if (st == KILN_OK) st = c_build_shared_object(base_str_get(&src), o, &out->code, &out->code_bytes, d);
    const char *march;
    out->isa = c_isa_level(&march);
    base_str_free(&e.ops);
    base_str_free(&e.decls);
    base_str_free(&e.init);
    base_str_free(&e.prep);
    base_str_free(&src);
    if (st != KILN_OK) target_output_free(out);
    return st;
}

const target target_c = {
    .name = "c",
    .can_compile = c_can_compile,
    .build = c_build,
};
