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
    INFER__JJ_UNDEF = 0,
    INFER__JJ_NONE,
    INFER__JJ_BOOL,
    INFER__JJ_INT,
    INFER__JJ_FLOAT,
    INFER__JJ_STR,
    INFER__JJ_LIST,
    INFER__JJ_DICT,
    INFER__JJ_NS,
    INFER__JJ_FUNC,
    INFER__JJ_MACRO,
    INFER__JJ_LOOP
};
/* flags of a value */
#define INFER__JJ_MARKUP 1 /* STR: |safe (markup + str escapes the str) */
#define INFER__JJ_TUPLE 2  /* LIST: printed (a, b) */
#define INFER__JJ_LAZY 4   /* LIST: the generator map/select give (no len, no tojson) */

typedef struct infer__jj_str infer__jj_str;
typedef struct infer__jj_list infer__jj_list;
typedef struct infer__jj_dict infer__jj_dict;
typedef struct infer__jj_func infer__jj_func;
typedef struct infer__jj_node infer__jj_node;
typedef struct infer__jj_loop infer__jj_loop;

typedef struct infer__jj_val {
    unsigned char type, flags;
    union {
        int64_t i;
        double f;
        infer__jj_str *s; /* STR; UNDEF: the name it was looked up by, or NULL */
        infer__jj_list *l;
        infer__jj_dict *d; /* DICT, NS */
        infer__jj_func *fn;
        infer__jj_node *macro;
        infer__jj_loop *loop;
    } u;
} infer__jj_val;

struct infer__jj_str {
    size_t len;
    char s[1]; /* len bytes and a NUL */
};
struct infer__jj_list {
    infer__jj_val *v;
    size_t n, cap;
};
struct infer__jj_dict {
    infer__jj_val *k, *v;
    size_t n, cap;
};
/* a for loop's "loop": one per loop, updated in place as jinja2's
   LoopContext is (so an iteration allocates nothing) */
struct infer__jj_loop {
    infer__jj_list *items;
    size_t i;
};
/* a builtin: a global function, or a method bound to self */
struct infer__jj_func {
    const char *name;
    infer__jj_val self;
};

/* ---- the render's state ------------------------------------------------------- */

typedef struct infer__jj_chunk {
    struct infer__jj_chunk *next;
    size_t used, cap;
    union {
        long double ld;
        void *p;
        int64_t i;
    } data[1];
} infer__jj_chunk;

typedef struct infer__jj_buf {
    char *p;
    size_t n, cap;
} infer__jj_buf;

typedef struct infer__jj_scope {
    struct infer__jj_scope *parent;
    infer__jj_dict *vars;
} infer__jj_scope;

typedef struct infer__jj_r {
    jmp_buf fail;
    char msg[256];
    int raised; /* the error is raise_exception's message */
    infer__jj_chunk *chunks;
    size_t mem_used;
    infer_jinja_limits lim;
    int64_t steps;
    int depth;
    infer__jj_scope *root;
    infer__jj_buf *out; /* where text goes now */
    infer__jv context;  /* the context's JSON as parsed (freed after the render) */
} infer__jj_r;

INFER__NORETURN static void infer__jj_fail(infer__jj_r *r, const char *fmt, ...) INFER__PRINTF(2, 3);
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

static const char *infer__jj_memmem(infer__jj_r *r, const char *h, size_t hn, const char *n, size_t nn);

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

typedef struct infer__jj_json_opts {
    int indent; /* -1: none */
    const infer__jj_str *indent_str;
    const char *item_sep, *key_sep;
    int ensure_ascii, sort_keys;
} infer__jj_json_opts;

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

static int infer__jj_cmp(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b);

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

typedef struct infer__jj_tok {
    int type, line;
    const char *s; /* NAME, OP: the text; TEXT: the text */
    size_t n;
    infer__jj_val val; /* STRING, INT, FLOAT, TEXT */
} infer__jj_tok;

typedef struct infer__jj_lex {
    infer__jj_r *r;
    const char *src; /* normalized */
    infer__jj_tok *toks;
    size_t n, cap;
} infer__jj_lex;

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

enum {
    INFER__JN_LIT = 1,
    INFER__JN_NAME,
    INFER__JN_LIST,
    INFER__JN_TUPLE,
    INFER__JN_DICT,
    INFER__JN_ATTR,
    INFER__JN_ITEM,
    INFER__JN_SLICE,
    INFER__JN_CALL,
    INFER__JN_FILTER,
    INFER__JN_TEST,
    INFER__JN_BIN,
    INFER__JN_NEG,
    INFER__JN_POS,
    INFER__JN_AND,
    INFER__JN_OR,
    INFER__JN_NOT,
    INFER__JN_COND,
    INFER__JN_CONCAT,
    INFER__JN_CMP,
    INFER__JS_BODY,
    INFER__JS_TEXT,
    INFER__JS_OUT,
    INFER__JS_IF,
    INFER__JS_FOR,
    INFER__JS_SET,
    INFER__JS_SETBLOCK,
    INFER__JS_MACRO,
    INFER__JS_FILTERBLOCK,
    INFER__JS_BREAK,
    INFER__JS_CONTINUE
};
/* binary operators and comparisons (INFER__JN_BIN, INFER__JN_CMP's op) */
enum {
    INFER__JOP_ADD = 1,
    INFER__JOP_SUB,
    INFER__JOP_MUL,
    INFER__JOP_DIV,
    INFER__JOP_FLOORDIV,
    INFER__JOP_MOD,
    INFER__JOP_POW,
    INFER__JOP_EQ,
    INFER__JOP_NE,
    INFER__JOP_LT,
    INFER__JOP_LE,
    INFER__JOP_GT,
    INFER__JOP_GE,
    INFER__JOP_IN,
    INFER__JOP_NOTIN
};

struct infer__jj_node {
    int kind, op, line;
    infer__jj_val val;     /* LIT: the value; NAME, ATTR, FILTER, TEST, MACRO: the name (STR) */
    infer__jj_node **kid;  /* children (some may be NULL) */
    infer__jj_str **names; /* CALL, FILTER, TEST: keyword names (NULL: positional); MACRO: parameters */
    int n;                 /* kid (and names) count */
};

typedef struct infer__jj_parser {
    infer__jj_r *r;
    infer__jj_tok *t; /* the current token */
    int depth;
} infer__jj_parser;

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

/* ---- evaluation ---------------------------------------------------------------------- */

static infer__jj_val infer__jj_eval(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *x);
static int infer__jj_exec(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *x);

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

typedef struct infer__jj_args {
    infer__jj_val *pos;
    int npos;
    infer__jj_str **kwn;
    infer__jj_val *kwv;
    int nkw;
} infer__jj_args;

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

/* ---- expressions -------------------------------------------------------------------------- */

static void infer__jj_eval_args(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *x, int from, infer__jj_args *a) {
    int i, n = x->n - from;
    a->pos = n > 0 ? (infer__jj_val *)infer__jj_alloc(r, (size_t)n * sizeof(infer__jj_val)) : NULL;
    a->kwv = n > 0 ? (infer__jj_val *)infer__jj_alloc(r, (size_t)n * sizeof(infer__jj_val)) : NULL;
    a->kwn = n > 0 ? (infer__jj_str **)infer__jj_alloc(r, (size_t)n * sizeof(infer__jj_str *)) : NULL;
    a->npos = a->nkw = 0;
    for (i = from; i < x->n; i++) {
        infer__jj_val v = infer__jj_eval(r, s, x->kid[i]);
        if (x->names && x->names[i]) {
            a->kwn[a->nkw] = x->names[i];
            a->kwv[a->nkw++] = v;
        } else
            a->pos[a->npos++] = v;
    }
}

static infer__jj_val infer__jj_call_macro(infer__jj_r *r, infer__jj_node *m, const infer__jj_args *a) {
    infer__jj_scope *s = infer__jj_new_scope(r, r->root);
    infer__jj_buf out = {0, 0, 0}, *saved = r->out;
    int i, k, np = m->n - 1;
    infer__jj_val varargs = infer__jj_new_list(r, 0, INFER__JJ_TUPLE), kwargs = infer__jj_new_dict(r, INFER__JJ_DICT);
    infer__jj_step(r);
    for (i = 0; i < np; i++) {
        const infer__jj_val *v = infer__jj_arg(a, i, m->names[i + 1]->s);
        infer__jj_assign(r, s, m->names[i + 1],
                         v               ? *v
                         : m->kid[i + 1] ? infer__jj_eval(r, s, m->kid[i + 1])
                                         : infer__jj_undef(m->names[i + 1]));
    }
    for (i = np; i < a->npos; i++) infer__jj_list_push(r, varargs.u.l, a->pos[i]);
    for (k = 0; k < a->nkw; k++) {
        int known = 0;
        for (i = 0; i < np; i++) known |= !strcmp(a->kwn[k]->s, m->names[i + 1]->s);
        if (!known) infer__jj_dict_set(r, kwargs.u.d, infer__jj_str_val(r, a->kwn[k]->s, a->kwn[k]->len), a->kwv[k]);
    }
    infer__jj_assign(r, s, infer__jj_newstr(r, "varargs", 7), varargs);
    infer__jj_assign(r, s, infer__jj_newstr(r, "kwargs", 6), kwargs);
    r->out = &out;
    infer__jj_exec(r, s, m->kid[0]);
    r->out = saved;
    return infer__jj_buf_val(r, &out);
}

static infer__jj_val infer__jj_range(infer__jj_r *r, const infer__jj_args *a) {
    int64_t start = 0, stop, step = 1, n, i;
    infer__jj_val l;
    if (a->npos == 1)
        stop = infer__jj_arg_int(r, a, 0, NULL, 0, "range");
    else {
        start = infer__jj_arg_int(r, a, 0, NULL, 0, "range");
        stop = infer__jj_arg_int(r, a, 1, NULL, 0, "range");
        step = infer__jj_arg_int(r, a, 2, NULL, 1, "range");
    }
    if (a->npos < 1 || a->npos > 3) infer__jj_fail(r, "TypeError: range expected 1 to 3 arguments");
    if (!step) infer__jj_fail(r, "ValueError: range() arg 3 must not be zero");
    if (step > 0)
        n = stop > start ? (int64_t)(((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1) : 0;
    else
        n = start > stop ? (int64_t)(((uint64_t)start - (uint64_t)stop - 1) / (uint64_t)-step + 1) : 0;
    if (n < 0 || (uint64_t)n > r->lim.max_memory / sizeof(infer__jj_val) || (n > r->lim.max_steps))
        infer__jj_fail(r, "range of %lld items: over the step limit (%lld) or the memory limit (%zu bytes)",
                       (long long)n, (long long)r->lim.max_steps, r->lim.max_memory);
    l = infer__jj_new_list(r, (size_t)n, 0);
    for (i = 0; i < n; i++) l.u.l->v[i] = infer__jj_int(start + i * step);
    l.u.l->n = (size_t)n;
    return l;
}

static infer__jj_val infer__jj_call(infer__jj_r *r, const infer__jj_val *f, const infer__jj_args *a) {
    const char *name;
    if (f->type == INFER__JJ_MACRO) return infer__jj_call_macro(r, f->u.macro, a);
    if (f->type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, f, "call");
    if (f->type != INFER__JJ_FUNC) infer__jj_fail(r, "TypeError: '%s' object is not callable", infer__jj_type_name(f));
    if (f->u.fn->self.type != INFER__JJ_UNDEF) return infer__jj_call_method(r, f->u.fn, a);
    name = f->u.fn->name;
    if (!strcmp(name, "raise_exception")) {
        const infer__jj_val *m = infer__jj_arg(a, 0, NULL);
        infer__jj_buf b = {0, 0, 0};
        if (m) infer__jj_put_str(r, &b, m);
        r->raised = 1;
        infer__jj_fail(r, "%s", b.p ? b.p : "");
    }
    if (!strcmp(name, "range")) return infer__jj_range(r, a);
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        infer__jj_val ns = infer__jj_new_dict(r, name[0] == 'n' ? INFER__JJ_NS : INFER__JJ_DICT);
        int i;
        size_t k;
        for (i = 0; i < a->npos; i++) {
            if (a->pos[i].type != INFER__JJ_DICT) infer__jj_fail(r, "TypeError: %s() takes a mapping", name);
            for (k = 0; k < a->pos[i].u.d->n; k++)
                infer__jj_dict_set(r, ns.u.d, a->pos[i].u.d->k[k], a->pos[i].u.d->v[k]);
        }
        for (i = 0; i < a->nkw; i++)
            infer__jj_dict_set(r, ns.u.d, infer__jj_str_val(r, a->kwn[i]->s, a->kwn[i]->len), a->kwv[i]);
        return ns;
    }
    if (!strcmp(name, "strftime_now")) {
        /* the fixed instant 2026-11-25 00:00:00 (a Wednesday), so renderings never change */
        const infer__jj_str *fmt = infer__jj_arg_str(r, a, 0, NULL, name);
        struct tm tm;
        char out[512];
        size_t n;
        if (!fmt) infer__jj_fail(r, "TypeError: strftime_now needs a format");
        memset(&tm, 0, sizeof tm);
        tm.tm_year = 2026 - 1900;
        tm.tm_mon = 10;
        tm.tm_mday = 25;
        tm.tm_wday = 3;
        tm.tm_yday = 328;
        if (fmt->len > 128) infer__jj_fail(r, "strftime_now: format too long");
        n = strftime(out, sizeof out, fmt->s, &tm);
        return infer__jj_str_val(r, out, n);
    }
    infer__jj_fail(r, "unknown function '%s'", name);
    return infer__jj_none();
}

static infer__jj_val infer__jj_eval(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *x) {
    infer__jj_val v, w;
    infer__jj_args a;
    int i;
    if (++r->depth > r->lim.max_depth)
        infer__jj_fail(r, "line %d: evaluation nested deeper than %d", x->line, r->lim.max_depth);
    switch (x->kind) {
    case INFER__JN_LIT: v = x->val; break;
    case INFER__JN_NAME:
        v = infer__jj_lookup(s, x->val.u.s);
        if (v.type == INFER__JJ_UNDEF) {
            static const char *const globals[] = {"range",        "namespace", "raise_exception",
                                                  "strftime_now", "dict",      NULL};
            const char *const *g;
            for (g = globals; *g; g++)
                if (!strcmp(*g, x->val.u.s->s)) {
                    v = infer__jj_func_val(r, *g, infer__jj_undef(NULL));
                    break;
                }
        }
        break;
    case INFER__JN_LIST:
    case INFER__JN_TUPLE:
        v = infer__jj_new_list(r, (size_t)x->n, x->kind == INFER__JN_TUPLE ? INFER__JJ_TUPLE : 0);
        for (i = 0; i < x->n; i++) v.u.l->v[v.u.l->n++] = infer__jj_eval(r, s, x->kid[i]);
        break;
    case INFER__JN_DICT:
        v = infer__jj_new_dict(r, INFER__JJ_DICT);
        for (i = 0; i + 1 < x->n; i += 2) {
            infer__jj_val k = infer__jj_eval(r, s, x->kid[i]);
            if (k.type == INFER__JJ_LIST && !(k.flags & INFER__JJ_TUPLE))
                infer__jj_fail(r, "TypeError: unhashable type: 'list'");
            if (k.type == INFER__JJ_DICT) infer__jj_fail(r, "TypeError: unhashable type: 'dict'");
            infer__jj_dict_set(r, v.u.d, k, infer__jj_eval(r, s, x->kid[i + 1]));
        }
        break;
    case INFER__JN_ATTR:
        w = infer__jj_eval(r, s, x->kid[0]);
        v = infer__jj_getattr(r, &w, x->val.u.s);
        break;
    case INFER__JN_ITEM:
        w = infer__jj_eval(r, s, x->kid[0]);
        v = infer__jj_eval(r, s, x->kid[1]);
        v = infer__jj_getitem(r, &w, &v);
        break;
    case INFER__JN_SLICE: {
        infer__jj_val parts[3];
        for (i = 0; i < 3; i++) parts[i] = x->kid[i + 1] ? infer__jj_eval(r, s, x->kid[i + 1]) : infer__jj_none();
        w = infer__jj_eval(r, s, x->kid[0]);
        v = infer__jj_slice(r, &w, &parts[0], &parts[1], &parts[2]);
        break;
    }
    case INFER__JN_CALL:
        w = infer__jj_eval(r, s, x->kid[0]);
        infer__jj_eval_args(r, s, x, 1, &a);
        v = infer__jj_call(r, &w, &a);
        break;
    case INFER__JN_FILTER:
        w = x->kid[0] ? infer__jj_eval(r, s, x->kid[0]) : infer__jj_none();
        infer__jj_eval_args(r, s, x, 1, &a);
        v = infer__jj_filter(r, x->val.u.s->s, &w, &a);
        break;
    case INFER__JN_TEST:
        w = infer__jj_eval(r, s, x->kid[0]);
        infer__jj_eval_args(r, s, x, 1, &a);
        v = infer__jj_bool(infer__jj_test(r, x->val.u.s->s, &w, &a) != x->op);
        break;
    case INFER__JN_BIN:
        w = infer__jj_eval(r, s, x->kid[0]);
        v = infer__jj_binop(r, x->op, w, infer__jj_eval(r, s, x->kid[1]));
        break;
    case INFER__JN_NEG:
    case INFER__JN_POS:
        v = infer__jj_eval(r, s, x->kid[0]);
        if (v.type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, &v, "unary operator");
        if (!infer__jj_is_num(&v))
            infer__jj_fail(r, "TypeError: bad operand type for unary operator: '%s'", infer__jj_type_name(&v));
        if (x->kind == INFER__JN_NEG)
            v = v.type == INFER__JJ_FLOAT ? infer__jj_float(-v.u.f) : infer__jj_int((int64_t)(0 - (uint64_t)v.u.i));
        else if (v.type == INFER__JJ_BOOL)
            v = infer__jj_int(v.u.i);
        break;
    case INFER__JN_AND:
        v = infer__jj_eval(r, s, x->kid[0]);
        if (infer__jj_truthy(&v)) v = infer__jj_eval(r, s, x->kid[1]);
        break;
    case INFER__JN_OR:
        v = infer__jj_eval(r, s, x->kid[0]);
        if (!infer__jj_truthy(&v)) v = infer__jj_eval(r, s, x->kid[1]);
        break;
    case INFER__JN_NOT:
        v = infer__jj_eval(r, s, x->kid[0]);
        v = infer__jj_bool(!infer__jj_truthy(&v));
        break;
    case INFER__JN_COND:
        w = infer__jj_eval(r, s, x->kid[1]);
        v = infer__jj_truthy(&w) ? infer__jj_eval(r, s, x->kid[0])
            : x->kid[2]          ? infer__jj_eval(r, s, x->kid[2])
                                 : infer__jj_undef(NULL);
        break;
    case INFER__JN_CONCAT: {
        infer__jj_buf b = {0, 0, 0};
        for (i = 0; i < x->n; i++) {
            w = infer__jj_eval(r, s, x->kid[i]);
            infer__jj_put_str(r, &b, &w);
        }
        v = infer__jj_buf_val(r, &b);
        break;
    }
    case INFER__JN_CMP:
        w = infer__jj_eval(r, s, x->kid[0]);
        v = infer__jj_eval(r, s, x->kid[1]);
        switch (x->op) {
        case INFER__JOP_EQ: v = infer__jj_bool(infer__jj_equal(r, &w, &v)); break;
        case INFER__JOP_NE: v = infer__jj_bool(!infer__jj_equal(r, &w, &v)); break;
        case INFER__JOP_IN: v = infer__jj_bool(infer__jj_contains(r, &v, &w)); break;
        case INFER__JOP_NOTIN: v = infer__jj_bool(!infer__jj_contains(r, &v, &w)); break;
        default: {
            int c;
            if (w.type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, &w, "comparison");
            if (v.type == INFER__JJ_UNDEF) infer__jj_undef_fail(r, &v, "comparison");
            c = infer__jj_cmp(r, &w, &v);
            v = infer__jj_bool(x->op == INFER__JOP_LT   ? c < 0
                               : x->op == INFER__JOP_LE ? c <= 0
                               : x->op == INFER__JOP_GT ? c > 0
                                                        : c >= 0);
        }
        }
        break;
    default: infer__jj_fail(r, "internal error: unknown expression");
    }
    r->depth--;
    return v;
}

/* ---- statements ---------------------------------------------------------------------------- */

enum { INFER__JJ_NEXT = 0, INFER__JJ_BREAK, INFER__JJ_CONTINUE };

static void infer__jj_bind(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *target, infer__jj_val v) {
    if (target->kind == INFER__JN_NAME) {
        infer__jj_assign(r, s, target->val.u.s, v);
    } else if (target->kind == INFER__JN_TUPLE) {
        infer__jj_list *items;
        int i;
        if (v.type != INFER__JJ_LIST && v.type != INFER__JJ_STR && v.type != INFER__JJ_DICT)
            infer__jj_fail(r, "TypeError: cannot unpack non-iterable %s object", infer__jj_type_name(&v));
        items = infer__jj_iter(r, &v);
        if ((int)items->n != target->n)
            infer__jj_fail(r, "ValueError: expected %d values to unpack, got %zu", target->n, items->n);
        for (i = 0; i < target->n; i++) infer__jj_assign(r, s, target->kid[i]->val.u.s, items->v[i]);
    } else { /* ns.attr */
        infer__jj_val ns = infer__jj_lookup(s, target->kid[0]->val.u.s);
        if (ns.type != INFER__JJ_NS)
            infer__jj_fail(r, "line %d: cannot assign attribute on non-namespace object", target->line);
        infer__jj_dict_set(r, ns.u.d, infer__jj_str_val(r, target->val.u.s->s, target->val.u.s->len), v);
    }
}

static int infer__jj_exec_for(infer__jj_r *r, infer__jj_scope *outer, infer__jj_node *x) {
    infer__jj_val seq = infer__jj_eval(r, outer, x->kid[1]);
    infer__jj_list *items = infer__jj_iter(r, &seq);
    infer__jj_scope *s = infer__jj_new_scope(r, outer);
    infer__jj_loop *state = (infer__jj_loop *)infer__jj_alloc(r, sizeof *state);
    infer__jj_val loop;
    size_t i;
    if (x->kid[4]) { /* for x in y if cond: the filter comes first, loop.* counts what passes */
        infer__jj_val kept = infer__jj_new_list(r, items->n, 0);
        for (i = 0; i < items->n; i++) {
            infer__jj_val c;
            infer__jj_step(r);
            infer__jj_bind(r, s, x->kid[0], items->v[i]);
            c = infer__jj_eval(r, s, x->kid[4]);
            if (infer__jj_truthy(&c)) kept.u.l->v[kept.u.l->n++] = items->v[i];
        }
        items = kept.u.l;
    }
    state->items = items;
    loop.type = INFER__JJ_LOOP;
    loop.flags = 0;
    loop.u.loop = state;
    infer__jj_assign(r, s, infer__jj_newstr(r, "loop", 4), loop);
    for (i = 0; i < items->n; i++) {
        int flow;
        infer__jj_step(r);
        infer__jj_bind(r, s, x->kid[0], items->v[i]);
        state->i = i;
        flow = infer__jj_exec(r, s, x->kid[2]);
        if (flow == INFER__JJ_BREAK) break;
    }
    if (!items->n && x->kid[3]) return infer__jj_exec(r, outer, x->kid[3]);
    return INFER__JJ_NEXT;
}

static int infer__jj_exec(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *x) {
    int i, flow = INFER__JJ_NEXT;
    infer__jj_val v;
    if (++r->depth > r->lim.max_depth)
        infer__jj_fail(r, "line %d: evaluation nested deeper than %d", x->line, r->lim.max_depth);
    switch (x->kind) {
    case INFER__JS_BODY:
        for (i = 0; i < x->n && flow == INFER__JJ_NEXT; i++) flow = infer__jj_exec(r, s, x->kid[i]);
        break;
    case INFER__JS_TEXT: infer__jj_put(r, r->out, x->val.u.s->s, x->val.u.s->len); break;
    case INFER__JS_OUT:
        v = infer__jj_eval(r, s, x->kid[0]);
        infer__jj_put_str(r, r->out, &v);
        break;
    case INFER__JS_IF:
        v = infer__jj_eval(r, s, x->kid[0]);
        if (infer__jj_truthy(&v))
            flow = infer__jj_exec(r, s, x->kid[1]);
        else if (x->kid[2])
            flow = infer__jj_exec(r, s, x->kid[2]);
        break;
    case INFER__JS_FOR: flow = infer__jj_exec_for(r, s, x); break;
    case INFER__JS_SET: infer__jj_bind(r, s, x->kid[0], infer__jj_eval(r, s, x->kid[1])); break;
    case INFER__JS_SETBLOCK:
    case INFER__JS_FILTERBLOCK: {
        infer__jj_buf out = {0, 0, 0}, *saved = r->out;
        infer__jj_node *chain, *f;
        r->out = &out;
        flow = infer__jj_exec(r, s, x->kind == INFER__JS_SETBLOCK ? x->kid[1] : x->kid[0]);
        r->out = saved;
        v = infer__jj_buf_val(r, &out);
        chain = x->kind == INFER__JS_SETBLOCK ? x->kid[2] : x->kid[1];
        if (chain) { /* apply the chain innermost first: its input is the captured text */
            infer__jj_node *stack[64];
            int n = 0;
            for (f = chain; f; f = f->kid[0]) {
                if (n == 64) infer__jj_fail(r, "filter chain too long");
                stack[n++] = f;
            }
            while (n--) {
                infer__jj_args a;
                infer__jj_eval_args(r, s, stack[n], 1, &a);
                v = infer__jj_filter(r, stack[n]->val.u.s->s, &v, &a);
            }
        }
        if (x->kind == INFER__JS_SETBLOCK)
            infer__jj_bind(r, s, x->kid[0], v);
        else
            infer__jj_put_str(r, r->out, &v);
        break;
    }
    case INFER__JS_MACRO:
        v.type = INFER__JJ_MACRO;
        v.flags = 0;
        v.u.macro = x;
        infer__jj_assign(r, s, x->val.u.s, v);
        break;
    case INFER__JS_BREAK: flow = INFER__JJ_BREAK; break;
    case INFER__JS_CONTINUE: flow = INFER__JJ_CONTINUE; break;
    default: infer__jj_fail(r, "internal error: unknown statement");
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

/* infer_jinja_render; raw_bytes: the context's strings may hold bytes that
   are not UTF-8 (kept as they are) */
static char *infer__jj_render(const char *template_text, const char *context_json, const infer_jinja_limits *limits,
                              int raw_bytes, int *raised, infer_error *err) {
    infer__jj_r *r;
    char *volatile result = NULL; /* set between setjmp and a longjmp */
    if (raised) *raised = 0;
    if (!template_text) {
        infer__set_error(err, INFER_ERR_ARG, "no template");
        return NULL;
    }
    r = (infer__jj_r *)infer__calloc(1, sizeof *r);
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
        infer__jj_lex L;
        infer__jj_parser P;
        infer__jj_node *body;
        infer__jj_buf out = {0, 0, 0};
        infer__jj_val ctx;
        size_t i;
        memset(&L, 0, sizeof L);
        L.r = r;
        infer__jj_tokenize(&L, template_text);
        P.r = r;
        P.t = L.toks;
        P.depth = 0;
        body = infer__jj_p_body(&P, NULL);
        r->root = infer__jj_new_scope(r, NULL);
        if (context_json && *context_json) {
            infer__jp j;
            infer_error jerr;
            memset(&j, 0, sizeof j);
            j.src = j.p = context_json;
            j.err = &jerr;
            j.what = "context JSON";
            j.raw_bytes = raw_bytes;
            infer__jp_value(&j, &r->context); /* freed below, whatever happens */
            if (!j.failed) {
                infer__jp_ws(&j);
                if (*j.p) infer__jj_fail(r, "context JSON: text after the value");
            }
            if (j.failed) infer__jj_fail(r, "%s", jerr.msg);
            if (r->context.type != INFER__J_OBJ) infer__jj_fail(r, "context JSON: not an object");
            ctx = infer__jj_from_json(r, &r->context);
            for (i = 0; i < ctx.u.d->n; i++) infer__jj_assign(r, r->root, ctx.u.d->k[i].u.s, ctx.u.d->v[i]);
        }
        r->depth = 0;
        r->out = &out;
        infer__jj_exec(r, r->root, body);
        result = (char *)INFER_MALLOC(out.n + 1);
        if (!result) infer__jj_fail(r, "out of memory");
        if (out.n) memcpy(result, out.p, out.n);
        result[out.n] = 0;
    } else {
        if (raised) *raised = r->raised;
        infer__set_error(err, INFER_ERR_ARG, "%s", r->msg);
    }
    infer__jv_free(&r->context);
    infer__jj_free_all(r);
    INFER_FREE(r);
    return result;
}

INFERDEF char *infer_jinja_render(const char *template_text, const char *context_json, const infer_jinja_limits *limits,
                                  int *raised, infer_error *err) {
    return infer__jj_render(template_text, context_json, limits, 0, raised, err);
}

static char *infer__jinja_render_raw(const char *template_text, const char *context_json,
                                     const infer_jinja_limits *limits, infer_error *err) {
    return infer__jj_render(template_text, context_json, limits, 1, NULL, err);
}

/* The text of token id (control tokens as written in the vocabulary), or "". */
static void infer__jj_token_text(const infer_gguf *g, int64_t id, char *dst, size_t size) {
    const infer__kv *kv = infer__gguf_kv(g, "tokenizer.ggml.tokens");
    size_t n = 0;
    if (id >= 0 && kv && kv->type == INFER_GGUF_TYPE_ARRAY && kv->strs && (uint64_t)id < kv->arr_n && kv->strs[id].n > 0)
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
    if (bos && bos_size) infer__jj_token_text(g, infer_model_bos(m), bos, bos_size);
    if (eos && eos_size) infer__jj_token_text(g, infer_model_eos(m), eos, eos_size);
    if (infer__gguf_get_str(g, "tokenizer.chat_template", &s)) text = infer__strndup(s.p, (size_t)s.n);
    return text;
}
