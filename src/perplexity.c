/* perplexity.c - scoring text the way llama.cpp's perplexity tool does:
   consecutive chunks of n_ctx tokens, each evaluated from an empty cache with
   BOS in its first place, scored on its second half. */
#include "context.h"

INFERDEF infer_status infer_perplexity_chunk(infer_context *c, const infer_token *tokens, int n,
                                             infer_perplexity *acc, infer_error *err) {
    const infer_model *m;
    infer_token *tok;
    infer_status st;
    int i, first, n_vocab;
    if (!c || !tokens || !acc || n < 2) {
        infer__set_error(err, INFER_ERR_ARG, "infer_perplexity_chunk needs a context and at least 2 tokens");
        return INFER_ERR_ARG;
    }
    m = c->model;
    n_vocab = m->n_vocab;
    tok = (infer_token *)INFER_MALLOC((size_t)n * sizeof *tok);
    if (!tok) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return INFER_ERR_NOMEM;
    }
    memcpy(tok, tokens, (size_t)n * sizeof *tok);
    if (infer_model_add_bos(m) && infer_model_bos(m) >= 0) tok[0] = infer_model_bos(m);
    infer_seq_truncate(c, 0, 0, NULL, NULL);
    st = infer_decode(c, tok, n, 1, err);
    first = n / 2;
    for (i = first; st == INFER_OK && i < n - 1; i++) {
        const float *l = infer_context_logits(c, i);
        float max = l[0];
        double sum = 0, v;
        int j;
        for (j = 1; j < n_vocab; j++) max = INFER__MAX(max, l[j]);
        for (j = 0; j < n_vocab; j++) sum += infer__expf(l[j] - max);
        v = -((double)(l[tok[i + 1]] - max) - infer__log(sum));
        acc->nll += v;
        acc->nll2 += v * v;
        acc->count++;
    }
    INFER_FREE(tok);
    return st;
}

INFERDEF double infer_perplexity_value(const infer_perplexity *acc, double *uncertainty) {
    double mean, var, ppl;
    if (uncertainty) *uncertainty = 0;
    if (!acc || acc->count <= 0) return 0;
    mean = acc->nll / (double)acc->count;
    ppl = infer__exp(mean);
    var = acc->nll2 / (double)acc->count - mean * mean;
    if (uncertainty && acc->count > 1 && var > 0) *uncertainty = ppl * sqrt(var / (double)(acc->count - 1));
    return ppl;
}
