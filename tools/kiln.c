/*
 * kiln.c: the command line.
 *
 *   kiln inspect MODEL          what a model holds and whether kiln supports it
 *   kiln compile MODEL -o OUT   compile a model into a .kiln artifact
 *   kiln run [MODEL|ARTIFACT]   run a model (the embedded default when none is given)
 *   kiln bench MODEL|ARTIFACT   latency and throughput
 *   kiln verify MODEL           compiled code against the reference interpreter
 *   kiln ops                    the supported-op table
 *   kiln devices                the CUDA GPUs
 *
 * `kiln help COMMAND` or `kiln COMMAND --help` explains each. The library
 * never prints; this file does all the printing.
 */
#include "api/compile.h"
#include "api/demo.h"
#include "api/npy.h"
#include "api/tolerance.h"
#include "kiln_rt.h"
#include "ir/interp.h"
#include "onnx/onnx.h"
#include "runtime/cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- exit codes ---------------------------------------------------------------- */

static const char exit_codes_text[] =
    "EXIT CODES\n"
    "  0   success\n"
    "  1   bad command line\n"
    "  2   a file could not be read or written\n"
    "  3   the model is malformed\n"
    "  4   the model uses something kiln does not support\n"
    "  5   shapes or dtypes do not fit (inputs, or inside the model)\n"
    "  6   out of memory\n"
    "  7   no device\n"
    "  9   verification failed: compiled outputs differ from the reference interpreter\n"
    "  10  internal error (a bug in kiln: please report it)\n";

static int exit_code(kiln_status st)
{
    switch (st) {
    case KILN_OK: return 0;
    case KILN_ERR_INVALID_ARG: return 1;
    case KILN_ERR_IO: return 2;
    case KILN_ERR_INVALID_MODEL: return 3;
    case KILN_ERR_UNSUPPORTED: return 4;
    case KILN_ERR_SHAPE: return 5;
    case KILN_ERR_OOM: return 6;
    case KILN_ERR_NO_DEVICE: return 7;
    default: return 10;
    }
}

static int fail(kiln_status st, base_diag *d, const char *what)
{
    fprintf(stderr, "kiln: %s: %s\n", what, kiln_status_name(st));
    if (d && d->n_msgs) fprintf(stderr, "%s\n", base_diag_text(d));
    return exit_code(st);
}

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see 'kiln %s --help')\n", cmd);
    return 1;
}

/* ---- help ------------------------------------------------------------------------ */

static const char main_help[] =
    "kiln " KILN_VERSION ": an optimizing compiler and runtime for ONNX models\n"
    "\n"
    "USAGE\n"
    "  kiln COMMAND [ARGS]\n"
    "\n"
    "COMMANDS\n"
    "  inspect MODEL   inputs, outputs, op histogram, parameters, unsupported ops,\n"
    "                  peak activation memory\n"
    "  compile MODEL   compile into a .kiln artifact (generated C for this CPU)\n"
    "  run [MODEL]     run a model or an artifact on inputs from .npy/.npz files or\n"
    "                  random ones; without MODEL, compiles and runs the embedded\n"
    "                  default model and checks it against the interpreter\n"
    "  bench MODEL     latency (min/median/p90/p99), throughput, compile time\n"
    "  tune MODEL      time GEMM/conv template candidates on the GPU and keep the\n"
    "                  fastest in the tuning database, within a time budget\n"
    "  verify MODEL    compile, run on random inputs, compare every output with the\n"
    "                  reference interpreter\n"
    "  ops             the table of supported ops\n"
    "  devices         the CUDA GPUs this machine has\n"
    "  help [COMMAND]  this text, or a command's\n"
    "\n"
    "OPTIONS\n"
    "  --version       print the version\n"
    "\n";

static const char inspect_help[] =
    "USAGE\n"
    "  kiln inspect MODEL [--shape NAME=D0xD1x...]... [--graph]\n"
    "               [--schedule kernels|waves|mono|mono-barriers [--precision P]]\n"
    "\n"
    "Prints the model's opset and producer, its inputs and outputs with dtypes and\n"
    "shapes, a histogram of its ops, its parameter count and bytes, every node\n"
    "kiln does not support (all of them, with the reason), the groups each target\n"
    "would make and how many repeated nodes (same op, attributes and inputs as an\n"
    "earlier one) the compile leaves out.\n"
    "\n"
    "  --shape NAME=DIMS  bind a symbolic input dimension (e.g. --shape input_ids=1x128)\n"
    "                     so shapes can be inferred through the graph\n"
    "  --graph            also print the graph as text, with inferred shapes\n"
    "  --schedule S       also print the cuda rProgram that schedule makes (nothing\n"
    "                     is built): each launch's kernel, block size, shared memory\n"
    "                     and stages, each stage's groups and rTask counts, the grid\n"
    "                     barriers before and after merging, and host segments\n"
    "  --precision P      with --schedule: fp32 (default), fp16 or bf16 storage\n"
    "\n";

static const char run_help[] =
    "USAGE\n"
    "  kiln run [MODEL|ARTIFACT] [--target c|cuda|interp] [--precision P] [--schedule S] [--check]\n"
    "           [--threads N] [--input NAME=FILE.npy]... [--inputs FILE.npz] [--shape NAME=D0xD1x...]...\n"
    "           [--seed N] [--output FILE.npz] [--quiet]\n"
    "\n"
    "Runs a model and prints each output's dtype, shape and summary, and the\n"
    "latency. An .onnx MODEL is compiled for the target first (default c: generated\n"
    "C for this CPU, run on a pool of worker threads; cuda: CUDA kernels for the\n"
    "GPU) or run on the reference interpreter (--target interp); an ARTIFACT\n"
    "(.kiln, from kiln compile) runs as it is. Without MODEL, runs the embedded\n"
    "default model (a small CNN) on the GPU if there is one, else the CPU, and\n"
    "checks it against the interpreter. Inputs not given as files are random with\n"
    "a fixed seed: floats uniform in [-1, 1), integers in [0, 10), bools 0/1.\n"
    "\n"
    "  --target T         c (default), cuda or interp\n"
    "  --precision P      cuda: fp32 (default), fp16 or bf16 storage, fp32 math\n"
    "  --schedule S       cuda: waves (default), kernels, mono or mono-barriers (kiln help compile)\n"
    "  --threads N        worker threads (default: the artifact's, or 1)\n"
    "  --check            also run the interpreter and compare every output\n"
    "  --input NAME=FILE  a .npy file for input NAME\n"
    "  --inputs FILE      a .npz file holding inputs by name\n"
    "  --shape NAME=DIMS  dims of an input whose shape is symbolic (default 1)\n"
    "  --seed N           seed of the random inputs (default 0)\n"
    "  --output FILE      write the outputs to a .npz file, by output name\n"
    "  --quiet            print nothing but errors\n"
    "\n";

static const char compile_help[] =
    "USAGE\n"
    "  kiln compile MODEL -o OUT.kiln [--target c|cuda] [--threads N] [--emit-source DIR]\n"
    "               [--precision fp32|fp16|bf16] [--schedule waves|kernels|mono|mono-barriers] [--tune]\n"
    "               [--tuning-db FILE] [--shape NAME=D0xD1x...]... [--quiet]\n"
    "\n"
    "Compiles MODEL into an artifact: the graph is partitioned into groups\n"
    "(contractions with fused epilogues, fused elementwise subgraphs, ...), memory\n"
    "is planned, and C is generated for this CPU's instruction set, compiled with\n"
    "the system C compiler and stored with the weights. Ops without a C template\n"
    "run inside the artifact on the reference interpreter (fallback segments,\n"
    "listed in the report). With --target cuda the groups become CUDA kernels,\n"
    "compiled with NVRTC for sm_80 and sm_90a; only ops whose output shape depends\n"
    "on the data run on the host.\n"
    "\n"
    "  -o FILE            the artifact to write\n"
    "  --target T         c (default: this CPU) or cuda (NVIDIA GPUs, sm_80 and later)\n"
    "  --precision P      cuda: storage of float activations and weights: fp32\n"
    "                     (default), fp16 or bf16; math is always fp32\n"
    "  --schedule S       cuda: waves (default): a kernel per wave of the group\n"
    "                     graph (Rammer: the groups whose inputs the waves before\n"
    "                     made, narrower rOperators on part of the block, the most\n"
    "                     efficient rKernels where the fastest overfill the GPU);\n"
    "                     kernels: a kernel per group, independent neighbours in one;\n"
    "                     mono: the whole network as persistent\n"
    "                     kernels (one unless host segments split it) of stages;\n"
    "                     an rTask waits only for the completion counters of the\n"
    "                     operators it depends on; mono-barriers: the same with a\n"
    "                     grid barrier between stages, merged where no data crosses\n"
    "                     them (the counts are printed); mono-unmerged: a barrier\n"
    "                     after every group (the ablation's base). A mono schedule\n"
    "                     may name its kernel-wide configuration, mono:256x2: 128,\n"
    "                     256 or 384 threads a block, 1..5 blocks per multiprocessor\n"
    "                     (default: what `kiln tune --schedule mono` chose for the\n"
    "                     model on this GPU, else, where convolutions dominate,\n"
    "                     256x1 if their 1x1 ones are large and 16-bit (they then\n"
    "                     run as products) and 256x3 if not; 256x1 where products\n"
    "                     have more than 128 rows, 384x1 where such a 16-bit\n"
    "                     product also has more than 2^20 elements and there is no\n"
    "                     convolution (on sm_90), 128x1 where small products\n"
    "                     dominate, else 128x3)\n"
    "  --tune             cuda: time each GEMM/conv's template candidates on the GPU\n"
    "                     and keep the fastest in the tuning database (without it, a\n"
    "                     compile on a GPU takes what the database already holds)\n"
    "  --tuning-db FILE   cuda: the SQLite tuning database (default\n"
    "                     $KILN_TUNING_DB or ~/.cache/kiln/tuning.db)\n"
    "  --threads N        worker threads the program is tiled for (default 1)\n"
    "  --emit-source DIR  also write the generated source (C, or CUDA as model.cu) to DIR\n"
    "  --shape NAME=DIMS  bind a symbolic input dimension\n"
    "\n"
    "ENVIRONMENT (cuda)\n"
    "  KILN_TUNING_DB=FILE    the tuning database when --tuning-db is not given\n"
    "  KILN_GEMM_CLUSTERS=1   let the cost model put GEMM tiles in clusters of two blocks\n"
    "                         that share A (Hopper; without it only --tune picks them:\n"
    "                         they measured slower on an H100, about even on an H200)\n"
    "  KILN_TUNE_LOG=FILE     --tune / kiln tune: append every candidate's time to FILE\n"
    "                         (key, candidate, us, what it is; for fitting cost models)\n"
    "  KILN_GEMM_PRE_STAGES=N k-tiles of a weight a TMA product copies before it waits for\n"
    "                         the kernel before (kernels and waves schedules; default 2)\n"
    "  KILN_CONV_NHWC=0       every activation NCHW, instead of NHWC between tensor-core\n"
    "                         convolutions and into GlobalAveragePool (16-byte copies of\n"
    "                         8 channels of a tap)\n"
    "  KILN_SHARE_CODE=0      mono schedules: every group its own code, instead of one\n"
    "                         body for groups that differ only in where their tensors are\n"
    "  KILN_MONO_ILP=0        mono schedules: one element (or row) a thread in memory-bound\n"
    "                         groups, instead of steps sized for one wave of the resident blocks\n"
    "  KILN_MONO_CACHE=1      mono schedules: cache hints on memory-bound groups' loads\n"
    "                         (broadcast operands evict-last, data read once evict-first);\n"
    "                         off by default: on an H100 they cost ViT 1.5%, gave ResNet-50 3%\n"
    "  KILN_MONO_INLINE_WGMMA=0  mono schedules: the shared bodies of rOperators with warpgroup\n"
    "                         MMAs (sm_90a GEMM tiles) called instead of inlined where the\n"
    "                         kernel calls them; ptxas then serializes their MMAs (C7510)\n"
    "                         and BERT b1 ran 17% slower on an H200\n"
    "  KILN_MONO_INLINE_WGMMA=1  mono schedules: each such rOperator its own inlined code\n"
    "                         instead of a shared body: the code grows (ViT 0.45 -> 1.3 MB)\n"
    "                         and builds take longer\n"
    "  KILN_MONO_ROWS=1       --schedule mono: a product's or convolution's rTasks wait only\n"
    "                         for the tile rows they read of the product or convolution\n"
    "                         before (tile-row waits), and arena bytes stay a value's 3 waves\n"
    "                         longer (KILN_MONO_HOLD=N: N); off by default: on an H100 they\n"
    "                         made ResNet-50 33% and BERT b1 12% slower\n"
    "  KILN_MONO_FIT=0        mono schedules: every product takes its fastest tiles, even\n"
    "                         where they give its stage more rTasks than the kernel has\n"
    "                         blocks (by default it takes the tiles that end the stage soonest)\n"
    "  KILN_MONO_NARROW=0     mono schedules: every rOperator built for the block's threads,\n"
    "                         instead of narrower ones (attention in fewer warps) whose rTasks\n"
    "                         the block's other threads skip\n"
    "  KILN_TMAP_PREFETCH=0   TMA products fetch their tensor maps at their first copy,\n"
    "                         instead of asking for them ahead (while a persistent kernel's\n"
    "                         block waits for the rTask's producers; before a kernel's wait)\n"
    "  KILN_EPI_TOUCH=0       TMA products read their epilogue's bias and residual from L2\n"
    "                         when they store, instead of asking for them into L1 once\n"
    "                         their copies are issued\n"
    "  KILN_ATT_SPLIT=N       at most N key groups an attention rTask (tensor-core kernel),\n"
    "                         instead of up to 4 that walk a short sequence's key tiles side\n"
    "                         by side (none by default in a kernel of its own whose rTasks\n"
    "                         cover the GPU; set, N applies there too); 1: the rTask's warps\n"
    "                         walk every tile\n"
    "  KILN_ATT_UNITS=N       mono schedules: N query tiles an attention rTask (tensor-core\n"
    "                         kernel), each on its own warps, whatever the tile count; by\n"
    "                         default as many as the block has 4 warps for where there are\n"
    "                         more tiles than blocks, else 1 (1: always one)\n"
    "  KILN_TRACE_GEMM=1      a diagnostic: blocks 0 and 77 print, for each TMA GEMM rTask\n"
    "                         they run, the ns from its start to its barriers set up, its\n"
    "                         copies issued, its first k-tile, the end of its main loop and\n"
    "                         its end (sm_90a); attention query tiles 0 and 40, each key group,\n"
    "                         the ns to q, the first key tile, its scores, softmax and v,\n"
    "                         the end of the key loop, the merge and the end\n"
    "\n";

static const char tune_help[] =
    "USAGE\n"
    "  kiln tune MODEL [--budget DURATION] [--precision fp32|fp16|bf16]\n"
    "            [--schedule kernels|mono|...] [--configs LIST] [--tuning-db FILE]\n"
    "            [--shape NAME=D0xD1x...]... [--quiet]\n"
    "\n"
    "Times the template candidates (tiles, stages, split-K, clusters) of MODEL's\n"
    "GEMMs and convolutions on GPU 0, as `kiln compile --target cuda --tune` does,\n"
    "and keeps each winner in the tuning database, keyed by the GPU, the driver,\n"
    "kiln's build and the work (shapes, layouts, epilogue), so that every later\n"
    "compile of a model with the same work uses it. Identical work, BERT's twelve\n"
    "layers say, is timed once. A line per work item shows the candidates timed,\n"
    "the best and the cost model's choice, and the budget spent. Once the budget\n"
    "is spent no new work is timed; the rest keeps the cost model's choices.\n"
    "Interrupted or out of budget, run it again: what was timed is in the database\n"
    "and is not timed twice. The schedule matters: --schedule mono offers the\n"
    "templates of its block size, so tune with the schedule you compile with.\n"
    "\n"
    "A mono schedule without a configuration (--schedule mono, not mono:128x3)\n"
    "also tunes the persistent kernel's configuration (MonoNN's Algorithm 1): for\n"
    "each block size (128, 256) and blocks per multiprocessor (1..5), and 384x1,\n"
    "the heuristic's first, the model is compiled with its GEMMs and convolutions\n"
    "tuned for it, run once (its outputs must match the first configuration's) and\n"
    "timed whole (median of 100 runs, inputs and outputs in device memory). Each\n"
    "time is kept in the database as it is measured; the fastest is what later\n"
    "compiles with that mono schedule take on this GPU, unless the schedule names a\n"
    "configuration. A table of the configurations and their times ends the run.\n"
    "\n"
    "  --budget D         time spent timing candidates (with a mono sweep: the whole\n"
    "                     run; configurations not started by then are left for the\n"
    "                     next run): 90s, 10m, 1h or seconds (default: no limit)\n"
    "  --configs LIST     with a mono sweep: only these configurations (128x1,256x3)\n"
    "  --precision P      storage of float activations and weights (default fp32)\n"
    "  --schedule S       waves (default), kernels or a mono schedule (kiln help compile)\n"
    "  --tuning-db FILE   the SQLite tuning database (default $KILN_TUNING_DB or\n"
    "                     ~/.cache/kiln/tuning.db)\n"
    "  --shape NAME=DIMS  bind a symbolic input dimension\n"
    "  --quiet            no progress lines\n"
    "\n";

static const char bench_help[] =
    "USAGE\n"
    "  kiln bench MODEL|ARTIFACT [--target c|cuda] [--precision P] [--schedule S] [--tune]\n"
    "             [--threads N] [--warmup N] [--iterations N]\n"
    "             [--shape NAME=D0xD1x...]... [--json] [--profile] [--profile-top N]\n"
    "             [--device-io | --pageable]\n"
    "\n"
    "Times runs of a compiled model on random inputs: compile time (for a MODEL),\n"
    "first-run time, then min / median / p90 / p99 latency over the timed\n"
    "iterations (warm-up excluded), throughput, and peak memory (resident set).\n"
    "\n"
    "  --target T       c (default) or cuda, for a MODEL\n"
    "  --precision P    cuda: fp32 (default), fp16 or bf16\n"
    "  --schedule S     cuda: waves (default), kernels, mono or mono-barriers (kiln help compile)\n"
    "  --tune           cuda: tune GEMM/conv templates on the GPU first\n"
    "  --threads N      worker threads (default 1)\n"
    "  --warmup N       untimed runs first (default 5)\n"
    "  --iterations N   timed runs (default 50)\n"
    "  --json           one JSON object instead of text (with --profile: every stage,\n"
    "                   in program order, under \"profile\")\n"
    "  --profile        then the stages that take the most time (per run); a persistent\n"
    "                   kernel (--schedule mono) shows its groups, timed inside it: when\n"
    "                   each ran (us from its start) and its rTasks' mean work and wait\n"
    "                   for producers\n"
    "  --profile-top N  how many of them --profile lists (default 25; 0: every stage)\n"
    "  --device-io      cuda: inputs uploaded once and outputs left in device memory, as a\n"
    "                   framework's tensors are (kiln_rt_run_device): the latency without\n"
    "                   the host copies\n"
    "  --pageable       inputs and outputs in malloc'd host memory; without it or\n"
    "                   --device-io they are in kiln_rt_host_alloc's (page-locked for cuda:\n"
    "                   the copies run at the bus's speed, as a deployment would have them)\n"
    "\n"
    "ENVIRONMENT (cuda)\n"
    "  KILN_DEVICE=N        the GPU to run on (default 0)\n"
    "  KILN_EARLY_LAUNCH=0  on sm_90, launch kernels one after another instead of early\n"
    "                       (programmatic dependent launch: a kernel's blocks start while the\n"
    "                       previous kernel runs), to measure what early launches gain\n"
    "\n";

static const char verify_help[] =
    "USAGE\n"
    "  kiln verify MODEL [--target c|cuda] [--precision P] [--schedule S] [--threads N] [--seed N]\n"
    "              [--shape NAME=D0xD1x...]...\n"
    "\n"
    "Compiles MODEL for the target (default c), runs it and the reference interpreter on the\n"
    "same random inputs and compares every output: max absolute and relative\n"
    "error, and pass/fail against the per-dtype tolerance (f32: 1e-4 + 1e-3 |x|;\n"
    "with --precision fp16 the f16 one: 1e-3 + 1e-2 |x|).\n"
    "Exit status 9 when an output differs.\n"
    "\n";

static const char ops_help[] =
    "USAGE\n"
    "  kiln ops\n"
    "\n"
    "Prints every op kiln knows: ONNX name, input and output arity, flags, and\n"
    "whether the reference interpreter implements it.\n"
    "\n";

static const char devices_help[] =
    "USAGE\n"
    "  kiln devices\n"
    "\n"
    "Lists the CUDA GPUs kiln can use: name, compute capability, multiprocessors,\n"
    "memory and the driver's CUDA version. The driver is loaded at run time\n"
    "(libcuda.so.1); without it, or without a GPU, says why and exits with 7.\n"
    "\n";

static int print_help(const char *cmd)
{
    if (!cmd) printf("%s%s", main_help, exit_codes_text);
    else if (strcmp(cmd, "inspect") == 0) printf("%s%s", inspect_help, exit_codes_text);
    else if (strcmp(cmd, "run") == 0) printf("%s%s", run_help, exit_codes_text);
    else if (strcmp(cmd, "compile") == 0) printf("%s%s", compile_help, exit_codes_text);
    else if (strcmp(cmd, "bench") == 0) printf("%s%s", bench_help, exit_codes_text);
    else if (strcmp(cmd, "tune") == 0) printf("%s%s", tune_help, exit_codes_text);
    else if (strcmp(cmd, "verify") == 0) printf("%s%s", verify_help, exit_codes_text);
    else if (strcmp(cmd, "ops") == 0) printf("%s", ops_help);
    else if (strcmp(cmd, "devices") == 0) printf("%s%s", devices_help, exit_codes_text);
    else {
        fprintf(stderr, "kiln help: unknown command '%s'\n", cmd);
        return 1;
    }
    return 0;
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* Whether the cuda target takes schedule s; else why, in why. */
static bool known_schedule(const char *s, char *why, size_t n)
{
    base_diag d;
    base_diag_init(&d);
    bool ok = target_cuda_check_schedule(s, &d) == KILN_OK;
    if (!ok) snprintf(why, n, "%s", base_diag_text(&d));
    base_diag_free(&d);
    return ok;
}

/* ---- shared: loading and shapes --------------------------------------------------------- */

typedef struct named_shape {
    const char *name;
    int rank;
    int64_t dims[IR_MAX_RANK];
} named_shape;

/* "NAME=1x3x224x224" (an empty DIMS is a scalar). */
static bool parse_shape(const char *arg, named_shape *out)
{
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg) return false;
    static char names[64][256];
    static int n_names;
    if (n_names >= 64 || (size_t)(eq - arg) >= sizeof(names[0])) return false;
    char *nm = names[n_names++];
    memcpy(nm, arg, (size_t)(eq - arg));
    nm[eq - arg] = 0;
    out->name = nm;
    out->rank = 0;
    const char *p = eq + 1;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || out->rank >= IR_MAX_RANK) return false;
        out->dims[out->rank++] = v;
        p = end;
        if (*p == 'x' || *p == ',') p++;
        else if (*p) return false;
    }
    return true;
}

static kiln_status load_model(const char *path, ir_model **m, base_diag *d)
{
    if (path) return onnx_load_file(path, m, d);
    void *buf;
    size_t n;
    KILN_TRY(api_demo_model(&buf, &n));
    kiln_status st = onnx_load_buffer(buf, n, NULL, m, d);
    base_free(buf);
    return st;
}

/* Binds input shapes (from --shape, else from given tensors, else 1 for
 * symbolic dims) and runs shape inference. */
static kiln_status bind_shapes(ir_graph *g, const named_shape *shapes, int n_shapes, const ir_tensor *given,
                               base_diag *d)
{
    kiln_status st = KILN_OK;
    for (int s = 0; s < n_shapes; s++) {
        bool found = false;
        for (int i = 0; i < g->n_inputs; i++) found |= strcmp(g->inputs[i]->name, shapes[s].name) == 0;
        if (!found) st = base_diag_add(d, KILN_ERR_INVALID_ARG, "--shape: the model has no input '%s'", shapes[s].name);
    }
    for (int i = 0; i < g->n_inputs && st == KILN_OK; i++) {
        ir_value *v = g->inputs[i];
        const named_shape *sh = NULL;
        for (int s = 0; s < n_shapes; s++)
            if (strcmp(shapes[s].name, v->name) == 0) sh = &shapes[s];
        if (given && given[i].data) {
            bool fits = given[i].dtype == v->t.dtype && given[i].rank == v->t.rank;
            for (int k = 0; fits && k < v->t.rank; k++) fits = v->t.dims[k] < 0 || v->t.dims[k] == given[i].dims[k];
            if (!fits) {
                char want[160], got[160];
                st = base_diag_add(d, KILN_ERR_SHAPE, "input '%s': the model expects %s, the file holds %s", v->name,
                                   ir_tensor_type_str(&v->t, want, sizeof(want)),
                                   ir_tensor_type_str(&given[i], got, sizeof(got)));
                continue;
            }
            v->t.rank = given[i].rank;
            memcpy(v->t.dims, given[i].dims, sizeof(v->t.dims));
        } else if (sh) {
            if (sh->rank != v->t.rank)
                st = base_diag_add(d, KILN_ERR_SHAPE, "--shape %s: rank %d, the model's input has rank %d", v->name,
                                   sh->rank, v->t.rank);
            for (int k = 0; k < sh->rank && st == KILN_OK; k++) {
                if (v->t.dims[k] >= 0 && v->t.dims[k] != sh->dims[k])
                    st = base_diag_add(d, KILN_ERR_SHAPE, "--shape %s: dim %d is %lld in the model, not %lld",
                                       v->name, k, (long long)v->t.dims[k], (long long)sh->dims[k]);
                v->t.dims[k] = sh->dims[k];
            }
        } else {
            for (int k = 0; k < v->t.rank; k++)
                if (v->t.dims[k] < 0) v->t.dims[k] = 1;
        }
        v->shape_known = true;
    }
    if (st != KILN_OK) return st;
    return ir_infer_shapes(g, d);
}

/* ---- inspect ------------------------------------------------------------------------------ */

static void print_value_line(const ir_value *v)
{
    char buf[200];
    printf("  %-32s %s%s\n", v->name, ir_tensor_type_str(&v->t, buf, sizeof(buf)),
           v->shape_known ? "" : "  (shape unknown until run)");
}

static void count_ops(const ir_graph *g, int *hist, int *unknown, int64_t *n_nodes)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        (*n_nodes)++;
        if (n->op == KILN_OP_COUNT) (*unknown)++;
        else hist[n->op]++;
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == IR_ATTR_GRAPH) count_ops(n->attrs[a].g, hist, unknown, n_nodes);
    }
}

/* The cuda rProgram of schedule for planned program p, without building it. */
static kiln_status print_rprogram(const ir_graph *g, const sched_program *p, const char *schedule,
                                  const char *precision, base_diag *d)
{
    target_options o = {.n_threads = 1, .schedule = schedule, .precision = precision, .listing_only = true};
    target_output out = {0};
    kiln_status st = target_cuda.build(g, p, &o, &out, d);
    if (st == KILN_OK) printf("%s", out.listing);
    target_output_free(&out);
    return st;
}

static int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    named_shape shapes[64];
    int n_shapes = 0;
    bool print_graph = false;
    const char *schedule = NULL, *precision = NULL;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) return print_help("inspect");
        if (strcmp(argv[i], "--schedule") == 0 && i + 1 < argc) {
            schedule = argv[++i];
            char why[512], msg[700];
            if (!known_schedule(schedule, why, sizeof(why))) {
                snprintf(msg, sizeof(msg), "bad --schedule '%s': %s", schedule, why);
                return usage_error("inspect", "%s", msg);
            }
            continue;
        }
        if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
            precision = argv[++i];
            if (strcmp(precision, "fp32") != 0 && strcmp(precision, "fp16") != 0 && strcmp(precision, "bf16") != 0)
                return usage_error("inspect", "bad --precision '%s' (want fp32, fp16 or bf16)", precision);
            continue;
        }
        if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            if (n_shapes >= 64 || !parse_shape(argv[++i], &shapes[n_shapes++]))
                return usage_error("inspect", "bad --shape '%s' (want NAME=D0xD1x...)", argv[i]);
        } else if (strcmp(argv[i], "--graph") == 0) print_graph = true;
        else if (argv[i][0] == '-') return usage_error("inspect", "unknown option '%s'", argv[i]);
        else if (!path) path = argv[i];
        else return usage_error("inspect", "unexpected argument '%s'", argv[i]);
    }
    if (!path) return usage_error("inspect", "%s", "a MODEL is required");
    if (precision && !schedule) return usage_error("inspect", "%s", "--precision goes with --schedule");
    base_diag d;
    base_diag_init(&d);
    ir_model *m;
    kiln_status st = load_model(path, &m, &d);
    if (st != KILN_OK) {
        int rc = fail(st, &d, path);
        base_diag_free(&d);
        return rc;
    }
    ir_graph *g = m->graph;
    base_diag infer_d;
    base_diag_init(&infer_d);
    kiln_status infer_st = bind_shapes(g, shapes, n_shapes, NULL, &infer_d);
    printf("model      %s\n", path);
    printf("producer   %s\n", m->producer[0] ? m->producer : "(none)");
    printf("ir         %d, opset %lld\n", m->ir_version, (long long)m->opset);
    printf("inputs     %d\n", g->n_inputs);
    for (int i = 0; i < g->n_inputs; i++) print_value_line(g->inputs[i]);
    printf("outputs    %d\n", g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) print_value_line(g->outputs[i]);
    int hist[KILN_OP_COUNT] = {0}, unknown = 0;
    int64_t n_nodes = 0;
    count_ops(g, hist, &unknown, &n_nodes);
    printf("nodes      %lld\n", (long long)n_nodes);
    for (int i = 0; i < KILN_OP_COUNT; i++)
        if (hist[i]) printf("  %-32s %d\n", ir_ops[i].name, hist[i]);
    if (unknown) printf("  %-32s %d\n", "(unknown ops)", unknown);
    int64_t n_params, n_bytes;
    ir_graph_param_stats(g, &n_params, &n_bytes);
    printf("parameters %lld (%.2f MB)\n", (long long)n_params, (double)n_bytes / 1e6);
    base_diag sd;
    base_diag_init(&sd);
    st = onnx_check_support(g, &sd);
    if (st == KILN_OK) printf("support    every op is supported\n");
    else printf("support    %s\n", base_diag_text(&sd));
    if (infer_st != KILN_OK) printf("shapes     inference failed:\n%s\n", base_diag_text(&infer_d));
    /* the graph as the model gives it: planning rewires repeated nodes' readers (pass_cse) */
    base_str graph_text;
    base_str_init(&graph_text);
    if (print_graph) ir_graph_print(g, &graph_text);
    if (infer_st == KILN_OK) {
        /* what each target would make of it, without building */
        static const char *const targets[] = {"c", "cuda"};
        for (size_t t = 0; t < KILN_COUNT(targets); t++) {
            base_arena pa;
            base_arena_init(&pa);
            sched_program p;
            base_diag pd;
            base_diag_init(&pd);
            if (api_plan(g, target_lookup(targets[t]), t > 0 ? schedule : NULL, &p, &pa, &pd) == KILN_OK) {
                int kinds[SCHED_GROUP_KIND_COUNT] = {0}, n_fb = 0;
                for (int i = 0; i < p.n_groups; i++) {
                    kinds[p.groups[i]->kind]++;
                    if (p.groups[i]->kind == SCHED_GROUP_FALLBACK) n_fb += p.groups[i]->n_nodes;
                }
                printf("%-4s target %d groups:", targets[t], p.n_groups);
                for (int k = 0; k < SCHED_GROUP_KIND_COUNT; k++)
                    if (kinds[k]) printf(" %s %d", sched_group_kind_name((sched_group_kind)k), kinds[k]);
                printf("; %d nodes in %s\n", n_fb, t == 0 ? "fallback segments" : "host segments");
                /* the first plan merges them (pass_cse), for every target */
                if (p.merged_nodes)
                    printf("repeats    %d node%s identical to an earlier one (same op, attributes and inputs) "
                           "left out\n", p.merged_nodes, p.merged_nodes == 1 ? "" : "s");
                /* the GPU leaves only data-dependent ops to the host: say which */
                int shown = 0;
                for (int i = 0; t > 0 && i < p.n_groups; i++) {
                    const sched_group *grp = p.groups[i];
                    if (grp->kind != SCHED_GROUP_FALLBACK) continue;
                    for (int k = 0; k < grp->n_nodes && shown < 20; k++, shown++)
                        printf("  host segment %d: node '%s' (%s)\n", i, grp->nodes[k]->name, grp->nodes[k]->op_type);
                }
                if (shown == 20 && n_fb > 20) printf("  ... %d more nodes in host segments\n", n_fb - 20);
                if (t == 0)
                    printf("memory     peak activations %.2f MB (planned arena), weights %.2f MB\n",
                           (double)p.arena_bytes / 1e6, (double)p.weight_bytes / 1e6);
                if (t > 0 && schedule) {
                    kiln_status ls = print_rprogram(g, &p, schedule, precision, &pd);
                    if (ls != KILN_OK) {
                        printf("rProgram   cannot list: %s\n", base_diag_text(&pd));
                        if (st == KILN_OK) st = ls;
                    }
                }
                sched_program_free(&p);
            } else {
                printf("%-4s target cannot plan: %s\n", targets[t], base_diag_text(&pd));
            }
            base_diag_free(&pd);
            base_arena_free(&pa);
        }
    }
    if (print_graph) printf("\n%s", base_str_get(&graph_text));
    base_str_free(&graph_text);
    base_diag_free(&sd);
    base_diag_free(&infer_d);
    base_diag_free(&d);
    ir_model_free(m);
    return exit_code(st != KILN_OK ? st : infer_st);
}

/* ---- shared by run / compile / bench / verify ---------------------------------------------- */

typedef struct cli_args {
    const char *path, *out_path, *npz_path, *target, *emit_dir, *artifact_out, *precision, *tuning_db, *schedule;
    named_shape shapes[64];
    int n_shapes;
    struct {
        const char *name, *file;
    } files[64];
    int n_files;
    bool quiet, check, json, profile, tune, device_io, pageable;
    uint64_t seed;
    int threads, warmup, iterations;
    int profile_top; /* stages --profile lists; 0: all */
    double budget_s; /* tune --budget; 0: none */
    const char *configs; /* tune --configs: mono configurations to try ("128x1,256x3"); NULL: all */
} cli_args;

/* "90s", "10m", "1h", "1.5h" or plain seconds; false unless positive and finite. */
static bool parse_duration(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    double unit = 1;
    if (end == s) return false;
    if (strcmp(end, "h") == 0) unit = 3600;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0) unit = 60;
    else if (*end && strcmp(end, "s") != 0) return false;
    *out = v * unit;
    return v > 0 && *out < 1e9;
}

/* Parses the options the commands share; returns -1 to go on, else an exit code. */
static int parse_args(const char *cmd, int argc, char **argv, cli_args *a)
{
    memset(a, 0, sizeof(*a));
    a->warmup = 5;
    a->iterations = 50;
    a->profile_top = 25;
    for (int i = 0; i < argc; i++) {
        const char *x = argv[i];
        bool has_val = i + 1 < argc;
        if (is_help(x)) return print_help(cmd);
        if (strcmp(x, "--input") == 0 && has_val) {
            const char *v = argv[++i], *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1] || a->n_files >= 64)
                return usage_error(cmd, "bad --input '%s' (want NAME=FILE.npy)", v);
            a->files[a->n_files].name = v;
            a->files[a->n_files++].file = eq + 1;
        } else if (strcmp(x, "--inputs") == 0 && has_val) a->npz_path = argv[++i];
        else if (strcmp(x, "--shape") == 0 && has_val) {
            if (a->n_shapes >= 64 || !parse_shape(argv[++i], &a->shapes[a->n_shapes++]))
                return usage_error(cmd, "bad --shape '%s' (want NAME=D0xD1x...)", argv[i]);
        } else if (strcmp(x, "--seed") == 0 && has_val) a->seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(x, "--output") == 0 && has_val) a->out_path = argv[++i];
        else if (strcmp(x, "-o") == 0 && has_val) a->artifact_out = argv[++i];
        else if (strcmp(x, "--target") == 0 && has_val) a->target = argv[++i];
        else if (strcmp(x, "--emit-source") == 0 && has_val) a->emit_dir = argv[++i];
        else if (strcmp(x, "--precision") == 0 && has_val) a->precision = argv[++i];
        else if (strcmp(x, "--tuning-db") == 0 && has_val) a->tuning_db = argv[++i];
        else if (strcmp(x, "--schedule") == 0 && has_val) a->schedule = argv[++i];
        else if (strcmp(x, "--tune") == 0) a->tune = true;
        else if ((strcmp(x, "--threads") == 0 || strcmp(x, "--warmup") == 0 || strcmp(x, "--iterations") == 0) &&
                 has_val) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < (strcmp(x, "--warmup") == 0 ? 0 : 1) || v > 100000)
                return usage_error(cmd, "bad number '%s'", argv[i]);
            if (strcmp(x, "--threads") == 0) a->threads = (int)v;
            else if (strcmp(x, "--warmup") == 0) a->warmup = (int)v;
            else a->iterations = (int)v;
        } else if (strcmp(x, "--quiet") == 0) a->quiet = true;
        else if (strcmp(x, "--check") == 0) a->check = true;
        else if (strcmp(x, "--json") == 0) a->json = true;
        else if (strcmp(x, "--profile") == 0) a->profile = true;
        else if (strcmp(x, "--device-io") == 0) a->device_io = true;
        else if (strcmp(x, "--pageable") == 0 && strcmp(cmd, "bench") == 0) a->pageable = true;
        else if (strcmp(x, "--profile-top") == 0 && has_val) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || v < 0 || v > 1000000)
                return usage_error(cmd, "bad --profile-top '%s'", argv[i]);
            a->profile = true;
            a->profile_top = (int)v;
        } else if (strcmp(x, "--budget") == 0 && has_val && strcmp(cmd, "tune") == 0) {
            if (!parse_duration(argv[++i], &a->budget_s))
                return usage_error(cmd, "bad --budget '%s' (want 90s, 10m, 1h or seconds)", argv[i]);
        } else if (strcmp(x, "--configs") == 0 && has_val && strcmp(cmd, "tune") == 0) a->configs = argv[++i];
        else if (x[0] == '-') return usage_error(cmd, "unknown option or missing value '%s'", x);
        else if (!a->path) a->path = x;
        else return usage_error(cmd, "unexpected argument '%s'", x);
    }
    if (strcmp(cmd, "tune") == 0) {
        if (a->target && strcmp(a->target, "cuda") != 0)
            return usage_error(cmd, "tunes for the cuda target only (not '%s')", a->target);
        a->target = "cuda";
        a->tune = true;
    }
    if (a->target && strcmp(a->target, "c") != 0 && strcmp(a->target, "cuda") != 0 && strcmp(a->target, "interp") != 0)
        return usage_error(cmd, "unknown target '%s' (known: c, cuda, interp)", a->target);
    if (a->precision && strcmp(a->precision, "fp32") != 0 && strcmp(a->precision, "fp16") != 0 &&
        strcmp(a->precision, "bf16") != 0)
        return usage_error(cmd, "unknown precision '%s' (fp32, fp16 or bf16)", a->precision);
    char why[512];
    if (a->schedule && !known_schedule(a->schedule, why, sizeof(why))) return usage_error(cmd, "%s", why);
    if (a->device_io && a->target && strcmp(a->target, "cuda") != 0)
        return usage_error(cmd, "%s", "--device-io needs --target cuda (or a cuda artifact)");
    if (a->device_io && a->pageable) return usage_error(cmd, "%s", "--device-io and --pageable exclude each other");
    if ((a->precision || a->tune || a->schedule) && !(a->target && strcmp(a->target, "cuda") == 0))
        return usage_error(cmd, "%s", "--precision, --schedule and --tune need --target cuda");
    return -1;
}

static bool is_artifact(const char *path)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    char magic[8] = {0};
    if (!f) return false;
    size_t n = fread(magic, 1, 8, f);
    fclose(f);
    return n == 8 && memcmp(magic, "KILNART", 8) == 0;
}

static uint64_t rng_state;

static double rng_uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static void fill_random(ir_tensor *t)
{
    int64_t n = ir_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (ir_dtype_is_float(t->dtype)) ir_set_f64(t, i, rng_uniform() * 2 - 1);
        else if (t->dtype == KILN_BOOL) ir_set_i64(t, i, rng_uniform() < 0.5);
        else ir_set_i64(t, i, (int64_t)(rng_uniform() * 10));
    }
}

/* Loads the tensors named by --input / --inputs into ins[] by input name. */
static kiln_status load_input_files(const cli_args *a, int n_in, const char *const *names, ir_tensor *ins,
                                    base_diag *d)
{
    for (int f = 0; f < a->n_files; f++) {
        size_t len = (size_t)(a->files[f].file - 1 - a->files[f].name);
        int i = 0;
        while (i < n_in && !(strlen(names[i]) == len && strncmp(names[i], a->files[f].name, len) == 0)) i++;
        if (i == n_in)
            return base_diag_add(d, KILN_ERR_INVALID_ARG, "--input: the model has no input '%.*s'", (int)len,
                                 a->files[f].name);
        ir_tensor_release(&ins[i]);
        KILN_TRY(api_npy_load(a->files[f].file, &ins[i], d));
    }
    if (!a->npz_path) return KILN_OK;
    api_npz npz = {0};
    KILN_TRY(api_npz_load(a->npz_path, &npz, d));
    kiln_status st = KILN_OK;
    for (int k = 0; k < npz.n && st == KILN_OK; k++) {
        int i = 0;
        while (i < n_in && strcmp(names[i], npz.names[k]) != 0) i++;
        if (i == n_in) st = base_diag_add(d, KILN_ERR_INVALID_ARG, "%s: the model has no input '%s'", a->npz_path, npz.names[k]);
        else if (!ins[i].data) st = ir_tensor_copy(&ins[i], &npz.tensors[k]);
    }
    api_npz_free(&npz);
    return st;
}

/* Inputs for an IR graph: files, then shapes bound, then random for the rest. */
static kiln_status graph_inputs(ir_graph *g, const cli_args *a, ir_tensor *ins, base_diag *d)
{
    const char *names[IR_EVAL_MAX_IO] = {0};
    for (int i = 0; i < g->n_inputs; i++) names[i] = g->inputs[i]->name;
    KILN_TRY(load_input_files(a, g->n_inputs, names, ins, d));
    KILN_TRY(bind_shapes(g, a->shapes, a->n_shapes, ins, d));
    rng_state = a->seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < g->n_inputs; i++) {
        if (ins[i].data) continue; /* given as a file */
        const ir_value *v = g->inputs[i];
        KILN_TRY(ir_tensor_alloc(&ins[i], v->t.dtype, v->t.rank, v->t.dims));
        fill_random(&ins[i]);
    }
    return KILN_OK;
}

/* Inputs for an artifact, by its signature. */
static kiln_status artifact_inputs(const kiln_rt_model *rm, const cli_args *a, ir_tensor *ins, base_diag *d)
{
    int n = kiln_rt_num_inputs(rm);
    const char *names[IR_EVAL_MAX_IO] = {0};
    for (int i = 0; i < n; i++) names[i] = kiln_rt_input(rm, i)->name;
    KILN_TRY(load_input_files(a, n, names, ins, d));
    rng_state = a->seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < n; i++) {
        const kiln_rt_tensor_info *info = kiln_rt_input(rm, i);
        ir_tensor want = {.dtype = info->dtype, .rank = info->rank};
        memcpy(want.dims, info->dims, (size_t)info->rank * sizeof(int64_t));
        if (ins[i].data) {
            if (ins[i].dtype != want.dtype || !ir_same_shape(&ins[i], &want)) {
                char b1[160], b2[160];
                return base_diag_add(d, KILN_ERR_SHAPE, "input '%s': the artifact expects %s, the file holds %s",
                                     info->name, ir_tensor_type_str(&want, b1, sizeof(b1)),
                                     ir_tensor_type_str(&ins[i], b2, sizeof(b2)));
            }
            continue;
        }
        KILN_TRY(ir_tensor_alloc(&ins[i], want.dtype, want.rank, want.dims));
        fill_random(&ins[i]);
    }
    return KILN_OK;
}

static kiln_status rt_error(kiln_status st, base_diag *d)
{
    return base_diag_add(d, st, "%s", kiln_rt_last_error());
}

/* Allocates outputs by the artifact's signature and runs once. */
static kiln_status artifact_run(kiln_rt_model *rm, const ir_tensor *ins, ir_tensor *outs, base_diag *d)
{
    const void *in_ptrs[IR_EVAL_MAX_IO];
    void *out_ptrs[IR_EVAL_MAX_IO];
    int n_in = kiln_rt_num_inputs(rm), n_out = kiln_rt_num_outputs(rm);
    for (int i = 0; i < n_in; i++) in_ptrs[i] = ins[i].data;
    for (int i = 0; i < n_out; i++) {
        const kiln_rt_tensor_info *info = kiln_rt_output(rm, i);
        bool dynamic = info->rank > 0 && info->dims[0] < 0; /* shape known after the run */
        if (!outs[i].data && !dynamic) KILN_TRY(ir_tensor_alloc(&outs[i], info->dtype, info->rank, info->dims));
        out_ptrs[i] = dynamic ? NULL : outs[i].data;
    }
    kiln_status st = kiln_rt_run(rm, in_ptrs, out_ptrs);
    if (st != KILN_OK) return rt_error(st, d);
    for (int i = 0; i < n_out; i++) {
        if (out_ptrs[i]) continue;
        kiln_rt_tensor_info info;
        const void *data = kiln_rt_result(rm, i, &info);
        ir_tensor_release(&outs[i]);
        if (!data) return base_diag_add(d, KILN_ERR_INTERNAL, "output %d has no result", i);
        KILN_TRY(ir_tensor_alloc(&outs[i], info.dtype, info.rank, info.dims));
        memcpy(outs[i].data, data, info.nbytes);
    }
    return KILN_OK;
}

static void progress_line(void *user, const char *line)
{
    if (!*(const bool *)user) fprintf(stderr, "kiln: %s\n", line);
}

/* The target a model compiles for: --target, else c. */
static const char *target_of(const cli_args *a)
{
    return a->target && strcmp(a->target, "interp") != 0 ? a->target : "c";
}

/* "c target, 2 threads" / "cuda target, fp16": where a model runs, for reports. */
static const char *where(const kiln_rt_model *rm, char *buf, size_t n)
{
    if (strcmp(kiln_rt_target(rm), "cuda") == 0)
        snprintf(buf, n, "cuda target, %s", kiln_rt_precision(rm) ? kiln_rt_precision(rm) : "fp32");
    else
        snprintf(buf, n, "c target, %d thread%s", kiln_rt_num_threads(rm), kiln_rt_num_threads(rm) == 1 ? "" : "s");
    return buf;
}

static kiln_status compile_model(ir_model *m, const cli_args *a, const char *out_path, api_compile_report *rep,
                                 base_diag *d)
{
    bool quiet = a->quiet || a->json;
    api_compile_opts o = {.target = target_of(a), .n_threads = a->threads > 0 ? a->threads : 1,
                          .emit_dir = a->emit_dir, .meta = a->path ? a->path : "embedded default model",
                          .progress = progress_line, .progress_user = &quiet, .precision = a->precision,
                          .tune = a->tune, .tuning_db = a->tuning_db, .schedule = a->schedule,
                          .tune_budget_s = a->budget_s};
    return api_compile(m, &o, out_path, rep, d);
}

static const char *temp_artifact(char *buf, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/kiln-%d-XXXXXX", tmp && tmp[0] ? tmp : "/tmp", (int)getpid());
    int fd = mkstemp(buf);
    if (fd < 0) return NULL;
    close(fd);
    return buf;
}

/* Loads an ONNX model (or the embedded one), compiles it to a temporary
 * artifact and loads that; also hands back the model and the inputs. */
static kiln_status prepare_compiled(const cli_args *a, ir_model **m, ir_tensor *ins, kiln_rt_model **rm,
                                    api_compile_report *rep, ir_tensor *ref, base_diag *d)
{
    KILN_TRY(load_model(a->path, m, d));
    KILN_TRY(onnx_check_support((*m)->graph, d));
    KILN_TRY(graph_inputs((*m)->graph, a, ins, d));
    if (ref) {
        /* the reference comes from the graph as the model gave it: the
         * compile rewires it (pass_cse), and a wrong rewiring must show */
        ir_interp_opts opts = {.seed = a->seed};
        KILN_TRY(ir_interp_run((*m)->graph, ins, ref, &opts, d));
    }
    char tmp[512];
    if (!temp_artifact(tmp, sizeof(tmp))) return base_diag_add(d, KILN_ERR_IO, "cannot make a temporary file");
    kiln_status st = compile_model(*m, a, tmp, rep, d);
    if (st == KILN_OK) {
        st = kiln_rt_load(tmp, a->threads, rm);
        if (st != KILN_OK) rt_error(st, d);
    }
    unlink(tmp);
    return st;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_summary(const char *name, const ir_tensor *t)
{
    char buf[200];
    int64_t n = ir_numel(t);
    printf("  %-24s %s", name, ir_tensor_type_str(t, buf, sizeof(buf)));
    if (n == 0) {
        printf("  (empty)\n");
        return;
    }
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ir_get_f64(t, i);
        lo = fmin(lo, x);
        hi = fmax(hi, x);
        sum += x;
    }
    printf("  min %.6g  max %.6g  mean %.6g\n    [", lo, hi, sum / (double)n);
    for (int64_t i = 0; i < n && i < 8; i++) printf("%s%.6g", i ? ", " : "", ir_get_f64(t, i));
    printf("%s]\n", n > 8 ? ", ..." : "");
}

/* Compares outputs with the interpreter's; prints a table; false on mismatch. */
static bool compare_outputs(const ir_graph *g, const ir_tensor *got, const ir_tensor *want, const char *precision,
                            bool quiet)
{
    bool all_ok = true;
    if (!quiet) printf("check against the reference interpreter\n");
    for (int i = 0; i < g->n_outputs; i++) {
        api_tolerance tol = api_tolerance_for_precision(want[i].dtype, precision);
        api_compare c = api_compare_tensors(&got[i], &want[i], tol);
        bool ok = c.shape_ok && c.n_bad == 0;
        all_ok &= ok;
        if (quiet && ok) continue;
        if (!c.shape_ok) {
            char b1[160], b2[160];
            printf("  %-24s FAIL: got %s, the interpreter %s\n", g->outputs[i]->name,
                   ir_tensor_type_str(&got[i], b1, sizeof(b1)), ir_tensor_type_str(&want[i], b2, sizeof(b2)));
            continue;
        }
        printf("  %-24s %s  max abs err %.3g  max rel err %.3g", g->outputs[i]->name, ok ? "pass" : "FAIL", c.max_abs,
               c.max_rel);
        if (!ok) printf("  (%lld values outside atol %g + rtol %g; first at %lld)", (long long)c.n_bad, tol.atol,
                        tol.rtol, (long long)c.first_bad);
        printf("\n");
    }
    return all_ok;
}

static void release_all(ir_tensor *t, int n)
{
    for (int i = 0; i < n; i++) ir_tensor_release(&t[i]);
}

static kiln_status save_outputs(const char *path, int n, const char *const *names, const ir_tensor *outs, bool quiet,
                                base_diag *d)
{
    KILN_TRY(api_npz_save(path, n, names, outs, d));
    if (!quiet) printf("wrote   %s\n", path);
    return KILN_OK;
}

/* ---- run ---------------------------------------------------------------------------------- */

static int run_artifact(const cli_args *a)
{
    base_diag d;
    base_diag_init(&d);
    ir_tensor ins[IR_EVAL_MAX_IO] = {{0}}, outs[IR_EVAL_MAX_IO] = {{0}};
    kiln_rt_model *rm = NULL;
    kiln_status st = kiln_rt_load(a->path, a->threads, &rm);
    if (st != KILN_OK) rt_error(st, &d);
    if (st == KILN_OK) st = artifact_inputs(rm, a, ins, &d);
    double t0 = now_s();
    if (st == KILN_OK) st = artifact_run(rm, ins, outs, &d);
    double t1 = now_s();
    if (st == KILN_OK && !a->quiet) {
        printf("artifact %s (%d threads)\noutputs (%.3f ms)\n", a->path, kiln_rt_num_threads(rm), (t1 - t0) * 1e3);
        for (int i = 0; i < kiln_rt_num_outputs(rm); i++) print_summary(kiln_rt_output(rm, i)->name, &outs[i]);
    }
    if (st == KILN_OK && a->out_path) {
        const char *names[IR_EVAL_MAX_IO] = {0};
        for (int i = 0; i < kiln_rt_num_outputs(rm); i++) names[i] = kiln_rt_output(rm, i)->name;
        st = save_outputs(a->out_path, kiln_rt_num_outputs(rm), names, outs, a->quiet, &d);
    }
    int rc = st == KILN_OK ? 0 : fail(st, &d, a->path);
    release_all(ins, IR_EVAL_MAX_IO);
    release_all(outs, IR_EVAL_MAX_IO);
    kiln_rt_free(rm);
    base_diag_free(&d);
    return rc;
}

static int cmd_run(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args("run", argc, argv, &a);
    if (rc >= 0) return rc;
    if (is_artifact(a.path)) return run_artifact(&a);
    bool interp = a.target && strcmp(a.target, "interp") == 0;
    if (!a.path) a.check = true; /* the embedded model checks itself */
    /* the main job: the embedded model runs on the GPU when there is one */
    if (!a.path && !a.target && rt_cuda_device_count() > 0) a.target = "cuda";
    char wbuf[96];
    const char *what = a.path ? a.path : "embedded default model";
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    kiln_rt_model *rm = NULL;
    ir_tensor ins[IR_EVAL_MAX_IO] = {{0}}, outs[IR_EVAL_MAX_IO] = {{0}}, ref[IR_EVAL_MAX_IO] = {{0}};
    api_compile_report rep;
    kiln_status st;
    double t0 = 0, t1 = 0, first = 0;
    if (interp) {
        st = load_model(a.path, &m, &d);
        if (st == KILN_OK) st = onnx_check_support(m->graph, &d);
        if (st == KILN_OK) st = graph_inputs(m->graph, &a, ins, &d);
        t0 = now_s();
        ir_interp_opts opts = {.seed = a.seed};
        if (st == KILN_OK) st = ir_interp_run(m->graph, ins, outs, &opts, &d);
        t1 = now_s();
    } else {
        st = prepare_compiled(&a, &m, ins, &rm, &rep, a.check ? ref : NULL, &d);
        double f0 = now_s();
        if (st == KILN_OK) st = artifact_run(rm, ins, outs, &d);
        first = now_s() - f0;
        /* the latency of a warm run */
        t0 = now_s();
        if (st == KILN_OK) st = artifact_run(rm, ins, outs, &d);
        t1 = now_s();
    }
    bool same = true;
    if (st == KILN_OK) {
        ir_graph *g = m->graph;
        if (!a.quiet) {
            printf("model   %s\ninputs\n", what);
            for (int i = 0; i < g->n_inputs; i++) print_summary(g->inputs[i]->name, &ins[i]);
            if (interp) printf("outputs (reference interpreter, %.3f ms)\n", (t1 - t0) * 1e3);
            else
                printf("compiled for the %s target in %.2f s: %d stages, %d nodes in fallback segments; arena %.2f MB\n"
                       "outputs (%s, %.3f ms; first run %.3f ms)\n",
                       target_of(&a), rep.seconds_total, rep.n_stages, rep.n_fallback_nodes,
                       (double)rep.arena_bytes / 1e6, where(rm, wbuf, sizeof(wbuf)), (t1 - t0) * 1e3, first * 1e3);
            for (int i = 0; i < g->n_outputs; i++) print_summary(g->outputs[i]->name, &outs[i]);
        }
        if (a.check && !interp) same = compare_outputs(g, outs, ref, a.precision, a.quiet); /* ref: prepare_compiled */
        if (st == KILN_OK && a.out_path) {
            const char *names[IR_EVAL_MAX_IO] = {0};
            for (int i = 0; i < g->n_outputs; i++) names[i] = g->outputs[i]->name;
            st = save_outputs(a.out_path, g->n_outputs, names, outs, a.quiet, &d);
        }
    }
    rc = st != KILN_OK ? fail(st, &d, what) : same ? 0 : 9;
    release_all(ins, IR_EVAL_MAX_IO);
    release_all(outs, IR_EVAL_MAX_IO);
    release_all(ref, IR_EVAL_MAX_IO);
    kiln_rt_free(rm);
    ir_model_free(m);
    base_diag_free(&d);
    return rc;
}

/* ---- compile ----------------------------------------------------------------------------- */

/* a.path loaded, its ops checked, the --shape bindings applied: what compile and tune build from. */
static kiln_status load_for_compile(const cli_args *a, ir_model **m, base_diag *d)
{
    KILN_TRY(load_model(a->path, m, d));
    KILN_TRY(onnx_check_support((*m)->graph, d));
    return bind_shapes((*m)->graph, a->shapes, a->n_shapes, NULL, d);
}

static int cmd_compile(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args("compile", argc, argv, &a);
    if (rc >= 0) return rc;
    if (!a.path) return usage_error("compile", "%s", "a MODEL is required");
    if (!a.artifact_out) return usage_error("compile", "%s", "-o OUT.kiln is required");
    if (a.target && strcmp(a.target, "interp") == 0) return usage_error("compile", "target '%s' cannot be compiled", a.target);
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    api_compile_report rep;
    kiln_status st = load_for_compile(&a, &m, &d);
    if (st == KILN_OK) st = compile_model(m, &a, a.artifact_out, &rep, &d);
    if (st == KILN_OK && !a.quiet) {
        printf("compiled %s -> %s for %s in %.2f s (partition %.2f s, code build %.2f s)\n", a.path, a.artifact_out,
               target_of(&a), rep.seconds_total, rep.seconds_partition, rep.seconds_build);
        printf("  stages %d:", rep.n_stages);
        for (int k = 0; k < SCHED_GROUP_KIND_COUNT; k++)
            if (rep.n_groups_by_kind[k]) printf(" %s %d", sched_group_kind_name((sched_group_kind)k), rep.n_groups_by_kind[k]);
        printf("\n  nodes in fallback segments %d\n  activation arena %.2f MB, weights %.2f MB, code %.1f KB\n",
               rep.n_fallback_nodes, (double)rep.arena_bytes / 1e6, (double)rep.weight_bytes / 1e6,
               (double)rep.code_bytes / 1e3);
    }
    rc = st == KILN_OK ? 0 : fail(st, &d, a.path);
    ir_model_free(m);
    base_diag_free(&d);
    return rc;
}

/* ---- bench -------------------------------------------------------------------------------- */

typedef struct stage_time {
    int stage;
    double run, wait;
} stage_time;

static int by_time_desc(const void *x, const void *y)
{
    const stage_time *a = x, *b = y;
    double ta = a->run + a->wait, tb = b->run + b->wait;
    return ta < tb ? 1 : ta > tb ? -1 : 0;
}

/* s as a JSON string: quotes, backslashes and control characters escaped. */
static void print_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20) printf("\\u%04x", *c);
        else putchar(*c);
    }
    putchar('"');
}

/* --profile: a.iterations profiled runs; their stages, the most expensive
 * first, in *out (n of them; NULL when profiling is not possible), and the
 * per-run total. */
static void profile_runs(kiln_rt_model *rm, const cli_args *a, ir_tensor *ins, ir_tensor *outs, base_diag *d,
                         stage_time **out, int *n_out, double *total)
{
    int n = kiln_rt_num_stages(rm);
    stage_time *t = base_calloc((size_t)n + 1, sizeof(*t));
    *out = NULL;
    *n_out = 0;
    *total = 0;
    if (!t || kiln_rt_set_profiling(rm, 1) != KILN_OK) {
        base_free(t);
        return;
    }
    for (int i = 0; i < a->iterations; i++)
        if (artifact_run(rm, ins, outs, d) != KILN_OK) break;
    for (int s = 0; s < n; s++) {
        t[s].stage = s;
        kiln_rt_stage_profile(rm, s, NULL, NULL, &t[s].run, &t[s].wait);
        t[s].run /= a->iterations;
        t[s].wait /= a->iterations;
        *total += t[s].run + t[s].wait;
    }
    kiln_rt_set_profiling(rm, 0);
    qsort(t, (size_t)n, sizeof(*t), by_time_desc);
    *out = t;
    *n_out = n;
}

/* A member of a persistent kernel: when it ran (from the kernel's start) and
 * its rTasks' mean work and wait, per run, in us; false for other stages. */
static bool stage_timeline_us(kiln_rt_model *rm, const cli_args *a, int stage, int tasks, double *start, double *end,
                              double *busy, double *waited)
{
    if (kiln_rt_stage_timeline(rm, stage, start, end, busy, waited) != KILN_OK) return false;
    double per = (double)a->iterations * (tasks > 0 ? tasks : 1);
    *start *= 1e6 / a->iterations;
    *end *= 1e6 / a->iterations;
    *busy *= 1e6 / per;
    *waited *= 1e6 / per;
    return true;
}

/* Runs the benchmark's iterations again with stage profiling and prints the
 * stages that take the most time; with --json instead ", \"profile\": {...}"
 * with every stage in program order: its name (whole), rTasks, run and wait
 * per run, and for a member of a persistent kernel its timeline
 * (stage_timeline_us). */
static void print_profile(kiln_rt_model *rm, const cli_args *a, ir_tensor *ins, ir_tensor *outs, base_diag *d)
{
    stage_time *t;
    int n;
    double total;
    profile_runs(rm, a, ins, outs, d, &t, &n, &total);
    if (!t) return;
    int top = a->profile_top > 0 && a->profile_top < n ? a->profile_top : n;
    if (a->json) {
        printf(", \"profile\": {\"total_us\": %.2f, \"stages\": [", total * 1e6);
        top = n;
    } else {
        printf("  profile      %d stages, %.3f ms per run as the calling thread sees it; %s:\n", n, total * 1e3,
               top == n ? "every stage, the most expensive first" : "the most expensive");
    }
    for (int i = 0; i < top; i++) {
        int k = 0;
        if (a->json)
            while (t[k].stage != i) k++; /* program order */
        else k = i;
        const char *name;
        int tasks;
        double start, end, busy, waited;
        kiln_rt_stage_profile(rm, t[k].stage, &name, &tasks, NULL, NULL);
        bool timeline = stage_timeline_us(rm, a, t[k].stage, tasks, &start, &end, &busy, &waited);
        if (a->json) {
            printf("%s\n  {\"stage\": %d, \"name\": ", i ? "," : "", t[k].stage);
            print_json_string(name);
            printf(", \"rtasks\": %d, \"run_us\": %.3f, \"wait_us\": %.3f", tasks, t[k].run * 1e6, t[k].wait * 1e6);
            if (timeline)
                printf(", \"start_us\": %.2f, \"end_us\": %.2f, \"rtask_us\": %.3f, \"rtask_wait_us\": %.3f", start,
                       end, busy, waited);
            putchar('}');
            continue;
        }
        printf("    %5.1f%%  %8.3f ms run %7.3f ms wait  %5d rTasks  ", 100 * (t[k].run + t[k].wait) / (total > 0 ? total : 1),
               t[k].run * 1e3, t[k].wait * 1e3, tasks);
        if (timeline) printf("at %8.1f..%8.1f us, rTask %6.2f us + %6.2f us waiting  ", start, end, busy, waited);
        printf("#%d %.90s\n", t[k].stage, name);
    }
    if (a->json) printf("]}");
    base_free(t);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Where kiln bench's runs find their inputs and outputs: with --device-io in
 * device memory (inputs uploaded once, outputs left there); with
 * --pageable in the tensors themselves (malloc'd); else in host memory
 * from kiln_rt_host_alloc (page-locked for cuda), inputs copied in once. */
typedef struct bench_io {
    kiln_rt_model *rm;
    rt_cuda_ctx ctx;
    bool have_ctx;
    CUdeviceptr buf[2 * IR_EVAL_MAX_IO];
    void *host[2 * IR_EVAL_MAX_IO]; /* kiln_rt_host_alloc's */
    const void *in[IR_EVAL_MAX_IO];
    void *out[IR_EVAL_MAX_IO];
} bench_io;

static void bench_io_close(bench_io *io)
{
    for (int i = 0; i < 2 * IR_EVAL_MAX_IO; i++) {
        rt_cuda_free(io->buf[i]);
        if (io->host[i]) kiln_rt_host_free(io->rm, io->host[i]);
    }
    if (io->have_ctx) rt_cuda_ctx_free(&io->ctx);
    memset(io, 0, sizeof(*io));
}

static kiln_status dev_io_open(kiln_rt_model *rm, const ir_tensor *ins, bench_io *io, base_diag *d)
{
    if (strcmp(kiln_rt_target(rm), "cuda") != 0)
        return base_diag_add(d, KILN_ERR_INVALID_ARG, "--device-io needs a model compiled for the cuda target");
    int dev;
    KILN_TRY(rt_cuda_run_device(&dev, d)); /* the model's device */
    KILN_TRY(rt_cuda_ctx_init(dev, &io->ctx, d));
    io->have_ctx = true;
    int n_in = kiln_rt_num_inputs(rm), n_out = kiln_rt_num_outputs(rm);
    for (int i = 0; i < n_in; i++) {
        size_t bytes = ins[i].nbytes;
        KILN_TRY(rt_cuda_alloc(bytes ? bytes : 1, &io->buf[i], d));
        if (bytes) KILN_TRY(rt_cuda_copy_to_device(io->buf[i], ins[i].data, bytes, d));
        io->in[i] = (const void *)(uintptr_t)io->buf[i];
    }
    for (int i = 0; i < n_out; i++) {
        const kiln_rt_tensor_info *info = kiln_rt_output(rm, i);
        if (info->rank > 0 && info->dims[0] < 0)
            return base_diag_add(d, KILN_ERR_UNSUPPORTED,
                                 "--device-io: output '%s' has a shape known only after the run", info->name);
        KILN_TRY(rt_cuda_alloc(info->nbytes ? info->nbytes : 1, &io->buf[IR_EVAL_MAX_IO + i], d));
        io->out[i] = (void *)(uintptr_t)io->buf[IR_EVAL_MAX_IO + i];
    }
    return KILN_OK;
}

/* Host buffers from kiln_rt_host_alloc; outputs of data-dependent shape
 * come from kiln_rt_result (NULL here). */
static kiln_status host_io_open(kiln_rt_model *rm, const ir_tensor *ins, bench_io *io, base_diag *d)
{
    int n_in = kiln_rt_num_inputs(rm), n_out = kiln_rt_num_outputs(rm);
    for (int i = 0; i < n_in + n_out; i++) {
        const kiln_rt_tensor_info *info = i < n_in ? NULL : kiln_rt_output(rm, i - n_in);
        if (info && info->rank > 0 && info->dims[0] < 0) continue;
        size_t bytes = info ? info->nbytes : ins[i].nbytes;
        void *p = kiln_rt_host_alloc(rm, bytes);
        if (!p) return rt_error(KILN_ERR_OOM, d);
        io->host[i < n_in ? i : IR_EVAL_MAX_IO + i - n_in] = p;
        if (info) {
            io->out[i - n_in] = p;
        } else {
            if (bytes) memcpy(p, ins[i].data, bytes);
            io->in[i] = p;
        }
    }
    return KILN_OK;
}

/* Where the timed runs' inputs and outputs were: "device", "page-locked",
 * "aligned" (kiln_rt_host_alloc for target c) or "pageable". */
static const char *io_where(kiln_rt_model *rm, const cli_args *a)
{
    if (a->device_io) return "device";
    if (a->pageable) return "pageable";
    return strcmp(kiln_rt_target(rm), "cuda") == 0 ? "page-locked" : "aligned";
}

static const char *io_note(kiln_rt_model *rm, const cli_args *a)
{
    if (a->device_io) return "; inputs and outputs in device memory";
    if (a->pageable) return "; inputs and outputs in pageable host memory";
    return strcmp(kiln_rt_target(rm), "cuda") == 0 ? "; inputs and outputs in page-locked host memory" : "";
}

/* One run, on the buffers of io, or with --pageable on the tensors. */
static kiln_status bench_run(kiln_rt_model *rm, const cli_args *a, bench_io *io, const ir_tensor *ins,
                             ir_tensor *outs, base_diag *d)
{
    if (a->pageable) return artifact_run(rm, ins, outs, d);
    kiln_status st = a->device_io ? kiln_rt_run_device(rm, io->in, io->out) : kiln_rt_run(rm, io->in, io->out);
    return st == KILN_OK ? KILN_OK : rt_error(st, d);
}

/* warmup runs, then n timed ones (host clock around each): lat[0..n)
 * sorted, fastest first. */
static kiln_status timed_runs(kiln_rt_model *rm, const cli_args *a, bench_io *io, const ir_tensor *ins, ir_tensor *outs,
                              int warmup, int n, double *lat, base_diag *d)
{
    kiln_status st = KILN_OK;
    for (int i = 0; i < warmup && st == KILN_OK; i++) st = bench_run(rm, a, io, ins, outs, d);
    for (int i = 0; i < n && st == KILN_OK; i++) {
        double t0 = now_s();
        st = bench_run(rm, a, io, ins, outs, d);
        lat[i] = now_s() - t0;
    }
    if (st == KILN_OK) qsort(lat, (size_t)n, sizeof(double), cmp_double);
    return st;
}

static int cmd_bench(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args("bench", argc, argv, &a);
    if (rc >= 0) return rc;
    if (!a.path) return usage_error("bench", "%s", "a MODEL or ARTIFACT is required");
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    kiln_rt_model *rm = NULL;
    ir_tensor ins[IR_EVAL_MAX_IO] = {{0}}, outs[IR_EVAL_MAX_IO] = {{0}};
    api_compile_report rep = {0};
    double *lat = base_malloc((size_t)a.iterations * sizeof(double));
    kiln_status st = lat ? KILN_OK : KILN_ERR_OOM;
    bool compiled = !is_artifact(a.path);
    if (st == KILN_OK && compiled) st = prepare_compiled(&a, &m, ins, &rm, &rep, NULL, &d);
    else if (st == KILN_OK) {
        st = kiln_rt_load(a.path, a.threads, &rm);
        if (st != KILN_OK) rt_error(st, &d);
        if (st == KILN_OK) st = artifact_inputs(rm, &a, ins, &d);
    }
    double first = 0;
    bench_io io = {.rm = rm};
    if (st == KILN_OK && a.device_io) st = dev_io_open(rm, ins, &io, &d);
    else if (st == KILN_OK && !a.pageable) st = host_io_open(rm, ins, &io, &d);
    if (st == KILN_OK) {
        double t0 = now_s();
        st = bench_run(rm, &a, &io, ins, outs, &d);
        first = now_s() - t0;
    }
    if (st == KILN_OK) st = timed_runs(rm, &a, &io, ins, outs, a.warmup, a.iterations, lat, &d);
    if (st == KILN_OK) {
        int n = a.iterations;
        double mn = lat[0], med = lat[n / 2], p90 = lat[(int)(0.9 * (n - 1))], p99 = lat[(int)(0.99 * (n - 1))];
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double peak_mb = (double)ru.ru_maxrss / 1024.0;
        int threads = kiln_rt_num_threads(rm), kernels = 0, graphs = 0;
        kiln_rt_num_launches(rm, &kernels, &graphs); /* 0 and 0 for target c */
        char wbuf[96];
        if (a.json) {
            printf("{\"model\": ");
            print_json_string(a.path);
            printf(", \"target\": ");
            print_json_string(kiln_rt_target(rm));
            printf(", \"threads\": %d, \"compile_s\": %.3f, \"first_run_ms\": %.3f, "
                   "\"min_ms\": %.4f, \"median_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, "
                   "\"throughput_per_s\": %.2f, \"iterations\": %d, \"peak_rss_mb\": %.1f, "
                   "\"arena_mb\": %.3f, \"fallback_nodes\": %d, \"kernel_launches\": %d, \"graph_launches\": %d, "
                   "\"device_io\": %s, \"io\": ",
                   threads, rep.seconds_total, first * 1e3, mn * 1e3, med * 1e3, p90 * 1e3, p99 * 1e3, 1.0 / med, n,
                   peak_mb, (double)kiln_rt_arena_bytes(rm) / 1e6, rep.n_fallback_nodes, kernels, graphs,
                   a.device_io ? "true" : "false");
            print_json_string(io_where(rm, &a));
            if (a.profile) print_profile(rm, &a, ins, outs, &d);
            printf("}\n");
        } else {
            printf("bench %s (%s)\n", a.path, where(rm, wbuf, sizeof(wbuf)));
            if (a.profile) print_profile(rm, &a, ins, outs, &d);
            if (compiled) printf("  compile      %.2f s (%d nodes in fallback segments)\n", rep.seconds_total, rep.n_fallback_nodes);
            printf("  first run    %.3f ms\n"
                   "  latency      min %.3f  median %.3f  p90 %.3f  p99 %.3f ms (%d runs after %d warm-up%s)\n"
                   "  throughput   %.1f inferences/s\n  peak memory  %.1f MB resident (arena %.2f MB)\n",
                   first * 1e3, mn * 1e3, med * 1e3, p90 * 1e3, p99 * 1e3, n, a.warmup,
                   io_note(rm, &a), 1.0 / med, peak_mb,
                   (double)kiln_rt_arena_bytes(rm) / 1e6);
            if (kernels > 0)
                printf("  launches     %d kernel%s a run, from %d CUDA graph launch%s\n", kernels, kernels == 1 ? "" : "s",
                       graphs, graphs == 1 ? "" : "es");
        }
    }
    rc = st == KILN_OK ? 0 : fail(st, &d, a.path);
    bench_io_close(&io);
    base_free(lat);
    release_all(ins, IR_EVAL_MAX_IO);
    release_all(outs, IR_EVAL_MAX_IO);
    kiln_rt_free(rm);
    ir_model_free(m);
    base_diag_free(&d);
    return rc;
}

/* ---- tune: the mono schedules' kernel-wide configuration (MonoNN Alg. 1) ------------------- *
 * For each configuration (block size x blocks per multiprocessor) the model
 * is compiled with its groups tuned under it, then run and timed whole: a
 * sum of the groups' own times would miss how the members of a persistent
 * kernel overlap and wait for each other. Each time goes into the tuning
 * database as it is measured (an interrupted sweep goes on from there), and
 * the fastest becomes the configuration mono compiles of the model take. */

#define MONO_MAX_PER_SM 5
#define MONO_TUNE_WARMUP 10
#define MONO_TUNE_RUNS 100

typedef struct mono_cfg {
    int block, per_sm;
    double us;       /* median latency; 0: none */
    char how[240];   /* "measured", "from the tuning database (DATE)" or why it has no time */
} mono_cfg;

/* --configs "128x1,256x3", or every configuration (the heuristic's first:
 * with a budget it is the one surely timed). OUT: c, *n. */
static kiln_status mono_configs(const char *list, int heur_block, int heur_per_sm, mono_cfg *c, int max, int *n,
                                base_diag *d)
{
    *n = 0;
    if (!list) {
        c[(*n)++] = (mono_cfg){.block = heur_block, .per_sm = heur_per_sm};
        for (int b = 128; b <= 384; b += 128) /* 384: one block (the 192 x 192 tiles' shared memory) */
            for (int k = 1; k <= (b == 384 ? 1 : MONO_MAX_PER_SM) && *n < max; k++)
                if (b != heur_block || k != heur_per_sm) c[(*n)++] = (mono_cfg){.block = b, .per_sm = k};
        return KILN_OK;
    }
    for (const char *q = list; *q;) {
        char *end;
        long b = strtol(q, &end, 10), k = *end == 'x' ? strtol(end + 1, &end, 10) : 0;
        if ((*end && (*end != ',' || !end[1])) || !target_cuda_mono_block_ok(b) || k < 1 || k > MONO_MAX_PER_SM)
            return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad --configs '%s': a list of BLOCKxN, BLOCK 128, 256 or "
                                 "384 threads, N 1..%d blocks per multiprocessor (128x1,256x3)", list, MONO_MAX_PER_SM);
        for (int i = 0; i < *n; i++)
            if (c[i].block == b && c[i].per_sm == k)
                return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad --configs '%s': %ldx%ld twice", list, b, k);
        if (*n == max) return base_diag_add(d, KILN_ERR_INVALID_ARG, "bad --configs '%s': too many", list);
        c[(*n)++] = (mono_cfg){.block = (int)b, .per_sm = (int)k};
        q = *end ? end + 1 : end;
    }
    return KILN_OK;
}

/* Whether got matches want within twice the precision's tolerance (both
 * are kiln's results, each within it of the truth). OUT: why, when not. */
static bool outputs_agree(const ir_graph *g, const ir_tensor *got, const ir_tensor *want, const char *precision,
                          char *why, size_t n)
{
    for (int i = 0; i < g->n_outputs; i++) {
        api_tolerance tol = api_tolerance_for_precision(want[i].dtype, precision);
        tol.rtol *= 2;
        tol.atol *= 2;
        tol.scale *= 2;
        api_compare c = api_compare_tensors(&got[i], &want[i], tol);
        if (c.shape_ok && c.n_bad == 0) continue;
        snprintf(why, n, "output '%s' differs from the first configuration's (%lld values, max abs err %.3g)",
                 g->outputs[i]->name, (long long)c.n_bad, c.max_abs);
        return false;
    }
    return true;
}

/* Compiles m under schedule (groups tuned within budget_s, 0: no limit),
 * runs it once for its outputs and times MONO_TUNE_RUNS runs with inputs
 * and outputs in device memory. OUT: outs, *us (the median). */
static kiln_status time_mono(ir_model *m, const cli_args *a, const char *schedule, double budget_s,
                             const ir_tensor *ins, ir_tensor *outs, double *us, base_diag *d)
{
    cli_args ca = *a;
    ca.schedule = schedule;
    ca.budget_s = budget_s;
    ca.device_io = true;
    char tmp[512];
    if (!temp_artifact(tmp, sizeof(tmp))) return base_diag_add(d, KILN_ERR_IO, "cannot make a temporary file");
    api_compile_report rep;
    kiln_rt_model *rm = NULL;
    kiln_status st = compile_model(m, &ca, tmp, &rep, d);
    if (st == KILN_OK && (st = kiln_rt_load(tmp, 1, &rm)) != KILN_OK) rt_error(st, d);
    unlink(tmp);
    if (st == KILN_OK) st = artifact_run(rm, ins, outs, d);
    bench_io io = {.rm = rm};
    if (st == KILN_OK) st = dev_io_open(rm, ins, &io, d);
    double lat[MONO_TUNE_RUNS];
    if (st == KILN_OK) st = timed_runs(rm, &ca, &io, ins, outs, MONO_TUNE_WARMUP, MONO_TUNE_RUNS, lat, d);
    if (st == KILN_OK) *us = lat[MONO_TUNE_RUNS / 2] * 1e6;
    bench_io_close(&io);
    kiln_rt_free(rm);
    return st;
}

static kiln_status tune_mono(ir_model *m, const cli_args *a, base_diag *d)
{
    double t0 = now_s();
    ir_graph *g = m->graph;
    /* the model's key and the heuristic's configuration */
    base_arena pa;
    base_arena_init(&pa);
    sched_program p;
    char key[128];
    int heur_block = 0, heur_per_sm = 0;
    kiln_status st = api_plan(g, &target_cuda, a->schedule, &p, &pa, d);
    if (st == KILN_OK) {
        target_cuda_mono_key(&p, a->schedule, a->precision, key, sizeof(key));
        target_cuda_mono_heuristic(&p, a->precision, &heur_block, &heur_per_sm);
        sched_program_free(&p);
    }
    base_arena_free(&pa);
    mono_cfg cfg[3 * MONO_MAX_PER_SM];
    int n = 0;
    if (st == KILN_OK) st = mono_configs(a->configs, heur_block, heur_per_sm, cfg, (int)KILN_COUNT(cfg), &n, d);
    ir_tensor ins[IR_EVAL_MAX_IO] = {{0}}, first[IR_EVAL_MAX_IO] = {{0}}, outs[IR_EVAL_MAX_IO] = {{0}};
    if (st == KILN_OK) st = graph_inputs(g, a, ins, d);
    char base[32];
    snprintf(base, sizeof(base), "%.*s", (int)strcspn(a->schedule, ":"), a->schedule);
    bool have_first = false, over = false;
    for (int i = 0; i < n && st == KILN_OK; i++) {
        mono_cfg *c = &cfg[i];
        char name[16], sched[64];
        snprintf(name, sizeof(name), "%dx%d", c->block, c->per_sm);
        snprintf(sched, sizeof(sched), "%s:%s", base, name);
        target_mono_config row;
        bool found = false;
        base_diag w;
        base_diag_init(&w);
        if (target_cuda_mono_lookup(a->tuning_db, key, name, &row, &found, &w) == KILN_OK && found) {
            c->us = row.us;
            snprintf(c->how, sizeof(c->how), "from the tuning database (%s)", row.date);
        } else if (over || (a->budget_s > 0 && now_s() - t0 >= a->budget_s)) {
            over = true;
            snprintf(c->how, sizeof(c->how), "not timed: the budget is spent (run again to go on)");
        } else {
            if (!a->quiet) fprintf(stderr, "kiln: tune %s: configuration %d of %d, %s (%.0f s so far)\n", key, i + 1, n,
                                   name, now_s() - t0);
            double left = a->budget_s > 0 ? KILN_MAX(1.0, a->budget_s - (now_s() - t0)) : 0;
            base_diag cd;
            base_diag_init(&cd);
            kiln_status cst = time_mono(m, a, sched, left, ins, have_first ? outs : first, &c->us, &cd);
            char why[200];
            if (cst != KILN_OK && !have_first) release_all(first, IR_EVAL_MAX_IO);
            if (cst == KILN_ERR_OOM) st = base_diag_add(d, cst, "%s", base_diag_text(&cd));
            else if (cst != KILN_OK) {
                snprintf(c->how, sizeof(c->how), "failed: %.200s", cd.n_msgs ? cd.msgs[0] : "unknown error");
                c->us = 0;
            } else if (have_first && !outputs_agree(g, outs, first, a->precision, why, sizeof(why))) {
                snprintf(c->how, sizeof(c->how), "dropped: %s", why);
                c->us = 0;
            } else {
                have_first = true;
                snprintf(c->how, sizeof(c->how), "measured");
                target_mono_config r = {.block = c->block, .per_sm = c->per_sm, .us = c->us};
                if (target_cuda_mono_store(a->tuning_db, key, name, &r, &w) != KILN_OK && !a->quiet)
                    fprintf(stderr, "kiln: tune: warning: %s (the result is not kept)\n", base_diag_text(&w));
            }
            base_diag_free(&cd);
            release_all(outs, IR_EVAL_MAX_IO);
            if (!a->quiet && c->us > 0)
                fprintf(stderr, "kiln: tune %s: %s %.1f us\n", key, name, c->us);
        }
        base_diag_free(&w);
    }
    int best = -1;
    for (int i = 0; i < n; i++)
        if (cfg[i].us > 0 && (best < 0 || cfg[i].us < cfg[best].us)) best = i;
    if (st == KILN_OK) {
        printf("kernel-wide configurations of %s (%s), whole-network latency:\n", a->path, key);
        for (int i = 0; i < n; i++) {
            char t[32] = "-";
            if (cfg[i].us > 0) snprintf(t, sizeof(t), "%.1f us", cfg[i].us);
            printf("  %3dx%d %12s  %s%s%s\n", cfg[i].block, cfg[i].per_sm, t, cfg[i].how,
                   cfg[i].block == heur_block && cfg[i].per_sm == heur_per_sm ? "; the heuristic's choice" : "",
                   i == best ? "; the fastest" : "");
        }
        if (best < 0) st = base_diag_add(d, KILN_ERR_UNSUPPORTED, "no configuration of %s could be timed", key);
    }
    if (st == KILN_OK) {
        target_mono_config r = {.block = cfg[best].block, .per_sm = cfg[best].per_sm, .us = cfg[best].us};
        st = target_cuda_mono_store(a->tuning_db, key, NULL, &r, d);
    }
    if (st == KILN_OK)
        printf("chose %dx%d in %.1f s: %s compiles of this model on this GPU use it\n", cfg[best].block,
               cfg[best].per_sm, now_s() - t0, base);
    release_all(ins, IR_EVAL_MAX_IO);
    release_all(first, IR_EVAL_MAX_IO);
    release_all(outs, IR_EVAL_MAX_IO);
    return st;
}

/* ---- tune --------------------------------------------------------------------------------- */

/* Whether schedule is a mono schedule that names no configuration: kiln
 * tune then tries them all (tune_mono). */
static bool mono_without_config(const char *schedule)
{
    return schedule && strncmp(schedule, "mono", 4) == 0 && !strchr(schedule, ':');
}

static int cmd_tune(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args("tune", argc, argv, &a);
    if (rc >= 0) return rc;
    if (!a.path) return usage_error("tune", "%s", "a MODEL is required");
    if (a.artifact_out) return usage_error("tune", "%s", "writes no artifact (-o): kiln compile --tune does");
    if (a.configs && !mono_without_config(a.schedule))
        return usage_error("tune", "%s", "--configs needs --schedule mono (or mono-barriers, mono-unmerged) "
                                         "without a configuration");
    mono_cfg cfg[3 * MONO_MAX_PER_SM];
    int n_cfg;
    base_diag cd;
    base_diag_init(&cd);
    if (a.configs && mono_configs(a.configs, 128, 1, cfg, (int)KILN_COUNT(cfg), &n_cfg, &cd) != KILN_OK) {
        rc = usage_error("tune", "%s", base_diag_text(&cd));
        base_diag_free(&cd);
        return rc;
    }
    base_diag_free(&cd);
    base_diag d;
    base_diag_init(&d);
    /* without a GPU the compile would only choose by heuristics: say so */
    kiln_status st = rt_cuda_open(&d);
    if (st == KILN_OK && rt_cuda_device_count() < 1)
        st = base_diag_add(&d, KILN_ERR_NO_DEVICE, "no CUDA device");
    if (st != KILN_OK) {
        fprintf(stderr, "kiln tune: times candidates on a CUDA GPU, and there is none here (%s)\n",
                base_diag_text(&d));
        base_diag_free(&d);
        return exit_code(st);
    }
    ir_model *m = NULL;
    api_compile_report rep;
    char tmp[512] = "";
    double t0 = now_s();
    st = load_for_compile(&a, &m, &d);
    bool sweep = mono_without_config(a.schedule);
    if (st == KILN_OK && sweep) st = tune_mono(m, &a, &d);
    if (st == KILN_OK && !sweep && !temp_artifact(tmp, sizeof(tmp)))
        st = base_diag_add(&d, KILN_ERR_IO, "cannot make a temporary file");
    if (st == KILN_OK && !sweep) st = compile_model(m, &a, tmp, &rep, &d);
    if (tmp[0]) remove(tmp);
    if (st == KILN_OK && !a.quiet && !sweep)
        printf("tuned %s for this GPU (%s, %s schedule) in %.1f s; compiles of the same work now use the results\n",
               a.path, a.precision ? a.precision : "fp32", a.schedule ? a.schedule : "waves", now_s() - t0);
    rc = st == KILN_OK ? 0 : fail(st, &d, a.path);
    ir_model_free(m);
    base_diag_free(&d);
    return rc;
}

/* ---- verify ------------------------------------------------------------------------------- */

static int cmd_verify(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args("verify", argc, argv, &a);
    if (rc >= 0) return rc;
    if (!a.path) return usage_error("verify", "%s", "a MODEL is required");
    a.quiet = true; /* no compile progress */
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    kiln_rt_model *rm = NULL;
    ir_tensor ins[IR_EVAL_MAX_IO] = {{0}}, outs[IR_EVAL_MAX_IO] = {{0}}, ref[IR_EVAL_MAX_IO] = {{0}};
    api_compile_report rep;
    kiln_status st = prepare_compiled(&a, &m, ins, &rm, &rep, ref, &d);
    if (st == KILN_OK) st = artifact_run(rm, ins, outs, &d);
    bool same = false;
    if (st == KILN_OK) {
        printf("verify %s: %s target (%d stages, %d nodes in fallback segments) against the reference interpreter\n",
               a.path, target_of(&a), rep.n_stages, rep.n_fallback_nodes);
        same = compare_outputs(m->graph, outs, ref, a.precision, false);
        printf("%s\n", same ? "PASS" : "FAIL");
    }
    rc = st != KILN_OK ? fail(st, &d, a.path) : same ? 0 : 9;
    release_all(ins, IR_EVAL_MAX_IO);
    release_all(outs, IR_EVAL_MAX_IO);
    release_all(ref, IR_EVAL_MAX_IO);
    kiln_rt_free(rm);
    ir_model_free(m);
    base_diag_free(&d);
    return rc;
}

/* ---- ops ---------------------------------------------------------------------------------- */

static int cmd_ops(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) return print_help("ops");
        return usage_error("ops", "unexpected argument '%s'", argv[i]);
    }
    static const struct {
        unsigned flag;
        const char *name;
    } flags[] = {
        {IR_OPF_ELEMENTWISE, "elementwise"}, {IR_OPF_REDUCTION, "reduction"}, {IR_OPF_CONTRACTION, "contraction"},
        {IR_OPF_LAYOUT, "layout"},           {IR_OPF_LAX, "lax"},             {IR_OPF_SHAPE_ONLY, "shape-only"},
        {IR_OPF_DATA_DEP, "data-dependent"}, {IR_OPF_RANDOM, "random"},       {IR_OPF_SUBGRAPH, "subgraph"},
    };
    printf("%-28s %-9s %-9s %-12s %s\n", "op", "inputs", "outputs", "interpreter", "flags");
    int n_impl = 0;
    for (int i = 0; i < KILN_OP_COUNT; i++) {
        const ir_op_info *op = &ir_ops[i];
        char in[16], out[16];
        snprintf(in, sizeof(in), op->max_in < 0 ? "%d+" : op->min_in == op->max_in ? "%d" : "%d-%d", op->min_in,
                 op->max_in);
        snprintf(out, sizeof(out), op->max_out < 0 ? "%d+" : op->min_out == op->max_out ? "%d" : "%d-%d",
                 op->min_out, op->max_out);
        printf("%-28s %-9s %-9s %-12s", op->name, in, out, op->eval ? "yes" : "no");
        const char *sep = "";
        for (size_t f = 0; f < KILN_COUNT(flags); f++)
            if (op->flags & flags[f].flag) {
                printf("%s%s", sep, flags[f].name);
                sep = ",";
            }
        printf("\n");
        n_impl += op->eval != NULL;
    }
    printf("%d ops, %d on the reference interpreter\n", KILN_OP_COUNT, n_impl);
    return 0;
}

/* ---- devices -------------------------------------------------------------------------------- */

static int cmd_devices(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) return print_help("devices");
        return usage_error("devices", "unexpected argument '%s'", argv[i]);
    }
    base_diag d;
    base_diag_init(&d);
    kiln_status st = rt_cuda_open(&d);
    if (st != KILN_OK) {
        fprintf(stderr, "no CUDA device (%s)\n", base_diag_text(&d));
        base_diag_free(&d);
        return exit_code(st);
    }
    int n = rt_cuda_device_count();
    for (int i = 0; i < n && st == KILN_OK; i++) {
        rt_cuda_device info;
        st = rt_cuda_device_info(i, &info, &d);
        if (st != KILN_OK) break;
        printf("%d: %s, compute capability %d.%d, %d SMs, %.1f GiB, %d KiB shared memory per block, "
               "driver CUDA %d.%d\n",
               i, info.name, info.sm_major, info.sm_minor, info.n_sms, (double)info.mem_bytes / (1u << 30),
               info.smem_per_block_optin_bytes / 1024, info.driver_version / 1000, info.driver_version % 1000 / 10);
    }
    int rc = st == KILN_OK ? 0 : fail(st, &d, "devices");
    base_diag_free(&d);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) return print_help(NULL) == 0 ? 1 : 1;
    const char *cmd = argv[1];
    if (is_help(cmd)) return print_help(NULL);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("kiln %s\n", KILN_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) return print_help(argc > 2 ? argv[2] : NULL);
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "compile") == 0) return cmd_compile(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "tune") == 0) return cmd_tune(argc - 2, argv + 2);
    if (strcmp(cmd, "verify") == 0) return cmd_verify(argc - 2, argv + 2);
    if (strcmp(cmd, "ops") == 0) return cmd_ops(argc - 2, argv + 2);
    if (strcmp(cmd, "devices") == 0) return cmd_devices(argc - 2, argv + 2);
    fprintf(stderr, "kiln: unknown command '%s' (see 'kiln --help')\n", cmd);
    return 1;
}
