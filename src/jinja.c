/* jinja.c - a sandboxed Jinja interpreter for chat templates: the subset of
   jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
   loopcontrols) that models' tokenizer.chat_template use, with Python's
   printing, comparison and string methods, rendering a JSON context.

   Every value of one render lives in one arena, freed at the end: an error
   anywhere longjmps back to infer_jinja_render, which frees the arena, so
   nothing leaks and no code path has to unwind by hand. The arena's total
   is the memory budget; steps (loop iterations, macro calls), nesting depth
   (parsing and evaluation, macro recursion included) and every string's
   length are bounded too, so a hostile template ends with a one-line error. */
#include "internal.h"

#include <setjmp.h>
#include <time.h>

/* ---- values ---------------------------------------------------------------- */

enum {
    JJ_UNDEF = 0, JJ_NONE, JJ_BOOL, JJ_INT, JJ_FLOAT, JJ_STR, JJ_LIST, JJ_DICT, JJ_NS, JJ_FUNC, JJ_MACRO, JJ_LOOP
};
/* flags of a value */
#define JJ_MARKUP 1 /* STR: |safe (markup + str escapes the str) */
#define JJ_TUPLE 2  /* LIST: printed (a, b) */
#define JJ_LAZY 4   /* LIST: the generator map/select give (no len, no tojson) */

typedef struct jj_str jj_str;
typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_func jj_func;
typedef struct jj_node jj_node;
typedef struct jj_loop jj_loop;

typedef struct jj_val {
    unsigned char type, flags;
    union {
        int64_t i;
        double f;
        jj_str *s; /* STR; UNDEF: the name it was looked up by, or NULL */
        jj_list *l;
        jj_dict *d; /* DICT, NS */
        jj_func *fn;
        jj_node *macro;
        jj_loop *loop;
    } u;
} jj_val;

struct jj_str {
    size_t len;
    char s[1]; /* len bytes and a NUL */
};
struct jj_list {
    jj_val *v;
    size_t n, cap;
};
struct jj_dict {
    jj_val *k, *v;
    size_t n, cap;
};
/* a for loop's "loop": one per loop, updated in place as jinja2's
   LoopContext is (so an iteration allocates nothing) */
struct jj_loop {
    jj_list *items;
    size_t i;
};
/* a builtin: a global function, or a method bound to self */
struct jj_func {
    const char *name;
    jj_val self;
};

/* ---- the render's state ------------------------------------------------------- */

typedef struct jj_chunk {
    struct jj_chunk *next;
    size_t used, cap;
    union {
        long double ld;
        void *p;
        int64_t i;
    } data[1];
} jj_chunk;

typedef struct jj_buf {
    char *p;
    size_t n, cap;
} jj_buf;

typedef struct jj_scope {
    struct jj_scope *parent;
    jj_dict *vars;
} jj_scope;

typedef struct jj_r {
    jmp_buf fail;
    char msg[256];
    int raised; /* the error is raise_exception's message */
    jj_chunk *chunks;
    size_t mem_used;
    infer_jinja_limits lim;
    long steps;
    int depth;
    jj_scope *root;
    jj_buf *out; /* where text goes now */
} jj_r;

static void jj_fail(jj_r *r, const char *fmt, ...) INFER__PRINTF(2, 3);
#if defined(__GNUC__)
static void jj_fail(jj_r *r, const char *fmt, ...) __attribute__((noreturn));
#endif
static void jj_fail(jj_r *r, const char *fmt, ...) {
    va_list ap;
    char *nl;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    /* one line, whatever the template's text held */
    while ((nl = strchr(r->msg, '\n'))) *nl = ' ';
    longjmp(r->fail, 1);
}

static void *jj_alloc(jj_r *r, size_t size) {
    jj_chunk *c = r->chunks;
    size_t align = sizeof c->data[0], need = (size + align - 1) / align * align;
    void *p;
    if (size > r->lim.max_memory) jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
    if (!c || c->cap - c->used < need) {
        size_t cap = need > 65536 ? need : 65536;
        if (r->mem_used + cap > r->lim.max_memory) jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
        c = (jj_chunk *)INFER_MALLOC(sizeof *c + cap);
        if (!c) jj_fail(r, "out of memory");
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

static void jj_free_all(jj_r *r) {
    while (r->chunks) {
        jj_chunk *next = r->chunks->next;
        INFER_FREE(r->chunks);
        r->chunks = next;
    }
}

/* ---- buffers and strings ---------------------------------------------------- */

static void jj_buf_room(jj_r *r, jj_buf *b, size_t more) {
    char *p;
    size_t cap;
    if (more > r->lim.max_output || b->n + more > r->lim.max_output)
        jj_fail(r, "output limit exceeded (%zu bytes)", r->lim.max_output);
    if (b->n + more + 1 <= b->cap) return;
    cap = b->cap ? b->cap : 64;
    while (cap < b->n + more + 1) cap *= 2;
    p = (char *)jj_alloc(r, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
}

static void jj_put(jj_r *r, jj_buf *b, const char *s, size_t n) {
    if (!n) return;
    jj_buf_room(r, b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void jj_puts(jj_r *r, jj_buf *b, const char *s) { jj_put(r, b, s, strlen(s)); }
static void jj_putc(jj_r *r, jj_buf *b, char c) { jj_put(r, b, &c, 1); }

static jj_str *jj_newstr(jj_r *r, const char *s, size_t n) {
    jj_str *x;
    if (n > r->lim.max_output) jj_fail(r, "string longer than the output limit (%zu bytes)", r->lim.max_output);
    x = (jj_str *)jj_alloc(r, sizeof *x + n);
    x->len = n;
    if (n) memcpy(x->s, s, n);
    x->s[n] = 0;
    return x;
}

static jj_val jj_str_val(jj_r *r, const char *s, size_t n) {
    jj_val v;
    v.type = JJ_STR;
    v.flags = 0;
    v.u.s = jj_newstr(r, s, n);
    return v;
}
static jj_val jj_cstr(jj_r *r, const char *s) { return jj_str_val(r, s, strlen(s)); }
static jj_val jj_buf_val(jj_r *r, const jj_buf *b) { return jj_str_val(r, b->p ? b->p : "", b->n); }

static jj_val jj_undef(jj_str *name) {
    jj_val v;
    v.type = JJ_UNDEF;
    v.flags = 0;
    v.u.s = name;
    return v;
}
static jj_val jj_none(void) {
    jj_val v;
    v.type = JJ_NONE;
    v.flags = 0;
    v.u.i = 0;
    return v;
}
static jj_val jj_bool(int b) {
    jj_val v;
    v.type = JJ_BOOL;
    v.flags = 0;
    v.u.i = b != 0;
    return v;
}
static jj_val jj_int(int64_t i) {
    jj_val v;
    v.type = JJ_INT;
    v.flags = 0;
    v.u.i = i;
    return v;
}
static jj_val jj_float(double f) {
    jj_val v;
    v.type = JJ_FLOAT;
    v.flags = 0;
    v.u.f = f;
    return v;
}

static jj_val jj_new_list(jj_r *r, size_t cap, int flags) {
    jj_val v;
    v.type = JJ_LIST;
    v.flags = (unsigned char)flags;
    v.u.l = (jj_list *)jj_alloc(r, sizeof *v.u.l);
    v.u.l->n = 0;
    v.u.l->cap = cap;
    if (cap > r->lim.max_memory / sizeof(jj_val)) jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
    v.u.l->v = cap ? (jj_val *)jj_alloc(r, cap * sizeof(jj_val)) : NULL;
    return v;
}

static void jj_list_push(jj_r *r, jj_list *l, jj_val x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jj_val *v;
        if (cap > r->lim.max_memory / sizeof(jj_val)) jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
        v = (jj_val *)jj_alloc(r, cap * sizeof(jj_val));
        if (l->n) memcpy(v, l->v, l->n * sizeof(jj_val));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static jj_val jj_new_dict(jj_r *r, int type) {
    jj_val v;
    v.type = (unsigned char)type;
    v.flags = 0;
    v.u.d = (jj_dict *)jj_alloc(r, sizeof *v.u.d);
    memset(v.u.d, 0, sizeof *v.u.d);
    return v;
}

static int jj_streq(const jj_str *a, const char *s, size_t n) { return a->len == n && !memcmp(a->s, s, n); }

static int jj_equal(const jj_val *a, const jj_val *b);

/* index of key in d, or -1 */
static long jj_dict_find(const jj_dict *d, const jj_val *key) {
    size_t i;
    for (i = 0; i < d->n; i++)
        if (jj_equal(&d->k[i], key)) return (long)i;
    return -1;
}
static long jj_dict_find_s(const jj_dict *d, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < d->n; i++)
        if (d->k[i].type == JJ_STR && jj_streq(d->k[i].u.s, s, n)) return (long)i;
    return -1;
}

static void jj_dict_set(jj_r *r, jj_dict *d, jj_val key, jj_val val) {
    long at = jj_dict_find(d, &key);
    if (at >= 0) {
        d->v[at] = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jj_val *k = (jj_val *)jj_alloc(r, cap * sizeof(jj_val)), *v = (jj_val *)jj_alloc(r, cap * sizeof(jj_val));
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof(jj_val));
            memcpy(v, d->v, d->n * sizeof(jj_val));
        }
        d->k = k;
        d->v = v;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

/* ---- Python semantics: truth, equality, printing ------------------------------ */

static int jj_truthy(const jj_val *v) {
    switch (v->type) {
    case JJ_UNDEF: case JJ_NONE: return 0;
    case JJ_BOOL: case JJ_INT: return v->u.i != 0;
    case JJ_FLOAT: return v->u.f != 0;
    case JJ_STR: return v->u.s->len != 0;
    case JJ_LIST: return (v->flags & JJ_LAZY) || v->u.l->n != 0;
    case JJ_DICT: return v->u.d->n != 0;
    default: return 1;
    }
}

static int jj_is_num(const jj_val *v) { return v->type == JJ_BOOL || v->type == JJ_INT || v->type == JJ_FLOAT; }
static double jj_num(const jj_val *v) { return v->type == JJ_FLOAT ? v->u.f : (double)v->u.i; }

static int jj_equal(const jj_val *a, const jj_val *b) {
    size_t i;
    if (jj_is_num(a) && jj_is_num(b)) {
        if (a->type != JJ_FLOAT && b->type != JJ_FLOAT) return a->u.i == b->u.i;
        return jj_num(a) == jj_num(b);
    }
    if (a->type != b->type) return 0;
    switch (a->type) {
    case JJ_UNDEF: case JJ_NONE: return 1;
    case JJ_STR: return a->u.s->len == b->u.s->len && !memcmp(a->u.s->s, b->u.s->s, a->u.s->len);
    case JJ_LIST:
        if ((a->flags & JJ_TUPLE) != (b->flags & JJ_TUPLE) || ((a->flags | b->flags) & JJ_LAZY))
            return a->u.l == b->u.l;
        if (a->u.l->n != b->u.l->n) return 0;
        for (i = 0; i < a->u.l->n; i++)
            if (!jj_equal(&a->u.l->v[i], &b->u.l->v[i])) return 0;
        return 1;
    case JJ_DICT:
        if (a->u.d->n != b->u.d->n) return 0;
        for (i = 0; i < a->u.d->n; i++) {
            long j = jj_dict_find(b->u.d, &a->u.d->k[i]);
            if (j < 0 || !jj_equal(&a->u.d->v[i], &b->u.d->v[j])) return 0;
        }
        return 1;
    case JJ_NS: return a->u.d == b->u.d;
    case JJ_FUNC: return a->u.fn == b->u.fn;
    case JJ_MACRO: return a->u.macro == b->u.macro;
    case JJ_LOOP: return a->u.loop == b->u.loop;
    default: return 0;
    }
}

static const char *jj_type_name(const jj_val *v) {
    static const char *names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                  "Namespace", "builtin_function_or_method", "Macro", "LoopContext"};
    if (v->type == JJ_LIST && (v->flags & JJ_LAZY)) return "generator";
    if (v->type == JJ_LIST && (v->flags & JJ_TUPLE)) return "tuple";
    return names[v->type];
}

/* Python's repr of a float: the shortest digits that read back the same */
static void jj_put_float(jj_r *r, jj_buf *b, double f) {
    char digits[40], out[64];
    int prec, exp10, nd, i;
    char *e, *o = out;
    if (f != f) { jj_puts(r, b, "nan"); return; }
    if (f == HUGE_VAL) { jj_puts(r, b, "inf"); return; }
    if (f == -HUGE_VAL) { jj_puts(r, b, "-inf"); return; }
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
    jj_puts(r, b, out);
}

static void jj_put_int(jj_r *r, jj_buf *b, int64_t i) {
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)i);
    jj_puts(r, b, t);
}

static void jj_put_str(jj_r *r, jj_buf *b, const jj_val *v);

/* Python's repr of a str */
static void jj_put_repr_str(jj_r *r, jj_buf *b, const jj_str *s) {
    char q = '\'';
    size_t i;
    if (memchr(s->s, '\'', s->len) && !memchr(s->s, '"', s->len)) q = '"';
    jj_putc(r, b, q);
    for (i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->s[i];
        char t[8];
        if (c == '\\' || c == (unsigned char)q) {
            jj_putc(r, b, '\\');
            jj_putc(r, b, (char)c);
        } else if (c == '\n') jj_puts(r, b, "\\n");
        else if (c == '\r') jj_puts(r, b, "\\r");
        else if (c == '\t') jj_puts(r, b, "\\t");
        else if (c < 0x20 || c == 0x7f) {
            snprintf(t, sizeof t, "\\x%02x", c);
            jj_puts(r, b, t);
        } else jj_putc(r, b, (char)c);
    }
    jj_putc(r, b, q);
}

static void jj_put_repr(jj_r *r, jj_buf *b, const jj_val *v) {
    size_t i;
    if (++r->depth > r->lim.max_depth) jj_fail(r, "nesting deeper than %d", r->lim.max_depth);
    switch (v->type) {
    case JJ_STR:
        if (v->flags & JJ_MARKUP) jj_puts(r, b, "Markup(");
        jj_put_repr_str(r, b, v->u.s);
        if (v->flags & JJ_MARKUP) jj_putc(r, b, ')');
        break;
    case JJ_LIST:
        if (v->flags & JJ_LAZY) {
            jj_puts(r, b, "<generator object>");
            break;
        }
        jj_putc(r, b, v->flags & JJ_TUPLE ? '(' : '[');
        for (i = 0; i < v->u.l->n; i++) {
            if (i) jj_puts(r, b, ", ");
            jj_put_repr(r, b, &v->u.l->v[i]);
        }
        if ((v->flags & JJ_TUPLE) && v->u.l->n == 1) jj_putc(r, b, ',');
        jj_putc(r, b, v->flags & JJ_TUPLE ? ')' : ']');
        break;
    case JJ_DICT:
        jj_putc(r, b, '{');
        for (i = 0; i < v->u.d->n; i++) {
            if (i) jj_puts(r, b, ", ");
            jj_put_repr(r, b, &v->u.d->k[i]);
            jj_puts(r, b, ": ");
            jj_put_repr(r, b, &v->u.d->v[i]);
        }
        jj_putc(r, b, '}');
        break;
    case JJ_UNDEF: break;
    default: jj_put_str(r, b, v);
    }
    r->depth--;
}

/* Python's str() */
static void jj_put_str(jj_r *r, jj_buf *b, const jj_val *v) {
    switch (v->type) {
    case JJ_UNDEF: break;
    case JJ_NONE: jj_puts(r, b, "None"); break;
    case JJ_BOOL: jj_puts(r, b, v->u.i ? "True" : "False"); break;
    case JJ_INT: jj_put_int(r, b, v->u.i); break;
    case JJ_FLOAT: jj_put_float(r, b, v->u.f); break;
    case JJ_STR: jj_put(r, b, v->u.s->s, v->u.s->len); break;
    case JJ_LIST: case JJ_DICT: jj_put_repr(r, b, v); break;
    case JJ_NS: jj_puts(r, b, "<Namespace>"); break;
    case JJ_FUNC: jj_puts(r, b, "<built-in method>"); break;
    case JJ_MACRO: jj_puts(r, b, "<Macro>"); break;
    case JJ_LOOP: jj_puts(r, b, "<LoopContext>"); break;
    }
}

static jj_str *jj_to_str(jj_r *r, const jj_val *v) {
    jj_buf b = {0, 0, 0};
    if (v->type == JJ_STR) return v->u.s;
    jj_put_str(r, &b, v);
    return jj_newstr(r, b.p ? b.p : "", b.n);
}

/* ---- JSON: Python's json.dumps, and the context's reader ---------------------- */

typedef struct jj_json_opts {
    int indent; /* -1: none */
    const jj_str *indent_str;
    const char *item_sep, *key_sep;
    int ensure_ascii, sort_keys;
} jj_json_opts;

static void jj_put_json_str(jj_r *r, jj_buf *b, const char *s, size_t n, int ensure_ascii) {
    size_t i;
    char t[16];
    jj_putc(r, b, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': jj_puts(r, b, "\\\""); break;
        case '\\': jj_puts(r, b, "\\\\"); break;
        case '\n': jj_puts(r, b, "\\n"); break;
        case '\r': jj_puts(r, b, "\\r"); break;
        case '\t': jj_puts(r, b, "\\t"); break;
        case '\b': jj_puts(r, b, "\\b"); break;
        case '\f': jj_puts(r, b, "\\f"); break;
        default:
            if (c < 0x20) {
                snprintf(t, sizeof t, "\\u%04x", c);
                jj_puts(r, b, t);
            } else if (c >= 0x80 && ensure_ascii) {
                const char *p = s + i;
                uint32_t cp;
                int len = infer__g_utf8(&p, &cp);
                if (len <= 0) {
                    cp = 0xfffd;
                    p = s + i + 1;
                }
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
                } else snprintf(t, sizeof t, "\\u%04x", cp);
                jj_puts(r, b, t);
                i = (size_t)(p - s) - 1;
            } else jj_putc(r, b, (char)c);
        }
    }
    jj_putc(r, b, '"');
}

static void jj_json_newline(jj_r *r, jj_buf *b, const jj_json_opts *o, int level) {
    int i;
    jj_putc(r, b, '\n');
    for (i = 0; i < level; i++) {
        if (o->indent_str) jj_put(r, b, o->indent_str->s, o->indent_str->len);
        else {
            int k;
            for (k = 0; k < o->indent; k++) jj_putc(r, b, ' ');
        }
    }
}

static void jj_put_json(jj_r *r, jj_buf *b, const jj_val *v, const jj_json_opts *o, int level);

static void jj_put_json_key(jj_r *r, jj_buf *b, const jj_val *k, const jj_json_opts *o) {
    jj_buf t = {0, 0, 0};
    switch (k->type) {
    case JJ_STR: jj_put_json_str(r, b, k->u.s->s, k->u.s->len, o->ensure_ascii); return;
    case JJ_NONE: jj_puts(r, b, "\"null\""); return;
    case JJ_BOOL: jj_puts(r, b, k->u.i ? "\"true\"" : "\"false\""); return;
    case JJ_INT: case JJ_FLOAT:
        jj_put_str(r, &t, k);
        jj_putc(r, b, '"');
        jj_put(r, b, t.p, t.n);
        jj_putc(r, b, '"');
        return;
    default: jj_fail(r, "TypeError: keys must be str, int, float, bool or None, not %s", jj_type_name(k));
    }
}

static int jj_cmp(jj_r *r, const jj_val *a, const jj_val *b);

static void jj_put_json(jj_r *r, jj_buf *b, const jj_val *v, const jj_json_opts *o, int level) {
    size_t i, n;
    if (++r->depth > r->lim.max_depth) jj_fail(r, "nesting deeper than %d", r->lim.max_depth);
    switch (v->type) {
    case JJ_NONE: jj_puts(r, b, "null"); break;
    case JJ_BOOL: jj_puts(r, b, v->u.i ? "true" : "false"); break;
    case JJ_INT: jj_put_int(r, b, v->u.i); break;
    case JJ_FLOAT:
        if (v->u.f != v->u.f) jj_puts(r, b, "NaN");
        else if (v->u.f == HUGE_VAL) jj_puts(r, b, "Infinity");
        else if (v->u.f == -HUGE_VAL) jj_puts(r, b, "-Infinity");
        else jj_put_float(r, b, v->u.f);
        break;
    case JJ_STR: jj_put_json_str(r, b, v->u.s->s, v->u.s->len, o->ensure_ascii); break;
    case JJ_LIST:
        if (v->flags & JJ_LAZY) jj_fail(r, "TypeError: Object of type generator is not JSON serializable");
        n = v->u.l->n;
        if (!n) {
            jj_puts(r, b, "[]");
            break;
        }
        jj_putc(r, b, '[');
        for (i = 0; i < n; i++) {
            if (i) jj_puts(r, b, o->item_sep);
            if (o->indent >= 0) jj_json_newline(r, b, o, level + 1);
            jj_put_json(r, b, &v->u.l->v[i], o, level + 1);
        }
        if (o->indent >= 0) jj_json_newline(r, b, o, level);
        jj_putc(r, b, ']');
        break;
    case JJ_DICT: {
        size_t *order;
        n = v->u.d->n;
        if (!n) {
            jj_puts(r, b, "{}");
            break;
        }
        order = (size_t *)jj_alloc(r, n * sizeof *order);
        for (i = 0; i < n; i++) order[i] = i;
        if (o->sort_keys) { /* insertion sort: stable, and dicts are small */
            for (i = 1; i < n; i++) {
                size_t j = i, x = order[i];
                while (j > 0 && jj_cmp(r, &v->u.d->k[order[j - 1]], &v->u.d->k[x]) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        jj_putc(r, b, '{');
        for (i = 0; i < n; i++) {
            if (i) jj_puts(r, b, o->item_sep);
            if (o->indent >= 0) jj_json_newline(r, b, o, level + 1);
            jj_put_json_key(r, b, &v->u.d->k[order[i]], o);
            jj_puts(r, b, o->key_sep);
            jj_put_json(r, b, &v->u.d->v[order[i]], o, level + 1);
        }
        if (o->indent >= 0) jj_json_newline(r, b, o, level);
        jj_putc(r, b, '}');
        break;
    }
    default: jj_fail(r, "TypeError: Object of type %s is not JSON serializable", jj_type_name(v));
    }
    r->depth--;
}

typedef struct jj_jp {
    jj_r *r;
    const char *p;
} jj_jp;

static void jj_jp_ws(jj_jp *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static void jj_put_utf8(jj_r *r, jj_buf *b, uint32_t cp) {
    char t[4];
    size_t n;
    if (cp < 0x80) { t[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { t[0] = (char)(0xc0 | cp >> 6); t[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        t[0] = (char)(0xe0 | cp >> 12); t[1] = (char)(0x80 | (cp >> 6 & 0x3f)); t[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        t[0] = (char)(0xf0 | cp >> 18); t[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        t[2] = (char)(0x80 | (cp >> 6 & 0x3f)); t[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    jj_put(r, b, t, n);
}

static int jj_hex4(const char *p, uint32_t *out) {
    int i, d;
    *out = 0;
    for (i = 0; i < 4; i++) {
        if ((d = infer__g_hex(p[i])) < 0) return 0;
        *out = *out << 4 | (uint32_t)d;
    }
    return 1;
}

static jj_val jj_jp_value(jj_jp *j);

static jj_val jj_jp_string(jj_jp *j) {
    jj_buf b = {0, 0, 0};
    j->p++;
    for (;;) {
        unsigned char c = (unsigned char)*j->p;
        if (!c) jj_fail(j->r, "context JSON: unterminated string");
        if (c == '"') break;
        if (c < 0x20) jj_fail(j->r, "context JSON: control character in a string");
        if (c != '\\') {
            const char *s = j->p;
            while (*j->p && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20) j->p++;
            jj_put(j->r, &b, s, (size_t)(j->p - s));
            continue;
        }
        j->p++;
        switch (*j->p) {
        case '"': jj_putc(j->r, &b, '"'); break;
        case '\\': jj_putc(j->r, &b, '\\'); break;
        case '/': jj_putc(j->r, &b, '/'); break;
        case 'b': jj_putc(j->r, &b, '\b'); break;
        case 'f': jj_putc(j->r, &b, '\f'); break;
        case 'n': jj_putc(j->r, &b, '\n'); break;
        case 'r': jj_putc(j->r, &b, '\r'); break;
        case 't': jj_putc(j->r, &b, '\t'); break;
        case 'u': {
            uint32_t cp, lo;
            if (!jj_hex4(j->p + 1, &cp)) jj_fail(j->r, "context JSON: bad \\u escape");
            j->p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && j->p[1] == '\\' && j->p[2] == 'u' && jj_hex4(j->p + 3, &lo) &&
                lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                j->p += 6;
            }
            jj_put_utf8(j->r, &b, cp);
            break;
        }
        default: jj_fail(j->r, "context JSON: bad escape");
        }
        j->p++;
    }
    j->p++;
    return jj_buf_val(j->r, &b);
}

static jj_val jj_jp_value(jj_jp *j) {
    jj_r *r = j->r;
    jj_val v;
    jj_jp_ws(j);
    if (++r->depth > r->lim.max_depth) jj_fail(r, "context JSON nested deeper than %d", r->lim.max_depth);
    if (*j->p == '{') {
        v = jj_new_dict(r, JJ_DICT);
        j->p++;
        jj_jp_ws(j);
        if (*j->p == '}') j->p++;
        else
            for (;;) {
                jj_val k, x;
                jj_jp_ws(j);
                if (*j->p != '"') jj_fail(r, "context JSON: expected a key");
                k = jj_jp_string(j);
                jj_jp_ws(j);
                if (*j->p++ != ':') jj_fail(r, "context JSON: expected ':'");
                x = jj_jp_value(j);
                jj_dict_set(r, v.u.d, k, x);
                jj_jp_ws(j);
                if (*j->p == ',') { j->p++; continue; }
                if (*j->p == '}') { j->p++; break; }
                jj_fail(r, "context JSON: expected ',' or '}'");
            }
    } else if (*j->p == '[') {
        v = jj_new_list(r, 0, 0);
        j->p++;
        jj_jp_ws(j);
        if (*j->p == ']') j->p++;
        else
            for (;;) {
                jj_list_push(r, v.u.l, jj_jp_value(j));
                jj_jp_ws(j);
                if (*j->p == ',') { j->p++; continue; }
                if (*j->p == ']') { j->p++; break; }
                jj_fail(r, "context JSON: expected ',' or ']'");
            }
    } else if (*j->p == '"') {
        v = jj_jp_string(j);
    } else if (!strncmp(j->p, "true", 4)) { j->p += 4; v = jj_bool(1); }
    else if (!strncmp(j->p, "false", 5)) { j->p += 5; v = jj_bool(0); }
    else if (!strncmp(j->p, "null", 4)) { j->p += 4; v = jj_none(); }
    else if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
        const char *s = j->p;
        int is_float = 0;
        char *end;
        if (*j->p == '-') j->p++;
        while ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || *j->p == 'e' || *j->p == 'E' ||
               ((*j->p == '+' || *j->p == '-') && (j->p[-1] == 'e' || j->p[-1] == 'E'))) {
            if (*j->p == '.' || *j->p == 'e' || *j->p == 'E') is_float = 1;
            j->p++;
        }
        if (!is_float) {
            long long x;
            errno = 0;
            x = strtoll(s, &end, 10);
            if (errno || end != j->p) is_float = 1;
            else v = jj_int(x);
        }
        if (is_float) {
            v = jj_float(strtod(s, &end));
            if (end != j->p) jj_fail(r, "context JSON: bad number");
        }
    } else jj_fail(r, "context JSON: unexpected character");
    r->depth--;
    return v;
}

/* ---- lexer ------------------------------------------------------------------------ */

enum { T_EOF = 0, T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP };

typedef struct jj_tok {
    int type, line;
    const char *s; /* NAME, OP: the text; TEXT: the text */
    size_t n;
    jj_val val; /* STRING, INT, FLOAT, TEXT */
} jj_tok;

typedef struct jj_lex {
    jj_r *r;
    const char *src; /* normalized */
    jj_tok *toks;
    size_t n, cap;
} jj_lex;

static jj_tok *jj_emit(jj_lex *L, int type, int line) {
    jj_tok *t;
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jj_tok *toks = (jj_tok *)jj_alloc(L->r, cap * sizeof *toks);
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

static int jj_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int jj_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int jj_digit(char c) { return c >= '0' && c <= '9'; }

static int jj_line_of(const char *src, const char *at) {
    int line = 1;
    for (; src < at; src++) line += *src == '\n';
    return line;
}

/* A string literal's body, Python's escapes decoded. */
static const char *jj_lex_string(jj_lex *L, const char *p, jj_tok *t) {
    jj_r *r = L->r;
    char q = *p++;
    jj_buf b = {0, 0, 0};
    while (*p != q) {
        if (!*p) jj_fail(r, "line %d: unterminated string literal", t->line);
        if (*p != '\\') {
            jj_putc(r, &b, *p++);
            continue;
        }
        p++;
        switch (*p) {
        case 'n': jj_putc(r, &b, '\n'); break;
        case 't': jj_putc(r, &b, '\t'); break;
        case 'r': jj_putc(r, &b, '\r'); break;
        case '\\': jj_putc(r, &b, '\\'); break;
        case '\'': jj_putc(r, &b, '\''); break;
        case '"': jj_putc(r, &b, '"'); break;
        case 'a': jj_putc(r, &b, '\a'); break;
        case 'b': jj_putc(r, &b, '\b'); break;
        case 'f': jj_putc(r, &b, '\f'); break;
        case 'v': jj_putc(r, &b, '\v'); break;
        case '0': jj_putc(r, &b, '\0'); break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
            int digits = *p == 'x' ? 2 : *p == 'u' ? 4 : 8, i, d;
            uint32_t cp = 0;
            for (i = 1; i <= digits; i++) {
                if ((d = infer__g_hex(p[i])) < 0) jj_fail(r, "line %d: bad \\%c escape", t->line, *p);
                cp = cp << 4 | (uint32_t)d;
            }
            if (cp > 0x10ffff) jj_fail(r, "line %d: bad \\%c escape", t->line, *p);
            jj_put_utf8(r, &b, cp);
            p += digits;
            break;
        }
        case 0: jj_fail(r, "line %d: unterminated string literal", t->line);
        default: /* Python keeps an unknown escape as it is */
            jj_putc(r, &b, '\\');
            jj_putc(r, &b, *p);
        }
        p++;
    }
    t->type = T_STRING;
    t->val = jj_buf_val(r, &b);
    return p + 1;
}

/* The tokens inside one {{ }} or {% %}; returns where the tag ends
   (after its closing), *strip_after set by a "-" before the closing. */
static const char *jj_lex_tag(jj_lex *L, const char *p, int block, int *strip_after, int *keep_after) {
    jj_r *r = L->r;
    int depth = 0, line;
    static const char *ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                                ".", ",", ":", "|", "(", ")", "[", "]", "{", "}"};
    for (;;) {
        size_t k;
        jj_tok *t;
        while (jj_space(*p)) p++;
        line = jj_line_of(L->src, p);
        if (!*p) jj_fail(r, "line %d: unclosed %s", line, block ? "{%" : "{{");
        if (depth == 0) {
            const char *close = block ? "%}" : "}}";
            if ((*p == '-' || *p == '+') && p[1] == close[0] && p[2] == close[1]) {
                *strip_after = *p == '-';
                *keep_after = *p == '+';
                jj_emit(L, block ? T_BLOCK_END : T_VAR_END, line);
                return p + 3;
            }
            if (p[0] == close[0] && p[1] == close[1]) {
                jj_emit(L, block ? T_BLOCK_END : T_VAR_END, line);
                return p + 2;
            }
        }
        t = jj_emit(L, T_OP, line);
        if (*p == '\'' || *p == '"') {
            p = jj_lex_string(L, p, t);
            continue;
        }
        if (jj_alpha(*p)) {
            t->type = T_NAME;
            t->s = p;
            while (jj_alpha(*p) || jj_digit(*p)) p++;
            t->n = (size_t)(p - t->s);
            continue;
        }
        if (jj_digit(*p)) {
            const char *s = p;
            char num[64];
            size_t n = 0;
            int is_float = 0;
            while (jj_digit(*p) || *p == '_') p++;
            /* a fraction only where digits follow the dot, and never after "x." (x.0 is an item) */
            if (*p == '.' && jj_digit(p[1]) && !(L->n >= 2 && t[-1].type == T_OP && t[-1].s[0] == '.')) {
                is_float = 1;
                p++;
                while (jj_digit(*p) || *p == '_') p++;
            }
            if ((*p == 'e' || *p == 'E') && (jj_digit(p[1]) || ((p[1] == '+' || p[1] == '-') && jj_digit(p[2])))) {
                is_float = 1;
                p += 2;
                while (jj_digit(*p) || *p == '_') p++;
            }
            for (; s < p && n < sizeof num - 1; s++)
                if (*s != '_') num[n++] = *s;
            num[n] = 0;
            if (is_float) {
                t->type = T_FLOAT;
                t->val = jj_float(strtod(num, NULL));
            } else {
                long long x;
                errno = 0;
                x = strtoll(num, NULL, 10);
                if (errno) jj_fail(r, "line %d: integer literal too large", line);
                t->type = T_INT;
                t->val = jj_int(x);
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
        if (k == sizeof ops / sizeof ops[0]) jj_fail(r, "line %d: unexpected character '%c'", line, *p);
        if (t->s[0] == '(' || t->s[0] == '[' || t->s[0] == '{') depth++;
        if (t->s[0] == ')' || t->s[0] == ']' || t->s[0] == '}') {
            if (depth == 0) jj_fail(r, "line %d: unexpected '%c'", line, t->s[0]);
            depth--;
        }
    }
}

static void jj_tokenize(jj_lex *L, const char *text) {
    jj_r *r = L->r;
    size_t n = strlen(text), i, o = 0;
    char *src = (char *)jj_alloc(r, n + 1);
    const char *p;
    int line_starting = 1;
    /* line endings normalised to \n; keep_trailing_newline=False drops one */
    for (i = 0; i < n; i++) {
        if (text[i] == '\r') {
            src[o++] = '\n';
            if (text[i + 1] == '\n') i++;
        } else src[o++] = text[i];
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
                jj_tok *t = jj_emit(L, T_TEXT, jj_line_of(src, p));
                t->val = jj_str_val(r, p, strlen(p));
            }
            break;
        }
        kind = tag[1];
        text_end = tag;
        if (tag[2] == '-') {
            while (text_end > p && jj_space(text_end[-1])) text_end--;
        } else if (kind != '{' && tag[2] != '+') {
            /* lstrip_blocks: only blanks between the line's start and the tag */
            const char *l = text_end;
            while (l > p && (l[-1] == ' ' || l[-1] == '\t')) l--;
            if ((l > p && l[-1] == '\n') || (l == p && line_starting)) text_end = l;
        }
        if (text_end > p) {
            jj_tok *t = jj_emit(L, T_TEXT, jj_line_of(src, p));
            t->val = jj_str_val(r, p, (size_t)(text_end - p));
        }
        p = tag + 2;
        if (*p == '-' || *p == '+') p++;
        if (kind == '#') {
            const char *end = strstr(p, "#}");
            if (!end) jj_fail(r, "line %d: unclosed comment", jj_line_of(src, tag));
            strip_after = end > p && end[-1] == '-';
            keep_after = end > p && end[-1] == '+';
            p = end + 2;
        } else {
            jj_emit(L, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, jj_line_of(src, tag));
            p = jj_lex_tag(L, p, kind == '%', &strip_after, &keep_after);
        }
        line_starting = 0;
        if (strip_after) {
            while (jj_space(*p)) {
                line_starting = *p == '\n';
                p++;
            }
        } else if (kind != '{' && !keep_after && *p == '\n') { /* trim_blocks */
            p++;
            line_starting = 1;
        }
    }
    jj_emit(L, T_EOF, jj_line_of(src, src + o));
}

/* ---- syntax tree ---------------------------------------------------------------- */

enum {
    N_LIT = 1, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_BIN, N_NEG,
    N_POS, N_AND, N_OR, N_NOT, N_COND, N_CONCAT, N_CMP,
    S_BODY, S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_FILTERBLOCK, S_BREAK, S_CONTINUE
};
/* binary operators and comparisons (N_BIN, N_CMP's op) */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN,
       OP_NOTIN };

struct jj_node {
    int kind, op, line;
    jj_val val;        /* LIT: the value; NAME, ATTR, FILTER, TEST, MACRO: the name (STR) */
    jj_node **kid;     /* children (some may be NULL) */
    jj_str **names;    /* CALL, FILTER, TEST: keyword names (NULL: positional); MACRO: parameters */
    int n;             /* kid (and names) count */
};

typedef struct jj_parser {
    jj_r *r;
    jj_tok *t; /* the current token */
    int depth;
} jj_parser;

static jj_node *jj_node_new(jj_parser *P, int kind, int n) {
    jj_node *x = (jj_node *)jj_alloc(P->r, sizeof *x);
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->line = P->t->line;
    x->n = n;
    if (n) {
        x->kid = (jj_node **)jj_alloc(P->r, (size_t)n * sizeof *x->kid);
        memset(x->kid, 0, (size_t)n * sizeof *x->kid);
    }
    return x;
}

/* children grown one at a time (argument lists, bodies) */
static void jj_node_add(jj_parser *P, jj_node *x, jj_node *kid, jj_str *name) {
    jj_node **kids = (jj_node **)jj_alloc(P->r, (size_t)(x->n + 1) * sizeof *kids);
    jj_str **names = (jj_str **)jj_alloc(P->r, (size_t)(x->n + 1) * sizeof *names);
    if (x->n) memcpy(kids, x->kid, (size_t)x->n * sizeof *kids);
    if (x->n && x->names) memcpy(names, x->names, (size_t)x->n * sizeof *names);
    else memset(names, 0, (size_t)(x->n + 1) * sizeof *names);
    kids[x->n] = kid;
    names[x->n] = name;
    x->kid = kids;
    x->names = names;
    x->n++;
}

static int jj_is_op(const jj_tok *t, const char *op) {
    return t->type == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static int jj_is_name(const jj_tok *t, const char *name) {
    return t->type == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static void jj_syntax(jj_parser *P, const char *what) {
    const jj_tok *t = P->t;
    if (t->type == T_NAME || t->type == T_OP)
        jj_fail(P->r, "line %d: syntax error: expected %s, got '%.*s'", t->line, what, (int)t->n, t->s);
    jj_fail(P->r, "line %d: syntax error: expected %s", t->line, what);
}

static void jj_expect_op(jj_parser *P, const char *op) {
    if (!jj_is_op(P->t, op)) {
        char what[16];
        snprintf(what, sizeof what, "'%s'", op);
        jj_syntax(P, what);
    }
    P->t++;
}

static jj_str *jj_expect_name(jj_parser *P) {
    jj_str *s;
    if (P->t->type != T_NAME) jj_syntax(P, "a name");
    s = jj_newstr(P->r, P->t->s, P->t->n);
    P->t++;
    return s;
}

static void jj_enter(jj_parser *P) {
    if (++P->depth > P->r->lim.max_depth)
        jj_fail(P->r, "line %d: template nested deeper than %d", P->t->line, P->r->lim.max_depth);
}

static jj_node *jj_p_expr(jj_parser *P);
static jj_node *jj_p_or(jj_parser *P);
static jj_node *jj_p_unary(jj_parser *P, int with_filter);
static jj_node *jj_p_primary(jj_parser *P);
static jj_node *jj_p_postfix(jj_parser *P, jj_node *x);

/* (args) of a call, filter or test: positional and name=value */
static void jj_p_args(jj_parser *P, jj_node *x) {
    jj_expect_op(P, "(");
    while (!jj_is_op(P->t, ")")) {
        if (P->t->type == T_NAME && jj_is_op(P->t + 1, "=")) {
            jj_str *name = jj_expect_name(P);
            P->t++;
            jj_node_add(P, x, jj_p_expr(P), name);
        } else {
            jj_node_add(P, x, jj_p_expr(P), NULL);
        }
        if (!jj_is_op(P->t, ",")) break;
        P->t++;
    }
    jj_expect_op(P, ")");
}

static jj_node *jj_p_filter(jj_parser *P, jj_node *x) {
    while (jj_is_op(P->t, "|") || jj_is_name(P->t, "is")) {
        if (jj_is_op(P->t, "|")) {
            jj_node *f = jj_node_new(P, N_FILTER, 0);
            P->t++;
            jj_node_add(P, f, x, NULL);
            f->val.type = JJ_STR;
            f->val.u.s = jj_expect_name(P);
            if (jj_is_op(P->t, "(")) jj_p_args(P, f);
            x = f;
        } else {
            jj_node *f = jj_node_new(P, N_TEST, 0);
            P->t++;
            if (jj_is_name(P->t, "not")) {
                f->op = 1;
                P->t++;
            }
            jj_node_add(P, f, x, NULL);
            f->val.type = JJ_STR;
            if (P->t->type == T_NAME && (jj_is_name(P->t, "none") || jj_is_name(P->t, "true") ||
                                         jj_is_name(P->t, "false"))) { /* keywords as test names */
                f->val.u.s = jj_expect_name(P);
            } else f->val.u.s = jj_expect_name(P);
            if (jj_is_op(P->t, "(")) jj_p_args(P, f);
            else if ((P->t->type == T_NAME || P->t->type == T_STRING || P->t->type == T_INT ||
                      P->t->type == T_FLOAT || jj_is_op(P->t, "[") || jj_is_op(P->t, "{")) &&
                     !jj_is_name(P->t, "else") && !jj_is_name(P->t, "or") && !jj_is_name(P->t, "and") &&
                     !jj_is_name(P->t, "if") && !jj_is_name(P->t, "in") && !jj_is_name(P->t, "is") &&
                     !jj_is_name(P->t, "not") && !jj_is_name(P->t, "for"))
                jj_node_add(P, f, jj_p_postfix(P, jj_p_primary(P)), NULL);
            x = f;
        }
    }
    return x;
}

static jj_node *jj_p_primary(jj_parser *P) {
    jj_tok *t = P->t;
    jj_node *x;
    if (t->type == T_NAME) {
        P->t++;
        if (jj_is_name(t, "true") || jj_is_name(t, "True") || jj_is_name(t, "false") || jj_is_name(t, "False")) {
            x = jj_node_new(P, N_LIT, 0);
            x->val = jj_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (jj_is_name(t, "none") || jj_is_name(t, "None")) {
            x = jj_node_new(P, N_LIT, 0);
            x->val = jj_none();
        } else {
            x = jj_node_new(P, N_NAME, 0);
            x->val.type = JJ_STR;
            x->val.u.s = jj_newstr(P->r, t->s, t->n);
        }
        return x;
    }
    if (t->type == T_STRING) { /* adjacent literals are one */
        jj_buf b = {0, 0, 0};
        while (P->t->type == T_STRING) {
            jj_put(P->r, &b, P->t->val.u.s->s, P->t->val.u.s->len);
            P->t++;
        }
        x = jj_node_new(P, N_LIT, 0);
        x->val = jj_buf_val(P->r, &b);
        return x;
    }
    if (t->type == T_INT || t->type == T_FLOAT) {
        P->t++;
        x = jj_node_new(P, N_LIT, 0);
        x->val = t->val;
        return x;
    }
    if (jj_is_op(t, "(")) {
        jj_node *first;
        P->t++;
        if (jj_is_op(P->t, ")")) {
            P->t++;
            return jj_node_new(P, N_TUPLE, 0);
        }
        first = jj_p_expr(P);
        if (jj_is_op(P->t, ")")) {
            P->t++;
            return first;
        }
        x = jj_node_new(P, N_TUPLE, 0);
        jj_node_add(P, x, first, NULL);
        while (jj_is_op(P->t, ",")) {
            P->t++;
            if (jj_is_op(P->t, ")")) break;
            jj_node_add(P, x, jj_p_expr(P), NULL);
        }
        jj_expect_op(P, ")");
        return x;
    }
    if (jj_is_op(t, "[")) {
        P->t++;
        x = jj_node_new(P, N_LIST, 0);
        while (!jj_is_op(P->t, "]")) {
            jj_node_add(P, x, jj_p_expr(P), NULL);
            if (!jj_is_op(P->t, ",")) break;
            P->t++;
        }
        jj_expect_op(P, "]");
        return x;
    }
    if (jj_is_op(t, "{")) {
        P->t++;
        x = jj_node_new(P, N_DICT, 0);
        while (!jj_is_op(P->t, "}")) {
            jj_node_add(P, x, jj_p_expr(P), NULL);
            jj_expect_op(P, ":");
            jj_node_add(P, x, jj_p_expr(P), NULL);
            if (!jj_is_op(P->t, ",")) break;
            P->t++;
        }
        jj_expect_op(P, "}");
        return x;
    }
    jj_syntax(P, "an expression");
    return NULL;
}

static jj_node *jj_p_postfix(jj_parser *P, jj_node *x) {
    for (;;) {
        if (jj_is_op(P->t, ".")) {
            jj_node *a;
            P->t++;
            if (P->t->type == T_INT) { /* x.0 is x[0] */
                a = jj_node_new(P, N_ITEM, 2);
                a->kid[0] = x;
                a->kid[1] = jj_node_new(P, N_LIT, 0);
                a->kid[1]->val = P->t->val;
                P->t++;
            } else {
                a = jj_node_new(P, N_ATTR, 1);
                a->kid[0] = x;
                a->val.type = JJ_STR;
                a->val.u.s = jj_expect_name(P);
            }
            x = a;
        } else if (jj_is_op(P->t, "[")) {
            jj_node *parts[3] = {NULL, NULL, NULL}, *a;
            int k = 0, is_slice = 0;
            P->t++;
            for (;;) {
                if (!jj_is_op(P->t, ":") && !jj_is_op(P->t, "]")) parts[k] = jj_p_expr(P);
                if (jj_is_op(P->t, ":") && k < 2) {
                    is_slice = 1;
                    k++;
                    P->t++;
                    continue;
                }
                break;
            }
            jj_expect_op(P, "]");
            if (is_slice) {
                a = jj_node_new(P, N_SLICE, 4);
                a->kid[1] = parts[0];
                a->kid[2] = parts[1];
                a->kid[3] = parts[2];
            } else {
                if (!parts[0]) jj_syntax(P, "a subscript");
                a = jj_node_new(P, N_ITEM, 2);
                a->kid[1] = parts[0];
            }
            a->kid[0] = x;
            x = a;
        } else if (jj_is_op(P->t, "(")) {
            jj_node *c = jj_node_new(P, N_CALL, 0);
            jj_node_add(P, c, x, NULL);
            jj_p_args(P, c);
            x = c;
        } else return x;
    }
}

static jj_node *jj_p_unary(jj_parser *P, int with_filter) {
    jj_node *x;
    jj_enter(P);
    if (jj_is_op(P->t, "-") || jj_is_op(P->t, "+")) {
        x = jj_node_new(P, P->t->s[0] == '-' ? N_NEG : N_POS, 1);
        P->t++;
        x->kid[0] = jj_p_unary(P, 0);
    } else {
        x = jj_p_postfix(P, jj_p_primary(P));
    }
    if (with_filter) x = jj_p_filter(P, x);
    P->depth--;
    return x;
}

static jj_node *jj_bin(jj_parser *P, int kind, int op, jj_node *a, jj_node *b) {
    jj_node *x = jj_node_new(P, kind, 2);
    x->op = op;
    x->kid[0] = a;
    x->kid[1] = b;
    return x;
}

static jj_node *jj_p_pow(jj_parser *P) {
    jj_node *x = jj_p_unary(P, 1);
    while (jj_is_op(P->t, "**")) {
        P->t++;
        x = jj_bin(P, N_BIN, OP_POW, x, jj_p_unary(P, 1));
    }
    return x;
}

static jj_node *jj_p_math2(jj_parser *P) {
    jj_node *x = jj_p_pow(P);
    for (;;) {
        int op = jj_is_op(P->t, "*") ? OP_MUL : jj_is_op(P->t, "/") ? OP_DIV : jj_is_op(P->t, "//") ? OP_FLOORDIV
                 : jj_is_op(P->t, "%") ? OP_MOD : 0;
        if (!op) return x;
        P->t++;
        x = jj_bin(P, N_BIN, op, x, jj_p_pow(P));
    }
}

static jj_node *jj_p_concat(jj_parser *P) {
    jj_node *x = jj_p_math2(P), *c;
    if (!jj_is_op(P->t, "~")) return x;
    c = jj_node_new(P, N_CONCAT, 0);
    jj_node_add(P, c, x, NULL);
    while (jj_is_op(P->t, "~")) {
        P->t++;
        jj_node_add(P, c, jj_p_math2(P), NULL);
    }
    return c;
}

static jj_node *jj_p_math1(jj_parser *P) {
    jj_node *x = jj_p_concat(P);
    for (;;) {
        int op = jj_is_op(P->t, "+") ? OP_ADD : jj_is_op(P->t, "-") ? OP_SUB : 0;
        if (!op) return x;
        P->t++;
        x = jj_bin(P, N_BIN, op, x, jj_p_concat(P));
    }
}

static jj_node *jj_p_compare(jj_parser *P) {
    jj_node *x = jj_p_math1(P), *chain = NULL;
    for (;;) {
        int op;
        jj_tok *t = P->t;
        if (jj_is_op(t, "==")) op = OP_EQ;
        else if (jj_is_op(t, "!=")) op = OP_NE;
        else if (jj_is_op(t, "<")) op = OP_LT;
        else if (jj_is_op(t, "<=")) op = OP_LE;
        else if (jj_is_op(t, ">")) op = OP_GT;
        else if (jj_is_op(t, ">=")) op = OP_GE;
        else if (jj_is_name(t, "in")) op = OP_IN;
        else if (jj_is_name(t, "not") && jj_is_name(t + 1, "in")) {
            op = OP_NOTIN;
            P->t++;
        } else break;
        P->t++;
        /* a < b < c is (a < b) and (b < c), b evaluated twice (it has no side effects here) */
        {
            jj_node *left = chain ? chain->kid[1] : x, *cmp = jj_bin(P, N_CMP, op, left, jj_p_math1(P));
            if (!chain) x = cmp;
            else x = jj_bin(P, N_AND, 0, x, cmp);
            chain = cmp;
        }
    }
    return x;
}

static jj_node *jj_p_not(jj_parser *P) {
    jj_node *x;
    if (jj_is_name(P->t, "not")) {
        jj_enter(P);
        P->t++;
        x = jj_node_new(P, N_NOT, 1);
        x->kid[0] = jj_p_not(P);
        P->depth--;
        return x;
    }
    return jj_p_compare(P);
}

static jj_node *jj_p_and(jj_parser *P) {
    jj_node *x = jj_p_not(P);
    while (jj_is_name(P->t, "and")) {
        P->t++;
        x = jj_bin(P, N_AND, 0, x, jj_p_not(P));
    }
    return x;
}

static jj_node *jj_p_or(jj_parser *P) {
    jj_node *x = jj_p_and(P);
    while (jj_is_name(P->t, "or")) {
        P->t++;
        x = jj_bin(P, N_OR, 0, x, jj_p_and(P));
    }
    return x;
}

static jj_node *jj_p_expr(jj_parser *P) {
    jj_node *x;
    jj_enter(P);
    x = jj_p_or(P);
    while (jj_is_name(P->t, "if")) {
        jj_node *c = jj_node_new(P, N_COND, 3);
        P->t++;
        c->kid[0] = x;
        c->kid[1] = jj_p_or(P);
        if (jj_is_name(P->t, "else")) {
            P->t++;
            c->kid[2] = jj_p_expr(P);
        }
        x = c;
    }
    P->depth--;
    return x;
}

/* an expression, or a tuple of them without parentheses (a, b) */
static jj_node *jj_p_tuple(jj_parser *P) {
    jj_node *x = jj_p_expr(P), *t;
    if (!jj_is_op(P->t, ",")) return x;
    t = jj_node_new(P, N_TUPLE, 0);
    jj_node_add(P, t, x, NULL);
    while (jj_is_op(P->t, ",")) {
        P->t++;
        if (P->t->type == T_BLOCK_END || P->t->type == T_VAR_END) break;
        jj_node_add(P, t, jj_p_expr(P), NULL);
    }
    return t;
}

/* assignment targets: name, name.attr, or names separated by commas */
static jj_node *jj_p_target(jj_parser *P, int allow_attr) {
    jj_node *x = jj_node_new(P, N_NAME, 0), *t;
    x->val.type = JJ_STR;
    x->val.u.s = jj_expect_name(P);
    if (allow_attr && jj_is_op(P->t, ".")) {
        jj_node *a = jj_node_new(P, N_ATTR, 1);
        P->t++;
        a->kid[0] = x;
        a->val.type = JJ_STR;
        a->val.u.s = jj_expect_name(P);
        return a;
    }
    if (!jj_is_op(P->t, ",")) return x;
    t = jj_node_new(P, N_TUPLE, 0);
    jj_node_add(P, t, x, NULL);
    while (jj_is_op(P->t, ",")) {
        jj_node *y = jj_node_new(P, N_NAME, 0);
        P->t++;
        y->val.type = JJ_STR;
        y->val.u.s = jj_expect_name(P);
        jj_node_add(P, t, y, NULL);
    }
    return t;
}

static void jj_block_end(jj_parser *P) {
    if (P->t->type != T_BLOCK_END) jj_syntax(P, "'%}'");
    P->t++;
}

/* statements up to one of the block tags in ends (NULL-terminated), which
   is left as the current token (its name); at the top level ends is NULL */
static jj_node *jj_p_body(jj_parser *P, const char *const *ends);

static const char *jj_p_until(jj_parser *P, jj_node **body, const char *const *ends) {
    const char *const *e;
    *body = jj_p_body(P, ends);
    for (e = ends; *e; e++)
        if (jj_is_name(P->t, *e)) {
            P->t++;
            return *e;
        }
    return NULL;
}

static jj_node *jj_p_if(jj_parser *P) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jj_node *x = jj_node_new(P, S_IF, 3);
    const char *end;
    x->kid[0] = jj_p_tuple(P);
    jj_block_end(P);
    end = jj_p_until(P, &x->kid[1], ends);
    if (!strcmp(end, "elif")) {
        x->kid[2] = jj_p_if(P);
        return x;
    }
    if (!strcmp(end, "else")) {
        static const char *const endif[] = {"endif", NULL};
        jj_block_end(P);
        jj_p_until(P, &x->kid[2], endif);
    }
    jj_block_end(P);
    return x;
}

static jj_node *jj_p_statement(jj_parser *P) {
    jj_tok *t = P->t;
    jj_node *x;
    if (jj_is_name(t, "if")) {
        P->t++;
        return jj_p_if(P);
    }
    if (jj_is_name(t, "for")) {
        static const char *const ends[] = {"else", "endfor", NULL};
        /* kids: target, iterable, body, else body, filter */
        x = jj_node_new(P, S_FOR, 5);
        P->t++;
        x->kid[0] = jj_p_target(P, 0);
        if (!jj_is_name(P->t, "in")) jj_syntax(P, "'in'");
        P->t++;
        x->kid[1] = jj_p_or(P); /* "if" here filters, never a conditional expression */
        if (jj_is_name(P->t, "if")) {
            P->t++;
            x->kid[4] = jj_p_expr(P);
        }
        if (jj_is_name(P->t, "recursive")) jj_fail(P->r, "line %d: recursive loops are not supported", t->line);
        jj_block_end(P);
        if (!strcmp(jj_p_until(P, &x->kid[2], ends), "else")) {
            static const char *const endfor[] = {"endfor", NULL};
            jj_block_end(P);
            jj_p_until(P, &x->kid[3], endfor);
        }
        jj_block_end(P);
        return x;
    }
    if (jj_is_name(t, "set")) {
        jj_node *target;
        P->t++;
        target = jj_p_target(P, 1);
        if (jj_is_op(P->t, "=")) {
            x = jj_node_new(P, S_SET, 2);
            P->t++;
            x->kid[0] = target;
            x->kid[1] = jj_p_tuple(P);
            jj_block_end(P);
            return x;
        } else {
            static const char *const ends[] = {"endset", NULL};
            /* kids: target, body, filter (its input NULL) */
            x = jj_node_new(P, S_SETBLOCK, 3);
            x->kid[0] = target;
            if (jj_is_op(P->t, "|")) x->kid[2] = jj_p_filter(P, NULL);
            jj_block_end(P);
            jj_p_until(P, &x->kid[1], ends);
            jj_block_end(P);
            return x;
        }
    }
    if (jj_is_name(t, "macro")) {
        static const char *const ends[] = {"endmacro", NULL};
        /* kids: body, then the parameters' defaults (NULL: none) */
        x = jj_node_new(P, S_MACRO, 0);
        P->t++;
        x->val.type = JJ_STR;
        x->val.u.s = jj_expect_name(P);
        jj_node_add(P, x, NULL, NULL);
        jj_expect_op(P, "(");
        while (!jj_is_op(P->t, ")")) {
            jj_str *name = jj_expect_name(P);
            jj_node *def = NULL;
            if (jj_is_op(P->t, "=")) {
                P->t++;
                def = jj_p_expr(P);
            }
            jj_node_add(P, x, def, name);
            if (!jj_is_op(P->t, ",")) break;
            P->t++;
        }
        jj_expect_op(P, ")");
        jj_block_end(P);
        jj_p_until(P, &x->kid[0], ends);
        if (P->t->type == T_NAME) P->t++; /* {% endmacro name %} */
        jj_block_end(P);
        return x;
    }
    if (jj_is_name(t, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        x = jj_node_new(P, S_FILTERBLOCK, 2);
        {
            /* "name(args) | name2 ...": a filter chain on no input ("filter" stands for the first "|") */
            jj_node *f = jj_node_new(P, N_FILTER, 0);
            P->t++;
            jj_node_add(P, f, NULL, NULL);
            f->val.type = JJ_STR;
            f->val.u.s = jj_expect_name(P);
            if (jj_is_op(P->t, "(")) jj_p_args(P, f);
            x->kid[1] = jj_p_filter(P, f);
        }
        jj_block_end(P);
        jj_p_until(P, &x->kid[0], ends);
        jj_block_end(P);
        return x;
    }
    if (jj_is_name(t, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        P->t++;
        jj_block_end(P);
        jj_p_until(P, &x, ends);
        jj_block_end(P);
        return x;
    }
    if (jj_is_name(t, "break") || jj_is_name(t, "continue")) {
        x = jj_node_new(P, t->s[0] == 'b' ? S_BREAK : S_CONTINUE, 0);
        P->t++;
        jj_block_end(P);
        return x;
    }
    if (t->type == T_NAME)
        jj_fail(P->r, "line %d: unknown or unsupported tag '%.*s'", t->line, (int)t->n, t->s);
    jj_syntax(P, "a statement");
    return NULL;
}

static jj_node *jj_p_body(jj_parser *P, const char *const *ends) {
    jj_node *body = jj_node_new(P, S_BODY, 0);
    jj_enter(P);
    for (;;) {
        jj_tok *t = P->t;
        if (t->type == T_EOF) {
            if (ends) jj_fail(P->r, "line %d: missing {%% %s %%}", t->line, ends[0]);
            break;
        }
        if (t->type == T_TEXT) {
            jj_node *x = jj_node_new(P, S_TEXT, 0);
            x->val = t->val;
            P->t++;
            jj_node_add(P, body, x, NULL);
        } else if (t->type == T_VAR_BEGIN) {
            jj_node *x = jj_node_new(P, S_OUT, 1);
            P->t++;
            x->kid[0] = jj_p_tuple(P);
            if (P->t->type != T_VAR_END) jj_syntax(P, "'}}'");
            P->t++;
            jj_node_add(P, body, x, NULL);
        } else if (t->type == T_BLOCK_BEGIN) {
            const char *const *e;
            P->t++;
            if (ends)
                for (e = ends; *e; e++)
                    if (jj_is_name(P->t, *e)) {
                        P->depth--;
                        return body;
                    }
            jj_node_add(P, body, jj_p_statement(P), NULL);
        } else jj_syntax(P, "text or a tag");
    }
    P->depth--;
    return body;
}

/* ---- evaluation ---------------------------------------------------------------------- */

static jj_val jj_eval(jj_r *r, jj_scope *s, jj_node *x);
static int jj_exec(jj_r *r, jj_scope *s, jj_node *x);

static void jj_step(jj_r *r) {
    if (++r->steps > r->lim.max_steps) jj_fail(r, "step limit exceeded (%ld loop iterations and calls)", r->lim.max_steps);
}

static jj_val jj_lookup(jj_scope *s, jj_str *name) {
    for (; s; s = s->parent) {
        long i = jj_dict_find_s(s->vars, name->s, name->len);
        if (i >= 0) return s->vars->v[i];
    }
    return jj_undef(name);
}

static void jj_assign(jj_r *r, jj_scope *s, jj_str *name, jj_val v) {
    jj_val k;
    k.type = JJ_STR;
    k.flags = 0;
    k.u.s = name;
    jj_dict_set(r, s->vars, k, v);
}

static jj_scope *jj_new_scope(jj_r *r, jj_scope *parent) {
    jj_scope *s = (jj_scope *)jj_alloc(r, sizeof *s);
    s->parent = parent;
    s->vars = jj_new_dict(r, JJ_DICT).u.d;
    return s;
}

/* UTF-8 code points: count, and the byte offset of the i-th */
static size_t jj_cp_count(const jj_str *s) {
    size_t i, n = 0;
    for (i = 0; i < s->len; i++) n += ((unsigned char)s->s[i] & 0xc0) != 0x80;
    return n;
}
static size_t jj_cp_offset(const jj_str *s, size_t cp) {
    size_t i, n = 0;
    for (i = 0; i < s->len; i++)
        if (((unsigned char)s->s[i] & 0xc0) != 0x80) {
            if (n == cp) return i;
            n++;
        }
    return s->len;
}

static void jj_undef_fail(jj_r *r, const jj_val *v, const char *what) {
    if (v->u.s) jj_fail(r, "UndefinedError: '%s' is undefined (%s)", v->u.s->s, what);
    jj_fail(r, "UndefinedError: undefined value (%s)", what);
}

/* the items a value iterates over (dict: keys; str: characters) */
static jj_list *jj_iter(jj_r *r, const jj_val *v) {
    jj_val l;
    size_t i;
    switch (v->type) {
    case JJ_LIST: return v->u.l;
    case JJ_UNDEF: return jj_new_list(r, 0, 0).u.l;
    case JJ_DICT:
        l = jj_new_list(r, v->u.d->n, 0);
        for (i = 0; i < v->u.d->n; i++) l.u.l->v[i] = v->u.d->k[i];
        l.u.l->n = v->u.d->n;
        return l.u.l;
    case JJ_STR: {
        const jj_str *s = v->u.s;
        l = jj_new_list(r, jj_cp_count(s), 0);
        for (i = 0; i < s->len;) {
            size_t j = i + 1;
            while (j < s->len && ((unsigned char)s->s[j] & 0xc0) == 0x80) j++;
            l.u.l->v[l.u.l->n++] = jj_str_val(r, s->s + i, j - i);
            i = j;
        }
        return l.u.l;
    }
    default: jj_fail(r, "TypeError: '%s' object is not iterable", jj_type_name(v));
    }
    return NULL;
}

static int64_t jj_length(jj_r *r, const jj_val *v) {
    switch (v->type) {
    case JJ_UNDEF: return 0;
    case JJ_STR: return (int64_t)jj_cp_count(v->u.s);
    case JJ_LIST:
        if (v->flags & JJ_LAZY) jj_fail(r, "TypeError: object of type 'generator' has no len()");
        return (int64_t)v->u.l->n;
    case JJ_DICT: return (int64_t)v->u.d->n;
    default: jj_fail(r, "TypeError: object of type '%s' has no len()", jj_type_name(v));
    }
    return 0;
}

static int jj_cmp(jj_r *r, const jj_val *a, const jj_val *b) {
    if (jj_is_num(a) && jj_is_num(b)) {
        if (a->type != JJ_FLOAT && b->type != JJ_FLOAT) return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
        return jj_num(a) < jj_num(b) ? -1 : jj_num(a) > jj_num(b);
    }
    if (a->type == JJ_STR && b->type == JJ_STR) {
        size_t n = INFER__MIN(a->u.s->len, b->u.s->len);
        int c = memcmp(a->u.s->s, b->u.s->s, n);
        if (c) return c < 0 ? -1 : 1;
        return a->u.s->len < b->u.s->len ? -1 : a->u.s->len > b->u.s->len;
    }
    if (a->type == JJ_LIST && b->type == JJ_LIST && !((a->flags | b->flags) & JJ_LAZY)) {
        size_t i;
        for (i = 0; i < a->u.l->n && i < b->u.l->n; i++) {
            int c = jj_cmp(r, &a->u.l->v[i], &b->u.l->v[i]);
            if (c) return c;
        }
        return a->u.l->n < b->u.l->n ? -1 : a->u.l->n > b->u.l->n;
    }
    jj_fail(r, "TypeError: '<' not supported between instances of '%s' and '%s'", jj_type_name(a), jj_type_name(b));
    return 0;
}

static int jj_contains(jj_r *r, const jj_val *hay, const jj_val *needle) {
    size_t i;
    switch (hay->type) {
    case JJ_STR:
        if (needle->type != JJ_STR)
            jj_fail(r, "TypeError: 'in <string>' requires string as left operand, not %s", jj_type_name(needle));
        if (!needle->u.s->len) return 1;
        if (needle->u.s->len > hay->u.s->len) return 0;
        for (i = 0; i + needle->u.s->len <= hay->u.s->len; i++)
            if (!memcmp(hay->u.s->s + i, needle->u.s->s, needle->u.s->len)) return 1;
        return 0;
    case JJ_LIST:
        for (i = 0; i < hay->u.l->n; i++)
            if (jj_equal(&hay->u.l->v[i], needle)) return 1;
        return 0;
    case JJ_DICT: return jj_dict_find(hay->u.d, needle) >= 0;
    case JJ_UNDEF: return 0;
    default: jj_fail(r, "TypeError: argument of type '%s' is not iterable", jj_type_name(hay));
    }
    return 0;
}

static jj_val jj_escape(jj_r *r, const jj_val *v) {
    jj_buf b = {0, 0, 0};
    jj_str *s;
    size_t i;
    jj_val out;
    if (v->type == JJ_STR && (v->flags & JJ_MARKUP)) return *v;
    s = jj_to_str(r, v);
    for (i = 0; i < s->len; i++) {
        switch (s->s[i]) {
        case '&': jj_puts(r, &b, "&amp;"); break;
        case '<': jj_puts(r, &b, "&lt;"); break;
        case '>': jj_puts(r, &b, "&gt;"); break;
        case '"': jj_puts(r, &b, "&#34;"); break;
        case '\'': jj_puts(r, &b, "&#39;"); break;
        default: jj_putc(r, &b, s->s[i]);
        }
    }
    out = jj_buf_val(r, &b);
    out.flags = JJ_MARKUP;
    return out;
}

static jj_val jj_concat2(jj_r *r, const jj_str *a, const jj_str *b) {
    jj_val v;
    if (a->len + b->len > r->lim.max_output || a->len + b->len < a->len)
        jj_fail(r, "string longer than the output limit (%zu bytes)", r->lim.max_output);
    v.type = JJ_STR;
    v.flags = 0;
    v.u.s = (jj_str *)jj_alloc(r, sizeof *v.u.s + a->len + b->len);
    v.u.s->len = a->len + b->len;
    memcpy(v.u.s->s, a->s, a->len);
    memcpy(v.u.s->s + a->len, b->s, b->len);
    v.u.s->s[v.u.s->len] = 0;
    return v;
}

static int64_t jj_floordiv_i(jj_r *r, int64_t a, int64_t b) {
    int64_t q;
    if (!b) jj_fail(r, "ZeroDivisionError: integer division or modulo by zero");
    if (a == INT64_MIN && b == -1) jj_fail(r, "OverflowError: integer overflow");
    q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

static jj_val jj_repeat(jj_r *r, const jj_val *seq, int64_t n) {
    int64_t i;
    if (n < 0) n = 0;
    if (seq->type == JJ_STR) {
        jj_buf b = {0, 0, 0};
        if (n && seq->u.s->len && (uint64_t)n > r->lim.max_output / seq->u.s->len)
            jj_fail(r, "string longer than the output limit (%zu bytes)", r->lim.max_output);
        for (i = 0; i < n; i++) jj_put(r, &b, seq->u.s->s, seq->u.s->len);
        return jj_buf_val(r, &b);
    } else {
        jj_val l;
        size_t k;
        if (seq->u.l->n && (uint64_t)n > r->lim.max_memory / sizeof(jj_val) / seq->u.l->n)
            jj_fail(r, "memory limit exceeded (%zu bytes)", r->lim.max_memory);
        l = jj_new_list(r, (size_t)n * seq->u.l->n, seq->flags & JJ_TUPLE);
        for (i = 0; i < n; i++)
            for (k = 0; k < seq->u.l->n; k++) l.u.l->v[l.u.l->n++] = seq->u.l->v[k];
        return l;
    }
}

static jj_val jj_binop(jj_r *r, int op, jj_val a, jj_val b) {
    static const char *names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    if (a.type == JJ_UNDEF) jj_undef_fail(r, &a, names[op]);
    if (b.type == JJ_UNDEF) jj_undef_fail(r, &b, names[op]);
    if (jj_is_num(&a) && jj_is_num(&b)) {
        int ints = a.type != JJ_FLOAT && b.type != JJ_FLOAT;
        double x = jj_num(&a), y = jj_num(&b);
        switch (op) {
        case OP_ADD: return ints ? jj_int((int64_t)((uint64_t)a.u.i + (uint64_t)b.u.i)) : jj_float(x + y);
        case OP_SUB: return ints ? jj_int((int64_t)((uint64_t)a.u.i - (uint64_t)b.u.i)) : jj_float(x - y);
        case OP_MUL: return ints ? jj_int((int64_t)((uint64_t)a.u.i * (uint64_t)b.u.i)) : jj_float(x * y);
        case OP_DIV:
            if (y == 0) jj_fail(r, "ZeroDivisionError: division by zero");
            return jj_float(x / y);
        case OP_FLOORDIV:
            if (ints) return jj_int(jj_floordiv_i(r, a.u.i, b.u.i));
            if (y == 0) jj_fail(r, "ZeroDivisionError: float floor division by zero");
            return jj_float(floor(x / y));
        case OP_MOD:
            if (ints) return jj_int(a.u.i - jj_floordiv_i(r, a.u.i, b.u.i) * b.u.i);
            if (y == 0) jj_fail(r, "ZeroDivisionError: float modulo");
            {
                double m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return jj_float(m);
            }
        case OP_POW:
            if (ints && b.u.i >= 0) {
                int64_t res = 1, base = a.u.i, e = b.u.i;
                while (e-- > 0) {
                    res = (int64_t)((uint64_t)res * (uint64_t)base);
                    if (e > 64 && (base == 0 || base == 1)) break;
                    if (e > 64 && base != -1) jj_fail(r, "OverflowError: integer power too large");
                    jj_step(r);
                }
                return jj_int(res);
            }
            return jj_float(pow(x, y));
        }
    }
    if (op == OP_ADD) {
        if (a.type == JJ_STR && b.type == JJ_STR) {
            if ((a.flags | b.flags) & JJ_MARKUP) { /* markup + str escapes the str */
                jj_val ea = jj_escape(r, &a), eb = jj_escape(r, &b), v = jj_concat2(r, ea.u.s, eb.u.s);
                v.flags = JJ_MARKUP;
                return v;
            }
            return jj_concat2(r, a.u.s, b.u.s);
        }
        if (a.type == JJ_LIST && b.type == JJ_LIST && !((a.flags | b.flags) & JJ_LAZY) &&
            (a.flags & JJ_TUPLE) == (b.flags & JJ_TUPLE)) {
            jj_val l = jj_new_list(r, a.u.l->n + b.u.l->n, a.flags & JJ_TUPLE);
            if (a.u.l->n) memcpy(l.u.l->v, a.u.l->v, a.u.l->n * sizeof(jj_val));
            if (b.u.l->n) memcpy(l.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(jj_val));
            l.u.l->n = a.u.l->n + b.u.l->n;
            return l;
        }
    }
    if (op == OP_MUL) {
        if ((a.type == JJ_STR || (a.type == JJ_LIST && !(a.flags & JJ_LAZY))) && (b.type == JJ_INT || b.type == JJ_BOOL))
            return jj_repeat(r, &a, b.u.i);
        if ((b.type == JJ_STR || (b.type == JJ_LIST && !(b.flags & JJ_LAZY))) && (a.type == JJ_INT || a.type == JJ_BOOL))
            return jj_repeat(r, &b, a.u.i);
    }
    if (op == OP_MOD && a.type == JJ_STR)
        jj_fail(r, "unsupported: printf-style string formatting");
    jj_fail(r, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'", names[op], jj_type_name(&a),
            jj_type_name(&b));
    return a;
}

/* ---- builtin calls ---------------------------------------------------------------------- */

typedef struct jj_args {
    jj_val *pos;
    int npos;
    jj_str **kwn;
    jj_val *kwv;
    int nkw;
} jj_args;

/* argument i, or keyword name, or NULL */
static const jj_val *jj_arg(const jj_args *a, int i, const char *name) {
    int k;
    if (i >= 0 && i < a->npos) return &a->pos[i];
    if (name)
        for (k = 0; k < a->nkw; k++)
            if (!strcmp(a->kwn[k]->s, name)) return &a->kwv[k];
    return NULL;
}

static const jj_str *jj_arg_str(jj_r *r, const jj_args *a, int i, const char *name, const char *what) {
    const jj_val *v = jj_arg(a, i, name);
    if (!v || v->type == JJ_NONE) return NULL;
    if (v->type != JJ_STR) jj_fail(r, "TypeError: %s: expected a string argument, got %s", what, jj_type_name(v));
    return v->u.s;
}

static int64_t jj_arg_int(jj_r *r, const jj_args *a, int i, const char *name, int64_t def, const char *what) {
    const jj_val *v = jj_arg(a, i, name);
    if (!v || v->type == JJ_NONE) return def;
    if (v->type != JJ_INT && v->type != JJ_BOOL)
        jj_fail(r, "TypeError: %s: expected an integer argument, got %s", what, jj_type_name(v));
    return v->u.i;
}

static jj_val jj_func_val(jj_r *r, const char *name, jj_val self) {
    jj_val v;
    v.type = JJ_FUNC;
    v.flags = 0;
    v.u.fn = (jj_func *)jj_alloc(r, sizeof *v.u.fn);
    v.u.fn->name = name;
    v.u.fn->self = self;
    return v;
}

static int jj_is_ws_char(char c) { return jj_space(c) || c == '\x1c' || c == '\x1d' || c == '\x1e' || c == '\x1f'; }

/* str.strip family: which 1 left, 2 right, 3 both */
static jj_val jj_strip(jj_r *r, const jj_val *self, const jj_str *chars, int which) {
    const jj_str *s = self->u.s;
    size_t b = 0, e = s->len;
    jj_val v;
#define JJ_STRIPPABLE(c) (chars ? memchr(chars->s, (c), chars->len) != NULL : jj_is_ws_char(c))
    if (which & 1)
        while (b < e && JJ_STRIPPABLE(s->s[b])) b++;
    if (which & 2)
        while (e > b && JJ_STRIPPABLE(s->s[e - 1])) e--;
#undef JJ_STRIPPABLE
    v = jj_str_val(r, s->s + b, e - b);
    v.flags = self->flags & JJ_MARKUP;
    return v;
}

static const char *jj_memmem(const char *h, size_t hn, const char *n, size_t nn) {
    size_t i;
    if (!nn) return h;
    for (i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

static jj_val jj_split(jj_r *r, const jj_str *s, const jj_str *sep, int64_t maxsplit) {
    jj_val l = jj_new_list(r, 0, 0);
    size_t i = 0;
    if (sep) {
        const char *p = s->s, *end = s->s + s->len, *at;
        if (!sep->len) jj_fail(r, "ValueError: empty separator");
        while ((maxsplit < 0 || (int64_t)l.u.l->n < maxsplit) && (at = jj_memmem(p, (size_t)(end - p), sep->s, sep->len))) {
            jj_list_push(r, l.u.l, jj_str_val(r, p, (size_t)(at - p)));
            p = at + sep->len;
        }
        jj_list_push(r, l.u.l, jj_str_val(r, p, (size_t)(end - p)));
        return l;
    }
    for (;;) {
        size_t b;
        while (i < s->len && jj_is_ws_char(s->s[i])) i++;
        if (i >= s->len) break;
        if (maxsplit >= 0 && (int64_t)l.u.l->n >= maxsplit) {
            size_t e = s->len;
            while (e > i && jj_is_ws_char(s->s[e - 1])) e--;
            jj_list_push(r, l.u.l, jj_str_val(r, s->s + i, e - i));
            break;
        }
        b = i;
        while (i < s->len && !jj_is_ws_char(s->s[i])) i++;
        jj_list_push(r, l.u.l, jj_str_val(r, s->s + b, i - b));
    }
    return l;
}

static jj_val jj_replace(jj_r *r, const jj_str *s, const jj_str *old, const jj_str *new_, int64_t count) {
    jj_buf b = {0, 0, 0};
    const char *p = s->s, *end = s->s + s->len, *at;
    int64_t done = 0;
    if (!old->len) { /* Python inserts new_ between the characters */
        size_t i;
        for (i = 0; i <= s->len; i++) {
            if (count < 0 || done < count) {
                if (i == 0 || i == s->len || ((unsigned char)s->s[i] & 0xc0) != 0x80) {
                    jj_put(r, &b, new_->s, new_->len);
                    done++;
                }
            }
            if (i < s->len) jj_putc(r, &b, s->s[i]);
        }
        return jj_buf_val(r, &b);
    }
    while ((count < 0 || done < count) && (at = jj_memmem(p, (size_t)(end - p), old->s, old->len))) {
        jj_put(r, &b, p, (size_t)(at - p));
        jj_put(r, &b, new_->s, new_->len);
        p = at + old->len;
        done++;
    }
    jj_put(r, &b, p, (size_t)(end - p));
    return jj_buf_val(r, &b);
}

static int jj_affix(jj_r *r, const jj_str *s, const jj_val *arg, int end) {
    size_t i;
    if (!arg) jj_fail(r, "TypeError: %s() takes at least 1 argument", end ? "endswith" : "startswith");
    if (arg->type == JJ_LIST && !(arg->flags & JJ_LAZY)) {
        for (i = 0; i < arg->u.l->n; i++)
            if (jj_affix(r, s, &arg->u.l->v[i], end)) return 1;
        return 0;
    }
    if (arg->type != JJ_STR) jj_fail(r, "TypeError: %s arg must be str or a tuple of str", end ? "endswith" : "startswith");
    if (arg->u.s->len > s->len) return 0;
    return !memcmp(s->s + (end ? s->len - arg->u.s->len : 0), arg->u.s->s, arg->u.s->len);
}

static jj_val jj_case(jj_r *r, const jj_val *v, int mode) { /* 0 lower, 1 upper, 2 title, 3 capitalize */
    jj_str *s = jj_to_str(r, v);
    jj_val out = jj_str_val(r, s->s, s->len);
    size_t i;
    int word_start = 1;
    for (i = 0; i < s->len; i++) {
        char c = out.u.s->s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        int up = mode == 1 || ((mode == 2 || mode == 3) && word_start && alpha);
        if (mode == 3 && i > 0) up = 0;
        if (mode == 3 && i == 0) up = 1;
        if (up && c >= 'a' && c <= 'z') c = (char)(c - 32);
        else if (!up && mode != 1 && c >= 'A' && c <= 'Z') c = (char)(c + 32);
        out.u.s->s[i] = c;
        if (mode == 2) word_start = !alpha && !((unsigned char)c & 0x80) && !jj_digit(c) ? 1 : 0;
    }
    out.flags = v->flags & JJ_MARKUP;
    return out;
}

static const char *const jj_mutating[] = {"append", "pop", "update", "insert", "extend", "remove", "clear", "sort",
                                          "reverse", "setdefault", "popitem", NULL};

static jj_val jj_call_method(jj_r *r, const jj_func *fn, const jj_args *a) {
    const jj_val *self = &fn->self;
    const char *m = fn->name;
    const char *const *mut;
    for (mut = jj_mutating; *mut; mut++)
        if (!strcmp(m, *mut) && (self->type == JJ_LIST || self->type == JJ_DICT))
            jj_fail(r, "SecurityError: access to attribute '%s' of '%s' object is unsafe", m, jj_type_name(self));
    if (self->type == JJ_LOOP && !strcmp(m, "cycle")) {
        if (!a->npos) jj_fail(r, "TypeError: no items for cycling given");
        return a->pos[self->u.loop->i % (size_t)a->npos];
    }
    if (self->type == JJ_STR) {
        const jj_str *s = self->u.s;
        if (!strcmp(m, "strip")) return jj_strip(r, self, jj_arg_str(r, a, 0, "chars", m), 3);
        if (!strcmp(m, "lstrip")) return jj_strip(r, self, jj_arg_str(r, a, 0, "chars", m), 1);
        if (!strcmp(m, "rstrip")) return jj_strip(r, self, jj_arg_str(r, a, 0, "chars", m), 2);
        if (!strcmp(m, "split")) return jj_split(r, s, jj_arg_str(r, a, 0, "sep", m), jj_arg_int(r, a, 1, "maxsplit", -1, m));
        if (!strcmp(m, "startswith")) return jj_bool(jj_affix(r, s, jj_arg(a, 0, NULL), 0));
        if (!strcmp(m, "endswith")) return jj_bool(jj_affix(r, s, jj_arg(a, 0, NULL), 1));
        if (!strcmp(m, "lower")) return jj_case(r, self, 0);
        if (!strcmp(m, "upper")) return jj_case(r, self, 1);
        if (!strcmp(m, "title")) return jj_case(r, self, 2);
        if (!strcmp(m, "capitalize")) return jj_case(r, self, 3);
        if (!strcmp(m, "replace")) {
            const jj_str *old = jj_arg_str(r, a, 0, NULL, m), *new_ = jj_arg_str(r, a, 1, NULL, m);
            if (!old || !new_) jj_fail(r, "TypeError: replace() takes 2 string arguments");
            return jj_replace(r, s, old, new_, jj_arg_int(r, a, 2, "count", -1, m));
        }
        if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex") ||
            !strcmp(m, "count")) {
            const jj_str *sub = jj_arg_str(r, a, 0, NULL, m);
            const char *at = NULL, *p;
            int64_t count = 0;
            if (!sub) jj_fail(r, "TypeError: %s() takes a string argument", m);
            for (p = s->s; (p = jj_memmem(p, (size_t)(s->s + s->len - p), sub->s, sub->len));) {
                if (!at || m[0] == 'r') at = p;
                count++;
                if (m[0] != 'r' && m[0] != 'c') break;
                if (p == s->s + s->len) break;
                p += sub->len ? sub->len : 1;
            }
            if (m[0] == 'c') return jj_int(count);
            if (!at) {
                if (m[0] == 'i' || m[1] == 'i') jj_fail(r, "ValueError: substring not found");
                return jj_int(-1);
            }
            {
                jj_str pre;
                size_t k, n = 0;
                pre.len = (size_t)(at - s->s);
                for (k = 0; k < pre.len; k++) n += ((unsigned char)s->s[k] & 0xc0) != 0x80;
                return jj_int((int64_t)n);
            }
        }
        if (!strcmp(m, "join")) {
            const jj_val *seq = jj_arg(a, 0, NULL);
            jj_list *items;
            jj_buf b = {0, 0, 0};
            size_t i;
            if (!seq) jj_fail(r, "TypeError: join() takes exactly one argument");
            items = jj_iter(r, seq);
            for (i = 0; i < items->n; i++) {
                if (items->v[i].type != JJ_STR)
                    jj_fail(r, "TypeError: sequence item %zu: expected str instance, %s found", i, jj_type_name(&items->v[i]));
                if (i) jj_put(r, &b, s->s, s->len);
                jj_put(r, &b, items->v[i].u.s->s, items->v[i].u.s->len);
            }
            return jj_buf_val(r, &b);
        }
        if (!strcmp(m, "isdigit") || !strcmp(m, "isalpha") || !strcmp(m, "isspace") || !strcmp(m, "isalnum") ||
            !strcmp(m, "islower") || !strcmp(m, "isupper")) {
            size_t i;
            int ok = s->len > 0, cased = 0;
            for (i = 0; i < s->len; i++) {
                char c = s->s[i];
                int lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
                cased |= lo || up;
                if (!strcmp(m, "isdigit")) ok &= jj_digit(c);
                else if (!strcmp(m, "isalpha")) ok &= lo || up;
                else if (!strcmp(m, "isalnum")) ok &= lo || up || jj_digit(c);
                else if (!strcmp(m, "isspace")) ok &= jj_is_ws_char(c);
                else if (!strcmp(m, "islower")) ok &= !up;
                else ok &= !lo;
            }
            if (m[2] == 'l' || m[2] == 'u') ok &= cased;
            return jj_bool(ok);
        }
        if (!strcmp(m, "splitlines")) {
            jj_val l = jj_new_list(r, 0, 0);
            size_t i = 0, b = 0;
            for (i = 0; i < s->len; i++)
                if (s->s[i] == '\n') {
                    jj_list_push(r, l.u.l, jj_str_val(r, s->s + b, i - b));
                    b = i + 1;
                }
            if (b < s->len) jj_list_push(r, l.u.l, jj_str_val(r, s->s + b, s->len - b));
            return l;
        }
    } else if (self->type == JJ_DICT) {
        jj_dict *d = self->u.d;
        size_t i;
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            jj_val l = jj_new_list(r, d->n, 0);
            for (i = 0; i < d->n; i++) {
                if (m[0] == 'k') l.u.l->v[i] = d->k[i];
                else if (m[0] == 'v') l.u.l->v[i] = d->v[i];
                else {
                    jj_val t = jj_new_list(r, 2, JJ_TUPLE);
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
            const jj_val *k = jj_arg(a, 0, NULL), *def = jj_arg(a, 1, NULL);
            long at;
            if (!k) jj_fail(r, "TypeError: get expected at least 1 argument");
            at = jj_dict_find(d, k);
            return at >= 0 ? d->v[at] : def ? *def : jj_none();
        }
        if (!strcmp(m, "copy")) {
            jj_val c = jj_new_dict(r, JJ_DICT);
            for (i = 0; i < d->n; i++) jj_dict_set(r, c.u.d, d->k[i], d->v[i]);
            return c;
        }
    } else if (self->type == JJ_LIST) {
        const jj_val *x = jj_arg(a, 0, NULL);
        size_t i;
        int64_t count = 0;
        if ((!strcmp(m, "index") || !strcmp(m, "count")) && x && !(self->flags & JJ_LAZY)) {
            for (i = 0; i < self->u.l->n; i++)
                if (jj_equal(&self->u.l->v[i], x)) {
                    if (m[0] == 'i') return jj_int((int64_t)i);
                    count++;
                }
            if (m[0] == 'i') jj_fail(r, "ValueError: value is not in list");
            return jj_int(count);
        }
    }
    jj_fail(r, "TypeError: '%s' object has no method '%s' here", jj_type_name(self), m);
    return jj_none();
}

static int jj_has_method(const jj_val *v, const char *name) {
    static const char *const str_methods[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith",
                                              "lower", "upper", "title", "capitalize", "replace", "find", "rfind",
                                              "index", "rindex", "count", "join", "isdigit", "isalpha", "isspace",
                                              "isalnum", "islower", "isupper", "splitlines", NULL};
    static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", "pop", "update", "clear",
                                               "setdefault", "popitem", NULL};
    static const char *const list_methods[] = {"index", "count", "append", "pop", "insert", "extend", "remove",
                                               "clear", "sort", "reverse", NULL};
    const char *const *m = v->type == JJ_STR ? str_methods : v->type == JJ_DICT ? dict_methods
                           : v->type == JJ_LIST && !(v->flags & JJ_LAZY) ? list_methods : NULL;
    for (; m && *m; m++)
        if (!strcmp(*m, name)) return 1;
    return 0;
}

/* x.name: the attribute first, then the key */
static jj_val jj_getattr(jj_r *r, const jj_val *obj, const jj_str *name) {
    long at;
    if (obj->type == JJ_UNDEF) jj_undef_fail(r, obj, name->s);
    if (name->len && name->s[0] == '_') return jj_undef(NULL); /* the sandbox hides these */
    if (jj_has_method(obj, name->s)) return jj_func_val(r, name->s, *obj);
    if (obj->type == JJ_LOOP) {
        const jj_list *items = obj->u.loop->items;
        size_t i = obj->u.loop->i, n = items->n;
        const char *k = name->s;
        if (!strcmp(k, "index0")) return jj_int((int64_t)i);
        if (!strcmp(k, "index")) return jj_int((int64_t)i + 1);
        if (!strcmp(k, "revindex0")) return jj_int((int64_t)(n - i - 1));
        if (!strcmp(k, "revindex")) return jj_int((int64_t)(n - i));
        if (!strcmp(k, "first")) return jj_bool(i == 0);
        if (!strcmp(k, "last")) return jj_bool(i + 1 == n);
        if (!strcmp(k, "length")) return jj_int((int64_t)n);
        if (!strcmp(k, "depth")) return jj_int(1);
        if (!strcmp(k, "depth0")) return jj_int(0);
        if (!strcmp(k, "previtem")) return i > 0 ? items->v[i - 1] : jj_undef(NULL);
        if (!strcmp(k, "nextitem")) return i + 1 < n ? items->v[i + 1] : jj_undef(NULL);
        if (!strcmp(k, "cycle")) return jj_func_val(r, "cycle", *obj);
    }
    if (obj->type == JJ_DICT || obj->type == JJ_NS) {
        at = jj_dict_find_s(obj->u.d, name->s, name->len);
        if (at >= 0) return obj->u.d->v[at];
    }
    return jj_undef(NULL);
}

/* x[key]: the key first, then the attribute */
static jj_val jj_getitem(jj_r *r, const jj_val *obj, const jj_val *key) {
    if (obj->type == JJ_UNDEF) jj_undef_fail(r, obj, "subscript");
    if (obj->type == JJ_DICT || obj->type == JJ_NS) {
        long at = jj_dict_find(obj->u.d, key);
        if (at >= 0) return obj->u.d->v[at];
    } else if ((obj->type == JJ_LIST && !(obj->flags & JJ_LAZY)) || obj->type == JJ_STR) {
        if (key->type == JJ_INT || key->type == JJ_BOOL) {
            int64_t n = obj->type == JJ_LIST ? (int64_t)obj->u.l->n : (int64_t)jj_cp_count(obj->u.s), i = key->u.i;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return jj_undef(NULL);
            if (obj->type == JJ_LIST) return obj->u.l->v[i];
            {
                size_t b = jj_cp_offset(obj->u.s, (size_t)i), e = jj_cp_offset(obj->u.s, (size_t)i + 1);
                return jj_str_val(r, obj->u.s->s + b, e - b);
            }
        }
    }
    if (key->type == JJ_STR) return jj_getattr(r, obj, key->u.s);
    return jj_undef(NULL);
}

static jj_val jj_slice(jj_r *r, const jj_val *obj, const jj_val *start, const jj_val *stop, const jj_val *step) {
    int64_t n, b, e, st = 1, i;
    jj_val out;
    if (obj->type == JJ_UNDEF) jj_undef_fail(r, obj, "slice");
    if (obj->type != JJ_STR && !(obj->type == JJ_LIST && !(obj->flags & JJ_LAZY)))
        jj_fail(r, "TypeError: '%s' object is not subscriptable", jj_type_name(obj));
#define JJ_SLICE_INT(v) ((v)->type == JJ_INT || (v)->type == JJ_BOOL ? (v)->u.i : (jj_fail(r, "TypeError: slice indices must be integers or None"), 0))
    if (step && step->type != JJ_NONE) st = JJ_SLICE_INT(step);
    if (!st) jj_fail(r, "ValueError: slice step cannot be zero");
    n = obj->type == JJ_LIST ? (int64_t)obj->u.l->n : (int64_t)jj_cp_count(obj->u.s);
    if (start && start->type != JJ_NONE) {
        b = JJ_SLICE_INT(start);
        if (b < 0) b += n;
        if (b < 0) b = st < 0 ? -1 : 0;
        if (b >= n) b = st < 0 ? n - 1 : n;
    } else b = st < 0 ? n - 1 : 0;
    if (stop && stop->type != JJ_NONE) {
        e = JJ_SLICE_INT(stop);
        if (e < 0) e += n;
        if (e < 0) e = st < 0 ? -1 : 0;
        if (e >= n) e = st < 0 ? n - 1 : n;
    } else e = st < 0 ? -1 : n;
#undef JJ_SLICE_INT
    if (obj->type == JJ_LIST) {
        out = jj_new_list(r, 0, obj->flags & JJ_TUPLE);
        for (i = b; st > 0 ? i < e : i > e; i += st) jj_list_push(r, out.u.l, obj->u.l->v[i]);
        return out;
    } else {
        jj_buf buf = {0, 0, 0};
        const jj_str *s = obj->u.s;
        int ascii = jj_cp_count(s) == s->len;
        for (i = b; st > 0 ? i < e : i > e; i += st) {
            size_t ob = ascii ? (size_t)i : jj_cp_offset(s, (size_t)i), oe = ascii ? ob + 1 : jj_cp_offset(s, (size_t)i + 1);
            jj_put(r, &buf, s->s + ob, oe - ob);
        }
        out = jj_buf_val(r, &buf);
        out.flags = obj->flags & JJ_MARKUP;
        return out;
    }
}

/* ---- tests and filters ------------------------------------------------------------------- */

static int jj_test(jj_r *r, const char *name, const jj_val *v, const jj_args *a) {
    const jj_val *x = jj_arg(a, 0, NULL);
    if (!strcmp(name, "defined")) return v->type != JJ_UNDEF;
    if (!strcmp(name, "undefined")) return v->type == JJ_UNDEF;
    if (!strcmp(name, "none")) return v->type == JJ_NONE;
    if (!strcmp(name, "string")) return v->type == JJ_STR;
    if (!strcmp(name, "mapping")) return v->type == JJ_DICT;
    if (!strcmp(name, "iterable"))
        return v->type == JJ_STR || v->type == JJ_LIST || v->type == JJ_DICT || v->type == JJ_UNDEF;
    if (!strcmp(name, "sequence"))
        return v->type == JJ_STR || (v->type == JJ_LIST && !(v->flags & JJ_LAZY)) || v->type == JJ_DICT;
    if (!strcmp(name, "number")) return jj_is_num(v);
    if (!strcmp(name, "integer")) return v->type == JJ_INT;
    if (!strcmp(name, "float")) return v->type == JJ_FLOAT;
    if (!strcmp(name, "boolean")) return v->type == JJ_BOOL;
    if (!strcmp(name, "true")) return v->type == JJ_BOOL && v->u.i;
    if (!strcmp(name, "false")) return v->type == JJ_BOOL && !v->u.i;
    if (!strcmp(name, "callable")) return v->type == JJ_FUNC || v->type == JJ_MACRO;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jj_val c;
        if (v->type != JJ_STR) return 0;
        c = jj_case(r, v, name[0] == 'u');
        return jj_equal(&c, v);
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        int64_t d = name[0] == 'd' ? (x && (x->type == JJ_INT || x->type == JJ_BOOL) ? x->u.i : 0) : 2;
        if (v->type != JJ_INT && v->type != JJ_BOOL) jj_fail(r, "TypeError: test '%s' needs an integer", name);
        if (!d) jj_fail(r, "ZeroDivisionError: integer division or modulo by zero");
        return name[0] == 'o' ? (v->u.i % 2 != 0) : (v->u.i % d == 0);
    }
    if (!x) jj_fail(r, "unknown test '%s' or missing argument", name);
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return jj_equal(v, x);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jj_equal(v, x);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return jj_cmp(r, v, x) < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return jj_cmp(r, v, x) <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return jj_cmp(r, v, x) > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">=")) return jj_cmp(r, v, x) >= 0;
    if (!strcmp(name, "in")) return jj_contains(r, x, v);
    if (!strcmp(name, "sameas"))
        return v->type == x->type && (v->type == JJ_NONE || v->type == JJ_UNDEF || jj_equal(v, x));
    jj_fail(r, "unknown test '%s'", name);
    return 0;
}

static jj_val jj_filter(jj_r *r, const char *name, const jj_val *v, const jj_args *a);

/* attribute "a.b" of x as environment.getitem does it (key first) */
static jj_val jj_attr_path(jj_r *r, const jj_val *x, const jj_str *path) {
    jj_val cur = *x;
    const char *p = path->s, *end = path->s + path->len;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        jj_val key = jj_str_val(r, p, n);
        if (n && jj_digit(p[0])) key = jj_int(strtoll(key.u.s->s, NULL, 10));
        if (cur.type == JJ_UNDEF) return cur;
        cur = jj_getitem(r, &cur, &key);
        if (!dot) break;
        p = dot + 1;
    }
    return cur;
}

/* select/reject/selectattr/rejectattr and map: lazy lists */
static jj_val jj_select(jj_r *r, const jj_val *v, const jj_args *a, int attr, int keep) {
    /* jinja2 iterates only a true value: none|selectattr(...) is empty */
    jj_list *items = jj_truthy(v) ? jj_iter(r, v) : jj_new_list(r, 0, 0).u.l;
    jj_val out = jj_new_list(r, items->n, JJ_LAZY);
    const jj_str *path = attr ? jj_arg_str(r, a, 0, NULL, "selectattr") : NULL;
    const jj_val *test = jj_arg(a, attr ? 1 : 0, NULL);
    jj_args targs;
    size_t i;
    if (attr && !path) jj_fail(r, "TypeError: selectattr needs an attribute");
    if (test && test->type != JJ_STR) jj_fail(r, "TypeError: the test must be named by a string");
    targs.pos = a->pos + (attr ? 2 : 1);
    targs.npos = a->npos > (attr ? 2 : 1) ? a->npos - (attr ? 2 : 1) : 0;
    targs.kwn = a->kwn;
    targs.kwv = a->kwv;
    targs.nkw = a->nkw;
    for (i = 0; i < items->n; i++) {
        jj_val x = attr ? jj_attr_path(r, &items->v[i], path) : items->v[i];
        int ok = test ? jj_test(r, test->u.s->s, &x, &targs) : jj_truthy(&x);
        jj_step(r);
        if (ok == keep) out.u.l->v[out.u.l->n++] = items->v[i];
    }
    return out;
}

static jj_val jj_map(jj_r *r, const jj_val *v, const jj_args *a) {
    jj_list *items = jj_truthy(v) ? jj_iter(r, v) : jj_new_list(r, 0, 0).u.l;
    jj_val out = jj_new_list(r, items->n, JJ_LAZY);
    const jj_val *attr = jj_arg(a, -1, "attribute"), *def = jj_arg(a, -1, "default");
    size_t i;
    for (i = 0; i < items->n; i++) {
        jj_val x;
        jj_step(r);
        if (attr) {
            if (attr->type != JJ_STR) jj_fail(r, "TypeError: map's attribute must be a string");
            x = jj_attr_path(r, &items->v[i], attr->u.s);
            if (x.type == JJ_UNDEF && def) x = *def;
        } else {
            jj_args fargs = *a;
            if (!a->npos || a->pos[0].type != JJ_STR) jj_fail(r, "TypeError: map needs a filter name or attribute=");
            fargs.pos = a->pos + 1;
            fargs.npos = a->npos - 1;
            x = jj_filter(r, a->pos[0].u.s->s, &items->v[i], &fargs);
        }
        out.u.l->v[out.u.l->n++] = x;
    }
    return out;
}

static jj_val jj_tojson(jj_r *r, const jj_val *v, const jj_args *a) {
    jj_json_opts o;
    jj_buf b = {0, 0, 0};
    const jj_val *indent = jj_arg(a, 0, "indent"), *seps = jj_arg(a, -1, "separators");
    const jj_val *ascii = jj_arg(a, -1, "ensure_ascii"), *sort = jj_arg(a, -1, "sort_keys");
    o.indent = -1;
    o.indent_str = NULL;
    if (indent && indent->type == JJ_INT) o.indent = indent->u.i < 0 ? 0 : (int)INFER__MIN(indent->u.i, 64);
    else if (indent && indent->type == JJ_STR) {
        o.indent = 0;
        o.indent_str = indent->u.s;
    } else if (indent && indent->type != JJ_NONE) jj_fail(r, "TypeError: tojson: bad indent");
    o.item_sep = o.indent >= 0 ? "," : ", ";
    o.key_sep = ": ";
    if (seps && seps->type == JJ_LIST && seps->u.l->n == 2 && seps->u.l->v[0].type == JJ_STR &&
        seps->u.l->v[1].type == JJ_STR) {
        o.item_sep = seps->u.l->v[0].u.s->s;
        o.key_sep = seps->u.l->v[1].u.s->s;
    } else if (seps && seps->type != JJ_NONE) jj_fail(r, "TypeError: tojson: bad separators");
    o.ensure_ascii = ascii ? jj_truthy(ascii) : 0;
    o.sort_keys = sort ? jj_truthy(sort) : 0;
    jj_put_json(r, &b, v, &o, 0);
    return jj_buf_val(r, &b);
}

/* the key a sort compares: items of dictsort, attribute paths, case folded */
static jj_val jj_sort_key(jj_r *r, jj_val x, int case_sensitive) {
    if (!case_sensitive && x.type == JJ_STR) return jj_case(r, &x, 0);
    return x;
}

static void jj_sort(jj_r *r, jj_val *v, jj_val *keys, size_t n, int reverse) {
    size_t i; /* insertion sort: stable; the lists are small, and steps bound them */
    for (i = 1; i < n; i++) {
        size_t j = i;
        jj_val xv = v[i], xk = keys[i];
        while (j > 0) {
            int c = jj_cmp(r, &keys[j - 1], &xk);
            if (reverse ? c >= 0 : c <= 0) break;
            v[j] = v[j - 1];
            keys[j] = keys[j - 1];
            j--;
            jj_step(r);
        }
        v[j] = xv;
        keys[j] = xk;
    }
}

static jj_val jj_filter(jj_r *r, const char *name, const jj_val *v, const jj_args *a) {
    size_t i;
    if (!strcmp(name, "safe")) {
        jj_val s;
        if (v->type == JJ_STR) s = *v;
        else {
            s.type = JJ_STR;
            s.u.s = jj_to_str(r, v);
        }
        s.flags = JJ_MARKUP;
        return s;
    }
    if (!strcmp(name, "tojson")) return jj_tojson(r, v, a);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        const jj_val *def = jj_arg(a, 0, "default_value"), *boolean = jj_arg(a, 1, "boolean");
        if (v->type == JJ_UNDEF || (boolean && jj_truthy(boolean) && !jj_truthy(v)))
            return def ? *def : jj_cstr(r, "");
        return *v;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return jj_int(jj_length(r, v));
    if (!strcmp(name, "string")) {
        jj_val s;
        if (v->type == JJ_STR) return *v;
        s.type = JJ_STR;
        s.flags = 0;
        s.u.s = jj_to_str(r, v);
        return s;
    }
    if (!strcmp(name, "trim")) {
        jj_val s;
        s.type = JJ_STR;
        s.flags = v->type == JJ_STR ? v->flags : 0;
        s.u.s = jj_to_str(r, v);
        return jj_strip(r, &s, jj_arg_str(r, a, 0, "chars", "trim"), 3);
    }
    if (!strcmp(name, "lower")) return jj_case(r, v, 0);
    if (!strcmp(name, "upper")) return jj_case(r, v, 1);
    if (!strcmp(name, "title")) return jj_case(r, v, 2);
    if (!strcmp(name, "capitalize")) return jj_case(r, v, 3);
    if (!strcmp(name, "e") || !strcmp(name, "escape")) return jj_escape(r, v);
    if (!strcmp(name, "replace")) {
        const jj_str *old = jj_arg_str(r, a, 0, "old", name), *new_ = jj_arg_str(r, a, 1, "new", name);
        if (!old || !new_) jj_fail(r, "TypeError: replace needs two strings");
        return jj_replace(r, jj_to_str(r, v), old, new_, jj_arg_int(r, a, 2, "count", -1, name));
    }
    if (!strcmp(name, "list")) {
        jj_list *items = jj_iter(r, v);
        jj_val l = jj_new_list(r, items->n, 0);
        if (items->n) memcpy(l.u.l->v, items->v, items->n * sizeof(jj_val));
        l.u.l->n = items->n;
        return l;
    }
    if (!strcmp(name, "first")) {
        jj_list *items = jj_iter(r, v);
        return items->n ? items->v[0] : jj_undef(NULL);
    }
    if (!strcmp(name, "last")) {
        jj_list *items;
        if (v->type == JJ_LIST && (v->flags & JJ_LAZY))
            jj_fail(r, "TypeError: 'generator' object is not reversible");
        items = jj_iter(r, v);
        return items->n ? items->v[items->n - 1] : jj_undef(NULL);
    }
    if (!strcmp(name, "reverse")) {
        if (v->type == JJ_STR) {
            jj_val st = jj_int(-1);
            return jj_slice(r, v, NULL, NULL, &st);
        } else {
            jj_list *items = jj_iter(r, v);
            jj_val l = jj_new_list(r, items->n, 0);
            for (i = 0; i < items->n; i++) l.u.l->v[i] = items->v[items->n - 1 - i];
            l.u.l->n = items->n;
            return l;
        }
    }
    if (!strcmp(name, "join")) {
        jj_list *items = jj_iter(r, v);
        const jj_str *sep = jj_arg_str(r, a, 0, "d", name);
        const jj_val *attr = jj_arg(a, 1, "attribute");
        jj_buf b = {0, 0, 0};
        for (i = 0; i < items->n; i++) {
            jj_val x = items->v[i];
            if (attr && attr->type == JJ_STR) x = jj_attr_path(r, &x, attr->u.s);
            if (i && sep) jj_put(r, &b, sep->s, sep->len);
            jj_put_str(r, &b, &x);
        }
        return jj_buf_val(r, &b);
    }
    if (!strcmp(name, "items")) {
        jj_func fn;
        if (v->type == JJ_UNDEF) return jj_new_list(r, 0, 0);
        if (v->type != JJ_DICT) jj_fail(r, "TypeError: can only get item pairs from a mapping");
        fn.name = "items";
        fn.self = *v;
        return jj_call_method(r, &fn, a);
    }
    if (!strcmp(name, "dictsort")) {
        const jj_val *cs = jj_arg(a, 0, "case_sensitive"), *by = jj_arg(a, 1, "by"), *rev = jj_arg(a, 2, "reverse");
        int by_value = by && by->type == JJ_STR && jj_streq(by->u.s, "value", 5);
        jj_val l, *keys;
        jj_func fn;
        if (v->type != JJ_DICT) jj_fail(r, "TypeError: dictsort expects a mapping");
        fn.name = "items";
        fn.self = *v;
        l = jj_call_method(r, &fn, a);
        keys = (jj_val *)jj_alloc(r, (l.u.l->n + 1) * sizeof *keys);
        for (i = 0; i < l.u.l->n; i++)
            keys[i] = jj_sort_key(r, l.u.l->v[i].u.l->v[by_value], cs && jj_truthy(cs));
        jj_sort(r, l.u.l->v, keys, l.u.l->n, rev && jj_truthy(rev));
        return l;
    }
    if (!strcmp(name, "sort")) {
        const jj_val *rev = jj_arg(a, 0, "reverse"), *cs = jj_arg(a, 1, "case_sensitive"), *attr = jj_arg(a, 2, "attribute");
        jj_list *items = jj_iter(r, v);
        jj_val l = jj_new_list(r, items->n, 0), *keys = (jj_val *)jj_alloc(r, (items->n + 1) * sizeof(jj_val));
        for (i = 0; i < items->n; i++) {
            jj_val k = items->v[i];
            if (attr && attr->type == JJ_STR) k = jj_attr_path(r, &k, attr->u.s);
            keys[i] = jj_sort_key(r, k, cs && jj_truthy(cs));
            l.u.l->v[i] = items->v[i];
        }
        l.u.l->n = items->n;
        jj_sort(r, l.u.l->v, keys, l.u.l->n, rev && jj_truthy(rev));
        return l;
    }
    if (!strcmp(name, "unique")) {
        jj_list *items = jj_iter(r, v);
        jj_val l = jj_new_list(r, items->n, 0);
        for (i = 0; i < items->n; i++) {
            jj_step(r);
            if (!jj_contains(r, &l, &items->v[i])) l.u.l->v[l.u.l->n++] = items->v[i];
        }
        return l;
    }
    if (!strcmp(name, "map")) return jj_map(r, v, a);
    if (!strcmp(name, "select")) return jj_select(r, v, a, 0, 1);
    if (!strcmp(name, "reject")) return jj_select(r, v, a, 0, 0);
    if (!strcmp(name, "selectattr")) return jj_select(r, v, a, 1, 1);
    if (!strcmp(name, "rejectattr")) return jj_select(r, v, a, 1, 0);
    if (!strcmp(name, "int")) {
        if (v->type == JJ_INT || v->type == JJ_BOOL) return jj_int(v->u.i);
        if (v->type == JJ_FLOAT) return jj_int((int64_t)v->u.f);
        if (v->type == JJ_STR) {
            char *end;
            long long x = strtoll(v->u.s->s, &end, 10);
            return jj_int(*end ? (int64_t)jj_arg_int(r, a, 0, "default", 0, name) : x);
        }
        return jj_int(jj_arg_int(r, a, 0, "default", 0, name));
    }
    if (!strcmp(name, "float")) {
        if (jj_is_num(v)) return jj_float(jj_num(v));
        if (v->type == JJ_STR) {
            char *end;
            double x = strtod(v->u.s->s, &end);
            if (!*end && end != v->u.s->s) return jj_float(x);
        }
        return jj_float(0);
    }
    if (!strcmp(name, "abs")) {
        if (v->type == JJ_INT || v->type == JJ_BOOL) return jj_int(v->u.i < 0 ? -v->u.i : v->u.i);
        if (v->type == JJ_FLOAT) return jj_float(fabs(v->u.f));
        jj_fail(r, "TypeError: bad operand type for abs(): '%s'", jj_type_name(v));
    }
    if (!strcmp(name, "round")) {
        int64_t prec = jj_arg_int(r, a, 0, "precision", 0, name);
        double x = jj_num(v), m = pow(10, (double)prec);
        if (!jj_is_num(v)) jj_fail(r, "TypeError: round needs a number");
        return jj_float(round(x * m) / m);
    }
    if (!strcmp(name, "sum") || !strcmp(name, "min") || !strcmp(name, "max")) {
        jj_list *items = jj_iter(r, v);
        jj_val acc = name[1] == 'u' ? jj_int(0) : items->n ? items->v[0] : jj_undef(NULL);
        for (i = name[1] == 'u' ? 0 : 1; i < items->n; i++) {
            if (name[1] == 'u') acc = jj_binop(r, OP_ADD, acc, items->v[i]);
            else if ((jj_cmp(r, &items->v[i], &acc) < 0) == (name[1] == 'i') && !jj_equal(&items->v[i], &acc))
                acc = items->v[i];
        }
        return acc;
    }
    if (!strcmp(name, "indent")) {
        int64_t width = jj_arg_int(r, a, 0, "width", 4, name);
        const jj_val *first = jj_arg(a, 1, "first"), *blank = jj_arg(a, 2, "blank");
        jj_str *s = jj_to_str(r, v);
        jj_buf b = {0, 0, 0};
        int at_start = 1;
        int64_t k;
        if (width < 0 || width > 1024) jj_fail(r, "indent: width out of range");
        for (i = 0; i <= s->len; i++) {
            if (at_start) {
                int line_blank = i == s->len || s->s[i] == '\n';
                if ((i > 0 || (first && jj_truthy(first))) && (!line_blank || (blank && jj_truthy(blank))) && i < s->len)
                    for (k = 0; k < width; k++) jj_putc(r, &b, ' ');
                at_start = 0;
            }
            if (i == s->len) break;
            jj_putc(r, &b, s->s[i]);
            if (s->s[i] == '\n') at_start = 1;
        }
        return jj_buf_val(r, &b);
    }
    jj_fail(r, "unknown filter '%s'", name);
    return jj_none();
}

/* ---- expressions -------------------------------------------------------------------------- */

static void jj_eval_args(jj_r *r, jj_scope *s, jj_node *x, int from, jj_args *a) {
    int i, n = x->n - from;
    a->pos = n > 0 ? (jj_val *)jj_alloc(r, (size_t)n * sizeof(jj_val)) : NULL;
    a->kwv = n > 0 ? (jj_val *)jj_alloc(r, (size_t)n * sizeof(jj_val)) : NULL;
    a->kwn = n > 0 ? (jj_str **)jj_alloc(r, (size_t)n * sizeof(jj_str *)) : NULL;
    a->npos = a->nkw = 0;
    for (i = from; i < x->n; i++) {
        jj_val v = jj_eval(r, s, x->kid[i]);
        if (x->names && x->names[i]) {
            a->kwn[a->nkw] = x->names[i];
            a->kwv[a->nkw++] = v;
        } else a->pos[a->npos++] = v;
    }
}

static jj_val jj_call_macro(jj_r *r, jj_node *m, const jj_args *a) {
    jj_scope *s = jj_new_scope(r, r->root);
    jj_buf out = {0, 0, 0}, *saved = r->out;
    int i, k, np = m->n - 1;
    jj_val varargs = jj_new_list(r, 0, JJ_TUPLE), kwargs = jj_new_dict(r, JJ_DICT);
    jj_step(r);
    for (i = 0; i < np; i++) {
        const jj_val *v = jj_arg(a, i, m->names[i + 1]->s);
        jj_assign(r, s, m->names[i + 1], v ? *v : m->kid[i + 1] ? jj_eval(r, s, m->kid[i + 1]) : jj_undef(m->names[i + 1]));
    }
    for (i = np; i < a->npos; i++) jj_list_push(r, varargs.u.l, a->pos[i]);
    for (k = 0; k < a->nkw; k++) {
        int known = 0;
        for (i = 0; i < np; i++) known |= !strcmp(a->kwn[k]->s, m->names[i + 1]->s);
        if (!known) jj_dict_set(r, kwargs.u.d, jj_str_val(r, a->kwn[k]->s, a->kwn[k]->len), a->kwv[k]);
    }
    jj_assign(r, s, jj_newstr(r, "varargs", 7), varargs);
    jj_assign(r, s, jj_newstr(r, "kwargs", 6), kwargs);
    r->out = &out;
    jj_exec(r, s, m->kid[0]);
    r->out = saved;
    return jj_buf_val(r, &out);
}

static jj_val jj_range(jj_r *r, const jj_args *a) {
    int64_t start = 0, stop, step = 1, n, i;
    jj_val l;
    if (a->npos == 1) stop = jj_arg_int(r, a, 0, NULL, 0, "range");
    else {
        start = jj_arg_int(r, a, 0, NULL, 0, "range");
        stop = jj_arg_int(r, a, 1, NULL, 0, "range");
        step = jj_arg_int(r, a, 2, NULL, 1, "range");
    }
    if (a->npos < 1 || a->npos > 3) jj_fail(r, "TypeError: range expected 1 to 3 arguments");
    if (!step) jj_fail(r, "ValueError: range() arg 3 must not be zero");
    if (step > 0) n = stop > start ? (int64_t)(((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1) : 0;
    else n = start > stop ? (int64_t)(((uint64_t)start - (uint64_t)stop - 1) / (uint64_t)-step + 1) : 0;
    if (n < 0 || (uint64_t)n > r->lim.max_memory / sizeof(jj_val) || (n > r->lim.max_steps))
        jj_fail(r, "range of %lld items: over the step limit (%ld) or the memory limit (%zu bytes)", (long long)n,
                r->lim.max_steps, r->lim.max_memory);
    l = jj_new_list(r, (size_t)n, 0);
    for (i = 0; i < n; i++) l.u.l->v[i] = jj_int(start + i * step);
    l.u.l->n = (size_t)n;
    return l;
}

static jj_val jj_call(jj_r *r, const jj_val *f, const jj_args *a) {
    const char *name;
    if (f->type == JJ_MACRO) return jj_call_macro(r, f->u.macro, a);
    if (f->type == JJ_UNDEF) jj_undef_fail(r, f, "call");
    if (f->type != JJ_FUNC) jj_fail(r, "TypeError: '%s' object is not callable", jj_type_name(f));
    if (f->u.fn->self.type != JJ_UNDEF) return jj_call_method(r, f->u.fn, a);
    name = f->u.fn->name;
    if (!strcmp(name, "raise_exception")) {
        const jj_val *m = jj_arg(a, 0, NULL);
        jj_buf b = {0, 0, 0};
        if (m) jj_put_str(r, &b, m);
        r->raised = 1;
        jj_fail(r, "%s", b.p ? b.p : "");
    }
    if (!strcmp(name, "range")) return jj_range(r, a);
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jj_val ns = jj_new_dict(r, name[0] == 'n' ? JJ_NS : JJ_DICT);
        int i;
        size_t k;
        for (i = 0; i < a->npos; i++) {
            if (a->pos[i].type != JJ_DICT) jj_fail(r, "TypeError: %s() takes a mapping", name);
            for (k = 0; k < a->pos[i].u.d->n; k++) jj_dict_set(r, ns.u.d, a->pos[i].u.d->k[k], a->pos[i].u.d->v[k]);
        }
        for (i = 0; i < a->nkw; i++) jj_dict_set(r, ns.u.d, jj_str_val(r, a->kwn[i]->s, a->kwn[i]->len), a->kwv[i]);
        return ns;
    }
    if (!strcmp(name, "strftime_now")) {
        /* the fixed instant 2026-11-25 00:00:00 (a Wednesday), so renderings never change */
        const jj_str *fmt = jj_arg_str(r, a, 0, NULL, name);
        struct tm tm;
        char out[512];
        size_t n;
        if (!fmt) jj_fail(r, "TypeError: strftime_now needs a format");
        memset(&tm, 0, sizeof tm);
        tm.tm_year = 2026 - 1900;
        tm.tm_mon = 10;
        tm.tm_mday = 25;
        tm.tm_wday = 3;
        tm.tm_yday = 328;
        if (fmt->len > 128) jj_fail(r, "strftime_now: format too long");
        n = strftime(out, sizeof out, fmt->s, &tm);
        return jj_str_val(r, out, n);
    }
    jj_fail(r, "unknown function '%s'", name);
    return jj_none();
}

static jj_val jj_eval(jj_r *r, jj_scope *s, jj_node *x) {
    jj_val v, w;
    jj_args a;
    int i;
    if (++r->depth > r->lim.max_depth) jj_fail(r, "line %d: evaluation nested deeper than %d", x->line, r->lim.max_depth);
    switch (x->kind) {
    case N_LIT: v = x->val; break;
    case N_NAME:
        v = jj_lookup(s, x->val.u.s);
        if (v.type == JJ_UNDEF) {
            static const char *const globals[] = {"range", "namespace", "raise_exception", "strftime_now", "dict", NULL};
            const char *const *g;
            for (g = globals; *g; g++)
                if (!strcmp(*g, x->val.u.s->s)) {
                    v = jj_func_val(r, *g, jj_undef(NULL));
                    break;
                }
        }
        break;
    case N_LIST: case N_TUPLE:
        v = jj_new_list(r, (size_t)x->n, x->kind == N_TUPLE ? JJ_TUPLE : 0);
        for (i = 0; i < x->n; i++) v.u.l->v[v.u.l->n++] = jj_eval(r, s, x->kid[i]);
        break;
    case N_DICT:
        v = jj_new_dict(r, JJ_DICT);
        for (i = 0; i + 1 < x->n; i += 2) {
            jj_val k = jj_eval(r, s, x->kid[i]);
            if (k.type == JJ_LIST && !(k.flags & JJ_TUPLE)) jj_fail(r, "TypeError: unhashable type: 'list'");
            if (k.type == JJ_DICT) jj_fail(r, "TypeError: unhashable type: 'dict'");
            jj_dict_set(r, v.u.d, k, jj_eval(r, s, x->kid[i + 1]));
        }
        break;
    case N_ATTR:
        w = jj_eval(r, s, x->kid[0]);
        v = jj_getattr(r, &w, x->val.u.s);
        break;
    case N_ITEM:
        w = jj_eval(r, s, x->kid[0]);
        v = jj_eval(r, s, x->kid[1]);
        v = jj_getitem(r, &w, &v);
        break;
    case N_SLICE: {
        jj_val parts[3];
        for (i = 0; i < 3; i++) parts[i] = x->kid[i + 1] ? jj_eval(r, s, x->kid[i + 1]) : jj_none();
        w = jj_eval(r, s, x->kid[0]);
        v = jj_slice(r, &w, &parts[0], &parts[1], &parts[2]);
        break;
    }
    case N_CALL:
        w = jj_eval(r, s, x->kid[0]);
        jj_eval_args(r, s, x, 1, &a);
        v = jj_call(r, &w, &a);
        break;
    case N_FILTER:
        w = x->kid[0] ? jj_eval(r, s, x->kid[0]) : jj_none();
        jj_eval_args(r, s, x, 1, &a);
        v = jj_filter(r, x->val.u.s->s, &w, &a);
        break;
    case N_TEST:
        w = jj_eval(r, s, x->kid[0]);
        jj_eval_args(r, s, x, 1, &a);
        v = jj_bool(jj_test(r, x->val.u.s->s, &w, &a) != x->op);
        break;
    case N_BIN:
        w = jj_eval(r, s, x->kid[0]);
        v = jj_binop(r, x->op, w, jj_eval(r, s, x->kid[1]));
        break;
    case N_NEG: case N_POS:
        v = jj_eval(r, s, x->kid[0]);
        if (v.type == JJ_UNDEF) jj_undef_fail(r, &v, "unary operator");
        if (!jj_is_num(&v)) jj_fail(r, "TypeError: bad operand type for unary operator: '%s'", jj_type_name(&v));
        if (x->kind == N_NEG) v = v.type == JJ_FLOAT ? jj_float(-v.u.f) : jj_int((int64_t)(0 - (uint64_t)v.u.i));
        else if (v.type == JJ_BOOL) v = jj_int(v.u.i);
        break;
    case N_AND:
        v = jj_eval(r, s, x->kid[0]);
        if (jj_truthy(&v)) v = jj_eval(r, s, x->kid[1]);
        break;
    case N_OR:
        v = jj_eval(r, s, x->kid[0]);
        if (!jj_truthy(&v)) v = jj_eval(r, s, x->kid[1]);
        break;
    case N_NOT:
        v = jj_eval(r, s, x->kid[0]);
        v = jj_bool(!jj_truthy(&v));
        break;
    case N_COND:
        w = jj_eval(r, s, x->kid[1]);
        v = jj_truthy(&w) ? jj_eval(r, s, x->kid[0]) : x->kid[2] ? jj_eval(r, s, x->kid[2]) : jj_undef(NULL);
        break;
    case N_CONCAT: {
        jj_buf b = {0, 0, 0};
        for (i = 0; i < x->n; i++) {
            w = jj_eval(r, s, x->kid[i]);
            jj_put_str(r, &b, &w);
        }
        v = jj_buf_val(r, &b);
        break;
    }
    case N_CMP:
        w = jj_eval(r, s, x->kid[0]);
        v = jj_eval(r, s, x->kid[1]);
        switch (x->op) {
        case OP_EQ: v = jj_bool(jj_equal(&w, &v)); break;
        case OP_NE: v = jj_bool(!jj_equal(&w, &v)); break;
        case OP_IN: v = jj_bool(jj_contains(r, &v, &w)); break;
        case OP_NOTIN: v = jj_bool(!jj_contains(r, &v, &w)); break;
        default: {
            int c;
            if (w.type == JJ_UNDEF) jj_undef_fail(r, &w, "comparison");
            if (v.type == JJ_UNDEF) jj_undef_fail(r, &v, "comparison");
            c = jj_cmp(r, &w, &v);
            v = jj_bool(x->op == OP_LT ? c < 0 : x->op == OP_LE ? c <= 0 : x->op == OP_GT ? c > 0 : c >= 0);
        }
        }
        break;
    default: jj_fail(r, "internal error: unknown expression");
    }
    r->depth--;
    return v;
}

/* ---- statements ---------------------------------------------------------------------------- */

enum { JJ_NEXT = 0, JJ_BREAK, JJ_CONTINUE };

static void jj_bind(jj_r *r, jj_scope *s, jj_node *target, jj_val v) {
    if (target->kind == N_NAME) {
        jj_assign(r, s, target->val.u.s, v);
    } else if (target->kind == N_TUPLE) {
        jj_list *items;
        int i;
        if (v.type != JJ_LIST && v.type != JJ_STR && v.type != JJ_DICT)
            jj_fail(r, "TypeError: cannot unpack non-iterable %s object", jj_type_name(&v));
        items = jj_iter(r, &v);
        if ((int)items->n != target->n)
            jj_fail(r, "ValueError: expected %d values to unpack, got %zu", target->n, items->n);
        for (i = 0; i < target->n; i++) jj_assign(r, s, target->kid[i]->val.u.s, items->v[i]);
    } else { /* ns.attr */
        jj_val ns = jj_lookup(s, target->kid[0]->val.u.s);
        if (ns.type != JJ_NS) jj_fail(r, "line %d: cannot assign attribute on non-namespace object", target->line);
        jj_dict_set(r, ns.u.d, jj_str_val(r, target->val.u.s->s, target->val.u.s->len), v);
    }
}

static int jj_exec_for(jj_r *r, jj_scope *outer, jj_node *x) {
    jj_val seq = jj_eval(r, outer, x->kid[1]);
    jj_list *items = jj_iter(r, &seq);
    jj_scope *s = jj_new_scope(r, outer);
    jj_loop *state = (jj_loop *)jj_alloc(r, sizeof *state);
    jj_val loop;
    size_t i;
    if (x->kid[4]) { /* for x in y if cond: the filter comes first, loop.* counts what passes */
        jj_val kept = jj_new_list(r, items->n, 0);
        for (i = 0; i < items->n; i++) {
            jj_val c;
            jj_step(r);
            jj_bind(r, s, x->kid[0], items->v[i]);
            c = jj_eval(r, s, x->kid[4]);
            if (jj_truthy(&c)) kept.u.l->v[kept.u.l->n++] = items->v[i];
        }
        items = kept.u.l;
    }
    state->items = items;
    loop.type = JJ_LOOP;
    loop.flags = 0;
    loop.u.loop = state;
    jj_assign(r, s, jj_newstr(r, "loop", 4), loop);
    for (i = 0; i < items->n; i++) {
        int flow;
        jj_step(r);
        jj_bind(r, s, x->kid[0], items->v[i]);
        state->i = i;
        flow = jj_exec(r, s, x->kid[2]);
        if (flow == JJ_BREAK) break;
    }
    if (!items->n && x->kid[3]) return jj_exec(r, outer, x->kid[3]);
    return JJ_NEXT;
}

static int jj_exec(jj_r *r, jj_scope *s, jj_node *x) {
    int i, flow = JJ_NEXT;
    jj_val v;
    if (++r->depth > r->lim.max_depth) jj_fail(r, "line %d: evaluation nested deeper than %d", x->line, r->lim.max_depth);
    switch (x->kind) {
    case S_BODY:
        for (i = 0; i < x->n && flow == JJ_NEXT; i++) flow = jj_exec(r, s, x->kid[i]);
        break;
    case S_TEXT: jj_put(r, r->out, x->val.u.s->s, x->val.u.s->len); break;
    case S_OUT:
        v = jj_eval(r, s, x->kid[0]);
        jj_put_str(r, r->out, &v);
        break;
    case S_IF:
        v = jj_eval(r, s, x->kid[0]);
        if (jj_truthy(&v)) flow = jj_exec(r, s, x->kid[1]);
        else if (x->kid[2]) flow = jj_exec(r, s, x->kid[2]);
        break;
    case S_FOR: flow = jj_exec_for(r, s, x); break;
    case S_SET: jj_bind(r, s, x->kid[0], jj_eval(r, s, x->kid[1])); break;
    case S_SETBLOCK: case S_FILTERBLOCK: {
        jj_buf out = {0, 0, 0}, *saved = r->out;
        jj_node *chain, *f;
        r->out = &out;
        flow = jj_exec(r, s, x->kind == S_SETBLOCK ? x->kid[1] : x->kid[0]);
        r->out = saved;
        v = jj_buf_val(r, &out);
        chain = x->kind == S_SETBLOCK ? x->kid[2] : x->kid[1];
        if (chain) { /* apply the chain innermost first: its input is the captured text */
            jj_node *stack[64];
            int n = 0;
            for (f = chain; f; f = f->kid[0]) {
                if (n == 64) jj_fail(r, "filter chain too long");
                stack[n++] = f;
            }
            while (n--) {
                jj_args a;
                jj_eval_args(r, s, stack[n], 1, &a);
                v = jj_filter(r, stack[n]->val.u.s->s, &v, &a);
            }
        }
        if (x->kind == S_SETBLOCK) jj_bind(r, s, x->kid[0], v);
        else jj_put_str(r, r->out, &v);
        break;
    }
    case S_MACRO:
        v.type = JJ_MACRO;
        v.flags = 0;
        v.u.macro = x;
        jj_assign(r, s, x->val.u.s, v);
        break;
    case S_BREAK: flow = JJ_BREAK; break;
    case S_CONTINUE: flow = JJ_CONTINUE; break;
    default: jj_fail(r, "internal error: unknown statement");
    }
    r->depth--;
    return flow;
}

/* ---- the API ------------------------------------------------------------------------------------ */

INFERDEF infer_jinja_limits infer_jinja_default_limits(void) {
    infer_jinja_limits l;
    l.max_steps = 1000000;
    l.max_depth = 256;
    l.max_output = (size_t)16 << 20;
    l.max_memory = (size_t)256 << 20;
    return l;
}

INFERDEF char *infer_jinja_render(const char *template_text, const char *context_json, const infer_jinja_limits *limits,
                                  int *raised, infer_error *err) {
    jj_r *r;
    char *volatile result = NULL; /* set between setjmp and a longjmp */
    if (raised) *raised = 0;
    if (!template_text) {
        infer__set_error(err, INFER_ERR_ARG, "no template");
        return NULL;
    }
    r = (jj_r *)infer__calloc(1, sizeof *r);
    if (!r) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    r->lim = limits ? *limits : infer_jinja_default_limits();
    if (r->lim.max_steps <= 0 || r->lim.max_depth <= 0 || !r->lim.max_output || !r->lim.max_memory) {
        INFER_FREE(r);
        infer__set_error(err, INFER_ERR_ARG, "jinja limits must be positive");
        return NULL;
    }
    if (!setjmp(r->fail)) {
        jj_lex L;
        jj_parser P;
        jj_node *body;
        jj_buf out = {0, 0, 0};
        jj_val ctx;
        size_t i;
        memset(&L, 0, sizeof L);
        L.r = r;
        jj_tokenize(&L, template_text);
        P.r = r;
        P.t = L.toks;
        P.depth = 0;
        body = jj_p_body(&P, NULL);
        r->root = jj_new_scope(r, NULL);
        if (context_json && *context_json) {
            jj_jp j;
            j.r = r;
            j.p = context_json;
            ctx = jj_jp_value(&j);
            jj_jp_ws(&j);
            if (*j.p) jj_fail(r, "context JSON: text after the value");
            if (ctx.type != JJ_DICT) jj_fail(r, "context JSON: not an object");
            for (i = 0; i < ctx.u.d->n; i++) jj_assign(r, r->root, ctx.u.d->k[i].u.s, ctx.u.d->v[i]);
        }
        r->depth = 0;
        r->out = &out;
        jj_exec(r, r->root, body);
        result = (char *)INFER_MALLOC(out.n + 1);
        if (!result) jj_fail(r, "out of memory");
        if (out.n) memcpy(result, out.p, out.n);
        result[out.n] = 0;
    } else {
        if (raised) *raised = r->raised;
        infer__set_error(err, INFER_ERR_ARG, "%s", r->msg);
    }
    jj_free_all(r);
    INFER_FREE(r);
    return result;
}

/* The text of token id (control tokens as written in the vocabulary), or "". */
static void jj_token_text(const infer_gguf *g, int64_t id, char *dst, size_t size) {
    const infer__kv *kv = infer__gguf_kv(g, "tokenizer.ggml.tokens");
    size_t n = 0;
    if (id >= 0 && kv && kv->type == INFER_GGUF_ARRAY && kv->strs && (uint64_t)id < kv->arr_n && kv->strs[id].n > 0)
        n = INFER__MIN((size_t)kv->strs[id].n, size - 1);
    if (n) memcpy(dst, kv->strs[id].p, n);
    dst[n] = 0;
}

INFERDEF char *infer_model_chat_template_text(const infer_model *m, char *bos, size_t bos_size, char *eos,
                                              size_t eos_size) {
    const infer_gguf *g = m ? infer_model_gguf(m) : NULL;
    infer__str s;
    char *text = NULL;
    if (bos && bos_size) bos[0] = 0;
    if (eos && eos_size) eos[0] = 0;
    if (!g) return NULL;
    if (bos && bos_size) jj_token_text(g, infer_model_bos(m), bos, bos_size);
    if (eos && eos_size) jj_token_text(g, infer_model_eos(m), eos, eos_size);
    if (infer__gguf_get_str(g, "tokenizer.chat_template", &s)) text = infer__strndup(s.p, (size_t)s.n);
    return text;
}
