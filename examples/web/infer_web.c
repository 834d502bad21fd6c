/* infer_web.c - the C side of the WebAssembly module (examples/web/): a
   few functions exported to JavaScript (infer.js wraps them), built on
   infer.h's public API only.

   A session is one model, one context and at most one request at a time.
   Generation does not run to its end inside one call: JavaScript starts a
   request, then calls iw_step repeatedly, reading the new text after each
   step and giving its event loop a turn in between, so that a cancel (or
   anything else the worker is asked) is seen while a reply is being made.

   Every function that can fail returns 0 (or NULL) and leaves a one-line
   message for iw_error. */
#define INFER_IMPLEMENTATION
#include "infer.h"

#include <emscripten/emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct iw_session {
    infer_model *model;
    infer_context *ctx;
    void *weights;          /* the GGUF's bytes: the model borrows them */
    infer_request *req;
    size_t text_sent;       /* bytes of the reply already handed to JavaScript */
    char *text;             /* the newest piece (iw_text) */
    double metrics[8];      /* iw_metrics */
} iw_session;

static char iw_message[512];

static void iw_fail(const char *what, const char *why) {
    snprintf(iw_message, sizeof iw_message, "%s: %s", what, why && *why ? why : "failed");
}

/* The last failure's message. */
EMSCRIPTEN_KEEPALIVE const char *iw_error(void) { return iw_message; }

/* Memory for JavaScript to fill (a GGUF's bytes, strings). */
EMSCRIPTEN_KEEPALIVE void *iw_alloc(size_t size) { return malloc(size ? size : 1); }
EMSCRIPTEN_KEEPALIVE void iw_dealloc(void *p) { free(p); }

static void iw_release(iw_session *s) {
    if (s->req) infer_request_free(s->req);
    if (s->ctx) infer_context_free(s->ctx);
    if (s->model) infer_model_free(s->model);
    free(s->weights);
    free(s->text);
    free(s);
}

/* A session over the GGUF in data[0..size) (from iw_alloc; the session owns
   it from here on, also when this fails), with a cache of n_ctx positions
   (0: the model's, at most 4096) and n_threads kernel threads (1 in the
   build without threads). */
EMSCRIPTEN_KEEPALIVE iw_session *iw_load(void *data, size_t size, int n_ctx, int n_threads) {
    infer_model_params mp = infer_model_default_params();
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    iw_session *s = (iw_session *)calloc(1, sizeof *s);
    if (!s) {
        free(data);
        iw_fail("load", "out of memory");
        return NULL;
    }
    s->weights = data;
    mp.device = INFER_DEVICE_CPU;
    s->model = infer_model_load_memory(data, size, &mp, &err);
    if (!s->model) {
        iw_fail("load", err.msg);
        iw_release(s);
        return NULL;
    }
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads > 0 ? n_threads : 1;
    s->ctx = infer_context_new(s->model, &cp, &err);
    if (!s->ctx) {
        iw_fail("context", err.msg);
        iw_release(s);
        return NULL;
    }
    return s;
}

EMSCRIPTEN_KEEPALIVE void iw_free(iw_session *s) {
    if (s) iw_release(s);
}

/* One line about the model, its kernels and its cache. */
EMSCRIPTEN_KEEPALIVE const char *iw_describe(iw_session *s) {
    static char line[600];
    char desc[400];
    infer_model_describe(s->model, desc, sizeof desc, NULL, NULL);
    snprintf(line, sizeof line, "%s; kernels %s, context %d", desc, infer_context_isa(s->ctx),
             infer_context_n_ctx(s->ctx));
    return line;
}

/* The conversation msgs as the model's chat template writes it, with the
   assistant's prompt at the end: msgs is "role\x1fcontent" records
   separated by \x1e (neither byte occurs in a chat's text). The result
   stays valid until the next call. */
EMSCRIPTEN_KEEPALIVE const char *iw_chat_prompt(iw_session *s, const char *msgs) {
    static char *out;
    infer_chat_template t = infer_chat_template_detect(s->model);
    infer_chat_message *m = NULL;
    char *copy = strdup(msgs), *p = copy;
    int n = 0;
    size_t len = 0;
    if (!copy) return iw_fail("chat", "out of memory"), NULL;
    while (*p) {
        char *end = strchr(p, '\x1e'), *sep;
        infer_chat_message *grown;
        if (end) *end = 0;
        sep = strchr(p, '\x1f');
        if (!sep) {
            free(copy), free(m);
            iw_fail("chat", "a message without a role");
            return NULL;
        }
        *sep = 0;
        grown = (infer_chat_message *)realloc(m, sizeof *m * (size_t)(n + 1));
        if (!grown) {
            free(copy), free(m);
            iw_fail("chat", "out of memory");
            return NULL;
        }
        m = grown;
        m[n].role = p, m[n].content = sep + 1, n++;
        if (!end) break;
        p = end + 1;
    }
    free(out);
    out = NULL;
    if (infer_chat_format(&t, m, n, 0, 1, NULL, 0, &len, NULL) == INFER_OK && (out = (char *)malloc(len + 1)) != NULL)
        infer_chat_format(&t, m, n, 0, 1, out, len + 1, NULL, NULL);
    free(copy), free(m);
    if (!out) iw_fail("chat", "the template could not be written");
    return out;
}

/* Starts a reply to prompt (special tokens parsed; a chat's whole
   conversation, whose start the cache keeps from the last reply): up to
   n_predict tokens, greedy where temperature <= 0, constrained by a GBNF
   grammar or a JSON schema where either is non-empty. */
EMSCRIPTEN_KEEPALIVE int iw_start(iw_session *s, const char *prompt, int n_predict, float temperature, int seed,
                                  const char *grammar, const char *json_schema) {
    infer_request_params p = infer_request_default_params();
    infer_error err;
    if (s->req) {
        infer_request_free(s->req);
        s->req = NULL;
    }
    p.prompt = prompt;
    p.n_past = 0; /* afresh, the prompt's cached prefix kept (cache_prompt) */
    p.n_predict = n_predict;
    p.sampling.temperature = temperature;
    p.sampling.seed = (uint64_t)(unsigned)seed;
    if (grammar && *grammar) p.grammar = grammar;
    if (json_schema && *json_schema) p.json_schema = json_schema;
    s->req = infer_request_start(s->ctx, &p, &err);
    s->text_sent = 0;
    if (!s->req) {
        iw_fail("start", err.msg);
        return 0;
    }
    return 1;
}

/* Advances the reply for about budget_ms (at least one forward pass).
   Returns 1 while it goes on, 0 once it has ended (iw_status says how). */
EMSCRIPTEN_KEEPALIVE int iw_step(iw_session *s, double budget_ms) {
    if (!s->req) return 0;
    if (!infer_request_done(s->req)) infer_context_step(s->ctx, budget_ms);
    return !infer_request_done(s->req);
}

/* The reply's text that iw_text has not returned yet ("" when none). */
EMSCRIPTEN_KEEPALIVE const char *iw_text(iw_session *s) {
    size_t n;
    char *t;
    if (!s->req) return "";
    n = infer_request_text(s->req, s->text_sent, NULL, 0);
    t = (char *)realloc(s->text, n + 1);
    if (!t) return "";
    s->text = t;
    infer_request_text(s->req, s->text_sent, t, n + 1);
    s->text_sent += n;
    return t;
}

/* The reply's token ids so far: up to max into out; returns how many. */
EMSCRIPTEN_KEEPALIVE int iw_tokens(iw_session *s, int *out, int max) {
    int n = 0;
    if (s->req) infer_request_tokens(s->req, out, max, &n, NULL);
    return n;
}

EMSCRIPTEN_KEEPALIVE void iw_cancel(iw_session *s) {
    if (s->req) infer_request_cancel(s->req);
}

/* 0: the reply ended normally (or runs); 1: cancelled; 2: failed (iw_error). */
EMSCRIPTEN_KEEPALIVE int iw_status(iw_session *s) {
    infer_error err;
    infer_status st;
    if (!s->req) return 0;
    st = infer_request_status(s->req, &err);
    if (st == INFER_OK) return 0;
    if (st == INFER_ERR_CANCELLED) return 1;
    iw_fail("generate", err.msg);
    return 2;
}

/* The reply's figures: prompt tokens, prompt tokens/s, generated tokens,
   generated tokens/s, weights' bytes, the context's bytes. */
EMSCRIPTEN_KEEPALIVE const double *iw_metrics(iw_session *s) {
    infer_metrics m;
    memset(s->metrics, 0, sizeof s->metrics);
    if (!s->req) return s->metrics;
    m = infer_request_metrics(s->req);
    s->metrics[0] = m.n_prompt_tokens, s->metrics[1] = m.prompt_tps;
    s->metrics[2] = m.n_gen_tokens, s->metrics[3] = m.gen_tps;
    s->metrics[4] = (double)infer_model_weight_bytes(s->model);
    s->metrics[5] = (double)infer_context_metrics(s->ctx).context_bytes;
    return s->metrics;
}

/* infer bench's two figures, measured as it measures them: n_prompt
   random tokens in one batch, then n_gen tokens one at a time after a
   BOS, each from an empty cache. Returns tokens/s of one (n_prompt > 0)
   or the other, or -1 (iw_error). */
EMSCRIPTEN_KEEPALIVE double iw_bench(iw_session *s, int n_prompt, int n_gen) {
    int n = n_prompt > n_gen + 1 ? n_prompt : n_gen + 1, i, nv = infer_model_n_vocab(s->model);
    infer_token *toks = (infer_token *)malloc(sizeof *toks * (size_t)n);
    uint32_t rng = 1234;
    infer_error err;
    double t0, t1;
    if (!toks) return iw_fail("bench", "out of memory"), -1;
    if (s->req) {
        infer_request_free(s->req);
        s->req = NULL;
    }
    for (i = 0; i < n; i++) {
        rng = rng * 1664525u + 1013904223u;
        toks[i] = (infer_token)((rng >> 8) % (uint32_t)nv);
    }
    if (infer_model_bos(s->model) >= 0) toks[0] = infer_model_bos(s->model);
    infer_seq_truncate(s->ctx, 0, 0, NULL, NULL);
    if (n_prompt > 0) {
        t0 = emscripten_get_now();
        if (infer_decode(s->ctx, toks, n_prompt, 0, &err) != INFER_OK) goto fail;
        t1 = emscripten_get_now();
        free(toks);
        return n_prompt * 1000.0 / (t1 - t0);
    }
    if (infer_decode(s->ctx, toks, 1, 0, &err) != INFER_OK) goto fail;
    t0 = emscripten_get_now();
    for (i = 0; i < n_gen; i++)
        if (infer_decode(s->ctx, toks + 1 + i, 1, 0, &err) != INFER_OK) goto fail;
    t1 = emscripten_get_now();
    free(toks);
    return n_gen * 1000.0 / (t1 - t0);
fail:
    free(toks);
    iw_fail("bench", err.msg);
    return -1;
}
