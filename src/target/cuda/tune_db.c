/*
 * tune_db.c: the tuning database (tune_db.h) on SQLite.
 *
 * One table, keyed by what makes a measurement valid elsewhere: the GPU's
 * name and compute capability, the driver's CUDA version, the kiln build
 * and the group's key. Several kiln processes may tune at once: writes take
 * the write lock in a short transaction (BEGIN IMMEDIATE) and wait for each
 * other through the busy timeout. PRAGMA user_version holds the schema
 * version, so a later kiln can change the table without misreading an old
 * file (and an old kiln refuses a newer file instead of misreading it).
 */
#include "target/cuda/tune_db.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SCHEMA_VERSION 1
#define BUSY_TIMEOUT_MS 10000

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS tuning ("
    " gpu TEXT NOT NULL, sm INTEGER NOT NULL, driver INTEGER NOT NULL, kiln TEXT NOT NULL, key TEXT NOT NULL,"
    " n_cands INTEGER NOT NULL, cand INTEGER NOT NULL, description TEXT NOT NULL, us REAL NOT NULL,"
    " date TEXT NOT NULL,"
    " PRIMARY KEY (gpu, sm, driver, kiln, key))";

static const char lookup_sql[] =
    "SELECT n_cands, cand, description, us, date FROM tuning"
    " WHERE gpu = ?1 AND sm = ?2 AND driver = ?3 AND kiln = ?4 AND key = ?5";

static const char store_sql[] =
    "INSERT OR REPLACE INTO tuning (gpu, sm, driver, kiln, key, n_cands, cand, description, us, date)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))";

struct cg_tune_db {
    sqlite3 *h;
    bool writable;
    bool has_table;   /* false: a read-only file without the table, every lookup misses */
    char path[4096];
};

/* ---- the file's place ------------------------------------------------------------------ */

/* mkdir -p of the folder holding path. */
static kiln_status make_parents(const char *path, base_diag *d)
{
    char dir[4096];
    if (strlen(path) >= sizeof(dir))
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "tuning database path too long: %.100s...", path);
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return KILN_OK;
    *slash = 0;
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != 0) continue;
        char c = *p;
        *p = 0;
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return base_diag_add(d, KILN_ERR_IO, "cannot create the folder '%s' for the tuning database: %s", dir,
                                 strerror(errno));
        *p = c;
        if (c == 0) break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return base_diag_add(d, KILN_ERR_IO, "cannot use '%s' for the tuning database: not a folder", dir);
    return KILN_OK;
}

kiln_status cg_tune_db_path(const char *given, char *path, size_t n, base_diag *d)
{
    const char *env = getenv("KILN_TUNING_DB");
    int len;
    if (given && given[0]) len = snprintf(path, n, "%s", given);
    else if (env && env[0]) len = snprintf(path, n, "%s", env);
    else {
        const char *home = getenv("HOME");
        if (!home || !home[0])
            return base_diag_add(d, KILN_ERR_IO,
                                 "no tuning database: $HOME is not set (set $KILN_TUNING_DB to a file path)");
        len = snprintf(path, n, "%s/.cache/kiln/tuning.db", home);
    }
    if (len < 0 || (size_t)len >= n)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "tuning database path too long");
    return make_parents(path, d);
}

/* ---- opening ------------------------------------------------------------------------------ */

static kiln_status db_error(cg_tune_db *db, base_diag *d, const char *what)
{
    return base_diag_add(d, KILN_ERR_IO, "tuning database '%s': %s: %s", db->path, what, sqlite3_errmsg(db->h));
}

/* The schema version, or -1 (with a message) when the file cannot be read
 * as a database. */
static int schema_version(cg_tune_db *db, base_diag *d)
{
    sqlite3_stmt *q = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int(q, 0);
    if (v < 0)
        base_diag_add(d, KILN_ERR_IO,
                      "tuning database '%s' cannot be read (%s): delete it to start a new one", db->path,
                      sqlite3_errmsg(db->h));
    sqlite3_finalize(q);
    return v;
}

static bool table_exists(cg_tune_db *db)
{
    sqlite3_stmt *q = NULL;
    bool found = false;
    if (sqlite3_prepare_v2(db->h, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tuning'", -1, &q,
                           NULL) == SQLITE_OK)
        found = sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    return found;
}

/* Creates the table in a writable file; a file that turns out not to take
 * writes (its folder is read-only, say) goes on read-only. */
static kiln_status create_table(cg_tune_db *db, base_diag *d)
{
    char sql[1024];
    snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE; %s; PRAGMA user_version = %d; COMMIT;", create_sql, SCHEMA_VERSION);
    char *err = NULL;
    int rc = sqlite3_exec(db->h, sql, NULL, NULL, &err);
    if (rc == SQLITE_OK) return KILN_OK;
    base_diag_add(d, KILN_OK, "tuning database '%s' takes no writes (%s): new results will not be kept", db->path,
                  err ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    db->writable = false;
    return KILN_OK;
}

kiln_status cg_tune_db_open(const char *path, cg_tune_db **out, base_diag *d)
{
    *out = NULL;
    cg_tune_db *db = base_calloc(1, sizeof(*db));
    if (!db) return base_diag_add(d, KILN_ERR_OOM, "out of memory opening the tuning database");
    snprintf(db->path, sizeof(db->path), "%s", path);
    int rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    db->writable = rc == SQLITE_OK && !sqlite3_db_readonly(db->h, "main");
    if (rc != SQLITE_OK) {
        /* no write access to the file or its folder: read what is there */
        sqlite3_close(db->h);
        db->h = NULL;
        rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READONLY, NULL);
        if (rc != SQLITE_OK) {
            base_diag_add(d, KILN_ERR_IO, "cannot open the tuning database '%s': %s", path,
                          db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
            cg_tune_db_close(db);
            return KILN_ERR_IO;
        }
    }
    if (!db->writable)
        base_diag_add(d, KILN_OK, "tuning database '%s' is read-only: new results will not be kept", path);
    sqlite3_busy_timeout(db->h, BUSY_TIMEOUT_MS);
    int version = schema_version(db, d);
    kiln_status st = version < 0 ? KILN_ERR_IO : KILN_OK;
    if (st == KILN_OK && version > SCHEMA_VERSION)
        st = base_diag_add(d, KILN_ERR_UNSUPPORTED,
                           "tuning database '%s' was written by a newer kiln (schema %d; this kiln reads %d)", path,
                           version, SCHEMA_VERSION);
    bool exists = st == KILN_OK && table_exists(db);
    if (exists && version == 0)
        st = base_diag_add(d, KILN_ERR_UNSUPPORTED,
                           "'%s' has a table 'tuning' that kiln did not write: not used as the tuning database", path);
    if (st == KILN_OK && db->writable && !exists) st = create_table(db, d);
    if (st == KILN_OK) db->has_table = table_exists(db);
    if (st != KILN_OK) {
        cg_tune_db_close(db);
        return st;
    }
    *out = db;
    return KILN_OK;
}

void cg_tune_db_close(cg_tune_db *db)
{
    if (!db) return;
    sqlite3_close(db->h);
    base_free(db);
}

bool cg_tune_db_writable(const cg_tune_db *db) { return db && db->writable; }

/* ---- rows ---------------------------------------------------------------------------------- */

static int bind_scope(sqlite3_stmt *q, const cg_tune_scope *s, const char *key)
{
    int rc = sqlite3_bind_text(q, 1, s->gpu, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(q, 2, s->sm);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(q, 3, s->driver);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 4, s->kiln, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 5, key, -1, SQLITE_STATIC);
    return rc;
}

static void copy_text(char *dst, size_t n, const unsigned char *src)
{
    snprintf(dst, n, "%s", src ? (const char *)src : "");
}

kiln_status cg_tune_db_lookup(cg_tune_db *db, const cg_tune_scope *s, const char *key, cg_tune_row *out,
                              bool *found, base_diag *d)
{
    *found = false;
    memset(out, 0, sizeof(*out));
    if (!db->has_table) return KILN_OK;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db->h, lookup_sql, -1, &q, NULL) != SQLITE_OK) return db_error(db, d, "lookup");
    kiln_status st = KILN_OK;
    int rc = bind_scope(q, s, key);
    if (rc == SQLITE_OK) rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        out->n_cands = sqlite3_column_int(q, 0);
        out->cand = sqlite3_column_int(q, 1);
        copy_text(out->desc, sizeof(out->desc), sqlite3_column_text(q, 2));
        out->us = sqlite3_column_double(q, 3);
        copy_text(out->date, sizeof(out->date), sqlite3_column_text(q, 4));
        *found = true;
    } else if (rc != SQLITE_DONE) st = db_error(db, d, "lookup");
    sqlite3_finalize(q);
    return st;
}

kiln_status cg_tune_db_store(cg_tune_db *db, const cg_tune_scope *s, const char *key, const cg_tune_row *row,
                             base_diag *d)
{
    if (!db->writable)
        return base_diag_add(d, KILN_ERR_IO, "tuning database '%s' is read-only", db->path);
    if (sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return db_error(db, d, "store");
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db->h, store_sql, -1, &q, NULL);
    if (rc == SQLITE_OK) rc = bind_scope(q, s, key);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(q, 6, row->n_cands);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(q, 7, row->cand);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 8, row->desc, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_double(q, 9, row->us);
    if (rc == SQLITE_OK) rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc == SQLITE_DONE && sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return KILN_OK;
    kiln_status st = db_error(db, d, "store");
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return st;
}
