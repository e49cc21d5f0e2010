/*
 * npy.h: NumPy .npy and .npz files as ir_tensors, for model inputs and
 * outputs on the command line and in tests.
 *
 *     ir_tensor t;
 *     if (api_npy_load("x.npy", &t, &diag) != KILN_OK) ...   // t.data is owned
 *     ...
 *     ir_tensor_release(&t);
 *
 *     api_npz z;
 *     if (api_npz_load("inputs.npz", &z, &diag) != KILN_OK) ...
 *     for (int i = 0; i < z.n; i++) use(z.names[i], &z.tensors[i]);
 *     api_npz_free(&z);
 *
 * Dtypes: <f2 <f4 <f8 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 |b1. Headers of
 * format version 1.0, 2.0 and 3.0 are read; C order only (fortran_order
 * True is KILN_ERR_UNSUPPORTED). bfloat16 has no NumPy dtype: saving a bf16
 * tensor is refused, the caller converts it to f32 first. Malformed files are
 * KILN_ERR_INVALID_ARG with a message naming the file; nothing here crashes
 * on bad input. Files are little-endian, as NumPy writes them on x86 and ARM.
 *
 * .npz is a ZIP archive of .npy members. Reading takes stored and deflated
 * members (np.savez and np.savez_compressed); writing stores them
 * uncompressed. ZIP64 archives (over 4 GiB) are refused cleanly.
 */
#ifndef KILN_API_NPY_H
#define KILN_API_NPY_H

#include "ir/ir.h"

/* Parses an in-memory .npy. OUT: *out gets owned data (ir_tensor_release it);
 * on failure *out is zeroed. */
kiln_status api_npy_read(const void *buf, size_t n, ir_tensor *out, base_diag *d);
/* The same, with `name` (a file or archive member) in the messages. */
kiln_status api_npy_read_named(const void *buf, size_t n, const char *name, ir_tensor *out,
                               base_diag *d);
kiln_status api_npy_load(const char *path, ir_tensor *out, base_diag *d);
kiln_status api_npy_save(const char *path, const ir_tensor *t, base_diag *d);

/* An .npz's arrays in archive order; names lack the ".npy" suffix. */
typedef struct api_npz {
    int n;
    char **names;
    ir_tensor *tensors;
} api_npz;

/* OUT: *out owns everything in it (api_npz_free); zeroed on failure. */
kiln_status api_npz_load(const char *path, api_npz *out, base_diag *d);
/* Writes n arrays; names[i] gets ".npy" appended inside the archive. */
kiln_status api_npz_save(const char *path, int n, const char *const *names, const ir_tensor *ts,
                         base_diag *d);
void api_npz_free(api_npz *z);

#endif
