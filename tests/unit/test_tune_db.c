/*
 * test_tune_db.c: the tuning database (src/target/cuda/tune_db.c) and the
 * tuner's behaviour where there is no GPU (src/target/cuda/tune.c).
 *
 * Rows round-trip and persist, each part of the scope keys them, a store
 * replaces; the path comes from the option, then $KILN_TUNING_DB, then
 * $HOME/.cache/kiln, with its folders created; a damaged file, a file from
 * a newer kiln and a path that cannot be created are errors with messages
 * (the tuner turns them into warnings), never crashes. Without a device the
 * tuner is not opened and every choice is the heuristic one. The mono
 * schedules' configuration is kept under a key of the work (the groups,
 * the schedule, the precision), whatever configuration the schedule names.
 */
#include "unit.h"

#include "runtime/cuda.h"
#include "target/cuda/cuda-impl.h"
#include "target/cuda/tune_db.h"
#include "target/target.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof(buf[0]), "%s/%s", unit_tmpdir(), name);
    return b;
}

static bool write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static const cg_tune_scope h100 = {.gpu = "NVIDIA H100 80GB HBM3", .sm = 90, .driver = 13000, .kiln = "0.1.0+abcd"};

static cg_tune_db *open_at(const char *path)
{
    base_diag d;
    base_diag_init(&d);
    cg_tune_db *db = NULL;
    kiln_status st = cg_tune_db_open(path, &db, &d);
    if (st != KILN_OK) printf("    %s\n", base_diag_text(&d));
    UNIT_CHECK_EQ_INT(st, KILN_OK);
    UNIT_CHECK(db != NULL);
    base_diag_free(&d);
    return db;
}

static bool lookup(cg_tune_db *db, const cg_tune_scope *s, const char *key, cg_tune_row *row)
{
    base_diag d;
    base_diag_init(&d);
    bool found = false;
    UNIT_CHECK_EQ_INT(cg_tune_db_lookup(db, s, key, row, &found, &d), KILN_OK);
    UNIT_CHECK_EQ_INT(d.n_msgs, 0);
    base_diag_free(&d);
    return found;
}

static void store(cg_tune_db *db, const cg_tune_scope *s, const char *key, int n_cands, int cand, double us)
{
    base_diag d;
    base_diag_init(&d);
    cg_tune_row row = {.n_cands = n_cands, .cand = cand, .us = us};
    snprintf(row.desc, sizeof(row.desc), "candidate %d of %d", cand, n_cands);
    kiln_status st = cg_tune_db_store(db, s, key, &row, &d);
    if (st != KILN_OK) printf("    %s\n", base_diag_text(&d));
    UNIT_CHECK_EQ_INT(st, KILN_OK);
    base_diag_free(&d);
}

UNIT_TEST(tune_db_rows_round_trip_and_persist)
{
    const char *path = tmp_path("rt/deeper/tuning.db");
    char resolved[4096];
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(cg_tune_db_path(path, resolved, sizeof(resolved), &d), KILN_OK);
    UNIT_CHECK(strcmp(resolved, path) == 0);
    struct stat st;
    UNIT_CHECK(stat(tmp_path("rt/deeper"), &st) == 0 && S_ISDIR(st.st_mode));
    base_diag_free(&d);

    cg_tune_db *db = open_at(path);
    if (!db) return;
    UNIT_CHECK(cg_tune_db_writable(db));
    cg_tune_row row;
    const char *key = "gemm f16 m=128 n=768 k=768 bias gelu";
    UNIT_CHECK(!lookup(db, &h100, key, &row));
    store(db, &h100, key, 24, 7, 18.25);
    UNIT_CHECK(lookup(db, &h100, key, &row));
    UNIT_CHECK_EQ_INT(row.n_cands, 24);
    UNIT_CHECK_EQ_INT(row.cand, 7);
    UNIT_CHECK(row.us == 18.25);
    UNIT_CHECK(strcmp(row.desc, "candidate 7 of 24") == 0);
    UNIT_CHECK_EQ_INT(strlen(row.date), 20); /* 2026-11-22T04:30:00Z */
    UNIT_CHECK(row.date[10] == 'T' && row.date[19] == 'Z');

    /* every part of the scope is part of the key */
    cg_tune_scope other[4] = {h100, h100, h100, h100};
    other[0].gpu = "NVIDIA H200";
    other[1].sm = 80;
    other[2].driver = 12080;
    other[3].kiln = "0.1.0+ffff";
    for (int i = 0; i < 4; i++) UNIT_CHECK(!lookup(db, &other[i], key, &row));
    UNIT_CHECK(!lookup(db, &h100, "gemm f16 m=128 n=768 k=3072", &row));

    /* a store replaces */
    store(db, &h100, key, 24, 3, 12.5);
    store(db, &other[0], key, 24, 11, 9.0);
    UNIT_CHECK(lookup(db, &h100, key, &row));
    UNIT_CHECK_EQ_INT(row.cand, 3);
    UNIT_CHECK(row.us == 12.5);
    cg_tune_db_close(db);

    /* and it is all there after reopening */
    db = open_at(path);
    if (!db) return;
    UNIT_CHECK(lookup(db, &h100, key, &row));
    UNIT_CHECK_EQ_INT(row.cand, 3);
    UNIT_CHECK(lookup(db, &other[0], key, &row));
    UNIT_CHECK_EQ_INT(row.cand, 11);
    cg_tune_db_close(db);
    cg_tune_db_close(NULL);
}

UNIT_TEST(tune_db_path_order)
{
    char path[4096];
    base_diag d;
    base_diag_init(&d);
    const char *old_home = getenv("HOME"), *old_env = getenv("KILN_TUNING_DB");
    char *home = old_home ? strdup(old_home) : NULL, *env = old_env ? strdup(old_env) : NULL;

    setenv("KILN_TUNING_DB", tmp_path("env/t.db"), 1);
    UNIT_CHECK_EQ_INT(cg_tune_db_path(tmp_path("given/t.db"), path, sizeof(path), &d), KILN_OK);
    UNIT_CHECK(strcmp(path, tmp_path("given/t.db")) == 0);
    UNIT_CHECK_EQ_INT(cg_tune_db_path(NULL, path, sizeof(path), &d), KILN_OK);
    UNIT_CHECK(strcmp(path, tmp_path("env/t.db")) == 0);
    unsetenv("KILN_TUNING_DB");
    setenv("HOME", tmp_path("home"), 1);
    UNIT_CHECK_EQ_INT(cg_tune_db_path(NULL, path, sizeof(path), &d), KILN_OK);
    UNIT_CHECK(strcmp(path, tmp_path("home/.cache/kiln/tuning.db")) == 0);
    struct stat st;
    UNIT_CHECK(stat(tmp_path("home/.cache/kiln"), &st) == 0 && S_ISDIR(st.st_mode));
    unsetenv("HOME");
    UNIT_CHECK_EQ_INT(cg_tune_db_path(NULL, path, sizeof(path), &d), KILN_ERR_IO);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "$HOME");

    if (home) setenv("HOME", home, 1);
    if (env) setenv("KILN_TUNING_DB", env, 1);
    free(home);
    free(env);
    base_diag_free(&d);
}

UNIT_TEST(tune_db_bad_files_are_errors_not_crashes)
{
    base_diag d;
    base_diag_init(&d);
    cg_tune_db *db = (cg_tune_db *)&d; /* must be reset to NULL on failure */

    /* not a database */
    const char *junk = tmp_path("junk.db");
    char bytes[4096];
    for (size_t i = 0; i < sizeof(bytes); i++) bytes[i] = (char)(i * 7 + 3);
    UNIT_CHECK(write_bytes(junk, bytes, sizeof(bytes)));
    UNIT_CHECK_EQ_INT(cg_tune_db_open(junk, &db, &d), KILN_ERR_IO);
    UNIT_CHECK(db == NULL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "cannot be read");
    base_diag_clear(&d);

    /* a database whose header is damaged after it was written */
    const char *dam = tmp_path("damaged.db");
    db = open_at(dam);
    if (db) {
        store(db, &h100, "k", 2, 1, 1.0);
        cg_tune_db_close(db);
    }
    FILE *f = fopen(dam, "r+b");
    UNIT_CHECK(f != NULL);
    if (f) {
        fwrite("garbage garbage!", 1, 16, f); /* the "SQLite format 3" magic */
        fclose(f);
    }
    UNIT_CHECK_EQ_INT(cg_tune_db_open(dam, &db, &d), KILN_ERR_IO);
    UNIT_CHECK(db == NULL);
    base_diag_clear(&d);

    /* written by a newer kiln */
    const char *newer = tmp_path("newer.db");
    sqlite3 *h = NULL;
    UNIT_CHECK_EQ_INT(sqlite3_open(newer, &h), SQLITE_OK);
    UNIT_CHECK_EQ_INT(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    UNIT_CHECK_EQ_INT(cg_tune_db_open(newer, &db, &d), KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "newer kiln");
    base_diag_clear(&d);

    /* somebody else's table of that name */
    const char *foreign = tmp_path("foreign.db");
    UNIT_CHECK_EQ_INT(sqlite3_open(foreign, &h), SQLITE_OK);
    UNIT_CHECK_EQ_INT(sqlite3_exec(h, "CREATE TABLE tuning (x INTEGER)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    UNIT_CHECK_EQ_INT(cg_tune_db_open(foreign, &db, &d), KILN_ERR_UNSUPPORTED);
    base_diag_clear(&d);

    /* a folder cannot be created under a file; a folder is not a database */
    UNIT_CHECK(write_bytes(tmp_path("plainfile"), "x", 1));
    char path[4096];
    UNIT_CHECK_EQ_INT(cg_tune_db_path(tmp_path("plainfile/sub/t.db"), path, sizeof(path), &d), KILN_ERR_IO);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "cannot create the folder");
    base_diag_clear(&d);
    UNIT_CHECK(mkdir(tmp_path("adir.db"), 0777) == 0);
    UNIT_CHECK(cg_tune_db_open(tmp_path("adir.db"), &db, &d) != KILN_OK);
    UNIT_CHECK(db == NULL);
    UNIT_CHECK(d.n_msgs > 0);
    base_diag_free(&d);
}

UNIT_TEST(tune_db_read_only_file_is_read)
{
    const char *path = tmp_path("ro.db");
    cg_tune_db *db = open_at(path);
    if (!db) return;
    store(db, &h100, "move f16 transpose 0213", 4, 2, 3.0);
    cg_tune_db_close(db);
    /* SQLite's read-only flag stands in for a file root could still write */
    sqlite3 *h = NULL;
    UNIT_CHECK_EQ_INT(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_close(h);
    if (chmod(path, 0444) != 0) return;
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(cg_tune_db_open(path, &db, &d), KILN_OK);
    if (db) {
        cg_tune_row row;
        UNIT_CHECK(lookup(db, &h100, "move f16 transpose 0213", &row));
        UNIT_CHECK_EQ_INT(row.cand, 2);
        /* as root the file stays writable; otherwise stores are refused */
        if (!cg_tune_db_writable(db)) {
            UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "read-only");
            cg_tune_row r2 = {.n_cands = 4, .cand = 1};
            UNIT_CHECK_EQ_INT(cg_tune_db_store(db, &h100, "x", &r2, &d), KILN_ERR_IO);
        }
    }
    cg_tune_db_close(db);
    chmod(path, 0644);
    base_diag_free(&d);
}

static int n_progress;
static char last_progress[512];

static void on_progress(void *user, const char *line)
{
    (void)user;
    n_progress++;
    snprintf(last_progress, sizeof(last_progress), "%s", line);
}

static kiln_status never_called(cg_emitter *e, const sched_group *grp, int cand, cg_op *op)
{
    (void)e;
    (void)grp;
    (void)cand;
    (void)op;
    unit_fail(__FILE__, __LINE__, "a candidate was emitted although there is no device");
    return KILN_OK;
}

UNIT_TEST(tuner_without_device_chooses_heuristically)
{
    target_options o = {.tune = true, .progress = on_progress, .tuning_db = tmp_path("nodev.db")};
    cg_emitter e = {.o = &o};
    e.gpu.present = false;
    base_diag d;
    base_diag_init(&d);
    cg_tuner *t = (cg_tuner *)&d;
    n_progress = 0;
    UNIT_CHECK_EQ_INT(cg_tuner_open(&e, NULL, &t, &d), KILN_OK);
    UNIT_CHECK(t == NULL);
    UNIT_CHECK_EQ_INT(n_progress, 1);
    UNIT_CHECK_STR_CONTAINS(last_progress, "no CUDA device");
    e.tuner = t;
    sched_group grp = {.id = 3, .name = "mm"};
    UNIT_CHECK_EQ_INT(cg_tune_choose(&e, &grp, "gemm f16 m=1 n=2 k=3", 8, 0, never_called), -1);
    cg_tuner_close(NULL);
    base_diag_free(&d);
}

/* A key names its candidate list: the database stores winners by index. */
UNIT_TEST(tune_key_names_the_candidate_list)
{
    const int a[3] = {1, 2, 4}, b[3] = {1, 4, 2};
    char ka[128] = "attention mma f16", kb[128] = "attention mma f16", kc[128] = "attention mma f16";
    cg_tune_key_cands(ka, sizeof(ka), a, sizeof(a));
    cg_tune_key_cands(kb, sizeof(kb), b, sizeof(b));
    cg_tune_key_cands(kc, sizeof(kc), a, sizeof(a));
    UNIT_CHECK_STR_CONTAINS(ka, "attention mma f16 cands=");
    UNIT_CHECK_EQ_INT((int)strlen(ka), (int)strlen("attention mma f16 cands=") + 8);
    UNIT_CHECK(strcmp(ka, kb) != 0); /* another order: another key */
    UNIT_CHECK(strcmp(ka, kc) == 0);
    char small[20] = "attention mma f16";
    cg_tune_key_cands(small, sizeof(small), a, sizeof(a)); /* cut, never overrun */
    UNIT_CHECK_EQ_INT((int)strlen(small), 19);
}

/* ---- the mono configuration's key (target_cuda_mono_key) ---- */

/* A program of two groups: a GEMM of n x 768 and a row group over it. */
typedef struct key_prog {
    ir_node nodes[2];
    ir_node *node_ptr[2];
    ir_value outs[2];
    ir_value *out_ptr[2];
    sched_group groups[2];
    sched_group *group_ptr[2];
    sched_program p;
} key_prog;

static void key_prog_init(key_prog *k, int64_t rows)
{
    memset(k, 0, sizeof(*k));
    const kiln_op ops[2] = {KILN_OP_MAT_MUL, KILN_OP_LAYER_NORMALIZATION};
    const sched_group_kind kinds[2] = {SCHED_GROUP_GEMM, SCHED_GROUP_ROWS};
    for (int i = 0; i < 2; i++) {
        k->nodes[i].op = ops[i];
        k->node_ptr[i] = &k->nodes[i];
        k->outs[i].t = (ir_tensor){.dtype = KILN_F32, .rank = 2, .dims = {rows, 768}};
        k->out_ptr[i] = &k->outs[i];
        k->groups[i] = (sched_group){.kind = kinds[i], .id = i, .nodes = &k->node_ptr[i], .n_nodes = 1,
                                     .out = &k->out_ptr[i], .n_out = 1};
        k->group_ptr[i] = &k->groups[i];
    }
    k->p = (sched_program){.groups = k->group_ptr, .n_groups = 2, .arena_bytes = 4096, .weight_bytes = 8192};
}

UNIT_TEST(mono_key_names_the_work_not_the_configuration)
{
    key_prog a, b;
    key_prog_init(&a, 128);
    key_prog_init(&b, 128);
    char ka[128], kb[128];
    target_cuda_mono_key(&a.p, "mono", "fp16", ka, sizeof(ka));
    UNIT_CHECK_STR_CONTAINS(ka, "mono fp16 model=");
    /* the same work, another copy: the same key */
    target_cuda_mono_key(&b.p, "mono", "fp16", kb, sizeof(kb));
    UNIT_CHECK(strcmp(ka, kb) == 0);
    /* a named configuration is what is tuned, not part of the key */
    target_cuda_mono_key(&b.p, "mono:256x2", "fp16", kb, sizeof(kb));
    UNIT_CHECK(strcmp(ka, kb) == 0);
    /* the schedule and the precision are (no precision: fp32) */
    target_cuda_mono_key(&b.p, "mono-barriers", "fp16", kb, sizeof(kb));
    UNIT_CHECK_STR_CONTAINS(kb, "mono-barriers fp16 model=");
    target_cuda_mono_key(&b.p, "mono", NULL, kb, sizeof(kb));
    UNIT_CHECK_STR_CONTAINS(kb, "mono fp32 model=");
    /* other shapes, another op, another arena: other work */
    key_prog_init(&b, 2048);
    target_cuda_mono_key(&b.p, "mono", "fp16", kb, sizeof(kb));
    UNIT_CHECK(strcmp(ka, kb) != 0);
    key_prog_init(&b, 128);
    b.nodes[1].op = KILN_OP_SOFTMAX;
    target_cuda_mono_key(&b.p, "mono", "fp16", kb, sizeof(kb));
    UNIT_CHECK(strcmp(ka, kb) != 0);
    key_prog_init(&b, 128);
    b.p.arena_bytes = 8192;
    target_cuda_mono_key(&b.p, "mono", "fp16", kb, sizeof(kb));
    UNIT_CHECK(strcmp(ka, kb) != 0);
}

UNIT_TEST(mono_config_lookup_without_gpu_is_an_error)
{
    target_mono_config c;
    bool found = true;
    base_diag d;
    base_diag_init(&d);
    kiln_status st = target_cuda_mono_lookup(tmp_path("mono.db"), "mono fp16 model=0", NULL, &c, &found, &d);
    if (rt_cuda_device_count() < 1) {
        UNIT_CHECK(st != KILN_OK);
        UNIT_CHECK(!found);
        UNIT_CHECK(d.n_msgs > 0);
    }
    base_diag_free(&d);
}
