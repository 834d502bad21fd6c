/* schema.c - JSON schemas compiled to GBNF grammars: the schema's JSON text
   parsed, then each schema written as rules (infer_json_schema_to_grammar),
   which grammar.c compiles like any other grammar. */
#include "internal.h"

/* ---- JSON (the schema's text) ------------------------------------------------ */

enum { INFER__J_NULL = 0, INFER__J_BOOL, INFER__J_NUM, INFER__J_STR, INFER__J_ARR, INFER__J_OBJ };

typedef struct infer__jv {
    int type;
    char *s;                 /* STR: the text decoded (UTF-8); NUM: as written */
    size_t n;
    int b;                   /* BOOL */
    struct infer__jv *items; /* stbds: ARR elements, OBJ values */
    char **keys;             /* stbds: OBJ keys, decoded */
    const char *at;          /* where it starts in the schema text */
} infer__jv;

typedef struct infer__jp {
    const char *src, *p;
    infer_error *err;
    int failed, depth;
} infer__jp;

static void infer__jp_fail(infer__jp *j, const char *at, const char *fmt, ...) INFER__PRINTF(3, 4);
static void infer__jp_fail(infer__jp *j, const char *at, const char *fmt, ...) {
    va_list ap;
    if (j->failed) return;
    j->failed = 1;
    va_start(ap, fmt);
    infer__fail_at(j->err, "JSON schema", j->src, at, fmt, ap);
    va_end(ap);
}

static void infer__jp_nomem(infer__jp *j) {
    if (j->failed) return;
    j->failed = 1;
    infer__set_error(j->err, INFER_ERR_NOMEM, "JSON schema: out of memory");
}

static void infer__jv_free(infer__jv *v) {
    int i;
    INFER_FREE(v->s);
    for (i = 0; i < (int)stbds_arrlen(v->items); i++) infer__jv_free(&v->items[i]);
    stbds_arrfree(v->items);
    for (i = 0; i < (int)stbds_arrlen(v->keys); i++) INFER_FREE(v->keys[i]);
    stbds_arrfree(v->keys);
}

static void infer__jp_ws(infer__jp *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

/* (4 bytes of room made by the caller) */
static void infer__j_put_utf8(char **buf, uint32_t c) {
    if (c < 0x80) stbds_arrput(*buf, (char)c);
    else if (c < 0x800) {
        stbds_arrput(*buf, (char)(0xC0 | c >> 6));
        stbds_arrput(*buf, (char)(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        stbds_arrput(*buf, (char)(0xE0 | c >> 12));
        stbds_arrput(*buf, (char)(0x80 | ((c >> 6) & 0x3F)));
        stbds_arrput(*buf, (char)(0x80 | (c & 0x3F)));
    } else {
        stbds_arrput(*buf, (char)(0xF0 | c >> 18));
        stbds_arrput(*buf, (char)(0x80 | ((c >> 12) & 0x3F)));
        stbds_arrput(*buf, (char)(0x80 | ((c >> 6) & 0x3F)));
        stbds_arrput(*buf, (char)(0x80 | (c & 0x3F)));
    }
}

static int infer__jp_hex4(const char *p, uint32_t *out) {
    int i;
    *out = 0;
    for (i = 0; i < 4; i++) {
        int v = infer__g_hex(p[i]);
        if (v < 0) return 0;
        *out = *out << 4 | (uint32_t)v;
    }
    return 1;
}

/* A string at j->p (its opening quote), decoded; NULL on an error. */
static char *infer__jp_string(infer__jp *j, size_t *n) {
    const char *at = j->p++;
    char *buf = NULL, *out;
    for (;;) {
        const char *q = j->p;
        uint32_t c;
        if (!*q) {
            infer__jp_fail(j, at, "unterminated string");
            break;
        }
        if (*q == '"') {
            j->p++;
            break;
        }
        if ((unsigned char)*q < 0x20) {
            infer__jp_fail(j, q, "control character in a string");
            break;
        }
        if (*q != '\\') {
            if (!infer__g_utf8(&j->p, &c)) {
                infer__jp_fail(j, q, "invalid UTF-8 in a string");
                break;
            }
            if (!infer__arr_room(buf, j->p - q)) {
                infer__jp_nomem(j);
                break;
            }
            stbds_arrput(buf, *q);
            while (++q < j->p) stbds_arrput(buf, *q);
            continue;
        }
        switch (q[1]) {
        case '"': c = '"'; break;
        case '\\': c = '\\'; break;
        case '/': c = '/'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u':
            if (!infer__jp_hex4(q + 2, &c)) {
                infer__jp_fail(j, q, "bad \\u escape");
                goto done;
            }
            if (c >= 0xD800 && c <= 0xDBFF) { /* a surrogate pair */
                uint32_t lo;
                if (q[6] != '\\' || q[7] != 'u' || !infer__jp_hex4(q + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    infer__jp_fail(j, q, "bad \\u escape (a lone surrogate)");
                    goto done;
                }
                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                j->p += 6;
            } else if (c >= 0xDC00 && c <= 0xDFFF) {
                infer__jp_fail(j, q, "bad \\u escape (a lone surrogate)");
                goto done;
            }
            j->p += 4;
            break;
        default: infer__jp_fail(j, q, "bad escape in a string"); goto done;
        }
        j->p += 2;
        if (!infer__arr_room(buf, 4)) {
            infer__jp_nomem(j);
            break;
        }
        infer__j_put_utf8(&buf, c);
    }
done:
    if (j->failed) {
        stbds_arrfree(buf);
        return NULL;
    }
    *n = (size_t)stbds_arrlen(buf);
    out = infer__strndup(buf ? buf : "", *n);
    stbds_arrfree(buf);
    if (!out) infer__jp_nomem(j);
    return out;
}

static void infer__jp_value(infer__jp *j, infer__jv *v) {
    const char *at;
    infer__jp_ws(j);
    at = j->p;
    memset(v, 0, sizeof *v);
    v->at = at;
    if (++j->depth > 64) {
        infer__jp_fail(j, at, "nested too deeply");
        return;
    }
    if (*at == '{' || *at == '[') {
        int obj = *at == '{';
        char close = obj ? '}' : ']';
        v->type = obj ? INFER__J_OBJ : INFER__J_ARR;
        j->p++;
        infer__jp_ws(j);
        if (*j->p == close) j->p++;
        else
            for (;;) {
                infer__jv item;
                if (obj) {
                    size_t kn;
                    char *key;
                    infer__jp_ws(j);
                    if (*j->p != '"') {
                        infer__jp_fail(j, j->p, *j->p ? "expecting a key (a string)" : "unexpected end, expecting a key");
                        break;
                    }
                    key = infer__jp_string(j, &kn);
                    if (!key) break;
                    if (!infer__arr_push(v->keys, key)) {
                        INFER_FREE(key);
                        infer__jp_nomem(j);
                        break;
                    }
                    infer__jp_ws(j);
                    if (*j->p != ':') {
                        infer__jp_fail(j, j->p, "expecting ':' after a key");
                        break;
                    }
                    j->p++;
                }
                if (!infer__arr_room(v->items, 1)) {
                    infer__jp_nomem(j);
                    break;
                }
                infer__jp_value(j, &item);
                stbds_arrput(v->items, item); /* kept even when broken, to be freed */
                if (j->failed) break;
                infer__jp_ws(j);
                if (*j->p == ',') j->p++;
                else if (*j->p == close) {
                    j->p++;
                    break;
                } else {
                    infer__jp_fail(j, j->p, obj ? "expecting ',' or '}'" : "expecting ',' or ']'");
                    break;
                }
            }
    } else if (*at == '"') {
        v->type = INFER__J_STR;
        v->s = infer__jp_string(j, &v->n);
    } else if (!strncmp(at, "true", 4) || !strncmp(at, "false", 5)) {
        v->type = INFER__J_BOOL;
        v->b = *at == 't';
        j->p += v->b ? 4 : 5;
    } else if (!strncmp(at, "null", 4)) {
        v->type = INFER__J_NULL;
        j->p += 4;
    } else if (*at == '-' || (*at >= '0' && *at <= '9')) {
        const char *q = at;
        int ok = 1;
        if (*q == '-') q++;
        if (*q == '0') q++;
        else if (*q >= '1' && *q <= '9')
            while (*q >= '0' && *q <= '9') q++;
        else ok = 0;
        if (ok && *q == '.') {
            ok = q[1] >= '0' && q[1] <= '9';
            for (q++; *q >= '0' && *q <= '9'; q++) {}
        }
        if (ok && (*q == 'e' || *q == 'E')) {
            q++;
            if (*q == '+' || *q == '-') q++;
            ok = *q >= '0' && *q <= '9';
            while (*q >= '0' && *q <= '9') q++;
        }
        if (!ok) infer__jp_fail(j, at, "bad number");
        else {
            v->type = INFER__J_NUM;
            v->n = (size_t)(q - at);
            if (!(v->s = infer__strndup(at, v->n))) infer__jp_nomem(j);
            j->p = q;
        }
    } else if (!*at) infer__jp_fail(j, at, "unexpected end, expecting a value");
    else infer__jp_fail(j, at, "unexpected '%c', expecting a value", *at);
    j->depth--;
}

static const infer__jv *infer__jv_get(const infer__jv *o, const char *key) {
    int i;
    if (o->type != INFER__J_OBJ) return NULL;
    for (i = 0; i < (int)stbds_arrlen(o->keys); i++)
        if (!strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
}

/* ---- JSON schema -> GBNF ------------------------------------------------------ */

typedef struct infer__sb {
    char *p;   /* stbds */
    int nomem; /* an append failed: the text is incomplete (checked where it is used) */
} infer__sb;

static void infer__sb_put(infer__sb *b, const char *s, size_t n) {
    char *at;
    if (!n || b->nomem) return;
    if ((at = infer__arr_addn(b->p, n))) memcpy(at, s, n);
    else b->nomem = 1;
}
static void infer__sb_putc(infer__sb *b, char c) { infer__sb_put(b, &c, 1); }
static void infer__sb_puts(infer__sb *b, const char *s) { infer__sb_put(b, s, strlen(s)); }
static void infer__sb_int(infer__sb *b, long v) {
    char t[32];
    snprintf(t, sizeof t, "%ld", v);
    infer__sb_puts(b, t);
}

/* bytes as a GBNF string literal */
static void infer__sb_literal(infer__sb *b, const char *s, size_t n) {
    size_t i;
    infer__sb_putc(b, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            infer__sb_putc(b, '\\');
            infer__sb_putc(b, (char)c);
        } else if (c == '\n') infer__sb_puts(b, "\\n");
        else if (c == '\r') infer__sb_puts(b, "\\r");
        else if (c == '\t') infer__sb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7F) {
            char t[8];
            snprintf(t, sizeof t, "\\x%02X", c);
            infer__sb_puts(b, t);
        } else infer__sb_putc(b, (char)c);
    }
    infer__sb_putc(b, '"');
}

/* a string as compact JSON text */
static void infer__sb_json_string(infer__sb *b, const char *s, size_t n) {
    size_t i;
    infer__sb_putc(b, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            infer__sb_putc(b, '\\');
            infer__sb_putc(b, (char)c);
        } else if (c == '\n') infer__sb_puts(b, "\\n");
        else if (c == '\r') infer__sb_puts(b, "\\r");
        else if (c == '\t') infer__sb_puts(b, "\\t");
        else if (c == '\b') infer__sb_puts(b, "\\b");
        else if (c == '\f') infer__sb_puts(b, "\\f");
        else if (c < 0x20) {
            char t[8];
            snprintf(t, sizeof t, "\\u%04x", c);
            infer__sb_puts(b, t);
        } else infer__sb_putc(b, (char)c);
    }
    infer__sb_putc(b, '"');
}

/* a value as compact JSON text */
static void infer__sb_json(infer__sb *b, const infer__jv *v) {
    int i, n = (int)stbds_arrlen(v->items);
    switch (v->type) {
    case INFER__J_NULL: infer__sb_puts(b, "null"); break;
    case INFER__J_BOOL: infer__sb_puts(b, v->b ? "true" : "false"); break;
    case INFER__J_NUM: infer__sb_put(b, v->s, v->n); break;
    case INFER__J_STR: infer__sb_json_string(b, v->s, v->n); break;
    default:
        infer__sb_putc(b, v->type == INFER__J_OBJ ? '{' : '[');
        for (i = 0; i < n; i++) {
            if (i) infer__sb_putc(b, ',');
            if (v->type == INFER__J_OBJ) {
                infer__sb_json_string(b, v->keys[i], strlen(v->keys[i]));
                infer__sb_putc(b, ':');
            }
            infer__sb_json(b, &v->items[i]);
        }
        infer__sb_putc(b, v->type == INFER__J_OBJ ? '}' : ']');
    }
}

/* The shared rules a schema's grammar may use, each written once if used
   (with what it uses). Whitespace is bounded (one space, or a line break
   and up to 20 blanks) and numbers have at most 16 digits before the point
   and 16 after, so a model cannot ramble on in them. */
enum {
    INFER__SP_SPACE, INFER__SP_STRING, INFER__SP_CHAR, INFER__SP_INTEGRAL, INFER__SP_INTEGER, INFER__SP_NUMBER,
    INFER__SP_BOOLEAN, INFER__SP_NULL, INFER__SP_VALUE, INFER__SP_OBJECT, INFER__SP_ARRAY, INFER__SP_COUNT
};
static const char *const infer__sp_name[INFER__SP_COUNT] = {"space", "string", "char", "integral", "integer", "number",
                                                           "boolean", "null", "value", "object", "array"};
static const char *const infer__sp_rule[INFER__SP_COUNT] = {
    "space ::= | \" \" | \"\\n\" [ \\t]{0,20}",
    "string ::= \"\\\"\" char* \"\\\"\" space",
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})",
    "integral ::= \"0\" | [1-9] [0-9]{0,15}",
    "integer ::= \"-\"? integral space",
    "number ::= \"-\"? integral (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space",
    "boolean ::= (\"true\" | \"false\") space",
    "null ::= \"null\" space",
    "value ::= object | array | string | number | boolean | null",
    "object ::= \"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space",
    "array ::= \"[\" space (value (\",\" space value)*)? \"]\" space"};
/* what each uses, as bits */
static const unsigned infer__sp_uses[INFER__SP_COUNT] = {
    0,
    1u << INFER__SP_CHAR | 1u << INFER__SP_SPACE,
    0,
    0,
    1u << INFER__SP_INTEGRAL | 1u << INFER__SP_SPACE,
    1u << INFER__SP_INTEGRAL | 1u << INFER__SP_SPACE,
    1u << INFER__SP_SPACE,
    1u << INFER__SP_SPACE,
    1u << INFER__SP_OBJECT | 1u << INFER__SP_ARRAY | 1u << INFER__SP_STRING | 1u << INFER__SP_NUMBER |
        1u << INFER__SP_BOOLEAN | 1u << INFER__SP_NULL,
    1u << INFER__SP_SPACE | 1u << INFER__SP_STRING | 1u << INFER__SP_VALUE,
    1u << INFER__SP_SPACE | 1u << INFER__SP_VALUE};

typedef struct infer__sg {
    infer__jp *jp; /* for errors: positions in the schema text */
    char **rules;  /* stbds: each rule's line, in order (the root first) */
    char **names;  /* stbds: the names of the schema's own rules */
    unsigned used; /* shared rules used, as bits */
} infer__sg;

static const char *infer__sg_prim(infer__sg *sg, int which) {
    sg->used |= 1u << which;
    return infer__sp_name[which];
}

/* A new rule's slot (its line is filled in later, so rules come out in the
   order the schema reads) and its name: path with characters GBNF names
   cannot hold made '-', and a number added if taken. */
static int infer__sg_new_rule(infer__sg *sg, const char *path, const char **name) {
    char buf[96];
    int i, k, n, taken;
    for (k = 1;; k++) {
        n = snprintf(buf, sizeof buf - 16, "%s", path);
        if (n > (int)sizeof buf - 17) n = (int)sizeof buf - 17;
        for (i = 0; i < n; i++)
            if (!infer__gp_word(buf[i])) buf[i] = '-';
        if (k > 1) snprintf(buf + n, 16, "-%d", k);
        taken = 0;
        for (i = 0; i < (int)stbds_arrlen(sg->names) && !taken; i++) taken = !strcmp(sg->names[i], buf);
        for (i = 0; i < INFER__SP_COUNT && !taken; i++) taken = !strcmp(infer__sp_name[i], buf);
        if (!taken) break;
    }
    if (!infer__arr_room(sg->names, 1) || !infer__arr_room(sg->rules, 1) ||
        !(*name = infer__strndup(buf, strlen(buf)))) {
        infer__jp_nomem(sg->jp);
        return -1;
    }
    stbds_arrput(sg->names, (char *)*name);
    stbds_arrput(sg->rules, NULL);
    return (int)stbds_arrlen(sg->rules) - 1;
}

static const char *infer__sg_finish_rule(infer__sg *sg, int slot, const char *name, infer__sb *body) {
    infer__sb line = {NULL, 0};
    infer__sb_puts(&line, name);
    infer__sb_puts(&line, " ::= ");
    infer__sb_put(&line, body->p, (size_t)stbds_arrlen(body->p));
    if (slot < 0 || body->nomem || line.nomem || !(sg->rules[slot] = infer__strndup(line.p, (size_t)stbds_arrlen(line.p))))
        infer__jp_nomem(sg->jp);
    stbds_arrfree(line.p);
    stbds_arrfree(body->p);
    return sg->jp->failed ? NULL : name;
}

static const char *infer__sg_schema(infer__sg *sg, const infer__jv *s, const char *path);

/* A non-negative whole number keyword (minLength, maxItems ...), or def
   when absent; -2 after an error. */
static long infer__sg_count(infer__sg *sg, const infer__jv *s, const char *key, long def) {
    const infer__jv *v = infer__jv_get(s, key);
    char *end;
    double d;
    if (!v) return def;
    d = v->type == INFER__J_NUM ? strtod(v->s, &end) : -1;
    if (d < 0 || d != floor(d)) {
        infer__jp_fail(sg->jp, v->at, "%s must be a non-negative integer", key);
        return -2;
    }
    if (d > INFER__G_MAX_REPEAT) {
        infer__jp_fail(sg->jp, v->at, "%s over %d is not supported", key, INFER__G_MAX_REPEAT);
        return -2;
    }
    return (long)d;
}

/* x{min,max} in GBNF (max < 0: no limit) */
static void infer__sb_repeat(infer__sb *b, long min, long max) {
    if (min == 0 && max < 0) infer__sb_puts(b, "*");
    else if (min == 1 && max < 0) infer__sb_puts(b, "+");
    else if (min == 0 && max == 1) infer__sb_puts(b, "?");
    else {
        infer__sb_puts(b, "{");
        infer__sb_int(b, min);
        if (max != min) {
            infer__sb_puts(b, ",");
            if (max >= 0) infer__sb_int(b, max);
        }
        infer__sb_puts(b, "}");
    }
}

/* The properties from i on of an object: first set, none written yet
   (each optional one may be the first); else each after a comma. */
static void infer__sg_props(infer__sb *b, char **kv, const unsigned char *req, int i, int n, int first) {
    if (i == n) return;
    if (!first) {
        for (; i < n; i++) {
            infer__sb_puts(b, req[i] ? " \",\" space " : " (\",\" space ");
            infer__sb_puts(b, kv[i]);
            if (!req[i]) infer__sb_puts(b, ")?");
        }
        return;
    }
    if (req[i]) {
        infer__sb_puts(b, " ");
        infer__sb_puts(b, kv[i]);
        infer__sg_props(b, kv, req, i + 1, n, 0);
    } else {
        infer__sb_puts(b, " (");
        infer__sb_puts(b, kv[i]);
        infer__sg_props(b, kv, req, i + 1, n, 0);
        if (i + 1 < n) {
            infer__sb_puts(b, " |");
            infer__sg_props(b, kv, req, i + 1, n, 1);
            infer__sb_puts(b, ")");
        } else infer__sb_puts(b, ")?");
    }
}

static const char *infer__sg_object(infer__sg *sg, const infer__jv *s, const infer__jv *props, const char *path) {
    const infer__jv *req = infer__jv_get(s, "required");
    int n, i, k, slot;
    const char *name = NULL;
    char **kv = NULL;
    unsigned char *isreq;
    infer__sb body = {NULL, 0};
    if (props->type != INFER__J_OBJ) {
        infer__jp_fail(sg->jp, props->at, "properties must be an object");
        return NULL;
    }
    if (req && req->type != INFER__J_ARR) {
        infer__jp_fail(sg->jp, req->at, "required must be an array of names");
        return NULL;
    }
    n = (int)stbds_arrlen(props->keys);
    isreq = (unsigned char *)infer__calloc((size_t)n + 1, 1);
    if (!isreq) {
        infer__jp_nomem(sg->jp);
        return NULL;
    }
    for (k = 0; req && k < (int)stbds_arrlen(req->items); k++) {
        const infer__jv *r = &req->items[k];
        if (r->type != INFER__J_STR) {
            infer__jp_fail(sg->jp, r->at, "required must be an array of names");
            break;
        }
        for (i = 0; i < n && strcmp(props->keys[i], r->s); i++) {}
        if (i == n) {
            infer__jp_fail(sg->jp, r->at, "required property '%s' is not in properties", r->s);
            break;
        }
        isreq[i] = 1;
    }
    slot = sg->jp->failed ? -1 : infer__sg_new_rule(sg, path, &name);
    for (i = 0; i < n && !sg->jp->failed; i++) {
        infer__sb one = {NULL, 0}, key = {NULL, 0};
        char sub[96];
        const char *val;
        snprintf(sub, sizeof sub, "%s-%s", path, props->keys[i]);
        val = infer__sg_schema(sg, &props->items[i], sub);
        if (!val) break;
        infer__sb_json_string(&key, props->keys[i], strlen(props->keys[i]));
        infer__sb_literal(&one, key.p, (size_t)stbds_arrlen(key.p));
        infer__sb_puts(&one, " space \":\" space ");
        infer__sb_puts(&one, val);
        infer__sb_putc(&one, 0);
        if (key.nomem || one.nomem || !infer__arr_room(kv, 1)) infer__jp_nomem(sg->jp);
        else if (!(kv[stbds_arrlen(kv)] = infer__strndup(one.p, strlen(one.p)))) infer__jp_nomem(sg->jp);
        else stbds_arrsetlen(kv, stbds_arrlen(kv) + 1);
        stbds_arrfree(one.p);
        stbds_arrfree(key.p);
    }
    if (!sg->jp->failed) {
        infer__sb_puts(&body, "\"{\" space");
        infer__sg_props(&body, kv, isreq, 0, n, 1);
        infer__sb_puts(&body, " \"}\" space");
        infer__sg_prim(sg, INFER__SP_SPACE);
        infer__sg_finish_rule(sg, slot, name, &body);
    }
    for (i = 0; i < (int)stbds_arrlen(kv); i++) INFER_FREE(kv[i]);
    stbds_arrfree(kv);
    INFER_FREE(isreq);
    return sg->jp->failed ? NULL : name;
}

static const char *infer__sg_type(infer__sg *sg, const infer__jv *s, const char *type, const char *at,
                                  const char *path) {
    const char *name;
    int slot;
    infer__sb body = {NULL, 0};
    if (!strcmp(type, "string")) {
        long min = infer__sg_count(sg, s, "minLength", 0), max = infer__sg_count(sg, s, "maxLength", -1);
        if (min == -2 || max == -2) return NULL;
        if (min == 0 && max < 0) return infer__sg_prim(sg, INFER__SP_STRING);
        if (max >= 0 && max < min) {
            infer__jp_fail(sg->jp, s->at, "maxLength is below minLength");
            return NULL;
        }
        slot = infer__sg_new_rule(sg, path, &name);
        infer__sb_puts(&body, "\"\\\"\" char");
        infer__sb_repeat(&body, min, max);
        infer__sb_puts(&body, " \"\\\"\" space");
        infer__sg_prim(sg, INFER__SP_CHAR);
        infer__sg_prim(sg, INFER__SP_SPACE);
        return infer__sg_finish_rule(sg, slot, name, &body);
    }
    if (!strcmp(type, "number")) return infer__sg_prim(sg, INFER__SP_NUMBER);
    if (!strcmp(type, "integer")) return infer__sg_prim(sg, INFER__SP_INTEGER);
    if (!strcmp(type, "boolean")) return infer__sg_prim(sg, INFER__SP_BOOLEAN);
    if (!strcmp(type, "null")) return infer__sg_prim(sg, INFER__SP_NULL);
    if (!strcmp(type, "object")) {
        const infer__jv *props = infer__jv_get(s, "properties");
        if (!props) return infer__sg_prim(sg, INFER__SP_OBJECT); /* any object */
        return infer__sg_object(sg, s, props, path);
    }
    if (!strcmp(type, "array")) {
        const infer__jv *items = infer__jv_get(s, "items");
        long min = infer__sg_count(sg, s, "minItems", 0), max = infer__sg_count(sg, s, "maxItems", -1);
        const char *item;
        char sub[96];
        if (min == -2 || max == -2) return NULL;
        if (max >= 0 && max < min) {
            infer__jp_fail(sg->jp, s->at, "maxItems is below minItems");
            return NULL;
        }
        if (!items && min == 0 && max < 0) return infer__sg_prim(sg, INFER__SP_ARRAY); /* any array */
        if (items && items->type == INFER__J_ARR) {
            infer__jp_fail(sg->jp, items->at, "items as an array (a tuple) is not supported");
            return NULL;
        }
        slot = infer__sg_new_rule(sg, path, &name);
        snprintf(sub, sizeof sub, "%s-item", path);
        item = items ? infer__sg_schema(sg, items, sub) : infer__sg_prim(sg, INFER__SP_VALUE);
        if (!item) return NULL;
        infer__sg_prim(sg, INFER__SP_SPACE);
        infer__sb_puts(&body, "\"[\" space");
        if (max != 0) {
            infer__sb_puts(&body, min == 0 ? " (" : " ");
            infer__sb_puts(&body, item);
            if (max != 1) {
                infer__sb_puts(&body, " (\",\" space ");
                infer__sb_puts(&body, item);
                infer__sb_puts(&body, ")");
                infer__sb_repeat(&body, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
            }
            if (min == 0) infer__sb_puts(&body, ")?");
        }
        infer__sb_puts(&body, " \"]\" space");
        return infer__sg_finish_rule(sg, slot, name, &body);
    }
    infer__jp_fail(sg->jp, at, "unsupported type '%s'", type);
    return NULL;
}

static const char *infer__sg_schema(infer__sg *sg, const infer__jv *s, const char *path) {
    const infer__jv *v;
    const char *name;
    int slot, i;
    infer__sb body = {NULL, 0};
    if (s->type == INFER__J_BOOL) { /* true: anything; false: nothing */
        if (s->b) return infer__sg_prim(sg, INFER__SP_VALUE);
        infer__jp_fail(sg->jp, s->at, "the schema false allows no value");
        return NULL;
    }
    if (s->type != INFER__J_OBJ) {
        infer__jp_fail(sg->jp, s->at, "a schema must be an object");
        return NULL;
    }
    if ((v = infer__jv_get(s, "$ref")) != NULL) {
        infer__jp_fail(sg->jp, v->at, "$ref is not supported");
        return NULL;
    }
    if ((v = infer__jv_get(s, "allOf")) != NULL) {
        infer__jp_fail(sg->jp, v->at, "allOf is not supported");
        return NULL;
    }
    if ((v = infer__jv_get(s, "const")) != NULL || (v = infer__jv_get(s, "enum")) != NULL) {
        int one = infer__jv_get(s, "const") == v, n = one ? 1 : (int)stbds_arrlen(v->items);
        if (!one && (v->type != INFER__J_ARR || n == 0)) {
            infer__jp_fail(sg->jp, v->at, "enum must be an array of values, not empty");
            return NULL;
        }
        slot = infer__sg_new_rule(sg, path, &name);
        infer__sb_puts(&body, "(");
        for (i = 0; i < n; i++) {
            infer__sb text = {NULL, 0};
            infer__sb_json(&text, one ? v : &v->items[i]);
            if (i) infer__sb_puts(&body, " | ");
            infer__sb_literal(&body, text.p, (size_t)stbds_arrlen(text.p));
            body.nomem |= text.nomem;
            stbds_arrfree(text.p);
        }
        infer__sb_puts(&body, ") space");
        infer__sg_prim(sg, INFER__SP_SPACE);
        return infer__sg_finish_rule(sg, slot, name, &body);
    }
    if ((v = infer__jv_get(s, "anyOf")) != NULL || (v = infer__jv_get(s, "oneOf")) != NULL) {
        int n = (int)stbds_arrlen(v->items);
        if (v->type != INFER__J_ARR || n == 0) {
            infer__jp_fail(sg->jp, v->at, "anyOf/oneOf must be an array of schemas, not empty");
            return NULL;
        }
        slot = infer__sg_new_rule(sg, path, &name);
        for (i = 0; i < n; i++) {
            char sub[96];
            const char *alt;
            snprintf(sub, sizeof sub, "%s-%d", path, i);
            alt = infer__sg_schema(sg, &v->items[i], sub);
            if (!alt) {
                stbds_arrfree(body.p);
                return NULL;
            }
            if (i) infer__sb_puts(&body, " | ");
            infer__sb_puts(&body, alt);
        }
        return infer__sg_finish_rule(sg, slot, name, &body);
    }
    if ((v = infer__jv_get(s, "type")) != NULL) {
        int n = (int)stbds_arrlen(v->items);
        if (v->type == INFER__J_STR) return infer__sg_type(sg, s, v->s, v->at, path);
        if (v->type != INFER__J_ARR || n == 0) {
            infer__jp_fail(sg->jp, v->at, "type must be a name or an array of names");
            return NULL;
        }
        slot = infer__sg_new_rule(sg, path, &name);
        for (i = 0; i < n; i++) {
            char sub[96];
            const char *alt;
            if (v->items[i].type != INFER__J_STR) {
                infer__jp_fail(sg->jp, v->items[i].at, "type must be a name or an array of names");
                alt = NULL;
            } else {
                snprintf(sub, sizeof sub, "%s-%s", path, v->items[i].s);
                alt = infer__sg_type(sg, s, v->items[i].s, v->items[i].at, sub);
            }
            if (!alt) {
                stbds_arrfree(body.p);
                return NULL;
            }
            if (i) infer__sb_puts(&body, " | ");
            infer__sb_puts(&body, alt);
        }
        return infer__sg_finish_rule(sg, slot, name, &body);
    }
    if (infer__jv_get(s, "properties")) return infer__sg_type(sg, s, "object", s->at, path);
    if (infer__jv_get(s, "items")) return infer__sg_type(sg, s, "array", s->at, path);
    return infer__sg_prim(sg, INFER__SP_VALUE);
}

INFERDEF int infer_json_schema_to_grammar(const char *schema, char *buf, size_t size, infer_error *err) {
    infer__jp jp;
    infer__jv root;
    infer__sg sg;
    infer__sb out = {NULL, 0};
    const char *top = NULL;
    int i, len = -1;
    if (!schema) {
        infer__set_error(err, INFER_ERR_ARG, "JSON schema: no schema given");
        return -1;
    }
    memset(&jp, 0, sizeof jp);
    memset(&sg, 0, sizeof sg);
    jp.src = jp.p = schema;
    jp.err = err;
    sg.jp = &jp;
    infer__jp_value(&jp, &root);
    infer__jp_ws(&jp);
    if (!jp.failed && *jp.p) infer__jp_fail(&jp, jp.p, "unexpected text after the schema");
    if (!jp.failed) top = infer__sg_schema(&sg, &root, "root");
    if (top && strcmp(top, "root") != 0) { /* a shared rule at the top */
        infer__sb line = {NULL, 0};
        char *text;
        infer__sb_puts(&line, "root ::= ");
        infer__sb_puts(&line, top);
        if (line.nomem || !infer__arr_room(sg.rules, 1) || !(text = infer__strndup(line.p, (size_t)stbds_arrlen(line.p))))
            infer__jp_nomem(&jp);
        else
            stbds_arrins(sg.rules, 0, text);
        stbds_arrfree(line.p);
    }
    if (!jp.failed) {
        unsigned used = sg.used, prev = 0;
        int k;
        while (used != prev) { /* what the shared rules use in turn */
            prev = used;
            for (k = 0; k < INFER__SP_COUNT; k++)
                if (used & 1u << k) used |= infer__sp_uses[k];
        }
        for (i = 0; i < (int)stbds_arrlen(sg.rules); i++) {
            if (!sg.rules[i]) continue;
            infer__sb_puts(&out, sg.rules[i]);
            infer__sb_puts(&out, "\n");
        }
        for (k = 0; k < INFER__SP_COUNT; k++)
            if (used & 1u << k) {
                infer__sb_puts(&out, infer__sp_rule[k]);
                infer__sb_puts(&out, "\n");
            }
        len = (int)stbds_arrlen(out.p);
        if (out.nomem) {
            infer__jp_nomem(&jp);
            len = -1;
        } else if (buf && size) {
            size_t n = INFER__MIN((size_t)len, size - 1);
            if (n) memcpy(buf, out.p, n);
            buf[n] = 0;
        }
    }
    for (i = 0; i < (int)stbds_arrlen(sg.rules); i++) INFER_FREE(sg.rules[i]);
    stbds_arrfree(sg.rules);
    for (i = 0; i < (int)stbds_arrlen(sg.names); i++) INFER_FREE(sg.names[i]);
    stbds_arrfree(sg.names);
    stbds_arrfree(out.p);
    infer__jv_free(&root);
    return len;
}
