/* quantize.c - writing a GGUF file with its weights in another format.
   Which format each tensor gets follows llama.cpp's llama_tensor_get_type
   (the plain targets as its --pure, the _M mixes as its Q4_K_M / Q5_K_M);
   the rows are converted on a pool of threads and streamed to the file in
   chunks, so only the (mapped) input and one chunk are ever in memory. */
#include "internal.h"

typedef void (*infer__quantize_row_fn)(const float *x, void *dst, int64_t n);

typedef struct infer__qtarget {
    const char *name;
    infer_type type;  /* the format of most weights */
    int mix;          /* 1: llama.cpp's _M rules choose per tensor; 2: MXFP4_MOE's */
    uint32_t ftype;   /* llama.cpp's general.file_type (LLAMA_FTYPE_MOSTLY_*) */
} infer__qtarget;

/* Plain Q4_K and Q5_K have no file type of their own in llama.cpp: its
   quantize tool takes "Q4_K" for Q4_K_M, so a --pure Q4_K file says 15. */
static const infer__qtarget infer__qtargets[INFER_QUANT_TARGET_COUNT] = {
    {"F32", INFER_TYPE_F32, 0, 0},      {"F16", INFER_TYPE_F16, 0, 1},     {"BF16", INFER_TYPE_BF16, 0, 32},
    {"Q8_0", INFER_TYPE_Q8_0, 0, 7},    {"Q4_0", INFER_TYPE_Q4_0, 0, 2},   {"Q4_1", INFER_TYPE_Q4_1, 0, 3},
    {"Q5_0", INFER_TYPE_Q5_0, 0, 8},    {"Q5_1", INFER_TYPE_Q5_1, 0, 9},   {"Q4_K", INFER_TYPE_Q4_K, 0, 15},
    {"Q5_K", INFER_TYPE_Q5_K, 0, 17},   {"Q6_K", INFER_TYPE_Q6_K, 0, 18},  {"Q4_K_M", INFER_TYPE_Q4_K, 1, 15},
    {"Q5_K_M", INFER_TYPE_Q5_K, 1, 17},  {"MXFP4_MOE", INFER_TYPE_MXFP4, 2, 38},
};

INFERDEF infer_quantize_params infer_quantize_default_params(void) {
    infer_quantize_params p;
    memset(&p, 0, sizeof p);
    return p;
}

INFERDEF const char *infer_quant_target_name(infer_quant_target t) {
    return (unsigned)t < INFER_QUANT_TARGET_COUNT ? infer__qtargets[t].name : "unknown";
}

INFERDEF int infer_quant_target_from_name(const char *name) {
    int i;
    size_t j;
    if (!name) return -1;
    for (i = 0; i < INFER_QUANT_TARGET_COUNT; i++) {
        const char *a = infer__qtargets[i].name;
        for (j = 0; a[j] && name[j]; j++) {
            char c = name[j];
            if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
            if (c != a[j]) break;
        }
        if (!a[j] && !name[j]) return i;
    }
    return -1;
}

/* ---- quantizers -------------------------------------------------------- */

/* Converts n floats (a whole number of blocks) to format t, or NULL when
   this build cannot write t. */
static infer__quantize_row_fn infer__qz_row_fn(infer_type t) {
    const infer__type_traits *tt = infer__traits(t);
    if (!tt) return NULL;
    if (t == INFER_TYPE_F32 || t == INFER_TYPE_F16 || t == INFER_TYPE_BF16) return tt->from_float;
    return tt->quantize;
}

/* ---- which format each tensor gets (llama.cpp's rules) ---------------- */

/* What follows restates llama.cpp's llama_tensor_get_type (src/llama-quant.cpp,
   October 2025) for the targets here; the plain targets are its --pure, so
   only the _M mixes go through the per-tensor rules. */

typedef struct infer__qz_plan {
    int has_output;   /* output.weight exists (else token_embd is the output too) */
    int n_attn_v;     /* tensors named attn_v/attn_qkv/attn_kv_b.weight (llama.cpp's n_attention_wv) */
    int n_layer;      /* {arch}.block_count */
    int n_expert;     /* {arch}.expert_count, 0 without experts */
    int n_gqa;
    int is_falcon, is_70b;
} infer__qz_plan;

static int infer__ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* The branches of llama_tensor_get_type that our targets can take, in its
   order: the first whose test a name passes decides. The tests are
   substring tests as llama.cpp's (name.find), so "blk.0.attn_qkv.weight" is
   not an attn_v (it has its own branch), "ffn_down_exps" and
   "ffn_down_shexp" are ffn_down, and "ffn_gate_inp" never gets here (it is
   not quantized). */
enum {
    INFER__QC_OTHER,
    INFER__QC_OUTPUT,     /* output.weight, or token_embd.weight when there is none */
    INFER__QC_TOKEN_EMBD, /* token_embd.weight with an output.weight: left as is */
    INFER__QC_ATTN_V,     /* *attn_v.weight */
    INFER__QC_ATTN_K,     /* *attn_k.weight */
    INFER__QC_ATTN_Q,     /* *attn_q.weight: nothing for our targets */
    INFER__QC_FFN_DOWN,   /* *ffn_down* (experts and shared experts too) */
    INFER__QC_ATTN_OUT,   /* *attn_output.weight */
    INFER__QC_ATTN_QKV    /* *attn_qkv.weight (fused q, k, v as in phi3) */
};

static int infer__qz_category(const char *name, int has_output) {
    int tok = !strcmp(name, "token_embd.weight");
    if (!strcmp(name, "output.weight") || (!has_output && tok)) return INFER__QC_OUTPUT;
    if (tok || !strcmp(name, "per_layer_token_embd.weight")) return INFER__QC_TOKEN_EMBD;
    if (strstr(name, "attn_v.weight")) return INFER__QC_ATTN_V;
    if (strstr(name, "attn_k.weight")) return INFER__QC_ATTN_K;
    if (strstr(name, "attn_q.weight")) return INFER__QC_ATTN_Q;
    if (strstr(name, "ffn_down")) return INFER__QC_FFN_DOWN;
    if (strstr(name, "attn_output.weight")) return INFER__QC_ATTN_OUT;
    if (strstr(name, "attn_qkv.weight")) return INFER__QC_ATTN_QKV;
    return INFER__QC_OTHER;
}

/* llama.cpp's filter of the tensors it quantizes at all (the rest are
   copied as they are): names ending in "weight", at least 2 dimensions
   (3-D expert stacks included), no norms ("_norm.weight": attn_q_norm,
   post_attention_norm, post_ffw_norm...), no expert router
   (ffn_gate_inp.weight), and the small or positional tensors it lists. So
   biases (attn_q.bias...), rope_freqs and rope_factors_long/short (1-D)
   stay as they are. */
static int infer__qz_allowed(const infer__tensor *t) {
    static const char *const never[] = {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel",
                                        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
                                        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
                                        "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
                                        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
                                        "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
                                        "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
                                        "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
                                        ".patch_embd", ".patch_merger", ".rel_pos"};
    size_t i;
    int n_dims = t->n_dims;
    while (n_dims > 1 && t->ne[n_dims - 1] == 1) n_dims--; /* as ggml_n_dims */
    if (n_dims < 2 || !infer__ends_with(t->name, "weight")) return 0;
    if (!strcmp(t->name, "position_embd.weight") || !strcmp(t->name, "token_types.weight")) return 0;
    for (i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strstr(t->name, never[i])) return 0;
    return 1;
}

/* The N of "blk.N." (as llama.cpp's sscanf "blk.%d."), or -1. */
static int infer__qz_layer(const char *name) {
    long v;
    char *end;
    if (strncmp(name, "blk.", 4) != 0) return -1;
    v = strtol(name + 4, &end, 10);
    return end != name + 4 && v >= 0 && v < (1L << 20) ? (int)v : -1;
}

/* llama.cpp visits the tensors sorted by layer (names without one first),
   then by name, and counts attn_v and ffn_down tensors in that order:
   whether a comes before b there. */
static int infer__qz_visits_before(const char *a, const char *b) {
    int la = infer__qz_layer(a), lb = infer__qz_layer(b);
    return la != lb ? la < lb : strcmp(a, b) < 0;
}

/* llama.cpp's counter for tensor i of category cat (i_attention_wv,
   i_ffn_down): how many quantized tensors of that category it visits
   before i. */
static int infer__qz_rank(const infer_gguf *g, const infer__qz_plan *pl, int64_t i, int cat) {
    int64_t j;
    int n = 0;
    for (j = 0; j < g->n_tensors; j++)
        if (j != i && infer__qz_allowed(&g->tensors[j]) &&
            infer__qz_category(g->tensors[j].name, pl->has_output) == cat &&
            infer__qz_visits_before(g->tensors[j].name, g->tensors[i].name))
            n++;
    return n;
}

static int infer__qz_is_arch(infer__str arch, const char *name) {
    return arch.n == strlen(name) && !memcmp(arch.p, name, arch.n);
}

static void infer__qz_plan_init(const infer_gguf *g, infer__qz_plan *pl) {
    infer__str arch;
    char key[160];
    int64_t v, i;
    int n_head = 0, n_head_kv = 0, n_ffn_down = 0;
    memset(pl, 0, sizeof *pl);
    for (i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        if (!strcmp(name, "output.weight")) pl->has_output = 1;
        if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight"))
            pl->n_attn_v++;
        if (strstr(name, "ffn_down") && infer__qz_allowed(&g->tensors[i])) n_ffn_down++;
    }
    pl->n_layer = n_ffn_down; /* without block_count (llama.cpp would refuse the file) */
    pl->n_gqa = 1;
    if (!infer__gguf_get_str(g, "general.architecture", &arch) || arch.n > 64) return;
    pl->is_falcon = infer__qz_is_arch(arch, "falcon");
#define INFER__QZ_KEY(suffix) (snprintf(key, sizeof key, "%.*s." suffix, (int)arch.n, arch.p), key)
    if (infer__gguf_get_int(g, INFER__QZ_KEY("block_count"), &v) && v > 0 && v < (1 << 20)) pl->n_layer = (int)v;
    if (infer__gguf_get_int(g, INFER__QZ_KEY("expert_count"), &v) && v > 0 && v < (1 << 20)) pl->n_expert = (int)v;
    if (infer__gguf_get_int(g, INFER__QZ_KEY("attention.head_count"), &v) && v > 0 && v < (1 << 20)) n_head = (int)v;
    n_head_kv = n_head;
    if (infer__gguf_get_int(g, INFER__QZ_KEY("attention.head_count_kv"), &v) && v > 0 && v < (1 << 20))
        n_head_kv = (int)v;
#undef INFER__QZ_KEY
    if (n_head_kv > 0 && n_head % n_head_kv == 0) pl->n_gqa = n_head / n_head_kv;
    /* llama.cpp's LLM_TYPE_70B (llama_model::load_hparams): 80 layers of
       llama (grouped KV heads, not 8 experts), deci, qwen2 or olmo */
    pl->is_70b = pl->n_layer == 80 &&
                 ((infer__qz_is_arch(arch, "llama") && n_head != n_head_kv && pl->n_expert != 8) ||
                  infer__qz_is_arch(arch, "deci") || infer__qz_is_arch(arch, "qwen2") ||
                  infer__qz_is_arch(arch, "olmo"));
}

static int infer__use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The format tensor i gets, or -1 when its data cannot be converted. */
static int infer__qz_choose(const infer_gguf *g, const infer__qz_plan *pl, int64_t i, infer_quant_target target) {
    const infer__tensor *t = &g->tensors[i];
    const infer__qtarget *q = &infer__qtargets[target];
    infer_type nt = q->type;
    int mix_k5 = q->type == INFER_TYPE_Q5_K;
    if (!infer__qz_allowed(t)) return t->type;
    if (nt == INFER_TYPE_F32 || nt == INFER_TYPE_F16 || nt == INFER_TYPE_BF16) return nt; /* not quantized: no rules */
    if (q->mix == 2) /* llama.cpp's MXFP4_MOE: the experts MXFP4, every other matrix (output too) Q8_0 */
        nt = strstr(t->name, "_exps") ? INFER_TYPE_MXFP4 : INFER_TYPE_Q8_0;
    else if (q->mix) {
        switch (infer__qz_category(t->name, pl->has_output)) {
        case INFER__QC_OUTPUT:
            /* output, or the tied token_embd that is the output: Q6_K, or
               Q8_0 for falcon and rows that are not whole 256-blocks */
            if (pl->is_falcon || t->ne[0] % infer__traits(nt)->block_size != 0) nt = INFER_TYPE_Q8_0;
            else nt = INFER_TYPE_Q6_K;
            break;
        case INFER__QC_ATTN_V:
            /* Q6_K where use_more_bits(i_attention_wv, n_attention_wv); a 70B
               model's Q4_K becomes Q5_K; 8 experts: Q8_0 whatever came before */
            if (infer__use_more_bits(infer__qz_rank(g, pl, i, INFER__QC_ATTN_V), pl->n_attn_v)) nt = INFER_TYPE_Q6_K;
            if (pl->is_70b && nt == INFER_TYPE_Q4_K) nt = INFER_TYPE_Q5_K;
            if (pl->n_expert == 8) nt = INFER_TYPE_Q8_0;
            break;
        case INFER__QC_ATTN_K:
            if (pl->n_expert == 8) nt = INFER_TYPE_Q8_0; /* 8 experts: as attn_v */
            break;
        case INFER__QC_FFN_DOWN: {
            /* the layer: from the name where there are experts (their
               tensors need not come in layer order), else llama.cpp's count
               of ffn_down tensors; out of n_layer */
            int n = pl->n_layer, layer = pl->n_expert > 1 ? infer__qz_layer(t->name) : -1;
            if (layer < 0) layer = infer__qz_rank(g, pl, i, INFER__QC_FFN_DOWN);
            if (!mix_k5 && pl->is_falcon)
                nt = layer < n / 16 ? INFER_TYPE_Q6_K : infer__use_more_bits(layer, n) ? INFER_TYPE_Q5_K : INFER_TYPE_Q4_K;
            else if (infer__use_more_bits(layer, n))
                nt = INFER_TYPE_Q6_K;
            break;
        }
        case INFER__QC_ATTN_OUT:
            if (!pl->is_falcon && pl->n_expert == 8 && !mix_k5) nt = INFER_TYPE_Q5_K; /* Q4_K_M only */
            break;
        case INFER__QC_ATTN_QKV:
            nt = mix_k5 ? INFER_TYPE_Q6_K : INFER_TYPE_Q5_K; /* Q4_K_M: Q5_K, Q5_K_M: Q6_K, in every layer */
            break;
        default: break;
        }
    }
    /* rows that are not whole blocks: llama.cpp's fallback, F16 last */
    if (t->ne[0] % infer__traits(nt)->block_size != 0) {
        switch (nt) {
        case INFER_TYPE_Q2_K: case INFER_TYPE_Q3_K: nt = INFER_TYPE_IQ4_NL; break;
        case INFER_TYPE_Q4_K: nt = INFER_TYPE_Q5_0; break;
        case INFER_TYPE_Q5_K: nt = INFER_TYPE_Q5_1; break;
        case INFER_TYPE_Q6_K: nt = INFER_TYPE_Q8_0; break;
        default: nt = INFER_TYPE_F16; break;
        }
        if (t->ne[0] % infer__traits(nt)->block_size != 0) nt = INFER_TYPE_F16;
    }
    return nt;
}

/* Whether tensor t can be written as nt: copied as it is, or converted
   through floats. */
static int infer__qz_convertible(const infer__tensor *t, infer_type nt, int allow_requantize, infer_error *err) {
    const infer__type_traits *from = infer__traits(t->type);
    int is_float = t->type == INFER_TYPE_F32 || t->type == INFER_TYPE_F16 || t->type == INFER_TYPE_BF16;
    if (nt == t->type) return 1;
    if (!from->to_float) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s: cannot read its %s data as floats", t->name,
                         from->name);
        return 0;
    }
    if (!is_float && !allow_requantize) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED,
                         "tensor %s is already %s: quantizing it again needs allow_requantize (--allow-requantize)",
                         t->name, from->name);
        return 0;
    }
    if (!infer__qz_row_fn(nt)) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s: this build cannot write %s", t->name,
                         infer__traits(nt)->name);
        return 0;
    }
    return 1;
}

INFERDEF int infer_quantize_tensor_type(const infer_gguf *g, int64_t tensor, infer_quant_target t) {
    infer__qz_plan pl;
    if (!g || tensor < 0 || tensor >= g->n_tensors || (unsigned)t >= INFER_QUANT_TARGET_COUNT) return -1;
    infer__qz_plan_init(g, &pl);
    return infer__qz_choose(g, &pl, tensor, t);
}

/* ---- the writer ----------------------------------------------------------- */

typedef struct infer__wr {
    FILE *f;
    uint64_t pos;
    int failed;
} infer__wr;

static void infer__wr_bytes(infer__wr *w, const void *p, size_t n) {
    if (w->failed || !n) return;
    if (fwrite(p, 1, n, w->f) != n) w->failed = 1;
    w->pos += n;
}
static void infer__wr_u32(infer__wr *w, uint32_t v) { infer__wr_bytes(w, &v, 4); }
static void infer__wr_u64(infer__wr *w, uint64_t v) { infer__wr_bytes(w, &v, 8); }
static void infer__wr_str(infer__wr *w, const char *s) {
    infer__wr_u64(w, strlen(s));
    infer__wr_bytes(w, s, strlen(s));
}
static void infer__wr_pad(infer__wr *w, uint64_t align) {
    static const uint8_t zeros[64] = {0};
    while (w->pos % align) infer__wr_bytes(w, zeros, (size_t)INFER__MIN((uint64_t)sizeof zeros, align - w->pos % align));
}

/* The bytes of a value as the file holds them after its type: for an array
   its element type and count, then the elements. */
static const uint8_t *infer__kv_raw(const infer__kv *kv, size_t *len) {
    const uint8_t *start = kv->data, *end;
    if (kv->type == INFER_GGUF_TYPE_ARRAY) {
        start = kv->data - 12;
        if (kv->arr_type == INFER_GGUF_TYPE_STRING)
            end = kv->arr_n ? (const uint8_t *)kv->strs[kv->arr_n - 1].p + kv->strs[kv->arr_n - 1].n : kv->data;
        else
            end = kv->data + kv->arr_n * infer__gguf_scalar_size(kv->arr_type);
    } else if (kv->type == INFER_GGUF_TYPE_STRING) {
        uint64_t n;
        memcpy(&n, kv->data, 8);
        end = kv->data + 8 + n;
    } else {
        end = kv->data + infer__gguf_scalar_size(kv->type);
    }
    *len = (size_t)(end - start);
    return start;
}

/* One chunk of rows converted by the pool. */
typedef struct infer__qz_task {
    const uint8_t *src;
    size_t in_row, out_row;
    void (*to_float)(const void *src, float *dst, int64_t n);
    infer__quantize_row_fn quantize;
    uint8_t *dst;
    int64_t ne0, nrows;
    float *scratch; /* ne0 floats per worker */
} infer__qz_task;

static void infer__qz_worker(void *arg, int ith, int nth) {
    const infer__qz_task *t = (const infer__qz_task *)arg;
    int64_t r0 = t->nrows * ith / nth, r1 = t->nrows * (ith + 1) / nth, r;
    float *f = t->scratch + (size_t)ith * (size_t)t->ne0;
    for (r = r0; r < r1; r++) {
        t->to_float(t->src + (size_t)r * t->in_row, f, t->ne0);
        t->quantize(f, t->dst + (size_t)r * t->out_row, t->ne0);
    }
}

/* Values converted per chunk: bounds the memory of the output buffer. */
#define INFER__QZ_CHUNK_VALUES ((int64_t)1 << 22)

INFERDEF infer_status infer_quantize(const char *in_path, const char *out_path, infer_quant_target target,
                                     const infer_quantize_params *params, infer_error *err) {
    infer_quantize_params defaults = infer_quantize_default_params();
    infer_gguf *g = NULL;
    infer__qz_plan pl;
    infer__wr w;
    int *types = NULL;
    uint64_t *offsets = NULL;
    infer__pool *pool = NULL;
    uint8_t *out_buf = NULL;
    float *scratch = NULL;
    size_t out_cap = 0;
    int64_t i, n_kv_out;
    int has_ftype = 0, has_qver = 0, nth;
    uint64_t off;
    infer_status st = INFER_OK;
    memset(&w, 0, sizeof w);
    if (!params) params = &defaults;
    if (!in_path || !out_path || (unsigned)target >= INFER_QUANT_TARGET_COUNT || params->n_threads < 0) {
        infer__set_error(err, INFER_ERR_ARG, "infer_quantize: bad arguments");
        return INFER_ERR_ARG;
    }
    if (infer__same_file(in_path, out_path)) {
        infer__set_error(err, INFER_ERR_ARG, "output %s is the input file", out_path);
        return INFER_ERR_ARG;
    }
    g = infer_gguf_open(in_path, err);
    if (!g) return err ? err->code : INFER_ERR_IO;
    if (!g->has_data || g->n_tensors == 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "%s has no tensor data to quantize", in_path);
        infer_gguf_close(g);
        return INFER_ERR_FORMAT;
    }
    infer__qz_plan_init(g, &pl);
    types = (int *)infer__calloc((size_t)g->n_tensors, sizeof *types);
    offsets = (uint64_t *)infer__calloc((size_t)g->n_tensors, sizeof *offsets);
    if (!types || !offsets) goto nomem;

    /* every tensor's format and place, before a byte is written */
    off = 0;
    for (i = 0; i < g->n_tensors; i++) {
        const infer__tensor *t = &g->tensors[i];
        int64_t n_el = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        types[i] = infer__qz_choose(g, &pl, i, target);
        if (!infer__qz_convertible(t, (infer_type)types[i], params->allow_requantize, err)) {
            st = err ? err->code : INFER_ERR_UNSUPPORTED;
            goto done;
        }
        offsets[i] = off;
        off += infer__row_size((infer_type)types[i], t->ne[0]) * (uint64_t)(n_el / t->ne[0]);
        off = (off + g->alignment - 1) / g->alignment * g->alignment;
        if (types[i] != (int)t->type) {
            size_t need = infer__row_size((infer_type)types[i], t->ne[0]) *
                          (size_t)INFER__MAX((int64_t)1, INFER__QZ_CHUNK_VALUES / t->ne[0]);
            out_cap = INFER__MAX(out_cap, need);
        }
    }

    nth = params->n_threads ? params->n_threads : infer__cpu_count();
    pool = infer__pool_new(nth);
    if (!pool) goto nomem;
    nth = infer__pool_size(pool);
    if (out_cap) {
        int64_t widest = 0;
        for (i = 0; i < g->n_tensors; i++) widest = INFER__MAX(widest, g->tensors[i].ne[0]);
        out_buf = (uint8_t *)INFER_MALLOC(out_cap);
        scratch = (float *)INFER_MALLOC((size_t)nth * (size_t)widest * sizeof(float));
        if (!out_buf || !scratch) goto nomem;
    }

    w.f = infer__fopen(out_path, "wb");
    if (!w.f) {
        infer__set_error(err, INFER_ERR_IO, "cannot create %s: %s", out_path, strerror(errno));
        st = INFER_ERR_IO;
        goto done;
    }

    /* header and metadata: every pair as it was, the file type replaced */
    for (i = 0; i < g->n_kv; i++) {
        has_ftype |= !strcmp(g->kv[i].key, "general.file_type");
        has_qver |= !strcmp(g->kv[i].key, "general.quantization_version");
    }
    n_kv_out = g->n_kv + !has_ftype + !has_qver;
    infer__wr_bytes(&w, "GGUF", 4);
    infer__wr_u32(&w, 3);
    infer__wr_u64(&w, (uint64_t)g->n_tensors);
    infer__wr_u64(&w, (uint64_t)n_kv_out);
    for (i = 0; i < g->n_kv; i++) {
        const infer__kv *kv = &g->kv[i];
        infer__wr_str(&w, kv->key);
        if (!strcmp(kv->key, "general.file_type")) {
            infer__wr_u32(&w, INFER_GGUF_TYPE_UINT32);
            infer__wr_u32(&w, infer__qtargets[target].ftype);
        } else if (!strcmp(kv->key, "general.quantization_version")) {
            infer__wr_u32(&w, INFER_GGUF_TYPE_UINT32);
            infer__wr_u32(&w, 2);
        } else {
            size_t len;
            const uint8_t *raw = infer__kv_raw(kv, &len);
            infer__wr_u32(&w, (uint32_t)kv->type);
            infer__wr_bytes(&w, raw, len);
        }
    }
    if (!has_qver) {
        infer__wr_str(&w, "general.quantization_version");
        infer__wr_u32(&w, INFER_GGUF_TYPE_UINT32);
        infer__wr_u32(&w, 2);
    }
    if (!has_ftype) {
        infer__wr_str(&w, "general.file_type");
        infer__wr_u32(&w, INFER_GGUF_TYPE_UINT32);
        infer__wr_u32(&w, infer__qtargets[target].ftype);
    }
    for (i = 0; i < g->n_tensors; i++) {
        const infer__tensor *t = &g->tensors[i];
        int d;
        infer__wr_str(&w, t->name);
        infer__wr_u32(&w, (uint32_t)t->n_dims);
        for (d = 0; d < t->n_dims; d++) infer__wr_u64(&w, (uint64_t)t->ne[d]);
        infer__wr_u32(&w, (uint32_t)types[i]);
        infer__wr_u64(&w, offsets[i]);
    }
    infer__wr_pad(&w, g->alignment);

    /* the data, tensor by tensor, a chunk of rows at a time */
    {
        uint64_t data_start = w.pos;
        for (i = 0; i < g->n_tensors && !w.failed; i++) {
            const infer__tensor *t = &g->tensors[i];
            infer_type nt = (infer_type)types[i];
            int64_t nrows = t->ne[1] * t->ne[2] * t->ne[3], r;
            size_t new_bytes = infer__row_size(nt, t->ne[0]) * (size_t)nrows;
            if (nt == t->type) {
                infer__wr_bytes(&w, t->data, t->nbytes);
            } else {
                infer__qz_task task;
                int64_t chunk = INFER__MAX((int64_t)1, INFER__QZ_CHUNK_VALUES / t->ne[0]);
                task.in_row = infer__row_size(t->type, t->ne[0]);
                task.out_row = infer__row_size(nt, t->ne[0]);
                task.to_float = infer__traits(t->type)->to_float;
                task.quantize = infer__qz_row_fn(nt);
                task.dst = out_buf;
                task.ne0 = t->ne[0];
                task.scratch = scratch;
                for (r = 0; r < nrows && !w.failed; r += chunk) {
                    task.src = (const uint8_t *)t->data + (size_t)r * task.in_row;
                    task.nrows = INFER__MIN(chunk, nrows - r);
                    infer__pool_run(pool, infer__qz_worker, &task);
                    infer__wr_bytes(&w, out_buf, (size_t)task.nrows * task.out_row);
                }
            }
            infer__wr_pad(&w, g->alignment);
            if (params->progress)
                params->progress(t->name, i, g->n_tensors, t->type, nt, t->nbytes, new_bytes, params->user);
            INFER_ASSERT(w.failed || i + 1 >= g->n_tensors || w.pos - data_start == offsets[i + 1]);
        }
        (void)data_start;
    }
    if (fflush(w.f) != 0) w.failed = 1;
    if (w.failed) {
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
        st = INFER_ERR_IO;
    }
    goto done;

nomem:
    infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
    st = INFER_ERR_NOMEM;
done:
    if (w.f && fclose(w.f) != 0 && st == INFER_OK) {
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: %s", out_path, strerror(errno));
        st = INFER_ERR_IO;
    }
    if (w.f && st != INFER_OK) remove(out_path);
    infer__pool_free(pool);
    INFER_FREE(out_buf);
    INFER_FREE(scratch);
    INFER_FREE(types);
    INFER_FREE(offsets);
    infer_gguf_close(g);
    return st;
}
