/*
 * kg_rows.cuh: row kernels of the cuda target (emit_rows.c): softmax and
 * log-softmax, layer normalisation, RMSNorm and the row mean of
 * GlobalAveragePool, over a [rows, cols] view of a contiguous tensor; and
 * softmax along an inner axis (column mode). Also the storage codes and
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

/* One chunk (first column c, -1 past the end) in one pass over the row:
 *   pass 0: *acc gets the max (softmax), the sum of x - a (layer norm,
 *           mean; a is the row's first element) or the sum of squares
 *           (RMSNorm);
 *   pass 1: *acc gets the sum of exp(x - a) (softmax; v keeps the exps when
 *           held) or of (x - a)^2 (layer norm);
 *   pass 2: y = exp(x - a) * s (softmax), x - a - s (log-softmax),
 *           (x - a) * s * g + b (norms).
 * v holds the chunk (x's values, past the end -inf or 0): loaded in pass 0,
 * or in every pass when the row is not held in registers. */
static __device__ __forceinline__ void kg_row_chunk(const kg_rows *p, kg_i64 base, int c, int pass, bool held,
                                                    float *v, float a, float s, float *acc)
{
    const bool soft = p->op == KG_ROW_SOFTMAX || p->op == KG_ROW_LOG_SOFTMAX;
    if (pass == 0 || !held) {
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < p->vec) v[j] = soft ? -__int_as_float(0x7f800000) : 0.0f;
        if (c >= 0) kg_ld_n(p->x, base + c, p->sx, p->vec, v);
    }
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
    if (!soft) {
#pragma unroll
        for (int j = 0; j < 8; j++) gv[j] = 1.0f, bv[j] = 0.0f;
        if (p->g) kg_ld_n(p->g, c, p->sg, p->vec, gv);
        if (p->b) kg_ld_n(p->b, c, p->sb, p->vec, bv);
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

/* One pass over the thread's chunks (kg_row_chunk): unrolled over the
 * registers when the row is held, a plain loop reading x again otherwise. */
static __device__ __forceinline__ void kg_row_pass(const kg_rows *p, kg_i64 base, int pass, float *v, float a, float s,
                                                   float *acc)
{
    const int nt = p->block ? blockDim.x : 32, r = p->block ? threadIdx.x : (threadIdx.x & 31);
    if (p->held) {
#pragma unroll
        for (int k = 0; k < KG_ROW_HELD; k++) {
            if (k >= p->per) break;
            kg_row_chunk(p, base, kg_row_col(p, k, nt, r), pass, true, v + 8 * k, a, s, acc);
        }
    } else {
#pragma unroll 1
        for (int k = 0; k < p->per; k++) {
            float t[8];
            kg_row_chunk(p, base, kg_row_col(p, k, nt, r), pass, false, t, a, s, acc);
        }
    }
}

/* Softmax over a row that is not held: the thread's maximum *m and sum of
 * exp(x - *m) in one pass over its chunks. */
static __device__ __forceinline__ void kg_row_online(const kg_rows *p, kg_i64 base, float *m, float *s)
{
    const int nt = p->block ? blockDim.x : 32, r = p->block ? threadIdx.x : (threadIdx.x & 31);
#pragma unroll 1
    for (int k = 0; k < p->per; k++) {
        int c = kg_row_col(p, k, nt, r);
        if (c < 0) break;
        float v[8];
        kg_ld_n(p->x, base + c, p->sx, p->vec, v);
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

/* One row, by its team. */
static __device__ __forceinline__ void kg_row(const kg_rows *p, kg_i64 row)
{
    const bool soft = p->op == KG_ROW_SOFTMAX || p->op == KG_ROW_LOG_SOFTMAX;
    const kg_i64 base = row * (kg_i64)p->cols;
    float v[KG_ROW_HELD * 8];
    float a = soft ? -__int_as_float(0x7f800000) : 0.0f, s = 0.0f;
    if (soft && !p->held) {
        kg_row_online(p, base, &a, &s);
        float m = kg_team_max(a, p->block);
        float u = m == -__int_as_float(0x7f800000) ? 0.0f : m;
        s = kg_team_sum(s * expf(a - u), p->block);
        s = p->op == KG_ROW_SOFTMAX ? 1.0f / s : logf(s);
        kg_row_pass(p, base, 2, v, m, s, NULL);
        return;
    }
    /* Sums are taken about the row's first element (the shifted-data
     * algorithm): a row of 1000 + N(0, 1) keeps its digits. */
    float shift = 0.0f;
    if (!soft && p->op != KG_ROW_RMS_NORM) kg_ld_n(p->x, base, p->sx, 1, &shift);
    kg_row_pass(p, base, 0, v, shift, 0.0f, &a);
    if (soft) {
        a = kg_team_max(a, p->block);
    } else {
        a = shift + kg_team_sum(a, p->block) / (float)p->cols;
        if (p->op == KG_ROW_MEAN) {
            if ((p->block ? threadIdx.x : (threadIdx.x & 31)) == 0) kg_st_n(p->y, row, p->sy, 1, &a);
            return;
        }
        if (p->op == KG_ROW_RMS_NORM) {
            kg_row_pass(p, base, 2, v, 0.0f, 1.0f / sqrtf(a + p->eps), NULL);
            return;
        }
    }
    kg_row_pass(p, base, 1, v, a, 0.0f, &s);
    s = kg_team_sum(s, p->block);
    if (p->op == KG_ROW_SOFTMAX) s = 1.0f / s;
    else if (p->op == KG_ROW_LOG_SOFTMAX) s = logf(s);
    else s = 1.0f / sqrtf(s / (float)p->cols + p->eps);
    kg_row_pass(p, base, 2, v, a, s, NULL);
}

/* rTask t: rows t*(blockDim.x/32) .. (one per warp), or row t (block team). */
static __device__ __forceinline__ void kg_rows_rtask(const kg_rows *p, int t)
{
    if (p->block) {
        kg_row(p, t);
        return;
    }
    kg_i64 row = (kg_i64)t * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row < p->rows) kg_row(p, row);
}

/* ---- softmax along an inner axis (column mode) ------------------------------------ */

/* x viewed as [outer, n, inner], softmax over n: thread i of rTask t owns
 * column t*blockDim.x + i of the outer*inner columns; neighbouring threads
 * read neighbouring elements. */
typedef struct kg_cols {
    const void *x;
    void *y;
    int sx, sy;
    kg_i64 outer, n, inner;
    int log;
} kg_cols;

static __device__ __forceinline__ void kg_cols_rtask(const kg_cols *p, int t)
{
    kg_i64 col = (kg_i64)t * blockDim.x + threadIdx.x;
    if (col >= p->outer * p->inner) return;
    kg_i64 o = col / p->inner, i = col - o * p->inner;
    kg_i64 base = o * p->n * p->inner + i;
    float m = -__int_as_float(0x7f800000), s = 0.0f, v;
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
