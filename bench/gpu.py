#!/usr/bin/env python3
"""kiln on the GPU against PyTorch: BERT-base (batch 1 and 16, seq 128),
ViT-B/16 and ResNet-50, fp16, end-to-end latency, all in one run.

    python3 bench/gpu.py [--models bert1,bert16,vit,resnet50] [--iterations 200] [--warmup 20]
                         [--tune] [--schedule waves,kernels,mono,mono-barriers,mono-unmerged] [--ablation] [--skip-compile-peers]
                         [--compile-budget 120] [--budget 480]
                         [--bundle bundle] [--json OUT.json] [--compile-only]

For each model (random weights, seed 0, eval mode; nothing is downloaded):
  1. export to ONNX (opset 17, fp32 graph) with the inputs used throughout;
  2. kiln, for each --schedule (a table row each):
     `kiln compile --target cuda --precision fp16 --schedule S [--tune]` (with
     --tune and a mono S without :BLOCKxN, `kiln tune --schedule S` first: the
     persistent kernel's configuration timed whole, a note), then
     `kiln bench --json --device-io` on the artifact (host clock around each
     run, which returns when the outputs are written; inputs and outputs stay
     in device memory, as the peers' tensors do), for the waves and kernels
     schedules the same with KILN_EARLY_LAUNCH=0 (no programmatic dependent launches:
     a note comparing the two), then `kiln bench` with host
     tensors (inputs uploaded and outputs downloaded every run) in
     kiln_rt_host_alloc's page-locked memory (the table's "kiln host") and with
     --pageable (a note), and
     `kiln run` whose outputs must match PyTorch fp32 (TF32 off) within the
     fp16 tolerance of src/api/tolerance.c: |kiln - ref| <= 1e-3 + 1e-2 |ref|;
  3. PyTorch fp16 on the same inputs: eager, eager captured in a CUDA graph,
     and torch.compile(mode="max-autotune"), each timed by CUDA events around
     one call with a synchronisation after it: the median of --iterations
     after --warmup.
torch.compile runs last, one model at a time in a child process that is
stopped when the model's budget is spent: --compile-budget seconds, less
when the whole run would pass --budget (the peer is then reported as over
budget, with the time it was given). The table gives latencies and each
peer's time over kiln's (above 1: kiln is faster); --json writes it all.
Ends with "N passed, N failed": a model passes when kiln compiled it, ran it
and matched PyTorch.

The kiln binary is BUNDLE/kiln (scripts/gpu-bundle.sh) with BUNDLE/lib on the
library path, or --kiln PATH. --compile-only exports and compiles with kiln and
stops (for a machine without a GPU: NVRTC is enough).
"""
import argparse
import copy
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import compare_ort  # noqa: E402  (compare(): the rule every kiln comparison uses)
import export as test_export  # noqa: E402  (BERT and batch-norm randomisation shared with the model tests)

SEED = 0
OPSET = 17
BERT_SEQ = 128
# src/api/tolerance.c: api_tolerance_for_precision(F32, precision)
TOLERANCE = {"fp16": (1e-2, 1e-3), "bf16": (5e-2, 1e-2), "fp32": (1e-3, 1e-4)}
MODELS = {
    "bert1": "BERT-base, seq 128, batch 1",
    "bert16": "BERT-base, seq 128, batch 16",
    "vit": "ViT-B/16 224, batch 1",
    "resnet50": "ResNet-50 224, batch 1",
    "googlenet": "GoogLeNet 224, batch 1",
}


def log(msg):
    print(msg, flush=True)


# ---- models ------------------------------------------------------------------------------------

def build(name):
    """(fp32 CPU model in eval mode, inputs as numpy by ONNX input name, output names)."""
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    if name in ("bert1", "bert16"):
        batch = 1 if name == "bert1" else 16
        model = test_export.HFBert() if test_export.transformers_available() else test_export.BertLite()
        ids = rng.integers(1000, test_export.BertConfigLite.vocab_size, size=(batch, BERT_SEQ), dtype=np.int64)
        inputs = {"input_ids": ids, "attention_mask": np.ones((batch, BERT_SEQ), dtype=np.int64)}
        outputs = ["last_hidden_state", "pooler_output"]
    elif name == "vit":
        import torchvision
        model = torchvision.models.vit_b_16(weights=None)
        # torchvision zeroes the classifier: logits would all be 0 and match anything
        torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        torch.nn.init.normal_(model.heads.head.bias, std=0.02)
        inputs = {"input": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}
        outputs = ["logits"]
    elif name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50(weights=None)
        # as the model tests do: batch norm that is not the identity, logits near 1
        test_export.randomize_batchnorm(model, torch.Generator().manual_seed(SEED))
        inputs = {"input": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}
        outputs = ["logits"]
    elif name == "googlenet":
        # Inception blocks: four independent branches each (Rammer's kind of
        # graph, for --schedule waves)
        import torchvision
        model = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
        inputs = {"input": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}
        outputs = ["logits"]
    else:
        raise ValueError(name)
    return model.eval(), inputs, outputs


def export_onnx(model, inputs, outputs, path):
    """opset 17, fp32. The TorchScript exporter where this PyTorch still has
    it (its graphs are the ones kiln's CPU tests see), else the default."""
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    kw = dict(input_names=list(inputs), output_names=outputs, opset_version=OPSET, do_constant_folding=True)
    how = "TorchScript exporter"
    # with gradients on: nn.MultiheadAttention's inference fast path (ViT)
    # is an op that no ONNX exporter knows
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            try:
                torch.onnx.export(model, args, path, dynamo=False, **kw)
                return how
            except Exception as e:  # noqa: BLE001 - fall back to the default exporter
                how = "default exporter (TorchScript one failed: %s)" % type(e).__name__
        torch.onnx.export(model, args, path, **kw)
    return how


# ---- timing PyTorch ---------------------------------------------------------------------------------

def time_calls(fn, iterations, warmup):
    """Median microseconds of fn() between CUDA events, synchronised after
    each call so every call starts on an idle GPU, as a user's would."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iterations):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times[len(times) // 2]


def gpu_inputs(inputs, dtype):
    return [torch.from_numpy(v).cuda().to(dtype) if v.dtype == np.float32 else torch.from_numpy(v).cuda()
            for v in inputs.values()]


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def reference(model, inputs):
    """PyTorch fp32 outputs on the GPU, TF32 off."""
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        m = copy.deepcopy(model).cuda()
        with torch.inference_mode():
            outs = as_tuple(m(*gpu_inputs(inputs, torch.float32)))
        outs = [o.float().cpu().numpy() for o in outs]
        del m
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    torch.cuda.empty_cache()
    return outs


def eager_and_graph(model, inputs, a):
    """({"eager_us", "graph_us" (None when capture fails, with "graph_note")},
    the eager fp16 outputs as float32 numpy arrays)."""
    m = copy.deepcopy(model).half().cuda().eval()
    args = gpu_inputs(inputs, torch.float16)
    res = {}
    with torch.inference_mode():
        res["eager_us"] = time_calls(lambda: m(*args), a.iterations, a.warmup)
        outs16 = [o.float().cpu().numpy() for o in as_tuple(m(*args))]
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    m(*args)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                m(*args)
            res["graph_us"] = time_calls(g.replay, a.iterations, a.warmup)
        except Exception as e:  # noqa: BLE001 - capture refused: report why, go on
            res["graph_us"] = None
            res["graph_note"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "")
    return res, outs16


def peer_compile_main(a):
    """Child process: torch.compile max-autotune of one model; prints one
    JSON line {"compile_s", "compiled_us"}."""
    model, inputs, _ = build(a.peer_compile)
    m = model.half().cuda().eval()
    args = gpu_inputs(inputs, torch.float16)
    with torch.inference_mode():
        t0 = time.time()
        cm = torch.compile(m, mode="max-autotune")
        cm(*args)
        torch.cuda.synchronize()
        compile_s = time.time() - t0
        us = time_calls(lambda: cm(*args), a.iterations, a.warmup)
    print(json.dumps({"compile_s": compile_s, "compiled_us": us}), flush=True)


def run_compile_peer(name, a, budget):
    """torch.compile in a child with `budget` seconds: (result dict, note)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--peer-compile", name,
           "--iterations", str(a.iterations), "--warmup", str(a.warmup)]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # inductor's compile workers too
        p.communicate()
        return None, "over its %.0f s budget" % budget
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line), ""
    last = (err.strip().splitlines() or ["no output"])[-1][:160]
    return None, "failed after %.0f s: %s" % (time.time() - t0, last)


# ---- kiln -----------------------------------------------------------------------------------------

def kiln_env(a):
    env = dict(os.environ)
    lib = os.path.join(a.bundle, "lib")
    if os.path.isdir(lib):
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def kiln(a, args, timeout=None, env_extra=None):
    """Runs kiln, with env_extra added to its environment; (returncode,
    stdout, stderr). A time-out is returncode 124."""
    env = kiln_env(a)
    env.update(env_extra or {})
    try:
        p = subprocess.run([a.kiln] + args, capture_output=True, text=True, env=env, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", (e.stderr or "") + "\n(timed out after %s s)" % timeout


def why(text):
    """The telling part of kiln's stderr: its "kiln: ..." line and the first
    compiler errors, else the last lines."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    pick = [ln for ln in lines if ln.startswith("kiln:")][:1]
    pick += [ln for ln in lines if "error" in ln.lower() and not ln.startswith("kiln:")][:2]
    return " | ".join(pick or lines[-3:])[:400]


def compare_outputs(names, got_path, refs, precision):
    """(all passed, [text per output]) with compare_ort's rule."""
    rtol, atol = TOLERANCE[precision]
    with np.load(got_path) as z:
        got = {k: z[k] for k in z.files}
    ok, texts = True, []
    for n, want in zip(names, refs):
        if n not in got:
            ok = False
            texts.append("%s: missing" % n)
            continue
        text, good = compare_ort.compare(n, got[n], want, rtol, atol)
        ok &= good
        texts.append("%s: %s" % (n, text))
    return ok, texts


# kiln fp16 may be off by as much as PyTorch fp16 is, and this much more
FP16_PEER_SLACK = 1.25


def max_abs_err(got, want):
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(g - w))) if g.size else 0.0


def second_look(r, outputs, refs, outs16):
    """Deep fp16 networks miss the per-element fp16 tolerance in PyTorch
    too (a 12-layer BERT's layer norm outputs are off by about 1e-2). When
    PyTorch fp16 misses it, kiln passes if its largest error against fp32 is
    at most FP16_PEER_SLACK times PyTorch fp16's for every output."""
    ok, texts = True, []
    for n, want, t16 in zip(outputs, refs, outs16):
        got = r["kiln_outputs"].get(n)
        if got is None or got.shape != want.shape or not np.all(np.isfinite(got)):
            return
        ek, et = max_abs_err(got, want), max_abs_err(t16, want)
        good = ek <= FP16_PEER_SLACK * et
        ok &= good
        texts.append("%s: kiln max abs %.3g, PyTorch fp16 %.3g (%.2fx)" % (n, ek, et, ek / et if et else float("inf")))
    r["kiln_ok"] = ok
    r["kiln_rule"] = "within %.2fx of PyTorch fp16's own error: %s" % (FP16_PEER_SLACK, "; ".join(texts))
    log("%s [%s]: kiln against PyTorch fp32, second look (PyTorch fp16 is outside the per-element tolerance too): %s; %s" % (
        r["model"], r["schedule"], "PASS" if ok else "FAIL", "; ".join(texts)))


def tune_mono(r, a, onnx_path, schedule, env):
    """--tune with a mono schedule that names no configuration: `kiln tune
    --schedule S` first (every configuration timed whole, its groups tuned
    under it), so the compile takes the fastest; the table's last lines go
    into a note."""
    cmd = ["tune", onnx_path, "--precision", a.precision, "--schedule", schedule, "--quiet"]
    if a.tuning_db:
        cmd += ["--tuning-db", a.tuning_db]
    t0 = time.time()
    rc, out, err = kiln(a, cmd, timeout=a.kiln_timeout, env_extra=env)
    rows = [ln.strip() for ln in out.splitlines() if re.match(r"^\s+(128|256)x[1-5] ", ln)]
    chose = [ln for ln in out.splitlines() if ln.startswith("chose ")]
    if rc != 0 or not chose:
        r["tune_note"] = "kiln tune --schedule %s failed (exit %d): %s" % (schedule, rc, why(err or out))
    else:
        r["tune_note"] = "kiln tune in %.0f s: %s (%s)" % (time.time() - t0, chose[0].split(" in ")[0],
                                                          "; ".join(rows))
    log("%s [%s]: %s" % (r["model"], r["schedule"], r["tune_note"]))


def bench_kiln(r, a, work, onnx_path, npz_path, outputs, refs):
    """kiln's part for one model, into r: compile, then (unless
    --compile-only) run and compare with refs, then time."""
    name = r["model"] + ("" if r["schedule"] == "kernels" else "." + r["schedule"])
    art = os.path.join(work, name + ".kiln")
    schedule, env = split_schedule(r["schedule"])
    cmd = ["compile", onnx_path, "-o", art, "--target", "cuda", "--precision", a.precision,
           "--schedule", schedule, "--quiet"]
    if a.tune:
        cmd.append("--tune")
    if a.tuning_db:
        cmd += ["--tuning-db", a.tuning_db]
    if a.tune and schedule.startswith("mono") and ":" not in schedule:
        tune_mono(r, a, onnx_path, schedule, env)
    t0 = time.time()
    rc, out, err = kiln(a, cmd, timeout=a.kiln_timeout, env_extra=env)
    r["kiln_compile_s"] = time.time() - t0
    if rc != 0:
        r["kiln_note"] = "compile failed (exit %d): %s" % (rc, why(err or out))
        log("%s: kiln compile FAILED: %s" % (name, r["kiln_note"]))
        return
    log("%s: kiln compiled in %.1f s" % (name, r["kiln_compile_s"]))
    if r["schedule"] != "kernels":
        # the schedule's shape: kernels, barriers before and after merging, waits
        rc, out, err = kiln(a, ["inspect", onnx_path, "--schedule", schedule, "--precision", a.precision],
                            timeout=a.kiln_timeout, env_extra=env)
        shape = [ln for ln in out.splitlines() if ln.startswith("rProgram")]
        if rc == 0 and shape:
            r["schedule_note"] = shape[0].split(": ", 1)[-1]
            log("%s: %s" % (name, r["schedule_note"]))
    if a.compile_only:
        r["kiln_ok"] = True
        return
    got = os.path.join(work, name + ".kiln.npz")
    rc, out, err = kiln(a, ["run", art, "--inputs", npz_path, "--output", got, "--quiet"], timeout=a.kiln_timeout)
    if rc != 0:
        r["kiln_note"] = "run failed (exit %d): %s" % (rc, why(err or out))
        log("%s: kiln run FAILED: %s" % (name, r["kiln_note"]))
        return
    r["kiln_ok"], r["check"] = compare_outputs(outputs, got, refs, a.precision)
    with np.load(got) as z:
        r["kiln_outputs"] = {k: z[k] for k in z.files}
    log("%s: kiln against PyTorch fp32: %s; %s" % (name, "PASS" if r["kiln_ok"] else "FAIL", "; ".join(r["check"])))
    bench = ["bench", art, "--json", "--inputs", npz_path, "--warmup", str(a.warmup), "--iterations", str(a.iterations)]
    rc, out, err = kiln(a, bench + ["--device-io"], timeout=a.kiln_timeout)
    js = [ln for ln in out.splitlines() if ln.startswith("{")]
    if rc == 0 and js:
        r["kiln_bench"] = json.loads(js[-1])
        r["kiln_us"] = r["kiln_bench"]["median_ms"] * 1e3
        r["launches_note"] = "%d kernel launch(es) a run, from %d CUDA graph launch(es)" % (
            r["kiln_bench"].get("kernel_launches", 0), r["kiln_bench"].get("graph_launches", 0))
        # early launches (programmatic dependent launch) against kernels in
        # order: the same artifact, KILN_EARLY_LAUNCH=0, timed before and
        # after a second timing with early launches (medians of each)
        if r["schedule"] in ("kernels", "waves"):
            ab = {"1": [r["kiln_us"]], "0": []}
            for flag in ("0", "1", "0"):
                rc, out, err = kiln(a, bench + ["--device-io"], timeout=a.kiln_timeout,
                                    env_extra={"KILN_EARLY_LAUNCH": flag})
                js = [ln for ln in out.splitlines() if ln.startswith("{")]
                if rc == 0 and js:
                    ab[flag].append(json.loads(js[-1])["median_ms"] * 1e3)
            if len(ab["0"]) == 2 and len(ab["1"]) == 2:
                early, order = min(ab["1"]), min(ab["0"])
                r["early_note"] = "%.0f us with early launches (the table's figure: %.0f), %.0f us in order " \
                                  "(KILN_EARLY_LAUNCH=0): %.1f%% less" % (early, r["kiln_us"], order,
                                                                          100.0 * (order - early) / order)
        # host tensors, uploaded and downloaded every run: in page-locked
        # memory from kiln_rt_host_alloc (kiln bench's default), then malloc'd
        host = {}
        for how, extra in (("page-locked", []), ("pageable", ["--pageable"])):
            rc, out, err = kiln(a, bench + extra, timeout=a.kiln_timeout)
            js = [ln for ln in out.splitlines() if ln.startswith("{")]
            if rc == 0 and js:
                host[how] = json.loads(js[-1])["median_ms"] * 1e3
        if "page-locked" in host:
            r["kiln_host_us"] = host["page-locked"]
            r["host_note"] = "%.0f us with host tensors (inputs uploaded, outputs downloaded every run) in " \
                             "page-locked memory (kiln_rt_host_alloc)" % host["page-locked"]
            if "pageable" in host:
                r["host_note"] += ", %.0f in pageable memory" % host["pageable"]
    else:
        r["kiln_note"] = "bench failed (exit %d): %s" % (rc, why(err or out))
        log("%s: kiln bench FAILED: %s" % (name, r["kiln_note"]))


# ---- the run ---------------------------------------------------------------------------------------

def fmt_us(us):
    if us is None:
        return "n/a"
    return "%.0f us" % us if us >= 100 else "%.1f us" % us


def ratio(peer, kiln_us):
    if peer is None or not kiln_us:
        return "n/a"
    return "%.2fx" % (peer / kiln_us)


# MonoNN Fig. 12's steps, each a schedule (with gpu.py's variant suffixes:
# +noilp turns context-aware ILP off, +cache the cache hints on, +wide the
# narrow rOperators off, +inline each warpgroup-MMA rOperator its own
# inlined code, +called their shared bodies called instead of inlined,
# +nofit each product the fastest tiles whatever its stage holds, through
# kiln's environment)
# (kiln's mono has the hints off unless KILN_MONO_CACHE=1, so the steps
# after them name +cache; the mono row without is kiln's default)
ABLATION = (("mono-unmerged+noilp", "base: one persistent kernel, a barrier after every group"),
            ("mono-unmerged", "+ context-aware ILP (memory-bound groups)"),
            ("mono-unmerged+cache", "+ cache hints (streaming evict-first, reused evict-last)"),
            ("mono-barriers+cache", "+ barrier merging (longest path)"),
            ("mono+cache", "+ completion-counter waits"),
            ("mono", "kiln's mono (the same without the cache hints)"))
VARIANTS = {"noilp": ("KILN_MONO_ILP", "0"), "cache": ("KILN_MONO_CACHE", "1"), "wide": ("KILN_MONO_NARROW", "0"),
            "inline": ("KILN_MONO_INLINE_WGMMA", "1"), "called": ("KILN_MONO_INLINE_WGMMA", "0"),
            "nofit": ("KILN_MONO_FIT", "0")}


def split_schedule(s):
    """gpu.py's schedule name -> (kiln's --schedule, the environment its
    variant suffixes set): mono-unmerged+noilp -> mono-unmerged, KILN_MONO_ILP=0;
    +cache -> KILN_MONO_CACHE=1; +wide -> KILN_MONO_NARROW=0; +inline ->
    KILN_MONO_INLINE_WGMMA=1; +called -> KILN_MONO_INLINE_WGMMA=0; +nofit ->
    KILN_MONO_FIT=0."""
    parts = s.split("+")
    return parts[0], dict(VARIANTS[v] for v in parts[1:])


def print_ablation(results):
    """Per model: each ablation step's latency (or, compiling only, its
    barrier counts) and its speed-up over the base."""
    log("")
    log("ablation (MonoNN Fig. 12; speed-up over the base):")
    for model in dict.fromkeys(r["model"] for r in results):
        rows = {r["schedule"]: r for r in results if r["model"] == model}
        base = (rows.get(ABLATION[0][0]) or {}).get("kiln_us")
        log("  %s" % MODELS[model])
        for sched, what in ABLATION:
            r = rows.get(sched)
            if not r:
                continue
            k = r.get("kiln_us")
            log("    %-58s %11s %8s   %s" % (what, fmt_us(k), ratio(base, k),
                                            r.get("schedule_note", "")))
        if rows.get("kernels"):
            log("    %-58s %11s" % ("(kiln's kernels schedule, for reference)", fmt_us(rows["kernels"].get("kiln_us"))))


def print_table(results, a):
    log("")
    # kiln: inputs and outputs in device memory, as the peers' tensors are;
    # kiln host: uploaded and downloaded every run (page-locked host memory)
    log("%-30s %-8s %11s %11s %11s %11s %13s   %s" % ("model (fp16)", "schedule", "kiln", "kiln host", "eager",
                                                      "eager+graph", "max-autotune",
                                                      "peer time / kiln time (eager, graph, compile)"))
    for r in results:
        k = r.get("kiln_us")
        c = r.get("compiled_us")
        cs = fmt_us(c) if c is not None else ("skipped" if a.skip_compile_peers else "n/a")
        log("%-30s %-8s %11s %11s %11s %11s %13s   %s, %s, %s" % (
            MODELS[r["model"]], r["schedule"], fmt_us(k), fmt_us(r.get("kiln_host_us")), fmt_us(r.get("eager_us")),
            fmt_us(r.get("graph_us")), cs, ratio(r.get("eager_us"), k), ratio(r.get("graph_us"), k), ratio(c, k)))
    notes = []
    for r in results:
        for key, what in (("kiln_note", "kiln"), ("kiln_rule", "kiln matched PyTorch"), ("graph_note", "CUDA graph"),
                          ("compile_note", "torch.compile"), ("schedule_note", "schedule"),
                          ("launches_note", "runtime"), ("early_note", "kiln"), ("host_note", "kiln"),
                          ("tune_note", "tuning")):
            if r.get(key):
                notes.append("  %s [%s], %s: %s" % (r["model"], r["schedule"], what, r[key]))
        if r.get("compile_s") is not None:
            notes.append("  %s: torch.compile took %.0f s; kiln compile %.1f s" % (
                r["model"], r["compile_s"], r.get("kiln_compile_s") or 0))
        elif r.get("kiln_compile_s") is not None:
            notes.append("  %s [%s]: kiln compile %.1f s" % (r["model"], r["schedule"], r["kiln_compile_s"]))
    if notes:
        log("notes:")
        for n in notes:
            log(n)


def run(a):
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    bad = [m for m in names if m not in MODELS]
    if bad or not names:
        sys.exit("gpu.py: unknown model(s) %s; choose from %s" % (", ".join(bad) or "(none)", ",".join(MODELS)))
    if not os.path.exists(a.kiln):
        sys.exit("gpu.py: no kiln at %s (build the bundle with scripts/gpu-bundle.sh, or --kiln PATH)" % a.kiln)
    if not a.compile_only and not torch.cuda.is_available():
        sys.exit("gpu.py: PyTorch sees no CUDA device (--compile-only compiles without one)")
    t_start = time.time()
    work = a.workdir or tempfile.mkdtemp(prefix="kiln-bench-gpu-")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    info = {"torch": torch.__version__, "precision": a.precision, "tune": a.tune,
            "iterations": a.iterations, "warmup": a.warmup}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
    rc, out, _ = kiln(a, ["--version"])
    info["kiln"] = out.strip()
    log("bench/gpu.py: %s on %s, PyTorch %s; %d timed runs after %d warm-up; work in %s" % (
        info["kiln"], info.get("device", "no GPU"), torch.__version__, a.iterations, a.warmup, work))
    results = []
    for name in names:
        # a row per schedule; the peers are measured once and shared
        rows = [{"model": name, "description": MODELS[name], "schedule": s} for s in a.schedules]
        results.extend(rows)
        r = rows[0]
        model, inputs, outputs = build(name)
        onnx_path = os.path.join(work, name + ".onnx")
        npz_path = os.path.join(work, name + ".inputs.npz")
        t0 = time.time()
        try:
            r["exporter"] = export_onnx(model, inputs, outputs, onnx_path)
        except Exception as e:  # noqa: BLE001 - one model's failure must not stop the others
            for row in rows:
                row["kiln_note"] = "ONNX export failed: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:200])
            log("%s: %s" % (name, r["kiln_note"]))
            continue
        np.savez(npz_path, **inputs)
        log("%s: exported (%s) in %.1f s" % (name, r["exporter"], time.time() - t0))
        refs = None if a.compile_only else reference(model, inputs)
        for row in rows:
            bench_kiln(row, a, work, onnx_path, npz_path, outputs, refs)
        if a.compile_only:
            continue
        peer, outs16 = eager_and_graph(model, inputs, a)
        torch.cuda.empty_cache()
        for row in rows:
            row.update(peer)
        ok16, text16 = True, []
        for n, want, g in zip(outputs, refs, outs16):
            text, good = compare_ort.compare(n, g, want, *TOLERANCE[a.precision])
            ok16 &= good
            text16.append("%s: %s" % (n, text))
        for row in rows:
            row["torch_fp16_check"] = text16
            if not row.get("kiln_ok") and row.get("kiln_outputs") is not None and not ok16:
                second_look(row, outputs, refs, outs16)
            row.pop("kiln_outputs", None)
        log("%s: PyTorch eager %s, CUDA graph %s; PyTorch fp16 against fp32, for scale: %s the tolerance; %s" % (
            name, fmt_us(r["eager_us"]), fmt_us(r.get("graph_us")), "within" if ok16 else "OUTSIDE",
            "; ".join(text16)))
    # torch.compile last: whatever time is left, within each model's budget
    if not a.compile_only and not a.skip_compile_peers:
        todo = [r for r in results if r["schedule"] == a.schedules[0]]
        for i, r in enumerate(todo):
            left = a.budget - (time.time() - t_start)
            budget = min(a.compile_budget, max(0.0, left / (len(todo) - i)))
            if budget < 20:
                r["compile_note"] = "not run: the run's %.0f s budget is spent" % a.budget
                continue
            log("%s: torch.compile(mode='max-autotune'), up to %.0f s" % (r["model"], budget))
            res, note = run_compile_peer(r["model"], a, budget)
            for row in results:
                if row["model"] != r["model"]:
                    continue
                if res:
                    row.update(res)
                else:
                    row["compiled_us"] = None
                    row["compile_note"] = note
    info["seconds"] = time.time() - t_start
    if not a.compile_only:
        print_table(results, a)
    if a.ablation:
        print_ablation(results)
    passed = sum(1 for r in results if r.get("kiln_ok"))
    failed = len(results) - passed
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "models": results}, f, indent=1)
        log("wrote %s" % a.json)
    log("bench: %d passed, %d failed (%s; %.0f s)" % (
        passed, failed, "kiln compiled" if a.compile_only else "kiln compiled, ran and matched PyTorch fp32",
        info["seconds"]))
    return 0 if failed == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert1,bert16,vit,resnet50",
                    help="comma-separated: " + ",".join(MODELS) + " (default: the four of issue 5's goals)")
    ap.add_argument("--iterations", type=int, default=200, help="timed runs (default 200)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed runs first (default 20)")
    ap.add_argument("--precision", choices=["fp16", "bf16"], default="fp16", help="kiln's storage precision")
    ap.add_argument("--tune", action="store_true",
                    help="kiln compile --tune; a mono schedule without :BLOCKxN runs `kiln tune --schedule S` "
                         "first, which also picks the persistent kernel's configuration")
    ap.add_argument("--schedule", default="waves",
                    help="kiln's schedule(s), comma-separated: kernels, waves, mono, mono-barriers, mono-unmerged, "
                         "the mono ones with a block configuration (mono:256x2) and the variants +noilp, "
                         "+cache, +wide, +inline, +called and +nofit (KILN_MONO_ILP=0, KILN_MONO_CACHE=1, "
                         "KILN_MONO_NARROW=0, KILN_MONO_INLINE_WGMMA=1, KILN_MONO_INLINE_WGMMA=0, KILN_MONO_FIT=0: "
                         "mono-unmerged+noilp); a table row each; "
                         "default waves, the compiler's")
    ap.add_argument("--tuning-db", help="kiln's tuning database (default: kiln's)")
    ap.add_argument("--skip-compile-peers", action="store_true", help="no torch.compile")
    ap.add_argument("--compile-budget", type=float, default=120,
                    help="seconds torch.compile may take per model, timing included (default 120)")
    ap.add_argument("--budget", type=float, default=480,
                    help="the whole run's target in seconds; torch.compile gets what is left (default 480)")
    ap.add_argument("--bundle", default=os.path.join(ROOT, "bundle"), help="the kiln bundle (default REPO/bundle)")
    ap.add_argument("--kiln", help="the kiln binary (default BUNDLE/kiln)")
    ap.add_argument("--kiln-timeout", type=float, default=900, help="seconds per kiln command (default 900)")
    ap.add_argument("--workdir", help="where models and artifacts go (default: a new temporary folder)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--compile-only", action="store_true", help="export and compile with kiln; run nothing")
    ap.add_argument("--ablation", action="store_true",
                    help="the schedules kernels and the ablation's steps (mono-unmerged without context-aware "
                         "ILP, with it, with cache hints too, mono-barriers and mono with them, and mono), then a "
                         "table like MonoNN Fig. 12: each step's speed-up over the base, and the barrier counts")
    ap.add_argument("--peer-compile", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.iterations < 1 or a.warmup < 0:
        ap.error("--iterations must be at least 1 and --warmup at least 0")
    if a.peer_compile:
        peer_compile_main(a)
        return 0
    a.schedules = [s.strip() for s in a.schedule.split(",") if s.strip()]
    if a.ablation:
        a.schedules = ["kernels"] + [s for s, _ in ABLATION]
    def known(s):
        kind, suffixes = s.split("+")[0].split(":")[0], s.split("+")[1:]
        return kind in ("kernels", "waves", "mono", "mono-barriers", "mono-unmerged") and \
            all(v in VARIANTS for v in suffixes) and not (suffixes and kind in ("kernels", "waves")) and \
            not ("inline" in suffixes and "called" in suffixes)  # both set KILN_MONO_INLINE_WGMMA
    if not a.schedules or len(set(a.schedules)) != len(a.schedules) or not all(known(s) for s in a.schedules):
        ap.error("--schedule takes kernels, waves, mono, mono-barriers and/or mono-unmerged (the mono ones with kiln's :BLOCKxN, "
                 "e.g. mono:256x2, and a mono one with +noilp, +cache, +wide, +inline, +called and/or +nofit, which turn "
                 "off context-aware ILP, on cache hints, off narrow rOperators, on unshared inlined warpgroup MMAs, "
                 "on called (not inlined) warpgroup-MMA bodies and off stage-fitted tiles; not +inline with +called), "
                 "comma-separated, each once")
    a.bundle = os.path.abspath(a.bundle)
    a.kiln = os.path.abspath(a.kiln) if a.kiln else os.path.join(a.bundle, "kiln")
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
