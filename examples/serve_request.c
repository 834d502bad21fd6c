/* serve_request.c - infer serve's reading of a request's JSON fields: validation and its one-line errors. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve_request.h"

int serve_bad(bad_field *b, const char *param, const char *fmt, ...) {
    va_list ap;
    b->param = param;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    return 0;
}

/* A present, non-null field of o, or NULL. */
cJSON *serve_field(const cJSON *o, const char *name) {
    cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

static int read_number(const cJSON *o, const char *name, double lo, double hi, float *out, bad_field *b) {
    cJSON *f = serve_field(o, name);
    if (!f) return 1;
    if (!cJSON_IsNumber(f) || f->valuedouble < lo || f->valuedouble > hi)
        return serve_bad(b, name, "'%s' must be a number from %g to %g", name, lo, hi);
    *out = (float)f->valuedouble;
    return 1;
}

static int read_int(const cJSON *o, const char *name, double lo, double hi, int *out, bad_field *b) {
    cJSON *f = serve_field(o, name);
    if (!f) return 1;
    /* the range first: converting a double beyond long long is undefined */
    if (!cJSON_IsNumber(f) || f->valuedouble < lo || f->valuedouble > hi || f->valuedouble != floor(f->valuedouble))
        return serve_bad(b, name, "'%s' must be an integer from %.0f to %.0f", name, lo, hi);
    *out = (int)f->valuedouble;
    return 1;
}

void serve_completion_call_free(completion_call *cc) {
    cJSON_Delete(cc->body);
    serve_tools_free(&cc->tools);
    free(cc->tool_gbnf);
    free(cc->tokens);
    free(cc->schema);
    free(cc->bias_ids);
    free(cc->bias);
}

/* A request's user: OpenAI's "user" field, else "session_id" (the name
   some clients of sticky sessions use). *user is NULL without either, or
   points into body. 0 with b set for one that is not a short string. */
int serve_read_user(const cJSON *body, const char **user, bad_field *b) {
    static const char *const names[] = {"user", "session_id"};
    int i;
    *user = NULL;
    for (i = 0; i < 2 && !*user; i++) {
        cJSON *f = serve_field(body, names[i]);
        if (!f) continue;
        if (!cJSON_IsString(f) || strlen(f->valuestring) > SERVE_USER_MAX)
            return serve_bad(b, names[i], "'%s' must be a string of at most %d bytes", names[i], SERVE_USER_MAX);
        *user = f->valuestring;
    }
    return 1;
}

/* The sampling and output fields both completion endpoints take. */
int serve_read_completion_fields(server *s, const cJSON *body, completion_call *cc, bad_field *b) {
    infer_sampler_params *sp = &cc->p.sampling;
    cJSON *f;
    int n = 1, seed_given = 0;
    double seed = 0;
    if (!serve_read_user(body, &cc->user, b)) return 0;
    if (!read_number(body, "temperature", 0, 2, &sp->temperature, b) || !read_number(body, "top_p", 0, 1, &sp->top_p, b) ||
        !read_int(body, "top_k", 0, 1e9, &sp->top_k, b) || !read_number(body, "min_p", 0, 1, &sp->min_p, b) ||
        !read_number(body, "repeat_penalty", 0.01, 100, &sp->repeat_penalty, b) ||
        !read_int(body, "max_tokens", 0, 1e9, &cc->max_tokens, b) ||
        !read_int(body, "max_completion_tokens", 0, 1e9, &cc->max_tokens, b) || !read_int(body, "n", 1, 128, &n, b))
        return 0;
    if (sp->top_p <= 0) return serve_bad(b, "top_p", "'top_p' must be above 0");
    /* n replies run on n sequences at once */
    if (n > s->n_slots || n > SERVE_MAX_N)
        return serve_bad(b, "n", "n = %d: this server runs at most %d replies at once (--parallel)", n,
                   s->n_slots < SERVE_MAX_N ? s->n_slots : SERVE_MAX_N);
    cc->n = n;
    cc->reasoning_budget = s->reasoning_budget;
    if (!read_int(body, "reasoning_budget", -1, 1e9, &cc->reasoning_budget, b)) return 0;
    /* speculative decoding: {"lookup": N} drafts up to N tokens a pass by
       prompt lookup (0: none), {"draft_n": N} up to N by --draft's model
       (0: not it); the server's --lookup and --draft-n where not given.
       Where the draft model drafts, lookup is not used (the library's rule) */
    cc->p.lookup = s->lookup;
    {
        int draft_n = s->draft_ctx ? s->draft_n : 0;
        if ((f = serve_field(body, "speculative")) != NULL) {
            const cJSON *k;
            if (!cJSON_IsObject(f)) return serve_bad(b, "speculative", "'speculative' must be an object such as {\"lookup\": 8}");
            cJSON_ArrayForEach(k, f) if (strcmp(k->string, "lookup") && strcmp(k->string, "draft_n"))
                return serve_bad(b, "speculative", "'speculative' takes only \"lookup\" (prompt lookup's draft tokens) and "
                           "\"draft_n\" (the draft model's), not \"%.64s\"", k->string);
            if (!read_int(f, "lookup", 0, 64, &cc->p.lookup, b) || !read_int(f, "draft_n", 0, 64, &draft_n, b)) return 0;
            if (draft_n > 0 && !s->draft_ctx)
                return serve_bad(b, "draft_n", "'draft_n' needs a draft model: this server was started without --draft");
        }
        if (draft_n > 0) {
            cc->p.draft = s->draft_ctx;
            cc->p.draft_n = draft_n;
        }
    }
    if ((f = serve_field(body, "seed")) != NULL) {
        /* a 64-bit integer, checked before it is converted (beyond, undefined) */
        if (!cJSON_IsNumber(f) || !(fabs(f->valuedouble) < 9223372036854775808.0) ||
            f->valuedouble != floor(f->valuedouble))
            return serve_bad(b, "seed", "'seed' must be an integer");
        seed = f->valuedouble;
        seed_given = 1;
    }
    if (seed_given) {
        sp->seed = (uint64_t)(long long)seed;
    } else { /* a reply of its own each time, as the API's default */
        pthread_mutex_lock(&s->mu);
        sp->seed = (uint64_t)time(NULL) * 6364136223846793005ULL + ++s->seed_counter * 1442695040888963407ULL;
        pthread_mutex_unlock(&s->mu);
    }
    if ((f = serve_field(body, "stream")) != NULL) {
        if (!cJSON_IsBool(f)) return serve_bad(b, "stream", "'stream' must be true or false");
        cc->stream = cJSON_IsTrue(f);
    }
    if ((f = serve_field(body, "cache_prompt")) != NULL) { /* llama.cpp's: reuse the cached prompt prefix (default true) */
        if (!cJSON_IsBool(f)) return serve_bad(b, "cache_prompt", "'cache_prompt' must be true or false");
        cc->p.cache_prompt = cJSON_IsTrue(f);
    }
    if ((f = serve_field(body, "stream_options")) != NULL) {
        cJSON *u = serve_field(f, "include_usage");
        if (!cJSON_IsObject(f) || (u && !cJSON_IsBool(u)))
            return serve_bad(b, "stream_options", "'stream_options' must be an object with a boolean include_usage");
        cc->include_usage = u && cJSON_IsTrue(u);
    }
    if ((f = serve_field(body, "stop")) != NULL) {
        if (cJSON_IsArray(f) && cJSON_GetArraySize(f) > SERVE_MAX_STOP) {
            b->code = "too_many_stop_strings";
            return serve_bad(b, "stop", "'stop' has %d strings; this server takes at most %d", cJSON_GetArraySize(f),
                       SERVE_MAX_STOP);
        }
        if (cJSON_IsString(f)) {
            cc->stop[cc->p.n_stop++] = f->valuestring;
        } else if (cJSON_IsArray(f)) {
            cJSON *x;
            cJSON_ArrayForEach(x, f) {
                if (!cJSON_IsString(x) || !x->valuestring[0])
                    return serve_bad(b, "stop", "'stop' must be a string or an array of non-empty strings");
                cc->stop[cc->p.n_stop++] = x->valuestring;
            }
        } else {
            return serve_bad(b, "stop", "'stop' must be a string or an array of at most %d strings", SERVE_MAX_STOP);
        }
        cc->p.stop = cc->stop;
    }
    if ((f = serve_field(body, "logit_bias")) != NULL) {
        cJSON *x;
        int k = 0, n_bias = cJSON_GetArraySize(f);
        if (!cJSON_IsObject(f)) return serve_bad(b, "logit_bias", "'logit_bias' must be an object of token id: bias");
        if (n_bias > infer_model_n_vocab(s->model)) { /* (each id once at most) */
            b->code = "too_many_logit_bias";
            return serve_bad(b, "logit_bias", "'logit_bias' has %d entries; this server takes at most %d (the model's vocabulary)",
                       n_bias, infer_model_n_vocab(s->model));
        }
        cc->bias_ids = (infer_token *)malloc(sizeof(infer_token) * (size_t)(n_bias + 1));
        cc->bias = (float *)malloc(sizeof(float) * (size_t)(n_bias + 1));
        if (!cc->bias_ids || !cc->bias) return serve_bad(b, "logit_bias", "out of memory");
        cJSON_ArrayForEach(x, f) {
            char *end;
            long id = strtol(x->string, &end, 10);
            if (end == x->string || *end || id < 0 || id >= infer_model_n_vocab(s->model))
                return serve_bad(b, "logit_bias", "logit_bias: '%s' is not a token id of this model", x->string);
            if (!cJSON_IsNumber(x) || x->valuedouble < -100 || x->valuedouble > 100)
                return serve_bad(b, "logit_bias", "logit_bias: the bias of token %ld must be a number from -100 to 100", id);
            cc->bias_ids[k] = (infer_token)id;
            /* -100 bans the token, as the API documents */
            cc->bias[k++] = x->valuedouble <= -100 ? -INFINITY : (float)x->valuedouble;
        }
        cc->p.bias_ids = cc->bias_ids;
        cc->p.bias = cc->bias;
        cc->p.n_bias = k;
    }
    if ((f = serve_field(body, "response_format")) != NULL) {
        cJSON *type = cJSON_GetObjectItemCaseSensitive(f, "type");
        if (!cJSON_IsObject(f) || !cJSON_IsString(type))
            return serve_bad(b, "response_format", "'response_format' must be an object with a type");
        if (!strcmp(type->valuestring, "json_object")) {
            cc->schema = strdup("{\"type\":\"object\"}");
        } else if (!strcmp(type->valuestring, "json_schema")) {
            cJSON *js = serve_field(f, "json_schema"), *schema = js ? serve_field(js, "schema") : NULL;
            if (!schema || !(cJSON_IsObject(schema) || cJSON_IsBool(schema)))
                return serve_bad(b, "response_format", "response_format: json_schema.schema must be a JSON schema object");
            cc->schema = cJSON_PrintUnformatted(schema);
            if (cc->schema && s->max_schema && strlen(cc->schema) > s->max_schema) { /* (0: no limit) */
                b->code = "schema_too_large";
                return serve_bad(b, "response_format", "response_format: the JSON schema is %zu bytes; this server takes at most %zu (--max-schema)",
                           strlen(cc->schema), s->max_schema);
            }
        } else if (strcmp(type->valuestring, "text")) {
            return serve_bad(b, "response_format", "response_format: type must be text, json_object or json_schema");
        }
        cc->p.json_schema = cc->schema;
    }
    if ((f = serve_field(body, "grammar")) != NULL) { /* llama.cpp's: a GBNF grammar the reply follows */
        if (!cJSON_IsString(f)) return serve_bad(b, "grammar", "'grammar' must be a GBNF grammar's text");
        if (cc->schema) return serve_bad(b, "grammar", "'grammar' and response_format cannot be used together");
        if (strlen(f->valuestring) > s->max_grammar) {
            b->code = "grammar_too_large";
            return serve_bad(b, "grammar", "'grammar' is %zu bytes; this server takes at most %zu (--max-grammar)",
                       strlen(f->valuestring), s->max_grammar);
        }
        if (f->valuestring[0]) cc->p.grammar = f->valuestring;
    }
    /* logprobs: a chat's true/false and top_logprobs (0-20); a text
       completion's number of top tokens (0-5) */
    if ((f = serve_field(body, "logprobs")) != NULL) {
        if (cc->chat) {
            if (!cJSON_IsBool(f)) return serve_bad(b, "logprobs", "'logprobs' must be true or false");
            cc->logprobs = cJSON_IsTrue(f);
        } else {
            if (!read_int(body, "logprobs", 0, 5, &cc->top_logprobs, b)) return 0;
            cc->logprobs = 1;
        }
    }
    if (cc->chat && serve_field(body, "top_logprobs")) {
        if (!read_int(body, "top_logprobs", 0, 20, &cc->top_logprobs, b)) return 0;
        if (!cc->logprobs) return serve_bad(b, "top_logprobs", "'top_logprobs' needs logprobs true");
    }
    if (cc->logprobs) cc->p.n_probs = cc->top_logprobs > 0 ? cc->top_logprobs : 1;
    if (!cc->chat && (f = serve_field(body, "tools")) != NULL)
        return serve_bad(b, "tools", "tools are for chat completions (/v1/chat/completions)");
    return 1;
}

/* The text of a message's content: a string, or text parts. Returns a
   malloc'd string, or NULL (with b set). */
static char *message_content(const cJSON *content, int i, bad_field *b) {
    if (!content) return strdup("");
    if (cJSON_IsString(content)) return strdup(content->valuestring);
    if (cJSON_IsArray(content)) {
        size_t len = 0;
        cJSON *part;
        char *out;
        cJSON_ArrayForEach(part, content) {
            cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
            cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
                serve_bad(b, "messages", "messages[%d].content: only text parts ({\"type\": \"text\", \"text\": ...}) are supported", i);
                return NULL;
            }
            len += strlen(text->valuestring);
        }
        if (!(out = (char *)malloc(len + 1))) return NULL;
        out[0] = 0;
        cJSON_ArrayForEach(part, content) strcat(out, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
        return out;
    }
    serve_bad(b, "messages", "messages[%d].content must be a string or an array of text parts", i);
    return NULL;
}

/* The prompt of a chat through the Jinja template s->jinja, as transformers'
   apply_chat_template renders it: the request's messages as given (the
   "developer" role as "system", which templates know),
   add_generation_prompt, the model's BOS and EOS texts, reasoning_effort
   where the request gives one, and the keys of chat_template_kwargs (e.g.
   enable_thinking) beside them. A BOS the text
   opens with is dropped where tokenizing adds one. malloc'd, or NULL with b
   set (the template's own message where it raises). */
static char *chat_prompt_jinja(server *s, const cJSON *body, const cJSON *messages, const serve_tools *tools,
                               bad_field *b) {
    cJSON *vars = cJSON_CreateObject(), *m, *kw = serve_field(body, "chat_template_kwargs");
    cJSON *msgs = serve_tools_messages(messages, tools, s->tool_fmt == INFER_TOOL_FORMAT_NONE);
    char *json = NULL, *text = NULL;
    infer_error err;
    int raised = 0;
    if (!vars || !msgs) {
        cJSON_Delete(msgs);
        goto done;
    }
    cJSON_ArrayForEach(m, msgs) {
        cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "developer"))
            cJSON_ReplaceItemInObjectCaseSensitive(m, "role", cJSON_CreateString("system"));
        /* harmony: an earlier reply's reasoning is the template's "thinking"
           (gpt-oss's shows it again before that reply's tool call, and
           refuses it beside content) */
        if (s->tool_fmt == INFER_TOOL_FORMAT_HARMONY && cJSON_IsString(role) && !strcmp(role->valuestring, "assistant") &&
            cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) &&
            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "content")) &&
            !cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring[0] &&
            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "reasoning_content")) &&
            !cJSON_GetObjectItemCaseSensitive(m, "thinking"))
            cJSON_AddItemToObject(m, "thinking",
                                  cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(m, "reasoning_content"), 0));
    }
    cJSON_AddItemToObject(vars, "messages", msgs);
    if (serve_tools_active(tools) && s->tool_fmt != INFER_TOOL_FORMAT_NONE)
        cJSON_AddItemToObject(vars, "tools", cJSON_Duplicate(serve_field(body, "tools"), 1));
    cJSON_AddBoolToObject(vars, "add_generation_prompt", 1);
    cJSON_AddStringToObject(vars, "bos_token", s->bos);
    cJSON_AddStringToObject(vars, "eos_token", s->eos);
    {
        /* OpenAI's reasoning_effort, as gpt-oss's template takes it (its
           system message's "Reasoning: high") */
        cJSON *e = serve_field(body, "reasoning_effort");
        if (e && !cJSON_IsNull(e)) {
            if (!cJSON_IsString(e) || (strcmp(e->valuestring, "low") && strcmp(e->valuestring, "medium") &&
                                       strcmp(e->valuestring, "high"))) {
                serve_bad(b, "reasoning_effort", "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
                goto done;
            }
            cJSON_AddStringToObject(vars, "reasoning_effort", e->valuestring);
        }
    }
    if (kw && !cJSON_IsNull(kw)) {
        cJSON *k;
        if (!cJSON_IsObject(kw)) {
            serve_bad(b, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
            goto done;
        }
        cJSON_ArrayForEach(k, kw) {
            if (cJSON_GetObjectItemCaseSensitive(vars, k->string)) {
                serve_bad(b, "chat_template_kwargs", "chat_template_kwargs may not set '%.64s'", k->string);
                goto done;
            }
            cJSON_AddItemToObject(vars, k->string, cJSON_Duplicate(k, 1));
        }
    }
    if (!(json = cJSON_PrintUnformatted(vars))) goto done;
    if (!(text = infer_jinja_render(s->jinja, json, NULL, &raised, &err))) {
        if (err.code == INFER_ERR_NOMEM) goto done;
        serve_bad(b, "messages", "%s%s", raised ? "" : "the chat template: ", err.msg);
        goto done;
    }
    if (s->bos[0] && infer_model_add_bos(s->model) && !strncmp(text, s->bos, strlen(s->bos)))
        memmove(text, text + strlen(s->bos), strlen(text) - strlen(s->bos) + 1);
done:
    if (!text && !b->msg[0]) serve_bad(b, "messages", "the messages could not be formatted");
    cJSON_Delete(vars);
    free(json);
    return text;
}

/* The prompt of a chat: messages through the model's chat template, then
   the assistant prompt. malloc'd, or NULL with b set. */
char *serve_chat_prompt(server *s, const cJSON *body, const cJSON *messages, const serve_tools *tools, bad_field *b) {
    int n = cJSON_GetArraySize(messages), i = 0;
    size_t len = 0;
    infer_chat_message *msgs;
    char **texts, *prompt = NULL;
    cJSON *m, *told = NULL;
    if (!cJSON_IsArray(messages) || n < 1) {
        serve_bad(b, "messages", "'messages' must be a non-empty array of {role, content}");
        return NULL;
    }
    if (s->max_messages && n > s->max_messages) { /* (0: no limit) */
        serve_bad(b, "messages", "'messages' has %d messages; this server takes at most %d (--max-messages)", n, s->max_messages);
        b->code = "too_many_messages";
        return NULL;
    }
    msgs = (infer_chat_message *)calloc((size_t)n, sizeof *msgs);
    texts = (char **)calloc((size_t)n, sizeof *texts);
    if (!msgs || !texts) goto done;
    cJSON_ArrayForEach(m, messages) {
        cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            serve_bad(b, "messages", "messages[%d] must be an object with a string role", i);
            goto done;
        }
        /* the API's roles; a template given another would show it to the model as if it were one */
        if (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "developer") &&
            strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "tool")) {
            serve_bad(b, "messages", "messages[%d].role '%.64s' is not one of system, developer, user, assistant, tool", i,
                role->valuestring);
            goto done;
        }
        if (!(texts[i] = message_content(serve_field(m, "content"), i, b))) goto done;
        /* "developer" is the API's newer name for the system role */
        msgs[i].role = !strcmp(role->valuestring, "developer") ? "system" : role->valuestring;
        msgs[i].content = texts[i];
        i++;
    }
    if (s->jinja) {
        prompt = chat_prompt_jinja(s, body, messages, tools, b);
        goto done;
    }
    if (serve_tools_active(tools) || cJSON_GetObjectItemCaseSensitive(body, "tools")) {
        /* the built-in formats know no tools: told in the system message,
           calls written as the generic format's JSON (a message more) */
        for (i = 0; i < n; i++) free(texts[i]);
        free(texts);
        free(msgs);
        if (!(told = serve_tools_messages(messages, tools, 1))) return NULL;
        n = cJSON_GetArraySize(told);
        msgs = (infer_chat_message *)calloc((size_t)n, sizeof *msgs);
        texts = (char **)calloc((size_t)n, sizeof *texts);
        if (!msgs || !texts) goto done;
        i = 0;
        cJSON_ArrayForEach(m, told) {
            cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            if (!(texts[i] = message_content(serve_field(m, "content"), i, b))) goto done;
            msgs[i].role = !strcmp(role->valuestring, "developer") ? "system" : role->valuestring;
            msgs[i].content = texts[i];
            i++;
        }
    }
    if (infer_chat_format(&s->tmpl, msgs, n, 0, 1, NULL, 0, &len, NULL) != INFER_OK ||
        !(prompt = (char *)malloc(len + 1))) {
        serve_bad(b, "messages", "the messages could not be formatted");
        goto done;
    }
    infer_chat_format(&s->tmpl, msgs, n, 0, 1, prompt, len + 1, NULL, NULL);
done:
    for (i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(msgs);
    cJSON_Delete(told);
    return prompt;
}

