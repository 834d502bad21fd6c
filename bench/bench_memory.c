/* bench_memory - what N conversations cost: the process's resident memory
   after loading a model, then after each of N contexts on it (each made
   and fed a prompt and 32 generated tokens), with the library's own
   count of the weights and of each context.
       bench_memory MODEL [N=4] [N_CTX=2048] [THREADS=2] */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"

/* VmRSS from /proc/self/status, in MiB (0 where there is none). */
static double rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atof(line + 6);
    fclose(f);
    return kb / 1024;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : NULL, *prompt = "Once upon a time, in a small village by the sea,";
    int n = argc > 2 ? atoi(argv[2]) : 4, n_ctx = argc > 3 ? atoi(argv[3]) : 2048, threads = argc > 4 ? atoi(argv[4]) : 2;
    infer_context_params cp = infer_context_default_params();
    infer_context *c[64];
    infer_error err;
    infer_model *m;
    infer_token toks[256];
    int i, j, nt;
    if (!path || n < 1 || n > 64) {
        fprintf(stderr, "usage: bench_memory MODEL [N=4] [N_CTX=2048] [THREADS=2]\n");
        return 2;
    }
    printf("start: RSS %.1f MiB\n", rss_mib());
    m = infer_model_load(path, NULL, &err);
    if (!m) {
        fprintf(stderr, "bench_memory: %s\n", err.msg);
        return 1;
    }
    printf("model loaded (%.1f MiB of weights in the file): RSS %.1f MiB\n", infer_model_weight_bytes(m) / 1048576.0,
           rss_mib());
    cp.n_ctx = n_ctx, cp.n_threads = threads;
    if (infer_tokenize(m, prompt, strlen(prompt), toks, 256, infer_model_add_bos(m), 0, &nt, NULL) != INFER_OK) nt = -1;
    for (i = 0; i < n; i++) {
        infer_token t;
        c[i] = infer_context_new(m, &cp, &err);
        if (!c[i] || infer_decode(c[i], toks, nt, 0, &err)) {
            fprintf(stderr, "bench_memory: %s\n", err.msg);
            return 1;
        }
        for (j = 0; j < 32; j++) {
            const float *lg = infer_context_logits(c[i], -1);
            int k, best = 0;
            for (k = 1; k < infer_model_n_vocab(m); k++)
                if (lg[k] > lg[best]) best = k;
            t = best;
            if (infer_decode(c[i], &t, 1, 0, &err)) return 1;
        }
        printf("%d context%s of %d positions (each holds %.1f MiB, its cache and scratch): RSS %.1f MiB\n", i + 1,
               i ? "s" : "", n_ctx, infer_context_metrics(c[i]).context_bytes / 1048576.0, rss_mib());
    }
    for (i = 0; i < n; i++) infer_context_free(c[i]);
    infer_model_free(m);
    return 0;
}
