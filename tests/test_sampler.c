/* test_sampler.c - the sampler against its definition: greedy is the
   argmax; top-k 1 is the argmax at any temperature; a seed fixes the
   sequence; the repetition penalty divides positive and multiplies negative
   logits of recently seen tokens, once per distinct token, only within the
   window; top-k, top-p and min-p never choose outside their sets; and the
   frequencies of a plain temperature draw follow the softmax. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint64_t rng_state = 1;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [lo, hi) */
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)((rng_next() >> 40) * (1.0 / 16777216.0)); }

static void random_logits(float *l, int n, float scale) {
    int i;
    for (i = 0; i < n; i++) l[i] = frand(-scale, scale);
}

static int argmax(const float *l, int n) {
    int i, b = 0;
    for (i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* every filter off: a plain draw from softmax(logits / temperature) */
static infer_sampler_params plain(float temp, uint64_t seed) {
    infer_sampler_params p = infer_sampler_default_params();
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = seed;
    return p;
}

static infer_sampler *make(const infer_sampler_params *p, int n_vocab) {
    infer_sampler *s = infer_sampler_new(p, n_vocab, NULL);
    cr_assert_not_null(s, "infer_sampler_new failed");
    return s;
}

Test(sampler, greedy_is_argmax) {
    enum { N = 1000 };
    static float l[N], copy[N];
    const float temps[] = {0.0f, -1.0f};
    int t, trial;
    rng_state = 11;
    for (t = 0; t < 2; t++) {
        infer_sampler_params p = infer_sampler_default_params(); /* filters on: greedy ignores them */
        infer_sampler *s;
        p.temperature = temps[t];
        s = make(&p, N);
        for (trial = 0; trial < 200; trial++) {
            infer_token tok;
            random_logits(l, N, trial % 2 ? 30.0f : 0.01f);
            if (trial % 3 == 0) l[rng_next() % N] = 100.0f; /* one clear winner */
            memcpy(copy, l, sizeof l);
            tok = infer_sampler_sample(s, l);
            cr_assert_eq(tok, argmax(l, N), "temperature %g, trial %d: chose %d, argmax is %d", temps[t], trial, tok,
                         argmax(l, N));
            cr_assert_eq(memcmp(copy, l, sizeof l), 0, "the sampler modified the logits");
        }
        infer_sampler_free(s);
    }
}

Test(sampler, greedy_with_negative_logits_and_single_token) {
    float l[5] = {-5.0f, -3.0f, -4.0f, -3.5f, -100.0f};
    float one[1] = {-7.0f};
    infer_sampler_params p = plain(0.0f, 1);
    infer_sampler *s = make(&p, 5), *s1;
    cr_assert_eq(infer_sampler_sample(s, l), 1);
    infer_sampler_free(s);
    p = plain(1.0f, 1);
    s1 = make(&p, 1);
    cr_assert_eq(infer_sampler_sample(s1, one), 0);
    cr_assert_eq(infer_sampler_sample(s1, one), 0);
    infer_sampler_free(s1);
    cr_assert_null(infer_sampler_new(&p, 0, NULL), "a sampler over 0 tokens was created");
    {
        infer_error err;
        cr_assert_null(infer_sampler_new(&p, 0, &err));
        cr_assert_eq(err.code, INFER_ERR_ARG, "a sampler over 0 tokens is a bad argument: %s", err.msg);
        cr_assert_eq(infer_sampler_set_logit_bias(NULL, NULL, NULL, 0, &err), INFER_ERR_ARG);
    }
}

Test(sampler, top_k_1_is_argmax_at_any_temperature) {
    enum { N = 512 };
    static float l[N];
    const float temps[] = {0.1f, 0.8f, 1.0f, 2.0f, 10.0f, 1000.0f};
    size_t t;
    int trial;
    rng_state = 12;
    for (t = 0; t < sizeof temps / sizeof temps[0]; t++) {
        infer_sampler_params p = plain(temps[t], 1000 + t);
        infer_sampler *s;
        p.top_k = 1;
        s = make(&p, N);
        for (trial = 0; trial < 200; trial++) {
            infer_token tok;
            random_logits(l, N, 1.0f);
            tok = infer_sampler_sample(s, l);
            cr_assert_eq(tok, argmax(l, N), "temperature %g: top-k 1 chose %d, argmax is %d", temps[t], tok,
                         argmax(l, N));
        }
        infer_sampler_free(s);
    }
}

static void draw_sequence(uint64_t seed, const float *l, int n, infer_token *out, int count) {
    infer_sampler_params p = plain(1.0f, seed);
    infer_sampler *s = make(&p, n);
    int i;
    for (i = 0; i < count; i++) {
        out[i] = infer_sampler_sample(s, l);
        cr_assert(out[i] >= 0 && out[i] < n);
        infer_sampler_accept(s, out[i]);
    }
    infer_sampler_free(s);
}

Test(sampler, seed_fixes_the_sequence) {
    enum { N = 100, COUNT = 200 };
    float l[N];
    infer_token a[COUNT], b[COUNT], c[COUNT], d[COUNT];
    int i, same_ac = 0, same_ad = 0, distinct = 0;
    int seen[N] = {0};
    for (i = 0; i < N; i++) l[i] = 0.0f; /* uniform: the most random a draw gets */
    draw_sequence(123, l, N, a, COUNT);
    draw_sequence(123, l, N, b, COUNT);
    draw_sequence(124, l, N, c, COUNT);
    draw_sequence(0, l, N, d, COUNT);
    cr_assert_eq(memcmp(a, b, sizeof a), 0, "the same seed gave two different sequences");
    for (i = 0; i < COUNT; i++) {
        same_ac += a[i] == c[i];
        same_ad += a[i] == d[i];
        if (!seen[a[i]]++) distinct++;
    }
    /* by chance about COUNT / N = 2 positions agree */
    cr_assert_lt(same_ac, 20, "seeds 123 and 124 agree at %d of %d draws", same_ac, COUNT);
    cr_assert_lt(same_ad, 20, "seeds 123 and 0 agree at %d of %d draws", same_ad, COUNT);
    /* 200 uniform draws from 100 tokens hit about 87 distinct ones */
    cr_assert_gt(distinct, 60, "only %d distinct tokens in %d uniform draws", distinct, COUNT);
}

/* logits where token 0 leads token 1; after accepting token 0 the penalty
   decides */
static infer_token greedy_after(float l0, float l1, float penalty, const infer_token *accepted, int n_acc,
                                int last_n) {
    float l[8] = {l0, l1, -20, -20, -20, -20, -20, -20};
    infer_sampler_params p = plain(0.0f, 1);
    infer_sampler *s;
    infer_token t;
    int i;
    p.repeat_penalty = penalty;
    p.repeat_last_n = last_n;
    s = make(&p, 8);
    for (i = 0; i < n_acc; i++) infer_sampler_accept(s, accepted[i]);
    t = infer_sampler_sample(s, l);
    infer_sampler_free(s);
    return t;
}

Test(sampler, repetition_penalty_definition) {
    const infer_token zero[] = {0}, zeros[] = {0, 0, 0}, other[] = {5, 6, 7};
    const infer_token old_zero[] = {0, 5, 6};
    /* no penalty window entries: the leader wins */
    cr_assert_eq(greedy_after(2.0f, 1.5f, 2.0f, NULL, 0, 64), 0);
    /* positive logit divided: 2.0 / 2 = 1.0 < 1.5 (multiplying would keep 0 ahead) */
    cr_assert_eq(greedy_after(2.0f, 1.5f, 2.0f, zero, 1, 64), 1, "positive logit not divided by the penalty");
    /* 2.0 / 1.2 = 1.67 > 1.5: still ahead */
    cr_assert_eq(greedy_after(2.0f, 1.5f, 1.2f, zero, 1, 64), 0, "penalty stronger than defined");
    /* negative logit multiplied: -1 * 2 = -2 < -1.5 (dividing would give -0.5) */
    cr_assert_eq(greedy_after(-1.0f, -1.5f, 2.0f, zero, 1, 64), 1, "negative logit not multiplied by the penalty");
    /* -1 * 1.4 = -1.4 > -1.5: still ahead */
    cr_assert_eq(greedy_after(-1.0f, -1.5f, 1.4f, zero, 1, 64), 0, "penalty stronger than defined");
    /* once per distinct token: 2.0 / 2 = 1.0 > 0.9 (three times would be 0.25) */
    cr_assert_eq(greedy_after(2.0f, 0.9f, 2.0f, zeros, 3, 64), 0, "a token seen 3 times was penalised more than once");
    /* other tokens accepted: no effect on token 0 */
    cr_assert_eq(greedy_after(2.0f, 1.5f, 2.0f, other, 3, 64), 0, "penalty hit a token never seen");
    /* the window: token 0 accepted, then two others with repeat_last_n 2 */
    cr_assert_eq(greedy_after(2.0f, 1.5f, 2.0f, old_zero, 3, 2), 0, "penalty reached past repeat_last_n");
    cr_assert_eq(greedy_after(2.0f, 1.5f, 2.0f, old_zero, 3, 3), 1, "penalty missed a token inside repeat_last_n");
    /* penalty 1 and window 0 are off */
    cr_assert_eq(greedy_after(2.0f, 1.5f, 1.0f, zero, 1, 64), 0, "penalty 1 changed the choice");
    cr_assert_eq(greedy_after(2.0f, 1.5f, 2.0f, zero, 1, 0), 0, "repeat_last_n 0 still penalised");
    /* the penalised token is out of range for the sampler: ignored, no crash */
    {
        const infer_token bad[] = {-1, 1000000};
        cr_assert_eq(greedy_after(2.0f, 1.5f, 2.0f, bad, 2, 64), 0);
    }
}

Test(sampler, repetition_penalty_lowers_the_chance) {
    enum { N = 4, DRAWS = 8000 };
    const float l[N] = {1.0f, 0.0f, 0.0f, 0.0f};
    int pass, count0[2] = {0, 0}, i;
    for (pass = 0; pass < 2; pass++) {
        infer_sampler_params p = plain(1.0f, 99);
        infer_sampler *s;
        p.repeat_penalty = pass ? 3.0f : 1.0f;
        s = make(&p, N);
        infer_sampler_accept(s, 0);
        for (i = 0; i < DRAWS; i++) count0[pass] += infer_sampler_sample(s, l) == 0;
        infer_sampler_free(s);
    }
    /* p0 = e / (e + 3) = 0.475 without; e^(1/3) / (e^(1/3) + 3) = 0.317 with */
    cr_assert(fabs(count0[0] / (double)DRAWS - 0.475) < 0.03, "without penalty token 0 drawn %d of %d", count0[0],
              DRAWS);
    cr_assert(fabs(count0[1] / (double)DRAWS - 0.317) < 0.03, "with penalty 3 token 0 drawn %d of %d", count0[1],
              DRAWS);
}

/* probabilities p, as logits log(p) (plus a constant, which softmax ignores) */
static void logits_from_probs(const double *p, int n, float *l) {
    int i;
    for (i = 0; i < n; i++) l[i] = (float)(log(p[i]) + 3.0);
}

static void draws(const infer_sampler_params *p, const float *l, int n, int count, int *hist) {
    infer_sampler *s = make(p, n);
    int i;
    memset(hist, 0, sizeof(int) * (size_t)n);
    for (i = 0; i < count; i++) {
        infer_token t = infer_sampler_sample(s, l);
        cr_assert(t >= 0 && t < n, "token %d out of range", t);
        hist[t]++;
    }
    infer_sampler_free(s);
}

/* token order is shuffled so that no filter can lean on ids */
static const int perm[10] = {7, 2, 9, 0, 5, 3, 8, 1, 6, 4};
static const double probs[10] = {0.40, 0.25, 0.15, 0.08, 0.05, 0.03, 0.02, 0.01, 0.007, 0.003};

static void shuffled_logits(float *l) {
    double p[10];
    int i;
    for (i = 0; i < 10; i++) p[perm[i]] = probs[i];
    logits_from_probs(p, 10, l);
}

/* how many of the most likely tokens (by rank) the draws stayed within */
static void check_within_top(const int *hist, int allowed, const char *what) {
    int r;
    for (r = 0; r < 10; r++) {
        if (r < allowed) cr_assert_gt(hist[perm[r]], 0, "%s: token of rank %d never drawn", what, r);
        else cr_assert_eq(hist[perm[r]], 0, "%s: token of rank %d drawn %d times", what, r, hist[perm[r]]);
    }
}

Test(sampler, top_p_stays_in_the_nucleus) {
    static const struct {
        float top_p;
        int allowed; /* smallest prefix whose mass reaches top_p */
    } cases[] = {{0.30f, 1}, {0.60f, 2}, {0.66f, 3}, {0.75f, 3}, {0.85f, 4}, {0.95f, 6}, {0.999f, 10}};
    float l[10];
    int hist[10];
    size_t c;
    shuffled_logits(l);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const float temps[] = {1.0f, 2.5f};
        int t;
        for (t = 0; t < 2; t++) {
            infer_sampler_params p = plain(temps[t], 500 + c);
            char what[64];
            p.top_p = cases[c].top_p;
            draws(&p, l, 10, 6000, hist);
            snprintf(what, sizeof what, "top_p %g temperature %g", cases[c].top_p, temps[t]);
            check_within_top(hist, cases[c].allowed, what);
        }
    }
    {
        /* renormalised within the nucleus at temperature 1: 0.40 : 0.25 : 0.15 */
        infer_sampler_params p = plain(1.0f, 77);
        p.top_p = 0.75f;
        draws(&p, l, 10, 20000, hist);
        cr_assert(fabs(hist[perm[0]] / 20000.0 - 0.5) < 0.02, "rank 0 drawn %d of 20000", hist[perm[0]]);
        cr_assert(fabs(hist[perm[1]] / 20000.0 - 0.3125) < 0.02, "rank 1 drawn %d of 20000", hist[perm[1]]);
        cr_assert(fabs(hist[perm[2]] / 20000.0 - 0.1875) < 0.02, "rank 2 drawn %d of 20000", hist[perm[2]]);
    }
}

Test(sampler, min_p_keeps_tokens_near_the_top) {
    static const struct {
        float min_p;
        int allowed; /* tokens with p >= min_p * 0.40 */
    } cases[] = {{0.9f, 1}, {0.5f, 2}, {0.3f, 3}, {0.15f, 4}, {0.1f, 5}, {0.06f, 6}, {0.001f, 10}};
    float l[10];
    int hist[10];
    size_t c;
    shuffled_logits(l);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* the set is fixed before the temperature flattens the draw */
        const float temps[] = {1.0f, 3.0f};
        int t;
        for (t = 0; t < 2; t++) {
            infer_sampler_params p = plain(temps[t], 900 + c);
            char what[64];
            p.min_p = cases[c].min_p;
            draws(&p, l, 10, 6000, hist);
            snprintf(what, sizeof what, "min_p %g temperature %g", cases[c].min_p, temps[t]);
            check_within_top(hist, cases[c].allowed, what);
        }
    }
}

Test(sampler, top_k_stays_in_the_k_best) {
    float l[10];
    int hist[10], k;
    shuffled_logits(l);
    for (k = 1; k <= 10; k++) {
        infer_sampler_params p = plain(5.0f, 300 + (uint64_t)k);
        char what[32];
        p.top_k = k;
        draws(&p, l, 10, 4000, hist);
        snprintf(what, sizeof what, "top_k %d", k);
        check_within_top(hist, k, what);
    }
}

Test(sampler, filters_combined) {
    /* top_k 5 then top_p 0.8 (within the 5: 0.40+0.25+0.15 = 0.80 of 0.93,
       i.e. 0.86 >= 0.8 at 3 tokens) then min_p 0.5 (p >= 0.2 of the
       renormalised top: rank 0 and 1 only) */
    float l[10];
    int hist[10];
    infer_sampler_params p = plain(1.0f, 4242);
    shuffled_logits(l);
    p.top_k = 5;
    p.top_p = 0.8f;
    p.min_p = 0.5f;
    draws(&p, l, 10, 5000, hist);
    check_within_top(hist, 2, "top_k 5, top_p 0.8, min_p 0.5");
    /* the defaults (top_k 40, top_p 0.95, min_p 0.05) never pick a token
       that min_p 0.05 excludes: p < 0.02 */
    p = infer_sampler_default_params();
    draws(&p, l, 10, 5000, hist);
    cr_assert_eq(hist[perm[8]] + hist[perm[9]], 0, "defaults drew tokens below min_p");
}

Test(sampler, masked_logits_never_drawn) {
    enum { N = 64 };
    float l[N];
    int hist[N], i;
    infer_sampler_params p = plain(1.0f, 5);
    for (i = 0; i < N; i++) l[i] = -INFINITY;
    l[17] = 0.5f;
    l[40] = 0.0f;
    draws(&p, l, N, 3000, hist);
    for (i = 0; i < N; i++)
        if (i != 17 && i != 40) cr_assert_eq(hist[i], 0, "token %d with logit -inf drawn %d times", i, hist[i]);
    cr_assert_gt(hist[17], hist[40]);
    cr_assert_gt(hist[40], 0);
}

/* chi-square of draws against softmax(l / temp) */
static double chi_square(const float *l, int n, float temp, int count, uint64_t seed) {
    int hist[64], i;
    double mx = l[0], sum = 0, chi = 0, pr[64];
    infer_sampler_params p = plain(temp, seed);
    cr_assert(n <= 64);
    draws(&p, l, n, count, hist);
    for (i = 1; i < n; i++) mx = fmax(mx, l[i]);
    for (i = 0; i < n; i++) sum += pr[i] = exp((l[i] - mx) / temp);
    for (i = 0; i < n; i++) {
        double e = count * pr[i] / sum;
        chi += (hist[i] - e) * (hist[i] - e) / e;
    }
    return chi;
}

Test(sampler, temperature_follows_softmax) {
    const float l[8] = {0.0f, 0.5f, 1.0f, 1.5f, -0.5f, 2.0f, 0.25f, -1.0f};
    const float temps[] = {0.5f, 0.8f, 1.0f, 1.7f};
    size_t t;
    for (t = 0; t < sizeof temps / sizeof temps[0]; t++) {
        double chi = chi_square(l, 8, temps[t], 20000, 31 + t);
        /* 7 degrees of freedom: P(chi2 > 30) is about 1e-4 */
        cr_assert_lt(chi, 30.0, "temperature %g: chi-square %.1f over 20000 draws", temps[t], chi);
    }
    {
        /* and a wrong temperature would be noticed: draws at 0.5 against the
           softmax at 1.0 */
        int hist[8], i;
        double mx = 2.0, sum = 0, chi = 0, pr[8];
        infer_sampler_params p = plain(0.5f, 3);
        draws(&p, l, 8, 20000, hist);
        for (i = 0; i < 8; i++) sum += pr[i] = exp(l[i] - mx);
        for (i = 0; i < 8; i++) {
            double e = 20000 * pr[i] / sum;
            chi += (hist[i] - e) * (hist[i] - e) / e;
        }
        cr_assert_gt(chi, 100.0, "draws at temperature 0.5 look like temperature 1 (chi-square %.1f)", chi);
    }
}

/* A bias that bans every token leaves nothing to draw: -1, greedy or not,
   never one of the banned tokens. */
Test(sampler, bias_banning_every_token_draws_nothing) {
    enum { N = 64 };
    float l[N], bias[N];
    infer_token ids[N];
    int i, round;
    random_logits(l, N, 4.0f);
    for (i = 0; i < N; i++) ids[i] = i, bias[i] = -INFINITY;
    for (round = 0; round < 2; round++) {
        infer_sampler_params p = round ? plain(1.0f, 3) : infer_sampler_default_params();
        infer_sampler *s;
        if (!round) p.temperature = 0;
        s = infer_sampler_new(&p, N, NULL);
        cr_assert_eq(infer_sampler_set_logit_bias(s, ids, bias, N, NULL), INFER_OK);
        cr_assert_eq(infer_sampler_sample(s, l), -1, "a token drawn with every token banned (%s)",
                     round ? "temperature 1" : "greedy");
        /* one left unbanned is the only choice */
        bias[N - 5] = 0;
        cr_assert_eq(infer_sampler_set_logit_bias(s, ids, bias, N, NULL), INFER_OK);
        for (i = 0; i < 20; i++) cr_assert_eq(infer_sampler_sample(s, l), N - 5);
        bias[N - 5] = -INFINITY;
        infer_sampler_free(s);
    }
}
