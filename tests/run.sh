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
# before it are done, with a line every two minutes while one is awaited.
# A step killed by a signal counts as a failure; SIGINT or SIGTERM stops
# every step.
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
data=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
jobs_max=${KILN_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs_max" -ge 1 ] 2>/dev/null || jobs_max=1
passed=0
failed=0

log=$(mktemp -d)
launcher=
# kill_tree PID: PID and every process under it
kill_tree() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
    kill "$1" 2>/dev/null
}
trap 'rm -rf "$log"' EXIT
trap '[ -n "$launcher" ] && kill_tree "$launcher"; exit 130' INT TERM

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
step_ln_mono_barriers() { step_ln mono-barriers; }
step_ln_waves() { step_ln waves; }
step_cli() { "$here/cli/test_cli.sh" "$build"; }
step_conf() { "$build/conformance" --xfail "$here/conformance/xfail.txt" "${conf_dirs[@]}"; }
step_confc() { "$build/conformance" --target c --xfail "$here/conformance/xfail.txt" "${conf_dirs[@]}"; }
step_roundtrip() { "$build/roundtrip" "${conf_dirs[@]}"; }
step_models() { "$here/models/run_models.sh" "$build" --cuda-compile; }

# Started longest first, after the short steps whose reports come first (so
# that the log shows progress early). On a 2-core machine, alone: the three
# NVRTC passes of test_ops 244 to 308 s each, the conformance models' 200,
# the models 151 (more where they are exported first), the command-line
# tests 96, the per-op tests 91, the c-target conformance 84, the rest
# under 30 s: 25 min one after another. Two at a time they slow each other
# (each CUDA compile builds its two images on two threads): a fresh clone's
# ./scripts/test.sh, set-up, build and model export included, took 15.5 and
# 17.5 min in two runs.
# Each step's exit status lands whole in $log/NAME.done when it ends; a step
# skipped for want of test data or PyTorch is never reported.
order="unit kc ops gpurt models opsmono opswaves opscu confcu cli confc ln_mono ln_mono_barriers ln_waves conf roundtrip"
launch() {
    local s
    for s in $order; do
        case $s in conf* | roundtrip | ln_*) [ $have_data = 1 ] || continue ;; models) [ $have_torch = 1 ] || continue ;; esac
        while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
        ( "step_$s" >"$log/$s" 2>&1 </dev/null; echo $? >"$log/$s.rc" && mv "$log/$s.rc" "$log/$s.done" ) &
    done
    wait
}
launch &
launcher=$!

# report S WHAT HEADER LINES FILTER: waits for step S, prints HEADER (if
# any) and the lines of its log FILTER matches (-v RE: those it does not),
# at most LINES of them (0: all), and counts its summary line as WHAT.
report() {
    local waited=0 rc
    [ -n "$3" ] && echo "$3"
    while [ ! -e "$log/$1.done" ]; do
        if ! kill -0 "$launcher" 2>/dev/null && [ ! -e "$log/$1.done" ]; then
            echo "tests/run.sh: $2 never ended (its process was killed?)"
            failed=$((failed + 1))
            return
        fi
        sleep 1
        waited=$((waited + 1))
        [ $((waited % 120)) -eq 0 ] && echo "tests/run.sh: waiting for $2 ($((waited / 60)) min; the steps run $jobs_max at a time)"
    done
    if [ "$4" = -v ]; then grep -v -E "$5" "$log/$1"
    elif [ "$4" -gt 0 ]; then grep -E "$5" "$log/$1" | head -n "$4"
    else grep -E "$5" "$log/$1"
    fi
    count "$log/$1" "$2"
    rc=$(cat "$log/$1.done")
    if [ "$rc" -gt 128 ] 2>/dev/null; then
        echo "tests/run.sh: $2 was killed by signal $((rc - 128)) ($(kill -l "$rc" 2>/dev/null))"
        failed=$((failed + 1))
    fi
}

report unit "unit tests" "== unit tests" -v '^ok '
report kc "kernel tests" "== kernel templates (against double-precision references)" 20 'FAIL'
report ops "per-op tests" "== per-op differential tests: the c target against the interpreter, random shapes and dtypes" 40 'FAIL'
report opscu "CUDA compile (kernels, fp32)" \
    "== CUDA kernels of every per-op case compile with NVRTC (sm_80, sm_90a; no GPU needed)" 40 'FAIL'
report opsmono "CUDA compile (mono, fp16)" "" 40 'FAIL'
report opswaves "CUDA compile (waves, fp16)" "" 40 'FAIL'
report gpurt "CUDA compile of the GPU runtime test program" "" 0 'FAIL'
if [ $have_data = 1 ]; then
    report confcu "CUDA compile of the conformance models (waves, the default; fp32)" "" 40 '^(FAIL|XPASS)'
    for sch in mono mono-barriers waves; do
        report "ln_${sch//-/_}" "CUDA compile of the layer-norm conformance models ($sch)" "" 0 '^(FAIL|XPASS)'
    done
fi
report cli "command-line tests" "== command-line tests" -v '^ok '
if [ $have_data = 1 ]; then
    report conf "conformance" "== conformance (reference interpreter)" 0 '^(FAIL|XPASS|==)'
    report confc "conformance (c target)" "== conformance through the c target (compiled, run by the CPU runtime)" \
        0 '^(FAIL|XPASS|==)'
    report roundtrip "export round trip" "== export round trip (IR -> ONNX -> IR, bit-identical outputs)" 0 '^(FAIL|==)'
else
    echo "== conformance (reference interpreter)"
    echo "tests/run.sh: ONNX test data not found in $data (install libonnx-testdata)"
    failed=$((failed + 1))
fi

echo "== models: ResNet-50, MobileNetV2, BERT-base exported with PyTorch, kiln (c target) vs onnxruntime;"
echo "   their CUDA kernels built by NVRTC (fp16, waves, kernels and mono; no GPU needed)"
if [ $have_torch = 1 ]; then
    report models "model tests" "" 0 '^(PASS|FAIL)'
else
    echo "tests/run.sh: PyTorch is missing (scripts/setup-deps.sh --models installs it)"
    failed=$((failed + 1))
fi

wait "$launcher"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
