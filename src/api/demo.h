/*
 * demo.h: the embedded default model that `kiln run` uses when no model is
 * given (the README's main-job command).
 */
#ifndef KILN_API_DEMO_H
#define KILN_API_DEMO_H

#include "ir/ir.h"

/* A serialized ONNX model (a small CNN on 1x3x32x32 images, input "image",
 * output "probs"). OUT: *out, base_free it. */
kiln_status api_demo_model(void **out, size_t *n_bytes);

#endif
