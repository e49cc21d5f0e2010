/*
 * support.c: listing every op of a model kiln cannot run, with the reason,
 * in one error.
 */
#include "onnx/onnx.h"

#include <string.h>

/* Families kiln deliberately leaves out, so the error says why. */
static const char *why_unsupported(const ir_node *n)
{
    static const char *const sequence_ops[] = {
        "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
        "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional",
        "OptionalGetElement", "OptionalHasElement",
    };
    static const char *const string_ops[] = {"StringNormalizer", "TfIdfVectorizer", "RegexFullMatch",
                                             "StringConcat", "StringSplit", "LabelEncoder"};
    if (strcmp(n->domain, "ai.onnx.preview.training") == 0)
        return "training ops (optimizers, gradients) are not supported";
    if (strcmp(n->domain, "ai.onnx.ml") == 0) return "the ai.onnx.ml domain is not supported";
    if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) return "ops of custom domains are not supported";
    for (size_t i = 0; i < KILN_COUNT(sequence_ops); i++)
        if (strcmp(n->op_type, sequence_ops[i]) == 0) return "sequences and optionals are not supported";
    for (size_t i = 0; i < KILN_COUNT(string_ops); i++)
        if (strcmp(n->op_type, string_ops[i]) == 0) return "string ops are not supported";
    if (n->op == KILN_OP_COUNT) return "unknown op";
    return "not implemented";
}

static int collect(const ir_graph *g, base_diag *d)
{
    int bad = 0;
    char lb[256];
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->op == KILN_OP_COUNT || !ir_ops[n->op].eval) {
            base_diag_add(d, KILN_ERR_UNSUPPORTED, "  %s%s%s%s: %s", ir_node_label(n, lb, sizeof(lb)),
                          n->domain[0] ? " in domain '" : "", n->domain, n->domain[0] ? "'" : "",
                          why_unsupported(n));
            bad++;
        }
        for (int a = 0; a < n->n_attrs; a++) {
            const ir_attr *at = &n->attrs[a];
            if (at->kind == IR_ATTR_GRAPH) bad += collect(at->g, d);
            for (int k = 0; at->kind == IR_ATTR_GRAPHS && k < at->n; k++) bad += collect(at->graphs[k], d);
        }
    }
    return bad;
}

kiln_status onnx_check_support(const ir_graph *g, base_diag *d)
{
    base_diag tmp;
    base_diag_init(&tmp);
    int bad = collect(g, &tmp);
    if (bad) {
        base_diag_add(d, KILN_ERR_UNSUPPORTED, "the model uses %d node%s kiln does not support:", bad,
                      bad == 1 ? "" : "s");
        for (int i = 0; i < tmp.n_msgs; i++) base_diag_add(d, KILN_ERR_UNSUPPORTED, "%s", tmp.msgs[i]);
    }
    base_diag_free(&tmp);
    return bad ? KILN_ERR_UNSUPPORTED : KILN_OK;
}
