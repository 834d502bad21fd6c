/* schema.c - JSON schemas compiled to GBNF grammars: the schema's JSON text
   parsed, then each schema written as rules (infer_json_schema_to_grammar),
   which grammar.c compiles like any other grammar. */
#include "internal.h"
#include "schema.h"

/* ---- JSON schema -> GBNF ------------------------------------------------------ */

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


static int infer__json_schema_to_grammar(const char *schema, char *buf, size_t size, infer_error *err) {
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

INFERDEF infer_status infer_json_schema_to_grammar(const char *schema, char *buf, size_t size, size_t *n_out,
                                                   infer_error *err) {
    infer_error e;
    int len;
    if (n_out) *n_out = 0;
    if (!buf && size) {
        infer__set_error(err, INFER_ERR_ARG, "JSON schema: no buffer");
        return INFER_ERR_ARG;
    }
    e.code = INFER_OK;
    e.msg[0] = 0;
    if ((len = infer__json_schema_to_grammar(schema, buf, size, &e)) < 0) {
        if (e.code == INFER_OK) infer__set_error(&e, INFER_ERR_ARG, "JSON schema: failed");
        if (err) *err = e;
        return e.code;
    }
    if (n_out) *n_out = (size_t)len;
    return INFER_OK;
}
