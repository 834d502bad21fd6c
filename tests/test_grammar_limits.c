/* test_grammar_limits.c - GBNF grammars at and past infer.h's limits: deep
   nesting refused with an error naming the limit (not a crashed stack),
   deep and long grammars within the limits compiled and matched exactly
   (no stack silently dropped), repetitions of long literals kept small,
   the element budget, grammars of 100,000 rules compiled in linear time,
   and the matcher's limit on ambiguity reported instead of changing the
   language.
   Quick, so that CI runs it in the optimised and the sanitizer builds. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tests/status_calls.h"

/* ---- a growing string -------------------------------------------------------- */

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->p = (char *)realloc(t->p, t->cap);
        cr_assert_not_null(t->p);
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}

static void puts_n(text *t, const char *s, int times) {
    int i;
    for (i = 0; i < times; i++) put(t, s, strlen(s));
}

static void putf(text *t, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0 && (size_t)n < sizeof buf);
    put(t, buf, (size_t)n);
}

/* ---- compiling and matching --------------------------------------------------- */

static infer__grules *compile_ok(const char *gbnf) {
    infer_error err;
    infer__grules *g;
    memset(&err, 0, sizeof err);
    g = infer__gbnf_compile(gbnf, "root", &err);
    cr_assert_not_null(g, "refused a grammar within the limits: %s", err.msg);
    return g;
}

/* Expects gbnf refused with INFER_ERR_ARG and a one-line message saying
   want. */
static void expect_refused(const char *gbnf, const char *want) {
    infer_error err;
    infer__grules *g;
    memset(&err, 0, sizeof err);
    g = infer__gbnf_compile(gbnf, "root", &err);
    cr_expect_null(g, "accepted a grammar past the limits (it should say '%s')", want);
    infer__grules_free(g);
    cr_expect_eq(err.code, INFER_ERR_ARG, "code %d (%s)", err.code, err.msg);
    cr_expect(strstr(err.msg, want) != NULL, "message '%s' does not say '%s'", err.msg, want);
    cr_expect(strchr(err.msg, '\n') == NULL, "message of more than one line: %s", err.msg);
}

static int match_text(const infer__grules *g, const text *t) { return infer__grules_match(g, t->p, t->n); }

/* ---- tests ------------------------------------------------------------------- */

/* The parser keeps open groups on a stack of its own: 100,000 of them are
   refused, naming the limit, where a recursive parser overflowed the C
   stack; the limit itself compiles. */
Test(grammar_limits, deep_nesting_refused_not_crashed) {
    text t = {0};
    infer__grules *g;
    put(&t, "root ::= ", 9);
    puts_n(&t, "(", 100000);
    put(&t, "\"a\"", 3);
    puts_n(&t, ")", 100000);
    expect_refused(t.p, "nested deeper than");
    {
        char want[64];
        snprintf(want, sizeof want, "%d", INFER__G_MAX_NEST);
        expect_refused(t.p, want);
    }
    cr_expect_geq(INFER__G_MAX_NEST, 5000);
    t.n = 0;
    put(&t, "root ::= ", 9);
    puts_n(&t, "(", INFER__G_MAX_NEST);
    put(&t, "\"a\"", 3);
    puts_n(&t, ")", INFER__G_MAX_NEST);
    g = compile_ok(t.p);
    cr_expect_eq(infer__grules_match(g, "a", 1), 1);
    cr_expect_eq(infer__grules_match(g, "b", 1), -1);
    infer__grules_free(g);
    /* one more: refused */
    t.n = 0;
    put(&t, "root ::= ", 9);
    puts_n(&t, "(", INFER__G_MAX_NEST + 1);
    put(&t, "\"a\"", 3);
    puts_n(&t, ")", INFER__G_MAX_NEST + 1);
    expect_refused(t.p, "nested deeper than");
    /* unclosed deep groups: still the innermost '(' is named */
    t.n = 0;
    put(&t, "root ::= ", 9);
    puts_n(&t, "(", 3000);
    put(&t, "\"a\"", 3);
    expect_refused(t.p, "'(' is never closed at line 1, column 3009");
    free(t.p);
}

/* 5,000 nested groups, each followed by a "b": the matcher's stacks grow
   5,000 deep, past the 1,024 elements it used to drop silently. */
Test(grammar_limits, nested_groups_5000_match) {
    text t = {0}, s = {0};
    infer__grules *g;
    put(&t, "root ::= ", 9);
    puts_n(&t, "(", 5000);
    put(&t, "\"a\"", 3);
    puts_n(&t, ") \"b\"", 5000);
    g = compile_ok(t.p);
    put(&s, "a", 1);
    puts_n(&s, "b", 4999);
    cr_expect_eq(match_text(g, &s), 0, "4,999 b's: a prefix");
    put(&s, "b", 1);
    cr_expect_eq(match_text(g, &s), 1, "5,000 b's: the sentence");
    put(&s, "b", 1);
    cr_expect_eq(match_text(g, &s), -1, "5,001 b's: refused");
    s.p[2500] = 'c';
    s.n = 5001;
    cr_expect_eq(match_text(g, &s), -1, "a 'c' among the b's: refused");
    infer__grules_free(g);
    free(t.p);
    free(s.p);
}

/* r0 ::= r1 "x", r1 ::= r2 "x", ... 10,000 rules: the start state is one
   stack 10,000 deep. */
Test(grammar_limits, chained_rules_10000_match) {
    text t = {0}, s = {0};
    infer__grules *g;
    int i;
    put(&t, "root ::= r0\n", 12);
    for (i = 0; i < 9999; i++) putf(&t, "r%d ::= r%d \"x\"\n", i, i + 1);
    put(&t, "r9999 ::= \"x\"\n", 14);
    g = compile_ok(t.p);
    puts_n(&s, "x", 9999);
    cr_expect_eq(match_text(g, &s), 0);
    put(&s, "x", 1);
    cr_expect_eq(match_text(g, &s), 1);
    put(&s, "x", 1);
    cr_expect_eq(match_text(g, &s), -1);
    cr_expect_eq(infer__grules_match(g, "xy", 2), -1);
    infer__grules_free(g);
    free(t.p);
    free(s.p);
}

/* A small recursive grammar, text nested 5,000 deep. */
Test(grammar_limits, recursive_text_5000_deep) {
    infer__grules *g = compile_ok("root ::= x\nx ::= \"(\" x \")\" | \"a\"\n");
    text s = {0};
    puts_n(&s, "(", 5000);
    put(&s, "a", 1);
    puts_n(&s, ")", 4999);
    cr_expect_eq(match_text(g, &s), 0, "one ')' short: a prefix");
    put(&s, ")", 1);
    cr_expect_eq(match_text(g, &s), 1);
    put(&s, ")", 1);
    cr_expect_eq(match_text(g, &s), -1, "one ')' too many");
    s.p[5000] = 'b';
    s.n = 10001;
    cr_expect_eq(match_text(g, &s), -1, "'b' for 'a'");
    infer__grules_free(g);
    free(s.p);
}

/* A 1,000-character literal 4,096 times: one helper rule holds it, the
   copies are references (copied out, it was 4 million elements). */
Test(grammar_limits, long_literal_repeated) {
    text lit = {0}, t = {0}, s = {0};
    infer__grules *g;
    int i;
    for (i = 0; i < 1000; i++) {
        char c = (char)('a' + (i * 7) % 26);
        put(&lit, &c, 1);
    }
    put(&t, "root ::= \"", 10);
    put(&t, lit.p, lit.n);
    put(&t, "\"{4096}", 7);
    g = compile_ok(t.p);
    cr_expect_lt(g->n_el, 20000, "%d elements for a literal under a repetition", g->n_el);
    for (i = 0; i < 4095; i++) put(&s, lit.p, lit.n);
    cr_expect_eq(match_text(g, &s), 0);
    put(&s, lit.p, lit.n);
    cr_expect_eq(match_text(g, &s), 1);
    s.p[s.n - 1] = s.p[s.n - 1] == 'z' ? 'y' : 'z';
    cr_expect_eq(match_text(g, &s), -1);
    infer__grules_free(g);
    /* a range of counts, and one with no maximum: small too */
    t.n = 0;
    put(&t, "root ::= \"", 10);
    put(&t, lit.p, lit.n);
    put(&t, "\"{2,4096} \"", 11);
    put(&t, lit.p, lit.n);
    put(&t, "\"{3,} \"!\"", 9);
    g = compile_ok(t.p);
    cr_expect_lt(g->n_el, 30000, "%d elements", g->n_el);
    s.n = 0;
    for (i = 0; i < 7; i++) put(&s, lit.p, lit.n);
    put(&s, "!", 1);
    cr_expect_eq(match_text(g, &s), 1, "2 + 5 copies");
    s.n = 0;
    for (i = 0; i < 4; i++) put(&s, lit.p, lit.n);
    put(&s, "!", 1);
    cr_expect_eq(match_text(g, &s), -1, "4 copies: too few for 2 + 3");
    infer__grules_free(g);
    free(lit.p);
    free(t.p);
    free(s.p);
}

/* Repetitions that truly expand past the budget are refused, naming it;
   so are character sets past theirs. */
Test(grammar_limits, element_budget) {
    text t = {0};
    char want[96];
    int i;
    put(&t, "root ::=", 8);
    puts_n(&t, " \"a\"{4096}", 257); /* 257 * 4096 > 2^20 elements */
    snprintf(want, sizeof want, "more than %d elements (infer.h's limit)", INFER__G_MAX_ELEMENTS);
    expect_refused(t.p, want);
    /* just under it: fine */
    t.n = 0;
    put(&t, "root ::=", 8);
    puts_n(&t, " \"a\"{4096}", 200);
    infer__grules_free(compile_ok(t.p));
    /* character sets: 100,000 classes of 10 ranges each (a range more
       for a complement) hold more than 2^20 ranges */
    t.n = 0;
    put(&t, "root ::= ", 9);
    for (i = 0; i < 100000; i++) put(&t, "[a-bd-ef-gh-ij-kl-mn-op-qr-st-uv-w] ", 36);
    snprintf(want, sizeof want, "more than %d ranges (infer.h's limit)", INFER__G_MAX_RANGES);
    expect_refused(t.p, want);
    free(t.p);
}

/* 100,000 rules: a chain, a chain that can match nothing (the nullable
   rules found in linear time), a flat list, and a left-recursive chain
   (found without recursing 100,000 deep). Quadratic name lookups or
   fixpoints took minutes. */
Test(grammar_limits, rules_100000_linear, .timeout = 60) {
    text t = {0};
    infer__grules *g;
    int i, n = 100000;
    put(&t, "root ::= r0 \"z\"\n", 16);
    for (i = 0; i < n - 1; i++) putf(&t, "r%d ::= r%d \"x\"\n", i, i + 1);
    putf(&t, "r%d ::= \"x\"\n", n - 1);
    g = compile_ok(t.p);
    cr_expect_geq(g->n_rules, n + 1);
    cr_expect_eq(infer__grules_match(g, "x", 1), 0);
    cr_expect_eq(infer__grules_match(g, "z", 1), -1);
    infer__grules_free(g);
    /* each rule may match nothing: defined in the order that made the old
       fixpoint take one pass per rule */
    t.n = 0;
    put(&t, "root ::= r0 \"z\"\n", 16);
    for (i = 0; i < n - 1; i++) putf(&t, "r%d ::= r%d | \"x\"\n", i, i + 1);
    putf(&t, "r%d ::= \"\"\n", n - 1);
    g = compile_ok(t.p);
    cr_expect_eq(infer__grules_match(g, "z", 1), 1);
    cr_expect_eq(infer__grules_match(g, "xz", 2), 1);
    cr_expect_eq(infer__grules_match(g, "xxz", 3), -1);
    infer__grules_free(g);
    /* a flat list */
    t.n = 0;
    put(&t, "root ::= r0", 11);
    for (i = 1; i < n; i++) putf(&t, " | r%d", i);
    put(&t, "\n", 1);
    for (i = 0; i < n; i++) putf(&t, "r%d ::= \"<%d>\"\n", i, i);
    g = compile_ok(t.p);
    cr_expect_eq(infer__grules_match(g, "<99999>", 7), 1);
    cr_expect_eq(infer__grules_match(g, "<100000>", 8), -1);
    infer__grules_free(g);
    /* left recursion through the whole chain */
    t.n = 0;
    put(&t, "root ::= r0\n", 12);
    for (i = 0; i < n - 1; i++) putf(&t, "r%d ::= r%d \"x\"\n", i, i + 1);
    putf(&t, "r%d ::= r0 | \"x\"\n", n - 1);
    expect_refused(t.p, "is left-recursive");
    free(t.p);
}

/* r_k ::= "a" r_(k-1) "b" | "a" r_(k-1) "c": after k a's, 2^k stacks.
   Up to the matcher's limit every one is kept (the old one dropped all
   past 1,024); past it the match reports the limit instead of guessing. */
Test(grammar_limits, ambiguity_to_the_limit_and_past) {
    text t = {0}, s = {0};
    infer__grules *g;
    const char *why = "";
    int i, k;
    for (k = 16; k <= 17; k++) {
        t.n = 0;
        putf(&t, "root ::= r%d\nr0 ::= \"a\"\n", k);
        for (i = 1; i <= k; i++) putf(&t, "r%d ::= \"a\" r%d \"b\" | \"a\" r%d \"c\"\n", i, i - 1, i - 1);
        g = compile_ok(t.p);
        s.n = 0;
        puts_n(&s, "a", k + 1);
        for (i = 0; i < k; i++) put(&s, (i * 5) % 3 ? "b" : "c", 1);
        if ((1 << k) <= INFER__MAX(INFER__G_MAX_STACKS, g->n_el)) {
            cr_expect_eq(match_text(g, &s), 1, "%d stacks are within the limit", 1 << k);
            s.p[s.n - 2] = 'd';
            cr_expect_eq(match_text(g, &s), -1);
        } else {
            cr_expect_eq(infer__grules_match_why(g, s.p, s.n, &why), -2, "%d stacks are past the limit", 1 << k);
            cr_expect(why && strstr(why, "infer.h's limit") && strstr(why, "stacks"), "limit: %s", why ? why : "");
        }
        infer__grules_free(g);
    }
    free(t.p);
    free(s.p);
}

/* ("a"? | "b"?){0,60}: each of the 60 steps may match nothing two ways, so
   expanding the start naively takes 2^60 steps. The matcher stops at its
   step limit and says so (it used to hang). */
Test(grammar_limits, exponential_expansion_stops_at_the_step_limit, .timeout = 60) {
    infer__grules *g = compile_ok("root ::= (\"a\"? | \"b\"?){0,60} \"z\"");
    const char *why = NULL;
    cr_expect_eq(infer__grules_match_why(g, "z", 1, &why), -2);
    cr_expect(why && strstr(why, "steps for one character"), "limit: %s", why ? why : "(none)");
    infer__grules_free(g);
    /* a few such steps are fine */
    g = compile_ok("root ::= (\"a\"? | \"b\"?){0,12} \"z\"");
    cr_expect_eq(infer__grules_match(g, "abz", 3), 1);
    cr_expect_eq(infer__grules_match(g, "z", 1), 1);
    cr_expect_eq(infer__grules_match(g, "y", 1), -1);
    infer__grules_free(g);
}

/* [a-z]+ inside 40 groups each repeated again: nested, each level's loop
   is reachable two ways and a character's state held 2^40 stacks (the
   fuzzer's find: the matcher ran into its step limit, taking seconds).
   Quantifiers on quantifiers are one repetition now, written directly or
   through groups, so the text matches at once. */
Test(grammar_limits, nested_quantifiers_are_one_repetition) {
    text t = {0};
    infer__grules *g;
    const char *why = NULL;
    infer_error err;
    int i;
    puts_n(&t, "root ::= \"- \" ", 1);
    puts_n(&t, "(", 40);
    puts_n(&t, "[a-z ]", 1);
    for (i = 0; i < 40; i++) put(&t, i % 3 ? ")+" : ")*", 2);
    puts_n(&t, " \"\\n\"\nother ::= [a-z ]+++++++++++++++++++++++++++++++++++++++++ \".\"\n", 1);
    g = compile_ok(t.p);
    cr_expect_eq(infer__grules_match_why(g, "- a list of words\n", 18, &why), 1, "limit: %s", why ? why : "(none)");
    cr_expect_eq(infer__grules_match(g, "- \n", 3), 1, "an outer * lets the list be empty");
    cr_expect_eq(infer__grules_match(g, "- A\n", 4), -1);
    infer__grules_free(g);
    g = infer__gbnf_compile(t.p, "other", &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_expect_eq(infer__grules_match_why(g, "abc.", 4, &why), 1, "limit: %s", why ? why : "(none)");
    cr_expect_eq(infer__grules_match(g, ".", 1), -1, "+ of + still needs one");
    infer__grules_free(g);
    /* the same through doubled parentheses, ((x))+: (e) is e */
    t.n = 0;
    puts_n(&t, "root ::= ", 1);
    puts_n(&t, "((", 20);
    puts_n(&t, "[a-z ]", 1);
    puts_n(&t, "))+", 20);
    puts_n(&t, " \".\"\n", 1);
    g = compile_ok(t.p);
    cr_expect_eq(infer__grules_match_why(g, "a few words.", 12, &why), 1, "limit: %s", why ? why : "(none)");
    cr_expect_eq(infer__grules_match(g, ".", 1), -1);
    infer__grules_free(g);
    free(t.p);
}

static infer_model *load_vocab(const char *path) {
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    mp.vocab_only = 1;
    return infer_model_load(path, &mp, &err);
}

/* Through the sampler: a grammar whose start state is already past the
   matcher's limit is refused naming it; one that passes it during
   generation stops the sampler with the limit named (where it used to
   drop stacks and go on with another language). */
Test(grammar_limits, sampler_reports_the_matcher_limit) {
    char path[1024];
    infer_model *m;
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    infer_error err;
    text t = {0};
    infer_token a = -1;
    int i, nv, k = 17;
    char buf[8];
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no vocabulary to test with");
    m = load_vocab(path);
    cr_assert_not_null(m);
    nv = infer_model_n_vocab(m);
    for (i = 0; i < nv && a < 0; i++)
        if (sc_token_to_piece(m, i, buf, sizeof buf) == 1 && buf[0] == 'a' && !infer_model_is_eog(m, i)) a = i;
    cr_assert_geq(a, 0, "no token 'a'");
    s = infer_sampler_new(&sp, nv, NULL);
    /* 2^17 stacks at the start: r_k ::= r_(k-1) "b" | r_(k-1) "c" */
    putf(&t, "root ::= r%d\nr0 ::= \"a\"\n", k);
    for (i = 1; i <= k; i++) putf(&t, "r%d ::= r%d \"b\" | r%d \"c\"\n", i, i - 1, i - 1);
    memset(&err, 0, sizeof err);
    cr_expect_eq(infer_sampler_set_grammar(s, m, t.p, NULL, &err), INFER_ERR_ARG);
    cr_expect(strstr(err.msg, "stacks") && strstr(err.msg, "infer.h's limit"), "%s", err.msg);
    /* 2^17 stacks after 16 a's */
    t.n = 0;
    putf(&t, "root ::= r%d\nr0 ::= \"a\"\n", k);
    for (i = 1; i <= k; i++) putf(&t, "r%d ::= \"a\" r%d \"b\" | \"a\" r%d \"c\"\n", i, i - 1, i - 1);
    cr_assert_eq(infer_sampler_set_grammar(s, m, t.p, NULL, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < k - 2; i++) infer_sampler_accept(s, a); /* 2^15 ways, each with r1's 2 alternatives */
    cr_expect_not(infer__sampler_nomem(s), "2^16 stacks are within the limit");
    infer_sampler_accept(s, a);
    cr_expect(infer__sampler_nomem(s), "2^17 stacks: the sampler must stop");
    cr_expect(infer__grammar_limit(s->grammar) && strstr(infer__grammar_limit(s->grammar), "stacks"),
              "the limit is named: %s", infer__grammar_limit(s->grammar) ? infer__grammar_limit(s->grammar) : "");
    /* what a request reports then: the limit, not "out of memory" */
    cr_expect(infer__sampler_grammar_limit(s) && strstr(infer__sampler_grammar_limit(s), "stacks"));
    {
        float *l = (float *)calloc((size_t)nv, sizeof(float));
        cr_expect_eq(infer_sampler_sample(s, l), -1, "a token sampled past the matcher's limit");
        free(l);
    }
    infer_sampler_free(s);
    infer_model_free(m);
    free(t.p);
}
