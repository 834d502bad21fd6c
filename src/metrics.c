/* metrics.c - what a context records: its timings, its memory and the tokens of its last generation. */
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

INFERDEF size_t infer_context_kv_read_bytes(const infer_context *c, int pos) {
    size_t total = 0;
    int l;
    if (!c || pos < 0) return 0;
    for (l = 0; l < c->model->n_layers; l++) {
        int w = c->model->layers[l].window, seen = pos + 1;
        if (w && seen > w) seen = w;
        total += 2 * (size_t)seen * c->kv.k_row;
    }
    return total;
}

INFERDEF const infer_token *infer_context_prompt_tokens(const infer_context *c, int *n) {
    if (n) *n = (int)stbds_arrlen(c->prompt_tokens);
    return c->prompt_tokens;
}

INFERDEF const infer_token *infer_context_generated_tokens(const infer_context *c, int *n) {
    if (n) *n = (int)stbds_arrlen(c->gen_tokens);
    return c->gen_tokens;
}
