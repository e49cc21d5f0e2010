/*
 * unit.h: a tiny unit-test framework.
 *
 *     UNIT_TEST(arena_grows) {
 *         ...
 *         UNIT_CHECK(p != NULL);
 *         UNIT_CHECK_EQ_INT(n, 3);
 *     }
 *
 * Tests register themselves (a constructor function each); unit_main.c runs
 * them all, or those whose name contains argv[1], and ends with the line
 * "N passed, N failed". A failed check records file, line and expression and
 * the test goes on, so one run shows every failing check.
 */
#ifndef KILN_TESTS_UNIT_H
#define KILN_TESTS_UNIT_H

#include <stdio.h>
#include <string.h>

typedef void (*unit_fn)(void);
void unit_register(const char *name, unit_fn fn);
void unit_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define UNIT_TEST(name)                                                           \
    static void unit_test_##name(void);                                           \
    __attribute__((constructor)) static void unit_register_##name(void)           \
    {                                                                             \
        unit_register(#name, unit_test_##name);                                   \
    }                                                                             \
    static void unit_test_##name(void)

#define UNIT_CHECK(cond) \
    ((cond) ? (void)0 : unit_fail(__FILE__, __LINE__, "check failed: %s", #cond))

#define UNIT_CHECK_EQ_INT(a, b)                                                              \
    do {                                                                                     \
        long long unit_a_ = (long long)(a), unit_b_ = (long long)(b);                        \
        if (unit_a_ != unit_b_)                                                              \
            unit_fail(__FILE__, __LINE__, "%s == %s failed: %lld != %lld", #a, #b, unit_a_, unit_b_); \
    } while (0)

#define UNIT_CHECK_STR_CONTAINS(hay, needle)                                                 \
    do {                                                                                     \
        const char *unit_h_ = (hay), *unit_n_ = (needle);                                    \
        if (!unit_h_ || !strstr(unit_h_, unit_n_))                                           \
            unit_fail(__FILE__, __LINE__, "'%s' does not contain '%s'", unit_h_ ? unit_h_ : "(null)", unit_n_); \
    } while (0)

/* A scratch folder for the test's files (created on first use, removed at exit). */
const char *unit_tmpdir(void);

#endif
