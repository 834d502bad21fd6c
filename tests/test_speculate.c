/* Speculative decoding (speculate.c, request.c): prompt lookup proposes
   what followed the latest earlier occurrence of the last tokens; the
   acceptance rule for such a deterministic draft leaves the sampler's
   distribution as it is; requests with lookup give the same greedy tokens
   as without it, on SmolLM2 (a paragraph rewritten, where drafts are
   accepted) and on several sequences of one context at once, and the
   cache keeps exactly the tokens a reply without speculation leaves. */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer_private.h"
#include "testutil.h"

#define SPEC_SMOLLM2 INFER_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* ---- the draft proposal, on token arrays ---- */

static int spec_lookup(const infer_token *h, int n, int max, infer_token *out) {
    return infer__spec_lookup(h, n, 3, max, out);
}

Test(speculate, lookup_proposes_what_followed_the_latest_match) {
    /* ... 1 2 3 [4 5 6] ... 1 2 3 [7 8] ... 1 2 3: the latest match wins */
    infer_token h[] = {1, 2, 3, 4, 5, 6, 9, 1, 2, 3, 7, 8, 9, 9, 1, 2, 3};
    infer_token out[8];
    int n = spec_lookup(h, (int)(sizeof h / sizeof h[0]), 8, out);
    cr_assert_eq(n, 7, "what follows the match runs to the history's end: got %d", n);
    cr_expect(out[0] == 7 && out[1] == 8 && out[2] == 9 && out[3] == 9 && out[4] == 1 && out[5] == 2 && out[6] == 3);
    /* capped at max_draft */
    cr_expect_eq(spec_lookup(h, (int)(sizeof h / sizeof h[0]), 2, out), 2);
    cr_expect(out[0] == 7 && out[1] == 8);
}

Test(speculate, lookup_falls_back_to_shorter_ngrams) {
    /* the last three (5 6 7) never occurred before; the last two (6 7) did */
    infer_token h[] = {6, 7, 20, 21, 4, 6, 7, 30, 5, 6, 7};
    infer_token one[] = {8, 40, 41, 9, 8}; /* only the last token (8) recurs */
    infer_token none[] = {1, 2, 3, 4};
    infer_token out[4];
    int n = spec_lookup(h, (int)(sizeof h / sizeof h[0]), 4, out);
    cr_assert_eq(n, 4);
    cr_expect(out[0] == 30 && out[1] == 5 && out[2] == 6 && out[3] == 7, "the latest (6 7) is followed by 30 5 6 7");
    n = spec_lookup(one, 5, 4, out);
    cr_assert_eq(n, 4);
    cr_expect(out[0] == 40 && out[1] == 41 && out[2] == 9 && out[3] == 8);
    cr_expect_eq(spec_lookup(none, 4, 4, out), 0, "no token recurs: no draft");
    cr_expect_eq(spec_lookup(none, 1, 4, out), 0);
    cr_expect_eq(spec_lookup(none, 0, 4, out), 0);
    cr_expect_eq(spec_lookup(h, (int)(sizeof h / sizeof h[0]), 0, out), 0);
}

Test(speculate, lookup_of_a_repeated_token_overlaps_its_match) {
    /* a run of one token predicts more of it */
    infer_token h[] = {5, 5, 5, 5};
    infer_token out[4];
    int n = spec_lookup(h, 4, 4, out);
    cr_assert_eq(n, 1, "the match at 0..2 is followed by one token");
    cr_expect_eq(out[0], 5);
}

/* ---- the acceptance rule ---- */

/* A point-mass draft x is accepted where the sampler's draw is x, and the
   token drawn otherwise is the replacement: accepted with probability
   p(x), and after a rejection distributed as p without x, renormalised
   (the standard rule for q = the point mass at x). Checked by counting
   draws on fixed logits, within 5 standard deviations. */
Test(speculate, acceptance_rule_keeps_the_distribution) {
    enum { V = 6, N = 40000 };
    float logits[V] = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f}, p[V], sum = 0;
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    int counts[V] = {0}, accepted = 0, i, x = 1;
    sp.temperature = 1, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.seed = 1234;
    s = infer_sampler_new(&sp, V);
    cr_assert(s);
    for (i = 0; i < V; i++) sum += p[i] = expf(logits[i]);
    for (i = 0; i < V; i++) p[i] /= sum;
    for (i = 0; i < N; i++) {
        infer_token t = infer_sampler_sample(s, logits);
        cr_assert(t >= 0 && t < V);
        if (t == x) accepted++;
        else counts[t]++;
    }
    {
        double sd = sqrt(N * p[x] * (1 - p[x]));
        cr_expect(fabs(accepted - N * p[x]) < 5 * sd, "accepted %d of %d, expected %.0f", accepted, N, N * p[x]);
    }
    cr_expect_eq(counts[x], 0);
    for (i = 0; i < V; i++) {
        double q, sd;
        if (i == x) continue;
        q = p[i] / (1 - p[x]); /* the residual distribution */
        sd = sqrt((N - accepted) * q * (1 - q));
        cr_expect(fabs(counts[i] - (N - accepted) * q) < 5 * sd, "token %d: %d of %d rejections, expected %.0f", i,
                  counts[i], N - accepted, (N - accepted) * q);
    }
    infer_sampler_free(s);
}

/* ---- requests with lookup ---- */

typedef struct spec_reply {
    infer_token toks[512];
    int n;
    infer_token seq_toks[4096]; /* what the sequence's cache holds afterwards */
    int n_seq;
    infer_metrics mt;
} spec_reply;

/* Greedy replies to prompts[i] on sequence i of one context, stepped
   together, with drafts of up to `lookup` tokens. */
static void spec_run(infer_model *m, const char *const *prompts, int n_req, int n_predict, int lookup,
                     spec_reply *out) {
    infer_context_params cp = infer_context_default_params();
    infer_request *r[4];
    infer_error err;
    infer_context *c;
    int i;
    cr_assert(n_req <= 4);
    cp.n_ctx = 1024, cp.n_seq = n_req, cp.n_threads = 2;
    c = infer_context_new(m, &cp, &err);
    cr_assert(c, "%s", err.msg);
    for (i = 0; i < n_req; i++) {
        infer_request_params p = infer_request_default_params();
        p.prompt = prompts[i];
        p.seq = i;
        p.n_predict = n_predict;
        p.sampling.temperature = 0;
        p.lookup = lookup;
        r[i] = infer_request_start(c, &p, &err);
        cr_assert(r[i], "%s", err.msg);
    }
    while (infer_context_step(c, 0) > 0) {}
    for (i = 0; i < n_req; i++) {
        const infer_token *t;
        cr_assert_eq(infer_request_status(r[i], &err), INFER_OK, "%s", err.msg);
        out[i].n = infer_request_tokens(r[i], out[i].toks, 512);
        cr_assert(out[i].n <= 512);
        out[i].mt = infer_request_metrics(r[i]);
        t = infer_seq_tokens(c, i, &out[i].n_seq);
        cr_assert(out[i].n_seq <= 4096);
        memcpy(out[i].seq_toks, t, (size_t)out[i].n_seq * sizeof *t);
        infer_request_free(r[i]);
    }
    infer_context_free(c);
}

static void spec_expect_same(const spec_reply *a, const spec_reply *b, const char *what) {
    int i;
    cr_assert_eq(a->n, b->n, "%s: %d tokens without lookup, %d with it", what, a->n, b->n);
    for (i = 0; i < a->n; i++) cr_assert_eq(a->toks[i], b->toks[i], "%s: token %d differs", what, i);
    cr_assert_eq(a->n_seq, b->n_seq, "%s: the cache holds %d positions without lookup, %d with it", what, a->n_seq,
                 b->n_seq);
    for (i = 0; i < a->n_seq; i++) cr_assert_eq(a->seq_toks[i], b->seq_toks[i], "%s: cached token %d differs", what, i);
}

/* The speed-up's case: a paragraph rewritten with small changes, most of
   the reply copied from the prompt. */
static const char *spec_edit_prompt =
    "<|im_start|>user\nRewrite this paragraph with small changes, fixing the spelling:\n\n"
    "The old lighthouse stood at the edge of the cliff for more then two hundred years. Every night the "
    "keeper climbed the narrow stairs, lit the great lamp and watched the ships pass safely through the "
    "dangerous waters. When the storms came, the light never failed, and the sailors in the harbour town "
    "told stories about the keeper who never slept.<|im_end|>\n<|im_start|>assistant\n";

Test(speculate, smollm2_greedy_reply_unchanged_with_drafts_accepted) {
    infer_error err;
    infer_model *m;
    spec_reply *a = (spec_reply *)calloc(2, sizeof *a), *b = a + 1;
    FILE *f = fopen(SPEC_SMOLLM2, "rb");
    if (!f) {
        free(a);
        cr_skip_test("%s is absent (scripts/test.sh fetches it)", SPEC_SMOLLM2);
    }
    fclose(f);
    cr_assert(a);
    m = infer_model_load(SPEC_SMOLLM2, NULL, &err);
    cr_assert(m, "%s", err.msg);
    spec_run(m, &spec_edit_prompt, 1, 60, 0, a);
    spec_run(m, &spec_edit_prompt, 1, 60, 8, b);
    cr_expect_eq(a->mt.n_draft_tokens, 0);
    spec_expect_same(a, b, "SmolLM2");
    cr_expect_gt(b->mt.n_draft_tokens, 0, "nothing was drafted");
    cr_expect_gt(b->mt.n_draft_accepted, 0, "no draft token was accepted (%d drafted)", b->mt.n_draft_tokens);
    cr_expect_leq(b->mt.n_draft_accepted, b->mt.n_draft_tokens);
    infer_model_free(m);
    free(a);
}

/* Several sequences of one context speculate in one pass each, some
   ending early (end of generation) and some drafting: each reply and cache
   as when run alone without drafts. On stories260K, whose stories repeat
   their names and phrases. */
Test(speculate, parallel_sequences_keep_their_replies_and_caches) {
    static const char *const prompts[3] = {"Once upon a time, there was a little girl named Lily. Lily",
                                           "Tom had a red ball. Tom liked the red ball. One day, Tom",
                                           "The cat sat on the mat. The dog sat on the"};
    char path[1024];
    infer_error err;
    infer_model *m;
    spec_reply *a = (spec_reply *)calloc(6, sizeof *a), *b = a + 3;
    int i, drafted = 0, accepted = 0;
    if (!tu_have_shared()) {
        free(a);
        cr_skip_test("../shared is absent: no model to speculate with");
    }
    cr_assert(a);
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    for (i = 0; i < 3; i++) spec_run(m, &prompts[i], 1, 120, 0, &a[i]);
    spec_run(m, prompts, 3, 120, 6, b);
    for (i = 0; i < 3; i++) {
        char what[32];
        snprintf(what, sizeof what, "sequence %d", i);
        spec_expect_same(&a[i], &b[i], what);
        drafted += b[i].mt.n_draft_tokens;
        accepted += b[i].mt.n_draft_accepted;
    }
    cr_expect_gt(drafted, 0, "nothing was drafted");
    cr_expect_gt(accepted, 0, "no draft token was accepted (%d drafted)", drafted);
    infer_model_free(m);
    free(a);
}
