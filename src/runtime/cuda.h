/*
 * cuda.h: the CUDA driver API, opened with dlopen at first use, so the same
 * kiln binary runs on machines without a GPU, a driver or the toolkit.
 *
 *     base_diag d;
 *     base_diag_init(&d);
 *     rt_cuda_ctx ctx;
 *     CUmodule mod;
 *     CUfunction fn;
 *     kiln_status st = rt_cuda_ctx_init(0, &ctx, &d);    // opens the driver too
 *     if (st == KILN_OK) st = rt_cuda_module_load(cubin, n_cubin, &mod, &d);
 *     if (st == KILN_OK) st = rt_cuda_module_function(mod, "vadd", &fn, &d);
 *     if (st == KILN_OK) st = rt_cuda_launch(fn, n_blocks, 256, 0, stream, args, &d);
 *     if (st != KILN_OK) fprintf(stderr, "%s\n", base_diag_text(&d));
 *
 * The wrappers cover what the runtime needs; anything else goes through the
 * function table rt_cuda_api() with KILN_CU_CHECK around each call. Every
 * failure becomes a kiln_status plus a message naming the call, file and line:
 * out of device memory is KILN_ERR_OOM, a missing driver or device
 * KILN_ERR_NO_DEVICE.
 *
 * The types below are the driver API's, written here instead of including
 * the toolkit's cuda.h (which a machine running kiln need not have). They
 * are the driver's stable ABI: handles are opaque pointers, enums are ints,
 * and the values are copied from cuda.h (CUDA 13.0). Do not include the
 * toolkit's cuda.h in the same file.
 */
#ifndef KILN_RUNTIME_CUDA_H
#define KILN_RUNTIME_CUDA_H

#include "base/base.h"

/* ---- the driver API's types (from cuda.h) --------------------------------- */

typedef int CUresult; /* enum cudaError_enum */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2: 64-bit device addresses */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUevent_st *CUevent;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36,
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700, /* a kernel's bad access: the context is lost for the process */
    CUDA_ERROR_LAUNCH_FAILED = 719,   /* likewise, any other exception in a kernel */
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
};

/* CUdevice_attribute values kiln reads. */
enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 }; /* CUfunction_attribute */
enum { CU_STREAM_NON_BLOCKING = 1 };                          /* cuStreamCreate flags */
enum { CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };             /* CUstreamCaptureMode */
enum { CU_MEMHOSTALLOC_PORTABLE = 0x01, CU_MEMHOSTALLOC_DEVICEMAP = 0x02 }; /* cuMemHostAlloc flags */
enum { CU_EVENT_DEFAULT = 0, CU_EVENT_DISABLE_TIMING = 0x02 };             /* cuEventCreate flags */
enum { CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2, CU_POINTER_ATTRIBUTE_IS_MANAGED = 8 }; /* CUpointer_attribute */
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2 };                           /* CUmemorytype */

/* Tensor maps (TMA descriptors, sm_90): CUtensorMap and the enum values kiln
 * passes to cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col. */
typedef struct CUtensorMap {
    _Alignas(128) unsigned long long opaque[16];
} CUtensorMap;
enum { CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9 }; /* CUtensorMapDataType */
enum { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 };                                        /* CUtensorMapInterleave */
enum { CU_TENSOR_MAP_SWIZZLE_128B = 3 };                                           /* CUtensorMapSwizzle */
enum { CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3 };                                   /* CUtensorMapL2promotion */
enum { CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0 };                                    /* CUtensorMapFloatOOBfill */

/* cuLaunchKernelEx's configuration, with the one launch attribute kiln sets:
 * programmatic stream serialization (programmatic dependent launch, sm_90),
 * which lets a kernel start before the previous one in the stream has
 * finished; the kernel itself waits (griddepcontrol.wait) before it touches
 * memory. */
typedef struct CUlaunchAttribute {
    int id; /* CUlaunchAttributeID */
    char pad[4];
    union {
        char pad[64];
        int programmatic_stream_serialization_allowed;
        void *align;
    } value;
} CUlaunchAttribute;
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute is cuda.h's 72 bytes");
enum { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 }; /* CUlaunchAttributeID */
typedef struct CUlaunchConfig {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, smem_bytes;
    CUstream stream;
    CUlaunchAttribute *attrs;
    unsigned n_attrs;
} CUlaunchConfig;

/* The entry points kiln uses. Members are named as in the CUDA
 * documentation; the comment gives the exported symbol when it is a
 * versioned one (cuda.h maps the plain name onto it with a #define). */
typedef struct rt_cuda_api {
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuGetErrorName)(CUresult r, const char **name);
    CUresult (*cuGetErrorString)(CUresult r, const char **text);
    CUresult (*cuDeviceGetCount)(int *n);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice dev);
    CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev); /* cuDeviceTotalMem_v2 */
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev); /* cuDevicePrimaryCtxRelease_v2 */
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*cuModuleUnload)(CUmodule mod);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*cuModuleGetGlobal)(CUdeviceptr *p, size_t *bytes, CUmodule mod, const char *name); /* _v2 */
    CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *map, int dtype, unsigned rank, void *address,
                                       const unsigned long long *dims, const unsigned long long *strides,
                                       const unsigned *box, const unsigned *element_strides, int interleave,
                                       int swizzle, int l2_promotion, int oob_fill);
    CUresult (*cuTensorMapEncodeIm2col)(CUtensorMap *map, int dtype, unsigned rank, void *address,
                                        const unsigned long long *dims, const unsigned long long *strides,
                                        const int *lower_corner, const int *upper_corner, unsigned channels,
                                        unsigned pixels, const unsigned *element_strides, int interleave,
                                        int swizzle, int l2_promotion, int oob_fill);
    CUresult (*cuFuncSetAttribute)(CUfunction fn, int attribute, int value);
    CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *n_blocks, CUfunction fn, int block_size,
                                                            size_t dyn_smem_bytes);
    CUresult (*cuLaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                               unsigned block_y, unsigned block_z, unsigned smem_bytes, CUstream stream,
                               void **params, void **extra);
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *config, CUfunction fn, void **params, void **extra);
    CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t bytes);                                   /* cuMemAlloc_v2 */
    CUresult (*cuMemFree)(CUdeviceptr p);                                                   /* cuMemFree_v2 */
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);               /* cuMemcpyHtoD_v2 */
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);                     /* cuMemcpyDtoH_v2 */
    CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t bytes);             /* cuMemsetD8_v2 */
    CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
    CUresult (*cuStreamDestroy)(CUstream s); /* cuStreamDestroy_v2 */
    CUresult (*cuStreamSynchronize)(CUstream s);
    CUresult (*cuStreamBeginCapture)(CUstream s, int mode); /* cuStreamBeginCapture_v2 */
    CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *graph);
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
    CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream s);
    CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
    CUresult (*cuGraphDestroy)(CUgraph graph);
    CUresult (*cuMemHostAlloc)(void **p, size_t bytes, unsigned flags);
    CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *dev, void *host, unsigned flags); /* _v2 */
    CUresult (*cuMemFreeHost)(void *p);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s); /* _v2 */
    CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);       /* _v2 */
    CUresult (*cuEventCreate)(CUevent *e, unsigned flags);
    CUresult (*cuEventRecord)(CUevent e, CUstream s);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (*cuEventDestroy)(CUevent e); /* cuEventDestroy_v2 */
    CUresult (*cuEventSynchronize)(CUevent e);
    CUresult (*cuPointerGetAttribute)(void *data, int attribute, CUdeviceptr p);
} rt_cuda_api;

/* ---- errors ------------------------------------------------------------------ */

/* Checks one driver call: evaluates to KILN_OK, or adds "CALL failed at
 * FILE:LINE: CUDA_ERROR_X (text)" to d and evaluates to the kiln_status for
 * the error. Use it around every driver call:
 *     KILN_TRY(KILN_CU_CHECK(d, cu->cuMemAlloc(&p, n))); */
#define KILN_CU_CHECK(d, call) rt_cuda_check((call), #call, __FILE__, __LINE__, (d))

kiln_status rt_cuda_check(CUresult r, const char *call, const char *file, int line, base_diag *d);
/* The status a CUresult maps to (KILN_OK for CUDA_SUCCESS). */
kiln_status rt_cuda_status(CUresult r);

/* ---- driver and devices -------------------------------------------------------- */

/* Loads libcuda.so.1 and runs cuInit; later calls return the first call's
 * status (and repeat its message into d). Thread-safe. No driver or no
 * device: KILN_ERR_NO_DEVICE. */
kiln_status rt_cuda_open(base_diag *d);
/* The table of entry points; NULL until rt_cuda_open has succeeded. */
const rt_cuda_api *rt_cuda_api_get(void);
/* Number of CUDA devices; 0 when there is no driver or no device. */
int rt_cuda_device_count(void);

typedef struct rt_cuda_device {
    char name[256];
    int sm_major, sm_minor;        /* compute capability */
    int n_sms;                     /* multiprocessors */
    int max_threads_per_sm;
    size_t mem_bytes;              /* global memory */
    int l2_bytes;
    int smem_per_sm_bytes;         /* shared memory per multiprocessor */
    int smem_per_block_optin_bytes; /* the most one block can have, after opting in */
    int driver_version;            /* 13000 for CUDA 13.0 */
} rt_cuda_device;

kiln_status rt_cuda_device_info(int dev, rt_cuda_device *out, base_diag *d);

/* ---- contexts ---------------------------------------------------------------- */

/* The device's primary context (the one the CUDA runtime and frameworks
 * share), made current on the calling thread. */
typedef struct rt_cuda_ctx {
    CUdevice dev;
    CUcontext ctx;
} rt_cuda_ctx;

/* The device artifacts run on: $KILN_DEVICE, else 0 (not checked against
 * the devices there are). */
kiln_status rt_cuda_run_device(int *dev, base_diag *d);
/* Opens the driver if needed. OUT: *out, free with rt_cuda_ctx_free. */
kiln_status rt_cuda_ctx_init(int dev, rt_cuda_ctx *out, base_diag *d);
void rt_cuda_ctx_free(rt_cuda_ctx *c);
/* Makes the context current on the calling thread (each thread that calls
 * the driver needs this once). */
kiln_status rt_cuda_ctx_bind(const rt_cuda_ctx *c, base_diag *d);

/* ---- modules and launches ------------------------------------------------------- */

/* Loads a cubin (an ELF image of n bytes; checked to lie within those bytes
 * before the driver sees it). OUT: *out, free with rt_cuda_module_free. */
kiln_status rt_cuda_module_load(const void *cubin, size_t n, CUmodule *out, base_diag *d);
void rt_cuda_module_free(CUmodule m);
/* The kernel `name` (an extern "C" __global__ function). */
kiln_status rt_cuda_module_function(CUmodule m, const char *name, CUfunction *out, base_diag *d);
/* The module's global variable `name`: its address and size (*at 0 when
 * the module has none). */
kiln_status rt_cuda_module_global(CUmodule m, const char *name, CUdeviceptr *at, size_t *bytes, base_diag *d);
/* Encodes the program's tensor maps (runtime/gprog.h rt_gtmap) for the
 * arena and weights at the given device addresses, of the given sizes, and
 * copies them into the module's kg_tmaps array. Nothing to do when n is 0;
 * an error when the module lacks the array or its size differs. */
struct rt_gtmap;
kiln_status rt_cuda_fill_tmaps(CUmodule m, const struct rt_gtmap *maps, int n, CUdeviceptr arena,
                               unsigned long long arena_bytes, CUdeviceptr weights, unsigned long long weight_bytes,
                               base_diag *d);
/* Lets fn use smem_bytes of dynamic shared memory (needed above 48 KB). */
kiln_status rt_cuda_function_set_smem(CUfunction fn, int smem_bytes, base_diag *d);
/* How many blocks of block_size threads and smem_bytes of dynamic shared
 * memory fit on one multiprocessor at once. */
kiln_status rt_cuda_occupancy(CUfunction fn, int block_size, size_t smem_bytes, int *blocks_per_sm, base_diag *d);

/* Enqueues fn on a 1-D grid; args[i] points at the i-th kernel parameter.
 * Errors inside the kernel show at the next synchronisation. */
kiln_status rt_cuda_launch(CUfunction fn, unsigned n_blocks, unsigned block_size, unsigned smem_bytes, CUstream s,
                           void **args, base_diag *d);
/* rt_cuda_launch, and with early true as a programmatic dependent launch
 * (sm_90 and later): fn may start while the kernel before it in s still
 * runs, so fn must begin with griddepcontrol.wait (kg.h's kg_grid_dep). */
kiln_status rt_cuda_launch_ex(CUfunction fn, unsigned n_blocks, unsigned block_size, unsigned smem_bytes, CUstream s,
                              void **args, bool early, base_diag *d);

/* ---- memory and streams --------------------------------------------------------- */

kiln_status rt_cuda_alloc(size_t bytes, CUdeviceptr *out, base_diag *d);
void rt_cuda_free(CUdeviceptr p); /* 0 is fine */
kiln_status rt_cuda_copy_to_device(CUdeviceptr dst, const void *src, size_t bytes, base_diag *d);
kiln_status rt_cuda_copy_to_host(void *dst, CUdeviceptr src, size_t bytes, base_diag *d);

/* Page-locked host memory the device reads and writes directly (zero
 * copy): *host for the CPU, *dev for kernels. OUT: free *host with
 * rt_cuda_host_free. */
kiln_status rt_cuda_host_alloc_mapped(size_t bytes, void **host, CUdeviceptr *dev, base_diag *d);
/* Page-locked host memory for copies (every context may use it): copies
 * between it and the device run asynchronously, at the bus's speed. OUT:
 * free *host with rt_cuda_host_free. */
kiln_status rt_cuda_host_alloc(size_t bytes, void **host, base_diag *d);
void rt_cuda_host_free(void *host); /* NULL is fine */
/* What p points at, as the driver knows it: page-locked host memory (any
 * allocation or registration), device memory (not managed), or else
 * memory only the host reads and writes directly (pageable; managed). */
typedef enum rt_cuda_memory { RT_CUDA_PAGEABLE, RT_CUDA_PAGE_LOCKED, RT_CUDA_DEVICE_MEMORY } rt_cuda_memory;
rt_cuda_memory rt_cuda_memory_of(const void *p);
/* Stream-ordered copies. From pageable host memory the source may be
 * reused as soon as the call returns; into it, the call returns when the
 * copy is done. */
kiln_status rt_cuda_copy_to_device_async(CUdeviceptr dst, const void *src, size_t bytes, CUstream s, base_diag *d);
kiln_status rt_cuda_copy_to_host_async(void *dst, CUdeviceptr src, size_t bytes, CUstream s, base_diag *d);

/* A non-blocking stream. OUT: *out, free with rt_cuda_stream_free. */
kiln_status rt_cuda_stream_create(CUstream *out, base_diag *d);
void rt_cuda_stream_free(CUstream s);
kiln_status rt_cuda_stream_sync(CUstream s, base_diag *d);

/* ---- CUDA graphs: record a stream's launches once, replay them cheaply ---------- */

typedef struct rt_cuda_graph {
    CUgraph graph;
    CUgraphExec exec;
} rt_cuda_graph;

/* Launches on s between begin and end are recorded, not run. end
 * instantiates the recording. OUT: *out, free with rt_cuda_graph_free. */
kiln_status rt_cuda_graph_begin(CUstream s, base_diag *d);
kiln_status rt_cuda_graph_end(CUstream s, rt_cuda_graph *out, base_diag *d);
kiln_status rt_cuda_graph_launch(const rt_cuda_graph *g, CUstream s, base_diag *d);
void rt_cuda_graph_free(rt_cuda_graph *g);

/* ---- events: GPU timestamps on a stream ---------------------------------------- */

/* OUT: *out, free with rt_cuda_event_free. A timing event, or with timing
 * false one only to wait for (cheaper to record). */
kiln_status rt_cuda_event_create(CUevent *out, bool timing, base_diag *d);
void rt_cuda_event_free(CUevent e); /* NULL is fine */
kiln_status rt_cuda_event_record(CUevent e, CUstream s, base_diag *d);
/* Waits on the host until the work recorded before e is done. */
kiln_status rt_cuda_event_sync(CUevent e, base_diag *d);
/* Milliseconds between two recorded, completed events. */
kiln_status rt_cuda_event_elapsed(CUevent start, CUevent end, float *ms, base_diag *d);

#endif
