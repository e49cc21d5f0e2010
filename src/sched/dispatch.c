/*
 * dispatch.c: how long a persistent kernel's stage lasts as its blocks deal
 * out its rTasks (DESIGN.md "Execution on a GPU"). The cuda target's loop
 * gives block b the stage's rTasks b, b + blocks, b + 2 blocks, ... (emit.c,
 * emit_persistent), so a stage whose rTasks outnumber the blocks ends when
 * its busiest block does: on ResNet-50 at batch 1 a stage of 44 rTasks of
 * one convolution and 128 of another kept 40 blocks busy for both of theirs.
 * The cuda target asks this when it picks a product's tiles for a stage
 * that others already fill (emit.c, fit_stage).
 */
#include "sched/sched.h"

/* How many of n rTasks after `before` block b gets. */
static int64_t share_of(int b, int blocks, int64_t before, int64_t n)
{
    int64_t first = ((int64_t)b - before % blocks + blocks) % blocks; /* the first of them that is b's */
    return n > first ? (n - 1 - first) / blocks + 1 : 0;
}

void sched_stage_add(double *load, int blocks, int64_t before, int64_t n, double each)
{
    for (int b = 0; b < blocks; b++) load[b] += (double)share_of(b, blocks, before, n) * each;
}

double sched_stage_time(const double *load, int blocks, int64_t before, int64_t n, double each)
{
    double busiest = 0;
    for (int b = 0; b < blocks; b++) {
        double t = load[b] + (double)share_of(b, blocks, before, n) * each;
        if (t > busiest) busiest = t;
    }
    return busiest;
}
