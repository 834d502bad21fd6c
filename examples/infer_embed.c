/* infer embed -m MODEL (-p TEXT | -f FILE) [--pooling mean|last|first]
   [--no-normalize] [-o json|text] [-t THREADS] [-c CTX]
   Prints the embedding of each text (the -p text, or each line of FILE):
   by default mean-pooled and of unit length, as JSON in the shape of
   OpenAI's embeddings list, or one line of numbers per text.
   Every line of FILE is embedded, empty ones too (as llama.cpp's embedding
   example does), so output i is always line i + 1: an empty line gets the
   embedding of the empty text (its BOS token), and where the model adds no
   BOS token that is an error naming the line, never a line skipped. */
#define _XOPEN_SOURCE 700 /* open, fstat (cli.h reads only regular files) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function" /* cli.h's parsers this command does not use */
#endif
#include "cli.h"

int infer_cmd_embed(int argc, char **argv);

int infer_cmd_embed(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL, *out = "json";
    infer_pooling pool = INFER_POOLING_MEAN;
    int normalize = 1, i, n_texts = 0, rc = 1, dim;
    infer_model_params mp = infer_model_default_params();
    infer_context_params cp = infer_context_default_params();
    infer_model *m = NULL;
    infer_context *c = NULL;
    infer_error err;
    char *buf = NULL, *line, *next;
    float *e = NULL;
    cp.n_threads = 2;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = cli_flag_check(argc, argv, i, CLI_CMD_EMBED);
        if (takes < 0) return 1;
        if (cli_is_help(a)) {
            printf("usage: infer embed -m MODEL (-p TEXT | -f FILE) [options]\n");
            cli_print_options(stdout, CLI_CMD_EMBED);
            return 0;
        }
        if (!takes) { /* --no-normalize */
            normalize = 0;
            continue;
        }
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-p")) text = v;
        else if (!strcmp(a, "-f")) file = v;
        else if (!strcmp(a, "-o")) {
            if (strcmp(v, "json") && strcmp(v, "text")) return cli_fail("bad value '%s' for -o (json or text)", v);
            out = v;
        } else if (!strcmp(a, "--pooling")) {
            if (!strcmp(v, "mean")) pool = INFER_POOLING_MEAN;
            else if (!strcmp(v, "last")) pool = INFER_POOLING_LAST;
            else if (!strcmp(v, "first") || !strcmp(v, "cls")) pool = INFER_POOLING_FIRST;
            else return cli_fail("bad value '%s' for --pooling (mean, last or first)", v);
        } else if (!strcmp(a, "-t")) {
            if (!cli_int(v, &cp.n_threads) || cp.n_threads < 1 || cp.n_threads > 512) return cli_fail("bad value '%s' for -t", v);
        } else if (!strcmp(a, "-c")) {
            if (!cli_int(v, &cp.n_ctx) || cp.n_ctx < 1) return cli_fail("bad value '%s' for -c", v);
        } else if (!strcmp(a, "--device")) {
            if (!cli_device(v, &mp.device)) return 1;
        } else {
            return cli_fail("option %s is not handled (a bug)", a);
        }
        i++;
    }
    if (!model) return cli_fail("%s", "no model given (-m MODEL)");
    if (!text == !file) return cli_fail("%s", "give one of -p TEXT or -f FILE");
    if (file && !(buf = cli_read_file(file, CLI_TEXT_FILE_MAX, "a text to embed", NULL))) return 1;
    m = infer_model_load(model, &mp, &err);
    if (m) c = infer_context_new(m, &cp, &err);
    if (!m || !c) {
        fprintf(stderr, "infer: %s\n", err.msg);
        goto done;
    }
    dim = infer_model_n_embd(m);
    e = (float *)malloc(sizeof(float) * (size_t)dim);
    if (!e) goto done;
    if (!strcmp(out, "json")) printf("{\"object\": \"list\", \"model\": \"%s\", \"data\": [", model);
    for (line = buf ? (*buf ? buf : NULL) : (char *)text; line; line = next) { /* an empty file has no lines */
        int k;
        next = buf ? strchr(line, '\n') : NULL;
        if (next) *next++ = 0;
        if (next && !*next) next = NULL; /* the newline ending the file ends its last line */
        if (infer_embed(c, 0, line, pool, normalize, e, &err) != INFER_OK) {
            if (!strcmp(out, "json")) printf("]}\n");
            if (buf) fprintf(stderr, "infer: %s line %d: %s\n", file, n_texts + 1, err.msg);
            else fprintf(stderr, "infer: %s\n", err.msg);
            goto done;
        }
        if (!strcmp(out, "json")) {
            printf("%s\n  {\"object\": \"embedding\", \"index\": %d, \"embedding\": [", n_texts ? "," : "", n_texts);
            for (k = 0; k < dim; k++) printf(k ? ", %.7g" : "%.7g", e[k]);
            printf("]}");
        } else {
            for (k = 0; k < dim; k++) printf(k ? " %.7g" : "%.7g", e[k]);
            printf("\n");
        }
        n_texts++;
    }
    if (!strcmp(out, "json")) printf("\n]}\n");
    if (!n_texts) {
        fprintf(stderr, "infer: %s has no text to embed\n", file);
        goto done;
    }
    rc = 0;
done:
    free(e);
    free(buf);
    infer_context_free(c);
    infer_model_free(m);
    return rc;
}
