#!/usr/bin/env bash
# gpu-tests.sh: kiln's tests on a GPU machine, run from the repository root
# with the programs of bundle/ (scripts/gpu-bundle.sh builds it elsewhere).
#
#   scripts/gpu-tests.sh [--only LIST] [--skip LIST] [--bundle DIR] [--logs DIR] [--jobs N]
#
# Sections (LIST: comma-separated names), each ending with "N passed, N failed":
#   smoke        bundle/gpu_smoke: driver, NVRTC, a kernel, launch overhead
#   runtime      bundle/gpu_runtime, when the bundle has it
#   gemm         bundle/gpu_gemm, when the bundle has it
#   ops          test_ops --target cuda (fp32, or $PRECISION): every op against
#                the interpreter, one process per case filter, JOBS at a time
#   conformance  conformance --target cuda (fp32) over the ONNX test data the bundle
#                carries, in JOBS shards; expected failures from
#                tests/conformance/xfail-cuda.txt when it exists, else xfail.txt
#   models       ResNet-50, MobileNetV2, BERT-base exported with this machine's
#                PyTorch (tests/models/export.py), run by `kiln run --target cuda`
#                (fp32), compared with PyTorch's own fp32 outputs on the CPU
#                (rtol 1e-3, atol 1e-4: the f32 tolerance of src/api/tolerance.c)
#   tune         kiln tune --schedule mono on a small MLP (made with onnx): the
#                configurations' table, a second run from the database, a budget
#                that leaves configurations for later, and a mono compile (and
#                verify) taking the chosen configuration
#   bench        bench/gpu.py (kiln fp16 against PyTorch), $BENCH_ARGS passed on
# then the total, and exit status 1 when anything failed.
#
# Logs: one file per section in --logs DIR (default $OUT when set, as under
# the device tool, else a fresh temporary folder), at most 8 files.
# Environment: JOBS (default: processors, at most 12), BENCH_ARGS, SCHEDULE
# (kernels, waves, mono or mono-barriers: the --schedule of ops, conformance and models; default waves, the compiler's),
# PRECISION (fp32, fp16 or bf16: the --precision of ops; default fp32; the
# 16-bit ones run the tensor-core attention and the 16-bit GEMM epilogues),
# KILN_SECTION_TIMEOUT (seconds per section, default 900), PYTHON (python3).
#
# The device tool allows 10 minutes a command: run the sections in groups,
# e.g. --only smoke,runtime,gemm,ops then --only conformance, --only models,tune,
# --only bench.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ALL="smoke runtime gemm ops conformance models tune bench"
BUNDLE=$ROOT/bundle
LOGS=${OUT:-}
ONLY=""
SKIP=""
PYTHON=${PYTHON:-python3}
SECTION_TIMEOUT=${KILN_SECTION_TIMEOUT:-900}
SCHEDULE=${SCHEDULE:-waves}
PRECISION=${PRECISION:-fp32}
case $PRECISION in
fp32 | fp16 | bf16) ;;
*) echo "gpu-tests: PRECISION must be fp32, fp16 or bf16, not '$PRECISION'" >&2; exit 2 ;;
esac
ncpu=$(nproc 2>/dev/null || echo 4)
JOBS=${JOBS:-$((ncpu < 12 ? ncpu : 12))}

usage() {
    sed -n '2,37s/^# \{0,1\}//p' "$0"
}

while [ $# -gt 0 ]; do
    case $1 in
    --only | --skip | --bundle | --logs | --jobs)
        [ $# -ge 2 ] || { echo "gpu-tests: $1 needs a value" >&2; exit 2; }
        case $1 in
        --only) ONLY=$2 ;;
        --skip) SKIP=$2 ;;
        --bundle) BUNDLE=$2 ;;
        --logs) LOGS=$2 ;;
        --jobs) JOBS=$2 ;;
        esac
        shift 2
        ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-tests: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
for s in ${ONLY//,/ } ${SKIP//,/ }; do
    [[ " $ALL " == *" $s "* ]] || { echo "gpu-tests: unknown section '$s' (known: $ALL)" >&2; exit 2; }
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-tests: bad --jobs '$JOBS'" >&2; exit 2; }

wanted() {
    local s=$1
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$s,"* ]]; then return 1; fi
    [[ ",$SKIP," != *",$s,"* ]]
}

# paths given are relative to where the script was started
BUNDLE=$(cd "$BUNDLE" 2>/dev/null && pwd) || {
    echo "gpu-tests: no bundle folder; build it with scripts/gpu-bundle.sh (device tool: carry [\"bundle\"])" >&2
    exit 2
}
if [ -z "$LOGS" ]; then LOGS=$(mktemp -d "${TMPDIR:-/tmp}/kiln-gpu-tests.XXXXXX") || exit 2; fi
mkdir -p "$LOGS" || { echo "gpu-tests: cannot create $LOGS" >&2; exit 2; }
LOGS=$(cd "$LOGS" && pwd)
cd "$ROOT" || exit 2
if [ ! -x "$BUNDLE/kiln" ] || [ ! -f "$BUNDLE/env.sh" ]; then
    echo "gpu-tests: $BUNDLE is not a kiln bundle (no kiln or env.sh)" >&2
    exit 2
fi
# shellcheck source=/dev/null
. "$BUNDLE/env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-gpu-work.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
if command -v timeout >/dev/null 2>&1; then limited=(timeout "$SECTION_TIMEOUT"); else limited=(); fi

echo "gpu-tests: bundle $BUNDLE ($(sed -n 's/^commit *//p' "$BUNDLE/MANIFEST" 2>/dev/null)), logs in $LOGS, $JOBS jobs"
need=$(sed -n 's/^needs *GLIBC_\([0-9.]*\).*/\1/p' "$BUNDLE/MANIFEST" 2>/dev/null)
have=$(ldd --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+$')
if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    echo "gpu-tests: this machine's glibc $have is older than the $need the bundle was built against" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

passed=0
failed=0
summary=""

# count SECTION LOG: adds the last "N passed, M failed" line of LOG to the totals.
count() {
    local name=$1 log=$2 line p f
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "gpu-tests: $name printed no summary (crashed or timed out; log $log)"
        failed=$((failed + 1))
        summary="$summary$(printf '  %-12s no summary (see %s)' "$name" "$log")"$'\n'
        return
    fi
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+')
    f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
    passed=$((passed + p))
    failed=$((failed + f))
    summary="$summary$(printf '  %-12s %5d passed, %4d failed' "$name" "$p" "$f")"$'\n'
}

skipped() {
    echo "   skipped: $2"
    summary="$summary$(printf '  %-12s skipped: %s' "$1" "$2")"$'\n'
}

# ---- sections ---------------------------------------------------------------------------

# A test program of the bundle, run as it is; REQUIRED=1: its absence is a failure.
section_program() {
    local name=$1 prog=$2 required=$3 log=$LOGS/$1.log
    if [ ! -x "$BUNDLE/$prog" ] && [ "$required" -eq 1 ]; then
        echo "$name: the bundle has no $prog; 0 passed, 1 failed" | tee "$log"
        count "$name" "$log"
        return
    elif [ ! -x "$BUNDLE/$prog" ]; then
        skipped "$name" "the bundle has no $prog"
        return
    fi
    ${limited[@]+"${limited[@]}"} "$BUNDLE/$prog" >"$log" 2>&1
    local rc=$?
    grep -E '^(FAIL|not ok)|FAIL ' "$log" | head -n 30
    [ $rc -eq 7 ] && echo "   $prog: no usable GPU here (exit status 7)"
    [ $rc -eq 124 ] && echo "   $prog: timed out after ${SECTION_TIMEOUT}s"
    count "$name" "$log"
}

# test_ops in parallel: one process per case-name filter, shortest names
# first, skipping names an earlier filter already covers (a filter is a
# substring: "Add" also runs "Conv+Add+Relu"). A case passes when some log
# has its "ok" line and none has a "FAIL" line for it.
section_ops() {
    local log=$LOGS/ops.log dir=$work/ops
    mkdir -p "$dir"
    local -a names sorted filters
    mapfile -t names < <("$BUNDLE/test_ops" --list 2>/dev/null)
    if [ ${#names[@]} -eq 0 ]; then
        echo "ops: test_ops --list gave no cases; 0 passed, 1 failed" >"$log"
        cat "$log"
        count ops "$log"
        return
    fi
    mapfile -t sorted < <(printf '%s\n' "${names[@]}" | awk '{ print length($0) "\t" $0 }' | sort -n -s | cut -f2-)
    local -A covered=()
    local a m
    for a in "${sorted[@]}"; do
        [ -n "${covered[$a]:-}" ] && continue
        filters+=("$a")
        for m in "${names[@]}"; do [[ "$m" == *"$a"* ]] && covered[$m]=1; done
    done
    export KT_BIN="$BUNDLE/test_ops" KT_DIR="$dir" KT_TIMEOUT="$SECTION_TIMEOUT" KT_SCHEDULE="$SCHEDULE" \
        KT_PRECISION="$PRECISION"
    # shellcheck disable=SC2016  # the worker's own variables
    printf '%s\n' "${filters[@]}" completeness | xargs -d '\n' -P "$JOBS" -n 1 bash -c '
        out="$KT_DIR/$(printf %s "$1" | tr -c "A-Za-z0-9_.+-" "_").log"
        timeout "$KT_TIMEOUT" "$KT_BIN" --target cuda --schedule "$KT_SCHEDULE" --precision "$KT_PRECISION" \
            --filter "$1" >"$out" 2>&1
        rc=$?
        [ $rc -eq 124 ] && echo "TIMEOUT after ${KT_TIMEOUT}s: --filter $1" >>"$out"
        exit 0' _
    cat "$dir"/*.log >"$work/ops-all.log"
    local p=0 f=0
    {
        echo "test_ops --target cuda --schedule $SCHEDULE --precision $PRECISION: ${#names[@]} cases in ${#filters[@]} processes"
        for a in "${names[@]}"; do
            if grep -qF "FAIL  $a #" "$work/ops-all.log"; then
                f=$((f + 1))
                grep -F "FAIL  $a #" "$work/ops-all.log" | head -n 3
            elif grep -qF "ok    $a (" "$work/ops-all.log"; then
                p=$((p + 1))
            else
                f=$((f + 1))
                echo "FAIL  $a: no result (crashed or timed out: see the processes' output above)"
            fi
        done
        local comp="$dir/completeness.log"
        if grep -q '^ok    completeness' "$comp" 2>/dev/null; then
            p=$((p + 1))
        else
            f=$((f + 1))
            grep '^FAIL  completeness' "$comp" 2>/dev/null | head -n 10 || true
            grep -q '^FAIL  completeness' "$comp" 2>/dev/null || echo "FAIL  completeness: no result"
        fi
        grep -h '^TIMEOUT' "$dir"/*.log
        echo "ops: $p passed, $f failed"
    } >"$work/ops-summary.log"
    {
        echo "---- the output of every test_ops process"
        local one
        for one in "$dir"/*.log; do
            echo "---- $(basename "$one" .log)"
            cat "$one"
        done
        echo "---- summary"
        cat "$work/ops-summary.log"
    } >"$log"
    grep -E '^(FAIL|TIMEOUT)' "$work/ops-summary.log" | head -n 40
    count ops "$log"
}

# conformance in JOBS shards: shard k holds every JOBS-th case of each
# folder as links in k/<folder>/, so the expected-failure keys
# ("node/test_abs") stay the same.
section_conformance() {
    local log=$LOGS/conformance.log tar=$BUNDLE/onnx-testdata.tar.gz data=$BUNDLE/onnx-testdata
    if [ ! -f "$tar" ]; then
        skipped conformance "the bundle has no onnx-testdata.tar.gz"
        return
    fi
    if [ ! -f "$data/.unpacked" ]; then
        rm -rf "$data"
        if ! { mkdir -p "$data" && tar -C "$data" -xzf "$tar" && touch "$data/.unpacked"; }; then
            echo "conformance: cannot unpack $tar; 0 passed, 1 failed" | tee "$log"
            count conformance "$log"
            return
        fi
    fi
    local xfail=tests/conformance/xfail-cuda.txt
    [ -f "$xfail" ] || xfail=tests/conformance/xfail.txt
    local folder c k i
    for folder in node pytorch-converted pytorch-operator simple; do
        [ -d "$data/$folder" ] || continue
        i=0
        for c in "$data/$folder"/*/; do
            k=$((i % JOBS))
            mkdir -p "$work/conf/$k/$folder"
            ln -s "${c%/}" "$work/conf/$k/$folder/$(basename "$c")"
            i=$((i + 1))
        done
    done
    local pids=()
    for k in $(seq 0 $((JOBS - 1))); do
        [ -d "$work/conf/$k" ] || continue
        ${limited[@]+"${limited[@]}"} "$BUNDLE/conformance" --target cuda --schedule "$SCHEDULE" --verbose --timeout 60 --xfail "$xfail" "$work/conf/$k"/* \
            >"$work/conf/$k.log" 2>&1 &
        pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k"; done
    local p=0 f=0 x=0 line
    {
        echo "conformance --target cuda --schedule $SCHEDULE (fp32), expected failures from $xfail, $JOBS shards"
        for k in $(seq 0 $((JOBS - 1))); do
            [ -f "$work/conf/$k.log" ] || continue
            grep -E '^(FAIL|XPASS)' "$work/conf/$k.log"
            line=$(grep -E '^conformance: [0-9]+ passed, [0-9]+ failed' "$work/conf/$k.log" | tail -n 1)
            if [ -z "$line" ]; then
                echo "FAIL  shard $k printed no summary (crashed or timed out); its last lines:"
                tail -n 3 "$work/conf/$k.log" | sed 's/^/      /'
                f=$((f + 1))
                continue
            fi
            p=$((p + $(sed -E 's/^conformance: ([0-9]+) passed.*/\1/' <<<"$line")))
            f=$((f + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
            x=$((x + $(sed -E 's/.* ([0-9]+) expected failures.*/\1/' <<<"$line")))
        done
        echo "conformance: $p passed, $f failed ($x expected failures)"
    } >"$log"
    grep -E '^(FAIL|XPASS)' "$log" | head -n 60
    count conformance "$log"
}

# The end-to-end models on the GPU against PyTorch.
section_models() {
    local log=$LOGS/models.log dir=$ROOT/models/gpu
    if ! "$PYTHON" -c 'import torch, torchvision, numpy' >/dev/null 2>&1; then
        echo "models: $PYTHON cannot import torch, torchvision and numpy; 0 passed, 1 failed" | tee "$log"
        count models "$log"
        return
    fi
    mkdir -p "$dir"
    {
        echo "== export (tests/models/export.py with this machine's PyTorch)"
        # export.py was written for PyTorch 1.13; from 2.9 on torch.onnx.export
        # defaults to the dynamo exporter: ask for the TorchScript one, as on the
        # CPU, and fall back when this PyTorch no longer has it.
        ${limited[@]+"${limited[@]}"} "$PYTHON" - "$dir" <<'EOF'
import inspect, runpy, sys
import torch
out = sys.argv[1]
orig = torch.onnx.export
def export(*args, **kw):
    if "dynamo" in inspect.signature(orig).parameters and "dynamo" not in kw:
        try:
            return orig(*args, dynamo=False, **kw)
        except Exception as e:  # noqa: BLE001 - any failure: try the default exporter
            print("TorchScript exporter failed (%s: %s); using the default exporter" % (type(e).__name__, e))
    return orig(*args, **kw)
torch.onnx.export = export
sys.argv = ["tests/models/export.py", "--out", out, "--models", "resnet50,mobilenetv2,bert"]
runpy.run_path("tests/models/export.py", run_name="__main__")
EOF
        echo "== run (kiln run --target cuda, fp32) and compare with PyTorch on the CPU"
        local m
        for m in resnet50 mobilenetv2 bert; do
            if [ ! -f "$dir/$m.onnx" ]; then
                echo "FAIL  $m: not exported"
                continue
            fi
            rm -f "$dir/$m.kiln.npz"
            if ! ${limited[@]+"${limited[@]}"} "$BUNDLE/kiln" run "$dir/$m.onnx" --target cuda --schedule "$SCHEDULE" --inputs "$dir/$m.inputs.npz" \
                --output "$dir/$m.kiln.npz" >"$work/$m.run.log" 2>&1; then
                echo "FAIL  $m: kiln run failed:"
                tail -n 5 "$work/$m.run.log"
            fi
        done
        "$PYTHON" - "$dir" <<'EOF'
import os, sys
import numpy as np
import torch
sys.path.insert(0, "tests/models")
import compare_ort  # noqa: E402  (its compare() is the CPU model tests' rule)
import export as ex  # noqa: E402
RTOL, ATOL = 1e-3, 1e-4
d = sys.argv[1]
torch.set_num_threads(max(1, os.cpu_count() or 1))
passed = failed = 0
for name in ("resnet50", "mobilenetv2", "bert"):
    got_path = os.path.join(d, name + ".kiln.npz")
    if not os.path.exists(got_path):
        print("FAIL  %s: no kiln output" % name)
        failed += 1
        continue
    if name == "bert":
        model, _, out_names, _ = ex.bert_model("auto")
    else:
        model, _, out_names = ex.image_model(name)
    model.eval()
    with np.load(os.path.join(d, name + ".inputs.npz")) as z:
        args = [torch.from_numpy(z[k]) for k in z.files]
    with torch.no_grad():
        outs = model(*args)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    with np.load(got_path) as z:
        got = {k: z[k] for k in z.files}
    ok, details = True, []
    for n, want in zip(out_names, outs):
        if n not in got:
            ok, text = False, "missing"
        else:
            text, good = compare_ort.compare(n, got[n], want.numpy(), RTOL, ATOL)
            ok &= good
        details.append("%s: %s" % (n, text))
    print("%s  %-12s %s" % ("PASS" if ok else "FAIL", name, "; ".join(details)))
    passed += ok
    failed += not ok
print("models: %d passed, %d failed (rtol %g, atol %g against PyTorch fp32 on the CPU)" % (passed, failed, RTOL, ATOL))
EOF
    } >"$log" 2>&1
    grep -E '^(PASS|FAIL)|exporter failed|Error' "$log" | head -n 30
    count models "$log"
}

# kiln tune's sweep of the mono schedules' kernel-wide configuration
# (MonoNN Alg. 1) on a two-layer MLP, with a database of its own.
section_tune() {
    local log=$LOGS/tune.log model=$work/mlp.onnx db=$work/tune.db
    local p=0 f=0 out
    # tcheck NAME TEXT CMD...: CMD exits 0 and its output has TEXT
    tcheck() {
        local name=$1 text=$2
        shift 2
        if out=$("$@" 2>&1) && grep -qE -- "$text" <<<"$out"; then
            echo "ok     $name"
            p=$((p + 1))
        else
            echo "FAIL   $name (wanted /$text/):"
            sed 's/^/       /' <<<"$out" | tail -n 20
            f=$((f + 1))
        fi
    }
    {
        if ! "$PYTHON" - "$model" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = lambda name, *shape: numpy_helper.from_array((0.05 * rng.standard_normal(shape)).astype(np.float32), name)
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y0"]),
         helper.make_node("LayerNormalization", ["y0", "g", "b"], ["y"], axis=-1)]
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 512])],
                      [w("w1", 512, 1024), w("b1", 1024), w("w2", 1024, 512), w("g", 512), w("b", 512)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
EOF
        then
            echo "tune: $PYTHON could not make the model (onnx missing?)"
            f=$((f + 1))
        else
            local T=("$BUNDLE/kiln" tune "$model" --schedule mono --precision fp16 --tuning-db "$db")
            tcheck sweep_table "^  128x2 +[0-9.]+ us  measured" "${T[@]}" --configs 128x1,128x2
            tcheck sweep_resumes "^  128x1 +[0-9.]+ us  from the tuning database" "${T[@]}" --configs 128x1,128x2
            tcheck sweep_chose "^chose 128x[12] in" "${T[@]}" --configs 128x1,128x2
            tcheck sweep_budget "^  256x2 +-  not timed: the budget is spent" "${T[@]}" --configs 256x1,256x2 --budget 1
            tcheck compile_takes_it "as kiln tune chose" "$BUNDLE/kiln" compile "$model" --target cuda \
                --schedule mono --precision fp16 --tuning-db "$db" -o "$work/mlp.kiln"
            tcheck verify_tuned "^PASS" "$BUNDLE/kiln" verify "$model" --target cuda --schedule mono \
                --precision fp16 --tuning-db "$db"
            tcheck named_config_kept "blocks of 256 threads, 1 a multiprocessor" "$BUNDLE/kiln" compile "$model" \
                --target cuda --schedule mono:256x1 --precision fp16 --tuning-db "$db" -o "$work/mlp1.kiln"
        fi
        echo "tune: $p passed, $f failed"
    } >"$log" 2>&1
    grep -E '^(FAIL|tune:)' "$log" | head -n 30
    count tune "$log"
}

section_bench() {
    local log=$LOGS/bench.log
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of words
    ${limited[@]+"${limited[@]}"} "$PYTHON" bench/gpu.py --bundle "$BUNDLE" --json "$LOGS/bench.json" \
        ${BENCH_ARGS:-} 2>&1 | tee "$log"
    count bench "$log"
}

for s in $ALL; do
    wanted "$s" || continue
    start=$(date +%s)
    echo "== $s"
    case $s in
    smoke) section_program smoke gpu_smoke 1 ;;
    runtime) section_program runtime gpu_runtime 0 ;;
    gemm) section_program gemm gpu_gemm 0 ;;
    ops) section_ops ;;
    conformance) section_conformance ;;
    models) section_models ;;
    tune) section_tune ;;
    bench) section_bench ;;
    esac
    echo "   ($(($(date +%s) - start)) s)"
done

echo "== summary"
printf '%s' "$summary"
echo "gpu-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
