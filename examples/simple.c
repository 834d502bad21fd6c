/* simple - the smallest program that embeds infer.h: load a model, generate
   a continuation of a prompt, print it. */
#include <stdio.h>

#include "infer.h"

static int print_piece(const char *piece, int len, void *user) {
    (void)user;
    fwrite(piece, 1, (size_t)len, stdout);
    fflush(stdout);
    return 0; /* keep going */
}

int main(int argc, char **argv) {
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_sampler *s;
    infer_sampler_params sp = infer_sampler_default_params();
    if (argc < 2) {
        fprintf(stderr, "usage: simple MODEL.gguf [PROMPT]\n");
        return 1;
    }
    m = infer_model_load(argv[1], NULL, &err);
    if (!m) {
        fprintf(stderr, "simple: %s\n", err.msg);
        return 1;
    }
    c = infer_context_new(m, NULL, &err);
    if (!c) {
        fprintf(stderr, "simple: %s\n", err.msg);
        infer_model_free(m);
        return 1;
    }
    sp.temperature = 0; /* greedy */
    if (!(s = infer_sampler_new(&sp, infer_model_n_vocab(m), &err)))
        fprintf(stderr, "simple: %s\n", err.msg);
    else if (infer_generate(c, s, argc > 2 ? argv[2] : "Once upon a time", 64, print_piece, NULL, &err))
        fprintf(stderr, "simple: %s\n", err.msg);
    printf("\n");
    infer_sampler_free(s);
    infer_context_free(c);
    infer_model_free(m);
    return 0;
}
