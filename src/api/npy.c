/*
 * npy.c: NumPy .npy and .npz files (see npy.h).
 *
 * An .npy file is a magic string, a version, a header length, then a Python
 * dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and a newline, then the raw C-order data. The dict is
 * parsed by a small recursive-descent reader that accepts exactly what NumPy
 * writes (any key order, either quote, a trailing comma) and rejects the rest
 * with a message naming the file and what was expected.
 *
 * An .npz is a ZIP archive with one .npy member per array. Sizes and offsets
 * are taken from the central directory, not from local headers: np.savez
 * forces ZIP64 extra fields into every local header (numpy gh-10776) while
 * the central directory keeps plain 32-bit values for archives under 4 GiB.
 * Only a central directory that needs ZIP64 is refused.
 *
 * Everything is checked against the buffer's end before it is read, so
 * malformed files are errors, never crashes; the data size declared by a
 * header is checked against the bytes present before anything is allocated.
 */
#include "api/npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "npy.c reads and writes little-endian data in place: a big-endian host needs byte swaps"
#endif

/* ---- dtypes ------------------------------------------------------------------ */

static const struct npy_type {
    kiln_dtype dtype;
    char kind;         /* NumPy's dtype.kind */
    int size;          /* bytes per element */
    const char *descr; /* what we write */
} npy_types[] = {
    {KILN_F16, 'f', 2, "<f2"}, {KILN_F32, 'f', 4, "<f4"}, {KILN_F64, 'f', 8, "<f8"},
    {KILN_I8, 'i', 1, "|i1"},  {KILN_U8, 'u', 1, "|u1"},  {KILN_I16, 'i', 2, "<i2"},
    {KILN_U16, 'u', 2, "<u2"}, {KILN_I32, 'i', 4, "<i4"}, {KILN_U32, 'u', 4, "<u4"},
    {KILN_I64, 'i', 8, "<i8"}, {KILN_U64, 'u', 8, "<u8"}, {KILN_BOOL, 'b', 1, "|b1"},
};

static const struct npy_type *type_by_dtype(kiln_dtype t)
{
    for (size_t i = 0; i < KILN_COUNT(npy_types); i++)
        if (npy_types[i].dtype == t) return &npy_types[i];
    return NULL;
}

/* Adds "NAME: message" to d. */
KILN_PRINTF(4, 5)
static kiln_status fail(base_diag *d, kiln_status st, const char *name, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return base_diag_add(d, st, "%s: %s", name, msg);
}

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void wr32(unsigned char *p, uint32_t v)
{
    wr16(p, v);
    wr16(p + 2, v >> 16);
}

/* ---- the header dict --------------------------------------------------------- */

typedef struct npy_header {
    const char *descr;
    size_t descr_len;
    bool fortran_order;
    int rank; /* may exceed IR_MAX_RANK; only the first IR_MAX_RANK dims are kept */
    int64_t dims[IR_MAX_RANK];
} npy_header;

typedef struct cursor {
    const char *p, *end;
    const char *name; /* for messages */
    base_diag *d;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool peek(cursor *c, char ch)
{
    skip_ws(c);
    return c->p < c->end && *c->p == ch;
}

static kiln_status malformed(cursor *c, const char *what)
{
    if (c->p >= c->end)
        return fail(c->d, KILN_ERR_INVALID_ARG, c->name,
                    "malformed .npy header: %s, found the end of the header", what);
    char ch = *c->p;
    if (ch >= 0x20 && ch < 0x7f)
        return fail(c->d, KILN_ERR_INVALID_ARG, c->name, "malformed .npy header: %s, found '%c'",
                    what, ch);
    return fail(c->d, KILN_ERR_INVALID_ARG, c->name,
                "malformed .npy header: %s, found byte 0x%02x", what, (unsigned char)ch);
}

static kiln_status expect(cursor *c, char ch, const char *what)
{
    if (!peek(c, ch)) return malformed(c, what);
    c->p++;
    return KILN_OK;
}

/* A quoted string without escapes: NumPy never writes any. */
static kiln_status parse_str(cursor *c, const char **s, size_t *len)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return malformed(c, "expected a string");
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n') return malformed(c, "unsupported character in a string");
        c->p++;
    }
    if (c->p >= c->end) return malformed(c, "unterminated string");
    *s = start;
    *len = (size_t)(c->p - start);
    c->p++;
    return KILN_OK;
}

static bool match_word(cursor *c, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    /* "Truex" is not True */
    const char *after = c->p + n;
    if (after < c->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                           (*after >= '0' && *after <= '9') || *after == '_'))
        return false;
    c->p = after;
    return true;
}

static kiln_status parse_bool(cursor *c, bool *v)
{
    skip_ws(c);
    if (match_word(c, "True")) *v = true;
    else if (match_word(c, "False")) *v = false;
    else return malformed(c, "expected True or False for 'fortran_order'");
    return KILN_OK;
}

/* A non-negative dimension; Python 2 era files may carry an 'L' suffix. */
static kiln_status parse_dim(cursor *c, int64_t *v)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == '-')
        return fail(c->d, KILN_ERR_INVALID_ARG, c->name, "malformed .npy header: negative dimension in 'shape'");
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return malformed(c, "expected a dimension in 'shape'");
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int digit = *c->p - '0';
        if (x > (INT64_MAX - digit) / 10)
            return fail(c->d, KILN_ERR_INVALID_ARG, c->name,
                        "malformed .npy header: dimension in 'shape' does not fit in 64 bits");
        x = x * 10 + digit;
        c->p++;
    }
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) c->p++;
    *v = x;
    return KILN_OK;
}

/* "()", "(3,)", "(2, 3)", "(2, 3,)". A 1-tuple needs its comma: "(3)" is an int. */
static kiln_status parse_shape(cursor *c, npy_header *h)
{
    KILN_TRY(expect(c, '(', "expected '(' to open 'shape'"));
    h->rank = 0;
    bool comma_after_last = false;
    while (!peek(c, ')')) {
        int64_t v = 0;
        KILN_TRY(parse_dim(c, &v));
        if (h->rank < IR_MAX_RANK) h->dims[h->rank] = v;
        if (h->rank < INT32_MAX) h->rank++;
        comma_after_last = peek(c, ',');
        if (comma_after_last) c->p++;
        else if (!peek(c, ')')) return malformed(c, "expected ',' or ')' in 'shape'");
    }
    c->p++;
    if (h->rank == 1 && !comma_after_last)
        return fail(c->d, KILN_ERR_INVALID_ARG, c->name,
                    "malformed .npy header: 'shape' is not a tuple (a 1-tuple needs a trailing comma)");
    return KILN_OK;
}

static kiln_status parse_dict(cursor *c, npy_header *h)
{
    bool seen_descr = false, seen_order = false, seen_shape = false;
    KILN_TRY(expect(c, '{', "expected '{' to open the header dict"));
    while (!peek(c, '}')) {
        const char *key = NULL;
        size_t key_len = 0;
        KILN_TRY(parse_str(c, &key, &key_len));
        KILN_TRY(expect(c, ':', "expected ':' after a key"));
        bool *seen;
        if (key_len == 5 && memcmp(key, "descr", 5) == 0) {
            seen = &seen_descr;
            skip_ws(c);
            if (c->p < c->end && *c->p == '[')
                return fail(c->d, KILN_ERR_UNSUPPORTED, c->name,
                            "structured (record) dtypes are not supported");
            KILN_TRY(parse_str(c, &h->descr, &h->descr_len));
        } else if (key_len == 13 && memcmp(key, "fortran_order", 13) == 0) {
            seen = &seen_order;
            KILN_TRY(parse_bool(c, &h->fortran_order));
        } else if (key_len == 5 && memcmp(key, "shape", 5) == 0) {
            seen = &seen_shape;
            KILN_TRY(parse_shape(c, h));
        } else {
            return fail(c->d, KILN_ERR_INVALID_ARG, c->name,
                        "malformed .npy header: unexpected key '%.*s'", (int)KILN_MIN(key_len, 64),
                        key);
        }
        if (*seen)
            return fail(c->d, KILN_ERR_INVALID_ARG, c->name,
                        "malformed .npy header: key '%.*s' appears twice", (int)key_len, key);
        *seen = true;
        if (peek(c, ',')) c->p++;
        else if (!peek(c, '}')) return malformed(c, "expected ',' or '}' after a value");
    }
    c->p++;
    skip_ws(c);
    if (c->p != c->end) return malformed(c, "expected only padding after the header dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return fail(c->d, KILN_ERR_INVALID_ARG, c->name,
                    "malformed .npy header: missing key '%s'",
                    !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    return KILN_OK;
}

/* descr -> kiln dtype: byte order, kind, item size ("<f4", "|b1"). */
static kiln_status parse_descr(const npy_header *h, const char *name, const struct npy_type **out,
                               base_diag *d)
{
    const char *s = h->descr;
    size_t n = h->descr_len;
    int shown = (int)KILN_MIN(n, 32);
    if (n < 3 || n > 4 || !strchr("<>|=", s[0]) || s[0] == 0)
        return fail(d, KILN_ERR_UNSUPPORTED, name, "dtype '%.*s' is not supported", shown, s);
    int size = 0;
    for (size_t i = 2; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return fail(d, KILN_ERR_UNSUPPORTED, name, "dtype '%.*s' is not supported", shown, s);
        size = size * 10 + (s[i] - '0');
    }
    for (size_t i = 0; i < KILN_COUNT(npy_types); i++) {
        const struct npy_type *t = &npy_types[i];
        if (t->kind != s[1] || t->size != size) continue;
        if (s[0] == '>' && size > 1)
            return fail(d, KILN_ERR_UNSUPPORTED, name,
                        "big-endian dtype '%.*s' is not supported (save it little-endian)", shown, s);
        *out = t;
        return KILN_OK;
    }
    return fail(d, KILN_ERR_UNSUPPORTED, name, "dtype '%.*s' is not supported", shown, s);
}

/* ---- reading ----------------------------------------------------------------- */

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

kiln_status api_npy_read_named(const void *buf, size_t n, const char *name, ir_tensor *out,
                               base_diag *d)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof(*out));
    if (n < 10 || memcmp(b, npy_magic, sizeof(npy_magic)) != 0)
        return fail(d, KILN_ERR_INVALID_ARG, name, "not an .npy file (no \\x93NUMPY magic)");
    int major = b[6], minor = b[7];
    size_t hdr_start, hdr_len;
    if (major == 1 && minor == 0) {
        hdr_start = 10;
        hdr_len = rd16(b + 8);
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (n < 12) return fail(d, KILN_ERR_INVALID_ARG, name, "truncated .npy header");
        hdr_start = 12;
        hdr_len = rd32(b + 8);
    } else {
        return fail(d, KILN_ERR_UNSUPPORTED, name, ".npy format version %d.%d is not supported",
                    major, minor);
    }
    if (hdr_len > n - hdr_start)
        return fail(d, KILN_ERR_INVALID_ARG, name,
                    "truncated .npy header: it declares %zu bytes, the file has %zu after the prefix",
                    hdr_len, n - hdr_start);

    npy_header h = {0};
    cursor c = {(const char *)b + hdr_start, (const char *)b + hdr_start + hdr_len, name, d};
    KILN_TRY(parse_dict(&c, &h));

    const struct npy_type *type = NULL;
    KILN_TRY(parse_descr(&h, name, &type, d));
    if (h.fortran_order)
        return fail(d, KILN_ERR_UNSUPPORTED, name,
                    "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
    if (h.rank > IR_MAX_RANK)
        return fail(d, KILN_ERR_UNSUPPORTED, name, "rank %d exceeds kiln's maximum of %d", h.rank,
                    IR_MAX_RANK);

    /* Overflow is checked on the product of the nonzero dims, so (0, 2^62, 2^62)
     * is refused too: no tensor that big is meant. */
    uint64_t numel = 1, bound = 1;
    for (int i = 0; i < h.rank; i++) {
        uint64_t dim = (uint64_t)h.dims[i];
        if (dim > 1 && bound > (uint64_t)INT64_MAX / dim)
            return fail(d, KILN_ERR_INVALID_ARG, name,
                        "malformed .npy header: the element count of 'shape' overflows");
        if (dim > 1) bound *= dim;
        numel *= dim;
    }
    size_t nbytes;
    if (numel > SIZE_MAX || !base_mul_ok((size_t)numel, (size_t)type->size, &nbytes))
        return fail(d, KILN_ERR_INVALID_ARG, name,
                    "malformed .npy header: the byte size of 'shape' overflows");
    size_t have = n - hdr_start - hdr_len;
    if (have != nbytes)
        return fail(d, KILN_ERR_INVALID_ARG, name,
                    "data is %zu bytes, but %s of %" PRIu64 " elements needs %zu (%s)", have,
                    type->descr, numel, nbytes, have < nbytes ? "truncated" : "trailing bytes");

    kiln_status st = ir_tensor_alloc(out, type->dtype, h.rank, h.dims);
    if (st != KILN_OK) {
        memset(out, 0, sizeof(*out));
        return fail(d, st, name, "cannot allocate %zu bytes for the array", nbytes);
    }
    KILN_ASSERT(out->nbytes == nbytes);
    const unsigned char *src = b + hdr_start + hdr_len;
    if (type->dtype == KILN_BOOL) {
        unsigned char *dst = out->data;
        for (size_t i = 0; i < nbytes; i++) dst[i] = src[i] != 0;
    } else if (nbytes) {
        memcpy(out->data, src, nbytes);
    }
    return KILN_OK;
}

kiln_status api_npy_read(const void *buf, size_t n, ir_tensor *out, base_diag *d)
{
    return api_npy_read_named(buf, n, "(.npy in memory)", out, d);
}

kiln_status api_npy_load(const char *path, ir_tensor *out, base_diag *d)
{
    memset(out, 0, sizeof(*out));
    base_file_map m;
    KILN_TRY(base_file_map_open(path, &m, d));
    kiln_status st = api_npy_read_named(m.data, m.size, path, out, d);
    base_file_map_close(&m);
    return st;
}

/* ---- writing ----------------------------------------------------------------- */

/* Enough for the dict with IR_MAX_RANK 20-digit dims, padded to 64. */
#define NPY_HEADER_CAP 512

/* Builds a version 1.0 header for t into hdr; OUT: *hdr_len, *nbytes (data bytes). */
static kiln_status build_header(const ir_tensor *t, const char *name, unsigned char *hdr,
                                size_t *hdr_len, size_t *nbytes, base_diag *d)
{
    const struct npy_type *type = type_by_dtype(t->dtype);
    if (t->dtype == KILN_BF16)
        return fail(d, KILN_ERR_UNSUPPORTED, name,
                    "bfloat16 has no NumPy dtype: convert the tensor to f32 before saving");
    if (!type)
        return fail(d, KILN_ERR_UNSUPPORTED, name, "dtype %s cannot be saved as .npy",
                    kiln_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > IR_MAX_RANK)
        return fail(d, KILN_ERR_INVALID_ARG, name, "tensor rank %d is out of range", t->rank);

    char dict[NPY_HEADER_CAP];
    int len = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       type->descr);
    size_t numel = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0)
            return fail(d, KILN_ERR_INVALID_ARG, name, "dimension %d is negative (%" PRId64 ")", i,
                        t->dims[i]);
        if ((uint64_t)t->dims[i] > SIZE_MAX || !base_mul_ok(numel, (size_t)t->dims[i], &numel))
            return fail(d, KILN_ERR_INVALID_ARG, name, "element count overflows");
        len += snprintf(dict + len, sizeof(dict) - (size_t)len, "%s%" PRId64, i ? ", " : "",
                        t->dims[i]);
    }
    len += snprintf(dict + len, sizeof(dict) - (size_t)len, "%s), }", t->rank == 1 ? "," : "");
    if (!base_mul_ok(numel, (size_t)type->size, nbytes))
        return fail(d, KILN_ERR_INVALID_ARG, name, "byte size overflows");
    if (*nbytes > t->nbytes || (*nbytes && !t->data))
        return fail(d, KILN_ERR_INVALID_ARG, name, "tensor holds %zu bytes of data, its shape needs %zu",
                    t->data ? t->nbytes : 0, *nbytes);

    /* NumPy pads magic + header to a multiple of 64 and ends it with '\n'. */
    size_t total = 10 + (size_t)len + 1;
    total = (total + 63) / 64 * 64;
    KILN_ASSERT(total <= NPY_HEADER_CAP);
    memcpy(hdr, npy_magic, sizeof(npy_magic));
    hdr[6] = 1;
    hdr[7] = 0;
    wr16(hdr + 8, (uint32_t)(total - 10));
    memcpy(hdr + 10, dict, (size_t)len);
    memset(hdr + 10 + len, ' ', total - 10 - (size_t)len - 1);
    hdr[total - 1] = '\n';
    *hdr_len = total;
    return KILN_OK;
}

typedef struct out_file {
    FILE *f;
    const char *path;
    uint64_t offset; /* bytes written so far */
    bool failed;
} out_file;

static void put(out_file *o, const void *p, size_t n)
{
    if (o->failed || n == 0) return;
    if (fwrite(p, 1, n, o->f) != n) o->failed = true;
    o->offset += n;
}

static kiln_status out_open(out_file *o, const char *path, base_diag *d)
{
    memset(o, 0, sizeof(*o));
    o->path = path;
    o->f = fopen(path, "wb");
    if (!o->f) return base_diag_add(d, KILN_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    return KILN_OK;
}

/* Closes; on any failure (or when st is already an error) removes the file. */
static kiln_status out_close(out_file *o, kiln_status st, base_diag *d)
{
    int err = o->failed ? (errno ? errno : EIO) : 0;
    if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
    if (err && st == KILN_OK)
        st = base_diag_add(d, KILN_ERR_IO, "cannot write '%s': %s", o->path, strerror(err));
    if (st != KILN_OK) remove(o->path);
    return st;
}

kiln_status api_npy_save(const char *path, const ir_tensor *t, base_diag *d)
{
    unsigned char hdr[NPY_HEADER_CAP];
    size_t hdr_len, nbytes;
    KILN_TRY(build_header(t, path, hdr, &hdr_len, &nbytes, d));
    out_file o;
    KILN_TRY(out_open(&o, path, d));
    errno = 0;
    put(&o, hdr, hdr_len);
    put(&o, t->data, nbytes);
    return out_close(&o, KILN_OK, d);
}

/* ---- ZIP ------------------------------------------------------------------------ */

#define ZIP_LOCAL_SIG 0x04034b50u
#define ZIP_CENTRAL_SIG 0x02014b50u
#define ZIP_END_SIG 0x06054b50u
#define ZIP64_LOCATOR_SIG 0x07064b50u
#define ZIP_LOCAL_BYTES 30
#define ZIP_CENTRAL_BYTES 46
#define ZIP_END_BYTES 22
#define ZIP_STORED 0
#define ZIP_DEFLATED 8
/* Deflate cannot expand data more than about 1032:1; larger claims are lies. */
#define DEFLATE_MAX_RATIO 1032u

static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return base_calloc(items, size);
}

static void zlib_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    base_free(p);
}

/* CRC-32 of any length (zlib's crc32 takes a uInt length). */
static uint32_t crc32_of(uint32_t crc, const unsigned char *p, size_t n)
{
    uLong c = crc;
    while (n > 0) {
        uInt chunk = (uInt)KILN_MIN(n, (size_t)1 << 30);
        c = crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}

/* Inflates a raw deflate stream into exactly n_dst bytes. */
static kiln_status inflate_member(const unsigned char *src, size_t n_src, unsigned char *dst,
                                  size_t n_dst, const char *name, base_diag *d)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    z.zalloc = zlib_alloc;
    z.zfree = zlib_free;
    int ret = inflateInit2(&z, -MAX_WBITS);
    if (ret == Z_MEM_ERROR) return fail(d, KILN_ERR_OOM, name, "out of memory starting inflate");
    if (ret != Z_OK) return fail(d, KILN_ERR_INTERNAL, name, "inflateInit2 failed (%d)", ret);
    const size_t chunk = (size_t)1 << 30;
    size_t in_left = n_src, out_left = n_dst;
    z.next_in = (Bytef *)(uintptr_t)src; /* zlib's API is not const-correct */
    z.next_out = dst;
    do {
        if (z.avail_in == 0 && in_left) {
            z.avail_in = (uInt)KILN_MIN(in_left, chunk);
            in_left -= z.avail_in;
        }
        if (z.avail_out == 0 && out_left) {
            z.avail_out = (uInt)KILN_MIN(out_left, chunk);
            out_left -= z.avail_out;
        }
        ret = inflate(&z, Z_NO_FLUSH);
    } while (ret == Z_OK);
    size_t produced = n_dst - out_left - z.avail_out;
    const char *zmsg = z.msg ? z.msg : "zlib error";
    inflateEnd(&z);
    if (ret == Z_MEM_ERROR) return fail(d, KILN_ERR_OOM, name, "out of memory inflating");
    if (ret == Z_STREAM_END && produced == n_dst) return KILN_OK;
    if (ret == Z_STREAM_END)
        return fail(d, KILN_ERR_INVALID_ARG, name, "inflates to %zu bytes, the archive says %zu",
                    produced, n_dst);
    if (ret == Z_BUF_ERROR && produced == n_dst)
        return fail(d, KILN_ERR_INVALID_ARG, name, "inflates to more than the %zu bytes the archive says",
                    n_dst);
    if (ret == Z_BUF_ERROR)
        return fail(d, KILN_ERR_INVALID_ARG, name, "compressed data is truncated");
    return fail(d, KILN_ERR_INVALID_ARG, name, "corrupt deflate data (%s)", zmsg);
}

void api_npz_free(api_npz *z)
{
    for (int i = 0; i < z->n; i++) {
        if (z->names) base_free(z->names[i]);
        if (z->tensors) ir_tensor_release(&z->tensors[i]);
    }
    base_free(z->names);
    base_free(z->tensors);
    memset(z, 0, sizeof(*z));
}

/* Finds the end-of-central-directory record: the last one whose comment
 * runs exactly to the end of the file. */
static const unsigned char *find_end_record(const unsigned char *b, size_t n)
{
    if (n < ZIP_END_BYTES) return NULL;
    size_t lowest = n - ZIP_END_BYTES > 0xffff ? n - ZIP_END_BYTES - 0xffff : 0;
    for (size_t pos = n - ZIP_END_BYTES + 1; pos-- > lowest;) {
        if (rd32(b + pos) == ZIP_END_SIG && rd16(b + pos + 20) == n - pos - ZIP_END_BYTES)
            return b + pos;
    }
    return NULL;
}

/* One central-directory entry: checks it, then reads its array into
 * z->names[i] and z->tensors[i]. `p` points at the entry, `cd_end` past the
 * directory. OUT: *next, the following entry. */
static kiln_status read_member(api_npz *z, int i, const unsigned char *b, size_t cd_off,
                               const unsigned char *p, const unsigned char *cd_end,
                               const unsigned char **next, const char *path, base_diag *d)
{
    if ((size_t)(cd_end - p) < ZIP_CENTRAL_BYTES || rd32(p) != ZIP_CENTRAL_SIG)
        return fail(d, KILN_ERR_INVALID_ARG, path, "corrupt ZIP central directory (entry %d)", i);
    uint32_t flags = rd16(p + 8), method = rd16(p + 10), crc = rd32(p + 16);
    uint32_t csize = rd32(p + 20), usize = rd32(p + 24), local_off = rd32(p + 42);
    size_t name_len = rd16(p + 28), extra_len = rd16(p + 30), comment_len = rd16(p + 32);
    if ((size_t)(cd_end - p) - ZIP_CENTRAL_BYTES < name_len + extra_len + comment_len)
        return fail(d, KILN_ERR_INVALID_ARG, path, "corrupt ZIP central directory (entry %d)", i);
    const char *mname = (const char *)p + ZIP_CENTRAL_BYTES;
    *next = p + ZIP_CENTRAL_BYTES + name_len + extra_len + comment_len;
    int shown = (int)KILN_MIN(name_len, 200);

    if (csize == 0xffffffffu || usize == 0xffffffffu || local_off == 0xffffffffu)
        return fail(d, KILN_ERR_UNSUPPORTED, path,
                    "member '%.*s' needs ZIP64 (over 4 GiB), which is not supported", shown, mname);
    if (flags & 0x41)
        return fail(d, KILN_ERR_UNSUPPORTED, path, "member '%.*s' is encrypted", shown, mname);
    if (name_len < 5 || memcmp(mname + name_len - 4, ".npy", 4) != 0 ||
        memchr(mname, 0, name_len))
        return fail(d, KILN_ERR_INVALID_ARG, path, "member '%.*s' is not an .npy array", shown, mname);
    size_t key_len = name_len - 4;
    for (int j = 0; j < i; j++)
        if (strlen(z->names[j]) == key_len && memcmp(z->names[j], mname, key_len) == 0)
            return fail(d, KILN_ERR_INVALID_ARG, path, "member '%.*s' appears twice", shown, mname);

    if (local_off > cd_off || cd_off - local_off < ZIP_LOCAL_BYTES ||
        rd32(b + local_off) != ZIP_LOCAL_SIG)
        return fail(d, KILN_ERR_INVALID_ARG, path, "member '%.*s': corrupt local header", shown, mname);
    size_t data_off = (size_t)local_off + ZIP_LOCAL_BYTES + rd16(b + local_off + 26) +
                      rd16(b + local_off + 28);
    if (data_off > cd_off || cd_off - data_off < csize)
        return fail(d, KILN_ERR_INVALID_ARG, path, "member '%.*s' runs past the archive data", shown,
                    mname);

    z->names[i] = base_malloc(key_len + 1);
    if (!z->names[i]) return fail(d, KILN_ERR_OOM, path, "out of memory");
    memcpy(z->names[i], mname, key_len);
    z->names[i][key_len] = 0;

    /* Messages about the array name it as "archive.npz:member.npy". */
    size_t label_len = strlen(path) + 1 + name_len + 1;
    char *label = base_malloc(label_len);
    if (!label) return fail(d, KILN_ERR_OOM, path, "out of memory");
    snprintf(label, label_len, "%s:%.*s", path, (int)name_len, mname);

    kiln_status st = KILN_OK;
    const unsigned char *data = b + data_off;
    unsigned char *inflated = NULL;
    if (method == ZIP_STORED) {
        if (csize != usize)
            st = fail(d, KILN_ERR_INVALID_ARG, label,
                      "stored member has compressed size %" PRIu32 " but size %" PRIu32, csize, usize);
    } else if (method == ZIP_DEFLATED) {
        if ((uint64_t)usize > (uint64_t)csize * DEFLATE_MAX_RATIO + 1024)
            st = fail(d, KILN_ERR_INVALID_ARG, label,
                      "claims %" PRIu32 " bytes from %" PRIu32 " compressed bytes, more than deflate can produce",
                      usize, csize);
        else if (!(inflated = base_malloc(usize)))
            st = fail(d, KILN_ERR_OOM, label, "out of memory inflating %" PRIu32 " bytes", usize);
        else
            st = inflate_member(data, csize, inflated, usize, label, d);
        data = inflated;
    } else {
        st = fail(d, KILN_ERR_UNSUPPORTED, label,
                  "ZIP compression method %" PRIu32 " is not supported (only stored and deflate)", method);
    }
    if (st == KILN_OK && crc32_of(0, data, usize) != crc)
        st = fail(d, KILN_ERR_INVALID_ARG, label, "CRC-32 mismatch: the member is corrupt");
    if (st == KILN_OK) st = api_npy_read_named(data, usize, label, &z->tensors[i], d);
    base_free(inflated);
    base_free(label);
    return st;
}

kiln_status api_npz_load(const char *path, api_npz *out, base_diag *d)
{
    memset(out, 0, sizeof(*out));
    base_file_map m;
    KILN_TRY(base_file_map_open(path, &m, d));
    const unsigned char *b = m.data;
    kiln_status st = KILN_OK;

    const unsigned char *end = find_end_record(b, m.size);
    if (!end) {
        st = fail(d, KILN_ERR_INVALID_ARG, path, "not an .npz file (no ZIP end-of-central-directory record)");
        goto done;
    }
    size_t end_pos = (size_t)(end - b);
    uint32_t disk = rd16(end + 4), cd_disk = rd16(end + 6);
    uint32_t n_here = rd16(end + 8), n_total = rd16(end + 10);
    uint32_t cd_size = rd32(end + 12), cd_off = rd32(end + 16);
    bool locator = end_pos >= 20 && rd32(end - 20) == ZIP64_LOCATOR_SIG;
    if (locator || n_total == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
        st = fail(d, KILN_ERR_UNSUPPORTED, path, "ZIP64 archives are not supported");
        goto done;
    }
    if (disk != 0 || cd_disk != 0 || n_here != n_total) {
        st = fail(d, KILN_ERR_UNSUPPORTED, path, "multi-part ZIP archives are not supported");
        goto done;
    }
    if (cd_off > end_pos || end_pos - cd_off < cd_size) {
        st = fail(d, KILN_ERR_INVALID_ARG, path, "corrupt ZIP: the central directory lies outside the file");
        goto done;
    }
    if (n_total > cd_size / ZIP_CENTRAL_BYTES) {
        st = fail(d, KILN_ERR_INVALID_ARG, path, "corrupt ZIP: %" PRIu32 " entries cannot fit in a %" PRIu32 "-byte directory",
                  n_total, cd_size);
        goto done;
    }

    if (n_total > 0) {
        out->names = base_calloc(n_total, sizeof(*out->names));
        out->tensors = base_calloc(n_total, sizeof(*out->tensors));
        if (!out->names || !out->tensors) {
            st = fail(d, KILN_ERR_OOM, path, "out of memory");
            goto done;
        }
    }
    out->n = (int)n_total;
    const unsigned char *p = b + cd_off, *cd_end = b + cd_off + cd_size;
    for (int i = 0; i < out->n && st == KILN_OK; i++)
        st = read_member(out, i, b, cd_off, p, cd_end, &p, path, d);

done:
    if (st != KILN_OK) api_npz_free(out);
    base_file_map_close(&m);
    return st;
}

/* Fixed DOS timestamp (1980-01-01 00:00) so archives are reproducible. */
#define ZIP_DOS_TIME 0
#define ZIP_DOS_DATE ((0 << 9) | (1 << 5) | 1)
#define ZIP_VERSION 20 /* 2.0: what stored members need */
#define ZIP_FLAG_UTF8 0x800

typedef struct npz_member {
    unsigned char hdr[NPY_HEADER_CAP];
    size_t hdr_len, nbytes;
    size_t name_len; /* with ".npy" */
    uint32_t crc, size, offset;
    uint32_t flags;
} npz_member;

static void zip_entry_fields(unsigned char *f, const npz_member *mb)
{
    /* version needed, flags, method, time, date, crc, csize, usize, name len, extra len */
    wr16(f + 0, ZIP_VERSION);
    wr16(f + 2, mb->flags);
    wr16(f + 4, ZIP_STORED);
    wr16(f + 6, ZIP_DOS_TIME);
    wr16(f + 8, ZIP_DOS_DATE);
    wr32(f + 10, mb->crc);
    wr32(f + 14, mb->size);
    wr32(f + 18, mb->size);
    wr16(f + 22, (uint32_t)mb->name_len);
    wr16(f + 24, 0);
}

kiln_status api_npz_save(const char *path, int n, const char *const *names, const ir_tensor *ts,
                         base_diag *d)
{
    if (n < 0 || n >= 0xffff)
        return fail(d, KILN_ERR_UNSUPPORTED, path, "%d arrays do not fit in a ZIP without ZIP64", n);
    npz_member *mb = base_calloc((size_t)KILN_MAX(n, 1), sizeof(*mb));
    if (!mb) return fail(d, KILN_ERR_OOM, path, "out of memory");

    kiln_status st = KILN_OK;
    uint64_t offset = 0;
    for (int i = 0; i < n && st == KILN_OK; i++) {
        const char *name = names[i];
        size_t len = strlen(name);
        if (len == 0 || len > 0xffff - 4) {
            st = fail(d, KILN_ERR_INVALID_ARG, path, "array %d has an empty or overlong name", i);
            break;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(names[j], name) == 0) {
                st = fail(d, KILN_ERR_INVALID_ARG, path, "array name '%s' appears twice", name);
                break;
            }
        if (st != KILN_OK) break;
        char label[300];
        snprintf(label, sizeof(label), "%s:%.200s", path, name);
        st = build_header(&ts[i], label, mb[i].hdr, &mb[i].hdr_len, &mb[i].nbytes, d);
        if (st != KILN_OK) break;
        mb[i].name_len = len + 4;
        for (size_t k = 0; k < len; k++)
            if ((unsigned char)name[k] >= 0x80) mb[i].flags = ZIP_FLAG_UTF8;
        uint64_t size = (uint64_t)mb[i].hdr_len + mb[i].nbytes;
        uint64_t after = offset + ZIP_LOCAL_BYTES + mb[i].name_len + size;
        if (size >= 0xffffffffu || after >= 0xffffffffu) {
            st = fail(d, KILN_ERR_UNSUPPORTED, path,
                      "the archive would exceed 4 GiB, which needs ZIP64 (not supported)");
            break;
        }
        mb[i].size = (uint32_t)size;
        mb[i].offset = (uint32_t)offset;
        mb[i].crc = crc32_of(crc32_of(0, mb[i].hdr, mb[i].hdr_len), ts[i].data, mb[i].nbytes);
        offset = after;
    }
    if (st != KILN_OK) {
        base_free(mb);
        return st;
    }

    out_file o;
    st = out_open(&o, path, d);
    if (st != KILN_OK) {
        base_free(mb);
        return st;
    }
    errno = 0;
    unsigned char f[ZIP_CENTRAL_BYTES];
    for (int i = 0; i < n; i++) {
        wr32(f, ZIP_LOCAL_SIG);
        zip_entry_fields(f + 4, &mb[i]);
        put(&o, f, ZIP_LOCAL_BYTES);
        put(&o, names[i], mb[i].name_len - 4);
        put(&o, ".npy", 4);
        put(&o, mb[i].hdr, mb[i].hdr_len);
        put(&o, ts[i].data, mb[i].nbytes);
    }
    uint64_t cd_off = o.offset;
    for (int i = 0; i < n; i++) {
        wr32(f, ZIP_CENTRAL_SIG);
        wr16(f + 4, ZIP_VERSION); /* version made by: 2.0, MS-DOS attributes */
        zip_entry_fields(f + 6, &mb[i]);
        wr16(f + 32, 0); /* comment length */
        wr16(f + 34, 0); /* disk number */
        wr16(f + 36, 0); /* internal attributes */
        wr32(f + 38, 0); /* external attributes */
        wr32(f + 42, mb[i].offset);
        put(&o, f, ZIP_CENTRAL_BYTES);
        put(&o, names[i], mb[i].name_len - 4);
        put(&o, ".npy", 4);
    }
    uint64_t cd_size = o.offset - cd_off;
    if (cd_off + cd_size >= 0xffffffffu) {
        st = fail(d, KILN_ERR_UNSUPPORTED, path,
                  "the archive would exceed 4 GiB, which needs ZIP64 (not supported)");
    } else {
        wr32(f, ZIP_END_SIG);
        wr16(f + 4, 0);
        wr16(f + 6, 0);
        wr16(f + 8, (uint32_t)n);
        wr16(f + 10, (uint32_t)n);
        wr32(f + 12, (uint32_t)cd_size);
        wr32(f + 16, (uint32_t)cd_off);
        wr16(f + 20, 0);
        put(&o, f, ZIP_END_BYTES);
    }
    base_free(mb);
    return out_close(&o, st, d);
}
