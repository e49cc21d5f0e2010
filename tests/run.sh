#!/usr/bin/env bash
# tests/run.sh BUILD_DIR: the default test run (what `make check` and CI run).
#   1. unit tests (base, IR, ONNX loader, npy/npz), the kernel templates' own
#      tests, the per-op differential tests on the c target
#   2. every per-op case's CUDA kernels built by NVRTC (no GPU needed), under
#      --schedule kernels (fp32), mono and waves (fp16); every conformance
#      model's (waves, the default; fp32); the layer-norm conformance models
#      (persistent kernels of several stages) under mono, mono-barriers and waves
#   3. command-line tests (help, exit codes, the embedded model, malformed input)
#   4. ONNX conformance on the reference interpreter, with the expected-failure list
#   5. the same conformance cases compiled for the c target and run by the runtime
#   6. the IR -> ONNX export round trip over the same models
#   7. ResNet-50, MobileNetV2 and BERT-base through kiln against onnxruntime,
#      then their CUDA kernels built by NVRTC (fp16, waves, kernels and mono)
# Ends with the line "N passed, N failed" summing them all.
#
# The steps are independent programs, each writing its own log (and its own
# temporary files), so they run side by side: KILN_TEST_JOBS at a time
# (default: the number of processors), the longest first. Their reports
# still come out in the order above, each as soon as it and every step
# before it are done.
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
data=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
jobs_max=${KILN_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs_max" -ge 1 ] 2>/dev/null || jobs_max=1
passed=0
failed=0

log=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$log"' EXIT

# count LOG WHAT: adds the "N passed, M failed" numbers of the last such line in LOG
count() {
    local line p f
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
    if [ -z "$line" ]; then
        echo "tests/run.sh: $2 printed no summary (crashed?)"
        failed=$((failed + 1))
        return
    fi
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+')
    f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
    passed=$((passed + p))
    failed=$((failed + f))
}

conf_dirs=("$data/node" "$data/pytorch-converted" "$data/pytorch-operator" "$data/simple")
have_data=0
[ -d "$data/node" ] && have_data=1
have_torch=0
/usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1 && have_torch=1

# The steps, one function each (step_NAME, its output goes to $log/NAME).
step_unit() { "$build/test_unit"; }
step_kc() { "$build/test_kc"; }
step_ops() { "$build/test_ops"; }
step_opscu() { "$build/test_ops" --target cuda --compile-only --schedule kernels; }
step_opsmono() { "$build/test_ops" --target cuda --compile-only --schedule mono --precision fp16; }
step_opswaves() { "$build/test_ops" --target cuda --compile-only --schedule waves --precision fp16; }
step_gpurt() { "$build/gpu_runtime" --compile-only; }
# every conformance model (a listed expected failure that compiles is still
# one: nothing is compared)
step_confcu() {
    "$build/conformance" --target cuda --compile-only --xfail "$here/conformance/xfail.txt" "${conf_dirs[@]}"
}
# multi-group models: their persistent kernels' counter waits and barriers
step_ln() { "$build/conformance" --target cuda --compile-only --schedule "$1" --filter layer_normalization "$data/node"; }
step_ln_mono() { step_ln mono; }
step_ln_mono-barriers() { step_ln mono-barriers; }
step_ln_waves() { step_ln waves; }
step_cli() { "$here/cli/test_cli.sh" "$build"; }
step_conf() { "$build/conformance" --xfail "$here/conformance/xfail.txt" "${conf_dirs[@]}"; }
step_confc() { "$build/conformance" --target c --xfail "$here/conformance/xfail.txt" "${conf_dirs[@]}"; }
step_roundtrip() { "$build/roundtrip" "${conf_dirs[@]}"; }
step_models() { "$here/models/run_models.sh" "$build" --cuda-compile; }

# Started longest first, after the two short first steps (so that their
# reports come at once): on a 2-core machine the three NVRTC passes of
# test_ops took 244 to 308 s each, the conformance models' 200, the models
# 151 (more where they are exported first), the command-line tests 96, the
# per-op tests 91, the c-target conformance 84, the rest under 30 s; 25 min
# one after another, 13 two at a time. Each step touches $log/NAME.done
# when it ends.
order="unit kc models opsmono opswaves opscu confcu cli ops confc ln_mono ln_mono-barriers ln_waves conf roundtrip gpurt"
launch() {
    local s
    for s in $order; do
        case $s in conf* | roundtrip | ln_*) [ $have_data = 1 ] || continue ;; models) [ $have_torch = 1 ] || continue ;; esac
        while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
        ( "step_$s" >"$log/$s" 2>&1 </dev/null; touch "$log/$s.done" ) &
    done
    wait
}
launch &
launcher=$!

# report S WHAT HEADER FILTER: waits for step S, prints HEADER (if any) and
# the lines of its log FILTER matches (-v RE: those it does not), and counts
# its summary line as WHAT.
report() {
    [ -n "$3" ] && echo "$3"
    while [ ! -e "$log/$1.done" ]; do sleep 1; done
    if [ "$4" = -v ]; then grep -v -E "$5" "$log/$1"; else grep -E "$4" "$log/$1" | head -n 40; fi
    count "$log/$1" "$2"
}

report unit "unit tests" "== unit tests" -v '^ok '
report kc "kernel tests" "== kernel templates (against double-precision references)" 'FAIL'
report ops "per-op tests" "== per-op differential tests: the c target against the interpreter, random shapes and dtypes" 'FAIL'
report opscu "CUDA compile (kernels, fp32)" \
    "== CUDA kernels of every per-op case compile with NVRTC (sm_80, sm_90a; no GPU needed)" 'FAIL'
report opsmono "CUDA compile (mono, fp16)" "" 'FAIL'
report opswaves "CUDA compile (waves, fp16)" "" 'FAIL'
report gpurt "CUDA compile of the GPU runtime test program" "" 'FAIL'
if [ $have_data = 1 ]; then
    report confcu "CUDA compile of the conformance models (waves, the default; fp32)" "" '^(FAIL|XPASS)'
    for sch in mono mono-barriers waves; do
        report "ln_$sch" "CUDA compile of the layer-norm conformance models ($sch)" "" '^(FAIL|XPASS)'
    done
fi
report cli "command-line tests" "== command-line tests" -v '^ok '
if [ $have_data = 1 ]; then
    report conf "conformance" "== conformance (reference interpreter)" '^(FAIL|XPASS|==)'
    report confc "conformance (c target)" "== conformance through the c target (compiled, run by the CPU runtime)" \
        '^(FAIL|XPASS|==)'
    report roundtrip "export round trip" "== export round trip (IR -> ONNX -> IR, bit-identical outputs)" '^(FAIL|==)'
else
    echo "tests/run.sh: ONNX test data not found in $data (install libonnx-testdata)"
    failed=$((failed + 1))
fi

echo "== models: ResNet-50, MobileNetV2, BERT-base exported with PyTorch, kiln (c target) vs onnxruntime;"
echo "   their CUDA kernels built by NVRTC (fp16, waves, kernels and mono; no GPU needed)"
if [ $have_torch = 1 ]; then
    report models "model tests" "" '^(PASS|FAIL)'
else
    echo "tests/run.sh: PyTorch is missing (scripts/setup-deps.sh --models installs it)"
    failed=$((failed + 1))
fi

wait "$launcher"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
