/* bench_state - restoring a saved sequence against decoding its prompt:
   a prompt of P tokens is decoded, saved (to memory and a file), then
   restored into a fresh context; each timed over several runs, and the
   restored context's next logits checked to be the original's.
       bench_state MODEL [P=1000] [THREADS=2] [RUNS=5] */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"
#include "../examples/os.h"

static double now_ms(void) { return os_now_ms(); }

static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    int i;
    for (i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : NULL, *file = "/tmp/bench_state.bin";
    int n = argc > 2 ? atoi(argv[2]) : 1000, threads = argc > 3 ? atoi(argv[3]) : 2, runs = argc > 4 ? atoi(argv[4]) : 5;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_model *m;
    infer_context *a, *b;
    infer_token *toks, next = 1;
    double dec[32], mem[32], fil[32], md, sd, mm, sm, mf, sf;
    size_t size;
    void *buf;
    int i, r, nv, same;
    if (!path || n < 2 || runs < 1 || runs > 32) {
        fprintf(stderr, "usage: bench_state MODEL [P=1000] [THREADS=2] [RUNS=5]\n");
        return 2;
    }
    m = infer_model_load(path, NULL, &err);
    if (!m) {
        fprintf(stderr, "bench_state: %s\n", err.msg);
        return 1;
    }
    nv = infer_model_n_vocab(m);
    cp.n_ctx = n + 8, cp.n_threads = threads;
    a = infer_context_new(m, &cp, &err);
    b = a ? infer_context_new(m, &cp, &err) : NULL;
    toks = (infer_token *)malloc(sizeof *toks * (size_t)n);
    if (!a || !b || !toks) {
        fprintf(stderr, "bench_state: %s\n", err.msg);
        return 1;
    }
    srand(3);
    for (i = 0; i < n; i++) toks[i] = rand() % nv;
    for (r = 0; r < runs; r++) {
        double t0 = now_ms();
        infer_seq_truncate(a, 0, 0, NULL, NULL);
        if (infer_decode(a, toks, n, 0, &err)) {
            fprintf(stderr, "bench_state: %s\n", err.msg);
            return 1;
        }
        dec[r] = now_ms() - t0;
    }
    size = infer_seq_state_size(a, 0);
    buf = malloc(size);
    if (!buf || infer_seq_state_save(a, 0, buf, size) != size || infer_seq_state_save_file(a, 0, file, &err)) {
        fprintf(stderr, "bench_state: saving failed\n");
        return 1;
    }
    for (r = 0; r < runs; r++) {
        double t0 = now_ms();
        if (infer_seq_state_load(b, 0, buf, size, &err)) {
            fprintf(stderr, "bench_state: %s\n", err.msg);
            return 1;
        }
        mem[r] = now_ms() - t0;
        t0 = now_ms();
        if (infer_seq_state_load_file(b, 0, file, &err)) {
            fprintf(stderr, "bench_state: %s\n", err.msg);
            return 1;
        }
        fil[r] = now_ms() - t0;
    }
    infer_decode(a, &next, 1, 0, &err);
    infer_decode(b, &next, 1, 0, &err);
    same = !memcmp(infer_context_logits(a, -1), infer_context_logits(b, -1), sizeof(float) * nv);
    mean_sd(dec, runs, &md, &sd);
    mean_sd(mem, runs, &mm, &sm);
    mean_sd(fil, runs, &mf, &sf);
    printf("%s, %d tokens, %d threads, state %.1f MiB\n", path, n, threads, size / 1048576.0);
    printf("decode the prompt   %9.2f +/- %.2f ms\n", md, sd);
    printf("restore from memory %9.2f +/- %.2f ms  (%.0fx faster)\n", mm, sm, md / mm);
    printf("restore from a file %9.2f +/- %.2f ms  (%.0fx faster)\n", mf, sf, md / mf);
    printf("next logits after the restore: %s\n", same ? "identical" : "DIFFERENT");
    remove(file);
    free(buf);
    free(toks);
    infer_context_free(a);
    infer_context_free(b);
    infer_model_free(m);
    return same ? 0 : 1;
}
