/* generate.c - the generation loop (prompt, then one token at a time) and
   the metrics it records. */
#include "context.h"

INFERDEF void infer_context_reset_metrics(infer_context *c) { memset(&c->metrics, 0, sizeof c->metrics); }

INFERDEF infer_metrics infer_context_metrics(const infer_context *c) {
    infer_metrics m = c->metrics;
    m.load_ms = c->model->load_ms;
    m.model_bytes = infer_model_weight_bytes(c->model);
    m.context_bytes = c->bytes;
    m.peak_rss_bytes = infer__peak_rss_bytes();
    m.prompt_tps = m.prompt_ms > 0 ? m.n_prompt_tokens * 1000.0 / m.prompt_ms : 0;
    m.gen_tps = m.gen_ms > 0 ? m.n_gen_intervals * 1000.0 / m.gen_ms : 0;
    m.token_ms_avg = m.n_gen_intervals ? m.gen_ms / m.n_gen_intervals : 0;
    return m;
}

INFERDEF const infer_token *infer_context_prompt_tokens(const infer_context *c, int *n) {
    if (n) *n = (int)stbds_arrlen(c->prompt_tokens);
    return c->prompt_tokens;
}

INFERDEF const infer_token *infer_context_generated_tokens(const infer_context *c, int *n) {
    if (n) *n = (int)stbds_arrlen(c->gen_tokens);
    return c->gen_tokens;
}

/* Records the time between two generated tokens. */
static void infer__metrics_token(infer_metrics *m, double ms) {
    if (m->n_gen_intervals == 0 || ms < m->token_ms_min) m->token_ms_min = ms;
    if (ms > m->token_ms_max) m->token_ms_max = ms;
    m->n_gen_intervals++;
    m->gen_ms += ms;
}

INFERDEF infer_status infer_generate(infer_context *c, infer_sampler *s, const char *prompt, int n_predict,
                                     infer_piece_fn on_piece, void *user, infer_error *err) {
    const infer_model *m = c->model;
    infer_detok detok;
    infer_status st;
    char piece[256];
    double t0, t1, t_prev;
    int n, i;
    memset(&detok, 0, sizeof detok);
    stbds_arrsetlen(c->prompt_tokens, 0);
    stbds_arrsetlen(c->gen_tokens, 0);
    if (!prompt) prompt = "";
    n = infer_tokenize(m, prompt, strlen(prompt), NULL, 0, infer_model_add_bos(m), 1);
    if (n < 0) {
        infer__set_error(err, INFER_ERR_ARG, "the prompt could not be tokenized");
        return INFER_ERR_ARG;
    }
    if (n == 0) {
        infer__set_error(err, INFER_ERR_ARG, "the prompt is empty and the model adds no BOS token");
        return INFER_ERR_ARG;
    }
    stbds_arrsetlen(c->prompt_tokens, n);
    infer_tokenize(m, prompt, strlen(prompt), c->prompt_tokens, n, infer_model_add_bos(m), 1);
    if (n > c->n_ctx - infer_context_n_past(c)) {
        infer__set_error(err, INFER_ERR_CONTEXT_FULL, "the prompt is %d tokens but the context has room for %d", n,
                         c->n_ctx - infer_context_n_past(c));
        return INFER_ERR_CONTEXT_FULL;
    }
    for (i = 0; i < n; i++) infer_sampler_accept(s, c->prompt_tokens[i]);

    t0 = infer__now_ms();
    st = infer_decode(c, c->prompt_tokens, n, 0, err);
    if (st) return st;
    t1 = infer__now_ms();
    c->metrics.n_prompt_tokens += n;
    c->metrics.prompt_ms += t1 - t0;

    /* The first token's time is the time to first token; the generation
       figures cover the tokens after it, each timed from the one before. */
    t_prev = t1;
    /* no allocation in the token loop: room for as many as the context lets come */
    if (n_predict > 0) stbds_arrsetcap(c->gen_tokens, INFER__MIN(n_predict, c->n_ctx - infer_context_n_past(c) + 1));
    for (i = 0; i < n_predict; i++) {
        infer_token tok = infer_sampler_sample(s, infer_get_logits(c, -1));
        double tn = infer__now_ms();
        int len;
        if (i == 0) c->metrics.ttft_ms = tn - t0;
        else infer__metrics_token(&c->metrics, tn - t_prev);
        c->metrics.n_gen_tokens++;
        t_prev = tn;
        infer_sampler_accept(s, tok);
        stbds_arrput(c->gen_tokens, tok);
        if (infer_model_is_eog(m, tok)) break;
        len = infer_detok_push(&detok, m, tok, piece, sizeof piece);
        if (on_piece && len > 0 && on_piece(piece, len, user)) break;
        if (i + 1 == n_predict) break;    /* the last token needs no forward pass */
        if (infer_context_n_past(c) >= c->n_ctx) break; /* context full: stop, not fail */
        st = infer_decode(c, &tok, 1, 0, err);
        if (st) return st;
    }
    {
        int len = infer_detok_flush(&detok, piece, sizeof piece);
        if (on_piece && len > 0) on_piece(piece, len, user);
    }
    return INFER_OK;
}
