/* model.h - the model description: what model.c (with arch.c's rows)
   makes of a GGUF file, and what both forward passes read, forward.c on
   the CPU and infer_cuda.cu on a GPU. One description covers every
   architecture: per-layer choices (head sizes, RoPE, sliding window) and
   model-wide features (biases, extra norms, activation, scales,
   soft-caps, experts) are data here, and each pass reads them; neither
   asks which family a model is.

   Visible with INFER_IMPLEMENTATION and also, alone, with
   INFER_BACKEND_INTERFACE (how infer_cuda.cu includes infer.h). */
#if (defined(INFER_IMPLEMENTATION) || defined(INFER_BACKEND_INTERFACE)) && !defined(INFER_MODEL_H_INCLUDED)
#define INFER_MODEL_H_INCLUDED
#include "infer_api.h"

/* A tensor of the file (or a view of one): data points at its GGUF bytes
   in host memory, rows of ne[0] values. */
typedef struct infer__tensor {
    char *name;
    infer_type type;
    int n_dims;
    int64_t ne[4];
    uint64_t offset;
    size_t nbytes;
    const void *data;       /* NULL in a vocab-only file */
} infer__tensor;

/* RoPE as one layer applies it (ggml's rope with YaRN and frequency
   factors: theta_i = pos * base^(-2i/n_rot) / freqs[i], then scaled). */
typedef struct infer__rope {
    int n_rot;          /* rotated values per head (the first n_rot) */
    int neox;           /* pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
    float base;
    float freq_scale;   /* 1 / the linear or YaRN factor */
    float ext_factor;   /* YaRN's extrapolation mix (0: none) */
    float attn_factor;  /* scales cos and sin (LongRoPE's, YaRN's magnitude) */
    float beta_fast, beta_slow;
    int n_ctx_orig;     /* YaRN's original context */
    const float *freqs; /* n_rot/2 divisors of the angles, or NULL */
    const float *freqs_long; /* LongRoPE: the divisors for contexts beyond n_ctx_orig, or NULL */
} infer__rope;
#define INFER__MAX_ROPES 2 /* distinct RoPEs in one model (sliding vs global layers) */
#define INFER__MAX_ALTUP 4 /* AltUp's streams (Gemma 3n: 4) */

/* What a layer does in place of attention: attend over the KV cache, or
   carry a fixed-size state per sequence (a recurrent layer: conv window
   and scan state, infer_context's rs). */
typedef enum infer__layer_kind {
    INFER__LAYER_ATTENTION = 0,
    INFER__LAYER_SHORTCONV, /* LFM2: in -> b, c, x; y = conv(b * x) (taps over the last tokens); out(c * y) */
    INFER__LAYER_MAMBA2,    /* Granite 4.0-H: in -> z, xBC, dt; xBC = silu(conv(xBC) + bias); Mamba2's scan; gated norm */
    INFER__LAYER_DELTANET,  /* Qwen3.5: qkv -> silu(conv); L2-normed q, k; gated delta rule; gated norm */
    INFER__LAYER_KINDS
} infer__layer_kind;
/* A prompt's Mamba2 and delta-rule scans, on the CPU and the GPU alike, run
   in chunks of INFER__REC_CHUNK tokens with products inside a chunk; runs
   shorter than INFER__REC_CHUNK_MIN scan a token at a time, in llama.cpp's
   order. */
#define INFER__REC_CHUNK 64
#define INFER__REC_CHUNK_MIN 16

typedef struct infer__layer {
    infer__layer_kind kind;
    /* attention; bq, bk, bv, bo, q_norm, k_norm and post_attn_norm may be NULL */
    const infer__tensor *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *q_norm, *k_norm, *post_attn_norm;
    /* feed-forward: dense (w_gate, w_up, w_down) or experts (router and the
       three stacked expert tensors); post_ffn_norm may be NULL */
    const infer__tensor *ffn_norm, *w_gate, *w_up, *w_down, *post_ffn_norm;
    const infer__tensor *ffn_router, *gate_exps, *up_exps, *down_exps;
    /* gpt-oss: the router's bias [n_expert], the experts' gate, up
       ([expert_ffn, n_expert]) and down ([dim, n_expert]) biases, and one
       sink logit per query head; NULL where the model has none */
    const infer__tensor *router_b, *gate_exps_b, *up_exps_b, *down_exps_b, *attn_sinks;
    /* a recurrent layer: its input product (and, Qwen3.5's, the gate z and
       the per-head beta and alpha products), the conv's taps (rows of
       ssm_conv per channel) and bias, the scan's dt bias, A (as -exp(A_log))
       and D, the gated norm's weight, the output product; those its kind
       lacks are NULL */
    const infer__tensor *rec_in, *rec_gate, *rec_beta, *rec_alpha, *conv, *conv_bias, *dt_bias, *ssm_a, *ssm_d,
        *ssm_norm, *rec_out;
    /* Gemma 3n: AltUp's router (norm, weight [dim, n_altup]) and its
       prediction ([n_altup, n_altup^2]) and correction ([n_altup, n_altup])
       coefficients, the corrected stream's scale; LAuReL's two products
       and norm; the per-layer input's gate, projection and norm. NULL
       where the model has none */
    const infer__tensor *altup_router, *altup_router_norm, *altup_predict, *altup_correct, *altup_correct_scale;
    const infer__tensor *laurel_l, *laurel_r, *laurel_norm, *ple_gate, *ple_proj, *ple_norm;
    /* Gemma 4: the dense FFN's norm beside experts (post_ffn_norm_1), the
       experts' input norm and output norm (pre/post_ffn_norm_2), the
       router's input scale [dim], each expert's output scale [n_expert],
       the layer's output scale [1]; NULL where the model has none. With
       up_exps NULL, gate_exps holds each expert's gate then up rows (fused) */
    const infer__tensor *post_ffn_norm_1, *pre_ffn_norm_2, *post_ffn_norm_2, *router_scale, *exps_scale, *out_scale;
    /* this layer's shape: the model's, or, where they differ by layer
       (Gemma 4), its own (the model's are then the largest) */
    int head_dim, n_kv_heads, q_dim, kv_dim, ffn_dim;
    float ffn_sparsity; /* the gate's cut-off at mean + this * std, then relu (Gemma 3n), 0: none */
    int window;   /* keys a query sees (sliding window), 0: all of them */
    int rope;     /* index into the model's ropes, -1: no RoPE on this layer */
    int kv_layer; /* the layer whose KV cache this one attends over: itself, or an earlier one
                     (KV sharing: then wk, wv are NULL and nothing is stored) */
} infer__layer;

typedef enum infer__act {
    INFER__ACT_SILU,
    INFER__ACT_GELU,
    INFER__ACT_SWIGLU_CLAMP /* g = min(g, 7), u = clamp(u, -7, 7): g * sigmoid(1.702 g) * (u + 1) (gpt-oss's experts) */
} infer__act;
typedef enum infer__gating {
    INFER__GATING_SOFTMAX,     /* softmax over all experts, then the top k */
    INFER__GATING_SOFTMAX_TOPK /* the top k logits, then softmax over those */
} infer__gating;

struct infer_model {
    infer_gguf *gguf;
    struct infer_vocab *vocab;
    char arch[32];
    /* the largest of the layers' shapes (infer__layer's) where they differ:
       the strides of the passes' buffers and the KV cache's rows */
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim;
    int q_dim, kv_dim;  /* n_heads * head_dim, n_kv_heads * head_dim */
    int n_ctx_train, rope_dim;
    float rope_base, norm_eps;
    /* features, as data */
    infer__act act;      /* of the gated feed-forward */
    float embd_scale;    /* embeddings times this (gemma: sqrt(dim)), 0: no */
    float attn_scale;    /* on the scores, or on q when attn_scale_q */
    int attn_scale_q;    /* q is scaled before q.K (and rounded so) */
    float attn_softcap;  /* scores become c * tanh(s / c), 0: no */
    float final_softcap; /* logits likewise */
    int n_expert, n_expert_used, expert_ffn;
    infer__gating gating;
    int expert_norm;     /* the chosen experts' weights renormalised to sum 1 */
    int n_swa;           /* the sliding window of the layers that have one, 0: none */
    int q_gate;          /* attn_q gives each head's query then its gate: the output times sigmoid(gate) */
    float residual_scale; /* each block's output times this before the residual add, 0: no (Granite) */
    float logit_scale;   /* logits times this, 0: no (Granite's 1 / logit_scale) */
    int v_norm;          /* each v head RMS-normed without a weight */
    int n_layer_kv;      /* layers 0..n-1 keep KV caches; later ones read an earlier layer's (kv_layer) */
    /* Gemma 3n's AltUp: n_altup streams of dim (the active one goes
       through the layer, the others are predicted and corrected around
       it), made from the embedding by altup_up (n_altup - 1 views
       [dim, dim]) and merged back by altup_down; 0: none. Per-layer
       embeddings: each layer's input of ple_dim values, from its slice of
       ple_embd (token rows of n_layers * ple_dim) and of ple_model_proj
       (the embedding's product), normed by ple_proj_norm; 0: none.
       LAuReL's rank. */
    int n_altup, altup_active, ple_dim, laurel_rank;
    const infer__tensor *altup_up[INFER__MAX_ALTUP - 1], *altup_down[INFER__MAX_ALTUP - 1];
    const infer__tensor *ple_embd, *ple_model_proj, *ple_proj_norm;
    /* recurrent layers (all of one kind in a model): conv taps, channels,
       the input product's rows, the inner width, the scan's heads, a
       head's state width (Qwen3.5: its key and value width; Mamba2: d_state),
       the groups (Qwen3.5: key heads; Mamba2: B/C groups) */
    int n_recurrent, ssm_conv, conv_ch, rec_in_dim, ssm_inner, ssm_heads, ssm_state, ssm_groups;
    size_t rs_conv_floats, rs_ssm_floats; /* a recurrent layer's state per sequence */
    infer__rope ropes[INFER__MAX_ROPES];
    int n_ropes;
    const infer__tensor *tok_embd, *output_norm, *output; /* output may be tok_embd (tied) */
    const float *rope_freqs; /* the global layers' RoPE factors, or NULL */
    infer__layer *layers;
    infer__tensor *views; /* pieces of fused tensors (phi3's attn_qkv, gate+up) */
    int n_views;
    float *gelu_table;   /* GELU of every F16 value (llama.cpp's table), for GELU models */
    unsigned char *bound; /* during load: which file tensors the model uses */
    double load_ms;
    infer_device device;  /* where the forward pass runs: CPU or CUDA (gpu.c) */
    void *gpu;            /* the weights on the GPU (infer_cuda.cu), or NULL */
    char *device_note;    /* why auto chose the CPU, joined to the vocab's warning */
    /* weights.c: this CPU's kernels and the weights they repack, made
       once and shared by every context (internal.h) */
    struct infer__cpu_weights *cpu;
};

#endif /* INFER_MODEL_H_INCLUDED */
