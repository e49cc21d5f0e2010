/*
 * base.h: the bottom layer every other layer uses: assertions, arenas,
 * diagnostics, a string builder, fp16/bf16 conversion and hashing.
 * Nothing here knows about models or ops.
 */
#ifndef KILN_BASE_H
#define KILN_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

/* Broken invariants abort with the place; always on, also in release builds. */
#define KILN_ASSERT(cond) \
    ((cond) ? (void)0 : base_assert_fail(#cond, __FILE__, __LINE__))
_Noreturn void base_assert_fail(const char *cond, const char *file, int line);

#define KILN_COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define KILN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KILN_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Propagate a failing status. */
#define KILN_TRY(expr)                        \
    do {                                      \
        kiln_status try_st_ = (expr);         \
        if (try_st_ != KILN_OK) return try_st_; \
    } while (0)

#if defined(__GNUC__)
#define KILN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KILN_PRINTF(f, a)
#endif

/* ---- allocation --------------------------------------------------------
 * base_malloc/base_calloc return NULL on failure, like malloc; tests can make
 * the n-th call fail (base_fail_alloc_after) to check that every caller
 * turns that into KILN_ERR_OOM. */
void *base_malloc(size_t n);
void *base_calloc(size_t n, size_t size);
void *base_realloc(void *p, size_t n);
void base_free(void *p);
void base_fail_alloc_after(long n); /* -1: never fail (default) */

/* n * size without overflow; false when it would overflow. */
bool base_mul_ok(size_t a, size_t b, size_t *out);

/* ---- arena --------------------------------------------------------------
 * One arena per compilation: many small allocations, one free at the end. */
typedef struct base_arena_block base_arena_block;
typedef struct base_arena {
    base_arena_block *head;
    size_t used_bytes; /* total handed out, for statistics */
} base_arena;

void base_arena_init(base_arena *a);
void base_arena_free(base_arena *a);
/* Zeroed, 16-byte aligned; NULL when out of memory. */
void *base_arena_alloc(base_arena *a, size_t n);
char *base_arena_strdup(base_arena *a, const char *s);
char *base_arena_strndup(base_arena *a, const char *s, size_t n);
char *base_arena_printf(base_arena *a, const char *fmt, ...) KILN_PRINTF(2, 3);

/* ---- diagnostics --------------------------------------------------------
 * Errors are collected, not printed: a check reports every problem it finds
 * and the caller (the CLI) prints them all. The library never prints. */
typedef struct base_diag {
    char **msgs;
    int n_msgs;
    int cap;
    bool truncated; /* more than BASE_DIAG_MAX messages arrived */
    char *joined;   /* cache for base_diag_text */
} base_diag;

#define BASE_DIAG_MAX 1000

void base_diag_init(base_diag *d);
void base_diag_free(base_diag *d);
void base_diag_clear(base_diag *d);
/* Adds a message; returns st so callers can write `return base_diag_add(...)`. */
kiln_status base_diag_add(base_diag *d, kiln_status st, const char *fmt, ...) KILN_PRINTF(3, 4);
kiln_status base_diag_vadd(base_diag *d, kiln_status st, const char *fmt, va_list ap);
/* All messages joined by newlines, in a buffer owned by d. */
const char *base_diag_text(base_diag *d);

/* ---- string builder ------------------------------------------------------ */
typedef struct base_str {
    char *buf;
    size_t len, cap;
    bool oom;
} base_str;

void base_str_init(base_str *s);
void base_str_free(base_str *s);
void base_str_cat(base_str *s, const char *text);
void base_str_printf(base_str *s, const char *fmt, ...) KILN_PRINTF(2, 3);
/* Never NULL; "" when empty. */
const char *base_str_get(const base_str *s);

/* ---- 16-bit floats (round to nearest even) ------------------------------ */
float base_f16_to_f32(uint16_t h);
uint16_t base_f32_to_f16(float f);
float base_bf16_to_f32(uint16_t h);
uint16_t base_f32_to_bf16(float f);

/* ---- hashing -------------------------------------------------------------- */
uint64_t base_hash_bytes(const void *p, size_t n, uint64_t seed);
uint64_t base_hash_str(const char *s);

/* ---- files ---------------------------------------------------------------- */
typedef struct base_file_map {
    void *data;
    size_t size;
    bool mapped; /* true: munmap; false: free */
} base_file_map;

/* Maps a whole file read-only; an empty file yields size 0 and data NULL. */
kiln_status base_file_map_open(const char *path, base_file_map *out, base_diag *d);
void base_file_map_close(base_file_map *m);

#endif
