/*
 * nvrtc.h: compiles generated CUDA C to a cubin with NVRTC, the CUDA
 * toolkit's run-time compiler, opened with dlopen on first use (kiln links
 * no CUDA library).
 *
 *     void *cubin;
 *     size_t n;
 *     if (cg_nvrtc_compile(src, "model.cu", 9, 0, true, &cubin, &n, &d) == KILN_OK) {
 *         ... rt_cuda_module_load(cubin, n, &mod, &d) ...
 *         base_free(cubin);
 *     }
 */
#ifndef KILN_TARGET_CUDA_NVRTC_H
#define KILN_TARGET_CUDA_NVRTC_H

#include "base/base.h"

/* Compiles src (C-style CUDA: kernels are extern "C" __global__, other
 * functions are device functions by default) for sm_<major><minor>, or
 * sm_<major><minor>a when arch_specific (Hopper's wgmma, setmaxnreg).
 * name appears in the compiler's messages. <cuda_fp16.h> and the other
 * toolkit headers are on the include path when the toolkit has them.
 * OUT: *cubin (free with base_free) and its size *n.
 * Errors: NVRTC missing -> KILN_ERR_UNSUPPORTED; src rejected ->
 * KILN_ERR_INTERNAL with the compiler's log and the offending source lines. */
kiln_status cg_nvrtc_compile(const char *src, const char *name, int sm_major, int sm_minor, bool arch_specific,
                             void **cubin, size_t *n, base_diag *d);

/* cg_nvrtc_compile, with ptxas told to report the functions that spill
 * registers to local memory (--warn-on-spills). OUT: also
 * cg_nvrtc_spills' summary of them, appended to *spills (nothing when
 * none). */
kiln_status cg_nvrtc_compile_spills(const char *src, const char *name, int sm_major, int sm_minor, bool arch_specific,
                                    void **cubin, size_t *n, base_str *spills, base_diag *d);

/* The functions that ptxas's log says spill ("Registers are spilled to
 * local memory in function 'F', N bytes spill stores, M bytes spill
 * loads"), appended to out as "F (N bytes stored, M loaded)", "; "
 * between them, with a mangled name shortened to its last component
 * (_ZN..._k_05opb_5E...: opb_5); each line read on its own (a line longer
 * than 1 KB only up to there). Returns how many; out->oom on no memory. */
int cg_nvrtc_spills(const char *log, base_str *out);

/* NVRTC's version (13.0 -> 13000); 0 when NVRTC cannot be loaded. */
int cg_nvrtc_version(void);

#endif
