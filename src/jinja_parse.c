/* jinja_parse.c - the Jinja interpreter's lexer and parser: a template's
   text to tokens (trim_blocks, lstrip_blocks, whitespace control) to a tree. */
#include "jinja.h"

/* ---- lexer ------------------------------------------------------------------------ */

enum {
    INFER__JT_EOF = 0,
    INFER__JT_TEXT,
    INFER__JT_VAR_BEGIN,
    INFER__JT_VAR_END,
    INFER__JT_BLOCK_BEGIN,
    INFER__JT_BLOCK_END,
    INFER__JT_NAME,
    INFER__JT_STRING,
    INFER__JT_INT,
    INFER__JT_FLOAT,
    INFER__JT_OP
};

static infer__jj_tok *infer__jj_emit(infer__jj_lex *L, int type, int line) {
    infer__jj_tok *t;
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        infer__jj_tok *toks = (infer__jj_tok *)infer__jj_alloc(L->r, cap * sizeof *toks);
        if (L->n) memcpy(toks, L->toks, L->n * sizeof *toks);
        L->toks = toks;
        L->cap = cap;
    }
    t = &L->toks[L->n++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->line = line;
    return t;
}

static int infer__jj_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int infer__jj_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int infer__jj_digit(char c) { return c >= '0' && c <= '9'; }

static int infer__jj_line_of(const char *src, const char *at) {
    int line = 1;
    for (; src < at; src++) line += *src == '\n';
    return line;
}

/* A string literal's body, Python's escapes decoded. */
static const char *infer__jj_lex_string(infer__jj_lex *L, const char *p, infer__jj_tok *t) {
    infer__jj_r *r = L->r;
    char q = *p++;
    infer__jj_buf b = {0, 0, 0};
    while (*p != q) {
        if (!*p) infer__jj_fail(r, "line %d: unterminated string literal", t->line);
        if (*p != '\\') {
            infer__jj_putc(r, &b, *p++);
            continue;
        }
        p++;
        switch (*p) {
        case 'n': infer__jj_putc(r, &b, '\n'); break;
        case 't': infer__jj_putc(r, &b, '\t'); break;
        case 'r': infer__jj_putc(r, &b, '\r'); break;
        case '\\': infer__jj_putc(r, &b, '\\'); break;
        case '\'': infer__jj_putc(r, &b, '\''); break;
        case '"': infer__jj_putc(r, &b, '"'); break;
        case 'a': infer__jj_putc(r, &b, '\a'); break;
        case 'b': infer__jj_putc(r, &b, '\b'); break;
        case 'f': infer__jj_putc(r, &b, '\f'); break;
        case 'v': infer__jj_putc(r, &b, '\v'); break;
        case '0': infer__jj_putc(r, &b, '\0'); break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
            int digits = *p == 'x' ? 2 : *p == 'u' ? 4 : 8, i, d;
            uint32_t cp = 0;
            for (i = 1; i <= digits; i++) {
                if ((d = infer__g_hex(p[i])) < 0) infer__jj_fail(r, "line %d: bad \\%c escape", t->line, *p);
                cp = cp << 4 | (uint32_t)d;
            }
            if (cp > 0x10ffff) infer__jj_fail(r, "line %d: bad \\%c escape", t->line, *p);
            infer__jj_put_utf8(r, &b, cp);
            p += digits;
            break;
        }
        case 0: infer__jj_fail(r, "line %d: unterminated string literal", t->line);
        default: /* Python keeps an unknown escape as it is */ infer__jj_putc(r, &b, '\\'); infer__jj_putc(r, &b, *p);
        }
        p++;
    }
    t->type = INFER__JT_STRING;
    t->val = infer__jj_buf_val(r, &b);
    return p + 1;
}

/* The tokens inside one {{ }} or {% %}; returns where the tag ends
   (after its closing), *strip_after set by a "-" before the closing. */
static const char *infer__jj_lex_tag(infer__jj_lex *L, const char *p, int block, int *strip_after, int *keep_after) {
    infer__jj_r *r = L->r;
    int depth = 0, line;
    static const char *ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
    for (;;) {
        size_t k;
        infer__jj_tok *t;
        while (infer__jj_space(*p)) p++;
        line = infer__jj_line_of(L->src, p);
        if (!*p) infer__jj_fail(r, "line %d: unclosed %s", line, block ? "{%" : "{{");
        if (depth == 0) {
            const char *close = block ? "%}" : "}}";
            if ((*p == '-' || *p == '+') && p[1] == close[0] && p[2] == close[1]) {
                *strip_after = *p == '-';
                *keep_after = *p == '+';
                infer__jj_emit(L, block ? INFER__JT_BLOCK_END : INFER__JT_VAR_END, line);
                return p + 3;
            }
            if (p[0] == close[0] && p[1] == close[1]) {
                infer__jj_emit(L, block ? INFER__JT_BLOCK_END : INFER__JT_VAR_END, line);
                return p + 2;
            }
        }
        t = infer__jj_emit(L, INFER__JT_OP, line);
        if (*p == '\'' || *p == '"') {
            p = infer__jj_lex_string(L, p, t);
            continue;
        }
        if (infer__jj_alpha(*p)) {
            t->type = INFER__JT_NAME;
            t->s = p;
            while (infer__jj_alpha(*p) || infer__jj_digit(*p)) p++;
            t->n = (size_t)(p - t->s);
            continue;
        }
        if (infer__jj_digit(*p)) {
            const char *s = p;
            char num[64];
            size_t n = 0;
            int is_float = 0;
            while (infer__jj_digit(*p) || *p == '_') p++;
            /* a fraction only where digits follow the dot, and never after "x." (x.0 is an item) */
            if (*p == '.' && infer__jj_digit(p[1]) && !(L->n >= 2 && t[-1].type == INFER__JT_OP && t[-1].s[0] == '.')) {
                is_float = 1;
                p++;
                while (infer__jj_digit(*p) || *p == '_') p++;
            }
            if ((*p == 'e' || *p == 'E') &&
                (infer__jj_digit(p[1]) || ((p[1] == '+' || p[1] == '-') && infer__jj_digit(p[2])))) {
                is_float = 1;
                p += 2;
                while (infer__jj_digit(*p) || *p == '_') p++;
            }
            for (; s < p && n < sizeof num - 1; s++)
                if (*s != '_') num[n++] = *s;
            num[n] = 0;
            if (is_float) {
                t->type = INFER__JT_FLOAT;
                t->val = infer__jj_float(strtod(num, NULL));
            } else {
                long long x;
                errno = 0;
                x = strtoll(num, NULL, 10);
                if (errno) infer__jj_fail(r, "line %d: integer literal too large", line);
                t->type = INFER__JT_INT;
                t->val = infer__jj_int(x);
            }
            continue;
        }
        for (k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            size_t n = strlen(ops[k]);
            if (!strncmp(p, ops[k], n)) {
                t->s = ops[k];
                t->n = n;
                p += n;
                break;
            }
        }
        if (k == sizeof ops / sizeof ops[0]) infer__jj_fail(r, "line %d: unexpected character '%c'", line, *p);
        if (t->s[0] == '(' || t->s[0] == '[' || t->s[0] == '{') depth++;
        if (t->s[0] == ')' || t->s[0] == ']' || t->s[0] == '}') {
            if (depth == 0) infer__jj_fail(r, "line %d: unexpected '%c'", line, t->s[0]);
            depth--;
        }
    }
}

static void infer__jj_tokenize(infer__jj_lex *L, const char *text) {
    infer__jj_r *r = L->r;
    size_t n = strlen(text), i, o = 0;
    char *src = (char *)infer__jj_alloc(r, n + 1);
    const char *p;
    int line_starting = 1;
    /* line endings normalised to \n; keep_trailing_newline=False drops one */
    for (i = 0; i < n; i++) {
        if (text[i] == '\r') {
            src[o++] = '\n';
            if (text[i + 1] == '\n') i++;
        } else
            src[o++] = text[i];
    }
    if (o && src[o - 1] == '\n') o--;
    src[o] = 0;
    L->src = src;
    p = src;
    for (;;) {
        const char *tag = p, *text_end;
        int kind = 0, strip_after = 0, keep_after = 0;
        while ((tag = strchr(tag, '{')) && tag[1] != '{' && tag[1] != '%' && tag[1] != '#') tag++;
        if (!tag) {
            if (*p) {
                infer__jj_tok *t = infer__jj_emit(L, INFER__JT_TEXT, infer__jj_line_of(src, p));
                t->val = infer__jj_str_val(r, p, strlen(p));
            }
            break;
        }
        kind = tag[1];
        text_end = tag;
        if (tag[2] == '-') {
            while (text_end > p && infer__jj_space(text_end[-1])) text_end--;
        } else if (kind != '{' && tag[2] != '+') {
            /* lstrip_blocks: only blanks between the line's start and the tag */
            const char *l = text_end;
            while (l > p && (l[-1] == ' ' || l[-1] == '\t')) l--;
            if ((l > p && l[-1] == '\n') || (l == p && line_starting)) text_end = l;
        }
        if (text_end > p) {
            infer__jj_tok *t = infer__jj_emit(L, INFER__JT_TEXT, infer__jj_line_of(src, p));
            t->val = infer__jj_str_val(r, p, (size_t)(text_end - p));
        }
        p = tag + 2;
        if (*p == '-' || *p == '+') p++;
        if (kind == '#') {
            const char *end = strstr(p, "#}");
            if (!end) infer__jj_fail(r, "line %d: unclosed comment", infer__jj_line_of(src, tag));
            strip_after = end > p && end[-1] == '-';
            keep_after = end > p && end[-1] == '+';
            p = end + 2;
        } else {
            infer__jj_emit(L, kind == '%' ? INFER__JT_BLOCK_BEGIN : INFER__JT_VAR_BEGIN, infer__jj_line_of(src, tag));
            p = infer__jj_lex_tag(L, p, kind == '%', &strip_after, &keep_after);
        }
        line_starting = 0;
        if (strip_after) {
            while (infer__jj_space(*p)) {
                line_starting = *p == '\n';
                p++;
            }
        } else if (kind != '{' && !keep_after && *p == '\n') { /* trim_blocks */
            p++;
            line_starting = 1;
        }
    }
    infer__jj_emit(L, INFER__JT_EOF, infer__jj_line_of(src, src + o));
}

/* ---- syntax tree ---------------------------------------------------------------- */

static infer__jj_node *infer__jj_node_new(infer__jj_parser *P, int kind, int n) {
    infer__jj_node *x = (infer__jj_node *)infer__jj_alloc(P->r, sizeof *x);
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->line = P->t->line;
    x->n = n;
    if (n) {
        x->kid = (infer__jj_node **)infer__jj_alloc(P->r, (size_t)n * sizeof *x->kid);
        memset(x->kid, 0, (size_t)n * sizeof *x->kid);
    }
    return x;
}

/* children grown one at a time (argument lists, bodies) */
static void infer__jj_node_add(infer__jj_parser *P, infer__jj_node *x, infer__jj_node *kid, infer__jj_str *name) {
    infer__jj_node **kids = (infer__jj_node **)infer__jj_alloc(P->r, (size_t)(x->n + 1) * sizeof *kids);
    infer__jj_str **names = (infer__jj_str **)infer__jj_alloc(P->r, (size_t)(x->n + 1) * sizeof *names);
    if (x->n) memcpy(kids, x->kid, (size_t)x->n * sizeof *kids);
    if (x->n && x->names)
        memcpy(names, x->names, (size_t)x->n * sizeof *names);
    else
        memset(names, 0, (size_t)(x->n + 1) * sizeof *names);
    kids[x->n] = kid;
    names[x->n] = name;
    x->kid = kids;
    x->names = names;
    x->n++;
}

static int infer__jj_is_op(const infer__jj_tok *t, const char *op) {
    return t->type == INFER__JT_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static int infer__jj_is_name(const infer__jj_tok *t, const char *name) {
    return t->type == INFER__JT_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static void infer__jj_syntax(infer__jj_parser *P, const char *what) {
    const infer__jj_tok *t = P->t;
    if (t->type == INFER__JT_NAME || t->type == INFER__JT_OP)
        infer__jj_fail(P->r, "line %d: syntax error: expected %s, got '%.*s'", t->line, what, (int)t->n, t->s);
    infer__jj_fail(P->r, "line %d: syntax error: expected %s", t->line, what);
}

static void infer__jj_expect_op(infer__jj_parser *P, const char *op) {
    if (!infer__jj_is_op(P->t, op)) {
        char what[16];
        snprintf(what, sizeof what, "'%s'", op);
        infer__jj_syntax(P, what);
    }
    P->t++;
}

static infer__jj_str *infer__jj_expect_name(infer__jj_parser *P) {
    infer__jj_str *s;
    if (P->t->type != INFER__JT_NAME) infer__jj_syntax(P, "a name");
    s = infer__jj_newstr(P->r, P->t->s, P->t->n);
    P->t++;
    return s;
}

static void infer__jj_enter(infer__jj_parser *P) {
    if (++P->depth > P->r->lim.max_depth)
        infer__jj_fail(P->r, "line %d: template nested deeper than %d", P->t->line, P->r->lim.max_depth);
}

static infer__jj_node *infer__jj_p_expr(infer__jj_parser *P);
static infer__jj_node *infer__jj_p_or(infer__jj_parser *P);
static infer__jj_node *infer__jj_p_unary(infer__jj_parser *P, int with_filter);
static infer__jj_node *infer__jj_p_primary(infer__jj_parser *P);
static infer__jj_node *infer__jj_p_postfix(infer__jj_parser *P, infer__jj_node *x);

/* (args) of a call, filter or test: positional and name=value */
static void infer__jj_p_args(infer__jj_parser *P, infer__jj_node *x) {
    infer__jj_expect_op(P, "(");
    while (!infer__jj_is_op(P->t, ")")) {
        if (P->t->type == INFER__JT_NAME && infer__jj_is_op(P->t + 1, "=")) {
            infer__jj_str *name = infer__jj_expect_name(P);
            P->t++;
            infer__jj_node_add(P, x, infer__jj_p_expr(P), name);
        } else {
            infer__jj_node_add(P, x, infer__jj_p_expr(P), NULL);
        }
        if (!infer__jj_is_op(P->t, ",")) break;
        P->t++;
    }
    infer__jj_expect_op(P, ")");
}

static infer__jj_node *infer__jj_p_filter(infer__jj_parser *P, infer__jj_node *x) {
    while (infer__jj_is_op(P->t, "|") || infer__jj_is_name(P->t, "is")) {
        if (infer__jj_is_op(P->t, "|")) {
            infer__jj_node *f = infer__jj_node_new(P, INFER__JN_FILTER, 0);
            P->t++;
            infer__jj_node_add(P, f, x, NULL);
            f->val.type = INFER__JJ_STR;
            f->val.u.s = infer__jj_expect_name(P);
            if (infer__jj_is_op(P->t, "(")) infer__jj_p_args(P, f);
            x = f;
        } else {
            infer__jj_node *f = infer__jj_node_new(P, INFER__JN_TEST, 0);
            P->t++;
            if (infer__jj_is_name(P->t, "not")) {
                f->op = 1;
                P->t++;
            }
            infer__jj_node_add(P, f, x, NULL);
            f->val.type = INFER__JJ_STR;
            f->val.u.s = infer__jj_expect_name(P); /* none, true, false are names here */
            if (infer__jj_is_op(P->t, "("))
                infer__jj_p_args(P, f);
            else if ((P->t->type == INFER__JT_NAME || P->t->type == INFER__JT_STRING || P->t->type == INFER__JT_INT ||
                      P->t->type == INFER__JT_FLOAT || infer__jj_is_op(P->t, "[") || infer__jj_is_op(P->t, "{")) &&
                     !infer__jj_is_name(P->t, "else") && !infer__jj_is_name(P->t, "or") &&
                     !infer__jj_is_name(P->t, "and") && !infer__jj_is_name(P->t, "if") &&
                     !infer__jj_is_name(P->t, "in") && !infer__jj_is_name(P->t, "is") &&
                     !infer__jj_is_name(P->t, "not") && !infer__jj_is_name(P->t, "for"))
                infer__jj_node_add(P, f, infer__jj_p_postfix(P, infer__jj_p_primary(P)), NULL);
            x = f;
        }
    }
    return x;
}

static infer__jj_node *infer__jj_p_primary(infer__jj_parser *P) {
    infer__jj_tok *t = P->t;
    infer__jj_node *x;
    if (t->type == INFER__JT_NAME) {
        P->t++;
        if (infer__jj_is_name(t, "true") || infer__jj_is_name(t, "True") || infer__jj_is_name(t, "false") ||
            infer__jj_is_name(t, "False")) {
            x = infer__jj_node_new(P, INFER__JN_LIT, 0);
            x->val = infer__jj_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (infer__jj_is_name(t, "none") || infer__jj_is_name(t, "None")) {
            x = infer__jj_node_new(P, INFER__JN_LIT, 0);
            x->val = infer__jj_none();
        } else {
            x = infer__jj_node_new(P, INFER__JN_NAME, 0);
            x->val.type = INFER__JJ_STR;
            x->val.u.s = infer__jj_newstr(P->r, t->s, t->n);
        }
        return x;
    }
    if (t->type == INFER__JT_STRING) { /* adjacent literals are one */
        infer__jj_buf b = {0, 0, 0};
        while (P->t->type == INFER__JT_STRING) {
            infer__jj_put(P->r, &b, P->t->val.u.s->s, P->t->val.u.s->len);
            P->t++;
        }
        x = infer__jj_node_new(P, INFER__JN_LIT, 0);
        x->val = infer__jj_buf_val(P->r, &b);
        return x;
    }
    if (t->type == INFER__JT_INT || t->type == INFER__JT_FLOAT) {
        P->t++;
        x = infer__jj_node_new(P, INFER__JN_LIT, 0);
        x->val = t->val;
        return x;
    }
    if (infer__jj_is_op(t, "(")) {
        infer__jj_node *first;
        P->t++;
        if (infer__jj_is_op(P->t, ")")) {
            P->t++;
            return infer__jj_node_new(P, INFER__JN_TUPLE, 0);
        }
        first = infer__jj_p_expr(P);
        if (infer__jj_is_op(P->t, ")")) {
            P->t++;
            return first;
        }
        x = infer__jj_node_new(P, INFER__JN_TUPLE, 0);
        infer__jj_node_add(P, x, first, NULL);
        while (infer__jj_is_op(P->t, ",")) {
            P->t++;
            if (infer__jj_is_op(P->t, ")")) break;
            infer__jj_node_add(P, x, infer__jj_p_expr(P), NULL);
        }
        infer__jj_expect_op(P, ")");
        return x;
    }
    if (infer__jj_is_op(t, "[")) {
        P->t++;
        x = infer__jj_node_new(P, INFER__JN_LIST, 0);
        while (!infer__jj_is_op(P->t, "]")) {
            infer__jj_node_add(P, x, infer__jj_p_expr(P), NULL);
            if (!infer__jj_is_op(P->t, ",")) break;
            P->t++;
        }
        infer__jj_expect_op(P, "]");
        return x;
    }
    if (infer__jj_is_op(t, "{")) {
        P->t++;
        x = infer__jj_node_new(P, INFER__JN_DICT, 0);
        while (!infer__jj_is_op(P->t, "}")) {
            infer__jj_node_add(P, x, infer__jj_p_expr(P), NULL);
            infer__jj_expect_op(P, ":");
            infer__jj_node_add(P, x, infer__jj_p_expr(P), NULL);
            if (!infer__jj_is_op(P->t, ",")) break;
            P->t++;
        }
        infer__jj_expect_op(P, "}");
        return x;
    }
    infer__jj_syntax(P, "an expression");
    return NULL;
}

static infer__jj_node *infer__jj_p_postfix(infer__jj_parser *P, infer__jj_node *x) {
    for (;;) {
        if (infer__jj_is_op(P->t, ".")) {
            infer__jj_node *a;
            P->t++;
            if (P->t->type == INFER__JT_INT) { /* x.0 is x[0] */
                a = infer__jj_node_new(P, INFER__JN_ITEM, 2);
                a->kid[0] = x;
                a->kid[1] = infer__jj_node_new(P, INFER__JN_LIT, 0);
                a->kid[1]->val = P->t->val;
                P->t++;
            } else {
                a = infer__jj_node_new(P, INFER__JN_ATTR, 1);
                a->kid[0] = x;
                a->val.type = INFER__JJ_STR;
                a->val.u.s = infer__jj_expect_name(P);
            }
            x = a;
        } else if (infer__jj_is_op(P->t, "[")) {
            infer__jj_node *parts[3] = {NULL, NULL, NULL}, *a;
            int k = 0, is_slice = 0;
            P->t++;
            for (;;) {
                if (!infer__jj_is_op(P->t, ":") && !infer__jj_is_op(P->t, "]")) parts[k] = infer__jj_p_expr(P);
                if (infer__jj_is_op(P->t, ":") && k < 2) {
                    is_slice = 1;
                    k++;
                    P->t++;
                    continue;
                }
                break;
            }
            infer__jj_expect_op(P, "]");
            if (is_slice) {
                a = infer__jj_node_new(P, INFER__JN_SLICE, 4);
                a->kid[1] = parts[0];
                a->kid[2] = parts[1];
                a->kid[3] = parts[2];
            } else {
                if (!parts[0]) infer__jj_syntax(P, "a subscript");
                a = infer__jj_node_new(P, INFER__JN_ITEM, 2);
                a->kid[1] = parts[0];
            }
            a->kid[0] = x;
            x = a;
        } else if (infer__jj_is_op(P->t, "(")) {
            infer__jj_node *c = infer__jj_node_new(P, INFER__JN_CALL, 0);
            infer__jj_node_add(P, c, x, NULL);
            infer__jj_p_args(P, c);
            x = c;
        } else
            return x;
    }
}

static infer__jj_node *infer__jj_p_unary(infer__jj_parser *P, int with_filter) {
    infer__jj_node *x;
    infer__jj_enter(P);
    if (infer__jj_is_op(P->t, "-") || infer__jj_is_op(P->t, "+")) {
        x = infer__jj_node_new(P, P->t->s[0] == '-' ? INFER__JN_NEG : INFER__JN_POS, 1);
        P->t++;
        x->kid[0] = infer__jj_p_unary(P, 0);
    } else {
        x = infer__jj_p_postfix(P, infer__jj_p_primary(P));
    }
    if (with_filter) x = infer__jj_p_filter(P, x);
    P->depth--;
    return x;
}

static infer__jj_node *infer__jj_bin(infer__jj_parser *P, int kind, int op, infer__jj_node *a, infer__jj_node *b) {
    infer__jj_node *x = infer__jj_node_new(P, kind, 2);
    x->op = op;
    x->kid[0] = a;
    x->kid[1] = b;
    return x;
}

static infer__jj_node *infer__jj_p_pow(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_unary(P, 1);
    while (infer__jj_is_op(P->t, "**")) {
        P->t++;
        x = infer__jj_bin(P, INFER__JN_BIN, INFER__JOP_POW, x, infer__jj_p_unary(P, 1));
    }
    return x;
}

static infer__jj_node *infer__jj_p_math2(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_pow(P);
    for (;;) {
        int op = infer__jj_is_op(P->t, "*")    ? INFER__JOP_MUL
                 : infer__jj_is_op(P->t, "/")  ? INFER__JOP_DIV
                 : infer__jj_is_op(P->t, "//") ? INFER__JOP_FLOORDIV
                 : infer__jj_is_op(P->t, "%")  ? INFER__JOP_MOD
                                               : 0;
        if (!op) return x;
        P->t++;
        x = infer__jj_bin(P, INFER__JN_BIN, op, x, infer__jj_p_pow(P));
    }
}

static infer__jj_node *infer__jj_p_concat(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_math2(P), *c;
    if (!infer__jj_is_op(P->t, "~")) return x;
    c = infer__jj_node_new(P, INFER__JN_CONCAT, 0);
    infer__jj_node_add(P, c, x, NULL);
    while (infer__jj_is_op(P->t, "~")) {
        P->t++;
        infer__jj_node_add(P, c, infer__jj_p_math2(P), NULL);
    }
    return c;
}

static infer__jj_node *infer__jj_p_math1(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_concat(P);
    for (;;) {
        int op = infer__jj_is_op(P->t, "+") ? INFER__JOP_ADD : infer__jj_is_op(P->t, "-") ? INFER__JOP_SUB : 0;
        if (!op) return x;
        P->t++;
        x = infer__jj_bin(P, INFER__JN_BIN, op, x, infer__jj_p_concat(P));
    }
}

static infer__jj_node *infer__jj_p_compare(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_math1(P), *chain = NULL;
    for (;;) {
        int op;
        infer__jj_tok *t = P->t;
        if (infer__jj_is_op(t, "=="))
            op = INFER__JOP_EQ;
        else if (infer__jj_is_op(t, "!="))
            op = INFER__JOP_NE;
        else if (infer__jj_is_op(t, "<"))
            op = INFER__JOP_LT;
        else if (infer__jj_is_op(t, "<="))
            op = INFER__JOP_LE;
        else if (infer__jj_is_op(t, ">"))
            op = INFER__JOP_GT;
        else if (infer__jj_is_op(t, ">="))
            op = INFER__JOP_GE;
        else if (infer__jj_is_name(t, "in"))
            op = INFER__JOP_IN;
        else if (infer__jj_is_name(t, "not") && infer__jj_is_name(t + 1, "in")) {
            op = INFER__JOP_NOTIN;
            P->t++;
        } else
            break;
        P->t++;
        /* a < b < c is (a < b) and (b < c), b evaluated twice (it has no side effects here) */
        {
            infer__jj_node *left = chain ? chain->kid[1] : x,
                           *cmp = infer__jj_bin(P, INFER__JN_CMP, op, left, infer__jj_p_math1(P));
            if (!chain)
                x = cmp;
            else
                x = infer__jj_bin(P, INFER__JN_AND, 0, x, cmp);
            chain = cmp;
        }
    }
    return x;
}

static infer__jj_node *infer__jj_p_not(infer__jj_parser *P) {
    infer__jj_node *x;
    if (infer__jj_is_name(P->t, "not")) {
        infer__jj_enter(P);
        P->t++;
        x = infer__jj_node_new(P, INFER__JN_NOT, 1);
        x->kid[0] = infer__jj_p_not(P);
        P->depth--;
        return x;
    }
    return infer__jj_p_compare(P);
}

static infer__jj_node *infer__jj_p_and(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_not(P);
    while (infer__jj_is_name(P->t, "and")) {
        P->t++;
        x = infer__jj_bin(P, INFER__JN_AND, 0, x, infer__jj_p_not(P));
    }
    return x;
}

static infer__jj_node *infer__jj_p_or(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_and(P);
    while (infer__jj_is_name(P->t, "or")) {
        P->t++;
        x = infer__jj_bin(P, INFER__JN_OR, 0, x, infer__jj_p_and(P));
    }
    return x;
}

static infer__jj_node *infer__jj_p_expr(infer__jj_parser *P) {
    infer__jj_node *x;
    infer__jj_enter(P);
    x = infer__jj_p_or(P);
    while (infer__jj_is_name(P->t, "if")) {
        infer__jj_node *c = infer__jj_node_new(P, INFER__JN_COND, 3);
        P->t++;
        c->kid[0] = x;
        c->kid[1] = infer__jj_p_or(P);
        if (infer__jj_is_name(P->t, "else")) {
            P->t++;
            c->kid[2] = infer__jj_p_expr(P);
        }
        x = c;
    }
    P->depth--;
    return x;
}

/* an expression, or a tuple of them without parentheses (a, b) */
static infer__jj_node *infer__jj_p_tuple(infer__jj_parser *P) {
    infer__jj_node *x = infer__jj_p_expr(P), *t;
    if (!infer__jj_is_op(P->t, ",")) return x;
    t = infer__jj_node_new(P, INFER__JN_TUPLE, 0);
    infer__jj_node_add(P, t, x, NULL);
    while (infer__jj_is_op(P->t, ",")) {
        P->t++;
        if (P->t->type == INFER__JT_BLOCK_END || P->t->type == INFER__JT_VAR_END) break;
        infer__jj_node_add(P, t, infer__jj_p_expr(P), NULL);
    }
    return t;
}

/* assignment targets: name, name.attr, or names separated by commas */
static infer__jj_node *infer__jj_p_target(infer__jj_parser *P, int allow_attr) {
    infer__jj_node *x = infer__jj_node_new(P, INFER__JN_NAME, 0), *t;
    x->val.type = INFER__JJ_STR;
    x->val.u.s = infer__jj_expect_name(P);
    if (allow_attr && infer__jj_is_op(P->t, ".")) {
        infer__jj_node *a = infer__jj_node_new(P, INFER__JN_ATTR, 1);
        P->t++;
        a->kid[0] = x;
        a->val.type = INFER__JJ_STR;
        a->val.u.s = infer__jj_expect_name(P);
        return a;
    }
    if (!infer__jj_is_op(P->t, ",")) return x;
    t = infer__jj_node_new(P, INFER__JN_TUPLE, 0);
    infer__jj_node_add(P, t, x, NULL);
    while (infer__jj_is_op(P->t, ",")) {
        infer__jj_node *y = infer__jj_node_new(P, INFER__JN_NAME, 0);
        P->t++;
        y->val.type = INFER__JJ_STR;
        y->val.u.s = infer__jj_expect_name(P);
        infer__jj_node_add(P, t, y, NULL);
    }
    return t;
}

static void infer__jj_block_end(infer__jj_parser *P) {
    if (P->t->type != INFER__JT_BLOCK_END) infer__jj_syntax(P, "'%}'");
    P->t++;
}

/* statements up to one of the block tags in ends (NULL-terminated), which
   is left as the current token (its name); at the top level ends is NULL */
static infer__jj_node *infer__jj_p_body(infer__jj_parser *P, const char *const *ends);

static const char *infer__jj_p_until(infer__jj_parser *P, infer__jj_node **body, const char *const *ends) {
    const char *const *e;
    *body = infer__jj_p_body(P, ends);
    for (e = ends; *e; e++)
        if (infer__jj_is_name(P->t, *e)) {
            P->t++;
            return *e;
        }
    return NULL;
}

static infer__jj_node *infer__jj_p_if(infer__jj_parser *P) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    infer__jj_node *x = infer__jj_node_new(P, INFER__JS_IF, 3);
    const char *end;
    x->kid[0] = infer__jj_p_tuple(P);
    infer__jj_block_end(P);
    end = infer__jj_p_until(P, &x->kid[1], ends);
    if (!strcmp(end, "elif")) {
        x->kid[2] = infer__jj_p_if(P);
        return x;
    }
    if (!strcmp(end, "else")) {
        static const char *const endif[] = {"endif", NULL};
        infer__jj_block_end(P);
        infer__jj_p_until(P, &x->kid[2], endif);
    }
    infer__jj_block_end(P);
    return x;
}

static infer__jj_node *infer__jj_p_statement(infer__jj_parser *P) {
    infer__jj_tok *t = P->t;
    infer__jj_node *x;
    if (infer__jj_is_name(t, "if")) {
        P->t++;
        return infer__jj_p_if(P);
    }
    if (infer__jj_is_name(t, "for")) {
        static const char *const ends[] = {"else", "endfor", NULL};
        /* kids: target, iterable, body, else body, filter */
        x = infer__jj_node_new(P, INFER__JS_FOR, 5);
        P->t++;
        x->kid[0] = infer__jj_p_target(P, 0);
        if (!infer__jj_is_name(P->t, "in")) infer__jj_syntax(P, "'in'");
        P->t++;
        x->kid[1] = infer__jj_p_or(P); /* "if" here filters, never a conditional expression */
        if (infer__jj_is_name(P->t, "if")) {
            P->t++;
            x->kid[4] = infer__jj_p_expr(P);
        }
        if (infer__jj_is_name(P->t, "recursive"))
            infer__jj_fail(P->r, "line %d: recursive loops are not supported", t->line);
        infer__jj_block_end(P);
        if (!strcmp(infer__jj_p_until(P, &x->kid[2], ends), "else")) {
            static const char *const endfor[] = {"endfor", NULL};
            infer__jj_block_end(P);
            infer__jj_p_until(P, &x->kid[3], endfor);
        }
        infer__jj_block_end(P);
        return x;
    }
    if (infer__jj_is_name(t, "set")) {
        infer__jj_node *target;
        P->t++;
        target = infer__jj_p_target(P, 1);
        if (infer__jj_is_op(P->t, "=")) {
            x = infer__jj_node_new(P, INFER__JS_SET, 2);
            P->t++;
            x->kid[0] = target;
            x->kid[1] = infer__jj_p_tuple(P);
            infer__jj_block_end(P);
            return x;
        } else {
            static const char *const ends[] = {"endset", NULL};
            /* kids: target, body, filter (its input NULL) */
            x = infer__jj_node_new(P, INFER__JS_SETBLOCK, 3);
            x->kid[0] = target;
            if (infer__jj_is_op(P->t, "|")) x->kid[2] = infer__jj_p_filter(P, NULL);
            infer__jj_block_end(P);
            infer__jj_p_until(P, &x->kid[1], ends);
            infer__jj_block_end(P);
            return x;
        }
    }
    if (infer__jj_is_name(t, "macro")) {
        static const char *const ends[] = {"endmacro", NULL};
        /* kids: body, then the parameters' defaults (NULL: none) */
        x = infer__jj_node_new(P, INFER__JS_MACRO, 0);
        P->t++;
        x->val.type = INFER__JJ_STR;
        x->val.u.s = infer__jj_expect_name(P);
        infer__jj_node_add(P, x, NULL, NULL);
        infer__jj_expect_op(P, "(");
        while (!infer__jj_is_op(P->t, ")")) {
            infer__jj_str *name = infer__jj_expect_name(P);
            infer__jj_node *def = NULL;
            if (infer__jj_is_op(P->t, "=")) {
                P->t++;
                def = infer__jj_p_expr(P);
            }
            infer__jj_node_add(P, x, def, name);
            if (!infer__jj_is_op(P->t, ",")) break;
            P->t++;
        }
        infer__jj_expect_op(P, ")");
        infer__jj_block_end(P);
        infer__jj_p_until(P, &x->kid[0], ends);
        if (P->t->type == INFER__JT_NAME) P->t++; /* {% endmacro name %} */
        infer__jj_block_end(P);
        return x;
    }
    if (infer__jj_is_name(t, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        x = infer__jj_node_new(P, INFER__JS_FILTERBLOCK, 2);
        {
            /* "name(args) | name2 ...": a filter chain on no input ("filter" stands for the first "|") */
            infer__jj_node *f = infer__jj_node_new(P, INFER__JN_FILTER, 0);
            P->t++;
            infer__jj_node_add(P, f, NULL, NULL);
            f->val.type = INFER__JJ_STR;
            f->val.u.s = infer__jj_expect_name(P);
            if (infer__jj_is_op(P->t, "(")) infer__jj_p_args(P, f);
            x->kid[1] = infer__jj_p_filter(P, f);
        }
        infer__jj_block_end(P);
        infer__jj_p_until(P, &x->kid[0], ends);
        infer__jj_block_end(P);
        return x;
    }
    if (infer__jj_is_name(t, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        P->t++;
        infer__jj_block_end(P);
        infer__jj_p_until(P, &x, ends);
        infer__jj_block_end(P);
        return x;
    }
    if (infer__jj_is_name(t, "break") || infer__jj_is_name(t, "continue")) {
        x = infer__jj_node_new(P, t->s[0] == 'b' ? INFER__JS_BREAK : INFER__JS_CONTINUE, 0);
        P->t++;
        infer__jj_block_end(P);
        return x;
    }
    if (t->type == INFER__JT_NAME)
        infer__jj_fail(P->r, "line %d: unknown or unsupported tag '%.*s'", t->line, (int)t->n, t->s);
    infer__jj_syntax(P, "a statement");
    return NULL;
}

static infer__jj_node *infer__jj_p_body(infer__jj_parser *P, const char *const *ends) {
    infer__jj_node *body = infer__jj_node_new(P, INFER__JS_BODY, 0);
    infer__jj_enter(P);
    for (;;) {
        infer__jj_tok *t = P->t;
        if (t->type == INFER__JT_EOF) {
            if (ends) infer__jj_fail(P->r, "line %d: missing {%% %s %%}", t->line, ends[0]);
            break;
        }
        if (t->type == INFER__JT_TEXT) {
            infer__jj_node *x = infer__jj_node_new(P, INFER__JS_TEXT, 0);
            x->val = t->val;
            P->t++;
            infer__jj_node_add(P, body, x, NULL);
        } else if (t->type == INFER__JT_VAR_BEGIN) {
            infer__jj_node *x = infer__jj_node_new(P, INFER__JS_OUT, 1);
            P->t++;
            x->kid[0] = infer__jj_p_tuple(P);
            if (P->t->type != INFER__JT_VAR_END) infer__jj_syntax(P, "'}}'");
            P->t++;
            infer__jj_node_add(P, body, x, NULL);
        } else if (t->type == INFER__JT_BLOCK_BEGIN) {
            const char *const *e;
            P->t++;
            if (ends)
                for (e = ends; *e; e++)
                    if (infer__jj_is_name(P->t, *e)) {
                        P->depth--;
                        return body;
                    }
            infer__jj_node_add(P, body, infer__jj_p_statement(P), NULL);
        } else
            infer__jj_syntax(P, "text or a tag");
    }
    P->depth--;
    return body;
}
