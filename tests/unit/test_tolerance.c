/*
 * test_tolerance.c: the comparison every target test uses (src/api/tolerance.c),
 * in particular the tensor-scale bound of 16-bit storage.
 */
#include "unit.h"

#include <math.h>

#include "api/tolerance.h"

/* want: a sum-like tensor of rms about 50 with one element near zero;
 * got: want with `err` added to that element. */
static void near_zero_case(ir_tensor *got, ir_tensor *want, double err)
{
    int64_t n = 1000;
    UNIT_CHECK(ir_tensor_alloc(want, KILN_F32, 1, &n) == KILN_OK);
    UNIT_CHECK(ir_tensor_alloc(got, KILN_F32, 1, &n) == KILN_OK);
    for (int64_t i = 0; i < n; i++) {
        double w = i == 7 ? 0.3 : 50.0 * sin(0.37 * (double)i + 0.1);
        ir_set_f64(want, i, w);
        ir_set_f64(got, i, i == 7 ? w + err : w);
    }
}

UNIT_TEST(tolerance_per_element)
{
    ir_tensor got, want;
    near_zero_case(&got, &want, 0.03); /* 1e-3 of the tensor's scale */
    api_compare c = api_compare_tensors(&got, &want, api_tolerance_for(KILN_F32));
    UNIT_CHECK(c.shape_ok && c.n_bad == 1 && c.first_bad == 7);
    c = api_compare_tensors(&got, &want, api_tolerance_for_precision(KILN_F32, "fp32"));
    UNIT_CHECK(c.n_bad == 1);
    ir_tensor_release(&got);
    ir_tensor_release(&want);
}

UNIT_TEST(tolerance_scale_of_16bit_storage)
{
    ir_tensor got, want;
    /* fp16 rounding of a long sum's operands: off by 1e-3 of the rms, passes */
    near_zero_case(&got, &want, 0.03);
    api_tolerance t16 = api_tolerance_for_precision(KILN_F32, "fp16");
    UNIT_CHECK(t16.scale > 0 && t16.rtol >= 1e-2);
    UNIT_CHECK(api_compare_tensors(&got, &want, t16).n_bad == 0);
    ir_tensor_release(&got);
    ir_tensor_release(&want);
    /* a wrong sum (a split left out): off by a good part of the rms, fails */
    near_zero_case(&got, &want, 12.0);
    UNIT_CHECK(api_compare_tensors(&got, &want, t16).n_bad == 1);
    UNIT_CHECK(api_compare_tensors(&got, &want, api_tolerance_for_precision(KILN_F32, "bf16")).n_bad == 1);
    ir_tensor_release(&got);
    ir_tensor_release(&want);
}
