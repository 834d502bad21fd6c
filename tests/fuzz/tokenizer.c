/* Fuzzes the tokenizers: the first byte picks a vocabulary of
   ../shared/tokenizer (SentencePiece and byte-level BPE, with their
   pre-tokenizers) and the flags, the rest is the text. Checks what the
   API promises: the counting call agrees with the writing one, ids are in
   range, the streaming detokenizer gives the pieces' bytes unchanged, and
   the round trip: byte-level BPE gives valid UTF-8 back exactly, and
   SentencePiece with byte fallback gives it back after the space prefix. */
#include "fuzz_common.h"
#include "tests/status_calls.h"

typedef enum round_trip { RT_NONE, RT_EXACT, RT_SPACE_PREFIX } round_trip;

static const struct {
    const char *file;
    round_trip rt;
} vocab_files[] = {
    {"tokenizer/ggml-vocab-llama-spm.gguf", RT_SPACE_PREFIX},
    {"tokenizer/ggml-vocab-phi-3.gguf", RT_NONE}, /* SentencePiece too, its own rules for spaces */
    {"tokenizer/ggml-vocab-gpt-2.gguf", RT_EXACT},
    {"tokenizer/ggml-vocab-llama-bpe.gguf", RT_EXACT},
    {"tokenizer/ggml-vocab-qwen2.gguf", RT_EXACT},
    {"tokenizer/ggml-vocab-deepseek-coder.gguf", RT_EXACT},
    {"tokenizer/ggml-vocab-mpt.gguf", RT_EXACT},
};
#define N_VOCABS (int)(sizeof vocab_files / sizeof vocab_files[0])
static infer_model *vocabs[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    int i;
    (void)argc, (void)argv;
    fuzz_require_shared("fuzz_tokenizer");
    for (i = 0; i < N_VOCABS; i++) vocabs[i] = fuzz_load_vocab("fuzz_tokenizer", vocab_files[i].file);
    return 0;
}

static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], len, k, cp;
        len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!len || i + len > n) return 0;
        cp = len == 1 ? c : c & (0x7f >> len);
        for (k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        /* overlong forms, surrogates and beyond U+10FFFF are not UTF-8 */
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            return 0;
        i += len;
    }
    return 1;
}

static int contains(const char *s, size_t n, const char *what) {
    size_t k = strlen(what), i;
    for (i = 0; i + k <= n; i++)
        if (!memcmp(s + i, what, k)) return 1;
    return 0;
}

/* Tokenizes text; returns malloc'd ids and their count in *n. */
static infer_token *tokenize(const infer_model *m, const char *text, size_t len, int add_bos, int special, int *n) {
    int need, got;
    infer_token *t;
    FUZZ_CHECK(infer_tokenize(m, text, len, NULL, 0, add_bos, special, &need, NULL) == INFER_OK,
               "tokenizing %zu bytes failed", len);
    t = (infer_token *)malloc(sizeof *t * (size_t)(need + 1));
    if (infer_tokenize(m, text, len, t, need, add_bos, special, &got, NULL) != INFER_OK) got = -1;
    FUZZ_CHECK(got == need, "the counting call said %d tokens, the writing one %d", need, got);
    *n = got;
    return t;
}

/* The concatenated pieces of t[0..n); malloc'd, length in *len. Also
   checks that the streaming detokenizer gives the same bytes. */
static char *detokenize(const infer_model *m, const infer_token *t, int n, size_t *len) {
    size_t cap = 64, used = 0, s_used = 0;
    char *out = (char *)malloc(cap), *streamed, chunk[256];
    infer_detok d;
    int i, k;
    for (i = 0; i < n; i++) {
        int piece = sc_token_to_piece(m, t[i], NULL, 0);
        FUZZ_CHECK(piece >= 0, "token %d has no piece", t[i]);
        if (used + (size_t)piece + 1 > cap) {
            while (used + (size_t)piece + 1 > cap) cap *= 2;
            out = (char *)realloc(out, cap);
        }
        FUZZ_CHECK(sc_token_to_piece(m, t[i], out + used, (size_t)piece + 1) == piece, "token %d's piece changed size", t[i]);
        used += (size_t)piece;
    }
    streamed = (char *)malloc(used + 1);
    memset(&d, 0, sizeof d);
    for (i = 0; i < n; i++) {
        k = sc_detok_push(&d, m, t[i], chunk, sizeof chunk);
        FUZZ_CHECK(k >= 0 && s_used + (size_t)k <= used, "the stream gave %d bytes more than the pieces", k);
        memcpy(streamed + s_used, chunk, (size_t)k);
        s_used += (size_t)k;
    }
    k = sc_detok_flush(&d, chunk, sizeof chunk);
    FUZZ_CHECK(k >= 0 && s_used + (size_t)k == used, "the stream gave %zu bytes, the pieces %zu", s_used + (size_t)k,
               used);
    memcpy(streamed + s_used, chunk, (size_t)k);
    FUZZ_CHECK(memcmp(streamed, out, used) == 0, "the stream's bytes differ from the pieces'");
    free(streamed);
    *len = used;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data + 1;
    size_t len, back_len;
    int which, add_bos, special, n, i;
    infer_token *t;
    char *back;
    const infer_model *m;
    if (size < 1) return 0;
    which = (data[0] & 0x3f) % N_VOCABS;
    add_bos = data[0] >> 6 & 1;
    special = data[0] >> 7 & 1;
    len = size - 1;
    m = vocabs[which];

    t = tokenize(m, text, len, add_bos, special, &n);
    for (i = 0; i < n; i++)
        FUZZ_CHECK(t[i] >= 0 && t[i] < infer_model_n_vocab(m), "token %d out of range", t[i]);
    back = detokenize(m, t, n, &back_len);
    free(back);
    free(t);

    if (vocab_files[which].rt == RT_NONE || !utf8_valid((const unsigned char *)text, len)) return 0;
    t = tokenize(m, text, len, 0, 0, &n);
    back = detokenize(m, t, n, &back_len);
    if (vocab_files[which].rt == RT_EXACT) {
        FUZZ_CHECK(back_len == len && memcmp(back, text, len) == 0, "%s: %zu bytes came back as %zu",
                   vocab_files[which].file, len, back_len);
    } else if (len && !contains(text, len, "\xe2\x96\x81")) {
        /* SentencePiece writes spaces as U+2581, so text holding one comes back with a space */
        FUZZ_CHECK(back_len == len + 1 && back[0] == ' ' && memcmp(back + 1, text, len) == 0,
                   "%s: %zu bytes came back as %zu", vocab_files[which].file, len, back_len);
    }
    free(back);
    free(t);
    return 0;
}
