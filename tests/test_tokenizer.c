/* test_tokenizer.c - the tokenizer against llama.cpp's own test suites
   (../shared/tokenizer), the reference prompts, round trips, streaming
   detokenization, and malformed vocabularies built in memory. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "tests/status_calls.h"

#define SKIP_WITHOUT_SHARED()                                                          \
    do {                                                                               \
        if (!tu_have_shared()) cr_skip_test("../shared is absent: no vocabularies to test"); \
    } while (0)

static infer_model *load_vocab(const char *rel) {
    char path[1024];
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    mp.vocab_only = 1;
    tu_shared_path(path, sizeof path, rel);
    m = infer_model_load(path, &mp, &err);
    cr_assert_not_null(m, "cannot load %s: %s", path, err.msg);
    return m;
}

/* Tokenizes into a malloc'd array; *n gets the count. */
static infer_token *tokenize(const infer_model *m, const char *s, size_t len, int add_bos, int special, int *n) {
    int need, got;
    infer_token *t;
    cr_assert_eq(infer_tokenize(m, s, len, NULL, 0, add_bos, special, &need, NULL), INFER_OK, "tokenize failed");
    t = (infer_token *)malloc(sizeof *t * (size_t)(need + 1));
    cr_assert_eq(infer_tokenize(m, s, len, t, need, add_bos, special, &got, NULL), INFER_OK);
    cr_assert_eq(got, need);
    *n = need;
    return t;
}

/* Concatenated pieces; *n gets the byte count. */
static char *detokenize(const infer_model *m, const infer_token *t, int nt, size_t *n) {
    size_t cap = 64, len = 0;
    char *out = (char *)malloc(cap);
    int i;
    for (i = 0; i < nt; i++) {
        int k = sc_token_to_piece(m, t[i], NULL, 0);
        cr_assert_geq(k, 0, "token_to_piece(%d) failed", t[i]);
        while (len + (size_t)k + 1 > cap) out = (char *)realloc(out, cap *= 2);
        cr_assert_eq(sc_token_to_piece(m, t[i], out + len, (size_t)k + 1), k);
        len += (size_t)k;
    }
    out[len] = 0;
    *n = len;
    return out;
}

/* ---- llama.cpp's suites ---------------------------------------------------- */

static void run_suite(const char *name) {
    char rel[256], path[1024], first_fail[1024] = "";
    char *inp, *outp, *s, *o;
    size_t ni, no;
    const char *sep = "\n__ggml_vocab_test__\n";
    int pass = 0, total = 0;
    infer_model *m;
    SKIP_WITHOUT_SHARED();
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf", name);
    m = load_vocab(rel);
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf.inp", name);
    tu_shared_path(path, sizeof path, rel);
    inp = tu_read_file(path, &ni);
    cr_assert_not_null(inp, "cannot read %s", path);
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf.out", name);
    tu_shared_path(path, sizeof path, rel);
    outp = tu_read_file(path, &no);
    cr_assert_not_null(outp, "cannot read %s", path);
    for (s = inp, o = outp; s && o && *o;) {
        char *e = strstr(s, sep), *ol = strchr(o, '\n'), *q;
        size_t len = e ? (size_t)(e - s) : strlen(s);
        infer_token *got, exp[2048];
        int ne = 0, ng, ok, i;
        if (ol) *ol = 0;
        for (q = o; *q && ne < 2048;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            exp[ne++] = (infer_token)v;
            q = end;
        }
        got = tokenize(m, s, len, 0, 0, &ng);
        ok = ng == ne;
        for (i = 0; ok && i < ne; i++) ok = got[i] == exp[i];
        total++;
        pass += ok;
        if (!ok && !first_fail[0]) {
            int k = snprintf(first_fail, sizeof first_fail, "first failure, text #%d \"%.40s\": expected", total, s);
            for (i = 0; i < ne && i < 12 && k < 900; i++) k += snprintf(first_fail + k, sizeof first_fail - k, " %d", exp[i]);
            k += snprintf(first_fail + k, sizeof first_fail - k, ", got");
            for (i = 0; i < ng && i < 12 && k < 1000; i++) k += snprintf(first_fail + k, sizeof first_fail - k, " %d", got[i]);
        }
        free(got);
        if (!e) break;
        s = e + strlen(sep);
        o = ol ? ol + 1 : o + strlen(o);
    }
    cr_assert_gt(total, 0, "suite %s: no texts read", name);
    cr_assert_eq(pass, total, "suite %s: %d/%d texts tokenized as llama.cpp does; %s", name, pass, total, first_fail);
    free(inp);
    free(outp);
    infer_model_free(m);
}

Test(tokenizer_suite, llama_spm) { run_suite("llama-spm"); }
Test(tokenizer_suite, phi_3) { run_suite("phi-3"); }
Test(tokenizer_suite, gpt_2) { run_suite("gpt-2"); }
Test(tokenizer_suite, llama_bpe) { run_suite("llama-bpe"); }
Test(tokenizer_suite, qwen2) { run_suite("qwen2"); }
Test(tokenizer_suite, deepseek_coder) { run_suite("deepseek-coder"); }
Test(tokenizer_suite, mpt) { run_suite("mpt"); }

/* ---- reference prompts ------------------------------------------------------ */

Test(tokenizer, stories260k_once_upon_a_time) {
    static const infer_token want[] = {1, 403, 407, 261, 378};
    infer_model *m;
    infer_token *t;
    int n, i;
    SKIP_WITHOUT_SHARED();
    m = load_vocab("models/stories260K.gguf");
    cr_assert(infer_model_add_bos(m));
    t = tokenize(m, "Once upon a time", 16, 1, 1, &n);
    cr_assert_eq(n, 5, "got %d tokens", n);
    for (i = 0; i < 5; i++) cr_assert_eq(t[i], want[i], "token %d: %d, want %d", i, t[i], want[i]);
    free(t);
    infer_model_free(m);
}

/* Every reference prompt's tokens, BOS as the model asks, specials parsed
   (as infer_generate tokenizes). */
Test(tokenizer, reference_prompts) {
    static const char *names[] = {
        "models/stories260K", "models/tinystories-656k-f32", "models/synth-256-f16", "arch/synth-qwen2-f16",
        "arch/synth-gemma-f16", "arch/synth-phi3-f16", "arch/synth-llama3-f16", "arch/synth-llama-tied-f16",
        "arch/synth-qwen3-f16", "arch/synth-qwen3moe-f16", "arch/synth-gemma2-f16", "arch/synth-gemma3-f16",
        "arch/synth-smollm3-f16"};
    static const char *which[] = {"p1", "p2", "long"};
    size_t k, w;
    int checked = 0;
    SKIP_WITHOUT_SHARED();
    for (k = 0; k < sizeof names / sizeof names[0]; k++) {
        const char *base = strchr(names[k], '/') + 1;
        char rel[256], path[1024];
        infer_model *m;
        snprintf(rel, sizeof rel, "%s.gguf", names[k]);
        m = load_vocab(rel);
        for (w = 0; w < 3; w++) {
            size_t len;
            char *text;
            tu_json *ref;
            const tu_json *prompt, *ptoks;
            infer_token *t;
            int n, i;
            snprintf(rel, sizeof rel, "reference/%s.%s.json", base, which[w]);
            tu_shared_path(path, sizeof path, rel);
            text = tu_read_file(path, &len);
            if (!text) continue;
            ref = tu_json_parse(text);
            free(text);
            cr_assert_not_null(ref, "cannot parse %s", path);
            prompt = tu_json_get(ref, "prompt");
            ptoks = tu_json_get(ref, "prompt_tokens");
            cr_assert(prompt && ptoks && prompt->str, "%s lacks prompt fields", path);
            t = tokenize(m, prompt->str, strlen(prompt->str), infer_model_add_bos(m), 1, &n);
            cr_assert_eq(n, ptoks->n, "%s: %d tokens, llama.cpp has %d", rel, n, ptoks->n);
            for (i = 0; i < n; i++)
                cr_assert_eq(t[i], (infer_token)ptoks->items[i].num, "%s: token %d is %d, llama.cpp has %d", rel, i, t[i],
                             (infer_token)ptoks->items[i].num);
            free(t);
            tu_json_free(ref);
            checked++;
        }
        infer_model_free(m);
    }
    cr_assert_gt(checked, 0, "no reference prompts found");
}

/* ---- contracts ------------------------------------------------------------ */

Test(tokenizer, returns_needed_count_and_writes_only_max) {
    infer_model *m;
    infer_token buf[8];
    int n, i;
    SKIP_WITHOUT_SHARED();
    m = load_vocab("tokenizer/ggml-vocab-gpt-2.gguf");
    for (i = 0; i < 8; i++) buf[i] = -7;
    cr_assert_eq(infer_tokenize(m, "Hello world, this is a test of the tokenizer.", 45, buf, 3, 0, 0, &n, NULL), INFER_OK);
    cr_assert_gt(n, 3, "*n_tokens is the count the text needs, more than max");
    for (i = 3; i < 8; i++) cr_assert_eq(buf[i], -7, "wrote past max at %d", i);
    cr_assert_eq(infer_tokenize(m, "", 0, buf, 8, 0, 0, &n, NULL), INFER_OK);
    cr_assert_eq(n, 0);
    {
        infer_error e;
        n = 99;
        cr_assert_eq(infer_tokenize(m, NULL, 5, buf, 8, 0, 0, &n, &e), INFER_ERR_ARG);
        cr_assert_eq(e.code, INFER_ERR_ARG);
        cr_assert_eq(n, 0, "a failed tokenize says 0 tokens");
        cr_assert(strstr(e.msg, "tokenize") != NULL, "the message names the call: %s", e.msg);
    }
    cr_assert_eq(sc_token_to_piece(m, -1, (char *)buf, 8), -1);
    cr_assert_eq(sc_token_to_piece(m, infer_model_n_vocab(m), (char *)buf, 8), -1);
    infer_model_free(m);
}

Test(tokenizer, parse_special) {
    infer_model *m;
    infer_token *t;
    int n;
    const char *s = "<|im_start|>user";
    SKIP_WITHOUT_SHARED();
    m = load_vocab("tokenizer/ggml-vocab-qwen2.gguf");
    t = tokenize(m, s, strlen(s), 0, 1, &n);
    cr_assert_eq(n, 2, "parsed: %d tokens", n);
    cr_assert_eq(t[0], 151644, "<|im_start|> is %d", t[0]);
    free(t);
    t = tokenize(m, s, strlen(s), 0, 0, &n);
    cr_assert_gt(n, 2, "unparsed special text should be plain tokens");
    cr_assert_neq(t[0], 151644);
    free(t);
    cr_assert(infer_model_is_eog(m, 151645), "<|im_end|> ends generation");
    infer_model_free(m);
}

/* ---- round trips and streaming ----------------------------------------------- */

static const char *const round_trip_texts[] = {
    "Hello world",
    " leading space and  double  spaces ",
    "Tabs\tand\nnewlines\r\n",
    "Unicode: caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa6\x99 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
    "3333333 + 12.5e-3 = ?!",
    "",
};

Test(tokenizer, round_trip_spm) {
    infer_model *m;
    size_t k;
    SKIP_WITHOUT_SHARED();
    m = load_vocab("tokenizer/ggml-vocab-llama-spm.gguf");
    for (k = 0; k < sizeof round_trip_texts / sizeof round_trip_texts[0]; k++) {
        const char *s = round_trip_texts[k];
        infer_token *t;
        char *back;
        size_t n;
        int nt;
        t = tokenize(m, s, strlen(s), 0, 0, &nt);
        back = detokenize(m, t, nt, &n);
        /* the space prefix SentencePiece adds comes back as a leading space */
        if (*s) {
            cr_assert_eq(n, strlen(s) + 1, "\"%s\" came back as \"%s\"", s, back);
            cr_assert(back[0] == ' ' && memcmp(back + 1, s, strlen(s)) == 0, "\"%s\" came back as \"%s\"", s, back);
        } else {
            cr_assert_eq(n, 0);
        }
        free(t);
        free(back);
    }
    infer_model_free(m);
}

Test(tokenizer, round_trip_bpe) {
    static const char *vocabs[] = {"tokenizer/ggml-vocab-gpt-2.gguf", "tokenizer/ggml-vocab-qwen2.gguf"};
    size_t v, k;
    SKIP_WITHOUT_SHARED();
    for (v = 0; v < 2; v++) {
        infer_model *m = load_vocab(vocabs[v]);
        for (k = 0; k < sizeof round_trip_texts / sizeof round_trip_texts[0]; k++) {
            const char *s = round_trip_texts[k];
            int nt;
            size_t n;
            infer_token *t = tokenize(m, s, strlen(s), 0, 0, &nt);
            char *back = detokenize(m, t, nt, &n);
            cr_assert(n == strlen(s) && memcmp(back, s, n) == 0, "%s: \"%s\" came back as \"%s\"", vocabs[v], s, back);
            free(t);
            free(back);
        }
        infer_model_free(m);
    }
}

static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t k, len = s[i] < 0x80 ? 1 : (s[i] & 0xe0) == 0xc0 ? 2 : (s[i] & 0xf0) == 0xe0 ? 3 : (s[i] & 0xf8) == 0xf0 ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (k = 1; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

/* Multi-byte characters the SPM vocab only has as byte tokens: every chunk
   pushed out must be whole characters, and together the original text. */
Test(tokenizer, streaming_never_splits_utf8) {
    const char *s = "\xf0\x9f\xa6\x99 \xe4\xbd\xa0\xe5\xa5\xbd \xe1\x83\x90 caf\xc3\xa9 \xf0\x9f\x98\x80\xf0\x9f\x98\x81";
    infer_model *m;
    infer_token *t;
    infer_detok d;
    char out[4096], chunk[256];
    size_t len = 0;
    int nt, i, n, bytes_tokens = 0;
    SKIP_WITHOUT_SHARED();
    m = load_vocab("tokenizer/ggml-vocab-llama-spm.gguf");
    t = tokenize(m, s, strlen(s), 0, 0, &nt);
    memset(&d, 0, sizeof d);
    for (i = 0; i < nt; i++) {
        if (sc_token_to_piece(m, t[i], chunk, (int)sizeof chunk) == 1 && ((unsigned char)chunk[0] & 0x80))
            bytes_tokens++;
        n = sc_detok_push(&d, m, t[i], chunk, (int)sizeof chunk);
        cr_assert_geq(n, 0);
        cr_assert(utf8_valid((unsigned char *)chunk, (size_t)n), "token %d: chunk of %d bytes splits a character", i, n);
        memcpy(out + len, chunk, (size_t)n);
        len += (size_t)n;
    }
    n = sc_detok_flush(&d, chunk, (int)sizeof chunk);
    cr_assert_eq(n, 0, "nothing should be left over");
    cr_assert(len == strlen(s) + 1 && out[0] == ' ' && memcmp(out + 1, s, strlen(s)) == 0, "stream gave \"%.*s\"", (int)len, out);
    cr_assert_gt(bytes_tokens, 0);
    free(t);

    /* a truncated character is held back, then flushed as is */
    memset(&d, 0, sizeof d);
    t = tokenize(m, "\xf0\x9f\xa6\x99", 4, 0, 0, &nt); /* a space and 4 byte tokens */
    cr_assert_eq(nt, 5);
    len = 0;
    for (i = 0; i < nt - 1; i++) len += (size_t)sc_detok_push(&d, m, t[i], chunk, (int)sizeof chunk);
    cr_assert_eq(len, 1, "only the space is out");
    n = sc_detok_flush(&d, chunk, (int)sizeof chunk);
    cr_assert_eq(n, 3, "the 3 held bytes are flushed");
    cr_assert_eq(d.n_pending, 0);
    free(t);
    infer_model_free(m);
}

/* ---- malformed vocabularies ------------------------------------------------- */

typedef struct gbuf {
    unsigned char *p;
    size_t n, cap;
    int n_kv;
} gbuf;

static void g_put(gbuf *b, const void *d, size_t n) {
    while (b->n + n > b->cap) b->p = (unsigned char *)realloc(b->p, b->cap = b->cap ? b->cap * 2 : 256);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void g_u32(gbuf *b, uint32_t v) { g_put(b, &v, 4); }
static void g_u64(gbuf *b, uint64_t v) { g_put(b, &v, 8); }
static void g_str(gbuf *b, const char *s) { g_u64(b, strlen(s)); g_put(b, s, strlen(s)); }
static void g_kv_str(gbuf *b, const char *k, const char *v) { g_str(b, k), g_u32(b, 8), g_str(b, v), b->n_kv++; }
static void g_kv_u32(gbuf *b, const char *k, uint32_t v) { g_str(b, k), g_u32(b, 4), g_u32(b, v), b->n_kv++; }
static void g_kv_bool(gbuf *b, const char *k, int v) {
    unsigned char c = (unsigned char)(v != 0);
    g_str(b, k), g_u32(b, 7), g_put(b, &c, 1), b->n_kv++;
}
static void g_kv_strs(gbuf *b, const char *k, const char *const *v, int n) {
    int i;
    g_str(b, k), g_u32(b, 9), g_u32(b, 8), g_u64(b, (uint64_t)n);
    for (i = 0; i < n; i++) g_str(b, v[i]);
    b->n_kv++;
}
static void g_kv_f32s(gbuf *b, const char *k, int n) {
    int i;
    float f = 0;
    g_str(b, k), g_u32(b, 9), g_u32(b, 6), g_u64(b, (uint64_t)n);
    for (i = 0; i < n; i++) f = -(float)i, g_put(b, &f, 4);
    b->n_kv++;
}
static void g_kv_i32s(gbuf *b, const char *k, const int32_t *v, int n) {
    g_str(b, k), g_u32(b, 9), g_u32(b, 5), g_u64(b, (uint64_t)n);
    g_put(b, v, 4 * (size_t)n);
    b->n_kv++;
}

/* Header in front of the key-values; the caller frees the result. */
static unsigned char *g_finish(gbuf *b, size_t *size) {
    gbuf h = {0, 0, 0, 0};
    g_put(&h, "GGUF", 4), g_u32(&h, 3), g_u64(&h, 0), g_u64(&h, (uint64_t)b->n_kv);
    g_put(&h, b->p, b->n);
    free(b->p);
    *size = h.n;
    return h.p;
}

static infer_model *load_mem(gbuf *b, infer_error *err, unsigned char **mem) {
    size_t size;
    infer_model_params mp = infer_model_default_params();
    mp.vocab_only = 1;
    *mem = g_finish(b, &size);
    memset(err, 0, sizeof *err);
    return infer_model_load_memory(*mem, size, &mp, err);
}

static void expect_error(gbuf *b, const char *needle) {
    infer_error err;
    unsigned char *mem;
    infer_model *m = load_mem(b, &err, &mem);
    cr_assert_null(m, "a malformed vocabulary was accepted (expected an error mentioning \"%s\")", needle);
    cr_assert_neq(err.code, INFER_OK);
    cr_assert(strstr(err.msg, needle) != NULL, "error \"%s\" does not mention \"%s\"", err.msg, needle);
    free(mem);
}

static const char *const tiny_tokens[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xe2\x96\x81" "a"};

Test(tokenizer_bad, gpt2_without_merges) {
    gbuf b = {0, 0, 0, 0};
    g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
    expect_error(&b, "merges");
}

Test(tokenizer_bad, empty_vocab) {
    gbuf b = {0, 0, 0, 0};
    g_kv_str(&b, "tokenizer.ggml.model", "llama");
    g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 0);
    expect_error(&b, "tokenizer.ggml.tokens");
}

Test(tokenizer_bad, no_tokens) {
    gbuf b = {0, 0, 0, 0};
    g_kv_str(&b, "tokenizer.ggml.model", "llama");
    expect_error(&b, "tokenizer.ggml.tokens");
}

Test(tokenizer_bad, scores_length_mismatch) {
    gbuf b = {0, 0, 0, 0};
    g_kv_str(&b, "tokenizer.ggml.model", "llama");
    g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
    g_kv_f32s(&b, "tokenizer.ggml.scores", 5);
    expect_error(&b, "scores");
}

Test(tokenizer_bad, token_type_length_mismatch) {
    static const int32_t types[] = {2, 3, 3};
    gbuf b = {0, 0, 0, 0};
    g_kv_str(&b, "tokenizer.ggml.model", "llama");
    g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
    g_kv_i32s(&b, "tokenizer.ggml.token_type", types, 3);
    expect_error(&b, "token_type");
}

Test(tokenizer_bad, unknown_pre_tokenizer_is_named) {
    static const char *const merges[] = {"a b"};
    gbuf b = {0, 0, 0, 0};
    g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    g_kv_str(&b, "tokenizer.ggml.pre", "no-such-pre");
    g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
    g_kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    expect_error(&b, "no-such-pre");
}

Test(tokenizer_bad, unknown_model) {
    gbuf b = {0, 0, 0, 0};
    g_kv_str(&b, "tokenizer.ggml.model", "t5x");
    g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
    expect_error(&b, "t5x");
}

/* A special id outside the vocabulary is refused, naming its key; the
   all-ones "none" that converters write keeps the default (llama.cpp's
   rule). */
Test(tokenizer_bad, special_id_outside_vocab) {
    static const char *const keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                                       "tokenizer.ggml.eot_token_id"};
    size_t k;
    for (k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        gbuf b = {0, 0, 0, 0};
        g_kv_str(&b, "tokenizer.ggml.model", "llama");
        g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
        g_kv_u32(&b, keys[k], 7);
        expect_error(&b, keys[k]);
    }
    {
        infer_error err;
        unsigned char *mem;
        gbuf b = {0, 0, 0, 0};
        infer_model *m;
        g_kv_str(&b, "tokenizer.ggml.model", "llama");
        g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
        g_kv_u32(&b, "tokenizer.ggml.bos_token_id", UINT32_MAX);
        g_kv_u32(&b, "tokenizer.ggml.padding_token_id", UINT32_MAX);
        m = load_mem(&b, &err, &mem);
        cr_assert_not_null(m, "%s", err.msg);
        cr_assert_eq(infer_model_bos(m), 1, "\"none\" keeps the default BOS");
        infer_model_free(m);
        free(mem);
    }
}

/* Merges must join two tokens of the vocabulary. */
Test(tokenizer_bad, merges_not_of_this_vocab) {
    static const char *const merges[][2] = {{"a zz", "zz"}, {"zz a", "zz"}, {"nospace", "nospace"}, {"a ", "merges[1]"}};
    size_t k;
    for (k = 0; k < sizeof merges / sizeof merges[0]; k++) {
        const char *list[2];
        gbuf b = {0, 0, 0, 0};
        list[0] = "a b", list[1] = merges[k][0];
        g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
        g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
        g_kv_strs(&b, "tokenizer.ggml.merges", list, 2);
        expect_error(&b, merges[k][1]);
    }
}

/* Invalid UTF-8 in a token and in the input is harmless; a missing
   pre-tokenizer means "default". */
Test(tokenizer_bad, odd_but_loadable) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "a", "\xff\xfe", "b", "\xe2\x96\x81"};
    static const char *const merges[] = {"a b", "\xff\xfe a"};
    infer_error err;
    unsigned char *mem;
    infer_token out[64];
    int n;
    gbuf b = {0, 0, 0, 0};
    infer_model *m;
    g_kv_str(&b, "tokenizer.ggml.model", "llama");
    g_kv_strs(&b, "tokenizer.ggml.tokens", toks, 7);
    m = load_mem(&b, &err, &mem);
    cr_assert_not_null(m, "%s", err.msg);
    cr_assert_eq(infer_model_bos(m), 1);
    if (infer_tokenize(m, "a\xff\xfe b\xc3", 7, out, 64, 1, 1, &n, NULL) != INFER_OK) n = -1;
    cr_assert_gt(n, 0);
    infer_model_free(m);
    free(mem);

    memset(&b, 0, sizeof b);
    g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&b, "tokenizer.ggml.tokens", toks, 7);
    g_kv_strs(&b, "tokenizer.ggml.merges", merges, 2);
    m = load_mem(&b, &err, &mem);
    cr_assert_not_null(m, "%s", err.msg);
    if (infer_tokenize(m, "ab a\xff b\xc3", 8, out, 64, 0, 1, &n, NULL) != INFER_OK) n = -1;
    cr_assert_geq(n, 0);
    for (n = 0; n < 7; n++) {
        char piece[64];
        cr_assert_geq(sc_token_to_piece(m, n, piece, sizeof piece), 0);
    }
    infer_model_free(m);
    free(mem);
}

/* A gpt2 vocabulary of toks[0..count): the letters "a" and "b", then
   control tokens, with the one merge "a b"; *mem holds its file. */
static infer_model *load_control_vocab(const char *const *toks, int count, unsigned char **mem) {
    static const char *const merges[] = {"a b"};
    int32_t types[16];
    infer_error err;
    gbuf b = {0, 0, 0, 0};
    infer_model *m;
    int i;
    cr_assert_leq(count, 16);
    for (i = 0; i < count; i++) types[i] = i < 2 ? 1 : 3;
    g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&b, "tokenizer.ggml.tokens", toks, count);
    g_kv_i32s(&b, "tokenizer.ggml.token_type", types, count);
    g_kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    m = load_mem(&b, &err, mem);
    cr_assert_not_null(m, "%s", err.msg);
    return m;
}

/* tokens from..to-1 of m, toks[from..to), are their text and no end of
   generation: a reply parser reads them */
static void expect_text_tokens(const infer_model *m, const char *const *toks, int from, int to) {
    int k;
    for (k = from; k < to; k++) {
        char piece[32];
        size_t len = 0;
        cr_assert_eq(infer_token_to_piece(m, k, piece, sizeof piece, &len, NULL), INFER_OK);
        cr_assert_str_eq(piece, toks[k], "%s is text", toks[k]);
        cr_assert_eq(infer_model_is_eog(m, k), 0, "%s does not end", toks[k]);
    }
}

/* gpt-oss's harmony tokens: <|return|> and <|call|> end generation, <|end|>
   not (the reply goes on after its analysis), and the message tokens are
   text; a vocabulary without <|call|> keeps <|end|> as an end, no text. */
Test(tokenizer, harmony_tokens) {
    static const char *const toks[] = {"a", "b", "<|return|>", "<|call|>", "<|channel|>", "<|message|>",
                                       "<|start|>", "<|end|>", "<|constrain|>"};
    static const char *const other[] = {"a", "b", "<|end|>", "<|channel|>"}; /* no <|call|>: not harmony */
    int harmony;
    for (harmony = 0; harmony < 2; harmony++) {
        unsigned char *mem;
        infer_model *m = load_control_vocab(harmony ? toks : other, harmony ? 9 : 4, &mem);
        char piece[32];
        size_t len = 0;
        infer_token out[8];
        int n = 0;
        if (harmony) {
            cr_assert_eq(infer_model_is_eog(m, 2), 1, "<|return|> ends");
            cr_assert_eq(infer_model_is_eog(m, 3), 1, "<|call|> ends");
            cr_assert_eq(infer_model_is_eog(m, 7), 0, "<|end|> does not end a harmony reply");
            expect_text_tokens(m, toks, 4, 9);
            cr_assert_eq(infer_token_to_piece(m, 2, piece, sizeof piece, &len, NULL), INFER_OK);
            cr_assert_eq(len, 0, "<|return|> is no text");
            cr_assert_eq(infer_tokenize(m, "<|channel|>a", 12, out, 8, 0, 1, &n, NULL), INFER_OK);
            cr_assert(n == 2 && out[0] == 4, "<|channel|> is still one token");
        } else {
            cr_assert_eq(infer_model_is_eog(m, 2), 1, "<|end|> ends");
            cr_assert_eq(infer_token_to_piece(m, 3, piece, sizeof piece, &len, NULL), INFER_OK);
            cr_assert_eq(len, 0, "<|channel|> of another vocabulary is no text");
        }
        infer_model_free(m);
        free(mem);
    }
}

/* Gemma 4's tokens: <turn|> and <|tool_response>, ends of generation, are
   no text; the call, string and channel tokens are text (the reply parser
   reads them); without <tool_call|> they stay control tokens. */
Test(tokenizer, gemma4_tokens) {
    static const char *const toks[] = {"a",          "b",          "<turn|>",    "<|tool_response>",
                                       "<|tool_call>", "<tool_call|>", "<|\"|>",     "<|channel>", "<channel|>"};
    int gemma4;
    for (gemma4 = 0; gemma4 < 2; gemma4++) {
        unsigned char *mem;
        /* the other vocabulary: without <tool_call|> and the rest */
        infer_model *m = load_control_vocab(toks, gemma4 ? 9 : 5, &mem);
        char piece[32];
        size_t len = 0;
        infer_token out[8];
        int n = 0;
        cr_assert_eq(infer_model_is_eog(m, 2), 1, "<turn|> ends");
        cr_assert_eq(infer_model_is_eog(m, 3), 1, "<|tool_response> ends");
        cr_assert_eq(infer_token_to_piece(m, 2, piece, sizeof piece, &len, NULL), INFER_OK);
        cr_assert_eq(len, 0, "<turn|> is no text");
        if (gemma4) {
            expect_text_tokens(m, toks, 4, 9);
            cr_assert_eq(infer_tokenize(m, "<|\"|>a", 6, out, 8, 0, 1, &n, NULL), INFER_OK);
            cr_assert(n == 2 && out[0] == 6, "<|\"|> is still one token");
        } else {
            cr_assert_eq(infer_token_to_piece(m, 4, piece, sizeof piece, &len, NULL), INFER_OK);
            cr_assert_eq(len, 0, "<|tool_call> of another vocabulary is no text");
        }
        infer_model_free(m);
        free(mem);
    }
}

/* ---- speed ---------------------------------------------------------------- */

static double now_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* Long runs of one character must stay linear (llama.cpp's own regex
   fallback is quadratic there); the limit is generous for sanitizer builds. */
Test(tokenizer, long_runs_are_fast) {
    static const char *vocabs[] = {"tokenizer/ggml-vocab-llama-spm.gguf", "tokenizer/ggml-vocab-gpt-2.gguf",
                                   "tokenizer/ggml-vocab-llama-bpe.gguf", "tokenizer/ggml-vocab-deepseek-coder.gguf"};
    static const char fill[] = {'a', ' ', '\n', '7', '!'};
    size_t v, f, len = 200000;
    char *text = (char *)malloc(len);
    SKIP_WITHOUT_SHARED();
    for (v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        infer_model *m = load_vocab(vocabs[v]);
        for (f = 0; f < sizeof fill; f++) {
            double t0 = now_s(), dt;
            int n;
            memset(text, fill[f], len);
            if (infer_tokenize(m, text, len, NULL, 0, 0, 0, &n, NULL) != INFER_OK) n = -1;
            dt = now_s() - t0;
            cr_assert_gt(n, 0);
            cr_assert_lt(dt, 10.0, "%s: %zu x '%c' took %.1f s", vocabs[v], len, fill[f], dt);
        }
        infer_model_free(m);
    }
    free(text);
}

/* Every pre-tokenizer name llama.cpp maps loads and splits mixed text
   (exactness of each is checked offline against llama.cpp's regexes). */
Test(tokenizer, every_pre_tokenizer_name) {
    static const char *const names[] = {
        "default", "gpt-2", "phi-2", "roberta-bpe", "llama3", "llama-v3", "llama-bpe", "falcon3", "deepseek-llm",
        "deepseek-coder", "deepseek-v3", "deepseek-r1-qwen", "falcon", "mpt", "starcoder", "refact", "command-r",
        "qwen2", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "chatglm-bpe", "viking", "jais", "tekken",
        "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone", "chameleon", "minerva-7b", "megrez", "gpt-4o",
        "llama4"};
    static const char *const toks[] = {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "1", "!", "<|endoftext|>"};
    static const char *const merges[] = {"a b", "\xc4\xa0 ab"};
    const char *text = "Hello ab, 1234 +x\n\n  \xe4\xbd\xa0\xe5\xa5\xbd \xc3\xa9t\xc3\xa9 IMGIMGABZ <sentinel:12> ~~ it's";
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        infer_error err;
        unsigned char *mem;
        infer_token out[256];
        gbuf b = {0, 0, 0, 0};
        infer_model *m;
        int n;
        g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
        g_kv_str(&b, "tokenizer.ggml.pre", names[i]);
        g_kv_strs(&b, "tokenizer.ggml.tokens", toks, 8);
        g_kv_strs(&b, "tokenizer.ggml.merges", merges, 2);
        m = load_mem(&b, &err, &mem);
        cr_assert_not_null(m, "pre-tokenizer %s: %s", names[i], err.msg);
        if (infer_tokenize(m, text, strlen(text), out, 256, 0, 1, &n, NULL) != INFER_OK) n = -1;
        cr_assert_gt(n, 0, "pre-tokenizer %s", names[i]);
        cr_assert_eq(infer_tokenize(m, " ab", 3, out, 256, 0, 0, &n, NULL), INFER_OK);
        cr_assert_eq(n, 1, "pre-tokenizer %s: \" ab\" is one token", names[i]);
        cr_assert_eq(out[0], 4);
        infer_model_free(m);
        free(mem);
    }
}

/* GPT-4o's pre-tokenizer (Phi-4-mini): a contraction stays on its word,
   digits go in threes. The merges make the split visible: "1234" in one
   piece would merge "3 4" first and give 12 34. (Exhaustive comparison
   with llama.cpp's regex was done offline, on random mixed-script text.) */
Test(tokenizer, gpt4o_split) {
    static const char *const toks[] = {"a", "b", "'", "s", "\xc4\xa0", "1", "2", "3", "4", "ab",
                                       "ab'", "ab's", "12", "123", "34", "S", "ab'S"};
    static const char *const merges[] = {"3 4", "a b", "ab '", "ab' s", "1 2", "12 3", "ab' S"};
    static const struct { const char *pre, *text; infer_token want[8]; int n; } cases[] = {
        {"gpt-4o", "ab's 1234", {11, 4, 13, 8}, 4},
        {"gpt-4o", "ab'S", {16}, 1},
        {"llama-bpe", "ab's 1234", {9, 2, 3, 4, 13, 8}, 6}, /* the contraction is its own word */
        {"tekken", "ab's 1234", {9, 2, 3, 4, 5, 6, 7, 8}, 8}, /* one digit a word */
    };
    size_t c;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        infer_error err;
        unsigned char *mem;
        infer_token out[32];
        gbuf b = {0, 0, 0, 0};
        infer_model *m;
        int n, i;
        g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
        g_kv_str(&b, "tokenizer.ggml.pre", cases[c].pre);
        g_kv_strs(&b, "tokenizer.ggml.tokens", toks, 17);
        g_kv_strs(&b, "tokenizer.ggml.merges", merges, 7);
        m = load_mem(&b, &err, &mem);
        cr_assert_not_null(m, "%s", err.msg);
        if (infer_tokenize(m, cases[c].text, strlen(cases[c].text), out, 32, 0, 0, &n, NULL) != INFER_OK) n = -1;
        cr_assert_eq(n, cases[c].n, "%s \"%s\": %d tokens, want %d", cases[c].pre, cases[c].text, n, cases[c].n);
        for (i = 0; i < n; i++)
            cr_assert_eq(out[i], cases[c].want[i], "%s \"%s\": token %d is %d, want %d", cases[c].pre, cases[c].text, i,
                         out[i], cases[c].want[i]);
        infer_model_free(m);
        free(mem);
    }
}

/* Special tokens are split out longest first over the whole text, not
   leftmost first (llama.cpp's order): with "ab" and "bcd" both special,
   "abcd" is a + bcd. */
Test(tokenizer, special_tokens_longest_first) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "a", "b", "c", "d", "ab", "bcd", "x"};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 3, 3, 1};
    infer_error err;
    unsigned char *mem;
    infer_token out[16];
    gbuf b = {0, 0, 0, 0};
    infer_model *m;
    int n;
    g_kv_str(&b, "tokenizer.ggml.model", "llama");
    g_kv_strs(&b, "tokenizer.ggml.tokens", toks, 10);
    g_kv_i32s(&b, "tokenizer.ggml.token_type", types, 10);
    g_kv_bool(&b, "tokenizer.ggml.add_space_prefix", 0);
    m = load_mem(&b, &err, &mem);
    cr_assert_not_null(m, "%s", err.msg);
    if (infer_tokenize(m, "abcdxab", 7, out, 16, 0, 1, &n, NULL) != INFER_OK) n = -1;
    cr_assert_eq(n, 4, "%d tokens", n);
    cr_expect(out[0] == 3 && out[1] == 8 && out[2] == 9 && out[3] == 7, "got %d %d %d %d", out[0], out[1], out[2], out[3]);
    infer_model_free(m);
    free(mem);
}

/* No tokenizer.ggml.pre (older files): the default pre-tokenizer, with a
   warning the caller can show; a file that names one gets no warning. */
Test(tokenizer, missing_pre_tokenizer_warns) {
    static const char *const merges[] = {"a b"};
    infer_error err;
    unsigned char *mem;
    infer_model *m;
    int with_pre;
    for (with_pre = 0; with_pre < 2; with_pre++) {
        gbuf b = {0, 0, 0, 0};
        g_kv_str(&b, "tokenizer.ggml.model", "gpt2");
        if (with_pre) g_kv_str(&b, "tokenizer.ggml.pre", "gpt-2");
        g_kv_strs(&b, "tokenizer.ggml.tokens", tiny_tokens, 7);
        g_kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
        m = load_mem(&b, &err, &mem);
        cr_assert_not_null(m, "%s", err.msg);
        if (with_pre) cr_assert_null(infer_model_warning(m));
        else cr_assert(infer_model_warning(m) && strstr(infer_model_warning(m), "pre-tokenizer"), "no warning");
        infer_model_free(m);
        free(mem);
    }
}

/* ---- Gemma 3 (262,144-token SentencePiece, no space prefix) ------------------ */

#define GEMMA3_PATH INFER_SOURCE_DIR "/models/gemma-3-270m-q4_k_m.gguf"

static infer_model *load_gemma3(double *seconds) {
    FILE *f = fopen(GEMMA3_PATH, "rb");
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    double t0;
    if (!f) cr_skip_test("%s is absent (python3 scripts/fetch_model.py gemma3 fetches it)", GEMMA3_PATH);
    fclose(f);
    SKIP_WITHOUT_SHARED();
    mp.vocab_only = 1;
    t0 = now_s();
    m = infer_model_load(GEMMA3_PATH, &mp, &err);
    if (seconds) *seconds = now_s() - t0;
    cr_assert_not_null(m, "cannot load %s: %s", GEMMA3_PATH, err.msg);
    return m;
}

/* llama.cpp's tokens for the three reference prompts (BOS added; the chat
   one with its <start_of_turn>/<end_of_turn> parsed as ids 105/106), and
   the pieces joined back into the text. */
Test(tokenizer_gemma3, reference_prompts_and_round_trip) {
    static const char *which[] = {"p1", "p2", "chat"};
    double load_s;
    infer_model *m = load_gemma3(&load_s);
    size_t w;
    cr_assert_eq(infer_model_n_vocab(m), 262144);
    cr_assert_eq(infer_model_bos(m), 2);
    cr_assert_eq(infer_model_eos(m), 1);
    cr_assert(infer_model_add_bos(m));
    /* generous for sanitizer builds; about 0.07 s optimised */
    cr_expect_lt(load_s, 5.0, "loading the 262k-token vocabulary took %.2f s", load_s);
    for (w = 0; w < 3; w++) {
        char rel[128], path[1024], *text, *back, *want;
        size_t len, n, k, o;
        tu_json *ref;
        const tu_json *prompt, *ptoks, *special;
        infer_token *t;
        int nt, i, parse;
        snprintf(rel, sizeof rel, "reference/gemma-3-270m-q4_k_m.%s.json", which[w]);
        tu_shared_path(path, sizeof path, rel);
        text = tu_read_file(path, &len);
        cr_assert_not_null(text, "cannot read %s", path);
        ref = tu_json_parse(text);
        free(text);
        cr_assert_not_null(ref, "cannot parse %s", path);
        prompt = tu_json_get(ref, "prompt");
        ptoks = tu_json_get(ref, "prompt_tokens");
        special = tu_json_get(ref, "parse_special");
        cr_assert(prompt && ptoks && prompt->str, "%s lacks prompt fields", path);
        parse = special && special->kind == TU_BOOL && special->num != 0;
        cr_assert_eq(parse, w == 2, "%s: parse_special", rel);
        t = tokenize(m, prompt->str, strlen(prompt->str), 1, parse, &nt);
        cr_assert_eq(nt, ptoks->n, "%s: %d tokens, llama.cpp has %d", rel, nt, ptoks->n);
        for (i = 0; i < nt; i++)
            cr_assert_eq(t[i], (infer_token)ptoks->items[i].num, "%s: token %d is %d, llama.cpp has %d", rel, i, t[i],
                         (infer_token)ptoks->items[i].num);
        /* pieces: no space prefix to undo; control tokens (BOS, the turn
           markers) have none */
        back = detokenize(m, t, nt, &n);
        want = (char *)malloc(strlen(prompt->str) + 1);
        for (k = 0, o = 0; prompt->str[k];) {
            if (!strncmp(prompt->str + k, "<start_of_turn>", 15)) k += 15;
            else if (!strncmp(prompt->str + k, "<end_of_turn>", 13)) k += 13;
            else want[o++] = prompt->str[k++];
        }
        want[o] = 0;
        cr_assert(n == o && !memcmp(back, want, n), "%s: pieces give \"%s\", want \"%s\"", rel, back, want);
        free(want);
        free(back);
        free(t);
        if (parse) { /* unparsed, the turn markers are plain text */
            t = tokenize(m, prompt->str, strlen(prompt->str), 1, 0, &nt);
            for (i = 0; i < nt; i++) cr_assert(t[i] != 105 && t[i] != 106, "unparsed text gave special id %d", t[i]);
            free(t);
        }
        tu_json_free(ref);
    }
    infer_model_free(m);
}

Test(tokenizer_gemma3, round_trip_and_end_of_turn) {
    infer_model *m = load_gemma3(NULL);
    size_t k;
    infer_token *t;
    int nt;
    for (k = 0; k < sizeof round_trip_texts / sizeof round_trip_texts[0]; k++) {
        const char *s = round_trip_texts[k];
        size_t n;
        char *back;
        t = tokenize(m, s, strlen(s), 0, 0, &nt);
        back = detokenize(m, t, nt, &n);
        cr_assert(n == strlen(s) && memcmp(back, s, n) == 0, "\"%s\" came back as \"%s\"", s, back);
        free(t);
        free(back);
    }
    /* <end_of_turn> ends generation (as <eos> does); the others do not */
    t = tokenize(m, "<end_of_turn><start_of_turn><eos><bos>", 38, 0, 1, &nt);
    cr_assert_eq(nt, 4);
    cr_assert_eq(t[0], 106);
    cr_expect(infer_model_is_eog(m, 106), "<end_of_turn> must end generation");
    cr_expect(infer_model_is_eog(m, 1), "<eos> must end generation");
    cr_expect(!infer_model_is_eog(m, 105), "<start_of_turn> is not an end");
    cr_expect(!infer_model_is_eog(m, 2), "<bos> is not an end");
    free(t);
    infer_model_free(m);
}

/* Thousands of special tokens (Gemma's <unusedN>) must not make long text
   with special-looking pieces slow to split. */
Test(tokenizer_gemma3, many_special_tokens_stay_fast) {
    static const char pat[] = "Hello <b>world</b>, <start_of_turn>user\n\n\t<unused12> x <unu ";
    infer_model *m = load_gemma3(NULL);
    size_t len = 1 << 18, i;
    char *text = (char *)malloc(len);
    double t0, dt;
    int n;
    for (i = 0; i < len; i++) text[i] = pat[i % (sizeof pat - 1)];
    t0 = now_s();
    if (infer_tokenize(m, text, len, NULL, 0, 1, 1, &n, NULL) != INFER_OK) n = -1;
    dt = now_s() - t0;
    cr_assert_gt(n, 0);
    cr_expect_lt(dt, 5.0, "256 KB with special tokens took %.1f s", dt);
    free(text);
    infer_model_free(m);
}

/* ---- end of generation ------------------------------------------------------ */

/* The end-of-turn token of each chat family ends generation; its
   start-of-turn tokens do not. */
Test(tokenizer, end_of_generation_tokens) {
    static const struct {
        const char *vocab, *ends[4], *not_ends[3];
    } cases[] = {
        {"tokenizer/ggml-vocab-qwen2.gguf", {"<|im_end|>", "<|endoftext|>"}, {"<|im_start|>"}},
        {"tokenizer/ggml-vocab-phi-3.gguf", {"<|end|>", "<|endoftext|>"}, {"<|user|>", "<|assistant|>", "<|system|>"}},
        {"tokenizer/ggml-vocab-llama-bpe.gguf", {"<|eot_id|>", "<|end_of_text|>"}, /* Llama 3.0: no <|eom_id|> */
         {"<|start_header_id|>", "<|end_header_id|>", "<|begin_of_text|>"}},
    };
    size_t c, k;
    SKIP_WITHOUT_SHARED();
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        infer_model *m = load_vocab(cases[c].vocab);
        for (k = 0; k < 4 && cases[c].ends[k]; k++) {
            int nt;
            infer_token *t = tokenize(m, cases[c].ends[k], strlen(cases[c].ends[k]), 0, 1, &nt);
            cr_assert_eq(nt, 1, "%s: %s is not one token", cases[c].vocab, cases[c].ends[k]);
            cr_expect(infer_model_is_eog(m, t[0]), "%s: %s (%d) must end generation", cases[c].vocab, cases[c].ends[k], t[0]);
            free(t);
        }
        for (k = 0; k < 3 && cases[c].not_ends[k]; k++) {
            int nt;
            infer_token *t = tokenize(m, cases[c].not_ends[k], strlen(cases[c].not_ends[k]), 0, 1, &nt);
            cr_assert_eq(nt, 1, "%s: %s is not one token", cases[c].vocab, cases[c].not_ends[k]);
            cr_expect(!infer_model_is_eog(m, t[0]), "%s: %s (%d) must not end generation", cases[c].vocab,
                      cases[c].not_ends[k], t[0]);
            free(t);
        }
        infer_model_free(m);
    }
}

/* infer_utf8_clean keeps valid characters and replaces each byte of an
   invalid one (overlong, surrogate, past U+10FFFF, cut short, NUL) with
   U+FFFD: what a JSON writer may be given. */
Test(tokenizer, utf8_clean_replaces_invalid_bytes) {
    static const struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"},
        {"\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},                     /* overlong '/' */
        {"\xE0\x80\xAF", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},     /* overlong, 3 bytes */
        {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},     /* a surrogate */
        {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* past U+10FFFF */
        {"a\xE2\x82", 3, "a\xEF\xBF\xBD\xEF\xBF\xBD"},                   /* cut short */
        {"a\0b", 3, "a\xEF\xBF\xBD" "b"},                                /* NUL */
        {"\xF4\x8F\xBF\xBF", 4, "\xF4\x8F\xBF\xBF"},                     /* U+10FFFF itself */
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        size_t n = infer_utf8_clean(cases[i].in, cases[i].n, out);
        cr_assert_eq(n, strlen(cases[i].want), "case %zu: length %zu", i, n);
        cr_assert_str_eq(out, cases[i].want, "case %zu", i);
    }
}
