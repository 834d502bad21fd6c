/* chat.c - chat templates: recognizing the model's tokenizer.chat_template
   by its text and formatting a conversation the way that template renders
   it, message by message, so that a chat can feed only the new messages. */
#include "internal.h"

static const char *const infer__chat_names[INFER_CHAT_COUNT] = {
    "chatml",     "llama2",      "mistral",   "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
    "llama3",     "gemma",       "phi3",      "zephyr",     "deepseek",   "deepseek2",         "deepseek3",
    "llama3.1",   "qwen3",       "phi4",      "phi4-mini",  "smollm3",    "mistral-v7-tekken",
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
   llama.cpp's llm_chat_detect_template looks for, plus those that tell the
   newer families from the format they extend. */
static int infer__chat_kind_of(const char *t, size_t n) {
    int k;
#define HAS(x) infer__chat_has(t, n, x)
    for (k = 0; k < INFER_CHAT_COUNT; k++) /* a format's own name */
        if (strlen(infer__chat_names[k]) == n && !memcmp(t, infer__chat_names[k], n)) return k;
    if (HAS("<|im_start|>")) {
        if (HAS("<|im_sep|>")) return INFER_CHAT_PHI4;
        if (HAS("<end_of_utterance>")) return -1; /* SmolVLM: <|im_start|> is its BOS, not ChatML */
        if (HAS("Knowledge Cutoff Date") && HAS("Reasoning Mode")) return INFER_CHAT_SMOLLM3;
        if (HAS("</think>")) return INFER_CHAT_QWEN3; /* strips reasoning from earlier replies */
        return INFER_CHAT_CHATML;
    }
    if (HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) /* Mistral Small 3's "v7-tekken" has no space after the tags */
            return HAS("[INST] ") || HAS("[SYSTEM_PROMPT] ") ? INFER_CHAT_MISTRAL_V7 : INFER_CHAT_MISTRAL_V7_TEKKEN;
        if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) {
            if (HAS(" [INST]")) return INFER_CHAT_MISTRAL_V1;
            if (HAS("\"[INST]\"")) return INFER_CHAT_MISTRAL_V3_TEKKEN;
            return INFER_CHAT_MISTRAL_V3;
        }
        return HAS("<<SYS>>") ? INFER_CHAT_LLAMA2 : INFER_CHAT_MISTRAL;
    }
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>"))
        return HAS("Cutting Knowledge Date") ? INFER_CHAT_LLAMA31 : INFER_CHAT_LLAMA3;
    if (HAS("<|assistant|>") && HAS("<|end|>")) /* Phi-4-mini: nothing between the role and the text */
        return HAS("|>' + message['content']") || HAS("|>' + message.content") ? INFER_CHAT_PHI4_MINI : INFER_CHAT_PHI3;
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
        if (localtime_r(&now, &tm) && strftime(dst, size, fmt, &tm) > 0) return;
    }
    if (!infer__chat_literal_after(t, n, "date_string = ", dst, size)) infer__chat_copy(dst, size, def, strlen(def));
}

/* What the kind needs from the template's text besides its kind. */
static void infer__chat_extras(infer_chat_template *t, const char *text, size_t n) {
    if (t->kind == INFER_CHAT_CHATML && text) infer__chat_default_system(text, n, t->default_system, sizeof t->default_system);
    if (t->kind == INFER_CHAT_LLAMA31) infer__chat_date(text, n, NULL, "26 Jul 2024", t->date, sizeof t->date);
    if (t->kind == INFER_CHAT_SMOLLM3) infer__chat_date(text, n, "%d %B %Y", "", t->date, sizeof t->date);
}

INFERDEF infer_chat_template infer_chat_template_from_text(const char *text, const char *bos, const char *eos) {
    infer_chat_template t;
    size_t n = text ? strlen(text) : 0;
    int k = text ? infer__chat_kind_of(text, n) : -1;
    memset(&t, 0, sizeof t);
    t.kind = k < 0 ? INFER_CHAT_CHATML : (infer_chat_kind)k;
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
        if (k >= 0) t.kind = (infer_chat_kind)k, t.fallback = 0, infer__chat_extras(&t, s.p, (size_t)s.n);
    }
    infer__chat_token_text(g, infer_model_bos(m), t.bos, sizeof t.bos, "<s>");
    infer__chat_token_text(g, infer_model_eos(m), t.eos, sizeof t.eos, "</s>");
    return t;
}

/* ---- formatting ---- */

typedef struct infer__chat_out {
    char *buf;
    size_t size, len;
    int nomem; /* text was left out for want of memory */
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

/* 1 if needle occurs in the C string s */
static int infer__chat_in(const char *s, const char *needle) { return infer__chat_has(s, strlen(s), needle); }

/* Writes s with every occurrence of each cut[] removed, the first cut
   everywhere before the next (Python's s.replace(a, "").replace(b, "")),
   then without trailing whitespace (rstrip). */
static void infer__chat_put_cut_rstrip(infer__chat_out *o, const char *s, const char *const *cut, int ncut) {
    char small[512], *a = small;
    size_t n = strlen(s), i, j;
    int c;
    if (n + 1 > sizeof small && !(a = (char *)INFER_MALLOC(n + 1))) {
        o->nomem = 1;
        return;
    }
    memcpy(a, s, n + 1);
    for (c = 0; c < ncut; c++) {
        size_t k = strlen(cut[c]);
        for (i = 0, j = 0; i < n;) {
            if (k && i + k <= n && !memcmp(a + i, cut[c], k)) i += k;
            else a[j++] = a[i++];
        }
        n = j;
    }
    while (n && infer__chat_space(a[n - 1])) n--;
    infer__chat_put(o, a, n);
    if (a != small) INFER_FREE(a);
}

/* An assistant message as Qwen3 writes one from history: the text after
   the last </think>, leading newlines dropped. */
static void infer__chat_put_answer(infer__chat_out *o, const char *s) {
    const char *p = s, *q;
    while ((q = strstr(p, "</think>")) != NULL) p = q + 8;
    if (p != s)
        while (*p == '\n') p++;
    infer__chat_puts(o, p);
}

static void infer__chat_put_lstrip_nl(infer__chat_out *o, const char *s) {
    while (*s == '\n') s++;
    infer__chat_puts(o, s);
}

/* SmolLM3's instructions when the system message gives none, thinking */
static const char infer__chat_smollm3_think[] =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
    "accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
    "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
    "structure your response into two main sections: Thought and Solution using the specified format: <think> "
    "Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. "
    "Each step should include detailed considerations such as analysing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The Solution section should "
    "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.";

/* SmolLM3's reasoning mode: "/no_think" or "/think" in the system message,
   else the template's default (enable_thinking). */
static int infer__chat_smollm3_no_think(const infer_chat_template *t, const infer_chat_message *msgs) {
    if (infer__chat_is(&msgs[0], "system")) {
        if (infer__chat_in(msgs[0].content, "/no_think")) return 1;
        if (infer__chat_in(msgs[0].content, "/think")) return 0;
    }
    return t->no_think != 0;
}

/* SmolLM3's system header. Without tools its template leaves it open: no
   <|im_end|> follows (a quirk of the template, kept as it renders). */
static void infer__chat_smollm3_header(const infer_chat_template *t, const infer_chat_message *msgs, infer__chat_out *o) {
    /* cutting "/system_override" after the others and a rstrip is the
       same as cutting all three, then one rstrip (none holds a space) */
    static const char *const cuts[] = {"/no_think", "/think", "/system_override"};
    int sys = infer__chat_is(&msgs[0], "system"), no_think = infer__chat_smollm3_no_think(t, msgs);
    infer__chat_puts(o, "<|im_start|>system\n");
    if (sys && infer__chat_in(msgs[0].content, "/system_override")) { /* the system message alone */
        infer__chat_put_cut_rstrip(o, msgs[0].content, cuts, 3);
        infer__chat_puts(o, "<|im_end|>\n");
        return;
    }
    infer__chat_puts(o, "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: ");
    infer__chat_puts(o, t->date);
    infer__chat_puts(o, no_think ? "\nReasoning Mode: /no_think\n\n" : "\nReasoning Mode: /think\n\n");
    infer__chat_puts(o, "## Custom Instructions\n\n");
    {
        size_t before = o->len;
        if (sys) infer__chat_put_cut_rstrip(o, msgs[0].content, cuts, 2);
        if (o->len == before)
            infer__chat_puts(o, no_think ? "You are a helpful AI assistant named SmolLM, trained by Hugging Face."
                                         : infer__chat_smollm3_think);
    }
    infer__chat_puts(o, "\n\n");
}

static void infer__chat_llama3_msg(infer__chat_out *o, const infer_chat_message *m) {
    infer__chat_puts(o, "<|start_header_id|>");
    infer__chat_puts(o, m->role);
    infer__chat_puts(o, "<|end_header_id|>\n\n");
    infer__chat_put_trim(o, m->content);
    infer__chat_puts(o, "<|eot_id|>");
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
        if (i == 0 && !sys && t->default_system[0]) {
            infer__chat_puts(o, "<|im_start|>system\n");
            infer__chat_puts(o, t->default_system);
            infer__chat_puts(o, "<|im_end|>\n");
        }
        infer__chat_puts(o, "<|im_start|>");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "\n");
        infer__chat_puts(o, m->content);
        infer__chat_puts(o, "<|im_end|>\n");
        break;
    case INFER_CHAT_QWEN3:
        infer__chat_puts(o, "<|im_start|>");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "\n");
        if (asst) infer__chat_put_answer(o, m->content);
        else infer__chat_puts(o, m->content);
        infer__chat_puts(o, "<|im_end|>\n");
        break;
    case INFER_CHAT_SMOLLM3: /* system: only in the header; other roles: none */
        if (i == 0) infer__chat_smollm3_header(t, msgs, o);
        if (user) {
            infer__chat_puts(o, "<|im_start|>user\n");
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "<|im_end|>\n");
        } else if (asst) {
            infer__chat_puts(o, "<|im_start|>assistant\n");
            if (infer__chat_smollm3_no_think(t, msgs)) infer__chat_puts(o, "<think>\n\n</think>\n");
            infer__chat_put_lstrip_nl(o, m->content);
            infer__chat_puts(o, "<|im_end|>\n");
        }
        break;
    case INFER_CHAT_PHI4:
        infer__chat_puts(o, "<|im_start|>");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "<|im_sep|>");
        infer__chat_puts(o, m->content);
        infer__chat_puts(o, "<|im_end|>");
        break;
    case INFER_CHAT_PHI4_MINI:
        infer__chat_puts(o, "<|");
        infer__chat_puts(o, m->role);
        infer__chat_puts(o, "|>");
        infer__chat_puts(o, m->content);
        infer__chat_puts(o, "<|end|>");
        break;
    case INFER_CHAT_LLAMA31:
        /* a system turn always comes first, with the dates; the system
           message (trimmed) ends it */
        if (i == 0) {
            infer__chat_puts(o, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
            infer__chat_puts(o, t->date);
            infer__chat_puts(o, "\n\n");
            if (sys) infer__chat_put_trim(o, m->content);
            infer__chat_puts(o, "<|eot_id|>");
            if (sys) break;
        }
        infer__chat_llama3_msg(o, m);
        break;
    case INFER_CHAT_LLAMA3: infer__chat_llama3_msg(o, m); break;
    case INFER_CHAT_PHI3:
        if (sys && !m->content[0]) break; /* Phi-3.5 skips an empty system message */
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
        if (!asst) { /* as Gemma 3: the system text as it is, then a blank line */
            for (j = i - 1; j >= 0 && infer__chat_is(&msgs[j], "system"); j--) {}
            for (j++; j < i; j++) infer__chat_puts(o, msgs[j].content), infer__chat_puts(o, "\n\n");
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
    case INFER_CHAT_MISTRAL_V7_TEKKEN: {
        const char *sp = t->kind == INFER_CHAT_MISTRAL_V7 ? " " : "";
        if (sys) {
            infer__chat_puts(o, "[SYSTEM_PROMPT]");
            infer__chat_puts(o, sp);
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "[/SYSTEM_PROMPT]");
        } else if (user) {
            infer__chat_puts(o, "[INST]");
            infer__chat_puts(o, sp);
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, "[/INST]");
        } else if (asst) {
            infer__chat_puts(o, sp);
            infer__chat_puts(o, m->content);
            infer__chat_puts(o, t->eos);
        }
        break;
    }
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

/* Writes the text that starts the assistant's reply (after the last message). */
static void infer__chat_gen_prompt(const infer_chat_template *t, const infer_chat_message *msgs, int n,
                                   infer__chat_out *o) {
    switch (t->kind) {
    case INFER_CHAT_CHATML: infer__chat_puts(o, "<|im_start|>assistant\n"); break;
    case INFER_CHAT_QWEN3:
        infer__chat_puts(o, "<|im_start|>assistant\n");
        if (t->no_think) infer__chat_puts(o, "<think>\n\n</think>\n\n");
        break;
    case INFER_CHAT_SMOLLM3:
        infer__chat_puts(o, "<|im_start|>assistant\n");
        if (n > 0 ? infer__chat_smollm3_no_think(t, msgs) : t->no_think) infer__chat_puts(o, "<think>\n\n</think>\n");
        break;
    case INFER_CHAT_PHI4: infer__chat_puts(o, "<|im_start|>assistant<|im_sep|>"); break;
    case INFER_CHAT_PHI4_MINI: infer__chat_puts(o, "<|assistant|>"); break;
    case INFER_CHAT_LLAMA3:
    case INFER_CHAT_LLAMA31: infer__chat_puts(o, "<|start_header_id|>assistant<|end_header_id|>\n\n"); break;
    case INFER_CHAT_PHI3:
    case INFER_CHAT_ZEPHYR: infer__chat_puts(o, "<|assistant|>\n"); break;
    case INFER_CHAT_GEMMA: infer__chat_puts(o, "<start_of_turn>model\n"); break;
    case INFER_CHAT_DEEPSEEK: infer__chat_puts(o, "### Response:\n"); break;
    case INFER_CHAT_DEEPSEEK2: infer__chat_puts(o, "Assistant:"); break;
    case INFER_CHAT_DEEPSEEK3: infer__chat_puts(o, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"); break;
    default: break; /* Llama 2 and Mistral: [/INST] already ends the user turn */
    }
}

INFERDEF int infer_chat_format(const infer_chat_template *t, const infer_chat_message *msgs, int n, int from,
                               int add_assistant_prompt, char *buf, size_t size) {
    infer__chat_out o;
    int i;
    if (!t || n < 0 || from < 0 || from > n || (n > 0 && !msgs) || (size > 0 && !buf)) return -1;
    for (i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) return -1;
    memset(&o, 0, sizeof o);
    o.buf = buf;
    o.size = size;
    for (i = from; i < n; i++) infer__chat_piece(t, msgs, i, &o);
    if (add_assistant_prompt) infer__chat_gen_prompt(t, msgs, n, &o);
    if (size > 0) buf[o.len < size ? o.len : size - 1] = 0;
    return o.len > (size_t)INT_MAX || o.nomem ? -1 : (int)o.len;
}

INFERDEF int infer_chat_end_of_turn(const infer_chat_template *t, char *buf, size_t size) {
    infer__chat_out o;
    if (!t || (size > 0 && !buf)) return -1;
    memset(&o, 0, sizeof o);
    o.buf = buf;
    o.size = size;
    switch (t->kind) {
    case INFER_CHAT_CHATML:
    case INFER_CHAT_QWEN3:
    case INFER_CHAT_SMOLLM3: infer__chat_puts(&o, "<|im_end|>\n"); break;
    case INFER_CHAT_PHI4: infer__chat_puts(&o, "<|im_end|>"); break;
    case INFER_CHAT_PHI4_MINI: infer__chat_puts(&o, "<|end|>"); break;
    case INFER_CHAT_LLAMA3:
    case INFER_CHAT_LLAMA31: infer__chat_puts(&o, "<|eot_id|>"); break;
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
