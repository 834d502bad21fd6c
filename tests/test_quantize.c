/* test_quantize.c - infer_quantize and `infer quantize`: the format each
   tensor gets follows llama.cpp's rules (checked against llama.cpp's own
   files in ../shared and a 32-layer layout), metadata is copied, the result
   loads and computes logits close to its source, multithreading changes no
   byte, errors are clean; and tests/check_quantized.py checks every block
   with the PyPI gguf package's dequantizer and the quantization error
   against the reference quantizers (gguf's, llama.cpp's files). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void need_shared(void) {
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to quantize");
}

static const char *model(const char *name) {
    static char p[4][512];
    static int k;
    char rel[256];
    k = (k + 1) % 4;
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    tu_shared_path(p[k], sizeof p[k], rel);
    return p[k];
}

/* A fresh directory for a test's files; removed by rm_tmpdir. */
static char tmpdir[256];
static void mk_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/infer_quantize_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}
static void rm_tmpdir(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}
static const char *tmp(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

static void quantize_ok(const char *in, const char *out, infer_quant_target t, int n_threads) {
    infer_error err;
    infer_quantize_params qp = infer_quantize_default_params();
    qp.n_threads = n_threads;
    cr_assert_eq(infer_quantize(in, out, t, &qp, &err), INFER_OK, "quantize %s to %s: %s", in,
                 infer_quant_target_name(t), err.msg);
}

static int64_t kv_int(const infer_gguf *g, const char *key) {
    char buf[64];
    int64_t i = infer_gguf_find_key(g, key);
    if (i < 0) return -1;
    infer_gguf_kv_to_string(g, i, buf, sizeof buf);
    return atoll(buf);
}

/* ---- the rules, stated again for tinystories-656k: dim 128, ffn 384, two
   layers, tied output; no row is a whole number of 256-value blocks ---- */

static infer_type fallback(infer_type t) {
    switch (t) {
    case INFER_TYPE_Q4_K: return INFER_TYPE_Q5_0;
    case INFER_TYPE_Q5_K: return INFER_TYPE_Q5_1;
    case INFER_TYPE_Q6_K: return INFER_TYPE_Q8_0;
    default: return t;
    }
}

static infer_type expected_tinystories(const char *name, int n_dims, infer_quant_target t) {
    static const infer_type base[INFER_QUANT_COUNT] = {
        INFER_TYPE_F32, INFER_TYPE_F16, INFER_TYPE_BF16, INFER_TYPE_Q8_0, INFER_TYPE_Q4_0, INFER_TYPE_Q4_1,
        INFER_TYPE_Q5_0, INFER_TYPE_Q5_1, INFER_TYPE_Q4_K, INFER_TYPE_Q5_K, INFER_TYPE_Q6_K, INFER_TYPE_Q4_K,
        INFER_TYPE_Q5_K};
    infer_type ty = base[t];
    if (n_dims == 1) return INFER_TYPE_F32;
    if (t == INFER_QUANT_Q4_K_M || t == INFER_QUANT_Q5_K_M) {
        /* tied token_embd is the output: Q8_0 as its rows are not 256-wide;
           attn_v and ffn_down of layer 1 (the last eighth of 2) get Q6_K */
        if (!strcmp(name, "token_embd.weight")) return INFER_TYPE_Q8_0;
        if (!strncmp(name, "blk.1.", 6) && (strstr(name, "attn_v") || strstr(name, "ffn_down"))) ty = INFER_TYPE_Q6_K;
    }
    return fallback(ty);
}

static const uint32_t expected_ftype[INFER_QUANT_COUNT] = {0, 1, 32, 7, 2, 3, 8, 9, 15, 17, 18, 15, 17};

/* Quantizes tinystories from src to every target: formats by the rules,
   metadata the same but for general.file_type, and the file loads. */
static void check_all_targets(const char *src_name) {
    infer_error err;
    int t;
    infer_gguf *src;
    need_shared();
    mk_tmpdir();
    src = infer_gguf_open(model(src_name), &err);
    cr_assert_not_null(src, "%s", err.msg);
    for (t = 0; t < INFER_QUANT_COUNT; t++) {
        char out[64];
        infer_gguf *g;
        infer_model *m;
        int64_t i;
        snprintf(out, sizeof out, "%s.gguf", infer_quant_target_name((infer_quant_target)t));
        quantize_ok(model(src_name), tmp(out), (infer_quant_target)t, 2);
        g = infer_gguf_open(tmp(out), &err);
        cr_assert_not_null(g, "%s: %s", out, err.msg);
        cr_assert_eq(infer_gguf_version(g), 3);
        cr_assert_eq(infer_gguf_n_tensors(g), infer_gguf_n_tensors(src));
        for (i = 0; i < infer_gguf_n_tensors(g); i++) {
            infer_tensor_info a, b;
            infer_type want;
            int d;
            infer_gguf_tensor(src, i, &a);
            infer_gguf_tensor(g, i, &b);
            cr_assert_str_eq(a.name, b.name);
            cr_assert_eq(a.n_dims, b.n_dims);
            for (d = 0; d < 4; d++) cr_assert_eq(a.ne[d], b.ne[d]);
            want = expected_tinystories(a.name, a.n_dims, (infer_quant_target)t);
            cr_assert_eq(b.type, want, "%s from %s, %s: %s, expected %s", out, src_name, a.name,
                         infer_type_name(b.type), infer_type_name(want));
            cr_assert_eq(infer_quantize_tensor_type(src, i, (infer_quant_target)t), (int)want);
            if (b.type == a.type) cr_assert_eq(memcmp(a.data, b.data, a.nbytes), 0, "%s copied", a.name);
        }
        /* every pair as it was, but the file type */
        cr_assert_eq(infer_gguf_n_kv(g), infer_gguf_n_kv(src));
        for (i = 0; i < infer_gguf_n_kv(g); i++) {
            char va[512], vb[512];
            cr_assert_str_eq(infer_gguf_key(g, i), infer_gguf_key(src, i));
            cr_assert_eq(infer_gguf_kv_type(g, i), infer_gguf_kv_type(src, i));
            if (!strcmp(infer_gguf_key(g, i), "general.file_type")) continue;
            infer_gguf_kv_to_string(src, i, va, sizeof va);
            infer_gguf_kv_to_string(g, i, vb, sizeof vb);
            cr_assert_str_eq(va, vb, "%s", infer_gguf_key(g, i));
        }
        cr_assert_eq(kv_int(g, "general.file_type"), (int64_t)expected_ftype[t], "%s", out);
        cr_assert_eq(kv_int(g, "general.quantization_version"), 2);
        infer_gguf_close(g);
        m = infer_model_load(tmp(out), NULL, &err);
        cr_assert_not_null(m, "%s does not load: %s", out, err.msg);
        infer_model_free(m);
    }
    infer_gguf_close(src);
    rm_tmpdir();
}

Test(quantize, every_target_from_f32) { check_all_targets("tinystories-656k-f32"); }
Test(quantize, every_target_from_f16) { check_all_targets("tinystories-656k-f16"); }
Test(quantize, every_target_from_bf16) { check_all_targets("tinystories-656k-bf16"); }

/* The formats llama.cpp chose for synth-256 (rows of 256 and 768: no
   fallbacks), in its pure Q4_K/Q5_K/Q6_K files and its Q4_K_M mix. */
Test(quantize, rules_match_llama_cpp_files) {
    static const struct {
        const char *file;
        infer_quant_target t;
    } cases[] = {{"synth-256-q4_k_m", INFER_QUANT_Q4_K_M}, {"synth-256-q4_k", INFER_QUANT_Q4_K},
                 {"synth-256-q5_k", INFER_QUANT_Q5_K},     {"synth-256-q6_k", INFER_QUANT_Q6_K},
                 {"synth-256-q8_0", INFER_QUANT_Q8_0},     {"synth-256-q4_0", INFER_QUANT_Q4_0}};
    infer_error err;
    size_t c;
    infer_gguf *src;
    need_shared();
    src = infer_gguf_open(model("synth-256-f16"), &err);
    cr_assert_not_null(src, "%s", err.msg);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        infer_gguf *ref = infer_gguf_open(model(cases[c].file), &err);
        int64_t i;
        cr_assert_not_null(ref, "%s", err.msg);
        for (i = 0; i < infer_gguf_n_tensors(ref); i++) {
            infer_tensor_info r;
            int64_t j;
            infer_gguf_tensor(ref, i, &r);
            j = infer_gguf_find_tensor(src, r.name);
            cr_assert_geq(j, 0);
            cr_assert_eq(infer_quantize_tensor_type(src, j, cases[c].t), (int)r.type, "%s: %s is %s in llama.cpp's file",
                         cases[c].file, r.name, infer_type_name(r.type));
        }
        infer_gguf_close(ref);
    }
    infer_gguf_close(src);
}

/* ---- a 32-layer llama, written here: use_more_bits and the F16 fallback ---- */

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
} wbuf;
static void wb(wbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = (unsigned char *)realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void wb_u32(wbuf *b, uint32_t v) { wb(b, &v, 4); }
static void wb_u64(wbuf *b, uint64_t v) { wb(b, &v, 8); }
static void wb_str(wbuf *b, const char *s) {
    wb_u64(b, strlen(s));
    wb(b, s, strlen(s));
}

/* n_layer layers of attn_v [256 x 64], ffn_down [768 x 256], attn_q with
   rows of 100 (no format's whole blocks), F16; output.weight [256 x 64]. */
static wbuf build_llama(int n_layer) {
    wbuf b = {0, 0, 0};
    int n_t = n_layer * 3 + 1, l, k;
    uint64_t off = 0;
    char name[64];
    wb(&b, "GGUF", 4);
    wb_u32(&b, 3);
    wb_u64(&b, (uint64_t)n_t);
    wb_u64(&b, 2);
    wb_str(&b, "general.architecture");
    wb_u32(&b, INFER_GGUF_STRING);
    wb_str(&b, "llama");
    wb_str(&b, "llama.block_count");
    wb_u32(&b, INFER_GGUF_UINT32);
    wb_u32(&b, (uint32_t)n_layer);
    for (l = 0; l < n_layer; l++)
        for (k = 0; k < 3; k++) {
            uint64_t ne0 = k == 0 ? 256 : k == 1 ? 768 : 100, ne1 = k == 1 ? 256 : 64;
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, k == 0 ? "attn_v" : k == 1 ? "ffn_down" : "attn_q");
            wb_str(&b, name);
            wb_u32(&b, 2);
            wb_u64(&b, ne0);
            wb_u64(&b, ne1);
            wb_u32(&b, INFER_TYPE_F16);
            wb_u64(&b, off);
            off += (ne0 * ne1 * 2 + 31) / 32 * 32;
        }
    wb_str(&b, "output.weight");
    wb_u32(&b, 2);
    wb_u64(&b, 256);
    wb_u64(&b, 64);
    wb_u32(&b, INFER_TYPE_F16);
    wb_u64(&b, off);
    off += 256 * 64 * 2;
    while (b.n % 32) wb(&b, "", 1);
    {
        unsigned char *zeros = (unsigned char *)calloc(1, (size_t)off);
        wb(&b, zeros, (size_t)off);
        free(zeros);
    }
    return b;
}

static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

Test(quantize, mix_layout_of_32_layers) {
    wbuf b = build_llama(32);
    infer_error err;
    infer_gguf *g = infer_gguf_open_memory(b.p, b.n, &err);
    int l, n6 = 0;
    cr_assert_not_null(g, "%s", err.msg);
    for (l = 0; l < 32; l++) {
        char name[64];
        infer_type want = more_bits(l, 32) ? INFER_TYPE_Q6_K : INFER_TYPE_Q4_K;
        n6 += want == INFER_TYPE_Q6_K;
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, name), INFER_QUANT_Q4_K_M), (int)want, "%s", name);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, name), INFER_QUANT_Q4_K_M), (int)want, "%s", name);
        cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, name), INFER_QUANT_Q5_K_M),
                     (int)(want == INFER_TYPE_Q6_K ? INFER_TYPE_Q6_K : INFER_TYPE_Q5_K), "%s", name);
        cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, name), INFER_QUANT_Q4_K), (int)INFER_TYPE_Q4_K);
        /* rows of 100: no block format fits, F16 as llama.cpp's last resort */
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, name), INFER_QUANT_Q4_K_M), (int)INFER_TYPE_F16);
        cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, name), INFER_QUANT_Q8_0), (int)INFER_TYPE_F16);
    }
    cr_assert_eq(n6, 16, "llama.cpp's Q4_K_M gives 16 of 32 layers Q6_K attn_v");
    cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, "output.weight"), INFER_QUANT_Q4_K_M),
                 (int)INFER_TYPE_Q6_K);
    cr_assert_eq(infer_quantize_tensor_type(g, infer_gguf_find_tensor(g, "output.weight"), INFER_QUANT_Q4_0),
                 (int)INFER_TYPE_Q4_0, "plain targets are pure");
    infer_gguf_close(g);
    free(b.p);
}

/* ---- logits of the quantized model against its source ---- */

/* max over positions of max |a - b| / (max - min of a's logits there) */
static double logit_error(infer_model *a, infer_model *b, const infer_token *toks, int n) {
    infer_error err;
    infer_context_params cp = infer_context_default_params();
    infer_context *ca, *cb;
    double worst = 0;
    int i, j, nv = infer_model_n_vocab(a);
    cp.n_ctx = 128;
    ca = infer_context_new(a, &cp, &err);
    cb = infer_context_new(b, &cp, &err);
    cr_assert(ca && cb);
    cr_assert_eq(infer_decode(ca, toks, n, 1, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(cb, toks, n, 1, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < n; i++) {
        const float *la = infer_get_logits(ca, i), *lb = infer_get_logits(cb, i);
        float lo = la[0], hi = la[0];
        double d = 0;
        for (j = 0; j < nv; j++) {
            lo = fminf(lo, la[j]);
            hi = fmaxf(hi, la[j]);
            d = fmax(d, fabs((double)la[j] - lb[j]));
        }
        worst = fmax(worst, d / (hi - lo));
    }
    infer_context_free(ca);
    infer_context_free(cb);
    return worst;
}

Test(quantize, logits_close_to_source) {
    static const char *text = "Once upon a time, there was a little girl named Lily. She loved to play outside in "
                              "the park with her dog. One day, she saw a big red ball under a tree.";
    infer_error err;
    infer_model *src;
    infer_token toks[128];
    int n, t;
    need_shared();
    mk_tmpdir();
    src = infer_model_load(model("tinystories-656k-f32"), NULL, &err);
    cr_assert_not_null(src, "%s", err.msg);
    n = infer_tokenize(src, text, strlen(text), toks, 128, 1, 0);
    cr_assert(n > 20 && n <= 128);
    for (t = 0; t < INFER_QUANT_COUNT; t++) {
        /* worst |difference| over the whole vocabulary at any position, as a
           fraction of that position's logit range. This 128-wide model is
           touchy: llama.cpp's own Q8_0 of it (the same bytes as ours) is off
           by 1.2%, its Q4_0 by 12%. The K targets fall back to Q5_0, Q5_1,
           Q8_0 here (rows of 128 and 384). */
        static const double limits[INFER_QUANT_COUNT] = {1e-6, 0.005, 0.01, 0.02, 0.15, 0.15,
                                                         0.08, 0.08,  0.08, 0.08, 0.02, 0.06, 0.06};
        double limit = limits[t], e;
        infer_model *q;
        quantize_ok(model("tinystories-656k-f32"), tmp("q.gguf"), (infer_quant_target)t, 2);
        q = infer_model_load(tmp("q.gguf"), NULL, &err);
        cr_assert_not_null(q, "%s", err.msg);
        e = logit_error(src, q, toks, n);
        cr_log_info("%-6s worst logit error %.3f%% of the range", infer_quant_target_name((infer_quant_target)t),
                    100 * e);
        cr_assert_leq(e, limit, "%s: logits differ by %.3f%% of their range (limit %.0f%%)",
                      infer_quant_target_name((infer_quant_target)t), 100 * e, 100 * limit);
        infer_model_free(q);
    }
    infer_model_free(src);
    rm_tmpdir();
}

/* ---- threads, errors ---- */

Test(quantize, threads_change_no_byte) {
    size_t na, nb;
    char *a, *b;
    need_shared();
    mk_tmpdir();
    quantize_ok(model("tinystories-656k-f16"), tmp("t1.gguf"), INFER_QUANT_Q4_K_M, 1);
    quantize_ok(model("tinystories-656k-f16"), tmp("t3.gguf"), INFER_QUANT_Q4_K_M, 3);
    a = tu_read_file(tmp("t1.gguf"), &na);
    b = tu_read_file(tmp("t3.gguf"), &nb);
    cr_assert(a && b && na == nb && !memcmp(a, b, na), "1 and 3 threads wrote different files");
    free(a);
    free(b);
    rm_tmpdir();
}

Test(quantize, errors) {
    infer_error err;
    FILE *f;
    need_shared();
    mk_tmpdir();
    cr_assert_eq(infer_quantize(tmp("missing.gguf"), tmp("o.gguf"), INFER_QUANT_Q8_0, NULL, &err), INFER_ERR_IO);
    cr_assert_eq(access(tmp("o.gguf"), F_OK), -1);
    cr_assert_eq(infer_quantize(model("tinystories-656k-f32"), tmp("o.gguf"), (infer_quant_target)99, NULL, &err),
                 INFER_ERR_ARG);
    /* already quantized: refused unless asked for, and no file left */
    cr_assert_eq(infer_quantize(model("tinystories-656k-q8_0"), tmp("o.gguf"), INFER_QUANT_Q4_0, NULL, &err),
                 INFER_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "requantize"), "%s", err.msg);
    cr_assert_eq(access(tmp("o.gguf"), F_OK), -1, "a failed quantization left its output");
    /* the same format needs no conversion: copied */
    quantize_ok(model("tinystories-656k-q8_0"), tmp("o.gguf"), INFER_QUANT_Q8_0, 1);
    /* writing over the input */
    quantize_ok(model("tinystories-656k-f32"), tmp("in.gguf"), INFER_QUANT_F32, 1);
    cr_assert_eq(infer_quantize(tmp("in.gguf"), tmp("in.gguf"), INFER_QUANT_Q8_0, NULL, &err), INFER_ERR_ARG);
    /* not a GGUF file */
    f = fopen(tmp("junk.gguf"), "wb");
    fputs("not a model", f);
    fclose(f);
    cr_assert_eq(infer_quantize(tmp("junk.gguf"), tmp("o2.gguf"), INFER_QUANT_Q8_0, NULL, &err), INFER_ERR_FORMAT);
    /* an unwritable output */
    cr_assert_eq(infer_quantize(model("tinystories-656k-f32"), "/nonexistent-dir/o.gguf", INFER_QUANT_Q8_0, NULL, &err),
                 INFER_ERR_IO);
    cr_assert_eq(infer_quant_target_from_name("q4_k_m"), INFER_QUANT_Q4_K_M);
    cr_assert_eq(infer_quant_target_from_name("Q8_0"), INFER_QUANT_Q8_0);
    cr_assert_eq(infer_quant_target_from_name("Q7"), -1);
    rm_tmpdir();
}

static char *cli(const char *args, int *status) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", INFER_CLI_PATH, args);
    return tu_run(cmd, status);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

Test(quantize, cli) {
    char args[2048], *out;
    int status;
    need_shared();
    mk_tmpdir();
    snprintf(args, sizeof args, "quantize '%s' '%s' q4_0 -t 2", model("tinystories-656k-f16"), tmp("c.gguf"));
    out = cli(args, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(strstr(out, "blk.0.ffn_down.weight") && strstr(out, "Q4_0"), "%s", out);
    free(out);
    cr_assert_eq(access(tmp("c.gguf"), F_OK), 0);
    /* each error: one line, non-zero */
    {
        static const char *bad[] = {"quantize", "quantize a.gguf", "quantize IN OUT Q7_X", "quantize IN OUT Q8_0 --what",
                                    "quantize /nonexistent.gguf OUT Q8_0", "quantize IN OUT Q8_0 -t zero"};
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            out = cli(bad[i], &status);
            cr_assert(status > 0 && status < 128, "infer %s: status %d", bad[i], status);
            cr_assert_eq(count_lines(out), 1, "infer %s: not one line:\n%s", bad[i], out);
            free(out);
        }
    }
    rm_tmpdir();
}

/* ---- the blocks, checked with the PyPI gguf package ---- */

/* ours quantized from src; check_quantized.py against ref (may be NULL) */
static void python_check(const char *src, infer_quant_target t, const char *ref) {
    char cmd[4096], *out;
    int status;
    infer_error err;
    infer_quantize_params qp = infer_quantize_default_params();
    quantize_ok(src, tmp("ours.gguf"), t, 2);
    qp.allow_requantize = 1;
    cr_assert_eq(infer_quantize(tmp("ours.gguf"), tmp("ours-f32.gguf"), INFER_QUANT_F32, &qp, &err), INFER_OK, "%s",
                 err.msg);
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/check_quantized.py' '%s' '%s' '%s' %s%s%s 2>&1", INFER_SOURCE_DIR, src,
             tmp("ours.gguf"), tmp("ours-f32.gguf"), ref ? "'" : "", ref ? ref : "", ref ? "'" : "");
    out = tu_run(cmd, &status);
    cr_assert_not_null(out);
    cr_log_info("%s %s:\n%s", src, infer_quant_target_name(t), out);
    cr_assert_neq(status, 2, "numpy and gguf are needed (scripts/deps.sh installs them): %s", out);
    cr_assert_eq(status, 0, "check_quantized.py on %s from %s:\n%s", infer_quant_target_name(t), src, out);
    free(out);
}

Test(quantize, blocks_against_gguf_package) {
    static const struct {
        infer_quant_target t;
        const char *ref;
    } cases[] = {{INFER_QUANT_Q8_0, "tinystories-656k-q8_0"}, {INFER_QUANT_Q4_0, "tinystories-656k-q4_0"},
                 {INFER_QUANT_Q4_1, "tinystories-656k-q4_1"}, {INFER_QUANT_Q5_0, "tinystories-656k-q5_0"},
                 {INFER_QUANT_Q5_1, "tinystories-656k-q5_1"}, {INFER_QUANT_Q4_K_M, NULL},
                 {INFER_QUANT_Q5_K_M, NULL}};
    size_t c;
    need_shared();
    mk_tmpdir();
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        python_check(model("tinystories-656k-f16"), cases[c].t, cases[c].ref ? model(cases[c].ref) : NULL);
        python_check(model("tinystories-656k-f32"), cases[c].t, NULL);
    }
    rm_tmpdir();
}

/* K-quants where rows are whole super-blocks: against llama.cpp's files of
   the same F16 source. */
Test(quantize, k_quants_against_llama_cpp) {
    static const struct {
        infer_quant_target t;
        const char *ref;
    } cases[] = {{INFER_QUANT_Q4_K, "synth-256-q4_k"}, {INFER_QUANT_Q5_K, "synth-256-q5_k"},
                 {INFER_QUANT_Q6_K, "synth-256-q6_k"}, {INFER_QUANT_Q4_K_M, "synth-256-q4_k_m"},
                 {INFER_QUANT_Q8_0, "synth-256-q8_0"}, {INFER_QUANT_Q4_0, "synth-256-q4_0"}};
    size_t c;
    need_shared();
    mk_tmpdir();
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        python_check(model("synth-256-f16"), cases[c].t, model(cases[c].ref));
    rm_tmpdir();
}
