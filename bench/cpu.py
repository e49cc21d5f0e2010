#!/usr/bin/env python3
"""kiln against onnxruntime on the CPU, in one run, on the same ONNX files.

    python3 bench/cpu.py [--threads 2] [--models resnet50,mobilenetv2,bert]
                         [--iterations 50] [--build build] [--models-dir models]

For each model (exported by tests/models/export.py when missing): compiles it
with `kiln compile` (timing the compile), checks kiln's outputs against
onnxruntime's on the model's inputs (rtol 1e-3, atol 1e-4), then times both
with the same thread count: warm-up runs excluded, median over the timed
iterations. Prints a table with min/median/p90 latencies and the ratio
kiln / onnxruntime (below 1.0: kiln is faster).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export(models_dir, names):
    missing = [n for n in names if not os.path.exists(os.path.join(models_dir, n + ".onnx"))]
    if missing:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/models/export.py"), "--out", models_dir,
                        "--models", ",".join(missing)], check=True)


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def time_ort(sess, feeds, warmup, iterations):
    for _ in range(warmup):
        sess.run(None, feeds)
    lat = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    return lat


def pct(lat, q):
    return lat[min(len(lat) - 1, int(q * (len(lat) - 1)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    args = ap.parse_args()
    kiln = os.path.join(args.build, "kiln")
    names = args.models.split(",")
    export(args.models_dir, names)
    rows = []
    ok_all = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            onnx_path = os.path.join(args.models_dir, name + ".onnx")
            inputs_path = os.path.join(args.models_dir, name + ".inputs.npz")
            art = os.path.join(tmp, name + ".kiln")
            t0 = time.perf_counter()
            subprocess.run([kiln, "compile", onnx_path, "-o", art, "--threads", str(args.threads), "--quiet"],
                           check=True)
            compile_s = time.perf_counter() - t0
            # correctness: kiln's outputs against onnxruntime's on the same inputs
            out_npz = os.path.join(tmp, name + ".out.npz")
            subprocess.run([kiln, "run", art, "--inputs", inputs_path, "--output", out_npz, "--quiet",
                            "--threads", str(args.threads)], check=True)
            feeds = dict(np.load(inputs_path))
            sess = ort_session(onnx_path, args.threads)
            ref = sess.run(None, feeds)
            got = np.load(out_npz)
            match = True
            worst = 0.0
            for o, r in zip(sess.get_outputs(), ref):
                g = got[o.name]
                err = np.abs(g.astype(np.float64) - r.astype(np.float64))
                worst = max(worst, float(err.max()) if err.size else 0.0)
                match &= bool(np.all(err <= 1e-4 + 1e-3 * np.abs(r)))
            ok_all &= match
            # timing, kiln first then onnxruntime, on the same inputs
            kb = subprocess.run([kiln, "bench", art, "--inputs", inputs_path, "--threads", str(args.threads),
                                 "--warmup", str(args.warmup), "--iterations", str(args.iterations), "--json"],
                                check=True, capture_output=True, text=True)
            k = json.loads(kb.stdout)
            lat = time_ort(sess, feeds, args.warmup, args.iterations)
            o_med = pct(lat, 0.5) * 1e3
            rows.append((name, compile_s, k["min_ms"], k["median_ms"], k["p90_ms"], pct(lat, 0) * 1e3, o_med,
                         pct(lat, 0.9) * 1e3, k["median_ms"] / o_med, "yes" if match else "NO (max err %.3g)" % worst,
                         k.get("fallback_nodes", 0)))
    print("\nCPU, %d threads, fp32, batch 1: kiln (c target) vs onnxruntime %s, median of %d runs after %d warm-up"
          % (args.threads, ort.__version__, args.iterations, args.warmup))
    hdr = "%-12s %9s %9s %9s %9s %9s %9s %9s %7s %8s %s" % ("model", "compile_s", "kiln_min", "kiln_med", "kiln_p90",
                                                          "ort_min", "ort_med", "ort_p90", "ratio", "fallback",
                                                          "outputs match")
    print(hdr)
    for r in rows:
        print("%-12s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7.2f %8d %s" % (r[0], r[1], r[2], r[3], r[4], r[5],
                                                                          r[6], r[7], r[8], r[10], r[9]))
    print("(latencies in ms; ratio = kiln median / onnxruntime median)")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
