#!/usr/bin/env python3
"""kiln's GEMM templates against cuBLAS (through torch.matmul), in one run,
on the same shapes and layouts.

    python3 bench/gpu_gemm.py [--bin build/gpu_gemm] [--shapes NAME,...] [--csv FILE] [gpu_gemm options]

Runs build/gpu_gemm (bench/gpu_gemm.c: every candidate configuration of each
shape, checked against a host reference and timed), reads its RESULT lines,
then times torch.matmul on the same shapes the same way: a CUDA graph of
repeated launches between events, median of 5 replays, inputs uniform in
[-1, 1). fp16 and bf16 shapes compare with cuBLAS in that dtype; the float32
one with cuBLAS SGEMM (TF32 off). The epilogue shapes (bias + GELU,
bias + residual) compare with torch.matmul alone, so their ratios show
what the fused epilogue costs. The conv_ shapes (convolutions, whose A
kiln reads from x through an im2col tensor map) compare with cuBLAS's
product of the same m, n and k, its A an im2col matrix already stored.
Prints a table: TFLOP/s of kiln's heuristic choice, of the fastest candidate
(what --tune finds), of cuBLAS, and the ratios kiln / cuBLAS.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def operands(r):
    """A [batch, m, k] and B [batch, k, n] as views of tensors stored in the
    shape's layouts (la / lb 1: m / n contiguous), like kiln's operands."""
    dt = DTYPES[r["dtype"]]
    b, m, n, k = r["batch"], r["m"], r["n"], r["k"]
    def uni(*shape):
        return torch.empty(*shape, device="cuda", dtype=dt).uniform_(-1, 1)
    a = uni(b, k, m).transpose(1, 2) if r["la"] else uni(b, m, k)
    bb = uni(b, n, k).transpose(1, 2) if not r["lb"] else uni(b, k, n)
    if b == 1:
        a, bb = a[0], bb[0]
    return a, bb


def time_us(fn, reps_hint=None):
    """Microseconds per call of fn: a CUDA graph of reps calls, median of 5 replays."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    one = max(start.elapsed_time(end) * 1e3, 1.0)
    reps = reps_hint or int(max(1, min(500, 3000.0 / one)))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)
    times.sort()
    return times[2]


def cublas_us(r):
    a, b = operands(r)
    if r["dtype"] == "f32":
        torch.backends.cuda.matmul.allow_tf32 = False
    out = torch.empty(*(a.shape[:-1] + b.shape[-1:]), device="cuda", dtype=a.dtype)
    return time_us(lambda: torch.matmul(a, b, out=out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "gpu_gemm"))
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--heuristic-only", action="store_true")
    args, passed = ap.parse_known_args()
    cmd = [args.bin] + passed
    if args.shapes:
        cmd += ["--shapes", args.shapes]
    if args.csv:
        cmd += ["--csv", args.csv]
    if args.heuristic_only:
        cmd += ["--heuristic-only"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    results = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if line.startswith("RESULT "):
            results.append(json.loads(line[len("RESULT "):]))
    status = proc.wait()
    print(f"\ntorch {torch.__version__}, {torch.cuda.get_device_name()}")
    rows = []
    for r in results:
        flop = 2.0 * r["batch"] * r["m"] * r["n"] * r["k"]
        ref = cublas_us(r)
        tf = lambda us: flop / us * 1e-6 if us > 0 else float("nan")
        rows.append((r["name"], tf(r["heuristic_us"]), tf(r["best_us"]), tf(ref), ref / r["heuristic_us"],
                     ref / r["best_us"], r["heuristic"], r["best"]))
    print(f"\n{'shape':24} {'kiln heur':>10} {'kiln best':>10} {'cuBLAS':>10} {'heur/cuBLAS':>12} "
          f"{'best/cuBLAS':>12}   (TFLOP/s)")
    for name, th, tb, tc, rh, rb, hn, bn in rows:
        print(f"{name:24} {th:10.1f} {tb:10.1f} {tc:10.1f} {rh:12.2f} {rb:12.2f}   heur {hn}; best {bn}")
    sys.exit(status)


if __name__ == "__main__":
    main()
