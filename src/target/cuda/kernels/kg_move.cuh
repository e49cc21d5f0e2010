/*
 * kg_move.cuh: device helpers of the data-movement rOperators
 * (target/cuda/emit_move.c): Pad's source coordinates outside the kept
 * range, and the order ArgMax/ArgMin choose by.
 */
#ifndef KILN_KG_MOVE_CUH
#define KILN_KG_MOVE_CUH

/* ---- Pad: the source coordinate of output coordinate i along a dim of d
 * kept elements, i outside [0, d) (as ir_eval_pad) ----------------------------- */

static __device__ __forceinline__ kg_i64 kg_pad_reflect(kg_i64 i, kg_i64 d)
{
    if (d == 1) return 0;
    kg_i64 p = 2 * (d - 1), j = ((i % p) + p) % p;
    return j < d ? j : p - j;
}

static __device__ __forceinline__ kg_i64 kg_pad_edge(kg_i64 i, kg_i64 d) { return i < 0 ? 0 : i >= d ? d - 1 : i; }

static __device__ __forceinline__ kg_i64 kg_pad_wrap(kg_i64 i, kg_i64 d) { return ((i % d) + d) % d; }

/* ---- ArgMax / ArgMin ------------------------------------------------------------
 *
 * Whether candidate (a, ai) beats the best so far (b, bi). The interpreter
 * scans in order, taking a strictly better value (and an equal one with
 * select_last_index); a NaN beats every number and the first NaN stays.
 * That is a total order on (value, index), so lanes may scan strided
 * subsets and combine their winners in any order. An index below 0 is "no
 * candidate yet" and loses to everything. Floats of every storage compare
 * as double (exact). */

static __device__ __forceinline__ bool kg_arg_better_fp(double a, kg_i64 ai, double b, kg_i64 bi, bool is_max,
                                                        bool last)
{
    if (ai < 0) return false;
    if (bi < 0) return true;
    bool an = a != a, bn = b != b;
    if (an || bn) return an && (!bn || ai < bi);
    if (a != b) return is_max ? a > b : a < b;
    return last ? ai > bi : ai < bi;
}

static __device__ __forceinline__ bool kg_arg_better_i64(kg_i64 a, kg_i64 ai, kg_i64 b, kg_i64 bi, bool is_max,
                                                         bool last)
{
    if (ai < 0) return false;
    if (bi < 0) return true;
    if (a != b) return is_max ? a > b : a < b;
    return last ? ai > bi : ai < bi;
}

static __device__ __forceinline__ bool kg_arg_better_u64(kg_u64 a, kg_i64 ai, kg_u64 b, kg_i64 bi, bool is_max,
                                                         bool last)
{
    if (ai < 0) return false;
    if (bi < 0) return true;
    if (a != b) return is_max ? a > b : a < b;
    return last ? ai > bi : ai < bi;
}

#endif
