/* abi.c - what a binding calls instead of what it cannot: params filled
   through pointers, results written into the caller's struct, the size of
   each public struct and the ABI's version, and the library's own free. */
#include "internal.h"

INFERDEF int infer_abi_version(void) { return INFER_ABI_VERSION; }

INFERDEF size_t infer_struct_size(infer_struct_id id) {
    switch (id) {
    case INFER_STRUCT_ID_ERROR: return sizeof(infer_error);
    case INFER_STRUCT_ID_MODEL_PARAMS: return sizeof(infer_model_params);
    case INFER_STRUCT_ID_CONTEXT_PARAMS: return sizeof(infer_context_params);
    case INFER_STRUCT_ID_BATCH: return sizeof(infer_batch);
    case INFER_STRUCT_ID_SAMPLER_PARAMS: return sizeof(infer_sampler_params);
    case INFER_STRUCT_ID_TOKEN_PROB: return sizeof(infer_token_prob);
    case INFER_STRUCT_ID_METRICS: return sizeof(infer_metrics);
    case INFER_STRUCT_ID_REQUEST_PARAMS: return sizeof(infer_request_params);
    case INFER_STRUCT_ID_BEAM_PARAMS: return sizeof(infer_beam_params);
    case INFER_STRUCT_ID_QUANTIZE_PARAMS: return sizeof(infer_quantize_params);
    case INFER_STRUCT_ID_CHAT_TEMPLATE: return sizeof(infer_chat_template);
    case INFER_STRUCT_ID_CHAT_MESSAGE: return sizeof(infer_chat_message);
    case INFER_STRUCT_ID_JINJA_LIMITS: return sizeof(infer_jinja_limits);
    case INFER_STRUCT_ID_DETOK: return sizeof(infer_detok);
    default: return 0;
    }
}

INFERDEF void infer_model_params_init(infer_model_params *p) {
    if (p) *p = infer_model_default_params();
}
INFERDEF void infer_context_params_init(infer_context_params *p) {
    if (p) *p = infer_context_default_params();
}
INFERDEF void infer_sampler_params_init(infer_sampler_params *p) {
    if (p) *p = infer_sampler_default_params();
}
INFERDEF void infer_request_params_init(infer_request_params *p) {
    if (p) *p = infer_request_default_params();
}
INFERDEF void infer_beam_params_init(infer_beam_params *p) {
    if (p) *p = infer_beam_default_params();
}
INFERDEF void infer_quantize_params_init(infer_quantize_params *p) {
    if (p) *p = infer_quantize_default_params();
}
INFERDEF void infer_jinja_limits_init(infer_jinja_limits *p) {
    if (p) *p = infer_jinja_default_limits();
}

/* NULL in: zeros out (a binding's handle may be closed already) */
INFERDEF void infer_context_metrics_into(const infer_context *c, infer_metrics *out) {
    if (!out) return;
    if (c) *out = infer_context_metrics(c);
    else memset(out, 0, sizeof *out);
}
INFERDEF void infer_request_metrics_into(const infer_request *r, infer_metrics *out) {
    if (!out) return;
    if (r) *out = infer_request_metrics(r);
    else memset(out, 0, sizeof *out);
}
INFERDEF void infer_chat_template_detect_into(const infer_model *m, infer_chat_template *out) {
    if (out) *out = infer_chat_template_detect(m);
}
INFERDEF void infer_chat_template_from_text_into(const char *text, const char *bos, const char *eos,
                                                 infer_chat_template *out) {
    if (out) *out = infer_chat_template_from_text(text, bos, eos);
}

INFERDEF void infer_free(void *p) {
    if (p) INFER_FREE(p);
}
