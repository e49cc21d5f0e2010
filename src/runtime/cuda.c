/*
 * cuda.c: the CUDA driver API opened at run time (see cuda.h).
 *
 * kiln links no CUDA library: the first rt_cuda_open loads libcuda.so.1
 * (installed with the NVIDIA driver, not the toolkit), fills the entry-point
 * table below and runs cuInit. A machine without the driver, or with a
 * driver and no GPU, gets KILN_ERR_NO_DEVICE and a message saying which;
 * the outcome is kept, so later calls cost a mutex. The wrappers below turn
 * each driver error into a kiln_status through KILN_CU_CHECK.
 */
#include "runtime/cuda.h"
#include "runtime/gprog.h"

#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every entry point and the symbol the driver exports it under. */
#define ENTRY(member, symbol) {symbol, offsetof(rt_cuda_api, member)}
static const struct {
    const char *symbol;
    size_t offset;
} entry_points[] = {
    ENTRY(cuInit, "cuInit"),
    ENTRY(cuDriverGetVersion, "cuDriverGetVersion"),
    ENTRY(cuGetErrorName, "cuGetErrorName"),
    ENTRY(cuGetErrorString, "cuGetErrorString"),
    ENTRY(cuDeviceGetCount, "cuDeviceGetCount"),
    ENTRY(cuDeviceGet, "cuDeviceGet"),
    ENTRY(cuDeviceGetName, "cuDeviceGetName"),
    ENTRY(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    ENTRY(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
    ENTRY(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    ENTRY(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    ENTRY(cuCtxSetCurrent, "cuCtxSetCurrent"),
    ENTRY(cuCtxSynchronize, "cuCtxSynchronize"),
    ENTRY(cuModuleLoadData, "cuModuleLoadData"),
    ENTRY(cuModuleUnload, "cuModuleUnload"),
    ENTRY(cuModuleGetFunction, "cuModuleGetFunction"),
    ENTRY(cuModuleGetGlobal, "cuModuleGetGlobal_v2"),
    ENTRY(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled"),
    ENTRY(cuTensorMapEncodeIm2col, "cuTensorMapEncodeIm2col"),
    ENTRY(cuFuncSetAttribute, "cuFuncSetAttribute"),
    ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    ENTRY(cuLaunchKernel, "cuLaunchKernel"),
    ENTRY(cuLaunchKernelEx, "cuLaunchKernelEx"),
    ENTRY(cuMemAlloc, "cuMemAlloc_v2"),
    ENTRY(cuMemFree, "cuMemFree_v2"),
    ENTRY(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    ENTRY(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    ENTRY(cuMemsetD8, "cuMemsetD8_v2"),
    ENTRY(cuStreamCreate, "cuStreamCreate"),
    ENTRY(cuStreamDestroy, "cuStreamDestroy_v2"),
    ENTRY(cuStreamSynchronize, "cuStreamSynchronize"),
    ENTRY(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
    ENTRY(cuStreamEndCapture, "cuStreamEndCapture"),
    ENTRY(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    ENTRY(cuGraphLaunch, "cuGraphLaunch"),
    ENTRY(cuGraphExecDestroy, "cuGraphExecDestroy"),
    ENTRY(cuGraphDestroy, "cuGraphDestroy"),
    ENTRY(cuMemHostAlloc, "cuMemHostAlloc"),
    ENTRY(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
    ENTRY(cuMemFreeHost, "cuMemFreeHost"),
    ENTRY(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    ENTRY(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    ENTRY(cuEventCreate, "cuEventCreate"),
    ENTRY(cuEventRecord, "cuEventRecord"),
    ENTRY(cuEventElapsedTime, "cuEventElapsedTime"),
    ENTRY(cuEventDestroy, "cuEventDestroy_v2"),
    ENTRY(cuEventSynchronize, "cuEventSynchronize"),
    ENTRY(cuPointerGetAttribute, "cuPointerGetAttribute"),
};
#undef ENTRY
_Static_assert(sizeof(entry_points) / sizeof(entry_points[0]) == sizeof(rt_cuda_api) / sizeof(void (*)(void)),
               "every member of rt_cuda_api has a row in entry_points");

/* The outcome of the one real open, under open_lock. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static bool open_done;
static kiln_status open_status;
static char open_msg[512];
static rt_cuda_api api;
static const rt_cuda_api *cu; /* &api once the driver is up */

/* ---- errors ------------------------------------------------------------------ */

kiln_status rt_cuda_status(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return KILN_OK;
    case CUDA_ERROR_OUT_OF_MEMORY: return KILN_ERR_OOM;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return KILN_ERR_NO_DEVICE;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NOT_FOUND: return KILN_ERR_INVALID_ARG;
    /* code built for another GPU generation */
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return KILN_ERR_UNSUPPORTED;
    default: return KILN_ERR_INTERNAL;
    }
}

/* "CUDA_ERROR_X (text)", from the driver when it is loaded. */
static void error_text(CUresult r, char *buf, size_t n)
{
    const char *name = NULL, *text = NULL;
    if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
    if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
    if (name && text) snprintf(buf, n, "%s (%s)", name, text);
    else if (name) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "CUDA error %d", r);
}

kiln_status rt_cuda_check(CUresult r, const char *call, const char *file, int line, base_diag *d)
{
    if (r == CUDA_SUCCESS) return KILN_OK;
    char text[256];
    error_text(r, text, sizeof(text));
    return base_diag_add(d, rt_cuda_status(r), "%s failed at %s:%d: %s", call, file, line, text);
}

/* ---- driver and devices -------------------------------------------------------- */

/* Loads the driver into api; on failure sets open_msg and returns the status. */
static kiln_status load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(open_msg, sizeof(open_msg), "no NVIDIA driver (libcuda.so.1 not found)");
        return KILN_ERR_NO_DEVICE;
    }
    for (size_t i = 0; i < KILN_COUNT(entry_points); i++) {
        void *sym = dlsym(h, entry_points[i].symbol);
        if (!sym) {
            snprintf(open_msg, sizeof(open_msg), "the NVIDIA driver is too old for kiln (libcuda.so.1 lacks %s)",
                     entry_points[i].symbol);
            memset(&api, 0, sizeof(api));
            dlclose(h);
            return KILN_ERR_NO_DEVICE;
        }
        /* POSIX guarantees a data pointer from dlsym converts to a function pointer */
        memcpy((char *)&api + entry_points[i].offset, &sym, sizeof(sym));
    }
    CUresult r = api.cuInit(0);
    if (r != CUDA_SUCCESS) {
        char text[256];
        error_text(r, text, sizeof(text));
        snprintf(open_msg, sizeof(open_msg), "the NVIDIA driver offers no usable GPU: cuInit gave %s", text);
        memset(&api, 0, sizeof(api));
        dlclose(h);
        /* whatever the reason, the GPU cannot be used */
        return KILN_ERR_NO_DEVICE;
    }
    return KILN_OK; /* the handle stays open for the life of the process */
}

kiln_status rt_cuda_open(base_diag *d)
{
    pthread_mutex_lock(&open_lock);
    if (!open_done) {
        open_status = load_driver();
        if (open_status == KILN_OK) cu = &api;
        open_done = true;
    }
    kiln_status st = open_status;
    pthread_mutex_unlock(&open_lock);
    if (st != KILN_OK) base_diag_add(d, st, "%s", open_msg);
    return st;
}

const rt_cuda_api *rt_cuda_api_get(void)
{
    pthread_mutex_lock(&open_lock);
    const rt_cuda_api *a = cu;
    pthread_mutex_unlock(&open_lock);
    return a;
}

int rt_cuda_device_count(void)
{
    int n = 0;
    if (rt_cuda_open(NULL) != KILN_OK) return 0;
    if (KILN_CU_CHECK(NULL, cu->cuDeviceGetCount(&n)) != KILN_OK) return 0;
    return n;
}

kiln_status rt_cuda_device_info(int dev, rt_cuda_device *out, base_diag *d)
{
    memset(out, 0, sizeof(*out));
    KILN_TRY(rt_cuda_open(d));
    int n = rt_cuda_device_count();
    if (dev < 0 || dev >= n)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "no CUDA device %d (there are %d)", dev, n);
    CUdevice h;
    KILN_TRY(KILN_CU_CHECK(d, cu->cuDeviceGet(&h, dev)));
    KILN_TRY(KILN_CU_CHECK(d, cu->cuDeviceGetName(out->name, (int)sizeof(out->name), h)));
    static const struct {
        int attribute;
        size_t offset;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(rt_cuda_device, sm_major)},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(rt_cuda_device, sm_minor)},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(rt_cuda_device, n_sms)},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, offsetof(rt_cuda_device, max_threads_per_sm)},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(rt_cuda_device, l2_bytes)},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, offsetof(rt_cuda_device, smem_per_sm_bytes)},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(rt_cuda_device, smem_per_block_optin_bytes)},
    };
    for (size_t i = 0; i < KILN_COUNT(attrs); i++) {
        int *field = (int *)((char *)out + attrs[i].offset);
        KILN_TRY(KILN_CU_CHECK(d, cu->cuDeviceGetAttribute(field, attrs[i].attribute, h)));
    }
    KILN_TRY(KILN_CU_CHECK(d, cu->cuDeviceTotalMem(&out->mem_bytes, h)));
    KILN_TRY(KILN_CU_CHECK(d, cu->cuDriverGetVersion(&out->driver_version)));
    return KILN_OK;
}

/* ---- contexts ---------------------------------------------------------------- */

/* From here on the wrappers run only after rt_cuda_open succeeded (their
 * caller holds a context or a handle): KILN_ASSERT(cu) says so. The frees
 * take null handles at any time. */

kiln_status rt_cuda_ctx_init(int dev, rt_cuda_ctx *out, base_diag *d)
{
    memset(out, 0, sizeof(*out));
    KILN_TRY(rt_cuda_open(d));
    int n = rt_cuda_device_count();
    if (dev < 0 || dev >= n)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "no CUDA device %d (there are %d)", dev, n);
    KILN_TRY(KILN_CU_CHECK(d, cu->cuDeviceGet(&out->dev, dev)));
    KILN_TRY(KILN_CU_CHECK(d, cu->cuDevicePrimaryCtxRetain(&out->ctx, out->dev)));
    kiln_status st = KILN_CU_CHECK(d, cu->cuCtxSetCurrent(out->ctx));
    if (st != KILN_OK) rt_cuda_ctx_free(out);
    return st;
}

void rt_cuda_ctx_free(rt_cuda_ctx *c)
{
    if (!c->ctx) return;
    KILN_CU_CHECK(NULL, cu->cuDevicePrimaryCtxRelease(c->dev));
    c->ctx = NULL;
}

kiln_status rt_cuda_ctx_bind(const rt_cuda_ctx *c, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuCtxSetCurrent(c->ctx));
}

/* ---- modules and launches ------------------------------------------------------- */

/* cuModuleLoadData takes no size: check that the ELF headers, sections and
 * segments all lie inside the n bytes before the driver reads them. */
static kiln_status check_cubin(const unsigned char *p, size_t n, base_diag *d)
{
    Elf64_Ehdr eh;
    if (n < sizeof(eh) || memcmp(p, ELFMAG, SELFMAG) != 0 || p[EI_CLASS] != ELFCLASS64)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "not a cubin: no 64-bit ELF header in its %zu bytes", n);
    memcpy(&eh, p, sizeof(eh));
    if (eh.e_shnum == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > n ||
        (n - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum || eh.e_shstrndx >= eh.e_shnum)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad cubin: section table outside its %zu bytes", n);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, p + eh.e_shoff + (size_t)i * sizeof(sh), sizeof(sh));
        if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > n || sh.sh_size > n - sh.sh_offset))
            return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad cubin: section %u outside its %zu bytes", i, n);
    }
    if (eh.e_phnum && (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > n ||
                       (n - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum))
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad cubin: segment table outside its %zu bytes", n);
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, p + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
        if (ph.p_offset > n || ph.p_filesz > n - ph.p_offset)
            return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad cubin: segment %u outside its %zu bytes", i, n);
    }
    return KILN_OK;
}

kiln_status rt_cuda_module_load(const void *cubin, size_t n, CUmodule *out, base_diag *d)
{
    *out = NULL;
    KILN_TRY(check_cubin(cubin, n, d));
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuModuleLoadData(out, cubin));
}

void rt_cuda_module_free(CUmodule m)
{
    if (m) KILN_CU_CHECK(NULL, cu->cuModuleUnload(m));
}

kiln_status rt_cuda_module_function(CUmodule m, const char *name, CUfunction *out, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *out = NULL;
    CUresult r = cu->cuModuleGetFunction(out, m, name);
    if (r == CUDA_ERROR_NOT_FOUND)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "the module has no kernel '%s' (is it extern \"C\"?)", name);
    return KILN_CU_CHECK(d, r);
}

kiln_status rt_cuda_module_global(CUmodule m, const char *name, CUdeviceptr *at, size_t *bytes, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    CUresult r = cu->cuModuleGetGlobal(at, bytes, m, name);
    if (r != CUDA_ERROR_NOT_FOUND) return KILN_CU_CHECK(d, r);
    *at = 0;
    *bytes = 0;
    return KILN_OK;
}

kiln_status rt_cuda_run_device(int *dev, base_diag *d)
{
    *dev = 0;
    const char *env = getenv("KILN_DEVICE");
    if (!env || !env[0]) return KILN_OK;
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v > 4096)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "KILN_DEVICE='%s' is not a device number", env);
    *dev = (int)v;
    return KILN_OK;
}

kiln_status rt_cuda_fill_tmaps(CUmodule m, const struct rt_gtmap *maps, int n, CUdeviceptr arena,
                               unsigned long long arena_bytes, CUdeviceptr weights, unsigned long long weight_bytes,
                               base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    if (n <= 0) return KILN_OK;
    CUdeviceptr at = 0;
    size_t bytes = 0;
    CUresult r = cu->cuModuleGetGlobal(&at, &bytes, m, "kg_tmaps");
    if (r == CUDA_ERROR_NOT_FOUND)
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the program has %d tensor maps but its module no kg_tmaps", n);
    KILN_TRY(KILN_CU_CHECK(d, r));
    if (bytes != (size_t)n * sizeof(CUtensorMap))
        return base_diag_add(d, KILN_ERR_INVALID_MODEL, "the module's kg_tmaps has %zu bytes, not %d tensor maps",
                             bytes, n);
    CUtensorMap *enc = base_calloc((size_t)n, sizeof(CUtensorMap));
    if (!enc) return base_diag_add(d, KILN_ERR_OOM, "out of memory for %d tensor maps", n);
    kiln_status st = KILN_OK;
    for (int i = 0; i < n && st == KILN_OK; i++) {
        const rt_gtmap *t = &maps[i];
        const char *why;
        if (!rt_gtmap_check(t, t->space ? weight_bytes : arena_bytes, &why)) {
            st = base_diag_add(d, KILN_ERR_INVALID_MODEL, "tensor map %d: %s", i, why);
            break;
        }
        void *base = (void *)(uintptr_t)((t->space ? weights : arena) + t->offset);
        int dt = t->dtype == KILN_GPREC_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
        if (t->im2col) {
            /* corners and steps W first, as the dimensions run */
            unsigned long long dims[4] = {t->dim0, t->dim1, t->dim2, t->dim3};
            unsigned long long strides[3] = {t->stride1, t->stride2, t->stride3};
            int lower[2] = {t->lower_w, t->lower_h}, upper[2] = {t->upper_w, t->upper_h};
            unsigned step[4] = {1, t->step_w, t->step_h, 1};
            st = KILN_CU_CHECK(d, cu->cuTensorMapEncodeIm2col(&enc[i], dt, 4, base, dims, strides, lower, upper,
                                                              t->box0, t->box1, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                              CU_TENSOR_MAP_SWIZZLE_128B,
                                                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
            continue;
        }
        unsigned long long dims[2] = {t->dim0, t->dim1}, strides[1] = {t->stride1};
        unsigned box[2] = {t->box0, t->box1}, step[2] = {1, 1};
        st = KILN_CU_CHECK(d, cu->cuTensorMapEncodeTiled(&enc[i], dt, 2, base, dims, strides, box, step,
                                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    }
    if (st == KILN_OK) st = KILN_CU_CHECK(d, cu->cuMemcpyHtoD(at, enc, (size_t)n * sizeof(CUtensorMap)));
    base_free(enc);
    return st;
}

kiln_status rt_cuda_function_set_smem(CUfunction fn, int smem_bytes, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                          smem_bytes));
}

kiln_status rt_cuda_occupancy(CUfunction fn, int block_size, size_t smem_bytes, int *blocks_per_sm, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *blocks_per_sm = 0;
    return KILN_CU_CHECK(d, cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, fn, block_size,
                                                                                   smem_bytes));
}

kiln_status rt_cuda_launch(CUfunction fn, unsigned n_blocks, unsigned block_size, unsigned smem_bytes, CUstream s,
                           void **args, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuLaunchKernel(fn, n_blocks, 1, 1, block_size, 1, 1, smem_bytes, s, args,
                                                      NULL));
}

kiln_status rt_cuda_launch_ex(CUfunction fn, unsigned n_blocks, unsigned block_size, unsigned smem_bytes, CUstream s,
                              void **args, bool early, base_diag *d)
{
    if (!early) return rt_cuda_launch(fn, n_blocks, block_size, smem_bytes, s, args, d);
    KILN_ASSERT(cu != NULL);
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
    attr.value.programmatic_stream_serialization_allowed = 1;
    CUlaunchConfig cfg = {.grid_x = n_blocks, .grid_y = 1, .grid_z = 1, .block_x = block_size, .block_y = 1,
                          .block_z = 1, .smem_bytes = smem_bytes, .stream = s, .attrs = &attr, .n_attrs = 1};
    return KILN_CU_CHECK(d, cu->cuLaunchKernelEx(&cfg, fn, args, NULL));
}

/* ---- memory and streams --------------------------------------------------------- */

kiln_status rt_cuda_alloc(size_t bytes, CUdeviceptr *out, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *out = 0;
    kiln_status st = KILN_CU_CHECK(d, cu->cuMemAlloc(out, bytes));
    if (st == KILN_ERR_OOM)
        base_diag_add(d, st, "(asked for %.1f GiB of device memory)", (double)bytes / (1024.0 * 1024.0 * 1024.0));
    return st;
}

void rt_cuda_free(CUdeviceptr p)
{
    if (p) KILN_CU_CHECK(NULL, cu->cuMemFree(p));
}

kiln_status rt_cuda_copy_to_device(CUdeviceptr dst, const void *src, size_t bytes, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuMemcpyHtoD(dst, src, bytes));
}

kiln_status rt_cuda_copy_to_host(void *dst, CUdeviceptr src, size_t bytes, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuMemcpyDtoH(dst, src, bytes));
}

kiln_status rt_cuda_host_alloc_mapped(size_t bytes, void **host, CUdeviceptr *dev, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *host = NULL;
    *dev = 0;
    kiln_status st = KILN_CU_CHECK(d, cu->cuMemHostAlloc(host, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
    if (st == KILN_OK) st = KILN_CU_CHECK(d, cu->cuMemHostGetDevicePointer(dev, *host, 0));
    if (st != KILN_OK) {
        rt_cuda_host_free(*host);
        *host = NULL;
        *dev = 0;
    }
    return st;
}

kiln_status rt_cuda_host_alloc(size_t bytes, void **host, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *host = NULL;
    return KILN_CU_CHECK(d, cu->cuMemHostAlloc(host, bytes ? bytes : 1, CU_MEMHOSTALLOC_PORTABLE));
}

rt_cuda_memory rt_cuda_memory_of(const void *p)
{
    KILN_ASSERT(cu != NULL);
    unsigned type = 0, managed = 0;
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)p;
    /* pageable memory: CUDA_ERROR_INVALID_VALUE, which sticks to nothing */
    if (!p || cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at) != CUDA_SUCCESS)
        return RT_CUDA_PAGEABLE;
    if (type == CU_MEMORYTYPE_HOST) return RT_CUDA_PAGE_LOCKED;
    if (type != CU_MEMORYTYPE_DEVICE) return RT_CUDA_PAGEABLE;
    /* managed memory is the host's too */
    if (cu->cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, at) == CUDA_SUCCESS && managed)
        return RT_CUDA_PAGEABLE;
    return RT_CUDA_DEVICE_MEMORY;
}

void rt_cuda_host_free(void *host)
{
    if (host) KILN_CU_CHECK(NULL, cu->cuMemFreeHost(host));
}

kiln_status rt_cuda_copy_to_device_async(CUdeviceptr dst, const void *src, size_t bytes, CUstream s, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuMemcpyHtoDAsync(dst, src, bytes, s));
}

kiln_status rt_cuda_copy_to_host_async(void *dst, CUdeviceptr src, size_t bytes, CUstream s, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuMemcpyDtoHAsync(dst, src, bytes, s));
}

kiln_status rt_cuda_stream_create(CUstream *out, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *out = NULL;
    return KILN_CU_CHECK(d, cu->cuStreamCreate(out, CU_STREAM_NON_BLOCKING));
}

void rt_cuda_stream_free(CUstream s)
{
    if (s) KILN_CU_CHECK(NULL, cu->cuStreamDestroy(s));
}

kiln_status rt_cuda_stream_sync(CUstream s, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuStreamSynchronize(s));
}

/* ---- CUDA graphs ------------------------------------------------------------------ */

kiln_status rt_cuda_graph_begin(CUstream s, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
}

kiln_status rt_cuda_graph_end(CUstream s, rt_cuda_graph *out, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    memset(out, 0, sizeof(*out));
    KILN_TRY(KILN_CU_CHECK(d, cu->cuStreamEndCapture(s, &out->graph)));
    kiln_status st = KILN_CU_CHECK(d, cu->cuGraphInstantiateWithFlags(&out->exec, out->graph, 0));
    if (st != KILN_OK) rt_cuda_graph_free(out);
    return st;
}

kiln_status rt_cuda_graph_launch(const rt_cuda_graph *g, CUstream s, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuGraphLaunch(g->exec, s));
}

void rt_cuda_graph_free(rt_cuda_graph *g)
{
    if (g->exec) KILN_CU_CHECK(NULL, cu->cuGraphExecDestroy(g->exec));
    if (g->graph) KILN_CU_CHECK(NULL, cu->cuGraphDestroy(g->graph));
    g->exec = NULL;
    g->graph = NULL;
}

/* ---- events ------------------------------------------------------------------------ */

kiln_status rt_cuda_event_create(CUevent *out, bool timing, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *out = NULL;
    return KILN_CU_CHECK(d, cu->cuEventCreate(out, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
}

void rt_cuda_event_free(CUevent e)
{
    if (e) KILN_CU_CHECK(NULL, cu->cuEventDestroy(e));
}

kiln_status rt_cuda_event_record(CUevent e, CUstream s, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuEventRecord(e, s));
}

kiln_status rt_cuda_event_sync(CUevent e, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    return KILN_CU_CHECK(d, cu->cuEventSynchronize(e));
}

kiln_status rt_cuda_event_elapsed(CUevent start, CUevent end, float *ms, base_diag *d)
{
    KILN_ASSERT(cu != NULL);
    *ms = 0;
    return KILN_CU_CHECK(d, cu->cuEventElapsedTime(ms, start, end));
}
