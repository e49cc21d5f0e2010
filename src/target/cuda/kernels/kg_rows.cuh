/*
 * kg_rows.cuh: row kernels of the cuda target (emit_rows.c): softmax and
 * log-softmax, layer normalisation, RMSNorm and the row mean of
 * GlobalAveragePool, over a [rows, cols] view of a contiguous tensor; and
 * softmax, or GlobalAveragePool's mean of an NHWC x, along an inner axis
 * (column mode). Also the storage codes and
 * vector loads that kg_attention.cuh uses.
 *
 * Mapping. A team of threads owns one row: a warp when the row has at most
 * 1024 elements (blockDim.x / 32 rows per rTask), else the whole block (one
 * row per rTask). Thread r of a team of nt owns the chunks k*nt + r of
 * `vec` consecutive elements (vec = 8, 4, 2 or 1: 16-byte loads when the
 * row allows them). When the thread's part of the row fits its registers
 * (`held`: at most KG_ROW_HELD chunks, as many as the block's register
 * budget allows) the row is read once; otherwise it is read again for every
 * pass, and softmax finds the maximum and the sum of exponentials in one
 * pass (the online softmax: the sum is rescaled whenever the maximum grows).
 * Math is fp32; the storage of each tensor (KG_ST_F32, KG_ST_F16,
 * KG_ST_BF16) is a constant argument, so each call compiles to one path.
 *
 * In a persistent kernel (mono schedules) kg_rows_rtask_mono may give a
 * warp several rows held in registers, all their loads issued before any
 * math, so that several rows' loads are in flight at once (MonoNN 4.2.2;
 * emit_rows.c picks the rows from the kernel-wide context), and loads may
 * carry cache hints (4.3, kg.h): x streamed when it is held (read once),
 * gamma and beta kept (every row reads them).
 *
 * Numerics follow the reference interpreter (ir/interp_reduce.c): softmax
 * subtracts the row maximum; layer norm's variance is the mean of squared
 * deviations from the mean (two passes over the registers), and its mean is
 * summed about the row's first element.
 *
 * Every parameter struct is filled with constants in the generated
 * rOperator and passed to a forceinline function, so the compiler folds
 * the shapes and storage codes into the code.
 */

#ifndef KILN_KG_ROWS_CUH
#define KILN_KG_ROWS_CUH

#define KG_ST_F32 0
#define KG_ST_F16 1
#define KG_ST_BF16 2

/* Chunks a thread keeps in registers (each at most 8 floats). */
#define KG_ROW_HELD 16
/* The most chunks a thread's row may have for kg_row and kg_rows_held to
 * load g and b ahead (kg_row_gb): 16 words a chunk, 8 used for 16-bit. */
#define KG_ROW_PRE_CHUNKS 4
/* kg_rows_held: rows a warp takes at once, and the chunks a thread then
 * holds over all of them. */
#define KG_ROW_MULTI 32
#define KG_ROW_MULTI_CHUNKS 64

/* Cache hints of kg_ld_nh: none, kg.h's stream loads, its keep loads. */
#define KG_HINT_NONE 0
#define KG_HINT_STREAM 1
#define KG_HINT_KEEP 2

/* ---- storage <-> float ------------------------------------------------------- */

static __device__ __forceinline__ float kg_bits2f(unsigned b, int st)
{
    return st == KG_ST_BF16 ? __uint_as_float(b << 16) : __half2float(__ushort_as_half((unsigned short)b));
}

static __device__ __forceinline__ unsigned kg_f2bits(float v, int st)
{
    return st == KG_ST_BF16 ? (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(v))
                         : (unsigned)__half_as_ushort(__float2half_rn(v));
}

/* n (1, 2, 4 or 8) elements of storage st at element i of p, aligned to
 * n elements, into v[0..n-1]. */
static __device__ __forceinline__ void kg_ld_n(const void *p, kg_i64 i, int st, int n, float *v)
{
    if (st == KG_ST_F32) {
        const float *q = (const float *)p + i;
        if (n >= 4) {
#pragma unroll
            for (int k = 0; k < 8; k += 4) {
                if (k >= n) break;
                float4 f = *(const float4 *)(q + k);
                v[k] = f.x, v[k + 1] = f.y, v[k + 2] = f.z, v[k + 3] = f.w;
            }
        } else if (n == 2) {
            float2 f = *(const float2 *)q;
            v[0] = f.x, v[1] = f.y;
        } else {
            v[0] = *q;
        }
        return;
    }
    const unsigned short *q = (const unsigned short *)p + i;
    unsigned w[4];
    if (n == 8) {
        uint4 u = *(const uint4 *)q;
        w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
    } else if (n == 4) {
        uint2 u = *(const uint2 *)q;
        w[0] = u.x, w[1] = u.y;
    } else if (n == 2) {
        w[0] = *(const unsigned *)q;
    } else {
        v[0] = kg_bits2f(*q, st);
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (2 * k >= n) break;
        v[2 * k] = kg_bits2f(w[k] & 0xffffu, st);
        v[2 * k + 1] = kg_bits2f(w[k] >> 16, st);
    }
}

/* n (1, 2, 4 or 8) elements of storage st at element i of p, aligned to
 * n elements, as they are stored: 32-bit words w[0..], a 16-bit element in
 * each half, the lower one first (n = 1: w[0]'s lower half); with a cache
 * hint (KG_HINT_*). kg_ld_n keeps its own typed loads: routed through here,
 * the same loads, the rows kernels' sm_90a code changed (25 of BERT's waves
 * kernels), which no GPU has timed. */
static __device__ __forceinline__ void kg_ld_words(const void *p, kg_i64 i, int st, int n, int hint, unsigned *w)
{
    const int size = st == KG_ST_F32 ? 4 : 2;
    const unsigned char *q = (const unsigned char *)p + i * size;
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const int bytes = n * size - 16 * k; /* 8 floats: two 16-byte loads */
        if (bytes <= 0) break;
        if (hint == KG_HINT_STREAM) {
            kg_ldw_stream(q + 16 * k, bytes < 16 ? bytes : 16, w + 4 * k);
        } else if (hint == KG_HINT_KEEP) {
            kg_ldw_keep(q + 16 * k, bytes < 16 ? bytes : 16, w + 4 * k);
        } else if (bytes >= 16) {
            const uint4 u = *(const uint4 *)(q + 16 * k);
            w[4 * k] = u.x, w[4 * k + 1] = u.y, w[4 * k + 2] = u.z, w[4 * k + 3] = u.w;
        } else if (bytes == 8) {
            const uint2 u = *(const uint2 *)q;
            w[0] = u.x, w[1] = u.y;
        } else {
            w[0] = bytes == 4 ? *(const unsigned *)q : (unsigned)*(const unsigned short *)q;
        }
    }
}

/* Element j of what kg_ld_words loaded, as a float. */
static __device__ __forceinline__ float kg_word_elem(const unsigned *w, int j, int st)
{
    return st == KG_ST_F32 ? __uint_as_float(w[j]) : kg_bits2f((w[j >> 1] >> (16 * (j & 1))) & 0xffffu, st);
}

/* kg_ld_n with a cache hint (KG_HINT_*). */
static __device__ __forceinline__ void kg_ld_nh(const void *p, kg_i64 i, int st, int n, int hint, float *v)
{
    if (hint == KG_HINT_NONE) {
        kg_ld_n(p, i, st, n, v);
        return;
    }
    unsigned w[8];
    kg_ld_words(p, i, st, n, hint, w);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (j >= n) break;
        v[j] = kg_word_elem(w, j, st);
    }
}

/* The store matching kg_ld_n. */
static __device__ __forceinline__ void kg_st_n(void *p, kg_i64 i, int st, int n, const float *v)
{
    if (st == KG_ST_F32) {
        float *q = (float *)p + i;
        if (n >= 4) {
#pragma unroll
            for (int k = 0; k < 8; k += 4) {
                if (k >= n) break;
                *(float4 *)(q + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
            }
        } else if (n == 2) {
            *(float2 *)q = make_float2(v[0], v[1]);
        } else {
            *q = v[0];
        }
        return;
    }
    unsigned short *q = (unsigned short *)p + i;
    if (n == 1) {
        *q = (unsigned short)kg_f2bits(v[0], st);
        return;
    }
    unsigned w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (2 * k >= n) break;
        w[k] = kg_f2bits(v[2 * k], st) | (kg_f2bits(v[2 * k + 1], st) << 16);
    }
    if (n == 8) *(uint4 *)q = make_uint4(w[0], w[1], w[2], w[3]);
    else if (n == 4) *(uint2 *)q = make_uint2(w[0], w[1]);
    else *(unsigned *)q = w[0];
}

/* ---- teams ----------------------------------------------------------------------- */

/* Sum / max over the team (block: every thread of the block calls it). */
static __device__ __forceinline__ float kg_team_sum(float v, int block)
{
    return block ? kg_block_sum(v, (float *)kg_smem) : kg_warp_sum(v);
}

static __device__ __forceinline__ float kg_team_max(float v, int block)
{
    return block ? kg_block_max(v, (float *)kg_smem) : kg_warp_max(v);
}

/* ---- row kernels ----------------------------------------------------------------- */

enum { KG_ROW_SOFTMAX, KG_ROW_LOG_SOFTMAX, KG_ROW_LAYER_NORM, KG_ROW_RMS_NORM, KG_ROW_MEAN };

typedef struct kg_rows {
    int op;             /* KG_ROW_* */
    const void *x;      /* [rows, cols] */
    void *y;            /* [rows, cols]; KG_ROW_MEAN: [rows] */
    const void *g, *b;  /* [cols] scale and bias (layer norm, RMSNorm), or NULL */
    int sx, sy, sg, sb; /* storage of x, y, g, b: KG_ST_F32 / KG_ST_F16 / KG_ST_BF16 */
    kg_i64 rows;
    int cols;
    int vec;            /* elements per chunk: cols % vec == 0 */
    int per;            /* chunks per thread: ceil(cols / vec / team size) */
    int held;           /* 1: the thread's chunks stay in registers (per <= KG_ROW_HELD) */
    int block;          /* 1: the block is the team (one row per rTask); 0: a warp */
    float eps;
} kg_rows;

/* Chunk k of the thread: its first column, or -1 past the row's end. */
static __device__ __forceinline__ int kg_row_col(const kg_rows *p, int k, int nt, int r)
{
    int c = (k * nt + r) * p->vec;
    return c < p->cols ? c : -1;
}

/* The chunk of the row at base whose first column is c into v: x's values
 * (loaded with hint hx), or past the end (c = -1) -inf for softmax, else 0. */
static __device__ __forceinline__ void kg_row_load(const kg_rows *p, kg_i64 base, int c, int hx, float *v)
{
    const bool soft = p->op == KG_ROW_SOFTMAX || p->op == KG_ROW_LOG_SOFTMAX;
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (j < p->vec) v[j] = soft ? -__int_as_float(0x7f800000) : 0.0f;
    if (c >= 0) kg_ld_nh(p->x, base + c, p->sx, p->vec, hx, v);
}

/* One chunk (first column c, -1 past the end) in one pass over the row:
 *   pass 0: *acc gets the max (softmax), the sum of x - a (layer norm,
 *           mean; a is the row's first element) or the sum of squares
 *           (RMSNorm);
 *   pass 1: *acc gets the sum of exp(x - a) (softmax; v keeps the exps when
 *           held) or of (x - a)^2 (layer norm);
 *   pass 2: y = exp(x - a) * s (softmax), x - a - s (log-softmax),
 *           (x - a) * s * g + b (norms; g and b loaded with hint hg).
 * v holds the chunk: loaded first when `load` (kg_row_load, hint hx): in
 * pass 0, or in every pass when the row is not held in registers. */
static __device__ __forceinline__ void kg_row_chunk(const kg_rows *p, kg_i64 base, int c, int pass, bool held, bool load,
                                                    int hx, int hg, float *v, float a, float s, float *acc,
                                                    const unsigned *gb, bool pre)
{
    const bool soft = p->op == KG_ROW_SOFTMAX || p->op == KG_ROW_LOG_SOFTMAX;
    if (load) kg_row_load(p, base, c, hx, v);
    if (pass == 0) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= p->vec) break;
            if (soft) *acc = fmaxf(*acc, v[j]);
            else if (p->op == KG_ROW_RMS_NORM) *acc = fmaf(v[j], v[j], *acc);
            else if (c >= 0) *acc += v[j] - a;
        }
        return;
    }
    if (c < 0) return;
    if (pass == 1) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= p->vec) break;
            float d = v[j] - a;
            if (soft) {
                float e = expf(d);
                *acc += e;
                if (held && p->op == KG_ROW_SOFTMAX) v[j] = e;
            } else {
                *acc = fmaf(d, d, *acc);
            }
        }
        return;
    }
    float gv[8], bv[8];
    if (!soft && pre) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= p->vec) break;
            gv[j] = p->g ? kg_word_elem(gb, j, p->sg) : 1.0f;
            bv[j] = p->b ? kg_word_elem(gb + 8, j, p->sb) : 0.0f;
        }
    } else if (!soft) {
#pragma unroll
        for (int j = 0; j < 8; j++) gv[j] = 1.0f, bv[j] = 0.0f;
        if (p->g) kg_ld_nh(p->g, c, p->sg, p->vec, hg, gv);
        if (p->b) kg_ld_nh(p->b, c, p->sb, p->vec, hg, bv);
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (j >= p->vec) break;
        if (p->op == KG_ROW_SOFTMAX) v[j] = (held ? v[j] : expf(v[j] - a)) * s;
        else if (p->op == KG_ROW_LOG_SOFTMAX) v[j] = v[j] - a - s;
        else if (p->b) v[j] = fmaf((v[j] - a) * s, gv[j], bv[j]);
        else v[j] = (v[j] - a) * s * gv[j];
    }
    kg_st_n(p->y, base + c, p->sy, p->vec, v);
}

/* One pass over the thread's chunks (kg_row_chunk; hints hx, hg): unrolled
 * over the registers when the row is held, a plain loop reading x again
 * otherwise. With pre, a held row's g and b are in gb, 16 words a chunk
 * (kg_row_gb); else they are loaded here. (A flag, not a NULL gb: a
 * pointer chosen at run time puts the array in local memory, where each
 * load waited for the one before; mono's layer norm rTasks took twice as
 * long.) */
static __device__ __forceinline__ void kg_row_pass(const kg_rows *p, kg_i64 base, int pass, int hx, int hg, float *v,
                                                   float a, float s, float *acc, const unsigned *gb, bool pre)
{
    const int nt = p->block ? blockDim.x : 32, r = p->block ? threadIdx.x : (threadIdx.x & 31);
    if (p->held) {
#pragma unroll
        for (int k = 0; k < KG_ROW_HELD; k++) {
            if (k >= p->per) break;
            kg_row_chunk(p, base, kg_row_col(p, k, nt, r), pass, true, pass == 0, hx, hg, v + 8 * k, a, s, acc,
                         gb + 16 * (k < KG_ROW_PRE_CHUNKS ? k : 0), pre);
        }
    } else {
#pragma unroll 1
        for (int k = 0; k < p->per; k++) {
            float t[8];
            kg_row_chunk(p, base, kg_row_col(p, k, nt, r), pass, false, true, hx, hg, t, a, s, acc, gb, false);
        }
    }
}

/* g's and b's values of this thread's chunks of a row of at most
 * KG_ROW_PRE_CHUNKS, as stored (kg_ld_words), 16 words a chunk: g's in the
 * first 8, b's in the others (kg_row_pass's gb; only what is present, in
 * chunks inside the row). Packed, 16-bit ones hold half the registers that
 * floats would: as floats, BERT b16's layer norm body (2 rows of 3 chunks a
 * warp) spilled in a 384-thread persistent kernel. */
static __device__ __forceinline__ void kg_row_gb(const kg_rows *p, int hg, unsigned *gb)
{
    const int nt = p->block ? blockDim.x : 32, r = p->block ? threadIdx.x : (threadIdx.x & 31);
#pragma unroll
    for (int k = 0; k < KG_ROW_PRE_CHUNKS; k++) {
        if (k >= p->per) break;
        const int c = kg_row_col(p, k, nt, r);
        if (c < 0) continue;
        if (p->g) kg_ld_words(p->g, c, p->sg, p->vec, hg, gb + 16 * k);
        if (p->b) kg_ld_words(p->b, c, p->sb, p->vec, hg, gb + 16 * k + 8);
    }
}

/* Softmax over a row that is not held: the thread's maximum *m and sum of
 * exp(x - *m) in one pass over its chunks. */
static __device__ __forceinline__ void kg_row_online(const kg_rows *p, kg_i64 base, int hx, float *m, float *s)
{
    const int nt = p->block ? blockDim.x : 32, r = p->block ? threadIdx.x : (threadIdx.x & 31);
#pragma unroll 1
    for (int k = 0; k < p->per; k++) {
        int c = kg_row_col(p, k, nt, r);
        if (c < 0) break;
        float v[8];
        kg_ld_nh(p->x, base + c, p->sx, p->vec, hx, v);
        float mn = *m;
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < p->vec) mn = fmaxf(mn, v[j]);
        /* subtract 0 while every element so far is -inf: exp gives 0, not NaN */
        float u = mn == -__int_as_float(0x7f800000) ? 0.0f : mn;
        *s *= expf(*m - u);
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < p->vec) *s += expf(v[j] - u);
        *m = mn;
    }
}

/* One row, by its team; hx, hg: the hints of x's loads and of g's and b's. */
static __device__ __forceinline__ void kg_row(const kg_rows *p, kg_i64 row, int hx, int hg)
{
    const bool soft = p->op == KG_ROW_SOFTMAX || p->op == KG_ROW_LOG_SOFTMAX;
    const kg_i64 base = row * (kg_i64)p->cols;
    float v[KG_ROW_HELD * 8];
    unsigned gb[KG_ROW_PRE_CHUNKS * 16];
    float a = soft ? -__int_as_float(0x7f800000) : 0.0f, s = 0.0f;
    if (soft && !p->held) {
        kg_row_online(p, base, hx, &a, &s);
        float m = kg_team_max(a, p->block);
        float u = m == -__int_as_float(0x7f800000) ? 0.0f : m;
        s = kg_team_sum(s * expf(a - u), p->block);
        s = p->op == KG_ROW_SOFTMAX ? 1.0f / s : logf(s);
        kg_row_pass(p, base, 2, hx, hg, v, m, s, NULL, gb, false);
        return;
    }
    /* a held row of a few chunks loads g and b first, alongside x, rather
     * than after its sums (their latency was the last in its chain) */
    const bool pre = !soft && p->held && p->per <= KG_ROW_PRE_CHUNKS && (p->g || p->b) && p->op != KG_ROW_MEAN;
    if (pre) kg_row_gb(p, hg, gb);
    /* Sums are taken about the row's first element (the shifted-data
     * algorithm): a row of 1000 + N(0, 1) keeps its digits. */
    float shift = 0.0f;
    if (!soft && p->op != KG_ROW_RMS_NORM) kg_ld_nh(p->x, base, p->sx, 1, hx, &shift);
    kg_row_pass(p, base, 0, hx, hg, v, shift, 0.0f, &a, gb, false);
    if (soft) {
        a = kg_team_max(a, p->block);
    } else {
        a = shift + kg_team_sum(a, p->block) / (float)p->cols;
        if (p->op == KG_ROW_MEAN) {
            if ((p->block ? threadIdx.x : (threadIdx.x & 31)) == 0) kg_st_n(p->y, row, p->sy, 1, &a);
            return;
        }
        if (p->op == KG_ROW_RMS_NORM) {
            kg_row_pass(p, base, 2, hx, hg, v, 0.0f, 1.0f / sqrtf(a + p->eps), NULL, gb, pre);
            return;
        }
    }
    kg_row_pass(p, base, 1, hx, hg, v, a, 0.0f, &s, gb, false);
    s = kg_team_sum(s, p->block);
    if (p->op == KG_ROW_SOFTMAX) s = 1.0f / s;
    else if (p->op == KG_ROW_LOG_SOFTMAX) s = logf(s);
    else s = 1.0f / sqrtf(s / (float)p->cols + p->eps);
    kg_row_pass(p, base, 2, hx, hg, v, a, s, NULL, gb, pre);
}

/* rTask t: rows t*(blockDim.x/32) .. (one per warp), or row t (block team). */
static __device__ __forceinline__ void kg_rows_rtask(const kg_rows *p, int t)
{
    if (p->block) {
        kg_row(p, t, KG_HINT_NONE, KG_HINT_NONE);
        return;
    }
    kg_i64 row = (kg_i64)t * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row < p->rows) kg_row(p, row, KG_HINT_NONE, KG_HINT_NONE);
}

/* Chunk k's column in `row` for this lane of a warp team: -1 past the
 * row's end, or when the row is past the last. */
static __device__ __forceinline__ int kg_held_col(const kg_rows *p, kg_i64 row, int k)
{
    return row < p->rows ? kg_row_col(p, k, 32, threadIdx.x & 31) : -1;
}

/* r rows of a warp team, row0, row0 + step, ... (those past the last
 * skipped), held in registers (p->held; r * p->per at most
 * KG_ROW_MULTI_CHUNKS): kg_row's passes, each over the r rows. Every row's
 * loads are issued before any math, so the r rows' loads are in flight
 * together, and their warp reductions run side by side. */
static __device__ __forceinline__ void kg_rows_held(const kg_rows *p, kg_i64 row0, int step, int r, int hx, int hg)
{
    const bool soft = p->op == KG_ROW_SOFTMAX || p->op == KG_ROW_LOG_SOFTMAX;
    float v[KG_ROW_MULTI_CHUNKS * 8], shift[KG_ROW_MULTI], a[KG_ROW_MULTI], s[KG_ROW_MULTI];
    /* g and b first (the same columns for every row; kg_row) */
    unsigned gb[KG_ROW_PRE_CHUNKS * 16];
    const bool pre = !soft && p->per <= KG_ROW_PRE_CHUNKS && (p->g || p->b) && p->op != KG_ROW_MEAN;
    if (pre) kg_row_gb(p, hg, gb);
    /* loads: every row's chunks, and the first elements its sums are taken about (kg_row) */
#pragma unroll
    for (int j = 0; j < KG_ROW_MULTI; j++) {
        if (j >= r) break;
        const kg_i64 row = row0 + (kg_i64)j * step, base = row * (kg_i64)p->cols;
        shift[j] = 0.0f;
        if (!soft && p->op != KG_ROW_RMS_NORM && row < p->rows) kg_ld_nh(p->x, base, p->sx, 1, hx, shift + j);
#pragma unroll
        for (int k = 0; k < KG_ROW_HELD; k++) {
            if (k >= p->per) break;
            kg_row_load(p, base, kg_held_col(p, row, k), hx, v + 8 * (j * p->per + k));
        }
    }
    /* pass 0, then the rows' reductions */
#pragma unroll
    for (int j = 0; j < KG_ROW_MULTI; j++) {
        if (j >= r) break;
        const kg_i64 row = row0 + (kg_i64)j * step, base = row * (kg_i64)p->cols;
        a[j] = soft ? -__int_as_float(0x7f800000) : 0.0f;
#pragma unroll
        for (int k = 0; k < KG_ROW_HELD; k++) {
            if (k >= p->per) break;
            kg_row_chunk(p, base, kg_held_col(p, row, k), 0, true, false, hx, hg, v + 8 * (j * p->per + k), shift[j], 0.0f, a + j,
                         gb, false);
        }
    }
#pragma unroll
    for (int j = 0; j < KG_ROW_MULTI; j++) {
        if (j >= r) break;
        a[j] = soft ? kg_warp_max(a[j]) : shift[j] + kg_warp_sum(a[j]) / (float)p->cols;
    }
    if (p->op == KG_ROW_MEAN) {
#pragma unroll
        for (int j = 0; j < KG_ROW_MULTI; j++) {
            if (j >= r) break;
            const kg_i64 row = row0 + (kg_i64)j * step;
            if (row < p->rows && (threadIdx.x & 31) == 0) kg_st_n(p->y, row, p->sy, 1, a + j);
        }
        return;
    }
    /* pass 1 and its reductions; RMSNorm has none: y = x / rms */
#pragma unroll
    for (int j = 0; j < KG_ROW_MULTI; j++) {
        if (j >= r) break;
        const kg_i64 row = row0 + (kg_i64)j * step, base = row * (kg_i64)p->cols;
        s[j] = 0.0f;
        if (p->op == KG_ROW_RMS_NORM) continue;
#pragma unroll
        for (int k = 0; k < KG_ROW_HELD; k++) {
            if (k >= p->per) break;
            kg_row_chunk(p, base, kg_held_col(p, row, k), 1, true, false, hx, hg, v + 8 * (j * p->per + k), a[j], 0.0f, s + j,
                         gb, false);
        }
    }
#pragma unroll
    for (int j = 0; j < KG_ROW_MULTI; j++) {
        if (j >= r) break;
        if (p->op == KG_ROW_RMS_NORM) {
            s[j] = 1.0f / sqrtf(a[j] + p->eps);
            a[j] = 0.0f;
            continue;
        }
        s[j] = kg_warp_sum(s[j]);
        if (p->op == KG_ROW_SOFTMAX) s[j] = 1.0f / s[j];
        else if (p->op == KG_ROW_LOG_SOFTMAX) s[j] = logf(s[j]);
        else s[j] = 1.0f / sqrtf(s[j] / (float)p->cols + p->eps);
    }
    /* pass 2: the stores */
#pragma unroll
    for (int j = 0; j < KG_ROW_MULTI; j++) {
        if (j >= r) break;
        const kg_i64 row = row0 + (kg_i64)j * step, base = row * (kg_i64)p->cols;
#pragma unroll
        for (int k = 0; k < KG_ROW_HELD; k++) {
            if (k >= p->per) break;
            kg_row_chunk(p, base, kg_held_col(p, row, k), 2, true, false, hx, hg, v + 8 * (j * p->per + k), a[j], s[j], NULL,
                         gb + 16 * (k < KG_ROW_PRE_CHUNKS ? k : 0), pre);
        }
    }
}

/* rTask t in a persistent kernel (--schedule=mono): kg_rows_rtask with
 * hinted loads (hx for x, hg for g and b) and, for a warp team, r rows a
 * warp (kg_rows_held; r = 1: kg_row): warp w takes rows
 * (t r + j) warps + w, j < r. */
static __device__ __forceinline__ void kg_rows_rtask_mono(const kg_rows *p, int t, int r, int hx, int hg)
{
    if (p->block) {
        kg_row(p, t, hx, hg);
        return;
    }
    const int warps = blockDim.x >> 5;
    const kg_i64 row0 = (kg_i64)t * r * warps + (threadIdx.x >> 5);
    if (r > 1) kg_rows_held(p, row0, warps, r, hx, hg);
    else if (row0 < p->rows) kg_row(p, row0, hx, hg);
}

/* ---- softmax and mean along an inner axis (column mode) ---------------------------- */

/* x viewed as [outer, n, inner], softmax over n (y as x), or with mean its
 * mean over n (y [outer, inner]: GlobalAveragePool of an NHWC x). In
 * kg_cols_rtask thread i of rTask t owns column t*blockDim.x + i of the
 * outer*inner columns; kg_cols_mean_rtask shares a column among threads.
 * Neighbouring threads read neighbouring elements. */
typedef struct kg_cols {
    const void *x;
    void *y;
    int sx, sy;
    kg_i64 outer, n, inner;
    int log, mean;
} kg_cols;

/* The means of `cols` columns (p->mean, p->log 0) a block of cols x slices
 * threads: thread (slice, c) sums rows slice, slice + slices, ... of column
 * t cols + c, and the slices' sums meet in shared memory (cols x slices
 * floats), slice 0's thread adding them in order. The mean of 49 pixels of
 * ResNet-50's 2048 channels: a chain of 7 loads a thread instead of 49. */
static __device__ __forceinline__ void kg_cols_mean_rtask(const kg_cols *p, int t, const int cols, const int slices)
{
    const int c = threadIdx.x % cols, slice = threadIdx.x / cols;
    const kg_i64 col = (kg_i64)t * cols + c;
    float *part = (float *)kg_smem;
    float s = 0.0f, v;
    if (col < p->outer * p->inner && slice < slices) {
        kg_i64 o = col / p->inner, i = col - o * p->inner, base = o * p->n * p->inner + i;
        for (kg_i64 k = slice; k < p->n; k += slices) {
            kg_ld_n(p->x, base + k * p->inner, p->sx, 1, &v);
            s += v;
        }
    }
    if (slice < slices) part[threadIdx.x] = s;
    kg_sync_n(cols * slices);
    if (slice == 0 && col < p->outer * p->inner) {
        for (int j = 1; j < slices; j++) s += part[j * cols + c];
        s /= (float)p->n;
        kg_st_n(p->y, col, p->sy, 1, &s);
    }
    kg_sync_n(cols * slices); /* the block's next rTask writes part again */
}

static __device__ __forceinline__ void kg_cols_rtask(const kg_cols *p, int t)
{
    kg_i64 col = (kg_i64)t * blockDim.x + threadIdx.x;
    if (col >= p->outer * p->inner) return;
    kg_i64 o = col / p->inner, i = col - o * p->inner;
    kg_i64 base = o * p->n * p->inner + i;
    float m = -__int_as_float(0x7f800000), s = 0.0f, v;
    if (p->mean) {
        /* a sum in fp32 (the reference interpreter's is in double), then the division */
        for (kg_i64 k = 0; k < p->n; k++) {
            kg_ld_n(p->x, base + k * p->inner, p->sx, 1, &v);
            s += v;
        }
        s /= (float)p->n;
        kg_st_n(p->y, col, p->sy, 1, &s);
        return;
    }
    for (kg_i64 k = 0; k < p->n; k++) {
        kg_ld_n(p->x, base + k * p->inner, p->sx, 1, &v);
        m = fmaxf(m, v);
    }
    for (kg_i64 k = 0; k < p->n; k++) {
        kg_ld_n(p->x, base + k * p->inner, p->sx, 1, &v);
        s += expf(v - m);
    }
    float f = p->log ? logf(s) : 1.0f / s;
    for (kg_i64 k = 0; k < p->n; k++) {
        kg_ld_n(p->x, base + k * p->inner, p->sx, 1, &v);
        v = p->log ? v - m - f : expf(v - m) * f;
        kg_st_n(p->y, base + k * p->inner, p->sy, 1, &v);
    }
}

#endif
