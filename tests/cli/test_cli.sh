#!/usr/bin/env bash
# tests/cli/test_cli.sh BUILD_DIR: the kiln command line as a user meets it:
# help texts, documented exit codes, the embedded default model, .npy/.npz
# input and output, and clear errors (never a crash) on bad input.
set -u
kiln="$1/kiln"
data=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# expect NAME WANT_RC WANT_TEXT -- CMD...: runs CMD, checks its exit code and
# that its output (stdout+stderr) contains WANT_TEXT.
expect() {
    local name=$1 want_rc=$2 want_text=$3
    shift 4
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" -eq "$want_rc" ] && grep -qF -- "$want_text" <<<"$out"; then
        echo "ok    $name"
        passed=$((passed + 1))
    else
        echo "FAIL  $name: exit $rc (want $want_rc), output:"
        sed 's/^/      /' <<<"$out" | head -20
        echo "      (wanted text: $want_text)"
        failed=$((failed + 1))
    fi
}

expect help 0 "COMMANDS" -- "$kiln" --help
expect help_exit_codes 0 "EXIT CODES" -- "$kiln" help
expect help_run 0 "--inputs FILE" -- "$kiln" run --help
expect help_inspect 0 "--shape NAME=DIMS" -- "$kiln" inspect --help
expect help_inspect_repeats 0 "repeated nodes (same op, attributes and inputs" -- "$kiln" inspect --help
expect help_ops 0 "interpreter implements" -- "$kiln" ops --help
expect version 0 "kiln " -- "$kiln" --version
expect unknown_command 1 "unknown command 'frobnicate'" -- "$kiln" frobnicate
expect unknown_option 1 "unknown option" -- "$kiln" run --bogus
expect ops_table 0 "Conv" -- "$kiln" ops
if [ -e /dev/nvidia0 ] || ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
    expect devices 0 "compute capability" -- "$kiln" devices
else
    expect devices_without_gpu 7 "no CUDA device" -- "$kiln" devices
fi
expect embedded_model 0 "probs" -- "$kiln" run
expect embedded_model_checks_itself 0 "pass  max abs err" -- "$kiln" run
expect help_compile 0 "--emit-source DIR" -- "$kiln" compile --help
expect help_compile_att_units 0 "KILN_ATT_UNITS=N" -- "$kiln" compile --help
expect help_compile_384 0 "256 or 384 threads a block" -- "$kiln" compile --help
expect help_bench 0 "p99" -- "$kiln" bench --help
expect help_verify 0 "Exit status 9" -- "$kiln" verify --help
expect embedded_model_save 0 "wrote" -- "$kiln" run --output "$tmp/out.npz"

# a softmax output sums to one
python3 - "$tmp/out.npz" >"$tmp/sum" 2>&1 <<'PY'
import sys, numpy as np
z = np.load(sys.argv[1])
print("sum", round(float(z["probs"].sum()), 4))
PY
expect embedded_output_is_a_distribution 0 "sum 1.0" -- cat "$tmp/sum"

# inputs from .npy and .npz give the same result as each other
python3 -c "
import numpy as np
x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
np.save('$tmp/image.npy', x); np.savez('$tmp/in.npz', image=x)"
"$kiln" run --input "image=$tmp/image.npy" --output "$tmp/a.npz" --quiet
"$kiln" run --inputs "$tmp/in.npz" --output "$tmp/b.npz" --quiet
expect npy_and_npz_inputs_agree 0 "same" -- python3 -c "
import numpy as np
a = np.load('$tmp/a.npz')['probs']; b = np.load('$tmp/b.npz')['probs']
print('same' if a.shape == (1, 10) and np.array_equal(a, b) else 'differ')"

# compile, then run and bench the artifact; verify a model
python3 -c "
import numpy as np
x = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
np.save('$tmp/image5.npy', x)"
expect compile_model 0 "stages" -- "$kiln" compile "$data/node/test_add_bcast/model.onnx" -o "$tmp/add.kiln" 2>/dev/null
expect compile_requires_output 1 "-o OUT.kiln is required" -- "$kiln" compile "$tmp/nope.onnx"
expect run_artifact 0 "artifact" -- "$kiln" run "$tmp/add.kiln" --threads 2
expect bench_artifact 0 "median" -- "$kiln" bench "$tmp/add.kiln" --iterations 5 --warmup 1
expect bench_json 0 '"median_ms"' -- "$kiln" bench "$tmp/add.kiln" --iterations 5 --json
expect bench_profile_top 0 "every stage" -- "$kiln" bench "$tmp/add.kiln" --iterations 2 --warmup 0 --profile-top 0
expect bench_profile_top_bad 1 "bad --profile-top" -- "$kiln" bench "$tmp/add.kiln" --profile-top -3
# --profile --json: every stage in program order under "profile", whose
# times add up to its total; the strings escaped (an artifact named with a
# quote and a backslash)
cp "$tmp/add.kiln" "$tmp/q\"b\\.kiln"
"$kiln" bench "$tmp/q\"b\\.kiln" --iterations 3 --warmup 0 --profile --json >"$tmp/prof.json" 2>&1
prof_check='import json, sys
d = json.load(open(sys.argv[1]))
p = d["profile"]
ok = abs(sum(s["run_us"] + s["wait_us"] for s in p["stages"]) - p["total_us"]) < 0.01 * p["total_us"] + 0.01
named = d["model"].endswith("q" + chr(34) + "b" + chr(92) + ".kiln")
print("%d stages, times %s, name %s" % (len(p["stages"]), "add up" if ok else "do not add up",
      "ok" if named else repr(d["model"])))'
expect bench_profile_json 0 "1 stages, times add up, name ok" -- python3 -c "$prof_check" "$tmp/prof.json"
expect bench_device_io_needs_cuda 1 "needs --target cuda" -- "$kiln" bench "$tmp/add.kiln" --device-io --target c
expect bench_device_io_c_artifact 1 "compiled for the cuda target" -- "$kiln" bench "$tmp/add.kiln" --device-io
expect bench_host_buffers 0 '"io": "aligned"' -- "$kiln" bench "$tmp/add.kiln" --iterations 3 --json
expect bench_pageable 0 '"io": "pageable"' -- "$kiln" bench "$tmp/add.kiln" --iterations 3 --json --pageable
expect bench_pageable_device_io 1 "exclude each other" -- "$kiln" bench "$tmp/add.kiln" --pageable --device-io
expect run_no_pageable 1 "unknown option" -- "$kiln" run "$tmp/add.kiln" --pageable
expect verify_model 0 "PASS" -- "$kiln" verify "$data/node/test_conv_with_strides_padding/model.onnx"
"$kiln" run --input "image=$tmp/image5.npy" --output "$tmp/c.npz" --quiet
"$kiln" run --input "image=$tmp/image5.npy" --output "$tmp/i.npz" --quiet --target interp
expect compiled_matches_interpreter 0 "close" -- python3 -c "
import numpy as np
a = np.load('$tmp/c.npz')['probs']; b = np.load('$tmp/i.npz')['probs']
print('close' if np.allclose(a, b, rtol=1e-4, atol=1e-6) else 'differ', np.abs(a - b).max())"
printf 'KILNART\0garbage' >"$tmp/bad.kiln"
expect corrupt_artifact 3 "artifact" -- "$kiln" run "$tmp/bad.kiln"

# bad input: clear errors with documented exit codes
expect missing_file 2 "cannot open" -- "$kiln" inspect "$tmp/nope.onnx"
printf 'this is not a model' >"$tmp/junk.onnx"
expect junk_model 3 "not a valid ONNX model" -- "$kiln" inspect "$tmp/junk.onnx"
: >"$tmp/empty.onnx"
expect empty_model 3 "empty" -- "$kiln" run "$tmp/empty.onnx"
python3 -c "import numpy as np; np.save('$tmp/bad.npy', np.zeros((2, 2), np.float32))"
expect wrong_input_shape 5 "input 'image'" -- "$kiln" run --input "image=$tmp/bad.npy"
expect wrong_input_name 1 "no input 'nosuch'" -- "$kiln" run --input "nosuch=$tmp/bad.npy"
printf 'garbage' >"$tmp/garbage.npy"
expect garbage_npy 1 "garbage.npy" -- "$kiln" run --input "image=$tmp/garbage.npy"

# a conformance model through inspect and run
if [ -d "$data/node/test_add_bcast" ]; then
    expect inspect_model 0 "every op is supported" -- "$kiln" inspect "$data/node/test_add_bcast/model.onnx"
    expect inspect_unsupported 4 "is a sequence; kiln supports dense tensors only" -- \
        "$kiln" inspect "$data/node/test_sequence_insert_at_back/model.onnx"
    expect inspect_lists_all_unsupported 4 "node #0 (Adam) in domain 'ai.onnx.preview.training'" -- \
        "$kiln" inspect "$data/node/test_adam/model.onnx"
    expect run_unsupported 4 "kiln does not support" -- "$kiln" run "$data/node/test_adam/model.onnx"
    # the cuda rProgram, listed without building: the expanded layer norm's
    # 10 groups need 9 barriers one after another, 5 once independent
    # groups share stages
    ln="$data/node/test_layer_normalization_2d_axis1_expanded/model.onnx"
    expect inspect_schedule_mono 0 "5 grid barriers (9 before merging), replaced by waits on 11 completion counters" -- \
        "$kiln" inspect "$ln" --schedule mono
    expect inspect_schedule_barriers 0 "10 groups in 1 kernel (1 persistent), 5 grid barriers (9 before merging)" -- \
        "$kiln" inspect "$ln" --schedule mono-barriers
    expect inspect_schedule_stages 0 "stage 5" -- "$kiln" inspect "$ln" --schedule mono --precision fp16
    expect inspect_schedule_waits 0 "waits for group" -- "$kiln" inspect "$ln" --schedule mono
    expect inspect_schedule_config 0 "[kg_gemm_" -- \
        "$kiln" inspect "$data/pytorch-operator/test_operator_mm/model.onnx" --schedule kernels
    expect inspect_schedule_kernels 0 "launch 0: kernel k_3" -- "$kiln" inspect "$ln" --schedule kernels
    expect inspect_schedule_host_segment 0 "host segment 0 (reference interpreter)" -- \
        "$kiln" inspect "$data/node/test_nonzero_example/model.onnx" --schedule kernels
    expect inspect_bad_schedule 1 "bad --schedule 'wavefront'" -- "$kiln" inspect "$ln" --schedule wavefront
    expect inspect_schedule_config_suffix 0 "256 threads a block" -- "$kiln" inspect "$ln" --schedule mono:256x2
    expect inspect_schedule_bad_config 1 "BLOCK 128, 256 or 384 threads" -- "$kiln" inspect "$ln" --schedule mono:96x2
    expect inspect_schedule_kernels_config 1 "bad --schedule 'kernels:128x1'" -- "$kiln" inspect "$ln" --schedule kernels:128x1
    expect inspect_precision_alone 1 "--precision goes with --schedule" -- "$kiln" inspect "$ln" --precision fp16
    expect inspect_bad_precision 1 "bad --precision 'fp8'" -- "$kiln" inspect "$ln" --schedule mono --precision fp8
    # the default kernel-wide configuration: one block of 128 threads per
    # multiprocessor where convolutions do not dominate
    expect inspect_schedule_default_config 0 "blocks of 128 threads, 1 a multiprocessor" -- "$kiln" inspect "$ln" --schedule mono
    expect inspect_schedule_named_config 0 "blocks of 256 threads, 2 a multiprocessor" -- "$kiln" inspect "$ln" \
        --schedule mono:256x2
    # mono: rOperators that differ only in their tensors' places share one
    # body (the two Reshapes of the expanded layer norm, ReduceMean twice);
    # KILN_SHARE_CODE=0 gives each its own
    expect inspect_mono_shared_code 0 "the code of 10 rOperators in 8 bodies" -- "$kiln" inspect "$ln" --schedule mono
    expect cuda_mono_shared_code 0 "the code of 10 rOperators in 8 bodies" -- \
        "$kiln" compile "$ln" --target cuda --schedule mono --precision fp16 -o "$tmp/ln_mono.kiln"
    expect cuda_mono_own_code 0 "0" -- sh -c "KILN_SHARE_CODE=0 '$kiln' compile '$ln' --target cuda --schedule mono \
        -o '$tmp/ln_mono0.kiln' 2>&1 | grep -c 'rOperators in' || true"
    # the members' profile slots: a line per member, kernel, rTasks, group
    expect cuda_mono_profile_slots 0 "10" -- sh -c "'$kiln' compile '$ln' --target cuda --schedule mono \
        -o '$tmp/ln_mono1.kiln' --emit-source '$tmp/ln_mono_src' >/dev/null 2>&1 && \
        sed -n '/kg_prof_slots\[\] =/,/^;/p' '$tmp/ln_mono_src/model.cu' | grep -c '^\"k_3 1 '"
    # the persistent kernel's rProgram as tables in constant memory: its 6
    # stages, 10 members and 11 waits (emit_persistent), a call for each of
    # the 8 bodies, and the 2 bodies that two members share taking the
    # constants they pass differently from kg_values (the rest written in)
    expect cuda_mono_tables 0 "3" -- grep -cE \
        "^static __constant__ kg_(stage kg_stages_[0-9]+\[6\]|member kg_members_[0-9]+\[10\]|dep kg_deps_[0-9]+\[11\]) = \{" \
        "$tmp/ln_mono_src/model.cu"
    expect cuda_mono_calls 0 "8" -- grep -cE "^ +case [0-9]+u: opb_[0-9]+\(c, r" "$tmp/ln_mono_src/model.cu"
    expect cuda_mono_values_shared 0 "2" -- grep -cE "case [0-9]+u: opb_[0-9]+\(c, r, v\[0\], v\[1\]\); break;" \
        "$tmp/ln_mono_src/model.cu"
fi

# kiln tune: the options, and a clear refusal without a GPU (CI has none)
mm="$data/pytorch-operator/test_operator_mm/model.onnx"
expect tune_help 0 "--budget D" -- "$kiln" tune --help
expect tune_needs_model 1 "a MODEL is required" -- "$kiln" tune
expect tune_bad_budget 1 "bad --budget '10x'" -- "$kiln" tune "$mm" --budget 10x
expect tune_zero_budget 1 "bad --budget '0'" -- "$kiln" tune "$mm" --budget 0
expect tune_cuda_only 1 "cuda target only" -- "$kiln" tune "$mm" --target c
expect tune_no_artifact 1 "writes no artifact" -- "$kiln" tune "$mm" -o "$tmp/t.kiln"
# the mono sweep's configurations: checked before the GPU is looked for
expect tune_configs_help 0 "--configs LIST" -- "$kiln" tune --help
expect tune_configs_need_mono 1 "--configs needs --schedule mono" -- "$kiln" tune "$mm" --configs 128x1
expect tune_configs_named_config 1 "--configs needs --schedule mono" -- "$kiln" tune "$mm" \
    --schedule mono:128x1 --configs 128x1
expect tune_configs_bad 1 "bad --configs '128x6'" -- "$kiln" tune "$mm" --schedule mono --configs 128x6
expect tune_configs_block 1 "bad --configs '96x1'" -- "$kiln" tune "$mm" --schedule mono --configs 96x1
expect tune_configs_block_512 1 "BLOCK 128, 256 or 384 threads" -- "$kiln" tune "$mm" --schedule mono --configs 512x1
expect tune_configs_twice 1 "256x2 twice" -- "$kiln" tune "$mm" --schedule mono --configs 256x2,128x1,256x2
expect tune_configs_trailing 1 "bad --configs '128x1,'" -- "$kiln" tune "$mm" --schedule mono --configs 128x1,
expect compile_no_budget 1 "unknown option or missing value '--budget'" -- "$kiln" compile "$mm" -o "$tmp/t.kiln" \
    --budget 1m
if ! "$kiln" devices >/dev/null 2>&1; then
    expect tune_no_gpu 7 "there is none here" -- "$kiln" tune "$mm" --budget 1.5h --precision fp16
    expect tune_mono_no_gpu 7 "there is none here" -- "$kiln" tune "$mm" --schedule mono --configs 128x1,256x3
    expect tune_mono_no_gpu_384 7 "there is none here" -- "$kiln" tune "$mm" --schedule mono --configs 384x1
fi

if python3 -c "import onnx" 2>/dev/null; then
    # repeated nodes (pass_cse): Hugging Face's BERT computes its attention
    # mask's Where in every layer; here three Wheres on equal constants of
    # other names, a Relu of each (merged: 4 of the 6), a Where of another
    # constant and a Neg that is a graph output (kept)
    python3 - "$tmp/repeats.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
          (("c1", -1e4), ("c2", -1e4), ("c3", -1e4), ("c4", -5.0))]
nodes = [helper.make_node("Where", ["m", "x", c], [w]) for c, w in (("c1", "w1"), ("c2", "w2"), ("c3", "w3"),
                                                                     ("c4", "w4"))]
nodes += [helper.make_node("Relu", [w], ["r" + w]) for w in ("w1", "w2", "w3")]
nodes += [helper.make_node("Sum", ["rw1", "rw2", "rw3", "w4"], ["y"]), helper.make_node("Neg", ["x"], ["n1"]),
          helper.make_node("Neg", ["x"], ["n2"]), helper.make_node("Add", ["n1", "y"], ["z"])]
g = helper.make_graph(nodes, "repeats", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64]),
                                         helper.make_tensor_value_info("m", TensorProto.BOOL, [4, 64])],
                      [helper.make_tensor_value_info(v, TensorProto.FLOAT, [4, 64]) for v in ("z", "n2")], consts)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cse_inspect 0 "repeats    4 nodes identical to an earlier one" -- "$kiln" inspect "$tmp/repeats.onnx"
    expect cse_inspect_graph 0 "%rw2:f32[4,64] = Relu(%w2)" -- "$kiln" inspect "$tmp/repeats.onnx" --graph
    expect cse_compile_line 0 "4 repeated nodes left out" -- "$kiln" compile "$tmp/repeats.onnx" -o "$tmp/repeats.kiln"
    expect cse_verify 0 "PASS" -- "$kiln" verify "$tmp/repeats.onnx"
    expect cse_run_check 0 "z                        pass" -- "$kiln" run "$tmp/repeats.onnx" --check
    expect cse_cuda_mono 0 "stages" -- "$kiln" compile "$tmp/repeats.onnx" -o "$tmp/repeats-cu.kiln" --target cuda \
        --precision fp16 --schedule mono
    # tile-row waits (KILN_MONO_ROWS=1): in a chain of products each rTask
    # of the second waits for the first's tile rows it reads (the rows of
    # A), not for all of it; off by default, where it waits for all of it.
    # The program, with its tile-row counters and windows, builds by NVRTC.
    python3 - "$tmp/mmchain.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
ws = [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32) / 8, n) for n in ("w1", "w2")]
nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])]
g = helper.make_graph(nodes, "mmchain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 64])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512, 64])], ws)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect mono_rows_listing 0 "(the tile rows it reads)" -- sh -c "KILN_MONO_ROWS=1 '$kiln' inspect '$tmp/mmchain.onnx' \
        --schedule mono --precision fp16"
    expect mono_rows_off_by_default 0 "no tile-row waits" -- sh -c "'$kiln' inspect '$tmp/mmchain.onnx' \
        --schedule mono --precision fp16 | grep -q 'tile rows' && echo found || echo 'no tile-row waits'"
    expect mono_rows_build 0 "kg_wait_rows kg_waits_exit_rows" -- sh -c "KILN_MONO_ROWS=1 '$kiln' compile \
        '$tmp/mmchain.onnx' --target cuda --precision fp16 --schedule mono -o '$tmp/mmchain.kiln' \
        --emit-source '$tmp/mmchain_src' >/dev/null && grep -o 'kg_wait_rows\|kg_waits_exit_rows' \
        '$tmp/mmchain_src/model.cu' | sort -u | tr '\n' ' '"
    # random ops in separate host segments draw from generators of their
    # own: z = u1 - u2 was all zeros when every segment started from one seed
    python3 - "$tmp/rl.onnx" <<'PY'
import sys
import onnx
from onnx import TensorProto, helper
nodes = [helper.make_node("RandomUniformLike", ["x"], ["u1"]), helper.make_node("RandomUniformLike", ["x"], ["u2"]),
         helper.make_node("Sub", ["u1", "u2"], ["z"])]
g = helper.make_graph(nodes, "rl", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect random_segments_differ 0 "independent draws" -- sh -c "out=\$('$kiln' run '$tmp/rl.onnx' --target c) \
        && printf '%s' \"\$out\" | grep -q 'f32\[2,3\]  min' && ! printf '%s' \"\$out\" | grep -q 'min 0  max 0' \
        && echo 'independent draws'"
    # The cuda target stores a GEMM's [k, n] weight transposed ([n, k], K-major
    # for the TMA tiles) when nothing else reads it; a weight two MatMuls share
    # stays as it is. NVRTC compiles without a GPU (then for an sm_90 default).
    python3 - "$tmp/weights.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = lambda name, k, n: numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), name)
nodes = [helper.make_node("MatMul", ["x", "w_own"], ["h"]),
         helper.make_node("MatMul", ["h", "w_shared"], ["y1"]),
         helper.make_node("MatMul", ["h", "w_shared"], ["y2"])]
g = helper.make_graph(nodes, "weights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 32])],
                      [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [64, 16]),
                       helper.make_tensor_value_info("y2", TensorProto.FLOAT, [64, 16])],
                      [w("w_own", 32, 48), w("w_shared", 48, 16)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_compile_weights 0 "stages" -- "$kiln" compile "$tmp/weights.onnx" -o "$tmp/weights.kiln" \
        --target cuda --precision fp16 --emit-source "$tmp/wsrc"
    expect cuda_weight_transposed_once 0 "1" -- grep -c "B stored transposed" "$tmp/wsrc/model.cu"
    "$kiln" compile "$tmp/weights.onnx" -o "$tmp/w32.kiln" --target cuda --emit-source "$tmp/wsrc32" >/dev/null 2>&1
    expect cuda_weight_fp32_kept 1 "0" -- grep -c "B stored transposed" "$tmp/wsrc32/model.cu"

    # BERT's second feed-forward product at batch 16 (2048 x 768 x 3072): the
    # cost model gives its 128 x 96 tiles a producer warp, alone; with
    # KILN_GEMM_CLUSTERS=1, clusters of two blocks that share A, a kernel of
    # its own launched in clusters (both images compile: sm_80 without them)
    python3 - "$tmp/ffn2.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((3072, 768)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["y"])], "ffn2",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 3072])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 768])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_ffn2_producer_warp 0 "producer warp, alone" -- sh -c "out=\$('$kiln' inspect '$tmp/ffn2.onnx' \
        --schedule kernels --precision fp16) && printf '%s' \"\$out\" | grep -q 'kg_gemm_wgt_ws 128x96x64.*producer warp' \
        && ! printf '%s' \"\$out\" | grep -q 'cluster of' && echo 'producer warp, alone'"
    expect cuda_compile_cluster 0 "stages" -- env KILN_GEMM_CLUSTERS=1 "$kiln" compile "$tmp/ffn2.onnx" -o "$tmp/ffn2.kiln" \
        --target cuda --precision fp16 --emit-source "$tmp/csrc"
    expect cuda_cluster_kernel 0 "KG_CLUSTER(2) k_" -- grep -o "KG_CLUSTER(2) k_" "$tmp/csrc/model.cu"
    expect cuda_cluster_template 0 "kg_gemm_wgt_ws(&g, tm, tn, 128, 96, 4, 2)" -- \
        grep -o "kg_gemm_wgt_ws(&g, tm, tn, 128, 96, 4, 2)" "$tmp/csrc/model.cu"
    expect cuda_cluster_listed 0 "producer warp, cluster of 2" -- env KILN_GEMM_CLUSTERS=1 "$kiln" inspect "$tmp/ffn2.onnx" --schedule kernels \
        --precision fp16
    expect cuda_cluster_not_mono 0 "gemm, no cluster" -- sh -c "out=\$(KILN_GEMM_CLUSTERS=1 '$kiln' inspect '$tmp/ffn2.onnx' --schedule mono \
        --precision fp16) && printf '%s' \"\$out\" | grep -q '\[kg_gemm' && ! printf '%s' \"\$out\" | grep -q 'cluster of' \
        && echo 'gemm, no cluster'"
    # BERT's second feed-forward product at batch 1 (128 x 768 x 3072, bias
    # and residual): four splits of K on the blocks of a cluster, summed in
    # its shared memory (kg_gemm_wgt_csum); not in a persistent kernel, nor
    # in float32 (no TMA product)
    # (and ViT-B/16's, 197 rows: ffn2vit.onnx)
    python3 - "$tmp/ffn2b1.onnx" "$tmp/ffn2vit.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((3072, 768)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), "b")
for path, rows in zip(sys.argv[1:], (128, 197)):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["t"]),
                           helper.make_node("Add", ["t", "b"], ["u"]), helper.make_node("Add", ["u", "r"], ["y"])],
                          "ffn2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 3072]),
                                   helper.make_tensor_value_info("r", TensorProto.FLOAT, [rows, 768])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 768])], [w, b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
PY
    expect cuda_csum_listed 0 "4 splits, summed in a cluster" -- "$kiln" inspect "$tmp/ffn2b1.onnx" --schedule waves \
        --precision fp16
    expect cuda_csum_compile 0 "stages" -- "$kiln" compile "$tmp/ffn2b1.onnx" -o "$tmp/ffn2b1.kiln" --target cuda \
        --precision fp16 --emit-source "$tmp/cssrc"
    expect cuda_csum_kernel 0 "KG_CLUSTER(4) k_" -- grep -o "KG_CLUSTER(4) k_" "$tmp/cssrc/model.cu"
    expect cuda_csum_arg 0 "g.csum = 1;" -- grep -o "g.csum = 1;" "$tmp/cssrc/model.cu"
    expect cuda_csum_kernels 0 "4 splits, summed in a cluster" -- "$kiln" inspect "$tmp/ffn2b1.onnx" --schedule kernels \
        --precision fp16
    for p in mono:fp16 kernels:fp32; do
        expect "cuda_csum_not_${p%:*}_${p#*:}" 0 "product, not summed in a cluster" -- sh -c "out=\$('$kiln' inspect \
            '$tmp/ffn2b1.onnx' --schedule ${p%:*} --precision ${p#*:}) && printf '%s' \"\$out\" | grep -q '\[kg_gemm' \
            && ! printf '%s' \"\$out\" | grep -q 'summed in a cluster' && echo 'product, not summed in a cluster'"
    done
    # a persistent kernel runs no clusters: there ViT's product splits its
    # 128 x 64 tiles (two warpgroups of the 256-thread block) through the
    # split-K workspace (FFN2's rTask 11.7 -> 8.9 us against 64 x 48 tiles
    # in two splits, ViT-B/16 mono 664-667 -> 643-653 us on an H100); the
    # kernel compiles for sm_80 too, where kg_gemm_tc sums the same tiles
    expect cuda_mono_wide_split 0 "128x64x64 (TMA), 8 stages, 4 splits]" -- "$kiln" inspect "$tmp/ffn2vit.onnx" \
        --schedule mono --precision fp16
    expect cuda_mono_wide_split_compiles 0 "g.csum = 0;" -- sh -c "'$kiln' compile '$tmp/ffn2vit.onnx' \
        -o '$tmp/ffn2vit.kiln' --target cuda --precision fp16 --schedule mono --emit-source '$tmp/fvsrc' >/dev/null 2>&1 \
        && grep -q 'kg_gemm_wgt(&g, tm, tn, 128, 64, 8)' '$tmp/fvsrc/model.cu' && grep -o 'g.splits = 4;.*' '$tmp/fvsrc/model.cu'"
    # three identical products side by side (separate query, key and value
    # at ViT's 197 rows) keep to splits whose workspace places all fit at
    # once: in 128 x 128 tiles in 3 splits each took a stage of its own
    python3 - "$tmp/qkv3.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits, nodes, outs = [], [helper.make_node("Tanh", ["x"], ["h"])], []
for i in range(3):
    inits += [numpy_helper.from_array(rng.standard_normal((768, 768)).astype(np.float32), "w%d" % i),
              numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), "b%d" % i)]
    nodes += [helper.make_node("MatMul", ["h", "w%d" % i], ["t%d" % i]),
              helper.make_node("Add", ["t%d" % i, "b%d" % i], ["y%d" % i])]
    outs.append(helper.make_tensor_value_info("y%d" % i, TensorProto.FLOAT, [197, 768]))
g = helper.make_graph(nodes, "qkv3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [197, 768])], outs, inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_share_splits_fit 0 "a multiprocessor), 2 stages" -- "$kiln" inspect "$tmp/qkv3.onnx" --schedule mono \
        --precision fp16
    # mono: the TMA product's member names its tensor maps (1 + the first),
    # which the loop asks for while the block waits for the Relu
    expect cuda_mono_tmap_member 0 "1" -- sh -c "'$kiln' compile '$tmp/ffn2.onnx' -o '$tmp/ffn2m.kiln' --target cuda \
        --precision fp16 --schedule mono --emit-source '$tmp/msrc' >/dev/null 2>&1 && grep -cE \
        '^    \{([0-9]+u, ){7}[1-9][0-9]*u\}, /\* group' '$tmp/msrc/model.cu'"
    expect cuda_mono_tmap_prefetch 0 "2" -- grep -c "kg_tmap_prefetch(&kg_tmaps\[m.tmap" "$tmp/msrc/model.cu"
    expect cuda_tmap_prefetch_off 0 "1" -- sh -c "KILN_TMAP_PREFETCH=0 '$kiln' compile '$tmp/ffn2.onnx' \
        -o '$tmp/ffn2m0.kiln' --target cuda --precision fp16 --schedule mono --emit-source '$tmp/msrc0' >/dev/null 2>&1 \
        && grep -c '^#define KG_NO_TMAP_PREFETCH 1' '$tmp/msrc0/model.cu'"
    # the GEMM cost model's picks for BERT b1's and ViT's products: the
    # candidates bench/gpu_gemm timed fastest on an H100 (64 x 48 in 12
    # stages for BERT's 128 rows, 64 x 96 for ViT's 197-row query/key/value
    # and FFN1 products), or within 5% of it (the 3072-deep products in four
    # splits summed in a cluster: 6.06 against 5.76 us, 8.88 against 8.79),
    # listed without a GPU or a build
    gg="$(dirname "$kiln")/gpu_gemm"
    for pick in "bert1_qkv:wgt 64x48x64 st12" "bert1_ffn1:wgt 64x48x64 st12" "bert1_ffn2:wgt 64x64x64 st6 sk4 cs" \
        "vit_qkv:wgt 64x96x64 st8" "vit_fc1:wgt 64x96x64 st8" "vit_fc2:wgt 64x128x64 st8 sk4 cs"; do
        expect "cost_model_pick_${pick%%:*}" 0 "heuristic ${pick#*:}." -- sh -c "'$gg' --rank-only --shapes ${pick%%:*} \
            | sed -n 's/^${pick%%:*} .*; \\(heuristic .*\\)\$/\\1./p'"
    done
    # the epilogue's bias and residual asked into L1 early unless KILN_EPI_TOUCH=0
    expect cuda_epi_touch_default 0 "0" -- sh -c "grep -c '^#define KG_NO_EPI_TOUCH' '$tmp/msrc/model.cu'; true"
    expect cuda_epi_touch_off 0 "1" -- sh -c "KILN_EPI_TOUCH=0 '$kiln' compile '$tmp/ffn2.onnx' \
        -o '$tmp/ffn2e0.kiln' --target cuda --precision fp16 --schedule waves --emit-source '$tmp/esrc0' >/dev/null 2>&1 \
        && grep -c '^#define KG_NO_EPI_TOUCH 1' '$tmp/esrc0/model.cu'"
    # products of one row with A and B K-major (a classifier at batch 1)
    # take the matrix-vector template, in either schedule; 2 rows do not
    python3 - "$tmp/rows1.onnx" "$tmp/rows2.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
for path, m in ((sys.argv[1], 1), (sys.argv[2], 2)):
    inits = [numpy_helper.from_array(rng.standard_normal((150, 200)).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal(150).astype(np.float32), "bias")]
    nodes = [helper.make_node("Gemm", ["a", "b", "bias"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
    g = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, 200])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
PY
    for s in waves mono; do
        expect "cuda_gemv_$s" 0 "[kg_gemm_gemv " -- "$kiln" inspect "$tmp/rows1.onnx" --schedule $s --precision fp16
    done
    expect cuda_gemv_two_rows 0 "another product" -- sh -c "out=\$('$kiln' inspect '$tmp/rows2.onnx' --schedule waves --precision fp16) \
        && echo \"\$out\" | grep -q 'group 0 .*\[kg_gemm_' && ! echo \"\$out\" | grep -q kg_gemm_gemv \
        && echo 'another product'"
    expect cuda_gemv_compiles 0 "kg_gemm_gemv(&g, tn, " -- sh -c "'$kiln' compile '$tmp/rows1.onnx' -o '$tmp/rows1.kiln' \
        --target cuda --precision fp16 --emit-source '$tmp/rows1src' >/dev/null 2>&1 && grep -o 'kg_gemm_gemv(&g, tn, ' \
        '$tmp/rows1src/model.cu'"
    # a lane loads its chunks of K (256 elements apart) ahead of their
    # multiply-adds, as many as K has (200: one) and the registers allow:
    # ResNet-50's fc (K 2048) all 8 in the waves schedule, 2 in a
    # persistent kernel of three 256-thread blocks a multiprocessor
    python3 - "$tmp/rowsk.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits = [numpy_helper.from_array(rng.standard_normal((1000, 2048)).astype(np.float32), "b")]
nodes = [helper.make_node("Gemm", ["a", "b"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
g = helper.make_graph(nodes, "rowsk", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 2048])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_gemv_ahead_one 0 "columns, 1 chunk of K ahead]" -- "$kiln" inspect "$tmp/rows1.onnx" --schedule waves \
        --precision fp16
    expect cuda_gemv_ahead_all 0 "columns, 8 chunks of K ahead]" -- "$kiln" inspect "$tmp/rowsk.onnx" --schedule waves \
        --precision fp16
    expect cuda_gemv_ahead_regs 0 "columns, 2 chunks of K ahead]" -- "$kiln" inspect "$tmp/rowsk.onnx" \
        --schedule mono:256x3 --precision fp16
    expect cuda_gemv_ahead_compiles 0 "kg_gemm_gemv(&g, tn, 4, 1, 8);" -- sh -c "'$kiln' compile '$tmp/rowsk.onnx' \
        -o '$tmp/rowsk.kiln' --target cuda --precision fp16 --emit-source '$tmp/rowsksrc' >/dev/null 2>&1 \
        && grep -o 'kg_gemm_gemv(&g, tn, 4, 1, 8);' '$tmp/rowsksrc/model.cu'"
    # products taller than one 128-row tile (ViT's 197 rows, BERT b16's 2048):
    # one block of 256 threads a multiprocessor by default; BERT b1's 128
    # rows (mm.onnx below) keep one of 128; a large product of few rows
    # (64 x 32768) three of 128
    expect cuda_mono_large_product_config 0 "blocks of 256 threads, 1 a multiprocessor" -- "$kiln" inspect "$tmp/ffn2.onnx" \
        --schedule mono
    # ... and in 16 bits, where the product also has more than 2^20 elements
    # (BERT b16's 2048 x 768 and 2048 x 3072) and there is no convolution,
    # one of 384 threads: three-warpgroup tiles
    expect cuda_mono_large_product_config_16 0 "blocks of 384 threads, 1 a multiprocessor" -- "$kiln" inspect \
        "$tmp/ffn2.onnx" --schedule mono --precision fp16
    python3 - "$tmp/tall.onnx" "$tmp/wide.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
for path, m, k, n in ((sys.argv[1], 197, 768, 3072), (sys.argv[2], 64, 32, 32768)):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((k, n)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["y"])], "p",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
PY
    expect cuda_mono_tall_product_config 0 "blocks of 256 threads, 1 a multiprocessor" -- "$kiln" inspect "$tmp/tall.onnx" \
        --schedule mono --precision fp16
    expect cuda_mono_wide_product_config 0 "blocks of 128 threads, 3 a multiprocessor" -- "$kiln" inspect "$tmp/wide.onnx" \
        --schedule mono --precision fp16
    # BERT b16's query, key and value products side by side: 192 x 192 tiles
    # of three warpgroups, 44 rTasks each, all three in one round
    python3 - "$tmp/qkv16.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits, nodes, outs = [], [helper.make_node("Tanh", ["x"], ["h"])], []
for i in range(3):
    inits.append(numpy_helper.from_array(rng.standard_normal((768, 768)).astype(np.float32), "w%d" % i))
    nodes.append(helper.make_node("MatMul", ["h", "w%d" % i], ["y%d" % i]))
    outs.append(helper.make_tensor_value_info("y%d" % i, TensorProto.FLOAT, [2048, 768]))
g = helper.make_graph(nodes, "qkv16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 768])], outs, inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_384_tiles 0 "three of them" -- sh -c "test \"\$('$kiln' inspect '$tmp/qkv16.onnx' --schedule mono \
        --precision fp16 | grep -c ' 44 rTasks .*\[kg_gemm_wgt 192x192x64 (TMA)')\" = 3 && echo three of them"
    # the out-projection's shape (a bias and a residual) in those blocks: the
    # producer-warp 128 x 96 tile, narrow, on 288 of the 384 threads
    python3 - "$tmp/proj16.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((768, 768)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), "b")
nodes = [helper.make_node("Tanh", ["x"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["t"]),
         helper.make_node("Add", ["t", "b"], ["u"]), helper.make_node("Add", ["u", "r"], ["y"])]
g = helper.make_graph(nodes, "proj16", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2048, 768]) for n in "xr"],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 768])], [w, b])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_384_producer_warp 0 "on 288 of the 384 threads  [kg_gemm_wgt_ws 128x96x64 (TMA)" -- "$kiln" inspect \
        "$tmp/proj16.onnx" --schedule mono --precision fp16
    # BERT b16's FFN1's shape (a bias, an activation): outside a persistent kernel 192 x 256
    # tiles, the epilogue staged in halves; in one, whose registers every body
    # shares, not (emit_gemm.c stage_parts)
    python3 - "$tmp/ffn1_16.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((768, 3072)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal(3072).astype(np.float32), "b")
nodes = [helper.make_node("Tanh", ["x"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["t"]),
         helper.make_node("Add", ["t", "b"], ["u"]), helper.make_node("Relu", ["u"], ["y"])]
g = helper.make_graph(nodes, "ffn1_16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 768])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 3072])], [w, b])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_wide_tile 0 "132 rTasks" -- sh -c "'$kiln' inspect '$tmp/ffn1_16.onnx' --schedule waves --precision fp16 \
        | grep '\[kg_gemm_wgt 192x256x64 (TMA), 3 stages' | grep -o '132 rTasks'"
    expect cuda_wide_tile_not_mono 0 "no 192 x 256" -- sh -c "out=\$('$kiln' inspect '$tmp/ffn1_16.onnx' --schedule mono \
        --precision fp16) && printf '%s' \"\$out\" | grep -q '\[kg_gemm_wgt' && ! printf '%s' \"\$out\" | grep -q '192x256' \
        && echo 'no 192 x 256'"
    # ... but not beside a convolution, which no 384-thread template takes
    python3 - "$tmp/convmm.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((768, 768)).astype(np.float32), "w")
k = numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), "k")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Conv", ["c", "k"], ["z"])], "cm",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 768]),
                       helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 8, 16, 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 768]),
                       helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 16, 16])], [w, k])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_384_not_beside_conv 0 "blocks of 256 threads, 1 a multiprocessor" -- "$kiln" inspect \
        "$tmp/convmm.onnx" --schedule mono --precision fp16
    # convolutions: three blocks of 256 threads a multiprocessor, unless the
    # pointwise ones are 16-bit and average 2^25 multiply-adds an image or
    # more (ResNet-50's 55 M): then one, where they run as TMA products
    # (kg_gemm_wgt); a pool in a persistent kernel takes outputs enough for
    # about one wave of its blocks (3136 blocks' worth on 132: 8 a thread,
    # where a kernel of its own takes 4), one without ILP
    python3 - "$tmp/pwbig.onnx" "$tmp/pwsmall.onnx" "$tmp/pwbatch.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
for path, n, c, k, hw in ((sys.argv[1], 1, 64, 256, 56), (sys.argv[2], 1, 32, 64, 28), (sys.argv[3], 32, 32, 64, 28)):
    w1 = numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((k, c, 1, 1)) * 0.05).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"]), helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("MaxPool", ["r2"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)]
    g = helper.make_graph(nodes, "pw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
PY
    expect cuda_mono_pointwise_config 0 "blocks of 256 threads, 1 a multiprocessor" -- "$kiln" inspect "$tmp/pwbig.onnx" \
        --schedule mono --precision fp16
    expect cuda_mono_pointwise_product 0 "kg_gemm_wgt" -- sh -c "'$kiln' inspect '$tmp/pwbig.onnx' --schedule mono \
        --precision fp16 | grep -o 'kg_gemm_wgt'"
    expect cuda_mono_small_pointwise_config 0 "blocks of 256 threads, 3 a multiprocessor" -- "$kiln" inspect \
        "$tmp/pwsmall.onnx" --schedule mono --precision fp16
    expect cuda_mono_small_pointwise_conv 0 "2" -- sh -c "'$kiln' inspect '$tmp/pwsmall.onnx' --schedule mono \
        --precision fp16 | grep -c '\[kg_conv_tc'"
    # per image: 32 images of pwsmall's make 51 M multiply-adds a batch, 1.6 M an image
    expect cuda_mono_pointwise_batch_config 0 "blocks of 256 threads, 3 a multiprocessor" -- "$kiln" inspect \
        "$tmp/pwbatch.onnx" --schedule mono --precision fp16
    expect cuda_mono_pointwise_fp32_config 0 "blocks of 256 threads, 3 a multiprocessor" -- "$kiln" inspect \
        "$tmp/pwbig.onnx" --schedule mono
    expect cuda_mono_pool_ilp 0 "max pool, one thread per output, 8 per thread" -- sh -c "'$kiln' compile \
        '$tmp/pwbig.onnx' -o '$tmp/pwbig.kiln' --target cuda --precision fp16 --schedule mono --emit-source '$tmp/pwsrc' \
        >/dev/null 2>&1 && grep -o 'max pool, one thread per output, [0-9]* per thread' '$tmp/pwsrc/model.cu'"
    expect cuda_mono_pool_ilp_off 0 "max pool, one thread per output, 1 per thread" -- sh -c "KILN_MONO_ILP=0 \
        '$kiln' compile '$tmp/pwbig.onnx' -o '$tmp/pwbig0.kiln' --target cuda --precision fp16 --schedule mono \
        --emit-source '$tmp/pwsrc0' >/dev/null 2>&1 && grep -o 'max pool, one thread per output, [0-9]* per thread' \
        '$tmp/pwsrc0/model.cu'"

    # BERT's query, key and value at batch 16: three 2048 x 768 x 768 products
    # of one A in one wave choose their tiles together (192 x 192: 3 x 44
    # tiles, one wave of 132), not each alone (128 x 96: 3 x 128 tiles); a
    # product whose A differs does not join them
    python3 - "$tmp/qkv.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
nodes, inits, outs = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Sigmoid", ["x"], ["s"])], [], []
for name, src in (("q", "h"), ("k", "h"), ("v", "h"), ("o", "s")):
    inits += [numpy_helper.from_array(0.05 * rng.standard_normal((768, 768)).astype(np.float32), name + "_w"),
              numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), name + "_b")]
    nodes += [helper.make_node("MatMul", [src, name + "_w"], [name + "_m"]),
              helper.make_node("Add", [name + "_m", name + "_b"], [name])]
    outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [2048, 768]))
g = helper.make_graph(nodes, "qkv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 768])], outs, inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_shared_products 0 "3" -- sh -c "'$kiln' inspect '$tmp/qkv.onnx' --schedule kernels --precision fp16 \
        | grep -c ' 44 rTasks.*kg_gemm_wgt 192x192x64'"
    expect cuda_shared_products_alone 0 "1" -- sh -c "'$kiln' inspect '$tmp/qkv.onnx' --schedule kernels \
        --precision fp16 | grep -cE '128 rTasks.*kg_gemm_wgt(_ws)? 128x96x64'"

    # Memory-bound groups in a persistent kernel (MonoNN 4.2.2, 4.3): a
    # residual add, a layer norm of 2048 rows and a product with a row
    # vector. Under mono the add takes several steps a thread and the layer
    # norm several rows a warp (enough for about one wave of the resident
    # blocks); with KILN_MONO_CACHE=1 the operands read once are streamed,
    # gamma, beta and the broadcast vector kept (kg.h); KILN_MONO_ILP=0 takes
    # the steps away, and the kernels schedule has neither. Each build
    # compiles for sm_80 and sm_90a.
    python3 - "$tmp/membound.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
vec = lambda name: numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), name)
nodes = [helper.make_node("Add", ["x", "r"], ["s"]),
         helper.make_node("LayerNormalization", ["s", "g", "b"], ["n"], axis=-1),
         helper.make_node("Mul", ["n", "m"], ["y"])]
g = helper.make_graph(nodes, "membound", [helper.make_tensor_value_info(v, TensorProto.FLOAT, [2048, 768]) for v in "xr"],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 768])], [vec("g"), vec("b"), vec("m")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    # mb_build NAME [VAR=VALUE]... -- FLAGS: compiles the model into $tmp/NAME
    # and leaves the generated code after the templates in $tmp/NAME.cu
    mb_build() {
        local name=$1
        shift
        local vars=()
        while [ "$1" != "--" ]; do vars+=("$1"); shift; done
        shift
        expect "cuda_membound_$name" 0 "stages" -- env ${vars[@]+"${vars[@]}"} "$kiln" compile "$tmp/membound.onnx" \
            -o "$tmp/$name.kiln" --target cuda --precision fp16 --emit-source "$tmp/$name" "$@"
        sed -n '/^\/\* ---- where each group runs/,$p' "$tmp/$name/model.cu" >"$tmp/$name.cu" 2>/dev/null
    }
    factor='([2-9]|[12][0-9]|3[0-2])' # 2 .. 32, whatever the GPU
    expect cuda_mono_ilp_listed 0 "ILP listed" -- sh -c "out=\$('$kiln' inspect '$tmp/membound.onnx' --schedule mono \
        --precision fp16) && printf '%s' \"\$out\" | grep -qE 'ews .*\[ILP $factor\]  Add' && \
        printf '%s' \"\$out\" | grep -qE 'rows .*\[ILP $factor \(rows a warp\)\]  LayerNorm' && echo 'ILP listed'"
    mb_build mono KILN_MONO_CACHE=1 -- --schedule mono
    expect cuda_mono_ews_ilp 0 "2" -- grep -cE "; ILP $factor for [0-9]+ resident blocks \*/" "$tmp/mono.cu"
    expect cuda_mono_rows_a_warp 0 "1" -- grep -cE "ILP $factor \(rows a warp\) for [0-9]+ resident blocks \*/" \
        "$tmp/mono.cu"
    expect cuda_mono_rows_held 0 "1" -- grep -cE "kg_rows_rtask_mono\(&p, t, $factor, KG_HINT_STREAM, KG_HINT_KEEP\);" \
        "$tmp/mono.cu"
    expect cuda_mono_streamed 0 "3" -- grep -c "kg_ldv_stream_f" "$tmp/mono.cu" # x, r, the norm's output
    expect cuda_mono_kept 0 "1" -- grep -c "kg_ldv_keep_f16(p1 + c1, " "$tmp/mono.cu"
    mb_build ilp0 KILN_MONO_ILP=0 KILN_MONO_CACHE=1 -- --schedule mono
    expect cuda_mono_ilp_off 1 "0" -- grep -c "ILP " "$tmp/ilp0.cu"
    expect cuda_mono_ilp_off_ews 0 "2" -- grep -c "vectors of 4 elements, 1 per thread" "$tmp/ilp0.cu"
    expect cuda_mono_ilp_off_rows 0 "1" -- grep -c "kg_rows_rtask_mono(&p, t, 1, KG_HINT_STREAM, KG_HINT_KEEP);" \
        "$tmp/ilp0.cu"
    mb_build cache0 -- --schedule mono
    expect cuda_mono_cache_off 1 "0" -- grep -cE "_stream_|_keep_|KG_HINT_(STREAM|KEEP)" "$tmp/cache0.cu"
    expect cuda_mono_cache_off_ilp 0 "3" -- grep -c "resident blocks" "$tmp/cache0.cu"
    mb_build both0 KILN_MONO_ILP=0 -- --schedule mono
    expect cuda_mono_both_off 0 "1" -- grep -c "kg_rows_rtask(&p, t);" "$tmp/both0.cu"
    mb_build kernels -- --schedule kernels
    expect cuda_kernels_no_mono_ilp 1 "0" -- grep -cE "ILP |_stream_|_keep_|KG_HINT_|kg_rows_rtask_mono" "$tmp/kernels.cu"
    expect cuda_kernels_rows 0 "1" -- grep -c "kg_rows_rtask(&p, t);" "$tmp/kernels.cu"

    # Narrow rOperators (Rammer 4.1.3): BERT-base's attention at batch 1
    # (12 heads of 128 queries) in one key group (KILN_ATT_SPLIT=1) in a
    # persistent kernel of 128-thread blocks takes 2 warps (48 rTasks) on the
    # block's first 64 threads, the others skipping its rTasks; its barriers
    # are the rTask's own (kg_sync_n). KILN_MONO_NARROW=0 gives it the
    # block's 4 warps (24 rTasks); the kernels schedule makes 64-thread
    # blocks of it. Each build compiles the guarded call, with waits and with
    # grid barriers, for sm_80 and sm_90a.
    mk_att() {
        python3 - "$1" "${2:-1}" <<'PY'
import sys
import onnx
from onnx import TensorProto, helper
shape = [int(sys.argv[2]) if len(sys.argv) > 2 else 1, 12, 128, 64]
nodes = [helper.make_node("Relu", [n + "_in"], [n]) for n in "qkv"]
nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
          helper.make_node("MatMul", ["q", "kt"], ["s"]),
          helper.make_node("Div", ["s", "d"], ["sd"]),
          helper.make_node("Softmax", ["sd"], ["p"], axis=-1),
          helper.make_node("MatMul", ["p", "v"], ["y"])]
g = helper.make_graph(nodes, "att", [helper.make_tensor_value_info(n + "_in", TensorProto.FLOAT, shape) for n in "qkv"],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                      [helper.make_tensor("d", TensorProto.FLOAT, [], [8.0])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    }
    mk_att "$tmp/att.onnx"
    expect cuda_narrow_listed 0 "1" -- sh -c "KILN_ATT_SPLIT=1 '$kiln' inspect '$tmp/att.onnx' --schedule mono:128x1 \
        --precision fp16 | grep -c '48 rTasks .*, on 64 of the 128 threads  \[kg_att_mma, 2 warps\]'"
    expect cuda_narrow_off 0 "1" -- sh -c "KILN_ATT_SPLIT=1 KILN_MONO_NARROW=0 '$kiln' inspect '$tmp/att.onnx' \
        --schedule mono:128x1 --precision fp16 | grep -c ' 24 rTasks  *[0-9]* B smem  \[kg_att_mma, 4 warps\]'"
    expect cuda_narrow_kernels 0 "1" -- sh -c "KILN_ATT_SPLIT=1 '$kiln' inspect '$tmp/att.onnx' --schedule kernels \
        --precision fp16 | grep -c '64 threads a block'"
    # By default its 128 keys (two tiles of 64) go to two key groups of the
    # same 2 query warps, which fill the block (kg_att.kv_split)
    expect cuda_att_key_groups_mono 0 "1" -- sh -c "'$kiln' inspect '$tmp/att.onnx' --schedule mono:128x1 \
        --precision fp16 | grep -c ' 48 rTasks  *[0-9]* B smem  \[kg_att_mma, 2 warps x 2 key groups\]'"
    expect cuda_att_key_groups_kernels 0 "1" -- sh -c "'$kiln' inspect '$tmp/att.onnx' --schedule kernels \
        --precision fp16 | grep -c '128 threads a block'"
    # At batch 16 its 384 rTasks of 4 query warps cover the multiprocessors:
    # in a kernel of their own, one key group each (key_split); a persistent
    # kernel keeps two (where its tiles do not go side by side: KILN_ATT_UNITS=1)
    mk_att "$tmp/att16.onnx" 16
    expect cuda_att_no_key_groups_b16 0 "1" -- sh -c "'$kiln' inspect '$tmp/att16.onnx' --schedule waves \
        --precision fp16 | grep -c ' 384 rTasks  *[0-9]* B smem  \[kg_att_mma, 4 warps\]'"
    expect cuda_att_key_groups_b16_mono 0 "1" -- sh -c "KILN_ATT_UNITS=1 '$kiln' inspect '$tmp/att16.onnx' --schedule mono:256x2 \
        --precision fp16 | grep -c ' 384 rTasks  *[0-9]* B smem  \[kg_att_mma, 4 warps x 2 key groups\]'"
    # ... unless side by side, each on its own 4 warps, they take fewer
    # rounds (emit_attention.c plan_units): 384 tiles, 132 blocks of 256
    # threads, 2 tiles an rTask; blocks of 128 threads take one
    expect cuda_att_units_b16_mono 0 "1" -- sh -c "'$kiln' inspect '$tmp/att16.onnx' --schedule mono:256x1 \
        --precision fp16 | grep -c ' 192 rTasks  *[0-9]* B smem  \[kg_att_mma, 4 warps, 2 query tiles an rTask\]'"
    expect cuda_att_units_b16_two_blocks 0 "1" -- sh -c "'$kiln' inspect '$tmp/att16.onnx' --schedule mono:256x2 \
        --precision fp16 | grep -c ' 192 rTasks  *[0-9]* B smem  \[kg_att_mma, 4 warps, 2 query tiles an rTask\]'"
    expect cuda_att_units_b16_384 0 "1" -- sh -c "'$kiln' inspect '$tmp/att16.onnx' --schedule mono:384x1 \
        --precision fp16 | grep -c ' 128 rTasks  *[0-9]* B smem  \[kg_att_mma, 4 warps, 3 query tiles an rTask\]'"
    expect cuda_att_units_off 0 "1" -- sh -c "KILN_ATT_UNITS=1 '$kiln' inspect '$tmp/att16.onnx' --schedule mono:256x1 \
        --precision fp16 | grep -c ' 384 rTasks  *[0-9]* B smem  \[kg_att_mma, 4 warps x 2 key groups\]'"
    expect cuda_att_units_source 0 "1" -- sh -c "'$kiln' compile '$tmp/att16.onnx' -o '$tmp/att16u.kiln' --target cuda \
        --precision fp16 --schedule mono:256x1 --quiet --emit-source '$tmp/att16u_src' \
        && grep -c '^    kg_att_mma_rtask(&p, t, 2);' '$tmp/att16u_src/model.cu'"
    # three units of one query warp x 2 key groups: a narrow rTask (192 of
    # 256 threads), named barriers 2 .. 4, the groups' partials in each
    # unit's shared memory; NVRTC builds it for sm_80 and sm_90a
    expect cuda_att_units_three 0 "1" -- sh -c "KILN_ATT_UNITS=3 '$kiln' compile '$tmp/att16.onnx' -o '$tmp/att16u3.kiln' \
        --target cuda --precision fp16 --schedule mono:256x1 --quiet --emit-source '$tmp/att16u3_src' \
        && KILN_ATT_UNITS=3 '$kiln' inspect '$tmp/att16.onnx' --schedule mono:256x1 --precision fp16 \
        | grep -c ' 512 rTasks  *[0-9]* B smem, on 192 of the 256 threads  \[kg_att_mma, 1 warps x 2 key groups, 3 query tiles an rTask\]'"
    expect cuda_att_key_groups_b16_forced 0 "1" -- sh -c "KILN_ATT_SPLIT=2 '$kiln' inspect '$tmp/att16.onnx' \
        --schedule waves --precision fp16 | grep -c '\[kg_att_mma, 4 warps x 2 key groups\]'"
    for sched in mono mono-barriers; do
        expect "cuda_narrow_build_$sched" 0 "stages" -- env KILN_ATT_SPLIT=1 "$kiln" compile "$tmp/att.onnx" \
            -o "$tmp/att_$sched.kiln" --target cuda --precision fp16 --schedule "$sched:128x1" \
            --emit-source "$tmp/att_$sched"
        # the persistent kernel's member table gives it 64 threads, and its
        # call stands behind the early exit of the others
        expect "cuda_narrow_guard_$sched" 0 "1" -- grep -cE \
            "^ *\{[0-9]+u, [0-9]+u, [0-9]+u, [0-9]+u, [0-9]+u, 64u, [0-9]+u, 0u\}, /\* group [0-9]+ \*/" \
            "$tmp/att_$sched/model.cu"
        expect "cuda_narrow_switch_$sched" 0 "1" -- sh -c "grep -A1 -F 'if (threadIdx.x < m.threads) switch (m.call) {' \
            '$tmp/att_$sched/model.cu' | grep -cE 'case [0-9]+u: opb?_[0-9]+\(c, r[,)]'"
    done
    # A mask's key tiles are copied with k's into shared memory where its
    # rows are 16-byte aligned (kg_att.m_smem): BERT's [1, 1, 1, 128] mask;
    # not a float32 one of 130 keys and two batches (520-byte rows), which
    # the rTask loads into registers
    cat > "$tmp/attm.py" <<'PY'
import sys
import onnx
from onnx import TensorProto, helper
b, sk = int(sys.argv[2]), int(sys.argv[3])
nodes = [helper.make_node("Relu", [n + "_in"], [n]) for n in "qkv"]
nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
          helper.make_node("MatMul", ["q", "kt"], ["s"]),
          helper.make_node("Div", ["s", "d"], ["sd"]),
          helper.make_node("Add", ["sd", "mask"], ["sm"]),
          helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
          helper.make_node("MatMul", ["p", "v"], ["y"])]
shapes = {"q": [b, 12, 128, 64], "k": [b, 12, sk, 64], "v": [b, 12, sk, 64]}
ins = [helper.make_tensor_value_info(n + "_in", TensorProto.FLOAT, shapes[n]) for n in "qkv"]
ins.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [b, 1, 1, sk]))
g = helper.make_graph(nodes, "attm", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, 12, 128, 64])],
                      [helper.make_tensor("d", TensorProto.FLOAT, [], [8.0])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    python3 "$tmp/attm.py" "$tmp/attm.onnx" 1 128
    python3 "$tmp/attm.py" "$tmp/attm2.onnx" 2 130
    for m in attm attm2; do
        "$kiln" compile "$tmp/$m.onnx" -o "$tmp/$m.kiln" --target cuda --precision fp16 --quiet \
            --emit-source "$tmp/${m}_src" > /dev/null 2>&1
    done
    expect cuda_att_mask_smem 0 "1" -- grep -c '^    p.m_smem = 1;' "$tmp/attm_src/model.cu"
    expect cuda_att_mask_regs 0 "1" -- grep -c '^    p.m_smem = 0;' "$tmp/attm2_src/model.cu"
    # Heads of 128 over 256 keys in a persistent kernel of 4 blocks of 128
    # threads a multiprocessor: a key group's two k and v tiles (70 KB) do
    # not fit a block's share (56 KB), so each group keeps one (kv_bufs 1)
    python3 - "$tmp/att128.onnx" <<'PY'
import sys
import onnx
from onnx import TensorProto, helper
nodes = [helper.make_node("Relu", [n + "_in"], [n]) for n in "qkv"]
nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
          helper.make_node("MatMul", ["q", "kt"], ["s"]),
          helper.make_node("Softmax", ["s"], ["p"], axis=-1),
          helper.make_node("MatMul", ["p", "v"], ["y"])]
shapes = {"q": [1, 12, 128, 128], "k": [1, 12, 256, 128], "v": [1, 12, 256, 128]}
g = helper.make_graph(nodes, "att128", [helper.make_tensor_value_info(n + "_in", TensorProto.FLOAT, shapes[n]) for n in "qkv"],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12, 128, 128])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_att_one_buffer_build 0 "stages" -- "$kiln" compile "$tmp/att128.onnx" -o "$tmp/att128.kiln" \
        --target cuda --precision fp16 --schedule mono:128x4 --emit-source "$tmp/att128_src"
    expect cuda_att_one_buffer 0 "1" -- grep -c '^    p.kv_bufs = 1;' "$tmp/att128_src/model.cu"
    expect cuda_att_two_buffers 0 "1" -- sh -c "'$kiln' compile '$tmp/att128.onnx' -o '$tmp/att128b.kiln' \
        --target cuda --precision fp16 --schedule waves --quiet --emit-source '$tmp/att128b_src' \
        && grep -c '^    p.kv_bufs = 2;' '$tmp/att128b_src/model.cu'"
    expect cuda_narrow_block_meets 0 "1" -- grep -cF "if (m.threads < blockDim.x) __syncthreads();" \
        "$tmp/att_mono-barriers/model.cu"
    expect cuda_narrow_signal_meets 1 "0" -- grep -cF "if (m.threads < blockDim.x) __syncthreads();" \
        "$tmp/att_mono/model.cu"
    # a body per member: every constant is written into its call, no table
    expect cuda_mono_no_values 1 "0" -- grep -c "kg_values_" "$tmp/att_mono/model.cu"
    expect cuda_narrow_own_barriers 1 "0" -- sh -c "sed -n '/kg_att_mma_rtask(const kg_att/,/^}/p' \
        '$tmp/att_mono/model.cu' | grep -c '__syncthreads\|blockDim'"
    # GEMM tiles are narrow too (all but the producer-warp ones): a 128 x 768 x
    # 768 product in 256-thread blocks takes a one-warpgroup TMA tile on the
    # first 128 threads; without narrow rOperators only 256-thread tiles.
    python3 - "$tmp/mm.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((768, 768)).astype(np.float32) * 0.03, "w")
nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])]
g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 768])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 768])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_short_product_config 0 "blocks of 128 threads, 1 a multiprocessor" -- "$kiln" inspect "$tmp/mm.onnx" \
        --schedule mono --precision fp16
    expect cuda_narrow_gemm 0 "1" -- sh -c "'$kiln' inspect '$tmp/mm.onnx' --schedule mono:256x1 --precision fp16 \
        | grep -c 'gemm .*, on 128 of the 256 threads  \[kg_gemm_wgt 64x'"
    expect cuda_narrow_gemm_off 1 "0" -- sh -c "KILN_MONO_NARROW=0 '$kiln' inspect '$tmp/mm.onnx' --schedule mono:256x1 \
        --precision fp16 | grep -c ' of the 256 threads'"
    expect cuda_narrow_gemm_build 0 "stages" -- "$kiln" compile "$tmp/mm.onnx" -o "$tmp/mm.kiln" --target cuda \
        --precision fp16 --schedule mono:256x1 --emit-source "$tmp/mm"
    expect cuda_narrow_gemm_guard 0 "1" -- sh -c "grep -A1 -F 'if (threadIdx.x < m.threads) switch (m.call) {' \
        '$tmp/mm/model.cu' | grep -cE 'case [0-9]+u: opb?_1\(c, r, 0[,)]'"
    # In a persistent kernel a narrow rTask still holds its whole block: a
    # product of the float32 input (SIMT tiles) must not take 32-thread tiles
    # that leave 7 of a 256-thread block's 8 warps idle (336 of them ran
    # 2.5 times slower than 96 tiles of 128 threads on an H100)
    python3 - "$tmp/simt.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((768, 3072)).astype(np.float32) * 0.03, "w")
nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Sigmoid", ["r"], ["y"])]
g = helper.make_graph(nodes, "simt", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [197, 768])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [197, 3072])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_simt_holds_block 1 "0" -- sh -c "'$kiln' inspect '$tmp/simt.onnx' --schedule mono:256x1 \
        --precision fp16 | grep 'kg_gemm_simt' | grep -c 'on 32 of the 256 threads'"
    expect cuda_mono_simt_listed 0 "1" -- sh -c "'$kiln' inspect '$tmp/simt.onnx' --schedule mono:256x1 \
        --precision fp16 | grep -c 'kg_gemm_simt'"
    # warpgroup-MMA rOperators share a body that is inlined where the kernel
    # calls it (called, ptxas would serialize their MMAs: KILN_MONO_INLINE_WGMMA=0);
    # KILN_MONO_INLINE_WGMMA=1 gives each its own inlined code
    expect cuda_wgmma_shared 0 "1" -- grep -cE "void op_1\(const kiln_gctx \*c, int t, int grid_dep\) \{ opb_[0-9]+\(c, t, grid_dep" \
        "$tmp/mm/model.cu"
    expect cuda_wgmma_body_inline 0 "1" -- grep -c "^static __device__ __forceinline__ void opb_1(const kiln_gctx \*c, int t, int grid_dep" \
        "$tmp/mm/model.cu"
    expect cuda_body_called 0 "1" -- grep -c "^static __device__ __noinline__ void opb_0(const kiln_gctx \*c, int t" \
        "$tmp/mm/model.cu" # Relu's body: no warpgroup MMAs, called
    expect cuda_wgmma_body_called_build 0 "stages" -- env KILN_MONO_INLINE_WGMMA=0 "$kiln" compile "$tmp/mm.onnx" \
        -o "$tmp/mmc.kiln" --target cuda --precision fp16 --schedule mono:256x1 --emit-source "$tmp/mmc"
    expect cuda_wgmma_body_called 0 "1" -- grep -c "^static __device__ __noinline__ void opb_1(const kiln_gctx \*c, int t, int grid_dep" \
        "$tmp/mmc/model.cu"
    expect cuda_wgmma_inline_build 0 "stages" -- env KILN_MONO_INLINE_WGMMA=1 "$kiln" compile "$tmp/mm.onnx" \
        -o "$tmp/mmi.kiln" --target cuda --precision fp16 --schedule mono:256x1 --emit-source "$tmp/mmi"
    expect cuda_wgmma_inlined 0 "1" -- grep -c "^static __device__ __forceinline__ void op_1(const kiln_gctx \*c, int t, int grid_dep);" \
        "$tmp/mmi/model.cu"
    # KILN_TRACE_GEMM=1: the TMA GEMM template's timing printf is compiled in, and builds
    expect cuda_trace_gemm_build 0 "stages" -- env KILN_TRACE_GEMM=1 "$kiln" compile "$tmp/mm.onnx" \
        -o "$tmp/mmt.kiln" --target cuda --precision fp16 --schedule mono:256x1 --emit-source "$tmp/mmt"
    expect cuda_trace_gemm_defined 0 "1" -- grep -c "^#define KG_TRACE_GEMM 1" "$tmp/mmt/model.cu"
    expect cuda_trace_gemm_off 0 "0" -- sh -c "grep -c '^#define KG_TRACE_GEMM' '$tmp/mm/model.cu' || true"
    # bench/code_size.py: the mono kernel's code, its one called body (the
    # Relu's; the product's is inlined into the kernel)
    expect code_size_body 0 "opb_" -- python3 "$(dirname "$0")/../../bench/code_size.py" "$tmp/mm.onnx" \
        --kiln "$kiln" --schedule mono:256x1 --json "$tmp/mm_size.json"
    expect code_size_json 0 "1 1" -- python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
k = d['kernels'][0]; b = [f for f in k['functions'] if f['function'].startswith('opb_')]; \
print(len(d['kernels']), b[0]['groups'] if len(b) == 1 and 0 < k['own_bytes'] < k['bytes'] and b[0]['kind'] == 'ews' else -1)" \
        "$tmp/mm_size.json"
    expect code_size_no_model 1 "no model at" -- python3 "$(dirname "$0")/../../bench/code_size.py" "$tmp/none.onnx" \
        --kiln "$kiln"

    # --schedule=waves (Rammer's Algorithm 1): two independent products that
    # program order puts apart (b runs beside a's first product, not after
    # its second) share a wave, in one kernel of the wider block with the
    # narrower tile on part of it; together their fastest tiles overfill the
    # GPU (256 rTasks), so the wave takes the most efficient ones (108)
    python3 - "$tmp/branches.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = lambda name, k, n: numpy_helper.from_array((rng.standard_normal((k, n)) * 0.03).astype(np.float32), name)
nodes = [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("MatMul", ["r", "wa"], ["a1"]), helper.make_node("Relu", ["a1"], ["a2"]),
         helper.make_node("MatMul", ["a2", "wa2"], ["a3"]),
         helper.make_node("MatMul", ["r", "wb"], ["b1"]),
         helper.make_node("Concat", ["a3", "b1"], ["y"], axis=1)]
g = helper.make_graph(nodes, "branches", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 768])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 1536])],
                      [w("wa", 768, 1024), w("wa2", 1024, 768), w("wb", 768, 768)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_waves_kernels 0 "5 launches" -- "$kiln" inspect "$tmp/branches.onnx" --schedule kernels --precision fp16
    expect cuda_waves_listed 0 "4 launches; 4 waves, 1 of them with the most efficient rKernels" -- \
        "$kiln" inspect "$tmp/branches.onnx" --schedule waves --precision fp16
    expect cuda_waves_shared 0 "2" -- sh -c "'$kiln' inspect '$tmp/branches.onnx' --schedule waves --precision fp16 \
        | grep -A3 '^wave 1: 2 groups, 256 rTasks; the most efficient rKernels' \
        | grep -c ' 64 rTasks .*on 256 of the 384 threads\| 44 rTasks .*192x192'"
    expect cuda_waves_build 0 "waves: 4 waves in 4 kernels, 1 of them" -- "$kiln" compile "$tmp/branches.onnx" \
        -o "$tmp/branches.kiln" --target cuda --precision fp16 --schedule waves --emit-source "$tmp/waves"
    # every launch has its kernel and every group its rOperator (a wave built
    # twice keeps one copy of each)
    expect cuda_waves_kernel_code 0 "4" -- grep -c "__global__ void .* k_[0-9]*(const kiln_gctx" "$tmp/waves/model.cu"
    expect cuda_waves_op_code 0 "5" -- grep -c "^static __device__ void op_[0-9]*(const kiln_gctx" "$tmp/waves/model.cu"
    expect cuda_waves_guard 0 "1" -- grep -cE "^ *if \(threadIdx.x < 256u\) op_1\(c, t, 1\);" "$tmp/waves/model.cu"
    # the kernels of TMA products leave griddepcontrol.wait to their rTasks
    # (after B's first copies: grid_dep 1); the Relu's and the Concat's keep it
    expect cuda_rtask_grid_dep 0 "3" -- grep -cE "op_[0-9]+\(c, t( - [0-9]+)?, 1\);" "$tmp/waves/model.cu"
    expect cuda_head_grid_dep 0 "2" -- grep -c "^    kg_grid_dep();" "$tmp/waves/model.cu"
    # mono (fit_stage): two independent products in one stage, ResNet-50's
    # last block's 1x1 convolution (196 x 512 x 1024, 44 rTasks) and its
    # downsampling one (49 x 2048 x 1024), whose fastest tiles (128 rTasks in
    # 2 splits) would leave 40 blocks two rTasks each: the second takes the
    # tiles that end the stage soonest, 64 rTasks unsplit; KILN_MONO_FIT=0
    # keeps the fastest
    python3 - "$tmp/fit2.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = lambda name, k, n: numpy_helper.from_array((rng.standard_normal((k, n)) * 0.03).astype(np.float32), name)
nodes = [helper.make_node("Tanh", ["x1"], ["h1"]), helper.make_node("Tanh", ["x2"], ["h2"]),
         helper.make_node("MatMul", ["h1", "w1"], ["y1"]), helper.make_node("MatMul", ["h2", "w2"], ["y2"])]
g = helper.make_graph(nodes, "fit2", [helper.make_tensor_value_info("x1", TensorProto.FLOAT, [196, 1024]),
                                      helper.make_tensor_value_info("x2", TensorProto.FLOAT, [49, 1024])],
                      [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [196, 512]),
                       helper.make_tensor_value_info("y2", TensorProto.FLOAT, [49, 2048])],
                      [w("w1", 1024, 512), w("w2", 1024, 2048)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_fit_listed 0 "1 product fitted to its stage" -- "$kiln" inspect "$tmp/fit2.onnx" --schedule mono \
        --precision fp16
    expect cuda_mono_fit_tiles 0 "44 64" -- sh -c "'$kiln' inspect '$tmp/fit2.onnx' --schedule mono --precision fp16 \
        | grep -A4 '^  stage 1' | grep 'rTasks' | grep -oE '[0-9]+ rTasks' | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//'"
    expect cuda_mono_fit_line 0 "fitted to its stage  [kg_gemm_wgt 64x32x64 (TMA), 12 stages, 1 splits]" -- \
        "$kiln" inspect "$tmp/fit2.onnx" --schedule mono --precision fp16
    expect cuda_mono_fit_off 0 "44 128 not fitted" -- sh -c "KILN_MONO_FIT=0 '$kiln' inspect '$tmp/fit2.onnx' \
        --schedule mono --precision fp16 > '$tmp/fit2_off.txt' && grep -A4 '^  stage 1' '$tmp/fit2_off.txt' \
        | grep -oE '[0-9]+ rTasks' | cut -d' ' -f1 | tr '\n' ' ' && (grep -q fitted '$tmp/fit2_off.txt' \
        && echo fitted || echo 'not fitted')"
    expect cuda_mono_fit_build 0 "1 product fitted" -- sh -c "'$kiln' compile '$tmp/fit2.onnx' -o '$tmp/fit2.kiln' \
        --target cuda --precision fp16 --schedule mono > '$tmp/fit2.log' 2>&1 && grep -o '1 product fitted' '$tmp/fit2.log'"
    # a product whose B some kernel writes (here a Relu) copies nothing early:
    # its kernel waits first
    python3 - "$tmp/actb.onnx" <<'PY'
import sys
import onnx
from onnx import TensorProto, helper
nodes = [helper.make_node("Relu", ["b"], ["rb"]), helper.make_node("MatMul", ["a", "rb"], ["y"])]
g = helper.make_graph(nodes, "actb", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [256, 512]),
                                      helper.make_tensor_value_info("b", TensorProto.FLOAT, [512, 384])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 384])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_actb_build 0 "" -- "$kiln" compile "$tmp/actb.onnx" -o "$tmp/actb.kiln" --target cuda \
        --precision fp16 --emit-source "$tmp/actb" --quiet
    expect cuda_actb_tma 0 "1" -- grep -c "^ \* kg_gemm_wgt" "$tmp/actb/model.cu"
    expect cuda_actb_head_dep 0 "2" -- grep -c "^    kg_grid_dep();" "$tmp/actb/model.cu"
    expect cuda_actb_no_param 0 "1" -- grep -c "^static __device__ void op_1(const kiln_gctx \*c, int t)$" \
        "$tmp/actb/model.cu"
    # two Inception blocks (four branches each): the branches' first groups
    # make one wave; planned for waves (sched_plan_memory's by_wave) the arena
    # passes bytes only from wave to wave, so no branch waits for another's
    # dead bytes: 5 grid barriers in mono, not the 6 a plan in program order
    # made, and 6 wave kernels against the kernels schedule's 7
    python3 - "$tmp/incep.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
nodes, inits = [], []
def conv(name, x, cin, cout, k):
    inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) * 0.05).astype(np.float32), name + "_w"))
    nodes.append(helper.make_node("Conv", [x, name + "_w"], [name + "_c"], pads=[k // 2] * 4))
    nodes.append(helper.make_node("Relu", [name + "_c"], [name]))
    return name
x = "x"
for b in range(2):
    p = "i%d_" % b
    outs = [conv(p + "b1", x, 64, 32, 1), conv(p + "b2", conv(p + "b2a", x, 64, 48, 1), 48, 16, 3),
            conv(p + "b3", conv(p + "b3a", x, 64, 16, 1), 16, 8, 3)]
    nodes.append(helper.make_node("MaxPool", [x], [p + "pool"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    outs.append(conv(p + "b4", p + "pool", 64, 8, 1))
    nodes.append(helper.make_node("Concat", outs, [p + "y"], axis=1))
    x = p + "y"
g = helper.make_graph(nodes, "incep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 28, 28])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 64, 28, 28])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_waves_plan_mono 0 "5 grid barriers (15 before merging)" -- "$kiln" inspect "$tmp/incep.onnx" \
        --schedule mono --precision fp16
    expect cuda_waves_plan_waves 0 "6 launches; 6 waves" -- "$kiln" inspect "$tmp/incep.onnx" --schedule waves \
        --precision fp16
    expect cuda_waves_plan_first 0 "wave 0: 4 groups" -- "$kiln" inspect "$tmp/incep.onnx" --schedule waves \
        --precision fp16
    # (the 1x1 branches as kg_conv_tc, one block size: KILN_CONV_PRODUCT=0)
    expect cuda_waves_plan_kernels 0 "7 launches" -- env KILN_CONV_PRODUCT=0 "$kiln" inspect "$tmp/incep.onnx" \
        --schedule kernels --precision fp16
    expect cuda_waves_plan_build 0 "waves: 6 waves in 6 kernels" -- "$kiln" compile "$tmp/incep.onnx" \
        -o "$tmp/incep.kiln" --target cuda --precision fp16 --schedule waves
    expect cuda_waves_bad_config 1 "only the mono schedules take a BLOCKxN" -- "$kiln" inspect "$tmp/branches.onnx" \
        --schedule waves:128x1
    expect cuda_unknown_schedule_lists_waves 1 "(kernels, waves, mono, mono-barriers or mono-unmerged)" -- \
        "$kiln" inspect "$tmp/branches.onnx" --schedule wavefront

    # bench/conv_cost_fit.py ranks kg_conv_tc's candidates as emit_conv.c does
    # (the constants it fits go back into tc_consts): on a chain of
    # ResNet-like convolutions (3x3 gathered, 1x1 pointwise, strided, late
    # 7x7 layers that split K) its first pick must be the listing's
    python3 - "$tmp/convs.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
# (out channels, kernel, stride) after a 64 x 56 x 56 input
layers = [(64, 3, 1), (256, 1, 1), (128, 1, 1), (128, 3, 2), (512, 1, 1), (256, 1, 1), (256, 3, 2), (1024, 1, 1),
          (512, 3, 2), (512, 3, 1), (2048, 1, 1), (512, 1, 1)]
nodes, inits, c, x = [], [], 64, "x"
for i, (k, r, s) in enumerate(layers):
    w = numpy_helper.from_array((rng.standard_normal((k, c, r, r)) * 0.05).astype(np.float32), "w%d" % i)
    inits.append(w)
    nodes.append(helper.make_node("Conv", [x, "w%d" % i], ["c%d" % i], kernel_shape=[r, r], strides=[s, s],
                                  pads=[r // 2] * 4))
    nodes.append(helper.make_node("Relu", ["c%d" % i], ["r%d" % i]))
    c, x = k, "r%d" % i
g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    # (1x1 convolutions as kg_conv_tc, not as products: KILN_CONV_PRODUCT=0)
    KILN_CONV_PRODUCT=0 "$kiln" inspect "$tmp/convs.onnx" --schedule kernels --precision fp16 >"$tmp/convs.txt" 2>&1
    expect conv_cost_fit_in_step 0 "12 of 12 picks as emit_conv.c" -- python3 - "$tmp/convs.onnx" "$tmp/convs.txt" \
        "$(dirname "$0")/../../bench/conv_cost_fit.py" <<'PY'
import importlib.util
import re
import sys
import onnx
spec = importlib.util.spec_from_file_location("fit", sys.argv[3])
fit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fit)
m = onnx.load(sys.argv[1])
picks = re.findall(r"\[kg_conv_tc (\d+)x(\d+)x(\d+), warp (\d+)x(\d+), (\d+) k-slices, (\d+) stages, (\d+) splits[^]]*\]",
                   open(sys.argv[2]).read())
c, h, w, same = 64, 56, 56, 0
for node, got in zip([n for n in m.graph.node if n.op_type == "Conv"], picks):
    a = {x.name: list(x.ints) for x in node.attribute}
    r, s = a["kernel_shape"][0], a["strides"][0]
    k = [i for i in m.graph.initializer if i.name == node.input[1]][0].dims[0]
    oh, ow = (h + 2 * (r // 2) - r) // s + 1, (w + 2 * (r // 2) - r) // s + 1
    # emit_conv.c tc_operands_of: 1x1, stride 1, x stored as the MMA type (every x here but the input's),
    # or x NHWC (cg_plan_conv_layouts: every x here but the input's, all channel counts multiples of 8)
    pointwise = r == 1 and s == 1 and node.input[0] != "x" and (oh * ow) % 2 == 0
    pointwise = pointwise or (node.input[0] != "x" and c % 8 == 0)
    kdim = c * r * r
    top = fit.ranked(fit.CURRENT, oh * ow, k, kdim, pointwise, kdim % 8 == 0)[0]
    want = tuple(top[1]) + (top[3],)
    got = tuple(int(v) for v in got)
    same += want == got
    if want != got:
        print("conv %s: emit_conv.c picks %s, conv_cost_fit.py %s" % (node.name or node.output[0], got, want))
    c, h, w = k, oh, ow
print("%d of %d picks as emit_conv.c" % (same, len(picks)))
PY
    # the values between those convolutions are stored NHWC (emit_conv.c
    # cg_plan_conv_layouts); the graph's input and output stay NCHW
    nhwc_count='import sys; t = open(sys.argv[1]).read()
print("%d out, %d in and out, %d in, %d NHWC" % (t.count("NHWC out]"), t.count("NHWC in and out]"),
      t.count("NHWC in]"), t.count("NHWC")))'
    expect cuda_conv_nhwc_between_convs 0 "1 out, 10 in and out, 1 in" -- python3 -c "$nhwc_count" "$tmp/convs.txt"
    KILN_CONV_NHWC=0 "$kiln" inspect "$tmp/convs.onnx" --schedule kernels --precision fp16 >"$tmp/convs0.txt" 2>&1
    expect cuda_conv_nhwc_off 0 ", 0 NHWC" -- python3 -c "$nhwc_count" "$tmp/convs0.txt"
    # 1x1 convolutions of stride 1 whose x is NHWC are products for the GEMM
    # templates (cg_conv_product): the chain's seven pointwise layers, y NHWC
    # as x w^T, the last, NCHW, as w x^T; and on sm_90 (what inspect assumes
    # without a GPU) the four 3x3 ones of NHWC x and y, 128 to 512 channels,
    # as im2col products copied by TMA (form 5); the first 3x3 one, of the
    # NCHW input, stays kg_conv_tc, and all five do with KILN_CONV_IM2COL=0
    count_products='import sys; t = open(sys.argv[1]).read()
print("%d products (%d im2col), %d kg_conv_tc" % (t.count("[kg_gemm_"), t.count("(TMA, im2col A)"),
      t.count("[kg_conv_tc")))'
    "$kiln" inspect "$tmp/convs.onnx" --schedule kernels --precision fp16 >"$tmp/convs1.txt" 2>&1
    expect cuda_conv_products 0 "11 products (4 im2col), 1 kg_conv_tc" -- python3 -c "$count_products" "$tmp/convs1.txt"
    KILN_CONV_IM2COL=0 "$kiln" inspect "$tmp/convs.onnx" --schedule kernels --precision fp16 >"$tmp/convs1n.txt" 2>&1
    expect cuda_conv_im2col_off 0 "7 products (0 im2col), 5 kg_conv_tc" -- python3 -c "$count_products" \
        "$tmp/convs1n.txt"
    # KILN_CONV_IM2COL=cp: the same products on tiles whose threads gather
    # A by cp.async (the sm_80 image's way), to check that path on an H100
    KILN_CONV_IM2COL=cp "$kiln" inspect "$tmp/convs.onnx" --schedule kernels --precision fp16 >"$tmp/convs1c.txt" 2>&1
    expect cuda_conv_im2col_cp 0 "4 by cp.async" -- python3 -c '
import sys; print("%d by cp.async" % open(sys.argv[1]).read().count(", im2col A by cp.async]"))' "$tmp/convs1c.txt"
    # the im2col products compile for sm_80 and sm_90a, each reading its A
    # through a tensor map
    "$kiln" compile "$tmp/convs.onnx" -o "$tmp/convs.kiln" --target cuda --precision fp16 --emit-source "$tmp/csrc" \
        --quiet >/dev/null 2>&1
    expect cuda_conv_im2col_compiles 0 "4 im2col products by TMA in the source" -- python3 -c '
import sys
ops = open(sys.argv[1]).read().split("static __device__ void op_")
print("%d im2col products by TMA in the source" % sum("g.conv = 1;" in o and "g.tma_a = &kg_tmaps[" in o for o in ops))' \
        "$tmp/csrc/model.cu"
    # a 4-D im2col copy takes filter offsets of 0..255: a 3x3 convolution
    # of dilation 128 (pads 128, its last tap 256 away) stays kg_conv_tc,
    # one of dilation 127 (pads 127) does not (both 1x1 convolutions after
    # them are products)
    python3 - "$tmp/dil.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
I = lambda a, n: numpy_helper.from_array(a.astype(np.float32), n)
inits = [I(rng.uniform(-1, 1, (64, 64, 1, 1)), "w0")]
nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"]), helper.make_node("Relu", ["c0"], ["b0"])]
for i, d in enumerate((128, 127)):
    inits.append(I(rng.uniform(-1, 1, (64, 64, 3, 3)), "w%d" % (i + 1)))
    nodes.append(helper.make_node("Conv", ["b0", "w%d" % (i + 1)], ["c%d" % (i + 1)], dilations=[d, d],
                                  pads=[d] * 4))
    inits.append(I(rng.uniform(-1, 1, (8, 64, 1, 1)), "v%d" % (i + 1)))
    nodes.append(helper.make_node("Conv", ["c%d" % (i + 1), "v%d" % (i + 1)], ["y%d" % (i + 1)]))
g = helper.make_graph(nodes, "dil", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 16, 16])],
                      [helper.make_tensor_value_info("y1", TensorProto.FLOAT, None),
                       helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    "$kiln" inspect "$tmp/dil.onnx" --schedule kernels --precision fp16 >"$tmp/dil.txt" 2>&1
    expect cuda_conv_im2col_offsets 0 "3 products (1 im2col), 2 kg_conv_tc" -- python3 -c "$count_products" \
        "$tmp/dil.txt"
    # a 3x3 convolution of NHWC x writing the model's NCHW output: of one
    # image, y = w im2col(x)^T with B the im2col operand (form 6), its
    # residual read NCHW; of two images it stays kg_conv_tc
    for imgs in 1 2; do
        python3 - "$tmp/nchw$imgs.onnx" "$imgs" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
n = int(sys.argv[2])
I = lambda a, name: numpy_helper.from_array(a.astype(np.float32), name)
inits = [I(rng.uniform(-1, 1, (64, 64, 1, 1)), "w0"), I(rng.uniform(-1, 1, (40, 64, 3, 3)), "w1"),
         I(rng.standard_normal(40), "b1")]
nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"]), helper.make_node("Relu", ["c0"], ["b0"]),
         helper.make_node("Conv", ["b0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Add", ["c1", "res"], ["y"])]
g = helper.make_graph(nodes, "nchw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 64, 9, 13]),
                                      helper.make_tensor_value_info("res", TensorProto.FLOAT, [n, 40, 5, 7])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
        "$kiln" inspect "$tmp/nchw$imgs.onnx" --schedule kernels --precision fp16 >"$tmp/nchw$imgs.txt" 2>&1
    done
    count_b='import sys; t = open(sys.argv[1]).read()
print("%d im2col B, %d kg_conv_tc" % (t.count("(TMA, im2col B)"), t.count("[kg_conv_tc")))'
    expect cuda_conv_im2col_nchw_y 0 "1 im2col B, 1 kg_conv_tc" -- python3 -c "$count_b" "$tmp/nchw1.txt"
    expect cuda_conv_im2col_nchw_y_2 0 "0 im2col B, 2 kg_conv_tc" -- python3 -c "$count_b" "$tmp/nchw2.txt"
    # a stem (3 channels, 7x7, stride 2: K = 147) gathers A through the
    # im2col table and reads weight rows padded to 152 by cp.async (its
    # fp32 weights stored in 16 bits leave the room); with fp16 weights, no
    # room: gathered; KILN_CONV_KPAD=0: gathered
    for wt in f32 f16; do
        python3 - "$tmp/stem_$wt.onnx" "$wt" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
dt = np.float32 if sys.argv[2] == "f32" else np.float16
et = TensorProto.FLOAT if sys.argv[2] == "f32" else TensorProto.FLOAT16
inits = [numpy_helper.from_array(rng.uniform(-1, 1, (16, 3, 7, 7)).astype(dt), "w"),
         numpy_helper.from_array(rng.standard_normal(16).astype(dt), "b")]
nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[3] * 4, strides=[2, 2]),
         helper.make_node("Relu", ["c"], ["y"])]
g = helper.make_graph(nodes, "stem", [helper.make_tensor_value_info("x", et, [1, 3, 40, 36])],
                      [helper.make_tensor_value_info("y", et, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    done
    stem_ops='import sys; t = open(sys.argv[1]).read()
print("%d by table, %d padded to 152, %d weights gathered" % (t.count("gathers by an im2col table"),
      t.count("weight rows padded to 152"), t.count(", weights gathered")))'
    "$kiln" compile "$tmp/stem_f32.onnx" -o "$tmp/stem.kiln" --target cuda --precision fp16 --emit-source "$tmp/stem" \
        --quiet >/dev/null 2>&1
    expect cuda_conv_stem_table_kpad 0 "1 by table, 1 padded to 152, 0 weights gathered" -- python3 -c "$stem_ops" \
        "$tmp/stem/model.cu"
    "$kiln" compile "$tmp/stem_f16.onnx" -o "$tmp/stem16.kiln" --target cuda --precision fp16 \
        --emit-source "$tmp/stem16" --quiet >/dev/null 2>&1
    expect cuda_conv_stem_f16_weights 0 "1 by table, 0 padded to 152, 1 weights gathered" -- python3 -c "$stem_ops" \
        "$tmp/stem16/model.cu"
    KILN_CONV_KPAD=0 "$kiln" compile "$tmp/stem_f32.onnx" -o "$tmp/stem0.kiln" --target cuda --precision fp16 \
        --emit-source "$tmp/stem0" --quiet >/dev/null 2>&1
    expect cuda_conv_stem_kpad_off 0 "1 by table, 0 padded to 152, 1 weights gathered" -- python3 -c "$stem_ops" \
        "$tmp/stem0/model.cu"
    # the table's rows past K (row 0x7fff) must fall past the image's last
    # row from any pixel's first: H + PH <= 0x7fff takes the table, one more
    # pad does not (the entry would land inside the image, before x)
    for ph in 7 8; do
        python3 - "$tmp/tall$ph.onnx" "$ph" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
ph = int(sys.argv[2])
w = numpy_helper.from_array(np.ones((8, 1, 3, 1), np.float32), "w")
node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[ph, 0, ph, 0])
g = helper.make_graph([node], "tall", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 32760, 2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
        "$kiln" compile "$tmp/tall$ph.onnx" -o "$tmp/tall$ph.kiln" --target cuda --precision fp16 \
            --emit-source "$tmp/tall$ph" --quiet >/dev/null 2>&1
    done
    expect cuda_conv_table_rows_inside 0 "1 by table" -- python3 -c "$stem_ops" "$tmp/tall7/model.cu"
    expect cuda_conv_table_rows_outside 0 "0 by table" -- python3 -c "$stem_ops" "$tmp/tall8/model.cu"
    # the forms from NCHW x (one image, pixels in 8s): x^T w^T into NHWC, and
    # w x into NCHW; beside them w x^T (NHWC x, NCHW y with its residual)
    python3 - "$tmp/pwn.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
I = lambda a, n: numpy_helper.from_array(a.astype(np.float32), n)
inits = [I(rng.uniform(-1, 1, (40, 32, 1, 1)), "w1"), I(rng.uniform(-1, 1, (32, 40, 1, 1)), "w3"),
         I(rng.standard_normal(32), "b3"), I(rng.uniform(-1, 1, (32, 32, 1, 1)), "w4"), I(rng.standard_normal(32), "b4")]
nodes = [helper.make_node("Relu", ["x"], ["xr"]), helper.make_node("Conv", ["xr", "w1"], ["c2"]),
         helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
         helper.make_node("Add", ["c3", "xr"], ["y"]), helper.make_node("Conv", ["xr", "w4", "b4"], ["c4"]),
         helper.make_node("Add", ["c4", "xr"], ["z"])]
g = helper.make_graph(nodes, "pwn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 12, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                       helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    "$kiln" compile "$tmp/pwn.onnx" -o "$tmp/pwn.kiln" --target cuda --precision fp16 --schedule waves \
        --emit-source "$tmp/pwn" >/dev/null 2>&1
    expect cuda_conv_product_forms 0 "x^T w^T 1, w x^T 1, w x 1" -- python3 -c 'import sys; t = open(sys.argv[1]).read()
print(", ".join("%s %d" % (f, t.count("/* Conv 1x1 as %s " % f)) for f in ("x^T w^T", "w x^T", "w x")))' \
        "$tmp/pwn/model.cu"
    # in a persistent kernel only at one block a multiprocessor (mono's
    # default here, the pointwise layers averaging 2^25 multiply-adds or
    # more), not at three, where they ran no faster
    "$kiln" inspect "$tmp/convs.onnx" --schedule mono --precision fp16 >"$tmp/convs2.txt" 2>&1
    expect cuda_conv_products_mono 0 "11 products (4 im2col), 1 kg_conv_tc" -- python3 -c "$count_products" \
        "$tmp/convs2.txt"
    "$kiln" inspect "$tmp/convs.onnx" --schedule mono:256x3 --precision fp16 >"$tmp/convs3.txt" 2>&1
    expect cuda_conv_products_mono_3 0 "0 products (0 im2col), 12 kg_conv_tc" -- python3 -c "$count_products" \
        "$tmp/convs3.txt"
    # ResNet's block outputs, read by the next block's first convolution
    # and, as the residual, by its last, are stored NHWC too (the residual
    # read in y's layout), and so is the last block's, which only
    # GlobalAveragePool reads (the means of [N, H W, C]'s 512 columns of
    # 196 pixels): every 1x1 layer is a product (x w^T), the 3x3 ones stay
    # kg_conv_tc; in mono, where products are not offered, each block's
    # last convolution reads the block's input as an NHWC residual
    python3 - "$tmp/blocks.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits, nodes = [], []
def conv(x, cin, cout, r, y, res=None):
    w = "w%d" % len(inits)
    inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, r, r)) * 0.1).astype(np.float32), w))
    nodes.append(helper.make_node("Conv", [x, w], [y + "c"], pads=[r // 2] * 4))
    if res:
        nodes.append(helper.make_node("Add", [y + "c", res], [y + "a"]))
    nodes.append(helper.make_node("Relu", [y + "a" if res else y + "c"], [y]))
    return y
b = conv("x", 16, 512, 3, "b0")
for i in (1, 2):
    t = conv(conv(b, 512, 16, 1, "p%d" % i), 16, 16, 3, "q%d" % i)
    b = conv(t, 16, 512, 1, "b%d" % i, res=b)
nodes.append(helper.make_node("GlobalAveragePool", [b], ["y"]))
g = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 14, 14])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    "$kiln" inspect "$tmp/blocks.onnx" --schedule waves --precision fp16 >"$tmp/blocks.txt" 2>&1
    expect cuda_conv_residual_nhwc 0 "4 products, 3 kg_conv_tc, pool of NHWC columns 1" -- python3 -c '
import sys; t = open(sys.argv[1]).read()
print("%d products, %d kg_conv_tc, pool of NHWC columns %d" % (t.count("[kg_gemm_"), t.count("[kg_conv_tc"),
      t.count("[columns: x NHWC, 8 threads a column]  GlobalAveragePool")))' "$tmp/blocks.txt"
    "$kiln" inspect "$tmp/blocks.onnx" --schedule mono --precision fp16 >"$tmp/blocks-mono.txt" 2>&1
    expect cuda_conv_residual_nhwc_mono 0 "0 products, 2 with an NHWC residual, pool of NHWC columns 1" -- python3 -c '
import sys; t = open(sys.argv[1]).read()
print("%d products, %d with an NHWC residual, pool of NHWC columns %d" % (t.count("[kg_gemm_"),
      t.count(", NHWC residual]"), t.count("[columns: x NHWC, 8 threads a column]  GlobalAveragePool")))' "$tmp/blocks-mono.txt"
    # a product in a persistent kernel of 3 blocks of 256 threads a
    # multiprocessor (80 registers a thread) takes no warpgroup-MMA tile
    # whose accumulators need more: kg_gemm_wg 64x128 failed in ptxas
    # ("Insufficient registers"), an internal error
    python3 - "$tmp/cnnmm.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits, nodes, x = [], [], "x"
for i in range(4):
    inits.append(numpy_helper.from_array((rng.standard_normal((24, 24, 3, 3)) * 0.05).astype(np.float32), "w%d" % i))
    nodes.append(helper.make_node("Conv", [x, "w%d" % i], ["c%d" % i], pads=[1] * 4))
    nodes.append(helper.make_node("Relu", ["c%d" % i], ["r%d" % i]))
    x = "r%d" % i
inits.append(numpy_helper.from_array(np.array([24, 3136], dtype=np.int64), "shp"))
nodes.append(helper.make_node("Reshape", [x, "shp"], ["f"]))
nodes.append(helper.make_node("Transpose", ["f"], ["ft"], perm=[1, 0]))
inits.append(numpy_helper.from_array((rng.standard_normal((24, 144)) * 0.05).astype(np.float32), "wm"))
nodes.append(helper.make_node("MatMul", ["ft", "wm"], ["y"]))
g = helper.make_graph(nodes, "cnnmm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 24, 56, 56])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_gemm_regs 0 "blocks of 256 threads, 3 a multiprocessor" -- "$kiln" compile "$tmp/cnnmm.onnx" \
        -o "$tmp/cnnmm.kiln" --target cuda --precision fp16 --schedule mono
    # planning NHWC values asks only convolution groups for their epilogue's
    # residual: a host segment's LSTM without its Y output reading a
    # convolution's output crashed it (fp16)
    python3 - "$tmp/lstmconv.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
I = lambda s, n: numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
inits = [I((16, 16, 3, 3), "w"), I((1, 32, 8), "W"), I((1, 32, 8), "R")]
nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
         helper.make_node("LSTM", ["s", "W", "R"], ["", "yh"], hidden_size=8),
         helper.make_node("Einsum", ["yh", "y"], ["e1"], equation="abc,defg->ad")]
for i in range(1, 5):
    nodes.append(helper.make_node("Einsum", ["e%d" % i], ["e%d" % (i + 1)], equation="ab->ba"))
g = helper.make_graph(nodes, "lstmconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8]),
                                          helper.make_tensor_value_info("s", TensorProto.FLOAT, [4, 1, 8])],
                      [helper.make_tensor_value_info("e5", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_conv_layouts_host_reader 0 "kg_conv_tc" -- "$kiln" inspect "$tmp/lstmconv.onnx" --schedule waves \
        --precision fp16
    # nor in a wave kernel whose widest member has 1024 threads (65536 / 1024
    # = 64 registers a thread): a 128 x 192 warpgroup-MMA product beside a
    # Softmax over 65536 columns forms a kernel of its own (it failed in
    # ptxas, an internal error)
    python3 - "$tmp/wavemm.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits = [numpy_helper.from_array((rng.standard_normal((768, 3072)) * 0.05).astype(np.float32), "w")]
nodes = [helper.make_node("Relu", ["a"], ["ar"]), helper.make_node("MatMul", ["ar", "w"], ["y"]),
         helper.make_node("Relu", ["s"], ["sr"]), helper.make_node("Softmax", ["sr"], ["z"], axis=-1)]
g = helper.make_graph(nodes, "wavemm", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2048, 768]),
                                        helper.make_tensor_value_info("s", TensorProto.FLOAT, [8, 65536])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                       helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    "$kiln" inspect "$tmp/wavemm.onnx" --schedule waves --precision fp16 >"$tmp/wavemm.txt" 2>&1
    expect cuda_wave_narrow_regs 0 "product in 256-thread blocks, Softmax in 1024" -- python3 -c '
import re, sys
t = open(sys.argv[1]).read()
launches = re.findall(r"threads a block.*\n((?:    group.*\n)+)", t)
blocks = re.findall(r"kernel k_\d+, (\d+) threads a block", t)
where = {("Softmax" if "Softmax" in g else "MatMul" if "MatMul" in g else "-"): b for g, b in zip(launches, blocks)}
print("product in %s-thread blocks, Softmax in %s" % (where.get("MatMul"), where.get("Softmax")))' "$tmp/wavemm.txt"
    expect cuda_wave_narrow_regs_compiles 0 "compiled" -- "$kiln" compile "$tmp/wavemm.onnx" -o "$tmp/wavemm.kiln" \
        --target cuda --precision fp16 --schedule waves
    # under a mono schedule the conv cost model counts the kernel's blocks a
    # multiprocessor as resident tiles (not what a block's share of shared
    # memory would hold): ResNet-50's 7x7 stem takes 32x64 tiles, 392 rTasks
    # (it took 128x64, 98 rTasks, and ran 36 us against 15 in the mono
    # profile; alone here, it is a kernel of one stage, picked alike), its
    # shared memory 36864 B of pipeline and 1536 of im2col table
    python3 - "$tmp/stem.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((64, 3, 7, 7)) * 0.05).astype(np.float32), "w")
nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[7, 7], strides=[2, 2], pads=[3] * 4),
         helper.make_node("Relu", ["c"], ["y"])]
g = helper.make_graph(nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_conv_mono_residency 0 "392 rTasks  38400 B smem  [kg_conv_tc 32x64x64" -- "$kiln" inspect "$tmp/stem.onnx" \
        --schedule mono --precision fp16

    # a patch embedding (ViT-B/16's: float32 x gathered 8 elements a load)
    # waits on its gathers whatever its share of K, so in kernels of their
    # own its tiles split K three ways (row_latency in emit_conv.c's
    # tc_consts); persistent kernels keep one split
    python3 - "$tmp/patch.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((768, 3, 16, 16)) * 0.02).astype(np.float32), "w")
nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[16, 16], strides=[16, 16])]
g = helper.make_graph(nodes, "patch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_patch_conv_split_k 0 "252 rTasks  36864 B smem, split-K  [kg_conv_tc 32x64x64, warp 16x32, 2 k-slices, 3 stages, 3 splits]" -- \
        "$kiln" inspect "$tmp/patch.onnx" --schedule waves --precision fp16
    expect cuda_patch_conv_mono 0 "84 rTasks  36864 B smem  [kg_conv_tc 32x64x64" -- "$kiln" inspect "$tmp/patch.onnx" \
        --schedule mono --precision fp16

    # split-K convolutions side by side (late layers of two branches) each
    # get their own place in the split-K workspace (cg_splitk_place), so
    # they share a wave and a stage; they took a kernel each when they
    # shared the whole workspace (3 launches, 2 grid barriers)
    python3 - "$tmp/twosk.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits = [numpy_helper.from_array((rng.standard_normal((512, 512, 3, 3)) * 0.02).astype(np.float32), n)
         for n in ("wa", "wb")]
nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], kernel_shape=[3, 3], pads=[1] * 4),
         helper.make_node("Conv", ["x", "wb"], ["b"], kernel_shape=[3, 3], pads=[1] * 4),
         helper.make_node("Concat", ["a", "b"], ["y"], axis=1)]
g = helper.make_graph(nodes, "twosk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512, 7, 7])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    "$kiln" inspect "$tmp/twosk.onnx" --schedule waves --precision fp16 >"$tmp/twosk.txt" 2>&1
    expect cuda_splitk_side_by_side 0 "2 split-K, 2 launches" -- python3 -c 'import sys; t = open(sys.argv[1]).read()
print("%d split-K, %s" % (t.count(", split-K"), t.split("launches")[0].split(": ")[-1] + "launches"))' "$tmp/twosk.txt"
    expect cuda_splitk_one_stage 0 "1 grid barriers (2 before merging)" -- "$kiln" inspect "$tmp/twosk.onnx" \
        --schedule mono --precision fp16
    # ten such branches outgrow the workspace (eight fit: 131072 floats
    # each): the ninth and tenth take the first two places again and wait
    # for their rOperators
    python3 - "$tmp/tensk.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
n = 10
inits = [numpy_helper.from_array((rng.standard_normal((512, 512, 3, 3)) * 0.02).astype(np.float32), "w%d" % i)
         for i in range(n)]
nodes = [helper.make_node("Conv", ["x", "w%d" % i], ["y%d" % i], kernel_shape=[3, 3], pads=[1] * 4) for i in range(n)]
nodes.append(helper.make_node("Concat", ["y%d" % i for i in range(n)], ["y"], axis=1))
g = helper.make_graph(nodes, "tensk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512, 7, 7])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    "$kiln" inspect "$tmp/tensk.onnx" --schedule mono --precision fp16 >"$tmp/tensk.txt" 2>&1
    expect cuda_splitk_wrap 0 "stage 1: group 8 waits for group 0, group 9 waits for group 1" -- python3 -c '
import re, sys
t = open(sys.argv[1]).read()
s1 = t.split("  stage 1\n")[1].split("  stage 2")[0]
print("stage 1: " + ", ".join("group %s waits for group %s" % m for m in re.findall(r"group (\d+) .*\n +waits for group (\d+)", s1)))' \
        "$tmp/tensk.txt"
    expect cuda_splitk_wrap_waves 0 "3 launches; 2 waves" -- "$kiln" inspect "$tmp/tensk.onnx" --schedule waves \
        --precision fp16

    # A persistent kernel whose tables outgrow their share of constant
    # memory (48 KB: 800 softmaxes in a row, 800 stages and members) keeps
    # them in global memory, and builds
    python3 - "$tmp/chain.onnx" <<'PY'
import sys
import onnx
from onnx import TensorProto, helper
nodes = [helper.make_node("Softmax", ["x" if i == 0 else "t%d" % (i - 1)], ["t%d" % i], axis=-1) for i in range(800)]
g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                      [helper.make_tensor_value_info("t799", TensorProto.FLOAT, [16, 64])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
    expect cuda_mono_tables_global_build 0 "stages 800" -- "$kiln" compile "$tmp/chain.onnx" -o "$tmp/chain.kiln" \
        --target cuda --precision fp16 --schedule mono --emit-source "$tmp/chain"
    expect cuda_mono_tables_global 0 "2" -- grep -cE \
        "^static __device__ const kg_(stage kg_stages_0\[800\]|member kg_members_0\[800\]) = \{" "$tmp/chain/model.cu"
fi

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
