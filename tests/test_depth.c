/* test_depth.c - attention deep in a context, on real models: 4,096 tokens
   of docs/architecture.md decoded (text that stays long: it maps every file
   of src/; about 6,600 tokens), then the next 8 tokens from that same cache
   (a saved state loaded into each context) by
   - the fast path on 2 workers, one token a pass (its keys split in runs
     among the workers: flash-decoding);
   - the fast path on 1 worker, one token a pass;
   - the fast path on 2 workers, the 8 tokens in one pass (a draft's
     verification);
   - the reference mode (match_llama: llama.cpp's order of every sum).
   The fast path's runs are fixed positions, so the first three must give
   the same logits to the bit (what speculative decoding's unchanged
   output rests on), where a model has no sliding window (its window's
   tiles start where each pass's keys do). And the reference mode? Their
   attention agrees to rounding (1e-7 of its values, test_attention), but
   the products quantize activations to 8 bits, and a value that rounding
   moves across a quantization step moves the residual stream by a step's
   worth; 4,096 tokens deep, such a flip in one layer was measured to grow
   to 2-2.6% of the logits' range at the last (SmolLM2; prompts chunked
   differently do the same, 1.5-2%). So the fast path and the reference
   mode must agree to within 5% of the range in every step, and on the
   most probable token in all but one of them, not counting near-ties: a
   step where the two top tokens are closer, in both modes' logits, than
   the largest difference of that step (which text is read decides how
   many such steps there are: Gemma 3 had two on one version of the
   document). On SmolLM2 (F16 cache) and
   Gemma 3 270M (sliding windows, its own reference mode), from models/
   (python3 scripts/fetch_model.py [gemma3]), and ../shared's gpt-oss
   (attention sinks); each skips, saying so, where its model is absent. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "testutil.h"

#define DEPTH 4096
#define STEPS 8

/* The worst |a - b| over the logits, as a share of a's range. */
static int argmax(const float *a, int n) {
    int i, best = 0;
    for (i = 1; i < n; i++)
        if (a[i] > a[best]) best = i;
    return best;
}

static infer_context *context(infer_model *m, int threads, int match_llama) {
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_context *c;
    cp.n_ctx = DEPTH + STEPS + 8;
    cp.n_threads = threads;
    cp.match_llama = match_llama;
    c = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c, "%s", err.msg);
    return c;
}

/* file: under models/, or, shared, under ../shared */
static void check_depth(const char *file, int exact_batch, int shared) {
    char path[1024];
    infer_error err;
    infer_model *m;
    infer_context *split, *one, *batch, *ref;
    infer_token *toks;
    char *text;
    size_t len, state_size;
    void *state;
    int n, nv, i;
    double worst_split = 0, worst_batch = 0, worst_ref = 0;
    int same_batch = 0, same_ref = 0, near_ties = 0;
    FILE *f;
    if (shared) {
        if (!tu_have_shared()) cr_skip_test("../shared is absent: %s is not checked", file);
        tu_shared_path(path, sizeof path, file);
    } else {
        snprintf(path, sizeof path, "%s/models/%s", INFER_SOURCE_DIR, file);
    }
    if (!(f = fopen(path, "rb"))) cr_skip_test("%s is absent (python3 scripts/fetch_model.py fetches it)", path);
    fclose(f);
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    snprintf(path, sizeof path, "%s/docs/architecture.md", INFER_SOURCE_DIR);
    text = tu_read_file(path, &len);
    cr_assert_not_null(text);
    if (infer_tokenize(m, text, len, NULL, 0, infer_model_add_bos(m), 0, &n, NULL) != INFER_OK) n = -1;
    cr_assert_gt(n, DEPTH + STEPS, "docs/architecture.md is %d tokens, fewer than %d", n, DEPTH + STEPS);
    toks = (infer_token *)malloc(sizeof *toks * (size_t)n);
    infer_tokenize(m, text, len, toks, n, infer_model_add_bos(m), 0, NULL, NULL);
    nv = infer_model_n_vocab(m);

    split = context(m, 2, -1);
    cr_assert_eq(infer_decode(split, toks, DEPTH, 0, &err), INFER_OK, "%s", err.msg);
    state_size = infer_seq_state_size(split, 0);
    state = malloc(state_size);
    cr_assert_eq(infer_seq_state_save(split, 0, state, state_size), state_size);
    one = context(m, 1, -1);
    batch = context(m, 2, -1);
    ref = context(m, 2, 1);
    cr_assert_eq(infer_seq_state_load(one, 0, state, state_size, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_state_load(batch, 0, state, state_size, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_state_load(ref, 0, state, state_size, &err), INFER_OK, "%s", err.msg);
    cr_assert(infer_context_match_llama(ref) && !infer_context_match_llama(split));
    cr_assert_eq(infer_decode(batch, toks + DEPTH, STEPS, 1, &err), INFER_OK, "%s", err.msg);

    for (i = 0; i < STEPS; i++) {
        const float *a, *b, *c, *d;
        double w;
        cr_assert_eq(infer_decode(split, toks + DEPTH + i, 1, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(one, toks + DEPTH + i, 1, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(ref, toks + DEPTH + i, 1, 0, &err), INFER_OK, "%s", err.msg);
        a = infer_context_logits(split, -1), b = infer_context_logits(one, -1), c = infer_context_logits(ref, -1);
        d = infer_context_logits(batch, i);
        w = tu_logit_diff(b, a, nv);
        if (w > worst_split) worst_split = w;
        w = tu_logit_diff(d, a, nv);
        if (w > worst_batch) worst_batch = w;
        w = tu_logit_diff(c, a, nv);
        if (w > worst_ref) worst_ref = w;
        same_batch += argmax(a, nv) == argmax(d, nv);
        if (argmax(a, nv) == argmax(c, nv))
            same_ref++;
        else {
            int ta = argmax(a, nv), tc = argmax(c, nv), k;
            double most = 0;
            for (k = 0; k < nv; k++) most = fmax(most, fabs((double)a[k] - c[k]));
            if (a[ta] - a[tc] <= most && c[tc] - c[ta] <= most) near_ties++;
        }
    }
    cr_log_info("%s at depth %d, %d steps: 2 workers vs 1 %.4f%% of the range; one pass vs a token a pass %.4f%%, "
                "the same top token %d times; fast vs reference mode %.4f%%, %d times (%d near-ties)",
                file, DEPTH, STEPS, 100 * worst_split, 100 * worst_batch, same_batch, 100 * worst_ref, same_ref,
                near_ties);
    cr_expect_eq(worst_split, 0.0, "%s: 2 workers and 1 differ by %.6f%% of the range", file, 100 * worst_split);
    if (exact_batch)
        cr_expect_eq(worst_batch, 0.0, "%s: one pass of %d tokens and a token a pass differ by %.6f%% of the range", file,
                     STEPS, 100 * worst_batch);
    cr_expect_leq(worst_batch, 0.05, "%s: one pass and a token a pass differ by %.4f%% of the range", file,
                  100 * worst_batch);
    cr_expect_geq(same_batch, STEPS - 1, "%s: one pass and a token a pass agree on the top token %d times of %d",
                  file, same_batch, STEPS);
    cr_expect_leq(worst_ref, 0.05, "%s: the fast path and the reference mode differ by %.4f%% of the range", file,
                  100 * worst_ref);
    cr_expect_geq(same_ref + near_ties, STEPS - 1,
                  "%s: the fast path and the reference mode agree on the top token %d times of %d (%d near-ties)", file,
                  same_ref, STEPS, near_ties);
    infer_context_free(split);
    infer_context_free(batch);
    infer_context_free(one);
    infer_context_free(ref);
    infer_model_free(m);
    free(state);
    free(toks);
    free(text);
}

Test(depth, smollm2_fast_split_and_reference_agree, .timeout = 600) {
    check_depth("SmolLM2-135M-Instruct.Q4_1.gguf", 1, 0);
}

Test(depth, gemma3_fast_split_and_reference_agree, .timeout = 600) {
    check_depth("gemma-3-270m-q4_k_m.gguf", 0, 0);
}

/* gpt-oss: attention sinks in the split runs' merge, the one-pass tiles and
   the reference mode's order, deep enough (past its sliding window) that
   the sink weighs against thousands of keys; its even layers slide */
Test(depth, gptoss_sinks_fast_split_and_reference_agree, .timeout = 600) {
    check_depth("arch/synth-gptoss-mxfp4.gguf", 0, 1);
}

/* A pass that crosses the end of the split passes' first run of keys (512
   positions in a context of 4,096): each token whose keys all lie in the
   first run is split there but must score them as it does alone, unsplit,
   so that a draft verified across that end keeps greedy replies. On a
   real model (64-value heads): q.K's kernels sum a score in different
   orders, which tinystories' 16-value heads hide. */
Test(depth, smollm2_pass_across_the_first_run_matches_alone, .timeout = 300) {
    enum { N_CTX = 4096, AT = 506, N = 8 };
    char path[1024];
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_model *m;
    infer_context *one, *pass;
    infer_token toks[AT + N];
    float *alone;
    int i, nv;
    FILE *f;
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", INFER_SOURCE_DIR);
    if (!(f = fopen(path, "rb"))) cr_skip_test("%s is absent (python3 scripts/fetch_model.py fetches it)", path);
    fclose(f);
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    for (i = 0; i < AT + N; i++) toks[i] = (infer_token)(1 + (i * 37 + i / 5) % (nv - 1));
    cp.n_ctx = N_CTX;
    cp.n_threads = 2;
    one = infer_context_new(m, &cp, &err);
    cr_assert_not_null(one, "%s", err.msg);
    pass = infer_context_new(m, &cp, &err);
    cr_assert_not_null(pass, "%s", err.msg);
    cr_assert_eq(infer_decode(one, toks, AT, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(pass, toks, AT, 0, &err), INFER_OK, "%s", err.msg);
    alone = (float *)malloc(sizeof(float) * (size_t)nv * N);
    for (i = 0; i < N; i++) {
        cr_assert_eq(infer_decode(one, toks + AT + i, 1, 0, &err), INFER_OK, "%s", err.msg);
        memcpy(alone + (size_t)i * nv, infer_context_logits(one, -1), sizeof(float) * (size_t)nv);
    }
    cr_assert_eq(infer_decode(pass, toks + AT, N, 1, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < N; i++)
        cr_expect_eq(memcmp(alone + (size_t)i * nv, infer_context_logits(pass, i), sizeof(float) * (size_t)nv), 0,
                     "position %d: alone and in a pass of %d differ by %.4f%% of the range", AT + i, N,
                     100 * tu_logit_diff(alone + (size_t)i * nv, infer_context_logits(pass, i), nv));
    free(alone);
    infer_context_free(pass);
    infer_context_free(one);
    infer_model_free(m);
}
