/*
 * test_membound.c: membound.c, what a memory-bound rOperator makes of the
 * persistent kernel it runs in (MonoNN 4.2.2, 4.3): the resident blocks
 * and registers, the environment switches, the steps per thread, and which
 * loads may be streamed. No NVRTC or GPU; tests/cli/test_cli.sh checks the
 * code the emitters write with these decisions.
 */
#include "unit.h"

#include "target/cuda/cuda-impl.h"

#include <stdlib.h>

/* The context of a persistent kernel of `block` threads, `per_sm` blocks a
 * multiprocessor on 132 (0: the kernels schedule). */
static cg_mono_ctx ctx_of(int block, int per_sm)
{
    cg_emitter e = {.want_block = block, .mono_per_sm = per_sm, .gpu = {.n_sms = 132}};
    cg_mono_ctx m;
    cg_mono_ctx_init(&e, &m);
    return m;
}

UNIT_TEST(membound_context_of_the_kernel)
{
    unsetenv("KILN_MONO_ILP");
    unsetenv("KILN_MONO_CACHE");
    cg_mono_ctx m = ctx_of(128, 3);
    UNIT_CHECK_EQ_INT(m.resident, 396);
    UNIT_CHECK_EQ_INT(m.regs, 168); /* 65536 / 384 = 170, in eights */
    UNIT_CHECK(m.ilp && !m.hints); /* hints only when asked for */
    m = ctx_of(128, 1);
    UNIT_CHECK_EQ_INT(m.resident, 132);
    UNIT_CHECK_EQ_INT(m.regs, 248); /* at most 255 */
    UNIT_CHECK_EQ_INT(ctx_of(256, 3).regs, 80);
    /* the kernels schedule: nothing */
    m = ctx_of(0, 0);
    UNIT_CHECK_EQ_INT(m.resident, 0);
    UNIT_CHECK(!m.ilp && !m.hints);
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 100000, 32), 1);
}

UNIT_TEST(membound_environment_switches_each)
{
    setenv("KILN_MONO_ILP", "0", 1);
    setenv("KILN_MONO_CACHE", "1", 1);
    cg_mono_ctx m = ctx_of(128, 1);
    UNIT_CHECK(!m.ilp && m.hints);
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 100000, 32), 1);
    unsetenv("KILN_MONO_ILP");
    setenv("KILN_MONO_CACHE", "0", 1);
    m = ctx_of(128, 1);
    UNIT_CHECK(m.ilp && !m.hints);
    setenv("KILN_MONO_CACHE", "yes", 1); /* only "1" turns them on */
    UNIT_CHECK(!ctx_of(128, 1).hints);
    unsetenv("KILN_MONO_CACHE");
}

UNIT_TEST(membound_steps_make_one_wave)
{
    unsetenv("KILN_MONO_ILP");
    cg_mono_ctx m = ctx_of(128, 1); /* 132 resident blocks */
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 96, 32), 1);     /* less than a wave already */
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 132, 32), 1);
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 133, 32), 2);
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 1024, 32), 8);   /* 128 rTasks */
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 100000, 64), 32); /* at most 32 */
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 1024, 0), 1);
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 0, 8), 1);
    /* capped by registers at 5: 308 rTasks, 3 waves, which 4 steps make too */
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 1536, 5), 4);
    /* capped at 10: 615 rTasks, 5 waves; 10 steps are the fewest for 5 */
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 6144, 10), 10);
    m = ctx_of(128, 3); /* 396 */
    UNIT_CHECK_EQ_INT(cg_mono_factor(&m, 512, 32), 2);
}

UNIT_TEST(membound_streams_only_what_the_group_alone_reads)
{
    ir_value x = {.name = "x", .n_uses = 2}, y = {.name = "y", .n_uses = 2};
    ir_value *in_a[2] = {&x, &y}, *in_b[1] = {&x};
    ir_node a = {.n_in = 2, .in = in_a}, b = {.n_in = 1, .in = in_b};
    ir_node *both[2] = {&a, &b}, *one[1] = {&a};
    /* x: read by a and b, both in the group; y: also read elsewhere */
    sched_group g2 = {.nodes = both, .n_nodes = 2};
    UNIT_CHECK(cg_mono_read_here_only(&g2, &x));
    UNIT_CHECK(!cg_mono_read_here_only(&g2, &y));
    sched_group g1 = {.nodes = one, .n_nodes = 1};
    UNIT_CHECK(!cg_mono_read_here_only(&g1, &x));
}
