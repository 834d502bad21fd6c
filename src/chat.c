/* chat.c - chat templates: recognizing the model's tokenizer.chat_template
   by its text, and formatting a conversation as that template renders it:
   the format's Jinja text (chat_formats.c) run by jinja.c's interpreter,
   message by message, so that a chat can feed only the new messages. */
#include "internal.h"

static const char *const infer__chat_names[INFER_CHAT_KIND_COUNT] = {
    "chatml",     "llama2",      "mistral",   "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
    "llama3",     "gemma",       "phi3",      "zephyr",     "deepseek",   "deepseek2",         "deepseek3",
    "llama3.1",   "qwen3",       "phi4",      "phi4-mini",  "smollm3",    "mistral-v7-tekken", "gemma4",
};

INFERDEF const char *infer_chat_template_name(infer_chat_kind k) {
    return (int)k >= 0 && k < INFER_CHAT_KIND_COUNT ? infer__chat_names[k] : "unknown";
}

/* 1 if needle occurs in s[0..n) */
static int infer__chat_has(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle), i;
    if (k == 0) return 1;
    if (k > n) return 0;
    for (i = 0; i + k <= n; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, k)) return 1;
    return 0;
}

/* The format a template's text selects, or -1. The markers are the ones
   llama.cpp's llm_chat_detect_template looks for, plus those that tell the
   newer families from the format they extend. */
static int infer__chat_kind_of(const char *t, size_t n) {
    int k;
#define HAS(x) infer__chat_has(t, n, x)
    for (k = 0; k < INFER_CHAT_KIND_COUNT; k++) /* a format's own name */
        if (strlen(infer__chat_names[k]) == n && !memcmp(t, infer__chat_names[k], n)) return k;
    if (HAS("<|im_start|>")) {
        if (HAS("<|im_sep|>")) return INFER_CHAT_KIND_PHI4;
        if (HAS("<end_of_utterance>")) return -1; /* SmolVLM: <|im_start|> is its BOS, not ChatML */
        if (HAS("Knowledge Cutoff Date") && HAS("Reasoning Mode")) return INFER_CHAT_KIND_SMOLLM3;
        if (HAS("</think>")) return INFER_CHAT_KIND_QWEN3; /* strips reasoning from earlier replies */
        return INFER_CHAT_KIND_CHATML;
    }
    if (HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) /* Mistral Small 3's "v7-tekken" has no space after the tags */
            return HAS("[INST] ") || HAS("[SYSTEM_PROMPT] ") ? INFER_CHAT_KIND_MISTRAL_V7 : INFER_CHAT_KIND_MISTRAL_V7_TEKKEN;
        if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) {
            if (HAS(" [INST]")) return INFER_CHAT_KIND_MISTRAL_V1;
            if (HAS("\"[INST]\"")) return INFER_CHAT_KIND_MISTRAL_V3_TEKKEN;
            return INFER_CHAT_KIND_MISTRAL_V3;
        }
        return HAS("<<SYS>>") ? INFER_CHAT_KIND_LLAMA2 : INFER_CHAT_KIND_MISTRAL;
    }
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>"))
        return HAS("Cutting Knowledge Date") ? INFER_CHAT_KIND_LLAMA31 : INFER_CHAT_KIND_LLAMA3;
    if (HAS("<|assistant|>") && HAS("<|end|>")) /* Phi-4-mini: nothing between the role and the text */
        return HAS("|>' + message['content']") || HAS("|>' + message.content") ? INFER_CHAT_KIND_PHI4_MINI : INFER_CHAT_KIND_PHI3;
    if (HAS("[gMASK]")) return -1; /* ChatGLM: <|user|> too, but another format */
    if (HAS("<|user|>") && HAS("<|assistant|>") && (HAS("eos_token") || HAS("</s>") || HAS("<|endoftext|>")))
        return INFER_CHAT_KIND_ZEPHYR;
    if (HAS("<|turn>") && HAS("<turn|>")) return INFER_CHAT_KIND_GEMMA4; /* Gemma 3's markers changed */
    if (HAS("<start_of_turn>")) return INFER_CHAT_KIND_GEMMA;
    if (HAS("### Instruction:") && HAS("<|EOT|>")) return INFER_CHAT_KIND_DEEPSEEK;
    if (HAS("'Assistant: ' + message['content'] + eos_token")) return INFER_CHAT_KIND_DEEPSEEK2;
    if (HAS("<\xef\xbd\x9cUser\xef\xbd\x9c>") && HAS("<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>")) return INFER_CHAT_KIND_DEEPSEEK3;
#undef HAS
    return -1;
}

/* A ChatML template's default system message: the literal text of a
   '<|im_start|>system\n...<|im_end|>' string (Qwen2/2.5, SmolLM2 write it
   when the conversation has no system message); "" when there is none. */
static void infer__chat_default_system(const char *t, size_t n, char *dst, size_t size) {
    static const char mark[] = "<|im_start|>system";
    size_t i, m = sizeof mark - 1;
    dst[0] = 0;
    for (i = 0; i + m <= n; i++) {
        size_t j = i + m, k, o = 0;
        if (memcmp(t + i, mark, m)) continue;
        if (j < n && t[j] == '\n') j++; /* a real newline or Jinja's \n */
        else if (j + 1 < n && t[j] == '\\' && t[j + 1] == 'n') j += 2;
        else continue;
        for (k = j; k < n && t[k] != '<' && t[k] != '\'' && t[k] != '"' && t[k] != '{' && t[k] != '}'; k++) {}
        if (k == j || k + 10 > n || memcmp(t + k, "<|im_end|>", 10)) continue;
        for (; j < k && o + 1 < size; j++) {
            if (t[j] == '\\' && j + 1 < k && t[j + 1] == 'n') dst[o++] = '\n', j++;
            else dst[o++] = t[j];
        }
        dst[o] = 0;
        return;
    }
}

static void infer__chat_copy(char *dst, size_t size, const char *src, size_t n) {
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* The literal after key (e.g. 'strftime_now(' or 'date_string = ') when it
   is a quoted string of fewer than size bytes; 0 when there is none. */
static int infer__chat_literal_after(const char *t, size_t n, const char *key, char *dst, size_t size) {
    size_t i, m = strlen(key);
    for (i = 0; t && i + m < n; i++) {
        size_t j;
        char q;
        if (memcmp(t + i, key, m)) continue;
        q = t[i + m];
        if (q != '"' && q != '\'') continue;
        for (j = i + m + 1; j < n && t[j] != q; j++) {}
        if (j >= n || j - (i + m + 1) >= size) continue;
        memcpy(dst, t + i + m + 1, j - (i + m + 1));
        dst[j - (i + m + 1)] = 0;
        return 1;
    }
    return 0;
}

/* The date a system header gives as today's: where the template calls
   strftime_now, the local clock in its format (transformers and llama.cpp
   render it so; clock_fmt stands in when there is no template text), else
   its own date_string, else def. */
static void infer__chat_date(const char *t, size_t n, const char *clock_fmt, const char *def, char *dst, size_t size) {
    char fmt[32];
    int on_clock = infer__chat_literal_after(t, n, "strftime_now(", fmt, sizeof fmt);
    dst[0] = 0;
    if (!on_clock && clock_fmt) infer__chat_copy(fmt, sizeof fmt, clock_fmt, strlen(clock_fmt)), on_clock = 1;
    if (on_clock) {
        time_t now = time(NULL);
        struct tm tm;
        if (infer__local_time(now, &tm) && strftime(dst, size, fmt, &tm) > 0) return;
    }
    if (!infer__chat_literal_after(t, n, "date_string = ", dst, size)) infer__chat_copy(dst, size, def, strlen(def));
}

/* What the kind needs from the template's text besides its kind. */
static void infer__chat_extras(infer_chat_template *t, const char *text, size_t n) {
    if (t->kind == INFER_CHAT_KIND_CHATML && text) infer__chat_default_system(text, n, t->default_system, sizeof t->default_system);
    if (t->kind == INFER_CHAT_KIND_LLAMA31) infer__chat_date(text, n, NULL, "26 Jul 2024", t->date, sizeof t->date);
    if (t->kind == INFER_CHAT_KIND_SMOLLM3) infer__chat_date(text, n, "%d %B %Y", "", t->date, sizeof t->date);
}

INFERDEF infer_chat_template infer_chat_template_from_text(const char *text, const char *bos, const char *eos) {
    infer_chat_template t;
    size_t n = text ? strlen(text) : 0;
    int k = text ? infer__chat_kind_of(text, n) : -1;
    memset(&t, 0, sizeof t);
    t.kind = k < 0 ? INFER_CHAT_KIND_CHATML : (infer_chat_kind)k;
    t.fallback = k < 0;
    if (k >= 0) infer__chat_extras(&t, text, n);
    bos = bos && *bos ? bos : "<s>";
    eos = eos && *eos ? eos : "</s>";
    infer__chat_copy(t.bos, sizeof t.bos, bos, strlen(bos));
    infer__chat_copy(t.eos, sizeof t.eos, eos, strlen(eos));
    return t;
}

/* The text of token id in the vocabulary (control tokens included), or def. */
static void infer__chat_token_text(const infer_gguf *g, int64_t id, char *dst, size_t size, const char *def) {
    const infer__kv *kv = infer__gguf_kv(g, "tokenizer.ggml.tokens");
    if (id >= 0 && kv && kv->type == INFER_GGUF_TYPE_ARRAY && kv->strs && (uint64_t)id < kv->arr_n && kv->strs[id].n > 0)
        infer__chat_copy(dst, size, kv->strs[id].p, (size_t)kv->strs[id].n);
    else
        infer__chat_copy(dst, size, def, strlen(def));
}

INFERDEF infer_chat_template infer_chat_template_detect(const infer_model *m) {
    infer_chat_template t = infer_chat_template_from_text(NULL, NULL, NULL);
    const infer_gguf *g;
    infer__str s;
    int k;
    if (!m) return t;
    g = infer_model_gguf(m);
    if (infer__gguf_get_str(g, "tokenizer.chat_template", &s)) {
        k = infer__chat_kind_of(s.p, (size_t)s.n);
        if (k >= 0) t.kind = (infer_chat_kind)k, t.fallback = 0, infer__chat_extras(&t, s.p, (size_t)s.n);
    }
    infer__chat_token_text(g, infer_model_bos(m), t.bos, sizeof t.bos, "<s>");
    infer__chat_token_text(g, infer_model_eos(m), t.eos, sizeof t.eos, "</s>");
    return t;
}

/* ---- formatting: the kind's Jinja text (chat_formats.c), rendered ---- */

/* length of a template field (a C string that should end within its array) */
static size_t infer__chat_field_len(const char *s, size_t size) {
    const char *end = (const char *)memchr(s, 0, size);
    return end ? (size_t)(end - s) : size;
}

static void infer__chat_json_key(infer__sb *b, const char *key, const char *s, size_t n) {
    infer__sb_putc(b, ',');
    infer__sb_json_string(b, key, strlen(key));
    infer__sb_putc(b, ':');
    infer__sb_json_string(b, s, n);
}

/* The kind's text rendered for msgs[0..n) (malloc'd, NUL-terminated), or
   NULL when memory ran out. The context's strings are the caller's bytes
   as they are, UTF-8 or not (JSON-escaped, read back raw). */
static char *infer__chat_render(const infer_chat_template *t, const infer_chat_message *msgs, int n, int add,
                                size_t *len) {
    infer__sb ctx = {NULL, 0};
    infer_jinja_limits lim = infer_jinja_default_limits();
    infer_error err;
    char *out = NULL;
    int i;
    infer__sb_puts(&ctx, "{\"messages\":[");
    for (i = 0; i < n; i++) {
        infer__sb_puts(&ctx, i ? ",{\"role\":" : "{\"role\":");
        infer__sb_json_string(&ctx, msgs[i].role, strlen(msgs[i].role));
        infer__sb_puts(&ctx, ",\"content\":");
        infer__sb_json_string(&ctx, msgs[i].content, strlen(msgs[i].content));
        infer__sb_putc(&ctx, '}');
    }
    infer__sb_puts(&ctx, add ? "],\"add_generation_prompt\":true" : "],\"add_generation_prompt\":false");
    infer__sb_puts(&ctx, t->no_think ? ",\"no_think\":true" : ",\"no_think\":false");
    infer__chat_json_key(&ctx, "bos_token", t->bos, infer__chat_field_len(t->bos, sizeof t->bos));
    infer__chat_json_key(&ctx, "eos_token", t->eos, infer__chat_field_len(t->eos, sizeof t->eos));
    infer__chat_json_key(&ctx, "default_system", t->default_system,
                         infer__chat_field_len(t->default_system, sizeof t->default_system));
    infer__chat_json_key(&ctx, "date", t->date, infer__chat_field_len(t->date, sizeof t->date));
    infer__sb_puts(&ctx, "}");
    infer__sb_putc(&ctx, 0);
    /* The built-in texts are trusted and do work linear in the
       conversation: it alone bounds their steps, output and memory (the
       defaults, made for templates from files, would refuse a chat of more
       than 16 MiB, which the formats always wrote). */
    lim.max_steps = INT64_MAX;
    lim.max_output = INT_MAX;
    lim.max_memory = (size_t)-1;
    if (!ctx.nomem) out = infer__jinja_render_raw(infer__chat_format_text(t->kind), ctx.p, &lim, &err);
    stbds_arrfree(ctx.p);
    if (out) *len = strlen(out);
    return out;
}

INFERDEF infer_status infer_chat_format(const infer_chat_template *t, const infer_chat_message *msgs, int n, int from,
                                        int add_assistant_prompt, char *buf, size_t size, size_t *n_out,
                                        infer_error *err) {
    char *whole = NULL, *head = NULL;
    size_t whole_len = 0, head_len = 0, len = 0;
    infer_status st = INFER_OK;
    int i;
    if (n_out) *n_out = 0;
    if (buf && size) buf[0] = 0;
    if (!t || n < 0 || from < 0 || from > n || (n > 0 && !msgs) || (size > 0 && !buf)) {
        infer__set_error(err, INFER_ERR_ARG, "chat format: %s", !t ? "no template" : size > 0 && !buf ? "no buffer"
                         : n > 0 && !msgs ? "no messages" : "from or n out of range");
        return INFER_ERR_ARG;
    }
    for (i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) {
            infer__set_error(err, INFER_ERR_ARG, "chat format: message %d has no %s", i,
                             !msgs[i].role ? "role" : "content");
            return INFER_ERR_ARG;
        }
    if (from == n && !add_assistant_prompt) len = 0; /* nothing new */
    else if ((whole = infer__chat_render(t, msgs, n, add_assistant_prompt, &whole_len)) != NULL) {
        /* messages from `from` on: the whole less the rendering up to there,
           which every built-in text makes a prefix of it */
        if (from > 0) head = infer__chat_render(t, msgs, from, 0, &head_len);
        if (from > 0 && !head) st = INFER_ERR_NOMEM;
        else if (head_len <= whole_len && !memcmp(whole, head ? head : "", head_len)) len = whole_len - head_len;
        else st = INFER_ERR_ARG;
    } else st = INFER_ERR_NOMEM;
    if (st != INFER_OK) {
        infer__set_error(err, st, "chat format: %s", st == INFER_ERR_NOMEM ? "out of memory"
                         : "the messages before `from` do not render as a prefix of the whole");
    } else if (size > 0) {
        size_t k = len < size ? len : size - 1;
        if (k) memcpy(buf, whole + head_len, k);
        buf[k] = 0;
    }
    INFER_FREE(whole);
    INFER_FREE(head);
    if (st == INFER_OK && n_out) *n_out = len;
    return st;
}

INFERDEF infer_status infer_chat_end_of_turn(const infer_chat_template *t, char *buf, size_t size, size_t *n_out,
                                             infer_error *err) {
    const char *end = NULL, *after_eos = ""; /* end NULL: the EOS, then after_eos */
    int len;
    if (n_out) *n_out = 0;
    if (!t || (size > 0 && !buf)) {
        infer__set_error(err, INFER_ERR_ARG, "chat end of turn: %s", !t ? "no template" : "no buffer");
        return INFER_ERR_ARG;
    }
    switch (t->kind) {
    case INFER_CHAT_KIND_CHATML:
    case INFER_CHAT_KIND_QWEN3:
    case INFER_CHAT_KIND_SMOLLM3: end = "<|im_end|>\n"; break;
    case INFER_CHAT_KIND_PHI4: end = "<|im_end|>"; break;
    case INFER_CHAT_KIND_PHI4_MINI: end = "<|end|>"; break;
    case INFER_CHAT_KIND_LLAMA3:
    case INFER_CHAT_KIND_LLAMA31: end = "<|eot_id|>"; break;
    case INFER_CHAT_KIND_PHI3: end = "<|end|>\n"; break;
    case INFER_CHAT_KIND_GEMMA: end = "<end_of_turn>\n"; break;
    case INFER_CHAT_KIND_GEMMA4: end = "<turn|>\n"; break;
    case INFER_CHAT_KIND_DEEPSEEK: end = "\n<|EOT|>\n"; break;
    case INFER_CHAT_KIND_ZEPHYR: after_eos = "\n"; break;
    default: break;
    }
    if (end) len = snprintf(buf, size, "%s", end);
    else len = snprintf(buf, size, "%.*s%s", (int)infer__chat_field_len(t->eos, sizeof t->eos), t->eos, after_eos);
    if (n_out) *n_out = len > 0 ? (size_t)len : 0;
    return INFER_OK;
}
