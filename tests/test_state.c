/* test_state.c - saved sequence states that must not be trusted blindly:
   an empty sequence saves and loads; NaN or infinite logits and KV cache
   values are refused; a flipped byte anywhere (header, tokens, logits,
   cache) is caught by the checksum; a truncated state is refused; a good
   state still continues exactly where it was saved.
   Crafting a bad state that passes the checksum needs the implementation's
   header and checksum, so this file uses a private copy (infer_private.h)
   and calls only that copy. */
#define _XOPEN_SOURCE 700 /* mkstemp, the implementation's clocks */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer_private.h"
#include "testutil.h"

/* tiny, and with heads of 64 values, which a Q8_0 cache needs */
#define MODEL "models/synth-256-q8_0.gguf"

static infer_model *load(void) {
    char path[1024];
    infer_error err;
    infer_model *m;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the state tests need its models");
    tu_shared_path(path, sizeof path, MODEL);
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    return m;
}

static infer_context *ctx(infer_model *m, infer_type kv_type) {
    infer_context_params p = infer_context_default_params();
    infer_error err;
    infer_context *c;
    p.n_ctx = 64, p.n_seq = 2, p.n_threads = 2, p.kv_type = kv_type;
    c = infer_context_new(m, &p, &err);
    cr_assert(c, "%s", err.msg);
    return c;
}

/* Decodes n tokens into sequence seq of c. */
static void decode_in(infer_context *c, int seq, const infer_token *t, int n) {
    int seqs[16], i;
    infer_batch b;
    infer_error err;
    cr_assert(n <= 16);
    for (i = 0; i < n; i++) seqs[i] = seq;
    b.n = n, b.tokens = t, b.seq = seqs, b.logits = NULL;
    cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
}

/* A context with a few tokens decoded into sequence 0; its state in *buf
   (*n bytes, caller frees). */
static infer_context *saved(infer_model *m, infer_type kv_type, uint8_t **buf, size_t *n) {
    infer_context *c = ctx(m, kv_type);
    infer_token t[12];
    int i, nv = infer_model_n_vocab(m);
    for (i = 0; i < 12; i++) t[i] = (infer_token)((i * 37 + 1) % nv);
    decode_in(c, 0, t, 12);
    *n = infer_seq_state_size(c, 0);
    *buf = (uint8_t *)malloc(*n);
    cr_assert_eq(infer_seq_state_save(c, 0, *buf, *n), *n);
    return c;
}

/* Where the parts of a state start: after the header and the per-layer
   slot counts come the tokens, the logits, then the cache. */
typedef struct layout {
    size_t tokens, logits, cache, end;
} layout;

static layout layout_of(const uint8_t *buf, size_t n) {
    infer__state_header h;
    layout l;
    memcpy(&h, buf, sizeof h);
    l.tokens = sizeof h + (size_t)h.n_slot_layers * sizeof(int32_t);
    l.logits = l.tokens + (size_t)h.n_past * sizeof(infer_token);
    l.cache = l.logits + (size_t)h.n_logits * sizeof(float);
    l.end = n;
    cr_assert(h.n_past > 0 && h.n_logits > 0 && l.cache < n);
    return l;
}

/* Makes buf's checksum match its (edited) bytes again, so that what is
   tested is the validation after the checksum. (States before version 2
   have none.) */
static void reseal(uint8_t *buf, size_t n) {
#if INFER__STATE_VERSION >= 2
    infer__state_header h;
    memcpy(&h, buf, sizeof h);
    h.checksum = infer__state_checksum(buf, n);
    memcpy(buf, &h, sizeof h);
#else
    (void)buf, (void)n;
#endif
}

/* Loading bad (n bytes) into sequence 1 of c fails with FORMAT, the
   message naming one of kw's words, and leaves sequence 1 as it was. */
static void refused(infer_context *c, const uint8_t *bad, size_t n, const char *kw, const char *what) {
    infer_error err;
    int before = infer_seq_n_past(c, 1);
    memset(&err, 0, sizeof err);
    cr_assert_eq(infer_seq_state_load(c, 1, bad, n, &err), INFER_ERR_FORMAT, "%s: loaded (or another error: %s)", what,
                 err.msg);
    cr_assert(tu_names_any(err.msg, kw), "%s: the message '%s' names none of %s", what, err.msg, kw);
    cr_assert(!strchr(err.msg, '\n'), "%s: the message is more than one line", what);
    cr_assert_eq(infer_seq_n_past(c, 1), before, "%s: the refused state changed the sequence", what);
}

static void put_f32(uint8_t *p, float v) { memcpy(p, &v, sizeof v); }
static void put_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, sizeof v); }

/* The state of an empty sequence (no tokens: its token array may be NULL)
   saves and loads, in memory and through a file, and the loaded sequence
   goes on as a fresh one. The old loader passed NULL to memcpy here, which
   UBSan (the ASan build) stops on. */
Test(state, empty_sequence_round_trip, .timeout = 120) {
    infer_model *m = load();
    infer_context *a = ctx(m, INFER_TYPE_F16), *b = ctx(m, INFER_TYPE_F16), *fresh = ctx(m, INFER_TYPE_F16);
    infer_token t[3] = {1, 2, 3};
    int nv = infer_model_n_vocab(m);
    infer_error err;
    size_t n = infer_seq_state_size(a, 0);
    uint8_t *buf = (uint8_t *)malloc(n);
    char path[] = "/tmp/infer_state_empty_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert(n > 0);
    cr_assert_eq(infer_seq_state_save(a, 0, buf, n), n);
    /* into a sequence never used (tokens NULL) and into one that has tokens */
    cr_assert_eq(infer_seq_state_load(b, 0, buf, n, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(b, 0), 0);
    decode_in(b, 1, t, 3);
    cr_assert_eq(infer_seq_state_load(b, 1, buf, n, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(b, 1), 0);
    cr_assert_null(infer_seq_logits(b, 1));
    cr_assert_eq(infer_seq_state_save_file(a, 0, path, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_state_load_file(b, 0, path, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(b, 0), 0);
    /* the emptied sequence decodes as a fresh context does */
    decode_in(b, 1, t, 3);
    decode_in(fresh, 0, t, 3);
    cr_assert_eq(memcmp(infer_seq_logits(b, 1), infer_seq_logits(fresh, 0), sizeof(float) * (size_t)nv), 0);
    remove(path);
    free(buf);
    infer_context_free(a);
    infer_context_free(b);
    infer_context_free(fresh);
    infer_model_free(m);
}

/* A NaN or an infinity among the logits is refused, naming what is wrong. */
Test(state, nan_logits_refused, .timeout = 120) {
    infer_model *m = load();
    uint8_t *buf, *bad;
    size_t n;
    infer_context *c = saved(m, INFER_TYPE_F16, &buf, &n);
    layout l = layout_of(buf, n);
    size_t at[3];
    float v[3];
    int i;
    at[0] = l.logits, at[1] = l.logits + 4 * 17, at[2] = l.cache - 4;
    v[0] = NAN, v[1] = INFINITY, v[2] = -INFINITY;
    bad = (uint8_t *)malloc(n);
    for (i = 0; i < 3; i++) {
        memcpy(bad, buf, n);
        put_f32(bad + at[i], v[i]);
        reseal(bad, n);
        refused(c, bad, n, "NaN|infinit", "a non-finite logit");
    }
    /* every logit NaN */
    memcpy(bad, buf, n);
    for (i = 0; l.logits + 4 * (size_t)i < l.cache; i++) put_f32(bad + l.logits + 4 * (size_t)i, NAN);
    reseal(bad, n);
    refused(c, bad, n, "NaN|infinit", "all logits NaN");
    free(bad);
    free(buf);
    infer_context_free(c);
    infer_model_free(m);
}

/* NaN or infinite values in an F16 cache (keys and values), and a NaN or
   infinite block scale in a Q8_0 cache, are refused. */
Test(state, nan_cache_refused, .timeout = 120) {
    infer_model *m = load();
    uint8_t *buf, *bad;
    size_t n;
    infer_context *c = saved(m, INFER_TYPE_F16, &buf, &n);
    layout l = layout_of(buf, n);
    size_t mid = l.cache + ((l.end - l.cache) / 2 & ~(size_t)1);
    bad = (uint8_t *)malloc(n);
    memcpy(bad, buf, n);
    put_u16(bad + l.cache, 0x7e00); /* NaN: the first key */
    reseal(bad, n);
    refused(c, bad, n, "NaN|infinit", "an F16 NaN key");
    memcpy(bad, buf, n);
    put_u16(bad + mid, 0xfc00); /* -inf */
    reseal(bad, n);
    refused(c, bad, n, "NaN|infinit", "an F16 infinity mid-cache");
    memcpy(bad, buf, n);
    put_u16(bad + l.end - 2, 0x7c01); /* NaN: the last value */
    reseal(bad, n);
    refused(c, bad, n, "NaN|infinit", "an F16 NaN value");
    free(bad);
    free(buf);
    infer_context_free(c);

    c = saved(m, INFER_TYPE_Q8_0, &buf, &n);
    l = layout_of(buf, n);
    cr_assert_eq((l.end - l.cache) % 34, 0, "a Q8_0 cache is whole blocks of 34 bytes");
    bad = (uint8_t *)malloc(n);
    memcpy(bad, buf, n);
    put_u16(bad + l.cache, 0x7e00); /* the first block's scale */
    reseal(bad, n);
    refused(c, bad, n, "NaN|infinit", "a Q8_0 NaN scale");
    memcpy(bad, buf, n);
    put_u16(bad + l.end - 34, 0x7c00); /* the last block's scale: +inf */
    reseal(bad, n);
    refused(c, bad, n, "NaN|infinit", "a Q8_0 infinite scale");
    free(bad);
    free(buf);
    infer_context_free(c);
    infer_model_free(m);
}

/* One flipped bit anywhere (the header's fields, the tokens, the logits,
   the cache, the checksum itself) is refused before anything is used. */
Test(state, flipped_byte_refused, .timeout = 120) {
    infer_model *m = load();
    uint8_t *buf, *bad;
    size_t n, at[12];
    infer_context *c = saved(m, INFER_TYPE_F16, &buf, &n);
    layout l = layout_of(buf, n);
    int i, k = 0;
    char what[64];
    at[k++] = 9;                                         /* the version's high bytes */
    at[k++] = offsetof(infer__state_header, n_past);     /* a count */
    at[k++] = l.tokens;                                  /* the first token's low byte */
    at[k++] = l.logits - 1;                              /* the last token's high byte */
    at[k++] = l.logits;                                  /* a logit's lowest bit */
    at[k++] = l.logits + (l.cache - l.logits) / 2;
    at[k++] = l.cache;                                   /* the first key */
    at[k++] = l.cache + (l.end - l.cache) / 3;
    at[k++] = l.end - 1;                                 /* the last value */
#if INFER__STATE_VERSION >= 2
    at[k++] = offsetof(infer__state_header, checksum) + 3;
#endif
    bad = (uint8_t *)malloc(n);
    for (i = 0; i < k; i++) {
        memcpy(bad, buf, n);
        bad[at[i]] ^= 0x01;
        snprintf(what, sizeof what, "bit 0 of byte %zu of %zu", at[i], n);
        refused(c, bad, n, "checksum|format|not a state", what);
    }
    free(bad);
    free(buf);
    infer_context_free(c);
    infer_model_free(m);
}

/* A state cut short anywhere, or with bytes after its end, is refused. */
Test(state, truncated_refused, .timeout = 120) {
    infer_model *m = load();
    uint8_t *buf, *longer;
    size_t n, cut;
    infer_context *c = saved(m, INFER_TYPE_F16, &buf, &n);
    layout l = layout_of(buf, n);
    size_t cuts[] = {0, 4, sizeof(infer__state_header) - 1, sizeof(infer__state_header), l.tokens, l.logits, l.cache,
                     n / 2, n - 2, n - 1};
    char what[64];
    for (cut = 0; cut < sizeof cuts / sizeof cuts[0]; cut++) {
        snprintf(what, sizeof what, "the first %zu of %zu bytes", cuts[cut], n);
        refused(c, buf, cuts[cut], "truncat|checksum|not a state", what);
    }
    longer = (uint8_t *)calloc(1, n + 8);
    memcpy(longer, buf, n);
    refused(c, longer, n + 8, "truncat|checksum|not a state", "8 bytes too many");
    free(longer);
    free(buf);
    infer_context_free(c);
    infer_model_free(m);
}

/* A good state (F16, Q8_0 and Q4_0 caches) still loads, in memory and from a
   file, and goes on exactly as the sequence it was saved from. */
Test(state, good_state_continues, .timeout = 120) {
    infer_model *m = load();
    infer_type types[3] = {INFER_TYPE_F16, INFER_TYPE_Q8_0, INFER_TYPE_Q4_0};
    int nv = infer_model_n_vocab(m), k, j;
    for (k = 0; k < 3; k++) {
        uint8_t *buf;
        size_t n;
        infer_context *c, *d;
        if (types[k] == INFER_TYPE_Q4_0 && infer_model_device(m) != INFER_DEVICE_CPU) {
            cr_log_info("Q4_0 cache left out: it is the CPU's only, and this model runs on %s",
                        infer_model_device_name(m));
            continue;
        }
        c = saved(m, types[k], &buf, &n), d = ctx(m, types[k]);
        infer_error err;
        infer_token t;
        const float *lc;
        char path[] = "/tmp/infer_state_good_XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        close(fd);
        cr_assert_eq(infer_seq_state_load(d, 0, buf, n, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_state_save_file(c, 0, path, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_state_load_file(d, 1, path, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_n_past(d, 0), infer_seq_n_past(c, 0));
        cr_assert_eq(memcmp(infer_seq_logits(d, 1), infer_seq_logits(c, 0), sizeof(float) * (size_t)nv), 0);
        /* three more tokens, greedily, in all three: the same logits bit for bit */
        for (j = 0; j < 3; j++) {
            int i, best = 0;
            lc = infer_seq_logits(c, 0);
            for (i = 1; i < nv; i++)
                if (lc[i] > lc[best]) best = i;
            t = best;
            decode_in(c, 0, &t, 1);
            decode_in(d, 0, &t, 1);
            cr_assert_eq(memcmp(infer_seq_logits(d, 0), infer_seq_logits(c, 0), sizeof(float) * (size_t)nv), 0,
                         "%s cache, step %d", infer_type_name(types[k]), j);
            decode_in(d, 1, &t, 1);
            cr_assert_eq(memcmp(infer_seq_logits(d, 1), infer_seq_logits(c, 0), sizeof(float) * (size_t)nv), 0,
                         "%s cache from the file, step %d", infer_type_name(types[k]), j);
        }
        remove(path);
        free(buf);
        infer_context_free(c);
        infer_context_free(d);
    }
    infer_model_free(m);
}
