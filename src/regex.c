/* regex.c - the regular expressions of JSON schemas' "pattern" compiled to GBNF. */
#include "schema.h"

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
