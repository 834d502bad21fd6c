/* tokenizer.c - SentencePiece-style ("llama") and byte-level BPE ("gpt2")
   tokenizers that reproduce llama.cpp's (llama-vocab.cpp, Feb 2025) output
   token for token, including its quirks, since models were run on it.
   The pre-tokenizer regexes are hand-written matchers over the Unicode
   classes of unicode.c, each emulating what llama.cpp's custom splitter or
   its std::regex fallback produces. */
#include "internal.h"
#include "unicode.h"

/* token attributes, as llama.cpp's llama_token_attr */
enum {
    INFER__ATTR_UNDEFINED = 0,
    INFER__ATTR_UNKNOWN = 1 << 0,
    INFER__ATTR_UNUSED = 1 << 1,
    INFER__ATTR_NORMAL = 1 << 2,
    INFER__ATTR_CONTROL = 1 << 3,
    INFER__ATTR_USER_DEFINED = 1 << 4,
    INFER__ATTR_BYTE = 1 << 5,
    INFER__ATTR_LSTRIP = 1 << 7,
    INFER__ATTR_RSTRIP = 1 << 8
};

enum { INFER__VOCAB_SPM = 1, INFER__VOCAB_BPE = 2 };

/* Pre-tokenizer families: each names the list of split steps llama.cpp runs. */
enum {
    INFER__PRE_DEFAULT,
    INFER__PRE_LLAMA3,
    INFER__PRE_QWEN2,
    INFER__PRE_DEEPSEEK_LLM,
    INFER__PRE_DEEPSEEK3,
    INFER__PRE_DEEPSEEK_CODER,
    INFER__PRE_FALCON,
    INFER__PRE_STARCODER,
    INFER__PRE_GPT2,
    INFER__PRE_PORO,
    INFER__PRE_VIKING,
    INFER__PRE_TEKKEN,
    INFER__PRE_GPT4O,
    INFER__PRE_CHAMELEON
};

/* A string -> int32 table, open addressing with linear probing, sized once
   for the keys it will hold (the vocabulary's texts, its merge pairs): one
   allocation, and lookups that never allocate. The keys stay in the
   vocabulary's arena. A key may be looked up in two parts joined by a 0xff
   byte (never in UTF-8): a merge pair, without writing it out first. */
typedef struct infer__strmap_slot {
    const char *key; /* NULL: empty */
    uint32_t len;
    int32_t value;
} infer__strmap_slot;

typedef struct infer__strmap {
    infer__strmap_slot *slots;
    size_t mask;
} infer__strmap;

typedef struct infer__token_data {
    const char *text; /* NUL-terminated, in vocab->arena */
    int32_t len;
    int32_t attr;
    float score;
} infer__token_data;

struct infer_vocab {
    int type, pre;
    int n_tokens;
    infer__token_data *tokens;
    char *arena;                  /* token texts, then merge keys */
    infer__strmap tok_map;        /* text -> id */
    infer__strmap merge_map;      /* "left\xffright" -> rank */
    int max_token_len, max_merge_len;
    infer_token bos, eos, unk, eot, eom;
    int add_bos, add_space_prefix, ignore_merges;
    int spm_chunks; /* no token has U+2581 after a non-U+2581 prefix (see below) */
    infer_token *special;         /* control/user-defined/unknown tokens, longest first */
    int n_special;
    struct infer__special_key *special_lex; /* the same, in byte order of their texts */
    int32_t special_first[256][2];          /* special_lex range of each first byte */
    infer_token *eog;
    int n_eog;
    infer_token byte_tok[256];    /* SPM byte fallback: <0xNN> (or the byte itself) */
    char warning[128];            /* something the caller may want to tell the user, or "" */
};

/* ---- small helpers ------------------------------------------------------ */

static int infer__strmap_init(infer__strmap *m, size_t n_keys) {
    size_t cap = 16;
    while (cap < 2 * n_keys) cap *= 2; /* at most half full */
    m->slots = (infer__strmap_slot *)infer__calloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    return m->slots != NULL;
}

/* The slot of key a (then, where b is not NULL, a 0xff byte and b): the
   key's, or the empty one where it would go. */
static infer__strmap_slot *infer__strmap_slot_of(const infer__strmap *m, const char *a, size_t na, const char *b,
                                                 size_t nb) {
    uint64_t h = infer__fnv(INFER__FNV_BASIS, a, na);
    size_t i, n = na + (b ? nb + 1 : 0);
    if (b) h = infer__fnv(infer__fnv(h, "\xff", 1), b, nb);
    for (i = (size_t)h & m->mask;; i = (i + 1) & m->mask) {
        const infer__strmap_slot *s = &m->slots[i];
        if (!s->key) break;
        if (s->len == n && !memcmp(s->key, a, na) &&
            (!b || ((unsigned char)s->key[na] == 0xff && !memcmp(s->key + na + 1, b, nb))))
            break;
    }
    return &m->slots[i];
}

/* Looks up a token by its bytes; -1 when absent. Text with a NUL inside
   is never a token's (such tokens stay reachable by id only). Read-only,
   so one vocab serves several threads. */
static infer_token infer__tok_lookup(const infer_vocab *v, const char *s, size_t n) {
    const infer__strmap_slot *slot;
    if (!v->tok_map.slots || n == 0 || n > (size_t)v->max_token_len || memchr(s, 0, n)) return -1;
    slot = infer__strmap_slot_of(&v->tok_map, s, n, NULL, 0);
    return slot->key ? slot->value : -1;
}

static int infer__merge_rank(const infer_vocab *v, const char *a, size_t na, const char *b, size_t nb) {
    const infer__strmap_slot *slot;
    if (!v->merge_map.slots || na + nb > (size_t)v->max_merge_len) return -1;
    slot = infer__strmap_slot_of(&v->merge_map, a, na, b, nb);
    return slot->key ? slot->value : -1;
}

/* GPT-2's byte <-> code point table: printable bytes map to themselves, the
   rest to U+0100.. in byte order. */
static uint32_t infer__byte_to_cp(unsigned b) {
    unsigned n = 0, c;
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) return b;
    for (c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff))) n++;
    return 256 + n;
}

/* Inverse of infer__byte_to_cp; -1 for code points outside the table. */
static int infer__cp_to_byte(uint32_t cp) {
    unsigned c, n = 0;
    if ((cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xac) || (cp >= 0xae && cp <= 0xff)) return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    for (c = 0; c < 256; c++) {
        if ((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff)) continue;
        if (256 + n == cp) return (int)c;
        n++;
    }
    return -1;
}

static int infer__str_eq(const char *a, size_t na, const char *b) {
    return strlen(b) == na && memcmp(a, b, na) == 0;
}

/* ---- loading ------------------------------------------------------------ */

static int infer__pre_from_name(const char *s, size_t n, int *pre, int *ignore_merges, int *add_bos, int *no_bos) {
    static const struct {
        const char *name;
        int pre, flags; /* 1: ignore merges + add bos, 2: add bos, 4: no bos token */
    } map[] = {
        {"default", INFER__PRE_DEFAULT, 0},
        {"llama3", INFER__PRE_LLAMA3, 1}, {"llama-v3", INFER__PRE_LLAMA3, 1},
        {"llama-bpe", INFER__PRE_LLAMA3, 1}, {"falcon3", INFER__PRE_LLAMA3, 1},
        {"deepseek-llm", INFER__PRE_DEEPSEEK_LLM, 0},
        {"deepseek-coder", INFER__PRE_DEEPSEEK_CODER, 0},
        {"deepseek-v3", INFER__PRE_DEEPSEEK3, 0},
        {"falcon", INFER__PRE_FALCON, 0},
        {"mpt", INFER__PRE_GPT2, 0},
        {"starcoder", INFER__PRE_STARCODER, 0},
        {"gpt-2", INFER__PRE_GPT2, 0}, {"phi-2", INFER__PRE_GPT2, 0},
        {"jina-es", INFER__PRE_GPT2, 0}, {"jina-de", INFER__PRE_GPT2, 0},
        {"gigachat", INFER__PRE_GPT2, 0}, {"jina-v1-en", INFER__PRE_GPT2, 0},
        {"jina-v2-es", INFER__PRE_GPT2, 0}, {"jina-v2-de", INFER__PRE_GPT2, 0},
        {"jina-v2-code", INFER__PRE_GPT2, 0}, {"roberta-bpe", INFER__PRE_GPT2, 0},
        {"refact", INFER__PRE_STARCODER, 0},
        {"command-r", INFER__PRE_STARCODER, 0},
        {"qwen2", INFER__PRE_QWEN2, 0}, {"deepseek-r1-qwen", INFER__PRE_QWEN2, 0},
        {"stablelm2", INFER__PRE_QWEN2, 0},
        {"olmo", INFER__PRE_GPT2, 0},
        {"dbrx", INFER__PRE_LLAMA3, 0}, {"smaug-bpe", INFER__PRE_LLAMA3, 0},
        {"poro-chat", INFER__PRE_PORO, 0},
        {"chatglm-bpe", INFER__PRE_LLAMA3, 4},
        {"viking", INFER__PRE_VIKING, 0},
        {"jais", INFER__PRE_GPT2, 0},
        {"tekken", INFER__PRE_TEKKEN, 1},
        {"gpt-4o", INFER__PRE_GPT4O, 0}, {"llama4", INFER__PRE_GPT4O, 0},
        {"smollm", INFER__PRE_STARCODER, 0},
        {"codeshell", INFER__PRE_STARCODER, 0},
        {"bloom", INFER__PRE_PORO, 0},
        {"gpt3-finnish", INFER__PRE_PORO, 0},
        {"exaone", INFER__PRE_STARCODER, 0},
        {"chameleon", INFER__PRE_CHAMELEON, 2},
        {"minerva-7b", INFER__PRE_STARCODER, 0},
        {"megrez", INFER__PRE_QWEN2, 0},
    };
    size_t i;
    for (i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (!infer__str_eq(s, n, map[i].name)) continue;
        *pre = map[i].pre;
        if (map[i].flags & 1) *ignore_merges = 1, *add_bos = 1;
        if (map[i].flags & 2) *add_bos = 1;
        if (map[i].flags & 4) *no_bos = 1;
        return 1;
    }
    return 0;
}

static void infer__vocab_free(infer_vocab *v) {
    if (!v) return;
    INFER_FREE(v->tok_map.slots);
    INFER_FREE(v->merge_map.slots);
    INFER_FREE(v->tokens);
    INFER_FREE(v->arena);
    INFER_FREE(v->special);
    INFER_FREE(v->special_lex);
    INFER_FREE(v->eog);
    INFER_FREE(v);
}

typedef struct infer__special_key {
    const char *text;
    int32_t len;
    int32_t rank; /* id when sorting by length; index into special[] in special_lex */
} infer__special_key;

/* Longest text first, then lower id (llama.cpp's std::sort leaves ties
   unspecified; equal-length tokens split alike unless one contains the
   other). */
static int infer__special_cmp_len(const void *a, const void *b) {
    const infer__special_key *x = (const infer__special_key *)a, *y = (const infer__special_key *)b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Byte order, a prefix before its extensions. */
static int infer__special_cmp_lex(const void *a, const void *b) {
    const infer__special_key *x = (const infer__special_key *)a, *y = (const infer__special_key *)b;
    int c = memcmp(x->text, y->text, (size_t)INFER__MIN(x->len, y->len));
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Orders special[] longest first and builds the byte-ordered index that
   lets a text be searched for all of them in one pass: Gemma has 6,414,
   and looking for each in turn over a long text was most of its time. */
static int infer__special_sort(infer_vocab *v) {
    int i, n = v->n_special;
    infer__special_key *k = (infer__special_key *)INFER_MALLOC(sizeof *k * (size_t)(n ? n : 1));
    if (!k) return 0;
    for (i = 0; i < n; i++) {
        k[i].text = v->tokens[v->special[i]].text, k[i].len = v->tokens[v->special[i]].len;
        k[i].rank = v->special[i];
    }
    qsort(k, (size_t)n, sizeof *k, infer__special_cmp_len);
    for (i = 0; i < n; i++) v->special[i] = k[i].rank, k[i].rank = i;
    qsort(k, (size_t)n, sizeof *k, infer__special_cmp_lex);
    for (i = 0; i < 256; i++) v->special_first[i][0] = v->special_first[i][1] = 0;
    for (i = n; i-- > 0;) {
        unsigned char c = (unsigned char)k[i].text[0];
        if (v->special_first[c][1] == 0) v->special_first[c][1] = i + 1;
        v->special_first[c][0] = i;
    }
    v->special_lex = k;
    return 1;
}

/* Marks in present[r] each special[r] that occurs somewhere in text:
   at every position, narrows the byte-ordered list one byte at a time. */
static void infer__special_present(const infer_vocab *v, const char *text, size_t len, unsigned char *present) {
    const infer__special_key *k = v->special_lex;
    size_t i, d;
    for (i = 0; i < len; i++) {
        int32_t lo = v->special_first[(unsigned char)text[i]][0], hi = v->special_first[(unsigned char)text[i]][1];
        for (d = 1; lo < hi; d++) {
            int32_t a, b;
            unsigned char c;
            /* texts that end here match (they sort first: all in range share d bytes) */
            while (lo < hi && (size_t)k[lo].len == d) present[k[lo++].rank] = 1;
            if (lo >= hi || i + d >= len) break;
            c = (unsigned char)text[i + d];
            for (a = lo, b = hi; a < b;) { /* first with byte d >= c */
                int32_t m = a + (b - a) / 2;
                if ((unsigned char)k[m].text[d] < c) a = m + 1;
                else b = m;
            }
            lo = a;
            for (b = hi; a < b;) { /* first with byte d > c */
                int32_t m = a + (b - a) / 2;
                if ((unsigned char)k[m].text[d] <= c) a = m + 1;
                else b = m;
            }
            hi = a;
        }
    }
}

static infer_token infer__vocab_find_text(const infer_vocab *v, const char *s) {
    return infer__tok_lookup(v, s, strlen(s));
}

static int infer__eog_add(infer_vocab *v, infer_token t) {
    int i;
    if (t < 0 || t >= v->n_tokens) return 0;
    for (i = 0; i < v->n_eog; i++)
        if (v->eog[i] == t) return 0;
    v->eog[v->n_eog++] = t;
    return 1;
}

/* Every tokenizer.ggml.*_token_id key (BOS, EOS, EOT, padding, FIM, ...)
   names one of the n tokens, or is the "none" of its integer type: -1, or
   all ones in an unsigned type. */
static int infer__vocab_check_special_ids(const infer_gguf *g, int64_t n, infer_error *err) {
    static const char prefix[] = "tokenizer.ggml.", suffix[] = "_token_id";
    int64_t i;
    for (i = 0; i < g->n_kv; i++) {
        const infer__kv *kv = &g->kv[i];
        size_t len = strlen(kv->key);
        uint64_t u64 = 0;
        int64_t id, none;
        if (len < sizeof prefix - 1 + sizeof suffix - 1 || memcmp(kv->key, prefix, sizeof prefix - 1) != 0 ||
            strcmp(kv->key + len - (sizeof suffix - 1), suffix) != 0)
            continue;
        if (!infer__gguf_get_int(g, kv->key, &id)) {
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: %.96s is not an integer", kv->key);
            return 0;
        }
        switch (kv->type) {
        case INFER_GGUF_TYPE_UINT8: none = UINT8_MAX; break;
        case INFER_GGUF_TYPE_UINT16: none = UINT16_MAX; break;
        case INFER_GGUF_TYPE_UINT32: none = UINT32_MAX; break;
        case INFER_GGUF_TYPE_UINT64: /* read as an int64 it is clamped: look at the bits */
            memcpy(&u64, kv->data, 8);
            none = u64 == UINT64_MAX ? id : -1;
            break;
        default: none = -1;
        }
        if (id == none) continue;
        if (id < 0 || id >= n) {
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: %.96s = %lld is not a token (the vocabulary has %lld tokens)",
                             kv->key, (long long)id, (long long)n);
            return 0;
        }
    }
    return 1;
}

static infer_vocab *infer__vocab_load(const infer_gguf *g, infer_error *err) {
    /* Tokens llama.cpp finds by their text when no key names them: the
       first present one of each list becomes that id and is forced to
       CONTROL (which matters: user-defined tokens are split out even
       without parse_special, control ones are not). Lists: EOT, EOM, FIM
       prefix, suffix, middle, pad, repo, separator. */
#define INFER__FW "\xef\xbd\x9c" /* fullwidth vertical bar */
#define INFER__SP "\xe2\x96\x81" /* U+2581 */
    static const char *const by_text[8][11] = {
        {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
         "<" INFER__FW "end" INFER__SP "of" INFER__SP "sentence" INFER__FW ">", "<end_of_utterance>", NULL},
        {"<|eom_id|>", NULL},
        {"<|fim_prefix|>", "<fim-prefix>", "<" INFER__FW "fim" INFER__SP "begin" INFER__FW ">", "<PRE>", INFER__SP "<PRE>", NULL},
        {"<|fim_suffix|>", "<fim-suffix>", "<" INFER__FW "fim" INFER__SP "hole" INFER__FW ">", "<SUF>", INFER__SP "<SUF>", NULL},
        {"<|fim_middle|>", "<fim-middle>", "<" INFER__FW "fim" INFER__SP "end" INFER__FW ">", "<MID>", INFER__SP "<MID>", NULL},
        {"<|fim_pad|>", "<fim-pad>", "<PAD>", NULL},
        {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", NULL},
        {"<|file_sep|>", NULL}};
#undef INFER__FW
#undef INFER__SP
    static const char *const by_text_key[8][2] = {
        {"tokenizer.ggml.eot_token_id", NULL}, {"tokenizer.ggml.eom_token_id", NULL},
        {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
        {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
        {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
        {"tokenizer.ggml.fim_pad_token_id", NULL}, {"tokenizer.ggml.fim_rep_token_id", NULL},
        {"tokenizer.ggml.fim_sep_token_id", NULL}};
    /* every one of these ends generation, and is forced to CONTROL (llama.cpp's
       list; <|end_of_text|> and <end_of_utterance> joined it later in 2025) */
    static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
                                            "<turn|>", "<|tool_response>"}; /* the last two Gemma 4's */
    static const char *const id_keys[3] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.unknown_token_id"};
    infer_token by_text_id[8];
    infer_vocab *v;
    infer__str model, pre;
    const infer__kv *ktok, *kscore, *ktype, *kmerge;
    size_t arena_size = 0, pos = 0;
    int64_t i, n, nm = 0;
    int has_pre, no_bos = 0, flag;
    int64_t ival;
    infer_token *ids[3];
    char name_lc[64];

    if (!g) {
        infer__set_error(err, INFER_ERR_ARG, "vocab: no GGUF given");
        return NULL;
    }
    if (!infer__gguf_get_str(g, "tokenizer.ggml.model", &model)) {
        infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.model missing or not a string");
        return NULL;
    }
    v = (infer_vocab *)infer__calloc(1, sizeof *v);
    if (!v) {
        infer__set_error(err, INFER_ERR_NOMEM, "vocab: out of memory");
        return NULL;
    }
    if (infer__str_eq(model.p, (size_t)model.n, "llama")) {
        v->type = INFER__VOCAB_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_bos = 1, v->add_space_prefix = 1;
        v->pre = INFER__PRE_DEFAULT;
    } else if (infer__str_eq(model.p, (size_t)model.n, "gpt2")) {
        v->type = INFER__VOCAB_BPE;
        v->bos = 11, v->eos = 11, v->unk = -1;
        v->pre = INFER__PRE_DEFAULT;
        has_pre = infer__gguf_get_str(g, "tokenizer.ggml.pre", &pre);
        /* a missing key means "default", as llama.cpp (which only warns) */
        if (!has_pre)
            snprintf(v->warning, sizeof v->warning,
                     "no tokenizer.ggml.pre in this file: using the default pre-tokenizer (older GGUF?)");
        if (has_pre && !infer__pre_from_name(pre.p, (size_t)pre.n, &v->pre, &v->ignore_merges, &v->add_bos, &no_bos)) {
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "vocab: unknown pre-tokenizer type '%.*s'",
                             (int)INFER__MIN(pre.n, 64), pre.p);
            goto fail;
        }
        if (no_bos) v->bos = -1;
    } else {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "vocab: unsupported tokenizer model '%.*s'",
                         (int)INFER__MIN(model.n, 64), model.p);
        goto fail;
    }
    if (infer__gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &flag)) v->add_space_prefix = flag;
    if (v->type == INFER__VOCAB_BPE) v->add_space_prefix = 0; /* BPE ignores it */

    ktok = infer__gguf_kv(g, "tokenizer.ggml.tokens");
    if (!ktok || ktok->type != INFER_GGUF_TYPE_ARRAY || ktok->arr_type != INFER_GGUF_TYPE_STRING || !ktok->strs) {
        infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.tokens missing or not a string array");
        goto fail;
    }
    n = (int64_t)ktok->arr_n;
    if (n <= 0 || n > INT32_MAX / 2) {
        infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.tokens has %lld entries", (long long)n);
        goto fail;
    }
    kscore = infer__gguf_kv(g, "tokenizer.ggml.scores");
    if (kscore && (kscore->type != INFER_GGUF_TYPE_ARRAY || kscore->arr_type != INFER_GGUF_TYPE_FLOAT32 ||
                   kscore->arr_n != (uint64_t)n)) {
        infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.scores is not %lld float32 values", (long long)n);
        goto fail;
    }
    ktype = infer__gguf_kv(g, "tokenizer.ggml.token_type");
    if (ktype && (ktype->type != INFER_GGUF_TYPE_ARRAY ||
                  (ktype->arr_type != INFER_GGUF_TYPE_INT32 && ktype->arr_type != INFER_GGUF_TYPE_UINT32) ||
                  ktype->arr_n != (uint64_t)n)) {
        infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.token_type is not %lld int32 values", (long long)n);
        goto fail;
    }
    kmerge = NULL;
    if (v->type == INFER__VOCAB_BPE) {
        kmerge = infer__gguf_kv(g, "tokenizer.ggml.merges");
        if (!kmerge) {
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: gpt2 tokenizer without tokenizer.ggml.merges");
            goto fail;
        }
        if (kmerge->type != INFER_GGUF_TYPE_ARRAY || kmerge->arr_type != INFER_GGUF_TYPE_STRING || (!kmerge->strs && kmerge->arr_n)) {
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.merges is not a string array");
            goto fail;
        }
        nm = (int64_t)kmerge->arr_n;
        if (nm > INT32_MAX) {
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: too many merges");
            goto fail;
        }
    }

    /* one arena for all token texts and merge keys, each NUL-terminated;
       empty tokens become "[EMPTY_i]" as in llama.cpp */
    for (i = 0; i < n; i++) {
        /* lengths are ints inside the tokenizer; no real token comes near this */
        if (ktok->strs[i].n > (1u << 20)) {
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.tokens[%lld] is %llu bytes long (at most 2^20)",
                             (long long)i, (unsigned long long)ktok->strs[i].n);
            goto fail;
        }
        arena_size += (size_t)ktok->strs[i].n + (ktok->strs[i].n ? 1 : 24);
    }
    for (i = 0; i < nm; i++) arena_size += (size_t)kmerge->strs[i].n + 2;
    v->arena = (char *)INFER_MALLOC(arena_size ? arena_size : 1);
    v->tokens = (infer__token_data *)infer__calloc((size_t)n, sizeof *v->tokens);
    if (!v->arena || !v->tokens || !infer__strmap_init(&v->tok_map, (size_t)n) ||
        !infer__strmap_init(&v->merge_map, (size_t)nm)) {
        infer__set_error(err, INFER_ERR_NOMEM, "vocab: out of memory for %lld tokens", (long long)n);
        goto fail;
    }
    v->n_tokens = (int)n;
    for (i = 0; i < n; i++) {
        infer__token_data *t = &v->tokens[i];
        const infer__str *s = &ktok->strs[i];
        char *dst = v->arena + pos;
        if (s->n) {
            memcpy(dst, s->p, (size_t)s->n);
            dst[s->n] = 0;
            t->len = (int32_t)s->n;
        } else {
            t->len = snprintf(dst, 24, "[EMPTY_%lld]", (long long)i);
        }
        pos += (size_t)t->len + 1;
        t->text = dst;
        t->attr = INFER__ATTR_NORMAL;
        if (kscore) memcpy(&t->score, kscore->data + 4 * i, 4);
        if (t->score != t->score) { /* merges would be ranked by a NaN */
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.scores[%lld] is NaN", (long long)i);
            goto fail;
        }
        if (ktype) {
            int32_t tt;
            memcpy(&tt, ktype->data + 4 * i, 4);
            switch (tt) {
            case 1: t->attr = INFER__ATTR_NORMAL; break;
            case 2: t->attr = INFER__ATTR_UNKNOWN; break;
            case 3: t->attr = INFER__ATTR_CONTROL; break;
            case 4: t->attr = INFER__ATTR_USER_DEFINED; break;
            case 5: t->attr = INFER__ATTR_UNUSED; break;
            case 6: t->attr = INFER__ATTR_BYTE; break;
            default: t->attr = INFER__ATTR_UNDEFINED; break;
            }
        }
        if (t->len > v->max_token_len) v->max_token_len = t->len;
        /* a text with a NUL inside cannot be a C-string key; it stays
           reachable by id only */
        if ((int32_t)strlen(dst) == t->len) {
            infer__strmap_slot *slot = infer__strmap_slot_of(&v->tok_map, dst, (size_t)t->len, NULL, 0);
            slot->key = dst, slot->len = (uint32_t)t->len, slot->value = (int32_t)i; /* a later twin wins */
        }
    }
    /* SPM text can be merged piece by piece, split before each word's
       U+2581, when no token could span such a split: none holds U+2581 after
       something else. Keeps the merge heap small on long inputs. */
    v->spm_chunks = v->type == INFER__VOCAB_SPM;
    for (i = 0; i < n && v->spm_chunks; i++) {
        const char *t = v->tokens[i].text, *end = t + v->tokens[i].len;
        while (end - t >= 3 && !memcmp(t, "\xe2\x96\x81", 3)) t += 3;
        for (; end - t >= 3; t++)
            if (!memcmp(t, "\xe2\x96\x81", 3)) v->spm_chunks = 0;
    }
    for (i = 0; i < nm; i++) {
        const infer__str *s = &kmerge->strs[i];
        char *dst = v->arena + pos;
        const char *sp = s->n > 1 ? (const char *)memchr(s->p + 1, ' ', (size_t)s->n - 1) : NULL;
        size_t a, b;
        infer__strmap_slot *slot;
        /* a merge joins two tokens of the vocabulary: anything else is a
           table that does not belong to these tokens */
        if (!sp) {
            infer__set_error(err, INFER_ERR_FORMAT, "vocab: tokenizer.ggml.merges[%lld] '%.*s' is not two tokens and a space",
                             (long long)i, (int)INFER__MIN(s->n, 40), s->p);
            goto fail;
        }
        a = (size_t)(sp - s->p), b = (size_t)s->n - a - 1;
        if (infer__tok_lookup(v, s->p, a) < 0 || infer__tok_lookup(v, sp + 1, b) < 0) {
            int first_bad = infer__tok_lookup(v, s->p, a) < 0;
            infer__set_error(err, INFER_ERR_FORMAT,
                             "vocab: tokenizer.ggml.merges[%lld] '%.*s' names '%.*s', which is not a token", (long long)i,
                             (int)INFER__MIN(s->n, 40), s->p, (int)INFER__MIN(first_bad ? a : b, 40),
                             first_bad ? s->p : sp + 1);
            goto fail;
        }
        memcpy(dst, s->p, a);
        dst[a] = (char)0xff;
        memcpy(dst + a + 1, sp + 1, b);
        dst[a + 1 + b] = 0;
        if (strlen(dst) != a + 1 + b) continue;
        slot = infer__strmap_slot_of(&v->merge_map, dst, a + 1 + b, NULL, 0);
        if (slot->key) continue; /* the first occurrence of a pair keeps its rank */
        slot->key = dst, slot->len = (uint32_t)(a + 1 + b), slot->value = (int32_t)i;
        pos += a + b + 2;
        if ((int)(a + b) > v->max_merge_len) v->max_merge_len = (int)(a + b);
    }

    /* special ids from the file: each must be a token of the vocabulary or
       the all-ones value that converters write for "none" (which keeps the
       default, as llama.cpp does) */
    if (!infer__vocab_check_special_ids(g, n, err)) goto fail;
    ids[0] = &v->bos, ids[1] = &v->eos, ids[2] = &v->unk;
    for (i = 0; i < 3; i++)
        if (infer__gguf_get_int(g, id_keys[i], &ival) && ival >= 0 && ival < n) *ids[i] = (infer_token)ival;
    if (infer__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &flag)) v->add_bos = flag;
    if (v->bos >= n) v->bos = -1;
    if (v->eos >= n) v->eos = -1;
    if (v->unk >= n) v->unk = -1;
    for (i = 0; i < 8; i++) {
        int j;
        by_text_id[i] = -1;
        for (j = 0; j < 2; j++)
            if (by_text_key[i][j] && infer__gguf_get_int(g, by_text_key[i][j], &ival) && ival >= 0 && ival < n)
                by_text_id[i] = (infer_token)ival;
        for (j = 0; by_text_id[i] < 0 && by_text[i][j]; j++) {
            infer_token t = infer__vocab_find_text(v, by_text[i][j]);
            if (t < 0) continue;
            by_text_id[i] = t;
            if (!(v->tokens[t].attr & INFER__ATTR_CONTROL)) v->tokens[t].attr = INFER__ATTR_CONTROL;
        }
    }
    v->eot = by_text_id[0], v->eom = by_text_id[1];
    v->eog = (infer_token *)INFER_MALLOC(sizeof(infer_token) * 32); /* 3 FIM + the names + EOS, EOT, EOM */
    if (!v->eog) {
        infer__set_error(err, INFER_ERR_NOMEM, "vocab: out of memory");
        goto fail;
    }
    for (i = 5; i < 8; i++) infer__eog_add(v, by_text_id[i]); /* FIM pad, repo, sep */
    for (i = 0; i < (int64_t)(sizeof eog_names / sizeof eog_names[0]); i++) {
        infer_token t = infer__vocab_find_text(v, eog_names[i]);
        if (t < 0) continue;
        infer__eog_add(v, t);
        if (!(v->tokens[t].attr & INFER__ATTR_CONTROL)) v->tokens[t].attr = INFER__ATTR_CONTROL;
    }
    infer__eog_add(v, v->eos);
    infer__eog_add(v, v->eot);
    infer__eog_add(v, v->eom);
    /* gpt-oss's harmony (llama.cpp's workaround): <|return|> and <|call|>
       end a reply, <|end|> only one of its messages (the analysis goes on
       to the answer); the message tokens are text, as the reply parser and
       tool grammars read them */
    if (infer__vocab_find_text(v, "<|return|>") >= 0 && infer__vocab_find_text(v, "<|call|>") >= 0 &&
        infer__vocab_find_text(v, "<|channel|>") >= 0) {
        static const char *const shown[] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>"};
        infer_token end = infer__vocab_find_text(v, "<|end|>");
        int k;
        infer__eog_add(v, infer__vocab_find_text(v, "<|return|>"));
        infer__eog_add(v, infer__vocab_find_text(v, "<|call|>"));
        for (k = 0; k < v->n_eog; k++)
            if (v->eog[k] == end) v->eog[k--] = v->eog[--v->n_eog];
        for (k = 0; k < 5; k++) {
            infer_token t = infer__vocab_find_text(v, shown[k]);
            if (t >= 0) v->tokens[t].attr = INFER__ATTR_USER_DEFINED;
        }
    }
    /* Gemma 4 (as llama.cpp keeps them for its parser): the call, string
       and thinking-channel tokens decode to their text, which the reply
       parser and tool grammars read */
    if (infer__vocab_find_text(v, "<|tool_call>") >= 0 && infer__vocab_find_text(v, "<tool_call|>") >= 0) {
        static const char *const shown[] = {"<|tool_call>", "<tool_call|>", "<|\"|>", "<|channel>", "<channel|>"};
        int k;
        for (k = 0; k < 5; k++) {
            infer_token t = infer__vocab_find_text(v, shown[k]);
            if (t >= 0) v->tokens[t].attr = INFER__ATTR_USER_DEFINED;
        }
    }

    /* special tokens, longest first: matched before anything else */
    v->special = (infer_token *)INFER_MALLOC(sizeof(infer_token) * (size_t)n);
    if (!v->special) {
        infer__set_error(err, INFER_ERR_NOMEM, "vocab: out of memory");
        goto fail;
    }
    for (i = 0; i < n; i++)
        if (v->tokens[i].attr & (INFER__ATTR_CONTROL | INFER__ATTR_USER_DEFINED | INFER__ATTR_UNKNOWN))
            v->special[v->n_special++] = (infer_token)i;
    if (!infer__special_sort(v)) {
        infer__set_error(err, INFER_ERR_NOMEM, "vocab: out of memory");
        goto fail;
    }

    /* Phi-3: llama.cpp strips whitespace after its special tokens, chosen by
       the model's name */
    {
        infer__str name;
        if (infer__gguf_get_str(g, "general.name", &name)) {
            size_t k, m = INFER__MIN((size_t)name.n, sizeof name_lc - 1);
            for (k = 0; k < m; k++) name_lc[k] = (char)((name.p[k] >= 'A' && name.p[k] <= 'Z') ? name.p[k] + 32 : name.p[k]);
            name_lc[m] = 0;
            if (strstr(name_lc, "phi-3") || strstr(name_lc, "phi3")) {
                infer_token t;
                for (k = 0; k < (size_t)v->n_special; k++) v->tokens[v->special[k]].attr |= INFER__ATTR_RSTRIP;
                if ((t = infer__vocab_find_text(v, "</s>")) >= 0) v->tokens[t].attr |= INFER__ATTR_RSTRIP;
                if ((t = infer__vocab_find_text(v, "<unk>")) >= 0) v->tokens[t].attr &= ~INFER__ATTR_RSTRIP;
                if ((t = infer__vocab_find_text(v, "<s>")) >= 0) v->tokens[t].attr &= ~INFER__ATTR_RSTRIP;
                if ((t = infer__vocab_find_text(v, "<|endoftext|>")) >= 0) v->tokens[t].attr &= ~INFER__ATTR_RSTRIP;
            }
        }
    }

    /* SPM byte fallback: <0xNN>, else the byte as a one-byte token, else
       <unk> (llama.cpp throws there; the vocab simply has no way to say it) */
    for (i = 0; i < 256; i++) {
        char buf[8];
        infer_token t;
        snprintf(buf, sizeof buf, "<0x%02X>", (unsigned)i);
        t = infer__vocab_find_text(v, buf);
        if (t < 0 && i > 0) {
            buf[0] = (char)i;
            t = infer__tok_lookup(v, buf, 1);
        }
        v->byte_tok[i] = t >= 0 ? t : v->unk;
    }
    return v;
fail:
    infer__vocab_free(v);
    return NULL;
}

static int infer__vocab_n_tokens(const infer_vocab *v) { return v ? v->n_tokens : 0; }
static infer_token infer__vocab_bos(const infer_vocab *v) { return v ? v->bos : -1; }
static infer_token infer__vocab_eos(const infer_vocab *v) { return v ? v->eos : -1; }
static int infer__vocab_add_bos(const infer_vocab *v) { return v ? v->add_bos && v->bos >= 0 : 0; }
static int infer__vocab_is_eog(const infer_vocab *v, infer_token t) {
    int i;
    if (!v || t < 0) return 0;
    for (i = 0; i < v->n_eog; i++)
        if (v->eog[i] == t) return 1;
    return 0;
}

/* ---- output buffer ------------------------------------------------------- */

typedef struct infer__tokbuf {
    infer_token *out;
    int max;
    int n;
} infer__tokbuf;

static void infer__emit(infer__tokbuf *b, infer_token t) {
    if (b->n < b->max) b->out[b->n] = t;
    if (b->n < INT_MAX) b->n++;
}

/* ---- SentencePiece-style merging ------------------------------------------ */

typedef struct infer__sym {
    int prev, next;
    size_t off, n; /* bytes in the text; n = 0 once merged away */
} infer__sym;

typedef struct infer__bigram {
    float score; /* SPM: higher first */
    int rank;    /* BPE: lower first */
    int left, right;
    size_t size;
} infer__bigram;

/* Binary heap ordered by a "before" relation; both tokenizers break ties by
   the leftmost pair, as llama.cpp's priority queues do. */
static int infer__bigram_before(const infer__bigram *a, const infer__bigram *b, int spm) {
    if (spm) {
        if (a->score != b->score) return a->score > b->score;
    } else if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->left < b->left;
}

static int infer__heap_push(infer__bigram **h, infer__bigram x, int spm) {
    size_t i;
    if (!infer__arr_push(*h, x)) return 0;
    i = stbds_arrlenu(*h) - 1;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!infer__bigram_before(&(*h)[i], &(*h)[p], spm)) break;
        x = (*h)[i], (*h)[i] = (*h)[p], (*h)[p] = x;
        i = p;
    }
    return 1;
}

static infer__bigram infer__heap_pop(infer__bigram *h, int spm) {
    infer__bigram top = h[0], x;
    size_t n = stbds_arrlenu(h) - 1, i = 0;
    h[0] = h[n];
    stbds_arrsetlen(h, n);
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && infer__bigram_before(&h[l], &h[m], spm)) m = l;
        if (r < n && infer__bigram_before(&h[r], &h[m], spm)) m = r;
        if (m == i) break;
        x = h[i], h[i] = h[m], h[m] = x;
        i = m;
    }
    return top;
}

typedef struct infer__work {
    infer__sym *syms;
    infer__bigram *heap;
    char *buf;          /* escaped / byte-encoded text */
    uint32_t *cpts;
    unsigned char *flags;
    size_t *offs, *offs2;
    int nomem; /* an allocation failed: the tokens are incomplete */
} infer__work;

static void infer__work_free(infer__work *w) {
    stbds_arrfree(w->syms);
    stbds_arrfree(w->heap);
    stbds_arrfree(w->buf);
    stbds_arrfree(w->cpts);
    stbds_arrfree(w->flags);
    stbds_arrfree(w->offs);
    stbds_arrfree(w->offs2);
}

static void infer__spm_try_bigram(const infer_vocab *v, infer__work *w, const char *text, int left, int right) {
    infer__bigram b;
    infer_token t;
    size_t n;
    if (left < 0 || right < 0) return;
    n = w->syms[left].n + w->syms[right].n;
    t = infer__tok_lookup(v, text + w->syms[left].off, n);
    if (t < 0) return;
    b.score = v->tokens[t].score;
    b.rank = 0;
    b.left = left, b.right = right, b.size = n;
    if (!infer__heap_push(&w->heap, b, 1)) w->nomem = 1;
}

static void infer__bpe_try_bigram(const infer_vocab *v, infer__work *w, const char *word, int left, int right);

/* Splits text into UTF-8 characters, linked in w->syms, and merges
   neighbours best-first from a heap until no pair is a token (SPM: by
   score) or a merge (BPE: by rank). Returns the number of symbols; the
   survivors are those with n > 0, in order from index 0. -1 (w->nomem)
   when memory ran out. */
static int infer__merge_symbols(const infer_vocab *v, infer__work *w, const char *text, size_t len, int spm) {
    size_t off = 0;
    int i, nsym;
    stbds_arrsetlen(w->syms, 0);
    stbds_arrsetlen(w->heap, 0);
    if (!infer__arr_fit(w->syms, len)) { /* a symbol per byte at most */
        w->nomem = 1;
        return -1;
    }
    while (off < len) {
        infer__sym s;
        s.off = off;
        s.n = INFER__MIN(infer__utf8_len((unsigned char)text[off]), len - off);
        off += s.n;
        s.prev = (int)stbds_arrlen(w->syms) - 1;
        s.next = off == len ? -1 : (int)stbds_arrlen(w->syms) + 1;
        stbds_arrput(w->syms, s);
    }
    nsym = (int)stbds_arrlen(w->syms);
    for (i = 1; i < nsym; i++)
        if (spm) infer__spm_try_bigram(v, w, text, i - 1, i);
        else infer__bpe_try_bigram(v, w, text, i - 1, i);
    while (stbds_arrlen(w->heap) > 0 && !w->nomem) {
        infer__bigram b = infer__heap_pop(w->heap, spm);
        infer__sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = b.left;
        if (spm) {
            infer__spm_try_bigram(v, w, text, l->prev, b.left);
            infer__spm_try_bigram(v, w, text, b.left, l->next);
        } else {
            infer__bpe_try_bigram(v, w, text, l->prev, b.left);
            infer__bpe_try_bigram(v, w, text, b.left, l->next);
        }
    }
    return w->nomem ? -1 : nsym;
}

/* One SPM fragment (already escaped): merge the best-scoring adjacent pair
   that forms a token until none does, then emit tokens, falling back to
   bytes for symbols that are not tokens. */
static void infer__spm_tokenize(const infer_vocab *v, infer__work *w, const char *text, size_t len, infer__tokbuf *out) {
    int i, nsym;
    nsym = infer__merge_symbols(v, w, text, len, 1);
    for (i = nsym > 0 ? 0 : -1; i != -1; i = w->syms[i].next) {
        const infer__sym *s = &w->syms[i];
        infer_token t = infer__tok_lookup(v, text + s->off, s->n);
        size_t k;
        if (t >= 0) {
            infer__emit(out, t);
            continue;
        }
        for (k = 0; k < s->n; k++) {
            infer_token bt = v->byte_tok[(unsigned char)text[s->off + k]];
            if (bt >= 0) infer__emit(out, bt);
        }
    }
}

static int infer__is_sp(const char *s, size_t n, size_t i) {
    return i + 3 <= n && (unsigned char)s[i] == 0xe2 && (unsigned char)s[i + 1] == 0x96 && (unsigned char)s[i + 2] == 0x81;
}

/* Runs infer__spm_tokenize on pieces of at least a few hundred bytes, cut
   at symbol boundaries where a U+2581 follows another symbol, when the
   vocab allows it (v->spm_chunks); the result is the same as one pass. */
static void infer__spm_chunked(const infer_vocab *v, infer__work *w, const char *text, size_t len, infer__tokbuf *out) {
    size_t start = 0, pos = 0, prev = 0;
    int prev_sp = 1;
    if (!v->spm_chunks) {
        infer__spm_tokenize(v, w, text, len, out);
        return;
    }
    while (pos < len) {
        int sp = infer__is_sp(text, len, pos);
        if (sp && !prev_sp && pos - start >= 256) {
            infer__spm_tokenize(v, w, text + start, pos - start, out);
            if (w->nomem) return;
            start = pos;
        }
        prev = pos;
        pos += INFER__MIN(infer__utf8_len((unsigned char)text[pos]), len - pos);
        prev_sp = sp && pos - prev == 3;
    }
    if (start < len) infer__spm_tokenize(v, w, text + start, len - start, out);
}

/* ---- pre-tokenizer: split text into words ------------------------------ */

#define INFER__WS(w, i) ((w)->flags[i] & INFER__U_WHITESPACE)
#define INFER__CAT(w, i) ((w)->flags[i] & INFER__U_CATMASK)

typedef struct infer__split {
    const uint32_t *c;
    const unsigned char *f;
} infer__split;

static int infer__is_L(const infer__split *s, size_t i) { return (s->f[i] & INFER__U_CATMASK) == INFER__U_LETTER; }
static int infer__is_N(const infer__split *s, size_t i) { return (s->f[i] & INFER__U_CATMASK) == INFER__U_NUMBER; }
static int infer__is_ws(const infer__split *s, size_t i) { return (s->f[i] & INFER__U_WHITESPACE) != 0; }
static int infer__is_P(const infer__split *s, size_t i) { return (s->f[i] & INFER__U_CATMASK) == INFER__U_PUNCT; }
static int infer__is_M(const infer__split *s, size_t i) { return (s->f[i] & INFER__U_CATMASK) == INFER__U_MARK; }
/* \p{S} as llama.cpp's collapsed regexes see it: its ASCII list lacks '~' */
static int infer__is_S(const infer__split *s, size_t i) {
    return (s->f[i] & INFER__U_CATMASK) == INFER__U_SYMBOL && s->c[i] != '~';
}
/* std::wregex sees non-ASCII whitespace as U+000B, so it never falls in
   an explicit range */
static uint32_t infer__wide(const infer__split *s, size_t i) {
    return s->c[i] > 0x7f && (s->f[i] & INFER__U_WHITESPACE) ? 0x0b : s->c[i];
}
static int infer__is_nl(const infer__split *s, size_t i) { return s->c[i] == '\r' || s->c[i] == '\n'; }

/* The length of the piece at pos that both custom splitters end with:
   \s+(?!\S) (a run of spaces less the last, which goes to the next word),
   else \s+, else one character no rule took. */
static size_t infer__split_space_run(const infer__split *s, size_t pos, size_t e) {
    size_t n = 0;
    while (pos + n < e && infer__is_ws(s, pos + n)) n++;
    if (n > 1 && pos + n < e) return n - 1;
    return n > 0 ? n : 1;
}

/* llama.cpp's custom GPT-2 splitter:
   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void infer__split_gpt2(const infer__split *s, size_t b, size_t e, size_t **out) {
    size_t pos = b;
    while (pos < e) {
        uint32_t c = s->c[pos];
        size_t q, n;
        if (c == '\'' && pos + 1 < e) {
            uint32_t c1 = s->c[pos + 1];
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                stbds_arrput(*out, 2);
                pos += 2;
                continue;
            }
            if (pos + 2 < e) {
                uint32_t c2 = s->c[pos + 2];
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    stbds_arrput(*out, 3);
                    pos += 3;
                    continue;
                }
            }
        }
        q = pos + (c == ' ' && pos + 1 < e);
        if (c == ' ' && pos + 1 >= e) q = e; /* a lone final space: no class */
        if (q < e && infer__is_L(s, q)) {
            while (q < e && infer__is_L(s, q)) q++;
            stbds_arrput(*out, q - pos);
            pos = q;
            continue;
        }
        if (q < e && infer__is_N(s, q)) {
            while (q < e && infer__is_N(s, q)) q++;
            stbds_arrput(*out, q - pos);
            pos = q;
            continue;
        }
        if (q < e && !infer__is_ws(s, q)) {
            while (q < e && !infer__is_ws(s, q) && !infer__is_L(s, q) && !infer__is_N(s, q)) q++;
            stbds_arrput(*out, q - pos);
            pos = q;
            continue;
        }
        n = infer__split_space_run(s, pos, e);
        stbds_arrput(*out, n);
        pos += n;
    }
}

/* llama.cpp's custom Llama-3 splitter (maxdig 3); with maxdig 1 it is also
   exactly what the Qwen2 regex gives:
   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static void infer__split_llama3(const infer__split *s, size_t b, size_t e, size_t **out, size_t maxdig) {
    size_t pos = b;
    while (pos < e) {
        uint32_t c = s->c[pos];
        size_t q, n, last_nl;
        if (c == '\'' && pos + 1 < e) {
            uint32_t c1 = s->c[pos + 1];
            if (c1 < 128 && c1 >= 'A' && c1 <= 'Z') c1 += 32;
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                stbds_arrput(*out, 2);
                pos += 2;
                continue;
            }
            if (pos + 2 < e) {
                uint32_t c2 = s->c[pos + 2];
                if (c2 >= 'A' && c2 <= 'Z') c2 += 32;
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    stbds_arrput(*out, 3);
                    pos += 3;
                    continue;
                }
            }
        }
        if (!(c == '\r' || c == '\n' || infer__is_N(s, pos))) {
            if (infer__is_L(s, pos) || (pos + 1 < e && infer__is_L(s, pos + 1))) {
                q = pos + 1;
                while (q < e && infer__is_L(s, q)) q++;
                stbds_arrput(*out, q - pos);
                pos = q;
                continue;
            }
        }
        if (infer__is_N(s, pos)) {
            q = pos;
            while (q < e && infer__is_N(s, q) && q - pos < maxdig) q++;
            stbds_arrput(*out, q - pos);
            pos = q;
            continue;
        }
        q = pos + (c == ' ');
        if (q < e && !infer__is_ws(s, q) && !infer__is_L(s, q) && !infer__is_N(s, q)) {
            while (q < e && !infer__is_ws(s, q) && !infer__is_L(s, q) && !infer__is_N(s, q)) q++;
            while (q < e && infer__is_nl(s, q)) q++;
            stbds_arrput(*out, q - pos);
            pos = q;
            continue;
        }
        last_nl = 0;
        for (q = pos; q < e && infer__is_ws(s, q); q++)
            if (infer__is_nl(s, q)) last_nl = q + 1;
        if (last_nl > 0) {
            stbds_arrput(*out, last_nl - pos);
            pos = last_nl;
            continue;
        }
        n = infer__split_space_run(s, pos, e);
        stbds_arrput(*out, n);
        pos += n;
    }
}

/* Regex steps that llama.cpp runs through std::regex. Each matcher returns
   the length of the match starting at p (0: none), following ECMAScript's
   ordered alternation and greedy backtracking for its particular regex. */
typedef size_t (*infer__matcher)(const infer__split *s, size_t p, size_t e);

static size_t infer__run(const infer__split *s, size_t p, size_t e, int (*cls)(const infer__split *, size_t)) {
    size_t q = p;
    while (q < e && cls(s, q)) q++;
    return q - p;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ : the usual whitespace tail */
static size_t infer__m_ws_tail(const infer__split *s, size_t p, size_t e) {
    size_t q = p, last_nl = 0;
    while (q < e && infer__is_ws(s, q)) {
        if (infer__is_nl(s, q)) last_nl = q + 1;
        q++;
    }
    if (last_nl) return last_nl - p;
    if (q - p > 1 && q < e) return q - p - 1;
    return q - p;
}

static int infer__c_N(const infer__split *s, size_t i) { return infer__is_N(s, i); }
static int infer__c_L(const infer__split *s, size_t i) { return infer__is_L(s, i); }
static int infer__c_P(const infer__split *s, size_t i) { return infer__is_P(s, i); }
static int infer__c_ws(const infer__split *s, size_t i) { return infer__is_ws(s, i); }

/* \p{N}+ */
static size_t infer__m_num_run(const infer__split *s, size_t p, size_t e) { return infer__run(s, p, e, infer__c_N); }
/* \p{N} */
static size_t infer__m_num1(const infer__split *s, size_t p, size_t e) { (void)e; return infer__is_N(s, p) ? 1 : 0; }
/* \p{N}{1,3} */
static size_t infer__m_num3(const infer__split *s, size_t p, size_t e) {
    size_t q = p;
    while (q < e && q - p < 3 && infer__is_N(s, q)) q++;
    return q - p;
}
/* [0-9][0-9][0-9] */
static size_t infer__m_digit3(const infer__split *s, size_t p, size_t e) {
    size_t k;
    if (e - p < 3) return 0;
    for (k = 0; k < 3; k++)
        if (s->c[p + k] < '0' || s->c[p + k] > '9') return 0;
    return 3;
}
/* [\r\n] */
static size_t infer__m_nl(const infer__split *s, size_t p, size_t e) { (void)e; return infer__is_nl(s, p) ? 1 : 0; }

static int infer__c_punct_default(const infer__split *s, size_t i) {
    uint32_t c = s->c[i];
    return infer__is_P(s, i) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
}
/* [\p{P}\$\+<=>\^~\|]+ */
static size_t infer__m_punct_default(const infer__split *s, size_t p, size_t e) { return infer__run(s, p, e, infer__c_punct_default); }
static int infer__c_punct_falcon(const infer__split *s, size_t i) { return infer__c_punct_default(s, i) || s->c[i] == '`'; }
/* [\p{P}\$\+<=>\^~\|`]+ */
static size_t infer__m_punct_falcon(const infer__split *s, size_t p, size_t e) { return infer__run(s, p, e, infer__c_punct_falcon); }

/* \s?X+ for a class X that excludes whitespace */
static size_t infer__opt_ws_run(const infer__split *s, size_t p, size_t e, int (*cls)(const infer__split *, size_t)) {
    size_t n;
    if (infer__is_ws(s, p)) {
        n = p + 1 < e ? infer__run(s, p + 1, e, cls) : 0;
        return n ? n + 1 : 0;
    }
    return infer__run(s, p, e, cls);
}
/* \s?\p{L}+ */
static size_t infer__m_ws_letters(const infer__split *s, size_t p, size_t e) { return infer__opt_ws_run(s, p, e, infer__c_L); }
/* \s?\p{P}+ */
static size_t infer__m_ws_punct(const infer__split *s, size_t p, size_t e) { return infer__opt_ws_run(s, p, e, infer__c_P); }

/* the letter ranges of DeepSeek LLM's second regex */
static const uint32_t infer__dsllm_letters[][2] = {
    {0x41, 0x5a}, {0x61, 0x7a}, {0xb5, 0xb5}, {0xc0, 0xd6}, {0xd8, 0xf6}, {0xf8, 0x1ba}, {0x1bc, 0x1bf},
    {0x1c4, 0x293}, {0x295, 0x2af}, {0x370, 0x373}, {0x376, 0x377}, {0x37b, 0x37d}, {0x37f, 0x37f},
    {0x386, 0x386}, {0x388, 0x38a}, {0x38c, 0x38c}, {0x38e, 0x3a1}, {0x3a3, 0x3f5}, {0x3f7, 0x481},
    {0x48a, 0x52f}, {0x531, 0x556}, {0x10a0, 0x10c5}, {0x13a0, 0x13f5}, {0x13f8, 0x13fd}, {0x1c90, 0x1cba},
    {0x1cbd, 0x1cbf}, {0x1d00, 0x1d2b}, {0x1d6b, 0x1d77}, {0x1d79, 0x1d9a}, {0x1e00, 0x1f15}, {0x1f18, 0x1f1d},
    {0x1f20, 0x1f45}, {0x1f48, 0x1f4d}, {0x1f50, 0x1f57}, {0x1f59, 0x1f59}, {0x1f5b, 0x1f5b}, {0x1f5d, 0x1f5d},
    {0x1f5f, 0x1f7d}, {0x1f80, 0x1fb4}, {0x1fb6, 0x1fbc}, {0x1fbe, 0x1fbe}, {0x1fc2, 0x1fc4}, {0x1fc6, 0x1fcc},
    {0x1fd0, 0x1fd3}, {0x1fd6, 0x1fdb}, {0x1fe0, 0x1fec}, {0x1ff2, 0x1ff4}, {0x1ff6, 0x1ffc}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210a, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211d}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212a, 0x212d}, {0x212f, 0x2134}, {0x2139, 0x2139}, {0x213c, 0x213f}, {0x2145, 0x2149},
    {0x214e, 0x214e}, {0x2183, 0x2184}, {0x2c00, 0x2c7b}, {0x2c7e, 0x2ce4}, {0x2ceb, 0x2cee}, {0x2cf2, 0x2cf3},
    {0xa640, 0xa66d}, {0xa680, 0xa69b}, {0xa722, 0xa76f}, {0xa771, 0xa787}, {0xa78b, 0xa78e}, {0xab70, 0xabbf},
    {0xfb00, 0xfb06}, {0xfb13, 0xfb17}, {0xff21, 0xff3a}, {0xff41, 0xff5a}, {0x10400, 0x1044f}, {0x104b0, 0x104d3},
    {0x104d8, 0x104fb}, {0x10c80, 0x10cb2}, {0x10cc0, 0x10cf2}, {0x118a0, 0x118df}, {0x1e900, 0x1e943}};

static int infer__in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (c >= r[i][0] && c <= r[i][1]) return 1;
    return 0;
}
static int infer__c_dsllm_letter(const infer__split *s, size_t i) {
    return infer__in_ranges(infer__wide(s, i), infer__dsllm_letters, sizeof infer__dsllm_letters / sizeof infer__dsllm_letters[0]);
}
static int infer__c_dsllm_punct(const infer__split *s, size_t i) {
    static const uint32_t r[][2] = {{0x21, 0x2f}, {0x3a, 0x7e}, {0xff01, 0xff0f}, {0xff1a, 0xff5e}, {0x2018, 0x201f}, {0x3000, 0x3002}};
    return infer__in_ranges(infer__wide(s, i), r, sizeof r / sizeof r[0]);
}
static int infer__c_cjk_dsllm(const infer__split *s, size_t i) {
    static const uint32_t r[][2] = {{0x4e00, 0x9fa5}, {0x0800, 0x4e00}, {0xac00, 0xd7ff}};
    return infer__in_ranges(infer__wide(s, i), r, sizeof r / sizeof r[0]);
}
static int infer__c_cjk_ds3(const infer__split *s, size_t i) {
    static const uint32_t r[][2] = {{0x4e00, 0x9fa5}, {0x3040, 0x309f}, {0x30a0, 0x30ff}};
    return infer__in_ranges(infer__wide(s, i), r, sizeof r / sizeof r[0]);
}
/* \s?[A-Za-zµÀ-ÖØ-ö...]+ */
static size_t infer__m_dsllm_letters(const infer__split *s, size_t p, size_t e) { return infer__opt_ws_run(s, p, e, infer__c_dsllm_letter); }
/* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
static size_t infer__m_dsllm_punct(const infer__split *s, size_t p, size_t e) { return infer__opt_ws_run(s, p, e, infer__c_dsllm_punct); }
/* \s+$ (the end is the end of the piece being split) */
static size_t infer__m_ws_end(const infer__split *s, size_t p, size_t e) {
    size_t n = infer__run(s, p, e, infer__c_ws);
    return p + n == e ? n : 0;
}
/* [一-龥ࠀ-一가-퟿]+ */
static size_t infer__m_cjk_dsllm(const infer__split *s, size_t p, size_t e) { return infer__run(s, p, e, infer__c_cjk_dsllm); }
/* [一-龥぀-ゟ゠-ヿ]+ */
static size_t infer__m_cjk_ds3(const infer__split *s, size_t p, size_t e) { return infer__run(s, p, e, infer__c_cjk_ds3); }

static int infer__ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) || (c >= 0x7b && c <= 0x7e);
}
static int infer__c_ascii_alpha(const infer__split *s, size_t i) {
    uint32_t c = s->c[i];
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
static int infer__c_LM(const infer__split *s, size_t i) { return infer__is_L(s, i) || infer__is_M(s, i); }
static int infer__c_PS(const infer__split *s, size_t i) { return infer__is_P(s, i) || infer__is_S(s, i); }
/* DeepSeek V3:
   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
    ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t infer__m_ds3(const infer__split *s, size_t p, size_t e) {
    size_t n;
    if (infer__ascii_punct(s->c[p]) && p + 1 < e && (n = infer__run(s, p + 1, e, infer__c_ascii_alpha)) > 0) return n + 1;
    if (!infer__is_nl(s, p) && !infer__is_L(s, p) && !infer__is_P(s, p) && !infer__is_S(s, p) && p + 1 < e &&
        (n = infer__run(s, p + 1, e, infer__c_LM)) > 0)
        return n + 1;
    if ((n = infer__run(s, p, e, infer__c_LM)) > 0) return n;
    n = s->c[p] == ' ' && p + 1 < e && infer__c_PS(s, p + 1) ? 1 : 0;
    if (infer__c_PS(s, p + n)) {
        size_t q = p + n;
        q += infer__run(s, q, e, infer__c_PS);
        while (q < e && infer__is_nl(s, q)) q++;
        return q - p;
    }
    return infer__m_ws_tail(s, p, e);
}

/* Tekken (Mistral Nemo), with llama.cpp's lookahead rewrite of its classes:
   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|
   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}|
    ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
   Non-ASCII letters are both "not a-z" and "not A-Z". */
static int infer__c_tk_upper(const infer__split *s, size_t i) { return infer__is_L(s, i) && !(s->c[i] >= 'a' && s->c[i] <= 'z'); }
static int infer__c_tk_lower(const infer__split *s, size_t i) { return infer__is_L(s, i) && !(s->c[i] >= 'A' && s->c[i] <= 'Z'); }
static int infer__c_not_wsLN(const infer__split *s, size_t i) { return !infer__is_ws(s, i) && !infer__is_L(s, i) && !infer__is_N(s, i); }

/* The two cased-word alternatives Tekken and GPT-4o share:
   [^\r\n\p{L}\p{N}]?U*W+ | [^\r\n\p{L}\p{N}]?U+W*  (U: not a-z, W: not A-Z,
   letters both). Returns the end of the match, or p when neither matches. */
static size_t infer__cased_word(const infer__split *s, size_t p, size_t e) {
    size_t q = p, u, k;
    if (!infer__is_nl(s, p) && !infer__is_L(s, p) && !infer__is_N(s, p) && p + 1 < e && infer__is_L(s, p + 1)) q = p + 1;
    /* alternative 1: U* W+ ; the greedy U* gives back until a W can start */
    u = q + infer__run(s, q, e, infer__c_tk_upper);
    for (k = u + 1; k-- > q;) {
        if (k < e && infer__c_tk_lower(s, k)) return k + infer__run(s, k, e, infer__c_tk_lower);
    }
    /* alternative 2: U+ W* */
    if (u > q) return u + infer__run(s, u, e, infer__c_tk_lower);
    return p;
}

/*  ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ : the tail both end with */
static size_t infer__m_symbols_ws(const infer__split *s, size_t p, size_t e) {
    size_t n = s->c[p] == ' ' && p + 1 < e && infer__c_not_wsLN(s, p + 1) ? 1 : 0;
    if (infer__c_not_wsLN(s, p + n)) {
        size_t q = p + n;
        q += infer__run(s, q, e, infer__c_not_wsLN);
        while (q < e && (infer__is_nl(s, q) || s->c[q] == '/')) q++;
        return q - p;
    }
    return infer__m_ws_tail(s, p, e);
}

static size_t infer__m_tekken(const infer__split *s, size_t p, size_t e) {
    size_t q = infer__cased_word(s, p, e);
    if (q > p) return q - p;
    if (infer__is_N(s, p)) return 1;
    return infer__m_symbols_ws(s, p, e);
}

/* GPT-4o (Phi-4-mini; llama.cpp's rewrite as for Tekken): the cased words
   take an English contraction after them, numbers go in threes:
   [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}|
    ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
   with C = '[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]. */
static size_t infer__m_gpt4o(const infer__split *s, size_t p, size_t e) {
    size_t q = infer__cased_word(s, p, e);
    if (q > p) {
        if (q + 1 < e && s->c[q] == '\'') {
            uint32_t c1 = s->c[q + 1] | 0x20, c2 = q + 2 < e ? s->c[q + 2] | 0x20 : 0;
            if (s->c[q + 1] < 0x80 && (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')) return q + 2 - p;
            if (s->c[q + 1] < 0x80 && q + 2 < e && s->c[q + 2] < 0x80 &&
                ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')))
                return q + 3 - p;
        }
        return q - p;
    }
    if (infer__is_N(s, p)) return infer__m_num3(s, p, e);
    return infer__m_symbols_ws(s, p, e);
}

static int infer__c_poro(const infer__split *s, size_t i) {
    uint32_t c = infer__wide(s, i);
    if (c < 0x80 && (c == ' ' || (c >= 0x09 && c <= 0x0d))) return 0;
    switch (c) {
    case '(': case ')': case '|': case '.': case ',': case '!': case '?':
    case 0x2026: case 0x3002: case 0xff0c: case 0x3001: case 0x0964: case 0x06d4: case 0x060c:
        return 0;
    default:
        return 1;
    }
}
/*  ?[^(\s|.,!?…。，、।۔،)]+ */
static size_t infer__m_poro(const infer__split *s, size_t p, size_t e) {
    size_t n;
    if (s->c[p] == ' ' && p + 1 < e && (n = infer__run(s, p + 1, e, infer__c_poro)) > 0) return n + 1;
    return infer__run(s, p, e, infer__c_poro);
}

/* Chameleon's steps */
static size_t infer__m_cham_sentinel(const infer__split *s, size_t p, size_t e) { /* <sentinel:[0-9]+> */
    static const char lit[] = "<sentinel:";
    size_t k, q;
    if (e - p < sizeof lit) return 0;
    for (k = 0; k < sizeof lit - 1; k++)
        if (s->c[p + k] != (unsigned char)lit[k]) return 0;
    q = p + k;
    while (q < e && s->c[q] >= '0' && s->c[q] <= '9') q++;
    if (q == p + k || q >= e || s->c[q] != '>') return 0;
    return q + 1 - p;
}
static size_t infer__m_cham_image(const infer__split *s, size_t p, size_t e) { /* (IMGIMG)((A|B|...|I){1,4})Z */
    static const char lit[] = "IMGIMG";
    size_t k, q;
    if (e - p < sizeof lit + 1) return 0;
    for (k = 0; k < sizeof lit - 1; k++)
        if (s->c[p + k] != (unsigned char)lit[k]) return 0;
    q = p + k;
    while (q < e && q - (p + k) < 4 && s->c[q] >= 'A' && s->c[q] <= 'I') q++;
    if (q == p + k || q >= e || s->c[q] != 'Z') return 0;
    return q + 1 - p;
}
static size_t infer__m_cham_space(const infer__split *s, size_t p, size_t e) { /* ([\t\n]|    |  ) */
    size_t k;
    if (s->c[p] == '\t' || s->c[p] == '\n') return 1;
    for (k = 0; k < 4 && p + k < e && s->c[p + k] == ' '; k++) {}
    return k == 4 ? 4 : k >= 2 ? 2 : 0;
}
static size_t infer__m_cham_punct(const infer__split *s, size_t p, size_t e) { /* [\p{P}!-/:-@\[-`{-~] */
    (void)e;
    return infer__is_P(s, p) || infer__ascii_punct(s->c[p]) ? 1 : 0;
}

/* Applies one regex step to every piece: matches and the gaps between them
   both become pieces, as llama.cpp's std::regex splitter does. */
static void infer__split_regex(const infer__split *s, const size_t *in, size_t n_in, size_t **out, infer__matcher m) {
    size_t i, start = 0;
    for (i = 0; i < n_in; i++) {
        size_t b = start, e = start + in[i], p = b, gap = b;
        start = e;
        while (p < e) {
            size_t n = m(s, p, e);
            if (n) {
                if (p > gap) stbds_arrput(*out, p - gap);
                stbds_arrput(*out, n);
                p += n;
                gap = p;
            } else {
                p++;
            }
        }
        if (gap < e) stbds_arrput(*out, e - gap);
    }
}

enum { INFER__STEP_GPT2 = 1, INFER__STEP_LLAMA3, INFER__STEP_QWEN2 };

/* The steps of each pre-tokenizer: a matcher, or a custom splitter code. */
typedef struct infer__step {
    int custom;
    infer__matcher m;
} infer__step;

static int infer__pre_steps(int pre, infer__step *st) {
    int n = 0;
#define INFER__M(fn) (st[n].custom = 0, st[n].m = (fn), n++)
#define INFER__C(code) (st[n].custom = (code), st[n].m = NULL, n++)
    switch (pre) {
    case INFER__PRE_LLAMA3: INFER__C(INFER__STEP_LLAMA3); break;
    case INFER__PRE_QWEN2: INFER__C(INFER__STEP_QWEN2); break;
    case INFER__PRE_DEEPSEEK_LLM:
        INFER__M(infer__m_nl), INFER__M(infer__m_dsllm_letters), INFER__M(infer__m_dsllm_punct);
        INFER__M(infer__m_ws_end), INFER__M(infer__m_cjk_dsllm), INFER__M(infer__m_num_run);
        break;
    case INFER__PRE_DEEPSEEK3: INFER__M(infer__m_num3), INFER__M(infer__m_cjk_ds3), INFER__M(infer__m_ds3); break;
    case INFER__PRE_DEEPSEEK_CODER:
        INFER__M(infer__m_nl), INFER__M(infer__m_ws_letters), INFER__M(infer__m_ws_punct);
        INFER__M(infer__m_cjk_dsllm), INFER__M(infer__m_num1);
        break;
    case INFER__PRE_FALCON: INFER__M(infer__m_punct_falcon), INFER__C(INFER__STEP_GPT2), INFER__M(infer__m_digit3); break;
    case INFER__PRE_STARCODER: INFER__M(infer__m_num1), INFER__C(INFER__STEP_GPT2); break;
    case INFER__PRE_GPT2: INFER__C(INFER__STEP_GPT2); break;
    case INFER__PRE_PORO: INFER__M(infer__m_poro); break;
    case INFER__PRE_VIKING: INFER__M(infer__m_poro), INFER__M(infer__m_num1); break;
    case INFER__PRE_TEKKEN: INFER__M(infer__m_tekken); break;
    case INFER__PRE_GPT4O: INFER__M(infer__m_gpt4o); break;
    case INFER__PRE_CHAMELEON:
        INFER__M(infer__m_cham_sentinel), INFER__M(infer__m_cham_image), INFER__M(infer__m_cham_space);
        INFER__M(infer__m_num1), INFER__M(infer__m_cham_punct), INFER__C(INFER__STEP_GPT2);
        break;
    default:
        INFER__M(infer__m_punct_default), INFER__C(INFER__STEP_GPT2), INFER__M(infer__m_num_run), INFER__M(infer__m_digit3);
        break;
    }
#undef INFER__M
#undef INFER__C
    return n;
}

/* ---- byte-level BPE ------------------------------------------------------ */

static void infer__bpe_try_bigram(const infer_vocab *v, infer__work *w, const char *word, int left, int right) {
    infer__bigram b;
    const infer__sym *l, *r;
    int rank;
    if (left < 0 || right < 0) return;
    l = &w->syms[left], r = &w->syms[right];
    rank = infer__merge_rank(v, word + l->off, l->n, word + r->off, r->n);
    if (rank < 0) return;
    b.score = 0;
    b.rank = rank;
    b.left = left, b.right = right, b.size = l->n + r->n;
    if (!infer__heap_push(&w->heap, b, 0)) w->nomem = 1;
}

/* Merges one byte-encoded word by merge rank and emits its tokens. */
static void infer__bpe_word(const infer_vocab *v, infer__work *w, const char *word, size_t len, infer__tokbuf *out) {
    int i, nsym;
    infer_token t;
    if (v->ignore_merges && (t = infer__tok_lookup(v, word, len)) >= 0) {
        infer__emit(out, t);
        return;
    }
    nsym = infer__merge_symbols(v, w, word, len, 0);
    for (i = nsym > 0 ? 0 : -1; i != -1; i = w->syms[i].next) {
        const infer__sym *s = &w->syms[i];
        size_t k;
        if (s->n == 0) continue;
        t = infer__tok_lookup(v, word + s->off, s->n);
        if (t >= 0) {
            infer__emit(out, t);
            continue;
        }
        /* not a token: llama.cpp tries each byte on its own */
        for (k = 0; k < s->n; k++) {
            infer_token bt = infer__tok_lookup(v, word + s->off + k, 1);
            if (bt >= 0) infer__emit(out, bt);
        }
    }
}

static void infer__bpe_tokenize(const infer_vocab *v, infer__work *w, const char *text, size_t len, infer__tokbuf *out) {
    infer__step steps[8];
    infer__split sp;
    size_t i, ncp, start, *tmp;
    int k, nsteps;
    char enc[4];
    stbds_arrsetlen(w->cpts, 0);
    stbds_arrsetlen(w->flags, 0);
    /* room for a code point per byte, and a piece per code point in each
       split step (every piece holds at least one): the arrputs below and
       the splitters' never allocate */
    if (!infer__arr_fit(w->cpts, len) || !infer__arr_fit(w->flags, len) || !infer__arr_fit(w->offs, len + 1) ||
        !infer__arr_fit(w->offs2, len + 1)) {
        w->nomem = 1;
        return;
    }
    for (i = 0; i < len;) {
        uint32_t c = infer__utf8_decode((const unsigned char *)text, len, &i);
        stbds_arrput(w->cpts, c);
        stbds_arrput(w->flags, (unsigned char)infer__unicode_flags(c));
    }
    ncp = stbds_arrlenu(w->cpts);
    if (ncp == 0) return;
    sp.c = w->cpts, sp.f = w->flags;
    stbds_arrsetlen(w->offs, 0);
    stbds_arrput(w->offs, ncp);
    nsteps = infer__pre_steps(v->pre, steps);
    for (k = 0; k < nsteps; k++) {
        stbds_arrsetlen(w->offs2, 0);
        if (steps[k].custom) {
            size_t j, b = 0;
            for (j = 0; j < stbds_arrlenu(w->offs); j++) {
                size_t e = b + w->offs[j];
                if (steps[k].custom == INFER__STEP_GPT2) infer__split_gpt2(&sp, b, e, &w->offs2);
                else infer__split_llama3(&sp, b, e, &w->offs2, steps[k].custom == INFER__STEP_LLAMA3 ? 3 : 1);
                b = e;
            }
        } else {
            infer__split_regex(&sp, w->offs, stbds_arrlenu(w->offs), &w->offs2, steps[k].m);
        }
        tmp = w->offs, w->offs = w->offs2, w->offs2 = tmp;
    }
    /* each word: UTF-8, then every byte through GPT-2's byte map */
    start = 0;
    for (i = 0; i < stbds_arrlenu(w->offs); i++) {
        size_t j, e = start + w->offs[i];
        stbds_arrsetlen(w->buf, 0);
        for (j = start; j < e; j++) {
            size_t nb = infer__utf8_encode(w->cpts[j], enc), q;
            for (q = 0; q < nb; q++) {
                char e2[4];
                size_t n2 = infer__utf8_encode(infer__byte_to_cp((unsigned char)enc[q]), e2), r;
                if (!infer__arr_room(w->buf, n2)) {
                    w->nomem = 1;
                    return;
                }
                for (r = 0; r < n2; r++) stbds_arrput(w->buf, e2[r]);
            }
        }
        if (stbds_arrlenu(w->buf)) infer__bpe_word(v, w, w->buf, stbds_arrlenu(w->buf), out);
        if (w->nomem) return;
        start = e;
    }
}

/* ---- special-token partition and the entry point ------------------------- */

typedef struct infer__frag {
    infer_token tok; /* -1: raw text */
    size_t off, len;
} infer__frag;

static int infer__isspace_ascii(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static const char *infer__find(const char *hay, size_t n, const char *needle, size_t m) {
    const char *p = hay, *end = hay + n;
    if (m == 0 || m > n) return NULL;
    while ((size_t)(end - p) >= m) {
        p = (const char *)memchr(p, needle[0], (size_t)(end - p) - m + 1);
        if (!p) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
        p++;
    }
    return NULL;
}

/* Splits raw fragments around every occurrence of the special tokens, the
   longest first (llama.cpp's tokenizer_st_partition). Without parse_special
   only user-defined tokens are split out. NULL when memory ran out. */
static infer__frag *infer__partition(const infer_vocab *v, const char *text, size_t len, int parse_special) {
    infer__frag *cur = NULL, *next = NULL, f;
    unsigned char *present = v->n_special ? (unsigned char *)infer__calloc((size_t)v->n_special, 1) : NULL;
    int s;
    f.tok = -1, f.off = 0, f.len = len;
    if (!infer__arr_push(cur, f)) goto nomem;
    if (present) infer__special_present(v, text, len, present);
    for (s = 0; s < v->n_special; s++) {
        infer_token id = v->special[s];
        const infer__token_data *td = &v->tokens[id];
        size_t i;
        int found = 0;
        if (present && !present[s]) continue; /* nowhere in the text, so in no fragment */
        if (!parse_special && (td->attr & (INFER__ATTR_CONTROL | INFER__ATTR_UNKNOWN))) continue;
        for (i = 0; i < stbds_arrlenu(cur) && !found; i++)
            if (cur[i].tok < 0 && infer__find(text + cur[i].off, cur[i].len, td->text, (size_t)td->len)) found = 1;
        if (!found) continue;
        stbds_arrsetlen(next, 0);
        for (i = 0; i < stbds_arrlenu(cur); i++) {
            size_t off = cur[i].off, n = cur[i].len;
            const char *m;
            if (cur[i].tok >= 0) {
                if (!infer__arr_push(next, cur[i])) goto nomem;
                continue;
            }
            while (n > 0 && (m = infer__find(text + off, n, td->text, (size_t)td->len)) != NULL) {
                size_t lo = (size_t)(m - text), ln = lo - off;
                if (td->attr & INFER__ATTR_LSTRIP)
                    while (ln > 0 && infer__isspace_ascii(text[off + ln - 1])) ln--;
                /* two pieces at most */
                if (!infer__arr_room(next, 2)) goto nomem;
                if (ln > 0) f.tok = -1, f.off = off, f.len = ln, stbds_arrput(next, f);
                f.tok = id, f.off = lo, f.len = (size_t)td->len;
                stbds_arrput(next, f);
                n -= lo - off + (size_t)td->len;
                off = lo + (size_t)td->len;
                if (td->attr & INFER__ATTR_RSTRIP)
                    while (n > 0 && infer__isspace_ascii(text[off])) off++, n--;
            }
            if (n > 0) {
                f.tok = -1, f.off = off, f.len = n;
                if (!infer__arr_push(next, f)) goto nomem;
            }
        }
        {
            infer__frag *t = cur;
            cur = next, next = t;
        }
    }
    stbds_arrfree(next);
    INFER_FREE(present);
    return cur;
nomem:
    stbds_arrfree(cur);
    stbds_arrfree(next);
    INFER_FREE(present);
    return NULL;
}

static int infer__vocab_tokenize(const infer_vocab *v, const char *text, size_t len, infer_token *out, int max,
                                 int add_bos, int parse_special) {
    infer__tokbuf ob;
    infer__work w;
    infer__frag *frags;
    size_t i;
    int prev_special = 1;
    if (!v || (!text && len) || max < 0 || (!out && max > 0)) return -1;
    ob.out = out, ob.max = max, ob.n = 0;
    memset(&w, 0, sizeof w);
    if (add_bos && v->bos >= 0) infer__emit(&ob, v->bos);
    if (len == 0) return ob.n;
    if (!(frags = infer__partition(v, text, len, parse_special))) return -1;
    for (i = 0; i < stbds_arrlenu(frags) && !w.nomem; i++) {
        const infer__frag *f = &frags[i];
        if (f->tok >= 0) {
            infer__emit(&ob, f->tok);
            prev_special = 1;
            continue;
        }
        if (v->type == INFER__VOCAB_SPM) {
            /* spaces become U+2581; a leading one goes in front of text
               that starts the input or follows a special token */
            size_t k;
            stbds_arrsetlen(w.buf, 0);
            if (!infer__arr_fit(w.buf, f->len + 1)) {
                w.nomem = 1;
                break;
            }
            if (v->add_space_prefix && prev_special) stbds_arrput(w.buf, ' ');
            for (k = 0; k < f->len; k++) stbds_arrput(w.buf, text[f->off + k]);
            {
                size_t n = stbds_arrlenu(w.buf), sp = 0;
                char *esc;
                for (k = 0; k < n; k++) sp += w.buf[k] == ' ';
                esc = (char *)INFER_MALLOC(n + 2 * sp + 1);
                if (!esc) {
                    w.nomem = 1;
                    break;
                }
                for (k = 0, sp = 0; k < n; k++) {
                    if (w.buf[k] == ' ') {
                        esc[sp++] = (char)0xe2, esc[sp++] = (char)0x96, esc[sp++] = (char)0x81;
                    } else {
                        esc[sp++] = w.buf[k];
                    }
                }
                infer__spm_chunked(v, &w, esc, sp, &ob);
                INFER_FREE(esc);
            }
        } else {
            infer__bpe_tokenize(v, &w, text + f->off, f->len, &ob);
        }
        prev_special = 0;
    }
    stbds_arrfree(frags);
    infer__work_free(&w);
    return w.nomem ? -1 : ob.n;
}

/* ---- detokenizing -------------------------------------------------------- */

static int infer__copy_out(char *buf, int size, const char *s, size_t n) {
    if (n > (size_t)INT_MAX) return -1;
    if ((int)n <= size && buf) memcpy(buf, s, n);
    return (int)n;
}

/* A token's bytes, as llama.cpp's token_to_piece with special = false:
   control and unknown tokens give nothing (the reference outputs were made
   that way), user-defined ones their text. */
static int infer__vocab_piece(const infer_vocab *v, infer_token t, char *buf, int size) {
    const infer__token_data *td;
    if (!v || t < 0 || t >= v->n_tokens) return -1;
    if (size < 0) size = 0;
    td = &v->tokens[t];
    if (td->attr & (INFER__ATTR_CONTROL | INFER__ATTR_UNKNOWN)) return 0;
    if (td->attr & INFER__ATTR_USER_DEFINED) return infer__copy_out(buf, size, td->text, (size_t)td->len);
    if (v->type == INFER__VOCAB_SPM) {
        if (td->attr & INFER__ATTR_NORMAL) {
            /* U+2581 -> space */
            size_t i, n = 0;
            for (i = 0; i < (size_t)td->len; i++) {
                if (i + 2 < (size_t)td->len + 0 && (unsigned char)td->text[i] == 0xe2 &&
                    (unsigned char)td->text[i + 1] == 0x96 && (unsigned char)td->text[i + 2] == 0x81) {
                    if ((int)n < size && buf) buf[n] = ' ';
                    n++, i += 2;
                } else {
                    if ((int)n < size && buf) buf[n] = td->text[i];
                    n++;
                }
            }
            return (int)n;
        }
        if (td->attr & INFER__ATTR_BYTE) {
            char b = (char)strtol(td->text + (td->len >= 3 ? 3 : td->len), NULL, 16);
            return infer__copy_out(buf, size, &b, 1);
        }
        return 0;
    }
    if (td->attr & INFER__ATTR_NORMAL) {
        /* byte-level BPE: each code point back to its byte; llama.cpp
           spells out the ones outside the map */
        size_t i = 0, n = 0;
        const unsigned char *s = (const unsigned char *)td->text;
        while (i < (size_t)td->len) {
            size_t i0 = i;
            uint32_t c = infer__utf8_decode(s, (size_t)td->len, &i);
            int b = infer__cp_to_byte(c);
            if (b >= 0) {
                if ((int)n < size && buf) buf[n] = (char)b;
                n++;
            } else {
                char tmp[32];
                size_t k, m;
                char e[4];
                size_t ne = infer__utf8_encode(c, e);
                m = (size_t)snprintf(tmp, sizeof tmp, "[UNK_BYTE_0x");
                for (k = 0; k < ne; k++) m += (size_t)snprintf(tmp + m, sizeof tmp - m, "%02x", (unsigned char)e[k]);
                for (k = 0; k < m; k++, n++)
                    if ((int)n < size && buf) buf[n] = tmp[k];
                for (k = 0; k < (size_t)td->len; k++, n++)
                    if ((int)n < size && buf) buf[n] = td->text[k];
                if ((int)n < size && buf) buf[n] = ']';
                n++;
            }
            (void)i0;
        }
        return (int)n;
    }
    return 0;
}

/* ---- public API ---------------------------------------------------------- */

INFERDEF infer_status infer_tokenize(const infer_model *m, const char *text, size_t len, infer_token *out, int max,
                                     int add_bos, int parse_special, int *n_tokens, infer_error *err) {
    int n;
    if (n_tokens) *n_tokens = 0;
    if (!m || (!text && len) || max < 0 || (!out && max > 0)) {
        infer__set_error(err, INFER_ERR_ARG, "tokenize: %s",
                         !m ? "no model" : !text && len ? "no text" : "max tokens with no room for them");
        return INFER_ERR_ARG;
    }
    /* the arguments are good, so its only failure is memory */
    if ((n = infer__vocab_tokenize(infer__model_vocab(m), text, len, out, max, add_bos, parse_special)) < 0) {
        infer__set_error(err, INFER_ERR_NOMEM, "tokenize: out of memory");
        return INFER_ERR_NOMEM;
    }
    if (n_tokens) *n_tokens = n;
    return INFER_OK;
}

INFERDEF infer_status infer_token_to_piece(const infer_model *m, infer_token t, char *buf, size_t size, size_t *n_out,
                                           infer_error *err) {
    const infer_vocab *v;
    int n, room;
    if (n_out) *n_out = 0;
    if (buf && size) buf[0] = 0;
    if (!m || (!buf && size)) {
        infer__set_error(err, INFER_ERR_ARG, "token to piece: %s", !m ? "no model" : "no buffer");
        return INFER_ERR_ARG;
    }
    v = infer__model_vocab(m);
    if ((n = infer__vocab_piece(v, t, NULL, 0)) < 0) {
        infer__set_error(err, INFER_ERR_ARG, "token to piece: token %d is outside the vocabulary", (int)t);
        return INFER_ERR_ARG;
    }
    if (n_out) *n_out = (size_t)n;
    if (!size) return INFER_OK;
    room = size - 1 > (size_t)INT_MAX ? INT_MAX : (int)(size - 1);
    if (n <= room) {
        infer__vocab_piece(v, t, buf, n);
        buf[n] = 0;
    } else { /* truncated: the whole piece on the heap, its head in buf */
        char *all = (char *)INFER_MALLOC((size_t)n);
        if (!all) {
            if (n_out) *n_out = 0;
            infer__set_error(err, INFER_ERR_NOMEM, "token to piece: out of memory");
            return INFER_ERR_NOMEM;
        }
        infer__vocab_piece(v, t, all, n);
        memcpy(buf, all, (size_t)room);
        buf[room] = 0;
        INFER_FREE(all);
    }
    return INFER_OK;
}

/* Bytes at the end of s[0..n) that start a UTF-8 character not yet complete. */
static int infer__utf8_incomplete_tail(const unsigned char *s, int n) {
    int k;
    for (k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = s[n - k];
        if ((c & 0xc0) == 0x80) continue; /* continuation: look further back */
        if (c >= 0xc0 && c < 0xf8 && (int)infer__utf8_len(c) > k) return k;
        return 0;
    }
    return 0;
}

INFERDEF infer_status infer_detok_push(infer_detok *d, const infer_model *m, infer_token t, char *out, size_t size,
                                       size_t *n_out, infer_error *err) {
    const infer_vocab *v;
    unsigned char *all = (unsigned char *)out;
    int n, total, keep, emit, room;
    if (n_out) *n_out = 0;
    if (!d || !m || !out || !size) {
        infer__set_error(err, INFER_ERR_ARG, "detokenize: %s", !d ? "no detokenizer" : !m ? "no model"
                         : "no room in out");
        return INFER_ERR_ARG;
    }
    out[0] = 0;
    v = infer__model_vocab(m);
    if ((n = infer__vocab_piece(v, t, NULL, 0)) < 0) {
        infer__set_error(err, INFER_ERR_ARG, "detokenize: token %d is outside the vocabulary", (int)t);
        return INFER_ERR_ARG;
    }
    room = size - 1 > (size_t)INT_MAX / 2 ? INT_MAX / 2 : (int)(size - 1);
    total = d->n_pending + n;
    if (total <= room) { /* the pending bytes and the piece, in out */
        memcpy(out, d->pending, (size_t)d->n_pending);
        infer__vocab_piece(v, t, out + d->n_pending, n);
    } else { /* a piece longer than out: put together on the heap */
        if (!(all = (unsigned char *)INFER_MALLOC((size_t)total))) {
            infer__set_error(err, INFER_ERR_NOMEM, "detokenize: out of memory");
            return INFER_ERR_NOMEM;
        }
        memcpy(all, d->pending, (size_t)d->n_pending);
        infer__vocab_piece(v, t, (char *)all + d->n_pending, n);
    }
    keep = infer__utf8_incomplete_tail(all, total);
    emit = total - keep;
    if (emit > room) {
        /* out is too small: cut at a character boundary, drop the rest */
        emit = room;
        while (emit > 0 && (all[emit] & 0xc0) == 0x80) emit--;
    }
    if (all != (unsigned char *)out) memcpy(out, all, (size_t)emit);
    memcpy(d->pending, all + total - keep, (size_t)keep);
    d->n_pending = keep;
    if (all != (unsigned char *)out) INFER_FREE(all);
    out[emit] = 0;
    if (n_out) *n_out = (size_t)emit;
    return INFER_OK;
}

INFERDEF infer_status infer_detok_flush(infer_detok *d, char *out, size_t size, size_t *n_out, infer_error *err) {
    size_t n;
    if (n_out) *n_out = 0;
    if (!d || (!out && size)) {
        infer__set_error(err, INFER_ERR_ARG, "detokenize: %s", !d ? "no detokenizer" : "no buffer");
        return INFER_ERR_ARG;
    }
    n = size ? INFER__MIN((size_t)d->n_pending, size - 1) : 0;
    if (n) memcpy(out, d->pending, n);
    if (size) out[n] = 0;
    d->n_pending = 0;
    if (n_out) *n_out = n;
    return INFER_OK;
}

static const char *infer__vocab_warning(const infer_vocab *v) { return v->warning[0] ? v->warning : NULL; }
