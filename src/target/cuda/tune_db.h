/*
 * tune_db.h: the tuning database (Bolt 3.2.2): the profiler's winners kept
 * in one SQLite file between compilations, so a group is timed once per
 * GPU, driver and kiln build.
 *
 *     char path[4096];
 *     cg_tune_db *db = NULL;
 *     base_diag d;
 *     base_diag_init(&d);
 *     if (cg_tune_db_path(NULL, path, sizeof(path), &d) == KILN_OK)
 *         cg_tune_db_open(path, &db, &d);   // NULL db: results are not kept
 *     cg_tune_scope s = {.gpu = "NVIDIA H100 80GB HBM3", .sm = 90, .driver = 13000, .kiln = "0.1.0+9f2c"};
 *     cg_tune_row r;
 *     bool found;
 *     if (db && cg_tune_db_lookup(db, &s, "gemm f16 m=128 n=768 k=768", &r, &found, &d) == KILN_OK && found)
 *         use(r.cand);
 *     cg_tune_db_close(db);
 *
 * Messages in d are warnings for the caller to show: a database that cannot
 * be opened, read or written never stops a compilation.
 */
#ifndef KILN_TARGET_CUDA_TUNE_DB_H
#define KILN_TARGET_CUDA_TUNE_DB_H

#include "base/base.h"

typedef struct cg_tune_db cg_tune_db;

/* What a stored result holds for: the table's key, with the group's key. */
typedef struct cg_tune_scope {
    const char *gpu;  /* the device's name */
    int sm;           /* compute capability x 10 + minor: 90 */
    int driver;       /* the driver's CUDA version: 13000 */
    const char *kiln; /* the kiln build: version and a hash of its templates */
} cg_tune_scope;

typedef struct cg_tune_row {
    int n_cands;      /* how many candidates the template offered */
    int cand;         /* the winner's index */
    char desc[160];   /* the winner, in words */
    double us;        /* its measured time, microseconds */
    char date[32];    /* when it was measured, UTC ("2026-11-22T04:30:00Z"); set by the database */
} cg_tune_row;

/* The database file: `given` when non-NULL, else $KILN_TUNING_DB, else
 * ~/.cache/kiln/tuning.db; the folders leading to it are created.
 * OUT: path, n bytes at most. */
kiln_status cg_tune_db_path(const char *given, char *path, size_t n, base_diag *d);

/* Opens the database at path, creating the file and its table when
 * missing. A file that cannot be written is opened read-only (a note in d);
 * a damaged file, a file from a newer kiln or one that cannot be read is an
 * error. OUT: *out (NULL on error), close with cg_tune_db_close. */
kiln_status cg_tune_db_open(const char *path, cg_tune_db **out, base_diag *d);
void cg_tune_db_close(cg_tune_db *db); /* NULL is fine */
/* Whether stores can succeed. */
bool cg_tune_db_writable(const cg_tune_db *db);

/* The row for (scope, key). OUT: *found, and *out when found. */
kiln_status cg_tune_db_lookup(cg_tune_db *db, const cg_tune_scope *s, const char *key, cg_tune_row *out,
                              bool *found, base_diag *d);
/* Stores (replaces) the row for (scope, key) in one transaction, waiting
 * for other writers up to the busy timeout. row->date is ignored. */
kiln_status cg_tune_db_store(cg_tune_db *db, const cg_tune_scope *s, const char *key, const cg_tune_row *row,
                             base_diag *d);

#endif
