/*
 * artifact.c: writing and reading `.kiln` artifacts (layout in artifact.h).
 *
 * The writer lays sections out in the order SIGNATURE, PLAN, META,
 * SEGMENTS, CODE, WEIGHTS, each at a 64-byte boundary, weights last so a
 * loader can map them in place. The reader is written for hostile input: it
 * reads through a bounds-checked cursor, checks every count against the
 * bytes left before allocating for it, and stops at the first problem with a
 * message naming the section, the entry and the file offset.
 */
#include "runtime/artifact.h"

#include "ir/ir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const section_names[RT_SEC_COUNT] = {
    [RT_SEC_SIGNATURE] = "SIGNATURE", [RT_SEC_PLAN] = "PLAN",         [RT_SEC_CODE] = "CODE",
    [RT_SEC_WEIGHTS] = "WEIGHTS",     [RT_SEC_SEGMENTS] = "SEGMENTS", [RT_SEC_META] = "META",
};

static const char *const binding_names[RT_BIND_COUNT] = {
    [RT_BIND_ARENA] = "arena",
    [RT_BIND_WEIGHTS] = "weights",
    [RT_BIND_INPUT] = "model input",
    [RT_BIND_OUTPUT] = "model output",
};

const char *rt_section_name(int kind)
{
    return kind > 0 && kind < RT_SEC_COUNT ? section_names[kind] : "?";
}

const char *rt_binding_kind_name(int kind)
{
    return kind > 0 && kind < RT_BIND_COUNT ? binding_names[kind] : "?";
}

#define TABLE_ENTRY_BYTES 24
#define BINDING_MIN_BYTES 24
#define TENSOR_MIN_BYTES 12

static uint64_t align_up(uint64_t x) { return (x + RT_ARTIFACT_ALIGN - 1) & ~(uint64_t)(RT_ARTIFACT_ALIGN - 1); }

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

/* A growing byte buffer; `oom` sticks once an allocation failed. */
typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void wb_bytes(wbuf *b, const void *src, size_t n)
{
    if (b->oom || n == 0) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = base_realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void wb_u32(wbuf *b, uint32_t v)
{
    uint8_t t[4];
    put_le(t, v, 4);
    wb_bytes(b, t, 4);
}

static void wb_u64(wbuf *b, uint64_t v)
{
    uint8_t t[8];
    put_le(t, v, 8);
    wb_bytes(b, t, 8);
}

static void wb_type(wbuf *b, kiln_dtype dtype, int rank, const int64_t *dims)
{
    wb_u32(b, (uint32_t)dtype);
    wb_u32(b, (uint32_t)rank);
    for (int i = 0; i < rank; i++) wb_u64(b, (uint64_t)dims[i]);
}

static void wb_binding(wbuf *b, const rt_binding *x)
{
    wb_u32(b, (uint32_t)x->kind);
    wb_u32(b, x->kind == RT_BIND_INPUT || x->kind == RT_BIND_OUTPUT ? (uint32_t)x->io : 0);
    wb_u64(b, x->offset);
    wb_type(b, x->dtype, x->rank, x->dims);
}

static kiln_status check_rank(int rank, const char *what, int i, base_diag *d)
{
    if (rank < 0 || rank > KILN_RT_MAX_RANK)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "artifact: %s %d has rank %d (0 to %d)", what, i, rank,
                             KILN_RT_MAX_RANK);
    return KILN_OK;
}

/* Only what is needed to encode at all is checked here; everything else is
 * the reader's job (rt_artifact_write runs it on the result). */
static kiln_status check_encodable(const rt_artifact_desc *a, base_diag *d)
{
    if (!a->target || strlen(a->target) >= RT_ARTIFACT_NAME_CHARS)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "artifact: target name missing or longer than %d bytes",
                             RT_ARTIFACT_NAME_CHARS - 1);
    if (!a->isa || strlen(a->isa) >= RT_ARTIFACT_NAME_CHARS)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "artifact: ISA name missing or longer than %d bytes",
                             RT_ARTIFACT_NAME_CHARS - 1);
    if (a->n_inputs < 0 || a->n_outputs < 0 || a->n_segments < 0 || (a->n_inputs && !a->inputs) ||
        (a->n_outputs && !a->outputs) || (a->n_segments && !a->segments) || (a->code_bytes && !a->code) ||
        (a->weight_bytes && !a->weights))
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "artifact: a count is negative or an array is missing");
    for (int i = 0; i < a->n_inputs + a->n_outputs; i++) {
        const kiln_rt_tensor_info *t = i < a->n_inputs ? &a->inputs[i] : &a->outputs[i - a->n_inputs];
        KILN_TRY(check_rank(t->rank, i < a->n_inputs ? "input" : "output", i, d));
        if (!t->name || strlen(t->name) > UINT32_MAX)
            return base_diag_add(d, KILN_ERR_INVALID_ARG, "artifact: tensor %d has no name", i);
    }
    for (int s = 0; s < a->n_segments; s++) {
        const rt_segment_desc *g = &a->segments[s];
        if (g->n_in < 0 || g->n_out < 0 || (g->n_in && !g->in) || (g->n_out && !g->out) ||
            (g->onnx_bytes && !g->onnx))
            return base_diag_add(d, KILN_ERR_INVALID_ARG, "artifact: segment %d: bad counts or missing arrays", s);
        for (int i = 0; i < g->n_in + g->n_out; i++)
            KILN_TRY(check_rank(i < g->n_in ? g->in[i].rank : g->out[i - g->n_in].rank, "segment binding", i, d));
    }
    return KILN_OK;
}

typedef struct section {
    int kind;
    const void *p;
    size_t n;
} section;

kiln_status rt_artifact_encode(const rt_artifact_desc *a, void **buf, size_t *n, base_diag *d)
{
    *buf = NULL;
    *n = 0;
    KILN_TRY(check_encodable(a, d));

    wbuf sig = {0}, plan = {0}, segs = {0}, file = {0};
    wb_u32(&sig, (uint32_t)a->n_inputs);
    wb_u32(&sig, (uint32_t)a->n_outputs);
    for (int i = 0; i < a->n_inputs + a->n_outputs; i++) {
        const kiln_rt_tensor_info *t = i < a->n_inputs ? &a->inputs[i] : &a->outputs[i - a->n_inputs];
        size_t len = strlen(t->name);
        wb_u32(&sig, (uint32_t)len);
        wb_bytes(&sig, t->name, len);
        wb_type(&sig, t->dtype, t->rank, t->dims);
    }
    wb_u64(&plan, a->arena_bytes);
    wb_u64(&plan, a->scratch_bytes);
    wb_u32(&plan, (uint32_t)a->default_threads);
    wb_u32(&plan, 0);
    if (a->n_segments) {
        wb_u32(&segs, (uint32_t)a->n_segments);
        for (int s = 0; s < a->n_segments; s++) {
            const rt_segment_desc *g = &a->segments[s];
            wb_u64(&segs, g->onnx_bytes);
            wb_u32(&segs, (uint32_t)g->n_in);
            wb_u32(&segs, (uint32_t)g->n_out);
            wb_bytes(&segs, g->onnx, g->onnx_bytes);
            for (int i = 0; i < g->n_in; i++) wb_binding(&segs, &g->in[i]);
            for (int i = 0; i < g->n_out; i++) wb_binding(&segs, &g->out[i]);
        }
    }

    section sec[RT_SEC_COUNT];
    int ns = 0;
    sec[ns++] = (section){RT_SEC_SIGNATURE, sig.p, sig.n};
    sec[ns++] = (section){RT_SEC_PLAN, plan.p, plan.n};
    if (a->meta) sec[ns++] = (section){RT_SEC_META, a->meta, strlen(a->meta)};
    if (a->n_segments) sec[ns++] = (section){RT_SEC_SEGMENTS, segs.p, segs.n};
    sec[ns++] = (section){RT_SEC_CODE, a->code, a->code_bytes};
    sec[ns++] = (section){RT_SEC_WEIGHTS, a->weights, a->weight_bytes};

    uint64_t off[RT_SEC_COUNT];
    uint64_t pos = align_up(RT_ARTIFACT_HEADER_BYTES + (uint64_t)ns * TABLE_ENTRY_BYTES);
    for (int i = 0; i < ns; i++) {
        off[i] = pos;
        pos = align_up(pos + sec[i].n);
    }
    kiln_status st = KILN_OK;
    if (sig.oom || plan.oom || segs.oom || pos > SIZE_MAX) {
        st = base_diag_add(d, KILN_ERR_OOM, "out of memory encoding the artifact");
        goto out;
    }
    file.p = base_calloc((size_t)pos, 1);
    if (!file.p) {
        st = base_diag_add(d, KILN_ERR_OOM, "out of memory encoding the artifact (%llu bytes)",
                           (unsigned long long)pos);
        goto out;
    }
    uint8_t *h = file.p;
    memcpy(h, RT_ARTIFACT_MAGIC, 8);
    put_le(h + 8, RT_ARTIFACT_VERSION, 4);
    put_le(h + 12, RT_ARTIFACT_HEADER_BYTES, 4);
    put_le(h + 16, pos, 8);
    put_le(h + 24, (uint64_t)ns, 4);
    snprintf((char *)h + 32, RT_ARTIFACT_VERSION_CHARS, "%s", KILN_VERSION);
    memcpy(h + 64, a->target, strlen(a->target));
    memcpy(h + 80, a->isa, strlen(a->isa));
    for (int i = 0; i < ns; i++) {
        uint8_t *e = h + RT_ARTIFACT_HEADER_BYTES + i * TABLE_ENTRY_BYTES;
        put_le(e, (uint64_t)sec[i].kind, 4);
        put_le(e + 8, off[i], 8);
        put_le(e + 16, sec[i].n, 8);
        if (sec[i].n) memcpy(h + off[i], sec[i].p, sec[i].n);
    }
    *buf = file.p;
    *n = (size_t)pos;
out:
    base_free(sig.p);
    base_free(plan.p);
    base_free(segs.p);
    return st;
}

kiln_status rt_artifact_write(const char *path, const rt_artifact_desc *a, base_diag *d)
{
    void *buf;
    size_t n;
    KILN_TRY(rt_artifact_encode(a, &buf, &n, d));
    /* Read it back: the compiler gets the loader's verdict now, not at deployment. */
    rt_artifact back;
    base_diag rd;
    base_diag_init(&rd);
    kiln_status st = rt_artifact_read(buf, n, &back, &rd);
    rt_artifact_free(&back);
    if (st != KILN_OK) {
        st = base_diag_add(d, st == KILN_ERR_OOM ? st : KILN_ERR_INVALID_ARG,
                           "artifact description is inconsistent: %s", base_diag_text(&rd));
        base_diag_free(&rd);
        base_free(buf);
        return st;
    }
    base_diag_free(&rd);

    /* Write a temporary file and rename it over path: a process that has the
     * old artifact's weights mapped keeps reading the old inode, intact. */
    size_t plen = strlen(path);
    char *tmp = base_malloc(plen + 32);
    if (!tmp) {
        base_free(buf);
        return base_diag_add(d, KILN_ERR_OOM, "out of memory writing '%s'", path);
    }
    snprintf(tmp, plen + 32, "%s.tmp%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        st = base_diag_add(d, KILN_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
        goto out;
    }
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const uint8_t *)buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            st = base_diag_add(d, KILN_ERR_IO, "cannot write '%s': %s", tmp, w < 0 ? strerror(errno) : "short write");
            break;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0 && st == KILN_OK)
        st = base_diag_add(d, KILN_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    if (st == KILN_OK && rename(tmp, path) != 0)
        st = base_diag_add(d, KILN_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (st != KILN_OK) unlink(tmp);
out:
    base_free(tmp);
    base_free(buf);
    return st;
}

/* ---- reading ----------------------------------------------------------------- */

/* A bounds-checked cursor over one section. After the first failure every
 * read returns zeros and `st` holds the error, so callers check once. */
typedef struct rd {
    const uint8_t *p;
    size_t n, pos;
    uint64_t file_off; /* the section's offset in the file, for messages */
    const char *sec;
    char where[96];    /* the entry being read: "input 2", "segment 0 output 1" */
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
    r->st = base_diag_add(r->d, KILN_ERR_INVALID_MODEL, "artifact %s section%s%s: %s", r->sec, r->where[0] ? ", " : "",
                          r->where, msg);
    return r->st;
}

static const uint8_t *rd_take(rd *r, size_t k, const char *what)
{
    if (r->st != KILN_OK) return NULL;
    if (k > r->n - r->pos) {
        rd_fail(r, "truncated: %s needs %zu bytes at file offset %llu, the section has %zu left", what, k,
                (unsigned long long)(r->file_off + r->pos), r->n - r->pos);
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

static void rd_end(rd *r)
{
    if (r->st == KILN_OK && r->pos != r->n) {
        r->where[0] = 0;
        rd_fail(r, "%zu unexpected bytes at its end (file offset %llu)", r->n - r->pos,
                (unsigned long long)(r->file_off + r->pos));
    }
}

/* Reads {u32 dtype, u32 rank, i64 dims[rank]} and checks it describes a
 * tensor of at most RT_ARTIFACT_MAX_BYTES. Where `dynamic_ok`, a dim of -1
 * marks a shape known only after a run (a model output that depends on the
 * input data); such a tensor has 0 bytes here. */
static void rd_type(rd *r, kiln_dtype *dtype, int *rank, int64_t *dims, size_t *nbytes, bool dynamic_ok)
{
    uint64_t dt = rd_uint(r, 4, "dtype");
    uint64_t rk = rd_uint(r, 4, "rank");
    if (r->st != KILN_OK) return;
    if (dt == KILN_UNDEF || dt >= KILN_DTYPE_COUNT) {
        rd_fail(r, "unknown dtype %llu", (unsigned long long)dt);
        return;
    }
    if (ir_dtype_size((kiln_dtype)dt) == 0) {
        rd_fail(r, "dtype %s has no fixed size", kiln_dtype_name((kiln_dtype)dt));
        return;
    }
    if (rk > KILN_RT_MAX_RANK) {
        rd_fail(r, "rank %llu is above %d", (unsigned long long)rk, KILN_RT_MAX_RANK);
        return;
    }
    *dtype = (kiln_dtype)dt;
    *rank = (int)rk;
    uint64_t bytes = ir_dtype_size(*dtype);
    bool zero = false;
    for (int i = 0; i < *rank; i++) {
        uint64_t v = rd_uint(r, 8, "dims");
        if (r->st != KILN_OK) return;
        if (v == UINT64_MAX && dynamic_ok) {
            dims[i] = -1;
            zero = true;
            continue;
        }
        if (v > (uint64_t)INT64_MAX) {
            rd_fail(r, "dim %d is negative (%lld)", i, (long long)v);
            return;
        }
        dims[i] = (int64_t)v;
        if (v == 0) zero = true;
        else if (!zero && (bytes > RT_ARTIFACT_MAX_BYTES / v || (bytes *= v) > RT_ARTIFACT_MAX_BYTES)) {
            rd_fail(r, "the tensor is larger than 2^40 bytes");
            return;
        }
    }
    *nbytes = zero ? 0 : (size_t)bytes;
}

static void rd_type_str(char *buf, size_t n, kiln_dtype dtype, int rank, const int64_t *dims)
{
    ir_tensor t = {.dtype = dtype, .rank = rank};
    memcpy(t.dims, dims, (size_t)rank * sizeof(dims[0]));
    ir_tensor_type_str(&t, buf, n);
}

static void read_plan(rd *r, rt_artifact_desc *a)
{
    a->arena_bytes = rd_uint(r, 8, "arena_bytes");
    a->scratch_bytes = rd_uint(r, 8, "scratch_bytes");
    uint64_t threads = rd_uint(r, 4, "default_threads");
    rd_uint(r, 4, "reserved");
    rd_end(r);
    if (r->st != KILN_OK) return;
    if (a->arena_bytes > RT_ARTIFACT_MAX_BYTES)
        rd_fail(r, "arena of %llu bytes is above 2^40", (unsigned long long)a->arena_bytes);
    else if (a->scratch_bytes > RT_ARTIFACT_MAX_BYTES)
        rd_fail(r, "scratch of %llu bytes per vEU is above 2^40", (unsigned long long)a->scratch_bytes);
    else if (threads < 1 || threads > RT_MAX_THREADS)
        rd_fail(r, "default thread count %llu is not in 1..%d", (unsigned long long)threads, RT_MAX_THREADS);
    else
        a->default_threads = (int)threads;
}

static void read_signature(rd *r, rt_artifact *art)
{
    rt_artifact_desc *a = &art->desc;
    uint64_t n_in = rd_uint(r, 4, "n_inputs");
    uint64_t n_out = rd_uint(r, 4, "n_outputs");
    if (r->st != KILN_OK) return;
    if (n_in + n_out > RT_ARTIFACT_MAX_IO || n_in + n_out > (r->n - r->pos) / TENSOR_MIN_BYTES) {
        rd_fail(r, "%llu inputs and %llu outputs cannot fit in its %zu bytes", (unsigned long long)n_in,
                (unsigned long long)n_out, r->n);
        return;
    }
    kiln_rt_tensor_info *ts = base_arena_alloc(&art->arena, (size_t)(n_in + n_out + 1) * sizeof(*ts));
    if (!ts) {
        r->st = base_diag_add(r->d, KILN_ERR_OOM, "out of memory reading the artifact");
        return;
    }
    for (int i = 0; i < (int)(n_in + n_out) && r->st == KILN_OK; i++) {
        kiln_rt_tensor_info *t = &ts[i];
        snprintf(r->where, sizeof(r->where), "%s %d", i < (int)n_in ? "input" : "output",
                 i < (int)n_in ? i : i - (int)n_in);
        uint64_t len = rd_uint(r, 4, "name length");
        if (r->st != KILN_OK) break;
        if (len > RT_ARTIFACT_MAX_NAME) {
            rd_fail(r, "name of %llu bytes is longer than %d", (unsigned long long)len, RT_ARTIFACT_MAX_NAME);
            break;
        }
        const uint8_t *name = rd_take(r, (size_t)len, "name");
        if (!name) break;
        if (memchr(name, 0, (size_t)len)) {
            rd_fail(r, "the name holds a NUL byte");
            break;
        }
        t->name = base_arena_strndup(&art->arena, (const char *)name, (size_t)len);
        if (!t->name) {
            r->st = base_diag_add(r->d, KILN_ERR_OOM, "out of memory reading the artifact");
            break;
        }
        rd_type(r, &t->dtype, &t->rank, t->dims, &t->nbytes, i >= (int)n_in);
    }
    r->where[0] = 0;
    rd_end(r);
    a->n_inputs = (int)n_in;
    a->n_outputs = (int)n_out;
    a->inputs = ts;
    a->outputs = ts + n_in;
}

/* A segment binding: inside its region, aligned, a kind its direction allows. */
static void read_binding(rd *r, const rt_artifact_desc *a, bool is_out, rt_binding *b)
{
    uint64_t kind = rd_uint(r, 4, "binding kind");
    uint64_t io = rd_uint(r, 4, "io index");
    uint64_t off = rd_uint(r, 8, "offset");
    size_t nbytes = 0;
    rd_type(r, &b->dtype, &b->rank, b->dims, &nbytes, is_out && kind == RT_BIND_OUTPUT);
    if (r->st != KILN_OK) return;
    b->kind = (int)kind;
    b->offset = off;
    b->io = 0;
    uint64_t region = 0;
    const char *region_name = NULL;
    char buf[64];
    switch (kind) {
    case RT_BIND_ARENA:
        region = a->arena_bytes;
        region_name = "the arena";
        break;
    case RT_BIND_WEIGHTS:
        if (is_out) {
            rd_fail(r, "an output is bound to the weights, which are read-only");
            return;
        }
        region = a->weight_bytes;
        region_name = "the weights";
        break;
    case RT_BIND_INPUT:
    case RT_BIND_OUTPUT: {
        bool in = kind == RT_BIND_INPUT;
        if (in && is_out) {
            rd_fail(r, "an output is bound to model input %llu, which is read-only", (unsigned long long)io);
            return;
        }
        int n = in ? a->n_inputs : a->n_outputs;
        if (io >= (uint64_t)n) {
            rd_fail(r, "bound to model %s %llu; the model has %d", in ? "input" : "output", (unsigned long long)io, n);
            return;
        }
        b->io = (int)io;
        region = in ? a->inputs[io].nbytes : a->outputs[io].nbytes;
        snprintf(buf, sizeof(buf), "model %s %d", in ? "input" : "output", (int)io);
        region_name = buf;
        break;
    }
    default:
        rd_fail(r, "unknown binding kind %llu", (unsigned long long)kind);
        return;
    }
    size_t esize = ir_dtype_size(b->dtype);
    char ts[160];
    if (off % esize != 0) {
        rd_type_str(ts, sizeof(ts), b->dtype, b->rank, b->dims);
        rd_fail(r, "%s at offset %llu of %s is not aligned to its %zu-byte elements", ts, (unsigned long long)off,
                region_name, esize);
    } else if (off > region || nbytes > region - off) {
        rd_type_str(ts, sizeof(ts), b->dtype, b->rank, b->dims);
        rd_fail(r, "%s (%zu bytes) at offset %llu lies outside %s (%llu bytes)", ts, nbytes, (unsigned long long)off,
                region_name, (unsigned long long)region);
    }
}

static void read_segments(rd *r, rt_artifact *art)
{
    rt_artifact_desc *a = &art->desc;
    uint64_t n = rd_uint(r, 4, "n_segments");
    if (r->st != KILN_OK) return;
    /* a segment takes at least 16 bytes plus a non-empty model */
    if (n > RT_ARTIFACT_MAX_SEGMENTS || n > (r->n - r->pos) / 17) {
        rd_fail(r, "%llu segments cannot fit in its %zu bytes", (unsigned long long)n, r->n);
        return;
    }
    rt_segment_desc *segs = base_arena_alloc(&art->arena, (size_t)(n + 1) * sizeof(*segs));
    if (!segs) {
        r->st = base_diag_add(r->d, KILN_ERR_OOM, "out of memory reading the artifact");
        return;
    }
    for (int s = 0; s < (int)n && r->st == KILN_OK; s++) {
        rt_segment_desc *g = &segs[s];
        snprintf(r->where, sizeof(r->where), "segment %d", s);
        uint64_t onnx_bytes = rd_uint(r, 8, "ONNX size");
        uint64_t n_in = rd_uint(r, 4, "n_in");
        uint64_t n_out = rd_uint(r, 4, "n_out");
        if (r->st != KILN_OK) break;
        if (onnx_bytes == 0 || onnx_bytes > r->n - r->pos) {
            rd_fail(r, "ONNX model of %llu bytes; the section has %zu left", (unsigned long long)onnx_bytes,
                    r->n - r->pos);
            break;
        }
        g->onnx = rd_take(r, (size_t)onnx_bytes, "ONNX model");
        g->onnx_bytes = (size_t)onnx_bytes;
        if (n_in + n_out > RT_ARTIFACT_MAX_IO || n_in + n_out > (r->n - r->pos) / BINDING_MIN_BYTES) {
            rd_fail(r, "%llu input and %llu output bindings cannot fit in the %zu bytes left",
                    (unsigned long long)n_in, (unsigned long long)n_out, r->n - r->pos);
            break;
        }
        rt_binding *bs = base_arena_alloc(&art->arena, (size_t)(n_in + n_out + 1) * sizeof(*bs));
        if (!bs) {
            r->st = base_diag_add(r->d, KILN_ERR_OOM, "out of memory reading the artifact");
            break;
        }
        for (int i = 0; i < (int)(n_in + n_out) && r->st == KILN_OK; i++) {
            bool is_out = i >= (int)n_in;
            snprintf(r->where, sizeof(r->where), "segment %d %s %d", s, is_out ? "output" : "input",
                     is_out ? i - (int)n_in : i);
            read_binding(r, a, is_out, &bs[i]);
        }
        g->n_in = (int)n_in;
        g->in = bs;
        g->n_out = (int)n_out;
        g->out = bs + n_in;
    }
    r->where[0] = 0;
    rd_end(r);
    a->n_segments = (int)n;
    a->segments = segs;
    art->segments = segs;
}

static void read_meta(rd *r, rt_artifact *art)
{
    if (memchr(r->p, 0, r->n)) {
        rd_fail(r, "the text holds a NUL byte");
        return;
    }
    char *meta = base_arena_strndup(&art->arena, (const char *)r->p, r->n);
    if (!meta) r->st = base_diag_add(r->d, KILN_ERR_OOM, "out of memory reading the artifact");
    art->desc.meta = meta;
}

/* A NUL-terminated string in a fixed header field of n bytes. */
static const char *header_string(rt_artifact *art, const uint8_t *field, size_t n, const char *what, base_diag *d,
                                 kiln_status *st)
{
    if (*st != KILN_OK) return NULL;
    const uint8_t *nul = memchr(field, 0, n);
    if (!nul || nul == field) {
        *st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact header: the %s field is %s", what,
                            nul ? "empty" : "not NUL-terminated");
        return NULL;
    }
    char *s = base_arena_strndup(&art->arena, (const char *)field, (size_t)(nul - field));
    if (!s) *st = base_diag_add(d, KILN_ERR_OOM, "out of memory reading the artifact");
    return s;
}

kiln_status rt_artifact_read(const void *buf, size_t n, rt_artifact *art, base_diag *d)
{
    memset(art, 0, sizeof(*art));
    base_arena_init(&art->arena);
    const uint8_t *p = buf;
    if (!p || n < RT_ARTIFACT_HEADER_BYTES)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "not a kiln artifact: %zu bytes, shorter than the %d-byte header", n,
                             RT_ARTIFACT_HEADER_BYTES);
    if (memcmp(p, RT_ARTIFACT_MAGIC, 8) != 0)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "not a kiln artifact: bad magic (expected \"KILNART\")");
    uint32_t version = (uint32_t)get_le(p + 8, 4);
    if (version > RT_ARTIFACT_VERSION)
        return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                             "artifact format version %u is newer than this runtime's (%d): rebuild the artifact or "
                             "update kiln", version, RT_ARTIFACT_VERSION);
    if (version != RT_ARTIFACT_VERSION)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact header: bad format version %u", version);
    uint32_t header_bytes = (uint32_t)get_le(p + 12, 4);
    uint64_t file_bytes = get_le(p + 16, 8);
    uint32_t ns = (uint32_t)get_le(p + 24, 4);
    uint32_t flags = (uint32_t)get_le(p + 28, 4);
    if (header_bytes != RT_ARTIFACT_HEADER_BYTES)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact header: header size %u, expected %d", header_bytes,
                             RT_ARTIFACT_HEADER_BYTES);
    if (file_bytes != n)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                             "artifact header: the file should be %llu bytes but is %zu (truncated or padded)",
                             (unsigned long long)file_bytes, n);
    if (flags != 0)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact header: unknown flags 0x%x", flags);
    if (ns == 0 || ns >= RT_SEC_COUNT)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact header: %u sections (1 to %d)", ns,
                             RT_SEC_COUNT - 1);
    uint64_t table_end = RT_ARTIFACT_HEADER_BYTES + (uint64_t)ns * TABLE_ENTRY_BYTES;
    if (table_end > n)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact: the section table (%u entries) runs past the end",
                             ns);
    kiln_status st = KILN_OK;
    art->format_version = version;
    art->kiln_version = header_string(art, p + 32, RT_ARTIFACT_VERSION_CHARS, "kiln version", d, &st);
    art->desc.target = header_string(art, p + 64, RT_ARTIFACT_NAME_CHARS, "target", d, &st);
    art->desc.isa = header_string(art, p + 80, RT_ARTIFACT_NAME_CHARS, "ISA", d, &st);
    if (st != KILN_OK) return st;

    /* The section table: known kinds, once each, aligned, inside the file,
     * after the table, and not overlapping. */
    uint64_t off[RT_SEC_COUNT] = {0}, size[RT_SEC_COUNT] = {0};
    bool have[RT_SEC_COUNT] = {false};
    for (uint32_t i = 0; i < ns; i++) {
        const uint8_t *e = p + RT_ARTIFACT_HEADER_BYTES + i * TABLE_ENTRY_BYTES;
        uint32_t kind = (uint32_t)get_le(e, 4);
        uint64_t o = get_le(e + 8, 8), s = get_le(e + 16, 8);
        if (kind == 0 || kind >= RT_SEC_COUNT)
            return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact section table entry %u: unknown kind %u", i,
                                 kind);
        const char *name = section_names[kind];
        if (have[kind])
            return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact: the %s section appears twice", name);
        if (o % RT_ARTIFACT_ALIGN)
            return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                                 "artifact %s section: offset %llu is not a multiple of %d", name,
                                 (unsigned long long)o, RT_ARTIFACT_ALIGN);
        if (o < table_end || o > n || s > n - o)
            return base_diag_add(d, KILN_ERR_INVALID_MODEL,
                                 "artifact %s section: bytes %llu..%llu lie outside the file's sections "
                                 "(%llu..%zu)", name, (unsigned long long)o, (unsigned long long)(o + s),
                                 (unsigned long long)table_end, n);
        for (int k = 1; k < RT_SEC_COUNT; k++)
            if (have[k] && s && size[k] && o < off[k] + size[k] && off[k] < o + s)
                return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact: the %s and %s sections overlap", name,
                                     section_names[k]);
        have[kind] = true;
        off[kind] = o;
        size[kind] = s;
    }
    static const int required[] = {RT_SEC_SIGNATURE, RT_SEC_PLAN, RT_SEC_CODE, RT_SEC_WEIGHTS};
    for (size_t i = 0; i < KILN_COUNT(required); i++)
        if (!have[required[i]])
            return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact: the %s section is missing",
                                 section_names[required[i]]);

    rt_artifact_desc *a = &art->desc;
    if (size[RT_SEC_CODE] == 0)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "artifact CODE section: empty");
    a->code = p + off[RT_SEC_CODE];
    a->code_bytes = (size_t)size[RT_SEC_CODE];
    a->weights = p + off[RT_SEC_WEIGHTS];
    a->weight_bytes = (size_t)size[RT_SEC_WEIGHTS];
    art->code_offset = off[RT_SEC_CODE];
    art->weights_offset = off[RT_SEC_WEIGHTS];

    /* Segment bindings refer to the plan, the signature and the weights: read those first. */
    static const int order[] = {RT_SEC_PLAN, RT_SEC_SIGNATURE, RT_SEC_SEGMENTS, RT_SEC_META};
    for (size_t i = 0; i < KILN_COUNT(order); i++) {
        int k = order[i];
        if (!have[k]) continue;
        rd r = {.p = p + off[k], .n = (size_t)size[k], .file_off = off[k], .sec = section_names[k], .d = d};
        switch (k) {
        case RT_SEC_PLAN: read_plan(&r, a); break;
        case RT_SEC_SIGNATURE: read_signature(&r, art); break;
        case RT_SEC_SEGMENTS: read_segments(&r, art); break;
        case RT_SEC_META: read_meta(&r, art); break;
        }
        if (r.st != KILN_OK) return r.st;
    }
    return KILN_OK;
}

void rt_artifact_free(rt_artifact *a)
{
    base_arena_free(&a->arena);
    memset(a, 0, sizeof(*a));
}

void rt_artifact_forget_buffer(rt_artifact *a)
{
    a->desc.code = NULL;
    a->desc.weights = NULL;
    for (int i = 0; i < a->desc.n_segments; i++) a->segments[i].onnx = NULL;
}
