/* jinja.h - the Jinja interpreter's values, render state, tokens and syntax
   tree, and the functions its parts share (jinja_value.c, jinja_parse.c,
   jinja_builtin.c, jinja_eval.c; jinja.c's API runs them). */
#ifndef INFER_JINJA_H
#define INFER_JINJA_H
#include "internal.h"

#include <setjmp.h>

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

/* Python's json.dumps options (tojson, the context's printing) */
typedef struct infer__jj_json_opts {
    int indent; /* -1: none */
    const infer__jj_str *indent_str;
    const char *item_sep, *key_sep;
    int ensure_ascii, sort_keys;
} infer__jj_json_opts;

/* a token (lexer) */
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

/* a call's arguments (builtin calls) */
typedef struct infer__jj_args {
    infer__jj_val *pos;
    int npos;
    infer__jj_str **kwn;
    infer__jj_val *kwv;
    int nkw;
} infer__jj_args;

/* jinja_value.c */
INFER__NORETURN static void infer__jj_fail(infer__jj_r *r, const char *fmt, ...) INFER__PRINTF(2, 3);
static void infer__jj_work(infer__jj_r *r, size_t items, size_t bytes);
static void *infer__jj_alloc(infer__jj_r *r, size_t size);
static void infer__jj_free_all(infer__jj_r *r);
static void infer__jj_put(infer__jj_r *r, infer__jj_buf *b, const char *s, size_t n);
static void infer__jj_puts(infer__jj_r *r, infer__jj_buf *b, const char *s);
static void infer__jj_putc(infer__jj_r *r, infer__jj_buf *b, char c);
static infer__jj_str *infer__jj_newstr(infer__jj_r *r, const char *s, size_t n);
static infer__jj_val infer__jj_str_val(infer__jj_r *r, const char *s, size_t n);
static infer__jj_val infer__jj_cstr(infer__jj_r *r, const char *s);
static infer__jj_val infer__jj_buf_val(infer__jj_r *r, const infer__jj_buf *b);
static infer__jj_val infer__jj_undef(infer__jj_str *name);
static infer__jj_val infer__jj_none(void);
static infer__jj_val infer__jj_bool(int b);
static infer__jj_val infer__jj_int(int64_t i);
static infer__jj_val infer__jj_float(double f);
static infer__jj_val infer__jj_new_list(infer__jj_r *r, size_t cap, int flags);
static void infer__jj_list_push(infer__jj_r *r, infer__jj_list *l, infer__jj_val x);
static infer__jj_val infer__jj_new_dict(infer__jj_r *r, int type);
static int infer__jj_streq(const infer__jj_str *a, const char *s, size_t n);
static long infer__jj_dict_find(infer__jj_r *r, const infer__jj_dict *d, const infer__jj_val *key);
static long infer__jj_dict_find_s(const infer__jj_dict *d, const char *s, size_t n);
static void infer__jj_dict_set(infer__jj_r *r, infer__jj_dict *d, infer__jj_val key, infer__jj_val val);
static int infer__jj_truthy(const infer__jj_val *v);
static int infer__jj_is_num(const infer__jj_val *v);
static double infer__jj_num(const infer__jj_val *v);
static int infer__jj_equal(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b);
static const char *infer__jj_type_name(const infer__jj_val *v);
static int infer__jj_cmp(infer__jj_r *r, const infer__jj_val *a, const infer__jj_val *b);
static void infer__jj_put_str(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *v);
static infer__jj_str *infer__jj_to_str(infer__jj_r *r, const infer__jj_val *v);
static void infer__jj_put_json(infer__jj_r *r, infer__jj_buf *b, const infer__jj_val *v, const infer__jj_json_opts *o,
                               int level);
static void infer__jj_put_utf8(infer__jj_r *r, infer__jj_buf *b, uint32_t cp);
static infer__jj_val infer__jj_from_json(infer__jj_r *r, const infer__jv *j);

/* jinja_parse.c */
static int infer__jj_space(char c);
static int infer__jj_digit(char c);
static void infer__jj_tokenize(infer__jj_lex *L, const char *text);
static infer__jj_node *infer__jj_p_body(infer__jj_parser *P, const char *const *ends);

/* jinja_builtin.c */
static void infer__jj_step(infer__jj_r *r);
static infer__jj_val infer__jj_lookup(infer__jj_scope *s, infer__jj_str *name);
static void infer__jj_assign(infer__jj_r *r, infer__jj_scope *s, infer__jj_str *name, infer__jj_val v);
static infer__jj_scope *infer__jj_new_scope(infer__jj_r *r, infer__jj_scope *parent);
static void infer__jj_undef_fail(infer__jj_r *r, const infer__jj_val *v, const char *what);
static infer__jj_list *infer__jj_iter(infer__jj_r *r, const infer__jj_val *v);
static int infer__jj_contains(infer__jj_r *r, const infer__jj_val *hay, const infer__jj_val *needle);
static infer__jj_val infer__jj_binop(infer__jj_r *r, int op, infer__jj_val a, infer__jj_val b);
static const infer__jj_val *infer__jj_arg(const infer__jj_args *a, int i, const char *name);
static const infer__jj_str *infer__jj_arg_str(infer__jj_r *r, const infer__jj_args *a, int i, const char *name,
                                              const char *what);
static int64_t infer__jj_arg_int(infer__jj_r *r, const infer__jj_args *a, int i, const char *name, int64_t def,
                                 const char *what);
static infer__jj_val infer__jj_func_val(infer__jj_r *r, const char *name, infer__jj_val self);
static infer__jj_val infer__jj_call_method(infer__jj_r *r, const infer__jj_func *fn, const infer__jj_args *a);
static infer__jj_val infer__jj_getattr(infer__jj_r *r, const infer__jj_val *obj, const infer__jj_str *name);
static infer__jj_val infer__jj_getitem(infer__jj_r *r, const infer__jj_val *obj, const infer__jj_val *key);
static infer__jj_val infer__jj_slice(infer__jj_r *r, const infer__jj_val *obj, const infer__jj_val *start,
                                     const infer__jj_val *stop, const infer__jj_val *step);
static int infer__jj_test(infer__jj_r *r, const char *name, const infer__jj_val *v, const infer__jj_args *a);
static infer__jj_val infer__jj_filter(infer__jj_r *r, const char *name, const infer__jj_val *v,
                                      const infer__jj_args *a);

/* jinja_eval.c */
static infer__jj_val infer__jj_eval(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *x);
static int infer__jj_exec(infer__jj_r *r, infer__jj_scope *s, infer__jj_node *x);

#endif
