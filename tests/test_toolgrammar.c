/* test_toolgrammar.c - the grammars that force tool calls
   (infer_tool_call_grammar): in every format, a call as the format writes
   it matches, and the reply parser (toolcall.c) reads it back as that call;
   calls with wrong arguments, of an unknown tool, of another tool than the
   one named, or two where one is asked, do not match; bad tool lists are
   refused with a message; and models never trained for tools (../shared's)
   give valid calls when the call is forced. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather now\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"},"
    " \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}},"
    " \"required\": [\"a\", \"b\"], \"additionalProperties\": false}}},"
    " {\"name\": \"now\"}]";

static infer__grules *compile(infer_tool_format f, const char *name, int parallel) {
    infer_error err;
    int n;
    char *g;
    infer__grules *r;
    memset(&err, 0, sizeof err);
    n = sc_tool_call_grammar(f, tools, name, parallel, NULL, 0, &err);
    cr_assert_geq(n, 0, "%s: %s", infer_tool_format_name(f), err.msg);
    g = (char *)malloc((size_t)n + 1);
    cr_assert_not_null(g);
    cr_assert_eq(sc_tool_call_grammar(f, tools, name, parallel, g, (size_t)n + 1, &err), n);
    r = infer__gbnf_compile(g, "root", &err);
    cr_assert_not_null(r, "%s: grammar refused: %s\n%s", infer_tool_format_name(f), err.msg, g);
    free(g);
    return r;
}

static int match(const infer__grules *g, const char *text) { return infer__grules_match(g, text, strlen(text)); }

/* text parses as calls of these names with these arguments (compact JSON) */
static void parses_as(infer_tool_format f, const char *text, int n, const char *const *names,
                      const char *const *args) {
    infer_error err;
    infer_output_result res;
    infer_output_parser *p = infer_output_parser_new(f, INFER_REASONING_NONE, &err);
    int i;
    cr_assert_not_null(p);
    cr_assert_eq(infer_output_parser_push(p, text, strlen(text), NULL, &err), INFER_OK);
    cr_assert_eq(infer_output_parser_finish(p, NULL, &res, &err), INFER_OK);
    cr_expect_eq(res.n_calls, n, "%s: %d calls in %s", infer_tool_format_name(f), res.n_calls, text);
    cr_expect_eq(res.n_malformed, 0, "%s: malformed %s", infer_tool_format_name(f), text);
    cr_expect_str_empty(res.content, "%s: content '%s'", infer_tool_format_name(f), res.content);
    for (i = 0; i < n && i < res.n_calls; i++) {
        cr_expect_str_eq(res.calls[i].name, names[i], "%s", infer_tool_format_name(f));
        cr_expect_str_eq(res.calls[i].arguments, args[i], "%s", infer_tool_format_name(f));
    }
    infer_output_parser_free(p);
}

/* Qwen3.5's XML writes a string as text: minLength and maxLength bound it
   (its characters, '<' left out). */
Test(toolgrammar, xml_string_lengths) {
    static const char bounded[] = "[{\"name\": \"say\", \"parameters\": {\"type\": \"object\", \"properties\": "
                                  "{\"s\": {\"type\": \"string\", \"minLength\": 2, \"maxLength\": 5}}, "
                                  "\"required\": [\"s\"]}}]";
    static const char *const texts[] = {"ab", "abcde", "a", "abcdef", "a<b"};
    static const int ok[] = {1, 1, 0, 0, 0};
    infer_error err;
    char g[4096], text[256];
    int i, n;
    infer__grules *r;
    memset(&err, 0, sizeof err);
    n = sc_tool_call_grammar(INFER_TOOL_FORMAT_QWEN3_XML, bounded, NULL, 0, g, sizeof g, &err);
    cr_assert(n > 0 && n < (int)sizeof g, "%s", err.msg);
    r = infer__gbnf_compile(g, "root", &err);
    cr_assert_not_null(r, "%s\n%s", err.msg, g);
    for (i = 0; i < 5; i++) {
        snprintf(text, sizeof text, "<tool_call>\n<function=say>\n<parameter=s>\n%s\n</parameter>\n</function>\n</tool_call>",
                 texts[i]);
        cr_expect_eq(match(r, text) == 1, ok[i], "%s: %s", texts[i], g);
    }
    infer__grules_free(r);
}

#define DS_CALLS_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define DS_CALLS_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define DS_CALL_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define DS_CALL_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define DS_SEP "<\xEF\xBD\x9Ctool\xE2\x96\x81" "sep\xEF\xBD\x9C>"

/* One call of get_weather and one of add, as each format writes them: %s
   is where the arguments go (W, A below), in a printf format with the
   call written twice for the parallel case. */
typedef struct fmt_case {
    infer_tool_format f;
    const char *one;  /* get_weather alone, arguments %s */
    const char *two;  /* get_weather then add: %s %s (NULL: the format writes one call) */
    const char *bad_name; /* a call of a tool not in the list */
} fmt_case;

static const fmt_case cases[] = {
    {INFER_TOOL_FORMAT_GENERIC, "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": %s}}",
     "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": %s}, {\"name\": \"add\", \"arguments\": %s}]}",
     "{\"tool_call\": {\"name\": \"rm\", \"arguments\": {}}}"},
    {INFER_TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": %s}\n</tool_call>",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": %s}\n</tool_call>\n"
     "<tool_call>\n{\"name\": \"add\", \"arguments\": %s}\n</tool_call>",
     "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"},
    {INFER_TOOL_FORMAT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": %s}", NULL,
     "{\"name\": \"rm\", \"parameters\": {}}"},
    {INFER_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": %s}]",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": %s}, {\"name\": \"add\", \"arguments\": %s}]",
     "[TOOL_CALLS][{\"name\": \"rm\", \"arguments\": {}}]"},
    {INFER_TOOL_FORMAT_PHI4_MINI, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": %s}]<|/tool_call|>",
     "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": %s}, {\"name\": \"add\", \"arguments\": %s}]"
     "<|/tool_call|>",
     "<|tool_call|>[{\"name\": \"rm\", \"arguments\": {}}]<|/tool_call|>"},
    {INFER_TOOL_FORMAT_DEEPSEEK_R1,
     DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "get_weather\n```json\n%s\n```" DS_CALL_END DS_CALLS_END,
     DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "get_weather\n```json\n%s\n```" DS_CALL_END "\n" DS_CALL_BEGIN
     "function" DS_SEP "add\n```json\n%s\n```" DS_CALL_END DS_CALLS_END,
     DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "rm\n```json\n{}\n```" DS_CALL_END DS_CALLS_END},
    {INFER_TOOL_FORMAT_COMMAND_R,
     "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": %s}]<|END_ACTION|>",
     "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": %s}, "
     "{\"tool_call_id\": \"1\", \"tool_name\": \"add\", \"parameters\": %s}]<|END_ACTION|>",
     "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"rm\", \"parameters\": {}}]<|END_ACTION|>"},
    {INFER_TOOL_FORMAT_FUNCTIONARY, "<function=get_weather>%s</function>",
     "<function=get_weather>%s</function><function=add>%s</function>", "<function=rm>{}</function>"},
    {INFER_TOOL_FORMAT_FIREFUNCTION, "functools[{\"name\": \"get_weather\", \"arguments\": %s}]",
     "functools[{\"name\": \"get_weather\", \"arguments\": %s}, {\"name\": \"add\", \"arguments\": %s}]",
     "functools[{\"name\": \"rm\", \"arguments\": {}}]"},
    {INFER_TOOL_FORMAT_NEMOTRON, "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": %s}]</TOOLCALL>",
     "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": %s}, {\"name\": \"add\", \"arguments\": %s}]</TOOLCALL>",
     "<TOOLCALL>[{\"name\": \"rm\", \"arguments\": {}}]</TOOLCALL>"},
    {INFER_TOOL_FORMAT_HARMONY, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>%s<|call|>",
     NULL, "<|channel|>commentary to=functions.rm <|constrain|>json<|message|>{}<|call|>"},
    {INFER_TOOL_FORMAT_APERTUS, "<|tools_prefix|>[{\"get_weather\": %s}]<|tools_suffix|>",
     "<|tools_prefix|>[{\"get_weather\": %s}, {\"add\": %s}]<|tools_suffix|>",
     "<|tools_prefix|>[{\"rm\": {}}]<|tools_suffix|>"},
};

static const char W[] = "{\"city\": \"Paris\", \"unit\": \"c\"}", W_COMPACT[] = "{\"city\":\"Paris\",\"unit\":\"c\"}";
static const char A[] = "{\"a\": 1, \"b\": 2}", A_COMPACT[] = "{\"a\":1,\"b\":2}";
/* arguments the schemas refuse: a number for a string, a missing required
   key, a key additionalProperties false forbids, a value outside the enum */
static const char *const W_BAD[] = {"{\"city\": 3}", "{\"unit\": \"c\"}", "{\"city\": \"Paris\", \"unit\": \"k\"}"};
static const char A_BAD[] = "{\"a\": 1, \"b\": 2, \"c\": 3}";

Test(toolgrammar, every_format_matches_its_calls_and_parses_back) {
    char text[1024];
    size_t i;
    for (i = 0; i < sizeof cases / sizeof *cases; i++) {
        const fmt_case *c = &cases[i];
        const char *name = infer_tool_format_name(c->f);
        infer__grules *one = compile(c->f, NULL, 0), *par = compile(c->f, NULL, 1), *named = compile(c->f, "add", 0);
        const char *names1[] = {"get_weather"}, *args1[] = {W_COMPACT};
        const char *names2[] = {"get_weather", "add"}, *args2[] = {W_COMPACT, A_COMPACT};
        size_t k;
        snprintf(text, sizeof text, c->one, W);
        cr_expect_eq(match(one, text), 1, "%s: refuses %s", name, text);
        cr_expect_eq(match(par, text), 1, "%s (parallel): refuses %s", name, text);
        cr_expect_neq(match(named, text), 1, "%s named add: accepts %s", name, text);
        parses_as(c->f, text, 1, names1, args1);
        for (k = 0; k < sizeof W_BAD / sizeof *W_BAD; k++) {
            snprintf(text, sizeof text, c->one, W_BAD[k]);
            cr_expect_neq(match(one, text), 1, "%s: accepts %s", name, text);
        }
        snprintf(text, sizeof text, "%s trailing", c->one);
        cr_expect_neq(match(one, text), 1, "%s: accepts text after the call", name);
        cr_expect_neq(match(one, c->bad_name), 1, "%s: accepts an unknown tool: %s", name, c->bad_name);
        if (c->two) {
            snprintf(text, sizeof text, c->two, W, A);
            cr_expect_eq(match(par, text), 1, "%s (parallel): refuses %s", name, text);
            cr_expect_neq(match(one, text), 1, "%s: accepts two calls: %s", name, text);
            parses_as(c->f, text, 2, names2, args2);
            snprintf(text, sizeof text, c->two, W, A_BAD);
            cr_expect_neq(match(par, text), 1, "%s (parallel): accepts %s", name, text);
        }
        infer__grules_free(one);
        infer__grules_free(par);
        infer__grules_free(named);
    }
}

/* Qwen3.5's XML and LFM2's pythonic calls: arguments one by one, not a
   JSON object; the parser (given the tools) reads them back */
static void parses_with_tools(infer_tool_format f, const char *text, const char *name, const char *args) {
    infer_error err;
    infer_output_result res;
    infer_output_parser *p = infer_output_parser_new(f, INFER_REASONING_NONE, &err);
    cr_assert_not_null(p);
    cr_assert_eq(infer_output_parser_set_tools(p, tools, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_output_parser_push(p, text, strlen(text), NULL, &err), INFER_OK);
    cr_assert_eq(infer_output_parser_finish(p, NULL, &res, &err), INFER_OK);
    cr_expect_eq(res.n_calls, 1, "%s: %d calls in %s", infer_tool_format_name(f), res.n_calls, text);
    if (res.n_calls == 1) {
        cr_expect_str_eq(res.calls[0].name, name);
        cr_expect_str_eq(res.calls[0].arguments, args, "%s: %s", infer_tool_format_name(f), res.calls[0].arguments);
    }
    infer_output_parser_free(p);
}

Test(toolgrammar, xml_and_pythonic_arguments) {
    static const struct {
        infer_tool_format f;
        const char *ok[4], *bad[6];
    } cs[] = {
        {INFER_TOOL_FORMAT_QWEN3_XML,
         {"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nc\n"
          "</parameter>\n</function>\n</tool_call>",
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
          "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n-2\n</parameter>\n</function>\n"
          "</tool_call>",
          "<tool_call>\n<function=now>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>"},
         {/* a required one missing, a value outside the enum, a number that is not an integer, an unknown tool,
             text after the call, an unknown parameter */
          "<tool_call>\n<function=get_weather>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nk\n"
          "</parameter>\n</function>\n</tool_call>",
          "<tool_call>\n<function=add>\n<parameter=a>\n1.5\n</parameter>\n<parameter=b>\n2\n</parameter>\n</function>\n"
          "</tool_call>",
          "<tool_call>\n<function=rm>\n</function>\n</tool_call>",
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call> x",
          "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n<parameter=c>\n"
          "3\n</parameter>\n</function>\n</tool_call>"}},
        {INFER_TOOL_FORMAT_LFM2,
         {"<|tool_call_start|>[get_weather(city=\"Paris\", unit=\"c\")]<|tool_call_end|>",
          "<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>",
          "<|tool_call_start|>[add(a=1, b=-2)]<|tool_call_end|>", "<|tool_call_start|>[now()]<|tool_call_end|>"},
         {"<|tool_call_start|>[get_weather(unit=\"c\")]<|tool_call_end|>",
          "<|tool_call_start|>[get_weather(city=\"Paris\", unit=\"k\")]<|tool_call_end|>",
          "<|tool_call_start|>[add(a=1.5, b=2)]<|tool_call_end|>", "<|tool_call_start|>[rm()]<|tool_call_end|>",
          "<|tool_call_start|>[now()]<|tool_call_end|> x", "<|tool_call_start|>[add(a=1, b=2, c=3)]<|tool_call_end|>"}},
    };
    static const char *const names[4] = {"get_weather", "get_weather", "add", "now"};
    static const char *const args[2][4] = {
        {"{\"city\":\"Paris\",\"unit\":\"c\"}", "{\"city\":\"Paris\"}", "{\"a\":1,\"b\":-2}", "{\"tz\":\"UTC\"}"},
        {"{\"city\":\"Paris\",\"unit\":\"c\"}", "{\"city\":\"Paris\"}", "{\"a\":1,\"b\":-2}", "{}"}};
    int i, k;
    for (i = 0; i < 2; i++) {
        infer__grules *one = compile(cs[i].f, NULL, 0), *par = compile(cs[i].f, NULL, 1);
        const char *fname = infer_tool_format_name(cs[i].f);
        char two[1024];
        for (k = 0; k < 4; k++) {
            cr_expect_eq(match(one, cs[i].ok[k]), 1, "%s: refuses %s", fname, cs[i].ok[k]);
            parses_with_tools(cs[i].f, cs[i].ok[k], names[k], args[i][k]);
        }
        for (k = 0; k < 6; k++) cr_expect_neq(match(one, cs[i].bad[k]), 1, "%s: accepts %s", fname, cs[i].bad[k]);
        if (cs[i].f == INFER_TOOL_FORMAT_LFM2)
            snprintf(two, sizeof two, "<|tool_call_start|>[get_weather(city=\"Paris\"), add(a=1, b=2)]<|tool_call_end|>");
        else snprintf(two, sizeof two, "%s\n%s", cs[i].ok[1], cs[i].ok[2]);
        cr_expect_eq(match(par, two), 1, "%s (parallel): refuses %s", fname, two);
        cr_expect_neq(match(one, two), 1, "%s: accepts two calls", fname);
        if (cs[i].f == INFER_TOOL_FORMAT_QWEN3_XML) { /* <tool_call> left out, as the lazy trigger <function= starts */
            static const char bare[] = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>";
            cr_expect_eq(match(one, bare), 1, "%s: refuses %s", fname, bare);
            parses_with_tools(cs[i].f, bare, "get_weather", "{\"city\":\"Paris\"}");
        }
        infer__grules_free(one);
        infer__grules_free(par);
    }
}

/* Gemma 4: <|tool_call>call:name{..}<tool_call|>, its values Gemma's own
   (bare keys in the template's sorted order, <|"|> strings), following the
   schema down nested objects and lists; the thinking channel may come
   first; the parser reads each call back as JSON. */
#define G4Q "<|\"|>"
#define G4C(x) "<|tool_call>call:" x "<tool_call|>"
Test(toolgrammar, gemma4_arguments) {
    static const char nested[] =
        "[{\"type\": \"function\", \"function\": {\"name\": \"book\", \"parameters\": {\"type\": \"object\","
        " \"properties\": {\"when\": {\"type\": \"string\"}, \"guests\": {\"type\": \"array\", \"items\": {\"type\":"
        " \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\"}},"
        " \"required\": [\"name\"]}}, \"opts\": {\"type\": \"object\", \"properties\": {\"late\": {\"type\":"
        " \"boolean\"}, \"Room\": {\"type\": [\"integer\", \"null\"]}}}}, \"required\": [\"guests\"]}}}]";
    static const char *const ok[] = {
        G4C("get_weather{city:" G4Q "Paris" G4Q ",unit:" G4Q "c" G4Q "}"), G4C("get_weather{city:" G4Q "Paris" G4Q "}"),
        G4C("add{a:1,b:-2}"), G4C("now{}"),
        "<|channel>thought\nThe user wants Paris; a < b.<channel|>" G4C("get_weather{city:" G4Q "Paris" G4Q "}")};
    static const char *const names[] = {"get_weather", "get_weather", "add", "now", "get_weather"};
    static const char *const args[] = {"{\"city\":\"Paris\",\"unit\":\"c\"}", "{\"city\":\"Paris\"}", "{\"a\":1,\"b\":-2}",
                                       "{}", "{\"city\":\"Paris\"}"};
    static const char *const bad[] = {
        /* a missing required key, a value outside the enum, a number for an
           integer, a key not declared, keys out of the template's order, JSON's
           quotes, an unknown tool, text after the call, a thought with <channel|>'s "<c" */
        G4C("get_weather{unit:" G4Q "c" G4Q "}"), G4C("get_weather{city:" G4Q "Paris" G4Q ",unit:" G4Q "k" G4Q "}"),
        G4C("add{a:1.5,b:2}"), G4C("add{a:1,b:2,c:3}"), G4C("get_weather{unit:" G4Q "c" G4Q ",city:" G4Q "Paris" G4Q "}"),
        G4C("get_weather{city:\"Paris\"}"), G4C("rm{}"), G4C("now{}") " x",
        "<|channel>thought\n<c<channel|>" G4C("now{}")};
    static const char *const nested_ok[] = {
        G4C("book{guests:[{age:31,name:" G4Q "Ann" G4Q "},{name:" G4Q "Bo" G4Q "}],opts:{late:true,Room:null},when:" G4Q
            "9:00" G4Q "}"),
        G4C("book{guests:[]}")};
    static const char *const nested_args[] = {
        "{\"guests\":[{\"age\":31,\"name\":\"Ann\"},{\"name\":\"Bo\"}],\"opts\":{\"late\":true,\"Room\":null},"
        "\"when\":\"9:00\"}",
        "{\"guests\":[]}"};
    static const char *const nested_bad[] = {G4C("book{guests:[{age:31}]}"), G4C("book{guests:[],opts:{late:1}}"),
                                             G4C("book{opts:{}}"), G4C("book{guests:[],opts:{Room:1.5}}"),
                                             G4C("book{guests:[{name:" G4Q "A" G4Q ",age:2}]}")};
    const infer_tool_format G = INFER_TOOL_FORMAT_GEMMA4;
    infer__grules *one = compile(G, NULL, 0), *par = compile(G, NULL, 1), *named = compile(G, "add", 0), *book;
    infer_error err;
    char g[8192];
    size_t i;
    int n;
    for (i = 0; i < sizeof ok / sizeof *ok; i++) {
        cr_expect_eq(match(one, ok[i]), 1, "refuses %s", ok[i]);
        parses_with_tools(G, ok[i], names[i], args[i]);
    }
    for (i = 0; i < sizeof bad / sizeof *bad; i++) cr_expect_neq(match(one, bad[i]), 1, "accepts %s", bad[i]);
    cr_expect_eq(match(par, G4C("now{}") G4C("add{a:1,b:2}")), 1, "parallel: refuses two calls");
    cr_expect_neq(match(one, G4C("now{}") G4C("add{a:1,b:2}")), 1, "accepts two calls");
    cr_expect_eq(match(named, G4C("add{a:1,b:2}")), 1);
    cr_expect_neq(match(named, G4C("now{}")), 1, "named add: accepts now");
    memset(&err, 0, sizeof err);
    n = sc_tool_call_grammar(G, nested, NULL, 0, g, sizeof g, &err);
    cr_assert(n > 0 && n < (int)sizeof g, "%s", err.msg);
    book = infer__gbnf_compile(g, "root", &err);
    cr_assert_not_null(book, "%s\n%s", err.msg, g);
    for (i = 0; i < sizeof nested_ok / sizeof *nested_ok; i++) {
        infer_output_result res;
        infer_output_parser *p = infer_output_parser_new(G, INFER_REASONING_NONE, &err);
        cr_expect_eq(match(book, nested_ok[i]), 1, "refuses %s\n%s", nested_ok[i], g);
        cr_assert_eq(infer_output_parser_push(p, nested_ok[i], strlen(nested_ok[i]), NULL, &err), INFER_OK);
        cr_assert_eq(infer_output_parser_finish(p, NULL, &res, &err), INFER_OK);
        cr_assert_eq(res.n_calls, 1);
        cr_expect_str_eq(res.calls[0].arguments, nested_args[i]);
        infer_output_parser_free(p);
    }
    for (i = 0; i < sizeof nested_bad / sizeof *nested_bad; i++)
        cr_expect_neq(match(book, nested_bad[i]), 1, "accepts %s", nested_bad[i]);
    infer__grules_free(one);
    infer__grules_free(par);
    infer__grules_free(named);
    infer__grules_free(book);
}

/* harmony: the call after an analysis message or alone, its <|call|>
   optional (an end-of-generation token); no other channel before it */
Test(toolgrammar, harmony_after_analysis) {
    static const char *const ok[] = {
        "<|channel|>analysis<|message|>The user wants Paris. a < b.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
        "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 1, \"b\": 2}<|call|>",
        "<|channel|>analysis<|message|><|start|>assistant<|channel|>commentary to=functions.now "
        "<|constrain|>json<|message|>{}"};
    static const char *const bad[] = {
        /* an answer instead, an answer before the call, a token inside the analysis, arguments that fail the
           schema, the recipient without functions., two calls */
        "<|channel|>final<|message|>Hi",
        "<|channel|>final<|message|>Hi<|end|><|start|>assistant<|channel|>commentary to=functions.now "
        "<|constrain|>json<|message|>{}",
        "<|channel|>analysis<|message|>x<|channel|>y<|end|><|start|>assistant<|channel|>commentary to=functions.now "
        "<|constrain|>json<|message|>{}",
        "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 1.5, \"b\": 2}",
        "<|channel|>commentary to=now <|constrain|>json<|message|>{}",
        "<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}<|call|><|start|>assistant"
        "<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}"};
    static const char *const names[] = {"get_weather", "add", "now"};
    static const char *const args[] = {"{\"city\":\"Paris\"}", "{\"a\":1,\"b\":2}", "{}"};
    infer__grules *g = compile(INFER_TOOL_FORMAT_HARMONY, NULL, 1);
    size_t i;
    for (i = 0; i < sizeof ok / sizeof *ok; i++) {
        infer_error err;
        infer_output_result res;
        infer_output_parser *p = infer_output_parser_new(INFER_TOOL_FORMAT_HARMONY, INFER_REASONING_NONE, &err);
        cr_expect_eq(match(g, ok[i]), 1, "refuses %s", ok[i]);
        cr_assert_eq(infer_output_parser_push(p, ok[i], strlen(ok[i]), NULL, &err), INFER_OK);
        cr_assert_eq(infer_output_parser_finish(p, NULL, &res, &err), INFER_OK);
        cr_expect(res.n_calls == 1 && !strcmp(res.calls[0].name, names[i]) && !strcmp(res.calls[0].arguments, args[i]),
                  "%s: %d calls", ok[i], res.n_calls);
        cr_expect_str_empty(res.content);
        infer_output_parser_free(p);
    }
    for (i = 0; i < sizeof bad / sizeof *bad; i++) cr_expect_neq(match(g, bad[i]), 1, "accepts %s", bad[i]);
    cr_assert_str_eq(infer_tool_format_triggers(INFER_TOOL_FORMAT_HARMONY)[0], "<|channel|>commentary to=");
    infer__grules_free(g);
}

Test(toolgrammar, named_tool_only_and_tool_without_parameters) {
    infer__grules *g = compile(INFER_TOOL_FORMAT_HERMES, "add", 0), *now = compile(INFER_TOOL_FORMAT_HERMES, "now", 0);
    cr_expect_eq(match(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>"), 1);
    cr_expect_neq(match(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": 2}}\n</tool_call>"), 1);
    /* a tool without parameters takes any object, and only an object */
    cr_expect_eq(match(now, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"tz\": [1, \"x\"]}}\n</tool_call>"), 1);
    cr_expect_neq(match(now, "<tool_call>\n{\"name\": \"now\", \"arguments\": 3}\n</tool_call>"), 1);
    infer__grules_free(g);
    infer__grules_free(now);
}

static void refused(const char *list, const char *name, const char *want) {
    infer_error err;
    memset(&err, 0, sizeof err);
    cr_expect_eq(sc_tool_call_grammar(INFER_TOOL_FORMAT_HERMES, list, name, 0, NULL, 0, &err), -1, "accepted %s", list);
    cr_expect(strstr(err.msg, want) != NULL, "message '%s' does not say '%s'", err.msg, want);
    cr_expect(strchr(err.msg, '\n') == NULL, "message of more than one line: %s", err.msg);
}

Test(toolgrammar, bad_lists_refused) {
    refused("[{\"name\": ", NULL, "tools");
    refused("{\"name\": \"x\"}", NULL, "must be a list");
    refused("[]", NULL, "no tools");
    refused("[{\"type\": \"function\", \"function\": {\"description\": \"x\"}}]", NULL, "no name");
    refused(tools, "rm", "no tool is named rm");
    refused("[{\"name\": \"x\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#/x\"}}}}]",
            NULL, "$ref");
}

/* ---- forced calls from models never trained for tools ------------------------------ */

#include "testutil.h"
#include "tests/status_calls.h"

/* A tool whose call is bounded (an enum, a one-digit integer): a forced
   call always completes, whatever the model's preferences. */
static const char bounded_tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"set_mode\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"mode\": {\"enum\": [\"calm\", \"alert\", \"angry\"]}, \"level\": {\"type\": \"integer\","
    " \"minimum\": 0, \"maximum\": 9}}, \"required\": [\"mode\", \"level\"], \"additionalProperties\": false}}}]";

Test(toolgrammar, forced_calls_from_the_shared_models_are_valid) {
    static const char *const models[] = {"models/stories260K.gguf", "arch/synth-llama3-f16.gguf",
                                         "arch/synth-qwen3-f16.gguf", "arch/synth-gemma3-f16.gguf",
                                         "arch/synth-phi3-f16.gguf", "arch/synth-smollm3-f16.gguf"};
    size_t i;
    int n;
    char *g;
    infer_error err;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: its models are needed");
    memset(&err, 0, sizeof err);
    n = sc_tool_call_grammar(INFER_TOOL_FORMAT_GENERIC, bounded_tools, NULL, 0, NULL, 0, &err);
    cr_assert_geq(n, 0, "%s", err.msg);
    g = (char *)malloc((size_t)n + 1);
    cr_assert_not_null(g);
    sc_tool_call_grammar(INFER_TOOL_FORMAT_GENERIC, bounded_tools, NULL, 0, g, (size_t)n + 1, &err);
    for (i = 0; i < sizeof models / sizeof *models; i++) {
        char path[1024], text[4096];
        infer_model *m;
        infer_context *c;
        infer_context_params cp = infer_context_default_params();
        infer_request_params p = infer_request_default_params();
        infer_request *r;
        infer_output_parser *parser;
        infer_output_result res;
        tu_shared_path(path, sizeof path, models[i]);
        m = infer_model_load(path, NULL, &err);
        cr_assert(m, "%s: %s", models[i], err.msg);
        cp.n_ctx = 1024;
        c = infer_context_new(m, &cp, &err);
        cr_assert(c, "%s", err.msg);
        p.prompt = "Set the mode with a tool.";
        p.n_predict = 600;
        p.grammar = g;
        p.sampling.temperature = 0.8f;
        p.sampling.seed = 7 + i;
        r = infer_request_start(c, &p, &err);
        cr_assert(r, "%s: %s", models[i], err.msg);
        while (infer_context_step(c, 0) > 0) {}
        cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s: %s", models[i], err.msg);
        infer_request_text(r, 0, text, sizeof text);
        parser = infer_output_parser_new(INFER_TOOL_FORMAT_GENERIC, INFER_REASONING_NONE, &err);
        cr_assert(parser && infer_output_parser_push(parser, text, strlen(text), NULL, &err) == INFER_OK &&
                  infer_output_parser_finish(parser, NULL, &res, &err) == INFER_OK);
        cr_expect(res.n_calls == 1 && res.n_malformed == 0 && !strcmp(res.calls[0].name, "set_mode") &&
                      (strstr(res.calls[0].arguments, "\"mode\":\"calm\"") ||
                       strstr(res.calls[0].arguments, "\"mode\":\"alert\"") ||
                       strstr(res.calls[0].arguments, "\"mode\":\"angry\"")) &&
                      strstr(res.calls[0].arguments, "\"level\":"),
                  "%s: not one valid call: %s", models[i], text);
        infer_output_parser_free(parser);
        infer_request_free(r);
        infer_context_free(c);
        infer_model_free(m);
    }
    free(g);
}
