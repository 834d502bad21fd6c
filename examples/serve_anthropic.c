/* serve_anthropic.c - Anthropic's Messages API on infer serve's chat
   completions (serve_anthropic.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "serve_anthropic.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *fail(const char **param, const char *p, char *msg, size_t size, cJSON *drop, const char *fmt, ...) {
    va_list ap;
    *param = p;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    cJSON_Delete(drop);
    return NULL;
}

static cJSON *field(const cJSON *o, const char *name) {
    cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

/* The text of a string or of a list of text blocks, malloc'd; NULL if it
   is neither. */
static char *text_of(const cJSON *c) {
    const cJSON *part;
    size_t n = 0;
    char *out;
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) return NULL;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = field(part, "text"), *type = field(part, "type");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(t)) return NULL;
        n += strlen(t->valuestring);
    }
    if (!(out = (char *)malloc(n + 1))) return NULL;
    out[0] = 0;
    cJSON_ArrayForEach(part, c) strcat(out, field(part, "text")->valuestring);
    return out;
}

/* Adds {"role", "content": text} to msgs. */
static int add_message(cJSON *msgs, const char *role, const char *text) {
    cJSON *m = cJSON_CreateObject();
    if (!m || !cJSON_AddStringToObject(m, "role", role) || !cJSON_AddStringToObject(m, "content", text)) {
        cJSON_Delete(m);
        return 0;
    }
    cJSON_AddItemToArray(msgs, m);
    return 1;
}

/* One Anthropic message as OpenAI messages: a user's text, and its
   tool_result blocks as tool messages; an assistant's text and tool_use
   blocks as one message with tool_calls (thinking blocks dropped, as the
   templates drop old reasoning). */
static int convert_message(cJSON *msgs, const cJSON *m, int i, const char **param, char *msg, size_t size) {
    const cJSON *role = field(m, "role"), *content = field(m, "content"), *block;
    int user;
    if (!cJSON_IsObject(m) || !cJSON_IsString(role) ||
        (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant"))) {
        fail(param, "messages", msg, size, NULL, "messages[%d]: role must be user or assistant", i);
        return 0;
    }
    user = !strcmp(role->valuestring, "user");
    if (cJSON_IsString(content)) return add_message(msgs, role->valuestring, content->valuestring);
    if (!cJSON_IsArray(content)) {
        fail(param, "messages", msg, size, NULL, "messages[%d].content must be a string or an array of blocks", i);
        return 0;
    }
    {
        size_t n = 0;
        char *text;
        cJSON *calls = cJSON_CreateArray(), *out;
        cJSON_ArrayForEach(block, content) {
            const cJSON *type = field(block, "type");
            if (cJSON_IsString(type) && !strcmp(type->valuestring, "text") && cJSON_IsString(field(block, "text")))
                n += strlen(field(block, "text")->valuestring);
        }
        text = (char *)malloc(n + 1);
        if (!text || !calls) {
            free(text);
            cJSON_Delete(calls);
            return 0;
        }
        text[0] = 0;
        cJSON_ArrayForEach(block, content) {
            const cJSON *type = field(block, "type");
            const char *t = cJSON_IsString(type) ? type->valuestring : "";
            if (!strcmp(t, "text") && cJSON_IsString(field(block, "text"))) {
                strcat(text, field(block, "text")->valuestring);
            } else if (!strcmp(t, "tool_result") && user) {
                const cJSON *id = field(block, "tool_use_id"), *c = field(block, "content");
                char *result = c ? text_of(c) : strdup("");
                cJSON *tm;
                if (!cJSON_IsString(id) || !result) {
                    free(result), free(text), cJSON_Delete(calls);
                    fail(param, "messages", msg, size, NULL,
                         "messages[%d]: a tool_result needs a tool_use_id and text content", i);
                    return 0;
                }
                tm = cJSON_CreateObject();
                cJSON_AddStringToObject(tm, "role", "tool");
                cJSON_AddStringToObject(tm, "tool_call_id", id->valuestring);
                cJSON_AddStringToObject(tm, "content", result);
                cJSON_AddItemToArray(msgs, tm);
                free(result);
            } else if (!strcmp(t, "tool_use") && !user) {
                const cJSON *id = field(block, "id"), *name = field(block, "name"), *input = field(block, "input");
                cJSON *call, *fn;
                char *args;
                if (!cJSON_IsString(id) || !cJSON_IsString(name) || (input && !cJSON_IsObject(input))) {
                    free(text), cJSON_Delete(calls);
                    fail(param, "messages", msg, size, NULL,
                         "messages[%d]: a tool_use needs an id, a name and an object input", i);
                    return 0;
                }
                args = input ? cJSON_PrintUnformatted(input) : strdup("{}");
                call = cJSON_CreateObject();
                cJSON_AddStringToObject(call, "id", id->valuestring);
                cJSON_AddStringToObject(call, "type", "function");
                fn = cJSON_AddObjectToObject(call, "function");
                cJSON_AddStringToObject(fn, "name", name->valuestring);
                cJSON_AddStringToObject(fn, "arguments", args ? args : "{}");
                cJSON_free(args);
                cJSON_AddItemToArray(calls, call);
            } else if (!strcmp(t, "thinking") || !strcmp(t, "redacted_thinking")) {
                /* the model's earlier reasoning: not shown to it again */
            } else {
                free(text), cJSON_Delete(calls);
                fail(param, "messages", msg, size, NULL, "messages[%d]: a block of type '%.32s' is not supported here",
                     i, t);
                return 0;
            }
        }
        if (!user || text[0] || cJSON_GetArraySize(calls)) {
            if (!user || text[0]) {
                out = cJSON_CreateObject();
                cJSON_AddStringToObject(out, "role", role->valuestring);
                cJSON_AddStringToObject(out, "content", text);
                if (cJSON_GetArraySize(calls)) {
                    cJSON_AddItemToObject(out, "tool_calls", calls);
                    calls = NULL;
                }
                cJSON_AddItemToArray(msgs, out);
            }
        }
        cJSON_Delete(calls);
        free(text);
    }
    return 1;
}

cJSON *anthropic_to_chat(const cJSON *body, const char **param, char *msg, size_t size) {
    cJSON *out = cJSON_CreateObject(), *msgs, *f, *m;
    const cJSON *messages = field(body, "messages"), *system = field(body, "system");
    int i = 0;
    static const char *const same[] = {"temperature", "top_p", "top_k", "stream", "metadata_unused"};
    if (!out) return NULL;
    if (!cJSON_IsObject(body)) return fail(param, NULL, msg, size, out, "the request body is not a JSON object");
    if (!cJSON_IsNumber(field(body, "max_tokens")))
        return fail(param, "max_tokens", msg, size, out, "max_tokens is required (a number)");
    cJSON_AddNumberToObject(out, "max_tokens", field(body, "max_tokens")->valuedouble);
    for (i = 0; i < (int)(sizeof same / sizeof *same); i++)
        if ((f = field(body, same[i])) != NULL) cJSON_AddItemToObject(out, same[i], cJSON_Duplicate(f, 1));
    if ((f = field(body, "stop_sequences")) != NULL) cJSON_AddItemToObject(out, "stop", cJSON_Duplicate(f, 1));
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) < 1)
        return fail(param, "messages", msg, size, out, "'messages' must be a non-empty array");
    msgs = cJSON_AddArrayToObject(out, "messages");
    if (system) {
        char *text = text_of(system);
        if (!text) return fail(param, "system", msg, size, out, "'system' must be a string or an array of text blocks");
        add_message(msgs, "system", text);
        free(text);
    }
    i = 0;
    cJSON_ArrayForEach(m, messages) {
        if (!convert_message(msgs, m, i, param, msg, size)) {
            if (!msg[0]) snprintf(msg, size, "out of memory");
            cJSON_Delete(out);
            return NULL;
        }
        i++;
    }
    if ((f = field(body, "tools")) != NULL) {
        cJSON *tools = cJSON_AddArrayToObject(out, "tools"), *t;
        if (!cJSON_IsArray(f)) return fail(param, "tools", msg, size, out, "'tools' must be an array");
        i = 0;
        cJSON_ArrayForEach(t, f) {
            const cJSON *name = field(t, "name"), *schema = field(t, "input_schema"), *desc = field(t, "description");
            cJSON *o, *fn;
            if (!cJSON_IsString(name) || (schema && !cJSON_IsObject(schema)))
                return fail(param, "tools", msg, size, out, "tools[%d] needs a name and an input_schema object", i);
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "type", "function");
            fn = cJSON_AddObjectToObject(o, "function");
            cJSON_AddStringToObject(fn, "name", name->valuestring);
            if (cJSON_IsString(desc)) cJSON_AddStringToObject(fn, "description", desc->valuestring);
            if (schema) cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, 1));
            cJSON_AddItemToArray(tools, o);
            i++;
        }
    }
    if ((f = field(body, "tool_choice")) != NULL) {
        const cJSON *type = field(f, "type"), *name = field(f, "name"), *dis = field(f, "disable_parallel_tool_use");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        if (!strcmp(t, "auto") || !strcmp(t, "none")) {
            cJSON_AddStringToObject(out, "tool_choice", t);
        } else if (!strcmp(t, "any")) {
            cJSON_AddStringToObject(out, "tool_choice", "required");
        } else if (!strcmp(t, "tool") && cJSON_IsString(name)) {
            cJSON *c = cJSON_AddObjectToObject(out, "tool_choice");
            cJSON_AddStringToObject(c, "type", "function");
            cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", name->valuestring);
        } else {
            return fail(param, "tool_choice", msg, size, out,
                        "tool_choice must be {\"type\": auto, any, none} or {\"type\": \"tool\", \"name\": ...}");
        }
        if (cJSON_IsTrue(dis)) cJSON_AddFalseToObject(out, "parallel_tool_calls");
    }
    if ((f = field(body, "thinking")) != NULL) {
        const cJSON *type = field(f, "type"), *budget = field(f, "budget_tokens");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "enabled")) {
            if (!cJSON_IsNumber(budget) || budget->valuedouble < 0)
                return fail(param, "thinking", msg, size, out, "thinking.budget_tokens must be a number");
            cJSON_AddNumberToObject(out, "reasoning_budget", budget->valuedouble);
        } else if (!cJSON_IsString(type) || strcmp(type->valuestring, "disabled")) {
            return fail(param, "thinking", msg, size, out, "thinking.type must be enabled or disabled");
        } else { /* disabled: templates that know it answer without reasoning */
            cJSON_AddItemToObject(out, "chat_template_kwargs", cJSON_Parse("{\"enable_thinking\": false}"));
        }
    }
    return out;
}

/* ---- the reply ---------------------------------------------------------------- */

static const char *stop_reason(const char *finish) {
    if (!strcmp(finish, "length")) return "max_tokens";
    if (!strcmp(finish, "tool_calls")) return "tool_use";
    return "end_turn";
}

static cJSON *usage(int input_tokens, int output_tokens, int cached) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", input_tokens - cached);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "output_tokens", output_tokens);
    return u;
}

/* text as a JSON string, invalid UTF-8 made U+FFFD */
static cJSON *clean_string(const char *s, size_t n) {
    char *out = (char *)malloc(n * 3 + 1);
    cJSON *j;
    if (!out) return cJSON_CreateString("");
    infer_utf8_clean(s, n, out);
    j = cJSON_CreateString(out);
    free(out);
    return j;
}

static cJSON *tool_use_block(const char *id, const char *name, const char *arguments, int with_input) {
    cJSON *b = cJSON_CreateObject(), *input = with_input ? cJSON_Parse(arguments) : NULL;
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddStringToObject(b, "name", name);
    cJSON_AddItemToObject(b, "input", input ? input : cJSON_CreateObject());
    return b;
}

cJSON *anthropic_message(const char *id, const char *model, const infer_output_result *res, const char *finish,
                         int input_tokens, int output_tokens, int cached) {
    cJSON *o = cJSON_CreateObject(), *content;
    int i;
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", model);
    content = cJSON_AddArrayToObject(o, "content");
    if (res->reasoning_len) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddItemToObject(b, "thinking", clean_string(res->reasoning_content, res->reasoning_len));
        cJSON_AddStringToObject(b, "signature", "");
        cJSON_AddItemToArray(content, b);
    }
    if (res->content_len || !res->n_calls) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddItemToObject(b, "text", clean_string(res->content, res->content_len));
        cJSON_AddItemToArray(content, b);
    }
    for (i = 0; i < res->n_calls; i++)
        cJSON_AddItemToArray(content, tool_use_block(res->calls[i].id, res->calls[i].name, res->calls[i].arguments, 1));
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(res->n_calls ? "tool_calls" : finish));
    cJSON_AddNullToObject(o, "stop_sequence");
    cJSON_AddItemToObject(o, "usage", usage(input_tokens, output_tokens, cached));
    return o;
}

cJSON *anthropic_error(const char *type, const char *msg) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", "error");
    cJSON *in = cJSON_AddObjectToObject(e, "error");
    cJSON_AddStringToObject(in, "type", type);
    cJSON_AddStringToObject(in, "message", msg);
    return e;
}

/* ---- the stream ---------------------------------------------------------------- */

static void event(anthropic_emit emit, void *ctx, const char *name, cJSON *data, const char *type) {
    cJSON_AddStringToObject(data, "type", type ? type : name);
    emit(ctx, name, data);
}

void anthropic_stream_start(const char *id, const char *model, int input_tokens, int cached, anthropic_emit emit,
                            void *ctx) {
    cJSON *d = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(d, "message");
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", model);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddItemToObject(m, "usage", usage(input_tokens, 0, cached));
    event(emit, ctx, "message_start", d, NULL);
}

static void block_stop(anthropic_blocks *b, anthropic_emit emit, void *ctx) {
    cJSON *d;
    if (!b->kind) return;
    d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "index", b->index);
    event(emit, ctx, "content_block_stop", d, NULL);
    b->kind = 0;
    b->index++;
}

/* opens a block of kind (its content_block given) where another is open */
static void block_start(anthropic_blocks *b, int kind, cJSON *block, anthropic_emit emit, void *ctx) {
    cJSON *d = cJSON_CreateObject();
    block_stop(b, emit, ctx);
    cJSON_AddNumberToObject(d, "index", b->index);
    cJSON_AddItemToObject(d, "content_block", block);
    event(emit, ctx, "content_block_start", d, NULL);
    b->kind = kind;
}

static void block_delta(anthropic_blocks *b, const char *type, const char *key, cJSON *value, anthropic_emit emit,
                        void *ctx) {
    cJSON *d = cJSON_CreateObject(), *delta;
    cJSON_AddNumberToObject(d, "index", b->index);
    delta = cJSON_AddObjectToObject(d, "delta");
    cJSON_AddStringToObject(delta, "type", type);
    cJSON_AddItemToObject(delta, key, value);
    event(emit, ctx, "content_block_delta", d, NULL);
}

int anthropic_stream_delta(anthropic_blocks *b, const infer_output_delta *d, anthropic_emit emit, void *ctx) {
    int i, any = 0;
    if (d->reasoning_len) {
        if (b->kind != 1) {
            cJSON *blk = cJSON_CreateObject();
            cJSON_AddStringToObject(blk, "type", "thinking");
            cJSON_AddStringToObject(blk, "thinking", "");
            block_start(b, 1, blk, emit, ctx);
        }
        block_delta(b, "thinking_delta", "thinking", clean_string(d->reasoning, d->reasoning_len), emit, ctx);
        any = 1;
    }
    if (d->content_len) {
        if (b->kind != 2) {
            cJSON *blk = cJSON_CreateObject();
            cJSON_AddStringToObject(blk, "type", "text");
            cJSON_AddStringToObject(blk, "text", "");
            block_start(b, 2, blk, emit, ctx);
        }
        block_delta(b, "text_delta", "text", clean_string(d->content, d->content_len), emit, ctx);
        any = 1;
    }
    for (i = 0; i < d->n_calls; i++) {
        const infer_tool_call_delta *c = &d->calls[i];
        if (c->id) block_start(b, 3, tool_use_block(c->id, c->name ? c->name : "", "{}", 0), emit, ctx);
        if (c->arguments && c->arguments[0])
            block_delta(b, "input_json_delta", "partial_json", cJSON_CreateString(c->arguments), emit, ctx);
        any = 1;
    }
    return any;
}

void anthropic_stream_end(anthropic_blocks *b, const char *finish, int output_tokens, anthropic_emit emit, void *ctx) {
    cJSON *d = cJSON_CreateObject(), *delta, *u;
    int tools = b->kind == 3 || !strcmp(finish, "tool_calls");
    if (!b->kind && !b->index) { /* an empty reply still has its text block */
        cJSON *blk = cJSON_CreateObject();
        cJSON_AddStringToObject(blk, "type", "text");
        cJSON_AddStringToObject(blk, "text", "");
        block_start(b, 2, blk, emit, ctx);
    }
    block_stop(b, emit, ctx);
    delta = cJSON_AddObjectToObject(d, "delta");
    cJSON_AddStringToObject(delta, "stop_reason", stop_reason(tools ? "tool_calls" : finish));
    cJSON_AddNullToObject(delta, "stop_sequence");
    u = cJSON_AddObjectToObject(d, "usage");
    cJSON_AddNumberToObject(u, "output_tokens", output_tokens);
    event(emit, ctx, "message_delta", d, NULL);
    event(emit, ctx, "message_stop", cJSON_CreateObject(), NULL);
}
