/*
 * kiln.h: the public compiler API.
 *
 * kiln reads an ONNX model, checks it, and runs it. A minimal session:
 *
 *     kiln_model *m;
 *     if (kiln_model_load("model.onnx", &m) != KILN_OK) {
 *         fprintf(stderr, "%s\n", kiln_last_error());
 *         return 1;
 *     }
 *     ...
 *     kiln_model_free(m);
 *
 * Everything else is internal; the command line (tools/kiln.c) shows the whole
 * surface in use.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_VERSION "0.1.0"

/* Status codes. The command line maps each one to its own exit code
 * (tools/kiln.c, "EXIT CODES"). */
typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_INVALID_ARG,   /* the caller passed something unusable */
    KILN_ERR_IO,            /* a file could not be read or written */
    KILN_ERR_INVALID_MODEL, /* the model file is malformed or inconsistent */
    KILN_ERR_UNSUPPORTED,   /* a valid model uses something kiln does not implement */
    KILN_ERR_SHAPE,         /* shapes or dtypes do not fit together */
    KILN_ERR_OOM,           /* out of memory */
    KILN_ERR_DYNAMIC,       /* a value depends on data not known yet (internal) */
    KILN_ERR_NO_DEVICE,     /* the requested device is missing */
    KILN_ERR_INTERNAL,      /* a bug in kiln */
    KILN_STATUS_COUNT
} kiln_status;

/* Element types. The numbers are ONNX's TensorProto.DataType, so models map
 * onto them directly. */
typedef enum kiln_dtype {
    KILN_UNDEF = 0,
    KILN_F32 = 1,
    KILN_U8 = 2,
    KILN_I8 = 3,
    KILN_U16 = 4,
    KILN_I16 = 5,
    KILN_I32 = 6,
    KILN_I64 = 7,
    KILN_STRING = 8,
    KILN_BOOL = 9,
    KILN_F16 = 10,
    KILN_F64 = 11,
    KILN_U32 = 12,
    KILN_U64 = 13,
    KILN_C64 = 14,
    KILN_C128 = 15,
    KILN_BF16 = 16,
    KILN_DTYPE_COUNT
} kiln_dtype;

/* Name of a status ("invalid model") and of a dtype ("f32"). Never NULL. */
KILN_API const char *kiln_status_name(kiln_status s);
KILN_API const char *kiln_dtype_name(kiln_dtype t);

#endif
