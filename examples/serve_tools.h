/* serve_tools.h - what infer serve's chat endpoint adds for agents: tools,
   tool_choice and parallel_tool_calls read and checked; messages made
   ready for a chat template; the grammar that forces a call; a parsed reply
   (content, reasoning_content, tool_calls) and token logprobs written in
   OpenAI's shapes. */
#ifndef SERVE_TOOLS_H
#define SERVE_TOOLS_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "infer.h"

enum { SERVE_CHOICE_NONE, SERVE_CHOICE_AUTO, SERVE_CHOICE_REQUIRED, SERVE_CHOICE_NAMED };

typedef struct serve_tools {
    char *tools_json;  /* the request's tools, printed (NULL: none given) */
    int n_tools;
    int choice;        /* SERVE_CHOICE_*: "auto" where tools are given and tool_choice is not */
    char name[128];    /* SERVE_CHOICE_NAMED: the function */
    int parallel;      /* parallel_tool_calls (default true) */
} serve_tools;

/* Reads tools, tool_choice and parallel_tool_calls of a chat body. 1, or
   0 with *param and msg saying what is wrong (a 400). */
int serve_tools_read(const cJSON *body, serve_tools *t, const char **param, char *msg, size_t size);
void serve_tools_free(serve_tools *t);
/* Whether the reply may hold calls: tools given and tool_choice not none. */
int serve_tools_active(const serve_tools *t);

/* A copy of messages for a template: each assistant tool call's arguments
   (a JSON string in the API) parsed into an object, as templates expect.
   With describe (a template that renders no tools): the tools and how to
   call one are told in the system message, and an assistant's tool calls
   are written into its content as the generic format's JSON. NULL when
   memory ran out. */
cJSON *serve_tools_messages(const cJSON *messages, const serve_tools *t, int describe);

/* The grammar a reply is sampled under, malloc'd GBNF (NULL with *msg ""
   where none is needed, NULL with msg set on an error): with tool_choice
   required or named from the first token; with auto lazily, from one of
   *triggers (static). */
char *serve_tools_grammar(const serve_tools *t, infer_tool_format f, const char *const **triggers, int *n_triggers,
                          char *msg, size_t size);

/* OpenAI's message.tool_calls array of the parsed calls. */
cJSON *serve_tool_calls_json(const infer_tool_call *calls, int n);
/* Adds a streamed delta's parts to an OpenAI delta object: content,
   reasoning_content, tool_calls ({index, id, type, function: {name,
   arguments}}). Returns whether it added any. */
int serve_delta_fill(cJSON *delta, const infer_output_delta *d);

/* A chat choice's logprobs.content entries of generated tokens [from, to)
   of r (with n_probs): token, logprob, bytes, top_logprobs (top of them). */
cJSON *serve_logprobs_content(const infer_model *m, const infer_request *r, int from, int to, int top);
/* Text completions' logprobs object (tokens, token_logprobs,
   top_logprobs, text_offset) of the same tokens. */
cJSON *serve_logprobs_text(const infer_model *m, const infer_request *r, int from, int to, int top, size_t offset0);

#endif
