/*
 * fuzz_onnx.c: libFuzzer target for the ONNX loader: any byte string must
 * load or be rejected with a status, never crash, hang or leak. A model that
 * loads also goes through the support check and shape inference (with
 * symbolic dims bound to 1), which reads attributes and constant data.
 *
 *   make fuzz FUZZ_SECONDS=600
 */
#include "ir/interp.h"
#include "onnx/onnx.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    base_diag d;
    base_diag_init(&d);
    ir_model *m = NULL;
    if (onnx_load_buffer(data, size, NULL, &m, &d) == KILN_OK) {
        ir_graph *g = m->graph;
        onnx_check_support(g, &d);
        for (int i = 0; i < g->n_inputs; i++) {
            ir_value *v = g->inputs[i];
            for (int k = 0; k < v->t.rank; k++)
                if (v->t.dims[k] < 0) v->t.dims[k] = 1;
            v->shape_known = true;
        }
        ir_infer_shapes(g, &d);
        base_str s;
        base_str_init(&s);
        ir_graph_print(g, &s);
        base_str_free(&s);
    }
    (void)base_diag_text(&d);
    ir_model_free(m);
    base_diag_free(&d);
    return 0;
}
