/* toolcall.c - a model's reply split into content, reasoning and tool calls,
   as it is generated (infer_output_parser), for the tool-call syntaxes the
   chat templates render (infer_tool_format). Calls are JSON, parsed by
   json.c's parser and written back compact. */
#include "internal.h"

/* ---- formats: markers and triggers ------------------------------------------ */

/* What a marker found in content opens. */
enum {
    INFER__K_DROP,        /* nothing: the marker is dropped */
    INFER__K_HERMES,      /* <tool_call> ... </tool_call> */
    INFER__K_PYTAG,       /* <|python_tag|> ... end of the reply */
    INFER__K_L3JSON,      /* {"name" at the start: one JSON object */
    INFER__K_MISTRAL,     /* [TOOL_CALLS] [..] or name[ARGS]{..} */
    INFER__K_PHI,         /* <|tool_call|> ... <|/tool_call|> */
    INFER__K_DS_CALLS,    /* <｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜> */
    INFER__K_DS_CALL,     /* <｜tool▁call▁begin｜> ... <｜tool▁call▁end｜> */
    INFER__K_CMDR,        /* <|START_ACTION|> ... <|END_ACTION|> */
    INFER__K_FUNCTIONARY, /* <function=name>{..}</function> */
    INFER__K_FIRE,        /* functools[..] */
    INFER__K_GENERIC,     /* { at the start: one JSON object */
    INFER__K_NEMOTRON,    /* <TOOLCALL>[..]</TOOLCALL> */
    INFER__K_APERTUS,     /* <|tools_prefix|>[{"name": {..}}]<|tools_suffix|> */
    INFER__K_XML_CALL,    /* <tool_call><function=name><parameter=k>v</parameter>..</function></tool_call> */
    INFER__K_XML_FN,      /* the same without <tool_call>: <function=name>..</function> */
    INFER__K_LFM2,        /* <|tool_call_start|>[name(k=v, ..), ..]<|tool_call_end|> */
    INFER__K_GEMMA4,      /* <|tool_call>call:name{k:v, ..}<tool_call|> */
    INFER__K_G4_CHANNEL   /* Gemma 4's <|channel>thought\n..<channel|>: reasoning */
};

typedef struct infer__tc_marker {
    const char *text;
    int kind;
} infer__tc_marker;

/* the markers found anywhere in content, per format, ending with {NULL} */
static const infer__tc_marker infer__tc_none[] = {{NULL, 0}};
static const infer__tc_marker infer__tc_hermes[] = {{"<tool_call>", INFER__K_HERMES}, {NULL, 0}};
static const infer__tc_marker infer__tc_llama3[] = {{"<|python_tag|>", INFER__K_PYTAG}, {NULL, 0}};
static const infer__tc_marker infer__tc_mistral_m[] = {{"[TOOL_CALLS]", INFER__K_MISTRAL}, {NULL, 0}};
static const infer__tc_marker infer__tc_phi[] = {{"<|tool_call|>", INFER__K_PHI}, {NULL, 0}};
static const infer__tc_marker infer__tc_ds[] = {
    {INFER__DS_CALLS_BEGIN, INFER__K_DS_CALLS}, {INFER__DS_CALL_BEGIN, INFER__K_DS_CALL}, {NULL, 0}};
static const infer__tc_marker infer__tc_cmdr[] = {{"<|START_ACTION|>", INFER__K_CMDR},
                                                  {"<|START_RESPONSE|>", INFER__K_DROP},
                                                  {"<|END_RESPONSE|>", INFER__K_DROP},
                                                  {NULL, 0}};
static const infer__tc_marker infer__tc_functionary[] = {{"<function=", INFER__K_FUNCTIONARY}, {NULL, 0}};
static const infer__tc_marker infer__tc_fire[] = {{"functools[", INFER__K_FIRE}, {NULL, 0}};
static const infer__tc_marker infer__tc_nemotron[] = {{"<TOOLCALL>", INFER__K_NEMOTRON}, {NULL, 0}};
static const infer__tc_marker infer__tc_apertus_m[] = {{"<|tools_prefix|>", INFER__K_APERTUS}, {NULL, 0}};
static const infer__tc_marker infer__tc_xml[] = {
    {"<tool_call>", INFER__K_XML_CALL}, {"<function=", INFER__K_XML_FN}, {NULL, 0}};
static const infer__tc_marker infer__tc_lfm2_m[] = {{"<|tool_call_start|>", INFER__K_LFM2}, {NULL, 0}};
/* a <channel|> with no <|channel> before it (Gemma 4 may write one at the
   end) is dropped */
static const infer__tc_marker infer__tc_gemma4_m[] = {{"<|tool_call>", INFER__K_GEMMA4},
                                                      {"<|channel>", INFER__K_G4_CHANNEL},
                                                      {"<channel|>", INFER__K_DROP},
                                                      {NULL, 0}};

static const infer__tc_marker *infer__tc_markers(infer_tool_format f) {
    switch (f) {
    case INFER_TOOL_FORMAT_HERMES: return infer__tc_hermes;
    case INFER_TOOL_FORMAT_LLAMA3: return infer__tc_llama3;
    case INFER_TOOL_FORMAT_MISTRAL: return infer__tc_mistral_m;
    case INFER_TOOL_FORMAT_PHI4_MINI: return infer__tc_phi;
    case INFER_TOOL_FORMAT_DEEPSEEK_R1: return infer__tc_ds;
    case INFER_TOOL_FORMAT_COMMAND_R: return infer__tc_cmdr;
    case INFER_TOOL_FORMAT_FUNCTIONARY: return infer__tc_functionary;
    case INFER_TOOL_FORMAT_FIREFUNCTION: return infer__tc_fire;
    case INFER_TOOL_FORMAT_NEMOTRON: return infer__tc_nemotron;
    case INFER_TOOL_FORMAT_APERTUS: return infer__tc_apertus_m;
    case INFER_TOOL_FORMAT_QWEN3_XML: return infer__tc_xml;
    case INFER_TOOL_FORMAT_LFM2: return infer__tc_lfm2_m;
    case INFER_TOOL_FORMAT_GEMMA4: return infer__tc_gemma4_m;
    default: return infer__tc_none;
    }
}

INFERDEF const char *const *infer_tool_format_triggers(infer_tool_format f) {
    static const char *const none[] = {NULL};
    static const char *const hermes[] = {"<tool_call>", NULL};
    static const char *const llama3[] = {"<|python_tag|>", "{\"name\"", "{ \"name\"", NULL};
    static const char *const mistral[] = {"[TOOL_CALLS]", NULL};
    static const char *const phi[] = {"<|tool_call|>", NULL};
    static const char *const ds[] = {INFER__DS_CALLS_BEGIN, INFER__DS_CALL_BEGIN, NULL};
    static const char *const cmdr[] = {"<|START_ACTION|>", NULL};
    static const char *const functionary[] = {"<function=", NULL};
    static const char *const fire[] = {"functools[", NULL};
    static const char *const generic[] = {"{", NULL};
    static const char *const nemotron[] = {"<TOOLCALL>", NULL};
    static const char *const apertus[] = {"<|tools_prefix|>", NULL};
    static const char *const xml[] = {"<tool_call>", "<function=", NULL};
    static const char *const lfm2[] = {"<|tool_call_start|>", NULL};
    static const char *const harmony[] = {"<|channel|>commentary to=", NULL};
    static const char *const gemma4[] = {"<|tool_call>", NULL};
    switch (f) {
    case INFER_TOOL_FORMAT_GENERIC: return generic;
    case INFER_TOOL_FORMAT_HERMES: return hermes;
    case INFER_TOOL_FORMAT_LLAMA3: return llama3;
    case INFER_TOOL_FORMAT_MISTRAL: return mistral;
    case INFER_TOOL_FORMAT_PHI4_MINI: return phi;
    case INFER_TOOL_FORMAT_DEEPSEEK_R1: return ds;
    case INFER_TOOL_FORMAT_COMMAND_R: return cmdr;
    case INFER_TOOL_FORMAT_FUNCTIONARY: return functionary;
    case INFER_TOOL_FORMAT_FIREFUNCTION: return fire;
    case INFER_TOOL_FORMAT_NEMOTRON: return nemotron;
    case INFER_TOOL_FORMAT_APERTUS: return apertus;
    case INFER_TOOL_FORMAT_QWEN3_XML: return xml;
    case INFER_TOOL_FORMAT_LFM2: return lfm2;
    case INFER_TOOL_FORMAT_HARMONY: return harmony;
    case INFER_TOOL_FORMAT_GEMMA4: return gemma4;
    default: return none;
    }
}

INFERDEF const char *infer_tool_format_name(infer_tool_format f) {
    static const char *const names[INFER_TOOL_FORMAT_COUNT] = {"none",      "generic",     "hermes",    "llama3",
                                                         "mistral",   "phi4-mini",   "deepseek-r1", "command-r",
                                                         "functionary", "firefunction", "nemotron",  "apertus",
                                                         "qwen3-xml",  "lfm2",        "harmony",   "gemma4"};
    return (int)f >= 0 && f < INFER_TOOL_FORMAT_COUNT ? names[f] : "unknown";
}

INFERDEF infer_tool_format infer_tool_format_detect(const char *t) {
    if (!t) return INFER_TOOL_FORMAT_NONE;
    /* gpt-oss: harmony's message tokens (its template also names others' markers in text) */
    if (strstr(t, "<|channel|>") && strstr(t, "<|message|>") && strstr(t, "<|start|>")) return INFER_TOOL_FORMAT_HARMONY;
    /* Gemma 4: its template writes calls as '<|tool_call>call:' + name */
    if (strstr(t, "<|tool_call>call:")) return INFER_TOOL_FORMAT_GEMMA4;
    if (strstr(t, "<seed:tool_call>")) return INFER_TOOL_FORMAT_GENERIC; /* XML parameters: not parsed */
    if (strstr(t, "<TOOLCALL>")) return INFER_TOOL_FORMAT_NEMOTRON;
    if (strstr(t, "<|tools_prefix|>")) return INFER_TOOL_FORMAT_APERTUS;
    /* Qwen3.5 and Qwen3-Coder: <tool_call> around <function=..><parameter=..> */
    if (strstr(t, "<tool_call>") && strstr(t, "<function=") && strstr(t, "<parameter=")) return INFER_TOOL_FORMAT_QWEN3_XML;
    if (strstr(t, "<tool_call>")) return INFER_TOOL_FORMAT_HERMES;
    /* LFM2's templates list the tools ("List of tools: [" or
       <|tool_list_start|>); the model answers with pythonic calls */
    if (strstr(t, "<|tool_call_start|>") || strstr(t, "<|tool_list_start|>") || strstr(t, "List of tools: ["))
        return INFER_TOOL_FORMAT_LFM2;
    if (strstr(t, "[TOOL_CALLS]")) return INFER_TOOL_FORMAT_MISTRAL;
    if (strstr(t, "tool\xE2\x96\x81" "calls\xE2\x96\x81" "begin") || strstr(t, "tool\xE2\x96\x81" "call\xE2\x96\x81" "begin"))
        return INFER_TOOL_FORMAT_DEEPSEEK_R1;
    if (strstr(t, "<|START_ACTION|>")) return INFER_TOOL_FORMAT_COMMAND_R;
    if (strstr(t, "functools[")) return INFER_TOOL_FORMAT_FIREFUNCTION;
    if (strstr(t, "<function=")) return INFER_TOOL_FORMAT_FUNCTIONARY;
    if (strstr(t, "<|python_tag|>") || (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")))
        return INFER_TOOL_FORMAT_LLAMA3;
    if (strstr(t, "<|tool_call|>") || (strstr(t, "<|tool|>") && strstr(t, "<|/tool|>"))) return INFER_TOOL_FORMAT_PHI4_MINI;
    if (strstr(t, "tools") || strstr(t, "tool_calls")) return INFER_TOOL_FORMAT_GENERIC;
    return INFER_TOOL_FORMAT_NONE;
}

/* ---- the parser ------------------------------------------------------------- */

/* harmony adds INFER__TC_H_HEAD (a message's header) and INFER__TC_H_BODY
   (its text, not a call's); INFER__TC_START is then between messages */
enum { INFER__TC_START, INFER__TC_CONTENT, INFER__TC_REASON, INFER__TC_CALL, INFER__TC_H_HEAD, INFER__TC_H_BODY };

typedef struct infer__tc_call {
    char *id, *name, *args;
} infer__tc_call;

struct infer_output_parser {
    infer_tool_format fmt;
    int reasoning_mode;
    const infer__tc_marker *markers;
    const char *think_open, *think_close;
    char *buf; /* stbds: the reply so far, and a NUL past its end */
    size_t n;  /* its length */
    size_t pos; /* decided up to here */
    int state;
    int think_seen; /* the reasoning's opening was looked for */
    /* the call being read: its marker's start, what follows the marker */
    size_t call_at, body_at;
    int call_kind;
    /* resumable scans of the call's text: searching for a marker from
       `scan`, and a JSON value's brackets from json_at */
    size_t scan, json_at, json_from;
    int json_depth, json_str, json_esc, json_seen;
    int content_started, reasoning_started;
    infer__sb held_ws; /* blanks after the last text given out, held */
    infer__sb content, reasoning, d_content, d_reasoning;
    infer__tc_call *calls;          /* stbds */
    infer_tool_call_delta *d_calls; /* stbds */
    infer_tool_call *pub_calls;     /* stbds, at finish */
    int n_malformed;
    int nomem, finished;
    int cut; /* infer_output_parser_cut: the reply ended early */
    infer__jv tools; /* infer_output_parser_set_tools's list (NULL type: none) */
    /* harmony: the message being read (INFER__HM_*), where its header
       starts (h_at: at <|start|> where it has one) and its text after
       that, whether the header opens with a role, its recipient in buf,
       and whether its leading blanks are still being skipped */
    int h_kind, h_role, h_lead;
    size_t h_at, h_head, h_to, h_to_len;
};

static int infer__tc_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* first occurrence of m (len ml) in b[from..n), or (size_t)-1 */
static size_t infer__tc_find(const char *b, size_t from, size_t n, const char *m, size_t ml) {
    size_t i;
    if (ml == 0 || n < ml) return (size_t)-1;
    for (i = from; i + ml <= n; i++) {
        const char *q = (const char *)memchr(b + i, m[0], n - ml + 1 - i);
        if (!q) return (size_t)-1;
        i = (size_t)(q - b);
        if (!memcmp(q, m, ml)) return i;
    }
    return (size_t)-1;
}

/* the longest end of b[from..n) that is a proper beginning of m */
static size_t infer__tc_partial(const char *b, size_t from, size_t n, const char *m) {
    size_t ml = strlen(m), k = INFER__MIN(ml - 1, n - from);
    for (; k > 0; k--)
        if (!memcmp(b + n - k, m, k)) return k;
    return 0;
}

/* where an incomplete UTF-8 character at the end of s[0..n) starts, else n */
static size_t infer__tc_utf8_cut(const char *s, size_t n) {
    size_t j = n;
    while (j > 0 && n - j < 4 && ((unsigned char)s[j - 1] & 0xC0) == 0x80) j--;
    if (j > 0 && (unsigned char)s[j - 1] >= 0xC0 && n - (j - 1) < infer__utf8_len((unsigned char)s[j - 1]))
        return j - 1;
    return n;
}

static void infer__tc_put(infer_output_parser *p, infer__sb *b, const char *s, size_t n) {
    infer__sb_put(b, s, n);
    if (b->nomem) p->nomem = 1;
}

/* text of the content (which 0) or reasoning (1), decided: leading blanks
   dropped, trailing ones held until more text follows */
static void infer__tc_emit(infer_output_parser *p, int which, const char *s, size_t n) {
    int *started = which ? &p->reasoning_started : &p->content_started;
    infer__sb *whole = which ? &p->reasoning : &p->content, *delta = which ? &p->d_reasoning : &p->d_content;
    size_t t = 0;
    if (!*started)
        while (n && infer__tc_ws(*s)) s++, n--;
    if (!n) return;
    while (t < n && infer__tc_ws(s[n - 1 - t])) t++;
    if (t < n) {
        size_t h = stbds_arrlenu(p->held_ws.p);
        infer__tc_put(p, whole, p->held_ws.p, h);
        infer__tc_put(p, delta, p->held_ws.p, h);
        if (p->held_ws.p) stbds_arrsetlen(p->held_ws.p, 0);
        infer__tc_put(p, whole, s, n - t);
        infer__tc_put(p, delta, s, n - t);
        *started = 1;
    }
    infer__tc_put(p, &p->held_ws, s + n - t, t);
}

static void infer__tc_drop_ws(infer_output_parser *p) {
    if (p->held_ws.p) stbds_arrsetlen(p->held_ws.p, 0);
}

/* a NUL-terminated view of b (stays valid until b grows) */
static const char *infer__tc_cstr(infer_output_parser *p, infer__sb *b) {
    if (!infer__arr_room(b->p, 1)) {
        p->nomem = 1;
        return "";
    }
    b->p[stbds_arrlenu(b->p)] = 0;
    return b->p;
}

/* ---- JSON pieces ---- */

/* Scans p->buf from p->json_at for the end of a JSON array or object that
   starts at json_from (blanks before it skipped): 1 found (p->json_at just
   past it), 0 not yet, -1 the text there does not start one. */
static int infer__tc_json_scan(infer_output_parser *p) {
    const char *b = p->buf;
    size_t i = p->json_at;
    if (!p->json_seen) {
        while (i < p->n && infer__tc_ws(b[i])) i++;
        p->json_at = i;
        if (i == p->n) return 0;
        if (b[i] != '{' && b[i] != '[') return -1;
        p->json_seen = 1;
    }
    for (; i < p->n; i++) {
        char c = b[i];
        if (p->json_str) {
            if (p->json_esc) p->json_esc = 0;
            else if (c == '\\') p->json_esc = 1;
            else if (c == '"') p->json_str = 0;
        } else if (c == '"') p->json_str = 1;
        else if (c == '{' || c == '[') p->json_depth++;
        else if (c == '}' || c == ']') {
            if (--p->json_depth == 0) {
                p->json_at = i + 1;
                return 1;
            }
        }
    }
    p->json_at = i;
    return 0;
}

static void infer__tc_json_reset(infer_output_parser *p, size_t from) {
    p->json_from = p->json_at = from;
    p->json_depth = p->json_str = p->json_esc = p->json_seen = 0;
}

/* parses s[0..n) as one JSON value (blanks around it allowed): 1, or 0 */
static int infer__tc_parse(infer_output_parser *p, const char *s, size_t n, infer__jv *v) {
    infer__jp j;
    char *t = infer__strndup(s, n);
    int ok;
    memset(v, 0, sizeof *v);
    if (!t) {
        p->nomem = 1;
        return 0;
    }
    memset(&j, 0, sizeof j);
    j.src = j.p = t;
    j.what = "tool call";
    infer__jp_value(&j, v);
    if (!j.failed) infer__jp_ws(&j);
    ok = !j.failed && j.p == t + n; /* also refuses a NUL inside */
    if (!ok) {
        infer__jv_free(v);
        memset(v, 0, sizeof *v);
    }
    INFER_FREE(t);
    return ok;
}

/* Adds a call (id may be NULL: one is made). 1, or 0 when out of memory. */
static int infer__tc_add(infer_output_parser *p, const char *name, size_t name_len, const char *args,
                         size_t args_len, const char *id, size_t id_len) {
    infer__tc_call c;
    char made[24];
    if (!id) {
        static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        uint64_t h = infer__fnv(INFER__FNV_BASIS, name, name_len);
        int k = (int)stbds_arrlen(p->calls), i, o = 0;
        h = infer__fnv(h, args, args_len);
        h = infer__fnv(h, &k, sizeof k);
        if (p->fmt != INFER_TOOL_FORMAT_MISTRAL) {
            memcpy(made, "call_", 5);
            o = 5;
        }
        for (i = 0; i < 9; i++) {
            made[o + i] = digits[h % 62];
            h = (h / 62) ^ (h << 7);
        }
        made[o + 9] = 0;
        id = made;
        id_len = strlen(made);
    }
    c.id = infer__strndup(id, id_len);
    c.name = infer__strndup(name, name_len);
    c.args = infer__strndup(args, args_len);
    if (!c.id || !c.name || !c.args || !infer__arr_push(p->calls, c)) {
        INFER_FREE(c.id);
        INFER_FREE(c.name);
        INFER_FREE(c.args);
        p->nomem = 1;
        return 0;
    }
    return 1;
}

/* Arguments as compact JSON text: an object, or a string holding one;
   NULL (none given) is "{}". 1, or 0 when they are neither. */
static int infer__tc_args(infer_output_parser *p, const infer__jv *a, infer__sb *out) {
    if (!a || a->type == INFER__J_NULL) infer__sb_puts(out, "{}");
    else if (a->type == INFER__J_OBJ) infer__sb_json(out, a);
    else if (a->type == INFER__J_STR) {
        infer__jv v;
        if (!infer__tc_parse(p, a->s, a->n, &v)) return 0;
        if (v.type == INFER__J_OBJ) infer__sb_json(out, &v);
        infer__jv_free(&v);
        if (v.type != INFER__J_OBJ) return 0;
    } else return 0;
    return 1;
}

/* A call from an object's keys: name_key, the first of args_keys present,
   id_key (may be NULL). 1, or 0 when it is not one. */
static int infer__tc_from_obj(infer_output_parser *p, const infer__jv *o, const char *name_key,
                              const char *const *args_keys, const char *id_key) {
    const infer__jv *name = infer__jv_get(o, name_key), *args = NULL, *id = id_key ? infer__jv_get(o, id_key) : NULL;
    infer__sb a = {NULL, 0};
    int ok;
    for (; *args_keys && !args; args_keys++) args = infer__jv_get(o, *args_keys);
    if (!name || name->type != INFER__J_STR || !name->n) return 0;
    if (id && id->type != INFER__J_STR && id->type != INFER__J_NUM) id = NULL;
    if (id && !id->n) id = NULL;
    ok = infer__tc_args(p, args, &a) && !a.nomem &&
         infer__tc_add(p, name->s, name->n, a.p ? a.p : "", stbds_arrlenu(a.p), id ? id->s : NULL, id ? id->n : 0);
    if (a.nomem) p->nomem = 1;
    stbds_arrfree(a.p);
    return ok;
}

static const char *const infer__tc_args_keys[] = {"arguments", "parameters", NULL};

/* s[0..n) as JSON: one call object, or (list_ok) an array of them */
static int infer__tc_json_calls(infer_output_parser *p, const char *s, size_t n, int list_ok, const char *name_key,
                                const char *const *args_keys, const char *id_key) {
    infer__jv v;
    int ok = 1, i;
    if (!infer__tc_parse(p, s, n, &v)) return 0;
    if (v.type == INFER__J_OBJ) ok = infer__tc_from_obj(p, &v, name_key, args_keys, id_key);
    else if (v.type == INFER__J_ARR && list_ok && stbds_arrlen(v.items) > 0)
        for (i = 0; ok && i < (int)stbds_arrlen(v.items); i++)
            ok = v.items[i].type == INFER__J_OBJ && infer__tc_from_obj(p, &v.items[i], name_key, args_keys, id_key);
    else ok = 0;
    infer__jv_free(&v);
    return ok;
}

/* s[0..n) without blanks at either end */
static void infer__tc_trim(const char **s, size_t *n) {
    while (*n && infer__tc_ws(**s)) (*s)++, (*n)--;
    while (*n && infer__tc_ws((*s)[*n - 1])) (*n)--;
}

static int infer__tc_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

/* The step before an item of a list, dict or argument list that close
   ends, at s[*j..n): blanks, and after the first item (first 0) the ','
   between items, which goes to out. 1 where an item follows, 0 where close
   does (*j at it; a trailing comma is allowed), -1 where neither does. */
static int infer__tc_next_item(const char *s, size_t n, size_t *j, char close, int first, infer__sb *out) {
    while (*j < n && infer__tc_ws(s[*j])) (*j)++;
    if (*j < n && s[*j] == close) return 0;
    if (first) return 1;
    if (*j == n || s[*j] != ',') return -1;
    for ((*j)++; *j < n && infer__tc_ws(s[*j]); (*j)++) {}
    if (*j < n && s[*j] == close) return 0;
    infer__sb_putc(out, ',');
    return 1;
}

/* ---- pythonic calls (LFM2's; Llama 3's builtin ones) ---- */

/* A Python literal at s[*i..n) as JSON into out: a string ('..' or ".."),
   a number, True/False/None (and JSON's true/false/null), a list, tuple or
   dict of them. 1, or 0 where it is none. */
static int infer__tc_pyval(infer_output_parser *p, const char *s, size_t n, size_t *i, infer__sb *out, int depth) {
    size_t j = *i;
    while (j < n && infer__tc_ws(s[j])) j++;
    if (j == n || depth > INFER__JSON_MAX_DEPTH) return 0;
    if (s[j] == '"' || s[j] == '\'') {
        char q = s[j];
        infer__sb v = {NULL, 0};
        for (j++; j < n && s[j] != q; j++) {
            char c = s[j];
            if (c == '\\' && j + 1 < n) {
                c = s[++j];
                if (c == 'n') c = '\n';
                else if (c == 't') c = '\t';
                else if (c == 'r') c = '\r';
            }
            infer__sb_putc(&v, c);
        }
        if (j == n) {
            stbds_arrfree(v.p);
            return 0;
        }
        if (v.nomem) p->nomem = 1;
        infer__sb_json_string(out, v.p ? v.p : "", stbds_arrlenu(v.p));
        stbds_arrfree(v.p);
        *i = j + 1;
        return 1;
    }
    if (s[j] == '[' || s[j] == '(' || s[j] == '{') {
        char close = s[j] == '[' ? ']' : s[j] == '(' ? ')' : '}';
        int dict = s[j] == '{', first = 1;
        infer__sb_putc(out, dict ? '{' : '[');
        for (j++;; first = 0) {
            int next = infer__tc_next_item(s, n, &j, close, first, out);
            if (next < 0) return 0;
            if (!next) break;
            if (dict) { /* a key: a string (JSON keys are strings) */
                size_t at = out->p ? stbds_arrlenu(out->p) : 0;
                if (!infer__tc_pyval(p, s, n, &j, out, depth + 1) || !out->p || out->p[at] != '"') return 0;
                while (j < n && infer__tc_ws(s[j])) j++;
                if (j == n || s[j] != ':') return 0;
                j++;
                infer__sb_putc(out, ':');
            }
            if (!infer__tc_pyval(p, s, n, &j, out, depth + 1)) return 0;
        }
        infer__sb_putc(out, dict ? '}' : ']');
        *i = j + 1;
        return 1;
    }
    {
        size_t v0 = j;
        infer__jv jv;
        while (j < n && (infer__tc_ident(s[j]) || s[j] == '+')) j++;
        if (j == v0) return 0;
        if ((j - v0 == 4 && !memcmp(s + v0, "True", 4)) || (j - v0 == 4 && !memcmp(s + v0, "true", 4)))
            infer__sb_puts(out, "true");
        else if ((j - v0 == 5 && !memcmp(s + v0, "False", 5)) || (j - v0 == 5 && !memcmp(s + v0, "false", 5)))
            infer__sb_puts(out, "false");
        else if ((j - v0 == 4 && !memcmp(s + v0, "None", 4)) || (j - v0 == 4 && !memcmp(s + v0, "null", 4)))
            infer__sb_puts(out, "null");
        else if (infer__tc_parse(p, s + v0, j - v0, &jv) && jv.type == INFER__J_NUM) {
            infer__sb_json(out, &jv);
            infer__jv_free(&jv);
        } else return 0;
        *i = j;
        return 1;
    }
}

/* Python keyword arguments, (key=value, ..), at s[*i..n) (*i at the
   "(") as a JSON object into out; *i past the ")". 1, or 0 where they are not. */
static int infer__tc_pykwargs(infer_output_parser *p, const char *s, size_t n, size_t *i, infer__sb *out) {
    size_t j = *i;
    int first = 1;
    if (j == n || s[j] != '(') return 0;
    infer__sb_putc(out, '{');
    for (j++;; first = 0) {
        size_t k0;
        int next = infer__tc_next_item(s, n, &j, ')', first, out);
        if (next < 0) return 0;
        if (!next) break;
        k0 = j;
        while (j < n && infer__tc_ident(s[j]) && s[j] != '.' && s[j] != '-') j++;
        if (j == k0) return 0;
        infer__sb_json_string(out, s + k0, j - k0);
        infer__sb_putc(out, ':');
        while (j < n && infer__tc_ws(s[j])) j++;
        if (j == n || s[j] != '=') return 0;
        j++;
        if (!infer__tc_pyval(p, s, n, &j, out, 1)) return 0;
    }
    infer__sb_putc(out, '}');
    *i = j + 1;
    return 1;
}

/* name(key=value, ..) at s[*i..n) into a call */
static int infer__tc_pyfn(infer_output_parser *p, const char *s, size_t n, size_t *i) {
    size_t j = *i, name0, name_len;
    infer__sb a = {NULL, 0};
    int ok;
    while (j < n && infer__tc_ws(s[j])) j++;
    name0 = j;
    while (j < n && infer__tc_ident(s[j])) j++;
    name_len = j - name0;
    ok = name_len && infer__tc_pykwargs(p, s, n, &j, &a) && !a.nomem &&
         infer__tc_add(p, s + name0, name_len, a.p, stbds_arrlenu(a.p), NULL, 0);
    if (ok) *i = j;
    if (a.nomem) p->nomem = 1;
    stbds_arrfree(a.p);
    return ok;
}

/* <|tool_call_start|>'s text: [name(k=v), ..] (a bare call too), or the
   JSON calls LFM2 writes when its system prompt asks for JSON */
static int infer__tc_lfm2(infer_output_parser *p, const char *s, size_t n) {
    size_t i = 0;
    int list;
    infer__tc_trim(&s, &n);
    if (!n) return 0;
    if (s[0] == '{') return infer__tc_json_calls(p, s, n, 0, "name", infer__tc_args_keys, NULL);
    if (s[0] == '[') {
        for (i = 1; i < n && infer__tc_ws(s[i]); i++) {}
        if (i < n && s[i] == '{') return infer__tc_json_calls(p, s, n, 1, "name", infer__tc_args_keys, NULL);
    }
    list = s[0] == '[';
    i = list ? 1 : 0;
    for (;;) {
        if (!infer__tc_pyfn(p, s, n, &i)) return 0;
        while (i < n && infer__tc_ws(s[i])) i++;
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        if (list) {
            if (i == n || s[i] != ']') return 0;
            i++;
        }
        return i == n;
    }
}

/* Llama 3's builtin call: name.call(key="value", n=1, ...) into args as a
   JSON object; 1, or 0 where s is not one */
static int infer__tc_pycall(infer_output_parser *p, const char *s, size_t n, size_t *name_len, infer__sb *args) {
    size_t i = 0;
    while (i < n && infer__tc_ident(s[i])) i++;
    if (i == n || s[i] != '(' || i < 6 || memcmp(s + i - 5, ".call", 5)) return 0;
    *name_len = i - 5;
    if (!infer__tc_pykwargs(p, s, n, &i, args)) return 0;
    while (i < n && infer__tc_ws(s[i])) i++;
    return i == n;
}

/* <|python_tag|>'s text: JSON calls (separated by ';'), a builtin call, or code */
static int infer__tc_pytag(infer_output_parser *p, const char *s, size_t n) {
    size_t name_len;
    infer__sb a = {NULL, 0};
    int ok;
    infer__tc_trim(&s, &n);
    if (n && s[0] == '{') {
        size_t i = 0;
        while (i < n) {
            size_t j, depth = 0;
            int str = 0, esc = 0;
            for (j = i; j < n; j++) {
                char c = s[j];
                if (str) {
                    if (esc) esc = 0;
                    else if (c == '\\') esc = 1;
                    else if (c == '"') str = 0;
                } else if (c == '"') str = 1;
                else if (c == '{' || c == '[') depth++;
                else if ((c == '}' || c == ']') && --depth == 0) break;
            }
            if (j == n) return 0;
            if (!infer__tc_json_calls(p, s + i, j + 1 - i, 0, "name", infer__tc_args_keys, NULL)) return 0;
            for (i = j + 1; i < n && (infer__tc_ws(s[i]) || s[i] == ';'); i++) {}
            if (i < n && s[i] != '{') return 0;
        }
        return 1;
    }
    if (infer__tc_pycall(p, s, n, &name_len, &a) && !a.nomem) {
        ok = infer__tc_add(p, s, name_len, a.p, stbds_arrlenu(a.p), NULL, 0);
        stbds_arrfree(a.p);
        return ok;
    }
    stbds_arrfree(a.p);
    a.p = NULL;
    a.nomem = 0;
    if (!n) return 0;
    infer__sb_puts(&a, "{\"code\":");
    infer__sb_json_string(&a, s, n);
    infer__sb_putc(&a, '}');
    ok = !a.nomem && infer__tc_add(p, "python", 6, a.p, stbds_arrlenu(a.p), NULL, 0);
    if (a.nomem) p->nomem = 1;
    stbds_arrfree(a.p);
    return ok;
}

/* ---- Gemma 4's calls ---- */

/* A Gemma 4 value at s[*i..n) as JSON into out: a string <|"|>..<|"|>
   (its text as it is: no escapes), a number, true/false/null (and the
   template's None for a null), {key:value, ..} with bare or quoted keys,
   [value, ..]. 1, or 0 where it is none. */
static int infer__tc_g4val(infer_output_parser *p, const char *s, size_t n, size_t *i, infer__sb *out, int depth) {
    size_t j = *i, ql = strlen(INFER__G4_QUOTE);
    while (j < n && infer__tc_ws(s[j])) j++;
    if (j == n || depth > INFER__JSON_MAX_DEPTH) return 0;
    if (n - j >= ql && !memcmp(s + j, INFER__G4_QUOTE, ql)) {
        size_t e = infer__tc_find(s, j + ql, n, INFER__G4_QUOTE, ql);
        if (e == (size_t)-1) return 0;
        infer__sb_json_string(out, s + j + ql, e - j - ql);
        *i = e + ql;
        return 1;
    }
    if (s[j] == '{' || s[j] == '[') {
        char close = s[j] == '[' ? ']' : '}';
        int dict = s[j] == '{', first = 1;
        infer__sb_putc(out, s[j]);
        for (j++;; first = 0) {
            int next = infer__tc_next_item(s, n, &j, close, first, out);
            if (next < 0) return 0;
            if (!next) break;
            if (dict) { /* a key: quoted, or bare up to its ':' */
                if (n - j >= ql && !memcmp(s + j, INFER__G4_QUOTE, ql)) {
                    if (!infer__tc_g4val(p, s, n, &j, out, depth + 1)) return 0;
                } else {
                    size_t k0 = j, k1;
                    while (j < n && s[j] != ':' && !strchr("{}[],<", s[j])) j++;
                    for (k1 = j; k1 > k0 && infer__tc_ws(s[k1 - 1]); k1--) {}
                    if (k1 == k0) return 0;
                    infer__sb_json_string(out, s + k0, k1 - k0);
                }
                while (j < n && infer__tc_ws(s[j])) j++;
                if (j == n || s[j] != ':') return 0;
                j++;
                infer__sb_putc(out, ':');
            }
            if (!infer__tc_g4val(p, s, n, &j, out, depth + 1)) return 0;
        }
        infer__sb_putc(out, close);
        *i = j + 1;
        return 1;
    }
    {
        size_t v0 = j;
        infer__jv jv;
        while (j < n && (infer__tc_ident(s[j]) || s[j] == '+')) j++;
        if (j == v0) return 0;
        if ((j - v0 == 4 && !memcmp(s + v0, "true", 4)) || (j - v0 == 5 && !memcmp(s + v0, "false", 5)) ||
            (j - v0 == 4 && !memcmp(s + v0, "null", 4)))
            infer__sb_put(out, s + v0, j - v0);
        else if (j - v0 == 4 && !memcmp(s + v0, "None", 4)) infer__sb_puts(out, "null");
        else if (infer__tc_parse(p, s + v0, j - v0, &jv) && jv.type == INFER__J_NUM) {
            infer__sb_json(out, &jv);
            infer__jv_free(&jv);
        } else return 0;
        *i = j;
        return 1;
    }
}

/* <|tool_call>'s text: call:name{..} (more than one, should a model write
   them in one block) */
static int infer__tc_gemma4(infer_output_parser *p, const char *s, size_t n) {
    size_t i = 0;
    infer__tc_trim(&s, &n);
    for (;;) {
        size_t name0, name_len;
        infer__sb a = {NULL, 0};
        int ok;
        if (n - i < 5 || memcmp(s + i, "call:", 5)) return 0;
        for (i += 5, name0 = i; i < n && infer__tc_ident(s[i]); i++) {}
        name_len = i - name0;
        ok = name_len && i < n && s[i] == '{' && infer__tc_g4val(p, s, n, &i, &a, 0) && !a.nomem &&
             infer__tc_add(p, s + name0, name_len, a.p, stbds_arrlenu(a.p), NULL, 0);
        if (a.nomem) p->nomem = 1;
        stbds_arrfree(a.p);
        if (!ok) return 0;
        while (i < n && infer__tc_ws(s[i])) i++;
        if (i == n) return 1;
    }
}

/* <|channel>'s text: "thought" and the reasoning (an empty channel, or a
   <|channel> repeated, gives none) */
static int infer__tc_g4_channel(infer_output_parser *p, const char *s, size_t n) {
    while (n >= 10 && !memcmp(s, "<|channel>", 10)) s += 10, n -= 10;
    if (n >= 7 && !memcmp(s, "thought", 7)) s += 7, n -= 7;
    infer__tc_trim(&s, &n);
    if (!n) return 1;
    if (p->reasoning_started) infer__tc_put(p, &p->held_ws, "\n\n", 2);
    infer__tc_emit(p, 1, s, n);
    infer__tc_drop_ws(p);
    return 1;
}

/* one DeepSeek R1 call: TYPE<｜tool▁sep｜>NAME\n```json\n{..}\n``` */
static int infer__tc_ds_one(infer_output_parser *p, const char *s, size_t n) {
    size_t sl = strlen(INFER__DS_SEP), at = infer__tc_find(s, 0, n, INFER__DS_SEP, sl), nl;
    const char *name, *args;
    size_t name_len, args_len;
    if (at == (size_t)-1) return 0;
    name = s + at + sl;
    nl = n - (at + sl);
    {
        const char *e = (const char *)memchr(name, '\n', nl);
        name_len = e ? (size_t)(e - name) : nl;
    }
    args = name + name_len;
    args_len = nl - name_len;
    infer__tc_trim(&name, &name_len);
    infer__tc_trim(&args, &args_len);
    if (!name_len) return 0;
    if (args_len >= 3 && !memcmp(args, "```", 3)) {
        args += 3;
        args_len -= 3;
        if (args_len >= 4 && !memcmp(args, "json", 4)) args += 4, args_len -= 4;
        if (args_len < 3 || memcmp(args + args_len - 3, "```", 3)) return 0;
        args_len -= 3;
    }
    {
        infer__jv v;
        infer__sb a = {NULL, 0};
        int ok;
        if (!infer__tc_parse(p, args, args_len, &v)) return 0;
        ok = infer__tc_args(p, &v, &a) && !a.nomem &&
             infer__tc_add(p, name, name_len, a.p, stbds_arrlenu(a.p), NULL, 0);
        if (a.nomem) p->nomem = 1;
        infer__jv_free(&v);
        stbds_arrfree(a.p);
        return ok;
    }
}

static int infer__tc_ds_calls(infer_output_parser *p, const char *s, size_t n) {
    size_t bl = strlen(INFER__DS_CALL_BEGIN), el = strlen(INFER__DS_CALL_END), i = 0;
    int any = 0;
    for (;;) {
        size_t b, e;
        while (i < n && infer__tc_ws(s[i])) i++;
        if (i == n) return any;
        b = infer__tc_find(s, i, n, INFER__DS_CALL_BEGIN, bl);
        if (b != i) return 0;
        e = infer__tc_find(s, b + bl, n, INFER__DS_CALL_END, el);
        if (e == (size_t)-1) e = n; /* the last one unclosed at the end */
        if (!infer__tc_ds_one(p, s + b + bl, e - b - bl)) return 0;
        any = 1;
        i = e == n ? n : e + el;
    }
}

/* Mistral's [TOOL_CALLS] text: a JSON list, or name[CALL_ID]id[ARGS]{..} */
static int infer__tc_mistral(infer_output_parser *p, const char *s, size_t n) {
    static const char *const keys[] = {"arguments", "parameters", NULL};
    size_t ai, ci, name_len, id_len = 0;
    const char *id = NULL;
    infer__tc_trim(&s, &n);
    if (n && s[0] == '[') return infer__tc_json_calls(p, s, n, 1, "name", keys, "id");
    ai = infer__tc_find(s, 0, n, "[ARGS]", 6);
    if (ai == (size_t)-1) return 0;
    ci = infer__tc_find(s, 0, ai, "[CALL_ID]", 9);
    name_len = ci == (size_t)-1 ? ai : ci;
    if (ci != (size_t)-1) {
        id = s + ci + 9;
        id_len = ai - ci - 9;
        infer__tc_trim(&id, &id_len);
        if (!id_len) id = NULL;
    }
    infer__tc_trim(&s, &name_len);
    if (!name_len) return 0;
    {
        infer__jv v;
        infer__sb a = {NULL, 0};
        int ok;
        if (!infer__tc_parse(p, s + ai + 6, n - ai - 6, &v)) return 0;
        ok = infer__tc_args(p, &v, &a) && !a.nomem &&
             infer__tc_add(p, s, name_len, a.p, stbds_arrlenu(a.p), id, id_len);
        if (a.nomem) p->nomem = 1;
        infer__jv_free(&v);
        stbds_arrfree(a.p);
        return ok;
    }
}

/* the generic format's reply object: 1 calls, 2 a response (content), 0 neither */
static int infer__tc_generic(infer_output_parser *p, const char *s, size_t n) {
    infer__jv v;
    const infer__jv *x;
    int ok = 0, i;
    if (!infer__tc_parse(p, s, n, &v)) return 0;
    if ((x = infer__jv_get(&v, "tool_calls")) && x->type == INFER__J_ARR && stbds_arrlen(x->items) > 0) {
        for (ok = 1, i = 0; ok && i < (int)stbds_arrlen(x->items); i++)
            ok = infer__tc_from_obj(p, &x->items[i], "name", infer__tc_args_keys, "id");
    } else if ((x = infer__jv_get(&v, "tool_call")) && x->type == INFER__J_OBJ)
        ok = infer__tc_from_obj(p, x, "name", infer__tc_args_keys, "id");
    else if ((x = infer__jv_get(&v, "response")) && x->type == INFER__J_STR) {
        infer__tc_emit(p, 0, x->s, x->n);
        ok = 2;
    }
    infer__jv_free(&v);
    return ok;
}

/* Apertus's list of {"name": {arguments}} objects */
static int infer__tc_apertus(infer_output_parser *p, const char *s, size_t n) {
    infer__jv v;
    int ok = 1, i;
    if (!infer__tc_parse(p, s, n, &v)) return 0;
    if (v.type != INFER__J_ARR || !stbds_arrlen(v.items)) ok = 0;
    for (i = 0; ok && i < (int)stbds_arrlen(v.items); i++) {
        const infer__jv *o = &v.items[i];
        infer__sb a = {NULL, 0};
        ok = o->type == INFER__J_OBJ && stbds_arrlen(o->keys) == 1 && o->key_lens[0] > 0 &&
             infer__tc_args(p, &o->items[0], &a) && !a.nomem &&
             infer__tc_add(p, o->keys[0], o->key_lens[0], a.p, stbds_arrlenu(a.p), NULL, 0);
        if (a.nomem) p->nomem = 1;
        stbds_arrfree(a.p);
    }
    infer__jv_free(&v);
    return ok;
}

/* ---- Qwen3.5's XML calls ---- */

/* 1 where the tools given (infer_output_parser_set_tools) declare tool
   name's parameter key a string: its value is kept as written */
static int infer__tc_param_is_string(const infer_output_parser *p, const char *name, size_t name_len, const char *key,
                                     size_t key_len) {
    int i, k;
    if (p->tools.type != INFER__J_ARR) return 0;
    for (i = 0; i < (int)stbds_arrlen(p->tools.items); i++) {
        const infer__jv *t = &p->tools.items[i], *fn = infer__jv_get(t, "function"), *nm, *props, *type;
        if (fn && fn->type == INFER__J_OBJ) t = fn;
        nm = infer__jv_get(t, "name");
        if (!nm || nm->type != INFER__J_STR || nm->n != name_len || memcmp(nm->s, name, name_len)) continue;
        props = infer__jv_get(t, "parameters");
        props = props ? infer__jv_get(props, "properties") : NULL;
        if (!props || props->type != INFER__J_OBJ) return 0;
        for (k = 0; k < (int)stbds_arrlen(props->keys); k++)
            if (props->key_lens[k] == key_len && !memcmp(props->keys[k], key, key_len)) {
                type = infer__jv_get(&props->items[k], "type");
                return type && type->type == INFER__J_STR && !strcmp(type->s, "string");
            }
        return 0;
    }
    return 0;
}

/* One function, s[0..n) the text between "<function=" and "</function>":
   name>\n<parameter=key>\nvalue\n</parameter>\n... A value is JSON where it
   parses as JSON and its parameter is not declared a string, else the text
   itself. 1, or 0 where it is not one. */
static int infer__tc_xml_fn(infer_output_parser *p, const char *s, size_t n) {
    const char *gt = (const char *)memchr(s, '>', n);
    size_t name_len = gt ? (size_t)(gt - s) : 0, i, k;
    infer__sb a = {NULL, 0};
    int first = 1, ok = 0;
    for (k = 0; k < name_len && infer__tc_ident(s[k]); k++) {}
    if (!gt || !name_len || k != name_len) return 0;
    infer__sb_putc(&a, '{');
    for (i = name_len + 1;;) {
        size_t key0, key_len, v0, v1, close;
        const char *v;
        infer__jv jv;
        while (i < n && infer__tc_ws(s[i])) i++;
        if (i == n) break;
        if (n - i < 11 || memcmp(s + i, "<parameter=", 11)) goto out;
        key0 = i + 11;
        for (i = key0; i < n && s[i] != '>'; i++) {}
        key_len = i - key0;
        if (i == n || !key_len) goto out;
        v0 = i + 1;
        close = infer__tc_find(s, v0, n, "</parameter>", 12);
        v1 = close == (size_t)-1 ? n : close; /* the last one may end with the call */
        i = close == (size_t)-1 ? n : close + 12;
        /* the template writes "\n" value "\n" */
        if (v0 < v1 && s[v0] == '\n') v0++;
        if (v1 > v0 && s[v1 - 1] == '\n') v1--;
        v = s + v0;
        if (!first) infer__sb_putc(&a, ',');
        first = 0;
        infer__sb_json_string(&a, s + key0, key_len);
        infer__sb_putc(&a, ':');
        if (!infer__tc_param_is_string(p, s, name_len, s + key0, key_len) && v1 > v0 &&
            infer__tc_parse(p, v, v1 - v0, &jv)) {
            infer__sb_json(&a, &jv);
            infer__jv_free(&jv);
        } else infer__sb_json_string(&a, v, v1 - v0);
    }
    infer__sb_putc(&a, '}');
    ok = !a.nomem && infer__tc_add(p, s, name_len, a.p, stbds_arrlenu(a.p), NULL, 0);
out:
    if (a.nomem) p->nomem = 1;
    stbds_arrfree(a.p);
    return ok;
}

/* <tool_call>'s text: one or more <function=..>..</function> */
static int infer__tc_xml_calls(infer_output_parser *p, const char *s, size_t n) {
    size_t i = 0;
    int any = 0;
    for (;;) {
        size_t e;
        while (i < n && infer__tc_ws(s[i])) i++;
        if (i == n) return any;
        if (n - i < 10 || memcmp(s + i, "<function=", 10)) return 0;
        e = infer__tc_find(s, i + 10, n, "</function>", 11);
        if (e == (size_t)-1) e = n; /* unclosed at the end of the call */
        if (!infer__tc_xml_fn(p, s + i + 10, e - i - 10)) return 0;
        any = 1;
        i = e == n ? n : e + 11;
    }
}

/* The call's text b[body..body_end) into calls: 1 done, 2 it was a
   response (content given out), 0 not a call (the calls it made undone). */
static int infer__tc_parse_call(infer_output_parser *p, size_t body, size_t body_end) {
    static const char *const cmdr_keys[] = {"parameters", "arguments", NULL};
    const char *s = p->buf + body;
    size_t n = body_end - body;
    int before = (int)stbds_arrlen(p->calls), ok = 0;
    switch (p->call_kind) {
    case INFER__K_HERMES:
    case INFER__K_L3JSON: ok = infer__tc_json_calls(p, s, n, 0, "name", infer__tc_args_keys, NULL); break;
    case INFER__K_PHI: ok = infer__tc_json_calls(p, s, n, 1, "name", infer__tc_args_keys, NULL); break;
    case INFER__K_FIRE: ok = infer__tc_json_calls(p, s - 1, n + 1, 1, "name", infer__tc_args_keys, NULL); break;
    case INFER__K_CMDR: ok = infer__tc_json_calls(p, s, n, 1, "tool_name", cmdr_keys, "tool_call_id"); break;
    case INFER__K_PYTAG: ok = infer__tc_pytag(p, s, n); break;
    case INFER__K_MISTRAL: ok = infer__tc_mistral(p, s, n); break;
    case INFER__K_DS_CALLS: ok = infer__tc_ds_calls(p, s, n); break;
    case INFER__K_DS_CALL: ok = infer__tc_ds_one(p, s, n); break;
    case INFER__K_GENERIC: ok = infer__tc_generic(p, s, n); break;
    case INFER__K_NEMOTRON: ok = infer__tc_json_calls(p, s, n, 1, "name", infer__tc_args_keys, NULL); break;
    case INFER__K_APERTUS: ok = infer__tc_apertus(p, s, n); break;
    case INFER__K_XML_CALL: ok = infer__tc_xml_calls(p, s, n); break;
    case INFER__K_XML_FN: ok = infer__tc_xml_fn(p, s, n); break;
    case INFER__K_LFM2: ok = infer__tc_lfm2(p, s, n); break;
    case INFER__K_GEMMA4: ok = infer__tc_gemma4(p, s, n); break;
    case INFER__K_G4_CHANNEL: ok = infer__tc_g4_channel(p, s, n); break;
    case INFER__K_FUNCTIONARY: {
        const char *gt = (const char *)memchr(s, '>', n);
        infer__jv v;
        infer__sb a = {NULL, 0};
        size_t name_len = gt ? (size_t)(gt - s) : 0, k;
        for (k = 0; k < name_len && infer__tc_ident(s[k]); k++) {}
        if (!gt || !name_len || k != name_len) break;
        if (!infer__tc_parse(p, gt + 1, n - name_len - 1, &v)) {
            const char *r = gt + 1;
            size_t rn = n - name_len - 1;
            infer__tc_trim(&r, &rn);
            if (rn) break; /* nothing at all: no arguments */
        }
        ok = infer__tc_args(p, &v, &a) && !a.nomem && infer__tc_add(p, s, name_len, a.p, stbds_arrlenu(a.p), NULL, 0);
        if (a.nomem) p->nomem = 1;
        infer__jv_free(&v);
        stbds_arrfree(a.p);
        break;
    }
    default: break;
    }
    if (ok != 1) /* undo a list's calls made before one failed */
        while ((int)stbds_arrlen(p->calls) > before) {
            infer__tc_call c = stbds_arrpop(p->calls);
            INFER_FREE(c.id);
            INFER_FREE(c.name);
            INFER_FREE(c.args);
        }
    else {
        int i;
        for (i = before; i < (int)stbds_arrlen(p->calls); i++) {
            infer_tool_call_delta d;
            d.index = i;
            d.id = p->calls[i].id;
            d.name = p->calls[i].name;
            d.arguments = p->calls[i].args;
            if (!infer__arr_push(p->d_calls, d)) p->nomem = 1;
        }
    }
    return ok;
}

/* Where the call that opened at body_at ends: 1 with *body_end (its text's
   end) and *end (past its closing marker), 0 not yet known, -1 not a call
   after all. At the end of the reply (final), an open call ends there. */
static int infer__tc_call_end(infer_output_parser *p, int final, size_t *body_end, size_t *end) {
    const char *close = NULL;
    int r;
    switch (p->call_kind) {
    case INFER__K_HERMES: close = "</tool_call>"; break;
    case INFER__K_PHI: close = "<|/tool_call|>"; break;
    case INFER__K_CMDR: close = "<|END_ACTION|>"; break;
    case INFER__K_FUNCTIONARY: close = "</function>"; break;
    case INFER__K_DS_CALLS: close = INFER__DS_CALLS_END; break;
    case INFER__K_DS_CALL: close = INFER__DS_CALL_END; break;
    case INFER__K_NEMOTRON: close = "</TOOLCALL>"; break;
    case INFER__K_APERTUS: close = "<|tools_suffix|>"; break;
    case INFER__K_XML_CALL: close = "</tool_call>"; break;
    case INFER__K_XML_FN: close = "</function>"; break;
    case INFER__K_LFM2: close = "<|tool_call_end|>"; break;
    case INFER__K_GEMMA4: close = "<tool_call|>"; break;
    case INFER__K_G4_CHANNEL: close = "<channel|>"; break;
    case INFER__K_PYTAG: break;
    case INFER__K_MISTRAL:
        if (!p->json_seen && p->json_from == p->body_at) {
            /* a list, or name[ARGS] then the object (found once: json_from moves past it) */
            size_t i = p->body_at, a;
            while (i < p->n && infer__tc_ws(p->buf[i])) i++;
            if (i < p->n && p->buf[i] != '[') {
                a = infer__tc_find(p->buf, p->scan, p->n, "[ARGS]", 6);
                if (a == (size_t)-1) {
                    p->scan = p->n > p->body_at + 5 ? p->n - 5 : p->body_at;
                    break;
                }
                infer__tc_json_reset(p, a + 6);
            } else if (i == p->n) break;
        }
        /* fall through */
    case INFER__K_L3JSON:
    case INFER__K_GENERIC:
    case INFER__K_FIRE:
        r = infer__tc_json_scan(p);
        if (r < 0) return -1;
        if (r > 0) {
            *body_end = *end = p->json_at;
            return 1;
        }
        break;
    default: break;
    }
    if (close) {
        size_t cl = strlen(close), at = infer__tc_find(p->buf, p->scan, p->n, close, cl);
        if (at != (size_t)-1) {
            *body_end = at;
            *end = at + cl;
            return 1;
        }
        p->scan = p->n > p->body_at + cl ? p->n - cl + 1 : p->body_at;
    }
    if (final) {
        *body_end = *end = p->n;
        return p->cut ? -2 : 1; /* unclosed: cut off by a limit, or the model's own end */
    }
    return 0;
}

/* 1 where b[0..n) begins {"name", 0 where it does not, -1 not yet known */
static int infer__tc_l3_start(const char *b, size_t n) {
    size_t i = 1;
    const char *key = "\"name\"";
    if (!n) return -1;
    if (b[0] != '{') return 0;
    while (i < n && infer__tc_ws(b[i])) i++;
    for (; *key; key++, i++) {
        if (i == n) return -1;
        if (b[i] != *key) return 0;
    }
    return 1;
}

static void infer__tc_open_call(infer_output_parser *p, size_t at, size_t body, int kind) {
    p->state = INFER__TC_CALL;
    p->call_at = at;
    p->body_at = p->scan = body;
    p->call_kind = kind;
    infer__tc_json_reset(p, body);
    if (kind == INFER__K_FIRE) infer__tc_json_reset(p, body - 1); /* the marker's '[' opens the list */
    infer__tc_drop_ws(p);
}

/* ---- harmony (gpt-oss) ---- */

/* What a harmony message is, from its header. */
enum { INFER__HM_CONTENT, INFER__HM_REASON, INFER__HM_CALL, INFER__HM_DROP };

/* A header is its role, <|channel|>, to= and <|constrain|> parts: a
   marker must open within this many bytes of its start, else the text was
   no header (decided from the text alone, so any split decides alike). */
#define INFER__HM_HEAD_MAX 256

/* what ends a message's text: <|end|>, <|return|>, <|call|> (taken), or
   the next message's <|start|> or <|channel|> where a model left out the
   end (kept: they open the next header) */
static const char *const infer__hm_ends[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>", "<|channel|>", NULL};
/* what ends a header: its <|message|>, or an end or <|start|> (a message
   with no text) */
static const char *const infer__hm_head_ends[] = {"<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|start|>",
                                                  NULL};

/* the first of list's markers in b[from..n): its index and *at, or -1 */
static int infer__hm_first(const char *b, size_t from, size_t n, const char *const *list, size_t *at) {
    int i, best = -1;
    *at = (size_t)-1;
    for (i = 0; list[i]; i++) {
        size_t a = infer__tc_find(b, from, n, list[i], strlen(list[i]));
        if (a < *at) *at = a, best = i;
    }
    return best;
}

/* the longest end of b[from..n) that begins one of list's markers */
static size_t infer__hm_hold(const char *b, size_t from, size_t n, const char *const *list) {
    size_t hold = 0;
    for (; *list; list++) hold = INFER__MAX(hold, infer__tc_partial(b, from, n, *list));
    return hold;
}

/* 1 where b[0..n) (blanks skipped) opens a header without a role (the
   reply's first, whose role the prompt wrote), 0 where it is text, -1 not
   yet known */
static int infer__hm_headlike(const char *b, size_t n) {
    static const char *const opens[] = {"<|channel|>", "<|constrain|>", "<|message|>", "to=", "<|end|>",
                                        "<|return|>",  "<|call|>",      NULL};
    const char *const *o;
    for (o = opens; *o; o++) {
        size_t l = strlen(*o);
        if (!memcmp(b, *o, INFER__MIN(l, n))) return n >= l ? 1 : -1;
    }
    return 0;
}

/* a header's word at b[*i..e): up to a blank or '<' (at least one byte) */
static size_t infer__hm_word(const char *b, size_t *i, size_t e) {
    size_t s = *i;
    if (*i < e) (*i)++;
    while (*i < e && !infer__tc_ws(b[*i]) && b[*i] != '<') (*i)++;
    return *i - s;
}

/* The header b[h..e): its role (where role), <|channel|>name, to=name and
   <|constrain|>type in any order; sets h_kind and the recipient. */
static void infer__hm_header(infer_output_parser *p, size_t h, size_t e, int role) {
    const char *b = p->buf;
    size_t i = h, ch = 0, ch_len = 0, l;
    int other_role = 0;
    p->h_to = p->h_to_len = 0;
    while (i < e) {
        if (infer__tc_ws(b[i])) i++;
        else if (e - i >= 11 && !memcmp(b + i, "<|channel|>", 11)) {
            i += 11;
            ch = i;
            ch_len = i < e && b[i] != '<' && !infer__tc_ws(b[i]) ? infer__hm_word(b, &i, e) : 0;
        } else if (e - i >= 13 && !memcmp(b + i, "<|constrain|>", 13)) {
            i += 13;
            if (i < e && b[i] != '<' && !infer__tc_ws(b[i])) infer__hm_word(b, &i, e);
        } else if (e - i >= 3 && !memcmp(b + i, "to=", 3)) {
            i += 3;
            p->h_to = i;
            p->h_to_len = i < e && b[i] != '<' && !infer__tc_ws(b[i]) ? infer__hm_word(b, &i, e) : 0;
        } else if (e - i >= 2 && b[i] == '<' && b[i + 1] == '|') { /* another token: skipped */
            size_t c = infer__tc_find(b, i + 2, e, "|>", 2);
            i = c == (size_t)-1 ? e : c + 2;
        } else {
            size_t w = i;
            l = infer__hm_word(b, &i, e);
            if (role) other_role = !(l == 9 && !memcmp(b + w, "assistant", 9));
            role = 0; /* later words (a "json" without <|constrain|>) say nothing */
        }
    }
    l = p->h_to_len;
    if (other_role) p->h_kind = INFER__HM_DROP; /* a message the model wrote as another role's */
    else if (l && !(l == 9 && !memcmp(b + p->h_to, "assistant", 9)) && !(l == 4 && !memcmp(b + p->h_to, "user", 4)) &&
             !(l == 3 && !memcmp(b + p->h_to, "all", 3)))
        p->h_kind = INFER__HM_CALL;
    else if (ch_len == 8 && !memcmp(b + ch, "analysis", 8)) p->h_kind = INFER__HM_REASON;
    else p->h_kind = INFER__HM_CONTENT; /* final, commentary to no one (a preamble), or a channel not known */
}

/* The call whose arguments are b[s..e): 1, or 0 where it is none (a name
   that is not one, arguments that are not a JSON object). */
static int infer__hm_call(infer_output_parser *p, size_t s, size_t e) {
    const char *name = p->buf + p->h_to, *args = p->buf + s;
    size_t name_len = p->h_to_len, args_len = e - s, k;
    infer__jv v;
    infer__sb a = {NULL, 0};
    int ok;
    if (name_len >= 10 && !memcmp(name, "functions.", 10)) name += 10, name_len -= 10;
    for (k = 0; k < name_len && infer__tc_ident(name[k]); k++) {}
    if (!name_len || k != name_len) return 0;
    infer__tc_trim(&args, &args_len);
    memset(&v, 0, sizeof v);
    if (args_len && !infer__tc_parse(p, args, args_len, &v)) return 0;
    ok = infer__tc_args(p, args_len ? &v : NULL, &a) && !a.nomem &&
         infer__tc_add(p, name, name_len, a.p ? a.p : "", stbds_arrlenu(a.p), NULL, 0);
    if (a.nomem) p->nomem = 1;
    infer__jv_free(&v);
    stbds_arrfree(a.p);
    if (ok) {
        infer_tool_call_delta d;
        d.index = (int)stbds_arrlen(p->calls) - 1;
        d.id = p->calls[d.index].id;
        d.name = p->calls[d.index].name;
        d.arguments = p->calls[d.index].args;
        if (!infer__arr_push(p->d_calls, d)) p->nomem = 1;
    }
    return ok;
}

/* Text of a new message for which (0 content, 1 reasoning): after text of
   the same kind it follows a blank line (held, so dropped where nothing
   follows). */
static void infer__hm_separate(infer_output_parser *p, int which) {
    if (which ? p->reasoning_started : p->content_started) infer__tc_put(p, &p->held_ws, "\n\n", 2);
}

/* Opens the text of a message of kind k at pos. */
static void infer__hm_open(infer_output_parser *p, int k) {
    p->h_kind = k;
    p->h_lead = 1;
    p->body_at = p->scan = p->pos;
    p->state = k == INFER__HM_CALL ? INFER__TC_CALL : INFER__TC_H_BODY;
}

/* Decides what it can of buf[pos..n) as harmony messages. */
static void infer__hm_advance(infer_output_parser *p, int final) {
    while (!p->nomem) {
        const char *b = p->buf;
        size_t n = p->n, at, i;
        int k;
        if (p->state == INFER__TC_START) { /* between messages (or before the first) */
            for (i = p->pos; i < n && infer__tc_ws(b[i]); i++) {}
            p->pos = i;
            if (i == n) return;
            if (!memcmp(b + i, "<|start|>", INFER__MIN(9, n - i))) {
                if (n - i < 9 && !final) return;
                if (n - i >= 9) {
                    p->h_at = i;
                    p->h_head = i + 9;
                    p->h_role = 1;
                    p->state = INFER__TC_H_HEAD;
                    continue;
                }
            }
            k = infer__hm_headlike(b + i, n - i);
            if (k < 0 && !final) return;
            if (k > 0) {
                p->h_at = p->h_head = i;
                p->h_role = 0;
                p->state = INFER__TC_H_HEAD;
            } else {
                p->call_at = i;
                infer__hm_open(p, INFER__HM_CONTENT); /* text without a header: an answer */
            }
        } else if (p->state == INFER__TC_H_HEAD) {
            k = infer__hm_first(b, p->h_head, n, infer__hm_head_ends, &at);
            if (k < 0 || at > p->h_head + INFER__HM_HEAD_MAX) {
                if (n >= p->h_head + INFER__HM_HEAD_MAX + 11) { /* too long for a header: text */
                    p->pos = p->call_at = p->h_at;
                    infer__hm_open(p, INFER__HM_CONTENT);
                    /* the text's ends are looked for past the marker that
                       opened the header, which would open it again */
                    if (!memcmp(b + p->h_at, "<|start|>", 9)) p->scan = p->h_at + 9;
                    else if (!memcmp(b + p->h_at, "<|channel|>", 11)) p->scan = p->h_at + 11;
                    continue;
                }
                if (final) p->pos = n; /* a header the reply's end cut: nothing */
                else return;
                p->state = INFER__TC_START;
                continue;
            }
            if (k == 0) {
                infer__hm_header(p, p->h_head, at, p->h_role);
                p->call_at = p->h_at;
                p->pos = at + 11;
                infer__hm_open(p, p->h_kind);
            } else { /* a message without text */
                p->pos = k == 4 ? at : at + strlen(infer__hm_head_ends[k]);
                p->state = INFER__TC_START;
            }
        } else { /* a message's text (INFER__TC_H_BODY) or a call's arguments (INFER__TC_CALL) */
            int call = p->state == INFER__TC_CALL, which = p->h_kind == INFER__HM_REASON;
            size_t from;
            if (!call && p->h_lead) {
                while (p->pos < n && infer__tc_ws(b[p->pos])) p->pos++;
                if (p->pos == n && !final) return;
                p->h_lead = 0;
                if (p->h_kind != INFER__HM_DROP) infer__hm_separate(p, which);
            }
            from = call ? p->scan : INFER__MAX(p->pos, p->scan);
            k = infer__hm_first(b, from, n, infer__hm_ends, &at);
            if (k < 0 && !final) {
                size_t end = n - infer__hm_hold(b, from, n, infer__hm_ends);
                if (call) {
                    p->scan = end;
                    return;
                }
                end = p->pos + infer__tc_utf8_cut(b + p->pos, end - p->pos);
                if (p->h_kind != INFER__HM_DROP) infer__tc_emit(p, which, b + p->pos, end - p->pos);
                p->pos = end;
                return;
            }
            if (k < 0) at = n; /* the reply's end ends it (<|call|> and <|return|> may end it unwritten) */
            if (call && !(k < 0 && p->cut) && !infer__hm_call(p, p->body_at, at)) {
                /* not a call: its text, header and all, is content */
                p->n_malformed++;
                infer__tc_drop_ws(p);
                infer__hm_separate(p, 0);
                infer__tc_emit(p, 0, b + p->call_at, at - p->call_at);
            } else if (!call && p->h_kind != INFER__HM_DROP)
                infer__tc_emit(p, which, b + p->pos, at - p->pos);
            infer__tc_drop_ws(p);
            if (k == 4) { /* <|channel|>: the next header, its role left out */
                p->pos = p->h_at = p->h_head = at;
                p->h_role = 0;
                p->state = INFER__TC_H_HEAD;
                continue;
            }
            p->pos = k < 0 ? n : k == 3 ? at : at + strlen(infer__hm_ends[k]);
            p->state = INFER__TC_START;
        }
    }
}

/* Decides what it can of buf[pos..n). */
static void infer__tc_advance(infer_output_parser *p, int final) {
    if (p->fmt == INFER_TOOL_FORMAT_HARMONY) {
        infer__hm_advance(p, final);
        return;
    }
    while (!p->nomem) {
        const char *b = p->buf;
        size_t n = p->n;
        if (p->state == INFER__TC_START) {
            while (p->pos < n && infer__tc_ws(b[p->pos])) p->pos++;
            if (!p->think_seen && p->reasoning_mode) {
                size_t tl = strlen(p->think_open), k = INFER__MIN(tl, n - p->pos);
                if (!memcmp(b + p->pos, p->think_open, k)) {
                    if (k < tl) {
                        if (!final) return;
                    } else {
                        p->pos += tl;
                        p->think_seen = 1;
                        p->state = INFER__TC_REASON;
                        continue;
                    }
                }
                p->think_seen = 1;
                if (p->reasoning_mode == INFER_REASONING_OPEN) {
                    p->state = INFER__TC_REASON;
                    continue;
                }
            }
            p->think_seen = 1;
            p->state = INFER__TC_CONTENT;
        } else if (p->state == INFER__TC_REASON) {
            size_t cl = strlen(p->think_close), at = infer__tc_find(b, p->pos, n, p->think_close, cl), end;
            if (at != (size_t)-1) {
                infer__tc_emit(p, 1, b + p->pos, at - p->pos);
                infer__tc_drop_ws(p);
                p->pos = at + cl;
                p->state = INFER__TC_START;
                continue;
            }
            end = final ? n : n - infer__tc_partial(b, p->pos, n, p->think_close);
            if (!final) end = p->pos + infer__tc_utf8_cut(b + p->pos, end - p->pos);
            infer__tc_emit(p, 1, b + p->pos, end - p->pos);
            p->pos = end;
            if (final) infer__tc_drop_ws(p);
            return;
        } else if (p->state == INFER__TC_CONTENT) {
            const infer__tc_marker *m, *best = NULL;
            size_t best_at = (size_t)-1, end, hold = 0;
            if (!p->content_started && (p->fmt == INFER_TOOL_FORMAT_LLAMA3 || p->fmt == INFER_TOOL_FORMAT_GENERIC)) {
                size_t i = p->pos;
                int r;
                /* Llama 3 may separate its calls with ';' */
                while (i < n && (infer__tc_ws(b[i]) || (b[i] == ';' && stbds_arrlen(p->calls) > 0))) i++;
                if (i == n && !final) return;
                r = p->fmt == INFER_TOOL_FORMAT_GENERIC ? (i < n ? b[i] == '{' : -1) : infer__tc_l3_start(b + i, n - i);
                if (r < 0 && !final) return;
                if (r > 0) {
                    p->pos = i;
                    infer__tc_open_call(p, i, i, p->fmt == INFER_TOOL_FORMAT_GENERIC ? INFER__K_GENERIC : INFER__K_L3JSON);
                    continue;
                }
            }
            for (m = p->markers; m->text; m++) {
                size_t at = infer__tc_find(b, p->pos, n, m->text, strlen(m->text));
                if (at < best_at) best_at = at, best = m;
                if (!final) hold = INFER__MAX(hold, infer__tc_partial(b, p->pos, n, m->text));
            }
            if (best) {
                infer__tc_emit(p, 0, b + p->pos, best_at - p->pos);
                infer__tc_drop_ws(p);
                p->pos = best_at + strlen(best->text);
                if (best->kind != INFER__K_DROP) infer__tc_open_call(p, best_at, p->pos, best->kind);
                continue;
            }
            end = n - hold;
            if (!final) end = p->pos + infer__tc_utf8_cut(b + p->pos, end - p->pos);
            infer__tc_emit(p, 0, b + p->pos, end - p->pos);
            p->pos = end;
            if (final) infer__tc_drop_ws(p);
            return;
        } else { /* a call */
            size_t body_end = 0, end = 0;
            int r = infer__tc_call_end(p, final, &body_end, &end), ok;
            if (r == 0) return;
            if (r == -2) { /* a call the reply's cut ended: neither a call nor text */
                p->pos = p->n;
                p->state = INFER__TC_CONTENT;
                continue;
            }
            if (r < 0) { /* the marker alone, as text */
                end = p->body_at;
                ok = 0;
            } else ok = infer__tc_parse_call(p, p->body_at, body_end);
            if (!ok) {
                if (r > 0) p->n_malformed++;
                infer__tc_emit(p, 0, b + p->call_at, end - p->call_at);
            }
            p->pos = end;
            p->state = INFER__TC_CONTENT;
        }
    }
}

INFERDEF infer_output_parser *infer_output_parser_new(infer_tool_format f, infer_reasoning reasoning, infer_error *err) {
    infer_output_parser *p;
    if ((int)f < 0 || f >= INFER_TOOL_FORMAT_COUNT || (int)reasoning < 0 || reasoning > INFER_REASONING_OPEN) {
        infer__set_error(err, INFER_ERR_ARG, "output parser: unknown tool format %d or reasoning mode %d", (int)f,
                         reasoning);
        return NULL;
    }
    p = (infer_output_parser *)infer__calloc(1, sizeof *p);
    if (!p || !infer__arr_setlen(p->buf, 1)) {
        INFER_FREE(p);
        infer__set_error(err, INFER_ERR_NOMEM, "output parser: out of memory");
        return NULL;
    }
    p->buf[0] = 0;
    p->fmt = f;
    p->reasoning_mode = reasoning;
    p->markers = infer__tc_markers(f);
    p->think_open = f == INFER_TOOL_FORMAT_COMMAND_R ? "<|START_THINKING|>" : "<think>";
    p->think_close = f == INFER_TOOL_FORMAT_COMMAND_R ? "<|END_THINKING|>" : "</think>";
    if (f == INFER_TOOL_FORMAT_GEMMA4) { /* its thinking channel, reasoning whatever the mode */
        p->think_open = "<|channel>thought";
        p->think_close = "<channel|>";
        if (reasoning == INFER_REASONING_NONE) p->reasoning_mode = INFER_REASONING_AUTO;
    }
    p->state = INFER__TC_START;
    return p;
}

static void infer__tc_delta(infer_output_parser *p, infer_output_delta *out) {
    if (!out) return;
    out->content = infer__tc_cstr(p, &p->d_content);
    out->content_len = stbds_arrlenu(p->d_content.p);
    out->reasoning = infer__tc_cstr(p, &p->d_reasoning);
    out->reasoning_len = stbds_arrlenu(p->d_reasoning.p);
    out->calls = p->d_calls;
    out->n_calls = (int)stbds_arrlen(p->d_calls);
    if (p->nomem) memset(out, 0, sizeof *out), out->content = out->reasoning = "";
}

static infer_status infer__tc_begin(infer_output_parser *p, infer_output_delta *out, infer_error *err) {
    if (out) {
        memset(out, 0, sizeof *out);
        out->content = out->reasoning = "";
    }
    if (!p || p->finished || p->nomem) {
        infer__set_error(err, p && p->nomem ? INFER_ERR_NOMEM : INFER_ERR_ARG, "output parser: %s",
                         !p ? "no parser" : p->nomem ? "out of memory" : "the reply was finished");
        return p && p->nomem ? INFER_ERR_NOMEM : INFER_ERR_ARG;
    }
    if (p->d_content.p) stbds_arrsetlen(p->d_content.p, 0);
    if (p->d_reasoning.p) stbds_arrsetlen(p->d_reasoning.p, 0);
    if (p->d_calls) stbds_arrsetlen(p->d_calls, 0);
    return INFER_OK;
}

INFERDEF infer_status infer_output_parser_push(infer_output_parser *p, const char *text, size_t n, infer_output_delta *out,
                                               infer_error *err) {
    infer_status st = infer__tc_begin(p, out, err);
    if (st != INFER_OK) return st;
    if (n && !text) {
        infer__set_error(err, INFER_ERR_ARG, "output parser: no text");
        return INFER_ERR_ARG;
    }
    if (n) {
        if (!infer__arr_setlen(p->buf, p->n + n + 1)) p->nomem = 1;
        else {
            memcpy(p->buf + p->n, text, n);
            p->n += n;
            p->buf[p->n] = 0;
            infer__tc_advance(p, 0);
        }
    }
    if (p->nomem) {
        infer__set_error(err, INFER_ERR_NOMEM, "output parser: out of memory");
        return INFER_ERR_NOMEM;
    }
    infer__tc_delta(p, out);
    return INFER_OK;
}

INFERDEF infer_status infer_output_parser_finish(infer_output_parser *p, infer_output_delta *last,
                                                 infer_output_result *result, infer_error *err) {
    int i;
    infer_status st;
    if (result) {
        memset(result, 0, sizeof *result);
        result->content = result->reasoning_content = "";
    }
    if ((st = infer__tc_begin(p, last, err)) != INFER_OK) return st;
    infer__tc_advance(p, 1);
    infer__tc_drop_ws(p);
    p->finished = 1;
    if (!p->nomem && infer__arr_fit(p->pub_calls, stbds_arrlen(p->calls)))
        for (i = 0; i < (int)stbds_arrlen(p->calls); i++) {
            infer_tool_call c;
            c.id = p->calls[i].id;
            c.name = p->calls[i].name;
            c.arguments = p->calls[i].args;
            stbds_arrput(p->pub_calls, c);
        }
    else p->nomem = 1;
    if (result && !p->nomem) {
        result->content = infer__tc_cstr(p, &p->content);
        result->reasoning_content = infer__tc_cstr(p, &p->reasoning);
        result->content_len = stbds_arrlenu(p->content.p);
        result->reasoning_len = stbds_arrlenu(p->reasoning.p);
        result->calls = p->pub_calls;
        result->n_calls = (int)stbds_arrlen(p->pub_calls);
        result->n_malformed = p->n_malformed;
    }
    if (p->nomem) {
        if (result) {
            memset(result, 0, sizeof *result);
            result->content = result->reasoning_content = "";
        }
        infer__set_error(err, INFER_ERR_NOMEM, "output parser: out of memory");
        return INFER_ERR_NOMEM;
    }
    infer__tc_delta(p, last);
    return INFER_OK;
}

INFERDEF infer_status infer_output_parser_set_tools(infer_output_parser *p, const char *tools_json, infer_error *err) {
    infer__jp j;
    infer__jv v;
    if (!p || p->finished) {
        infer__set_error(err, INFER_ERR_ARG, "output parser: %s", !p ? "no parser" : "the reply was finished");
        return INFER_ERR_ARG;
    }
    memset(&v, 0, sizeof v);
    if (tools_json) {
        memset(&j, 0, sizeof j);
        j.src = j.p = tools_json;
        j.err = err;
        j.what = "tools";
        infer__jp_value(&j, &v);
        if (!j.failed) infer__jp_ws(&j);
        if (!j.failed && *j.p) infer__jp_fail(&j, j.p, "unexpected text after the list");
        if (!j.failed && v.type != INFER__J_ARR) infer__jp_fail(&j, v.at, "tools must be a list");
        if (j.failed) {
            infer__jv_free(&v);
            return err && err->code != INFER_OK ? err->code : INFER_ERR_ARG;
        }
    }
    infer__jv_free(&p->tools);
    p->tools = v;
    return INFER_OK;
}

INFERDEF void infer_output_parser_cut(infer_output_parser *p) {
    if (p) p->cut = 1;
}

INFERDEF int infer_output_parser_in_call(const infer_output_parser *p) {
    return p && !p->finished && p->state == INFER__TC_CALL;
}

INFERDEF void infer_output_parser_free(infer_output_parser *p) {
    int i;
    if (!p) return;
    for (i = 0; i < (int)stbds_arrlen(p->calls); i++) {
        INFER_FREE(p->calls[i].id);
        INFER_FREE(p->calls[i].name);
        INFER_FREE(p->calls[i].args);
    }
    stbds_arrfree(p->calls);
    stbds_arrfree(p->d_calls);
    stbds_arrfree(p->pub_calls);
    stbds_arrfree(p->buf);
    stbds_arrfree(p->held_ws.p);
    stbds_arrfree(p->content.p);
    stbds_arrfree(p->reasoning.p);
    stbds_arrfree(p->d_content.p);
    stbds_arrfree(p->d_reasoning.p);
    infer__jv_free(&p->tools);
    INFER_FREE(p);
}
