/* Hybrid models (recurrent layers beside attention: lfm2, qwen35,
   granitehybrid): four sequences in one batch against each alone, a saved
   state continuing bit for bit, a copied sequence diverging, truncation by
   the checkpoint and its refusals, and a cancelled pass leaving the state
   as it was. Each on ../shared's synthetic model of each family. */
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

/* The largest difference of two logit rows over the first's range. */
static double rel_diff(const float *a, const float *b, int n) {
    float lo = a[0], hi = a[0];
    double worst = 0;
    int i;
    for (i = 0; i < n; i++) {
        lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]);
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    }
    return worst / (hi - lo);
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

/* Four sequences of 5, 9, 13 and 17 tokens interleaved in one batch, then
   three steps together: each sequence's logits as it gets them alone. */
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
                alone(m, t[s], len[s] + step, ref);
                d = rel_diff(ref, infer_seq_logits(c, s), nv);
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
        /* the middle */
        st = infer_seq_remove(c, 0, 2, 5, &err);
        cr_assert_eq(st, INFER_ERR_UNSUPPORTED);
        cr_assert(strstr(err.msg, "recurrent"), "%s", err.msg);
        cr_assert_eq(infer_seq_n_past(c, 0), 13);
        /* before the checkpoint (the last call began at 12): nothing kept */
        cr_assert_eq(infer_seq_truncate(c, 0, 5, &kept, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(kept, 0);
        cr_assert_eq(infer_seq_n_past(c, 0), 0);
        cr_assert_eq(infer_decode(c, t, 13, 0, &err), INFER_OK, "%s", err.msg);
        alone(m, t, 13, ref);
        cr_assert_eq(memcmp(ref, infer_context_logits(c, -1), sizeof(float) * nv), 0, "%s: after starting again",
                     MODELS[k]);
        /* a shifting context that is full */
        cr_assert_eq(infer_decode(sh, t, 128, 0, &err), INFER_OK, "%s", err.msg);
        st = infer_decode(sh, t + 128, 1, 0, &err);
        cr_assert_neq(st, INFER_OK);
        cr_assert(strstr(err.msg, "recurrent"), "%s", err.msg);
        cr_assert_eq(infer_seq_n_past(sh, 0), 128);
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
