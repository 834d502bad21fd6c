/* toolgrammar.c - the grammar that forces a well-formed tool call
   (infer_tool_call_grammar): a format's markers around the call, whose
   arguments match the tool's parameters schema (schema.c writes those). */
#include "internal.h"

typedef struct infer__tg_tool {
    const char *name; /* decoded, NUL-terminated (owned by the parsed list) */
    size_t name_len;
    const infer__jv *params; /* its parameters schema */
} infer__tg_tool;

/* a JSON string as a GBNF literal: "\"name\"" */
static void infer__tg_json_lit(infer__sb *b, const char *s, size_t n) {
    infer__sb json = {NULL, 0};
    infer__sb_json_string(&json, s, n);
    if (json.nomem) b->nomem = 1;
    else infer__sb_literal(b, json.p, (size_t)stbds_arrlen(json.p));
    stbds_arrfree(json.p);
}

/* ` "{" space "\"key\"" space ":" space ` */
static void infer__tg_key(infer__sb *b, const char *key, int first) {
    infer__sb_puts(b, first ? "\"{\" space " : "\",\" space ");
    infer__tg_json_lit(b, key, strlen(key));
    infer__sb_puts(b, " space \":\" space ");
}

/* 1 where a property's schema is a plain string (no enum, const or
   pattern): Qwen3.5's XML writes it as text, not JSON */
static int infer__tg_plain_string(const infer__jv *prop) {
    const infer__jv *type = infer__jv_get(prop, "type");
    return type && type->type == INFER__J_STR && !strcmp(type->s, "string") && !infer__jv_get(prop, "enum") &&
           !infer__jv_get(prop, "const") && !infer__jv_get(prop, "pattern");
}

static int infer__tg_required(const infer__jv *params, const char *key, size_t key_len) {
    const infer__jv *req = infer__jv_get(params, "required");
    int i;
    if (!req || req->type != INFER__J_ARR) return 0;
    for (i = 0; i < (int)stbds_arrlen(req->items); i++)
        if (req->items[i].type == INFER__J_STR && req->items[i].n == key_len && !memcmp(req->items[i].s, key, key_len))
            return 1;
    return 0;
}

/* The longest string bound (minLength, maxLength) an XML argument's
   grammar keeps. */
#define INFER__TG_MAX_LEN 1024

/* One argument of tool i, property k, as the format writes it: XML
   <parameter=key>\nvalue\n</parameter>\n, or LFM2's key=value */
static void infer__tg_arg(infer__sb *b, infer_tool_format f, const infer__jv *props, int i, int k) {
    char rule[48];
    const infer__jv *prop = &props->items[k];
    const infer__jv *type = infer__jv_get(prop, "type");
    snprintf(rule, sizeof rule, " tool-arg-%d-%d ", i, k);
    if (f == INFER_TOOL_FORMAT_QWEN3_XML) {
        infer__sb lit = {NULL, 0};
        infer__sb_puts(&lit, "<parameter=");
        infer__sb_put(&lit, props->keys[k], props->key_lens[k]);
        infer__sb_puts(&lit, ">\n");
        if (lit.nomem) b->nomem = 1;
        else infer__sb_literal(b, lit.p, stbds_arrlenu(lit.p));
        stbds_arrfree(lit.p);
        {
            const infer__jv *e = infer__jv_get(prop, "enum");
            int m, strings = e && e->type == INFER__J_ARR && stbds_arrlen(e->items) > 0;
            for (m = 0; strings && m < (int)stbds_arrlen(e->items); m++) strings = e->items[m].type == INFER__J_STR;
            if (strings) { /* an enum of strings: one of them, as text */
                infer__sb_puts(b, " (");
                for (m = 0; m < (int)stbds_arrlen(e->items); m++) {
                    infer__sb_puts(b, m ? " | " : "");
                    infer__sb_literal(b, e->items[m].s, e->items[m].n);
                }
                infer__sb_puts(b, ") ");
            } else if (infer__tg_plain_string(prop) && (infer__jv_get(prop, "maxLength") || infer__jv_get(prop, "minLength"))) {
                /* a bounded string: its characters counted, so without '<' */
                const infer__jv *lo = infer__jv_get(prop, "minLength"), *hi = infer__jv_get(prop, "maxLength");
                double mn = lo && lo->type == INFER__J_NUM ? strtod(lo->s, NULL) : 0;
                double mx = hi && hi->type == INFER__J_NUM ? strtod(hi->s, NULL) : -1;
                char rep[64];
                /* bounds past INFER__TG_MAX_LEN are not kept (x{m,n} is
                   written out as copies): the string is then free */
                mn = mn > 0 ? INFER__MIN(mn, (double)INFER__TG_MAX_LEN) : 0;
                if (mx >= mn && mx <= INFER__TG_MAX_LEN)
                    snprintf(rep, sizeof rep, " [^<]{%ld,%ld} ", (long)mn, (long)mx);
                else snprintf(rep, sizeof rep, " [^<]{%ld,} ", (long)mn);
                infer__sb_puts(b, rep);
            } else infer__sb_puts(b, infer__tg_plain_string(prop) ? " xml-text " : rule);
        }
        infer__sb_puts(b, "\"\\n</parameter>\\n\"");
        return;
    }
    infer__sb_literal(b, props->keys[k], props->key_lens[k]);
    infer__sb_puts(b, " \"=\" ");
    if (type && type->type == INFER__J_STR && !strcmp(type->s, "boolean")) infer__sb_puts(b, "(\"True\" | \"False\")");
    else if (type && type->type == INFER__J_STR && !strcmp(type->s, "null")) infer__sb_puts(b, "\"None\"");
    else infer__sb_puts(b, rule);
}

/* The arguments of tool i in XML or LFM2's form: the required ones in the
   schema's order, then the optional ones, each at most once in order */
static void infer__tg_args(infer__sb *b, infer_tool_format f, const infer__jv *params, int i) {
    const infer__jv *props = infer__jv_get(params, "properties");
    const char *sep = f == INFER_TOOL_FORMAT_LFM2 ? " \",\" space " : " ";
    int k, j, n = props && props->type == INFER__J_OBJ ? (int)stbds_arrlen(props->keys) : 0, any_req = 0;
    if (!n) { /* any object: XML takes any parameters as text; LFM2 none */
        if (f == INFER_TOOL_FORMAT_QWEN3_XML)
            infer__sb_puts(b, " (\"<parameter=\" [a-zA-Z0-9_.-]+ \">\\n\" xml-text \"\\n</parameter>\\n\")* ");
        return;
    }
    infer__sb_puts(b, " ");
    for (k = 0; k < n; k++)
        if (infer__tg_required(params, props->keys[k], props->key_lens[k])) {
            if (any_req) infer__sb_puts(b, sep);
            infer__tg_arg(b, f, props, i, k);
            any_req = 1;
        }
    if (any_req) {
        for (k = 0; k < n; k++)
            if (!infer__tg_required(params, props->keys[k], props->key_lens[k])) {
                infer__sb_puts(b, " (");
                infer__sb_puts(b, sep);
                infer__tg_arg(b, f, props, i, k);
                infer__sb_puts(b, ")?");
            }
        infer__sb_puts(b, " ");
        return;
    }
    /* none required: which comes first decides where the separators go */
    infer__sb_puts(b, "(");
    for (j = 0; j < n; j++) {
        if (j) infer__sb_puts(b, " | ");
        infer__tg_arg(b, f, props, i, j);
        for (k = j + 1; k < n; k++) {
            infer__sb_puts(b, " (");
            infer__sb_puts(b, sep);
            infer__tg_arg(b, f, props, i, k);
            infer__sb_puts(b, ")?");
        }
    }
    infer__sb_puts(b, ")? ");
}

/* ---- Gemma 4's arguments: its own syntax, from the schema ---- */

/* the shared rules of Gemma 4's values: strings between <|"|> quotes
   (without "<|" inside), JSON's numbers, bare keys */
static const char infer__tg_g4_rules[] =
    "g4-value ::= g4-string | g4-number | g4-bool | \"null\" | g4-object | g4-array\n"
    "g4-string ::= \"<|\\\"|>\" ([^<] | \"<\" [^|])* \"<|\\\"|>\"\n"
    "g4-integer ::= \"-\"? ([0-9] | [1-9] [0-9]*)\n"
    "g4-number ::= g4-integer (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
    "g4-bool ::= \"true\" | \"false\"\n"
    "g4-key ::= ([a-zA-Z0-9_.$] | \"-\")+\n"
    "g4-object ::= \"{\" (g4-key \":\" g4-value (\",\" g4-key \":\" g4-value)*)? \"}\"\n"
    "g4-array ::= \"[\" (g4-value (\",\" g4-value)*)? \"]\"\n";

/* Rules written for one tool's schema: tool-g4-T-N, into rules. */
typedef struct infer__tg_g4 {
    infer__sb *rules;
    int tool, next;
} infer__tg_g4;

static void infer__tg_g4_value(infer__tg_g4 *g, infer__sb *b, const infer__jv *s, int depth);

/* A new rule, its body written by value's schema (after key ":" where
   key is not NULL), added to g->rules after the rules the body uses; its
   name (" tool-g4-T-N ") into b. */
static void infer__tg_g4_rule(infer__tg_g4 *g, infer__sb *b, const char *key, size_t key_len, const infer__jv *value,
                              int depth) {
    char nm[48];
    infer__sb body = {NULL, 0};
    snprintf(nm, sizeof nm, "tool-g4-%d-%d", g->tool, g->next++);
    if (key) {
        infer__sb_literal(&body, key, key_len);
        infer__sb_puts(&body, " \":\"");
    }
    infer__tg_g4_value(g, &body, value, depth);
    infer__sb_puts(g->rules, nm);
    infer__sb_puts(g->rules, " ::= ");
    infer__sb_put(g->rules, body.p ? body.p : "", stbds_arrlenu(body.p));
    infer__sb_puts(g->rules, "\n");
    if (body.nomem) g->rules->nomem = 1;
    stbds_arrfree(body.p);
    infer__sb_puts(b, " ");
    infer__sb_puts(b, nm);
    infer__sb_puts(b, " ");
}

/* one value of an enum or const as Gemma writes it */
static void infer__tg_g4_const(infer__sb *b, const infer__jv *v) {
    infer__sb t = {NULL, 0};
    if (v->type == INFER__J_STR) {
        infer__sb_puts(&t, INFER__G4_QUOTE);
        infer__sb_put(&t, v->s, v->n);
        infer__sb_puts(&t, INFER__G4_QUOTE);
    } else infer__sb_json(&t, v); /* numbers, true/false/null; lists and objects as JSON (seldom) */
    if (t.nomem) b->nomem = 1;
    else infer__sb_literal(b, t.p ? t.p : "", stbds_arrlenu(t.p));
    stbds_arrfree(t.p);
}

/* 1 where key a sorts before b as Jinja's dictsort (case-insensitive) does */
static int infer__tg_g4_before(const char *a, size_t an, const char *b, size_t bn) {
    size_t i;
    for (i = 0; i < an && i < bn; i++) {
        int x = a[i] >= 'A' && a[i] <= 'Z' ? a[i] + 32 : a[i], y = b[i] >= 'A' && b[i] <= 'Z' ? b[i] + 32 : b[i];
        if (x != y) return x < y;
    }
    return an < bn;
}

/* A non-empty list of the properties order[k..n) (their rules first[k..]):
   each required one written, the optional ones maybe, "," between */
static void infer__tg_g4_props(infer__sb *b, char **rule, const int *req, int k, int n) {
    int j;
    if (!req[k] && k + 1 < n) infer__sb_puts(b, "(");
    infer__sb_puts(b, rule[k]);
    for (j = k + 1; j < n; j++) {
        infer__sb_puts(b, req[j] ? " \",\" " : " (\",\" ");
        infer__sb_puts(b, rule[j]);
        infer__sb_puts(b, req[j] ? " " : ")? ");
    }
    if (!req[k] && k + 1 < n) {
        infer__sb_puts(b, " | ");
        infer__tg_g4_props(b, rule, req, k + 1, n);
        infer__sb_puts(b, ")");
    }
}

/* {key:value, ..}: the properties in the template's order (sorted), the
   required ones present, no others */
static void infer__tg_g4_object(infer__tg_g4 *g, infer__sb *b, const infer__jv *s, const infer__jv *props,
                                int depth) {
    int n = (int)stbds_arrlen(props->keys), k, j, any_req = 0;
    int *order = (int *)infer__calloc((size_t)n, sizeof *order), *req = (int *)infer__calloc((size_t)n, sizeof *req);
    char **rule = (char **)infer__calloc((size_t)n, sizeof *rule);
    if (!order || !req || !rule) {
        b->nomem = 1;
        n = 0;
    }
    for (k = 0; k < n; k++) { /* insertion sort: a schema has few properties */
        for (j = k; j > 0 && infer__tg_g4_before(props->keys[k], props->key_lens[k], props->keys[order[j - 1]],
                                                 props->key_lens[order[j - 1]]);
             j--)
            order[j] = order[j - 1];
        order[j] = k;
    }
    for (k = 0; k < n && !b->nomem; k++) { /* a rule per property: key ":" value */
        infer__sb name = {NULL, 0};
        int p = order[k];
        req[k] = infer__tg_required(s, props->keys[p], props->key_lens[p]);
        any_req |= req[k];
        infer__tg_g4_rule(g, &name, props->keys[p], props->key_lens[p], &props->items[p], depth + 1);
        if (name.nomem || !(rule[k] = infer__strndup(name.p, stbds_arrlenu(name.p)))) b->nomem = 1;
        stbds_arrfree(name.p);
    }
    infer__sb_puts(b, " \"{\" ");
    if (n && !b->nomem) {
        infer__sb_puts(b, "(");
        infer__tg_g4_props(b, rule, req, 0, n);
        infer__sb_puts(b, any_req ? ") " : ")? ");
    }
    infer__sb_puts(b, "\"}\" ");
    for (k = 0; rule && k < n; k++) INFER_FREE(rule[k]);
    INFER_FREE(rule);
    INFER_FREE(order);
    INFER_FREE(req);
}

/* one type's values ("string", "integer", ...) */
static void infer__tg_g4_type(infer__tg_g4 *g, infer__sb *b, const infer__jv *s, const char *t, int depth) {
    const infer__jv *props = infer__jv_get(s, "properties"), *items = infer__jv_get(s, "items");
    if (!strcmp(t, "string")) infer__sb_puts(b, " g4-string ");
    else if (!strcmp(t, "integer")) infer__sb_puts(b, " g4-integer ");
    else if (!strcmp(t, "number")) infer__sb_puts(b, " g4-number ");
    else if (!strcmp(t, "boolean")) infer__sb_puts(b, " g4-bool ");
    else if (!strcmp(t, "null")) infer__sb_puts(b, " \"null\" ");
    else if (!strcmp(t, "object") && props && props->type == INFER__J_OBJ && stbds_arrlen(props->keys))
        infer__tg_g4_object(g, b, s, props, depth);
    else if (!strcmp(t, "object")) infer__sb_puts(b, " g4-object ");
    else if (!strcmp(t, "array") && items && items->type == INFER__J_OBJ) {
        infer__sb item = {NULL, 0};
        infer__tg_g4_rule(g, &item, NULL, 0, items, depth + 1);
        infer__sb_puts(b, " \"[\" (");
        infer__sb_put(b, item.p ? item.p : "", stbds_arrlenu(item.p));
        infer__sb_puts(b, " (\",\"");
        infer__sb_put(b, item.p ? item.p : "", stbds_arrlenu(item.p));
        infer__sb_puts(b, ")*)? \"]\" ");
        if (item.nomem) b->nomem = 1;
        stbds_arrfree(item.p);
    } else if (!strcmp(t, "array")) infer__sb_puts(b, " g4-array ");
    else infer__sb_puts(b, " g4-value ");
}

/* A value of schema s as Gemma 4 writes it, an expression into b: enum,
   const, anyOf/oneOf, type (one or a list); anything else any value. */
static void infer__tg_g4_value(infer__tg_g4 *g, infer__sb *b, const infer__jv *s, int depth) {
    const infer__jv *e, *type;
    int k;
    if (!s || s->type != INFER__J_OBJ || depth > INFER__JSON_MAX_DEPTH) {
        infer__sb_puts(b, " g4-value ");
        return;
    }
    if ((e = infer__jv_get(s, "const"))) {
        infer__sb_puts(b, " ");
        infer__tg_g4_const(b, e);
        infer__sb_puts(b, " ");
        return;
    }
    e = infer__jv_get(s, "enum");
    if (e && e->type == INFER__J_ARR && stbds_arrlen(e->items)) {
        infer__sb_puts(b, " (");
        for (k = 0; k < (int)stbds_arrlen(e->items); k++) {
            infer__sb_puts(b, k ? " | " : "");
            infer__tg_g4_const(b, &e->items[k]);
        }
        infer__sb_puts(b, ") ");
        return;
    }
    if (!(e = infer__jv_get(s, "anyOf"))) e = infer__jv_get(s, "oneOf");
    if (e && e->type == INFER__J_ARR && stbds_arrlen(e->items)) {
        infer__sb_puts(b, " (");
        for (k = 0; k < (int)stbds_arrlen(e->items); k++) {
            infer__sb_puts(b, k ? " | " : "");
            infer__tg_g4_value(g, b, &e->items[k], depth + 1);
        }
        infer__sb_puts(b, ") ");
        return;
    }
    type = infer__jv_get(s, "type");
    if (type && type->type == INFER__J_STR) infer__tg_g4_type(g, b, s, type->s, depth);
    else if (type && type->type == INFER__J_ARR && stbds_arrlen(type->items)) {
        infer__sb_puts(b, " (");
        for (k = 0; k < (int)stbds_arrlen(type->items); k++) {
            infer__sb_puts(b, k ? " | " : "");
            infer__tg_g4_type(g, b, s, type->items[k].type == INFER__J_STR ? type->items[k].s : "", depth);
        }
        infer__sb_puts(b, ") ");
    } else if (infer__jv_get(s, "properties")) infer__tg_g4_type(g, b, s, "object", depth);
    else if (infer__jv_get(s, "items")) infer__tg_g4_type(g, b, s, "array", depth);
    else infer__sb_puts(b, " g4-value ");
}

/* tool i's arguments rule, tool-args-i, and the rules it uses */
static void infer__tg_g4_args(infer__sb *out, const infer__jv *params, int i) {
    char head[32];
    infer__sb rules = {NULL, 0};
    infer__tg_g4 g;
    g.rules = &rules;
    g.tool = i;
    g.next = 0;
    snprintf(head, sizeof head, "tool-args-%d ::= ", i);
    infer__sb_puts(out, head);
    /* the arguments are an object, even where the schema does not say so */
    if (!infer__jv_get(params, "type") && !infer__jv_get(params, "properties")) infer__sb_puts(out, " g4-object ");
    else infer__tg_g4_value(&g, out, params, 0);
    infer__sb_puts(out, "\n");
    infer__sb_put(out, rules.p ? rules.p : "", stbds_arrlenu(rules.p));
    if (rules.nomem) out->nomem = 1;
    stbds_arrfree(rules.p);
}

/* The call of tool i as the format writes one (its arguments rule is
   tool-args-i), as a rule's body. */
static void infer__tg_item(infer__sb *b, infer_tool_format f, const infer__tg_tool *t, int i) {
    char args[32];
    snprintf(args, sizeof args, " tool-args-%d ", i);
    switch (f) {
    case INFER_TOOL_FORMAT_QWEN3_XML: /* <function=name>\n<parameter=k>\nv\n</parameter>\n..</function> */
        infer__sb_puts(b, "\"<function=\" ");
        infer__sb_literal(b, t->name, t->name_len);
        infer__sb_puts(b, " \">\\n\"");
        infer__tg_args(b, f, t->params, i);
        infer__sb_puts(b, "\"</function>\"");
        return;
    case INFER_TOOL_FORMAT_LFM2: /* name(k=v, ..) */
        infer__sb_literal(b, t->name, t->name_len);
        infer__sb_puts(b, " \"(\"");
        infer__tg_args(b, f, t->params, i);
        infer__sb_puts(b, "\")\"");
        return;
    case INFER_TOOL_FORMAT_FUNCTIONARY: /* <function=name>{..}</function> */
        infer__sb_puts(b, "\"<function=\" ");
        infer__sb_literal(b, t->name, t->name_len);
        infer__sb_puts(b, " \">\"");
        infer__sb_puts(b, args);
        infer__sb_puts(b, "\"</function>\"");
        return;
    case INFER_TOOL_FORMAT_DEEPSEEK_R1: { /* begin function sep name ```json {..} ``` end */
        infer__sb head = {NULL, 0};
        infer__sb_puts(&head, INFER__DS_CALL_BEGIN "function" INFER__DS_SEP);
        infer__sb_put(&head, t->name, t->name_len);
        infer__sb_puts(&head, "\n```json\n");
        if (head.nomem) b->nomem = 1;
        else infer__sb_literal(b, head.p, (size_t)stbds_arrlen(head.p));
        stbds_arrfree(head.p);
        infer__sb_puts(b, args);
        infer__sb_literal(b, "\n```" INFER__DS_CALL_END, strlen("\n```" INFER__DS_CALL_END));
        return;
    }
    case INFER_TOOL_FORMAT_HARMONY: /* (after the root's header) name <|constrain|>json<|message|>{..} */
        infer__sb_literal(b, t->name, t->name_len);
        infer__sb_puts(b, " \" <|constrain|>json<|message|>\"");
        infer__sb_puts(b, args);
        return;
    case INFER_TOOL_FORMAT_GEMMA4: /* (after the root's <|tool_call>call:) name{k:v, ..} */
        infer__sb_literal(b, t->name, t->name_len);
        infer__sb_puts(b, args);
        return;
    case INFER_TOOL_FORMAT_APERTUS: /* {"name": {..}} */
        infer__sb_puts(b, "\"{\" space ");
        infer__tg_json_lit(b, t->name, t->name_len);
        infer__sb_puts(b, " space \":\" space");
        infer__sb_puts(b, args);
        infer__sb_puts(b, "\"}\" space");
        return;
    case INFER_TOOL_FORMAT_COMMAND_R: /* {"tool_call_id": "0", "tool_name": name, "parameters": {..}} */
        infer__tg_key(b, "tool_call_id", 1);
        infer__sb_puts(b, "\"\\\"\" [0-9]{1,4} \"\\\"\" space ");
        infer__tg_key(b, "tool_name", 0);
        infer__tg_json_lit(b, t->name, t->name_len);
        infer__sb_puts(b, " space ");
        infer__tg_key(b, "parameters", 0);
        infer__sb_puts(b, args);
        infer__sb_puts(b, "\"}\" space");
        return;
    default: /* {"name": name, "arguments": {..}} (Llama 3: "parameters") */
        infer__tg_key(b, "name", 1);
        infer__tg_json_lit(b, t->name, t->name_len);
        infer__sb_puts(b, " space ");
        infer__tg_key(b, f == INFER_TOOL_FORMAT_LLAMA3 ? "parameters" : "arguments", 0);
        infer__sb_puts(b, args);
        infer__sb_puts(b, "\"}\" space");
        return;
    }
}

/* The root rule: the calls with the format's markers around them. */
static void infer__tg_root(infer__sb *b, infer_tool_format f, int parallel) {
    const char *list = parallel ? "tool-list ::= \"[\" space tool-item (\",\" space tool-item)* \"]\" space\n"
                                : "tool-list ::= \"[\" space tool-item \"]\" space\n";
    switch (f) {
    case INFER_TOOL_FORMAT_HERMES:
        infer__sb_puts(b, parallel ? "root ::= tool-tagged (\"\\n\" tool-tagged)*\n" : "root ::= tool-tagged\n");
        infer__sb_puts(b, "tool-tagged ::= \"<tool_call>\\n\" tool-item \"\\n</tool_call>\"\n");
        return;
    case INFER_TOOL_FORMAT_QWEN3_XML:
        infer__sb_puts(b, parallel ? "root ::= tool-tagged (\"\\n\" tool-tagged)*\n" : "root ::= tool-tagged\n");
        /* <tool_call> may be left out, as the parser allows (and the lazy
           trigger <function= starts there) */
        infer__sb_puts(b, "tool-tagged ::= \"<tool_call>\\n\" tool-item \"\\n</tool_call>\" | tool-item\n");
        /* a parameter's text: anything without "</" */
        infer__sb_puts(b, "xml-text ::= ([^<] | \"<\" [^/])*\n");
        return;
    case INFER_TOOL_FORMAT_LFM2:
        infer__sb_puts(b, parallel ? "root ::= \"<|tool_call_start|>[\" tool-item (\",\" space tool-item)* "
                                     "\"]<|tool_call_end|>\"\n"
                                   : "root ::= \"<|tool_call_start|>[\" tool-item \"]<|tool_call_end|>\"\n");
        return;
    case INFER_TOOL_FORMAT_HARMONY:
        /* One call: its <|call|> ends the reply (as an end-of-generation
           token it is no text a grammar matches: optional). An analysis
           message may come first, as the model reasons before it calls;
           the lazy trigger starts at the call's <|channel|>. Its <|end|>
           is optional, for a vocabulary where it is no text. */
        infer__sb_puts(b, "root ::= harmony-analysis? \"<|channel|>commentary to=functions.\" tool-item \"<|call|>\"?\n");
        infer__sb_puts(b, "harmony-analysis ::= \"<|channel|>analysis<|message|>\" harmony-text "
                          "\"<|end|>\"? \"<|start|>assistant\"\n");
        infer__sb_puts(b, "harmony-text ::= ([^<] | \"<\" [^|])*\n"); /* no harmony token */
        return;
    case INFER_TOOL_FORMAT_GEMMA4:
        /* each call in its own <|tool_call>..<tool_call|>; the thinking
           channel may come first (thinking on: the prompt did not close
           it), its text without "<c" (so without <channel|>) */
        infer__sb_puts(b, parallel ? "root ::= g4-thought? g4-call+\n" : "root ::= g4-thought? g4-call\n");
        infer__sb_puts(b, "g4-call ::= \"<|tool_call>call:\" tool-item \"<tool_call|>\"\n");
        infer__sb_puts(b, "g4-thought ::= \"<|channel>thought\" ([^<] | \"<\" [^c])* \"<channel|>\"\n");
        infer__sb_puts(b, infer__tg_g4_rules);
        return;
    case INFER_TOOL_FORMAT_LLAMA3: /* one call a reply */
        infer__sb_puts(b, "root ::= tool-item\n");
        return;
    case INFER_TOOL_FORMAT_FUNCTIONARY:
        infer__sb_puts(b, parallel ? "root ::= tool-item (\"\\n\"? tool-item)*\n" : "root ::= tool-item\n");
        return;
    case INFER_TOOL_FORMAT_DEEPSEEK_R1:
        infer__sb_puts(b, "root ::= ");
        infer__sb_literal(b, INFER__DS_CALLS_BEGIN, strlen(INFER__DS_CALLS_BEGIN));
        infer__sb_puts(b, parallel ? " tool-item (\"\\n\"? tool-item)* " : " tool-item ");
        infer__sb_literal(b, INFER__DS_CALLS_END, strlen(INFER__DS_CALLS_END));
        infer__sb_puts(b, "\n");
        return;
    case INFER_TOOL_FORMAT_MISTRAL: infer__sb_puts(b, "root ::= \"[TOOL_CALLS]\" tool-list\n"); break;
    case INFER_TOOL_FORMAT_PHI4_MINI: infer__sb_puts(b, "root ::= \"<|tool_call|>\" tool-list \"<|/tool_call|>\"\n"); break;
    case INFER_TOOL_FORMAT_NEMOTRON: infer__sb_puts(b, "root ::= \"<TOOLCALL>\" tool-list \"</TOOLCALL>\"\n"); break;
    case INFER_TOOL_FORMAT_FIREFUNCTION: infer__sb_puts(b, "root ::= \"functools\" tool-list\n"); break;
    case INFER_TOOL_FORMAT_COMMAND_R:
        infer__sb_puts(b, "root ::= \"<|START_ACTION|>\" tool-list \"<|END_ACTION|>\"\n");
        break;
    case INFER_TOOL_FORMAT_APERTUS:
        infer__sb_puts(b, "root ::= \"<|tools_prefix|>\" tool-list \"<|tools_suffix|>\"\n");
        break;
    default: /* generic: {"tool_calls": [..]} or {"tool_call": {..}} */
        infer__sb_puts(b, "root ::= ");
        infer__tg_key(b, "tool_call", 1);
        infer__sb_puts(b, "tool-item \"}\" space");
        if (!parallel) {
            infer__sb_puts(b, "\n");
            return;
        }
        infer__sb_puts(b, " | ");
        infer__tg_key(b, "tool_calls", 1);
        infer__sb_puts(b, "tool-list \"}\" space\n");
        break;
    }
    infer__sb_puts(b, list);
}

static int infer__tool_call_grammar(infer_tool_format f, const char *tools_json, const char *name, int parallel,
                                    char *buf, size_t size, infer_error *err) {
    static const char any_object[] = "{\"type\": \"object\"}";
    infer__jp jp, jo;
    infer__jv list, object;
    infer__tg_tool *tools = NULL;
    const infer__jv **schemas = NULL;
    char **names = NULL;
    infer__sb out = {NULL, 0};
    int i, n = 0, len = -1;
    if (!tools_json || (int)f < 0 || f >= INFER_TOOL_FORMAT_COUNT) {
        infer__set_error(err, INFER_ERR_ARG, "tool call grammar: no tools, or an unknown format");
        return -1;
    }
    memset(&jp, 0, sizeof jp);
    memset(&jo, 0, sizeof jo);
    memset(&object, 0, sizeof object);
    jp.src = jp.p = tools_json;
    jp.err = err;
    jp.what = "tools";
    jo.src = jo.p = any_object;
    jo.err = err;
    infer__jp_value(&jp, &list);
    infer__jp_ws(&jp);
    if (!jp.failed && *jp.p) infer__jp_fail(&jp, jp.p, "unexpected text after the list");
    if (!jp.failed && list.type != INFER__J_ARR) infer__jp_fail(&jp, list.at, "tools must be a list");
    if (!jp.failed) infer__jp_value(&jo, &object);
    for (i = 0; !jp.failed && !jo.failed && i < (int)stbds_arrlen(list.items); i++) {
        const infer__jv *t = &list.items[i], *fn = infer__jv_get(t, "function"), *nm, *params;
        if (fn && fn->type == INFER__J_OBJ) t = fn; /* OpenAI's {"type": "function", "function": {..}} */
        nm = infer__jv_get(t, "name");
        if (t->type != INFER__J_OBJ || !nm || nm->type != INFER__J_STR || !nm->n) {
            infer__jp_fail(&jp, t->at, "tool %d has no name", i);
            break;
        }
        if (name && strcmp(name, nm->s) != 0) continue;
        params = infer__jv_get(t, "parameters");
        if (!infer__arr_room(tools, 1)) {
            infer__jp_nomem(&jp);
            break;
        }
        {
            infer__tg_tool tool = {nm->s, nm->n, params && params->type == INFER__J_OBJ ? params : &object};
            stbds_arrput(tools, tool);
        }
    }
    n = (int)stbds_arrlen(tools);
    if (!jp.failed && !jo.failed && n == 0)
        infer__jp_fail(&jp, NULL, name ? "no tool is named %s" : "the list has no tools", name ? name : "");
    if (!jp.failed && !jo.failed) {
        if (!infer__arr_room(schemas, n) || !infer__arr_room(names, n)) infer__jp_nomem(&jp);
        for (i = 0; !jp.failed && i < n; i++) {
            char nm[48], *copy;
            const infer__jv *props = infer__jv_get(tools[i].params, "properties");
            int k, per_arg = f == INFER_TOOL_FORMAT_QWEN3_XML || f == INFER_TOOL_FORMAT_LFM2;
            int n_rules = per_arg ? (props && props->type == INFER__J_OBJ ? (int)stbds_arrlen(props->keys) : 0) : 1;
            if (f == INFER_TOOL_FORMAT_GEMMA4) n_rules = 0; /* Gemma's own syntax, not JSON: below */
            for (k = 0; k < n_rules; k++) {
                if (per_arg) snprintf(nm, sizeof nm, "tool-arg-%d-%d", i, k);
                else snprintf(nm, sizeof nm, "tool-args-%d", i);
                if (!infer__arr_room(schemas, 1) || !infer__arr_room(names, 1) ||
                    !(copy = infer__strndup(nm, strlen(nm)))) {
                    infer__jp_nomem(&jp);
                    break;
                }
                stbds_arrput(names, copy);
                stbds_arrput(schemas, per_arg ? &props->items[k] : tools[i].params);
            }
        }
    }
    if (!jp.failed && !jo.failed) {
        infer__tg_root(&out, f, parallel);
        infer__sb_puts(&out, "tool-item ::= ");
        for (i = 0; i < n; i++) {
            infer__sb_puts(&out, i ? " | " : "");
            infer__sb_puts(&out, "tool-item-");
            {
                char k[16];
                snprintf(k, sizeof k, "%d", i);
                infer__sb_puts(&out, k);
            }
        }
        infer__sb_puts(&out, "\n");
        for (i = 0; i < n; i++) {
            char k[32];
            snprintf(k, sizeof k, "tool-item-%d ::= ", i);
            infer__sb_puts(&out, k);
            infer__tg_item(&out, f, &tools[i], i);
            infer__sb_puts(&out, "\n");
            if (f == INFER_TOOL_FORMAT_GEMMA4) infer__tg_g4_args(&out, tools[i].params, i);
        }
        if (infer__schema_rules(&jp, schemas, (const char *const *)names, (int)stbds_arrlen(schemas),
                                f == INFER_TOOL_FORMAT_GEMMA4 ? 0 : 1u << INFER__SP_SPACE | 1u << INFER__SP_STRING,
                                &out) == 0) {
            if (out.nomem) infer__jp_nomem(&jp);
            else len = infer__sb_give(&out, buf, size);
        }
    }
    for (i = 0; i < (int)stbds_arrlen(names); i++) INFER_FREE(names[i]);
    stbds_arrfree(names);
    stbds_arrfree(schemas);
    stbds_arrfree(tools);
    stbds_arrfree(out.p);
    infer__jv_free(&list);
    infer__jv_free(&object);
    return len;
}

INFERDEF infer_status infer_tool_call_grammar(infer_tool_format f, const char *tools_json, const char *name, int parallel,
                                              char *buf, size_t size, size_t *n_out, infer_error *err) {
    infer_error e;
    int len;
    if (n_out) *n_out = 0;
    if (!buf && size) {
        infer__set_error(err, INFER_ERR_ARG, "tool call grammar: no buffer");
        return INFER_ERR_ARG;
    }
    e.code = INFER_OK;
    e.msg[0] = 0;
    if ((len = infer__tool_call_grammar(f, tools_json, name, parallel, buf, size, &e)) < 0) {
        if (e.code == INFER_OK) infer__set_error(&e, INFER_ERR_ARG, "tool call grammar: failed");
        if (err) *err = e;
        return e.code;
    }
    if (n_out) *n_out = (size_t)len;
    return INFER_OK;
}
