/* infer.h - LLM inference for GGUF models in one C header.

   USAGE
   In exactly one C or C++ file:
       #define INFER_IMPLEMENTATION
       #include "infer.h"
   Everywhere else just #include "infer.h". Link with -lm -lpthread on
   Linux and Android (nothing on macOS; Windows needs kernel32 only).

       infer_error err;
       infer_model *m = infer_model_load("model.gguf", NULL, &err);
       if (!m) { fprintf(stderr, "%s\n", err.msg); return 1; }
       infer_context *c = infer_context_new(m, NULL, &err);
       infer_sampler_params sp = infer_sampler_default_params();
       infer_sampler *s = infer_sampler_new(&sp, infer_model_n_vocab(m), &err);
       infer_generate(c, s, "Once upon a time", 64, print_piece, NULL, NULL);
       infer_sampler_free(s); infer_context_free(c); infer_model_free(m);

   CONFIGURATION (define before including the implementation)
     INFERDEF             linkage of the API; default extern. Define
                          INFER_STATIC to make every function static.
     INFER_MALLOC(sz)     allocator overrides; define all three or none.
                          A NULL from them is reported, never a crash:
                          INFER_ERR_NOMEM, or NULL / -1 where a function
                          has no status. Memory the library hands out
                          comes from INFER_MALLOC: free it with
                          infer_free(), which calls INFER_FREE.
     INFER_REALLOC(p,sz)
     INFER_FREE(p)
     INFER_ASSERT(x)      internal invariant checks; default assert().
     INFER_NO_MMAP        read the model file into memory instead of mapping.

   STB_DS
   infer.h uses stb_ds (Debian libstb-dev, <stb/stb_ds.h>) for growable
   arrays, only inside the implementation.
   It compiles its own private copy of stb_ds's functions, renamed to
   infer__stbds_*, with STBDS_NO_SHORT_NAMES, so it never clashes with a
   program that uses stb_ds itself: such a program may define
   STB_DS_IMPLEMENTATION wherever it likes. The one rule: in the file that
   defines INFER_IMPLEMENTATION, if you also want stb_ds's short names
   (arrput, hmget, ...), include stb_ds.h before infer.h. Set
   INFER_STB_DS_HEADER to another path if stb_ds.h lives elsewhere.

   STRICT C
   The implementation uses POSIX on Unix (mmap, clock_gettime, pthreads)
   and Win32 on Windows (file mappings, SRW locks, threads), all in its
   platform layer. Under a strict -std=c99 it asks for POSIX with
   _XOPEN_SOURCE, which only works if infer.h comes before every system
   header in that one file; otherwise define _XOPEN_SOURCE 700 (or
   _GNU_SOURCE) at the top of the file yourself.

   WINDOWS
   MinGW-w64 and MSVC-like compilers (cl, clang-cl) build it with no
   extra flags or libraries; the AVX2 and AVX-512 kernels are chosen at
   run time as elsewhere. Paths are UTF-8.

   THREADS AND STATE
   No global mutable state. A model is read-only once loaded (its weights
   prepared for this CPU's kernels then, once) and may be shared by any
   number of contexts on any threads; a context costs its KV cache and
   scratch. One context must be used by one thread at a time; it holds one
   or more sequences (conversations) that decode together in one batch.

   THE API'S CONVENTION (checked by tests/api_check.py)
   - A call that can fail returns infer_status (INFER_OK or an INFER_ERR_*
     code), or a pointer that is NULL on failure, and takes infer_error *err
     as its last parameter (may be NULL); err->code is the status and
     err->msg one line naming the problem.
   - Counts come back through out-parameters where a status is needed too
     (infer_tokenize's *n_tokens). Snprintf-style writers return
     infer_status and the whole length through size_t *n_out (may be NULL)
     before err: a buf too small is no error (cut, NUL-terminated).
   - A call that cannot fail (accessors, frees, default params) takes no
     err; one whose -1 or NULL is an answer ("no such key", "no BOS")
     says so in its comment.
   - Enum constants begin with their type's name: infer_pooling's are
     INFER_POOLING_*; infer_status's are INFER_OK and INFER_ERR_*.
   - Names say what they act on (infer_context_logits); none says get_.
   - Memory the library hands out is freed with infer_free().
   - An old name is kept one release, marked INFER_DEPRECATED (a compiler
     warning; INFER_NO_DEPRECATED_WARNINGS silences it), at the end of this
     header.

   LICENSE
   MIT: the text is at the end of this file.
*/
#ifndef INFER_H_INCLUDED
#define INFER_H_INCLUDED

/* This header's version; infer_version() says which one was compiled in
   (the two differ when a program's header and its implementation do). */
#define INFER_VERSION_MAJOR 0
#define INFER_VERSION_MINOR 25
#define INFER_VERSION_PATCH 0
#define INFER_VERSION "0.25.0"

/* The implementation needs POSIX (mmap, clock_gettime, pthreads), which a
   strict -std=c99 hides unless asked for before the first system header
   (so here, not in platform.h: stddef.h below is the first). */
#if defined(INFER_IMPLEMENTATION) && defined(__STRICT_ANSI__) && !defined(_XOPEN_SOURCE) && \
    !defined(_GNU_SOURCE) && !defined(_WIN32)
#define _XOPEN_SOURCE 700
#endif

#include <stddef.h>
#include <stdint.h>

/* The API's linkage. This is the one place outside platform.h that tests
   the compiler and OS: it must be settled before anything else is
   declared. INFER_SHARED_BUILD: compiling infer.dll / libinfer.so, every
   function exported; INFER_SHARED: a program that links that library
   (Windows imports it); INFER_STATIC: all static; else plain extern. */
#ifndef INFERDEF
#if defined(INFER_STATIC)
#if defined(__GNUC__)
#define INFERDEF static __attribute__((unused)) /* a program need not call them all */
#else
#define INFERDEF static
#endif
#elif defined(INFER_SHARED_BUILD) && (defined(_WIN32) || defined(__CYGWIN__))
#define INFERDEF extern __declspec(dllexport)
#elif defined(INFER_SHARED_BUILD) && defined(__GNUC__)
#define INFERDEF extern __attribute__((visibility("default")))
#elif defined(INFER_SHARED) && (defined(_WIN32) || defined(__CYGWIN__))
#define INFERDEF extern __declspec(dllimport)
#else
#define INFERDEF extern
#endif
#endif
/* Marks the old names kept one release (see the end of this header); a
   program that defines INFER_NO_DEPRECATED_WARNINGS silences it. */
#ifndef INFER_DEPRECATED
#if defined(INFER_NO_DEPRECATED_WARNINGS)
#define INFER_DEPRECATED
#elif defined(__GNUC__)
#define INFER_DEPRECATED __attribute__((deprecated))
#elif defined(_MSC_VER)
#define INFER_DEPRECATED __declspec(deprecated)
#else
#define INFER_DEPRECATED
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t infer_token;
typedef struct infer_model infer_model;
typedef struct infer_context infer_context;
typedef struct infer_sampler infer_sampler;
typedef struct infer_gguf infer_gguf;

/* The implementation's version, INFER_VERSION as it was compiled: "0.25.0". */
INFERDEF const char *infer_version(void);

typedef enum infer_status {
    INFER_OK = 0,
    INFER_ERR_IO,           /* file missing or unreadable */
    INFER_ERR_FORMAT,       /* malformed GGUF or vocabulary */
    INFER_ERR_UNSUPPORTED,  /* valid but not (yet) supported: architecture, type, version */
    INFER_ERR_NOMEM,
    INFER_ERR_ARG,          /* bad argument from the caller */
    INFER_ERR_CONTEXT_FULL, /* tokens do not fit in the context */
    INFER_ERR_DEVICE,       /* the GPU or its runtime failed (no GPU, out of GPU memory) */
    INFER_ERR_CANCELLED     /* stopped by its abort callback, a progress callback or a cancelled request */
} infer_status;

typedef struct infer_error {
    infer_status code;
    char msg[256];
} infer_error;

/* ---- GGUF file: metadata and tensor table ---------------------------- */

typedef enum infer_gguf_type {
    INFER_GGUF_TYPE_UINT8 = 0, INFER_GGUF_TYPE_INT8 = 1, INFER_GGUF_TYPE_UINT16 = 2,
    INFER_GGUF_TYPE_INT16 = 3, INFER_GGUF_TYPE_UINT32 = 4, INFER_GGUF_TYPE_INT32 = 5,
    INFER_GGUF_TYPE_FLOAT32 = 6, INFER_GGUF_TYPE_BOOL = 7, INFER_GGUF_TYPE_STRING = 8,
    INFER_GGUF_TYPE_ARRAY = 9, INFER_GGUF_TYPE_UINT64 = 10, INFER_GGUF_TYPE_INT64 = 11,
    INFER_GGUF_TYPE_FLOAT64 = 12
} infer_gguf_type;

/* Tensor element types, numbered as in GGUF. */
typedef enum infer_type {
    INFER_TYPE_F32 = 0, INFER_TYPE_F16 = 1, INFER_TYPE_Q4_0 = 2,
    INFER_TYPE_Q4_1 = 3, INFER_TYPE_Q5_0 = 6, INFER_TYPE_Q5_1 = 7,
    INFER_TYPE_Q8_0 = 8, INFER_TYPE_Q8_1 = 9, INFER_TYPE_Q2_K = 10,
    INFER_TYPE_Q3_K = 11, INFER_TYPE_Q4_K = 12, INFER_TYPE_Q5_K = 13,
    INFER_TYPE_Q6_K = 14, INFER_TYPE_Q8_K = 15, INFER_TYPE_IQ4_NL = 20,
    INFER_TYPE_IQ4_XS = 23, INFER_TYPE_BF16 = 30, INFER_TYPE_MXFP4 = 39,
    INFER_TYPE_COUNT = 40
} infer_type;

typedef struct infer_tensor_info {
    const char *name;
    infer_type type;
    int n_dims;
    int64_t ne[4];       /* ne[0] is the row length (innermost) */
    uint64_t offset;     /* from the start of the data section */
    size_t nbytes;
    const void *data;    /* NULL for vocab-only files */
} infer_tensor_info;

/* Open a GGUF file (mapped) or a caller's buffer (not copied; it must
   outlive the infer_gguf). */
INFERDEF infer_gguf *infer_gguf_open(const char *path, infer_error *err);
INFERDEF infer_gguf *infer_gguf_open_memory(const void *data, size_t size, infer_error *err);
INFERDEF void infer_gguf_close(infer_gguf *g);
INFERDEF uint32_t infer_gguf_version(const infer_gguf *g);
INFERDEF int64_t infer_gguf_n_kv(const infer_gguf *g);
INFERDEF const char *infer_gguf_key(const infer_gguf *g, int64_t i);
INFERDEF int64_t infer_gguf_find_key(const infer_gguf *g, const char *key); /* -1 if absent */
INFERDEF infer_gguf_type infer_gguf_kv_type(const infer_gguf *g, int64_t i);
/* Writes a one-line rendering of value i (arrays abbreviated) into buf.
   snprintf-style: writes at most size-1 bytes and a NUL (a short buf is no
   error) and the whole length into *n_out (may be NULL); buf may be NULL
   with size 0 to measure. INFER_ERR_ARG for an i out of range. */
INFERDEF infer_status infer_gguf_kv_to_string(const infer_gguf *g, int64_t i, char *buf, size_t size, size_t *n_out,
                                              infer_error *err);
INFERDEF int64_t infer_gguf_n_tensors(const infer_gguf *g);
/* Tensor i's name, type, shape and data into *out; INFER_ERR_ARG for an i
   out of range. */
INFERDEF infer_status infer_gguf_tensor(const infer_gguf *g, int64_t i, infer_tensor_info *out, infer_error *err);
INFERDEF int64_t infer_gguf_find_tensor(const infer_gguf *g, const char *name);
INFERDEF const char *infer_type_name(infer_type t);

/* ---- Model ------------------------------------------------------------ */

/* Where the forward pass runs. CUDA needs the implementation compiled with
   INFER_CUDA and infer_cuda.cu linked (nvcc); a build without it refuses
   CUDA and runs AUTO on the CPU. In a CUDA build AUTO (the default) takes
   the first GPU when there is one and the model's formats run there, else
   it runs on the CPU and says why through infer_model_warning; CUDA with
   no GPU is an error. The environment variable INFER_DEVICE=cpu|cuda|auto
   replaces AUTO (only AUTO), as INFER_ISA picks the CPU's kernels. */
typedef enum infer_device { INFER_DEVICE_CPU = 0, INFER_DEVICE_CUDA, INFER_DEVICE_AUTO } infer_device;

/* Called during loading with the fraction done (0 to 1, rising); return
   non-zero to cancel the load (it then fails with INFER_ERR_CANCELLED). */
typedef int (*infer_progress_fn)(float fraction, void *user);

/* How RoPE positions reach past the context a model was trained on
   (infer_model_params.rope_scaling). FILE: as the GGUF says (most say
   none). LINEAR: every position divided by rope_scale, so rope_scale
   times the trained context looks like the trained one, at a cost in
   short-range precision. YARN: the low frequencies stretched by
   rope_scale, the high ones (short-range detail) kept, a ramp between,
   and attention sharpened to match: what most long-context fine-tunes
   use, and better than LINEAR without one. */
typedef enum infer_rope_scaling {
    INFER_ROPE_SCALING_FILE = 0,
    INFER_ROPE_SCALING_NONE,
    INFER_ROPE_SCALING_LINEAR,
    INFER_ROPE_SCALING_YARN
} infer_rope_scaling;

typedef struct infer_model_params {
    int vocab_only;        /* load metadata and tokenizer only */
    infer_device device;   /* default AUTO */
    infer_progress_fn progress; /* may be NULL */
    void *progress_user;
    infer_rope_scaling rope_scaling; /* default FILE */
    float rope_scale;      /* LINEAR, YARN: the factor (>= 1), e.g. the context
                              wanted / infer_model_n_ctx_train */
} infer_model_params;

/* "cpu", "cuda", "auto"; and back (-1 for an unknown name). */
INFERDEF const char *infer_device_name(infer_device d);
INFERDEF int infer_device_from_name(const char *name);

INFERDEF infer_model_params infer_model_default_params(void);
INFERDEF infer_model *infer_model_load(const char *path, const infer_model_params *params, infer_error *err);
/* The GGUF file's bytes in a caller's buffer, not copied: the buffer must
   stay valid and unchanged until infer_model_free, since the model keeps
   pointers into it (the tensors it uses as stored, the metadata values and
   tensor table infer_model_gguf gives); only the weights it repacks for
   this CPU's kernels are copies. */
INFERDEF infer_model *infer_model_load_memory(const void *data, size_t size, const infer_model_params *params, infer_error *err);
INFERDEF void infer_model_free(infer_model *m);
INFERDEF const infer_gguf *infer_model_gguf(const infer_model *m);
INFERDEF int infer_model_n_vocab(const infer_model *m);
INFERDEF int infer_model_n_ctx_train(const infer_model *m);
INFERDEF infer_token infer_model_bos(const infer_model *m);   /* -1 if none */
INFERDEF infer_token infer_model_eos(const infer_model *m);   /* -1 if none */
INFERDEF int infer_model_is_eog(const infer_model *m, infer_token t); /* end of generation */
INFERDEF int infer_model_add_bos(const infer_model *m);
INFERDEF double infer_model_load_ms(const infer_model *m);
/* One line the caller may want to show the user about how the file was
   read (e.g. a missing pre-tokenizer name, defaulted) and, when device auto
   fell back to the CPU, why; or NULL. */
INFERDEF const char *infer_model_warning(const infer_model *m);
INFERDEF size_t infer_model_weight_bytes(const infer_model *m);
/* Where this model's forward pass runs: INFER_DEVICE_CPU or _CUDA. */
INFERDEF infer_device infer_model_device(const infer_model *m);
/* The GPU's name ("NVIDIA H100 ..., sm_90") for a CUDA model, else "cpu". */
INFERDEF const char *infer_model_device_name(const infer_model *m);
/* The memory bandwidth of a CUDA model's GPU in GB/s, as a copy kernel
   reaches it (measured once, as the model is loaded onto the GPU: a fraction of a second); 0 for
   a CPU model. What generation's GB/s are compared with (infer bench). */
INFERDEF double infer_model_device_bandwidth(const infer_model *m);
/* One-line summary: architecture, dims, layers, heads, vocab.
   snprintf-style: at most size-1 bytes and a NUL, the whole length into
   *n_out (may be NULL); INFER_ERR_ARG for no model. */
INFERDEF infer_status infer_model_describe(const infer_model *m, char *buf, size_t size, size_t *n_out,
                                           infer_error *err);

/* ---- Tokenizer ---------------------------------------------------------- */

/* Tokenizes len bytes of text. Writes at most max tokens and the number of
   tokens the text needs into *n_tokens (may be NULL), which may exceed max:
   call again with that much room (out may be NULL with max 0 to count).
   parse_special: text like "<|im_end|>" becomes its special token instead
   of plain text. INFER_ERR_ARG or INFER_ERR_NOMEM, *n_tokens 0, on failure. */
INFERDEF infer_status infer_tokenize(const infer_model *m, const char *text, size_t len, infer_token *out, int max,
                                     int add_bos, int parse_special, int *n_tokens, infer_error *err);
/* The bytes of one token's text (byte-fallback and byte-level BPE decoded).
   snprintf-style: writes at most size-1 bytes and a NUL (a short buf is no
   error: the piece is cut) and the piece's whole length into *n_out (may be
   NULL); buf may be NULL with size 0 to measure. A piece may hold a NUL
   byte: use *n_out, not strlen. INFER_ERR_ARG for an id out of range,
   INFER_ERR_NOMEM where a cut piece needed memory that ran out. */
INFERDEF infer_status infer_token_to_piece(const infer_model *m, infer_token t, char *buf, size_t size, size_t *n_out,
                                           infer_error *err);

/* s[0..n) with every byte that is not part of a valid UTF-8 character
   (and every NUL) replaced by U+FFFD, into out (room for 3 * n + 1 bytes),
   NUL-terminated: text any JSON writer accepts. Returns its length. */
INFERDEF size_t infer_utf8_clean(const char *s, size_t n, char *out);

/* Streaming detokenizer: holds back the bytes of an unfinished UTF-8
   character so a stream never splits one. */
typedef struct infer_detok {
    unsigned char pending[8];
    int n_pending;
} infer_detok;
/* Appends token t; writes the complete characters so far to out, NUL-
   terminated, and their length into *n_out (may be NULL): at most size-1
   (out should hold 256 bytes; where they do not fit they are cut at a
   character boundary and the rest dropped). Allocates only for a token
   longer than out: INFER_ERR_NOMEM when that fails; INFER_ERR_ARG for an
   id out of range or no out (size 0). */
INFERDEF infer_status infer_detok_push(infer_detok *d, const infer_model *m, infer_token t, char *out, size_t size,
                                       size_t *n_out, infer_error *err);
/* Flushes what is held back (an invalid or truncated sequence) as is, as
   infer_detok_push writes (NUL-terminated, its length into *n_out). */
INFERDEF infer_status infer_detok_flush(infer_detok *d, char *out, size_t size, size_t *n_out, infer_error *err);

/* ---- Context: KV cache and forward pass ------------------------------ */

/* What a context does when a sequence's next tokens do not fit. */
typedef enum infer_full_policy {
    INFER_FULL_POLICY_STOP = 0, /* fail with INFER_ERR_CONTEXT_FULL (the default) */
    INFER_FULL_POLICY_SHIFT     /* keep the first n_keep positions, drop the oldest half of the
                            rest and move the others down, their keys rotated again for
                            their new positions (llama.cpp's context shift) */
} infer_full_policy;

typedef struct infer_context_params {
    int n_ctx;        /* positions of KV cache per sequence; 0 = min(model's, 4096) */
    int n_batch;      /* most tokens one forward pass takes; 0 = 512 */
    int n_threads;    /* 0 = 1 */
    int n_seq;        /* sequences (conversations) with a cache of their own; 0 = 1 */
    infer_type kv_type; /* the KV cache's format: INFER_TYPE_F16 (also what 0
                           means), INFER_TYPE_Q8_0 (about half the memory) or
                           INFER_TYPE_Q4_0 (about a quarter; CPU only); the
                           quantized ones need heads of a multiple of 32 */
    int match_llama;  /* 1: sum prompts' products in llama.cpp's order too
                         (as one token always is), to its last bit where the
                         formats allow: F16 multiplied exactly (not as block
                         integers, see infer_decode) and Q8_0/Q5_0 in eight
                         lane sums; prompts on AVX-512 then run up to about 2x
                         slower. -1: never. 0 (default): where the model
                         amplifies rounding: experts (routing turns on 1e-4),
                         soft-capped attention, scaled embeddings (Gemma's
                         residual stream cancels activations in the
                         thousands: measured on Gemma 3 270M, 7% of the logit
                         range from llama.cpp's otherwise, 2.5% so) */
    infer_full_policy full_policy;
    int n_keep;       /* INFER_FULL_POLICY_SHIFT: positions never dropped (a system prompt) */
} infer_context_params;

INFERDEF infer_context_params infer_context_default_params(void);
/* A context holds a KV cache per sequence and scratch for a batch; the
   weights are the model's, prepared once for this CPU's kernels when the
   model loads and shared by every context (see infer_model_load). */
INFERDEF infer_context *infer_context_new(infer_model *m, const infer_context_params *params, infer_error *err);
INFERDEF void infer_context_free(infer_context *c);
INFERDEF int infer_context_n_ctx(const infer_context *c);
INFERDEF int infer_context_n_seq(const infer_context *c);
/* The instruction set its kernels use: scalar, avx2, avx512, neon or wasm. */
INFERDEF const char *infer_context_isa(const infer_context *c);
/* Where its forward pass runs (its model's device). */
INFERDEF infer_device infer_context_device(const infer_context *c);
/* 1 when its passes sum in llama.cpp's order (infer_context_params.match_llama,
   0 deciding by the model), on either device. */
INFERDEF int infer_context_match_llama(const infer_context *c);

/* Called between layers of every forward pass (from the thread that called
   infer_decode); return non-zero to stop it: the call then returns
   INFER_ERR_CANCELLED and the context is as it was before the call. The
   callback may read a flag another thread sets. fn NULL removes it. */
typedef int (*infer_abort_fn)(void *user);
INFERDEF void infer_context_set_abort(infer_context *c, infer_abort_fn fn, void *user);
/* Called by infer_decode and infer_decode_batch after each pass of a batch
   longer than n_batch (a long prompt), from the calling thread, with the
   share of the batch done (the last call 1.0); return non-zero to stop it,
   as the abort callback does. fn NULL removes it. Requests have their own
   (infer_request_params.progress). */
INFERDEF void infer_context_set_progress(infer_context *c, infer_progress_fn fn, void *user);

/* Runs the model on n tokens of sequence 0, appending them to its cache:
   infer_decode_batch with every token in sequence 0. all_logits: keep the
   logits of every position, else only the last. Batches larger than
   n_batch are split internally. The calling thread is one of the workers
   and needs about 128 KiB of stack for the kernels. With AVX512-VNNI, F16
   weights in batches of 16 or more tokens are multiplied as block integers
   (12-bit weights, 13-bit activations, summed exactly; logits within about
   0.15% of their range of fp32's); smaller batches multiply F16 exactly. */
INFERDEF infer_status infer_decode(infer_context *c, const infer_token *tokens, int n, int all_logits, infer_error *err);

/* Tokens of several sequences in one forward pass: the weights are read
   once for all of them. Token i goes to sequence seq[i] at that sequence's
   next position (its tokens in the order they appear here). */
typedef struct infer_batch {
    int n;
    const infer_token *tokens;
    const int *seq;       /* per token; NULL: all in sequence 0 */
    const int8_t *logits; /* per token, non-zero: keep its logits; NULL: the
                             last token of each sequence in the batch */
} infer_batch;
/* When a sequence does not fit, the context's full_policy applies (shift,
   or INFER_ERR_CONTEXT_FULL and nothing decoded). */
INFERDEF infer_status infer_decode_batch(infer_context *c, const infer_batch *b, infer_error *err);
/* Logits (n_vocab floats) of token i of the last decode; i = -1 is the
   last token. NULL when that token's logits were not kept. */
INFERDEF const float *infer_context_logits(const infer_context *c, int i);

/* ---- Sequences: several conversations in one context ------------------- */

INFERDEF int infer_seq_n_past(const infer_context *c, int seq);
/* The logits of the sequence's last position, where the last decode that
   touched it kept them (or a restored state brought them); else NULL. */
INFERDEF const float *infer_seq_logits(const infer_context *c, int seq);
/* The tokens the sequence's cache holds, in order (n set to how many). */
INFERDEF const infer_token *infer_seq_tokens(const infer_context *c, int seq, int *n);
/* Forgets every position from n on (0 clears the sequence; n < 0 or past
   the end keeps them all) and writes the positions kept into *n_past (may
   be NULL): n (clamped to what the sequence holds), or 0 where a
   sliding-window layer's cache (which holds only its window and a batch)
   no longer has the keys position n would see; then the caller feeds the
   tokens again. INFER_ERR_ARG for a sequence outside the context. */
INFERDEF infer_status infer_seq_truncate(infer_context *c, int seq, int n, int *n_past, infer_error *err);
/* Drops positions [p0, p1) (p1 < 0: to the end); later positions move
   down, their keys rotated for their new positions. */
INFERDEF infer_status infer_seq_remove(infer_context *c, int seq, int p0, int p1, infer_error *err);
/* Makes dst a copy of src (its cache, tokens and logits): a system prompt
   computed once, then continued in several conversations. */
INFERDEF infer_status infer_seq_copy(infer_context *c, int src, int dst, infer_error *err);

/* ---- State: save and restore a sequence ------------------------------- */

/* A sequence's state is its tokens, the used part of its KV cache and its
   last logits, with a header naming the model, n_ctx and cache format: a
   state from another model or context size is refused. A checksum covers
   every byte, and a state is checked whole before it is used: a damaged
   one, or one with tokens outside the vocabulary or NaN/infinite logits or
   cache values, is refused (INFER_ERR_FORMAT) and the sequence left as it
   was. An empty sequence has a state too. */
INFERDEF size_t infer_seq_state_size(const infer_context *c, int seq);
/* Writes the state into buf; returns the bytes written, or 0 when size is
   smaller than infer_seq_state_size. */
INFERDEF size_t infer_seq_state_save(const infer_context *c, int seq, void *buf, size_t size);
/* Replaces sequence seq with the state in buf. */
INFERDEF infer_status infer_seq_state_load(infer_context *c, int seq, const void *buf, size_t size, infer_error *err);
INFERDEF infer_status infer_seq_state_save_file(const infer_context *c, int seq, const char *path, infer_error *err);
INFERDEF infer_status infer_seq_state_load_file(infer_context *c, int seq, const char *path, infer_error *err);

/* ---- Embeddings ------------------------------------------------------- */

typedef enum infer_pooling { INFER_POOLING_MEAN = 0, INFER_POOLING_LAST, INFER_POOLING_FIRST } infer_pooling;
/* Length of an embedding: the model's hidden size. */
INFERDEF int infer_model_n_embd(const infer_model *m);
/* The final hidden state (after the output norm) of text's tokens, pooled
   over the tokens and, with normalize, scaled to unit length; into out
   (infer_model_n_embd floats). Runs in sequence seq, which it clears
   before and after. */
INFERDEF infer_status infer_embed(infer_context *c, int seq, const char *text, infer_pooling pool, int normalize,
                                  float *out, infer_error *err);
/* infer_embed of tokens already tokenized (ids below infer_model_n_vocab;
   no BOS is added): what a client that tokenizes for itself sends. */
INFERDEF infer_status infer_embed_tokens(infer_context *c, int seq, const infer_token *tokens, int n_tokens,
                                         infer_pooling pool, int normalize, float *out, infer_error *err);

/* ---- Beam search ------------------------------------------------------ */

typedef struct infer_beam_params {
    int n_beams;          /* hypotheses kept each step (the context needs as many sequences) */
    float length_penalty; /* a finished hypothesis scores sum(log p) / length^length_penalty:
                             1 (default) the mean, 0 the plain sum, > 1 favours longer */
    int n_predict;        /* most tokens generated */
} infer_beam_params;
INFERDEF infer_beam_params infer_beam_default_params(void);
/* Beam search after prompt (tokenized as infer_generate does) in sequences
   0..n_beams-1, which it clears first: each step extends every live beam
   by its n_beams most probable tokens and keeps the n_beams best sums of
   log-probabilities; a beam ends at end of generation or n_predict tokens.
   Writes the best finished hypothesis's tokens (its end-of-generation
   token left out) into out (at most max) and how many it has (may exceed
   max) into *n_tokens (may be NULL), its score into *score (may be NULL).
   INFER_ERR_ARG (too few sequences, an empty prompt), INFER_ERR_NOMEM or a
   decode's error on failure, *n_tokens 0. */
INFERDEF infer_status infer_beam_search(infer_context *c, const char *prompt, const infer_beam_params *p,
                                        infer_token *out, int max, int *n_tokens, float *score, infer_error *err);

/* ---- Sampling ------------------------------------------------------------ */

typedef struct infer_sampler_params {
    float temperature;      /* <= 0: greedy */
    int top_k;              /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    int repeat_last_n;      /* tokens the penalty looks back over */
    uint64_t seed;
} infer_sampler_params;

INFERDEF infer_sampler_params infer_sampler_default_params(void);
/* NULL with err set when n_vocab < 1 or memory ran out. */
INFERDEF infer_sampler *infer_sampler_new(const infer_sampler_params *p, int n_vocab, infer_error *err);
INFERDEF void infer_sampler_free(infer_sampler *s);
/* Records a chosen token: in the penalty window and, with a grammar, as
   the grammar's next text (end-of-generation and empty control tokens
   leave the grammar as it is; a token the grammar refuses leaves it
   allowing nothing, so infer_sampler_sample returns -1, until a reset). */
INFERDEF void infer_sampler_accept(infer_sampler *s, infer_token t);
/* Records a prompt token: in the penalty window only. */
INFERDEF void infer_sampler_accept_prompt(infer_sampler *s, infer_token t);
/* Forgets the penalty window and puts the grammar back at its start (the
   seed's sequence goes on). */
INFERDEF void infer_sampler_reset(infer_sampler *s);
/* Chooses a token from logits (not modified). Does not accept it. With a
   grammar it is a token the grammar allows (end of generation only where
   the grammar may end); with none allowed, -1. Order: logit bias,
   repetition penalty, then greedy or top-k -> top-p -> min-p ->
   temperature -> a draw. With a grammar, as llama.cpp does: the draw is
   made first without it and kept if the grammar allows that token; only
   otherwise are the allowed tokens found (a walk over a trie of the
   vocabulary's texts) and the draw made again among them (banned ones
   left out). -1 also when the logit bias bans (-INFINITY) every token, or
   every token the grammar allows, and when the grammar ran out of memory
   (it then refuses everything until a reset). */
INFERDEF infer_token infer_sampler_sample(infer_sampler *s, const float *logits);

/* Added to the logits before anything else; -INFINITY bans a token. Replaces
   any earlier bias; n = 0 removes it. INFER_ERR_NOMEM (and no bias) when
   memory ran out. */
INFERDEF infer_status infer_sampler_set_logit_bias(infer_sampler *s, const infer_token *ids, const float *bias, int n,
                                                   infer_error *err);

/* Output control: a grammar in llama.cpp's GBNF (a .gbnf file's text),
   starting at rule root (NULL: "root"); the tokens' text comes from model
   m, whose vocabulary must be the sampler's size. NULL gbnf removes the
   grammar. Text is matched as Unicode code points of the tokens' UTF-8
   (a character may span tokens). Besides llama.cpp's syntax, a rule may
   go on over lines that do not start "name ::=" without parentheses.
   A malformed grammar (undefined rule, no root, an unterminated literal
   or class, a bad escape, left recursion, a rule defined twice, ...) gives
   INFER_ERR_ARG with a one-line message and its line and column, and the
   sampler is left with no grammar. Sets up in about 20 ms for a 49k-token
   vocabulary. A state holds at most 1024 stacks (an ambiguous grammar's
   extra ones are dropped). */
INFERDEF infer_status infer_sampler_set_grammar(infer_sampler *s, const infer_model *m, const char *gbnf,
                                                const char *root, infer_error *err);
/* Whether the grammar has reached a state where it may end (1), or has no
   grammar (1). */
INFERDEF int infer_sampler_grammar_done(const infer_sampler *s);
/* A JSON schema as a GBNF grammar whose root matches the JSON values the
   schema allows. The subset: type (a name or an array of them: object,
   array, string, number, integer, boolean, null), properties (written in
   the schema's order; those not in required may be left out; no others
   allowed), items, minItems/maxItems, minLength/maxLength, enum and const
   (any JSON values), anyOf/oneOf (as alternatives); a schema without type
   or with none of these allows any value; other keywords are ignored.
   $ref, allOf, tuple items and unknown types are refused. Whitespace
   between tokens is bounded (none, a space, or a line break and up to 20
   blanks) and numbers have at most 16 digits before the point and 16
   after, so a model cannot ramble on. snprintf-style: writes at most
   size-1 bytes and a NUL (a short buf is no error) and the full length
   into *n_out (may be NULL); INFER_ERR_ARG (err's message with the line
   and column) for a schema it cannot read, INFER_ERR_NOMEM. */
INFERDEF infer_status infer_json_schema_to_grammar(const char *schema, char *buf, size_t size, size_t *n_out,
                                                   infer_error *err);

/* The most probable tokens of the last infer_sampler_sample's distribution:
   softmax of the logits after bias, penalty and grammar, before top-k/p
   and temperature. Writes up to n, most probable first, and how many into
   *n_probs (may be NULL; 0 before a sample, after a reset or when nothing
   was allowed). Still valid after infer_sampler_accept. Where the grammar
   allowed the first draw, its mask is made here, on request.
   INFER_ERR_NOMEM when memory ran out (only that mask, or n > 64, needs
   any), INFER_ERR_ARG for no sampler or no room for n. */
typedef struct infer_token_prob {
    infer_token id;
    float p;
} infer_token_prob;
INFERDEF infer_status infer_sampler_top_probs(const infer_sampler *s, infer_token_prob *out, int n, int *n_probs,
                                              infer_error *err);
/* Token t's probability in that same distribution (0 where it was not
   allowed or before a sample; -1 when memory for the grammar's mask ran
   out): what the API's logprobs report for the token sampled. */
INFERDEF float infer_sampler_token_prob(const infer_sampler *s, infer_token t);

/* ---- Generation and metrics ---------------------------------------------- */

typedef struct infer_metrics {
    double load_ms;
    int n_prompt_tokens;
    double prompt_ms;
    double prompt_tps;
    double ttft_ms;            /* start of prompt to first token chosen */
    int n_gen_tokens;          /* tokens generated, the first one included */
    /* after the first token: the time between consecutive tokens */
    int n_gen_intervals;
    double gen_ms;
    double gen_tps;
    double token_ms_min, token_ms_avg, token_ms_max;
    /* speculative decoding (infer_request_params.lookup): draft tokens fed
       for verification, and those the model agreed with (each one a token
       gained without a pass of its own) */
    int n_draft_tokens;
    int n_draft_accepted;
    size_t model_bytes;        /* weights (mapped or loaded) */
    size_t context_bytes;      /* KV cache and scratch of the context */
    size_t peak_rss_bytes;     /* process peak resident set, 0 if unknown */
} infer_metrics;

/* Called with each piece of generated text; return non-zero to stop. */
typedef int (*infer_piece_fn)(const char *piece, int len, void *user);

/* Tokenizes prompt (BOS as the model asks, special tokens parsed), runs it
   on sequence 0 (its tokens go to the sampler's penalty window through
   infer_sampler_accept_prompt), then samples up to n_predict tokens,
   stopping at end of generation (or where on_piece returns non-zero).
   Streams text through on_piece (may be NULL). The prompt's and the
   generated ids stay readable through infer_context_prompt_tokens and
   infer_context_generated_tokens. Continues from the context's n_past (a
   chat's earlier turns); truncate to 0 first to start afresh. Every
   generated token but the last is fed back (the last needs no forward
   pass). When the context is full: with INFER_FULL_POLICY_STOP (the default) it
   returns INFER_ERR_CONTEXT_FULL, the text so far already streamed; with
   INFER_FULL_POLICY_SHIFT the decode shifts the sequence and generation goes on.
   It is a request (see below) stepped to its end on this thread. */
INFERDEF infer_status infer_generate(infer_context *c, infer_sampler *s, const char *prompt,
                                     int n_predict, infer_piece_fn on_piece, void *user,
                                     infer_error *err);
INFERDEF infer_metrics infer_context_metrics(const infer_context *c);
INFERDEF void infer_context_reset_metrics(infer_context *c);
/* Bytes of KV cache one token at position pos reads in attention: every
   layer's K and V rows it sees (a sliding layer's window at most); with
   the weights' bytes, what a generated token costs in memory traffic. */
INFERDEF size_t infer_context_kv_read_bytes(const infer_context *c, int pos);
/* The tokens infer_generate last read and wrote. */
INFERDEF const infer_token *infer_context_prompt_tokens(const infer_context *c, int *n);
INFERDEF const infer_token *infer_context_generated_tokens(const infer_context *c, int *n);

/* ---- Requests: generation in steps, for a game loop or a worker -------- */

/* A request is one reply on one sequence of a context: its prompt is fed to
   the sequence, then tokens are sampled (by the request's own sampler) and
   fed back until end of generation, n_predict tokens, a stop string, the
   grammar's end, cancellation or an error.

   Requests do not run by themselves. Either the caller advances every
   request of a context a little at a time with infer_context_step(c,
   budget_ms) (a game gives it a few ms of each frame), or an infer_worker
   does it on threads of its own while the caller polls. Either way the
   requests of different sequences of one context advance together: one
   forward pass (infer_decode_batch) takes the next token of every request
   that is generating and chunks of the prompts of those still reading, so
   the weights are read once for all. Prompt chunks are sized from the
   measured speed to fit the budget. Requests on one sequence run one after
   the other, in the order they were started.

       infer_request_params p = infer_request_default_params();
       p.prompt = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
       p.seq = npc_id;
       infer_request *r = infer_request_start(ctx, &p, &err);
       ... every frame:
       infer_context_step(ctx, 4.0);            (or nothing, with a worker)
       infer_request_text(r, 0, buf, sizeof buf);
       if (infer_request_done(r)) { infer_request_status(r, &err); infer_request_free(r); }

   Afterwards the sequence holds the prompt and every generated token but an
   end-of-generation token (and but the last one of a reply that ends just
   as the context fills), so a conversation goes on with the next
   request's prompt (a chat: infer_chat_end_of_turn's text, the next user
   message, the assistant prompt). A request that ends (cancelled, failed)
   while its prompt is being fed takes the sequence back to where it was.

   Threads: start, step and free the requests of one context from one
   thread at a time; poll them (text, done, status, tokens, metrics) and
   cancel them from any thread at any time: polling copies under a short
   lock and never waits for a forward pass. Free a context's requests
   before the context. A cancelled request stops the forward pass it is
   part of between layers (as the context's abort callback would). */
typedef struct infer_request infer_request;

typedef struct infer_request_params {
    /* Fed first: special tokens parsed, BOS where the model adds one and
       the sequence is empty. NULL or "": generate from the sequence's last
       position (its logits, or its last token fed again). */
    const char *prompt;
    int seq;                 /* the sequence it continues: 0 .. n_seq-1 */
    int n_past;              /* -1 (default): the sequence as it is; else first
                                infer_seq_truncate(c, seq, n_past) (0: afresh,
                                but see cache_prompt) */
    int n_predict;           /* most tokens generated (default 256); 0: only
                                feed the prompt */
    infer_sampler_params sampling; /* default infer_sampler_default_params() */
    /* Output control: a GBNF grammar (root rule "root") or a JSON schema
       (see infer_json_schema_to_grammar) the output must match; not both.
       The reply ends where the grammar does (the model's end-of-generation
       token is then the only choice). */
    const char *grammar;
    const char *json_schema;
    /* Stop strings: generation ends at the first occurrence of any; the
       text excludes it. Text that may be the start of one is held back
       until it cannot be (and released at the end). Copied at start. */
    const char *const *stop;
    int n_stop;
    int n_probs;             /* keep each generated token's n_probs most probable
                                tokens (infer_request_top_probs) */
    const infer_token *bias_ids; /* logit bias (infer_sampler_set_logit_bias) */
    const float *bias;
    int n_bias;
    /* The prompt as tokens (used instead of prompt when not NULL): what
       infer_tokenize gives without BOS (special tokens parsed); BOS is put
       in front where the text's would be. Copied at start. */
    const infer_token *prompt_tokens;
    int n_prompt_tokens;
    /* Prompt reuse (default 1; llama.cpp's cache_prompt): a request with
       n_past 0 keeps the part of the sequence's cache that its prompt
       starts with (at least one prompt token is fed again, for logits) and
       feeds only the rest. 0: the sequence is emptied as n_past 0 says. */
    int cache_prompt;
    /* Called on the thread that steps the context after each chunk of the
       prompt is fed, with the share fed so far (a reused prefix counts as
       fed; the last call 1.0): a long prompt's progress. Return non-zero
       to cancel the request. NULL: none. */
    infer_progress_fn progress;
    void *progress_user;
    /* A lazy grammar (llama.cpp's grammar triggers): with grammar or
       json_schema, the reply is free text until one of these strings
       appears in it; the grammar then applies from the string's first byte
       (having read it and what its token added) to the end. A string that
       opens with '^' triggers only at the reply's start, blanks before it
       allowed ("^{" for a reply that is one JSON object). Where the grammar
       refuses the text it would read, it is dropped and the reply stays
       free. What tool_choice "auto" wants: infer_tool_format_triggers and
       infer_tool_call_grammar. Copied at start. */
    const char *const *grammar_triggers;
    int n_grammar_triggers;
    /* Several replies to one prompt (the API's n): once the prompt is fed,
       before the first token is sampled, the sequence is copied into each
       of these (infer_seq_copy, on the thread that steps the context).
       They must hold no unfinished request. A request with n_predict 0 and
       copy_to, then one request on each sequence with the same prompt
       (cache_prompt finds it whole), samples n replies of one prefill. */
    const int *copy_to;
    int n_copy_to;
    /* A thinking budget: with reasoning_budget >= 0, a reply still in its
       reasoning after that many tokens is made to close it: "\n" and
       reasoning_end ("</think>" where NULL) and "\n\n" come next, then the
       reply goes on freely. In its reasoning: the prompt opened it
       (reasoning_open 1), or the reply began with "<think>"; until
       reasoning_end appears. Not with a grammar (which decides the text
       itself), but for a lazy one with reasoning_end among its triggers:
       at the budget it wakes, and must begin with reasoning_end (as a
       call forced after a reasoning the prompt opened). -1 (default): no
       budget. */
    int reasoning_budget;
    int reasoning_open;
    const char *reasoning_end;
    /* Speculative decoding by prompt lookup: each pass that feeds a
       generated token also feeds up to `lookup` draft tokens, those that
       followed the latest earlier occurrence of the sequence's last 3 (or
       2) tokens, and samples through them in order, keeping the
       draft while the sampler draws its tokens (the rejected positions
       leave the cache). The output is what it would be without it: the
       same tokens with greedy sampling, the same distribution otherwise
       (see speculate.c), up to the last bits in which a pass of several
       tokens sums differently from one-token passes (as parallel
       sequences' passes do): only a near-tie can go the other way, and a
       seeded sampled reply may differ where such a difference moves a
       draw. Not with beam search. Gains where the
       reply repeats its context (editing a text, code, JSON): several
       tokens a pass. infer_request_metrics counts drafted and accepted
       tokens. 0 (default): off. */
    int lookup;
    /* Speculative decoding by a draft model: a context of a smaller model
       of the same vocabulary (refused otherwise), whose sequence `seq`
       (the request's own number) is made to hold what the request's
       sequence holds, then drafts draft_n tokens (0: none) greedily, one
       pass each, verified as lookup's are; both caches roll back what is
       rejected. It replaces lookup. The draft context belongs to the thread that
       steps the request while it runs (no other use of it meanwhile) and
       must outlive the request. NULL (default): none. */
    infer_context *draft;
    int draft_n;
} infer_request_params;

INFERDEF infer_request_params infer_request_default_params(void);
/* Queues a request on context c. It owns a copy of everything in p and is
   quick: it tokenizes the prompt; a grammar is compiled against the
   vocabulary when the request begins, on the thread that steps it. NULL
   with err set for bad parameters (a sequence out of range, both grammar
   and json_schema, a JSON schema it cannot read); what is found when it
   begins (a grammar that does not parse, a prompt that cannot fit, an
   empty prompt on an empty sequence of a model without BOS) ends it with
   that status. */
INFERDEF infer_request *infer_request_start(infer_context *c, const infer_request_params *p, infer_error *err);
/* Advances every unfinished request of c for about budget_ms: forward
   passes one after the other, each with one token of every generating
   request and prompt chunks sized (from the measured speed) to what is left
   of the budget; it never starts a pass it expects to overrun the budget,
   except the first, so each call makes progress (the smallest pass: the
   generating requests' tokens and a few prompt tokens, or more where the
   budget allows). A step can hence last budget_ms or one pass, whichever
   is longer. budget_ms <= 0: exactly one pass, prompts in chunks of up to
   n_batch tokens (what a program that only streams text wants). Returns
   the requests of c still unfinished (0: none left). Does nothing (but
   count) for a context that a worker steps. */
INFERDEF int infer_context_step(infer_context *c, double budget_ms);

/* 1 once the request has ended: its text, tokens and status no longer
   change. */
INFERDEF int infer_request_done(const infer_request *r);
/* INFER_OK while running and after a normal end (end of generation,
   n_predict, a stop string, the grammar's end); else what ended it:
   INFER_ERR_CANCELLED, INFER_ERR_CONTEXT_FULL (the sequence is full under
   INFER_FULL_POLICY_STOP; the text so far stays), an error of the grammar or the
   decode. err (may be NULL) gets the message. */
INFERDEF infer_status infer_request_status(const infer_request *r, infer_error *err);
/* The text generated so far from byte `from` on (a caller that streams
   passes what it already has), stop strings held back as described above.
   snprintf-style: writes at most size-1 bytes and a NUL, returns the length
   of the whole text from `from` (0 when from is past it). */
INFERDEF size_t infer_request_text(const infer_request *r, size_t from, char *buf, size_t size);
/* The generated token ids so far (an end-of-generation token included):
   writes up to max and how many there are into *n_tokens (may be NULL;
   out may be NULL with max 0 to count). INFER_ERR_ARG for no request. */
INFERDEF infer_status infer_request_tokens(const infer_request *r, infer_token *out, int max, int *n_tokens,
                                           infer_error *err);
/* The prompt's ids as fed (BOS included); complete once its first token is
   generated. Writes up to max, how many into *n_tokens, as above. */
INFERDEF infer_status infer_request_prompt_tokens(const infer_request *r, infer_token *out, int max, int *n_tokens,
                                                  infer_error *err);
/* Generated token i's most probable tokens (params n_probs): up to n into
   out, most probable first, how many into *n_probs (may be NULL; 0 without
   n_probs). INFER_ERR_ARG for an i not generated. */
INFERDEF infer_status infer_request_top_probs(const infer_request *r, int i, infer_token_prob *out, int n,
                                              int *n_probs, infer_error *err);
/* Generated token i's own probability in the distribution it was drawn
   from (as infer_sampler_token_prob; kept with n_probs > 0), or -1 without
   n_probs or for an i not generated. */
INFERDEF float infer_request_token_prob(const infer_request *r, int i);
/* Prompt tokens (BOS included) taken from the sequence's cache instead of
   fed (cache_prompt); 0 until the request begins. */
INFERDEF int infer_request_cached_tokens(const infer_request *r);
/* Its timings: ttft_ms from infer_request_start (waiting included), prompt_ms
   the passes that fed the prompt, the token intervals in wall time
   (between steps included). */
INFERDEF infer_metrics infer_request_metrics(const infer_request *r);
/* Asks the request to end with INFER_ERR_CANCELLED; from any thread, at any
   time until it is freed. A forward pass it is part of stops between
   layers (the context as before the pass; other requests go on at the next
   pass). It is done at once where no step is running, else when the
   running one sees it. A request already done is left as it is. */
INFERDEF void infer_request_cancel(infer_request *r);
/* Cancels it if running and frees it. Freeing a done request never waits;
   an unfinished one a worker is stepping waits at most for the forward
   pass under way (which stops between layers where the request is in it). */
INFERDEF void infer_request_free(infer_request *r);

/* Background stepping: n_threads threads that step the requests of the
   contexts given to them while the caller polls. A context is stepped by
   one of them at a time (so n_threads > 1 helps with several contexts);
   idle threads sleep. Each context's forward passes also use its own kernel
   threads (infer_context_params.n_threads): keep the total within the
   machine's cores. */
typedef struct infer_worker infer_worker;
INFERDEF infer_worker *infer_worker_new(int n_threads, infer_error *err);
/* infer_request_start, and the context goes to w: from now on w steps all
   of its requests (also ones started with infer_request_start) until the
   last is freed. While any is unfinished, use the context only through
   requests. The request's grammar or JSON schema is compiled here, on the
   caller's thread, before it joins the batch (a large one never stalls the
   others). infer_worker_start and infer_request_free of a worker's
   requests may be called from any threads at once. */
INFERDEF infer_request *infer_worker_start(infer_worker *w, infer_context *c, const infer_request_params *p,
                                           infer_error *err);
/* How long the worker steps one context before it turns to new requests
   and other contexts: ms > 0 (default 20) a time budget, prompt chunks
   sized to it as infer_context_step(c, ms) does; ms <= 0 one pass at a
   time with prompts in chunks of n_batch tokens (what a server wants: the
   most throughput, and a prompt fed alone is always split the same way,
   so its reply does not depend on timing). */
INFERDEF void infer_worker_set_slice(infer_worker *w, double ms);
/* Cancels every unfinished request of its contexts, stops its threads and
   frees it. The requests stay valid (done, INFER_ERR_CANCELLED where they
   were cut short) for infer_request_free; their contexts are stepped by
   infer_context_step again. No other thread may start or free this
   worker's requests meanwhile (freeing a context's last request unlinks
   the context from the worker this walks). */
INFERDEF void infer_worker_free(infer_worker *w);

/* ---- Quantizing ---------------------------------------------------------- */

/* What infer_quantize writes. The plain formats put every quantizable
   weight in that one format (llama.cpp's --pure); the _M mixes choose per
   tensor as llama.cpp's Q4_K_M and Q5_K_M do: output (and a tied
   token_embd) in Q6_K, attn_v and ffn_down in Q6_K for the first and last
   eighth of the layers and every third one between, the rest Q4_K (Q5_K).
   Either way 1-D tensors (norms) and tensors not named *weight are copied
   as they are, and a tensor whose rows are not a whole number of the
   format's blocks falls back as llama.cpp's does (Q4_K -> Q5_0,
   Q5_K -> Q5_1, Q6_K -> Q8_0, then F16). */
typedef enum infer_quant_target {
    INFER_QUANT_TARGET_F32 = 0, INFER_QUANT_TARGET_F16, INFER_QUANT_TARGET_BF16,
    INFER_QUANT_TARGET_Q8_0, INFER_QUANT_TARGET_Q4_0, INFER_QUANT_TARGET_Q4_1, INFER_QUANT_TARGET_Q5_0, INFER_QUANT_TARGET_Q5_1,
    INFER_QUANT_TARGET_Q4_K, INFER_QUANT_TARGET_Q5_K, INFER_QUANT_TARGET_Q6_K,
    INFER_QUANT_TARGET_Q4_K_M, INFER_QUANT_TARGET_Q5_K_M,
    INFER_QUANT_TARGET_MXFP4_MOE, /* experts (ffn_*_exps) MXFP4, other matrices Q8_0 */
    INFER_QUANT_TARGET_COUNT
} infer_quant_target;

/* Called once per tensor as it is written (from the calling thread). */
typedef void (*infer_quantize_progress_fn)(const char *name, int64_t i, int64_t n_tensors, infer_type from,
                                           infer_type to, size_t old_bytes, size_t new_bytes, void *user);

typedef struct infer_quantize_params {
    int n_threads;            /* 0 = every CPU */
    int allow_requantize;     /* quantized input tensors are dequantized and
                                 quantized again (lossy twice); else refused */
    infer_quantize_progress_fn progress; /* may be NULL */
    void *user;
} infer_quantize_params;

INFERDEF infer_quantize_params infer_quantize_default_params(void);
/* "Q4_K_M", "q8_0", ...: the target of that name, or -1. */
INFERDEF int infer_quant_target_from_name(const char *name);
INFERDEF const char *infer_quant_target_name(infer_quant_target t);
/* The format tensor number `tensor` of file g gets under target t (what
   infer_quantize will write), or -1 if it cannot be converted. */
INFERDEF int infer_quantize_tensor_type(const infer_gguf *g, int64_t tensor, infer_quant_target t);
/* Reads the GGUF file in_path (mapped, never loaded twice) and writes
   out_path: GGUF v3 with every metadata pair copied as it is, except
   general.file_type (llama.cpp's number for the target) and
   general.quantization_version (2); the tensors in the same order, each
   quantized row by row on n_threads threads and streamed to the file.
   out_path is removed again on failure. */
INFERDEF infer_status infer_quantize(const char *in_path, const char *out_path, infer_quant_target t,
                                     const infer_quantize_params *p, infer_error *err);

/* ---- Perplexity ------------------------------------------------------------ */

/* The running sums of llama.cpp's perplexity tool. */
typedef struct infer_perplexity {
    double nll, nll2;   /* sums of -log p(token) and of its square */
    int64_t count;      /* tokens scored */
} infer_perplexity;

/* Scores one chunk as llama.cpp's perplexity does: clears the cache,
   evaluates tokens[0..n) from position 0 (tokens[0] replaced by BOS when the
   model adds one), and adds -log softmax(logits[i])[tokens[i+1]] for every
   i in [n/2, n-1) to acc. n must fit the context. */
INFERDEF infer_status infer_perplexity_chunk(infer_context *c, const infer_token *tokens, int n,
                                             infer_perplexity *acc, infer_error *err);
/* exp(mean nll); *uncertainty (may be NULL) is ppl times the standard error
   of the mean nll, as llama.cpp's "Final estimate: PPL = X +/- Y". */
INFERDEF double infer_perplexity_value(const infer_perplexity *acc, double *uncertainty);

/* ---- Chat templates ------------------------------------------------------ */

/* The conversation formats infer.h writes. A model's tokenizer.chat_template
   (Jinja) is recognized by its text, with the markers llama.cpp looks for,
   never by the model's name. */
typedef enum infer_chat_kind {
    INFER_CHAT_KIND_CHATML = 0,        /* <|im_start|>role\n...<|im_end|>\n (Qwen2/2.5, SmolLM2, OpenHermes) */
    INFER_CHAT_KIND_LLAMA2,            /* Llama-2-chat: [INST] <<SYS>>..<</SYS>> x [/INST] y </s><s>[INST] */
    INFER_CHAT_KIND_MISTRAL,           /* Mistral Instruct v0.1/v0.2: [INST] x [/INST]y</s> */
    INFER_CHAT_KIND_MISTRAL_V1,        /* Mistral's "v1": " [INST] x [/INST] y</s>" */
    INFER_CHAT_KIND_MISTRAL_V3,        /* Mistral's "v3": "[INST] x[/INST] y</s>" */
    INFER_CHAT_KIND_MISTRAL_V3_TEKKEN, /* Mistral's "v3-tekken" (Nemo): "[INST]x[/INST]y</s>" */
    INFER_CHAT_KIND_MISTRAL_V7,        /* [SYSTEM_PROMPT] s[/SYSTEM_PROMPT][INST] x[/INST] y</s> */
    INFER_CHAT_KIND_LLAMA3,            /* Llama 3.0: <|start_header_id|>role<|end_header_id|>\n\nx<|eot_id|> */
    INFER_CHAT_KIND_GEMMA,             /* <start_of_turn>user\nx<end_of_turn>\n, "model" for assistant */
    INFER_CHAT_KIND_PHI3,              /* Phi-3, Phi-3.5: <|user|>\nx<|end|>\n */
    INFER_CHAT_KIND_ZEPHYR,            /* <|user|>\nx</s>\n (EOS text of the model) */
    INFER_CHAT_KIND_DEEPSEEK,          /* deepseek-coder: ### Instruction:\nx\n### Response:\ny\n<|EOT|>\n */
    INFER_CHAT_KIND_DEEPSEEK2,         /* DeepSeek-V2: User: x\n\nAssistant: y<EOS> */
    INFER_CHAT_KIND_DEEPSEEK3,         /* DeepSeek-V3/R1: <|User|>x<|Assistant|>y<EOS> (fullwidth bars) */
    INFER_CHAT_KIND_LLAMA31,           /* Llama 3.1-3.3: Llama 3 with a system turn that always opens with
                                     "Cutting Knowledge Date: December 2023\nToday Date: <date>\n\n" */
    INFER_CHAT_KIND_QWEN3,             /* Qwen3: ChatML; an earlier reply loses its <think>...</think> */
    INFER_CHAT_KIND_PHI4,              /* Phi-4: <|im_start|>user<|im_sep|>x<|im_end|> */
    INFER_CHAT_KIND_PHI4_MINI,         /* Phi-4-mini: <|user|>x<|end|> */
    INFER_CHAT_KIND_SMOLLM3,           /* SmolLM3: ChatML under its "## Metadata" system header */
    INFER_CHAT_KIND_MISTRAL_V7_TEKKEN, /* Mistral Small 3.x: v7 without the spaces */
    INFER_CHAT_KIND_GEMMA4,            /* Gemma 4: <|turn>user\nx<turn|>\n, "model" for assistant, a system
                                          turn; its thinking left out (the prompt closes an empty one) */
    INFER_CHAT_KIND_COUNT
} infer_chat_kind;

typedef struct infer_chat_template {
    infer_chat_kind kind;
    int fallback;        /* 1: the model has no template or one not recognized;
                            ChatML is used (a caller may warn) */
    char bos[64], eos[64]; /* the model's BOS/EOS token texts, for formats that
                            write them ("<s>", "</s>" when it has none) */
    /* ChatML: the system message the template writes when a conversation
       has none (Qwen2/2.5's "You are Qwen, ...", SmolLM2's), or "" */
    char default_system[256];
    /* Llama 3.1+ and SmolLM3: the date their system header gives as today's,
       as the template writes it ("26 Jul 2024"; SmolLM3 "26 July 2024"):
       the clock's where the template asks for it (strftime_now), else the
       template's own. Set it for a reproducible prompt. */
    char date[32];
    /* Qwen3, SmolLM3: 1 asks for an answer without reasoning, as the
       templates' enable_thinking=false: the reply opens with an empty
       <think></think> block (SmolLM3 also says "/no_think" in its header;
       there "/think" or "/no_think" in the system message decides). */
    int no_think;
} infer_chat_template;

/* role: "system", "user" or "assistant" (ChatML, Phi-3, Llama 3 and Zephyr
   write any other role as given; the rest skip it). */
typedef struct infer_chat_message {
    const char *role;
    const char *content;
} infer_chat_message;

/* The model's format, from its tokenizer.chat_template. */
INFERDEF infer_chat_template infer_chat_template_detect(const infer_model *m);
/* The same from a template's text (or a format's name, e.g. "llama3");
   bos/eos may be NULL ("<s>", "</s>"). NULL text: ChatML, fallback set. */
INFERDEF infer_chat_template infer_chat_template_from_text(const char *text, const char *bos, const char *eos);
/* "chatml", "llama2", ..., "llama3.1", "qwen3", "phi4", "phi4-mini", "smollm3",
   "mistral-v7-tekken". */
INFERDEF const char *infer_chat_template_name(infer_chat_kind k);
/* Formats messages[from..n) of the conversation msgs[0..n) as the template
   renders them, then, with add_assistant_prompt, the text that opens the
   assistant's reply. Each format is a short Jinja text of infer.h's own,
   run by the interpreter below (infer_jinja_render) with the variables
   messages, add_generation_prompt, bos_token, eos_token and t's settings;
   message bytes reach it as they are, UTF-8 or not.
   snprintf-style: writes at most size-1 bytes and a NUL (a short buf is no
   error) and the full length into *n_out (may be NULL); INFER_ERR_ARG on
   bad arguments, INFER_ERR_NOMEM when memory ran out.
   Each message's text depends only on the messages before it, so
     format(msgs, n, 0, a) == format(msgs, k, 0, 0) + format(msgs, n, k, a)
   for every k <= n: a chat can feed only what a new turn adds. A header
   the template always writes (Llama 3.1's system turn, SmolLM3's) and a
   default system message go with the first message.
   The initial BOS is not written (infer_tokenize adds it as the model asks);
   tokenize the result with parse_special = 1.
   Differences from the Jinja templates: Gemma and Mistral Instruct have no
   system role, so system text heads the first user turn (as llama.cpp);
   Mistral v3 puts it in the first turn, not the last; Qwen3 writes every
   assistant message as it writes one a user message follows (reasoning
   dropped), also the last; SmolLM3's and Llama 3.1's tool sections are
   never written (there are no tools); Phi-3.5's EOS after a conversation
   without the assistant prompt is not written. */
INFERDEF infer_status infer_chat_format(const infer_chat_template *t, const infer_chat_message *msgs, int n, int from,
                                        int add_assistant_prompt, char *buf, size_t size, size_t *n_out,
                                        infer_error *err);
/* The text that closes an assistant turn (e.g. "<|im_end|>\n"): a chat feeds
   it after a reply, in place of the end-of-generation token it sampled but
   did not decode, so the cache holds the formatted conversation (where the
   template writes the reply otherwise, e.g. Qwen3's without its reasoning,
   compare with infer_chat_format of that message).
   snprintf-style like infer_chat_format (*n_out the whole length). */
INFERDEF infer_status infer_chat_end_of_turn(const infer_chat_template *t, char *buf, size_t size, size_t *n_out,
                                             infer_error *err);

/* A sandboxed Jinja interpreter for chat templates (the template text as a
   model ships it): jinja2's ImmutableSandboxedEnvironment with trim_blocks,
   lstrip_blocks and loop controls, as transformers' apply_chat_template
   renders, with Python's printing (None, True, repr of lists and dicts),
   json.dumps as tojson (ensure_ascii=False by default), string methods,
   slices, namespace(), macros, raise_exception() and strftime_now() (a fixed
   instant, 2026-11-25 00:00:00, so renderings are reproducible).
   A hostile template ends with a one-line error within these limits: */
typedef struct infer_jinja_limits {
    int64_t max_steps; /* loop iterations and macro calls in one render, searches and
                          comparisons counted too, one step per 16 items or 256
                          bytes they visit (1,000,000) */
    int max_depth;     /* nesting while parsing, and while evaluating: expressions,
                          blocks and macro recursion together (256) */
    size_t max_output; /* bytes of output, and of any one string (16 MiB) */
    size_t max_memory; /* bytes of all values of one render together (256 MiB) */
} infer_jinja_limits;

INFERDEF infer_jinja_limits infer_jinja_default_limits(void);
/* Renders template_text with the variables of context_json, a JSON object
   (NULL or "": none), e.g. {"messages": [...], "tools": [...],
   "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"};
   limits NULL: the defaults. Returns the text (NUL-terminated; free it
   with infer_free()), or NULL with err set: INFER_ERR_ARG with a one-line message
   for a template that does not parse or fails while rendering (a limit
   included). *raised (may be NULL) is 1 where the template called
   raise_exception(msg): err->msg is then exactly msg (cut at 255 bytes,
   newlines made spaces); else 0. */
INFERDEF char *infer_jinja_render(const char *template_text, const char *context_json,
                                  const infer_jinja_limits *limits, int *raised, infer_error *err);
/* The model's Jinja chat template (GGUF tokenizer.chat_template), a copy
   to free with infer_free(); bos and eos (may be NULL) get the texts of
   its BOS and EOS tokens, "" where it has none (cut to fit). NULL where
   the model has none (err's code INFER_OK: an answer), or on failure
   (INFER_ERR_ARG for no model, INFER_ERR_NOMEM). */
INFERDEF char *infer_model_chat_template_text(const infer_model *m, char *bos, size_t bos_size, char *eos,
                                              size_t eos_size, infer_error *err);

/* ---- Tool calls and reasoning ---------------------------------------------- */

/* How a model writes tool calls in its reply, as its chat template renders
   an assistant's tool_calls. */
typedef enum infer_tool_format {
    INFER_TOOL_FORMAT_NONE = 0,    /* no tool calls: all text is content */
    INFER_TOOL_FORMAT_GENERIC,     /* a reply that is one JSON object: {"tool_call": {"name", "arguments"}},
                                {"tool_calls": [...]} or {"response": "text"} (llama.cpp's generic) */
    INFER_TOOL_FORMAT_HERMES,      /* <tool_call>{"name": .., "arguments": {..}}</tool_call> (Qwen 2.5/3, Hermes) */
    INFER_TOOL_FORMAT_LLAMA3,      /* Llama 3.1+: a reply that opens with {"name": .., "parameters": {..}};
                                <|python_tag|> then such JSON, name.call(k="v", ..) or code */
    INFER_TOOL_FORMAT_MISTRAL,     /* [TOOL_CALLS][{"name", "arguments", "id"?}, ..] and the newer
                                [TOOL_CALLS]name[CALL_ID]id[ARGS]{..} ([CALL_ID] optional) */
    INFER_TOOL_FORMAT_PHI4_MINI,   /* <|tool_call|>[{"name", "arguments"}, ..]<|/tool_call|> (Phi-4-mini's
                                template writes only the tool list, <|tool|>..<|/tool|>: this is
                                the model card's call syntax) */
    INFER_TOOL_FORMAT_DEEPSEEK_R1, /* <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n
                                ```json\n{..}\n```<｜tool▁call▁end｜>..<｜tool▁calls▁end｜> */
    INFER_TOOL_FORMAT_COMMAND_R,   /* Command R7B: <|START_ACTION|>[{"tool_call_id", "tool_name",
                                "parameters"}]<|END_ACTION|>; <|START_THINKING|>..<|END_THINKING|>
                                is reasoning, <|START_RESPONSE|> and <|END_RESPONSE|> are dropped */
    INFER_TOOL_FORMAT_FUNCTIONARY, /* functionary v3.1: <function=name>{..}</function> */
    INFER_TOOL_FORMAT_FIREFUNCTION, /* firefunction v2: functools[{"name", "arguments"}, ..] */
    INFER_TOOL_FORMAT_NEMOTRON,    /* Nemotron Nano v2: <TOOLCALL>[{"name", "arguments"}, ..]</TOOLCALL> */
    INFER_TOOL_FORMAT_APERTUS,     /* Apertus: <|tools_prefix|>[{"name": {..arguments..}}, ..]<|tools_suffix|> */
    INFER_TOOL_FORMAT_QWEN3_XML,   /* Qwen3.5, Qwen3-Coder: <tool_call>\n<function=name>\n<parameter=key>\n
                                value\n</parameter>\n..</function>\n</tool_call> (<tool_call> may be left
                                out); a value is JSON where it parses as JSON, unless the tools
                                (infer_output_parser_set_tools) declare its parameter a string */
    INFER_TOOL_FORMAT_LFM2,        /* LFM2, LFM2.5: <|tool_call_start|>[name(key="v", n=1), ..]<|tool_call_end|>
                                (Python literals), or JSON calls between the same markers */
    INFER_TOOL_FORMAT_HARMONY,     /* gpt-oss's harmony: messages <|start|>assistant<|channel|>c<|message|>..<|end|>
                                (the reply opens after the prompt's <|start|>assistant): channel analysis
                                is reasoning (whatever infer_reasoning says), final and commentary without
                                a recipient are content, a message to=functions.name (in its header, before
                                or after <|channel|>) is a call with the message as its JSON arguments;
                                <|call|> and <|return|> end the reply, as does the end of the text */
    INFER_TOOL_FORMAT_GEMMA4,      /* Gemma 4: <|tool_call>call:name{key:value,..}<tool_call|>, one call each,
                                its values Gemma's (bare keys, strings <|"|>..<|"|>, numbers, true/false/null,
                                {..} and [..]) given out as JSON; <|channel>thought\n..<channel|> is reasoning
                                (whatever infer_reasoning says), at the start or later */
    INFER_TOOL_FORMAT_COUNT
} infer_tool_format;

/* The format a chat template's text writes tool calls in, from the markers
   it holds; INFER_TOOL_FORMAT_NONE where it has none it knows (or text is NULL),
   INFER_TOOL_FORMAT_GENERIC where it mentions tools without a known syntax
   (Seed-OSS's <seed:tool_call> with XML parameters is not parsed). */
INFERDEF infer_tool_format infer_tool_format_detect(const char *chat_template_text);
/* "none", "generic", "hermes", "llama3", "mistral", "phi4-mini",
   "deepseek-r1", "command-r", "functionary", "firefunction", "nemotron", "apertus",
   "qwen3-xml", "lfm2", "harmony", "gemma4" */
INFERDEF const char *infer_tool_format_name(infer_tool_format f);
/* The strings that open a tool call in format f (e.g. "<tool_call>"), a
   NULL-terminated static list, for a grammar applied lazily once one is
   generated. Llama 3's and the generic format's JSON triggers open a call
   only at the start of the reply. */
INFERDEF const char *const *infer_tool_format_triggers(infer_tool_format f);

/* A GBNF grammar (root rule "root") that admits exactly a tool call in
   format f, its arguments matching the tool's parameters (a JSON schema,
   as response_format takes; a tool without one takes any object): what a
   request with tool_choice "required" or a named function samples under,
   or what it switches on lazily at one of infer_tool_format_triggers(f)
   (infer_request_params.grammar_triggers). tools_json is OpenAI's list,
   [{"type": "function", "function": {"name", "description", "parameters"}}]
   (bare {"name", "parameters"} too); name (may be NULL) keeps that tool
   only. parallel: one call or more, where the format writes several (Llama
   3's writes one; harmony's one, optionally after an analysis message, as
   its <|call|> ends the reply; Gemma 4's its own values, not JSON, the properties in the template's sorted
   order, optionally after its thinking channel). INFER_TOOL_FORMAT_NONE and _GENERIC give the generic format's
   {"tool_call": {"name", "arguments"}} ({"tool_calls": [..]} with
   parallel). Qwen3.5's XML writes a string parameter as text: one with
   minLength or maxLength (up to 1024) is bounded, and then holds no '<'.
   snprintf-style: at most size-1 bytes and a NUL, the grammar's
   whole length into *n_out (may be NULL); INFER_ERR_ARG with err's message
   (a list that is not JSON, a tool without a name, no tool of that name, a
   parameters schema the converter refuses) or INFER_ERR_NOMEM. */
INFERDEF infer_status infer_tool_call_grammar(infer_tool_format f, const char *tools_json, const char *name,
                                              int parallel, char *buf, size_t size, size_t *n_out,
                                              infer_error *err);

/* The reasoning part of a reply, infer_output_parser_new's `reasoning`. */
typedef enum infer_reasoning {
    INFER_REASONING_NONE = 0, /* no reasoning: <think> is content */
    INFER_REASONING_AUTO = 1, /* a reply that opens with <think> reasons up to </think> */
    INFER_REASONING_OPEN = 2  /* the prompt opened <think> (DeepSeek R1's ends with "<think>\n"):
                                 the reply is reasoning up to </think> (a repeated <think> dropped) */
} infer_reasoning;

/* One piece of a tool call, as OpenAI's streaming tool_calls deltas: a
   call's first piece has its id and name, later ones only more of the
   arguments' text. This parser gives each call in one piece, once it is
   complete and its JSON parsed (so nothing is given out that a malformed
   call would take back): id, name and all of the arguments. */
typedef struct infer_tool_call_delta {
    int index;             /* which call of the reply: 0, 1, ... */
    const char *id;        /* NULL after the call's first piece */
    const char *name;      /* NULL after the call's first piece */
    const char *arguments; /* more of the arguments' JSON text (may be "") */
} infer_tool_call_delta;

/* What a push made newly certain. The texts are NUL-terminated too; all of
   it stays valid until the parser's next call. */
typedef struct infer_output_delta {
    const char *content;   /* more of the reply's content ("" for none) */
    size_t content_len;
    const char *reasoning; /* more of its reasoning ("" for none) */
    size_t reasoning_len;
    const infer_tool_call_delta *calls;
    int n_calls;
} infer_output_delta;

typedef struct infer_tool_call {
    const char *id;        /* the format's own where it has one, else "call_" and 9 letters and digits
                              from a hash of the call and its index (Mistral: the 9 alone) */
    const char *name;
    const char *arguments; /* compact JSON text, an object ("{}" where the call gave none) */
} infer_tool_call;

/* The whole reply, split. Valid until infer_output_parser_free. */
typedef struct infer_output_result {
    const char *content;           /* "" for none */
    const char *reasoning_content; /* "" for none */
    size_t content_len, reasoning_len; /* their lengths (a reply may hold NUL bytes) */
    const infer_tool_call *calls;
    int n_calls;
    int n_malformed; /* calls whose text did not parse: kept as content, markers and all */
} infer_output_result;

/* Splits a model's reply, pushed as it is generated, into content,
   reasoning and tool calls. Text is given out once certain, never taken
   back: text that may begin a marker ("<tool" of "<tool_call>"), a call
   not yet complete, and blanks that may end up trailing are held until
   decided, as is the end of an incomplete UTF-8 character. Blanks at the
   start and end of the content, of the reasoning, and around markers are
   dropped. Pushing a reply in any pieces gives the same result, and the
   deltas put together are the result.
   A call whose JSON does not parse (or an unfinished one at the end) is
   not an error: its text, markers and all, becomes content, counted in
   n_malformed. Markers are found outside calls and reasoning only. */
typedef struct infer_output_parser infer_output_parser;
INFERDEF infer_output_parser *infer_output_parser_new(infer_tool_format f, infer_reasoning reasoning, infer_error *err);
/* The tools the request offers (OpenAI's list, as infer_tool_call_grammar
   takes; NULL forgets them), for formats whose arguments are not JSON
   (INFER_TOOL_FORMAT_QWEN3_XML: a parameter declared "type": "string"
   keeps its text as written). INFER_OK, or INFER_ERR_ARG with err's
   message where the list is not JSON. */
INFERDEF infer_status infer_output_parser_set_tools(infer_output_parser *p, const char *tools_json, infer_error *err);
/* Adds n bytes of the reply; *out (may be NULL) receives what became
   certain. INFER_OK; INFER_ERR_NOMEM when memory ran out, INFER_ERR_ARG
   after finish (the parser can only be freed then). */
INFERDEF infer_status infer_output_parser_push(infer_output_parser *p, const char *text, size_t n, infer_output_delta *out,
                                               infer_error *err);
/* The reply is complete: *last (may be NULL) receives what was held back,
   *result the whole reply. INFER_OK, or an error as push. */
INFERDEF infer_status infer_output_parser_finish(infer_output_parser *p, infer_output_delta *last,
                                                 infer_output_result *result, infer_error *err);
/* The reply was cut before its end (a token limit): at finish, a call
   still open is dropped, neither a call nor content, where otherwise it
   is read as far as it goes (a model's end may stand for its closing
   marker). Call it before infer_output_parser_finish. */
INFERDEF void infer_output_parser_cut(infer_output_parser *p);
/* 1 while a tool call's marker has been seen and the call is not complete
   (what follows is held back), else 0. */
INFERDEF int infer_output_parser_in_call(const infer_output_parser *p);
INFERDEF void infer_output_parser_free(infer_output_parser *p);

/* ---- For bindings (C#, Python, any FFI) --------------------------------- */

/* Bindings load infer.dll / libinfer.so and declare the API themselves, so
   they call nothing that passes a struct by value and check, once, that
   the library is the one they were written for: infer_abi_version() must
   equal the INFER_ABI_VERSION they were written against (it changes
   whenever a public struct or signature does), and infer_struct_size()
   must equal the size of their own copy of each struct they use. C
   programs may call these too. */
#define INFER_ABI_VERSION 2
INFERDEF int infer_abi_version(void);

typedef enum infer_struct_id {
    INFER_STRUCT_ID_ERROR = 0,
    INFER_STRUCT_ID_MODEL_PARAMS,
    INFER_STRUCT_ID_CONTEXT_PARAMS,
    INFER_STRUCT_ID_BATCH,
    INFER_STRUCT_ID_SAMPLER_PARAMS,
    INFER_STRUCT_ID_TOKEN_PROB,
    INFER_STRUCT_ID_METRICS,
    INFER_STRUCT_ID_REQUEST_PARAMS,
    INFER_STRUCT_ID_BEAM_PARAMS,
    INFER_STRUCT_ID_QUANTIZE_PARAMS,
    INFER_STRUCT_ID_CHAT_TEMPLATE,
    INFER_STRUCT_ID_CHAT_MESSAGE,
    INFER_STRUCT_ID_JINJA_LIMITS,
    INFER_STRUCT_ID_DETOK,
    INFER_STRUCT_ID_COUNT
} infer_struct_id;
/* sizeof the struct as this library was compiled; 0 for an unknown id. */
INFERDEF size_t infer_struct_size(infer_struct_id id);

/* The defaults of each params struct, written into *p (the *_default_params
   functions' values, without a struct returned by value). */
INFERDEF void infer_model_params_init(infer_model_params *p);
INFERDEF void infer_context_params_init(infer_context_params *p);
INFERDEF void infer_sampler_params_init(infer_sampler_params *p);
INFERDEF void infer_request_params_init(infer_request_params *p);
INFERDEF void infer_beam_params_init(infer_beam_params *p);
INFERDEF void infer_quantize_params_init(infer_quantize_params *p);
INFERDEF void infer_jinja_limits_init(infer_jinja_limits *p);
/* infer_context_metrics, infer_request_metrics, infer_chat_template_detect
   and infer_chat_template_from_text, their result written into *out. */
INFERDEF void infer_context_metrics_into(const infer_context *c, infer_metrics *out);
INFERDEF void infer_request_metrics_into(const infer_request *r, infer_metrics *out);
INFERDEF void infer_chat_template_detect_into(const infer_model *m, infer_chat_template *out);
INFERDEF void infer_chat_template_from_text_into(const char *text, const char *bos, const char *eos,
                                                 infer_chat_template *out);
/* Frees memory this library returned for the caller to free
   (infer_jinja_render, infer_model_chat_template_text) with the allocator
   it was built with (INFER_FREE): what every caller uses, a C program
   too (INFER_MALLOC may not be malloc, nor the library's C runtime the
   program's). NULL does nothing. */
INFERDEF void infer_free(void *p);

/* ---- Deprecated in 0.25, removed in 0.26 --------------------------------- */

/* Deprecated in 0.25, removed in 0.26: use infer_seq_n_past(c, 0). */
INFER_DEPRECATED INFERDEF int infer_context_n_past(const infer_context *c);
/* Deprecated in 0.25, removed in 0.26: use infer_seq_truncate(c, 0, n_past,
   &kept, err). Returns the positions kept (0 on failure). */
INFER_DEPRECATED INFERDEF int infer_context_truncate(infer_context *c, int n_past);
/* Deprecated in 0.25, removed in 0.26: use infer_context_logits. */
INFER_DEPRECATED INFERDEF const float *infer_get_logits(const infer_context *c, int i);
/* Deprecated in 0.25, removed in 0.26: use INFER_POOLING_* and
   INFER_TOOL_FORMAT_* (the constants of infer_pooling, infer_tool_format). */
#define INFER_POOL_MEAN INFER_POOLING_MEAN
#define INFER_POOL_LAST INFER_POOLING_LAST
#define INFER_POOL_FIRST INFER_POOLING_FIRST
#define INFER_TOOLS_NONE INFER_TOOL_FORMAT_NONE
#define INFER_TOOLS_GENERIC INFER_TOOL_FORMAT_GENERIC
#define INFER_TOOLS_HERMES INFER_TOOL_FORMAT_HERMES
#define INFER_TOOLS_LLAMA3 INFER_TOOL_FORMAT_LLAMA3
#define INFER_TOOLS_MISTRAL INFER_TOOL_FORMAT_MISTRAL
#define INFER_TOOLS_PHI4_MINI INFER_TOOL_FORMAT_PHI4_MINI
#define INFER_TOOLS_DEEPSEEK_R1 INFER_TOOL_FORMAT_DEEPSEEK_R1
#define INFER_TOOLS_COMMAND_R INFER_TOOL_FORMAT_COMMAND_R
#define INFER_TOOLS_FUNCTIONARY INFER_TOOL_FORMAT_FUNCTIONARY
#define INFER_TOOLS_FIREFUNCTION INFER_TOOL_FORMAT_FIREFUNCTION
#define INFER_TOOLS_NEMOTRON INFER_TOOL_FORMAT_NEMOTRON
#define INFER_TOOLS_APERTUS INFER_TOOL_FORMAT_APERTUS
#define INFER_TOOLS_COUNT INFER_TOOL_FORMAT_COUNT
/* Deprecated in 0.25, removed in 0.26: use the constants named after their
   types, INFER_FULL_POLICY_*, INFER_QUANT_TARGET_*, INFER_CHAT_KIND_*,
   INFER_STRUCT_ID_* and INFER_GGUF_TYPE_*. */
#define INFER_GGUF_UINT8 INFER_GGUF_TYPE_UINT8
#define INFER_GGUF_INT8 INFER_GGUF_TYPE_INT8
#define INFER_GGUF_UINT16 INFER_GGUF_TYPE_UINT16
#define INFER_GGUF_INT16 INFER_GGUF_TYPE_INT16
#define INFER_GGUF_UINT32 INFER_GGUF_TYPE_UINT32
#define INFER_GGUF_INT32 INFER_GGUF_TYPE_INT32
#define INFER_GGUF_FLOAT32 INFER_GGUF_TYPE_FLOAT32
#define INFER_GGUF_BOOL INFER_GGUF_TYPE_BOOL
#define INFER_GGUF_STRING INFER_GGUF_TYPE_STRING
#define INFER_GGUF_ARRAY INFER_GGUF_TYPE_ARRAY
#define INFER_GGUF_UINT64 INFER_GGUF_TYPE_UINT64
#define INFER_GGUF_INT64 INFER_GGUF_TYPE_INT64
#define INFER_GGUF_FLOAT64 INFER_GGUF_TYPE_FLOAT64
#define INFER_FULL_STOP INFER_FULL_POLICY_STOP
#define INFER_FULL_SHIFT INFER_FULL_POLICY_SHIFT
#define INFER_QUANT_F32 INFER_QUANT_TARGET_F32
#define INFER_QUANT_F16 INFER_QUANT_TARGET_F16
#define INFER_QUANT_BF16 INFER_QUANT_TARGET_BF16
#define INFER_QUANT_Q8_0 INFER_QUANT_TARGET_Q8_0
#define INFER_QUANT_Q4_0 INFER_QUANT_TARGET_Q4_0
#define INFER_QUANT_Q4_1 INFER_QUANT_TARGET_Q4_1
#define INFER_QUANT_Q5_0 INFER_QUANT_TARGET_Q5_0
#define INFER_QUANT_Q5_1 INFER_QUANT_TARGET_Q5_1
#define INFER_QUANT_Q4_K INFER_QUANT_TARGET_Q4_K
#define INFER_QUANT_Q5_K INFER_QUANT_TARGET_Q5_K
#define INFER_QUANT_Q6_K INFER_QUANT_TARGET_Q6_K
#define INFER_QUANT_Q4_K_M INFER_QUANT_TARGET_Q4_K_M
#define INFER_QUANT_Q5_K_M INFER_QUANT_TARGET_Q5_K_M
#define INFER_QUANT_MXFP4_MOE INFER_QUANT_TARGET_MXFP4_MOE
#define INFER_QUANT_COUNT INFER_QUANT_TARGET_COUNT
#define INFER_CHAT_CHATML INFER_CHAT_KIND_CHATML
#define INFER_CHAT_LLAMA2 INFER_CHAT_KIND_LLAMA2
#define INFER_CHAT_MISTRAL INFER_CHAT_KIND_MISTRAL
#define INFER_CHAT_MISTRAL_V1 INFER_CHAT_KIND_MISTRAL_V1
#define INFER_CHAT_MISTRAL_V3 INFER_CHAT_KIND_MISTRAL_V3
#define INFER_CHAT_MISTRAL_V3_TEKKEN INFER_CHAT_KIND_MISTRAL_V3_TEKKEN
#define INFER_CHAT_MISTRAL_V7 INFER_CHAT_KIND_MISTRAL_V7
#define INFER_CHAT_LLAMA3 INFER_CHAT_KIND_LLAMA3
#define INFER_CHAT_GEMMA INFER_CHAT_KIND_GEMMA
#define INFER_CHAT_PHI3 INFER_CHAT_KIND_PHI3
#define INFER_CHAT_ZEPHYR INFER_CHAT_KIND_ZEPHYR
#define INFER_CHAT_DEEPSEEK INFER_CHAT_KIND_DEEPSEEK
#define INFER_CHAT_DEEPSEEK2 INFER_CHAT_KIND_DEEPSEEK2
#define INFER_CHAT_DEEPSEEK3 INFER_CHAT_KIND_DEEPSEEK3
#define INFER_CHAT_LLAMA31 INFER_CHAT_KIND_LLAMA31
#define INFER_CHAT_QWEN3 INFER_CHAT_KIND_QWEN3
#define INFER_CHAT_PHI4 INFER_CHAT_KIND_PHI4
#define INFER_CHAT_PHI4_MINI INFER_CHAT_KIND_PHI4_MINI
#define INFER_CHAT_SMOLLM3 INFER_CHAT_KIND_SMOLLM3
#define INFER_CHAT_MISTRAL_V7_TEKKEN INFER_CHAT_KIND_MISTRAL_V7_TEKKEN
#define INFER_CHAT_COUNT INFER_CHAT_KIND_COUNT
#define INFER_STRUCT_ERROR INFER_STRUCT_ID_ERROR
#define INFER_STRUCT_MODEL_PARAMS INFER_STRUCT_ID_MODEL_PARAMS
#define INFER_STRUCT_CONTEXT_PARAMS INFER_STRUCT_ID_CONTEXT_PARAMS
#define INFER_STRUCT_BATCH INFER_STRUCT_ID_BATCH
#define INFER_STRUCT_SAMPLER_PARAMS INFER_STRUCT_ID_SAMPLER_PARAMS
#define INFER_STRUCT_TOKEN_PROB INFER_STRUCT_ID_TOKEN_PROB
#define INFER_STRUCT_METRICS INFER_STRUCT_ID_METRICS
#define INFER_STRUCT_REQUEST_PARAMS INFER_STRUCT_ID_REQUEST_PARAMS
#define INFER_STRUCT_BEAM_PARAMS INFER_STRUCT_ID_BEAM_PARAMS
#define INFER_STRUCT_QUANTIZE_PARAMS INFER_STRUCT_ID_QUANTIZE_PARAMS
#define INFER_STRUCT_CHAT_TEMPLATE INFER_STRUCT_ID_CHAT_TEMPLATE
#define INFER_STRUCT_CHAT_MESSAGE INFER_STRUCT_ID_CHAT_MESSAGE
#define INFER_STRUCT_JINJA_LIMITS INFER_STRUCT_ID_JINJA_LIMITS
#define INFER_STRUCT_DETOK INFER_STRUCT_ID_DETOK
#define INFER_STRUCT_COUNT INFER_STRUCT_ID_COUNT

#ifdef __cplusplus
}
#endif
#endif /* INFER_H_INCLUDED */
