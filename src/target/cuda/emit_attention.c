/*
 * emit_attention.c: the cuda target's attention groups (the partition's
 * SCHED_GROUP_ATTENTION, pass.h PASS_PATTERN_ATTENTION) as calls to the
 * fused kernels of kernels/kg_attention.cuh (FlashAttention-2's forward
 * pass).
 *
 * pass_group_attention describes the group: the values q, k^T and v are
 * read from, each with the dims, strides and offset of the views the group
 * absorbed, the scale, the mask. Here they become element strides over a
 * canonical [batch, head, rows, cols] view: the scores' batch dims are
 * (batch, head) aligned right, a dim an operand broadcasts gets stride 0.
 * The output is the second MatMul's [.., Sq, Dv], contiguous, or seen
 * through the Transpose the group absorbed after it (pass_attention's
 * out_perm): its rows keep a contiguous head dim but lie apart, e.g. the
 * heads of BERT's [b, s, h, d] interleaved.
 *
 * Kernel choice: the tensor-core kernel when q, k and v are stored in the
 * same 16-bit type, their head dims are multiples of 16 up to 128, their
 * rows are 16-byte aligned with contiguous head dims (k either way round)
 * and the output's strides are even; the fp32 SIMT kernel otherwise. The
 * mma kernel's rTasks split the keys into key groups (key_split: BERT's
 * 128 keys in 2, ViT's 197 in 4) of the same query warps, and copy a
 * mask's key tiles with k's where its rows are 16-byte aligned (m_smem). The query warps
 * per block (query rows per rTask) are offered to the tuner; without
 * a tuning result, the most warps (up to 4) that still give every fourth
 * multiprocessor an rTask (heuristic_warps). In a persistent kernel
 * (cg_emitter.want_block) the warps are at most the block's; fewer make a
 * narrow rOperator whose rTasks the block's other warps skip (Rammer's
 * early exit, cg_op.narrow), so short sequences keep their rTasks: BERT-base
 * at batch 1 in 48 rTasks of 2 warps instead of 24 of 4 in blocks of 128
 * threads. Without narrow rOperators (KILN_MONO_NARROW=0) the block's
 * warps, when its shared memory fits.
 */
#include "target/cuda/cuda-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kg_attention.cuh's constants. */
#define MMA_ROWS_PER_WARP 16
#define MMA_MAX_HEAD 128
#define MMA_KEYS 64
#define MMA_PAD 8
#define SIMT_ROWS_PER_WARP 4
#define SIMT_KEYS 32

/* Warps per block the tuner chooses from. */
static const int warp_cands[] = {1, 2, 4, 8};

/* Strides in elements of a [batch, head, rows, cols] view. */
typedef struct att_view {
    int64_t b, h, r, c;
} att_view;

/* The canonical problem and its kernel. */
typedef struct att_problem {
    pass_attention at;
    int64_t batch, heads, sq, sk, d, dv;
    att_view q, k, v, m, o; /* k as [.., key, d] */
    bool mma, k_rows;
    int split; /* mma: key groups (kg_att.kv_split, key_split); simt: 1 */
    int bufs;  /* mma: key tiles a group keeps in shared memory when it takes several (kg_att.kv_bufs) */
    int m_size;  /* the mask's element size in bytes (0: no mask) */
    bool m_smem; /* mma: the mask's key tiles copied with k's (kg_att.m_smem) */
    int units;   /* mma: query tiles an rTask takes side by side (kg_att_mma_rtask's units); simt: 1 */
} att_problem;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void contiguous_strides(const ir_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->dims[i];
    }
}

/* Batch and head strides of a rank-`rank` tensor's leading dims (those
 * before its last two), aligned right with the scores' batch dims; 0 where
 * the tensor has no such dim or broadcasts it. */
static void batch_strides(int rank, const int64_t *dims, const int64_t *st, att_view *v)
{
    int nb = rank - 2;
    v->h = nb >= 1 && dims[nb - 1] != 1 ? st[nb - 1] : 0;
    v->b = nb >= 2 && dims[nb - 2] != 1 ? st[nb - 2] : 0;
}

static bool mult8(int64_t x) { return x % 8 == 0; }

/* The problem of an attention group: shapes, strides, and which kernel. */
static kiln_status att_problem_of(const cg_emitter *e, const sched_group *grp, att_problem *pb)
{
    memset(pb, 0, sizeof(*pb));
    KILN_TRY(pass_group_attention(grp, &pb->at, e->d));
    const pass_attention *at = &pb->at;
    const ir_tensor *sc = &at->scores->t;
    int r = sc->rank;
    pb->batch = r == 4 ? sc->dims[0] : 1;
    pb->heads = r >= 3 ? sc->dims[r - 3] : 1;
    pb->sq = sc->dims[r - 2];
    pb->sk = sc->dims[r - 1];

    int64_t st[IR_MAX_RANK];
    batch_strides(at->q.rank, at->q.dims, at->q.st, &pb->q);
    pb->d = at->q.dims[at->q.rank - 1];
    pb->q.r = at->q.st[at->q.rank - 2];
    pb->q.c = at->q.st[at->q.rank - 1];
    batch_strides(at->kt.rank, at->kt.dims, at->kt.st, &pb->k); /* [.., d, key] */
    pb->k.c = at->kt.st[at->kt.rank - 2];
    pb->k.r = at->kt.st[at->kt.rank - 1];
    batch_strides(at->v.rank, at->v.dims, at->v.st, &pb->v);
    pb->dv = at->v.dims[at->v.rank - 1];
    pb->v.r = at->v.st[at->v.rank - 2];
    pb->v.c = at->v.st[at->v.rank - 1];
    if (at->mask) {
        const ir_tensor *m = &at->mask->t;
        contiguous_strides(m, st);
        int rm = m->rank;
        /* a mask of rank < 2 has no query dim (or no dims at all) */
        pb->m.c = rm >= 1 && m->dims[rm - 1] != 1 ? st[rm - 1] : 0;
        pb->m.r = rm >= 2 && m->dims[rm - 2] != 1 ? st[rm - 2] : 0;
        if (rm >= 2) batch_strides(rm, m->dims, st, &pb->m);
    }
    /* out = transpose(o): out's dim i is o's dim perm[i], so o's dim perm[i]
     * steps by out's contiguous stride i */
    int64_t ost[IR_MAX_RANK], odims[IR_MAX_RANK];
    contiguous_strides(&at->out->t, st);
    for (int i = 0; i < r; i++) {
        ost[at->out_perm[i]] = st[i];
        odims[at->out_perm[i]] = at->out->t.dims[i];
    }
    batch_strides(r, odims, ost, &pb->o);
    pb->o.r = ost[r - 2];
    pb->o.c = ost[r - 1];

    kiln_dtype tq = cg_store(e, at->q.v), tk = cg_store(e, at->kt.v), tv = cg_store(e, at->v.v);
    pb->k_rows = pb->k.c == 1;
    bool k_ok = pb->k_rows ? mult8(pb->k.r) : pb->k.r == 1 && mult8(pb->k.c);
    /* the mma kernel stores pairs of columns as one 4- or 8-byte word where
     * the head dim is contiguous: even strides keep them aligned */
    bool o_ok = pb->o.c != 1 || (pb->o.r % 2 == 0 && pb->o.h % 2 == 0 && pb->o.b % 2 == 0);
    pb->mma = (tq == KILN_F16 || tq == KILN_BF16) && tk == tq && tv == tq && pb->d % 16 == 0 &&
              pb->d <= MMA_MAX_HEAD && pb->dv % 16 == 0 && pb->dv <= MMA_MAX_HEAD && pb->q.c == 1 && pb->v.c == 1 &&
              k_ok && mult8(pb->q.r) && mult8(pb->v.r) && mult8(pb->q.b) && mult8(pb->q.h) && mult8(pb->k.b) &&
              mult8(pb->k.h) && mult8(pb->v.b) && mult8(pb->v.h) && o_ok && mult8(at->q.offset) &&
              mult8(at->kt.offset) && mult8(at->v.offset);
    pb->split = 1;
    pb->bufs = 2;
    pb->units = 1;
    if (at->mask) {
        pb->m_size = cg_store(e, at->mask) == KILN_F32 ? 4 : 2;
        /* 16-byte copies of 64 keys: contiguous keys, rows and the
         * batch's and head's starts 16-byte aligned (the value itself is) */
        pb->m_smem = pb->mma && pb->m.c == 1 && (pb->m.r * pb->m_size) % 16 == 0 &&
                     (pb->m.h * pb->m_size) % 16 == 0 && (pb->m.b * pb->m_size) % 16 == 0;
    }
    return KILN_OK;
}

/* The warps an rTask may have: in a persistent kernel the block's, else 8. */
static int most_warps(const cg_emitter *e) { return e->want_block ? e->want_block / 32 : 8; }

static int rows_per_warp(const att_problem *pb) { return pb->mma ? MMA_ROWS_PER_WARP : SIMT_ROWS_PER_WARP; }

/* The rTasks of `warps` query warps each. */
static int64_t rtasks(const att_problem *pb, int warps)
{
    return pb->batch * pb->heads * cdiv(pb->sq, (int64_t)rows_per_warp(pb) * warps);
}

/* kg_att_mma_rtask's shared memory: the q tile, then each key group's
 * key tiles (two when it takes more than one, one otherwise), which the
 * groups' partial rows reuse at the end. */
static int64_t smem_bytes(const att_problem *pb, int warps)
{
    if (pb->mma) {
        int64_t tiles = cdiv(pb->sk, MMA_KEYS), iters = cdiv(tiles, pb->split);
        int64_t kv = (pb->k_rows ? MMA_KEYS * (pb->d + MMA_PAD) : pb->d * (MMA_KEYS + MMA_PAD)) +
                     MMA_KEYS * (pb->dv + MMA_PAD);
        /* the mask's tile: one row if it broadcasts over the queries */
        int64_t m_elems = pb->m_smem ? (pb->m.r ? MMA_ROWS_PER_WARP * warps : 1) *
                                           (MMA_KEYS * pb->m_size / 2 + MMA_PAD) : 0;
        int64_t keys = 2 * pb->split * (iters > 1 ? pb->bufs : 1) * (kv + m_elems);
        int64_t parts = 4 * (int64_t)(pb->split - 1) * warps * (4 * (pb->dv / 8) + 4) * 32;
        return 2 * MMA_ROWS_PER_WARP * warps * (pb->d + MMA_PAD) + KILN_MAX(keys, parts);
    }
    return 4 * (SIMT_ROWS_PER_WARP * warps * pb->d + SIMT_KEYS * (pb->d + 1) + SIMT_KEYS * pb->dv);
}

/* The mma kernel's key groups (kg_att.kv_split) for rTasks of at most
 * `most` warps: the sequence's key tiles up to 4, a power of two, so that
 * a short sequence's tiles (BERT's 128 keys: 2; ViT's 197: 4) are walked
 * side by side instead of one after another by the same warps, which on a
 * multiprocessor of few warps wait out every latency (a BERT b1 rTask of 2
 * warps: 1.8 us to have q, then about 1.4 us a key tile, on an H100).
 * In a kernel of its own, none where rTasks of 4 query warps already
 * cover the multiprocessors: there other blocks hide those latencies, and
 * the groups' merge only costs (BERT b16, 384 rTasks, waves on an H100:
 * 1126 / 1133 us in two groups against 1129 / 1122 before them in one
 * call; in one group 1098 / 1102 against 1124 / 1129 in another). A
 * persistent kernel keeps them (mono b16 1659 / 1660 in two groups, 1672 /
 * 1666 in one; there one group would leave half of a 256-thread block to
 * a narrow rTask). KILN_ATT_SPLIT=N caps the groups (1: each rTask's warps
 * walk every tile) and, set, lifts the rule on the multiprocessors. */
static int key_split(const cg_emitter *e, const att_problem *pb, int most)
{
    if (!pb->mma) return 1;
    const char *v = getenv("KILN_ATT_SPLIT");
    int cap = v ? atoi(v) : 0, split = 1;
    const bool capped = cap > 0;
    if (!capped) cap = 4;
    if (!capped && !e->want_block && rtasks(pb, 4) >= (e->gpu.n_sms > 0 ? e->gpu.n_sms : 132)) return 1;
    while (2 * split <= KILN_MIN(cap, 4) && 2 * split <= most && cdiv(pb->sk, MMA_KEYS) >= 2 * split) split *= 2;
    return split;
}

/* A unit's shared memory (smem_bytes), rounded to 128 bytes where an
 * rTask takes several units side by side (kg_att.unit_smem). */
static int64_t unit_bytes(const att_problem *pb, int warps)
{
    int64_t n = smem_bytes(pb, warps);
    return pb->units > 1 ? (n + 127) / 128 * 128 : n;
}

static bool fits(const cg_emitter *e, const att_problem *pb, int warps)
{
    int64_t n = pb->units * unit_bytes(pb, warps);
    return rtasks(pb, warps) <= INT32_MAX && n <= e->gpu.smem_per_block_optin && n <= KILN_GPROG_MAX_SMEM;
}

/* A persistent kernel's query tiles side by side (kg_att_mma_rtask's
 * units, plan_keys): where an rTask of as many tiles of 4 query warps (64
 * rows) as its block has warps for (at most 4) makes the stage take fewer
 * rounds of rTasks over the kernel's blocks than one tile an rTask would
 * (which holds, for any count of 2 or more, exactly where there are more
 * tiles than blocks), each tile on its own 4 warps, shared memory and
 * named barrier, in one key group (every warp walks each key tile). The block's warps then work
 * on different tiles instead of splitting one tile's keys. BERT-base b16
 * (384 tiles; H200, one call, three rounds, outputs bit-identical to the
 * same tiles one an rTask): 192 rTasks of 2 x 4 warps against 384 of 4
 * query warps x 2 key groups in 256-thread blocks, the attention stages
 * 19.7 -> 15.4 us, the whole network 1397 / 1387 / 1405 -> 1354 / 1354 /
 * 1361 us (device); in 384-thread blocks 128 rTasks of 3 tiles, one round
 * (emit.c mono_block). Two tiles of 2 warps an rTask, or four, were no
 * faster than none. With KILN_ATT_UNITS=N an rTask takes N (1: one, at
 * most 4), whatever the rounds, keeping key_split's groups, or fewer
 * where N would not fit. */
static void plan_units(const cg_emitter *e, att_problem *pb)
{
    const int blocks = (e->gpu.n_sms > 0 ? e->gpu.n_sms : 132) * KILN_MAX(e->mono_per_sm, 1);
    const char *v = getenv("KILN_ATT_UNITS");
    if (v && !*v) v = NULL;
    att_problem one = *pb;
    one.split = v ? pb->split : 1; /* set, the units keep key_split's groups */
    one.units = v ? KILN_MAX(1, KILN_MIN(atoi(v), 4)) : KILN_MIN(most_warps(e) / 4, 4);
    if (!e->want_block || !pb->mma || one.units < 2) return;
    if (!v && rtasks(&one, 4) <= blocks) return; /* one round either way */
    for (; one.units > 1; one.units--) {
        const int warps = most_warps(e) / one.split / one.units;
        if (warps >= 1 && fits(e, &one, warps)) break;
    }
    if (one.units > 1) *pb = one;
}

/* The key groups, their second key tiles and the mask's tiles in shared
 * memory, given up (the mask's tiles first, then the second tiles, then
 * halving the groups) while an rTask of one query warp would not fit the
 * shared memory: a float32 mask with a row per query takes 8.7 KB a key
 * group and query warp; with d 128 two k and v tiles 70 KB, more than a
 * persistent kernel of 4 blocks a multiprocessor leaves a block. The
 * query tiles side by side (plan_units) are planned first, with all of
 * these, and only where they fit so. */
static void plan_keys(const cg_emitter *e, att_problem *pb)
{
    pb->split = key_split(e, pb, most_warps(e));
    plan_units(e, pb); /* before anything is given up: units take what fits as it is */
    while (!fits(e, pb, 1) && (pb->m_smem || pb->bufs > 1 || pb->split > 1)) {
        if (pb->m_smem) pb->m_smem = false;
        else if (pb->bufs > 1) pb->bufs = 1;
        else pb->split /= 2;
    }
}

/* Without tuning: the most query warps, up to 4, that still make an rTask for
 * every fourth multiprocessor (short sequences have few query tiles per
 * head). A block's warps share each key and value tile they load, so
 * fewer rTasks of more warps can win: BERT-base at batch 1 (12 heads of
 * 128 queries) ran 9.8 us in 48 rTasks of 2 warps against 11.5 us in 96
 * of 1, which one rTask per multiprocessor would have chosen (kiln tune
 * on an H100). */
static int heuristic_warps(const cg_emitter *e, const att_problem *pb, int most)
{
    int warps = KILN_MIN(4, most);
    for (; warps > 1; warps /= 2) {
        if (fits(e, pb, warps) && 4 * rtasks(pb, warps) >= e->gpu.n_sms) break;
    }
    return warps;
}

static const char *st_code(kiln_dtype t)
{
    return t == KILN_F16 ? "KG_ST_F16" : t == KILN_BF16 ? "KG_ST_BF16" : "KG_ST_F32";
}

static void view_fields(base_str *s, char name, const att_view *v)
{
    base_str_printf(s, "    p.%c_b = %lldLL;\n    p.%c_h = %lldLL;\n    p.%c_%c = %lldLL;\n    p.%c_%c = %lldLL;\n",
                    name, (long long)v->b, name, (long long)v->h, name, name == 'm' ? 'q' : 's', (long long)v->r,
                    name, name == 'm' ? 'k' : 'd', (long long)v->c);
}

static kiln_status emit_with(cg_emitter *e, const sched_group *grp, const att_problem *pb, int warps, cg_op *op)
{
    base_str *s = &e->code;
    const pass_attention *at = &pb->at;
    char pq[160], pk[160], pv[160], pm[160], po[160], sc[48];
    int64_t n_qt = cdiv(pb->sq, (int64_t)rows_per_warp(pb) * warps);
    KILN_TRY(cg_need(e, "kg_rows.cuh"));
    KILN_TRY(cg_need(e, "kg_attention.cuh"));
    cg_comment(s, grp);
    base_str_printf(s,
                    "/* softmax(%g q k^T%s)%s v%s: %lld x %lld heads, %lld queries x %lld keys, d %lld, dv %lld;\n"
                    " * %s, %d warp%s (%d query rows) per query tile, %d tile%s per rTask%s */\n",
                    at->scale, at->mask ? " + mask" : "", at->nan_to_zero ? " (NaN rows as 0)" : "",
                    at->out_transposed ? ", transposed" : "",
                    (long long)pb->batch, (long long)pb->heads, (long long)pb->sq, (long long)pb->sk,
                    (long long)pb->d, (long long)pb->dv,
                    pb->mma ? "kg_att_mma (tensor cores)" : "kg_att_simt (fp32)", warps, warps > 1 ? "s" : "",
                    rows_per_warp(pb) * warps, pb->units, pb->units > 1 ? "s" : "",
                    pb->mma ? (pb->k_rows ? ", k stored [key][d]" : ", k stored [d][key]") : "");
    base_str_printf(s, "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n    kg_att p;\n", grp->id);
    base_str_printf(s, "    p.q = %s + %lld;\n", cg_ptr(e, at->q.v, pq, sizeof(pq)), (long long)at->q.offset);
    base_str_printf(s, "    p.k = %s + %lld;\n", cg_ptr(e, at->kt.v, pk, sizeof(pk)), (long long)at->kt.offset);
    base_str_printf(s, "    p.v = %s + %lld;\n", cg_ptr(e, at->v.v, pv, sizeof(pv)), (long long)at->v.offset);
    base_str_printf(s, "    p.mask = %s;\n", at->mask ? cg_ptr(e, at->mask, pm, sizeof(pm)) : "0");
    base_str_printf(s, "    p.o = %s;\n", cg_ptr(e, at->out, po, sizeof(po)));
    base_str_printf(s, "    p.tq = %s;\n    p.tk = %s;\n    p.tv = %s;\n    p.tm = %s;\n    p.to = %s;\n",
                    st_code(cg_store(e, at->q.v)), st_code(cg_store(e, at->kt.v)), st_code(cg_store(e, at->v.v)),
                    st_code(at->mask ? cg_store(e, at->mask) : KILN_F32), st_code(cg_store(e, at->out)));
    base_str_printf(s, "    p.heads = %lld;\n    p.n_qt = %lld;\n", (long long)pb->heads, (long long)n_qt);
    base_str_printf(s, "    p.sq = %lld;\n    p.sk = %lld;\n    p.d = %lld;\n    p.dv = %lld;\n", (long long)pb->sq,
                    (long long)pb->sk, (long long)pb->d, (long long)pb->dv);
    base_str_printf(s, "    p.scale = %s;\n", cg_float_lit(at->scale, sc, sizeof(sc)));
    view_fields(s, 'q', &pb->q);
    view_fields(s, 'k', &pb->k);
    view_fields(s, 'v', &pb->v);
    view_fields(s, 'm', &pb->m);
    view_fields(s, 'o', &pb->o);
    base_str_printf(s,
                    "    p.warps = %d;\n    p.kv_split = %d;\n    p.kv_bufs = %d;\n    p.k_rows = %d;\n"
                    "    p.m_smem = %d;\n    p.nan_zero = %d;\n",
                    warps, pb->split, pb->mma ? pb->bufs : 1, pb->k_rows, pb->m_smem ? 1 : 0,
                    at->nan_to_zero ? 1 : 0);
    if (pb->mma)
        base_str_printf(s, "    p.unit_smem = %lld;\n    p.tasks = %lld;\n    kg_att_mma_rtask(&p, t, %d);\n}\n\n",
                        (long long)unit_bytes(pb, warps), (long long)(pb->batch * pb->heads * n_qt), pb->units);
    else base_str_cat(s, "    kg_att_simt_rtask(&p, t);\n}\n\n");
    *op = (cg_op){.n_rtasks = cdiv(pb->batch * pb->heads * n_qt, pb->units),
                  .block = pb->units * 32 * warps * pb->split,
                  .smem_bytes = (int)(pb->units * unit_bytes(pb, warps)), .narrow = true};
    if (pb->split > 1)
        snprintf(op->config, sizeof(op->config), "kg_att_mma, %d warps x %d key groups", warps, pb->split);
    else snprintf(op->config, sizeof(op->config), "%s, %d warps", pb->mma ? "kg_att_mma" : "kg_att_simt", warps);
    if (pb->units > 1)
        snprintf(op->config + strlen(op->config), sizeof(op->config) - strlen(op->config), ", %d query tiles an rTask",
                 pb->units);
    return s->oom ? base_diag_add(e->d, KILN_ERR_OOM, "out of memory generating group '%s'", grp->name) : KILN_OK;
}

/* Candidate `cand` for the tuner: warp_cands[cand] warps per block. */
static kiln_status emit_cand(cg_emitter *e, const sched_group *grp, int cand, cg_op *op)
{
    att_problem pb;
    KILN_TRY(att_problem_of(e, grp, &pb));
    plan_keys(e, &pb);
    if (cand < 0 || cand >= (int)KILN_COUNT(warp_cands) || !fits(e, &pb, warp_cands[cand]))
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "group '%s': no attention candidate %d", grp->name, cand);
    return emit_with(e, grp, &pb, warp_cands[cand], op);
}

kiln_status cg_emit_attention(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    att_problem pb;
    KILN_TRY(att_problem_of(e, grp, &pb));
    /* in a persistent kernel, at most the block's warps: the key groups',
     * each of `most` query warps */
    plan_keys(e, &pb);
    const int most = most_warps(e) / pb.split / pb.units;
    int warps = heuristic_warps(e, &pb, most);
    if (!fits(e, &pb, warps))
        return base_diag_add(e->d, KILN_ERR_UNSUPPORTED,
                             "group '%s' (attention): %lld bytes of shared memory per block are more than the GPU has",
                             grp->name, (long long)(pb.units * unit_bytes(&pb, warps)));
    /* without narrow rOperators the block's warps, when they fit */
    if (e->want_block && !e->narrow_ok && fits(e, &pb, most)) return emit_with(e, grp, &pb, most, op);
    /* the tuner times the candidates that fit, in warp_cands' order */
    int n_cands = 0;
    while (n_cands < (int)KILN_COUNT(warp_cands) && warp_cands[n_cands] <= most && fits(e, &pb, warp_cands[n_cands]))
        n_cands++;
    char key[200], block[32] = "";
    if (e->want_block) snprintf(block, sizeof(block), " block=%d", e->want_block);
    snprintf(key, sizeof(key), "attention %s %s b=%lld h=%lld sq=%lld sk=%lld d=%lld dv=%lld%s%s%s",
             pb.mma ? "mma" : "simt", st_code(cg_store(e, pb.at.q.v)), (long long)pb.batch, (long long)pb.heads,
             (long long)pb.sq, (long long)pb.sk, (long long)pb.d, (long long)pb.dv, pb.at.mask ? " mask" : "",
             pb.mma && !pb.k_rows ? " kt" : "", block);
    if (pb.split > 1) snprintf(key + strlen(key), sizeof(key) - strlen(key), " split=%d", pb.split);
    if (pb.units > 1) snprintf(key + strlen(key), sizeof(key) - strlen(key), " units=%d", pb.units);
    cg_tune_key_cands(key, sizeof(key), warp_cands, (size_t)n_cands * sizeof(warp_cands[0]));
    int heuristic_index = 0;
    while (heuristic_index + 1 < n_cands && warp_cands[heuristic_index] != warps) heuristic_index++;
    int cand = n_cands > 1 ? cg_tune_choose(e, grp, key, n_cands, heuristic_index, emit_cand) : -1;
    if (cand >= 0 && cand < n_cands) warps = warp_cands[cand];
    return emit_with(e, grp, &pb, warps, op);
}
