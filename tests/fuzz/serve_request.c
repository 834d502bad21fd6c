/* Fuzzes infer serve's request reading (examples/serve_routes.c, included
   here for its static functions): a completion body, as a client posts it,
   through completion_from_body, which reads the fields, renders a chat's
   messages through the template and tokenizes the prompt; then what the
   server would do next with it that needs no connection: the error object
   for a refusal, the grammar of a response_format schema. The first byte
   picks chat or text completion and the chat format; the rest is the body.
   The vocabulary is Qwen2's (../shared/tokenizer), loaded once. */
#include "../../examples/serve_routes.c"

#include "fuzz_common.h"
#include "tests/status_calls.h"

static server fuzz_server;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_require_shared("fuzz_serve_request");
    fuzz_server.model = fuzz_load_vocab("fuzz_serve_request", "tokenizer/ggml-vocab-qwen2.gguf");
    fuzz_server.n_ctx = 512;
    fuzz_server.n_slots = 1;
    /* the server's default per-request limits, so they are fuzzed too */
    fuzz_server.max_schema = 512 << 10;
    fuzz_server.max_grammar = 8 << 20;
    fuzz_server.max_messages = 1024;
    pthread_mutex_init(&fuzz_server.mu, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    completion_call cc;
    bad_field b = {NULL, {0}, NULL};
    char *body, *prompt = NULL;
    int n_prompt = 0, chat;
    if (size < 1) return 0;
    chat = data[0] & 1;
    fuzz_server.tmpl = infer_chat_template_from_text(infer_chat_template_name((infer_chat_kind)((data[0] >> 1) % INFER_CHAT_KIND_COUNT)),
                                                     NULL, NULL);
    body = fuzz_cstr(data + 1, size - 1);
    if (completion_from_body(&fuzz_server, body, chat, &cc, &prompt, &n_prompt, &b)) {
        FUZZ_CHECK(cc.p.prompt == prompt && n_prompt >= 0 && n_prompt < fuzz_server.n_ctx, "prompt of %d tokens", n_prompt);
        FUZZ_CHECK(cc.max_tokens >= 0 && cc.max_tokens <= fuzz_server.n_ctx - n_prompt, "max_tokens %d", cc.max_tokens);
        FUZZ_CHECK(cc.p.n_stop <= SERVE_MAX_STOP, "%d stop strings", cc.p.n_stop);
        if (cc.schema) {
            infer_error err;
            sc_json_schema_to_grammar(cc.schema, NULL, 0, &err);
        }
    } else {
        cJSON *e = error_object(400, b.param, b.code, b.msg);
        char *text = cJSON_PrintUnformatted(e);
        FUZZ_CHECK(b.msg[0] && text, "a refusal must say why");
        free(text);
        cJSON_Delete(e);
    }
    free(prompt);
    serve_completion_call_free(&cc);
    free(body);
    return 0;
}
