/* Fuzzes the reply parser (infer_output_parser, toolcall.c). The first
   byte picks the tool format (its low 4 bits, modulo the number of
   formats) and the reasoning mode (bits 4 and 5), the second seeds the
   piece sizes; the rest is the reply. It is parsed whole and in pieces:
   the two results must be the same, and the deltas put together must be
   the result. */
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

typedef struct fuzz_tc {
    char *content, *reasoning, *args; /* deltas put together; args: every call's, '\1' between calls */
    size_t nc, nr, na;
    infer_output_result r;
    infer_output_parser *p;
} fuzz_tc;

static void put(char **s, size_t *n, const char *t, size_t k) {
    *s = (char *)realloc(*s, *n + k + 1);
    memcpy(*s + *n, t, k);
    *n += k;
    (*s)[*n] = 0;
}

static void take(fuzz_tc *o, const infer_output_delta *d) {
    int i;
    FUZZ_CHECK(strlen(d->content) <= d->content_len && !d->content[d->content_len], "content length");
    FUZZ_CHECK(strlen(d->reasoning) <= d->reasoning_len && !d->reasoning[d->reasoning_len], "reasoning length");
    put(&o->content, &o->nc, d->content, d->content_len);
    put(&o->reasoning, &o->nr, d->reasoning, d->reasoning_len);
    for (i = 0; i < d->n_calls; i++) {
        FUZZ_CHECK(d->calls[i].id && d->calls[i].name && d->calls[i].arguments, "a call's first piece");
        if (d->calls[i].index > 0) put(&o->args, &o->na, "\1", 1);
        put(&o->args, &o->na, d->calls[i].arguments, strlen(d->calls[i].arguments));
    }
}

static void run(fuzz_tc *o, infer_tool_format f, infer_reasoning reasoning, const uint8_t *text, size_t n, uint32_t seed) {
    infer_error err;
    infer_output_delta d;
    size_t at = 0;
    memset(o, 0, sizeof *o);
    o->p = infer_output_parser_new(f, reasoning, &err);
    FUZZ_CHECK(o->p != NULL, "new: %s", err.msg);
    put(&o->content, &o->nc, "", 0);
    put(&o->reasoning, &o->nr, "", 0);
    put(&o->args, &o->na, "", 0);
    while (at < n) {
        size_t k = n - at;
        if (seed) {
            seed = seed * 1664525u + 1013904223u;
            if (k > 1 + (seed >> 24) % 8) k = 1 + (seed >> 24) % 8;
        }
        FUZZ_CHECK(infer_output_parser_push(o->p, (const char *)text + at, k, &d, &err) == INFER_OK, "push: %s", err.msg);
        take(o, &d);
        at += k;
    }
    FUZZ_CHECK(infer_output_parser_finish(o->p, &d, &o->r, &err) == INFER_OK, "finish: %s", err.msg);
    take(o, &d);
    FUZZ_CHECK(o->nc == o->r.content_len && !memcmp(o->content, o->r.content, o->nc),
               "content deltas differ from the result");
    FUZZ_CHECK(o->nr == o->r.reasoning_len && !memcmp(o->reasoning, o->r.reasoning_content, o->nr),
               "reasoning deltas differ from the result");
}

static void done(fuzz_tc *o) {
    infer_output_parser_free(o->p);
    free(o->content);
    free(o->reasoning);
    free(o->args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_tc a, b;
    infer_tool_format f;
    infer_reasoning reasoning;
    int i;
    if (size < 2) return 0;
    f = (infer_tool_format)((data[0] & 15) % INFER_TOOL_FORMAT_COUNT);
    reasoning = (infer_reasoning)((data[0] >> 4 & 3) % 3);
    run(&a, f, reasoning, data + 2, size - 2, 0);
    run(&b, f, reasoning, data + 2, size - 2, 1u + data[1]);
    FUZZ_CHECK(a.nc == b.nc && !memcmp(a.content, b.content, a.nc), "content depends on the pieces");
    FUZZ_CHECK(a.nr == b.nr && !memcmp(a.reasoning, b.reasoning, a.nr), "reasoning depends on the pieces");
    FUZZ_CHECK(a.r.n_calls == b.r.n_calls && a.r.n_malformed == b.r.n_malformed, "calls depend on the pieces");
    FUZZ_CHECK(a.na == b.na && !memcmp(a.args, b.args, a.na), "arguments depend on the pieces");
    for (i = 0; i < a.r.n_calls; i++) {
        FUZZ_CHECK(!strcmp(a.r.calls[i].name, b.r.calls[i].name), "names depend on the pieces");
        FUZZ_CHECK(!strcmp(a.r.calls[i].id, b.r.calls[i].id), "ids depend on the pieces");
        FUZZ_CHECK(!strcmp(a.r.calls[i].arguments, b.r.calls[i].arguments), "arguments depend on the pieces");
        FUZZ_CHECK(a.r.calls[i].arguments[0] == '{', "arguments are an object");
    }
    done(&a);
    done(&b);
    return 0;
}
