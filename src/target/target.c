/*
 * target.c: the table of targets.
 */
#include "target/target.h"

#include "onnx/onnx.h"

#include <string.h>

static const target *const targets[] = {&target_c, &target_cuda};

const target *target_lookup(const char *name)
{
    for (size_t i = 0; i < KILN_COUNT(targets); i++)
        if (strcmp(targets[i]->name, name) == 0) return targets[i];
    return NULL;
}

void target_output_free(target_output *o)
{
    base_free(o->code);
    for (int i = 0; i < o->n_segments; i++) base_free(o->segments[i].onnx);
    base_free(o->segments);
    base_free(o->weights);
    base_free(o->listing);
    o->weights = NULL;
    o->listing = NULL;
    o->code = NULL;
    o->segments = NULL;
    o->n_segments = 0;
}

kiln_status target_add_segment(target_output *o, const ir_graph *g, const sched_group *grp, int *index, base_diag *d)
{
    ir_value **ins = base_malloc(((size_t)grp->n_in + 1) * sizeof(ir_value *));
    if (!ins) return base_diag_add(d, KILN_ERR_OOM, "out of memory exporting segment '%s'", grp->name);
    int n_ins = 0;
    for (int i = 0; i < grp->n_in; i++)
        if (!grp->in[i]->is_const) ins[n_ins++] = grp->in[i];
    target_segment *segs = base_realloc(o->segments, ((size_t)o->n_segments + 1) * sizeof(target_segment));
    if (!segs) {
        base_free(ins);
        return base_diag_add(d, KILN_ERR_OOM, "out of memory exporting segment '%s'", grp->name);
    }
    o->segments = segs;
    target_segment *seg = &o->segments[o->n_segments];
    memset(seg, 0, sizeof(*seg));
    kiln_status st = onnx_export_nodes(g, grp->nodes, grp->n_nodes, ins, n_ins, grp->out, grp->n_out, &seg->onnx,
                                       &seg->onnx_bytes, d);
    base_free(ins);
    if (st != KILN_OK) return st;
    seg->group = grp->id;
    *index = o->n_segments++;
    return KILN_OK;
}
