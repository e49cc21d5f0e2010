/*
 * interp_ops.h: prototypes of every interpreter entry named in ops.def.
 * Included by the interp_*.c files and by ops.c, which builds ir_ops[].
 */
#ifndef KILN_IR_INTERP_OPS_H
#define KILN_IR_INTERP_OPS_H

#include "ir/interp.h"

#define X(id, name, min_in, max_in, min_out, max_out, flags, eval) kiln_status eval(ir_eval *e);
#include "ir/ops.def"
#undef X

#endif
