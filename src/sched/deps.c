/*
 * deps.c: which groups of an rProgram must wait for which (DESIGN.md
 * "Execution": the waits between rOperators). Every target's scheduler
 * asks the same question of the memory plan: the c target's stage waits,
 * the cuda target's waves, stages and completion counters.
 *
 * A later group depends on an earlier one when it reads bytes the earlier
 * writes, or writes bytes the earlier reads or writes: the planner reuses
 * arena bytes, so a later group's output may sit on an earlier one's dead
 * input. Arena values overlap by their byte ranges (the IR's sizes, so a
 * target that stores floats in 16 bits is judged conservatively); model
 * outputs by their io index. Weights and model inputs are never written.
 */
#include "sched/sched.h"

/* Whether values a and b (of the top graph) may share bytes. */
static bool may_overlap(const sched_program *p, const ir_value *a, const ir_value *b)
{
    const sched_place *pa = &p->place[a->id], *pb = &p->place[b->id];
    if (pa->loc != pb->loc || pa->loc == SCHED_LOC_WEIGHTS || pa->loc == SCHED_LOC_INPUT || pa->loc == SCHED_LOC_NONE)
        return false;
    if (pa->loc == SCHED_LOC_OUTPUT) return pa->offset == pb->offset;
    return pa->offset < pb->offset + b->t.nbytes && pb->offset < pa->offset + a->t.nbytes;
}

/* Whether v may share bytes with any of vs[0 .. n) (NULL entries and
 * values of subgraphs, which the plan does not place, skipped). */
static bool touches(const ir_graph *g, const sched_program *p, ir_value *const *vs, int n, const ir_value *v)
{
    if (!v || v->graph != g) return false;
    for (int i = 0; i < n; i++)
        if (vs[i] && vs[i]->graph == g && may_overlap(p, vs[i], v)) return true;
    return false;
}

/* Whether b writes bytes that a reads or writes. */
static bool overwrites(const ir_graph *g, const sched_program *p, const sched_group *a, const sched_group *b)
{
    for (int i = 0; i < b->n_out; i++)
        if (touches(g, p, a->out, a->n_out, b->out[i]) || touches(g, p, a->in, a->n_in, b->out[i])) return true;
    return false;
}

bool sched_group_depends(const ir_graph *g, const sched_program *p, const sched_group *a, const sched_group *b)
{
    for (int i = 0; i < b->n_in; i++)
        if (touches(g, p, a->out, a->n_out, b->in[i])) return true;
    return overwrites(g, p, a, b);
}

bool sched_group_depends_via(const ir_graph *g, const sched_program *p, const sched_group *a, const sched_group *b,
                             const ir_value *v)
{
    bool writes = false;
    for (int i = 0; i < a->n_out; i++) writes |= a->out[i] == v;
    if (!writes || !v || v->graph != g) return false;
    for (int i = 0; i < b->n_in; i++)
        if (b->in[i] != v && touches(g, p, a->out, a->n_out, b->in[i])) return false;
    return !overwrites(g, p, a, b);
}
