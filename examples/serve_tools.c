/* serve_tools.c - infer serve's tools, tool_choice and tool-call replies in
   OpenAI's shapes (serve_tools.h). */
#include "serve_tools.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *msg, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return 0;
}

static cJSON *field(const cJSON *o, const char *name) {
    cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

/* ---- the request's fields -------------------------------------------------- */

/* A tool's function object ({"type": "function", "function": {...}}). */
static const cJSON *tool_function(const cJSON *tool) {
    const cJSON *type = field(tool, "type"), *fn = field(tool, "function");
    if (!cJSON_IsObject(tool) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsObject(fn))
        return NULL;
    return fn;
}

int serve_tools_read(const cJSON *body, serve_tools *t, const char **param, char *msg, size_t size) {
    const cJSON *tools = field(body, "tools"), *choice = field(body, "tool_choice"), *par = field(body, "parallel_tool_calls");
    const cJSON *tool;
    int i = 0;
    memset(t, 0, sizeof *t);
    t->parallel = 1;
    *param = "tools";
    if (tools) {
        if (!cJSON_IsArray(tools)) return fail(msg, size, "'tools' must be an array of functions");
        cJSON_ArrayForEach(tool, tools) {
            const cJSON *fn = tool_function(tool), *name = fn ? field(fn, "name") : NULL, *params;
            if (!fn) return fail(msg, size, "tools[%d] must be {\"type\": \"function\", \"function\": {...}}", i);
            if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) >= sizeof t->name)
                return fail(msg, size, "tools[%d].function.name must be a non-empty string of under %zu bytes", i,
                            sizeof t->name);
            params = field(fn, "parameters");
            if (params && !cJSON_IsObject(params))
                return fail(msg, size, "tools[%d].function.parameters must be a JSON schema object", i);
            i++;
        }
        t->n_tools = i;
        if (i && !(t->tools_json = cJSON_PrintUnformatted(tools))) return fail(msg, size, "out of memory");
    }
    t->choice = t->n_tools ? SERVE_CHOICE_AUTO : SERVE_CHOICE_NONE;
    if (choice) {
        *param = "tool_choice";
        if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) {
            t->choice = SERVE_CHOICE_NONE;
        } else if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "auto")) {
            if (!t->n_tools) return fail(msg, size, "tool_choice 'auto' needs tools");
        } else if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "required")) {
            if (!t->n_tools) return fail(msg, size, "tool_choice 'required' needs tools");
            t->choice = SERVE_CHOICE_REQUIRED;
        } else if (cJSON_IsObject(choice)) {
            const cJSON *fn = field(choice, "function"), *name = fn ? field(fn, "name") : NULL, *type = field(choice, "type");
            int found = 0;
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(name))
                return fail(msg, size, "tool_choice must be none, auto, required or {\"type\": \"function\", "
                                       "\"function\": {\"name\": ...}}");
            cJSON_ArrayForEach(tool, tools) {
                const cJSON *n = field(tool_function(tool), "name");
                found |= !strcmp(n->valuestring, name->valuestring);
            }
            if (!found) return fail(msg, size, "tool_choice names '%.64s', which is not among the tools", name->valuestring);
            t->choice = SERVE_CHOICE_NAMED;
            snprintf(t->name, sizeof t->name, "%s", name->valuestring);
        } else {
            return fail(msg, size, "tool_choice must be none, auto, required or {\"type\": \"function\", "
                                   "\"function\": {\"name\": ...}}");
        }
    }
    if (par) {
        *param = "parallel_tool_calls";
        if (!cJSON_IsBool(par)) return fail(msg, size, "'parallel_tool_calls' must be true or false");
        t->parallel = cJSON_IsTrue(par);
    }
    return 1;
}

void serve_tools_free(serve_tools *t) {
    cJSON_free(t->tools_json);
    t->tools_json = NULL;
}

int serve_tools_active(const serve_tools *t) { return t->n_tools > 0 && t->choice != SERVE_CHOICE_NONE; }

/* ---- messages for the template ------------------------------------------------ */

/* What a model that knows no tools is told: the tools, and the generic
   format's reply. */
static char *tools_description(const serve_tools *t) {
    static const char head[] =
        "You can call these tools (JSON schemas of their arguments):\n";
    static const char tail[] =
        "\nTo call a tool, reply with only a JSON object: {\"tool_call\": {\"name\": \"<tool name>\", \"arguments\": "
        "{...}}}. Otherwise answer as usual.";
    size_t n = strlen(head) + strlen(t->tools_json) + strlen(tail) + 1;
    char *d = (char *)malloc(n);
    if (d) snprintf(d, n, "%s%s%s", head, t->tools_json, tail);
    return d;
}

/* content with the description after it (a system message's) */
static int add_description(cJSON *m, const char *desc) {
    const cJSON *c = field(m, "content");
    const char *old = cJSON_IsString(c) ? c->valuestring : "";
    size_t n = strlen(old) + strlen(desc) + 3;
    char *text = (char *)malloc(n);
    if (!text) return 0;
    snprintf(text, n, "%s%s%s", old, *old ? "\n\n" : "", desc);
    cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(text));
    free(text);
    return 1;
}

cJSON *serve_tools_messages(const cJSON *messages, const serve_tools *t, int describe) {
    cJSON *out = cJSON_Duplicate(messages, 1), *m;
    int active = serve_tools_active(t);
    if (!out) return NULL;
    cJSON_ArrayForEach(m, out) {
        cJSON *calls = field(m, "tool_calls"), *call, *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        /* a call's message without content: "" (templates test it as text, as llama.cpp gives it) */
        if (cJSON_IsNull(content)) cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(""));
        else if (!content && calls) cJSON_AddStringToObject(m, "content", "");
        if (!cJSON_IsArray(calls)) continue;
        cJSON_ArrayForEach(call, calls) {
            cJSON *fn = field(call, "function"), *args = fn ? field(fn, "arguments") : NULL, *parsed;
            if (cJSON_IsString(args) && (parsed = cJSON_Parse(args->valuestring)) != NULL)
                cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);
        }
        if (describe) { /* the calls as the generic format writes them, in the content */
            cJSON *wrap = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(wrap, "tool_calls");
            char *text;
            cJSON_ArrayForEach(call, calls) {
                cJSON *fn = field(call, "function"), *c = cJSON_CreateObject();
                cJSON_AddItemToObject(c, "name", cJSON_Duplicate(field(fn, "name"), 1));
                cJSON_AddItemToObject(c, "arguments", cJSON_Duplicate(field(fn, "arguments"), 1));
                cJSON_AddItemToArray(list, c);
            }
            text = cJSON_PrintUnformatted(wrap);
            cJSON_Delete(wrap);
            if (!text) goto nomem;
            if (cJSON_GetObjectItemCaseSensitive(m, "content"))
                cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(text));
            else
                cJSON_AddStringToObject(m, "content", text);
            cJSON_free(text);
        }
    }
    if (describe && active) {
        char *desc = tools_description(t);
        cJSON *first = cJSON_GetArrayItem(out, 0), *role = first ? field(first, "role") : NULL;
        int ok;
        if (!desc) goto nomem;
        if (cJSON_IsString(role) && (!strcmp(role->valuestring, "system") || !strcmp(role->valuestring, "developer"))) {
            ok = add_description(first, desc);
        } else {
            cJSON *sys = cJSON_CreateObject();
            ok = sys && cJSON_AddStringToObject(sys, "role", "system") && cJSON_AddStringToObject(sys, "content", desc);
            if (ok) cJSON_InsertItemInArray(out, 0, sys);
            else cJSON_Delete(sys);
        }
        free(desc);
        if (!ok) goto nomem;
    }
    return out;
nomem:
    cJSON_Delete(out);
    return NULL;
}

/* ---- the grammar ---------------------------------------------------------------- */

/* A format's triggers as a lazy grammar takes them: the JSON ones (Llama
   3's, the generic format's) open a call only at the reply's start. */
static const char *const *lazy_triggers(infer_tool_format f, int *n) {
    static const char *const llama3[] = {"<|python_tag|>", "^{\"name\"", "^{ \"name\""};
    static const char *const generic[] = {"^{"};
    const char *const *t;
    if (f == INFER_TOOL_FORMAT_LLAMA3) {
        *n = 3;
        return llama3;
    }
    if (f == INFER_TOOL_FORMAT_GENERIC || f == INFER_TOOL_FORMAT_NONE) {
        *n = 1;
        return generic;
    }
    t = infer_tool_format_triggers(f);
    for (*n = 0; t[*n]; (*n)++) {}
    return t;
}

char *serve_tools_grammar(const serve_tools *t, infer_tool_format f, const char *const **triggers, int *n_triggers,
                          char *msg, size_t size) {
    infer_error err;
    size_t len = 0;
    char *g;
    const char *name = t->choice == SERVE_CHOICE_NAMED ? t->name : NULL;
    msg[0] = 0;
    *triggers = NULL;
    *n_triggers = 0;
    if (!serve_tools_active(t)) return NULL;
    memset(&err, 0, sizeof err);
    if (infer_tool_call_grammar(f, t->tools_json, name, t->parallel, NULL, 0, &len, &err) != INFER_OK) {
        snprintf(msg, size, "tools: %s", err.msg);
        return NULL;
    }
    if (!(g = (char *)malloc(len + 1)) ||
        infer_tool_call_grammar(f, t->tools_json, name, t->parallel, g, len + 1, NULL, &err) != INFER_OK) {
        free(g);
        snprintf(msg, size, "out of memory");
        return NULL;
    }
    if (t->choice == SERVE_CHOICE_AUTO) *triggers = lazy_triggers(f, n_triggers);
    return g;
}

/* ---- the reply ---------------------------------------------------------------- */

cJSON *serve_tool_calls_json(const infer_tool_call *calls, int n) {
    cJSON *list = cJSON_CreateArray();
    int i;
    for (i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject(), *fn;
        cJSON_AddStringToObject(c, "id", calls[i].id);
        cJSON_AddStringToObject(c, "type", "function");
        fn = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(fn, "name", calls[i].name);
        cJSON_AddStringToObject(fn, "arguments", calls[i].arguments);
        cJSON_AddItemToArray(list, c);
    }
    return list;
}

/* bytes as a JSON string (cJSON writes bytes as given: invalid UTF-8 made U+FFFD) */
static cJSON *clean_string(const char *s, size_t n) {
    char *out = (char *)malloc(n * 3 + 1);
    cJSON *j;
    if (!out) return NULL;
    infer_utf8_clean(s, n, out);
    j = cJSON_CreateString(out);
    free(out);
    return j;
}

int serve_delta_fill(cJSON *delta, const infer_output_delta *d) {
    int any = 0, i;
    if (d->reasoning_len) {
        cJSON_AddItemToObject(delta, "reasoning_content", clean_string(d->reasoning, d->reasoning_len));
        any = 1;
    }
    if (d->content_len) {
        cJSON_AddItemToObject(delta, "content", clean_string(d->content, d->content_len));
        any = 1;
    }
    if (d->n_calls > 0) {
        cJSON *list = cJSON_AddArrayToObject(delta, "tool_calls");
        for (i = 0; i < d->n_calls; i++) {
            const infer_tool_call_delta *c = &d->calls[i];
            cJSON *o = cJSON_CreateObject(), *fn;
            cJSON_AddNumberToObject(o, "index", c->index);
            if (c->id) {
                cJSON_AddStringToObject(o, "id", c->id);
                cJSON_AddStringToObject(o, "type", "function");
            }
            fn = cJSON_AddObjectToObject(o, "function");
            if (c->name) cJSON_AddStringToObject(fn, "name", c->name);
            cJSON_AddStringToObject(fn, "arguments", c->arguments ? c->arguments : "");
            cJSON_AddItemToArray(list, o);
        }
        any = 1;
    }
    return any;
}

/* ---- logprobs ---------------------------------------------------------------- */

/* a token's text, its bytes as numbers, and its log-probability */
static void token_fields(cJSON *o, const infer_model *m, infer_token t, float p) {
    char piece[256];
    size_t n_piece = 0;
    int n, i;
    cJSON *bytes;
    infer_token_to_piece(m, t, piece, sizeof piece, &n_piece, NULL);
    n = n_piece < sizeof piece ? (int)n_piece : (int)sizeof piece - 1;
    if (n > (int)sizeof piece) n = (int)sizeof piece;
    cJSON_AddItemToObject(o, "token", clean_string(piece, (size_t)n));
    /* a probability of 0 (the token was not allowed): the API's floor */
    cJSON_AddNumberToObject(o, "logprob", p > 0 ? log(p) : -9999.0);
    bytes = cJSON_AddArrayToObject(o, "bytes");
    for (i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
}

/* generated token i of r, and its top list (n of them) */
static int token_at(const infer_request *r, int i, infer_token *t, infer_token_prob *top, int n, float *p) {
    int n_tok = 0, k = 0;
    infer_token *all;
    infer_request_tokens(r, NULL, 0, &n_tok, NULL);
    if (i < 0 || i >= n_tok || !(all = (infer_token *)malloc(sizeof *all * (size_t)n_tok))) return -1;
    infer_request_tokens(r, all, n_tok, NULL, NULL);
    *t = all[i];
    free(all);
    *p = infer_request_token_prob(r, i);
    if (n > 0) infer_request_top_probs(r, i, top, n, &k, NULL);
    return k;
}

cJSON *serve_logprobs_content(const infer_model *m, const infer_request *r, int from, int to, int top) {
    cJSON *list = cJSON_CreateArray();
    infer_token_prob tp[20];
    int i, k, j;
    if (top > 20) top = 20;
    for (i = from; i < to; i++) {
        infer_token t;
        float p;
        cJSON *e, *tl;
        if ((k = token_at(r, i, &t, tp, top, &p)) < 0) break;
        if (infer_model_is_eog(m, t)) continue; /* the end of the reply is no text */
        e = cJSON_CreateObject();
        token_fields(e, m, t, p);
        tl = cJSON_AddArrayToObject(e, "top_logprobs");
        for (j = 0; j < k; j++) {
            cJSON *o = cJSON_CreateObject();
            token_fields(o, m, tp[j].id, tp[j].p);
            cJSON_AddItemToArray(tl, o);
        }
        cJSON_AddItemToArray(list, e);
    }
    return list;
}

cJSON *serve_logprobs_text(const infer_model *m, const infer_request *r, int from, int to, int top, size_t offset0) {
    cJSON *o = cJSON_CreateObject(), *tokens = cJSON_AddArrayToObject(o, "tokens");
    cJSON *lps = cJSON_AddArrayToObject(o, "token_logprobs"), *tops = cJSON_AddArrayToObject(o, "top_logprobs");
    cJSON *offs = cJSON_AddArrayToObject(o, "text_offset");
    infer_token_prob tp[20];
    size_t offset = offset0;
    int i, k, j;
    if (top > 20) top = 20;
    for (i = from; i < to; i++) {
        infer_token t;
        float p;
        char piece[256];
        cJSON *e, *d;
        if ((k = token_at(r, i, &t, tp, top, &p)) < 0) break;
        if (infer_model_is_eog(m, t)) continue;
        e = cJSON_CreateObject();
        token_fields(e, m, t, p);
        cJSON_AddItemToArray(tokens, cJSON_Duplicate(cJSON_GetObjectItem(e, "token"), 1));
        cJSON_AddItemToArray(lps, cJSON_Duplicate(cJSON_GetObjectItem(e, "logprob"), 1));
        cJSON_Delete(e);
        d = cJSON_CreateObject();
        for (j = 0; j < k; j++) {
            cJSON *x = cJSON_CreateObject();
            token_fields(x, m, tp[j].id, tp[j].p);
            if (!cJSON_GetObjectItemCaseSensitive(d, cJSON_GetObjectItem(x, "token")->valuestring))
                cJSON_AddNumberToObject(d, cJSON_GetObjectItem(x, "token")->valuestring,
                                        cJSON_GetObjectItem(x, "logprob")->valuedouble);
            cJSON_Delete(x);
        }
        cJSON_AddItemToArray(tops, d);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        {
            size_t n_piece = 0;
            infer_token_to_piece(m, t, piece, sizeof piece, &n_piece, NULL);
            offset += n_piece;
        }
    }
    return o;
}
