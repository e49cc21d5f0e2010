/*
 * emit_ews.c: the `cuda` target's fused elementwise groups (MonoNN's EWS,
 * DESIGN.md "Group"): one rOperator per group computing every node for the
 * elements of its rTask, the group's internal values in registers, only
 * the values read outside stored.
 *
 * The per-element code is the c target's (target/ews_expr.c, same
 * semantics as the reference interpreter), in CUDA's dialect: helpers from
 * kernels/kg_math.h, float32 library functions in float, float16 and
 * bfloat16 tensors computed in float. Values are loaded and stored in their
 * storage dtype (cg_store: 16-bit floats under --precision fp16/bf16).
 *
 * Schedule. The output's dims are collapsed wherever every operand is
 * contiguous or broadcast across them (each operand's stride along the
 * innermost collapsed dim is then 1 or 0). Elements are numbered in output
 * order; rTask t takes elements [t * chunk, (t + 1) * chunk), chunk = B
 * threads x ILP x VEC, and thread x of it takes VEC consecutive elements
 * at x * VEC + u * B * VEC for u < ILP, so each of the ILP steps is one
 * coalesced sweep of the block. B is EWS_BLOCK, or the persistent
 * kernel's block size under --schedule=mono (want_block: any block size
 * works, only the chunk depends on it). All loads of a thread are issued
 * before its first store (ILP independent loads in flight per operand; an
 * output written in place of an input reads each element before writing
 * it).
 *   - vector path: VEC = 16 bytes / the widest element among the arrays
 *     walked (halved until it divides the innermost dim): the widest
 *     arrays move 16-byte vectors, narrower ones 2 to 8 bytes, every warp
 *     access is contiguous, and a vector never straddles a row (arena,
 *     weights and io bases are 16-byte aligned, so every vector is
 *     aligned). An operand broadcast along the innermost dim is loaded
 *     once per vector.
 *   - scalar path (VEC = 1) otherwise: coalesced element accesses.
 * Operand offsets come from the element's coordinates along the collapsed
 * dims (divisions by constants), only for the dims some broadcast operand
 * needs; index math is 32-bit when the element count allows.
 *
 * In a persistent kernel (mono schedules; membound.c, MonoNN 4.2.2 and
 * 4.3) ILP is chosen from the kernel-wide context instead: enough steps
 * that the rTasks make about one wave of the resident blocks, within the
 * registers. With KILN_MONO_CACHE=1 loads carry cache hints (kg.h): a
 * broadcast operand (some stride 0: its elements are read by several
 * output elements) is kept (L1 evict-last), one this group alone reads,
 * each element once, is streamed (ld.cs: evict-first in L1 and L2); an
 * operand read again by a later group gets none.
 */
#include "target/cuda/cuda-impl.h"
#include "target/ews_expr.h"

#include <stdio.h>
#include <string.h>

#define EWS_BLOCK 256 /* threads of an rTask, unless want_block says */
/* Elements a thread takes: about EWS_ELEMS_PER_THREAD (VEC x ILP; ILP =
 * EWS_SCALAR_ILP on the scalar path); ILP halves while the group would
 * give fewer than EWS_MIN_WAVES rTasks per SM, or while the per-thread
 * arrays would hold more than EWS_MAX_REGS registers. */
#define EWS_ELEMS_PER_THREAD 16
#define EWS_SCALAR_ILP 8
#define EWS_MIN_WAVES 2
#define EWS_MAX_REGS 96
/* Registers of a thread besides the per-thread arrays (pointers, indices,
 * coordinates): a persistent kernel's arrays get the rest of its share,
 * at most EWS_MAX_REGS. */
#define EWS_MONO_REGS_OTHER 32

/* The type a value of dtype t is computed in: float for the 16-bit floats. */
static const char *compute_type(kiln_dtype t)
{
    if (t == KILN_F16 || t == KILN_BF16) return "float";
    return cg_type(t);
}

/* The generated code's dialect (ews_expr.h). */
static const ews_lang cuda_lang = {
    .type = compute_type, .math = "kg_", .helper = "kg_", .inf = "KG_INF", .nan = "KG_NAN", .f32_native = true,
    .half = true,
};

bool cg_can_elementwise(const ir_node *n) { return ews_can_elementwise(&cuda_lang, n); }

/* Suffix of the kg_ldv_* / kg_stv_* vector helpers for a storage dtype. */
static const char *vec_sfx(kiln_dtype store)
{
    switch (store) {
    case KILN_F32: return "f32";
    case KILN_F64: return "f64";
    case KILN_F16: return "f16";
    case KILN_BF16: return "bf16";
    case KILN_I64: return "i64";
    case KILN_U64: return "u64";
    case KILN_I32: return "i32";
    case KILN_U32: return "u32";
    case KILN_I16: return "i16";
    case KILN_U16: return "u16";
    case KILN_I8: return "i8";
    case KILN_U8: case KILN_BOOL: return "u8";
    default: return NULL;
    }
}

/* Drops dims of size 1, then merges each dim into the one before it where
 * every stride array walks the pair as one run. Returns the new rank (at
 * least 1: a single element is one dim of size 1 with stride 0). */
static int collapse(int rank, int64_t *dims, int n, int64_t *const *str)
{
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1) continue;
        bool run = r > 0;
        for (int k = 0; run && k < n; k++) run = str[k][r - 1] == str[k][d] * dims[d];
        int to = run ? r - 1 : r++;
        dims[to] = run ? dims[to] * dims[d] : dims[d];
        for (int k = 0; k < n; k++) str[k][to] = str[k][d];
    }
    if (r > 0) return r;
    dims[0] = 1;
    for (int k = 0; k < n; k++) str[k][0] = 0;
    return 1;
}

/* How an operand is read. */
typedef enum how {
    HOW_NONE,   /* a literal, or not read */
    HOW_SCALAR, /* one element for the whole group: loaded once */
    HOW_VEC,    /* VEC consecutive elements per step (stride 1 along the inner dim) */
    HOW_STEP,   /* one element per step (the scalar path; or broadcast along the inner dim) */
} how;

/* The cache hint of an operand's loads (kg.h): the infix of the hinted
 * helpers' names (kg_math.h's kg_ldv_stream_f16, kg_ldv_keep_f32), one element
 * at a time too; NULL for none. */
static const char *hint_of(const cg_mono_ctx *m, const sched_group *grp, const ir_value *v, const int64_t *str,
                           int rank)
{
    if (!m->hints) return NULL;
    for (int d = 0; d < rank; d++)
        if (str[d] == 0) return "keep";
    return cg_mono_read_here_only(grp, v) ? "stream" : NULL;
}

typedef struct plan {
    int rank;
    int64_t dims[IR_MAX_RANK];
    int64_t total;
    int block;            /* threads of an rTask */
    int vec, ilp;
    int64_t chunk, n_rtasks;
    bool wide;            /* 64-bit index math */
    bool need[IR_MAX_RANK]; /* coordinates some operand needs */
} plan;

/* ---- code ------------------------------------------------------------------------ */

/* An integer constant in the index type. */
static const char *ilit(const plan *pl, int64_t v, char *buf, size_t n)
{
    snprintf(buf, n, pl->wide ? "%lldLL" : "%lldu", (long long)v);
    return buf;
}

/* Appends "const <I> c<d> = ..." for the needed coordinates of element i
 * along the collapsed dims, innermost first. */
static void emit_coords(base_str *s, const plan *pl, const char *I, const char *ind)
{
    int lo = -1;
    for (int d = 0; d < pl->rank && lo < 0; d++)
        if (pl->need[d]) lo = d;
    if (lo < 0) return;
    char b[32];
    base_str_printf(s, "%s%s r = i;\n", ind, I);
    for (int d = pl->rank - 1; d >= lo; d--) {
        if (d == 0) {
            base_str_printf(s, "%sconst %s c0 = r;\n", ind, I);
            break;
        }
        if (pl->need[d]) base_str_printf(s, "%sconst %s c%d = r %% %s;\n", ind, I, d, ilit(pl, pl->dims[d], b, sizeof b));
        if (d > lo) base_str_printf(s, "%sr /= %s;\n", ind, ilit(pl, pl->dims[d], b, sizeof b));
    }
}

/* The offset of operand str at element i: "i" when it walks like the
 * output, else a sum over the coordinates. */
static const char *offset(const plan *pl, const int64_t *str, const int64_t *out_str, char *buf, size_t n)
{
    bool like_out = true;
    for (int d = 0; d < pl->rank; d++) like_out = like_out && str[d] == out_str[d];
    if (like_out) return "i";
    size_t len = 0;
    buf[0] = 0;
    for (int d = 0; d < pl->rank && len < n; d++) {
        if (str[d] == 0) continue;
        char b[32];
        if (str[d] == 1) len += (size_t)snprintf(buf + len, n - len, "%sc%d", len ? " + " : "", d);
        else len += (size_t)snprintf(buf + len, n - len, "%sc%d * %s", len ? " + " : "", d, ilit(pl, str[d], b, sizeof b));
    }
    if (len == 0) snprintf(buf, n, "0");
    return buf;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* How many registers (32-bit) a value of dtype t takes in compute type. */
static int regs_of(kiln_dtype t) { return t == KILN_F64 || t == KILN_I64 || t == KILN_U64 ? 2 : 1; }

kiln_status cg_emit_elementwise(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    const ir_tensor *shape = &grp->nodes[0]->out[0]->t;
    int n_ops = grp->n_in;
    kiln_status st = KILN_OK;
    ews_operand *xo = base_calloc((size_t)n_ops + 1, sizeof(ews_operand));
    int64_t(*str)[IR_MAX_RANK] = base_calloc((size_t)n_ops + grp->n_out + 1, sizeof(*str));
    int64_t **strs = base_calloc((size_t)n_ops + grp->n_out + 1, sizeof(int64_t *));
    how *hw = base_calloc((size_t)n_ops + 1, sizeof(how));
    const char **hint = base_calloc((size_t)n_ops + 1, sizeof(char *));
    base_str body;
    base_str_init(&body);
    if (!xo || !str || !strs || !hw || !hint) {
        st = base_diag_add(e->d, KILN_ERR_OOM, "out of memory emitting group '%s'", grp->name);
        goto out;
    }
    if ((st = cg_need(e, "kg_math.h")) != KILN_OK) goto out;

    /* operands: literals, or read from memory; a first pass of the
     * expression builder finds which ones the code reads */
    for (int k = 0; k < n_ops; k++) {
        ews_operand *o = &xo[k];
        o->v = grp->in[k];
        ews_operand_lit(&cuda_lang, o);
        if (!cg_type(cg_store(e, o->v))) {
            st = base_diag_add(e->d, KILN_ERR_INTERNAL, "group '%s': the cuda target cannot load '%s' (%s)", grp->name,
                               o->v->name, kiln_dtype_name(o->v->t.dtype));
            goto out;
        }
        if (!o->is_lit) snprintf(o->name, sizeof o->name, "x%d", k);
    }
    ews_expr x = {.lang = &cuda_lang, .ops = xo, .n_ops = n_ops, .body = &body, .indent = ""};
    for (int i = 0; i < grp->n_nodes; i++) {
        if (ews_expr_node(&x, grp->nodes[i])) continue;
        char lb[256];
        st = base_diag_add(e->d, KILN_ERR_INTERNAL, "the cuda target cannot emit %s in a fused elementwise group",
                           ir_node_label(grp->nodes[i], lb, sizeof lb));
        goto out;
    }
    base_str_free(&body);
    base_str_init(&body);

    /* strides of the operands read and of the output, then the collapsed dims */
    plan pl = {.rank = shape->rank, .total = ir_numel(shape), .block = e->want_block ? e->want_block : EWS_BLOCK};
    for (int d = 0; d < pl.rank; d++) pl.dims[d] = shape->dims[d];
    int64_t *out_str = str[n_ops];
    int n_strs = 0;
    for (int k = 0; k < n_ops; k++) {
        if (!xo[k].used) continue;
        ews_bcast_strides(&grp->in[k]->t, pl.rank, pl.dims, str[k]);
        strs[n_strs++] = str[k];
    }
    ews_bcast_strides(shape, pl.rank, pl.dims, out_str);
    strs[n_strs++] = out_str;
    pl.rank = collapse(pl.rank, pl.dims, n_strs, strs);
    int inner = pl.rank - 1;

    /* the vector width: 16 bytes of the widest array walked, a power of
     * two dividing the inner dim (narrower arrays move 2 to 8 bytes) */
    size_t max_size = 1;
    for (int k = 0; k < n_ops; k++)
        if (xo[k].used && str[k][inner] == 1) {
            size_t sz = ir_dtype_size(cg_store(e, xo[k].v));
            if (sz > max_size) max_size = sz;
        }
    for (int m = 0; m < grp->n_out; m++) {
        size_t sz = ir_dtype_size(cg_store(e, grp->out[m]));
        if (sz > max_size) max_size = sz;
    }
    pl.vec = (int)(16 / max_size);
    while (pl.vec > 1 && pl.dims[inner] % pl.vec != 0) pl.vec /= 2;

    /* how each operand is read; the registers its array takes per element */
    int regs_per_step = 0;
    for (int k = 0; k < n_ops; k++) {
        bool scalar = true;
        for (int d = 0; d < pl.rank; d++) scalar = scalar && str[k][d] == 0;
        if (!xo[k].used) hw[k] = HOW_NONE;
        else if (scalar) hw[k] = HOW_SCALAR;
        else if (pl.vec > 1 && str[k][inner] == 1) hw[k] = HOW_VEC;
        else hw[k] = HOW_STEP;
        int r = regs_of(xo[k].v->t.dtype);
        regs_per_step += hw[k] == HOW_VEC ? r * pl.vec : hw[k] == HOW_STEP ? r : 0;
    }
    for (int m = 0; m < grp->n_out; m++) regs_per_step += regs_of(grp->out[m]->t.dtype);
    cg_mono_ctx mono;
    cg_mono_ctx_init(e, &mono);
    if (mono.resident > 0) {
        int regs = KILN_MIN(EWS_MAX_REGS, mono.regs - EWS_MONO_REGS_OTHER);
        pl.ilp = cg_mono_factor(&mono, ceil_div(pl.total, (int64_t)pl.block * pl.vec), regs / regs_per_step);
        for (int k = 0; k < n_ops; k++)
            if (hw[k] != HOW_NONE) hint[k] = hint_of(&mono, grp, xo[k].v, str[k], pl.rank);
    } else {
        pl.ilp = pl.vec > 1 ? (EWS_ELEMS_PER_THREAD + pl.vec - 1) / pl.vec : EWS_SCALAR_ILP;
        while (pl.ilp > 1 && pl.ilp * regs_per_step > EWS_MAX_REGS) pl.ilp /= 2;
        int64_t min_tasks = (int64_t)EWS_MIN_WAVES * (e->gpu.n_sms > 0 ? e->gpu.n_sms : 132);
        while (pl.ilp > 1 && ceil_div(pl.total, (int64_t)pl.block * pl.vec * pl.ilp) < min_tasks) pl.ilp /= 2;
    }
    while (ceil_div(pl.total, (int64_t)pl.block * pl.vec * pl.ilp) > INT32_MAX) pl.ilp *= 2;
    pl.chunk = (int64_t)pl.block * pl.vec * pl.ilp;
    pl.n_rtasks = pl.total > 0 ? ceil_div(pl.total, pl.chunk) : 1;
    pl.wide = pl.n_rtasks * pl.chunk >= ((int64_t)1 << 31);
    for (int k = 0; k < n_ops; k++) {
        if (hw[k] != HOW_VEC && hw[k] != HOW_STEP) continue;
        bool like_out = true;
        for (int d = 0; d < pl.rank; d++) like_out = like_out && str[k][d] == out_str[d];
        for (int d = 0; d < pl.rank && !like_out; d++)
            if (str[k][d] != 0) pl.need[d] = true;
    }

    /* names in the per-element code: k = VEC * u + e is the element of the thread */
    for (int k = 0; k < n_ops; k++) {
        if (hw[k] == HOW_SCALAR) snprintf(xo[k].name, sizeof xo[k].name, "x%d", k);
        else if (hw[k] == HOW_VEC) snprintf(xo[k].name, sizeof xo[k].name, "x%d[k]", k);
        else if (hw[k] == HOW_STEP) snprintf(xo[k].name, sizeof xo[k].name, "x%d[u]", k);
    }
    x.indent = pl.vec > 1 ? "                " : "            ";
    for (int i = 0; i < grp->n_nodes; i++) ews_expr_node(&x, grp->nodes[i]);

    /* the rOperator */
    base_str *s = &e->code;
    char tb[256], pb[256], b1[32], b2[32], b3[32], ob[256];
    const char *I = pl.wide ? "kg_i64" : "kg_u32";
    cg_comment(s, grp);
    base_str_printf(s, "/* %s", ir_tensor_type_str(shape, tb, sizeof tb));
    if (pl.rank > 1) {
        base_str_cat(s, " as ");
        for (int d = 0; d < pl.rank; d++) base_str_printf(s, "%s%lld", d ? " x " : "", (long long)pl.dims[d]);
    }
    if (pl.vec > 1) base_str_printf(s, "; vectors of %d elements, %d per thread", pl.vec, pl.ilp);
    else base_str_printf(s, "; %d element%s per thread", pl.ilp, pl.ilp == 1 ? "" : "s");
    base_str_printf(s, "; %lld rTask%s of %lld elements", (long long)pl.n_rtasks, pl.n_rtasks == 1 ? "" : "s",
                    (long long)pl.chunk);
    if (mono.ilp) base_str_printf(s, "; ILP %d for %d resident blocks", pl.ilp, mono.resident);
    base_str_cat(s, " */\n");
    base_str_printf(s, "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n", grp->id);
    *op = (cg_op){.n_rtasks = pl.n_rtasks, .block = pl.block, .smem_bytes = 0};
    if (mono.ilp) snprintf(op->config, sizeof op->config, "ILP %d", pl.ilp);
    if (pl.total == 0) {
        base_str_cat(s, "    (void)c;\n    (void)t;\n}\n\n");
        goto out;
    }
    for (int k = 0; k < n_ops; k++) {
        if (hw[k] == HOW_NONE) continue;
        kiln_dtype sd = cg_store(e, xo[k].v);
        const char *ld = cg_ld_fn(sd);
        base_str_printf(s, "    const %s *p%d = %s;\n", cg_type(sd), k, cg_ptr(e, xo[k].v, pb, sizeof pb));
        if (hw[k] != HOW_SCALAR) continue;
        const char *ct = compute_type(xo[k].v->t.dtype);
        if (hint[k])
            base_str_printf(s, "    %s x%d;\n    kg_ldv_%s_%s(p%d, 1, &x%d);\n", ct, k, hint[k], vec_sfx(sd), k, k);
        else
            base_str_printf(s, ld ? "    const %s x%d = %s(p%d);\n" : "    const %s x%d = %sp%d[0];\n", ct, k,
                            ld ? ld : "", k);
    }
    for (int m = 0; m < grp->n_out; m++) {
        kiln_dtype sd = cg_store(e, grp->out[m]);
        base_str_printf(s, "    %s *q%d = %s;\n", cg_type(sd), m, cg_ptr(e, grp->out[m], pb, sizeof pb));
    }
    base_str_printf(s, "    const %s i0 = (%s)t * %s + (%s)threadIdx.x", I, I, ilit(&pl, pl.chunk, b1, sizeof b1), I);
    if (pl.vec > 1) base_str_printf(s, " * %s", ilit(&pl, pl.vec, b1, sizeof b1));
    base_str_cat(s, ";\n");
    for (int k = 0; k < n_ops; k++) {
        if (hw[k] == HOW_VEC) base_str_printf(s, "    %s x%d[%d];\n", compute_type(xo[k].v->t.dtype), k, pl.vec * pl.ilp);
        else if (hw[k] == HOW_STEP) base_str_printf(s, "    %s x%d[%d];\n", compute_type(xo[k].v->t.dtype), k, pl.ilp);
    }
    /* the last rTask may run past the end */
    bool guard = pl.total % pl.chunk != 0;
    char step[128], cond[96];
    snprintf(step, sizeof step, "    const %s i = i0 + (%s)u * %s;\n", I, I,
             ilit(&pl, (int64_t)pl.block * pl.vec, b2, sizeof b2));
    snprintf(cond, sizeof cond, guard ? "if (i < %s) " : "", ilit(&pl, pl.total, b3, sizeof b3));

    /* loads */
    base_str_printf(s, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n    %s        %s{\n", pl.ilp, step, cond);
    emit_coords(s, &pl, I, "            ");
    for (int k = 0; k < n_ops; k++) {
        if (hw[k] != HOW_VEC && hw[k] != HOW_STEP) continue;
        kiln_dtype sd = cg_store(e, xo[k].v);
        const char *off = offset(&pl, str[k], out_str, ob, sizeof ob);
        /* "kg_ldv_f16", or with a hint "kg_ldv_stream_f16" */
        char vl[48];
        snprintf(vl, sizeof vl, "kg_ldv_%s%s%s", hint[k] ? hint[k] : "", hint[k] ? "_" : "", vec_sfx(sd));
        const char *ld = cg_ld_fn(sd);
        if (hw[k] == HOW_VEC)
            base_str_printf(s, "            %s(p%d + %s, %d, x%d + %d * u);\n", vl, k, off, pl.vec, k, pl.vec);
        else if (hint[k])
            base_str_printf(s, "            %s(p%d + %s, 1, x%d + u);\n", vl, k, off, k);
        else if (ld)
            base_str_printf(s, "            x%d[u] = %s(p%d + %s);\n", k, ld, k, off);
        else
            base_str_printf(s, "            x%d[u] = p%d[%s];\n", k, k, off);
    }
    base_str_cat(s, "        }\n    }\n");

    /* compute and store */
    base_str_printf(s, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n    %s        %s{\n", pl.ilp, step, cond);
    if (pl.vec > 1) {
        for (int m = 0; m < grp->n_out; m++)
            base_str_printf(s, "            %s y%d[%d];\n", compute_type(grp->out[m]->t.dtype), m, pl.vec);
        base_str_printf(s, "#pragma unroll\n            for (int e = 0; e < %d; e++) {\n"
                           "                const int k = %d * u + e;\n", pl.vec, pl.vec);
        base_str_cat(s, base_str_get(&body));
        for (int m = 0; m < grp->n_out; m++) base_str_printf(s, "                y%d[e] = v%d;\n", m, grp->out[m]->id);
        base_str_cat(s, "            }\n");
        for (int m = 0; m < grp->n_out; m++)
            base_str_printf(s, "            kg_stv_%s(q%d + i, %d, y%d);\n", vec_sfx(cg_store(e, grp->out[m])), m, pl.vec, m);
    } else {
        base_str_cat(s, base_str_get(&body));
        for (int m = 0; m < grp->n_out; m++) {
            char val[32];
            snprintf(val, sizeof val, "v%d", grp->out[m]->id);
            const char *stf = cg_st_fn(cg_store(e, grp->out[m]));
            if (stf) base_str_printf(s, "            %s(q%d + i, %s);\n", stf, m, val);
            else base_str_printf(s, "            q%d[i] = %s;\n", m, val);
        }
    }
    base_str_cat(s, "        }\n    }\n}\n\n");
    if (body.oom || s->oom) st = base_diag_add(e->d, KILN_ERR_OOM, "out of memory emitting group '%s'", grp->name);

out:
    base_free(xo);
    base_free(str);
    base_free(strs);
    base_free(hw);
    base_free(hint);
    base_str_free(&body);
    return st;
}
