/*
 * share.c: one copy of the code of identical rOperators in a persistent
 * kernel (--schedule=mono).
 *
 * BERT's twelve layers emit twelve rOperators for each of their groups
 * that differ only in where their tensors are: the constant offsets into
 * the arena and the weights, the io slots, the tensor maps, the fault
 * site, the place of split-K partials in the workspace. In one persistent
 * kernel each was its own noinline function, so the kernel held every
 * layer's code: 1.6 MB of SASS for BERT-base, whose
 * instruction fetches missed (ncu on an H100: warps stalled for want of an
 * instruction in 17% of samples, against 6% in the kernels schedule).
 *
 * After an emitter writes op_<id>, cg_share_op rewrites it: those
 * constants become parameters kg_v0, kg_v1, ... of a noinline body
 * `opb_<k>`, written once for every rOperator whose body reads the same,
 * and op_<id> a forceinline call of it with its own constants. A body
 * with warpgroup MMAs (inline_body) is __forceinline__ itself: ptxas
 * serializes the MMAs of a called function (C7510), and a persistent
 * kernel calls each body from one place, which then holds its one copy.
 * (The constants passed in a table in global memory instead cost every
 * kernel a dependent load before its first address: BERT b1 in the
 * kernels schedule ran 600 us against 481 on an H100; as arguments, in
 * registers.)
 * The constants are recognised where cg_ptr and the emitters print them:
 * "c->arena + N", "c->weights + N", "c->io[N]", "kg_tmaps[N]",
 * "KG_SITE_N", "kg_splitk_ws + N" and "kg_splitk_sem + N". Code with
 * anything before op_<id> but comments, or after its body (a helper or a
 * table of its own), is left as it is.
 */
#include "target/cuda/cuda-impl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Where the canonical body's constants are: each pattern's prefix is kept
 * and the number after it becomes kg_v<i>. */
static const char *const patterns[] = {"c->arena + ",     "c->weights + ",    "c->io[",
                                        "kg_tmaps[",       "KG_SITE_",         "kg_splitk_ws + ",
                                        "kg_splitk_sem + "};

/* The most constants one body takes as parameters; an rOperator with more
 * keeps its own code. */
#define SHARE_MAX_VALUES 32

struct cg_share {
    struct body {
        char *canon;   /* the body with op_SHARED for its name and kg_v<i> for its constants */
        uint64_t hash;
        int n_values;
        int id;        /* opb_<id>: the group that wrote it first */
        int users;
    } *bodies;
    int n, cap;
    int rewritten;     /* rOperators that call a body */
};

cg_share *cg_share_new(void) { return base_calloc(1, sizeof(cg_share)); }

void cg_share_free(cg_share *sh)
{
    if (!sh) return;
    for (int i = 0; i < sh->n; i++) base_free(sh->bodies[i].canon);
    base_free(sh->bodies);
    base_free(sh);
}

int cg_share_count(const cg_share *sh, int *bodies)
{
    if (bodies) *bodies = sh ? sh->n : 0;
    return sh ? sh->rewritten : 0;
}

/* Whether text[0..n) is comments and white space only. */
static bool only_comments(const char *text, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (isspace((unsigned char)text[i])) i++;
        else if (i + 1 < n && text[i] == '/' && text[i + 1] == '*') {
            const char *end = strstr(text + i + 2, "*/");
            if (!end || (size_t)(end - text) + 2 > n) return false;
            i = (size_t)(end - text) + 2;
        } else return false;
    }
    return true;
}

/* fn with its constants replaced (*canon) and listed (values: ", "-joined
 * C expressions); false when out of memory. */
static bool canonicalise(const char *fn, const char *name, base_str *canon, base_str *values, int *n_values)
{
    size_t name_len = strlen(name);
    *n_values = 0;
    for (const char *p = fn; *p;) {
        if (strncmp(p, name, name_len) == 0 && p[name_len] == '(') {
            base_str_cat(canon, "op_SHARED");
            p += name_len;
            continue;
        }
        bool matched = false;
        for (size_t k = 0; k < KILN_COUNT(patterns) && !matched; k++) {
            size_t len = strlen(patterns[k]);
            if (strncmp(p, patterns[k], len) != 0 || !isdigit((unsigned char)p[len])) continue;
            const char *num = p + len, *end = num;
            while (isdigit((unsigned char)*end)) end++;
            if (isalnum((unsigned char)*end) || *end == '_') continue; /* 12u, 0x..: not a plain number */
            base_str_printf(canon, "%skg_v%d", k == 4 ? "" : patterns[k], *n_values);
            base_str_printf(values, "%s%s%.*s%s", *n_values ? ", " : "", k == 4 ? "KG_SITE_" : "", (int)(end - num),
                            num, k == 4 ? "" : "ull");
            (*n_values)++;
            p = end;
            matched = true;
        }
        if (matched) continue;
        const char *next = p + 1;
        while (*next && *next != 'o' && *next != 'c' && *next != 'k' && *next != 'K') next++;
        base_str_printf(canon, "%.*s", (int)(next - p), p);
        p = next;
    }
    return !canon->oom && !values->oom;
}

kiln_status cg_share_op(cg_emitter *e, cg_share *sh, int id, size_t start, bool inline_body, cg_share_call *call)
{
    base_str *code = &e->code;
    *call = (cg_share_call){.body = -1};
    if (!sh || code->oom || start >= code->len) return KILN_OK;
    char name[32], def[80];
    snprintf(name, sizeof(name), "op_%d", id);
    /* op_<id>(c, t), or op_<id>(c, t, grid_dep) for a cg_op.prewait one: the body takes it too */
    char *text = code->buf + start, *at = NULL;
    bool pre = false;
    for (int with = 0; with < 2 && !at; with++) {
        snprintf(def, sizeof(def), "void %s(const kiln_gctx *c, int t%s)", name, with ? CG_PRE_PARAM : "");
        at = strstr(text, def);
        pre = with;
    }
    if (!at || strstr(at + 1, def)) return KILN_OK;
    char *line = at;
    while (line > text && line[-1] != '\n') line--;
    if (!only_comments(text, (size_t)(line - text))) return KILN_OK;
    const char *fn = at + strlen(def);
    /* one function and nothing after it: another definition or a macro
     * would land inside the shared body (#pragma unroll is the body's own) */
    if (strstr(fn, "__device__") || strstr(fn, "__global__") || strstr(fn, "#define") || strstr(fn, "#if"))
        return KILN_OK;

    base_str canon, values;
    base_str_init(&canon);
    base_str_init(&values);
    int n_values;
    kiln_status st = KILN_OK;
    if (!canonicalise(fn, name, &canon, &values, &n_values))
        st = base_diag_add(e->d, KILN_ERR_OOM, "out of memory sharing rOperator code");
    if (st == KILN_OK && n_values > SHARE_MAX_VALUES) n_values = -1; /* left as it is */
    struct body *b = NULL;
    if (st == KILN_OK && n_values >= 0) {
        uint64_t h = base_hash_str(base_str_get(&canon));
        for (int i = 0; i < sh->n && !b; i++)
            if (sh->bodies[i].hash == h && strcmp(sh->bodies[i].canon, base_str_get(&canon)) == 0) b = &sh->bodies[i];
        if (!b && sh->n == sh->cap) {
            int cap = sh->cap ? 2 * sh->cap : 32;
            struct body *grown = base_realloc(sh->bodies, (size_t)cap * sizeof(*grown));
            if (!grown) st = base_diag_add(e->d, KILN_ERR_OOM, "out of memory sharing rOperator code");
            else sh->bodies = grown, sh->cap = cap;
        }
        if (st == KILN_OK && !b) {
            char *copy = base_malloc(canon.len + 1);
            if (!copy) st = base_diag_add(e->d, KILN_ERR_OOM, "out of memory sharing rOperator code");
            else {
                memcpy(copy, base_str_get(&canon), canon.len + 1);
                b = &sh->bodies[sh->n++];
                *b = (struct body){.canon = copy, .hash = h, .n_values = n_values, .id = id};
            }
        }
    }
    if (st == KILN_OK && b) {
        /* rewrite: the comments, the body when it is new, the call with the constants */
        base_str out;
        base_str_init(&out);
        base_str_printf(&out, "%.*s", (int)(line - text), text);
        if (b->users == 0) {
            base_str_printf(&out,
                            "/* the body of op_%d and of every rOperator that reads the same but for its constants "
                            "(kg_v0, ...) */\nstatic __device__ %s void opb_%d(const kiln_gctx *c, int t%s",
                            id, inline_body ? "__forceinline__" : "__noinline__", id, pre ? CG_PRE_PARAM : "");
            for (int i = 0; i < n_values; i++) base_str_printf(&out, ", kg_u64 kg_v%d", i);
            base_str_cat(&out, ")");
            base_str_cat(&out, base_str_get(&canon)); /* from just after op_<id>'s parameter list */
        }
        b->users++;
        base_str_printf(&out, "static __device__ __forceinline__ void %s(const kiln_gctx *c, int t%s) { opb_%d(c, t%s%s%s); }\n\n",
                        name, pre ? CG_PRE_PARAM : "", b->id, pre ? ", grid_dep" : "", n_values ? ", " : "",
                        base_str_get(&values));
        char *copy = out.oom ? NULL : base_malloc(values.len + 1);
        if (!copy) st = base_diag_add(e->d, KILN_ERR_OOM, "out of memory sharing rOperator code");
        else {
            code->len = start;
            code->buf[start] = '\0';
            base_str_cat(code, base_str_get(&out));
            sh->rewritten++;
            memcpy(copy, base_str_get(&values), values.len + 1);
            *call = (cg_share_call){.body = b->id, .n_values = n_values, .values = copy};
        }
        base_str_free(&out);
    }
    base_str_free(&canon);
    base_str_free(&values);
    return st;
}
