/*
 * emit_move.c: the `cuda` target's data-movement groups (one node each),
 * the same ops as the c target's: copies (Identity, Dropout, Reshape-likes
 * whose output is a graph output), Transpose, Concat, Split, Slice, Expand,
 * Tile, DepthToSpace, SpaceToDepth, Gather, Pad, the Reduce family and
 * ArgMax/ArgMin. target/move_params.c reads their parameters and turns the
 * copies into affine views; this file schedules them on thread blocks.
 *
 * Schedules (every rTask is one block's chunk of B threads, B = 256 or,
 * under --schedule=mono, the persistent kernel's block size, unless said):
 *   - copies: one thread per output element, or per 4/8/16-byte vector
 *     when the innermost dim is contiguous on both sides and aligned (model
 *     inputs and outputs are the caller's pointers, so only arena and
 *     weight values count as aligned); writes are
 *     coalesced (consecutive threads, consecutive outputs), index math is
 *     32-bit when the sizes allow, up to 4 elements per thread on large
 *     tensors. A copy whose destination's innermost dim is strided in the
 *     source (a transpose swapping the innermost dim) goes through 32x32
 *     shared-memory tiles padded by one element, so that reads and writes
 *     are both coalesced (when B's warps divide 32).
 *   - Gather: one thread per output element (or vector of a row); an index
 *     out of range records KG_FAULT_INDEX and writes zeros, never reading
 *     out of bounds.
 *   - Pad: one thread per output element.
 *   - Reduce*: along a contiguous innermost run, one warp per output (B / 32
 *     per rTask), or one block per output for long rows (1024 threads for
 *     very long ones when outputs are few, unless the kernel wants B);
 *     otherwise one thread per output looping over the reduced elements,
 *     consecutive threads reading consecutive addresses, or, when that
 *     leaves most of the GPU idle, B / 32 threads per output (one per
 *     warp; 32 outputs per rTask) whose partial results meet in shared
 *     memory. Floats accumulate in float (double for float64), integers
 *     exactly in 64 bits with the interpreter's wrapping.
 *   - ArgMax/ArgMin: a warp per output along a long innermost axis, else a
 *     thread per output scanning in order.
 *
 * Storage: elements move as raw bits of the storage size (so every dtype,
 * float16 and bfloat16 included, is bit-exact), except when the two sides
 * are stored differently (a float32 model input copied into a 16-bit arena
 * value under --precision fp16): then each element goes through float.
 */
#include "target/cuda/cuda-impl.h"
#include "target/move_params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MV_BLOCK 256         /* threads of an rTask (all but the long reductions), unless want_block says */
#define MV_SM_THREADS 2048   /* threads an SM holds at once, whatever the block size */
#define MV_MAX_UNROLL 4      /* elements (or vectors) per thread and rTask */
#define MV_TILE 32           /* transpose tiles: MV_TILE x MV_TILE, rows padded by one */
#define MV_TILE_MIN 16       /* both tiled dims at least this long, else the plain copy */
#define MV_WARP_ROW 32       /* a reduction over a contiguous run of this many: a warp per output */
#define MV_BLOCK_ROW 2048    /* ... of this many: a block per output */
#define MV_BIG_ROW 16384     /* ... of this many, with few outputs: a block of MV_BIG_BLOCK */
#define MV_BIG_BLOCK 1024
#define MV_ARG_WARP 64       /* ArgMax/ArgMin along an innermost axis this long: a warp per output */

/* ---- the op being emitted ---------------------------------------------------------- */

typedef struct move {
    cg_emitter *e;
    const ir_node *n;
    move_pieces pieces;
    int block;      /* threads per rTask: a multiple of 32 */
    int smem_bytes; /* the largest piece's */
    kiln_status st; /* a template that could not be included (cg_need said why) */
} move;

/* Takes ownership of code. */
static void add_piece(move *m, base_str *code, int64_t n_tasks) { move_pieces_add(&m->pieces, code, n_tasks); }

static bool placed(const move *m, const ir_value *v)
{
    return v && v->graph == m->e->g && m->e->p->place[v->id].loc != SCHED_LOC_NONE;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- small helpers -------------------------------------------------------------------- */

static const char *bits_type(size_t size)
{
    switch (size) {
    case 1: return "kg_u8";
    case 2: return "kg_u16";
    case 4: return "kg_u32";
    case 8: return "kg_u64";
    default: KILN_ASSERT(!"elements of 1, 2, 4 or 8 bytes (move_node_ok)"); return "kg_u8";
    }
}

/* The type moving vb bytes at once, and its zero. */
static const char *vec_type(int vb) { return vb == 16 ? "uint4" : vb == 8 ? "uint2" : bits_type((size_t)vb); }
static const char *vec_zero(int vb)
{
    return vb == 16 ? "make_uint4(0u, 0u, 0u, 0u)" : vb == 8 ? "make_uint2(0u, 0u)" : "0u";
}

static const char *bits_lit(size_t size, uint64_t b, char *buf, size_t n)
{
    snprintf(buf, n, "((%s)0x%llxull)", bits_type(size), (unsigned long long)b);
    return buf;
}

/* The storage bytes of one element of v. */
static size_t store_size(const cg_emitter *e, const ir_value *v) { return ir_dtype_size(cg_store(e, v)); }

/* The alignment (bytes, at most 16) of v's first element. Model inputs and
 * outputs are the caller's pointers: only their element size is sure. */
static int base_align(const cg_emitter *e, const ir_value *v)
{
    const sched_place *pl = &e->p->place[v->id];
    if (pl->loc != SCHED_LOC_ARENA && pl->loc != SCHED_LOC_WEIGHTS) return (int)store_size(e, v);
    int a = 16;
    while (a > 1 && pl->offset % (uint64_t)a) a /= 2;
    return a;
}

/* Warps of an rTask. */
static int warps_of(const move *m) { return m->block / 32; }

/* Elements (or vectors) per thread in an rTask: 1 while a tensor fills the
 * GPU only a few times (more blocks in flight), more once it is large. The
 * GPU's fill counts threads, so it does not depend on the block size. */
static int unroll_for(const move *m, int64_t units)
{
    int64_t resident = (int64_t)MV_SM_THREADS * (m->e->gpu.n_sms > 0 ? m->e->gpu.n_sms : 132);
    int64_t waves = units / resident;
    return waves >= 2 * MV_MAX_UNROLL ? MV_MAX_UNROLL : waves >= 4 ? 2 : 1;
}

/* The index types of generated loops: unsigned 32-bit coordinates and
 * signed 32-bit offsets when every linear index and offset stays below
 * 2^31, else 64-bit. */
typedef struct itypes {
    const char *it; /* coordinates, linear indices */
    const char *ot; /* element offsets (signed: Slice steps may be negative) */
} itypes;

static itypes itypes_for(int64_t most_index, int64_t most_offset)
{
    bool narrow = most_index < INT32_MAX && most_offset < INT32_MAX;
    return narrow ? (itypes){"kg_u32", "kg_i32"} : (itypes){"kg_i64", "kg_i64"};
}

/* The largest |offset| a view side reaches. */
static int64_t offset_bound(const move_view *v, const int64_t *str, int64_t off)
{
    int64_t b = off < 0 ? -off : off;
    for (int d = 0; d < v->rank; d++) b += (v->dims[d] - 1) * (str[d] < 0 ? -str[d] : str[d]);
    return b;
}

/* ... on either side of a copy. */
static int64_t view_bound(const move_view *v)
{
    return KILN_MAX(offset_bound(v, v->src_str, v->src_off), offset_bound(v, v->dst_str, v->dst_off));
}

/* The linear index of this thread's k-th unit in rTask u of `block` threads:
 * "const IT i = (IT)u * chunk + k * block + threadIdx.x;" inside a loop
 * over k when unroll > 1 (the caller closes it with close_units). */
static void open_units(base_str *s, const itypes *ty, int block, int unroll, int64_t units)
{
    if (unroll > 1) {
        base_str_printf(s, "        for (int k = 0; k < %d; k++) {\n", unroll);
        base_str_printf(s, "            const %s i = (%s)u * %d + k * %d + threadIdx.x;\n", ty->it, ty->it,
                        unroll * block, block);
        base_str_printf(s, "            if (i >= %lld) break;\n", (long long)units);
    } else {
        base_str_cat(s, "        {\n");
        base_str_printf(s, "            const %s i = (%s)u * %d + threadIdx.x;\n", ty->it, ty->it, block);
        base_str_printf(s, "            if (i >= %lld) return;\n", (long long)units);
    }
}

static void close_units(base_str *s) { base_str_cat(s, "        }\n"); }

/* sum_d i<d> * str[d] as an expression of type ot ("0" when empty). */
static void offset_expr(char *buf, size_t n, const itypes *ty, int r, const int64_t *str)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < r && k < n; d++) {
        if (str[d] == 0) continue;
        const char *plus = k ? " + " : "";
        if (str[d] == 1) k += (size_t)snprintf(buf + k, n - k, "%s(%s)i%d", plus, ty->ot, d);
        else k += (size_t)snprintf(buf + k, n - k, "%s(%s)i%d * %lld", plus, ty->ot, d, (long long)str[d]);
    }
    if (k == 0) snprintf(buf, n, "0");
}

static bool is_contiguous(int r, const int64_t *dims, const int64_t *str)
{
    int64_t c[MOVE_MAX_RANK];
    move_contiguous_strides(r, dims, c);
    for (int d = 0; d < r; d++)
        if (str[d] != c[d]) return false;
    return true;
}

/* A pointer expression to v's storage plus off elements, viewed as
 * `type` (the raw bits of elements or vectors). */
static void ptr_expr(const cg_emitter *e, const ir_value *v, int64_t off, const char *type, bool is_const, char *buf,
                     size_t n)
{
    char p[200], o[48] = "";
    cg_ptr(e, v, p, sizeof p);
    if (off) snprintf(o, sizeof o, " + %lld", (long long)off);
    snprintf(buf, n, "((%s%s *)(%s%s))", is_const ? "const " : "", type, p, o);
}

/* ---- copies ---------------------------------------------------------------------------- */

/* The widest vector (16, 8 or 4 bytes, two elements at least) that moves
 * the view's innermost runs in whole aligned vectors; 0 for none. */
static int vector_bytes(const cg_emitter *e, const ir_value *src, const ir_value *dst, const move_view *v, size_t es)
{
    int r = v->rank;
    if (v->src_str[r - 1] != 1 || v->dst_str[r - 1] != 1) return 0;
    for (int vb = 16; vb >= 4; vb /= 2) {
        int64_t k = vb / (int64_t)es;
        if (k < 2 || base_align(e, src) % vb || base_align(e, dst) % vb) continue;
        bool ok = v->dims[r - 1] % k == 0 && v->src_off % k == 0 && v->dst_off % k == 0;
        for (int d = 0; d < r - 1 && ok; d++) ok = v->src_str[d] % k == 0 && v->dst_str[d] % k == 0;
        if (ok) return vb;
    }
    return 0;
}

/* The dim of a collapsed view to tile with the innermost one: the
 * destination walks the innermost dim contiguously while the source walks
 * dim a contiguously and the innermost dim with a stride; -1 for none. */
static int tile_dim(const move_view *v)
{
    int r = v->rank;
    int64_t sj = v->src_str[r - 1];
    if (r < 2 || v->dst_str[r - 1] != 1 || sj == 0 || sj == 1 || sj == -1 || v->dims[r - 1] < MV_TILE_MIN) return -1;
    for (int a = 0; a < r - 1; a++)
        if (v->src_str[a] == 1 && v->dims[a] >= MV_TILE_MIN) return a;
    return -1;
}

static void copy_title(base_str *s, const char *what, const move_view *v, size_t es, const char *how)
{
    base_str_printf(s, "        /* %s: ", what);
    for (int d = 0; d < v->rank; d++) base_str_printf(s, "%s%lld", d ? "x" : "", (long long)v->dims[d]);
    base_str_printf(s, " elements of %zu bytes, %s */\n", es, how);
}

/* Transposing copy through shared-memory tiles of (a, innermost): threads
 * read MV_TILE elements along a (contiguous in the source) per row, then
 * write them along the innermost dim (contiguous in the destination); each
 * warp takes every warps-th row, so the warps must divide MV_TILE. */
static void piece_tiled(move *m, const move_copy *cp, const move_view *v, int a)
{
    cg_emitter *e = m->e;
    int r = v->rank;
    bool convert = cg_store(e, cp->src) != cg_store(e, cp->dst);
    size_t es = store_size(e, cp->src);
    const char *T = convert ? "float" : bits_type(es);
    int64_t A = v->dims[a], J = v->dims[r - 1], na = ceil_div(A, MV_TILE), nj = ceil_div(J, MV_TILE);
    /* the other dims: one tile pair per combination */
    int64_t od[MOVE_MAX_RANK], os[MOVE_MAX_RANK], ot[MOVE_MAX_RANK], others = 1;
    bool all[MOVE_MAX_RANK];
    int no = 0;
    for (int d = 0; d < r - 1; d++) {
        if (d == a) continue;
        od[no] = v->dims[d], os[no] = v->src_str[d], ot[no] = v->dst_str[d], all[no++] = true;
        others *= v->dims[d];
    }
    int64_t n_tasks = others * na * nj;
    itypes ty = itypes_for(n_tasks, view_bound(v));
    base_str s;
    base_str_init(&s);
    char how[96], sp[256], dp[256], so[512], dof[512];
    snprintf(how, sizeof how, "%dx%d tiles along dims %d and %d", MV_TILE, MV_TILE, a, r - 1);
    copy_title(&s, cp->what, v, es, how);
    base_str_printf(&s, "        %s *tile = (%s *)kg_smem; /* [%d][%d] */\n", T, T, MV_TILE, MV_TILE + 1);
    if (!convert) {
        ptr_expr(e, cp->src, v->src_off, T, true, sp, sizeof sp);
        ptr_expr(e, cp->dst, v->dst_off, T, false, dp, sizeof dp);
        base_str_printf(&s, "        const %s *sp = %s;\n        %s *dp = %s;\n", T, sp, T, dp);
    }
    base_str_printf(&s, "        %s tq = (%s)u;\n", ty.it, ty.it);
    base_str_printf(&s, "        const %s j0 = tq %% %lld * %d;\n        tq /= %lld;\n", ty.it, (long long)nj, MV_TILE,
                    (long long)nj);
    base_str_printf(&s, "        const %s a0 = tq %% %lld * %d;\n", ty.it, (long long)na, MV_TILE);
    if (no) base_str_printf(&s, "        tq /= %lld;\n", (long long)na);
    move_emit_coords(&s, ty.it, "tq", no, od, all, "        ");
    offset_expr(so, sizeof so, &ty, no, os);
    offset_expr(dof, sizeof dof, &ty, no, ot);
    base_str_printf(&s, "        const %s sb = %s, db = %s;\n", ty.ot, so, dof);
    base_str_cat(&s, "        const int x = threadIdx.x & 31, y = threadIdx.x >> 5;\n");
    /* read: lanes along a */
    base_str_printf(&s, "        for (int k = 0; k < %d; k += %d) {\n", MV_TILE, warps_of(m));
    base_str_printf(&s, "            const %s ia = a0 + x, j = j0 + y + k;\n", ty.it);
    base_str_printf(&s, "            if (ia < %lld && j < %lld) ", (long long)A, (long long)J);
    char idx[256], ld[512];
    snprintf(idx, sizeof idx, "sb + (%s)ia + (%s)j * %lld", ty.ot, ty.ot, (long long)v->src_str[r - 1]);
    if (convert) {
        char full[320];
        snprintf(full, sizeof full, "%lld + %s", (long long)v->src_off, idx);
        cg_load(e, cp->src, full, ld, sizeof ld);
    } else {
        snprintf(ld, sizeof ld, "sp[%s]", idx);
    }
    base_str_printf(&s, "tile[(y + k) * %d + x] = %s;\n        }\n", MV_TILE + 1, ld);
    base_str_cat(&s, "        __syncthreads();\n");
    /* write: lanes along the innermost dim */
    base_str_printf(&s, "        for (int k = 0; k < %d; k += %d) {\n", MV_TILE, warps_of(m));
    base_str_printf(&s, "            const %s ia = a0 + y + k, j = j0 + x;\n", ty.it);
    base_str_printf(&s, "            if (ia < %lld && j < %lld) ", (long long)A, (long long)J);
    char val[64];
    snprintf(val, sizeof val, "tile[x * %d + y + k]", MV_TILE + 1);
    if (convert) {
        char full[320];
        snprintf(full, sizeof full, "%lld + db + (%s)ia * %lld + (%s)j", (long long)v->dst_off, ty.ot,
                 (long long)v->dst_str[a], ty.ot);
        base_str_cat(&s, "{\n                ");
        cg_store_stmt(e, &s, cp->dst, full, val);
        base_str_cat(&s, "            }\n");
    } else {
        base_str_printf(&s, "dp[db + (%s)ia * %lld + (%s)j] = %s;\n", ty.ot, (long long)v->dst_str[a], ty.ot, val);
    }
    base_str_cat(&s, "        }\n");
    base_str_cat(&s, "        __syncthreads(); /* the tile is reused by the block's next rTask */\n");
    int smem = (int)((size_t)MV_TILE * (MV_TILE + 1) * (convert ? sizeof(float) : es));
    if (smem > m->smem_bytes) m->smem_bytes = smem;
    add_piece(m, &s, n_tasks);
}

/* One thread per element (or vector of elements) of the view. */
static void piece_elements(move *m, const move_copy *cp, const move_view *v)
{
    cg_emitter *e = m->e;
    int r = v->rank;
    bool convert = cg_store(e, cp->src) != cg_store(e, cp->dst);
    size_t es = store_size(e, cp->src);
    int vb = convert ? 0 : vector_bytes(e, cp->src, cp->dst, v, es);
    int64_t per = vb ? vb / (int64_t)es : 1;
    /* the view in units of `per` elements */
    move_view u = *v;
    u.dims[r - 1] /= per;
    for (int d = 0; d < r - 1; d++) u.src_str[d] /= per, u.dst_str[d] /= per;
    u.src_off /= per, u.dst_off /= per;
    int64_t units = ir_dims_numel(r, u.dims);
    int unroll = unroll_for(m, units);
    int64_t chunk = (int64_t)unroll * m->block, n_tasks = ceil_div(units, chunk);
    itypes ty = itypes_for(n_tasks * chunk, view_bound(v));
    bool src_c = is_contiguous(r, u.dims, u.src_str), dst_c = is_contiguous(r, u.dims, u.dst_str);
    bool need[MOVE_MAX_RANK] = {false};
    for (int d = 0; d < r; d++) need[d] = (!src_c && u.src_str[d] != 0) || (!dst_c && u.dst_str[d] != 0);

    base_str s;
    base_str_init(&s);
    char how[96], sp[256], dp[256], so[512], dof[512];
    if (vb) snprintf(how, sizeof how, "%d-byte vectors, %d per thread", vb, unroll);
    else snprintf(how, sizeof how, "%d per thread", unroll);
    copy_title(&s, cp->what, v, es, how);
    const char *T = vb ? vec_type(vb) : bits_type(es);
    if (!convert) {
        ptr_expr(e, cp->src, v->src_off, T, true, sp, sizeof sp);
        ptr_expr(e, cp->dst, v->dst_off, T, false, dp, sizeof dp);
        base_str_printf(&s, "        const %s *sp = %s;\n        %s *dp = %s;\n", T, sp, T, dp);
    }
    open_units(&s, &ty, m->block, unroll, units);
    move_emit_coords(&s, ty.it, "i", r, u.dims, need, "            ");
    if (src_c) snprintf(so, sizeof so, "(%s)i", ty.ot);
    else offset_expr(so, sizeof so, &ty, r, u.src_str);
    if (dst_c) snprintf(dof, sizeof dof, "(%s)i", ty.ot);
    else offset_expr(dof, sizeof dof, &ty, r, u.dst_str);
    if (convert) {
        char si[600], di[600], ld[800];
        snprintf(si, sizeof si, "%lld + %s", (long long)v->src_off, so);
        snprintf(di, sizeof di, "%lld + %s", (long long)v->dst_off, dof);
        cg_load(e, cp->src, si, ld, sizeof ld);
        base_str_cat(&s, "            ");
        cg_store_stmt(e, &s, cp->dst, di, ld);
    } else {
        base_str_printf(&s, "            dp[%s] = sp[%s];\n", dof, so);
    }
    close_units(&s);
    add_piece(m, &s, n_tasks);
}

static void piece_copy(move *m, move_copy *cp)
{
    if (!placed(m, cp->dst) || ir_dims_numel(cp->v.rank, cp->v.dims) == 0) return;
    move_view_collapse(&cp->v);
    int a = tile_dim(&cp->v);
    if (a >= 0 && MV_TILE % warps_of(m) == 0) piece_tiled(m, cp, &cp->v, a);
    else piece_elements(m, cp, &cp->v);
}

/* Fills dst with one value: bits in dst's storage. */
static void piece_fill(move *m, const char *what, const ir_value *dst, uint64_t bits)
{
    cg_emitter *e = m->e;
    int64_t total = ir_numel(&dst->t);
    if (!placed(m, dst) || total == 0) return;
    size_t es = store_size(e, dst);
    int unroll = unroll_for(m, total);
    int64_t chunk = (int64_t)unroll * m->block, n_tasks = ceil_div(total, chunk);
    itypes ty = itypes_for(n_tasks * chunk, 0);
    base_str s;
    base_str_init(&s);
    char dp[256], lit[64];
    ptr_expr(e, dst, 0, bits_type(es), false, dp, sizeof dp);
    base_str_printf(&s, "        /* %s: %lld elements */\n", what, (long long)total);
    base_str_printf(&s, "        %s *dp = %s;\n", bits_type(es), dp);
    open_units(&s, &ty, m->block, unroll, total);
    base_str_printf(&s, "            dp[i] = %s;\n", bits_lit(es, bits, lit, sizeof lit));
    close_units(&s);
    add_piece(m, &s, n_tasks);
}

/* ---- Gather --------------------------------------------------------------------------- */

static void piece_gather(move *m)
{
    const ir_node *n = m->n;
    cg_emitter *e = m->e;
    const ir_value *xv = n->in[0], *iv = n->in[1], *yv = n->out[0];
    const ir_tensor *x = &xv->t;
    if (!placed(m, yv) || ir_numel(&yv->t) == 0) return;
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
    int64_t outer = ir_dims_numel(axis, x->dims), d = x->dims[axis];
    int64_t inner = ir_dims_numel(x->rank - axis - 1, x->dims + axis + 1), n_ind = ir_numel(&iv->t);
    bool convert = cg_store(e, xv) != cg_store(e, yv);
    size_t es = store_size(e, xv);
    /* rows of `inner` elements, moved as vectors when both sides allow */
    move_view row = {.rank = 2, .dims = {outer * n_ind, inner}, .src_str = {inner, 1}, .dst_str = {inner, 1}};
    int vb = convert ? 0 : vector_bytes(e, xv, yv, &row, es);
    int64_t per = vb ? vb / (int64_t)es : 1, iu = inner / per;
    int64_t units = outer * n_ind * iu;
    int unroll = unroll_for(m, units);
    int64_t chunk = (int64_t)unroll * m->block, n_tasks = ceil_div(units, chunk);
    itypes ty = itypes_for(n_tasks * chunk, ir_numel(x));
    const char *T = vb ? vec_type(vb) : bits_type(es);

    base_str s;
    base_str_init(&s);
    char sp[256], dp[256], ld[512];
    char how[64] = "";
    if (vb) snprintf(how, sizeof how, "%d-byte vectors, ", vb);
    base_str_printf(&s, "        /* gather: %lld x %lld rows of %lld elements of %zu bytes from %lld, %s%d per thread",
                    (long long)outer, (long long)n_ind, (long long)inner, es, (long long)d, how, unroll);
    base_str_cat(&s, " */\n");
    if (!convert) {
        ptr_expr(e, xv, 0, T, true, sp, sizeof sp);
        ptr_expr(e, yv, 0, T, false, dp, sizeof dp);
        base_str_printf(&s, "        const %s *sp = %s;\n        %s *dp = %s;\n", T, sp, T, dp);
    }
    open_units(&s, &ty, m->block, unroll, units);
    base_str_printf(&s, "            %s q = i;\n", ty.it);
    if (iu > 1)
        base_str_printf(&s, "            const %s cu = q %% %lld;\n            q /= %lld;\n", ty.it, (long long)iu,
                        (long long)iu);
    if (outer > 1)
        base_str_printf(&s, "            const %s o = q / %lld;\n            q %%= %lld;\n", ty.it, (long long)n_ind,
                        (long long)n_ind);
    base_str_printf(&s, "            kg_i64 at = (kg_i64)%s;\n", cg_load(e, iv, "q", ld, sizeof ld));
    base_str_printf(&s, "            if (at < 0) at += %lldLL;\n", (long long)d);
    base_str_printf(&s, "            if (at < 0 || at >= %lldLL) {\n                ", (long long)d);
    cg_fault_stmt(e, &s, "KG_FAULT_INDEX");
    /* element (o, at, cu) of x, in units */
    char base_i[256], src_idx[320];
    if (outer > 1) snprintf(base_i, sizeof base_i, "((%s)o * %lld + (%s)at)", ty.ot, (long long)d, ty.ot);
    else snprintf(base_i, sizeof base_i, "(%s)at", ty.ot);
    if (iu > 1) snprintf(src_idx, sizeof src_idx, "%s * %lld + (%s)cu", base_i, (long long)iu, ty.ot);
    else snprintf(src_idx, sizeof src_idx, "%s", base_i);
    if (convert) {
        base_str_cat(&s, "                ");
        cg_store_stmt(e, &s, yv, "i", "0.0f");
        base_str_cat(&s, "            } else {\n                ");
        cg_load(e, xv, src_idx, ld, sizeof ld);
        cg_store_stmt(e, &s, yv, "i", ld);
        base_str_cat(&s, "            }\n");
    } else {
        base_str_printf(&s, "                dp[i] = %s;\n            } else {\n", vb ? vec_zero(vb) : "0u");
        base_str_printf(&s, "                dp[i] = sp[%s];\n            }\n", src_idx);
    }
    close_units(&s);
    add_piece(m, &s, n_tasks);
}

/* ---- Pad ------------------------------------------------------------------------------ */

static void piece_pad(move *m)
{
    const ir_node *n = m->n;
    cg_emitter *e = m->e;
    const ir_value *xv = n->in[0], *yv = n->out[0];
    const ir_tensor *x = &xv->t, *y = &yv->t;
    move_pad pp;
    move_pad_params(n, &pp);
    int64_t total = ir_numel(y);
    if (!placed(m, yv) || total == 0) return;
    int r = y->rank;
    bool convert = cg_store(e, xv) != cg_store(e, yv), empty = ir_numel(x) == 0;
    bool constant = pp.mode == MOVE_PAD_CONSTANT;
    for (int d = 0; d < r && constant; d++) empty = empty || pp.kept[d] == 0;
    size_t es = store_size(e, yv);
    static const char *const fns[] = {[MOVE_PAD_CONSTANT] = NULL, [MOVE_PAD_REFLECT] = "kg_pad_reflect",
                                      [MOVE_PAD_EDGE] = "kg_pad_edge", [MOVE_PAD_WRAP] = "kg_pad_wrap"};
    const char *fn = fns[pp.mode];
    if (fn && m->st == KILN_OK) m->st = cg_need(e, "kg_move.cuh");
    /* the fill value in the destination's storage */
    ir_tensor fx = {.dtype = x->dtype, .data = &pp.fill};
    double fill_value = constant ? ir_get_f64(&fx, 0) : 0;
    uint64_t fill_bits = cg_store(e, yv) == x->dtype ? pp.fill : move_bits_of(cg_store(e, yv), fill_value);
    char fill[64];
    if (convert) cg_float_lit(fill_value, fill, sizeof fill);
    else bits_lit(es, fill_bits, fill, sizeof fill);

    int64_t istr[IR_MAX_RANK];
    move_contiguous_strides(r, x->dims, istr);
    int unroll = unroll_for(m, total);
    int64_t chunk = (int64_t)unroll * m->block, n_tasks = ceil_div(total, chunk);
    itypes ty = itypes_for(n_tasks * chunk, KILN_MAX(ir_numel(x), total));
    const char *T = bits_type(es);
    base_str s;
    base_str_init(&s);
    char sp[256], dp[256];
    base_str_printf(&s, "        /* pad (%s): %lld elements of %zu bytes, %d per thread */\n",
                    move_pad_mode_name(pp.mode), (long long)total, es, unroll);
    if (!convert) {
        if (!empty) {
            ptr_expr(e, xv, 0, T, true, sp, sizeof sp);
            base_str_printf(&s, "        const %s *sp = %s;\n", T, sp);
        }
        ptr_expr(e, yv, 0, T, false, dp, sizeof dp);
        base_str_printf(&s, "        %s *dp = %s;\n", T, dp);
    }
    open_units(&s, &ty, m->block, unroll, total);
    if (empty) {
        if (convert) {
            base_str_cat(&s, "            ");
            cg_store_stmt(e, &s, yv, "i", fill);
        } else {
            base_str_printf(&s, "            dp[i] = %s;\n", fill);
        }
        close_units(&s);
        add_piece(m, &s, n_tasks);
        return;
    }
    base_str_printf(&s, "            %s q = i;\n            %s so = 0;\n", ty.it, ty.ot);
    if (constant) base_str_cat(&s, "            bool inside = true;\n");
    for (int d = r - 1; d >= 0; d--) {
        bool padded = pp.lead[d] || pp.crop[d] || pp.kept[d] != y->dims[d];
        base_str_cat(&s, "            {\n");
        if (d > 0)
            base_str_printf(&s, "                kg_i64 p = (kg_i64)(q %% %lld);\n                q /= %lld;\n",
                            (long long)y->dims[d], (long long)y->dims[d]);
        else base_str_cat(&s, "                kg_i64 p = (kg_i64)q;\n");
        if (padded) {
            if (pp.lead[d]) base_str_printf(&s, "                p -= %lldLL;\n", (long long)pp.lead[d]);
            long long kept = (long long)pp.kept[d];
            if (constant) base_str_printf(&s, "                if (p < 0 || p >= %lldLL) inside = false;\n", kept);
            else base_str_printf(&s, "                if (p < 0 || p >= %lldLL) p = %s(p, %lldLL);\n", kept, fn, kept);
            if (pp.crop[d]) base_str_printf(&s, "                p += %lldLL;\n", (long long)pp.crop[d]);
        }
        base_str_printf(&s, "                so += (%s)p * %lld;\n            }\n", ty.ot, (long long)istr[d]);
    }
    char ld[512];
    if (convert) {
        cg_load(e, xv, "so", ld, sizeof ld);
        char val[640];
        if (constant) snprintf(val, sizeof val, "inside ? %s : %s", ld, fill);
        else snprintf(val, sizeof val, "%s", ld);
        base_str_cat(&s, "            ");
        cg_store_stmt(e, &s, yv, "i", val);
    } else if (constant) {
        base_str_printf(&s, "            dp[i] = inside ? sp[so] : %s;\n", fill);
    } else {
        base_str_cat(&s, "            dp[i] = sp[so];\n");
    }
    close_units(&s);
    add_piece(m, &s, n_tasks);
}

/* ---- Reduce* ----------------------------------------------------------------------------- */

/* How a Reduce accumulates: float (16-bit and float32 storage), double
 * (float64), exact signed or unsigned 64-bit integers (bool as unsigned). */
typedef enum acc_kind { ACC_FLOAT, ACC_DOUBLE, ACC_INT, ACC_UINT } acc_kind;

static acc_kind acc_kind_of(kiln_dtype t)
{
    if (t == KILN_F64) return ACC_DOUBLE;
    if (cg_is_float(t)) return ACC_FLOAT;
    return ir_dtype_is_signed(t) ? ACC_INT : ACC_UINT;
}

static const char *acc_type(acc_kind k)
{
    static const char *const names[] = {[ACC_FLOAT] = "float", [ACC_DOUBLE] = "double", [ACC_INT] = "kg_i64",
                                        [ACC_UINT] = "kg_u64"};
    return names[k];
}

/* The accumulator's start: the identity of the op's combination. */
static const char *acc_init(kiln_op op, acc_kind k, kiln_dtype t, char *buf, size_t n)
{
    bool is_max = op == KILN_OP_REDUCE_MAX, is_min = op == KILN_OP_REDUCE_MIN;
    if (k == ACC_FLOAT || k == ACC_DOUBLE) {
        if (is_max || is_min) {
            const char *inf =
                k == ACC_FLOAT ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
            snprintf(buf, n, "%s%s", is_max ? "-" : "", inf);
        } else {
            snprintf(buf, n, op == KILN_OP_REDUCE_PROD ? "1.0%s" : "0.0%s", k == ACC_FLOAT ? "f" : "");
        }
        return buf;
    }
    if (!is_max && !is_min) {
        snprintf(buf, n, op == KILN_OP_REDUCE_PROD ? "1" : "0");
        return buf;
    }
    int bits = t == KILN_BOOL ? 1 : (int)ir_dtype_size(t) * 8;
    if (k == ACC_UINT) {
        uint64_t hi = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        snprintf(buf, n, "%lluull", (unsigned long long)(is_max ? 0 : hi));
    } else {
        int64_t hi = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
        if (is_max) snprintf(buf, n, "(-%lldLL - 1)", (long long)hi);
        else snprintf(buf, n, "%lldLL", (long long)hi);
    }
    return buf;
}

/* Appends "acc = acc (+) f(a);" for element value a, or, when combine,
 * the combination of two partial results acc and a. */
static void emit_accumulate(base_str *s, kiln_op op, acc_kind k, const char *a, bool combine, const char *ind)
{
    bool fl = k == ACC_FLOAT || k == ACC_DOUBLE;
    if (op == KILN_OP_REDUCE_MAX || op == KILN_OP_REDUCE_MIN) {
        const char *cmp = op == KILN_OP_REDUCE_MAX ? ">" : "<";
        /* a NaN wins and stays, as in the interpreter */
        if (fl) base_str_printf(s, "%sif (%s %s acc || %s != %s) acc = %s;\n", ind, a, cmp, a, a, a);
        else base_str_printf(s, "%sif (%s %s acc) acc = %s;\n", ind, a, cmp, a);
        return;
    }
    if (op == KILN_OP_REDUCE_PROD) {
        if (fl) base_str_printf(s, "%sacc *= %s;\n", ind, a);
        else base_str_printf(s, "%sacc = (%s)((kg_u64)acc * (kg_u64)%s);\n", ind, acc_type(k), a);
        return;
    }
    char term[160];
    if (combine || op == KILN_OP_REDUCE_SUM || op == KILN_OP_REDUCE_MEAN || op == KILN_OP_REDUCE_LOG_SUM)
        snprintf(term, sizeof term, fl ? "%s" : "(kg_u64)%s", a);
    else if (op == KILN_OP_REDUCE_L1 && fl) snprintf(term, sizeof term, "%s(%s)", k == ACC_FLOAT ? "fabsf" : "fabs", a);
    else if (op == KILN_OP_REDUCE_L1 && k == ACC_INT)
        snprintf(term, sizeof term, "(%s < 0 ? 0ull - (kg_u64)%s : (kg_u64)%s)", a, a, a);
    else if (op == KILN_OP_REDUCE_L1) snprintf(term, sizeof term, "(kg_u64)%s", a);
    else if (fl) snprintf(term, sizeof term, "%s * %s", a, a); /* L2, SumSquare */
    else snprintf(term, sizeof term, "(kg_u64)%s * (kg_u64)%s", a, a);
    if (fl) base_str_printf(s, "%sacc += %s;\n", ind, term);
    else base_str_printf(s, "%sacc = (%s)((kg_u64)acc + %s);\n", ind, acc_type(k), term);
}

/* The output value from the accumulator (count elements were reduced). */
static const char *acc_final(kiln_op op, acc_kind k, int64_t count, char *buf, size_t n)
{
    bool f = k == ACC_FLOAT;
    switch (op) {
    case KILN_OP_REDUCE_L2: snprintf(buf, n, f ? "sqrtf(acc)" : "sqrt(acc)"); break;
    case KILN_OP_REDUCE_LOG_SUM: snprintf(buf, n, f ? "logf(acc)" : "log(acc)"); break;
    case KILN_OP_REDUCE_MEAN:
        if (k == ACC_INT || k == ACC_UINT) {
            if (count == 0) snprintf(buf, n, "0");
            else snprintf(buf, n, "acc / %lld%s", (long long)count, k == ACC_INT ? "LL" : "ull");
        } else if (count == 0) {
            snprintf(buf, n, f ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)");
        } else {
            snprintf(buf, n, "acc / %lld.0%s", (long long)count, f ? "f" : "");
        }
        break;
    default: snprintf(buf, n, "acc"); break;
    }
    return buf;
}

/* A Reduce's input viewed as kept and reduced dim groups (neighbours of
 * one kind merged, dims of 1 dropped). */
typedef struct red_view {
    int nk, nr;
    int64_t kd[IR_MAX_RANK], ks[IR_MAX_RANK]; /* kept: dims and input strides */
    int64_t rd[IR_MAX_RANK], rs[IR_MAX_RANK]; /* reduced */
    int64_t outs, count;
} red_view;

static void red_view_of(const ir_tensor *x, const bool *reduced, red_view *rv)
{
    memset(rv, 0, sizeof(*rv));
    int64_t istr[IR_MAX_RANK];
    move_contiguous_strides(x->rank, x->dims, istr);
    int last = -1;
    rv->outs = rv->count = 1;
    for (int d = 0; d < x->rank; d++) {
        if (reduced[d]) rv->count *= x->dims[d];
        else rv->outs *= x->dims[d];
        if (x->dims[d] == 1) continue;
        int kind = reduced[d];
        int64_t *dims = kind ? rv->rd : rv->kd, *str = kind ? rv->rs : rv->ks;
        int *nn = kind ? &rv->nr : &rv->nk;
        if (kind == last) {
            dims[*nn - 1] *= x->dims[d];
            str[*nn - 1] = istr[d];
        } else {
            dims[*nn] = x->dims[d];
            str[(*nn)++] = istr[d];
        }
        last = kind;
    }
}

/* "const OT base = ..." for output `o` (a linear index over the kept dims). */
static void emit_red_base(base_str *s, const itypes *ty, const red_view *rv, const char *o, const char *ind)
{
    bool need[IR_MAX_RANK];
    for (int k = 0; k < rv->nk; k++) need[k] = true;
    move_emit_coords(s, ty->it, o, rv->nk, rv->kd, need, ind);
    char off[512];
    offset_expr(off, sizeof off, ty, rv->nk, rv->ks);
    base_str_printf(s, "%sconst %s base = %s;\n", ind, ty->ot, off);
}

/* The input offset (from base) of flattened reduced element `r`: its
 * coordinates along the reduced groups, the innermost fastest. */
static void red_offset(char *buf, size_t n, const itypes *ty, const red_view *rv, const char *r)
{
    size_t k = 0;
    int64_t div = 1;
    buf[0] = 0;
    for (int g = rv->nr - 1; g >= 0 && k < n; g--) {
        char coord[96], scaled[160];
        if (g == 0 && div == 1) snprintf(coord, sizeof coord, "%s", r);
        else if (g == 0) snprintf(coord, sizeof coord, "%s / %lld", r, (long long)div);
        else if (div == 1) snprintf(coord, sizeof coord, "%s %% %lld", r, (long long)rv->rd[g]);
        else snprintf(coord, sizeof coord, "%s / %lld %% %lld", r, (long long)div, (long long)rv->rd[g]);
        if (rv->rs[g] == 1) snprintf(scaled, sizeof scaled, "(%s)(%s)", ty->ot, coord);
        else snprintf(scaled, sizeof scaled, "(%s)(%s) * %lld", ty->ot, coord, (long long)rv->rs[g]);
        k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? " + " : "", scaled);
        div *= rv->rd[g];
    }
    if (k == 0) snprintf(buf, n, "0");
}

/* Combines acc over the lanes of a warp (every lane gets the result). */
static void emit_warp_combine(base_str *s, kiln_op op, acc_kind k, const char *ind)
{
    base_str_printf(s, "%sfor (int w = 16; w > 0; w >>= 1) {\n", ind);
    base_str_printf(s, "%s    const %s b = __shfl_xor_sync(0xffffffffu, acc, w);\n", ind, acc_type(k));
    char in2[32];
    snprintf(in2, sizeof in2, "%s    ", ind);
    emit_accumulate(s, op, k, "b", true, in2);
    base_str_printf(s, "%s}\n", ind);
}

/* How a Reduce's outputs are spread over threads. */
typedef enum red_sched {
    RED_THREAD, /* a thread per output, looping over its elements */
    RED_COLS,   /* 32 outputs per rTask, each reduced by a thread per warp (few outputs, a strided reduction) */
    RED_WARP,   /* a warp per output along a contiguous run */
    RED_BLOCK,  /* a block per output along a long contiguous run */
} red_sched;

static red_sched red_sched_for(const move *m, const red_view *rv, bool empty)
{
    int n_sms = m->e->gpu.n_sms > 0 ? m->e->gpu.n_sms : 132;
    if (empty || rv->count == 0 || rv->nr == 0) return RED_THREAD;
    if (rv->rs[rv->nr - 1] == 1 && rv->count >= MV_BLOCK_ROW) return RED_BLOCK;
    if (rv->rs[rv->nr - 1] == 1 && rv->count >= MV_WARP_ROW) return RED_WARP;
    /* a thread per output would leave most of the GPU idle (a quarter of
     * its threads or fewer); each thread then still takes 8 elements */
    if (rv->outs < (int64_t)n_sms * (MV_SM_THREADS / 4) && rv->count >= 8 * warps_of(m)) return RED_COLS;
    return RED_THREAD;
}

static void piece_reduce(move *m)
{
    const ir_node *n = m->n;
    cg_emitter *e = m->e;
    const ir_value *xv = n->in[0], *yv = n->out[0];
    const ir_tensor *x = &xv->t;
    if (!placed(m, yv) || ir_numel(&yv->t) == 0) return;
    bool reduced[IR_MAX_RANK];
    move_reduce_axes(n, reduced);
    red_view rv;
    red_view_of(x, reduced, &rv);
    kiln_op op = n->op;
    acc_kind k = acc_kind_of(x->dtype);
    const char *AT = acc_type(k), *YT = cg_type(cg_store(e, yv));
    bool empty = ir_numel(x) == 0;
    red_sched sched = red_sched_for(m, &rv, empty);
    int n_sms = e->gpu.n_sms > 0 ? e->gpu.n_sms : 132;
    /* a kernel that wants a block size keeps it: the long rows then take
     * more steps per thread */
    bool big = sched == RED_BLOCK && rv.count >= MV_BIG_ROW && rv.outs < 2 * (int64_t)n_sms;
    if (big && !e->want_block) m->block = MV_BIG_BLOCK;
    int warps = warps_of(m);
    const int per_task[] = {[RED_THREAD] = m->block, [RED_COLS] = 32, [RED_WARP] = warps, [RED_BLOCK] = 1};
    char cols_how[32], big_how[32] = "";
    snprintf(cols_how, sizeof cols_how, "%d threads per output", warps);
    if (sched == RED_BLOCK && m->block != MV_BLOCK) snprintf(big_how, sizeof big_how, " of %d threads", m->block);
    const char *const how[] = {[RED_THREAD] = "a thread per output", [RED_COLS] = cols_how,
                               [RED_WARP] = "a warp per output", [RED_BLOCK] = "a block per output"};
    int64_t n_tasks = ceil_div(rv.outs, per_task[sched]);
    itypes ty = itypes_for(KILN_MAX(n_tasks * m->block, rv.count), ir_numel(x));
    char init[64], fin[128], ld[512], off[600], idx[700], val[160];
    acc_init(op, k, x->dtype, init, sizeof init);
    acc_final(op, k, rv.count, fin, sizeof fin);
    if (ir_dtype_is_float(yv->t.dtype)) snprintf(val, sizeof val, "%s", fin);
    else snprintf(val, sizeof val, "(%s)(%s)", YT, fin);

    base_str s;
    base_str_init(&s);
    base_str_printf(&s, "        /* %s: %lld output%s of %lld element%s, %s%s, in %s */\n", n->op_type,
                    (long long)rv.outs, rv.outs == 1 ? "" : "s", (long long)rv.count, rv.count == 1 ? "" : "s",
                    how[sched], big_how, AT);
    const char *ind = "            ";
    base_str_cat(&s, "        {\n");
    switch (sched) {
    case RED_BLOCK: base_str_printf(&s, "%sconst %s o = (%s)u;\n", ind, ty.it, ty.it); break;
    case RED_WARP:
        base_str_printf(&s, "%sconst %s o = (%s)u * %d + (threadIdx.x >> 5);\n", ind, ty.it, ty.it, warps);
        base_str_printf(&s, "%sif (o >= %lld) return;\n", ind, (long long)rv.outs);
        break;
    case RED_COLS: base_str_printf(&s, "%sconst %s o = (%s)u * 32 + (threadIdx.x & 31);\n", ind, ty.it, ty.it); break;
    case RED_THREAD:
        base_str_printf(&s, "%sconst %s o = (%s)u * %d + threadIdx.x;\n", ind, ty.it, ty.it, m->block);
        base_str_printf(&s, "%sif (o >= %lld) return;\n", ind, (long long)rv.outs);
        break;
    }
    base_str_printf(&s, "%s%s acc = %s;\n", ind, AT, init);
    if (!empty && rv.count > 0) {
        /* the loop over this thread's elements */
        const char *in2 = ind;
        if (sched == RED_COLS) {
            base_str_printf(&s, "%sif (o < %lld) {\n", ind, (long long)rv.outs);
            in2 = "                ";
        }
        emit_red_base(&s, &ty, &rv, "o", in2);
        int depth = 1;
        if (sched == RED_THREAD) {
            /* one loop per reduced group, the innermost last */
            size_t at = 0;
            snprintf(off, sizeof off, "0"); /* no reduced dims: the element itself */
            for (int g = 0; g < rv.nr; g++) {
                base_str_printf(&s, "%s%*sfor (%s r%d = 0; r%d < %lld; r%d++) {\n", in2, 4 * g, "", ty.it, g, g,
                                (long long)rv.rd[g], g);
                at += (size_t)snprintf(off + at, sizeof off - at, "%s(%s)r%d * %lld", g ? " + " : "", ty.ot, g,
                                       (long long)rv.rs[g]);
            }
            depth = rv.nr;
        } else {
            static const char *const first[] = {[RED_COLS] = "threadIdx.x >> 5", [RED_WARP] = "threadIdx.x & 31",
                                                [RED_BLOCK] = "threadIdx.x"};
            char cols_step[16];
            snprintf(cols_step, sizeof cols_step, "%d", warps); /* a thread per warp */
            const char *const step[] = {[RED_COLS] = cols_step, [RED_WARP] = "32", [RED_BLOCK] = "blockDim.x"};
            base_str_printf(&s, "%sfor (%s r = %s; r < %lld; r += %s) {\n", in2, ty.it, first[sched],
                            (long long)rv.count, step[sched]);
            red_offset(off, sizeof off, &ty, &rv, "r");
        }
        snprintf(idx, sizeof idx, "base + %s", off);
        char in3[64];
        snprintf(in3, sizeof in3, "%s%*s", in2, 4 * depth, "");
        base_str_printf(&s, "%sconst %s a = (%s)%s;\n", in3, AT, AT, cg_load(e, xv, idx, ld, sizeof ld));
        emit_accumulate(&s, op, k, "a", false, in3);
        for (int g = depth - 1; g >= 0; g--) base_str_printf(&s, "%s%*s}\n", in2, 4 * g, "");
        if (sched == RED_COLS) base_str_printf(&s, "%s}\n", ind);
    }
    char in2[32];
    snprintf(in2, sizeof in2, "%s    ", ind);
    switch (sched) {
    case RED_THREAD:
        base_str_cat(&s, ind);
        cg_store_stmt(e, &s, yv, "o", val);
        break;
    case RED_WARP:
        emit_warp_combine(&s, op, k, ind);
        base_str_printf(&s, "%sif ((threadIdx.x & 31) == 0) ", ind);
        cg_store_stmt(e, &s, yv, "o", val);
        break;
    case RED_COLS:
        base_str_printf(&s, "%s%s *red = (%s *)kg_smem; /* [%d][32]: the partial results */\n", ind, AT, AT, warps);
        base_str_printf(&s, "%sred[threadIdx.x] = acc;\n%s__syncthreads();\n", ind, ind);
        base_str_printf(&s, "%sif (threadIdx.x < 32) {\n", ind);
        base_str_printf(&s, "%sfor (int w = 1; w < %d; w++) {\n", in2, warps);
        base_str_printf(&s, "%s    const %s b = red[w * 32 + threadIdx.x];\n", in2, AT);
        char in3[40];
        snprintf(in3, sizeof in3, "%s    ", in2);
        emit_accumulate(&s, op, k, "b", true, in3);
        base_str_printf(&s, "%s}\n%sif (o < %lld) ", in2, in2, (long long)rv.outs);
        cg_store_stmt(e, &s, yv, "o", val);
        base_str_printf(&s, "%s}\n", ind);
        base_str_printf(&s, "%s__syncthreads(); /* red is reused by the block's next rTask */\n", ind);
        m->smem_bytes = KILN_MAX(m->smem_bytes, m->block * (int)sizeof(double));
        break;
    case RED_BLOCK:
        emit_warp_combine(&s, op, k, ind);
        base_str_printf(&s, "%s%s *red = (%s *)kg_smem; /* a partial result per warp */\n", ind, AT, AT);
        base_str_printf(&s, "%sif ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;\n", ind);
        base_str_printf(&s, "%s__syncthreads();\n", ind);
        base_str_printf(&s, "%sif (threadIdx.x < 32) {\n", ind);
        base_str_printf(&s, "%sacc = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : %s;\n", in2, init);
        emit_warp_combine(&s, op, k, in2);
        base_str_printf(&s, "%sif (threadIdx.x == 0) ", in2);
        cg_store_stmt(e, &s, yv, "o", val);
        base_str_printf(&s, "%s}\n", ind);
        base_str_printf(&s, "%s__syncthreads(); /* red is reused by the block's next rTask */\n", ind);
        m->smem_bytes = KILN_MAX(m->smem_bytes, 32 * (int)sizeof(double));
        break;
    }
    base_str_cat(&s, "        }\n");
    add_piece(m, &s, n_tasks);
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------- */

/* The end of a scan step after "if (better) {": take the candidate. */
static void emit_take(base_str *s, const char *v, const char *i)
{
    base_str_printf(s, "                    bv = %s;\n                    bi = %s;\n", v, i);
    base_str_cat(s, "                }\n            }\n");
}

static void piece_arg(move *m)
{
    const ir_node *n = m->n;
    cg_emitter *e = m->e;
    const ir_value *xv = n->in[0], *yv = n->out[0];
    const ir_tensor *x = &xv->t;
    if (!placed(m, yv) || ir_numel(&yv->t) == 0) return;
    if (m->st == KILN_OK) m->st = cg_need(e, "kg_move.cuh");
    int axis = ir_norm_axis(ir_node_attr_int(n, "axis", 0), x->rank);
    int64_t outer = ir_dims_numel(axis, x->dims), len = x->dims[axis];
    int64_t inner = ir_dims_numel(x->rank - axis - 1, x->dims + axis + 1), outs = outer * inner;
    bool is_max = n->op == KILN_OP_ARG_MAX, last = ir_node_attr_int(n, "select_last_index", 0) != 0;
    acc_kind k = acc_kind_of(x->dtype);
    const char *VT = k == ACC_INT ? "kg_i64" : k == ACC_UINT ? "kg_u64" : "double";
    const char *better = k == ACC_INT ? "kg_arg_better_i64" : k == ACC_UINT ? "kg_arg_better_u64" : "kg_arg_better_fp";
    bool warp = inner == 1 && len >= MV_ARG_WARP;
    int64_t n_tasks = ceil_div(outs, warp ? warps_of(m) : m->block);
    itypes ty = itypes_for(KILN_MAX(n_tasks * m->block, len), ir_numel(x));
    const char *flags = is_max ? (last ? "true, true" : "true, false") : (last ? "false, true" : "false, false");
    char ld[512], idx[256];

    base_str s;
    base_str_init(&s);
    base_str_printf(&s, "        /* %s over %lld elements %lld apart, %s */\n", n->op_type, (long long)len,
                    (long long)inner, warp ? "a warp per output" : "a thread per output");
    if (warp) {
        base_str_printf(&s, "        {\n            const %s o = (%s)u * %d + (threadIdx.x >> 5);\n", ty.it, ty.it,
                        warps_of(m));
        base_str_printf(&s, "            if (o >= %lld) return;\n", (long long)outs);
        base_str_printf(&s, "            const %s base = (%s)o * %lld;\n", ty.ot, ty.ot, (long long)len);
        base_str_printf(&s, "            %s bv = 0;\n            kg_i64 bi = -1;\n", VT);
        base_str_printf(&s, "            for (%s k = threadIdx.x & 31; k < %lld; k += 32) {\n", ty.it, (long long)len);
        snprintf(idx, sizeof idx, "base + (%s)k", ty.ot);
        base_str_printf(&s, "                const %s a = (%s)%s;\n", VT, VT, cg_load(e, xv, idx, ld, sizeof ld));
        base_str_printf(&s, "                if (%s(a, (kg_i64)k, bv, bi, %s)) {\n", better, flags);
        emit_take(&s, "a", "(kg_i64)k");
        base_str_cat(&s, "            for (int w = 16; w > 0; w >>= 1) {\n");
        base_str_printf(&s, "                const %s ov = __shfl_xor_sync(0xffffffffu, bv, w);\n", VT);
        base_str_cat(&s, "                const kg_i64 oi = __shfl_xor_sync(0xffffffffu, bi, w);\n");
        base_str_printf(&s, "                if (%s(ov, oi, bv, bi, %s)) {\n", better, flags);
        emit_take(&s, "ov", "oi");
        base_str_cat(&s, "            if ((threadIdx.x & 31) == 0) ");
    } else {
        base_str_printf(&s, "        {\n            const %s o = (%s)u * %d + threadIdx.x;\n", ty.it, ty.it, m->block);
        base_str_printf(&s, "            if (o >= %lld) return;\n", (long long)outs);
        if (inner > 1)
            base_str_printf(&s, "            const %s base = (%s)(o / %lld) * %lld + (%s)(o %% %lld);\n", ty.ot, ty.ot,
                            (long long)inner, (long long)(len * inner), ty.ot, (long long)inner);
        else base_str_printf(&s, "            const %s base = (%s)o * %lld;\n", ty.ot, ty.ot, (long long)len);
        base_str_printf(&s, "            %s bv = (%s)%s;\n            kg_i64 bi = 0;\n", VT, VT,
                        cg_load(e, xv, "base", ld, sizeof ld));
        base_str_printf(&s, "            for (%s k = 1; k < %lld; k++) {\n", ty.it, (long long)len);
        if (inner > 1) snprintf(idx, sizeof idx, "base + (%s)k * %lld", ty.ot, (long long)inner);
        else snprintf(idx, sizeof idx, "base + (%s)k", ty.ot);
        base_str_printf(&s, "                const %s a = (%s)%s;\n", VT, VT, cg_load(e, xv, idx, ld, sizeof ld));
        base_str_printf(&s, "                if (%s(a, (kg_i64)k, bv, bi, %s)) {\n", better, flags);
        emit_take(&s, "a", "(kg_i64)k");
        base_str_cat(&s, "            ");
    }
    cg_store_stmt(e, &s, yv, "o", "bi");
    base_str_cat(&s, "        }\n");
    add_piece(m, &s, n_tasks);
}

/* ---- what compiles ------------------------------------------------------------------------ */

/* move_node_ok, and the dtypes this target computes: copies of any dtype
 * kg.h stores; Reduce* of floats and integers (L2 and LogSum only of
 * floats: the interpreter takes those through double), Max/Min also of
 * bool; ArgMax/ArgMin of floats, integers and bool. */
bool cg_can_move(const ir_node *n)
{
    if (!move_node_ok(n)) return false;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && !cg_type(n->in[i]->t.dtype)) return false;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] && !cg_type(n->out[j]->t.dtype)) return false;
    kiln_dtype t = n->in[0]->t.dtype;
    bool number = cg_is_float(t) || ir_dtype_is_int(t);
    switch (n->op) {
    case KILN_OP_ARG_MAX: case KILN_OP_ARG_MIN: case KILN_OP_REDUCE_MAX: case KILN_OP_REDUCE_MIN:
        return number || t == KILN_BOOL;
    case KILN_OP_REDUCE_L2: case KILN_OP_REDUCE_LOG_SUM: return cg_is_float(t);
    default: return !(ir_ops[n->op].flags & IR_OPF_REDUCTION) || number;
    }
}

/* ---- the emitter ----------------------------------------------------------------------------- */

kiln_status cg_emit_move(cg_emitter *e, const sched_group *grp, cg_op *op)
{
    const ir_node *n = grp->nodes[0];
    char lb[256];
    if (grp->n_nodes != 1 || !cg_can_move(n))
        return base_diag_add(e->d, KILN_ERR_INTERNAL, "the cuda target cannot emit %s as data movement",
                             ir_node_label(n, lb, sizeof lb));
    move m = {.e = e, .n = n, .block = e->want_block ? e->want_block : MV_BLOCK};
    for (int i = 0; i < move_n_copies(n); i++) {
        move_copy cp;
        move_copy_of(n, i, &cp);
        piece_copy(&m, &cp);
    }
    switch (n->op) {
    case KILN_OP_DROPOUT:
        if (n->n_out > 1 && n->out[1])
            piece_fill(&m, "the mask: all ones", n->out[1], move_bits_of(cg_store(e, n->out[1]), 1.0));
        break;
    case KILN_OP_GATHER: piece_gather(&m); break;
    case KILN_OP_PAD: piece_pad(&m); break;
    case KILN_OP_ARG_MAX: case KILN_OP_ARG_MIN: piece_arg(&m); break;
    default:
        if (ir_ops[n->op].flags & IR_OPF_REDUCTION) piece_reduce(&m);
        break;
    }

    int64_t n_tasks = m.pieces.n_tasks;
    bool oom = m.pieces.oom;
    base_str *s = &e->code;
    cg_comment(s, grp);
    base_str_printf(s, "/* data movement (%s): %lld rTask%s of %d threads */\n", n->op_type,
                    (long long)(n_tasks ? n_tasks : 1), n_tasks == 1 ? "" : "s", m.block);
    base_str_printf(s, "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n", grp->id);
    move_pieces_emit(&m.pieces, s, "const int");
    base_str_cat(s, "}\n\n");
    if (m.st != KILN_OK) return m.st;
    if (oom || s->oom)
        return base_diag_add(e->d, KILN_ERR_OOM, "out of memory emitting %s", ir_node_label(n, lb, sizeof lb));
    *op = (cg_op){.n_rtasks = n_tasks ? n_tasks : 1, .block = m.block, .smem_bytes = m.smem_bytes};
    return KILN_OK;
}
