/* gguf.c - reads a GGUF file: header, metadata, tensor table, data offsets.
   Every count, length and offset is checked against the bytes actually
   there before it is used, so malformed files end in an error naming the
   field, never a crash. Layout: magic "GGUF", u32 version, u64 n_tensors,
   u64 n_kv, the key-value pairs, the tensor infos, padding to
   general.alignment, data. */
#include "internal.h"

typedef struct infer__reader {
    const uint8_t *p, *begin, *end;
    infer_error *err;
    int failed;
} infer__reader;

/* Names from the file go into messages cut to this many bytes, so the
   problem itself always fits in the 256-byte message. */
#define INFER__NAME_MAX_SHOWN 96
/* GGUF's limit on a tensor's name (llama.cpp refuses longer ones too). */
#define INFER__GGUF_MAX_TENSOR_NAME 64

static int infer__rd_fail(infer__reader *r, infer_status code, const char *fmt, ...) INFER__PRINTF(3, 4);
static int infer__rd_fail(infer__reader *r, infer_status code, const char *fmt, ...) {
    if (!r->failed && r->err) {
        va_list ap;
        char msg[sizeof r->err->msg];
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        infer__set_error(r->err, code, "%s", msg);
    }
    r->failed = 1;
    return 0;
}

static int infer__rd_nomem(infer__reader *r) { return infer__rd_fail(r, INFER_ERR_NOMEM, "out of memory reading GGUF"); }

static uint64_t infer__rd_left(const infer__reader *r) { return (uint64_t)(r->end - r->p); }

/* Takes n bytes (copied to dst unless NULL); 0, with no message, when the
   file ends first: the caller says what was cut off. */
static int infer__rd_bytes(infer__reader *r, void *dst, uint64_t n) {
    if (r->failed || infer__rd_left(r) < n) return 0;
    if (dst) memcpy(dst, r->p, (size_t)n);
    r->p += n;
    return 1;
}

static int infer__rd_u32(infer__reader *r, uint32_t *v) { return infer__rd_bytes(r, v, 4); }
static int infer__rd_u64(infer__reader *r, uint64_t *v) { return infer__rd_bytes(r, v, 8); }

/* A string: u64 length, then the bytes. 0 when the length is cut off or
   runs past the end (*len tells which: UINT64_MAX when cut off). */
static int infer__rd_str(infer__reader *r, infer__str *s, uint64_t *len) {
    *len = UINT64_MAX;
    if (!infer__rd_u64(r, len) || *len > infer__rd_left(r)) return 0;
    s->p = (const char *)r->p;
    s->n = *len;
    r->p += *len;
    return 1;
}

/* The message for a string (named by where) that could not be read. */
static int infer__rd_str_fail(infer__reader *r, uint64_t len, const char *where) {
    if (len == UINT64_MAX)
        return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the length of %s", where);
    return infer__rd_fail(r, INFER_ERR_FORMAT,
                          "GGUF corrupt: %s has a string length of %llu, past the end of the file (%llu bytes left)",
                          where, (unsigned long long)len, (unsigned long long)infer__rd_left(r));
}

static size_t infer__gguf_scalar_size(infer_gguf_type t) {
    switch (t) {
    case INFER_GGUF_TYPE_UINT8: case INFER_GGUF_TYPE_INT8: case INFER_GGUF_TYPE_BOOL: return 1;
    case INFER_GGUF_TYPE_UINT16: case INFER_GGUF_TYPE_INT16: return 2;
    case INFER_GGUF_TYPE_UINT32: case INFER_GGUF_TYPE_INT32: case INFER_GGUF_TYPE_FLOAT32: return 4;
    case INFER_GGUF_TYPE_UINT64: case INFER_GGUF_TYPE_INT64: case INFER_GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static const char *infer__gguf_type_name(infer_gguf_type t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "str", "arr", "u64", "i64", "f64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static int infer__rd_kv(infer__reader *r, infer__kv *kv, uint64_t index) {
    infer__str key, s;
    uint32_t type;
    uint64_t len;
    size_t es;
    char where[160];
    if (!infer__rd_str(r, &key, &len)) {
        snprintf(where, sizeof where, "the name of key #%llu", (unsigned long long)index);
        return infer__rd_str_fail(r, len, where);
    }
    kv->key = infer__strndup(key.p, (size_t)key.n);
    if (!kv->key) return infer__rd_nomem(r);
    if (!infer__rd_u32(r, &type))
        return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the type of key %.*s",
                              INFER__NAME_MAX_SHOWN, kv->key);
    kv->type = (infer_gguf_type)type;
    kv->data = r->p;
    if (type == INFER_GGUF_TYPE_STRING) {
        if (infer__rd_str(r, &s, &len)) return 1;
        snprintf(where, sizeof where, "the value of key %.*s", INFER__NAME_MAX_SHOWN, kv->key);
        return infer__rd_str_fail(r, len, where);
    }
    if (type == INFER_GGUF_TYPE_ARRAY) {
        uint32_t et;
        uint64_t n, i;
        if (!infer__rd_u32(r, &et) || !infer__rd_u64(r, &n))
            return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the array header of key %.*s",
                                  INFER__NAME_MAX_SHOWN, kv->key);
        kv->arr_type = (infer_gguf_type)et;
        kv->arr_n = n;
        kv->data = r->p;
        if (et == INFER_GGUF_TYPE_STRING) {
            /* every element takes at least its 8-byte length */
            if (n > infer__rd_left(r) / 8)
                return infer__rd_fail(r, INFER_ERR_FORMAT,
                                      "GGUF key %.*s: array length %llu (strings of 8 bytes or more) cannot fit in the %llu bytes left",
                                      INFER__NAME_MAX_SHOWN, kv->key, (unsigned long long)n,
                                      (unsigned long long)infer__rd_left(r));
            kv->strs = (infer__str *)infer__calloc((size_t)n, sizeof(infer__str));
            if (!kv->strs && n) return infer__rd_nomem(r);
            for (i = 0; i < n; i++)
                if (!infer__rd_str(r, &kv->strs[i], &len)) {
                    snprintf(where, sizeof where, "element %.*s[%llu]", INFER__NAME_MAX_SHOWN, kv->key,
                             (unsigned long long)i);
                    return infer__rd_str_fail(r, len, where);
                }
            return 1;
        }
        es = infer__gguf_scalar_size((infer_gguf_type)et);
        if (!es)
            return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF key %.*s: unsupported array element type %u",
                                  INFER__NAME_MAX_SHOWN, kv->key, et);
        if (n > infer__rd_left(r) / es)
            return infer__rd_fail(r, INFER_ERR_FORMAT,
                                  "GGUF key %.*s: array length %llu of %s runs past the end of the file (%llu bytes left)",
                                  INFER__NAME_MAX_SHOWN, kv->key, (unsigned long long)n,
                                  infer__gguf_type_name((infer_gguf_type)et), (unsigned long long)infer__rd_left(r));
        r->p += n * es;
        return 1;
    }
    es = infer__gguf_scalar_size((infer_gguf_type)type);
    if (!es)
        return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF key %.*s: unknown value type %u", INFER__NAME_MAX_SHOWN,
                              kv->key, type);
    if (!infer__rd_bytes(r, NULL, es))
        return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the value of key %.*s",
                              INFER__NAME_MAX_SHOWN, kv->key);
    return 1;
}

static int infer__rd_tensor(infer__reader *r, infer__tensor *t, uint64_t index) {
    infer__str name;
    uint32_t n_dims, type;
    uint64_t n_el = 1, len, nbytes;
    int d;
    const infer__type_traits *tt;
    if (!infer__rd_str(r, &name, &len)) {
        char where[48];
        snprintf(where, sizeof where, "the name of tensor #%llu", (unsigned long long)index);
        return infer__rd_str_fail(r, len, where);
    }
    if (name.n > INFER__GGUF_MAX_TENSOR_NAME)
        return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF tensor #%llu: name of %llu bytes is longer than GGUF's %d",
                              (unsigned long long)index, (unsigned long long)name.n, INFER__GGUF_MAX_TENSOR_NAME);
    t->name = infer__strndup(name.p, (size_t)name.n);
    if (!t->name) return infer__rd_nomem(r);
    if (!infer__rd_u32(r, &n_dims))
        return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the dimension count of tensor %s",
                              t->name);
    if (n_dims < 1 || n_dims > 4)
        return infer__rd_fail(r, INFER_ERR_FORMAT, "tensor %s: %u dimensions (1 to 4 allowed)", t->name, n_dims);
    t->n_dims = (int)n_dims;
    for (d = 0; d < 4; d++) t->ne[d] = 1;
    for (d = 0; d < (int)n_dims; d++) {
        uint64_t ne;
        if (!infer__rd_u64(r, &ne))
            return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside dimension %d of tensor %s",
                                  d, t->name);
        /* 2^40 per dimension and 2^50 in all are far beyond any model and
           keep every product below, and every byte size, in 64 bits; a
           negative int64 reads as huge here */
        if (ne == 0 || ne > ((uint64_t)1 << 40))
            return infer__rd_fail(r, INFER_ERR_FORMAT, "tensor %s: dimension %d = %lld is out of range (1 to 2^40)",
                                  t->name, d, (long long)ne);
        if (n_el > (((uint64_t)1 << 50) / ne))
            return infer__rd_fail(r, INFER_ERR_FORMAT,
                                  "tensor %s: the product of its dimensions overflows (more than 2^50 values)", t->name);
        t->ne[d] = (int64_t)ne;
        n_el *= ne;
    }
    if (!infer__rd_u32(r, &type) || !infer__rd_u64(r, &t->offset))
        return infer__rd_fail(r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the type or offset of tensor %s",
                              t->name);
    t->type = (infer_type)type;
    tt = type < INFER_TYPE_COUNT ? infer__traits((infer_type)type) : NULL;
    if (!tt || !tt->block_size)
        return infer__rd_fail(r, INFER_ERR_UNSUPPORTED, "tensor %s: unknown tensor type %u", t->name, type);
    if (t->ne[0] % tt->block_size != 0)
        return infer__rd_fail(r, INFER_ERR_FORMAT,
                              "tensor %s: rows of %lld values are not a whole number of %d-value %s blocks", t->name,
                              (long long)t->ne[0], tt->block_size, tt->name);
    /* at most 2^50 / 1 blocks of a few hundred bytes: no overflow in 64 bits */
    nbytes = n_el / (uint64_t)tt->block_size * (uint64_t)tt->type_size;
    if (nbytes > (uint64_t)SIZE_MAX)
        return infer__rd_fail(r, INFER_ERR_FORMAT, "tensor %s: %llu bytes do not fit this machine's memory", t->name,
                              (unsigned long long)nbytes);
    t->nbytes = (size_t)nbytes;
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
    INFER_FREE(g->kv_by_key);
    INFER_FREE(g->tensor_by_name);
}

static int infer__kv_ptr_cmp(const void *a, const void *b) {
    return strcmp((*(const infer__kv *const *)a)->key, (*(const infer__kv *const *)b)->key);
}
static int infer__tensor_name_cmp(const void *a, const void *b) {
    return strcmp((*(const infer__tensor *const *)a)->name, (*(const infer__tensor *const *)b)->name);
}
/* by offset, ties in file order: which two an overlap error names must
   not depend on the C library's qsort */
static int infer__tensor_offset_cmp(const void *a, const void *b) {
    const infer__tensor *x = *(const infer__tensor *const *)a, *y = *(const infer__tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x > y) - (x < y); /* both point into g->tensors */
}

/* Sorted indexes of the keys and tensor names: a name twice is refused
   (which of two values would a reader take?), and lookups are binary
   searches, so a file with very many keys or tensors cannot make loading
   quadratic. */
static int infer__gguf_index(infer_gguf *g, infer_error *err) {
    int64_t i;
    g->kv_by_key = (infer__kv **)infer__calloc((size_t)g->n_kv, sizeof *g->kv_by_key);
    g->tensor_by_name = (infer__tensor **)infer__calloc((size_t)g->n_tensors, sizeof *g->tensor_by_name);
    if (!g->kv_by_key || !g->tensor_by_name) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (i = 0; i < g->n_kv; i++) g->kv_by_key[i] = &g->kv[i];
    for (i = 0; i < g->n_tensors; i++) g->tensor_by_name[i] = &g->tensors[i];
    if (g->n_kv > 1) qsort(g->kv_by_key, (size_t)g->n_kv, sizeof *g->kv_by_key, infer__kv_ptr_cmp);
    if (g->n_tensors > 1)
        qsort(g->tensor_by_name, (size_t)g->n_tensors, sizeof *g->tensor_by_name, infer__tensor_name_cmp);
    for (i = 1; i < g->n_kv; i++)
        if (!strcmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key)) {
            infer__set_error(err, INFER_ERR_FORMAT, "GGUF key %.*s appears twice", INFER__NAME_MAX_SHOWN,
                             g->kv_by_key[i]->key);
            return 0;
        }
    for (i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->tensor_by_name[i - 1]->name, g->tensor_by_name[i]->name)) {
            infer__set_error(err, INFER_ERR_FORMAT, "tensor %s appears twice", g->tensor_by_name[i]->name);
            return 0;
        }
    return 1;
}

/* general.alignment: a u32, a power of two and a multiple of 8 (GGUF's
   rule; an odd one would put F32 weights at odd addresses). */
static int infer__gguf_alignment(infer_gguf *g, infer_error *err) {
    const infer__kv *kv = infer__gguf_kv(g, "general.alignment");
    uint32_t a;
    g->alignment = 32;
    if (!kv) return 1;
    if (kv->type != INFER_GGUF_TYPE_UINT32) {
        infer__set_error(err, INFER_ERR_FORMAT, "GGUF key general.alignment must be a u32, not %s",
                         kv->type == INFER_GGUF_TYPE_ARRAY ? "an array" : infer__gguf_type_name(kv->type));
        return 0;
    }
    memcpy(&a, kv->data, 4);
    if (a < 8 || a % 8 != 0 || (a & (a - 1)) != 0 || a > (1u << 24)) {
        infer__set_error(err, INFER_ERR_FORMAT,
                         "GGUF key general.alignment = %u: must be a power of two, a multiple of 8, at most 2^24", a);
        return 0;
    }
    g->alignment = a;
    return 1;
}

/* Each tensor's data: aligned, inside the file, and no two overlapping
   (one tensor's bytes would be another's). */
static int infer__gguf_place_tensors(infer_gguf *g, infer_error *err) {
    int64_t i;
    infer__tensor **by_offset;
    for (i = 0; i < g->n_tensors; i++) {
        infer__tensor *t = &g->tensors[i];
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
    if (g->n_tensors < 2) return 1;
    by_offset = (infer__tensor **)infer__calloc((size_t)g->n_tensors, sizeof *by_offset);
    if (!by_offset) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (i = 0; i < g->n_tensors; i++) by_offset[i] = &g->tensors[i];
    qsort(by_offset, (size_t)g->n_tensors, sizeof *by_offset, infer__tensor_offset_cmp);
    for (i = 1; i < g->n_tensors; i++) {
        const infer__tensor *a = by_offset[i - 1], *b = by_offset[i];
        /* both lie inside the file (checked above): the sum cannot wrap */
        if (a->offset + a->nbytes > b->offset) {
            infer__set_error(err, INFER_ERR_FORMAT,
                             "tensors %s and %s overlap: data at offsets %llu (%zu bytes) and %llu", a->name, b->name,
                             (unsigned long long)a->offset, a->nbytes, (unsigned long long)b->offset);
            INFER_FREE(by_offset);
            return 0;
        }
    }
    INFER_FREE(by_offset);
    return 1;
}

static int infer__gguf_parse(infer_gguf *g, infer_error *err) {
    infer__reader r;
    uint32_t version;
    uint64_t n_tensors, n_kv, i;
    uint64_t pos;
    r.p = r.begin = g->blob.data;
    r.end = g->blob.data + g->blob.size;
    r.err = err;
    r.failed = 0;

    if (g->blob.size < 4 || memcmp(g->blob.data, "GGUF", 4) != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "not a GGUF file (bad magic)");
        return 0;
    }
    r.p += 4;
    if (!infer__rd_u32(&r, &version))
        return infer__rd_fail(&r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the version");
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
    if (!infer__rd_u64(&r, &n_tensors))
        return infer__rd_fail(&r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the tensor count (n_tensors)");
    if (!infer__rd_u64(&r, &n_kv))
        return infer__rd_fail(&r, INFER_ERR_FORMAT, "GGUF truncated: the file ends inside the key count (n_kv)");
    /* a key-value pair takes at least 13 bytes (name length, type, a
       one-byte value), a tensor info at least 28 (name length, n_dims, one
       dimension, type, offset): a count the rest of the file cannot hold
       is refused before anything is allocated for it */
    if (n_kv > infer__rd_left(&r) / 13)
        return infer__rd_fail(&r, INFER_ERR_FORMAT, "GGUF header: key count n_kv = %llu cannot fit in the %llu bytes left",
                              (unsigned long long)n_kv, (unsigned long long)infer__rd_left(&r));
    if (n_tensors > infer__rd_left(&r) / 28 || n_tensors > (infer__rd_left(&r) - n_kv * 13) / 28)
        return infer__rd_fail(&r, INFER_ERR_FORMAT,
                              "GGUF header: tensor count n_tensors = %llu cannot fit in the %llu bytes left",
                              (unsigned long long)n_tensors, (unsigned long long)infer__rd_left(&r));
    g->kv = (infer__kv *)infer__calloc((size_t)n_kv, sizeof(infer__kv));
    g->tensors = (infer__tensor *)infer__calloc((size_t)n_tensors, sizeof(infer__tensor));
    if (!g->kv || !g->tensors) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t)i + 1;
        if (!infer__rd_kv(&r, &g->kv[i], i)) return 0;
    }
    for (i = 0; i < n_tensors; i++) {
        g->n_tensors = (int64_t)i + 1;
        if (!infer__rd_tensor(&r, &g->tensors[i], i)) return 0;
    }
    if (!infer__gguf_index(g, err) || !infer__gguf_alignment(g, err)) return 0;
    pos = (uint64_t)(r.p - g->blob.data);
    g->data_offset = (pos + g->alignment - 1) / g->alignment * g->alignment;
    g->has_data = g->data_offset <= g->blob.size;
    return infer__gguf_place_tensors(g, err);
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

/* Binary search of a sorted index (kv_by_key, tensor_by_name): the position
   in it of the entry that name_of calls name, or -1. */
static int64_t infer__index_find(const infer_gguf *g, int64_t n, const char *(*name_of)(const infer_gguf *, int64_t),
                                 const char *name) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name_of(g, mid), name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static const char *infer__sorted_key(const infer_gguf *g, int64_t i) { return g->kv_by_key[i]->key; }
static const char *infer__sorted_tensor(const infer_gguf *g, int64_t i) { return g->tensor_by_name[i]->name; }

INFERDEF int64_t infer_gguf_find_key(const infer_gguf *g, const char *key) {
    int64_t i = infer__index_find(g, g->n_kv, infer__sorted_key, key);
    return i < 0 ? -1 : g->kv_by_key[i] - g->kv;
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
    case INFER_GGUF_TYPE_UINT8: iv = v.u8; break;
    case INFER_GGUF_TYPE_INT8: iv = v.i8; break;
    case INFER_GGUF_TYPE_BOOL: iv = v.u8 != 0; break;
    case INFER_GGUF_TYPE_UINT16: iv = v.u16; break;
    case INFER_GGUF_TYPE_INT16: iv = v.i16; break;
    case INFER_GGUF_TYPE_UINT32: iv = v.u32; break;
    case INFER_GGUF_TYPE_INT32: iv = v.i32; break;
    case INFER_GGUF_TYPE_UINT64: iv = v.u64 > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v.u64; break;
    case INFER_GGUF_TYPE_INT64: iv = v.i64; break;
    /* no integer from a float: NaN, an infinity or 1e300 has none (the
       conversion would be undefined) */
    case INFER_GGUF_TYPE_FLOAT32: dv = v.f32; if (as_int) *as_int = 0; return dv;
    case INFER_GGUF_TYPE_FLOAT64: dv = v.f64; if (as_int) *as_int = 0; return dv;
    default: break;
    }
    if (as_int) *as_int = iv;
    return (double)iv;
}

static int infer__gguf_is_int_type(infer_gguf_type t) {
    return infer__gguf_scalar_size(t) && t != INFER_GGUF_TYPE_FLOAT32 && t != INFER_GGUF_TYPE_FLOAT64 && t != INFER_GGUF_TYPE_BOOL;
}

static int infer__gguf_get_int(const infer_gguf *g, const char *key, int64_t *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    if (!kv || !infer__gguf_is_int_type(kv->type)) return 0;
    infer__gguf_scalar(kv->type, kv->data, out);
    return 1;
}

static int infer__gguf_get_int_at(const infer_gguf *g, const char *key, uint64_t i, int64_t *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    if (!kv || kv->type != INFER_GGUF_TYPE_ARRAY || !infer__gguf_is_int_type(kv->arr_type) || i >= kv->arr_n) return 0;
    infer__gguf_scalar(kv->arr_type, kv->data + i * infer__gguf_scalar_size(kv->arr_type), out);
    return 1;
}

static int infer__gguf_get_bool_at(const infer_gguf *g, const char *key, uint64_t i, int *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    if (!kv || kv->type != INFER_GGUF_TYPE_ARRAY || kv->arr_type != INFER_GGUF_TYPE_BOOL || i >= kv->arr_n) return 0;
    *out = kv->data[i] != 0;
    return 1;
}

static int infer__gguf_get_float(const infer_gguf *g, const char *key, double *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    if (!kv || !infer__gguf_scalar_size(kv->type) || kv->type == INFER_GGUF_TYPE_BOOL) return 0;
    *out = infer__gguf_scalar(kv->type, kv->data, NULL);
    return 1;
}

static int infer__gguf_get_bool(const infer_gguf *g, const char *key, int *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    int64_t v;
    if (!kv || !infer__gguf_scalar_size(kv->type) || kv->type == INFER_GGUF_TYPE_FLOAT32 || kv->type == INFER_GGUF_TYPE_FLOAT64)
        return 0;
    infer__gguf_scalar(kv->type, kv->data, &v);
    *out = v != 0;
    return 1;
}

static int infer__gguf_get_str(const infer_gguf *g, const char *key, infer__str *out) {
    const infer__kv *kv = infer__gguf_kv(g, key);
    uint64_t n;
    if (!kv || kv->type != INFER_GGUF_TYPE_STRING) return 0;
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
    int64_t i = infer__index_find(g, g->n_tensors, infer__sorted_tensor, name);
    return i < 0 ? -1 : g->tensor_by_name[i] - g->tensors;
}

INFERDEF infer_status infer_gguf_tensor(const infer_gguf *g, int64_t i, infer_tensor_info *out, infer_error *err) {
    const infer__tensor *t;
    if (!g || !out || i < 0 || i >= g->n_tensors) {
        infer__set_error(err, INFER_ERR_ARG, "gguf tensor: %s", !g ? "no file" : !out ? "no info to write"
                         : "index out of range");
        return INFER_ERR_ARG;
    }
    t = &g->tensors[i];
    out->name = t->name;
    out->type = t->type;
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->offset = t->offset;
    out->nbytes = t->nbytes;
    out->data = t->data;
    return INFER_OK;
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
    if (t == INFER_GGUF_TYPE_BOOL) infer__append(buf, size, pos, "%s", iv ? "true" : "false");
    else if (t == INFER_GGUF_TYPE_FLOAT32 || t == INFER_GGUF_TYPE_FLOAT64) infer__append(buf, size, pos, "%g", dv);
    else if (t == INFER_GGUF_TYPE_UINT64) {
        uint64_t u;
        memcpy(&u, p, 8);
        infer__append(buf, size, pos, "%llu", (unsigned long long)u);
    } else infer__append(buf, size, pos, "%lld", (long long)iv);
}

INFERDEF infer_status infer_gguf_kv_to_string(const infer_gguf *g, int64_t i, char *buf, size_t size, size_t *n_out,
                                              infer_error *err) {
    const infer__kv *kv;
    size_t pos = 0;
    if (n_out) *n_out = 0;
    if (buf && size) buf[0] = 0;
    if (!g || (!buf && size) || i < 0 || i >= g->n_kv) {
        infer__set_error(err, INFER_ERR_ARG, "gguf value: %s", !g ? "no file" : !buf && size ? "no buffer"
                         : "index out of range");
        return INFER_ERR_ARG;
    }
    kv = &g->kv[i];
    if (kv->type == INFER_GGUF_TYPE_STRING) {
        infer__str s = {NULL, 0};
        infer__gguf_get_str(g, kv->key, &s);
        infer__append_str(buf, size, &pos, s.p, s.n, 120);
    } else if (kv->type == INFER_GGUF_TYPE_ARRAY) {
        uint64_t j, show = kv->arr_n < 6 ? kv->arr_n : 6;
        infer__append(buf, size, &pos, "[%s x %llu] [", infer__gguf_type_name(kv->arr_type),
                      (unsigned long long)kv->arr_n);
        for (j = 0; j < show; j++) {
            if (j) infer__append(buf, size, &pos, ", ");
            if (kv->arr_type == INFER_GGUF_TYPE_STRING) infer__append_str(buf, size, &pos, kv->strs[j].p, kv->strs[j].n, 40);
            else infer__append_scalar(buf, size, &pos, kv->arr_type, kv->data + j * infer__gguf_scalar_size(kv->arr_type));
        }
        infer__append(buf, size, &pos, kv->arr_n > show ? ", ...]" : "]");
    } else {
        infer__append_scalar(buf, size, &pos, kv->type, kv->data);
    }
    if (size && pos >= size) buf[size - 1] = 0;
    if (n_out) *n_out = pos;
    return INFER_OK;
}
