/* serve_anthropic.h - Anthropic's Messages API (POST /v1/messages) on infer
   serve's chat completions: a request made an OpenAI chat body, and the
   reply (content, reasoning, tool calls) written back as Anthropic's
   message or stream of events. */
#ifndef SERVE_ANTHROPIC_H
#define SERVE_ANTHROPIC_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "infer.h"

/* An Anthropic body as the OpenAI chat body that asks the same: system,
   messages (text, tool_use, tool_result blocks), max_tokens, stop_sequences,
   temperature, top_p, top_k, stream, tools (input_schema), tool_choice
   (auto, any, tool, none), thinking.budget_tokens (reasoning_budget).
   NULL with *param and msg set for a bad one (a 400). */
cJSON *anthropic_to_chat(const cJSON *body, const char **param, char *msg, size_t size);

/* The stream's content blocks so far: which is open. */
typedef struct anthropic_blocks {
    int index; /* the open block's index, or the next one's */
    int kind;  /* the open block: 0 none, 1 thinking, 2 text, 3 tool_use */
} anthropic_blocks;

/* emit(ctx, event name, data (owned)) writes one server-sent event */
typedef void (*anthropic_emit)(void *ctx, const char *event, cJSON *data);

void anthropic_stream_start(const char *id, const char *model, int input_tokens, int cached, anthropic_emit emit,
                            void *ctx);
/* A parsed delta as content_block_start/_delta/_stop events. Returns
   whether it wrote any. */
int anthropic_stream_delta(anthropic_blocks *b, const infer_output_delta *d, anthropic_emit emit, void *ctx);
/* The last block closed, message_delta (stop_reason from OpenAI's finish
   reason) and message_stop. */
void anthropic_stream_end(anthropic_blocks *b, const char *finish, int output_tokens, anthropic_emit emit, void *ctx);

/* The whole reply as Anthropic's message object. */
cJSON *anthropic_message(const char *id, const char *model, const infer_output_result *res, const char *finish,
                         int input_tokens, int output_tokens, int cached);
/* {"type": "error", "error": {"type", "message"}} */
cJSON *anthropic_error(const char *type, const char *msg);

#endif
