/* Fuzzes model loading from a buffer: vocabulary only, then the whole
   model; where that loads, a context of a few positions decodes a couple
   of tokens, so that the hyperparameters the file gave are used (a head
   count or length that the loader let through and the forward pass
   cannot take shows here). The seeds are tiny models (tiny_gguf.py). */
#include "fuzz_common.h"
#include "tests/status_calls.h"

/* Tokenizes and detokenizes a short text with the file's vocabulary. */
static void use_vocab(const infer_model *m) {
    static const char text[] = "Hello world, <s> caf\xc3\xa9!\n";
    infer_token toks[64];
    char piece[64];
    int i, n = 0;
    infer_tokenize(m, text, sizeof text - 1, toks, 64, 1, 1, &n, NULL);
    for (i = 0; i < n && i < 64; i++) sc_token_to_piece(m, toks[i], piece, sizeof piece);
}

static void decode_a_little(infer_model *m) {
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_context *c;
    infer_token toks[2];
    int n_vocab = infer_model_n_vocab(m);
    cp.n_ctx = 8;
    cp.n_batch = 4;
    cp.n_threads = 1;
    if (!(c = infer_context_new(m, &cp, &err))) return;
    toks[0] = infer_model_bos(m) >= 0 ? infer_model_bos(m) : 0;
    toks[1] = n_vocab > 1 ? 1 : 0;
    if (infer_decode(c, toks, 2, 0, &err) == INFER_OK) {
        const float *logits = infer_context_logits(c, -1);
        infer_token best = 0;
        int i;
        FUZZ_CHECK(logits != NULL, "a decoded context has logits");
        for (i = 1; i < n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        infer_decode(c, &best, 1, 0, &err);
    }
    infer_context_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    infer_model_params mp = infer_model_default_params();
    infer_error err;
    infer_model *m;
    char desc[256];
    mp.device = INFER_DEVICE_CPU;
    mp.vocab_only = 1;
    if ((m = infer_model_load_memory(data, size, &mp, &err)) != NULL) {
        use_vocab(m);
        infer_model_free(m);
    } else {
        FUZZ_CHECK(err.msg[0], "a refused file must say why");
    }
    mp.vocab_only = 0;
    if ((m = infer_model_load_memory(data, size, &mp, &err)) != NULL) {
        infer_model_describe(m, desc, sizeof desc, NULL, NULL);
        decode_a_little(m);
        infer_model_free(m);
    } else {
        FUZZ_CHECK(err.msg[0], "a refused file must say why");
    }
    return 0;
}
