/*
 * test_runtime.c: the CPU runtime: the .kiln artifact (round trip, every
 * truncation, byte flips and targeted corruptions), the worker pool
 * (every rTask once per run, barriers hold, under many shapes of program),
 * and end to end: a real shared object compiled here with `cc -shared`,
 * packed into an artifact with a fallback segment, loaded with 1 to 3
 * threads and run many times; load errors give clear messages.
 */
#include "model_builder.h"
#include "runtime/artifact.h"
#include "runtime/rt-impl.h"
#include "unit.h"

#include <limits.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 100

/* ---- a small artifact --------------------------------------------------------------- */

/* The pieces of a description, kept alive together. */
typedef struct sample {
    kiln_rt_tensor_info in, out;
    rt_binding seg_in, seg_out;
    rt_segment_desc seg;
    float weights[N];
    void *onnx;
    size_t onnx_bytes;
    rt_artifact_desc desc;
} sample;

/* A Relu segment: z -> r, both f32[N]. */
static void *relu_onnx(size_t *n)
{
    static mb_model mb; /* large: kept off the stack */
    mb_init(&mb, 17);
    mb_input(&mb, "z", KILN_F32, 1, (int64_t[]){N});
    mb_node(&mb, "Relu", "relu", "z", NULL, "r");
    mb_output(&mb, "r");
    return mb_pack(&mb, n);
}

/* y = relu(2 * (x + 1) + w): x an input, y an output, y' = x + 1 at arena
 * offset 0, z = 2 y' + w at 512, the Relu as fallback segment 0. */
static void sample_init(sample *s, const void *code, size_t code_bytes)
{
    memset(s, 0, sizeof(*s));
    s->in = (kiln_rt_tensor_info){.name = "x", .dtype = KILN_F32, .rank = 1, .dims = {N}};
    s->out = (kiln_rt_tensor_info){.name = "y", .dtype = KILN_F32, .rank = 1, .dims = {N}};
    s->seg_in = (rt_binding){.kind = RT_BIND_ARENA, .offset = 512, .dtype = KILN_F32, .rank = 1, .dims = {N}};
    s->seg_out = (rt_binding){.kind = RT_BIND_OUTPUT, .io = 0, .dtype = KILN_F32, .rank = 1, .dims = {N}};
    for (int i = 0; i < N; i++) s->weights[i] = 0.25f * (float)i;
    s->onnx = relu_onnx(&s->onnx_bytes);
    s->seg = (rt_segment_desc){.onnx = s->onnx, .onnx_bytes = s->onnx_bytes, .n_in = 1, .in = &s->seg_in,
                               .n_out = 1, .out = &s->seg_out};
    s->desc = (rt_artifact_desc){
        .target = "c", .isa = "generic", .meta = "model: sample\noptions: -O2", .default_threads = 2,
        .n_inputs = 1, .n_outputs = 1, .inputs = &s->in, .outputs = &s->out,
        .arena_bytes = 1024, .scratch_bytes = 64, .code = code, .code_bytes = code_bytes,
        .weights = s->weights, .weight_bytes = sizeof(s->weights), .n_segments = 1, .segments = &s->seg};
}

static void sample_free(sample *s) { free(s->onnx); }

static const uint8_t fake_code[] = "\177ELF not really a shared object, but the reader does not care";

static kiln_status read_status(const void *buf, size_t n, base_diag *d)
{
    rt_artifact a;
    kiln_status st = rt_artifact_read(buf, n, &a, d);
    rt_artifact_free(&a);
    return st;
}

/* Encodes s's description. OUT: *n; free() the result. */
static uint8_t *encode(const rt_artifact_desc *a, size_t *n)
{
    void *buf = NULL;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(rt_artifact_encode(a, &buf, n, &d), KILN_OK);
    base_diag_free(&d);
    return buf;
}

/* Expects buf to be rejected with `st` and a message containing `msg`. */
static void expect_reject(const void *buf, size_t n, kiln_status st, const char *msg, int line)
{
    base_diag d;
    base_diag_init(&d);
    kiln_status got = read_status(buf, n, &d);
    if (got != st) unit_fail(__FILE__, line, "status %s, expected %s (%s)", kiln_status_name(got),
                             kiln_status_name(st), base_diag_text(&d));
    else if (!strstr(base_diag_text(&d), msg))
        unit_fail(__FILE__, line, "message '%s' lacks '%s'", base_diag_text(&d), msg);
    base_diag_free(&d);
}
#define EXPECT_REJECT(buf, n, st, msg) expect_reject(buf, n, st, msg, __LINE__)

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The section table entry of a kind; NULL when absent. */
static uint8_t *entry(uint8_t *buf, int kind)
{
    uint32_t ns = (uint32_t)le(buf + 24, 4);
    for (uint32_t i = 0; i < ns; i++) {
        uint8_t *e = buf + RT_ARTIFACT_HEADER_BYTES + 24 * i;
        if ((int)le(e, 4) == kind) return e;
    }
    return NULL;
}

static uint8_t *section(uint8_t *buf, int kind) { return buf + le(entry(buf, kind) + 8, 8); }

UNIT_TEST(artifact_round_trip)
{
    sample s;
    sample_init(&s, fake_code, sizeof(fake_code));
    size_t n;
    uint8_t *buf = encode(&s.desc, &n);
    UNIT_CHECK(n % 64 == 0);
    UNIT_CHECK(memcmp(buf, "KILNART", 8) == 0);
    rt_artifact a;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(rt_artifact_read(buf, n, &a, &d), KILN_OK);
    const rt_artifact_desc *r = &a.desc;
    UNIT_CHECK(strcmp(r->target, "c") == 0 && strcmp(r->isa, "generic") == 0);
    UNIT_CHECK(strcmp(a.kiln_version, KILN_VERSION) == 0);
    UNIT_CHECK(r->meta && strcmp(r->meta, s.desc.meta) == 0);
    UNIT_CHECK_EQ_INT(r->default_threads, 2);
    UNIT_CHECK_EQ_INT(r->n_inputs, 1);
    UNIT_CHECK_EQ_INT(r->n_outputs, 1);
    UNIT_CHECK(strcmp(r->inputs[0].name, "x") == 0 && strcmp(r->outputs[0].name, "y") == 0);
    UNIT_CHECK(r->inputs[0].dtype == KILN_F32 && r->inputs[0].rank == 1 && r->inputs[0].dims[0] == N);
    UNIT_CHECK_EQ_INT(r->outputs[0].nbytes, 4 * N);
    UNIT_CHECK_EQ_INT(r->arena_bytes, 1024);
    UNIT_CHECK_EQ_INT(r->scratch_bytes, 64);
    UNIT_CHECK(r->code_bytes == sizeof(fake_code) && memcmp(r->code, fake_code, sizeof(fake_code)) == 0);
    UNIT_CHECK(r->weight_bytes == sizeof(s.weights) && memcmp(r->weights, s.weights, sizeof(s.weights)) == 0);
    UNIT_CHECK((uintptr_t)((const uint8_t *)r->weights - buf) % 64 == 0);
    UNIT_CHECK_EQ_INT(r->n_segments, 1);
    if (r->n_segments == 1) {
        const rt_segment_desc *g = &r->segments[0];
        UNIT_CHECK(g->onnx_bytes == s.onnx_bytes && memcmp(g->onnx, s.onnx, s.onnx_bytes) == 0);
        UNIT_CHECK(g->n_in == 1 && g->n_out == 1);
        UNIT_CHECK(g->in[0].kind == RT_BIND_ARENA && g->in[0].offset == 512 && g->in[0].dims[0] == N);
        UNIT_CHECK(g->out[0].kind == RT_BIND_OUTPUT && g->out[0].io == 0 && g->out[0].dtype == KILN_F32);
    }
    rt_artifact_free(&a);

    /* no segments, no meta, no weights: still a valid file */
    s.desc.n_segments = 0;
    s.desc.meta = NULL;
    s.desc.weight_bytes = 0;
    free(buf);
    buf = encode(&s.desc, &n);
    UNIT_CHECK_EQ_INT(rt_artifact_read(buf, n, &a, &d), KILN_OK);
    UNIT_CHECK(a.desc.meta == NULL && a.desc.n_segments == 0 && a.desc.weight_bytes == 0);
    rt_artifact_free(&a);
    base_diag_free(&d);
    free(buf);
    sample_free(&s);
}

UNIT_TEST(artifact_every_truncation_is_rejected)
{
    sample s;
    sample_init(&s, fake_code, sizeof(fake_code));
    size_t n;
    uint8_t *buf = encode(&s.desc, &n);
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        /* a fresh copy of exactly k bytes, so ASan sees any read past it */
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, buf, k);
        if (read_status(cut, k, NULL) != KILN_ERR_INVALID_MODEL) bad++;
        free(cut);
    }
    UNIT_CHECK_EQ_INT(bad, 0);
    uint8_t *longer = calloc(n + 64, 1);
    memcpy(longer, buf, n);
    EXPECT_REJECT(longer, n + 64, KILN_ERR_INVALID_MODEL, "truncated or padded");
    free(longer);
    free(buf);
    sample_free(&s);
}

UNIT_TEST(artifact_byte_flips_never_crash)
{
    sample s;
    sample_init(&s, fake_code, sizeof(fake_code));
    size_t n;
    uint8_t *buf = encode(&s.desc, &n);
    /* everything but the CODE and WEIGHTS blobs, which the reader does not interpret */
    size_t end = (size_t)le(entry(buf, RT_SEC_CODE) + 8, 8);
    int n_bad = 0, n_other = 0, n_fixed_ok = 0;
    static const uint8_t flips[] = {0x01, 0x80, 0xff, 0x7f};
    for (size_t i = 0; i < end; i++)
        for (size_t f = 0; f < sizeof(flips); f++) {
            buf[i] ^= flips[f];
            kiln_status st = read_status(buf, n, NULL);
            buf[i] ^= flips[f];
            if (st == KILN_ERR_INVALID_MODEL || st == KILN_ERR_UNSUPPORTED) n_bad++;
            else if (st != KILN_OK) n_other++;
            else if (i < 32) n_fixed_ok++; /* magic, version, sizes, count, flags: always checked */
        }
    UNIT_CHECK_EQ_INT(n_other, 0);
    UNIT_CHECK_EQ_INT(n_fixed_ok, 0);
    UNIT_CHECK(n_bad > 0); /* the rest may hit names, padding, meta or the ONNX bytes, all legal */
    free(buf);
    sample_free(&s);
}

UNIT_TEST(artifact_targeted_corruptions)
{
    sample s;
    sample_init(&s, fake_code, sizeof(fake_code));
    size_t n;
    uint8_t *good = encode(&s.desc, &n);
    uint8_t *b = malloc(n);
#define FRESH() memcpy(b, good, n)

    FRESH();
    b[0] = 'X';
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "bad magic");
    FRESH();
    put(b + 8, 2, 4);
    EXPECT_REJECT(b, n, KILN_ERR_UNSUPPORTED, "format version 2 is newer");
    FRESH();
    put(b + 16, n - 64, 8);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "truncated or padded");
    FRESH();
    put(b + 24, 1000, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "1000 sections");
    FRESH();
    b[64 + 15] = 'x'; /* target not NUL-terminated */
    memset(b + 64, 'c', 16);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "target field is not NUL-terminated");

    /* section table */
    FRESH();
    put(entry(b, RT_SEC_PLAN) + 16, n, 8);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "PLAN section: bytes");
    FRESH();
    put(entry(b, RT_SEC_WEIGHTS) + 8, (uint64_t)1 << 62, 8);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "outside the file");
    FRESH();
    put(entry(b, RT_SEC_PLAN) + 16, UINT64_MAX, 8); /* offset + size overflows */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "outside the file");
    FRESH();
    put(entry(b, RT_SEC_PLAN) + 8, le(entry(b, RT_SEC_SIGNATURE) + 8, 8), 8);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "overlap");
    FRESH();
    put(entry(b, RT_SEC_PLAN) + 8, le(entry(b, RT_SEC_PLAN) + 8, 8) + 8, 8);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "not a multiple of 64");
    FRESH();
    put(entry(b, RT_SEC_PLAN) + 8, 0, 8); /* over the header */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "outside the file's sections");
    FRESH();
    put(entry(b, RT_SEC_META), RT_SEC_PLAN, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "appears twice");
    FRESH();
    put(entry(b, RT_SEC_META), 77, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "unknown kind 77");
    FRESH();
    put(entry(b, RT_SEC_CODE), RT_SEC_META, 4);
    put(entry(b, RT_SEC_META), RT_SEC_SEGMENTS + 100, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "unknown kind");

    /* counts, strings, types */
    FRESH();
    put(section(b, RT_SEC_SIGNATURE), UINT32_MAX, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "cannot fit");
    FRESH();
    put(section(b, RT_SEC_SEGMENTS), UINT32_MAX, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "segments cannot fit");
    FRESH();
    put(section(b, RT_SEC_SEGMENTS) + 4, UINT64_MAX, 8); /* ONNX size */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "segment 0: ONNX model of");
    FRESH();
    put(section(b, RT_SEC_SEGMENTS) + 12, UINT32_MAX, 4); /* n_in */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "bindings cannot fit");
    FRESH();
    put(section(b, RT_SEC_SIGNATURE) + 8, UINT32_MAX, 4); /* name length */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "input 0: name of");
    FRESH();
    section(b, RT_SEC_SIGNATURE)[12] = 0; /* the name "x" */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "NUL byte");
    FRESH();
    put(section(b, RT_SEC_SIGNATURE) + 13, 99, 4); /* dtype */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "input 0: unknown dtype 99");
    FRESH();
    put(section(b, RT_SEC_SIGNATURE) + 13, KILN_STRING, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "no fixed size");
    FRESH();
    put(section(b, RT_SEC_SIGNATURE) + 17, 9, 4); /* rank */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "rank 9");
    FRESH();
    put(section(b, RT_SEC_SIGNATURE) + 21, (uint64_t)-5, 8); /* dims[0] */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "negative");
    FRESH();
    put(section(b, RT_SEC_PLAN), (uint64_t)1 << 50, 8);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "above 2^40");
    FRESH();
    put(section(b, RT_SEC_PLAN) + 16, 0, 4);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "default thread count 0");
    FRESH();
    put(entry(b, RT_SEC_PLAN) + 16, 16, 8); /* a short PLAN */
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "truncated");
    FRESH();
    section(b, RT_SEC_META)[3] = 0;
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "META section: the text holds a NUL");
    FRESH();
    put(entry(b, RT_SEC_CODE) + 16, 0, 8);
    EXPECT_REJECT(b, n, KILN_ERR_INVALID_MODEL, "CODE section: empty");

    /* bindings, crafted through the encoder */
    rt_binding in0 = s.seg_in, out0 = s.seg_out;
    struct {
        rt_binding in, out;
        kiln_status st;
        const char *msg;
    } cases[] = {
        {{.kind = RT_BIND_ARENA, .offset = 1024, .dtype = KILN_F32, .rank = 1, .dims = {N}}, out0,
         KILN_ERR_INVALID_MODEL, "segment 0 input 0: f32[100] (400 bytes) at offset 1024 lies outside the arena"},
        {{.kind = RT_BIND_ARENA, .offset = 700, .dtype = KILN_F32, .rank = 1, .dims = {N}}, out0,
         KILN_ERR_INVALID_MODEL, "lies outside the arena (1024 bytes)"},
        {{.kind = RT_BIND_ARENA, .offset = UINT64_MAX - 3, .dtype = KILN_F32, .rank = 1, .dims = {N}}, out0,
         KILN_ERR_INVALID_MODEL, "lies outside the arena"},
        {{.kind = RT_BIND_ARENA, .offset = 2, .dtype = KILN_F32, .rank = 1, .dims = {N}}, out0,
         KILN_ERR_INVALID_MODEL, "not aligned"},
        {{.kind = RT_BIND_WEIGHTS, .offset = 4, .dtype = KILN_F32, .rank = 1, .dims = {N}}, out0,
         KILN_ERR_INVALID_MODEL, "outside the weights (400 bytes)"},
        {{.kind = RT_BIND_INPUT, .io = 1, .dtype = KILN_F32, .rank = 1, .dims = {N}}, out0, KILN_ERR_INVALID_MODEL,
         "bound to model input 1; the model has 1"},
        {{.kind = RT_BIND_INPUT, .io = 0, .dtype = KILN_F64, .rank = 1, .dims = {N}}, out0, KILN_ERR_INVALID_MODEL,
         "outside model input 0"},
        {{.kind = 9, .dtype = KILN_F32, .rank = 1, .dims = {N}}, out0, KILN_ERR_INVALID_MODEL,
         "unknown binding kind 9"},
        {{.kind = RT_BIND_ARENA, .dtype = (kiln_dtype)40, .rank = 1, .dims = {N}}, out0, KILN_ERR_INVALID_MODEL,
         "unknown dtype 40"},
        {{.kind = RT_BIND_ARENA, .dtype = KILN_F32, .rank = 2, .dims = {INT64_MAX, 4}}, out0,
         KILN_ERR_INVALID_MODEL, "larger than 2^40"},
        {in0, {.kind = RT_BIND_WEIGHTS, .dtype = KILN_F32, .rank = 1, .dims = {N}}, KILN_ERR_INVALID_MODEL,
         "segment 0 output 0: an output is bound to the weights"},
        {in0, {.kind = RT_BIND_INPUT, .dtype = KILN_F32, .rank = 1, .dims = {N}}, KILN_ERR_INVALID_MODEL,
         "output is bound to model input 0"},
        {in0, {.kind = RT_BIND_OUTPUT, .io = 3, .dtype = KILN_F32, .rank = 1, .dims = {N}}, KILN_ERR_INVALID_MODEL,
         "model output 3; the model has 1"},
        /* fine: zero-size tensors anywhere in range, slices of io tensors */
        {{.kind = RT_BIND_ARENA, .offset = 1024, .dtype = KILN_F32, .rank = 1, .dims = {0}}, out0, KILN_OK, ""},
        {{.kind = RT_BIND_INPUT, .offset = 200, .dtype = KILN_F32, .rank = 1, .dims = {50}}, out0, KILN_OK, ""},
    };
    for (size_t i = 0; i < KILN_COUNT(cases); i++) {
        s.seg_in = cases[i].in;
        s.seg_out = cases[i].out;
        size_t m;
        uint8_t *crafted = encode(&s.desc, &m);
        if (cases[i].st == KILN_OK) UNIT_CHECK_EQ_INT(read_status(crafted, m, NULL), KILN_OK);
        else EXPECT_REJECT(crafted, m, cases[i].st, cases[i].msg);
        free(crafted);
    }

    /* the writer refuses what the reader would refuse, and writes nothing */
    s.seg_in = cases[0].in;
    s.seg_out = out0;
    char path[512];
    snprintf(path, sizeof(path), "%s/bad.kiln", unit_tmpdir());
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(rt_artifact_write(path, &s.desc, &d), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "inconsistent");
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "outside the arena");
    UNIT_CHECK(access(path, F_OK) != 0);
    s.desc.isa = "a-very-long-isa-name";
    UNIT_CHECK_EQ_INT(rt_artifact_write(path, &s.desc, &d), KILN_ERR_INVALID_ARG);
    base_diag_free(&d);
#undef FRESH
    free(b);
    free(good);
    sample_free(&s);
}

/* ---- the worker pool ------------------------------------------------------------------ */

#define PS_STAGES 48
#define PS_TASKS 101

static struct {
    rt_pool *pool;
    kiln_cstage stages[PS_STAGES];
    int n_stages;
    _Atomic int count[PS_STAGES][PS_TASKS]; /* runs of each rTask */
    _Atomic int done[PS_STAGES];           /* rTasks finished in this run */
    _Atomic int errors;
    int abort_stage;                       /* -1: none */
    int slow_stage;                        /* -1: none */
} ps;

static void ps_task(const kiln_cctx *c, int t)
{
    int s = rt_pool_stage(ps.pool, c->veu);
    if (s < 0 || s >= ps.n_stages || t < 0 || t >= ps.stages[s].n_rtasks || t % c->n_veu != c->veu ||
        rt_pool_self() != c->veu) {
        atomic_fetch_add(&ps.errors, 1);
        return;
    }
    atomic_fetch_add(&ps.count[s][t], 1);
    /* every stage this one waits for, and every one an earlier stage waited for */
    int covered = 0;
    for (int k = 0; k <= s; k++) covered = ps.stages[k].wait > covered ? ps.stages[k].wait : covered;
    for (int k = 0; k < covered; k++)
        if (atomic_load(&ps.done[k]) != ps.stages[k].n_rtasks) atomic_fetch_add(&ps.errors, 1);
    /* uneven work, so vEUs drift apart between barriers */
    static _Atomic int sink;
    for (int i = 0; i < (t * 7919 + s * 104729) % 200; i++) atomic_fetch_add_explicit(&sink, i, memory_order_relaxed);
    if (s == ps.abort_stage && t == 0) rt_pool_abort(ps.pool);
    if (s == ps.slow_stage && t == 0) usleep(3000); /* long enough for the others to sleep at the barrier */
    atomic_fetch_add(&ps.done[s], 1);
}

static unsigned ps_rand(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

UNIT_TEST(pool_runs_every_rtask_once_and_barriers_hold)
{
    unsigned seed = 12345;
    for (int n_veu = 1; n_veu <= 5; n_veu++) {
        memset(&ps, 0, sizeof(ps));
        ps.abort_stage = ps.slow_stage = -1;
        UNIT_CHECK_EQ_INT(rt_pool_init(&ps.pool, n_veu, NULL), KILN_OK);
        if (!ps.pool) continue;
        UNIT_CHECK_EQ_INT(rt_pool_size(ps.pool), n_veu);
        kiln_cctx ctx[8];
        for (int v = 0; v < n_veu; v++) ctx[v] = (kiln_cctx){.veu = v, .n_veu = n_veu};
        ps.n_stages = PS_STAGES;
        int runs = 0;
        for (int shape = 0; shape < 6; shape++) {
            for (int s = 0; s < PS_STAGES; s++) {
                int r = (int)(ps_rand(&seed) % 10);
                ps.stages[s] = (kiln_cstage){.fn = ps_task, .name = "stress",
                                             .n_rtasks = r == 0 ? 0 : r == 1 ? 1 : r == 2 ? PS_TASKS - 1
                                                                                   : (int)(ps_rand(&seed) % PS_TASKS),
                                             .wait = (int)(ps_rand(&seed) % 2) ? (int)(ps_rand(&seed) % (unsigned)(s + 1)) : 0};
            }
            memset(ps.count, 0, sizeof(ps.count));
            for (int run = 1; run <= 60; run++) {
                memset(ps.done, 0, sizeof(ps.done));
                rt_pool_run(ps.pool, ps.stages, ps.n_stages, ctx);
                runs++;
                for (int s = 0; s < ps.n_stages; s++) {
                    UNIT_CHECK_EQ_INT(atomic_load(&ps.done[s]), ps.stages[s].n_rtasks);
                    for (int t = 0; t < ps.stages[s].n_rtasks; t++)
                        if (atomic_load(&ps.count[s][t]) != run) {
                            UNIT_CHECK_EQ_INT(atomic_load(&ps.count[s][t]), run);
                            break;
                        }
                }
                /* now and then let the workers fall asleep, to test waking them */
                if (run % 20 == 0) usleep(3000);
            }
        }
        UNIT_CHECK_EQ_INT(atomic_load(&ps.errors), 0);

        /* an abort skips the later stages of that run only */
        memset(ps.done, 0, sizeof(ps.done));
        for (int s = 0; s < PS_STAGES; s++) ps.stages[s].wait = s, ps.stages[s].n_rtasks = 3;
        ps.abort_stage = 5;
        rt_pool_run(ps.pool, ps.stages, ps.n_stages, ctx);
        /* vEUs that started stage 5 before the abort still run their rTasks there */
        UNIT_CHECK(atomic_load(&ps.done[5]) >= 1 && atomic_load(&ps.done[5]) <= 3);
        UNIT_CHECK_EQ_INT(atomic_load(&ps.done[6]), 0);
        UNIT_CHECK_EQ_INT(atomic_load(&ps.done[PS_STAGES - 1]), 0);
        ps.abort_stage = -1;
        memset(ps.done, 0, sizeof(ps.done));
        rt_pool_run(ps.pool, ps.stages, ps.n_stages, ctx);
        UNIT_CHECK_EQ_INT(atomic_load(&ps.done[PS_STAGES - 1]), 3);

        /* a slow rTask: the other vEUs fall asleep at the next barrier and must be woken */
        ps.slow_stage = 2;
        for (int r = 0; r < 3; r++) {
            memset(ps.done, 0, sizeof(ps.done));
            rt_pool_run(ps.pool, ps.stages, 6, ctx);
            for (int s = 0; s < 6; s++) UNIT_CHECK_EQ_INT(atomic_load(&ps.done[s]), 3);
        }
        ps.slow_stage = -1;
        UNIT_CHECK_EQ_INT(atomic_load(&ps.errors), 0);
        rt_pool_run(ps.pool, ps.stages, 0, ctx); /* an empty program */
        UNIT_CHECK(rt_pool_self() == -1);
        rt_pool_free(ps.pool);
    }
    UNIT_CHECK_EQ_INT(rt_pool_init(&ps.pool, 0, NULL), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_EQ_INT(rt_pool_init(&ps.pool, RT_MAX_THREADS + 1, NULL), KILN_ERR_INVALID_ARG);
    rt_pool_free(NULL);
}

/* ---- end to end: a real shared object ---------------------------------------------------- */

/* The program of the sample: 3 stages (7 rTasks, barrier, 5 rTasks reading
 * the weights as repacked by prepare(), barrier, the Relu segment), then an
 * empty one. Variants by -D: ABI, ARENA, NOSYM, SEG (the segment it runs),
 * SCALE, SCRATCH (bytes per vEU it uses), FAIL (report bad data when
 * x[0] > 1000), UNDEF (call a function nobody defines). */
static const char prog_source[] =
    "#include \"runtime/cprog.h\"\n"
    "#define N 100\n"
    "#ifndef ABI\n#define ABI KILN_CPROG_ABI\n#endif\n"
    "#ifndef ARENA\n#define ARENA 1024\n#endif\n"
    "#ifndef SEG\n#define SEG 0\n#endif\n"
    "#ifndef SCALE\n#define SCALE 2.0f\n#endif\n"
    "#ifndef SCRATCH\n#define SCRATCH 64\n#endif\n"
    "#ifndef WAIT3\n#define WAIT3 3\n#endif\n"
    "static void add1(const kiln_cctx *c, int t)\n"
    "{\n"
    "    const float *x = (const float *)c->io[0];\n"
    "    float *y = (float *)c->arena;\n"
    "#ifdef UNDEF\n"
    "    extern void kiln_no_such_function(void);\n"
    "    kiln_no_such_function();\n"
    "#endif\n"
    "#ifdef FAIL\n"
    "    if (x[0] > 1000.0f) { c->host->fail(c->host, \"x[0] is out of range\"); return; }\n"
    "#endif\n"
    "    for (int i = t * N / 7; i < (t + 1) * N / 7; i++) y[i] = x[i] + 1.0f;\n"
    "}\n"
    "static void mul2(const kiln_cctx *c, int t)\n"
    "{\n"
    "    const float *y = (const float *)c->arena, *w = (const float *)c->packed;\n"
    "    float *z = (float *)(c->arena + 512);\n"
    "    for (int i = t * N / 5; i < (t + 1) * N / 5; i++) z[i] = SCALE * y[i] + w[i];\n"
    "    for (int i = 0; i < SCRATCH; i++) c->scratch[i] = (unsigned char)(t + c->veu);\n"
    "}\n"
    "static void relu(const kiln_cctx *c, int t) { (void)t; c->host->run_segment(c->host, c, SEG); }\n"
    "static const kiln_cstage stages[] = {\n"
    "    {add1, 7, 0, \"add1 (Add)\"}, {mul2, 5, 1, \"mul2 (Mul, Add)\"}, {relu, 1, 2, \"relu (fallback)\"},\n"
    "    {0, 0, WAIT3, \"an alias: no code\"}};\n"
    "static void prepare(const uint8_t *w, uint8_t *packed)\n"
    "{\n"
    "    for (int i = 0; i < N; i++) ((float *)packed)[i] = ((const float *)w)[i];\n"
    "}\n"
    "static const kiln_cprog prog = {.abi = ABI, .n_stages = 4, .stages = stages, .scratch_bytes = SCRATCH,\n"
    "    .arena_bytes = ARENA, .weight_bytes = 400, .packed_bytes = 4 * N, .prepare = prepare, .isa = \"generic\"};\n"
    "#ifndef NOSYM\n"
    "__attribute__((visibility(\"default\"))) const kiln_cprog *kiln_cprog_get(void) { return &prog; }\n"
    "#else\n"
    "__attribute__((visibility(\"default\"))) int not_a_program(void) { return 1; }\n"
    "#endif\n";

/* Compiles the program with `defines`. OUT: *n; free() the bytes. NULL on failure. */
static uint8_t *build_program(const char *tag, const char *defines, size_t *n)
{
    static char src_dir[PATH_MAX];
    if (!src_dir[0]) {
        /* this file is tests/unit/test_runtime.c; the headers are in src/ */
        char rel[PATH_MAX];
        snprintf(rel, sizeof(rel), "%s", __FILE__);
        char *slash = strrchr(rel, '/');
        if (slash) *slash = 0;
        else snprintf(rel, sizeof(rel), ".");
        char guess[PATH_MAX + 16];
        snprintf(guess, sizeof(guess), "%s/../../src", rel);
        if (!realpath(guess, src_dir) && !realpath("src", src_dir)) {
            unit_fail(__FILE__, __LINE__, "cannot find kiln's src/ folder from %s", __FILE__);
            return NULL;
        }
    }
    const char *dir = unit_tmpdir();
    char c_path[PATH_MAX], so_path[PATH_MAX], cmd[4 * PATH_MAX];
    snprintf(c_path, sizeof(c_path), "%s/prog.c", dir);
    snprintf(so_path, sizeof(so_path), "%s/prog_%s.so", dir, tag);
    FILE *f = fopen(c_path, "w");
    if (!f) return NULL;
    fputs(prog_source, f);
    fclose(f);
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof(cmd), "%s -std=c11 -O2 -shared -fPIC -fvisibility=hidden -I'%s' %s -o '%s' '%s'",
             cc && cc[0] ? cc : "cc", src_dir, defines, so_path, c_path);
    if (system(cmd) != 0) {
        unit_fail(__FILE__, __LINE__, "could not compile the test program: %s", cmd);
        return NULL;
    }
    f = fopen(so_path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)size;
    return buf;
}

/* An artifact around the compiled program. OUT: *n; free() it. */
static uint8_t *program_artifact(const char *tag, const char *defines, size_t *n)
{
    size_t code_bytes = 0;
    uint8_t *code = build_program(tag, defines, &code_bytes);
    if (!code) return NULL;
    sample s;
    sample_init(&s, code, code_bytes);
    uint8_t *buf = encode(&s.desc, n);
    sample_free(&s);
    free(code);
    return buf;
}

static float expected(float x, float scale, int i)
{
    float z = scale * (x + 1.0f) + 0.25f * (float)i;
    return z > 0 ? z : 0;
}

/* Runs m `runs` times with changing inputs; returns the number of wrong outputs. */
static int run_and_check(kiln_rt_model *m, int runs, float scale)
{
    float x[N], y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    int wrong = 0;
    for (int r = 0; r < runs; r++) {
        for (int i = 0; i < N; i++) x[i] = 0.5f * (float)(i - 60) + (float)(r % 7) - 3.0f;
        memset(y, 0xff, sizeof(y));
        if (kiln_rt_run(m, in, out) != KILN_OK) {
            unit_fail(__FILE__, __LINE__, "run %d: %s", r, kiln_rt_last_error());
            return runs;
        }
        for (int i = 0; i < N; i++)
            if (y[i] != expected(x[i], scale, i)) wrong++;
    }
    return wrong;
}

static uint8_t *main_art;
static size_t main_art_bytes;

static const uint8_t *main_artifact(size_t *n)
{
    if (!main_art) main_art = program_artifact("main", "", &main_art_bytes);
    *n = main_art_bytes;
    return main_art;
}

UNIT_TEST(runtime_runs_a_compiled_program)
{
    size_t n;
    const uint8_t *art = main_artifact(&n);
    if (!art) return;
    for (int threads = 0; threads <= 3; threads++) {
        /* from a buffer that is gone right after loading */
        uint8_t *copy = malloc(n);
        memcpy(copy, art, n);
        kiln_rt_model *m = NULL;
        kiln_status st = kiln_rt_load_buffer(copy, n, threads, &m);
        memset(copy, 0xab, n);
        free(copy);
        UNIT_CHECK_EQ_INT(st, KILN_OK);
        if (!m) {
            unit_fail(__FILE__, __LINE__, "%s", kiln_rt_last_error());
            continue;
        }
        UNIT_CHECK_EQ_INT(kiln_rt_num_threads(m), threads ? threads : 2);
        UNIT_CHECK_EQ_INT(kiln_rt_num_inputs(m), 1);
        UNIT_CHECK_EQ_INT(kiln_rt_num_outputs(m), 1);
        const kiln_rt_tensor_info *xi = kiln_rt_input(m, 0), *yi = kiln_rt_output(m, 0);
        UNIT_CHECK(xi && strcmp(xi->name, "x") == 0 && xi->nbytes == 4 * N && xi->dtype == KILN_F32);
        UNIT_CHECK(yi && strcmp(yi->name, "y") == 0 && yi->rank == 1 && yi->dims[0] == N);
        UNIT_CHECK(kiln_rt_input(m, 1) == NULL && kiln_rt_output(m, -1) == NULL);
        UNIT_CHECK_EQ_INT(kiln_rt_arena_bytes(m), 1024);
        UNIT_CHECK_EQ_INT(kiln_rt_weight_bytes(m), 400);
        UNIT_CHECK_EQ_INT(run_and_check(m, 1000, 2.0f), 0);
        kiln_rt_free(m);
    }

    /* from a file: the weights are used in place */
    char path[512];
    snprintf(path, sizeof(path), "%s/main.kiln", unit_tmpdir());
    FILE *f = fopen(path, "wb");
    UNIT_CHECK(f && fwrite(art, 1, n, f) == n);
    if (f) fclose(f);
    kiln_rt_model *m = NULL;
    UNIT_CHECK_EQ_INT(kiln_rt_load(path, 2, &m), KILN_OK);
    if (m) {
        UNIT_CHECK_EQ_INT(run_and_check(m, 200, 2.0f), 0);
        /* bad arguments */
        float x[N] = {0}, y[N];
        const void *in[1] = {x}, *no_in[1] = {NULL};
        void *out[1] = {y};
        UNIT_CHECK_EQ_INT(kiln_rt_run(m, NULL, out), KILN_ERR_INVALID_ARG);
        UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "inputs array is NULL");
        UNIT_CHECK_EQ_INT(kiln_rt_run(m, no_in, out), KILN_ERR_INVALID_ARG);
        UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "input 0 ('x') is NULL");
        UNIT_CHECK_EQ_INT(kiln_rt_run(NULL, in, out), KILN_ERR_INVALID_ARG);
        UNIT_CHECK_EQ_INT(run_and_check(m, 3, 2.0f), 0);
        kiln_rt_free(m);
    }
    kiln_rt_free(NULL);
    UNIT_CHECK_EQ_INT(kiln_rt_load("/nonexistent/model.kiln", 1, &m), KILN_ERR_IO);
    UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "/nonexistent/model.kiln");
    UNIT_CHECK_EQ_INT(kiln_rt_load(path, -1, &m), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_EQ_INT(kiln_rt_load(path, RT_MAX_THREADS + 1, &m), KILN_ERR_INVALID_ARG);

    /* the temporary-file fallback for systems without memfd */
    rt_code_avoid_memfd = 1;
    UNIT_CHECK_EQ_INT(kiln_rt_load_buffer(art, n, 3, &m), KILN_OK);
    rt_code_avoid_memfd = 0;
    if (m) {
        UNIT_CHECK_EQ_INT(run_and_check(m, 100, 2.0f), 0);
        kiln_rt_free(m);
    }
}

/* kiln_rt_host_alloc's buffers run like any others; foreign or freed
 * pointers are refused; kiln_rt_free frees the ones still live. */
UNIT_TEST(runtime_host_buffers)
{
    size_t n;
    const uint8_t *art = main_artifact(&n);
    kiln_rt_model *m = NULL;
    if (!art || kiln_rt_load_buffer(art, n, 2, &m) != KILN_OK) {
        unit_fail(__FILE__, __LINE__, "load: %s", kiln_rt_last_error());
        return;
    }
    float *x = kiln_rt_host_alloc(m, sizeof(float) * N), *y = kiln_rt_host_alloc(m, sizeof(float) * N);
    void *spare = kiln_rt_host_alloc(m, 0), *kept = kiln_rt_host_alloc(m, 100);
    UNIT_CHECK(x && y && spare && kept);
    UNIT_CHECK((uintptr_t)x % 64 == 0 && (uintptr_t)y % 64 == 0);
    if (x && y) {
        const void *in[1] = {x};
        void *out[1] = {y};
        int wrong = 0;
        for (int r = 0; r < 20; r++) {
            for (int i = 0; i < N; i++) x[i] = 0.25f * (float)(i - 40) - (float)r;
            memset(y, 0xff, sizeof(float) * N);
            UNIT_CHECK_EQ_INT(kiln_rt_run(m, in, out), KILN_OK);
            for (int i = 0; i < N; i++) wrong += y[i] != expected(x[i], 2.0f, i);
        }
        UNIT_CHECK_EQ_INT(wrong, 0);
    }
    float local;
    UNIT_CHECK_EQ_INT(kiln_rt_host_free(m, &local), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "not allocated by kiln_rt_host_alloc");
    UNIT_CHECK_EQ_INT(kiln_rt_host_free(m, spare), KILN_OK);
    UNIT_CHECK_EQ_INT(kiln_rt_host_free(m, spare), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_EQ_INT(kiln_rt_host_free(m, NULL), KILN_OK);
    UNIT_CHECK_EQ_INT(kiln_rt_host_free(NULL, x), KILN_ERR_INVALID_ARG);
    UNIT_CHECK(kiln_rt_host_alloc(NULL, 16) == NULL);
    UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "model is NULL");
    UNIT_CHECK_EQ_INT(kiln_rt_host_free(m, x), KILN_OK);
    kiln_rt_free(m); /* y and kept still live: freed with the model */
}

UNIT_TEST(runtime_scratch_is_what_the_code_asks_for)
{
    /* the compiler may leave the plan's scratch at 0: the code knows it */
    size_t n, m;
    uint8_t *art = program_artifact("scratch", "-DSCRATCH=200", &n);
    rt_artifact a;
    if (!art || rt_artifact_read(art, n, &a, NULL) != KILN_OK) return;
    sample s;
    sample_init(&s, a.desc.code, a.desc.code_bytes);
    s.desc.scratch_bytes = 0;
    uint8_t *art0 = encode(&s.desc, &m);
    kiln_rt_model *model = NULL;
    UNIT_CHECK_EQ_INT(kiln_rt_load_buffer(art0, m, 3, &model), KILN_OK);
    if (model) UNIT_CHECK_EQ_INT(run_and_check(model, 50, 2.0f), 0);
    kiln_rt_free(model);
    free(art0);
    rt_artifact_free(&a);
    sample_free(&s);
    free(art);
}

UNIT_TEST(runtime_models_do_not_share_code)
{
    size_t n2, n3;
    const uint8_t *a2 = main_artifact(&n2);
    uint8_t *a3 = program_artifact("scale3", "-DSCALE=3.0f", &n3);
    if (!a2 || !a3) return;
    kiln_rt_model *m2 = NULL, *m3 = NULL;
    UNIT_CHECK_EQ_INT(kiln_rt_load_buffer(a2, n2, 2, &m2), KILN_OK);
    UNIT_CHECK_EQ_INT(kiln_rt_load_buffer(a3, n3, 2, &m3), KILN_OK);
    if (m2 && m3) {
        UNIT_CHECK_EQ_INT(run_and_check(m2, 20, 2.0f), 0);
        UNIT_CHECK_EQ_INT(run_and_check(m3, 20, 3.0f), 0);
    }
    /* a new model may get the memfd number a freed one had */
    kiln_rt_free(m2);
    UNIT_CHECK_EQ_INT(kiln_rt_load_buffer(a3, n3, 1, &m2), KILN_OK);
    if (m2) UNIT_CHECK_EQ_INT(run_and_check(m2, 20, 3.0f), 0);
    kiln_rt_free(m2);
    kiln_rt_free(m3);
    UNIT_CHECK_EQ_INT(kiln_rt_load_buffer(a2, n2, 1, &m2), KILN_OK);
    if (m2) UNIT_CHECK_EQ_INT(run_and_check(m2, 20, 2.0f), 0);
    kiln_rt_free(m2);
    free(a3);
}

/* Expects loading art to fail with st and a message containing msg. */
static void expect_load_error(const uint8_t *art, size_t n, kiln_status st, const char *msg, int line)
{
    if (!art) return;
    kiln_rt_model *m = (kiln_rt_model *)1;
    kiln_status got = kiln_rt_load_buffer(art, n, 2, &m);
    if (got != st)
        unit_fail(__FILE__, line, "load gave %s, expected %s (%s)", kiln_status_name(got), kiln_status_name(st),
                  kiln_rt_last_error());
    else if (!strstr(kiln_rt_last_error(), msg))
        unit_fail(__FILE__, line, "message '%s' lacks '%s'", kiln_rt_last_error(), msg);
    if (m != NULL) unit_fail(__FILE__, line, "*out not cleared on failure");
    if (got == KILN_OK) kiln_rt_free(m);
}
#define EXPECT_LOAD_ERROR(art, n, st, msg) expect_load_error(art, n, st, msg, __LINE__)

UNIT_TEST(runtime_load_errors_are_clear)
{
    size_t n;
    uint8_t *art = program_artifact("abi", "-DABI=99", &n);
    char abi[64];
    snprintf(abi, sizeof(abi), "ABI 99, this runtime ABI %d", KILN_CPROG_ABI);
    EXPECT_LOAD_ERROR(art, n, KILN_ERR_UNSUPPORTED, abi);
    free(art);
    art = program_artifact("wait", "-DWAIT3=4", &n); /* stage 3 waiting for itself would never start */
    EXPECT_LOAD_ERROR(art, n, KILN_ERR_INVALID_MODEL, "stage 3 'an alias: no code' waits for 4 stages");
    free(art);
    art = program_artifact("arena", "-DARENA=2048", &n);
    EXPECT_LOAD_ERROR(art, n, KILN_ERR_INVALID_MODEL, "expects an arena of 2048 bytes; its plan has 1024");
    free(art);
    art = program_artifact("nosym", "-DNOSYM", &n);
    EXPECT_LOAD_ERROR(art, n, KILN_ERR_INVALID_MODEL, "does not export kiln_cprog_get");
    free(art);
    art = program_artifact("undef", "-DUNDEF", &n);
    EXPECT_LOAD_ERROR(art, n, KILN_ERR_INVALID_MODEL,
                      "cannot load the artifact's code: undefined symbol: kiln_no_such_function");
    free(art);

    sample s;
    const uint8_t *good = main_artifact(&n);
    if (!good) return;
    rt_artifact a;
    UNIT_CHECK_EQ_INT(rt_artifact_read(good, n, &a, NULL), KILN_OK);
    sample_init(&s, a.desc.code, a.desc.code_bytes);
    size_t m;

    s.desc.code = fake_code + 4; /* not ELF */
    s.desc.code_bytes = 10;
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL, "not an ELF shared object");
    free(art);
    s.desc.code = fake_code; /* ELF magic, garbage after */
    s.desc.code_bytes = sizeof(fake_code);
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL, "cannot load the artifact's code");
    free(art);
    s.desc.code = a.desc.code;
    s.desc.code_bytes = a.desc.code_bytes;

    s.desc.target = "tpu";
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_UNSUPPORTED, "target 'tpu'");
    free(art);
    s.desc.target = "cuda"; /* a shared object where the cuda program should be */
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL, "not a cuda program");
    free(art);
    s.desc.target = "c";
    s.desc.isa = "sse9";
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_UNSUPPORTED, "ISA 'sse9'");
    free(art);
    s.desc.isa = "avx2"; /* the header and the code disagree (or the CPU lacks AVX2) */
    art = encode(&s.desc, &m);
#if defined(__x86_64__)
    bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    bool has_avx2 = false;
#endif
    EXPECT_LOAD_ERROR(art, m, has_avx2 ? KILN_ERR_INVALID_MODEL : KILN_ERR_UNSUPPORTED, "avx2");
    free(art);
    s.desc.isa = "generic";

    s.desc.weight_bytes = 200;
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL, "400 bytes of weights; its WEIGHTS section has 200");
    free(art);
    s.desc.weight_bytes = 400;

    /* segments that do not fit their bindings */
    s.seg_out.dims[0] = 50;
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL,
                      "segment 0 output 0 ('r'): the graph computes f32[100], the binding is f32[50]");
    free(art);
    s.seg_out.dims[0] = N;
    s.seg_in.dtype = KILN_I32;
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL, "segment 0 input 0 ('z'): the graph takes f32[100]");
    free(art);
    s.seg_in.dtype = KILN_F32;
    uint8_t junk[16] = {0xff, 0xff, 0xff};
    s.seg.onnx = junk;
    s.seg.onnx_bytes = sizeof(junk);
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL, "artifact segment 0: not a valid ONNX model");
    free(art);
    s.seg.onnx = s.onnx;
    s.seg.onnx_bytes = s.onnx_bytes;
    s.seg.n_in = 0;
    art = encode(&s.desc, &m);
    EXPECT_LOAD_ERROR(art, m, KILN_ERR_INVALID_MODEL, "the graph has 1 inputs and 1 outputs; the artifact binds 0");
    free(art);
    s.seg.n_in = 1;

    /* allocation failures anywhere in loading are errors, not crashes or leaks */
    art = encode(&s.desc, &m);
    int failures = 0;
    for (long k = 0; k < 400; k++) {
        kiln_rt_model *mm = NULL;
        base_fail_alloc_after(k);
        kiln_status st = kiln_rt_load_buffer(art, m, 2, &mm);
        base_fail_alloc_after(-1);
        if (st == KILN_OK) {
            UNIT_CHECK_EQ_INT(run_and_check(mm, 2, 2.0f), 0);
            kiln_rt_free(mm);
            break;
        }
        failures++;
    }
    UNIT_CHECK(failures > 10);
    free(art);
    rt_artifact_free(&a);
    sample_free(&s);
}

UNIT_TEST(runtime_run_errors_name_the_stage)
{
    size_t n;
    uint8_t *art = program_artifact("seg3", "-DSEG=3", &n);
    kiln_rt_model *m = NULL;
    float x[N] = {0}, y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    if (art && kiln_rt_load_buffer(art, n, 2, &m) == KILN_OK) {
        UNIT_CHECK_EQ_INT(kiln_rt_run(m, in, out), KILN_ERR_INVALID_MODEL);
        UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "stage 2 'relu (fallback)'");
        UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "runs segment 3; the artifact has 1");
        kiln_rt_free(m);
    }
    free(art);

    art = program_artifact("fail", "-DFAIL", &n);
    for (int threads = 1; art && threads <= 3; threads++) {
        UNIT_CHECK_EQ_INT(kiln_rt_load_buffer(art, n, threads, &m), KILN_OK);
        if (!m) break;
        x[0] = 5000;
        UNIT_CHECK_EQ_INT(kiln_rt_run(m, in, out), KILN_ERR_INVALID_ARG);
        UNIT_CHECK_STR_CONTAINS(kiln_rt_last_error(), "stage 0 'add1 (Add)': x[0] is out of range");
        /* the failure does not outlive its run */
        UNIT_CHECK_EQ_INT(run_and_check(m, 50, 2.0f), 0);
        kiln_rt_free(m);
    }
    free(art);
}
