/* The 0.25 convention on the calls converted last: a status and err, the
   length or count in an out-parameter, a short buffer cut (no error), bad
   arguments INFER_ERR_ARG with a message. */
#include "infer.h"

#include <criterion/criterion.h>
#include <string.h>

#include "testutil.h"

static infer_model *load_tiny(void) {
    char path[1024];
    infer_error err;
    infer_model *m;
    tu_shared_path(path, sizeof path, "models/tinystories-656k-q8_0.gguf");
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    return m;
}

/* a status INFER_ERR_ARG, with a message */
static void assert_arg_error(infer_status st, const infer_error *err, const char *what) {
    cr_assert_eq(st, INFER_ERR_ARG, "%s: status %d", what, (int)st);
    cr_assert_eq(err->code, INFER_ERR_ARG, "%s: err.code %d", what, (int)err->code);
    cr_assert(err->msg[0] != 0, "%s: err says why", what);
}

Test(status, snprintf_style_calls_cut_a_short_buffer_and_say_the_whole_length) {
    infer_model *m;
    infer_error err;
    char whole[512], cut[8];
    size_t n_whole = 0, n_cut = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the status test needs its models");
    m = load_tiny();
    cr_assert_eq(infer_model_describe(m, whole, sizeof whole, &n_whole, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(n_whole, strlen(whole));
    cr_assert_gt(n_whole, sizeof cut, "a summary longer than the short buffer");
    memset(cut, 'x', sizeof cut);
    cr_assert_eq(infer_model_describe(m, cut, sizeof cut, &n_cut, &err), INFER_OK, "a short buffer is no error");
    cr_assert_eq(n_cut, n_whole, "the whole length, as snprintf");
    cr_assert_eq(cut[sizeof cut - 1], 0, "NUL-terminated");
    cr_assert(!strncmp(cut, whole, sizeof cut - 1), "the summary's beginning");
    cr_assert_eq(infer_model_describe(m, NULL, 0, &n_cut, NULL), INFER_OK, "NULL with 0 measures");
    cr_assert_eq(n_cut, n_whole);
    infer_model_free(m);
}

Test(status, token_pieces_and_bad_ids) {
    infer_model *m;
    infer_error err;
    char piece[64];
    size_t n = 0;
    infer_token toks[16];
    int n_tok = 0, i;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the status test needs its models");
    m = load_tiny();
    cr_assert_eq(infer_tokenize(m, " upon", 5, toks, 16, 0, 0, &n_tok, &err), INFER_OK, "%s", err.msg);
    cr_assert_gt(n_tok, 0);
    for (i = 0; i < n_tok; i++) {
        cr_assert_eq(infer_token_to_piece(m, toks[i], piece, sizeof piece, &n, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(n, strlen(piece));
        cr_assert_gt(n, 0);
    }
    memset(&err, 0, sizeof err);
    assert_arg_error(infer_token_to_piece(m, infer_model_n_vocab(m), piece, sizeof piece, &n, &err), &err,
                     "an id past the vocabulary");
    memset(&err, 0, sizeof err);
    assert_arg_error(infer_token_to_piece(m, -3, piece, sizeof piece, &n, &err), &err, "a negative id");
    infer_model_free(m);
}

Test(status, counts_come_back_through_out_parameters) {
    infer_model *m;
    infer_context *c;
    infer_error err;
    infer_token toks[32];
    infer_tensor_info info;
    int n_tok = 0, kept = -1;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the status test needs its models");
    m = load_tiny();
    c = infer_context_new(m, NULL, &err);
    cr_assert(c, "%s", err.msg);
    cr_assert_eq(infer_tokenize(m, "Once upon a time", 16, toks, 32, 1, 0, &n_tok, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(c, toks, n_tok, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_truncate(c, 0, 2, &kept, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(kept, 2);
    cr_assert_eq(infer_seq_n_past(c, 0), 2);
    cr_assert_eq(infer_seq_truncate(c, 0, 100, &kept, &err), INFER_OK, "past the end keeps them all");
    cr_assert_eq(kept, 2);
    memset(&err, 0, sizeof err);
    assert_arg_error(infer_seq_truncate(c, 999, 0, &kept, &err), &err, "a sequence outside the context");
    memset(&err, 0, sizeof err);
    assert_arg_error(infer_request_tokens(NULL, toks, 32, &n_tok, &err), &err, "no request");
    cr_assert_eq(n_tok, 0, "the count is 0 on failure");
    cr_assert_eq(infer_gguf_tensor(infer_model_gguf(m), 0, &info, &err), INFER_OK, "%s", err.msg);
    memset(&err, 0, sizeof err);
    assert_arg_error(infer_gguf_tensor(infer_model_gguf(m), infer_gguf_n_tensors(infer_model_gguf(m)), &info, &err),
                     &err, "a tensor index past the table");
    infer_context_free(c);
    infer_model_free(m);
}

Test(status, no_template_is_an_answer_no_model_a_failure) {
    infer_model *m;
    infer_error err;
    char bos[32], eos[32], *text;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the status test needs its models");
    m = load_tiny();
    err.code = INFER_ERR_IO; /* overwritten: INFER_OK where the model has no template */
    text = infer_model_chat_template_text(m, bos, sizeof bos, eos, sizeof eos, &err);
    cr_assert_null(text, "TinyStories has no chat template");
    cr_assert_eq(err.code, INFER_OK, "no template is an answer, not a failure");
    memset(&err, 0, sizeof err);
    cr_assert_null(infer_model_chat_template_text(NULL, bos, sizeof bos, eos, sizeof eos, &err));
    assert_arg_error(err.code, &err, "no model");
    infer_model_free(m);
}

Test(status, schema_grammar_cut_and_bad_schema) {
    infer_error err;
    char whole[4096], cut[16];
    size_t n_whole = 0, n_cut = 0;
    const char *schema = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}";
    cr_assert_eq(infer_json_schema_to_grammar(schema, whole, sizeof whole, &n_whole, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(n_whole, strlen(whole));
    cr_assert_eq(infer_json_schema_to_grammar(schema, cut, sizeof cut, &n_cut, &err), INFER_OK, "cut, no error");
    cr_assert_eq(n_cut, n_whole);
    cr_assert_eq(strlen(cut), sizeof cut - 1);
    memset(&err, 0, sizeof err);
    assert_arg_error(infer_json_schema_to_grammar("{\"type\": ", whole, sizeof whole, &n_cut, &err), &err,
                     "a schema that does not parse");
}
