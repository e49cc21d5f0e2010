/*
 * diag.c: collected diagnostics and the string builder.
 *
 * A check that finds a problem adds a message and goes on, so one run reports
 * every problem at once (SQLite's Parse context does the same).
 */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void base_diag_init(base_diag *d) { memset(d, 0, sizeof(*d)); }

void base_diag_clear(base_diag *d)
{
    for (int i = 0; i < d->n_msgs; i++) base_free(d->msgs[i]);
    d->n_msgs = 0;
    d->truncated = false;
    base_free(d->joined);
    d->joined = NULL;
}

void base_diag_free(base_diag *d)
{
    base_diag_clear(d);
    base_free(d->msgs);
    memset(d, 0, sizeof(*d));
}

kiln_status base_diag_vadd(base_diag *d, kiln_status st, const char *fmt, va_list ap)
{
    if (!d) return st;
    if (d->n_msgs >= BASE_DIAG_MAX) {
        d->truncated = true;
        return st;
    }
    if (d->n_msgs + 1 > d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        char **m = base_realloc(d->msgs, (size_t)cap * sizeof(*m));
        if (!m) return st;
        d->msgs = m;
        d->cap = cap;
    }
    char buf[1024];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    size_t n = strlen(buf);
    char *s = base_malloc(n + 1);
    if (!s) return st;
    memcpy(s, buf, n + 1);
    d->msgs[d->n_msgs++] = s;
    return st;
}

kiln_status base_diag_add(base_diag *d, kiln_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    base_diag_vadd(d, st, fmt, ap);
    va_end(ap);
    return st;
}

const char *base_diag_text(base_diag *d)
{
    if (!d || d->n_msgs == 0) return "";
    size_t total = 1;
    for (int i = 0; i < d->n_msgs; i++) total += strlen(d->msgs[i]) + 1;
    if (d->truncated) total += 64;
    char *t = base_malloc(total);
    if (!t) return d->msgs[0];
    t[0] = 0;
    for (int i = 0; i < d->n_msgs; i++) {
        strcat(t, d->msgs[i]);
        if (i + 1 < d->n_msgs) strcat(t, "\n");
    }
    if (d->truncated) strcat(t, "\n(further messages dropped)");
    base_free(d->joined);
    d->joined = t;
    return t;
}

/* ---- string builder ---------------------------------------------------- */

void base_str_init(base_str *s) { memset(s, 0, sizeof(*s)); }

void base_str_free(base_str *s)
{
    base_free(s->buf);
    memset(s, 0, sizeof(*s));
}

static bool str_reserve(base_str *s, size_t extra)
{
    if (s->oom) return false;
    if (s->len + extra + 1 <= s->cap) return true;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < s->len + extra + 1) cap *= 2;
    char *b = base_realloc(s->buf, cap);
    if (!b) {
        s->oom = true;
        return false;
    }
    s->buf = b;
    s->cap = cap;
    return true;
}

void base_str_cat(base_str *s, const char *text)
{
    size_t n = strlen(text);
    if (!str_reserve(s, n)) return;
    memcpy(s->buf + s->len, text, n + 1);
    s->len += n;
}

void base_str_printf(base_str *s, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0 && str_reserve(s, (size_t)n)) {
        vsnprintf(s->buf + s->len, (size_t)n + 1, fmt, ap2);
        s->len += (size_t)n;
    }
    va_end(ap2);
}

const char *base_str_get(const base_str *s) { return s->buf ? s->buf : ""; }
