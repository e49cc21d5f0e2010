/*
 * params.h: constant parameters of ops as the reference interpreter reads
 * them, shared by the passes (pass/partition.c composes views through
 * Slices and Gathers) and the targets (target/move_params.c).
 */
#ifndef KILN_IR_PARAMS_H
#define KILN_IR_PARAMS_H

#include "ir/ir.h"

/* axis in [-rank, rank) as a dim index; -1 when out of range. */
int ir_norm_axis(int64_t axis, int rank);
/* The integers of a constant scalar or 1-D integer tensor; false when v is
 * not one or holds more than max. OUT: out[0..*n). */
bool ir_const_ints(const ir_value *v, int max, int64_t *out, int *n);
/* The list from constant input i, or else from the attribute; *count = -1
 * when neither is there. False when the input is there but not constant. */
bool ir_node_ints(const ir_node *n, int i, const char *attr, int max, int64_t *out, int *count);
/* Slice along a dim of extent d from s to t (exclusive) by step p (not 0),
 * as ONNX clamps them: the first index taken; *count: how many. */
int64_t ir_slice_range(int64_t d, int64_t s, int64_t t, int64_t p, int64_t *count);
/* Slice's start and step per input dim (unsliced: 0, 1); false when the
 * parameters are not constant or do not give the inferred output shape. */
bool ir_slice_params(const ir_node *n, int64_t *start, int64_t *step);

#endif
