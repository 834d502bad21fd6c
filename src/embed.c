/* embed.c - embeddings: the final hidden state (after the output norm) of
   a text's tokens, pooled over them and scaled to unit length if asked:
   what llama.cpp's embedding mode returns for a decoder model. */
#include "context.h"

INFERDEF int infer_model_n_embd(const infer_model *m) { return m->dim; }

INFERDEF infer_status infer_embed(infer_context *c, int seq, const char *text, infer_pooling pool, int normalize,
                                  float *out, infer_error *err) {
    infer_token *toks;
    infer_status st;
    int n;
    if (!c || !text) {
        infer__set_error(err, INFER_ERR_ARG, "infer_embed: bad arguments");
        return INFER_ERR_ARG;
    }
    if ((st = infer_tokenize(c->model, text, strlen(text), NULL, 0, infer_model_add_bos(c->model), 1, &n, err)) != INFER_OK)
        return st;
    if (n <= 0) {
        infer__set_error(err, INFER_ERR_ARG, "the text is empty and the model adds no BOS token");
        return INFER_ERR_ARG;
    }
    if (n > c->n_ctx) {
        infer__set_error(err, INFER_ERR_CONTEXT_FULL, "the text is %d tokens; the context has %d positions", n, c->n_ctx);
        return INFER_ERR_CONTEXT_FULL;
    }
    if (!(toks = (infer_token *)INFER_MALLOC((size_t)n * sizeof(infer_token)))) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for an embedding of %d tokens", n);
        return INFER_ERR_NOMEM;
    }
    st = infer_tokenize(c->model, text, strlen(text), toks, n, infer_model_add_bos(c->model), 1, NULL, err);
    if (st == INFER_OK) st = infer_embed_tokens(c, seq, toks, n, pool, normalize, out, err);
    INFER_FREE(toks);
    return st;
}

INFERDEF infer_status infer_embed_tokens(infer_context *c, int seq, const infer_token *toks, int n,
                                         infer_pooling pool, int normalize, float *out, infer_error *err) {
    const infer_model *m;
    float *hidden = NULL;
    infer_status st = INFER_OK;
    int done, i, t;
    double norm = 0, *acc = NULL;
    if (!c || !toks || !out || seq < 0 || seq >= c->n_seq || (pool != INFER_POOLING_MEAN && pool != INFER_POOLING_LAST &&
                                                              pool != INFER_POOLING_FIRST)) {
        infer__set_error(err, INFER_ERR_ARG, "infer_embed: bad arguments");
        return INFER_ERR_ARG;
    }
    m = c->model;
    if (n <= 0) {
        infer__set_error(err, INFER_ERR_ARG, "there are no tokens to embed");
        return INFER_ERR_ARG;
    }
    if (n > c->n_ctx) {
        infer__set_error(err, INFER_ERR_CONTEXT_FULL, "the text is %d tokens; the context has %d positions", n, c->n_ctx);
        return INFER_ERR_CONTEXT_FULL;
    }
    for (t = 0; t < n; t++)
        if (toks[t] < 0 || toks[t] >= infer_model_n_vocab(m)) {
            infer__set_error(err, INFER_ERR_ARG, "token %d is %d, outside the vocabulary (0 to %d)", t, (int)toks[t],
                             infer_model_n_vocab(m) - 1);
            return INFER_ERR_ARG;
        }
    hidden = (float *)INFER_MALLOC((size_t)c->n_batch * m->dim * sizeof(float));
    acc = (double *)infer__calloc((size_t)m->dim, sizeof(double));
    if (!hidden || !acc) {
        st = INFER_ERR_NOMEM;
        infer__set_error(err, st, "out of memory for an embedding of %d tokens", n);
        goto done;
    }
    infer_seq_truncate(c, seq, 0, NULL, NULL);
    /* every token's hidden state, pass by pass, summed or picked */
    for (done = 0; done < n; done += c->n_batch) {
        int nb = INFER__MIN(c->n_batch, n - done);
        infer__group *G = &c->groups[0];
        G->seq = seq, G->start = 0, G->n = nb, G->pos0 = done;
        /* recurrent layers: from zeros, then on in one slot (nothing of it is kept) */
        G->rs_src = done ? c->seqs[seq].rs_cur : -1, G->rs_dst = c->seqs[seq].rs_cur;
        for (t = 0; t < nb; t++) c->pos[t] = done + t, c->sel[t] = t;
        st = infer__backend_forward(c, toks + done, nb, 1, nb, NULL, hidden, err);
        if (st != INFER_OK) {
            if (st == INFER_ERR_CANCELLED) infer__set_error(err, st, "cancelled by the abort callback");
            goto done;
        }
        c->seqs[seq].n_past = c->seqs[seq].hi = done + nb;
        for (t = 0; t < nb; t++) {
            int p = done + t;
            if (pool == INFER_POOLING_MEAN || (pool == INFER_POOLING_FIRST && p == 0) || (pool == INFER_POOLING_LAST && p == n - 1))
                for (i = 0; i < m->dim; i++) acc[i] += hidden[(size_t)t * m->dim + i];
        }
    }
    for (i = 0; i < m->dim; i++) {
        out[i] = (float)(pool == INFER_POOLING_MEAN ? acc[i] / n : acc[i]);
        norm += (double)out[i] * out[i];
    }
    if (normalize && norm > 0)
        for (i = 0; i < m->dim; i++) out[i] = (float)(out[i] / sqrt(norm));
done:
    infer_seq_truncate(c, seq, 0, NULL, NULL);
    INFER_FREE(hidden);
    INFER_FREE(acc);
    return st;
}
