/* backend.h - the interface between the implementation and a backend that
   runs the forward pass on a GPU (infer_cuda.cu, compiled by nvcc).

   The backend reads the same model description as forward.c (model.h:
   the arch.c row's features as data, the optional per-layer weights)
   and the same KV cache layout as attention.c (below), and takes the
   same steps under the same names; what it keeps on the device (the
   weights in their GGUF formats, a context's scratch) stays behind these
   entry points. The implementation calls them only when compiled with
   INFER_CUDA.

   This part is visible with INFER_IMPLEMENTATION and also, alone, with
   INFER_BACKEND_INTERFACE: infer_cuda.cu includes infer.h that way, so it
   shares these declarations without compiling the implementation. */
#if (defined(INFER_IMPLEMENTATION) || defined(INFER_BACKEND_INTERFACE)) && !defined(INFER_BACKEND_H_INCLUDED)
#define INFER_BACKEND_H_INCLUDED
#include "infer_api.h"
#include "formats.h"
#include "model.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* fmaf for infer__exp_llama: on the CPU mathfn.c's (the C library's is not
   correctly rounded everywhere: MinGW's), on a GPU its instruction. */
#if defined(INFER_IMPLEMENTATION) && !defined(__CUDACC__)
static float infer__fmaf(float x, float y, float z);
#define INFER__FMAF_HD infer__fmaf
#else
#define INFER__FMAF_HD fmaf
#endif

/* j * 2^n as ldexpf gives it (one correctly rounded product of exact
   values where 2^n is a normal float), without the library call, which
   took a tenth of a deep prompt's time */
INFER__HD static inline float infer__ldexp_llama(float j, int n) {
    uint32_t bits;
    float p;
    if (n < -126 || n > 127) return ldexpf(j, n);
    bits = (uint32_t)(n + 127) << 23;
    memcpy(&p, &bits, sizeof p);
    return j * p;
}

/* e^x as llama.cpp's AVX-512 softmax has it (ggml_v_expf): x = n ln2 + b
   with ln2 in two parts, e^b by a degree-5 polynomial in Estrin's form,
   times 2^n; 0 or inf where |n| > 192. The constants are the floats
   0x1.8p23, 1/ln2, ln2's parts and the polynomial's, in decimal for C++. Both
   passes' attention use it: the GPU's too (INFER__HD), when it matches llama.cpp. */
/* its body with FMA as the fused multiply-add (each correctly rounded, so
   every FMA gives the same bits: the CPU's kernels pass the instruction
   where the CPU has one, infer__exp_llama the portable one) */
#define INFER__EXP_LLAMA_BODY(x, FMA)                                                                              \
    const float shift = 12582912.0f;                                                                               \
    float n = FMA(x, 1.44269502f, shift) - shift;                                                                  \
    float b = FMA(-n, 1.42860677e-06f, FMA(-n, 0.693145752f, x)), u = b * b;                                      \
    float j = FMA(FMA(FMA(0.00824739039f, b, 0.0418997668f), u, FMA(0.166683957f, b, 0.499991268f)), u,            \
                  FMA(0.999999404f, b, 1.0f));                                                                     \
    if (fabsf(n) > 192) return n <= 0 ? 0.0f : INFINITY;                                                           \
    return infer__ldexp_llama(j, (int)n);
INFER__HD static inline float infer__exp_llama(float x) { INFER__EXP_LLAMA_BODY(x, INFER__FMAF_HD) }

/* The KV cache, one layout wherever it lives (host memory for the CPU's
   pass, device memory for a GPU's): layer l keeps position p at slot
   p % slots[l], every position or a ring of a sliding window plus a
   batch. K as rows of kv_dim values per slot (F16, Q8_0 or Q4_0); V in
   F16 transposed (a row of slots per value), quantized like K. */
typedef struct infer__kv_cache {
    infer_type type; /* F16, Q8_0 or Q4_0 */
    int n_layers, n_ctx, n_seq;
    int kv_dim;      /* values of a row: the widest layer's (a narrower one fills the start of each) */
    size_t k_row;    /* bytes of one position's K (or quantized V) */
    int *slots;      /* per layer (host memory) */
    uint8_t **k, **v; /* per sequence and layer (INFER__KV_AT), into mem (host arrays of pointers) */
    uint8_t *mem;    /* the cache's bytes: on the device of `gpu`, else host memory */
    size_t bytes;
    void *gpu;       /* the GPU model whose device holds mem, or NULL */
} infer__kv_cache;
/* sequence s's cache of layer l: every sequence has a cache of its own */
#define INFER__KV_AT(kv, s, l) ((size_t)(s) * (size_t)(kv)->n_layers + (size_t)(l))

/* The recurrent layers' state (context.h's rs), one layout wherever it
   lives (host memory for the CPU's pass, the device's for a GPU's):
   sequence s's slot k (0 or 1) at mem + (s * 2 + k) * slot floats, and
   layer l's part of a slot at at[l]: its conv window (rs_conv_floats:
   K - 1 inputs per channel, oldest first), then its scan state. */
typedef struct infer__rs_state {
    float *mem;
    size_t slot;
    const size_t *at; /* per layer (host memory) */
    int n_seq;
} infer__rs_state;

/* One forward pass as the implementation hands it over: n tokens (at most
   the context's n_batch), token t of sequence seq[t] at position pos[t]
   (each sequence's tokens in order and at consecutive positions, one run
   of them a pass); rs_src, rs_dst (a model with recurrent layers, else
   NULL): per token, the state slots its run reads (-1: zeros, a run from
   position 0) and writes;
   rope: per token, per RoPE of the model (n_ropes), cos and sin of each
   rotated pair (rope_dim floats), as forward.c computes them; the final
   normed hidden state of the n_sel tokens sel[] (ascending) goes through
   the output into logits (n_vocab floats a row, host memory), or, given
   hidden, into hidden (dim floats a row) instead. should_stop, when not
   NULL, is asked between layers (from this thread). */
typedef struct infer_backend_batch {
    const int32_t *tokens;
    int n;
    const int *pos, *seq;
    const int *rs_src, *rs_dst;
    const float *rope;
    int n_sel;
    const int *sel;
    float *logits, *hidden;
    float *route_margin; /* per token, or NULL: its routing margin (infer__moe_route.margin) */
    int (*should_stop)(void *);
    void *stop_user;
} infer_backend_batch;

/* Status of the entry points: 0 ok; UNSUPPORTED: this backend cannot run
   the model (a weight format without a GPU kernel) and the CPU can;
   FAILED: the device or its runtime failed (no GPU, out of memory, a
   kernel error); CANCELLED: should_stop said stop. */
enum { INFER_BACKEND_OK = 0, INFER_BACKEND_UNSUPPORTED = 1, INFER_BACKEND_FAILED = 2, INFER_BACKEND_CANCELLED = 3 };

/* How infer_cuda_copy moves bytes. */
enum { INFER_BACKEND_DEVICE_TO_DEVICE = 0, INFER_BACKEND_HOST_TO_DEVICE = 1, INFER_BACKEND_DEVICE_TO_HOST = 2 };

/* ---- infer_cuda.cu ----
   Each writes a one-line reason into msg (size bytes) when it fails. */
/* The number of CUDA devices; 0 (and why) when there is none. */
int infer_cuda_device_count(char *msg, size_t size);
/* Uploads every weight the description binds, once, in its GGUF format.
   *gpu_model is set on OK; the description must outlive it. */
int infer_cuda_model_new(const infer_model *m, void **gpu_model, char *msg, size_t size);
void infer_cuda_model_free(void *gpu_model);
/* "NVIDIA H100 80GB HBM3, sm_90" */
const char *infer_cuda_model_device_name(const void *gpu_model);
/* Device memory (zeroed) for a context's KV cache; NULL when there is none. */
void *infer_cuda_alloc(void *gpu_model, size_t bytes, char *msg, size_t size);
void infer_cuda_free(void *gpu_model, void *p);
/* n bytes, kind INFER_BACKEND_*; device ranges may overlap (as memmove). */
int infer_cuda_copy(void *gpu_model, void *dst, const void *src, size_t n, int kind, char *msg, size_t size);
/* The device's memory bandwidth as a copy kernel reaches it (GB/s), 0
   when it could not be measured: measured once, by infer_cuda_model_new,
   so any number of threads may ask. */
double infer_cuda_bandwidth(const void *gpu_model);
/* A context's scratch for n_batch tokens over the KV cache kv (its mem
   from infer_cuda_alloc; the description must outlive the context) and,
   a model with recurrent layers, their state rs (mem from
   infer_cuda_alloc too; else NULL). match_llama: sum as llama.cpp's CPU
   does (infer_context.match_llama). */
int infer_cuda_context_new(void *gpu_model, const infer__kv_cache *kv, const infer__rs_state *rs, int n_batch,
                           int match_llama, void **gpu_ctx, size_t *bytes, char *msg, size_t size);
void infer_cuda_context_free(void *gpu_ctx);
/* Runs one forward pass (infer_backend_batch). A batch where every
   sequence has one token (a decode step of all of them) replays a CUDA
   graph captured once for its size: one launch per step. */
int infer_cuda_forward(void *gpu_ctx, const infer_backend_batch *b, char *msg, size_t size);

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
/* The cache's memory, on the model's device where gpu is not NULL (see
   infer__kv_cache): allocated zeroed, freed, and bytes moved with kind
   INFER_BACKEND_* (host memory: memmove, memcpy). 0 / NULL on failure. */
static void *infer__kv_mem_alloc(void *gpu, size_t bytes);
static void infer__kv_mem_free(void *gpu, void *p);
static int infer__kv_mem_copy(void *gpu, void *dst, const void *src, size_t n, int kind);
/* The backend's forward pass for one batch (<= n_batch tokens, in runs of
   sequences: see infer__forward): the CPU's infer__forward or the GPU's.
   INFER_ERR_CANCELLED where the abort callback stopped it. */
static infer_status infer__backend_forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel,
                                           float *logits, float *hidden, infer_error *err);
#endif

#endif /* INFER_BACKEND_H_INCLUDED */
