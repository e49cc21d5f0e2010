/*
 * gprog.h: the CUDA program of a `.kiln` artifact of target "cuda": what
 * the CODE section holds, and the context every generated kernel receives.
 *
 * Generated code (target/cuda/) is one CUDA C file per model. Each group is
 * an rOperator, a device function computing rTask t of the group with one
 * thread block (Rammer 3.1):
 *
 *     __device__ void op_12(const kiln_gctx *c, int t);
 *
 * and, for --schedule=kernels, a kernel looping over the rTasks:
 *
 *     extern "C" __global__ void k_12(const kiln_gctx *c)
 *     { for (int t = blockIdx.x; t < N; t += gridDim.x) op_12(c, t); }
 *
 * The program is the ordered list of launches: kernels (name, grid, block,
 * dynamic shared memory) and host segments (ops whose output shape depends
 * on data, run by the reference interpreter on the host between kernels).
 *
 * Addresses. Activations live at planned offsets in `arena`, constants at
 * offsets in `weights` (uploaded once), model inputs and outputs at io[i];
 * generated code bakes the offsets in. With --precision fp16/bf16 a float32
 * value in the arena or the weights holds 16-bit elements at the same
 * offset (half of its planned bytes used); model inputs and outputs keep
 * their model dtype.
 *
 * Faults. A kernel that meets bad data (an index out of range) records the
 * first fault in fail[0] (a KILN_GFAULT_* code) and fail[1] (the launch
 * index); the runtime turns it into an error naming the group. A barrier
 * of a persistent kernel whose wait outlasts its watchdog records
 * KILN_GFAULT_TIMEOUT, the stage it ended in fail[2] and the waiting block
 * (the vEU) in fail[3].
 *
 * CODE section layout (little-endian, every field checked by the reader):
 *
 *     0   char magic[8]          "KGPROG1\0"
 *     8   u32  precision         KILN_GPREC_*
 *     12  u32  n_images
 *     16  u32  n_launches
 *     20  u32  max_smem          the largest dynamic shared memory of any launch
 *     24  u64  arena_bytes       = the artifact's plan
 *     32  u64  weight_bytes      = the artifact's weights section
 *     40  images:   n_images x {u32 sm (80, 90...), u32 arch_specific (1: sm_90a),
 *                               u64 bytes, the cubin, zero padding to 8 bytes}
 *         launches: n_launches x {i32 segment (-1: a kernel, -2: a persistent kernel,
 *                                 -3 / -4: the same, beginning with griddepcontrol.wait),
 *                                 u32 grid, u32 block,
 *                                 u32 smem, u32 name_bytes, name, u32 label_bytes,
 *                                 label, zero padding to 4 bytes}
 *         u32 n_tmaps, then n_tmaps x {u32 space (0 arena, 1 weights), u32 dtype
 *                                 (KILN_GPREC_FP16 / _BF16), u64 offset, u64 dim0,
 *                                 u64 dim1, u64 stride1 (bytes), u32 box0, u32 box1,
 *                                 u32 im2col, u64 dim2, u64 dim3, u64 stride2,
 *                                 u64 stride3, i32 lower_w, i32 lower_h, i32 upper_w,
 *                                 i32 upper_h, u32 step_w, u32 step_h, 4 zero bytes}
 *
 * Tensor maps (Hopper's TMA). Kernels that copy tiles with the tensor
 * memory accelerator (kg_gemm_wgt) read 128-byte CUtensorMap descriptors
 * from the module's global array kg_tmaps[n_tmaps]. The descriptors hold
 * device addresses, so the runtime encodes them when it loads the program
 * (cuTensorMapEncodeTiled: a 2-D tensor of 16-bit floats at `offset` in the
 * arena or the weights, dim0 contiguous, 128-byte swizzle, zero fill
 * outside the tensor) and copies them into kg_tmaps. Only the sm_90a image
 * uses them. An im2col map (cuTensorMapEncodeIm2col) describes an NHWC
 * activation [dim3][dim2][dim1][dim0] = [N][H][W][C] that a convolution
 * reads as the rows of its implicit GEMM: one copy moves box1 output
 * pixels' box0 channels at one filter tap (rt_gtmap).
 *
 * A persistent kernel (--schedule=mono*) runs stages whose blocks wait for
 * one another (grid barriers or completion counters), so every block must
 * be resident at once: `grid` is the
 * most blocks it can use, and the runtime lowers it to what the occupancy
 * API says fits the device (an error when not one block per multiprocessor
 * fits).
 *
 * Early launches. A kernel that begins with griddepcontrol.wait (every
 * kernel kiln generates: kg.h's kg_grid_dep) is marked `early`: on sm_90
 * and later the runtime launches it as a programmatic dependent launch, so
 * its blocks are scheduled while the kernel before it still runs and the
 * launch latency between kernels is hidden. Kernels without the mark (hand-
 * written ones) are launched after the previous kernel ends.
 *
 * A kernel launch names its extern "C" kernel; `label` is the group's name
 * (the ONNX nodes it computes), used in profiles and error messages. A host
 * segment launch gives the index into the artifact's SEGMENTS and leaves
 * name empty, grid/block/smem 0.
 */
#ifndef KILN_RUNTIME_GPROG_H
#define KILN_RUNTIME_GPROG_H

#include "base/base.h"

#define KILN_GPROG_MAGIC "KGPROG3"   /* 8 bytes with the NUL */
#define KILN_GPROG_MAX_IMAGES 16
#define KILN_GPROG_MAX_LAUNCHES (1 << 20)
#define KILN_GPROG_MAX_NAME 4096
#define KILN_GPROG_MAX_BLOCK 1024
#define KILN_GPROG_MAX_SMEM (228 * 1024)
#define KILN_GPROG_MAX_TMAPS 65536
#define KILN_GPROG_TMAP_BYTES 128 /* sizeof(CUtensorMap) */

typedef enum kiln_gprec { KILN_GPREC_FP32 = 0, KILN_GPREC_FP16 = 1, KILN_GPREC_BF16 = 2 } kiln_gprec;

/* Fault codes kernels write into fail[0]. */
enum {
    KILN_GFAULT_NONE = 0,
    KILN_GFAULT_INDEX = 1,    /* a gather/scatter index out of range */
    KILN_GFAULT_VALUE = 2,    /* a value the op does not accept (a zero integer divisor...) */
    KILN_GFAULT_TIMEOUT = 3,  /* a wait's watchdog expired (persistent kernels) */
};

#define KILN_GFAIL_WORDS 4

/* What every kernel receives (one pointer to it in device memory). The
 * device-side copy of this struct is in target/cuda/kernels/kg.h; the
 * layout is four 8-byte pointers. */
typedef struct kiln_gctx {
    uint64_t arena;    /* unsigned char * */
    uint64_t weights;  /* const unsigned char * */
    uint64_t io;       /* void *const *: n_inputs + n_outputs device pointers */
    uint64_t fail;     /* unsigned int[KILN_GFAIL_WORDS], zeroed before each run */
    uint64_t prof;     /* unsigned long long[4 per profile slot] while profiling, else 0 (kg_prof_rtask) */
} kiln_gctx;

typedef struct rt_gimage {
    int sm;            /* 80 for sm_80, 90 for sm_90 / sm_90a */
    int arch_specific; /* 1: built for sm_90a (only that exact architecture runs it) */
    const void *cubin;
    size_t bytes;
} rt_gimage;

typedef struct rt_glaunch {
    int segment;       /* -1: a kernel; else a host segment's index */
    bool persistent;   /* a kernel whose blocks must all be resident (encoded as segment -2) */
    bool early;        /* a kernel that begins with griddepcontrol.wait (kg_grid_dep), so it may be
                        * launched before the previous kernel ends (segment -3, or -4 when persistent) */
    unsigned grid, block, smem;
    const char *name;  /* the kernel ("k_12"); "" for segments */
    const char *label; /* the group's name */
} rt_glaunch;

/* One tensor map the program's kernels read (kg_tmaps[i]). */
typedef struct rt_gtmap {
    int space;           /* 0: the arena, 1: the weights */
    kiln_gprec dtype;    /* KILN_GPREC_FP16 or KILN_GPREC_BF16 */
    uint64_t offset;     /* bytes into the space */
    uint64_t dim0, dim1; /* elements; dim0 is contiguous */
    uint64_t stride1;    /* bytes from one dim1 index to the next: a multiple of 16 */
    unsigned box0, box1; /* the tile one copy moves: box0 * 2 bytes <= 128, box1 <= 256 */
    /* im2col 1: an NHWC tensor of dim3 images, dim2 x dim1 pixels, dim0
     * channels (stride2, stride3: bytes from one row, one image to the
     * next), read box1 pixels of box0 channels a copy. The pixels a copy
     * walks are those of the bounding box of a filter's first tap: from
     * (lower_w, lower_h) to (dim1 - 1 + upper_w, dim2 - 1 + upper_h), in
     * steps of (step_w, step_h), row by row, image by image; the copy's
     * filter offsets move the box to the other taps, and what falls
     * outside the image reads as zero (the padding). For a convolution:
     * lower = -pad, upper = (out - 1) stride - pad - (in - 1), step = its
     * stride. */
    int im2col;
    uint64_t dim2, dim3;
    uint64_t stride2, stride3;
    int lower_w, lower_h, upper_w, upper_h; /* within -128..127 */
    unsigned step_w, step_h;                /* 1..8 */
} rt_gtmap;

typedef struct rt_gprog {
    kiln_gprec precision;
    int n_images;
    rt_gimage *images;
    int n_launches;
    rt_glaunch *launches;
    unsigned max_smem;
    uint64_t arena_bytes, weight_bytes;
    int n_tmaps;
    rt_gtmap *tmaps;
    base_arena arena;  /* owns the arrays and strings (cubins point into the buffer read) */
} rt_gprog;

/* Encodes p into *buf (base_free it), *n bytes. */
kiln_status rt_gprog_encode(const rt_gprog *p, void **buf, size_t *n, base_diag *d);
/* Parses a CODE section; cubins point into buf. OUT: *out, free with
 * rt_gprog_free (also after a failure). Malformed: KILN_ERR_INVALID_MODEL
 * naming the field and byte offset. */
kiln_status rt_gprog_decode(const void *buf, size_t n, rt_gprog *out, base_diag *d);
void rt_gprog_free(rt_gprog *p);

/* The image for a device of compute capability major.minor: an exact
 * arch-specific match first (sm_90a on 9.0), else the newest generic image
 * of the device's major version not newer than the device (SASS runs on
 * its own major version only); NULL when none runs there. */
const rt_gimage *rt_gprog_pick_image(const rt_gprog *p, int major, int minor);

const char *rt_gprec_name(kiln_gprec p); /* "fp32", "fp16", "bf16" */

/* Whether m is a tensor map the runtime can encode within a space of
 * space_bytes bytes; else false and why (a phrase). */
bool rt_gtmap_check(const rt_gtmap *m, uint64_t space_bytes, const char **why);

#endif
