/* test_toolcall.c - replies split into content, reasoning and tool calls
   (toolcall.c): each format's calls, parallel calls, content around them,
   reasoning, malformed calls kept as content, text that only looks like a
   marker, and format detection from the chat templates in ../shared.
   Every case is parsed whole, a byte at a time and in random pieces: the
   results must be the same, and the deltas put together must be the result. */
#include "infer.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tc_case {
    infer_tool_format fmt;
    infer_reasoning reasoning;
    const char *text;
    const char *content, *reasoning_content;
    int n_calls;
    const char *names[3], *args[3], *ids[3]; /* ids: NULL = a made one */
    int n_malformed;
} tc_case;

typedef struct tc_out {
    char content[4096], reasoning[4096];
    char names[3][128], args[3][1024], ids[3][64];
    int n_calls, n_malformed;
} tc_out;

static void cat(char *dst, size_t size, const char *s, size_t n) {
    size_t l = strlen(dst);
    cr_assert_lt(l + n, size);
    memcpy(dst + l, s, n);
    dst[l + n] = 0;
}

/* A delta's text must never hold a whole marker of the format. */
static void no_marker(infer_tool_format f, const char *s, const char *input) {
    const char *const *t;
    for (t = infer_tool_format_triggers(f); *t; t++)
        if ((*t)[0] != '{') cr_assert_null(strstr(s, *t), "a delta holds %s: [%s] (input %s)", *t, s, input);
}

/* Parses c->text in pieces: step 0 whole, 1 a byte at a time, else random
   pieces of 1..step bytes (seeded). Checks the deltas against the result. */
static void parse(const tc_case *c, int step, unsigned seed, tc_out *o) {
    infer_error err;
    infer_output_parser *p = infer_output_parser_new(c->fmt, c->reasoning, &err);
    infer_output_delta d;
    infer_output_result r;
    size_t n = strlen(c->text), at = 0;
    char dc[4096] = "", dr[4096] = "", da[3][1024] = {"", "", ""};
    int i, seen = 0;
    cr_assert_not_null(p, "%s", err.msg);
    memset(o, 0, sizeof *o);
    srand(seed);
    while (at < n) {
        size_t k = step == 0 ? n : step == 1 ? 1 : 1 + (size_t)rand() % (size_t)step;
        if (k > n - at) k = n - at;
        cr_assert_eq(infer_output_parser_push(p, c->text + at, k, &d, &err), INFER_OK, "%s", err.msg);
        at += k;
        cr_assert_eq(strlen(d.content), d.content_len);
        if (c->n_malformed == 0) no_marker(c->fmt, d.content, c->text);
        cat(dc, sizeof dc, d.content, d.content_len);
        cat(dr, sizeof dr, d.reasoning, d.reasoning_len);
        for (i = 0; i < d.n_calls; i++) {
            cr_assert_lt(d.calls[i].index, 3);
            cr_assert_eq(d.calls[i].index, seen, "calls come in order");
            cr_assert_not_null(d.calls[i].id);
            cr_assert_not_null(d.calls[i].name);
            cat(da[d.calls[i].index], sizeof da[0], d.calls[i].arguments, strlen(d.calls[i].arguments));
            seen++;
        }
    }
    cr_assert_eq(infer_output_parser_finish(p, &d, &r, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_output_parser_push(p, "x", 1, NULL, &err), INFER_ERR_ARG, "push after finish");
    cr_assert_eq(infer_output_parser_in_call(p), 0);
    cat(dc, sizeof dc, d.content, d.content_len);
    cat(dr, sizeof dr, d.reasoning, d.reasoning_len);
    for (i = 0; i < d.n_calls; i++) {
        cr_assert_eq(d.calls[i].index, seen);
        cat(da[d.calls[i].index], sizeof da[0], d.calls[i].arguments, strlen(d.calls[i].arguments));
        seen++;
    }
    cr_assert_str_eq(dc, r.content, "content deltas [%s] vs result [%s] (%s)", dc, r.content, c->text);
    cr_assert_str_eq(dr, r.reasoning_content, "reasoning deltas vs result (%s)", c->text);
    cr_assert_eq(seen, r.n_calls);
    cr_assert_leq(r.n_calls, 3);
    snprintf(o->content, sizeof o->content, "%s", r.content);
    snprintf(o->reasoning, sizeof o->reasoning, "%s", r.reasoning_content);
    o->n_calls = r.n_calls;
    o->n_malformed = r.n_malformed;
    for (i = 0; i < r.n_calls; i++) {
        cr_assert_str_eq(da[i], r.calls[i].arguments);
        snprintf(o->names[i], sizeof o->names[i], "%s", r.calls[i].name);
        snprintf(o->args[i], sizeof o->args[i], "%s", r.calls[i].arguments);
        snprintf(o->ids[i], sizeof o->ids[i], "%s", r.calls[i].id);
    }
    infer_output_parser_free(p);
}

static void check(const tc_case *c) {
    tc_out whole, o;
    int i, step;
    parse(c, 0, 0, &whole);
    cr_assert_str_eq(whole.content, c->content, "content [%s], expected [%s] (%s)", whole.content, c->content,
                     c->text);
    cr_assert_str_eq(whole.reasoning, c->reasoning_content ? c->reasoning_content : "", "reasoning [%s] (%s)",
                     whole.reasoning, c->text);
    cr_assert_eq(whole.n_calls, c->n_calls, "%d calls, expected %d (%s)", whole.n_calls, c->n_calls, c->text);
    cr_assert_eq(whole.n_malformed, c->n_malformed, "%d malformed (%s)", whole.n_malformed, c->text);
    for (i = 0; i < c->n_calls; i++) {
        cr_assert_str_eq(whole.names[i], c->names[i]);
        cr_assert_str_eq(whole.args[i], c->args[i], "args [%s] expected [%s]", whole.args[i], c->args[i]);
        if (c->ids[i]) cr_assert_str_eq(whole.ids[i], c->ids[i]);
        else cr_assert(strlen(whole.ids[i]) >= 9, "id [%s]", whole.ids[i]);
        if (i) cr_assert_str_neq(whole.ids[i], whole.ids[i - 1], "ids differ");
    }
    for (step = 1; step <= 9; step += 2) {
        unsigned seed;
        for (seed = 1; seed <= (step == 1 ? 1u : 6u); seed++) {
            parse(c, step, seed, &o);
            cr_assert_str_eq(o.content, whole.content, "step %d seed %u: [%s] vs [%s]", step, seed, o.content,
                             whole.content);
            cr_assert_str_eq(o.reasoning, whole.reasoning);
            cr_assert_eq(o.n_calls, whole.n_calls, "step %d seed %u", step, seed);
            cr_assert_eq(o.n_malformed, whole.n_malformed);
            for (i = 0; i < o.n_calls; i++) {
                cr_assert_str_eq(o.names[i], whole.names[i]);
                cr_assert_str_eq(o.args[i], whole.args[i]);
                cr_assert_str_eq(o.ids[i], whole.ids[i]);
            }
        }
    }
}

static void check_all(const tc_case *cs, int n) {
    int i;
    for (i = 0; i < n; i++) check(&cs[i]);
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define WEATHER "{\"city\":\"Paris\",\"unit\":\"c\"}"

Test(toolcall, none) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_NONE, 0, "Hello <tool_call>{\"name\":\"x\"}</tool_call> there\n\n", "Hello <tool_call>{\"name\":\"x\"}</tool_call> there", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_NONE, 0, "  \n", "", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_NONE, 0, "", "", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_NONE, 0, "caf\xC3\xA9 \xE2\x82\xAC!", "caf\xC3\xA9 \xE2\x82\xAC!", NULL, 0, {0}, {0}, {0}, 0},
    };
    check_all(cs, N(cs));
}

Test(toolcall, hermes) {
    static const tc_case cs[] = {
        /* one call, arguments normalised */
        {INFER_TOOL_FORMAT_HERMES, 0, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
         "", NULL, 1, {"get_weather"}, {WEATHER}, {0}, 0},
        /* content before, two parallel calls, content after */
        {INFER_TOOL_FORMAT_HERMES, 0, "Let me check.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2.5e3, true, null]}}\n</tool_call>\n<tool_call>\n{\"arguments\": \"{\\\"y\\\": \\\"\\u00e9\\\"}\", \"name\": \"b\"}\n</tool_call>\nDone.",
         "Let me check.\nDone.", NULL, 2, {"a", "b"}, {"{\"x\":[1,2.5e3,true,null]}", "{\"y\":\"\xC3\xA9\"}"}, {0}, 0},
        /* no arguments */
        {INFER_TOOL_FORMAT_HERMES, 0, "<tool_call>{\"name\":\"now\"}</tool_call>", "", NULL, 1, {"now"}, {"{}"}, {0}, 0},
        /* malformed JSON: kept as content */
        {INFER_TOOL_FORMAT_HERMES, 0, "Hi <tool_call>{\"name\": \"a\", \"arguments\": {\"x\": }</tool_call> bye",
         "Hi<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": }</tool_call> bye", NULL, 0, {0}, {0}, {0}, 1},
        /* no name */
        {INFER_TOOL_FORMAT_HERMES, 0, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>", NULL, 0, {0}, {0}, {0}, 1},
        /* marker-like text that is not a marker */
        {INFER_TOOL_FORMAT_HERMES, 0, "a <tool and <tool_cal> and <tool_call", "a <tool and <tool_cal> and <tool_call", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_HERMES, 0, "x < y, <b>bold</b> <tool", "x < y, <b>bold</b> <tool", NULL, 0, {0}, {0}, {0}, 0},
        /* unclosed at the end but complete JSON: a call */
        {INFER_TOOL_FORMAT_HERMES, 0, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n", "", NULL, 1, {"a"}, {"{}"}, {0}, 0},
        /* reasoning (Qwen3), then a call */
        {INFER_TOOL_FORMAT_HERMES, INFER_REASONING_AUTO, "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
         "", "The user wants weather.", 1, {"get_weather"}, {WEATHER}, {0}, 0},
        /* empty reasoning (enable_thinking=false) */
        {INFER_TOOL_FORMAT_HERMES, INFER_REASONING_AUTO, "<think>\n\n</think>\n\nHello!", "Hello!", "", 0, {0}, {0}, {0}, 0},
        /* no <think>: all content */
        {INFER_TOOL_FORMAT_HERMES, INFER_REASONING_AUTO, "Hello <think> x", "Hello <think> x", "", 0, {0}, {0}, {0}, 0},
        /* a call inside reasoning is reasoning */
        {INFER_TOOL_FORMAT_HERMES, INFER_REASONING_AUTO, "<think><tool_call>{\"name\":\"a\"}</tool_call></think>ok", "ok", "<tool_call>{\"name\":\"a\"}</tool_call>", 0, {0}, {0}, {0}, 0},
        /* reasoning never closed */
        {INFER_TOOL_FORMAT_HERMES, INFER_REASONING_AUTO, "<think>hmm, </thi", "", "hmm, </thi", 0, {0}, {0}, {0}, 0},
    };
    check_all(cs, N(cs));
}

Test(toolcall, llama3) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_LLAMA3, 0, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}", "", NULL, 1, {"get_weather"}, {WEATHER}, {0}, 0},
        {INFER_TOOL_FORMAT_LLAMA3, 0, "  { \"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": 1}}", "", NULL, 2, {"a", "b"}, {"{}", "{\"k\":1}"}, {0}, 0},
        /* JSON that is not a call, and JSON later in the text: content */
        {INFER_TOOL_FORMAT_LLAMA3, 0, "{\"answer\": 42}", "{\"answer\": 42}", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_LLAMA3, 0, "Sure: {\"name\": \"a\", \"parameters\": {}}", "Sure: {\"name\": \"a\", \"parameters\": {}}", NULL, 0, {0}, {0}, {0}, 0},
        /* malformed */
        {INFER_TOOL_FORMAT_LLAMA3, 0, "{\"name\": \"a\", \"parameters\": {\"x\": 1", "{\"name\": \"a\", \"parameters\": {\"x\": 1", NULL, 0, {0}, {0}, {0}, 1},
        /* <|python_tag|>: JSON, a builtin, code */
        {INFER_TOOL_FORMAT_LLAMA3, 0, "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"x\"}}", "", NULL, 1, {"a"}, {"{\"q\":\"x\"}"}, {0}, 0},
        {INFER_TOOL_FORMAT_LLAMA3, 0, "<|python_tag|>brave_search.call(query=\"weather in \\\"Paris\\\"\", n=3, safe=True)", "", NULL, 1, {"brave_search"}, {"{\"query\":\"weather in \\\"Paris\\\"\",\"n\":3,\"safe\":true}"}, {0}, 0},
        {INFER_TOOL_FORMAT_LLAMA3, 0, "Running it.<|python_tag|>print(1 + 1)\n", "Running it.", NULL, 1, {"python"}, {"{\"code\":\"print(1 + 1)\"}"}, {0}, 0},
        {INFER_TOOL_FORMAT_LLAMA3, 0, "<|python_ta", "<|python_ta", NULL, 0, {0}, {0}, {0}, 0},
    };
    check_all(cs, N(cs));
}

Test(toolcall, mistral) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_MISTRAL, 0, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}, \"id\": \"abcDEF123\"}, {\"name\": \"b\", \"arguments\": {}}]",
         "", NULL, 2, {"get_weather", "b"}, {WEATHER, "{}"}, {"abcDEF123", NULL}, 0},
        {INFER_TOOL_FORMAT_MISTRAL, 0, "I'll look.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"unit\": \"c\"}[TOOL_CALLS]b[CALL_ID]x1y2z3w4v[ARGS]{}",
         "I'll look.", NULL, 2, {"get_weather", "b"}, {WEATHER, "{}"}, {NULL, "x1y2z3w4v"}, 0},
        {INFER_TOOL_FORMAT_MISTRAL, 0, "[TOOL_CALLS]a[ARGS]{\"x\": }", "[TOOL_CALLS]a[ARGS]{\"x\": }", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_MISTRAL, 0, "[TOOL_CALL] is not [TOOL_", "[TOOL_CALL] is not [TOOL_", NULL, 0, {0}, {0}, {0}, 0},
    };
    check_all(cs, N(cs));
}

Test(toolcall, phi4_mini) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_PHI4_MINI, 0, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}, {\"name\": \"b\", \"parameters\": {\"k\": \"v\"}}]<|/tool_call|>",
         "", NULL, 2, {"get_weather", "b"}, {WEATHER, "{\"k\":\"v\"}"}, {0}, 0},
        {INFER_TOOL_FORMAT_PHI4_MINI, 0, "ok <|tool_call|>{\"name\": \"a\", \"arguments\": {}}<|/tool_call|>", "ok", NULL, 1, {"a"}, {"{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_PHI4_MINI, 0, "<|tool_call|>[{\"name\": 1}]<|/tool_call|>", "<|tool_call|>[{\"name\": 1}]<|/tool_call|>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_PHI4_MINI, 0, "<|tool|> <|tool_", "<|tool|> <|tool_", NULL, 0, {0}, {0}, {0}, 0},
    };
    check_all(cs, N(cs));
}

#define DS_CALLS "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define DS_CALLS_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define DS_CALL "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define DS_CALL_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define DS_SEP "<\xEF\xBD\x9Ctool\xE2\x96\x81" "sep\xEF\xBD\x9C>"

Test(toolcall, deepseek_r1) {
    static const tc_case cs[] = {
        /* the prompt opened <think> */
        {INFER_TOOL_FORMAT_DEEPSEEK_R1, INFER_REASONING_OPEN, "Okay, weather.\n</think>\n\n" DS_CALLS DS_CALL "function" DS_SEP "get_weather\n```json\n{\"city\": \"Paris\", \"unit\": \"c\"}\n```" DS_CALL_END DS_CALL "function" DS_SEP "b\n```json\n{}\n```" DS_CALL_END DS_CALLS_END,
         "", "Okay, weather.", 2, {"get_weather", "b"}, {WEATHER, "{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_DEEPSEEK_R1, INFER_REASONING_OPEN, "<think>\nhmm\n</think>Hi " DS_CALL "function" DS_SEP "a\n```json\n{\"q\": 1}\n```" DS_CALL_END,
         "Hi", "hmm", 1, {"a"}, {"{\"q\":1}"}, {0}, 0},
        {INFER_TOOL_FORMAT_DEEPSEEK_R1, INFER_REASONING_OPEN, "x</think>" DS_CALLS DS_CALL "function" DS_SEP "a\n```json\n{\"q\": \n```" DS_CALL_END DS_CALLS_END,
         DS_CALLS DS_CALL "function" DS_SEP "a\n```json\n{\"q\": \n```" DS_CALL_END DS_CALLS_END, "x", 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_DEEPSEEK_R1, 0, "<\xEF\xBD\x9Ctool and <\xEF\xBD\x9C", "<\xEF\xBD\x9Ctool and <\xEF\xBD\x9C", NULL, 0, {0}, {0}, {0}, 0},
    };
    check_all(cs, N(cs));
}

Test(toolcall, command_r) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_COMMAND_R, INFER_REASONING_AUTO, "<|START_THINKING|>I will look up the weather.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"b\", \"parameters\": {}}\n]<|END_ACTION|>",
         "", "I will look up the weather.", 2, {"get_weather", "b"}, {WEATHER, "{}"}, {"0", "1"}, 0},
        {INFER_TOOL_FORMAT_COMMAND_R, INFER_REASONING_AUTO, "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>", "It is sunny.", "", 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_COMMAND_R, 0, "<|START_ACTION|>[{\"tool_name\": \"a\"}, {\"x\": 1}]<|END_ACTION|>", "<|START_ACTION|>[{\"tool_name\": \"a\"}, {\"x\": 1}]<|END_ACTION|>", NULL, 0, {0}, {0}, {0}, 1},
    };
    check_all(cs, N(cs));
}

Test(toolcall, functionary_firefunction_generic) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_FUNCTIONARY, 0, "Checking.<function=get_weather>{\"city\": \"Paris\", \"unit\": \"c\"}</function><function=now></function>",
         "Checking.", NULL, 2, {"get_weather", "now"}, {WEATHER, "{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_FUNCTIONARY, 0, "<function=a b>{}</function>", "<function=a b>{}</function>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_FIREFUNCTION, 0, "functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}, {\"name\": \"b\", \"arguments\": {}}]",
         "", NULL, 2, {"get_weather", "b"}, {WEATHER, "{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_FIREFUNCTION, 0, "functools are nice", "functools are nice", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_GENERIC, 0, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}, \"id\": \"c1\"}]}",
         "", NULL, 1, {"get_weather"}, {WEATHER}, {"c1"}, 0},
        {INFER_TOOL_FORMAT_GENERIC, 0, "{\"tool_call\": {\"name\": \"a\", \"arguments\": {}}}", "", NULL, 1, {"a"}, {"{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_GENERIC, 0, "{\"response\": \"Hello there\"}", "Hello there", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_GENERIC, 0, "Plain text {\"a\": 1}", "Plain text {\"a\": 1}", NULL, 0, {0}, {0}, {0}, 0},
    };
    check_all(cs, N(cs));
}

Test(toolcall, nemotron_apertus) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_NEMOTRON, 0, "Checking.\n<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}, {\"name\": \"b\", \"arguments\": {}}]</TOOLCALL>",
         "Checking.", NULL, 2, {"get_weather", "b"}, {WEATHER, "{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_NEMOTRON, 0, "<TOOLCALL>[{\"name\": \"a\", ]</TOOLCALL>", "<TOOLCALL>[{\"name\": \"a\", ]</TOOLCALL>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_APERTUS, 0, "<|tools_prefix|>[{\"get_weather\": {\"city\": \"Paris\", \"unit\": \"c\"}}, {\"b\": {}}]<|tools_suffix|>",
         "", NULL, 2, {"get_weather", "b"}, {WEATHER, "{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_APERTUS, 0, "<|tools_prefix|>[{\"a\": {}, \"b\": {}}]<|tools_suffix|>", "<|tools_prefix|>[{\"a\": {}, \"b\": {}}]<|tools_suffix|>", NULL, 0, {0}, {0}, {0}, 1},
    };
    check_all(cs, N(cs));
}

/* Qwen3.5's XML calls (values JSON where they parse, else text) and
   LFM2's pythonic ones; Granite 4.0's <tool_call> is Hermes's. */
Test(toolcall, qwen35_lfm2_granite) {
    static const tc_case cs[] = {
        {INFER_TOOL_FORMAT_QWEN3_XML, 0,
         "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
         "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
         "Let me check.", NULL, 1, {"get_weather"}, {WEATHER}, {0}, 0},
        /* two calls, JSON values, a value of several lines, no <tool_call> */
        {INFER_TOOL_FORMAT_QWEN3_XML, 0,
         "<tool_call>\n<function=a>\n<parameter=n>\n3\n</parameter>\n<parameter=xs>\n[1, true]\n</parameter>\n"
         "</function>\n</tool_call>\n<function=b>\n<parameter=text>\nline 1\nline 2\n</parameter>\n</function>",
         "", NULL, 2, {"a", "b"}, {"{\"n\":3,\"xs\":[1,true]}", "{\"text\":\"line 1\\nline 2\"}"}, {0}, 0},
        {INFER_TOOL_FORMAT_QWEN3_XML, 0, "<tool_call>\n<function=ping>\n</function>\n</tool_call>", "", NULL, 1,
         {"ping"}, {"{}"}, {0}, 0},
        {INFER_TOOL_FORMAT_QWEN3_XML, INFER_REASONING_OPEN,
         "Think.</think>\n\n<tool_call>\n<function=a>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>", "",
         "Think.", 1, {"a"}, {"{\"k\":\"v\"}"}, {0}, 0},
        /* malformed: no name, text before the first parameter */
        {INFER_TOOL_FORMAT_QWEN3_XML, 0, "<tool_call>\n<function=>\n</function>\n</tool_call>",
         "<tool_call>\n<function=>\n</function>\n</tool_call>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_QWEN3_XML, 0, "<tool_call>\n<function=a>\nhello\n</function>\n</tool_call>",
         "<tool_call>\n<function=a>\nhello\n</function>\n</tool_call>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_LFM2, 0,
         "Checking.<|tool_call_start|>[get_weather(city=\"Paris\", unit='c')]<|tool_call_end|>Done.",
         "Checking.Done.", NULL, 1, {"get_weather"}, {WEATHER}, {0}, 0},
        {INFER_TOOL_FORMAT_LFM2, 0,
         "<|tool_call_start|>[a(n=-1.5, ok=True, none=None, xs=[1, 'two'], d={'k': False}), b()]<|tool_call_end|>", "",
         NULL, 2, {"a", "b"}, {"{\"n\":-1.5,\"ok\":true,\"none\":null,\"xs\":[1,\"two\"],\"d\":{\"k\":false}}", "{}"},
         {0}, 0},
        {INFER_TOOL_FORMAT_LFM2, 0,
         "<|tool_call_start|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}]"
         "<|tool_call_end|>",
         "", NULL, 1, {"get_weather"}, {WEATHER}, {0}, 0},
        {INFER_TOOL_FORMAT_LFM2, 0, "<|tool_call_start|>[a(x=)]<|tool_call_end|>",
         "<|tool_call_start|>[a(x=)]<|tool_call_end|>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_LFM2, 0, "<|tool_call_start|>[a(x='unclosed)]<|tool_call_end|>",
         "<|tool_call_start|>[a(x='unclosed)]<|tool_call_end|>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_HERMES, 0,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
         "", NULL, 1, {"get_weather"}, {WEATHER}, {0}, 0},
    };
    check_all(cs, N(cs));
}

/* Every split of reply in two pieces streams deltas that add up to the
   whole reply's parse, which is content, reasoning and two get_weather
   calls with the arguments args0 and args1. */
static void check_splits(infer_tool_format f, const char *reply, const char *content, const char *reasoning,
                         const char *args0, const char *args1) {
    const char *const args[2] = {args0, args1};
    size_t n = strlen(reply), k;
    for (k = 0; k <= n; k++) {
        infer_error err;
        infer_output_parser *p = infer_output_parser_new(f, 0, &err);
        infer_output_delta d;
        infer_output_result r;
        char c[256] = "", re[256] = "", a[2][64] = {"", ""};
        int piece, i, seen = 0;
        for (piece = 0; piece < 3; piece++) {
            if (piece < 2)
                cr_assert_eq(infer_output_parser_push(p, reply + (piece ? k : 0), piece ? n - k : k, &d, &err), INFER_OK);
            else cr_assert_eq(infer_output_parser_finish(p, &d, &r, &err), INFER_OK);
            cat(c, sizeof c, d.content, d.content_len);
            cat(re, sizeof re, d.reasoning, d.reasoning_len);
            for (i = 0; i < d.n_calls; i++, seen++) {
                cr_assert_eq(d.calls[i].index, seen);
                cr_assert_lt(seen, 2);
                cat(a[seen], sizeof a[0], d.calls[i].arguments, strlen(d.calls[i].arguments));
            }
        }
        cr_assert_str_eq(c, content, "split at %zu: content [%s]", k, c);
        cr_assert_str_eq(r.content, c);
        cr_assert_str_eq(re, reasoning, "split at %zu: reasoning [%s]", k, re);
        cr_assert_str_eq(r.reasoning_content, re);
        cr_assert_eq(r.n_calls, 2, "split at %zu", k);
        cr_assert_eq(seen, 2);
        for (i = 0; i < 2; i++) {
            cr_assert_str_eq(r.calls[i].name, "get_weather");
            cr_assert_str_eq(r.calls[i].arguments, args[i], "split at %zu: call %d [%s]", k, i, r.calls[i].arguments);
            cr_assert_str_eq(a[i], r.calls[i].arguments);
        }
        cr_assert_str_neq(r.calls[0].id, r.calls[1].id);
        infer_output_parser_free(p);
    }
}

/* gpt-oss's harmony: channels, recipients, several calls, and what a
   model may write wrong (a header cut, arguments that are not JSON, a
   channel not known, a message left without its end). */
#define HM_CALL(name) "<|channel|>commentary to=functions." name " <|constrain|>json<|message|>"
#define HM_NEXT "<|end|><|start|>assistant"
Test(toolcall, harmony) {
    const infer_tool_format H = INFER_TOOL_FORMAT_HARMONY;
    static const tc_case cs[] = {
        /* reasoning then the answer */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>",
         "Hello! How can I help?", "User greets. Reply.", 0, {0}, {0}, {0}, 0},
        /* reasoning then a call; <|call|> not written (it ends the generation) */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>analysis<|message|>Need the weather.\n" HM_NEXT HM_CALL("get_weather") "{\"city\": \"Paris\", \"unit\": \"c\"}",
         "", "Need the weather.", 1, {"get_weather"}, {WEATHER}, {0}, 0},
        /* the recipient after the role, before <|channel|> */
        {INFER_TOOL_FORMAT_HARMONY, 0, " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Paris\",\"unit\":\"c\"}<|call|>",
         "", NULL, 1, {"get_weather"}, {WEATHER}, {0}, 0},
        /* as gpt-oss's template writes an earlier call: "json" without <|constrain|> */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>" WEATHER "<|call|>",
         "", "Call it.", 1, {"get_weather"}, {WEATHER}, {0}, 0},
        /* a preamble (commentary to no one), two calls, the answer */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant" HM_CALL("get_weather")
         "{\"city\":\"Paris\"}<|call|><|start|>assistant" HM_CALL("now") "<|call|><|start|>assistant<|channel|>final<|message|> Done. <|return|>",
         "Checking both.\n\nDone.", NULL, 2, {"get_weather", "now"}, {"{\"city\":\"Paris\"}", "{}"}, {0}, 0},
        /* arguments that are not JSON: content, header and all */
        {INFER_TOOL_FORMAT_HARMONY, 0, HM_CALL("f") "{\"a\": <|call|>", HM_CALL("f") "{\"a\":", NULL, 0, {0}, {0}, {0}, 1},
        /* a recipient that names nothing */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>commentary to=functions. <|constrain|>json<|message|>{}<|call|>",
         "<|channel|>commentary to=functions. <|constrain|>json<|message|>{}", NULL, 0, {0}, {0}, {0}, 1},
        /* a header the reply's end cut */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|chan", "", "Think.", 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>analysis", "", "", 0, {0}, {0}, {0}, 0},
        /* a channel not known is content; text without a header too */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>weird<|message|>Hi<|end|>", "Hi", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_HARMONY, 0, "Just text, caf\xC3\xA9.", "Just text, caf\xC3\xA9.", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_HARMONY, 0, "", "", NULL, 0, {0}, {0}, {0}, 0},
        /* two reasoning messages; a message left without <|end|> */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>analysis<|message|>B<|channel|>final<|message|>C",
         "C", "A\n\nB", 0, {0}, {0}, {0}, 0},
        /* a message written as another role's (a made-up tool result) is dropped */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|channel|>final<|message|>X<|end|><|start|>functions.f to=assistant<|channel|>commentary<|message|>{\"r\":1}<|end|>",
         "X", NULL, 0, {0}, {0}, {0}, 0},
        /* a stray end, and an empty message */
        {INFER_TOOL_FORMAT_HARMONY, 0, "<|end|><|start|>assistant<|channel|>final<|message|><|end|><|start|>assistant<|channel|>final<|message|>Y",
         "Y", NULL, 0, {0}, {0}, {0}, 0},
    };
    static const char reply[] = "<|channel|>analysis<|message|>Two cities.<|end|><|start|>assistant<|channel|>commentary"
                                "<|message|>Looking up.<|end|><|start|>assistant" HM_CALL("get_weather") "{\"city\":\"Paris\"}"
                                "<|call|><|start|>assistant" HM_CALL("get_weather") "{\"city\":\"Rome\"}<|call|>";
    size_t n = sizeof reply - 1;
    int reasoning;
    check_all(cs, N(cs));
    check_splits(H, reply, "Looking up.", "Two cities.", "{\"city\":\"Paris\"}", "{\"city\":\"Rome\"}");
    /* analysis is reasoning whatever the reasoning mode says */
    for (reasoning = 0; reasoning <= 2; reasoning++) {
        infer_error err;
        infer_output_parser *p = infer_output_parser_new(H, (infer_reasoning)reasoning, &err);
        infer_output_result r;
        cr_assert_eq(infer_output_parser_push(p, reply, n, NULL, &err), INFER_OK);
        cr_assert_eq(infer_output_parser_finish(p, NULL, &r, &err), INFER_OK);
        cr_assert_str_eq(r.reasoning_content, "Two cities.");
        infer_output_parser_free(p);
    }
}

/* In a call (held back) from its header to its end; a call the reply's
   cut ended is dropped, one its own end ended is read as far as it goes. */
Test(toolcall, harmony_in_call_and_cut) {
    static const char reply[] = "<|channel|>final<|message|>Sure.<|end|><|start|>assistant" HM_CALL("f") "{\"a\":1}";
    int cut;
    for (cut = 0; cut < 2; cut++) {
        infer_error err;
        infer_output_parser *p = infer_output_parser_new(INFER_TOOL_FORMAT_HARMONY, 0, &err);
        infer_output_delta d;
        infer_output_result r;
        cr_assert_eq(infer_output_parser_push(p, reply, sizeof reply - 1, &d, &err), INFER_OK);
        cr_assert_str_eq(d.content, "Sure.");
        cr_assert_eq(infer_output_parser_in_call(p), 1);
        if (cut) infer_output_parser_cut(p);
        cr_assert_eq(infer_output_parser_finish(p, &d, &r, &err), INFER_OK);
        cr_assert_eq(r.n_calls, cut ? 0 : 1, "cut %d: %d calls", cut, r.n_calls);
        cr_assert_str_eq(r.content, "Sure.");
        cr_assert_eq(r.n_malformed, 0);
        if (!cut) cr_assert_str_eq(r.calls[0].arguments, "{\"a\":1}");
        infer_output_parser_free(p);
    }
}

/* Gemma 4: <|tool_call>call:name{..}<tool_call|> with Gemma's values
   (bare keys, <|"|> strings, nested objects and lists) as JSON, its
   thinking channel as reasoning (whatever the mode), bad calls as text. */
#define G4Q "<|\"|>"
#define G4_CALL(x) "<|tool_call>call:" x "<tool_call|>"
Test(toolcall, gemma4) {
    const infer_tool_format G = INFER_TOOL_FORMAT_GEMMA4;
    static const tc_case cs[] = {
        /* as Gemma 4's template writes a call (keys sorted, no blanks) */
        {INFER_TOOL_FORMAT_GEMMA4, 0, G4_CALL("get_weather{city:" G4Q "Paris" G4Q ",unit:" G4Q "c" G4Q "}"), "", NULL, 1,
         {"get_weather"}, {WEATHER}, {0}, 0},
        /* thinking, then nested values: objects, lists, numbers, booleans, null */
        {INFER_TOOL_FORMAT_GEMMA4, 0,
         "<|channel>thought\nThe user wants a booking.<channel|>" G4_CALL(
             "book{guests:[{age:31,name:" G4Q "Ann \"A\"" G4Q "},{age:-2.5e1,name:" G4Q "Bo, {x}" G4Q
             "}],opts:{late:true,pets:false,room:null},when:" G4Q "a:b" G4Q "}"),
         "", "The user wants a booking.", 1, {"book"},
         {"{\"guests\":[{\"age\":31,\"name\":\"Ann \\\"A\\\"\"},{\"age\":-2.5e1,\"name\":\"Bo, {x}\"}],"
          "\"opts\":{\"late\":true,\"pets\":false,\"room\":null},\"when\":\"a:b\"}"},
         {0}, 0},
        /* content, two calls, blanks and a quoted key, no arguments, None */
        {INFER_TOOL_FORMAT_GEMMA4, 0,
         "Checking both.\n" G4_CALL("get_weather{ city : " G4Q "Paris" G4Q " , }") G4_CALL("now{}")
             G4_CALL("f{" G4Q "k k" G4Q ":None,l:[ ]}"),
         "Checking both.", NULL, 3, {"get_weather", "now", "f"}, {"{\"city\":\"Paris\"}", "{}", "{\"k k\":null,\"l\":[]}"},
         {0}, 0},
        /* an answer after the (empty) thinking the prompt closed; a stray <channel|> */
        {INFER_TOOL_FORMAT_GEMMA4, 0, "Hello! How can I help?<channel|>", "Hello! How can I help?", NULL, 0, {0}, {0}, {0},
         0},
        /* thinking later in the reply, and an empty channel */
        {INFER_TOOL_FORMAT_GEMMA4, 0, "<|channel><channel|>A<|channel>thought\nB<channel|>C", "AC", "B", 0, {0}, {0}, {0},
         0},
        {INFER_TOOL_FORMAT_GEMMA4, 0, "<|channel>thought\nA<channel|>x<|channel>thought B<channel|>", "x", "A\n\nB", 0,
         {0}, {0}, {0}, 0},
        /* bad calls are their text: an unquoted string, a missing value, no
           call:, a string left open, text after the object */
        {INFER_TOOL_FORMAT_GEMMA4, 0, G4_CALL("f{a:Paris}"), G4_CALL("f{a:Paris}"), NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_GEMMA4, 0, "x " G4_CALL("f{a:}") " y", "x" G4_CALL("f{a:}") " y", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_GEMMA4, 0, "<|tool_call>f{}<tool_call|>", "<|tool_call>f{}<tool_call|>", NULL, 0, {0}, {0}, {0}, 1},
        {INFER_TOOL_FORMAT_GEMMA4, 0, G4_CALL("f{a:" G4Q "open}"), G4_CALL("f{a:" G4Q "open}"), NULL, 0, {0},
         {0}, {0}, 1},
        {INFER_TOOL_FORMAT_GEMMA4, 0, G4_CALL("f{a:1} junk"), G4_CALL("f{a:1} junk"), NULL, 0, {0}, {0}, {0}, 1},
        /* a call its own end ended (no <tool_call|>), thinking left open */
        {INFER_TOOL_FORMAT_GEMMA4, 0, "<|tool_call>call:f{a:1}", "", NULL, 1, {"f"}, {"{\"a\":1}"}, {0}, 0},
        {INFER_TOOL_FORMAT_GEMMA4, 0, "<|channel>thought\nStill thinking", "", "Still thinking", 0, {0}, {0}, {0}, 0},
        /* text that only looks like a marker */
        {INFER_TOOL_FORMAT_GEMMA4, 0, "a <|tool_ca b <channel c", "a <|tool_ca b <channel c", NULL, 0, {0}, {0}, {0}, 0},
        {INFER_TOOL_FORMAT_GEMMA4, 0, "", "", NULL, 0, {0}, {0}, {0}, 0},
    };
    static const char reply[] = "<|channel>thought\nTwo cities.<channel|>Looking up." G4_CALL(
        "get_weather{city:" G4Q "Paris" G4Q "}") G4_CALL("get_weather{city:" G4Q "Rome" G4Q ",days:[1,2]}");
    int reasoning;
    check_all(cs, N(cs));
    check_splits(G, reply, "Looking up.", "Two cities.", "{\"city\":\"Paris\"}", "{\"city\":\"Rome\",\"days\":[1,2]}");
    /* the thinking channel is reasoning whatever the reasoning mode says;
       a call the reply's cut ended is dropped */
    for (reasoning = 0; reasoning <= 2; reasoning++) {
        infer_error err;
        infer_output_parser *p = infer_output_parser_new(G, (infer_reasoning)reasoning, &err);
        infer_output_result r;
        const char *text = reasoning == 2 ? reply + 17 : reply; /* OPEN: the prompt wrote <|channel>thought */
        cr_assert_eq(infer_output_parser_push(p, text, strlen(text), NULL, &err), INFER_OK);
        cr_assert_eq(infer_output_parser_push(p, "<|tool_call>call:f{a:", 21, NULL, &err), INFER_OK);
        cr_assert_eq(infer_output_parser_in_call(p), 1);
        infer_output_parser_cut(p);
        cr_assert_eq(infer_output_parser_finish(p, NULL, &r, &err), INFER_OK);
        cr_assert_str_eq(r.reasoning_content, "Two cities.", "mode %d: [%s]", reasoning, r.reasoning_content);
        cr_assert_str_eq(r.content, "Looking up.");
        cr_assert_eq(r.n_calls, 2);
        infer_output_parser_free(p);
    }
}

/* reply parsed whole in format f, given tools (NULL: none): its one call's arguments must be want */
static void one_call_args(infer_tool_format f, const char *tools, const char *reply, const char *want) {
    infer_error err;
    infer_output_result r;
    infer_output_parser *p = infer_output_parser_new(f, 0, &err);
    cr_assert_not_null(p, "%s", err.msg);
    if (tools) cr_assert_eq(infer_output_parser_set_tools(p, tools, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_output_parser_push(p, reply, strlen(reply), NULL, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_output_parser_finish(p, NULL, &r, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(r.n_calls, 1);
    cr_assert_str_eq(r.calls[0].arguments, want, "%s", r.calls[0].arguments);
    infer_output_parser_free(p);
}

/* With the tools given, a parameter declared a string keeps its text. */
Test(toolcall, qwen35_string_parameters) {
    static const char tools[] = "[{\"type\": \"function\", \"function\": {\"name\": \"zip\", \"parameters\": {\"type\": "
                                "\"object\", \"properties\": {\"code\": {\"type\": \"string\"}, \"n\": {\"type\": "
                                "\"integer\"}}}}}]";
    static const char reply[] =
        "<tool_call>\n<function=zip>\n<parameter=code>\n01234\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
        "</function>\n</tool_call>";
    static const char reply2[] = "<function=zip>\n<parameter=code>\n42\n</parameter>\n</function>";
    infer_error err;
    infer_output_parser *p = infer_output_parser_new(INFER_TOOL_FORMAT_QWEN3_XML, 0, &err);
    /* 01234 is not JSON (a leading zero): text either way; 7 is JSON */
    one_call_args(INFER_TOOL_FORMAT_QWEN3_XML, NULL, reply, "{\"code\":\"01234\",\"n\":7}");
    one_call_args(INFER_TOOL_FORMAT_QWEN3_XML, tools, reply, "{\"code\":\"01234\",\"n\":7}");
    /* 42 is JSON, but code is declared a string */
    one_call_args(INFER_TOOL_FORMAT_QWEN3_XML, NULL, reply2, "{\"code\":42}");
    one_call_args(INFER_TOOL_FORMAT_QWEN3_XML, tools, reply2, "{\"code\":\"42\"}");
    /* a tool without parameters: its arguments are JSON where they parse */
    one_call_args(INFER_TOOL_FORMAT_QWEN3_XML, "[{\"name\": \"now\"}]",
                  "<function=now>\n<parameter=tz>\nUTC\n</parameter>\n</function>", "{\"tz\":\"UTC\"}");
    cr_assert_eq(infer_output_parser_set_tools(p, "[1, ", &err), INFER_ERR_ARG);
    cr_assert(strlen(err.msg) > 0 && !strchr(err.msg, '\n'), "%s", err.msg);
    infer_output_parser_free(p);
}

/* A reply that opens a call and is cut short: in_call while it is open. */
Test(toolcall, in_call) {
    infer_error err;
    infer_output_parser *p = infer_output_parser_new(INFER_TOOL_FORMAT_HERMES, 0, &err);
    infer_output_delta d;
    infer_output_result r;
    cr_assert_eq(infer_output_parser_push(p, "Hi <tool", 8, &d, &err), INFER_OK);
    cr_assert_str_eq(d.content, "Hi");
    cr_assert_eq(infer_output_parser_in_call(p), 0);
    cr_assert_eq(infer_output_parser_push(p, "_call>{\"na", 10, &d, &err), INFER_OK);
    cr_assert_eq(d.content_len, 0);
    cr_assert_eq(infer_output_parser_in_call(p), 1);
    cr_assert_eq(infer_output_parser_push(p, "me\": \"f\"}</tool_call>", 21, &d, &err), INFER_OK);
    cr_assert_eq(infer_output_parser_in_call(p), 0);
    cr_assert_eq(d.n_calls, 1);
    cr_assert_str_eq(d.calls[0].name, "f");
    cr_assert_eq(infer_output_parser_finish(p, &d, &r, &err), INFER_OK);
    cr_assert_eq(r.n_calls, 1);
    infer_output_parser_free(p);
    cr_assert_null(infer_output_parser_new((infer_tool_format)99, 0, &err));
    cr_assert_eq(err.code, INFER_ERR_ARG);
}

/* A reply that a token limit cut inside its second call: with
   infer_output_parser_cut the open call is dropped (neither a call nor
   text); without, it is read as far as it goes (a model may end a reply
   where its closing marker would stand). */
Test(toolcall, cut_inside_a_call) {
    static const char reply[] = "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n"
                                "</tool_call>\n<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n";
    int cut;
    for (cut = 0; cut < 2; cut++) {
        infer_error err;
        infer_output_parser *p = infer_output_parser_new(INFER_TOOL_FORMAT_QWEN3_XML, 0, &err);
        infer_output_delta d;
        infer_output_result r;
        cr_assert_eq(infer_output_parser_push(p, reply, sizeof reply - 1, &d, &err), INFER_OK);
        cr_assert_eq(d.n_calls, 1);
        cr_assert_eq(infer_output_parser_in_call(p), 1);
        if (cut) infer_output_parser_cut(p);
        cr_assert_eq(infer_output_parser_finish(p, &d, &r, &err), INFER_OK);
        cr_assert_eq(r.n_calls, cut ? 1 : 2, "cut %d: %d calls", cut, r.n_calls);
        cr_assert_eq(r.content_len, 0, "cut %d: content %s", cut, r.content);
        cr_assert_eq(d.content_len, 0);
        cr_assert_str_eq(r.calls[0].arguments, "{\"a\":1}");
        if (!cut) cr_assert_str_eq(r.calls[1].arguments, "{\"a\":2}");
        infer_output_parser_free(p);
    }
    infer_output_parser_cut(NULL); /* nothing to do */
}

/* Every proper beginning of a marker is held back, not given out, until
   the text shows it is not one; then it comes out whole. */
Test(toolcall, partial_markers_held) {
    int f;
    for (f = 0; f < INFER_TOOL_FORMAT_COUNT; f++) {
        const char *const *t;
        for (t = infer_tool_format_triggers((infer_tool_format)f); *t; t++) {
            size_t k, n = strlen(*t);
            if ((*t)[0] == '{') continue; /* JSON triggers: only at the start of a reply */
            for (k = 1; k < n; k++) {
                infer_error err;
                /* harmony: a whole <|channel|> is a marker of its own */
                if (f == INFER_TOOL_FORMAT_HARMONY && k > 10) break;
                infer_output_parser *p = infer_output_parser_new((infer_tool_format)f, 0, &err);
                infer_output_delta d;
                infer_output_result r;
                char text[64];
                cr_assert_eq(infer_output_parser_push(p, "ok ", 3, &d, &err), INFER_OK);
                cr_assert_str_eq(d.content, "ok");
                cr_assert_eq(infer_output_parser_push(p, *t, k, &d, &err), INFER_OK);
                cr_assert_eq(d.content_len, 0, "%s: %.*s given out: [%s]", infer_tool_format_name((infer_tool_format)f),
                             (int)k, *t, d.content);
                cr_assert_eq(infer_output_parser_push(p, "\x01", 1, &d, &err), INFER_OK);
                snprintf(text, sizeof text, " %.*s\x01", (int)k, *t);
                cr_assert_str_eq(d.content, text);
                cr_assert_eq(infer_output_parser_finish(p, &d, &r, &err), INFER_OK);
                cr_assert_eq(r.n_calls, 0);
                infer_output_parser_free(p);
            }
        }
    }
}

Test(toolcall, triggers_and_names) {
    int f;
    for (f = 0; f < INFER_TOOL_FORMAT_COUNT; f++) {
        cr_assert_not_null(infer_tool_format_triggers((infer_tool_format)f));
        cr_assert_str_neq(infer_tool_format_name((infer_tool_format)f), "unknown");
    }
    cr_assert_str_eq(infer_tool_format_triggers(INFER_TOOL_FORMAT_HERMES)[0], "<tool_call>");
    cr_assert_null(infer_tool_format_triggers(INFER_TOOL_FORMAT_NONE)[0]);
}

static char *read_template(const char *name) {
    char path[1024];
    FILE *f;
    long n;
    char *s;
    snprintf(path, sizeof path, "%s/templates/%s", INFER_SHARED_DIR, name);
    if (!(f = fopen(path, "rb"))) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = (char *)malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* Gemma 4's own template writes an earlier call (nested arguments, keys
   sorted, a float, null as None): the parser reads it back as the same
   arguments, as JSON with the keys in that order. */
Test(toolcall, gemma4_as_its_template_writes_a_call) {
    static const char ctx[] =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Book\"}, {\"role\": \"assistant\", \"content\": \"\","
        " \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"book\", \"arguments\":"
        " {\"when\": \"9:00, {late}\", \"guests\": [{\"name\": \"Ann\", \"age\": 31}], \"opts\": {\"late\": true,"
        " \"x\": null, \"n\": 2.5}}}}]}], \"add_generation_prompt\": false, \"bos_token\": \"<bos>\"}";
    char *t = read_template("google-gemma-4-31B-it.jinja"), *out, *at, *end;
    infer_error err;
    infer_output_parser *p;
    infer_output_result r;
    if (!t) cr_skip_test("no %s/templates/google-gemma-4-31B-it.jinja", INFER_SHARED_DIR);
    cr_assert_eq(infer_tool_format_detect(t), INFER_TOOL_FORMAT_GEMMA4);
    out = infer_jinja_render(t, ctx, NULL, NULL, &err);
    cr_assert_not_null(out, "%s", err.msg);
    cr_assert_not_null(at = strstr(out, "<|tool_call>"), "%s", out);
    cr_assert_not_null(end = strstr(at, "<tool_call|>"), "%s", out);
    end += strlen("<tool_call|>");
    p = infer_output_parser_new(INFER_TOOL_FORMAT_GEMMA4, INFER_REASONING_NONE, &err);
    cr_assert_eq(infer_output_parser_push(p, at, (size_t)(end - at), NULL, &err), INFER_OK);
    cr_assert_eq(infer_output_parser_finish(p, NULL, &r, &err), INFER_OK);
    cr_assert_eq(r.n_calls, 1, "%.*s", (int)(end - at), at);
    cr_assert_str_eq(r.calls[0].name, "book");
    cr_assert_str_eq(r.calls[0].arguments,
                     "{\"guests\":[{\"age\":31,\"name\":\"Ann\"}],\"opts\":{\"late\":true,\"n\":2.5,\"x\":null},"
                     "\"when\":\"9:00, {late}\"}",
                     "%s", r.calls[0].arguments);
    cr_assert_str_empty(r.content);
    infer_output_parser_free(p);
    infer_free(out);
    free(t);
}

Test(toolcall, detect) {
    static const struct {
        const char *file;
        infer_tool_format f;
    } ts[] = {
        {"Qwen-Qwen3-0.6B.jinja", INFER_TOOL_FORMAT_HERMES},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", INFER_TOOL_FORMAT_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", INFER_TOOL_FORMAT_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", INFER_TOOL_FORMAT_LLAMA3},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", INFER_TOOL_FORMAT_MISTRAL},
        {"unsloth-mistral-Devstral-Small-2507.jinja", INFER_TOOL_FORMAT_MISTRAL},
        {"microsoft-Phi-4-mini-instruct.jinja", INFER_TOOL_FORMAT_PHI4_MINI},
        {"llama-cpp-deepseek-r1.jinja", INFER_TOOL_FORMAT_DEEPSEEK_R1},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", INFER_TOOL_FORMAT_DEEPSEEK_R1},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", INFER_TOOL_FORMAT_COMMAND_R},
        {"fireworks-ai-llama-3-firefunction-v2.jinja", INFER_TOOL_FORMAT_FIREFUNCTION},
        {"meetkai-functionary-medium-v3.1.jinja", INFER_TOOL_FORMAT_FUNCTIONARY},
        {"google-gemma-2-2b-it.jinja", INFER_TOOL_FORMAT_NONE},
        {"microsoft-Phi-3.5-mini-instruct.jinja", INFER_TOOL_FORMAT_NONE},
        {"NVIDIA-Nemotron-Nano-v2.jinja", INFER_TOOL_FORMAT_NEMOTRON},
        {"Apertus-8B-Instruct.jinja", INFER_TOOL_FORMAT_APERTUS},
        {"ByteDance-Seed-OSS.jinja", INFER_TOOL_FORMAT_GENERIC},
        {"Qwen3.5-4B.jinja", INFER_TOOL_FORMAT_QWEN3_XML},
        {"LFM2.5-Instruct.jinja", INFER_TOOL_FORMAT_LFM2},
        {"ibm-granite-granite-4.0.jinja", INFER_TOOL_FORMAT_HERMES},
        {"google-gemma-4-31B-it.jinja", INFER_TOOL_FORMAT_GEMMA4},
        {"google-gemma-3-1b-it.jinja", INFER_TOOL_FORMAT_NONE},
    };
    int i, found = 0;
    for (i = 0; i < N(ts); i++) {
        char *t = read_template(ts[i].file);
        if (!t) continue;
        found++;
        cr_expect_eq(infer_tool_format_detect(t), ts[i].f, "%s: %s, expected %s", ts[i].file,
                     infer_tool_format_name(infer_tool_format_detect(t)), infer_tool_format_name(ts[i].f));
        free(t);
    }
    cr_assert_eq(infer_tool_format_detect(NULL), INFER_TOOL_FORMAT_NONE);
    /* a harmony-style template (gpt-oss's own is not in ../shared) */
    cr_assert_eq(infer_tool_format_detect("{%- for m in messages %}{{- '<|start|>' + m.role + '<|channel|>final<|message|>'"
                                          " + m.content + '<|end|>' }}{%- endfor %}{%- if tools %}<tool_call>{%- endif %}"
                                          "{%- if add_generation_prompt %}<|start|>assistant{%- endif %}"),
                 INFER_TOOL_FORMAT_HARMONY);
    cr_assert_eq(infer_tool_format_detect("<|start|>user<|message|>x<|end|>"), INFER_TOOL_FORMAT_NONE); /* no channel */
    cr_assert_str_eq(infer_tool_format_name(INFER_TOOL_FORMAT_HARMONY), "harmony");
    cr_assert_str_eq(infer_tool_format_name(INFER_TOOL_FORMAT_GEMMA4), "gemma4");
    cr_assert_str_eq(infer_tool_format_triggers(INFER_TOOL_FORMAT_GEMMA4)[0], "<|tool_call>");
    if (!found) cr_skip_test("no templates in %s/templates", INFER_SHARED_DIR);
}
