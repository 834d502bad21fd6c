/* jinja_eval.c - the Jinja interpreter's evaluation: expressions and
   statements (loops, macros, set, filter blocks) over the syntax tree. */
#include "jinja.h"

#include <time.h>

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
