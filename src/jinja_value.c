/* jinja_value.c - the Jinja interpreter's values: the render's arena and
   limits, strings, lists and dicts, Python's truth, comparison and printing,
   and the JSON bridge (json.dumps, the render's context). */
#include "jinja.h"

/* ---- the render's state ------------------------------------------------------- */

static void infer__jj_fail(infer__jj_r *r, const char *fmt, ...) {
    va_list ap;
    char *nl;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    /* one line, whatever the template's text held */
    while ((nl = strchr(r->msg, '\n'))) *nl = ' ';
    longjmp(r->fail, 1);
}

/* Searches and comparisons cost steps too (one per 16 items or 256 bytes
   visited), so a loop repeating one over a huge value ends at the step
   limit instead of running for hours. */
static void infer__jj_work(infer__jj_r *r, size_t items, size_t bytes) {
    r->steps += (int64_t)(items >> 4) + (int64_t)(bytes >> 8);
    if (r->steps > r->lim.max_steps)
        infer__jj_fail(r, "step limit exceeded (%lld loop iterations, calls and searches)", (long long)r->lim.max_steps);
}

static void *infer__jj_alloc(infer__jj_r *r, size_t size) {
    infer__jj_chunk *c = r->chunks;
    size_t align = sizeof c->data[0], need = (size + align - 1) / align * align;
    void *p;
    if (size > r->lim.max_memory) infer__jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
    if (!c || c->cap - c->used < need) {
        size_t cap = need > 65536 ? need : 65536;
        if (r->mem_used + cap > r->lim.max_memory)
            infer__jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
        c = (infer__jj_chunk *)INFER_MALLOC(sizeof *c + cap);
        if (!c) infer__jj_fail(r, "out of memory");
        c->cap = cap;
        c->used = 0;
        r->mem_used += cap;
        if (r->chunks && need > 65536) { /* a big block: keep filling the current chunk */
            c->next = r->chunks->next;
            r->chunks->next = c;
        } else {
            c->next = r->chunks;
            r->chunks = c;
        }
    }
    p = (char *)c->data + c->used;
    c->used += need;
    return p;
}

static void infer__jj_free_all(infer__jj_r *r) {
    while (r->chunks) {
        infer__jj_chunk *next = r->chunks->next;
        INFER_FREE(r->chunks);
        r->chunks = next;
    }
}

/* ---- buffers and strings ---------------------------------------------------- */

static void infer__jj_buf_room(infer__jj_r *r, infer__jj_buf *b, size_t more) {
    char *p;
    size_t cap;
    if (more > r->lim.max_output || b->n + more > r->lim.max_output)
        infer__jj_fail(r, "output limit exceeded (%zu bytes)", r->lim.max_output);
    if (b->n + more + 1 <= b->cap) return;
    cap = b->cap ? b->cap : 64;
    while (cap < b->n + more + 1) cap *= 2;
    p = (char *)infer__jj_alloc(r, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
}

static void infer__jj_put(infer__jj_r *r, infer__jj_buf *b, const char *s, size_t n) {
    if (!n) return;
    infer__jj_buf_room(r, b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void infer__jj_puts(infer__jj_r *r, infer__jj_buf *b, const char *s) { infer__jj_put(r, b, s, strlen(s)); }
static void infer__jj_putc(infer__jj_r *r, infer__jj_buf *b, char c) { infer__jj_put(r, b, &c, 1); }

static infer__jj_str *infer__jj_newstr(infer__jj_r *r, const char *s, size_t n) {
    infer__jj_str *x;
    if (n > r->lim.max_output) infer__jj_fail(r, "string longer than the output limit (%zu bytes)", r->lim.max_output);
    x = (infer__jj_str *)infer__jj_alloc(r, sizeof *x + n);
    x->len = n;
    if (n) memcpy(x->s, s, n);
    x->s[n] = 0;
    return x;
}

static infer__jj_val infer__jj_str_val(infer__jj_r *r, const char *s, size_t n) {
    infer__jj_val v;
    v.type = INFER__JJ_STR;
    v.flags = 0;
    v.u.s = infer__jj_newstr(r, s, n);
    return v;
}
static infer__jj_val infer__jj_cstr(infer__jj_r *r, const char *s) { return infer__jj_str_val(r, s, strlen(s)); }
static infer__jj_val infer__jj_buf_val(infer__jj_r *r, const infer__jj_buf *b) {
    return infer__jj_str_val(r, b->p ? b->p : "", b->n);
}

static infer__jj_val infer__jj_undef(infer__jj_str *name) {
    infer__jj_val v;
    v.type = INFER__JJ_UNDEF;
    v.flags = 0;
    v.u.s = name;
    return v;
}
static infer__jj_val infer__jj_none(void) {
    infer__jj_val v;
    v.type = INFER__JJ_NONE;
    v.flags = 0;
    v.u.i = 0;
    return v;
}
static infer__jj_val infer__jj_bool(int b) {
    infer__jj_val v;
    v.type = INFER__JJ_BOOL;
    v.flags = 0;
    v.u.i = b != 0;
    return v;
}
static infer__jj_val infer__jj_int(int64_t i) {
    infer__jj_val v;
    v.type = INFER__JJ_INT;
    v.flags = 0;
    v.u.i = i;
    return v;
}
static infer__jj_val infer__jj_float(double f) {
    infer__jj_val v;
    v.type = INFER__JJ_FLOAT;
    v.flags = 0;
    v.u.f = f;
    return v;
}

static infer__jj_val infer__jj_new_list(infer__jj_r *r, size_t cap, int flags) {
    infer__jj_val v;
    v.type = INFER__JJ_LIST;
    v.flags = (unsigned char)flags;
    v.u.l = (infer__jj_list *)infer__jj_alloc(r, sizeof *v.u.l);
    v.u.l->n = 0;
    v.u.l->cap = cap;
    if (cap > r->lim.max_memory / sizeof(infer__jj_val))
        infer__jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
    v.u.l->v = cap ? (infer__jj_val *)infer__jj_alloc(r, cap * sizeof(infer__jj_val)) : NULL;
    return v;
}

static void infer__jj_list_push(infer__jj_r *r, infer__jj_list *l, infer__jj_val x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        infer__jj_val *v;
        if (cap > r->lim.max_memory / sizeof(infer__jj_val))
            infer__jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
        v = (infer__jj_val *)infer__jj_alloc(r, cap * sizeof(infer__jj_val));
        if (l->n) memcpy(v, l->v, l->n * sizeof(infer__jj_val));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static infer__jj_val infer__jj_new_dict(infer__jj_r *r, int type) {
    infer__jj_val v;
    v.type = (unsigned char)type;
    v.flags = 0;
    v.u.d = (infer__jj_dict *)infer__jj_alloc(r, sizeof *v.u.d);
    memset(v.u.d, 0, sizeof *v.u.d);
    return v;
}

static int infer__jj_streq(const infer__jj_str *a, const char *s, size_t n) {
    return a->len == n && !memcmp(a->s, s, n);
}

static int infer__jj_equal(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b);
static int infer__jj_equal_flat(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b);

/* index of key in d, or -1 */
static long infer__jj_dict_find(infer__jj_r *r, const infer__jj_dict *d, const infer__jj_val *key) {
    size_t i;
    infer__jj_work(r, d->n, 0);
    for (i = 0; i < d->n; i++)
        if (infer__jj_equal(r, &d->k[i], key)) return (long)i;
    return -1;
}
static long infer__jj_dict_find_s(const infer__jj_dict *d, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < d->n; i++)
        if (d->k[i].type == INFER__JJ_STR && infer__jj_streq(d->k[i].u.s, s, n)) return (long)i;
    return -1;
}

static void infer__jj_dict_set(infer__jj_r *r, infer__jj_dict *d, infer__jj_val key, infer__jj_val val) {
    long at = infer__jj_dict_find(r, d, &key);
    if (at >= 0) {
        d->v[at] = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        infer__jj_val *k = (infer__jj_val *)infer__jj_alloc(r, cap * sizeof(infer__jj_val)),
                      *v = (infer__jj_val *)infer__jj_alloc(r, cap * sizeof(infer__jj_val));
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof(infer__jj_val));
            memcpy(v, d->v, d->n * sizeof(infer__jj_val));
        }
        d->k = k;
        d->v = v;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

/* ---- Python semantics: truth, equality, printing ------------------------------ */

static int infer__jj_truthy(const infer__jj_val *v) {
    switch (v->type) {
    case INFER__JJ_UNDEF:
    case INFER__JJ_NONE: return 0;
    case INFER__JJ_BOOL:
    case INFER__JJ_INT: return v->u.i != 0;
    case INFER__JJ_FLOAT: return v->u.f != 0;
    case INFER__JJ_STR: return v->u.s->len != 0;
    case INFER__JJ_LIST: return (v->flags & INFER__JJ_LAZY) || v->u.l->n != 0;
    case INFER__JJ_DICT: return v->u.d->n != 0;
    default: return 1;
    }
}

static int infer__jj_is_num(const infer__jj_val *v) {
    return v->type == INFER__JJ_BOOL || v->type == INFER__JJ_INT || v->type == INFER__JJ_FLOAT;
}
static double infer__jj_num(const infer__jj_val *v) { return v->type == INFER__JJ_FLOAT ? v->u.f : (double)v->u.i; }

/* Python's ==; containers compared item by item, as deep as max_depth
   (a list nested a million times by a loop must not exhaust the stack) */
static int infer__jj_equal(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b) {
    int eq;
    if (a->type != INFER__JJ_LIST && a->type != INFER__JJ_DICT) return infer__jj_equal_flat(r, a, b);
    if (++r->depth > r->lim.max_depth) infer__jj_fail(r, "comparison nested deeper than %d", r->lim.max_depth);
    eq = infer__jj_equal_flat(r, a, b);
    r->depth--;
    return eq;
}

static int infer__jj_equal_flat(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b) {
    size_t i;
    if (a->type == b->type && a->type == INFER__JJ_STR) infer__jj_work(r, 0, a->u.s->len);
    if (a->type == b->type && a->type == INFER__JJ_LIST) infer__jj_work(r, a->u.l->n, 0);
    if (infer__jj_is_num(a) && infer__jj_is_num(b)) {
        if (a->type != INFER__JJ_FLOAT && b->type != INFER__JJ_FLOAT) return a->u.i == b->u.i;
        return infer__jj_num(a) == infer__jj_num(b);
    }
    if (a->type != b->type) return 0;
    switch (a->type) {
    case INFER__JJ_UNDEF:
    case INFER__JJ_NONE: return 1;
    case INFER__JJ_STR: return a->u.s->len == b->u.s->len && !memcmp(a->u.s->s, b->u.s->s, a->u.s->len);
    case INFER__JJ_LIST:
        if ((a->flags & INFER__JJ_TUPLE) != (b->flags & INFER__JJ_TUPLE) || ((a->flags | b->flags) & INFER__JJ_LAZY))
            return a->u.l == b->u.l;
        if (a->u.l->n != b->u.l->n) return 0;
        for (i = 0; i < a->u.l->n; i++)
            if (!infer__jj_equal(r, &a->u.l->v[i], &b->u.l->v[i])) return 0;
        return 1;
    case INFER__JJ_DICT:
        if (a->u.d->n != b->u.d->n) return 0;
        for (i = 0; i < a->u.d->n; i++) {
            long j = infer__jj_dict_find(r, b->u.d, &a->u.d->k[i]);
            if (j < 0 || !infer__jj_equal(r, &a->u.d->v[i], &b->u.d->v[j])) return 0;
        }
        return 1;
    case INFER__JJ_NS: return a->u.d == b->u.d;
    case INFER__JJ_FUNC: return a->u.fn == b->u.fn;
    case INFER__JJ_MACRO: return a->u.macro == b->u.macro;
    case INFER__JJ_LOOP: return a->u.loop == b->u.loop;
    default: return 0;
    }
}

static const char *infer__jj_type_name(const infer__jj_val *v) {
    static const char *names[] = {"Undefined", "NoneType",   "bool", "int",       "float",
                                  "str",       "list",       "dict", "Namespace", "builtin_function_or_method",
                                  "Macro",     "LoopContext"};
    if (v->type == INFER__JJ_LIST && (v->flags & INFER__JJ_LAZY)) return "generator";
    if (v->type == INFER__JJ_LIST && (v->flags & INFER__JJ_TUPLE)) return "tuple";
    return names[v->type];
}

static int infer__jj_cmp(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b) {
    if (infer__jj_is_num(a) && infer__jj_is_num(b)) {
        if (a->type != INFER__JJ_FLOAT && b->type != INFER__JJ_FLOAT) return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
        return infer__jj_num(a) < infer__jj_num(b) ? -1 : infer__jj_num(a) > infer__jj_num(b);
    }
    if (a->type == INFER__JJ_STR && b->type == INFER__JJ_STR) {
        size_t n = INFER__MIN(a->u.s->len, b->u.s->len);
        int c;
        infer__jj_work(r, 0, n);
        c = memcmp(a->u.s->s, b->u.s->s, n);
        if (c) return c < 0 ? -1 : 1;
        return a->u.s->len < b->u.s->len ? -1 : a->u.s->len > b->u.s->len;
    }
    if (a->type == INFER__JJ_LIST && b->type == INFER__JJ_LIST && !((a->flags | b->flags) & INFER__JJ_LAZY)) {
        size_t i;
        if (++r->depth > r->lim.max_depth) infer__jj_fail(r, "comparison nested deeper than %d", r->lim.max_depth);
        for (i = 0; i < a->u.l->n && i < b->u.l->n; i++) {
            int c = infer__jj_cmp(r, &a->u.l->v[i], &b->u.l->v[i]);
            if (c) {
                r->depth--;
                return c;
            }
        }
        r->depth--;
        return a->u.l->n < b->u.l->n ? -1 : a->u.l->n > b->u.l->n;
    }
    infer__jj_fail(r, "TypeError: '<' not supported between instances of '%s' and '%s'", infer__jj_type_name(a),
                   infer__jj_type_name(b));
    return 0;
}

/* Python's repr of a float: the shortest digits that read back the same */
static void infer__jj_put_float(infer__jj_r *r, infer__jj_buf *b, double f) {
    char digits[40], out[64];
    int prec, exp10, nd, i;
    char *e, *o = out;
    if (f != f) {
        infer__jj_puts(r, b, "nan");
        return;
    }
    if (f == HUGE_VAL) {
        infer__jj_puts(r, b, "inf");
        return;
    }
    if (f == -HUGE_VAL) {
        infer__jj_puts(r, b, "-inf");
        return;
    }
    for (prec = 1; prec <= 17; prec++) {
        snprintf(digits, sizeof digits, "%.*e", prec - 1, f);
        if (strtod(digits, NULL) == f) break;
    }
    /* digits is [-]d[.ddd]e[+-]XX */
    if (digits[0] == '-') *o++ = '-';
    e = strchr(digits, 'e');
    exp10 = atoi(e + 1);
    {
        char mant[24];
        int m = 0;
        for (i = digits[0] == '-' ? 1 : 0; digits + i < e; i++)
            if (digits[i] != '.') mant[m++] = digits[i];
        while (m > 1 && mant[m - 1] == '0') m--;
        mant[m] = 0;
        nd = m;
        if (exp10 < -4 || exp10 >= 16) {
            *o++ = mant[0];
            if (nd > 1) {
                *o++ = '.';
                memcpy(o, mant + 1, (size_t)nd - 1);
                o += nd - 1;
            }
            o += sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        } else if (exp10 < 0) {
            *o++ = '0';
            *o++ = '.';
            for (i = 0; i < -exp10 - 1; i++) *o++ = '0';
            memcpy(o, mant, (size_t)nd);
            o += nd;
        } else {
            for (i = 0; i <= exp10; i++) *o++ = i < nd ? mant[i] : '0';
            *o++ = '.';
            if (nd > exp10 + 1) {
                memcpy(o, mant + exp10 + 1, (size_t)(nd - exp10 - 1));
                o += nd - exp10 - 1;
            } else {
                *o++ = '0';
            }
        }
    }
    *o = 0;
    infer__jj_puts(r, b, out);
}

static void infer__jj_put_int(infer__jj_r *r, infer__jj_buf *b, int64_t i) {
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)i);
    infer__jj_puts(r, b, t);
}

static void infer__jj_put_str(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *v);

/* Python's repr of a str */
static void infer__jj_put_repr_str(infer__jj_r *r, infer__jj_buf *b, const infer__jj_str *s) {
    char q = '\'';
    size_t i;
    if (memchr(s->s, '\'', s->len) && !memchr(s->s, '"', s->len)) q = '"';
    infer__jj_putc(r, b, q);
    for (i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->s[i];
        char t[8];
        if (c == '\\' || c == (unsigned char)q) {
            infer__jj_putc(r, b, '\\');
            infer__jj_putc(r, b, (char)c);
        } else if (c == '\n')
            infer__jj_puts(r, b, "\\n");
        else if (c == '\r')
            infer__jj_puts(r, b, "\\r");
        else if (c == '\t')
            infer__jj_puts(r, b, "\\t");
        else if (c < 0x20 || c == 0x7f) {
            snprintf(t, sizeof t, "\\x%02x", c);
            infer__jj_puts(r, b, t);
        } else
            infer__jj_putc(r, b, (char)c);
    }
    infer__jj_putc(r, b, q);
}

static void infer__jj_put_repr(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *v) {
    size_t i;
    if (++r->depth > r->lim.max_depth) infer__jj_fail(r, "nesting deeper than %d", r->lim.max_depth);
    switch (v->type) {
    case INFER__JJ_STR:
        if (v->flags & INFER__JJ_MARKUP) infer__jj_puts(r, b, "Markup(");
        infer__jj_put_repr_str(r, b, v->u.s);
        if (v->flags & INFER__JJ_MARKUP) infer__jj_putc(r, b, ')');
        break;
    case INFER__JJ_LIST:
        if (v->flags & INFER__JJ_LAZY) {
            infer__jj_puts(r, b, "<generator object>");
            break;
        }
        infer__jj_putc(r, b, v->flags & INFER__JJ_TUPLE ? '(' : '[');
        for (i = 0; i < v->u.l->n; i++) {
            if (i) infer__jj_puts(r, b, ", ");
            infer__jj_put_repr(r, b, &v->u.l->v[i]);
        }
        if ((v->flags & INFER__JJ_TUPLE) && v->u.l->n == 1) infer__jj_putc(r, b, ',');
        infer__jj_putc(r, b, v->flags & INFER__JJ_TUPLE ? ')' : ']');
        break;
    case INFER__JJ_DICT:
        infer__jj_putc(r, b, '{');
        for (i = 0; i < v->u.d->n; i++) {
            if (i) infer__jj_puts(r, b, ", ");
            infer__jj_put_repr(r, b, &v->u.d->k[i]);
            infer__jj_puts(r, b, ": ");
            infer__jj_put_repr(r, b, &v->u.d->v[i]);
        }
        infer__jj_putc(r, b, '}');
        break;
    case INFER__JJ_UNDEF: break;
    default: infer__jj_put_str(r, b, v);
    }
    r->depth--;
}

/* Python's str() */
static void infer__jj_put_str(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *v) {
    switch (v->type) {
    case INFER__JJ_UNDEF: break;
    case INFER__JJ_NONE: infer__jj_puts(r, b, "None"); break;
    case INFER__JJ_BOOL: infer__jj_puts(r, b, v->u.i ? "True" : "False"); break;
    case INFER__JJ_INT: infer__jj_put_int(r, b, v->u.i); break;
    case INFER__JJ_FLOAT: infer__jj_put_float(r, b, v->u.f); break;
    case INFER__JJ_STR: infer__jj_put(r, b, v->u.s->s, v->u.s->len); break;
    case INFER__JJ_LIST:
    case INFER__JJ_DICT: infer__jj_put_repr(r, b, v); break;
    case INFER__JJ_NS: infer__jj_puts(r, b, "<Namespace>"); break;
    case INFER__JJ_FUNC: infer__jj_puts(r, b, "<built-in method>"); break;
    case INFER__JJ_MACRO: infer__jj_puts(r, b, "<Macro>"); break;
    case INFER__JJ_LOOP: infer__jj_puts(r, b, "<LoopContext>"); break;
    }
}

static infer__jj_str *infer__jj_to_str(infer__jj_r *r, const infer__jj_val *v) {
    infer__jj_buf b = {0, 0, 0};
    if (v->type == INFER__JJ_STR) return v->u.s;
    infer__jj_put_str(r, &b, v);
    return infer__jj_newstr(r, b.p ? b.p : "", b.n);
}

/* ---- JSON: Python's json.dumps, and the context's reader ---------------------- */

static void infer__jj_put_json_str(infer__jj_r *r, infer__jj_buf *b, const char *s, size_t n, int ensure_ascii) {
    size_t i;
    char t[16];
    infer__jj_putc(r, b, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': infer__jj_puts(r, b, "\\\""); break;
        case '\\': infer__jj_puts(r, b, "\\\\"); break;
        case '\n': infer__jj_puts(r, b, "\\n"); break;
        case '\r': infer__jj_puts(r, b, "\\r"); break;
        case '\t': infer__jj_puts(r, b, "\\t"); break;
        case '\b': infer__jj_puts(r, b, "\\b"); break;
        case '\f': infer__jj_puts(r, b, "\\f"); break;
        default:
            if (c < 0x20) {
                snprintf(t, sizeof t, "\\u%04x", c);
                infer__jj_puts(r, b, t);
            } else if (c >= 0x80 && ensure_ascii) {
                const char *p = s + i;
                uint32_t cp;
                int len = infer__utf8_next(p, n - i, &cp);
                if (len <= 0) {
                    cp = 0xfffd;
                    len = 1;
                }
                p += len;
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
                } else
                    snprintf(t, sizeof t, "\\u%04x", cp);
                infer__jj_puts(r, b, t);
                i = (size_t)(p - s) - 1;
            } else
                infer__jj_putc(r, b, (char)c);
        }
    }
    infer__jj_putc(r, b, '"');
}

static void infer__jj_json_newline(infer__jj_r *r, infer__jj_buf *b, const infer__jj_json_opts *o, int level) {
    int i;
    infer__jj_putc(r, b, '\n');
    for (i = 0; i < level; i++) {
        if (o->indent_str)
            infer__jj_put(r, b, o->indent_str->s, o->indent_str->len);
        else {
            int k;
            for (k = 0; k < o->indent; k++) infer__jj_putc(r, b, ' ');
        }
    }
}

static void infer__jj_put_json(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *v, const infer__jj_json_opts *o,
                               int level);

static void infer__jj_put_json_key(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *k,
                                   const infer__jj_json_opts *o) {
    infer__jj_buf t = {0, 0, 0};
    switch (k->type) {
    case INFER__JJ_STR: infer__jj_put_json_str(r, b, k->u.s->s, k->u.s->len, o->ensure_ascii); return;
    case INFER__JJ_NONE: infer__jj_puts(r, b, "\"null\""); return;
    case INFER__JJ_BOOL: infer__jj_puts(r, b, k->u.i ? "\"true\"" : "\"false\""); return;
    case INFER__JJ_INT:
    case INFER__JJ_FLOAT:
        infer__jj_put_str(r, &t, k);
        infer__jj_putc(r, b, '"');
        infer__jj_put(r, b, t.p, t.n);
        infer__jj_putc(r, b, '"');
        return;
    default: infer__jj_fail(r, "TypeError: keys must be str, int, float, bool or None, not %s", infer__jj_type_name(k));
    }
}

static void infer__jj_put_json(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *v, const infer__jj_json_opts *o,
                               int level) {
    size_t i, n;
    if (++r->depth > r->lim.max_depth) infer__jj_fail(r, "nesting deeper than %d", r->lim.max_depth);
    switch (v->type) {
    case INFER__JJ_NONE: infer__jj_puts(r, b, "null"); break;
    case INFER__JJ_BOOL: infer__jj_puts(r, b, v->u.i ? "true" : "false"); break;
    case INFER__JJ_INT: infer__jj_put_int(r, b, v->u.i); break;
    case INFER__JJ_FLOAT:
        if (v->u.f != v->u.f)
            infer__jj_puts(r, b, "NaN");
        else if (v->u.f == HUGE_VAL)
            infer__jj_puts(r, b, "Infinity");
        else if (v->u.f == -HUGE_VAL)
            infer__jj_puts(r, b, "-Infinity");
        else
            infer__jj_put_float(r, b, v->u.f);
        break;
    case INFER__JJ_STR: infer__jj_put_json_str(r, b, v->u.s->s, v->u.s->len, o->ensure_ascii); break;
    case INFER__JJ_LIST:
        if (v->flags & INFER__JJ_LAZY)
            infer__jj_fail(r, "TypeError: Object of type generator is not JSON serializable");
        n = v->u.l->n;
        if (!n) {
            infer__jj_puts(r, b, "[]");
            break;
        }
        infer__jj_putc(r, b, '[');
        for (i = 0; i < n; i++) {
            if (i) infer__jj_puts(r, b, o->item_sep);
            if (o->indent >= 0) infer__jj_json_newline(r, b, o, level + 1);
            infer__jj_put_json(r, b, &v->u.l->v[i], o, level + 1);
        }
        if (o->indent >= 0) infer__jj_json_newline(r, b, o, level);
        infer__jj_putc(r, b, ']');
        break;
    case INFER__JJ_DICT: {
        size_t *order;
        n = v->u.d->n;
        if (!n) {
            infer__jj_puts(r, b, "{}");
            break;
        }
        order = (size_t *)infer__jj_alloc(r, n * sizeof *order);
        for (i = 0; i < n; i++) order[i] = i;
        if (o->sort_keys) { /* insertion sort: stable, and dicts are small */
            for (i = 1; i < n; i++) {
                size_t j = i, x = order[i];
                while (j > 0 && infer__jj_cmp(r, &v->u.d->k[order[j - 1]], &v->u.d->k[x]) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        infer__jj_putc(r, b, '{');
        for (i = 0; i < n; i++) {
            if (i) infer__jj_puts(r, b, o->item_sep);
            if (o->indent >= 0) infer__jj_json_newline(r, b, o, level + 1);
            infer__jj_put_json_key(r, b, &v->u.d->k[order[i]], o);
            infer__jj_puts(r, b, o->key_sep);
            infer__jj_put_json(r, b, &v->u.d->v[order[i]], o, level + 1);
        }
        if (o->indent >= 0) infer__jj_json_newline(r, b, o, level);
        infer__jj_putc(r, b, '}');
        break;
    }
    default: infer__jj_fail(r, "TypeError: Object of type %s is not JSON serializable", infer__jj_type_name(v));
    }
    r->depth--;
}

static void infer__jj_put_utf8(infer__jj_r *r, infer__jj_buf *b, uint32_t cp) {
    char t[4];
    size_t n = infer__utf8_encode(cp, t);
    infer__jj_put(r, b, t, n);
}

/* The context's JSON, parsed by json.c's reader, as template values:
   integers that fit in 64 bits as ints, other numbers as floats (as
   Python's json module reads them), a repeated key's last value kept. */
static infer__jj_val infer__jj_from_json(infer__jj_r *r, const infer__jv *j) {
    infer__jj_val v;
    size_t i, n;
    if (++r->depth > r->lim.max_depth) infer__jj_fail(r, "context JSON nested deeper than %d", r->lim.max_depth);
    switch (j->type) {
    case INFER__J_NULL: v = infer__jj_none(); break;
    case INFER__J_BOOL: v = infer__jj_bool(j->b); break;
    case INFER__J_STR: v = infer__jj_str_val(r, j->s ? j->s : "", j->n); break;
    case INFER__J_NUM: {
        char *end;
        long long x;
        errno = 0;
        x = strtoll(j->s, &end, 10);
        if (!errno && (size_t)(end - j->s) == j->n) v = infer__jj_int(x);
        else v = infer__jj_float(strtod(j->s, &end));
        break;
    }
    case INFER__J_ARR:
        v = infer__jj_new_list(r, 0, 0);
        n = (size_t)stbds_arrlen(j->items);
        for (i = 0; i < n; i++) infer__jj_list_push(r, v.u.l, infer__jj_from_json(r, &j->items[i]));
        break;
    default:
        v = infer__jj_new_dict(r, INFER__JJ_DICT);
        n = (size_t)stbds_arrlen(j->items);
        for (i = 0; i < n; i++)
            infer__jj_dict_set(r, v.u.d, infer__jj_str_val(r, j->keys[i], j->key_lens[i]),
                               infer__jj_from_json(r, &j->items[i]));
    }
    r->depth--;
    return v;
}
