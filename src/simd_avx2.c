/* simd_avx2.c - AVX2+FMA (+F16C) versions of the kernels, compiled with
   function-level target attributes so the same binary still runs on CPUs
   without them (cpu.c installs them only where cpuid says so).
   Numerics: the same values as quants.c's reference up to the order of
   float additions; the activation quantizers give the same bytes. */
#include "internal.h"
#include "backend.h"
#include "quants.h"
#include "pack.h"
#include "simd_x86.h"

#ifdef INFER__HAVE_X86

/* ---- float formats ---- */

INFER__AVX2 static float infer__avx2_f32_dot(int n, const void *w, const void *x) {
    const float *a = (const float *)w, *b = (const float *)x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    float s;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s = infer__avx2_hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* One token's F16 order as llama.cpp runs it on AVX-512
   (infer__f16_dot_llama_vec): its four 16-lane accumulators as eight of 8
   lanes (s[j] holds lanes 8j..8j+7), added as it adds them, then the tree;
   the values past the last whole 64 in double. */
INFER__AVX2 static float infer__avx2_f16_dot_ordered1(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m256 s[8];
    float lane[16];
    double sum;
    int i = 0, j;
    for (j = 0; j < 8; j++) s[j] = _mm256_setzero_ps();
    for (; i + 64 <= n; i += 64)
        for (j = 0; j < 8; j++) s[j] = _mm256_fmadd_ps(INFER__LOADH(a + i + 8 * j), INFER__LOADH(b + i + 8 * j), s[j]);
    /* lane l of 16: (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]) */
    _mm256_storeu_ps(lane, _mm256_add_ps(_mm256_add_ps(s[0], s[4]), _mm256_add_ps(s[2], s[6])));
    _mm256_storeu_ps(lane + 8, _mm256_add_ps(_mm256_add_ps(s[1], s[5]), _mm256_add_ps(s[3], s[7])));
    sum = (double)infer__sum16_tree(lane);
    for (; i < n; i++) sum += (double)(infer__fp16_to_fp32(a[i]) * infer__fp16_to_fp32(b[i]));
    return (float)sum;
}

/* llama.cpp's F16 order as AVX-512 runs it: lanes 0-7 and 8-15 in two
   chains, then the tree (infer__f16_dot_llama) */
INFER__AVX2 static float infer__avx2_f16_dot_ordered(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    float lane[16];
    int i;
    if (n % 16) return infer__avx2_f16_dot_ordered1(n, w, x); /* as llama.cpp: its one-token order */
    for (i = 0; i < n; i += 16) {
        s0 = _mm256_fmadd_ps(INFER__LOADH(a + i), INFER__LOADH(b + i), s0);
        s1 = _mm256_fmadd_ps(INFER__LOADH(a + i + 8), INFER__LOADH(b + i + 8), s1);
    }
    _mm256_storeu_ps(lane, s0);
    _mm256_storeu_ps(lane + 8, s1);
    return infer__sum16_tree(lane);
}

INFER__AVX2 static float infer__avx2_f16_dot(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    float s;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(INFER__LOADH(a + i), INFER__LOADH(b + i), s0);
        s1 = _mm256_fmadd_ps(INFER__LOADH(a + i + 8), INFER__LOADH(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(INFER__LOADH(a + i + 16), INFER__LOADH(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(INFER__LOADH(a + i + 24), INFER__LOADH(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(INFER__LOADH(a + i), INFER__LOADH(b + i), s0);
    s = infer__avx2_hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += infer__fp16_to_fp32(a[i]) * infer__fp16_to_fp32(b[i]);
    return s;
}

/* F16 GEMM: a tile of up to 3 rows x 3 tokens, 8 values a step, each row
   and token widened once per tile; the tail of n % 8 as one more step,
   zero-padded, so that value i is summed in lane i % 8 at step i / 8
   whatever n is: attention's p.V over a tile cut at the pass's last key
   then gives a token the sums it gets alone (zeros add exactly) */
INFER__AVX2_INLINE void infer__avx2_f16_tile(int R, int T, int n, const uint16_t *w, size_t w_stride,
                                              const uint16_t *x, size_t x_stride, float *y, size_t ldy) {
#define INFER__F16_BODY(R, T)                                                                                         \
    do {                                                                                                              \
        __m256 acc[R][T], wv[R];                                                                                      \
        int i_, r_, t_;                                                                                               \
        for (r_ = 0; r_ < R; r_++)                                                                                    \
            for (t_ = 0; t_ < T; t_++) acc[r_][t_] = _mm256_setzero_ps();                                             \
        for (i_ = 0; i_ + 8 <= n; i_ += 8) {                                                                          \
            for (r_ = 0; r_ < R; r_++) wv[r_] = INFER__LOADH((const uint16_t *)((const uint8_t *)w + r_ * w_stride) + i_); \
            for (t_ = 0; t_ < T; t_++) {                                                                              \
                __m256 xv_ = INFER__LOADH((const uint16_t *)((const uint8_t *)x + t_ * x_stride) + i_);               \
                for (r_ = 0; r_ < R; r_++) acc[r_][t_] = _mm256_fmadd_ps(wv[r_], xv_, acc[r_][t_]);                   \
            }                                                                                                         \
        }                                                                                                             \
        if (i_ < n) {                                                                                                 \
            uint16_t pad_[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                              \
            for (r_ = 0; r_ < R; r_++) {                                                                              \
                memcpy(pad_, (const uint16_t *)((const uint8_t *)w + r_ * w_stride) + i_, (size_t)(n - i_) * 2);      \
                wv[r_] = INFER__LOADH(pad_);                                                                          \
            }                                                                                                         \
            for (t_ = 0; t_ < T; t_++) {                                                                              \
                __m256 xv_;                                                                                           \
                memcpy(pad_, (const uint16_t *)((const uint8_t *)x + t_ * x_stride) + i_, (size_t)(n - i_) * 2);      \
                xv_ = INFER__LOADH(pad_);                                                                             \
                for (r_ = 0; r_ < R; r_++) acc[r_][t_] = _mm256_fmadd_ps(wv[r_], xv_, acc[r_][t_]);                   \
            }                                                                                                         \
        }                                                                                                             \
        for (t_ = 0; t_ < T; t_++)                                                                                    \
            for (r_ = 0; r_ < R; r_++) y[(size_t)t_ * ldy + r_] = infer__avx2_hsum(acc[r_][t_]);                      \
    } while (0)
    if (R == 3 && T == 3) { INFER__F16_BODY(3, 3); return; }
    if (R == 3 && T == 2) { INFER__F16_BODY(3, 2); return; }
    if (R == 3 && T == 1) { INFER__F16_BODY(3, 1); return; }
    if (R == 2 && T == 3) { INFER__F16_BODY(2, 3); return; }
    if (R == 2 && T == 2) { INFER__F16_BODY(2, 2); return; }
    if (R == 2 && T == 1) { INFER__F16_BODY(2, 1); return; }
    if (R == 1 && T == 3) { INFER__F16_BODY(1, 3); return; }
    if (R == 1 && T == 2) { INFER__F16_BODY(1, 2); return; }
    INFER__F16_BODY(1, 1);
#undef INFER__F16_BODY
}

/* Four rows' sums of 8 lanes, each in infer__avx2_hsum's order (halves
   added, then lanes 0+2 and 1+3, then those two), as one vector. */
INFER__AVX2_INLINE __m128 infer__avx2_hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 h02 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a2, 0x20), _mm256_permute2f128_ps(a0, a2, 0x31));
    __m256 h13 = _mm256_add_ps(_mm256_permute2f128_ps(a1, a3, 0x20), _mm256_permute2f128_ps(a1, a3, 0x31));
    __m256 q = _mm256_add_ps(_mm256_shuffle_ps(h02, h13, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(h02, h13, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 s = _mm256_hadd_ps(q, q); /* sums 0 1 0 1 | 2 3 2 3 */
    return _mm_shuffle_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1), _MM_SHUFFLE(1, 0, 1, 0));
}

/* F16 GEMM for n up to INFER__F16_WIDE (attention's shapes: q.K over a
   head, p.V over a tile of keys): tokens 3 at a time are widened to F32
   once, zero-padded to whole steps, and rows go 4 at a time, each row
   widened once a step for the three tokens; the rows of a tile are fetched
   ahead (V's rows, a few hundred keys long, are too short a stream for
   the hardware's prefetcher). The sums are infer__avx2_f16_tile's, bit
   for bit: value i in lane i % 8 at step i / 8, then hsum's order. */
INFER__AVX2 static void infer__avx2_f16_gemm_wide(int n, const uint8_t *w, size_t w_stride, int n_rows, const uint8_t *x,
                                                  size_t x_stride, int n_tok, float *y, size_t ldy) {
    float xf[3 * INFER__F16_WIDE];
    int n8 = n / 8 * 8, n_pad = (n + 7) / 8 * 8, t0, t, r, i, c;
    /* rows fetched ahead: about INFER__F16_AHEAD bytes of them, so that a
       key's short row (q.K) is asked for as early as V's long one */
    int ahead = INFER__MAX(16, INFER__MIN(INFER__F16_AHEAD_MAX, INFER__F16_AHEAD / (2 * n)));
    for (t0 = 0; t0 < n_tok; t0 += 3) {
        int nt = INFER__MIN(3, n_tok - t0);
        float *yt = y + (size_t)t0 * ldy;
        for (t = 0; t < nt; t++) {
            const uint16_t *xt = (const uint16_t *)(x + (size_t)(t0 + t) * x_stride);
            uint16_t pad[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (i = 0; i < n8; i += 8) _mm256_storeu_ps(xf + t * n_pad + i, INFER__LOADH(xt + i));
            if (n8 < n) {
                memcpy(pad, xt + n8, (size_t)(n - n8) * 2);
                _mm256_storeu_ps(xf + t * n_pad + n8, INFER__LOADH(pad));
            }
        }
/* one step of 8 values: row c's vector k times each token's */
#define INFER__F16_WIDE_FMA(NT, c, k)                                                                                 \
    do {                                                                                                              \
        __m256 k_ = (k);                                                                                              \
        a0##c = _mm256_fmadd_ps(k_, x0, a0##c);                                                                       \
        if (NT > 1) a1##c = _mm256_fmadd_ps(k_, x1, a1##c);                                                           \
        if (NT > 2) a2##c = _mm256_fmadd_ps(k_, x2, a2##c);                                                           \
    } while (0)
#define INFER__F16_WIDE_BODY(NT)                                                                                      \
    do {                                                                                                              \
        for (r = 0; r + 4 <= n_rows; r += 4) {                                                                        \
            const uint8_t *w0 = w + (size_t)r * w_stride, *w1 = w0 + w_stride, *w2 = w1 + w_stride, *w3 = w2 + w_stride; \
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00;       \
            __m256 a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, x0, x1 = a00, x2 = a00;                     \
            for (c = ahead; c < ahead + 4; c++) /* past the last row too: a prefetch never faults */                      \
                for (i = 0; i < n * 2; i += 64) _mm_prefetch((const char *)w0 + c * w_stride + i, _MM_HINT_T0);       \
            for (i = 0; i < n8; i += 8) {                                                                             \
                x0 = _mm256_loadu_ps(xf + i);                                                                         \
                if (NT > 1) x1 = _mm256_loadu_ps(xf + n_pad + i);                                                     \
                if (NT > 2) x2 = _mm256_loadu_ps(xf + 2 * n_pad + i);                                                 \
                INFER__F16_WIDE_FMA(NT, 0, INFER__LOADH((const uint16_t *)w0 + i));                                   \
                INFER__F16_WIDE_FMA(NT, 1, INFER__LOADH((const uint16_t *)w1 + i));                                   \
                INFER__F16_WIDE_FMA(NT, 2, INFER__LOADH((const uint16_t *)w2 + i));                                   \
                INFER__F16_WIDE_FMA(NT, 3, INFER__LOADH((const uint16_t *)w3 + i));                                   \
            }                                                                                                         \
            if (n8 < n) { /* the last, partial step: zeros past n */                                                  \
                uint16_t p_[4][8];                                                                                    \
                memset(p_, 0, sizeof p_);                                                                             \
                memcpy(p_[0], (const uint16_t *)w0 + n8, (size_t)(n - n8) * 2);                                       \
                memcpy(p_[1], (const uint16_t *)w1 + n8, (size_t)(n - n8) * 2);                                       \
                memcpy(p_[2], (const uint16_t *)w2 + n8, (size_t)(n - n8) * 2);                                       \
                memcpy(p_[3], (const uint16_t *)w3 + n8, (size_t)(n - n8) * 2);                                       \
                x0 = _mm256_loadu_ps(xf + n8);                                                                        \
                if (NT > 1) x1 = _mm256_loadu_ps(xf + n_pad + n8);                                                    \
                if (NT > 2) x2 = _mm256_loadu_ps(xf + 2 * n_pad + n8);                                                \
                INFER__F16_WIDE_FMA(NT, 0, INFER__LOADH(p_[0]));                                                      \
                INFER__F16_WIDE_FMA(NT, 1, INFER__LOADH(p_[1]));                                                      \
                INFER__F16_WIDE_FMA(NT, 2, INFER__LOADH(p_[2]));                                                      \
                INFER__F16_WIDE_FMA(NT, 3, INFER__LOADH(p_[3]));                                                      \
            }                                                                                                         \
            _mm_storeu_ps(yt + r, infer__avx2_hsum4(a00, a01, a02, a03));                                             \
            if (NT > 1) _mm_storeu_ps(yt + ldy + r, infer__avx2_hsum4(a10, a11, a12, a13));                           \
            if (NT > 2) _mm_storeu_ps(yt + 2 * ldy + r, infer__avx2_hsum4(a20, a21, a22, a23));                       \
        }                                                                                                             \
    } while (0)
        if (nt == 3) INFER__F16_WIDE_BODY(3);
        else if (nt == 2) INFER__F16_WIDE_BODY(2);
        else INFER__F16_WIDE_BODY(1);
#undef INFER__F16_WIDE_BODY
#undef INFER__F16_WIDE_FMA
        for (r = n_rows / 4 * 4; r < n_rows; r++) /* the last rows, one by one */
            infer__avx2_f16_tile(1, nt, n, (const uint16_t *)(w + (size_t)r * w_stride), w_stride,
                                 (const uint16_t *)(x + (size_t)t0 * x_stride), x_stride, yt + r, ldy);
    }
}

INFER__AVX2 static void infer__avx2_f16_gemm(int n, const void *w, size_t w_stride, int n_rows, const void *x,
                                             size_t x_stride, int n_tok, float *y, size_t ldy) {
    int r, t;
    if (n <= INFER__F16_WIDE) {
        infer__avx2_f16_gemm_wide(n, (const uint8_t *)w, w_stride, n_rows, (const uint8_t *)x, x_stride, n_tok, y, ldy);
        return;
    }
    for (r = 0; r < n_rows; r += 3)
        for (t = 0; t < n_tok; t += 3)
            infer__avx2_f16_tile(INFER__MIN(3, n_rows - r), INFER__MIN(3, n_tok - t), n,
                                 (const uint16_t *)((const uint8_t *)w + (size_t)r * w_stride), w_stride,
                                 (const uint16_t *)((const uint8_t *)x + (size_t)t * x_stride), x_stride,
                                 y + (size_t)t * ldy + r, ldy);
}

/* Attention's q.K for a prompt's many rows (infer__kernels.qk_f16): the
   tile's keys widened to F32 once and laid dim by dim in panels of 16
   keys (infer__x86_qk_widen), then 6 query rows x 16 keys in registers, each dim's q value broadcast:
   every product fused in dim order, no lanes to sum across, and a key row
   widened once for all of an item's rows rather than once for every three. */
#define INFER__QK_ROWS 6
INFER__AVX2 static void infer__avx2_qk_f16(int hd, const uint8_t *k, size_t k_stride, int kt, const uint16_t *q,
                                           size_t q_stride, int nq, float *s, size_t lds, float *work) {
    int kp = (kt + 15) / 16 * 16, j, d, i, t;
    float *qf = work + (size_t)hd * kp, *kd = work;
    infer__x86_qk_widen(hd, k, k_stride, kt, q, q_stride, nq, INFER__QK_ROWS, work);
    for (i = 0; i < nq; i += INFER__QK_ROWS)
        for (j = 0; j < kp; j += 16) {
            const float *q0 = qf + (size_t)i * hd, *panel = kd + (size_t)j * hd;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
            __m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
            float tail[16];
            for (d = 0; d < hd; d++) {
                __m256 k0 = _mm256_loadu_ps(panel + 16 * d), k1 = _mm256_loadu_ps(panel + 16 * d + 8), b;
                b = _mm256_broadcast_ss(q0 + d), a00 = _mm256_fmadd_ps(b, k0, a00), a01 = _mm256_fmadd_ps(b, k1, a01);
                b = _mm256_broadcast_ss(q0 + hd + d), a10 = _mm256_fmadd_ps(b, k0, a10), a11 = _mm256_fmadd_ps(b, k1, a11);
                b = _mm256_broadcast_ss(q0 + 2 * hd + d), a20 = _mm256_fmadd_ps(b, k0, a20), a21 = _mm256_fmadd_ps(b, k1, a21);
                b = _mm256_broadcast_ss(q0 + 3 * hd + d), a30 = _mm256_fmadd_ps(b, k0, a30), a31 = _mm256_fmadd_ps(b, k1, a31);
                b = _mm256_broadcast_ss(q0 + 4 * hd + d), a40 = _mm256_fmadd_ps(b, k0, a40), a41 = _mm256_fmadd_ps(b, k1, a41);
                b = _mm256_broadcast_ss(q0 + 5 * hd + d), a50 = _mm256_fmadd_ps(b, k0, a50), a51 = _mm256_fmadd_ps(b, k1, a51);
            }
            {
                __m256 acc[INFER__QK_ROWS][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}, {a40, a41}, {a50, a51}};
                for (t = 0; t < INFER__QK_ROWS && i + t < nq; t++) {
                    float *y = s + (size_t)(i + t) * lds + j;
                    if (kt - j >= 16) {
                        _mm256_storeu_ps(y, acc[t][0]);
                        _mm256_storeu_ps(y + 8, acc[t][1]);
                    } else {
                        _mm256_storeu_ps(tail, acc[t][0]);
                        _mm256_storeu_ps(tail + 8, acc[t][1]);
                        memcpy(y, tail, (size_t)(kt - j) * sizeof(float));
                    }
                }
            }
        }
}

INFER__AVX2 static void infer__avx2_f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = infer__fp32_to_fp16(src[i]);
}

#define INFER__LOADBF(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
INFER__AVX2 static float infer__avx2_bf16_dot(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    float s;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(INFER__LOADBF(a + i), INFER__LOADBF(b + i), s0);
        s1 = _mm256_fmadd_ps(INFER__LOADBF(a + i + 8), INFER__LOADBF(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(INFER__LOADBF(a + i + 16), INFER__LOADBF(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(INFER__LOADBF(a + i + 24), INFER__LOADBF(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(INFER__LOADBF(a + i), INFER__LOADBF(b + i), s0);
    s = infer__avx2_hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += infer__bf16_to_fp32(a[i]) * infer__bf16_to_fp32(b[i]);
    return s;
}

/* round to nearest even on the bits, NaN kept quiet: as infer__fp32_to_bf16 */
INFER__AVX2_INLINE __m256i infer__avx2_to_bf16(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    return _mm256_blendv_epi8(r, q, nan);
}
INFER__AVX2 static void infer__avx2_bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i p = _mm256_packus_epi32(infer__avx2_to_bf16(_mm256_loadu_ps(src + i)),
                                        infer__avx2_to_bf16(_mm256_loadu_ps(src + i + 8)));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_permute4x64_epi64(p, 0xd8));
    }
    for (; i < n; i++) d[i] = infer__fp32_to_bf16(src[i]);
}

/* ---- 8-bit activations ---- */

/* max |x| of 32 floats */
INFER__AVX2_INLINE float infer__avx2_amax32(const __m256 v[4]) {
    __m256 sign = _mm256_set1_ps(-0.0f), m;
    __m128 h;
    m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
/* four vectors of 8 int32 in -127..127 to 32 int8 in order */
INFER__AVX2_INLINE __m256i infer__avx2_pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

INFER__AVX2 static void infer__avx2_q8_0_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_0 *y = (infer__block_q8_0 *)dst;
    int64_t b;
    for (b = 0; b < n / 32; b++, src += 32) {
        __m256 v[4], id;
        float amax;
        int j;
        for (j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(src + 8 * j);
        amax = infer__avx2_amax32(v);
        y[b].d = infer__fp32_to_fp16(amax / 127.0f);
        id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        /* cvtps rounds as the current mode, like nearbyintf */
        _mm256_storeu_si256((__m256i *)y[b].qs,
                            infer__avx2_pack32(_mm256_cvtps_epi32(_mm256_mul_ps(v[0], id)),
                                               _mm256_cvtps_epi32(_mm256_mul_ps(v[1], id)),
                                               _mm256_cvtps_epi32(_mm256_mul_ps(v[2], id)),
                                               _mm256_cvtps_epi32(_mm256_mul_ps(v[3], id))));
    }
}

/* roundf: to nearest, halves away from zero */
INFER__AVX2_INLINE __m256i infer__avx2_round_away(__m256 v) {
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    __m256 step = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
    t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step));
    return _mm256_cvttps_epi32(t);
}

INFER__AVX2 static void infer__avx2_q8_1_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_1 *y = (infer__block_q8_1 *)dst;
    int64_t b;
    for (b = 0; b < n / 32; b++, src += 32) {
        __m256 v[4], id;
        __m256i q[4], s;
        float amax, d;
        int j;
        for (j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(src + 8 * j);
        amax = infer__avx2_amax32(v);
        d = amax / 127.0f;
        id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        for (j = 0; j < 4; j++) q[j] = infer__avx2_round_away(_mm256_mul_ps(v[j], id));
        s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        {
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
            y[b].s = infer__fp32_to_fp16((float)_mm_cvtsi128_si32(h) * d);
        }
        y[b].d = infer__fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)y[b].qs, infer__avx2_pack32(q[0], q[1], q[2], q[3]));
    }
}

/* ---- block formats dotted with 8-bit activations ---- */

/* simd_x86.h's bodies with the dot as maddubs pairs summed by madd */
INFER__X86_BLOCK_DOTS(INFER__AVX2, infer__avx2_q8_0_dot, infer__avx2_q4_0_dot, infer__avx2_q4_1_dot,
                      infer__avx2_q5_0_dot, infer__avx2_q5_1_dot, infer__avx2_dot_ss, infer__avx2_dot_us)

/* ---- Q4_0 and Q4_1 packed (pack.h): 16 rows a group, two vectors of 8 ----
   Word j of a block holds 4 values of each row (low nibbles: the row's
   values 4j.., high: 16 + 4j..); each is dotted with the token's matching
   4 bytes, broadcast, by maddubs, and a block's 8 pair sums add up in 16
   bits (Q4_0: u * x - 8 * x, at most 2032 a pair; Q4_1: u * x, 3810), so
   each row's integer sum is vec_dot's. A row's blocks go into one chain,
   sum * (d * dx) (+ m * s for Q4_1) added block after block, as pack.c's
   references do. A group's bytes are one stream: a row at a time, or two
   rows side by side, kept the memory less busy (AVX2, 2 threads). */
#define INFER__AVX2_PK_TMAX 4
INFER__AVX2_INLINE void infer__avx2_pk_q4_tile(const int T, const int q1, int nb, const uint8_t *gp, const uint8_t *x,
                                               size_t x_stride, float *y, size_t ldy, int nr) {
    __m256 fa[INFER__AVX2_PK_TMAX], fb[INFER__AVX2_PK_TMAX];
    const __m256i m4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
    const size_t xb_size = q1 ? sizeof(infer__block_q8_1) : sizeof(infer__block_q8_0), xq_at = q1 ? 4 : 2;
    int b, j, t;
    for (t = 0; t < T; t++) fa[t] = fb[t] = _mm256_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint8_t *q = q1 ? gp + (size_t)b * INFER__PACK_Q4_1_BLOCK : gp + infer__pack_q_at(b, 16);
        const uint8_t *d = q1 ? q + 256 : gp + infer__pack_d_at(b, 16);
        __m256 da, db;
        __m256i sa[INFER__AVX2_PK_TMAX], sb[INFER__AVX2_PK_TMAX];
        for (t = 0; t < T; t++) sa[t] = sb[t] = _mm256_setzero_si256();
        for (j = 0; j < 4; j++) {
            __m256i va = _mm256_loadu_si256((const __m256i *)(q + 64 * j));
            __m256i vb = _mm256_loadu_si256((const __m256i *)(q + 64 * j + 32));
            __m256i la = _mm256_and_si256(va, m4), ha = _mm256_and_si256(_mm256_srli_epi16(va, 4), m4);
            __m256i lb = _mm256_and_si256(vb, m4), hb = _mm256_and_si256(_mm256_srli_epi16(vb, 4), m4);
            for (t = 0; t < T; t++) {
                const uint8_t *xq = x + (size_t)t * x_stride + (size_t)b * xb_size + xq_at;
                int32_t wl, wh;
                __m256i xl, xh, pa, pb;
                memcpy(&wl, xq + 4 * j, 4);
                memcpy(&wh, xq + 16 + 4 * j, 4);
                xl = _mm256_set1_epi32(wl), xh = _mm256_set1_epi32(wh);
                pa = _mm256_add_epi16(_mm256_maddubs_epi16(la, xl), _mm256_maddubs_epi16(ha, xh));
                pb = _mm256_add_epi16(_mm256_maddubs_epi16(lb, xl), _mm256_maddubs_epi16(hb, xh));
                if (!q1) { /* the values count from 0: 8 * x back */
                    __m256i e = _mm256_add_epi16(_mm256_maddubs_epi16(eight, xl), _mm256_maddubs_epi16(eight, xh));
                    pa = _mm256_sub_epi16(pa, e), pb = _mm256_sub_epi16(pb, e);
                }
                sa[t] = _mm256_add_epi16(sa[t], pa), sb[t] = _mm256_add_epi16(sb[t], pb);
            }
        }
        /* the scales after the quants: the reads go up through the group,
           as the prefetcher follows them (first, they cost TinyLlama's Q4_0
           a third of its speed for one token) */
        da = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
        db = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 16)));
        for (t = 0; t < T; t++) {
            const uint8_t *xb = x + (size_t)t * x_stride + (size_t)b * xb_size; /* fp16 d (and s) first */
            uint16_t dx, sx;
            __m256 vx, ta, tb;
            memcpy(&dx, xb, 2);
            vx = _mm256_set1_ps(INFER__X86_F16(dx));
            ta = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(sa[t], ones)), _mm256_mul_ps(da, vx));
            tb = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(sb[t], ones)), _mm256_mul_ps(db, vx));
            if (q1) { /* + m * s */
                __m256 vs;
                memcpy(&sx, xb + 2, 2);
                vs = _mm256_set1_ps(INFER__X86_F16(sx));
                ta = _mm256_add_ps(ta, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 32))), vs));
                tb = _mm256_add_ps(tb, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 48))), vs));
            }
            fa[t] = _mm256_add_ps(fa[t], ta), fb[t] = _mm256_add_ps(fb[t], tb);
        }
    }
    for (t = 0; t < T; t++) {
        float out[INFER__PACK_ROWS];
        _mm256_storeu_ps(out, fa[t]);
        _mm256_storeu_ps(out + 8, fb[t]);
        memcpy(y + (size_t)t * ldy, out, (size_t)nr * sizeof(float));
    }
}

/* ---- Q8_0 packed (pack.h: AVX-512's layout, the bytes + 128) ----
   AVX2 has no product of two signed bytes, so each vector of weights goes
   back to signed (xor 0x80), its sign moves onto the token's broadcast
   word and maddubs meets |w| (a pair at most 2 * 128 * 127, inside int16);
   madd widens the pairs, so lane r holds row r's dot of word j. A row's 8
   words add up in 32 bits, the block's integer dot, and sum * (d * dx)
   goes into one chain a row, block after block (pack.c's Q4_0 order): a
   token alone sums as it does in a batch. The weights' sign and |w| are
   made once a vector for T tokens, which is most of the gain over the
   unpacked tiles (their 8 lane sums a row and token are llama.cpp's order,
   kept for contexts that ask for it: infer__avx2_q8_0_gemm_ordered). */
INFER__AVX2_INLINE __m256i infer__avx2_pk_q8_word(__m256i v, __m256i a, const int8_t *xq) {
    int32_t w;
    memcpy(&w, xq, 4);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(_mm256_set1_epi32(w), v)), _mm256_set1_epi16(1));
}
INFER__AVX2_INLINE void infer__avx2_pk_q8_tile(const int T, int nb, const uint8_t *gp, const uint8_t *x, size_t x_stride,
                                               float *y, size_t ldy, int nr) {
    __m256 fa[INFER__AVX2_PK_TMAX], fb[INFER__AVX2_PK_TMAX];
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    int b, j, t;
    for (t = 0; t < T; t++) fa[t] = fb[t] = _mm256_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint8_t *q = gp + infer__pack_q_at(b, 32), *d = gp + infer__pack_d_at(b, 32);
        __m256i sa[INFER__AVX2_PK_TMAX], sb[INFER__AVX2_PK_TMAX];
        __m256 da, db;
        for (t = 0; t < T; t++) sa[t] = sb[t] = _mm256_setzero_si256();
        for (j = 0; j < 8; j++) {
            __m256i va = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + 64 * j)), flip);
            __m256i vb = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + 64 * j + 32)), flip);
            __m256i aa = _mm256_abs_epi8(va), ab = _mm256_abs_epi8(vb);
            for (t = 0; t < T; t++) {
                const infer__block_q8_0 *xb = (const infer__block_q8_0 *)(x + (size_t)t * x_stride) + b;
                sa[t] = _mm256_add_epi32(sa[t], infer__avx2_pk_q8_word(va, aa, xb->qs + 4 * j));
                sb[t] = _mm256_add_epi32(sb[t], infer__avx2_pk_q8_word(vb, ab, xb->qs + 4 * j));
            }
        }
        da = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
        db = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 16)));
        for (t = 0; t < T; t++) {
            __m256 vx = _mm256_set1_ps(INFER__X86_F16(((const infer__block_q8_0 *)(x + (size_t)t * x_stride) + b)->d));
            fa[t] = _mm256_add_ps(fa[t], _mm256_mul_ps(_mm256_cvtepi32_ps(sa[t]), _mm256_mul_ps(da, vx)));
            fb[t] = _mm256_add_ps(fb[t], _mm256_mul_ps(_mm256_cvtepi32_ps(sb[t]), _mm256_mul_ps(db, vx)));
        }
    }
    for (t = 0; t < T; t++) {
        float out[INFER__PACK_ROWS];
        _mm256_storeu_ps(out, fa[t]);
        _mm256_storeu_ps(out + 8, fb[t]);
        memcpy(y + (size_t)t * ldy, out, (size_t)nr * sizeof(float));
    }
}
/* A packed product a group and up to 4 tokens at a time; kind: 0 Q4_0, 1
   Q4_1, 2 Q8_0 (a constant where it is inlined). */
INFER__AVX2_INLINE void infer__avx2_pk_drive(const int kind, int n, const void *packed, int n_rows, const void *x,
                                          size_t x_stride, int n_tok, float *y, size_t ldy) {
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, g, t;
    size_t gbytes = kind == 1 ? infer__pack_q_1_group_bytes(n, 0) : infer__pack_group_bytes(n, kind == 2 ? 32 : 16);
    for (g = 0; g < ng; g++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
        int nr = INFER__MIN(INFER__PACK_ROWS, n_rows - g * INFER__PACK_ROWS);
        for (t = 0; t < n_tok; t += INFER__AVX2_PK_TMAX) {
            const uint8_t *xt = (const uint8_t *)x + (size_t)t * x_stride;
            float *yt = y + (size_t)t * ldy + (size_t)g * INFER__PACK_ROWS;
            switch (INFER__MIN(INFER__AVX2_PK_TMAX, n_tok - t)) { /* T a constant in each: the loops unroll */
            case 1:
                if (kind == 2) infer__avx2_pk_q8_tile(1, nb, gp, xt, x_stride, yt, ldy, nr);
                else infer__avx2_pk_q4_tile(1, kind, nb, gp, xt, x_stride, yt, ldy, nr);
                break;
            case 2:
                if (kind == 2) infer__avx2_pk_q8_tile(2, nb, gp, xt, x_stride, yt, ldy, nr);
                else infer__avx2_pk_q4_tile(2, kind, nb, gp, xt, x_stride, yt, ldy, nr);
                break;
            case 3:
                if (kind == 2) infer__avx2_pk_q8_tile(3, nb, gp, xt, x_stride, yt, ldy, nr);
                else infer__avx2_pk_q4_tile(3, kind, nb, gp, xt, x_stride, yt, ldy, nr);
                break;
            default:
                if (kind == 2) infer__avx2_pk_q8_tile(4, nb, gp, xt, x_stride, yt, ldy, nr);
                else infer__avx2_pk_q4_tile(4, kind, nb, gp, xt, x_stride, yt, ldy, nr);
                break;
            }
        }
    }
}
INFER__X86_PACKED_ENTRY(INFER__AVX2, infer__avx2_q4_0_gemm_packed, infer__avx2_pk_drive, 0)
INFER__X86_PACKED_ENTRY(INFER__AVX2, infer__avx2_q4_1_gemm_packed, infer__avx2_pk_drive, 1)
INFER__X86_PACKED_ENTRY(INFER__AVX2, infer__avx2_q8_0_gemm_packed, infer__avx2_pk_drive, 2)

/* Packed Q8_0 in llama.cpp's order (gemm_packed_ordered): its vec_dot's
   eight lane sums a row (lane j: word j's dot times d * dx, one fused
   multiply-add a block), then hsum_float_8's order, a token at a time
   while the group stays in cache. Both halves of a group (8 rows each) go
   block by block, so that one stream of the weights meets the arithmetic
   (a half at a time read the group twice, once from memory without the
   work to hide it: Gemma 3's generation lost 18%); 16 sums, so some live
   in memory. Bit for bit the scalar vec_dot. */
INFER__AVX2 static void infer__avx2_q8_0_gemm_packed_ordered(int n, const void *packed, int n_rows, const void *x,
                                                             size_t x_stride, int n_tok, float *y, size_t ldy) {
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, g, t, h, b, j;
    size_t gbytes = infer__pack_group_bytes(n, 32);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (g = 0; g < ng; g++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
        int nr = INFER__MIN(INFER__PACK_ROWS, n_rows - g * INFER__PACK_ROWS);
        for (t = 0; t < n_tok; t++) {
            const infer__block_q8_0 *xt = (const infer__block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);
            __m256 f[2][8];
            float out[INFER__PACK_ROWS];
            for (h = 0; h < 2; h++)
                for (j = 0; j < 8; j++) f[h][j] = _mm256_setzero_ps();
            for (b = 0; b < nb; b++) {
                const uint8_t *q = gp + infer__pack_q_at(b, 32), *d = gp + infer__pack_d_at(b, 32);
                __m256 vx = _mm256_set1_ps(INFER__X86_F16(xt[b].d));
                for (h = 0; h < 2; h++) {
                    __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 16 * h))), vx);
                    for (j = 0; j < 8; j++) {
                        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + 64 * j + 32 * h)), flip);
                        f[h][j] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(infer__avx2_pk_q8_word(v, _mm256_abs_epi8(v), xt[b].qs + 4 * j)),
                                                  f[h][j]);
                    }
                }
            }
            for (h = 0; h < 2; h++)
                _mm256_storeu_ps(out + 8 * h, _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(f[h][4], f[h][0]), _mm256_add_ps(f[h][6], f[h][2])),
                                                            _mm256_add_ps(_mm256_add_ps(f[h][5], f[h][1]), _mm256_add_ps(f[h][7], f[h][3]))));
            memcpy(y + (size_t)t * ldy + (size_t)g * INFER__PACK_ROWS, out, (size_t)nr * sizeof(float));
        }
    }
}
#undef INFER__AVX2_PK_TMAX

/* ---- GEMM: a tile of up to 3 weight rows x 3 tokens in registers ---- of up to 3 weight rows x 3 tokens in registers ----
   Each row's block is unpacked once per tile, each token's once, instead of
   once per product; the sums are the vec_dot kernels', block by block. Q8_0
   moves the weight's sign onto the activation per product; Q4_0 and Q5_0
   dot their unsigned values and take 8 (16) * sum(x) back. */
#define INFER__AVX2_GEMM_BODY(R, T, WBLK, LOADW, ABSW, FIXX, DOT)                                                     \
    do {                                                                                                               \
        __m256 acc[R][T];                                                                                              \
        int b_, r_, t_;                                                                                                \
        for (r_ = 0; r_ < R; r_++)                                                                                     \
            for (t_ = 0; t_ < T; t_++) acc[r_][t_] = _mm256_setzero_ps();                                              \
        for (b_ = 0; b_ < nb; b_++) {                                                                                  \
            __m256i wq[R], wa[R];                                                                                      \
            float wd[R];                                                                                               \
            for (r_ = 0; r_ < R; r_++) {                                                                               \
                const WBLK *a_ = (const WBLK *)((const uint8_t *)w + (size_t)r_ * w_stride) + b_;                      \
                wq[r_] = LOADW(a_);                                                                                    \
                wa[r_] = ABSW(wq[r_]);                                                                                 \
                wd[r_] = INFER__X86_F16(a_->d);                                                                        \
            }                                                                                                          \
            for (t_ = 0; t_ < T; t_++) {                                                                               \
                const infer__block_q8_0 *x_ = (const infer__block_q8_0 *)((const uint8_t *)x + (size_t)t_ * x_stride) + b_; \
                __m256i xq_ = _mm256_loadu_si256((const __m256i *)x_->qs), xc_ = FIXX(xq_);                            \
                float xd_ = INFER__X86_F16(x_->d);                                                                     \
                for (r_ = 0; r_ < R; r_++) {                                                                           \
                    __m256i p_ = DOT(wq[r_], wa[r_], xq_, xc_);                                                        \
                    acc[r_][t_] = _mm256_fmadd_ps(_mm256_set1_ps(wd[r_] * xd_), _mm256_cvtepi32_ps(p_), acc[r_][t_]);  \
                }                                                                                                      \
                (void)xc_;                                                                                             \
            }                                                                                                          \
            (void)wa;                                                                                                  \
        }                                                                                                              \
        for (t_ = 0; t_ < T; t_++)                                                                                     \
            for (r_ = 0; r_ < R; r_++) y[(size_t)t_ * ldy + r_] = infer__avx2_hsum(acc[r_][t_]);                       \
    } while (0)
#define INFER__AVX2_GEMM_CASES(A, B, C, D, E)                                                                              \
    if (R == 3 && T == 3) { INFER__AVX2_GEMM_BODY(3, 3, A, B, C, D, E); return; }                                          \
    if (R == 3 && T == 2) { INFER__AVX2_GEMM_BODY(3, 2, A, B, C, D, E); return; }                                          \
    if (R == 3 && T == 1) { INFER__AVX2_GEMM_BODY(3, 1, A, B, C, D, E); return; }                                          \
    if (R == 2 && T == 3) { INFER__AVX2_GEMM_BODY(2, 3, A, B, C, D, E); return; }                                          \
    if (R == 2 && T == 2) { INFER__AVX2_GEMM_BODY(2, 2, A, B, C, D, E); return; }                                          \
    if (R == 2 && T == 1) { INFER__AVX2_GEMM_BODY(2, 1, A, B, C, D, E); return; }                                          \
    if (R == 1 && T == 3) { INFER__AVX2_GEMM_BODY(1, 3, A, B, C, D, E); return; }                                          \
    if (R == 1 && T == 2) { INFER__AVX2_GEMM_BODY(1, 2, A, B, C, D, E); return; }                                          \
    INFER__AVX2_GEMM_BODY(1, 1, A, B, C, D, E)
#define INFER__G_Q8_LD(a) _mm256_loadu_si256((const __m256i *)(a)->qs)
#define INFER__G_Q4_LD(a) infer__avx2_nibbles((a)->qs)
#define INFER__G_Q5_LD(a) _mm256_or_si256(infer__avx2_nibbles((a)->qs), infer__avx2_fifth_bits((a)->qh))
#define INFER__G_ABS(q) _mm256_abs_epi8(q)
#define INFER__G_NONE(q) _mm256_setzero_si256()
#define INFER__G_SUM8(q) infer__avx2_dot_us(_mm256_set1_epi8(8), q)
#define INFER__G_SUM16(q) infer__avx2_dot_us(_mm256_set1_epi8(16), q)
#define INFER__G_DOT_SS(wq, wa, xq, xc) infer__avx2_dot_us(wa, _mm256_sign_epi8(xq, wq))
#define INFER__G_DOT_US(wq, wa, xq, xc) _mm256_sub_epi32(infer__avx2_dot_us(wq, xq), xc)
#define INFER__G_TILE(name, A, B, C, D, E)                                                                                      \
    INFER__AVX2_INLINE void name(int R, int T, int nb, const void *w, size_t w_stride, const void *x, size_t x_stride, \
                                 float *y, size_t ldy) {                                                               \
        INFER__AVX2_GEMM_CASES(A, B, C, D, E);                                                                                  \
    }
INFER__G_TILE(infer__avx2_q8_0_tile, infer__block_q8_0, INFER__G_Q8_LD, INFER__G_ABS, INFER__G_NONE, INFER__G_DOT_SS)
INFER__G_TILE(infer__avx2_q4_0_tile, infer__block_q4_0, INFER__G_Q4_LD, INFER__G_NONE, INFER__G_SUM8, INFER__G_DOT_US)
INFER__G_TILE(infer__avx2_q5_0_tile, infer__block_q5_0, INFER__G_Q5_LD, INFER__G_NONE, INFER__G_SUM16, INFER__G_DOT_US)
#define INFER__G_DRIVER(name, tile)                                                                                    \
    INFER__AVX2 static void name(int n, const void *w, size_t w_stride, int n_rows, const void *x, size_t x_stride,   \
                                 int n_tok, float *y, size_t ldy) {                                                    \
        int r, t;                                                                                                      \
        for (r = 0; r < n_rows; r += 3)                                                                                \
            for (t = 0; t < n_tok; t += 3)                                                                             \
                tile(INFER__MIN(3, n_rows - r), INFER__MIN(3, n_tok - t), n / 32,                                      \
                     (const uint8_t *)w + (size_t)r * w_stride, w_stride, (const uint8_t *)x + (size_t)t * x_stride,   \
                     x_stride, y + (size_t)t * ldy + r, ldy);                                                          \
    }
INFER__G_DRIVER(infer__avx2_q8_0_gemm, infer__avx2_q8_0_tile)
INFER__G_DRIVER(infer__avx2_q4_0_gemm, infer__avx2_q4_0_tile)
INFER__G_DRIVER(infer__avx2_q5_0_gemm, infer__avx2_q5_0_tile)
#undef INFER__G_DRIVER
#undef INFER__G_TILE
#undef INFER__G_DOT_US
#undef INFER__G_DOT_SS
#undef INFER__G_SUM16
#undef INFER__G_SUM8
#undef INFER__G_NONE
#undef INFER__G_ABS
#undef INFER__G_Q5_LD
#undef INFER__G_Q4_LD
#undef INFER__G_Q8_LD
#undef INFER__AVX2_GEMM_CASES
#undef INFER__AVX2_GEMM_BODY


/* ---- K-quants and IQ4 ----
   The 256-value formats sum their integer products per super-block exactly
   (as int32) and scale once, in the reference's float order: these give
   the scalar kernels' results bit for bit. */

INFER__AVX2_INLINE int infer__avx2_hsum_i32(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtsi128_si32(h);
}

INFER__AVX2 static void infer__avx2_q8_K_from_float(const float *x, void *dst, int64_t n) {
    infer__block_q8_K *y = (infer__block_q8_K *)dst;
    int64_t b;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        const __m256 sign = _mm256_set1_ps(-0.0f);
        __m256 m = _mm256_setzero_ps(), is;
        __m128 h;
        float amax, max = 0, iscale;
        int j;
        for (j = 0; j < INFER__QK_K; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        amax = _mm_cvtss_f32(h);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the first value of largest magnitude, with its sign */
        for (j = 0; j < INFER__QK_K; j += 8) {
            int mask = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (mask) {
                max = x[j + infer__ctz((unsigned)mask)];
                break;
            }
        }
        iscale = -127.0f / max;
        is = _mm256_set1_ps(iscale);
        for (j = 0; j < INFER__QK_K; j += 32) {
            const __m256i top = _mm256_set1_epi32(127);
            __m256i q0 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j))), top);
            __m256i q1 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8))), top);
            __m256i q2 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 16))), top);
            __m256i q3 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 24))), top);
            __m256i s01 = _mm256_add_epi32(q0, q1), s23 = _mm256_add_epi32(q2, q3);
            _mm256_storeu_si256((__m256i *)(y[b].qs + j), infer__avx2_pack32(q0, q1, q2, q3));
            y[b].bsums[j / 16] = (int16_t)infer__avx2_hsum_i32(s01);
            y[b].bsums[j / 16 + 1] = (int16_t)infer__avx2_hsum_i32(s23);
        }
        y[b].d = 1 / iscale;
    }
}

INFER__AVX2 static float infer__avx2_q4_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q4_K *a = (const infer__block_q4_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float acc_d = 0, acc_m = 0; /* llama.cpp's repacked Q4_K order: the two sums apart, then subtracted */
    int b, j;
    for (b = 0; b < n / INFER__QK_K; b++) {
        uint8_t sm[16];
        const uint8_t *q = a[b].qs;
        const int8_t *q8 = x[b].qs;
        const int16_t *bs = x[b].bsums;
        __m256i acc = _mm256_setzero_si256();
        int summ = 0;
        infer__k4_scales(a[b].scales, sm);
        for (j = 0; j < 4; j++, q += 32, q8 += 64) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)q);
            __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(qv, m4), _mm256_loadu_si256((const __m256i *)q8));
            __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(qv, 4), m4),
                                              _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(lo, _mm256_set1_epi16(sm[2 * j])));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(hi, _mm256_set1_epi16(sm[2 * j + 1])));
            summ += sm[8 + 2 * j] * (bs[4 * j] + bs[4 * j + 1]) + sm[8 + 2 * j + 1] * (bs[4 * j + 2] + bs[4 * j + 3]);
        }
        acc_d = fmaf((float)infer__avx2_hsum_i32(acc), infer__fp16_to_fp32(a[b].d) * x[b].d, acc_d);
        acc_m = fmaf((float)summ, infer__fp16_to_fp32(a[b].dmin) * x[b].d, acc_m);
    }
    return acc_d - acc_m;
}

INFER__AVX2 static float infer__avx2_q5_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q5_K *a = (const infer__block_q5_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    float s = 0;
    int b, j;
    for (b = 0; b < n / INFER__QK_K; b++) {
        uint8_t sm[16];
        const uint8_t *q = a[b].qs;
        const int8_t *q8 = x[b].qs;
        const int16_t *bs = x[b].bsums;
        __m256i acc = _mm256_setzero_si256(), hb = _mm256_loadu_si256((const __m256i *)a[b].qh);
        int summ = 0;
        infer__k4_scales(a[b].scales, sm);
        for (j = 0; j < 4; j++, q += 32, q8 += 64) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)q);
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, one), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4);
            __m256i lo = _mm256_maddubs_epi16(_mm256_or_si256(_mm256_and_si256(qv, m4), h0),
                                              _mm256_loadu_si256((const __m256i *)q8));
            __m256i hi = _mm256_maddubs_epi16(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qv, 4), m4), h1),
                                              _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            hb = _mm256_srli_epi16(hb, 2);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(lo, _mm256_set1_epi16(sm[2 * j])));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(hi, _mm256_set1_epi16(sm[2 * j + 1])));
            summ += sm[8 + 2 * j] * (bs[4 * j] + bs[4 * j + 1]) + sm[8 + 2 * j + 1] * (bs[4 * j + 2] + bs[4 * j + 3]);
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * infer__avx2_hsum_i32(acc) -
             x[b].d * infer__fp16_to_fp32(a[b].dmin) * summ;
    }
    return s;
}

INFER__AVX2 static float infer__avx2_q6_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q6_K *a = (const infer__block_q6_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    float s = 0;
    int b, h, k;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *q8 = x[b].qs;
        __m256i acc = _mm256_setzero_si256();
        for (h = 0; h < 2; h++) {
            const uint8_t *ql = a[b].ql + 64 * h;
            __m256i qh = _mm256_loadu_si256((const __m256i *)(a[b].qh + 32 * h));
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            for (k = 0; k < 4; k++, q8 += 32) {
                __m256i lo = k == 0 ? _mm256_and_si256(l0, m4)
                           : k == 1 ? _mm256_and_si256(l1, m4)
                           : k == 2 ? _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4)
                                    : _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4);
                __m256i hi = _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4);
                __m256i y8 = _mm256_loadu_si256((const __m256i *)q8);
                /* (q - 32) . y as q . y - 32 . y, pairs in int16 */
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_or_si256(lo, hi), y8), _mm256_maddubs_epi16(k32, y8));
                __m256i sc = _mm256_set_m128i(_mm_set1_epi16(a[b].scales[8 * h + 2 * k + 1]),
                                              _mm_set1_epi16(a[b].scales[8 * h + 2 * k]));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
                qh = _mm256_srli_epi16(qh, 2);
            }
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * infer__avx2_hsum_i32(acc);
    }
    return s;
}

INFER__AVX2 static float infer__avx2_q2_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q2_K *a = (const infer__block_q2_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    const __m256i m3 = _mm256_set1_epi8(3);
    float s = 0;
    int b, h, j, k;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *q8 = x[b].qs;
        const uint8_t *sc = a[b].scales;
        __m256i acc = _mm256_setzero_si256();
        int summ = 0;
        for (k = 0; k < 16; k++) summ += x[b].bsums[k] * (sc[k] >> 4);
        for (h = 0; h < 2; h++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(a[b].qs + 32 * h));
            /* shift j: bytes 0..15 are sub-block 8h+2j, 16..31 sub-block 8h+2j+1 */
            for (j = 0; j < 4; j++, q8 += 32) {
                __m256i p = _mm256_maddubs_epi16(_mm256_and_si256(q, m3), _mm256_loadu_si256((const __m256i *)q8));
                __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[8 * h + 2 * j + 1] & 0xF), _mm_set1_epi16(sc[8 * h + 2 * j] & 0xF));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scv));
                q = _mm256_srli_epi16(q, 2);
            }
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * infer__avx2_hsum_i32(acc) -
             x[b].d * infer__fp16_to_fp32(a[b].dmin) * summ;
    }
    return s;
}

INFER__AVX2 static float infer__avx2_q3_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q3_K *a = (const infer__block_q3_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), k4 = _mm256_set1_epi8(4);
    float s = 0;
    int b, h, j, k;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *q8 = x[b].qs;
        __m256i acc = _mm256_setzero_si256(), hm = _mm256_loadu_si256((const __m256i *)a[b].hmask);
        int16_t sc[16];
        for (k = 0; k < 16; k++) sc[k] = (int16_t)infer__scale_q3_K(k, a[b].scales);
        for (h = 0; h < 2; h++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(a[b].qs + 32 * h));
            for (j = 0; j < 4; j++, q8 += 32) {
                /* (q | hbit << 2) - 4: the third bit set means no offset */
                __m256i u = _mm256_or_si256(_mm256_and_si256(q, m3), _mm256_slli_epi16(_mm256_and_si256(hm, one), 2));
                __m256i y = _mm256_loadu_si256((const __m256i *)q8);
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, y), _mm256_maddubs_epi16(k4, y));
                __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[8 * h + 2 * j + 1]), _mm_set1_epi16(sc[8 * h + 2 * j]));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scv));
                q = _mm256_srli_epi16(q, 2);
                hm = _mm256_srli_epi16(hm, 1);
            }
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * infer__avx2_hsum_i32(acc);
    }
    return s;
}

/* the IQ4 grid: 4-bit indices to int8 values */
INFER__AVX2_INLINE __m256i infer__avx2_iq4_values(__m256i idx) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)infer__iq4nl_values));
    return _mm256_shuffle_epi8(table, idx);
}

INFER__AVX2 static float infer__avx2_iq4_nl_dot(int n, const void *w, const void *xv) {
    const infer__block_iq4_nl *a = (const infer__block_iq4_nl *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    __m256 acc = _mm256_setzero_ps();
    int b, nb = n / 32;
    for (b = 0; b < nb; b++) {
        __m256i q = infer__avx2_iq4_values(infer__avx2_nibbles(a[b].qs));
        __m256i p = infer__avx2_dot_ss(q, _mm256_loadu_si256((const __m256i *)x[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(a[b].d) * _cvtsh_ss(x[b].d)),
                              _mm256_cvtepi32_ps(p), acc);
    }
    return infer__avx2_hsum(acc);
}

/* MXFP4: IQ4_NL's kernel with E2M1's doubled grid, each block's integer
   sum scaled and added in order (as the plain C does): the largest
   scales (2^127) overflow a float where lanes are scaled apart */
INFER__AVX2 static float infer__avx2_mxfp4_dot(int n, const void *w, const void *xv) {
    const infer__block_mxfp4 *a = (const infer__block_mxfp4 *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)infer__mxfp4_values));
    float s = 0;
    int b, nb = n / 32;
    for (b = 0; b < nb; b++) {
        __m256i q = _mm256_shuffle_epi8(table, infer__avx2_nibbles(a[b].qs));
        __m256i p = infer__avx2_dot_ss(q, _mm256_loadu_si256((const __m256i *)x[b].qs));
        s += _cvtsh_ss(x[b].d) * infer__e8m0_half(a[b].e) * (float)infer__avx2_hsum_i32(p);
    }
    return s;
}

/* MXFP4's prompt tile: up to 4 rows x 4 tokens, each weight block looked
   up once for the tokens and each token's block loaded once for the rows;
   every (row, token) sums as vec_dot does (the block's integer sum, then
   xd * 2^(e-128) times it added in block order), so the same results to
   the bit and no lanes scaled apart */
INFER__AVX2 static void infer__avx2_mxfp4_gemm(int n, const void *w, size_t w_stride, int n_rows, const void *x,
                                               size_t x_stride, int n_tok, float *y, size_t ldy) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)infer__mxfp4_values));
    int nb = n / 32, r0, t0, b, r, t;
    for (r0 = 0; r0 < n_rows; r0 += 4)
        for (t0 = 0; t0 < n_tok; t0 += 4) {
            int nr = INFER__MIN(4, n_rows - r0), nt = INFER__MIN(4, n_tok - t0);
            float s[4][4] = {{0}};
            for (b = 0; b < nb; b++) {
                __m256i wq[4];
                float we[4];
                for (r = 0; r < nr; r++) {
                    const infer__block_mxfp4 *a =
                        (const infer__block_mxfp4 *)((const uint8_t *)w + (size_t)(r0 + r) * w_stride) + b;
                    wq[r] = _mm256_shuffle_epi8(table, infer__avx2_nibbles(a->qs));
                    we[r] = infer__e8m0_half(a->e);
                }
                for (t = 0; t < nt; t++) {
                    const infer__block_q8_0 *xb =
                        (const infer__block_q8_0 *)((const uint8_t *)x + (size_t)(t0 + t) * x_stride) + b;
                    __m256i xq = _mm256_loadu_si256((const __m256i *)xb->qs);
                    float xd = _cvtsh_ss(xb->d);
                    for (r = 0; r < nr; r++)
                        s[r][t] += xd * we[r] * (float)infer__avx2_hsum_i32(infer__avx2_dot_ss(wq[r], xq));
                }
            }
            for (t = 0; t < nt; t++)
                for (r = 0; r < nr; r++) y[(size_t)(t0 + t) * ldy + r0 + r] = s[r][t];
        }
}

INFER__AVX2 static float infer__avx2_iq4_xs_dot(int n, const void *w, const void *xv) {
    const infer__block_iq4_xs *a = (const infer__block_iq4_xs *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float s = 0;
    int b, k;
    for (b = 0; b < n / INFER__QK_K; b++) {
        __m256i acc = _mm256_setzero_si256();
        for (k = 0; k < 8; k++) {
            int ls = (((a[b].scales_l[k / 2] >> (4 * (k % 2))) & 0xF) | ((a[b].scales_h >> (2 * k)) & 3) << 4) - 32;
            __m256i q = infer__avx2_iq4_values(infer__avx2_nibbles(a[b].qs + 16 * k));
            __m256i p = infer__avx2_dot_ss(q, _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * k)));
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, _mm256_set1_epi32(ls)));
        }
        s += infer__fp16_to_fp32(a[b].d) * x[b].d * infer__avx2_hsum_i32(acc);
    }
    return s;
}
/* ---- elementwise math and attention (vecmath.c has the plain C) ----
   exp is evaluated like llama.cpp's vector exp (range reduction by ln 2, a
   polynomial, then scaling by 2^n), within about 2 ulp of expf. */

INFER__AVX2 static void infer__avx2_lanes16_fma(float *acc, int as, const float *v, const float *p, int n) {
    __m256 p0 = _mm256_loadu_ps(p), p1 = _mm256_loadu_ps(p + 8);
    int d;
    for (d = 0; d < n; d++) {
        float *a = acc + (size_t)as * d;
        _mm256_storeu_ps(a, _mm256_fmadd_ps(_mm256_loadu_ps(v + 16 * d), p0, _mm256_loadu_ps(a)));
        _mm256_storeu_ps(a + 8, _mm256_fmadd_ps(_mm256_loadu_ps(v + 16 * d + 8), p1, _mm256_loadu_ps(a + 8)));
    }
}

/* Row i's p * scale for the n keys of a block column, into c. */
INFER__AVX2_INLINE void infer__avx2_pv_coef(const uint16_t *pr, const float *scale, int n, float *c) {
    int j;
    for (j = 0; j + 8 <= n; j += 8)
        _mm256_storeu_ps(c + j, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pr + j))),
                                              _mm256_loadu_ps(scale + j)));
    for (; j < n; j++) c[j] = infer__fp16_to_fp32(pr[j]) * scale[j];
}

/* One block column of up to 64 keys, dequantized (vals[32 j + d], scale[j]),
   into every row: a row's 32 sums stay in registers over the keys, each
   product fused as (p * scale) * q in key order, as the plain C has it.
   Two rows at a time share each key's values loaded (one row's FMAs were
   bound by the loads); each row's arithmetic is the same either way.
   A key of p = 0 adds an exact zero, so it need not be skipped. */
INFER__AVX2_INLINE void infer__avx2_pv_rows(const float *vals, const float *scale, int n, const uint16_t *p, size_t ldp,
                                            int nq, float *acc, int hd) {
    float c[64], e[64];
    int i = 0, j;
    for (; i + 2 <= nq; i += 2) {
        float *a = acc + (size_t)i * hd, *b = a + hd;
        __m256 a0 = _mm256_loadu_ps(a), a1 = _mm256_loadu_ps(a + 8), a2 = _mm256_loadu_ps(a + 16), a3 = _mm256_loadu_ps(a + 24);
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), b2 = _mm256_loadu_ps(b + 16), b3 = _mm256_loadu_ps(b + 24);
        infer__avx2_pv_coef(p + (size_t)i * ldp, scale, n, c);
        infer__avx2_pv_coef(p + (size_t)(i + 1) * ldp, scale, n, e);
        for (j = 0; j < n; j++) {
            __m256 cj = _mm256_broadcast_ss(c + j), ej = _mm256_broadcast_ss(e + j);
            const float *q = vals + 32 * j;
            __m256 q0 = _mm256_loadu_ps(q), q1 = _mm256_loadu_ps(q + 8), q2 = _mm256_loadu_ps(q + 16), q3 = _mm256_loadu_ps(q + 24);
            a0 = _mm256_fmadd_ps(cj, q0, a0), b0 = _mm256_fmadd_ps(ej, q0, b0);
            a1 = _mm256_fmadd_ps(cj, q1, a1), b1 = _mm256_fmadd_ps(ej, q1, b1);
            a2 = _mm256_fmadd_ps(cj, q2, a2), b2 = _mm256_fmadd_ps(ej, q2, b2);
            a3 = _mm256_fmadd_ps(cj, q3, a3), b3 = _mm256_fmadd_ps(ej, q3, b3);
        }
        _mm256_storeu_ps(a, a0), _mm256_storeu_ps(a + 8, a1), _mm256_storeu_ps(a + 16, a2), _mm256_storeu_ps(a + 24, a3);
        _mm256_storeu_ps(b, b0), _mm256_storeu_ps(b + 8, b1), _mm256_storeu_ps(b + 16, b2), _mm256_storeu_ps(b + 24, b3);
    }
    for (; i < nq; i++) {
        float *a = acc + (size_t)i * hd;
        __m256 a0 = _mm256_loadu_ps(a), a1 = _mm256_loadu_ps(a + 8), a2 = _mm256_loadu_ps(a + 16), a3 = _mm256_loadu_ps(a + 24);
        infer__avx2_pv_coef(p + (size_t)i * ldp, scale, n, c);
        for (j = 0; j < n; j++) {
            __m256 cj = _mm256_broadcast_ss(c + j);
            const float *q = vals + 32 * j;
            a0 = _mm256_fmadd_ps(cj, _mm256_loadu_ps(q), a0);
            a1 = _mm256_fmadd_ps(cj, _mm256_loadu_ps(q + 8), a1);
            a2 = _mm256_fmadd_ps(cj, _mm256_loadu_ps(q + 16), a2);
            a3 = _mm256_fmadd_ps(cj, _mm256_loadu_ps(q + 24), a3);
        }
        _mm256_storeu_ps(a, a0), _mm256_storeu_ps(a + 8, a1), _mm256_storeu_ps(a + 16, a2), _mm256_storeu_ps(a + 24, a3);
    }
}

INFER__AVX2 static void infer__avx2_pv_q8_0(int hd, const uint8_t *v, size_t v_stride, int kt, const uint16_t *p,
                                            size_t ldp, int nq, float *acc) {
    float vals[64 * 32], scale[64];
    int j0, j, b, k;
    for (j0 = 0; j0 < kt; j0 += 64) {
        int n = INFER__MIN(64, kt - j0);
        for (b = 0; b < hd / 32; b++) {
            for (j = 0; j < n; j++) {
                const infer__block_q8_0 *blk = (const infer__block_q8_0 *)(const void *)(v + (size_t)(j0 + j) * v_stride) + b;
                for (k = 0; k < 4; k++)
                    _mm256_storeu_ps(vals + 32 * j + 8 * k, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                                _mm_loadl_epi64((const __m128i *)(const void *)(blk->qs + 8 * k)))));
                scale[j] = infer__fp16_to_fp32(blk->d);
            }
            infer__avx2_pv_rows(vals, scale, n, p + j0, ldp, nq, acc + 32 * b, hd);
        }
    }
}

INFER__AVX2 static void infer__avx2_pv_q4_0(int hd, const uint8_t *v, size_t v_stride, int kt, const uint16_t *p,
                                            size_t ldp, int nq, float *acc) {
    const __m128i low = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    float vals[64 * 32], scale[64];
    int j0, j, b;
    for (j0 = 0; j0 < kt; j0 += 64) {
        int n = INFER__MIN(64, kt - j0);
        for (b = 0; b < hd / 32; b++) {
            for (j = 0; j < n; j++) {
                const infer__block_q4_0 *blk = (const infer__block_q4_0 *)(const void *)(v + (size_t)(j0 + j) * v_stride) + b;
                __m128i x = _mm_loadu_si128((const __m128i *)(const void *)blk->qs);
                __m128i lo = _mm_sub_epi8(_mm_and_si128(x, low), eight);
                __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), low), eight);
                float *o = vals + 32 * j;
                _mm256_storeu_ps(o, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
                _mm256_storeu_ps(o + 8, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))));
                _mm256_storeu_ps(o + 16, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
                _mm256_storeu_ps(o + 24, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))));
                scale[j] = infer__fp16_to_fp32(blk->d);
            }
            infer__avx2_pv_rows(vals, scale, n, p + j0, ldp, nq, acc + 32 * b, hd);
        }
    }
}


/* e^x in 8 lanes (INFER__X86_EXP_TAYLOR), as AVX-512's but without its
   scalef: x is clamped to [-87, 88] first so that 2^n stays a normal float
   (silu then differs from the exact value by under 1e-36 where exp
   overflows or underflows). */
INFER__AVX2_INLINE __m256 infer__avx2_exp(__m256 x) {
    __m256 n, r, p;
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    INFER__X86_EXP_TAYLOR(x, n, r, p, _mm256_fmadd_ps, _mm256_fnmadd_ps, _mm256_set1_ps);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(
                                _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)));
}

/* Attention's softmax of a key tile (infer__kernels.softmax_stats and
   _probs, and the whole row's scaled_max, softmax_exp, probs_f16) in 8
   lanes: the keys j.. j + 7 outside [lo, hi) masked. */
INFER__AVX2_INLINE __m256 infer__avx2_seen(int j, int lo, int hi) {
    __m256i at = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(j));
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_cmpgt_epi32(at, _mm256_set1_epi32(lo - 1)), _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), at)));
}

/* s[j..j+8) where j + 8 may pass n: the keys past it read as 0 */
INFER__AVX2_INLINE __m256 infer__avx2_load_upto(const float *s, int j, int n) {
    float tmp[8] = {0};
    if (n - j >= 8) return _mm256_loadu_ps(s + j);
    memcpy(tmp, s + j, (size_t)(n - j) * sizeof *s);
    return _mm256_loadu_ps(tmp);
}

INFER__AVX2 static float infer__avx2_scaled_max(const float *s, int lo, int hi, float scale, float m) {
    __m256 vs = _mm256_set1_ps(scale), vmax = _mm256_set1_ps(-INFINITY);
    float t[8];
    int j;
    for (j = lo; j < hi; j += 8) {
        __m256 seen = infer__avx2_seen(j, lo, hi);
        __m256 x = _mm256_mul_ps(infer__avx2_load_upto(s, j, hi), vs);
        vmax = _mm256_blendv_ps(vmax, _mm256_max_ps(vmax, x), seen);
    }
    _mm256_storeu_ps(t, vmax);
    for (j = 0; j < 8; j++) m = INFER__MAX(m, t[j]);
    return m;
}

INFER__AVX2 static void infer__avx2_softmax_stats(const float *s, int lo, int hi, float scale, float *m, float *l) {
    __m256 vs = _mm256_set1_ps(scale), vmx;
    __m256d sum = _mm256_setzero_pd();
    float mx;
    double d[4];
    int j;
    if (lo >= hi) return;
    mx = infer__avx2_scaled_max(s, lo, hi, scale, *m);
    vmx = _mm256_set1_ps(mx);
    for (j = lo; j < hi; j += 8) {
        __m256 seen = infer__avx2_seen(j, lo, hi);
        __m256 x = _mm256_mul_ps(infer__avx2_load_upto(s, j, hi), vs);
        __m256 e = _mm256_and_ps(seen, infer__avx2_exp(_mm256_sub_ps(x, vmx)));
        sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    _mm256_storeu_pd(d, sum);
    *l = (float)((double)*l * infer__expf(*m - mx) + ((d[0] + d[1]) + (d[2] + d[3])));
    *m = mx;
}


INFER__AVX2 static double infer__avx2_softmax_exp(float *s, int n, int lo, int hi, float scale, float m) {
    __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(m);
    __m256d sum = _mm256_setzero_pd();
    double d[4];
    int j;
    for (j = 0; j < n; j += 8) {
        __m256 seen = infer__avx2_seen(j, lo, hi);
        __m256 x = _mm256_mul_ps(infer__avx2_load_upto(s, j, n), vs);
        __m256 e = _mm256_and_ps(seen, infer__avx2_exp(_mm256_sub_ps(x, vm)));
        sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
        if (n - j >= 8) {
            _mm256_storeu_ps(s + j, e);
        } else {
            float t[8];
            _mm256_storeu_ps(t, e);
            memcpy(s + j, t, (size_t)(n - j) * sizeof *s);
        }
    }
    _mm256_storeu_pd(d, sum);
    return (d[0] + d[1]) + (d[2] + d[3]);
}

INFER__AVX2 static void infer__avx2_probs_f16(const float *e, int n, float inv, uint16_t *p) {
    __m256 vinv = _mm256_set1_ps(inv);
    int j = 0;
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(void *)(p + j),
                         _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(e + j), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; j < n; j++) p[j] = infer__fp32_to_fp16(e[j] * inv);
}

INFER__AVX2 static void infer__avx2_softmax_probs(const float *s, int n, int lo, int hi, float scale, float m, float inv,
                                                  uint16_t *p) {
    __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(m), vinv = _mm256_set1_ps(inv);
    int j;
    for (j = 0; j < n; j += 8) {
        __m256 seen = infer__avx2_seen(j, lo, hi);
        __m256 x = _mm256_mul_ps(infer__avx2_load_upto(s, j, n), vs);
        __m256 e = _mm256_and_ps(seen, _mm256_mul_ps(infer__avx2_exp(_mm256_sub_ps(x, vm)), vinv));
        __m128i h = _mm256_cvtps_ph(e, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (n - j >= 8) {
            _mm_storeu_si128((__m128i *)(void *)(p + j), h);
        } else {
            uint16_t t16[8];
            _mm_storeu_si128((__m128i *)(void *)t16, h);
            memcpy(p + j, t16, (size_t)(n - j) * sizeof *p);
        }
    }
}

INFER__AVX2 static void infer__avx2_silu_mul(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), infer__avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    infer__silu_mul_ref(g + i, u + i, n - i);
}

INFER__AVX2 static void infer__avx2_gelu_mul(float *g, const float *u, int n, const float *table) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256 y = _mm256_i32gather_ps(table, h, 4);
        y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
        y = _mm256_and_ps(y, _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_GT_OQ));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(y, _mm256_loadu_ps(u + i)));
    }
    infer__gelu_mul_ref(g + i, u + i, n - i, table);
}

INFER__AVX2 static double infer__avx2_sum_squares(const float *x, int n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    double t[4];
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), sq = _mm256_mul_ps(v, v);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
    _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
    return t[0] + t[1] + t[2] + t[3] + infer__sum_squares_ref(x + i, n - i);
}

/* ---- the recurrent layers' sums, in llama.cpp's AVX2 order ---- */

/* ggml's fold of its four 8-lane accumulators: (0 + 2) + (1 + 3), the
   halves added, then the four lanes in pairs (its two hadds) */
INFER__AVX2_INLINE float infer__avx2_fold4x8(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
    __m256 v = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_hadd_ps(t, t));
}

/* ggml_vec_dot_f32: fused sums over each 32, the rest in float */
INFER__AVX2 static float infer__avx2_f32_dot_ordered(const float *x, const float *y, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    float sum;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
    }
    sum = infer__avx2_fold4x8(s0, s1, s2, s3);
    for (; i < n; i++) {
        float p = x[i] * y[i];
        sum += p;
    }
    return sum;
}

/* ggml_vec_mad_f32: y += x v, each value fused */
INFER__AVX2 static void infer__avx2_f32_mad(float *y, const float *x, float v, int n) {
    __m256 vv = _mm256_set1_ps(v);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vv, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x[i]), _mm_set_ss(v), _mm_set_ss(y[i])));
}

/* a row of ggml_ssm_scan: s = s0 dA + B x_dt (two products, then the sum),
   s . C fused into four accumulators over each 32, the rest in float */
INFER__AVX2 static float infer__avx2_ssm_row(float *s, const float *s0, const float *B, const float *C, float dA, float x_dt,
                                             int n) {
    __m256 acc[4], va = _mm256_set1_ps(dA), vx = _mm256_set1_ps(x_dt);
    float sum;
    int i = 0, j;
    for (j = 0; j < 4; j++) acc[j] = _mm256_setzero_ps();
    for (; i + 32 <= n; i += 32)
        for (j = 0; j < 4; j++) {
            int at = i + 8 * j;
            __m256 a = s0 ? _mm256_mul_ps(_mm256_loadu_ps(s0 + at), va) : _mm256_setzero_ps();
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(B + at), vx));
            acc[j] = _mm256_fmadd_ps(a, _mm256_loadu_ps(C + at), acc[j]);
            _mm256_storeu_ps(s + at, a);
        }
    sum = infer__avx2_fold4x8(acc[0], acc[1], acc[2], acc[3]);
    for (; i < n; i++) {
        float a = s0 ? s0[i] * dA : 0.0f, b = B[i] * x_dt, p;
        s[i] = a + b;
        p = s[i] * C[i];
        sum += p;
    }
    return sum;
}

/* the chunked scans' F32 product: 4 rows of c by 16 columns in registers
   (a tail by masked loads and stores), each element's sum fused in p
   order; a block past the last row repeats it, unstored */
INFER__AVX2 static void infer__avx2_f32_gemm(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m,
                                             int n, int k, int acc) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int i, j, p, r;
    for (i = 0; i < m; i += 4) {
        const float *ar[4];
        float *cr[4];
        int nr = infer__f32_gemm_rows4(a, lda, c, ldc, i, m, ar, cr);
        for (j = 0; j < n; j += 16) {
            int w = INFER__MIN(16, n - j);
            __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), lane);
            __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(w - 8), lane);
            __m256 c0[4], c1[4];
            for (r = 0; r < 4; r++) {
                c0[r] = acc ? _mm256_maskload_ps(cr[r] + j, m0) : _mm256_setzero_ps();
                c1[r] = acc ? _mm256_maskload_ps(cr[r] + j + 8, m1) : _mm256_setzero_ps();
            }
            for (p = 0; p < k; p++) {
                const float *bp = b + (size_t)p * ldb + j;
                __m256 b0 = _mm256_maskload_ps(bp, m0), b1 = _mm256_maskload_ps(bp + 8, m1);
                for (r = 0; r < 4; r++) {
                    __m256 av = _mm256_broadcast_ss(ar[r] + p);
                    c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
                    c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
                }
            }
            for (r = 0; r < nr; r++) {
                _mm256_maskstore_ps(cr[r] + j, m0, c0[r]);
                _mm256_maskstore_ps(cr[r] + j + 8, m1, c1[r]);
            }
        }
    }
}

/* a row of the gated delta rule: r = r0 decay and r . k in one pass, then
   r += k d and r . q in another (f32_dot_ordered's sums, f32_mad's update) */
INFER__AVX2 static float infer__avx2_deltanet_row(float *r, const float *r0, float decay, const float *k, const float *q,
                                                  float v, float beta, int n) {
    __m256 acc[4], vd = _mm256_set1_ps(decay), dd;
    float sum, d;
    int i, j, whole = n - n % 32;
    for (j = 0; j < 4; j++) acc[j] = _mm256_setzero_ps();
    for (i = 0; i < whole; i += 32)
        for (j = 0; j < 4; j++) {
            int at = i + 8 * j;
            __m256 x = r0 ? _mm256_mul_ps(_mm256_loadu_ps(r0 + at), vd) : _mm256_setzero_ps();
            _mm256_storeu_ps(r + at, x);
            acc[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + at), acc[j]);
        }
    sum = infer__avx2_fold4x8(acc[0], acc[1], acc[2], acc[3]);
    for (i = whole; i < n; i++) {
        float x = r0 ? r0[i] * decay : 0.0f, p;
        r[i] = x;
        p = x * k[i];
        sum += p;
    }
    d = (v - sum) * beta;
    dd = _mm256_set1_ps(d);
    for (j = 0; j < 4; j++) acc[j] = _mm256_setzero_ps();
    for (i = 0; i < whole; i += 32)
        for (j = 0; j < 4; j++) {
            int at = i + 8 * j;
            __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(k + at), dd, _mm256_loadu_ps(r + at));
            _mm256_storeu_ps(r + at, x);
            acc[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + at), acc[j]);
        }
    sum = infer__avx2_fold4x8(acc[0], acc[1], acc[2], acc[3]);
    for (i = whole; i < n; i++) {
        float p;
        r[i] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(k[i]), _mm_set_ss(d), _mm_set_ss(r[i])));
        p = r[i] * q[i];
        sum += p;
    }
    return sum;
}

/* ---- the ordered attention's steps over a tile (kernels.f16_scores_ordered,
   exp_chunks16, probs_fma16), bit for bit as their one-at-a-time forms,
   16 lanes as two registers of 8 ---- */

/* Eight keys' lanes, already halved once (h[j] lane i = lane i + lane i + 8),
   to their trees' sums out[j]: each halving for two keys in one register.
   After the last, lane m holds key 2 (m % 4) + m / 4. */
INFER__AVX2_INLINE __m256 infer__avx2_trees8(const __m256 *h) {
    __m256 a[4], b0, b1, r;
    int j;
    for (j = 0; j < 4; j++) /* lanes i + 4: keys 2j, 2j + 1 in halves */
        a[j] = _mm256_add_ps(_mm256_permute2f128_ps(h[2 * j], h[2 * j + 1], 0x20), _mm256_permute2f128_ps(h[2 * j], h[2 * j + 1], 0x31));
    /* lanes i + 2: the low half of b0 holds keys 0, 2; the high 1, 3 (b1: 4 to 7) */
    b0 = _mm256_add_ps(_mm256_shuffle_ps(a[0], a[1], _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(a[0], a[1], _MM_SHUFFLE(3, 2, 3, 2)));
    b1 = _mm256_add_ps(_mm256_shuffle_ps(a[2], a[3], _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(a[2], a[3], _MM_SHUFFLE(3, 2, 3, 2)));
    r = _mm256_add_ps(_mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

INFER__AVX2 static int infer__avx2_f16_scores_ordered(int n, int one, const uint8_t *k, size_t k_stride, int kt,
                                                      const uint8_t *q, size_t q_stride, int nq, float *s, size_t lds) {
    __m256 h[8];
    float qf[512], out[8];
    int i, j0, j, d, a;
    if (n % (one ? 64 : 16) || n > 512) return 0;
    for (i = 0; i < nq; i++) {
        const uint16_t *qi = (const uint16_t *)(const void *)(q + (size_t)i * q_stride);
        for (d = 0; d < n; d += 8) _mm256_storeu_ps(qf + d, INFER__LOADH(qi + d));
        for (j0 = 0; j0 < kt; j0 += 8) {
            int nk = INFER__MIN(8, kt - j0);
            for (j = 0; j < 8; j++) {
                const uint16_t *kj = (const uint16_t *)(const void *)(k + (size_t)(j0 + j) * k_stride);
                if (j >= nk) {
                    h[j] = _mm256_setzero_ps();
                } else if (one) { /* as infer__avx2_f16_dot_ordered1 */
                    __m256 t[8];
                    for (a = 0; a < 8; a++) t[a] = _mm256_setzero_ps();
                    for (d = 0; d < n; d += 64)
                        for (a = 0; a < 8; a++) t[a] = _mm256_fmadd_ps(INFER__LOADH(kj + d + 8 * a), _mm256_loadu_ps(qf + d + 8 * a), t[a]);
                    h[j] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(t[0], t[4]), _mm256_add_ps(t[2], t[6])),
                                         _mm256_add_ps(_mm256_add_ps(t[1], t[5]), _mm256_add_ps(t[3], t[7])));
                } else { /* as infer__avx2_f16_dot_ordered: lanes 0-7 and 8-15 in two chains */
                    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
                    for (d = 0; d < n; d += 16) {
                        s0 = _mm256_fmadd_ps(INFER__LOADH(kj + d), _mm256_loadu_ps(qf + d), s0);
                        s1 = _mm256_fmadd_ps(INFER__LOADH(kj + d + 8), _mm256_loadu_ps(qf + d + 8), s1);
                    }
                    h[j] = _mm256_add_ps(s0, s1);
                }
            }
            if (nk == 8) {
                _mm256_storeu_ps(s + (size_t)i * lds + j0, infer__avx2_trees8(h));
            } else {
                _mm256_storeu_ps(out, infer__avx2_trees8(h));
                memcpy(s + (size_t)i * lds + j0, out, (size_t)nk * sizeof(float));
            }
        }
    }
    return 1;
}

/* infer__exp_llama in 8 lanes; 2^n from its exponent bits where every lane
   has a normal one, else lane by lane as the scalar */
INFER__AVX2_INLINE __m256 infer__avx2_exp_llama_v(__m256 x) {
    const __m256 shift = _mm256_set1_ps(12582912.0f);
    __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269502f), shift), shift);
    __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-06f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x));
    __m256 u = _mm256_mul_ps(b, b);
    __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0.00824739039f), b, _mm256_set1_ps(0.0418997668f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0.166683957f), b, _mm256_set1_ps(0.499991268f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0.999999404f), b, _mm256_set1_ps(1.0f)));
    __m256 normal = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_set1_ps(-126.0f), _CMP_GE_OQ), _mm256_cmp_ps(n, _mm256_set1_ps(127.0f), _CMP_LE_OQ));
    if (_mm256_movemask_ps(normal) == 0xff) {
        __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        return _mm256_mul_ps(j, _mm256_castsi256_ps(bits));
    } else {
        float jn[8], nn[8];
        int l;
        _mm256_storeu_ps(jn, j), _mm256_storeu_ps(nn, n);
        for (l = 0; l < 8; l++) jn[l] = fabsf(nn[l]) > 192 ? (nn[l] <= 0 ? 0.0f : INFINITY) : infer__ldexp_llama(jn[l], (int)nn[l]);
        return _mm256_loadu_ps(jn);
    }
}

INFER__AVX2 static double infer__avx2_exp_chunks16(const float *s, float *held, int base, int lo, int hi, int last,
                                                   float scale, float m, float *ch, double sum) {
    __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(m), c[2];
    float lane[16];
    int a, half;
    if (lo >= hi) return sum;
    c[0] = _mm256_loadu_ps(ch), c[1] = _mm256_loadu_ps(ch + 8);
    for (a = base + lo - (base + lo) % 16; a < base + hi; a += 16) {
        int j0 = a - base; /* the chunk's first position, as an index of s (may be below 0: masked) */
        for (half = 0; half < 2; half++) {
            int jh = j0 + 8 * half;
            __m256 seen = infer__avx2_seen(jh, lo, hi);
            __m256 x, e;
            if (!_mm256_movemask_ps(seen)) continue;
            x = _mm256_mul_ps(_mm256_maskload_ps(s + jh, _mm256_castps_si256(seen)), vs);
            x = _mm256_blendv_ps(vm, x, seen); /* the lanes not seen take e^0, never the slow lanes' way */
            e = infer__avx2_exp_llama_v(_mm256_sub_ps(x, vm));
            c[half] = _mm256_blendv_ps(c[half], e, seen);
            if (held) _mm256_maskstore_ps(held + jh, _mm256_castps_si256(seen), e);
        }
        if (j0 + 15 < hi || (last == hi - 1 && last < j0 + 16)) { /* the chunk ends, or the row does */
            _mm256_storeu_ps(lane, c[0]), _mm256_storeu_ps(lane + 8, c[1]);
            sum += (double)infer__sum16_tree(lane);
            c[0] = c[1] = _mm256_setzero_ps();
        }
    }
    _mm256_storeu_ps(ch, c[0]), _mm256_storeu_ps(ch + 8, c[1]);
    return sum;
}

/* each value's 16 lanes loaded once for all the chunks (at most 4) */
INFER__AVX2 static void infer__avx2_probs_fma16(float *acc, int as, const float *v, const float *e, int lo, int hi, float inv,
                                                int n, int n_chunks) {
    __m256 vinv = _mm256_set1_ps(inv), p[4][2];
    const float *vc[4];
    int c, d, half, na = 0;
    if (n_chunks > 4) {
        for (c = 0; c < n_chunks; c += 4)
            infer__avx2_probs_fma16(acc, as, v + (size_t)16 * n * c, e + 16 * c, lo - 16 * c, hi - 16 * c, inv, n,
                                    INFER__MIN(4, n_chunks - c));
        return;
    }
    for (c = 0; c < n_chunks; c++) {
        if (INFER__MAX(lo, 16 * c) >= INFER__MIN(hi, 16 * c + 16)) continue;
        for (half = 0; half < 2; half++) {
            __m256 seen = infer__avx2_seen(16 * c + 8 * half, lo, hi);
            __m256 x = _mm256_mul_ps(_mm256_maskload_ps(e + 16 * c + 8 * half, _mm256_castps_si256(seen)), vinv);
            p[na][half] = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_and_ps(seen, x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        vc[na++] = v + (size_t)16 * n * c;
    }
    for (d = 0; d < n; d++) {
        float *at = acc + (size_t)as * d;
        __m256 a0 = _mm256_loadu_ps(at), a1 = _mm256_loadu_ps(at + 8);
        for (c = 0; c < na; c++) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(vc[c] + 16 * d), p[c][0], a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(vc[c] + 16 * d + 8), p[c][1], a1);
        }
        _mm256_storeu_ps(at, a0), _mm256_storeu_ps(at + 8, a1);
    }
}

INFER__AVX2 static void infer__avx2_f16_rows16(const uint16_t *h, size_t stride, int rows, float *out) {
    int r;
    for (r = 0; r < rows; r++) {
        const __m128i *src = (const __m128i *)(const void *)(h + (size_t)r * stride);
        _mm256_storeu_ps(out + 16 * r, _mm256_cvtph_ps(_mm_loadu_si128(src)));
        _mm256_storeu_ps(out + 16 * r + 8, _mm256_cvtph_ps(_mm_loadu_si128(src + 1)));
    }
}

/* the FMA instruction, one rounding: correctly rounded as mathfn.c's */
INFER__AVX2_INLINE float infer__avx2_fma1(float x, float y, float z) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x), _mm_set_ss(y), _mm_set_ss(z)));
}
INFER__AVX2 static float infer__avx2_fmaf(float x, float y, float z) { return infer__avx2_fma1(x, y, z); }
INFER__AVX2 static float infer__avx2_exp_llama(float x) { INFER__EXP_LLAMA_BODY(x, infer__avx2_fma1) }

#endif /* INFER__HAVE_X86 */

static int infer__simd_avx2_install(infer__kernels *k) {
#ifdef INFER__HAVE_X86
    if (!infer__cpu_has(INFER__CPU_AVX2)) return 0; /* with FMA and F16C */
    k->silu_mul = infer__avx2_silu_mul;
    k->gelu_mul = infer__avx2_gelu_mul;
    k->sum_squares = infer__avx2_sum_squares;
    k->f32_dot_ordered = infer__avx2_f32_dot_ordered;
    k->f32_mad = infer__avx2_f32_mad;
    k->ssm_row = infer__avx2_ssm_row;
    k->deltanet_row = infer__avx2_deltanet_row;
    k->f32_gemm = infer__avx2_f32_gemm;
    k->f16_rows16 = infer__avx2_f16_rows16;
    k->f16_scores_ordered = infer__avx2_f16_scores_ordered;
    k->exp_chunks16 = infer__avx2_exp_chunks16;
    k->probs_fma16 = infer__avx2_probs_fma16;
    k->lanes16_fma = infer__avx2_lanes16_fma;
    k->pv_quant[INFER_TYPE_Q8_0] = infer__avx2_pv_q8_0;
    k->softmax_stats = infer__avx2_softmax_stats;
    k->softmax_probs = infer__avx2_softmax_probs;
    k->scaled_max = infer__avx2_scaled_max;
    k->softmax_exp = infer__avx2_softmax_exp;
    k->pv_quant[INFER_TYPE_Q4_0] = infer__avx2_pv_q4_0;
    k->probs_f16 = infer__avx2_probs_f16;
    k->fmaf = infer__avx2_fmaf;
    k->exp_llama = infer__avx2_exp_llama;
    k->vec_dot[INFER_TYPE_F32] = infer__avx2_f32_dot;
    k->vec_dot[INFER_TYPE_F16] = infer__avx2_f16_dot;
    k->f16_dot_ordered = infer__avx2_f16_dot_ordered;
    k->f16_dot_ordered1 = infer__avx2_f16_dot_ordered1;
    k->gemm[INFER_TYPE_F16] = infer__avx2_f16_gemm;
    k->qk_f16 = infer__avx2_qk_f16;
    k->vec_dot[INFER_TYPE_BF16] = infer__avx2_bf16_dot;
    k->vec_dot[INFER_TYPE_Q8_0] = infer__avx2_q8_0_dot;
    k->vec_dot[INFER_TYPE_Q4_0] = infer__avx2_q4_0_dot;
    k->pack_size[INFER_TYPE_Q4_0] = infer__pack_q4_0_size;
    k->pack[INFER_TYPE_Q4_0] = infer__pack_q4_0;
    k->gemm_packed[INFER_TYPE_Q4_0] = infer__avx2_q4_0_gemm_packed;
    k->pack_size[INFER_TYPE_Q4_1] = infer__pack_q4_1_size;
    k->pack[INFER_TYPE_Q4_1] = infer__pack_q4_1;
    k->gemm_packed[INFER_TYPE_Q4_1] = infer__avx2_q4_1_gemm_packed;
    k->pack_size[INFER_TYPE_Q8_0] = infer__pack_q8_0_size;
    k->pack[INFER_TYPE_Q8_0] = infer__pack_q8_0;
    k->gemm_packed[INFER_TYPE_Q8_0] = infer__avx2_q8_0_gemm_packed;
    k->gemm_packed_ordered[INFER_TYPE_Q8_0] = infer__avx2_q8_0_gemm_packed_ordered;
    k->vec_dot[INFER_TYPE_Q4_1] = infer__avx2_q4_1_dot;
    k->vec_dot[INFER_TYPE_Q5_0] = infer__avx2_q5_0_dot;
    k->vec_dot[INFER_TYPE_Q5_1] = infer__avx2_q5_1_dot;
    k->gemm[INFER_TYPE_Q8_0] = infer__avx2_q8_0_gemm;
    k->gemm[INFER_TYPE_Q4_0] = infer__avx2_q4_0_gemm;
    k->gemm[INFER_TYPE_Q5_0] = infer__avx2_q5_0_gemm;
    k->from_float[INFER_TYPE_F16] = infer__avx2_f16_from_float;
    k->from_float[INFER_TYPE_BF16] = infer__avx2_bf16_from_float;
    k->from_float[INFER_TYPE_Q8_0] = infer__avx2_q8_0_from_float;
    k->from_float[INFER_TYPE_Q8_1] = infer__avx2_q8_1_from_float;
    k->from_float[INFER_TYPE_Q8_K] = infer__avx2_q8_K_from_float;
    k->vec_dot[INFER_TYPE_Q2_K] = infer__avx2_q2_K_dot;
    k->vec_dot[INFER_TYPE_Q3_K] = infer__avx2_q3_K_dot;
    k->vec_dot[INFER_TYPE_Q4_K] = infer__avx2_q4_K_dot;
    k->vec_dot[INFER_TYPE_Q5_K] = infer__avx2_q5_K_dot;
    k->vec_dot[INFER_TYPE_Q6_K] = infer__avx2_q6_K_dot;
    k->vec_dot[INFER_TYPE_IQ4_NL] = infer__avx2_iq4_nl_dot;
    k->vec_dot[INFER_TYPE_IQ4_XS] = infer__avx2_iq4_xs_dot;
    k->vec_dot[INFER_TYPE_MXFP4] = infer__avx2_mxfp4_dot;
    k->gemm[INFER_TYPE_MXFP4] = infer__avx2_mxfp4_gemm;
    return 1;
#else
    (void)k;
    return 0;
#endif
}
