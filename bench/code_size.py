#!/usr/bin/env python3
"""How much GPU code a model's CUDA program holds, kernel by kernel and body
by body (no GPU needed):

    python3 bench/code_size.py MODEL.onnx [--schedule mono] [--precision fp16] [--arch sm_90a]
                               [--kiln build/kiln] [--keep DIR] [--json FILE]

Compiles MODEL with `kiln compile --target cuda --emit-source`, builds the
generated model.cu with nvcc for one architecture, and reads the cubin's
symbols (readelf): each kernel's code, and inside it each function it calls.
Under the mono schedules those are the shared rOperator bodies (`opb_<k>`,
share.c): the table says how many groups call each body and names the
first. The kernel's own code (its stage loops, waits, signals, the calls,
and the bodies with warpgroup MMAs, which are inlined where the kernel
calls them) is the kernel's size less the functions in its section.

Why it matters: a persistent kernel runs each body once a layer on a block,
so its code is fetched cold (docs/architecture.md, "Cold rTasks"); smaller
bodies measured faster there.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_tool(name):
    """A CUDA toolkit binary: $CUDA_HOME/bin, then PATH, then /usr/local/cuda/bin."""
    home = os.environ.get("CUDA_HOME")
    if home and os.access(os.path.join(home, "bin", name), os.X_OK):
        return os.path.join(home, "bin", name)
    found = shutil.which(name)
    if found:
        return found
    fallback = os.path.join("/usr/local/cuda/bin", name)
    return fallback if os.access(fallback, os.X_OK) else None


def run(cmd, what):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit("code_size: %s failed (exit %d):\n%s" % (what, proc.returncode, proc.stdout[-4000:]))
    return proc.stdout


def sections(readelf_out):
    """{section index: (name, size)} of the .text sections (readelf -SW)."""
    out = {}
    for line in readelf_out.splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\.text\.\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            out[int(m.group(1))] = (m.group(2), int(m.group(3), 16))
    return out


def functions(readelf_out):
    """[(section index, size, name)] of the FUNC symbols (readelf -sW)."""
    out = []
    for line in readelf_out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[6].isdigit():
            out.append((int(f[6]), int(f[2]), f[7]))
    return out


def plain_name(symbol):
    """The function's own identifier: the last name of a mangled nested
    name (_ZN33_INTERNAL_..._k_013kg_waits_exitEPjj: kg_waits_exit), without
    the $kernel$ prefix nvcc gives a kernel's callees."""
    symbol = re.sub(r"^\$[^$]*\$", "", symbol)
    if not symbol.startswith("_ZN"):
        return symbol
    i, last = 3, symbol
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while symbol[j].isdigit():
            j += 1
        n = int(symbol[i:j])
        last, i = symbol[j:j + n], j + n
    return last


def launch_order(section):
    """Sort key of a .text section: kernels k_<first group> in the groups' order, then the rest by name."""
    m = re.match(r"\.text\.k_(\d+)$", section)
    return (0, int(m.group(1)), "") if m else (1, 0, section)


def body_users(source):
    """{body index k: [group ids whose op_<id> calls opb_<k>]} and {group id: name}, from model.cu."""
    users, names = {}, {}
    for m in re.finditer(r"void op_(\d+)\([^)]*\)\s*\{\s*opb_(\d+)\(", source):
        users.setdefault(int(m.group(2)), []).append(int(m.group(1)))
    for m in re.finditer(r"/\* group (\d+) \((\w+)[^)]*\): ([^\n]*?) \*/", source):
        names[int(m.group(1))] = (m.group(2), m.group(3))
    return users, names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="the ONNX model")
    ap.add_argument("--schedule", default="mono", help="kiln's --schedule (default mono)")
    ap.add_argument("--precision", default="fp16", help="kiln's --precision (default fp16)")
    ap.add_argument("--arch", default="sm_90a", help="nvcc's -arch (default sm_90a)")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"), help="the kiln binary")
    ap.add_argument("--keep", help="keep model.cu and the cubin in this folder (default: a temporary one)")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    if not os.path.exists(a.model):
        sys.exit("code_size: no model at %s" % a.model)
    if not os.access(a.kiln, os.X_OK):
        sys.exit("code_size: no kiln binary at %s (make build/kiln, or --kiln PATH)" % a.kiln)
    nvcc, readelf = find_tool("nvcc"), shutil.which("readelf")
    if not nvcc:
        sys.exit("code_size: nvcc not found (set CUDA_HOME or put the CUDA toolkit's bin on PATH)")
    if not readelf:
        sys.exit("code_size: readelf not found (Debian: apt-get install binutils)")
    work = a.keep or tempfile.mkdtemp(prefix="kiln-code-size-")
    os.makedirs(work, exist_ok=True)
    try:
        report(a, work, nvcc, readelf)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(a, work, nvcc, readelf):
    """Compiles a.model into work, builds and reads its cubin, prints (and with --json writes) the sizes."""
    run([a.kiln, "compile", a.model, "--target", "cuda", "--precision", a.precision, "--schedule", a.schedule,
         "--emit-source", work, "-o", os.path.join(work, "model.kiln"), "--quiet"], "kiln compile")
    cu, cubin = os.path.join(work, "model.cu"), os.path.join(work, "model.cubin")
    run([nvcc, "-arch=" + a.arch, "-cubin", "-w", "-o", cubin, cu], "nvcc")
    secs = sections(run([readelf, "-SW", cubin], "readelf -S"))
    funcs = functions(run([readelf, "-sW", cubin], "readelf -s"))
    with open(cu) as f:
        users, names = body_users(f.read())

    result = {"model": a.model, "schedule": a.schedule, "precision": a.precision, "arch": a.arch, "kernels": []}
    print("%s, --schedule %s --precision %s, %s code:" % (os.path.basename(a.model), a.schedule, a.precision, a.arch))
    total = 0
    for idx in sorted(secs, key=lambda i: launch_order(secs[i][0])):
        sec, size = secs[idx]
        kernel = sec[len(".text."):]
        inner = [(s, n) for i, s, n in funcs if i == idx and n != kernel and s > 0]
        own = size - sum(s for s, _ in inner)
        total += size
        bodies = []
        for s, n in sorted(inner, reverse=True):
            m = re.search(r"opb_(\d+)", n)
            k = int(m.group(1)) if m else None
            who = users.get(k, []) if k is not None else []
            kind, name = names.get(who[0], ("", "")) if who else ("", "")
            bodies.append({"function": ("opb_%d" % k) if k is not None else plain_name(n), "bytes": s,
                           "groups": len(who), "kind": kind, "first": name})
        result["kernels"].append({"kernel": kernel, "bytes": size, "own_bytes": own, "functions": bodies})
        print("  kernel %s: %.1f KB, of which its own code %.1f KB and %d functions %.1f KB" % (
            kernel, size / 1024, own / 1024, len(inner), (size - own) / 1024))
        for b in bodies:
            if b["groups"]:
                print("    %-10s %7.1f KB  %3d group%s  %-9s %s" % (b["function"], b["bytes"] / 1024, b["groups"],
                                                                   "" if b["groups"] == 1 else "s", b["kind"],
                                                                   b["first"][:70]))
            else:
                print("    %-10s %7.1f KB  (helper)" % (b["function"][:40], b["bytes"] / 1024))
    result["bytes"] = total
    print("  in all %.1f KB in %d kernel%s" % (total / 1024, len(secs), "" if len(secs) == 1 else "s"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
