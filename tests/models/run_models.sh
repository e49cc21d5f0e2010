#!/usr/bin/env bash
# run_models.sh: end-to-end model tests. Runs kiln on ResNet-50, MobileNetV2
# and BERT-base and checks every output against onnxruntime.
#
#   tests/models/run_models.sh BUILD_DIR [--cuda-compile]
#
# Models are exported once (tests/models/export.py, PyTorch with random
# weights) into models/ at the repository root (git-ignored) and reused;
# they are re-exported when missing or when export.py has changed. Each model
# then runs through
#     BUILD_DIR/kiln run MODEL.onnx --inputs MODEL.inputs.npz --output OUT.npz
# and tests/models/compare_ort.py (rtol 1e-3, atol 1e-4). With
# --cuda-compile, each model is then also compiled for the GPU (no GPU
# needed: NVRTC builds every kernel for sm_80 and sm_90a) with
#     BUILD_DIR/kiln compile MODEL.onnx --target cuda --precision fp16 --schedule S
# for S in waves (the default), kernels and mono; a compile whose sm_90a code
# spills registers to local memory (ptxas's report in kiln's progress lines)
# fails: that code waits on memory for its registers. One line per
# model (and compile), then "N passed, N failed"; exit status 1 when any
# failed.
# Logs and outputs go to BUILD_DIR/models/.
#
# Environment:
#   KILN_MODELS          models to run (default "resnet50 mobilenetv2 bert")
#   KILN_MODELS_DIR      model cache (default REPO/models)
#   KILN_FLAGS           extra flags for `kiln run` (e.g. "--device cuda")
#   KILN_MODEL_TIMEOUT   seconds per kiln run (default 1800)
#   PYTHON               python3 with numpy and onnxruntime (default python3)
set -u

cuda_compile=0
if [ $# -eq 2 ] && [ "$2" = "--cuda-compile" ]; then
    cuda_compile=1
elif [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR [--cuda-compile]" >&2
    exit 2
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" 2>/dev/null && pwd) || { echo "$0: no build directory '$1'" >&2; exit 2; }
KILN=$BUILD/kiln
CACHE=${KILN_MODELS_DIR:-$ROOT/models}
OUTDIR=$BUILD/models
PYTHON=${PYTHON:-python3}
MODELS=${KILN_MODELS:-resnet50 mobilenetv2 bert}
TIMEOUT=${KILN_MODEL_TIMEOUT:-1800}
RTOL=1e-3
ATOL=1e-4

if [ ! -x "$KILN" ]; then
    echo "$0: $KILN is missing; build it first (make)" >&2
    exit 2
fi
if ! "$PYTHON" -c 'import numpy, onnxruntime' 2>/dev/null; then
    echo "$0: $PYTHON cannot import numpy and onnxruntime; run scripts/setup-deps.sh" >&2
    exit 2
fi
mkdir -p "$CACHE" "$OUTDIR" || exit 2

# ---- export what is missing or stale ----------------------------------------
stamp_file=$CACHE/.export-stamp
stamp=$(cksum < "$ROOT/tests/models/export.py")
if [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp" ]; then
    for m in $MODELS; do rm -f "$CACHE/$m.onnx" "$CACHE/$m.inputs.npz"; done
fi
missing=""
for m in $MODELS; do
    if [ ! -f "$CACHE/$m.onnx" ] || [ ! -f "$CACHE/$m.inputs.npz" ]; then
        missing="$missing${missing:+,}$m"
    fi
done
if [ -n "$missing" ]; then
    echo "exporting $missing to $CACHE (once; PyTorch, a few minutes)"
    if python3 "$ROOT/tests/models/export.py" --out "$CACHE" --models "$missing" \
            > "$OUTDIR/export.log" 2>&1; then
        echo "$stamp" > "$stamp_file"
    else
        echo "export failed (log: $OUTDIR/export.log):" >&2
        tail -n 5 "$OUTDIR/export.log" >&2
    fi
fi

# ---- run and compare ------------------------------------------------------------
if command -v timeout >/dev/null 2>&1; then run_limited=(timeout "$TIMEOUT"); else run_limited=(); fi
passed=0
failed=0
for m in $MODELS; do
    model=$CACHE/$m.onnx
    inputs=$CACHE/$m.inputs.npz
    out=$OUTDIR/$m.out.npz
    log=$OUTDIR/$m.log
    rm -f "$out"
    if [ ! -f "$model" ] || [ ! -f "$inputs" ]; then
        printf 'FAIL  %-12s not exported (see %s)\n' "$m" "$OUTDIR/export.log"
        failed=$((failed + 1))
        continue
    fi
    start=$(date +%s.%N)
    # shellcheck disable=SC2086  # KILN_FLAGS is a list of words
    ${run_limited[@]+"${run_limited[@]}"} "$KILN" run "$model" --inputs "$inputs" --output "$out" ${KILN_FLAGS:-} \
        > "$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc -ne 0 ]; then
        why="kiln exited $rc"
        [ $rc -eq 124 ] && why="kiln timed out after ${TIMEOUT}s"
        printf 'FAIL  %-12s %s after %ss: %s (log: %s)\n' "$m" "$why" "$secs" \
            "$(grep -v '^$' "$log" | tail -n 1 | cut -c1-160)" "$log"
        failed=$((failed + 1))
        continue
    fi
    cmp=$("$PYTHON" "$ROOT/tests/models/compare_ort.py" "$model" "$inputs" "$out" \
        --rtol "$RTOL" --atol "$ATOL" 2>&1)
    crc=$?
    printf '%s\n' "$cmp" >> "$log"
    # per-output lines "PASS name [shape]: max abs ..." -> "name: max abs ..."
    detail=$(printf '%s\n' "$cmp" | sed -n 's/^\(PASS\|FAIL\) \([^ ]*\) \[[^]]*\]: /\2: /p' |
        cut -c1-200 | paste -sd ';' - | sed 's/;/; /g')
    if [ $crc -eq 0 ]; then
        printf 'PASS  %-12s kiln %ss; %s\n' "$m" "$secs" "$detail"
        passed=$((passed + 1))
    else
        [ -n "$detail" ] || detail=$(printf '%s\n' "$cmp" | tail -n 1)
        printf 'FAIL  %-12s kiln %ss; %s (log: %s)\n' "$m" "$secs" "$detail" "$log"
        failed=$((failed + 1))
    fi
done

# ---- the CUDA kernels, built by NVRTC ---------------------------------------------
# MODEL:SCHEDULE compiles known to spill on sm_90a, not failed for it: MobileNetV2's
# persistent kernel (3 blocks of 256 threads a multiprocessor, 80 registers a
# thread) spills in its tensor-core convolution bodies (kg_conv_tc with k-slices)
KNOWN_SPILLS="mobilenetv2:mono"
if [ $cuda_compile -eq 1 ]; then
    for m in $MODELS; do
        for sch in waves kernels mono; do
            model=$CACHE/$m.onnx
            log=$OUTDIR/$m.cuda-$sch.log
            if [ ! -f "$model" ]; then
                printf 'FAIL  %-12s cuda %s: not exported (see %s)\n' "$m" "$sch" "$OUTDIR/export.log"
                failed=$((failed + 1))
                continue
            fi
            start=$(date +%s.%N)
            ${run_limited[@]+"${run_limited[@]}"} "$KILN" compile "$model" -o "$OUTDIR/$m.cuda.kiln" --target cuda \
                --precision fp16 --schedule "$sch" > "$log" 2>&1
            rc=$?
            secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
            rm -f "$OUTDIR/$m.cuda.kiln"
            # sm_90a code that spills registers (ptxas, named in kiln's progress) is slower code
            spill=$(grep -m1 '^kiln: ptxas: sm_90a code spills' "$log" | cut -c7-200)
            known=0
            case " $KNOWN_SPILLS " in *" $m:$sch "*) known=1 ;; esac
            if [ $rc -eq 0 ] && [ -n "$spill" ] && [ $known -eq 0 ]; then
                printf 'FAIL  %-12s cuda %s: %s (log: %s)\n' "$m" "$sch" "$spill" "$log"
                failed=$((failed + 1))
            elif [ $rc -eq 0 ] && [ $known -eq 1 ] && [ -z "$spill" ]; then
                printf 'PASS  %-12s cuda %s: compiled in %ss, and no longer spills: take it off KNOWN_SPILLS\n' \
                    "$m" "$sch" "$secs"
                passed=$((passed + 1))
            elif [ $rc -eq 0 ]; then
                note=""
                [ -n "$spill" ] && note=" (its sm_90a code spills, a known case: KNOWN_SPILLS)"
                printf 'PASS  %-12s cuda %s: compiled for sm_80 and sm_90a in %ss%s\n' "$m" "$sch" "$secs" "$note"
                passed=$((passed + 1))
            else
                printf 'FAIL  %-12s cuda %s: kiln compile exited %d after %ss: %s (log: %s)\n' "$m" "$sch" $rc \
                    "$secs" "$(grep -v '^$' "$log" | tail -n 1 | cut -c1-160)" "$log"
                failed=$((failed + 1))
            fi
        done
    done
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
