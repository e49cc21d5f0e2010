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
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
data=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
passed=0
failed=0

# count LOG: adds the "N passed, M failed" numbers of the last such line in LOG
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

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== unit tests"
"$build/test_unit" >"$log/unit" 2>&1
grep -v '^ok ' "$log/unit"
count "$log/unit" "unit tests"

echo "== kernel templates (against double-precision references)"
"$build/test_kc" >"$log/kc" 2>&1
grep -E 'FAIL' "$log/kc" | head -20
count "$log/kc" "kernel tests"

echo "== per-op differential tests: the c target against the interpreter, random shapes and dtypes"
"$build/test_ops" >"$log/ops" 2>&1
grep -E 'FAIL' "$log/ops" | head -40
count "$log/ops" "per-op tests"

echo "== CUDA kernels of every per-op case compile with NVRTC (sm_80, sm_90a; no GPU needed)"
"$build/test_ops" --target cuda --compile-only --schedule kernels >"$log/opscu" 2>&1
grep -E 'FAIL' "$log/opscu" | head -40
count "$log/opscu" "CUDA compile (kernels, fp32)"
"$build/test_ops" --target cuda --compile-only --schedule mono --precision fp16 >"$log/opsmono" 2>&1
grep -E 'FAIL' "$log/opsmono" | head -40
count "$log/opsmono" "CUDA compile (mono, fp16)"
"$build/test_ops" --target cuda --compile-only --schedule waves --precision fp16 >"$log/opswaves" 2>&1
grep -E 'FAIL' "$log/opswaves" | head -40
count "$log/opswaves" "CUDA compile (waves, fp16)"

"$build/gpu_runtime" --compile-only >"$log/gpurt" 2>&1
grep -E 'FAIL' "$log/gpurt"
count "$log/gpurt" "CUDA compile of the GPU runtime test program"
data_ln="$data/node"
if [ -d "$data_ln" ]; then
    # every conformance model (a listed expected failure that compiles is
    # still one: nothing is compared)
    "$build/conformance" --target cuda --compile-only --xfail "$here/conformance/xfail.txt" \
        "$data/node" "$data/pytorch-converted" "$data/pytorch-operator" "$data/simple" >"$log/confcu" 2>&1
    grep -E '^(FAIL|XPASS)' "$log/confcu" | head -40
    count "$log/confcu" "CUDA compile of the conformance models (waves, the default; fp32)"
    # multi-group models: their persistent kernels' counter waits and barriers
    for sch in mono mono-barriers waves; do
        "$build/conformance" --target cuda --compile-only --schedule "$sch" --filter layer_normalization \
            "$data_ln" >"$log/conf_$sch" 2>&1
        grep -E '^(FAIL|XPASS)' "$log/conf_$sch"
        count "$log/conf_$sch" "CUDA compile of the layer-norm conformance models ($sch)"
    done
fi

echo "== command-line tests"
"$here/cli/test_cli.sh" "$build" >"$log/cli" 2>&1
grep -v '^ok ' "$log/cli"
count "$log/cli" "command-line tests"

echo "== conformance (reference interpreter)"
if [ -d "$data/node" ]; then
    "$build/conformance" --xfail "$here/conformance/xfail.txt" \
        "$data/node" "$data/pytorch-converted" "$data/pytorch-operator" "$data/simple" >"$log/conf" 2>&1
    grep -E '^(FAIL|XPASS|==)' "$log/conf"
    count "$log/conf" "conformance"
    echo "== conformance through the c target (compiled, run by the CPU runtime)"
    "$build/conformance" --target c --xfail "$here/conformance/xfail.txt" \
        "$data/node" "$data/pytorch-converted" "$data/pytorch-operator" "$data/simple" >"$log/confc" 2>&1
    grep -E '^(FAIL|XPASS|==)' "$log/confc"
    count "$log/confc" "conformance (c target)"

    echo "== export round trip (IR -> ONNX -> IR, bit-identical outputs)"
    "$build/roundtrip" "$data/node" "$data/pytorch-converted" "$data/pytorch-operator" "$data/simple" \
        >"$log/roundtrip" 2>&1
    grep -E '^(FAIL|==)' "$log/roundtrip"
    count "$log/roundtrip" "export round trip"
else
    echo "tests/run.sh: ONNX test data not found in $data (install libonnx-testdata)"
    failed=$((failed + 1))
fi

echo "== models: ResNet-50, MobileNetV2, BERT-base exported with PyTorch, kiln (c target) vs onnxruntime;"
echo "   their CUDA kernels built by NVRTC (fp16, waves, kernels and mono; no GPU needed)"
if /usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1; then
    "$here/models/run_models.sh" "$build" --cuda-compile >"$log/models" 2>&1
    grep -E '^(PASS|FAIL)' "$log/models"
    count "$log/models" "model tests"
else
    echo "tests/run.sh: PyTorch is missing (scripts/setup-deps.sh --models installs it)"
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
