/*
 * test_cuda.c: the CUDA foundation without a GPU: NVRTC compiles kernels to
 * cubins (it needs only the toolkit), compile errors quote the generated
 * line, the driver's absence is a clean KILN_ERR_NO_DEVICE, CUDA errors map
 * to kiln statuses, and a damaged cubin is refused before the driver sees it.
 *
 * Where NVRTC is missing the NVRTC tests say so and pass, unless
 * $KILN_REQUIRE_NVRTC is set. tests/gpu/smoke.c runs the same kernel on a GPU.
 */
#include "unit.h"

#include "runtime/cuda.h"
#include "target/cuda/nvrtc.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

static const char vadd_src[] =
    "#include <cuda_fp16.h>\n"
    "\n"
    "extern \"C\" __global__ void vadd(const __half *a, const __half *b, float *c, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) c[i] = __half2float(a[i]) + __half2float(b[i]);\n"
    "}\n";

/* True when NVRTC can be used; otherwise says why, and fails the test only
 * where NVRTC is required. */
static bool have_nvrtc(void)
{
    if (cg_nvrtc_version() > 0) return true;
    base_diag d;
    base_diag_init(&d);
    void *cubin;
    size_t n;
    UNIT_CHECK_EQ_INT(cg_nvrtc_compile(vadd_src, "vadd.cu", 8, 0, false, &cubin, &n, &d), KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "NVRTC not found");
    base_diag_free(&d);
    if (getenv("KILN_REQUIRE_NVRTC"))
        unit_fail(__FILE__, __LINE__, "NVRTC not found and $KILN_REQUIRE_NVRTC is set");
    else
        printf("    NVRTC not found: skipped (set KILN_REQUIRE_NVRTC=1 to make this a failure)\n");
    return false;
}

static void check_cubin_for(int sm_major, int sm_minor, bool arch_specific)
{
    base_diag d;
    base_diag_init(&d);
    void *cubin = NULL;
    size_t n = 0;
    kiln_status st = cg_nvrtc_compile(vadd_src, "vadd.cu", sm_major, sm_minor, arch_specific, &cubin, &n, &d);
    if (st != KILN_OK) printf("    %s\n", base_diag_text(&d));
    UNIT_CHECK_EQ_INT(st, KILN_OK);
    UNIT_CHECK(cubin != NULL && n > sizeof(Elf64_Ehdr));
    if (cubin && n > sizeof(Elf64_Ehdr)) {
        Elf64_Ehdr eh;
        memcpy(&eh, cubin, sizeof(eh));
        UNIT_CHECK(memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
        UNIT_CHECK_EQ_INT(eh.e_machine, EM_CUDA);
    }
    base_free(cubin);
    base_diag_free(&d);
}

UNIT_TEST(nvrtc_compiles_sm80)
{
    if (have_nvrtc()) check_cubin_for(8, 0, false);
}

UNIT_TEST(nvrtc_compiles_sm90a)
{
    if (have_nvrtc()) check_cubin_for(9, 0, true);
}

UNIT_TEST(nvrtc_error_quotes_the_bad_line)
{
    if (!have_nvrtc()) return;
    static const char bad_src[] =
        "extern \"C\" __global__ void broken(float *c)\n"
        "{\n"
        "    c[0] = no_such_value;\n"
        "}\n";
    base_diag d;
    base_diag_init(&d);
    void *cubin = (void *)1;
    size_t n = 1;
    kiln_status st = cg_nvrtc_compile(bad_src, "broken.cu", 8, 0, false, &cubin, &n, &d);
    UNIT_CHECK_EQ_INT(st, KILN_ERR_INTERNAL);
    UNIT_CHECK(cubin == NULL && n == 0);
    const char *text = base_diag_text(&d);
    UNIT_CHECK_STR_CONTAINS(text, "broken.cu(3): error");
    UNIT_CHECK_STR_CONTAINS(text, "no_such_value");
    UNIT_CHECK_STR_CONTAINS(text, "generated line 3:     c[0] = no_such_value;");
    base_diag_free(&d);
}

/* ptxas's spill warnings, as --warn-on-spills writes them, summarised;
 * other lines ignored. */
UNIT_TEST(nvrtc_spill_report_parses)
{
    static const char log[] =
        "ptxas info    : 0 bytes gmem\n"
        "ptxas warning : Registers are spilled to local memory in function "
        "'_ZN33_INTERNAL_04b3b814_8_model_cu_k_05opb_5EPK9kiln_gctxiyyyy', 44 bytes spill stores, 88 bytes spill "
        "loads\n"
        "ptxas warning : Registers are spilled to local memory in function 'k_0', 8 bytes spill stores, 16 bytes "
        "spill loads\n"
        "ptxas warning : Registers are spilled to local memory in function 'no_quote, 4 bytes spill stores\n"
        "ptxas warning : Registers are spilled to local memory in function 'k_1', 4 bytes spill stores\n"
        "ptxas info    : 'k_2', 7 bytes spill stores, 9 bytes spill loads\n";
    base_str out;
    base_str_init(&out);
    /* a line without its closing quote is no match; one without loads has 0 of them, not the next line's */
    UNIT_CHECK_EQ_INT(cg_nvrtc_spills(log, &out), 3);
    UNIT_CHECK_STR_CONTAINS(base_str_get(&out), "opb_5 (44 bytes stored, 88 loaded); k_0 (8 bytes stored, 16 loaded); "
                                                "k_1 (4 bytes stored, 0 loaded)");
    UNIT_CHECK(strstr(base_str_get(&out), "no_quote") == NULL && strstr(base_str_get(&out), "k_2") == NULL);
    base_str_free(&out);
    base_str_init(&out);
    UNIT_CHECK_EQ_INT(cg_nvrtc_spills("ptxas info    : Used 10 registers\n", &out), 0);
    UNIT_CHECK_EQ_INT((int)out.len, 0);
    UNIT_CHECK_EQ_INT(cg_nvrtc_spills(NULL, &out), 0);
    base_str_free(&out);
}

/* A kernel held to 32 registers a thread with 48 values live at once
 * (all needed after a store that may alias x, so none can be reloaded)
 * spills, and cg_nvrtc_compile_spills names it; vadd does not. */
UNIT_TEST(nvrtc_reports_spills)
{
    if (!have_nvrtc()) return;
    static const char tight_src[] =
        "extern \"C\" __global__ void __launch_bounds__(1024, 2) tight(const float *x, float *y)\n"
        "{\n"
        "    float v[48];\n"
        "#pragma unroll\n"
        "    for (int i = 0; i < 48; i++) v[i] = x[threadIdx.x * 48 + i];\n"
        "#pragma unroll\n"
        "    for (int i = 0; i < 48; i++) {\n"
        "        float s = 0.0f;\n"
        "#pragma unroll\n"
        "        for (int j = 0; j < 48; j++) s = fmaf(v[j], v[(i + j) % 48], s);\n"
        "        y[threadIdx.x * 48 + i] = s;\n"
        "    }\n"
        "}\n";
    base_diag d;
    base_diag_init(&d);
    void *cubin;
    size_t n;
    base_str spills;
    base_str_init(&spills);
    UNIT_CHECK_EQ_INT(cg_nvrtc_compile_spills(tight_src, "tight.cu", 9, 0, true, &cubin, &n, &spills, &d), KILN_OK);
    UNIT_CHECK_STR_CONTAINS(base_str_get(&spills), "tight (");
    base_str_free(&spills);
    base_free(cubin);
    base_str_init(&spills);
    UNIT_CHECK_EQ_INT(cg_nvrtc_compile_spills(vadd_src, "vadd.cu", 9, 0, true, &cubin, &n, &spills, &d), KILN_OK);
    UNIT_CHECK_EQ_INT((int)spills.len, 0);
    base_str_free(&spills);
    base_free(cubin);
    base_diag_free(&d);
}

UNIT_TEST(nvrtc_rejects_bad_arch)
{
    if (!have_nvrtc()) return;
    base_diag d;
    base_diag_init(&d);
    void *cubin;
    size_t n;
    UNIT_CHECK_EQ_INT(cg_nvrtc_compile(vadd_src, "vadd.cu", 0, 0, false, &cubin, &n, &d), KILN_ERR_INVALID_ARG);
    base_diag_free(&d);
}

/* Passes on a GPU machine too: there the driver must open and list devices. */
UNIT_TEST(cuda_open_without_driver_is_no_device)
{
    base_diag d;
    base_diag_init(&d);
    kiln_status st = rt_cuda_open(&d);
    if (st == KILN_OK) {
        UNIT_CHECK(rt_cuda_device_count() > 0);
        UNIT_CHECK(rt_cuda_api_get() != NULL);
        rt_cuda_device info;
        UNIT_CHECK_EQ_INT(rt_cuda_device_info(0, &info, &d), KILN_OK);
        UNIT_CHECK(info.sm_major >= 1 && info.n_sms > 0 && info.mem_bytes > 0);
    } else {
        UNIT_CHECK_EQ_INT(st, KILN_ERR_NO_DEVICE);
        /* "no NVIDIA driver (...)" or "the NVIDIA driver offers no usable GPU: ..." */
        UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "NVIDIA driver");
        UNIT_CHECK_EQ_INT(rt_cuda_device_count(), 0);
        UNIT_CHECK(rt_cuda_api_get() == NULL);
        /* the second open repeats the first one's answer */
        base_diag_clear(&d);
        UNIT_CHECK_EQ_INT(rt_cuda_open(&d), KILN_ERR_NO_DEVICE);
        UNIT_CHECK(d.n_msgs == 1);
        rt_cuda_device info;
        UNIT_CHECK_EQ_INT(rt_cuda_device_info(0, &info, &d), KILN_ERR_NO_DEVICE);
        rt_cuda_ctx ctx;
        UNIT_CHECK_EQ_INT(rt_cuda_ctx_init(0, &ctx, &d), KILN_ERR_NO_DEVICE);
    }
    base_diag_free(&d);
}

UNIT_TEST(cuda_errors_map_to_statuses)
{
    UNIT_CHECK_EQ_INT(rt_cuda_status(CUDA_SUCCESS), KILN_OK);
    UNIT_CHECK_EQ_INT(rt_cuda_status(CUDA_ERROR_OUT_OF_MEMORY), KILN_ERR_OOM);
    UNIT_CHECK_EQ_INT(rt_cuda_status(CUDA_ERROR_NO_DEVICE), KILN_ERR_NO_DEVICE);
    UNIT_CHECK_EQ_INT(rt_cuda_status(CUDA_ERROR_STUB_LIBRARY), KILN_ERR_NO_DEVICE);
    UNIT_CHECK_EQ_INT(rt_cuda_status(CUDA_ERROR_INVALID_VALUE), KILN_ERR_INVALID_ARG);
    UNIT_CHECK_EQ_INT(rt_cuda_status(CUDA_ERROR_NO_BINARY_FOR_GPU), KILN_ERR_UNSUPPORTED);
    UNIT_CHECK_EQ_INT(rt_cuda_status(700 /* CUDA_ERROR_ILLEGAL_ADDRESS */), KILN_ERR_INTERNAL);

    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(KILN_CU_CHECK(&d, CUDA_SUCCESS), KILN_OK);
    UNIT_CHECK(d.n_msgs == 0);
    /* the message names the call, this file and the line */
    UNIT_CHECK_EQ_INT(KILN_CU_CHECK(&d, (CUresult)CUDA_ERROR_OUT_OF_MEMORY), KILN_ERR_OOM);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "(CUresult)CUDA_ERROR_OUT_OF_MEMORY failed at ");
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "test_cuda.c:");
    base_diag_free(&d);
}

UNIT_TEST(cuda_refuses_damaged_cubin)
{
    base_diag d;
    base_diag_init(&d);
    CUmodule m = (CUmodule)1;
    static const char junk[] = "not an ELF file at all, just some bytes to look at";
    UNIT_CHECK_EQ_INT(rt_cuda_module_load(junk, sizeof(junk), &m, &d), KILN_ERR_INVALID_ARG);
    UNIT_CHECK(m == NULL);
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "not a cubin");
    if (cg_nvrtc_version() > 0) {
        void *cubin;
        size_t n;
        if (cg_nvrtc_compile(vadd_src, "vadd.cu", 8, 0, false, &cubin, &n, &d) == KILN_OK) {
            base_diag_clear(&d);
            /* cut inside the sections: the checks run before the driver is needed */
            UNIT_CHECK_EQ_INT(rt_cuda_module_load(cubin, n / 2, &m, &d), KILN_ERR_INVALID_ARG);
            UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "bad cubin");
            base_free(cubin);
        }
    }
    base_diag_free(&d);
}
