/* gguf.c - reads a GGUF file: header, metadata, tensor table, data offsets.
   Every count, length and offset is checked against the bytes actually
   there before it is used, so malformed files end in an error, never a
   crash. Layout: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, the
   key-value pairs, the tensor infos, padding to general.alignment, data. */
#include "internal.h"

typedef struct infer__reader {
    const uint8_t *p, *end;
    infer_error *err;
    int failed;
} infer__reader;

static int infer__rd_fail(infer__reader *r, const char *what) {
    if (!r->failed) infer__set_error(r->err, INFER_ERR_FORMAT, "GGUF truncated or malformed: %s", what);
    r->failed = 1;
    return 0;
}

static int infer__rd_bytes(infer__reader *r, void *dst, size_t n, const char *what) {
    if (r->failed) return 0;
    if ((size_t)(r->end - r->p) < n) return infer__rd_fail(r, what);
    if (dst) memcpy(dst, r->p, n);
    r->p += n;
    return 1;
}

static int infer__rd_u32(infer__reader *r, uint32_t *v, const char *what) { return infer__rd_bytes(r, v, 4, what); }
static int infer__rd_u64(infer__reader *r, uint64_t *v, const char *what) { return infer__rd_bytes(r, v, 8, what); }

static int infer__rd_str(infer__reader *r, infer__str *s, const char *what) {
    uint64_t n;
    if (!infer__rd_u64(r, &n, what)) return 0;
    if (n > (uint64_t)(r->end - r->p)) return infer__rd_fail(r, what);
    s->p = (const char *)r->p;
    s->n = n;
    r->p += n;
    return 1;
}

static size_t infer__gguf_scalar_size(infer_gguf_type t) {
    switch (t) {
    case INFER_GGUF_UINT8: case INFER_GGUF_INT8: case INFER_GGUF_BOOL: return 1;
    case INFER_GGUF_UINT16: case INFER_GGUF_INT16: return 2;
    case INFER_GGUF_UINT32: case INFER_GGUF_INT32: case INFER_GGUF_FLOAT32: return 4;
    case INFER_GGUF_UINT64: case INFER_GGUF_INT64: case INFER_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static const char *infer__gguf_type_name(infer_gguf_type t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "str", "arr", "u64", "i64", "f64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static int infer__rd_kv(infer__reader *r, infer__kv *kv) {
    infer__str key;
    uint32_t type;
    if (!infer__rd_str(r, &key, "metadata key")) return 0;
    kv->key = infer__strndup(key.p, (size_t)key.n);
    if (!kv->key) {
        infer__set_error(r->err, INFER_ERR_NOMEM, "out of memory");
        return r->failed = 1, 0;
    }
    if (!infer__rd_u32(r, &type, "metadata type")) return 0;
    kv->type = (infer_gguf_type)type;
    kv->data = r->p;
    if (type == INFER_GGUF_STRING) {
        infer__str s;
        return infer__rd_str(r, &s, kv->key);
    }
    if (type == INFER_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n, i;
        size_t es;
        if (!infer__rd_u32(r, &et, kv->key) || !infer__rd_u64(r, &n, kv->key)) return 0;
        kv->arr_type = (infer_gguf_type)et;
        kv->arr_n = n;
        kv->data = r->p;
        if (et == INFER_GGUF_STRING) {
            /* every element takes at least its 8-byte length */
            if (n > (uint64_t)(r->end - r->p) / 8) return infer__rd_fail(r, kv->key);
            kv->strs = (infer__str *)infer__calloc((size_t)n, sizeof(infer__str));
            if (!kv->strs && n) {
                infer__set_error(r->err, INFER_ERR_NOMEM, "out of memory");
                return r->failed = 1, 0;
            }
            for (i = 0; i < n; i++)
                if (!infer__rd_str(r, &kv->strs[i], kv->key)) return 0;
            return 1;
        }
        es = infer__gguf_scalar_size((infer_gguf_type)et);
        if (!es) {
            infer__set_error(r->err, INFER_ERR_FORMAT, "GGUF key %s: unsupported array element type %u", kv->key, et);
            return r->failed = 1, 0;
        }
        if (n > (uint64_t)(r->end - r->p) / es) return infer__rd_fail(r, kv->key);
        r->p += n * es;
        return 1;
    }
    if (!infer__gguf_scalar_size((infer_gguf_type)type)) {
        infer__set_error(r->err, INFER_ERR_FORMAT, "GGUF key %s: unknown value type %u", kv->key, type);
        return r->failed = 1, 0;
    }
    return infer__rd_bytes(r, NULL, infer__gguf_scalar_size((infer_gguf_type)type), kv->key);
}

static int infer__rd_tensor(infer__reader *r, infer__tensor *t) {
    infer__str name;
    uint32_t n_dims, type;
    uint64_t n_el = 1;
    int d;
    const infer__type_traits *tt;
    if (!infer__rd_str(r, &name, "tensor name")) return 0;
    t->name = infer__strndup(name.p, (size_t)name.n);
    if (!t->name) {
        infer__set_error(r->err, INFER_ERR_NOMEM, "out of memory");
        return r->failed = 1, 0;
    }
    if (!infer__rd_u32(r, &n_dims, t->name)) return 0;
    if (n_dims < 1 || n_dims > 4) {
        infer__set_error(r->err, INFER_ERR_FORMAT, "tensor %s: %u dimensions (1 to 4 allowed)", t->name, n_dims);
        return r->failed = 1, 0;
    }
    t->n_dims = (int)n_dims;
    for (d = 0; d < 4; d++) t->ne[d] = 1;
    for (d = 0; d < (int)n_dims; d++) {
        uint64_t ne;
        if (!infer__rd_u64(r, &ne, t->name)) return 0;
        if (ne == 0 || ne > ((uint64_t)1 << 40) || n_el > (((uint64_t)1 << 50) / ne)) {
            infer__set_error(r->err, INFER_ERR_FORMAT, "tensor %s: absurd dimension %llu", t->name,
                             (unsigned long long)ne);
            return r->failed = 1, 0;
        }
        t->ne[d] = (int64_t)ne;
        n_el *= ne;
    }
    if (!infer__rd_u32(r, &type, t->name) || !infer__rd_u64(r, &t->offset, t->name)) return 0;
    t->type = (infer_type)type;
    tt = type < INFER_TYPE_COUNT ? infer__traits((infer_type)type) : NULL;
    if (!tt || !tt->block_size) {
        infer__set_error(r->err, INFER_ERR_UNSUPPORTED, "tensor %s: unknown tensor type %u", t->name, type);
        return r->failed = 1, 0;
    }
    if (t->ne[0] % tt->block_size != 0) {
        infer__set_error(r->err, INFER_ERR_FORMAT,
                         "tensor %s: rows of %lld values are not a whole number of %d-value %s blocks", t->name,
                         (long long)t->ne[0], tt->block_size, tt->name);
        return r->failed = 1, 0;
    }
    t->nbytes = (size_t)(n_el / (uint64_t)tt->block_size * (uint64_t)tt->type_size);
    return 1;
}

static void infer__gguf_free_tables(infer_gguf *g) {
    int64_t i;
    if (g->kv)
        for (i = 0; i < g->n_kv; i++) {
            INFER_FREE(g->kv[i].key);
            INFER_FREE(g->kv[i].strs);
        }
    if (g->tensors)
        for (i = 0; i < g->n_tensors; i++) INFER_FREE(g->tensors[i].name);
    INFER_FREE(g->kv);
    INFER_FREE(g->tensors);
}

static int infer__gguf_parse(infer_gguf *g, infer_error *err) {
    infer__reader r;
    uint32_t version;
    uint64_t n_tensors, n_kv, i;
    const infer__kv *align_kv;
    uint64_t pos;
    r.p = g->blob.data;
    r.end = g->blob.data + g->blob.size;
    r.err = err;
    r.failed = 0;

    if (g->blob.size < 4 || memcmp(g->blob.data, "GGUF", 4) != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "not a GGUF file (bad magic)");
        return 0;
    }
    r.p += 4;
    if (!infer__rd_u32(&r, &version, "version")) return 0;
    if (version == 1) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "GGUF version 1 is not supported (only versions 2 and 3)");
        return 0;
    }
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0 && version != 0)
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "big-endian GGUF files are not supported");
        else
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "GGUF version %u is not supported (only 2 and 3)", version);
        return 0;
    }
    g->version = version;
    if (!infer__rd_u64(&r, &n_tensors, "tensor count") || !infer__rd_u64(&r, &n_kv, "metadata count")) return 0;
    /* a key-value pair takes at least 13 bytes, a tensor info at least 28 */
    if (n_kv > (uint64_t)(r.end - r.p) / 13 || n_tensors > (uint64_t)(r.end - r.p) / 28) {
        infer__set_error(err, INFER_ERR_FORMAT, "GGUF header claims %llu tensors and %llu keys, more than the file holds",
                         (unsigned long long)n_tensors, (unsigned long long)n_kv);
        return 0;
    }
    g->kv = (infer__kv *)infer__calloc((size_t)n_kv, sizeof(infer__kv));
    g->tensors = (infer__tensor *)infer__calloc((size_t)n_tensors, sizeof(infer__tensor));
    if (!g->kv || !g->tensors) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t)i + 1;
        if (!infer__rd_kv(&r, &g->kv[i])) return 0;
    }
    for (i = 0; i < n_tensors; i++) {
        g->n_tensors = (int64_t)i + 1;
        if (!infer__rd_tensor(&r, &g->tensors[i])) return 0;
    }

    g->alignment = 32;
    align_kv = infer__gguf_kv(g, "general.alignment");
    if (align_kv) {
        int64_t a = 0;
        if (!infer__gguf_get_int(g, "general.alignment", &a) || a <= 0 || (a & (a - 1)) != 0 || a > (1 << 24)) {
            infer__set_error(err, INFER_ERR_FORMAT, "general.alignment must be a power of two");
            return 0;
        }
        g->alignment = (uint64_t)a;
    }
    pos = (uint64_t)(r.p - g->blob.data);
    g->data_offset = (pos + g->alignment - 1) / g->alignment * g->alignment;
    g->has_data = g->data_offset <= g->blob.size;

    for (i = 0; i < n_tensors; i++) {
        infer__tensor *t = &g->tensors[i];
        uint64_t j;
        for (j = 0; j < i; j++)
            if (strcmp(g->tensors[j].name, t->name) == 0) {
                infer__set_error(err, INFER_ERR_FORMAT, "tensor %s appears twice", t->name);
                return 0;
            }
        if (t->offset % g->alignment != 0) {
            infer__set_error(err, INFER_ERR_FORMAT, "tensor %s: offset %llu is not aligned to %llu", t->name,
                             (unsigned long long)t->offset, (unsigned long long)g->alignment);
            return 0;
        }
        if (!g->has_data || t->offset > g->blob.size - g->data_offset ||
            t->nbytes > g->blob.size - g->data_offset - t->offset) {
            infer__set_error(err, INFER_ERR_FORMAT, "tensor %s: data (offset %llu, %zu bytes) lies past the end of the file",
                             t->name, (unsigned long long)t->offset, t->nbytes);
            return 0;
        }
        t->data = g->blob.data + g->data_offset + t->offset;
    }
    return 1;
}

static infer_gguf *infer__gguf_from_blob(infer__blob *blob, infer_error *err) {
    infer_gguf *g = (infer_gguf *)infer__calloc(1, sizeof *g);
    if (!g) {
        infer__blob_close(blob);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    g->blob = *blob;
    if (!infer__gguf_parse(g, err)) {
        infer_gguf_close(g);
        return NULL;
    }
    return g;
}

INFERDEF infer_gguf *infer_gguf_open(const char *path, infer_error *err) {
    infer__blob blob;
    if (!path) {
        infer__set_error(err, INFER_ERR_ARG, "no model path given");
        return NULL;
    }
    if (!infer__blob_open(&blob, path, err)) return NULL;
    return infer__gguf_from_blob(&blob, err);
}

INFERDEF infer_gguf *infer_gguf_open_memory(const void *data, size_t size, infer_error *err) {
    infer__blob blob;
    if (!data && size) {
        infer__set_error(err, INFER_ERR_ARG, "NULL buffer");
        return NULL;
    }
    blob.data = (const uint8_t *)(data ? data : "");
    blob.size = size;
    blob.kind = 0;
    return infer__gguf_from_blob(&blob, err);
}

INFERDEF void infer_gguf_close(infer_gguf *g) {
    if (!g) return;
    infer__gguf_free_tables(g);
    infer__blob_close(&g->blob);
    INFER_FREE(g);
}

INFERDEF uint32_t infer_gguf_version(const infer_gguf *g) { return g->version; }
INFERDEF int64_t infer_gguf_n_kv(const infer_gguf *g) { return g->n_kv; }
INFERDEF const char *infer_gguf_key(const infer_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}
INFERDEF infer_gguf_type infer_gguf_kv_type(const infer_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->kv[i].type : (infer_gguf_type)-1;
}

INFERDEF int64_t infer_gguf_find_key(const infer_gguf *g, const char *key) {
    int64_t i;
    for (i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return i;
    return -1;
}

static const infer__kv *infer__gguf_kv(const infer_gguf *g, const char *key) {
    int64_t i = infer_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

/* Reads one scalar of type t at p as a double (integers exactly up to 2^53). */
static double infer__gguf_scalar(infer_gguf_type t, const uint8_t *p, int64_t *as_int) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } v;
    int64_t iv = 0;
    double dv = 0;
    memcpy(&v, p, infer__gguf_scalar_size(t));
    switch (t) {
    case INFER_GGUF_UINT8: iv = v.u8; break;
    case INFER_GGUF_INT8: iv = v.i8; break;
    case INFER_GGUF_BOOL: iv = v.u8 != 0; break;
    case INFER_GGUF_UINT16: iv = v.u16; break;
    case INFER_GGUF_INT16: iv = v.i16; break;
    case INFER_GGUF_UINT32: iv = v.u32; break;
    case INFER_GGUF_INT32: iv = v.i32; break;
    case INFER_GGUF_UINT64: iv = v.u64 > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v.u64; break;
    case INFER_GGUF_INT64: iv = v.i64; break;
    case INFER_GGUF_FLOAT32: dv = v.f32; break;
    case INFER_GGUF_FLOAT64: dv = v.f64; break;
    default: break;
    }
    if (t == INFER_GGUF_FLOAT32 || t == INFER_GGUF_FLOAT64) {
        /* toward zero; NaN and values beyond int64_t (whose conversion is
           undefined behaviour) saturate instead */
        iv = dv != dv ? 0 : dv >= 9223372036854775807.0 ? INT64_MAX : dv <= -9223372036854775808.0 ? INT64_MIN : (int64_t)dv;
        if (as_int) *as_int = iv;
        return dv;
    }
    if (as_int) *as_int = iv;
    return (double)iv;
}

static int infer__gguf_is_int_type(infer_gguf_type t) {
    return infer__gguf_scalar_size(t) && t != INFER_GGUF_FLOAT32 && t != INFER_GGUF_FLOAT64 && t != INFER_GGUF_BOOL;
}

static int infer__gguf_get_int(const infer_gguf *g, const char *key, int64_t *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    if (!kv || !infer__gguf_is_int_type(kv->type)) return 0;
    infer__gguf_scalar(kv->type, kv->data, out);
    return 1;
}

static int infer__gguf_get_float(const infer_gguf *g, const char *key, double *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    if (!kv || !infer__gguf_scalar_size(kv->type) || kv->type == INFER_GGUF_BOOL) return 0;
    *out = infer__gguf_scalar(kv->type, kv->data, NULL);
    return 1;
}

static int infer__gguf_get_bool(const infer_gguf *g, const char *key, int *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    int64_t v;
    if (!kv || !infer__gguf_scalar_size(kv->type) || kv->type == INFER_GGUF_FLOAT32 || kv->type == INFER_GGUF_FLOAT64)
        return 0;
    infer__gguf_scalar(kv->type, kv->data, &v);
    *out = v != 0;
    return 1;
}

static int infer__gguf_get_str(const infer_gguf *g, const char *key, infer__str *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    uint64_t n;
    if (!kv || kv->type != INFER_GGUF_STRING) return 0;
    memcpy(&n, kv->data, 8);
    out->n = n;
    out->p = (const char *)kv->data + 8;
    return 1;
}

static const infer__tensor *infer__gguf_tensor(const infer_gguf *g, const char *name) {
    int64_t i = infer_gguf_find_tensor(g, name);
    return i < 0 ? NULL : &g->tensors[i];
}

INFERDEF int64_t infer_gguf_n_tensors(const infer_gguf *g) { return g->n_tensors; }

INFERDEF int64_t infer_gguf_find_tensor(const infer_gguf *g, const char *name) {
    int64_t i;
    for (i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return i;
    return -1;
}

INFERDEF int infer_gguf_tensor(const infer_gguf *g, int64_t i, infer_tensor_info *out) {
    const infer__tensor *t;
    if (i < 0 || i >= g->n_tensors) return 0;
    t = &g->tensors[i];
    out->name = t->name;
    out->type = t->type;
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->offset = t->offset;
    out->nbytes = t->nbytes;
    out->data = t->data;
    return 1;
}

/* Appends printf output at *pos, never past size; *pos keeps counting so
   the caller learns the full length. */
static void infer__append(char *buf, size_t size, size_t *pos, const char *fmt, ...) INFER__PRINTF(4, 5);
static void infer__append(char *buf, size_t size, size_t *pos, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(*pos < size ? buf + *pos : NULL, *pos < size ? size - *pos : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *pos += (size_t)n;
}

static void infer__append_str(char *buf, size_t size, size_t *pos, const char *s, uint64_t n, size_t max) {
    uint64_t i;
    infer__append(buf, size, pos, "\"");
    for (i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') infer__append(buf, size, pos, "\\n");
        else if (c == '"' || c == '\\') infer__append(buf, size, pos, "\\%c", c);
        else if (c < 0x20) infer__append(buf, size, pos, "\\x%02x", c);
        else infer__append(buf, size, pos, "%c", c);
    }
    infer__append(buf, size, pos, n > max ? "\"..." : "\"");
}

static void infer__append_scalar(char *buf, size_t size, size_t *pos, infer_gguf_type t, const uint8_t *p) {
    int64_t iv;
    double dv = infer__gguf_scalar(t, p, &iv);
    if (t == INFER_GGUF_BOOL) infer__append(buf, size, pos, "%s", iv ? "true" : "false");
    else if (t == INFER_GGUF_FLOAT32 || t == INFER_GGUF_FLOAT64) infer__append(buf, size, pos, "%g", dv);
    else if (t == INFER_GGUF_UINT64) {
        uint64_t u;
        memcpy(&u, p, 8);
        infer__append(buf, size, pos, "%llu", (unsigned long long)u);
    } else infer__append(buf, size, pos, "%lld", (long long)iv);
}

INFERDEF int infer_gguf_kv_to_string(const infer_gguf *g, int64_t i, char *buf, size_t size) {
    const infer__kv *kv;
    size_t pos = 0;
    if (size) buf[0] = 0;
    if (i < 0 || i >= g->n_kv) return -1;
    kv = &g->kv[i];
    if (kv->type == INFER_GGUF_STRING) {
        infer__str s = {NULL, 0};
        infer__gguf_get_str(g, kv->key, &s);
        infer__append_str(buf, size, &pos, s.p, s.n, 120);
    } else if (kv->type == INFER_GGUF_ARRAY) {
        uint64_t j, show = kv->arr_n < 6 ? kv->arr_n : 6;
        infer__append(buf, size, &pos, "[%s x %llu] [", infer__gguf_type_name(kv->arr_type),
                      (unsigned long long)kv->arr_n);
        for (j = 0; j < show; j++) {
            if (j) infer__append(buf, size, &pos, ", ");
            if (kv->arr_type == INFER_GGUF_STRING) infer__append_str(buf, size, &pos, kv->strs[j].p, kv->strs[j].n, 40);
            else infer__append_scalar(buf, size, &pos, kv->arr_type, kv->data + j * infer__gguf_scalar_size(kv->arr_type));
        }
        infer__append(buf, size, &pos, kv->arr_n > show ? ", ...]" : "]");
    } else {
        infer__append_scalar(buf, size, &pos, kv->type, kv->data);
    }
    if (size && pos >= size) buf[size - 1] = 0;
    return (int)pos;
}
