/* test_gguf.c - the GGUF reader: every accessor on small files built here
   byte by byte (a tiny GGUF writer), every malformed variant refused with a
   clear error, every truncation refused, the files in ../shared/bad refused
   by name, and random byte flips of a real model never crashing. Every
   buffer handed to the reader is a heap block of exactly the file's size,
   so an over-read shows up under ASan. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "testutil.h"
#include "tests/status_calls.h"

/* ---- a tiny GGUF writer --------------------------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static void wb_bytes(wbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = (uint8_t *)realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void wb_u8(wbuf *b, uint8_t v) { wb_bytes(b, &v, 1); }
static void wb_u16(wbuf *b, uint16_t v) { wb_bytes(b, &v, 2); }
static void wb_u32(wbuf *b, uint32_t v) { wb_bytes(b, &v, 4); }
static void wb_u64(wbuf *b, uint64_t v) { wb_bytes(b, &v, 8); }
static void wb_f32(wbuf *b, float v) { wb_bytes(b, &v, 4); }
static void wb_f64(wbuf *b, double v) { wb_bytes(b, &v, 8); }
static void wb_str(wbuf *b, const char *s) {
    wb_u64(b, strlen(s));
    wb_bytes(b, s, strlen(s));
}
static void wb_pad(wbuf *b, size_t align) {
    while (b->n % align) wb_u8(b, 0);
}
static void wb_free(wbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

static void gg_header(wbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    wb_bytes(b, "GGUF", 4);
    wb_u32(b, version);
    wb_u64(b, n_tensors);
    wb_u64(b, n_kv);
}
static void kv_key(wbuf *b, const char *key, uint32_t type) {
    wb_str(b, key);
    wb_u32(b, type);
}
static void kv_str(wbuf *b, const char *key, const char *v) {
    kv_key(b, key, T_STR);
    wb_str(b, v);
}
static void kv_u32(wbuf *b, const char *key, uint32_t v) {
    kv_key(b, key, T_U32);
    wb_u32(b, v);
}
/* A tensor info: name, n_dims, ne[n_ne], type, offset. */
static void tinfo_raw(wbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t n_ne, uint32_t type,
                      uint64_t offset) {
    uint32_t d;
    wb_str(b, name);
    wb_u32(b, n_dims);
    for (d = 0; d < n_ne; d++) wb_u64(b, ne[d]);
    wb_u32(b, type);
    wb_u64(b, offset);
}
static void tinfo(wbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset) {
    tinfo_raw(b, name, n_dims, ne, n_dims, type, offset);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ---- the rich file: every value type, three tensors ------------------------ */

#define N_TENSORS 3
typedef struct layout {
    int64_t n_kv;
    uint64_t alignment;
    size_t data_offset;
    uint64_t off[N_TENSORS];
    size_t nbytes[N_TENSORS];
} layout;

static const char *tname[N_TENSORS] = {"token_embd.weight", "blk.0.attn_q.weight", "four.dims"};
static const uint32_t ttype[N_TENSORS] = {0 /* F32 */, 8 /* Q8_0 */, 1 /* F16 */};
static const uint32_t tdims[N_TENSORS] = {2, 1, 4};
static const uint64_t tne[N_TENSORS][4] = {{4, 3, 1, 1}, {64, 1, 1, 1}, {2, 3, 2, 2}};
static const size_t tbytes[N_TENSORS] = {4 * 3 * 4, 2 * 34, 24 * 2};

static uint8_t data_byte(int t, size_t j) { return (uint8_t)(t * 31 + j * 7 + 1); }

#define N_BIG_STRS 200

/* version 2 or 3; alignment 0 leaves general.alignment out (32 applies);
   with_tensors 0 makes a vocab-only file that ends right after the KVs. */
static void build_rich(wbuf *b, uint32_t version, uint32_t alignment, int with_tensors, layout *L) {
    wbuf kv = {0};
    int64_t n_kv = 0;
    int i;
    char s[32];
    uint64_t a = alignment ? alignment : 32;

    kv_str(&kv, "general.architecture", "testarch"), n_kv++;
    kv_key(&kv, "t.u8", T_U8), wb_u8(&kv, 200), n_kv++;
    kv_key(&kv, "t.i8", T_I8), wb_u8(&kv, (uint8_t)(int8_t)-100), n_kv++;
    kv_key(&kv, "t.u16", T_U16), wb_u16(&kv, 60000), n_kv++;
    kv_key(&kv, "t.i16", T_I16), wb_u16(&kv, (uint16_t)(int16_t)-30000), n_kv++;
    kv_key(&kv, "t.u32", T_U32), wb_u32(&kv, 4000000000u), n_kv++;
    kv_key(&kv, "t.i32", T_I32), wb_u32(&kv, (uint32_t)(int32_t)-2000000000), n_kv++;
    kv_key(&kv, "t.f32", T_F32), wb_f32(&kv, 1.5f), n_kv++;
    kv_key(&kv, "t.bool", T_BOOL), wb_u8(&kv, 1), n_kv++;
    kv_key(&kv, "t.bool0", T_BOOL), wb_u8(&kv, 0), n_kv++;
    kv_str(&kv, "t.str", "hello \"q\"\nline2"), n_kv++;
    kv_key(&kv, "t.u64", T_U64), wb_u64(&kv, UINT64_MAX), n_kv++;
    kv_key(&kv, "t.i64", T_I64), wb_u64(&kv, (uint64_t)(int64_t)-9000000000000000000LL), n_kv++;
    kv_key(&kv, "t.f64", T_F64), wb_f64(&kv, -2.25), n_kv++;
    kv_key(&kv, "t.arr_i32", T_ARR), wb_u32(&kv, T_I32), wb_u64(&kv, 3);
    wb_u32(&kv, 1), wb_u32(&kv, (uint32_t)-2), wb_u32(&kv, 3), n_kv++;
    kv_key(&kv, "t.arr_str", T_ARR), wb_u32(&kv, T_STR), wb_u64(&kv, 4);
    wb_str(&kv, "a"), wb_str(&kv, "bc"), wb_str(&kv, ""), wb_str(&kv, "xyz"), n_kv++;
    kv_key(&kv, "t.arr_empty", T_ARR), wb_u32(&kv, T_U8), wb_u64(&kv, 0), n_kv++;
    kv_key(&kv, "t.arr_f32", T_ARR), wb_u32(&kv, T_F32), wb_u64(&kv, 10);
    for (i = 0; i < 10; i++) wb_f32(&kv, 1000.0f + (float)i);
    n_kv++;
    kv_key(&kv, "t.arr_u64", T_ARR), wb_u32(&kv, T_U64), wb_u64(&kv, 1), wb_u64(&kv, (uint64_t)1 << 40), n_kv++;
    kv_key(&kv, "t.arr_bigstr", T_ARR), wb_u32(&kv, T_STR), wb_u64(&kv, N_BIG_STRS);
    for (i = 0; i < N_BIG_STRS; i++) snprintf(s, sizeof s, "s%d", i), wb_str(&kv, s);
    n_kv++;
    kv_str(&kv, "t.empty_str", ""), n_kv++;
    if (alignment) kv_u32(&kv, "general.alignment", alignment), n_kv++;

    gg_header(b, version, with_tensors ? N_TENSORS : 0, (uint64_t)n_kv);
    wb_bytes(b, kv.p, kv.n);
    wb_free(&kv);
    memset(L, 0, sizeof *L);
    L->n_kv = n_kv;
    L->alignment = a;
    if (!with_tensors) return;
    {
        uint64_t off = 0;
        for (i = 0; i < N_TENSORS; i++) {
            L->off[i] = off;
            L->nbytes[i] = tbytes[i];
            tinfo(b, tname[i], tdims[i], tne[i], ttype[i], off);
            off = align_up(off + tbytes[i], a);
        }
    }
    wb_pad(b, (size_t)a);
    L->data_offset = b->n;
    for (i = 0; i < N_TENSORS; i++) {
        size_t j;
        while (b->n < L->data_offset + L->off[i]) wb_u8(b, 0xee);
        for (j = 0; j < tbytes[i]; j++) wb_u8(b, data_byte(i, j));
    }
    /* the file ends exactly where the last tensor's data does */
}

/* ---- checks ---------------------------------------------------------------- */

static uint8_t *dup_exact(const void *p, size_t n) {
    uint8_t *c = (uint8_t *)malloc(n ? n : 1);
    cr_assert_not_null(c);
    if (n) memcpy(c, p, n);
    return c;
}

static void check_err(const infer_error *err, const char *what, const char *via, const char *kw) {
    size_t len = strnlen(err->msg, sizeof err->msg);
    cr_assert_neq(err->code, INFER_OK, "%s (%s): refused but the error code is INFER_OK", what, via);
    cr_assert(len > 0 && len < sizeof err->msg, "%s (%s): empty or unterminated error message", what, via);
    cr_assert_null(strchr(err->msg, '\n'), "%s (%s): error message is not one line: %s", what, via, err->msg);
    cr_assert(tu_names_any(err->msg, kw), "%s (%s): error \"%s\" does not name the problem (%s)", what, via, err->msg,
              kw);
}

static void fresh(infer_error *err) {
    memset(err, 0, sizeof *err);
    err->code = INFER_OK;
}

static char *write_temp(const void *data, size_t n) {
    char *path = strdup("/tmp/infer_test_gguf_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp failed");
    cr_assert_eq(write(fd, data, n), (ssize_t)n);
    close(fd);
    return path;
}

/* The file must be refused by the GGUF reader and the model loader, from
   memory; with via_file, from a file too. */
static void refuse_ex(const void *data, size_t n, const char *what, const char *kw, int via_file) {
    uint8_t *c = dup_exact(data, n);
    infer_error err;
    infer_gguf *g;
    infer_model *m;
    infer_model_params mp = infer_model_default_params();

    fresh(&err);
    g = infer_gguf_open_memory(c, n, &err);
    if (g) infer_gguf_close(g);
    cr_assert_null(g, "%s: infer_gguf_open_memory accepted it", what);
    check_err(&err, what, "infer_gguf_open_memory", kw);

    fresh(&err);
    m = infer_model_load_memory(c, n, NULL, &err);
    if (m) infer_model_free(m);
    cr_assert_null(m, "%s: infer_model_load_memory accepted it", what);
    check_err(&err, what, "infer_model_load_memory", kw);

    mp.vocab_only = 1;
    fresh(&err);
    m = infer_model_load_memory(c, n, &mp, &err);
    if (m) infer_model_free(m);
    cr_assert_null(m, "%s: infer_model_load_memory (vocab only) accepted it", what);
    check_err(&err, what, "infer_model_load_memory vocab_only", kw);

    if (via_file) {
        char *path = write_temp(c, n);
        fresh(&err);
        g = infer_gguf_open(path, &err);
        if (g) infer_gguf_close(g);
        cr_assert_null(g, "%s: infer_gguf_open accepted it", what);
        check_err(&err, what, "infer_gguf_open", kw);
        fresh(&err);
        m = infer_model_load(path, NULL, &err);
        if (m) infer_model_free(m);
        cr_assert_null(m, "%s: infer_model_load accepted it", what);
        check_err(&err, what, "infer_model_load", kw);
        unlink(path);
        free(path);
    }
    free(c);
}

static void refuse(const wbuf *b, const char *what, const char *kw) { refuse_ex(b->p, b->n, what, kw, 1); }

static infer_gguf *open_ok(const wbuf *b, uint8_t **copy, const char *what) {
    infer_error err;
    infer_gguf *g;
    *copy = dup_exact(b->p, b->n);
    fresh(&err);
    g = infer_gguf_open_memory(*copy, b->n, &err);
    cr_assert_not_null(g, "%s: refused a valid file: %s", what, err.msg);
    return g;
}

static void accept_ok(const wbuf *b, const char *what) {
    uint8_t *c;
    infer_gguf *g = open_ok(b, &c, what);
    infer_gguf_close(g);
    free(c);
}

/* finds each string in s, each after the one before */
static int in_order(const char *s, const char *const *parts, int n) {
    int i;
    for (i = 0; i < n; i++) {
        const char *f = strstr(s, parts[i]);
        if (!f) return 0;
        s = f + strlen(parts[i]);
    }
    return 1;
}

static void kv_string(const infer_gguf *g, const char *key, char *buf, size_t size) {
    int64_t i = infer_gguf_find_key(g, key);
    cr_assert_geq(i, 0, "key %s not found", key);
    cr_assert_geq(sc_gguf_kv_to_string(g, i, buf, size), 0, "kv_to_string(%s) failed", key);
    cr_assert_null(strchr(buf, '\n'), "rendering of %s is not one line: %s", key, buf);
}

static void expect_kv(const infer_gguf *g, const char *key, infer_gguf_type type, const char *want) {
    char buf[1024];
    int64_t i = infer_gguf_find_key(g, key);
    cr_assert_geq(i, 0, "key %s not found", key);
    cr_assert_str_eq(infer_gguf_key(g, i), key);
    cr_assert_eq(infer_gguf_kv_type(g, i), type, "%s: type %d, want %d", key, (int)infer_gguf_kv_type(g, i), (int)type);
    kv_string(g, key, buf, sizeof buf);
    if (want) cr_assert_str_eq(buf, want, "%s renders as %s, want %s", key, buf, want);
}

static void check_rich(const infer_gguf *g, const uint8_t *base, uint32_t version, const layout *L, int with_tensors) {
    char buf[1024];
    int64_t i;
    cr_assert_eq(infer_gguf_version(g), version);
    cr_assert_eq(infer_gguf_n_kv(g), L->n_kv);
    cr_assert_eq(infer_gguf_n_tensors(g), with_tensors ? N_TENSORS : 0);
    cr_assert_null(infer_gguf_key(g, -1));
    cr_assert_null(infer_gguf_key(g, L->n_kv));
    cr_assert_eq(infer_gguf_find_key(g, "no.such.key"), -1);
    cr_assert_eq(infer_gguf_find_key(g, "t.u"), -1, "a prefix of a key is not the key");
    cr_assert_eq(infer_gguf_find_key(g, "general.architecture"), 0);
    for (i = 0; i < L->n_kv; i++) cr_assert_eq(infer_gguf_find_key(g, infer_gguf_key(g, i)), i);

    expect_kv(g, "t.u8", INFER_GGUF_TYPE_UINT8, "200");
    expect_kv(g, "t.i8", INFER_GGUF_TYPE_INT8, "-100");
    expect_kv(g, "t.u16", INFER_GGUF_TYPE_UINT16, "60000");
    expect_kv(g, "t.i16", INFER_GGUF_TYPE_INT16, "-30000");
    expect_kv(g, "t.u32", INFER_GGUF_TYPE_UINT32, "4000000000");
    expect_kv(g, "t.i32", INFER_GGUF_TYPE_INT32, "-2000000000");
    expect_kv(g, "t.f32", INFER_GGUF_TYPE_FLOAT32, "1.5");
    expect_kv(g, "t.bool", INFER_GGUF_TYPE_BOOL, "true");
    expect_kv(g, "t.bool0", INFER_GGUF_TYPE_BOOL, "false");
    expect_kv(g, "t.u64", INFER_GGUF_TYPE_UINT64, "18446744073709551615");
    expect_kv(g, "t.i64", INFER_GGUF_TYPE_INT64, "-9000000000000000000");
    expect_kv(g, "t.f64", INFER_GGUF_TYPE_FLOAT64, "-2.25");
    if (L->alignment != 32) {
        char want[32];
        snprintf(want, sizeof want, "%llu", (unsigned long long)L->alignment);
        expect_kv(g, "general.alignment", INFER_GGUF_TYPE_UINT32, want);
    }

    expect_kv(g, "general.architecture", INFER_GGUF_TYPE_STRING, NULL);
    kv_string(g, "general.architecture", buf, sizeof buf);
    cr_assert(strstr(buf, "testarch"), "architecture renders as %s", buf);
    expect_kv(g, "t.str", INFER_GGUF_TYPE_STRING, NULL);
    kv_string(g, "t.str", buf, sizeof buf);
    {
        const char *p[] = {"hello", "q", "line2"};
        cr_assert(in_order(buf, p, 3), "t.str renders as %s", buf);
    }
    expect_kv(g, "t.empty_str", INFER_GGUF_TYPE_STRING, NULL);

    expect_kv(g, "t.arr_i32", INFER_GGUF_TYPE_ARRAY, NULL);
    kv_string(g, "t.arr_i32", buf, sizeof buf);
    {
        const char *p[] = {"3", "1", "-2", "3"};
        cr_assert(in_order(buf, p, 4), "t.arr_i32 renders as %s", buf);
    }
    expect_kv(g, "t.arr_str", INFER_GGUF_TYPE_ARRAY, NULL);
    kv_string(g, "t.arr_str", buf, sizeof buf);
    {
        const char *p[] = {"4", "a", "bc", "xyz"};
        cr_assert(in_order(buf, p, 4), "t.arr_str renders as %s", buf);
    }
    expect_kv(g, "t.arr_empty", INFER_GGUF_TYPE_ARRAY, NULL);
    kv_string(g, "t.arr_empty", buf, sizeof buf);
    cr_assert(strstr(buf, "0"), "t.arr_empty renders as %s", buf);
    expect_kv(g, "t.arr_f32", INFER_GGUF_TYPE_ARRAY, NULL);
    kv_string(g, "t.arr_f32", buf, sizeof buf);
    {
        const char *p[] = {"10", "1000", "1001"};
        cr_assert(in_order(buf, p, 3), "t.arr_f32 renders as %s", buf);
        cr_assert_null(strstr(buf, "1009"), "10-element array not abbreviated: %s", buf);
    }
    expect_kv(g, "t.arr_u64", INFER_GGUF_TYPE_ARRAY, NULL);
    kv_string(g, "t.arr_u64", buf, sizeof buf);
    cr_assert(strstr(buf, "1099511627776"), "t.arr_u64 renders as %s", buf);
    expect_kv(g, "t.arr_bigstr", INFER_GGUF_TYPE_ARRAY, NULL);
    kv_string(g, "t.arr_bigstr", buf, sizeof buf);
    {
        const char *p[] = {"200", "s0", "s1"};
        cr_assert(in_order(buf, p, 3), "t.arr_bigstr renders as %s", buf);
        cr_assert_lt(strlen(buf), 400, "200-string array not abbreviated (%zu chars)", strlen(buf));
        cr_assert_null(strstr(buf, "s199"), "200-string array not abbreviated: %s", buf);
    }

    /* rendering into small buffers: always terminated, a prefix of the whole */
    for (i = 0; i < L->n_kv; i++) {
        char full[1024], small[8];
        size_t sz;
        char sentinel = 'Z';
        cr_assert_geq(sc_gguf_kv_to_string(g, i, full, sizeof full), 0);
        for (sz = 1; sz <= sizeof small; sz++) {
            memset(small, 'X', sizeof small);
            infer_gguf_kv_to_string(g, i, small, sz, NULL, NULL);
            cr_assert_lt(strnlen(small, sz), sz, "key %lld: not terminated in %zu bytes", (long long)i, sz);
            cr_assert_eq(strncmp(small, full, strlen(small)), 0, "key %lld: truncated rendering is not a prefix",
                         (long long)i);
        }
        infer_gguf_kv_to_string(g, i, &sentinel, 0, NULL, NULL);
        cr_assert_eq(sentinel, 'Z', "kv_to_string wrote into a 0-byte buffer");
    }
    cr_assert_lt(sc_gguf_kv_to_string(g, -1, buf, sizeof buf), 0);
    cr_assert_lt(sc_gguf_kv_to_string(g, L->n_kv, buf, sizeof buf), 0);

    /* tensors */
    for (i = 0; i < (with_tensors ? N_TENSORS : 0); i++) {
        infer_tensor_info t;
        int d;
        memset(&t, 0, sizeof t);
        cr_assert_eq(infer_gguf_find_tensor(g, tname[i]), i);
        cr_assert(sc_gguf_tensor(g, i, &t));
        cr_assert_str_eq(t.name, tname[i]);
        cr_assert_eq((uint32_t)t.type, ttype[i]);
        cr_assert_eq(t.n_dims, (int)tdims[i]);
        for (d = 0; d < 4; d++)
            cr_assert_eq(t.ne[d], (int64_t)(d < (int)tdims[i] ? tne[i][d] : 1), "%s ne[%d] = %lld", tname[i], d,
                         (long long)t.ne[d]);
        cr_assert_eq(t.offset, L->off[i], "%s offset %llu, want %llu", tname[i], (unsigned long long)t.offset,
                     (unsigned long long)L->off[i]);
        cr_assert_eq(t.offset % L->alignment, 0);
        cr_assert_eq(t.nbytes, L->nbytes[i], "%s: %zu bytes, want %zu", tname[i], t.nbytes, L->nbytes[i]);
        cr_assert_eq((const uint8_t *)t.data, base + L->data_offset + L->off[i],
                     "%s: data at file offset %td, want %zu", tname[i], (const uint8_t *)t.data - base,
                     (size_t)(L->data_offset + L->off[i]));
        {
            size_t j;
            for (j = 0; j < t.nbytes; j++)
                cr_assert_eq(((const uint8_t *)t.data)[j], data_byte((int)i, j), "%s: data byte %zu", tname[i], j);
        }
    }
    {
        infer_tensor_info t;
        cr_assert_eq(infer_gguf_find_tensor(g, "no.such.tensor"), -1);
        cr_assert_eq(infer_gguf_find_tensor(g, "blk.0"), -1);
        cr_assert_eq(sc_gguf_tensor(g, -1, &t), 0);
        cr_assert_eq(sc_gguf_tensor(g, with_tensors ? N_TENSORS : 0, &t), 0);
    }
    cr_assert_str_eq(infer_type_name(INFER_TYPE_F32), "F32");
    cr_assert_str_eq(infer_type_name(INFER_TYPE_Q8_0), "Q8_0");
    cr_assert_str_eq(infer_type_name(INFER_TYPE_BF16), "BF16");
    /* 4 and 5 were Q4_2 and Q4_3, long removed; 1000 was never a type */
    cr_assert_str_eq(infer_type_name((infer_type)4), "unknown");
    cr_assert_str_eq(infer_type_name((infer_type)1000), "unknown");
}

/* ---- valid files ------------------------------------------------------------ */

static void roundtrip(uint32_t version, uint32_t alignment, int with_tensors) {
    wbuf b = {0};
    layout L;
    uint8_t *c;
    infer_gguf *g;
    char *path;
    infer_error err;
    build_rich(&b, version, alignment, with_tensors, &L);
    if (with_tensors) cr_assert_eq(L.data_offset % L.alignment, 0);
    g = open_ok(&b, &c, "rich file");
    check_rich(g, c, version, &L, with_tensors);
    infer_gguf_close(g);
    free(c);

    /* the same from a file (mapped) */
    path = write_temp(b.p, b.n);
    fresh(&err);
    g = infer_gguf_open(path, &err);
    cr_assert_not_null(g, "from file: %s", err.msg);
    if (with_tensors) {
        infer_tensor_info t;
        cr_assert(sc_gguf_tensor(g, 0, &t));
        check_rich(g, (const uint8_t *)t.data - L.data_offset, version, &L, with_tensors);
    } else {
        check_rich(g, NULL, version, &L, 0);
    }
    infer_gguf_close(g);
    unlink(path);
    free(path);
    wb_free(&b);
}

Test(gguf, v3_every_value_type_and_tensors) { roundtrip(3, 0, 1); }
Test(gguf, v2_every_value_type_and_tensors) { roundtrip(2, 0, 1); }
Test(gguf, custom_alignment_64) { roundtrip(3, 64, 1); }
Test(gguf, custom_alignment_8) { roundtrip(3, 8, 1); }
Test(gguf, vocab_only_ends_after_kvs) { roundtrip(3, 0, 0); }
Test(gguf, vocab_only_v2) { roundtrip(2, 0, 0); }

Test(gguf, empty_file_with_no_kvs_and_no_tensors) {
    wbuf b = {0};
    uint8_t *c;
    infer_gguf *g;
    gg_header(&b, 3, 0, 0);
    g = open_ok(&b, &c, "header only");
    cr_assert_eq(infer_gguf_n_kv(g), 0);
    cr_assert_eq(infer_gguf_n_tensors(g), 0);
    cr_assert_eq(infer_gguf_find_key(g, "general.architecture"), -1);
    infer_gguf_close(g);
    free(c);
    wb_free(&b);
}

Test(gguf, vocab_only_file_with_tensor_table_but_no_data_is_refused) {
    /* tensor infos promise data the file does not hold */
    wbuf b = {0};
    layout L;
    build_rich(&b, 3, 0, 1, &L);
    b.n = L.data_offset - 1; /* cut just before the data section */
    refuse(&b, "tensor table without data", NULL);
    wb_free(&b);
}

Test(gguf, shared_vocab_only_files_open) {
    DIR *d;
    struct dirent *e;
    char dir[512], path[1024];
    int n = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no tokenizer GGUF files to open");
    snprintf(dir, sizeof dir, "%s/tokenizer", INFER_SHARED_DIR);
    d = opendir(dir);
    cr_assert_not_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        infer_error err;
        infer_gguf *g;
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        fresh(&err);
        g = infer_gguf_open(path, &err);
        cr_assert_not_null(g, "%s: %s", e->d_name, err.msg);
        cr_assert_eq(infer_gguf_n_tensors(g), 0, "%s has tensors", e->d_name);
        cr_assert_geq(infer_gguf_find_key(g, "tokenizer.ggml.tokens"), 0, "%s lacks tokens", e->d_name);
        infer_gguf_close(g);
        n++;
    }
    closedir(d);
    cr_assert_gt(n, 0, "no tokenizer GGUF files in %s", dir);
}

Test(gguf, real_model_tensor_table) {
    char path[512];
    infer_error err;
    infer_gguf *g;
    infer_tensor_info t;
    int64_t i, ia;
    char buf[256];
    size_t total = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to open");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    g = infer_gguf_open(path, &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert(infer_gguf_version(g) == 2 || infer_gguf_version(g) == 3);
    ia = infer_gguf_find_key(g, "general.architecture");
    cr_assert_geq(ia, 0);
    cr_assert_eq(infer_gguf_kv_type(g, ia), INFER_GGUF_TYPE_STRING);
    infer_gguf_kv_to_string(g, ia, buf, sizeof buf, NULL, NULL);
    cr_assert(strstr(buf, "llama"), "architecture renders as %s", buf);
    i = infer_gguf_find_tensor(g, "blk.0.attn_q.weight");
    cr_assert_geq(i, 0);
    cr_assert(sc_gguf_tensor(g, i, &t));
    /* README: F32, dim 64 */
    cr_assert_eq(t.type, INFER_TYPE_F32);
    cr_assert_eq(t.n_dims, 2);
    cr_assert_eq(t.ne[0], 64);
    cr_assert_eq(t.ne[1], 64);
    cr_assert_eq(t.nbytes, 64 * 64 * 4);
    cr_assert_not_null(t.data);
    i = infer_gguf_find_tensor(g, "token_embd.weight");
    cr_assert_geq(i, 0);
    cr_assert(sc_gguf_tensor(g, i, &t));
    cr_assert_eq(t.ne[0], 64);
    cr_assert_eq(t.ne[1], 512);
    for (i = 0; i < infer_gguf_n_tensors(g); i++) {
        cr_assert(sc_gguf_tensor(g, i, &t));
        total += t.nbytes;
    }
    /* the weights take all but the header of the 1.18 MB file */
    cr_assert_lt(total, (size_t)1185376);
    cr_assert_gt(total, (size_t)1185376 - 200000);
    infer_gguf_close(g);
}

/* ---- ../shared/bad ----------------------------------------------------------- */

Test(gguf, shared_bad_files_refused_clearly) {
    DIR *d;
    struct dirent *e;
    char dir[512], path[1024];
    int n = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no bad files to check");
    snprintf(dir, sizeof dir, "%s/bad", INFER_SHARED_DIR);
    d = opendir(dir);
    cr_assert_not_null(d);
    while ((e = readdir(d)) != NULL) {
        const char *kw = NULL;
        infer_error err;
        infer_gguf *g;
        infer_model *m;
        size_t len;
        char *data;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!strcmp(e->d_name, "gguf-v1.gguf")) kw = "version 1";
        else if (!strcmp(e->d_name, "rows-not-multiple-of-block.gguf")) kw = "block";

        /* the model loader must refuse it (the GGUF reader may already) */
        fresh(&err);
        m = infer_model_load(path, NULL, &err);
        if (m) infer_model_free(m);
        cr_assert_null(m, "%s: infer_model_load accepted it", e->d_name);
        check_err(&err, e->d_name, "infer_model_load", kw);

        data = tu_read_file(path, &len);
        cr_assert_not_null(data);
        fresh(&err);
        m = infer_model_load_memory(data, len, NULL, &err);
        if (m) infer_model_free(m);
        cr_assert_null(m, "%s: infer_model_load_memory accepted it", e->d_name);
        check_err(&err, e->d_name, "infer_model_load_memory", kw);
        free(data);

        fresh(&err);
        g = infer_gguf_open(path, &err);
        if (!strcmp(e->d_name, "gguf-v1.gguf")) {
            if (g) infer_gguf_close(g);
            cr_assert_null(g, "gguf-v1.gguf: infer_gguf_open accepted version 1");
            check_err(&err, e->d_name, "infer_gguf_open", kw);
        } else if (!g) {
            check_err(&err, e->d_name, "infer_gguf_open", kw);
        } else {
            infer_gguf_close(g);
        }
        n++;
    }
    closedir(d);
    cr_assert_geq(n, 2, "expected at least the two files the README lists in %s", dir);
}

/* ---- truncations -------------------------------------------------------------- */

static void every_prefix_refused(const wbuf *b, const char *what) {
    size_t len;
    for (len = 0; len < b->n; len++) {
        char w[128];
        snprintf(w, sizeof w, "%s cut to %zu of %zu bytes", what, len, b->n);
        refuse_ex(b->p, len, w, NULL, 0);
    }
}

Test(gguf, every_truncation_of_a_file_with_tensors) {
    wbuf b = {0};
    layout L;
    build_rich(&b, 3, 0, 1, &L);
    accept_ok(&b, "whole file");
    every_prefix_refused(&b, "file with tensors");
    wb_free(&b);
}

Test(gguf, every_truncation_of_a_vocab_only_file) {
    wbuf b = {0};
    layout L;
    build_rich(&b, 2, 64, 0, &L);
    accept_ok(&b, "whole file");
    every_prefix_refused(&b, "vocab-only file");
    wb_free(&b);
}

/* ---- malformed variants of a one-tensor file ---------------------------------- */

/* general.architecture, an optional extra KV, one tensor, data. */
static void one_tensor(wbuf *b, uint32_t version, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset, size_t data_bytes) {
    gg_header(b, version, 1, 1);
    kv_str(b, "general.architecture", "testarch");
    tinfo(b, name, n_dims, ne, type, offset);
    wb_pad(b, 32);
    while (data_bytes--) wb_u8(b, 0);
}

static void good_one_tensor(void) {
    wbuf b = {0};
    const uint64_t ne[2] = {4, 3};
    one_tensor(&b, 3, "w", 2, ne, 0, 0, 48);
    accept_ok(&b, "baseline one-tensor file");
    wb_free(&b);
}

Test(gguf, bad_magic) {
    wbuf b = {0};
    layout L;
    const char *magics[] = {"GGUX", "gguf", "FUGG", "\0GGU", "GGML", "GGJT"};
    size_t i;
    for (i = 0; i < sizeof magics / sizeof magics[0]; i++) {
        build_rich(&b, 3, 0, 1, &L);
        memcpy(b.p, magics[i], 4);
        refuse(&b, "bad magic", "magic|not a GGUF");
        b.n = 0;
    }
    wb_free(&b);
    refuse_ex("", 0, "empty file", NULL, 1);
    refuse_ex("GGU", 3, "3-byte file", NULL, 1);
    refuse_ex("GGUF", 4, "magic only", NULL, 1);
    refuse_ex("GGUF\3\0\0", 7, "magic and part of the version", NULL, 1);
}

Test(gguf, unsupported_versions) {
    const uint32_t versions[] = {0, 1, 4, 5, 0xffffffffu, 0x7fffffffu};
    size_t i;
    for (i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        wbuf b = {0};
        layout L;
        char what[64];
        build_rich(&b, versions[i], 0, 1, &L);
        snprintf(what, sizeof what, "version %u", versions[i]);
        refuse(&b, what, "version");
        wb_free(&b);
    }
}

Test(gguf, big_endian_refused) {
    wbuf b = {0};
    layout L;
    const uint8_t be3[4] = {0, 0, 0, 3}, be2[4] = {0, 0, 0, 2};
    build_rich(&b, 3, 0, 1, &L);
    memcpy(b.p + 4, be3, 4);
    refuse(&b, "big-endian version 3", "endian|version");
    memcpy(b.p + 4, be2, 4);
    refuse(&b, "big-endian version 2", "endian|version");
    wb_free(&b);
}

Test(gguf, absurd_counts) {
    const uint64_t big[] = {(uint64_t)1 << 60, (uint64_t)1 << 63, UINT64_MAX, (uint64_t)1 << 32, 1000000};
    size_t i;
    for (i = 0; i < sizeof big / sizeof big[0]; i++) {
        wbuf b = {0};
        layout L;
        char what[96];
        build_rich(&b, 3, 0, 1, &L);
        memcpy(b.p + 16, &big[i], 8); /* n_kv */
        snprintf(what, sizeof what, "n_kv = %llu", (unsigned long long)big[i]);
        refuse(&b, what, NULL);
        b.n = 0;
        build_rich(&b, 3, 0, 1, &L);
        memcpy(b.p + 8, &big[i], 8); /* n_tensors */
        snprintf(what, sizeof what, "n_tensors = %llu", (unsigned long long)big[i]);
        refuse(&b, what, NULL);
        wb_free(&b);
    }
}

Test(gguf, string_length_past_end) {
    const uint64_t lens[] = {(uint64_t)1 << 63, UINT64_MAX, (uint64_t)1 << 32, 5000};
    size_t i;
    for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        wbuf b = {0};
        uint64_t ne[1] = {32};
        /* a key */
        gg_header(&b, 3, 0, 1);
        wb_u64(&b, lens[i]);
        wb_bytes(&b, "general.name", 12);
        wb_u32(&b, T_U8);
        wb_u8(&b, 1);
        refuse(&b, "key length past the end", NULL);
        b.n = 0;
        /* a string value */
        gg_header(&b, 3, 0, 1);
        kv_key(&b, "general.name", T_STR);
        wb_u64(&b, lens[i]);
        wb_bytes(&b, "abc", 3);
        refuse(&b, "string value past the end", NULL);
        b.n = 0;
        /* an element of a string array */
        gg_header(&b, 3, 0, 1);
        kv_key(&b, "tokenizer.ggml.tokens", T_ARR);
        wb_u32(&b, T_STR);
        wb_u64(&b, 3);
        wb_str(&b, "a");
        wb_u64(&b, lens[i]);
        wb_bytes(&b, "bcdefghijklmnopqrstuvwxyz", 25);
        refuse(&b, "string array element past the end", NULL);
        b.n = 0;
        /* a scalar array longer than the file */
        gg_header(&b, 3, 0, 1);
        kv_key(&b, "tokenizer.ggml.scores", T_ARR);
        wb_u32(&b, T_F32);
        wb_u64(&b, lens[i]);
        wb_f32(&b, 1.0f);
        refuse(&b, "scalar array past the end", NULL);
        b.n = 0;
        /* a tensor name */
        gg_header(&b, 3, 1, 0);
        wb_u64(&b, lens[i]);
        wb_bytes(&b, "w", 1);
        wb_u32(&b, 1);
        wb_u64(&b, ne[0]);
        wb_u32(&b, 0);
        wb_u64(&b, 0);
        wb_pad(&b, 32);
        wb_bytes(&b, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 64);
        wb_bytes(&b, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 64);
        refuse(&b, "tensor name past the end", NULL);
        wb_free(&b);
    }
}

Test(gguf, unknown_value_types) {
    const uint32_t types[] = {13, 14, 100, 0x80000000u, 0xffffffffu};
    size_t i;
    for (i = 0; i < sizeof types / sizeof types[0]; i++) {
        wbuf b = {0};
        gg_header(&b, 3, 0, 2);
        kv_str(&b, "general.architecture", "x");
        kv_key(&b, "my.key", types[i]);
        wb_u64(&b, 0);
        wb_u64(&b, 0);
        refuse(&b, "unknown value type", "type");
        b.n = 0;
        gg_header(&b, 3, 0, 2);
        kv_str(&b, "general.architecture", "x");
        kv_key(&b, "my.key", T_ARR);
        wb_u32(&b, types[i]);
        wb_u64(&b, 2);
        wb_u64(&b, 0);
        wb_u64(&b, 0);
        refuse(&b, "unknown array element type", "type");
        wb_free(&b);
    }
}

Test(gguf, nested_arrays) {
    wbuf b = {0};
    gg_header(&b, 3, 0, 1);
    kv_key(&b, "nested.arr", T_ARR);
    wb_u32(&b, T_ARR);
    wb_u64(&b, 1);
    /* the inner array, as a writer that allowed nesting would lay it out */
    wb_u32(&b, T_U8);
    wb_u64(&b, 2);
    wb_u8(&b, 1);
    wb_u8(&b, 2);
    refuse(&b, "array of arrays", "nested.arr|array|type");
    wb_free(&b);
}

Test(gguf, unknown_tensor_types) {
    const uint32_t types[] = {4, 5, 31, 32, 33, 38, 40, 1000, 0xffffffffu};
    size_t i;
    good_one_tensor();
    for (i = 0; i < sizeof types / sizeof types[0]; i++) {
        wbuf b = {0};
        const uint64_t ne[2] = {256, 3};
        char what[64];
        one_tensor(&b, 3, "w", 2, ne, types[i], 0, 4096);
        snprintf(what, sizeof what, "tensor type %u", types[i]);
        refuse(&b, what, "type");
        wb_free(&b);
    }
}

/* MXFP4 (type 39, 17-byte blocks of 32) is a known type: a 64 x 3
   tensor is 6 blocks, 102 bytes */
Test(gguf, mxfp4_tensor_loads) {
    wbuf b = {0};
    const uint64_t ne[2] = {64, 3};
    one_tensor(&b, 3, "w", 2, ne, 39, 0, 102);
    accept_ok(&b, "one MXFP4 tensor");
    wb_free(&b);
    cr_assert_str_eq(infer_type_name(INFER_TYPE_MXFP4), "MXFP4");
}

Test(gguf, bad_dimension_counts) {
    const uint32_t dims[] = {0, 5, 8, 0xffffffffu};
    const uint64_t ne[8] = {4, 1, 1, 1, 1, 1, 1, 1};
    size_t i;
    good_one_tensor();
    for (i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        wbuf b = {0};
        char what[64];
        gg_header(&b, 3, 1, 1);
        kv_str(&b, "general.architecture", "testarch");
        tinfo_raw(&b, "w", dims[i], ne, dims[i] <= 8 ? dims[i] : 4, 0, 0);
        wb_pad(&b, 32);
        while (b.n < 512) wb_u8(&b, 0);
        snprintf(what, sizeof what, "%u dimensions", dims[i]);
        refuse(&b, what, "dimension");
        wb_free(&b);
    }
}

Test(gguf, zero_and_overflowing_dimensions) {
    static const struct {
        uint32_t n_dims;
        uint64_t ne[4];
        const char *what;
    } cases[] = {
        {2, {4, 0}, "zero dimension"},
        {1, {0}, "zero length vector"},
        {4, {4, 1, 0, 1}, "zero third dimension"},
        {3, {(uint64_t)1 << 32, (uint64_t)1 << 32, (uint64_t)1 << 32}, "2^96 elements"},
        {1, {(uint64_t)1 << 63}, "2^63 elements"},
        {1, {UINT64_MAX}, "2^64-1 elements"},
        {2, {UINT64_MAX, UINT64_MAX}, "(2^64-1)^2 elements"},
        {4, {(uint64_t)1 << 21, (uint64_t)1 << 21, (uint64_t)1 << 21, (uint64_t)1 << 21}, "2^84 elements"},
        {2, {(uint64_t)1 << 62, 4}, "2^64 elements (wraps to 0)"},
        {2, {4, (uint64_t)1 << 62}, "2^64 elements, other order"},
        {2, {(uint64_t)1 << 32, (uint64_t)1 << 32}, "2^64 elements (wraps to 0) in two"},
    };
    size_t i;
    good_one_tensor();
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wbuf b = {0};
        one_tensor(&b, 3, "w", cases[i].n_dims, cases[i].ne, 0, 0, 256);
        refuse(&b, cases[i].what, NULL);
        wb_free(&b);
    }
}

Test(gguf, rows_not_whole_blocks) {
    static const struct {
        uint32_t type;
        uint64_t ne0;
    } cases[] = {{8, 33}, {8, 16}, {2, 48}, {3, 1}, {6, 31}, {7, 65}, {12 /* Q4_K */, 128}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wbuf b = {0};
        const uint64_t ne[2] = {cases[i].ne0, 2};
        char what[64];
        one_tensor(&b, 3, "w", 2, ne, cases[i].type, 0, 4096);
        snprintf(what, sizeof what, "type %u rows of %llu", cases[i].type, (unsigned long long)cases[i].ne0);
        refuse(&b, what, "block");
        wb_free(&b);
    }
}

Test(gguf, misaligned_tensor_offset) {
    const uint64_t offs[] = {4, 1, 31, 33};
    const uint64_t ne[1] = {8};
    size_t i;
    good_one_tensor();
    for (i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        wbuf b = {0};
        one_tensor(&b, 3, "w", 1, ne, 0, offs[i], 256);
        refuse(&b, "misaligned tensor offset", "align");
        wb_free(&b);
    }
    {
        /* aligned to the default 32 but not to a custom 64 */
        wbuf b = {0};
        gg_header(&b, 3, 1, 2);
        kv_str(&b, "general.architecture", "x");
        kv_u32(&b, "general.alignment", 64);
        tinfo(&b, "w", 1, ne, 0, 32);
        wb_pad(&b, 64);
        while (b.n % 64 || b.n < 256) wb_u8(&b, 0);
        refuse(&b, "offset 32 with alignment 64", "align");
        wb_free(&b);
    }
}

Test(gguf, tensor_data_past_end) {
    static const struct {
        uint64_t offset;
        size_t data;
        const char *what;
    } cases[] = {
        {0, 47, "data one byte short"},
        {32, 48, "offset pushes data past the end"},
        {(uint64_t)1 << 63, 48, "offset 2^63"},
        {UINT64_MAX & ~(uint64_t)31, 48, "offset near 2^64 (sum wraps)"},
        {(uint64_t)1 << 40, 48, "offset 2^40"},
    };
    const uint64_t ne[2] = {4, 3};
    size_t i;
    good_one_tensor();
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wbuf b = {0};
        one_tensor(&b, 3, "weights.past.end", 2, ne, 0, cases[i].offset, cases[i].data);
        refuse(&b, cases[i].what, "weights.past.end|end|past|truncat");
        wb_free(&b);
    }
}

Test(gguf, duplicate_tensor_names) {
    wbuf b = {0};
    const uint64_t ne[1] = {8};
    gg_header(&b, 3, 2, 1);
    kv_str(&b, "general.architecture", "x");
    tinfo(&b, "dup.weight", 1, ne, 0, 0);
    tinfo(&b, "dup.weight", 1, ne, 0, 32);
    wb_pad(&b, 32);
    while (b.n % 32 || b.n < 512) wb_u8(&b, 0);
    refuse(&b, "two tensors with one name", "dup.weight");
    /* the same with distinct names is fine */
    b.n = 0;
    gg_header(&b, 3, 2, 1);
    kv_str(&b, "general.architecture", "x");
    tinfo(&b, "dup.weight", 1, ne, 0, 0);
    tinfo(&b, "dup.weighu", 1, ne, 0, 32);
    wb_pad(&b, 32);
    while (b.n % 32 || b.n < 512) wb_u8(&b, 0);
    accept_ok(&b, "two tensors with two names");
    wb_free(&b);
}

Test(gguf, bad_alignment) {
    /* GGUF: a multiple of 8 (and a power of two, as llama.cpp requires);
       1 would put F32 weights at odd addresses */
    const uint32_t aligns[] = {0, 1, 2, 3, 4, 12, 24, 48, 100, 1u << 25, 0xffffffffu};
    const uint64_t ne[1] = {8};
    size_t i;
    for (i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        wbuf b = {0};
        char what[64];
        gg_header(&b, 3, 1, 2);
        kv_str(&b, "general.architecture", "x");
        kv_u32(&b, "general.alignment", aligns[i]);
        tinfo(&b, "w", 1, ne, 0, 0);
        wb_pad(&b, 32);
        while (b.n < 1024) wb_u8(&b, 0);
        snprintf(what, sizeof what, "alignment %u", aligns[i]);
        refuse(&b, what, "align");
        wb_free(&b);
    }
    {
        /* alignment as a string, and as a negative number */
        wbuf b = {0};
        gg_header(&b, 3, 1, 1);
        kv_str(&b, "general.alignment", "32");
        tinfo(&b, "w", 1, ne, 0, 0);
        wb_pad(&b, 32);
        while (b.n < 1024) wb_u8(&b, 0);
        refuse(&b, "alignment as a string", "align");
        b.n = 0;
        gg_header(&b, 3, 1, 1);
        kv_key(&b, "general.alignment", T_I32);
        wb_u32(&b, (uint32_t)-32);
        tinfo(&b, "w", 1, ne, 0, 0);
        wb_pad(&b, 32);
        while (b.n < 1024) wb_u8(&b, 0);
        refuse(&b, "alignment -32", "align");
        b.n = 0;
        /* 32, but not the u32 GGUF prescribes */
        gg_header(&b, 3, 1, 1);
        kv_key(&b, "general.alignment", T_U64);
        wb_u64(&b, 32);
        tinfo(&b, "w", 1, ne, 0, 0);
        wb_pad(&b, 32);
        while (b.n < 1024) wb_u8(&b, 0);
        refuse(&b, "alignment as a u64", "general.alignment");
        wb_free(&b);
    }
}

Test(gguf, duplicate_keys) {
    wbuf b = {0};
    gg_header(&b, 3, 0, 3);
    kv_str(&b, "general.architecture", "x");
    kv_u32(&b, "twice.key", 1);
    kv_u32(&b, "twice.key", 2);
    refuse(&b, "a key twice", "twice.key");
    wb_free(&b);
}

Test(gguf, overlapping_tensor_data) {
    static const struct {
        uint64_t off_a, off_b;
        int overlaps;
    } cases[] = {{0, 0, 1}, {0, 32, 1}, {64, 32, 1}, {0, 64, 0}, {64, 0, 0}, {128, 0, 0}};
    const uint64_t ne[1] = {16}; /* 64 bytes of F32 */
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wbuf b = {0};
        char what[64];
        gg_header(&b, 3, 2, 1);
        kv_str(&b, "general.architecture", "x");
        tinfo(&b, "first", 1, ne, 0, cases[i].off_a);
        tinfo(&b, "second", 1, ne, 0, cases[i].off_b);
        wb_pad(&b, 32);
        while (b.n % 32 || b.n < 512) wb_u8(&b, 0);
        snprintf(what, sizeof what, "tensors at offsets %llu and %llu", (unsigned long long)cases[i].off_a,
                 (unsigned long long)cases[i].off_b);
        if (cases[i].overlaps) refuse(&b, what, "overlap");
        else accept_ok(&b, what);
        wb_free(&b);
    }
}

/* ---- absurd hyperparameters in a real model ----------------------------------- */

/* Finds a u32 key's value in a GGUF's bytes (the key string, then type 4). */
static uint8_t *find_u32_value(uint8_t *data, size_t len, const char *key) {
    size_t k = strlen(key), i;
    for (i = 8; i + k + 8 <= len; i++)
        if (!memcmp(data + i, key, k) && data[i + k] == T_U32 && !memcmp(data + i - 8, &(uint64_t){k}, 8))
            return data + i + k + 4;
    return NULL;
}

Test(gguf, absurd_layer_count_refused_without_allocating) {
    char path[512];
    size_t len;
    uint8_t *data, *v;
    const uint32_t counts[] = {1u << 24, 1u << 20, 100000};
    size_t i;
    struct rusage ru;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to patch");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    data = (uint8_t *)tu_read_file(path, &len);
    cr_assert_not_null(data);
    v = find_u32_value(data, len, "llama.block_count");
    cr_assert_not_null(v, "no u32 llama.block_count in the model");
    for (i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        infer_error err;
        infer_model *m;
        char what[64];
        memcpy(v, &counts[i], 4);
        fresh(&err);
        m = infer_model_load_memory(data, len, NULL, &err);
        if (m) infer_model_free(m);
        snprintf(what, sizeof what, "block_count %u", counts[i]);
        cr_assert_null(m, "%s: loaded", what);
        check_err(&err, what, "infer_model_load_memory", NULL);
    }
    free(data);
    /* a file of 1.2 MB claiming 2^24 layers must not make the loader
       allocate per-layer tables for all of them first */
    getrusage(RUSAGE_SELF, &ru);
    cr_assert_lt((double)ru.ru_maxrss * 1024, 400e6, "peak RSS %.0f MB after loading a model claiming 2^24 layers",
                 ru.ru_maxrss / 1024.0);
}

/* ---- fuzzing ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Whatever opens must be readable through every accessor. */
static void exercise(const infer_gguf *g) {
    char buf[512];
    int64_t i;
    for (i = 0; i < infer_gguf_n_kv(g); i++) {
        cr_assert_not_null(infer_gguf_key(g, i));
        infer_gguf_kv_to_string(g, i, buf, sizeof buf, NULL, NULL);
        cr_assert_lt(strlen(buf), sizeof buf);
    }
    for (i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        cr_assert(sc_gguf_tensor(g, i, &t));
        cr_assert(t.n_dims >= 1 && t.n_dims <= 4);
        /* the reader refuses unknown types, so whatever opened has a known one */
        cr_assert_str_neq(infer_type_name(t.type), "unknown", "tensor %s has type %d", t.name, (int)t.type);
    }
}

static uint8_t mutate_byte(uint64_t *rng, uint8_t old) {
    switch (rng_next(rng) % 6) {
    case 0: return (uint8_t)(old ^ (1u << (rng_next(rng) % 8)));
    case 1: return 0;
    case 2: return 0xff;
    case 3: return (uint8_t)(old + 1);
    case 4: return (uint8_t)(old - 1);
    default: return (uint8_t)rng_next(rng);
    }
}

Test(gguf, random_mutations_of_real_model_never_crash, .timeout = 120) {
    char path[512];
    size_t len, hdr_end = 0;
    uint8_t *data;
    infer_error err;
    infer_gguf *g;
    uint64_t rng = 20250101;
    int it, opened = 0, loaded = 0, refused = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to mutate");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    data = (uint8_t *)tu_read_file(path, &len);
    cr_assert_not_null(data);
    /* the header region: everything before the first tensor's data */
    g = infer_gguf_open_memory(data, len, &err);
    cr_assert_not_null(g, "%s", err.msg);
    hdr_end = len;
    {
        int64_t i;
        for (i = 0; i < infer_gguf_n_tensors(g); i++) {
            infer_tensor_info t;
            infer_gguf_tensor(g, i, &t, NULL);
            if ((size_t)((const uint8_t *)t.data - data) < hdr_end) hdr_end = (size_t)((const uint8_t *)t.data - data);
        }
    }
    infer_gguf_close(g);
    cr_assert(hdr_end > 64 && hdr_end < len);

    for (it = 0; it < 2000; it++) {
        size_t pos[8];
        uint8_t old[8];
        int k, n_mut = 1 + (int)(rng_next(&rng) % 4);
        infer_model *m;
        for (k = 0; k < n_mut; k++) {
            /* half the flips in the first 64 bytes (header, first keys) */
            pos[k] = (size_t)(rng_next(&rng) % (k == 0 && (it & 1) ? 64 : hdr_end));
            old[k] = data[pos[k]];
            data[pos[k]] = mutate_byte(&rng, old[k]);
        }
        fresh(&err);
        g = infer_gguf_open_memory(data, len, &err);
        if (g) {
            opened++;
            exercise(g);
            infer_gguf_close(g);
        } else {
            check_err(&err, "mutated model", "infer_gguf_open_memory", NULL);
        }
        fresh(&err);
        m = infer_model_load_memory(data, len, NULL, &err);
        if (m) {
            char desc[256];
            loaded++;
            cr_assert_gt(infer_model_n_vocab(m), 0);
            infer_model_describe(m, desc, sizeof desc, NULL, NULL);
            infer_model_free(m);
        } else {
            refused++;
            check_err(&err, "mutated model", "infer_model_load_memory", NULL);
        }
        for (k = n_mut - 1; k >= 0; k--) data[pos[k]] = old[k];
    }
    cr_log_info("2000 mutations of %zu header bytes: %d opened, %d loaded, %d refused", hdr_end, opened, loaded,
                refused);
    cr_assert_gt(refused, 0, "no mutation was refused: the mutations do not reach the parser");
    free(data);
}

Test(gguf, random_truncations_and_mutations_of_real_model_header) {
    char path[512];
    size_t len;
    uint8_t *data;
    uint64_t rng = 7;
    int it, opened = 0, loaded = 0, refused = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to mutate");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    data = (uint8_t *)tu_read_file(path, &len);
    cr_assert_not_null(data);
    for (it = 0; it < 1000; it++) {
        /* a prefix inside the metadata (exact-size copy, so ASan sees any
           read past its end), with a few bytes changed */
        size_t n = (size_t)(rng_next(&rng) % 16384), k, n_mut = rng_next(&rng) % 3;
        uint8_t *c = dup_exact(data, n);
        infer_error err;
        infer_gguf *g;
        infer_model *m;
        for (k = 0; k < n_mut && n; k++) {
            size_t pos = (size_t)(rng_next(&rng) % n);
            c[pos] = mutate_byte(&rng, c[pos]);
        }
        fresh(&err);
        g = infer_gguf_open_memory(c, n, &err);
        if (g) {
            opened++;
            exercise(g);
            infer_gguf_close(g);
        } else {
            check_err(&err, "truncated model", "infer_gguf_open_memory", NULL);
        }
        fresh(&err);
        m = infer_model_load_memory(c, n, NULL, &err);
        if (m) {
            loaded++;
            infer_model_free(m);
        } else {
            refused++;
            check_err(&err, "truncated model", "infer_model_load_memory", NULL);
        }
        free(c);
    }
    cr_log_info("1000 truncated models: %d opened as GGUF, %d loaded, %d refused", opened, loaded, refused);
    /* no prefix of 16 KiB holds the weights of a 1.2 MB model */
    cr_assert_eq(loaded, 0, "%d models cut to under 16 KiB loaded", loaded);
    cr_assert_eq(refused, 1000);
    free(data);
}

Test(gguf, every_byte_of_a_small_file_mutated) {
    wbuf b = {0};
    layout L;
    size_t i;
    const uint8_t repl[] = {0x00, 0xff, 0x80, 0x7f};
    int opened = 0;
    build_rich(&b, 3, 0, 1, &L);
    for (i = 0; i < L.data_offset; i++) {
        size_t r;
        for (r = 0; r < sizeof repl / sizeof repl[0] + 1; r++) {
            uint8_t *c = dup_exact(b.p, b.n);
            infer_error err;
            infer_gguf *g;
            c[i] = r < sizeof repl ? repl[r] : (uint8_t)(c[i] ^ 1);
            fresh(&err);
            g = infer_gguf_open_memory(c, b.n, &err);
            if (g) {
                opened++;
                exercise(g);
                infer_gguf_close(g);
            } else {
                check_err(&err, "mutated small file", "infer_gguf_open_memory", NULL);
            }
            free(c);
        }
    }
    cr_assert_gt(opened, 0);
    wb_free(&b);
}
