/* schema.c - JSON schemas compiled to GBNF grammars: the schema's JSON text
   parsed, then each schema written as rules (infer_json_schema_to_grammar),
   which grammar.c compiles like any other grammar. */
#include "internal.h"

/* ---- JSON (the schema's text) ------------------------------------------------ */

static void infer__jp_fail(infer__jp *j, const char *at, const char *fmt, ...) {
    va_list ap;
    if (j->failed) return;
    j->failed = 1;
    va_start(ap, fmt);
    infer__fail_at(j->err, j->what ? j->what : "JSON schema", j->src, at, fmt, ap);
    va_end(ap);
}

static void infer__jp_nomem(infer__jp *j) {
    if (j->failed) return;
    j->failed = 1;
    infer__set_error(j->err, INFER_ERR_NOMEM, "%s: out of memory", j->what ? j->what : "JSON schema");
}

static void infer__jv_free(infer__jv *v) {
    int i;
    INFER_FREE(v->s);
    for (i = 0; i < (int)stbds_arrlen(v->items); i++) infer__jv_free(&v->items[i]);
    stbds_arrfree(v->items);
    for (i = 0; i < (int)stbds_arrlen(v->keys); i++) INFER_FREE(v->keys[i]);
    stbds_arrfree(v->keys);
    stbds_arrfree(v->key_lens);
}

static void infer__jp_ws(infer__jp *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

/* (4 bytes of room made by the caller) */
static void infer__j_put_utf8(char **buf, uint32_t c) {
    char enc[4];
    size_t n = infer__utf8_encode(c, enc), i;
    for (i = 0; i < n; i++) stbds_arrput(*buf, enc[i]);
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
        int len;
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
        if ((unsigned char)*q < 0x80 && *q != '\\') { /* a run of ASCII, copied at once */
            const char *e = q;
            char *at;
            while ((unsigned char)*e >= 0x20 && (unsigned char)*e < 0x80 && *e != '"' && *e != '\\') e++;
            if (!(at = infer__arr_addn(buf, e - q))) {
                infer__jp_nomem(j);
                break;
            }
            memcpy(at, q, (size_t)(e - q));
            j->p = e;
            continue;
        }
        if (*q != '\\') {
            if (!(len = infer__utf8_next(j->p, 4, &c))) {
                if (!j->raw_bytes) {
                    infer__jp_fail(j, q, "invalid UTF-8 in a string");
                    break;
                }
                len = 1; /* the byte as it is */
            }
            j->p += len;
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
    if (++j->depth > INFER__JSON_MAX_DEPTH) {
        infer__jp_fail(j, at, "JSON nested deeper than %d levels (the nesting limit)", INFER__JSON_MAX_DEPTH);
        j->depth--;
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
                    if (!infer__arr_room(v->key_lens, 1) || !infer__arr_push(v->keys, key)) {
                        INFER_FREE(key);
                        infer__jp_nomem(j);
                        break;
                    }
                    stbds_arrput(v->key_lens, kn);
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

/* A schema keyword's value (schemas hold few keys: a scan is enough). */
static const infer__jv *infer__jv_get(const infer__jv *o, const char *key) {
    size_t i, n = strlen(key);
    if (o->type != INFER__J_OBJ) return NULL;
    for (i = 0; i < stbds_arrlenu(o->keys); i++)
        if (o->key_lens[i] == n && !memcmp(o->keys[i], key, n)) return &o->items[i];
    return NULL;
}

/* ---- JSON schema -> GBNF ------------------------------------------------------ */

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
    size_t i, run;
    infer__sb_putc(b, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        for (run = i; run < n && (unsigned char)s[run] >= 0x20 && s[run] != '"' && s[run] != '\\'; run++) {}
        if (run > i) { /* bytes written as they are, at once (a chat's messages are mostly these) */
            infer__sb_put(b, s + i, run - i);
            i = run - 1;
            continue;
        }
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
                infer__sb_json_string(b, v->keys[i], v->key_lens[i]);
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
/* (The INFER__SP_ numbering is in internal.h.) */
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

/* The produced grammar's text is refused past this size: conversion is
   linear in the schema, but a schema may be large. */
#define INFER__SCHEMA_MAX_GRAMMAR (8 << 20)
/* grammar.c writes x{m,n} out as copies: the repeated items of the whole
   grammar, multiplied out, are bounded too (a short schema of many
   "maxLength": 4096 would otherwise cost gigabytes there). */
#define INFER__SCHEMA_MAX_EXPANDED (1 << 20)
/* Optional properties make chains of rules as long as their number, and
   after "{" each is a stack the matcher keeps: a stated bound per object,
   well inside the matcher's own limits (grammar.c). */
#define INFER__SCHEMA_MAX_OPTIONAL 4096

/* a rule name taken, and the number to try next for names made from it */
typedef struct infer__sg_name {
    const char *name;
    int next;
} infer__sg_name;

typedef struct infer__sg {
    infer__jp *jp;          /* for errors: positions in the schema text */
    char **rules;           /* stbds: each rule's line, in order (the root first) */
    char **names;           /* stbds: the names of the schema's own rules (owned) */
    infer__sg_name *taken;  /* open-addressed hash table of every name in use */
    size_t taken_cap, taken_n;
    size_t size;            /* bytes of the rules written so far */
    double expanded;        /* items repeated so far, multiplied out */
    unsigned used;          /* shared rules used, as bits */
} infer__sg;

static const char *infer__sg_prim(infer__sg *sg, int which) {
    sg->used |= 1u << which;
    return infer__sp_name[which];
}

static size_t infer__sg_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The slot of name in the table: where it is, or the empty one it would take. */
static size_t infer__sg_find(const infer__sg *sg, const char *name) {
    size_t i = infer__sg_hash(name) & (sg->taken_cap - 1);
    while (sg->taken[i].name && strcmp(sg->taken[i].name, name)) i = (i + 1) & (sg->taken_cap - 1);
    return i;
}

/* Marks name as taken (it must not be); 0 when out of memory. */
static int infer__sg_take(infer__sg *sg, const char *name) {
    if ((sg->taken_n + 1) * 2 > sg->taken_cap) { /* grow, keeping it at most half full */
        infer__sg_name *old = sg->taken;
        size_t i, cap = sg->taken_cap ? 2 * sg->taken_cap : 64, old_cap = sg->taken_cap;
        if (!(sg->taken = (infer__sg_name *)infer__calloc(cap, sizeof *sg->taken))) {
            sg->taken = old;
            return 0;
        }
        sg->taken_cap = cap;
        for (i = 0; i < old_cap; i++)
            if (old[i].name) sg->taken[infer__sg_find(sg, old[i].name)] = old[i];
        INFER_FREE(old);
    }
    sg->taken[infer__sg_find(sg, name)].name = name;
    sg->taken[infer__sg_find(sg, name)].next = 2;
    sg->taken_n++;
    return 1;
}

/* A new rule's slot (its line is filled in later, so rules come out in the
   order the schema reads) and its name: path with characters GBNF names
   cannot hold made '-', cut to 48 characters, and "-k" added if taken. The
   table remembers the next k of each name, so that many paths alike (keys
   sharing a long prefix) cost no rescans. */
static int infer__sg_new_rule(infer__sg *sg, const char *path, const char **name) {
    char base[64], buf[80], *copy;
    size_t i, n = strlen(path), slot;
    int k;
    if (sg->jp->failed) return -1;
    if (n > 48) n = 48;
    for (i = 0; i < n; i++) base[i] = infer__gp_word(path[i]) ? path[i] : '-';
    base[n] = 0;
    memcpy(buf, base, n + 1);
    if (sg->taken_cap && sg->taken[slot = infer__sg_find(sg, base)].name) {
        for (k = sg->taken[slot].next;; k++) {
            snprintf(buf, sizeof buf, "%s-%d", base, k);
            if (!sg->taken[infer__sg_find(sg, buf)].name) break;
        }
        sg->taken[slot].next = k + 1;
    }
    if (!infer__arr_room(sg->names, 1) || !infer__arr_room(sg->rules, 1) || !(copy = infer__strndup(buf, strlen(buf)))) {
        infer__jp_nomem(sg->jp);
        return -1;
    }
    stbds_arrput(sg->names, copy);
    if (!infer__sg_take(sg, copy)) {
        infer__jp_nomem(sg->jp);
        return -1;
    }
    *name = copy;
    stbds_arrput(sg->rules, NULL);
    return (int)stbds_arrlen(sg->rules) - 1;
}

static const char *infer__sg_finish_rule(infer__sg *sg, int slot, const char *name, infer__sb *body) {
    infer__sb line = {NULL, 0};
    if (sg->jp->failed || slot < 0) {
        stbds_arrfree(body->p);
        return NULL;
    }
    infer__sb_puts(&line, name);
    infer__sb_puts(&line, " ::= ");
    infer__sb_put(&line, body->p, (size_t)stbds_arrlen(body->p));
    sg->size += stbds_arrlenu(line.p) + 1;
    if (sg->size > INFER__SCHEMA_MAX_GRAMMAR)
        infer__jp_fail(sg->jp, NULL, "the grammar would be over %d bytes (the schema grammar size limit)",
                       INFER__SCHEMA_MAX_GRAMMAR);
    else if (body->nomem || line.nomem || !(sg->rules[slot] = infer__strndup(line.p, (size_t)stbds_arrlen(line.p))))
        infer__jp_nomem(sg->jp);
    stbds_arrfree(line.p);
    stbds_arrfree(body->p);
    return sg->jp->failed ? NULL : name;
}

static const char *infer__sg_schema(infer__sg *sg, const infer__jv *s, const char *path);

/* Counts items a repetition will copy; 0 (an error) past the budget. */
static int infer__sg_expand(infer__sg *sg, const infer__jv *at, double items) {
    sg->expanded += items;
    if (sg->expanded <= INFER__SCHEMA_MAX_EXPANDED) return 1;
    infer__jp_fail(sg->jp, at->at, "the grammar would repeat over %d items in all (the schema repetition limit)",
                   INFER__SCHEMA_MAX_EXPANDED);
    return 0;
}

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

/* ---- integers in a range -------------------------------------------------------- */

/* Bounds are kept below 10^18 in magnitude (exact in a long long); a side
   left open allows as many digits as the plain integer rule (16), or as
   the other bound has. */
#define INFER__SG_INT_LIMIT 1000000000000000000LL

static int infer__sg_ndigits(long long v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static long long infer__sg_pow10(int n) {
    long long v = 1;
    while (n-- > 0) v *= 10;
    return v;
}

/* The decimal strings from x to y, both len digits long (x <= y), as a
   GBNF sequence: a shared first digit is written and the rest recursed
   into; else the first digit of x followed by x's rest up to 9...9, the
   digits between followed by anything, and the first digit of y followed
   by 0...0 up to y's rest (the ends merged into the middle when their rest
   is all 0s or all 9s). Only the two edges recurse, each once per digit. */
static void infer__sb_digit_range(infer__sb *b, const char *x, const char *y, int len) {
    static const char nines[] = "9999999999999999999999", zeros[] = "0000000000000000000000";
    int low_full, high_full, lo_d, hi_d, alts = 0;
    if (len <= 0) return;
    if (x[0] == y[0]) {
        infer__sb_putc(b, '"');
        infer__sb_putc(b, x[0]);
        infer__sb_putc(b, '"');
        if (len > 1) infer__sb_putc(b, ' ');
        infer__sb_digit_range(b, x + 1, y + 1, len - 1);
        return;
    }
    low_full = !strncmp(x + 1, zeros, (size_t)len - 1);
    high_full = !strncmp(y + 1, nines, (size_t)len - 1);
    lo_d = x[0] - '0' + !low_full;
    hi_d = y[0] - '0' - !high_full;
    infer__sb_putc(b, '(');
    if (!low_full) {
        infer__sb_putc(b, '"');
        infer__sb_putc(b, x[0]);
        infer__sb_puts(b, "\" ");
        infer__sb_digit_range(b, x + 1, nines, len - 1);
        alts++;
    }
    if (lo_d <= hi_d) {
        char t[16];
        if (alts++) infer__sb_puts(b, " | ");
        if (lo_d == hi_d) snprintf(t, sizeof t, "\"%d\"", lo_d);
        else snprintf(t, sizeof t, "[%d-%d]", lo_d, hi_d);
        infer__sb_puts(b, t);
        if (len > 1) {
            infer__sb_puts(b, " [0-9]");
            if (len > 2) infer__sb_repeat(b, len - 1, len - 1);
        }
    }
    if (!high_full) {
        if (alts++) infer__sb_puts(b, " | ");
        infer__sb_putc(b, '"');
        infer__sb_putc(b, y[0]);
        infer__sb_puts(b, "\" ");
        infer__sb_digit_range(b, zeros, y + 1, len - 1);
    }
    infer__sb_putc(b, ')');
}

/* The numbers from a to b (0 <= a <= b), without leading zeros, as GBNF
   alternatives: one range of each length of digits. */
static void infer__sb_natural_range(infer__sb *b, long long a, long long bmax) {
    int d, da = infer__sg_ndigits(a), db = infer__sg_ndigits(bmax);
    for (d = da; d <= db; d++) {
        char x[24], y[24];
        long long lo = d == da ? a : infer__sg_pow10(d - 1), hi = d == db ? bmax : infer__sg_pow10(d) - 1;
        snprintf(x, sizeof x, "%lld", lo);
        snprintf(y, sizeof y, "%lld", hi);
        if (d > da) infer__sb_puts(b, " | ");
        infer__sb_digit_range(b, x, y, d);
    }
}

/* A bound keyword of an integer: *lo raised (or *hi lowered) to it when
   present. minimum/maximum take an exclusive flag (draft 4's boolean form);
   exclusiveMinimum/Maximum as numbers are exclusive. 0 after an error. */
static int infer__sg_int_bound(infer__sg *sg, const infer__jv *v, const char *key, int is_max, int exclusive,
                               long long *lo, long long *hi) {
    const char *q, *digits;
    long long b;
    if (!v) return 1;
    if (v->type != INFER__J_NUM) {
        infer__jp_fail(sg->jp, v->at, "%s must be a number", key);
        return 0;
    }
    digits = v->s + (*v->s == '-');
    for (q = digits; *q >= '0' && *q <= '9'; q++) {}
    if (!*q && q - digits <= 18) { /* a plain integer: exact */
        b = strtoll(v->s, NULL, 10);
        if (exclusive) b += is_max ? -1 : 1;
    } else {
        double d = strtod(v->s, NULL);
        if (!(fabs(d) < (double)INFER__SG_INT_LIMIT)) {
            infer__jp_fail(sg->jp, v->at, "%s beyond 10^18 in magnitude is not supported", key);
            return 0;
        }
        if (is_max) b = (long long)(exclusive ? ceil(d) - 1 : floor(d));
        else b = (long long)(exclusive ? floor(d) + 1 : ceil(d));
    }
    if (b <= -INFER__SG_INT_LIMIT || b >= INFER__SG_INT_LIMIT) {
        infer__jp_fail(sg->jp, v->at, "%s beyond 10^18 in magnitude is not supported", key);
        return 0;
    }
    if (is_max) *hi = INFER__MIN(*hi, b);
    else *lo = INFER__MAX(*lo, b);
    return 1;
}

/* type "integer": the shared rule, or with minimum/maximum and their
   exclusive forms an exact rule over the digits ("-0" is not written). */
static const char *infer__sg_integer(infer__sg *sg, const infer__jv *s, const char *path) {
    const infer__jv *min = infer__jv_get(s, "minimum"), *max = infer__jv_get(s, "maximum");
    const infer__jv *xmin = infer__jv_get(s, "exclusiveMinimum"), *xmax = infer__jv_get(s, "exclusiveMaximum");
    long long lo = -INFER__SG_INT_LIMIT, hi = INFER__SG_INT_LIMIT; /* open */
    int xmin_flag = xmin && xmin->type == INFER__J_BOOL, xmax_flag = xmax && xmax->type == INFER__J_BOOL;
    const char *name;
    int slot, alts = 0;
    infer__sb body = {NULL, 0};
    if (!infer__sg_int_bound(sg, min, "minimum", 0, xmin_flag && xmin->b, &lo, &hi) ||
        !infer__sg_int_bound(sg, max, "maximum", 1, xmax_flag && xmax->b, &lo, &hi) ||
        !infer__sg_int_bound(sg, xmin_flag ? NULL : xmin, "exclusiveMinimum", 0, 1, &lo, &hi) ||
        !infer__sg_int_bound(sg, xmax_flag ? NULL : xmax, "exclusiveMaximum", 1, 1, &lo, &hi))
        return NULL;
    if (lo == -INFER__SG_INT_LIMIT && hi == INFER__SG_INT_LIMIT) return infer__sg_prim(sg, INFER__SP_INTEGER);
    if (lo == -INFER__SG_INT_LIMIT) /* open below: 16 digits, or as many as hi has */
        lo = -(infer__sg_pow10(INFER__MAX(16, infer__sg_ndigits(hi < 0 ? -hi : hi))) - 1);
    if (hi == INFER__SG_INT_LIMIT) hi = infer__sg_pow10(INFER__MAX(16, infer__sg_ndigits(lo < 0 ? -lo : lo))) - 1;
    if (lo > hi) {
        infer__jp_fail(sg->jp, s->at, "minimum and maximum leave no integer");
        return NULL;
    }
    slot = infer__sg_new_rule(sg, path, &name);
    infer__sb_puts(&body, "(");
    if (lo < 0) {
        infer__sb_puts(&body, "\"-\" (");
        infer__sb_natural_range(&body, hi < 0 ? -hi : 1, -lo);
        infer__sb_puts(&body, ")");
        alts++;
    }
    if (hi >= 0) {
        if (alts) infer__sb_puts(&body, " | ");
        infer__sb_natural_range(&body, lo > 0 ? lo : 0, hi);
    }
    infer__sb_puts(&body, ") space");
    infer__sg_prim(sg, INFER__SP_SPACE);
    return infer__sg_finish_rule(sg, slot, name, &body);
}

/* ---- patterns: regular expressions as GBNF ------------------------------------- */

/* The pattern subset a grammar can express: literals, escapes (\d \w \s
   \D \W \S, \t \n \r \f \v \0, \xHH, \uHHHH, escaped punctuation), '.',
   classes with ranges and negation, groups ( ) and (?: ), alternation,
   quantifiers * + ? {m} {m,} {m,n}, and ^ / $ at the ends of a top-level
   alternative. The grammar writes JSON text, so '"', '\' and control
   characters are written JSON-escaped where a pattern names them; what a
   complement stands for ('.', [^...], \D \W \S) leaves them out. */
#define INFER__RX_MAX_DEPTH 32         /* nested groups */
#define INFER__RX_MAX_WEIGHT 100000.0  /* characters matched, repetitions multiplied out */

typedef struct infer__rx {
    infer__sg *sg;
    const infer__jv *v; /* the pattern: errors point at it */
    const char *p, *end;
    int depth;
} infer__rx;

static void infer__rx_fail(infer__rx *rx, const char *what, const char *at) {
    infer__jp_fail(rx->sg->jp, rx->v->at, "pattern: %s is not supported (at offset %d of the pattern)", what,
                   (int)(at - rx->v->s));
}

typedef struct infer__rx_range {
    uint32_t lo, hi;
} infer__rx_range;

typedef struct infer__rx_set {
    infer__rx_range *r; /* stbds */
    int nomem;
} infer__rx_set;

static void infer__rx_add(infer__rx_set *set, uint32_t lo, uint32_t hi) {
    infer__rx_range g;
    g.lo = lo;
    g.hi = hi;
    if (!infer__arr_push(set->r, g)) set->nomem = 1;
}

static int infer__rx_range_cmp(const void *a, const void *b) {
    const infer__rx_range *x = (const infer__rx_range *)a, *y = (const infer__rx_range *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* sorted, overlaps and neighbours merged */
static void infer__rx_normalize(infer__rx_set *set) {
    size_t i, n = stbds_arrlenu(set->r), out = 0;
    if (!n) return;
    qsort(set->r, n, sizeof *set->r, infer__rx_range_cmp);
    for (i = 1; i < n; i++) {
        if (set->r[i].lo <= set->r[out].hi + 1) set->r[out].hi = INFER__MAX(set->r[out].hi, set->r[i].hi);
        else set->r[++out] = set->r[i];
    }
    stbds_arrsetlen(set->r, out + 1);
}

/* What a complement may produce: none of '"', '\', control characters,
   surrogates (they are left out here, then complemented away). */
static void infer__rx_add_unwritable(infer__rx_set *set) {
    infer__rx_add(set, 0, 0x1F);
    infer__rx_add(set, '"', '"');
    infer__rx_add(set, '\\', '\\');
    infer__rx_add(set, 0xD800, 0xDFFF);
}

/* set := the code points not in set (nor unwritable) */
static void infer__rx_complement(infer__rx_set *set) {
    infer__rx_set out = {NULL, 0};
    uint32_t next = 0;
    size_t i;
    infer__rx_add_unwritable(set);
    infer__rx_normalize(set);
    for (i = 0; i < stbds_arrlenu(set->r); i++) {
        if (set->r[i].lo > next) infer__rx_add(&out, next, set->r[i].lo - 1);
        next = set->r[i].hi + 1;
    }
    if (next <= 0x10FFFF) infer__rx_add(&out, next, 0x10FFFF);
    stbds_arrfree(set->r);
    set->r = out.r;
    set->nomem |= out.nomem;
}

/* \d \w \s and their complements into set; 0 when c names none */
static int infer__rx_shorthand(infer__rx_set *set, char c) {
    infer__rx_set one = {NULL, 0};
    size_t i;
    switch (c == 'D' || c == 'W' || c == 'S' ? c + ('a' - 'A') : c) {
    case 'd': infer__rx_add(&one, '0', '9'); break;
    case 'w':
        infer__rx_add(&one, '0', '9');
        infer__rx_add(&one, 'A', 'Z');
        infer__rx_add(&one, 'a', 'z');
        infer__rx_add(&one, '_', '_');
        break;
    case 's': /* ASCII white space and the common Unicode ones */
        infer__rx_add(&one, '\t', '\r');
        infer__rx_add(&one, ' ', ' ');
        infer__rx_add(&one, 0xA0, 0xA0);
        infer__rx_add(&one, 0x2028, 0x2029);
        infer__rx_add(&one, 0xFEFF, 0xFEFF);
        break;
    default: return 0;
    }
    if (c == 'D' || c == 'W' || c == 'S') infer__rx_complement(&one);
    for (i = 0; i < stbds_arrlenu(one.r); i++) infer__rx_add(set, one.r[i].lo, one.r[i].hi);
    set->nomem |= one.nomem;
    stbds_arrfree(one.r);
    return 1;
}

/* A code point as JSON text writes it inside a string, as a GBNF literal. */
static void infer__rx_put_char(infer__sb *b, uint32_t c) {
    char t[8];
    infer__sb text = {NULL, 0};
    if (c < 0x20 || c == '"' || c == '\\') {
        infer__sb_json_string(&text, t, (size_t)(t[0] = (char)c, 1));
        infer__sb_literal(b, text.p + 1, stbds_arrlenu(text.p) - 2); /* its quotes left out */
        b->nomem |= text.nomem;
        stbds_arrfree(text.p);
        return;
    }
    {
        char *u = NULL;
        if (!infer__arr_room(u, 4)) {
            b->nomem = 1;
            return;
        }
        infer__j_put_utf8(&u, c);
        infer__sb_literal(b, u, stbds_arrlenu(u));
        stbds_arrfree(u);
    }
}

static void infer__rx_put_class_char(infer__sb *b, uint32_t c) {
    char t[16];
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) snprintf(t, sizeof t, "%c", (char)c);
    else if (c < 0x100) snprintf(t, sizeof t, "\\x%02X", (unsigned)c);
    else if (c < 0x10000) snprintf(t, sizeof t, "\\u%04X", (unsigned)c);
    else snprintf(t, sizeof t, "\\U%08X", (unsigned)c);
    infer__sb_puts(b, t);
}

/* A set as GBNF: a class of what JSON writes as itself, and an
   alternative for each of '"', '\' and the control characters in it,
   written escaped. 0 when it holds nothing. */
static int infer__rx_put_set(infer__sb *b, infer__rx_set *set) {
    infer__sb plain = {NULL, 0};
    int alts = 0, any_plain = 0;
    size_t i;
    uint32_t c;
    infer__rx_normalize(set);
    infer__sb_putc(&plain, '[');
    for (i = 0; i < stbds_arrlenu(set->r); i++) {
        infer__rx_range r = set->r[i];
        /* the ranges, with the escaped characters and surrogates cut out */
        uint32_t cuts[4][2] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
        uint32_t lo = r.lo;
        int k;
        for (k = 0; k <= 4 && lo <= r.hi; k++) {
            uint32_t stop = k < 4 ? cuts[k][0] : 0x110000;
            if (k < 4 && cuts[k][1] < lo) continue;
            if (lo < stop) {
                uint32_t hi = INFER__MIN(r.hi, stop - 1);
                infer__rx_put_class_char(&plain, lo);
                if (hi > lo) {
                    infer__sb_putc(&plain, '-');
                    infer__rx_put_class_char(&plain, hi);
                }
                any_plain = 1;
            }
            if (k < 4) lo = INFER__MAX(lo, cuts[k][1] + 1);
        }
    }
    infer__sb_putc(&plain, ']');
    infer__sb_putc(b, '(');
    if (any_plain) {
        infer__sb_put(b, plain.p, stbds_arrlenu(plain.p));
        alts++;
    }
    b->nomem |= plain.nomem | set->nomem;
    stbds_arrfree(plain.p);
    for (i = 0; i < stbds_arrlenu(set->r); i++) /* the characters written escaped */
        for (c = set->r[i].lo; c <= INFER__MIN(set->r[i].hi, (uint32_t)'\\'); c++)
            if (c < 0x20 || c == '"' || c == '\\') {
                if (alts++) infer__sb_puts(b, " | ");
                infer__rx_put_char(b, c);
            }
    infer__sb_putc(b, ')');
    return alts > 0;
}

/* A character or escape of the pattern at rx->p, into *c, or (a
   shorthand) into set with *c = UINT32_MAX. in_class: inside [...]. */
static int infer__rx_char(infer__rx *rx, int in_class, uint32_t *c, infer__rx_set *set) {
    const char *at = rx->p;
    char e;
    int len;
    if (*rx->p != '\\') {
        if ((len = infer__utf8_next(rx->p, 4, c))) rx->p += len;
        else { /* the pattern was decoded: only a NUL stops it */
            *c = 0;
            rx->p++;
        }
        return 1;
    }
    if (rx->p + 1 >= rx->end) {
        infer__rx_fail(rx, "a '\\' at the end", at);
        return 0;
    }
    e = rx->p[1];
    rx->p += 2;
    if (infer__rx_shorthand(set, e)) {
        *c = UINT32_MAX;
        return 1;
    }
    switch (e) {
    case 't': *c = '\t'; return 1;
    case 'n': *c = '\n'; return 1;
    case 'r': *c = '\r'; return 1;
    case 'f': *c = '\f'; return 1;
    case 'v': *c = '\v'; return 1;
    case '0':
        if (rx->p < rx->end && *rx->p >= '0' && *rx->p <= '9') break;
        *c = 0;
        return 1;
    case 'b':
        if (in_class) {
            *c = '\b';
            return 1;
        }
        infer__rx_fail(rx, "a word boundary '\\b'", at);
        return 0;
    case 'x':
    case 'u': {
        int i, n = e == 'x' ? 2 : 4;
        *c = 0;
        for (i = 0; i < n; i++) {
            int h = rx->p + i < rx->end ? infer__g_hex(rx->p[i]) : -1;
            if (h < 0) {
                infer__rx_fail(rx, e == 'x' ? "a '\\x' without 2 hex digits" : "a '\\u' without 4 hex digits", at);
                return 0;
            }
            *c = *c << 4 | (uint32_t)h;
        }
        rx->p += n;
        return 1;
    }
    default:
        if (!((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) && (unsigned char)e < 0x80) {
            *c = (uint32_t)(unsigned char)e; /* escaped punctuation: itself */
            return 1;
        }
    }
    if (e >= '1' && e <= '9') infer__rx_fail(rx, "a backreference", at);
    else if (e == 'k') infer__rx_fail(rx, "a named backreference '\\k'", at);
    else if (e == 'p' || e == 'P') infer__rx_fail(rx, "a Unicode property escape '\\p'", at);
    else if (e == 'B') infer__rx_fail(rx, "a non-boundary '\\B'", at);
    else if (e == 'c') infer__rx_fail(rx, "a control escape '\\c'", at);
    else infer__rx_fail(rx, "this escape", at);
    return 0;
}

/* [...] at rx->p, into set */
static int infer__rx_class(infer__rx *rx, infer__rx_set *set) {
    const char *at = rx->p++;
    int neg = 0;
    if (rx->p < rx->end && *rx->p == '^') neg = 1, rx->p++;
    while (rx->p < rx->end && *rx->p != ']') {
        uint32_t lo, hi;
        const char *item = rx->p;
        if (!infer__rx_char(rx, 1, &lo, set)) return 0;
        if (rx->p + 1 < rx->end && rx->p[0] == '-' && rx->p[1] != ']') {
            rx->p++;
            if (!infer__rx_char(rx, 1, &hi, set)) return 0;
            if (lo == UINT32_MAX || hi == UINT32_MAX || hi < lo) {
                infer__rx_fail(rx, "a bad range in a class", item);
                return 0;
            }
            infer__rx_add(set, lo, hi);
        } else if (lo != UINT32_MAX) infer__rx_add(set, lo, lo);
    }
    if (rx->p >= rx->end) {
        infer__rx_fail(rx, "an unterminated '['", at);
        return 0;
    }
    rx->p++;
    if (neg) infer__rx_complement(set);
    return 1;
}

static int infer__rx_alternates(infer__rx *rx, infer__sb *b, int *nullable, double *weight);

/* An item (a character, set or group) at rx->p as GBNF into b. */
static int infer__rx_atom(infer__rx *rx, infer__sb *b, int *nullable, double *weight) {
    const char *at = rx->p;
    infer__rx_set set = {NULL, 0};
    uint32_t c = UINT32_MAX;
    int ok = 1;
    *nullable = 0;
    *weight = 1;
    if (*at == '(') {
        rx->p++;
        if (rx->p < rx->end && *rx->p == '?') {
            if (rx->p + 1 < rx->end && rx->p[1] == ':') rx->p += 2;
            else {
                const char *what = "a '(?' group";
                if (rx->p[1] == '=' || rx->p[1] == '!') what = "a lookahead";
                else if (rx->p[1] == '<' && (rx->p[2] == '=' || rx->p[2] == '!')) what = "a lookbehind";
                else if (rx->p[1] == '<') what = "a named group";
                infer__rx_fail(rx, what, at);
                return 0;
            }
        }
        if (++rx->depth > INFER__RX_MAX_DEPTH) {
            infer__rx_fail(rx, "groups nested over 32 deep", at);
            return 0;
        }
        infer__sb_putc(b, '(');
        if (!infer__rx_alternates(rx, b, nullable, weight)) return 0;
        rx->depth--;
        if (rx->p >= rx->end || *rx->p != ')') {
            infer__rx_fail(rx, "an unclosed '('", at);
            return 0;
        }
        rx->p++;
        infer__sb_putc(b, ')');
        return 1;
    }
    if (*at == '[') ok = infer__rx_class(rx, &set);
    else if (*at == '.') {
        rx->p++;
        infer__rx_add(&set, '\n', '\n');
        infer__rx_add(&set, '\r', '\r');
        infer__rx_add(&set, 0x2028, 0x2029);
        infer__rx_complement(&set);
    } else if (*at == '*' || *at == '+' || *at == '?' || *at == '{') {
        infer__rx_fail(rx, "a quantifier with nothing to repeat", at);
        ok = 0;
    } else if (*at == ')') {
        infer__rx_fail(rx, "an unmatched ')'", at);
        ok = 0;
    } else if (*at == '^' || *at == '$') {
        infer__rx_fail(rx, "an anchor '^' or '$' inside the pattern (only at the ends of its alternatives)", at);
        ok = 0;
    } else ok = infer__rx_char(rx, 0, &c, &set);
    if (ok && c != UINT32_MAX) infer__rx_put_char(b, c);
    else if (ok && !infer__rx_put_set(b, &set)) {
        infer__rx_fail(rx, "a class that matches no character JSON can write", at);
        ok = 0;
    }
    stbds_arrfree(set.r);
    return ok;
}

/* A quantifier at rx->p, if any: 1 and its bounds (max -1: none). */
static int infer__rx_quantifier(infer__rx *rx, long *min, long *max) {
    const char *q = rx->p;
    if (q >= rx->end) return 0;
    if (*q == '*' || *q == '+' || *q == '?') {
        *min = *q == '+';
        *max = *q == '?' ? 1 : -1;
        rx->p++;
        return 1;
    }
    if (*q != '{') return 0;
    for (*min = 0, q++; q < rx->end && *q >= '0' && *q <= '9'; q++) *min = INFER__MIN(*min * 10 + (*q - '0'), 1L << 30);
    if (q == rx->p + 1) return -1;
    *max = *min;
    if (q < rx->end && *q == ',') {
        const char *d = ++q;
        for (*max = 0; q < rx->end && *q >= '0' && *q <= '9'; q++) *max = INFER__MIN(*max * 10 + (*q - '0'), 1L << 30);
        if (q == d) *max = -1;
    }
    if (q >= rx->end || *q != '}') return -1;
    rx->p = q + 1;
    return 1;
}

/* Items up to '|', ')' or the end. top: a top-level alternative, whose
   ends may hold ^ and $ (else any characters may come before or after). */
static int infer__rx_sequence(infer__rx *rx, infer__sb *b, int *nullable, double *weight, int top) {
    int items = 0, start_anchor = 0, end_anchor = 0;
    *nullable = 1;
    *weight = 0;
    if (top && rx->p < rx->end && *rx->p == '^') start_anchor = 1, rx->p++;
    if (top && !start_anchor) {
        infer__sb_puts(b, "char* ");
        infer__sg_prim(rx->sg, INFER__SP_CHAR);
    }
    while (rx->p < rx->end && *rx->p != '|' && *rx->p != ')') {
        infer__sb item = {NULL, 0};
        const char *at = rx->p;
        long min, max;
        int item_null, q;
        double item_weight;
        if (top && *rx->p == '$' && (rx->p + 1 == rx->end || rx->p[1] == '|')) {
            rx->p++;
            end_anchor = 1;
            break;
        }
        if (!infer__rx_atom(rx, &item, &item_null, &item_weight)) {
            stbds_arrfree(item.p);
            return 0;
        }
        q = infer__rx_quantifier(rx, &min, &max);
        if (q < 0) {
            infer__rx_fail(rx, "a '{' that is not a quantifier {m,n}", rx->p);
            stbds_arrfree(item.p);
            return 0;
        }
        if (q > 0 && rx->p < rx->end && *rx->p == '?') {
            infer__rx_fail(rx, "a lazy quantifier", at);
            stbds_arrfree(item.p);
            return 0;
        }
        if (q > 0 && (min > INFER__G_MAX_REPEAT || max > INFER__G_MAX_REPEAT || (max >= 0 && max < min))) {
            infer__rx_fail(rx, "a repetition count over 4096 (or below its minimum)", at);
            stbds_arrfree(item.p);
            return 0;
        }
        if (q > 0 && item_null && max < 0) {
            infer__rx_fail(rx, "an unbounded repetition of what can match nothing", at);
            stbds_arrfree(item.p);
            return 0;
        }
        if (items++) infer__sb_putc(b, ' ');
        if (q > 0) {
            infer__sb_putc(b, '(');
            infer__sb_put(b, item.p, stbds_arrlenu(item.p));
            infer__sb_putc(b, ')');
            infer__sb_repeat(b, min, max);
            item_weight *= (double)(max < 0 ? min + 1 : INFER__MAX(max, 1));
            item_null |= min == 0;
        } else infer__sb_put(b, item.p, stbds_arrlenu(item.p));
        b->nomem |= item.nomem;
        stbds_arrfree(item.p);
        *nullable &= item_null;
        *weight += item_weight;
        if (*weight > INFER__RX_MAX_WEIGHT) {
            infer__rx_fail(rx, "a pattern this large once its repetitions are multiplied out (over 100000 items)", at);
            return 0;
        }
    }
    if (!items) infer__sb_puts(b, "\"\"");
    if (top && !end_anchor) infer__sb_puts(b, " char*");
    return 1;
}

static int infer__rx_alternates(infer__rx *rx, infer__sb *b, int *nullable, double *weight) {
    int top = rx->depth == 0, n, first = 1;
    double w;
    *nullable = 0;
    *weight = 0;
    for (;;) {
        if (!first) {
            rx->p++; /* the '|' */
            infer__sb_puts(b, " | ");
        }
        first = 0;
        if (!infer__rx_sequence(rx, b, &n, &w, top)) return 0;
        *nullable |= n;
        *weight += w;
        if (rx->p >= rx->end || *rx->p != '|') break;
    }
    if (top && rx->p < rx->end) {
        infer__rx_fail(rx, "an unmatched ')'", rx->p);
        return 0;
    }
    return 1;
}

/* type "string" with a pattern: a rule for the JSON string. */
static const char *infer__sg_pattern(infer__sg *sg, const infer__jv *s, const infer__jv *v, const char *path) {
    infer__rx rx;
    infer__sb body = {NULL, 0};
    const char *name;
    int slot, nullable;
    double weight;
    if (v->type != INFER__J_STR) {
        infer__jp_fail(sg->jp, v->at, "pattern must be a string");
        return NULL;
    }
    if (infer__jv_get(s, "minLength") || infer__jv_get(s, "maxLength")) {
        infer__jp_fail(sg->jp, v->at, "pattern together with minLength/maxLength is not supported");
        return NULL;
    }
    memset(&rx, 0, sizeof rx);
    rx.sg = sg;
    rx.v = v;
    rx.p = v->s;
    rx.end = v->s + v->n;
    infer__sb_puts(&body, "\"\\\"\" (");
    if (!infer__rx_alternates(&rx, &body, &nullable, &weight)) {
        stbds_arrfree(body.p);
        return NULL;
    }
    infer__sb_puts(&body, ") \"\\\"\" space");
    infer__sg_prim(sg, INFER__SP_SPACE);
    if (!infer__sg_expand(sg, v, weight)) {
        stbds_arrfree(body.p);
        return NULL;
    }
    slot = infer__sg_new_rule(sg, path, &name);
    return infer__sg_finish_rule(sg, slot, name, &body);
}

/* ---- objects ------------------------------------------------------------------ */

typedef struct infer__sg_key {
    const char *s;
    size_t n;
    int i;
} infer__sg_key;

static int infer__sg_key_cmp(const void *a, const void *b) {
    const infer__sg_key *x = (const infer__sg_key *)a, *y = (const infer__sg_key *)b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return memcmp(x->s, y->s, x->n);
}

/* the keys' order for qsort: a name written twice by where it stands, so
   that every C library's qsort leaves the same order */
static int infer__sg_key_order(const void *a, const void *b) {
    const infer__sg_key *x = (const infer__sg_key *)a, *y = (const infer__sg_key *)b;
    int c = infer__sg_key_cmp(a, b);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Sets isreq[i] for each property named in required (looked up in the
   keys sorted, so that thousands of them cost n log n). 0 after an error. */
static int infer__sg_required(infer__sg *sg, const infer__jv *props, const infer__jv *req, unsigned char *isreq) {
    size_t k, n = stbds_arrlenu(props->keys);
    infer__sg_key *sorted;
    if (!req || !stbds_arrlenu(req->items)) return 1;
    if (!(sorted = (infer__sg_key *)infer__calloc(n + 1, sizeof *sorted))) {
        infer__jp_nomem(sg->jp);
        return 0;
    }
    for (k = 0; k < n; k++) {
        sorted[k].s = props->keys[k];
        sorted[k].n = props->key_lens[k];
        sorted[k].i = (int)k;
    }
    qsort(sorted, n, sizeof *sorted, infer__sg_key_order);
    for (k = 0; k < stbds_arrlenu(req->items); k++) {
        const infer__jv *r = &req->items[k];
        infer__sg_key want, *hit;
        if (r->type != INFER__J_STR) {
            infer__jp_fail(sg->jp, r->at, "required must be an array of names");
            break;
        }
        want.s = r->s;
        want.n = r->n;
        hit = n ? (infer__sg_key *)bsearch(&want, sorted, n, sizeof *sorted, infer__sg_key_cmp) : NULL;
        if (!hit) {
            infer__jp_fail(sg->jp, r->at, "required property '%s' is not in properties", r->s);
            break;
        }
        /* a name written twice: the first (bsearch may find either) */
        while (hit > sorted && !infer__sg_key_cmp(hit - 1, &want)) hit--;
        isreq[hit->i] = 1;
    }
    INFER_FREE(sorted);
    return !sg->jp->failed;
}

/* The properties as written in order, each optional one present or not.
   With f the first required one (n: none), two chains of rules:
     alts_k ::= kv_k rest_(k+1) | alts_(k+1)   (the first written is k or later)
     rest_k ::= "" | "," space alts_k           (after one: more, or the end)
   where alts_f ::= kv_f tail (the properties after f, each after a comma,
   optional ones in ( )?) and rest_k has no "" while f is still to come.
   Each kv is written once, so the text is linear in n; "" comes first so
   that the end is never the alternative a bounded matcher crowds out. */
static void infer__sg_props(infer__sg *sg, infer__sb *b, char **kv, const unsigned char *req, int n,
                            const char *path) {
    const char **alts = NULL, **rest = NULL;
    int *alts_slot = NULL, *rest_slot = NULL;
    infer__sb tail = {NULL, 0};
    char sub[96];
    int f, i;
    for (f = 0; f < n && !req[f]; f++) {}
    for (i = f + 1; i < n; i++) {
        infer__sb_puts(&tail, req[i] ? " \",\" space " : " (\",\" space ");
        infer__sb_puts(&tail, kv[i]);
        if (!req[i]) infer__sb_puts(&tail, ")?");
    }
    if (f == 0) { /* the first one is required: all inline */
        if (n) infer__sb_puts(b, " "), infer__sb_puts(b, kv[0]);
        infer__sb_put(b, tail.p, stbds_arrlenu(tail.p));
        b->nomem |= tail.nomem;
        stbds_arrfree(tail.p);
        return;
    }
    alts = (const char **)infer__calloc((size_t)n + 1, sizeof *alts);
    rest = (const char **)infer__calloc((size_t)n + 1, sizeof *rest);
    alts_slot = (int *)infer__calloc((size_t)n + 1, sizeof *alts_slot);
    rest_slot = (int *)infer__calloc((size_t)n + 1, sizeof *rest_slot);
    if (!alts || !rest || !alts_slot || !rest_slot) infer__jp_nomem(sg->jp);
    for (i = 0; i <= f && i < n && !sg->jp->failed; i++) { /* names first: each rule names the next */
        snprintf(sub, sizeof sub, "%.48s-alts", path);
        alts_slot[i] = infer__sg_new_rule(sg, sub, &alts[i]);
        snprintf(sub, sizeof sub, "%.48s-rest", path);
        if (i > 0) rest_slot[i] = infer__sg_new_rule(sg, sub, &rest[i]);
    }
    for (i = 0; i <= f && i < n && !sg->jp->failed; i++) {
        infer__sb one = {NULL, 0};
        infer__sb_puts(&one, kv[i]);
        if (i == f) infer__sb_put(&one, tail.p, stbds_arrlenu(tail.p));
        else {
            if (i + 1 < n) infer__sb_puts(&one, " "), infer__sb_puts(&one, rest[i + 1]);
            if (i + 1 < n) infer__sb_puts(&one, " | "), infer__sb_puts(&one, alts[i + 1]);
        }
        one.nomem |= tail.nomem;
        infer__sg_finish_rule(sg, alts_slot[i], alts[i], &one);
        if (i == 0 || sg->jp->failed) continue;
        infer__sb_puts(&one, i <= f && f < n ? "\",\" space " : "\"\" | \",\" space ");
        infer__sb_puts(&one, alts[i]);
        infer__sg_finish_rule(sg, rest_slot[i], rest[i], &one);
    }
    if (!sg->jp->failed) {
        infer__sb_puts(b, f == n ? " (\"\" | " : " ");
        infer__sb_puts(b, alts[0]);
        if (f == n) infer__sb_puts(b, ")");
    }
    stbds_arrfree(tail.p);
    INFER_FREE(alts);
    INFER_FREE(rest);
    INFER_FREE(alts_slot);
    INFER_FREE(rest_slot);
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
    if (!infer__sg_required(sg, props, req, isreq)) {
        INFER_FREE(isreq);
        return NULL;
    }
    for (i = k = 0; i < n; i++) k += !isreq[i];
    if (k > INFER__SCHEMA_MAX_OPTIONAL) { /* each is a link of a chain of rules */
        infer__jp_fail(sg->jp, props->at, "over %d optional properties in one object are not supported",
                       INFER__SCHEMA_MAX_OPTIONAL);
        INFER_FREE(isreq);
        return NULL;
    }
    slot = infer__sg_new_rule(sg, path, &name);
    for (i = 0; i < n && !sg->jp->failed; i++) {
        infer__sb one = {NULL, 0}, key = {NULL, 0};
        char sub[96];
        const char *val;
        snprintf(sub, sizeof sub, "%.48s-%s", path, props->keys[i]);
        val = infer__sg_schema(sg, &props->items[i], sub);
        if (!val) break;
        infer__sb_json_string(&key, props->keys[i], props->key_lens[i]);
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
        infer__sg_props(sg, &body, kv, isreq, n, path);
        infer__sb_puts(&body, " \"}\" space");
        infer__sg_prim(sg, INFER__SP_SPACE);
        infer__sg_finish_rule(sg, slot, name, &body);
    } else stbds_arrfree(body.p);
    for (i = 0; i < (int)stbds_arrlen(kv); i++) INFER_FREE(kv[i]);
    stbds_arrfree(kv);
    INFER_FREE(isreq);
    return sg->jp->failed ? NULL : name;
}

/* ---- schemas ------------------------------------------------------------------- */

/* Assertions no grammar here expresses: refused, never ignored (a reply
   could break them). Annotations and unknown keywords are ignored. */
static const char *const infer__sg_refused[] = {
    "multipleOf", "minProperties", "maxProperties", "patternProperties", "propertyNames", "not", "if", "then",
    "else", "dependentRequired", "dependentSchemas", "dependencies", "contains", "minContains", "maxContains",
    "prefixItems", "additionalItems", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
    "$recursiveRef", "contentSchema"};

/* assertions that need a type to say what they apply to */
static const char *const infer__sg_typed[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                              "pattern", "minLength", "maxLength", "minItems", "maxItems",
                                              "required"};

static int infer__sg_check_keywords(infer__sg *sg, const infer__jv *s) {
    size_t i, k;
    for (i = 0; i < stbds_arrlenu(s->keys); i++) {
        const char *key = s->keys[i];
        const infer__jv *v = &s->items[i];
        if (strlen(key) != s->key_lens[i]) continue;
        for (k = 0; k < sizeof infer__sg_refused / sizeof *infer__sg_refused; k++)
            if (!strcmp(key, infer__sg_refused[k])) {
                infer__jp_fail(sg->jp, v->at, "%s is not supported", key);
                return 0;
            }
        if (!strcmp(key, "uniqueItems") && !(v->type == INFER__J_BOOL && !v->b)) {
            infer__jp_fail(sg->jp, v->at, "uniqueItems is not supported");
            return 0;
        }
        /* extra properties are never written: only "none" or "any" can be honoured */
        if (!strcmp(key, "additionalProperties") && v->type != INFER__J_BOOL &&
            !(v->type == INFER__J_OBJ && !stbds_arrlenu(v->keys))) {
            infer__jp_fail(sg->jp, v->at, "additionalProperties as a schema is not supported");
            return 0;
        }
    }
    return 1;
}

static const char *infer__sg_type(infer__sg *sg, const infer__jv *s, const char *type, const char *at,
                                  const char *path) {
    const char *name;
    int slot;
    infer__sb body = {NULL, 0};
    if (!strcmp(type, "string")) {
        const infer__jv *pattern = infer__jv_get(s, "pattern");
        long min, max;
        if (pattern) return infer__sg_pattern(sg, s, pattern, path);
        min = infer__sg_count(sg, s, "minLength", 0);
        max = infer__sg_count(sg, s, "maxLength", -1);
        if (min == -2 || max == -2) return NULL;
        if (min == 0 && max < 0) return infer__sg_prim(sg, INFER__SP_STRING);
        if (max >= 0 && max < min) {
            infer__jp_fail(sg->jp, s->at, "maxLength is below minLength");
            return NULL;
        }
        if (!infer__sg_expand(sg, s, (double)(max < 0 ? min + 1 : max))) return NULL;
        slot = infer__sg_new_rule(sg, path, &name);
        infer__sb_puts(&body, "\"\\\"\" char");
        infer__sb_repeat(&body, min, max);
        infer__sb_puts(&body, " \"\\\"\" space");
        infer__sg_prim(sg, INFER__SP_CHAR);
        infer__sg_prim(sg, INFER__SP_SPACE);
        return infer__sg_finish_rule(sg, slot, name, &body);
    }
    if (!strcmp(type, "number")) {
        static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
        int k;
        for (k = 0; k < 4; k++) {
            const infer__jv *v = infer__jv_get(s, bounds[k]);
            if (v && v->type != INFER__J_BOOL) {
                infer__jp_fail(sg->jp, v->at, "%s on type number is not supported (only on integers)", bounds[k]);
                return NULL;
            }
        }
        return infer__sg_prim(sg, INFER__SP_NUMBER);
    }
    if (!strcmp(type, "integer")) return infer__sg_integer(sg, s, path);
    if (!strcmp(type, "boolean")) return infer__sg_prim(sg, INFER__SP_BOOLEAN);
    if (!strcmp(type, "null")) return infer__sg_prim(sg, INFER__SP_NULL);
    if (!strcmp(type, "object")) {
        infer__jv none; /* properties {}: no property */
        const infer__jv *props = infer__jv_get(s, "properties"), *extra = infer__jv_get(s, "additionalProperties");
        const infer__jv *req = infer__jv_get(s, "required");
        memset(&none, 0, sizeof none);
        if (!props && extra && extra->type == INFER__J_BOOL && !extra->b) {
            none.type = INFER__J_OBJ;
            none.at = extra->at;
            props = &none;
        }
        if (!props) {
            if (req && req->type == INFER__J_ARR && stbds_arrlenu(req->items)) {
                infer__jp_fail(sg->jp, req->at, "required without properties is not supported");
                return NULL;
            }
            return infer__sg_prim(sg, INFER__SP_OBJECT); /* any object */
        }
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
        if (!infer__sg_expand(sg, s, (double)(max < 0 ? min + 1 : max))) return NULL;
        if (!items && min == 0 && max < 0) return infer__sg_prim(sg, INFER__SP_ARRAY); /* any array */
        if (items && items->type == INFER__J_ARR) {
            infer__jp_fail(sg->jp, items->at, "items as an array (a tuple) is not supported");
            return NULL;
        }
        slot = infer__sg_new_rule(sg, path, &name);
        snprintf(sub, sizeof sub, "%.48s-item", path);
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
    if (!infer__sg_check_keywords(sg, s)) return NULL;
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
    for (i = 0; i < (int)(sizeof infer__sg_typed / sizeof *infer__sg_typed); i++)
        if ((v = infer__jv_get(s, infer__sg_typed[i])) != NULL) {
            infer__jp_fail(sg->jp, v->at, "%s without a type is not supported", infer__sg_typed[i]);
            return NULL;
        }
    return infer__sg_prim(sg, INFER__SP_VALUE);
}

/* The rules of several schemas at once, appended to *out: schemas[i]'s
   top rule is named names[i] (its other rules after it), the shared rules
   (space, string, ...) come once at the end, with those `also` asks for
   (1u << INFER__SP_...) for rules of the caller's that use them. Errors
   (jp->failed) point into jp's text. 0, or -1. */
static int infer__schema_rules(infer__jp *jp, const infer__jv *const *schemas, const char *const *names, int n,
                               unsigned also, infer__sb *out) {
    infer__sg sg;
    int i, k;
    memset(&sg, 0, sizeof sg);
    sg.jp = jp;
    for (k = 0; k < INFER__SP_COUNT; k++) /* the shared rules' names are taken */
        if (!infer__sg_take(&sg, infer__sp_name[k])) infer__jp_nomem(jp);
    for (i = 0; i < n && !jp->failed; i++) {
        int first = (int)stbds_arrlen(sg.rules);
        const char *top = infer__sg_schema(&sg, schemas[i], names[i]);
        if (top && strcmp(top, names[i]) != 0) { /* a shared rule at the top */
            infer__sb line = {NULL, 0};
            char *text;
            infer__sb_puts(&line, names[i]);
            infer__sb_puts(&line, " ::= ");
            infer__sb_puts(&line, top);
            if (line.nomem || !infer__arr_room(sg.rules, 1) ||
                !(text = infer__strndup(line.p, (size_t)stbds_arrlen(line.p))))
                infer__jp_nomem(jp);
            else
                stbds_arrins(sg.rules, first, text);
            stbds_arrfree(line.p);
        }
    }
    if (!jp->failed) {
        unsigned used = sg.used | also, prev = 0;
        while (used != prev) { /* what the shared rules use in turn */
            prev = used;
            for (k = 0; k < INFER__SP_COUNT; k++)
                if (used & 1u << k) used |= infer__sp_uses[k];
        }
        for (i = 0; i < (int)stbds_arrlen(sg.rules); i++) {
            if (!sg.rules[i]) continue;
            infer__sb_puts(out, sg.rules[i]);
            infer__sb_puts(out, "\n");
        }
        for (k = 0; k < INFER__SP_COUNT; k++)
            if (used & 1u << k) {
                infer__sb_puts(out, infer__sp_rule[k]);
                infer__sb_puts(out, "\n");
            }
        if (out->nomem) infer__jp_nomem(jp);
    }
    for (i = 0; i < (int)stbds_arrlen(sg.rules); i++) INFER_FREE(sg.rules[i]);
    stbds_arrfree(sg.rules);
    for (i = 0; i < (int)stbds_arrlen(sg.names); i++) INFER_FREE(sg.names[i]);
    stbds_arrfree(sg.names);
    INFER_FREE(sg.taken);
    return jp->failed ? -1 : 0;
}

/* snprintf-style: text (length len) into buf */
static int infer__sb_give(const infer__sb *b, char *buf, size_t size) {
    int len = (int)stbds_arrlen(b->p);
    if (buf && size) {
        size_t n = INFER__MIN((size_t)len, size - 1);
        if (n) memcpy(buf, b->p, n);
        buf[n] = 0;
    }
    return len;
}

INFERDEF int infer_json_schema_to_grammar(const char *schema, char *buf, size_t size, infer_error *err) {
    infer__jp jp;
    infer__jv root;
    infer__sb out = {NULL, 0};
    const infer__jv *top = &root;
    const char *name = "root";
    int len = -1;
    if (!schema) {
        infer__set_error(err, INFER_ERR_ARG, "JSON schema: no schema given");
        return -1;
    }
    memset(&jp, 0, sizeof jp);
    jp.src = jp.p = schema;
    jp.err = err;
    infer__jp_value(&jp, &root);
    infer__jp_ws(&jp);
    if (!jp.failed && *jp.p) infer__jp_fail(&jp, jp.p, "unexpected text after the schema");
    if (!jp.failed && infer__schema_rules(&jp, &top, &name, 1, 0, &out) == 0) len = infer__sb_give(&out, buf, size);
    stbds_arrfree(out.p);
    infer__jv_free(&root);
    return len;
}
