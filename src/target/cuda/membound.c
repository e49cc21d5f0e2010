/*
 * membound.c: what a memory-bound rOperator (emit_ews.c's elementwise
 * groups, emit_rows.c's rows) makes of the persistent kernel it runs in
 * under the mono schedules (MonoNN 4.2.2 and 4.3).
 *
 * Context-aware ILP (4.2.2). In a persistent kernel every stage runs on
 * exactly n_sms x mono_per_sm resident blocks, however many rTasks a group
 * has: once its rTasks are a wave of those blocks, more parallelism can
 * come only from within a thread. So a thread takes several independent
 * steps (elements, rows) and issues all their loads before their math,
 * that many loads in flight at once. cg_mono_factor picks the steps that
 * make the rTasks about one wave, within the registers the steps' values
 * need (MonoNN Fig. 14: too few steps leave warps stalled on memory, too
 * many spill). On an H100, fp16, 128 x 1 (medians, us, one step against
 * these): residual add, layer norm, softmax and a product over 4096 x 768,
 * 61 -> 47; scale and softmax of 16 x 12 x 128 x 128, 36 -> 22; ReLU and
 * GlobalAveragePool of 32 x 2048 x 7 x 7, 59 -> 36. Only the steps of a
 * persistent kernel are fixed: a group alone in its kernel (grid = its
 * rTasks) loses blocks instead (RMSNorm of 2048 x 1024, 11.7 -> 13.4).
 *
 * Cache hints (4.3): the emitters load temporal data (read by many output
 * elements) with kg.h's keep loads and streaming data (each element read
 * once, by this rOperator alone: cg_mono_read_here_only) with its stream
 * loads. Same H100: the layer-norm network above (55 MB, more than L2)
 * 47 -> 43, the softmax one (31 MB) 23.5 -> 25.5, others within noise.
 *
 * KILN_MONO_ILP=0 (one step) gives the ablation's base. The hints are off
 * unless KILN_MONO_CACHE=1: in whole networks (mono, one H100, three
 * alternating runs each, median of 100) they made ViT-B/16 b1 1.5% slower
 * (920, 916, 923 us against 931, 936, 935) and BERT-base b16 0.7% slower,
 * ResNet-50 b1 3% faster (753, 779, 778 against 754, 743, 734). ILP was
 * within 1% on those three either way. The kernels schedule uses none of
 * this.
 */
#include "target/cuda/cuda-impl.h"

#include <stdlib.h>
#include <string.h>

#define REGS_PER_SM 65536 /* sm_80 and sm_90 */
#define REGS_PER_THREAD_MAX 255
#define MAX_FACTOR 32

/* Whether environment variable `name` is set to `value`. */
static bool env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

int cg_regs_per_thread(int block, int per_sm)
{
    if (block <= 0) return REGS_PER_THREAD_MAX;
    /* each of the four schedulers holds a quarter of the registers for its
     * share of the warps, and registers are given out 8 a thread at a time:
     * 13 warps (three warpgroups and a producer warp) leave 128 a thread,
     * not 65536 / 416 (ptxas C7602 "Insufficient registers (128)" for a
     * 192 x 256 tile's 128 accumulators a thread); the same as 65536 /
     * threads where the warps are a multiple of four */
    const int warps = (block + 31) / 32 * KILN_MAX(per_sm, 1), per_scheduler = (warps + 3) / 4;
    return KILN_MIN(REGS_PER_THREAD_MAX, REGS_PER_SM / 4 / (per_scheduler * 32)) & ~7;
}

int cg_mono_regs(const cg_emitter *e)
{
    if (e->mono_per_sm <= 0 || e->want_block <= 0) return REGS_PER_THREAD_MAX;
    return cg_regs_per_thread(e->want_block, e->mono_per_sm);
}

void cg_mono_ctx_init(const cg_emitter *e, cg_mono_ctx *m)
{
    *m = (cg_mono_ctx){0};
    if (e->mono_per_sm <= 0 || e->want_block <= 0) return;
    m->resident = (e->gpu.n_sms > 0 ? e->gpu.n_sms : 132) * e->mono_per_sm;
    m->regs = cg_mono_regs(e);
    m->ilp = !env_is("KILN_MONO_ILP", "0");
    m->hints = env_is("KILN_MONO_CACHE", "1");
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int cg_mono_factor(const cg_mono_ctx *m, int64_t units, int cap)
{
    if (!m->ilp || m->resident <= 0 || units <= 0) return 1;
    int64_t f = KILN_MIN(cdiv(units, m->resident), (int64_t)KILN_MIN(cap, MAX_FACTOR));
    if (f <= 1) return 1;
    /* where the registers cap the steps, as many waves with fewer steps:
     * 1536 units on 132 blocks at most 5 steps is 308 rTasks, 3 waves,
     * which 4 steps (384 rTasks) also make */
    int64_t waves = cdiv(cdiv(units, f), m->resident);
    return (int)cdiv(units, waves * m->resident);
}

bool cg_mono_read_here_only(const sched_group *grp, const ir_value *v)
{
    int here = 0;
    for (int i = 0; i < grp->n_nodes; i++)
        for (int j = 0; j < grp->nodes[i]->n_in; j++) here += grp->nodes[i]->in[j] == v;
    return here == v->n_uses;
}
