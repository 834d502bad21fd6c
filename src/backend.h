/* backend.h - the interface between the implementation and a backend that
   runs the forward pass elsewhere (infer_cuda.cu, compiled by nvcc).

   The CPU forward pass (forward.c) is the implementation's own; a GPU
   backend gets a plain description of the model (hyperparameters and
   where each weight's GGUF bytes are, in their own format) and exports the
   extern "C" entry points below. The implementation calls them only when
   compiled with INFER_CUDA.

   This part is visible with INFER_IMPLEMENTATION and also, alone, with
   INFER_BACKEND_INTERFACE: infer_cuda.cu includes infer.h that way, so it
   shares these declarations without compiling the implementation. */
#if (defined(INFER_IMPLEMENTATION) || defined(INFER_BACKEND_INTERFACE)) && !defined(INFER_BACKEND_H_INCLUDED)
#define INFER_BACKEND_H_INCLUDED
#include "infer_api.h"
#include <stdio.h> /* snprintf, for feature names */

#ifdef __cplusplus
extern "C" {
#endif

/* One weight as the file stores it: rows of ne0 values, ne1 rows (1 for a
   vector), in GGUF type `type`; data points at nbytes of host memory. */
typedef struct infer_backend_tensor {
    const char *name; /* as in the file, for messages */
    const void *data;
    int type; /* infer_type */
    int64_t ne0, ne1;
    size_t nbytes;
} infer_backend_tensor;

typedef struct infer_backend_layer {
    infer_backend_tensor attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
} infer_backend_layer;

/* The model description's features beyond the plain llama forward pass
   (forward.c runs them all). A backend states the set it implements and
   refuses a model that uses any other, naming it, so the CPU runs it:
   a model never runs elsewhere as if it were plain llama. */
enum {
    INFER_BACKEND_F_NEOX = 1u << 0,        /* RoPE pairs (i, i + n_rot/2) */
    INFER_BACKEND_F_QKV_BIAS = 1u << 1,    /* q, k, v or output biases */
    INFER_BACKEND_F_QK_NORM = 1u << 2,     /* per-head RMSNorm of q and k */
    INFER_BACKEND_F_POST_NORMS = 1u << 3,  /* RMSNorm on attention/FFN outputs */
    INFER_BACKEND_F_GELU = 1u << 4,        /* GELU-gated feed-forward */
    INFER_BACKEND_F_EMBD_SCALE = 1u << 5,  /* scaled embeddings */
    INFER_BACKEND_F_ATTN_SCALE = 1u << 6,  /* an attention scale other than 1/sqrt(head size) on the scores */
    INFER_BACKEND_F_SOFTCAP = 1u << 7,     /* soft-capped scores or logits */
    INFER_BACKEND_F_SLIDING = 1u << 8,     /* sliding-window layers */
    INFER_BACKEND_F_EXPERTS = 1u << 9,     /* mixture-of-experts feed-forward */
    INFER_BACKEND_F_ROPE_LAYERS = 1u << 10, /* layers without RoPE, or with another base */
    INFER_BACKEND_F_ROPE_SCALING = 1u << 11, /* linear, YaRN or LongRoPE scaling, an attention factor */
    INFER_BACKEND_F_WIDE_Q = 1u << 12,     /* heads * head size differs from the model width */
    INFER_BACKEND_F_COUNT = 13
};

/* Everything the llama forward pass reads, and which features beyond it
   the model uses (features: INFER_BACKEND_F_* bits). */
typedef struct infer_backend_model {
    unsigned features;
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, rope_dim;
    float rope_base, norm_eps;
    const float *rope_freqs; /* rope_dim/2 divisors of the angles, or NULL */
    infer_backend_tensor tok_embd, output_norm, output;
    int output_is_tok_embd;  /* tied: output shares tok_embd's bytes */
    const infer_backend_layer *layers; /* n_layers of them */
} infer_backend_model;

/* Status of the entry points: 0 ok; UNSUPPORTED: this backend cannot run
   the model (a weight format, a head size) and the CPU can; FAILED: the
   device or its runtime failed (no GPU, out of memory, a kernel error). */
enum { INFER_BACKEND_OK = 0, INFER_BACKEND_UNSUPPORTED = 1, INFER_BACKEND_FAILED = 2, INFER_BACKEND_CANCELLED = 3 };

/* ---- infer_cuda.cu ----
   Each writes a one-line reason into msg (size bytes) when it fails. */
/* The number of CUDA devices; 0 (and why) when there is none. */
int infer_cuda_device_count(char *msg, size_t size);
/* The names of features' bits, "neox RoPE, q/k norms", for messages. */
static inline void infer_backend_feature_names(unsigned features, char *buf, size_t size) {
    static const char *const names[INFER_BACKEND_F_COUNT] = {
        "NeoX RoPE", "biases", "q/k norms", "post-norms", "GELU", "scaled embeddings", "an attention scale",
        "soft-capping", "sliding windows", "experts", "per-layer RoPE", "RoPE scaling", "query width != model width"};
    size_t at = 0;
    int i;
    if (size) buf[0] = 0;
    for (i = 0; i < INFER_BACKEND_F_COUNT && at < size; i++)
        if (features & (1u << i)) at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? ", " : "", names[i]);
}
/* Uploads every weight once, in its GGUF format. *gpu_model is set on OK. */
int infer_cuda_model_new(const infer_backend_model *desc, void **gpu_model, char *msg, size_t size);
void infer_cuda_model_free(void *gpu_model);
/* "NVIDIA H100 80GB HBM3, sm_90" */
const char *infer_cuda_model_device_name(const void *gpu_model);
/* A KV cache of n_ctx positions (F16) and scratch for n_batch tokens. */
int infer_cuda_context_new(void *gpu_model, int n_ctx, int n_batch, void **gpu_ctx, size_t *bytes, char *msg,
                           size_t size);
void infer_cuda_context_free(void *gpu_ctx);
/* Runs n (<= n_batch) tokens at positions pos0..; writes the logits of
   rows first_logit..n-1 (n_vocab floats each) to host memory `logits`.
   n == 1 replays a captured CUDA graph: one launch per token. With
   should_stop, a batch of several tokens waits for each layer and asks it
   (from this thread) before the next: non-zero returns
   INFER_BACKEND_CANCELLED, the positions written past the caller's count. */
int infer_cuda_forward(void *gpu_ctx, const int32_t *tokens, int n, int pos0, int first_logit, float *logits,
                       int (*should_stop)(void *), void *stop_user, char *msg, size_t size);

#ifdef __cplusplus
}
#endif

#ifdef INFER_IMPLEMENTATION
/* ---- gpu.c: the implementation's side (every build; without INFER_CUDA
   the model always runs on the CPU) ---- */
/* Chooses where the model runs for params->device (and INFER_DEVICE when
   that is auto); uploads the weights when it is the GPU. 0 on error. */
static int infer__model_place(infer_model *m, infer_device want, infer_error *err);
static void infer__model_unplace(infer_model *m);
/* A context of a GPU model gets its device half; 0 on error. */
static int infer__context_attach(infer_context *c, infer_error *err);
static void infer__context_detach(infer_context *c);
/* The backend's forward pass for one batch (<= n_batch tokens, in runs of
   sequences: see infer__forward): the CPU's infer__forward or the GPU's
   (one sequence; no hidden states). INFER_ERR_CANCELLED where the abort
   callback stopped it. */
static infer_status infer__backend_forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel,
                                           float *logits, float *hidden, infer_error *err);
#endif

#endif /* INFER_BACKEND_H_INCLUDED */
