/*
 * build.c: turns generated C into the shared object an artifact carries:
 * writes the source and the kernel templates into a scratch folder, runs
 * the system C compiler (-O3, the build machine's ISA), links. Compiled
 * kernel templates are cached by content, compiler and flags, so only the
 * model's own code is compiled on every build. A compiler error is shown
 * with the offending generated lines.
 */
#include "target/c/c-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The ISA is an x86-64 psABI level, not -march=native, so the code needs
 * exactly what the artifact's ISA string says and the runtime's check is
 * complete (c_isa_level). */
static const char *const cflags[] = {"-std=c11", "-O3", "-mtune=native", "-fPIC", "-fno-math-errno",
                                     "-ffp-contract=fast", "-fvisibility=hidden", "-w"};

const char *c_isa_level(const char **march)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) {
        *march = "-march=x86-64-v4";
        return "avx512";
    }
    if (__builtin_cpu_supports("x86-64-v3")) {
        *march = "-march=x86-64-v3";
        return "avx2";
    }
    *march = "-march=x86-64-v2";
    return "generic";
}

static kiln_status write_file(const char *path, const char *text, size_t n, base_diag *d)
{
    FILE *f = fopen(path, "wb");
    if (!f) return base_diag_add(d, KILN_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    size_t w = fwrite(text, 1, n, f);
    if (fclose(f) != 0 || w != n) return base_diag_add(d, KILN_ERR_IO, "cannot write '%s'", path);
    return KILN_OK;
}

/* Runs argv with stdout+stderr into log; returns the exit status (-1: could not run). */
static int run(char *const *argv, const char *log)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = len >= 0 ? base_malloc((size_t)len + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        base_free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[len] = 0;
        *n = (size_t)len;
    }
    return buf;
}

/* The compiler's messages, each error followed by the generated line it
 * points at. */
static void report_compile_error(const char *log, const char *src, base_diag *d)
{
    size_t n;
    char *text = read_all(log, &n);
    if (!text) {
        base_diag_add(d, KILN_ERR_INTERNAL, "the C compiler failed (no output)");
        return;
    }
    base_diag_add(d, KILN_ERR_INTERNAL, "the C compiler rejected kiln's generated code (a bug in kiln):");
    int shown = 0;
    for (char *line = strtok(text, "\n"); line && shown < 20; line = strtok(NULL, "\n")) {
        base_diag_add(d, KILN_ERR_INTERNAL, "  %s", line);
        const char *m = strstr(line, "model.c:");
        if (m && strstr(line, "error")) {
            long ln = strtol(m + 8, NULL, 10);
            const char *p = src;
            for (long i = 1; i < ln && p; i++) {
                p = strchr(p, '\n');
                if (p) p++;
            }
            if (p) {
                const char *e = strchr(p, '\n');
                base_diag_add(d, KILN_ERR_INTERNAL, "    generated line %ld: %.*s", ln, (int)(e ? e - p : 200), p);
            }
        }
        shown++;
    }
    base_free(text);
}

static const char *cache_dir(char *buf, size_t n)
{
    const char *env = getenv("KILN_CACHE_DIR");
    if (env && env[0]) snprintf(buf, n, "%s", env);
    else if (getenv("XDG_CACHE_HOME")) snprintf(buf, n, "%s/kiln", getenv("XDG_CACHE_HOME"));
    else if (getenv("HOME")) snprintf(buf, n, "%s/.cache/kiln", getenv("HOME"));
    else return NULL;
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", buf);
    for (char *p = tmp + 1; *p; p++) { /* mkdir -p */
        if (*p != '/') continue;
        *p = 0;
        mkdir(tmp, 0755);
        *p = '/';
    }
    mkdir(tmp, 0755);
    struct stat st;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? buf : NULL;
}

kiln_status c_build_shared_object(const char *src, const target_options *o, void **so, size_t *n, base_diag *d)
{
    *so = NULL;
    *n = 0;
    const char *cc = o->cc ? o->cc : getenv("CC") ? getenv("CC") : "cc";
    char dir[] = "/tmp/kiln-build-XXXXXX";
    if (!mkdtemp(dir)) return base_diag_add(d, KILN_ERR_IO, "cannot make a build folder: %s", strerror(errno));
    kiln_status st = KILN_OK;
    char path[1200], obj_list[64][1200], log[1200];
    int n_objs = 0;
    /* the kernel templates, and a hash of everything they include */
    const char *march;
    c_isa_level(&march);
    uint64_t hdr_hash = base_hash_str(cc);
    hdr_hash = base_hash_bytes(march, strlen(march), hdr_hash);
    for (size_t i = 0; i < KILN_COUNT(cflags); i++) hdr_hash = base_hash_bytes(cflags[i], strlen(cflags[i]), hdr_hash);
    for (int i = 0; i < c_kernel_sources_count && st == KILN_OK; i++) {
        const c_source *s = &c_kernel_sources[i];
        snprintf(path, sizeof(path), "%s/%s", dir, s->name);
        st = write_file(path, s->text, strlen(s->text), d);
        if (strstr(s->name, ".h")) hdr_hash = base_hash_bytes(s->text, strlen(s->text), hdr_hash);
        if (st == KILN_OK && o->emit_dir) {
            snprintf(path, sizeof(path), "%s/%s", o->emit_dir, s->name);
            st = write_file(path, s->text, strlen(s->text), d);
        }
    }
    snprintf(path, sizeof(path), "%s/model.c", dir);
    if (st == KILN_OK) st = write_file(path, src, strlen(src), d);
    if (st == KILN_OK && o->emit_dir) {
        snprintf(path, sizeof(path), "%s/model.c", o->emit_dir);
        st = write_file(path, src, strlen(src), d);
    }
    char cache[1024];
    const char *cdir = cache_dir(cache, sizeof(cache));
    /* compile each kernel template unless cached */
    for (int i = 0; i < c_kernel_sources_count && st == KILN_OK; i++) {
        const c_source *s = &c_kernel_sources[i];
        size_t len = strlen(s->name);
        if (len < 2 || strcmp(s->name + len - 2, ".c") != 0) continue;
        uint64_t h = base_hash_bytes(s->text, strlen(s->text), hdr_hash);
        char obj[1200];
        if (cdir) snprintf(obj, sizeof(obj), "%s/%.*s-%016llx.o", cdir, (int)len - 2, s->name, (unsigned long long)h);
        else snprintf(obj, sizeof(obj), "%s/%.*s.o", dir, (int)len - 2, s->name);
        if (access(obj, R_OK) != 0) {
            char srcp[1200], tmpo[1300];
            snprintf(srcp, sizeof(srcp), "%s/%s", dir, s->name);
            snprintf(tmpo, sizeof(tmpo), "%s.%d.tmp", obj, (int)getpid());
            snprintf(log, sizeof(log), "%s/%s.log", dir, s->name);
            char *argv[32];
            int k = 0;
            argv[k++] = (char *)cc;
            for (size_t f = 0; f < KILN_COUNT(cflags); f++) argv[k++] = (char *)cflags[f];
            argv[k++] = (char *)march;
            argv[k++] = "-c";
            argv[k++] = srcp;
            argv[k++] = "-o";
            argv[k++] = tmpo;
            argv[k] = NULL;
            int rc = run(argv, log);
            if (rc != 0) {
                st = base_diag_add(d, rc < 0 ? KILN_ERR_IO : KILN_ERR_INTERNAL,
                                   "compiling kernel template %s with '%s' failed (exit %d)", s->name, cc, rc);
                report_compile_error(log, "", d);
                break;
            }
            if (rename(tmpo, obj) != 0) {
                st = base_diag_add(d, KILN_ERR_IO, "cannot store '%s': %s", obj, strerror(errno));
                break;
            }
        }
        if (n_objs < 64) snprintf(obj_list[n_objs++], sizeof(obj_list[0]), "%s", obj);
    }
    /* the model's code, then the link */
    if (st == KILN_OK) {
        char srcp[1200], objp[1200], sop[1200];
        snprintf(srcp, sizeof(srcp), "%s/model.c", dir);
        snprintf(objp, sizeof(objp), "%s/model.o", dir);
        snprintf(sop, sizeof(sop), "%s/model.so", dir);
        snprintf(log, sizeof(log), "%s/model.log", dir);
        char *argv[96];
        int k = 0;
        argv[k++] = (char *)cc;
        for (size_t f = 0; f < KILN_COUNT(cflags); f++) argv[k++] = (char *)cflags[f];
        argv[k++] = (char *)march;
        argv[k++] = "-O2"; /* the model's own code: big and simple; -O2 compiles faster */
        argv[k++] = "-c";
        argv[k++] = srcp;
        argv[k++] = "-o";
        argv[k++] = objp;
        argv[k] = NULL;
        int rc = run(argv, log);
        if (rc != 0) {
            if (rc < 0) st = base_diag_add(d, KILN_ERR_IO, "cannot run the C compiler '%s'", cc);
            else {
                report_compile_error(log, src, d);
                st = KILN_ERR_INTERNAL;
            }
        } else {
            k = 0;
            argv[k++] = (char *)cc;
            argv[k++] = "-shared";
            argv[k++] = "-o";
            argv[k++] = sop;
            argv[k++] = objp;
            for (int i = 0; i < n_objs; i++) argv[k++] = obj_list[i];
            argv[k++] = "-lm";
            argv[k] = NULL;
            rc = run(argv, log);
            if (rc != 0) {
                report_compile_error(log, src, d);
                st = KILN_ERR_INTERNAL;
            } else {
                char *bytes = read_all(sop, n);
                if (!bytes) st = base_diag_add(d, KILN_ERR_IO, "cannot read the built code");
                *so = bytes;
            }
        }
    }
    /* clean the scratch folder */
    for (int i = 0; i < c_kernel_sources_count; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, c_kernel_sources[i].name);
        unlink(path);
        snprintf(path, sizeof(path), "%s/%s.log", dir, c_kernel_sources[i].name);
        unlink(path);
        size_t len = strlen(c_kernel_sources[i].name);
        snprintf(path, sizeof(path), "%s/%.*s.o", dir, (int)len - 2, c_kernel_sources[i].name);
        unlink(path);
    }
    const char *leftovers[] = {"model.c", "model.o", "model.so", "model.log"};
    for (size_t i = 0; i < KILN_COUNT(leftovers); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, leftovers[i]);
        unlink(path);
    }
    rmdir(dir);
    return st;
}
