#!/usr/bin/env python3
"""Where a persistent kernel loses to the kernels of the waves schedule, group
by group (run on the GPU machine, from the repository root):

    python3 bench/stage_compare.py MODEL.onnx [--precision fp16] [--mono mono:256x1]
                                   [--iterations 50] [--kiln bundle/kiln] [--workdir DIR]
    python3 bench/stage_compare.py --waves-json W.json --mono-json M.json

It compiles MODEL for --schedule waves and for the mono schedule, profiles
both with `kiln bench --profile --json --device-io` (the runtime times each
waves launch with CUDA events, and each member of the persistent kernel from
inside it: when its rTasks began and ended, and their mean work and wait), and
prints one line per group of the persistent kernel in program order:

    waves    the time of the waves launch that runs the group (a launch of
             several groups: its time, marked '*', on each of them)
    span     from the group's first rTask's start to its last one's end
    rtask    its rTasks' mean work; wait: their mean wait for producers
    gap      from the latest end of an earlier member (in program order) that
             ended before it began, to its start
    +/-      span - waves

then the sums. The stages of a persistent kernel overlap, so the spans add up
to more than the kernel's time; the gaps and the +/- column say where the
persistent kernel's time goes that the kernels of the waves schedule do not
spend. --waves-json / --mono-json read profiles saved before instead.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("stage_compare: %s failed (%d): %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout)[-2000:]))
    return p.stdout


def profile(kiln, onnx_path, schedule, precision, iterations, work):
    art = os.path.join(work, "model.%s.kiln" % schedule.replace(":", "_"))
    run([kiln, "compile", onnx_path, "-o", art, "--target", "cuda", "--precision", precision, "--schedule", schedule,
         "--quiet"])
    out = run([kiln, "bench", art, "--device-io", "--iterations", str(iterations), "--profile", "--json"])
    return json.loads(out)


def compare(waves, mono):
    """Lines (dicts) for the persistent kernel's members, in program order."""
    launches = []
    for s in waves["profile"]["stages"]:
        names = s["name"].split(" | ")
        launches.append((names, s["run_us"] + s["wait_us"]))
    by_group = {}
    for names, us in launches:
        for n in names:
            by_group[n] = (us, len(names) > 1)
    rows, ends = [], []
    for s in mono["profile"]["stages"]:
        if "start_us" not in s:  # a launch of its own (a kernel of one stage, a host segment)
            continue
        w = by_group.get(s["name"])
        span = s["end_us"] - s["start_us"]
        before = [e for e in ends if e <= s["start_us"]]
        rows.append({"name": s["name"], "rtasks": s["rtasks"], "waves": w[0] if w else None,
                     "shared": bool(w and w[1]), "span": span, "rtask": s["rtask_us"], "wait": s["rtask_wait_us"],
                     "gap": s["start_us"] - max(before) if before else None})
        ends.append(s["end_us"])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="the ONNX model")
    ap.add_argument("--precision", default="fp16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--mono", default="mono", help="the persistent schedule (default mono; e.g. mono:256x1)")
    ap.add_argument("--iterations", type=int, default=50, help="profiled runs (default 50)")
    ap.add_argument("--kiln", default=os.path.join("bundle", "kiln"), help="the kiln binary (default bundle/kiln)")
    ap.add_argument("--workdir", help="where the artifacts go (default: a new temporary folder)")
    ap.add_argument("--waves-json", help="a saved `kiln bench --profile --json` of the waves artifact")
    ap.add_argument("--mono-json", help="the same of the mono artifact")
    a = ap.parse_args()
    if a.waves_json or a.mono_json:
        if not (a.waves_json and a.mono_json):
            ap.error("--waves-json and --mono-json go together")
        with open(a.waves_json) as f:
            waves = json.load(f)
        with open(a.mono_json) as f:
            mono = json.load(f)
    else:
        if not a.model:
            ap.error("a MODEL, or --waves-json and --mono-json")
        work = a.workdir or tempfile.mkdtemp(prefix="stage_compare.")
        waves = profile(a.kiln, a.model, "waves", a.precision, a.iterations, work)
        mono = profile(a.kiln, a.model, a.mono, a.precision, a.iterations, work)
    for name, d in (("waves", waves), ("mono", mono)):
        if "profile" not in d:
            sys.exit("stage_compare: the %s profile has no stages (kiln bench --profile --json)" % name)
    rows = compare(waves, mono)
    if not rows:
        sys.exit("stage_compare: the mono artifact has no persistent kernel")
    print("%-60s %6s %8s %8s %8s %7s %6s %8s" % ("group", "rTasks", "waves", "span", "rtask", "wait", "gap", "+/-"))
    tot = {"waves": 0.0, "span": 0.0, "gap": 0.0}
    for r in rows:
        waves_us = "%7.1f%s" % (r["waves"], "*" if r["shared"] else " ") if r["waves"] is not None else "       -"
        delta = "%8.1f" % (r["span"] - r["waves"]) if r["waves"] is not None else "       -"
        gap = "%6.1f" % r["gap"] if r["gap"] is not None else "     -"
        print("%-60.60s %6d %s %8.1f %8.2f %7.2f %s %s" % (r["name"], r["rtasks"], waves_us, r["span"], r["rtask"],
                                                          r["wait"], gap, delta))
        if r["waves"] is not None and not r["shared"]:
            tot["waves"] += r["waves"]
        tot["span"] += r["span"]
        tot["gap"] += r["gap"] or 0.0
    print("groups %d; waves launches (unshared) %.1f us, mono spans %.1f us, gaps %.1f us" %
          (len(rows), tot["waves"], tot["span"], tot["gap"]))
    print("per run: waves %.1f us over %d launches, mono %.1f us (kiln bench --profile, profiled runs)" %
          (waves["profile"]["total_us"], len(waves["profile"]["stages"]), mono["profile"]["total_us"]))


if __name__ == "__main__":
    main()
