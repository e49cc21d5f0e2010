/*
 * test_share.c: share.c, the one copy of identical rOperators' code under
 * --schedule=mono: which texts share a body, what the calls pass, and what
 * is left alone. No NVRTC or GPU: the texts are the emitters' shapes.
 */
#include "unit.h"

#include "target/cuda/cuda-impl.h"

#include <stdio.h>
#include <string.h>

/* An rOperator's text as the emitters write it: a comment, op_<id>, its
 * tensors at arena offset `x` and weights offset `w`, a fault site, and a
 * shape constant `rows` that is not a place. */
static void append_op(base_str *s, int id, int x, int w, int rows)
{
    base_str_printf(s,
                    "/* group %d (ews): Relu */\n"
                    "static __device__ void op_%d(const kiln_gctx *c, int t)\n{\n"
                    "    const float *a = ((const float *)(c->arena + %d));\n"
                    "    const float *b = ((const float *)(c->weights + %d));\n"
                    "    float *y = ((float *)c->io[1]);\n"
                    "    if (t > %d) kg_fault(c, KG_FAULT_INDEX, KG_SITE_%d);\n"
                    "#pragma unroll\n"
                    "    for (int i = 0; i < 4; i++) y[t * 4 + i] = a[i] + b[i];\n"
                    "}\n\n",
                    id, id, x, w, rows, id);
}

typedef struct fixture {
    cg_emitter e;
    base_diag d;
    cg_share *sh;
} fixture;

static void setup(fixture *f)
{
    memset(f, 0, sizeof(*f));
    base_diag_init(&f->d);
    f->e.d = &f->d;
    base_str_init(&f->e.code);
    f->sh = cg_share_new();
    UNIT_CHECK(f->sh != NULL);
}

static void teardown(fixture *f)
{
    cg_share_free(f->sh);
    base_str_free(&f->e.code);
    base_diag_free(&f->d);
}

/* Shares op `id`, appended at `start`; returns whether it was rewritten,
 * after checking that the call it reports agrees. */
static bool share_as(fixture *f, int id, size_t start, bool inline_body)
{
    cg_share_call call = {.body = 7};
    UNIT_CHECK_EQ_INT(cg_share_op(&f->e, f->sh, id, start, inline_body, &call), KILN_OK);
    bool rewritten = call.body >= 0;
    if (rewritten) {
        /* op_<id> is now one line calling opb_<body> with these values */
        char line[512];
        snprintf(line, sizeof(line), "{ opb_%d(c, t%s%s); }", call.body, call.n_values ? ", " : "",
                 call.values ? call.values : "?");
        UNIT_CHECK_STR_CONTAINS(base_str_get(&f->e.code), line);
    } else {
        UNIT_CHECK(call.values == NULL);
    }
    base_free(call.values);
    return rewritten;
}

static bool share(fixture *f, int id, size_t start) { return share_as(f, id, start, false); }

/* Appends op `id` and shares it; returns whether it was rewritten. */
static bool add(fixture *f, int id, int x, int w, int rows)
{
    size_t start = f->e.code.len;
    append_op(&f->e.code, id, x, w, rows);
    return share(f, id, start);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The code holds `defs` shared bodies and `text`; the share rewrote
 * `rewritten` rOperators into `bodies` bodies. Then frees f. */
static void expect_and_free(fixture *f, int defs, const char *text, int rewritten, int bodies)
{
    const char *code = base_str_get(&f->e.code);
    UNIT_CHECK_EQ_INT(count(code, "__noinline__ void opb_"), defs);
    UNIT_CHECK_STR_CONTAINS(code, text);
    int got_bodies = -1;
    UNIT_CHECK_EQ_INT(cg_share_count(f->sh, &got_bodies), rewritten);
    UNIT_CHECK_EQ_INT(got_bodies, bodies);
    teardown(f);
}

UNIT_TEST(share_identical_ops_call_one_body)
{
    fixture f;
    setup(&f);
    UNIT_CHECK(add(&f, 3, 128, 0, 7));
    UNIT_CHECK(add(&f, 9, 4096, 512, 7));
    const char *code = base_str_get(&f.e.code);
    UNIT_CHECK_STR_CONTAINS(code, "static __device__ __noinline__ void opb_3(const kiln_gctx *c, int t, kg_u64 kg_v0, "
                                  "kg_u64 kg_v1, kg_u64 kg_v2, kg_u64 kg_v3)");
    UNIT_CHECK_STR_CONTAINS(code, "((const float *)(c->arena + kg_v0))");
    UNIT_CHECK_STR_CONTAINS(code, "c->io[kg_v2]");
    UNIT_CHECK_STR_CONTAINS(code, "kg_fault(c, KG_FAULT_INDEX, kg_v3)");
    UNIT_CHECK_STR_CONTAINS(code, "if (t > 7)"); /* a shape constant stays in the body */
    UNIT_CHECK_STR_CONTAINS(code, "void op_3(const kiln_gctx *c, int t) { opb_3(c, t, 128ull, 0ull, 1ull, KG_SITE_3); }");
    UNIT_CHECK_STR_CONTAINS(code, "void op_9(const kiln_gctx *c, int t) { opb_3(c, t, 4096ull, 512ull, 1ull, KG_SITE_9); }");
    UNIT_CHECK_STR_CONTAINS(code, "/* group 9 (ews): Relu */"); /* each keeps its comment */
    expect_and_free(&f, 1, "opb_3(c, t, 4096ull", 2, 1);
}

/* A body with warpgroup MMAs (inline_body): written forceinline, so that
 * the kernel's one call of it (its switch) inlines its one copy and ptxas
 * keeps the MMAs' pipeline; the rOperators still share it. */
UNIT_TEST(share_inline_body_is_forceinline)
{
    fixture f;
    setup(&f);
    size_t start = f.e.code.len;
    append_op(&f.e.code, 3, 128, 0, 7);
    UNIT_CHECK(share_as(&f, 3, start, true));
    start = f.e.code.len;
    append_op(&f.e.code, 9, 4096, 512, 7);
    UNIT_CHECK(share_as(&f, 9, start, true));
    const char *code = base_str_get(&f.e.code);
    UNIT_CHECK_STR_CONTAINS(code, "static __device__ __forceinline__ void opb_3(const kiln_gctx *c, int t, kg_u64 kg_v0,");
    UNIT_CHECK_STR_CONTAINS(code, "void op_9(const kiln_gctx *c, int t) { opb_3(c, t, 4096ull, 512ull, 1ull, KG_SITE_9); }");
    expect_and_free(&f, 0, "opb_3(c, t, 4096ull", 2, 1);
}

UNIT_TEST(share_other_shapes_get_their_own_body)
{
    fixture f;
    setup(&f);
    UNIT_CHECK(add(&f, 1, 0, 0, 7));
    UNIT_CHECK(add(&f, 2, 64, 64, 8)); /* another bound: another body */
    UNIT_CHECK(add(&f, 4, 256, 128, 8));
    expect_and_free(&f, 2, "{ opb_2(c, t, 256ull, 128ull, 1ull, KG_SITE_4); }", 3, 2);
}

UNIT_TEST(share_leaves_code_with_a_helper_alone)
{
    fixture f;
    setup(&f);
    /* a table before op_5, then one after op_6: neither may move into a shared body */
    base_str_cat(&f.e.code, "static __device__ const int tab_5[2] = {1, 2};\n");
    size_t start = f.e.code.len - strlen("static __device__ const int tab_5[2] = {1, 2};\n");
    append_op(&f.e.code, 5, 0, 0, 7);
    UNIT_CHECK(!share(&f, 5, start));
    start = f.e.code.len;
    append_op(&f.e.code, 6, 0, 0, 7);
    base_str_cat(&f.e.code, "static __device__ const int tab_6[2] = {1, 2};\n");
    UNIT_CHECK(!share(&f, 6, start));
    UNIT_CHECK_EQ_INT(count(base_str_get(&f.e.code), "opb_"), 0);
    expect_and_free(&f, 0, "static __device__ void op_6(const kiln_gctx *c, int t)\n{", 0, 0);
}

UNIT_TEST(share_suffixed_numbers_are_not_places)
{
    fixture f;
    setup(&f);
    /* "c->arena + 8u" is not how cg_ptr prints a place: it stays in the
     * body, so texts that differ there do not share */
    size_t start = f.e.code.len;
    base_str_cat(&f.e.code, "static __device__ void op_1(const kiln_gctx *c, int t)\n{ (void)(c->arena + 8u); }\n\n");
    UNIT_CHECK(share(&f, 1, start));
    start = f.e.code.len;
    base_str_cat(&f.e.code, "static __device__ void op_2(const kiln_gctx *c, int t)\n{ (void)(c->arena + 9u); }\n\n");
    UNIT_CHECK(share(&f, 2, start));
    const char *code = base_str_get(&f.e.code);
    UNIT_CHECK_STR_CONTAINS(code, "(void)(c->arena + 8u)");
    UNIT_CHECK_STR_CONTAINS(code, "(void)(c->arena + 9u)");
    expect_and_free(&f, 2, "{ opb_1(c, t); }", 2, 2);
}
