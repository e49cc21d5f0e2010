/*
 * onnx.h: reading ONNX models and tensors into kiln's IR.
 *
 * Everything read is validated before use: tensor byte sizes against dims and
 * dtype, element-count overflow, negative or absurd dims, attribute types,
 * dangling and cyclic references, and external-data paths, which must stay
 * inside the model's folder. Problems are collected in the diagnostics, all
 * of them at once.
 */
#ifndef KILN_ONNX_H
#define KILN_ONNX_H

#include "ir/ir.h"

/* Newest default-domain opset kiln reads (Debian's onnx 1.12 knows 17;
 * opset-18 forms of Reduce/Pad/Split inputs are handled as well). */
#define ONNX_MAX_OPSET 18

/* Loads a model file. OUT: *out, free with ir_model_free. Unsupported ops do
 * not fail loading (kiln inspect lists them); ir_graph_check_support does. */
kiln_status onnx_load_file(const char *path, ir_model **out, base_diag *d);

/* Loads a model from memory. External data is resolved against base_dir;
 * base_dir NULL rejects external data. */
kiln_status onnx_load_buffer(const void *buf, size_t n, const char *base_dir, ir_model **out, base_diag *d);

/* Reads a serialized TensorProto file (the conformance suite's input_0.pb).
 * OUT: *out (owned data), *name (malloc'd, may be NULL when unnamed). */
kiln_status onnx_read_tensor_file(const char *path, ir_tensor *out, char **name, base_diag *d);

/* Every node of g (and its subgraphs) whose op kiln does not support, listed
 * in one error: node name, op type and why. KILN_OK when there are none. */
kiln_status onnx_check_support(const ir_graph *g, base_diag *d);

#endif
