/*
 * tensor.c: TensorProto -> ir_tensor with full validation, including
 * external data confined to the model's folder.
 */
#include "onnx/onnx-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool dtype_known(int32_t t)
{
    return t > 0 && t < KILN_DTYPE_COUNT;
}

/* Checks an external-data location and returns its resolved path (malloc'd). */
static kiln_status resolve_external(onnx_ctx *c, const char *tname, const char *loc, char **out)
{
    *out = NULL;
    if (!c->base_dir)
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                             "tensor '%s': external data '%s' needs the model's folder (model loaded from memory)",
                             tname, loc);
    if (!loc[0] || loc[0] == '/')
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                             "tensor '%s': external data path '%s' must be relative to the model's folder", tname,
                             loc);
    /* no ".." component anywhere */
    for (const char *p = loc; *p;) {
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                                 "tensor '%s': external data path '%s' leaves the model's folder", tname, loc);
        p += n;
        if (*p == '/') p++;
    }
    char dir_real[PATH_MAX], full[PATH_MAX * 2], file_real[PATH_MAX];
    if (!realpath(c->base_dir, dir_real))
        return base_diag_add(c->d, KILN_ERR_IO, "cannot resolve the model folder '%s': %s", c->base_dir,
                             strerror(errno));
    snprintf(full, sizeof(full), "%s/%s", dir_real, loc);
    if (!realpath(full, file_real))
        return base_diag_add(c->d, KILN_ERR_IO, "tensor '%s': external data file '%s': %s", tname, loc,
                             strerror(errno));
    size_t dl = strlen(dir_real);
    if (strncmp(file_real, dir_real, dl) != 0 || (file_real[dl] != '/' && dir_real[dl - 1] != '/'))
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                             "tensor '%s': external data '%s' resolves outside the model's folder (symlink?)",
                             tname, loc);
    struct stat st;
    if (stat(file_real, &st) != 0 || !S_ISREG(st.st_mode))
        return base_diag_add(c->d, KILN_ERR_IO, "tensor '%s': external data '%s' is not a regular file", tname,
                             loc);
    if (st.st_nlink > 1)
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                             "tensor '%s': external data '%s' is a hard link; kiln refuses it since it may "
                             "point outside the model's folder",
                             tname, loc);
    *out = strdup(file_real);
    return *out ? KILN_OK : KILN_ERR_OOM;
}

static kiln_status map_external(onnx_ctx *c, const char *path, const base_file_map **out)
{
    ir_model *m = c->model;
    for (int i = 0; i < m->n_maps; i++)
        if (strcmp(c->map_paths[i], path) == 0) {
            *out = &m->maps[i];
            return KILN_OK;
        }
    if (m->n_maps == m->cap_maps) {
        int cap = m->cap_maps ? m->cap_maps * 2 : 4;
        base_file_map *maps = base_realloc(m->maps, (size_t)cap * sizeof(*maps));
        if (!maps) return KILN_ERR_OOM;
        m->maps = maps;
        char **paths = base_realloc(c->map_paths, (size_t)cap * sizeof(char *));
        if (!paths) return KILN_ERR_OOM;
        c->map_paths = paths;
        m->cap_maps = cap;
    }
    KILN_TRY(base_file_map_open(path, &m->maps[m->n_maps], c->d));
    c->map_paths[m->n_maps] = base_arena_strdup(&m->arena, path);
    if (!c->map_paths[m->n_maps]) return KILN_ERR_OOM;
    *out = &m->maps[m->n_maps++];
    return KILN_OK;
}

static bool parse_i64(const char *s, int64_t *v)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || x < 0) return false;
    *v = x;
    return true;
}

static kiln_status load_external(onnx_ctx *c, const Onnx__TensorProto *tp, const char *tname, ir_tensor *t)
{
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        if (!kv->key || !kv->value) continue;
        if (strcmp(kv->key, "location") == 0) loc = kv->value;
        else if (strcmp(kv->key, "offset") == 0) {
            if (!parse_i64(kv->value, &offset))
                return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "tensor '%s': bad external offset '%s'",
                                     tname, kv->value);
        } else if (strcmp(kv->key, "length") == 0) {
            if (!parse_i64(kv->value, &length))
                return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "tensor '%s': bad external length '%s'",
                                     tname, kv->value);
        }
    }
    if (!loc) return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "tensor '%s': external data without location", tname);
    if (length >= 0 && (size_t)length != t->nbytes)
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                             "tensor '%s': external length %lld disagrees with its shape (%zu bytes)", tname,
                             (long long)length, t->nbytes);
    char *path;
    KILN_TRY(resolve_external(c, tname, loc, &path));
    const base_file_map *fm;
    kiln_status st = map_external(c, path, &fm);
    free(path);
    if (st != KILN_OK) return st;
    if ((uint64_t)offset > fm->size || t->nbytes > fm->size - (size_t)offset)
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                             "tensor '%s': external data '%s' has %zu bytes, the tensor needs %zu at offset %lld",
                             tname, loc, fm->size, t->nbytes, (long long)offset);
    const unsigned char *src = (const unsigned char *)fm->data + offset;
    size_t align = ir_dtype_size(t->dtype);
    if (align && ((uintptr_t)src % align) == 0) {
        t->data = (void *)src; /* mapped, not copied */
        return KILN_OK;
    }
    void *p = base_arena_alloc(&c->model->arena, t->nbytes);
    if (!p) return KILN_ERR_OOM;
    memcpy(p, src, t->nbytes);
    t->data = p;
    return KILN_OK;
}

kiln_status onnx_tensor_from_proto(onnx_ctx *c, const Onnx__TensorProto *tp, base_arena *a, ir_tensor *t)
{
    const char *tname = tp->name && tp->name[0] ? tp->name : "(unnamed)";
    memset(t, 0, sizeof(*t));
    if (!tp->has_data_type || !dtype_known(tp->data_type))
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "tensor '%s': unknown data type %d", tname,
                             tp->data_type);
    kiln_dtype dt = (kiln_dtype)tp->data_type;
    if (dt == KILN_STRING || dt == KILN_C64 || dt == KILN_C128)
        return base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "tensor '%s': %s tensors are not supported", tname,
                             kiln_dtype_name(dt));
    if (tp->n_dims > IR_MAX_RANK)
        return base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "tensor '%s': rank %zu exceeds kiln's limit of %d",
                             tname, tp->n_dims, IR_MAX_RANK);
    if (tp->segment)
        return base_diag_add(c->d, KILN_ERR_UNSUPPORTED, "tensor '%s': segmented tensors are not supported",
                             tname);
    t->dtype = dt;
    t->rank = (int)tp->n_dims;
    size_t numel = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        int64_t d = tp->dims[i];
        if (d < 0)
            return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "tensor '%s': negative dimension %lld", tname,
                                 (long long)d);
        if (d > ONNX_MAX_DIM || !base_mul_ok(numel, (size_t)d, &numel) || numel > ONNX_MAX_DIM)
            return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "tensor '%s': dimensions too large", tname);
        t->dims[i] = d;
    }
    size_t esize = ir_dtype_size(dt);
    t->nbytes = numel * esize;
    bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (external) return load_external(c, tp, tname, t);
    if (tp->has_raw_data) {
        if (tp->raw_data.len != t->nbytes)
            return base_diag_add(c->d, KILN_ERR_INVALID_MODEL,
                                 "tensor '%s': raw_data has %zu bytes, but %s needs %zu", tname, tp->raw_data.len,
                                 ir_tensor_type_str(t, (char[160]){0}, 160), t->nbytes);
        if (t->nbytes == 0) return KILN_OK;
        if ((uintptr_t)tp->raw_data.data % esize == 0) {
            t->data = tp->raw_data.data; /* kept alive with the model */
            return KILN_OK;
        }
        void *p = base_arena_alloc(a, t->nbytes);
        if (!p) return KILN_ERR_OOM;
        memcpy(p, tp->raw_data.data, t->nbytes);
        t->data = p;
        return KILN_OK;
    }
    /* Typed fields: which one holds the data depends on the dtype. */
    size_t have;
    switch (dt) {
    case KILN_F32: have = tp->n_float_data; break;
    case KILN_F64: have = tp->n_double_data; break;
    case KILN_I64: have = tp->n_int64_data; break;
    case KILN_U32: case KILN_U64: have = tp->n_uint64_data; break;
    default: have = tp->n_int32_data; break;
    }
    if (have != numel)
        return base_diag_add(c->d, KILN_ERR_INVALID_MODEL, "tensor '%s': %zu values stored, its shape %s needs %zu",
                             tname, have, ir_tensor_type_str(t, (char[160]){0}, 160), numel);
    if (numel == 0) return KILN_OK;
    void *p = base_arena_alloc(a, t->nbytes);
    if (!p) return KILN_ERR_OOM;
    t->data = p;
    for (size_t i = 0; i < numel; i++) {
        switch (dt) {
        case KILN_F32: ((float *)p)[i] = tp->float_data[i]; break;
        case KILN_F64: ((double *)p)[i] = tp->double_data[i]; break;
        case KILN_I64: ((int64_t *)p)[i] = tp->int64_data[i]; break;
        case KILN_U32: ((uint32_t *)p)[i] = (uint32_t)tp->uint64_data[i]; break;
        case KILN_U64: ((uint64_t *)p)[i] = tp->uint64_data[i]; break;
        case KILN_F16: case KILN_BF16: case KILN_U16: ((uint16_t *)p)[i] = (uint16_t)tp->int32_data[i]; break;
        case KILN_I16: ((int16_t *)p)[i] = (int16_t)tp->int32_data[i]; break;
        case KILN_I32: ((int32_t *)p)[i] = tp->int32_data[i]; break;
        case KILN_I8: ((int8_t *)p)[i] = (int8_t)tp->int32_data[i]; break;
        case KILN_U8: ((uint8_t *)p)[i] = (uint8_t)tp->int32_data[i]; break;
        case KILN_BOOL: ((uint8_t *)p)[i] = tp->int32_data[i] != 0; break;
        default: KILN_ASSERT(!"unreachable dtype");
        }
    }
    return KILN_OK;
}

kiln_status onnx_read_tensor_file(const char *path, ir_tensor *out, char **name, base_diag *d)
{
    memset(out, 0, sizeof(*out));
    if (name) *name = NULL;
    base_file_map fm;
    KILN_TRY(base_file_map_open(path, &fm, d));
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, fm.size, fm.data);
    base_file_map_close(&fm);
    if (!tp) return base_diag_add(d, KILN_ERR_INVALID_ARG, "'%s' is not a serialized ONNX TensorProto", path);
    onnx_ctx c = {.d = d};
    base_arena a;
    base_arena_init(&a);
    ir_tensor t;
    kiln_status st = onnx_tensor_from_proto(&c, tp, &a, &t);
    if (st == KILN_OK) st = ir_tensor_copy(out, &t);
    if (st == KILN_OK && name && tp->name && tp->name[0]) *name = strdup(tp->name);
    base_arena_free(&a);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
}
