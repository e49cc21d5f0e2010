/*
 * test_npy.c: .npy/.npz reading and writing (src/api/npy.c).
 *
 * Every dtype round-trips through save and load; files written by NumPy
 * itself (tests/unit/data/npy_fixtures.h, from make_fixtures.py) load with
 * the right values; and every kind of malformed header, truncation, byte
 * flip and allocation failure gives an error, never a crash.
 */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/npy.h"
#include "data/npy_fixtures.h"

/* A file in the test run's scratch folder. */
static const char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof(buf), "%s/%s", unit_tmpdir(), name);
    return buf;
}

static bool write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* A tensor of `dtype` and shape with deterministic contents that are valid
 * for the dtype (bools 0/1). */
static kiln_status make_tensor(ir_tensor *t, kiln_dtype dtype, int rank, const int64_t *dims,
                               unsigned seed)
{
    memset(t, 0, sizeof(*t));
    KILN_TRY(ir_tensor_alloc(t, dtype, rank, dims));
    unsigned char *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = dtype == KILN_BOOL ? (unsigned char)((seed >> 16) & 1) : (unsigned char)(seed >> 16);
    }
    return KILN_OK;
}

static bool same_tensor(const ir_tensor *a, const ir_tensor *b)
{
    return a->dtype == b->dtype && ir_same_shape(a, b) && a->nbytes == b->nbytes &&
           (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

static const kiln_dtype all_dtypes[] = {KILN_F32, KILN_F64, KILN_F16, KILN_I8,  KILN_U8,
                                        KILN_I16, KILN_U16, KILN_I32, KILN_U32, KILN_I64,
                                        KILN_U64, KILN_BOOL};

/* Shapes every dtype is tried with: scalar, vector, matrix, empty, rank 8. */
static const struct {
    int rank;
    int64_t dims[IR_MAX_RANK];
} shapes[] = {
    {0, {0}}, {1, {5}}, {2, {2, 3}}, {2, {0, 3}}, {8, {1, 2, 1, 2, 1, 2, 1, 3}},
};

UNIT_TEST(npy_roundtrip_every_dtype)
{
    const char *path = tmp_path("rt.npy");
    for (size_t i = 0; i < KILN_COUNT(all_dtypes); i++) {
        for (size_t s = 0; s < KILN_COUNT(shapes); s++) {
            ir_tensor t, back;
            base_diag d;
            base_diag_init(&d);
            UNIT_CHECK_EQ_INT(make_tensor(&t, all_dtypes[i], shapes[s].rank, shapes[s].dims,
                                          (unsigned)(i * 31 + s)),
                              KILN_OK);
            UNIT_CHECK_EQ_INT(api_npy_save(path, &t, &d), KILN_OK);
            UNIT_CHECK_EQ_INT(api_npy_load(path, &back, &d), KILN_OK);
            UNIT_CHECK(same_tensor(&t, &back));
            UNIT_CHECK(back.owned);
            UNIT_CHECK_EQ_INT(d.n_msgs, 0);
            ir_tensor_release(&t);
            ir_tensor_release(&back);
            base_diag_free(&d);
        }
    }
    remove(path);
}

UNIT_TEST(npy_header_is_what_numpy_writes)
{
    const char *path = tmp_path("hdr.npy");
    int64_t dims[] = {4};
    ir_tensor t;
    UNIT_CHECK_EQ_INT(make_tensor(&t, KILN_I64, 1, dims, 1), KILN_OK);
    UNIT_CHECK_EQ_INT(api_npy_save(path, &t, NULL), KILN_OK);
    base_file_map m;
    UNIT_CHECK_EQ_INT(base_file_map_open(path, &m, NULL), KILN_OK);
    /* NumPy's own bytes for the same header (numpy_savez's "ids" member):
     * 10 bytes of prefix, the dict, spaces up to 127 bytes, '\n'. */
    static const char want[] =
        "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }";
    UNIT_CHECK_EQ_INT(m.size, 128 + 32);
    if (m.size == 128 + 32) {
        const char *got = m.data;
        UNIT_CHECK(memcmp(got, want, sizeof(want) - 1) == 0);
        for (size_t i = sizeof(want) - 1; i < 127; i++) UNIT_CHECK(got[i] == ' ');
        UNIT_CHECK(got[127] == '\n');
    }
    base_file_map_close(&m);
    ir_tensor_release(&t);
    remove(path);
}

UNIT_TEST(npz_roundtrip_every_dtype)
{
    enum { N = KILN_COUNT(all_dtypes) };
    ir_tensor ts[N];
    char name_buf[N][32];
    const char *names[N];
    for (int i = 0; i < N; i++) {
        const int64_t dims[] = {3, i + 1};
        UNIT_CHECK_EQ_INT(make_tensor(&ts[i], all_dtypes[i], i % 3, dims, (unsigned)i), KILN_OK);
        /* ONNX value names carry slashes and dots */
        snprintf(name_buf[i], sizeof(name_buf[i]), "/layer.%d/%s_out", i, kiln_dtype_name(all_dtypes[i]));
        names[i] = name_buf[i];
    }
    const char *path = tmp_path("rt.npz");
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(api_npz_save(path, N, names, ts, &d), KILN_OK);
    api_npz z;
    UNIT_CHECK_EQ_INT(api_npz_load(path, &z, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(z.n, N);
    for (int i = 0; i < z.n && i < N; i++) {
        UNIT_CHECK(strcmp(z.names[i], names[i]) == 0);
        UNIT_CHECK(same_tensor(&z.tensors[i], &ts[i]));
    }
    api_npz_free(&z);
    UNIT_CHECK_EQ_INT(z.n, 0);

    /* An empty archive is valid too. */
    UNIT_CHECK_EQ_INT(api_npz_save(path, 0, NULL, NULL, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(api_npz_load(path, &z, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(z.n, 0);
    api_npz_free(&z);
    UNIT_CHECK_EQ_INT(d.n_msgs, 0);

    for (int i = 0; i < N; i++) ir_tensor_release(&ts[i]);
    base_diag_free(&d);
    remove(path);
}

UNIT_TEST(npy_save_refuses_bf16_and_bad_tensors)
{
    const char *path = tmp_path("bad.npy");
    int64_t dims[] = {2};
    ir_tensor t;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(make_tensor(&t, KILN_BF16, 1, dims, 0), KILN_OK);
    UNIT_CHECK_EQ_INT(api_npy_save(path, &t, &d), KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "bfloat16");
    UNIT_CHECK(access(path, F_OK) != 0); /* nothing left behind */
    const char *names[] = {"x"};
    UNIT_CHECK_EQ_INT(api_npz_save(path, 1, names, &t, &d), KILN_ERR_UNSUPPORTED);
    ir_tensor_release(&t);

    UNIT_CHECK_EQ_INT(make_tensor(&t, KILN_F32, 1, dims, 0), KILN_OK);
    ir_tensor pair[2] = {t, t};
    const char *dup[] = {"x", "x"};
    UNIT_CHECK_EQ_INT(api_npz_save(path, 2, dup, pair, &d), KILN_ERR_INVALID_ARG);
    const char *empty[] = {""};
    UNIT_CHECK_EQ_INT(api_npz_save(path, 1, empty, pair, &d), KILN_ERR_INVALID_ARG);
    ir_tensor lying = t;
    lying.dims[0] = 1000; /* shape needs more data than the tensor holds */
    UNIT_CHECK_EQ_INT(api_npy_save(path, &lying, &d), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_EQ_INT(api_npy_save("/nonexistent-dir/x.npy", &t, &d), KILN_ERR_IO);
    ir_tensor_release(&t);
    base_diag_free(&d);
}

/* ---- files written by NumPy ------------------------------------------------------ */

static kiln_status load_fixture_npz(const char *bytes, size_t n, api_npz *z, base_diag *d)
{
    const char *path = tmp_path("fixture.npz");
    if (!write_bytes(path, bytes, n)) return KILN_ERR_IO;
    kiln_status st = api_npz_load(path, z, d);
    remove(path);
    return st;
}

UNIT_TEST(npz_load_numpy_savez)
{
    api_npz z;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(load_fixture_npz(numpy_savez, sizeof(numpy_savez) - 1, &z, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(z.n, 4);
    if (z.n == 4) {
        UNIT_CHECK(strcmp(z.names[0], "enc/out") == 0);
        UNIT_CHECK(strcmp(z.names[1], "ids") == 0);
        UNIT_CHECK(strcmp(z.names[2], "mask") == 0);
        UNIT_CHECK(strcmp(z.names[3], "scale") == 0);

        const ir_tensor *a = &z.tensors[0];
        UNIT_CHECK_EQ_INT(a->dtype, KILN_F32);
        UNIT_CHECK_EQ_INT(a->rank, 2);
        UNIT_CHECK_EQ_INT(a->dims[0], 2);
        UNIT_CHECK_EQ_INT(a->dims[1], 3);
        for (int i = 0; i < 6; i++) UNIT_CHECK(((const float *)a->data)[i] == (float)i - 2.5f);

        const ir_tensor *ids = &z.tensors[1];
        UNIT_CHECK_EQ_INT(ids->dtype, KILN_I64);
        UNIT_CHECK_EQ_INT(ids->rank, 1);
        UNIT_CHECK_EQ_INT(ids->dims[0], 4);
        const int64_t want_ids[] = {-1, 0, 1, (int64_t)1 << 40};
        for (int i = 0; i < 4; i++) UNIT_CHECK(((const int64_t *)ids->data)[i] == want_ids[i]);

        const ir_tensor *mask = &z.tensors[2];
        UNIT_CHECK_EQ_INT(mask->dtype, KILN_BOOL);
        UNIT_CHECK_EQ_INT(mask->dims[0], 3);
        const unsigned char *mb = mask->data;
        UNIT_CHECK(mb[0] == 1 && mb[1] == 0 && mb[2] == 1);

        const ir_tensor *scale = &z.tensors[3];
        UNIT_CHECK_EQ_INT(scale->dtype, KILN_F64);
        UNIT_CHECK_EQ_INT(scale->rank, 0);
        UNIT_CHECK(*(const double *)scale->data == 3.5);
    }
    api_npz_free(&z);
    base_diag_free(&d);
}

UNIT_TEST(npz_load_numpy_savez_compressed)
{
    api_npz z;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(
        load_fixture_npz(numpy_savez_compressed, sizeof(numpy_savez_compressed) - 1, &z, &d),
        KILN_OK);
    UNIT_CHECK_EQ_INT(z.n, 2);
    if (z.n == 2) {
        UNIT_CHECK(strcmp(z.names[0], "a") == 0);
        UNIT_CHECK_EQ_INT(z.tensors[0].dtype, KILN_F32);
        UNIT_CHECK_EQ_INT(z.tensors[0].dims[0], 3);
        UNIT_CHECK_EQ_INT(z.tensors[0].dims[1], 4);
        for (int i = 0; i < 12; i++)
            UNIT_CHECK(((const float *)z.tensors[0].data)[i] == (float)i * 0.5f);
        UNIT_CHECK(strcmp(z.names[1], "b") == 0);
        UNIT_CHECK_EQ_INT(z.tensors[1].dtype, KILN_I32);
        UNIT_CHECK(((const int32_t *)z.tensors[1].data)[0] == 7);
        UNIT_CHECK(((const int32_t *)z.tensors[1].data)[1] == -7);
    }
    api_npz_free(&z);
    base_diag_free(&d);
}

UNIT_TEST(npy_read_numpy_files)
{
    ir_tensor t;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(api_npy_read(numpy_v2, sizeof(numpy_v2) - 1, &t, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(t.dtype, KILN_I16);
    UNIT_CHECK_EQ_INT(t.rank, 1);
    if (t.data) {
        UNIT_CHECK(((const int16_t *)t.data)[0] == -3);
        UNIT_CHECK(((const int16_t *)t.data)[1] == 4);
    }
    ir_tensor_release(&t);
    UNIT_CHECK_EQ_INT(d.n_msgs, 0);

    UNIT_CHECK_EQ_INT(api_npy_read(numpy_fortran, sizeof(numpy_fortran) - 1, &t, &d),
                      KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "Fortran");
    UNIT_CHECK(t.data == NULL);
    UNIT_CHECK_EQ_INT(api_npy_read(numpy_bigendian, sizeof(numpy_bigendian) - 1, &t, &d),
                      KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "big-endian");
    base_diag_free(&d);
}

/* ---- malformed .npy ---------------------------------------------------------------- */

/* Builds magic + v1 header around `dict` (padded as NumPy does) + n_data
 * zero bytes into buf; returns the length. */
static size_t build_npy(unsigned char *buf, size_t cap, const char *dict, size_t n_data)
{
    size_t len = strlen(dict);
    size_t total = (10 + len + 1 + 63) / 64 * 64;
    if (total + n_data > cap) return 0;
    memcpy(buf, "\223NUMPY\001\000", 8);
    buf[8] = (unsigned char)((total - 10) & 0xff);
    buf[9] = (unsigned char)((total - 10) >> 8);
    memcpy(buf + 10, dict, len);
    memset(buf + 10 + len, ' ', total - 10 - len - 1);
    buf[total - 1] = '\n';
    memset(buf + total, 0, n_data);
    return total + n_data;
}

static kiln_status read_dict(const char *dict, size_t n_data, base_diag *d)
{
    static unsigned char buf[4096];
    size_t n = build_npy(buf, sizeof(buf), dict, n_data);
    KILN_ASSERT(n > 0);
    ir_tensor t;
    kiln_status st = api_npy_read_named(buf, n, "case.npy", &t, d);
    if (st == KILN_OK) ir_tensor_release(&t);
    else KILN_ASSERT(t.data == NULL);
    return st;
}

UNIT_TEST(npy_malformed_headers)
{
    static const struct {
        const char *dict;
        size_t n_data;
        kiln_status want;
    } cases[] = {
        /* controls: valid variants NumPy (or Python's literal syntax) allows */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, KILN_OK},
        {"{\"shape\": (2,3), \"descr\": \"<f4\", \"fortran_order\": False}", 24, KILN_OK},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 2L), }", 24, KILN_OK},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1, KILN_OK},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776), }", 0, KILN_OK},
        /* data size */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 25, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 0, KILN_ERR_INVALID_ARG},
        /* the dict */
        {"", 0, KILN_ERR_INVALID_ARG},
        {"[1, 2]", 0, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 24, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
         KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", 4,
         KILN_ERR_INVALID_ARG},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{descr: '<f4', 'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': <f4, 'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_INVALID_ARG},
        /* the shape */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 3}", 12, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", 12, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", 0, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", 8, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,}", 4, KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4,
         KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807,)}", 4,
         KILN_ERR_INVALID_ARG},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 4,
         KILN_ERR_INVALID_ARG},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (3037000499, 3037000499)}", 8,
         KILN_ERR_INVALID_ARG},
        /* valid but not for kiln */
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, KILN_ERR_UNSUPPORTED},
        {"{'descr': '<U5', 'fortran_order': False, 'shape': (1,)}", 20, KILN_ERR_UNSUPPORTED},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", 8, KILN_ERR_UNSUPPORTED},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8, KILN_ERR_UNSUPPORTED},
        {"{'descr': '>f8', 'fortran_order': False, 'shape': (1,)}", 8, KILN_ERR_UNSUPPORTED},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4, KILN_ERR_UNSUPPORTED},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}", 4,
         KILN_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < KILN_COUNT(cases); i++) {
        base_diag d;
        base_diag_init(&d);
        kiln_status st = read_dict(cases[i].dict, cases[i].n_data, &d);
        if (st != cases[i].want)
            fprintf(stderr, "case %zu: %s -> %s (%s)\n", i, cases[i].dict, kiln_status_name(st),
                    base_diag_text(&d));
        UNIT_CHECK_EQ_INT(st, cases[i].want);
        /* every error names the file */
        if (st != KILN_OK) UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "case.npy");
        base_diag_free(&d);
    }
}

UNIT_TEST(npy_malformed_prefix)
{
    unsigned char buf[256];
    size_t n = build_npy(buf, sizeof(buf), "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", 6);
    ir_tensor t;
    UNIT_CHECK_EQ_INT(api_npy_read(buf, n, &t, NULL), KILN_OK);
    ir_tensor_release(&t);
    UNIT_CHECK_EQ_INT(api_npy_read(NULL, 0, &t, NULL), KILN_ERR_INVALID_ARG);
    /* bad magic, unknown versions, header length past the end */
    unsigned char bad[256];
    memcpy(bad, buf, n);
    bad[1] = 'n';
    UNIT_CHECK_EQ_INT(api_npy_read(bad, n, &t, NULL), KILN_ERR_INVALID_ARG);
    memcpy(bad, buf, n);
    bad[6] = 9;
    UNIT_CHECK_EQ_INT(api_npy_read(bad, n, &t, NULL), KILN_ERR_UNSUPPORTED);
    memcpy(bad, buf, n);
    bad[7] = 1;
    UNIT_CHECK_EQ_INT(api_npy_read(bad, n, &t, NULL), KILN_ERR_UNSUPPORTED);
    memcpy(bad, buf, n);
    bad[9] = 0xff;
    UNIT_CHECK_EQ_INT(api_npy_read(bad, n, &t, NULL), KILN_ERR_INVALID_ARG);
    memcpy(bad, buf, n);
    bad[6] = 2; /* as 2.0 the length field is 4 bytes and swallows the dict's first 2 */
    UNIT_CHECK_EQ_INT(api_npy_read(bad, n, &t, NULL), KILN_ERR_INVALID_ARG);
    /* every truncation fails cleanly (the buffer is copied so ASan sees the end) */
    for (size_t len = 0; len < n; len++) {
        unsigned char *p = malloc(len ? len : 1);
        memcpy(p, buf, len);
        UNIT_CHECK(api_npy_read(p, len, &t, NULL) != KILN_OK);
        free(p);
    }
    /* any single corrupted header byte: an error or a valid read, never a crash */
    for (size_t i = 0; i < 128; i++) {
        for (int v = 0; v < 256; v += 51) {
            memcpy(bad, buf, n);
            bad[i] = (unsigned char)v;
            if (api_npy_read(bad, n, &t, NULL) == KILN_OK) ir_tensor_release(&t);
            else UNIT_CHECK(t.data == NULL);
        }
    }
}

/* ---- malformed .npz ----------------------------------------------------------------- */

UNIT_TEST(npz_malformed)
{
    const size_t n = sizeof(numpy_savez) - 1;
    unsigned char *b = malloc(n);
    api_npz z;
    base_diag d;
    base_diag_init(&d);

    /* Every truncation fails (the end record is gone or points outside). */
    for (size_t len = 0; len < n; len += 7) {
        UNIT_CHECK(load_fixture_npz(numpy_savez, len, &z, NULL) != KILN_OK);
        UNIT_CHECK(z.n == 0 && z.names == NULL);
    }

    /* A flipped data byte breaks the CRC. The first member's data ends
     * just before the second local header. */
    memcpy(b, numpy_savez, n);
    const unsigned char *second = memmem(b + 4, n - 4, "PK\003\004", 4);
    UNIT_CHECK(second != NULL);
    if (second) {
        b[second - b - 1] ^= 0x40;
        UNIT_CHECK_EQ_INT(load_fixture_npz((const char *)b, n, &z, &d), KILN_ERR_INVALID_ARG);
        UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "CRC");
        UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "enc/out.npy");
    }

    /* ZIP64 sentinels in the end record are refused as unsupported. */
    memcpy(b, numpy_savez, n);
    memset(b + n - 22 + 16, 0xff, 4);
    UNIT_CHECK_EQ_INT(load_fixture_npz((const char *)b, n, &z, &d), KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "ZIP64");
    memcpy(b, numpy_savez, n);
    memset(b + n - 22 + 10, 0xff, 2);
    memset(b + n - 22 + 8, 0xff, 2);
    UNIT_CHECK_EQ_INT(load_fixture_npz((const char *)b, n, &z, &d), KILN_ERR_UNSUPPORTED);

    /* A member that is not .npy, and an unknown compression method. */
    memcpy(b, numpy_savez, n);
    unsigned char *cd = memmem(b, n, "PK\001\002", 4);
    UNIT_CHECK(cd != NULL);
    if (cd) {
        cd[46 + 8] = 'x'; /* "enc/out.xpy" */
        UNIT_CHECK_EQ_INT(load_fixture_npz((const char *)b, n, &z, &d), KILN_ERR_INVALID_ARG);
        memcpy(b, numpy_savez, n);
        cd[10] = 12; /* bzip2 */
        UNIT_CHECK_EQ_INT(load_fixture_npz((const char *)b, n, &z, &d), KILN_ERR_UNSUPPORTED);
        memcpy(b, numpy_savez, n);
        cd[8] |= 1; /* encrypted */
        UNIT_CHECK_EQ_INT(load_fixture_npz((const char *)b, n, &z, &d), KILN_ERR_UNSUPPORTED);
    }

    /* Not a ZIP at all, and a missing file. */
    UNIT_CHECK_EQ_INT(load_fixture_npz(numpy_v2, sizeof(numpy_v2) - 1, &z, &d), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_EQ_INT(api_npz_load("/nonexistent-dir/x.npz", &z, &d), KILN_ERR_IO);
    free(b);
    base_diag_free(&d);
}

/* Every byte of both NumPy archives set to 0x00 and to 0xff: each load
 * either succeeds or fails cleanly, and leaves nothing allocated on failure. */
UNIT_TEST(npz_byte_corruption)
{
    const struct {
        const char *bytes;
        size_t n;
    } files[] = {
        {numpy_savez, sizeof(numpy_savez) - 1},
        {numpy_savez_compressed, sizeof(numpy_savez_compressed) - 1},
    };
    for (size_t f = 0; f < KILN_COUNT(files); f++) {
        unsigned char *b = malloc(files[f].n);
        for (size_t i = 0; i < files[f].n; i++) {
            for (int v = 0; v < 2; v++) {
                memcpy(b, files[f].bytes, files[f].n);
                if (b[i] == (v ? 0xff : 0x00)) continue;
                b[i] = v ? 0xff : 0x00;
                api_npz z;
                kiln_status st = load_fixture_npz((const char *)b, files[f].n, &z, NULL);
                if (st == KILN_OK) api_npz_free(&z);
                else UNIT_CHECK(z.n == 0 && z.names == NULL && z.tensors == NULL);
            }
        }
        free(b);
    }
}

/* Fails the k-th allocation for every k: loads report KILN_ERR_OOM (and
 * free what they had), saves report an error; nothing crashes or leaks. */
UNIT_TEST(npz_allocation_failure)
{
    const char *path = tmp_path("oom.npz");
    const char *savez_files[] = {numpy_savez, numpy_savez_compressed};
    const size_t savez_sizes[] = {sizeof(numpy_savez) - 1, sizeof(numpy_savez_compressed) - 1};
    for (int f = 0; f < 2; f++) {
        UNIT_CHECK(write_bytes(path, savez_files[f], savez_sizes[f]));
        bool finished = false;
        for (long k = 0; k < 200 && !finished; k++) {
            base_diag d;
            base_diag_init(&d);
            api_npz z;
            base_fail_alloc_after(k);
            kiln_status st = api_npz_load(path, &z, &d);
            base_fail_alloc_after(-1);
            if (st == KILN_OK) {
                finished = true;
                api_npz_free(&z);
            } else {
                UNIT_CHECK_EQ_INT(st, KILN_ERR_OOM);
                UNIT_CHECK(z.names == NULL && z.tensors == NULL);
            }
            base_diag_free(&d);
        }
        UNIT_CHECK(finished);
    }
    remove(path);
}

/* NumPy reads any nonzero byte of a |b1 array as True; kiln's bools are 0/1. */
UNIT_TEST(npy_bool_bytes_normalized)
{
    unsigned char buf[256];
    size_t n = build_npy(buf, sizeof(buf), "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 3);
    buf[n - 3] = 0;
    buf[n - 2] = 2;
    buf[n - 1] = 0xff;
    ir_tensor t;
    UNIT_CHECK_EQ_INT(api_npy_read(buf, n, &t, NULL), KILN_OK);
    if (t.data) {
        const unsigned char *p = t.data;
        UNIT_CHECK(p[0] == 0 && p[1] == 1 && p[2] == 1);
    }
    ir_tensor_release(&t);
}
