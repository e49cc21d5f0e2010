/*
 * cases.c: walking ONNX backend test cases (cases.h).
 */
#include "cases.h"

#include "onnx/onnx.h"

#include <dirent.h>
#include <stdint.h>
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

/* ---- a child that runs many cases ------------------------------------------------- */

struct cases_worker {
    int (*run)(const char *case_dir, char *why, size_t n);
    int timeout_s, fail_code;
    pid_t pid;          /* 0: no child now */
    int to_child, from_child;
};

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The child: reads a length and a case folder, runs it under an alarm,
 * answers rc, a length and the reason; ends when the parent closes the pipe. */
static void worker_loop(cases_worker *w, int in, int out)
{
    char dir[4096], why[4096];
    uint32_t len;
    while (read_all(in, &len, sizeof(len)) == 0 && len < sizeof(dir) && read_all(in, dir, len) == 0) {
        dir[len] = 0;
        why[0] = 0;
        alarm((unsigned)w->timeout_s);
        int32_t rc = w->run(dir, why, sizeof(why));
        alarm(0);
        fflush(stdout);
        fflush(stderr);
        uint32_t wl = (uint32_t)strlen(why);
        if (write_all(out, &rc, sizeof(rc)) || write_all(out, &wl, sizeof(wl)) || write_all(out, why, wl)) break;
    }
    _exit(0);
}

cases_worker *cases_worker_new(int (*run)(const char *case_dir, char *why, size_t n), int timeout_s, int fail_code)
{
    cases_worker *w = calloc(1, sizeof(*w));
    if (!w) return NULL;
    w->run = run;
    w->timeout_s = timeout_s;
    w->fail_code = fail_code;
    signal(SIGPIPE, SIG_IGN); /* a dead child shows as a failed write */
    return w;
}

/* Reaps the child; why gets how it died when it did not exit cleanly. */
static void worker_reap(cases_worker *w, char *why, size_t n)
{
    close(w->to_child);
    close(w->from_child);
    int status = 0;
    waitpid(w->pid, &status, 0);
    w->pid = 0;
    if (!why) return;
    if (WIFSIGNALED(status))
        snprintf(why, n, WTERMSIG(status) == SIGALRM ? "timed out after %d s" : "crashed (signal %d)",
                 WTERMSIG(status) == SIGALRM ? w->timeout_s : WTERMSIG(status));
    else snprintf(why, n, "the worker process exited (status %d) during the case", WEXITSTATUS(status));
}

static int worker_spawn(cases_worker *w)
{
    int down[2], up[2];
    if (pipe(down) != 0) return -1;
    if (pipe(up) != 0) {
        close(down[0]);
        close(down[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(down[0]);
        close(down[1]);
        close(up[0]);
        close(up[1]);
        return -1;
    }
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        worker_loop(w, down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    w->pid = pid;
    w->to_child = down[1];
    w->from_child = up[0];
    return 0;
}

int cases_worker_run(cases_worker *w, const char *case_dir, char *why, size_t n)
{
    why[0] = 0;
    uint32_t len = (uint32_t)strlen(case_dir);
    if (len >= 4096) {
        snprintf(why, n, "case folder name too long");
        return w->fail_code;
    }
    if (!w->pid && worker_spawn(w) != 0) return cases_run_isolated(w->run, case_dir, w->timeout_s, w->fail_code, why, n);
    int32_t rc;
    uint32_t wl;
    if (write_all(w->to_child, &len, sizeof(len)) || write_all(w->to_child, case_dir, len) ||
        read_all(w->from_child, &rc, sizeof(rc)) || read_all(w->from_child, &wl, sizeof(wl))) {
        worker_reap(w, why, n);
        return w->fail_code;
    }
    char buf[4096];
    if (wl >= sizeof(buf) || read_all(w->from_child, buf, wl)) {
        worker_reap(w, why, n);
        return w->fail_code;
    }
    buf[wl] = 0;
    snprintf(why, n, "%s", buf);
    return rc;
}

void cases_worker_free(cases_worker *w)
{
    if (!w) return;
    if (w->pid) worker_reap(w, NULL, 0);
    free(w);
}
