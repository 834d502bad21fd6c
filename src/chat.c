/* chat.c - chat templates: recognizing the model's tokenizer.chat_template
   by its text and formatting a conversation the way that template renders
   it, message by message, so that a chat can feed only the new messages. */
#include "internal.h"

static const char *const infer__chat_names[INFER_CHAT_COUNT] = {
    "chatml",     "llama2",      "mistral",   "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
    "llama3",     "gemma",       "phi3",      "zephyr",     "deepseek",   "deepseek2",         "deepseek3",
};

INFERDEF const char *infer_chat_template_name(infer_chat_kind k) {
    return (int)k >= 0 && k < INFER_CHAT_COUNT ? infer__chat_names[k] : "unknown";
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
   llama.cpp's llm_chat_detect_template looks for. */
static int infer__chat_kind_of(const char *t, size_t n) {
    int k;
#define HAS(x) infer__chat_has(t, n, x)
    for (k = 0; k < INFER_CHAT_COUNT; k++) /* a format's own name */
        if (strlen(infer__chat_names[k]) == n && !memcmp(t, infer__chat_names[k], n)) return k;
    if (HAS("<|im_start|>")) /* Phi-4 (<|im_sep|>) and SmolVLM are not ChatML */
        return HAS("<|im_sep|>") || HAS("<end_of_utterance>") ? -1 : INFER_CHAT_CHATML;
    if (HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) return INFER_CHAT_MISTRAL_V7;
        if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) {
            if (HAS(" [INST]")) return INFER_CHAT_MISTRAL_V1;
            if (HAS("\"[INST]\"")) return INFER_CHAT_MISTRAL_V3_TEKKEN;
            return INFER_CHAT_MISTRAL_V3;
        }
        return HAS("<<SYS>>") ? INFER_CHAT_LLAMA2 : INFER_CHAT_MISTRAL;
    }
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) return INFER_CHAT_LLAMA3;
    if (HAS("<|assistant|>") && HAS("<|end|>")) return INFER_CHAT_PHI3;
    if (HAS("[gMASK]")) return -1; /* ChatGLM: <|user|> too, but another format */
    if (HAS("<|user|>") && HAS("<|assistant|>") && (HAS("eos_token") || HAS("</s>") || HAS("<|endoftext|>")))
        return INFER_CHAT_ZEPHYR;
    if (HAS("<start_of_turn>")) return INFER_CHAT_GEMMA;
    if (HAS("### Instruction:") && HAS("<|EOT|>")) return INFER_CHAT_DEEPSEEK;
    if (HAS("'Assistant: ' + message['content'] + eos_token")) return INFER_CHAT_DEEPSEEK2;
    if (HAS("<\xef\xbd\x9cUser\xef\xbd\x9c>") && HAS("<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>")) return INFER_CHAT_DEEPSEEK3;
#undef HAS
    return -1;
}

static void infer__chat_copy(char *dst, size_t size, const char *src, size_t n) {
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

INFERDEF infer_chat_template infer_chat_template_from_text(const char *text, const char *bos, const char *eos) {
    infer_chat_template t;
    int k = text ? infer__chat_kind_of(text, strlen(text)) : -1;
    memset(&t, 0, sizeof t);
    t.kind = k < 0 ? INFER_CHAT_CHATML : (infer_chat_kind)k;
    t.fallback = k < 0;
    bos = bos && *bos ? bos : "<s>";
    eos = eos && *eos ? eos : "</s>";
    infer__chat_copy(t.bos, sizeof t.bos, bos, strlen(bos));
    infer__chat_copy(t.eos, sizeof t.eos, eos, strlen(eos));
    return t;
}

/* The text of token id in the vocabulary (control tokens included), or def. */
static void infer__chat_token_text(const infer_gguf *g, int64_t id, char *dst, size_t size, const char *def) {
    const infer__kv *kv = infer__gguf_kv(g, "tokenizer.ggml.tokens");
    if (id >= 0 && kv && kv->type == INFER_GGUF_ARRAY && kv->strs && (uint64_t)id < kv->arr_n && kv->strs[id].n > 0)
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
        if (k >= 0) t.kind = (infer_chat_kind)k, t.fallback = 0;
    }
    infer__chat_token_text(g, infer_model_bos(m), t.bos, sizeof t.bos, "<s>");
    infer__chat_token_text(g, infer_model_eos(m), t.eos, sizeof t.eos, "</s>");
    return t;
}

/* ---- formatting ---- */

typedef struct infer__chat_out {
    char *buf;
    size_t size, len;
} infer__chat_out;

static void infer__chat_put(infer__chat_out *o, const char *s, size_t n) {
    if (o->buf && o->len < o->size) {
        size_t room = o->size - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

static void infer__chat_puts(infer__chat_out *o, const char *s) { infer__chat_put(o, s, strlen(s)); }

static int infer__chat_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* s without leading and trailing whitespace (as Jinja's trim / Python's strip) */
static void infer__chat_put_trim(infer__chat_out *o, const char *s) {
    size_t n = strlen(s);
    while (n && infer__chat_space(*s)) s++, n--;
    while (n && infer__chat_space(s[n - 1])) n--;
    infer__chat_put(o, s, n);
}

static void infer__chat_put_trimmed_right(infer__chat_out *o, const char *s) {
    size_t n = strlen(s);
    while (n && infer__chat_space(s[n - 1])) n--;
    infer__chat_put(o, s, n);
}

static int infer__chat_is(const infer_chat_message *m, const char *role) { return !strcmp(m->role, role); }

/* Index of the first message of role r at or after from, below i, or -1. */
static int infer__chat_first_of(const infer_chat_message *msgs, int n, const char *role) {
    int i;
    for (i = 0; i < n; i++)
        if (infer__chat_is(&msgs[i], role)) return i;
    return -1;
}

/* Writes message i of msgs (its rendering depends only on msgs[0..i]). */
static void infer__chat_piece(const infer_chat_template *t, const infer_chat_message *msgs, int i, infer__chat_out *o) {
    const infer_chat_message *m = &msgs[i];
    int sys = infer__chat_is(m, "system"), user = infer__chat_is(m, "user"), asst = infer__chat_is(m, "assistant");
    int has_sys = infer__chat_is(&msgs[0], "system");
    int first_user = user && infer__chat_first_of(msgs, i + 1, "user") == i;
    switch (t->kind) {
    case INFER_CHAT_CHATML:
    default:
        infer__chat_puts(o, "<|im_start|>");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "\n");
        infer__chat_puts(o, m->content);
        infer__chat_puts(o, "<|im_end|>\n");
        break;
    case INFER_CHAT_LLAMA3:
        infer__chat_puts(o, "<|start_header_id|>");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "<|end_header_id|>\n\n");
        infer__chat_put_trim(o, m->content);
        infer__chat_puts(o, "<|eot_id|>");
        break;
    case INFER_CHAT_PHI3:
        infer__chat_puts(o, "<|");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "|>\n");
        infer__chat_puts(o, m->content);
        infer__chat_puts(o, "<|end|>\n");
        break;
    case INFER_CHAT_ZEPHYR:
        infer__chat_puts(o, "<|");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "|>\n");
        infer__chat_puts(o, m->content);
        infer__chat_puts(o, t->eos);
        infer__chat_puts(o, "\n");
        break;
    case INFER_CHAT_GEMMA: {
        /* no system role: system text goes at the top of the next user turn */
        int j;
        if (sys) break;
        infer__chat_puts(o, "<start_of_turn>");
        infer__chat_puts(o, asst ? "model" : m->role);
        infer__chat_puts(o, "\n");
        if (!asst) {
            int any = 0;
            for (j = i - 1; j >= 0 && infer__chat_is(&msgs[j], "system"); j--) {}
            for (j++; j < i; j++) infer__chat_put_trim(o, msgs[j].content), any = 1;
            if (any) infer__chat_puts(o, "\n\n");
        }
        infer__chat_put_trim(o, m->content);
        infer__chat_puts(o, "<end_of_turn>\n");
        break;
    }
    case INFER_CHAT_LLAMA2: /* Llama-2-chat: <<SYS>> inside the first [INST], BOS before each later one */
        if (user) {
            const char *c = m->content;
            if (!first_user) infer__chat_puts(o, t->bos);
            infer__chat_puts(o, "[INST] ");
            if (first_user && has_sys && i > 0) {
                infer__chat_puts(o, "<<SYS>>\n");
                infer__chat_puts(o, msgs[0].content);
                infer__chat_puts(o, "\n<</SYS>>\n\n");
                infer__chat_put_trimmed_right(o, c); /* strip() of the whole: its start is <<SYS>> */
            } else {
                infer__chat_put_trim(o, c);
            }
            infer__chat_puts(o, " [/INST]");
        } else if (asst) {
            infer__chat_puts(o, " ");
            infer__chat_put_trim(o, m->content);
            infer__chat_puts(o, " ");
            infer__chat_puts(o, t->eos);
        }
        break;
    case INFER_CHAT_MISTRAL: /* [INST] x [/INST]; no system role: its text heads the first turn */
        if (user) {
            infer__chat_puts(o, "[INST] ");
            if (first_user && has_sys && i > 0) {
                infer__chat_puts(o, msgs[0].content);
                infer__chat_puts(o, "\n");
            }
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, " [/INST]");
        } else if (asst) {
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, t->eos);
        }
        break;
    case INFER_CHAT_MISTRAL_V1:
    case INFER_CHAT_MISTRAL_V3:
    case INFER_CHAT_MISTRAL_V3_TEKKEN: {
        int v1 = t->kind == INFER_CHAT_MISTRAL_V1, tekken = t->kind == INFER_CHAT_MISTRAL_V3_TEKKEN;
        if (user) {
            infer__chat_puts(o, v1 ? " [INST] " : tekken ? "[INST]" : "[INST] ");
            if (first_user && has_sys && i > 0) {
                infer__chat_puts(o, msgs[0].content);
                infer__chat_puts(o, "\n\n");
            }
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, v1 ? " [/INST]" : "[/INST]");
        } else if (asst) {
            if (!tekken) infer__chat_puts(o, " ");
            if (t->kind == INFER_CHAT_MISTRAL_V3) infer__chat_put_trim(o, m->content);
            else infer__chat_puts(o, m->content);
            infer__chat_puts(o, t->eos);
        }
        break;
    }
    case INFER_CHAT_MISTRAL_V7:
        if (sys) {
            infer__chat_puts(o, "[SYSTEM_PROMPT] ");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "[/SYSTEM_PROMPT]");
        } else if (user) {
            infer__chat_puts(o, "[INST] ");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "[/INST]");
        } else if (asst) {
            infer__chat_puts(o, " ");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, t->eos);
        }
        break;
    case INFER_CHAT_DEEPSEEK: /* deepseek-coder-instruct: its own system text when none is given */
        if (i == 0 && !sys)
            infer__chat_puts(o, "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by "
                                "Deepseek Company, and you only answer questions related to computer science. For "
                                "politically sensitive questions, security and privacy issues, and other non-computer "
                                "science questions, you will refuse to answer\n");
        if (sys) {
            infer__chat_puts(o, m->content);
        } else if (user) {
            infer__chat_puts(o, "### Instruction:\n");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "\n");
        } else {
            infer__chat_puts(o, "### Response:\n");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "\n<|EOT|>\n");
        }
        break;
    case INFER_CHAT_DEEPSEEK2:
        if (sys) {
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "\n\n");
        } else if (user) {
            infer__chat_puts(o, "User: ");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "\n\n");
        } else if (asst) {
            infer__chat_puts(o, "Assistant: ");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, t->eos);
        }
        break;
    case INFER_CHAT_DEEPSEEK3:
        if (sys) {
            infer__chat_puts(o, m->content);
        } else if (user) {
            infer__chat_puts(o, "<\xef\xbd\x9cUser\xef\xbd\x9c>");
            infer__chat_puts(o, m->content);
        } else if (asst) {
            infer__chat_puts(o, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, t->eos);
        }
        break;
    }
}

/* The text that starts the assistant's reply (after the last message). */
static const char *infer__chat_gen_prompt(infer_chat_kind k) {
    switch (k) {
    case INFER_CHAT_CHATML: return "<|im_start|>assistant\n";
    case INFER_CHAT_LLAMA3: return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case INFER_CHAT_PHI3:
    case INFER_CHAT_ZEPHYR: return "<|assistant|>\n";
    case INFER_CHAT_GEMMA: return "<start_of_turn>model\n";
    case INFER_CHAT_DEEPSEEK: return "### Response:\n";
    case INFER_CHAT_DEEPSEEK2: return "Assistant:";
    case INFER_CHAT_DEEPSEEK3: return "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>";
    default: return ""; /* Llama 2 and Mistral: [/INST] already ends the user turn */
    }
}

INFERDEF int infer_chat_format(const infer_chat_template *t, const infer_chat_message *msgs, int n, int from,
                               int add_assistant_prompt, char *buf, size_t size) {
    infer__chat_out o;
    int i;
    if (!t || n < 0 || from < 0 || from > n || (n > 0 && !msgs) || (size > 0 && !buf)) return -1;
    for (i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) return -1;
    o.buf = buf;
    o.size = size;
    o.len = 0;
    for (i = from; i < n; i++) infer__chat_piece(t, msgs, i, &o);
    if (add_assistant_prompt) infer__chat_puts(&o, infer__chat_gen_prompt(t->kind));
    if (size > 0) buf[o.len < size ? o.len : size - 1] = 0;
    return o.len > (size_t)INT_MAX ? -1 : (int)o.len;
}

INFERDEF int infer_chat_end_of_turn(const infer_chat_template *t, char *buf, size_t size) {
    infer__chat_out o;
    if (!t || (size > 0 && !buf)) return -1;
    o.buf = buf;
    o.size = size;
    o.len = 0;
    switch (t->kind) {
    case INFER_CHAT_CHATML: infer__chat_puts(&o, "<|im_end|>\n"); break;
    case INFER_CHAT_LLAMA3: infer__chat_puts(&o, "<|eot_id|>"); break;
    case INFER_CHAT_PHI3: infer__chat_puts(&o, "<|end|>\n"); break;
    case INFER_CHAT_GEMMA: infer__chat_puts(&o, "<end_of_turn>\n"); break;
    case INFER_CHAT_DEEPSEEK: infer__chat_puts(&o, "\n<|EOT|>\n"); break;
    case INFER_CHAT_ZEPHYR:
        infer__chat_puts(&o, t->eos);
        infer__chat_puts(&o, "\n");
        break;
    default: infer__chat_puts(&o, t->eos); break;
    }
    if (size > 0) buf[o.len < size ? o.len : size - 1] = 0;
    return (int)o.len;
}
