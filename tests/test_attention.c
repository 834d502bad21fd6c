/* test_attention.c - the tiled attention kernel against a plain one in
   double precision on random data (every instruction set, F16 and Q8_0
   caches, batches that span several key tiles, grouped heads), and the Q8_0
   KV cache of a whole model against llama.cpp's reference. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float g_uniform(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* The cache of layer 0 as floats: positions from..n-1 (the ring of a
   sliding window holds only the last ones) of kv_dim values, K or V. */
static float *cached(const infer__kv_cache *kv, int v_side, int from, int n) {
    float *f = (float *)calloc((size_t)n * kv->kv_dim, sizeof(float));
    int p, i, slots = kv->slots[0];
    for (p = from; p < n; p++) {
        int slot = p % slots;
        if (kv->type == INFER_TYPE_F16 && v_side)
            for (i = 0; i < kv->kv_dim; i++)
                f[(size_t)p * kv->kv_dim + i] = infer__fp16_to_fp32(((const uint16_t *)kv->v[0])[(size_t)i * slots + slot]);
        else
            infer__traits(kv->type)->to_float((v_side ? kv->v[0] : kv->k[0]) + (size_t)slot * kv->k_row,
                                              f + (size_t)p * kv->kv_dim, kv->kv_dim);
    }
    return f;
}

/* One shape: n_kv_heads heads of hd values, group query heads each, n_tok
   tokens after pos0 cached ones, the keys split into `splits` runs merged
   after (flash-decoding; 1: one run); with_sinks: a random sink logit per
   query head (gpt-oss's), in each row's max and sum; no_kept: no scores
   kept (the online max and sum of a long context's rows). Returns the worst
   error over the bound. */
static double check_shape(const infer__kernels *kern, infer_type kv_type, int n_kv_heads, int hd, int group, int pos0,
                          int n_tok, int window, float softcap, int ordered, int splits, int with_sinks, int no_kept) {
    int n_heads = n_kv_heads * group, kv_dim = n_kv_heads * hd, dim = n_heads * hd, n_ctx = pos0 + n_tok + 3;
    infer__kv_cache kv;
    infer_model model;
    infer__layer layer;
    infer_error err;
    infer__attn_batch b;
    infer__attn_scratch sc;
    float *q = (float *)malloc(sizeof(float) * n_tok * dim), *out = (float *)malloc(sizeof(float) * n_tok * dim);
    float *kr = (float *)malloc(sizeof(float) * kv_dim), *vr = (float *)malloc(sizeof(float) * kv_dim);
    float *scratch = (float *)malloc(sizeof(float) * infer__attn_scratch_floats(hd, ordered, n_ctx));
    float *qd = (float *)malloc(sizeof(float) * hd);
    uint8_t *qx = (uint8_t *)malloc((size_t)hd * 4);
    double *s = (double *)malloc(sizeof(double) * n_ctx), worst = 0;
    float *part = (float *)malloc(sizeof(float) * (size_t)n_tok * n_heads * splits * (hd + INFER__ATT_PART_HEAD));
    float *scores = (float *)malloc(sizeof(float) * (size_t)n_tok * n_heads * n_ctx);
    float *sinks = (float *)malloc(sizeof(float) * n_heads);
    int phase;
    float *kf, *vf;
    infer_type qt = infer__traits(kv_type)->vec_dot_type;
    int p, i, t, h, d, item;

    memset(&model, 0, sizeof model);
    memset(&layer, 0, sizeof layer);
    model.n_layers = 1, model.head_dim = hd, model.kv_dim = kv_dim, model.layers = &layer;
    layer.window = window;
    /* a window's ring holds the window and one batch: here n_tok tokens */
    cr_assert(infer__kv_init(&kv, kv_type, &model, NULL, n_ctx, n_tok, 1, &err), "%s", err.msg);
    if (window) cr_assert_eq(kv.slots[0], window + n_tok < n_ctx ? window + n_tok : n_ctx);
    for (p = 0; p < pos0 + n_tok; p++) {
        for (i = 0; i < kv_dim; i++) kr[i] = 2 * g_uniform(), vr[i] = g_uniform();
        infer__kv_store(&kv, kern, 0, 0, p, kr, vr, kv_dim);
    }
    for (i = 0; i < n_tok * dim; i++) q[i] = 2 * g_uniform();
    /* the scores are about 1 in size: sinks that outweigh them, match them,
       or vanish */
    for (h = 0; h < n_heads; h++) {
        static const float base[4] = {6.0f, 1.5f, -40.0f, 0.0f};
        sinks[h] = base[h % 4] + 2 * g_uniform();
    }
    memset(out, 0, sizeof(float) * n_tok * dim);
    infer__attn_scratch_carve(&sc, scratch, hd, ordered, n_ctx);
    if (no_kept) sc.n_kept = 0;
    b.kv = &kv, b.kern = kern, b.seq = 0, b.layer = 0, b.pos0 = pos0, b.n_tok = n_tok, b.n_heads = n_heads;
    b.head_dim = hd, b.n_kv_heads = kv_dim / hd;
    b.window = window, b.scale = 1.0f / sqrtf((float)hd), b.softcap = softcap;
    b.q = q, b.out = out, b.ldq = b.ldo = dim;
    b.ordered = ordered;
    b.sinks = with_sinks ? sinks : NULL;
    b.n_splits = splits, b.part = part, b.scores = scores, b.scores_ld = (size_t)n_ctx;
    /* runs of whole tiles, `splits` of them over the context, as a context has them */
    b.split_len = INFER__ATT_TILE * ((n_ctx + INFER__ATT_TILE * splits - 1) / (INFER__ATT_TILE * splits));
    /* split: every run's phase 1, then every run's phase 2, then the merge */
    for (phase = splits > 1; phase <= (splits > 1 ? 2 : 0); phase++) {
        b.phase = phase;
        for (item = 0; item < infer__attn_n_items(&b) * splits; item++)
            if (ordered) infer__attn_item_ordered(&b, item, &sc);
            else infer__attn_item(&b, item, &sc);
    }
    if (splits > 1) infer__attn_merge(part, n_heads, hd, splits, 0, n_tok, out, dim);
    kf = cached(&kv, 0, window && pos0 > window ? pos0 - window : 0, pos0 + n_tok);
    vf = cached(&kv, 1, window && pos0 > window ? pos0 - window : 0, pos0 + n_tok);

    for (t = 0; t < n_tok; t++)
        for (h = 0; h < n_heads; h++) {
            int kvh = h / group, n_keys = pos0 + t + 1, first = window && n_keys > window ? n_keys - window : 0;
            double mx = with_sinks ? sinks[h] : -INFINITY, sum = 0, vmax = 0;
            /* q as the kernel sees it: converted to K's dot type */
            kern->from_float[qt](q + (size_t)t * dim + (size_t)h * hd, qx, hd);
            infer__traits(qt)->to_float(qx, qd, hd);
            for (p = first; p < n_keys; p++) {
                double dot = 0;
                for (d = 0; d < hd; d++) dot += (double)qd[d] * kf[(size_t)p * kv_dim + kvh * hd + d];
                if (softcap > 0) dot = softcap * tanh(dot / softcap);
                s[p] = dot / sqrt((double)hd);
                if (s[p] > mx) mx = s[p];
            }
            for (p = first; p < n_keys; p++) sum += s[p] = exp(s[p] - mx);
            if (with_sinks) sum += exp(sinks[h] - mx); /* in the sum, with no value */
            for (d = 0; d < hd; d++) {
                double o = 0, got = out[(size_t)t * dim + (size_t)h * hd + d], bound;
                vmax = 0;
                for (p = first; p < n_keys; p++) {
                    double v = vf[(size_t)p * kv_dim + kvh * hd + d];
                    o += s[p] / sum * v;
                    if (fabs(v) > vmax) vmax = fabs(v);
                }
                /* probabilities meet V rounded to F16: 2^-11 relative each */
                bound = 1e-3 * vmax + 1e-5;
                if (fabs(got - o) / bound > worst) worst = fabs(got - o) / bound;
            }
        }
    infer__kv_free(&kv);
    free(q), free(out), free(kr), free(vr), free(scratch), free(qd), free(qx), free(s), free(kf), free(vf), free(part), free(scores);
    free(sinks);
    return worst;
}

/* Every shape {n_kv_heads, head_dim, group, pos0, n_tok, window, softcap}
   against the plain attention, on every instruction set and both caches,
   for F16 in llama.cpp's order too (infer__attn_item_ordered), and with
   the keys split into 3 and 8 runs (flash-decoding's merge). */
static void check_shapes(const int (*shapes)[7], int n_shapes, int with_sinks) {
    infer_type types[] = {INFER_TYPE_F16, INFER_TYPE_Q8_0, INFER_TYPE_F16, INFER_TYPE_F16, INFER_TYPE_Q8_0,
                          INFER_TYPE_Q4_0, INFER_TYPE_Q4_0, INFER_TYPE_F16, INFER_TYPE_F16};
    const char *what[] = {"", "", " (llama.cpp's order)", " (keys in 3 runs)", " (keys in 8 runs)", "", " (keys in 3 runs)",
                          " (no scores kept)", " (llama.cpp's order, no scores kept)"};
    int splits[] = {1, 1, 1, 3, 8, 1, 3, 1, 1};
    int isa, ti, si, n_run = 0;
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
        infer__kernels kern;
        if (!infer__kernels_install(&kern, (infer__isa)isa)) continue;
        for (ti = 0; ti < 9; ti++)
            for (si = 0; si < n_shapes; si++) {
                const int *sh = shapes[si];
                double w = check_shape(&kern, types[ti], sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], (float)sh[6],
                                       ti == 2 || ti == 8, splits[ti], with_sinks, ti >= 7);
                cr_expect(w <= 1.0,
                          "%s, %s cache%s%s, %d KV heads of %d, group %d, %d tokens after %d, window %d, softcap %d: "
                          "error %.2f x bound",
                          infer__isa_name((infer__isa)isa), infer__traits(types[ti])->name, what[ti], with_sinks ? ", sinks" : "", sh[0], sh[1], sh[2], sh[4],
                          sh[3], sh[5], sh[6], w);
                n_run++;
            }
    }
    cr_assert_gt(n_run, 0);
}

static const int g_shapes[][7] = {
    /* n_kv_heads, head_dim, group, pos0, n_tok, window, softcap */
    {1, 64, 1, 0, 1, 0, 0},    {2, 64, 3, 0, 5, 0, 0},     {2, 64, 3, 0, 70, 0, 0},  {1, 64, 4, 130, 1, 0, 0},
    {3, 64, 3, 63, 2, 0, 0},   {2, 32, 2, 200, 17, 0, 0},  {2, 128, 1, 10, 130, 0, 0}, {4, 64, 8, 64, 64, 0, 0},
    {1, 96, 2, 127, 3, 0, 0},  {3, 64, 3, 1500, 1, 0, 0}, {3, 64, 3, 1000, 4, 0, 0},
};

/* Sliding windows (a ring holding the window and a batch, tiles before
   the window skipped, tiles cut at the ring's end) and soft-capped scores. */
static const int g_window_shapes[][7] = {
    {1, 64, 1, 0, 40, 32, 0},    {2, 64, 2, 100, 1, 32, 0},  {2, 64, 2, 100, 7, 32, 50},
    {1, 64, 4, 300, 70, 64, 0},  {2, 32, 2, 37, 130, 100, 0}, {1, 64, 1, 500, 3, 512, 30},
    {2, 64, 3, 0, 70, 0, 20},    {1, 128, 2, 250, 65, 129, 0},
};

Test(attention, tiled_kernel_matches_plain_attention) {
    check_shapes(g_shapes, (int)(sizeof g_shapes / sizeof g_shapes[0]), 0);
}

/* The sliding windows and soft-capped scores against the plain attention
   over exactly the keys each query sees. */
Test(attention, sliding_window_and_softcap) {
    check_shapes(g_window_shapes, (int)(sizeof g_window_shapes / sizeof g_window_shapes[0]), 0);
}

/* gpt-oss's attention sinks (a logit per head in each softmax's max and
   sum, adding no value), in every pass: tiled (kept scores and online
   stats), split into 3 and 8 runs (the sink once, in the merge) and
   llama.cpp's order, every shape above, ISA and cache. */
Test(attention, sinks_in_every_pass) {
    check_shapes(g_shapes, (int)(sizeof g_shapes / sizeof g_shapes[0]), 1);
    check_shapes(g_window_shapes, (int)(sizeof g_window_shapes / sizeof g_window_shapes[0]), 1);
}

Test(attention, kv_cache_types_refused_by_name) {
    infer__kv_cache kv;
    infer_error err;
    infer_model model;
    infer__layer layer;
    memset(&model, 0, sizeof model);
    memset(&layer, 0, sizeof layer);
    model.n_layers = 1, model.head_dim = 64, model.kv_dim = 64, model.layers = &layer;
    cr_assert_not(infer__kv_init(&kv, INFER_TYPE_Q5_0, &model, NULL, 16, 16, 1, &err));
    cr_assert(strstr(err.msg, "F16, Q8_0 or Q4_0") != NULL, "%s", err.msg);
    model.head_dim = model.kv_dim = 8;
    cr_assert_not(infer__kv_init(&kv, INFER_TYPE_Q8_0, &model, NULL, 16, 16, 1, &err));
    cr_assert(strstr(err.msg, "multiple of 32") != NULL, "%s", err.msg);
    cr_assert_not(infer__kv_init(&kv, INFER_TYPE_Q4_0, &model, NULL, 16, 16, 1, &err));
    cr_assert(strstr(err.msg, "Q4_0 KV cache needs") != NULL, "%s", err.msg);
}

/* A sliding-window model's cache holds the window and a batch per sliding
   layer: Gemma 3 270M's at a 32k context (15 of 18 layers slide over 512). */
Test(attention, sliding_window_cache_memory) {
    char path[1024];
    infer_model *m;
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    size_t full;
    snprintf(path, sizeof path, "%s/models/gemma-3-270m-q4_k_m.gguf", INFER_SOURCE_DIR);
    m = infer_model_load(path, NULL, &err);
    if (!m) cr_skip_test("%s: %s (python3 scripts/fetch_model.py gemma3 fetches it)", path, err.msg);
    cp.n_ctx = 32768;
    c = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c, "%s", err.msg);
    full = (size_t)m->n_layers * 32768 * 2 * infer__row_size(INFER_TYPE_F16, m->kv_dim);
    cr_assert_eq(c->kv.bytes, (size_t)(3 * 32768 + 15 * (512 + 512)) * 2 * infer__row_size(INFER_TYPE_F16, m->kv_dim));
    cr_log_info("Gemma 3 270M KV cache at 32768 positions: %.1f MiB (every layer full: %.1f MiB)",
                c->kv.bytes / 1048576.0, full / 1048576.0);
    /* what a token reads: every key of the 3 global layers, at most the window of the 15 sliding ones */
    cr_assert_eq(infer_context_kv_read_bytes(c, 9999), (size_t)(3 * 10000 + 15 * 512) * 2 * infer__row_size(INFER_TYPE_F16, m->kv_dim));
    cr_assert_eq(infer_context_kv_read_bytes(c, 99), (size_t)18 * 100 * 2 * infer__row_size(INFER_TYPE_F16, m->kv_dim));
    cr_assert_eq(infer_context_kv_read_bytes(c, -1), 0);
    infer_context_free(c);
    infer_model_free(m);
}

/* The whole model with a quantized cache, on the long prompt (1891 tokens,
   many key tiles): llama.cpp's logits with an F16 cache, within tol of the
   range, and less cache memory. */
static void check_cache_type(infer_type type, double tol) {
    char mpath[1024], rpath[1024];
    char *text;
    tu_json *ref;
    const tu_json *ptoks, *ptop;
    infer_model *m;
    infer_context *c, *c16;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_token *toks;
    double worst = 0;
    int np, nv, i, j;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to run");
    tu_shared_path(mpath, sizeof mpath, "models/synth-256-f16.gguf");
    tu_shared_path(rpath, sizeof rpath, "reference/synth-256-f16.long.json");
    text = tu_read_file(rpath, NULL);
    cr_assert_not_null(text, "cannot read %s", rpath);
    ref = tu_json_parse(text);
    free(text);
    cr_assert_not_null(ref);
    ptoks = tu_json_get(ref, "prompt_tokens");
    ptop = tu_json_get(ref, "prompt_top_logits");
    np = (int)ptoks->n;
    m = infer_model_load(mpath, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    toks = (infer_token *)malloc(sizeof(infer_token) * (size_t)np);
    for (i = 0; i < np; i++) toks[i] = (infer_token)ptoks->items[i].num;
    cp.n_ctx = np;
    cp.n_threads = 2;
    cp.n_batch = 256; /* several batches, each over the cache the last ones filled */
    c16 = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c16, "%s", err.msg);
    cp.kv_type = type;
    c = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_lt(infer_context_metrics(c).context_bytes, infer_context_metrics(c16).context_bytes);
    cr_assert_eq(infer_decode(c, toks, np, 1, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < np; i++) {
        const float *l = infer_context_logits(c, i);
        const tu_json *top = &ptop->items[i];
        float lo = l[0], hi = l[0];
        for (j = 1; j < nv; j++) lo = l[j] < lo ? l[j] : lo, hi = l[j] > hi ? l[j] : hi;
        for (j = 0; j < (int)top->n; j++) {
            int id = (int)top->items[j].items[0].num;
            double e = fabs(l[id] - top->items[j].items[1].num) / (hi - lo);
            if (e > worst) worst = e;
        }
    }
    cr_log_info("%s KV cache, synth-256-f16 long prompt (%d tokens): worst %.3f%% of range", infer__traits(type)->name, np,
                100 * worst);
    cr_expect_leq(worst, tol, "%s cache: worst %.3f%% of range", infer__traits(type)->name, 100 * worst);
    infer_context_free(c);
    infer_context_free(c16);
    infer_model_free(m);
    free(toks);
    tu_json_free(ref);
}

/* Q8_0: within 3% (the 4-bit weight formats' tolerance). */
Test(attention, q8_0_cache_follows_the_reference) { check_cache_type(INFER_TYPE_Q8_0, 0.03); }

/* Q4_0: 4 bits a value in K and V, so a random model's attention moves by
   much more (measured 17.2% at worst, 1.5% for Q8_0); within 25%. */
Test(attention, q4_0_cache_follows_the_reference) { check_cache_type(INFER_TYPE_Q4_0, 0.25); }

Test(attention, q8_0_cache_needs_whole_blocks_per_head) {
    char mpath[1024];
    infer_model *m;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to run");
    tu_shared_path(mpath, sizeof mpath, "models/stories260K.gguf"); /* heads of 8 values */
    m = infer_model_load(mpath, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    cp.kv_type = INFER_TYPE_Q8_0;
    cr_assert_null(infer_context_new(m, &cp, &err));
    cr_assert_eq(err.code, INFER_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "multiple of 32") != NULL, "%s", err.msg);
    infer_model_free(m);
}
