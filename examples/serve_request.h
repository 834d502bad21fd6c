/* serve_request.h - infer serve's reading of a request's JSON fields: validation and its one-line errors. */
#ifndef SERVE_REQUEST_H
#define SERVE_REQUEST_H
#include <cjson/cJSON.h>

#include "infer.h"
#include "serve_server.h"
#include "serve_tools.h"

/* A field check that failed: its parameter name and message, for a 400. */
typedef struct bad_field {
    const char *param;
    char msg[300];
    const char *code; /* the error object's code, or NULL */
} bad_field;

/* What one completion asks for, from the body's fields. */
typedef struct completion_call {
    cJSON *body;            /* the parsed body (owned): stop points into it */
    infer_request_params p;
    const char *stop[SERVE_MAX_STOP];
    char *schema;           /* response_format's schema, printed (owned) */
    infer_token *bias_ids;  /* logit_bias (owned) */
    float *bias;
    infer_token *tokens;    /* the prompt's tokens, BOS left to the request (owned): cc.p.prompt_tokens */
    int stream, include_usage, max_tokens;
    int chat;
    serve_tools tools;      /* a chat's tools and tool_choice */
    char *tool_gbnf;        /* the grammar that forces or lazily shapes a call (owned) */
    int parse;              /* the reply is split into content, reasoning and tool calls */
    infer_tool_format parse_fmt;
    infer_reasoning reasoning; /* of the parser */
    int logprobs, top_logprobs;
    int n;                  /* replies (the API's n) */
    int reasoning_budget;   /* tokens of reasoning before its end is forced (-1: none) */
    const char *user;       /* "user" or "session_id" (into body), or NULL */
} completion_call;

int serve_bad(bad_field *b, const char *param, const char *fmt, ...);
cJSON *serve_field(const cJSON *o, const char *name);
void serve_completion_call_free(completion_call *cc);
int serve_read_user(const cJSON *body, const char **user, bad_field *b);
int serve_read_completion_fields(server *s, const cJSON *body, completion_call *cc, bad_field *b);
char *serve_chat_prompt(server *s, const cJSON *body, const cJSON *messages, const serve_tools *tools, bad_field *b);

#endif
