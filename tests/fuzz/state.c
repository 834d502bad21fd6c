/* Fuzzes loading a saved sequence state (infer_seq_state_load) into a
   context of a tiny model (synth-256-q8_0 from ../shared), with an F16 or
   a Q8_0 KV cache. Input: a selector byte, then the state's bytes.
   Selector bit 0: the Q8_0 context; bit 1: recompute the state's checksum
   before loading, so that mutations also reach the checks after it (the
   counts, the tokens, NaN logits and cache values) instead of all stopping
   at the checksum; bit 2: sequence 1 rather than 0.
   A state that loads must save back byte for byte and decode a token; a
   refused one must say why and leave the sequence as it was.
   Seeds are real states (the empty sequence's among them): run with
   INFER_FUZZ_STATE_SEEDS=DIR, the harness writes them there and exits
   (run_fuzz.sh does). The private copy of the implementation gives the
   state's header and checksum; this file calls only that copy. */
#include "infer_private.h"

#include "fuzz_common.h"

#define STATE_MODEL "models/synth-256-q8_0.gguf"
#define STATE_CTX 8

static infer_model *model;
static infer_context *contexts[2]; /* F16 and Q8_0 caches */

static infer_context *new_context(infer_type kv_type) {
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_context *c;
    cp.n_ctx = STATE_CTX, cp.n_seq = 2, cp.n_threads = 1, cp.kv_type = kv_type;
    c = infer_context_new(model, &cp, &err);
    FUZZ_CHECK(c != NULL, "%s", err.msg);
    return c;
}

static void decode_in(infer_context *c, int seq, const infer_token *t, int n) {
    int seqs[STATE_CTX], i;
    infer_batch b;
    infer_error err;
    for (i = 0; i < n; i++) seqs[i] = seq;
    b.n = n, b.tokens = t, b.seq = seqs, b.logits = NULL;
    FUZZ_CHECK(infer_decode_batch(c, &b, &err) == INFER_OK, "%s", err.msg);
}

static void write_seed(const char *dir, const char *name, int sel, const infer_context *c, int seq) {
    char path[1024];
    size_t n = infer_seq_state_size(c, seq);
    uint8_t *buf = (uint8_t *)malloc(n + 1);
    FILE *f;
    FUZZ_CHECK(buf && n, "a state to save");
    buf[0] = (uint8_t)sel;
    FUZZ_CHECK(infer_seq_state_save(c, seq, buf + 1, n) == n, "saving a state");
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(buf, 1, n + 1, f) == n + 1 && fclose(f) == 0, "writing %s", path);
    free(buf);
}

/* Real states of both caches: empty, one token, a few, a full context,
   and one truncated (its cache reaching past its tokens). */
static void write_seeds(const char *dir) {
    static const infer_token toks[STATE_CTX] = {1, 17, 42, 99, 7, 300, 5, 64};
    char name[64];
    int k, sel;
    for (k = 0; k < 2; k++) {
        infer_context *c = contexts[k];
        for (sel = 0; sel < 2; sel++) { /* as is, and resealed (the same bytes) */
            int s = k | sel << 1;
            snprintf(name, sizeof name, "%s-empty-%d", k ? "q8_0" : "f16", s);
            write_seed(dir, name, s, c, 0);
            decode_in(c, 0, toks, 1);
            snprintf(name, sizeof name, "%s-one-%d", k ? "q8_0" : "f16", s);
            write_seed(dir, name, s, c, 0);
            decode_in(c, 0, toks + 1, 4);
            snprintf(name, sizeof name, "%s-five-%d", k ? "q8_0" : "f16", s);
            write_seed(dir, name, s, c, 0);
            decode_in(c, 0, toks + 5, STATE_CTX - 5);
            snprintf(name, sizeof name, "%s-full-%d", k ? "q8_0" : "f16", s);
            write_seed(dir, name, s, c, 0);
            infer_seq_truncate(c, 0, 3, NULL, NULL);
            snprintf(name, sizeof name, "%s-truncated-%d", k ? "q8_0" : "f16", s);
            write_seed(dir, name, s | 4, c, 0);
            infer_seq_truncate(c, 0, 0, NULL, NULL);
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char path[1024];
    infer_model_params mp = infer_model_default_params();
    infer_error err;
    const char *seeds = getenv("INFER_FUZZ_STATE_SEEDS");
    (void)argc, (void)argv;
    fuzz_require_shared("fuzz_state");
    snprintf(path, sizeof path, "%s/%s", fuzz_shared_dir(), STATE_MODEL);
    mp.device = INFER_DEVICE_CPU;
    if (!(model = infer_model_load(path, &mp, &err))) {
        fprintf(stderr, "fuzz_state: SKIPPED: %s: %s\n", path, err.msg);
        exit(77);
    }
    contexts[0] = new_context(INFER_TYPE_F16);
    contexts[1] = new_context(INFER_TYPE_Q8_0);
    if (seeds && *seeds) {
        write_seeds(seeds);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    infer_context *c;
    infer_error err;
    uint8_t *buf, *again;
    size_t n;
    int sel, seq, nv, before, i;
    if (!model) LLVMFuzzerInitialize(NULL, NULL); /* replay_main.c may not call it */
    if (size < 1) return 0;
    sel = data[0], c = contexts[sel & 1], seq = (sel >> 2) & 1;
    nv = infer_model_n_vocab(model);
    n = size - 1;
    /* exactly n bytes of its own, so that reading past them is caught */
    buf = (uint8_t *)malloc(n ? n : 1);
    FUZZ_CHECK(buf != NULL, "out of memory");
    if (n) memcpy(buf, data + 1, n);
    if ((sel & 2) && n >= sizeof(infer__state_header)) {
        infer__state_header h;
        memcpy(&h, buf, sizeof h);
        h.checksum = infer__state_checksum(buf, n);
        memcpy(buf, &h, sizeof h);
    }
    before = infer_seq_n_past(c, seq);
    memset(&err, 0, sizeof err);
    if (infer_seq_state_load(c, seq, buf, n, &err) == INFER_OK) {
        int np = infer_seq_n_past(c, seq), nt = 0;
        const infer_token *t = infer_seq_tokens(c, seq, &nt);
        const float *logits = infer_seq_logits(c, seq);
        FUZZ_CHECK(np >= 0 && np <= STATE_CTX && nt == np, "n_past %d of %d", np, STATE_CTX);
        for (i = 0; i < np; i++) FUZZ_CHECK(t[i] >= 0 && t[i] < nv, "token %d: %d", i, (int)t[i]);
        for (i = 0; logits && i < nv; i++) FUZZ_CHECK(isfinite(logits[i]), "logit %d is not finite", i);
        /* what loaded saves back as it was */
        FUZZ_CHECK(infer_seq_state_size(c, seq) == n, "size %zu, loaded %zu", infer_seq_state_size(c, seq), n);
        again = (uint8_t *)malloc(n);
        FUZZ_CHECK(again && infer_seq_state_save(c, seq, again, n) == n, "saving again");
        FUZZ_CHECK(memcmp(again, buf, n) == 0, "a loaded state saves back differently");
        free(again);
        /* and the loaded cache is used */
        if (np < STATE_CTX) {
            infer_token next = 1;
            decode_in(c, seq, &next, 1);
        }
    } else {
        FUZZ_CHECK(err.msg[0], "a refused state must say why");
        FUZZ_CHECK(!strchr(err.msg, '\n'), "one line: %s", err.msg);
        FUZZ_CHECK(infer_seq_n_past(c, seq) == before, "a refused state changed the sequence");
    }
    infer_seq_truncate(c, seq, 0, NULL, NULL);
    free(buf);
    return 0;
}
