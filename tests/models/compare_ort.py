#!/usr/bin/env python3
"""Checks kiln's outputs for a model against onnxruntime's.

    python3 tests/models/compare_ort.py MODEL.onnx INPUTS.npz KILN_OUTPUT.npz [--rtol R --atol A]

Runs onnxruntime (CPU) on INPUTS.npz (keys: graph input names), then compares
every graph output with the array of the same name in KILN_OUTPUT.npz:
shape, dtype kind, and |kiln - ort| <= atol + rtol * |ort| elementwise
(numpy.allclose's rule; NaNs must match). Prints the max abs and max rel
error per output and PASS/FAIL; exits 0 when every output passes, 1 on a
mismatch, 2 on a usage or file problem.

--write-ort OUT.npz writes onnxruntime's own outputs in kiln's format
(for testing this script, or as a reference for other tools).
"""
import argparse
import sys

import numpy as np


def die(msg):
    print("compare_ort.py: " + msg, file=sys.stderr)
    sys.exit(2)


def run_ort(model_path, inputs_path):
    try:
        import onnxruntime as ort
    except ImportError:
        die("onnxruntime is not importable by %s (pip install onnxruntime)" % sys.executable)
    opts = ort.SessionOptions()
    # The reference should be the plain graph, not onnxruntime's fused kernels.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    try:
        sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        die("onnxruntime cannot load %s: %s" % (model_path, e))
    try:
        with np.load(inputs_path, allow_pickle=False) as z:
            given = {k: z[k] for k in z.files}
    except Exception as e:
        die("cannot read %s: %s" % (inputs_path, e))
    feeds = {}
    for i in sess.get_inputs():
        if i.name not in given:
            die("%s has no input '%s' (has: %s)" % (inputs_path, i.name, ", ".join(given) or "none"))
        feeds[i.name] = given[i.name]
    unused = set(given) - set(feeds)
    if unused:
        print("note: inputs not used by the model: " + ", ".join(sorted(unused)))
    names = [o.name for o in sess.get_outputs()]
    return names, dict(zip(names, sess.run(names, feeds)))


def compare(name, got, want, rtol, atol):
    """One line describing the comparison, and whether it passed."""
    if got.shape != want.shape:
        return "shape %s, expected %s" % (list(got.shape), list(want.shape)), False
    if got.dtype != want.dtype:
        # kiln may return an equivalent type (bool as u1...); compare values, say so.
        note = " (dtype %s, expected %s)" % (got.dtype, want.dtype)
        if got.dtype.kind != want.dtype.kind and not (
                {got.dtype.kind, want.dtype.kind} <= {"b", "u", "i"}):
            return "dtype %s, expected %s" % (got.dtype, want.dtype), False
    else:
        note = ""
    if want.size == 0:
        return "empty" + note, True
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan_ok = np.array_equal(np.isnan(g), np.isnan(w))
    finite = ~(np.isnan(g) | np.isnan(w))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(g - w), 0.0)
        diff = np.where(np.isinf(g) & np.isinf(w) & (g == w), 0.0, diff)  # equal infinities
        rel = diff / np.maximum(np.abs(w), np.finfo(np.float64).tiny)
        bad = finite & ~(diff <= atol + rtol * np.abs(w))
    n_bad = int(bad.sum())
    worst = int(np.argmax(diff)) if diff.size else 0
    text = "max abs %.3g, max rel %.3g" % (float(diff.max()), float(rel.max()))
    if n_bad:
        idx = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), want.shape)
        text += ", %d of %d elements off (worst at %s: kiln %.7g, ort %.7g)" % (
            n_bad, want.size, list(map(int, idx)), g[idx], w[idx])
    elif diff.size and diff.max() > 0:
        idx = np.unravel_index(worst, want.shape)
        text += " (at %s)" % list(map(int, idx))
    if not nan_ok:
        text += ", NaN positions differ"
    return text + note, n_bad == 0 and nan_ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("inputs")
    ap.add_argument("kiln_output", nargs="?")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--write-ort", metavar="OUT.npz",
                    help="write onnxruntime's outputs to OUT.npz instead of comparing")
    a = ap.parse_args()
    if not a.kiln_output and not a.write_ort:
        ap.error("KILN_OUTPUT.npz is required (or --write-ort OUT.npz)")

    names, ref = run_ort(a.model, a.inputs)
    if a.write_ort:
        np.savez(a.write_ort, **ref)
        print("wrote %s (%s)" % (a.write_ort, ", ".join(names)))
        if not a.kiln_output:
            return 0

    try:
        with np.load(a.kiln_output, allow_pickle=False) as z:
            got = {k: z[k] for k in z.files}
    except Exception as e:
        die("cannot read %s: %s" % (a.kiln_output, e))

    ok = True
    for name in names:
        if name not in got:
            print("FAIL %s: missing from %s" % (name, a.kiln_output))
            ok = False
            continue
        text, passed = compare(name, got[name], ref[name], a.rtol, a.atol)
        print("%s %s %s: %s" % ("PASS" if passed else "FAIL", name, list(ref[name].shape), text))
        ok &= passed
    extra = sorted(set(got) - set(names))
    if extra:
        print("note: %s has arrays that are not graph outputs: %s" % (a.kiln_output, ", ".join(extra)))
    print("%s (rtol %g, atol %g)" % ("PASS" if ok else "FAIL", a.rtol, a.atol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
