/*
 * test_dispatch.c: sched/dispatch.c, how long a persistent kernel's stage
 * lasts as its blocks deal out its rTasks round-robin (the stage's rTask t
 * on block t % blocks), against a simulation that walks every rTask.
 */
#include "unit.h"

#include "sched/sched.h"

#include <math.h>
#include <stdlib.h>

/* The stage's members (n[i] rTasks of each[i]) dealt out one rTask at a
 * time: the busiest block's time. */
static double walk(int blocks, const int64_t *n, const double *each, int members)
{
    double *load = calloc((size_t)blocks, sizeof(double)), busiest = 0;
    int64_t t = 0;
    for (int i = 0; i < members; i++)
        for (int64_t j = 0; j < n[i]; j++, t++) load[t % blocks] += each[i];
    for (int b = 0; b < blocks; b++) busiest = fmax(busiest, load[b]);
    free(load);
    return busiest;
}

UNIT_TEST(dispatch_stage_time_matches_a_walk)
{
    /* ResNet-50's last block at batch 1 on 132 blocks: 44 rTasks of 9.9 us
     * then the downsampling one's 128 of 7.2 (40 blocks run one of each),
     * or its 64 unsplit of 9.3 (every block one) */
    double load[132] = {0};
    sched_stage_add(load, 132, 0, 44, 9.9);
    UNIT_CHECK(fabs(sched_stage_time(load, 132, 44, 128, 7.2) - 17.1) < 1e-9);
    UNIT_CHECK(fabs(sched_stage_time(load, 132, 44, 64, 9.3) - 9.9) < 1e-9);
    UNIT_CHECK(fabs(sched_stage_time(load, 132, 44, 0, 9.3) - 9.9) < 1e-9);
    /* and against the walk, over stages of several members that wrap round
     * the blocks more than once */
    unsigned seed = 1;
    for (int trial = 0; trial < 200; trial++) {
        int blocks = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 300, members = 1 + trial % 4;
        int64_t n[4];
        double each[4];
        double *l = calloc((size_t)blocks, sizeof(double));
        int64_t before = 0;
        for (int i = 0; i < members; i++) {
            n[i] = (int64_t)((seed = seed * 1103515245u + 12345u) >> 16) % 700;
            each[i] = 1.0 + (double)((seed = seed * 1103515245u + 12345u) >> 16 & 1023) / 64.0;
            if (i + 1 < members) {
                sched_stage_add(l, blocks, before, n[i], each[i]);
                before += n[i];
            }
        }
        double got = sched_stage_time(l, blocks, before, n[members - 1], each[members - 1]);
        double want = walk(blocks, n, each, members);
        if (fabs(got - want) > 1e-6 * want) {
            UNIT_CHECK(fabs(got - want) <= 1e-6 * want);
            printf("      trial %d: %d blocks, %d members: %.3f, walked %.3f\n", trial, blocks, members, got, want);
        }
        /* the load is left as it was */
        sched_stage_add(l, blocks, before, n[members - 1], each[members - 1]);
        double busiest = 0;
        for (int b = 0; b < blocks; b++) busiest = fmax(busiest, l[b]);
        UNIT_CHECK(fabs(busiest - want) <= 1e-6 * want);
        free(l);
    }
}
