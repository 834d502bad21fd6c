/* Speculative decoding (speculate.c, request.c): prompt lookup proposes
   what followed the latest earlier occurrence of the last tokens; the
   acceptance rule for such a deterministic draft leaves the sampler's
   distribution as it is; requests with lookup give the same greedy tokens
   as without it, on SmolLM2 (a paragraph rewritten, where drafts are
   accepted) and on several sequences of one context at once, and the
   cache keeps exactly the tokens a reply without speculation leaves; so
   does a draft model (bench/make_model.py's pair of one vocabulary). */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer_private.h"
#include "testutil.h"
#include "tests/status_calls.h"

#define SPEC_SMOLLM2 INFER_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* ---- the draft proposal, on token arrays ---- */

static int spec_lookup(const infer_token *h, int n, int max, infer_token *out) {
    return infer__spec_lookup(h, n, 1, 3, max, out);
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
    cr_expect_eq(infer__spec_lookup(one, 5, 2, 3, 4, out), 0, "a match of one token where two are asked for");
    cr_expect_eq(infer__spec_lookup(h, (int)(sizeof h / sizeof h[0]), 2, 3, 4, out), 4, "(6 7) is a match of two");
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
    s = infer_sampler_new(&sp, V, NULL);
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
    char text[4096];
} spec_reply;

/* Greedy replies to prompts[i] on sequence i of one context, stepped
   together, with drafts of up to `lookup` tokens. */
static void spec_run_grammar(infer_model *m, const char *const *prompts, int n_req, int n_predict, int lookup,
                             const char *grammar, const char *stop, spec_reply *out) {
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
        p.grammar = grammar;
        p.stop = &stop;
        p.n_stop = stop ? 1 : 0;
        r[i] = infer_request_start(c, &p, &err);
        cr_assert(r[i], "%s", err.msg);
    }
    while (infer_context_step(c, 0) > 0) {}
    for (i = 0; i < n_req; i++) {
        const infer_token *t;
        cr_assert_eq(infer_request_status(r[i], &err), INFER_OK, "%s", err.msg);
        out[i].n = sc_request_tokens(r[i], out[i].toks, 512);
        cr_assert(out[i].n <= 512);
        out[i].mt = infer_request_metrics(r[i]);
        cr_assert_lt(infer_request_text(r[i], 0, out[i].text, sizeof out[i].text), sizeof out[i].text);
        t = infer_seq_tokens(c, i, &out[i].n_seq);
        cr_assert(out[i].n_seq <= 4096);
        memcpy(out[i].seq_toks, t, (size_t)out[i].n_seq * sizeof *t);
        infer_request_free(r[i]);
    }
    infer_context_free(c);
}

static void spec_run(infer_model *m, const char *const *prompts, int n_req, int n_predict, int lookup,
                     spec_reply *out) {
    spec_run_grammar(m, prompts, n_req, n_predict, lookup, NULL, NULL, out);
}

static void spec_expect_same(const spec_reply *a, const spec_reply *b, const char *what) {
    int i;
    cr_assert_eq(a->n, b->n, "%s: %d tokens without lookup, %d with it", what, a->n, b->n);
    for (i = 0; i < a->n; i++) cr_assert_eq(a->toks[i], b->toks[i], "%s: token %d differs", what, i);
    cr_assert_str_eq(a->text, b->text, "%s: the text differs", what);
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
    int n_predict;
    FILE *f = fopen(SPEC_SMOLLM2, "rb");
    if (!f) {
        free(a);
        cr_skip_test("%s is absent (scripts/test.sh fetches it)", SPEC_SMOLLM2);
    }
    fclose(f);
    cr_assert(a);
    m = infer_model_load(SPEC_SMOLLM2, NULL, &err);
    cr_assert(m, "%s", err.msg);
    /* (the sanitizer build asks for fewer: the reply copies from its start) */
    n_predict = getenv("INFER_TEST_SPEC_TOKENS") ? atoi(getenv("INFER_TEST_SPEC_TOKENS")) : 60;
    cr_assert(n_predict > 0 && n_predict <= 512);
    spec_run(m, &spec_edit_prompt, 1, n_predict, 0, a);
    spec_run(m, &spec_edit_prompt, 1, n_predict, 8, b);
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

/* ---- a draft model ---- */

static void spec_remove_pair(const char *dir) {
    char p[1024];
    snprintf(p, sizeof p, "%s/draft.gguf", dir);
    remove(p);
    snprintf(p, sizeof p, "%s/target.gguf", dir);
    remove(p);
    rmdir(dir);
}

/* Two turns on each of two sequences stepped together (the second turn
   continues the first's cache), greedy, with the draft context dc (NULL:
   none): the tokens of every reply into toks[turn][seq], the sequences'
   caches into cache[seq]. Returns the draft tokens fed. */
static int spec_two_turns(infer_model *m, infer_context *dc, int draft_n, spec_reply toks[2][2], spec_reply cache[2]) {
    static const char *const prompts[2][2] = {{"hello world", "the quick brown fox"}, {" and then", " again and again"}};
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_context *c;
    int turn, i, drafted = 0;
    cp.n_ctx = 512, cp.n_seq = 2, cp.n_threads = 2;
    c = infer_context_new(m, &cp, &err);
    cr_assert(c, "%s", err.msg);
    for (turn = 0; turn < 2; turn++) {
        infer_request *r[2];
        for (i = 0; i < 2; i++) {
            infer_request_params p = infer_request_default_params();
            p.prompt = prompts[turn][i];
            p.seq = i;
            p.n_predict = 40 + 10 * i;
            p.sampling.temperature = 0;
            p.draft = dc;
            p.draft_n = draft_n;
            r[i] = infer_request_start(c, &p, &err);
            cr_assert(r[i], "%s", err.msg);
        }
        while (infer_context_step(c, 0) > 0) {}
        for (i = 0; i < 2; i++) {
            cr_assert_eq(infer_request_status(r[i], &err), INFER_OK, "%s", err.msg);
            toks[turn][i].n = sc_request_tokens(r[i], toks[turn][i].toks, 512);
            drafted += infer_request_metrics(r[i]).n_draft_tokens;
            infer_request_free(r[i]);
        }
    }
    for (i = 0; i < 2; i++) {
        const infer_token *t = infer_seq_tokens(c, i, &cache[i].n_seq);
        cr_assert(cache[i].n_seq <= 4096);
        memcpy(cache[i].seq_toks, t, (size_t)cache[i].n_seq * sizeof *t);
    }
    infer_context_free(c);
    return drafted;
}

/* A draft model of random weights agrees with its target rarely, so this
   shows correctness, not speed: every reply and cache as without it. A
   draft of another vocabulary is refused. */
Test(speculate, draft_model_keeps_the_greedy_replies) {
    char dir[64], path[1024];
    infer_context_params cp = infer_context_default_params();
    infer_request_params p = infer_request_default_params();
    infer_error err;
    infer_model *m, *dm, *other;
    infer_context *dc, *oc;
    spec_reply(*a)[2] = (spec_reply(*)[2])calloc(2, sizeof *a), (*b)[2] = (spec_reply(*)[2])calloc(2, sizeof *b);
    spec_reply *ca = (spec_reply *)calloc(4, sizeof *ca), *cb = ca + 2;
    int turn, i, j, drafted;
    cr_assert(a && b && ca);
    if (!tu_make_draft_pair(dir, sizeof dir)) {
        spec_remove_pair(dir);
        free(a), free(b), free(ca);
        cr_skip_test("bench/make_model.py could not write the test models (Python's numpy and gguf needed)");
    }
    snprintf(path, sizeof path, "%s/target.gguf", dir);
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    snprintf(path, sizeof path, "%s/draft.gguf", dir);
    dm = infer_model_load(path, NULL, &err);
    cr_assert(dm, "%s", err.msg);
    cp.n_ctx = 512, cp.n_seq = 2, cp.n_threads = 1;
    dc = infer_context_new(dm, &cp, &err);
    cr_assert(dc, "%s", err.msg);
    cr_assert_eq(spec_two_turns(m, NULL, 0, a, ca), 0);
    drafted = spec_two_turns(m, dc, 4, b, cb);
    cr_expect_gt(drafted, 0, "the draft model drafted nothing");
    for (turn = 0; turn < 2; turn++)
        for (i = 0; i < 2; i++) {
            cr_assert_eq(a[turn][i].n, b[turn][i].n, "turn %d, sequence %d: %d tokens without the draft, %d with it",
                         turn, i, a[turn][i].n, b[turn][i].n);
            for (j = 0; j < a[turn][i].n; j++)
                cr_assert_eq(a[turn][i].toks[j], b[turn][i].toks[j], "turn %d, sequence %d: token %d differs", turn, i, j);
        }
    for (i = 0; i < 2; i++) {
        cr_assert_eq(ca[i].n_seq, cb[i].n_seq, "sequence %d's cache: %d positions without the draft, %d with it", i,
                     ca[i].n_seq, cb[i].n_seq);
        for (j = 0; j < ca[i].n_seq; j++) cr_assert_eq(ca[i].seq_toks[j], cb[i].seq_toks[j]);
    }
    /* another vocabulary (2048 tokens, not 512) */
    if (tu_have_shared()) {
        tu_shared_path(path, sizeof path, "models/tinystories-656k-f32.gguf");
        other = infer_model_load(path, NULL, &err);
        cr_assert(other, "%s", err.msg);
        oc = infer_context_new(other, NULL, &err);
        cr_assert(oc, "%s", err.msg);
        {
            infer_context *c = infer_context_new(m, NULL, &err);
            cr_assert(c, "%s", err.msg);
            p.prompt = "hello";
            p.draft = oc;
            p.draft_n = 4;
            cr_expect_null(infer_request_start(c, &p, &err), "a draft of another vocabulary was taken");
            cr_expect_eq(err.code, INFER_ERR_ARG);
            cr_expect(strstr(err.msg, "vocabulary"), "%s", err.msg);
            p.draft = dc;
            p.seq = 0;
            {
                infer_request *r = infer_request_start(c, &p, &err);
                cr_expect_not_null(r, "the same vocabulary refused: %s", err.msg);
                infer_request_free(r);
            }
            infer_context_free(c);
        }
        infer_context_free(oc);
        infer_model_free(other);
    }
    infer_context_free(dc);
    infer_model_free(dm);
    infer_model_free(m);
    spec_remove_pair(dir);
    free(a), free(b), free(ca);
}

/* Under a grammar each row is sampled in the grammar's state after the
   tokens before it, so a draft changes nothing there either; and a stop
   string met inside an accepted draft ends the reply where it would. */
Test(speculate, grammar_and_stop_strings_hold_under_drafts) {
    static const char *const prompt = "Tom had a red ball. Tom liked the red ball. One day, Tom";
    static const char *const gbnf = "root ::= (\" Tom\" | \" the\" | \" red\" | \" ball\" | \" had\" | \" a\" | \".\")+\n";
    char path[1024];
    infer_error err;
    infer_model *m;
    spec_reply *a = (spec_reply *)calloc(2, sizeof *a), *b = a + 1;
    if (!tu_have_shared()) {
        free(a);
        cr_skip_test("../shared is absent: no model to speculate with");
    }
    cr_assert(a);
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    spec_run_grammar(m, &prompt, 1, 60, 0, gbnf, NULL, a);
    spec_run_grammar(m, &prompt, 1, 60, 6, gbnf, NULL, b);
    spec_expect_same(a, b, "under a grammar");
    cr_expect_gt(b->mt.n_draft_accepted, 0, "no draft token was accepted under the grammar (%d drafted)",
                 b->mt.n_draft_tokens);
    /* "... He wanted to play with the ball": the reply stops there, in a
       stretch it copies from itself, the rest of the draft dropped */
    spec_run_grammar(m, &prompt, 1, 120, 0, NULL, "the ball", a);
    spec_run_grammar(m, &prompt, 1, 120, 6, NULL, "the ball", b);
    cr_assert_lt(a->n, 120, "the stop string never came: the test needs another");
    spec_expect_same(a, b, "with a stop string");
    infer_model_free(m);
    free(a);
}
