/* bench_cancel - how soon a cancelled forward pass returns: a prompt of P
   tokens decodes on one thread while another sets a flag at a random
   moment; the time from the flag to infer_decode's INFER_ERR_CANCELLED is
   set against one layer's time (the whole prompt's over the layers).
       bench_cancel MODEL [P=512] [THREADS=2] [RUNS=10] */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"
#include "../examples/os.h"

static double now_ms(void) { return os_now_ms(); }

typedef struct flag {
    os_mutex mu;
    int set;
    double at;
} flag;

static int should_stop(void *user) {
    flag *f = (flag *)user;
    int set;
    os_mutex_lock(&f->mu);
    set = f->set;
    os_mutex_unlock(&f->mu);
    return set;
}

typedef struct canceller {
    flag *f;
    double delay_ms;
} canceller;

static void cancel_later(void *arg) {
    canceller *k = (canceller *)arg;
    os_sleep_ms(k->delay_ms);
    os_mutex_lock(&k->f->mu);
    k->f->at = now_ms();
    k->f->set = 1;
    os_mutex_unlock(&k->f->mu);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : NULL;
    int n = argc > 2 ? atoi(argv[2]) : 512, threads = argc > 3 ? atoi(argv[3]) : 2, runs = argc > 4 ? atoi(argv[4]) : 10;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_token *toks;
    double full = 0, layer_ms, worst = 0, sum = 0;
    int i, r, n_layers = 0, cancelled = 0;
    char desc[512];
    if (!path || n < 1 || threads < 1 || runs < 1) {
        fprintf(stderr, "usage: bench_cancel MODEL [P=512] [THREADS=2] [RUNS=10]\n");
        return 2;
    }
    m = infer_model_load(path, NULL, &err);
    if (!m) {
        fprintf(stderr, "bench_cancel: %s\n", err.msg);
        return 1;
    }
    infer_model_describe(m, desc, sizeof desc, NULL, NULL);
    sscanf(strstr(desc, "layers") ? strstr(desc, ", ") + 2 : "0", "%d", &n_layers);
    cp.n_ctx = n, cp.n_batch = n, cp.n_threads = threads;
    c = infer_context_new(m, &cp, &err);
    toks = (infer_token *)malloc(sizeof *toks * (size_t)n);
    if (!c || !toks) {
        fprintf(stderr, "bench_cancel: %s\n", c ? "out of memory" : err.msg);
        return 1;
    }
    srand(7);
    for (i = 0; i < n; i++) toks[i] = rand() % infer_model_n_vocab(m);
    for (r = 0; r < 3; r++) { /* the whole prompt, uncancelled: its time over the layers is a layer's */
        double t0 = now_ms();
        infer_seq_truncate(c, 0, 0, NULL, NULL);
        if (infer_decode(c, toks, n, 0, &err)) {
            fprintf(stderr, "bench_cancel: %s\n", err.msg);
            return 1;
        }
        if (r) full += (now_ms() - t0) / 2;
    }
    layer_ms = full / n_layers;
    for (r = 0; r < runs; r++) {
        flag f;
        canceller k;
        os_thread th;
        double done;
        infer_status st;
        os_mutex_init(&f.mu);
        f.set = 0, f.at = 0;
        k.f = &f;
        k.delay_ms = full * (0.1 + 0.8 * rand() / (double)RAND_MAX);
        infer_seq_truncate(c, 0, 0, NULL, NULL);
        infer_context_set_abort(c, should_stop, &f);
        if (!os_thread_start(&th, cancel_later, &k)) {
            fprintf(stderr, "bench_cancel: cannot start a thread\n");
            return 1;
        }
        st = infer_decode(c, toks, n, 0, &err);
        done = now_ms();
        os_thread_join(th);
        os_mutex_destroy(&f.mu);
        if (st == INFER_ERR_CANCELLED) {
            double lat = done - f.at;
            cancelled++;
            sum += lat;
            if (lat > worst) worst = lat;
            if (infer_seq_n_past(c, 0) != 0) {
                fprintf(stderr, "bench_cancel: the cancelled pass advanced the context\n");
                return 1;
            }
        }
    }
    printf("%s: %d layers; prompt of %d tokens on %d threads: %.1f ms, one layer %.2f ms\n", path, n_layers, n, threads,
           full, layer_ms);
    printf("cancelled %d of %d runs: from the flag to the return, mean %.2f ms, max %.2f ms (%.2f layers)\n", cancelled,
           runs, cancelled ? sum / cancelled : 0, worst, worst / layer_ms);
    free(toks);
    infer_context_free(c);
    infer_model_free(m);
    return 0;
}
