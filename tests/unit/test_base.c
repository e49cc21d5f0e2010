/*
 * test_base.c: the base layer: arena, diagnostics, fp16/bf16, allocation
 * failure injection.
 */
#include "base/base.h"
#include "unit.h"

#include <math.h>

UNIT_TEST(arena_allocates_zeroed_aligned_memory)
{
    base_arena a;
    base_arena_init(&a);
    for (int i = 1; i < 2000; i += 7) {
        unsigned char *p = base_arena_alloc(&a, (size_t)i);
        UNIT_CHECK(p != NULL);
        UNIT_CHECK(((uintptr_t)p & 15) == 0);
        for (int k = 0; k < i; k++) UNIT_CHECK(p[k] == 0);
        p[i - 1] = 0xff;
    }
    void *big = base_arena_alloc(&a, 1 << 20);
    UNIT_CHECK(big != NULL);
    UNIT_CHECK(base_arena_alloc(&a, SIZE_MAX - 4) == NULL);
    char *s = base_arena_printf(&a, "%s-%d", "x", 42);
    UNIT_CHECK(s && strcmp(s, "x-42") == 0);
    base_arena_free(&a);
}

UNIT_TEST(diag_collects_every_message)
{
    base_diag d;
    base_diag_init(&d);
    UNIT_CHECK_EQ_INT(base_diag_add(&d, KILN_ERR_SHAPE, "first %d", 1), KILN_ERR_SHAPE);
    base_diag_add(&d, KILN_ERR_IO, "second");
    UNIT_CHECK_EQ_INT(d.n_msgs, 2);
    UNIT_CHECK(strcmp(base_diag_text(&d), "first 1\nsecond") == 0);
    base_diag_add(&d, KILN_ERR_IO, "third");
    UNIT_CHECK_STR_CONTAINS(base_diag_text(&d), "third");
    base_diag_free(&d);
}

UNIT_TEST(f16_round_trips_and_rounds_to_nearest_even)
{
    /* every finite fp16 value survives f16 -> f32 -> f16 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        float f = base_f16_to_f32((uint16_t)h);
        UNIT_CHECK_EQ_INT(base_f32_to_f16(f), h);
    }
    UNIT_CHECK(base_f16_to_f32(0x3c00) == 1.0f);
    UNIT_CHECK(base_f16_to_f32(0x0001) == ldexpf(1, -24));
    UNIT_CHECK_EQ_INT(base_f32_to_f16(65520.0f), 0x7c00);         /* rounds to inf */
    UNIT_CHECK_EQ_INT(base_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie to even */
    UNIT_CHECK(isnan(base_f16_to_f32(base_f32_to_f16(NAN))));
}

UNIT_TEST(bf16_rounds_to_nearest_even)
{
    UNIT_CHECK(base_bf16_to_f32(base_f32_to_bf16(1.0f)) == 1.0f);
    UNIT_CHECK_EQ_INT(base_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80); /* tie to even: down */
    UNIT_CHECK_EQ_INT(base_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82); /* tie to even: up */
    UNIT_CHECK(isnan(base_bf16_to_f32(base_f32_to_bf16(NAN))));
}

UNIT_TEST(alloc_failure_injection)
{
    base_fail_alloc_after(0);
    UNIT_CHECK(base_malloc(10) == NULL);
    base_fail_alloc_after(1);
    void *p = base_malloc(10);
    UNIT_CHECK(p != NULL);
    UNIT_CHECK(base_malloc(10) == NULL);
    base_fail_alloc_after(-1);
    base_free(p);
    size_t out;
    UNIT_CHECK(!base_mul_ok(SIZE_MAX / 2, 3, &out));
    UNIT_CHECK(base_mul_ok(1000, 1000, &out) && out == 1000000);
}
