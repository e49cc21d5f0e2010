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

/* Serializes a self-contained ONNX model computing `n_nodes` nodes of g (in the order given, which
 * must be topological): graph inputs are `inputs` (values read by the nodes but produced outside
 * them, with their dtype and static shape), graph outputs are `outputs`; constant values the nodes
 * read (initializers or folded values: v->is_const) become initializers unless they are listed in
 * inputs. Attributes of every kind are written back, including subgraphs (If/Loop/Scan bodies,
 * whose reads of enclosing-graph values must resolve: values of enclosing graphs that a subgraph
 * reads and that are not produced inside the exported nodes become graph inputs or initializers of
 * the exported model). opset: g's opset (and other domains used by the nodes with their opsets).
 * OUT: *buf (base_malloc'd, base_free it), *n. */
kiln_status onnx_export_nodes(const ir_graph *g, ir_node *const *nodes, int n_nodes,
                              ir_value *const *inputs, int n_inputs, ir_value *const *outputs,
                              int n_outputs, void **buf, size_t *n, base_diag *d);
/* The whole graph: every node, the graph's inputs and outputs. */
kiln_status onnx_export_graph(const ir_graph *g, void **buf, size_t *n, base_diag *d);

#endif
