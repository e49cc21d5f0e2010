/*
 * kg_conv.cuh: the convolution and pooling templates of the cuda target
 * (Bolt 3.2: hardware-native templates instantiated per group, with the
 * epilogue fused). Activations are NCHW as the model has them (1-D
 * convolutions and pools run as H = 1), weights stay in their ONNX layout
 * [Cout][Cin/group][KH][KW] at their planned offset in the weights blob,
 * kg_conv_tc's rows of K % 8 != 0 padded with zeros to wld, a multiple of 8,
 * where the compiler could (emit_conv.c's kpad: 16-bit copies of 32-bit
 * weights have the room), so that they too come by cp.async.
 *
 *   kg_conv_tc     implicit GEMM on tensor cores, for 16-bit weights
 *                  (--precision fp16 / bf16): mma.sync m16n8k16 with fp32
 *                  accumulators, ldmatrix from XOR-swizzled shared memory,
 *                  a multistage pipeline (cp.async for the weights, and for
 *                  the activations of pointwise convolutions);
 *   kg_conv_simt   the same implicit GEMM in fp32 FMAs, double-buffered;
 *   kg_conv_dw     depthwise (group == C == K): one thread per output;
 *   kg_pool        MaxPool / AveragePool: one thread per output.
 *
 * GEMM view (per group g): M = N*OH*OW output pixels, N = K/group output
 * channels, K = Cin/group*KH*KW ordered (cin, kh, kw), so a weight row is
 * contiguous along K (16-byte cp.async when its length wld is a multiple of
 * 8) and the im2col rows of A are gathered on the fly, 16 bits at a time:
 * the lanes of a warp take consecutive pixels, so each gather instruction
 * reads along W. These scalar gathers bound the speed of a non-pointwise
 * convolution (each costs several L1 wavefronts), except where x is NHWC
 * (KG_CONV_NHWC, kg_conv_tc only): then K runs (kh, kw, cin) and A comes by
 * 16-byte cp.async like the weights.
 * Out-of-image taps, K past the end and pixels past M read as zero. An
 * rTask is one BM x BN output tile of one group; its threads are
 * (BM/WM) x (BN/WN) warps times KS k-slices: slice s computes the k16 steps
 * s, s + KS, ... of every stage, and the slices' partial tiles are summed
 * in a fixed order (an intra-block split-K: small late layers at batch 1
 * get more warps per SM without a workspace, and stay deterministic).
 * The epilogue goes through shared memory, so bias, residual, activation
 * and the store are coalesced along the pixels of NCHW.
 *
 * Parameterisation. C-style CUDA has no templates: each entry point is a
 * __forceinline__ function taking its tile sizes as arguments; the
 * generated op_<id> passes literals and a const kg_conv initialised from
 * literals, so after inlining every size is a compile-time constant: loops
 * unroll, divisions by W or KW become multiplications, and register arrays,
 * declared at their largest size (KG_CONV_MAX_*), keep only the elements a
 * configuration touches (ptxas reports no stack frame). The emitter
 * (emit_conv.c) only offers configurations within those bounds.
 */
#ifndef KILN_KG_CONV_CUH
#define KILN_KG_CONV_CUH

/* Storage dtypes of the tensors a template reads and writes. */
#define KG_CONV_F32 0
#define KG_CONV_F16 1
#define KG_CONV_BF16 2

/* Activation layouts. NHWC (Bolt 3.2.3): channels innermost, so 8 channels
 * of one pixel are one 16-byte copy. With x NHWC the GEMM's K runs
 * (kh, kw, cin) and the weights are stored [Cout][KH][KW][Cin/group]
 * (emit_conv.c cg_plan_conv_layouts plans both). A residual may be stored
 * either way too (a block output of ResNet is read as the next block's x
 * and as its residual). */
#define KG_CONV_NCHW 0
#define KG_CONV_NHWC 1

/* Epilogue activations: KG_ACT_* and kg_actf in kg_math.h, included before this file. */

/* Register arrays at their largest (see the parameterisation above). */
#define KG_CONV_MAX_MT 4    /* m16 tiles per warp: WM <= 64 */
#define KG_CONV_MAX_NT 8    /* n8 tiles per warp: WN <= 64 */
#define KG_CONV_MAX_LD 8    /* 16-byte chunks (tc) or elements (simt) a thread loads per stage and operand */
#define KG_CONV_MAX_ROWS 4  /* distinct pixels a thread gathers */
#define KG_CONV_MAX_RING 4  /* register sets of gathered elements in flight */
#define KG_CONV_MAX_TM 8    /* simt thread tile */
#define KG_CONV_MAX_TN 8

/* One convolution (or depthwise convolution) and its fused epilogue:
 * y = act(conv(x, w) + bias[k] + res). Leading pads only: the output size
 * already accounts for the trailing ones. */
typedef struct kg_conv {
    int n, c, h, w;             /* x: [N, C, H, W] */
    int k, oh, ow;              /* y: [N, K, OH, OW] */
    int kh, kw;                 /* kernel */
    int sh, sw, ph, pw, dh, dw; /* strides, leading pads, dilations */
    int groups;
    int wld;                    /* a weight row's length (K per output channel), rows padded to 8 by the compiler */
    int xl, yl, rl;             /* layouts of x, y, res: KG_CONV_NCHW or KG_CONV_NHWC (NHWC: kg_conv_tc only) */
    int xt, wt, yt, bt, rt;     /* storage dtypes (KG_CONV_*) of x, w, y, bias, res */
    int act;
    float alpha, beta;          /* activation parameters */
    const void *x, *wgt, *bias, *res; /* bias, res: 0 when absent */
    void *y;
} kg_conv;

/* ---- element access in any storage dtype ------------------------------------- */

static __device__ __forceinline__ float kg_conv_ldf(const void *p, int i, int dt)
{
    if (dt == KG_CONV_F16) return __half2float(((const __half *)p)[i]);
    if (dt == KG_CONV_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

/* The same through the read-only path, for x and the weights (which no
 * template writes; the residual may share the output's bytes). */
static __device__ __forceinline__ float kg_conv_ldgf(const void *p, int i, int dt)
{
    if (dt == KG_CONV_F16) return __half2float(__ushort_as_half(__ldg((const unsigned short *)p + i)));
    if (dt == KG_CONV_BF16) return __bfloat162float(__ushort_as_bfloat16(__ldg((const unsigned short *)p + i)));
    return __ldg((const float *)p + i);
}

static __device__ __forceinline__ void kg_conv_stf(void *p, int i, int dt, float v)
{
    if (dt == KG_CONV_F16) ((__half *)p)[i] = __float2half_rn(v);
    else if (dt == KG_CONV_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else ((float *)p)[i] = v;
}

/* Element i as the 16 bits of MMA input type mt (KG_CONV_F16 / BF16). */
static __device__ __forceinline__ unsigned short kg_conv_ld16(const void *p, int i, int dt, int mt)
{
    if (dt == mt) return __ldg((const unsigned short *)p + i);
    float v = kg_conv_ldgf(p, i, dt);
    if (mt == KG_CONV_F16) return __half_as_ushort(__float2half_rn(v));
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/* Whether 8 consecutive k of an im2col row (one cin, one kh, kw taps kj0 ..
 * kj0 + 7) are 8 consecutive elements of NCHW x, aligned to 8 elements and
 * all inside or all outside the image: kw a multiple of 8, unit dilation
 * along W, and strides, leading pad and W multiples of 8 (patch
 * embeddings: ViT's 16x16 convolution of stride 16). Their gathers then
 * read a vector each (kg_conv_ld16x8). Compile-time constant after inlining. */
static __device__ __forceinline__ bool kg_conv_row_vec(const kg_conv *p)
{
    return p->xl == KG_CONV_NCHW && p->kw % 8 == 0 && p->dw == 1 && p->sw % 8 == 0 && p->pw % 8 == 0 &&
           p->w % 8 == 0;
}

/* Elements i .. i + 7 of x (i a multiple of 8) as MMA type mt, into v[0..7]:
 * one 16-byte load when x is stored as mt, two of 4 floats from fp32. */
static __device__ __forceinline__ void kg_conv_ld16x8(const void *p, int i, int dt, int mt, unsigned short *v)
{
    if (dt == mt) {
        uint4 w = __ldg((const uint4 *)((const unsigned short *)p + i));
        v[0] = (unsigned short)w.x, v[1] = (unsigned short)(w.x >> 16), v[2] = (unsigned short)w.y;
        v[3] = (unsigned short)(w.y >> 16), v[4] = (unsigned short)w.z, v[5] = (unsigned short)(w.z >> 16);
        v[6] = (unsigned short)w.w, v[7] = (unsigned short)(w.w >> 16);
        return;
    }
    float f[8];
    if (dt == KG_CONV_F32) {
        float4 a = __ldg((const float4 *)p + i / 4), b = __ldg((const float4 *)p + i / 4 + 1);
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) f[e] = kg_conv_ldgf(p, i + e, dt);
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
        v[e] = mt == KG_CONV_F16 ? __half_as_ushort(__float2half_rn(f[e]))
                                 : __bfloat16_as_ushort(__float2bfloat16_rn(f[e]));
}

/* ---- tensor-core and async-copy instructions ------------------------------------- */

static __device__ __forceinline__ unsigned kg_conv_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, bypassing L1; zero-filled when !full. */
static __device__ __forceinline__ void kg_conv_cp16(unsigned dst, const void *src, bool full)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(full ? 16 : 0));
}

/* 4 or 8 bytes (bytes a constant after inlining), through L1. */
static __device__ __forceinline__ void kg_conv_cp_small(unsigned dst, const void *src, const int bytes, bool full)
{
    if (bytes == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(full ? 8 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(full ? 4 : 0));
}

static __device__ __forceinline__ void kg_conv_cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }

/* Waits until at most n committed groups are pending (n a constant after
 * inlining; the instruction takes an immediate). */
static __device__ __forceinline__ void kg_conv_cp_wait(int n)
{
    if (n <= 0) asm volatile("cp.async.wait_group 0;\n" ::);
    else if (n == 1) asm volatile("cp.async.wait_group 1;\n" ::);
    else if (n == 2) asm volatile("cp.async.wait_group 2;\n" ::);
    else asm volatile("cp.async.wait_group 3;\n" ::);
}

static __device__ __forceinline__ void kg_conv_ldsm_x4(unsigned addr, unsigned *r)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ void kg_conv_ldsm_x4_trans(unsigned addr, unsigned *r)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ void kg_conv_ldsm_x2(unsigned addr, unsigned *r)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

/* acc (16x8 fp32) += a (16x16, row) * b (16x8, col), in f16 or bf16. */
static __device__ __forceinline__ void kg_conv_mma(float *acc, const unsigned *a, const unsigned *b, int mt)
{
    if (mt == KG_CONV_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Position, in 16-byte chunks, of chunk `chunk` of row `row` in a tile of
 * rows of cpr chunks (cpr a power of two >= 2). The chunk index is XORed
 * with the row's 128-byte line, so the 8 rows an ldmatrix phase reads and
 * the 8 rows a quarter-warp stores hit 8 distinct bank groups. */
static __device__ __forceinline__ int kg_conv_swz(int row, int chunk, int cpr)
{
    if (cpr >= 8) return row * cpr + (chunk ^ (row & 7));
    int l = row * cpr + chunk;
    return (l & ~7) | ((l ^ (l >> 3)) & 7);
}

/* ---- shared pieces of the implicit GEMMs ------------------------------------------ */

/* The pixel a thread gathers for: where its image and channel group start
 * in x, and its window's top-left corner (past M, a row above every tap of
 * the window, so each reads zero). */
static __device__ __forceinline__ void kg_conv_pixel(const kg_conv *p, int g, int m, int *off, int *ih, int *iw)
{
    int ohw = p->oh * p->ow, cg = p->c / p->groups;
    if (m < p->n * ohw) {
        int img = m / ohw, pix = m - img * ohw;
        int oh = pix / p->ow, ow = pix - oh * p->ow;
        *off = p->xl == KG_CONV_NHWC ? img * p->h * p->w * p->c + g * cg : (img * p->c + g * cg) * p->h * p->w;
        *ih = oh * p->sh - p->ph;
        *iw = ow * p->sw - p->pw;
    } else {
        *off = 0;
        *ih = -1 - (p->kh - 1) * p->dh;
        *iw = 0;
    }
}

/* Element (pixel, k) of the im2col matrix, k = (cin, kh, kw) split by the
 * caller: 0 outside the image or past K (cin >= C/group). */
static __device__ __forceinline__ bool kg_conv_tap(const kg_conv *p, int off, int ih0, int iw0, int ci, int ki,
                                                   int kj, int *index)
{
    int ih = ih0 + ki * p->dh, iw = iw0 + kj * p->dw;
    *index = off + (ci * p->h + ih) * p->w + iw;
    return ci < p->c / p->groups && (unsigned)ih < (unsigned)p->h && (unsigned)iw < (unsigned)p->w;
}

/* The epilogue: ep holds ks partial tiles [ks][BN][ld] in fp32 (pixels
 * along rows); each thread sums them in slice order for its elements,
 * adds bias and residual, applies the activation and stores, consecutive
 * threads taking consecutive pixels (NCHW y) or channels (NHWC y), so the
 * stores are coalesced either way. */
static __device__ __forceinline__ void kg_conv_epilogue(const kg_conv *p, const float *ep, int ld, int tm, int tn,
                                                        int g, const int BM, const int BN, const int KS,
                                                        const int threads)
{
    const int ohw = p->oh * p->ow, mdim = p->n * ohw, kg = p->k / p->groups;
    const bool nhwc = p->yl == KG_CONV_NHWC;
#pragma unroll
    for (int i = 0; i < (BM * BN + threads - 1) / threads; i++) {
        int idx = (int)threadIdx.x + i * threads;
        int m = nhwc ? idx / BN : idx % BM, nn = nhwc ? idx % BN : idx / BM;
        int gm = tm * BM + m, gn = tn * BN + nn;
        if (nn < BN && m < BM && gm < mdim && gn < kg) {
            float v = 0.0f;
#pragma unroll
            for (int s = 0; s < KS; s++) v += ep[(s * BN + nn) * ld + m];
            int co = g * kg + gn, img = gm / ohw, pix = gm - img * ohw;
            int ci = (img * p->k + co) * ohw + pix, hi = gm * p->k + co; /* NCHW, NHWC */
            if (p->bias) v += kg_conv_ldf(p->bias, co, p->bt);
            if (p->res) v += kg_conv_ldf(p->res, p->rl == KG_CONV_NHWC ? hi : ci, p->rt);
            kg_conv_stf(p->y, nhwc ? hi : ci, p->yt, kg_actf(v, p->act, p->alpha, p->beta));
        }
    }
}

/* The tile of rTask t of the implicit GEMMs: t runs over tiles of M, then
 * tiles of N, then groups. */
static __device__ __forceinline__ void kg_conv_tile(const kg_conv *p, int t, const int BM, const int BN, int *tm,
                                                    int *tn, int *g)
{
    const int mdim = p->n * p->oh * p->ow, kg = p->k / p->groups;
    const int tiles_m = (mdim + BM - 1) / BM, tiles_n = (kg + BN - 1) / BN;
    *tm = t % tiles_m;
    *tn = (t / tiles_m) % tiles_n;
    *g = t / (tiles_m * tiles_n);
}

/* ---- tensor cores: kg_conv_tc ------------------------------------------------------ *
 *
 * Shared memory: ST stages of A [BM][BK] (pointwise: [BK][BM]) then B
 * [BN][BK] (16-bit, swizzled 16-byte chunks), reused after the main loop for
 * the KS fp32 partial tiles [BN][BM + 4]: max(ST (BM + BN) BK 2,
 * KS BN (BM + 4) 4) bytes, then with TAB the im2col table
 * (kg_conv_tab_build, 8 bytes for each k of K padded to whole stages). SK > 1 splits K across blocks
 * (kg.h's split-K: rTask t is split t % SK of tile t / SK, its partials in
 * ws and its counters in sem: the rOperator's place in the workspace), for
 * late layers whose tiles do not fill the GPU at batch 1. Threads: 32
 * (BM/WM) (BN/WN) KS. Needs BK/16 a multiple of KS, BM, BN, WM, WN, BK
 * powers of two with WM >= 16, WN >= 8, BK >= 16, at most KG_CONV_MAX_LD
 * chunks per thread and operand, 1 <= DA <= KG_CONV_MAX_RING.
 *
 * Pipeline. The weights of stage kt+ST-1 go by cp.async (16 bytes,
 * zero-filled past the edges) while stage kt is multiplied, when their rows
 * (wld) are multiples of 8, and so do the activations of pointwise
 * convolutions (kg_conv_pointwise_vec). The gathered activations (and
 * weights of unaligned rows) cannot: their 16-bit elements are scattered.
 * Each thread loads them into a ring of DA register sets, DA stages ahead,
 * and stores stage kt+1 into shared memory after multiplying stage kt, so
 * each load has DA stages of work to arrive in; the main loop is unrolled DA
 * times so that the ring is indexed by constants (registers, not local
 * memory).
 */

/* Which rows and 16-byte chunks of an operand tile a thread moves: rows
 * row0 + r * rstep (r < rpt), chunks kc0 + j * tpr (j < cpt, < BK/8). */
typedef struct kg_conv_ld {
    int rpt, cpt, row0, rstep, kc0, tpr;
} kg_conv_ld;

static __device__ __forceinline__ kg_conv_ld kg_conv_ld_map(int rows, int cpr, int threads, int tid)
{
    kg_conv_ld l;
    l.tpr = threads >= rows ? threads / rows : 1;
    l.rpt = threads >= rows ? 1 : rows / threads;
    l.cpt = cpr >= l.tpr ? cpr / l.tpr : 1;
    l.row0 = threads >= rows ? tid % rows : tid;
    l.rstep = threads;
    l.kc0 = threads >= rows ? tid / rows : 0;
    return l;
}

/* The im2col table of a gathered A (tab != 0: x NCHW, not kg_conv_row_vec):
 * entry k of K (padded to whole stages) is {where tap k lies from a
 * pixel's channel 0 at (ih0, iw0): (ci H + ki dh) W + kj dw, then ki dh |
 * kj dw << 16}; past K, row 0x7fff, past the image's last row from any
 * pixel's first (emit_conv.c tc_operands_of checks H + PH and H + 1 +
 * (KH - 1) DH against 0x7fff, and that the offsets fit in 15 bits). Built
 * by the block at the start of each rTask (after the previous rTask's
 * closing barrier), so a gathered element costs a shared-memory read, two
 * bounds checks and its load instead of two divisions and their products:
 * the scalar gathers of a convolution of few channels (a network's stem,
 * K = 3 KH KW) are what bounds its speed. */
static __device__ __forceinline__ void kg_conv_tab_build(const kg_conv *p, int2 *tab, int entries, int threads)
{
    const int khw = p->kh * p->kw, kdim = p->c / p->groups * khw;
    for (int k = threadIdx.x; k < entries; k += threads) {
        int ci = k / khw, rr = k - ci * khw, ki = rr / p->kw, kj = rr - ki * p->kw;
        tab[k] = k < kdim ? make_int2((ci * p->h + ki * p->dh) * p->w + kj * p->dw, ki * p->dh | (kj * p->dw) << 16)
                          : make_int2(0, 0x7fff);
    }
    __syncthreads();
}

/* Element (pixel, k) of the im2col matrix by the table's entry q (x, y as
 * kg_conv_tab_build packs them), as MMA type mt; 0 outside the image. */
static __device__ __forceinline__ unsigned short kg_conv_tab_ld(const kg_conv *p, int2 q, int off, int ih0, int iw0,
                                                                const int mt)
{
    int ih = ih0 + (q.y & 0xffff), iw = iw0 + (int)((unsigned)q.y >> 16);
    bool ok = (unsigned)ih < (unsigned)p->h && (unsigned)iw < (unsigned)p->w;
    return ok ? kg_conv_ld16(p->x, off + ih0 * p->w + iw0 + q.x, p->xt, mt) : (unsigned short)0;
}

/* Issues the loads of this thread's A chunks of stage kt (the im2col
 * gather) into v[chunk * 8 + e]; tab: the im2col table, or 0. */
static __device__ __forceinline__ void kg_conv_tc_gather_a(const kg_conv *p, int kt, const int BK, const int mt,
                                                           const kg_conv_ld *l, const int *off, const int *ih0,
                                                           const int *iw0, const int2 *tab, unsigned short *v)
{
    const int khw = p->kh * p->kw, cpr = BK / 8;
#pragma unroll
    for (int r = 0; r < l->rpt; r++) {
#pragma unroll
        for (int j = 0; j < l->cpt; j++) {
            int kc = l->kc0 + j * l->tpr;
            int k0 = kt * BK + kc * 8;
            unsigned short *ve = v + (r * l->cpt + j) * 8;
            if (tab) {
#pragma unroll
                for (int e = 0; e < 8; e += 2) {
                    /* two entries a 16-byte read (k0 is a multiple of 8) */
                    int4 q = kc < cpr ? *(const int4 *)(tab + k0 + e) : make_int4(0, 0x7fff, 0, 0x7fff);
                    ve[e] = kg_conv_tab_ld(p, make_int2(q.x, q.y), off[r], ih0[r], iw0[r], mt);
                    ve[e + 1] = kg_conv_tab_ld(p, make_int2(q.z, q.w), off[r], ih0[r], iw0[r], mt);
                }
                continue;
            }
            if (kg_conv_row_vec(p)) {
                int ci = k0 / khw, rr = k0 - ci * khw, ki = rr / p->kw, kj = rr - ki * p->kw, index;
                if (kc < cpr && kg_conv_tap(p, off[r], ih0[r], iw0[r], ci, ki, kj, &index))
                    kg_conv_ld16x8(p->x, index, p->xt, mt, ve);
                else
#pragma unroll
                    for (int e = 0; e < 8; e++) ve[e] = 0;
                continue;
            }
#pragma unroll
            for (int e = 0; e < 8; e++) {
                /* divisions by constants: multiplications, and no branch to diverge on */
                int k = k0 + e, ci = k / khw, rr = k - ci * khw, ki = rr / p->kw, kj = rr - ki * p->kw, index;
                bool ok = kc < cpr && kg_conv_tap(p, off[r], ih0[r], iw0[r], ci, ki, kj, &index);
                ve[e] = ok ? kg_conv_ld16(p->x, index, p->xt, mt) : (unsigned short)0;
            }
        }
    }
}

/* The same for weight rows whose chunks are not 16-byte aligned (wld % 8 !=
 * 0); wrow[r]: where row r starts, -1 past the group's channels. */
static __device__ __forceinline__ void kg_conv_tc_gather_b(const kg_conv *p, int kt, const int BK, const int mt,
                                                           const kg_conv_ld *l, const int *wrow, unsigned short *v)
{
    const int kdim = p->c / p->groups * p->kh * p->kw, cpr = BK / 8;
#pragma unroll
    for (int r = 0; r < l->rpt; r++) {
#pragma unroll
        for (int j = 0; j < l->cpt; j++) {
            int kc = l->kc0 + j * l->tpr;
            int k0 = kt * BK + kc * 8;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                bool ok = kc < cpr && wrow[r] >= 0 && k0 + e < kdim;
                v[(r * l->cpt + j) * 8 + e] = ok ? kg_conv_ld16(p->wgt, wrow[r] + k0 + e, p->wt, mt) : (unsigned short)0;
            }
        }
    }
}

/* Packs gathered elements into their swizzled 16-byte slots of tile. */
static __device__ __forceinline__ void kg_conv_tc_put(unsigned short *tile, const int BK, const kg_conv_ld *l,
                                                      const unsigned short *v)
{
#pragma unroll
    for (int r = 0; r < l->rpt; r++)
#pragma unroll
        for (int j = 0; j < l->cpt; j++) {
            int kc = l->kc0 + j * l->tpr;
            const unsigned short *q = v + (r * l->cpt + j) * 8;
            uint4 w;
            w.x = q[0] | ((unsigned)q[1] << 16);
            w.y = q[2] | ((unsigned)q[3] << 16);
            w.z = q[4] | ((unsigned)q[5] << 16);
            w.w = q[6] | ((unsigned)q[7] << 16);
            if (kc < BK / 8) *(uint4 *)(tile + kg_conv_swz(l->row0 + r * l->rstep, kc, BK / 8) * 8) = w;
        }
}

/* Requests the weight chunks of stage kt into tile by cp.async (rows of wld
 * % 8 == 0 elements: a chunk is in its row whole, past K it holds the
 * compiler's zero padding or is zero-filled). */
static __device__ __forceinline__ void kg_conv_tc_async_b(const kg_conv *p, int kt, unsigned short *tile,
                                                          const int BK, const kg_conv_ld *l, const int *wrow)
{
    const int kdim = p->c / p->groups * p->kh * p->kw, cpr = BK / 8;
#pragma unroll
    for (int r = 0; r < l->rpt; r++)
#pragma unroll
        for (int j = 0; j < l->cpt; j++) {
            int kc = l->kc0 + j * l->tpr, k0 = kt * BK + kc * 8;
            if (kc < cpr) {
                bool full = wrow[r] >= 0 && k0 < kdim;
                const unsigned short *src = (const unsigned short *)p->wgt + (full ? wrow[r] + k0 : 0);
                kg_conv_cp16(kg_conv_smem_addr(tile + kg_conv_swz(l->row0 + r * l->rstep, kc, cpr) * 8), src, full);
            }
        }
}

/* Pointwise convolutions (1x1, stride 1, no padding, x stored as the MMA
 * type) read A as a plain [C][H*W] matrix per image, contiguous along the
 * pixels: their A tiles go by cp.async too, pixels contiguous in shared
 * memory ([BK][BM], read by ldmatrix.trans), in vectors of 8, 4 or 2 pixels
 * as H*W allows (a vector never crosses an image). 0: gather instead. */
static __device__ __forceinline__ int kg_conv_pointwise_vec(const kg_conv *p, int mt)
{
    const int hw = p->oh * p->ow;
    if (p->kh != 1 || p->kw != 1 || p->sh != 1 || p->sw != 1 || p->ph != 0 || p->pw != 0 || p->oh != p->h ||
        p->ow != p->w || p->xt != mt || p->xl != KG_CONV_NCHW)
        return 0;
    return hw % 8 == 0 ? 8 : hw % 4 == 0 ? 4 : hw % 2 == 0 ? 2 : 0;
}

/* Requests this thread's A chunks of stage kt of a pointwise convolution:
 * 8 pixels (chunk mc of the tile's rows) of k rows kr0, kr0 + threads /
 * (BM/8), ...; src[s] / ok[s]: where vector s of the 8 pixels starts in x
 * (channel 0 of the group) and whether it is inside M. */
static __device__ __forceinline__ void kg_conv_tc_async_a(const kg_conv *p, int kt, unsigned short *tile,
                                                          const int BK, const int BM, const int threads,
                                                          const int V, int mc, int kr0, const int *src,
                                                          const int *ok)
{
    const int cpr = BM / 8, kstep = threads / cpr, hw = p->h * p->w, kdim = p->c / p->groups;
#pragma unroll
    for (int i = 0; i < (BK + kstep - 1) / kstep; i++) {
        int kr = kr0 + i * kstep, k = kt * BK + kr;
        if (kr < BK) {
            unsigned dst = kg_conv_smem_addr(tile + kg_conv_swz(kr, mc, cpr) * 8);
#pragma unroll
            for (int v = 0; v < 8 / V; v++) {
                bool full = ok[v] && k < kdim;
                const unsigned short *from = (const unsigned short *)p->x + (full ? src[v] + k * hw : 0);
                if (V == 8) kg_conv_cp16(dst, from, full);
                else kg_conv_cp_small(dst + v * V * 2, from, V * 2, full);
            }
        }
    }
}

/* Requests this thread's A chunks of stage kt when x is NHWC: a chunk is 8
 * channels of one tap of one pixel (K = (kh, kw, cin) and C/group a
 * multiple of 8), one 16-byte copy, zero-filled outside the image and
 * past K; rows as kg_conv_ld_map splits them, in [BM][BK] as the gathers
 * store them. off / ih0 / iw0: the rows' pixels (kg_conv_pixel). */
static __device__ __forceinline__ void kg_conv_tc_async_a_nhwc(const kg_conv *p, int kt, unsigned short *tile,
                                                               const int BK, const kg_conv_ld *l, const int *off,
                                                               const int *ih0, const int *iw0)
{
    const int cg = p->c / p->groups, kdim = cg * p->kh * p->kw, cpr = BK / 8;
#pragma unroll
    for (int r = 0; r < l->rpt; r++)
#pragma unroll
        for (int j = 0; j < l->cpt; j++) {
            int kc = l->kc0 + j * l->tpr, k0 = kt * BK + kc * 8;
            if (kc < cpr) {
                int tap = k0 / cg, ci = k0 - tap * cg, ki = tap / p->kw, kj = tap - ki * p->kw;
                int ih = ih0[r] + ki * p->dh, iw = iw0[r] + kj * p->dw;
                bool full = k0 < kdim && (unsigned)ih < (unsigned)p->h && (unsigned)iw < (unsigned)p->w;
                const unsigned short *src =
                    (const unsigned short *)p->x + (full ? off[r] + (ih * p->w + iw) * p->c + ci : 0);
                kg_conv_cp16(kg_conv_smem_addr(tile + kg_conv_swz(l->row0 + r * l->rstep, kc, cpr) * 8), src, full);
            }
        }
}

/* One k16 step of a warp: its WM x WN accumulators += A rows x B rows of
 * chunks 2 step, 2 step + 1 of the stage tiles ta, tb. */
static __device__ __forceinline__ void kg_conv_tc_step(const unsigned short *ta, const unsigned short *tb, int step,
                                                       int wm, int wn, int lane, const int BM, const int BK,
                                                       const int WM, const int WN, const int mt, const bool a_mn,
                                                       float (*acc)[KG_CONV_MAX_NT][4])
{
    const int MT = WM / 16, NT = WN / 8, cpr = BK / 8;
    unsigned af[KG_CONV_MAX_MT][4], bf[KG_CONV_MAX_NT][2];
#pragma unroll
    for (int i = 0; i < MT; i++) {
        if (a_mn) { /* [BK][BM]: lanes address k rows, the transposing load gives the row-major fragment */
            int krow = step * 16 + (lane & 7) + ((lane >> 4) << 3), chunk = (wm * WM + i * 16) / 8 + ((lane >> 3) & 1);
            kg_conv_ldsm_x4_trans(kg_conv_smem_addr(ta + kg_conv_swz(krow, chunk, BM / 8) * 8), af[i]);
        } else {
            int row = wm * WM + i * 16 + (lane & 15), chunk = step * 2 + (lane >> 4);
            kg_conv_ldsm_x4(kg_conv_smem_addr(ta + kg_conv_swz(row, chunk, cpr) * 8), af[i]);
        }
    }
#pragma unroll
    for (int j = 0; j + 1 < NT; j += 2) {
        int row = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3), chunk = step * 2 + ((lane >> 3) & 1);
        unsigned r4[4];
        kg_conv_ldsm_x4(kg_conv_smem_addr(tb + kg_conv_swz(row, chunk, cpr) * 8), r4);
        bf[j][0] = r4[0];
        bf[j][1] = r4[1];
        bf[j + 1][0] = r4[2];
        bf[j + 1][1] = r4[3];
    }
    if (NT & 1) {
        int row = wn * WN + (NT - 1) * 8 + (lane & 7), chunk = step * 2 + ((lane >> 3) & 1);
        kg_conv_ldsm_x2(kg_conv_smem_addr(tb + kg_conv_swz(row, chunk, cpr) * 8), bf[NT - 1]);
    }
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) kg_conv_mma(acc[i][j], af[i], bf[j], mt);
}

static __device__ __forceinline__ void kg_conv_tc(const kg_conv *p, int t, const int BM, const int BN,
                                                  const int BK, const int WM, const int WN, const int KS,
                                                  const int ST, const int DA, const int SK, const int TAB,
                                                  float *ws, unsigned *sem)
{
    const int mt = p->wt;
    const int threads = 32 * (BM / WM) * (BN / WN) * KS;
    const int kg = p->k / p->groups, kdim = p->c / p->groups * p->kh * p->kw;
    /* split-K across blocks: rTask t is split t % SK of tile t / SK, over k-tiles kt_begin .. kt_end - 1 */
    const int split = t % SK, slot = t / SK;
    t = slot;
    const int n_kt = (kdim + BK - 1) / BK, k_per = (n_kt + SK - 1) / SK;
    const int kt_begin = split * k_per, kt_end = kt_begin + k_per < n_kt ? kt_begin + k_per : n_kt;
    const bool bvec = p->wld % 8 == 0;
    const int stage = (BM + BN) * BK; /* 16-bit elements per stage */
    const int MT = WM / 16, NT = WN / 8;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    unsigned short *sm = (unsigned short *)kg_smem;
    int tm, tn, g;
    kg_conv_tile(p, t, BM, BN, &tm, &tn, &g);

    const kg_conv_ld la = kg_conv_ld_map(BM, BK / 8, threads, tid), lb = kg_conv_ld_map(BN, BK / 8, threads, tid);
    int a_off[KG_CONV_MAX_ROWS], a_ih[KG_CONV_MAX_ROWS], a_iw[KG_CONV_MAX_ROWS], b_row[KG_CONV_MAX_ROWS];
    /* pointwise: A by cp.async (src / ok of the thread's pixel vectors in a_off / a_ih) */
    const int pv = kg_conv_pointwise_vec(p, mt), a_mc = tid % (BM / 8), a_kr0 = tid / (BM / 8);
    /* NHWC x: A by cp.async as well, [BM][BK] (gathered: neither) */
    const bool xv = p->xl == KG_CONV_NHWC, gather = !pv && !xv;
    if (pv) {
        const int hw = p->h * p->w, cg = p->c / p->groups, mdim = p->n * hw;
#pragma unroll
        for (int v = 0; v < 8 / (pv ? pv : 8); v++) {
            int m = tm * BM + a_mc * 8 + v * pv, img = m / hw;
            a_ih[v] = m < mdim;
            a_off[v] = (img * p->c + g * cg) * hw + (m - img * hw);
        }
    } else {
#pragma unroll
        for (int r = 0; r < la.rpt; r++)
            kg_conv_pixel(p, g, tm * BM + la.row0 + r * threads, &a_off[r], &a_ih[r], &a_iw[r]);
    }
#pragma unroll
    for (int r = 0; r < lb.rpt; r++) {
        int co = tn * BN + lb.row0 + r * threads;
        b_row[r] = co < kg ? (g * kg + co) * p->wld : -1;
    }
    /* TAB: the im2col table after the pipeline's (and the partial tiles') bytes */
    const int pipe_bytes = ST * stage * 2, ep_bytes = KS * BN * (BM + 4) * 4;
    int2 *tab = TAB && gather && !kg_conv_row_vec(p)
                    ? (int2 *)(kg_smem + (pipe_bytes > ep_bytes ? pipe_bytes : ep_bytes))
                    : (int2 *)0;
    if (tab) kg_conv_tab_build(p, tab, n_kt * BK, threads);
    /* the ring: stage s's gathered elements in set s % DA */
    unsigned short a_v[KG_CONV_MAX_RING][KG_CONV_MAX_LD * 8], b_v[KG_CONV_MAX_RING][KG_CONV_MAX_LD * 8];

    float acc[KG_CONV_MAX_MT][KG_CONV_MAX_NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

    /* prologue: weights of stages 0 .. ST-2 requested, gathers of 0 .. DA-1 issued, stage 0 stored */
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        const int kt = kt_begin + s;
        unsigned short *at = sm + (kt % ST) * stage;
        if (pv && kt < kt_end) kg_conv_tc_async_a(p, kt, at, BK, BM, threads, pv, a_mc, a_kr0, a_off, a_ih);
        if (xv && kt < kt_end) kg_conv_tc_async_a_nhwc(p, kt, at, BK, &la, a_off, a_ih, a_iw);
        if (bvec && kt < kt_end) kg_conv_tc_async_b(p, kt, at + BM * BK, BK, &lb, b_row);
        kg_conv_cp_commit();
    }
#pragma unroll
    for (int s = 0; s < DA; s++) {
        if (kt_begin + s < kt_end) {
            if (gather) kg_conv_tc_gather_a(p, kt_begin + s, BK, mt, &la, a_off, a_ih, a_iw, tab, a_v[s]);
            if (!bvec) kg_conv_tc_gather_b(p, kt_begin + s, BK, mt, &lb, b_row, b_v[s]);
        }
    }
    if (gather) kg_conv_tc_put(sm + (kt_begin % ST) * stage, BK, &la, a_v[0]);
    if (!bvec) kg_conv_tc_put(sm + (kt_begin % ST) * stage + BM * BK, BK, &lb, b_v[0]);

    const int warps_mn = (BM / WM) * (BN / WN);
    const int ks = warp / warps_mn, wmn = warp % warps_mn;
    const int wm = wmn % (BM / WM), wn = wmn / (BM / WM);
    for (int kt0 = kt_begin; kt0 < kt_end; kt0 += DA) {
#pragma unroll
        for (int u = 0; u < DA; u++) {
            const int kt = kt0 + u;
            if (kt < kt_end) {
                kg_conv_cp_wait(ST - 2);
                __syncthreads();
                const int nb = kt + ST - 1;
                if (pv && nb < kt_end)
                    kg_conv_tc_async_a(p, nb, sm + (nb % ST) * stage, BK, BM, threads, pv, a_mc, a_kr0, a_off, a_ih);
                if (xv && nb < kt_end)
                    kg_conv_tc_async_a_nhwc(p, nb, sm + (nb % ST) * stage, BK, &la, a_off, a_ih, a_iw);
                if (bvec && nb < kt_end) kg_conv_tc_async_b(p, nb, sm + (nb % ST) * stage + BM * BK, BK, &lb, b_row);
                kg_conv_cp_commit();
                if (kt + DA < kt_end) {
                    if (gather) kg_conv_tc_gather_a(p, kt + DA, BK, mt, &la, a_off, a_ih, a_iw, tab, a_v[u]);
                    if (!bvec) kg_conv_tc_gather_b(p, kt + DA, BK, mt, &lb, b_row, b_v[u]);
                }
                const unsigned short *ta = sm + (kt % ST) * stage, *tb = ta + BM * BK;
#pragma unroll
                for (int s2 = 0; s2 < BK / 16 / KS; s2++)
                    kg_conv_tc_step(ta, tb, ks + s2 * KS, wm, wn, lane, BM, BK, WM, WN, mt, pv != 0, acc);
                if (kt + 1 < kt_end) {
                    unsigned short *next = sm + ((kt + 1) % ST) * stage;
                    if (gather) kg_conv_tc_put(next, BK, &la, a_v[(u + 1) % DA]);
                    if (!bvec) kg_conv_tc_put(next + BM * BK, BK, &lb, b_v[(u + 1) % DA]);
                }
            }
        }
    }
    kg_conv_cp_wait(0);
    __syncthreads();

    /* accumulators -> the partial tile of slice ks: [BN][BM + 4] fp32 */
    float *ep = (float *)kg_smem;
    const int ld = BM + 4;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) {
            int m = wm * WM + i * 16 + (lane >> 2), nn = wn * WN + j * 8 + 2 * (lane & 3);
            float *e0 = ep + (ks * BN + nn) * ld + m;
            e0[0] = acc[i][j][0];
            e0[ld] = acc[i][j][1];
            e0[8] = acc[i][j][2];
            e0[ld + 8] = acc[i][j][3];
        }
    __syncthreads();
    if (SK > 1) {
        /* the block's slices summed into its split's partial tile ([BN][BM]
         * in the workspace); the last split puts the sum of all of them in
         * slice 0 of ep */
        float *part = ws + (kg_i64)slot * SK * (BM * BN);
#pragma unroll
        for (int i = 0; i < (BM * BN + threads - 1) / threads; i++) {
            int idx = tid + i * threads;
            if (idx < BM * BN) {
                float v = 0.0f;
#pragma unroll
                for (int s = 0; s < KS; s++) v += ep[(s * BN + idx / BM) * ld + idx % BM];
                kg_st_cg(part + (kg_i64)split * (BM * BN) + idx, v);
            }
        }
        if (!kg_splitk_arrive(sem + slot, SK, blockDim.x)) return; /* the whole block: not the tile's last split */
#pragma unroll
        for (int i = 0; i < (BM * BN + threads - 1) / threads; i++) {
            int idx = tid + i * threads;
            if (idx < BM * BN) {
                float v = kg_ld_cg(part + idx);
#pragma unroll
                for (int s = 1; s < SK; s++) v += kg_ld_cg(part + (kg_i64)s * (BM * BN) + idx);
                ep[(idx / BM) * ld + idx % BM] = v;
            }
        }
        __syncthreads();
        kg_conv_epilogue(p, ep, ld, tm, tn, g, BM, BN, 1, threads);
    } else {
        kg_conv_epilogue(p, ep, ld, tm, tn, g, BM, BN, KS, threads);
    }
    __syncthreads(); /* the next rTask's prologue overwrites ep */
}

/* ---- fp32 FMAs: kg_conv_simt ----------------------------------------------------- *
 *
 * Shared memory: 2 stages of A [BK][BM] and B [BK][BN] (fp32; B's columns
 * XOR-swizzled by groups of 4 so that the transposing stores of weight rows
 * do not collide in banks), reused for the KS partial tiles:
 * max(2 BK (BM + BN) 4, KS BN (BM + 4) 4) bytes. Threads: (BM/TM) (BN/TN) KS,
 * each computing TM x TN outputs as TM/4 x TN/4 blocks of 4 x 4 spread over
 * the tile (float4 reads). Slice s takes the k rows s, s + KS, ... of a stage.
 * Loads go through a ring of DA register sets as in kg_conv_tc.
 */

static __device__ __forceinline__ int kg_conv_bswz(int kk, int nn, const int BN)
{
    const int lines = BN / 4 < 8 ? BN / 4 : 8;
    return nn ^ ((kk & (lines - 1)) << 2);
}

/* The simt loader: thread -> A elements (its pixel rows x k rows
 * k0, k0 + tpr, ...) and B elements (k column kk of channel rows n0,
 * n0 + nstep, ...) of stage kt, into registers. */
typedef struct kg_conv_simt_ld {
    int a_tpr, a_rpt, a_kpt, a_row0, a_k0;
    int b_npt, b_kk, b_n0, b_nstep;
} kg_conv_simt_ld;

static __device__ __forceinline__ void kg_conv_simt_load(const kg_conv *p, int kt, int tn, int g, const int BK,
                                                         const int BN, const kg_conv_simt_ld *l, const int *off,
                                                         const int *ih0, const int *iw0, float *a_reg, float *b_reg)
{
    const int kg = p->k / p->groups, khw = p->kh * p->kw, kdim = p->c / p->groups * khw;
#pragma unroll
    for (int r = 0; r < l->a_rpt; r++)
#pragma unroll
        for (int j = 0; j < l->a_kpt; j++) {
            int kk = l->a_k0 + j * l->a_tpr, k = kt * BK + kk;
            int ci = k / khw, rr = k - ci * khw, ki = rr / p->kw, kj = rr - ki * p->kw, index;
            bool ok = kk < BK && kg_conv_tap(p, off[r], ih0[r], iw0[r], ci, ki, kj, &index);
            a_reg[r * l->a_kpt + j] = ok ? kg_conv_ldgf(p->x, index, p->xt) : 0.0f;
        }
#pragma unroll
    for (int j = 0; j < l->b_npt; j++) {
        int nn = l->b_n0 + j * l->b_nstep, co = tn * BN + nn, k = kt * BK + l->b_kk;
        bool ok = nn < BN && co < kg && k < kdim;
        b_reg[j] = ok ? kg_conv_ldgf(p->wgt, (g * kg + co) * p->wld + k, p->wt) : 0.0f;
    }
}

static __device__ __forceinline__ void kg_conv_simt_put(float *ta, float *tb, const int BM, const int BN,
                                                        const int BK, const int threads, const kg_conv_simt_ld *l,
                                                        const float *a_reg, const float *b_reg)
{
#pragma unroll
    for (int r = 0; r < l->a_rpt; r++)
#pragma unroll
        for (int j = 0; j < l->a_kpt; j++) {
            int kk = l->a_k0 + j * l->a_tpr;
            if (kk < BK) ta[kk * BM + l->a_row0 + r * threads] = a_reg[r * l->a_kpt + j];
        }
#pragma unroll
    for (int j = 0; j < l->b_npt; j++) {
        int nn = l->b_n0 + j * l->b_nstep;
        if (nn < BN) tb[l->b_kk * BN + kg_conv_bswz(l->b_kk, nn, BN)] = b_reg[j];
    }
}

static __device__ __forceinline__ void kg_conv_simt(const kg_conv *p, int t, const int BM, const int BN,
                                                    const int BK, const int TM, const int TN, const int KS,
                                                    const int DA)
{
    const int threads = (BM / TM) * (BN / TN) * KS;
    const int kdim = p->c / p->groups * p->kh * p->kw;
    const int n_kt = (kdim + BK - 1) / BK;
    const int tid = threadIdx.x;
    float *as = (float *)kg_smem, *bs = as + 2 * BK * BM;
    int tm, tn, g;
    kg_conv_tile(p, t, BM, BN, &tm, &tn, &g);

    kg_conv_simt_ld l;
    l.a_tpr = threads >= BM ? threads / BM : 1;
    l.a_rpt = threads >= BM ? 1 : BM / threads;
    l.a_kpt = BK / l.a_tpr < 1 ? 1 : BK / l.a_tpr;
    l.a_row0 = threads >= BM ? tid % BM : tid;
    l.a_k0 = threads >= BM ? tid / BM : 0;
    l.b_npt = (BN * BK + threads - 1) / threads;
    l.b_kk = tid % BK;
    l.b_n0 = tid / BK;
    l.b_nstep = threads / BK;
    int a_off[KG_CONV_MAX_ROWS], a_ih[KG_CONV_MAX_ROWS], a_iw[KG_CONV_MAX_ROWS];
#pragma unroll
    for (int r = 0; r < l.a_rpt; r++)
        kg_conv_pixel(p, g, tm * BM + l.a_row0 + r * threads, &a_off[r], &a_ih[r], &a_iw[r]);
    /* the ring: stage s's loaded elements in set s % DA, as in kg_conv_tc */
    float a_reg[KG_CONV_MAX_RING][KG_CONV_MAX_LD], b_reg[KG_CONV_MAX_RING][KG_CONV_MAX_LD];

    const int per_slice = threads / KS;
    const int ks = tid / per_slice, ts = tid % per_slice;
    const int tx = ts % (BM / TM), ty = ts / (BM / TM);
    float acc[KG_CONV_MAX_TM][KG_CONV_MAX_TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

#pragma unroll
    for (int s = 0; s < DA; s++)
        if (s < n_kt) kg_conv_simt_load(p, s, tn, g, BK, BN, &l, a_off, a_ih, a_iw, a_reg[s], b_reg[s]);
    kg_conv_simt_put(as, bs, BM, BN, BK, threads, &l, a_reg[0], b_reg[0]);
    for (int kt0 = 0; kt0 < n_kt; kt0 += DA) {
#pragma unroll
        for (int u = 0; u < DA; u++) {
            const int kt = kt0 + u;
            if (kt < n_kt) {
                __syncthreads();
                if (kt + DA < n_kt)
                    kg_conv_simt_load(p, kt + DA, tn, g, BK, BN, &l, a_off, a_ih, a_iw, a_reg[u], b_reg[u]);
                const float *ta = as + (kt & 1) * BK * BM, *tb = bs + (kt & 1) * BK * BN;
#pragma unroll
                for (int k2 = 0; k2 < BK / KS; k2++) {
                    const int kk = ks + k2 * KS;
                    float a[KG_CONV_MAX_TM], b[KG_CONV_MAX_TN];
#pragma unroll
                    for (int v = 0; v < TM / 4; v++) {
                        float4 q = *(const float4 *)(ta + kk * BM + v * (BM * 4 / TM) + tx * 4);
                        a[v * 4] = q.x;
                        a[v * 4 + 1] = q.y;
                        a[v * 4 + 2] = q.z;
                        a[v * 4 + 3] = q.w;
                    }
#pragma unroll
                    for (int v = 0; v < TN / 4; v++) {
                        float4 q = *(const float4 *)(tb + kk * BN + kg_conv_bswz(kk, v * (BN * 4 / TN) + ty * 4, BN));
                        b[v * 4] = q.x;
                        b[v * 4 + 1] = q.y;
                        b[v * 4 + 2] = q.z;
                        b[v * 4 + 3] = q.w;
                    }
#pragma unroll
                    for (int i = 0; i < TM; i++)
#pragma unroll
                        for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
                }
                if (kt + 1 < n_kt)
                    kg_conv_simt_put(as + ((kt + 1) & 1) * BK * BM, bs + ((kt + 1) & 1) * BK * BN, BM, BN, BK,
                                     threads, &l, a_reg[(u + 1) % DA], b_reg[(u + 1) % DA]);
            }
        }
    }
    __syncthreads();

    float *ep = (float *)kg_smem;
    const int ld = BM + 4;
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int m = (i / 4) * (BM * 4 / TM) + tx * 4 + i % 4, nn = (j / 4) * (BN * 4 / TN) + ty * 4 + j % 4;
            ep[(ks * BN + nn) * ld + m] = acc[i][j];
        }
    __syncthreads();
    kg_conv_epilogue(p, ep, ld, tm, tn, g, BM, BN, KS, threads);
    __syncthreads();
}

/* ---- depthwise: kg_conv_dw ------------------------------------------------------------ *
 *
 * group == C == K: output (img, ch, oh, ow) reads one input plane with the
 * channel's KH x KW taps. rTask t covers ITEMS x blockDim.x consecutive
 * outputs in NCHW order (consecutive threads: consecutive ow).
 */
static __device__ __forceinline__ void kg_conv_dw(const kg_conv *p, int t, const int ITEMS)
{
    const int total = p->n * p->k * p->oh * p->ow;
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        int o = (t * ITEMS + it) * (int)blockDim.x + (int)threadIdx.x;
        if (o >= total) break;
        int ow = o % p->ow, r = o / p->ow, oh = r % p->oh, pl = r / p->oh, ch = pl % p->k;
        int ih0 = oh * p->sh - p->ph, iw0 = ow * p->sw - p->pw;
        int xb = pl * p->h * p->w, wb = ch * p->kh * p->kw;
        float acc = 0.0f;
#pragma unroll
        for (int ki = 0; ki < p->kh; ki++) {
            int ih = ih0 + ki * p->dh;
            if ((unsigned)ih >= (unsigned)p->h) continue;
#pragma unroll
            for (int kj = 0; kj < p->kw; kj++) {
                int iw = iw0 + kj * p->dw;
                if ((unsigned)iw < (unsigned)p->w)
                    acc = fmaf(kg_conv_ldgf(p->x, xb + ih * p->w + iw, p->xt),
                               kg_conv_ldgf(p->wgt, wb + ki * p->kw + kj, p->wt), acc);
            }
        }
        if (p->bias) acc += kg_conv_ldf(p->bias, ch, p->bt);
        if (p->res) acc += kg_conv_ldf(p->res, o, p->rt);
        kg_conv_stf(p->y, o, p->yt, kg_actf(acc, p->act, p->alpha, p->beta));
    }
}

/* ---- pooling: kg_pool ------------------------------------------------------------------- *
 *
 * Semantics of the reference interpreter (ir/interp_nn.c): MaxPool keeps
 * the first maximum (a NaN met first stays) and gives 0 for a window with
 * no input element; AveragePool divides by the taps inside the input, or
 * with count_include_pad by the taps inside the explicitly padded input
 * [-ph, h + pe_h) (a ceil_mode window hanging past it counts less).
 */
typedef struct kg_pool {
    int n, c, h, w;             /* x: [N, C, H, W] */
    int oh, ow;                 /* y: [N, C, OH, OW] */
    int kh, kw;
    int sh, sw, ph, pw, dh, dw; /* strides, leading pads, dilations */
    int pe_h, pe_w;             /* trailing pads (count_include_pad) */
    int is_max, count_include_pad;
    int xt, yt;
    const void *x;
    void *y;
} kg_pool;

static __device__ __forceinline__ void kg_pool_rtask(const kg_pool *p, int t, const int ITEMS)
{
    const int total = p->n * p->c * p->oh * p->ow;
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        int o = (t * ITEMS + it) * (int)blockDim.x + (int)threadIdx.x;
        if (o >= total) break;
        int ow = o % p->ow, r = o / p->ow, oh = r % p->oh, pl = r / p->oh;
        int ih0 = oh * p->sh - p->ph, iw0 = ow * p->sw - p->pw;
        int xb = pl * p->h * p->w;
        float acc = 0.0f;
        int count = 0, padded = 0;
#pragma unroll
        for (int ki = 0; ki < p->kh; ki++) {
            int ih = ih0 + ki * p->dh;
            bool in_h = (unsigned)ih < (unsigned)p->h;
            bool pad_h = ih >= -p->ph && ih < p->h + p->pe_h;
#pragma unroll
            for (int kj = 0; kj < p->kw; kj++) {
                int iw = iw0 + kj * p->dw;
                if (pad_h && iw >= -p->pw && iw < p->w + p->pe_w) padded++;
                if (!in_h || (unsigned)iw >= (unsigned)p->w) continue;
                float v = kg_conv_ldgf(p->x, xb + ih * p->w + iw, p->xt);
                if (p->is_max) acc = (count == 0 || v > acc) ? v : acc;
                else acc += v;
                count++;
            }
        }
        if (!p->is_max) acc = acc / (float)(p->count_include_pad ? padded : count);
        kg_conv_stf(p->y, o, p->yt, acc);
    }
}

#endif
