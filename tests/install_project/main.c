/* Built outside the tree against the installed infer.h: loads a model,
   generates a few tokens greedily and prints them.
       outside MODEL
   With infer::shared (which defines INFER_SHARED) it calls the installed
   shared library instead of compiling the implementation. */
#ifndef INFER_SHARED
#define INFER_IMPLEMENTATION
#endif
#include "infer.h"
#include <stdio.h>

static int print(const char *s, int n, void *u) {
    (void)u;
    fwrite(s, 1, (size_t)n, stdout);
    return 0;
}

int main(int argc, char **argv) {
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_sampler *s;
    infer_sampler_params sp = infer_sampler_default_params();
    infer_status st;
    if (argc < 2) return 2;
    m = infer_model_load(argv[1], NULL, &err);
    if (!m) {
        fprintf(stderr, "outside: %s\n", err.msg);
        return 1;
    }
    c = infer_context_new(m, NULL, &err);
    sp.temperature = 0;
    s = c ? infer_sampler_new(&sp, infer_model_n_vocab(m), NULL) : NULL;
    st = s ? infer_generate(c, s, "Once upon a time", 8, print, NULL, &err) : INFER_ERR_NOMEM;
    printf("\n");
    infer_sampler_free(s);
    infer_context_free(c);
    infer_model_free(m);
    if (st != INFER_OK) fprintf(stderr, "outside: %s\n", err.msg);
    return st != INFER_OK;
}
