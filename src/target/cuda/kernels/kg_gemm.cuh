/*
 * kg_gemm.cuh: the cuda target's GEMM templates (Bolt 3.2): one output
 * tile of C = act(alpha op(A) op(B) + beta bias + residual) per rTask,
 * with the epilogue applied to the fp32 accumulators before the only store.
 *
 * The templates, called from the generated op_<id> (emit_gemm.c):
 *
 *   kg_gemm_wg    Hopper's warpgroup MMA (wgmma, sm_90a) on shared-memory
 *                 descriptors, for A and B stored as __half or
 *                 __nv_bfloat16 with 16-byte aligned rows; the sm_80 image
 *                 of the same program runs kg_gemm_tc in its place.
 *   kg_gemm_wgt   the same MMAs on k-tiles the tensor memory accelerator
 *                 copies (cp.async.bulk.tensor, mbarriers), with
 *                 kg_gemm_wgt_ws (a producer warp, clusters) and split-K
 *                 summed in a cluster (kg_gemm_wgt_csum); below.
 *   kg_gemm_tc    the same operands on mma.sync.m16n8k16 with ldmatrix:
 *                 every GPU from sm_80, and small tiles on sm_90 (small
 *                 problems, attention products).
 *   kg_gemm_simt  fp32 FMA, for float32 storage (--precision fp32) and for
 *                 anything the tensor-core templates do not take (mixed
 *                 storage, unaligned rows): 8x8 outputs per thread, shared
 *                 memory double-buffered through registers.
 *   kg_gemm_gemv  products of one row with A and B K-major: a warp a
 *                 column (or a few), its lanes along K, summed by
 *                 shuffles; no shared memory.
 * Both tensor-core templates copy k-tiles with 16-byte cp.async into a
 * multistage ring of XOR-swizzled shared memory, and accumulate in fp32.
 *
 * Parameterisation without C++ templates: the tile sizes are int arguments
 * of __forceinline__ functions, and op_<id> passes literals; run-time facts
 * (extents, strides, dtypes, the epilogue) travel in a kg_gemm_args that
 * op_<id> fills with constants. After inlining, every loop bound and array
 * index is a constant, so the loops unroll and the accumulators stay in
 * registers (register arrays are declared at their largest size, unused
 * parts vanish; ptxas reports no stack frame).
 *
 * Operand layouts. The matrix is M x K for A and K x N for B; each operand
 * is stored with either K contiguous (KG_GEMM_KMAJOR: A row-major as in
 * MatMul, B transposed as in Gemm transB=1) or M / N contiguous
 * (KG_GEMM_MNMAJOR: A transposed, Gemm transA=1; B row-major, MatMul
 * weights). Shared memory keeps each tile in its global layout: rows of w
 * elements along the contiguous dimension, 16-byte chunks XOR-swizzled by
 * the row (kg_gemm_swz) so that the 8 rows one ldmatrix reads hit 8
 * different bank groups; ldmatrix.trans serves the MN-major cases. The
 * swizzle of 128- and 64-byte rows is the one wgmma's descriptors name, so
 * kg_gemm_wg reads K-major tiles as they are; its MN-major tiles are laid
 * out in 64-element-wide atoms instead (kg_gemm_tile_off).
 *
 * Convolutions. A convolution of NHWC x may be a product whose A is the
 * im2col matrix of x, never stored (g->conv, kg_gemm_conv): kg_gemm_wgt
 * copies its k-tiles with TMA's im2col mode, the other tensor-core
 * templates gather them by cp.async (kg_gemm_conv_load).
 *
 * Edges. Rows and k beyond the matrix are zero-filled (cp.async with a
 * source size of 0); stores are masked. The tensor-core templates need the
 * contiguous extent of each operand (and its row stride) to be a multiple
 * of 8 elements and 16-byte aligned bases, which emit_gemm.c checks.
 *
 * Split-K, two ways, both deterministic. Inside a block, kg_gemm_tc may
 * slice K between its warps (ks > 1: each slice of warps takes a share of
 * the k16 steps of every tile) and reduce the slices through shared memory
 * before the epilogue. Across blocks (g->splits > 1, kg_gemm_tc only), the
 * splits of one tile are separate rTasks, each over a contiguous range of
 * k-tiles, summed through the workspace of kg.h (kg_splitk_arrive) before
 * the last one runs the epilogue. That spreads a short-M, long-K product
 * (BERT at batch 1: 128 x 768 x 3072) over every multiprocessor.
 */

#define KG_DT_F32 0
#define KG_DT_F16 1
#define KG_DT_BF16 2

#define KG_GEMM_KMAJOR 0  /* the operand's K runs contiguously */
#define KG_GEMM_MNMAJOR 1 /* its M (A) or N (B) runs contiguously */

/* Activations: KG_ACT_* and kg_actf in kg_math.h, included before this file. */

/* Register arrays are declared this large: warp tiles up to 64 x 64. */
#define KG_GEMM_MI_MAX 4
#define KG_GEMM_NI_MAX 8

/* A convolution as a GEMM (Bolt's implicit GEMM, the im2col matrix never
 * stored), x NHWC [N][H][W][C] and the weights OHWI [K][KH][KW][C] (k = KH
 * KW C, ordered (kh, kw, c)), both K-major:
 *   g->conv 1: y NHWC [N][OH][OW][K] = im2col(x) w^T, A the im2col matrix
 *     at g->a (m = N OH OW pixels, n = K);
 *   g->conv 2: y NCHW of one image [K][OH OW] = w im2col(x)^T, B the im2col
 *     matrix at g->b (m = K, n = OH OW pixels).
 * The im2col matrix's row p (a pixel), column k, is x at pixel (img, oh sh
 * - ph + kh dh, ow sw - pw + kw dw), channel c: zero outside the image (the
 * padding). C is a multiple of 8 (a 16-byte chunk never straddles two
 * taps); with the tensor memory accelerator (kg_gemm_wgt) a multiple of 64,
 * and the operand's tensor map is an im2col one (runtime/gprog.h rt_gtmap). */
typedef struct kg_gemm_conv {
    int c, h, w;      /* x */
    int oh, ow;       /* y */
    int kw;           /* taps along W (those along H follow from k) */
    int sh, sw, ph, pw, dh, dw;
} kg_gemm_conv;

/* One GEMM tile's inputs. Pointers are already offset to the batch; the
 * element (i, j) of the bias is bias[i * bias_rs + j * bias_cs] (strides 0
 * broadcast), of the residual res[i * ldr + j], of C c[i * ldc + j]. */
typedef struct kg_gemm_args {
    const void *a, *b;
    void *c;
    const void *bias; /* NULL: none */
    const void *res;  /* NULL: none */
    int m, n, k;
    kg_i64 lda, ldb, ldc, ldr;
    kg_i64 bias_rs, bias_cs;
    int la, lb;            /* KG_GEMM_KMAJOR / KG_GEMM_MNMAJOR */
    int dt_a, dt_b;        /* KG_DT_*: storage of A and B */
    int dt_c, dt_bias, dt_res;
    float alpha, beta;     /* C = alpha AB + beta bias + res */
    int act;               /* KG_ACT_* */
    float act_p0, act_p1;  /* the activation's parameters */
    int splits, split;     /* split-K across blocks: this rTask's share of K */
    int slot;              /* the tile's index among the rOperator's (splits > 1) */
    int csum;              /* kg_gemm_wgt, splits > 1: the splits are a cluster's blocks and sum in its
                            * shared memory (kg_gemm_wgt_csum) instead of through ws and sem */
    float *ws;             /* splits > 1: its partial tiles (kg_splitk_ws + its place) */
    unsigned *sem;         /* splits > 1: its tiles' counters (kg_splitk_sem + its place) */
    const void *tma_a, *tma_b; /* kg_gemm_wgt: the operands' tensor maps (kg_tmaps entries) */
    int grid_dep;          /* kg_gemm_wgt: griddepcontrol.wait inside, after B's first copies (kg_gemm_tma_first) */
    int conv;              /* 1: A, 2: B is the implicit im2col matrix of a convolution (kg_gemm_conv) */
    kg_gemm_conv cv;
} kg_gemm_args;

/* A tensor map (CUtensorMap: 128 opaque bytes) the runtime encodes for the
 * program when it loads it (runtime/gprog.h rt_gtmap); the program defines
 * the array with as many as it uses. */
typedef struct __align__(128) kg_tmap {
    unsigned long long w[16];
} kg_tmap;
extern __device__ kg_tmap kg_tmaps[];

/* ---- loads, stores and the epilogue -------------------------------------------- */

static __device__ __forceinline__ float kg_gemm_ldf(const void *p, kg_i64 i, const int dt)
{
    if (dt == KG_DT_F16) return __half2float(((const __half *)p)[i]);
    if (dt == KG_DT_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

static __device__ __forceinline__ void kg_gemm_stf(void *p, kg_i64 i, float v, const int dt)
{
    if (dt == KG_DT_F16) ((__half *)p)[i] = __float2half_rn(v);
    else if (dt == KG_DT_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else ((float *)p)[i] = v;
}

/* Two adjacent elements i, i + 1 (i even, the row stride even: aligned). */
static __device__ __forceinline__ void kg_gemm_st2(void *p, kg_i64 i, float v0, float v1, const int dt)
{
    if (dt == KG_DT_F16) *(__half2 *)((__half *)p + i) = __floats2half2_rn(v0, v1);
    else if (dt == KG_DT_BF16) *(__nv_bfloat162 *)((__nv_bfloat16 *)p + i) = __floats2bfloat162_rn(v0, v1);
    else *(float2 *)((float *)p + i) = make_float2(v0, v1);
}

/* The epilogue of one element from its accumulator and its bias and
 * residual values (read only where g has them). */
static __device__ __forceinline__ float kg_gemm_epi_of(const kg_gemm_args *g, float acc, float bias, float res)
{
    float v = g->alpha * acc;
    if (g->bias) v += g->beta * bias;
    if (g->res) v += res;
    return kg_actf(v, g->act, g->act_p0, g->act_p1);
}

/* The bias of element (i, j); 0 without one. */
static __device__ __forceinline__ float kg_gemm_bias_at(const kg_gemm_args *g, int i, int j)
{
    return g->bias ? kg_gemm_ldf(g->bias, (kg_i64)i * g->bias_rs + (kg_i64)j * g->bias_cs, g->dt_bias) : 0.0f;
}

/* The epilogue of element (i, j) from its accumulator. */
static __device__ __forceinline__ float kg_gemm_epi(const kg_gemm_args *g, int i, int j, float acc)
{
    const float r = g->res ? kg_gemm_ldf(g->res, (kg_i64)i * g->ldr + j, g->dt_res) : 0.0f;
    return kg_gemm_epi_of(g, acc, kg_gemm_bias_at(g, i, j), r);
}

/* Elements p[i .. i + 7] as floats: one 16-byte load where 16-bit data is
 * 16-byte aligned there, else one load each. */
static __device__ __forceinline__ void kg_gemm_ld8f(const void *p, kg_i64 i, const int dt, float *v)
{
    if (dt != KG_DT_F32 && ((kg_u64)((const unsigned short *)p + i) & 15u) == 0) {
        const uint4 w = *(const uint4 *)((const unsigned short *)p + i);
        const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float2 f;
            if (dt == KG_DT_BF16) f = __bfloat1622float2(*(const __nv_bfloat162 *)&u[e]);
            else f = __half22float2(*(const __half2 *)&u[e]);
            v[2 * e] = f.x;
            v[2 * e + 1] = f.y;
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = kg_gemm_ldf(p, i + e, dt);
}

/* Stores elements (i, j) and (i, j + 1) of C from their accumulators,
 * masking columns beyond n; one paired store when the row stride allows. */
static __device__ __forceinline__ void kg_gemm_out2(const kg_gemm_args *g, int i, int j, float a0, float a1)
{
    kg_i64 o = (kg_i64)i * g->ldc + j;
    if (j + 1 < g->n) {
        float v0 = kg_gemm_epi(g, i, j, a0), v1 = kg_gemm_epi(g, i, j + 1, a1);
        if ((g->ldc & 1) == 0) kg_gemm_st2(g->c, o, v0, v1, g->dt_c);
        else {
            kg_gemm_stf(g->c, o, v0, g->dt_c);
            kg_gemm_stf(g->c, o + 1, v1, g->dt_c);
        }
    } else if (j < g->n) {
        kg_gemm_stf(g->c, o, kg_gemm_epi(g, i, j, a0), g->dt_c);
    }
}

/* rTask t's tile: tiles grouped by `group` rows of tiles, so that the blocks
 * running together share panels of A and B in L2. */
static __device__ __forceinline__ void kg_gemm_raster(int t, int tiles_m, int tiles_n, int group, int *tm, int *tn)
{
    int per_group = group * tiles_n;
    int first = t / per_group * group;
    int rows = tiles_m - first < group ? tiles_m - first : group;
    int r = t % per_group;
    *tm = first + r % rows;
    *tn = r / rows;
}

/* ---- tensor-core primitives (sm_80+) -------------------------------------------- */

static __device__ __forceinline__ unsigned kg_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, bypassing L1; zero-filled when !valid. */
static __device__ __forceinline__ void kg_cp_async16(unsigned dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

static __device__ __forceinline__ void kg_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }

/* Waits until at most n of this thread's copy groups are in flight. */
static __device__ __forceinline__ void kg_cp_async_wait(const int n)
{
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::); break;
    default: asm volatile("cp.async.wait_group 6;\n" ::); break;
    }
}

static __device__ __forceinline__ void kg_ldsm4(unsigned addr, unsigned *r, const int trans)
{
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
}

/* d += a b for one m16n8k16 fragment (fp32 accumulators). */
static __device__ __forceinline__ void kg_mma16816(float *d, const unsigned *a, const unsigned *b, const int dt)
{
    if (dt == KG_DT_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* The swizzle of row r of a tile with cpr 16-byte chunks per row: the XOR
 * applied to its chunk index. Any 8 consecutive rows read at the same
 * logical chunk then cover the 8 16-byte bank groups of a 128-byte line. */
static __device__ __forceinline__ int kg_gemm_swz(int r, const int cpr)
{
    if (cpr >= 8) return r & 7;
    if (cpr == 4) return (r >> 1) & 3;
    if (cpr == 2) return (r >> 2) & 1;
    return 0;
}

/* Byte offset of chunk ch of row r in a tile of w elements per row. */
static __device__ __forceinline__ unsigned kg_gemm_soff(int r, int ch, const int w)
{
    return (unsigned)(r * w * 2 + ((ch ^ kg_gemm_swz(r, w / 8)) << 4));
}

/* Byte offset of row r, element e (a multiple of 8) of an operand tile of
 * `rows` rows of w elements: row-major with swizzled 16-byte chunks
 * (atoms 0), or in 64-element-wide atoms of `rows` rows (atoms 1, the
 * MN-major layout kg_gemm_wg reads). */
static __device__ __forceinline__ unsigned kg_gemm_tile_off(int r, int e, const int rows, const int w, const int atoms)
{
    if (atoms) return (unsigned)(((e >> 6) * rows + r) * 128 + ((((e >> 3) & 7) ^ (r & 7)) << 4));
    return kg_gemm_soff(r, e >> 3, w);
}

/* Issues the copies of one operand's k-tile into the stage at dst. The tile
 * is `rows` rows of w elements in the operand's global layout (rows along k
 * and w along m/n when MN-major, the other way round when K-major); x points
 * at its element (0, 0) and row r, element e is x[r * ld + e], present when
 * r < rows_left and e < cols_left. Thread t copies chunk t % (w / 8) of
 * rows t / (w / 8) + i n_threads / (w / 8): the row offsets, destinations
 * and m/n bounds do not change from one k-tile to the next, so after
 * inlining a k-tile costs an address add and a cp.async per chunk. */
static __device__ __forceinline__ void kg_gemm_tc_load(unsigned dst, const void *x, kg_i64 ld, int rows_left,
                                                       int cols_left, const int rows, const int w,
                                                       const int n_threads, const int atoms)
{
    const int cpr = w / 8, n_chunks = rows * cpr;
    const unsigned short *base = (const unsigned short *)x;
    if (n_threads % cpr == 0 && n_chunks % n_threads == 0) {
        const int step = n_threads / cpr, r0 = (int)threadIdx.x / cpr, e = (int)threadIdx.x % cpr * 8;
        const bool col_ok = e < cols_left;
#pragma unroll
        for (int i = 0; i < n_chunks / n_threads; i++) {
            int r = r0 + i * step;
            bool ok = col_ok && r < rows_left;
            kg_cp_async16(dst + kg_gemm_tile_off(r, e, rows, w, atoms), ok ? base + (kg_i64)r * ld + e : base, ok);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < (n_chunks + n_threads - 1) / n_threads; i++) {
        int c = (int)threadIdx.x + i * n_threads;
        if (c < n_chunks) {
            int r = c / cpr, e = c % cpr * 8;
            bool ok = r < rows_left && e < cols_left;
            kg_cp_async16(dst + kg_gemm_tile_off(r, e, rows, w, atoms), ok ? base + (kg_i64)r * ld + e : base, ok);
        }
    }
}

/* The copies of a convolution's k-tile of its im2col operand (kg_gemm_conv:
 * `rows` pixels from pixel p0 on, of `pixels`, by w of k, K-major) into
 * the stage at dst, as kg_gemm_tc_load copies a K-major operand: each
 * 16-byte chunk is 8 channels of one pixel at one tap, zero where the tap
 * falls in the padding or beyond the pixels or k. */
static __device__ __forceinline__ void kg_gemm_conv_load(const kg_gemm_args *g, const void *x_, unsigned dst, int p0,
                                                         int pixels, int k0, const int rows, const int w,
                                                         const int n_threads)
{
    const kg_gemm_conv *v = &g->cv;
    const int cpr = w / 8, n_chunks = rows * cpr, ohw = v->oh * v->ow;
    const unsigned short *x = (const unsigned short *)x_;
#pragma unroll
    for (int i = 0; i < (n_chunks + n_threads - 1) / n_threads; i++) {
        const int ch = (int)threadIdx.x + i * n_threads;
        if (ch < n_chunks) {
            const int r = ch / cpr, e = ch % cpr * 8, m = p0 + r, k = k0 + e;
            const int tap = k / v->c, c = k - tap * v->c, fh = tap / v->kw, fw = tap - fh * v->kw;
            const int img = m / ohw, p = m - img * ohw, oh = p / v->ow, ow = p - oh * v->ow;
            const int ih = oh * v->sh - v->ph + fh * v->dh, iw = ow * v->sw - v->pw + fw * v->dw;
            const bool ok = m < pixels && k < g->k && ih >= 0 && ih < v->h && iw >= 0 && iw < v->w;
            const kg_i64 at = (((kg_i64)img * v->h + ih) * v->w + iw) * v->c + c;
            kg_cp_async16(dst + kg_gemm_tile_off(r, e, rows, w, 0), ok ? x + at : x, ok);
        }
    }
}

/* Copies k-tile kt of A (bm x bk) and B (bk x bn) into their stages: the
 * operands as the layouts la / lb store them. atoms: MN-major tiles in
 * kg_gemm_wg's atom layout. */
static __device__ __forceinline__ void kg_gemm_load_ab(const kg_gemm_args *g, unsigned sa, unsigned sb, int m0, int n0,
                                                       int kt, const int bm, const int bn, const int bk,
                                                       const int n_threads, const int atoms)
{
    const unsigned short *a = (const unsigned short *)g->a, *b = (const unsigned short *)g->b;
    int k0 = kt * bk;
    if (g->conv == 1) kg_gemm_conv_load(g, a, sa, m0, g->m, k0, bm, bk, n_threads);
    else if (g->la == KG_GEMM_KMAJOR)
        kg_gemm_tc_load(sa, a + (kg_i64)m0 * g->lda + k0, g->lda, g->m - m0, g->k - k0, bm, bk, n_threads, 0);
    else
        kg_gemm_tc_load(sa, a + (kg_i64)k0 * g->lda + m0, g->lda, g->k - k0, g->m - m0, bk, bm, n_threads, atoms);
    if (g->conv == 2) kg_gemm_conv_load(g, b, sb, n0, g->n, k0, bn, bk, n_threads);
    else if (g->lb == KG_GEMM_KMAJOR)
        kg_gemm_tc_load(sb, b + (kg_i64)n0 * g->ldb + k0, g->ldb, g->n - n0, g->k - k0, bn, bk, n_threads, 0);
    else
        kg_gemm_tc_load(sb, b + (kg_i64)k0 * g->ldb + n0, g->ldb, g->k - k0, g->n - n0, bk, bn, n_threads, atoms);
}

/* Split-K across blocks, after the block's own k-tiles: slice 0's warps
 * write their accumulators (warp tile fragments, `at` = this lane's first
 * float, one float per lane per entry: coalesced) to the split's partial
 * tile of `tile` floats; the block counts itself in; the last block of the
 * tile gets, in acc, the sum of every split's partial in split order, and
 * true. Every thread of the block calls it (it synchronises). L2 only
 * (.cg): another SM's partials must not come from this SM's L1. */
static __device__ __forceinline__ bool kg_gemm_splitk_last(const kg_gemm_args *g,
                                                           float (*acc)[KG_GEMM_NI_MAX][4], const int mi_n,
                                                           const int ni_n, const int tile, int slice, int at,
                                                           const int n_threads)
{
    float *part = g->ws + (kg_i64)g->slot * g->splits * tile + at;
    if (slice == 0) {
        float *dst = part + (kg_i64)g->split * tile;
#pragma unroll
        for (int i = 0; i < mi_n; i++)
#pragma unroll
            for (int j = 0; j < ni_n; j++)
#pragma unroll
                for (int v = 0; v < 4; v++) kg_st_cg(dst + ((i * ni_n + j) * 4 + v) * 32, acc[i][j][v]);
    }
    if (!kg_splitk_arrive(g->sem + g->slot, g->splits, n_threads)) return false;
    if (slice == 0) {
        /* splits is a constant here: every load is issued before the sums
         * wait (a loop over the splits would wait one L2 trip per split) */
#pragma unroll
        for (int i = 0; i < mi_n; i++)
#pragma unroll
            for (int j = 0; j < ni_n; j++)
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const float *src = part + ((i * ni_n + j) * 4 + v) * 32;
                    float sum = kg_ld_cg(src);
#pragma unroll
                    for (int s = 1; s < g->splits; s++) sum += kg_ld_cg(src + (kg_i64)s * tile);
                    acc[i][j][v] = sum;
                }
    }
    return true;
}

/*
 * C tile (tm, tn) of g on tensor cores. bm x bn block tile, bk deep k-tiles,
 * wm x wn warp tiles (16 <= wm <= 64 in steps of 16, 16 <= wn <= 64 in steps
 * of 16), ks warp slices along k (bk / 16 divisible by ks), `stages` copy
 * stages (2..7). Threads: (bm / wm) (bn / wn) ks warps, the block's first
 * (warps beyond them may do other things, a producer warp's idle sm_80 image
 * or a persistent kernel's other threads: they take no part in its
 * barriers, kg_sync_n). Shared memory:
 * KG_GEMM_TC_SMEM(bm, bn, bk, ks, stages) bytes.
 */
static __device__ __forceinline__ void kg_gemm_tc(const kg_gemm_args *g, int tm, int tn, const int bm, const int bn,
                                                  const int bk, const int wm, const int wn, const int ks,
                                                  const int stages)
{
    const int warps_m = bm / wm, warps_n = bn / wn, slice_warps = warps_m * warps_n;
    const int n_threads = slice_warps * ks * 32;
    const int mi_n = wm / 16, ni_n = wn / 8, steps = bk / 16, slice_steps = steps / ks;
    const int a_bytes = bm * bk * 2, b_bytes = bn * bk * 2;
    const int a_kmaj = g->la == KG_GEMM_KMAJOR, b_kmaj = g->lb == KG_GEMM_KMAJOR;
    const int dt = g->dt_a;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int slice = warp / slice_warps, wi = warp % slice_warps;
    const int wrow = (wi / warps_n) * wm, wcol = (wi % warps_n) * wn;
    const int m0 = tm * bm, n0 = tn * bn;
    /* this split's k-tiles kt0 .. kt1 - 1 (all of them when splits == 1) */
    const int k_tiles = (g->k + bk - 1) / bk, k_per = (k_tiles + g->splits - 1) / g->splits;
    const int kt0 = g->split * k_per, kt1 = kt0 + k_per < k_tiles ? kt0 + k_per : k_tiles;
    const unsigned smem = kg_smem_addr(kg_smem);
    const unsigned smem_b = smem + stages * a_bytes;

    float acc[KG_GEMM_MI_MAX][KG_GEMM_NI_MAX][4];
#pragma unroll
    for (int i = 0; i < mi_n; i++)
#pragma unroll
        for (int j = 0; j < ni_n; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

#pragma unroll
    for (int s = 0; s < stages - 1; s++) {
        if (kt0 + s < kt1)
            kg_gemm_load_ab(g, smem + s * a_bytes, smem_b + s * b_bytes, m0, n0, kt0 + s, bm, bn, bk, n_threads, 0);
        kg_cp_async_commit();
    }

    const int j8 = lane >> 3, i8 = lane & 7;
    unsigned af[2][KG_GEMM_MI_MAX][4], bf[2][KG_GEMM_NI_MAX][2];
    int stage = 0;
#pragma unroll 1
    for (int kt = kt0; kt < kt1; kt++) {
        kg_cp_async_wait(stages - 2);
        kg_sync_n(n_threads);
        {
            int nk = kt + stages - 1, ns = stage == 0 ? stages - 1 : stage - 1;
            if (nk < kt1)
                kg_gemm_load_ab(g, smem + ns * a_bytes, smem_b + ns * b_bytes, m0, n0, nk, bm, bn, bk, n_threads, 0);
            kg_cp_async_commit();
        }
        const unsigned sa = smem + stage * a_bytes, sb = smem_b + stage * b_bytes;
        /* fragments of k16 step s into buffer s & 1, the next step's loads
         * issued before this step's mma */
#define KG_GEMM_TC_FRAGS(buf, step)                                                                             \
    do {                                                                                                        \
        int kk_ = slice * slice_steps + (step);                                                                 \
        _Pragma("unroll") for (int i = 0; i < mi_n; i++) {                                                      \
            unsigned ad_;                                                                                       \
            if (a_kmaj) ad_ = sa + kg_gemm_soff(wrow + i * 16 + (lane & 15), kk_ * 2 + (lane >> 4), bk);        \
            else ad_ = sa + kg_gemm_soff(kk_ * 16 + i8 + ((j8 >> 1) << 3), (wrow + i * 16) / 8 + (j8 & 1), bm); \
            kg_ldsm4(ad_, af[buf][i], !a_kmaj);                                                                 \
        }                                                                                                       \
        _Pragma("unroll") for (int p = 0; p < ni_n / 2; p++) {                                                  \
            unsigned bd_, r_[4];                                                                                \
            if (b_kmaj) bd_ = sb + kg_gemm_soff(wcol + p * 16 + i8 + ((j8 >> 1) << 3), kk_ * 2 + (j8 & 1), bk); \
            else bd_ = sb + kg_gemm_soff(kk_ * 16 + i8 + ((j8 & 1) << 3), (wcol + p * 16) / 8 + (j8 >> 1), bn); \
            kg_ldsm4(bd_, r_, !b_kmaj);                                                                         \
            bf[buf][2 * p][0] = r_[0];                                                                          \
            bf[buf][2 * p][1] = r_[1];                                                                          \
            bf[buf][2 * p + 1][0] = r_[2];                                                                      \
            bf[buf][2 * p + 1][1] = r_[3];                                                                      \
        }                                                                                                       \
    } while (0)
        KG_GEMM_TC_FRAGS(0, 0);
#pragma unroll
        for (int s = 0; s < slice_steps; s++) {
            if (s + 1 < slice_steps) KG_GEMM_TC_FRAGS((s + 1) & 1, s + 1);
#pragma unroll
            for (int i = 0; i < mi_n; i++)
#pragma unroll
                for (int j = 0; j < ni_n; j++) kg_mma16816(acc[i][j], af[s & 1][i], bf[s & 1][j], dt);
        }
#undef KG_GEMM_TC_FRAGS
        stage = stage == stages - 1 ? 0 : stage + 1;
    }
    kg_cp_async_wait(0);

    if (ks > 1) {
        /* slices 1.. hand their accumulators to slice 0 through shared
         * memory, one float per lane per entry: conflict-free */
        float *red = (float *)kg_smem;
        const int per_warp = mi_n * ni_n * 4;
        kg_sync_n(n_threads);
        if (slice > 0) {
            float *dst = red + ((slice - 1) * slice_warps + wi) * per_warp * 32 + lane;
#pragma unroll
            for (int i = 0; i < mi_n; i++)
#pragma unroll
                for (int j = 0; j < ni_n; j++)
#pragma unroll
                    for (int v = 0; v < 4; v++) dst[((i * ni_n + j) * 4 + v) * 32] = acc[i][j][v];
        }
        kg_sync_n(n_threads);
        if (slice == 0) {
#pragma unroll 1
            for (int s = 1; s < ks; s++) {
                const float *src = red + ((s - 1) * slice_warps + wi) * per_warp * 32 + lane;
#pragma unroll
                for (int i = 0; i < mi_n; i++)
#pragma unroll
                    for (int j = 0; j < ni_n; j++)
#pragma unroll
                        for (int v = 0; v < 4; v++) acc[i][j][v] += src[((i * ni_n + j) * 4 + v) * 32];
            }
        }
    }

    if (g->splits > 1 &&
        !kg_gemm_splitk_last(g, acc, mi_n, ni_n, bm * bn, slice, wi * mi_n * ni_n * 4 * 32 + lane, n_threads))
        return; /* not the last split of the tile (the whole block returns) */

    if (slice == 0) {
        const int gr = lane >> 2, gc = (lane & 3) * 2;
#pragma unroll
        for (int i = 0; i < mi_n; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int row = m0 + wrow + i * 16 + gr + h * 8;
                if (row < g->m) {
#pragma unroll
                    for (int j = 0; j < ni_n; j++)
                        kg_gemm_out2(g, row, n0 + wcol + j * 8 + gc, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                }
            }
    }
    /* the next rTask of this block refills the stages */
    kg_sync_n(n_threads);
}

/* Dynamic shared memory kg_gemm_tc needs (host and device agree). */
#define KG_GEMM_TC_SMEM(bm, bn, bk, ks, stages)                                                              \
    ((stages) * ((bm) + (bn)) * (bk) * 2 > ((ks) - 1) * (bm) * (bn) * 4 ? (stages) * ((bm) + (bn)) * (bk) * 2 \
                                                                        : ((ks) - 1) * (bm) * (bn) * 4)

/* ---- Hopper warpgroup MMA (sm_90a) -------------------------------------------------- */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* The accumulator operands of one wgmma: "+f"(d[0]) ... in runs of 8
 * (16 columns of n), and their names "%0, %1, ..." likewise. */
#define KG_WG_O4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KG_WG_O8(d, i) KG_WG_O4(d, i), KG_WG_O4(d, i + 4)
#define KG_WG_O16(d, i) KG_WG_O8(d, i), KG_WG_O8(d, i + 8)
#define KG_WG_O16Z(d) KG_WG_O16(d, 0)
#define KG_WG_O24(d) KG_WG_O16(d, 0), KG_WG_O8(d, 16)
#define KG_WG_O32(d) KG_WG_O16(d, 0), KG_WG_O16(d, 16)
#define KG_WG_O48(d) KG_WG_O32(d), KG_WG_O16(d, 32)
#define KG_WG_O64(d) KG_WG_O32(d), KG_WG_O16(d, 32), KG_WG_O16(d, 48)
#define KG_WG_O72(d) KG_WG_O64(d), KG_WG_O8(d, 64)
#define KG_WG_O96(d) KG_WG_O64(d), KG_WG_O16(d, 64), KG_WG_O16(d, 80)
#define KG_WG_O128(d) KG_WG_O64(d), KG_WG_O16(d, 64), KG_WG_O16(d, 80), KG_WG_O16(d, 96), KG_WG_O16(d, 112)
#define KG_WG_N0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define KG_WG_N1 "%8, %9, %10, %11, %12, %13, %14, %15"
#define KG_WG_N2 "%16, %17, %18, %19, %20, %21, %22, %23"
#define KG_WG_N3 "%24, %25, %26, %27, %28, %29, %30, %31"
#define KG_WG_N4 "%32, %33, %34, %35, %36, %37, %38, %39"
#define KG_WG_N5 "%40, %41, %42, %43, %44, %45, %46, %47"
#define KG_WG_N6 "%48, %49, %50, %51, %52, %53, %54, %55"
#define KG_WG_N7 "%56, %57, %58, %59, %60, %61, %62, %63"
#define KG_WG_N8 "%64, %65, %66, %67, %68, %69, %70, %71"
#define KG_WG_N9 "%72, %73, %74, %75, %76, %77, %78, %79"
#define KG_WG_N10 "%80, %81, %82, %83, %84, %85, %86, %87"
#define KG_WG_N11 "%88, %89, %90, %91, %92, %93, %94, %95"
#define KG_WG_N12 "%96, %97, %98, %99, %100, %101, %102, %103"
#define KG_WG_N13 "%104, %105, %106, %107, %108, %109, %110, %111"
#define KG_WG_N14 "%112, %113, %114, %115, %116, %117, %118, %119"
#define KG_WG_N15 "%120, %121, %122, %123, %124, %125, %126, %127"
#define KG_WG_R16 KG_WG_N0 ", " KG_WG_N1
#define KG_WG_R24 KG_WG_N0 ", " KG_WG_N1 ", " KG_WG_N2
#define KG_WG_R32 KG_WG_N0 ", " KG_WG_N1 ", " KG_WG_N2 ", " KG_WG_N3
#define KG_WG_R48 KG_WG_N0 ", " KG_WG_N1 ", " KG_WG_N2 ", " KG_WG_N3 ", " KG_WG_N4 ", " KG_WG_N5
#define KG_WG_R64 \
    KG_WG_N0 ", " KG_WG_N1 ", " KG_WG_N2 ", " KG_WG_N3 ", " KG_WG_N4 ", " \
    KG_WG_N5 ", " KG_WG_N6 ", " KG_WG_N7
#define KG_WG_R72 \
    KG_WG_N0 ", " KG_WG_N1 ", " KG_WG_N2 ", " KG_WG_N3 ", " KG_WG_N4 ", " \
    KG_WG_N5 ", " KG_WG_N6 ", " KG_WG_N7 ", " KG_WG_N8
#define KG_WG_R96 \
    KG_WG_N0 ", " KG_WG_N1 ", " KG_WG_N2 ", " KG_WG_N3 ", " KG_WG_N4 ", " \
    KG_WG_N5 ", " KG_WG_N6 ", " KG_WG_N7 ", " KG_WG_N8 ", " KG_WG_N9 ", " \
    KG_WG_N10 ", " KG_WG_N11
#define KG_WG_R128 \
    KG_WG_N0 ", " KG_WG_N1 ", " KG_WG_N2 ", " KG_WG_N3 ", " KG_WG_N4 ", " \
    KG_WG_N5 ", " KG_WG_N6 ", " KG_WG_N7 ", " KG_WG_N8 ", " KG_WG_N9 ", " \
    KG_WG_N10 ", " KG_WG_N11 ", " KG_WG_N12 ", " KG_WG_N13 ", " KG_WG_N14 ", " \
    KG_WG_N15

/* D += A B for one m64nNk16 step: A and B in shared memory (descriptors),
 * ta / tb 1 when the operand is MN-major. */
#define KG_WG_MMA(N, R, O, AB, P, TY, TA, TB)                                                                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY \
                 "." TY " {" R "}, " AB ", p, 1, 1, " #TA ", " #TB ";\n}\n"                                       \
                 : O(d)                                                                                       \
                 : "l"(da), "l"(db), "r"(1))
#define KG_WG_MMA_N(N, R, O, AB, P)                                                    \
    do {                                                                               \
        if (dt == KG_DT_BF16) {                                                        \
            if (ta) {                                                                  \
                if (tb) KG_WG_MMA(N, R, O, AB, P, "bf16", 1, 1);                       \
                else KG_WG_MMA(N, R, O, AB, P, "bf16", 1, 0);                          \
            } else {                                                                   \
                if (tb) KG_WG_MMA(N, R, O, AB, P, "bf16", 0, 1);                       \
                else KG_WG_MMA(N, R, O, AB, P, "bf16", 0, 0);                          \
            }                                                                          \
        } else {                                                                       \
            if (ta) {                                                                  \
                if (tb) KG_WG_MMA(N, R, O, AB, P, "f16", 1, 1);                        \
                else KG_WG_MMA(N, R, O, AB, P, "f16", 1, 0);                           \
            } else {                                                                   \
                if (tb) KG_WG_MMA(N, R, O, AB, P, "f16", 0, 1);                        \
                else KG_WG_MMA(N, R, O, AB, P, "f16", 0, 0);                           \
            }                                                                          \
        }                                                                              \
    } while (0)

/* n: 32, 48, 64, 96, 128, 144, 192 or 256 (what emit_gemm.c's tables use) */
static __device__ __forceinline__ void kg_wgmma(float *d, kg_u64 da, kg_u64 db, const int n, const int dt,
                                                const int ta, const int tb)
{
    if (n == 256) KG_WG_MMA_N(256, KG_WG_R128, KG_WG_O128, "%128, %129", "%130");
    else if (n == 192) KG_WG_MMA_N(192, KG_WG_R96, KG_WG_O96, "%96, %97", "%98");
    else if (n == 144) KG_WG_MMA_N(144, KG_WG_R72, KG_WG_O72, "%72, %73", "%74");
    else if (n == 128) KG_WG_MMA_N(128, KG_WG_R64, KG_WG_O64, "%64, %65", "%66");
    else if (n == 96) KG_WG_MMA_N(96, KG_WG_R48, KG_WG_O48, "%48, %49", "%50");
    else if (n == 64) KG_WG_MMA_N(64, KG_WG_R32, KG_WG_O32, "%32, %33", "%34");
    else if (n == 48) KG_WG_MMA_N(48, KG_WG_R24, KG_WG_O24, "%24, %25", "%26");
    else KG_WG_MMA_N(32, KG_WG_R16, KG_WG_O16Z, "%16, %17", "%18");
}

static __device__ __forceinline__ void kg_wg_arrive(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void kg_wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void kg_wg_wait(const int n)
{
    if (n == 0) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    else asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}

/* Keeps the compiler from moving reads or writes of the accumulators across
 * the asynchronous MMAs that own them meanwhile. */
static __device__ __forceinline__ void kg_wg_fence_acc(float *d, const int n)
{
#pragma unroll
    for (int i = 0; i < n; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* cp.async wrote the tiles through the generic proxy; wgmma reads them
 * through the async proxy. */
static __device__ __forceinline__ void kg_fence_proxy_async(void)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* Global memory another block wrote with generic stores, ordered before
 * this thread by a wait (an acquire, then the block's barrier), is read by
 * TMA copies through the async proxy: this fence orders them after it. */
static __device__ __forceinline__ void kg_fence_proxy_async_global(void)
{
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

/* A shared-memory matrix descriptor: start address, leading and stride
 * byte offsets, swizzle (1: 128-byte, 2: 64-byte). */
static __device__ __forceinline__ kg_u64 kg_wg_desc(unsigned addr, unsigned lbo, unsigned sbo, int swizzle)
{
    return (kg_u64)((addr & 0x3ffffu) >> 4) | ((kg_u64)((lbo >> 4) & 0x3fffu) << 16) |
           ((kg_u64)((sbo >> 4) & 0x3fffu) << 32) | ((kg_u64)swizzle << 62);
}

/* Descriptor of k16 step j of an operand tile at `tile` holding `rows`
 * rows (m or n) from `row0` on: K-major tiles are rows of bk elements
 * (128- or 64-byte swizzled rows, 8-row groups apart by 8 rows); MN-major
 * tiles are 64-wide atoms of bk k-rows (128-byte swizzle), atoms bk * 128
 * bytes apart along m/n, 8-row groups 1024 bytes apart along k. */
static __device__ __forceinline__ kg_u64 kg_wg_operand(unsigned tile, int kmajor, int row0, int j, const int bk)
{
    if (kmajor) return kg_wg_desc(tile + row0 * bk * 2 + j * 32, 16, 8 * bk * 2, bk == 64 ? 1 : 2);
    return kg_wg_desc(tile + (row0 / 64) * bk * 128 + j * 2048, bk * 128, 1024, 1);
}

/* Issues and commits one k-tile's MMAs: bk / 16 steps of this warpgroup's
 * 64 rows (of the tiles at sa and sb) into d. */
static __device__ __forceinline__ void kg_wg_ktile(float *d, const kg_gemm_args *g, unsigned sa, unsigned sb, int wg,
                                                   const int bn, const int bk)
{
    const int a_kmaj = g->la == KG_GEMM_KMAJOR, b_kmaj = g->lb == KG_GEMM_KMAJOR;
    kg_wg_arrive();
#pragma unroll
    for (int j = 0; j < bk / 16; j++)
        kg_wgmma(d, kg_wg_operand(sa, a_kmaj, wg * 64, j, bk), kg_wg_operand(sb, b_kmaj, 0, j, bk), bn, g->dt_a,
                 !a_kmaj, !b_kmaj);
    kg_wg_commit();
}

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

/* What the sm_80 image runs for kg_gemm_wg and kg_gemm_wgt: the bm / 16
 * warps as kg_gemm_tc warp tiles of at most 64 x 64, 4 along n (2 for
 * narrow tiles of one warpgroup), the rest along m; a tile whose bn is
 * not a multiple of 64 as strips of 48 columns (or one of 32). */
static __device__ __forceinline__ void kg_gemm_wg_on_tc(const kg_gemm_args *g, int tm, int tn, const int bm,
                                                        const int bn)
{
    const int warps = bm / 16, wn_warps = warps >= 8 || bn > 128 ? 4 : 2;
    if (bn % 64 == 0) kg_gemm_tc(g, tm, tn, bm, bn, 32, bm / (warps / wn_warps), bn / wn_warps, 1, 3);
    else if (bn % 48 == 0) /* 48, 96, 144: strips 48 wide, every warp 16 rows of one */
        for (int j = 0; j < bn / 48; j++) kg_gemm_tc(g, tm, tn * (bn / 48) + j, bm, 48, 32, 16, 48, 1, 3);
    else kg_gemm_tc(g, tm, tn, bm, bn, 32, 16, bn, 1, 3); /* 32 */
}

/*
 * C tile (tm, tn) of g with Hopper's warpgroup MMA (wgmma, sm_90a): bm / 64
 * warpgroups stacked along m, each computing 64 x bn (bn 64, 128, 192 or
 * 256) with one wgmma per k16 step; bk 64 (128-byte swizzle) or 32 (64-byte;
 * K-major operands only need it), `stages` (3..7) k-tiles in shared memory.
 * Every thread both copies (cp.async) and multiplies. Per k-tile: wait for
 * its copies, barrier, issue its MMAs, then issue the copies of k-tile
 * kt + stages - 2 into the stage of kt - 2 (whose MMAs every warpgroup
 * waited for before the barrier), then wait until only this k-tile's MMAs
 * are in flight: the tensor cores always have the next k-tile queued while
 * the threads copy. Threads: bm / 64 * 128; shared memory KG_GEMM_WG_SMEM.
 *
 * The sm_80 image of the same program has no wgmma: there it runs
 * kg_gemm_tc with the same threads in less shared memory.
 */
static __device__ __forceinline__ void kg_gemm_wg(const kg_gemm_args *g, int tm, int tn, const int bm, const int bn,
                                                  const int bk, const int stages)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int n_threads = bm / 64 * 128;
    const int a_bytes = bm * bk * 2, b_bytes = bn * bk * 2;
    const int wg = threadIdx.x >> 7, wq = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int m0 = tm * bm, n0 = tn * bn;
    const int k_tiles = (g->k + bk - 1) / bk;
    /* swizzle atoms are aligned to 1024 bytes (the launch asks 1 KB more) */
    const unsigned smem = (kg_smem_addr(kg_smem) + 1023u) & ~1023u;
    const unsigned smem_b = smem + stages * a_bytes;
    float d[128];
#pragma unroll
    for (int i = 0; i < bn / 2; i++) d[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < stages - 2; s++) {
        if (s < k_tiles) kg_gemm_load_ab(g, smem + s * a_bytes, smem_b + s * b_bytes, m0, n0, s, bm, bn, bk, n_threads, 1);
        kg_cp_async_commit();
    }
    int cs = 0, ls = stages - 2; /* the stages computed and refilled next */
    kg_wg_fence_acc(d, bn / 2);
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; kt++) {
        kg_cp_async_wait(stages - 3);
        kg_fence_proxy_async();
        kg_sync_n(n_threads);
        /* the MMAs first, so the tensor cores get them at once; then, while
         * they run, the copies into the stage of kt - 2, whose MMAs every
         * warpgroup has waited for before the barrier */
        kg_wg_ktile(d, g, smem + cs * a_bytes, smem_b + cs * b_bytes, wg, bn, bk);
        if (kt + stages - 2 < k_tiles)
            kg_gemm_load_ab(g, smem + ls * a_bytes, smem_b + ls * b_bytes, m0, n0, kt + stages - 2, bm, bn, bk,
                            n_threads, 1);
        kg_cp_async_commit();
        kg_wg_wait(1);
        kg_wg_fence_acc(d, bn / 2);
        cs = cs == stages - 1 ? 0 : cs + 1;
        ls = ls == stages - 1 ? 0 : ls + 1;
    }
    kg_wg_wait(0);
    kg_wg_fence_acc(d, bn / 2);
    kg_cp_async_wait(0);

    /* accumulator d[4 i + v] of warp wq, lane: row 16 wq + lane / 4 (+ 8 for
     * v >= 2), column 8 i + 2 (lane % 4) (+ 1 for odd v), as for mma.sync */
    const int row = m0 + wg * 64 + wq * 16 + (lane >> 2), col = n0 + (lane & 3) * 2;
#pragma unroll
    for (int h = 0; h < 2; h++)
        if (row + 8 * h < g->m) {
#pragma unroll
            for (int i = 0; i < bn / 8; i++) kg_gemm_out2(g, row + 8 * h, col + 8 * i, d[4 * i + 2 * h], d[4 * i + 2 * h + 1]);
        }
    kg_sync_n(n_threads);
#else
    kg_gemm_wg_on_tc(g, tm, tn, bm, bn);
#endif
}

/* Dynamic shared memory kg_gemm_wg asks (with 1 KB to align the stages). */
#define KG_GEMM_WG_SMEM(bm, bn, bk, stages) ((stages) * ((bm) + (bn)) * (bk) * 2 + 1024)

/* ---- warpgroup MMA fed by the tensor memory accelerator ------------------------------ */

/* Eight elements of C from fp32 values: one 16-byte store (two for float32 C). */
static __device__ __forceinline__ void kg_gemm_st8(void *p, kg_i64 i, const float *v, const int dt)
{
    if (dt == KG_DT_F32) {
        *(float4 *)((float *)p + i) = make_float4(v[0], v[1], v[2], v[3]);
        *(float4 *)((float *)p + i + 4) = make_float4(v[4], v[5], v[6], v[7]);
        return;
    }
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        if (dt == KG_DT_BF16) {
            __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
            w[e] = *(unsigned *)&h;
        } else {
            __half2 h = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
            w[e] = *(unsigned *)&h;
        }
    }
    *(uint4 *)((unsigned short *)p + i) = make_uint4(w[0], w[1], w[2], w[3]);
}

/* Writes the bm x bn tile of accumulators staged in shared memory (sp,
 * rows ld floats apart) to C at (m0, n0) through the epilogue: each thread
 * takes runs of 8 columns, so a warp's stores are whole 16-byte chunks of
 * consecutive columns (C's rows 16-byte aligned: n a multiple of 8); else
 * element by element, masked. */
static __device__ __forceinline__ void kg_gemm_store_staged(const kg_gemm_args *g, const float *sp, const int ld,
                                                            int m0, int n0, const int bm, const int bn,
                                                            const int n_threads)
{
    const int cpr = bn / 8;
    const bool vec = (g->n & 7) == 0 && (g->ldc & 7) == 0;
    /* Not unrolled: the loop body holds the epilogue (8 activations), and
     * unrolled 4 times it was half of a TMA product's code (BERT's first
     * MLP product 29.8 -> 13.2 KB of sm_90a code). A persistent kernel runs
     * each body once a layer, so the code is fetched cold unless a layer's
     * bodies fit the instruction cache: mono ViT-B/16 and BERT b16 ran 3-4%
     * faster on an H100, the kernels and waves schedules the same. The
     * unrolled loop did not overlap its loads anyway (the stores to C may
     * alias the bias and residual). */
#pragma unroll 1
    for (int i = threadIdx.x; i < bm * cpr; i += n_threads) {
        const int r = i / cpr, c8 = (i - r * cpr) * 8, row = m0 + r, col = n0 + c8;
        if (row >= g->m || col >= g->n) continue;
        const float4 x0 = *(const float4 *)(sp + r * ld + c8), x1 = *(const float4 *)(sp + r * ld + c8 + 4);
        float v[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const kg_i64 o = (kg_i64)row * g->ldc + col;
        if (vec) {
            /* a bias along the row and the residual: 8 values a load */
            float b[8], res[8];
            if (g->bias && g->bias_rs == 0 && g->bias_cs == 1) kg_gemm_ld8f(g->bias, col, g->dt_bias, b);
            else
#pragma unroll
                for (int e = 0; e < 8; e++) b[e] = kg_gemm_bias_at(g, row, col + e);
            if (g->res) kg_gemm_ld8f(g->res, (kg_i64)row * g->ldr + col, g->dt_res, res);
            else
#pragma unroll
                for (int e = 0; e < 8; e++) res[e] = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = kg_gemm_epi_of(g, v[e], b[e], res[e]);
            kg_gemm_st8(g->c, o, v, g->dt_c);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (col + e < g->n) kg_gemm_stf(g->c, o + e, kg_gemm_epi(g, row, col + e, v[e]), g->dt_c);
        }
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

static __device__ __forceinline__ void kg_mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* One arrival that also expects `bytes` of asynchronous copies. */
static __device__ __forceinline__ void kg_mbar_expect(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

static __device__ __forceinline__ void kg_mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Waits until the barrier's phase of this parity has completed. */
static __device__ __forceinline__ void kg_mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n.reg .pred done;\nKG_MBAR_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra KG_MBAR_WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* The box of tensor map `map` at element (c0 along the contiguous dim, c1)
 * into shared memory at dst, counted on barrier bar. */
static __device__ __forceinline__ void kg_tma_load(unsigned dst, const void *map, int c0, int c1, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];\n" ::"r"(dst),
                 "l"(map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* The im2col box of tensor map `map` (rt_gtmap im2col): the pixels from
 * input element (c, w, h, n) on, at filter offset (ow, oh), into shared
 * memory at dst, counted on bar; with mask, multicast into the blocks of
 * the cluster in it as kg_tma_load_mc does (mask 0: this block only). */
static __device__ __forceinline__ void kg_tma_load_im2col(unsigned dst, const void *map, int c, int w, int h, int n,
                                                          unsigned short ow, unsigned short oh, unsigned bar,
                                                          unsigned short mask)
{
    if (mask)
        asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     ".multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8}, %9;\n" ::"r"(dst),
                     "l"(map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(ow), "h"(oh), "h"(mask)
                     : "memory");
    else
        asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(dst),
                     "l"(map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(ow), "h"(oh)
                     : "memory");
}

/* The copy of a convolution's k-tile (64 channels of one tap: C is a
 * multiple of 64) of its im2col operand (g->conv) by map, for the pixels
 * from p0 on, into dst, counted on bar (mask: kg_tma_load_im2col's). The
 * box starts at the input pixel of p0's first tap; the filter offsets
 * move it to the k-tile's tap. */
static __device__ __forceinline__ void kg_gemm_tma_im2col(const kg_gemm_args *g, const void *map, unsigned dst,
                                                          unsigned bar, int p0, int k0, unsigned short mask)
{
    const kg_gemm_conv *v = &g->cv;
    const int tap = k0 / v->c, fh = tap / v->kw, ohw = v->oh * v->ow;
    const int img = p0 / ohw, p = p0 - img * ohw, oh = p / v->ow, ow = p - oh * v->ow;
    kg_tma_load_im2col(dst, map, k0 - tap * v->c, ow * v->sw - v->pw, oh * v->sh - v->ph, img,
                       (unsigned short)((tap - fh * v->kw) * v->dw), (unsigned short)(fh * v->dh), bar, mask);
}

/* ---- clusters of two blocks (kg_gemm_wgt_ws) ---- */

static __device__ __forceinline__ unsigned kg_cluster_rank(void)
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

/* Every thread of every block of the cluster: what each wrote before
 * (shared memory, barrier initialisations) is seen by the others after. */
static __device__ __forceinline__ void kg_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* The address of shared byte `addr` (this block's) in block `rank` of the cluster. */
static __device__ __forceinline__ unsigned kg_cluster_map(unsigned addr, unsigned rank)
{
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

/* kg_mbar_arrive on a barrier of another block (a kg_cluster_map address):
 * nothing comes back, so the arriving thread does not wait for the trip. */
static __device__ __forceinline__ void kg_mbar_arrive_remote(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* kg_tma_load into the same offset of shared memory of every block of the
 * cluster in `mask`, counted on the barrier at bar's offset in each. */
static __device__ __forceinline__ void kg_tma_load_mc(unsigned dst, const void *map, int c0, int c1, unsigned bar,
                                                      unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
}

/* The copies of k-tile kt (64 deep) of A into a stage at sa, counted on
 * bar: a K-major A as one box of 64 x rows, an MN-major one as 64 x 64
 * atoms (the layout kg_wg_operand describes; the tensor maps swizzle by
 * 128 bytes as the descriptors do). In a cluster of cn blocks sharing A
 * (kg_gemm_wgt_ws), the block of rank `rank` copies its 1 / cn of A's rows
 * into every block. */
static __device__ __forceinline__ void kg_gemm_tma_a(const kg_gemm_args *g, unsigned sa, unsigned bar, int m0, int kt,
                                                     const int bm, const int cn, unsigned rank)
{
    const int k0 = kt * 64;
    /* this block's part, rows rank * bm / cn on (all of it when cn is 1),
     * in a cluster multicast into both blocks */
    if (g->conv == 1)
        kg_gemm_tma_im2col(g, g->tma_a, sa + rank * (bm / cn) * 128, bar, m0 + (int)rank * (bm / cn), k0,
                           cn > 1 ? 3 : 0);
    else if (g->la == KG_GEMM_KMAJOR) {
        const unsigned dst = sa + rank * (bm / cn) * 128;
        if (cn > 1) kg_tma_load_mc(dst, g->tma_a, k0, m0 + (int)rank * (bm / cn), bar, 3);
        else kg_tma_load(dst, g->tma_a, k0, m0, bar);
    } else
#pragma unroll
        for (int i = 0; i < bm / 64 / cn; i++) {
            const int atom = (int)rank * (bm / 64 / cn) + i;
            if (cn > 1) kg_tma_load_mc(sa + atom * 8192, g->tma_a, m0 + 64 * atom, k0, bar, 3);
            else kg_tma_load(sa + atom * 8192, g->tma_a, m0 + 64 * atom, k0, bar);
        }
}

/* The copies of k-tile kt of B into a stage at sb, counted on bar, after
 * the arrival that expects the whole stage (A's bytes too, even in a
 * cluster where the other block copies part of A: bar completes only when
 * everything has landed). */
static __device__ __forceinline__ void kg_gemm_tma_b(const kg_gemm_args *g, unsigned sb, unsigned bar, int n0, int kt,
                                                     const int bm, const int bn)
{
    const int k0 = kt * 64;
    kg_mbar_expect(bar, (unsigned)((bm + bn) * 64 * 2));
    if (g->conv == 2) kg_gemm_tma_im2col(g, g->tma_b, sb, bar, n0, k0, 0);
    else if (g->lb == KG_GEMM_KMAJOR) kg_tma_load(sb, g->tma_b, k0, n0, bar);
    else
#pragma unroll
        for (int i = 0; i < bn / 64; i++) kg_tma_load(sb + i * 8192, g->tma_b, n0 + 64 * i, k0, bar);
}

/* Issues k-tile kt of A and B into one stage, counted on bar. */
static __device__ __forceinline__ void kg_gemm_tma_issue(const kg_gemm_args *g, unsigned sa, unsigned sb,
                                                         unsigned bar, int m0, int n0, int kt, const int bm,
                                                         const int bn, const int cn, unsigned rank)
{
    kg_gemm_tma_b(g, sb, bar, n0, kt, bm, bn);
    kg_gemm_tma_a(g, sa, bar, m0, kt, bm, cn, rank);
}

/* How many k-tiles of B a TMA template copies before griddepcontrol.wait:
 * on an H100, BERT b1 in waves took 486 / 482 us with none, 459 / 455 with
 * 1, 451 / 453 with 2 and 493 / 490 with all 12 (ViT 587 / 593, 564 /
 * 563, 559 / 569, 582 / 572): copying them all crowds out the kernel
 * before. Even with none, the rTask's set-up before the wait gains. */
#ifndef KG_GEMM_PRE_STAGES
#define KG_GEMM_PRE_STAGES 2
#endif

/* The epilogue's bias segment and residual rows of tile (m0, n0) asked
 * into this multiprocessor's L1 by the 32 lanes of one warp (lane = its
 * lane), once the rTask may read the residual: the staged epilogue's
 * loop (kg_gemm_store_staged) takes a thread's chunks one after another,
 * each load behind the store before it, so each chunk waited for an L2
 * round trip; from L1 they come back in a few tens of cycles. The copies
 * of the main loop bypass L1 and leave the lines there. KILN_EPI_TOUCH=0
 * defines KG_NO_EPI_TOUCH: not asked. */
static __device__ __forceinline__ void kg_gemm_epi_touch(const kg_gemm_args *g, int m0, int n0, const int bm,
                                                         const int bn, int lane)
{
#if !defined(KG_NO_EPI_TOUCH)
    const int cols = g->n - n0 < bn ? g->n - n0 : bn;
    if (g->bias && g->bias_rs == 0 && g->bias_cs == 1 && lane == 0) {
        const int es = g->dt_bias == KG_DT_F32 ? 4 : 2;
        for (int b = 0; b < cols * es; b += 128)
            asm volatile("prefetch.global.L1 [%0];" ::"l"((const char *)g->bias + (kg_i64)n0 * es + b));
    }
    if (g->res) {
        const int es = g->dt_res == KG_DT_F32 ? 4 : 2;
        for (int r = lane; r < bm && m0 + r < g->m; r += 32) {
            const char *row = (const char *)g->res + ((kg_i64)(m0 + r) * g->ldr + n0) * es;
            for (int b = 0; b < cols * es; b += 128) asm volatile("prefetch.global.L1 [%0];" ::"l"(row + b));
            /* the row may start inside a line: its last byte's line too */
            asm volatile("prefetch.global.L1 [%0];" ::"l"(row + cols * es - 1));
        }
    }
#endif
}

/* The first n stages' copies (k-tiles kt0 ..). With g->grid_dep the rTask
 * does griddepcontrol.wait here (the kernel's head left it out): B's first
 * KG_GEMM_PRE_STAGES k-tiles are copied before it, since no kernel writes
 * the weights, and so are on their way while the kernel before finishes;
 * the rest after, and A's tensor map is asked for before it. Thread
 * `issuer` copies. (Four warps issuing a stage each did not shorten the
 * 0.7 to 1.8 us BERT b1's rTasks take to issue their four stages in mono,
 * KILN_TRACE_GEMM; ViT went 693 / 684 -> 702 / 695 us on an H100.) */
static __device__ __forceinline__ void kg_gemm_tma_first(const kg_gemm_args *g, unsigned smem, unsigned smem_b,
                                                         unsigned full, int m0, int n0, int kt0, int n,
                                                         const int bm, const int bn, const int cn, unsigned rank,
                                                         int issuer)
{
    const int a_bytes = bm * 64 * 2, b_bytes = bn * 64 * 2;
    const int early = !g->grid_dep ? 0 : n < KG_GEMM_PRE_STAGES ? n : KG_GEMM_PRE_STAGES;
    if ((int)threadIdx.x == issuer) {
        if (g->grid_dep) kg_tmap_prefetch(g->tma_a); /* A's copies come after the wait */
        for (int s = 0; s < early; s++) kg_gemm_tma_b(g, smem_b + s * b_bytes, full + 8 * s, n0, kt0 + s, bm, bn);
    }
    if (g->grid_dep) kg_grid_dep();
    if ((int)threadIdx.x == issuer) {
        /* in a persistent kernel the operands come from earlier stages'
         * stores (griddepcontrol.wait orders a whole grid's instead) */
        if (!g->grid_dep) kg_fence_proxy_async_global();
        for (int s = 0; s < n; s++) {
            if (s >= early) kg_gemm_tma_b(g, smem_b + s * b_bytes, full + 8 * s, n0, kt0 + s, bm, bn);
            kg_gemm_tma_a(g, smem + s * a_bytes, full + 8 * s, m0, kt0 + s, bm, cn, rank);
        }
    }
    /* a warp other than the issuer's */
    if ((int)(threadIdx.x >> 5) == (issuer >> 5 ? 0 : 1)) kg_gemm_epi_touch(g, m0, n0, bm, bn, threadIdx.x & 31);
}

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* n accumulators set to zero, seen so by the MMAs that follow. */
static __device__ __forceinline__ void kg_wg_zero(float *d, const int n)
{
#pragma unroll
    for (int i = 0; i < n; i++) d[i] = 0.0f;
    kg_wg_fence_acc(d, n);
}

/* A TMA template's k-tile kt of k_tiles (64 deep, in stage kt % stages of
 * the A and B stages at smem and smem_b, landed on barrier full + 8 stage):
 * once its copies are in, this warpgroup issues its MMAs and waits for
 * those of the k-tile before. Returns that k-tile's stage when it is to be
 * refilled (with k-tile kt - 1 + stages), else -1. */
static __device__ __forceinline__ int kg_wgt_step(float *d, const kg_gemm_args *g, unsigned smem, unsigned smem_b,
                                                  unsigned full, int kt, int k_tiles, int wg, int a_bytes,
                                                  int b_bytes, const int bn, const int stages)
{
    const int cs = kt % stages;
    kg_mbar_wait(full + 8 * cs, (unsigned)(kt / stages) & 1u);
    kg_wg_ktile(d, g, smem + cs * a_bytes, smem_b + cs * b_bytes, wg, bn, 64);
    kg_wg_wait(1);
    kg_wg_fence_acc(d, bn / 2);
    return kt > 0 && kt - 1 + stages < k_tiles ? (kt - 1) % stages : -1;
}

/* The warpgroups' accumulators d, columns [8 i0, 8 i1) of the tile,
 * staged as floats ([bm][8 (i1 - i0) + 8]) in shared memory at smem (the
 * stages, free once every copy was waited for and every MMA has completed,
 * and once every thread is done with what an earlier call staged); returns
 * where. Threads beyond the warpgroups (a producer warp) stage nothing. */
static __device__ __forceinline__ float *kg_gemm_wgt_stage(const float *d, unsigned smem, const int bm,
                                                           const int n_threads, const int i0, const int i1)
{
    const int wg = threadIdx.x >> 7, wq = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    kg_sync_n(n_threads);
    float *sp = (float *)(kg_smem + (smem - kg_smem_addr(kg_smem)));
    const int ld = 8 * (i1 - i0) + 8, r0 = wg * 64 + wq * 16 + (lane >> 2), c0 = (lane & 3) * 2;
    if (wg < bm / 64)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int i = i0; i < i1; i++)
                *(float2 *)(sp + (r0 + 8 * h) * ld + c0 + 8 * (i - i0)) =
                    make_float2(d[4 * i + 2 * h], d[4 * i + 2 * h + 1]);
    return sp;
}

/* In how many parts (1 or 2, of bn / 2 columns each) kg_gemm_wgt_store
 * stages a bm x bn tile in the shared memory of `stages` k-tiles: a 192 x
 * 256 tile's floats (198 KB with the rows' padding) fill more than its
 * three stages (168 KB), its halves less. emit_gemm.c's stage_parts is
 * the same test, and offers no tile whose halves would not fit either. */
#define KG_GEMM_WGT_PARTS(bm, bn, stages) ((bm) * ((bn) + 8) * 4 > (stages) * ((bm) + (bn)) * 128 ? 2 : 1)

/* The epilogue of kg_gemm_wgt and kg_gemm_wgt_ws: d staged (in column
 * halves where the whole tile does not fit the stages), then all n_threads
 * threads store it through kg_gemm_store_staged. */
static __device__ __forceinline__ void kg_gemm_wgt_store(const kg_gemm_args *g, const float *d, unsigned smem,
                                                         int m0, int n0, const int bm, const int bn,
                                                         const int n_threads, const int stages)
{
    const int parts = KG_GEMM_WGT_PARTS(bm, bn, stages), w8 = bn / 8 / parts;
    if (bn % (8 * parts)) __trap(); /* halves of whole 8-column runs (stage_parts) */
#pragma unroll
    for (int p = 0; p < parts; p++) {
        float *sp = kg_gemm_wgt_stage(d, smem, bm, n_threads, p * w8, (p + 1) * w8);
        kg_sync_n(n_threads);
        kg_gemm_store_staged(g, sp, 8 * w8 + 8, m0, n0 + 8 * p * w8, bm, 8 * w8, n_threads);
    }
}

/* Four floats of another block's shared memory (a kg_cluster_map address). */
static __device__ __forceinline__ float4 kg_ld_cluster_f4(unsigned addr)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}

/* The epilogue of kg_gemm_wgt's splits when they are the blocks of one
 * cluster (g->csum: KG_CLUSTER(g->splits), the rTasks of a tile on
 * consecutive blocks, so split s is the cluster's rank s): each block
 * stages its whole partial tile in its shared memory (kg_gemm_wgt_stage;
 * emit_gemm.c offers no half-staged tile here);
 * after a cluster barrier, block s sums rows [s bm / S, (s + 1) bm / S) of
 * every block's partial (distributed shared memory) in split order, the
 * same sums in the same order as through the workspace, and stores those
 * rows through the epilogue. It leaves once no block reads its partial
 * any more (a second barrier, arrived at before its stores). No
 * workspace, no counter, no fence to global memory, and the epilogue's
 * rows spread over the cluster's blocks. */
static __device__ __forceinline__ void kg_gemm_wgt_csum(const kg_gemm_args *g, const float *d, unsigned smem,
                                                        int m0, int n0, const int bm, const int bn,
                                                        const int n_threads)
{
    float *sp = kg_gemm_wgt_stage(d, smem, bm, n_threads, 0, bn / 8);
    kg_cluster_sync(); /* every block's partial is staged */
    const int splits = g->splits, ld = bn + 8, c4 = bn / 4;
    const int lo = g->split * bm / splits, hi = (g->split + 1) * bm / splits;
#pragma unroll 1
    for (int i = threadIdx.x; i < (hi - lo) * c4; i += n_threads) {
        const int r = lo + i / c4, col = (i - (r - lo) * c4) * 4;
        const unsigned at = smem + (unsigned)(r * ld + col) * 4u;
        float4 sum = kg_ld_cluster_f4(kg_cluster_map(at, 0u));
        for (int s = 1; s < splits; s++) {
            const float4 p = kg_ld_cluster_f4(kg_cluster_map(at, (unsigned)s));
            sum.x += p.x;
            sum.y += p.y;
            sum.z += p.z;
            sum.w += p.w;
        }
        *(float4 *)(sp + r * ld + col) = sum; /* only this block reads these rows */
    }
    __syncwarp(); /* the loop's trips differ within a warp; the arrival is .aligned */
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    kg_sync_n(n_threads);
    kg_gemm_store_staged(g, sp + lo * ld, ld, m0 + lo, n0, hi - lo, bn, n_threads);
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    kg_sync_n(n_threads); /* and this block's threads are done with sp: the next rTask refills it */
}
#endif

/*
 * kg_gemm_wg with its k-tiles (64 deep) copied by the tensor memory
 * accelerator: one thread issues a stage's copies (a box per operand, or
 * per 64-wide atom of an MN-major one), which complete on the stage's
 * `full` barrier with the bytes they wrote, so no thread computes an
 * address or waits for its own copies. Per k-tile every warpgroup waits
 * for `full`, issues its MMAs, and waits until only these are in flight;
 * then each warp counts itself done with the previous stage, and the
 * last warp to do so refills that stage with the k-tile `stages` further
 * on: no warp waits for another (as when thread 0 waited for every warp
 * and its warpgroup's next MMAs with it; measured the same to 3% on BERT's
 * products). Rows and k beyond the matrix come in as zeros (the
 * maps' bounds). With g->splits > 1 the block computes split g->split of
 * the k-tiles and the last split of the tile sums the partials (as
 * kg_gemm_tc does). The tensor maps (g->tma_a, g->tma_b) describe A and B
 * with the boxes kg_gemm_tma_issue loads; emit_gemm.c makes them. bn is
 * one of kg_wgmma's widths, a multiple of 64 when B is MN-major (64-wide
 * atoms); a K-major B takes any (32, 48, 96, 144: tiles that divide
 * BERT's 768, 2304 and 3072 columns into about as many tiles as there
 * are multiprocessors, or twice as many). Threads:
 * bm / 64 * 128; shared memory KG_GEMM_WGT_SMEM. Shared memory may hold
 * what another rOperator of the same block wrote with ordinary stores
 * (--schedule=mono), hence the proxy fence before the first copy.
 *
 * The sm_80 image runs kg_gemm_tc in its place, as kg_gemm_wg does.
 */
static __device__ __forceinline__ void kg_gemm_wgt(const kg_gemm_args *g, int tm, int tn, const int bm, const int bn,
                                                   const int stages)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#if defined(KG_TRACE_GEMM)
    const kg_u64 kgt0 = kg_now_ns();
    kg_u64 kgt1 = 0, kgt2 = 0, kgt3 = 0;
#endif
    const int bk = 64, n_warps = bm / 64 * 4, n_threads = n_warps * 32;
    const int a_bytes = bm * bk * 2, b_bytes = bn * bk * 2;
    const int wg = threadIdx.x >> 7, lane = threadIdx.x & 31;
    const int m0 = tm * bm, n0 = tn * bn;
    /* this split's k-tiles kt0 .. kt0 + k_tiles - 1 (all of them when splits == 1) */
    const int k_all = (g->k + bk - 1) / bk, k_per = (k_all + g->splits - 1) / g->splits;
    const int kt0 = g->split * k_per, k_tiles = kt0 + k_per < k_all ? k_per : k_all - kt0;
    const unsigned smem = (kg_smem_addr(kg_smem) + 1023u) & ~1023u;
    const unsigned smem_b = smem + stages * a_bytes;
    const unsigned full = smem_b + stages * b_bytes;
    /* per stage, how many warps are done with it (8 bytes apart) */
    unsigned *done = (unsigned *)(kg_smem + (full + 8 * stages - kg_smem_addr(kg_smem)));
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            kg_mbar_init(full + 8 * s, 1);
            done[2 * s] = 0u;
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    kg_fence_proxy_async();
    kg_sync_n(n_threads);
#if defined(KG_TRACE_GEMM)
    const kg_u64 kgti = kg_now_ns();
#endif
    kg_gemm_tma_first(g, smem, smem_b, full, m0, n0, kt0, stages < k_tiles ? stages : k_tiles, bm, bn, 1, 0u, 0);
#if defined(KG_TRACE_GEMM)
    kgt1 = kg_now_ns();
#endif
    float d[128];
    kg_wg_zero(d, bn / 2);
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; kt++) {
        const int ps = kg_wgt_step(d, g, smem, smem_b, full, kt, k_tiles, wg, a_bytes, b_bytes, bn, stages);
#if defined(KG_TRACE_GEMM)
        if (kt == 0) kgt2 = kg_now_ns();
#endif
        if (ps >= 0 && lane == 0) {
            /* k-tile kt - 1's MMAs are done in this warp; the last warp
             * done with its stage refills it (no warp waits for another) */
            __threadfence_block();
            if (atomicAdd(&done[2 * ps], 1u) == (unsigned)(n_warps - 1)) {
                done[2 * ps] = 0u;
                kg_gemm_tma_issue(g, smem + ps * a_bytes, smem_b + ps * b_bytes, full + 8 * ps, m0, n0,
                                  kt0 + kt - 1 + stages, bm, bn, 1, 0u);
            }
        }
        __syncwarp();
    }
    kg_wg_wait(0);
    kg_wg_fence_acc(d, bn / 2);
#if defined(KG_TRACE_GEMM)
    kgt3 = kg_now_ns();
#endif
    if (g->splits > 1 && g->csum) {
        kg_gemm_wgt_csum(g, d, smem, m0, n0, bm, bn, n_threads);
        return;
    }
    if (g->splits > 1) {
        /* split-K: every split writes its partial (accumulator i of thread
         * x at i * threads + x: coalesced) and counts itself in; the last
         * sums all of them in split order, so the result does not depend
         * on which split came last */
        const int tile = bm * bn;
        float *part = g->ws + (kg_i64)g->slot * g->splits * tile + threadIdx.x;
#pragma unroll
        for (int i = 0; i < bn / 2; i++) kg_st_cg(part + (kg_i64)g->split * tile + i * n_threads, d[i]);
        /* not the last split: the whole block returns */
        if (!kg_splitk_arrive(g->sem + g->slot, g->splits, n_threads)) return;
#pragma unroll
        for (int i = 0; i < bn / 2; i++) {
            float sum = kg_ld_cg(part + i * n_threads);
#pragma unroll
            for (int s = 1; s < g->splits; s++) sum += kg_ld_cg(part + (kg_i64)s * tile + i * n_threads);
            d[i] = sum;
        }
    }

    kg_gemm_wgt_store(g, d, smem, m0, n0, bm, bn, n_threads, stages);
    /* the next rTask re-initialises the barriers and refills the stages */
    kg_sync_n(n_threads);
#if defined(KG_TRACE_GEMM)
    /* KILN_TRACE_GEMM=1 kiln compile: where two blocks' rTasks spend their
     * time, in ns from the rTask's start (a diagnostic, printed each run) */
    if (threadIdx.x == 0 && (blockIdx.x == 0 || blockIdx.x == 77))
        printf("KGT b%d m%d n%d k%d bn%d sk%d tile %d,%d: set up %llu issued %llu first %llu loop %llu end %llu\n",
               blockIdx.x, g->m, g->n, g->k, bn, g->splits, tm, tn, kgti - kgt0, kgt1 - kgt0, kgt2 - kgt0,
               kgt3 - kgt0, kg_now_ns() - kgt0);
#endif
#else
    kg_gemm_wg_on_tc(g, tm, tn, bm, bn); /* kg_grid_dep is nothing before sm_90 */
#endif
}

/*
 * kg_gemm_wgt with a producer warp, alone (cn 1) or in clusters of two
 * blocks that share A's rows (cn 2): the cluster's block of rank r holds
 * tile (tm, tn) with tn % 2 == r (emit_gemm's raster). Each block copies
 * half of A's k-tile (bm / 2 rows), multicast into both blocks' shared
 * memory, and its own B: A crosses L2 once for the pair (cuBLAS runs
 * BERT's 2048 x 768 x 3072 on an H200 in 128 x 96 tiles in clusters of
 * two; there this is 11% faster than kg_gemm_wgt. Clusters of 2 x 2 that
 * also shared B ran twice as slow: taken out).
 *
 * The copies come from the block's last warp, not from the warpgroups: a
 * stage may be refilled only when both blocks are done with it, and a
 * warpgroup that waited for the other block would stall its own MMAs
 * (measured: 2.4x slower than unclustered when the last warp done counted
 * itself in the other block and issued the copies). Per stage: `full`
 * (the stage's bytes landed in this block) and `empty` (every warp of both
 * blocks is done with it: each warp arrives on both blocks' barriers).
 * Threads: bm / 64 * 128 + 32, the first of a wider block's when cn is 1
 * (narrow: only kg_sync_n over them). With cn 2: bm / 64 even when A is MN-major
 * (64-row atoms); a K-major A's tensor map boxes bm / 2 rows. No split-K;
 * the grid is whole clusters (KG_CLUSTER(cn)). Shared memory:
 * KG_GEMM_WGT_SMEM.
 *
 * The sm_80 image runs kg_gemm_tc in its place on the warpgroups' threads
 * (no clusters there: KG_CLUSTER).
 */
static __device__ __forceinline__ void kg_gemm_wgt_ws(const kg_gemm_args *g, int tm, int tn, const int bm,
                                                      const int bn, const int stages, const int cn)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int bk = 64, n_mma = bm / 64 * 128, n_warps = bm / 64 * 4;
    const int a_bytes = bm * bk * 2, b_bytes = bn * bk * 2;
    const int wg = threadIdx.x >> 7, lane = threadIdx.x & 31;
    const int m0 = tm * bm, n0 = tn * bn, k_tiles = (g->k + bk - 1) / bk;
    const unsigned smem = (kg_smem_addr(kg_smem) + 1023u) & ~1023u;
    const unsigned smem_b = smem + stages * a_bytes;
    const unsigned full = smem_b + stages * b_bytes, empty = full + 8 * stages;
    const unsigned rank = cn > 1 ? kg_cluster_rank() : 0u;
    if ((unsigned)(tn % cn) != rank) __trap(); /* emit_gemm's raster */
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            kg_mbar_init(full + 8 * s, 1);
            kg_mbar_init(empty + 8 * s, cn * n_warps);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    kg_fence_proxy_async();
    kg_sync_n(n_mma + 32); /* its own threads: alone it may be narrow */
    if (cn > 1) kg_cluster_sync(); /* the other block's barriers are initialised */
    const int first = stages < k_tiles ? stages : k_tiles;
    kg_gemm_tma_first(g, smem, smem_b, full, m0, n0, 0, first, bm, bn, cn, rank, n_mma);
    /* zeroed in the producer warp too: with its accumulators undefined on
     * that path, ptxas under a persistent kernel's register cap (168 at 384
     * threads) serialized the MMAs (C7511) */
    float d[128];
    kg_wg_zero(d, bn / 2);
    if (threadIdx.x >= n_mma) {
        if (threadIdx.x == n_mma) /* the producer: the stages after the first */
#pragma unroll 1
            for (int kt = first; kt < k_tiles; kt++) {
                const int s = kt % stages;
                kg_mbar_wait(empty + 8 * s, (unsigned)(kt / stages - 1) & 1u);
                kg_gemm_tma_issue(g, smem + s * a_bytes, smem_b + s * b_bytes, full + 8 * s, m0, n0, kt, bm, bn, cn,
                                  rank);
            }
    } else {
        const unsigned other_empty = cn > 1 ? kg_cluster_map(empty, rank ^ 1u) : 0u;
#pragma unroll 1
        for (int kt = 0; kt < k_tiles; kt++) {
            const int ps = kg_wgt_step(d, g, smem, smem_b, full, kt, k_tiles, wg, a_bytes, b_bytes, bn, stages);
            if (ps >= 0 && lane == 0) { /* k-tile kt - 1's MMAs are done in this warp */
                kg_mbar_arrive(empty + 8 * ps);
                if (cn > 1) kg_mbar_arrive_remote(other_empty + 8 * ps);
            }
            __syncwarp();
        }
        kg_wg_wait(0);
        kg_wg_fence_acc(d, bn / 2);
    }
    kg_gemm_wgt_store(g, d, smem, m0, n0, bm, bn, n_mma + 32, stages);
    /* neither block leaves (or re-initialises its barriers for the next
     * rTask) while the other may still arrive on them */
    kg_sync_n(n_mma + 32);
    if (cn > 1) kg_cluster_sync();
#else
    if ((int)threadIdx.x < bm / 64 * 128) kg_gemm_wg_on_tc(g, tm, tn, bm, bn); /* the producer warp idles */
#endif
}

/* Dynamic shared memory kg_gemm_wgt asks: the stages, 1 KB to align them,
 * and the barriers. */
#define KG_GEMM_WGT_SMEM(bm, bn, stages) ((stages) * ((bm) + (bn)) * 64 * 2 + 1024 + 16 * (stages))

/* ---- fp32 FMA template ------------------------------------------------------------ */

/*
 * C tile (tm, tn) of g with fp32 FMAs. bm x bn block tile (multiples of 16,
 * (bm / 8) (bn / 8) threads, at least 32), k-tiles of 8. Each thread owns
 * 8 x 8 outputs: rows 4 ty .. 4 ty + 3 and bm/2 + 4 ty .., columns alike,
 * read from shared memory as float4. A and B may have any layout, stride
 * and storage dtype; elements are converted to float as they are loaded.
 * Shared memory: KG_GEMM_SIMT_SMEM(bm, bn) bytes.
 */
static __device__ __forceinline__ void kg_gemm_simt(const kg_gemm_args *g, int tm, int tn, const int bm, const int bn)
{
    const int bk = 8, n_threads = (bm / 8) * (bn / 8);
    const int lda_s = bm + 4, ldb_s = bn + 4; /* padded: the transposing stores avoid bank conflicts */
    const int a_per = bm * bk / n_threads, b_per = bn * bk / n_threads;
    float *as = (float *)kg_smem, *bs = as + 2 * bk * lda_s;
    const int tid = threadIdx.x, tx = tid % (bn / 8), ty = tid / (bn / 8);
    const int m0 = tm * bm, n0 = tn * bn;
    const int k_tiles = (g->k + bk - 1) / bk;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

    /* element e of a k-tile: consecutive threads read along the operand's
     * contiguous dimension */
    float ra[16], rb[16];
#define KG_GEMM_SIMT_FETCH(kt)                                                                       \
    do {                                                                                             \
        int k0_ = (kt) * bk;                                                                         \
        _Pragma("unroll") for (int i = 0; i < a_per; i++) {                                          \
            int e = tid + i * n_threads;                                                             \
            int mm = g->la == KG_GEMM_KMAJOR ? e / bk : e % bm, kk = g->la == KG_GEMM_KMAJOR ? e % bk : e / bm; \
            int gm = m0 + mm, gk = k0_ + kk;                                                         \
            kg_i64 o = g->la == KG_GEMM_KMAJOR ? (kg_i64)gm * g->lda + gk : (kg_i64)gk * g->lda + gm; \
            ra[i] = gm < g->m && gk < g->k ? kg_gemm_ldf(g->a, o, g->dt_a) : 0.0f;                   \
        }                                                                                            \
        _Pragma("unroll") for (int i = 0; i < b_per; i++) {                                          \
            int e = tid + i * n_threads;                                                             \
            int nn = g->lb == KG_GEMM_KMAJOR ? e / bk : e % bn, kk = g->lb == KG_GEMM_KMAJOR ? e % bk : e / bn; \
            int gn = n0 + nn, gk = k0_ + kk;                                                         \
            kg_i64 o = g->lb == KG_GEMM_KMAJOR ? (kg_i64)gn * g->ldb + gk : (kg_i64)gk * g->ldb + gn; \
            rb[i] = gn < g->n && gk < g->k ? kg_gemm_ldf(g->b, o, g->dt_b) : 0.0f;                   \
        }                                                                                            \
    } while (0)
#define KG_GEMM_SIMT_STORE(buf)                                                                      \
    do {                                                                                             \
        _Pragma("unroll") for (int i = 0; i < a_per; i++) {                                          \
            int e = tid + i * n_threads;                                                             \
            int mm = g->la == KG_GEMM_KMAJOR ? e / bk : e % bm, kk = g->la == KG_GEMM_KMAJOR ? e % bk : e / bm; \
            as[((buf) * bk + kk) * lda_s + mm] = ra[i];                                              \
        }                                                                                            \
        _Pragma("unroll") for (int i = 0; i < b_per; i++) {                                          \
            int e = tid + i * n_threads;                                                             \
            int nn = g->lb == KG_GEMM_KMAJOR ? e / bk : e % bn, kk = g->lb == KG_GEMM_KMAJOR ? e % bk : e / bn; \
            bs[((buf) * bk + kk) * ldb_s + nn] = rb[i];                                              \
        }                                                                                            \
    } while (0)

    if (k_tiles > 0) {
        KG_GEMM_SIMT_FETCH(0);
        KG_GEMM_SIMT_STORE(0);
    }
    kg_sync_n(n_threads);
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; kt++) {
        int buf = kt & 1;
        if (kt + 1 < k_tiles) KG_GEMM_SIMT_FETCH(kt + 1);
        const float *a_s = as + buf * bk * lda_s, *b_s = bs + buf * bk * ldb_s;
#pragma unroll
        for (int k = 0; k < bk; k++) {
            float4 a0 = *(const float4 *)(a_s + k * lda_s + ty * 4);
            float4 a1 = *(const float4 *)(a_s + k * lda_s + bm / 2 + ty * 4);
            float4 b0 = *(const float4 *)(b_s + k * ldb_s + tx * 4);
            float4 b1 = *(const float4 *)(b_s + k * ldb_s + bn / 2 + tx * 4);
            float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        if (kt + 1 < k_tiles) KG_GEMM_SIMT_STORE(buf ^ 1);
        kg_sync_n(n_threads);
    }
#undef KG_GEMM_SIMT_FETCH
#undef KG_GEMM_SIMT_STORE

#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = m0 + (i < 4 ? ty * 4 + i : bm / 2 + ty * 4 + i - 4);
        if (row >= g->m) continue;
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            int col = n0 + (j < 4 ? tx * 4 + j : bn / 2 + tx * 4 + j - 4);
            kg_gemm_out2(g, row, col, acc[i][j], acc[i][j + 1]);
        }
    }
    /* the next rTask of this block overwrites the shared tiles */
    kg_sync_n(n_threads);
}

#define KG_GEMM_SIMT_SMEM(bm, bn) (2 * 8 * ((bm) + 4 + (bn) + 4) * 4)

/* ---- products of one row: kg_gemm_gemv ------------------------------------------------------ *
 *
 * C = A B for A of one row (a classifier's or a pooler's product at batch
 * 1; batches are separate rTasks), A and B K-major: B's bytes are the
 * work, each read once, so the template is a reduction, not a tiled MMA.
 * rTask tn's `warps` warps take `cols` columns each, j = (tn warps + warp)
 * cols on; a warp's lanes take K in 8-element chunks (lane 8 + 256 s),
 * `ahead` of a lane's chunks of every column loaded before their
 * multiply-adds (emit_gemm.c gemv_ahead: as many as the registers allow, up
 * to K's; ResNet-50's fc, K 2048, had 2 in flight and its rTasks waited on
 * 4 round trips, 5.4 us); each column is
 * summed across the lanes by shuffles and lane 0 stores it through the
 * epilogue. No shared memory; every GPU. (More rows re-read A for every
 * column: 8 x 3072 x 768 took 16.9 us against 4.2 for a kg_gemm_tc tile
 * on an H100.)
 */
#define KG_GEMV_COLS_MAX 2  /* emit_gemm.c GEMV_COLS_MAX */
#define KG_GEMV_AHEAD_MAX 8 /* emit_gemm.c GEMV_AHEAD_MAX */

/* Elements p[i .. i + 7] as floats, those at or past `left` as 0. */
static __device__ __forceinline__ void kg_gemv_ld8(const void *p, kg_i64 i, int left, const int dt, float *v)
{
    if (left >= 8) {
        kg_gemm_ld8f(p, i, dt, v);
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = e < left ? kg_gemm_ldf(p, i + e, dt) : 0.0f;
}

static __device__ __forceinline__ void kg_gemm_gemv(const kg_gemm_args *g, int tn, const int warps, const int cols,
                                                    const int ahead)
{
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const int j0 = (tn * warps + warp) * cols;
    float acc[KG_GEMV_COLS_MAX];
#pragma unroll
    for (int c = 0; c < KG_GEMV_COLS_MAX; c++) acc[c] = 0.0f;
#pragma unroll 1
    for (int k0 = lane * 8; k0 < g->k; k0 += 256 * ahead) {
        float a[KG_GEMV_AHEAD_MAX][8], b[KG_GEMV_AHEAD_MAX][KG_GEMV_COLS_MAX][8];
#pragma unroll
        for (int s = 0; s < ahead; s++) {
            const int k = k0 + 256 * s;
            if (k >= g->k) continue;
#pragma unroll
            for (int c = 0; c < cols; c++) {
                const int j = j0 + c < g->n ? j0 + c : g->n - 1; /* past n: a column read for nothing */
                kg_gemv_ld8(g->b, (kg_i64)j * g->ldb + k, g->k - k, g->dt_b, b[s][c]);
            }
            kg_gemv_ld8(g->a, k, g->k - k, g->dt_a, a[s]);
        }
        /* in k's order, as one chunk at a time would */
#pragma unroll
        for (int s = 0; s < ahead; s++) {
            if (k0 + 256 * s >= g->k) continue;
#pragma unroll
            for (int c = 0; c < cols; c++)
#pragma unroll
                for (int e = 0; e < 8; e++) acc[c] = fmaf(a[s][e], b[s][c][e], acc[c]);
        }
    }
#pragma unroll
    for (int c = 0; c < cols; c++) {
        const float v = kg_warp_sum(acc[c]);
        if (lane == 0 && j0 + c < g->n) kg_gemm_stf(g->c, j0 + c, kg_gemm_epi(g, 0, j0 + c, v), g->dt_c);
    }
}
