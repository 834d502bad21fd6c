/* json.c - JSON text parsed into values (infer__jp, infer__jv), and a growing
   byte string (infer__sb) that writes values back as JSON and text as GBNF. */
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

/* ---- the string builder: JSON and GBNF text ------------------------------------ */

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

/* The escapes GBNF literals and JSON strings share (the quote, the
   backslash, \n \r \t); 1 if c was one of them, written. */
static int infer__sb_common_escape(infer__sb *b, unsigned char c) {
    if (c == '"' || c == '\\') {
        infer__sb_putc(b, '\\');
        infer__sb_putc(b, (char)c);
    } else if (c == '\n') infer__sb_puts(b, "\\n");
    else if (c == '\r') infer__sb_puts(b, "\\r");
    else if (c == '\t') infer__sb_puts(b, "\\t");
    else return 0;
    return 1;
}

/* bytes as a GBNF string literal */
static void infer__sb_literal(infer__sb *b, const char *s, size_t n) {
    size_t i;
    infer__sb_putc(b, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (infer__sb_common_escape(b, c)) {
        } else if (c < 0x20 || c == 0x7F) {
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
        if (infer__sb_common_escape(b, c)) {
        } else if (c == '\b') infer__sb_puts(b, "\\b");
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
