/* logits_check - what a build computes, printed so that two builds (Linux
   and Windows, tests/windows_check.py) can be compared bit for bit: for
   each job, the prompt's tokens, a hash of every position's logits (the
   prompt in one decode, all logits kept) and then greedy steps one token
   at a time, each with its token and its logits' hash.
       logits_check JOBS [THREADS]
   JOBS has a line a job, fields split by tabs: the model's path, the
   greedy steps, 1 to parse special tokens (else 0), and the prompt's bytes
   in hex. The instruction set is the environment's (INFER_ISA). Prints a
   line per position; exits 1 on an error (said on stderr). Plain C and the
   public API only, so that it builds with any toolchain (MinGW here). */
#define _XOPEN_SOURCE 700 /* os.h's clock under -std=c99 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "../examples/os.h" /* UTF-8 arguments and binary output on Windows */

/* 64-bit FNV-1a of the logits' bytes: equal hashes, equal bits */
static unsigned long long hash_floats(const float *x, int n) {
    const unsigned char *b = (const unsigned char *)x;
    unsigned long long h = 0xcbf29ce484222325ull;
    size_t i;
    for (i = 0; i < (size_t)n * sizeof *x; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int argmax(const float *x, int n) {
    int best = 0, j;
    for (j = 1; j < n; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

static int hex_value(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* one job: 0, or 1 with the reason on stderr */
static int run_job(const char *model_path, int n_greedy, int special, const char *prompt, int n_threads) {
    infer_error err;
    infer_model *m = infer_model_load(model_path, NULL, &err);
    infer_context_params cp;
    infer_context *c;
    infer_token *toks, t;
    const char *name = strrchr(model_path, '/');
    int n, nv, i, rc = 1;
    if (!m) {
        /* an architecture this build refuses: printed, so that both builds
           must refuse it alike */
        printf("model %s: refused: %s\n", name ? name + 1 : model_path, err.msg);
        return 0;
    }
    nv = infer_model_n_vocab(m);
    if (infer_tokenize(m, prompt, strlen(prompt), NULL, 0, infer_model_add_bos(m), special, &n, NULL) != INFER_OK) n = -1;
    toks = (infer_token *)malloc(sizeof *toks * (size_t)(n > 0 ? n : 1));
    if (n <= 0 || !toks || infer_tokenize(m, prompt, strlen(prompt), toks, n, infer_model_add_bos(m), special, NULL, NULL) != INFER_OK) {
        fprintf(stderr, "logits_check: cannot tokenize the prompt for %s\n", model_path);
        free(toks);
        infer_model_free(m);
        return 1;
    }
    cp = infer_context_default_params();
    cp.n_ctx = n + n_greedy + 8;
    cp.n_threads = n_threads;
    c = infer_context_new(m, &cp, &err);
    if (!c) {
        fprintf(stderr, "logits_check: %s: %s\n", model_path, err.msg);
        goto done;
    }
    printf("model %s: %d tokens, %s kernels:", name ? name + 1 : model_path, n, infer_context_isa(c));
    for (i = 0; i < n; i++) printf(" %d", (int)toks[i]);
    printf("\n");
    if (infer_decode(c, toks, n, 1, &err) != INFER_OK) {
        fprintf(stderr, "logits_check: %s: %s\n", model_path, err.msg);
        goto done;
    }
    for (i = 0; i < n; i++) {
        const float *l = infer_context_logits(c, i);
        printf("prompt %d: top %d, logits %016llx\n", i, argmax(l, nv), hash_floats(l, nv));
    }
    for (i = 0; i < n_greedy; i++) {
        const float *l = infer_context_logits(c, -1);
        t = (infer_token)argmax(l, nv);
        printf("greedy %d: token %d, logits %016llx\n", i, (int)t, hash_floats(l, nv));
        if (infer_model_is_eog(m, t)) break;
        if (infer_decode(c, &t, 1, 0, &err) != INFER_OK) {
            fprintf(stderr, "logits_check: %s: %s\n", model_path, err.msg);
            goto done;
        }
    }
    rc = 0;
done:
    infer_context_free(c);
    free(toks);
    infer_model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    static char line[1 << 16];
    FILE *f;
    int threads, rc = 0;
    os_init_main(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: logits_check JOBS [THREADS]\n");
        return 2;
    }
    threads = argc > 2 ? atoi(argv[2]) : 2;
    if (!(f = os_fopen(argv[1], "rb"))) {
        fprintf(stderr, "logits_check: cannot open %s\n", argv[1]);
        return 1;
    }
    while (fgets(line, sizeof line, f)) {
        char *path = line, *steps, *special, *hex, *prompt, *p;
        size_t k = 0;
        if (!(steps = strchr(path, '\t')) || !(special = strchr(steps + 1, '\t')) || !(hex = strchr(special + 1, '\t'))) {
            fprintf(stderr, "logits_check: a job line without its four fields\n");
            rc = 1;
            break;
        }
        *steps++ = 0, *special++ = 0, *hex++ = 0;
        prompt = hex; /* decoded in place: two hex digits a byte */
        for (p = hex; hex_value(p[0]) >= 0 && hex_value(p[1]) >= 0; p += 2)
            prompt[k++] = (char)(hex_value(p[0]) * 16 + hex_value(p[1]));
        prompt[k] = 0;
        if (run_job(path, atoi(steps), atoi(special), prompt, threads)) rc = 1;
        fflush(stdout);
    }
    fclose(f);
    return rc;
}
