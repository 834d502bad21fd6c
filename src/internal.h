/* internal.h - the implementation's prelude: system headers, configuration
   macros, stb_ds, and the declarations the parts below share.
   Everything from here on is compiled only with INFER_IMPLEMENTATION. */
#ifndef INFER_INTERNAL_H
#define INFER_INTERNAL_H
/* a part compiled by itself (an editor, tests/standalone_check.sh) is implementation too */
#ifndef INFER_IMPLEMENTATION
#define INFER_IMPLEMENTATION
#endif
#include "infer_api.h"
#include "model.h"
#include "platform.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(INFER_MALLOC) && defined(INFER_REALLOC) && defined(INFER_FREE)
/* all three given */
#elif !defined(INFER_MALLOC) && !defined(INFER_REALLOC) && !defined(INFER_FREE)
#define INFER_MALLOC(sz) malloc(sz)
#define INFER_REALLOC(p, sz) realloc(p, sz)
#define INFER_FREE(p) free(p)
#else
#error "infer.h: define all of INFER_MALLOC, INFER_REALLOC and INFER_FREE, or none"
#endif

#ifndef INFER_ASSERT
#include <assert.h>
#define INFER_ASSERT(x) assert(x)
#endif

#ifndef INFER_STB_DS_HEADER
#define INFER_STB_DS_HEADER <stb/stb_ds.h>
#endif

/* stb_ds: a private copy under renamed symbols (see "STB_DS" at the top). */
#ifndef INCLUDE_STB_DS_H
#define stbds_rand_seed infer__stbds_rand_seed
#define stbds_hash_bytes infer__stbds_hash_bytes
#define stbds_hash_string infer__stbds_hash_string
#define stbds_stralloc infer__stbds_stralloc
#define stbds_strreset infer__stbds_strreset
#define stbds_unit_tests infer__stbds_unit_tests
#define stbds_arrgrowf infer__stbds_arrgrowf
#define stbds_arrfreef infer__stbds_arrfreef
#define stbds_hmfree_func infer__stbds_hmfree_func
#define stbds_hmget_key infer__stbds_hmget_key
#define stbds_hmget_key_ts infer__stbds_hmget_key_ts
#define stbds_hmput_default infer__stbds_hmput_default
#define stbds_hmput_key infer__stbds_hmput_key
#define stbds_hmdel_key infer__stbds_hmdel_key
#define stbds_shmode_func infer__stbds_shmode_func
/* internal linkage, so two copies of infer.h's implementation (two
   libraries, or INFER_STATIC in two files) never clash either; stb_ds's
   own later extern declarations keep it */
struct stbds_string_arena;
#ifdef __cplusplus
extern "C" { /* the linkage stb_ds declares them with */
#endif
static void infer__stbds_rand_seed(size_t seed);
static size_t infer__stbds_hash_bytes(void *p, size_t len, size_t seed);
static size_t infer__stbds_hash_string(char *str, size_t seed);
static char *infer__stbds_stralloc(struct stbds_string_arena *a, char *str);
static void infer__stbds_strreset(struct stbds_string_arena *a);
static void *infer__stbds_arrgrowf(void *a, size_t elemsize, size_t addlen, size_t min_cap);
static void infer__stbds_arrfreef(void *a);
static void infer__stbds_hmfree_func(void *p, size_t elemsize);
static void *infer__stbds_hmget_key(void *a, size_t elemsize, void *key, size_t keysize, int mode);
static void *infer__stbds_hmget_key_ts(void *a, size_t elemsize, void *key, size_t keysize, ptrdiff_t *temp, int mode);
static void *infer__stbds_hmput_default(void *a, size_t elemsize);
static void *infer__stbds_hmput_key(void *a, size_t elemsize, void *key, size_t keysize, int mode);
static void *infer__stbds_hmdel_key(void *a, size_t elemsize, void *key, size_t keysize, size_t keyoffset, int mode);
static void *infer__stbds_shmode_func(size_t elemsize, int mode);
#ifdef __cplusplus
}
#endif
#define STBDS_NO_SHORT_NAMES
#define STBDS_REALLOC(c, p, s) INFER_REALLOC(p, s)
#define STBDS_FREE(c, p) INFER_FREE(p)
#ifdef STB_DS_IMPLEMENTATION
#define INFER__STB_DS_WAS_IMPL
#undef STB_DS_IMPLEMENTATION
#endif
#define STB_DS_IMPLEMENTATION
INFER__THIRD_PARTY_BEGIN
#include INFER_STB_DS_HEADER
INFER__THIRD_PARTY_END
#undef STB_DS_IMPLEMENTATION
#ifdef INFER__STB_DS_WAS_IMPL
#define STB_DS_IMPLEMENTATION
#endif
#endif

#define INFER__MIN(a, b) ((a) < (b) ? (a) : (b))
#define INFER__MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- util.c ---- */
static void infer__set_error(infer_error *err, infer_status code, const char *fmt, ...) INFER__PRINTF(3, 4);
static void *infer__calloc(size_t n, size_t size);
static char *infer__strndup(const char *s, size_t n);
/* stb_ds arrays grow only through these: stb_ds's own growth writes
   through the NULL a failed allocation gives. Each makes the room first
   (0, the array as it was, when memory ran out), so the stb_ds macro that
   follows never allocates. */
static int infer__arr_reserve(void **a, size_t elem_size, size_t capacity);
#define infer__arr_fit(a, capacity) infer__arr_reserve((void **)&(a), sizeof *(a), (size_t)(capacity))
#define infer__arr_room(a, n) infer__arr_reserve((void **)&(a), sizeof *(a), stbds_arrlenu(a) + (size_t)(n))
#define infer__arr_push(a, v) (infer__arr_room(a, 1) ? (stbds_arrput(a, v), 1) : 0)
#define infer__arr_setlen(a, n) \
    (infer__arr_reserve((void **)&(a), sizeof *(a), (size_t)(n)) ? (stbds_arrsetlen(a, n), 1) : 0)
/* n more elements at the end, uninitialized: their address, or NULL */
#define infer__arr_addn(a, n) (infer__arr_room(a, n) ? stbds_arraddnptr(a, n) : NULL)
/* 64-bit FNV-1a of n bytes, continuing from h (INFER__FNV_BASIS to start) */
#define INFER__FNV_BASIS 0xcbf29ce484222325ull
static uint64_t infer__fnv(uint64_t h, const void *p, size_t n);
static float infer__fp16_to_fp32(uint16_t h);
static uint16_t infer__fp32_to_fp16(float f);
static float infer__bf16_to_fp32(uint16_t h);
static uint16_t infer__fp32_to_bf16(float f);

/* ---- mathfn.c: the engine's own transcendental functions ----
   The same bits on every C library and compiler (glibc, MinGW, Microsoft's
   and emscripten's libm round differently): what reaches the logits or a
   sampled token calls these, not the C library's. Float ones within 1 ulp,
   double ones within about 1 ulp, C99's special values. */
static float infer__expf(float x);
static float infer__logf(float x);
static float infer__powf(float x, float y);
static void infer__sincosf(float x, float *sin_x, float *cos_x);
static float infer__sinf(float x);
static float infer__cosf(float x);
static float infer__tanhf(float x);
/* x * y + z rounded once, as C99's fmaf (MinGW's is not) */
static float infer__fmaf(float x, float y, float z);
static double infer__exp(double x);
static double infer__log(double x);
static double infer__pow(double x, double y);
/* to nearest, halves away from zero, as C99's roundf (MinGW's is not) */
static float infer__roundf(float x);

/* ---- gguf.c ---- */
typedef struct infer__str {
    const char *p; /* not NUL-terminated; points into the file */
    uint64_t n;
} infer__str;

typedef struct infer__kv {
    char *key;              /* NUL-terminated copy */
    infer_gguf_type type;
    infer_gguf_type arr_type; /* element type when type == ARRAY */
    uint64_t arr_n;
    const uint8_t *data;    /* the value (or first array element) in the file */
    infer__str *strs;       /* string arrays: each element, arr_n of them */
} infer__kv;


struct infer_gguf {
    infer__blob blob;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    infer__kv *kv;
    int64_t n_tensors;
    infer__tensor *tensors;
    infer__kv **kv_by_key;  /* the pairs sorted by key, for lookups */
    infer__tensor **tensor_by_name; /* the tensors sorted by name, for lookups */
    int has_data;           /* the file reaches its data section */
};

/* bytes of one value of a scalar type; 0 for strings, arrays and unknown types */
static size_t infer__gguf_scalar_size(infer_gguf_type t);
static const infer__kv *infer__gguf_kv(const infer_gguf *g, const char *key);
/* Scalar getters: return 1 and set *out when key exists with a compatible
   (integer for int, numeric for float) type, else 0 leaving *out alone. */
static int infer__gguf_get_int(const infer_gguf *g, const char *key, int64_t *out);
static int infer__gguf_get_float(const infer_gguf *g, const char *key, double *out);
/* element i of an integer array (0 where key is no such array or i is past its end) */
static int infer__gguf_get_int_at(const infer_gguf *g, const char *key, uint64_t i, int64_t *out);
static int infer__gguf_get_bool_at(const infer_gguf *g, const char *key, uint64_t i, int *out);
static int infer__gguf_get_bool(const infer_gguf *g, const char *key, int *out);
static int infer__gguf_get_str(const infer_gguf *g, const char *key, infer__str *out);
static const infer__tensor *infer__gguf_tensor(const infer_gguf *g, const char *name);

/* ---- quants.c: weight formats behind one interface (scalar reference) ---- */
typedef struct infer__type_traits {
    const char *name;
    int block_size;       /* values per block */
    int type_size;        /* bytes per block */
    int is_supported;     /* this build can compute with it */
    infer_type vec_dot_type; /* activations are converted to this first */
    void (*to_float)(const void *src, float *dst, int64_t n);
    void (*from_float)(const float *src, void *dst, int64_t n);
    /* dot of n values: w (this type) . x (vec_dot_type) */
    float (*vec_dot)(int n, const void *w, const void *x);
    /* the reference quantizer from float (llama.cpp's, no importance
       matrix), n a multiple of block_size; NULL where there is none */
    void (*quantize)(const float *src, void *dst, int64_t n);
} infer__type_traits;

static const infer__type_traits *infer__traits(infer_type t);
static size_t infer__row_size(infer_type t, int64_t n);

/* Reference quantizers, one row of n floats (a multiple of the block size)
   into dst; quants.c has the 32-value formats, quants_k.c the others. */
static void infer__quantize_row_q4_0(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q4_1(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q5_0(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q5_1(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q8_0(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q2_K(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q3_K(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q4_K(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q5_K(const float *x, void *dst, int64_t n);
static void infer__quantize_row_q6_K(const float *x, void *dst, int64_t n);
static void infer__quantize_row_iq4_nl(const float *x, void *dst, int64_t n);
static void infer__quantize_row_iq4_xs(const float *x, void *dst, int64_t n);
static void infer__quantize_row_mxfp4(const float *x, void *dst, int64_t n);

/* ---- quants_k.c: the K-quant and IQ4 kernels, for quants.c's table ---- */
static void infer__q2_K_to_float(const void *src, float *dst, int64_t n);
static void infer__q3_K_to_float(const void *src, float *dst, int64_t n);
static void infer__q4_K_to_float(const void *src, float *dst, int64_t n);
static void infer__q5_K_to_float(const void *src, float *dst, int64_t n);
static void infer__q6_K_to_float(const void *src, float *dst, int64_t n);
static void infer__q8_K_to_float(const void *src, float *dst, int64_t n);
static void infer__iq4_nl_to_float(const void *src, float *dst, int64_t n);
static void infer__iq4_xs_to_float(const void *src, float *dst, int64_t n);
static void infer__q8_K_from_float(const float *src, void *dst, int64_t n);
static float infer__q2_K_dot(int n, const void *w, const void *x);
static float infer__q3_K_dot(int n, const void *w, const void *x);
static float infer__q4_K_dot(int n, const void *w, const void *x);
static float infer__q5_K_dot(int n, const void *w, const void *x);
static float infer__q6_K_dot(int n, const void *w, const void *x);
static float infer__iq4_nl_dot(int n, const void *w, const void *x);
static float infer__iq4_xs_dot(int n, const void *w, const void *x);

/* ---- cpu.c: the kernels a context uses, per instruction set ----
   Starts as the scalar reference of quants.c; the chosen ISA's simd_*.c
   overwrites the entries it implements. */
typedef enum infer__isa { INFER__ISA_SCALAR, INFER__ISA_AVX2, INFER__ISA_AVX512, INFER__ISA_NEON, INFER__ISA_WASM, INFER__ISA_COUNT } infer__isa;
typedef float (*infer__vec_dot_fn)(int n, const void *w, const void *x);
typedef void (*infer__from_float_fn)(const float *src, void *dst, int64_t n);
/* y[t * ldy + r] = vec_dot(n, w + r * w_stride, x + t * x_stride) for
   r < n_rows, t < n_tok: a block of rows times a batch of tokens, tiled in
   registers (the same products as the vec_dot loop, summed in another order) */
typedef void (*infer__gemm_fn)(int n, const void *w, size_t w_stride, int n_rows, const void *x, size_t x_stride,
                               int n_tok, float *y, size_t ldy);
/* Packed weights (pack.c): rows regrouped at context creation in groups of
   INFER__PACK_ROWS so that SIMD lanes are output rows. A packed matrix is
   a run of equal-size groups (each a multiple of 64 bytes); group g starts
   at byte pack_size(n, g * INFER__PACK_ROWS) (infer__pack_offset), so
   threads may pack, or multiply, disjoint runs of whole groups. The buffer
   should be 64-byte aligned (faster, not required). gemm_packed is
   reentrant and uses up to ~90 KiB of stack. */
#define INFER__PACK_ROWS 16
/* F16 prompts of INFER__F16I_MIN_TOK tokens or more may run on the integer
   unit (AVX512-VNNI's dpwssd, twice the products of an FMA): per block of
   64 values of k, the weights become 12-bit and the activations 13-bit
   integers, each scaled by a power of two that keeps the block's top
   binade exact; 64 products sum exactly in int32 and go back to float at
   the two scales, INFER__F16I_SLICE values of k at a time (pack.c's
   infer__pack_ref_f16_i16 is the reference). */
#define INFER__F16I_MIN_TOK 16
#define INFER__F16I_SLICE 256
/* bytes a packed copy of `rows` rows of n values needs (rows padded up to a
   multiple of INFER__PACK_ROWS); 0 = no packed form */
typedef size_t (*infer__pack_size_fn)(int64_t n, int64_t rows);
/* packs rows [0, rows) of n values (row r at w + r * w_stride) into dst
   (pack_size(n, rows) bytes); padding rows of the last group are zero */
typedef void (*infer__pack_fn)(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
/* y[t * ldy + r] = vec_dot(n, row r, x + t * x_stride) for r < n_rows,
   t < n_tok (x in the vec_dot_type); packed points at the group holding row
   0 (so n_rows rows from there, rounded up to whole groups, must be
   packed); only the n_rows outputs per token are written */
typedef void (*infer__gemm_packed_fn)(int n, const void *packed, int n_rows, const void *x, size_t x_stride, int n_tok,
                                      float *y, size_t ldy);
typedef struct infer__kernels {
    infer__isa isa;
    infer__vec_dot_fn vec_dot[INFER_TYPE_COUNT];       /* by weight type */
    infer__from_float_fn from_float[INFER_TYPE_COUNT]; /* by activation type */
    infer__gemm_fn gemm[INFER_TYPE_COUNT];             /* by weight type; NULL: the vec_dot loop */
    /* by weight type: gemm sums a block's products in another order than
       vec_dot (NEON's smmla tiles: one integer per block, scaled once);
       contexts that match llama.cpp use the vec_dot loop instead */
    unsigned char gemm_unordered[INFER_TYPE_COUNT];
    /* by weight type; NULL: no packed form (use gemm/vec_dot): see pack.c */
    infer__pack_size_fn pack_size[INFER_TYPE_COUNT];
    infer__pack_fn pack[INFER_TYPE_COUNT];
    infer__gemm_packed_fn gemm_packed[INFER_TYPE_COUNT];
    /* by weight type: the packed product summed in llama.cpp's order where
       gemm_packed sums otherwise (F16: exact products instead of block
       integers; Q8_0, Q5_0: eight lane sums per row instead of one; Q4_K:
       one integer per block and the mins in a chain of their own),
       for contexts that match llama.cpp (infer_context_params.match_llama);
       NULL where gemm_packed already does */
    infer__gemm_packed_fn gemm_packed_ordered[INFER_TYPE_COUNT];
    /* llama.cpp's order for the rest of what such a context computes: an
       F16 dot as 16 lanes then a tree (infer__f16_dot_llama), and
       attention's p.V by key lanes: acc[as d + l] += v[16 d + l] * p[l],
       fused, for d < n */
    infer__vec_dot_fn f16_dot_ordered;
    infer__vec_dot_fn f16_dot_ordered1; /* for one token: infer__f16_dot_llama_vec */
    void (*lanes16_fma)(float *acc, int as, const float *v, const float *p, int n);
    /* the ordered pass's steps over a tile, bit for bit as the above:
       f16_scores_ordered is s[i lds + j] = f16_dot_ordered(k_j, q_i) (one:
       f16_dot_ordered1's) for j < kt, i < nq, where n % 16 == 0 (one: n %
       64), returning 0 where it cannot (NULL where an ISA has none: the
       dots one by one serve); exp_chunks16 is, for j in [lo, hi), e =
       exp_llama(s[j] scale - m) into lane (base + j) % 16 of ch (and into
       held[j] unless NULL), a chunk ending (lane 15, or j == last) adding
       ch's tree to the returned sum and clearing ch (last >= hi - 1: the
       row ends at or past the range); probs_fma16 is lanes16_fma over
       n_chunks chunks of 16 keys in order (chunk c's V at v + 16 n c, its
       exps at e + 16 c) of p = F16(e inv) for the lanes [lo, hi) of all
       16 n_chunks, 0 else; a chunk with none of them is skipped */
    int (*f16_scores_ordered)(int n, int one, const uint8_t *k, size_t k_stride, int kt, const uint8_t *q, size_t q_stride,
                              int nq, float *s, size_t lds);
    double (*exp_chunks16)(const float *s, float *held, int base, int lo, int hi, int last, float scale, float m, float *ch,
                           double sum);
    void (*probs_fma16)(float *acc, int as, const float *v, const float *e, int lo, int hi, float inv, int n, int n_chunks);
    /* x * y + z rounded once, and infer__exp_llama: the CPU's fused
       multiply-add where it has one (the same bits as mathfn.c's software
       one, which the other ISAs call) */
    float (*fmaf)(float x, float y, float z);
    float (*exp_llama)(float x);
    /* elementwise math (vecmath.c): g = silu(g) * u; g = gelu(g) * u with
       GELU from an F16-indexed table (llama.cpp's); RMSNorm's sum of squares */
    void (*silu_mul)(float *g, const float *u, int n);
    void (*gelu_mul)(float *g, const float *u, int n, const float *table);
    /* gpt-oss's clamped SwiGLU (INFER__ACT_SWIGLU_CLAMP), plain C on every ISA */
    void (*swiglu_clamp)(float *g, const float *u, int n);
    double (*sum_squares)(const float *x, int n);
    /* the recurrent layers' sums (recurrent.c), each in llama.cpp's order
       on this ISA: f32_dot_ordered is ggml_vec_dot_f32's x . y (four
       accumulators of the ISA's vector over each 4 vectors' run, added as
       its tree, the rest in float; plain C: in double); f32_mad is
       y += x v, fused where the ISA has vectors (ggml_vec_mad_f32);
       ssm_row is a row of Mamba2's scan (ggml_ssm_scan): s = s0 dA +
       B x_dt (s0 NULL: zeros), returning s . C in f32_dot_ordered's order */
    float (*f32_dot_ordered)(const float *x, const float *y, int n);
    void (*f32_mad)(float *y, const float *x, float v, int n);
    float (*ssm_row)(float *s, const float *s0, const float *B, const float *C, float dA, float x_dt, int n);
    /* a row j of the gated delta rule (ggml_gated_delta_net's passes over
       S, fused to two over the row): r = r0 decay (r0 NULL: zeros);
       d = (v - r . k) beta; r += k d; returning r . q, its sums in
       f32_dot_ordered's order and its update f32_mad's */
    float (*deltanet_row)(float *r, const float *r0, float decay, const float *k, const float *q, float v, float beta,
                          int n);
    /* the chunked scans' products (recurrent.c), all F32 and row-major:
       c[i ldc + j] = (acc ? c[i ldc + j] : 0) + sum over p < k of
       a[i lda + p] b[p ldb + j], for i < m, j < n, summed in p order
       (fused where the ISA has vectors; c shares no row with a or b) */
    void (*f32_gemm)(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n, int k, int acc);
    /* attention's V chunk (ordered pass): out[16 r + l] = F32(h[r stride + l])
       for r < rows, l < 16 (exact: every ISA alike) */
    void (*f16_rows16)(const uint16_t *h, size_t stride, int rows, float *out);
    /* attention's softmax over one row of a key tile, the keys j in
       [lo, hi) being those the row sees, x[j] = s[j] * scale: stats takes
       them into the row's running max *m and sum *l (the sum rescaled
       when the max grows); probs writes p[j] = F16(e^(x[j] - m) * inv)
       for j < n, 0 for the keys not seen (normalised before rounding, as
       llama.cpp has them) */
    void (*softmax_stats)(const float *s, int lo, int hi, float scale, float *m, float *l);
    void (*softmax_probs)(const float *s, int n, int lo, int hi, float scale, float m, float inv, uint16_t *p);
    /* the same softmax with e^x once a score, in llama.cpp's order, for a
       row whose scores are all kept: scaled_max returns max(m, x[j]) over
       [lo, hi); softmax_exp writes s[j] = e^(x[j] - m) in place for j in
       [lo, hi), 0 for the rest of [0, n), and returns their sum in
       double; probs_f16 writes p[j] = F16(e[j] * inv) for j < n */
    /* attention's q.K over a tile of an F16 cache for many query rows:
       s[i lds + j] = q_i . k_j for i < nq, j < kt, summed in dim order by
       every ISA (plain C where it has no kernel of its own), so scores
       match across ISAs bit for bit; work holds hd x (kt rounded up to 16)
       + (nq + 8) x hd floats */
    void (*qk_f16)(int hd, const uint8_t *k, size_t k_stride, int kt, const uint16_t *q, size_t q_stride, int nq,
                   float *s, size_t lds, float *work);
    /* attention's p.V over a tile of an F16 cache's V (kept a row of
       positions per value: value d of key j at vt[d vt_stride + j]) for many
       rows, added on: acc[i hd + d] += p_i[j] v_j[d] for j = 0, 1, .. kt - 1
       in that order, one fused sum a value (so the same whatever nq); hd % 16
       == 0; work holds hd x kt + nq x (kt rounded up to 16) floats. NULL
       where an ISA has none (the F16 product of rows serves) */
    void (*pv_f16)(int hd, const uint16_t *vt, size_t vt_stride, int kt, const uint16_t *p, size_t p_stride, int nq,
                   float *acc, float *work);
    float (*scaled_max)(const float *s, int lo, int hi, float scale, float m);
    double (*softmax_exp)(float *s, int n, int lo, int hi, float scale, float m);
    void (*probs_f16)(const float *e, int n, float inv, uint16_t *p);
    /* attention's p.V from a quantized V (a Q8_0 or Q4_0 cache, indexed by
       the format; NULL for others): acc[i hd + d] += p_ij * V_j[d] for
       rows i < nq, keys j < kt, V_j the row at v + j v_stride, p_ij the
       F16 p[i ldp + j]; each product fused as (p_ij * block scale) * q,
       key by key, so every ISA sums alike */
    void (*pv_quant[INFER_TYPE_COUNT])(int hd, const uint8_t *v, size_t v_stride, int kt, const uint16_t *p, size_t ldp,
                                       int nq, float *acc);
} infer__kernels;

/* The f32_gemm kernels' rows: a block of 4 rows of c from row i (of m),
   rows past the last pointing at it (computed again, never stored); returns
   how many are real */
static inline int infer__f32_gemm_rows4(const float *a, int lda, float *c, int ldc, int i, int m, const float **ar,
                                        float **cr) {
    int nr = INFER__MIN(4, m - i), r;
    for (r = 0; r < 4; r++) {
        int row = i + INFER__MIN(r, nr - 1);
        ar[r] = a + (size_t)row * lda, cr[r] = c + (size_t)row * ldc;
    }
    return nr;
}
/* Best ISA this CPU runs, or the one INFER_ISA names (an error if this CPU
   or build lacks it). */
static int infer__kernels_select(infer__kernels *k, infer_error *err);
static const char *infer__isa_name(infer__isa isa);
/* byte offset of the packed group holding row `row` (a multiple of
   INFER__PACK_ROWS) of a matrix of type t with rows of n values */
static size_t infer__pack_offset(const infer__kernels *k, infer_type t, int64_t n, int64_t row);
/* Each returns 0 when this build or CPU cannot run that ISA. */
static int infer__simd_avx2_install(infer__kernels *k);
static int infer__simd_avx512_install(infer__kernels *k);
static int infer__simd_neon_install(infer__kernels *k);
static int infer__simd_wasm_install(infer__kernels *k);
static void infer__vecmath_install(infer__kernels *k);

/* ---- utf8.c ---- */
static int infer__utf8_lead(unsigned b, int *lo, int *hi, uint32_t *bits);
static int infer__utf8_next(const char *s, size_t n, uint32_t *cp);
static size_t infer__utf8_len(unsigned char c);
static uint32_t infer__utf8_decode(const unsigned char *s, size_t n, size_t *i);
static size_t infer__utf8_encode(uint32_t cp, char *out);

/* ---- gbnf.c: what schema.c shares with the GBNF parser ---- */
#define INFER__G_MAX_REPEAT 4096 /* bounds of x{m,n} */
static void infer__fail_at(infer_error *err, const char *what, const char *src, const char *at, const char *fmt,
                           va_list ap);
static int infer__gp_word(char c);
static int infer__g_hex(char c);
/* ---- grammar.c ---- */
/* Where infer__grammar_nomem is set because a limit of the matcher was
   exceeded (not memory): which, as a one-line message; else NULL. */
struct infer__grammar;
static const char *infer__grammar_limit(const struct infer__grammar *G);

/* ---- json.c: JSON text parsed into values, and values written back ---- */
enum { INFER__J_NULL = 0, INFER__J_BOOL, INFER__J_NUM, INFER__J_STR, INFER__J_ARR, INFER__J_OBJ };

typedef struct infer__jv {
    int type;
    char *s;                 /* STR: the text decoded (UTF-8); NUM: as written */
    size_t n;
    int b;                   /* BOOL */
    struct infer__jv *items; /* stbds: ARR elements, OBJ values */
    char **keys;             /* stbds: OBJ keys, decoded */
    size_t *key_lens;        /* stbds: their lengths (a key may hold "\u0000") */
    const char *at;          /* where it starts in the schema text */
} infer__jv;

/* JSON nested deeper than this is refused: the parser and the schema walk
   recurse once per level, so this bounds their stack. */
#define INFER__JSON_MAX_DEPTH 256

typedef struct infer__jp {
    const char *src, *p;
    infer_error *err;
    int failed, depth;
    const char *what; /* names the text in errors; NULL: "JSON schema" */
    int raw_bytes;    /* 1: bytes of a string that are not UTF-8 are kept as they
                         are (text the caller gave, e.g. chat.c's messages) */
} infer__jp;

/* parses one value at j->p (NUL-terminated text), leading blanks skipped;
   on failure j->failed is set (and j->err filled in); free v either way */
static void infer__jp_value(infer__jp *j, infer__jv *v);
static void infer__jp_ws(infer__jp *j);
static void infer__jv_free(infer__jv *v);
/* code point c as UTF-8, appended to the stbds array *buf */
static void infer__j_put_utf8(char **buf, uint32_t c);
/* an object's value for key, or NULL */
static const infer__jv *infer__jv_get(const infer__jv *o, const char *key);

/* a growing byte string (stbds) */
typedef struct infer__sb {
    char *p;   /* stbds */
    int nomem; /* an append failed: the text is incomplete (checked where it is used) */
} infer__sb;

static void infer__sb_put(infer__sb *b, const char *s, size_t n);
static void infer__sb_putc(infer__sb *b, char c);
static void infer__sb_puts(infer__sb *b, const char *s);
static void infer__sb_int(infer__sb *b, long v);
/* x{min,max} in GBNF (max < 0: no limit) */
static void infer__sb_repeat(infer__sb *b, long min, long max);
/* a string, a value as compact JSON text */
static void infer__sb_json_string(infer__sb *b, const char *s, size_t n);
static void infer__sb_json(infer__sb *b, const infer__jv *v);

/* The shared rules of schema grammars (space, string, ...), numbered. */
enum {
    INFER__SP_SPACE, INFER__SP_STRING, INFER__SP_CHAR, INFER__SP_INTEGRAL, INFER__SP_INTEGER, INFER__SP_NUMBER,
    INFER__SP_BOOLEAN, INFER__SP_NULL, INFER__SP_VALUE, INFER__SP_OBJECT, INFER__SP_ARRAY, INFER__SP_COUNT
};
/* GBNF rules of several schemas in one grammar, appended to *out:
   schemas[i]'s top rule named names[i] (its other rules named after it),
   the shared rules once, with those `also` asks for (1u << INFER__SP_...)
   for the caller's own rules. 0, or -1 with jp->failed (jp->err set). */
static int infer__schema_rules(infer__jp *jp, const infer__jv *const *schemas, const char *const *names, int n,
                               unsigned also, infer__sb *out);
/* b's text into buf, snprintf-style; its length */
static int infer__sb_give(const infer__sb *b, char *buf, size_t size);
static void infer__sb_literal(infer__sb *b, const char *s, size_t n);
static void infer__jp_fail(infer__jp *j, const char *at, const char *fmt, ...) INFER__PRINTF(3, 4);

static void infer__jp_nomem(infer__jp *j);

/* ---- jinja.c ---- */
/* infer_jinja_render for texts infer.h trusts (the built-in chat formats):
   the context's strings may hold bytes that are not UTF-8, kept as they are. */
static char *infer__jinja_render_raw(const char *template_text, const char *context_json,
                                     const infer_jinja_limits *limits, infer_error *err);

/* ---- chat_formats.c ---- */
/* the built-in format of kind k as a Jinja text (ChatML's for an unknown k) */
static const char *infer__chat_format_text(infer_chat_kind k);

/* ---- toolcall.c: DeepSeek R1's tool-call markers (fullwidth bars, ▁) ---- */
#define INFER__DS_CALLS_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define INFER__DS_CALLS_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define INFER__DS_CALL_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define INFER__DS_CALL_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define INFER__DS_SEP "<\xEF\xBD\x9Ctool\xE2\x96\x81" "sep\xEF\xBD\x9C>"
/* Gemma 4's string quote (a token), in its calls (toolcall.c, toolgrammar.c) */
#define INFER__G4_QUOTE "<|\"|>"

/* ---- sampler.c ---- */
static void infer__sampler_grammar_wait(infer_sampler *s);
static int infer__sampler_grammar_wake(infer_sampler *s, const char *text, size_t n);
static int infer__sampler_nomem(const infer_sampler *s);
static const char *infer__sampler_grammar_limit(const infer_sampler *s);
/* why infer_sampler_sample last returned -1 */
enum { INFER__NONE_BANNED = 1, INFER__NONE_BANNED_HERE, INFER__NONE_GRAMMAR, INFER__NONE_NOMEM };
static int infer__sampler_none_why(const infer_sampler *s);

/* ---- speculate.c: drafts for speculative decoding (request.c verifies them) ---- */
static int infer__spec_lookup(const infer_token *hist, int n_hist, int ngram_min, int ngram_max, int max_draft,
                              infer_token *out);
static int infer__spec_draft_model(infer_context *dc, int seq, const infer_token *hist, int n_hist, int max_draft,
                                   infer_token *out, infer_error *err);

/* ---- tokenizer.c ---- */
typedef struct infer_vocab infer_vocab;
static infer_vocab *infer__vocab_load(const infer_gguf *g, infer_error *err);
static void infer__vocab_free(infer_vocab *v);
static int infer__vocab_n_tokens(const infer_vocab *v);
static infer_token infer__vocab_bos(const infer_vocab *v);
static infer_token infer__vocab_eos(const infer_vocab *v);
static int infer__vocab_add_bos(const infer_vocab *v);
static int infer__vocab_is_eog(const infer_vocab *v, infer_token t);
static int infer__vocab_tokenize(const infer_vocab *v, const char *text, size_t len, infer_token *out,
                                 int max, int add_bos, int parse_special);
static int infer__vocab_piece(const infer_vocab *v, infer_token t, char *buf, int size);
static const char *infer__vocab_warning(const infer_vocab *v);

/* ---- model.c (with arch.c): the model description (model.h) ---- */
/* this CPU's kernels and the weights repacked for them (weights.c): the
   CPU pass's part of a model, behind infer_model.cpu */
struct infer__cpu_weights {
    infer__kernels kern;  /* this CPU's kernels (INFER_ISA), chosen at load */
    uint8_t *packed_raw;  /* the arena holding every packed weight */
    size_t packed_bytes;
    const infer__tensor **packed_w; /* which weights are packed ... */
    const uint8_t **packed_at;      /* ... and where */
    int n_packed;
};
static const infer_vocab *infer__model_vocab(const infer_model *m);

/* arch.c: the architectures as rows of data, and the per-layer tensors */
enum {
    INFER__A_NEOX = 1u << 0,       /* RoPE rotates pairs (i, i + n_rot/2), not (2i, 2i+1) */
    INFER__A_GELU = 1u << 1,       /* GELU(tanh)-gated feed-forward, not SiLU */
    INFER__A_EMBD_SCALE = 1u << 2, /* embeddings times sqrt(dim) */
    INFER__A_Q_SCALE = 1u << 3,    /* the attention scale multiplies q after RoPE, not the scores */
    INFER__A_QKV_BIAS = 1u << 4,   /* q, k and v biases required */
    INFER__A_QK_NORM = 1u << 5,    /* each q and k head RMS-normed before RoPE */
    INFER__A_POST_NORMS = 1u << 6, /* RMSNorm on the attention and FFN outputs before the residual */
    INFER__A_SOFTCAP = 1u << 7,    /* attention scores and logits soft-capped */
    INFER__A_MOE = 1u << 8,        /* every layer's feed-forward is experts */
    INFER__A_MOE_OPT = 1u << 9,    /* a layer with a router is experts (Mixtral under llama) */
    INFER__A_FUSED = 1u << 10,     /* attn_qkv and gate+up in ffn_up may come fused (phi3) */
    INFER__A_LONGROPE = 1u << 11,  /* rope_factors_long/short (Phi-3's LongRoPE) */
    INFER__A_KV_PATTERN = 1u << 12, /* attention.head_count_kv may be an array: 0 marks a recurrent layer */
    INFER__A_ATTN_INTERVAL = 1u << 13, /* every full_attention_interval-th layer attends, the rest are recurrent */
    INFER__A_Q_GATE = 1u << 14,    /* attn_q interleaves each head's query and an output gate (sigmoid) */
    INFER__A_POST_ATTN_FFN_NORM = 1u << 15, /* the pre-FFN norm is stored as post_attention_norm */
    INFER__A_EMBD_NORM_OUT = 1u << 16, /* the final norm is stored as token_embd_norm */
    INFER__A_GRANITE_SCALES = 1u << 17, /* embedding, residual and logit scales from the file; RoPE only if fine-tuned */
    INFER__A_SINKS = 1u << 18,     /* a learned logit per head (attn_sinks) joins each softmax and adds no value */
    INFER__A_EXPERT_BIAS = 1u << 19, /* the router and the experts' gate, up and down carry biases */
    INFER__A_SWIGLU_CLAMP = 1u << 20, /* the experts' clamped SwiGLU: min(g,7)*sigmoid(1.702 min(g,7))*(clamp(u,-7,7)+1) */
    INFER__A_TOPK_SOFTMAX = 1u << 21, /* experts: the top k raw logits, then a softmax over those (no renormalising) */
    INFER__A_ALTUP = 1u << 22,     /* AltUp's streams (predict, correct) and LAuReL beside attention (Gemma 3n) */
    INFER__A_PLE = 1u << 23,       /* per-layer embeddings: each layer's input of embedding_length_per_layer_input */
    INFER__A_V_NORM = 1u << 24,    /* v RMS-normed per head, without a weight */
    INFER__A_FINAL_SOFTCAP = 1u << 25, /* the logits soft-capped (final_logit_softcapping), attention not */
    INFER__A_UNSCALED = 1u << 26,  /* attention scores unscaled (q and k are RMS-normed) */
    INFER__A_LAYER_SHAPES = 1u << 27, /* head sizes, KV heads, FFN widths and sliding layers per layer, from arrays
                                         (key_length_swa, rope.dimension_count_swa, sliding_window_pattern) */
    INFER__A_V_FROM_K = 1u << 28,  /* a layer without attn_v takes V from the raw K (Gemma 4's K=V) */
    INFER__A_MOE_DENSE = 1u << 29, /* an experts layer also runs its dense FFN beside them, each with its own norms,
                                      the router on the unweighted norm times ffn_gate_inp.scale (Gemma 4) */
    INFER__A_OUT_SCALE = 1u << 30  /* each layer's output times its layer_output_scale, where the file has one */
};

typedef struct infer__arch {
    const char *name;  /* general.architecture */
    unsigned flags;
    int swa_pattern;   /* n: layers with il % n < n - 1 see a sliding window; 0: none */
    int swa_default;   /* the window when the file has no sliding_window key; 0: required */
    float swa_rope_base; /* RoPE base of the sliding layers, unscaled; 0: the model's */
    int no_rope_step;  /* n: layers with il % n == n - 1 have no RoPE; 0: all have it */
    int recurrent;     /* the kind (infer__layer_kind) of the layers that do not attend; 0: all attend */
    int kv_from_start; /* n: only layers 0..n-1 keep a KV cache, later ones read the last of their type's; 0: all */
    int sparse_layers; /* n: layers 0..n-1 sparsify the FFN's gate (mean + 1.6449 std cut-off, Gemma 3n); 0: none */
} infer__arch;

/* Sizes a tensor's shape is written in. */
enum { INFER__D_NONE, INFER__D_DIM, INFER__D_Q, INFER__D_KV, INFER__D_FFN, INFER__D_HEAD, INFER__D_EXPERTS,
       INFER__D_EXPERT_FFN,
       INFER__D_Q_OUT,     /* attn_q's rows: q_dim, or twice that where it carries a gate */
       INFER__D_ONE,       /* 1 */
       INFER__D_CONV,      /* a recurrent layer's conv taps */
       INFER__D_CONV_CH,   /* its conv's channels */
       INFER__D_REC_IN,    /* its input product's rows */
       INFER__D_INNER,     /* its inner width (values out of the scan) */
       INFER__D_SSM_HEADS, /* its scan's heads */
       INFER__D_STATE,     /* a head's state width */
       INFER__D_NORM_GROUP, /* the inner width of one group of the gated norm */
       INFER__D_GROUPS,    /* the scan's groups */
       INFER__D_HEADS,     /* the query heads (one sink logit each) */
       INFER__D_PLE,       /* a layer's per-layer input width */
       INFER__D_ALTUP,     /* AltUp's streams */
       INFER__D_ALTUP2,    /* their square (the prediction coefficients) */
       INFER__D_LAUREL,    /* LAuReL's rank */
       INFER__D_EXPERT_FFN2 /* gate and up of one expert, fused */
};

/* When a per-layer tensor must be there. */
enum {
    INFER__T_ALWAYS,   /* every layer */
    INFER__T_OPTIONAL, /* bound where the file has it */
    INFER__T_FLAG,     /* required where the architecture has `flag`, else not part of it */
    INFER__T_UNFUSED,  /* q, k, v: required unless the layer's attn_qkv holds them */
    INFER__T_DENSE,    /* gate, up, down: required unless the layer is experts (gate: or fused in up) */
    INFER__T_EXPERT,   /* required where the layer is experts */
    INFER__T_UNLESS,   /* required unless the architecture has `flag` */
    INFER__T_FLAG_OPTIONAL, /* bound where the architecture has `flag` and the file has it */
    INFER__T_EXPERT_FLAG    /* required where the layer is experts and the architecture has `flag` */
};

typedef struct infer__tensor_spec {
    const char *suffix; /* blk.N.<suffix> */
    size_t field;       /* offsetof(infer__layer, the tensor) */
    unsigned char ne0, ne1, ne2; /* INFER__D_*: [ne0] a vector, [ne0, ne1] a matrix, [ne0, ne1, ne2] experts */
    unsigned char when;
    unsigned flag;
    unsigned kinds; /* the layer kinds (1 << infer__layer_kind) that have it; 0: every kind */
} infer__tensor_spec;

static const infer__arch *infer__arch_find(const char *name);
static void infer__arch_list(char *buf, size_t size); /* "llama, qwen2, ..." */
static const infer__tensor_spec *infer__arch_layer_tensors(int *n);

/* ---- weights.c: the weights repacked once per model ---- */
static int infer__weights_prepare(infer_model *m, infer_progress_fn progress, void *user, float from, infer_error *err);
static const uint8_t *infer__weights_packed(const infer_model *m, const infer__tensor *w);
static void infer__weights_free(infer_model *m);

/* ---- threads.c: a persistent pool; the caller is worker 0 ---- */
typedef void (*infer__task_fn)(void *arg, int ith, int nth);
typedef struct infer__pool infer__pool;
static infer__pool *infer__pool_new(int n_threads);
static void infer__pool_free(infer__pool *p);
static int infer__pool_size(const infer__pool *p);
/* Runs fn(arg, i, n) on every worker i of n and returns when all are done. */
static void infer__pool_run(infer__pool *p, infer__task_fn fn, void *arg);
/* Inside a task: returns once every worker of the pool has reached it. */
static void infer__pool_barrier(infer__pool *p);
/* Hands out work items: returns *v and adds 1, atomically. */
static int infer__atomic_next(int *v);

#endif /* INFER_INTERNAL_H */
