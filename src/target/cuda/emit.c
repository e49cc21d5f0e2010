/*
 * emit.c: the `cuda` target (DESIGN.md "Execution on a GPU",
 * --schedule=kernels): generated CUDA C for a partitioned, planned graph.
 *
 * One .cu file per model: the prelude (kernels/kg.h and the templates the
 * groups ask for), then per group an rOperator `op_<id>(c, t)` computing
 * rTask t with one thread block (emit_*.c) and a kernel `k_<id>` looping
 * over the rTasks. The program is the list of launches in group order,
 * replayed by the runtime as one CUDA graph; groups whose output shape
 * depends on data run as host segments between kernels. NVRTC builds the
 * file for sm_80 and sm_90a; both cubins travel in the artifact and the
 * runtime picks the one the device runs (runtime/gprog.h).
 *
 * Precision: under fp16/bf16 float32 activations and weights are stored in
 * 16 bits at their planned offsets (cg_store), the weights converted here
 * once; host segments see float32 (the runtime converts their bindings),
 * and the model's inputs and outputs keep their model dtype.
 */
#include <math.h>
#include "target/cuda/cuda-impl.h"

#include "runtime/cuda.h"
#include "target/cuda/nvrtc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Kernels never ask for more blocks than this; they loop over the rest. */
#define MAX_GRID (1 << 20)

/* ---- helpers for the emitters ----------------------------------------------------- */

bool cg_is_float(kiln_dtype t) { return t == KILN_F32 || t == KILN_F16 || t == KILN_BF16 || t == KILN_F64; }

bool cg_env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

const char *cg_type(kiln_dtype t)
{
    switch (t) {
    case KILN_F32: return "float";
    case KILN_F64: return "double";
    case KILN_F16: return "__half";
    case KILN_BF16: return "__nv_bfloat16";
    case KILN_I64: return "kg_i64";
    case KILN_I32: return "kg_i32";
    case KILN_I16: return "kg_i16";
    case KILN_I8: return "kg_i8";
    case KILN_U8: return "kg_u8";
    case KILN_U16: return "kg_u16";
    case KILN_U32: return "kg_u32";
    case KILN_U64: return "kg_u64";
    case KILN_BOOL: return "kg_u8";
    default: return NULL;
    }
}

kiln_dtype cg_store(const cg_emitter *e, const ir_value *v)
{
    if (v->graph == e->g && e->store) return e->store[v->id];
    return v->t.dtype;
}

const char *cg_ld_fn(kiln_dtype store)
{
    switch (store) {
    case KILN_F32: return "kg_ld_f32";
    case KILN_F16: return "kg_ld_f16";
    case KILN_BF16: return "kg_ld_bf16";
    default: return NULL;
    }
}

const char *cg_st_fn(kiln_dtype store)
{
    switch (store) {
    case KILN_F32: return "kg_st_f32";
    case KILN_F16: return "kg_st_f16";
    case KILN_BF16: return "kg_st_bf16";
    default: return NULL;
    }
}

const char *cg_ptr(const cg_emitter *e, const ir_value *v, char *buf, size_t n)
{
    const sched_place *pl = &e->p->place[v->id];
    const char *t = cg_type(cg_store(e, v));
    KILN_ASSERT(t);
    switch (pl->loc) {
    case SCHED_LOC_ARENA: snprintf(buf, n, "((%s *)(c->arena + %llu))", t, (unsigned long long)pl->offset); break;
    case SCHED_LOC_WEIGHTS:
        snprintf(buf, n, "((const %s *)(c->weights + %llu))", t, (unsigned long long)pl->offset);
        break;
    case SCHED_LOC_INPUT: snprintf(buf, n, "((const %s *)c->io[%llu])", t, (unsigned long long)pl->offset); break;
    case SCHED_LOC_OUTPUT: snprintf(buf, n, "((%s *)c->io[%d])", t, e->g->n_inputs + (int)pl->offset); break;
    default: KILN_ASSERT(!"value without a place");
    }
    return buf;
}

kiln_status cg_tmap_add(cg_emitter *e, const rt_gtmap *m, int *index)
{
    /* what the runtime checks when it loads the program, checked here so
     * that a map the emitter got wrong fails the compile (and CI, which
     * has no GPU), not the first run */
    const char *why;
    if (!rt_gtmap_check(m, m->space ? e->p->weight_bytes : e->p->arena_bytes, &why))
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "group %d: tensor map %d: %s", e->site, e->n_tmaps, why);
    if (e->n_tmaps == e->cap_tmaps) {
        int cap = e->cap_tmaps ? 2 * e->cap_tmaps : 16;
        if (cap > KILN_GPROG_MAX_TMAPS)
            return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "more than %d tensor maps", KILN_GPROG_MAX_TMAPS);
        rt_gtmap *grown = base_realloc(e->tmaps, (size_t)cap * sizeof(*grown));
        if (!grown) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory for tensor maps");
        e->tmaps = grown;
        e->cap_tmaps = cap;
    }
    e->tmaps[e->n_tmaps] = *m;
    *index = e->n_tmaps++;
    return KILN_OK;
}

bool cg_tmap_space(const cg_emitter *e, const ir_value *v, int *space, uint64_t *offset)
{
    const sched_place *pl = &e->p->place[v->id];
    if (pl->loc != SCHED_LOC_ARENA && pl->loc != SCHED_LOC_WEIGHTS) return false;
    *space = pl->loc == SCHED_LOC_WEIGHTS;
    *offset = pl->offset;
    return true;
}

void cg_tmaps_define(const cg_emitter *e, base_str *s)
{
    if (e->n_tmaps)
        base_str_printf(s, "\n/* the tensor maps, encoded by the runtime when it loads the program */\n"
                           "__device__ kg_tmap kg_tmaps[%d];\n",
                        e->n_tmaps);
}

void cg_kernel_head(base_str *s, const char *name, int block, int min_blocks, int cluster, bool grid_dep)
{
    base_str_printf(s, "extern \"C\" __global__ void __launch_bounds__(%d", block);
    if (min_blocks > 0) base_str_printf(s, ", %d", min_blocks);
    base_str_cat(s, ")");
    if (cluster > 1) base_str_printf(s, " KG_CLUSTER(%d)", cluster);
    base_str_printf(s, " %s(const kiln_gctx *c)\n{\n%s", name, grid_dep ? "    kg_grid_dep();\n" : "");
}

const char *cg_load(const cg_emitter *e, const ir_value *v, const char *index, char *buf, size_t n)
{
    char p[160];
    cg_ptr(e, v, p, sizeof(p));
    const char *ld = cg_ld_fn(cg_store(e, v));
    if (ld) snprintf(buf, n, "%s(%s + (%s))", ld, p, index);
    else snprintf(buf, n, "%s[%s]", p, index);
    return buf;
}

void cg_store_stmt(const cg_emitter *e, base_str *s, const ir_value *v, const char *index, const char *value)
{
    char p[160];
    cg_ptr(e, v, p, sizeof(p));
    const char *st = cg_st_fn(cg_store(e, v));
    if (st) base_str_printf(s, "%s(%s + (%s), %s);\n", st, p, index, value);
    else base_str_printf(s, "%s[%s] = %s;\n", p, index, value);
}

void cg_comment(base_str *s, const sched_group *grp)
{
    base_str_printf(s, "/* group %d (%s): ", grp->id, sched_group_kind_name(grp->kind));
    for (const char *q = grp->name; *q; q++) {
        if ((q[0] == '*' && q[1] == '/') || (q[0] == '/' && q[1] == '*')) base_str_cat(s, "?");
        else if ((unsigned char)*q < 32) base_str_cat(s, "?");
        else base_str_printf(s, "%c", *q);
    }
    base_str_cat(s, " */\n");
}

const char *cg_float_lit(double v, char *buf, size_t n)
{
    float f = (float)v;
    if (f != f) snprintf(buf, n, "__int_as_float(0x7fc00000)");
    else if (f > 3.4e38f) snprintf(buf, n, "__int_as_float(0x7f800000)");
    else if (f < -3.4e38f) snprintf(buf, n, "__int_as_float((int)0xff800000u)");
    else snprintf(buf, n, "(%af)", (double)f);
    return buf;
}

/* The launch index is a macro (KG_SITE_<group>) defined once the group's
 * kernel is known (site_defs): under --schedule=mono a group may end up in
 * a later kernel than the one open when it was emitted. */
void cg_fault_stmt(const cg_emitter *e, base_str *s, const char *code)
{
    base_str_printf(s, "kg_fault(c, %s, KG_SITE_%d);\n", code, e->site);
}

/* kg_math.h's KG_ACT_* number the activations as pass_act does. */
static const char *const act_names[PASS_ACT_COUNT] = {
    [PASS_ACT_NONE] = "KG_ACT_NONE",
    [PASS_ACT_RELU] = "KG_ACT_RELU",
    [PASS_ACT_CLIP] = "KG_ACT_CLIP",
    [PASS_ACT_LEAKY_RELU] = "KG_ACT_LEAKY_RELU",
    [PASS_ACT_SIGMOID] = "KG_ACT_SIGMOID",
    [PASS_ACT_TANH] = "KG_ACT_TANH",
    [PASS_ACT_GELU] = "KG_ACT_GELU",
    [PASS_ACT_GELU_TANH] = "KG_ACT_GELU_TANH",
    [PASS_ACT_SILU] = "KG_ACT_SILU",
    [PASS_ACT_HARD_SWISH] = "KG_ACT_HARD_SWISH",
    [PASS_ACT_HARD_SIGMOID] = "KG_ACT_HARD_SIGMOID",
    [PASS_ACT_SOFTPLUS] = "KG_ACT_SOFTPLUS",
};
_Static_assert(PASS_ACT_SOFTPLUS == 11 && PASS_ACT_COUNT == 12, "kg_math.h numbers the activations 0..11");

const char *cg_act_name(pass_act a)
{
    KILN_ASSERT(a >= 0 && a < PASS_ACT_COUNT);
    return act_names[a];
}

static int source_index(const char *file)
{
    for (int i = 0; i < cg_kernel_sources_count; i++)
        if (strcmp(cg_kernel_sources[i].name, file) == 0) return i;
    return -1;
}

kiln_status cg_need(cg_emitter *e, const char *file)
{
    int i = source_index(file);
    if (i < 0) return base_diag_add(e->d, KILN_ERR_INTERNAL, "no CUDA template named '%s'", file);
    for (int k = 0; k < e->n_need; k++)
        if (e->need[k] == i) return KILN_OK;
    if (e->n_need == (int)KILN_COUNT(e->need))
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "too many CUDA templates in one program");
    e->need[e->n_need++] = i;
    return KILN_OK;
}

kiln_status cg_prelude(const cg_emitter *e, base_str *out)
{
    int kg = source_index("kg.h"), tiles = source_index("kg_tiles.h");
    if (kg < 0 || tiles < 0)
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "the CUDA prelude kg.h or kg_tiles.h is missing from the binary");
    /* kg.h's waits take kg_tiles.h's types */
    base_str_printf(out, "/* ---- kg_tiles.h ---- */\n%s\n/* ---- kg.h ---- */\n%s\n", cg_kernel_sources[tiles].text,
                    cg_kernel_sources[kg].text);
    for (int k = 0; k < e->n_need; k++) {
        if (e->need[k] == kg || e->need[k] == tiles) continue;
        base_str_printf(out, "/* ---- %s ---- */\n%s\n", cg_kernel_sources[e->need[k]].name,
                        cg_kernel_sources[e->need[k]].text);
    }
    return out->oom ? KILN_ERR_OOM : KILN_OK;
}

/* ---- what compiles ---------------------------------------------------------------- */

static bool cuda_can_compile(const ir_node *n)
{
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] && (!n->out[j]->shape_known || !cg_type(n->out[j]->t.dtype))) return false;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] && !cg_type(n->in[j]->t.dtype)) return false;
    switch (n->op) {
    case KILN_OP_CONV: case KILN_OP_MAT_MUL: case KILN_OP_GEMM: return cg_can_contract(n);
    case KILN_OP_MAX_POOL: case KILN_OP_AVERAGE_POOL: return cg_can_pool(n);
    case KILN_OP_SOFTMAX: case KILN_OP_LOG_SOFTMAX: case KILN_OP_LAYER_NORMALIZATION:
    case KILN_OP_GLOBAL_AVERAGE_POOL:
        return cg_can_rows(n);
    case KILN_OP_RESHAPE: case KILN_OP_FLATTEN: case KILN_OP_SQUEEZE: case KILN_OP_UNSQUEEZE:
    case KILN_OP_IDENTITY:
        return true;
    case KILN_OP_DROPOUT: return n->n_in < 3 || !n->in[2] || (n->in[2]->is_const && ir_get_f64(&n->in[2]->t, 0) == 0);
    default:
        if (n->op < KILN_OP_COUNT && (ir_ops[n->op].flags & IR_OPF_ELEMENTWISE)) return cg_can_elementwise(n);
        return cg_can_move(n);
    }
}

/* ---- storage precision ---------------------------------------------------------------- */

static kiln_status parse_precision(const char *s, kiln_gprec *out, base_diag *d)
{
    if (!s || strcmp(s, "fp32") == 0) *out = KILN_GPREC_FP32;
    else if (strcmp(s, "fp16") == 0) *out = KILN_GPREC_FP16;
    else if (strcmp(s, "bf16") == 0) *out = KILN_GPREC_BF16;
    else return base_diag_add(d, KILN_ERR_INVALID_ARG, "unknown precision '%s' (fp32, fp16 or bf16)", s);
    return KILN_OK;
}

/* Which values hold 16-bit floats: every float32 value in the arena or the
 * weights. Host segments still see float32: the runtime converts their
 * bindings (stored_16bit in runtime/rt_cuda.c). */
static kiln_status plan_storage(cg_emitter *e)
{
    const ir_graph *g = e->g;
    e->store = base_calloc((size_t)g->n_values + 1, sizeof(kiln_dtype));
    if (!e->store) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory planning storage");
    kiln_dtype half = e->prec == KILN_GPREC_FP16 ? KILN_F16 : KILN_BF16;
    for (int i = 0; i < g->n_values; i++) {
        const sched_place *pl = &e->p->place[i];
        e->store[i] = g->values[i]->t.dtype;
        if (e->prec != KILN_GPREC_FP32 && e->store[i] == KILN_F32 &&
            (pl->loc == SCHED_LOC_ARENA || pl->loc == SCHED_LOC_WEIGHTS))
            e->store[i] = half;
    }
    return KILN_OK;
}

/* Which weights are stored transposed: on sm_90, the [k, n] B of a GEMM
 * group (a MatMul's 2-D B, a Gemm's B without transB) that nothing else
 * reads and that is stored in 16 bits (k a multiple of 8, so its rows
 * stay whole 16-byte chunks), so that kg_gemm_wgt reads it
 * K-major: its tensor map's box is then the tile's n rows of 64, and the
 * tile may be any of kg_wgmma's widths (96 x 8 tiles cover BERT's 768
 * columns on 132 multiprocessors), not only multiples of 64. gemm_analyse
 * reads such a B as K-major. */
static kiln_status plan_kmajor_weights(cg_emitter *e)
{
    const ir_graph *g = e->g;
    e->kmajor = base_calloc((size_t)g->n_values + 1, sizeof(bool));
    if (!e->kmajor) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory planning weight layouts");
    if (e->gpu.sm_major != 9) return KILN_OK;
    for (int s = 0; s < e->p->n_groups; s++) {
        const sched_group *grp = e->p->groups[s];
        const ir_node *n = grp->n_nodes ? grp->nodes[0] : NULL;
        if (grp->kind != SCHED_GROUP_GEMM || !n || n->n_in < 2 || !n->in[1]) continue;
        const ir_value *b = n->in[1];
        bool ok = n->op == KILN_OP_MAT_MUL || (n->op == KILN_OP_GEMM && !ir_node_attr_int(n, "transB", 0));
        ok = ok && b->graph == g && b->is_const && b->n_uses == 1 && b->t.rank == 2 && b->t.dims[0] % 8 == 0 &&
             n->in[0] != b &&
             e->p->place[b->id].loc == SCHED_LOC_WEIGHTS &&
             (e->store[b->id] == KILN_F16 || e->store[b->id] == KILN_BF16);
        for (int i = 0; ok && i < g->n_outputs; i++) ok = g->outputs[i] != b;
        if (ok) e->kmajor[b->id] = true;
    }
    return KILN_OK;
}

/* Element k of a weight in its stored dtype, from the model's bytes. */
static uint16_t stored16(const uint8_t *src, int64_t k, kiln_dtype from, kiln_dtype to)
{
    if (from == to) {
        uint16_t h;
        memcpy(&h, src + 2 * k, sizeof(h));
        return h;
    }
    float f;
    memcpy(&f, src + 4 * k, sizeof(f));
    return to == KILN_F16 ? base_f32_to_f16(f) : base_f32_to_bf16(f);
}

/* The weights blob with 16-bit constants where cg_store says so, the
 * weights plan_kmajor_weights picked transposed, and the convolution
 * weights cg_plan_conv_layouts picked reordered to [Cout][KH][KW][Cin/group]
 * or with their rows padded (kpad). */
static kiln_status convert_weights(cg_emitter *e, target_output *out)
{
    bool any = false;
    for (int i = 0; i < e->g->n_values && !any; i++) any = e->kmajor[i] || e->ohwi[i] || e->kpad[i];
    if ((e->prec == KILN_GPREC_FP32 && !any) || !e->o->weights || e->p->weight_bytes == 0) return KILN_OK;
    uint8_t *w = base_malloc(e->p->weight_bytes);
    if (!w)
        return base_diag_add(e->d, KILN_ERR_OOM, "out of memory converting %llu bytes of weights",
                             (unsigned long long)e->p->weight_bytes);
    memcpy(w, e->o->weights, e->p->weight_bytes);
    for (int i = 0; i < e->g->n_values; i++) {
        const ir_value *v = e->g->values[i];
        if (e->p->place[i].loc != SCHED_LOC_WEIGHTS ||
            (e->store[i] == v->t.dtype && !e->kmajor[i] && !e->ohwi[i] && !e->kpad[i]))
            continue;
        const uint8_t *src = (const uint8_t *)e->o->weights + e->p->place[i].offset;
        uint16_t *dst = (uint16_t *)(w + e->p->place[i].offset);
        int64_t n = ir_numel(&v->t);
        if (e->kmajor[i]) {
            /* [rows, cols] becomes [cols, rows] */
            int64_t rows = v->t.dims[0], cols = v->t.dims[1];
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++)
                    dst[c * rows + r] = stored16(src, r * cols + c, v->t.dtype, e->store[i]);
        } else if (e->ohwi[i]) {
            /* [Cout][Cin][KH][KW] becomes [Cout][KH][KW][Cin] */
            int64_t co = v->t.dims[0], ci = v->t.dims[1], taps = v->t.dims[2] * v->t.dims[3];
            for (int64_t o = 0; o < co; o++)
                for (int64_t c = 0; c < ci; c++)
                    for (int64_t t = 0; t < taps; t++)
                        dst[(o * taps + t) * ci + c] = stored16(src, (o * ci + c) * taps + t, v->t.dtype, e->store[i]);
        } else if (e->kpad[i]) {
            /* [Cout][K] becomes [Cout][kpad], zeros after K (the 16-bit rows
             * fit in the 32-bit weight's bytes: cg_plan_conv_layouts) */
            int64_t co = v->t.dims[0], k = n / co, ld = e->kpad[i];
            for (int64_t o = 0; o < co; o++)
                for (int64_t j = 0; j < ld; j++)
                    dst[o * ld + j] = j < k ? stored16(src, o * k + j, v->t.dtype, e->store[i]) : 0;
        } else {
            for (int64_t k = 0; k < n; k++) dst[k] = stored16(src, k, v->t.dtype, e->store[i]);
        }
    }
    out->weights = w;
    return KILN_OK;
}

/* The schedule without --schedule: waves, which is the kernels schedule
 * where a graph has no independent branches and runs them side by side
 * where it has (GoogLeNet 278 against 313 us on an H100; BERT, ViT,
 * ResNet-50 within 1%). */
#define SCHEDULE_DEFAULT "waves"

/* The schedule: waves (NULL too), kernels, mono (counter waits),
 * mono-barriers, or mono-unmerged (a barrier after every group: the
 * ablation's base); a mono one may carry a kernel-wide configuration
 * ":BLOCKxN" (mono:256x2: 256 threads a block, 2 blocks per
 * multiprocessor), else *block and *per_sm stay 0. */
static kiln_status parse_schedule(const char *s, bool *mono, bool *waits, bool *unmerged, bool *waves, int *block,
                                  int *per_sm, base_diag *d)
{
    char name[32] = SCHEDULE_DEFAULT;
    *block = *per_sm = 0;
    if (s) {
        const char *colon = strchr(s, ':');
        size_t len = colon ? (size_t)(colon - s) : strlen(s);
        if (len >= sizeof(name)) len = sizeof(name) - 1;
        memcpy(name, s, len);
        name[len] = 0;
        if (colon) {
            char *end;
            long b = strtol(colon + 1, &end, 10), n = *end == 'x' ? strtol(end + 1, &end, 10) : 0;
            if (*end || !target_cuda_mono_block_ok(b) || n < 1 || n > 5)
                return base_diag_add(d, KILN_ERR_INVALID_ARG,
                                     "schedule '%s': the configuration after ':' is BLOCKxN, BLOCK 128, 256 or 384 "
                                     "threads, N 1..5 blocks per multiprocessor (mono:256x2)",
                                     s);
            *block = (int)b;
            *per_sm = (int)n;
        }
    }
    *waits = strcmp(name, "mono") == 0;
    *unmerged = strcmp(name, "mono-unmerged") == 0;
    *mono = *waits || *unmerged || strcmp(name, "mono-barriers") == 0;
    *waves = strcmp(name, "waves") == 0;
    if (!*mono && !*waves && strcmp(name, "kernels") != 0)
        return base_diag_add(d, KILN_ERR_INVALID_ARG,
                             "unknown schedule '%s' (kernels, waves, mono, mono-barriers or mono-unmerged)", s);
    if (!*mono && *block)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "schedule '%s': only the mono schedules take a BLOCKxN", s);
    return KILN_OK;
}

kiln_status target_cuda_check_schedule(const char *schedule, base_diag *d)
{
    bool mono, waits, unmerged, waves;
    int block, per_sm;
    return parse_schedule(schedule, &mono, &waits, &unmerged, &waves, &block, &per_sm, d);
}

/* ---- the program ------------------------------------------------------------------------ */

typedef struct program {
    rt_glaunch *launches;
    int n, cap;
    base_arena names;
    base_str sites;        /* "#define KG_SITE_<group> <launch>u" per group, and mono's prototypes */
    bool mono;             /* --schedule=mono, mono-barriers or mono-unmerged */
    bool waits;            /* mono: completion-counter waits instead of grid barriers */
    bool unmerged;         /* mono-unmerged: a stage per group (no barrier merging) */
    bool waves;            /* --schedule=waves: a kernel per wave of the group graph (emit_waves) */
    int wave_block;        /* waves: the threads a block of the wave kernel being formed */
    int n_waves, efficient_waves; /* waves: waves, and those that took the most efficient rKernels */
    int fitted;            /* mono: products built for the room their stage left (fit_stage) */
    bool fit;              /* mono: fit_stage on (KILN_MONO_FIT=0 turns it off) */
    int n_waits;           /* mono with waits: counters waited on, after the transitive reduction */
    int blocks_per_sm;     /* mono: resident blocks per multiprocessor each kernel is built for */
    int block;             /* mono: threads a block (cg_emitter.want_block) */
    int groups, barriers_before, barriers_after; /* mono: kernels' groups, barriers before and after merging */
    int persistent;        /* mono: kernels with more than one stage */
    int kernels;           /* launches that are kernels (not host segments) */
    base_str listing;      /* the rProgram as text (kiln inspect --schedule) */
    cg_share *share;       /* mono: identical rOperators' code written once (share.c); else NULL */
    bool inline_wgmma;     /* mono: rOperators with warpgroup MMAs inlined (KILN_MONO_INLINE_WGMMA=1) */
    bool inline_body;      /* mono: shared bodies with warpgroup MMAs __forceinline__ (unless KILN_MONO_INLINE_WGMMA=0) */
    base_str prof;         /* kg_prof_slots: a line per member of a persistent kernel */
    int prof_slots;        /* members of persistent kernels so far (their profile slots) */
    int64_t constant_bytes; /* persistent kernels' tables in constant memory so far (emit_persistent) */
} program;

static const char *schedule_name(const program *pr)
{
    return pr->waves ? "waves" : !pr->mono ? "kernels" : pr->waits ? "mono" : pr->unmerged ? "mono-unmerged"
                                                                                   : "mono-barriers";
}

/* Appends the mono counts: "114 groups in 1 kernel (1 persistent), 88 grid
 * barriers (113 before merging)[, replaced by waits on N completion counters][; the code
 * of N rOperators in M bodies]; blocks of 128 threads, 1 a multiprocessor". */
static void mono_counts(const program *pr, base_str *s)
{
    base_str_printf(s, "%d group%s in %d kernel%s (%d persistent), %d grid barriers (%d before merging)", pr->groups,
                    pr->groups == 1 ? "" : "s", pr->kernels, pr->kernels == 1 ? "" : "s", pr->persistent,
                    pr->barriers_after, pr->barriers_before);
    if (pr->waits) base_str_printf(s, ", replaced by waits on %d completion counters", pr->n_waits);
    int bodies, shared = cg_share_count(pr->share, &bodies);
    if (shared) base_str_printf(s, "; the code of %d rOperators in %d bodies", shared, bodies);
    if (pr->fitted)
        base_str_printf(s, "; %d product%s fitted to %s stage%s", pr->fitted, pr->fitted == 1 ? "" : "s",
                        pr->fitted == 1 ? "its" : "their", pr->fitted == 1 ? "" : "s");
    base_str_printf(s, "; blocks of %d threads, %d a multiprocessor", pr->block, pr->blocks_per_sm);
}

static kiln_status add_launch(cg_emitter *e, program *pr, int segment, const cg_op *op, int id, const char *label,
                              bool persistent)
{
    if (pr->n == pr->cap) {
        int cap = pr->cap ? pr->cap * 2 : 64;
        rt_glaunch *l = base_realloc(pr->launches, (size_t)cap * sizeof(*l));
        if (!l) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory listing launches");
        pr->launches = l;
        pr->cap = cap;
    }
    rt_glaunch *l = &pr->launches[pr->n];
    memset(l, 0, sizeof(*l));
    l->segment = segment;
    char name[32] = "";
    if (segment < 0) {
        snprintf(name, sizeof(name), "k_%d", id);
        int64_t grid = op->n_rtasks < MAX_GRID ? op->n_rtasks : MAX_GRID;
        l->grid = (unsigned)grid;
        l->block = (unsigned)op->block;
        l->smem = (unsigned)op->smem_bytes;
        l->persistent = persistent;
        l->early = true; /* kg_grid_dep begins every kernel, or every rTask (cg_op.prewait) */
    }
    l->name = base_arena_strdup(&pr->names, name);
    l->label = base_arena_strdup(&pr->names, label);
    if (!l->name || !l->label) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory listing launches");
    pr->n++;
    return KILN_OK;
}

static kiln_status check_op(cg_emitter *e, const sched_group *grp, const cg_op *op)
{
    if (op->n_rtasks < 1 || op->n_rtasks > INT32_MAX || op->block < 32 || op->block > 1024 || op->block % 32 ||
        op->smem_bytes < 0 || op->smem_bytes > KILN_GPROG_MAX_SMEM)
        return base_diag_add(e->d, KILN_ERR_INTERNAL,
                             "group '%s': emitter asked for %lld rTasks of %d threads and %d bytes of shared memory",
                             grp->name, (long long)op->n_rtasks, op->block, op->smem_bytes);
    return KILN_OK;
}

/* ---- kernels of several groups: waves and persistent kernels ----------------------------- *
 * Consecutive groups with one block size run as one kernel, their rTasks
 * one after another (Rammer's rTasks on vEUs). Each group is given the
 * earliest stage after every member it depends on: one that writes what it
 * reads, or reads or writes what it writes (bytes of the arena and the
 * outputs; the planner reuses arena bytes, so a later group's output may
 * sit on an earlier one's dead input), and after any split-K member whose
 * place in the workspace overlaps its own (cg_splitk_place). The stages are
 * thus the longest dependency paths through the kernel's groups (MonoNN
 * 4.4: a barrier per group, merged where nothing crosses it).
 *   --schedule=kernels: a kernel is one stage (a wave: BERT's query, key
 *     and value products), at most WAVE_MAX groups.
 *   --schedule=mono-barriers: a kernel holds every group up to a host
 *     segment or a change of block size; its stages are separated by
 *     barriers across the grid (kg_grid_sync), so it is persistent: the
 *     runtime fits the grid on the device. Emitters aim at one block size
 *     (want_block), so a model without host segments is one kernel.
 *   --schedule=mono: the same kernels and stages, but no barriers: an
 *     rTask waits only for the completion counters of the members it
 *     depends on (plan_waits), so a block goes on as soon as its inputs are
 *     done, not when every block has arrived. */

#define WAVE_MAX 8
#define WAVES_MAX 32 /* --schedule=waves: members of one wave kernel */
/* Kernel-wide configuration of --schedule=mono (MonoNN tunes block sizes of
 * 128 or 256 threads with 1..5 blocks per multiprocessor; kiln also offers
 * 384, and picks by the model unless `kiln tune` measured them). Measured
 * on an H100, fp16, batch 1: BERT-base runs 1.25 ms with 128 threads and
 * 1.54 ms with 256; ResNet-50 0.85 ms with 256 and 1.75 ms with 128 (the
 * 128-thread implicit-GEMM tiles are the weak
 * ones: kernels-mode ResNet-50 restricted to them takes 1.18 ms instead of
 * 0.68). Since identical rOperators share their code (share.c), one
 * block per multiprocessor is best where a few small products dominate
 * (it gives each product a multiprocessor's shared memory: TMA tiles of 12
 * stages): BERT b1 637 us at 128x1 against 818 at 128x3, ViT-B/16 927
 * against 1159 (256x1: 911); not where the products are large: BERT b16
 * took 3445 us at 128x1 (its products have 16 times the rows: 15 tiles a
 * multiprocessor, which one block of four warps runs one after another).
 * Three where convolutions dominate (ResNet-50 759 us at 256x3, 780 at
 * 256x1, 1464 at 128x1; one H100, one run each), unless their pointwise
 * convolutions are large: at one block a multiprocessor those run as TMA
 * products (cg_conv_product), so one where they average at least
 * MONO_LARGE_POINTWISE multiply-adds an image and are 16-bit (ResNet-50's
 * 33 average 55 M; GoogLeNet's 37, 10 M; MobileNetV2's 34, 7.9 M; batch 4
 * at large_pointwise). H100, fp16, one call, two rounds, outputs within
 * fp16 rounding (us, 256x3 / 256x1 with products): ResNet-50 628 / 658
 * against 502 / 502, GoogLeNet 272 / 273 against 355 / 356, MobileNetV2
 * 243 / 243 against 319 / 321. The line between small and large products:
 * the largest product's output, at most MONO_SMALL_PRODUCT
 * elements (ViT b1's largest is 0.6 M, BERT b16's 6.3 M). Since GEMM tiles
 * may be narrow (cg_op.narrow), 256-thread blocks serve ViT and BERT b16
 * better (below, mono_block). */
#define MONO_BLOCKS_PER_SM_SMALL 1
#define MONO_BLOCKS_PER_SM 3
#define MONO_SMALL_PRODUCT (1 << 20)
#define MONO_LARGE_POINTWISE (INT64_C(1) << 25)

/* The largest GEMM output (elements) and its rows (all but the last dim). */
static int64_t largest_product(const sched_program *p, int64_t *rows)
{
    int64_t largest = 0;
    *rows = 0;
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        if (grp->kind != SCHED_GROUP_GEMM) continue;
        for (int i = 0; i < grp->n_out; i++) {
            const ir_tensor *t = &grp->out[i]->t;
            int64_t n = ir_numel(t), last = t->rank > 0 ? t->dims[t->rank - 1] : 1;
            if (n > largest) {
                largest = n;
                *rows = last > 0 ? n / last : 0;
            }
        }
    }
    return largest;
}

/* Whether precision ("fp16"; NULL: fp32) stores 16-bit floats. */
static bool sixteen_bit(const char *precision)
{
    return precision && (strcmp(precision, "fp16") == 0 || strcmp(precision, "bf16") == 0);
}

/* Whether the pointwise convolutions (cg_conv_pointwise_macs), which at one
 * block a multiprocessor run as products where they are 16-bit, average at
 * least MONO_LARGE_POINTWISE multiply-adds an image. An image, not the
 * batch: at batch 4 (H100, fp16, mono, two rounds) ResNet-50 ran 1297 /
 * 1310 us at 256x3 and 855 / 869 at 256x1, but GoogLeNet (40 M a batch,
 * 10 M an image) 555 / 563 against 719 / 732 and MobileNetV2 (32 M, 7.9 M)
 * 411 / 414 against 566 / 571. */
static bool large_pointwise(const sched_program *p, const char *precision)
{
    if (!sixteen_bit(precision) || cg_env_is("KILN_CONV_PRODUCT", "0")) return false;
    int64_t n = 0, macs = 0;
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        int64_t m = grp->kind == SCHED_GROUP_CONV && grp->n_nodes ? cg_conv_pointwise_macs(grp->nodes[0]) : 0;
        n += m > 0;
        macs += m;
    }
    return n > 0 && macs >= n * MONO_LARGE_POINTWISE;
}

/* The convolution groups and the other contractions' (products, attention). */
static void count_contractions(const sched_program *p, int *convs, int *others)
{
    *convs = *others = 0;
    for (int s = 0; s < p->n_groups; s++) {
        int kind = p->groups[s]->kind;
        *convs += kind == SCHED_GROUP_CONV;
        *others += kind == SCHED_GROUP_GEMM || kind == SCHED_GROUP_ATTENTION;
    }
}

/* Whether convolutions outnumber the other contractions. */
static bool convs_dominate(const sched_program *p)
{
    int convs, others;
    count_contractions(p, &convs, &others);
    return convs > others;
}

bool target_cuda_mono_block_ok(long block) { return block == 128 || block == 256 || block == 384; }

/* 256 threads where convolutions dominate, or where the largest product has
 * more rows than one 128-row tile: a 256-thread block then offers
 * two-warpgroup 128-row tiles besides the narrow one-warpgroup ones. One
 * H100, one call each, the cost model's tiles: ViT-B/16 (197 rows) 815-822
 * us at 256x1 against 938 at 128x1 and 920 at 256x2; BERT-base b16 (2048
 * rows) 1879 us at 256x1 against 2768 at 128x3 and 2551 at 256x2; BERT-base
 * b1 (128 rows) 644 us at 128x1 against 676 at 256x1. Else 128. And 384
 * where such a 16-bit product is also larger than MONO_SMALL_PRODUCT and
 * there is no convolution (no convolution template takes 384 threads: one
 * would be a kernel of its own, as ViT's patch embedding was below). Three
 * warpgroups take the 192 x 192 TMA tiles (BERT b16's query, key and value
 * products in 132 rTasks, one round, instead of 384 of 128 x 96 in three)
 * and the attention three query tiles an rTask (emit_attention.c
 * plan_units); the other products stay narrow on 256 of the threads. H200,
 * fp16, one call, two rounds, outputs bit-identical: BERT b16 1356 / 1352
 * us at 256x1 against 1306 / 1311 at 384x1 (host 1484 / 1495 against 1444
 * / 1438); BERT b1 455 / 452 at its 128x1 against 490 / 491. The
 * 192-row tiles are sm_90's (cuda_build takes 256 on an older GPU). */
static int mono_block(const sched_program *p, const char *precision)
{
    int64_t rows, largest = largest_product(p, &rows);
    int convs, others;
    count_contractions(p, &convs, &others);
    if (convs == 0 && largest > MONO_SMALL_PRODUCT && rows > 128 && sixteen_bit(precision)) return 384;
    return convs > others || rows > 128 ? 256 : 128;
}

/* Blocks per multiprocessor for blocks of `block` threads (mono_block): at
 * 384 one; at 256 threads three where convolutions dominate (or there is
 * no product) unless their pointwise ones are large, else one; at 128 one
 * where products of at most MONO_SMALL_PRODUCT output elements dominate,
 * else three. */
static int mono_blocks_per_sm(const sched_program *p, int block, const char *precision)
{
    int64_t rows, largest = largest_product(p, &rows);
    if (block == 384) return 1;
    if (block == 256 && convs_dominate(p))
        return large_pointwise(p, precision) ? MONO_BLOCKS_PER_SM_SMALL : MONO_BLOCKS_PER_SM;
    if (block == 256) return largest == 0 ? MONO_BLOCKS_PER_SM : MONO_BLOCKS_PER_SM_SMALL;
    return largest <= MONO_SMALL_PRODUCT ? MONO_BLOCKS_PER_SM_SMALL : MONO_BLOCKS_PER_SM;
}

void target_cuda_mono_heuristic(const sched_program *p, const char *precision, int *block, int *per_sm)
{
    *block = mono_block(p, precision);
    *per_sm = mono_blocks_per_sm(p, *block, precision);
}

/* e->gemm_share: for each GEMM group, how many identical products of the
 * same A (cg_gemm_siblings) follow one another in the program, mutually
 * independent, its own included: they share a wave (or a stage of a
 * persistent kernel), so cg_emit_gemm chooses their tiles together (BERT's
 * query, key and value). At most WAVE_MAX; alias groups in between emit
 * nothing and do not count. */
static kiln_status plan_gemm_share(cg_emitter *e)
{
    const sched_program *p = e->p;
    e->gemm_share = base_calloc((size_t)p->n_groups + 1, sizeof(int));
    if (!e->gemm_share) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory planning products");
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *first = p->groups[s];
        if (first->kind != SCHED_GROUP_GEMM || e->gemm_share[first->id]) continue;
        const sched_group *run[WAVE_MAX] = {first};
        int n = 1;
        for (int t = s + 1; t < p->n_groups && n < WAVE_MAX; t++) {
            const sched_group *x = p->groups[t];
            if (x->kind == SCHED_GROUP_ALIAS) continue;
            bool sibling = cg_gemm_siblings(e, first, x);
            for (int k = 0; sibling && k < n; k++) sibling = !sched_group_depends(e->g, p, run[k], x);
            if (!sibling) break;
            run[n++] = x;
        }
        for (int k = 0; k < n; k++) e->gemm_share[run[k]->id] = n;
    }
    return KILN_OK;
}

typedef struct member {
    const sched_group *grp;
    cg_op op;
    int stage;
    int body;           /* op_<id> calls the shared opb_<body> (share.c); -1: its own code */
    int n_values;       /* the constants it passes opb_<body> */
    const char *values; /* their C expressions, ", "-joined (in program.names); NULL when body < 0 */
} member;

typedef struct batch {
    member *m;
    int n, cap;
    int block; /* the kernel's threads a block: its members', or in mono the widest, the narrow ones' early-exiting */
} batch;

/* The block an rOperator's kernel needs: its own, or in a persistent
 * kernel the kernel's (pr->block), in a wave kernel the wave's widest
 * (pr->wave_block), for a narrow one (cg_op.narrow) of fewer threads, whose
 * rTasks the other threads skip (member_call). */
static int kernel_block(const program *pr, const cg_op *op)
{
    int wide = pr->mono ? pr->block : pr->waves ? pr->wave_block : 0;
    /* a wave kernel's launch bounds leave a thread 65536 / wide registers
     * (the persistent kernel's candidates were chosen within its own) */
    if (!pr->mono && op->acc_regs > cg_regs_per_thread(wide, 1)) wide = 0;
    return cg_block_in(op, wide);
}

kiln_status cg_splitk_place(cg_emitter *e, const sched_group *grp, int64_t floats, int64_t sems, cg_op *op)
{
    if (floats < 1 || floats > CG_SPLITK_WS_FLOATS || sems < 1 || sems > CG_SPLITK_SEMS)
        return base_diag_add(e->d, KILN_ERR_INTERNAL,
                             "group '%s': split-K needs %lld floats and %lld counters of a workspace of %d and %d",
                             grp->name, (long long)floats, (long long)sems, CG_SPLITK_WS_FLOATS, CG_SPLITK_SEMS);
    if (e->splitk_ws_next + floats > CG_SPLITK_WS_FLOATS || e->splitk_sem_next + sems > CG_SPLITK_SEMS)
        e->splitk_ws_next = e->splitk_sem_next = 0;
    op->splitk = true;
    op->ws_at = e->splitk_ws_next;
    op->ws_floats = floats;
    op->sem_at = e->splitk_sem_next;
    op->sems = (int)sems;
    e->splitk_ws_next += floats;
    e->splitk_sem_next += (int)sems;
    return KILN_OK;
}

void cg_tiles_set(cg_op *op, const ir_value *v, int64_t len, int64_t div, int64_t tiles_m, int64_t tiles_n,
                  int64_t group, int64_t bm, int64_t m)
{
    /* kg_tiles.h counts in 32 bits, and a tile row's rTasks must number the same */
    if (!v || len <= 0 || div <= 0 || tiles_m <= 0 || tiles_n <= 0 || group <= 0 || bm <= 0 || m <= 0 ||
        m > UINT32_MAX || bm > UINT32_MAX || tiles_m * tiles_n > UINT32_MAX || group * tiles_n > UINT32_MAX ||
        (m + bm - 1) / bm != tiles_m ||
        op->n_rtasks % (div * tiles_m * tiles_n) != 0)
        return;
    op->tiles = (cg_tiles){.div = div, .tiles_m = tiles_m, .tiles_n = tiles_n, .group = group, .bm = bm, .m = m,
                           .v = v, .len = len};
}

void cg_rows_read(cg_op *op, const ir_value *v, int64_t len, const cg_im2col *conv)
{
    if (!v) return;
    for (int i = 0; i < op->n_reads; i++)
        if (op->reads[i].v == v) { /* read twice: by neither window alone */
            op->reads[i].len = -1;
            return;
        }
    if (op->n_reads == CG_ROWREADS) return;
    cg_rowread *r = &op->reads[op->n_reads++];
    *r = (cg_rowread){.v = v, .len = len};
    if (!conv) return;
    /* kg_win_rows counts in 32 bits: rows of x and of the output, and each image's rows past its last */
    const int64_t kext = (conv->kh - 1) * conv->dh;
    if (conv->imgs <= 0 || conv->h <= 0 || conv->w <= 0 || conv->oh <= 0 || conv->ow <= 0 || conv->sh <= 0 ||
        conv->ph < 0 || kext < 0 || conv->imgs * conv->h * conv->w > UINT32_MAX ||
        conv->imgs * conv->oh * conv->ow > UINT32_MAX || conv->oh * conv->sh + kext > UINT32_MAX)
        r->len = -1;
    else
        r->win = (kg_win){.h = (unsigned)conv->h, .w = (unsigned)conv->w, .oh = (unsigned)conv->oh,
                          .ow = (unsigned)conv->ow, .sh = (unsigned)conv->sh, .ph = (unsigned)conv->ph,
                          .kext = (unsigned)kext};
}

void cg_rows_other(cg_op *op, const ir_value *v)
{
    cg_rows_read(op, v, -1, NULL); /* a new entry of no length, or the one there spoilt */
}

bool cg_splitk_overlap(const cg_op *a, const cg_op *b)
{
    if (!a->splitk || !b->splitk) return false;
    return (a->ws_at < b->ws_at + b->ws_floats && b->ws_at < a->ws_at + a->ws_floats) ||
           (a->sem_at < b->sem_at + b->sems && b->sem_at < a->sem_at + a->sems);
}

static int stage_for(const cg_emitter *e, const batch *b, const sched_group *grp, const cg_op *op)
{
    int s = 0;
    for (int k = 0; k < b->n; k++)
        if (cg_splitk_overlap(op, &b->m[k].op) || sched_group_depends(e->g, e->p, b->m[k].grp, grp))
            s = KILN_MAX(s, b->m[k].stage + 1);
    return s;
}

/* An rOperator's rTasks' time each: est_clk spread over its rounds of
 * `blocks` rTasks. */
static double rtask_clk(int64_t n_rtasks, double est_clk, int blocks)
{
    return est_clk / (double)((n_rtasks + blocks - 1) / blocks);
}

double cg_stage_time(const cg_emitter *e, int64_t n_rtasks, double est_clk)
{
    return sched_stage_time(e->stage_load, e->stage_blocks, e->stage_before, n_rtasks,
                            rtask_clk(n_rtasks, est_clk, e->stage_blocks));
}

/* "a | b | c" for a few groups of one stage, else "first .. last (N groups
 * in S stages)". */
static void batch_label(const batch *b, int stages, base_str *s)
{
    if (stages == 1 && b->n <= WAVE_MAX)
        for (int k = 0; k < b->n; k++) base_str_printf(s, "%s%s", k ? " | " : "", b->m[k].grp->name);
    else
        base_str_printf(s, "%.400s .. %.400s (%d groups in %d stages)", b->m[0].grp->name, b->m[b->n - 1].grp->name,
                        b->n, stages);
}

/* Counter waits: which earlier members each member of a batch waits for.
 * Those it depends on (and for a split-K member the split-K members before
 * it whose places in the workspace overlap its own), less those that
 * another of them waits for already, directly or not (the transitive
 * reduction: taking the candidates latest first, one another's reach
 * covers is dropped).
 * Member k's are dep[at[k]] .. dep[at[k + 1] - 1]; read[i] is -1 for a
 * wait until all of the member's rTasks have finished, else a tile-row
 * wait (kg_tiles.h): member k depends on dep[i] only by reading the rows
 * of its reads[read[i]], so each rTask waits for the producer's tile rows
 * that it reads. Such a wait says nothing of the rest of the producer, so
 * it adds nothing to the reach: only full waits do. */
typedef struct waits {
    int *dep, *at, *read;
} waits;

static void waits_free(waits *w)
{
    base_free(w->dep);
    base_free(w->at);
    base_free(w->read);
}

/* The read of member k's (cg_op.reads) through which it depends on member
 * j only, so that it may wait for j's tile rows alone; -1 where there is
 * none. */
static int row_read(const cg_emitter *e, const member *j, const member *k)
{
    const cg_tiles *tj = &j->op.tiles;
    if (!tj->m || !k->op.tiles.m || cg_splitk_overlap(&j->op, &k->op)) return -1;
    for (int r = 0; r < k->op.n_reads; r++) {
        const cg_rowread *rd = &k->op.reads[r];
        if (rd->v == tj->v)
            return rd->len == tj->len && sched_group_depends_via(e->g, e->p, j->grp, k->grp, tj->v) ? r : -1;
    }
    return -1;
}

static kiln_status plan_waits(cg_emitter *e, const batch *b, waits *w)
{
    const int n = b->n, words = (n + 63) / 64;
    uint64_t *reach = base_calloc((size_t)n * (size_t)words, sizeof(uint64_t));
    w->at = base_calloc((size_t)n + 1, sizeof(int));
    int used = 0, cap = 2 * n + 16;
    w->dep = base_malloc((size_t)cap * sizeof(int));
    w->read = base_malloc((size_t)cap * sizeof(int));
    bool oom = !reach || !w->at || !w->dep || !w->read;
    const bool rows = cg_env_is("KILN_MONO_ROWS", "1"); /* tile-row waits: off by default (slower) */
    for (int k = 0; k < n && !oom; k++) {
        uint64_t *rk = reach + (size_t)k * words;
        w->at[k] = used;
        for (int j = k - 1; j >= 0 && !oom; j--) {
            if (rk[j / 64] >> (j % 64) & 1u) continue;
            bool shared_ws = cg_splitk_overlap(&b->m[j].op, &b->m[k].op);
            if (!shared_ws && !sched_group_depends(e->g, e->p, b->m[j].grp, b->m[k].grp)) continue;
            if (used == cap) {
                int *more = base_realloc(w->dep, (size_t)cap * 2 * sizeof(int));
                if (more) w->dep = more;
                int *more_read = more ? base_realloc(w->read, (size_t)cap * 2 * sizeof(int)) : NULL;
                if (more_read) w->read = more_read;
                oom = !more || !more_read;
                if (oom) break;
                cap *= 2;
            }
            const int read = rows && !shared_ws ? row_read(e, &b->m[j], &b->m[k]) : -1;
            w->read[used] = read;
            w->dep[used++] = j;
            if (read >= 0) continue; /* j is not all done when k's rTasks start */
            rk[j / 64] |= (uint64_t)1 << (j % 64);
            for (int x = 0; x < words; x++) rk[x] |= reach[(size_t)j * words + x];
        }
    }
    base_free(reach);
    if (oom) {
        waits_free(w);
        return base_diag_add(e->d, KILN_ERR_OOM, "out of memory planning counter waits");
    }
    w->at[n] = used;
    return KILN_OK;
}

/* The batch's lines in the rProgram listing: the kernel's configuration,
 * then each stage's groups with their rTasks (all is the kernel's op). */
static void list_batch(program *pr, const batch *b, const waits *w, const cg_op *all, int stages, int launch)
{
    base_str *l = &pr->listing;
    base_str_printf(l, "launch %d: kernel k_%d, %d thread%s a block, %d bytes of shared memory", launch,
                    b->m[0].grp->id, all->block, all->block == 1 ? "" : "s", all->smem_bytes);
    if (stages == 1) {
        base_str_printf(l, "; grid %lld\n", (long long)all->n_rtasks);
    } else {
        base_str_printf(l, "; persistent (grid: the blocks resident at once, built for %d a multiprocessor), %d stages, ",
                        pr->blocks_per_sm, stages);
        if (w) base_str_printf(l, "waits on %d completion counters instead of ", w->at[b->n]);
        base_str_printf(l, "%d grid barriers (%d before merging)\n", stages - 1, b->n - 1);
    }
    for (int st = 0; st < stages; st++) {
        if (stages > 1) base_str_printf(l, "  stage %d%s\n", st, st + 1 < stages && !w ? " (then a grid barrier)" : "");
        for (int k = 0; k < b->n; k++) {
            const member *m = &b->m[k];
            if (m->stage != st) continue;
            char narrow[64] = "";
            if (m->op.block < b->block)
                snprintf(narrow, sizeof(narrow), ", on %d of the %d threads", m->op.block, b->block);
            base_str_printf(l, "    group %-4d %-11s %7lld rTasks %6d B smem%s%s%s  %s%s%s%s\n", m->grp->id,
                            sched_group_kind_name(m->grp->kind), (long long)m->op.n_rtasks, m->op.smem_bytes,
                            m->op.splitk ? ", split-K" : "", narrow, m->op.fitted ? ", fitted to its stage" : "",
                            m->op.config[0] ? "[" : "", m->op.config, m->op.config[0] ? "]  " : "", m->grp->name);
            if (w && w->at[k + 1] > w->at[k]) {
                base_str_cat(l, "                waits for group");
                for (int i = w->at[k]; i < w->at[k + 1]; i++)
                    base_str_printf(l, "%s %d%s", i > w->at[k] ? "," : w->at[k + 1] - w->at[k] > 1 ? "s" : "",
                                    b->m[w->dep[i]].grp->id, w->read[i] >= 0 ? " (the tile rows it reads)" : "");
                base_str_cat(l, "\n");
            }
        }
    }
}

/* Member k's call on rTask t - first in a kernel of one stage. A
 * cg_op.prewait member is told whether to do griddepcontrol.wait itself:
 * grid_dep, in a kernel whose head leaves it out. */
static void member_call(base_str *s, const batch *b, int k, int64_t first, bool grid_dep)
{
    const member *m = &b->m[k];
    char t[48] = "t";
    if (first) snprintf(t, sizeof(t), "t - %lld", (long long)first);
    /* a narrow rOperator's rTask: the block's other threads exit it early,
     * then the whole block meets */
    if (m->op.block < b->block)
        base_str_printf(s, "{\n            if (threadIdx.x < %du) op_%d(c, %s%s);\n            __syncthreads();\n        }\n",
                        m->op.block, m->grp->id, t, cg_pre_arg(&m->op, grid_dep));
    else base_str_printf(s, "op_%d(c, %s%s);\n", m->grp->id, t, cg_pre_arg(&m->op, grid_dep));
}

/* Appends member k's line of kg_prof_slots, "KERNEL RTASKS NAME\n", the name
 * as a C string's contents: printable ASCII but quote, backslash and '?'
 * (trigraphs), the rest octal escapes; a newline or tab becomes a space. */
static void prof_slot_line(program *pr, const char *kernel, const member *m)
{
    base_str_printf(&pr->prof, "\"%s %lld ", kernel, (long long)m->op.n_rtasks);
    for (const unsigned char *c = (const unsigned char *)m->grp->name; *c; c++) {
        if (*c == '\n' || *c == '\t') base_str_cat(&pr->prof, " ");
        else if (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\' && *c != '?') base_str_printf(&pr->prof, "%c", *c);
        else base_str_printf(&pr->prof, "\\%03o", *c);
    }
    base_str_cat(&pr->prof, "\\n\"\n");
}

/* A kernel of one stage: a loop over its members' rTasks, each calling
 * its member's op_<id> (a wave, or an rOperator alone). */
static void emit_stage_kernel(base_str *s, const batch *b, const char *kname, const cg_op *all)
{
    /* a kernel whose rOperators can all wait inside their rTasks leaves
     * griddepcontrol.wait to them: they first initialise their barriers
     * and copy their weights' first k-tiles. (Persistent kernels wait
     * before the call: inside, with the counters passed in, BERT b1 and
     * ViT ran 5% slower on an H100, with or without the early copies.) */
    bool rtask_dep = true;
    for (int k = 0; k < b->n; k++) rtask_dep &= b->m[k].op.prewait;
    cg_kernel_head(s, kname, all->block, 0, b->m[0].op.cluster, !rtask_dep);
    base_str_printf(s, "    for (int t = blockIdx.x; t < %lld; t += gridDim.x) {\n", (long long)all->n_rtasks);
    int64_t first = 0;
    for (int k = 0; k < b->n; k++) {
        int64_t end = first + b->m[k].op.n_rtasks;
        if (end == all->n_rtasks && k == 0) base_str_cat(s, "        ");
        else if (end == all->n_rtasks) base_str_cat(s, "        else ");
        else base_str_printf(s, "        %sif (t < %lld) ", k ? "else " : "", (long long)end);
        member_call(s, b, k, first, rtask_dep);
        first = end;
    }
    base_str_cat(s, "    }\n}\n\n");
}

/* Constant memory the persistent kernels' tables may take, of the 64 KB
 * a module has. */
#define MONO_CONSTANT_BYTES (48 * 1024)

/* call[k]: the case of member k's call in a persistent kernel's switch,
 * one for each shared body (share.c) of one width and one for each member
 * that keeps its own code, numbered in order of first use; first[c]: the
 * first member of call c. Returns the number of calls. */
static int persistent_calls(const batch *b, int *call, int *first)
{
    int calls = 0;
    for (int k = 0; k < b->n; k++) {
        call[k] = -1;
        for (int c = 0; c < calls && call[k] < 0 && b->m[k].body >= 0; c++) {
            const member *f = &b->m[first[c]];
            if (f->body == b->m[k].body && f->op.block == b->m[k].op.block) call[k] = c;
        }
        if (call[k] < 0) {
            first[calls] = k;
            call[k] = calls++;
        }
    }
    return calls;
}

/* The j-th of a member's ", "-joined constants (share.c prints numbers
 * and KG_SITE_<id>, no commas inside), into buf; "" past the last. */
static const char *member_value(const member *m, int j, char *buf, size_t n)
{
    const char *p = m->values ? m->values : "";
    for (int i = 0; i < j && p; i++) {
        p = strchr(p, ',');
        if (p) p += 2;
    }
    size_t len = p ? strcspn(p, ",") : 0;
    snprintf(buf, n, "%.*s", (int)len, p ? p : "");
    return buf;
}

/* differ[c * width + j]: whether the members of call c pass their j-th
 * constant differently; where they do not, the call writes it as it is
 * and the body is compiled for it (BERT's fault sites, a body of one
 * member). width: the most constants a member passes. */
static void persistent_differ(const batch *b, const int *call, const int *first, int width, bool *differ)
{
    for (int k = 0; k < b->n; k++)
        for (int j = 0; j < b->m[k].n_values; j++) {
            char mine[48], theirs[48];
            const int c = call[k];
            if (!differ[c * width + j] && strcmp(member_value(&b->m[k], j, mine, sizeof(mine)),
                                                 member_value(&b->m[first[c]], j, theirs, sizeof(theirs))) != 0)
                differ[c * width + j] = true;
        }
}

/* The switch over the calls of a persistent kernel's members that are
 * narrow (or not), each line indented by `in` (differ, width:
 * persistent_differ). */
static void persistent_switch(base_str *s, const batch *b, const int *call, const bool *differ, int width, bool narrow,
                              const char *in)
{
    base_str_cat(s, "switch (m.call) {\n");
    for (int k = 0, next = 0; k < b->n; k++) {
        if (call[k] != next) continue; /* not a call's first member */
        next++;
        const member *m = &b->m[k];
        if ((m->op.block < b->block) != narrow) continue;
        /* in a persistent kernel the head does griddepcontrol.wait: grid_dep 0 */
        if (m->body >= 0) {
            base_str_printf(s, "%scase %du: opb_%d(c, r%s", in, call[k], m->body, cg_pre_arg(&m->op, false));
            for (int j = 0; j < m->n_values; j++) {
                char mine[48];
                if (differ[call[k] * width + j]) base_str_printf(s, ", v[%d]", j);
                else base_str_printf(s, ", %s", member_value(m, j, mine, sizeof(mine)));
            }
            base_str_cat(s, "); break;\n");
        } else {
            base_str_printf(s, "%scase %du: op_%d(c, r%s); break;\n", in, call[k], m->grp->id, cg_pre_arg(&m->op, false));
        }
    }
    base_str_printf(s, "%s}\n", in);
}

/* A persistent kernel (MonoNN's one kernel, Rammer's rProgram as data):
 * its stages, members, waits and the shared bodies' constants as tables,
 * and one loop that runs them (kg.h's kg_stage and kg_member). Each stage
 * is a loop over its members' rTasks, the stages separated by grid
 * barriers or, with waits (w), each rTask preceded by its wait on the
 * counters of the members it depends on. Every member's rTask records its
 * times in its profile slot while the runtime profiles (kg_prof_rtask). */
static kiln_status emit_persistent(cg_emitter *e, program *pr, const batch *b, const waits *w, int stages,
                                   int launch, const char *kname, const cg_op *all)
{
    base_str *s = &e->code;
    const int id = b->m[0].grp->id;
    /* the members in stage order (order[i] is the i-th's index in b), their
     * calls, and the constants each call's members pass differently */
    int width = 1;
    for (int k = 0; k < b->n; k++) width = KILN_MAX(width, b->m[k].n_values);
    int *order = base_malloc(3 * (size_t)b->n * sizeof(int)), *call = order + b->n, *first_member = call + b->n;
    bool *differ = base_calloc((size_t)b->n * (size_t)width, sizeof(bool));
    if (!order || !differ) {
        base_free(order);
        base_free(differ);
        return base_diag_add(e->d, KILN_ERR_OOM, "out of memory forming a persistent kernel");
    }
    const int calls = persistent_calls(b, call, first_member);
    persistent_differ(b, call, first_member, width, differ);
    int values = 0; /* the table's columns: up to the last constant some call reads from it */
    for (int c = 0; c < calls; c++)
        for (int j = values; j < width; j++)
            if (differ[c * width + j]) values = j + 1;
    int n_order = 0;
    for (int st = 0; st < stages; st++)
        for (int k = 0; k < b->n; k++)
            if (b->m[k].stage == st) order[n_order++] = k;

    /* the tile-row waits' tables: a kg_tiles for each member that signals
     * tile rows or waits on them (tiles[k]: its index, -1 none; row_base[k]:
     * its first counter when it signals, -1 when not), a kg_win for each
     * such wait, and the counters */
    int *tiles = base_malloc(2 * (size_t)b->n * sizeof(int)), *row_base = tiles ? tiles + b->n : NULL;
    if (!tiles) {
        base_free(order);
        base_free(differ);
        return base_diag_add(e->d, KILN_ERR_OOM, "out of memory forming a persistent kernel");
    }
    int n_tiles = 0, n_wins = 0;
    int64_t n_rows = 0;
    for (int k = 0; k < b->n; k++) tiles[k] = row_base[k] = -1;
    for (int i = 0; w && i < w->at[b->n]; i++)
        if (w->read[i] >= 0) {
            n_wins++;
            row_base[w->dep[i]] = 0;
        }
    for (int k = 0; k < b->n; k++)
        if (row_base[k] == 0) {
            row_base[k] = (int)n_rows;
            n_rows += b->m[k].op.tiles.tiles_m;
        }
    for (int k = 0; w && k < b->n; k++) {
        bool waits_rows = false;
        for (int i = w->at[k]; i < w->at[k + 1]; i++) waits_rows |= w->read[i] >= 0;
        if (waits_rows || row_base[k] >= 0) tiles[k] = n_tiles++;
    }
    if (n_rows > INT32_MAX) {
        base_free(order);
        base_free(differ);
        base_free(tiles);
        return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "a persistent kernel of more than 2^31 tile rows");
    }
    /* the tables in constant memory, read through the constant cache into
     * uniform registers, where they fit beside another kernel's (a 64 KB
     * bank for the module); else in global memory. The shared bodies then
     * know their constants are uniform: read from global memory, BERT's
     * FFN2 body moved them into uniform registers 209 times (R2UR) and
     * grew from 14.4 to 17.1 KB. */
    const int64_t table_bytes = (int64_t)stages * 16 + (int64_t)b->n * (32 + 8 * values) + (w ? 8 * w->at[b->n] : 0) +
                                (n_wins ? 4 * ((int64_t)b->n + w->at[b->n]) + 32 * (int64_t)n_tiles + 32 * (int64_t)n_wins
                                        : 0);
    const bool constant = pr->constant_bytes + table_bytes <= MONO_CONSTANT_BYTES;
    const char *space = constant ? "__constant__" : "__device__ const";
    if (constant) pr->constant_bytes += table_bytes;
    if (w) base_str_printf(s, "static __device__ unsigned kg_done_%d[%d]; /* finished rTasks per member */\n", id, b->n);
    if (n_rows)
        base_str_printf(s, "static __device__ unsigned kg_rows_%d[%lld]; /* finished rTasks per tile row */\n", id,
                        (long long)n_rows);
    base_str_printf(s, "static %s kg_stage kg_stages_%d[%d] = {", space, id, stages);
    for (int st = 0, i = 0; st < stages; st++) {
        int first = i;
        int64_t n = 0;
        for (; i < n_order && b->m[order[i]].stage == st; i++) n += b->m[order[i]].op.n_rtasks;
        base_str_printf(s, "%s{%du, %du, %lldu, 0u}", !st ? "\n    " : st % 4 ? ", " : ",\n    ", first, i, (long long)n);
    }
    base_str_printf(s, "};\nstatic %s kg_member kg_members_%d[%d] = {", space, id, b->n);
    int64_t first = 0;
    bool tmaps = false; /* some member copies with tensor maps */
    for (int i = 0; i < n_order; i++) {
        const int k = order[i];
        const member *m = &b->m[k];
        if (i && b->m[order[i - 1]].stage != m->stage) first = 0;
        base_str_printf(s, "\n    {%lldu, %lldu, %du, %du, %du, %du, %du, %du}, /* group %d */", (long long)first,
                        (long long)(first + m->op.n_rtasks), w ? w->at[k] : 0, w ? w->at[k + 1] - w->at[k] : 0,
                        call[k], m->op.block, k, m->op.tmap, m->grp->id);
        tmaps |= m->op.tmap != 0;
        first += m->op.n_rtasks;
    }
    base_str_cat(s, "\n};\n");
    if (w && w->at[b->n] > 0) {
        base_str_printf(s, "static %s kg_dep kg_deps_%d[%d] = {", space, id, w->at[b->n]);
        for (int i = 0; i < w->at[b->n]; i++)
            base_str_printf(s, "%s{%du, %lldu}", !i ? "\n    " : i % 8 ? ", " : ",\n    ", w->dep[i],
                            (long long)b->m[w->dep[i]].op.n_rtasks);
        base_str_cat(s, "};\n");
    }
    if (n_wins) {
        /* the tile-row waits' tables (kg.h kg_row_waits), in the order of kg_members and kg_deps */
        base_str_printf(s, "static %s unsigned kg_mtiles_%d[%d] = {", space, id, b->n);
        for (int i = 0; i < n_order; i++) base_str_printf(s, "%s%du", !i ? "" : i % 16 ? ", " : ",\n    ", tiles[order[i]] + 1);
        base_str_printf(s, "};\nstatic %s unsigned kg_dwins_%d[%d] = {", space, id, w->at[b->n]);
        for (int i = 0, win = 0; i < w->at[b->n]; i++)
            base_str_printf(s, "%s%du", !i ? "" : i % 16 ? ", " : ",\n    ", w->read[i] >= 0 ? ++win : 0);
        base_str_cat(s, "};\n");
    }
    if (n_tiles) {
        base_str_printf(s, "/* div, tiles_m, tiles_n, group, bm, m, rows, per_row (kg_tiles.h) */\n"
                           "static %s kg_tiles kg_tiles_%d[%d] = {", space, id, n_tiles);
        for (int k = 0; k < b->n; k++) {
            if (tiles[k] < 0) continue;
            const cg_tiles *x = &b->m[k].op.tiles;
            base_str_printf(s, "\n    {%lldu, %lldu, %lldu, %lldu, %lldu, %lldu, %du, %lldu}, /* group %d */",
                            (long long)x->div, (long long)x->tiles_m, (long long)x->tiles_n, (long long)x->group,
                            (long long)x->bm, (long long)x->m, KILN_MAX(row_base[k], 0),
                            (long long)(row_base[k] >= 0 ? b->m[k].op.n_rtasks / x->tiles_m : 0), b->m[k].grp->id);
        }
        base_str_cat(s, "\n};\n");
    }
    if (n_wins) {
        base_str_printf(s, "/* tiles, h, w, oh, ow, sh, ph, kext (kg_tiles.h) */\n"
                           "static %s kg_win kg_wins_%d[%d] = {", space, id, n_wins);
        for (int k = 0; k < b->n; k++)
            for (int i = w->at[k]; i < w->at[k + 1]; i++) {
                if (w->read[i] < 0) continue;
                const kg_win *r = &b->m[k].op.reads[w->read[i]].win;
                base_str_printf(s, "\n    {%du, %uu, %uu, %uu, %uu, %uu, %uu, %uu}, /* group %d reads group %d */",
                                tiles[w->dep[i]], r->h, r->w, r->oh, r->ow, r->sh, r->ph, r->kext, b->m[k].grp->id,
                                b->m[w->dep[i]].grp->id);
            }
        base_str_cat(s, "\n};\n");
    }
    if (values > 0) {
        base_str_printf(s, "/* the constants each member passes its shared body */\n"
                           "static %s kg_u64 kg_values_%d[%d][%d] = {", space, id, b->n, values);
        for (int i = 0; i < n_order; i++) {
            const member *m = &b->m[order[i]];
            base_str_cat(s, "\n    {");
            for (int j = 0; j < KILN_MAX(1, KILN_MIN(values, m->n_values)); j++) {
                char v[48];
                base_str_printf(s, "%s%s", j ? ", " : "", j < m->n_values ? member_value(m, j, v, sizeof(v)) : "0ull");
            }
            base_str_printf(s, "}, /* group %d */", m->grp->id);
        }
        base_str_cat(s, "\n};\n");
    }

    cg_kernel_head(s, kname, all->block, pr->blocks_per_sm, b->m[0].op.cluster, true);
    base_str_printf(s,
                    "    for (unsigned st = 0; st < %du; st++) {\n"
                    "        const kg_stage s = kg_stages_%d[st];\n"
                    "        for (unsigned t = blockIdx.x; t < s.rtasks; t += gridDim.x) {\n"
                    "            unsigned i = s.first;\n"
                    "            while (i + 1u < s.end && t >= kg_members_%d[i + 1u].first) i++;\n"
                    "            const kg_member m = kg_members_%d[i];\n",
                    stages, id, id, id);
    /* the constants are loaded before the wait, which hides their latency */
    if (values > 0)
        base_str_printf(s,
                        "            kg_u64 v[%d];\n"
                        "#pragma unroll\n"
                        "            for (int j = 0; j < %d; j++) v[j] = kg_values_%d[i][j];\n",
                        values, values, id);
    base_str_cat(s, "            const kg_u64 kg_t0_ = kg_prof_clock(c);\n");
    /* a TMA product's tensor maps are on their way while the block waits:
     * its first copies need not fetch them */
    if (tmaps)
        base_str_cat(s, "            if (m.tmap && threadIdx.x == 0) {\n"
                        "                kg_tmap_prefetch(&kg_tmaps[m.tmap - 1u]);\n"
                        "                kg_tmap_prefetch(&kg_tmaps[m.tmap]);\n"
                        "            }\n");
    if (w && w->at[b->n] > 0 && n_wins)
        base_str_printf(s,
                        "            const unsigned mt = kg_mtiles_%d[i];\n"
                        "            if (m.n_deps && mt) {\n"
                        "                const kg_row_waits rw = {kg_tiles_%d, kg_wins_%d, kg_dwins_%d + m.deps, kg_rows_%d};\n"
                        "                kg_wait_rows(c, %du, st - 1u, kg_done_%d, kg_deps_%d + m.deps, m.n_deps, &rw,\n"
                        "                             &kg_tiles_%d[mt - 1u], t - m.first);\n"
                        "            } else if (m.n_deps) {\n"
                        "                kg_wait_deps(c, %du, st - 1u, kg_done_%d, kg_deps_%d + m.deps, m.n_deps);\n"
                        "            }\n"
                        "            const kg_u64 kg_t1_ = m.n_deps ? kg_prof_clock(c) : kg_t0_;\n",
                        id, id, id, id, id, launch, id, id, id, launch, id, id);
    else if (w && w->at[b->n] > 0)
        base_str_printf(s,
                        "            if (m.n_deps) kg_wait_deps(c, %du, st - 1u, kg_done_%d, kg_deps_%d + m.deps, m.n_deps);\n"
                        "            const kg_u64 kg_t1_ = m.n_deps ? kg_prof_clock(c) : kg_t0_;\n",
                        launch, id, id);
    else base_str_cat(s, "            const kg_u64 kg_t1_ = kg_t0_;\n");
    /* the narrow rOperators' calls stand apart, behind the early exit of
     * the block's other threads: a call in a branch on threadIdx.x passes
     * its arguments in vector registers, which the body then moves into
     * uniform ones (BERT's FFN2 body: 209 R2UR, 17.1 KB against 14.4) */
    bool narrow = false;
    for (int k = 0; k < b->n; k++) narrow |= b->m[k].op.block < b->block;
    base_str_printf(s, "            const int r = (int)(t - m.first);\n"
                       "            %s", narrow ? "if (m.threads < blockDim.x) {\n"
                                                  "                if (threadIdx.x < m.threads) ": "");
    if (narrow) {
        persistent_switch(s, b, call, differ, width, true, "                ");
        base_str_cat(s, "            } else ");
    }
    persistent_switch(s, b, call, differ, width, false, "            ");
    /* a narrow rTask's block meets after it (kg_signal does where there are waits) */
    if (!w) base_str_cat(s, "            if (m.threads < blockDim.x) __syncthreads();\n");
    base_str_printf(s, "            kg_prof_rtask(c, %du + m.counter, kg_t0_, kg_t1_);\n", pr->prof_slots);
    if (w && n_rows)
        base_str_printf(s, "            if (mt && kg_tiles_%d[mt - 1u].per_row)\n"
                           "                kg_signal_rows(kg_done_%d + m.counter, kg_rows_%d, &kg_tiles_%d[mt - 1u], t - m.first);\n"
                           "            else kg_signal(kg_done_%d + m.counter);\n",
                        id, id, id, id, id);
    else if (w) base_str_printf(s, "            kg_signal(kg_done_%d + m.counter);\n", id);
    base_str_cat(s, "        }\n");
    if (!w) base_str_printf(s, "        if (st + 1u < %du) kg_grid_sync(c, %du, st);\n", stages, launch);
    base_str_cat(s, "    }\n");
    if (w && n_rows)
        base_str_printf(s, "    kg_waits_exit_rows(kg_done_%d, %du, kg_rows_%d, %lldu);\n", id, b->n, id, (long long)n_rows);
    else if (w) base_str_printf(s, "    kg_waits_exit(kg_done_%d, %du);\n", id, b->n);
    else base_str_printf(s, "    kg_grid_exit(%du);\n", stages);
    base_str_cat(s, "}\n\n");
    base_free(order);
    base_free(differ);
    base_free(tiles);
    return KILN_OK;
}

/* The batch's kernel k_<first member>: a persistent kernel (more than one
 * stage) or a kernel of one stage. */
static kiln_status flush_batch(cg_emitter *e, program *pr, batch *b)
{
    if (b->n == 0) return KILN_OK;
    int stages = 0, launch = pr->n, widest = 0;
    cg_op all = {.block = b->block};
    for (int k = 0; k < b->n; k++) {
        stages = KILN_MAX(stages, b->m[k].stage + 1);
        if (b->m[k].op.smem_bytes > all.smem_bytes) {
            all.smem_bytes = b->m[k].op.smem_bytes;
            widest = k;
        }
        base_str_printf(&pr->sites, "#define KG_SITE_%d %du\n", b->m[k].grp->id, launch);
    }
    for (int st = 0; st < stages; st++) {
        int64_t n = 0;
        for (int k = 0; k < b->n; k++)
            if (b->m[k].stage == st) n += b->m[k].op.n_rtasks;
        if (n > INT32_MAX) return base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "a stage of more than 2^31 rTasks");
        all.n_rtasks = KILN_MAX(all.n_rtasks, n);
    }
    base_str *s = &e->code;
    if (b->n > 1) {
        base_str_printf(s, "/* %s: groups", stages > 1 ? "persistent kernel" : "wave");
        for (int k = 0; k < b->n; k++) base_str_printf(s, " %d", b->m[k].grp->id);
        if (stages > 1)
            base_str_printf(s, "; %d stages, %d barriers (%d before merging); %d bytes of shared memory (group %d) */\n",
                            stages, stages - 1, b->n - 1, all.smem_bytes, b->m[widest].grp->id);
        else
            base_str_cat(s, ", independent, as one kernel */\n");
    }
    char kname[32];
    snprintf(kname, sizeof(kname), "k_%d", b->m[0].grp->id);
    if (stages == 1) {
        emit_stage_kernel(s, b, kname, &all);
        list_batch(pr, b, NULL, &all, stages, launch);
    } else {
        waits w = {0};
        const bool use_waits = pr->waits;
        if (use_waits) KILN_TRY(plan_waits(e, b, &w));
        kiln_status st = emit_persistent(e, pr, b, use_waits ? &w : NULL, stages, launch, kname, &all);
        if (st == KILN_OK) {
            if (use_waits) pr->n_waits += w.at[b->n];
            for (int k = 0; k < b->n; k++) prof_slot_line(pr, kname, &b->m[k]);
            pr->prof_slots += b->n;
            list_batch(pr, b, use_waits ? &w : NULL, &all, stages, launch);
        }
        waits_free(&w);
        KILN_TRY(st);
    }
    pr->kernels++;
    /* the next kernel runs after this one: its split-K places start again */
    e->splitk_ws_next = e->splitk_sem_next = 0;
    if (pr->mono) {
        pr->groups += b->n;
        pr->barriers_before += b->n - 1;
        pr->barriers_after += stages - 1;
        pr->persistent += stages > 1;
    }
    base_str label;
    base_str_init(&label);
    batch_label(b, stages, &label);
    kiln_status st = label.oom ? base_diag_add(e->d, KILN_ERR_OOM, "out of memory listing launches")
                               : add_launch(e, pr, -1, &all, b->m[0].grp->id, base_str_get(&label), stages > 1);
    base_str_free(&label);
    b->n = 0;
    return st;
}

/* Cuts e->code back to `start`, the tensor maps back to the first `tmaps`
 * and the next split-K places back to ws_next and sem_next: what the
 * rOperators emitted since then held, before they are built again. */
static void rewind_code(cg_emitter *e, size_t start, int tmaps, int64_t ws_next, int sem_next)
{
    if (e->code.buf && start < e->code.len) {
        e->code.len = start;
        e->code.buf[start] = 0;
    }
    e->n_tmaps = tmaps;
    e->splitk_ws_next = ws_next;
    e->splitk_sem_next = sem_next;
}

static kiln_status emit_code(cg_emitter *e, const sched_group *grp, cg_op *op);

/* Mono: a product whose fastest rKernel (op, its code from e->code's
 * `start` on, with the tensor maps past `tmaps` and the split-K places
 * from ws_next and sem_next) would give its stage more rTasks than the
 * kernel has blocks is built again with the rKernel that ends the stage
 * soonest, as the cost model sees the stage's blocks deal out its rTasks
 * (sched_stage_time), and keeps it when that estimate is at least 3% lower
 * and the stage the same (else the fastest is built a third time, unless
 * the second build is the same rKernel). On ResNet-50 at batch 1 each of
 * the four downsampling convolutions shares a stage with its block's first
 * convolution: the last (49 x 2048 x 1024) took 128 rTasks in 2 splits
 * beside 44, which kept 40 blocks busy for two rTasks; the others 88 to 104
 * beside 98 to 104. Only stages whose members all have estimates and none
 * is priced with identical siblings (plan_gemm_share: its estimate is its
 * share of theirs). A second build that fails leaves the fastest. */
static kiln_status fit_stage(cg_emitter *e, program *pr, const batch *b, const sched_group *grp, cg_op *op,
                             size_t start, int tmaps, int64_t ws_next, int sem_next)
{
    if (!pr->mono || pr->unmerged || !pr->fit || !b->n || op->est_clk <= 0 || op->cluster > 1 ||
        kernel_block(pr, op) != b->block || b->m[0].op.cluster > 1 || (e->gemm_share && e->gemm_share[grp->id] > 1))
        return KILN_OK;
    const int blocks = (e->gpu.n_sms > 0 ? e->gpu.n_sms : 132) * KILN_MAX(1, e->mono_per_sm);
    const int stage = stage_for(e, b, grp, op);
    int64_t before = 0;
    for (int k = 0; k < b->n; k++) {
        if (b->m[k].stage != stage) continue;
        if (b->m[k].op.est_clk <= 0) return KILN_OK; /* a member the cost model cannot time */
        if (e->gemm_share && e->gemm_share[b->m[k].grp->id] > 1) return KILN_OK;
        before += b->m[k].op.n_rtasks;
    }
    if (before == 0 || before + op->n_rtasks <= blocks) return KILN_OK;
    double *load = base_calloc((size_t)blocks, sizeof(double));
    if (!load) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory fitting group '%s' to its stage", grp->name);
    int64_t at = 0;
    for (int k = 0; k < b->n; k++) {
        const cg_op *o = &b->m[k].op;
        if (b->m[k].stage != stage) continue;
        sched_stage_add(load, blocks, at, o->n_rtasks, rtask_clk(o->n_rtasks, o->est_clk, blocks));
        at += o->n_rtasks;
    }
    e->stage_load = load;
    e->stage_blocks = blocks;
    e->stage_before = before;
    const double fastest = cg_stage_time(e, op->n_rtasks, op->est_clk);
    cg_op fit;
    rewind_code(e, start, tmaps, ws_next, sem_next);
    base_diag *saved = e->d, scratch;
    base_diag_init(&scratch);
    e->d = &scratch;
    const bool built = emit_code(e, grp, &fit) == KILN_OK;
    e->d = saved;
    base_diag_free(&scratch);
    const bool same = built && fit.n_rtasks == op->n_rtasks && strcmp(fit.config, op->config) == 0;
    const bool keep = built && !same && fit.cluster < 2 &&
                      cg_stage_time(e, fit.n_rtasks, fit.est_clk) < 0.97 * fastest &&
                      stage_for(e, b, grp, &fit) == stage && kernel_block(pr, &fit) == b->block;
    e->stage_load = NULL;
    base_free(load);
    if (same) {
        *op = fit;
        return KILN_OK;
    }
    if (keep) {
        fit.fitted = true;
        *op = fit;
        pr->fitted++;
        return KILN_OK;
    }
    rewind_code(e, start, tmaps, ws_next, sem_next);
    return emit_code(e, grp, op);
}

/* proto: mono's prototype of op_<id>, its attribute (__noinline__, or
 * __forceinline__ for one inlined because of its warpgroup MMAs); NULL:
 * none (one share.c rewrote: its op_<id> calls a shared body) */
static kiln_status add_member(cg_emitter *e, program *pr, batch *b, const sched_group *grp, const cg_op *op,
                              const char *proto, const cg_share_call *call)
{
    const char *values = NULL;
    if (call && call->body >= 0 && !(values = base_arena_strdup(&pr->names, call->values)))
        return base_diag_add(e->d, KILN_ERR_OOM, "out of memory forming kernels");
    /* a clustered rOperator's rTasks group by block index (a cluster each): a kernel of its own */
    bool fits = b->n == 0 || (kernel_block(pr, op) == b->block && op->cluster < 2 && b->m[0].op.cluster < 2);
    int stage = !fits || !b->n ? 0 : pr->unmerged ? b->m[b->n - 1].stage + 1 : stage_for(e, b, grp, op);
    if (!pr->mono && (stage > 0 || b->n == (pr->waves ? WAVES_MAX : WAVE_MAX))) fits = false;
    if (!fits) {
        KILN_TRY(flush_batch(e, pr, b));
        stage = 0;
    }
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 32;
        member *m = base_realloc(b->m, (size_t)cap * sizeof(*m));
        if (!m) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory forming kernels");
        b->m = m;
        b->cap = cap;
    }
    if (b->n == 0) b->block = kernel_block(pr, op);
    b->m[b->n++] = (member){.grp = grp, .op = *op, .stage = stage, .body = values ? call->body : -1,
                            .n_values = values ? call->n_values : 0, .values = values};
    if (pr->mono && proto)
        base_str_printf(&pr->sites, "static __device__ %s void op_%d(const kiln_gctx *c, int t%s);\n", proto,
                        grp->id, op->prewait ? CG_PRE_PARAM : "");
    return KILN_OK;
}

/* Graph outputs that no group writes (a model input or a constant passed
 * through) are copied by one last rOperator, op_<n_groups>: rTask t copies
 * elements t*blockDim.x + threadIdx.x + k*n_rtasks*blockDim.x of each. */
static bool copied_output(const cg_emitter *e, int i)
{
    const sched_place *pl = &e->p->place[e->g->outputs[i]->id];
    return !(pl->loc == SCHED_LOC_OUTPUT && pl->offset == (uint64_t)i);
}

static kiln_status emit_output_copies(cg_emitter *e, program *pr, batch *b, sched_group *grp)
{
    int64_t most = 0;
    for (int i = 0; i < e->g->n_outputs; i++)
        if (copied_output(e, i) && (int64_t)e->g->outputs[i]->t.nbytes > most) most = (int64_t)e->g->outputs[i]->t.nbytes;
    if (most == 0) return KILN_OK;
    cg_op op = {.n_rtasks = (most + 4095) / 4096, .block = e->want_block ? e->want_block : 256};
    base_str_printf(&e->code, "/* graph outputs copied from inputs or constants */\n"
                              "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n",
                    grp->id);
    for (int i = 0; i < e->g->n_outputs; i++) {
        if (!copied_output(e, i)) continue;
        const ir_value *v = e->g->outputs[i];
        char src[160];
        cg_ptr(e, v, src, sizeof(src));
        /* the source may be a 16-bit weight; the output has the model's dtype */
        bool convert = cg_store(e, v) != v->t.dtype;
        int64_t n = convert ? ir_numel(&v->t) : (int64_t)v->t.nbytes;
        base_str_printf(&e->code,
                        "    /* output %d */\n"
                        "    for (kg_i64 i = (kg_i64)t * blockDim.x + threadIdx.x; i < %lldLL; i += %lldLL * blockDim.x)\n",
                        i, (long long)n, (long long)op.n_rtasks);
        if (convert)
            base_str_printf(&e->code, "        ((float *)c->io[%d])[i] = %s(%s + i);\n", e->g->n_inputs + i,
                            cg_ld_fn(cg_store(e, v)), src);
        else
            base_str_printf(&e->code, "        ((kg_u8 *)c->io[%d])[i] = ((const kg_u8 *)%s)[i];\n",
                            e->g->n_inputs + i, src);
    }
    base_str_cat(&e->code, "}\n\n");
    /* it reads inputs and constants, and writes outputs no group writes: it
     * joins whatever kernel is open */
    return add_member(e, pr, b, grp, &op, "__noinline__", NULL);
}

/* Appends op_<grp->id> to e->code and fills *op (emit_group; emit_waves
 * may emit a group twice, its code cut back in between). */
static kiln_status emit_code(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    kiln_status st;
    *op = (cg_op){.block = 256};
    e->site = grp->id;
    switch (grp->kind) {
    case SCHED_GROUP_CONV: st = cg_emit_conv(e, grp, op); break;
    case SCHED_GROUP_GEMM: st = cg_emit_gemm(e, grp, op); break;
    case SCHED_GROUP_POOL: st = cg_emit_pool(e, grp, op); break;
    case SCHED_GROUP_ROWS: st = cg_emit_rows(e, grp, op); break;
    case SCHED_GROUP_ATTENTION: st = cg_emit_attention(e, grp, op); break;
    case SCHED_GROUP_ELEMENTWISE: st = cg_emit_elementwise(e, grp, op); break;
    case SCHED_GROUP_MOVE: st = cg_emit_move(e, grp, op); break;
    default: return base_diag_add(e->d, KILN_ERR_INTERNAL, "group '%s': unknown kind %d", grp->name, grp->kind);
    }
    if (st != KILN_OK) return st;
    return check_op(e, grp, op);
}

static kiln_status emit_group(cg_emitter *e, program *pr, batch *b, target_output *out, const sched_group *grp)
{
    cg_op op;
    const size_t start = e->code.len;
    const int tmaps = e->n_tmaps;
    const int64_t ws_next = e->splitk_ws_next;
    const int sem_next = e->splitk_sem_next;
    e->site = grp->id;
    switch (grp->kind) {
    case SCHED_GROUP_ALIAS: base_str_printf(&e->code, "/* group %d (alias, no code): %s */\n\n", grp->id, grp->name); return KILN_OK;
    case SCHED_GROUP_FALLBACK: {
        /* a host segment ends the kernel before it */
        KILN_TRY(flush_batch(e, pr, b));
        int seg;
        KILN_TRY(target_add_segment(out, e->g, grp, &seg, e->d));
        base_str_printf(&e->code, "/* group %d (host segment %d, reference interpreter): %s */\n\n", grp->id, seg,
                        grp->name);
        base_str_printf(&pr->listing, "launch %d: host segment %d (reference interpreter): group %d  %s\n", pr->n, seg,
                        grp->id, grp->name);
        return add_launch(e, pr, seg, NULL, grp->id, grp->name, false);
    }
    default:
        KILN_TRY(emit_code(e, grp, &op));
        KILN_TRY(fit_stage(e, pr, b, grp, &op, start, tmaps, ws_next, sem_next));
    }
    /* warpgroup MMAs in a function the kernel calls run one after another
     * (ptxas C7510: "wgmma.mma_async instructions are serialized due to
     * wgmma pipeline crossing function boundary"), so a shared body with
     * them is __forceinline__: a persistent kernel calls each body from one
     * case of its switch, which then holds its one copy (the code the same
     * size, no C7510; a kernel of one stage inlines it for each member that
     * calls it; H200, fp16, outputs bit-identical: ResNet-50 371 ->
     * 321 us, BERT b1 532 -> 453, ViT-B/16 616 -> 536, BERT b16 1577 ->
     * 1382). KILN_MONO_INLINE_WGMMA=0 calls it as before; =1 gives each
     * such rOperator its own code, inlined (ViT-B/16's mono kernel: 1.3 MB
     * of sm_90a code instead of 0.45 MB, ptxas 36 s instead of 4.5 s) */
    const bool inlined = pr->inline_wgmma && op.wgmma;
    cg_share_call call = {.body = -1};
    if (pr->share && !inlined) KILN_TRY(cg_share_op(e, pr->share, grp->id, start, op.wgmma && pr->inline_body, &call));
    kiln_status st =
        add_member(e, pr, b, grp, &op, inlined ? "__forceinline__" : call.body >= 0 ? NULL : "__noinline__", &call);
    base_free(call.values);
    return st;
}

/* ---- --schedule=waves (Rammer 3.3, Algorithm 1) ------------------------------------------ *
 * Between host segments the groups are taken in waves: a group's wave is
 * one more than the latest wave of the groups it depends on
 * (sched_group_depends: it reads what they wrote, or writes what they read
 * or wrote), so a wave is a fringe of the breadth-first traversal of the
 * group graph and its groups are independent of each other. Each wave is a
 * kernel of its own (an rProgram: Algorithm 1 adds a wave to the current
 * rProgram only when that is faster, and on a GPU a wave boundary inside a
 * kernel, a grid barrier, costs about what the next node of a CUDA graph
 * does; the mono schedules merge waves instead). The kernel's block is its
 * widest member's: narrower narrow members run on its first threads
 * (Rammer 4.1.3), others of another size make another kernel of the wave.
 *
 * SelectRKernels: every member is built with its fastest rKernel (the
 * tuner's or the cost model's choice). When the wave's rTasks then
 * outnumber the multiprocessors and its members are products (not the
 * identical products of one A, which plan_gemm_share prices together
 * already), they are
 * built again with their most efficient rKernels (cg_emitter.wave_efficient:
 * the least estimated time x multiprocessors held), which the wave keeps
 * when its estimated time (wave_time) is lower; the cost model stands in
 * for Rammer's profiler. */

typedef struct wave_member {
    const sched_group *grp;
    cg_op op;
} wave_member;

/* The wave's estimated time: its slowest member's, or the multiprocessor
 * time of all of them spread over the GPU, whichever is longer. */
static double wave_time(const cg_emitter *e, const wave_member *m, int n)
{
    const int n_sms = e->gpu.n_sms > 0 ? e->gpu.n_sms : 132;
    double slowest = 0, sm_time = 0;
    for (int i = 0; i < n; i++) {
        slowest = fmax(slowest, m[i].op.est_clk);
        sm_time += m[i].op.est_clk * (double)KILN_MIN(m[i].op.n_rtasks, (int64_t)n_sms);
    }
    return fmax(slowest, sm_time / n_sms);
}

/* Builds the wave's members from e->code's `start` on (what is there is cut
 * away, with the tensor maps past `tmaps`), with their fastest or most
 * efficient rKernels. */
static kiln_status build_wave(cg_emitter *e, wave_member *m, int n, size_t start, int tmaps, bool efficient)
{
    rewind_code(e, start, tmaps, 0, 0); /* the previous wave's kernels are flushed: their split-K places run before */
    e->wave_efficient = efficient;
    e->wave_shared = n > 1;
    kiln_status st = KILN_OK;
    for (int i = 0; i < n && st == KILN_OK; i++) st = emit_code(e, m[i].grp, &m[i].op);
    e->wave_efficient = false;
    e->wave_shared = false;
    return st;
}

/* One wave: its rKernels chosen, then its kernel(s). */
static kiln_status emit_wave(cg_emitter *e, program *pr, batch *b, wave_member *m, int n)
{
    KILN_TRY(flush_batch(e, pr, b)); /* the previous wave's kernel code first: what follows may be cut */
    const size_t start = e->code.len;
    const int tmaps = e->n_tmaps, n_sms = e->gpu.n_sms > 0 ? e->gpu.n_sms : 132;
    KILN_TRY(build_wave(e, m, n, start, tmaps, false));
    int64_t rtasks = 0;
    bool products = n > 1;
    for (int i = 0; i < n; i++) {
        rtasks += m[i].op.n_rtasks;
        /* identical products of one A (plan_gemm_share) are priced together
         * already, by the cost model's own account of their tiles */
        bool sibling = e->gemm_share && e->gemm_share[m[i].grp->id] > 1;
        products = products && m[i].grp->kind == SCHED_GROUP_GEMM && m[i].op.est_clk > 0 && !sibling;
    }
    bool efficient = false;
    double fastest = 0, chosen = 0;
    if (products && rtasks > n_sms) {
        fastest = wave_time(e, m, n);
        KILN_TRY(build_wave(e, m, n, start, tmaps, true));
        chosen = wave_time(e, m, n);
        efficient = chosen < fastest * 0.97;
        if (!efficient) KILN_TRY(build_wave(e, m, n, start, tmaps, false));
    }
    base_str_printf(&pr->listing, "wave %d: %d group%s, %lld rTasks", pr->n_waves, n, n == 1 ? "" : "s",
                    (long long)rtasks);
    if (efficient)
        base_str_printf(&pr->listing, "; the most efficient rKernels (the cost model: %.2f of the fastest ones' time)",
                        chosen / fastest);
    base_str_cat(&pr->listing, "\n");
    pr->n_waves++;
    pr->efficient_waves += efficient;
    /* kernels of the wave: the widest block first, with every member that
     * fits it (its size, or narrow and smaller), then the rest alike */
    bool *added = base_calloc((size_t)n, sizeof(bool));
    if (!added) return base_diag_add(e->d, KILN_ERR_OOM, "out of memory forming waves");
    kiln_status st = KILN_OK;
    for (int left = n; left > 0 && st == KILN_OK;) {
        pr->wave_block = 0;
        for (int i = 0; i < n; i++)
            if (!added[i]) pr->wave_block = KILN_MAX(pr->wave_block, m[i].op.block);
        st = flush_batch(e, pr, b);
        for (int i = 0; i < n && st == KILN_OK; i++) {
            if (added[i] || kernel_block(pr, &m[i].op) != pr->wave_block) continue;
            st = add_member(e, pr, b, m[i].grp, &m[i].op, NULL, NULL);
            added[i] = true;
            left--;
        }
    }
    base_free(added);
    return st;
}

/* Every group, wave after wave between host segments (which run in place). */
static kiln_status emit_waves(cg_emitter *e, program *pr, batch *b, target_output *out)
{
    const sched_program *p = e->p;
    int *wave = base_calloc((size_t)p->n_groups + 1, sizeof(int));
    wave_member *m = base_calloc((size_t)p->n_groups + 1, sizeof(*m));
    kiln_status st = wave && m ? KILN_OK : base_diag_add(e->d, KILN_ERR_OOM, "out of memory forming waves");
    for (int s0 = 0; s0 < p->n_groups && st == KILN_OK;) {
        int s1 = s0, last = -1;
        while (s1 < p->n_groups && p->groups[s1]->kind != SCHED_GROUP_FALLBACK) s1++;
        for (int i = s0; i < s1; i++) {
            wave[i] = 0;
            for (int j = s0; j < i; j++)
                if (wave[j] + 1 > wave[i] && sched_group_depends(e->g, p, p->groups[j], p->groups[i]))
                    wave[i] = wave[j] + 1;
            last = KILN_MAX(last, wave[i]);
        }
        for (int w = 0; w <= last && st == KILN_OK; w++) {
            int n = 0;
            for (int i = s0; i < s1; i++) {
                const sched_group *grp = p->groups[i];
                if (wave[i] != w) continue;
                if (grp->kind == SCHED_GROUP_ALIAS) st = emit_group(e, pr, b, out, grp); /* a comment, no code */
                else m[n++] = (wave_member){.grp = grp};
            }
            if (n) st = emit_wave(e, pr, b, m, n);
        }
        if (s1 < p->n_groups && st == KILN_OK) st = emit_group(e, pr, b, out, p->groups[s1]);
        s0 = s1 + 1;
    }
    base_free(wave);
    base_free(m);
    return st;
}

/* out->listing: a heading, then the launches (kiln inspect --schedule). */
static kiln_status make_listing(const cg_emitter *e, const program *pr, target_output *out)
{
    base_str l;
    base_str_init(&l);
    base_str_printf(&l, "rProgram (--schedule=%s, precision %s, for %s sm_%d%d with %d multiprocessors): %d launch%s",
                    schedule_name(pr), rt_gprec_name(e->prec), e->gpu.present ? "this" : "an assumed",
                    e->gpu.sm_major, e->gpu.sm_minor, e->gpu.n_sms, pr->n, pr->n == 1 ? "" : "es");
    if (pr->mono) {
        base_str_cat(&l, "; ");
        mono_counts(pr, &l);
    }
    if (pr->waves)
        base_str_printf(&l, "; %d waves, %d of them with the most efficient rKernels", pr->n_waves,
                        pr->efficient_waves);
    base_str_printf(&l, "\n%s", base_str_get(&pr->listing));
    size_t n = l.len + 1;
    out->listing = l.oom ? NULL : base_malloc(n);
    if (out->listing) memcpy(out->listing, base_str_get(&l), n);
    base_str_free(&l);
    return out->listing ? KILN_OK : base_diag_add(e->d, KILN_ERR_OOM, "out of memory listing the rProgram");
}

/* ---- the target --------------------------------------------------------------------------- */

/* The GPU to tune for: device 0 when there is one, else an H100-like default. */
static void find_gpu(cg_gpu *gpu)
{
    *gpu = (cg_gpu){.sm_major = 9, .sm_minor = 0, .n_sms = 132, .smem_per_block_optin = 227 * 1024,
                    .l2_bytes = 50 * 1024 * 1024};
    rt_cuda_device dev;
    if (rt_cuda_device_count() < 1 || rt_cuda_device_info(0, &dev, NULL) != KILN_OK) return;
    gpu->sm_major = dev.sm_major;
    gpu->sm_minor = dev.sm_minor;
    gpu->n_sms = dev.n_sms;
    gpu->smem_per_block_optin = dev.smem_per_block_optin_bytes;
    gpu->l2_bytes = dev.l2_bytes;
    gpu->present = true;
}

static kiln_status write_source(const char *dir, const char *src, base_diag *d)
{
    char path[4096];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return base_diag_add(d, KILN_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/model.cu", dir);
    FILE *f = fopen(path, "w");
    if (!f) return base_diag_add(d, KILN_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fputs(src, f);
    return fclose(f) == 0 ? KILN_OK : base_diag_add(d, KILN_ERR_IO, "cannot write '%s'", path);
}

static void progress(const target_options *o, const char *line)
{
    if (o->progress) o->progress(o->progress_user, line);
}

/* The configuration `kiln tune` chose for this model on this GPU, if it
 * did: in the database the tuner has open (none: no GPU, or no database
 * file). OUT: *block, *per_sm (unchanged if none). */
static void tuned_config(const cg_emitter *e, int *block, int *per_sm)
{
    const target_options *o = e->o;
    char key[128], line[256];
    target_cuda_mono_key(e->p, o->schedule, o->precision, key, sizeof(key));
    target_mono_config c;
    if (!cg_tuner_mono_config(e->tuner, key, &c)) return;
    *block = c.block;
    *per_sm = c.per_sm;
    snprintf(line, sizeof(line), "mono: blocks of %d threads, %d a multiprocessor, as kiln tune chose (%.1f us, %s)",
             c.block, c.per_sm, c.us, c.date);
    progress(o, line);
}

/* The two images every artifact carries: sm_80 (Ampere and later, generic)
 * and sm_90a (Hopper's own). */
static const struct {
    int major, minor;
    bool arch_specific;
} images[] = {{8, 0, false}, {9, 0, true}};

/* One image's NVRTC build, on its own thread (NVRTC is thread-safe). */
typedef struct image_job {
    const char *src;
    int i;
    rt_gimage *img;
    base_str spills; /* ptxas's spill report (cg_nvrtc_spills) */
    base_diag d;
    kiln_status st;
} image_job;

static void *build_image(void *arg)
{
    image_job *j = arg;
    void *cubin;
    size_t n;
    j->st = cg_nvrtc_compile_spills(j->src, "model.cu", images[j->i].major, images[j->i].minor,
                                    images[j->i].arch_specific, &cubin, &n, &j->spills, &j->d);
    if (j->st == KILN_OK)
        *j->img = (rt_gimage){.sm = images[j->i].major * 10 + images[j->i].minor,
                              .arch_specific = images[j->i].arch_specific, .cubin = cubin, .bytes = n};
    return NULL;
}

/* Builds every image of src at once, a thread each (this one the last):
 * the build time is the slowest image's, not the sum. A function of the
 * generated code that spills registers to local memory is named in a
 * progress line: its loads of them wait on memory (BERT b16's layer norm
 * body, 44 bytes, ran its rTasks 1.8 times as long). */
static kiln_status build_images(const target_options *o, const char *src, size_t len, rt_gimage *img, base_diag *d)
{
    image_job jobs[KILN_COUNT(images)];
    pthread_t th[KILN_COUNT(images)];
    bool started[KILN_COUNT(images)] = {false};
    size_t n = KILN_COUNT(images);
    for (size_t i = 0; i < n; i++) {
        char line[128];
        snprintf(line, sizeof(line), "NVRTC: building sm_%d%d%s (%zu KB of CUDA C)", images[i].major,
                 images[i].minor, images[i].arch_specific ? "a" : "", len / 1024);
        progress(o, line);
        jobs[i] = (image_job){.src = src, .i = (int)i, .img = &img[i]};
        base_str_init(&jobs[i].spills);
        base_diag_init(&jobs[i].d);
        /* a refused thread only costs time: the image is built on this one after */
        if (i + 1 < n) started[i] = pthread_create(&th[i], NULL, build_image, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!started[i]) build_image(&jobs[i]);
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        if (jobs[i].st == KILN_OK && jobs[i].spills.len) {
            base_str line;
            base_str_init(&line);
            base_str_printf(&line, "ptxas: sm_%d%d%s code spills registers to local memory, slower: %s",
                            images[i].major, images[i].minor, images[i].arch_specific ? "a" : "",
                            base_str_get(&jobs[i].spills));
            if (!line.oom) progress(o, base_str_get(&line));
            base_str_free(&line);
        }
        base_str_free(&jobs[i].spills);
        if (jobs[i].st != KILN_OK && st == KILN_OK) { /* the first failure's messages, one by one */
            st = jobs[i].st;
            for (int k = 0; k < jobs[i].d.n_msgs; k++) base_diag_add(d, st, "%s", jobs[i].d.msgs[k]);
        }
        base_diag_free(&jobs[i].d);
    }
    return st;
}

static kiln_status cuda_build(const ir_graph *g, const sched_program *p, const target_options *o, target_output *out,
                              base_diag *d)
{
    memset(out, 0, sizeof(*out));
    cg_emitter e = {.g = g, .p = p, .o = o, .d = d};
    program pr = {0};
    base_arena_init(&pr.names);
    base_str_init(&pr.sites);
    base_str_init(&pr.listing);
    base_str_init(&pr.prof);
    base_str_init(&e.code);
    base_str src;
    base_str_init(&src);
    rt_gprog gp = {0};
    rt_gimage img[KILN_COUNT(images)];
    memset(img, 0, sizeof(img));
    kiln_status st = parse_precision(o->precision, &e.prec, d);
    find_gpu(&e.gpu);
    if (st == KILN_OK) st = plan_storage(&e);
    if (st == KILN_OK) st = plan_kmajor_weights(&e);
    if (st == KILN_OK) st = cg_plan_conv_layouts(&e);
    if (st == KILN_OK) st = convert_weights(&e, out);
    if (st == KILN_OK) st = plan_gemm_share(&e);
    /* with --tune, what the database lacks is measured; without, a GPU's
     * database still answers what kiln tune measured */
    if (st == KILN_OK && (o->tune || e.gpu.present))
        st = cg_tuner_open(&e, out->weights ? out->weights : o->weights, &e.tuner, d);
    int want_block = 0, per_sm = 0;
    if (st == KILN_OK)
        st = parse_schedule(o->schedule, &pr.mono, &pr.waits, &pr.unmerged, &pr.waves, &want_block, &per_sm, d);
    if (pr.mono) {
        /* identical rOperators share their code (share.c); not in the
         * kernels schedule, where the call into a shared body cost BERT b1
         * 576 us against 484 on an H100. KILN_SHARE_CODE=0: every
         * rOperator its own code (for comparison) */
        if (st == KILN_OK && !cg_env_is("KILN_SHARE_CODE", "0") && !(pr.share = cg_share_new()))
            st = base_diag_add(d, KILN_ERR_OOM, "out of memory generating CUDA code");
        if (st == KILN_OK && !want_block) tuned_config(&e, &want_block, &per_sm);
        e.want_block = want_block ? want_block : mono_block(p, o->precision);
        /* the three-warpgroup tiles that 384 is for are sm_90's (kg_gemm_wgt) */
        if (!want_block && e.want_block == 384 && e.gpu.sm_major != 9) e.want_block = 256;
        pr.blocks_per_sm = per_sm ? per_sm : mono_blocks_per_sm(p, e.want_block, o->precision);
        pr.block = e.want_block;
        e.mono_per_sm = pr.blocks_per_sm;
        pr.inline_wgmma = cg_env_is("KILN_MONO_INLINE_WGMMA", "1");
        pr.inline_body = !cg_env_is("KILN_MONO_INLINE_WGMMA", "0");
        pr.fit = !cg_env_is("KILN_MONO_FIT", "0");
        e.narrow_ok = !cg_env_is("KILN_MONO_NARROW", "0");
        /* every rOperator within its share of a multiprocessor's shared memory
         * (of which each resident block also costs 1 KB the system keeps) */
        int share = (e.gpu.smem_per_block_optin + 1024) / pr.blocks_per_sm - 1024;
        e.gpu.smem_per_block_optin = KILN_MIN(e.gpu.smem_per_block_optin, share);
    }
    batch b = {0};
    /* the copies of graph outputs no group writes: they read those outputs' sources */
    sched_group copies = {.kind = SCHED_GROUP_MOVE, .id = p->n_groups, .in = g->outputs, .n_in = g->n_outputs,
                          .name = "graph outputs copied from inputs or constants"};
    if (pr.waves && st == KILN_OK) st = emit_waves(&e, &pr, &b, out);
    else
        for (int s = 0; s < p->n_groups && st == KILN_OK; s++) st = emit_group(&e, &pr, &b, out, p->groups[s]);
    if (st == KILN_OK) st = emit_output_copies(&e, &pr, &b, &copies);
    if (st == KILN_OK) st = flush_batch(&e, &pr, &b);
    if (st == KILN_OK && (e.code.oom || pr.sites.oom || pr.listing.oom || pr.prof.oom))
        st = base_diag_add(d, KILN_ERR_OOM, "out of memory generating CUDA code");
    if (st == KILN_OK && pr.waves) {
        char line[160];
        snprintf(line, sizeof(line), "waves: %d waves in %d kernels, %d of them with the most efficient rKernels",
                 pr.n_waves, pr.kernels, pr.efficient_waves);
        progress(o, line);
    }
    if (st == KILN_OK && pr.mono) {
        base_str line;
        base_str_init(&line);
        base_str_cat(&line, "mono: ");
        mono_counts(&pr, &line);
        if (!line.oom) progress(o, base_str_get(&line));
        base_str_free(&line);
    }
    if (st == KILN_OK) {
        base_str_printf(&src,
                        "/*\n * Generated by kiln %s (target cuda, --schedule=%s, precision %s): do not edit.\n"
                        " * %d launches; arena %llu bytes; weights %llu bytes.\n",
                        KILN_VERSION, schedule_name(&pr), rt_gprec_name(e.prec), pr.n,
                        (unsigned long long)p->arena_bytes, (unsigned long long)p->weight_bytes);
        if (pr.mono) {
            base_str_cat(&src, " * ");
            mono_counts(&pr, &src);
            base_str_cat(&src, ".\n");
        }
        base_str_cat(&src, " */\n");
        /* for experiments: how many k-tiles of B a TMA GEMM copies before griddepcontrol.wait (kg_gemm.cuh) */
        const char *pre_env = getenv("KILN_GEMM_PRE_STAGES");
        if (pre_env && *pre_env && strspn(pre_env, "0123456789") == strlen(pre_env) && strlen(pre_env) < 4)
            base_str_printf(&src, "#define KG_GEMM_PRE_STAGES %s\n", pre_env);
        /* a diagnostic: kg_gemm_wgt prints its phases' times (kg_gemm.cuh) */
        if (getenv("KILN_TRACE_GEMM")) base_str_cat(&src, "#define KG_TRACE_GEMM 1\n");
        /* for experiments: no prefetch of the tensor maps (kg_tmap_prefetch) */
        if (cg_env_is("KILN_TMAP_PREFETCH", "0")) base_str_cat(&src, "#define KG_NO_TMAP_PREFETCH 1\n");
        /* for experiments: the epilogue's operands not asked into L1 early (kg_gemm_epi_touch) */
        if (cg_env_is("KILN_EPI_TOUCH", "0")) base_str_cat(&src, "#define KG_NO_EPI_TOUCH 1\n");
        st = cg_prelude(&e, &src);
        base_str_printf(&src, "/* ---- where each group runs (launch indices for faults) ---- */\n%s\n",
                        base_str_get(&pr.sites));
        base_str_cat(&src, base_str_get(&e.code));
        if (pr.prof_slots)
            base_str_printf(&src,
                            "/* ---- profile slots (kg_prof_rtask): kernel, rTasks, group per line ---- */\n"
                            "extern \"C\" __device__ const char kg_prof_slots[] =\n%s;\n\n",
                            base_str_get(&pr.prof));
        cg_tmaps_define(&e, &src);
        if (st == KILN_OK && src.oom) st = base_diag_add(d, KILN_ERR_OOM, "out of memory generating CUDA code");
    }
    if (st == KILN_OK && o->emit_dir) st = write_source(o->emit_dir, base_str_get(&src), d);
    if (st == KILN_OK && o->listing_only) st = make_listing(&e, &pr, out);
    if (st == KILN_OK && !o->listing_only) st = build_images(o, base_str_get(&src), src.len, img, d);
    if (st == KILN_OK && !o->listing_only) {
        unsigned max_smem = 0;
        for (int i = 0; i < pr.n; i++)
            if (pr.launches[i].smem > max_smem) max_smem = pr.launches[i].smem;
        gp = (rt_gprog){.precision = e.prec, .n_images = (int)KILN_COUNT(images), .images = img,
                        .n_launches = pr.n, .launches = pr.launches, .max_smem = max_smem,
                        .arena_bytes = p->arena_bytes, .weight_bytes = p->weight_bytes,
                        .n_tmaps = e.n_tmaps, .tmaps = e.tmaps};
        st = rt_gprog_encode(&gp, &out->code, &out->code_bytes, d);
        out->isa = "sm_80+sm_90a";
    }
    for (size_t i = 0; i < KILN_COUNT(images); i++) base_free((void *)img[i].cubin);
    if (e.tuner) cg_tuner_close(e.tuner);
    base_free(e.store);
    base_free(e.kmajor);
    base_free(e.nhwc);
    base_free(e.ohwi);
    base_free(e.kpad);
    base_free(e.gemm_share);
    base_free(e.tmaps);
    base_free(pr.launches);
    base_free(b.m);
    base_str_free(&pr.sites);
    base_str_free(&pr.listing);
    base_str_free(&pr.prof);
    cg_share_free(pr.share);
    base_arena_free(&pr.names);
    base_str_free(&e.code);
    base_str_free(&src);
    if (st != KILN_OK) target_output_free(out);
    return st;
}

/* The mono schedules run a stage's groups at once, waves a wave's: arena
 * bytes that one group of them frees and another takes would make the
 * second wait for the first. */
/* What a target hook needs of `schedule`: whether it is a mono one (and
 * with counter waits) or waves; all false where it does not parse. */
static void schedule_kind(const char *schedule, bool *mono, bool *counters, bool *waves)
{
    bool unmerged;
    int block, per_sm;
    base_diag d;
    base_diag_init(&d);
    if (parse_schedule(schedule, mono, counters, &unmerged, waves, &block, &per_sm, &d) != KILN_OK)
        *mono = *counters = *waves = false;
    base_diag_free(&d);
}

static bool cuda_plan_by_wave(const char *schedule)
{
    bool mono, counters, waves;
    schedule_kind(schedule, &mono, &counters, &waves);
    return mono || waves;
}

/* --schedule=mono: a tile-row wait (plan_waits) lets a group's rTasks
 * start while the groups before it still run, and a group that writes
 * arena bytes an unfinished group still reads must wait for all of it
 * instead; bytes held MONO_HOLD waves past their last reader leave those
 * waits to groups far enough back to have finished. (ResNet-50: without,
 * most convolutions wrote bytes their producer's producer had read.) */
#define MONO_HOLD 3

static int cuda_plan_hold(const char *schedule)
{
    bool mono, counters, waves;
    schedule_kind(schedule, &mono, &counters, &waves);
    if (!mono || !counters || !cg_env_is("KILN_MONO_ROWS", "1")) return 0;
    const char *env = getenv("KILN_MONO_HOLD"); /* for experiments: another hold, 0 .. 64 */
    char *end;
    long hold = env ? strtol(env, &end, 10) : MONO_HOLD;
    return env && (!*env || *end || hold < 0 || hold > 64) ? MONO_HOLD : (int)hold;
}

const target target_cuda = {
    .name = "cuda",
    .can_compile = cuda_can_compile,
    .patterns = PASS_PATTERN_ATTENTION | PASS_PATTERN_RMS_NORM,
    .build = cuda_build,
    .plan_by_wave = cuda_plan_by_wave,
    .plan_hold = cuda_plan_hold,
};
