/*
 * plan.c: the memory plan (DESIGN.md "Memory planning"): every value gets a
 * place before the model runs, so nothing is allocated while it runs.
 *
 * Graph inputs and outputs are the caller's buffers. A Reshape-like alias
 * shares its source's place. Other values that cross group boundaries live
 * in one activation arena: each has a lifetime [producing step, last
 * reading step]; values whose lifetimes do not overlap share bytes.
 * Placement is greedy by size (largest first, lowest offset that fits), as
 * TFLite's arena planner does. An elementwise group writes an output in
 * place of an input that dies there when their shapes and dtypes agree. Constants read by compiled groups are laid
 * out in the weights blob in order of first use. Fallback segments carry
 * their own constants, so theirs are not placed.
 */
#include "sched/sched.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64

void sched_program_free(sched_program *p)
{
    base_free(p->groups);
    base_free(p->place);
    memset(p, 0, sizeof(*p));
}

typedef struct interval {
    int value;  /* root value id */
    int first, last;
    uint64_t bytes;
    uint64_t offset;
} interval;

static int by_size_desc(const void *a, const void *b)
{
    const interval *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->first - y->first;
}

static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

/* Bytes of a value: constants carry theirs; inferred values are sized here. */
static uint64_t value_bytes(const ir_value *v)
{
    if (v->is_const) return v->t.nbytes;
    return v->shape_known ? (uint64_t)ir_numel(&v->t) * ir_dtype_size(v->t.dtype) : 0;
}

/* The wave of each group (by_wave planning): one more than the latest wave
 * of the groups that wrote what it reads (its data alone, not the arena). */
static void data_waves(const ir_graph *g, const sched_program *p, const int *root, const int *first, int *wave)
{
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        wave[s] = 0;
        for (int k = 0; k < grp->n_in; k++) {
            const ir_value *v = grp->in[k];
            if (v->graph != g || v->is_const || v->is_input) continue;
            int w = first[root[v->id]];
            if (w >= 0 && w < s && wave[w] + 1 > wave[s]) wave[s] = wave[w] + 1;
        }
    }
}

kiln_status sched_plan_memory(const ir_graph *g, sched_program *p, base_arena *a, bool by_wave, int hold,
                              base_diag *d)
{
    (void)a;
    int nv = g->n_values;
    p->n_values = nv;
    p->place = base_calloc((size_t)nv + 1, sizeof(sched_place));
    int *root = base_malloc(((size_t)nv + 1) * sizeof(int));
    int *first = base_malloc(((size_t)nv + 1) * sizeof(int));
    int *last = base_malloc(((size_t)nv + 1) * sizeof(int));
    interval *iv = base_malloc(((size_t)nv + 1) * sizeof(interval));
    kiln_status st = KILN_OK;
    if (!p->place || !root || !first || !last || !iv) {
        st = base_diag_add(d, KILN_ERR_OOM, "out of memory planning memory");
        goto out;
    }
    for (int i = 0; i < nv; i++) {
        root[i] = i;
        first[i] = -1;
        last[i] = -1;
    }
    for (int i = 0; i < g->n_inputs; i++) p->place[g->inputs[i]->id] = (sched_place){SCHED_LOC_INPUT, (uint64_t)i};
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = g->outputs[i];
        if (v->graph == g && !v->is_input && !v->is_const)
            p->place[v->id] = (sched_place){SCHED_LOC_OUTPUT, (uint64_t)i};
    }
    /* aliases point at their source's root */
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        if (grp->kind != SCHED_GROUP_ALIAS) continue;
        const ir_value *src = grp->nodes[0]->in[0], *dst = grp->nodes[0]->out[0];
        if (src->graph == g && dst) root[dst->id] = root[src->id];
    }
    for (int i = 0; i < nv; i++) { /* path compression (aliases of aliases) */
        int r = i;
        while (root[r] != r) r = root[r];
        root[i] = r;
    }
    /* lifetimes, on roots */
    uint64_t wofs = 0;
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        for (int k = 0; k < grp->n_out; k++) {
            int r = root[grp->out[k]->id];
            if (first[r] < 0) first[r] = s;
            if (last[r] < s) last[r] = s;
        }
        for (int k = 0; k < grp->n_in; k++) {
            const ir_value *v = grp->in[k];
            if (v->graph != g) continue;
            if (v->is_const) {
                if (grp->kind == SCHED_GROUP_FALLBACK || p->place[v->id].loc != SCHED_LOC_NONE) continue;
                p->place[v->id] = (sched_place){SCHED_LOC_WEIGHTS, wofs};
                wofs = align_up(wofs + value_bytes(v));
                continue;
            }
            int r = root[v->id];
            if (last[r] < s) last[r] = s;
        }
    }
    /* In place: an elementwise group may write an output over an input of
     * the same shape and dtype that dies at this group (the generated loop
     * reads each element before writing it, through one pointer). */
    for (int s = 0; s < p->n_groups; s++) {
        const sched_group *grp = p->groups[s];
        if (grp->kind != SCHED_GROUP_ELEMENTWISE) continue;
        for (int k = 0; k < grp->n_out; k++) {
            const ir_value *o = grp->out[k];
            int ro = root[o->id];
            if (p->place[o->id].loc != SCHED_LOC_NONE || ro != o->id) continue;
            for (int j = 0; j < grp->n_in; j++) {
                const ir_value *v = grp->in[j];
                if (v->graph != g || v->is_const) continue;
                /* the root's place: an alias (Reshape...) of a graph input or output has none of its own, but
                 * writing over it would write into the caller's buffer */
                int ri = root[v->id];
                if (p->place[ri].loc != SCHED_LOC_NONE) continue;
                if (ri == ro || last[ri] != s || first[ri] >= s || v->t.dtype != o->t.dtype ||
                    !ir_same_shape(&v->t, &o->t))
                    continue;
                bool taken = false; /* one output per input */
                for (int q = 0; q < k; q++) taken |= root[grp->out[q]->id] == ri;
                if (taken) continue;
                for (int i = 0; i < nv; i++)
                    if (root[i] == ro) root[i] = ri;
                if (last[ro] > last[ri]) last[ri] = last[ro];
                first[ro] = last[ro] = -1;
                break;
            }
        }
    }

    /* every value a group reads was produced by an earlier group */
    for (int s = 0; s < p->n_groups && st == KILN_OK; s++) {
        const sched_group *grp = p->groups[s];
        for (int k = 0; k < grp->n_in; k++) {
            const ir_value *v = grp->in[k];
            if (v->graph != g || v->is_const || v->is_input) continue;
            int r = root[v->id];
            if (first[r] < 0 || first[r] >= s)
                st = base_diag_add(d, KILN_ERR_INTERNAL, "schedule: group '%s' reads '%s' before it is produced",
                                   grp->name, v->name);
        }
    }
    if (st != KILN_OK) goto out;
    /* graph outputs that are constants are copied from the weights */
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = g->outputs[i];
        if (v->is_const && p->place[v->id].loc == SCHED_LOC_NONE) {
            p->place[v->id] = (sched_place){SCHED_LOC_WEIGHTS, wofs};
            wofs = align_up(wofs + v->t.nbytes);
        }
    }
    p->weight_bytes = wofs;
    /* arena values: roots produced by groups that are not caller buffers.
     * by_wave: lifetimes in waves rather than steps (a value lives from its
     * producer's wave to its last reader's), so that bytes pass only from an
     * earlier wave to a later one and reuse never makes groups of one wave
     * depend on each other (schedules that run a wave's groups at once:
     * waves, mono) */
    int *wave = by_wave ? base_malloc(((size_t)p->n_groups + 1) * sizeof(int)) : NULL;
    if (by_wave && !wave) {
        st = base_diag_add(d, KILN_ERR_OOM, "out of memory planning memory");
        goto out;
    }
    if (wave) data_waves(g, p, root, first, wave);
    int n_iv = 0;
    for (int i = 0; i < nv; i++) {
        if (root[i] != i || first[i] < 0) continue;
        const ir_value *v = g->values[i];
        if (p->place[i].loc != SCHED_LOC_NONE) continue; /* input/output */
        uint64_t bytes = value_bytes(v);
        int lo = first[i], hi = last[i];
        if (wave) {
            lo = wave[first[i]];
            hi = lo;
            for (int s = first[i]; s <= last[i]; s++) hi = KILN_MAX(hi, wave[s]);
        }
        iv[n_iv++] = (interval){i, lo, hi + KILN_MAX(hold, 0), align_up(bytes ? bytes : 1), 0};
    }
    base_free(wave);
    qsort(iv, (size_t)n_iv, sizeof(interval), by_size_desc);
    uint64_t arena = 0;
    for (int k = 0; k < n_iv; k++) {
        /* lowest offset that overlaps no placed, lifetime-overlapping value */
        uint64_t ofs = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int j = 0; j < k; j++) {
                const interval *o = &iv[j];
                bool live_together = o->first <= iv[k].last && iv[k].first <= o->last;
                bool bytes_overlap = o->offset < ofs + iv[k].bytes && ofs < o->offset + o->bytes;
                if (live_together && bytes_overlap) {
                    ofs = o->offset + o->bytes;
                    moved = true;
                }
            }
        }
        iv[k].offset = ofs;
        if (ofs + iv[k].bytes > arena) arena = ofs + iv[k].bytes;
        p->place[iv[k].value] = (sched_place){SCHED_LOC_ARENA, ofs};
    }
    p->arena_bytes = arena;
    /* aliases take their root's place */
    for (int i = 0; i < nv; i++)
        if (root[i] != i && p->place[i].loc == SCHED_LOC_NONE) p->place[i] = p->place[root[i]];
out:
    base_free(root);
    base_free(first);
    base_free(last);
    base_free(iv);
    return st;
}
