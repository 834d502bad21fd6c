/* Hybrid models (recurrent layers beside attention: lfm2, qwen35,
   granitehybrid): four sequences in one batch against each alone, a saved
   state continuing bit for bit, a copied sequence diverging, truncation by
   the checkpoint and its refusals, and a cancelled pass leaving the state
   as it was. Each on ../shared's synthetic model of each family, on the
   device INFER_DEVICE names (device auto reads it): with cuda the state
   lives on the GPU (the emulated one in a -DINFER_GPU_EMULATOR build). */
#define _XOPEN_SOURCE 700 /* mkstemp */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const char *const MODELS[] = {"arch/synth-lfm2-f16.gguf", "arch/synth-qwen35-f16.gguf",
                                     "arch/synth-granitehybrid-f16.gguf"};
#define N_MODELS 3

static infer_model *load(const char *rel) {
    char path[1024];
    infer_error err;
    infer_model *m;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the hybrid models' tests need its models");
    tu_shared_path(path, sizeof path, rel);
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s: %s", rel, err.msg);
    if (getenv("INFER_DEVICE") && !strcmp(getenv("INFER_DEVICE"), "cuda"))
        cr_assert_eq(infer_model_device(m), INFER_DEVICE_CUDA, "%s: not on the GPU (%s)", rel,
                     infer_model_warning(m) ? infer_model_warning(m) : "no warning");
    return m;
}

static infer_context *ctx(infer_model *m, int n_seq, infer_full_policy policy) {
    infer_context_params p = infer_context_default_params();
    infer_error err;
    infer_context *c;
    p.n_ctx = 128, p.n_seq = n_seq, p.full_policy = policy, p.n_threads = 2;
    c = infer_context_new(m, &p, &err);
    cr_assert(c, "%s", err.msg);
    return c;
}

/* Tokens of the synthetic vocabulary: a fixed pseudo-random run. */
static void tokens(infer_token *t, int n, int seed, int nv) {
    unsigned x = 2654435761u * (unsigned)(seed + 1);
    int i;
    for (i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        t[i] = 3 + (int)((x >> 8) % (unsigned)(nv - 3));
    }
}

/* Logits of tokens t[0..n) fed to a fresh context alone. */
static void alone(infer_model *m, const infer_token *t, int n, float *out) {
    infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP);
    infer_error err;
    cr_assert_eq(infer_decode(c, t, n, 0, &err), INFER_OK, "%s", err.msg);
    memcpy(out, infer_context_logits(c, -1), sizeof(float) * infer_model_n_vocab(m));
    infer_context_free(c);
}

/* The same fed in calls of the given sizes (ending with 0), as a sequence
   of a context was fed: llama.cpp's order sums a one-token call otherwise
   than a batch, so like is compared with like, bit for bit. */
static void alone_calls(infer_model *m, const infer_token *t, const int *calls, float *out) {
    infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP);
    infer_error err;
    int at = 0, i;
    for (i = 0; calls[i]; at += calls[i++])
        cr_assert_eq(infer_decode(c, t + at, calls[i], 0, &err), INFER_OK, "%s", err.msg);
    memcpy(out, infer_context_logits(c, -1), sizeof(float) * infer_model_n_vocab(m));
    infer_context_free(c);
}

/* The first n tokens in one call, then `steps` one at a time, each beside
   a token of a second sequence: as the sequences of a batched context
   have their steps (the products of a batch; the scan of a sequence's one
   token), so like is compared with like. */
static void alone_steps(infer_model *m, const infer_token *t, int n, int steps, float *out) {
    infer_context *c = ctx(m, 2, INFER_FULL_POLICY_STOP);
    infer_token tok[2];
    int seq[2] = {0, 1}, i;
    infer_batch b;
    infer_error err;
    cr_assert_eq(infer_decode(c, t, n, 0, &err), INFER_OK, "%s", err.msg);
    memset(&b, 0, sizeof b);
    b.n = 2, b.tokens = tok, b.seq = seq;
    for (i = 0; i < steps; i++) {
        tok[0] = t[n + i], tok[1] = t[i];
        cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
    }
    memcpy(out, infer_seq_logits(c, 0), sizeof(float) * infer_model_n_vocab(m));
    infer_context_free(c);
}

/* Four sequences of 5, 9, 13 and 17 tokens interleaved in one batch, then
   three steps together: each sequence's logits as it gets them alone, fed
   as alike (its run in chunks where it is 16 tokens or more, the steps'
   scans a token at a time). */
Test(recurrent, four_sequences_batched_match_alone) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), len[4] = {5, 9, 13, 17}, s, i, n = 0, step, seq[64];
        infer_token t[4][24], tok[64];
        infer_context *c = ctx(m, 4, INFER_FULL_POLICY_STOP);
        float *ref = (float *)malloc(sizeof(float) * nv);
        infer_batch b;
        infer_error err;
        for (s = 0; s < 4; s++) tokens(t[s], 24, 10 * k + s, nv);
        for (i = 0; i < 17; i++)
            for (s = 0; s < 4; s++)
                if (i < len[s]) tok[n] = t[s][i], seq[n++] = s;
        memset(&b, 0, sizeof b);
        b.n = n, b.tokens = tok, b.seq = seq;
        cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
        for (step = 0; step < 3; step++) {
            for (s = 0; s < 4; s++) {
                double d;
                alone_steps(m, t[s], len[s], step, ref);
                d = tu_logit_diff(ref, infer_seq_logits(c, s), nv);
                cr_assert_lt(d, 1e-4, "%s: sequence %d, step %d: %.2e of the range", MODELS[k], s, step, d);
            }
            for (s = 0; s < 4; s++) tok[s] = t[s][len[s] + step], seq[s] = s;
            b.n = 4;
            cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
        }
        free(ref);
        infer_context_free(c);
        infer_model_free(m);
    }
}

/* A prompt's run of 16 tokens or more scans in chunks of 64 (matrix
   products), a shorter one a token at a time: 120 tokens in one call, and
   in calls of 37 and 83 (the second from the state the first left),
   against calls of 10 (every scan a token at a time; the products alike,
   a batch's): the same logits up to rounding, 0.1% of the range. */
Test(recurrent, chunked_scan_matches_token_scan) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), whole[2] = {120, 0}, split[3] = {37, 83, 0}, tens[13], i;
        infer_token t[120];
        float *ref = (float *)malloc(sizeof(float) * nv), *got = (float *)malloc(sizeof(float) * nv);
        double d;
        for (i = 0; i < 12; i++) tens[i] = 10;
        tens[12] = 0;
        tokens(t, 120, 70 + k, nv);
        alone_calls(m, t, tens, ref);
        alone_calls(m, t, whole, got);
        d = tu_logit_diff(ref, got, nv);
        cr_log_info("%s: one call of 120 against calls of 10: %.2e of the range", MODELS[k], d);
        cr_assert_lt(d, 1e-3, "%s: one call of 120 against calls of 10: %.2e of the range", MODELS[k], d);
        alone_calls(m, t, split, got);
        d = tu_logit_diff(ref, got, nv);
        cr_log_info("%s: calls of 37 and 83 against calls of 10: %.2e of the range", MODELS[k], d);
        cr_assert_lt(d, 1e-3, "%s: calls of 37 and 83 against calls of 10: %.2e of the range", MODELS[k], d);
        free(ref), free(got);
        infer_model_free(m);
    }
}

/* A saved sequence, loaded into a fresh context and into another sequence
   of the same one (from a file), continues bit for bit. */
Test(recurrent, saved_state_continues_bit_for_bit) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), i;
        infer_context *c = ctx(m, 2, INFER_FULL_POLICY_STOP), *d = ctx(m, 1, INFER_FULL_POLICY_STOP);
        infer_token t[24];
        infer_error err;
        char path[] = "/tmp/infer_rstate_XXXXXX";
        int fd = mkstemp(path);
        size_t n;
        void *buf;
        float *ref = (float *)malloc(sizeof(float) * nv * 8);
        cr_assert(fd >= 0);
        close(fd);
        tokens(t, 24, 100 + k, nv);
        cr_assert_eq(infer_decode(c, t, 12, 0, &err), INFER_OK, "%s", err.msg);
        n = infer_seq_state_size(c, 0);
        buf = malloc(n);
        cr_assert_eq(infer_seq_state_save(c, 0, buf, n), n);
        cr_assert_eq(infer_seq_state_save_file(c, 0, path, &err), INFER_OK, "%s", err.msg);
        for (i = 0; i < 8; i++) {
            cr_assert_eq(infer_decode(c, &t[12 + i], 1, 0, &err), INFER_OK, "%s", err.msg);
            memcpy(ref + (size_t)i * nv, infer_seq_logits(c, 0), sizeof(float) * nv);
        }
        cr_assert_eq(infer_seq_state_load(d, 0, buf, n, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_state_load_file(c, 1, path, &err), INFER_OK, "%s", err.msg);
        for (i = 0; i < 8; i++) {
            infer_batch b;
            int one = 1;
            cr_assert_eq(infer_decode(d, &t[12 + i], 1, 0, &err), INFER_OK, "%s", err.msg);
            cr_assert_eq(memcmp(ref + (size_t)i * nv, infer_seq_logits(d, 0), sizeof(float) * nv), 0,
                         "%s: step %d after loading differs", MODELS[k], i);
            memset(&b, 0, sizeof b);
            b.n = 1, b.tokens = &t[12 + i], b.seq = &one;
            cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
            cr_assert_eq(memcmp(ref + (size_t)i * nv, infer_seq_logits(c, 1), sizeof(float) * nv), 0,
                         "%s: step %d in sequence 1 differs", MODELS[k], i);
        }
        remove(path);
        free(buf);
        free(ref);
        infer_context_free(c);
        infer_context_free(d);
        infer_model_free(m);
    }
}

/* A copied sequence and its source, fed different tokens, each give what a
   fresh sequence fed the whole run alone gives. */
Test(recurrent, copy_then_diverge) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), s, i;
        infer_context *c = ctx(m, 2, INFER_FULL_POLICY_STOP);
        infer_token a[24], b2[24];
        static const int calls[] = {10, 1, 1, 1, 1, 1, 1, 0};
        float *ref = (float *)malloc(sizeof(float) * nv);
        infer_error err;
        tokens(a, 24, 200 + k, nv);
        memcpy(b2, a, sizeof a);
        tokens(b2 + 10, 14, 300 + k, nv);
        cr_assert_eq(infer_decode(c, a, 10, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_copy(c, 0, 1, &err), INFER_OK, "%s", err.msg);
        for (s = 0; s < 2; s++) {
            const infer_token *t = s ? b2 : a;
            infer_batch b;
            memset(&b, 0, sizeof b);
            for (i = 10; i < 16; i++) {
                b.n = 1, b.tokens = &t[i], b.seq = &s;
                cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
            }
            alone_calls(m, t, calls, ref);
            cr_assert_eq(memcmp(ref, infer_seq_logits(c, s), sizeof(float) * nv), 0, "%s: sequence %d after diverging",
                         MODELS[k], s);
        }
        free(ref);
        infer_context_free(c);
        infer_model_free(m);
    }
}

/* Truncation goes back to the checkpoint (where the last decode call began)
   and decodes again; before it nothing is kept; the middle cannot be
   removed, and a full context that would shift says why. */
Test(recurrent, truncation_by_checkpoint_and_refusals) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), kept = -1;
        infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP), *sh = ctx(m, 1, INFER_FULL_POLICY_SHIFT);
        infer_token t[160];
        static const int calls[] = {10, 2, 1, 0};
        float *ref = (float *)malloc(sizeof(float) * nv);
        infer_error err;
        infer_status st;
        tokens(t, 160, 400 + k, nv);
        cr_assert_eq(infer_decode(c, t, 10, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(c, t + 10, 6, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_truncate(c, 0, 12, &kept, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(kept, 12, "%s: kept %d of 12", MODELS[k], kept);
        cr_assert_eq(infer_decode(c, t + 12, 1, 0, &err), INFER_OK, "%s", err.msg);
        alone_calls(m, t, calls, ref); /* the checkpoint at 10, tokens 10..11 again, then 12 */
        cr_assert_eq(memcmp(ref, infer_context_logits(c, -1), sizeof(float) * nv), 0, "%s: after the truncation",
                     MODELS[k]);
        /* to the checkpoint itself (the last call began at 12): nothing to
           decode again, the cache cut there, its last logits gone */
        cr_assert_eq(infer_decode(c, t + 13, 3, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_truncate(c, 0, 13, &kept, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(kept, 13, "%s: kept %d of 13", MODELS[k], kept);
        cr_assert_eq(infer_seq_n_past(c, 0), 13, "%s: %d positions after cutting to 13", MODELS[k],
                     infer_seq_n_past(c, 0));
        cr_assert_null(infer_seq_logits(c, 0), "%s: the logits of position 15 outlived it", MODELS[k]);
        cr_assert_eq(infer_decode(c, t + 13, 1, 0, &err), INFER_OK, "%s", err.msg);
        alone_calls(m, t, (const int[]){10, 2, 1, 1, 0}, ref);
        cr_assert_eq(memcmp(ref, infer_context_logits(c, -1), sizeof(float) * nv), 0,
                     "%s: after cutting at the checkpoint", MODELS[k]);
        cr_assert_eq(infer_seq_truncate(c, 0, 13, &kept, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_seq_n_past(c, 0), 13);
        /* the middle */
        st = infer_seq_remove(c, 0, 2, 5, &err);
        cr_assert_eq(st, INFER_ERR_UNSUPPORTED);
        cr_assert(strstr(err.msg, "recurrent"), "%s", err.msg);
        cr_assert_eq(infer_seq_n_past(c, 0), 13);
        /* before the checkpoint (the last call began at 13): nothing kept */
        cr_assert_eq(infer_seq_truncate(c, 0, 5, &kept, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(kept, 0);
        cr_assert_eq(infer_seq_n_past(c, 0), 0);
        cr_assert_eq(infer_decode(c, t, 13, 0, &err), INFER_OK, "%s", err.msg);
        alone(m, t, 13, ref);
        cr_assert_eq(memcmp(ref, infer_context_logits(c, -1), sizeof(float) * nv), 0, "%s: after starting again",
                     MODELS[k]);
        /* a shifting context that is full */
        cr_assert_eq(infer_decode(sh, t, 120, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(sh, t + 120, 8, 0, &err), INFER_OK, "%s", err.msg);
        memcpy(ref, infer_seq_logits(sh, 0), sizeof(float) * nv);
        st = infer_decode(sh, t + 128, 1, 0, &err);
        cr_assert_eq(st, INFER_ERR_CONTEXT_FULL, "%s: %s", MODELS[k], err.msg);
        cr_assert(strstr(err.msg, "recurrent"), "%s", err.msg);
        cr_assert(strstr(err.msg, "shift"), "%s", err.msg);
        cr_assert_eq(infer_seq_n_past(sh, 0), 128);
        /* and no wrong state: the logits, and a truncation by the
           checkpoint (at 120) then the next token, as never refused */
        cr_assert_eq(memcmp(ref, infer_seq_logits(sh, 0), sizeof(float) * nv), 0, "%s: the refusal moved the logits",
                     MODELS[k]);
        cr_assert_eq(infer_seq_truncate(sh, 0, 127, &kept, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(kept, 127);
        cr_assert_eq(infer_decode(sh, t + 130, 1, 0, &err), INFER_OK, "%s", err.msg);
        {
            infer_token u[128];
            memcpy(u, t, sizeof(infer_token) * 127);
            u[127] = t[130];
            alone_calls(m, u, (const int[]){120, 7, 1, 0}, ref);
        }
        cr_assert_eq(memcmp(ref, infer_seq_logits(sh, 0), sizeof(float) * nv), 0, "%s: the state after the refusal",
                     MODELS[k]);
        free(ref);
        infer_context_free(sh);
        infer_context_free(c);
        infer_model_free(m);
    }
}

static int abort_after(void *user) {
    int *left = (int *)user;
    return --*left < 0;
}

/* A pass cancelled between layers leaves the state as it was: the same
   tokens fed again give what they give in a context never cancelled. */
Test(recurrent, cancel_leaves_the_state) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), left = 3;
        infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP), *fresh = ctx(m, 1, INFER_FULL_POLICY_STOP);
        infer_token t[24];
        infer_error err;
        tokens(t, 24, 500 + k, nv);
        cr_assert_eq(infer_decode(c, t, 8, 0, &err), INFER_OK, "%s", err.msg);
        infer_context_set_abort(c, abort_after, &left);
        cr_assert_eq(infer_decode(c, t + 8, 8, 0, &err), INFER_ERR_CANCELLED);
        cr_assert_eq(infer_seq_n_past(c, 0), 8);
        infer_context_set_abort(c, NULL, NULL);
        cr_assert_eq(infer_decode(c, t + 8, 8, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(fresh, t, 8, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(fresh, t + 8, 8, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(memcmp(infer_context_logits(fresh, -1), infer_context_logits(c, -1), sizeof(float) * nv), 0,
                     "%s: the cancelled pass moved the state", MODELS[k]);
        infer_context_free(fresh);
        infer_context_free(c);
        infer_model_free(m);
    }
}

static int argmax(const float *x, int n) {
    int best = 0, j;
    for (j = 1; j < n; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

/* A prompt that repeats itself: a run of 6 tokens, four times. */
static int repetitive(infer_token *t, int seed, int nv) {
    int i;
    tokens(t, 6, seed, nv);
    for (i = 6; i < 24; i++) t[i] = t[i - 6];
    return 24;
}

/* A logit bias of +100 on a few tokens (n_bias of them, 0: none): greedy
   output then keeps to them, repeating itself, which lookup drafts from. */
#define BIAS 100.0f
static const float bias4[4] = {BIAS, BIAS, BIAS, BIAS};

/* Greedy by hand, one token a call: the prompt (as the request fed it) in
   one call, then each argmax (of the logits with the bias on bias_ids)
   fed alone, up to n tokens or an end of generation. Returns the tokens
   written. */
static int greedy_by_hand(infer_model *m, const infer_token *prompt, int np, int n, const infer_token *bias_ids,
                          int n_bias, infer_token *out) {
    infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP);
    int nv = infer_model_n_vocab(m), k = 0, i;
    float *l = (float *)malloc(sizeof(float) * nv);
    infer_error err;
    cr_assert(l);
    cr_assert_eq(infer_decode(c, prompt, np, 0, &err), INFER_OK, "%s", err.msg);
    while (k < n) {
        infer_token t;
        memcpy(l, infer_context_logits(c, -1), sizeof(float) * nv);
        for (i = 0; i < n_bias; i++) l[bias_ids[i]] += BIAS;
        t = argmax(l, nv);
        out[k++] = t;
        if (infer_model_is_eog(m, t) || k == n) break;
        cr_assert_eq(infer_decode(c, &t, 1, 0, &err), INFER_OK, "%s", err.msg);
    }
    free(l);
    infer_context_free(c);
    return k;
}

typedef struct reply {
    infer_token toks[64], prompt[64], cache[160];
    int n, np, n_cache;
    infer_metrics mt;
} reply;

/* A greedy request of n_predict tokens after prompt_tokens p on sequence 0,
   with `lookup` drafts or a draft context, the bias on p's first n_bias
   tokens, stepped with budget_ms. */
static void run_request(infer_model *m, const infer_token *p, int np, int n_predict, int lookup, infer_context *draft,
                        int n_bias, double budget_ms, reply *out) {
    infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP);
    infer_request_params rp = infer_request_default_params();
    infer_request *r;
    infer_error err;
    const infer_token *t;
    int steps = 0;
    rp.prompt_tokens = p, rp.n_prompt_tokens = np, rp.n_predict = n_predict;
    rp.sampling.temperature = 0;
    rp.lookup = lookup;
    rp.draft = draft, rp.draft_n = draft ? 4 : 0;
    rp.bias_ids = p, rp.bias = bias4, rp.n_bias = n_bias;
    r = infer_request_start(c, &rp, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, budget_ms) > 0) cr_assert_lt(++steps, 10000);
    cr_assert(infer_request_done(r));
    cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_request_tokens(r, out->toks, 64, &out->n, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_request_prompt_tokens(r, out->prompt, 64, &out->np, &err), INFER_OK, "%s", err.msg);
    cr_assert(out->n <= 64 && out->np <= 64);
    out->mt = infer_request_metrics(r);
    t = infer_seq_tokens(c, 0, &out->n_cache);
    cr_assert(out->n_cache <= 160);
    memcpy(out->cache, t, sizeof(infer_token) * (size_t)out->n_cache);
    infer_request_free(r);
    infer_context_free(c);
}

static void same_reply(const reply *a, const reply *b, const char *model, const char *what) {
    int i;
    cr_assert_eq(a->n, b->n, "%s, %s: %d tokens against %d", model, what, b->n, a->n);
    for (i = 0; i < a->n; i++) cr_assert_eq(a->toks[i], b->toks[i], "%s, %s: token %d differs", model, what, i);
    cr_assert_eq(a->n_cache, b->n_cache, "%s, %s: the cache holds %d positions against %d", model, what, b->n_cache,
                 a->n_cache);
    for (i = 0; i < a->n_cache; i++)
        cr_assert_eq(a->cache[i], b->cache[i], "%s, %s: cached token %d differs", model, what, i);
}

/* Speculation leaves greedy output as it is: 32 tokens with lookup drafts
   (on a prompt that repeats itself, the output biased to its four tokens
   so that it repeats itself too: drafts are made, and both accepted and
   rejected, a rejection being a truncation by the checkpoint) and, without
   the bias (which the draft model does not draft with), with a draft
   model (the same file: its drafts are accepted), each as the greedy
   tokens fed one a call by hand, the caches as without drafts. */
Test(recurrent, speculation_keeps_greedy_output) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]), *dm = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), np, i, n, j;
        infer_context *dc = ctx(dm, 1, INFER_FULL_POLICY_STOP);
        infer_token p[24], want[64];
        reply *r = (reply *)calloc(4, sizeof *r);
        cr_assert(r);
        np = repetitive(p, 600 + k, nv);
        run_request(m, p, np, 32, 0, NULL, 4, 0, &r[0]);
        run_request(m, p, np, 32, 6, NULL, 4, 0, &r[1]);
        run_request(m, p, np, 32, 0, NULL, 0, 0, &r[2]);
        run_request(m, p, np, 32, 0, dc, 0, 0, &r[3]);
        for (j = 0; j < 2; j++) {
            const reply *a = &r[2 * j];
            n = greedy_by_hand(m, a->prompt, a->np, 32, p, j ? 0 : 4, want);
            cr_assert_eq(a->n, n, "%s: %d tokens requested, %d by hand", MODELS[k], a->n, n);
            for (i = 0; i < n; i++) cr_assert_eq(a->toks[i], want[i], "%s: greedy token %d differs", MODELS[k], i);
            cr_assert_eq(a->mt.n_draft_tokens, 0);
        }
        same_reply(&r[0], &r[1], MODELS[k], "lookup");
        same_reply(&r[2], &r[3], MODELS[k], "a draft model");
        cr_assert_gt(r[1].mt.n_draft_accepted, 0, "%s: no lookup draft accepted (%d drafted)", MODELS[k],
                     r[1].mt.n_draft_tokens);
        cr_assert_lt(r[1].mt.n_draft_accepted, r[1].mt.n_draft_tokens, "%s: no lookup draft rejected", MODELS[k]);
        cr_assert_gt(r[3].mt.n_draft_accepted, 0, "%s: the draft model's drafts were not accepted (%d drafted)",
                     MODELS[k], r[3].mt.n_draft_tokens);
        free(r);
        infer_context_free(dc);
        infer_model_free(dm);
        infer_model_free(m);
    }
}

/* A request stepped with frame budgets (small ones: the prompt read in
   chunks, several calls) gives the greedy tokens of a plain decode loop. */
Test(recurrent, frame_budget_steps_match_plain_greedy) {
    static const double budgets[] = {0.01, 0.5, 0};
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), b, i, n = 0;
        infer_token p[40], want[64];
        reply *r = (reply *)calloc(2, sizeof *r);
        cr_assert(r);
        tokens(p, 40, 700 + k, nv);
        for (b = 0; b < 3; b++) {
            run_request(m, p, 40, 24, 0, NULL, 0, budgets[b], r);
            if (!b) { /* the same prompt each time: greedy by hand once (a third of the test's time emulated) */
                n = greedy_by_hand(m, r->prompt, r->np, 24, NULL, 0, want);
                r[1] = r[0];
            }
            cr_assert(r->np == r[1].np && !memcmp(r->prompt, r[1].prompt, sizeof(infer_token) * (size_t)r->np),
                      "%s, budget %g ms: another prompt", MODELS[k], budgets[b]);
            cr_assert_eq(r->n, n, "%s, budget %g ms: %d tokens stepped, %d by hand", MODELS[k], budgets[b], r->n, n);
            for (i = 0; i < n; i++)
                cr_assert_eq(r->toks[i], want[i], "%s, budget %g ms: token %d differs", MODELS[k], budgets[b], i);
        }
        free(r);
        infer_model_free(m);
    }
}

/* Embeddings: unit length, finite, the same in a fresh context as in a
   sequence that held other tokens (infer_embed clears the state before,
   not only the cache) and leaving the state clear after; a sequence beside
   it goes on as if nothing ran. */
Test(recurrent, embeddings_clear_the_state) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), dim = infer_model_n_embd(m), i, one = 1;
        infer_context *c = ctx(m, 2, INFER_FULL_POLICY_STOP), *fresh = ctx(m, 1, INFER_FULL_POLICY_STOP);
        float *e1 = (float *)malloc(sizeof(float) * dim), *e2 = (float *)malloc(sizeof(float) * dim);
        float *ref = (float *)malloc(sizeof(float) * nv);
        infer_token t[24], u[24];
        infer_batch b;
        infer_error err;
        double norm = 0, dot = 0;
        cr_assert(e1 && e2 && ref);
        tokens(t, 24, 800 + k, nv);
        tokens(u, 24, 900 + k, nv);
        cr_assert_eq(infer_embed_tokens(fresh, 0, t, 9, INFER_POOLING_MEAN, 1, e1, &err), INFER_OK, "%s", err.msg);
        for (i = 0; i < dim; i++) {
            cr_assert(isfinite(e1[i]), "%s: embedding %d is %g", MODELS[k], i, e1[i]);
            norm += (double)e1[i] * e1[i];
        }
        cr_assert_float_eq(norm, 1.0, 1e-5, "%s: |e|^2 = %g", MODELS[k], norm);
        /* sequence 0 holds other tokens, sequence 1 a conversation of its own */
        cr_assert_eq(infer_decode(c, u, 12, 0, &err), INFER_OK, "%s", err.msg);
        memset(&b, 0, sizeof b);
        b.n = 8, b.tokens = u + 12, b.seq = (int[8]){1, 1, 1, 1, 1, 1, 1, 1};
        cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_embed_tokens(c, 0, t, 9, INFER_POOLING_MEAN, 1, e2, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(memcmp(e1, e2, sizeof(float) * dim), 0, "%s: the embedding read the state it found", MODELS[k]);
        cr_assert_eq(infer_seq_n_past(c, 0), 0);
        /* and left none behind: sequence 0 fed afresh is a fresh sequence */
        cr_assert_eq(infer_decode(c, u, 12, 0, &err), INFER_OK, "%s", err.msg);
        alone(m, u, 12, ref);
        cr_assert_eq(memcmp(ref, infer_seq_logits(c, 0), sizeof(float) * nv), 0, "%s: a state left behind", MODELS[k]);
        /* sequence 1 goes on as it would have */
        b.n = 1, b.tokens = u + 20, b.seq = &one;
        cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
        alone_calls(m, u + 12, (const int[]){8, 1, 0}, ref);
        cr_assert_eq(memcmp(ref, infer_seq_logits(c, 1), sizeof(float) * nv), 0, "%s: sequence 1 was disturbed",
                     MODELS[k]);
        /* another text, another embedding */
        cr_assert_eq(infer_embed_tokens(c, 0, u, 9, INFER_POOLING_MEAN, 1, e2, &err), INFER_OK, "%s", err.msg);
        for (i = 0; i < dim; i++) dot += (double)e1[i] * e2[i];
        cr_assert_lt(dot, 0.9999, "%s: two texts embed alike", MODELS[k]);
        free(e1), free(e2), free(ref);
        infer_context_free(fresh);
        infer_context_free(c);
        infer_model_free(m);
    }
}

/* A grammar-constrained reply: it ends where the grammar does, with text
   the grammar allows (three lowercase letters, a digit, "!"). */
Test(recurrent, grammar_constrained_reply) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), steps = 0;
        infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP);
        infer_request_params rp = infer_request_default_params();
        infer_token p[12];
        infer_request *r;
        infer_error err;
        char text[64];
        size_t n;
        tokens(p, 12, 1000 + k, nv);
        rp.prompt_tokens = p, rp.n_prompt_tokens = 12, rp.n_predict = 16;
        rp.grammar = "root ::= [a-z] [a-z] [a-z] [0-9] \"!\"";
        r = infer_request_start(c, &rp, &err);
        cr_assert(r, "%s", err.msg);
        while (infer_context_step(c, 0) > 0) cr_assert_lt(++steps, 1000);
        cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s: %s", MODELS[k], err.msg);
        n = infer_request_text(r, 0, text, sizeof text);
        cr_assert_eq(n, 5, "%s: \"%s\"", MODELS[k], text);
        cr_assert(text[0] >= 'a' && text[0] <= 'z' && text[1] >= 'a' && text[1] <= 'z' && text[2] >= 'a' &&
                      text[2] <= 'z' && text[3] >= '0' && text[3] <= '9' && text[4] == '!',
                  "%s: \"%s\" is not what the grammar allows", MODELS[k], text);
        infer_request_free(r);
        infer_context_free(c);
        infer_model_free(m);
    }
}

static int cancel_after_chunks(float share, void *user) {
    int *left = (int *)user;
    (void)share;
    return --*left < 0;
}

/* A request whose prompt is cancelled after some of its chunks (the frame
   budget's small passes) is taken back out of its sequence: the
   conversation before it goes on as if the request never ran. */
Test(recurrent, cancelled_prompt_leaves_the_conversation) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), left = 2, steps = 0, n_before;
        infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP);
        infer_request_params rp = infer_request_default_params();
        infer_token t[80];
        float *ref = (float *)malloc(sizeof(float) * nv);
        infer_request *r;
        infer_error err;
        cr_assert(ref);
        tokens(t, 80, 1100 + k, nv);
        cr_assert_eq(infer_decode(c, t, 10, 0, &err), INFER_OK, "%s", err.msg);
        n_before = infer_seq_n_past(c, 0);
        rp.prompt_tokens = t + 10, rp.n_prompt_tokens = 60, rp.n_predict = 4;
        rp.sampling.temperature = 0;
        rp.progress = cancel_after_chunks, rp.progress_user = &left;
        r = infer_request_start(c, &rp, &err);
        cr_assert(r, "%s", err.msg);
        while (infer_context_step(c, 0.01) > 0) cr_assert_lt(++steps, 1000);
        cr_assert_eq(infer_request_status(r, &err), INFER_ERR_CANCELLED, "%s: %s", MODELS[k], err.msg);
        cr_assert_gt(steps, 1, "%s: the prompt was read in one pass", MODELS[k]);
        infer_request_free(r);
        cr_assert_eq(infer_seq_n_past(c, 0), n_before, "%s: %d positions after the cancelled prompt, %d before",
                     MODELS[k], infer_seq_n_past(c, 0), n_before);
        cr_assert_eq(infer_decode(c, t + 70, 1, 0, &err), INFER_OK, "%s", err.msg);
        memcpy(ref, t, sizeof(infer_token) * 10);
        {
            infer_token u[11];
            memcpy(u, t, sizeof(infer_token) * 10);
            u[10] = t[70];
            alone_calls(m, u, (const int[]){10, 1, 0}, ref);
        }
        cr_assert_eq(memcmp(ref, infer_context_logits(c, -1), sizeof(float) * nv), 0,
                     "%s: the conversation changed under the cancelled prompt", MODELS[k]);
        free(ref);
        infer_context_free(c);
        infer_model_free(m);
    }
}

/* A greedy request of n_predict tokens after p on sequence 0 of c, with
   prompt reuse as asked: its tokens into out, how many cached returned. */
static int request_on(infer_context *c, const infer_token *p, int np, int n_predict, int cache_prompt,
                      infer_token *out, int *n_out) {
    infer_request_params rp = infer_request_default_params();
    infer_request *r;
    infer_error err;
    int steps = 0, cached;
    rp.prompt_tokens = p, rp.n_prompt_tokens = np, rp.n_predict = n_predict;
    rp.sampling.temperature = 0;
    rp.cache_prompt = cache_prompt, rp.n_past = 0;
    r = infer_request_start(c, &rp, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 0) > 0) cr_assert_lt(++steps, 10000);
    cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_request_tokens(r, out, 64, n_out, &err), INFER_OK, "%s", err.msg);
    cached = infer_request_cached_tokens(r);
    infer_request_free(r);
    return cached;
}

/* Prompt reuse (cache_prompt) where the cached prefix is a checkpoint: a
   request leaves the state before its prompt's last token as the
   sequence's checkpoint, so the same prompt again finds all of it but
   that token, and a prompt that goes on from the reply (a conversation's
   next turn) finds prompt and reply; a prompt that leaves the first
   before that checkpoint finds nothing (the state cannot go back there).
   Each reply is the one a fresh context gives. */
Test(recurrent, prompt_reuse_by_checkpoint) {
    int k;
    for (k = 0; k < N_MODELS; k++) {
        infer_model *m = load(MODELS[k]);
        int nv = infer_model_n_vocab(m), bos = infer_model_add_bos(m) && infer_model_bos(m) >= 0;
        int na, nb, nf, cached, i;
        infer_context *c = ctx(m, 1, INFER_FULL_POLICY_STOP);
        infer_token p[80], a[64], b[64], f[64];
        tokens(p, 30, 1300 + k, nv);
        cached = request_on(c, p, 30, 8, 1, a, &na);
        cr_assert_eq(cached, 0, "%s: a fresh sequence found %d tokens cached", MODELS[k], cached);
        cr_assert(na > 0 && na <= 8);
        /* the same prompt again: all but its last token */
        cached = request_on(c, p, 30, 8, 1, b, &nb);
        cr_assert_eq(cached, bos + 30 - 1, "%s: the same prompt again found %d of %d tokens cached", MODELS[k], cached,
                     bos + 30);
        cr_assert(nb == na && !memcmp(a, b, sizeof(infer_token) * (size_t)na), "%s: the reply changed", MODELS[k]);
        /* the next turn: prompt, reply and more */
        memcpy(p + 30, a, sizeof(infer_token) * (size_t)na);
        tokens(p + 30 + na, 10, 1400 + k, nv);
        cached = request_on(c, p, 40 + na, 8, 1, b, &nb);
        cr_assert_eq(cached, bos + 30 + na, "%s: the next turn found %d tokens cached, not %d", MODELS[k], cached,
                     bos + 30 + na);
        {
            infer_context *fresh = ctx(m, 1, INFER_FULL_POLICY_STOP);
            cr_assert_eq(request_on(fresh, p, 40 + na, 8, 0, f, &nf), 0);
            cr_assert(nb == nf, "%s", MODELS[k]);
            for (i = 0; i < nf; i++)
                cr_assert_eq(b[i], f[i], "%s: the next turn's token %d differs from a fresh context's", MODELS[k], i);
            infer_context_free(fresh);
        }
        /* a prompt that leaves the last before its checkpoint: nothing kept */
        p[20] = p[20] == 3 ? 4 : 3;
        cached = request_on(c, p, 40 + na, 8, 1, b, &nb);
        cr_assert_eq(cached, 0, "%s: %d tokens found cached before the checkpoint", MODELS[k], cached);
        {
            infer_context *fresh = ctx(m, 1, INFER_FULL_POLICY_STOP);
            request_on(fresh, p, 40 + na, 8, 0, f, &nf);
            cr_assert(nb == nf && !memcmp(b, f, sizeof(infer_token) * (size_t)nf), "%s: the reply differs", MODELS[k]);
            infer_context_free(fresh);
        }
        infer_context_free(c);
        infer_model_free(m);
    }
}
