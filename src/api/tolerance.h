/*
 * tolerance.h: the per-dtype tolerances every comparison of a target with
 * the reference interpreter uses (kiln verify, conformance through a
 * target, model tests): |got - want| <= atol + rtol * |want|; integers and
 * bools compare exactly. Under 16-bit storage an element may instead be off
 * by up to scale * rms(want): every operand of a K-long sum is rounded, so a
 * contraction's error follows the output tensor's scale, and outputs near
 * zero of a sum of large terms miss the per-element bound while the tensor
 * as a whole is right (a wrong sum is off by about rms(want) itself).
 */
#ifndef KILN_API_TOLERANCE_H
#define KILN_API_TOLERANCE_H

#include "ir/ir.h"

typedef struct api_tolerance {
    double rtol, atol;
    double scale; /* 16-bit storage: the bound relative to the tensor's rms (0: none) */
} api_tolerance;

api_tolerance api_tolerance_for(kiln_dtype t);
/* The tolerance for a float output of dtype t computed with 16-bit storage
 * (precision "fp16" / "bf16", the cuda target's --precision): the looser of
 * t's and the storage type's. NULL or "fp32": api_tolerance_for(t). */
api_tolerance api_tolerance_for_precision(kiln_dtype t, const char *precision);

/* Compares got with want (same dtype and shape required); fills the
 * largest absolute and relative errors and the count of elements outside
 * the tolerance. */
typedef struct api_compare {
    double max_abs, max_rel;
    int64_t n_bad, first_bad;
    bool shape_ok;
} api_compare;

api_compare api_compare_tensors(const ir_tensor *got, const ir_tensor *want, api_tolerance tol);

#endif
