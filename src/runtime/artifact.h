/*
 * artifact.h: the `.kiln` artifact, the one file `kiln compile` writes and
 * the runtime loads: header, section table, and sections holding the
 * input/output signature, the memory plan, the compiled code (a shared
 * object for target "c"), the weights, the fallback segments (ONNX
 * subgraphs the reference interpreter runs, with where their inputs and
 * outputs live) and free-text metadata.
 *
 * Layout (every integer little-endian; every section offset a multiple of 64):
 *
 *     0    char magic[8]        "KILNART\0"
 *     8    u32  format version  RT_ARTIFACT_VERSION
 *     12   u32  header bytes    RT_ARTIFACT_HEADER_BYTES (the table follows)
 *     16   u64  file bytes      the whole file; a truncated copy is caught here
 *     24   u32  n_sections
 *     28   u32  flags           0
 *     32   char kiln_version[32], target[16], isa[16]   NUL-terminated, NUL-padded
 *     96   32 reserved bytes (0)
 *     128  section table: n_sections x {u32 kind, u32 flags (0), u64 offset, u64 size}
 *
 *     SIGNATURE  u32 n_inputs, u32 n_outputs, then per tensor
 *                {u32 name_bytes, name (no NUL), u32 dtype, u32 rank, i64 dims[rank]}
 *     PLAN       u64 arena_bytes, u64 scratch_bytes (per vEU), u32 default_threads, u32 0
 *     CODE       the shared object's bytes
 *     WEIGHTS    the weight blob (64-byte aligned in the file, so it can be mapped in place)
 *     SEGMENTS   u32 n_segments, then per segment
 *                {u64 onnx_bytes, u32 n_in, u32 n_out, the serialized ONNX model,
 *                 n_in + n_out bindings {u32 kind, u32 io, u64 offset,
 *                                        u32 dtype, u32 rank, i64 dims[rank]}}
 *     META       free text (model name, compile options), no NUL bytes
 *
 * SIGNATURE, PLAN, CODE and WEIGHTS are required, SEGMENTS and META
 * optional; each kind appears at most once. The reader trusts no size it has
 * not checked: sections lie inside the file and do not overlap, counts are
 * bounded by the bytes left, strings by their sections, tensor sizes do not
 * overflow, bindings lie inside the arena, the weights or the io tensor they
 * name, aligned to their element size.
 */
#ifndef KILN_RUNTIME_ARTIFACT_H
#define KILN_RUNTIME_ARTIFACT_H

#include "base/base.h"
#include "kiln_rt.h"

#define RT_ARTIFACT_MAGIC "KILNART"        /* 8 bytes with the NUL */
#define RT_ARTIFACT_VERSION 1
#define RT_ARTIFACT_HEADER_BYTES 128
#define RT_ARTIFACT_ALIGN 64
#define RT_ARTIFACT_VERSION_CHARS 32       /* header string fields, NUL included */
#define RT_ARTIFACT_NAME_CHARS 16

/* Limits the reader enforces, so a corrupt count cannot ask for absurd memory. */
#define RT_ARTIFACT_MAX_IO 65536           /* model inputs + outputs; bindings per segment */
#define RT_ARTIFACT_MAX_SEGMENTS 1000000
#define RT_ARTIFACT_MAX_NAME 4096          /* bytes of a tensor name */
#define RT_ARTIFACT_MAX_BYTES ((uint64_t)1 << 40) /* arena, scratch, one tensor */
#define RT_MAX_THREADS 1024

typedef enum rt_section_kind {
    RT_SEC_SIGNATURE = 1,
    RT_SEC_PLAN = 2,
    RT_SEC_CODE = 3,
    RT_SEC_WEIGHTS = 4,
    RT_SEC_SEGMENTS = 5,
    RT_SEC_META = 6,
    RT_SEC_COUNT
} rt_section_kind;

/* Where a segment's graph input or output lives at run time. */
typedef enum rt_binding_kind {
    RT_BIND_ARENA = 1,   /* offset: bytes into the activation arena */
    RT_BIND_WEIGHTS = 2, /* offset: bytes into the weights (inputs only) */
    RT_BIND_INPUT = 3,   /* io: model input index; offset: bytes into that tensor (inputs only) */
    RT_BIND_OUTPUT = 4,  /* io: model output index; offset: bytes into that tensor */
    RT_BIND_COUNT
} rt_binding_kind;

typedef struct rt_binding {
    int kind;           /* rt_binding_kind */
    uint64_t offset;    /* bytes, a multiple of the dtype's size */
    int io;             /* INPUT/OUTPUT only; ignored (written as 0) otherwise */
    kiln_dtype dtype;
    int rank;
    int64_t dims[KILN_RT_MAX_RANK];
} rt_binding;

typedef struct rt_segment_desc {
    const void *onnx;   /* a serialized ONNX ModelProto */
    size_t onnx_bytes;
    int n_in;           /* = the graph's inputs, in order */
    const rt_binding *in;
    int n_out;          /* = the graph's outputs, in order */
    const rt_binding *out;
} rt_segment_desc;

typedef struct rt_artifact_desc {
    const char *target;  /* "c" */
    const char *isa;     /* "avx512", "avx2" or "generic" */
    const char *meta;    /* free text; NULL: none */
    int default_threads; /* 1 .. RT_MAX_THREADS */
    int n_inputs, n_outputs;
    const kiln_rt_tensor_info *inputs, *outputs; /* nbytes is recomputed, not read */
    uint64_t arena_bytes;                        /* = the code's kiln_cprog.arena_bytes */
    uint64_t scratch_bytes;                      /* per vEU; the runtime gives max(this, the code's) */
    const void *code;
    size_t code_bytes;
    const void *weights;
    size_t weight_bytes;                         /* = the code's kiln_cprog.weight_bytes */
    int n_segments;
    const rt_segment_desc *segments;
} rt_artifact_desc;

/* Writes the artifact to path. The description is checked the way the
 * reader checks a file (it is encoded, then read back), so a file this
 * writes always loads: an inconsistent description is KILN_ERR_INVALID_ARG
 * with the reader's message. KILN_ERR_IO when the file cannot be written. */
kiln_status rt_artifact_write(const char *path, const rt_artifact_desc *a, base_diag *d);

/* Encodes the description without checking it (tests craft bad files with
 * it). OUT: *buf (base_free it), *n. Fails only when it cannot be encoded
 * at all (names too long for the header, negative counts, missing arrays,
 * ranks above 8: KILN_ERR_INVALID_ARG) or on OOM. */
kiln_status rt_artifact_encode(const rt_artifact_desc *a, void **buf, size_t *n, base_diag *d);

/* A parsed, validated artifact. desc's code, weights and segment ONNX bytes
 * point into the buffer read (borrowed: keep it alive while using them);
 * names, bindings, strings and meta are owned by the artifact. */
typedef struct rt_artifact {
    rt_artifact_desc desc;
    rt_segment_desc *segments;            /* = desc.segments, writable */
    uint32_t format_version;
    const char *kiln_version;
    uint64_t code_offset, weights_offset; /* file offsets of those sections */
    base_arena arena;
} rt_artifact;

/* Parses and validates buf. OUT: *out, free with rt_artifact_free (also
 * after a failure). Malformed files are KILN_ERR_INVALID_MODEL with a message
 * naming the section, field and byte offset. */
kiln_status rt_artifact_read(const void *buf, size_t n, rt_artifact *out, base_diag *d);
void rt_artifact_free(rt_artifact *a);
/* Drops the pointers into the buffer read (code, weights, segment models),
 * for when that buffer goes away and only the owned parts stay in use. */
void rt_artifact_forget_buffer(rt_artifact *a);

/* Name of a section kind ("SIGNATURE") or binding kind ("arena"); "?" when unknown. */
const char *rt_section_name(int kind);
const char *rt_binding_kind_name(int kind);

#endif
