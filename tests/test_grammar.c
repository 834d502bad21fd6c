/* test_grammar.c - output control: GBNF grammars in llama.cpp's format
   (accepted and refused ones), the matcher fed byte by byte (characters
   split across tokens), the token mask's trie walk against checking every
   token from scratch on real vocabularies, JSON schemas compiled to
   grammars, logit bias, top probabilities, and the acceptance test: 200
   replies of SmolLM2 at temperature 1 under a JSON schema, every one parsed
   and validated by Python's json module. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* cli.h's parsers these tests do not use */
#endif
#include "examples/cli.h"
#include "tests/status_calls.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#define SMOLLM INFER_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf"

static uint64_t g_rng = 7;
static uint64_t rng_next(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static infer__grules *compile_ok(const char *gbnf) {
    infer_error err;
    infer__grules *g;
    memset(&err, 0, sizeof err);
    g = infer__gbnf_compile(gbnf, "root", &err);
    cr_assert_not_null(g, "refused a valid grammar: %s\n%s", err.msg, gbnf);
    return g;
}

/* 1 complete, 0 a proper prefix, -1 refused */
static int match(const char *gbnf, const char *text) {
    infer__grules *g = compile_ok(gbnf);
    int r = infer__grules_match(g, text, strlen(text));
    infer__grules_free(g);
    return r;
}

static const char *const ARITH = "# arithmetic\n"
                                 "root  ::= expr\n"
                                 "expr  ::= term ((\"+\" | \"-\") term)*\n"
                                 "term  ::= factor ((\"*\" | \"/\") factor)*\n"
                                 "factor ::= num | \"(\" ws expr ws \")\"\n"
                                 "num   ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\n"
                                 "ws    ::= [ ]*\n";

static const char *const JSON_G =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static const char *const LIST = "root ::= item+\n"
                                "item ::= \"- \" [^\\n]+ \"\\n\"\n";

static const char *const UNICODE_G = "root ::= word (\" \" word){0,5} \".\"\n"
                                     "word ::= ([a-z] | \"\\u00e9\" | \"\\xDF\" | [\\u03b1-\\u03c9] | [一-鿿] | \"\\U0001F600\")+\n";

Test(grammar, parser_accepts_llama_cpp_grammars) {
    static const struct {
        const char *gbnf, *text;
    } ok[] = {
        {ARITH, "1+2*(3-4)/5.5"},
        {JSON_G, "{\"a\": [1, 2.5e3, \"x\\n\\u00e9\"], \"b\": {\"c\": null}, \"d\": true}"},
        {LIST, "- one\n- two\n"},
        {UNICODE_G, "caf\xc3\xa9 stra\xc3\x9f" "e \xce\xb1\xce\xb2 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80."},
        {"root ::= [a-zA-Z_] [a-zA-Z0-9_]*", "_x9"},
        {"root ::= [^\"\\\\]* \"!\"", "it's!"},
        {"root ::= \"ab\"{2} \"c\"{1,} \"d\"{0,2} \"e\"{1,3}", "ababccdee"},
        {"root ::= . . .", "a\xc3\xa9\n"},
        {"root ::= \"\\x41\\u0042\\U00000043\\t\\r\\n\\\\\\\"\\[\\]\"", "ABC\t\r\n\\\"[]"},
        {"root ::= [\\]\\[] [\\x30-\\x39]", "]5"},
        /* multi-line: a line break inside parentheses, after '|', and a
           line that does not start a new rule continue the rule */
        {"root ::= (\n  \"a\"\n  | \"b\"\n)\n  \"c\"\n  | \"d\"   # comment\n\n# another\nunused ::= \"x\"\n", "bc"},
        {"root::=x\nx::=\"y\"", "y"},
        {"root ::= \"\"", ""},
        {"root ::= \"x\" |\nb ::= \"y\"", ""}, /* an empty last alternative */
        {"root ::= (\"a\"?){0,500} \"b\"", "aab"}, /* deep chains of rules that can match nothing */
        {"root ::= a-b\na-b ::= \"q\" | \"\"", ""},
    };
    size_t i;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_expect_eq(match(ok[i].gbnf, ok[i].text), 1, "grammar %zu does not match %s:\n%s", i, ok[i].text,
                     ok[i].gbnf);
    cr_expect_eq(match("root ::= (\"a\"?){0,500} \"b\"", "b"), 1);
    /* every way of a long chain of optional items kept (none dropped) */
    cr_expect_eq(match("root ::= (\"a\"?){0,4000} \"b\"", "aaab"), 1);
    cr_expect_eq(match("root ::= (\"a\"?){0,4000} \"b\"", "aaa"), 0);
}

Test(grammar, parser_refuses_malformed_grammars) {
    static const struct {
        const char *gbnf, *msg;
    } bad[] = {
        {"root ::= value\n", "undefined rule 'value' at line 1, column 10"},
        {"start ::= \"a\"\n", "no rule named 'root'"},
        {"root ::= \"abc\n", "unterminated string literal at line 1, column 10"},
        {"root ::= [a-z\n", "unterminated character class"},
        {"root ::= \"\\q\"", "bad escape '\\q' at line 1, column 11"},
        {"root ::= \"\\x4\"", "bad escape '\\x': 2 hex digits expected"},
        {"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]", "rule 'expr' is left-recursive"},
        {"root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"", "rule 'a' is left-recursive (it reaches itself before matching a character) at line 2"},
        {"root ::= (\"a\"? \"b\"?)*", "repeats something that can match nothing"},
        {"root ::= (\"a\" | \"b\"", "'(' is never closed"},
        {"root ::= \"a\")", "unexpected ')' at line 1, column 13"},
        {"root ::= * \"a\"", "'*' follows nothing"},
        {"root ::= \"a\"{3,1}", "maximum is below the minimum"},
        {"root ::= \"a\"{x}", "expecting a number after '{'"},
        {"root ::= \"a\"{99999}", "repetition count over"},
        {"root \"a\"", "expecting '::=' after 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice at line 2"},
        {"::= \"a\"", "expecting a rule name at line 1, column 1"},
        {"root ::= [z-a]", "bad range"},
        {"root ::= \"\xff\"", "invalid UTF-8"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        infer_error err;
        infer__grules *g;
        memset(&err, 0, sizeof err);
        g = infer__gbnf_compile(bad[i].gbnf, "root", &err);
        cr_expect_null(g, "accepted a malformed grammar: %s", bad[i].gbnf);
        infer__grules_free(g);
        cr_expect_eq(err.code, INFER_ERR_ARG, "grammar %zu: code %d", i, err.code);
        cr_expect(strstr(err.msg, bad[i].msg) != NULL, "grammar %zu: message '%s' does not say '%s'", i, err.msg,
                  bad[i].msg);
        cr_expect(strchr(err.msg, '\n') == NULL, "message of more than one line: %s", err.msg);
    }
}

Test(grammar, matcher_accepts_and_refuses) {
    static const struct {
        const char *gbnf, *text;
        int want;
    } cases[] = {
        {ARITH, "12+3*(4-5)", 1},
        {ARITH, "((1))", 1},
        {ARITH, "1+", 0},
        {ARITH, "(1", 0},
        {ARITH, "1+)", -1},
        {ARITH, "1 + 2", -1},
        {ARITH, "", 0},
        {JSON_G, "{}", 1},
        {JSON_G, "{\"k\": [true, false, null, -0.5E+10, \"\\\"\"]}\n  ", 1},
        {JSON_G, "{\"k\": 01}", -1},
        {JSON_G, "{\"k\": \"a\nb\"}", -1},
        {JSON_G, "{\"k\": \"\\uZZZZ\"}", -1},
        {JSON_G, "{\"k\": [1, 2,]}", -1},
        {JSON_G, "{\"k\": ", 0},
        {JSON_G, "[1]", -1},
        {LIST, "- a\n- b", 0},
        {LIST, "- \n", -1},
        {"root ::= \"a\"{2,3}", "a", 0},
        {"root ::= \"a\"{2,3}", "aa", 1},
        {"root ::= \"a\"{2,3}", "aaa", 1},
        {"root ::= \"a\"{2,3}", "aaaa", -1},
        {"root ::= \"a\"{2,}", "aaaaaaaaaa", 1},
        /* quantifiers on quantifiers (made one repetition) match what nesting them means */
        {"root ::= \"a\"{2}{2}", "aaa", 0},
        {"root ::= \"a\"{2}{2}", "aaaa", 1},
        {"root ::= \"a\"{2}{2}", "aaaaa", -1},
        {"root ::= (\"a\"{2,3}){2} \"b\"", "aaab", -1},
        {"root ::= (\"a\"{2,3}){2} \"b\"", "aaaab", 1},
        {"root ::= (\"a\"{2,3}){2} \"b\"", "aaaaaab", 1},
        {"root ::= (\"a\"{2,3}){2} \"b\"", "aaaaaaab", -1},
        {"root ::= \"a\"{1,2}{2,3} \"b\"", "ab", -1},
        {"root ::= \"a\"{1,2}{2,3} \"b\"", "aab", 1},
        {"root ::= \"a\"{1,2}{2,3} \"b\"", "aaaaaab", 1},
        {"root ::= \"a\"{1,2}{2,3} \"b\"", "aaaaaaab", -1},
        {"root ::= \"a\"? ? \"b\"", "aab", -1},
        {"root ::= \"a\"?+ \"b\"", "aaab", 1},
        {"root ::= (\"ab\"+)? \"c\"", "c", 1},
        {"root ::= (\"ab\"+)? \"c\"", "ababc", 1},
        {"root ::= (\"ab\"+)? \"c\"", "abac", -1},
        {"root ::= ((\"x\")+)+ \"y\"", "y", -1},
        {"root ::= ((\"x\")+)+ \"y\"", "xxxy", 1},
        {"root ::= (\"a\"?)* \"b\"", "aab", 1}, /* a* (llama.cpp refuses it: a nullable repetition) */
        {"root ::= (((\"ab\"))){2} \"c\"", "ababc", 1},
        {"root ::= (((\"ab\"))){2} \"c\"", "abc", -1},
        {UNICODE_G, "\xc3\xa9\xc3\x9f.", 1},
        {UNICODE_G, "\xc3\xa8.", -1},       /* è is not in the grammar */
        {UNICODE_G, "\xe4\xb8", 0},         /* half of 中: a prefix */
        {UNICODE_G, "\xed\xa0\x80.", -1},   /* a surrogate, not UTF-8 */
        {UNICODE_G, "\xc0\xa1.", -1},       /* overlong */
        {UNICODE_G, "\xf0\x9f\x98\x80.", 1},
        {UNICODE_G, "\xf0\x9f\x98\x81.", -1}, /* the next emoji: not in */
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(match(cases[i].gbnf, cases[i].text), cases[i].want, "case %zu: '%s' gives %d, expected %d", i,
                     cases[i].text, match(cases[i].gbnf, cases[i].text), cases[i].want);
}

/* Fed one byte at a time, a state is refused exactly at the first byte
   after which nothing can complete the text; a character cut in two is
   carried over (its first byte kept if some allowed character starts so). */
Test(grammar, matcher_byte_by_byte) {
    static const struct {
        const char *gbnf, *text;
        int fail_at; /* the byte refused, -1 none */
    } cases[] = {
        {UNICODE_G, "ab \xc3\xa9\xc3\xa8.", 6},     /* 0xa8 after 0xc3: è */
        {UNICODE_G, "ab \xc4\x80", 3},              /* no allowed character starts with 0xc4 */
        {UNICODE_G, "\xce\xb1\xcf\x89\xcf\x8a", 5}, /* α ω, then ϊ (U+03CA) past the range */
        {UNICODE_G, "\xe4\xb8\xad\xe9\xbf\xbf\xea", 6},
        {ARITH, "1+(2*3))", 7},
        {"root ::= [^a]", "\xc3", -1},
        {"root ::= [a-z]", "\xc3", 0},
        {"root ::= \"x\" .", "x\xf4\x8f\xbf\xbf", -1}, /* U+10FFFF */
        {"root ::= \"x\" .", "x\xf4\x90", 2},          /* past U+10FFFF */
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        infer__grules *g = compile_ok(cases[i].gbnf);
        infer__gm m;
        infer__gst st;
        int k, n = (int)strlen(cases[i].text), failed = -1;
        cr_assert(infer__gm_init(&m, g));
        memset(&st, 0, sizeof st);
        st.off = infer__gm_start(&m);
        for (k = 0; k < n && failed < 0; k++) {
            infer__gst next;
            if (!infer__gm_step(&m, &st, (unsigned char)cases[i].text[k], &next)) failed = k;
            else st = next;
        }
        cr_expect_eq(failed, cases[i].fail_at, "case %zu: refused at byte %d, expected %d", i, failed,
                     cases[i].fail_at);
        infer__gm_free(&m);
        infer__grules_free(g);
    }
}

static infer_model *load_vocab(const char *path) {
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    mp.vocab_only = 1;
    return infer_model_load(path, &mp, &err);
}

/* The id of the token whose text is exactly these bytes, or -1. */
static infer_token find_piece(const infer_model *m, const char *bytes, int n) {
    int t, nv = infer_model_n_vocab(m);
    char buf[64];
    for (t = 0; t < nv; t++)
        if (sc_token_to_piece(m, t, buf, sizeof buf) == n && !memcmp(buf, bytes, (size_t)n) &&
            !infer_model_is_eog(m, t))
            return t;
    return -1;
}

/* A character split over two tokens through the public API: the first
   half is allowed where the character may come, the wrong second half is
   not, and the grammar ends only after the whole. */
static void split_character(const char *path) {
    infer_model *m = load_vocab(path);
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    infer_error err;
    infer_token c3, a9, a8, bang;
    int nv, i;
    float *logits;
    cr_assert_not_null(m, "%s", path);
    c3 = find_piece(m, "\xc3", 1);
    a9 = find_piece(m, "\xa9", 1);
    a8 = find_piece(m, "\xa8", 1);
    bang = find_piece(m, "!", 1);
    cr_assert(c3 >= 0 && a9 >= 0 && a8 >= 0 && bang >= 0, "%s has no single-byte tokens", path);
    nv = infer_model_n_vocab(m);
    sp.temperature = 0;
    s = infer_sampler_new(&sp, nv, NULL);
    cr_assert_eq(infer_sampler_set_grammar(s, m, "root ::= \"\xc3\xa9!\"", NULL, &err), INFER_OK, "%s", err.msg);
    logits = (float *)calloc((size_t)nv, sizeof(float));
    /* the greedy choice is whatever leads among the grammar's tokens: one
       whose text starts with 0xc3 (é, é!, or the byte alone) */
    for (i = 0; i < nv; i++) logits[i] = (float)(i % 7);
    logits[c3] = -50;
    {
        char buf[64];
        infer_token t = infer_sampler_sample(s, logits);
        cr_assert(t >= 0 && sc_token_to_piece(m, t, buf, sizeof buf) >= 1 && (unsigned char)buf[0] == 0xc3,
                  "token %d does not start é", t);
    }
    logits[c3] = 100;
    cr_assert_eq(infer_sampler_sample(s, logits), c3);
    infer_sampler_accept(s, c3);
    cr_assert_not(infer_sampler_grammar_done(s));
    logits[a8] = 200;
    logits[a9] = 100;
    cr_assert_eq(infer_sampler_sample(s, logits), a9, "after 0xc3 only 0xa9 completes é");
    infer_sampler_accept(s, a9);
    cr_assert_not(infer_sampler_grammar_done(s));
    logits[bang] = 100; /* "!" may be two tokens (a byte token too): this one */
    cr_assert_eq(infer_sampler_sample(s, logits), bang);
    infer_sampler_accept(s, bang);
    cr_assert(infer_sampler_grammar_done(s));
    /* now only the end of generation remains */
    {
        infer_token t = infer_sampler_sample(s, logits);
        cr_assert(t >= 0 && infer_model_is_eog(m, t), "after the whole grammar %d was chosen, not an end token", t);
    }
    /* reset: back at the start; the wrong byte accepted: nothing allowed */
    infer_sampler_reset(s);
    cr_assert_eq(infer_sampler_sample(s, logits), c3);
    infer_sampler_accept(s, c3);
    infer_sampler_accept(s, a8);
    cr_assert_eq(infer_sampler_sample(s, logits), -1, "a refused token accepted must leave nothing allowed");
    free(logits);
    infer_sampler_free(s);
    infer_model_free(m);
}

Test(grammar, character_split_across_tokens) {
    char path[1024];
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no vocabulary to test with");
    split_character(path);
}

Test(grammar, character_split_across_tokens_smollm2) {
    FILE *f = fopen(SMOLLM, "rb");
    if (!f) cr_skip_test("%s is absent (python3 scripts/fetch_model.py fetches it)", SMOLLM);
    fclose(f);
    split_character(SMOLLM);
}

/* The allowed set, from scratch: the text so far fed to a fresh matcher,
   then every token's text tried on a copy of that state. */
static int brute_force(const infer__grammar *G, const char *text, size_t n, unsigned char *allowed) {
    infer__gm m;
    infer__gst st;
    int t, count = 0, n0, done;
    cr_assert(infer__gm_init(&m, G->g));
    memset(&st, 0, sizeof st);
    st.off = infer__gm_start(&m);
    infer__gm_feed(&m, &st, text, n);
    cr_assert_geq(st.off, 0, "the text so far is refused from scratch");
    done = infer__gm_done(&m, &st);
    n0 = m.n;
    for (t = 0; t < G->n_vocab; t++) {
        int len = G->poff[t + 1] - G->poff[t];
        infer__gst c = st;
        if (G->eog[t]) allowed[t] = (unsigned char)done;
        else allowed[t] = len > 0 && infer__gm_feed(&m, &c, G->pieces + G->poff[t], (size_t)len);
        m.n = n0;
        count += allowed[t];
    }
    infer__gm_free(&m);
    return count;
}

/* Random walks through the grammar: at every step the trie walk's mask
   (with its tables and without) equals the brute force, then a random
   allowed token is accepted. */
static void mask_vs_brute_force(const char *path, int walks, int steps) {
    static const char *const grammars[] = {JSON_G, ARITH, UNICODE_G, LIST, NULL};
    char schema_g[4096];
    infer_error err;
    infer_model *m = load_vocab(path);
    int gi, nv, checked = 0, partial = 0;
    unsigned char *a, *b;
    cr_assert_not_null(m, "%s", path);
    cr_assert_gt(sc_json_schema_to_grammar("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                                              "\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
                                              "{\"enum\":[\"x\",\"y\"]},\"maxItems\":3}},\"required\":[\"name\"]}",
                                              schema_g, sizeof schema_g, &err),
                 0, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    a = (unsigned char *)malloc((size_t)nv);
    b = (unsigned char *)malloc((size_t)nv);
    for (gi = 0; gi < 5; gi++) {
        const char *gbnf = gi < 4 ? grammars[gi] : schema_g;
        int w;
        for (w = 0; w < walks; w++) {
            infer__grammar *G = infer__grammar_new(m, nv, gbnf, "root", &err);
            char text[4096];
            size_t n = 0;
            int step;
            cr_assert_not_null(G, "%s", err.msg);
            for (step = 0; step < steps; step++) {
                int ca = infer__grammar_mask(G, a), cb = brute_force(G, text, n, b), t, pick, len, cp;
                for (t = 0; t < nv; t++)
                    cr_assert_eq(a[t], b[t], "%s, grammar %d, after '%.*s': token %d ('%.*s') is %s by the trie walk",
                                 path, gi, (int)n, text, t, G->poff[t + 1] - G->poff[t], G->pieces + G->poff[t],
                                 a[t] ? "allowed" : "refused");
                cr_assert_eq(ca, cb);
                /* the walk without its tables (what it falls back to) agrees too */
                cp = infer__grammar_walk(G, &G->m, &G->cur, &G->walk, b, 0);
                cr_assert_eq(cp, ca);
                cr_assert_eq(memcmp(a, b, (size_t)nv), 0, "the plain walk differs from the memoized one");
                checked++;
                partial += G->cur.remain > 0;
                /* a random allowed token that is text (not the end) */
                for (t = 0, pick = -1; t < nv; t++)
                    if (a[t] && !G->eog[t] && (pick < 0 || rng_next() % 8 == 0)) pick = t;
                if (pick < 0) break;
                if (gi == 2 && rng_next() % 2) /* now and then a lone lead byte of UTF-8, to split a character */
                    for (t = 0; t < nv; t++)
                        if (a[t] && G->poff[t + 1] - G->poff[t] == 1 &&
                            (unsigned char)G->pieces[G->poff[t]] >= 0xC2)
                            pick = t;
                len = G->poff[pick + 1] - G->poff[pick];
                if (n + (size_t)len >= sizeof text) break;
                cr_assert(infer__grammar_allows(G, pick));
                infer__grammar_accept(G, pick);
                memcpy(text + n, G->pieces + G->poff[pick], (size_t)len);
                n += (size_t)len;
            }
            infer__grammar_free(G);
        }
    }
    cr_log_info("%s: %d states checked against brute force (%d inside a split character)", path, checked, partial);
    cr_assert_gt(partial, 0, "no state inside a split character was checked");
    free(a);
    free(b);
    infer_model_free(m);
}

Test(grammar, mask_equals_brute_force_stories260k) {
    char path[1024];
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no vocabulary to test with");
    g_rng = 11;
    mask_vs_brute_force(path, 4, 24);
}

Test(grammar, mask_equals_brute_force_smollm2) {
    FILE *f = fopen(SMOLLM, "rb");
    if (!f) cr_skip_test("%s is absent (python3 scripts/fetch_model.py fetches it)", SMOLLM);
    fclose(f);
    g_rng = 12;
    mask_vs_brute_force(SMOLLM, 2, 12);
}

static char *schema_grammar(const char *schema) {
    infer_error err;
    int n = sc_json_schema_to_grammar(schema, NULL, 0, &err);
    char *g;
    cr_assert_geq(n, 0, "schema refused: %s\n%s", err.msg, schema);
    g = (char *)malloc((size_t)n + 1);
    cr_assert_eq(sc_json_schema_to_grammar(schema, g, (size_t)n + 1, &err), n);
    cr_assert_eq(strlen(g), (size_t)n);
    return g;
}

Test(grammar, json_schema_valid_and_invalid_instances) {
    static const struct {
        const char *schema;
        const char *valid[8];
        const char *invalid[8];
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"say\":{\"type\":\"string\",\"maxLength\":5},"
         "\"mood\":{\"enum\":[\"happy\",\"angry\",\"sad\",\"calm\"]}},\"required\":[\"say\",\"mood\"]}",
         {"{\"say\":\"hi\",\"mood\":\"sad\"}", "{ \"say\" : \"\\u00e9\\n\" , \"mood\" : \"calm\" }",
          "{\n  \"say\": \"hello\",\n  \"mood\": \"happy\"\n}", NULL},
         {"{\"mood\":\"sad\"}", "{\"say\":\"hi\"}", "{\"say\":\"hi\",\"mood\":\"bored\"}",
          "{\"say\":\"toolong\",\"mood\":\"sad\"}", "{\"say\":3,\"mood\":\"sad\"}",
          "{\"mood\":\"sad\",\"say\":\"hi\"}", "{\"say\":\"hi\",\"mood\":\"sad\",\"x\":1}", "[\"hi\",\"sad\"]"}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"number\"},"
         "\"c\":{\"type\":\"boolean\"},\"d\":{\"type\":\"null\"},\"e\":{\"type\":[\"string\",\"null\"]}},"
         "\"required\":[\"c\"]}",
         {"{\"c\":true}", "{\"a\":-3,\"c\":false}", "{\"b\":1.5e-3,\"c\":true,\"e\":null}",
          "{\"a\":0,\"b\":-0.25,\"c\":true,\"d\":null,\"e\":\"x\"}", NULL},
         {"{}", "{\"a\":1.5,\"c\":true}", "{\"b\":01,\"c\":true}", "{\"c\":\"true\"}", "{\"c\":true,\"d\":0}",
          "{\"c\":true,\"e\":5}", "{\"c\":true,\"a\":1}", NULL}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"id\":{\"const\":7},"
         "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"maxItems\":2}}},"
         "\"maxItems\":3}",
         {"[]", "[{}]", "[{\"id\":7},{\"tags\":[\"a\"]},{\"id\":7,\"tags\":[\"a\",\"b\"]}]", NULL},
         {"[{\"id\":8}]", "[{\"tags\":[]}]", "[{\"tags\":[\"a\",\"b\",\"c\"]}]", "[{},{},{},{}]", "{}", NULL}},
        {"{\"enum\":[1,\"two\",null,true,[3],{\"k\":\"v\"}]}",
         {"1", "\"two\"", "null", "true", "[3]", "{\"k\":\"v\"}", NULL},
         {"2", "\"three\"", "false", "[4]", NULL}},
        {"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"minLength\":2}]}",
         {"42", "\"ab\"", NULL},
         {"\"a\"", "4.5", NULL}},
        {"{}", {"{\"any\":[1,{\"x\":null}]}", "\"s\"", "-1.5", NULL}, {"nul", "[1,]", NULL}},
    };
    size_t i, k;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *g = schema_grammar(cases[i].schema);
        infer__grules *r = compile_ok(g);
        for (k = 0; k < 8 && cases[i].valid[k]; k++)
            cr_expect_eq(infer__grules_match(r, cases[i].valid[k], strlen(cases[i].valid[k])), 1,
                         "schema %zu refuses valid %s\n%s", i, cases[i].valid[k], g);
        for (k = 0; k < 8 && cases[i].invalid[k]; k++)
            cr_expect_neq(infer__grules_match(r, cases[i].invalid[k], strlen(cases[i].invalid[k])), 1,
                          "schema %zu accepts invalid %s\n%s", i, cases[i].invalid[k], g);
        infer__grules_free(r);
        free(g);
    }
}

Test(grammar, json_schema_errors_and_buffer) {
    static const struct {
        const char *schema, *msg;
    } bad[] = {
        {"{\"type\":\"object\",", "unexpected end, expecting a key at line 1, column 18"},
        {"{\"type\" \"string\"}", "expecting ':' after a key at line 1, column 9"},
        {"{\"type\":\"string\"} x", "unexpected text after the schema"},
        {"{\"type\":\"strin\"}", "unsupported type 'strin' at line 1, column 9"},
        {"{\"$ref\":\"#/defs/x\"}", "$ref is not supported"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required property 'b'"},
        {"{\"enum\":[]}", "enum must be"},
        {"{\"type\":\"string\",\"maxLength\":-1}", "maxLength must be a non-negative integer"},
        {"{\"type\":\"string\",\n \"x\": \"\\q\"}", "bad escape in a string at line 2, column 8"},
        {"[1, 2]", "a schema must be an object"},
        {"{\"type\":\"object\",\"properties\":{\"a\":", "unexpected end, expecting a value at line 1, column 36"},
    };
    char buf[16];
    infer_error err;
    size_t i;
    int n;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        cr_expect_eq(sc_json_schema_to_grammar(bad[i].schema, buf, sizeof buf, &err), -1, "accepted %s",
                     bad[i].schema);
        cr_expect_eq(err.code, INFER_ERR_ARG);
        cr_expect(strstr(err.msg, bad[i].msg) != NULL, "schema %zu: message '%s' does not say '%s'", i, err.msg,
                  bad[i].msg);
    }
    /* snprintf-style: the full length, a cut copy, a NUL */
    n = sc_json_schema_to_grammar("{\"type\":\"boolean\"}", NULL, 0, &err);
    cr_assert_gt(n, (int)sizeof buf);
    memset(buf, 'x', sizeof buf);
    cr_assert_eq(sc_json_schema_to_grammar("{\"type\":\"boolean\"}", buf, sizeof buf, &err), n);
    cr_assert_eq(buf[sizeof buf - 1], 0);
    cr_assert_eq(strncmp(buf, "root ::= boolean", sizeof buf - 1), 0, "%s", buf);
}

/* softmax of l over the tokens where keep is set (or all) */
static void softmax(const float *l, int n, const unsigned char *keep, double *p) {
    double mx = -INFINITY, sum = 0;
    int i;
    for (i = 0; i < n; i++)
        if ((!keep || keep[i]) && l[i] > mx) mx = l[i];
    for (i = 0; i < n; i++) sum += p[i] = (!keep || keep[i]) ? exp(l[i] - mx) : 0;
    for (i = 0; i < n; i++) p[i] /= sum;
}

Test(grammar, logit_bias_and_top_probs) {
    float l[6] = {1.0f, 3.0f, 2.0f, -1.0f, 0.5f, 2.5f}, biased[6];
    const infer_token ids[] = {1, 3};
    const float bias[] = {-INFINITY, 4.0f};
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    infer_token_prob top[6];
    double p[6];
    int i, n, draws;
    sp.temperature = 0;
    s = infer_sampler_new(&sp, 6, NULL);
    cr_assert_eq(sc_sampler_top_probs(s, top, 3), 0, "top probs before any sample");
    cr_assert_eq(infer_sampler_sample(s, l), 1);
    n = sc_sampler_top_probs(s, top, 3);
    softmax(l, 6, NULL, p);
    cr_assert_eq(n, 3);
    cr_assert(top[0].id == 1 && top[1].id == 5 && top[2].id == 2, "order %d %d %d", top[0].id, top[1].id, top[2].id);
    for (i = 0; i < 3; i++) cr_assert_float_eq(top[i].p, p[top[i].id], 1e-6);
    /* bias: token 1 banned, token 3 raised to 3.0, the new argmax */
    infer_sampler_set_logit_bias(s, ids, bias, 2, NULL);
    cr_assert_eq(infer_sampler_sample(s, l), 3);
    memcpy(biased, l, sizeof l);
    biased[1] = -INFINITY;
    biased[3] += 4.0f;
    softmax(biased, 6, NULL, p);
    n = sc_sampler_top_probs(s, top, 6);
    cr_assert_eq(n, 6);
    for (i = 0; i < n; i++) {
        cr_assert_float_eq(top[i].p, p[top[i].id], 1e-6);
        if (i) cr_assert_geq(top[i - 1].p, top[i].p);
    }
    infer_sampler_free(s);
    /* a banned token is never drawn, at any temperature */
    sp.temperature = 1.5f;
    sp.top_k = 0;
    sp.top_p = 1;
    sp.min_p = 0;
    s = infer_sampler_new(&sp, 6, NULL);
    infer_sampler_set_logit_bias(s, ids, bias, 2, NULL);
    for (draws = 0; draws < 2000; draws++) cr_assert_neq(infer_sampler_sample(s, l), 1);
    /* top probs at temperature 1, before truncation, whatever the sampler's temperature */
    n = sc_sampler_top_probs(s, top, 2);
    cr_assert_eq(n, 2);
    cr_assert_eq(top[0].id, 3);
    cr_assert_float_eq(top[0].p, p[3], 1e-6);
    infer_sampler_set_logit_bias(s, NULL, NULL, 0, NULL); /* removed */
    sp.temperature = 0;
    infer_sampler_free(s);
    s = infer_sampler_new(&sp, 6, NULL);
    infer_sampler_set_logit_bias(s, ids, bias, 2, NULL);
    infer_sampler_set_logit_bias(s, NULL, NULL, 0, NULL);
    cr_assert_eq(infer_sampler_sample(s, l), 1, "a removed bias still applies");
    infer_sampler_free(s);
}

/* With a grammar, top probs are the softmax over the allowed tokens only,
   whether the draw found an allowed token at once or had to mask. */
Test(grammar, top_probs_follow_the_grammar) {
    char path[1024];
    infer_model *m;
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    infer_error err;
    infer_token_prob *top;
    unsigned char *allowed;
    float *l;
    double *p, sum;
    int nv, i, n, pass, n_allowed = 0;
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no vocabulary to test with");
    m = load_vocab(path);
    cr_assert_not_null(m);
    nv = infer_model_n_vocab(m);
    l = (float *)malloc((size_t)nv * sizeof *l);
    p = (double *)malloc((size_t)nv * sizeof *p);
    allowed = (unsigned char *)calloc((size_t)nv, 1);
    top = (infer_token_prob *)malloc((size_t)nv * sizeof *top);
    for (i = 0; i < nv; i++) {
        char buf[64];
        int len = sc_token_to_piece(m, i, buf, sizeof buf);
        l[i] = (float)((rng_next() % 1000) / 100.0);
        /* the grammar below: text starting with a, b or c (then anything in a-z) */
        if (len > 0 && buf[0] >= 'a' && buf[0] <= 'c' && !infer_model_is_eog(m, i)) {
            int k, ok = 1;
            for (k = 1; k < len; k++) ok &= buf[k] >= 'a' && buf[k] <= 'z';
            allowed[i] = (unsigned char)ok;
            n_allowed += ok;
        }
    }
    cr_assert_gt(n_allowed, 3);
    for (pass = 0; pass < 2; pass++) {
        int best = -1;
        sp.temperature = 0;
        s = infer_sampler_new(&sp, nv, NULL);
        cr_assert_eq(infer_sampler_set_grammar(s, m, "root ::= [a-c] [a-z]*", NULL, &err), INFER_OK, "%s", err.msg);
        for (i = 0; i < nv; i++)
            if (allowed[i] && (best < 0 || l[i] > l[best])) best = i;
        /* pass 0: an allowed token leads (no mask made at sampling);
           pass 1: a refused one leads (masked) */
        l[best] = pass ? l[best] : 20.0f;
        for (i = 0; i < nv && pass; i++)
            if (!allowed[i]) {
                l[i] = 30.0f;
                break;
            }
        for (i = 0, best = -1; i < nv; i++)
            if (allowed[i] && (best < 0 || l[i] > l[best] || (l[i] == l[best] && i < best))) best = i;
        cr_assert_eq(infer_sampler_sample(s, l), best, "pass %d", pass);
        softmax(l, nv, allowed, p);
        n = sc_sampler_top_probs(s, top, nv);
        cr_assert_eq(n, n_allowed, "pass %d: %d top probs for %d allowed tokens", pass, n, n_allowed);
        for (i = 0, sum = 0; i < n; i++) {
            cr_assert(allowed[top[i].id], "pass %d: token %d is not allowed", pass, top[i].id);
            cr_assert_float_eq(top[i].p, p[top[i].id], 1e-6);
            sum += top[i].p;
        }
        cr_assert_float_eq(sum, 1.0, 1e-4);
        /* kept after the token is accepted */
        infer_sampler_accept(s, best);
        cr_assert_eq(sc_sampler_top_probs(s, top, 1), 1);
        cr_assert_eq(top[0].id, best);
        /* banning every allowed token leaves nothing: -1 */
        {
            infer_token *ids = (infer_token *)malloc((size_t)nv * sizeof *ids);
            float *b = (float *)malloc((size_t)nv * sizeof *b);
            int k = 0;
            infer_sampler_reset(s);
            for (i = 0; i < nv; i++)
                if (allowed[i]) ids[k] = i, b[k++] = -INFINITY;
            infer_sampler_set_logit_bias(s, ids, b, k, NULL);
            cr_assert_eq(infer_sampler_sample(s, l), -1);
            cr_assert_eq(sc_sampler_top_probs(s, top, 4), 0);
            free(ids);
            free(b);
        }
        infer_sampler_free(s);
    }
    free(l);
    free(p);
    free(allowed);
    free(top);
    infer_model_free(m);
}

Test(grammar, set_grammar_errors_leave_no_grammar) {
    char path[1024];
    infer_model *m;
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    infer_error err;
    float *l;
    int nv, i;
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no vocabulary to test with");
    m = load_vocab(path);
    cr_assert_not_null(m);
    nv = infer_model_n_vocab(m);
    sp.temperature = 0;
    s = infer_sampler_new(&sp, nv, NULL);
    l = (float *)calloc((size_t)nv, sizeof *l);
    l[5] = 10; /* not text the grammar below allows */
    cr_assert_eq(infer_sampler_set_grammar(s, m, "root ::= \"x\"+", NULL, &err), INFER_OK, "%s", err.msg);
    cr_assert_neq(infer_sampler_sample(s, l), 5);
    cr_assert_not(infer_sampler_grammar_done(s));
    /* the prompt's tokens do not move the grammar */
    for (i = 0; i < 10; i++) infer_sampler_accept_prompt(s, 5);
    cr_assert_neq(infer_sampler_sample(s, l), -1);
    memset(&err, 0, sizeof err);
    cr_assert_eq(infer_sampler_set_grammar(s, m, "root ::= \"x\" y", NULL, &err), INFER_ERR_ARG);
    cr_assert(strstr(err.msg, "undefined rule 'y' at line 1, column 14"), "%s", err.msg);
    cr_assert(infer_sampler_grammar_done(s), "a refused grammar left one behind");
    cr_assert_eq(infer_sampler_sample(s, l), 5, "a refused grammar still masks");
    cr_assert_eq(infer_sampler_set_grammar(s, m, "start ::= \"x\"", "start", &err), INFER_OK, "%s", err.msg);
    cr_assert_neq(infer_sampler_sample(s, l), 5);
    cr_assert_eq(infer_sampler_set_grammar(s, m, "start ::= \"x\"", NULL, &err), INFER_ERR_ARG);
    cr_assert(strstr(err.msg, "no rule named 'root'"), "%s", err.msg);
    cr_assert_eq(infer_sampler_set_grammar(s, m, NULL, NULL, &err), INFER_OK);
    cr_assert_eq(infer_sampler_sample(s, l), 5);
    infer_sampler_free(s);
    s = infer_sampler_new(&sp, nv + 1, NULL);
    cr_assert_eq(infer_sampler_set_grammar(s, m, "root ::= \"x\"", NULL, &err), INFER_ERR_ARG);
    cr_assert(strstr(err.msg, "tokens"), "%s", err.msg);
    infer_sampler_free(s);
    free(l);
    infer_model_free(m);
}

/* Generation with a real (tiny) model under grammars: every reply ends
   with an end token once the grammar is done, and its text is a sentence
   of the grammar. */
Test(grammar, generation_follows_the_grammar) {
    char path[1024];
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    char *schema_g;
    const char *grammars[3];
    int gi, seed, nv;
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to generate with");
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    cp.n_ctx = 512;
    c = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    schema_g = schema_grammar("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
                              "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\"]}");
    grammars[0] = "root ::= \"Once upon a time, \" [a-z ]{1,30} \".\"";
    grammars[1] = ARITH;
    grammars[2] = schema_g;
    for (gi = 0; gi < 3; gi++) {
        infer__grules *r = compile_ok(grammars[gi]);
        for (seed = 0; seed < 4; seed++) {
            infer_sampler_params sp = infer_sampler_default_params();
            infer_sampler *s;
            infer_token bos = infer_model_bos(m), tok = -1;
            char text[2048];
            int n = 0, i, ended = 0;
            sp.temperature = 1.0f;
            sp.top_k = 0;
            sp.top_p = 1.0f;
            sp.min_p = 0;
            sp.seed = (uint64_t)seed;
            s = infer_sampler_new(&sp, nv, NULL);
            cr_assert_eq(infer_sampler_set_grammar(s, m, grammars[gi], NULL, &err), INFER_OK, "%s", err.msg);
            infer_seq_truncate(c, 0, 0, NULL, NULL);
            cr_assert_eq(infer_decode(c, &bos, 1, 0, &err), INFER_OK, "%s", err.msg);
            for (i = 0; i < 400; i++) {
                int len;
                tok = infer_sampler_sample(s, infer_context_logits(c, -1));
                cr_assert_geq(tok, 0, "grammar %d seed %d: nothing allowed after '%.*s'", gi, seed, n, text);
                infer_sampler_accept(s, tok);
                if (infer_model_is_eog(m, tok)) {
                    ended = 1;
                    break;
                }
                len = sc_token_to_piece(m, tok, text + n, (int)sizeof text - n);
                cr_assert(len >= 0 && n + len < (int)sizeof text);
                n += len;
                cr_assert_eq(infer_decode(c, &tok, 1, 0, &err), INFER_OK, "%s", err.msg);
            }
            if (ended) {
                cr_assert_eq(infer__grules_match(r, text, (size_t)n), 1, "grammar %d seed %d ended on '%.*s'", gi,
                             seed, n, text);
            } else /* arithmetic can go on for ever: then a prefix */
                cr_assert_geq(infer__grules_match(r, text, (size_t)n), 0, "grammar %d seed %d: '%.*s'", gi, seed, n,
                              text);
            cr_assert(gi == 1 || ended, "grammar %d seed %d did not end: '%.*s'", gi, seed, n, text);
            infer_sampler_free(s);
        }
        infer__grules_free(r);
    }
    free(schema_g);
    infer_context_free(c);
    infer_model_free(m);
}

/* The CLI's output flags (examples/cli.h): llama.cpp's --logit-bias
   syntax, and a grammar, schema or bias put on a sampler, or refused with
   the problem said. */
Test(grammar, cli_output_flags) {
    static const char *const bad_bias[] = {"15", "x+1", "15+", "15*2", "-3+1", "15+nan", "15+-1", "15+1x", ""};
    char path[1024], schema_path[64], gbnf[] = "root ::= \"ab\"";
    cli_output o;
    infer_model *m;
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    float *l;
    int ok, nv;
    size_t i;
    FILE *f;
    memset(&o, 0, sizeof o);
    cr_assert(cli_output_flag("--grammar") && cli_output_flag("--n-probs") && !cli_output_flag("--temp"));
    cr_assert_not(cli_output_option("--temp", "1", &o, &ok));
    cr_assert(cli_output_option("--logit-bias", "15+1", &o, &ok) && ok);
    cr_assert(cli_output_option("--logit-bias", "16-inf", &o, &ok) && ok);
    cr_assert(cli_output_option("--logit-bias", "17-0.5", &o, &ok) && ok);
    cr_assert_eq(o.n_bias, 3);
    cr_assert(o.bias_id[0] == 15 && o.bias[0] == 1.0f && o.bias_id[1] == 16 && o.bias[1] == -INFINITY &&
              o.bias_id[2] == 17 && o.bias[2] == -0.5f);
    for (i = 0; i < sizeof bad_bias / sizeof bad_bias[0]; i++)
        cr_assert(cli_output_option("--logit-bias", bad_bias[i], &o, &ok) && !ok, "accepted --logit-bias %s",
                  bad_bias[i]);
    cr_assert_eq(o.n_bias, 3);
    cr_assert(cli_output_option("--n-probs", "5", &o, &ok) && ok && o.n_probs == 5);
    cr_assert(cli_output_option("--n-probs", "-1", &o, &ok) && !ok);
    cr_assert(cli_output_option("--grammar", gbnf, &o, &ok) && ok && o.grammar == gbnf);
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no vocabulary to apply the flags with");
    m = load_vocab(path);
    cr_assert_not_null(m);
    nv = infer_model_n_vocab(m);
    l = (float *)calloc((size_t)nv, sizeof *l);
    sp.temperature = 0;
    s = infer_sampler_new(&sp, nv, NULL);
    o.n_bias = 0;
    cr_assert(cli_output_apply(&o, s, m));
    l[5] = 10;
    {
        char buf[16];
        infer_token t = infer_sampler_sample(s, l);
        cr_assert(t >= 0 && sc_token_to_piece(m, t, buf, sizeof buf) >= 1 && buf[0] == 'a', "the grammar was not applied");
    }
    /* refused: two sources, a bad grammar, a bias out of range, a missing file */
    o.json_schema = "{\"type\":\"string\"}";
    cr_assert_not(cli_output_apply(&o, s, m));
    o.grammar = NULL;
    cr_assert(cli_output_apply(&o, s, m));
    o.json_schema = "{\"type\":\"strin\"}";
    cr_assert_not(cli_output_apply(&o, s, m));
    o.json_schema = NULL;
    o.grammar = "root ::= x";
    cr_assert_not(cli_output_apply(&o, s, m));
    o.grammar = NULL;
    o.grammar_file = "/nonexistent/g.gbnf";
    cr_assert_not(cli_output_apply(&o, s, m));
    o.grammar_file = NULL;
    snprintf(schema_path, sizeof schema_path, "cli_schema_%d.json", (int)getpid());
    f = fopen(schema_path, "wb");
    cr_assert_not_null(f);
    fputs("{\"enum\": [\"b\"]}", f);
    fclose(f);
    o.json_schema_file = schema_path;
    o.bias_id[0] = 5;
    o.bias[0] = -INFINITY;
    o.n_bias = 1;
    cr_assert(cli_output_apply(&o, s, m));
    remove(schema_path);
    {
        char buf[16];
        infer_token t = infer_sampler_sample(s, l);
        cr_assert(t >= 0 && sc_token_to_piece(m, t, buf, sizeof buf) >= 1 && buf[0] == '"', "the schema was not applied");
    }
    o.bias_id[0] = nv;
    cr_assert_not(cli_output_apply(&o, s, m));
    infer_sampler_free(s);
    free(l);
    infer_model_free(m);
}

/* ---- the acceptance test ---------------------------------------------------- */

/* 200 replies; INFER_TEST_REPLIES=N asks for N (a multiple of 10): the
   sanitizer build asks for 20, a fifth of its run otherwise */
static int n_replies(void) {
    const char *e = getenv("INFER_TEST_REPLIES");
    int n = e ? atoi(e) / 10 * 10 : 0;
    return n > 0 ? n : 200;
}
#define N_REPLIES n_replies()

static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"say\":{\"type\":\"string\",\"maxLength\":24},"
    "\"mood\":{\"enum\":[\"happy\",\"angry\",\"sad\",\"calm\"]}},\"required\":[\"say\",\"mood\"]}";

static int test_threads(void) {
    const char *e = getenv("INFER_TEST_THREADS");
    return e && atoi(e) > 0 ? atoi(e) : 2;
}

/* 200 replies of SmolLM2 at temperature 1 (no top-k, top-p or min-p: the
   whole distribution) under a JSON schema, 200 seeds over 10 chat prompts,
   all written to a file that Python's json module parses and a hand-written
   validator checks. The string is bounded (maxLength) and n_predict exceeds
   the longest text the grammar allows, so every reply completes. */
Test(grammar, json_schema_replies_validate, .timeout = 1800) {
    static const char *const asks[10] = {
        "How are you today?", "Tell me about the weather.", "What do you think of Mondays?",
        "Describe your favourite food.", "Someone stole your bike.", "You won a prize!",
        "What is 2 + 2?", "Say something about cats.", "Your friend moved away.", "Greet me in French."};
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    infer_chat_template tmpl;
    char *gbnf, prompt[2048], out_path[256], schema_path[256], cmd[1024], *report;
    FILE *f = fopen(SMOLLM, "rb"), *out;
    float *logits0;
    infer_token toks[512];
    int nv, a, r, status, complete = 0, total_tokens = 0, max_tokens = 0;
    double t0;
    if (!f) cr_skip_test("%s is absent (python3 scripts/fetch_model.py fetches it)", SMOLLM);
    fclose(f);
    m = infer_model_load(SMOLLM, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    cp.n_ctx = 1024;
    cp.n_threads = test_threads();
    c = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    logits0 = (float *)malloc((size_t)nv * sizeof *logits0);
    gbnf = schema_grammar(SCHEMA);
    tmpl = infer_chat_template_detect(m);
    snprintf(out_path, sizeof out_path, "grammar_replies_%d.bin", (int)getpid());
    snprintf(schema_path, sizeof schema_path, "grammar_schema_%d.json", (int)getpid());
    out = fopen(schema_path, "wb");
    cr_assert_not_null(out);
    fputs(SCHEMA, out);
    fclose(out);
    out = fopen(out_path, "wb");
    cr_assert_not_null(out);
    t0 = infer__now_ms();
    for (a = 0; a < 10; a++) {
        infer_chat_message msgs[2];
        int n, n_past;
        msgs[0].role = "system";
        msgs[0].content = "You reply only with a JSON object: \"say\" is what you say (short), \"mood\" is one of "
                          "happy, angry, sad or calm.";
        msgs[1].role = "user";
        msgs[1].content = asks[a];
        cr_assert_lt(sc_chat_format(&tmpl, msgs, 2, 0, 1, prompt, sizeof prompt), (int)sizeof prompt);
        if (infer_tokenize(m, prompt, strlen(prompt), toks, 512, infer_model_add_bos(m), 1, &n, NULL) != INFER_OK) n = -1;
        cr_assert(n > 0 && n < 512);
        /* the prompt once; each reply starts again from its end */
        infer_seq_truncate(c, 0, 0, NULL, NULL);
        cr_assert_eq(infer_decode(c, toks, n, 0, &err), INFER_OK, "%s", err.msg);
        memcpy(logits0, infer_context_logits(c, -1), (size_t)nv * sizeof *logits0);
        n_past = infer_seq_n_past(c, 0);
        for (r = 0; r < N_REPLIES / 10; r++) {
            infer_sampler_params sp = infer_sampler_default_params();
            infer_sampler *s;
            const float *logits = logits0;
            int i, ended = 0, seed = a * (N_REPLIES / 10) + r;
            sp.temperature = 1.0f;
            sp.top_k = 0;
            sp.top_p = 1.0f;
            sp.min_p = 0;
            sp.seed = 1000 + (uint64_t)seed;
            s = infer_sampler_new(&sp, nv, NULL);
            cr_assert_eq(infer_sampler_set_grammar(s, m, gbnf, NULL, &err), INFER_OK, "%s", err.msg);
            cr_assert_eq(sc_seq_truncate(c, 0, n_past), n_past);
            if (seed) fputc(0x1e, out);
            for (i = 0; i < 512; i++) {
                char piece[256];
                int len;
                infer_token tok = infer_sampler_sample(s, logits);
                if (tok < 0) break; /* nothing allowed: the reply stays incomplete, Python says so */
                infer_sampler_accept(s, tok);
                if (infer_model_is_eog(m, tok)) {
                    ended = infer_sampler_grammar_done(s);
                    break;
                }
                len = sc_token_to_piece(m, tok, piece, sizeof piece);
                if (len > 0) fwrite(piece, 1, (size_t)len, out);
                cr_assert_eq(infer_decode(c, &tok, 1, 0, &err), INFER_OK, "%s", err.msg);
                logits = infer_context_logits(c, -1);
            }
            complete += ended;
            total_tokens += i;
            if (i > max_tokens) max_tokens = i;
            infer_sampler_free(s);
        }
    }
    fclose(out);
    cr_log_info("%d replies, %d tokens (longest %d) in %.1f s", N_REPLIES, total_tokens, max_tokens,
                (infer__now_ms() - t0) / 1000.0);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/grammar_json_check.py %s %s 2>&1", INFER_SOURCE_DIR, schema_path,
             out_path);
    report = tu_run(cmd, &status);
    cr_assert_not_null(report, "could not run %s", cmd);
    cr_log_info("%s", report);
    cr_expect_eq(status, 0, "the replies do not all validate:\n%s", report);
    {
        char want[64];
        snprintf(want, sizeof want, "checked %d replies, all valid", N_REPLIES);
        cr_expect(strstr(report, want) != NULL, "Python did not check %d replies:\n%s", N_REPLIES, report);
    }
    cr_expect_eq(complete, N_REPLIES, "only %d of %d replies ended with the grammar done", complete, N_REPLIES);
    if (status == 0) {
        remove(out_path);
        remove(schema_path);
    }
    free(report);
    free(gbnf);
    free(logits0);
    infer_context_free(c);
    infer_model_free(m);
}
