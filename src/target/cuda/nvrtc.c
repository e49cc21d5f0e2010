/*
 * nvrtc.c: generated CUDA C -> cubin, through NVRTC opened at run time
 * (see nvrtc.h). The cuda target's build step: what build.c is to the c
 * target, with the system C compiler replaced by the CUDA toolkit's
 * run-time compiler, which needs no GPU.
 *
 * NVRTC is looked up by soname (13, then 12, then the unversioned name),
 * then in $CUDA_HOME/lib64 and /usr/local/cuda/lib64. The toolkit's headers
 * (cuda_fp16.h and what it includes) are looked up beside the library first,
 * so headers and compiler come from the same release.
 */
#include "target/cuda/nvrtc.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- NVRTC's types and entry points (from nvrtc.h; not included, since a
 * machine running kiln need not have the toolkit) ---------------------------- */

typedef int nvrtcResult; /* NVRTC_SUCCESS = 0 */
typedef struct _nvrtcProgram *nvrtcProgram;
enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_OUT_OF_MEMORY = 1, NVRTC_ERROR_COMPILATION = 6 };

static struct nvrtc_api {
    const char *(*nvrtcGetErrorString)(nvrtcResult r);
    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name, int n_headers,
                                      const char *const *headers, const char *const *include_names);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int n_options, const char *const *options);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *n);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *n);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
} nv;

#define ENTRY(member) {#member, offsetof(struct nvrtc_api, member)}
static const struct {
    const char *symbol;
    size_t offset;
} entry_points[] = {
    ENTRY(nvrtcGetErrorString), ENTRY(nvrtcVersion),      ENTRY(nvrtcCreateProgram),
    ENTRY(nvrtcDestroyProgram), ENTRY(nvrtcCompileProgram), ENTRY(nvrtcGetProgramLogSize),
    ENTRY(nvrtcGetProgramLog),  ENTRY(nvrtcGetCUBINSize), ENTRY(nvrtcGetCUBIN),
};
#undef ENTRY
_Static_assert(sizeof(entry_points) / sizeof(entry_points[0]) == sizeof(nv) / sizeof(void (*)(void)),
               "every NVRTC entry point has a row");

/* Checks one NVRTC call, naming it with file and line, as KILN_CU_CHECK does
 * for the driver. */
#define NVRTC_CHECK(d, call) check((call), #call, __FILE__, __LINE__, (d))

static kiln_status check(nvrtcResult r, const char *call, const char *file, int line, base_diag *d)
{
    if (r == NVRTC_SUCCESS) return KILN_OK;
    kiln_status st = r == NVRTC_ERROR_OUT_OF_MEMORY ? KILN_ERR_OOM : KILN_ERR_INTERNAL;
    return base_diag_add(d, st, "%s failed at %s:%d: %s", call, file, line, nv.nvrtcGetErrorString(r));
}

/* ---- opening ------------------------------------------------------------------- */

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static bool open_done, open_ok;
static char include_dir[PATH_MAX]; /* "" when no toolkit headers were found */

/* out = a + b + c; false when that does not fit in PATH_MAX. */
static bool join(char out[PATH_MAX], const char *a, const char *b, const char *c)
{
    int n = snprintf(out, PATH_MAX, "%s%s%s", a, b, c);
    return n >= 0 && n < PATH_MAX;
}

static void *open_library(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    for (size_t i = 0; i < KILN_COUNT(names); i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    const char *home = getenv("CUDA_HOME");
    const char *dirs[] = {home && home[0] ? home : NULL, "/usr/local/cuda"};
    for (size_t k = 0; k < KILN_COUNT(dirs); k++) {
        if (!dirs[k]) continue;
        for (size_t i = 0; i < KILN_COUNT(names); i++) {
            char path[PATH_MAX];
            if (!join(path, dirs[k], "/lib64/", names[i])) continue;
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
        }
    }
    return NULL;
}

static bool has_fp16_header(const char *dir)
{
    char path[PATH_MAX];
    return join(path, dir, "/cuda_fp16.h", "") && access(path, R_OK) == 0;
}

/* The toolkit's include folder: beside the loaded library first (same
 * release as the compiler), then $CUDA_HOME, then /usr/local/cuda. */
static void find_include_dir(void)
{
    char dir[PATH_MAX];
    Dl_info info;
    if (dladdr((void *)nv.nvrtcVersion, &info) && info.dli_fname) {
        char lib[PATH_MAX];
        if (realpath(info.dli_fname, lib)) {
            char *slash = strrchr(lib, '/');
            if (slash) *slash = 0;
            if (join(dir, lib, "/../include", "") && has_fp16_header(dir) && realpath(dir, include_dir)) return;
        }
    }
    const char *home = getenv("CUDA_HOME");
    if (home && home[0] && join(dir, home, "/include", "") && has_fp16_header(dir)) {
        memcpy(include_dir, dir, sizeof(dir));
        return;
    }
    if (has_fp16_header("/usr/local/cuda/include")) join(include_dir, "/usr/local/cuda/include", "", "");
}

static kiln_status nvrtc_open(base_diag *d)
{
    pthread_mutex_lock(&open_lock);
    if (!open_done) {
        open_done = true;
        void *h = open_library();
        bool complete = h != NULL;
        for (size_t i = 0; complete && i < KILN_COUNT(entry_points); i++) {
            void *sym = dlsym(h, entry_points[i].symbol);
            if (!sym) complete = false;
            /* POSIX guarantees a data pointer from dlsym converts to a function pointer */
            else memcpy((char *)&nv + entry_points[i].offset, &sym, sizeof(sym));
        }
        if (complete) {
            open_ok = true;
            find_include_dir();
        } else if (h) {
            memset(&nv, 0, sizeof(nv));
            dlclose(h);
        }
    }
    bool ok = open_ok;
    pthread_mutex_unlock(&open_lock);
    if (ok) return KILN_OK;
    return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                         "NVRTC not found (install the CUDA toolkit's nvrtc): looked for libnvrtc.so.13, "
                         "libnvrtc.so.12 and libnvrtc.so on the library path, in $CUDA_HOME/lib64 and in "
                         "/usr/local/cuda/lib64");
}

int cg_nvrtc_version(void)
{
    int major = 0, minor = 0;
    if (nvrtc_open(NULL) != KILN_OK) return 0;
    if (NVRTC_CHECK(NULL, nv.nvrtcVersion(&major, &minor)) != KILN_OK) return 0;
    return major * 1000 + minor * 10;
}

/* ---- compiling ------------------------------------------------------------------- */

/* Line ln (1-based) of src, as a pointer and a length; NULL when src is shorter. */
static const char *source_line(const char *src, long ln, int *len)
{
    const char *p = src;
    for (long i = 1; i < ln && p; i++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p || ln < 1 || !*p) return NULL;
    const char *e = strchr(p, '\n');
    *len = e ? (int)(e - p) : (int)strlen(p);
    return p;
}

/* NVRTC's log, and for each "NAME(LINE): error" in it the generated line. */
static void report_compile_error(const char *log, const char *src, const char *name, base_diag *d)
{
    base_diag_add(d, KILN_ERR_INTERNAL, "NVRTC rejected the generated CUDA code '%s' (a bug in kiln):", name);
    size_t name_len = strlen(name);
    int shown = 0;
    for (const char *line = log; *line && shown < 40; shown++) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        if (len > 0) base_diag_add(d, KILN_ERR_INTERNAL, "  %.*s", len, line);
        if (strncmp(line, name, name_len) == 0 && line[name_len] == '(') {
            char *after;
            long ln = strtol(line + name_len + 1, &after, 10);
            const char *err = strstr(line, "error");
            if (after[0] == ')' && err && err < line + len) {
                int n;
                const char *text = source_line(src, ln, &n);
                if (text) base_diag_add(d, KILN_ERR_INTERNAL, "    generated line %ld: %.*s", ln, n, text);
            }
        }
        line = end ? end + 1 : line + len;
    }
}

/* A mangled name's last component (_ZN<len><id>...<len><id>E...), or the
 * name itself: [*at, *at + *len) of name. */
static void short_name(const char *name, int name_len, const char **at, int *len)
{
    *at = name;
    *len = name_len;
    if (name_len < 4 || strncmp(name, "_ZN", 3) != 0) return;
    const char *p = name + 3, *end = name + name_len;
    while (p < end && isdigit((unsigned char)*p)) {
        char *after;
        long n = strtol(p, &after, 10);
        if (n <= 0 || n > end - after) return;
        *at = after;
        *len = (int)n;
        p = after + n;
    }
}

int cg_nvrtc_spills(const char *log, base_str *out)
{
    static const char key[] = "Registers are spilled to local memory in function '";
    int count = 0;
    for (const char *line = log; line && *line;) {
        const char *nl = strchr(line, '\n');
        const int len = nl ? (int)(nl - line) : (int)strlen(line);
        /* every search inside this line: [line, line + len) */
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", len, line);
        const char *p = strstr(buf, key), *q = p ? strchr(p + sizeof(key) - 1, '\'') : NULL;
        if (q) {
            p += sizeof(key) - 1;
            const char *at;
            int n;
            short_name(p, (int)(q - p), &at, &n);
            long stores = 0, loads = 0;
            if (sscanf(q, "', %ld bytes spill stores, %ld bytes spill loads", &stores, &loads) < 1) stores = 0;
            base_str_printf(out, "%s%.*s (%ld bytes stored, %ld loaded)", count ? "; " : "", n, at, stores, loads);
            count++;
        }
        line = nl ? nl + 1 : NULL;
    }
    return count;
}

/* prog's log (NUL-terminated; free with base_free) into *log. */
static kiln_status program_log(nvrtcProgram prog, char **log, base_diag *d)
{
    size_t log_n = 0;
    *log = NULL;
    KILN_TRY(NVRTC_CHECK(d, nv.nvrtcGetProgramLogSize(prog, &log_n)));
    if (!(*log = base_malloc(log_n + 1))) return base_diag_add(d, KILN_ERR_OOM, "out of memory for NVRTC's log");
    kiln_status st = NVRTC_CHECK(d, nv.nvrtcGetProgramLog(prog, *log));
    (*log)[st == KILN_OK ? log_n : 0] = 0;
    return st;
}

kiln_status cg_nvrtc_compile(const char *src, const char *name, int sm_major, int sm_minor, bool arch_specific,
                             void **cubin, size_t *n, base_diag *d)
{
    return cg_nvrtc_compile_spills(src, name, sm_major, sm_minor, arch_specific, cubin, n, NULL, d);
}

kiln_status cg_nvrtc_compile_spills(const char *src, const char *name, int sm_major, int sm_minor, bool arch_specific,
                                    void **cubin, size_t *n, base_str *spills, base_diag *d)
{
    *cubin = NULL;
    *n = 0;
    KILN_TRY(nvrtc_open(d));
    if (sm_major < 1 || sm_minor < 0 || sm_minor > 9)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad compute capability %d.%d", sm_major, sm_minor);
    char arch[64], inc[PATH_MAX];
    snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d%d%s", sm_major, sm_minor, arch_specific ? "a" : "");
    const char *options[5];
    int n_options = 0;
    options[n_options++] = arch;
    options[n_options++] = "--device-as-default-execution-space";
    if (include_dir[0] && join(inc, "--include-path=", include_dir, "")) options[n_options++] = inc;
    if (spills) options[n_options++] = "--ptxas-options=--warn-on-spills";

    nvrtcProgram prog = NULL;
    KILN_TRY(NVRTC_CHECK(d, nv.nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL)));
    nvrtcResult r = nv.nvrtcCompileProgram(prog, n_options, options);
    kiln_status st = KILN_OK;
    char *log = NULL;
    if (r == NVRTC_ERROR_COMPILATION) {
        if (program_log(prog, &log, d) == KILN_OK) report_compile_error(log, src, name, d);
        st = KILN_ERR_INTERNAL;
    } else {
        st = NVRTC_CHECK(d, r);
    }
    if (st == KILN_OK && spills) {
        st = program_log(prog, &log, d);
        if (st == KILN_OK) cg_nvrtc_spills(log, spills);
        if (st == KILN_OK && spills->oom) st = base_diag_add(d, KILN_ERR_OOM, "out of memory for NVRTC's spill report");
    }
    base_free(log);
    size_t size = 0;
    if (st == KILN_OK) st = NVRTC_CHECK(d, nv.nvrtcGetCUBINSize(prog, &size));
    if (st == KILN_OK && size == 0) st = base_diag_add(d, KILN_ERR_INTERNAL, "NVRTC produced no cubin for %s", arch);
    if (st == KILN_OK) {
        *cubin = base_malloc(size);
        if (!*cubin) st = base_diag_add(d, KILN_ERR_OOM, "out of memory for a %zu-byte cubin", size);
    }
    if (st == KILN_OK) st = NVRTC_CHECK(d, nv.nvrtcGetCUBIN(prog, *cubin));
    if (st == KILN_OK) *n = size;
    else {
        base_free(*cubin);
        *cubin = NULL;
    }
    NVRTC_CHECK(NULL, nv.nvrtcDestroyProgram(&prog));
    return st;
}
