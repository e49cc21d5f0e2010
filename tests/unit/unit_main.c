/*
 * unit_main.c: runs the registered unit tests (see unit.h).
 */

#include "unit.h"

#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_TESTS 1024

static struct {
    const char *name;
    unit_fn fn;
} tests[MAX_TESTS];
static int n_tests;
static int current_failures;

void unit_register(const char *name, unit_fn fn)
{
    if (n_tests < MAX_TESTS) {
        tests[n_tests].name = name;
        tests[n_tests].fn = fn;
        n_tests++;
    }
}

void unit_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
    current_failures++;
}

static char tmpdir[256];

static void remove_tmpdir(void)
{
    if (tmpdir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
}

const char *unit_tmpdir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/kiln-unit-XXXXXX");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (int i = 0; i < n_tests; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
        current_failures = 0;
        tests[i].fn();
        if (current_failures) {
            printf("FAIL  %s\n", tests[i].name);
            failed++;
        } else {
            printf("ok    %s\n", tests[i].name);
            passed++;
        }
        fflush(stdout);
    }
    printf("unit: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
