/* gbnf.c - GBNF text (llama.cpp's grammar format) compiled to rules.

   A grammar compiles to one array of elements: each rule's alternatives,
   separated by ALT and closed by END, hold character sets (TERM) and rule
   references (REF). Repetitions become helper rules (x* is r ::= x r | ),
   so grammar.c's matcher knows only sequences and alternatives. The
   parser keeps open groups on a heap stack, never the C stack. */
#include "internal.h"
#include "gbnf.h"

static void infer__grules_free(infer__grules *g) {
    if (!g) return;
    INFER_FREE(g->el);
    INFER_FREE(g->rule_start);
    INFER_FREE(g->alt_first);
    INFER_FREE(g->alt_pos);
    INFER_FREE(g->set_first);
    INFER_FREE(g->ranges);
    INFER_FREE(g);
}

/* ---- GBNF parser ---------------------------------------------------------- */

typedef struct infer__gp_rule {
    char *name;       /* NULL for a helper rule (a group or a repetition) */
    int owner;        /* the named rule it was written in (itself when named) */
    int star;         /* a helper for x* / x+ / x{m,} */
    int defined;
    const char *at;   /* the definition, or the first reference while undefined */
    infer__gel *body; /* stbds array */
} infer__gp_rule;

typedef struct infer__gp_set {
    infer__grange *r; /* stbds array */
    int neg;
} infer__gp_set;

typedef struct infer__gp {
    const char *src, *p;
    infer_error *err;
    int failed, cur, any_set;
    int ascii_set[128]; /* the one-character set of each ASCII character, once made */
    infer__gp_rule *rules;
    infer__gp_set *sets;
    long n_el, n_ranges; /* what the compiled grammar will hold so far, for the budget */
    int *name_slot;      /* open addressing: named rules' ids by their name's hash, -1 empty */
    int name_cap, n_named;
    /* The last repetition made: rule's body from start to end is sym (one
       element) repeated min to max times; rule -1 for none. A group that
       holds just that is the repetition, for a quantifier after it. */
    struct {
        int rule, start, end, min, max;
        infer__gel sym;
    } rep, group_rep; /* group_rep: rule's element at start is a reference to such a group */
} infer__gp;

/* A parse error of what: its message, at at's line and column of src
   (at NULL: no place). Both parsers below report through it. */
static void infer__fail_at(infer_error *err, const char *what, const char *src, const char *at, const char *fmt,
                           va_list ap) {
    char msg[192];
    int line = 1, col = 1;
    const char *q;
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!at) {
        infer__set_error(err, INFER_ERR_ARG, "%s: %s", what, msg);
        return;
    }
    for (q = src; q < at; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    infer__set_error(err, INFER_ERR_ARG, "%s: %s at line %d, column %d", what, msg, line, col);
}

static void infer__gp_fail(infer__gp *g, const char *at, const char *fmt, ...) INFER__PRINTF(3, 4);
static void infer__gp_fail(infer__gp *g, const char *at, const char *fmt, ...) {
    va_list ap;
    if (g->failed) return;
    g->failed = 1;
    va_start(ap, fmt);
    infer__fail_at(g->err, "grammar", g->src, at, fmt, ap);
    va_end(ap);
}

/* A failed allocation ends the parse like an error, with INFER_ERR_NOMEM;
   the steps below do nothing once the parse has failed. */
static void infer__gp_nomem(infer__gp *g) {
    if (g->failed) return;
    g->failed = 1;
    infer__set_error(g->err, INFER_ERR_NOMEM, "grammar: out of memory");
}

static int infer__gp_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips blanks and comments, and line breaks too where newlines is set. */
static const char *infer__gp_space(const char *p, int newlines) {
    for (;;) {
        if (*p == ' ' || *p == '\t') p++;
        else if (*p == '#')
            while (*p && *p != '\n' && *p != '\r') p++;
        else if (newlines && (*p == '\n' || *p == '\r')) p++;
        else return p;
    }
}

/* Whether q starts a rule's definition ("name ::="). */
static int infer__gp_is_def(const char *q) {
    const char *s = q;
    while (infer__gp_word(*q)) q++;
    if (q == s) return 0;
    q = infer__gp_space(q, 0);
    return q[0] == ':' && q[1] == ':' && q[2] == '=';
}

static int infer__g_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static uint32_t infer__gp_name_hash(const char *name, size_t n) {
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h;
}

/* Counts an element (or a rule's end) against the budget: 0, the parse
   failed, when it would go past it. */
static int infer__gp_budget(infer__gp *g, long n_el, long n_ranges) {
    if (g->failed) return 0;
    g->n_el += n_el;
    g->n_ranges += n_ranges;
    if (g->n_el > INFER__G_MAX_ELEMENTS) {
        infer__gp_fail(g, NULL, "the grammar expands to more than %d elements (infer.h's limit)",
                       INFER__G_MAX_ELEMENTS);
        return 0;
    }
    if (g->n_ranges > INFER__G_MAX_RANGES) {
        infer__gp_fail(g, NULL, "the grammar's character sets hold more than %d ranges (infer.h's limit)",
                       INFER__G_MAX_RANGES);
        return 0;
    }
    return 1;
}

/* Adds a rule (its end counted against the budget); its id, or -1. */
static int infer__gp_rule_add(infer__gp *g, const infer__gp_rule *r) {
    if (!infer__gp_budget(g, 1, 0)) return -1;
    if (!infer__arr_push(g->rules, *r)) {
        infer__gp_nomem(g);
        return -1;
    }
    return (int)stbds_arrlen(g->rules) - 1;
}

/* The slot of name in the table of named rules: its rule's, or the empty
   one where it would go. */
static int infer__gp_name_slot(const infer__gp *g, const char *name, size_t n) {
    int slot = (int)(infer__gp_name_hash(name, n) & (uint32_t)(g->name_cap - 1));
    for (;; slot = (slot + 1) & (g->name_cap - 1)) {
        int id = g->name_slot[slot];
        const char *s;
        if (id < 0) return slot;
        s = g->rules[id].name;
        if (!strncmp(s, name, n) && !s[n]) return slot;
    }
}

/* The named rule's id, or -1 when there is none. */
static int infer__gp_rule_find(const infer__gp *g, const char *name, size_t n) {
    return g->name_cap ? g->name_slot[infer__gp_name_slot(g, name, n)] : -1;
}

/* The id of the rule named name[0..n), made (undefined, first referred to
   at `at`) when new. A hash table finds it: grammars may name many rules. */
static int infer__gp_rule_id(infer__gp *g, const char *name, size_t n, const char *at) {
    infer__gp_rule r;
    int id, slot;
    if (g->failed) return -1;
    if ((id = infer__gp_rule_find(g, name, n)) >= 0) return id;
    if (2 * (g->n_named + 1) > g->name_cap) { /* grow, keeping it at most half full */
        int cap = g->name_cap ? 2 * g->name_cap : 64, k, *old = g->name_slot, old_cap = g->name_cap;
        int *slots = (int *)INFER_MALLOC((size_t)cap * sizeof(int));
        if (!slots) {
            infer__gp_nomem(g);
            return -1;
        }
        for (k = 0; k < cap; k++) slots[k] = -1;
        g->name_slot = slots;
        g->name_cap = cap;
        for (k = 0; k < old_cap; k++)
            if (old[k] >= 0) {
                const char *s = g->rules[old[k]].name;
                slots[infer__gp_name_slot(g, s, strlen(s))] = old[k];
            }
        INFER_FREE(old);
    }
    memset(&r, 0, sizeof r);
    r.name = infer__strndup(name, n);
    r.owner = (int)stbds_arrlen(g->rules);
    r.at = at;
    if (!r.name) {
        infer__gp_nomem(g);
        return -1;
    }
    if ((id = infer__gp_rule_add(g, &r)) < 0) {
        INFER_FREE(r.name);
        return -1;
    }
    slot = infer__gp_name_slot(g, name, n);
    g->name_slot[slot] = id;
    g->n_named++;
    return id;
}

static int infer__gp_helper(infer__gp *g, const char *at, int star) {
    infer__gp_rule r;
    if (g->failed) return -1;
    memset(&r, 0, sizeof r);
    r.owner = g->cur;
    r.star = star;
    r.defined = 1;
    r.at = at;
    return infer__gp_rule_add(g, &r);
}

static void infer__gp_emit(infer__gp *g, int rule, int type, int val) {
    infer__gel e;
    if (!infer__gp_budget(g, 1, 0)) return;
    e.type = type;
    e.val = val;
    if (!infer__arr_push(g->rules[rule].body, e)) infer__gp_nomem(g);
}

static int infer__gp_set_new(infer__gp *g, int neg) {
    infer__gp_set s;
    if (!infer__gp_budget(g, 0, 1)) return -1; /* room for a complement */
    s.r = NULL;
    s.neg = neg;
    if (!infer__arr_push(g->sets, s)) {
        infer__gp_nomem(g);
        return -1;
    }
    return (int)stbds_arrlen(g->sets) - 1;
}

static void infer__gp_set_add(infer__gp *g, int set, uint32_t lo, uint32_t hi) {
    infer__grange r;
    if (!infer__gp_budget(g, 0, 1)) return;
    r.lo = lo;
    r.hi = hi;
    if (!infer__arr_push(g->sets[set].r, r)) infer__gp_nomem(g);
}

/* A character of a literal or class: an escape or one UTF-8 character. */
static uint32_t infer__gp_char(infer__gp *g) {
    const char *at = g->p;
    uint32_t cp = 0;
    int len;
    if (*g->p == '\\') {
        char e = g->p[1];
        int nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0, i;
        if (nhex) {
            for (i = 0; i < nhex; i++) {
                int v = infer__g_hex(g->p[2 + i]);
                if (v < 0) {
                    infer__gp_fail(g, at, "bad escape '\\%c': %d hex digits expected", e, nhex);
                    return 0;
                }
                cp = cp << 4 | (uint32_t)v;
            }
            if (cp > 0x10FFFF) {
                infer__gp_fail(g, at, "escape beyond U+10FFFF");
                return 0;
            }
            g->p += 2 + nhex;
            return cp;
        }
        switch (e) {
        case 'n': cp = '\n'; break;
        case 't': cp = '\t'; break;
        case 'r': cp = '\r'; break;
        case '\\':
        case '"':
        case '[':
        case ']': cp = (uint32_t)e; break;
        default:
            if (!e) infer__gp_fail(g, at, "unterminated escape");
            else infer__gp_fail(g, at, "bad escape '\\%c'", e);
            return 0;
        }
        g->p += 2;
        return cp;
    }
    len = infer__utf8_next(g->p, 4, &cp);
    if (!len) infer__gp_fail(g, at, "invalid UTF-8");
    else g->p += len;
    return cp;
}

static void infer__gp_literal(infer__gp *g, int rule) {
    const char *at = g->p++;
    while (*g->p != '"') {
        uint32_t cp;
        int s;
        if (!*g->p) {
            infer__gp_fail(g, at, "unterminated string literal");
            return;
        }
        cp = infer__gp_char(g);
        if (g->failed) return;
        if (cp < 128 && g->ascii_set[cp] >= 0) s = g->ascii_set[cp];
        else {
            s = infer__gp_set_new(g, 0);
            infer__gp_set_add(g, s, cp, cp);
            if (g->failed) return;
            if (cp < 128) g->ascii_set[cp] = s;
        }
        infer__gp_emit(g, rule, INFER__GE_TERM, s);
    }
    g->p++;
}

static void infer__gp_class(infer__gp *g, int rule) {
    const char *at = g->p++;
    int neg = 0, s;
    if (*g->p == '^') neg = 1, g->p++;
    s = infer__gp_set_new(g, neg);
    while (*g->p != ']') {
        uint32_t lo, hi;
        if (!*g->p) {
            infer__gp_fail(g, at, "unterminated character class");
            return;
        }
        lo = hi = infer__gp_char(g);
        if (g->failed) return;
        if (g->p[0] == '-' && g->p[1] && g->p[1] != ']') {
            const char *rat = g->p++;
            hi = infer__gp_char(g);
            if (g->failed) return;
            if (hi < lo) {
                infer__gp_fail(g, rat, "bad range in a character class (its end is below its start)");
                return;
            }
        }
        infer__gp_set_add(g, s, lo, hi);
    }
    g->p++;
    infer__gp_emit(g, rule, INFER__GE_TERM, s);
}

static int infer__gp_count(infer__gp *g, int *out) {
    long v = 0;
    if (*g->p < '0' || *g->p > '9') return 0;
    while (*g->p >= '0' && *g->p <= '9') {
        if (v <= INFER__G_MAX_REPEAT) v = v * 10 + (*g->p - '0');
        g->p++;
    }
    *out = (int)INFER__MIN(v, (long)INFER__G_MAX_REPEAT + 1);
    return 1;
}

/* Rewrites the symbol body[start..] of rule as it repeated min to max
   (-1: no limit) times: min copies, then a helper rule
   r ::= x r |  for no limit, or a chain r_k ::= x r_(k-1) |  for k up to
   max - min optional ones (both recurse on the right: stacks stay flat).
   A symbol of several elements (a literal) copied more than once goes in a
   helper rule of its own first, so that each copy is one reference: the
   grammar grows with the count, not with the count times the literal. */
static void infer__gp_repeat(infer__gp *g, int rule, int start, int min, int max, const char *at) {
    infer__gel *sym = NULL;
    int n, i, k, prev = -1, copies;
    if (min > INFER__G_MAX_REPEAT || max > INFER__G_MAX_REPEAT) {
        infer__gp_fail(g, at, "repetition count over %d", INFER__G_MAX_REPEAT);
        return;
    }
    if (max >= 0 && max < min) {
        infer__gp_fail(g, at, "repetition {%d,%d}: the maximum is below the minimum", min, max);
        return;
    }
    n = (int)stbds_arrlen(g->rules[rule].body) - start;
    if (!infer__arr_fit(sym, n)) {
        infer__gp_nomem(g);
        return;
    }
    for (k = 0; k < n; k++) stbds_arrput(sym, g->rules[rule].body[start + k]);
    stbds_arrsetlen(g->rules[rule].body, start);
    g->n_el -= n;
    copies = min + (max < 0 ? 1 : max - min);
    if (n > 1 && copies > 1) {
        int h = infer__gp_helper(g, at, 0);
        for (k = 0; k < n; k++) infer__gp_emit(g, h, sym[k].type, sym[k].val);
        n = 1;
        sym[0].type = INFER__GE_REF;
        sym[0].val = h;
    }
    for (i = 0; i < min; i++)
        for (k = 0; k < n; k++) infer__gp_emit(g, rule, sym[k].type, sym[k].val);
    if (max < 0) {
        int r = infer__gp_helper(g, at, 1);
        for (k = 0; k < n; k++) infer__gp_emit(g, r, sym[k].type, sym[k].val);
        infer__gp_emit(g, r, INFER__GE_REF, r);
        infer__gp_emit(g, r, INFER__GE_ALT, 0);
        infer__gp_emit(g, rule, INFER__GE_REF, r);
    } else if (max > min) {
        for (i = 0; i < max - min; i++) {
            int r = infer__gp_helper(g, at, 0);
            for (k = 0; k < n; k++) infer__gp_emit(g, r, sym[k].type, sym[k].val);
            if (prev >= 0) infer__gp_emit(g, r, INFER__GE_REF, prev);
            infer__gp_emit(g, r, INFER__GE_ALT, 0);
            prev = r;
        }
        infer__gp_emit(g, rule, INFER__GE_REF, prev);
    }
    g->rep.rule = n == 1 && !g->failed ? rule : -1;
    g->rep.start = start;
    g->rep.end = (int)stbds_arrlen(g->rules[rule].body);
    g->rep.min = min;
    g->rep.max = max;
    if (n == 1) g->rep.sym = sym[0];
    stbds_arrfree(sym);
}

/* Whether infer__gp_repeat takes these bounds. */
static int infer__gp_bounds_ok(int min, int max) {
    return min <= INFER__G_MAX_REPEAT && max <= INFER__G_MAX_REPEAT && (max < 0 || max >= min);
}

/* Reads one quantifier at g->p (*, +, ?, {m}, {m,}, {m,n}): its bounds,
   max -1 for none; 0 (failed) on a malformed one. */
static int infer__gp_quantifier(infer__gp *g, const char *at, int *min, int *max) {
    char c = *g->p++;
    *min = c == '+' ? 1 : 0;
    *max = c == '?' ? 1 : -1;
    if (c != '{') return 1;
    g->p = infer__gp_space(g->p, 0);
    if (!infer__gp_count(g, min)) {
        infer__gp_fail(g, at, "expecting a number after '{'");
        return 0;
    }
    g->p = infer__gp_space(g->p, 0);
    *max = *min;
    if (*g->p == ',') {
        g->p = infer__gp_space(g->p + 1, 0);
        if (!infer__gp_count(g, max)) *max = -1;
        g->p = infer__gp_space(g->p, 0);
    }
    if (*g->p != '}') {
        infer__gp_fail(g, at, "expecting '}' to close the repetition");
        return 0;
    }
    g->p++;
    return 1;
}

/* A group being parsed: the rule it was opened in, where its reference
   goes there, and its '('. */
typedef struct infer__gp_group {
    int rule, start;
    const char *at;
} infer__gp_group;

/* A rule's alternatives: items up to '|', the end, or (outside
   parentheses) a line that starts the next rule (a line break elsewhere
   continues the rule). A group becomes a helper rule; groups open are
   kept on a stack of their own, not the C stack, so deep nesting cannot
   overflow it, and are bounded by INFER__G_MAX_NEST. */
static void infer__gp_alternates(infer__gp *g, int rule) {
    infer__gp_group *groups = NULL;
    int start = -1; /* where the last item starts, for a repetition */
    while (!g->failed) {
        const char *at;
        char c;
        int len, nested = stbds_arrlen(groups) > 0;
        if (!nested && (*g->p == '\n' || *g->p == '\r')) {
            const char *q = infer__gp_space(g->p, 1);
            if (!*q || infer__gp_is_def(q)) break;
            g->p = q;
        }
        at = g->p;
        c = *g->p;
        len = (int)stbds_arrlen(g->rules[rule].body);
        if (c == '"') {
            start = len;
            infer__gp_literal(g, rule);
        } else if (c == '[') {
            start = len;
            infer__gp_class(g, rule);
        } else if (c == '.') {
            start = len;
            if (g->any_set < 0) {
                g->any_set = infer__gp_set_new(g, 0);
                infer__gp_set_add(g, g->any_set, 0, 0x10FFFF);
            }
            infer__gp_emit(g, rule, INFER__GE_TERM, g->any_set);
            g->p++;
        } else if (infer__gp_word(c)) {
            const char *s = g->p;
            int id;
            while (infer__gp_word(*g->p)) g->p++;
            id = infer__gp_rule_id(g, s, (size_t)(g->p - s), s);
            start = len;
            infer__gp_emit(g, rule, INFER__GE_REF, id);
        } else if (c == '(') {
            infer__gp_group grp;
            int sub;
            if (stbds_arrlen(groups) >= INFER__G_MAX_NEST) {
                infer__gp_fail(g, at, "groups nested deeper than %d (infer.h's limit)", INFER__G_MAX_NEST);
                break;
            }
            sub = infer__gp_helper(g, at, 0);
            grp.rule = rule;
            grp.start = len;
            grp.at = at;
            if (g->failed) break;
            if (!infer__arr_push(groups, grp)) {
                infer__gp_nomem(g);
                break;
            }
            rule = sub;
            start = -1;
            g->p = infer__gp_space(g->p + 1, 1);
            continue;
        } else if (c == ')' && nested) {
            infer__gp_group grp = stbds_arrpop(groups);
            int sub = rule;
            int sub_len = (int)stbds_arrlen(g->rules[sub].body);
            rule = grp.rule;
            start = grp.start;
            g->p++;
            if (sub_len == 1 && g->rules[sub].body[0].type != INFER__GE_ALT) {
                /* (e) is e: its element itself (a group that is a group
                   repeated, ((x)+), stays foldable so) */
                infer__gel e = g->rules[sub].body[0];
                infer__gp_emit(g, rule, e.type, e.val);
                if (g->rep.rule == sub && g->rep.start == 0 && g->rep.end == 1 && e.type == INFER__GE_REF) {
                    g->group_rep = g->rep; /* ("a"?): the repetition's one reference */
                    g->group_rep.end = e.val;
                } else if (!(g->group_rep.rule == sub && g->group_rep.start == 0 && e.type == INFER__GE_REF &&
                             e.val == g->group_rep.end))
                    g->group_rep.rule = -1;
                if (g->group_rep.rule >= 0) {
                    g->group_rep.rule = rule;
                    g->group_rep.start = start;
                }
            } else {
                infer__gp_emit(g, rule, INFER__GE_REF, sub);
                g->group_rep = g->rep;
                g->group_rep.rule = -1;
                if (g->rep.rule == sub && g->rep.start == 0 && g->rep.end == sub_len) {
                    g->group_rep.rule = rule;
                    g->group_rep.start = start;
                    g->group_rep.end = sub; /* the reference's target */
                }
            }
        } else if (c == '|') {
            infer__gp_emit(g, rule, INFER__GE_ALT, 0);
            start = -1;
            /* outside parentheses the loop's top decides about a line break
               (an empty last alternative when the next line starts a rule) */
            g->p = infer__gp_space(g->p + 1, nested);
            continue;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            int min = 0, max = 0, min2, max2, have = 0;
            const char *q = g->p;
            infer__gel *body;
            if (start < 0) {
                infer__gp_fail(g, at, "'%c' follows nothing it could repeat", c);
                break;
            }
            /* x{a,b}{c,d} with a <= 1 is x{a*c,b*d} (x++ is x+, x?* is x*,
               ((x)+)+ is x+): one repetition, where nesting them would make
               the matcher's stacks as many as 2^depth (each level's loop
               reachable two ways). A group that is one repetition gives
               its element back for that. */
            body = g->rules[rule].body;
            if (g->group_rep.rule == rule && g->group_rep.start == start && len == start + 1 &&
                body[start].type == INFER__GE_REF && body[start].val == g->group_rep.end && g->group_rep.min <= 1 &&
                infer__gp_bounds_ok(g->group_rep.min, g->group_rep.max)) {
                stbds_arrsetlen(g->rules[rule].body, start);
                g->n_el--;
                infer__gp_emit(g, rule, g->group_rep.sym.type, g->group_rep.sym.val);
                min = g->group_rep.min;
                max = g->group_rep.max;
                have = 1;
            }
            g->group_rep.rule = -1;
            for (;; q = infer__gp_space(g->p, stbds_arrlen(groups) > 0)) {
                if (*q != '*' && *q != '+' && *q != '?' && *q != '{') break;
                if (have && (min > 1 || !infer__gp_bounds_ok(min, max))) break; /* repeat says why */
                g->p = q;
                if (!infer__gp_quantifier(g, q, &min2, &max2)) break;
                if (!have) {
                    min = min2, max = max2, have = 1;
                    continue;
                }
                if (!infer__gp_bounds_ok(min2, max2) ||
                    (max2 >= 0 && max >= 0 && (long)max * max2 > INFER__G_MAX_REPEAT)) {
                    infer__gp_repeat(g, rule, start, min, max, at); /* kept nested */
                    if (g->failed) break;
                    at = q;
                    min = min2, max = max2;
                    continue;
                }
                min *= min2;
                max = max < 0 || max2 < 0 ? -1 : max * max2;
            }
            if (g->failed) break;
            infer__gp_repeat(g, rule, start, min, max, at);
        } else if (nested) {
            /* the innermost group open */
            infer__gp_fail(g, groups[stbds_arrlen(groups) - 1].at, "'(' is never closed");
            break;
        } else break;
        if (g->failed) break;
        g->p = infer__gp_space(g->p, stbds_arrlen(groups) > 0);
    }
    stbds_arrfree(groups);
}

static void infer__gp_grammar(infer__gp *g) {
    g->p = infer__gp_space(g->src, 1);
    while (*g->p && !g->failed) {
        const char *at = g->p;
        int r;
        while (infer__gp_word(*g->p)) g->p++;
        if (g->p == at) {
            infer__gp_fail(g, at, "expecting a rule name");
            return;
        }
        r = infer__gp_rule_id(g, at, (size_t)(g->p - at), at);
        if (g->failed) return;
        g->p = infer__gp_space(g->p, 0);
        if (strncmp(g->p, "::=", 3) != 0) {
            infer__gp_fail(g, g->p, "expecting '::=' after '%s'", g->rules[r].name);
            return;
        }
        if (g->rules[r].defined) {
            infer__gp_fail(g, at, "rule '%s' is defined twice", g->rules[r].name);
            return;
        }
        g->rules[r].defined = 1;
        g->rules[r].at = at;
        g->cur = r;
        g->p = infer__gp_space(g->p + 3, 0);
        infer__gp_alternates(g, r);
        if (g->failed) return;
        if (*g->p && *g->p != '\n' && *g->p != '\r') {
            infer__gp_fail(g, g->p, "unexpected '%c'", *g->p);
            return;
        }
        g->p = infer__gp_space(g->p, 1);
    }
}

static int infer__grange_cmp(const void *a, const void *b) {
    const infer__grange *x = (const infer__grange *)a, *y = (const infer__grange *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Which rules can match nothing, in time linear in the grammar: each
   alternative waits at its first element not known to match nothing; when
   that rule turns out to match nothing, the alternative moves on. 0 when
   out of memory. */
static int infer__gp_nullable(const infer__grules *c, unsigned char *nullable) {
    int n_alt = c->alt_first[c->n_rules], r, a, w, n_queue = 0;
    int *pos = (int *)INFER_MALLOC(((size_t)n_alt * 3 + (size_t)c->n_rules * 2) * sizeof(int));
    int *next, *owner, *waiting, *queue;
    if (!pos) return 0;
    next = pos + n_alt;           /* the next alternative waiting on the same rule */
    owner = next + n_alt;         /* the alternative's rule */
    waiting = owner + n_alt;      /* per rule: the first alternative waiting on it, -1 none */
    queue = waiting + c->n_rules; /* rules found to match nothing, waiters left to move */
    for (r = 0; r < c->n_rules; r++) {
        waiting[r] = -1;
        for (a = c->alt_first[r]; a < c->alt_first[r + 1]; a++) pos[a] = c->alt_pos[a], owner[a] = r;
    }
    /* every alternative once, then those woken by a rule found nullable */
    for (a = 0;;) {
        int p;
        if (a < n_alt) w = a++;
        else if (n_queue) {
            int s = queue[n_queue - 1];
            if ((w = waiting[s]) < 0) {
                n_queue--;
                continue;
            }
            waiting[s] = next[w];
        } else break;
        for (p = pos[w]; c->el[p].type == INFER__GE_REF && nullable[c->el[p].val]; p++) {}
        pos[w] = p;
        if (c->el[p].type == INFER__GE_END || c->el[p].type == INFER__GE_ALT) {
            if (!nullable[owner[w]]) {
                nullable[owner[w]] = 1;
                queue[n_queue++] = owner[w];
            }
        } else if (c->el[p].type == INFER__GE_REF) {
            next[w] = waiting[c->el[p].val];
            waiting[c->el[p].val] = w;
        }
    }
    INFER_FREE(pos);
    return 1;
}

/* A rule that reaches itself before matching a character (through rules
   that can match nothing), or -1: a depth-first search with a stack of its
   own (state per rule: 0 not seen, 1 on the path, 2 done). */
static int infer__gp_left_cycle(const infer__grules *c, const unsigned char *nullable, unsigned char *state) {
    typedef struct {
        int rule, a, p;
    } frame;
    frame *stack = (frame *)INFER_MALLOC(((size_t)c->n_rules + 1) * sizeof *stack);
    int root, sp, bad = -1;
    if (!stack) return -2;
    for (root = 0; root < c->n_rules && bad < 0; root++) {
        if (state[root]) continue;
        state[root] = 1;
        stack[0].rule = root;
        stack[0].a = c->alt_first[root];
        stack[0].p = c->alt_pos[stack[0].a];
        sp = 1;
        while (sp > 0) {
            frame *f = &stack[sp - 1];
            int end = c->alt_first[f->rule + 1], s;
            if (f->a >= end) {
                state[f->rule] = 2;
                sp--;
                continue;
            }
            if (c->el[f->p].type != INFER__GE_REF) {
                if (++f->a < end) f->p = c->alt_pos[f->a];
                continue;
            }
            s = c->el[f->p].val;
            if (nullable[s]) f->p++; /* what follows comes first too */
            else if (++f->a < end) f->p = c->alt_pos[f->a];
            if (state[s] == 1) {
                bad = s;
                break;
            }
            if (!state[s]) {
                state[s] = 1;
                stack[sp].rule = s;
                stack[sp].a = c->alt_first[s];
                stack[sp].p = c->alt_pos[stack[sp].a];
                sp++;
            }
        }
    }
    INFER_FREE(stack);
    return bad;
}

/* Checks the parsed rules and flattens them into a compiled grammar. */
static infer__grules *infer__gp_finish(infer__gp *g, const char *root) {
    int n = (int)stbds_arrlen(g->rules), r, s, k, n_el = 0, n_alt = 0, n_ranges = 0, bad;
    infer__grules *c;
    unsigned char *nullable, *state;
    for (r = 0; r < n; r++)
        if (!g->rules[r].defined) {
            infer__gp_fail(g, g->rules[r].at, "undefined rule '%s'", g->rules[r].name);
            return NULL;
        }
    c = (infer__grules *)infer__calloc(1, sizeof *c);
    if (!c) goto oom;
    c->root = infer__gp_rule_find(g, root, strlen(root));
    if (c->root < 0) {
        infer__grules_free(c);
        infer__gp_fail(g, NULL, "no rule named '%s' to start from", root);
        return NULL;
    }
    for (r = 0; r < n; r++) {
        int len = (int)stbds_arrlen(g->rules[r].body);
        n_el += len + 1;
        n_alt++;
        for (k = 0; k < len; k++) n_alt += g->rules[r].body[k].type == INFER__GE_ALT;
    }
    c->n_rules = n;
    c->n_el = n_el;
    c->n_sets = (int)stbds_arrlen(g->sets);
    for (s = 0; s < c->n_sets; s++) n_ranges += (int)stbds_arrlen(g->sets[s].r) + 1; /* + 1: room for a complement */
    c->el = (infer__gel *)infer__calloc((size_t)n_el, sizeof *c->el);
    c->rule_start = (int *)infer__calloc((size_t)n, sizeof(int));
    c->alt_first = (int *)infer__calloc((size_t)n + 1, sizeof(int));
    c->alt_pos = (int *)infer__calloc((size_t)n_alt, sizeof(int));
    c->set_first = (int *)infer__calloc((size_t)c->n_sets + 1, sizeof(int));
    c->ranges = (infer__grange *)infer__calloc((size_t)n_ranges + 1, sizeof *c->ranges);
    if (!c->el || !c->rule_start || !c->alt_first || !c->alt_pos || !c->set_first || !c->ranges) goto oom;
    n_el = n_alt = 0;
    for (r = 0; r < n; r++) {
        int len = (int)stbds_arrlen(g->rules[r].body);
        c->rule_start[r] = n_el;
        c->alt_first[r] = n_alt;
        c->alt_pos[n_alt++] = n_el;
        for (k = 0; k < len; k++) {
            c->el[n_el++] = g->rules[r].body[k];
            if (g->rules[r].body[k].type == INFER__GE_ALT) c->alt_pos[n_alt++] = n_el;
        }
        c->el[n_el].type = INFER__GE_END;
        c->el[n_el++].val = 0;
    }
    c->alt_first[n] = n_alt;
    /* character sets: sorted, merged, negated ones complemented */
    n_ranges = 0;
    for (s = 0; s < c->n_sets; s++) {
        infer__grange *in = g->sets[s].r;
        int m = (int)stbds_arrlen(in), first = n_ranges;
        if (m) qsort(in, (size_t)m, sizeof *in, infer__grange_cmp);
        c->set_first[s] = n_ranges;
        for (k = 0; k < m; k++) {
            if (n_ranges > first && in[k].lo <= c->ranges[n_ranges - 1].hi + 1) {
                if (in[k].hi > c->ranges[n_ranges - 1].hi) c->ranges[n_ranges - 1].hi = in[k].hi;
            } else c->ranges[n_ranges++] = in[k];
        }
        if (g->sets[s].neg) {
            uint32_t next = 0;
            int e = n_ranges, w = first;
            for (k = first; k < e; k++) {
                infer__grange cur = c->ranges[k];
                if (cur.lo > next) {
                    c->ranges[w].lo = next;
                    c->ranges[w++].hi = cur.lo - 1;
                }
                next = cur.hi + 1;
            }
            if (next <= 0x10FFFF) {
                c->ranges[w].lo = next;
                c->ranges[w++].hi = 0x10FFFF;
            }
            n_ranges = w;
        }
    }
    c->set_first[c->n_sets] = n_ranges;
    /* left recursion: a rule that reaches itself through rules that can
       match nothing would expand forever */
    nullable = (unsigned char *)infer__calloc((size_t)n, 2);
    if (!nullable) goto oom;
    state = nullable + n;
    bad = infer__gp_nullable(c, nullable) ? infer__gp_left_cycle(c, nullable, state) : -2;
    INFER_FREE(nullable);
    if (bad == -2) goto oom;
    if (bad >= 0) {
        const infer__gp_rule *b = &g->rules[bad];
        if (b->star)
            infer__gp_fail(g, b->at, "a repetition in rule '%s' repeats something that can match nothing",
                           g->rules[b->owner].name);
        else
            infer__gp_fail(g, g->rules[b->owner].at,
                           "rule '%s' is left-recursive (it reaches itself before matching a character)",
                           g->rules[b->owner].name);
        infer__grules_free(c);
        return NULL;
    }
    return c;
oom:
    infer__grules_free(c);
    if (!g->failed) infer__set_error(g->err, INFER_ERR_NOMEM, "grammar: out of memory");
    g->failed = 1;
    return NULL;
}

/* Parses GBNF text; NULL with err set (INFER_ERR_ARG: a one-line message
   naming the problem and where it is). */
static infer__grules *infer__gbnf_compile(const char *text, const char *root, infer_error *err) {
    infer__gp g;
    infer__grules *c = NULL;
    int i;
    memset(&g, 0, sizeof g);
    g.src = text;
    g.err = err;
    g.any_set = -1;
    g.rep.rule = g.group_rep.rule = -1;
    for (i = 0; i < 128; i++) g.ascii_set[i] = -1;
    infer__gp_grammar(&g);
    if (!g.failed) c = infer__gp_finish(&g, root ? root : "root");
    for (i = 0; i < (int)stbds_arrlen(g.rules); i++) {
        INFER_FREE(g.rules[i].name);
        stbds_arrfree(g.rules[i].body);
    }
    stbds_arrfree(g.rules);
    INFER_FREE(g.name_slot);
    for (i = 0; i < (int)stbds_arrlen(g.sets); i++) stbds_arrfree(g.sets[i].r);
    stbds_arrfree(g.sets);
    return c;
}
