/*
 * gprog.c: writing and reading the CUDA program in the CODE section of a
 * `.kiln` artifact of target "cuda" (layout in gprog.h).
 *
 * The writer lays the fields out as given; the reader is written for
 * hostile input, like the artifact reader (artifact.c): it reads through a
 * bounds-checked cursor, bounds every count by the bytes left before it
 * allocates for it, keeps every string inside the section, and stops at the
 * first problem with a message naming the field and its byte offset in the
 * section. What the reader cannot check alone (segment indices against the
 * artifact's SEGMENTS, arena and weight sizes against its plan and WEIGHTS)
 * the runtime checks when it loads the artifact (rt_cuda.c).
 */
#include "runtime/gprog.h"

#include <stdio.h>
#include <string.h>

#define HEADER_BYTES 40
#define IMAGE_HEADER_BYTES 16
#define LAUNCH_MIN_BYTES 24 /* segment, grid, block, smem, two empty strings */
#define TMAP_BYTES 112

const char *rt_gprec_name(kiln_gprec p)
{
    switch (p) {
    case KILN_GPREC_FP32: return "fp32";
    case KILN_GPREC_FP16: return "fp16";
    case KILN_GPREC_BF16: return "bf16";
    }
    return "?";
}

/* ---- little-endian encoding ------------------------------------------------ */

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static size_t pad_to(size_t n, size_t align) { return (align - n % align) % align; }

/* The bytes a program encodes to; false when it cannot be encoded at all. */
static bool encoded_size(const rt_gprog *p, size_t *out)
{
    size_t n = HEADER_BYTES;
    for (int i = 0; i < p->n_images; i++) {
        size_t b = p->images[i].bytes;
        if (b > SIZE_MAX / 2 - n) return false;
        n += IMAGE_HEADER_BYTES + b + pad_to(b, 8);
    }
    for (int i = 0; i < p->n_launches; i++) {
        const rt_glaunch *l = &p->launches[i];
        size_t name = l->name ? strlen(l->name) : 0, label = l->label ? strlen(l->label) : 0;
        if (name > UINT32_MAX || label > UINT32_MAX || name + label > SIZE_MAX / 2 - n) return false;
        n += LAUNCH_MIN_BYTES + name + label + pad_to(name + label, 4);
    }
    if ((size_t)p->n_tmaps > (SIZE_MAX / 2 - n) / TMAP_BYTES) return false;
    n += 4 + (size_t)p->n_tmaps * TMAP_BYTES;
    *out = n;
    return true;
}

kiln_status rt_gprog_encode(const rt_gprog *p, void **buf, size_t *n, base_diag *d)
{
    *buf = NULL;
    *n = 0;
    if (p->n_images < 0 || p->n_launches < 0 || p->n_tmaps < 0 || (p->n_images && !p->images) ||
        (p->n_launches && !p->launches) || (p->n_tmaps && !p->tmaps))
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "cuda program: a count is negative or an array is missing");
    for (int i = 0; i < p->n_images; i++)
        if (p->images[i].bytes && !p->images[i].cubin)
            return base_diag_add(d, KILN_ERR_INVALID_ARG, "cuda program: image %d has bytes but no cubin", i);
    size_t total;
    if (!encoded_size(p, &total))
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "cuda program: too large to encode");
    uint8_t *b = base_calloc(total, 1);
    if (!b) return base_diag_add(d, KILN_ERR_OOM, "out of memory encoding the cuda program (%zu bytes)", total);
    memcpy(b, KILN_GPROG_MAGIC, 8);
    put_le(b + 8, (uint64_t)p->precision, 4);
    put_le(b + 12, (uint64_t)p->n_images, 4);
    put_le(b + 16, (uint64_t)p->n_launches, 4);
    put_le(b + 20, p->max_smem, 4);
    put_le(b + 24, p->arena_bytes, 8);
    put_le(b + 32, p->weight_bytes, 8);
    size_t pos = HEADER_BYTES;
    for (int i = 0; i < p->n_images; i++) {
        const rt_gimage *im = &p->images[i];
        put_le(b + pos, (uint64_t)im->sm, 4);
        put_le(b + pos + 4, (uint64_t)im->arch_specific, 4);
        put_le(b + pos + 8, im->bytes, 8);
        pos += IMAGE_HEADER_BYTES;
        if (im->bytes) memcpy(b + pos, im->cubin, im->bytes);
        pos += im->bytes + pad_to(im->bytes, 8); /* calloc'd: the padding is zero */
    }
    for (int i = 0; i < p->n_launches; i++) {
        const rt_glaunch *l = &p->launches[i];
        const char *name = l->name ? l->name : "", *label = l->label ? l->label : "";
        size_t nn = strlen(name), nl = strlen(label);
        int32_t code = l->segment >= 0 ? l->segment : -1 - (l->persistent ? 1 : 0) - (l->early ? 2 : 0);
        put_le(b + pos, (uint64_t)(uint32_t)code, 4);
        put_le(b + pos + 4, l->grid, 4);
        put_le(b + pos + 8, l->block, 4);
        put_le(b + pos + 12, l->smem, 4);
        put_le(b + pos + 16, nn, 4);
        memcpy(b + pos + 20, name, nn);
        pos += 20 + nn;
        put_le(b + pos, nl, 4);
        memcpy(b + pos + 4, label, nl);
        pos += 4 + nl + pad_to(nn + nl, 4);
    }
    put_le(b + pos, (uint64_t)p->n_tmaps, 4);
    pos += 4;
    for (int i = 0; i < p->n_tmaps; i++) {
        const rt_gtmap *m = &p->tmaps[i];
        put_le(b + pos, (uint64_t)m->space, 4);
        put_le(b + pos + 4, (uint64_t)m->dtype, 4);
        put_le(b + pos + 8, m->offset, 8);
        put_le(b + pos + 16, m->dim0, 8);
        put_le(b + pos + 24, m->dim1, 8);
        put_le(b + pos + 32, m->stride1, 8);
        put_le(b + pos + 40, m->box0, 4);
        put_le(b + pos + 44, m->box1, 4);
        put_le(b + pos + 48, (uint64_t)m->im2col, 4);
        put_le(b + pos + 52, m->dim2, 8);
        put_le(b + pos + 60, m->dim3, 8);
        put_le(b + pos + 68, m->stride2, 8);
        put_le(b + pos + 76, m->stride3, 8);
        put_le(b + pos + 84, (uint32_t)m->lower_w, 4);
        put_le(b + pos + 88, (uint32_t)m->lower_h, 4);
        put_le(b + pos + 92, (uint32_t)m->upper_w, 4);
        put_le(b + pos + 96, (uint32_t)m->upper_h, 4);
        put_le(b + pos + 100, m->step_w, 4);
        put_le(b + pos + 104, m->step_h, 4);
        put_le(b + pos + 108, 0, 4);
        pos += TMAP_BYTES;
    }
    KILN_ASSERT(pos == total);
    *buf = b;
    *n = total;
    return KILN_OK;
}

/* ---- reading ----------------------------------------------------------------- */

/* A bounds-checked cursor over the section. After the first failure every
 * read returns zeros and `st` holds the error, so callers check once. */
typedef struct rd {
    const uint8_t *p;
    size_t n, pos;
    char where[48]; /* the entry being read: "image 1", "launch 12" */
    base_diag *d;
    kiln_status st;
} rd;

static kiln_status rd_fail(rd *r, const char *fmt, ...) KILN_PRINTF(2, 3);
static kiln_status rd_fail(rd *r, const char *fmt, ...)
{
    if (r->st != KILN_OK) return r->st;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    r->st = base_diag_add(r->d, KILN_ERR_INVALID_MODEL, "artifact CODE section (cuda program)%s%s: %s",
                          r->where[0] ? ", " : "", r->where, msg);
    return r->st;
}

static const uint8_t *rd_take(rd *r, size_t k, const char *what)
{
    if (r->st != KILN_OK) return NULL;
    if (k > r->n - r->pos) {
        rd_fail(r, "truncated: %s needs %zu bytes at byte offset %zu, the section has %zu left", what, k, r->pos,
                r->n - r->pos);
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += k;
    return p;
}

static uint64_t rd_uint(rd *r, int k, const char *what)
{
    const uint8_t *p = rd_take(r, (size_t)k, what);
    return p ? get_le(p, k) : 0;
}

/* Zero bytes up to the next multiple of align (counted from the section start). */
static void rd_padding(rd *r, size_t align)
{
    size_t at = r->pos, k = pad_to(at, align);
    const uint8_t *p = rd_take(r, k, "padding");
    for (size_t i = 0; p && i < k; i++)
        if (p[i]) {
            rd_fail(r, "padding byte at byte offset %zu is %u, not 0", at + i, p[i]);
            return;
        }
}

/* A string of u32 length and bytes: at most KILN_GPROG_MAX_NAME bytes, no
 * NUL; copied NUL-terminated into the arena. NULL after a failure. */
static const char *rd_string(rd *r, base_arena *arena, const char *what)
{
    size_t at = r->pos;
    uint64_t len = rd_uint(r, 4, what);
    if (r->st != KILN_OK) return NULL;
    if (len > KILN_GPROG_MAX_NAME) {
        rd_fail(r, "%s of %llu bytes (at byte offset %zu) is longer than %d", what, (unsigned long long)len, at,
                KILN_GPROG_MAX_NAME);
        return NULL;
    }
    const uint8_t *s = rd_take(r, (size_t)len, what);
    if (!s) return NULL;
    if (memchr(s, 0, (size_t)len)) {
        rd_fail(r, "%s at byte offset %zu holds a NUL byte", what, at + 4);
        return NULL;
    }
    char *copy = base_arena_strndup(arena, (const char *)s, (size_t)len);
    if (!copy) r->st = base_diag_add(r->d, KILN_ERR_OOM, "out of memory reading the cuda program");
    return copy;
}

static void read_image(rd *r, rt_gprog *p, int i)
{
    rt_gimage *im = &p->images[i];
    size_t at = r->pos;
    uint64_t sm = rd_uint(r, 4, "sm");
    uint64_t arch = rd_uint(r, 4, "arch_specific");
    uint64_t bytes = rd_uint(r, 8, "cubin size");
    if (r->st != KILN_OK) return;
    if (sm < 10 || sm > 1000) {
        rd_fail(r, "sm %llu (at byte offset %zu) is not a compute capability", (unsigned long long)sm, at);
        return;
    }
    if (arch > 1) {
        rd_fail(r, "arch_specific is %llu (at byte offset %zu), not 0 or 1", (unsigned long long)arch, at + 4);
        return;
    }
    if (bytes == 0 || bytes > r->n - r->pos) {
        rd_fail(r, "cubin of %llu bytes at byte offset %zu; the section has %zu left", (unsigned long long)bytes,
                r->pos, r->n - r->pos);
        return;
    }
    im->sm = (int)sm;
    im->arch_specific = (int)arch;
    im->bytes = (size_t)bytes;
    im->cubin = rd_take(r, (size_t)bytes, "cubin");
    rd_padding(r, 8);
    for (int k = 0; k < i && r->st == KILN_OK; k++)
        if (p->images[k].sm == im->sm && p->images[k].arch_specific == im->arch_specific)
            rd_fail(r, "a second image for sm_%d%s (the first is image %d)", im->sm, im->arch_specific ? "a" : "", k);
}

static void read_launch(rd *r, rt_gprog *p, int i)
{
    rt_glaunch *l = &p->launches[i];
    size_t at = r->pos;
    uint64_t seg = rd_uint(r, 4, "segment");
    uint64_t grid = rd_uint(r, 4, "grid");
    uint64_t block = rd_uint(r, 4, "block");
    uint64_t smem = rd_uint(r, 4, "smem");
    size_t name_at = r->pos;
    l->name = rd_string(r, &p->arena, "name");
    l->label = rd_string(r, &p->arena, "label");
    rd_padding(r, 4); /* launches start 8-byte aligned: this pads name + label to 4 */
    if (r->st != KILN_OK) return;
    int32_t segment = (int32_t)(uint32_t)seg;
    l->persistent = segment == -2 || segment == -4;
    l->early = segment == -3 || segment == -4;
    l->segment = segment < 0 ? -1 : segment;
    l->grid = (unsigned)grid;
    l->block = (unsigned)block;
    l->smem = (unsigned)smem;
    if (segment < -4) {
        rd_fail(r,
                "segment %d (at byte offset %zu) is neither -1 (a kernel), -2 (a persistent kernel), -3 / -4 (the "
                "same, launched early) nor a segment index",
                segment, at);
    } else if (segment >= 0) {
        if (grid || block || smem || l->name[0])
            rd_fail(r, "host segment %d (at byte offset %zu) has a kernel name, grid, block or shared memory",
                    segment, at);
    } else if (!l->name[0]) {
        rd_fail(r, "a kernel launch without a kernel name (at byte offset %zu)", name_at);
    } else if (grid < 1 || grid > INT32_MAX) {
        rd_fail(r, "kernel '%s': grid of %llu blocks (at byte offset %zu) is not in 1..%d", l->name,
                (unsigned long long)grid, at + 4, INT32_MAX);
    } else if (block < 32 || block > KILN_GPROG_MAX_BLOCK || block % 32) {
        rd_fail(r, "kernel '%s': block of %llu threads (at byte offset %zu) is not a multiple of 32 in 32..%d",
                l->name, (unsigned long long)block, at + 8, KILN_GPROG_MAX_BLOCK);
    } else if (smem > p->max_smem) {
        rd_fail(r, "kernel '%s': %llu bytes of shared memory (at byte offset %zu) exceed the program's max_smem %u",
                l->name, (unsigned long long)smem, at + 12, p->max_smem);
    }
}

/* Whether the n-dimensional tensor of dims[i] elements strides[i] bytes
 * apart (dims[0]'s of 2 bytes) at byte `offset` lies within space_bytes:
 * each term checked by division, so that no product wraps. */
static bool within_space(uint64_t offset, const uint64_t *dims, const uint64_t *strides, int n, uint64_t space_bytes)
{
    if (offset > space_bytes) return false;
    uint64_t room = space_bytes - offset;
    if (dims[0] > room / 2) return false;
    room -= dims[0] * 2; /* the last element's bytes; the dims above it add their last index's offsets */
    for (int i = 1; i < n; i++) {
        if (dims[i] - 1 > room / strides[i]) return false;
        room -= (dims[i] - 1) * strides[i];
    }
    return true;
}

/* An im2col map's own checks (rt_gtmap_check): NULL when it passes. */
static const char *im2col_why(const rt_gtmap *m, uint64_t space_bytes)
{
    const uint64_t lim = (uint64_t)1 << 40, dim_lim = (uint64_t)1 << 32;
    if (m->dim0 < 1 || m->dim1 < 1 || m->dim2 < 1 || m->dim3 < 1 || m->dim0 > dim_lim || m->dim1 > dim_lim ||
        m->dim2 > dim_lim || m->dim3 > dim_lim)
        return "a dimension is 0 or above 2^32";
    if (m->stride1 % 16 || m->stride2 % 16 || m->stride3 % 16 || m->stride1 < m->dim0 * 2 ||
        m->stride2 / m->dim1 < m->stride1 || m->stride3 / m->dim2 < m->stride2 || m->stride3 > lim)
        return "its strides are not multiples of 16 bytes, each at least the dimension before";
    if (m->lower_w < -128 || m->lower_w > 127 || m->lower_h < -128 || m->lower_h > 127 || m->upper_w < -128 ||
        m->upper_w > 127 || m->upper_h < -128 || m->upper_h > 127)
        return "a corner of its pixel box is outside -128..127";
    if ((int64_t)m->dim1 - 1 + m->upper_w < m->lower_w || (int64_t)m->dim2 - 1 + m->upper_h < m->lower_h)
        return "its pixel box is empty";
    if (m->step_w < 1 || m->step_w > 8 || m->step_h < 1 || m->step_h > 8) return "a traversal step is not 1..8";
    const uint64_t dims[4] = {m->dim0, m->dim1, m->dim2, m->dim3}, strides[4] = {2, m->stride1, m->stride2, m->stride3};
    if (!within_space(m->offset, dims, strides, 4, space_bytes)) return "it reaches beyond its space";
    return NULL;
}

bool rt_gtmap_check(const rt_gtmap *m, uint64_t space_bytes, const char **why)
{
    const uint64_t lim = (uint64_t)1 << 40;
    *why = NULL;
    if (m->space != 0 && m->space != 1) *why = "its space is neither 0 (the arena) nor 1 (the weights)";
    else if (m->dtype != KILN_GPREC_FP16 && m->dtype != KILN_GPREC_BF16) *why = "its dtype is not fp16 or bf16";
    else if (m->im2col != 0 && m->im2col != 1) *why = "its kind is neither 0 (tiled) nor 1 (im2col)";
    else if (m->offset % 16) *why = "its offset is not 16-byte aligned";
    else if (m->box0 < 8 || m->box0 > 64 || m->box0 % 8 || m->box1 < 1 || m->box1 > 256)
        *why = "its box is not 8..64 (a multiple of 8) by 1..256 elements";
    else if (m->im2col) *why = im2col_why(m, space_bytes);
    else if (m->dim0 < 1 || m->dim1 < 1 || m->dim0 > lim || m->dim1 > lim) *why = "a dimension is 0 or too large";
    else if (m->stride1 % 16 || m->stride1 < m->dim0 * 2 || m->stride1 > lim)
        *why = "its stride is not a multiple of 16 bytes at least a row long";
    else if (!within_space(m->offset, (const uint64_t[]){m->dim0, m->dim1}, (const uint64_t[]){2, m->stride1}, 2,
                           space_bytes))
        *why = "it reaches beyond its space";
    return *why == NULL;
}

static void read_tmap(rd *r, rt_gprog *p, int i)
{
    rt_gtmap *m = &p->tmaps[i];
    size_t at = r->pos;
    m->space = (int)rd_uint(r, 4, "space");
    m->dtype = (kiln_gprec)rd_uint(r, 4, "dtype");
    m->offset = rd_uint(r, 8, "offset");
    m->dim0 = rd_uint(r, 8, "dim0");
    m->dim1 = rd_uint(r, 8, "dim1");
    m->stride1 = rd_uint(r, 8, "stride1");
    m->box0 = (unsigned)rd_uint(r, 4, "box0");
    m->box1 = (unsigned)rd_uint(r, 4, "box1");
    m->im2col = (int)rd_uint(r, 4, "im2col");
    m->dim2 = rd_uint(r, 8, "dim2");
    m->dim3 = rd_uint(r, 8, "dim3");
    m->stride2 = rd_uint(r, 8, "stride2");
    m->stride3 = rd_uint(r, 8, "stride3");
    m->lower_w = (int32_t)(uint32_t)rd_uint(r, 4, "lower_w");
    m->lower_h = (int32_t)(uint32_t)rd_uint(r, 4, "lower_h");
    m->upper_w = (int32_t)(uint32_t)rd_uint(r, 4, "upper_w");
    m->upper_h = (int32_t)(uint32_t)rd_uint(r, 4, "upper_h");
    m->step_w = (unsigned)rd_uint(r, 4, "step_w");
    m->step_h = (unsigned)rd_uint(r, 4, "step_h");
    if (rd_uint(r, 4, "padding") != 0 && r->st == KILN_OK) rd_fail(r, "tensor map at byte offset %zu: padding not zero", at);
    const char *why;
    if (r->st == KILN_OK && !rt_gtmap_check(m, m->space == 0 ? p->arena_bytes : p->weight_bytes, &why))
        rd_fail(r, "tensor map at byte offset %zu: %s", at, why);
}

kiln_status rt_gprog_decode(const void *buf, size_t n, rt_gprog *out, base_diag *d)
{
    memset(out, 0, sizeof(*out));
    base_arena_init(&out->arena);
    rd r = {.p = buf, .n = buf ? n : 0, .d = d};
    const uint8_t *magic = rd_take(&r, 8, "magic");
    if (!magic) return r.st;
    if (memcmp(magic, "KGPROG", 6) == 0 && magic[6] >= '1' && magic[6] < KILN_GPROG_MAGIC[6] && !magic[7])
        return rd_fail(&r, "format %c, from an older kiln (this one reads format %c): compile the model again",
                       magic[6], KILN_GPROG_MAGIC[6]);
    if (memcmp(magic, KILN_GPROG_MAGIC, 8) != 0)
        return rd_fail(&r, "bad magic (expected \"%s\"): not a cuda program", KILN_GPROG_MAGIC);
    uint64_t prec = rd_uint(&r, 4, "precision");
    uint64_t n_images = rd_uint(&r, 4, "n_images");
    uint64_t n_launches = rd_uint(&r, 4, "n_launches");
    uint64_t max_smem = rd_uint(&r, 4, "max_smem");
    out->arena_bytes = rd_uint(&r, 8, "arena_bytes");
    out->weight_bytes = rd_uint(&r, 8, "weight_bytes");
    if (r.st != KILN_OK) return r.st;
    if (prec > KILN_GPREC_BF16) return rd_fail(&r, "unknown precision %llu (byte offset 8)", (unsigned long long)prec);
    if (n_images > KILN_GPROG_MAX_IMAGES || n_images > (r.n - r.pos) / (IMAGE_HEADER_BYTES + 8))
        return rd_fail(&r, "%llu images (byte offset 12) cannot fit: at most %d, each at least %d bytes",
                       (unsigned long long)n_images, KILN_GPROG_MAX_IMAGES, IMAGE_HEADER_BYTES + 8);
    if (n_launches > KILN_GPROG_MAX_LAUNCHES || n_launches > (r.n - r.pos) / LAUNCH_MIN_BYTES)
        return rd_fail(&r, "%llu launches (byte offset 16) cannot fit: at most %d, each at least %d bytes",
                       (unsigned long long)n_launches, KILN_GPROG_MAX_LAUNCHES, LAUNCH_MIN_BYTES);
    if (max_smem > KILN_GPROG_MAX_SMEM)
        return rd_fail(&r, "max_smem of %llu bytes (byte offset 20) is above %d", (unsigned long long)max_smem,
                       KILN_GPROG_MAX_SMEM);
    out->precision = (kiln_gprec)prec;
    out->max_smem = (unsigned)max_smem;
    out->images = base_arena_alloc(&out->arena, (size_t)(n_images + 1) * sizeof(rt_gimage));
    out->launches = base_arena_alloc(&out->arena, (size_t)(n_launches + 1) * sizeof(rt_glaunch));
    if (!out->images || !out->launches)
        return base_diag_add(d, KILN_ERR_OOM, "out of memory reading the cuda program (%llu launches)",
                             (unsigned long long)n_launches);
    for (int i = 0; i < (int)n_images && r.st == KILN_OK; i++) {
        snprintf(r.where, sizeof(r.where), "image %d", i);
        read_image(&r, out, i);
        out->n_images = i + 1;
    }
    bool any_kernel = false;
    for (int i = 0; i < (int)n_launches && r.st == KILN_OK; i++) {
        snprintf(r.where, sizeof(r.where), "launch %d", i);
        read_launch(&r, out, i);
        out->n_launches = i + 1;
        any_kernel |= out->launches[i].segment < 0;
    }
    r.where[0] = 0;
    uint64_t n_tmaps = rd_uint(&r, 4, "n_tmaps");
    if (r.st != KILN_OK) return r.st;
    if (n_tmaps > KILN_GPROG_MAX_TMAPS || n_tmaps > (r.n - r.pos) / TMAP_BYTES)
        return rd_fail(&r, "%llu tensor maps (byte offset %zu) cannot fit: at most %d, each %d bytes",
                       (unsigned long long)n_tmaps, r.pos - 4, KILN_GPROG_MAX_TMAPS, TMAP_BYTES);
    out->tmaps = base_arena_alloc(&out->arena, (size_t)(n_tmaps + 1) * sizeof(rt_gtmap));
    if (!out->tmaps) return base_diag_add(d, KILN_ERR_OOM, "out of memory reading the cuda program's tensor maps");
    for (int i = 0; i < (int)n_tmaps && r.st == KILN_OK; i++) {
        snprintf(r.where, sizeof(r.where), "tensor map %d", i);
        read_tmap(&r, out, i);
        out->n_tmaps = i + 1;
    }
    r.where[0] = 0;
    if (r.st != KILN_OK) return r.st;
    if (r.pos != r.n) return rd_fail(&r, "%zu unexpected bytes at its end (byte offset %zu)", r.n - r.pos, r.pos);
    if (any_kernel && out->n_images == 0) return rd_fail(&r, "kernel launches but no cubin image");
    return KILN_OK;
}

void rt_gprog_free(rt_gprog *p)
{
    base_arena_free(&p->arena);
    memset(p, 0, sizeof(*p));
}

/* SASS runs only on its own major architecture, on minors not older than
 * its own; an arch-specific image (sm_90a) only on exactly its version. */
const rt_gimage *rt_gprog_pick_image(const rt_gprog *p, int major, int minor)
{
    int dev = major * 10 + minor;
    const rt_gimage *best = NULL;
    for (int i = 0; i < p->n_images; i++) {
        const rt_gimage *im = &p->images[i];
        if (im->arch_specific) {
            if (im->sm == dev) return im;
            continue;
        }
        if (im->sm / 10 == major && im->sm <= dev && (!best || im->sm > best->sm)) best = im;
    }
    return best;
}
