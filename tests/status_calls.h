/* status_calls.h - the converted calls as values, for tests' assertions.
   Each calls the infer_status form and gives its length or count, or -1
   where the status is not INFER_OK (what the test compares with). */
#ifndef STATUS_CALLS_H
#define STATUS_CALLS_H
#include "infer.h"

static inline int sc_token_to_piece(const infer_model *m, infer_token t, char *buf, size_t size) {
    size_t n = 0;
    return infer_token_to_piece(m, t, buf, size, &n, NULL) == INFER_OK ? (int)n : -1;
}
static inline int sc_detok_push(infer_detok *d, const infer_model *m, infer_token t, char *out, size_t size) {
    size_t n = 0;
    return infer_detok_push(d, m, t, out, size, &n, NULL) == INFER_OK ? (int)n : -1;
}
static inline int sc_detok_flush(infer_detok *d, char *out, size_t size) {
    size_t n = 0;
    return infer_detok_flush(d, out, size, &n, NULL) == INFER_OK ? (int)n : -1;
}
static inline int sc_chat_format(const infer_chat_template *t, const infer_chat_message *msgs, int n, int from,
                                 int add, char *buf, size_t size) {
    size_t len = 0;
    return infer_chat_format(t, msgs, n, from, add, buf, size, &len, NULL) == INFER_OK ? (int)len : -1;
}
static inline int sc_chat_end_of_turn(const infer_chat_template *t, char *buf, size_t size) {
    size_t len = 0;
    return infer_chat_end_of_turn(t, buf, size, &len, NULL) == INFER_OK ? (int)len : -1;
}
static inline int sc_json_schema_to_grammar(const char *schema, char *buf, size_t size, infer_error *err) {
    size_t len = 0;
    return infer_json_schema_to_grammar(schema, buf, size, &len, err) == INFER_OK ? (int)len : -1;
}
static inline int sc_tool_call_grammar(infer_tool_format f, const char *tools, const char *name, int parallel,
                                       char *buf, size_t size, infer_error *err) {
    size_t len = 0;
    return infer_tool_call_grammar(f, tools, name, parallel, buf, size, &len, err) == INFER_OK ? (int)len : -1;
}
static inline int sc_gguf_kv_to_string(const infer_gguf *g, int64_t i, char *buf, size_t size) {
    size_t len = 0;
    return infer_gguf_kv_to_string(g, i, buf, size, &len, NULL) == INFER_OK ? (int)len : -1;
}
static inline int sc_gguf_tensor(const infer_gguf *g, int64_t i, infer_tensor_info *out) {
    return infer_gguf_tensor(g, i, out, NULL) == INFER_OK;
}
static inline int sc_request_tokens(const infer_request *r, infer_token *out, int max) {
    int n = 0;
    return infer_request_tokens(r, out, max, &n, NULL) == INFER_OK ? n : -1;
}
static inline int sc_request_prompt_tokens(const infer_request *r, infer_token *out, int max) {
    int n = 0;
    return infer_request_prompt_tokens(r, out, max, &n, NULL) == INFER_OK ? n : -1;
}
static inline int sc_request_top_probs(const infer_request *r, int i, infer_token_prob *out, int n) {
    int k = 0;
    return infer_request_top_probs(r, i, out, n, &k, NULL) == INFER_OK ? k : -1;
}
static inline int sc_sampler_top_probs(const infer_sampler *s, infer_token_prob *out, int n) {
    int k = 0;
    return infer_sampler_top_probs(s, out, n, &k, NULL) == INFER_OK ? k : -1;
}
static inline int sc_seq_truncate(infer_context *c, int seq, int n) {
    int kept = 0;
    infer_seq_truncate(c, seq, n, &kept, NULL);
    return kept;
}
static inline int sc_beam_search(infer_context *c, const char *prompt, const infer_beam_params *p, infer_token *out,
                                 int max, float *score, infer_error *err) {
    int n = 0;
    return infer_beam_search(c, prompt, p, out, max, &n, score, err) == INFER_OK ? n : -1;
}
#endif
