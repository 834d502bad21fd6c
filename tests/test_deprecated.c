/* The names deprecated in 0.25 (removed in 0.26) still work, as the new
   ones they stand for: the one test of the old names the project keeps. */
#define INFER_NO_DEPRECATED_WARNINGS /* this file calls them on purpose */
#include "infer.h"

#include <criterion/criterion.h>
#include <string.h>

#include "testutil.h"

Test(deprecated, old_constants_are_the_new_ones) {
    cr_assert_eq(INFER_POOL_MEAN, INFER_POOLING_MEAN);
    cr_assert_eq(INFER_POOL_LAST, INFER_POOLING_LAST);
    cr_assert_eq(INFER_POOL_FIRST, INFER_POOLING_FIRST);
    cr_assert_eq(INFER_TOOLS_HERMES, INFER_TOOL_FORMAT_HERMES);
    cr_assert_eq(INFER_TOOLS_APERTUS, INFER_TOOL_FORMAT_APERTUS);
    cr_assert_eq(INFER_TOOLS_COUNT, INFER_TOOL_FORMAT_COUNT);
    cr_assert_eq(INFER_FULL_SHIFT, INFER_FULL_POLICY_SHIFT);
    cr_assert_eq(INFER_QUANT_Q4_K_M, INFER_QUANT_TARGET_Q4_K_M);
    cr_assert_eq(INFER_CHAT_CHATML, INFER_CHAT_KIND_CHATML);
    cr_assert_eq(INFER_STRUCT_DETOK, INFER_STRUCT_ID_DETOK);
    cr_assert_eq(INFER_GGUF_STRING, INFER_GGUF_TYPE_STRING);
    cr_assert_str_eq(infer_tool_format_name(INFER_TOOLS_HERMES), infer_tool_format_name(INFER_TOOL_FORMAT_HERMES));
}

Test(deprecated, wrappers_act_on_sequence_0) {
    char path[1024];
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_token toks[64];
    int n = 0;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the wrappers' test needs its models");
    tu_shared_path(path, sizeof path, "models/tinystories-656k-q8_0.gguf");
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    c = infer_context_new(m, NULL, &err);
    cr_assert(c, "%s", err.msg);
    cr_assert_eq(infer_tokenize(m, "Once upon a time", 16, toks, 64, 1, 0, &n, &err), INFER_OK, "%s", err.msg);
    cr_assert_gt(n, 2);
    cr_assert_eq(infer_decode(c, toks, n, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_context_n_past(c), n);
    cr_assert_eq(infer_context_n_past(c), infer_seq_n_past(c, 0));
    cr_assert(infer_get_logits(c, -1) != NULL);
    cr_assert_eq(infer_get_logits(c, -1), infer_context_logits(c, -1), "the same row");
    cr_assert_eq(infer_context_truncate(c, 2), 2);
    cr_assert_eq(infer_seq_n_past(c, 0), 2, "truncate cut sequence 0");
    infer_context_free(c);
    infer_model_free(m);
}
