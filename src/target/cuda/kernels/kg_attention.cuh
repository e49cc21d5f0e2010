/*
 * kg_attention.cuh: fused attention for the cuda target (emit_attention.c,
 * the partition's SCHED_GROUP_ATTENTION): the forward pass of
 * FlashAttention-2 (Dao 2023, algorithm 1),
 *
 *     out = softmax(scale * q k^T + mask) v     (softmax along the keys)
 *
 * without the [Sq, Sk] scores ever reaching memory. Needs kg_rows.cuh
 * (storage codes, loads and stores of any storage).
 *
 * rTask t is one tile of query rows of one (batch, head): t = bh * n_qt + qt.
 * The rows of the tile are spread over the warps; each warp walks over the
 * keys in tiles, keeping for each of its rows the running maximum m, the
 * running sum l of exp(score - m) and the output accumulator o, rescaled by
 * exp(m_old - m_new) whenever the maximum grows. A row whose scores are all
 * -inf ends as 0 / 0 = NaN, as the reference interpreter's softmax gives.
 * Masked keys (-inf) contribute exactly 0, even in tiles before the first
 * finite score.
 *
 * Two kernels:
 *   - kg_att_mma, for q, k and v stored in the same 16-bit float type:
 *     16 query rows per warp, 64 keys per tile, q k^T and p v on the tensor
 *     cores (mma.sync m16n8k16, fp32 accumulation). q, k and v tiles go to
 *     shared memory with cp.async (16 bytes a copy, rows padded by 16 bytes
 *     so that ldmatrix reads 8 rows from 8 bank groups); the q fragments
 *     stay in registers for the whole rTask; the probabilities go from the
 *     score accumulators to p v's A fragments without leaving registers
 *     (FlashAttention-2 section 3.3). The rTask's warps form kv_split key
 *     groups of `warps` query warps: group j takes key tiles j, j +
 *     kv_split, ..., keeping its own maxima, sums and accumulators, which
 *     group 0 merges at the end (FlashAttention's split-key rescale,
 *     through shared memory), so a short sequence's tiles are walked side
 *     by side. k may be stored [key][d] (ldmatrix)
 *     or [d][key] (ldmatrix .trans); v is [key][dv]. Head dims: multiples
 *     of 16 up to 128. Where o_d is 1, column pairs are stored as one word:
 *     o's other strides must be even.
 *   - kg_att_simt, for any storage (fp32 above all) and any strides: 4 query
 *     rows per warp, 32 keys per tile, a lane per key for the scores and
 *     lanes across dv for the output, in fp32 FMAs. Head dims up to 256.
 *
 * Strides are in elements of each tensor (0 where a dim is broadcast), so
 * Transposes the partition put into the group cost nothing.
 *
 * An rTask runs on threads 0 .. units * 32 * warps * kv_split - 1 of its
 * block (units and kv_split are 1 in the fp32 kernel): in a persistent
 * kernel of wider blocks the others skip it (kg.h, kg_sync_n). Its threads
 * meet before they leave its shared memory to the block's next rTask,
 * whatever that is (another rOperator's copies may start at once). In a
 * persistent kernel an mma rTask may take `units` query tiles side by side
 * (rTask t: tiles t * units ..), unit u on threads u * 32 * warps *
 * kv_split .. with its own unit_smem bytes of shared memory and named
 * barrier 2 + u (kg.h leaves ids 2 .. 5 to it); the units meet once, where
 * they leave shared memory.
 */
#ifndef KILN_KG_ATTENTION_CUH
#define KILN_KG_ATTENTION_CUH

typedef struct kg_att {
    const void *q, *k, *v, *mask; /* mask: NULL when none */
    void *o;
    int tq, tk, tv, tm, to;       /* storage of q, k, v, mask, o: KG_ST_* */
    int heads;                    /* the second batch dim: bh = b * heads + h */
    int n_qt;                     /* query tiles per (batch, head) */
    int sq, sk, d, dv;
    float scale;
    kg_i64 q_b, q_h, q_s, q_d;    /* q[b][h][query][d] */
    kg_i64 k_b, k_h, k_s, k_d;    /* k[b][h][key][d] */
    kg_i64 v_b, v_h, v_s, v_d;    /* v[b][h][key][dv] */
    kg_i64 m_b, m_h, m_q, m_k;    /* mask[b][h][query][key] */
    kg_i64 o_b, o_h, o_s, o_d;    /* o[b][h][query][dv] */
    int warps;                    /* mma: query warps (16 rows each); simt: the rTask's warps */
    int kv_split;                 /* mma: key groups of `warps` warps, each taking every kv_split-th key tile
                                   * (threads 0 .. 32 * warps * kv_split - 1 of the block, or of its unit:
                                   * kg_att_mma_rtask); simt: 1 */
    int kv_bufs;                  /* mma: a group's k and v tiles in shared memory, 2 (copies of its next tile
                                   * overlap this one's math) or 1 (where 2 would not fit); simt: 1 */
    int k_rows;                   /* mma: 1 when k_d == 1 ([key][d]), 0 when k_s == 1 ([d][key]) */
    int m_smem;                   /* mma: 1 when the mask's key tiles are copied with k's (m_k == 1, rows and
                                   * pointer 16-byte aligned: att_problem_of in emit_attention.c) */
    int nan_zero;                 /* 1: a row whose softmax is NaN writes zeros (pass_attention.nan_to_zero) */
    int unit_smem;                /* mma: bytes of shared memory a unit of kg_att_mma_rtask takes (units > 1) */
    int tasks;                    /* mma: query tiles in all (batch x heads x n_qt) */
} kg_att;

/* 1 / l for a row's sum of exponentials l; with nan_zero, 0 where the row's
 * softmax is NaN (every key -inf: l is 0; a NaN or +inf score: l is NaN),
 * for kg_att_out to write zeros there. */
static __device__ __forceinline__ float kg_att_inv(float l, int nan_zero)
{
    return nan_zero && !(l > 0.0f && l < 3.0e38f) ? 0.0f : 1.0f / l;
}

/* o * inv for kg_att_inv's inv: 0 when inv is (o may be NaN there). */
static __device__ __forceinline__ float kg_att_out(float o, float inv, int nan_zero)
{
    return nan_zero && inv == 0.0f ? 0.0f : o * inv;
}

#define KG_ATT_BC 64      /* keys per tile, mma */
#define KG_ATT_MAXD 128   /* largest head dim of the mma kernel */
#define KG_ATT_PAD 8      /* 16-bit elements after each shared-memory row */
#define KG_ATT_SR 4       /* query rows per warp, simt */
#define KG_ATT_SBC 32     /* keys per tile, simt (a lane each) */
#define KG_ATT_MAXU 8     /* output columns per lane, simt: head dims up to 256 */

/* ---- PTX primitives ------------------------------------------------------------------- */

static __device__ __forceinline__ unsigned kg_att_saddr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, the last 16 - bytes of them zero. */
static __device__ __forceinline__ void kg_att_cp16(void *dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(kg_att_saddr(dst)), "l"(src), "r"(bytes)
                 : "memory");
}

static __device__ __forceinline__ void kg_att_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* Waits until at most `pending` committed groups are in flight (more than
 * 5: at most 5, which waits for more than asked). */
static __device__ __forceinline__ void kg_att_wait(int pending)
{
    switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    }
}

/* Four 8x8 16-bit matrices; lane l gives the address of row l & 7 of
 * matrix l >> 3. */
static __device__ __forceinline__ void kg_att_ldsm(unsigned *r, const void *p, const int trans)
{
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(kg_att_saddr(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(kg_att_saddr(p)));
}

/* c[16x8] += a[16x16] b[16x8], fp32 accumulation. */
static __device__ __forceinline__ void kg_att_mma(float *c, const unsigned *a, unsigned b0, unsigned b1, const int bf)
{
    if (bf)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ---- shared pieces ----------------------------------------------------------------------- */

/* The rTask's (batch, head) and first query row. */
static __device__ __forceinline__ void kg_att_task(const kg_att *p, int t, int rows, int *b, int *h, int *q0)
{
    int bh = t / p->n_qt;
    *q0 = (t - bh * p->n_qt) * rows;
    *b = bh / p->heads;
    *h = bh - *b * p->heads;
}

/* score * scale + mask for query q and key k; -inf past the last key. */
static __device__ __forceinline__ float kg_att_score(const kg_att *p, const void *mask, float s, int q, int k)
{
    if (k >= p->sk) return -__int_as_float(0x7f800000);
    s *= p->scale;
    if (p->mask && q < p->sq) {
        float m;
        kg_ld_n(mask, (kg_i64)q * p->m_q + (kg_i64)k * p->m_k, p->tm, 1, &m);
        s += m;
    }
    return s;
}

/* The mask's values for a warp's rows qa and qb and keys k0 + 8 n + {0, 1}
 * (tile n, element e: row e < 2 ? qa : qb, key + (e & 1)), 0 without a
 * mask; k0 is even. Row and key are clamped into the mask rather than
 * tested, so that the loads carry no branches and can all be in flight at
 * once; values past the queries or keys are never used (kg_att_mma_rtask
 * stores no such row and scores no such key). Where the keys are
 * contiguous, their count even and the rows and the pointer aligned to two
 * elements, a key pair is one load. */
static __device__ __forceinline__ void kg_att_mask_vals(const kg_att *p, const void *mask, int qa, int qb, int k0,
                                                        float mk[KG_ATT_BC / 8][4])
{
    const kg_i64 ra = (kg_i64)min(qa, p->sq - 1) * p->m_q, rb = (kg_i64)min(qb, p->sq - 1) * p->m_q;
    const bool pairs = p->m_k == 1 && !(p->sk & 1) && !(p->m_q & 1) &&
                       !((unsigned long long)mask & (p->tm == KG_ST_F32 ? 7ull : 3ull));
#pragma unroll
    for (int n = 0; n < KG_ATT_BC / 8; n++) {
        if (!mask) {
            mk[n][0] = mk[n][1] = mk[n][2] = mk[n][3] = 0.0f;
        } else if (pairs) {
            const kg_i64 key = min(k0 + 8 * n, p->sk - 2);
            kg_ld_n(mask, ra + key, p->tm, 2, &mk[n][0]);
            kg_ld_n(mask, rb + key, p->tm, 2, &mk[n][2]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                kg_ld_n(mask, (e < 2 ? ra : rb) + (kg_i64)min(k0 + 8 * n + (e & 1), p->sk - 1) * p->m_k, p->tm, 1,
                        &mk[n][e]);
        }
    }
}

/* kg_att_mask_vals from the tile in shared memory (rows ra and rb of wm
 * 16-bit elements, keys from k0, even). */
static __device__ __forceinline__ void kg_att_mask_smem(const kg_att *p, const unsigned short *ms, int wm, int ra,
                                                        int rb, int k0, float mk[KG_ATT_BC / 8][4])
{
#pragma unroll
    for (int n = 0; n < KG_ATT_BC / 8; n++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const unsigned short *row = ms + (r ? rb : ra) * wm;
            if (p->tm == KG_ST_F32) {
                const float2 v = *(const float2 *)(row + 2 * (k0 + 8 * n));
                mk[n][2 * r] = v.x;
                mk[n][2 * r + 1] = v.y;
            } else {
                const unsigned v = *(const unsigned *)(row + k0 + 8 * n);
                mk[n][2 * r] = kg_bits2f(v & 0xffffu, p->tm);
                mk[n][2 * r + 1] = kg_bits2f(v >> 16, p->tm);
            }
        }
}

/* The online softmax step of one row: the tile's maximum mx (of scores
 * already in the row's units) updates the running maximum *m; returns the
 * factor that rescales the old sum and output, and sets *u, the maximum to
 * subtract from this tile's scores (0 while every score so far is -inf, so
 * that exp gives 0 rather than NaN). */
static __device__ __forceinline__ float kg_att_rescale(float *m, float mx, float *u)
{
    float mn = fmaxf(*m, mx);
    *u = mn == -__int_as_float(0x7f800000) ? 0.0f : mn;
    float corr = exp2f(*m - *u);
    *m = mn;
    return corr;
}

/* ---- tensor-core kernel ---------------------------------------------------------------- */

/* A [n_rows, n_cols] tile of a 16-bit matrix (element (r, c) at
 * src + r * rs + c; zero where r >= row_lim or c >= col_lim) into shared
 * rows of w elements, by `threads` threads (this one the tid-th), 16 bytes
 * per copy. */
static __device__ __forceinline__ void kg_att_tile(unsigned short *dst, int w, const unsigned short *src, kg_i64 rs,
                                                   int n_rows, int row_lim, int n_cols, int col_lim, int tid,
                                                   int threads)
{
    const int cpr = n_cols / 8;
    for (int i = tid; i < n_rows * cpr; i += threads) {
        int r = i / cpr, c = (i - r * cpr) * 8;
        int bytes = r < row_lim ? 2 * (col_lim - c) : 0;
        bytes = bytes < 0 ? 0 : bytes > 16 ? 16 : bytes;
        kg_att_cp16(dst + r * w + c, bytes ? src + (kg_i64)r * rs + c : src, bytes);
    }
}

/* Two floats as a 16-bit pair (the first in the low half), an mma A/B register. */
static __device__ __forceinline__ unsigned kg_att_pack(float lo, float hi, const int st)
{
    return kg_f2bits(lo, st) | (kg_f2bits(hi, st) << 16);
}

/* Key tile k0 .. k0 + 63 of k and v into ks and vs (rows of wk and wv
 * elements), zero past the last key, by `threads` threads (this one the
 * tid-th): k's copies, then v's, a copy group each (both empty when k0 is
 * past the keys, so that every thread commits as many groups). */
static __device__ __forceinline__ void kg_att_kv_tile(const kg_att *p, const unsigned short *kg,
                                                      const unsigned short *vg, unsigned short *ks, unsigned short *vs,
                                                      int wk, int wv, int k0, int tid, int threads,
                                                      const unsigned short *mg, unsigned short *ms, int wm,
                                                      int m_rows, int m_lim)
{
    if (k0 >= p->sk) {
        kg_att_commit();
        kg_att_commit();
        return;
    }
    if (p->m_smem) { /* with k's copies: the mask's m_rows rows of this tile, as 16-bit halves */
        const int h = p->tm == KG_ST_F32 ? 2 : 1;
        kg_att_tile(ms, wm, mg + (kg_i64)k0 * h, p->m_q * h, m_rows, m_lim, KG_ATT_BC * h, (p->sk - k0) * h, tid,
                    threads);
    }
    if (p->k_rows)
        kg_att_tile(ks, wk, kg + (kg_i64)k0 * p->k_s, p->k_s, KG_ATT_BC, p->sk - k0, p->d, p->d, tid, threads);
    else kg_att_tile(ks, wk, kg + k0, p->k_d, p->d, p->d, KG_ATT_BC, p->sk - k0, tid, threads);
    kg_att_commit();
    kg_att_tile(vs, wv, vg + (kg_i64)k0 * p->v_s, p->v_s, KG_ATT_BC, p->sk - k0, p->dv, p->dv, tid, threads);
    kg_att_commit();
}

/* KILN_TRACE_GEMM=1 kiln compile (a diagnostic): where query tiles 0 and
 * 40 spend their time, thread 0 of each key group printing the ns from the
 * rTask's start to: q in shared memory, the first iteration's k tile, its
 * scores, its softmax, its v tile, the end of the key loop, the merge and
 * the end. */
#ifdef KG_TRACE_GEMM
#define KG_ATT_MARK(i) (tr[i] = kg_now_ns())
#define KG_ATT_TRACE_END()                                                                                          \
    do {                                                                                                           \
        KG_ATT_MARK(8);                                                                                            \
        if (gt == 0 && (task == 0 || task == 40))                                                                  \
            printf("KAT t=%d group %d of %d, %d iterations: q %llu, k %llu, scores %llu, softmax %llu, v %llu, "  \
                   "loop %llu, merge %llu, end %llu ns\n",                                                         \
                   task, grp, S, iters, tr[1] - tr[0], tr[2] - tr[0], tr[3] - tr[0], tr[4] - tr[0],                 \
                   tr[5] - tr[0],                                                                                  \
                   tr[6] - tr[0], tr[7] ? tr[7] - tr[0] : 0ull, tr[8] - tr[0]);                                    \
    } while (0)
#else
#define KG_ATT_MARK(i) ((void)0)
#define KG_ATT_TRACE_END() ((void)0)
#endif
/* A unit's barrier: kg_sync_n's when an rTask is one unit, else named
 * barrier 2 + u for unit u (at most 4 units: 2 .. 5), each counting its n
 * threads; the units meet on kg_sync_n (barrier 0 or 1) only once, when
 * they leave shared memory. Constant ids: with the id in a register ptxas
 * reserves all 16 of the block's barriers. */
static __device__ __forceinline__ void kg_att_sync(unsigned u, int n, const int units)
{
    if (units == 1) kg_sync_n(n);
    else if (u == 0) asm volatile("bar.sync 2, %0;" ::"r"(n) : "memory");
    else if (u == 1) asm volatile("bar.sync 3, %0;" ::"r"(n) : "memory");
    else if (u == 2) asm volatile("bar.sync 4, %0;" ::"r"(n) : "memory");
    else asm volatile("bar.sync 5, %0;" ::"r"(n) : "memory");
}

/* Where an rTask's units meet as they leave shared memory: kg_sync_n's
 * barrier over the n threads of all units. With several units the spare
 * ones of the last rTask reach it from another instruction than the
 * others, so it is the non-aligned barrier.sync: bar.sync is
 * barrier.sync.aligned, which PTX allows only where every thread of the
 * block executes the same instruction. */
static __device__ __forceinline__ void kg_att_leave(int n, const int units)
{
    if (units == 1) kg_sync_n(n);
    else if (n == (int)blockDim.x) asm volatile("barrier.sync 0;" ::: "memory");
    else asm volatile("barrier.sync 1, %0;" ::"r"(n) : "memory");
}

/* rTask t: `units` query tiles side by side (a literal), each on its own
 * 32 * warps * kv_split threads, shared memory and named barrier. */
static __device__ __forceinline__ void kg_att_mma_rtask(const kg_att *p, int t, const int units)
{
#ifdef KG_TRACE_GEMM
    kg_u64 tr[9] = {0};
#endif
    KG_ATT_MARK(0);
    const float NEG_INF = -__int_as_float(0x7f800000), LOG2E = 1.4426950408889634f;
    const int S = p->kv_split, qw = p->warps, br = 16 * qw, bf = p->tq == KG_ST_BF16, nt = 32 * qw * S;
    /* the rTask's unit u, the thread within it (unsigned, as threadIdx.x:
     * an int tid made the body's sm_90a code 22.0 -> 28.8 KB) */
    const unsigned u = units > 1 ? threadIdx.x / (unsigned)nt : 0u, tid = threadIdx.x - u * (unsigned)nt;
    const int task = t * units + (int)u;
    if (units > 1 && task >= p->tasks) { /* the last rTask's spare units meet the others only where they leave */
        kg_att_leave(units * nt, units);
        return;
    }
    const int warp = (tid >> 5) % qw, grp = (tid >> 5) / qw;
    const int lane = tid & 31, g = lane >> 2, c4 = lane & 3, mat = lane >> 3;
    const int gt = tid - 32 * qw * grp, gn = 32 * qw; /* the thread within its key group, the group's threads */
    int b, h, q0;
    kg_att_task(p, task, br, &b, &h, &q0);
    const unsigned short *qg = (const unsigned short *)p->q + b * p->q_b + h * p->q_h + (kg_i64)q0 * p->q_s;
    const unsigned short *kg = (const unsigned short *)p->k + b * p->k_b + h * p->k_h;
    const unsigned short *vg = (const unsigned short *)p->v + b * p->v_b + h * p->v_h;
    const void *mask = p->mask ? (const void *)((const char *)p->mask +
                                                (b * p->m_b + h * p->m_h) * (p->tm == KG_ST_F32 ? 4 : 2))
                               : (const void *)0;
    const int wq = p->d + KG_ATT_PAD, wk = p->k_rows ? p->d + KG_ATT_PAD : KG_ATT_BC + KG_ATT_PAD;
    const int wv = p->dv + KG_ATT_PAD;
    /* key tile kt goes to group kt % S, iteration kt / S; every group runs
     * `iters` iterations (the last ones past the keys copy and compute
     * nothing) so that all the rTask's threads meet at every barrier */
    const int n_kt = (p->sk + KG_ATT_BC - 1) / KG_ATT_BC, iters = (n_kt + S - 1) / S;
    const int nb = iters > 1 ? p->kv_bufs : 1;
    const int k_elems = (p->k_rows ? KG_ATT_BC : p->d) * wk, v_elems = KG_ATT_BC * wv;
    unsigned short *qs = (unsigned short *)(kg_smem + u * p->unit_smem);
    /* the mask's tile in shared memory: one row when it broadcasts over the
     * queries, else the rTask's rows, each of 64 keys (as 16-bit halves) */
    const int mh = p->tm == KG_ST_F32 ? 2 : 1, wm = KG_ATT_BC * mh + KG_ATT_PAD;
    const int m_rows = p->m_q ? br : 1, m_elems = p->m_smem ? m_rows * wm : 0;
    unsigned short *ks0 = qs + br * wq + grp * nb * (k_elems + v_elems + m_elems);
    unsigned short *vs0 = ks0 + nb * k_elems, *ms0 = vs0 + nb * v_elems;
    const unsigned short *mg = p->m_smem ? (const unsigned short *)mask + (kg_i64)q0 * p->m_q * mh : 0;
    const int m_lim = p->m_q ? p->sq - q0 : 1;

    kg_att_sync(u, nt, units); /* the rTask before on these threads is done with shared memory */
    /* q's copies (every thread), then the group's first nb tiles' */
    kg_att_tile(qs, wq, qg, p->q_s, br, p->sq - q0, p->d, p->d, tid, nt);
    kg_att_commit();
    for (int i = 0; i < nb; i++) {
        const int kt = i * S + grp;
        kg_att_kv_tile(p, kg, vg, ks0 + i * k_elems, vs0 + i * v_elems, wk, wv, kt < n_kt ? kt * KG_ATT_BC : p->sk,
                       gt, gn, mg, ms0 + i * m_elems, wm, m_rows, m_lim);
    }
    int issued = nb;
    kg_att_wait(2 * nb); /* q's group */
    kg_att_sync(u, nt, units);
    KG_ATT_MARK(1);
    unsigned qf[KG_ATT_MAXD / 16][4];
#pragma unroll
    for (int kd = 0; kd < KG_ATT_MAXD / 16; kd++) {
        if (16 * kd >= p->d) break;
        kg_att_ldsm(qf[kd], qs + (16 * warp + (lane & 7) + 8 * (mat & 1)) * wq + 16 * kd + 8 * (mat >> 1), 0);
    }

    float of[KG_ATT_MAXD / 8][4];
#pragma unroll
    for (int n = 0; n < KG_ATT_MAXD / 8; n++) of[n][0] = of[n][1] = of[n][2] = of[n][3] = 0.0f;
    const int qa = q0 + 16 * warp + g, qb = qa + 8; /* rows g and g + 8 of the warp */
    float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.0f, l1 = 0.0f; /* rows qa and qb */

    for (int it = 0; it < iters; it++) {
        const int kt = it * S + grp, k0 = kt * KG_ATT_BC;
        const unsigned short *ks = ks0 + (it % nb) * k_elems, *vs = vs0 + (it % nb) * v_elems;
        /* the mask's values: from the tile copied with k, or loaded before
         * the wait so that their latency overlaps it (loaded in the score
         * loop, each behind a branch, they ran one after another: a BERT b1
         * rTask 5.2 -> 6.7 us) */
        float mk[KG_ATT_BC / 8][4];
        if (!p->m_smem) kg_att_mask_vals(p, mask, qa, qb, k0 + 2 * c4, mk);
        /* iteration it's k is this thread's group 2 it + 1 of 2 issued + 1 */
        kg_att_wait(2 * (issued - it) - 1);
        kg_att_sync(u, nt, units);
        if (it == 0) KG_ATT_MARK(2);
        if (p->m_smem)
            kg_att_mask_smem(p, ms0 + (it % nb) * m_elems, wm, p->m_q ? qa - q0 : 0, p->m_q ? qb - q0 : 0, 2 * c4,
                             mk);
        /* the tile's scores and their maxima; a group past the last tile
         * (kt >= n_kt) keeps -inf, and its quad still shuffles: a shuffle
         * under a branch on the warp's group costs a collective sequence
         * (WARPSYNC, ENDCOLLECTIVE), which doubled an rTask's time */
        float s[KG_ATT_BC / 8][4], mx0 = NEG_INF, mx1 = NEG_INF;
        if (kt < n_kt) {
            /* s = q k^T: 16 rows x 64 keys per warp, 8 accumulator tiles of 16 x 8 */
#pragma unroll
            for (int n = 0; n < KG_ATT_BC / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int kd = 0; kd < KG_ATT_MAXD / 16; kd++) {
                if (16 * kd >= p->d) break;
#pragma unroll
                for (int np = 0; np < KG_ATT_BC / 16; np++) {
                    unsigned r[4];
                    if (p->k_rows)
                        kg_att_ldsm(r, ks + (16 * np + (lane & 7) + 8 * (mat >> 1)) * wk + 16 * kd + 8 * (mat & 1), 0);
                    else
                        kg_att_ldsm(r, ks + (16 * kd + (lane & 7) + 8 * (mat & 1)) * wk + 16 * np + 8 * (mat >> 1), 1);
                    kg_att_mma(s[2 * np], qf[kd], r[0], r[1], bf);
                    kg_att_mma(s[2 * np + 1], qf[kd], r[2], r[3], bf);
                }
            }

            if (it == 0) KG_ATT_MARK(3);
            /* scale, mask, the online softmax (in log2 units); element e of
             * tile n is row e < 2 ? g : g + 8, key 8n + 2 c4 + (e & 1) */
#pragma unroll
            for (int n = 0; n < KG_ATT_BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = k0 + 8 * n + 2 * c4 + (e & 1);
                    float x = key < p->sk ? (s[n][e] * p->scale + mk[n][e]) * LOG2E : NEG_INF;
                    s[n][e] = x;
                    if (e < 2) mx0 = fmaxf(mx0, x);
                    else mx1 = fmaxf(mx1, x);
                }
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        if (kt < n_kt) {
            float u0, u1;
            float c0 = kg_att_rescale(&m0, mx0, &u0), c1 = kg_att_rescale(&m1, mx1, &u1);
            l0 *= c0;
            l1 *= c1;
#pragma unroll
            for (int n = 0; n < KG_ATT_BC / 8; n++) {
                s[n][0] = exp2f(s[n][0] - u0);
                s[n][1] = exp2f(s[n][1] - u0);
                s[n][2] = exp2f(s[n][2] - u1);
                s[n][3] = exp2f(s[n][3] - u1);
                l0 += s[n][0] + s[n][1];
                l1 += s[n][2] + s[n][3];
            }
#pragma unroll
            for (int n = 0; n < KG_ATT_MAXD / 8; n++) {
                if (8 * n >= p->dv) break;
                of[n][0] *= c0;
                of[n][1] *= c0;
                of[n][2] *= c1;
                of[n][3] *= c1;
            }
        }

        if (it == 0) KG_ATT_MARK(4);
        /* o += p v: the score tiles 2kk and 2kk+1 are the A fragment of keys 16kk.. */
        kg_att_wait(2 * (issued - it) - 2);
        kg_att_sync(u, nt, units);
        if (it == 0) KG_ATT_MARK(5);
        if (kt < n_kt) {
#pragma unroll
            for (int kk = 0; kk < KG_ATT_BC / 16; kk++) {
                const int st = bf ? KG_ST_BF16 : KG_ST_F16;
                unsigned a[4] = {kg_att_pack(s[2 * kk][0], s[2 * kk][1], st),
                                 kg_att_pack(s[2 * kk][2], s[2 * kk][3], st),
                                 kg_att_pack(s[2 * kk + 1][0], s[2 * kk + 1][1], st),
                                 kg_att_pack(s[2 * kk + 1][2], s[2 * kk + 1][3], st)};
#pragma unroll
                for (int np = 0; np < KG_ATT_MAXD / 16; np++) {
                    if (16 * np >= p->dv) break;
                    unsigned r[4];
                    kg_att_ldsm(r, vs + (16 * kk + (lane & 7) + 8 * (mat & 1)) * wv + 16 * np + 8 * (mat >> 1), 1);
                    kg_att_mma(of[2 * np], a, r[0], r[1], bf);
                    kg_att_mma(of[2 * np + 1], a, r[2], r[3], bf);
                }
            }
        }
        /* every warp is done with this iteration's buffers: the group's
         * tile nb iterations on into them */
        if (issued < iters) {
            kg_att_sync(u, nt, units);
            const int nk = issued * S + grp;
            kg_att_kv_tile(p, kg, vg, ks0 + (issued % nb) * k_elems, vs0 + (issued % nb) * v_elems, wk, wv,
                           nk < n_kt ? nk * KG_ATT_BC : p->sk, gt, gn, mg, ms0 + (issued % nb) * m_elems, wm, m_rows,
                           m_lim);
            issued++;
        }
    }

    /* the sums are per thread so far: add the quad's */
    KG_ATT_MARK(6);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (S > 1) {
        /* the groups' partial rows merged into group 0's: groups 1 .. S - 1
         * leave m, l and o in the key tiles' shared memory (a thread's
         * elements where its partner in group 0, the same lane of the same
         * query warp, finds them), group 0 rescales both to the larger
         * maximum and adds them (FlashAttention's split-key merge) */
        const int nv = 4 * (p->dv / 8) + 4, ldp = nv * 32;
        float *part = (float *)(qs + br * wq);
        kg_att_sync(u, nt, units);
        if (grp > 0) {
            float *mine = part + ((grp - 1) * qw + warp) * ldp + lane;
#pragma unroll
            for (int n = 0; n < KG_ATT_MAXD / 8; n++) {
                if (8 * n >= p->dv) break;
#pragma unroll
                for (int e = 0; e < 4; e++) mine[(4 * n + e) * 32] = of[n][e];
            }
            mine[(nv - 4) * 32] = m0;
            mine[(nv - 3) * 32] = m1;
            mine[(nv - 2) * 32] = l0;
            mine[(nv - 1) * 32] = l1;
        }
        kg_att_sync(u, nt, units);
        for (int j = 1; j < S && grp == 0; j++) {
            const float *other = part + ((j - 1) * qw + warp) * ldp + lane;
            const float om0 = other[(nv - 4) * 32], om1 = other[(nv - 3) * 32];
            float u0, u1, mn0 = fmaxf(m0, om0), mn1 = fmaxf(m1, om1);
            u0 = mn0 == NEG_INF ? 0.0f : mn0;
            u1 = mn1 == NEG_INF ? 0.0f : mn1;
            const float a0 = exp2f(m0 - u0), b0 = exp2f(om0 - u0), a1 = exp2f(m1 - u1), b1 = exp2f(om1 - u1);
            l0 = l0 * a0 + other[(nv - 2) * 32] * b0;
            l1 = l1 * a1 + other[(nv - 1) * 32] * b1;
#pragma unroll
            for (int n = 0; n < KG_ATT_MAXD / 8; n++) {
                if (8 * n >= p->dv) break;
                of[n][0] = of[n][0] * a0 + other[(4 * n + 0) * 32] * b0;
                of[n][1] = of[n][1] * a0 + other[(4 * n + 1) * 32] * b0;
                of[n][2] = of[n][2] * a1 + other[(4 * n + 2) * 32] * b1;
                of[n][3] = of[n][3] * a1 + other[(4 * n + 3) * 32] * b1;
            }
            m0 = mn0;
            m1 = mn1;
        }
    }
    /* every warp is done with shared memory (the key tiles, the partials):
     * the block's next rTask may copy into it (into every unit's: the
     * units meet here, an rTask of another rOperator may follow) */
    kg_att_leave(units * nt, units);
    if (grp > 0) { /* group 0 stores the rows */
        KG_ATT_TRACE_END();
        return;
    }
    KG_ATT_MARK(7);
    float i0 = kg_att_inv(l0, p->nan_zero), i1 = kg_att_inv(l1, p->nan_zero);
    char *o = (char *)p->o + (b * p->o_b + h * p->o_h) * (p->to == KG_ST_F32 ? 4 : 2);
#pragma unroll
    for (int n = 0; n < KG_ATT_MAXD / 8; n++) {
        if (8 * n >= p->dv) break;
        int dv = 8 * n + 2 * c4;
        float va[2] = {kg_att_out(of[n][0], i0, p->nan_zero), kg_att_out(of[n][1], i0, p->nan_zero)};
        float vb[2] = {kg_att_out(of[n][2], i1, p->nan_zero), kg_att_out(of[n][3], i1, p->nan_zero)};
        if (p->o_d == 1) {
            if (qa < p->sq) kg_st_n(o, (kg_i64)qa * p->o_s + dv, p->to, 2, va);
            if (qb < p->sq) kg_st_n(o, (kg_i64)qb * p->o_s + dv, p->to, 2, vb);
        } else {
            for (int e = 0; e < 2; e++) {
                if (qa < p->sq) kg_st_n(o, (kg_i64)qa * p->o_s + (dv + e) * p->o_d, p->to, 1, va + e);
                if (qb < p->sq) kg_st_n(o, (kg_i64)qb * p->o_s + (dv + e) * p->o_d, p->to, 1, vb + e);
            }
        }
    }
    KG_ATT_TRACE_END();
}

/* ---- fp32 kernel ----------------------------------------------------------------------------- */

static __device__ __forceinline__ void kg_att_simt_rtask(const kg_att *p, int t)
{
    const float NEG_INF = -__int_as_float(0x7f800000), LOG2E = 1.4426950408889634f;
    const int br = KG_ATT_SR * p->warps, nt = 32 * p->warps, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int b, h, q0;
    kg_att_task(p, t, br, &b, &h, &q0);
    const kg_i64 qo = b * p->q_b + h * p->q_h, ko = b * p->k_b + h * p->k_h, vo = b * p->v_b + h * p->v_h;
    const void *mask = p->mask ? (const void *)((const char *)p->mask +
                                                (b * p->m_b + h * p->m_h) * (p->tm == KG_ST_F32 ? 4 : 2))
                               : (const void *)0;
    float *qs = (float *)kg_smem;          /* [br][d] */
    float *ks = qs + br * p->d;            /* [32][d + 1]: a lane per row, no bank conflicts */
    float *vs = ks + KG_ATT_SBC * (p->d + 1); /* [32][dv] */

    kg_sync_n(nt); /* every warp is done with the previous rTask's q tile */
    for (int i = threadIdx.x; i < br * p->d; i += nt) {
        int r = i / p->d, c = i - r * p->d;
        float x = 0.0f;
        if (q0 + r < p->sq) kg_ld_n(p->q, qo + (kg_i64)(q0 + r) * p->q_s + (kg_i64)c * p->q_d, p->tq, 1, &x);
        qs[i] = x;
    }
    float o[KG_ATT_SR][KG_ATT_MAXU], m[KG_ATT_SR], l[KG_ATT_SR];
#pragma unroll
    for (int r = 0; r < KG_ATT_SR; r++) {
        m[r] = NEG_INF;
        l[r] = 0.0f;
#pragma unroll
        for (int u = 0; u < KG_ATT_MAXU; u++) o[r][u] = 0.0f;
    }

    for (int k0 = 0; k0 < p->sk; k0 += KG_ATT_SBC) {
        kg_sync_n(nt); /* the q tile is written; the previous k and v tiles are read */
        for (int i = threadIdx.x; i < KG_ATT_SBC * p->d; i += nt) {
            int r = i / p->d, c = i - r * p->d;
            float x = 0.0f;
            if (k0 + r < p->sk) kg_ld_n(p->k, ko + (kg_i64)(k0 + r) * p->k_s + (kg_i64)c * p->k_d, p->tk, 1, &x);
            ks[r * (p->d + 1) + c] = x;
        }
        for (int i = threadIdx.x; i < KG_ATT_SBC * p->dv; i += nt) {
            int r = i / p->dv, c = i - r * p->dv;
            float x = 0.0f;
            if (k0 + r < p->sk) kg_ld_n(p->v, vo + (kg_i64)(k0 + r) * p->v_s + (kg_i64)c * p->v_d, p->tv, 1, &x);
            vs[i] = x;
        }
        kg_sync_n(nt);

        /* lane = key: the scores of the warp's rows */
        float sc[KG_ATT_SR];
#pragma unroll
        for (int r = 0; r < KG_ATT_SR; r++) sc[r] = 0.0f;
        const float *kr = ks + lane * (p->d + 1), *qr = qs + KG_ATT_SR * warp * p->d;
        for (int c = 0; c < p->d; c++) {
            float kv = kr[c];
#pragma unroll
            for (int r = 0; r < KG_ATT_SR; r++) sc[r] = fmaf(qr[r * p->d + c], kv, sc[r]);
        }
#pragma unroll
        for (int r = 0; r < KG_ATT_SR; r++) {
            float x = kg_att_score(p, mask, sc[r], q0 + KG_ATT_SR * warp + r, k0 + lane) * LOG2E, u;
            float corr = kg_att_rescale(&m[r], kg_warp_max(x), &u);
            sc[r] = exp2f(x - u);
            l[r] = l[r] * corr + sc[r];
#pragma unroll
            for (int uu = 0; uu < KG_ATT_MAXU; uu++) o[r][uu] *= corr;
        }
        /* lanes across dv: o += p v */
        int n_keys = p->sk - k0 < KG_ATT_SBC ? p->sk - k0 : KG_ATT_SBC;
        for (int j = 0; j < n_keys; j++) {
            float pj[KG_ATT_SR];
#pragma unroll
            for (int r = 0; r < KG_ATT_SR; r++) pj[r] = __shfl_sync(0xffffffffu, sc[r], j);
#pragma unroll
            for (int uu = 0; uu < KG_ATT_MAXU; uu++) {
                int c = lane + 32 * uu;
                if (32 * uu >= p->dv) break;
                float vv = c < p->dv ? vs[j * p->dv + c] : 0.0f;
#pragma unroll
                for (int r = 0; r < KG_ATT_SR; r++) o[r][uu] = fmaf(pj[r], vv, o[r][uu]);
            }
        }
    }

    const kg_i64 oo = b * p->o_b + h * p->o_h;
#pragma unroll
    for (int r = 0; r < KG_ATT_SR; r++) {
        float inv = kg_att_inv(kg_warp_sum(l[r]), p->nan_zero);
        int q = q0 + KG_ATT_SR * warp + r;
#pragma unroll
        for (int uu = 0; uu < KG_ATT_MAXU; uu++) {
            int c = lane + 32 * uu;
            if (32 * uu >= p->dv) break;
            float x = kg_att_out(o[r][uu], inv, p->nan_zero);
            if (q < p->sq && c < p->dv) kg_st_n(p->o, oo + (kg_i64)q * p->o_s + (kg_i64)c * p->o_d, p->to, 1, &x);
        }
    }
}

#endif
