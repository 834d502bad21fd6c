/* infer_cuda.cu - the CUDA backend of infer.h: the llama forward pass on an
   NVIDIA GPU, behind the entry points declared in infer.h's backend part
   (src/backend.h). Build: compile the implementation with INFER_CUDA and
   link this file, compiled with nvcc (CMake: -DINFER_CUDA=ON).

   What runs here, per batch of tokens:
     embedding rows (dequantized from the file's format) -> per layer:
     RMSNorm -> q, k, v products -> RoPE, K and V stored in the F16 cache ->
     attention over the cache (tiles of 32 keys per warp, four warps a
     head: the softmax's max and sum found online, then the probabilities
     times the values) -> output product added to the residual -> RMSNorm
     -> gate and up products -> SiLU(gate) * up -> down product added to
     the residual -> final RMSNorm -> logits.
   The weights are uploaded once, in their GGUF blocks; every product
   dequantizes 32 values at a time in registers and accumulates in fp32
   (one warp per output row; a prompt batch reuses each dequantized chunk
   for 8 tokens). A single token (decode) replays a CUDA graph captured
   once per context: the token and position are read from device memory,
   so one token is one launch and one copy of the logits back.
   The numerics follow forward.c: activations rounded to the format the
   CPU dots each weight format with, RMSNorm (x * scale) * w, RoPE angles
   stepped by multiplication and divided by rope_freqs, q and the softmax
   probabilities rounded to F16 where they meet the F16 cache.
   tests/cuda_emu.h compiles this file for the CPU too (INFER_LAUNCH and
   INFER_DYNAMIC_SHARED are the two places that needs). */
#define INFER_BACKEND_INTERFACE
#include "infer.h"

#ifndef INFER_CUDA_EMULATE /* tests/cuda_emu.h runs this file on the CPU */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
/* kernel<<<grid, block, shared, stream>>>(args), written so the emulation
   can take the same calls */
#define INFER_LAUNCH(grid, block, shared, stream, ...) __VA_ARGS__<<<grid, block, shared, stream>>>
#define INFER_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
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

/* ---- the weight formats ------------------------------------------------ */

/* Every format the backend reads; X(type) for each. */
#define INFER_CUDA_TYPES(X)                                                                        \
    X(INFER_TYPE_F32) X(INFER_TYPE_F16) X(INFER_TYPE_BF16) X(INFER_TYPE_Q8_0) X(INFER_TYPE_Q4_0)   \
    X(INFER_TYPE_Q4_1) X(INFER_TYPE_Q5_0) X(INFER_TYPE_Q5_1) X(INFER_TYPE_IQ4_NL)                  \
    X(INFER_TYPE_Q2_K) X(INFER_TYPE_Q3_K) X(INFER_TYPE_Q4_K) X(INFER_TYPE_Q5_K) X(INFER_TYPE_Q6_K) \
    X(INFER_TYPE_IQ4_XS)

/* Values and bytes per block; 0 for a format this file does not read. */
static int block_of(int type, int *bytes) {
    switch (type) {
    case INFER_TYPE_F32: *bytes = 4; return 1;
    case INFER_TYPE_F16: *bytes = 2; return 1;
    case INFER_TYPE_BF16: *bytes = 2; return 1;
    case INFER_TYPE_Q8_0: *bytes = 34; return 32;
    case INFER_TYPE_Q4_0: *bytes = 18; return 32;
    case INFER_TYPE_Q4_1: *bytes = 20; return 32;
    case INFER_TYPE_Q5_0: *bytes = 22; return 32;
    case INFER_TYPE_Q5_1: *bytes = 24; return 32;
    case INFER_TYPE_IQ4_NL: *bytes = 18; return 32;
    case INFER_TYPE_Q2_K: *bytes = 84; return 256;
    case INFER_TYPE_Q3_K: *bytes = 110; return 256;
    case INFER_TYPE_Q4_K: *bytes = 144; return 256;
    case INFER_TYPE_Q5_K: *bytes = 176; return 256;
    case INFER_TYPE_Q6_K: *bytes = 210; return 256;
    case INFER_TYPE_IQ4_XS: *bytes = 136; return 256;
    default: *bytes = 0; return 0;
    }
}

/* A format's name for messages (the implementation's infer_type_name may
   be static, INFER_STATIC, so this file keeps its own few). */
static const char *type_name(int t) {
    switch (t) {
    case INFER_TYPE_Q8_1: return "Q8_1";
    case INFER_TYPE_Q8_K: return "Q8_K";
    default: return "an unknown format";
    }
}

__constant__ float k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Bytes are read one at a time: blocks of 18, 22, 110 ... bytes leave the
   fields of most blocks unaligned. */
__device__ __forceinline__ float ld_half(const uint8_t *p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

/* deq32<T>(row, j, n, v): values 32j .. 32j+31 of a row of n values in
   format T, as floats (zeros past n, which only the float formats can
   reach: the quantized ones have whole blocks). Each is the arithmetic of
   the format's to_float in quants.c / quants_k.c. */
template <int T> __device__ __forceinline__ void deq32(const uint8_t *row, int j, int n, float *v);

template <> __device__ __forceinline__ void deq32<INFER_TYPE_F32>(const uint8_t *row, int j, int n, float *v) {
    const float *r = (const float *)row + 32 * j;
    int m = n - 32 * j;
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = i < m ? r[i] : 0.0f;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_F16>(const uint8_t *row, int j, int n, float *v) {
    const __half *r = (const __half *)row + 32 * j;
    int m = n - 32 * j;
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = i < m ? __half2float(r[i]) : 0.0f;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_BF16>(const uint8_t *row, int j, int n, float *v) {
    const unsigned short *r = (const unsigned short *)row + 32 * j;
    int m = n - 32 * j;
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = i < m ? __uint_as_float((unsigned)r[i] << 16) : 0.0f;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q8_0>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 34 * j;
    const int8_t *q = (const int8_t *)(b + 2);
    float d = ld_half(b);
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = q[i] * d;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q4_0>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 18 * j, *q = b + 2;
    float d = ld_half(b);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        v[i] = ((q[i] & 0x0f) - 8) * d;
        v[i + 16] = ((q[i] >> 4) - 8) * d;
    }
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q4_1>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 20 * j, *q = b + 4;
    float d = ld_half(b), m = ld_half(b + 2);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        v[i] = (q[i] & 0x0f) * d + m;
        v[i + 16] = (q[i] >> 4) * d + m;
    }
}

__device__ __forceinline__ unsigned ld_u32(const uint8_t *p) {
    return (unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q5_0>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 22 * j, *q = b + 6;
    float d = ld_half(b);
    unsigned qh = ld_u32(b + 2);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        v[i] = ((int)((q[i] & 0x0f) | ((qh >> i) & 1) << 4) - 16) * d;
        v[i + 16] = ((int)((q[i] >> 4) | ((qh >> (i + 16)) & 1) << 4) - 16) * d;
    }
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q5_1>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 24 * j, *q = b + 8;
    float d = ld_half(b), m = ld_half(b + 2);
    unsigned qh = ld_u32(b + 4);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        v[i] = (int)((q[i] & 0x0f) | ((qh >> i) & 1) << 4) * d + m;
        v[i + 16] = (int)((q[i] >> 4) | ((qh >> (i + 16)) & 1) << 4) * d + m;
    }
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_IQ4_NL>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 18 * j, *q = b + 2;
    float d = ld_half(b);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        v[i] = d * k_iq4nl[q[i] & 0xf];
        v[i + 16] = d * k_iq4nl[q[i] >> 4];
    }
}

/* The 256-value formats: chunk j is sub-block s = j % 8 of super-block j / 8. */

/* Q2_K: 16-value sub-blocks with a 4-bit scale and min each; chunk s holds
   sub-blocks 8h + 2(s%4) and the next (h = s / 4), their 2-bit values at
   bits 2(s%4) of qs[32h + i]. */
template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q2_K>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 84 * (j / 8);
    int s = j % 8, h = s / 4, shift = 2 * (s % 4);
    const uint8_t *sc = b + 8 * h + 2 * (s % 4), *q = b + 16 + 32 * h;
    float d = ld_half(b + 80), dmin = ld_half(b + 82);
#pragma unroll
    for (int i = 0; i < 32; i++) {
        int k = sc[i / 16];
        v[i] = d * (k & 0xF) * ((q[i] >> shift) & 3) - dmin * (k >> 4);
    }
}

/* Q3_K: as Q2_K's layout, a third bit in hmask, 6-bit signed scales. */
__device__ __forceinline__ int q3k_scale(int j, const uint8_t *s) {
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q3_K>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 110 * (j / 8);
    int s = j % 8, h = s / 4, shift = 2 * (s % 4), hbit = 4 * h + s % 4;
    const uint8_t *hm = b, *q = b + 32 + 32 * h, *sc = b + 96;
    float d = ld_half(b + 108);
    float d0 = d * q3k_scale(8 * h + 2 * (s % 4), sc), d1 = d * q3k_scale(8 * h + 2 * (s % 4) + 1, sc);
#pragma unroll
    for (int i = 0; i < 32; i++)
        v[i] = (i < 16 ? d0 : d1) * (((q[i] >> shift) & 3) - ((hm[i] >> hbit) & 1 ? 0 : 4));
}

/* Q4_K / Q5_K sub-block s's 6-bit scale and min. */
__device__ __forceinline__ void k4_scale_min(int s, const uint8_t *q, int *d, int *m) {
    if (s < 4) {
        *d = q[s] & 63;
        *m = q[s + 4] & 63;
    } else {
        *d = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
        *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    }
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q4_K>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 144 * (j / 8);
    int s = j % 8, sc, mn, shift = 4 * (s & 1);
    const uint8_t *q = b + 16 + 32 * (s / 2);
    float d = ld_half(b), dmin = ld_half(b + 2), d1, m1;
    k4_scale_min(s, b + 4, &sc, &mn);
    d1 = d * sc, m1 = dmin * mn;
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = d1 * ((q[i] >> shift) & 0xF) - m1;
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q5_K>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 176 * (j / 8);
    int s = j % 8, sc, mn, shift = 4 * (s & 1);
    const uint8_t *qh = b + 16, *q = b + 48 + 32 * (s / 2);
    float d = ld_half(b), dmin = ld_half(b + 2), d1, m1;
    k4_scale_min(s, b + 4, &sc, &mn);
    d1 = d * sc, m1 = dmin * mn;
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = d1 * (((q[i] >> shift) & 0xF) | ((qh[i] >> s) & 1) << 4) - m1;
}

/* Q6_K: value 128h + 32k + i: low 4 bits in a nibble of ql, high 2 in qh;
   16-value sub-blocks with int8 scales. */
template <> __device__ __forceinline__ void deq32<INFER_TYPE_Q6_K>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 210 * (j / 8);
    int s = j % 8, h = s / 4, k = s % 4;
    const uint8_t *ql = b + 64 * h + 32 * (k % 2), *qh = b + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + 2 * k;
    int lshift = 4 * (k / 2), hshift = 2 * k;
    float d = ld_half(b + 208);
#pragma unroll
    for (int i = 0; i < 32; i++) {
        int q = ((ql[i] >> lshift) & 0xF) | ((qh[i] >> hshift) & 3) << 4;
        v[i] = d * sc[i / 16] * (q - 32);
    }
}

template <> __device__ __forceinline__ void deq32<INFER_TYPE_IQ4_XS>(const uint8_t *row, int j, int, float *v) {
    const uint8_t *b = row + 136 * (j / 8);
    int s = j % 8;
    unsigned sh = (unsigned)(b[2] | b[3] << 8);
    int scale = ((((b[4 + s / 2] >> (4 * (s % 2))) & 0xF) | ((sh >> (2 * s)) & 3) << 4)) - 32;
    const uint8_t *q = b + 8 + 16 * s;
    float dl = ld_half(b) * scale;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        v[i] = dl * k_iq4nl[q[i] & 0xF];
        v[i + 16] = dl * k_iq4nl[q[i] >> 4];
    }
}

/* ---- kernels ----------------------------------------------------------- */

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

/* Y[t][r] (+)= W[r] . X[t]: one warp per row r, NT tokens per block row;
   lane l takes chunks l, l + 32, ... of 32 values, dequantizes each once
   and dots it with every token's activations. */
template <int T, int NT>
__global__ void k_matmul(const uint8_t *__restrict__ W, size_t row_bytes, int n, int rows,
                         const float *__restrict__ X, int ldx, int n_tok, float *__restrict__ Y, int ldy, int add) {
    int lane = threadIdx.x % 32, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, t0 = blockIdx.y * NT;
    int n_chunks = (n + 31) / 32;
    float acc[NT];
    const uint8_t *w;
    if (r >= rows) return; /* the whole warp leaves together */
    w = W + (size_t)r * row_bytes;
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

/* X[t] = row ids[t] of W, dequantized: one block per token. */
template <int T>
__global__ void k_get_rows(const uint8_t *__restrict__ W, size_t row_bytes, int n, const int *__restrict__ ids,
                           float *__restrict__ X) {
    const uint8_t *w = W + (size_t)ids[blockIdx.x] * row_bytes;
    float *x = X + (size_t)blockIdx.x * n;
    for (int j = threadIdx.x; j < (n + 31) / 32; j += blockDim.x) {
        float v[32];
        int m = min(32, n - 32 * j);
        deq32<T>(w, j, n, v);
        for (int i = 0; i < m; i++) x[32 * j + i] = v[i];
    }
}

/* The sum of x over a block of up to 1024 threads (a multiple of 32), in
   every thread. */
__device__ float block_sum(float x) {
    __shared__ float part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    x = warp_sum(x);
    __syncthreads(); /* part may still be read by an earlier call */
    if (lane == 0) part[warp] = x;
    __syncthreads();
    x = lane < n_warps ? part[lane] : 0.0f;
    return warp_sum(x);
}

/* Y[row] = (X[row] * 1/sqrt(mean(X[row]^2) + eps)) * w: one block per row. */
__global__ void k_rmsnorm(const float *__restrict__ X, const float *__restrict__ w, float *__restrict__ Y, int n,
                          float eps) {
    const float *x = X + (size_t)blockIdx.x * n;
    float *y = Y + (size_t)blockIdx.x * n;
    float ss = 0.0f, scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += x[i] * x[i];
    ss = block_sum(ss);
    scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = (x[i] * scale) * w[i];
}

/* Element e of a row of heads (size hd) after RoPE at position pos: pairs
   (2i, 2i+1) of the first n_rot values of each head turn by
   pos * step^i / freqs[i], the angle stepped by multiplication as on the
   CPU. */
__device__ __forceinline__ float rope_at(const float *x, int e, int hd, int n_rot, int pos, float step,
                                         const float *freqs) {
    int i = e % hd, p = i / 2;
    const float *pair;
    float theta = (float)pos, a, c, s;
    if (i >= n_rot) return x[e];
    for (int k = 0; k < p; k++) theta *= step;
    a = freqs ? theta / freqs[p] : theta;
    c = cosf(a);
    s = sinf(a);
    pair = x + (e - i) + 2 * p;
    return (i & 1) ? pair[0] * s + pair[1] * c : pair[0] * c - pair[1] * s;
}

/* Token t (one block each) at position pos[0] + t: q turned into QR; k
   turned and v copied into the layer's F16 cache. */
__global__ void k_rope_store(const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
                             float *__restrict__ QR, __half *__restrict__ kc, __half *__restrict__ vc,
                             const int *__restrict__ pos0, int dim, int kv_dim, int hd, int n_rot, float step,
                             const float *__restrict__ freqs) {
    int t = blockIdx.x, pos = pos0[0] + t;
    const float *q = Q + (size_t)t * dim, *k = K + (size_t)t * kv_dim, *v = V + (size_t)t * kv_dim;
    for (int e = threadIdx.x; e < dim; e += blockDim.x) QR[(size_t)t * dim + e] = rope_at(q, e, hd, n_rot, pos, step, freqs);
    for (int e = threadIdx.x; e < kv_dim; e += blockDim.x) {
        kc[(size_t)pos * kv_dim + e] = __float2half_rn(rope_at(k, e, hd, n_rot, pos, step, freqs));
        vc[(size_t)pos * kv_dim + e] = __float2half_rn(v[e]);
    }
}

#define ATT_WARPS 4
#define ATT_MAX_HD 256

/* Attention of token t (blockIdx.x) head h (blockIdx.y) over cache
   positions 0 .. pos0[0] + t, in two passes over tiles of 32 keys, warp w
   taking tiles w, w + 4, ...: the first finds each warp's running max and
   sum of the softmax (online, rescaled as the max grows; each lane scores
   one key of a tile), merged across the warps; the second scores the keys
   again and adds the values weighted by the probabilities, normalised and
   rounded to F16 as on the CPU (and in llama.cpp's CPU path), each lane
   owning dimensions lane, lane + 32, ... */
__device__ __forceinline__ float att_score(const float *q, const __half *k, int hd, float scale) {
    float s = 0.0f;
    for (int d = 0; d < hd; d++) s += q[d] * __half2float(k[d]);
    return s * scale;
}

__global__ void k_attention(const float *__restrict__ QR, const __half *__restrict__ kc,
                            const __half *__restrict__ vc, float *__restrict__ out, const int *__restrict__ pos0,
                            int dim, int kv_dim, int hd, int group, float scale) {
    INFER_DYNAMIC_SHARED(float, sh); /* q[hd], then per warp: acc[hd], max, sum */
    float *q = sh, *part = sh + hd;
    int t = blockIdx.x, h = blockIdx.y, kvh = h / group;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int n_keys = pos0[0] + t + 1;
    const __half *kh = kc + (size_t)kvh * hd, *vh = vc + (size_t)kvh * hd;
    float *mine = part + (size_t)warp * (hd + 2);
    float acc[ATT_MAX_HD / 32], mx = -INFINITY, sum = 0.0f, m_all = -INFINITY, inv = 0.0f;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) /* rounded to F16, as the CPU does */
        q[d] = __half2float(__float2half_rn(QR[(size_t)t * dim + (size_t)h * hd + d]));
    __syncthreads();
    /* pass 1: max and sum */
    for (int tile = 32 * warp; tile < n_keys; tile += 32 * ATT_WARPS) {
        int p = tile + lane;
        float s = p < n_keys ? att_score(q, kh + (size_t)p * kv_dim, hd, scale) : -INFINITY;
        float m_new = fmaxf(mx, warp_max(s));
        sum = sum * expf(mx - m_new) + warp_sum(p < n_keys ? expf(s - m_new) : 0.0f); /* 0 * sum at first */
        mx = m_new;
    }
    if (lane == 0) mine[hd] = mx, mine[hd + 1] = sum;
    __syncthreads();
    {
        float l_all = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++) m_all = fmaxf(m_all, part[w * (hd + 2) + hd]);
        for (int w = 0; w < ATT_WARPS; w++) /* a warp that saw no keys adds 0 */
            l_all += part[w * (hd + 2) + hd + 1] * expf(part[w * (hd + 2) + hd] - m_all);
        inv = 1.0f / l_all;
    }
    /* pass 2: probabilities times values */
#pragma unroll
    for (int i = 0; i < ATT_MAX_HD / 32; i++) acc[i] = 0.0f;
    for (int tile = 32 * warp; tile < n_keys; tile += 32 * ATT_WARPS) {
        int p = tile + lane, cnt = min(32, n_keys - tile);
        float e = 0.0f;
        if (p < n_keys)
            e = __half2float(__float2half_rn(expf(att_score(q, kh + (size_t)p * kv_dim, hd, scale) - m_all) * inv));
        for (int kk = 0; kk < cnt; kk++) {
            float a = __shfl_sync(FULL_MASK, e, kk);
            const __half *vr = vh + (size_t)(tile + kk) * kv_dim;
#pragma unroll
            for (int i = 0; i < ATT_MAX_HD / 32; i++) {
                int d = lane + 32 * i;
                if (d < hd) acc[i] += a * __half2float(vr[d]);
            }
        }
    }
    __syncthreads(); /* every warp has read the maxima and sums */
#pragma unroll
    for (int i = 0; i < ATT_MAX_HD / 32; i++) {
        int d = lane + 32 * i;
        if (d < hd) mine[d] = acc[i];
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++) o += part[w * (hd + 2) + d];
        out[(size_t)t * dim + (size_t)h * hd + d] = o;
    }
}

/* The activations a product's weights meet, as the CPU rounds them: it
   quantizes them to the format its dot product for the weights takes
   (llama.cpp's vec_dot_type), so the GPU does the same and stays within
   rounding of the CPU (and of llama.cpp) instead of being more exact than
   both. Y[t] = X[t] through that format, as floats: one warp per group of
   32 values (256 for Q8_K), group blockIdx.x of token blockIdx.y. */
enum { ACT_F32, ACT_F16, ACT_BF16, ACT_Q8_0, ACT_Q8_1, ACT_Q8_K };

template <int A> __device__ void quant_act_row(const float *__restrict__ x, int n, float *__restrict__ y) {
    int lane = threadIdx.x % 32;
    if (A == ACT_F16 || A == ACT_BF16) {
        int i = 32 * blockIdx.x + lane;
        if (i < n) {
            float v = x[i];
            if (A == ACT_F16) {
                v = __half2float(__float2half_rn(v));
            } else if (v == v) { /* bf16, rounded to nearest even (a NaN stays one) */
                unsigned u = __float_as_uint(v);
                v = __uint_as_float(((u + 0x7fffu + ((u >> 16) & 1)) >> 16) << 16);
            }
            y[i] = v;
        }
    } else if (A == ACT_Q8_0 || A == ACT_Q8_1) {
        int i = 32 * blockIdx.x + lane;
        float v = x[i], amax = fabsf(v), d, id, dq;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(FULL_MASK, amax, o));
        d = amax / 127.0f;
        if (A == ACT_Q8_0) id = amax != 0.0f ? 127.0f / amax : 0.0f;
        else id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) id = 0.0f;
        dq = __half2float(__float2half_rn(d)); /* the scale is stored as F16 */
        y[i] = (A == ACT_Q8_0 ? nearbyintf(v * id) : roundf(v * id)) * dq;
    } else { /* Q8_K: 256 values, 8 a lane; the value of largest magnitude (the first of equals) becomes -127 */
        int base = 256 * blockIdx.x;
        float amax = 0.0f, mx = 0.0f, iscale;
        int at = 1 << 30;
        for (int k = 0; k < 8; k++) {
            int i = base + 32 * k + lane;
            float ax = fabsf(x[i]);
            if (ax > amax) amax = ax, mx = x[i], at = i;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float a2 = __shfl_xor_sync(FULL_MASK, amax, o), m2 = __shfl_xor_sync(FULL_MASK, mx, o);
            int at2 = (int)__shfl_xor_sync(FULL_MASK, (float)at, o);
            if (a2 > amax || (a2 == amax && at2 < at)) amax = a2, mx = m2, at = at2;
        }
        if (amax == 0.0f) {
            for (int k = 0; k < 8; k++) y[base + 32 * k + lane] = 0.0f;
            return;
        }
        iscale = -127.0f / mx; /* as quants_k.c's Q8_K */
        for (int k = 0; k < 8; k++) {
            int i = base + 32 * k + lane;
            y[i] = (1.0f / iscale) * fminf(127.0f, rintf(iscale * x[i]));
        }
    }
}

template <int A>
__global__ void k_quant_act(const float *__restrict__ X, int ldx, int n, int n_tok, float *__restrict__ Y) {
    for (int t = blockIdx.y; t < n_tok; t += gridDim.y) quant_act_row<A>(X + (size_t)t * ldx, n, Y + (size_t)t * n);
}

/* G = silu(G) * U */
__global__ void k_silu_mul(float *__restrict__ G, const float *__restrict__ U, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = G[i];
        G[i] = g / (1.0f + expf(-g)) * U[i];
    }
}

/* ---- the model on the device ------------------------------------------- */

struct dev_tensor {
    const uint8_t *p; /* device bytes, GGUF blocks */
    int type, n, rows;
    size_t row_bytes;
};

struct dev_layer {
    dev_tensor attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
};

struct gpu_model {
    int device;
    char name[300];
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, rope_dim;
    float norm_eps, rope_step;
    float *rope_freqs; /* device, or NULL */
    dev_tensor tok_embd, output_norm, output;
    dev_layer *layers;
    void **allocs; /* every cudaMalloc, to free */
    int n_allocs, cap_allocs;
};

static int model_alloc(gpu_model *m, void **p, size_t bytes, char *msg, size_t size) {
    if (m->n_allocs == m->cap_allocs) {
        int cap = m->cap_allocs ? 2 * m->cap_allocs : 64;
        void **a = (void **)realloc(m->allocs, (size_t)cap * sizeof *a);
        if (!a) return say(msg, size, "out of host memory"), 0;
        m->allocs = a;
        m->cap_allocs = cap;
    }
    if (!ok(cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc", msg, size)) return 0;
    m->allocs[m->n_allocs++] = *p;
    return 1;
}

/* Checks one weight and copies its bytes to the device. */
static int upload(gpu_model *m, const infer_backend_tensor *t, dev_tensor *d, char *msg, size_t size) {
    int bytes, per = block_of(t->type, &bytes);
    void *p;
    if (!per) return say(msg, size, "tensor %s: format %s is not supported on CUDA", t->name, type_name(t->type)), 0;
    if (t->ne0 % per || t->ne0 > (1 << 30) || t->ne1 > (1 << 30))
        return say(msg, size, "tensor %s: rows of %lld values do not fit its blocks", t->name, (long long)t->ne0), 0;
    d->type = t->type;
    d->n = (int)t->ne0;
    d->rows = (int)t->ne1;
    d->row_bytes = (size_t)(t->ne0 / per) * (size_t)bytes;
    if (d->row_bytes * (size_t)d->rows != t->nbytes)
        return say(msg, size, "tensor %s: %zu bytes, expected %zu", t->name, t->nbytes, d->row_bytes * (size_t)d->rows), 0;
    if (!model_alloc(m, &p, t->nbytes, msg, size)) return 0;
    if (!ok(cudaMemcpy(p, t->data, t->nbytes, cudaMemcpyHostToDevice), "cudaMemcpy", msg, size)) return 0;
    d->p = (const uint8_t *)p;
    return 1;
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
    gpu_model *m = (gpu_model *)gm;
    if (!m) return;
    cudaSetDevice(m->device);
    for (int i = 0; i < m->n_allocs; i++) cudaFree(m->allocs[i]);
    free(m->allocs);
    free(m->layers);
    free(m);
}

extern "C" const char *infer_cuda_model_device_name(const void *gm) { return ((const gpu_model *)gm)->name; }

/* The features beyond plain llama (backend.h) these kernels implement:
   none yet, so every other architecture is refused and runs on the CPU. */
#define INFER_CUDA_FEATURES 0u

extern "C" int infer_cuda_model_new(const infer_backend_model *d, void **out, char *msg, size_t size) {
    gpu_model *m;
    cudaDeviceProp prop;
    int bad = 0;
    *out = NULL;
    /* what the kernels assume, checked before touching the device */
    if (d->features & ~INFER_CUDA_FEATURES) {
        char names[256];
        infer_backend_feature_names(d->features & ~INFER_CUDA_FEATURES, names, sizeof names);
        say(msg, size, "the model uses %s, which the CUDA backend does not run yet", names);
        return INFER_BACKEND_UNSUPPORTED;
    }
    if (d->head_dim > ATT_MAX_HD) {
        say(msg, size, "head size %d is larger than the CUDA attention's %d", d->head_dim, ATT_MAX_HD);
        return INFER_BACKEND_UNSUPPORTED;
    }
    {
        const infer_backend_tensor *all[3] = {&d->tok_embd, &d->output_norm, &d->output};
        int bytes;
        for (int i = 0; i < 3 && !bad; i++)
            if (!block_of(all[i]->type, &bytes)) bad = 1, say(msg, size, "tensor %s: format %s is not supported on CUDA", all[i]->name, type_name(all[i]->type));
        for (int l = 0; l < d->n_layers && !bad; l++) {
            const infer_backend_layer *L = &d->layers[l];
            const infer_backend_tensor *w[9] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo,
                                                &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
            for (int i = 0; i < 9 && !bad; i++)
                if (!block_of(w[i]->type, &bytes)) bad = 1, say(msg, size, "tensor %s: format %s is not supported on CUDA", w[i]->name, type_name(w[i]->type));
        }
        if (bad) return INFER_BACKEND_UNSUPPORTED;
    }
    m = (gpu_model *)calloc(1, sizeof *m);
    if (!m) return say(msg, size, "out of host memory"), INFER_BACKEND_FAILED;
    m->layers = (dev_layer *)calloc((size_t)d->n_layers, sizeof *m->layers);
    if (!m->layers) return infer_cuda_model_free(m), say(msg, size, "out of host memory"), INFER_BACKEND_FAILED;
    m->device = 0;
    if (!ok(cudaSetDevice(m->device), "cudaSetDevice", msg, size) ||
        !ok(cudaGetDeviceProperties(&prop, m->device), "cudaGetDeviceProperties", msg, size)) {
        infer_cuda_model_free(m);
        return INFER_BACKEND_FAILED;
    }
    snprintf(m->name, sizeof m->name, "%s, sm_%d%d", prop.name, prop.major, prop.minor);
    m->n_vocab = d->n_vocab, m->dim = d->dim, m->n_layers = d->n_layers, m->n_heads = d->n_heads;
    m->n_kv_heads = d->n_kv_heads, m->head_dim = d->head_dim, m->ffn_dim = d->ffn_dim, m->rope_dim = d->rope_dim;
    m->norm_eps = d->norm_eps;
    m->rope_step = powf(d->rope_base, -2.0f / (float)d->rope_dim); /* as forward.c computes it */
    bad = !upload(m, &d->tok_embd, &m->tok_embd, msg, size) || !upload(m, &d->output_norm, &m->output_norm, msg, size);
    if (!bad) {
        if (d->output_is_tok_embd) m->output = m->tok_embd; /* tied: the same bytes, uploaded once */
        else bad = !upload(m, &d->output, &m->output, msg, size);
    }
    for (int l = 0; l < d->n_layers && !bad; l++) {
        const infer_backend_layer *L = &d->layers[l];
        dev_layer *G = &m->layers[l];
        bad = !upload(m, &L->attn_norm, &G->attn_norm, msg, size) || !upload(m, &L->wq, &G->wq, msg, size) ||
              !upload(m, &L->wk, &G->wk, msg, size) || !upload(m, &L->wv, &G->wv, msg, size) ||
              !upload(m, &L->wo, &G->wo, msg, size) || !upload(m, &L->ffn_norm, &G->ffn_norm, msg, size) ||
              !upload(m, &L->w_gate, &G->w_gate, msg, size) || !upload(m, &L->w_up, &G->w_up, msg, size) ||
              !upload(m, &L->w_down, &G->w_down, msg, size);
    }
    if (!bad && d->rope_freqs) {
        void *p;
        size_t bytes = (size_t)(d->rope_dim / 2) * sizeof(float);
        bad = !model_alloc(m, &p, bytes, msg, size) ||
              !ok(cudaMemcpy(p, d->rope_freqs, bytes, cudaMemcpyHostToDevice), "cudaMemcpy", msg, size);
        if (!bad) m->rope_freqs = (float *)p;
    }
    if (bad) {
        infer_cuda_model_free(m);
        return INFER_BACKEND_FAILED;
    }
    *out = m;
    return INFER_BACKEND_OK;
}

/* ---- a context: KV cache, scratch, the decode graph --------------------- */

struct gpu_ctx {
    gpu_model *m;
    int n_ctx, n_batch;
    cudaStream_t stream;
    __half *k_cache, *v_cache;                      /* [layer][position][kv_dim] */
    float *x, *xb, *q, *qr, *k, *v, *att, *hb, *hb2; /* a row per token */
    float *xq;                                      /* a product's input as the CPU rounds it */
    float *logits;                                  /* n_batch rows of n_vocab */
    int *d_in, *h_in;     /* [0] position of the first token, [1..] the tokens; h_in pinned */
    float *h_logits;      /* pinned: one row, the decode graph's output */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

extern "C" void infer_cuda_context_free(void *gc) {
    gpu_ctx *c = (gpu_ctx *)gc;
    if (!c) return;
    cudaSetDevice(c->m->device);
    if (c->exec) cudaGraphExecDestroy(c->exec);
    if (c->graph) cudaGraphDestroy(c->graph);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaFree(c->k_cache);
    cudaFree(c->v_cache);
    cudaFree(c->x);
    cudaFree(c->xb);
    cudaFree(c->q);
    cudaFree(c->qr);
    cudaFree(c->k);
    cudaFree(c->v);
    cudaFree(c->att);
    cudaFree(c->hb);
    cudaFree(c->hb2);
    cudaFree(c->xq);
    cudaFree(c->logits);
    cudaFree(c->d_in);
    cudaFreeHost(c->h_in);
    cudaFreeHost(c->h_logits);
    free(c);
}

extern "C" int infer_cuda_context_new(void *gm, int n_ctx, int n_batch, void **out, size_t *bytes, char *msg,
                                      size_t size) {
    gpu_model *m = (gpu_model *)gm;
    gpu_ctx *c;
    size_t kv_dim = (size_t)m->n_kv_heads * m->head_dim, nb = (size_t)n_batch, total = 0;
    size_t cache = (size_t)m->n_layers * (size_t)n_ctx * kv_dim * sizeof(__half);
    int good;
    *out = NULL;
    c = (gpu_ctx *)calloc(1, sizeof *c);
    if (!c) return say(msg, size, "out of host memory"), INFER_BACKEND_FAILED;
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
#define INFER_CUDA_ALLOC(field, n, type) \
    (total += (n) * sizeof(type), ok(cudaMalloc((void **)&c->field, (n) * sizeof(type)), "cudaMalloc " #field, msg, size))
    good = ok(cudaSetDevice(m->device), "cudaSetDevice", msg, size) &&
           ok(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate", msg, size) &&
           INFER_CUDA_ALLOC(k_cache, cache / sizeof(__half), __half) &&
           INFER_CUDA_ALLOC(v_cache, cache / sizeof(__half), __half) &&
           INFER_CUDA_ALLOC(x, nb * m->dim, float) && INFER_CUDA_ALLOC(xb, nb * m->dim, float) &&
           INFER_CUDA_ALLOC(q, nb * m->dim, float) && INFER_CUDA_ALLOC(qr, nb * m->dim, float) &&
           INFER_CUDA_ALLOC(k, nb * kv_dim, float) && INFER_CUDA_ALLOC(v, nb * kv_dim, float) &&
           INFER_CUDA_ALLOC(att, nb * m->dim, float) && INFER_CUDA_ALLOC(hb, nb * m->ffn_dim, float) &&
           INFER_CUDA_ALLOC(hb2, nb * m->ffn_dim, float) &&
           INFER_CUDA_ALLOC(xq, nb * (size_t)(m->dim > m->ffn_dim ? m->dim : m->ffn_dim), float) && INFER_CUDA_ALLOC(logits, nb * m->n_vocab, float) &&
           INFER_CUDA_ALLOC(d_in, nb + 1, int) &&
           ok(cudaMallocHost((void **)&c->h_in, (nb + 1) * sizeof(int)), "cudaMallocHost", msg, size) &&
           ok(cudaMallocHost((void **)&c->h_logits, (size_t)m->n_vocab * sizeof(float)), "cudaMallocHost", msg, size);
#undef INFER_CUDA_ALLOC
    if (!good) {
        infer_cuda_context_free(c);
        return INFER_BACKEND_FAILED;
    }
    *bytes = total;
    *out = c;
    return INFER_BACKEND_OK;
}

template <int T>
static void matmul_t(const dev_tensor &w, const float *x, int ldx, int n_tok, float *y, int ldy, int add,
                     cudaStream_t s) {
    const int warps = 4;
    dim3 block(32 * warps);
    if (n_tok == 1) {
        dim3 grid((unsigned)((w.rows + warps - 1) / warps), 1);
        INFER_LAUNCH(grid, block, 0, s, k_matmul<T, 1>)(w.p, w.row_bytes, w.n, w.rows, x, ldx, n_tok, y, ldy, add);
    } else {
        dim3 grid((unsigned)((w.rows + warps - 1) / warps), (unsigned)((n_tok + 7) / 8));
        INFER_LAUNCH(grid, block, 0, s, k_matmul<T, 8>)(w.p, w.row_bytes, w.n, w.rows, x, ldx, n_tok, y, ldy, add);
    }
}

/* The activation format the CPU dots weights of this type with. */
static int act_of(int type) {
    switch (type) {
    case INFER_TYPE_F16: return ACT_F16;
    case INFER_TYPE_BF16: return ACT_BF16;
    case INFER_TYPE_Q8_0: case INFER_TYPE_Q4_0: case INFER_TYPE_Q5_0: case INFER_TYPE_IQ4_NL: return ACT_Q8_0;
    case INFER_TYPE_Q4_1: case INFER_TYPE_Q5_1: return ACT_Q8_1;
    case INFER_TYPE_Q2_K: case INFER_TYPE_Q3_K: case INFER_TYPE_Q4_K: case INFER_TYPE_Q5_K: case INFER_TYPE_Q6_K:
    case INFER_TYPE_IQ4_XS: return ACT_Q8_K;
    default: return ACT_F32;
    }
}

/* What the scratch buffer holds: x rounded through format act (products
   that share an input and a format, q k v or gate up, round it once). */
struct act_scratch {
    float *p;
    const float *x;
    int act, n, n_tok;
};

/* y[t] = w . x[t] (added to y when add) for n_tok rows; x is first
   rounded through the activation format (into the scratch, n_tok rows of
   w.n), as on the CPU. */
static void matmul(const dev_tensor &w, const float *x, int ldx, int n_tok, float *y, int ldy, int add,
                   act_scratch *sc, cudaStream_t s) {
    int act = act_of(w.type), group = act == ACT_Q8_K ? 256 : 32;
    dim3 qgrid((unsigned)((w.n + group - 1) / group), (unsigned)(n_tok < 65535 ? n_tok : 65535));
    float *scratch = sc->p;
    if (act != ACT_F32 && sc->x == x && sc->act == act && sc->n == w.n && sc->n_tok == n_tok) act = -act; /* there */
    switch (act) {
    case ACT_F16: INFER_LAUNCH(qgrid, 32, 0, s, k_quant_act<ACT_F16>)(x, ldx, w.n, n_tok, scratch); break;
    case ACT_BF16: INFER_LAUNCH(qgrid, 32, 0, s, k_quant_act<ACT_BF16>)(x, ldx, w.n, n_tok, scratch); break;
    case ACT_Q8_0: INFER_LAUNCH(qgrid, 32, 0, s, k_quant_act<ACT_Q8_0>)(x, ldx, w.n, n_tok, scratch); break;
    case ACT_Q8_1: INFER_LAUNCH(qgrid, 32, 0, s, k_quant_act<ACT_Q8_1>)(x, ldx, w.n, n_tok, scratch); break;
    case ACT_Q8_K: INFER_LAUNCH(qgrid, 32, 0, s, k_quant_act<ACT_Q8_K>)(x, ldx, w.n, n_tok, scratch); break;
    default: break;
    }
    if (act > 0) sc->x = x, sc->act = act, sc->n = w.n, sc->n_tok = n_tok;
    if (act != ACT_F32) x = scratch, ldx = w.n;
    switch (w.type) {
#define INFER_CUDA_CASE(t) \
    case t: matmul_t<t>(w, x, ldx, n_tok, y, ldy, add, s); break;
        INFER_CUDA_TYPES(INFER_CUDA_CASE)
#undef INFER_CUDA_CASE
    default: break; /* refused at upload */
    }
}

static void get_rows(const dev_tensor &w, const int *ids, int n_tok, float *x, cudaStream_t s) {
    switch (w.type) {
#define INFER_CUDA_CASE(t) \
    case t: INFER_LAUNCH(n_tok, 128, 0, s, k_get_rows<t>)(w.p, w.row_bytes, w.n, ids, x); break;
        INFER_CUDA_TYPES(INFER_CUDA_CASE)
#undef INFER_CUDA_CASE
    default: break;
    }
}

/* Queues the forward pass of n tokens (ids and position in d_in) on the
   context's stream; the logits of rows first_logit..n-1 land in c->logits.
   Only kernel launches: the same calls run directly or under capture.
   With should_stop (never under capture), each layer is waited for and the
   callback asked before the next; returns 1 where it said stop. */
static int enqueue_forward(gpu_ctx *c, int n, int first_logit, int (*should_stop)(void *), void *stop_user) {
    const gpu_model *m = c->m;
    cudaStream_t s = c->stream;
    int dim = m->dim, hd = m->head_dim, kv_dim = m->n_kv_heads * hd, ffn = m->ffn_dim;
    size_t att_shared = (size_t)(hd + ATT_WARPS * (hd + 2)) * sizeof(float);
    float att_scale = 1.0f / sqrtf((float)hd);
    act_scratch sc = {c->xq, NULL, ACT_F32, 0, 0};
    get_rows(m->tok_embd, c->d_in + 1, n, c->x, s);
    for (int l = 0; l < m->n_layers; l++) {
        const dev_layer *L = &m->layers[l];
        __half *kc = c->k_cache + (size_t)l * c->n_ctx * kv_dim, *vc = c->v_cache + (size_t)l * c->n_ctx * kv_dim;
        INFER_LAUNCH(n, 256, 0, s, k_rmsnorm)(c->x, (const float *)L->attn_norm.p, c->xb, dim, m->norm_eps);
        sc.x = NULL; /* every kernel but a product rewrites some product's input */
        matmul(L->wq, c->xb, dim, n, c->q, dim, 0, &sc, s);
        matmul(L->wk, c->xb, dim, n, c->k, kv_dim, 0, &sc, s);
        matmul(L->wv, c->xb, dim, n, c->v, kv_dim, 0, &sc, s);
        INFER_LAUNCH(n, 256, 0, s, k_rope_store)(c->q, c->k, c->v, c->qr, kc, vc, c->d_in, dim, kv_dim, hd, m->rope_dim,
                                       m->rope_step, m->rope_freqs);
        INFER_LAUNCH(dim3((unsigned)n, (unsigned)m->n_heads), 32 * ATT_WARPS, att_shared, s, k_attention)(
            c->qr, kc, vc, c->att, c->d_in, dim, kv_dim, hd, m->n_heads / m->n_kv_heads, att_scale);
        sc.x = NULL;
        matmul(L->wo, c->att, dim, n, c->x, dim, 1, &sc, s);
        INFER_LAUNCH(n, 256, 0, s, k_rmsnorm)(c->x, (const float *)L->ffn_norm.p, c->xb, dim, m->norm_eps);
        sc.x = NULL;
        matmul(L->w_gate, c->xb, dim, n, c->hb, ffn, 0, &sc, s);
        matmul(L->w_up, c->xb, dim, n, c->hb2, ffn, 0, &sc, s);
        {
            size_t count = (size_t)n * ffn;
            INFER_LAUNCH((unsigned)((count + 255) / 256), 256, 0, s, k_silu_mul)(c->hb, c->hb2, count);
        }
        sc.x = NULL;
        matmul(L->w_down, c->hb, ffn, n, c->x, dim, 1, &sc, s);
        if (should_stop && (cudaStreamSynchronize(s) != cudaSuccess || should_stop(stop_user))) return 1;
    }
    if (first_logit < n) {
        size_t off = (size_t)first_logit * dim;
        INFER_LAUNCH(n - first_logit, 256, 0, s, k_rmsnorm)(c->x + off, (const float *)m->output_norm.p, c->xb + off, dim,
                                                  m->norm_eps);
        sc.x = NULL;
        matmul(m->output, c->xb + off, dim, n - first_logit, c->logits, m->n_vocab, 0, &sc, s);
    }
    return 0;
}

/* Captures one decode step (token and position copied in from h_in, the
   logits out to h_logits) as a graph, once per context. */
static int capture_decode(gpu_ctx *c, char *msg, size_t size) {
    cudaStream_t s = c->stream;
    if (!ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture", msg, size))
        return 0;
    cudaMemcpyAsync(c->d_in, c->h_in, 2 * sizeof(int), cudaMemcpyHostToDevice, s);
    enqueue_forward(c, 1, 0, NULL, NULL);
    cudaMemcpyAsync(c->h_logits, c->logits, (size_t)c->m->n_vocab * sizeof(float), cudaMemcpyDeviceToHost, s);
    if (!ok(cudaStreamEndCapture(s, &c->graph), "cudaStreamEndCapture", msg, size)) return 0;
    if (!ok(cudaGraphInstantiate(&c->exec, c->graph, 0), "cudaGraphInstantiate", msg, size)) {
        c->exec = NULL;
        return 0;
    }
    return 1;
}

extern "C" int infer_cuda_forward(void *gc, const int32_t *tokens, int n, int pos0, int first_logit, float *logits,
                                  int (*should_stop)(void *), void *stop_user, char *msg, size_t size) {
    gpu_ctx *c = (gpu_ctx *)gc;
    const gpu_model *m = c->m;
    if (n < 1 || n > c->n_batch || pos0 < 0 || pos0 + n > c->n_ctx || first_logit < 0 || first_logit > n) {
        say(msg, size, "batch of %d tokens at position %d does not fit (batch %d, context %d)", n, pos0, c->n_batch,
            c->n_ctx);
        return INFER_BACKEND_FAILED;
    }
    if (!ok(cudaSetDevice(m->device), "cudaSetDevice", msg, size)) return INFER_BACKEND_FAILED;
    c->h_in[0] = pos0;
    memcpy(c->h_in + 1, tokens, (size_t)n * sizeof(int));
    if (n == 1 && first_logit == 0) { /* decode: replay the graph */
        if (!c->exec && !capture_decode(c, msg, size)) return INFER_BACKEND_FAILED;
        if (!ok(cudaGraphLaunch(c->exec, c->stream), "cudaGraphLaunch", msg, size) ||
            !ok(cudaStreamSynchronize(c->stream), "decode step", msg, size))
            return INFER_BACKEND_FAILED;
        memcpy(logits, c->h_logits, (size_t)m->n_vocab * sizeof(float));
        return INFER_BACKEND_OK;
    }
    if (!ok(cudaMemcpyAsync(c->d_in, c->h_in, (size_t)(n + 1) * sizeof(int), cudaMemcpyHostToDevice, c->stream),
            "cudaMemcpyAsync", msg, size))
        return INFER_BACKEND_FAILED;
    if (enqueue_forward(c, n, first_logit, should_stop, stop_user)) {
        say(msg, size, "cancelled");
        return INFER_BACKEND_CANCELLED;
    }
    if (!ok(cudaGetLastError(), "kernel launch", msg, size)) return INFER_BACKEND_FAILED;
    if (first_logit < n &&
        !ok(cudaMemcpyAsync(logits, c->logits, (size_t)(n - first_logit) * m->n_vocab * sizeof(float),
                            cudaMemcpyDeviceToHost, c->stream),
            "cudaMemcpyAsync", msg, size))
        return INFER_BACKEND_FAILED;
    if (!ok(cudaStreamSynchronize(c->stream), "forward pass", msg, size)) return INFER_BACKEND_FAILED;
    return INFER_BACKEND_OK;
}
