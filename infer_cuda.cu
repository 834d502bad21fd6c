/* infer_cuda.cu - the CUDA backend of infer.h: forward.c's pass on an
   NVIDIA GPU, behind the entry points of infer.h's backend part
   (src/backend.h). Build: compile the implementation with INFER_CUDA and
   link this file, compiled with nvcc, and cuBLAS (CMake: -DINFER_CUDA=ON).

   It reads the same model description as forward.c (model.h) and the
   same KV cache layout as attention.c, and takes the same steps in the
   same order under the same names (forward.c's infer__embed is embed
   here, and so on):
     embed -> per layer: norm_rows -> product_run (q, k, v) ->
     [q_gate_split] -> qk_prepare -> kv_store (fused into qk_prepare's
     kernel) -> attention -> [q_gate_apply] -> product_run (o) ->
     residual -> norm_rows -> ffn (or moe_ffn, or moe_dense_ffn: experts
     beside a dense FFN) -> residual -> [ple_block] -> [the layer's output
     scale]; then output. Each layer has its own shape (head size, KV
     heads, widths, RoPE: model.h's infer__layer): its activations in rows
     of its own widths, its cache in rows as wide as the widest layer's.
   Gemma 3n adds ple_inputs and altup_streams after embed; per layer
   altup_predict first, laurel beside attention and laurel_residual after
   it, altup_correct and ple_block last; altup_merge before output (a
   layer that reads an earlier layer's cache computes q alone and
   attends over that cache).
   A recurrent layer takes recurrent in place of q, k, v .. o (the input
   products, the conv, the scan, the gated norm, the output product), its
   state per sequence and slot in device memory the implementation
   allocates (backend.h's infer__rs_state), read and written by runs.
   Each step is one or two kernels over the batch's rows; the features of
   an architecture are data the kernels are given (a bias pointer or NULL,
   a window, a soft-cap, a RoPE table), never a family's name.

   Products: prompts (PROMPT_MIN tokens or more) go to cuBLAS on tensor
   cores (F16 or BF16 inputs, F32 accumulation; F32 weights in F32), a
   quantized matrix dequantized to F16 into a reused scratch first; fewer
   tokens go to a matrix-vector kernel that dequantizes in registers. The
   activations are rounded first to the format the CPU dots the weights
   with (llama.cpp's vec_dot_type), so the GPU stays within rounding of
   the CPU and of llama.cpp. Attention works in tiles of keys shared by a
   KV head's query heads, on tensor cores (wmma), with an online softmax;
   the keys are split across blocks and merged (flash-decoding). A decode
   step of every sequence replays a CUDA graph: one launch per step.
   tests/cuda_emu.h compiles this file for the CPU too (INFER_LAUNCH and
   INFER_DYNAMIC_SHARED are the two places that needs). */
#define INFER_BACKEND_INTERFACE
#include "infer.h"

#ifndef INFER_CUDA_EMULATE /* tests/cuda_emu.h runs this file on the CPU */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
/* kernel<<<grid, block, shared, stream>>>(args), written so the emulation
   can take the same calls */
#define INFER_LAUNCH(grid, block, shared, stream, ...) __VA_ARGS__<<<grid, block, shared, stream>>>
#define INFER_DYNAMIC_SHARED(type, name) extern __shared__ __align__(32) type name[]
#endif
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------ */

static void say(char *msg, size_t size, const char *fmt, ...) {
    va_list ap;
    if (!msg || !size) return;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
}

/* 1 when e is success, else 0 with "what: CUDA's message" in msg. */
static int ok(cudaError_t e, const char *what, char *msg, size_t size) {
    if (e == cudaSuccess) return 1;
    say(msg, size, "%s: %s", what, cudaGetErrorString(e));
    cudaGetLastError(); /* clears a (non-sticky) error so later calls start clean */
    return 0;
}

static int blas_ok(cublasStatus_t e, const char *what, char *msg, size_t size) {
    if (e == CUBLAS_STATUS_SUCCESS) return 1;
    say(msg, size, "%s: cuBLAS status %d", what, (int)e);
    return 0;
}

/* ---- the weight formats ------------------------------------------------
   Their layouts, names and sizes are formats.h's (the CPU's kernels read
   the same); here each block format is decoded once, by decode<T>, which
   both products read: the int8 one (deq8) and the float one (deq32). */

/* Every format the backend reads; X(type) for each. */
/* The block formats: their products run on int8 activations (dp4a). */
#define INFER_CUDA_QUANT_TYPES(X)                                                                  \
    X(INFER_TYPE_Q8_0) X(INFER_TYPE_Q4_0) X(INFER_TYPE_Q4_1) X(INFER_TYPE_Q5_0) X(INFER_TYPE_Q5_1) \
    X(INFER_TYPE_IQ4_NL) X(INFER_TYPE_Q2_K) X(INFER_TYPE_Q3_K) X(INFER_TYPE_Q4_K) X(INFER_TYPE_Q5_K) \
    X(INFER_TYPE_Q6_K) X(INFER_TYPE_IQ4_XS) X(INFER_TYPE_MXFP4)
#define INFER_CUDA_TYPES(X)                                                                        \
    X(INFER_TYPE_F32) X(INFER_TYPE_F16) X(INFER_TYPE_BF16) X(INFER_TYPE_Q8_0) X(INFER_TYPE_Q4_0)   \
    X(INFER_TYPE_Q4_1) X(INFER_TYPE_Q5_0) X(INFER_TYPE_Q5_1) X(INFER_TYPE_IQ4_NL)                  \
    X(INFER_TYPE_Q2_K) X(INFER_TYPE_Q3_K) X(INFER_TYPE_Q4_K) X(INFER_TYPE_Q5_K) X(INFER_TYPE_Q6_K) \
    X(INFER_TYPE_IQ4_XS) X(INFER_TYPE_MXFP4)

/* Values and bytes per block; 0 for a format this file does not read. */
static int block_of(int type, int *bytes) {
    infer__format f = infer__format_of((infer_type)type);
    switch (type) {
#define INFER_CUDA_READS(t) case t:
        INFER_CUDA_TYPES(INFER_CUDA_READS)
#undef INFER_CUDA_READS
        *bytes = f.type_size;
        return f.block_size;
    default: *bytes = 0; return 0;
    }
}

/* A format's name for messages. */
static const char *type_name(int t) {
    const char *name = infer__format_of((infer_type)t).name;
    return name ? name : "an unknown format";
}

/* Bytes are read one at a time: blocks of 18, 22, 110 ... bytes leave the
   fields of most blocks unaligned. */
__device__ __forceinline__ float ld_half(const uint16_t *field) {
    const uint8_t *p = (const uint8_t *)field;
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

/* Whether a block format has a minimum: its value i is s * q[i] + o for
   the scale s and offset o of the half (16 values) i is in; the others'
   is s * q[i] (o is 0 and not added, as the CPU's to_float adds none). */
__host__ __device__ constexpr bool has_min(int t) {
    return t == INFER_TYPE_Q4_1 || t == INFER_TYPE_Q5_1 || t == INFER_TYPE_Q2_K || t == INFER_TYPE_Q4_K ||
           t == INFER_TYPE_Q5_K;
}

/* decode<T>(row, j, q, s, o): the 32-value chunk j of a row in block
   format T (the 256-value formats: sub-block j % 8 of super-block j / 8)
   as the integers q it stores and each half's scale and offset (s.x, o.x
   for values 0..15, s.y, o.y for 16..31: see has_min), with the
   arithmetic of the format's to_float in quants.c / quants_k.c. */
template <int T> __device__ __forceinline__ void decode(const uint8_t *row, int j, int *q, float2 &s, float2 &o);

/* value i of a 32-value block whose low nibbles are values 0..15 and high
   nibbles 16..31 */
__device__ __forceinline__ int nibble(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

template <> __device__ __forceinline__ void decode<INFER_TYPE_Q8_0>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q8_0 *b = (const infer__block_q8_0 *)row + j;
    float d = ld_half(&b->d);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = b->qs[i];
    s = make_float2(d, d), o = make_float2(0.0f, 0.0f);
}

template <> __device__ __forceinline__ void decode<INFER_TYPE_Q4_0>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q4_0 *b = (const infer__block_q4_0 *)row + j;
    float d = ld_half(&b->d);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = nibble(b->qs, i) - 8;
    s = make_float2(d, d), o = make_float2(0.0f, 0.0f);
}

template <> __device__ __forceinline__ void decode<INFER_TYPE_Q4_1>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q4_1 *b = (const infer__block_q4_1 *)row + j;
    float d = ld_half(&b->d), m = ld_half(&b->m);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = nibble(b->qs, i);
    s = make_float2(d, d), o = make_float2(m, m);
}

template <> __device__ __forceinline__ void decode<INFER_TYPE_Q5_0>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q5_0 *b = (const infer__block_q5_0 *)row + j;
    float d = ld_half(&b->d);
    uint32_t qh = infer__qh(b->qh);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = (int)(nibble(b->qs, i) | ((qh >> i) & 1) << 4) - 16;
    s = make_float2(d, d), o = make_float2(0.0f, 0.0f);
}

template <> __device__ __forceinline__ void decode<INFER_TYPE_Q5_1>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q5_1 *b = (const infer__block_q5_1 *)row + j;
    float d = ld_half(&b->d), m = ld_half(&b->m);
    uint32_t qh = infer__qh(b->qh);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = (int)(nibble(b->qs, i) | ((qh >> i) & 1) << 4);
    s = make_float2(d, d), o = make_float2(m, m);
}

template <> __device__ __forceinline__ void decode<INFER_TYPE_IQ4_NL>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_iq4_nl *b = (const infer__block_iq4_nl *)row + j;
    float d = ld_half(&b->d);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = infer__iq4nl_values[nibble(b->qs, i)];
    s = make_float2(d, d), o = make_float2(0.0f, 0.0f);
}

/* MXFP4: E2M1's doubled grid, the block's power of two as the scale */
template <> __device__ __forceinline__ void decode<INFER_TYPE_MXFP4>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_mxfp4 *b = (const infer__block_mxfp4 *)row + j;
    float d = infer__e8m0_half(b->e);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = infer__mxfp4_values[nibble(b->qs, i)];
    s = make_float2(d, d), o = make_float2(0.0f, 0.0f);
}

/* Q2_K: chunk c holds sub-blocks 8h + 2(c%4) and the next (h = c / 4),
   their 2-bit values at bits 2(c%4) of qs[32h + i]. */
template <> __device__ __forceinline__ void decode<INFER_TYPE_Q2_K>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q2_K *b = (const infer__block_q2_K *)row + j / 8;
    int c = j % 8, h = c / 4, shift = 2 * (c % 4);
    const uint8_t *sc = b->scales + 8 * h + 2 * (c % 4), *p = b->qs + 32 * h;
    float d = ld_half(&b->d), dmin = ld_half(&b->dmin);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = (p[i] >> shift) & 3;
    s = make_float2(d * (sc[0] & 0xF), d * (sc[1] & 0xF));
    o = make_float2(-dmin * (sc[0] >> 4), -dmin * (sc[1] >> 4));
}

/* Q3_K: as Q2_K's layout, a third bit in hmask, 6-bit signed scales. */
template <> __device__ __forceinline__ void decode<INFER_TYPE_Q3_K>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q3_K *b = (const infer__block_q3_K *)row + j / 8;
    int c = j % 8, h = c / 4, shift = 2 * (c % 4), hbit = 4 * h + c % 4;
    const uint8_t *p = b->qs + 32 * h;
    float d = ld_half(&b->d);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = ((p[i] >> shift) & 3) - ((b->hmask[i] >> hbit) & 1 ? 0 : 4);
    s = make_float2(d * infer__scale_q3_K(8 * h + 2 * (c % 4), b->scales),
                    d * infer__scale_q3_K(8 * h + 2 * (c % 4) + 1, b->scales));
    o = make_float2(0.0f, 0.0f);
}

/* Q4_K / Q5_K: chunk c is sub-block c, nibbles of qs[32 (c / 2) + i];
   Q5_K's fifth bit in bit c of qh[i]. */
__device__ __forceinline__ int fifth_bit(const infer__block_q4_K *, int, int) { return 0; }
__device__ __forceinline__ int fifth_bit(const infer__block_q5_K *b, int i, int c) { return ((b->qh[i] >> c) & 1) << 4; }
template <typename B> __device__ __forceinline__ void decode_k4(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const B *b = (const B *)row + j / 8;
    int c = j % 8, shift = 4 * (c & 1);
    const uint8_t *p = b->qs + 32 * (c / 2);
    uint8_t sc, mn;
    float d = ld_half(&b->d), dmin = ld_half(&b->dmin);
    infer__scale_min_k4(c, b->scales, &sc, &mn);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = ((p[i] >> shift) & 0xF) | fifth_bit(b, i, c);
    s = make_float2(d * sc, d * sc), o = make_float2(-dmin * mn, -dmin * mn);
}
template <> __device__ __forceinline__ void decode<INFER_TYPE_Q4_K>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    decode_k4<infer__block_q4_K>(row, j, q, s, o);
}
template <> __device__ __forceinline__ void decode<INFER_TYPE_Q5_K>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    decode_k4<infer__block_q5_K>(row, j, q, s, o);
}

/* Q6_K: chunk 4h + k is values 128h + 32k .. (infer__q6_K_q), 16-value
   sub-blocks with int8 scales. */
template <> __device__ __forceinline__ void decode<INFER_TYPE_Q6_K>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_q6_K *b = (const infer__block_q6_K *)row + j / 8;
    int c = j % 8, h = c / 4, k = c % 4;
    const int8_t *sc = b->scales + 8 * h + 2 * k;
    float d = ld_half(&b->d);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = infer__q6_K_q(b, h, k, i) - 32;
    s = make_float2(d * sc[0], d * sc[1]), o = make_float2(0.0f, 0.0f);
}

template <> __device__ __forceinline__ void decode<INFER_TYPE_IQ4_XS>(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    const infer__block_iq4_xs *b = (const infer__block_iq4_xs *)row + j / 8;
    int c = j % 8;
    const uint8_t *p = b->qs + 16 * c;
    float dl = ld_half(&b->d) * infer__iq4_xs_scale(b, c);
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = infer__iq4nl_values[nibble(p, i)];
    s = make_float2(dl, dl), o = make_float2(0.0f, 0.0f);
}

/* deq32<T>(row, j, n, v): values 32j .. 32j+31 of a row of n values in
   format T, as floats (zeros past n, which only the float formats can
   reach: the quantized ones have whole blocks). */
template <int T> __device__ __forceinline__ void deq32(const uint8_t *row, int j, int, float *v) {
    int q[32];
    float2 s, o;
    decode<T>(row, j, q, s, o);
#pragma unroll
    for (int i = 0; i < 32; i++) {
        if (has_min(T)) v[i] = (i < 16 ? s.x : s.y) * q[i] + (i < 16 ? o.x : o.y);
        else v[i] = (i < 16 ? s.x : s.y) * q[i];
    }
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_F32>(const uint8_t *row, int j, int n, float *v) {
    const float *r = (const float *)row + 32 * j;
    int m = n - 32 * j;
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = i < m ? r[i] : 0.0f;
}

/* F16 as half2 pairs (rows of an even length: 4-byte aligned) */
template <> __device__ __forceinline__ void deq32<INFER_TYPE_F16>(const uint8_t *row, int j, int n, float *v) {
    const __half *r = (const __half *)row + 32 * j;
    int m = n - 32 * j;
    if (m >= 32 && n % 2 == 0) {
        const __half2 *r2 = (const __half2 *)r;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            float2 f = __half22float2(r2[i]);
            v[2 * i] = f.x, v[2 * i + 1] = f.y;
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = i < m ? __half2float(r[i]) : 0.0f;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_BF16>(const uint8_t *row, int j, int n, float *v) {
    const unsigned short *r = (const unsigned short *)row + 32 * j;
    int m = n - 32 * j;
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = i < m ? __uint_as_float((unsigned)r[i] << 16) : 0.0f;
}

/* deq8<T>(row, j, q, s, o): values 32j .. 32j+31 of a row in block format
   T as value = s.h * q + o.h for the half h (of 16) a value is in, q as 8
   ints of 4 packed int8 each (the dp4a operands). */
__device__ __forceinline__ int pack4(int a, int b, int c, int d) {
    return (a & 0xff) | (b & 0xff) << 8 | (c & 0xff) << 16 | (int)((unsigned)(d & 0xff) << 24);
}
template <int T> __device__ __forceinline__ void deq8(const uint8_t *row, int j, int *q, float2 &s, float2 &o) {
    int v[32];
    decode<T>(row, j, v, s, o);
#pragma unroll
    for (int k = 0; k < 8; k++) q[k] = pack4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
}

/* ---- kernels: the building blocks ------------------------------------- */

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL_MASK, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, o));
    return x;
}

/* RMSNorm's sums as the CPU's (infer__sum_squares): each square rounded
   to float, summed in double, which leaves the order no say; then
   1 / sqrt(mean + eps) in float. */
__device__ __forceinline__ double warp_sum_d(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL_MASK, x, o);
    return x;
}
__device__ double block_sum_d(double x) {
    __shared__ double part_d[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    x = warp_sum_d(x);
    __syncthreads(); /* part_d may still be read by an earlier call */
    if (lane == 0) part_d[warp] = x;
    __syncthreads();
    x = lane < n_warps ? part_d[lane] : 0.0;
    return warp_sum_d(x);
}
__device__ __forceinline__ float rms_scale(double ss, int n, float eps) { return 1.0f / sqrtf((float)(ss / n) + eps); }

__device__ __forceinline__ float round_f16(float x) { return __half2float(__float2half_rn(x)); }

/* embed: X[t] = row tokens[t] of W, dequantized, times scale (0: none);
   one block per token. */
template <int T>
__global__ void k_embed(const uint8_t *__restrict__ W, size_t row_bytes, int n, const int *__restrict__ tokens,
                        float scale, float *__restrict__ X) {
    const uint8_t *w = W + (size_t)tokens[blockIdx.x] * row_bytes;
    float *x = X + (size_t)blockIdx.x * n;
    for (int j = threadIdx.x; j < (n + 31) / 32; j += blockDim.x) {
        float v[32];
        int m = min(32, n - 32 * j);
        deq32<T>(w, j, n, v);
        for (int i = 0; i < m; i++) x[32 * j + i] = scale > 0.0f ? v[i] * scale : v[i];
    }
}

/* norm_rows: Y[r] = (X[rows ? rows[r] : r] * 1/sqrt(mean(x^2) + eps)) * w,
   one block per row. */
__global__ void k_norm_rows(const float *__restrict__ X, const int *__restrict__ rows, const float *__restrict__ w,
                            float *__restrict__ Y, int n, float eps) {
    const float *x = X + (size_t)(rows ? rows[blockIdx.x] : (int)blockIdx.x) * n;
    float *y = Y + (size_t)blockIdx.x * n;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(x[i] * x[i]);
    scale = rms_scale(block_sum_d(ss), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = (x[i] * scale) * w[i];
}

/* residual: x += post_norm(xb + bias) * scale, the bias, the norm and the
   scale (Granite's residual_scale; 0: none) where given; one block per
   token. */
__global__ void k_residual(float *__restrict__ X, float *__restrict__ XB, const float *__restrict__ bias,
                           const float *__restrict__ norm, int n, float eps, float rscale) {
    float *x = X + (size_t)blockIdx.x * n, *xb = XB + (size_t)blockIdx.x * n;
    float scale = 1.0f;
    if (bias)
        for (int i = threadIdx.x; i < n; i += blockDim.x) xb[i] += bias[i];
    if (norm) {
        double ss = 0.0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(xb[i] * xb[i]);
        scale = rms_scale(block_sum_d(ss), n, eps);
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = norm ? (xb[i] * scale) * norm[i] : xb[i];
        x[i] += rscale > 0.0f ? __fmul_rn(e, rscale) : e;
    }
}

/* moe_dense_ffn's router input: Y = RMS-norm(X) (no weight) times inv
   times w, as forward.c multiplies; one block per row. */
__global__ void k_moe_router_in(const float *__restrict__ X, const float *__restrict__ w, float inv, float *__restrict__ Y,
                                int n, float eps) {
    const float *x = X + (size_t)blockIdx.x * n;
    float *y = Y + (size_t)blockIdx.x * n;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(x[i] * x[i]);
    scale = rms_scale(block_sum_d(ss), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = ((x[i] * scale) * inv) * w[i];
}

/* moe_dense_ffn's end: XB = RMS-norm_w(XB) + D, in place; one block per
   row. */
__global__ void k_norm_add(float *XB, const float *__restrict__ w, const float *__restrict__ D, int n, float eps) {
    float *xb = XB + (size_t)blockIdx.x * n;
    const float *d = D + (size_t)blockIdx.x * n;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(xb[i] * xb[i]);
    scale = rms_scale(block_sum_d(ss), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) xb[i] = __fadd_rn((xb[i] * scale) * w[i], d[i]); /* (not contracted) */
}

/* qk_prepare: one warp per head of one token (blockIdx.x), q heads first
   then k heads (blockIdx.y): the bias, the head's RMSNorm, RoPE (cos and
   sin of each pair from the batch's table; NULL: no RoPE on this layer),
   and q times q_scale (1: none). kv_store fused in: a k head's warp
   writes the rotated k, and v (with its bias, RMS-normed where v_norm
   says), straight into the token's sequence's cache at slot pos % slots
   (attention.c's layout: K rows in F16, Q8_0 or Q4_0; V in F16
   transposed, or Q8_0 or Q4_0 rows, quantized as the CPU's kernels do, a
   block of 32 across the warp's lanes). A layer that reads an earlier
   layer's cache launches the q heads alone. */
#define QK_MAX_HD 256
/* A cache's format (kv_dest.kvq, k_attention's kvq). */
enum { KV_F16 = 0, KV_Q8_0 = 1, KV_Q4_0 = 2 };
struct kv_dest {
    const int *pos, *seq;
    uint8_t *const *kc, *const *vc;
    int layer, n_layers, slots, kvq;
    size_t k_row;
};

/* A quantized cache's block of 32 values (formats.h's Q4_0 or Q8_0): its
   bytes, its scale, and value j's integer. */
__host__ __device__ __forceinline__ int kv_block_bytes(int kvq) {
    return kvq == KV_Q4_0 ? (int)sizeof(infer__block_q4_0) : (int)sizeof(infer__block_q8_0);
}
__device__ __forceinline__ float kv_scale(const uint8_t *blk, int kvq) {
    return kvq == KV_Q4_0 ? ld_half(&((const infer__block_q4_0 *)blk)->d) : ld_half(&((const infer__block_q8_0 *)blk)->d);
}
__device__ __forceinline__ int kv_int(const uint8_t *blk, int j, int kvq) {
    if (kvq == KV_Q4_0) return nibble(((const infer__block_q4_0 *)blk)->qs, j) - 8;
    return ((const infer__block_q8_0 *)blk)->qs[j];
}

/* One head's hd values (lane + 32u, u < hd / 32 when quantized) into a cache row. */
__device__ __forceinline__ void store_head(uint8_t *row, int head, int hd, const float *v, int lane, int kvq,
                                           int transposed_slots, int slot) {
    if (kvq == KV_F16) {
        for (int i = lane; i < hd; i += 32) {
            __half h = __float2half_rn(v[i]);
            if (transposed_slots) ((__half *)row)[((size_t)head * hd + i) * transposed_slots + slot] = h;
            else ((__half *)row)[(size_t)head * hd + i] = h;
        }
        return;
    }
    if (kvq == KV_Q4_0) { /* as infer__quantize_row_q4_0: the first value of largest magnitude m is -8 */
        for (int u = 0; u < hd / 32; u++) {
            infer__block_q4_0 *blk = (infer__block_q4_0 *)row + (head * hd / 32 + u);
            float e = v[32 * u + lane], amax = warp_max(fabsf(e));
            int first = __ffs(__ballot_sync(FULL_MASK, fabsf(e) == amax)) - 1;
            float m = amax != 0.0f ? __shfl_sync(FULL_MASK, e, first) : 0.0f; /* (all zeros: +0, as the CPU's) */
            float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            int q = min(15, (int)(e * id + 8.5f)), hi = __shfl_down_sync(FULL_MASK, q, 16);
            __half dh = __float2half_rn(d);
            if (lane == 0) memcpy(&blk->d, &dh, 2);
            if (lane < 16) blk->qs[lane] = (uint8_t)(q | hi << 4);
        }
        return;
    }
    for (int u = 0; u < hd / 32; u++) {
        infer__block_q8_0 *blk = (infer__block_q8_0 *)row + (head * hd / 32 + u);
        float e = v[32 * u + lane], amax = warp_max(fabsf(e)), id = amax != 0.0f ? 127.0f / amax : 0.0f;
        __half dh = __float2half_rn(amax / 127.0f);
        if (lane == 0) memcpy(&blk->d, &dh, 2);
        blk->qs[lane] = (int8_t)nearbyintf(e * id);
    }
}

__global__ void k_qk_prepare(float *__restrict__ Q, float *__restrict__ K, float *__restrict__ V, int q_dim, int kv_dim,
                             int n_q, int hd, int v_is_k, const float *__restrict__ bq, const float *__restrict__ bk,
                             const float *__restrict__ bv, const float *__restrict__ q_norm,
                             const float *__restrict__ k_norm, float eps, const float *__restrict__ rope, int rope_stride,
                             int n_rot, int neox, int fused, float q_scale, int v_norm, kv_dest kv) {
    __shared__ float head[QK_MAX_HD], out[QK_MAX_HD];
    int t = blockIdx.x, h = blockIdx.y, lane = threadIdx.x, is_q = h < n_q, kh = h - n_q;
    float *x = is_q ? Q + (size_t)t * q_dim + (size_t)h * hd : K + (size_t)t * kv_dim + (size_t)kh * hd;
    const float *bias = is_q ? (bq ? bq + (size_t)h * hd : NULL) : (bk ? bk + (size_t)kh * hd : NULL);
    const float *norm = is_q ? q_norm : k_norm;
    float ss = 0.0f, scale = 1.0f;
    for (int i = lane; i < hd; i += 32) {
        float e = x[i] + (bias ? bias[i] : 0.0f);
        head[i] = e;
        if (!is_q && v_is_k) V[(size_t)t * kv_dim + (size_t)kh * hd + i] = e; /* V is the raw K */
        ss += e * e;
    }
    if (norm) {
        ss = warp_sum(ss);
        scale = 1.0f / sqrtf(ss / (float)hd + eps);
        for (int i = lane; i < hd; i += 32) head[i] = (head[i] * scale) * norm[i];
    }
    __syncwarp();
    for (int i = lane; i < hd; i += 32) {
        float e = head[i];
        if (rope && i < n_rot) {
            const float *cs = rope + (size_t)t * rope_stride;
            int half = n_rot / 2, pair = neox ? i % half : i / 2, first = neox ? i < half : (i & 1) == 0;
            int a = neox ? pair : 2 * pair, b = neox ? pair + half : 2 * pair + 1;
            float c = cs[2 * pair], s = cs[2 * pair + 1], x0 = head[a], x1 = head[b];
            if (fused) /* as llama.cpp's CPU build contracts it (a context that matches it) */
                e = first ? fmaf(x0, c, -(x1 * s)) : fmaf(x0, s, x1 * c);
            else
                e = first ? x0 * c - x1 * s : x0 * s + x1 * c;
        }
        out[i] = is_q ? e * q_scale : e;
        x[i] = out[i];
    }
    if (is_q) return;
    __syncwarp();
    {
        int slot = kv.pos[t] % kv.slots;
        size_t at = (size_t)kv.seq[t] * kv.n_layers + kv.layer;
        float *v = V + (size_t)t * kv_dim + (size_t)kh * hd;
        store_head(kv.kc[at] + (size_t)slot * kv.k_row, kh, hd, out, lane, kv.kvq, 0, 0);
        double vss = 0.0;
        for (int i = lane; i < hd; i += 32) {
            head[i] = v[i] + (bv ? bv[(size_t)kh * hd + i] : 0.0f);
            vss += (double)(head[i] * head[i]);
        }
        if (v_norm) { /* RMS-normed without a weight, the sum in double as the CPU's */
            float vscale = rms_scale(warp_sum_d(vss), hd, eps);
            for (int i = lane; i < hd; i += 32) head[i] *= vscale;
        }
        __syncwarp();
        if (kv.kvq != KV_F16) store_head(kv.vc[at] + (size_t)slot * kv.k_row, kh, hd, head, lane, kv.kvq, 0, 0);
        else store_head(kv.vc[at], kh, hd, head, lane, KV_F16, kv.slots, slot);
    }
}

/* The activations a product's weights meet, as the CPU rounds them: it
   converts them to the format its dot product for the weights takes
   (llama.cpp's vec_dot_type), so the GPU does the same and stays within
   rounding of the CPU instead of being more exact than both. Y[t] = X[t]
   through that format, stored as O (float for the matrix-vector kernel,
   half or bf16 for cuBLAS): one warp per group of 32 values (256 for
   Q8_K), group blockIdx.x of token blockIdx.y. */
enum { ACT_F32, ACT_F16, ACT_BF16, ACT_Q8_0, ACT_Q8_1, ACT_Q8_K };

__device__ __forceinline__ float round_bf16(float v) {
    if (v != v) return v; /* a NaN stays one */
    unsigned u = __float_as_uint(v);
    return __uint_as_float(((u + 0x7fffu + ((u >> 16) & 1)) >> 16) << 16);
}

template <typename O> __device__ __forceinline__ void store_act(O *y, float v);
template <> __device__ __forceinline__ void store_act<float>(float *y, float v) { *y = v; }
template <> __device__ __forceinline__ void store_act<__half>(__half *y, float v) { *y = __float2half_rn(v); }
/* bf16 as its 16 bits (exact: v is a bf16 value already) */
template <> __device__ __forceinline__ void store_act<unsigned short>(unsigned short *y, float v) {
    *y = (unsigned short)(__float_as_uint(v) >> 16);
}

/* Q8_0's and Q8_1's multiplier of a block whose largest magnitude is amax
   (Q8_0's as the CPU's kernels: 127 / amax, rounded to nearest even;
   Q8_1's as quants.c: 1 / d, rounded half away). */
template <int A> __device__ __forceinline__ float q8_inverse(float amax) {
    float d = amax / 127.0f, id = A == ACT_Q8_0 ? (amax != 0.0f ? 127.0f / amax : 0.0f) : (d != 0.0f ? 1.0f / d : 0.0f);
    return isinf(id) ? 0.0f : id;
}
template <int A> __device__ __forceinline__ float q8_round(float v) { return A == ACT_Q8_0 ? nearbyintf(v) : roundf(v); }

/* Q8_K's scale comes from the value of largest magnitude among 256 (8 a
   lane: v[k] is value base + 32k + lane; the first of equals): that
   value, in every lane. */
__device__ __forceinline__ float q8k_extreme_v(const float *v, int base, int lane) {
    float amax = 0.0f, mx = 0.0f;
    int at = 1 << 30;
    for (int k = 0; k < 8; k++) {
        float ax = fabsf(v[k]);
        if (ax > amax) amax = ax, mx = v[k], at = base + 32 * k + lane;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float a2 = __shfl_xor_sync(FULL_MASK, amax, o), m2 = __shfl_xor_sync(FULL_MASK, mx, o);
        int at2 = __shfl_xor_sync(FULL_MASK, at, o);
        if (a2 > amax || (a2 == amax && at2 < at)) amax = a2, mx = m2, at = at2;
    }
    return mx;
}

template <int A, typename O>
__device__ void quant_act_row(const float *__restrict__ x, int n, O *__restrict__ y, float inv) {
    int lane = threadIdx.x % 32;
    if (A == ACT_F32 || A == ACT_F16 || A == ACT_BF16) {
        int i = 32 * blockIdx.x + lane;
        if (i < n) {
            float v = x[i];
            if (A == ACT_F16) v = round_f16(v);
            else if (A == ACT_BF16) v = round_bf16(v);
            store_act<O>(y + i, v * inv);
        }
    } else if (A == ACT_Q8_0 || A == ACT_Q8_1) {
        int i = 32 * blockIdx.x + lane;
        float v = x[i], amax = warp_max(fabsf(v));
        /* the scale is stored as F16 */
        store_act<O>(y + i, q8_round<A>(v * q8_inverse<A>(amax)) * round_f16(amax / 127.0f) * inv);
    } else { /* Q8_K: 256 values, 8 a lane; the value of largest magnitude becomes -127 */
        int base = 256 * blockIdx.x;
        float v8[8], mx, amax, iscale;
        for (int k = 0; k < 8; k++) v8[k] = x[base + 32 * k + lane];
        mx = q8k_extreme_v(v8, base, lane), amax = fabsf(mx);
        if (amax == 0.0f) {
            for (int k = 0; k < 8; k++) store_act<O>(y + base + 32 * k + lane, 0.0f);
            return;
        }
        iscale = -127.0f / mx; /* as quants_k.c's Q8_K */
        for (int k = 0; k < 8; k++) {
            int i = base + 32 * k + lane;
            store_act<O>(y + i, (1.0f / iscale) * fminf(127.0f, rintf(iscale * x[i])) * inv);
        }
    }
}

template <int A, typename O>
__global__ void k_quant_act(const float *__restrict__ X, int ldx, int n, int n_tok, O *__restrict__ Y,
                            const float *__restrict__ S) {
    for (int t = blockIdx.y; t < n_tok; t += gridDim.y)
        quant_act_row<A, O>(X + (size_t)t * ldx, n, Y + (size_t)t * n, S ? 1.0f / S[t] : 1.0f);
}

/* A prompt's rounded activations (floats) as two F16 parts for cuBLAS:
   hi = F16(x / S[t]) and lo = F16(x / S[t] - hi) (S: k_row_scale's). */
__global__ void k_split_f16(const float *__restrict__ X, int n, int n_tok, const float *__restrict__ S,
                            __half *__restrict__ hi, __half *__restrict__ lo) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)n * n_tok) {
        float v = X[i] / S[i / n];
        __half h = __float2half_rn(v);
        hi[i] = h;
        lo[i] = __float2half_rn(v - __half2float(h));
    }
}

/* F16 holds at most 65504: a prompt row whose values reach past 256 (Gemma's
   special tokens reach the thousands) goes to cuBLAS divided by a power of
   two, exactly, and its product is multiplied back (k_scale_rows).
   S[t] = that power of two, 1 for every ordinary row. One block a row. */
__global__ void k_row_scale(const float *__restrict__ X, int ldx, int n, float *__restrict__ S) {
    __shared__ float part[32];
    const float *x = X + (size_t)blockIdx.x * ldx;
    float m = 0.0f;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, fabsf(x[i]));
    m = warp_max(m);
    if (lane == 0) part[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = warp_max(lane < (int)blockDim.x / 32 ? part[lane] : 0.0f);
        if (lane == 0) S[blockIdx.x] = m > 256.0f && m < INFINITY ? exp2f(ceilf(log2f(m)) - 8.0f) : 1.0f;
    }
}

/* Y[t] (rows values each, stride ldy) = Y[t] * S[t], or with T, Y[t] +=
   T[t] * S[t] (T's stride ldy too). */
__global__ void k_scale_rows(float *__restrict__ Y, const float *__restrict__ T, int ldy, int rows, int n_tok,
                             const float *__restrict__ S) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)rows * n_tok) {
        int t = (int)(i / rows), r = (int)(i % rows);
        float *y = Y + (size_t)t * ldy + r;
        *y = T ? *y + T[(size_t)t * ldy + r] * S[t] : *y * S[t];
    }
}

/* A quantized matrix as F16 for cuBLAS: rows r0.. of W, n values each,
   one thread per 32 values; each value v as hi = F16(v) in out and
   lo = F16(v - hi) in lo. */
template <int T>
__global__ void k_dequant_f16(const uint8_t *__restrict__ W, size_t row_bytes, int n, int rows,
                              __half *__restrict__ out, __half *__restrict__ lo) {
    int per_row = n / 32;
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (size_t)per_row * rows) return;
    {
        int r = (int)(j / per_row), c = (int)(j % per_row);
        float v[32];
        __half *o = out + (size_t)r * n + 32 * c, *ol = lo + (size_t)r * n + 32 * c;
        deq32<T>(W + (size_t)r * row_bytes, c, n, v);
#pragma unroll
        for (int i = 0; i < 32; i++) {
            __half h = __float2half_rn(v[i]);
            o[i] = h;
            ol[i] = __float2half_rn(v[i] - __half2float(h));
        }
    }
}

/* The matrix-vector product for a few tokens: Y[t][r] (+)= W[r] . X[t],
   X already rounded (k_quant_act, floats). ROWS rows per warp, NT tokens
   per block; lane l takes chunks l, l + 32, ... of 32 values, dequantizes
   each once and dots it with every token's activations. With experts
   (pair_expert not NULL), block column blockIdx.y is pair p: its expert's
   rows (expert_rows each) times the activations of token pair_token[p]
   (pair_token NULL: of row p), into Y's row p. */
template <int T, int NT>
__global__ void k_matvec(const uint8_t *__restrict__ W, size_t row_bytes, int n, int rows, const float *__restrict__ X,
                         int ldx, int n_tok, float *__restrict__ Y, int ldy, int add, const int *__restrict__ pair_expert,
                         const int *__restrict__ pair_token, int expert_rows) {
    int lane = threadIdx.x % 32, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, t0 = blockIdx.y * NT;
    int n_chunks = (n + 31) / 32;
    float acc[NT];
    const uint8_t *w;
    if (r >= rows) return; /* the whole warp leaves together */
    if (pair_expert) {
        w = W + ((size_t)pair_expert[blockIdx.y] * expert_rows + r) * row_bytes;
        X += (size_t)(pair_token ? pair_token[blockIdx.y] : (int)blockIdx.y) * ldx; /* NULL: pair p's own row */
        Y += (size_t)blockIdx.y * ldy;
        t0 = 0, n_tok = 1;
    } else {
        w = W + (size_t)r * row_bytes;
    }
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int j = lane; j < n_chunks; j += 32) {
        float v[32];
        int m = min(32, n - 32 * j);
        deq32<T>(w, j, n, v);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t0 + t < n_tok) {
                const float *x = X + (size_t)(t0 + t) * ldx + 32 * j;
                float s = 0.0f;
                if (m == 32) {
#pragma unroll
                    for (int i = 0; i < 32; i++) s += v[i] * x[i];
                } else {
                    for (int i = 0; i < m; i++) s += v[i] * x[i];
                }
                acc[t] += s;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float s = warp_sum(acc[t]);
        if (lane == 0 && t0 + t < n_tok) {
            float *y = Y + (size_t)(t0 + t) * ldy + r;
            *y = add ? *y + s : s;
        }
    }
}

/* ---- generation's products: int8 dot products (dp4a) ------------------ */

/* A few tokens' activations as the CPU's dot products take them (Q8_0,
   Q8_1 or Q8_K): int8 values, and per 32 values a float4 of the scale
   they are multiplied by (F16-rounded where the CPU's block stores it as
   F16), and what a weight's offset multiplies: the values' sum times the
   scale over each half of 16 (Q8_K's bsums), or over all 32 in .y (Q8_1's
   s, F16 as the CPU stores it). Made once per layer input and format;
   one warp per 32 values (Q8_0, Q8_1) or 256 (Q8_K). */
/* The gated FFN's activation of a gate value g and up value u, fn being
   the model's infer__act: act(g) * u for SiLU or GELU (from the
   F16-indexed table llama.cpp's CPU uses: gelu), or gpt-oss's clamped
   SwiGLU, g capped at 7 and u clamped to [-7, 7], in forward.c's order. */
__device__ __forceinline__ float glu_value(float g, float u, int fn, const float *gelu) {
    if (fn == INFER__ACT_SWIGLU_CLAMP) {
        float gg = fminf(g, 7.0f), uu = fminf(fmaxf(u, -7.0f), 7.0f);
        return gg / (1.0f + expf(-1.702f * gg)) * (uu + 1.0f);
    }
    if (fn == INFER__ACT_GELU) g = g <= -10.0f ? 0.0f : g >= 10.0f ? g : gelu[__half_as_ushort(__float2half_rn(g))];
    else g = g / (1.0f + expf(-g));
    return g * u;
}

/* One chunk (32 values, or 256 for Q8_K) of a row x into int8 values q
   and their scales (meta, a float4 per 32), by one warp. With u, the
   values are glu_value(x, u) (ffn's activation fn, fused here: the down
   product's input made as it is quantized). */

template <int A>
__device__ __forceinline__ void act_q8_chunk(const float *__restrict__ x, const float *__restrict__ u, int fn,
                                             const float *gelu, int chunk, int lane, int8_t *__restrict__ q,
                                             float4 *__restrict__ meta) {
    if (A == ACT_Q8_0 || A == ACT_Q8_1) {
        int i = 32 * chunk + lane;
        float v = u ? glu_value(x[i], u[i], fn, gelu) : x[i], amax = warp_max(fabsf(v)), d = amax / 127.0f;
        int qi = (int)q8_round<A>(v * q8_inverse<A>(amax)), sum;
        q[i] = (int8_t)qi;
        sum = (int)warp_sum((float)qi); /* exact: at most 32 * 127 */
        if (lane == 0) meta[chunk] = make_float4(round_f16(d), A == ACT_Q8_1 ? round_f16((float)sum * d) : 0.0f, 0.0f, 0.0f);
    } else { /* Q8_K: the value of largest magnitude (the first of equals) becomes -127 */
        int base = 256 * chunk;
        float v[8], mx, amax, iscale, d;
        for (int k = 0; k < 8; k++) {
            int i = base + 32 * k + lane;
            v[k] = u ? glu_value(x[i], u[i], fn, gelu) : x[i];
        }
        mx = q8k_extreme_v(v, base, lane), amax = fabsf(mx);
        iscale = amax != 0.0f ? -127.0f / mx : 0.0f;
        d = amax != 0.0f ? 1.0f / iscale : 0.0f;
        for (int k = 0; k < 8; k++) {
            int i = base + 32 * k + lane, qi = amax != 0.0f ? (int)fminf(127.0f, rintf(iscale * v[k])) : 0;
            /* the sums of each half of 16 lanes */
            float sm = (float)qi;
            q[i] = (int8_t)qi;
            sm += __shfl_xor_sync(FULL_MASK, sm, 1);
            sm += __shfl_xor_sync(FULL_MASK, sm, 2);
            sm += __shfl_xor_sync(FULL_MASK, sm, 4);
            sm += __shfl_xor_sync(FULL_MASK, sm, 8);
            {
                float s_hi = __shfl_sync(FULL_MASK, sm, 16);
                if (lane == 0) meta[8 * chunk + k] = make_float4(d, sm * d, s_hi * d, 0.0f);
            }
        }
    }
}

template <int A>
__global__ void k_act_q8(const float *__restrict__ X, const float *__restrict__ U, int fn, const float *__restrict__ gelu,
                         int ldx, int n, int n_tok, int8_t *__restrict__ Q, float4 *__restrict__ M) {
    for (int t = blockIdx.y; t < n_tok; t += gridDim.y)
        act_q8_chunk<A>(X + (size_t)t * ldx, U ? U + (size_t)t * ldx : NULL, fn, gelu, blockIdx.x, threadIdx.x % 32,
                        Q + (size_t)t * n, M + (size_t)t * (n / 32));
}

/* norm_rows with the quantization fused in (for a few tokens whose next
   products take int8 activations): as k_norm_rows, then the block's warps
   quantize the normed row (still written to Y, which the products of
   another format read). */
template <int A>
__global__ void k_norm_rows_q8(const float *__restrict__ X, const int *__restrict__ rows, const float *__restrict__ w,
                               float *__restrict__ Y, int n, float eps, int8_t *__restrict__ Q, float4 *__restrict__ M) {
    const float *x = X + (size_t)(rows ? rows[blockIdx.x] : (int)blockIdx.x) * n;
    float *y = Y + (size_t)blockIdx.x * n;
    double ss = 0.0;
    float scale;
    int group = A == ACT_Q8_K ? 256 : 32;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(x[i] * x[i]);
    scale = rms_scale(block_sum_d(ss), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = (x[i] * scale) * w[i];
    __syncthreads();
    for (int chunk = threadIdx.x / 32; chunk < n / group; chunk += blockDim.x / 32)
        act_q8_chunk<A>(y, NULL, 0, NULL, chunk, threadIdx.x % 32, Q + (size_t)blockIdx.x * n, M + (size_t)blockIdx.x * (n / 32));
}

/* Y[t][r] (+)= W[r] . X[t] on int8 activations (k_act_q8): MV_ROWS rows
   per warp, MV_LANES lanes a row, each lane a 32-value chunk at a time
   (its int8 values decoded once, the activations read as two 128-bit
   loads, 8 dp4a per token), the lanes of a row summed by shuffles. The
   experts' pairs as k_matvec. */
#define MV_ROWS 4
#define MV_LANES (32 / MV_ROWS)
template <int T, int NT>
__global__ void k_matvec_q8(const uint8_t *__restrict__ W, size_t row_bytes, int n, int rows, const int8_t *__restrict__ AQ,
                            const float4 *__restrict__ AM, int n_tok, float *__restrict__ Y, int ldy, int add,
                            const int *__restrict__ pair_expert, const int *__restrict__ pair_token, int expert_rows) {
    int lane = threadIdx.x % 32, sub = lane % MV_LANES;
    int r = (blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * MV_ROWS + lane / MV_LANES, t0 = blockIdx.y * NT;
    int n_chunks = n / 32, tok0 = 0;
    float acc[NT];
    const uint8_t *w;
    if (pair_expert) {
        w = W + ((size_t)pair_expert[blockIdx.y] * expert_rows + (r < rows ? r : 0)) * row_bytes;
        tok0 = pair_token ? pair_token[blockIdx.y] : (int)blockIdx.y;
        Y += (size_t)blockIdx.y * ldy;
        t0 = 0, n_tok = 1;
    } else {
        w = W + (size_t)(r < rows ? r : 0) * row_bytes;
    }
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (r < rows) /* a row past the end still shuffles with the others */
        for (int j = sub; j < n_chunks; j += MV_LANES) {
            int q[8];
            float2 s, o;
            deq8<T>(w, j, q, s, o);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t0 + t < n_tok) {
                    size_t tok = (size_t)(tok0 + t0 + t);
                    const int4 *a = (const int4 *)(AQ + tok * n + 32 * j);
                    int4 a0 = a[0], a1 = a[1];
                    float4 m = AM[tok * (n / 32) + j];
                    int lo = __dp4a(q[3], a0.w, __dp4a(q[2], a0.z, __dp4a(q[1], a0.y, __dp4a(q[0], a0.x, 0))));
                    int hi = __dp4a(q[7], a1.w, __dp4a(q[6], a1.z, __dp4a(q[5], a1.y, __dp4a(q[4], a1.x, 0))));
                    if (s.x == s.y) acc[t] += (float)(lo + hi) * (s.x * m.x);
                    else acc[t] += (float)lo * (s.x * m.x) + (float)hi * (s.y * m.x);
                    acc[t] += o.x * (m.y + (o.x == o.y ? m.z : 0.0f)) + (o.x == o.y ? 0.0f : o.y * m.z);
                }
            }
        }
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float v = acc[t];
#pragma unroll
        for (int off = MV_LANES / 2; off > 0; off >>= 1) v += __shfl_xor_sync(FULL_MASK, v, off);
        if (sub == 0 && r < rows && t0 + t < n_tok) {
            float *y = Y + (size_t)(t0 + t) * ldy + r;
            *y = add ? *y + v : v;
        }
    }
}

/* ---- the CPU's order for int8 products (a context that matches llama.cpp) ----
   The formats Gemma-like models mix (Q8_0, Q5_0, Q4_K, Q6_K), summed as
   the CPU's AVX-512 kernels (simd_avx512.c) sum them: every integer part
   exact, each float chain in the same order. One thread per row and token,
   the blocks in order: slow (and uncoalesced), exact. */

template <int T>
__global__ void k_matvec_q8_ordered(const uint8_t *__restrict__ W, size_t row_bytes, int n, int rows,
                                    const int8_t *__restrict__ AQ, const float4 *__restrict__ AM, float *__restrict__ Y,
                                    int ldy, int add) {
    int r = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (r >= rows) return;
    const uint8_t *w = W + (size_t)r * row_bytes;
    const int8_t *xq = AQ + (size_t)t * n;
    const float4 *xm = AM + (size_t)t * (n / 32);
    float out;
    if (T == INFER_TYPE_Q8_0 || T == INFER_TYPE_Q5_0) {
        /* eight lane sums (lane j: values 4j..4j+3 of each block), d_w * d_x
           times each word's integer dot, then hsum_float_8 */
        float f[8];
        for (int j = 0; j < 8; j++) f[j] = 0.0f;
        for (int b = 0; b < n / 32; b++) {
            int q[32];
            float2 s, o;
            decode<T>(w, b, q, s, o);
            float d = s.x * xm[b].x;
            for (int j = 0; j < 8; j++) {
                int p = 0;
                for (int i = 4 * j; i < 4 * j + 4; i++) p += q[i] * (int)xq[32 * b + i];
                f[j] = fmaf(d, (float)p, f[j]);
            }
        }
        out = ((f[0] + f[4]) + (f[2] + f[6])) + ((f[1] + f[5]) + (f[3] + f[7]));
    } else if (T == INFER_TYPE_Q4_K) {
        /* llama.cpp's repacked order: per block the scaled sub-block sums
           as one integer times d * d_x into one chain, the mins' integer
           times dmin * d_x into another, subtracted at the end */
        float f = 0.0f, fm = 0.0f;
        for (int b = 0; b < n / 256; b++) {
            const infer__block_q4_K *blk = (const infer__block_q4_K *)w + b;
            int is = 0, im = 0;
            for (int s = 0; s < 8; s++) {
                int p = 0, sx = 0;
                uint8_t sc, mn;
                int q[32];
                float2 ds, dm;
                decode<T>(w, 8 * b + s, q, ds, dm);
                for (int i = 0; i < 32; i++) {
                    int v = 256 * b + 32 * s + i;
                    p += q[i] * (int)xq[v], sx += xq[v];
                }
                infer__scale_min_k4(s, blk->scales, &sc, &mn);
                is += sc * p, im += mn * sx;
            }
            fm = fmaf((float)im, ld_half(&blk->dmin) * xm[8 * b].x, fm);
            f = fmaf((float)is, ld_half(&blk->d) * xm[8 * b].x, f);
        }
        out = f - fm;
    } else { /* Q6_K: per block the 16 sub-blocks' integer sums times scale * d in one chain, then times d_x */
        float f = 0.0f;
        for (int b = 0; b < n / 256; b++) {
            const infer__block_q6_K *blk = (const infer__block_q6_K *)w + b;
            float d = ld_half(&blk->d), ba = 0.0f;
            for (int j = 0; j < 16; j++) {
                int p = 0;
                int q[32];
                float2 s, o;
                decode<T>(w, 8 * b + j / 2, q, s, o);
                for (int i = 0; i < 16; i++) p += q[16 * (j % 2) + i] * (int)xq[256 * b + 16 * j + i];
                ba = fmaf((float)p, (float)blk->scales[j] * d, ba);
            }
            f = fmaf(ba, xm[8 * b].x, f);
        }
        out = f;
    }
    float *y = Y + (size_t)t * ldy + r;
    *y = add ? *y + out : out;
}

/* ffn's (and the experts') activation: G = glu_value(G, U) over count
   values. With pair_expert, G and U are rows of width values, one per
   (token, expert) pair, and the pair's expert's biases (bg, bu: a column
   of width per expert, or NULL) are added first, as forward.c adds them
   to the products; their rows are ld apart (the experts' gate and up
   fused: U is G + width, ld 2 width). */
__global__ void k_act_mul(float *G, const float *U, size_t count, int fn, const float *__restrict__ gelu,
                          const float *__restrict__ bg, const float *__restrict__ bu,
                          const int *__restrict__ pair_expert, int width, int ld) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        size_t r = pair_expert ? (i / width) * ld + i % width : i;
        float g = G[r], u = U[r];
        if (pair_expert) {
            size_t at = (size_t)pair_expert[i / width] * width + i % width;
            if (bg) g += bg[at];
            if (bu) u += bu[at];
        }
        G[r] = glu_value(g, u, fn, gelu);
    }
}

/* moe_ffn's routing, token t per thread: as forward.c's infer__moe_choose
   (the router's bias added to the logits where it has one, softmax over
   all experts or over the chosen, the top k in order with ties to the
   lower index, renormalised where the model says). Also the routing
   margin: the least relative gap over the layers between the last chosen
   expert's probability and the next one's (first: this is the first
   routed layer), which tests read to excuse routing near-ties; chosen
   from raw logits (softmax_topk), the probabilities' gap is
   1 - e^(next - last). */
#define MOE_MAX_EXPERTS 512
__global__ void k_moe_choose(const float *__restrict__ logits, const float *__restrict__ bias, int n_tok, int n_expert,
                             int k, int softmax_all, int softmax_topk, int renorm, int *__restrict__ expert,
                             float *__restrict__ weight, int *__restrict__ pair_token, float *__restrict__ margin,
                             int first) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tok) return;
    {
        const float *lg = logits + (size_t)t * n_expert;
        int *ex = expert + (size_t)t * k;
        float *w = weight + (size_t)t * k, mx;
        float probs[MOE_MAX_EXPERTS];
        double sum = 0;
        for (int e = 0; e < n_expert; e++) probs[e] = bias ? lg[e] + bias[e] : lg[e];
        if (softmax_all) {
            mx = probs[0];
            for (int e = 1; e < n_expert; e++) mx = fmaxf(mx, probs[e]);
            for (int e = 0; e < n_expert; e++) sum += (double)(probs[e] = expf(probs[e] - mx));
            for (int e = 0; e < n_expert; e++) probs[e] *= (float)(1.0 / sum);
        }
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < n_expert; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= ex[i] == e;
                if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
            }
            ex[j] = best;
            w[j] = probs[best];
            pair_token[t * k + j] = t;
        }
        {
            float next = -INFINITY, gap;
            for (int e = 0; e < n_expert; e++) {
                int taken = 0;
                for (int i = 0; i < k; i++) taken |= ex[i] == e;
                if (!taken) next = fmaxf(next, probs[e]);
            }
            gap = k >= n_expert ? INFINITY : softmax_topk ? 1.0f - expf(next - w[k - 1]) : (w[k - 1] - next) / w[k - 1];
            margin[t] = first ? gap : fminf(margin[t], gap);
        }
        if (softmax_topk) {
            mx = w[0];
            for (int j = 1; j < k; j++) mx = fmaxf(mx, w[j]);
            sum = 0;
            for (int j = 0; j < k; j++) sum += (double)(w[j] = expf(w[j] - mx));
            for (int j = 0; j < k; j++) w[j] *= (float)(1.0 / sum);
        }
        if (renorm) {
            float total;
            sum = 0;
            for (int j = 0; j < k; j++) sum += (double)w[j];
            total = (float)sum;
            for (int j = 0; j < k; j++) w[j] /= total;
        }
    }
}

/* moe_ffn's sum: xb[t] = the token's experts' outputs, each with its
   expert's down bias (bias: a column of dim per expert, or NULL) and
   scale (escale: one per expert, or NULL), weighted, added in the order
   they were chosen; one block per token. */
__global__ void k_moe_sum(const float *__restrict__ Y, const float *__restrict__ weight, const float *__restrict__ bias,
                          const float *__restrict__ escale, const int *__restrict__ expert, int k, int dim,
                          float *__restrict__ XB) {
    int t = blockIdx.x;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float o = 0.0f;
        for (int j = 0; j < k; j++) {
            float d = Y[((size_t)t * k + j) * dim + i];
            float b = bias ? d + bias[(size_t)expert[t * k + j] * dim + i] : d;
            float y = (escale ? b * escale[expert[t * k + j]] : b) * weight[t * k + j];
            o = j ? o + y : y;
        }
        XB[(size_t)t * dim + i] = o;
    }
}

/* output's soft-cap: x = cap * tanh(x / cap) */
__global__ void k_softcap(float *__restrict__ X, size_t count, float cap) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) X[i] = tanhf(X[i] * (1.0f / cap)) * cap;
}

/* output's scale (Granite's logits divided by logit_scale): x *= s */
__global__ void k_scale(float *__restrict__ X, size_t count, float s) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) X[i] *= s;
}

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
/* log(1 + e^x), x itself past 20 (llama.cpp's cut-off, as recurrent.c) */
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* q_gate_split, after attn_q's product of a model whose attn_q carries
   gates (forward.c's infer__q_gate_split): each head's query (hd values)
   then its gate, in QG's rows of 2 q_dim, into Q and G (rows of q_dim). */
__global__ void k_q_gate_split(const float *__restrict__ QG, float *__restrict__ Q, float *__restrict__ G, int q_dim,
                               int hd, size_t count) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        size_t t = i / q_dim;
        int e = (int)(i % q_dim), h = e / hd;
        const float *head = QG + t * 2 * q_dim + (size_t)h * 2 * hd;
        Q[i] = head[e % hd];
        G[i] = head[hd + e % hd];
    }
}

/* q_gate_apply, after attention in such a model: att *= sigmoid(gate) */
__global__ void k_q_gate_apply(float *__restrict__ ATT, const float *__restrict__ G, size_t count) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) ATT[i] = __fmul_rn(ATT[i], sigmoid_f(G[i]));
}

/* ---- Gemma 3n: per-layer inputs, AltUp, LAuReL ------------------------
   forward.c's "Gemma 3n's steps", a kernel (or two, about a product) per
   step: sums of squares in double as the CPU's, products and sums
   rounded one at a time (__fmul_rn, __fadd_rn: no fused multiply-add the
   CPU does not do). */

/* sqrt(sum of x^2) over n values, in every thread of the block: AltUp's
   magnitude of a stream (forward.c's infer__magnitude) */
__device__ float block_magnitude(const float *x, int n) {
    double ss = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(x[i] * x[i]);
    return sqrtf((float)block_sum_d(ss));
}

/* ple_inputs' mix, one block per (token, layer) row of ple values: P (the
   embedding's product) times proj_scale, RMS-normed with w, plus R (the
   token's slice of ple_embd, times sqrt(ple) already), all times mix. */
__global__ void k_ple_mix(float *__restrict__ P, const float *__restrict__ R, const float *__restrict__ w, int ple,
                          float proj_scale, float mix, float eps) {
    float *p = P + (size_t)blockIdx.x * ple;
    const float *r = R + (size_t)blockIdx.x * ple;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < ple; i += blockDim.x) {
        float e = p[i] * proj_scale;
        ss += (double)(e * e);
    }
    scale = rms_scale(block_sum_d(ss), ple, eps);
    for (int i = threadIdx.x; i < ple; i += blockDim.x)
        p[i] = __fmul_rn(__fadd_rn(__fmul_rn(p[i] * proj_scale * scale, w[i]), r[i]), mix);
}

/* altup_streams, one block per token: stream 0 of S (na rows of dim) is
   x, stream j its product (there already) times x's magnitude over its
   own. */
__global__ void k_altup_streams(const float *__restrict__ X, float *__restrict__ S, int dim, int na) {
    const float *x = X + (size_t)blockIdx.x * dim;
    float *s = S + (size_t)blockIdx.x * na * dim, target = block_magnitude(x, dim);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) s[i] = x[i];
    for (int j = 1; j < na; j++) {
        float *a = s + (size_t)j * dim, mag = block_magnitude(a, dim);
        for (int i = threadIdx.x; i < dim; i += blockDim.x) a[i] = a[i] * target / mag;
    }
}

/* altup_modalities' input, one block per token: RMS-norm(x) with w, times
   inv (1 / dim), into Y (rows of n); X's rows of stride ldx. */
__global__ void k_router_in(const float *__restrict__ X, int ldx, const float *__restrict__ w, float *__restrict__ Y,
                            int n, float eps, float inv) {
    const float *x = X + (size_t)blockIdx.x * ldx;
    float *y = Y + (size_t)blockIdx.x * n;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(x[i] * x[i]);
    scale = rms_scale(block_sum_d(ss), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = ((x[i] * scale) * w[i]) * inv;
}

/* the router's output through tanh */
__global__ void k_tanh(float *__restrict__ X, size_t count) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) X[i] = tanhf(X[i]);
}

/* altup_predict, one block per token: pred_j = s_j + sum_k c[j na + k] s_k
   (C: the token's na^2 coefficients), and the active stream's prediction
   into x. */
__global__ void k_altup_predict(const float *__restrict__ S, const float *__restrict__ C, float *__restrict__ PRED,
                                float *__restrict__ X, int dim, int na, int active) {
    const float *s = S + (size_t)blockIdx.x * na * dim, *c = C + (size_t)blockIdx.x * na * na;
    float *pred = PRED + (size_t)blockIdx.x * na * dim, *x = X + (size_t)blockIdx.x * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        for (int j = 0; j < na; j++) {
            float sum = 0.0f;
            for (int k = 0; k < na; k++) sum = __fadd_rn(sum, __fmul_rn(s[(size_t)k * dim + i], c[j * na + k]));
            pred[(size_t)j * dim + i] = __fadd_rn(sum, s[(size_t)j * dim + i]);
        }
        x[i] = pred[(size_t)active * dim + i];
    }
}

/* altup_correct, one block per token: s_j = (x - pred_active) (1 + c_j) +
   pred_j (C: the token's na coefficients). */
__global__ void k_altup_correct(float *__restrict__ S, const float *__restrict__ PRED, const float *__restrict__ X,
                                const float *__restrict__ C, int dim, int na, int active) {
    const float *pred = PRED + (size_t)blockIdx.x * na * dim, *x = X + (size_t)blockIdx.x * dim;
    const float *c = C + (size_t)blockIdx.x * na;
    float *s = S + (size_t)blockIdx.x * na * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float d = x[i] - pred[(size_t)active * dim + i];
        for (int j = 0; j < na; j++)
            s[(size_t)j * dim + i] = __fadd_rn(__fmul_rn(d, c[j] + 1.0f), pred[(size_t)j * dim + i]);
    }
}

/* laurel's end, one block per token: y = RMS-norm(y) with w, plus xb */
__global__ void k_laurel_out(float *__restrict__ Y, const float *__restrict__ XB, const float *__restrict__ w, int n,
                             float eps) {
    float *y = Y + (size_t)blockIdx.x * n;
    const float *xb = XB + (size_t)blockIdx.x * n;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)(y[i] * y[i]);
    scale = rms_scale(block_sum_d(ss), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = __fadd_rn(__fmul_rn(y[i] * scale, w[i]), xb[i]);
}

/* laurel_residual: x = (x + y) * mix (1 / sqrt(2)) */
__global__ void k_laurel_residual(float *__restrict__ X, const float *__restrict__ Y, size_t count, float mix) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) X[i] = __fmul_rn(X[i] + Y[i], mix);
}

/* ffn's sparse gate (forward.c's infer__sparsify), one block per token:
   g = relu(g - (mean + k std)), the deviation over n - 1, the sums in
   double. */
__global__ void k_sparsify(float *__restrict__ G, int n, float k) {
    float *g = G + (size_t)blockIdx.x * n, mean, sd, cut;
    double sum = 0.0, var = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += (double)g[i];
    mean = (float)block_sum_d(sum) / (float)n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float d = g[i] - mean;
        var += (double)(d * d);
    }
    sd = sqrtf((float)block_sum_d(var) * (1.0f / (float)(n - 1)));
    cut = __fadd_rn(mean, __fmul_rn(sd, k));
    for (int i = threadIdx.x; i < n; i += blockDim.x) g[i] = fmaxf(g[i] - cut, 0.0f);
}

/* ple_block's input: xb = the active stream times scale (S: na rows of
   dim a token) */
__global__ void k_ple_scale_in(const float *__restrict__ S, const float *__restrict__ scale, float *__restrict__ XB,
                               int dim, int na, int active, size_t count) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        size_t t = i / dim;
        int e = (int)(i % dim);
        XB[i] = S[(t * na + active) * dim + e] * scale[e];
    }
}

/* ple_block's gate: g = GELU(g) * u, GELU by the table as the
   feed-forward's (G: rows of n; U: rows of stride ldu) */
__global__ void k_gelu_mul_rows(float *__restrict__ G, const float *__restrict__ U, int ldu, int n, size_t count,
                                const float *__restrict__ gelu) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) G[i] = glu_value(G[i], U[(i / n) * ldu + i % n], INFER__ACT_GELU, gelu);
}

/* ple_block's end, one block per token: xb RMS-normed with w (in place),
   added to every stream but the first (na 0: S is x, and it is added to
   x). */
__global__ void k_ple_out(float *__restrict__ XB, float *__restrict__ S, const float *__restrict__ w, int dim, int na,
                          float eps) {
    float *xb = XB + (size_t)blockIdx.x * dim, *s = S + (size_t)blockIdx.x * (na ? na : 1) * dim;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += (double)(xb[i] * xb[i]);
    scale = rms_scale(block_sum_d(ss), dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float e = (xb[i] * scale) * w[i];
        xb[i] = e;
        if (!na) s[i] += e;
        for (int j = 1; j < na; j++) s[(size_t)j * dim + i] += e;
    }
}

/* altup_merge, one block per token: x = (s_0 + sum over j > 0 of u_j times
   the active stream's magnitude over u_j's) / na, the sum in order (U:
   stream j's product at row j - 1 of na rows of dim a token). */
__global__ void k_altup_merge(const float *__restrict__ S, const float *__restrict__ U, float *__restrict__ X, int dim,
                              int na, int active) {
    const float *s = S + (size_t)blockIdx.x * na * dim, *u = U + (size_t)blockIdx.x * na * dim;
    float *x = X + (size_t)blockIdx.x * dim, mag[INFER__MAX_ALTUP], target = block_magnitude(s + (size_t)active * dim, dim);
    float inv = 1.0f / (float)na;
    for (int j = 1; j < na; j++) mag[j] = block_magnitude(u + (size_t)(j - 1) * dim, dim);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float e = s[i];
        for (int j = 1; j < na; j++) e = __fadd_rn(e, u[(size_t)(j - 1) * dim + i] * target / mag[j]);
        x[i] = e * inv;
    }
}

/* ---- the recurrent layers: recurrent.c's kernels -----------------------
   A run of one sequence's tokens in the pass (set_inputs makes them): its
   first token, its length, its sequence, and the state slots it reads
   (-1: zeros, a run from position 0) and writes (backend.h's
   infer__rs_state: the slot's layer part at `at`). Each kernel scans a
   run's tokens in order, one thread per conv channel, per channel of a
   Mamba2 head, or per row of a delta-rule head's state: what a thread
   carries from token to token is its own, so it needs no other thread,
   and a slot read and written in place (src == dst) is safe. The
   products are rounded before each sum (__fmul_rn, __fadd_rn: no
   contraction into FMAs) as the CPU's kernels round them. */
struct rs_run {
    int first, n, seq, src, dst;
};

/* A run's part of a state slot (NULL for slot -1: zeros). */
__device__ __forceinline__ float *rs_part(float *mem, size_t slot_floats, size_t at, int seq, int slot) {
    return slot < 0 ? NULL : mem + ((size_t)seq * 2 + (size_t)slot) * slot_floats + at;
}

/* rec_conv: the causal depthwise convolution (infer__rec_conv) of channel
   ch of run blockIdx.x: u_t = in[t * ldi + ch] (times mul[t * ldi + ch]
   where given: LFM2's b * x), the K - 1 inputs before the run from the
   state (oldest first), out[t * ldo + ch] = the sum over k of
   w[ch K + k] u[t - K + 1 + k] in tap order, + bias, SiLU where asked;
   the last K - 1 inputs back into the state. out may be in (the thread
   reads its channel's input before it writes the output). */
#define CONV_MAX_TAPS 16 /* model.c's limit */
__global__ void k_rec_conv(const float *in, const float *mul, int ldi, float *out, int ldo, int n_ch, int K,
                           const float *__restrict__ w, const float *__restrict__ bias, int silu,
                           const rs_run *__restrict__ runs, float *rs, size_t rs_slot, size_t at) {
    int ch = blockIdx.y * blockDim.x + threadIdx.x;
    rs_run r = runs[blockIdx.x];
    float win[CONV_MAX_TAPS];
    if (ch >= n_ch) return;
    const float *src = rs_part(rs, rs_slot, at, r.seq, r.src);
    float *dst = rs_part(rs, rs_slot, at, r.seq, r.dst);
    for (int k = 0; k < K - 1; k++) win[k] = src ? src[(size_t)ch * (K - 1) + k] : 0.0f;
    for (int t = r.first; t < r.first + r.n; t++) {
        float u = in[(size_t)t * ldi + ch], y = 0.0f;
        if (mul) u = __fmul_rn(u, mul[(size_t)t * ldi + ch]);
        win[K - 1] = u;
        for (int k = 0; k < K; k++) y = __fadd_rn(y, __fmul_rn(w[(size_t)ch * K + k], win[k]));
        if (bias) y = __fadd_rn(y, bias[ch]);
        out[(size_t)t * ldo + ch] = silu ? silu_f(y) : y;
        for (int k = 0; k < K - 1; k++) win[k] = win[k + 1];
    }
    for (int k = 0; k < K - 1; k++) dst[(size_t)ch * (K - 1) + k] = win[k];
}

/* l2norm (Qwen3.5's q and k): head blockIdx.y (hd values) of token
   blockIdx.x's row (stride ld) divided by max(|x|, eps), the sum of
   squares in double (infer__l2norm); a warp per head. */
__global__ void k_l2norm(float *X, int ld, int hd, float eps) {
    float *x = X + (size_t)blockIdx.x * ld + (size_t)blockIdx.y * hd;
    double ss = 0.0;
    for (int i = threadIdx.x; i < hd; i += 32) ss += (double)(x[i] * x[i]);
    float scale = 1.0f / fmaxf(sqrtf((float)warp_sum_d(ss)), eps);
    for (int i = threadIdx.x; i < hd; i += 32) x[i] *= scale;
}

/* rec_mamba2: Mamba2's scan (infer__rec_mamba2) of channel i of head
   blockIdx.y of run blockIdx.x. Token t's row of xbc (stride ld): x
   (inner values, this head's at h hd), then B and C (groups x ds each;
   head h reads group h / (heads / groups)); its dt at dt[t * ld + h].
   With s the channel's ds values of state: s = s e^(softplus(dt +
   dt_bias) A) + B x softplus(..); y = s . C + D x, into Y[t * ldy + h hd
   + i]. */
__global__ void k_rec_mamba2(const float *__restrict__ xbc, const float *__restrict__ dt, int ld,
                             float *__restrict__ Y, int ldy, int inner, int heads, int groups, int ds,
                             const float *__restrict__ A, const float *__restrict__ D,
                             const float *__restrict__ dt_bias, const rs_run *__restrict__ runs, float *rs,
                             size_t rs_slot, size_t at) {
    rs_run r = runs[blockIdx.x];
    int h = blockIdx.y, hd = inner / heads, i = blockIdx.z * blockDim.x + threadIdx.x, g = h / (heads / groups);
    if (i >= hd || r.n >= INFER__REC_CHUNK_MIN) return; /* a long run is k_rec_mamba2_chunked's */
    const float *src = rs_part(rs, rs_slot, at, r.seq, r.src);
    float *s = rs_part(rs, rs_slot, at, r.seq, r.dst) + ((size_t)h * hd + i) * ds;
    const float *s_in = src ? src + ((size_t)h * hd + i) * ds : NULL;
    float a = A[h], d = D[h], bias = dt_bias[h];
    for (int t = r.first; t < r.first + r.n; t++) {
        const float *row = xbc + (size_t)t * ld;
        const float *B = row + inner + (size_t)g * ds, *C = row + inner + (size_t)(groups + g) * ds;
        float x = row[(size_t)h * hd + i], sp = softplus_f(dt[(size_t)t * ld + h] + bias);
        float dA = expf(sp * a), x_dt = __fmul_rn(x, sp), sum = 0.0f;
        for (int j = 0; j < ds; j++) {
            float e = __fadd_rn(s_in ? __fmul_rn(s_in[j], dA) : 0.0f, __fmul_rn(B[j], x_dt));
            s[j] = e;
            sum = __fadd_rn(sum, __fmul_rn(e, C[j]));
        }
        Y[(size_t)t * ldy + (size_t)h * hd + i] = __fadd_rn(sum, __fmul_rn(x, d));
        s_in = s;
    }
}

/* rec_deltanet: the gated delta rule (infer__rec_deltanet) of row j of
   value head blockIdx.y's state, run blockIdx.x. Token t's row of qkv
   (stride ld): q and k (groups x ds each, L2-normed; head h reads key
   head h mod groups), then v (heads x ds); beta's logit at ba[t * ldba +
   h], alpha's at ba[t * ldba + heads + h]. With r the row (ds values):
   r = e^g r; d = beta (v_j - r . k); r += k d; o_j = r . q / sqrt(ds),
   into O[t * ldo + h ds + j], where beta = sigmoid and g = softplus(alpha
   + dt_bias) a; the dots summed in double, as llama.cpp's plain C. */
__global__ void k_rec_deltanet(const float *__restrict__ qkv, int ld, const float *__restrict__ ba, int ldba,
                               float *__restrict__ O, int ldo, int heads, int groups, int ds,
                               const float *__restrict__ A, const float *__restrict__ dt_bias,
                               const rs_run *__restrict__ runs, float *rs, size_t rs_slot, size_t at) {
    rs_run r = runs[blockIdx.x];
    int h = blockIdx.y, j = blockIdx.z * blockDim.x + threadIdx.x, kh = h % groups;
    if (j >= ds || r.n >= INFER__REC_CHUNK_MIN) return; /* a long run is k_rec_deltanet_chunked's */
    const float *src = rs_part(rs, rs_slot, at, r.seq, r.src);
    float *row = rs_part(rs, rs_slot, at, r.seq, r.dst) + ((size_t)h * ds + j) * ds;
    const float *row_in = src ? src + ((size_t)h * ds + j) * ds : NULL;
    float a = A[h], bias = dt_bias[h], scale = 1.0f / sqrtf((float)ds);
    for (int t = r.first; t < r.first + r.n; t++) {
        const float *p = qkv + (size_t)t * ld, *q = p + (size_t)kh * ds, *k = p + (size_t)(groups + kh) * ds;
        float v = p[(size_t)2 * groups * ds + (size_t)h * ds + j];
        float beta = sigmoid_f(ba[(size_t)t * ldba + h]);
        float decay = expf(softplus_f(ba[(size_t)t * ldba + heads + h] + bias) * a), d;
        double dot = 0.0, o = 0.0;
        for (int i = 0; i < ds; i++) {
            float e = row_in ? __fmul_rn(row_in[i], decay) : 0.0f;
            row[i] = e;
            dot += (double)__fmul_rn(e, k[i]);
        }
        d = __fmul_rn(__fsub_rn(v, (float)dot), beta);
        for (int i = 0; i < ds; i++) {
            float e = __fadd_rn(row[i], __fmul_rn(k[i], d));
            row[i] = e;
            o += (double)__fmul_rn(e, q[i]);
        }
        O[(size_t)t * ldo + (size_t)h * ds + j] = __fmul_rn((float)o, scale);
        row_in = row;
    }
}

/* rec_mamba2_chunked: Mamba2's scan of head blockIdx.y over run blockIdx.x,
   one of INFER__REC_CHUNK_MIN tokens or more, in chunks of INFER__REC_CHUNK
   (as infer__rec_mamba2_chunked; rows as k_rec_mamba2's). With L the
   running sum of sp A in a chunk: the block shares W = (C_t . B_u) e^(L_t -
   L_u) sp_u for u <= t; thread i owns channel i's state row m, and y_t =
   e^(L_t) C_t . m + sum of W_tu x_u + D x_t, then m = e^(L_last) m + sum of
   B_t x_t sp_t e^(L_last - L_t). */
__global__ void k_rec_mamba2_chunked(const float *__restrict__ xbc, const float *__restrict__ dt, int ld,
                                     float *__restrict__ Y, int ldy, int inner, int heads, int groups, int ds,
                                     const float *__restrict__ A, const float *__restrict__ D,
                                     const float *__restrict__ dt_bias, const rs_run *__restrict__ runs, float *rs,
                                     size_t rs_slot, size_t at) {
    __shared__ float W[INFER__REC_CHUNK * INFER__REC_CHUNK], Ls[INFER__REC_CHUNK], eL[INFER__REC_CHUNK],
        inflow[INFER__REC_CHUNK];
    rs_run r = runs[blockIdx.x];
    int h = blockIdx.y, hd = inner / heads, g = h / (heads / groups), C = INFER__REC_CHUNK;
    if (r.n < INFER__REC_CHUNK_MIN) { /* a short run is k_rec_mamba2's; the barrier tells tests/cuda_emu.h */
        __syncthreads();                 /* that this kernel's blocks wait (its fast path runs them without) */
        return;
    }
    const float *src = rs_part(rs, rs_slot, at, r.seq, r.src);
    float *state = rs_part(rs, rs_slot, at, r.seq, r.dst) + (size_t)h * hd * ds;
    const float *state_in = src ? src + (size_t)h * hd * ds : NULL;
    float a = A[h], d = D[h], bias = dt_bias[h];
    for (int c0 = 0; c0 < r.n; c0 += C) {
        int nc = min(C, r.n - c0);
        const float *rows = xbc + (size_t)(r.first + c0) * ld;
        if (threadIdx.x == 0) { /* the chunk's running sum of log decays, in token order */
            float sum = 0.0f;
            for (int t = 0; t < nc; t++) {
                float sp = softplus_f(dt[(size_t)(r.first + c0 + t) * ld + h] + bias);
                sum += sp * a;
                Ls[t] = sum;
                inflow[t] = sp;
            }
            for (int t = 0; t < nc; t++) {
                eL[t] = expf(Ls[t]);
                inflow[t] *= expf(Ls[nc - 1] - Ls[t]);
            }
        }
        __syncthreads();
        for (int p = threadIdx.x; p < nc * nc; p += blockDim.x) {
            int t = p / nc, u = p % nc;
            float w = 0.0f;
            if (u <= t) {
                const float *Ct = rows + (size_t)t * ld + inner + (size_t)(groups + g) * ds;
                const float *Bu = rows + (size_t)u * ld + inner + (size_t)g * ds;
                float sp = softplus_f(dt[(size_t)(r.first + c0 + u) * ld + h] + bias);
                for (int s = 0; s < ds; s++) w += Ct[s] * Bu[s];
                w *= expf(Ls[t] - Ls[u]) * sp;
            }
            W[t * C + u] = w;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < hd; i += blockDim.x) {
            const float *m_in = c0 == 0 ? (state_in ? state_in + (size_t)i * ds : NULL) : state + (size_t)i * ds;
            float *m = state + (size_t)i * ds;
            for (int t = 0; t < nc; t++) {
                const float *row = rows + (size_t)t * ld, *Ct = row + inner + (size_t)(groups + g) * ds;
                float cm = 0.0f, wx = 0.0f;
                if (m_in)
                    for (int s = 0; s < ds; s++) cm += Ct[s] * m_in[s];
                for (int u = 0; u <= t; u++) wx += W[t * C + u] * rows[(size_t)u * ld + (size_t)h * hd + i];
                Y[(size_t)(r.first + c0 + t) * ldy + (size_t)h * hd + i] = eL[t] * cm + wx + d * row[(size_t)h * hd + i];
            }
            for (int s = 0; s < ds; s++) {
                float acc = m_in ? eL[nc - 1] * m_in[s] : 0.0f;
                for (int t = 0; t < nc; t++) {
                    const float *row = rows + (size_t)t * ld;
                    acc += row[inner + (size_t)g * ds + s] * (row[(size_t)h * hd + i] * inflow[t]);
                }
                m[s] = acc;
            }
        }
        __syncthreads();
    }
}

/* rec_deltanet_chunked: the gated delta rule of value head blockIdx.y over
   run blockIdx.x, one of INFER__REC_CHUNK_MIN tokens or more, in chunks of
   INFER__REC_CHUNK (as infer__rec_deltanet_chunked; rows as
   k_rec_deltanet's). With G the running sum of log decays in a chunk, the
   block shares k_t . k_i and q_t . k_i; thread j owns the state's row j
   (value j over the keys) and so column j of the chunk's updates: d_t =
   beta_t (v_t - e^G_t row . k_t) - sum over i < t of beta_t e^(G_t - G_i)
   (k_t . k_i) d_i; o_t = (e^G_t row . q_t + sum over i <= t of e^(G_t -
   G_i) (q_t . k_i) d_i) / sqrt(ds); row = e^(G_last) row + sum of k_t
   e^(G_last - G_t) d_t. */
__global__ void k_rec_deltanet_chunked(const float *__restrict__ qkv, int ld, const float *__restrict__ ba, int ldba,
                                       float *__restrict__ O, int ldo, int heads, int groups, int ds,
                                       const float *__restrict__ A, const float *__restrict__ dt_bias,
                                       const rs_run *__restrict__ runs, float *rs, size_t rs_slot, size_t at) {
    __shared__ float KK[INFER__REC_CHUNK * INFER__REC_CHUNK], QK[INFER__REC_CHUNK * INFER__REC_CHUNK],
        G[INFER__REC_CHUNK], beta[INFER__REC_CHUNK];
    rs_run r = runs[blockIdx.x];
    int h = blockIdx.y, kh = h % groups, C = INFER__REC_CHUNK;
    if (r.n < INFER__REC_CHUNK_MIN) { /* a short run is k_rec_deltanet's; the barrier tells tests/cuda_emu.h */
        __syncthreads();                 /* that this kernel's blocks wait (its fast path runs them without) */
        return;
    }
    const float *src = rs_part(rs, rs_slot, at, r.seq, r.src);
    float *state = rs_part(rs, rs_slot, at, r.seq, r.dst) + (size_t)h * ds * ds;
    const float *state_in = src ? src + (size_t)h * ds * ds : NULL;
    float a = A[h], bias = dt_bias[h], scale = 1.0f / sqrtf((float)ds);
    size_t qo = (size_t)kh * ds, ko = (size_t)(groups + kh) * ds, vo = (size_t)2 * groups * ds + (size_t)h * ds;
    for (int c0 = 0; c0 < r.n; c0 += C) {
        int nc = min(C, r.n - c0);
        const float *rows = qkv + (size_t)(r.first + c0) * ld;
        if (threadIdx.x == 0) { /* the chunk's running sum of log decays, in token order */
            float sum = 0.0f;
            for (int t = 0; t < nc; t++) {
                const float *bt = ba + (size_t)(r.first + c0 + t) * ldba;
                beta[t] = sigmoid_f(bt[h]);
                sum += softplus_f(bt[heads + h] + bias) * a;
                G[t] = sum;
            }
        }
        for (int p = threadIdx.x; p < nc * nc; p += blockDim.x) {
            int t = p / nc, i = p % nc;
            const float *kt = rows + (size_t)t * ld + ko, *qt = rows + (size_t)t * ld + qo, *ki = rows + (size_t)i * ld + ko;
            float kk = 0.0f, qk = 0.0f;
            for (int s = 0; s < ds; s++) kk += kt[s] * ki[s], qk += qt[s] * ki[s];
            KK[t * C + i] = kk;
            QK[t * C + i] = qk;
        }
        __syncthreads();
        for (int j = threadIdx.x; j < ds; j += blockDim.x) {
            const float *row_in = c0 == 0 ? (state_in ? state_in + (size_t)j * ds : NULL) : state + (size_t)j * ds;
            float *row = state + (size_t)j * ds, upd[INFER__REC_CHUNK], last = G[nc - 1];
            float *o = O + (size_t)(r.first + c0) * ldo + (size_t)h * ds + j;
            for (int t = 0; t < nc; t++) {
                const float *p = rows + (size_t)t * ld;
                float rk = 0.0f, rq = 0.0f, e = expf(G[t]);
                if (row_in)
                    for (int i = 0; i < ds; i++) rk += row_in[i] * p[ko + i], rq += row_in[i] * p[qo + i];
                upd[t] = beta[t] * (p[vo + j] - e * rk);
                o[(size_t)t * ldo] = e * rq;
            }
            for (int t = 1; t < nc; t++) /* forward substitution */
                for (int i = 0; i < t; i++) upd[t] -= beta[t] * expf(G[t] - G[i]) * KK[t * C + i] * upd[i];
            for (int t = 0; t < nc; t++) {
                float sum = o[(size_t)t * ldo];
                for (int i = 0; i <= t; i++) sum += expf(G[t] - G[i]) * QK[t * C + i] * upd[i];
                o[(size_t)t * ldo] = sum * scale;
            }
            for (int i = 0; i < ds; i++) {
                float acc = row_in ? expf(last) * row_in[i] : 0.0f;
                for (int t = 0; t < nc; t++) acc += rows[(size_t)t * ld + ko + i] * (expf(last - G[t]) * upd[t]);
                row[i] = acc;
            }
        }
        __syncthreads();
    }
}

/* gated_norm (infer__gated_norm): group blockIdx.y of token blockIdx.x,
   n values at Y + t ldy + g n, its gate z at Z + t ldz + g n, its norm's
   weight at W + g w_step: RMSNorm times w, then times SiLU(z) (Qwen3.5's
   order), or SiLU(z) first (gate_first: Mamba2's); the sum of squares in
   double. */
__global__ void k_gated_norm(float *__restrict__ Y, int ldy, const float *__restrict__ Z, int ldz,
                             const float *__restrict__ W, int w_step, int n, float eps, int gate_first) {
    float *y = Y + (size_t)blockIdx.x * ldy + (size_t)blockIdx.y * n;
    const float *z = Z + (size_t)blockIdx.x * ldz + (size_t)blockIdx.y * n, *w = W + (size_t)blockIdx.y * w_step;
    double ss = 0.0;
    float scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        if (gate_first) y[i] = __fmul_rn(silu_f(z[i]), y[i]);
        ss += (double)(y[i] * y[i]);
    }
    scale = rms_scale(block_sum_d(ss), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = __fmul_rn(__fmul_rn(y[i], scale), w[i]);
        y[i] = gate_first ? e : __fmul_rn(e, silu_f(z[i]));
    }
}

/* LFM2's gate after its conv: Y[t][i] *= G[t * ldg + i] (c * y) */
__global__ void k_mul_rows(float *__restrict__ Y, const float *__restrict__ G, int ldg, int n, size_t count) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) Y[i] = __fmul_rn(Y[i], G[(i / n) * ldg + i % n]);
}

/* Reads and writes n floats: what measure_bandwidth times. */
__global__ void k_copy(const float4 *__restrict__ src, float4 *__restrict__ dst, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

/* The device's bandwidth as k_copy reaches it (GB/s; 0 when it cannot be
   measured), the best of four timed copies after a warm-up. Run once, as
   a model is uploaded (before its weights, which leave the copy's two
   buffers no room on a full device): the model is read-only afterwards,
   and infer_cuda_bandwidth only reads what this found. */
static double measure_bandwidth(int device) {
#ifdef INFER_CUDA_EMULATE
    size_t n = (size_t)1 << 20; /* the emulation measures the host's memory, briefly */
#else
    size_t n = (size_t)64 << 20; /* 256 MiB each way: far past any cache */
#endif
    float4 *a = NULL, *b = NULL;
    cudaEvent_t e0, e1;
    float ms = 0.0f, best = 0.0f;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc((void **)&a, n * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&b, n * sizeof(float)) != cudaSuccess) {
        cudaFree(a);
        cudaGetLastError();
        return 0.0;
    }
    cudaMemset(a, 0, n * sizeof(float));
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int rep = 0; rep < 5; rep++) { /* the best of five, the first a warm-up */
        cudaEventRecord(e0, 0);
        INFER_LAUNCH(1024, 256, 0, 0, k_copy)(a, b, n / 4);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (rep && ms > 0 && (best == 0.0f || ms < best)) best = ms;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    cudaGetLastError(); /* a failed measurement leaves no error behind for the upload */
    return best > 0 ? 2.0 * (double)(n * sizeof(float)) / (best * 1e-3) / 1e9 : 0.0;
}

/* ---- attention: tiles of keys on tensor cores ------------------------- */

/* A block takes ATT_ROWS query rows (one KV head's query heads for a few
   tokens of one sequence, row = token * group + head within the group)
   and one share (blockIdx.z of gridDim.z) of the keys they see, in tiles
   of ATT_KEYS keys that every row of the block shares: K and V tiles come
   into shared memory once (as F16), and S = Q K^T and P V run on tensor
   cores (wmma, 16x16x16, F32 accumulation). Two phases, as attention.c
   has them so that the GPU rounds where the CPU does: phase 0 finds each
   row's softmax max and sum over the share (online, rescaled as the max
   grows); phase 1 merges the shares' maxima and sums, makes the
   probabilities normalised and rounded to F16, and adds P V over the
   share. The merge kernel adds the shares (flash-decoding: a long cache
   split across blocks). q is rounded to the cache's dot type, scores are
   soft-capped then scaled. */
#define ATT_ROWS 16
#define ATT_KEYS 64
#define ATT_WARPS 4
#define ATT_MAX_HD 256
#define ATT_MAX_GROUPS 4 /* query heads per KV head: distinct values over the layers, at most */
#define ATT_ACC (ATT_MAX_HD / 16 / ATT_WARPS) /* output column tiles per warp, at most */

/* The work items of a pass: per sequence run of the batch, one per
   ATT_ROWS rows: its first token, the run's token count, its first row. */
struct att_item {
    int first, n_tok, r0;
};

/* ---- attention in llama.cpp's order (a context that matches it) ----
   attention.c's infer__attn_item_ordered, one warp per query row and head,
   for an F16 cache: each score a 16-lane F16 dot (one token alone in its
   sequence: the 64-lane one); the row's max; e^(s - max) summed in chunks
   of 16 positions (each by the tree, into a double); each p = F16 of
   e^(s - max) * (1 / sum); p.V per value in 16 lanes by position (64 when
   alone), one fused chain per lane, then the tree. Slow, exact. */
#define ORD_TILE 512 /* keys whose p a block holds at once */

__device__ __forceinline__ float tree16(float *ln) {
#pragma unroll
    for (int l = 8; l >= 1; l /= 2)
#pragma unroll
        for (int i = 0; i < l; i++) ln[i] = ln[i] + ln[i + l];
    return ln[0];
}

/* k . q, q's values F16 already: quants.h's infer__f16_dot_llama (16
   lanes) or, vec or n not a multiple of 16, infer__f16_dot_llama_vec */
__device__ float dot_f16_llama(const __half *k, const float *q, int n, int vec) {
    float ln[16];
    if (!vec && n % 16 == 0) {
        for (int l = 0; l < 16; l++) ln[l] = 0.0f;
        for (int i = 0; i < n; i += 16)
            for (int l = 0; l < 16; l++) ln[l] = fmaf(__half2float(k[i + l]), q[i + l], ln[l]);
        return tree16(ln);
    }
    int np = n - n % 64;
    for (int l = 0; l < 16; l++) {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (int i = 0; i < np; i += 64) {
            a0 = fmaf(__half2float(k[i + l]), q[i + l], a0);
            a1 = fmaf(__half2float(k[i + 16 + l]), q[i + 16 + l], a1);
            a2 = fmaf(__half2float(k[i + 32 + l]), q[i + 32 + l], a2);
            a3 = fmaf(__half2float(k[i + 48 + l]), q[i + 48 + l], a3);
        }
        ln[l] = (a0 + a2) + (a1 + a3);
    }
    double sum = (double)tree16(ln);
    for (int i = np; i < n; i++) sum += (double)(__half2float(k[i]) * q[i]);
    return (float)sum;
}

/* llama.cpp's order for F16 weights (a context that matches llama.cpp):
   one thread an output, Y[t][r] (+)= W[r] . X[t], X's values F16 already.
   vec, one token's order (ggml_vec_dot_f16): 64 accumulators over each 64
   values, added 0+2 and 1+3, then the 16-lane tree, the values past the
   last whole 64 added in double; else a batch's (tinyBLAS, n a multiple
   of 16): 16 lanes by fused multiply-adds, then the tree. */
__global__ void k_matvec_f16_ordered(const uint8_t *__restrict__ W, size_t row_bytes, int n, int rows,
                                     const float *__restrict__ X, int ldx, float *__restrict__ Y, int ldy, int add,
                                     int vec) {
    int r = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (r >= rows) return;
    float out = dot_f16_llama((const __half *)(W + (size_t)r * row_bytes), X + (size_t)t * ldx, n, vec);
    float *y = Y + (size_t)t * ldy + r;
    *y = add ? *y + out : out;
}

/* One key's score: the dot, soft-capped (attention.c's infer__attn_softcap), scaled */
__device__ __forceinline__ float ord_score(const uint8_t *krow, const float *q, int hd, int vec, float softcap,
                                           float scale) {
    float s = dot_f16_llama((const __half *)krow, q, hd, vec);
    if (softcap > 0.0f) s = tanhf(s * (1.0f / softcap)) * softcap;
    return s * scale;
}

/* Grid (tokens, heads), 32 threads; shared: q (hd), a tile's p (ORD_TILE)
   and, unless vec, the 16 lanes of each value. vacc/vtail: the 64 lanes
   and the double tail of each value where a token is alone (per sequence
   and head). */
__global__ void k_attention_ordered(const float *__restrict__ Q, int ldq, const int *__restrict__ pos,
                                    const int *__restrict__ seq, int n_tok, uint8_t *const *kc, uint8_t *const *vc,
                                    int layer, int n_layers, int slots, size_t k_row, int group, int hd, int window,
                                    float scale, float softcap, const float *__restrict__ sinks,
                                    float *__restrict__ vacc, double *__restrict__ vtail, float *__restrict__ out,
                                    int ldo) {
    INFER_DYNAMIC_SHARED(float, ord_sh);
    int t = blockIdx.x, h = blockIdx.y, lane = threadIdx.x, kvh = h / group, s = seq[t], p = pos[t];
    int alone = (t == 0 || seq[t - 1] != s) && (t == n_tok - 1 || seq[t + 1] != s);
    int vec = alone && group <= 16, nl = vec ? 64 : 16;
    int lo = window ? max(0, p - window + 1) : 0, n_kv = (p + 1 + 31) / 32 * 32, np = n_kv - n_kv % 64;
    size_t at = (size_t)s * n_layers + layer, head = (size_t)s * gridDim.y + h;
    const uint8_t *kbase = kc[at] + (size_t)kvh * hd * sizeof(__half);
    const __half *vbase = (const __half *)vc[at] + (size_t)kvh * hd * slots;
    float *qx = ord_sh, *pt = ord_sh + hd, *acc = vec ? vacc + head * hd * 64 : pt + ORD_TILE;
    double *tail = vtail + head * hd, sum = 0.0;
    float m = -INFINITY, inv;
    for (int i = lane; i < hd; i += 32) qx[i] = __half2float(__float2half_rn(Q[(size_t)t * ldq + (size_t)h * hd + i]));
    for (int d = lane; d < hd; d += 32) { /* each lane owns values lane, lane + 32, ... */
        for (int l = 0; l < nl; l++) acc[(size_t)d * nl + l] = 0.0f;
        if (vec) tail[d] = 0.0;
    }
    __syncwarp();
#define ORD_SCORE(kp) ord_score(kbase + (size_t)((kp) % slots) * k_row, qx, hd, vec, softcap, scale)
    for (int kp = lo + lane; kp <= p; kp += 32) m = fmaxf(m, ORD_SCORE(kp));
    m = warp_max(m);
    if (sinks) m = fmaxf(m, sinks[h]); /* the head's sink joins the max (llama.cpp's soft_max) */
    /* the sum, a chunk of 16 positions a lane, added in order */
    for (int c0 = lo / 16; c0 <= p / 16; c0 += 32) {
        int c = c0 + lane;
        float ch[16], cs = 0.0f;
        if (c <= p / 16) {
            for (int l = 0; l < 16; l++) {
                int kp = 16 * c + l;
                ch[l] = kp >= lo && kp <= p ? infer__exp_llama(ORD_SCORE(kp) - m) : 0.0f;
            }
            cs = tree16(ch);
        }
        for (int i = 0; i < 32 && c0 + i <= p / 16; i++) sum += (double)__shfl_sync(FULL_MASK, cs, i);
    }
    if (sinks) sum += (double)expf(sinks[h] - m); /* and the sum, last; it adds no value */
    inv = (float)(1.0 / sum);
    /* p.V, a tile of positions at a time */
    for (int a = lo / 16 * 16; a <= p; a += ORD_TILE) {
        for (int j = lane; j < ORD_TILE; j += 32) {
            int kp = a + j;
            pt[j] = kp >= lo && kp <= p ? __half2float(__float2half_rn(infer__exp_llama(ORD_SCORE(kp) - m) * inv)) : 0.0f;
        }
        __syncwarp();
        for (int c = a; c < a + ORD_TILE && c <= p; c += 16) {
            const float *pc = pt + (c - a);
            for (int d = lane; d < hd; d += 32) {
                const __half *vrow = vbase + (size_t)d * slots;
                if (!vec || c < np) {
                    float *ln = acc + (size_t)d * nl + (vec ? 16 * ((c / 16) % 4) : 0);
                    for (int l = 0; l < 16; l++) {
                        int kp = c + l;
                        float v = kp >= lo && kp <= p ? __half2float(vrow[kp % slots]) : 0.0f;
                        ln[l] = fmaf(v, pc[l], ln[l]);
                    }
                } else {
                    for (int l = 0; l < 16; l++) {
                        int kp = c + l;
                        float v = kp >= lo && kp <= p ? __half2float(vrow[kp % slots]) : 0.0f;
                        tail[d] += (double)(v * pc[l]);
                    }
                }
            }
        }
        __syncwarp();
    }
#undef ORD_SCORE
    for (int d = lane; d < hd; d += 32) {
        float *ln = acc + (size_t)d * nl, r[16];
        float o;
        if (vec) {
            for (int l = 0; l < 16; l++) r[l] = (ln[l] + ln[32 + l]) + (ln[16 + l] + ln[48 + l]);
            o = (float)((double)tree16(r) + tail[d]);
        } else {
            for (int l = 0; l < 16; l++) r[l] = ln[l];
            o = tree16(r);
        }
        out[(size_t)t * ldo + (size_t)h * hd + d] = o;
    }
}

/* Byte offsets in the dynamic shared memory (each 32-byte aligned, as
   wmma's loads want). */
struct att_layout {
    int q, k, v, s, p, out, qd, kd, sb, stat, total;
};
__host__ __device__ inline att_layout att_shared(int hdp) {
    att_layout L;
    int at = 0;
#define ATT_PUT(f, bytes) (L.f = at, at += ((bytes) + 31) / 32 * 32)
    ATT_PUT(q, ATT_ROWS * hdp * 2);
    ATT_PUT(k, ATT_KEYS * hdp * 2);
    ATT_PUT(v, ATT_KEYS * hdp * 2);
    ATT_PUT(s, ATT_ROWS * ATT_KEYS * 4);
    ATT_PUT(p, ATT_ROWS * ATT_KEYS * 2);
    ATT_PUT(out, ATT_ROWS * hdp * 4);
    ATT_PUT(qd, ATT_ROWS * (hdp / 32 + 1) * 4); /* a Q8_0 cache: q's and the keys' block scales, */
    ATT_PUT(kd, ATT_KEYS * (hdp / 32 + 1) * 4);
    ATT_PUT(sb, ATT_ROWS * ATT_KEYS * 4);        /* and one block's integer scores */
    ATT_PUT(stat, ATT_ROWS * 4 * 4); /* per row: max, sum, position, first key */
#undef ATT_PUT
    L.total = at;
    return L;
}

/* A share's part of the scratch: ATT_ROWS rows of hd outputs, then each
   row's max and sum. */
__device__ __forceinline__ float *att_part(float *part, int item, int kvh, int n_kvh, int share, int n_split, int hd) {
    return part + (((size_t)item * n_kvh + kvh) * n_split + share) * ATT_ROWS * (hd + 2);
}

__global__ void k_attention(int phase, const float *__restrict__ Q, int ldq, const att_item *__restrict__ items,
                            const int *__restrict__ pos, const int *__restrict__ seq, uint8_t *const *__restrict__ kc,
                            uint8_t *const *__restrict__ vc, int layer, int n_layers, int slots, int kvq, size_t k_row,
                            int group, int hd, int window, float scale, float softcap, const float *__restrict__ sinks,
                            float *__restrict__ part) {
    INFER_DYNAMIC_SHARED(unsigned char, sh);
    int hdp = (hd + 15) / 16 * 16, kvh = blockIdx.y, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    int n_split = (int)gridDim.z, n_kvh = (int)gridDim.y;
    att_layout L = att_shared(hdp);
    __half *sq = (__half *)(sh + L.q), *sk = (__half *)(sh + L.k), *sv = (__half *)(sh + L.v), *sp = (__half *)(sh + L.p);
    float *ss = (float *)(sh + L.s), *sout = (float *)(sh + L.out);
    float *sqd = (float *)(sh + L.qd), *skd = (float *)(sh + L.kd), *ssb = (float *)(sh + L.sb);
    int nb = hd / 32, q8 = kvq != KV_F16, bb = kv_block_bytes(kvq); /* a quantized cache's blocks of a head */
    float *sm = (float *)(sh + L.stat), *sl = sm + ATT_ROWS;
    int *spos = (int *)(sl + ATT_ROWS), *slo = spos + ATT_ROWS;
    att_item it = items[blockIdx.x];
    int n_rows = min(ATT_ROWS, it.n_tok * group - it.r0), s = seq[it.first];
    size_t at = (size_t)s * n_layers + layer, head_k = q8 ? (size_t)kvh * hd / 32 * bb : (size_t)kvh * hd * 2;
    const uint8_t *kbase = kc[at] + head_k, *vbase = vc[at];
    float *mine = att_part(part, blockIdx.x, kvh, n_kvh, blockIdx.z, n_split, hd);
    int key_lo, key_hi, chunk, my_lo, my_hi;
    { /* a share past the rows' keys (a decode grid split for a longer context) has nothing: an empty share, at once */
        int p0 = pos[it.first + it.r0 / group], p1 = pos[it.first + (it.r0 + n_rows - 1) / group];
        key_lo = window ? max(0, p0 - window + 1) : 0;
        chunk = ((p1 - key_lo + 1 + n_split - 1) / n_split + ATT_KEYS - 1) / ATT_KEYS * ATT_KEYS;
        if (key_lo + (int)blockIdx.z * chunk > p1) {
            if (phase == 0 && tid < ATT_ROWS) mine[ATT_ROWS * hd + tid] = -INFINITY, mine[ATT_ROWS * (hd + 1) + tid] = 0.0f;
            if (phase == 1)
                for (int e = tid; e < ATT_ROWS * hd; e += blockDim.x) mine[e] = 0.0f;
            return;
        }
    }
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fo[ATT_ACC];

    /* the rows' queries (rounded as the CPU rounds q for q.K) and their key ranges */
    for (int e = tid; e < ATT_ROWS * (hdp / 16); e += blockDim.x) {
        int i = e / (hdp / 16), c = e % (hdp / 16);
        const float *qrow = Q + (size_t)(it.first + (it.r0 + i) / group) * ldq + (size_t)(kvh * group + (it.r0 + i) % group) * hd;
        float v[16];
        for (int j = 0; j < 16; j++) v[j] = i < n_rows && 16 * c + j < hd ? qrow[16 * c + j] : 0.0f;
        if (q8) { /* Q8_0 as the CPU's kernels make it (a block of 32 is two such pieces):
                     the integers, exact in F16, and the block's scale */
            float amax = 0.0f, id;
            for (int d2 = 16 * c / 32 * 32; i < n_rows && d2 < 16 * c / 32 * 32 + 32; d2++) amax = fmaxf(amax, fabsf(qrow[d2]));
            id = amax != 0.0f ? 127.0f / amax : 0.0f;
            for (int j = 0; j < 16; j++) v[j] = nearbyintf(v[j] * id);
            if (c % 2 == 0) sqd[i * (hdp / 32 + 1) + c / 2] = round_f16(amax / 127.0f);
        }
        for (int j = 0; j < 16; j++) sq[i * hdp + 16 * c + j] = __float2half_rn(v[j]);
    }
    if (tid < ATT_ROWS) {
        int p = tid < n_rows ? pos[it.first + (it.r0 + tid) / group] : -1;
        spos[tid] = p;
        slo[tid] = window && p >= 0 ? max(0, p - window + 1) : 0;
        sm[tid] = -INFINITY;
        sl[tid] = 0.0f;
        if (phase == 1 && tid < n_rows) { /* every share's max and sum, merged */
            float M = -INFINITY, l = 0.0f, sink = sinks ? sinks[kvh * group + (it.r0 + tid) % group] : 0.0f;
            for (int z = 0; z < n_split; z++)
                M = fmaxf(M, att_part(part, blockIdx.x, kvh, n_kvh, z, n_split, hd)[ATT_ROWS * hd + tid]);
            if (sinks) M = fmaxf(M, sink); /* the head's sink: in the row's max and sum once, here, adding no value */
            for (int z = 0; z < n_split; z++) {
                const float *pz = att_part(part, blockIdx.x, kvh, n_kvh, z, n_split, hd);
                if (pz[ATT_ROWS * hd + tid] != -INFINITY) l += pz[ATT_ROWS * (hd + 1) + tid] * expf(pz[ATT_ROWS * hd + tid] - M);
            }
            if (sinks) l += expf(sink - M);
            sm[tid] = M;
            sl[tid] = l > 0.0f ? 1.0f / l : 0.0f; /* phase 1 keeps the inverse */
        }
    }
    for (int u = 0; u < ATT_ACC; u++) nvcuda::wmma::fill_fragment(fo[u], 0.0f);
    __syncthreads();
    key_lo = slo[0];
    key_hi = spos[n_rows - 1];
    chunk = (key_hi - key_lo + 1 + n_split - 1) / n_split;
    chunk = (chunk + ATT_KEYS - 1) / ATT_KEYS * ATT_KEYS;
    my_lo = key_lo + (int)blockIdx.z * chunk;
    my_hi = min(key_hi, my_lo + chunk - 1);

    for (int k0 = my_lo; k0 <= my_hi; k0 += ATT_KEYS) {
        /* the tile's K and (phase 1) V, a row per key, as F16 */
        for (int e = tid; e < ATT_KEYS * hdp; e += blockDim.x) {
            int j = e / hdp, d = e % hdp, p = k0 + j;
            float kval = 0.0f;
            if (p <= my_hi && d < hd) {
                const uint8_t *kr = kbase + (size_t)(p % slots) * k_row;
                if (q8) {
                    kval = (float)kv_int(kr + bb * (d / 32), d % 32, kvq); /* the integer; its scale apart */
                    if (d % 32 == 0) skd[j * (hdp / 32 + 1) + d / 32] = kv_scale(kr + bb * (d / 32), kvq);
                } else {
                    kval = __half2float(((const __half *)kr)[d]);
                }
            }
            sk[j * hdp + d] = __float2half_rn(kval);
        }
        if (phase == 1)
            for (int e = tid; e < ATT_KEYS * hdp; e += blockDim.x) {
                int j = e % ATT_KEYS, d = e / ATT_KEYS, p = k0 + j; /* keys fastest: V^T's rows are contiguous */
                __half val = __float2half_rn(0.0f);
                if (p <= my_hi && d < hd) {
                    int slot = p % slots;
                    if (q8) {
                        const uint8_t *vr = vbase + (size_t)slot * k_row + (size_t)kvh * hd / 32 * bb;
                        val = __float2half_rn(kv_scale(vr + bb * (d / 32), kvq) * (float)kv_int(vr + bb * (d / 32), d % 32, kvq));
                    } else {
                        val = ((const __half *)vbase)[((size_t)kvh * hd + d) * slots + slot];
                    }
                }
                sv[j * hdp + d] = val;
            }
        __syncthreads();
        /* S = Q K^T: warp w takes keys 16w .. 16w + 15; with a Q8_0 cache,
           block by block of 32 (its integer sums exact in F32), each
           scaled by q's and the key's scales as the CPU's dot does */
        for (int b = 0; b < (q8 ? nb : 1); b++) {
            nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fs;
            nvcuda::wmma::fill_fragment(fs, 0.0f);
            for (int c = q8 ? 2 * b : 0; c < (q8 ? 2 * b + 2 : hdp / 16); c++) {
                nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> fq;
                nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::col_major> fk;
                nvcuda::wmma::load_matrix_sync(fq, sq + 16 * c, hdp);
                nvcuda::wmma::load_matrix_sync(fk, sk + (size_t)16 * warp * hdp + 16 * c, hdp);
                nvcuda::wmma::mma_sync(fs, fq, fk, fs);
            }
            nvcuda::wmma::store_matrix_sync((q8 ? ssb : ss) + 16 * warp, fs, ATT_KEYS, nvcuda::wmma::mem_row_major);
            if (q8) {
                __syncthreads();
                for (int e = tid; e < ATT_ROWS * ATT_KEYS; e += blockDim.x) {
                    int i = e / ATT_KEYS, j = e % ATT_KEYS;
                    float part_b = ssb[e] * (sqd[i * (hdp / 32 + 1) + b] * skd[j * (hdp / 32 + 1) + b]);
                    ss[e] = b ? ss[e] + part_b : part_b;
                }
                __syncthreads();
            }
        }
        __syncthreads();
        /* the softmax: warp w takes rows 4w .. 4w + 3, lanes the keys */
        for (int i = ATT_ROWS / ATT_WARPS * warp; i < ATT_ROWS / ATT_WARPS * (warp + 1); i++) {
            float x[ATT_KEYS / 32], mx = -INFINITY;
#pragma unroll
            for (int u = 0; u < ATT_KEYS / 32; u++) {
                int p = k0 + lane + 32 * u;
                float y = ss[i * ATT_KEYS + lane + 32 * u];
                if (softcap > 0.0f) y = tanhf(y * (1.0f / softcap)) * softcap;
                x[u] = p <= my_hi && p >= slo[i] && p <= spos[i] ? y * scale : -INFINITY;
                mx = fmaxf(mx, x[u]);
            }
            if (phase == 0) { /* the running max and sum */
                float m_old = sm[i], m_new = fmaxf(m_old, warp_max(mx)), sum = 0.0f;
#pragma unroll
                for (int u = 0; u < ATT_KEYS / 32; u++) sum += x[u] == -INFINITY ? 0.0f : expf(x[u] - m_new);
                sum = warp_sum(sum);
                if (lane == 0 && m_new != -INFINITY) sl[i] = sl[i] * expf(m_old - m_new) + sum, sm[i] = m_new;
            } else { /* the probabilities, normalised and rounded to F16 */
#pragma unroll
                for (int u = 0; u < ATT_KEYS / 32; u++)
                    sp[i * ATT_KEYS + lane + 32 * u] =
                        __float2half_rn(x[u] == -INFINITY ? 0.0f : expf(x[u] - sm[i]) * sl[i]);
            }
        }
        __syncthreads();
        if (phase == 1) /* P V: warp w takes output columns 16w, 16(w + 4), ... */
            for (int c = warp, u = 0; c < hdp / 16; c += ATT_WARPS, u++)
                for (int kk = 0; kk < ATT_KEYS / 16; kk++) {
                    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> fp;
                    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::row_major> fv;
                    nvcuda::wmma::load_matrix_sync(fp, sp + 16 * kk, ATT_KEYS);
                    nvcuda::wmma::load_matrix_sync(fv, sv + (size_t)16 * kk * hdp + 16 * c, hdp);
                    nvcuda::wmma::mma_sync(fo[u], fp, fv, fo[u]);
                }
        __syncthreads(); /* the tiles are read before the next ones come */
    }
    if (phase == 0) {
        if (tid < ATT_ROWS) mine[ATT_ROWS * hd + tid] = sm[tid], mine[ATT_ROWS * (hd + 1) + tid] = sl[tid];
        return;
    }
    for (int c = warp, u = 0; c < hdp / 16; c += ATT_WARPS, u++)
        nvcuda::wmma::store_matrix_sync(sout + 16 * c, fo[u], hdp, nvcuda::wmma::mem_row_major);
    __syncthreads();
    for (int e = tid; e < ATT_ROWS * hd; e += blockDim.x) mine[e] = sout[(e / hd) * hdp + e % hd];
}

/* The shares of each row added: out = sum over z of share z's P V. */
__global__ void k_attention_merge(const float *__restrict__ part, const att_item *__restrict__ items, int n_split,
                                  int group, int hd, float *__restrict__ out, int ldo) {
    att_item it = items[blockIdx.x];
    int kvh = blockIdx.y, n_rows = min(ATT_ROWS, it.n_tok * group - it.r0);
    const float *base = part + ((size_t)blockIdx.x * gridDim.y + kvh) * n_split * ATT_ROWS * (hd + 2);
    for (int e = threadIdx.x; e < n_rows * hd; e += blockDim.x) {
        int i = e / hd, d = e % hd;
        float o = 0.0f;
        for (int z = 0; z < n_split; z++) o += base[(size_t)z * ATT_ROWS * (hd + 2) + i * hd + d];
        out[(size_t)(it.first + (it.r0 + i) / group) * ldo + (size_t)(kvh * group + (it.r0 + i) % group) * hd + d] = o;
    }
}

/* ---- the model on the device ------------------------------------------- */

/* Where one weight of the description lives on the device: its GGUF
   bytes (matrices), or F32 values (norm weights, biases). */
struct dev_tensor {
    const infer__tensor *t; /* the description's tensor */
    const uint8_t *p;
    int type, n;
    long long rows; /* all of them: an experts tensor stacks its experts */
    size_t row_bytes;
};

struct gpu_model {
    int device;
    char name[300];
    const infer_model *m;
    dev_tensor *w; /* every weight the description binds, sorted by its tensor's address */
    int n_w;
    float *gelu; /* the GELU table, on the device, or NULL */
    void **allocs; /* every cudaMalloc of the weights, to free */
    int n_allocs, cap_allocs;
    double bandwidth; /* GB/s, measured as the model was uploaded (measure_bandwidth) */
    int n_sm;         /* its multiprocessors: a decode step's attention fills them */
};

static int model_alloc(gpu_model *g, void **p, size_t bytes, char *msg, size_t size) {
    if (g->n_allocs == g->cap_allocs) {
        int cap = g->cap_allocs ? 2 * g->cap_allocs : 64;
        void **a = (void **)realloc(g->allocs, (size_t)cap * sizeof *a);
        if (!a) return say(msg, size, "out of host memory"), 0;
        g->allocs = a;
        g->cap_allocs = cap;
    }
    if (!ok(cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc", msg, size)) return 0;
    g->allocs[g->n_allocs++] = *p;
    return 1;
}

/* The device copy of description tensor t (NULL for none). */
static const dev_tensor *dev(const gpu_model *g, const infer__tensor *t) {
    int lo = 0, hi = g->n_w - 1;
    if (!t) return NULL;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (g->w[mid].t == t) return &g->w[mid];
        if ((uintptr_t)g->w[mid].t < (uintptr_t)t) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* A vector's F32 values on the device (NULL for none). */
static const float *dev_vec(const gpu_model *g, const infer__tensor *t) {
    const dev_tensor *d = dev(g, t);
    return d ? (const float *)d->p : NULL;
}

static int by_address(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (const infer__tensor *const *)a, y = (uintptr_t) * (const infer__tensor *const *)b;
    return x < y ? -1 : x > y;
}

static int by_tensor(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const dev_tensor *)a)->t, y = (uintptr_t)((const dev_tensor *)b)->t;
    return x < y ? -1 : x > y;
}

/* Each weight the description binds, once: the layers' (every field of
   infer__layer), then the model's. Returns how many, written to out
   (which holds BOUND_PER_LAYER per layer and BOUND_MODEL). */
#define BOUND_PER_LAYER 54
#define BOUND_MODEL (3 + 2 * (INFER__MAX_ALTUP - 1) + 3)
static int bound_tensors(const infer_model *m, const infer__tensor **out) {
    int n = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        const infer__tensor *all[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv, L->bo,
                                      L->q_norm, L->k_norm, L->post_attn_norm, L->ffn_norm, L->w_gate, L->w_up,
                                      L->w_down, L->post_ffn_norm, L->ffn_router, L->gate_exps, L->up_exps};
        const infer__tensor *rec[] = {L->down_exps, L->rec_in, L->rec_gate, L->rec_beta, L->rec_alpha, L->conv,
                                      L->conv_bias, L->dt_bias, L->ssm_a, L->ssm_d, L->ssm_norm, L->rec_out,
                                      L->router_b, L->gate_exps_b, L->up_exps_b, L->down_exps_b, L->attn_sinks};
        const infer__tensor *g3n[] = {L->altup_router, L->altup_router_norm, L->altup_predict, L->altup_correct,
                                      L->altup_correct_scale, L->laurel_l, L->laurel_r, L->laurel_norm,
                                      L->ple_gate, L->ple_proj, L->ple_norm};
        const infer__tensor *g4[] = {L->post_ffn_norm_1, L->pre_ffn_norm_2, L->post_ffn_norm_2, L->router_scale,
                                     L->exps_scale, L->out_scale};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i]) out[n++] = all[i];
        for (size_t i = 0; i < sizeof rec / sizeof rec[0]; i++)
            if (rec[i]) out[n++] = rec[i];
        for (size_t i = 0; i < sizeof g3n / sizeof g3n[0]; i++)
            if (g3n[i]) out[n++] = g3n[i];
        for (size_t i = 0; i < sizeof g4 / sizeof g4[0]; i++)
            if (g4[i]) out[n++] = g4[i];
    }
    out[n++] = m->tok_embd;
    out[n++] = m->output_norm;
    if (m->output != m->tok_embd) out[n++] = m->output;
    for (int j = 0; j < m->n_altup - 1; j++) out[n++] = m->altup_up[j], out[n++] = m->altup_down[j];
    if (m->ple_dim) out[n++] = m->ple_embd, out[n++] = m->ple_model_proj, out[n++] = m->ple_proj_norm;
    return n;
}

/* Checks one weight and copies it to the device: a matrix in its GGUF
   format (one this file reads), a vector as F32. */
static int upload(gpu_model *g, const infer__tensor *t, dev_tensor *d, char *msg, size_t size) {
    int bytes, per = block_of(t->type, &bytes);
    long long rows = 1;
    void *p;
    for (int i = 1; i < t->n_dims; i++) rows *= t->ne[i];
    d->t = t;
    if (!per)
        return say(msg, size, "tensor %s: format %s has no CUDA kernel", t->name, type_name(t->type)),
               INFER_BACKEND_UNSUPPORTED;
    if (t->ne[0] % per || t->ne[0] > (1 << 30))
        return say(msg, size, "tensor %s: rows of %lld values do not fit its blocks", t->name, (long long)t->ne[0]),
               INFER_BACKEND_UNSUPPORTED;
    d->type = t->type;
    d->n = (int)t->ne[0];
    d->rows = rows;
    d->row_bytes = (size_t)(t->ne[0] / per) * (size_t)bytes;
    if (t->n_dims == 1 && t->type != INFER_TYPE_F32)
        return say(msg, size, "tensor %s: a vector in %s, not F32", t->name, type_name(t->type)),
               INFER_BACKEND_UNSUPPORTED;
    if (d->row_bytes * (size_t)rows != t->nbytes)
        return say(msg, size, "tensor %s: %zu bytes, expected %zu", t->name, t->nbytes, d->row_bytes * (size_t)rows),
               INFER_BACKEND_UNSUPPORTED;
    if (!model_alloc(g, &p, t->nbytes, msg, size) ||
        !ok(cudaMemcpy(p, t->data, t->nbytes, cudaMemcpyHostToDevice), "cudaMemcpy", msg, size))
        return INFER_BACKEND_FAILED;
    d->p = (const uint8_t *)p;
    return INFER_BACKEND_OK;
}

extern "C" int infer_cuda_device_count(char *msg, size_t size) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        say(msg, size, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if (n <= 0) say(msg, size, "cudaGetDeviceCount: 0 devices");
    return n;
}

extern "C" void infer_cuda_model_free(void *gm) {
    gpu_model *g = (gpu_model *)gm;
    if (!g) return;
    cudaSetDevice(g->device);
    for (int i = 0; i < g->n_allocs; i++) cudaFree(g->allocs[i]);
    free(g->allocs);
    free(g->w);
    free(g);
}

extern "C" const char *infer_cuda_model_device_name(const void *gm) { return ((const gpu_model *)gm)->name; }

extern "C" int infer_cuda_model_new(const infer_model *m, void **out, char *msg, size_t size) {
    gpu_model *g;
    cudaDeviceProp prop;
    const infer__tensor **list;
    int n, rc = INFER_BACKEND_OK;
    *out = NULL;
    /* what the kernels assume, checked before touching the device */
    if (m->head_dim > ATT_MAX_HD || m->head_dim > QK_MAX_HD) {
        say(msg, size, "head size %d is larger than the CUDA attention's %d", m->head_dim, ATT_MAX_HD);
        return INFER_BACKEND_UNSUPPORTED;
    }
    /* features as data whose every value has a kernel here: one the
       description grows later is refused by name, not run as another */
    if ((m->act != INFER__ACT_SILU && m->act != INFER__ACT_GELU && m->act != INFER__ACT_SWIGLU_CLAMP) ||
        (m->act == INFER__ACT_GELU && !m->gelu_table)) {
        say(msg, size, "the feed-forward's activation (%d) has no CUDA kernel", (int)m->act);
        return INFER_BACKEND_UNSUPPORTED;
    }
    if (m->n_expert && m->gating != INFER__GATING_SOFTMAX && m->gating != INFER__GATING_SOFTMAX_TOPK) {
        say(msg, size, "the experts' gating (%d) has no CUDA kernel", (int)m->gating);
        return INFER_BACKEND_UNSUPPORTED;
    }
    if (m->n_expert > MOE_MAX_EXPERTS) {
        say(msg, size, "%d experts, more than the CUDA routing's %d", m->n_expert, MOE_MAX_EXPERTS);
        return INFER_BACKEND_UNSUPPORTED;
    }
    if (m->n_altup > INFER__MAX_ALTUP || (m->ple_dim && !m->gelu_table)) {
        say(msg, size, "%d AltUp streams, or per-layer inputs without the GELU table, have no CUDA kernel", m->n_altup);
        return INFER_BACKEND_UNSUPPORTED;
    }
    if (m->n_recurrent && m->ssm_conv > CONV_MAX_TAPS) {
        say(msg, size, "a convolution of %d taps, more than the CUDA kernel's %d", m->ssm_conv, CONV_MAX_TAPS);
        return INFER_BACKEND_UNSUPPORTED;
    }
    list = (const infer__tensor **)malloc(((size_t)m->n_layers * BOUND_PER_LAYER + BOUND_MODEL) * sizeof *list);
    g = (gpu_model *)calloc(1, sizeof *g);
    if (!list || !g) {
        free(list);
        free(g);
        return say(msg, size, "out of host memory"), INFER_BACKEND_FAILED;
    }
    n = bound_tensors(m, list);
    for (int i = 0; i < n; i++) { /* a format without a kernel is refused before anything is uploaded */
        int bytes;
        if (!block_of(list[i]->type, &bytes)) {
            say(msg, size, "tensor %s: format %s has no CUDA kernel", list[i]->name, type_name(list[i]->type));
            free(list);
            free(g);
            return INFER_BACKEND_UNSUPPORTED;
        }
    }
    g->m = m;
    g->w = (dev_tensor *)calloc((size_t)n, sizeof *g->w);
    if (!g->w) {
        free(list);
        infer_cuda_model_free(g);
        return say(msg, size, "out of host memory"), INFER_BACKEND_FAILED;
    }
    g->device = 0;
    if (!ok(cudaSetDevice(g->device), "cudaSetDevice", msg, size) ||
        !ok(cudaGetDeviceProperties(&prop, g->device), "cudaGetDeviceProperties", msg, size)) {
        free(list);
        infer_cuda_model_free(g);
        return INFER_BACKEND_FAILED;
    }
    snprintf(g->name, sizeof g->name, "%s, sm_%d%d", prop.name, prop.major, prop.minor);
    g->n_sm = prop.multiProcessorCount;
    g->bandwidth = measure_bandwidth(g->device);
    qsort(list, (size_t)n, sizeof *list, by_address);
    for (int i = 0; i < n && rc == INFER_BACKEND_OK; i++) {
        if (i && list[i] == list[i - 1]) continue; /* bound twice (a shared tensor) */
        rc = upload(g, list[i], &g->w[g->n_w++], msg, size);
    }
    free(list);
    if (rc == INFER_BACKEND_OK && m->gelu_table) {
        void *p;
        size_t bytes = 65536 * sizeof(float);
        if (!model_alloc(g, &p, bytes, msg, size) ||
            !ok(cudaMemcpy(p, m->gelu_table, bytes, cudaMemcpyHostToDevice), "cudaMemcpy", msg, size))
            rc = INFER_BACKEND_FAILED;
        g->gelu = (float *)p;
    }
    if (rc != INFER_BACKEND_OK) {
        infer_cuda_model_free(g);
        return rc;
    }
    qsort(g->w, (size_t)g->n_w, sizeof *g->w, by_tensor);
    *out = g;
    return INFER_BACKEND_OK;
}

extern "C" void *infer_cuda_alloc(void *gm, size_t bytes, char *msg, size_t size) {
    void *p = NULL;
    if (!ok(cudaSetDevice(((gpu_model *)gm)->device), "cudaSetDevice", msg, size)) return NULL;
    if (!ok(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc", msg, size)) return NULL;
    if (!ok(cudaMemset(p, 0, bytes), "cudaMemset", msg, size)) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

extern "C" void infer_cuda_free(void *gm, void *p) {
    cudaSetDevice(((gpu_model *)gm)->device);
    cudaFree(p);
}

extern "C" int infer_cuda_copy(void *gm, void *dst, const void *src, size_t n, int kind, char *msg, size_t size) {
    cudaMemcpyKind k = kind == INFER_BACKEND_HOST_TO_DEVICE   ? cudaMemcpyHostToDevice
                       : kind == INFER_BACKEND_DEVICE_TO_HOST ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
    if (!ok(cudaSetDevice(((gpu_model *)gm)->device), "cudaSetDevice", msg, size)) return INFER_BACKEND_FAILED;
    if (k == cudaMemcpyDeviceToDevice && (const char *)src < (const char *)dst + n &&
        (const char *)dst < (const char *)src + n) { /* overlapping: through a copy of the source */
        void *tmp = NULL;
        int good = ok(cudaMalloc(&tmp, n), "cudaMalloc", msg, size) &&
                   ok(cudaMemcpy(tmp, src, n, cudaMemcpyDeviceToDevice), "cudaMemcpy", msg, size) &&
                   ok(cudaMemcpy(dst, tmp, n, cudaMemcpyDeviceToDevice), "cudaMemcpy", msg, size);
        cudaFree(tmp);
        return good ? INFER_BACKEND_OK : INFER_BACKEND_FAILED;
    }
    return ok(cudaMemcpy(dst, src, n, k), "cudaMemcpy", msg, size) ? INFER_BACKEND_OK : INFER_BACKEND_FAILED;
}

extern "C" double infer_cuda_bandwidth(const void *gm) { return ((const gpu_model *)gm)->bandwidth; }

/* ---- a context: scratch, the batch's inputs, the decode graphs --------- */

#ifndef PROMPT_MIN
#define PROMPT_MIN 8 /* tokens from which a product goes to cuBLAS */
#endif
#define DEQUANT_MAX (16 << 20) /* values of a matrix dequantized at once for cuBLAS */
#define DECODE_SPLIT_MAX 32 /* shares of the keys in a decode step's attention, at most */
#define MAX_GRAPHS 8      /* decode graphs kept per context, by batch size */

struct decode_graph {
    int n; /* tokens (one per sequence) */
    cudaGraphExec_t exec;
};

/* What c->act holds (a product's input x, rounded into a form): the
   products that read the same input after it (q, k, v; gate, up) reuse
   it; every other step forgets it. Decided while queueing, so a captured
   graph holds the same choices. */
struct act_held {
    const float *x;
    int form, n, n_tok;
};
enum { FORM_FLOAT, FORM_HALF, FORM_BF16, FORM_Q8, FORM_SPLIT };

struct gpu_ctx {
    gpu_model *g;
    const infer_model *m;
    infer__kv_cache kv;          /* the layout (host copy; mem is on the device) */
    uint8_t **d_k, **d_v;        /* the cache's pointers per sequence and layer, on the device */
    int n_batch, n_items, pairs; /* tokens; attention work items (all groups'); expert pairs (0: dense) */
    /* the query heads per KV head the attention layers have (Gemma 4's
       differ by layer): a pass makes items for each */
    int n_groups, groups[ATT_MAX_GROUPS];
    int match;                   /* sums as llama.cpp's CPU does (match_llama) */
    float *ord_acc;              /* with an F16 cache: k_attention_ordered's lanes (else NULL) */
    double *ord_tail;
    cudaStream_t stream;
    cublasHandle_t blas;
    /* activations, a row per token (per pair for experts) */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *moe_out, *router, *route_w, *route_margin, *logits, *part;
    int *route_e, *pair_token;
    /* recurrent layers (forward.c's names): the input product, Qwen3.5's
       gate z, its beta and alpha logits, the scan's output; attention with
       gates (model.q_gate): attn_q's output, then the gates */
    float *rin, *rgate, *rba, *rout, *qg, *gate;
    /* Gemma 3n (forward.c's names): AltUp's streams (n_altup rows of dim a
       token) and their predictions, the router's outputs and the
       coefficients made of them (n_altup^2 a token at most); LAuReL's
       output and its low-rank middle; the per-layer inputs (n_layers rows
       of ple_dim a token), the token's ple_embd rows they mix in, and one
       layer's gated input */
    float *alt, *alt_pred, *alt_mod, *alt_coef, *laurel, *laurel_mid, *ple, *ple_raw, *ple_h;
    /* Gemma 4's experts beside a dense FFN (forward.c's names): the dense
       part's output, the router's input */
    float *moe_dense, *router_in;
    infer__rs_state rs; /* their state (the implementation's memory on this device; at: a host copy), or mem NULL */
    void *act;    /* a product's input as the CPU rounds it (floats, F16/BF16 for cuBLAS, or int8 and scales) */
    struct act_held *held; /* what act holds now */
    size_t act_rows_bytes; /* where the int8 form's scales start in act */
    __half *wtmp; /* a quantized matrix dequantized for cuBLAS: hi parts, then lo parts */
    __half *act2; /* a prompt's activations for a quantized matrix: hi parts, then lo parts */
    float *row_scale; /* per token: what its F16 row for cuBLAS was divided by (k_row_scale) */
    /* the batch's inputs, laid out by set_inputs: pinned on the host, then copied in one piece */
    unsigned char *h_in, *d_in;
    size_t in_bytes;
    float *h_out; /* pinned: a decode graph's logits */
    decode_graph graphs[MAX_GRAPHS];
    int n_graphs;
};

/* Where the inputs of a batch of n tokens (n_sel selected, n_items
   attention items, n_runs runs of sequences for recurrent layers) sit in
   the input block: tokens, pos, seq, sel, items, runs, then RoPE (per
   token, per RoPE, rope_dim floats). */
struct inputs {
    int tokens, pos, seq, sel, items, runs, rope, bytes; /* byte offsets */
};
static inputs input_layout(const gpu_ctx *c, int n, int n_sel, int n_items, int n_runs) {
    inputs in;
    int at = 0;
    in.tokens = at, at += n * 4;
    in.pos = at, at += n * 4;
    in.seq = at, at += n * 4;
    in.sel = at, at += n_sel * 4;
    in.items = at, at += n_items * (int)sizeof(att_item);
    in.runs = at, at += n_runs * (int)sizeof(rs_run);
    at = (at + 15) / 16 * 16;
    in.rope = at, at += n * c->m->n_ropes * c->m->rope_dim * 4;
    in.bytes = at;
    return in;
}

extern "C" void infer_cuda_context_free(void *gc) {
    gpu_ctx *c = (gpu_ctx *)gc;
    if (!c) return;
    cudaSetDevice(c->g->device);
    for (int i = 0; i < c->n_graphs; i++) cudaGraphExecDestroy(c->graphs[i].exec);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    void *all[] = {c->d_k, c->d_v, c->x, c->xb, c->q, c->k, c->v, c->att, c->hb, c->hb2, c->moe_out, c->router,
                   c->route_w, c->route_margin, c->logits, c->part, c->route_e, c->pair_token, c->act, c->wtmp,
                   c->row_scale, c->d_in, c->ord_acc, c->ord_tail, c->act2, c->rin, c->rgate, c->rba, c->rout,
                   c->qg, c->gate, c->alt, c->alt_pred, c->alt_mod, c->alt_coef, c->laurel, c->laurel_mid,
                   c->ple, c->ple_raw, c->ple_h, c->moe_dense, c->router_in};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cudaFree(all[i]);
    cudaFreeHost(c->h_in);
    cudaFreeHost(c->h_out);
    free((void *)c->rs.at);
    free(c->held);
    free(c);
}

/* The most attention work items a batch of n tokens can make (runs of
   several sequences, each cut into ATT_ROWS rows). */
static int max_items(int group, int n, int n_seq) {
    return (n * group + ATT_ROWS - 1) / ATT_ROWS + (n < n_seq ? n : n_seq);
}

/* A decode step's shares of the keys (flash-decoding): a token alone has a
   block per KV head, a handful on a GPU of a hundred multiprocessors, so
   its keys are split until the blocks fill them (a share past the context's
   keys leaves at once). A prompt has blocks enough and takes one share. */
static int decode_split(const gpu_model *g, int n_items, int n_kvh) {
    int blocks = n_items * n_kvh, s = (g->n_sm + blocks - 1) / blocks;
    return s < 1 ? 1 : s > DECODE_SPLIT_MAX ? DECODE_SPLIT_MAX : s;
}

/* The attention scratch's blocks for a group: a prompt's items one each,
   or a decode step of n sequences (ceil(group / ATT_ROWS) items a token)
   split, times the KV heads. */
static size_t att_shares(const gpu_model *g, int group, int n_batch, int n_seq) {
    int per_tok = (group + ATT_ROWS - 1) / ATT_ROWS, n_kvh = g->m->n_heads / group;
    size_t most = (size_t)max_items(group, n_batch, n_seq);
    for (int n = 1; n <= n_batch && n <= n_seq; n++) {
        size_t shares = (size_t)n * per_tok * decode_split(g, n * per_tok, n_kvh);
        if (shares > most) most = shares;
    }
    return most * n_kvh;
}

/* Which of the context's groups layer L's attention is (L attends). */
static int group_index(const gpu_ctx *c, const infer__layer *L) {
    int group = c->m->n_heads / L->n_kv_heads;
    for (int i = 0; i < c->n_groups; i++)
        if (c->groups[i] == group) return i;
    return 0; /* (every attention layer's group is there) */
}

extern "C" int infer_cuda_context_new(void *gm, const infer__kv_cache *kv, const infer__rs_state *rs, int n_batch,
                                      int match_llama, void **out, size_t *bytes, char *msg, size_t size) {
    gpu_model *g = (gpu_model *)gm;
    const infer_model *m = g->m;
    gpu_ctx *c;
    size_t nb = (size_t)n_batch, total = 0, widest, pairs, n_ptr = (size_t)kv->n_seq * kv->n_layers, wt = 0;
    size_t part_blocks = 0, gate_rows = 0;
    int good, moe_dense = 0, hdp = (m->head_dim + 15) / 16 * 16;
    *out = NULL;
    c = (gpu_ctx *)calloc(1, sizeof *c);
    if (c) c->held = (act_held *)calloc(1, sizeof *c->held);
    if (!c || !c->held) {
        free(c);
        return say(msg, size, "out of host memory"), INFER_BACKEND_FAILED;
    }
    c->g = g;
    c->m = m;
    c->kv = *kv;
    if (rs) { /* the state's layout, kept: the description's layers index it */
        size_t *at = (size_t *)malloc((size_t)m->n_layers * sizeof *at);
        if (!at) {
            infer_cuda_context_free(c);
            return say(msg, size, "out of host memory"), INFER_BACKEND_FAILED;
        }
        memcpy(at, rs->at, (size_t)m->n_layers * sizeof *at);
        c->rs = *rs;
        c->rs.at = at;
    }
    c->n_batch = n_batch;
    c->match = match_llama;
    for (int l = 0; l < m->n_layers; l++) { /* the distinct groups of the layers' attention */
        int group = m->n_heads / m->layers[l].n_kv_heads, i = 0;
        if (m->layers[l].kind != INFER__LAYER_ATTENTION) continue;
        while (i < c->n_groups && c->groups[i] != group) i++;
        if (i < c->n_groups) continue;
        if (c->n_groups == ATT_MAX_GROUPS) {
            infer_cuda_context_free(c);
            return say(msg, size, "more than %d shapes of attention heads have no CUDA kernel", ATT_MAX_GROUPS),
                   INFER_BACKEND_UNSUPPORTED;
        }
        c->groups[c->n_groups++] = group;
    }
    if (!c->n_groups) c->groups[c->n_groups++] = m->n_heads / m->n_kv_heads;
    for (int i = 0; i < c->n_groups; i++) {
        size_t sh = att_shares(g, c->groups[i], n_batch, kv->n_seq);
        c->n_items += max_items(c->groups[i], n_batch, kv->n_seq);
        if (sh > part_blocks) part_blocks = sh;
    }
    pairs = m->n_expert ? nb * m->n_expert_used : 0;
    c->pairs = (int)pairs;
    gate_rows = pairs * m->expert_ffn;
    for (int l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        if (L->ffn_router && !L->up_exps) gate_rows = 2 * pairs * m->expert_ffn; /* gate and up fused in hb */
        if (L->ffn_router && L->w_gate) moe_dense = 1;
    }
    widest = (size_t)m->dim;
    if ((size_t)m->q_dim > widest) widest = (size_t)m->q_dim;
    if ((size_t)m->ffn_dim > widest) widest = (size_t)m->ffn_dim;
    if ((size_t)m->expert_ffn > widest) widest = (size_t)m->expert_ffn;
    if ((size_t)m->ssm_inner > widest) widest = (size_t)m->ssm_inner; /* ssm_out's input */
    if ((size_t)m->laurel_rank > widest) widest = (size_t)m->laurel_rank; /* laurel_r's */
    if ((size_t)m->ple_dim > widest) widest = (size_t)m->ple_dim;         /* ple_proj's */
    for (int i = 0; i < g->n_w; i++) /* the largest piece of a quantized matrix cuBLAS gets */
        if (g->w[i].type != INFER_TYPE_F32 && g->w[i].type != INFER_TYPE_F16 && g->w[i].type != INFER_TYPE_BF16 &&
            g->w[i].t->n_dims == 2) {
            size_t rows = DEQUANT_MAX / (size_t)g->w[i].n;
            if (rows < 1) rows = 1;
            if (rows > (size_t)g->w[i].rows) rows = (size_t)g->w[i].rows;
            if (rows * (size_t)g->w[i].n > wt) wt = rows * (size_t)g->w[i].n;
        }
    {
        size_t act_values = nb * widest > pairs * m->expert_ffn ? nb * widest : pairs * m->expert_ffn;
        c->act_rows_bytes = (act_values + 15) / 16 * 16; /* the int8 values, then the float4 scales */
    }
    c->in_bytes = (size_t)input_layout(c, n_batch, n_batch, c->n_items, m->n_recurrent ? n_batch : 0).bytes;
#define CTX_ALLOC(field, n, type) \
    (total += (n) * sizeof(type), ok(cudaMalloc((void **)&c->field, ((n) != 0 ? (n) : 1) * sizeof(type)), "cudaMalloc " #field, msg, size))
    good = ok(cudaSetDevice(g->device), "cudaSetDevice", msg, size) &&
           ok(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate", msg, size) &&
           blas_ok(cublasCreate(&c->blas), "cublasCreate", msg, size) &&
           blas_ok(cublasSetStream(c->blas, c->stream), "cublasSetStream", msg, size) &&
           CTX_ALLOC(d_k, n_ptr, uint8_t *) && CTX_ALLOC(d_v, n_ptr, uint8_t *) &&
           ok(cudaMemcpy(c->d_k, kv->k, n_ptr * sizeof(uint8_t *), cudaMemcpyHostToDevice), "cudaMemcpy", msg, size) &&
           ok(cudaMemcpy(c->d_v, kv->v, n_ptr * sizeof(uint8_t *), cudaMemcpyHostToDevice), "cudaMemcpy", msg, size) &&
           CTX_ALLOC(x, nb * m->dim, float) && CTX_ALLOC(xb, nb * m->dim, float) &&
           CTX_ALLOC(q, nb * m->q_dim, float) && CTX_ALLOC(k, nb * m->kv_dim, float) &&
           CTX_ALLOC(v, nb * m->kv_dim, float) && CTX_ALLOC(att, nb * m->q_dim, float) &&
           CTX_ALLOC(hb, (gate_rows > nb * m->ffn_dim ? gate_rows : nb * m->ffn_dim), float) &&
           CTX_ALLOC(hb2, (pairs * m->expert_ffn > nb * m->ffn_dim ? pairs * m->expert_ffn : nb * m->ffn_dim), float) &&
           CTX_ALLOC(moe_dense, (moe_dense ? nb * m->dim : 0), float) && CTX_ALLOC(router_in, (moe_dense ? nb * m->dim : 0), float) &&
           CTX_ALLOC(moe_out, pairs * m->dim, float) && CTX_ALLOC(router, nb * m->n_expert, float) &&
           CTX_ALLOC(route_w, pairs, float) &&
           CTX_ALLOC(route_margin, (pairs ? nb : 0), float) && CTX_ALLOC(route_e, pairs, int) &&
           CTX_ALLOC(pair_token, pairs, int) &&
           CTX_ALLOC(logits, nb * m->n_vocab, float) &&
           CTX_ALLOC(part, part_blocks * ATT_ROWS * (m->head_dim + 2), float) &&
           CTX_ALLOC(act, (nb * widest > pairs * m->expert_ffn ? nb * widest : pairs * m->expert_ffn), float) && CTX_ALLOC(wtmp, 2 * wt, __half) &&
           CTX_ALLOC(act2, 2 * nb * widest, __half) && CTX_ALLOC(row_scale, nb, float) && CTX_ALLOC(d_in, c->in_bytes, unsigned char) &&
           CTX_ALLOC(rin, (m->n_recurrent ? nb * m->rec_in_dim : 0), float) &&
           CTX_ALLOC(rgate, (m->n_recurrent ? nb * m->ssm_inner : 0), float) &&
           CTX_ALLOC(rba, (m->n_recurrent ? nb * 2 * m->ssm_heads : 0), float) &&
           CTX_ALLOC(rout, (m->n_recurrent ? nb * (m->ssm_inner > m->dim ? m->ssm_inner : m->dim) : 0), float) &&
           CTX_ALLOC(qg, (m->q_gate ? nb * 2 * m->q_dim : 0), float) && CTX_ALLOC(gate, (m->q_gate ? nb * m->q_dim : 0), float) &&
           CTX_ALLOC(alt, nb * m->n_altup * m->dim, float) && CTX_ALLOC(alt_pred, nb * m->n_altup * m->dim, float) &&
           CTX_ALLOC(alt_mod, nb * m->n_altup, float) && CTX_ALLOC(alt_coef, nb * m->n_altup * m->n_altup, float) &&
           CTX_ALLOC(laurel, (m->laurel_rank ? nb * m->dim : 0), float) &&
           CTX_ALLOC(laurel_mid, nb * m->laurel_rank, float) &&
           CTX_ALLOC(ple, nb * m->n_layers * m->ple_dim, float) && CTX_ALLOC(ple_raw, nb * m->n_layers * m->ple_dim, float) &&
           CTX_ALLOC(ple_h, nb * m->ple_dim, float) &&
           ok(cudaMallocHost((void **)&c->h_in, c->in_bytes), "cudaMallocHost", msg, size) &&
           ok(cudaMallocHost((void **)&c->h_out, (size_t)kv->n_seq * m->n_vocab * sizeof(float)), "cudaMallocHost", msg,
              size) &&
           ok(cudaFuncSetAttribute(k_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, att_shared(hdp).total),
              "cudaFuncSetAttribute", msg, size);
    if (good && match_llama && kv->type == INFER_TYPE_F16) { /* attention in llama.cpp's order */
        size_t values = (size_t)kv->n_seq * m->n_heads * m->head_dim;
        good = CTX_ALLOC(ord_acc, values * 64, float) && CTX_ALLOC(ord_tail, values, double);
    }
#undef CTX_ALLOC
    if (!good) {
        infer_cuda_context_free(c);
        return INFER_BACKEND_FAILED;
    }
    *bytes = total;
    *out = c;
    return INFER_BACKEND_OK;
}

/* ---- the steps ---------------------------------------------------------- */

/* The activation format the CPU dots weights of this type with. */
static int act_of(int type) {
    switch (type) {
    case INFER_TYPE_F16: return ACT_F16;
    case INFER_TYPE_BF16: return ACT_BF16;
    case INFER_TYPE_Q8_0: case INFER_TYPE_Q4_0: case INFER_TYPE_Q5_0: case INFER_TYPE_IQ4_NL:
    case INFER_TYPE_MXFP4: return ACT_Q8_0;
    case INFER_TYPE_Q4_1: case INFER_TYPE_Q5_1: return ACT_Q8_1;
    case INFER_TYPE_Q2_K: case INFER_TYPE_Q3_K: case INFER_TYPE_Q4_K: case INFER_TYPE_Q5_K: case INFER_TYPE_Q6_K:
    case INFER_TYPE_IQ4_XS: return ACT_Q8_K;
    default: return ACT_F32;
    }
}

static int is_q8_act(int act) { return act == ACT_Q8_0 || act == ACT_Q8_1 || act == ACT_Q8_K; }

/* Forgets what c->act holds: a step other than a product rewrote an input. */
static void forget_act(const gpu_ctx *c) { c->held->x = NULL; }

/* Whether c->act holds x in this form already; if not, says it will. */
static int act_ready(const gpu_ctx *c, const float *x, int form, int act, int n, int n_tok) {
    act_held *h = c->held;
    int f = form << 4 | act;
    if (h->x == x && h->form == f && h->n == n && h->n_tok == n_tok) return 1;
    h->x = x, h->form = f, h->n = n, h->n_tok = n_tok;
    return 0;
}

/* x (n_tok rows of n, stride ldx) rounded through act into c->act as O. */
template <typename O> static void quant_act(const gpu_ctx *c, int act, const float *x, int ldx, int n, int n_tok) {
    int group = act == ACT_Q8_K ? 256 : 32;
    dim3 grid((unsigned)((n + group - 1) / group), (unsigned)(n_tok < 65535 ? n_tok : 65535));
    O *y = (O *)c->act;
    const float *scale = NULL;
    if (act_ready(c, x, sizeof(O) == 4 ? FORM_FLOAT : act == ACT_BF16 ? FORM_BF16 : FORM_HALF, act, n, n_tok)) return;
    if (sizeof(O) == 2 && act != ACT_BF16) { /* F16: each row's power of two first (k_row_scale) */
        INFER_LAUNCH(n_tok, 256, 0, c->stream, k_row_scale)(x, ldx, n, c->row_scale);
        scale = c->row_scale;
    }
    switch (act) {
    case ACT_F16: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_F16, O>)(x, ldx, n, n_tok, y, scale); break;
    case ACT_BF16: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_BF16, O>)(x, ldx, n, n_tok, y, scale); break;
    case ACT_Q8_0: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_Q8_0, O>)(x, ldx, n, n_tok, y, scale); break;
    case ACT_Q8_1: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_Q8_1, O>)(x, ldx, n, n_tok, y, scale); break;
    case ACT_Q8_K: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_Q8_K, O>)(x, ldx, n, n_tok, y, scale); break;
    default: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_F32, O>)(x, ldx, n, n_tok, y, scale); break;
    }
}

static void launch_act_q8(const gpu_ctx *c, int act, dim3 grid, const float *x, const float *u, int fn, const float *gelu,
                          int ldx, int n, int n_tok, int8_t *q, float4 *meta) {
    switch (act) {
    case ACT_Q8_0: INFER_LAUNCH(grid, 32, 0, c->stream, k_act_q8<ACT_Q8_0>)(x, u, fn, gelu, ldx, n, n_tok, q, meta); break;
    case ACT_Q8_1: INFER_LAUNCH(grid, 32, 0, c->stream, k_act_q8<ACT_Q8_1>)(x, u, fn, gelu, ldx, n, n_tok, q, meta); break;
    default: INFER_LAUNCH(grid, 32, 0, c->stream, k_act_q8<ACT_Q8_K>)(x, u, fn, gelu, ldx, n, n_tok, q, meta); break;
    }
}

/* x's rows as int8 values and their scales (k_act_q8) in c->act. */
static void quant_act_q8(const gpu_ctx *c, int act, const float *x, int ldx, int n, int n_tok) {
    int group = act == ACT_Q8_K ? 256 : 32;
    dim3 grid((unsigned)(n / group), (unsigned)(n_tok < 65535 ? n_tok : 65535));
    int8_t *q = (int8_t *)c->act;
    float4 *meta = (float4 *)((unsigned char *)c->act + c->act_rows_bytes);
    if (act_ready(c, x, FORM_Q8, act, n, n_tok)) return;
    launch_act_q8(c, act, grid, x, NULL, 0, NULL, ldx, n, n_tok, q, meta);
}

/* ffn's activation fused into the quantization of down's input: act(g) * u
   of n_tok rows of n (g, u: hb, hb2) as int8 values in c->act. */
static void quant_act_q8_glu(const gpu_ctx *c, int act, const float *g, const float *u, int n, int n_tok) {
    int group = act == ACT_Q8_K ? 256 : 32;
    dim3 grid((unsigned)(n / group), (unsigned)(n_tok < 65535 ? n_tok : 65535));
    int8_t *q = (int8_t *)c->act;
    float4 *meta = (float4 *)((unsigned char *)c->act + c->act_rows_bytes);
    forget_act(c);
    launch_act_q8(c, act, grid, g, u, c->m->act, c->g->gelu, n, n, n_tok, q, meta);
    act_ready(c, g, FORM_Q8, act, n, n_tok); /* what down's product will look for */
}

template <int T>
static void matvec_t(const gpu_ctx *c, const dev_tensor &w, int rows, const float *x, int ldx, int n_tok, float *y,
                     int ldy, int add, const int *pair_expert, const int *pair_token, int n_pairs) {
    const int warps = 4;
    dim3 block(32 * warps);
    if (pair_expert) {
        dim3 grid((unsigned)((rows + warps - 1) / warps), (unsigned)n_pairs);
        INFER_LAUNCH(grid, block, 0, c->stream, k_matvec<T, 1>)(w.p, w.row_bytes, w.n, rows, x, ldx, 1, y, ldy, add,
                                                                pair_expert, pair_token, rows);
    } else if (n_tok == 1) {
        dim3 grid((unsigned)((rows + warps - 1) / warps), 1);
        INFER_LAUNCH(grid, block, 0, c->stream, k_matvec<T, 1>)(w.p, w.row_bytes, w.n, rows, x, ldx, n_tok, y, ldy, add,
                                                                nullptr, nullptr, 0);
    } else {
        dim3 grid((unsigned)((rows + warps - 1) / warps), (unsigned)((n_tok + 7) / 8));
        INFER_LAUNCH(grid, block, 0, c->stream, k_matvec<T, 8>)(w.p, w.row_bytes, w.n, rows, x, ldx, n_tok, y, ldy, add,
                                                                nullptr, nullptr, 0);
    }
}

template <int T>
static void matvec_q8_t(const gpu_ctx *c, const dev_tensor &w, int rows, int n_tok, float *y, int ldy, int add,
                        const int *pair_expert, const int *pair_token, int n_pairs) {
    const int warps = 4, per_block = warps * MV_ROWS;
    const int8_t *q = (const int8_t *)c->act;
    const float4 *meta = (const float4 *)((const unsigned char *)c->act + c->act_rows_bytes);
    dim3 block(32 * warps);
    if (pair_expert) {
        dim3 grid((unsigned)((rows + per_block - 1) / per_block), (unsigned)n_pairs);
        INFER_LAUNCH(grid, block, 0, c->stream, k_matvec_q8<T, 1>)(w.p, w.row_bytes, w.n, rows, q, meta, 1, y, ldy, add,
                                                                   pair_expert, pair_token, rows);
    } else if (n_tok == 1) {
        dim3 grid((unsigned)((rows + per_block - 1) / per_block), 1);
        INFER_LAUNCH(grid, block, 0, c->stream, k_matvec_q8<T, 1>)(w.p, w.row_bytes, w.n, rows, q, meta, n_tok, y, ldy,
                                                                   add, nullptr, nullptr, 0);
    } else {
        dim3 grid((unsigned)((rows + per_block - 1) / per_block), (unsigned)((n_tok + 3) / 4));
        INFER_LAUNCH(grid, block, 0, c->stream, k_matvec_q8<T, 4>)(w.p, w.row_bytes, w.n, rows, q, meta, n_tok, y, ldy,
                                                                   add, nullptr, nullptr, 0);
    }
}

/* Whether a product of n_tok tokens goes to cuBLAS: a prompt's, unless the
   context matches llama.cpp, whose products the CPU's kernels sum as
   llama.cpp does: then quantized weights take the int8 kernel (block sums
   exact integers, as the CPU's), F16 llama.cpp's order
   (k_matvec_f16_ordered), F32 and BF16 the float kernel. */
static int on_blas(const gpu_ctx *c, int n_tok) {
    return n_tok >= PROMPT_MIN && !c->match;
}

/* The formats whose products a context matching llama.cpp sums in the
   CPU's order (k_matvec_q8_ordered); the others keep the int8 kernel's. */
static int ordered_q8(int type) {
    return type == INFER_TYPE_Q8_0 || type == INFER_TYPE_Q5_0 || type == INFER_TYPE_Q4_K || type == INFER_TYPE_Q6_K;
}

/* Y[t] (+)= W . X[t] for a few tokens: a quantized W on int8 activations
   (dp4a), F32, F16 and BF16 by the float kernel (X rounded into c->act
   first); with pair_expert, each of n_pairs pairs multiplies its expert's
   rows (rows each) by its token's row (pair_token NULL: by row p of x). */
static void matvec(const gpu_ctx *c, const dev_tensor &w, int rows, const float *x, int ldx, int n_tok, float *y,
                   int ldy, int add, const int *pair_expert, const int *pair_token, int n_pairs) {
    int act = act_of(w.type), x_rows = pair_expert && !pair_token ? n_pairs : n_tok;
    if (is_q8_act(act)) {
        quant_act_q8(c, act, x, ldx, w.n, x_rows);
        if (c->match && !pair_expert && ordered_q8(w.type)) { /* the CPU's order */
            const int8_t *q = (const int8_t *)c->act;
            const float4 *meta = (const float4 *)((const unsigned char *)c->act + c->act_rows_bytes);
            dim3 grid((unsigned)((rows + 127) / 128), (unsigned)n_tok);
            switch (w.type) {
            case INFER_TYPE_Q8_0: INFER_LAUNCH(grid, 128, 0, c->stream, k_matvec_q8_ordered<INFER_TYPE_Q8_0>)(w.p, w.row_bytes, w.n, rows, q, meta, y, ldy, add); break;
            case INFER_TYPE_Q5_0: INFER_LAUNCH(grid, 128, 0, c->stream, k_matvec_q8_ordered<INFER_TYPE_Q5_0>)(w.p, w.row_bytes, w.n, rows, q, meta, y, ldy, add); break;
            case INFER_TYPE_Q4_K: INFER_LAUNCH(grid, 128, 0, c->stream, k_matvec_q8_ordered<INFER_TYPE_Q4_K>)(w.p, w.row_bytes, w.n, rows, q, meta, y, ldy, add); break;
            default: INFER_LAUNCH(grid, 128, 0, c->stream, k_matvec_q8_ordered<INFER_TYPE_Q6_K>)(w.p, w.row_bytes, w.n, rows, q, meta, y, ldy, add); break;
            }
            return;
        }
        switch (w.type) {
#define INFER_CUDA_CASE(t) \
    case t: matvec_q8_t<t>(c, w, rows, n_tok, y, ldy, add, pair_expert, pair_token, n_pairs); break;
            INFER_CUDA_QUANT_TYPES(INFER_CUDA_CASE)
#undef INFER_CUDA_CASE
        default: break;
        }
        return;
    }
    quant_act<float>(c, act, x, ldx, w.n, x_rows);
    switch (w.type) {
    case INFER_TYPE_F32: matvec_t<INFER_TYPE_F32>(c, w, rows, (const float *)c->act, w.n, n_tok, y, ldy, add, pair_expert, pair_token, n_pairs); break;
    case INFER_TYPE_F16: matvec_t<INFER_TYPE_F16>(c, w, rows, (const float *)c->act, w.n, n_tok, y, ldy, add, pair_expert, pair_token, n_pairs); break;
    case INFER_TYPE_BF16: matvec_t<INFER_TYPE_BF16>(c, w, rows, (const float *)c->act, w.n, n_tok, y, ldy, add, pair_expert, pair_token, n_pairs); break;
    default: break; /* refused at upload */
    }
}

/* Y[t] (+)= W . X[t] by cuBLAS (F16 or BF16 inputs on tensor cores, F32
   sums): W in F32, F16 or BF16 as it is, X rounded as the CPU rounds it
   into W's type (F16's: the CPU's F16 dot rounds X to F16 too). A
   quantized W, a piece of rows at a time, and X through its integer
   format would lose their exactness in F16 (a value of 8 bits times an
   F16 scale needs 19): each is split into two F16 parts, hi + lo, and
   three products sum hi.hi + hi.lo + lo.hi, about 22 bits. (One F16
   product measured: synth-256-q8_0 1.16% of the logit range from
   llama.cpp against its 1% tolerance, and a prompt 1.3% from the same
   tokens one by one.) */
static int gemm(const gpu_ctx *c, const dev_tensor &w, const float *x, int ldx, int n_tok, float *y, int ldy, int add) {
    int act = act_of(w.type), quantized = w.type != INFER_TYPE_F32 && w.type != INFER_TYPE_F16 && w.type != INFER_TYPE_BF16;
    cudaDataType wt = w.type == INFER_TYPE_F32 ? CUDA_R_32F : w.type == INFER_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    float one = 1.0f, beta = add ? 1.0f : 0.0f;
    long long per = quantized ? DEQUANT_MAX / w.n : w.rows;
    float *out = y; /* F16 inputs: into y, or xb for an add, then scaled back by k_scale_rows */
    const void *xin = c->act, *xlo = NULL;
    if (per < 1) per = 1;
    if (wt == CUDA_R_16F && add) out = c->xb, beta = 0.0f; /* (x is att or hb then: xb is free) */
    if (quantized) {
        size_t count = (size_t)w.n * n_tok;
        xin = c->act2, xlo = c->act2 + count;
        if (!act_ready(c, x, FORM_SPLIT, act, w.n, n_tok)) {
            int group = act == ACT_Q8_K ? 256 : 32;
            dim3 grid((unsigned)((w.n + group - 1) / group), (unsigned)(n_tok < 65535 ? n_tok : 65535));
            INFER_LAUNCH(n_tok, 256, 0, c->stream, k_row_scale)(x, ldx, w.n, c->row_scale);
            switch (act) { /* rounded as the CPU's format, into c->act as floats, then split */
            case ACT_Q8_0: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_Q8_0, float>)(x, ldx, w.n, n_tok, (float *)c->act, NULL); break;
            case ACT_Q8_1: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_Q8_1, float>)(x, ldx, w.n, n_tok, (float *)c->act, NULL); break;
            default: INFER_LAUNCH(grid, 32, 0, c->stream, k_quant_act<ACT_Q8_K, float>)(x, ldx, w.n, n_tok, (float *)c->act, NULL); break;
            }
            INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_split_f16)(
                (const float *)c->act, w.n, n_tok, c->row_scale, c->act2, c->act2 + count);
        }
    } else if (wt == CUDA_R_32F) {
        quant_act<float>(c, act, x, ldx, w.n, n_tok);
    } else if (wt == CUDA_R_16BF) {
        quant_act<unsigned short>(c, act, x, ldx, w.n, n_tok);
    } else {
        quant_act<__half>(c, act, x, ldx, w.n, n_tok);
    }
    for (long long r0 = 0; r0 < w.rows; r0 += per) {
        int rows = (int)(w.rows - r0 < per ? w.rows - r0 : per);
        const void *a = w.p + (size_t)r0 * w.row_bytes, *alo = NULL;
        if (quantized) {
            size_t threads = (size_t)rows * (w.n / 32);
            unsigned blocks = (unsigned)((threads + 255) / 256);
            __half *lo = c->wtmp + (size_t)rows * w.n;
            switch (w.type) {
#define INFER_CUDA_CASE(t) \
    case t: INFER_LAUNCH(blocks, 256, 0, c->stream, k_dequant_f16<t>)((const uint8_t *)a, w.row_bytes, w.n, rows, c->wtmp, lo); break;
                INFER_CUDA_TYPES(INFER_CUDA_CASE)
#undef INFER_CUDA_CASE
            default: break;
            }
            a = c->wtmp, alo = lo;
        }
        /* hi.hi, then (a quantized W) + hi.lo + lo.hi */
        const void *pa[3] = {a, a, alo}, *pb[3] = {xin, xlo, xin};
        for (int k = 0; k < (quantized ? 3 : 1); k++)
            if (cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tok, w.n, &one, pa[k], wt, w.n, pb[k], wt, w.n,
                             k ? &one : &beta, out + r0, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
                return 0;
    }
    if (wt == CUDA_R_16F) {
        size_t count = (size_t)w.rows * n_tok;
        INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_scale_rows)(
            y, add ? out : (const float *)NULL, ldy, (int)w.rows, n_tok, c->row_scale);
    }
    return 1;
}

/* product_run: Y[t] (+)= W . X[t] for n_tok rows (the input rounded
   first, forward.c's infer__product_convert): cuBLAS for a prompt, the
   matrix-vector kernel for a few tokens. */
static int product_run(const gpu_ctx *c, const infer__tensor *t, const float *x, int ldx, int n_tok, float *y, int ldy,
                   int add) {
    const dev_tensor &w = *dev(c->g, t);
    if (on_blas(c, n_tok)) return gemm(c, w, x, ldx, n_tok, y, ldy, add);
    if (c->match && w.type == INFER_TYPE_F16) {
        dim3 grid((unsigned)((w.rows + 127) / 128), (unsigned)n_tok);
        quant_act<float>(c, ACT_F16, x, ldx, w.n, n_tok);
        INFER_LAUNCH(grid, 128, 0, c->stream, k_matvec_f16_ordered)(
            w.p, w.row_bytes, w.n, (int)w.rows, (const float *)c->act, w.n, y, ldy, add, n_tok == 1 || w.n % 16);
        return 1;
    }
    matvec(c, w, (int)w.rows, x, ldx, n_tok, y, ldy, add, NULL, NULL, 0);
    return 1;
}

/* ffn: down(act(gate(x)) * up(x)), the gate sparsified first where the
   layer says: into xb, or added to x (out == x: the residual in the
   product). */
static int ffn(const gpu_ctx *c, const infer__layer *L, int n, float *out) {
    const infer_model *m = c->m;
    int ffn_dim = L->ffn_dim; /* the layer's width: hb's rows are that wide */
    size_t count = (size_t)n * ffn_dim;
    int down_act = act_of(dev(c->g, L->w_down)->type);
    if (!product_run(c, L->w_gate, c->xb, m->dim, n, c->hb, ffn_dim, 0) ||
        !product_run(c, L->w_up, c->xb, m->dim, n, c->hb2, ffn_dim, 0))
        return 0;
    if (L->ffn_sparsity > 0) {
        forget_act(c);
        INFER_LAUNCH(n, 256, 0, c->stream, k_sparsify)(c->hb, ffn_dim, L->ffn_sparsity);
    }
    if (!on_blas(c, n) && is_q8_act(down_act)) { /* down's input made quantized */
        quant_act_q8_glu(c, down_act, c->hb, c->hb2, ffn_dim, n);
    } else {
        forget_act(c);
        INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_act_mul)(
            c->hb, c->hb2, count, m->act, c->g->gelu, NULL, NULL, NULL, 0, 0);
    }
    return product_run(c, L->w_down, c->hb, ffn_dim, n, out, m->dim, out == c->x);
}

/* moe_ffn: the router (reading router_x's rows), each token's experts,
   their gate/up (or gate and up fused in one matrix: a row of hb holds
   both), activation and down per (token, expert) pair, and the weighted
   sum (each output times its expert's scale where the layer has them),
   into xb. */
static int moe_ffn(const gpu_ctx *c, const infer__layer *L, const float *router_x, int n, int first) {
    const infer_model *m = c->m;
    int k = m->n_expert_used, pairs = n * k, effn = m->expert_ffn, ldg = L->up_exps ? effn : 2 * effn;
    size_t count = (size_t)pairs * effn;
    if (!product_run(c, L->ffn_router, router_x, m->dim, n, c->router, m->n_expert, 0)) return 0;
    INFER_LAUNCH((unsigned)((n + 63) / 64), 64, 0, c->stream, k_moe_choose)(
        c->router, dev_vec(c->g, L->router_b), n, m->n_expert, k, m->gating == INFER__GATING_SOFTMAX, m->gating == INFER__GATING_SOFTMAX_TOPK,
        m->expert_norm, c->route_e, c->route_w, c->pair_token, c->route_margin, first);
    matvec(c, *dev(c->g, L->gate_exps), ldg, c->xb, m->dim, n, c->hb, ldg, 0, c->route_e, c->pair_token, pairs);
    if (L->up_exps)
        matvec(c, *dev(c->g, L->up_exps), effn, c->xb, m->dim, n, c->hb2, effn, 0, c->route_e, c->pair_token, pairs);
    forget_act(c);
    INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_act_mul)(
        c->hb, L->up_exps ? c->hb2 : c->hb + effn, count, m->act, c->g->gelu, dev_vec(c->g, L->gate_exps_b),
        dev_vec(c->g, L->up_exps_b), c->route_e, effn, ldg);
    /* down reads each pair's own row of hb */
    matvec(c, *dev(c->g, L->down_exps), m->dim, c->hb, ldg, pairs, c->moe_out, m->dim, 0, c->route_e, NULL, pairs);
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_moe_sum)(c->moe_out, c->route_w, dev_vec(c->g, L->down_exps_b),
                                                  dev_vec(c->g, L->exps_scale), c->route_e, k, m->dim, c->xb);
    return 1;
}

/* moe_dense_ffn: experts beside a dense FFN (Gemma 4), from the residual
   stream x (ffn_norm'd into xb): the dense FFN, normed by post_ffn_norm_1;
   the experts on pre_ffn_norm_2(x), routed on RMS-norm(x) / sqrt(dim)
   times router_scale, normed by post_ffn_norm_2; their sum into xb. */
static int moe_dense_ffn(const gpu_ctx *c, const infer__layer *L, int n, int first) {
    const infer_model *m = c->m;
    int dim = m->dim;
    if (!ffn(c, L, n, c->xb)) return 0;
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_norm_rows)(c->xb, NULL, dev_vec(c->g, L->post_ffn_norm_1), c->moe_dense, dim,
                                                     m->norm_eps);
    INFER_LAUNCH(n, 256, 0, c->stream, k_moe_router_in)(c->x, dev_vec(c->g, L->router_scale), 1.0f / sqrtf((float)dim),
                                                         c->router_in, dim, m->norm_eps);
    INFER_LAUNCH(n, 256, 0, c->stream, k_norm_rows)(c->x, NULL, dev_vec(c->g, L->pre_ffn_norm_2), c->xb, dim,
                                                     m->norm_eps);
    if (!moe_ffn(c, L, c->router_in, n, first)) return 0;
    INFER_LAUNCH(n, 256, 0, c->stream, k_norm_add)(c->xb, dev_vec(c->g, L->post_ffn_norm_2), c->moe_dense, dim,
                                                    m->norm_eps);
    return 1;
}

/* ---- the forward pass -------------------------------------------------- */

/* One pass's inputs on the device (in c->d_in) and its shape. */
struct pass {
    int n, n_sel, n_runs;
    int n_items[ATT_MAX_GROUPS], n_split[ATT_MAX_GROUPS]; /* per group of the context's (gpu_ctx.groups) */
    const int *tokens, *pos, *seq, *sel;
    const att_item *items[ATT_MAX_GROUPS];
    const rs_run *runs; /* recurrent layers: the runs of sequences (n_runs), else NULL */
    const float *rope; /* per token: per RoPE, rope_dim floats (cos, sin of each pair) */
};

/* Writes the batch's inputs into the pinned block (the attention items
   made here: per run of a sequence's tokens, one per ATT_ROWS rows; and,
   for recurrent layers, the runs themselves with their state slots) and
   says where they will be on the device; returns the bytes to copy. */
static size_t set_inputs(gpu_ctx *c, const infer_backend_batch *b, int decode, pass *p) {
    const infer_model *m = c->m;
    int n_items = 0, n_runs = 0, rope_n = m->n_ropes * m->rope_dim;
    int recurrent = c->rs.mem && b->rs_src && b->rs_dst;
    inputs in;
    for (int g = 0; g < c->n_groups; g++) p->n_items[g] = 0;
    for (int t = 0; t < b->n;) { /* count the items and runs first: they size the block */
        int e = t;
        while (e < b->n && b->seq[e] == b->seq[t]) e++;
        for (int g = 0; g < c->n_groups; g++) p->n_items[g] += ((e - t) * c->groups[g] + ATT_ROWS - 1) / ATT_ROWS;
        n_runs++;
        t = e;
    }
    for (int g = 0; g < c->n_groups; g++) n_items += p->n_items[g];
    if (!recurrent) n_runs = 0;
    in = input_layout(c, b->n, b->n_sel, n_items, n_runs);
    memcpy(c->h_in + in.tokens, b->tokens, (size_t)b->n * 4);
    memcpy(c->h_in + in.pos, b->pos, (size_t)b->n * 4);
    memcpy(c->h_in + in.seq, b->seq, (size_t)b->n * 4);
    memcpy(c->h_in + in.sel, b->sel, (size_t)b->n_sel * 4);
    { /* each group's items, one list after another */
        att_item *it = (att_item *)(c->h_in + in.items);
        for (int g = 0; g < c->n_groups; g++) {
            p->items[g] = (const att_item *)(c->d_in + in.items) + (it - (att_item *)(c->h_in + in.items));
            for (int t = 0; t < b->n;) {
                int e = t;
                while (e < b->n && b->seq[e] == b->seq[t]) e++;
                for (int r0 = 0; r0 < (e - t) * c->groups[g]; r0 += ATT_ROWS, it++)
                    it->first = t, it->n_tok = e - t, it->r0 = r0;
                t = e;
            }
        }
    }
    if (recurrent) {
        rs_run *run = (rs_run *)(c->h_in + in.runs);
        for (int t = 0; t < b->n; run++) {
            int e = t;
            while (e < b->n && b->seq[e] == b->seq[t]) e++;
            run->first = t, run->n = e - t, run->seq = b->seq[t], run->src = b->rs_src[t], run->dst = b->rs_dst[t];
            t = e;
        }
    }
    memcpy(c->h_in + in.rope, b->rope, (size_t)b->n * rope_n * sizeof(float));
    p->n = b->n, p->n_sel = b->n_sel;
    for (int g = 0; g < c->n_groups; g++)
        p->n_split[g] = decode ? decode_split(c->g, p->n_items[g], m->n_heads / c->groups[g]) : 1;
    p->n_runs = n_runs;
    p->runs = recurrent ? (const rs_run *)(c->d_in + in.runs) : NULL;
    p->tokens = (const int *)(c->d_in + in.tokens);
    p->pos = (const int *)(c->d_in + in.pos);
    p->seq = (const int *)(c->d_in + in.seq);
    p->sel = (const int *)(c->d_in + in.sel);
    p->rope = (const float *)(c->d_in + in.rope);
    return (size_t)in.bytes;
}

/* embed: the tokens' rows of the embedding, scaled where the model says */
static void embed(const gpu_ctx *c, const pass *p) {
    forget_act(c);
    const dev_tensor &w = *dev(c->g, c->m->tok_embd);
    switch (w.type) {
#define INFER_CUDA_CASE(t) \
    case t: INFER_LAUNCH(p->n, 128, 0, c->stream, k_embed<t>)(w.p, w.row_bytes, w.n, p->tokens, c->m->embd_scale, c->x); break;
        INFER_CUDA_TYPES(INFER_CUDA_CASE)
#undef INFER_CUDA_CASE
    default: break;
    }
}

/* norm_rows: RMSNorm of n rows of x (rows[] of them, or the first n) into
   y; next: the matrix the following product multiplies y by (or NULL) */
static void norm_rows(const gpu_ctx *c, const float *x, const int *rows, const infer__tensor *w, float *y, int n,
                      const infer__tensor *next) {
    int act = next ? act_of(dev(c->g, next)->type) : ACT_F32, dim = c->m->dim;
    int8_t *q = (int8_t *)c->act;
    float4 *meta = (float4 *)((unsigned char *)c->act + c->act_rows_bytes);
    forget_act(c);
    if (on_blas(c, n) || !is_q8_act(act)) {
        INFER_LAUNCH(n, 256, 0, c->stream, k_norm_rows)(x, rows, dev_vec(c->g, w), y, dim, c->m->norm_eps);
        return;
    }
    /* a few tokens whose next product takes int8 activations: RMSNorm and
       the quantization in one kernel */
    switch (act) {
    case ACT_Q8_0: INFER_LAUNCH(n, 256, 0, c->stream, k_norm_rows_q8<ACT_Q8_0>)(x, rows, dev_vec(c->g, w), y, dim, c->m->norm_eps, q, meta); break;
    case ACT_Q8_1: INFER_LAUNCH(n, 256, 0, c->stream, k_norm_rows_q8<ACT_Q8_1>)(x, rows, dev_vec(c->g, w), y, dim, c->m->norm_eps, q, meta); break;
    default: INFER_LAUNCH(n, 256, 0, c->stream, k_norm_rows_q8<ACT_Q8_K>)(x, rows, dev_vec(c->g, w), y, dim, c->m->norm_eps, q, meta); break;
    }
    act_ready(c, y, FORM_Q8, act, dim, n);
}

/* A cache's format code for the kernels (KV_F16, KV_Q8_0, KV_Q4_0). */
static int kv_format(infer_type t) { return t == INFER_TYPE_Q8_0 ? KV_Q8_0 : t == INFER_TYPE_Q4_0 ? KV_Q4_0 : KV_F16; }

/* qk_prepare: biases, q/k head norms (and v's where the model norms
   it), RoPE, q's scale; with kv_store fused in (RoPE with the cache
   write): k and v go to each token's sequence's cache; q alone in a
   layer that reads an earlier layer's cache */
static void qk_prepare(const gpu_ctx *c, const infer__layer *L, int l, const pass *p) {
    const infer_model *m = c->m;
    const infer__kv_cache *kv = &c->kv;
    const float *rope = L->rope >= 0 ? p->rope + (size_t)L->rope * m->rope_dim : NULL;
    int neox = L->rope >= 0 && m->ropes[L->rope].neox, stores = L->kv_layer == l;
    kv_dest dest;
    forget_act(c);
    dest.pos = p->pos, dest.seq = p->seq, dest.kc = c->d_k, dest.vc = c->d_v, dest.layer = l;
    dest.n_layers = kv->n_layers, dest.slots = kv->slots[l], dest.kvq = kv_format(kv->type), dest.k_row = kv->k_row;
    /* (q, k and v in rows of the layer's own widths; V the raw K where the layer has no wv) */
    INFER_LAUNCH(dim3((unsigned)p->n, (unsigned)(m->n_heads + (stores ? L->n_kv_heads : 0))), 32, 0, c->stream, k_qk_prepare)(
        c->q, c->k, c->v, L->q_dim, L->kv_dim, m->n_heads, L->head_dim, stores && !L->wv, dev_vec(c->g, L->bq),
        dev_vec(c->g, L->bk), dev_vec(c->g, L->bv), dev_vec(c->g, L->q_norm), dev_vec(c->g, L->k_norm), m->norm_eps, rope,
        m->n_ropes * m->rope_dim, L->rope >= 0 ? m->ropes[L->rope].n_rot : 0, neox, c->match, m->attn_scale_q ? m->attn_scale : 1.0f, m->v_norm, dest);
}

/* attention: every item's rows over the keys they see (layer l's cache,
   or the earlier layer's it reads), in n_split shares, merged */
static void attention(const gpu_ctx *c, const infer__layer *L, const pass *p) {
    forget_act(c);
    const infer_model *m = c->m;
    const infer__kv_cache *kv = &c->kv;
    int l = L->kv_layer; /* whose cache it reads */
    int hd = L->head_dim, hdp = (hd + 15) / 16 * 16, group = m->n_heads / L->n_kv_heads, gi = group_index(c, L);
    const float *sinks = dev_vec(c->g, L->attn_sinks);
    if (c->ord_acc) { /* llama.cpp's order */
        size_t shared = (size_t)(hd + ORD_TILE + 16 * hd) * sizeof(float);
        INFER_LAUNCH(dim3((unsigned)p->n, (unsigned)m->n_heads), 32, shared, c->stream, k_attention_ordered)(
            c->q, L->q_dim, p->pos, p->seq, p->n, c->d_k, c->d_v, l, kv->n_layers, kv->slots[l], kv->k_row, group,
            hd, L->window, m->attn_scale_q ? 1.0f : m->attn_scale, m->attn_softcap, sinks, c->ord_acc,
            c->ord_tail, c->att, L->q_dim);
        return;
    }
    dim3 grid((unsigned)p->n_items[gi], (unsigned)L->n_kv_heads, (unsigned)p->n_split[gi]);
    for (int phase = 0; phase < 2; phase++) /* each row's max and sum, then P V */
        INFER_LAUNCH(grid, 32 * ATT_WARPS, (size_t)att_shared(hdp).total, c->stream, k_attention)(
            phase, c->q, L->q_dim, p->items[gi], p->pos, p->seq, c->d_k, c->d_v, l, kv->n_layers, kv->slots[l],
            kv_format(kv->type), kv->k_row, group, hd, L->window,
            m->attn_scale_q ? 1.0f : m->attn_scale, m->attn_softcap, sinks, c->part);
    INFER_LAUNCH(dim3((unsigned)p->n_items[gi], (unsigned)L->n_kv_heads), 128, 0, c->stream, k_attention_merge)(
        c->part, p->items[gi], p->n_split[gi], group, hd, c->att, L->q_dim);
}

/* residual: x += post_norm(xb + bias) * residual_scale */
static void residual(const gpu_ctx *c, const infer__tensor *bias, const infer__tensor *post_norm, int n) {
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_residual)(c->x, c->xb, dev_vec(c->g, bias), dev_vec(c->g, post_norm),
                                                   c->m->dim, c->m->norm_eps, c->m->residual_scale);
}

/* q_gate_split and q_gate_apply (a model whose attn_q carries gates):
   attn_q's output into the queries and gates; attention's output times
   sigmoid(gate) */
static void q_gate_split(const gpu_ctx *c, const infer__layer *L, int n) {
    size_t count = (size_t)n * L->q_dim;
    forget_act(c);
    INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_q_gate_split)(c->qg, c->q, c->gate, L->q_dim,
                                                                                    L->head_dim, count);
}
static void q_gate_apply(const gpu_ctx *c, const infer__layer *L, int n) {
    size_t count = (size_t)n * L->q_dim;
    forget_act(c);
    INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_q_gate_apply)(c->att, c->gate, count);
}

/* ---- Gemma 3n's steps (forward.c's, under the same names) ---- */

/* ple_inputs: each token's per-layer inputs, n_layers rows of ple_dim in
   c->ple: the embedding's product, times 1/sqrt(dim) and RMS-normed row by
   row, plus the token's row of ple_embd times sqrt(ple_dim), all times
   1/sqrt(2). */
static int ple_inputs(const gpu_ctx *c, const pass *p) {
    const infer_model *m = c->m;
    int all = m->ple_dim * m->n_layers;
    if (!product_run(c, m->ple_model_proj, c->x, m->dim, p->n, c->ple, all, 0)) return 0;
    forget_act(c);
    const dev_tensor &w = *dev(c->g, m->ple_embd);
    switch (w.type) {
#define INFER_CUDA_CASE(t) \
    case t: INFER_LAUNCH(p->n, 128, 0, c->stream, k_embed<t>)(w.p, w.row_bytes, w.n, p->tokens, sqrtf((float)m->ple_dim), c->ple_raw); break;
        INFER_CUDA_TYPES(INFER_CUDA_CASE)
#undef INFER_CUDA_CASE
    default: break;
    }
    INFER_LAUNCH(p->n * m->n_layers, 128, 0, c->stream, k_ple_mix)(c->ple, c->ple_raw, dev_vec(c->g, m->ple_proj_norm),
                                                                   m->ple_dim, 1.0f / sqrtf((float)m->dim),
                                                                   1.0f / sqrtf(2.0f), m->norm_eps);
    return 1;
}

/* altup_streams: stream 0 is the embedding x, stream j altup_up[j - 1] x
   rescaled to x's magnitude. */
static int altup_streams(const gpu_ctx *c, int n) {
    const infer_model *m = c->m;
    int dim = m->dim, na = m->n_altup;
    for (int j = 1; j < na; j++)
        if (!product_run(c, m->altup_up[j - 1], c->x, dim, n, c->alt + (size_t)j * dim, na * dim, 0)) return 0;
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_altup_streams)(c->x, c->alt, dim, na);
    return 1;
}

/* y = w x for AltUp's small matrices (forward.c's infer__matvec): a dot
   per row whatever the tokens, never cuBLAS; F16 weights, in a context
   that matches llama.cpp, in the order of the CPU's F16 dot there
   (f16_dot_ordered: llama.cpp's one-token order unless n is a multiple
   of 16). */
static void small_product(const gpu_ctx *c, const infer__tensor *t, const float *x, int ldx, int n_tok, float *y,
                          int ldy) {
    const dev_tensor &w = *dev(c->g, t);
    if (c->match && w.type == INFER_TYPE_F16) {
        dim3 grid((unsigned)((w.rows + 127) / 128), (unsigned)n_tok);
        quant_act<float>(c, ACT_F16, x, ldx, w.n, n_tok);
        INFER_LAUNCH(grid, 128, 0, c->stream, k_matvec_f16_ordered)(w.p, w.row_bytes, w.n, (int)w.rows,
                                                                    (const float *)c->act, w.n, y, ldy, 0, w.n % 16);
        return;
    }
    matvec(c, w, (int)w.rows, x, ldx, n_tok, y, ldy, 0, NULL, NULL, 0);
}

/* AltUp's router on streams x (rows of stride ldx): tanh(router
   (RMS-norm(x) / dim)) into alt_mod, then coefficients' product of it
   (coef: altup_predict's or altup_correct's) into alt_coef. The router's
   input goes through xb, as the CPU's. */
static void altup_modalities(const gpu_ctx *c, const infer__layer *L, const float *x, int ldx,
                             const infer__tensor *coef, int n) {
    const infer_model *m = c->m;
    int rows = (int)dev(c->g, coef)->rows;
    size_t count = (size_t)n * m->n_altup;
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_router_in)(x, ldx, dev_vec(c->g, L->altup_router_norm), c->xb, m->dim,
                                                     m->norm_eps, 1.0f / (float)m->dim);
    small_product(c, L->altup_router, c->xb, m->dim, n, c->alt_mod, m->n_altup);
    forget_act(c);
    INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_tanh)(c->alt_mod, count);
    small_product(c, coef, c->alt_mod, m->n_altup, n, c->alt_coef, rows);
    forget_act(c);
}

/* altup_predict: each stream's prediction from all of them; the active
   one's into x, to go through the layer. */
static void altup_predict(const gpu_ctx *c, const infer__layer *L, int n) {
    const infer_model *m = c->m;
    int dim = m->dim, na = m->n_altup;
    altup_modalities(c, L, c->alt + (size_t)m->altup_active * dim, na * dim, L->altup_predict, n);
    INFER_LAUNCH(n, 256, 0, c->stream, k_altup_predict)(c->alt, c->alt_coef, c->alt_pred, c->x, dim, na,
                                                         m->altup_active);
}

/* laurel: beside attention, from the normed input xb into c->laurel:
   xb + RMS-norm(laurel_r laurel_l xb). */
static int laurel(const gpu_ctx *c, const infer__layer *L, int n) {
    const infer_model *m = c->m;
    if (!product_run(c, L->laurel_l, c->xb, m->dim, n, c->laurel_mid, m->laurel_rank, 0) ||
        !product_run(c, L->laurel_r, c->laurel_mid, m->laurel_rank, n, c->laurel, m->dim, 0))
        return 0;
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_laurel_out)(c->laurel, c->xb, dev_vec(c->g, L->laurel_norm), m->dim,
                                                      m->norm_eps);
    return 1;
}

/* laurel_residual: after attention's residual, x = (x + LAuReL's output) / sqrt(2) */
static void laurel_residual(const gpu_ctx *c, int n) {
    size_t count = (size_t)n * c->m->dim;
    forget_act(c);
    INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_laurel_residual)(c->x, c->laurel, count,
                                                                                        1.0f / sqrtf(2.0f));
}

/* altup_correct: the streams corrected by the layer's output x. */
static void altup_correct(const gpu_ctx *c, const infer__layer *L, int n) {
    const infer_model *m = c->m;
    altup_modalities(c, L, c->x, m->dim, L->altup_correct, n);
    INFER_LAUNCH(n, 256, 0, c->stream, k_altup_correct)(c->alt, c->alt_pred, c->x, c->alt_coef, m->dim, m->n_altup,
                                                         m->altup_active);
}

/* ple_block: layer l's per-layer input: RMS-norm(proj (GELU(gate y) *
   the token's input for this layer)), y the layer's output x, added to x;
   with AltUp, y the active stream times correct_scale, added to every
   stream but the first. */
static int ple_block(const gpu_ctx *c, const infer__layer *L, int l, int n) {
    const infer_model *m = c->m;
    int dim = m->dim, ple = m->ple_dim, na = m->n_altup;
    size_t count = (size_t)n * dim, gated = (size_t)n * ple;
    forget_act(c);
    if (na)
        INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_ple_scale_in)(
            c->alt, dev_vec(c->g, L->altup_correct_scale), c->xb, dim, na, m->altup_active, count);
    if (!product_run(c, L->ple_gate, na ? c->xb : c->x, dim, n, c->ple_h, ple, 0)) return 0;
    forget_act(c);
    INFER_LAUNCH((unsigned)((gated + 255) / 256), 256, 0, c->stream, k_gelu_mul_rows)(
        c->ple_h, c->ple + (size_t)l * ple, m->n_layers * ple, ple, gated, c->g->gelu);
    if (!product_run(c, L->ple_proj, c->ple_h, ple, n, c->xb, dim, 0)) return 0;
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_ple_out)(c->xb, na ? c->alt : c->x, dev_vec(c->g, L->ple_norm), dim, na,
                                                   m->norm_eps);
    return 1;
}

/* altup_merge: the streams merged into x: stream j > 0 through
   altup_down[j - 1] (into alt_pred's rows), rescaled to the active
   stream's magnitude, added to stream 0 in order, the sum over n_altup. */
static int altup_merge(const gpu_ctx *c, int n) {
    const infer_model *m = c->m;
    int dim = m->dim, na = m->n_altup;
    for (int j = 1; j < na; j++)
        if (!product_run(c, m->altup_down[j - 1], c->alt + (size_t)j * dim, na * dim, n,
                         c->alt_pred + (size_t)(j - 1) * dim, na * dim, 0))
            return 0;
    forget_act(c);
    INFER_LAUNCH(n, 256, 0, c->stream, k_altup_merge)(c->alt, c->alt_pred, c->x, dim, na, m->altup_active);
    return 1;
}

/* recurrent: 3-7 in a recurrent layer (forward.c's infer__recurrent),
   from the normed input xb into out (xb, or added to x: the residual in
   the product): the input products; each run's causal convolution;
   Qwen3.5's q and k L2-normed; each run's scan, reading the state slot
   the run starts from and writing the one it ends in; the gated norm;
   the output product. */
static int recurrent(const gpu_ctx *c, const infer__layer *L, int l, const pass *p, float *out) {
    const infer_model *m = c->m;
    int n = p->n, dim = m->dim, ld = m->rec_in_dim, heads = m->ssm_heads, ds = m->ssm_state, n_ch = m->conv_ch;
    int kind = L->kind, width = kind == INFER__LAYER_SHORTCONV ? dim : m->ssm_inner;
    size_t at = c->rs.at[l], scan_at = at + m->rs_conv_floats;
    const float *w = dev_vec(c->g, L->conv), *bias = dev_vec(c->g, L->conv_bias);
    if (!p->runs) return 0; /* (the implementation always says the slots) */
    if (!product_run(c, L->rec_in, c->xb, dim, n, c->rin, ld, 0) ||
        (L->rec_gate && !product_run(c, L->rec_gate, c->xb, dim, n, c->rgate, m->ssm_inner, 0)) ||
        (L->rec_beta && (!product_run(c, L->rec_beta, c->xb, dim, n, c->rba, 2 * heads, 0) ||
                         !product_run(c, L->rec_alpha, c->xb, dim, n, c->rba + heads, 2 * heads, 0))))
        return 0;
    forget_act(c);
    {
        dim3 grid((unsigned)p->n_runs, (unsigned)((n_ch + 127) / 128));
        if (kind == INFER__LAYER_SHORTCONV) /* conv(b * x) into rout */
            INFER_LAUNCH(grid, 128, 0, c->stream, k_rec_conv)(c->rin + 2 * dim, c->rin, ld, c->rout, dim, n_ch,
                                                               m->ssm_conv, w, NULL, 0, p->runs, c->rs.mem, c->rs.slot, at);
        else if (kind == INFER__LAYER_MAMBA2) /* xBC, in place */
            INFER_LAUNCH(grid, 128, 0, c->stream, k_rec_conv)(c->rin + m->ssm_inner, NULL, ld, c->rin + m->ssm_inner, ld,
                                                               n_ch, m->ssm_conv, w, bias, 1, p->runs, c->rs.mem,
                                                               c->rs.slot, at);
        else /* q, k, v, in place */
            INFER_LAUNCH(grid, 128, 0, c->stream, k_rec_conv)(c->rin, NULL, ld, c->rin, ld, n_ch, m->ssm_conv, w, NULL, 1,
                                                               p->runs, c->rs.mem, c->rs.slot, at);
    }
    if (kind == INFER__LAYER_DELTANET)
        INFER_LAUNCH(dim3((unsigned)n, (unsigned)(2 * m->ssm_groups)), 32, 0, c->stream, k_l2norm)(c->rin, ld, ds,
                                                                                                   m->norm_eps);
    if (kind == INFER__LAYER_MAMBA2) {
        int hd = m->ssm_inner / heads;
        dim3 grid((unsigned)p->n_runs, (unsigned)heads, (unsigned)((hd + 63) / 64));
        INFER_LAUNCH(grid, 64, 0, c->stream, k_rec_mamba2)(
            c->rin + m->ssm_inner, c->rin + m->ssm_inner + n_ch, ld, c->rout, m->ssm_inner, m->ssm_inner, heads,
            m->ssm_groups, ds, dev_vec(c->g, L->ssm_a), dev_vec(c->g, L->ssm_d), dev_vec(c->g, L->dt_bias), p->runs,
            c->rs.mem, c->rs.slot, scan_at);
        if (n >= INFER__REC_CHUNK_MIN) /* a run that long: not in generation's steps */
            INFER_LAUNCH(dim3((unsigned)p->n_runs, (unsigned)heads), 64, 0, c->stream, k_rec_mamba2_chunked)(
                c->rin + m->ssm_inner, c->rin + m->ssm_inner + n_ch, ld, c->rout, m->ssm_inner, m->ssm_inner, heads,
                m->ssm_groups, ds, dev_vec(c->g, L->ssm_a), dev_vec(c->g, L->ssm_d), dev_vec(c->g, L->dt_bias), p->runs,
                c->rs.mem, c->rs.slot, scan_at);
    } else if (kind == INFER__LAYER_DELTANET) {
        dim3 grid((unsigned)p->n_runs, (unsigned)heads, (unsigned)((ds + 63) / 64));
        INFER_LAUNCH(grid, 64, 0, c->stream, k_rec_deltanet)(c->rin, ld, c->rba, 2 * heads, c->rout, m->ssm_inner, heads,
                                                            m->ssm_groups, ds, dev_vec(c->g, L->ssm_a),
                                                            dev_vec(c->g, L->dt_bias), p->runs, c->rs.mem, c->rs.slot,
                                                            scan_at);
        if (n >= INFER__REC_CHUNK_MIN)
            INFER_LAUNCH(dim3((unsigned)p->n_runs, (unsigned)heads), 128, 0, c->stream, k_rec_deltanet_chunked)(
                c->rin, ld, c->rba, 2 * heads, c->rout, m->ssm_inner, heads, m->ssm_groups, ds, dev_vec(c->g, L->ssm_a),
                dev_vec(c->g, L->dt_bias), p->runs, c->rs.mem, c->rs.slot, scan_at);
    }
    if (kind == INFER__LAYER_SHORTCONV) { /* c * y */
        size_t count = (size_t)n * dim;
        INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_mul_rows)(c->rout, c->rin + dim, ld, dim, count);
    } else if (kind == INFER__LAYER_MAMBA2) { /* y * silu(z), RMS-normed per group */
        int ng = m->ssm_inner / m->ssm_groups;
        INFER_LAUNCH(dim3((unsigned)n, (unsigned)m->ssm_groups), 128, 0, c->stream, k_gated_norm)(
            c->rout, m->ssm_inner, c->rin, ld, dev_vec(c->g, L->ssm_norm), ng, ng, m->norm_eps, 1);
    } else { /* each head RMS-normed, times silu(z) */
        INFER_LAUNCH(dim3((unsigned)n, (unsigned)heads), 128, 0, c->stream, k_gated_norm)(
            c->rout, m->ssm_inner, c->rgate, m->ssm_inner, dev_vec(c->g, L->ssm_norm), 0, ds, m->norm_eps, 0);
    }
    return product_run(c, L->rec_out, c->rout, width, n, out, dim, out == c->x);
}

/* output: the selected rows' final norm, then the logits (soft-capped,
   scaled) or,
   given hidden, the normed rows themselves */
static int output(const gpu_ctx *c, const pass *p, int hidden) {
    const infer_model *m = c->m;
    norm_rows(c, c->x, p->sel, m->output_norm, c->xb, p->n_sel, hidden ? NULL : m->output);
    if (hidden) return 1;
    if (!product_run(c, m->output, c->xb, m->dim, p->n_sel, c->logits, m->n_vocab, 0)) return 0;
    if (m->final_softcap > 0) {
        size_t count = (size_t)p->n_sel * m->n_vocab;
        INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_softcap)(c->logits, count, m->final_softcap);
    }
    if (m->logit_scale > 0) {
        size_t count = (size_t)p->n_sel * m->n_vocab;
        INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_scale)(c->logits, count, m->logit_scale);
    }
    return 1;
}

/* Queues the pass on the context's stream: only launches (and cuBLAS
   calls), so the same calls run directly or under a graph's capture.
   With should_stop (never under capture), each layer is waited for and
   the callback asked before the next. Returns INFER_BACKEND_*. */
static int enqueue_forward(const gpu_ctx *c, const pass *p, int hidden, int (*should_stop)(void *), void *stop_user) {
    const infer_model *m = c->m;
    int n = p->n, routed = 0;
    embed(c, p);
    if (m->ple_dim && !ple_inputs(c, p)) return INFER_BACKEND_FAILED;
    if (m->n_altup && !altup_streams(c, n)) return INFER_BACKEND_FAILED;
    for (int l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        /* residual: added by the product itself where nothing comes between */
        int scaled = m->residual_scale > 0, apart = L->bo || L->post_attn_norm || scaled;
        if (m->n_altup) altup_predict(c, L, n);
        if (L->kind != INFER__LAYER_ATTENTION) { /* a recurrent layer's state in place of attention */
            norm_rows(c, c->x, NULL, L->attn_norm, c->xb, n, L->laurel_l ? L->laurel_l : L->rec_in);
            if (L->laurel_l && !laurel(c, L, n)) return INFER_BACKEND_FAILED;
            if (!recurrent(c, L, l, p, apart ? c->xb : c->x)) return INFER_BACKEND_FAILED;
        } else {
            norm_rows(c, c->x, NULL, L->attn_norm, c->xb, n, L->laurel_l ? L->laurel_l : L->wq);
            if (L->laurel_l && !laurel(c, L, n)) return INFER_BACKEND_FAILED;
            /* k and v only where the layer keeps a cache of its own */
            /* (rows of the layer's widths; v is k where the layer has no wv) */
            if (!product_run(c, L->wq, c->xb, m->dim, n, m->q_gate ? c->qg : c->q, m->q_gate ? 2 * L->q_dim : L->q_dim, 0) ||
                (L->kv_layer == l && (!product_run(c, L->wk, c->xb, m->dim, n, c->k, L->kv_dim, 0) ||
                                      (L->wv && !product_run(c, L->wv, c->xb, m->dim, n, c->v, L->kv_dim, 0)))))
                return INFER_BACKEND_FAILED;
            if (m->q_gate) q_gate_split(c, L, n);
            qk_prepare(c, L, l, p); /* and kv_store */
            attention(c, L, p);
            if (m->q_gate) q_gate_apply(c, L, n);
            if (!product_run(c, L->wo, c->att, L->q_dim, n, apart ? c->xb : c->x, m->dim, !apart))
                return INFER_BACKEND_FAILED;
        }
        if (apart) residual(c, L->bo, L->post_attn_norm, n);
        if (L->laurel_l) laurel_residual(c, n);
        norm_rows(c, c->x, NULL, L->ffn_norm, c->xb, n, L->w_gate ? L->w_gate : L->ffn_router);
        if (!(L->ffn_router && L->w_gate ? moe_dense_ffn(c, L, n, !routed++)
              : L->ffn_router          ? moe_ffn(c, L, c->xb, n, !routed++)
                                       : ffn(c, L, n, L->post_ffn_norm || scaled ? c->xb : c->x)))
            return INFER_BACKEND_FAILED;
        if (L->ffn_router || L->post_ffn_norm || scaled) residual(c, NULL, L->post_ffn_norm, n);
        if (m->n_altup) altup_correct(c, L, n);
        if (L->ple_gate && !ple_block(c, L, l, n)) return INFER_BACKEND_FAILED;
        if (L->out_scale) { /* the layer's output times its scale (a scalar) */
            size_t count = (size_t)n * m->dim;
            forget_act(c);
            INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, c->stream, k_scale)(c->x, count,
                                                                                       *(const float *)L->out_scale->data);
        }
        if (should_stop && (cudaStreamSynchronize(c->stream) != cudaSuccess || should_stop(stop_user)))
            return INFER_BACKEND_CANCELLED;
    }
    if (p->n_sel && m->n_altup && !altup_merge(c, n)) return INFER_BACKEND_FAILED;
    return p->n_sel && !output(c, p, hidden) ? INFER_BACKEND_FAILED : INFER_BACKEND_OK;
}

/* A decode step: every token a sequence of its own, each wanting logits. */
static int is_decode(const gpu_ctx *c, const infer_backend_batch *b) {
    if (b->hidden || b->n_sel != b->n || b->n > c->kv.n_seq) return 0;
    for (int t = 1; t < b->n; t++)
        if (b->seq[t] == b->seq[t - 1]) return 0;
    return 1;
}

/* The decode graph for n tokens: captured once (the inputs copied in, the
   pass, the logits copied out), then replayed. NULL on failure. */
static cudaGraphExec_t decode_graph_for(gpu_ctx *c, const pass *p, size_t in_bytes, char *msg, size_t size) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int rc;
    for (int i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].n == p->n) return c->graphs[i].exec;
    if (!ok(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture", msg, size))
        return NULL;
    cudaMemcpyAsync(c->d_in, c->h_in, in_bytes, cudaMemcpyHostToDevice, c->stream);
    rc = enqueue_forward(c, p, 0, NULL, NULL);
    cudaMemcpyAsync(c->h_out, c->logits, (size_t)p->n * c->m->n_vocab * sizeof(float), cudaMemcpyDeviceToHost,
                    c->stream);
    if (!ok(cudaStreamEndCapture(c->stream, &graph), "cudaStreamEndCapture", msg, size)) return NULL;
    if (rc != INFER_BACKEND_OK) {
        say(msg, size, "a product failed while the decode step was captured");
        cudaGraphDestroy(graph);
        return NULL;
    }
    if (!ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate", msg, size)) exec = NULL;
    cudaGraphDestroy(graph);
    if (!exec) return NULL;
    if (c->n_graphs == MAX_GRAPHS) { /* the oldest goes */
        cudaGraphExecDestroy(c->graphs[0].exec);
        memmove(c->graphs, c->graphs + 1, (MAX_GRAPHS - 1) * sizeof c->graphs[0]);
        c->n_graphs--;
    }
    c->graphs[c->n_graphs].n = p->n;
    c->graphs[c->n_graphs++].exec = exec;
    return exec;
}

/* The pass's routing margins into b->route_margin, where asked (tests). */
static int copy_margins(const gpu_ctx *c, const infer_backend_batch *b, char *msg, size_t size) {
    if (!b->route_margin) return INFER_BACKEND_OK;
    if (!c->route_margin) {
        for (int t = 0; t < b->n; t++) b->route_margin[t] = INFINITY;
        return INFER_BACKEND_OK;
    }
    return ok(cudaMemcpy(b->route_margin, c->route_margin, (size_t)b->n * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy", msg, size)
               ? INFER_BACKEND_OK
               : INFER_BACKEND_FAILED;
}

extern "C" int infer_cuda_forward(void *gc, const infer_backend_batch *b, char *msg, size_t size) {
    gpu_ctx *c = (gpu_ctx *)gc;
    const infer_model *m = c->m;
    pass p;
    size_t in_bytes;
    int rc;
    if (b->n < 1 || b->n > c->n_batch || b->n_sel < 0 || b->n_sel > b->n) {
        say(msg, size, "a batch of %d tokens (%d selected) does not fit the context's %d", b->n, b->n_sel, c->n_batch);
        return INFER_BACKEND_FAILED;
    }
    if (!ok(cudaSetDevice(c->g->device), "cudaSetDevice", msg, size)) return INFER_BACKEND_FAILED;
    if (is_decode(c, b)) { /* one launch: the graph */
        cudaGraphExec_t exec;
        in_bytes = set_inputs(c, b, 1, &p);
        exec = decode_graph_for(c, &p, in_bytes, msg, size);
        if (!exec) return INFER_BACKEND_FAILED;
        if (!ok(cudaGraphLaunch(exec, c->stream), "cudaGraphLaunch", msg, size) ||
            !ok(cudaStreamSynchronize(c->stream), "decode step", msg, size))
            return INFER_BACKEND_FAILED;
        memcpy(b->logits, c->h_out, (size_t)b->n * m->n_vocab * sizeof(float));
        return copy_margins(c, b, msg, size);
    }
    in_bytes = set_inputs(c, b, 0, &p);
    if (!ok(cudaMemcpyAsync(c->d_in, c->h_in, in_bytes, cudaMemcpyHostToDevice, c->stream), "cudaMemcpyAsync", msg, size))
        return INFER_BACKEND_FAILED;
    rc = enqueue_forward(c, &p, b->hidden != NULL, b->should_stop, b->stop_user);
    if (rc == INFER_BACKEND_CANCELLED) {
        say(msg, size, "cancelled");
        return rc;
    }
    if (rc != INFER_BACKEND_OK) {
        say(msg, size, "a cuBLAS product failed");
        return rc;
    }
    if (!ok(cudaGetLastError(), "kernel launch", msg, size)) return INFER_BACKEND_FAILED;
    if (b->n_sel && b->hidden &&
        !ok(cudaMemcpyAsync(b->hidden, c->xb, (size_t)b->n_sel * m->dim * sizeof(float), cudaMemcpyDeviceToHost,
                            c->stream),
            "cudaMemcpyAsync", msg, size))
        return INFER_BACKEND_FAILED;
    if (b->n_sel && !b->hidden &&
        !ok(cudaMemcpyAsync(b->logits, c->logits, (size_t)b->n_sel * m->n_vocab * sizeof(float), cudaMemcpyDeviceToHost,
                            c->stream),
            "cudaMemcpyAsync", msg, size))
        return INFER_BACKEND_FAILED;
    if (!ok(cudaStreamSynchronize(c->stream), "forward pass", msg, size)) return INFER_BACKEND_FAILED;
    return copy_margins(c, b, msg, size);
}
