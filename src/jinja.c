/* jinja.c - the Jinja interpreter's API (infer_jinja_render and its limits),
   which runs the parts jinja_value.c, jinja_parse.c, jinja_builtin.c and
   jinja_eval.c: a sandboxed Jinja interpreter for chat templates, the subset of
   jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
   loopcontrols) that models' tokenizer.chat_template use, with Python's
   printing, comparison and string methods, rendering a JSON context.

   Every value of one render lives in one arena, freed at the end: an error
   anywhere longjmps back to infer_jinja_render, which frees the arena, so
   nothing leaks and no code path has to unwind by hand. The arena's total
   is the memory budget; steps (loop iterations, macro calls), nesting depth
   (parsing and evaluation, macro recursion included) and every string's
   length are bounded too, so a hostile template ends with a one-line error. */
#include "jinja.h"

/* ---- the API ------------------------------------------------------------------------------------ */

INFERDEF infer_jinja_limits infer_jinja_default_limits(void) {
    infer_jinja_limits l;
    l.max_steps = 1000000;
    l.max_depth = 256;
    l.max_output = (size_t)16 << 20;
    l.max_memory = (size_t)256 << 20;
    return l;
}

/* infer_jinja_render; raw_bytes: the context's strings may hold bytes that
   are not UTF-8 (kept as they are) */
static char *infer__jj_render(const char *template_text, const char *context_json, const infer_jinja_limits *limits,
                              int raw_bytes, int *raised, infer_error *err) {
    infer__jj_r *r;
    char *volatile result = NULL; /* set between setjmp and a longjmp */
    if (raised) *raised = 0;
    if (!template_text) {
        infer__set_error(err, INFER_ERR_ARG, "no template");
        return NULL;
    }
    r = (infer__jj_r *)infer__calloc(1, sizeof *r);
    if (!r) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    r->lim = limits ? *limits : infer_jinja_default_limits();
    if (r->lim.max_steps <= 0 || r->lim.max_depth <= 0 || !r->lim.max_output || !r->lim.max_memory) {
        INFER_FREE(r);
        infer__set_error(err, INFER_ERR_ARG, "jinja limits must be positive");
        return NULL;
    }
    if (!setjmp(r->fail)) {
        infer__jj_lex L;
        infer__jj_parser P;
        infer__jj_node *body;
        infer__jj_buf out = {0, 0, 0};
        infer__jj_val ctx;
        size_t i;
        memset(&L, 0, sizeof L);
        L.r = r;
        infer__jj_tokenize(&L, template_text);
        P.r = r;
        P.t = L.toks;
        P.depth = 0;
        body = infer__jj_p_body(&P, NULL);
        r->root = infer__jj_new_scope(r, NULL);
        if (context_json && *context_json) {
            infer__jp j;
            infer_error jerr;
            memset(&j, 0, sizeof j);
            j.src = j.p = context_json;
            j.err = &jerr;
            j.what = "context JSON";
            j.raw_bytes = raw_bytes;
            infer__jp_value(&j, &r->context); /* freed below, whatever happens */
            if (!j.failed) {
                infer__jp_ws(&j);
                if (*j.p) infer__jj_fail(r, "context JSON: text after the value");
            }
            if (j.failed) infer__jj_fail(r, "%s", jerr.msg);
            if (r->context.type != INFER__J_OBJ) infer__jj_fail(r, "context JSON: not an object");
            ctx = infer__jj_from_json(r, &r->context);
            for (i = 0; i < ctx.u.d->n; i++) infer__jj_assign(r, r->root, ctx.u.d->k[i].u.s, ctx.u.d->v[i]);
        }
        r->depth = 0;
        r->out = &out;
        infer__jj_exec(r, r->root, body);
        result = (char *)INFER_MALLOC(out.n + 1);
        if (!result) infer__jj_fail(r, "out of memory");
        if (out.n) memcpy(result, out.p, out.n);
        result[out.n] = 0;
    } else {
        if (raised) *raised = r->raised;
        infer__set_error(err, INFER_ERR_ARG, "%s", r->msg);
    }
    infer__jv_free(&r->context);
    infer__jj_free_all(r);
    INFER_FREE(r);
    return result;
}

INFERDEF char *infer_jinja_render(const char *template_text, const char *context_json, const infer_jinja_limits *limits,
                                  int *raised, infer_error *err) {
    return infer__jj_render(template_text, context_json, limits, 0, raised, err);
}

static char *infer__jinja_render_raw(const char *template_text, const char *context_json,
                                     const infer_jinja_limits *limits, infer_error *err) {
    return infer__jj_render(template_text, context_json, limits, 1, NULL, err);
}

/* The text of token id (control tokens as written in the vocabulary), or "". */
static void infer__jj_token_text(const infer_gguf *g, int64_t id, char *dst, size_t size) {
    const infer__kv *kv = infer__gguf_kv(g, "tokenizer.ggml.tokens");
    size_t n = 0;
    if (id >= 0 && kv && kv->type == INFER_GGUF_TYPE_ARRAY && kv->strs && (uint64_t)id < kv->arr_n && kv->strs[id].n > 0)
        n = INFER__MIN((size_t)kv->strs[id].n, size - 1);
    if (n) memcpy(dst, kv->strs[id].p, n);
    dst[n] = 0;
}

INFERDEF char *infer_model_chat_template_text(const infer_model *m, char *bos, size_t bos_size, char *eos,
                                              size_t eos_size, infer_error *err) {
    const infer_gguf *g = m ? infer_model_gguf(m) : NULL;
    infer__str s;
    char *text = NULL;
    if (err) memset(err, 0, sizeof *err); /* INFER_OK: NULL is then "no template" */
    if (bos && bos_size) bos[0] = 0;
    if (eos && eos_size) eos[0] = 0;
    if (!g) {
        infer__set_error(err, INFER_ERR_ARG, "chat template text: no model");
        return NULL;
    }
    if (bos && bos_size) infer__jj_token_text(g, infer_model_bos(m), bos, bos_size);
    if (eos && eos_size) infer__jj_token_text(g, infer_model_eos(m), eos, eos_size);
    if (infer__gguf_get_str(g, "tokenizer.chat_template", &s) &&
        !(text = infer__strndup(s.p, (size_t)s.n)))
        infer__set_error(err, INFER_ERR_NOMEM, "chat template text: out of memory");
    return text;
}
