/* infer perplexity -m MODEL -f FILE [-c CTX] [-t THREADS] [--chunks N]
   Perplexity of a text as llama.cpp's perplexity tool computes it: the
   whole file tokenized (BOS as the model adds it), split into consecutive
   chunks of CTX tokens (default 512), each evaluated from an empty cache
   with BOS in its first place and scored on its second half. Prints the
   running estimate after each chunk as "[i]value," and then
   "Final estimate: PPL = X +/- Y" on stdout; progress goes to stderr. */
#define _XOPEN_SOURCE 700 /* open, fstat (cli.h reads only regular files) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function" /* cli.h's parsers this command does not use */
#endif
#include "cli.h"

/* The cap on perplexity's text, above cli.h's 64 MiB for other texts:
   whole corpora are scored (wikitext-103's test set is 1.3 MB, its
   training set 540 MB), but not without limit. */
#define PPL_TEXT_FILE_MAX ((size_t)1 << 30)

int infer_cmd_perplexity(int argc, char **argv);

static int ppl_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

int infer_cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    int n_ctx = 512, threads = 2, max_chunks = -1, i, n_tok, n_chunk;
    infer_model_params mp = infer_model_default_params();
    infer_error err;
    infer_model *m = NULL;
    infer_context *c = NULL;
    infer_context_params cp = infer_context_default_params();
    infer_token *toks = NULL;
    infer_perplexity acc;
    char *text = NULL;
    size_t len = 0;
    double ppl, unc;
    int rc = 1;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (cli_flag_check(argc, argv, i, CLI_CMD_PERPLEXITY) < 0) return 1;
        if (cli_is_help(a)) {
            printf("usage: infer perplexity -m MODEL -f FILE [options]\n");
            cli_print_options(stdout, CLI_CMD_PERPLEXITY);
            return 0;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) ok = ppl_int(v, 4, 1 << 20, &n_ctx);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = ppl_int(v, 1, 256, &threads);
        else if (!strcmp(a, "--kv-type")) {
            if (!cli_kv_type(v, &cp.kv_type)) return 1;
        } else if (!strcmp(a, "--device")) {
            int d = infer_device_from_name(v);
            ok = d >= 0;
            mp.device = ok ? (infer_device)d : mp.device;
        } else ok = ppl_int(v, 1, 1 << 30, &max_chunks);
        if (!ok) {
            fprintf(stderr, "infer: bad value '%s' for %s%s\n", v, a, strcmp(a, "--device") ? "" : " (cpu, cuda or auto)");
            return 1;
        }
        i++;
    }
    if (!model) {
        fprintf(stderr, "infer: no model given (-m MODEL)\n");
        return 1;
    }
    if (!file) {
        fprintf(stderr, "infer: perplexity needs a text file (-f FILE)\n");
        return 1;
    }
    text = cli_read_file(file, PPL_TEXT_FILE_MAX, "a text to score", &len);
    if (!text) return 1;
    m = infer_model_load(model, &mp, &err);
    if (!m) {
        fprintf(stderr, "infer: %s\n", err.msg);
        goto out;
    }
    if (infer_model_warning(m)) fprintf(stderr, "infer: warning: %s\n", infer_model_warning(m));
    if (infer_tokenize(m, text, len, NULL, 0, infer_model_add_bos(m), 0, &n_tok, NULL) != INFER_OK) n_tok = -1;
    toks = n_tok > 0 ? (infer_token *)malloc((size_t)n_tok * sizeof *toks) : NULL;
    if (n_tok < 0 || !toks) {
        fprintf(stderr, "infer: cannot tokenize %s\n", file);
        goto out;
    }
    infer_tokenize(m, text, len, toks, n_tok, infer_model_add_bos(m), 0, NULL, NULL);
    if (n_tok < 2 * n_ctx) {
        fprintf(stderr, "infer: %s tokenizes to %d tokens; a context of %d needs at least %d\n", file, n_tok, n_ctx,
                2 * n_ctx);
        goto out;
    }
    n_chunk = n_tok / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunk) n_chunk = max_chunks;
    cp.n_ctx = n_ctx;
    cp.n_threads = threads;
    c = infer_context_new(m, &cp, &err);
    if (!c) {
        fprintf(stderr, "infer: %s\n", err.msg);
        goto out;
    }
    fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring the last %d of each\n", n_tok, n_chunk, n_ctx,
            n_ctx - n_ctx / 2 - 1);
    memset(&acc, 0, sizeof acc);
    for (i = 0; i < n_chunk; i++) {
        clock_t t0 = clock();
        if (infer_perplexity_chunk(c, toks + (size_t)i * n_ctx, n_ctx, &acc, &err) != INFER_OK) {
            printf("\n");
            fprintf(stderr, "infer: %s\n", err.msg);
            goto out;
        }
        if (i == 0)
            fprintf(stderr, "perplexity: %.2f CPU seconds per pass\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
        printf("[%d]%.4f,", i + 1, infer_perplexity_value(&acc, NULL));
        fflush(stdout);
    }
    ppl = infer_perplexity_value(&acc, &unc);
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, unc);
    rc = 0;
out:
    free(text);
    free(toks);
    infer_context_free(c);
    infer_model_free(m);
    return rc;
}
