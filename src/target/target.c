/*
 * target.c: the table of targets.
 */
#include "target/target.h"

#include <string.h>

static const target *const targets[] = {&target_c};

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
    o->code = NULL;
    o->segments = NULL;
    o->n_segments = 0;
}
