/* jinja_builtin.c - the Jinja interpreter's operations on values: scopes,
   iteration, operators, builtin calls and methods, tests and filters. */
#include "jinja.h"

/* ---- evaluation ---------------------------------------------------------------------- */

static const char *infer__jj_memmem(infer__jj_r *r, const char *h, size_t hn, const char *n, size_t nn);

static void infer__jj_step(infer__jj_r *r) {
    if (++r->steps > r->lim.max_steps)
        infer__jj_fail(r, "step limit exceeded (%lld loop iterations and calls)", (long long)r->lim.max_steps);
}

static infer__jj_val infer__jj_lookup(infer__jj_scope *s, infer__jj_str *name) {
    for (; s; s = s->parent) {
        long i = infer__jj_dict_find_s(s->vars, name->s, name->len);
        if (i >= 0) return s->vars->v[i];
    }
    return infer__jj_undef(name);
}

static void infer__jj_assign(infer__jj_r *r, infer__jj_scope *s, infer__jj_str *name, infer__jj_val v) {
    infer__jj_val k;
    k.type = INFER__JJ_STR;
    k.flags = 0;
    k.u.s = name;
    infer__jj_dict_set(r, s->vars, k, v);
}

static infer__jj_scope *infer__jj_new_scope(infer__jj_r *r, infer__jj_scope *parent) {
    infer__jj_scope *s = (infer__jj_scope *)infer__jj_alloc(r, sizeof *s);
    s->parent = parent;
    s->vars = infer__jj_new_dict(r, INFER__JJ_DICT).u.d;
    return s;
}

/* UTF-8 code points: count, and the byte offset of the i-th */
static size_t infer__jj_cp_count(infer__jj_r *r, const infer__jj_str *s) {
    size_t i, n = 0;
    infer__jj_work(r, 0, s->len);
    for (i = 0; i < s->len; i++) n += ((unsigned char)s->s[i] & 0xc0) != 0x80;
    return n;
}
static size_t infer__jj_cp_offset(infer__jj_r *r, const infer__jj_str *s, size_t cp) {
    size_t i, n = 0;
    infer__jj_work(r, 0, s->len);
    for (i = 0; i < s->len; i++)
        if (((unsigned char)s->s[i] & 0xc0) != 0x80) {
            if (n == cp) return i;
            n++;
        }
    return s->len;
}

static void infer__jj_undef_fail(infer__jj_r *r, const infer__jj_val *v, const char *what) {
    if (v->u.s) infer__jj_fail(r, "UndefinedError: '%s' is undefined (%s)", v->u.s->s, what);
    infer__jj_fail(r, "UndefinedError: undefined value (%s)", what);
}

/* the items a value iterates over (dict: keys; str: characters) */
static infer__jj_list *infer__jj_iter(infer__jj_r *r, const infer__jj_val *v) {
    infer__jj_val l;
    size_t i;
    switch (v->type) {
    case INFER__JJ_LIST: return v->u.l;
    case INFER__JJ_UNDEF: return infer__jj_new_list(r, 0, 0).u.l;
    case INFER__JJ_DICT:
        l = infer__jj_new_list(r, v->u.d->n, 0);
        for (i = 0; i < v->u.d->n; i++) l.u.l->v[i] = v->u.d->k[i];
        l.u.l->n = v->u.d->n;
        return l.u.l;
    case INFER__JJ_STR: {
        const infer__jj_str *s = v->u.s;
        l = infer__jj_new_list(r, infer__jj_cp_count(r, s), 0);
        for (i = 0; i < s->len;) {
            size_t j = i + 1;
            while (j < s->len && ((unsigned char)s->s[j] & 0xc0) == 0x80) j++;
            l.u.l->v[l.u.l->n++] = infer__jj_str_val(r, s->s + i, j - i);
            i = j;
        }
        return l.u.l;
    }
    default: infer__jj_fail(r, "TypeError: '%s' object is not iterable", infer__jj_type_name(v));
    }
    return NULL;
}

static int64_t infer__jj_length(infer__jj_r *r, const infer__jj_val *v) {
    switch (v->type) {
    case INFER__JJ_UNDEF: return 0;
    case INFER__JJ_STR: return (int64_t)infer__jj_cp_count(r, v->u.s);
    case INFER__JJ_LIST:
        if (v->flags & INFER__JJ_LAZY) infer__jj_fail(r, "TypeError: object of type 'generator' has no len()");
        return (int64_t)v->u.l->n;
    case INFER__JJ_DICT: return (int64_t)v->u.d->n;
    default: infer__jj_fail(r, "TypeError: object of type '%s' has no len()", infer__jj_type_name(v));
    }
    return 0;
}

static int infer__jj_contains(infer__jj_r *r, const infer__jj_val *hay, const infer__jj_val *needle) {
    size_t i;
    if (hay->type == INFER__JJ_STR) infer__jj_work(r, 0, hay->u.s->len);
    if (hay->type == INFER__JJ_LIST) infer__jj_work(r, hay->u.l->n, 0);
    switch (hay->type) {
    case INFER__JJ_STR:
        if (needle->type != INFER__JJ_STR)
            infer__jj_fail(r, "TypeError: 'in <string>' requires string as left operand, not %s",
                           infer__jj_type_name(needle));
        return infer__jj_memmem(r, hay->u.s->s, hay->u.s->len, needle->u.s->s, needle->u.s->len) != NULL;
    case INFER__JJ_LIST:
        for (i = 0; i < hay->u.l->n; i++)
            if (infer__jj_equal(r, &hay->u.l->v[i], needle)) return 1;
        return 0;
    case INFER__JJ_DICT: return infer__jj_dict_find(r, hay->u.d, needle) >= 0;
    case INFER__JJ_UNDEF: return 0;
    default: infer__jj_fail(r, "TypeError: argument of type '%s' is not iterable", infer__jj_type_name(hay));
    }
    return 0;
}

static infer__jj_val infer__jj_escape(infer__jj_r *r, const infer__jj_val *v) {
    infer__jj_buf b = {0, 0, 0};
    infer__jj_str *s;
    size_t i;
    infer__jj_val out;
    if (v->type == INFER__JJ_STR && (v->flags & INFER__JJ_MARKUP)) return *v;
    s = infer__jj_to_str(r, v);
    for (i = 0; i < s->len; i++) {
        switch (s->s[i]) {
        case '&': infer__jj_puts(r, &b, "&amp;"); break;
        case '<': infer__jj_puts(r, &b, "&lt;"); break;
        case '>': infer__jj_puts(r, &b, "&gt;"); break;
        case '"': infer__jj_puts(r, &b, "&#34;"); break;
        case '\'': infer__jj_puts(r, &b, "&#39;"); break;
        default: infer__jj_putc(r, &b, s->s[i]);
        }
    }
    out = infer__jj_buf_val(r, &b);
    out.flags = INFER__JJ_MARKUP;
    return out;
}

static infer__jj_val infer__jj_concat2(infer__jj_r *r, const infer__jj_str *a, const infer__jj_str *b) {
    infer__jj_val v;
    if (a->len + b->len > r->lim.max_output || a->len + b->len < a->len)
        infer__jj_fail(r, "string longer than the output limit (%zu bytes)", r->lim.max_output);
    v.type = INFER__JJ_STR;
    v.flags = 0;
    v.u.s = (infer__jj_str *)infer__jj_alloc(r, sizeof *v.u.s + a->len + b->len);
    v.u.s->len = a->len + b->len;
    memcpy(v.u.s->s, a->s, a->len);
    memcpy(v.u.s->s + a->len, b->s, b->len);
    v.u.s->s[v.u.s->len] = 0;
    return v;
}

static int64_t infer__jj_floordiv_i(infer__jj_r *r, int64_t a, int64_t b) {
    int64_t q;
    if (!b) infer__jj_fail(r, "ZeroDivisionError: integer division or modulo by zero");
    if (a == INT64_MIN && b == -1) infer__jj_fail(r, "OverflowError: integer overflow");
    q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

static infer__jj_val infer__jj_repeat(infer__jj_r *r, const infer__jj_val *seq, int64_t n) {
    int64_t i;
    if (n < 0) n = 0;
    if (seq->type == INFER__JJ_STR) {
        infer__jj_buf b = {0, 0, 0};
        if (n && seq->u.s->len && (uint64_t)n > r->lim.max_output / seq->u.s->len)
            infer__jj_fail(r, "string longer than the output limit (%zu bytes)", r->lim.max_output);
        for (i = 0; i < n; i++) infer__jj_put(r, &b, seq->u.s->s, seq->u.s->len);
        return infer__jj_buf_val(r, &b);
    } else {
        infer__jj_val l;
        size_t k;
        if (seq->u.l->n && (uint64_t)n > r->lim.max_memory / sizeof(infer__jj_val) / seq->u.l->n)
            infer__jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
        l = infer__jj_new_list(r, (size_t)n * seq->u.l->n, seq->flags & INFER__JJ_TUPLE);
        for (i = 0; i < n; i++)
            for (k = 0; k < seq->u.l->n; k++) l.u.l->v[l.u.l->n++] = seq->u.l->v[k];
        return l;
    }
}

static infer__jj_val infer__jj_binop(infer__jj_r *r, int op, infer__jj_val a, infer__jj_val b) {
    static const char *names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    if (a.type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, &a, names[op]);
    if (b.type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, &b, names[op]);
    if (infer__jj_is_num(&a) && infer__jj_is_num(&b)) {
        int ints = a.type != INFER__JJ_FLOAT && b.type != INFER__JJ_FLOAT;
        double x = infer__jj_num(&a), y = infer__jj_num(&b);
        switch (op) {
        case INFER__JOP_ADD:
            return ints ? infer__jj_int((int64_t)((uint64_t)a.u.i + (uint64_t)b.u.i)) : infer__jj_float(x + y);
        case INFER__JOP_SUB:
            return ints ? infer__jj_int((int64_t)((uint64_t)a.u.i - (uint64_t)b.u.i)) : infer__jj_float(x - y);
        case INFER__JOP_MUL:
            return ints ? infer__jj_int((int64_t)((uint64_t)a.u.i * (uint64_t)b.u.i)) : infer__jj_float(x * y);
        case INFER__JOP_DIV:
            if (y == 0) infer__jj_fail(r, "ZeroDivisionError: division by zero");
            return infer__jj_float(x / y);
        case INFER__JOP_FLOORDIV:
            if (ints) return infer__jj_int(infer__jj_floordiv_i(r, a.u.i, b.u.i));
            if (y == 0) infer__jj_fail(r, "ZeroDivisionError: float floor division by zero");
            return infer__jj_float(floor(x / y));
        case INFER__JOP_MOD:
            if (ints) return infer__jj_int(a.u.i - infer__jj_floordiv_i(r, a.u.i, b.u.i) * b.u.i);
            if (y == 0) infer__jj_fail(r, "ZeroDivisionError: float modulo");
            {
                double m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return infer__jj_float(m);
            }
        case INFER__JOP_POW:
            if (ints && b.u.i >= 0) {
                int64_t res = 1, base = a.u.i, e = b.u.i;
                while (e-- > 0) {
                    res = (int64_t)((uint64_t)res * (uint64_t)base);
                    if (e > 64 && (base == 0 || base == 1)) break;
                    if (e > 64 && base != -1) infer__jj_fail(r, "OverflowError: integer power too large");
                    infer__jj_step(r);
                }
                return infer__jj_int(res);
            }
            return infer__jj_float(pow(x, y));
        }
    }
    if (op == INFER__JOP_ADD) {
        if (a.type == INFER__JJ_STR && b.type == INFER__JJ_STR) {
            if ((a.flags | b.flags) & INFER__JJ_MARKUP) { /* markup + str escapes the str */
                infer__jj_val ea = infer__jj_escape(r, &a), eb = infer__jj_escape(r, &b),
                              v = infer__jj_concat2(r, ea.u.s, eb.u.s);
                v.flags = INFER__JJ_MARKUP;
                return v;
            }
            return infer__jj_concat2(r, a.u.s, b.u.s);
        }
        if (a.type == INFER__JJ_LIST && b.type == INFER__JJ_LIST && !((a.flags | b.flags) & INFER__JJ_LAZY) &&
            (a.flags & INFER__JJ_TUPLE) == (b.flags & INFER__JJ_TUPLE)) {
            infer__jj_val l = infer__jj_new_list(r, a.u.l->n + b.u.l->n, a.flags & INFER__JJ_TUPLE);
            if (a.u.l->n) memcpy(l.u.l->v, a.u.l->v, a.u.l->n * sizeof(infer__jj_val));
            if (b.u.l->n) memcpy(l.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(infer__jj_val));
            l.u.l->n = a.u.l->n + b.u.l->n;
            return l;
        }
    }
    if (op == INFER__JOP_MUL) {
        if ((a.type == INFER__JJ_STR || (a.type == INFER__JJ_LIST && !(a.flags & INFER__JJ_LAZY))) &&
            (b.type == INFER__JJ_INT || b.type == INFER__JJ_BOOL))
            return infer__jj_repeat(r, &a, b.u.i);
        if ((b.type == INFER__JJ_STR || (b.type == INFER__JJ_LIST && !(b.flags & INFER__JJ_LAZY))) &&
            (a.type == INFER__JJ_INT || a.type == INFER__JJ_BOOL))
            return infer__jj_repeat(r, &b, a.u.i);
    }
    if (op == INFER__JOP_MOD && a.type == INFER__JJ_STR)
        infer__jj_fail(r, "unsupported: printf-style string formatting");
    infer__jj_fail(r, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'", names[op],
                   infer__jj_type_name(&a), infer__jj_type_name(&b));
    return a;
}

/* ---- builtin calls ---------------------------------------------------------------------- */

/* argument i, or keyword name, or NULL */
static const infer__jj_val *infer__jj_arg(const infer__jj_args *a, int i, const char *name) {
    int k;
    if (i >= 0 && i < a->npos) return &a->pos[i];
    if (name)
        for (k = 0; k < a->nkw; k++)
            if (!strcmp(a->kwn[k]->s, name)) return &a->kwv[k];
    return NULL;
}

static const infer__jj_str *infer__jj_arg_str(infer__jj_r *r, const infer__jj_args *a, int i, const char *name,
                                              const char *what) {
    const infer__jj_val *v = infer__jj_arg(a, i, name);
    if (!v || v->type == INFER__JJ_NONE) return NULL;
    if (v->type != INFER__JJ_STR)
        infer__jj_fail(r, "TypeError: %s: expected a string argument, got %s", what, infer__jj_type_name(v));
    return v->u.s;
}

static int64_t infer__jj_arg_int(infer__jj_r *r, const infer__jj_args *a, int i, const char *name, int64_t def,
                                 const char *what) {
    const infer__jj_val *v = infer__jj_arg(a, i, name);
    if (!v || v->type == INFER__JJ_NONE) return def;
    if (v->type != INFER__JJ_INT && v->type != INFER__JJ_BOOL)
        infer__jj_fail(r, "TypeError: %s: expected an integer argument, got %s", what, infer__jj_type_name(v));
    return v->u.i;
}

static infer__jj_val infer__jj_func_val(infer__jj_r *r, const char *name, infer__jj_val self) {
    infer__jj_val v;
    v.type = INFER__JJ_FUNC;
    v.flags = 0;
    v.u.fn = (infer__jj_func *)infer__jj_alloc(r, sizeof *v.u.fn);
    v.u.fn->name = name;
    v.u.fn->self = self;
    return v;
}

static int infer__jj_is_ws_char(char c) {
    return infer__jj_space(c) || c == '\x1c' || c == '\x1d' || c == '\x1e' || c == '\x1f';
}

/* str.strip family: which 1 left, 2 right, 3 both */
static infer__jj_val infer__jj_strip(infer__jj_r *r, const infer__jj_val *self, const infer__jj_str *chars, int which) {
    infer__jj_work(r, 0, chars ? self->u.s->len * chars->len : 0);
    const infer__jj_str *s = self->u.s;
    size_t b = 0, e = s->len;
    infer__jj_val v;
#define INFER__JJ_STRIPPABLE(c) (chars ? memchr(chars->s, (c), chars->len) != NULL : infer__jj_is_ws_char(c))
    if (which & 1)
        while (b < e && INFER__JJ_STRIPPABLE(s->s[b])) b++;
    if (which & 2)
        while (e > b && INFER__JJ_STRIPPABLE(s->s[e - 1])) e--;
#undef INFER__JJ_STRIPPABLE
    v = infer__jj_str_val(r, s->s + b, e - b);
    v.flags = self->flags & INFER__JJ_MARKUP;
    return v;
}

/* The first n[0..nn) in h[0..hn), or NULL; what it scans costs steps. */
static const char *infer__jj_memmem(infer__jj_r *r, const char *h, size_t hn, const char *n, size_t nn) {
    size_t i, scanned = hn;
    const char *at = NULL;
    if (!nn) return h;
    for (i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) {
            at = h + i;
            scanned = i + nn;
            break;
        }
    infer__jj_work(r, 0, scanned + scanned / 16 * nn);
    return at;
}

static infer__jj_val infer__jj_split(infer__jj_r *r, const infer__jj_str *s, const infer__jj_str *sep,
                                     int64_t maxsplit) {
    infer__jj_val l = infer__jj_new_list(r, 0, 0);
    size_t i = 0;
    if (sep) {
        const char *p = s->s, *end = s->s + s->len, *at;
        if (!sep->len) infer__jj_fail(r, "ValueError: empty separator");
        while ((maxsplit < 0 || (int64_t)l.u.l->n < maxsplit) &&
               (at = infer__jj_memmem(r, p, (size_t)(end - p), sep->s, sep->len))) {
            infer__jj_list_push(r, l.u.l, infer__jj_str_val(r, p, (size_t)(at - p)));
            p = at + sep->len;
        }
        infer__jj_list_push(r, l.u.l, infer__jj_str_val(r, p, (size_t)(end - p)));
        return l;
    }
    for (;;) {
        size_t b;
        while (i < s->len && infer__jj_is_ws_char(s->s[i])) i++;
        if (i >= s->len) break;
        if (maxsplit >= 0 && (int64_t)l.u.l->n >= maxsplit) {
            size_t e = s->len;
            while (e > i && infer__jj_is_ws_char(s->s[e - 1])) e--;
            infer__jj_list_push(r, l.u.l, infer__jj_str_val(r, s->s + i, e - i));
            break;
        }
        b = i;
        while (i < s->len && !infer__jj_is_ws_char(s->s[i])) i++;
        infer__jj_list_push(r, l.u.l, infer__jj_str_val(r, s->s + b, i - b));
    }
    return l;
}

static infer__jj_val infer__jj_replace(infer__jj_r *r, const infer__jj_str *s, const infer__jj_str *old,
                                       const infer__jj_str *new_, int64_t count) {
    infer__jj_buf b = {0, 0, 0};
    const char *p = s->s, *end = s->s + s->len, *at;
    int64_t done = 0;
    if (!old->len) { /* Python inserts new_ between the characters */
        size_t i;
        for (i = 0; i <= s->len; i++) {
            if (count < 0 || done < count) {
                if (i == 0 || i == s->len || ((unsigned char)s->s[i] & 0xc0) != 0x80) {
                    infer__jj_put(r, &b, new_->s, new_->len);
                    done++;
                }
            }
            if (i < s->len) infer__jj_putc(r, &b, s->s[i]);
        }
        return infer__jj_buf_val(r, &b);
    }
    while ((count < 0 || done < count) && (at = infer__jj_memmem(r, p, (size_t)(end - p), old->s, old->len))) {
        infer__jj_put(r, &b, p, (size_t)(at - p));
        infer__jj_put(r, &b, new_->s, new_->len);
        p = at + old->len;
        done++;
    }
    infer__jj_put(r, &b, p, (size_t)(end - p));
    return infer__jj_buf_val(r, &b);
}

/* str.startswith/endswith: arg a str, or a tuple (list) of them (one level, as Python) */
static int infer__jj_affix(infer__jj_r *r, const infer__jj_str *s, const infer__jj_val *arg, int end, int top) {
    size_t i;
    if (!arg) infer__jj_fail(r, "TypeError: %s() takes at least 1 argument", end ? "endswith" : "startswith");
    if (top && arg->type == INFER__JJ_LIST && !(arg->flags & INFER__JJ_LAZY)) {
        for (i = 0; i < arg->u.l->n; i++)
            if (infer__jj_affix(r, s, &arg->u.l->v[i], end, 0)) return 1;
        return 0;
    }
    if (arg->type != INFER__JJ_STR)
        infer__jj_fail(r, "TypeError: %s arg must be str or a tuple of str", end ? "endswith" : "startswith");
    if (arg->u.s->len > s->len) return 0;
    return !memcmp(s->s + (end ? s->len - arg->u.s->len : 0), arg->u.s->s, arg->u.s->len);
}

static infer__jj_val infer__jj_case(infer__jj_r *r, const infer__jj_val *v,
                                    int mode) { /* 0 lower, 1 upper, 2 title, 3 capitalize */
    infer__jj_str *s = infer__jj_to_str(r, v);
    infer__jj_val out = infer__jj_str_val(r, s->s, s->len);
    size_t i;
    int word_start = 1;
    for (i = 0; i < s->len; i++) {
        char c = out.u.s->s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        int up = mode == 1 || ((mode == 2 || mode == 3) && word_start && alpha);
        if (mode == 3 && i > 0) up = 0;
        if (mode == 3 && i == 0) up = 1;
        if (up && c >= 'a' && c <= 'z')
            c = (char)(c - 32);
        else if (!up && mode != 1 && c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        out.u.s->s[i] = c;
        if (mode == 2) word_start = !alpha && !((unsigned char)c & 0x80) && !infer__jj_digit(c) ? 1 : 0;
    }
    out.flags = v->flags & INFER__JJ_MARKUP;
    return out;
}

static const char *const infer__jj_mutating[] = {"append", "pop",  "update",  "insert",     "extend",  "remove",
                                                 "clear",  "sort", "reverse", "setdefault", "popitem", NULL};

static infer__jj_val infer__jj_call_method(infer__jj_r *r, const infer__jj_func *fn, const infer__jj_args *a) {
    const infer__jj_val *self = &fn->self;
    const char *m = fn->name;
    const char *const *mut;
    for (mut = infer__jj_mutating; *mut; mut++)
        if (!strcmp(m, *mut) && (self->type == INFER__JJ_LIST || self->type == INFER__JJ_DICT))
            infer__jj_fail(r, "SecurityError: access to attribute '%s' of '%s' object is unsafe", m,
                           infer__jj_type_name(self));
    if (self->type == INFER__JJ_LOOP && !strcmp(m, "cycle")) {
        if (!a->npos) infer__jj_fail(r, "TypeError: no items for cycling given");
        return a->pos[self->u.loop->i % (size_t)a->npos];
    }
    if (self->type == INFER__JJ_STR) {
        const infer__jj_str *s = self->u.s;
        if (!strcmp(m, "strip")) return infer__jj_strip(r, self, infer__jj_arg_str(r, a, 0, "chars", m), 3);
        if (!strcmp(m, "lstrip")) return infer__jj_strip(r, self, infer__jj_arg_str(r, a, 0, "chars", m), 1);
        if (!strcmp(m, "rstrip")) return infer__jj_strip(r, self, infer__jj_arg_str(r, a, 0, "chars", m), 2);
        if (!strcmp(m, "split"))
            return infer__jj_split(r, s, infer__jj_arg_str(r, a, 0, "sep", m),
                                   infer__jj_arg_int(r, a, 1, "maxsplit", -1, m));
        if (!strcmp(m, "startswith")) return infer__jj_bool(infer__jj_affix(r, s, infer__jj_arg(a, 0, NULL), 0, 1));
        if (!strcmp(m, "endswith")) return infer__jj_bool(infer__jj_affix(r, s, infer__jj_arg(a, 0, NULL), 1, 1));
        if (!strcmp(m, "lower")) return infer__jj_case(r, self, 0);
        if (!strcmp(m, "upper")) return infer__jj_case(r, self, 1);
        if (!strcmp(m, "title")) return infer__jj_case(r, self, 2);
        if (!strcmp(m, "capitalize")) return infer__jj_case(r, self, 3);
        if (!strcmp(m, "replace")) {
            const infer__jj_str *old = infer__jj_arg_str(r, a, 0, NULL, m), *new_ = infer__jj_arg_str(r, a, 1, NULL, m);
            if (!old || !new_) infer__jj_fail(r, "TypeError: replace() takes 2 string arguments");
            return infer__jj_replace(r, s, old, new_, infer__jj_arg_int(r, a, 2, "count", -1, m));
        }
        if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex") ||
            !strcmp(m, "count")) {
            const infer__jj_str *sub = infer__jj_arg_str(r, a, 0, NULL, m);
            const char *at = NULL, *p;
            int64_t count = 0;
            if (!sub) infer__jj_fail(r, "TypeError: %s() takes a string argument", m);
            for (p = s->s; (p = infer__jj_memmem(r, p, (size_t)(s->s + s->len - p), sub->s, sub->len));) {
                if (!at || m[0] == 'r') at = p;
                count++;
                if (m[0] != 'r' && m[0] != 'c') break;
                if (p == s->s + s->len) break;
                p += sub->len ? sub->len : 1;
            }
            if (m[0] == 'c') return infer__jj_int(count);
            if (!at) {
                if (m[0] == 'i' || m[1] == 'i') infer__jj_fail(r, "ValueError: substring not found");
                return infer__jj_int(-1);
            }
            { /* Python counts code points */
                size_t k, n = 0, prefix = (size_t)(at - s->s);
                for (k = 0; k < prefix; k++) n += ((unsigned char)s->s[k] & 0xc0) != 0x80;
                return infer__jj_int((int64_t)n);
            }
        }
        if (!strcmp(m, "join")) {
            const infer__jj_val *seq = infer__jj_arg(a, 0, NULL);
            infer__jj_list *items;
            infer__jj_buf b = {0, 0, 0};
            size_t i;
            if (!seq) infer__jj_fail(r, "TypeError: join() takes exactly one argument");
            items = infer__jj_iter(r, seq);
            for (i = 0; i < items->n; i++) {
                if (items->v[i].type != INFER__JJ_STR)
                    infer__jj_fail(r, "TypeError: sequence item %zu: expected str instance, %s found", i,
                                   infer__jj_type_name(&items->v[i]));
                if (i) infer__jj_put(r, &b, s->s, s->len);
                infer__jj_put(r, &b, items->v[i].u.s->s, items->v[i].u.s->len);
            }
            return infer__jj_buf_val(r, &b);
        }
        if (!strcmp(m, "isdigit") || !strcmp(m, "isalpha") || !strcmp(m, "isspace") || !strcmp(m, "isalnum") ||
            !strcmp(m, "islower") || !strcmp(m, "isupper")) {
            size_t i;
            int ok = s->len > 0, cased = 0;
            for (i = 0; i < s->len; i++) {
                char c = s->s[i];
                int lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
                cased |= lo || up;
                if (!strcmp(m, "isdigit"))
                    ok &= infer__jj_digit(c);
                else if (!strcmp(m, "isalpha"))
                    ok &= lo || up;
                else if (!strcmp(m, "isalnum"))
                    ok &= lo || up || infer__jj_digit(c);
                else if (!strcmp(m, "isspace"))
                    ok &= infer__jj_is_ws_char(c);
                else if (!strcmp(m, "islower"))
                    ok &= !up;
                else
                    ok &= !lo;
            }
            if (m[2] == 'l' || m[2] == 'u') ok &= cased;
            return infer__jj_bool(ok);
        }
        if (!strcmp(m, "splitlines")) {
            infer__jj_val l = infer__jj_new_list(r, 0, 0);
            size_t i = 0, b = 0;
            for (i = 0; i < s->len; i++)
                if (s->s[i] == '\n') {
                    infer__jj_list_push(r, l.u.l, infer__jj_str_val(r, s->s + b, i - b));
                    b = i + 1;
                }
            if (b < s->len) infer__jj_list_push(r, l.u.l, infer__jj_str_val(r, s->s + b, s->len - b));
            return l;
        }
    } else if (self->type == INFER__JJ_DICT) {
        infer__jj_dict *d = self->u.d;
        size_t i;
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            infer__jj_val l = infer__jj_new_list(r, d->n, 0);
            for (i = 0; i < d->n; i++) {
                if (m[0] == 'k')
                    l.u.l->v[i] = d->k[i];
                else if (m[0] == 'v')
                    l.u.l->v[i] = d->v[i];
                else {
                    infer__jj_val t = infer__jj_new_list(r, 2, INFER__JJ_TUPLE);
                    t.u.l->v[0] = d->k[i];
                    t.u.l->v[1] = d->v[i];
                    t.u.l->n = 2;
                    l.u.l->v[i] = t;
                }
            }
            l.u.l->n = d->n;
            return l;
        }
        if (!strcmp(m, "get")) {
            const infer__jj_val *k = infer__jj_arg(a, 0, NULL), *def = infer__jj_arg(a, 1, NULL);
            long at;
            if (!k) infer__jj_fail(r, "TypeError: get expected at least 1 argument");
            at = infer__jj_dict_find(r, d, k);
            return at >= 0 ? d->v[at] : def ? *def : infer__jj_none();
        }
        if (!strcmp(m, "copy")) {
            infer__jj_val c = infer__jj_new_dict(r, INFER__JJ_DICT);
            for (i = 0; i < d->n; i++) infer__jj_dict_set(r, c.u.d, d->k[i], d->v[i]);
            return c;
        }
    } else if (self->type == INFER__JJ_LIST) {
        const infer__jj_val *x = infer__jj_arg(a, 0, NULL);
        size_t i;
        int64_t count = 0;
        if ((!strcmp(m, "index") || !strcmp(m, "count")) && x && !(self->flags & INFER__JJ_LAZY)) {
            for (i = 0; i < self->u.l->n; i++)
                if (infer__jj_equal(r, &self->u.l->v[i], x)) {
                    if (m[0] == 'i') return infer__jj_int((int64_t)i);
                    count++;
                }
            if (m[0] == 'i') infer__jj_fail(r, "ValueError: value is not in list");
            return infer__jj_int(count);
        }
    }
    infer__jj_fail(r, "TypeError: '%s' object has no method '%s' here", infer__jj_type_name(self), m);
    return infer__jj_none();
}

static int infer__jj_has_method(const infer__jj_val *v, const char *name) {
    static const char *const str_methods[] = {
        "strip",      "lstrip",  "rstrip",  "split",   "startswith", "endswith",   "lower", "upper", "title",
        "capitalize", "replace", "find",    "rfind",   "index",      "rindex",     "count", "join",  "isdigit",
        "isalpha",    "isspace", "isalnum", "islower", "isupper",    "splitlines", NULL};
    static const char *const dict_methods[] = {"items",  "keys",  "values",     "get",     "copy", "pop",
                                               "update", "clear", "setdefault", "popitem", NULL};
    static const char *const list_methods[] = {"index",  "count", "append", "pop",     "insert", "extend",
                                               "remove", "clear", "sort",   "reverse", NULL};
    const char *const *m = v->type == INFER__JJ_STR                                    ? str_methods
                           : v->type == INFER__JJ_DICT                                 ? dict_methods
                           : v->type == INFER__JJ_LIST && !(v->flags & INFER__JJ_LAZY) ? list_methods
                                                                                       : NULL;
    for (; m && *m; m++)
        if (!strcmp(*m, name)) return 1;
    return 0;
}

/* x.name: the attribute first, then the key */
static infer__jj_val infer__jj_getattr(infer__jj_r *r, const infer__jj_val *obj, const infer__jj_str *name) {
    long at;
    if (obj->type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, obj, name->s);
    if (name->len && name->s[0] == '_') return infer__jj_undef(NULL); /* the sandbox hides these */
    if (infer__jj_has_method(obj, name->s)) return infer__jj_func_val(r, name->s, *obj);
    if (obj->type == INFER__JJ_LOOP) {
        const infer__jj_list *items = obj->u.loop->items;
        size_t i = obj->u.loop->i, n = items->n;
        const char *k = name->s;
        if (!strcmp(k, "index0")) return infer__jj_int((int64_t)i);
        if (!strcmp(k, "index")) return infer__jj_int((int64_t)i + 1);
        if (!strcmp(k, "revindex0")) return infer__jj_int((int64_t)(n - i - 1));
        if (!strcmp(k, "revindex")) return infer__jj_int((int64_t)(n - i));
        if (!strcmp(k, "first")) return infer__jj_bool(i == 0);
        if (!strcmp(k, "last")) return infer__jj_bool(i + 1 == n);
        if (!strcmp(k, "length")) return infer__jj_int((int64_t)n);
        if (!strcmp(k, "depth")) return infer__jj_int(1);
        if (!strcmp(k, "depth0")) return infer__jj_int(0);
        if (!strcmp(k, "previtem")) return i > 0 ? items->v[i - 1] : infer__jj_undef(NULL);
        if (!strcmp(k, "nextitem")) return i + 1 < n ? items->v[i + 1] : infer__jj_undef(NULL);
        if (!strcmp(k, "cycle")) return infer__jj_func_val(r, "cycle", *obj);
    }
    if (obj->type == INFER__JJ_DICT || obj->type == INFER__JJ_NS) {
        at = infer__jj_dict_find_s(obj->u.d, name->s, name->len);
        if (at >= 0) return obj->u.d->v[at];
    }
    return infer__jj_undef(NULL);
}

/* x[key]: the key first, then the attribute */
static infer__jj_val infer__jj_getitem(infer__jj_r *r, const infer__jj_val *obj, const infer__jj_val *key) {
    if (obj->type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, obj, "subscript");
    if (obj->type == INFER__JJ_DICT || obj->type == INFER__JJ_NS) {
        long at = infer__jj_dict_find(r, obj->u.d, key);
        if (at >= 0) return obj->u.d->v[at];
    } else if ((obj->type == INFER__JJ_LIST && !(obj->flags & INFER__JJ_LAZY)) || obj->type == INFER__JJ_STR) {
        if (key->type == INFER__JJ_INT || key->type == INFER__JJ_BOOL) {
            int64_t n = obj->type == INFER__JJ_LIST ? (int64_t)obj->u.l->n : (int64_t)infer__jj_cp_count(r, obj->u.s),
                    i = key->u.i;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return infer__jj_undef(NULL);
            if (obj->type == INFER__JJ_LIST) return obj->u.l->v[i];
            {
                size_t b = infer__jj_cp_offset(r, obj->u.s, (size_t)i), e = infer__jj_cp_offset(r, obj->u.s, (size_t)i + 1);
                return infer__jj_str_val(r, obj->u.s->s + b, e - b);
            }
        }
    }
    if (key->type == INFER__JJ_STR) return infer__jj_getattr(r, obj, key->u.s);
    return infer__jj_undef(NULL);
}

static infer__jj_val infer__jj_slice(infer__jj_r *r, const infer__jj_val *obj, const infer__jj_val *start,
                                     const infer__jj_val *stop, const infer__jj_val *step) {
    int64_t n, b, e, st = 1, i;
    infer__jj_val out;
    if (obj->type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, obj, "slice");
    if (obj->type != INFER__JJ_STR && !(obj->type == INFER__JJ_LIST && !(obj->flags & INFER__JJ_LAZY)))
        infer__jj_fail(r, "TypeError: '%s' object is not subscriptable", infer__jj_type_name(obj));
#define INFER__JJ_SLICE_INT(v)                                                                                         \
    ((v)->type == INFER__JJ_INT || (v)->type == INFER__JJ_BOOL                                                         \
         ? (v)->u.i                                                                                                    \
         : (infer__jj_fail(r, "TypeError: slice indices must be integers or None"), 0))
    if (step && step->type != INFER__JJ_NONE) st = INFER__JJ_SLICE_INT(step);
    if (!st) infer__jj_fail(r, "ValueError: slice step cannot be zero");
    n = obj->type == INFER__JJ_LIST ? (int64_t)obj->u.l->n : (int64_t)infer__jj_cp_count(r, obj->u.s);
    if (start && start->type != INFER__JJ_NONE) {
        b = INFER__JJ_SLICE_INT(start);
        if (b < 0) b += n;
        if (b < 0) b = st < 0 ? -1 : 0;
        if (b >= n) b = st < 0 ? n - 1 : n;
    } else
        b = st < 0 ? n - 1 : 0;
    if (stop && stop->type != INFER__JJ_NONE) {
        e = INFER__JJ_SLICE_INT(stop);
        if (e < 0) e += n;
        if (e < 0) e = st < 0 ? -1 : 0;
        if (e >= n) e = st < 0 ? n - 1 : n;
    } else
        e = st < 0 ? -1 : n;
#undef INFER__JJ_SLICE_INT
    if (obj->type == INFER__JJ_LIST) {
        out = infer__jj_new_list(r, 0, obj->flags & INFER__JJ_TUPLE);
        for (i = b; st > 0 ? i < e : i > e; i += st) infer__jj_list_push(r, out.u.l, obj->u.l->v[i]);
        return out;
    } else {
        infer__jj_buf buf = {0, 0, 0};
        const infer__jj_str *s = obj->u.s;
        size_t ncp = infer__jj_cp_count(r, s), *offs = NULL, k = 0, at;
        if (ncp != s->len) { /* code point offsets, found once */
            offs = (size_t *)infer__jj_alloc(r, (ncp + 1) * sizeof *offs);
            for (at = 0; at < s->len; at++)
                if (((unsigned char)s->s[at] & 0xc0) != 0x80) offs[k++] = at;
            offs[ncp] = s->len;
        }
        for (i = b; st > 0 ? i < e : i > e; i += st) {
            size_t ob = offs ? offs[i] : (size_t)i, oe = offs ? offs[i + 1] : ob + 1;
            infer__jj_put(r, &buf, s->s + ob, oe - ob);
        }
        out = infer__jj_buf_val(r, &buf);
        out.flags = obj->flags & INFER__JJ_MARKUP;
        return out;
    }
}

/* ---- tests and filters ------------------------------------------------------------------- */

static int infer__jj_test(infer__jj_r *r, const char *name, const infer__jj_val *v, const infer__jj_args *a) {
    const infer__jj_val *x = infer__jj_arg(a, 0, NULL);
    if (!strcmp(name, "defined")) return v->type != INFER__JJ_UNDEF;
    if (!strcmp(name, "undefined")) return v->type == INFER__JJ_UNDEF;
    if (!strcmp(name, "none")) return v->type == INFER__JJ_NONE;
    if (!strcmp(name, "string")) return v->type == INFER__JJ_STR;
    if (!strcmp(name, "mapping")) return v->type == INFER__JJ_DICT;
    if (!strcmp(name, "iterable"))
        return v->type == INFER__JJ_STR || v->type == INFER__JJ_LIST || v->type == INFER__JJ_DICT ||
               v->type == INFER__JJ_UNDEF;
    if (!strcmp(name, "sequence"))
        return v->type == INFER__JJ_STR || (v->type == INFER__JJ_LIST && !(v->flags & INFER__JJ_LAZY)) ||
               v->type == INFER__JJ_DICT;
    if (!strcmp(name, "number")) return infer__jj_is_num(v);
    if (!strcmp(name, "integer")) return v->type == INFER__JJ_INT;
    if (!strcmp(name, "float")) return v->type == INFER__JJ_FLOAT;
    if (!strcmp(name, "boolean")) return v->type == INFER__JJ_BOOL;
    if (!strcmp(name, "true")) return v->type == INFER__JJ_BOOL && v->u.i;
    if (!strcmp(name, "false")) return v->type == INFER__JJ_BOOL && !v->u.i;
    if (!strcmp(name, "callable")) return v->type == INFER__JJ_FUNC || v->type == INFER__JJ_MACRO;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        infer__jj_val c;
        if (v->type != INFER__JJ_STR) return 0;
        c = infer__jj_case(r, v, name[0] == 'u');
        return infer__jj_equal(r, &c, v);
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        int64_t d = name[0] == 'd' ? (x && (x->type == INFER__JJ_INT || x->type == INFER__JJ_BOOL) ? x->u.i : 0) : 2;
        if (v->type != INFER__JJ_INT && v->type != INFER__JJ_BOOL)
            infer__jj_fail(r, "TypeError: test '%s' needs an integer", name);
        if (!d) infer__jj_fail(r, "ZeroDivisionError: integer division or modulo by zero");
        return name[0] == 'o' ? (v->u.i % 2 != 0) : (v->u.i % d == 0);
    }
    if (!x) infer__jj_fail(r, "unknown test '%s' or missing argument", name);
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return infer__jj_equal(r, v, x);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !infer__jj_equal(r, v, x);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return infer__jj_cmp(r, v, x) < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return infer__jj_cmp(r, v, x) <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return infer__jj_cmp(r, v, x) > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">=")) return infer__jj_cmp(r, v, x) >= 0;
    if (!strcmp(name, "in")) return infer__jj_contains(r, x, v);
    if (!strcmp(name, "sameas"))
        return v->type == x->type && (v->type == INFER__JJ_NONE || v->type == INFER__JJ_UNDEF || infer__jj_equal(r, v, x));
    infer__jj_fail(r, "unknown test '%s'", name);
    return 0;
}

static infer__jj_val infer__jj_filter(infer__jj_r *r, const char *name, const infer__jj_val *v,
                                      const infer__jj_args *a);

/* attribute "a.b" of x as environment.getitem does it (key first) */
static infer__jj_val infer__jj_attr_path(infer__jj_r *r, const infer__jj_val *x, const infer__jj_str *path) {
    infer__jj_val cur = *x;
    const char *p = path->s, *end = path->s + path->len;
    while (p <= end) {
        const char *dot = (const char *)memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        infer__jj_val key = infer__jj_str_val(r, p, n);
        if (n && infer__jj_digit(p[0])) key = infer__jj_int(strtoll(key.u.s->s, NULL, 10));
        if (cur.type == INFER__JJ_UNDEF) return cur;
        cur = infer__jj_getitem(r, &cur, &key);
        if (!dot) break;
        p = dot + 1;
    }
    return cur;
}

/* select/reject/selectattr/rejectattr and map: lazy lists */
static infer__jj_val infer__jj_select(infer__jj_r *r, const infer__jj_val *v, const infer__jj_args *a, int attr,
                                      int keep) {
    /* jinja2 iterates only a true value: none|selectattr(...) is empty */
    infer__jj_list *items = infer__jj_truthy(v) ? infer__jj_iter(r, v) : infer__jj_new_list(r, 0, 0).u.l;
    infer__jj_val out = infer__jj_new_list(r, items->n, INFER__JJ_LAZY);
    const infer__jj_str *path = attr ? infer__jj_arg_str(r, a, 0, NULL, "selectattr") : NULL;
    const infer__jj_val *test = infer__jj_arg(a, attr ? 1 : 0, NULL);
    infer__jj_args targs;
    size_t i;
    if (attr && !path) infer__jj_fail(r, "TypeError: selectattr needs an attribute");
    if (test && test->type != INFER__JJ_STR) infer__jj_fail(r, "TypeError: the test must be named by a string");
    targs.pos = a->pos + (attr ? 2 : 1);
    targs.npos = a->npos > (attr ? 2 : 1) ? a->npos - (attr ? 2 : 1) : 0;
    targs.kwn = a->kwn;
    targs.kwv = a->kwv;
    targs.nkw = a->nkw;
    for (i = 0; i < items->n; i++) {
        infer__jj_val x = attr ? infer__jj_attr_path(r, &items->v[i], path) : items->v[i];
        int ok = test ? infer__jj_test(r, test->u.s->s, &x, &targs) : infer__jj_truthy(&x);
        infer__jj_step(r);
        if (ok == keep) out.u.l->v[out.u.l->n++] = items->v[i];
    }
    return out;
}

static infer__jj_val infer__jj_map(infer__jj_r *r, const infer__jj_val *v, const infer__jj_args *a) {
    infer__jj_list *items = infer__jj_truthy(v) ? infer__jj_iter(r, v) : infer__jj_new_list(r, 0, 0).u.l;
    infer__jj_val out = infer__jj_new_list(r, items->n, INFER__JJ_LAZY);
    const infer__jj_val *attr = infer__jj_arg(a, -1, "attribute"), *def = infer__jj_arg(a, -1, "default");
    size_t i;
    for (i = 0; i < items->n; i++) {
        infer__jj_val x;
        infer__jj_step(r);
        if (attr) {
            if (attr->type != INFER__JJ_STR) infer__jj_fail(r, "TypeError: map's attribute must be a string");
            x = infer__jj_attr_path(r, &items->v[i], attr->u.s);
            if (x.type == INFER__JJ_UNDEF && def) x = *def;
        } else {
            infer__jj_args fargs = *a;
            if (!a->npos || a->pos[0].type != INFER__JJ_STR)
                infer__jj_fail(r, "TypeError: map needs a filter name or attribute=");
            fargs.pos = a->pos + 1;
            fargs.npos = a->npos - 1;
            x = infer__jj_filter(r, a->pos[0].u.s->s, &items->v[i], &fargs);
        }
        out.u.l->v[out.u.l->n++] = x;
    }
    return out;
}

static infer__jj_val infer__jj_tojson(infer__jj_r *r, const infer__jj_val *v, const infer__jj_args *a) {
    infer__jj_json_opts o;
    infer__jj_buf b = {0, 0, 0};
    const infer__jj_val *indent = infer__jj_arg(a, 0, "indent"), *seps = infer__jj_arg(a, -1, "separators");
    const infer__jj_val *ascii = infer__jj_arg(a, -1, "ensure_ascii"), *sort = infer__jj_arg(a, -1, "sort_keys");
    o.indent = -1;
    o.indent_str = NULL;
    if (indent && indent->type == INFER__JJ_INT)
        o.indent = indent->u.i < 0 ? 0 : (int)INFER__MIN(indent->u.i, 64);
    else if (indent && indent->type == INFER__JJ_STR) {
        o.indent = 0;
        o.indent_str = indent->u.s;
    } else if (indent && indent->type != INFER__JJ_NONE)
        infer__jj_fail(r, "TypeError: tojson: bad indent");
    o.item_sep = o.indent >= 0 ? "," : ", ";
    o.key_sep = ": ";
    if (seps && seps->type == INFER__JJ_LIST && seps->u.l->n == 2 && seps->u.l->v[0].type == INFER__JJ_STR &&
        seps->u.l->v[1].type == INFER__JJ_STR) {
        o.item_sep = seps->u.l->v[0].u.s->s;
        o.key_sep = seps->u.l->v[1].u.s->s;
    } else if (seps && seps->type != INFER__JJ_NONE)
        infer__jj_fail(r, "TypeError: tojson: bad separators");
    o.ensure_ascii = ascii ? infer__jj_truthy(ascii) : 0;
    o.sort_keys = sort ? infer__jj_truthy(sort) : 0;
    infer__jj_put_json(r, &b, v, &o, 0);
    return infer__jj_buf_val(r, &b);
}

/* the key a sort compares: items of dictsort, attribute paths, case folded */
static infer__jj_val infer__jj_sort_key(infer__jj_r *r, infer__jj_val x, int case_sensitive) {
    if (!case_sensitive && x.type == INFER__JJ_STR) return infer__jj_case(r, &x, 0);
    return x;
}

static void infer__jj_sort(infer__jj_r *r, infer__jj_val *v, infer__jj_val *keys, size_t n, int reverse) {
    size_t i; /* insertion sort: stable; the lists are small, and steps bound them */
    for (i = 1; i < n; i++) {
        size_t j = i;
        infer__jj_val xv = v[i], xk = keys[i];
        while (j > 0) {
            int c = infer__jj_cmp(r, &keys[j - 1], &xk);
            if (reverse ? c >= 0 : c <= 0) break;
            v[j] = v[j - 1];
            keys[j] = keys[j - 1];
            j--;
            infer__jj_step(r);
        }
        v[j] = xv;
        keys[j] = xk;
    }
}

static infer__jj_val infer__jj_filter(infer__jj_r *r, const char *name, const infer__jj_val *v,
                                      const infer__jj_args *a) {
    size_t i;
    if (!strcmp(name, "safe")) {
        infer__jj_val s;
        if (v->type == INFER__JJ_STR)
            s = *v;
        else {
            s.type = INFER__JJ_STR;
            s.u.s = infer__jj_to_str(r, v);
        }
        s.flags = INFER__JJ_MARKUP;
        return s;
    }
    if (!strcmp(name, "tojson")) return infer__jj_tojson(r, v, a);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        const infer__jj_val *def = infer__jj_arg(a, 0, "default_value"), *boolean = infer__jj_arg(a, 1, "boolean");
        if (v->type == INFER__JJ_UNDEF || (boolean && infer__jj_truthy(boolean) && !infer__jj_truthy(v)))
            return def ? *def : infer__jj_cstr(r, "");
        return *v;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return infer__jj_int(infer__jj_length(r, v));
    if (!strcmp(name, "string")) {
        infer__jj_val s;
        if (v->type == INFER__JJ_STR) return *v;
        s.type = INFER__JJ_STR;
        s.flags = 0;
        s.u.s = infer__jj_to_str(r, v);
        return s;
    }
    if (!strcmp(name, "trim")) {
        infer__jj_val s;
        s.type = INFER__JJ_STR;
        s.flags = v->type == INFER__JJ_STR ? v->flags : 0;
        s.u.s = infer__jj_to_str(r, v);
        return infer__jj_strip(r, &s, infer__jj_arg_str(r, a, 0, "chars", "trim"), 3);
    }
    if (!strcmp(name, "lower")) return infer__jj_case(r, v, 0);
    if (!strcmp(name, "upper")) return infer__jj_case(r, v, 1);
    if (!strcmp(name, "title")) return infer__jj_case(r, v, 2);
    if (!strcmp(name, "capitalize")) return infer__jj_case(r, v, 3);
    if (!strcmp(name, "e") || !strcmp(name, "escape")) return infer__jj_escape(r, v);
    if (!strcmp(name, "replace")) {
        const infer__jj_str *old = infer__jj_arg_str(r, a, 0, "old", name),
                            *new_ = infer__jj_arg_str(r, a, 1, "new", name);
        if (!old || !new_) infer__jj_fail(r, "TypeError: replace needs two strings");
        return infer__jj_replace(r, infer__jj_to_str(r, v), old, new_, infer__jj_arg_int(r, a, 2, "count", -1, name));
    }
    if (!strcmp(name, "list")) {
        infer__jj_list *items = infer__jj_iter(r, v);
        infer__jj_val l = infer__jj_new_list(r, items->n, 0);
        if (items->n) memcpy(l.u.l->v, items->v, items->n * sizeof(infer__jj_val));
        l.u.l->n = items->n;
        return l;
    }
    if (!strcmp(name, "first")) {
        infer__jj_list *items = infer__jj_iter(r, v);
        return items->n ? items->v[0] : infer__jj_undef(NULL);
    }
    if (!strcmp(name, "last")) {
        infer__jj_list *items;
        if (v->type == INFER__JJ_LIST && (v->flags & INFER__JJ_LAZY))
            infer__jj_fail(r, "TypeError: 'generator' object is not reversible");
        items = infer__jj_iter(r, v);
        return items->n ? items->v[items->n - 1] : infer__jj_undef(NULL);
    }
    if (!strcmp(name, "reverse")) {
        if (v->type == INFER__JJ_STR) {
            infer__jj_val st = infer__jj_int(-1);
            return infer__jj_slice(r, v, NULL, NULL, &st);
        } else {
            infer__jj_list *items = infer__jj_iter(r, v);
            infer__jj_val l = infer__jj_new_list(r, items->n, 0);
            for (i = 0; i < items->n; i++) l.u.l->v[i] = items->v[items->n - 1 - i];
            l.u.l->n = items->n;
            return l;
        }
    }
    if (!strcmp(name, "join")) {
        infer__jj_list *items = infer__jj_iter(r, v);
        const infer__jj_str *sep = infer__jj_arg_str(r, a, 0, "d", name);
        const infer__jj_val *attr = infer__jj_arg(a, 1, "attribute");
        infer__jj_buf b = {0, 0, 0};
        for (i = 0; i < items->n; i++) {
            infer__jj_val x = items->v[i];
            if (attr && attr->type == INFER__JJ_STR) x = infer__jj_attr_path(r, &x, attr->u.s);
            if (i && sep) infer__jj_put(r, &b, sep->s, sep->len);
            infer__jj_put_str(r, &b, &x);
        }
        return infer__jj_buf_val(r, &b);
    }
    if (!strcmp(name, "items")) {
        infer__jj_func fn;
        if (v->type == INFER__JJ_UNDEF) return infer__jj_new_list(r, 0, 0);
        if (v->type != INFER__JJ_DICT) infer__jj_fail(r, "TypeError: can only get item pairs from a mapping");
        fn.name = "items";
        fn.self = *v;
        return infer__jj_call_method(r, &fn, a);
    }
    if (!strcmp(name, "dictsort")) {
        const infer__jj_val *cs = infer__jj_arg(a, 0, "case_sensitive"), *by = infer__jj_arg(a, 1, "by"),
                            *rev = infer__jj_arg(a, 2, "reverse");
        int by_value = by && by->type == INFER__JJ_STR && infer__jj_streq(by->u.s, "value", 5);
        infer__jj_val l, *keys;
        infer__jj_func fn;
        if (v->type != INFER__JJ_DICT) infer__jj_fail(r, "TypeError: dictsort expects a mapping");
        fn.name = "items";
        fn.self = *v;
        l = infer__jj_call_method(r, &fn, a);
        keys = (infer__jj_val *)infer__jj_alloc(r, (l.u.l->n + 1) * sizeof *keys);
        for (i = 0; i < l.u.l->n; i++)
            keys[i] = infer__jj_sort_key(r, l.u.l->v[i].u.l->v[by_value], cs && infer__jj_truthy(cs));
        infer__jj_sort(r, l.u.l->v, keys, l.u.l->n, rev && infer__jj_truthy(rev));
        return l;
    }
    if (!strcmp(name, "sort")) {
        const infer__jj_val *rev = infer__jj_arg(a, 0, "reverse"), *cs = infer__jj_arg(a, 1, "case_sensitive"),
                            *attr = infer__jj_arg(a, 2, "attribute");
        infer__jj_list *items = infer__jj_iter(r, v);
        infer__jj_val l = infer__jj_new_list(r, items->n, 0),
                      *keys = (infer__jj_val *)infer__jj_alloc(r, (items->n + 1) * sizeof(infer__jj_val));
        for (i = 0; i < items->n; i++) {
            infer__jj_val k = items->v[i];
            if (attr && attr->type == INFER__JJ_STR) k = infer__jj_attr_path(r, &k, attr->u.s);
            keys[i] = infer__jj_sort_key(r, k, cs && infer__jj_truthy(cs));
            l.u.l->v[i] = items->v[i];
        }
        l.u.l->n = items->n;
        infer__jj_sort(r, l.u.l->v, keys, l.u.l->n, rev && infer__jj_truthy(rev));
        return l;
    }
    if (!strcmp(name, "unique")) {
        infer__jj_list *items = infer__jj_iter(r, v);
        infer__jj_val l = infer__jj_new_list(r, items->n, 0);
        for (i = 0; i < items->n; i++) {
            infer__jj_step(r);
            if (!infer__jj_contains(r, &l, &items->v[i])) l.u.l->v[l.u.l->n++] = items->v[i];
        }
        return l;
    }
    if (!strcmp(name, "map")) return infer__jj_map(r, v, a);
    if (!strcmp(name, "select")) return infer__jj_select(r, v, a, 0, 1);
    if (!strcmp(name, "reject")) return infer__jj_select(r, v, a, 0, 0);
    if (!strcmp(name, "selectattr")) return infer__jj_select(r, v, a, 1, 1);
    if (!strcmp(name, "rejectattr")) return infer__jj_select(r, v, a, 1, 0);
    if (!strcmp(name, "int")) {
        if (v->type == INFER__JJ_INT || v->type == INFER__JJ_BOOL) return infer__jj_int(v->u.i);
        if (v->type == INFER__JJ_FLOAT) return infer__jj_int((int64_t)v->u.f);
        if (v->type == INFER__JJ_STR) {
            char *end;
            long long x = strtoll(v->u.s->s, &end, 10);
            return infer__jj_int(*end ? (int64_t)infer__jj_arg_int(r, a, 0, "default", 0, name) : x);
        }
        return infer__jj_int(infer__jj_arg_int(r, a, 0, "default", 0, name));
    }
    if (!strcmp(name, "float")) {
        if (infer__jj_is_num(v)) return infer__jj_float(infer__jj_num(v));
        if (v->type == INFER__JJ_STR) {
            char *end;
            double x = strtod(v->u.s->s, &end);
            if (!*end && end != v->u.s->s) return infer__jj_float(x);
        }
        return infer__jj_float(0);
    }
    if (!strcmp(name, "abs")) {
        if (v->type == INFER__JJ_INT || v->type == INFER__JJ_BOOL) return infer__jj_int(v->u.i < 0 ? -v->u.i : v->u.i);
        if (v->type == INFER__JJ_FLOAT) return infer__jj_float(fabs(v->u.f));
        infer__jj_fail(r, "TypeError: bad operand type for abs(): '%s'", infer__jj_type_name(v));
    }
    if (!strcmp(name, "round")) {
        int64_t prec = infer__jj_arg_int(r, a, 0, "precision", 0, name);
        double x = infer__jj_num(v), m = pow(10, (double)prec);
        if (!infer__jj_is_num(v)) infer__jj_fail(r, "TypeError: round needs a number");
        return infer__jj_float(round(x * m) / m);
    }
    if (!strcmp(name, "sum") || !strcmp(name, "min") || !strcmp(name, "max")) {
        infer__jj_list *items = infer__jj_iter(r, v);
        infer__jj_val acc = name[1] == 'u' ? infer__jj_int(0) : items->n ? items->v[0] : infer__jj_undef(NULL);
        for (i = name[1] == 'u' ? 0 : 1; i < items->n; i++) {
            if (name[1] == 'u')
                acc = infer__jj_binop(r, INFER__JOP_ADD, acc, items->v[i]);
            else if ((infer__jj_cmp(r, &items->v[i], &acc) < 0) == (name[1] == 'i') &&
                     !infer__jj_equal(r, &items->v[i], &acc))
                acc = items->v[i];
        }
        return acc;
    }
    if (!strcmp(name, "indent")) {
        int64_t width = infer__jj_arg_int(r, a, 0, "width", 4, name);
        const infer__jj_val *first = infer__jj_arg(a, 1, "first"), *blank = infer__jj_arg(a, 2, "blank");
        infer__jj_str *s = infer__jj_to_str(r, v);
        infer__jj_buf b = {0, 0, 0};
        int at_start = 1;
        int64_t k;
        if (width < 0 || width > 1024) infer__jj_fail(r, "indent: width out of range");
        for (i = 0; i <= s->len; i++) {
            if (at_start) {
                int line_blank = i == s->len || s->s[i] == '\n';
                if ((i > 0 || (first && infer__jj_truthy(first))) &&
                    (!line_blank || (blank && infer__jj_truthy(blank))) && i < s->len)
                    for (k = 0; k < width; k++) infer__jj_putc(r, &b, ' ');
                at_start = 0;
            }
            if (i == s->len) break;
            infer__jj_putc(r, &b, s->s[i]);
            if (s->s[i] == '\n') at_start = 1;
        }
        return infer__jj_buf_val(r, &b);
    }
    infer__jj_fail(r, "unknown filter '%s'", name);
    return infer__jj_none();
}
