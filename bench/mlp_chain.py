#!/usr/bin/env python3
"""A chain of transformer-style MLP blocks as an ONNX model, for timing the
CUDA schedules on products alone (random weights, seed 0; nothing is
downloaded):

    python3 bench/mlp_chain.py OUT.onnx [--layers 12] [--rows 197] [--dim 768] [--hidden 3072]

Each block is y = x + (relu(x W1 + b1) W2 + b2): two MatMuls with their
epilogues, the second with the residual. The input is float32 [1, rows,
dim], so under --precision fp16 the first product reads a float32 graph
input (SIMT tiles) and the rest 16-bit activations (tensor-core tiles).
Then, for each schedule S:

    kiln compile OUT.onnx --target cuda --precision fp16 --schedule S -o S.kiln
    kiln bench S.kiln --device-io --iterations 300
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(layers, rows, dim, hidden):
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits += [
            numpy_helper.from_array((rng.standard_normal((dim, hidden)) * 0.02).astype(np.float32), f"w1_{i}"),
            numpy_helper.from_array(np.zeros(hidden, np.float32), f"b1_{i}"),
            numpy_helper.from_array((rng.standard_normal((hidden, dim)) * 0.02).astype(np.float32), f"w2_{i}"),
            numpy_helper.from_array(np.zeros(dim, np.float32), f"b2_{i}"),
        ]
        nodes += [
            helper.make_node("MatMul", [x, f"w1_{i}"], [f"h{i}"]),
            helper.make_node("Add", [f"h{i}", f"b1_{i}"], [f"hb{i}"]),
            helper.make_node("Relu", [f"hb{i}"], [f"r{i}"]),
            helper.make_node("MatMul", [f"r{i}", f"w2_{i}"], [f"o{i}"]),
            helper.make_node("Add", [f"o{i}", f"b2_{i}"], [f"ob{i}"]),
            helper.make_node("Add", [f"ob{i}", x], [f"y{i}"]),
        ]
        x = f"y{i}"
    graph = helper.make_graph(nodes, "mlp_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, dim])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, rows, dim])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the ONNX file to write")
    ap.add_argument("--layers", type=int, default=12, help="MLP blocks (default 12)")
    ap.add_argument("--rows", type=int, default=197, help="rows of the input (default 197, ViT-B/16's tokens)")
    ap.add_argument("--dim", type=int, default=768, help="model width (default 768)")
    ap.add_argument("--hidden", type=int, default=3072, help="hidden width (default 3072)")
    a = ap.parse_args()
    if min(a.layers, a.rows, a.dim, a.hidden) < 1:
        ap.error("--layers, --rows, --dim and --hidden must be at least 1")
    onnx.save(build(a.layers, a.rows, a.dim, a.hidden), a.out)
    print("%s: %d MLP blocks, input [1, %d, %d], hidden %d" % (a.out, a.layers, a.rows, a.dim, a.hidden))


if __name__ == "__main__":
    main()
