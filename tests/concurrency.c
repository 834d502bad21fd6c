/* concurrency - the library under threads, as a plain program (Criterion's
   process arena does not start under ThreadSanitizer; the TSan build runs
   this, the other builds too):
   - one model shared by two contexts on two threads, generating at once,
     gives each thread the tokens it gives alone;
   - a context's kernel pool of two workers under the same load;
   - requests on a background worker of two threads, polled from one thread
     and cancelled from another, and a worker freed while requests run.
   Exit 0 when all hold, 1 with a line saying what failed, 77 (skipped)
   without ../shared.
       concurrency SHARED_DIR */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"
#include "tests/status_calls.h"
#include "../examples/os.h" /* threads on POSIX and Windows */

#define N_GEN 24

typedef struct job {
    infer_model *m;
    const char *prompt;
    int n_threads;
    infer_token out[N_GEN];
    int ok;
} job;

static infer_token argmax(const float *x, int n) {
    int best = 0, j;
    for (j = 1; j < n; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

static void generate(void *arg) {
    job *j = (job *)arg;
    infer_context_params p = infer_context_default_params();
    infer_context *c;
    infer_token toks[256];
    int n, i, nv = infer_model_n_vocab(j->m);
    p.n_ctx = 128, p.n_threads = j->n_threads;
    j->ok = 0;
    c = infer_context_new(j->m, &p, NULL);
    if (!c) return;
    if (infer_tokenize(j->m, j->prompt, strlen(j->prompt), toks, 256, 1, 0, &n, NULL) != INFER_OK) n = -1;
    j->ok = n > 0 && infer_decode(c, toks, n, 0, NULL) == INFER_OK;
    for (i = 0; i < N_GEN && j->ok; i++) {
        j->out[i] = argmax(infer_context_logits(c, -1), nv);
        j->ok = infer_decode(c, &j->out[i], 1, 0, NULL) == INFER_OK;
    }
    infer_context_free(c);
}

static int fail(const char *what) {
    fprintf(stderr, "concurrency: FAILED: %s\n", what);
    return 1;
}

/* ---- the background worker: requests polled and cancelled from other threads ---- */

#define N_REQ 4
/* the requests the poller sees, and whether it goes on: under g_mu */
static os_mutex g_mu;
static infer_request *g_req[N_REQ];
static int g_polling;

static void set_polling(int on) {
    os_mutex_lock(&g_mu);
    g_polling = on;
    os_mutex_unlock(&g_mu);
}

static void set_req(int i, infer_request *r) {
    os_mutex_lock(&g_mu);
    g_req[i] = r;
    os_mutex_unlock(&g_mu);
}

/* polls every request while g_polling; the lock is held across a poll, so
   a request is never freed under it (the test takes it to free one) */
static void poll_all(void *unused) {
    char buf[512];
    int i, on = 1;
    (void)unused;
    while (on) {
        os_mutex_lock(&g_mu);
        for (i = 0; i < N_REQ; i++) {
            infer_request *r = g_req[i];
            infer_metrics mt;
            if (!r) continue;
            infer_request_text(r, 0, buf, sizeof buf);
            infer_request_done(r);
            infer_request_tokens(r, NULL, 0, NULL, NULL);
            mt = infer_request_metrics(r);
            (void)mt;
        }
        on = g_polling;
        os_mutex_unlock(&g_mu);
    }
}

static void cancel_soon(void *r) {
    os_sleep_ms(2);
    infer_request_cancel((infer_request *)r);
}

/* Two contexts (one of three sequences) on one model, four requests on a
   worker of two threads, polled from a third thread and one cancelled from
   a fourth; the last round frees the worker while requests still run.
   Returns 0 or the failure's line. */
static const char *worker_rounds(infer_model *m) {
    infer_context_params cp = infer_context_default_params();
    infer_context *c3, *c1;
    infer_error err;
    int round, i;
    cp.n_threads = 2, cp.n_ctx = 512, cp.n_seq = 3;
    c3 = infer_context_new(m, &cp, &err);
    cp.n_seq = 1;
    c1 = infer_context_new(m, &cp, &err);
    if (!c3 || !c1) return "contexts";
    for (round = 0; round < 3; round++) {
        infer_worker *w = infer_worker_new(2, &err);
        os_thread poller, canceller;
        if (!w) return "infer_worker_new";
        set_polling(1);
        if (!os_thread_start(&poller, poll_all, NULL)) return "a thread";
        for (i = 0; i < N_REQ; i++) {
            infer_request_params p = infer_request_default_params();
            infer_request *r;
            p.prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
            p.n_predict = 24 + 16 * round;
            p.seq = i < 3 ? i : 0;
            p.n_past = 0;
            if (i == 1) p.json_schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}";
            r = infer_worker_start(w, i < 3 ? c3 : c1, &p, &err);
            if (!r) return "infer_worker_start";
            set_req(i, r);
        }
        if (!os_thread_start(&canceller, cancel_soon, g_req[2])) return "a thread";
        for (;;) { /* the last round does not wait: freeing the worker cancels */
            int done = 1;
            for (i = 0; i < N_REQ; i++) done &= infer_request_done(g_req[i]);
            if (done || round == 2) break;
            os_sleep_ms(0.5);
        }
        os_thread_join(canceller);
        infer_worker_free(w);
        set_polling(0);
        os_thread_join(poller);
        for (i = 0; i < N_REQ; i++) {
            infer_request *r = g_req[i];
            infer_error rerr;
            infer_status st = infer_request_status(r, &rerr);
            if (st != INFER_OK && st != INFER_ERR_CANCELLED)
                fprintf(stderr, "concurrency: round %d, request %d: %s\n", round, i, rerr.msg);
            if (!infer_request_done(r)) return "a request unfinished after infer_worker_free";
            if (round < 2 && i != 2 && (st != INFER_OK || sc_request_tokens(r, NULL, 0) < 1))
                return "a request the worker ran to its end failed";
            if (st != INFER_OK && st != INFER_ERR_CANCELLED) return "a request ended with an unexpected status";
            set_req(i, NULL);
            infer_request_free(r);
        }
    }
    infer_context_free(c1);
    infer_context_free(c3);
    return NULL;
}

int main(int argc, char **argv) {
    static const char *prompts[2] = {"A boy had a red kite.", "The cat slept in the sun."};
    char path[1024];
    infer_error err;
    infer_model *m;
    job solo[2], both[2];
    os_thread th[2];
    int i, pool;
    os_init_main(&argc, &argv);
    os_mutex_init(&g_mu);
    if (argc < 2) return fail("usage: concurrency SHARED_DIR");
    snprintf(path, sizeof path, "%s/models/tinystories-656k-q8_0.gguf", argv[1]);
    m = infer_model_load(path, NULL, &err);
    if (!m) {
        fprintf(stderr, "concurrency: SKIPPED: %s (../shared absent?)\n", err.msg);
        return 77;
    }
    for (pool = 1; pool <= 2; pool++) { /* a context's own pool of 1, then 2 workers */
        memset(solo, 0, sizeof solo), memset(both, 0, sizeof both);
        for (i = 0; i < 2; i++) {
            solo[i].m = both[i].m = m;
            solo[i].prompt = both[i].prompt = prompts[i];
            solo[i].n_threads = both[i].n_threads = pool;
            generate(&solo[i]);
            if (!solo[i].ok) return fail("generation alone");
        }
        for (i = 0; i < 2; i++)
            if (!os_thread_start(&th[i], generate, &both[i])) return fail("a thread could not start");
        for (i = 0; i < 2; i++) os_thread_join(th[i]);
        for (i = 0; i < 2; i++)
            if (!both[i].ok || memcmp(solo[i].out, both[i].out, sizeof solo[i].out))
                return fail("two threads on one model gave other tokens than each alone");
    }
    infer_model_free(m);
    /* stories260K: its vocabulary spells JSON (the schema request) */
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", argv[1]);
    m = infer_model_load(path, NULL, &err);
    if (!m) return fail(err.msg);
    {
        const char *why = worker_rounds(m);
        if (why) return fail(why);
    }
    infer_model_free(m);
    printf("concurrency: ok (one model, two threads, pools of 1 and 2; a worker polled and cancelled from others)\n");
    return 0;
}
