/* Requests (request.c): stepping within a time budget gives what
   infer_generate gives and keeps to the budget; stop strings cut and hold
   back text; cancel from another thread stops a long prompt and leaves the
   context working; the background worker gives the same replies as
   sequential generation, over several contexts and several sequences of
   one, and frees cleanly with requests running; the context-full policies;
   JSON-schema output; the CLI's context-full line. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "tests/status_calls.h"

#define MODEL "models/stories260K.gguf"

static infer_model *load(const char *rel) {
    char path[1024];
    infer_error err;
    infer_model *m;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the request tests need its models");
    tu_shared_path(path, sizeof path, rel);
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    return m;
}

static infer_context *ctx(infer_model *m, int n_ctx, int n_seq, infer_full_policy policy, int n_threads) {
    infer_context_params p = infer_context_default_params();
    infer_error err;
    infer_context *c;
    p.n_ctx = n_ctx, p.n_seq = n_seq, p.full_policy = policy, p.n_threads = n_threads;
    c = infer_context_new(m, &p, &err);
    cr_assert(c, "%s", err.msg);
    return c;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct sink {
    char buf[16384];
    size_t n;
} sink;

static int on_piece(const char *p, int len, void *u) {
    sink *s = (sink *)u;
    cr_assert(s->n + (size_t)len < sizeof s->buf);
    memcpy(s->buf + s->n, p, (size_t)len);
    s->n += (size_t)len;
    s->buf[s->n] = 0;
    return 0;
}

static infer_sampler_params greedy(void) {
    infer_sampler_params sp = infer_sampler_default_params();
    sp.temperature = 0;
    return sp;
}

/* infer_generate's greedy text for prompt on a fresh context */
static void generate_text(infer_model *m, const char *prompt, int n_predict, sink *out) {
    infer_context *c = ctx(m, 0, 1, INFER_FULL_POLICY_STOP, 1);
    infer_sampler_params sp = greedy();
    infer_sampler *s = infer_sampler_new(&sp, infer_model_n_vocab(m), NULL);
    infer_error err;
    memset(out, 0, sizeof *out);
    cr_assert_eq(infer_generate(c, s, prompt, n_predict, on_piece, out, &err), INFER_OK, "%s", err.msg);
    infer_sampler_free(s);
    infer_context_free(c);
}

static infer_request_params req_params(const char *prompt, int n_predict, int seq) {
    infer_request_params p = infer_request_default_params();
    p.prompt = prompt;
    p.n_predict = n_predict;
    p.seq = seq;
    p.sampling = greedy();
    return p;
}

static char *text_of(const infer_request *r) {
    size_t n = infer_request_text(r, 0, NULL, 0);
    char *t = (char *)malloc(n + 1);
    cr_assert(t);
    infer_request_text(r, 0, t, n + 1);
    return t;
}

/* A story opening of about 140 tokens, and one repeated to about n tokens. */
static const char *story =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day, she saw a big red ball under a tree. She wanted to play with it, but it was too high. "
    "Lily asked her mom for help. Her mom smiled and said, \"Let's get it together.\" They found a long stick "
    "and pushed the ball down. Lily was so happy that she hugged her mom and said thank you.";

static char *long_prompt(int copies) {
    size_t n = strlen(story);
    char *p = (char *)malloc(n * (size_t)copies + (size_t)copies + 1);
    int i;
    cr_assert(p);
    p[0] = 0;
    for (i = 0; i < copies; i++) {
        strcat(p, story);
        strcat(p, " ");
    }
    return p;
}

/* ---- frame-budget stepping ------------------------------------------------ */

Test(request, budget_stepping_matches_generate) {
    infer_model *m = load(MODEL);
    const char *prompts[] = {"Once upon a time", story};
    const double budgets[] = {0.05, 1.0, 0};
    size_t k, b;
    for (k = 0; k < 2; k++) {
        sink want;
        generate_text(m, prompts[k], 80, &want);
        cr_assert(want.n > 20, "too little text to compare: %s", want.buf);
        for (b = 0; b < 3; b++) {
            infer_context *c = ctx(m, 0, 1, INFER_FULL_POLICY_STOP, 1);
            infer_request_params p = req_params(prompts[k], 80, 0);
            infer_error err;
            infer_request *r = infer_request_start(c, &p, &err);
            int steps = 0;
            char *got;
            cr_assert(r, "%s", err.msg);
            while (infer_context_step(c, budgets[b]) > 0) steps++;
            cr_assert(infer_request_done(r));
            cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
            got = text_of(r);
            cr_assert_str_eq(got, want.buf, "budget %g ms, prompt %zu: stepped text differs from infer_generate",
                             budgets[b], k);
            /* the sequence holds the prompt and every token but an end of generation */
            {
                int np = sc_request_prompt_tokens(r, NULL, 0), ng = sc_request_tokens(r, NULL, 0);
                infer_token last;
                infer_token *all = (infer_token *)malloc(sizeof(infer_token) * (size_t)ng);
                infer_request_tokens(r, all, ng, NULL, NULL);
                last = all[ng - 1];
                free(all);
                cr_assert_eq(infer_seq_n_past(c, 0), np + ng - (infer_model_is_eog(m, last) ? 1 : 0));
            }
            /* a tiny budget steps a pass at a time: many more steps */
            if (budgets[b] == 0.05) cr_assert_gt(steps, 20);
            free(got);
            infer_request_free(r);
            infer_context_free(c);
        }
    }
    infer_model_free(m);
}

/* One request run to its end with the given budget: the largest, the 90th
   percentile and the median step's time, and the most tokens one step
   generated. */
typedef struct step_stats {
    double worst, p90, median;
    int n_steps, most_tokens;
} step_stats;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static step_stats step_times(infer_model *m, const char *prompt, double budget) {
    infer_context *c = ctx(m, 0, 1, INFER_FULL_POLICY_STOP, 1);
    infer_request_params p = req_params(prompt, 64, 0);
    infer_error err;
    infer_request *r = infer_request_start(c, &p, &err);
    static double times[4096];
    step_stats st;
    int left, had = 0;
    cr_assert(r, "%s", err.msg);
    memset(&st, 0, sizeof st);
    do {
        double t0 = now_ms();
        int n;
        left = infer_context_step(c, budget);
        times[st.n_steps] = now_ms() - t0;
        if (times[st.n_steps] > st.worst) st.worst = times[st.n_steps];
        n = sc_request_tokens(r, NULL, 0);
        if (n - had > st.most_tokens) st.most_tokens = n - had;
        had = n;
        st.n_steps++;
    } while (left > 0 && st.n_steps < 4096);
    qsort(times, (size_t)st.n_steps, sizeof *times, cmp_double);
    st.median = times[st.n_steps / 2];
    st.p90 = times[(st.n_steps - 1) * 9 / 10]; /* below the longest where n >= 10 */
    cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(sc_request_tokens(r, NULL, 0), 64, "the reply ended early: pick another prompt");
    infer_request_free(r);
    infer_context_free(c);
    return st;
}

/* A step lasts its budget, or one pass where that is longer: never much
   more. Timing on a shared machine is noisy: CI saw one step of a run held
   up 100 ms while other tests ran, and later a step of each of three runs
   held up over 5 ms (the process descheduled while a parallel test
   quantized). So the bound of budget + two of the longest passes seen is
   put on the 90th-percentile step, in one of three runs; in every run the
   median step must keep within budget + four of them. A step that ignored
   its budget (a whole reply's worth of passes, so few and long steps)
   breaks both, and a few stalled steps break neither. */
Test(request, steps_keep_to_the_budget) {
    infer_model *m = load(MODEL);
    char *prompt = long_prompt(2);
    step_stats one = step_times(m, prompt, 1e-6), st;
    double budget;
    int i, over = 0;
    /* a budget below one pass: each step is one pass, a token at most */
    cr_assert_eq(one.most_tokens, 1);
    cr_assert_gt(one.n_steps, 64 + 10, "%d steps", one.n_steps);
    /* a budget of several passes */
    budget = fmax(2.0, 6 * one.median);
    for (i = 0; i < 3; i++) {
        st = step_times(m, prompt, budget);
        if (st.p90 > budget + 2 * one.worst + 1.0) over++;
        cr_assert_lt(st.median, budget + 4 * one.worst + 1.0,
                     "half the %g ms steps took over %.2f ms (a pass: up to %.2f ms)", budget, st.median, one.worst);
        /* several passes to a step where they fit */
        cr_assert_geq(st.most_tokens, 2, "a %g ms step never made two tokens (a pass takes %.3f ms)", budget,
                      one.median);
        cr_assert_lt(st.n_steps, one.n_steps);
    }
    if (getenv("TEST_REQUEST_VERBOSE"))
        fprintf(stderr, "one pass: median %.3f ms, worst %.3f ms (%d steps); %.2f ms budget: worst step %.3f ms, 90th percentile %.3f ms (%d steps)\n",
                one.median, one.worst, one.n_steps, budget, st.worst, st.p90, st.n_steps);
    cr_assert_lt(over, 3, "in every run a tenth of the steps overran %g ms + 2 x %.2f ms", budget, one.worst);
    free(prompt);
    infer_model_free(m);
}

/* ---- stop strings --------------------------------------------------------- */

/* Whether some non-empty suffix of t is a proper prefix of s. */
static int ends_with_start_of(const char *t, const char *s) {
    size_t nt = strlen(t), ns = strlen(s), k;
    for (k = 1; k < ns && k <= nt; k++)
        if (!memcmp(t + nt - k, s, k)) return 1;
    return 0;
}

/* the length of the text of r's tokens so far (an end of generation adds nothing) */
static size_t pieces_len(const infer_model *m, const infer_request *r) {
    infer_token t[256];
    char piece[256];
    int n = sc_request_tokens(r, t, 256), i;
    size_t len = 0;
    for (i = 0; i < n && i < 256; i++)
        if (!infer_model_is_eog(m, t[i])) len += (size_t)sc_token_to_piece(m, t[i], piece, sizeof piece);
    return len;
}

Test(request, stop_strings_cut_and_hold_back) {
    infer_model *m = load(MODEL);
    sink full;
    const char *cut;
    generate_text(m, "Once upon a time", 80, &full);
    cut = strstr(full.buf, "Lily");
    cr_assert(cut, "the reference text has no 'Lily': %s", full.buf);
    {
        /* the earliest of several, across token boundaries; text before it */
        const char *stops[] = {"zzz", "ily. S", "Lily"};
        infer_context *c = ctx(m, 0, 1, INFER_FULL_POLICY_STOP, 1);
        infer_request_params p = req_params("Once upon a time", 80, 0);
        infer_request *r;
        infer_error err;
        char *got;
        p.stop = stops, p.n_stop = 3;
        r = infer_request_start(c, &p, &err);
        cr_assert(r, "%s", err.msg);
        while (infer_context_step(c, 0) > 0) {}
        cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
        got = text_of(r);
        cr_assert_eq(strlen(got), (size_t)(cut - full.buf), "text '%s' for the reference '%s'", got, full.buf);
        cr_assert_eq(strncmp(got, full.buf, strlen(got)), 0);
        cr_assert_lt(sc_request_tokens(r, NULL, 0), 40, "it went on past the stop string");
        free(got);
        infer_request_free(r);
        infer_context_free(c);
    }
    {
        /* a stop string the text begins but does not finish: held back while
           it might be one, then released; the text is the reference's */
        char stop[64];
        const char *stops[1];
        infer_context *c = ctx(m, 0, 1, INFER_FULL_POLICY_STOP, 1);
        infer_request_params p = req_params("Once upon a time", 80, 0);
        infer_request *r;
        infer_error err;
        char *got;
        int held = 0;
        snprintf(stop, sizeof stop, "%.5sQ", cut); /* "Lily.Q" */
        stops[0] = stop;
        p.stop = stops, p.n_stop = 1;
        r = infer_request_start(c, &p, &err);
        cr_assert(r, "%s", err.msg);
        while (infer_context_step(c, 0) > 0) {
            char *t = text_of(r);
            size_t n = strlen(t);
            cr_assert_eq(strncmp(t, full.buf, n), 0, "'%s' is not a prefix of the reference", t);
            cr_assert(!ends_with_start_of(t, stop), "'%s' ends with the start of the stop string", t);
            /* the tokens so far say more than the text: held back */
            if (pieces_len(m, r) > n) {
                cr_assert(!strncmp(full.buf + n, "Lil", 3), "held back at %zu, not at the stop string's start", n);
                held += n == (size_t)(cut - full.buf);
            }
            free(t);
        }
        got = text_of(r);
        cr_assert_str_eq(got, full.buf);
        cr_assert(held, "the text never paused at the stop string's start");
        free(got);
        infer_request_free(r);
        infer_context_free(c);
    }
    infer_model_free(m);
}

/* ---- cancel ------------------------------------------------------------------ */

typedef struct cancel_arg {
    infer_request *r;
    volatile int *started;
    double delay_ms;
} cancel_arg;

static void *canceller(void *v) {
    cancel_arg *a = (cancel_arg *)v;
    while (!__atomic_load_n(a->started, __ATOMIC_ACQUIRE)) usleep(50);
    usleep((useconds_t)(a->delay_ms * 1000));
    infer_request_cancel(a->r);
    return NULL;
}

Test(request, cancel_from_another_thread_during_a_long_prompt) {
    infer_model *m = load(MODEL);
    char *prompt = long_prompt(6);
    const char *follow = "Once upon a time";
    sink want;
    infer_context_params cp = infer_context_default_params();
    infer_context *c;
    infer_request_params p;
    infer_request *r;
    infer_error err;
    pthread_t th;
    cancel_arg a;
    double full_ms, t0, cut_ms;
    int n_prompt, attempt;
    /* the whole prompt in one pass of five layers */
    cp.n_ctx = 2048, cp.n_batch = 2048, cp.n_threads = 1;
    c = infer_context_new(m, &cp, &err);
    cr_assert(c, "%s", err.msg);
    generate_text(m, follow, 60, &want);
    /* how long the whole prompt takes in one pass */
    p = req_params(prompt, 1, 0);
    r = infer_request_start(c, &p, &err);
    cr_assert(r, "%s", err.msg);
    t0 = now_ms();
    infer_context_step(c, 0);
    full_ms = now_ms() - t0;
    n_prompt = sc_request_prompt_tokens(r, NULL, 0);
    cr_assert(n_prompt > 500 && n_prompt < 2000, "%d prompt tokens", n_prompt);
    infer_request_free(r);
    infer_seq_truncate(c, 0, 0, NULL, NULL);

    /* again, cancelled a quarter of the way in; a loaded machine may run
       the canceller only after the pass: then (the sequence kept the whole
       prompt) once more */
    for (attempt = 0;; attempt++) {
        volatile int started = 0;
        r = infer_request_start(c, &p, &err);
        cr_assert(r, "%s", err.msg);
        a.r = r, a.started = &started, a.delay_ms = full_ms / 4;
        pthread_create(&th, NULL, canceller, &a);
        t0 = now_ms();
        __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
        while (infer_context_step(c, 0) > 0) {}
        cut_ms = now_ms() - t0;
        pthread_join(th, NULL);
        if (getenv("TEST_REQUEST_VERBOSE")) fprintf(stderr, "pass %.2f ms, cancelled after %.2f ms\n", full_ms, cut_ms);
        cr_assert(infer_request_done(r));
        cr_assert_eq(infer_request_status(r, &err), INFER_ERR_CANCELLED, "status %d: %s",
                     infer_request_status(r, NULL), err.msg);
        if ((infer_seq_n_past(c, 0) == 0 && cut_ms < full_ms * 0.9) || attempt == 2) break;
        infer_request_free(r);
        infer_seq_truncate(c, 0, 0, NULL, NULL);
    }
    /* the pass stopped between layers, not at its end */
    cr_assert_lt(cut_ms, full_ms * 0.9, "cancelled after %.2f ms of a %.2f ms pass", cut_ms, full_ms);
    /* the sequence is back where it was, and the context works as new */
    cr_assert_eq(infer_seq_n_past(c, 0), 0);
    infer_request_free(r);
    p = req_params(follow, 60, 0);
    r = infer_request_start(c, &p, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 1.0) > 0) {}
    {
        char *got = text_of(r);
        cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
        cr_assert_str_eq(got, want.buf);
        free(got);
    }
    infer_request_free(r);
    /* cancelled before any step: done at once, nothing fed */
    r = infer_request_start(c, &p, &err);
    infer_request_cancel(r);
    cr_assert(infer_request_done(r));
    cr_assert_eq(infer_request_status(r, NULL), INFER_ERR_CANCELLED);
    infer_request_free(r);
    free(prompt);
    infer_context_free(c);
    infer_model_free(m);
}

/* ---- the worker ------------------------------------------------------------ */

static const char *openings[] = {"Once upon a time", "The cat sat", "Lily and Tom went", "One day, a little bird"};

/* polls until every request is done (never blocking); fails after 60 s */
static void wait_all(infer_request **r, int n) {
    double t0 = now_ms();
    for (;;) {
        int i, done = 1;
        char buf[64];
        for (i = 0; i < n; i++) {
            infer_request_text(r[i], 0, buf, sizeof buf);
            done &= infer_request_done(r[i]);
        }
        if (done) return;
        cr_assert_lt(now_ms() - t0, 60000, "the worker did not finish in 60 s");
        usleep(200);
    }
}

Test(request, worker_matches_sequential_generation) {
    infer_model *m = load(MODEL);
    sink want[4];
    infer_context *cs[3], *shared;
    infer_request *r[8];
    infer_worker *w;
    infer_error err;
    int i;
    for (i = 0; i < 4; i++) generate_text(m, openings[i], 50, &want[i]);
    w = infer_worker_new(2, &err);
    cr_assert(w, "%s", err.msg);
    /* three contexts of one sequence, and one context of four sequences */
    for (i = 0; i < 3; i++) {
        infer_request_params p = req_params(openings[i], 50, 0);
        cs[i] = ctx(m, 256, 1, INFER_FULL_POLICY_STOP, 1);
        r[i] = infer_worker_start(w, cs[i], &p, &err);
        cr_assert(r[i], "%s", err.msg);
    }
    shared = ctx(m, 256, 4, INFER_FULL_POLICY_STOP, 1);
    for (i = 0; i < 4; i++) {
        infer_request_params p = req_params(openings[i], 50, i);
        r[3 + i] = infer_worker_start(w, shared, &p, &err);
        cr_assert(r[3 + i], "%s", err.msg);
    }
    /* a second request on sequence 0 runs after the first */
    {
        infer_request_params p = req_params(" And then", 10, 0);
        r[7] = infer_request_start(shared, &p, &err); /* a worker's context: the worker steps it too */
        cr_assert(r[7], "%s", err.msg);
    }
    wait_all(r, 8);
    for (i = 0; i < 7; i++) {
        char *got = text_of(r[i]);
        const char *exp = want[i < 3 ? i : i - 3].buf;
        cr_assert_eq(infer_request_status(r[i], &err), INFER_OK, "request %d: %s", i, err.msg);
        cr_assert_str_eq(got, exp, "request %d: the worker's text differs from sequential generation", i);
        free(got);
    }
    cr_assert_eq(infer_request_status(r[7], &err), INFER_OK, "%s", err.msg);
    cr_assert_gt(sc_request_tokens(r[7], NULL, 0), 0);
    /* sequence 0 holds both: the first's prompt and reply, then the second's */
    {
        int n0 = sc_request_prompt_tokens(r[3], NULL, 0) + sc_request_tokens(r[3], NULL, 0);
        cr_assert_geq(infer_seq_n_past(shared, 0), n0, "sequence 0 has %d positions", infer_seq_n_past(shared, 0));
    }
    /* the step of a worker's context is the worker's */
    cr_assert_eq(infer_context_step(shared, 1.0), 0);
    for (i = 0; i < 8; i++) infer_request_free(r[i]);
    infer_worker_free(w);
    for (i = 0; i < 3; i++) infer_context_free(cs[i]);
    infer_context_free(shared);
    infer_model_free(m);
}

static int full_tokens(const infer_model *m, const char *text, infer_token *out, int max);

Test(request, freeing_a_worker_with_running_requests) {
    infer_model *m = load("models/tinystories-656k-f32.gguf");
    char *prompt = long_prompt(3);
    infer_context *c1 = ctx(m, 512, 1, INFER_FULL_POLICY_STOP, 1), *c2 = ctx(m, 512, 2, INFER_FULL_POLICY_STOP, 1);
    infer_request *r[3];
    infer_worker *w;
    infer_error err;
    int i, round;
    for (round = 0; round < 3; round++) {
        infer_request_params p = req_params(prompt, 100, 0);
        w = infer_worker_new(round + 1, &err);
        cr_assert(w, "%s", err.msg);
        infer_seq_truncate(c1, 0, 0, NULL, NULL);
        infer_seq_truncate(c2, 0, 0, NULL, NULL);
        infer_seq_truncate(c2, 1, 0, NULL, NULL);
        r[0] = infer_worker_start(w, c1, &p, &err);
        r[1] = infer_worker_start(w, c2, &p, &err);
        p.seq = 1;
        r[2] = infer_worker_start(w, c2, &p, &err);
        for (i = 0; i < 3; i++) cr_assert(r[i], "%s", err.msg);
        usleep((useconds_t)(round * 2000)); /* at once, then mid-prompt */
        infer_worker_free(w);
        for (i = 0; i < 3; i++) {
            infer_status st = infer_request_status(r[i], NULL);
            cr_assert(infer_request_done(r[i]), "round %d: request %d not done after the worker's free", round, i);
            cr_assert(st == INFER_ERR_CANCELLED || st == INFER_OK, "status %d", st);
        }
        /* the contexts are the caller's again: infer_context_step runs them */
        if (round == 2) {
            infer_request_params q = req_params("Once upon a time", 8, 0);
            infer_request *rq;
            infer_seq_truncate(c1, 0, 0, NULL, NULL);
            rq = infer_request_start(c1, &q, &err);
            cr_assert(rq, "%s", err.msg);
            for (i = 0; i < 3; i++) infer_request_free(r[i]);
            while (infer_context_step(c1, 0) > 0) {}
            cr_assert_eq(infer_request_status(rq, &err), INFER_OK, "%s", err.msg);
            infer_request_free(rq);
        } else {
            for (i = 0; i < 3; i++) infer_request_free(r[i]);
        }
    }
    /* freeing a request the worker is running waits only for its pass */
    w = infer_worker_new(1, &err);
    {
        infer_request_params p = req_params(prompt, 100, 0);
        infer_seq_truncate(c1, 0, 0, NULL, NULL);
        r[0] = infer_worker_start(w, c1, &p, &err);
        cr_assert(r[0], "%s", err.msg);
        usleep(1000);
        infer_request_free(r[0]);
        /* cut short in its prompt, the prompt is taken back; once the reply
           has begun (a fast machine reads it within the millisecond), the
           prompt and the reply so far stay: never part of the prompt */
        {
            infer_token toks[1024];
            int n_prompt = full_tokens(m, prompt, toks, 1024), n_past = infer_seq_n_past(c1, 0);
            cr_assert(n_past == 0 || n_past >= n_prompt, "%d positions after the free, of a %d-token prompt", n_past, n_prompt);
        }
    }
    infer_worker_free(w);
    free(prompt);
    infer_context_free(c1);
    infer_context_free(c2);
    infer_model_free(m);
}

/* ---- prompt reuse (cache_prompt) -------------------------------------------- */

/* [BOS] + tokens of text, as a request feeds them; returns the count */
static int full_tokens(const infer_model *m, const char *text, infer_token *out, int max) {
    int n;
    if (infer_tokenize(m, text, strlen(text), out, max, infer_model_add_bos(m), 1, &n, NULL) != INFER_OK) n = -1;
    cr_assert(n > 0 && n <= max, "tokenizing gave %d", n);
    return n;
}

/* Runs r to its end on c (no worker) and returns its text (malloc'd). */
static char *run_request(infer_context *c, const infer_request_params *p, infer_request **out) {
    infer_error err;
    infer_request *r = infer_request_start(c, p, &err);
    char *t;
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 5.0) > 0) {}
    cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
    t = text_of(r);
    *out = r;
    return t;
}

Test(request, prompt_reuse_extends_the_last_reply) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 512, 1, INFER_FULL_POLICY_STOP, 1);
    infer_request_params p = req_params(story, 30, 0);
    infer_request *r1, *r2;
    char *t1, *t2, *prompt2;
    sink want;
    int n_cached, n_story, n_prompt2;
    infer_token toks[1024];
    p.n_past = 0;
    t1 = run_request(c, &p, &r1);
    cr_assert_eq(infer_request_cached_tokens(r1), 0, "an empty sequence has nothing cached");
    /* the next turn: the story, its reply, more */
    prompt2 = (char *)malloc(strlen(story) + strlen(t1) + 32);
    sprintf(prompt2, "%s%s And then", story, t1);
    p.prompt = prompt2;
    t2 = run_request(c, &p, &r2);
    n_cached = infer_request_cached_tokens(r2);
    n_story = full_tokens(m, story, toks, 1024);
    n_prompt2 = full_tokens(m, prompt2, toks, 1024);
    /* (the story's last token may merge with the reply's first) */
    cr_assert_geq(n_cached, n_story - 1, "%d cached of a %d-token story", n_cached, n_story);
    cr_assert_lt(n_cached, n_prompt2);
    cr_assert_eq(infer_request_metrics(r2).n_prompt_tokens, n_prompt2 - n_cached, "the cached part was fed again");
    generate_text(m, prompt2, 30, &want);
    cr_assert_str_eq(t2, want.buf, "reusing the cache changed the reply");
    infer_request_free(r1);
    infer_request_free(r2);
    /* the same prompt again: all but its last token cached, the same reply */
    {
        infer_request *r3;
        char *t3 = run_request(c, &p, &r3);
        cr_assert_eq(infer_request_cached_tokens(r3), n_prompt2 - 1);
        cr_assert_str_eq(t3, want.buf);
        free(t3);
        infer_request_free(r3);
    }
    /* cache_prompt 0: fed afresh */
    {
        infer_request *r4;
        char *t4;
        p.cache_prompt = 0;
        t4 = run_request(c, &p, &r4);
        cr_assert_eq(infer_request_cached_tokens(r4), 0);
        cr_assert_eq(infer_request_metrics(r4).n_prompt_tokens, n_prompt2);
        cr_assert_str_eq(t4, want.buf);
        free(t4);
        infer_request_free(r4);
    }
    free(t1);
    free(t2);
    free(prompt2);
    infer_context_free(c);
    infer_model_free(m);
}

Test(request, prompt_reuse_keeps_only_the_common_prefix) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 512, 1, INFER_FULL_POLICY_STOP, 1);
    infer_request_params p = req_params(story, 10, 0);
    const char *other = "Once upon a time, there was a big dog named Max.";
    infer_token a[1024], b[1024];
    infer_request *r1, *r2;
    char *t1, *t2;
    sink want;
    int na, nb, common = 0;
    p.n_past = 0;
    t1 = run_request(c, &p, &r1);
    na = full_tokens(m, story, a, 1024);
    nb = full_tokens(m, other, b, 1024);
    while (common < na && common < nb && a[common] == b[common]) common++;
    cr_assert(common > 1 && common < nb, "the test's prompts share %d tokens", common);
    p.prompt = other;
    p.n_predict = 30;
    t2 = run_request(c, &p, &r2);
    cr_assert_eq(infer_request_cached_tokens(r2), common);
    generate_text(m, other, 30, &want);
    cr_assert_str_eq(t2, want.buf, "reusing the common prefix changed the reply");
    free(t1);
    free(t2);
    infer_request_free(r1);
    infer_request_free(r2);
    infer_context_free(c);
    infer_model_free(m);
}

/* After a context shift the positions past n_keep were made seeing what
   the shift dropped: a prompt that matches them reuses only n_keep. */
Test(request, prompt_reuse_stops_at_a_shift) {
    infer_model *m = load(MODEL);
    infer_context_params cp = infer_context_default_params();
    infer_request_params p = req_params("Once upon a time", 60, 0);
    infer_context *c;
    infer_request *r1, *r2;
    infer_token toks[64];
    const infer_token *held;
    infer_error err;
    char *t;
    int n_held;
    cp.n_ctx = 32, cp.n_seq = 1, cp.full_policy = INFER_FULL_POLICY_SHIFT, cp.n_keep = 4, cp.n_threads = 1;
    c = infer_context_new(m, &cp, &err);
    cr_assert(c, "%s", err.msg);
    p.n_past = 0;
    p.sampling.temperature = 0.8f; /* no end of generation that early */
    t = run_request(c, &p, &r1);
    free(t);
    cr_assert_gt(sc_request_prompt_tokens(r1, NULL, 0) + sc_request_tokens(r1, NULL, 0), 32, "no shift happened");
    /* the sequence's own tokens as the next prompt (BOS left out) */
    held = infer_seq_tokens(c, 0, &n_held);
    cr_assert(n_held > 5 && n_held <= 32 && held[0] == infer_model_bos(m));
    memcpy(toks, held + 1, (size_t)(n_held - 1) * sizeof *toks);
    p.prompt = NULL, p.prompt_tokens = toks, p.n_prompt_tokens = n_held - 1, p.n_predict = 4;
    t = run_request(c, &p, &r2);
    cr_assert_eq(infer_request_cached_tokens(r2), 4, "%d cached past a shift (n_keep 4)", infer_request_cached_tokens(r2));
    free(t);
    infer_request_free(r1);
    infer_request_free(r2);
    infer_context_free(c);
    infer_model_free(m);
}

/* Three sequences of one context, a worker, both turns at once. Prompts
   given as tokens, as a server passes them. */
Test(request, prompt_reuse_in_parallel_sequences) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 256, 3, INFER_FULL_POLICY_STOP, 1);
    infer_worker *w;
    infer_request *r[6];
    infer_error err;
    char *second[3];
    int i;
    w = infer_worker_new(1, &err);
    cr_assert(w, "%s", err.msg);
    for (i = 0; i < 3; i++) {
        infer_request_params p = req_params(openings[i], 20, i);
        p.n_past = 0;
        r[i] = infer_worker_start(w, c, &p, &err);
        cr_assert(r[i], "%s", err.msg);
    }
    wait_all(r, 3);
    for (i = 0; i < 3; i++) {
        char *t = text_of(r[i]);
        infer_token toks[512];
        int n;
        infer_request_params p = req_params(NULL, 20, i);
        second[i] = (char *)malloc(strlen(openings[i]) + strlen(t) + 16);
        sprintf(second[i], "%s%s Then", openings[i], t);
        free(t);
        if (infer_tokenize(m, second[i], strlen(second[i]), toks, 512, 0, 1, &n, NULL) != INFER_OK) n = -1;
        cr_assert(n > 0);
        p.prompt_tokens = toks, p.n_prompt_tokens = n, p.n_past = 0;
        r[3 + i] = infer_worker_start(w, c, &p, &err);
        cr_assert(r[3 + i], "%s", err.msg);
    }
    wait_all(r + 3, 3);
    for (i = 0; i < 3; i++) {
        sink want;
        char *t = text_of(r[3 + i]);
        cr_assert_eq(infer_request_status(r[3 + i], &err), INFER_OK, "%s", err.msg);
        cr_assert_gt(infer_request_cached_tokens(r[3 + i]), 1, "sequence %d reused nothing", i);
        generate_text(m, second[i], 20, &want);
        cr_assert_str_eq(t, want.buf, "sequence %d: reuse changed the reply", i);
        free(t);
        free(second[i]);
    }
    for (i = 0; i < 6; i++) infer_request_free(r[i]);
    /* a token outside the vocabulary is refused at start */
    {
        infer_token bad = infer_model_n_vocab(m);
        infer_request_params p = req_params(NULL, 5, 0);
        p.prompt_tokens = &bad, p.n_prompt_tokens = 1;
        cr_assert_null(infer_request_start(c, &p, &err));
        cr_assert(strstr(err.msg, "outside the vocabulary"), "%s", err.msg);
    }
    infer_worker_free(w);
    infer_context_free(c);
    infer_model_free(m);
}

/* ---- the context-full policies -------------------------------------------- */

Test(request, context_full_stops_or_shifts) {
    infer_model *m = load(MODEL);
    infer_error err;
    int round;
    for (round = 0; round < 2; round++) {
        infer_context *c = ctx(m, 32, 1, round ? INFER_FULL_POLICY_SHIFT : INFER_FULL_POLICY_STOP, 1);
        infer_request_params p = req_params("Once upon a time", 100, 0);
        infer_request *r;
        int n_prompt, n_gen;
        char *t;
        p.sampling.temperature = 0.8f; /* no end of generation that early */
        r = infer_request_start(c, &p, &err);
        cr_assert(r, "%s", err.msg);
        while (infer_context_step(c, 1.0) > 0) {}
        n_prompt = sc_request_prompt_tokens(r, NULL, 0);
        n_gen = sc_request_tokens(r, NULL, 0);
        t = text_of(r);
        if (!round) {
            cr_assert_eq(infer_request_status(r, &err), INFER_ERR_CONTEXT_FULL, "status %d", infer_request_status(r, NULL));
            cr_assert(strstr(err.msg, "context is full"), "%s", err.msg);
            /* every position used, one more token sampled (its text kept) */
            cr_assert_eq(n_gen, 32 - n_prompt + 1, "%d prompt + %d generated in 32", n_prompt, n_gen);
            cr_assert_eq(infer_seq_n_past(c, 0), 32);
            cr_assert_gt(strlen(t), 10);
        } else {
            infer_token *all = (infer_token *)malloc(sizeof(infer_token) * 100);
            infer_request_tokens(r, all, 100, NULL, NULL);
            cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
            /* past n_ctx: to n_predict or an end of generation */
            cr_assert(n_gen == 100 || infer_model_is_eog(m, all[n_gen - 1]), "%d tokens", n_gen);
            cr_assert_gt(n_prompt + n_gen, 32, "%d + %d tokens in 32 positions", n_prompt, n_gen);
            cr_assert_leq(infer_seq_n_past(c, 0), 32);
            free(all);
        }
        free(t);
        infer_request_free(r);
        infer_context_free(c);
    }
    /* infer_generate says so too */
    {
        infer_context *c = ctx(m, 8, 1, INFER_FULL_POLICY_STOP, 1);
        infer_sampler_params sp = greedy();
        infer_sampler *s = infer_sampler_new(&sp, infer_model_n_vocab(m), NULL);
        sink out;
        memset(&out, 0, sizeof out);
        cr_assert_eq(infer_generate(c, s, "Once", 20, on_piece, &out, &err), INFER_ERR_CONTEXT_FULL);
        cr_assert(strstr(err.msg, "context is full (8 positions)"), "%s", err.msg);
        cr_assert_gt(out.n, 0, "no text before the context filled");
        infer_sampler_free(s);
        infer_context_free(c);
    }
    infer_model_free(m);
}

/* logit_bias that bans every token ends the request with an error that
   says so, before any banned token is generated */
Test(request, logit_bias_banning_every_token_is_an_error) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 64, 1, INFER_FULL_POLICY_STOP, 1);
    int n = infer_model_n_vocab(m), i;
    infer_token *ids = (infer_token *)malloc(sizeof(infer_token) * (size_t)n);
    float *bias = (float *)malloc(sizeof(float) * (size_t)n);
    infer_request_params p = req_params("Once upon a time", 10, 0);
    infer_request *r;
    infer_error err;
    for (i = 0; i < n; i++) ids[i] = i, bias[i] = -INFINITY;
    p.bias_ids = ids, p.bias = bias, p.n_bias = n;
    r = infer_request_start(c, &p, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 1.0) > 0) {}
    cr_assert_eq(infer_request_status(r, &err), INFER_ERR_ARG, "status %d", infer_request_status(r, NULL));
    cr_assert(strstr(err.msg, "logit_bias bans every token"), "%s", err.msg);
    cr_assert_eq(sc_request_tokens(r, NULL, 0), 0, "%d banned tokens generated", sc_request_tokens(r, NULL, 0));
    infer_request_free(r);
    free(ids);
    free(bias);
    infer_context_free(c);
    infer_model_free(m);
}

/* ---- output control --------------------------------------------------------- */

Test(request, json_schema_output_and_top_probs) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 256, 1, INFER_FULL_POLICY_STOP, 1);
    infer_request_params p = req_params("Once upon a time", 60, 0);
    infer_request *r;
    infer_error err;
    tu_json *j;
    char *t;
    int i, n;
    p.json_schema = "{\"type\":\"object\",\"properties\":{\"mood\":{\"enum\":[\"happy\",\"sad\"]},"
                    "\"n\":{\"type\":\"integer\"}},\"required\":[\"mood\",\"n\"]}";
    p.n_probs = 3;
    p.sampling.temperature = 0.7f;
    r = infer_request_start(c, &p, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 1.0) > 0) {}
    t = text_of(r);
    cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
    j = tu_json_parse(t);
    cr_assert(j && j->kind == TU_OBJ, "not a JSON object: %s", t);
    cr_assert(tu_json_get(j, "mood") && tu_json_get(j, "mood")->kind == TU_STR, "%s", t);
    cr_assert(!strcmp(tu_json_get(j, "mood")->str, "happy") || !strcmp(tu_json_get(j, "mood")->str, "sad"), "%s", t);
    tu_json_free(j);
    n = sc_request_tokens(r, NULL, 0);
    for (i = 0; i < n; i++) {
        infer_token_prob tp[3];
        int k = sc_request_top_probs(r, i, tp, 3);
        cr_assert(k >= 1 && k <= 3);
        cr_assert(tp[0].p > 0 && tp[0].p <= 1.0001f);
        if (k > 1) cr_assert_geq(tp[0].p, tp[1].p);
        {   /* the sampled token's own probability: in (0, 1], the top list's where it is there */
            infer_token tok[256];
            float own = infer_request_token_prob(r, i);
            int j;
            cr_assert(sc_request_tokens(r, tok, 256) == n);
            cr_assert(own > 0 && own <= 1.0001f, "token %d: %f", i, own);
            for (j = 0; j < k; j++)
                if (tp[j].id == tok[i]) cr_assert_float_eq(own, tp[j].p, 1e-5f);
        }
    }
    cr_assert_eq(infer_request_token_prob(r, n), -1.0f);
    free(t);
    infer_request_free(r);
    /* bad parameters are refused at start */
    p.grammar = "root ::= \"a\"";
    cr_assert_null(infer_request_start(c, &p, &err));
    cr_assert_eq(err.code, INFER_ERR_ARG);
    p.grammar = NULL, p.json_schema = NULL, p.seq = 3;
    cr_assert_null(infer_request_start(c, &p, &err));
    /* a grammar is compiled when the request begins: a bad one ends it */
    p.seq = 0, p.grammar = "root ::= (\"a\"";
    r = infer_request_start(c, &p, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 0) > 0) {}
    cr_assert(infer_request_done(r));
    cr_assert_neq(infer_request_status(r, &err), INFER_OK);
    cr_assert(strstr(err.msg, "grammar"), "%s", err.msg);
    infer_request_free(r);
    infer_context_free(c);
    infer_model_free(m);
}

/* A request with a lazy grammar (grammar_triggers) on c; its text. */
static char *lazy_text(infer_context *c, const char *grammar, const char *trigger) {
    infer_request_params p = req_params("Once upon a time", 40, 0);
    infer_request *r;
    char *t;
    const char *triggers[1];
    triggers[0] = trigger;
    p.n_past = 0;
    p.grammar = grammar;
    p.grammar_triggers = trigger ? triggers : NULL;
    p.n_grammar_triggers = trigger ? 1 : 0;
    t = run_request(c, &p, &r);
    infer_request_free(r);
    return t;
}

Test(request, lazy_grammar_waits_for_its_trigger) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 256, 1, INFER_FULL_POLICY_STOP, 1);
    sink free_text;
    char trigger[64], grammar[256], start[80], *t, *word;
    size_t at, wl;
    generate_text(m, "Once upon a time", 40, &free_text);
    /* the trigger: the free reply's third word, with its space */
    word = free_text.buf;
    for (at = 0; at < 3; at++) {
        word = strchr(word + 1, ' ');
        cr_assert(word, "a reply of fewer than four words: %s", free_text.buf);
    }
    for (wl = 1; word[wl] && word[wl] != ' ' && isalpha((unsigned char)word[wl]); wl++) {}
    cr_assert(wl > 1 && wl < 40, "%s", free_text.buf);
    memcpy(trigger, word, wl);
    trigger[wl] = 0;
    at = (size_t)(word - free_text.buf);
    snprintf(grammar, sizeof grammar, "root ::= \"%s\" [a-z,.]{0,3} \" and the end\"", trigger);
    /* free text up to the trigger, then the grammar's */
    t = lazy_text(c, grammar, trigger);
    cr_assert_eq(strncmp(t, free_text.buf, at), 0, "the text before the trigger changed:\n%s\n%s", t, free_text.buf);
    cr_assert_eq(strncmp(t + at, trigger, wl), 0, "%s", t);
    cr_assert(strlen(t) > at + wl + 12 && !strcmp(t + strlen(t) - 12, " and the end"), "%s", t);
    free(t);
    /* the same grammar from the start: its text from the first byte */
    t = lazy_text(c, grammar, NULL);
    cr_assert_eq(strncmp(t, trigger, wl), 0, "%s", t);
    free(t);
    /* "^": only at the reply's start, where the trigger is not: free */
    snprintf(start, sizeof start, "^%s", trigger);
    t = lazy_text(c, grammar, start);
    cr_assert_str_eq(t, free_text.buf);
    free(t);
    /* ... and where it is: the grammar from the start */
    snprintf(start, sizeof start, "^%.*s", (int)strcspn(free_text.buf + 1, " ") + 1, free_text.buf);
    snprintf(grammar, sizeof grammar, "root ::= \"%s\" \" the end\"", start + 1);
    t = lazy_text(c, grammar, start);
    cr_assert(!strncmp(t, start + 1, strlen(start + 1)) && strstr(t, " the end"), "%s", t);
    free(t);
    /* a grammar that refuses the trigger's text is dropped: free text */
    t = lazy_text(c, "root ::= \"zzz\"", trigger);
    cr_assert_str_eq(t, free_text.buf);
    free(t);
    infer_context_free(c);
    infer_model_free(m);
}

Test(request, copy_to_shares_one_prefill) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 512, 3, INFER_FULL_POLICY_STOP, 1);
    infer_request_params p = req_params(story, 0, 0);
    infer_request *r, *rs[3];
    infer_error err;
    sink want;
    int to[2] = {1, 2}, bad[1] = {0}, i, n_prompt;
    infer_token toks[1024];
    char *t;
    n_prompt = full_tokens(m, story, toks, 1024);
    p.n_past = 0;
    p.copy_to = bad, p.n_copy_to = 1; /* its own sequence: refused */
    cr_assert_null(infer_request_start(c, &p, &err));
    p.copy_to = to, p.n_copy_to = 2;
    t = run_request(c, &p, &r);
    free(t);
    infer_request_free(r);
    for (i = 0; i < 3; i++) cr_assert_eq(infer_seq_n_past(c, i), n_prompt, "sequence %d", i);
    generate_text(m, story, 20, &want);
    for (i = 0; i < 3; i++) {
        infer_request_params q = req_params(story, 20, i);
        q.n_past = 0;
        rs[i] = infer_request_start(c, &q, &err);
        cr_assert(rs[i], "%s", err.msg);
    }
    while (infer_context_step(c, 5.0) > 0) {}
    for (i = 0; i < 3; i++) {
        t = text_of(rs[i]);
        cr_assert_eq(infer_request_cached_tokens(rs[i]), n_prompt - 1, "sequence %d fed its prompt again", i);
        cr_assert_str_eq(t, want.buf, "sequence %d", i);
        free(t);
        infer_request_free(rs[i]);
    }
    infer_context_free(c);
    infer_model_free(m);
}

/* A request with a thinking budget on c; its text. */
static char *budget_text(infer_context *c, int budget, int open, const char *end) {
    infer_request_params p = req_params("Once upon a time", 30, 0);
    infer_request *r;
    char *t;
    p.n_past = 0;
    p.reasoning_budget = budget;
    p.reasoning_open = open;
    p.reasoning_end = end;
    t = run_request(c, &p, &r);
    infer_request_free(r);
    return t;
}

Test(request, thinking_budget_closes_the_reasoning) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 256, 1, INFER_FULL_POLICY_STOP, 1);
    sink free_text;
    infer_request_params p = req_params("Once upon a time", 5, 0);
    infer_request *r;
    char *five, *t, first[32];
    generate_text(m, "Once upon a time", 30, &free_text);
    p.n_past = 0;
    five = run_request(c, &p, &r); /* the first 5 tokens' text */
    infer_request_free(r);
    /* opened by the prompt: after 5 tokens, the end is written */
    t = budget_text(c, 5, 1, NULL);
    cr_assert(!strncmp(t, five, strlen(five)) && !strncmp(t + strlen(five), "\n</think>\n\n", strlen("\n</think>\n\n")),
              "%s\n(the first five tokens: %s)", t, five);
    free(t);
    t = budget_text(c, 5, 1, "[END]"); /* another end */
    cr_assert(!strncmp(t + strlen(five), "\n[END]\n\n", strlen("\n[END]\n\n")), "%s", t);
    free(t);
    /* not opened (the reply does not begin with <think>): free */
    t = budget_text(c, 5, 0, NULL);
    cr_assert_str_eq(t, free_text.buf);
    free(t);
    /* closed before the budget ran out (its end is the reply's first word): free */
    snprintf(first, sizeof first, "%.*s", (int)strcspn(free_text.buf + 1, " ,.") + 1, free_text.buf);
    t = budget_text(c, 25, 1, first);
    cr_assert_str_eq(t, free_text.buf, "end '%s'", first);
    free(t);
    free(five);
    infer_context_free(c);
    infer_model_free(m);
}

/* ---- the CLI ------------------------------------------------------------------ */

Test(request, cli_says_when_the_context_is_full) {
    char path[1024], cmd[2048], *out, *errs;
    int status;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to run the CLI on");
    tu_shared_path(path, sizeof path, MODEL);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p Once -c 8 -n 20 --temp 0 2>/dev/null", INFER_CLI_PATH, path);
    out = tu_run(cmd, &status);
    cr_assert(out && strlen(out) > 5, "no text before the context filled: '%s'", out ? out : "");
    cr_assert_neq(status, 0);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p Once -c 8 -n 20 --temp 0 2>&1 >/dev/null", INFER_CLI_PATH, path);
    errs = tu_run(cmd, &status);
    cr_assert(errs);
    cr_assert(status > 0 && status < 128, "status %d", status);
    cr_assert(strstr(errs, "the context is full (8 positions)"), "stderr: %s", errs);
    cr_assert_eq(strchr(errs, '\n'), errs + strlen(errs) - 1, "stderr is not one line: %s", errs);
    free(out);
    free(errs);
    /* with --context-shift it goes on to -n; --stop ends it early */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p Once -c 8 -n 20 --temp 0 --context-shift --json 2>/dev/null",
             INFER_CLI_PATH, path);
    out = tu_run(cmd, &status);
    cr_assert_eq(status, 0, "%s", out);
    {
        tu_json *j = tu_json_parse(out);
        cr_assert(j && tu_json_get(j, "tokens"), "%s", out);
        cr_assert_eq(tu_json_get(j, "tokens")->n, 20, "%s", out);
        tu_json_free(j);
    }
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' -n 60 --temp 0 --stop Lily 2>/dev/null",
             INFER_CLI_PATH, path);
    out = tu_run(cmd, &status);
    cr_assert_eq(status, 0);
    cr_assert(!strstr(out, "Lily") && strlen(out) > 10, "%s", out);
    free(out);
}

Test(request, cli_output_control) {
    char path[1024], cmd[4096], *out;
    int status;
    tu_json *j;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to run the CLI on");
    tu_shared_path(path, sizeof path, MODEL);
    /* --json-schema: the text is JSON the schema allows */
    snprintf(cmd, sizeof cmd,
             "'%s' run -m '%s' -p Once -n 60 --seed 3 --json-schema "
             "'{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}' 2>/dev/null",
             INFER_CLI_PATH, path);
    out = tu_run(cmd, &status);
    cr_assert_eq(status, 0, "%s", out);
    j = tu_json_parse(out);
    cr_assert(j && j->kind == TU_OBJ && tu_json_get(j, "n") && tu_json_get(j, "n")->kind == TU_NUM, "%s", out);
    tu_json_free(j);
    free(out);
    /* --n-probs with --json: per token, most probable first, the chosen one among them (greedy) */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' -n 6 --temp 0 --n-probs 3 --json 2>/dev/null",
             INFER_CLI_PATH, path);
    out = tu_run(cmd, &status);
    cr_assert_eq(status, 0, "%s", out);
    j = tu_json_parse(out);
    cr_assert(j && tu_json_get(j, "probs") && tu_json_get(j, "tokens"), "%s", out);
    {
        const tu_json *pr = tu_json_get(j, "probs"), *tk = tu_json_get(j, "tokens");
        int i;
        cr_assert_eq(pr->n, tk->n);
        for (i = 0; i < pr->n; i++) {
            const tu_json *row = &pr->items[i];
            cr_assert(row->n >= 1 && row->n <= 3);
            cr_assert_eq((int)tu_json_get(&row->items[0], "id")->num, (int)tk->items[i].num,
                         "greedy token %d is not the most probable", i);
            if (row->n > 1) cr_assert_geq(tu_json_get(&row->items[0], "p")->num, tu_json_get(&row->items[1], "p")->num);
        }
    }
    tu_json_free(j);
    free(out);
    /* bad output flags: one line each */
    {
        static const char *bad[] = {"--grammar 'root ::= ('", "--grammar 'root ::= \"a\"' --json-schema '{}'",
                                     "--logit-bias 99999+1", "--logit-bias 5", "--json-schema '{\"type\":'",
                                     "--n-probs -1", "--stop ''", "--keep -2", "--grammar-file /nonexistent.gbnf"};
        size_t k;
        for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            char *err;
            snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p Once -n 4 %s 2>&1 >/dev/null", INFER_CLI_PATH, path, bad[k]);
            err = tu_run(cmd, &status);
            cr_assert(status > 0 && status < 128, "%s: status %d", bad[k], status);
            cr_assert(err && strlen(err) > 2 && strchr(err, '\n') == err + strlen(err) - 1, "%s: stderr '%s'", bad[k],
                      err ? err : "");
            free(err);
        }
    }
    /* chat: --stop ends each reply before it */
    snprintf(cmd, sizeof cmd, "printf 'Hello\\nAgain\\n' | '%s' chat -m '%s' -n 30 --temp 0 --stop e 2>/dev/null",
             INFER_CLI_PATH, path);
    out = tu_run(cmd, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(!strchr(out, 'e'), "a reply went past its stop string: %s", out);
    free(out);
}
