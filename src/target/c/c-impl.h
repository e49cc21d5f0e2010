/*
 * c-impl.h: what the `c` target's files share: the emitter state and the
 * per-group emitters (emit_*.c).
 */
#ifndef KILN_TARGET_C_IMPL_H
#define KILN_TARGET_C_IMPL_H

#include "target/target.h"

typedef struct c_emitter {
    const ir_graph *g;
    const sched_program *p;
    const target_options *o;
    base_diag *d;
    base_str ops;      /* the rOperator functions */
    base_str decls;    /* file-scope parameter structs */
    base_str init;     /* body of init_program(): rTask counts, tiles, packed offsets */
    base_str prep;     /* body of prepare(): weight packing */
    int n_packed;      /* packed-weight slots */
    target_output *out;
} c_emitter;

/* C expression for a pointer of C type `ctype` to v's data, into buf. */
const char *c_ptr(const c_emitter *e, const ir_value *v, const char *ctype, char *buf, size_t n);
/* Drops dims of size 1 and merges neighbours that every one of the n
 * stride arrays walks contiguously; returns the new rank (at least 1; a
 * single element gets stride scalar_stride). */
int c_collapse(int rank, int64_t *dims, int n, int64_t **str, int64_t scalar_stride);
/* Pads before the spatial dims for auto_pad SAME_UPPER / SAME_LOWER / VALID
 * (2-D): pt, pl updated in place; NOTSET leaves them. */
void c_auto_pads(const ir_node *n, const int64_t *in_hw, const int64_t *out_hw, const int64_t *k_hw,
                 const int64_t *stride, const int64_t *dil, int64_t *pt, int64_t *pl);
/* A float as an exact C literal (hex float, INFINITY, NAN), into buf. */
const char *c_float_lit(double v, char *buf, size_t n);
/* C element type of a dtype ("float", "int64_t", ...); NULL when the
 * generated code does not handle it. */
const char *c_type(kiln_dtype t);

/* Each emitter appends to e->ops (and decls/init/prep) the rOperator
 * `op_<grp->id>` and sets the stage's rTask count (a constant, or a
 * variable set in init: see c_stage_count). */
kiln_status c_emit_conv(c_emitter *e, const sched_group *grp);
kiln_status c_emit_gemm(c_emitter *e, const sched_group *grp);
kiln_status c_emit_pool(c_emitter *e, const sched_group *grp);
kiln_status c_emit_rows(c_emitter *e, const sched_group *grp);
kiln_status c_emit_elementwise(c_emitter *e, const sched_group *grp);
kiln_status c_emit_move(c_emitter *e, const sched_group *grp);

/* Support tests, by group kind (emit_*.c). */
bool c_can_contract(const ir_node *n);
bool c_can_pool(const ir_node *n);
bool c_can_rows(const ir_node *n);
bool c_can_elementwise(const ir_node *n);
bool c_can_move(const ir_node *n);

/* The kernel templates and the ABI header, as text (build/gen/kc_sources.c,
 * made from src/target/c/kernels/ and src/runtime/cprog.h by tools/embed.c). */
typedef struct c_source {
    const char *name;
    const char *text;
} c_source;
extern const c_source c_kernel_sources[];
extern const int c_kernel_sources_count;

/* The ISA the code is built for on this machine ("avx512", "avx2" or
 * "generic") and the matching -march flag. */
const char *c_isa_level(const char **march);

/* Writes the generated source and the kernels into dir and builds the
 * shared object; compiled kernels are cached by content and flags.
 * OUT: *so (base_malloc'd), *n. */
kiln_status c_build_shared_object(const char *src, const target_options *o, void **so, size_t *n, base_diag *d);

#endif
