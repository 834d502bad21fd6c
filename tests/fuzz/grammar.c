/* Fuzzes the GBNF parser and the JSON-schema-to-grammar translator. The
   first byte picks: even, the rest is GBNF text; odd, a JSON schema, whose
   grammar must then be one the GBNF parser accepts. A grammar that sets up
   is then run for a few tokens of stories260K's vocabulary (from
   ../shared), each sampled under it and accepted. */
#include "fuzz_common.h"
#include "tests/status_calls.h"

static infer_model *vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_require_shared("fuzz_grammar");
    vocab = fuzz_load_vocab("fuzz_grammar", "models/stories260K.gguf");
    return 0;
}

/* Samples and accepts up to 8 tokens under the grammar, from logits that
   depend on the input (so that the fuzzer steers the walk a little). */
static void walk(infer_sampler *s, uint32_t seed) {
    int n_vocab = infer_model_n_vocab(vocab), step, i;
    float *logits = (float *)malloc(sizeof(float) * (size_t)n_vocab);
    for (step = 0; step < 8; step++) {
        infer_token t;
        for (i = 0; i < n_vocab; i++) {
            seed = seed * 1664525u + 1013904223u;
            logits[i] = (float)(seed >> 8) / (float)(1u << 24) * 8.0f;
        }
        t = infer_sampler_sample(s, logits);
        if (t < 0) break;
        FUZZ_CHECK(t < n_vocab, "sampled token %d out of range", t);
        infer_sampler_accept(s, t);
        if (infer_model_is_eog(vocab, t)) break;
    }
    (void)infer_sampler_grammar_done(s);
    free(logits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    infer_sampler_params sp = infer_sampler_default_params();
    infer_sampler *s;
    infer_error err;
    char *text, *gbnf = NULL;
    uint32_t seed = 2166136261u;
    size_t i;
    if (size < 1) return 0;
    text = fuzz_cstr(data + 1, size - 1);
    for (i = 0; i < size; i++) seed = (seed ^ data[i]) * 16777619u;
    if (data[0] & 1) {
        int len = sc_json_schema_to_grammar(text, NULL, 0, &err), again;
        if (len < 0) {
            FUZZ_CHECK(err.msg[0], "a refused schema must say why");
            free(text);
            return 0;
        }
        gbnf = (char *)malloc((size_t)len + 1);
        again = sc_json_schema_to_grammar(text, gbnf, (size_t)len + 1, &err);
        FUZZ_CHECK(again == len, "the schema's grammar was %d bytes, then %d", len, again);
        free(text);
        text = gbnf;
    }
    sp.temperature = 0.8f;
    sp.seed = seed;
    s = infer_sampler_new(&sp, infer_model_n_vocab(vocab), NULL);
    if (infer_sampler_set_grammar(s, vocab, text, NULL, &err) == INFER_OK) {
        walk(s, seed);
        infer_sampler_reset(s);
        walk(s, seed ^ 0x5bd1e995u);
    } else {
        FUZZ_CHECK(!gbnf, "the grammar of a schema is refused: %s\n%s", err.msg, gbnf);
        FUZZ_CHECK(err.msg[0], "a refused grammar must say why");
    }
    infer_sampler_free(s);
    free(text);
    return 0;
}
