/* Fuzzes the Jinja interpreter: the input is a template's text, then
   optionally a NUL and the context's JSON. Renders under small limits and
   checks the API's promises: a result within max_output bytes, or NULL
   with a one-line message (raise_exception's flag only on a failure);
   never a crash, a hang or a leak. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    infer_jinja_limits lim = infer_jinja_default_limits();
    infer_error err;
    char *text = fuzz_cstr(data, size), *ctx, *out;
    size_t tlen = strlen(text);
    int raised = -1;
    /* small enough that every input ends in well under a second */
    lim.max_steps = 20000;
    lim.max_output = (size_t)1 << 20;
    lim.max_memory = (size_t)32 << 20;
    lim.max_depth = 200;
    ctx = tlen < size ? text + tlen + 1 : NULL;
    out = infer_jinja_render(text, ctx, &lim, &raised, &err);
    if (out) {
        FUZZ_CHECK(strlen(out) <= lim.max_output, "%zu bytes of output, the limit is %zu", strlen(out), lim.max_output);
        FUZZ_CHECK(raised == 0, "rendered, yet raised is %d", raised);
        free(out);
    } else {
        FUZZ_CHECK(err.code == INFER_ERR_ARG || err.code == INFER_ERR_NOMEM, "error code %d", (int)err.code);
        FUZZ_CHECK(!strchr(err.msg, '\n'), "a message of more than one line: %s", err.msg);
        FUZZ_CHECK(raised == 0 || raised == 1, "raised is %d", raised);
        FUZZ_CHECK(raised || err.msg[0], "an empty message");
    }
    free(text);
    return 0;
}
