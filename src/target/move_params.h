/*
 * move_params.h: what the data-movement ops mean, for every target: their
 * constant parameters read as ir/interp_tensor.c and ir/interp_reduce.c
 * read them, the structural support test, and the affine views most of
 * them reduce to, and the plumbing of the rOperators both targets emit for
 * them (pieces with their own rTasks, coordinates of a linear index).
 * target/c/emit_move.c and target/cuda/emit_move.c emit code from these;
 * the dtypes each one computes and the loops they write differ.
 *
 *     if (!move_node_ok(n)) return false;          // then the target's dtype policy
 *     for (int i = 0; i < move_n_copies(n); i++) {
 *         move_copy cp;
 *         move_copy_of(n, i, &cp);                 // Transpose, Concat input i, ...
 *         move_view_collapse(&cp.v);
 *         ... emit a loop moving cp.v's elements from cp.src to cp.dst ...
 *     }
 */
#ifndef KILN_TARGET_MOVE_PARAMS_H
#define KILN_TARGET_MOVE_PARAMS_H

#include "ir/params.h" /* ir_norm_axis, ir_const_ints, ir_slice_params */

/* Tile views each of up to IR_MAX_RANK dims as two. */
#define MOVE_MAX_RANK (2 * IR_MAX_RANK)

/* The bits of value v in dtype t (fills), as ir_set_f64 stores it. */
uint64_t move_bits_of(kiln_dtype t, double v);
/* Row-major strides (elements) of dims. */
void move_contiguous_strides(int rank, const int64_t *dims, int64_t *str);

/* Whether node n (shapes inferred) is data movement that every target can
 * express: constant parameters, elements of 1, 2, 4 or 8 bytes, shapes
 * that agree with the parameters. Targets add their dtype policy (which
 * dtypes a Reduce computes...) on top. */
bool move_node_ok(const ir_node *n);

/* Pad's parameters, as ir_eval_pad reads them: along dim k the output is
 * lead[k] padded elements, kept[k] input elements from crop[k] on, then
 * trailing padded ones. */
typedef enum move_pad_mode { MOVE_PAD_CONSTANT, MOVE_PAD_REFLECT, MOVE_PAD_EDGE, MOVE_PAD_WRAP } move_pad_mode;

typedef struct move_pad {
    move_pad_mode mode;
    int64_t lead[IR_MAX_RANK], crop[IR_MAX_RANK], kept[IR_MAX_RANK];
    uint64_t fill; /* constant mode: the value's bits in the input's dtype */
} move_pad;

bool move_pad_params(const ir_node *n, move_pad *pp);
const char *move_pad_mode_name(move_pad_mode m); /* "constant", "reflect", ... */

/* Which dims a Reduce reduces (axes from input 1 or the attribute, none:
 * all, unless noop_with_empty_axes); false when they are not constant. */
bool move_reduce_axes(const ir_node *n, bool *reduced);

/* ---- affine copies -------------------------------------------------------------- */

/* Element (i_0..i_rank-1) of dims moves from src_off + sum i_d src_str[d]
 * to dst_off + sum i_d dst_str[d] (element units; a stride may be 0 for a
 * broadcast or negative for a Slice with a negative step). */
typedef struct move_view {
    int rank;
    int64_t dims[MOVE_MAX_RANK];
    int64_t src_str[MOVE_MAX_RANK], dst_str[MOVE_MAX_RANK];
    int64_t src_off, dst_off;
} move_view;

typedef struct move_copy {
    const ir_value *src, *dst;
    move_view v;
    char what[32]; /* "transpose", "input 2", ...: for comments in generated code */
} move_copy;

/* How many affine copies node n (move_node_ok) is: one per Concat input,
 * one per Split output, one for Transpose, Slice, Expand, Tile,
 * DepthToSpace, SpaceToDepth and the copies (Identity, Reshape-likes,
 * Dropout's data output); 0 for the others (Gather, Pad, Reduce*...). */
int move_n_copies(const ir_node *n);
/* Copy i of node n. */
void move_copy_of(const ir_node *n, int i, move_copy *out);
/* Drops dims of size 1 and merges neighbours both sides walk contiguously
 * (the result has rank 1 or more; a single element gets strides 1). */
void move_view_collapse(move_view *v);

/* ---- rOperators made of pieces ------------------------------------------------- */

/* A part of an op's work with its own rTasks (one input of a Concat...):
 * statements using u, the rTask within the piece. */
typedef struct move_piece {
    base_str code;
    int64_t n_tasks;
} move_piece;

typedef struct move_pieces {
    move_piece *p;
    int n, cap;
    int64_t n_tasks; /* the sum over the pieces */
    bool oom;
} move_pieces;

/* Adds a piece; takes ownership of code. */
void move_pieces_add(move_pieces *ps, base_str *code, int64_t n_tasks);
/* Appends the body of an rOperator running rTask t of the pieces in
 * order ("if (t < 12) { const int u = t; ... return; } { const int u = t - 12; ... }"),
 * u declared as u_type, and frees the pieces. */
void move_pieces_emit(move_pieces *ps, base_str *out, const char *u_type);

/* Appends declarations of the coordinates "const <type> i<d> = ...;" of
 * linear index `lin` over dims[0..rank) (row-major) where need[d], through
 * a quotient "<type> q"; ind is the indentation. */
void move_emit_coords(base_str *s, const char *type, const char *lin, int rank, const int64_t *dims, const bool *need,
                      const char *ind);

#endif
