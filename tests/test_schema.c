/* test_schema.c - JSON schemas compiled to GBNF (schema.c): the limits that
   keep hostile schemas cheap (nesting depth, linear size for thousands of
   properties, the grammar size budget), integer ranges checked against
   every integer of a span, patterns, keys holding "\u0000", and the
   assertions that are refused rather than ignored. Each grammar is
   compiled by grammar.c and instances matched against it. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/status_calls.h"

/* The grammar of schema, or NULL with err filled in. */
static char *to_grammar(const char *schema, infer_error *err) {
    int n;
    char *g;
    memset(err, 0, sizeof *err);
    n = sc_json_schema_to_grammar(schema, NULL, 0, err);
    if (n < 0) return NULL;
    g = (char *)malloc((size_t)n + 1);
    cr_assert_not_null(g);
    cr_assert_eq(sc_json_schema_to_grammar(schema, g, (size_t)n + 1, err), n);
    return g;
}

static infer__grules *compile_schema(const char *schema, size_t *grammar_len) {
    infer_error err;
    char *g = to_grammar(schema, &err);
    infer__grules *r;
    cr_assert_not_null(g, "schema refused: %s\n%.300s", err.msg, schema);
    if (grammar_len) *grammar_len = strlen(g);
    memset(&err, 0, sizeof err);
    r = infer__gbnf_compile(g, "root", &err);
    cr_assert_not_null(r, "grammar refused: %s\n%.2000s", err.msg, g);
    free(g);
    return r;
}

static int match(const infer__grules *g, const char *text) { return infer__grules_match(g, text, strlen(text)); }

/* The schema is refused with a message that holds want. */
static void expect_refused(const char *schema, const char *want) {
    infer_error err;
    char *g = to_grammar(schema, &err);
    cr_expect_null(g, "accepted %.200s", schema);
    free(g);
    if (g) return;
    cr_expect(strstr(err.msg, want) != NULL, "message '%s' does not say '%s' (schema %.200s)", err.msg, want, schema);
}

/* ---- depth ---------------------------------------------------------------------- */

Test(schema, deep_json_refused_cleanly) {
    const int depth = 100000;
    char *s = (char *)malloc((size_t)depth * 8 + 16), *p;
    int i;
    cr_assert_not_null(s);
    for (p = s, i = 0; i < depth; i++) *p++ = '[';
    for (i = 0; i < depth; i++) *p++ = ']';
    *p = 0;
    expect_refused(s, "nested deeper than 256 levels");
    for (p = s, i = 0; i < depth; i++) p += sprintf(p, "{\"a\":");
    *p = 0; /* unterminated too: the depth is what stops it */
    expect_refused(s, "nested deeper than 256 levels");
    free(s);
}

Test(schema, nesting_within_the_limit_converts) {
    /* 200 arrays of arrays: 201 levels of JSON, under the limit */
    char schema[8192], inst[512], *p = schema;
    infer__grules *g;
    int i;
    for (i = 0; i < 200; i++) p += sprintf(p, "{\"type\":\"array\",\"items\":");
    p += sprintf(p, "{\"type\":\"integer\",\"minimum\":1,\"maximum\":3}");
    for (i = 0; i < 200; i++) *p++ = '}';
    *p = 0;
    g = compile_schema(schema, NULL);
    for (p = inst, i = 0; i < 200; i++) *p++ = '[';
    *p++ = '2';
    for (i = 0; i < 200; i++) *p++ = ']';
    *p = 0;
    cr_expect_eq(match(g, inst), 1);
    inst[200] = '4';
    cr_expect_neq(match(g, inst), 1);
    infer__grules_free(g);
}

/* ---- size: linear in the schema ------------------------------------------------------ */

Test(schema, many_optional_properties_linear, .timeout = 30) {
    const int n = 1500;
    char *schema = (char *)malloc((size_t)n * 40 + 64), *p = schema;
    infer__grules *g;
    size_t len;
    int i;
    cr_assert_not_null(schema);
    p += sprintf(p, "{\"type\":\"object\",\"properties\":{");
    for (i = 0; i < n; i++) p += sprintf(p, "%s\"p%04d\":{\"type\":\"integer\"}", i ? "," : "", i);
    sprintf(p, "}}");
    g = compile_schema(schema, &len);
    cr_expect_lt(len, (size_t)400 * n, "the grammar of %d optional properties is %zu bytes", n, len);
    cr_expect_eq(match(g, "{}"), 1);
    /* after "{" any of the 1,500 keys may come: the matcher keeps every
       one (its old cap of 1,024 stacks crowded out the later keys) */
    cr_expect_eq(match(g, "{\"p0003\":1,\"p0700\":-2,\"p1499\":3}"), 1);
    cr_expect_eq(match(g, "{\"p1499\":3}"), 1);
    cr_expect_eq(match(g, "{ \"p1200\" : 7 , \"p1498\":1 }"), 1);
    cr_expect_eq(match(g, "{\"p0000\":0,\"p0001\":1}"), 1);
    cr_expect_neq(match(g, "{\"p0700\":1,\"p0003\":2}"), 1, "out of order");
    cr_expect_neq(match(g, "{\"p0003\":1,\"p0003\":2}"), 1, "twice");
    cr_expect_neq(match(g, "{\"p0003\":1,}"), 1);
    cr_expect_neq(match(g, "{,\"p0003\":1}"), 1);
    cr_expect_neq(match(g, "{\"p1500\":1}"), 1);
    infer__grules_free(g);
    free(schema);
}

Test(schema, optional_properties_bounded) {
    const int n = 5000;
    char *schema = (char *)malloc((size_t)n * 16 + 64), *p = schema;
    int i;
    cr_assert_not_null(schema);
    p += sprintf(p, "{\"type\":\"object\",\"properties\":{");
    for (i = 0; i < n; i++) p += sprintf(p, "%s\"p%d\":{}", i ? "," : "", i);
    sprintf(p, "}}");
    expect_refused(schema, "over 4096 optional properties");
    free(schema);
}

Test(schema, every_subset_of_optional_properties) {
    const int n = 300;
    char schema[300 * 40], inst[300 * 16], *p = schema;
    infer__grules *g;
    int i, step;
    size_t len;
    p += sprintf(p, "{\"type\":\"object\",\"properties\":{");
    for (i = 0; i < n; i++) p += sprintf(p, "%s\"p%03d\":{\"type\":\"integer\"}", i ? "," : "", i);
    sprintf(p, "}}");
    g = compile_schema(schema, &len);
    cr_expect_lt(len, (size_t)200 * n, "the grammar of %d optional properties is %zu bytes", n, len);
    cr_expect_eq(match(g, "{ }"), 1);
    for (step = 1; step < 40; step += 3) { /* every step-th one, from (step % 7) on, spaced */
        p = inst + sprintf(inst, "{");
        for (i = step % 7; i < n; i += step) p += sprintf(p, "%s \"p%03d\" : %d", p[-1] == '{' ? "" : ",", i, i);
        sprintf(p, "\n}");
        cr_expect_eq(match(g, inst), 1, "refused %s", inst);
    }
    cr_expect_eq(match(g, "{\"p299\":1}"), 1);
    cr_expect_neq(match(g, "{\"p299\":1,\"p298\":1}"), 1);
    infer__grules_free(g);
}

Test(schema, optional_and_required_mixed) {
    /* required: b and d; a, c, e optional */
    infer__grules *g = compile_schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":"
                                      "{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"},\"d\":{\"type\":\"integer\"},"
                                      "\"e\":{\"type\":\"integer\"}},\"required\":[\"d\",\"b\"]}",
                                      NULL);
    static const char *const ok[] = {"{\"b\":1,\"d\":2}",           "{\"a\":0,\"b\":1,\"d\":2}",
                                     "{\"b\":1,\"c\":5,\"d\":2}",   "{\"b\":1,\"d\":2,\"e\":3}",
                                     "{\"a\":0,\"b\":1,\"c\":2,\"d\":3,\"e\":4}"};
    static const char *const bad[] = {"{}", "{\"b\":1}", "{\"d\":2}", "{\"a\":0,\"d\":2}", "{\"d\":2,\"b\":1}",
                                      "{\"b\":1,\"d\":2,\"a\":0}", "{\"b\":1,,\"d\":2}"};
    size_t i;
    for (i = 0; i < sizeof ok / sizeof *ok; i++) cr_expect_eq(match(g, ok[i]), 1, "refused %s", ok[i]);
    for (i = 0; i < sizeof bad / sizeof *bad; i++) cr_expect_neq(match(g, bad[i]), 1, "accepted %s", bad[i]);
    infer__grules_free(g);
}

Test(schema, keys_sharing_a_long_prefix_linear, .timeout = 30) {
    const int n = 2000;
    char prefix[201], *schema, *p, *inst, *q;
    infer__grules *g;
    size_t len;
    int i;
    memset(prefix, 'k', 200);
    prefix[200] = 0;
    schema = (char *)malloc((size_t)n * 500 + 64);
    inst = (char *)malloc((size_t)n * 300 + 64);
    cr_assert(schema && inst);
    /* each value a rule of its own, all named from the same cut prefix;
       the odd ones required */
    p = schema + sprintf(schema, "{\"type\":\"object\",\"properties\":{");
    for (i = 0; i < n; i++)
        p += sprintf(p, "%s\"%s%04d\":{\"type\":\"string\",\"maxLength\":4}", i ? "," : "", prefix, i);
    p += sprintf(p, "},\"required\":[");
    for (i = 1; i < n; i += 2) p += sprintf(p, "%s\"%s%04d\"", i > 1 ? "," : "", prefix, i);
    sprintf(p, "]}");
    g = compile_schema(schema, &len);
    cr_expect_lt(len, (size_t)400 * n, "the grammar of %d keys is %zu bytes", n, len);
    /* the required ones, and every fourth optional one */
    q = inst + sprintf(inst, "{");
    for (i = 0; i < n; i++)
        if (i % 2 || i % 8 == 0) q += sprintf(q, "%s\"%s%04d\":\"v%d\"", q[-1] == '{' ? "" : ",", prefix, i, i % 10);
    sprintf(q, "}");
    cr_expect_eq(match(g, inst), 1);
    strcpy(inst + strlen(inst) - 2, "xxx\"}"); /* the last value five characters long: over maxLength */
    cr_expect_neq(match(g, inst), 1);
    infer__grules_free(g);
    free(schema);
    free(inst);
}

Test(schema, grammar_size_budget) {
    /* an enum of one 9 MiB string: its grammar is over the budget */
    size_t n = 9u << 20;
    char *s = (char *)malloc(n + 32);
    cr_assert_not_null(s);
    strcpy(s, "{\"enum\":[\"");
    memset(s + 10, 'a', n);
    strcpy(s + 10 + n, "\"]}");
    expect_refused(s, "schema grammar size limit");
    free(s);
}

Test(schema, repetition_budget) {
    /* 300 strings of up to 4096 characters: grammar.c would copy char
       1.2 million times */
    char *s = (char *)malloc(300 * 64 + 64), *p = s;
    int i;
    cr_assert_not_null(s);
    p += sprintf(p, "{\"type\":\"object\",\"properties\":{");
    for (i = 0; i < 300; i++) p += sprintf(p, "%s\"s%d\":{\"type\":\"string\",\"maxLength\":4096}", i ? "," : "", i);
    sprintf(p, "}}");
    expect_refused(s, "schema repetition limit");
    free(s);
    /* twelve patterns of 90,000 repeated items each */
    expect_refused("{\"anyOf\":[{\"type\":\"string\",\"pattern\":\"^(a{1000}){90}$\"},{\"type\":\"string\","
                   "\"pattern\":\"^(a{1000}){90}$\"},{\"type\":\"string\",\"pattern\":\"^(a{1000}){90}$\"},"
                   "{\"type\":\"string\",\"pattern\":\"^(a{1000}){90}$\"},{\"type\":\"string\",\"pattern\":"
                   "\"^(a{1000}){90}$\"},{\"type\":\"string\",\"pattern\":\"^(a{1000}){90}$\"},{\"type\":"
                   "\"string\",\"pattern\":\"^(a{1000}){90}$\"},{\"type\":\"string\",\"pattern\":"
                   "\"^(a{1000}){90}$\"},{\"type\":\"string\",\"pattern\":\"^(a{1000}){90}$\"},{\"type\":"
                   "\"string\",\"pattern\":\"^(a{1000}){90}$\"},{\"type\":\"string\",\"pattern\":"
                   "\"^(a{1000}){90}$\"},{\"type\":\"string\",\"pattern\":\"^(a{1000}){90}$\"}]}",
                   "schema repetition limit");
}

/* ---- integers ------------------------------------------------------------------------- */

static void check_int_range(const char *schema, long lo, long hi) {
    infer__grules *g = compile_schema(schema, NULL);
    char t[32];
    long v;
    for (v = -1000; v <= 1000; v++) {
        snprintf(t, sizeof t, "%ld", v);
        if ((match(g, t) == 1) != (v >= lo && v <= hi)) {
            cr_expect_fail("%s: %ld %s", schema, v, v >= lo && v <= hi ? "refused" : "accepted");
            break;
        }
    }
    cr_expect_neq(match(g, "-0"), 1, "-0 (%s)", schema);
    if (lo <= 7 && hi >= 7) cr_expect_neq(match(g, "07"), 1, "07 (%s)", schema);
    infer__grules_free(g);
}

Test(schema, integer_ranges_exhaustive, .timeout = 120) {
    static const long edges[][2] = {{0, 0},     {-1, -1},  {-1, 0},   {0, 9},     {9, 10},    {10, 99}, {99, 100},
                                    {-100, -10}, {-99, 99}, {-150, 150}, {1, 1000}, {-1000, -1}, {100, 199}, {101, 109}};
    char schema[160];
    long lo, hi;
    size_t i;
    for (i = 0; i < sizeof edges / sizeof *edges; i++) {
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%ld,\"maximum\":%ld}", edges[i][0],
                 edges[i][1]);
        check_int_range(schema, edges[i][0], edges[i][1]);
    }
    for (lo = -150; lo <= 150; lo += 23)
        for (hi = lo; hi <= 150; hi += 29) {
            snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%ld,\"maximum\":%ld}", lo, hi);
            check_int_range(schema, lo, hi);
            /* the same range through the exclusive forms, draft 6 and draft 4 */
            snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"exclusiveMinimum\":%ld,\"exclusiveMaximum\":%ld}",
                     lo - 1, hi + 1);
            check_int_range(schema, lo, hi);
            snprintf(schema, sizeof schema,
                     "{\"type\":\"integer\",\"minimum\":%ld,\"exclusiveMinimum\":true,\"maximum\":%ld,"
                     "\"exclusiveMaximum\":true}",
                     lo - 1, hi + 1);
            check_int_range(schema, lo, hi);
        }
    check_int_range("{\"type\":\"integer\",\"minimum\":5,\"maximum\":7}", 5, 7);
    check_int_range("{\"type\":\"integer\",\"minimum\":2.5,\"maximum\":7.9}", 3, 7);
    check_int_range("{\"type\":\"integer\",\"exclusiveMinimum\":-3.5,\"exclusiveMaximum\":1e1}", -3, 9);
    check_int_range("{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMinimum\":-2}", -1, 100000);
    check_int_range("{\"type\":\"integer\",\"minimum\":-37}", -37, 100000);
    check_int_range("{\"type\":\"integer\",\"maximum\":-37}", -100000, -37);
    check_int_range("{\"type\":\"integer\",\"maximum\":640}", -100000, 640);
}

Test(schema, integer_bounds_large_and_one_sided) {
    infer__grules *g = compile_schema("{\"type\":\"integer\",\"minimum\":0,\"maximum\":9007199254740992}", NULL);
    static const char *const ok[] = {"0", "1", "9007199254740992", "9007199254740991", "8999999999999999",
                                     "1000000000000000", "900719925474099"};
    static const char *const bad[] = {"-1", "9007199254740993", "9007199254740999", "9100000000000000",
                                      "10000000000000000", "01", "-0", "1.0"};
    size_t i;
    for (i = 0; i < sizeof ok / sizeof *ok; i++) cr_expect_eq(match(g, ok[i]), 1, "refused %s", ok[i]);
    for (i = 0; i < sizeof bad / sizeof *bad; i++) cr_expect_neq(match(g, bad[i]), 1, "accepted %s", bad[i]);
    infer__grules_free(g);
    /* open above: up to 16 digits, as the plain integer */
    g = compile_schema("{\"type\":\"integer\",\"minimum\":5}", NULL);
    cr_expect_eq(match(g, "9999999999999999"), 1);
    cr_expect_eq(match(g, "5"), 1);
    cr_expect_neq(match(g, "4"), 1);
    cr_expect_neq(match(g, "-5"), 1);
    cr_expect_neq(match(g, "99999999999999999"), 1);
    infer__grules_free(g);
    g = compile_schema("{\"type\":\"integer\",\"minimum\":-999999999999999999,\"maximum\":-123456789012345678}",
                       NULL);
    cr_expect_eq(match(g, "-999999999999999999"), 1);
    cr_expect_eq(match(g, "-123456789012345678"), 1);
    cr_expect_eq(match(g, "-500000000000000000"), 1);
    cr_expect_neq(match(g, "-123456789012345677"), 1);
    cr_expect_neq(match(g, "-1000000000000000000"), 1);
    infer__grules_free(g);
    /* inside an object, as a reply would hold it */
    g = compile_schema("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":[\"integer\",\"null\"],\"minimum\":5,"
                       "\"maximum\":7}},\"required\":[\"n\"]}",
                       NULL);
    cr_expect_eq(match(g, "{\"n\": 6 }"), 1);
    cr_expect_eq(match(g, "{\"n\":null}"), 1);
    cr_expect_neq(match(g, "{\"n\":-3}"), 1);
    cr_expect_neq(match(g, "{\"n\":8}"), 1);
    infer__grules_free(g);
    expect_refused("{\"type\":\"integer\",\"minimum\":8,\"maximum\":7}", "leave no integer");
    expect_refused("{\"type\":\"integer\",\"exclusiveMinimum\":7,\"exclusiveMaximum\":8}", "leave no integer");
    expect_refused("{\"type\":\"integer\",\"maximum\":1e19}", "beyond 10^18");
    expect_refused("{\"type\":\"integer\",\"minimum\":\"3\"}", "minimum must be a number");
}

/* ---- patterns --------------------------------------------------------------------------- */

Test(schema, patterns_match) {
    /* patterns as JSON text writes them; instances as JSON strings */
    static const struct {
        const char *pattern;
        const char *valid[6];
        const char *invalid[6];
    } cases[] = {
        {"^[a-z]+$", {"\"abc\"", "\"z\"", NULL}, {"\"abC\"", "\"\"", "\"ab1\"", NULL}},
        {"^\\\\d{3}-\\\\d{4}$", {"\"555-1234\"", NULL}, {"\"55-1234\"", "\"5555-1234\"", "\"555-12a4\"", NULL}},
        {"ab", {"\"xxabyy\"", "\"ab\"", "\"x\\\"ab\\n\"", NULL}, {"\"a b\"", "\"\"", "\"ba\"", NULL}},
        {"^(foo|bar)baz?$", {"\"foobaz\"", "\"barba\"", NULL}, {"\"foob\"", "\"bazfoo\"", "\"foobazz\"", NULL}},
        {"^a|b$", {"\"axx\"", "\"xxb\"", "\"ab\"", NULL}, {"\"xax\"", "\"bx\"", NULL}},
        {"^(?:ab){2}c*$", {"\"abab\"", "\"ababccc\"", NULL}, {"\"ab\"", "\"abababc\"", NULL}},
        {"^.{2,3}$", {"\"ab\"", "\"a\xc3\xa9\"", "\"abc\"", NULL}, {"\"a\"", "\"abcd\"", NULL}},
        {"^[\\\\w.-]+@[a-z]+\\\\.com$", {"\"a.b-c_9@x.com\"", NULL}, {"\"a@x.org\"", "\"a@xxcom\"", "\"@x.com\"", NULL}},
        {"^\\\\u00e9+\\\\x41?$", {"\"\xc3\xa9\xc3\xa9\"", "\"\xc3\xa9" "A\"", NULL}, {"\"e\"", "\"A\"", NULL}},
        {"^a\\\\sb\\\\Sc$", {"\"a bxc\"", "\"a\\tb-c\"", NULL}, {"\"abxc\"", "\"a b c\"", NULL}},
        {"^[^a-c]{2}$", {"\"xy\"", "\"d\xc3\xa9\"", NULL}, {"\"ax\"", "\"x\"", "\"x\\\"\"", "\"\\\\x\"", NULL}},
        {"^\\\"\\\\\\\\\\\\n$", {"\"\\\"\\\\\\n\"", NULL}, {"\"\\\"\\\\n\"", "\"\\\"\\\\\\\\n\"", NULL}},
        {"^[\\\"\\\\\\\\x]$", {"\"\\\"\"", "\"\\\\\"", "\"x\"", NULL}, {"\"y\"", NULL}},
        {"^\\\\D\\\\W?$", {"\"a\"", "\"a!\"", NULL}, {"\"1\"", "\"a1\"", "\"\\\"\"", NULL}},
        {"^-?(0|[1-9][0-9]*)$", {"\"0\"", "\"-120\"", NULL}, {"\"01\"", "\"-\"", NULL}},
    };
    char schema[256];
    size_t i, k;
    for (i = 0; i < sizeof cases / sizeof *cases; i++) {
        infer__grules *g;
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":\"%s\"}", cases[i].pattern);
        g = compile_schema(schema, NULL);
        for (k = 0; k < 6 && cases[i].valid[k]; k++)
            cr_expect_eq(match(g, cases[i].valid[k]), 1, "%s refuses %s", cases[i].pattern, cases[i].valid[k]);
        for (k = 0; k < 6 && cases[i].invalid[k]; k++)
            cr_expect_neq(match(g, cases[i].invalid[k]), 1, "%s accepts %s", cases[i].pattern, cases[i].invalid[k]);
        infer__grules_free(g);
    }
}

Test(schema, patterns_beyond_the_subset_refused) {
    static const struct {
        const char *pattern, *msg;
    } bad[] = {
        {"(?=a)b", "lookahead"},
        {"(?!a)b", "lookahead"},
        {"(?<=a)b", "lookbehind"},
        {"(?<name>a)", "named group"},
        {"(a)\\\\1", "backreference"},
        {"a*?", "lazy quantifier"},
        {"a{2,3}?", "lazy quantifier"},
        {"\\\\bword", "word boundary"},
        {"\\\\p{L}", "Unicode property"},
        {"a^b", "anchor"},
        {"a$b", "anchor"},
        {"(^a)", "anchor"},
        {"a{3,2}", "repetition count"},
        {"a{5000}", "repetition count"},
        {"(a*)*", "can match nothing"},
        {"[z-a]", "bad range"},
        {"(ab", "unclosed '('"},
        {"ab)", "unmatched ')'"},
        {"*a", "nothing to repeat"},
        {"a{,3}", "not a quantifier"},
        {"[abc", "unterminated '['"},
        {"((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))", "nested"},
        {"((a{100}){100}){11}", "multiplied out"},
        {"[^\\\\s\\\\S]", "matches no character"},
        {"(?i)a", "'(?' group"},
    };
    char schema[256];
    size_t i;
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":\"%s\"}", bad[i].pattern);
        expect_refused(schema, bad[i].msg);
        expect_refused(schema, "is not supported");
    }
    expect_refused("{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", "pattern together with");
    expect_refused("{\"pattern\":\"^a$\"}", "pattern without a type");
}

/* ---- keys ---------------------------------------------------------------------------------- */

Test(schema, key_with_nul_kept) {
    infer__grules *g = compile_schema("{\"type\":\"object\",\"properties\":{\"a\\u0000b\":{\"type\":\"integer\"},"
                                      "\"a\\u0000c\":{\"type\":\"boolean\"}},\"required\":[\"a\\u0000b\"]}",
                                      NULL);
    cr_expect_eq(match(g, "{\"a\\u0000b\":1}"), 1);
    cr_expect_eq(match(g, "{\"a\\u0000b\":1,\"a\\u0000c\":true}"), 1);
    cr_expect_neq(match(g, "{\"a\":1}"), 1);
    cr_expect_neq(match(g, "{\"a\\u0000c\":true}"), 1);
    infer__grules_free(g);
    /* in an enum's objects too */
    g = compile_schema("{\"enum\":[{\"k\\u0000x\":1}]}", NULL);
    cr_expect_eq(match(g, "{\"k\\u0000x\":1}"), 1);
    cr_expect_neq(match(g, "{\"k\":1}"), 1);
    infer__grules_free(g);
}

/* ---- keywords --------------------------------------------------------------------------------- */

Test(schema, unsupported_assertions_refused) {
    static const struct {
        const char *schema, *msg;
    } bad[] = {
        {"{\"type\":\"integer\",\"multipleOf\":3}", "multipleOf is not supported"},
        {"{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems is not supported"},
        {"{\"type\":\"object\",\"minProperties\":1}", "minProperties is not supported"},
        {"{\"type\":\"object\",\"maxProperties\":1}", "maxProperties is not supported"},
        {"{\"type\":\"object\",\"patternProperties\":{\"^a\":{}}}", "patternProperties is not supported"},
        {"{\"type\":\"object\",\"propertyNames\":{\"maxLength\":3}}", "propertyNames is not supported"},
        {"{\"not\":{\"type\":\"string\"}}", "not is not supported"},
        {"{\"if\":{\"type\":\"string\"},\"then\":{\"maxLength\":3}}", "if is not supported"},
        {"{\"type\":\"object\",\"dependentRequired\":{\"a\":[\"b\"]}}", "dependentRequired is not supported"},
        {"{\"type\":\"array\",\"contains\":{\"type\":\"string\"}}", "contains is not supported"},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}]}", "prefixItems is not supported"},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "additionalProperties as a schema"},
        {"{\"type\":\"number\",\"minimum\":0}", "minimum on type number is not supported"},
        {"{\"type\":\"number\",\"exclusiveMaximum\":1}", "exclusiveMaximum on type number"},
        {"{\"minimum\":3}", "minimum without a type"},
        {"{\"maxLength\":3}", "maxLength without a type"},
        {"{\"type\":\"object\",\"required\":[\"a\"]}", "required without properties"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"not\":{}}}}", "not is not supported"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof *bad; i++) expect_refused(bad[i].schema, bad[i].msg);
}

Test(schema, annotations_ignored) {
    infer__grules *g = compile_schema(
        "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"x\",\"$comment\":\"c\","
        "\"title\":\"t\",\"description\":\"d\",\"type\":\"object\",\"properties\":{\"mail\":{\"type\":\"string\","
        "\"format\":\"email\",\"default\":\"a@b\",\"examples\":[\"x@y\"],\"deprecated\":true,\"readOnly\":true}},"
        "\"required\":[\"mail\"],\"additionalProperties\":false,\"uniqueItems\":false}",
        NULL);
    cr_expect_eq(match(g, "{\"mail\":\"anything\"}"), 1);
    cr_expect_neq(match(g, "{\"mail\":\"x\",\"other\":1}"), 1);
    infer__grules_free(g);
    /* additionalProperties false without properties: the empty object */
    g = compile_schema("{\"type\":\"object\",\"additionalProperties\":false}", NULL);
    cr_expect_eq(match(g, "{ }"), 1);
    cr_expect_neq(match(g, "{\"a\":1}"), 1);
    infer__grules_free(g);
}
