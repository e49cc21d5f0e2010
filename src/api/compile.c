/*
 * compile.c: the compile driver (DESIGN.md "Data flow"): partition into
 * groups with the target's support test, plan memory, lay out the weights,
 * let the target emit and build the code, and write the artifact with the
 * fallback segments' bindings.
 */
#include "api/compile.h"

#include "runtime/artifact.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

kiln_status api_plan(ir_graph *g, const target *t, const char *schedule, sched_program *p, base_arena *a,
                     base_diag *d)
{
    memset(p, 0, sizeof(*p));
    for (int i = 0; i < g->n_inputs; i++)
        if (!g->inputs[i]->shape_known)
            return base_diag_add(d, KILN_ERR_SHAPE, "input '%s' has no static shape (give one with --shape)",
                                 g->inputs[i]->name);
    for (int i = 0; i < g->n_values; i++) { /* sizes of inferred values */
        ir_value *v = g->values[i];
        if (v->shape_known && !v->is_const) v->t.nbytes = (size_t)ir_numel(&v->t) * ir_dtype_size(v->t.dtype);
    }
    pass_support s = {.can_compile = t->can_compile, .patterns = t->patterns};
    int merged = 0;
    kiln_status st = pass_cse(g, &merged, d);
    if (st == KILN_OK) st = pass_partition(g, &s, p, a, d);
    p->merged_nodes = merged;
    const bool by_wave = t->plan_by_wave && t->plan_by_wave(schedule);
    const int hold = t->plan_hold ? t->plan_hold(schedule) : 0;
    if (st == KILN_OK) st = sched_plan_memory(g, p, a, by_wave, hold, d);
    if (st != KILN_OK) sched_program_free(p);
    return st;
}

/* A value whose shape depends on the data (only model outputs can be: see
 * pass_partition) is described as rank 1, dim -1: known after a run. */
static void type_of(const ir_value *v, kiln_dtype *dtype, int *rank, int64_t *dims)
{
    *dtype = v->t.dtype;
    if (!v->shape_known) {
        *rank = 1;
        dims[0] = -1;
        return;
    }
    *rank = v->t.rank;
    memcpy(dims, v->t.dims, (size_t)v->t.rank * sizeof(int64_t));
}

static kiln_status binding_of(const ir_graph *g, const sched_program *p, const ir_value *v, rt_binding *b,
                              base_diag *d)
{
    memset(b, 0, sizeof(*b));
    const sched_place *pl = &p->place[v->id];
    type_of(v, &b->dtype, &b->rank, b->dims);
    if (!v->shape_known && pl->loc != SCHED_LOC_OUTPUT)
        return base_diag_add(d, KILN_ERR_INTERNAL, "value '%s' of data-dependent shape is not a model output", v->name);
    switch (pl->loc) {
    case SCHED_LOC_ARENA: b->kind = RT_BIND_ARENA; b->offset = pl->offset; break;
    case SCHED_LOC_WEIGHTS: b->kind = RT_BIND_WEIGHTS; b->offset = pl->offset; break;
    case SCHED_LOC_INPUT: b->kind = RT_BIND_INPUT; b->io = (int)pl->offset; break;
    case SCHED_LOC_OUTPUT: b->kind = RT_BIND_OUTPUT; b->io = (int)pl->offset; break;
    default:
        return base_diag_add(d, KILN_ERR_INTERNAL, "value '%s' of graph '%s' has no place", v->name, g->name);
    }
    return KILN_OK;
}

static void info_of(const ir_value *v, kiln_rt_tensor_info *t)
{
    memset(t, 0, sizeof(*t));
    t->name = v->name;
    type_of(v, &t->dtype, &t->rank, t->dims);
    t->nbytes = v->shape_known ? (size_t)ir_numel(&v->t) * ir_dtype_size(v->t.dtype) : 0;
}

kiln_status api_compile(ir_model *m, const api_compile_opts *o, const char *out_path, api_compile_report *rep,
                        base_diag *d)
{
    double t0 = now_s();
    memset(rep, 0, sizeof(*rep));
    ir_graph *g = m->graph;
    const target *t = target_lookup(o->target ? o->target : "c");
    if (!t) return base_diag_add(d, KILN_ERR_INVALID_ARG, "unknown target '%s' (known: c, cuda)", o->target);
    base_arena a;
    base_arena_init(&a);
    sched_program p;
    target_output out = {0};
    void *weights = NULL;
    rt_segment_desc *segs = NULL;
    rt_binding *binds = NULL;
    kiln_rt_tensor_info *ios = NULL;
    kiln_status st = api_plan(g, t, o->schedule, &p, &a, d);
    if (st != KILN_OK) goto done;
    rep->seconds_partition = now_s() - t0;
    for (int i = 0; i < p.n_groups; i++) {
        rep->n_groups_by_kind[p.groups[i]->kind]++;
        if (p.groups[i]->kind == SCHED_GROUP_FALLBACK) rep->n_fallback_nodes += p.groups[i]->n_nodes;
    }
    rep->arena_bytes = p.arena_bytes;
    rep->weight_bytes = p.weight_bytes;
    if (o->progress) {
        char line[256];
        char repeats[64] = "";
        if (p.merged_nodes)
            snprintf(repeats, sizeof(repeats), "; %d repeated node%s left out", p.merged_nodes,
                     p.merged_nodes == 1 ? "" : "s");
        snprintf(line, sizeof(line), "partitioned into %d groups (%d nodes in fallback segments%s); arena %.1f MB",
                 p.n_groups, rep->n_fallback_nodes, repeats, (double)p.arena_bytes / 1e6);
        o->progress(o->progress_user, line);
    }
    /* weights blob */
    weights = base_calloc(p.weight_bytes ? p.weight_bytes : 1, 1);
    if (!weights) {
        st = base_diag_add(d, KILN_ERR_OOM, "out of memory laying out %llu bytes of weights",
                           (unsigned long long)p.weight_bytes);
        goto done;
    }
    for (int i = 0; i < g->n_values; i++) {
        const ir_value *v = g->values[i];
        if (p.place[i].loc == SCHED_LOC_WEIGHTS && v->is_const && v->t.data)
            memcpy((char *)weights + p.place[i].offset, v->t.data, v->t.nbytes);
    }
    /* code */
    target_options to = {.n_threads = o->n_threads > 0 ? o->n_threads : 1, .emit_dir = o->emit_dir,
                         .progress = o->progress, .progress_user = o->progress_user, .precision = o->precision, .schedule = o->schedule,
                         .tune = o->tune, .tuning_db = o->tuning_db, .tune_budget_s = o->tune_budget_s,
                         .weights = weights};
    double tb = now_s();
    st = t->build(g, &p, &to, &out, d);
    rep->seconds_build = now_s() - tb;
    if (st != KILN_OK) goto done;
    rep->code_bytes = out.code_bytes;
    /* fallback segments and their bindings */
    int n_binds = 0;
    for (int s = 0; s < out.n_segments; s++) {
        const sched_group *grp = p.groups[out.segments[s].group];
        n_binds += grp->n_in + grp->n_out;
    }
    segs = base_calloc((size_t)out.n_segments + 1, sizeof(*segs));
    binds = base_calloc((size_t)n_binds + 1, sizeof(*binds));
    ios = base_calloc((size_t)(g->n_inputs + g->n_outputs) + 1, sizeof(*ios));
    if (!segs || !binds || !ios) {
        st = base_diag_add(d, KILN_ERR_OOM, "out of memory");
        goto done;
    }
    rt_binding *b = binds;
    for (int s = 0; s < out.n_segments && st == KILN_OK; s++) {
        const sched_group *grp = p.groups[out.segments[s].group];
        segs[s].onnx = out.segments[s].onnx;
        segs[s].onnx_bytes = out.segments[s].onnx_bytes;
        segs[s].in = b;
        for (int i = 0; i < grp->n_in && st == KILN_OK; i++) {
            if (grp->in[i]->is_const) continue; /* carried inside the segment */
            st = binding_of(g, &p, grp->in[i], b++, d);
            segs[s].n_in++;
        }
        segs[s].out = b;
        for (int i = 0; i < grp->n_out && st == KILN_OK; i++) {
            st = binding_of(g, &p, grp->out[i], b++, d);
            segs[s].n_out++;
        }
    }
    if (st != KILN_OK) goto done;
    for (int i = 0; i < g->n_inputs; i++) info_of(g->inputs[i], &ios[i]);
    for (int i = 0; i < g->n_outputs; i++) info_of(g->outputs[i], &ios[g->n_inputs + i]);
    rt_artifact_desc ad = {
        .target = t->name,
        .isa = out.isa ? out.isa : "native",
        .meta = o->meta,
        .default_threads = to.n_threads,
        .n_inputs = g->n_inputs,
        .n_outputs = g->n_outputs,
        .inputs = ios,
        .outputs = ios + g->n_inputs,
        .arena_bytes = p.arena_bytes,
        .scratch_bytes = 0, /* the code reports its scratch needs when it loads */
        .code = out.code,
        .code_bytes = out.code_bytes,
        .weights = out.weights ? out.weights : weights,
        .weight_bytes = p.weight_bytes,
        .n_segments = out.n_segments,
        .segments = segs,
    };
    st = rt_artifact_write(out_path, &ad, d);
    rep->n_stages = p.n_groups;
done:
    rep->seconds_total = now_s() - t0;
    base_free(weights);
    base_free(segs);
    base_free(binds);
    base_free(ios);
    target_output_free(&out);
    sched_program_free(&p);
    base_arena_free(&a);
    return st;
}
