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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"

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

static void *generate(void *arg) {
    job *j = (job *)arg;
    infer_context_params p = infer_context_default_params();
    infer_context *c;
    infer_token toks[256];
    int n, i, nv = infer_model_n_vocab(j->m);
    p.n_ctx = 128, p.n_threads = j->n_threads;
    j->ok = 0;
    c = infer_context_new(j->m, &p, NULL);
    if (!c) return NULL;
    n = infer_tokenize(j->m, j->prompt, strlen(j->prompt), toks, 256, 1, 0);
    j->ok = n > 0 && infer_decode(c, toks, n, 0, NULL) == INFER_OK;
    for (i = 0; i < N_GEN && j->ok; i++) {
        j->out[i] = argmax(infer_get_logits(c, -1), nv);
        j->ok = infer_decode(c, &j->out[i], 1, 0, NULL) == INFER_OK;
    }
    infer_context_free(c);
    return NULL;
}

static int fail(const char *what) {
    fprintf(stderr, "concurrency: FAILED: %s\n", what);
    return 1;
}

/* ---- the background worker: requests polled and cancelled from other threads ---- */

#define N_REQ 4
static infer_request *g_req[N_REQ];
static int g_polling;

static void *poll_all(void *unused) {
    char buf[512];
    int i;
    (void)unused;
    while (__atomic_load_n(&g_polling, __ATOMIC_ACQUIRE))
        for (i = 0; i < N_REQ; i++) {
            infer_request *r = __atomic_load_n(&g_req[i], __ATOMIC_ACQUIRE);
            if (!r) continue;
            infer_request_text(r, 0, buf, sizeof buf);
            infer_request_done(r);
            infer_request_tokens(r, NULL, 0);
            infer_request_metrics(r);
        }
    return NULL;
}

static void *cancel_soon(void *r) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    infer_request_cancel((infer_request *)r);
    return NULL;
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
        pthread_t poller, canceller;
        if (!w) return "infer_worker_new";
        __atomic_store_n(&g_polling, 1, __ATOMIC_RELEASE);
        pthread_create(&poller, NULL, poll_all, NULL);
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
            __atomic_store_n(&g_req[i], r, __ATOMIC_RELEASE);
        }
        pthread_create(&canceller, NULL, cancel_soon, g_req[2]);
        for (;;) { /* the last round does not wait: freeing the worker cancels */
            int done = 1;
            struct timespec ts = {0, 500000};
            for (i = 0; i < N_REQ; i++) done &= infer_request_done(g_req[i]);
            if (done || round == 2) break;
            nanosleep(&ts, NULL);
        }
        pthread_join(canceller, NULL);
        infer_worker_free(w);
        __atomic_store_n(&g_polling, 0, __ATOMIC_RELEASE);
        pthread_join(poller, NULL);
        for (i = 0; i < N_REQ; i++) {
            infer_request *r = g_req[i];
            infer_error rerr;
            infer_status st = infer_request_status(r, &rerr);
            if (st != INFER_OK && st != INFER_ERR_CANCELLED)
                fprintf(stderr, "concurrency: round %d, request %d: %s\n", round, i, rerr.msg);
            if (!infer_request_done(r)) return "a request unfinished after infer_worker_free";
            if (round < 2 && i != 2 && (st != INFER_OK || infer_request_tokens(r, NULL, 0) < 1))
                return "a request the worker ran to its end failed";
            if (st != INFER_OK && st != INFER_ERR_CANCELLED) return "a request ended with an unexpected status";
            __atomic_store_n(&g_req[i], NULL, __ATOMIC_RELEASE);
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
    pthread_t th[2];
    int i, pool;
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
            if (pthread_create(&th[i], NULL, generate, &both[i])) return fail("pthread_create");
        for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
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
