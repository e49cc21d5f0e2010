/*
 * cases.c: walking ONNX backend test cases (cases.h).
 */
#include "cases.h"

#include "onnx/onnx.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int cases_list_dirs(const char *dir, const char *prefix, char ***out)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 64;
    char **names = malloc((size_t)cap * sizeof(char *));
    struct dirent *de;
    while (names && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (prefix && strncmp(de->d_name, prefix, strlen(prefix)) != 0) continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (n == cap) {
            char **more = realloc(names, (size_t)(cap *= 2) * sizeof(char *));
            if (!more) break;
            names = more;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (!names) return -1;
    qsort(names, (size_t)n, sizeof(char *), cmp_names);
    *out = names;
    return n;
}

void cases_free_names(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int cases_read_set(const char *dir, const char *kind, ir_tensor *ts, int max, base_diag *d)
{
    int n = 0;
    for (; n < max; n++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s_%d.pb", dir, kind, n);
        if (access(path, R_OK) != 0) break;
        if (onnx_read_tensor_file(path, &ts[n], NULL, d) != KILN_OK) return -1;
    }
    return n;
}

int cases_run_isolated(int (*run)(const char *case_dir, char *why, size_t n), const char *case_dir, int timeout_s,
                       int fail_code, char *why, size_t n)
{
    int fds[2];
    if (pipe(fds) != 0) return run(case_dir, why, n);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm((unsigned)timeout_s);
        char buf[4096] = {0};
        int rc = run(case_dir, buf, sizeof(buf));
        ssize_t w = write(fds[1], buf, strlen(buf));
        (void)w;
        _exit(rc);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fds[0], why + got, n - 1 - got)) > 0) got += (size_t)r;
    why[got] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        snprintf(why, n, WTERMSIG(status) == SIGALRM ? "timed out after %d s" : "crashed (signal %d)",
                 WTERMSIG(status) == SIGALRM ? timeout_s : WTERMSIG(status));
        return fail_code;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : fail_code;
}
