/*
 * alloc.c: checked allocation, the arena, and failure injection.
 *
 * Every heap allocation in kiln goes through base_malloc and friends so that a
 * test can make the n-th one fail and check that the failure surfaces as
 * KILN_ERR_OOM instead of a crash (SQLite's and Lua's habit).
 */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long fail_after = -1;

void base_fail_alloc_after(long n) { fail_after = n; }

static bool should_fail(void)
{
    if (fail_after < 0) return false;
    if (fail_after == 0) return true;
    fail_after--;
    return false;
}

void *base_malloc(size_t n)
{
    if (should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *base_calloc(size_t n, size_t size)
{
    if (should_fail()) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *base_realloc(void *p, size_t n)
{
    if (should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void base_free(void *p) { free(p); }

bool base_mul_ok(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

_Noreturn void base_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "kiln: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    abort();
}

/* ---- arena ---------------------------------------------------------------- */

struct base_arena_block {
    base_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define ARENA_BLOCK_BYTES (64u * 1024u)

void base_arena_init(base_arena *a)
{
    a->head = NULL;
    a->used_bytes = 0;
}

void base_arena_free(base_arena *a)
{
    base_arena_block *b = a->head;
    while (b) {
        base_arena_block *next = b->next;
        base_free(b);
        b = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

void *base_arena_alloc(base_arena *a, size_t n)
{
    if (n > SIZE_MAX - 32) return NULL;
    n = (n + 15) & ~(size_t)15;
    base_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK_BYTES ? n : ARENA_BLOCK_BYTES;
        b = base_malloc(sizeof(*b) + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        /* A large one-off allocation goes behind the current block so the
         * current block's free space is not wasted. */
        if (a->head && cap == n) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used_bytes += n;
    memset(p, 0, n);
    return p;
}

char *base_arena_strndup(base_arena *a, const char *s, size_t n)
{
    char *p = base_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *base_arena_strdup(base_arena *a, const char *s)
{
    return base_arena_strndup(a, s, strlen(s));
}

char *base_arena_printf(base_arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n < 0 ? NULL : base_arena_alloc(a, (size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}
