/* The Jinja interpreter (src/jinja.c and its jinja_*.c parts): every reference rendering of
   ../shared/templates byte for byte, its limits against hostile templates,
   the Python semantics chat templates lean on, and `infer template`. */
#define _XOPEN_SOURCE 700 /* mkstemp */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* ---- helpers ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = (char *)realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json_str(sbuf *b, const char *s) {
    sb_puts(b, "\"");
    for (; *s; s++) {
        char t[8];
        if (*s == '"' || *s == '\\') {
            t[0] = '\\';
            t[1] = *s;
            sb_put(b, t, 2);
        } else if ((unsigned char)*s < 0x20) {
            snprintf(t, sizeof t, "\\u%04x", (unsigned char)*s);
            sb_puts(b, t);
        } else sb_put(b, s, 1);
    }
    sb_puts(b, "\"");
}

/* tu_json back to JSON text (integral numbers as integers, as written) */
static void sb_json(sbuf *b, const tu_json *j) {
    char t[64];
    int i;
    switch (j->kind) {
    case TU_NULL: sb_puts(b, "null"); break;
    case TU_BOOL: sb_puts(b, j->num != 0 ? "true" : "false"); break;
    case TU_NUM:
        if (j->num == (double)(long long)j->num) snprintf(t, sizeof t, "%lld", (long long)j->num);
        else snprintf(t, sizeof t, "%.17g", j->num);
        sb_puts(b, t);
        break;
    case TU_STR: sb_json_str(b, j->str); break;
    case TU_ARR:
        sb_puts(b, "[");
        for (i = 0; i < j->n; i++) {
            if (i) sb_puts(b, ",");
            sb_json(b, &j->items[i]);
        }
        sb_puts(b, "]");
        break;
    case TU_OBJ:
        sb_puts(b, "{");
        for (i = 0; i < j->n; i++) {
            if (i) sb_puts(b, ",");
            sb_json_str(b, j->items[i].key);
            sb_puts(b, ":");
            sb_json(b, &j->items[i]);
        }
        sb_puts(b, "}");
        break;
    }
}

/* A render with default limits: the text (caller frees) or NULL, the error in *err. */
static char *render(const char *tmpl, const char *ctx, infer_error *err, int *raised) {
    return infer_jinja_render(tmpl, ctx, NULL, raised, err);
}

static void expect(const char *tmpl, const char *ctx, const char *want) {
    infer_error err;
    char *out = render(tmpl, ctx, &err, NULL);
    cr_assert(out, "%s: failed: %s", tmpl, err.msg);
    cr_expect_str_eq(out, want, "%s", tmpl);
    free(out);
}

/* Expects an error whose message contains what (NULL: any). */
static void expect_error(const char *tmpl, const infer_jinja_limits *lim, const char *what) {
    infer_error err;
    int raised = -1;
    char *out = infer_jinja_render(tmpl, "{}", lim, &raised, &err);
    cr_assert_null(out, "%.60s: rendered, expected an error (%s)", tmpl, what ? what : "any");
    cr_expect_eq(err.code, INFER_ERR_ARG);
    cr_expect_eq(raised, 0);
    cr_expect_null(strchr(err.msg, '\n'), "the message is one line");
    if (what) cr_expect(strstr(err.msg, what) != NULL, "%.60s: error '%s' does not say '%s'", tmpl, err.msg, what);
}

/* ---- the references ---- */

/* The context of a references.jsonl line, as README.md says. */
static char *reference_context(const tu_json *conv, const tu_json *ref) {
    sbuf b = {0, 0, 0};
    const tu_json *tools = tu_json_get(conv, "tools"), *kwargs = tu_json_get(ref, "kwargs");
    int i;
    sb_puts(&b, "{\"messages\":");
    sb_json(&b, tu_json_get(conv, "messages"));
    if (tools) {
        sb_puts(&b, ",\"tools\":");
        sb_json(&b, tools);
    }
    sb_puts(&b, ",\"add_generation_prompt\":");
    sb_json(&b, tu_json_get(ref, "add_generation_prompt"));
    sb_puts(&b, ",\"bos_token\":");
    sb_json(&b, tu_json_get(ref, "bos_token"));
    sb_puts(&b, ",\"eos_token\":");
    sb_json(&b, tu_json_get(ref, "eos_token"));
    for (i = 0; kwargs && i < kwargs->n; i++) {
        sb_puts(&b, ",");
        sb_json_str(&b, kwargs->items[i].key);
        sb_puts(&b, ":");
        sb_json(&b, &kwargs->items[i]);
    }
    sb_puts(&b, "}");
    return b.p;
}

static const tu_json *find_conv(const tu_json *convs, const char *id) {
    int i;
    for (i = 0; i < convs->n; i++) {
        const tu_json *cid = tu_json_get(&convs->items[i], "id");
        if (cid && cid->str && !strcmp(cid->str, id)) return &convs->items[i];
    }
    return NULL;
}

static char *template_text(const char *name) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "templates/%s.jinja", name);
    tu_shared_path(path, sizeof path, rel);
    return tu_read_file(path, NULL);
}

Test(jinja, references) {
    char path[1024], *convs_text, *refs_text, *line, *next;
    tu_json *convs;
    int checked = 0, mismatches = 0, renders = 0, raises = 0, runtime = 0, lines = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no templates/references.jsonl to check against");
    tu_shared_path(path, sizeof path, "templates/conversations.json");
    cr_assert((convs_text = tu_read_file(path, NULL)), "%s", path);
    cr_assert((convs = tu_json_parse(convs_text)));
    tu_shared_path(path, sizeof path, "templates/references.jsonl");
    cr_assert((refs_text = tu_read_file(path, NULL)), "%s", path);
    for (line = refs_text; *line; line++) lines += *line == '\n' && line[1] && line[1] != '\n';
    lines += *refs_text && *refs_text != '\n';
    for (line = refs_text; line && *line; line = next) {
        tu_json *ref;
        const tu_json *conv, *want, *error, *kind;
        const char *tname, *cname;
        char *tmpl, *ctx, *out;
        infer_error err;
        int raised = 0;
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (!*line) continue;
        cr_assert((ref = tu_json_parse(line)), "a references.jsonl line does not parse");
        tname = tu_json_get(ref, "template")->str;
        cname = tu_json_get(ref, "conversation")->str;
        cr_assert((conv = find_conv(convs, cname)), "conversation %s", cname);
        cr_assert((tmpl = template_text(tname)), "template %s", tname);
        ctx = reference_context(conv, ref);
        out = infer_jinja_render(tmpl, ctx, NULL, &raised, &err);
        want = tu_json_get(ref, "output");
        error = tu_json_get(ref, "error");
        kind = tu_json_get(ref, "error_kind");
        checked++;
        if (want) {
            renders++;
            if (!out) {
                mismatches++;
                cr_log_error("%s / %s: failed (%s), expected a rendering", tname, cname, err.msg);
            } else if (strcmp(out, want->str)) {
                size_t at = 0;
                while (out[at] && out[at] == want->str[at]) at++;
                mismatches++;
                cr_log_error("%s / %s: differs from byte %zu: got \"%.60s\", expected \"%.60s\"", tname, cname, at,
                             out + at, want->str + at);
            }
        } else {
            const char *msg = error && error->str ? strchr(error->str, ':') : NULL;
            int is_raise = kind && kind->str && !strcmp(kind->str, "raise_exception");
            if (is_raise) raises++;
            else runtime++;
            if (out) {
                mismatches++;
                cr_log_error("%s / %s: rendered, expected an error (%s)", tname, cname, error ? error->str : "");
            } else if (is_raise && (!raised || !msg || strcmp(err.msg, msg + 2))) {
                mismatches++;
                cr_log_error("%s / %s: error \"%s\" (raised %d), expected raise_exception(\"%s\")", tname, cname,
                             err.msg, raised, msg ? msg + 2 : "?");
            } else if (!is_raise && raised) {
                mismatches++;
                cr_log_error("%s / %s: raise_exception(\"%s\"), expected a runtime error", tname, cname, err.msg);
            }
        }
        free(out);
        free(ctx);
        free(tmpl);
        tu_json_free(ref);
    }
    cr_log_info("jinja references: %d checked (%d renderings, %d raise_exception, %d runtime errors), %d mismatches",
                checked, renders, raises, runtime, mismatches);
    cr_expect_eq(mismatches, 0, "%d of %d reference pairs differ (each logged above)", mismatches, checked);
    /* every pair of the file, and at least the 280 it had in November 2026
       (../shared only grows: 350 in December, with LFM2.5's and Qwen3.5's) */
    cr_expect_eq(checked, lines, "%d pairs checked of the file's %d", checked, lines);
    cr_expect_geq(checked, 280, "%d pairs checked, fewer than the 280 of November 2026", checked);
    tu_json_free(convs);
    free(convs_text);
    free(refs_text);
}

/* ---- limits ---- */

Test(jinja_limits, nested_loops_hit_the_step_limit) {
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}"
                 "{% endfor %}{% endfor %}{% endfor %}",
                 NULL, "step limit");
}

Test(jinja_limits, repeated_searches_of_a_huge_value_hit_the_step_limit) {
    expect_error("{% set s = 'ab' * 8000000 %}{% for i in range(1000000) %}{% if 'zz' in s %}x{% endif %}{% endfor %}",
                 NULL, "step limit");
    expect_error("{% set s = 'é' * 4000000 %}{% for i in range(1000000) %}{{ s|length }}{% endfor %}", NULL,
                 "step limit");
    expect_error("{% set l = range(900000)|list %}{% for i in range(1000000) %}{% if l == l %}{% endif %}{% endfor %}",
                 NULL, "step limit");
}

Test(jinja_limits, steps_are_settable) {
    infer_jinja_limits lim = infer_jinja_default_limits();
    lim.max_steps = 10;
    expect_error("{% for i in range(11) %}{% endfor %}", &lim, "step limit");
    expect_error("{% macro f() %}{% endmacro %}{% for i in range(6) %}{{ f() }}{% endfor %}", &lim, "step limit");
}

Test(jinja_limits, recursive_macro_hits_the_depth_limit) {
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, "deeper than");
    expect_error("{% macro f(n) %}{% if true %}{% for x in [1] %}{{ f(n) ~ 'x' }}{% endfor %}{% endif %}{% endmacro %}"
                 "{{ f(0) }}",
                 NULL, "deeper than");
}

static char *nested(const char *open, const char *middle, const char *close, int n) {
    size_t lo = strlen(open), lm = strlen(middle), lc = strlen(close);
    char *s = (char *)malloc((lo + lc) * (size_t)n + lm + 1), *p = s;
    int i;
    for (i = 0; i < n; i++, p += lo) memcpy(p, open, lo);
    memcpy(p, middle, lm);
    p += lm;
    for (i = 0; i < n; i++, p += lc) memcpy(p, close, lc);
    *p = 0;
    return s;
}

Test(jinja_limits, deep_nesting_is_refused_while_parsing) {
    char *t = nested("(", "1", ")", 10000);
    {
        size_t n = strlen(t);
        char *full = (char *)malloc(n + 8);
        snprintf(full, n + 8, "{{ %s }}", t);
        expect_error(full, NULL, "nested deeper");
        free(full);
    }
    free(t);
    t = nested("{% if true %}", "x", "{% endif %}", 10000);
    expect_error(t, NULL, "nested deeper");
    free(t);
    t = nested("[", "", "]", 10000);
    {
        size_t n = strlen(t);
        char *full = (char *)malloc(n + 8);
        snprintf(full, n + 8, "{{ %s }}", t);
        expect_error(full, NULL, "nested deeper");
        free(full);
    }
    free(t);
    t = nested("not ", "1", "", 10000);
    {
        size_t n = strlen(t);
        char *full = (char *)malloc(n + 8);
        snprintf(full, n + 8, "{{ %s }}", t);
        expect_error(full, NULL, "nested deeper");
        free(full);
    }
    free(t);
    /* deep JSON in the context */
    {
        char *ctx = nested("{\"a\":", "1", "}", 10000);
        infer_error err;
        char *out = infer_jinja_render("x", ctx, NULL, NULL, &err);
        cr_expect_null(out);
        cr_expect(strstr(err.msg, "deeper") != NULL, "%s", err.msg);
        free(out);
        free(ctx);
    }
}

Test(jinja_limits, doubling_strings_hit_the_output_limit) {
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
                 "{{ ns.s }}",
                 NULL, "limit");
    expect_error("{{ 'x' * 1000000000000 }}", NULL, "limit");
    expect_error("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 NULL, "limit");
    expect_error("{% for i in range(1000000) %}{{ 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' }}{% endfor %}",
                 NULL, "output limit");
}

Test(jinja_limits, output_is_settable) {
    infer_jinja_limits lim = infer_jinja_default_limits();
    infer_error err;
    char *out;
    lim.max_output = 100;
    expect_error("{% for i in range(101) %}x{% endfor %}", &lim, "output limit");
    out = infer_jinja_render("{% for i in range(100) %}x{% endfor %}", NULL, &lim, NULL, &err);
    cr_assert(out, "%s", err.msg);
    cr_expect_eq(strlen(out), 100);
    free(out);
}

Test(jinja_limits, memory_budget) {
    infer_jinja_limits lim = infer_jinja_default_limits();
    lim.max_memory = (size_t)4 << 20;
    /* quadratic: each step copies the list */
    expect_error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
                 &lim, "memory limit");
    expect_error("{{ range(100000000)|length }}", &lim, "limit");
    expect_error("{{ [1, 2, 3] * 100000000000 }}", NULL, "memory limit");
}

Test(jinja_limits, hostile_syntax_fails_cleanly) {
    static const char *const bad[] = {
        "{{", "{%", "{#", "{{ }}", "{% if %}", "{% for %}", "{% endfor %}", "{% if x %}", "{{ 'abc }}",
        "{{ (1 }}", "{{ [1, }}", "{{ {1: }}", "{{ x| }}", "{{ x is }}", "{% set %}", "{% macro %}",
        "{% unknown %}", "{{ 1 +* 2 }}", "{{ x.. }}", "{{ 1 / 0 }}", "{{ 1 // 0 }}", "{{ 1 % 0 }}",
        "{{ 'a' + 1 }}", "{{ [] + {} }}", "{{ x + 1 }}", "{{ x.y }}", "{{ x[0] }}", "{{ x() }}",
        "{{ 1() }}", "{{ 'abc'|items }}", "{{ [1]|map('upper')|tojson }}", "{{ range(3)|select|length }}",
        "{% set l = [1] %}{{ l.append(2) }}", "{% set d = {} %}{{ d.update({}) }}", "{{ '\\x' }}",
        "{% for a, b in [1] %}{% endfor %}", "{% set x.y = 1 %}", "{{ undefined_filter|nope }}",
        "{{ 1|nope }}", "{{ 1 is nope }}", "{{ 9223372036854775807 + 1 > 0 and 99999999999999999999 }}",
        "{{ {[1]: 2} }}", "{% for x in 1 %}{% endfor %}",
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_error(bad[i], NULL, NULL);
}

/* ---- semantics ---- */

Test(jinja, python_printing) {
    expect("{{ [1, 'a', \"it's\", none, true, false, 1.5, {'k': [1, 2]}, (1,), (1, 2)] }}", NULL,
           "[1, 'a', \"it's\", None, True, False, 1.5, {'k': [1, 2]}, (1,), (1, 2)]");
    expect("{{ none }}|{{ true }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1.0 }}|{{ 2 / 4 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}",
           NULL, "None|True|0.30000000000000004|1e+20|1.0|0.5|3|-4|2");
    expect("{{ ['a\\nb', 'q\"\\'', '\\\\'] }}", NULL, "['a\\nb', 'q\"\\'', '\\\\']");
    expect("{{ messages[0].content }}", "{\"messages\": [{\"content\": [{\"type\": \"text\", \"text\": \"Hi\"}]}]}",
           "[{'type': 'text', 'text': 'Hi'}]");
}

Test(jinja, tojson) {
    expect("{{ {'a': [1, 2.5, 'é<>&\\'\"\\n'], 'b': none, 'c': true}|tojson }}", NULL,
           "{\"a\": [1, 2.5, \"é<>&'\\\"\\n\"], \"b\": null, \"c\": true}");
    expect("{{ {'b': [], 'a': {}, 'c': [1, {'d': 2}]}|tojson(indent=2) }}", NULL,
           "{\n  \"b\": [],\n  \"a\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": 2\n    }\n  ]\n}");
    expect("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'é'|tojson(ensure_ascii=true) }}", NULL,
           "{\"a\": 2, \"b\": 1}|\"\\u00e9\"");
    expect("{{ x|tojson }}", "{\"x\": {\"n\": -3, \"f\": 21.5, \"s\": \"\\u0001\"}}",
           "{\"n\": -3, \"f\": 21.5, \"s\": \"\\u0001\"}");
    expect_error("{{ [1, 2]|map('string')|tojson }}", NULL, "JSON serializable");
    expect("{{ [1, 2]|map('string')|list|tojson }}|{{ [1, 2]|map('string')|join(',') }}", NULL, "[\"1\", \"2\"]|1,2");
}

Test(jinja, slices_and_indices) {
    expect("{{ 'hello'[1:] }}|{{ 'hello'[::-1] }}|{{ 'hello'[-1] }}|{{ 'hello'[:-1] }}|{{ 'hello'[1:4:2] }}", NULL,
           "ello|olleh|o|hell|el");
    expect("{{ [1, 2, 3][-1] }}|{{ [1, 2, 3][:-1] }}|{{ [1, 2, 3][::-1] }}|{{ [1, 2, 3][5:] }}|{{ [1, 2, 3][-10:1] }}",
           NULL, "3|[1, 2]|[3, 2, 1]|[]|[1]");
    expect("{{ 'héllo'[1] }}|{{ 'héllo'[:2] }}|{{ 'héllo'|length }}", NULL, "é|hé|5");
}

Test(jinja, undefined_values) {
    expect("[{{ x }}|{{ x is defined }}|{{ x|length }}|{{ x ~ 'a' }}|{{ x|default('d') }}|{% for i in x %}i{% endfor %}"
           "|{{ not x }}|{{ {}.y }}|{{ {'a': 1}['b'] is defined }}]",
           NULL, "[|False|0|a|d||True||False]");
    expect_error("{{ x + 1 }}", NULL, "undefined");
    expect_error("{{ x.y }}", NULL, "undefined");
    expect_error("{{ x['y'] }}", NULL, "undefined");
}

Test(jinja, strings_and_methods) {
    expect("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'xxaxx'.lstrip('x') }}|"
           "{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'ab' in 'cabd' }}",
           NULL, "a b|['a', 'b', '', 'c']|['a', 'b']|axx|True|True|bXb|True");
    expect("{{ 'hello world'|title }}|{{ 'ABC'|lower }}|{{ 'x'|upper }}|{{ '  t  '|trim }}|{{ 3|string + 'a' }}", NULL,
           "Hello World|abc|X|t|3a");
    expect("{{ 'a'|safe + '<b>' }}|{{ '<b>' + 'a'|safe }}|{{ ('<' ~ 'a'|safe) }}", NULL, "a&lt;b&gt;|&lt;b&gt;a|<a");
    expect("{{ {'b': 1, 'A': 2}|dictsort }}|{% for k, v in {'x': 1}.items() %}{{ k }}={{ v }}{% endfor %}|"
           "{{ {'a': 1}.get('b', 2) }}",
           NULL, "[('A', 2), ('b', 1)]|x=1|2");
}

Test(jinja, whitespace_control) {
    expect("  {% if true %}\nx\n  {% endif %}\ny\n", NULL, "x\ny");
    expect("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    expect("{# c #}\n  {#- d #}x{{ 1 }}\n", NULL, "x1");
    expect("a {% if true %}b{% endif %}\n", NULL, "a b");
}

Test(jinja, scoping_namespaces_macros) {
    expect("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}", NULL, "1");
    expect("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", NULL,
           "4");
    expect("{% macro f(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ f(1) }}|{{ f(1, b=2) }}", NULL, "1B|12");
    expect("{% for i in range(5) if i is odd %}{{ loop.index }}{{ i }}{% if loop.last %}.{% endif %}{% endfor %}", NULL,
           "1123.");
    expect("{% for i in [1, 2, 3] %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}"
           "{% for i in [] %}x{% else %}empty{% endfor %}",
           NULL, "1empty");
    expect("{% set b %}in{{ 1 }}{% endset %}{{ b }}|{% filter upper %}up{% endfilter %}|"
           "{% generation %}g{% endgeneration %}",
           NULL, "in1|UP|g");
    expect("{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}", NULL,
           "2026-11-25|25 Nov 2026|November 25, 2026");
}

Test(jinja, raise_exception) {
    infer_error err;
    int raised = 0;
    char *out = render("a{{ raise_exception('Only user and assistant roles are supported!') }}", "{}", &err, &raised);
    cr_assert_null(out);
    cr_expect_eq(raised, 1);
    cr_expect_eq(err.code, INFER_ERR_ARG);
    cr_expect_str_eq(err.msg, "Only user and assistant roles are supported!");
}

/* ---- infer template ---- */

static char *write_temp(const char *text) {
    char *path = (char *)malloc(32);
    strcpy(path, "/tmp/test_jinja_XXXXXX");
    int fd = mkstemp(path);
    size_t n = strlen(text);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

Test(jinja_cli, renders_a_reference_pair) {
    char path[1024], tpath[1024], cmd[4096], *convs_text, *refs_text, *nl, *conv_path, *out;
    tu_json *convs, *ref;
    const tu_json *conv;
    sbuf b = {0, 0, 0};
    int status = -1, i;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no templates/references.jsonl to check against");
    tu_shared_path(path, sizeof path, "templates/conversations.json");
    cr_assert((convs_text = tu_read_file(path, NULL)));
    cr_assert((convs = tu_json_parse(convs_text)));
    tu_shared_path(path, sizeof path, "templates/references.jsonl");
    cr_assert((refs_text = tu_read_file(path, NULL)));
    /* the first pair that renders with tools, so every field of the file is used */
    for (ref = NULL; !ref;) {
        const tu_json *c;
        nl = strchr(refs_text, '\n');
        cr_assert(nl);
        *nl = 0;
        ref = tu_json_parse(refs_text);
        c = find_conv(convs, tu_json_get(ref, "conversation")->str);
        if (!tu_json_get(ref, "output") || !tu_json_get(c, "tools")) {
            tu_json_free(ref);
            ref = NULL;
            memmove(refs_text, nl + 1, strlen(nl + 1) + 1);
        }
    }
    conv = find_conv(convs, tu_json_get(ref, "conversation")->str);
    /* the file: a references.jsonl line's inputs */
    sb_puts(&b, "{\"messages\": ");
    sb_json(&b, tu_json_get(conv, "messages"));
    sb_puts(&b, ", \"tools\": ");
    sb_json(&b, tu_json_get(conv, "tools"));
    for (i = 0; i < ref->n; i++) {
        const char *k = ref->items[i].key;
        if (strcmp(k, "template") && strcmp(k, "conversation") && strcmp(k, "output")) {
            sb_puts(&b, ", ");
            sb_json_str(&b, k);
            sb_puts(&b, ": ");
            sb_json(&b, &ref->items[i]);
        }
    }
    sb_puts(&b, "}");
    conv_path = write_temp(b.p);
    snprintf(tpath, sizeof tpath, "templates/%s.jinja", tu_json_get(ref, "template")->str);
    tu_shared_path(path, sizeof path, tpath);
    snprintf(cmd, sizeof cmd, "'%s' template --template '%s' --conversation '%s'", INFER_CLI_PATH, path, conv_path);
    out = tu_run(cmd, &status);
    cr_assert(out);
    cr_expect_eq(status, 0);
    cr_expect_str_eq(out, tu_json_get(ref, "output")->str, "infer template's output differs from the reference (%s)",
                     tpath);
    free(out);
    unlink(conv_path);
    free(conv_path);
    free(b.p);
    tu_json_free(ref);
    tu_json_free(convs);
    free(convs_text);
    free(refs_text);
}

Test(jinja_cli, a_raising_template_exits_1_with_one_line) {
    char cmd[4096], *tmpl = write_temp("x{{ raise_exception('no tools here') }}"),
                    *conv = write_temp("{\"messages\": [], \"add_generation_prompt\": true, \"kwargs\": {\"k\": 1}}"),
                    *err_path = write_temp(""), *out, *err;
    int status = -1, lines = 0;
    const char *p;
    snprintf(cmd, sizeof cmd, "'%s' template --template '%s' --conversation '%s' 2>'%s'", INFER_CLI_PATH, tmpl, conv,
             err_path);
    out = tu_run(cmd, &status);
    cr_assert(out);
    cr_expect_eq(status, 1);
    cr_expect_str_eq(out, "", "nothing on stdout");
    cr_assert((err = tu_read_file(err_path, NULL)));
    for (p = err; *p; p++) lines += *p == '\n';
    cr_expect_eq(lines, 1, "one line on stderr: %s", err);
    cr_expect(strstr(err, "no tools here") != NULL, "%s", err);
    free(out);
    free(err);
    /* kwargs become variables, bos/eos default to "" without a model */
    free(tmpl);
    tmpl = write_temp("[{{ k }}|{{ bos_token }}|{{ add_generation_prompt }}|{{ messages|length }}]\n");
    snprintf(cmd, sizeof cmd, "'%s' template --template '%s' --conversation '%s'", INFER_CLI_PATH, tmpl, conv);
    out = tu_run(cmd, &status);
    cr_expect_eq(status, 0);
    cr_expect_str_eq(out, "[1||True|0]");
    free(out);
    unlink(tmpl);
    unlink(conv);
    unlink(err_path);
    free(tmpl);
    free(conv);
    free(err_path);
}
