/*
 * pending.c: weak placeholders for the cuda target's parts still being
 * written in parallel, so the tree links meanwhile. Each real definition
 * overrides its placeholder; this file is deleted when all have landed.
 */
#include "target/cuda/cuda-impl.h"

#include "kiln_rt.h"

#define PENDING(what) base_diag_add(e->d, KILN_ERR_UNSUPPORTED, "cuda target: %s not built yet", what)

__attribute__((weak)) bool cg_can_contract(const ir_node *n) { (void)n; return false; }
__attribute__((weak)) bool cg_can_pool(const ir_node *n) { (void)n; return false; }
__attribute__((weak)) bool cg_can_rows(const ir_node *n) { (void)n; return false; }
__attribute__((weak)) bool cg_can_elementwise(const ir_node *n) { (void)n; return false; }
__attribute__((weak)) bool cg_can_move(const ir_node *n) { (void)n; return false; }
__attribute__((weak)) kiln_status cg_emit_conv(cg_emitter *e, const sched_group *g, cg_op *o) { (void)g; (void)o; return PENDING("conv"); }
__attribute__((weak)) kiln_status cg_emit_gemm(cg_emitter *e, const sched_group *g, cg_op *o) { (void)g; (void)o; return PENDING("gemm"); }
__attribute__((weak)) kiln_status cg_emit_pool(cg_emitter *e, const sched_group *g, cg_op *o) { (void)g; (void)o; return PENDING("pool"); }
__attribute__((weak)) kiln_status cg_emit_rows(cg_emitter *e, const sched_group *g, cg_op *o) { (void)g; (void)o; return PENDING("rows"); }
__attribute__((weak)) kiln_status cg_emit_elementwise(cg_emitter *e, const sched_group *g, cg_op *o) { (void)g; (void)o; return PENDING("elementwise"); }
__attribute__((weak)) kiln_status cg_emit_move(cg_emitter *e, const sched_group *g, cg_op *o) { (void)g; (void)o; return PENDING("move"); }
__attribute__((weak)) int cg_tune_choose(cg_emitter *e, const sched_group *g, const char *k, int n, cg_emit_cand_fn f) { (void)e; (void)g; (void)k; (void)n; (void)f; return -1; }
__attribute__((weak)) kiln_status cg_tuner_open(cg_emitter *e, const void *w, cg_tuner **out, base_diag *d) { (void)e; (void)w; (void)d; *out = NULL; return KILN_OK; }
__attribute__((weak)) void cg_tuner_close(cg_tuner *t) { (void)t; }
__attribute__((weak)) kiln_status rt_gprog_encode(const rt_gprog *p, void **buf, size_t *n, base_diag *d) { (void)p; (void)buf; (void)n; return base_diag_add(d, KILN_ERR_UNSUPPORTED, "gprog encoder not built yet"); }
__attribute__((weak)) const char *rt_gprec_name(kiln_gprec p) { return p == KILN_GPREC_FP16 ? "fp16" : p == KILN_GPREC_BF16 ? "bf16" : "fp32"; }
__attribute__((weak)) const char *kiln_rt_target(const kiln_rt_model *m) { (void)m; return "c"; }
