/*
 * test_gprog.c: the CUDA program of a "cuda" artifact (runtime/gprog.h)
 * without a GPU: round trip, every truncation, byte flips and targeted
 * corruptions give clean KILN_ERR_INVALID_MODEL errors, the image picked
 * for each compute capability, and loading a "cuda" artifact: its program
 * is checked against the artifact before any device is opened, and a
 * machine without a GPU gets KILN_ERR_NO_DEVICE. tests/gpu/runtime.c runs
 * such artifacts on a GPU.
 */
#include "unit.h"

#include "runtime/artifact.h"
#include "runtime/cuda.h"
#include "runtime/gprog.h"

#include <stdlib.h>

static const uint8_t cubin80[] = "\177ELF pretend sm_80 code, 37 bytes";
static const uint8_t cubin90a[] = "\177ELF pretend sm_90a code";

/* The pieces of a program, kept alive together. */
typedef struct sample {
    rt_gimage images[2];
    rt_glaunch launches[4];
    rt_gtmap tmaps[3];
    rt_gprog prog;
} sample;

/* Two images; a kernel, a host segment, a kernel with 64 KB of shared
 * memory launched early, a persistent kernel whose name and label pad to
 * 4 bytes differently; three tensor maps, in the arena and in the weights,
 * the last an im2col one (x [2][3][4][64], a 3x3 convolution's pads of 1). */
static void sample_init(sample *s)
{
    memset(s, 0, sizeof(*s));
    s->images[0] = (rt_gimage){.sm = 80, .cubin = cubin80, .bytes = sizeof(cubin80)};
    s->images[1] = (rt_gimage){.sm = 90, .arch_specific = 1, .cubin = cubin90a, .bytes = sizeof(cubin90a)};
    s->launches[0] = (rt_glaunch){.segment = -1, .grid = 132, .block = 256, .name = "k_0", .label = "conv1+relu1"};
    s->launches[1] = (rt_glaunch){.segment = 0, .name = "", .label = "nonzero1 (fallback)"};
    s->launches[2] = (rt_glaunch){.segment = -1, .grid = 7, .block = 128, .smem = 64 * 1024, .name = "k_2",
                                  .label = "gemm", .early = true};
    s->launches[3] = (rt_glaunch){.segment = -1, .grid = 1, .block = 1024, .name = "k_12345", .label = "",
                                  .persistent = true};
    s->tmaps[0] = (rt_gtmap){.space = 0, .dtype = KILN_GPREC_FP16, .offset = 1024, .dim0 = 40, .dim1 = 30,
                             .stride1 = 96, .box0 = 64, .box1 = 128};
    s->tmaps[1] = (rt_gtmap){.space = 1, .dtype = KILN_GPREC_BF16, .offset = 0, .dim0 = 64, .dim1 = 2,
                             .stride1 = 128, .box0 = 64, .box1 = 64};
    s->tmaps[2] = (rt_gtmap){.space = 0, .dtype = KILN_GPREC_FP16, .offset = 512, .dim0 = 64, .dim1 = 4,
                             .stride1 = 128, .box0 = 64, .box1 = 128, .im2col = 1, .dim2 = 3, .dim3 = 2,
                             .stride2 = 512, .stride3 = 1536, .lower_w = -1, .lower_h = -1, .upper_w = -1,
                             .upper_h = -1, .step_w = 1, .step_h = 2};
    s->prog = (rt_gprog){.precision = KILN_GPREC_FP16, .n_images = 2, .images = s->images, .n_launches = 4,
                         .launches = s->launches, .max_smem = 64 * 1024, .arena_bytes = 4096, .weight_bytes = 256,
                         .n_tmaps = 3, .tmaps = s->tmaps};
}

static uint8_t *encode(const rt_gprog *p, size_t *n)
{
    void *buf = NULL;
    base_diag d;
    base_diag_init(&d);
    kiln_status st = rt_gprog_encode(p, &buf, n, &d);
    if (st != KILN_OK) unit_fail(__FILE__, __LINE__, "encode: %s", base_diag_text(&d));
    base_diag_free(&d);
    return buf;
}

static kiln_status decode_status(const void *buf, size_t n, base_diag *d)
{
    rt_gprog p;
    kiln_status st = rt_gprog_decode(buf, n, &p, d);
    rt_gprog_free(&p);
    return st;
}

static void expect_reject(const uint8_t *buf, size_t n, const char *msg, int line)
{
    base_diag d;
    base_diag_init(&d);
    kiln_status st = decode_status(buf, n, &d);
    if (st != KILN_ERR_INVALID_MODEL)
        unit_fail(__FILE__, line, "status %s, expected invalid model (%s)", kiln_status_name(st), base_diag_text(&d));
    else if (!strstr(base_diag_text(&d), msg))
        unit_fail(__FILE__, line, "message '%s' lacks '%s'", base_diag_text(&d), msg);
    base_diag_free(&d);
}
#define EXPECT_REJECT(buf, n, msg) expect_reject(buf, n, msg, __LINE__)

static void put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Byte offsets in the encoding of the sample. */
#define PAD8(n) (((n) + 7) / 8 * 8)
#define IMAGE0 40
#define CUBIN0 (IMAGE0 + 16)
#define IMAGE1 (CUBIN0 + PAD8(sizeof(cubin80)))
#define LAUNCH0 (IMAGE1 + 16 + PAD8(sizeof(cubin90a)))
#define LAUNCH1 (LAUNCH0 + 24 + 3 + 11 + 2) /* "k_0", "conv1+relu1", 2 bytes of padding */
#define LAUNCH2 (LAUNCH1 + 24 + 0 + 19 + 1) /* "", "nonzero1 (fallback)", 1 byte of padding */
#define LAUNCH3 (LAUNCH2 + 24 + 3 + 4 + 1)  /* "k_2", "gemm", 1 byte of padding */

/* msg with %zu replaced by off. */
static const char *at(const char *fmt, size_t off)
{
    static char buf[256];
    snprintf(buf, sizeof(buf), fmt, off);
    return buf;
}

UNIT_TEST(gprog_round_trip)
{
    sample s;
    sample_init(&s);
    size_t n;
    uint8_t *buf = encode(&s.prog, &n);
    if (!buf) return;
    UNIT_CHECK(memcmp(buf, KILN_GPROG_MAGIC, 8) == 0);
    UNIT_CHECK_EQ_INT(n % 4, 0);
    UNIT_CHECK(memcmp(buf + CUBIN0, cubin80, sizeof(cubin80)) == 0);
    UNIT_CHECK(memcmp(buf + LAUNCH0 + 20, "k_0", 3) == 0);
    rt_gprog p;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(rt_gprog_decode(buf, n, &p, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(p.precision, KILN_GPREC_FP16);
    UNIT_CHECK_EQ_INT(p.max_smem, 64 * 1024);
    UNIT_CHECK_EQ_INT(p.arena_bytes, 4096);
    UNIT_CHECK_EQ_INT(p.weight_bytes, 256);
    UNIT_CHECK_EQ_INT(p.n_images, 2);
    UNIT_CHECK_EQ_INT(p.n_launches, 4);
    if (p.n_images == 2 && p.n_launches == 4) {
        UNIT_CHECK(p.images[0].sm == 80 && !p.images[0].arch_specific && p.images[0].bytes == sizeof(cubin80));
        UNIT_CHECK(p.images[0].cubin == buf + CUBIN0); /* in place, not copied */
        UNIT_CHECK(p.images[1].sm == 90 && p.images[1].arch_specific && p.images[1].bytes == sizeof(cubin90a));
        UNIT_CHECK(memcmp(p.images[1].cubin, cubin90a, sizeof(cubin90a)) == 0);
        for (int i = 0; i < 4; i++) {
            const rt_glaunch *a = &p.launches[i], *b = &s.launches[i];
            UNIT_CHECK(a->segment == b->segment && a->grid == b->grid && a->block == b->block && a->smem == b->smem);
            UNIT_CHECK(a->persistent == b->persistent && a->early == b->early);
            UNIT_CHECK(strcmp(a->name, b->name) == 0 && strcmp(a->label, b->label) == 0);
        }
    }
    UNIT_CHECK_EQ_INT(p.n_tmaps, 3);
    for (int i = 0; i < p.n_tmaps && i < 3; i++) {
        const rt_gtmap *a = &p.tmaps[i], *b = &s.tmaps[i];
        UNIT_CHECK(a->space == b->space && a->dtype == b->dtype && a->offset == b->offset && a->dim0 == b->dim0 &&
                   a->dim1 == b->dim1 && a->stride1 == b->stride1 && a->box0 == b->box0 && a->box1 == b->box1);
        UNIT_CHECK(a->im2col == b->im2col && a->dim2 == b->dim2 && a->dim3 == b->dim3 && a->stride2 == b->stride2 &&
                   a->stride3 == b->stride3 && a->lower_w == b->lower_w && a->lower_h == b->lower_h &&
                   a->upper_w == b->upper_w && a->upper_h == b->upper_h && a->step_w == b->step_w &&
                   a->step_h == b->step_h);
    }
    rt_gprog_free(&p);
    free(buf);

    /* the segment codes: -3 a kernel launched early, -4 a persistent one */
    s.launches[3].early = true;
    buf = encode(&s.prog, &n);
    int32_t code[2] = {0, 0};
    if (buf && n > LAUNCH3 + 4) memcpy(&code[0], buf + LAUNCH2, 4), memcpy(&code[1], buf + LAUNCH3, 4);
    UNIT_CHECK(code[0] == -3 && code[1] == -4);
    UNIT_CHECK_EQ_INT(rt_gprog_decode(buf, n, &p, &d), KILN_OK);
    if (p.n_launches == 4)
        UNIT_CHECK(p.launches[0].segment == -1 && !p.launches[0].early && p.launches[2].segment == -1 &&
                   p.launches[2].early && !p.launches[2].persistent && p.launches[3].segment == -1 &&
                   p.launches[3].early && p.launches[3].persistent);
    rt_gprog_free(&p);
    free(buf);
    s.launches[3].early = false;

    /* no images, a program of host segments alone */
    s.prog.n_images = 0;
    s.prog.n_launches = 1;
    s.prog.launches = &s.launches[1];
    buf = encode(&s.prog, &n);
    UNIT_CHECK_EQ_INT(rt_gprog_decode(buf, n, &p, &d), KILN_OK);
    UNIT_CHECK(p.n_images == 0 && p.n_launches == 1 && p.launches[0].segment == 0);
    rt_gprog_free(&p);
    free(buf);

    /* what cannot be encoded */
    void *out;
    s.prog.n_launches = -1;
    UNIT_CHECK_EQ_INT(rt_gprog_encode(&s.prog, &out, &n, &d), KILN_ERR_INVALID_ARG);
    s.prog.n_launches = 1;
    s.prog.n_images = 1;
    s.prog.images = NULL;
    UNIT_CHECK_EQ_INT(rt_gprog_encode(&s.prog, &out, &n, &d), KILN_ERR_INVALID_ARG);
    UNIT_CHECK(out == NULL);
    base_diag_free(&d);

    UNIT_CHECK(strcmp(rt_gprec_name(KILN_GPREC_FP32), "fp32") == 0);
    UNIT_CHECK(strcmp(rt_gprec_name(KILN_GPREC_BF16), "bf16") == 0);
}

UNIT_TEST(gprog_every_truncation_is_rejected)
{
    sample s;
    sample_init(&s);
    size_t n;
    uint8_t *buf = encode(&s.prog, &n);
    if (!buf) return;
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        /* a fresh copy of exactly k bytes, so ASan sees any read past it */
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, buf, k);
        if (decode_status(cut, k, NULL) != KILN_ERR_INVALID_MODEL) bad++;
        free(cut);
    }
    UNIT_CHECK_EQ_INT(bad, 0);
    UNIT_CHECK_EQ_INT(decode_status(NULL, 0, NULL), KILN_ERR_INVALID_MODEL);
    uint8_t *longer = calloc(n + 4, 1);
    memcpy(longer, buf, n);
    EXPECT_REJECT(longer, n + 4, "4 unexpected bytes at its end");
    free(longer);
    free(buf);
}

UNIT_TEST(gprog_byte_flips_never_crash)
{
    sample s;
    sample_init(&s);
    size_t n;
    uint8_t *buf = encode(&s.prog, &n);
    if (!buf) return;
    static const uint8_t flips[] = {0x01, 0x80, 0xff, 0x7f, 0x20};
    int n_bad = 0, n_other = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; f < sizeof(flips); f++) {
            uint8_t *copy = malloc(n);
            memcpy(copy, buf, n);
            copy[i] ^= flips[f];
            kiln_status st = decode_status(copy, n, NULL);
            free(copy);
            if (st == KILN_ERR_INVALID_MODEL) n_bad++;
            else if (st != KILN_OK) n_other++;
        }
    UNIT_CHECK_EQ_INT(n_other, 0);
    UNIT_CHECK(n_bad > (int)n); /* most flips outside the cubins and strings are caught */
    free(buf);
}

UNIT_TEST(gprog_targeted_corruptions)
{
    sample s;
    sample_init(&s);
    size_t n;
    uint8_t *good = encode(&s.prog, &n);
    if (!good) return;
    uint8_t *b = malloc(n);
    UNIT_CHECK(memcmp(good + LAUNCH1 + 24, "nonzero1", 8) == 0 && memcmp(good + LAUNCH2 + 20, "k_2", 3) == 0);
#define FRESH() memcpy(b, good, n)

    FRESH();
    b[3] = 'X';
    EXPECT_REJECT(b, n, "bad magic");
    FRESH();
    b[6] = '1'; /* KGPROG1: before tensor maps */
    EXPECT_REJECT(b, n, "format 1, from an older kiln (this one reads format 3): compile the model again");
    FRESH();
    b[6] = '2'; /* KGPROG2: tiled tensor maps only */
    EXPECT_REJECT(b, n, "format 2, from an older kiln (this one reads format 3): compile the model again");
    FRESH();
    put(b + 8, 3, 4);
    EXPECT_REJECT(b, n, "unknown precision 3");
    FRESH();
    put(b + 12, 17, 4);
    EXPECT_REJECT(b, n, "17 images (byte offset 12) cannot fit");
    FRESH();
    put(b + 16, 0xffffffffu, 4);
    EXPECT_REJECT(b, n, "launches (byte offset 16) cannot fit");
    FRESH();
    put(b + 20, KILN_GPROG_MAX_SMEM + 1, 4);
    EXPECT_REJECT(b, n, "max_smem of 233473 bytes (byte offset 20) is above");
    FRESH();
    put(b + 20, 48 * 1024, 4);
    EXPECT_REJECT(b, n, "launch 2: kernel 'k_2': 65536 bytes of shared memory");

    /* tensor maps, the last 3 x 112 bytes */
    size_t tm = n - 3 * 112, im = tm + 2 * 112;
    FRESH();
    put(b + tm - 4, 1000000, 4);
    EXPECT_REJECT(b, n, "1000000 tensor maps");
    FRESH();
    put(b + tm, 2, 4);
    EXPECT_REJECT(b, n, "tensor map 0: tensor map at byte offset");
    FRESH();
    put(b + tm + 4, KILN_GPREC_FP32, 4);
    EXPECT_REJECT(b, n, "its dtype is not fp16 or bf16");
    FRESH();
    put(b + tm + 8, 4096, 8);
    EXPECT_REJECT(b, n, "it reaches beyond its space");
    FRESH();
    put(b + 112 + tm + 24, 3, 8); /* 3 rows of 128 bytes in 256 bytes of weights */
    EXPECT_REJECT(b, n, "tensor map 1: tensor map at byte offset");
    FRESH();
    put(b + tm + 32, 88, 8);
    EXPECT_REJECT(b, n, "not a multiple of 16 bytes");
    FRESH();
    put(b + tm + 40, 72, 4);
    EXPECT_REJECT(b, n, "its box is not");
    /* the im2col map */
    FRESH();
    put(b + tm + 48, 2, 4);
    EXPECT_REJECT(b, n, "its kind is neither 0 (tiled) nor 1 (im2col)");
    FRESH();
    put(b + im + 60, 3, 8); /* 3 images of 1536 bytes from byte 512 of 4096 */
    EXPECT_REJECT(b, n, "tensor map 2: tensor map at byte offset");
    EXPECT_REJECT(b, n, "it reaches beyond its space");
    /* extents whose products wrap 64 bits: 2^25 images (and rows) 2^39 bytes apart */
    FRESH();
    put(b + im + 60, ((uint64_t)1 << 25) + 1, 8);
    put(b + im + 76, (uint64_t)1 << 39, 8);
    EXPECT_REJECT(b, n, "tensor map 2: tensor map at byte offset");
    EXPECT_REJECT(b, n, "it reaches beyond its space");
    FRESH();
    put(b + tm + 24, ((uint64_t)1 << 25) + 1, 8);
    put(b + tm + 32, (uint64_t)1 << 39, 8);
    EXPECT_REJECT(b, n, "tensor map 0: tensor map at byte offset");
    EXPECT_REJECT(b, n, "it reaches beyond its space");
    FRESH();
    put(b + im + 68, 256, 8); /* rows of 4 pixels x 128 bytes closer than that */
    EXPECT_REJECT(b, n, "each at least the dimension before");
    FRESH();
    put(b + im + 84, (uint32_t)-129, 4);
    EXPECT_REJECT(b, n, "outside -128..127");
    FRESH();
    put(b + im + 92, (uint32_t)-5, 4); /* w from -1 to 4 - 1 - 5 */
    EXPECT_REJECT(b, n, "its pixel box is empty");
    FRESH();
    put(b + im + 104, 9, 4);
    EXPECT_REJECT(b, n, "a traversal step is not 1..8");
    FRESH();
    put(b + im + 108, 1, 4);
    EXPECT_REJECT(b, n, "padding not zero");

    /* images */
    FRESH();
    put(b + IMAGE0, 7, 4);
    EXPECT_REJECT(b, n, "image 0: sm 7 (at byte offset 40) is not a compute capability");
    FRESH();
    put(b + IMAGE0 + 4, 2, 4);
    EXPECT_REJECT(b, n, "arch_specific is 2");
    FRESH();
    put(b + IMAGE0 + 8, 0, 8);
    EXPECT_REJECT(b, n, "cubin of 0 bytes");
    FRESH();
    put(b + IMAGE0 + 8, (uint64_t)1 << 40, 8);
    EXPECT_REJECT(b, n, "cubin of 1099511627776 bytes at byte offset 56");
    FRESH();
    b[CUBIN0 + sizeof(cubin80)] = 9;
    EXPECT_REJECT(b, n, at("image 0: padding byte at byte offset %zu is 9", CUBIN0 + sizeof(cubin80)));
    FRESH();
    put(b + IMAGE1, 80, 4);
    put(b + IMAGE1 + 4, 0, 4);
    EXPECT_REJECT(b, n, "a second image for sm_80");

    /* launches */
    FRESH();
    put(b + LAUNCH0, (uint32_t)-5, 4);
    EXPECT_REJECT(b, n, "launch 0: segment -5");
    FRESH();
    put(b + LAUNCH0 + 4, 0, 4);
    EXPECT_REJECT(b, n, "kernel 'k_0': grid of 0 blocks");
    FRESH();
    put(b + LAUNCH0 + 8, 100, 4);
    EXPECT_REJECT(b, n, at("kernel 'k_0': block of 100 threads (at byte offset %zu) is not a multiple of 32",
                           LAUNCH0 + 8));
    FRESH();
    put(b + LAUNCH0 + 8, 2048, 4);
    EXPECT_REJECT(b, n, "block of 2048 threads");
    FRESH();
    put(b + LAUNCH0 + 8, 0, 4);
    EXPECT_REJECT(b, n, "block of 0 threads");
    FRESH();
    b[LAUNCH0 + 21] = 0;
    EXPECT_REJECT(b, n, at("launch 0: name at byte offset %zu holds a NUL byte", LAUNCH0 + 20));
    FRESH();
    put(b + LAUNCH0 + 16, KILN_GPROG_MAX_NAME + 1, 4);
    EXPECT_REJECT(b, n, "name of 4097 bytes");
    FRESH();
    put(b + LAUNCH0 + 16, 0x7fffffff, 4);
    EXPECT_REJECT(b, n, "launch 0: name of 2147483647 bytes");
    FRESH();
    put(b + LAUNCH1 + 4, 1, 4); /* a grid on a host segment */
    EXPECT_REJECT(b, n, at("host segment 0 (at byte offset %zu) has a kernel name, grid, block or shared memory",
                           LAUNCH1));
    FRESH();
    b[LAUNCH2 - 1] = 1; /* launch 1's padding */
    EXPECT_REJECT(b, n, "launch 1: padding byte");
    FRESH();
    put(b + LAUNCH2 + 16, 0, 4); /* launch 2 loses its name: its bytes become the label's length */
    EXPECT_REJECT(b, n, "launch 2");

    /* kernels need an image */
    s.prog.n_images = 0;
    uint8_t *none = NULL;
    size_t n_none;
    none = encode(&s.prog, &n_none);
    EXPECT_REJECT(none, n_none, "kernel launches but no cubin image");
    free(none);
#undef FRESH
    free(b);
    free(good);
}

UNIT_TEST(gprog_picks_the_image_for_the_device)
{
    rt_gimage ims[3] = {{.sm = 80}, {.sm = 90, .arch_specific = 1}, {.sm = 86}};
    rt_gprog p = {.n_images = 2, .images = ims};
    UNIT_CHECK(rt_gprog_pick_image(&p, 9, 0) == &ims[1]);
    UNIT_CHECK(rt_gprog_pick_image(&p, 8, 0) == &ims[0]);
    UNIT_CHECK(rt_gprog_pick_image(&p, 8, 9) == &ims[0]);
    UNIT_CHECK(rt_gprog_pick_image(&p, 7, 5) == NULL);
    UNIT_CHECK(rt_gprog_pick_image(&p, 10, 0) == NULL); /* sm_80 SASS does not run on Blackwell */
    UNIT_CHECK(rt_gprog_pick_image(&p, 12, 0) == NULL);
    p.n_images = 3;
    UNIT_CHECK(rt_gprog_pick_image(&p, 8, 9) == &ims[2]);
    UNIT_CHECK(rt_gprog_pick_image(&p, 8, 6) == &ims[2]);
    UNIT_CHECK(rt_gprog_pick_image(&p, 8, 0) == &ims[0]);
    ims[1].arch_specific = 0; /* generic sm_90 runs on 9.x */
    UNIT_CHECK(rt_gprog_pick_image(&p, 9, 0) == &ims[1]);
    p.n_images = 0;
    UNIT_CHECK(rt_gprog_pick_image(&p, 9, 0) == NULL);
}

/* ---- "cuda" artifacts --------------------------------------------------------------- */

/* An artifact around the sample program: x f32[16] -> y f32[16]; segment
 * 0 (launch 1) has no ONNX worth loading, so it is left out unless asked. */
static uint8_t *cuda_artifact(const rt_gprog *p, size_t *n)
{
    size_t code_bytes;
    uint8_t *code = encode(p, &code_bytes);
    if (!code) return NULL;
    static const float weights[64];
    kiln_rt_tensor_info x = {.name = "x", .dtype = KILN_F32, .rank = 1, .dims = {16}};
    kiln_rt_tensor_info y = {.name = "y", .dtype = KILN_F32, .rank = 1, .dims = {16}};
    rt_artifact_desc a = {.target = "cuda", .isa = "sm_80+sm_90a", .default_threads = 1, .n_inputs = 1,
                          .n_outputs = 1, .inputs = &x, .outputs = &y, .arena_bytes = 4096, .code = code,
                          .code_bytes = code_bytes, .weights = weights, .weight_bytes = sizeof(weights)};
    void *buf = NULL;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(rt_artifact_encode(&a, &buf, n, &d), KILN_OK);
    base_diag_free(&d);
    free(code);
    return buf;
}

static void expect_load(const rt_gprog *p, kiln_status st, const char *msg, int line)
{
    size_t n;
    uint8_t *art = cuda_artifact(p, &n);
    if (!art) return;
    kiln_rt_model *m = (kiln_rt_model *)1;
    kiln_status got = kiln_rt_load_buffer(art, n, 0, &m);
    if (got != st)
        unit_fail(__FILE__, line, "load gave %s, expected %s (%s)", kiln_status_name(got), kiln_status_name(st),
                  kiln_rt_last_error());
    else if (!strstr(kiln_rt_last_error(), msg))
        unit_fail(__FILE__, line, "message '%s' lacks '%s'", kiln_rt_last_error(), msg);
    if (got == KILN_OK) kiln_rt_free(m);
    else if (m) unit_fail(__FILE__, line, "*out not cleared on failure");
    free(art);
}
#define EXPECT_LOAD(p, st, msg) expect_load(p, st, msg, __LINE__)

UNIT_TEST(gprog_cuda_artifacts_are_checked_before_the_device)
{
    sample s;
    sample_init(&s);
    s.prog.weight_bytes = 64 * sizeof(float);
    s.prog.n_tmaps = 1; /* the one in the arena: the weights' sizes change below */
    s.launches[1] = s.launches[0]; /* no segments: the artifact has none */

    s.prog.arena_bytes = 8192;
    EXPECT_LOAD(&s.prog, KILN_ERR_INVALID_MODEL, "cuda program expects an arena of 8192 bytes; its plan has 4096");
    s.prog.arena_bytes = 4096;
    s.prog.weight_bytes = 100;
    EXPECT_LOAD(&s.prog, KILN_ERR_INVALID_MODEL, "expects 100 bytes of weights; its WEIGHTS section has 256");
    s.prog.weight_bytes = 256;
    s.launches[1] = (rt_glaunch){.segment = 0, .name = "", .label = "nonzero1 (fallback)"};
    EXPECT_LOAD(&s.prog, KILN_ERR_INVALID_MODEL, "launch 1 ('nonzero1 (fallback)') runs segment 0; the artifact has 0");
    s.launches[1] = s.launches[0];
    s.launches[3].block = 1000;
    EXPECT_LOAD(&s.prog, KILN_ERR_INVALID_MODEL, "block of 1000 threads");
    s.launches[3].block = 1024;

    /* a well-formed artifact: without a GPU, a clean NO_DEVICE; with one,
     * the pretend cubins are refused */
    if (rt_cuda_device_count() == 0) {
        EXPECT_LOAD(&s.prog, KILN_ERR_NO_DEVICE, "cannot run a 'cuda' artifact");
    } else {
        size_t n;
        uint8_t *art = cuda_artifact(&s.prog, &n);
        kiln_rt_model *m = NULL;
        UNIT_CHECK(kiln_rt_load_buffer(art, n, 0, &m) != KILN_OK && m == NULL);
        free(art);
    }
}
