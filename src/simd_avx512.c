/* simd_avx512.c - AVX-512 versions of the kernels (with VNNI and BF16 where
   the CPU has them), compiled with target attributes. The AVX2 kernels are
   installed first; these replace them where 512-bit registers or the newer
   instructions pay: float formats at 16 lanes, the 8-bit dot products with
   VNNI's dpbusd (u8 x s8 summed into int32 in one instruction, at 256 bits
   since every block has its own scale), BF16 with dpbf16ps.
   dpbf16ps treats subnormal inputs and results as zero (it ignores MXCSR),
   as llama.cpp's kernel does; the test allows for that. */
#include "internal.h"

#ifdef INFER__HAVE_X86
#define INFER__AVX512_ISA "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define INFER__AVX512 __attribute__((target(INFER__AVX512_ISA), unused))
#define INFER__AVX512_INLINE static inline __attribute__((target(INFER__AVX512_ISA), always_inline, unused))
#define INFER__AVX512VNNI __attribute__((target(INFER__AVX512_ISA ",avx512vnni"), unused))
#define INFER__AVX512VNNI_INLINE static inline __attribute__((target(INFER__AVX512_ISA ",avx512vnni"), always_inline, unused))
#define INFER__AVX512BF16 __attribute__((target(INFER__AVX512_ISA ",avx512bf16"), unused))

/* ---- float formats ---- */

INFER__AVX512 static float infer__avx512_f32_dot(int n, const void *w, const void *x) {
    const float *a = (const float *)w, *b = (const float *)x;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

INFER__AVX512 static float infer__avx512_f16_dot(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
#define INFER__LOADH16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(INFER__LOADH16(a + i), INFER__LOADH16(b + i), s0);
        s1 = _mm512_fmadd_ps(INFER__LOADH16(a + i + 16), INFER__LOADH16(b + i + 16), s1);
    }
#undef INFER__LOADH16
    for (; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        s0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)),
                             _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i)), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

INFER__AVX512 static void infer__avx512_f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = infer__fp32_to_fp16(src[i]);
}

INFER__AVX512 static float infer__avx512_bf16_dot(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m512 s0 = _mm512_setzero_ps();
    int i = 0;
    for (; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 va = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, a + i)), 16));
        __m512 vb = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, b + i)), 16));
        s0 = _mm512_fmadd_ps(va, vb, s0);
    }
    return _mm512_reduce_add_ps(s0);
}

/* pairs of bf16 products summed into float lanes in one instruction */
INFER__AVX512BF16 static float infer__avx512bf16_bf16_dot(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_dpbf16_ps(s0, (__m512bh)_mm512_loadu_si512(a + i), (__m512bh)_mm512_loadu_si512(b + i));
        s1 = _mm512_dpbf16_ps(s1, (__m512bh)_mm512_loadu_si512(a + i + 32), (__m512bh)_mm512_loadu_si512(b + i + 32));
    }
    for (; i < n; i += 32) {
        __mmask32 m = n - i >= 32 ? 0xffffffffu : (1u << (n - i)) - 1;
        s0 = _mm512_dpbf16_ps(s0, (__m512bh)_mm512_maskz_loadu_epi16(m, a + i), (__m512bh)_mm512_maskz_loadu_epi16(m, b + i));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* F16 weights and activations, widened to fp32 (exact) and multiplied with
   FMA, 16 values a step: each row and token converted once per tile */
INFER__AVX512_INLINE void infer__avx512_f16_tile(int R, int T, int n, const uint16_t *w, size_t w_stride,
                                                  const uint16_t *x, size_t x_stride, float *y, size_t ldy) {
#define INFER__F16_BODY(R, T)                                                                                       \
    do {                                                                                                            \
        __m512 acc[R][T], wv[R];                                                                                    \
        int i_, r_, t_;                                                                                             \
        for (r_ = 0; r_ < R; r_++)                                                                                  \
            for (t_ = 0; t_ < T; t_++) acc[r_][t_] = _mm512_setzero_ps();                                           \
        for (i_ = 0; i_ < n; i_ += 16) {                                                                            \
            __mmask16 m_ = (__mmask16)(n - i_ >= 16 ? 0xffff : (1u << (n - i_)) - 1);                               \
            for (r_ = 0; r_ < R; r_++)                                                                              \
                wv[r_] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m_, (const uint8_t *)w + r_ * w_stride + 2 * (size_t)i_)); \
            for (t_ = 0; t_ < T; t_++) {                                                                            \
                __m512 xv_ = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m_, (const uint8_t *)x + t_ * x_stride + 2 * (size_t)i_)); \
                for (r_ = 0; r_ < R; r_++) acc[r_][t_] = _mm512_fmadd_ps(wv[r_], xv_, acc[r_][t_]);                  \
            }                                                                                                       \
        }                                                                                                           \
        for (t_ = 0; t_ < T; t_++)                                                                                  \
            for (r_ = 0; r_ < R; r_++) y[(size_t)t_ * ldy + r_] = _mm512_reduce_add_ps(acc[r_][t_]);                \
    } while (0)
#define INFER__GEMM_CASE(RR, TT) \
    if (R == RR && T == TT) { INFER__F16_BODY(RR, TT); return; }
    INFER__GEMM_CASE(4, 4) INFER__GEMM_CASE(4, 3) INFER__GEMM_CASE(4, 2) INFER__GEMM_CASE(4, 1)
    INFER__GEMM_CASE(3, 4) INFER__GEMM_CASE(3, 3) INFER__GEMM_CASE(3, 2) INFER__GEMM_CASE(3, 1)
    INFER__GEMM_CASE(2, 4) INFER__GEMM_CASE(2, 3) INFER__GEMM_CASE(2, 2) INFER__GEMM_CASE(2, 1)
    INFER__GEMM_CASE(1, 4) INFER__GEMM_CASE(1, 3) INFER__GEMM_CASE(1, 2) INFER__GEMM_CASE(1, 1)
#undef INFER__GEMM_CASE
#undef INFER__F16_BODY
}

INFER__AVX512 static void infer__avx512_f16_gemm(int n, const void *w, size_t w_stride, int n_rows, const void *x,
                                                 size_t x_stride, int n_tok, float *y, size_t ldy) {
    int r, t;
    for (r = 0; r < n_rows; r += 4)
        for (t = 0; t < n_tok; t += 4)
            infer__avx512_f16_tile(INFER__MIN(4, n_rows - r), INFER__MIN(4, n_tok - t), n,
                                   (const uint16_t *)((const uint8_t *)w + (size_t)r * w_stride), w_stride,
                                   (const uint16_t *)((const uint8_t *)x + (size_t)t * x_stride), x_stride,
                                   y + (size_t)t * ldy + r, ldy);
}

/* bit-exact with infer__fp32_to_bf16 (vcvtneps2bf16 would flush subnormals) */
INFER__AVX512 static void infer__avx512_bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++) d[i] = infer__fp32_to_bf16(src[i]);
}

/* ---- block formats with VNNI ---- */

INFER__AVX512VNNI_INLINE __m256i infer__vnni_dot_us(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
/* s8 x s8: the sign of a moved onto b (b, an activation, is never -128) */
INFER__AVX512VNNI_INLINE __m256i infer__vnni_dot_ss(__m256i a, __m256i b) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(a), _mm256_sign_epi8(b, a));
}

#define INFER__VH(x) _cvtsh_ss(x)
#define INFER__VSCALE(a, x) _mm256_set1_ps(INFER__VH((a).d) * INFER__VH((x).d))
#define INFER__LD(p) _mm256_loadu_si256((const __m256i *)(p))

INFER__AVX512VNNI static float infer__vnni_q8_0_dot(int n, const void *w, const void *xv) {
    const infer__block_q8_0 *a = (const infer__block_q8_0 *)w, *x = (const infer__block_q8_0 *)xv;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int b = 0, nb = n / 32;
    for (; b + 2 <= nb; b += 2) {
        __m256i p0 = infer__vnni_dot_ss(INFER__LD(a[b].qs), INFER__LD(x[b].qs));
        __m256i p1 = infer__vnni_dot_ss(INFER__LD(a[b + 1].qs), INFER__LD(x[b + 1].qs));
        acc0 = _mm256_fmadd_ps(INFER__VSCALE(a[b], x[b]), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(INFER__VSCALE(a[b + 1], x[b + 1]), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; b < nb; b++)
        acc0 = _mm256_fmadd_ps(INFER__VSCALE(a[b], x[b]),
                               _mm256_cvtepi32_ps(infer__vnni_dot_ss(INFER__LD(a[b].qs), INFER__LD(x[b].qs))), acc0);
    return infer__avx2_hsum(_mm256_add_ps(acc0, acc1));
}

INFER__AVX512VNNI static float infer__vnni_q4_0_dot(int n, const void *w, const void *xv) {
    const infer__block_q4_0 *a = (const infer__block_q4_0 *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256i off = _mm256_set1_epi8(8);
    int b = 0, nb = n / 32;
    for (; b + 2 <= nb; b += 2) {
        __m256i p0 = infer__vnni_dot_ss(_mm256_sub_epi8(infer__avx2_nibbles(a[b].qs), off), INFER__LD(x[b].qs));
        __m256i p1 = infer__vnni_dot_ss(_mm256_sub_epi8(infer__avx2_nibbles(a[b + 1].qs), off), INFER__LD(x[b + 1].qs));
        acc0 = _mm256_fmadd_ps(INFER__VSCALE(a[b], x[b]), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(INFER__VSCALE(a[b + 1], x[b + 1]), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; b < nb; b++) {
        __m256i p = infer__vnni_dot_ss(_mm256_sub_epi8(infer__avx2_nibbles(a[b].qs), off), INFER__LD(x[b].qs));
        acc0 = _mm256_fmadd_ps(INFER__VSCALE(a[b], x[b]), _mm256_cvtepi32_ps(p), acc0);
    }
    return infer__avx2_hsum(_mm256_add_ps(acc0, acc1));
}

INFER__AVX512VNNI static float infer__vnni_q4_1_dot(int n, const void *w, const void *xv) {
    const infer__block_q4_1 *a = (const infer__block_q4_1 *)w;
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)xv;
    __m256 acc = _mm256_setzero_ps();
    float ms = 0;
    int b, nb = n / 32;
    for (b = 0; b < nb; b++) {
        __m256i p = infer__vnni_dot_us(infer__avx2_nibbles(a[b].qs), INFER__LD(x[b].qs));
        acc = _mm256_fmadd_ps(INFER__VSCALE(a[b], x[b]), _mm256_cvtepi32_ps(p), acc);
        ms += INFER__VH(a[b].m) * INFER__VH(x[b].s);
    }
    return infer__avx2_hsum(acc) + ms;
}

INFER__AVX512VNNI static float infer__vnni_q5_0_dot(int n, const void *w, const void *xv) {
    const infer__block_q5_0 *a = (const infer__block_q5_0 *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    __m256 acc = _mm256_setzero_ps();
    const __m256i off = _mm256_set1_epi8(16);
    int b, nb = n / 32;
    for (b = 0; b < nb; b++) {
        __m256i q = _mm256_or_si256(infer__avx2_nibbles(a[b].qs), infer__avx2_fifth_bits(a[b].qh));
        __m256i p = infer__vnni_dot_ss(_mm256_sub_epi8(q, off), INFER__LD(x[b].qs));
        acc = _mm256_fmadd_ps(INFER__VSCALE(a[b], x[b]), _mm256_cvtepi32_ps(p), acc);
    }
    return infer__avx2_hsum(acc);
}

INFER__AVX512VNNI static float infer__vnni_q5_1_dot(int n, const void *w, const void *xv) {
    const infer__block_q5_1 *a = (const infer__block_q5_1 *)w;
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)xv;
    __m256 acc = _mm256_setzero_ps();
    float ms = 0;
    int b, nb = n / 32;
    for (b = 0; b < nb; b++) {
        __m256i q = _mm256_or_si256(infer__avx2_nibbles(a[b].qs), infer__avx2_fifth_bits(a[b].qh));
        __m256i p = infer__vnni_dot_us(q, INFER__LD(x[b].qs));
        acc = _mm256_fmadd_ps(INFER__VSCALE(a[b], x[b]), _mm256_cvtepi32_ps(p), acc);
        ms += INFER__VH(a[b].m) * INFER__VH(x[b].s);
    }
    return infer__avx2_hsum(acc) + ms;
}

/* ---- GEMM: a tile of R weight rows x T tokens in registers ----
   Each weight row's blocks are unpacked once per tile and each token's
   once per tile, instead of once per product. Two 32-value blocks share a
   512-bit register: lanes 0..7 sum block b, lanes 8..15 block b + 1, and
   the scale of each half is (d_w half) * (d_x half), applied in float.
   An odd last block fills the low half only; the high half's scales are
   zero (its integer sums are zero too).
   The integer sums are the exact ones of the vec_dot kernels, made with
   one unsigned operand: Q8_0 weights meet activations + 128 (u8) and take
   128 * sum(weights) back; Q4_0's nibbles (0..15, u8) meet the activations
   and take 8 * sum(activations) back. */

INFER__AVX512VNNI_INLINE __m512 infer__gemm_scales(uint16_t h0, uint16_t h1) {
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)h1), _mm_set1_epi16((short)h0)));
}
INFER__AVX512VNNI_INLINE __m512i infer__gemm_ld2(const int8_t *q0, const int8_t *q1) {
    __m512i lo = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)q0));
    return q1 ? _mm512_inserti64x4(lo, _mm256_loadu_si256((const __m256i *)q1), 1) : lo;
}
/* two Q4_0 blocks' nibbles, as u8: [lo b, hi b, lo b+1, hi b+1] */
INFER__AVX512VNNI_INLINE __m512i infer__gemm_nib2(const uint8_t *q0, const uint8_t *q1) {
    __m128i a = _mm_loadu_si128((const __m128i *)q0);
    __m128i b = q1 ? _mm_loadu_si128((const __m128i *)q1) : _mm_setzero_si128();
    __m512i v = _mm512_zextsi256_si512(_mm256_set_m128i(b, a));
    v = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), v);
    v = _mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

/* two Q5_0 blocks' 5-bit values, as u8 */
INFER__AVX512VNNI_INLINE __m512i infer__gemm_q5_2(const infer__block_q5_0 *a0, const infer__block_q5_0 *a1) {
    __m256i lo = _mm256_or_si256(infer__avx2_nibbles(a0->qs), infer__avx2_fifth_bits(a0->qh));
    __m512i v = _mm512_zextsi256_si512(lo);
    if (a1) v = _mm512_inserti64x4(v, _mm256_or_si256(infer__avx2_nibbles(a1->qs), infer__avx2_fifth_bits(a1->qh)), 1);
    return v;
}

#define INFER__GEMM_BODY(R, T, WBLK, LOADW, FIXW, LOADX, FIXX)                                                        \
    do {                                                                                                               \
        __m512 acc[R][T];                                                                                              \
        int b_, r_, t_;                                                                                                \
        for (r_ = 0; r_ < R; r_++)                                                                                     \
            for (t_ = 0; t_ < T; t_++) acc[r_][t_] = _mm512_setzero_ps();                                              \
        for (b_ = 0; b_ < nb; b_ += 2) {                                                                               \
            int two_ = b_ + 1 < nb;                                                                                    \
            __m512i wq[R], wc[R];                                                                                      \
            __m512 wd[R];                                                                                              \
            for (r_ = 0; r_ < R; r_++) {                                                                               \
                const WBLK *a_ = (const WBLK *)((const uint8_t *)w + (size_t)r_ * w_stride) + b_;                      \
                wq[r_] = LOADW(&a_[0], two_ ? &a_[1] : NULL);                                                      \
                wc[r_] = FIXW(wq[r_]);                                                                                 \
                wd[r_] = infer__gemm_scales(a_[0].d, two_ ? a_[1].d : 0);                                              \
            }                                                                                                          \
            (void)wc;                                                                                                  \
            for (t_ = 0; t_ < T; t_++) {                                                                               \
                const infer__block_q8_0 *x_ = (const infer__block_q8_0 *)((const uint8_t *)x + (size_t)t_ * x_stride) + b_; \
                __m512i xq_ = infer__gemm_ld2(x_[0].qs, two_ ? x_[1].qs : NULL), xc_ = FIXX(xq_);                      \
                __m512 xd_ = infer__gemm_scales(x_[0].d, two_ ? x_[1].d : 0);                                          \
                xq_ = LOADX(xq_);                                                                                      \
                (void)xc_;                                                                                             \
                for (r_ = 0; r_ < R; r_++) {                                                                           \
                    __m512i p_ = INFER__GEMM_DOT(wc[r_], xc_, wq[r_], xq_);                                            \
                    acc[r_][t_] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(p_), xd_), wd[r_], acc[r_][t_]);  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (t_ = 0; t_ < T; t_++)                                                                                     \
            for (r_ = 0; r_ < R; r_++) y[(size_t)t_ * ldy + r_] = _mm512_reduce_add_ps(acc[r_][t_]);                   \
    } while (0)

#define INFER__Q4_LD(a0, a1) infer__gemm_nib2((a0)->qs, (a1) ? (a1)->qs : NULL)
#define INFER__Q8_LD(a0, a1) infer__gemm_ld2((a0)->qs, (a1) ? (a1)->qs : NULL)
#define INFER__Q5_LD(a0, a1) infer__gemm_q5_2(a0, a1)
#define INFER__Q5X_FIX(q) _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), q))
/* Q8_0: (x + 128) . w - 128 * sum(w); the correction rides on the weights */
#define INFER__Q8W_FIX(q) _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), q), 7))
#define INFER__Q8X_U8(q) _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80))
#define INFER__NOFIX(q) _mm512_setzero_si512()
#define INFER__SAME(q) (q)
#define INFER__GEMM_DOT(wc, xc, wq, xq) _mm512_dpbusd_epi32(wc, xq, wq)
INFER__AVX512VNNI_INLINE void infer__vnni_q8_0_tile(int R, int T, int nb, const void *w, size_t w_stride,
                                                     const void *x, size_t x_stride, float *y, size_t ldy) {
#define INFER__GEMM_CASE(RR, TT) \
    if (R == RR && T == TT) { INFER__GEMM_BODY(RR, TT, infer__block_q8_0, INFER__Q8_LD, INFER__Q8W_FIX, INFER__Q8X_U8, INFER__NOFIX); return; }
    INFER__GEMM_CASE(4, 4) INFER__GEMM_CASE(4, 3) INFER__GEMM_CASE(4, 2) INFER__GEMM_CASE(4, 1)
    INFER__GEMM_CASE(3, 4) INFER__GEMM_CASE(3, 3) INFER__GEMM_CASE(3, 2) INFER__GEMM_CASE(3, 1)
    INFER__GEMM_CASE(2, 4) INFER__GEMM_CASE(2, 3) INFER__GEMM_CASE(2, 2) INFER__GEMM_CASE(2, 1)
    INFER__GEMM_CASE(1, 4) INFER__GEMM_CASE(1, 3) INFER__GEMM_CASE(1, 2) INFER__GEMM_CASE(1, 1)
#undef INFER__GEMM_CASE
}
#undef INFER__GEMM_DOT
/* Q4_0: nibbles . x - 8 * sum(x); the correction rides on the activations */
#define INFER__Q4X_FIX(q) _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), q))
#define INFER__GEMM_DOT(wc, xc, wq, xq) _mm512_dpbusd_epi32(xc, wq, xq)
INFER__AVX512VNNI_INLINE void infer__vnni_q4_0_tile(int R, int T, int nb, const void *w, size_t w_stride,
                                                     const void *x, size_t x_stride, float *y, size_t ldy) {
#define INFER__GEMM_CASE(RR, TT) \
    if (R == RR && T == TT) { INFER__GEMM_BODY(RR, TT, infer__block_q4_0, INFER__Q4_LD, INFER__NOFIX, INFER__SAME, INFER__Q4X_FIX); return; }
    INFER__GEMM_CASE(4, 4) INFER__GEMM_CASE(4, 3) INFER__GEMM_CASE(4, 2) INFER__GEMM_CASE(4, 1)
    INFER__GEMM_CASE(3, 4) INFER__GEMM_CASE(3, 3) INFER__GEMM_CASE(3, 2) INFER__GEMM_CASE(3, 1)
    INFER__GEMM_CASE(2, 4) INFER__GEMM_CASE(2, 3) INFER__GEMM_CASE(2, 2) INFER__GEMM_CASE(2, 1)
    INFER__GEMM_CASE(1, 4) INFER__GEMM_CASE(1, 3) INFER__GEMM_CASE(1, 2) INFER__GEMM_CASE(1, 1)
#undef INFER__GEMM_CASE
}
INFER__AVX512VNNI_INLINE void infer__vnni_q5_0_tile(int R, int T, int nb, const void *w, size_t w_stride,
                                                     const void *x, size_t x_stride, float *y, size_t ldy) {
#define INFER__GEMM_CASE(RR, TT) \
    if (R == RR && T == TT) { INFER__GEMM_BODY(RR, TT, infer__block_q5_0, INFER__Q5_LD, INFER__NOFIX, INFER__SAME, INFER__Q5X_FIX); return; }
    INFER__GEMM_CASE(4, 4) INFER__GEMM_CASE(4, 3) INFER__GEMM_CASE(4, 2) INFER__GEMM_CASE(4, 1)
    INFER__GEMM_CASE(3, 4) INFER__GEMM_CASE(3, 3) INFER__GEMM_CASE(3, 2) INFER__GEMM_CASE(3, 1)
    INFER__GEMM_CASE(2, 4) INFER__GEMM_CASE(2, 3) INFER__GEMM_CASE(2, 2) INFER__GEMM_CASE(2, 1)
    INFER__GEMM_CASE(1, 4) INFER__GEMM_CASE(1, 3) INFER__GEMM_CASE(1, 2) INFER__GEMM_CASE(1, 1)
#undef INFER__GEMM_CASE
}
#undef INFER__GEMM_DOT
#undef INFER__Q4_LD
#undef INFER__Q8_LD
#undef INFER__Q5_LD
#undef INFER__Q5X_FIX
#undef INFER__Q4X_FIX
#undef INFER__Q8W_FIX
#undef INFER__Q8X_U8
#undef INFER__NOFIX
#undef INFER__SAME
#undef INFER__GEMM_BODY

/* ---- GEMM for the 256-value K formats (activations Q8_K) ----
   64 values a step in one register; dpbusd's int32 lanes each sum 4 values
   of one sub-block, so the sub-block scales (times d) are float lanes of
   their own. Integer sums are exact; scales apply in float per step. */

/* Q6_K: values 0..63 (u8) . y - 32 * sum(y), the correction on the tokens */
INFER__AVX512VNNI_INLINE __m512i infer__gemm_q6_K_vals(const infer__block_q6_K *a, int c) {
    int h = c >> 1;
    __m512i l = _mm512_loadu_si512((const void *)(a->ql + 64 * h));
    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a->qh + 32 * h)));
    __m512i lo, hi;
    if (c & 1) {
        lo = _mm512_and_si512(_mm512_srli_epi16(l, 4), _mm512_set1_epi8(0x0f));
        hi = _mm512_and_si512(_mm512_srlv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0)), _mm512_set1_epi8(0x30));
    } else {
        lo = _mm512_and_si512(l, _mm512_set1_epi8(0x0f));
        hi = _mm512_and_si512(_mm512_sllv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4)), _mm512_set1_epi8(0x30));
    }
    return _mm512_or_si512(lo, hi);
}
/* d * scale of each of the step's 4 sub-blocks of 16, 4 lanes each */
INFER__AVX512VNNI_INLINE __m512 infer__gemm_q6_K_scales(const infer__block_q6_K *a, int c) {
    int32_t s4;
    __m128i v;
    memcpy(&s4, a->scales + 4 * c, 4);
    v = _mm_shuffle_epi8(_mm_cvtsi32_si128(s4), _mm_set_epi8(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)), _mm512_set1_ps(_cvtsh_ss(a->d)));
}

#define INFER__GEMM_K_BODY(R, T, WBLK, VALS, SCALES, XFIX, MINS)                                                      \
    do {                                                                                                               \
        __m512 acc[R][T];                                                                                              \
        int b_, c_, r_, t_;                                                                                            \
        for (r_ = 0; r_ < R; r_++)                                                                                     \
            for (t_ = 0; t_ < T; t_++) acc[r_][t_] = _mm512_setzero_ps();                                              \
        for (b_ = 0; b_ < nb; b_++) {                                                                                  \
            for (c_ = 0; c_ < 4; c_++) {                                                                               \
                __m512i wq[R];                                                                                         \
                __m512 wd[R];                                                                                          \
                for (r_ = 0; r_ < R; r_++) {                                                                           \
                    const WBLK *a_ = (const WBLK *)((const uint8_t *)w + (size_t)r_ * w_stride) + b_;                  \
                    wq[r_] = VALS(a_, c_);                                                                             \
                    wd[r_] = SCALES(a_, c_);                                                                           \
                }                                                                                                      \
                for (t_ = 0; t_ < T; t_++) {                                                                           \
                    const infer__block_q8_K *x_ = (const infer__block_q8_K *)((const uint8_t *)x + (size_t)t_ * x_stride) + b_; \
                    __m512i xq_ = _mm512_loadu_si512((const void *)(x_->qs + 64 * c_)), xc_ = XFIX(xq_);               \
                    __m512 xd_ = _mm512_set1_ps(x_->d);                                                                \
                    for (r_ = 0; r_ < R; r_++) {                                                                       \
                        __m512i p_ = _mm512_dpbusd_epi32(xc_, wq[r_], xq_);                                            \
                        acc[r_][t_] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(p_), xd_), wd[r_], acc[r_][t_]); \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
            MINS(R, T);                                                                                                \
        }                                                                                                              \
        for (t_ = 0; t_ < T; t_++)                                                                                     \
            for (r_ = 0; r_ < R; r_++) y[(size_t)t_ * ldy + r_] = _mm512_reduce_add_ps(acc[r_][t_]);                   \
    } while (0)

#define INFER__Q6X_FIX(q) _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32), q))
#define INFER__NOMINS(R, T) ((void)0)
INFER__AVX512VNNI_INLINE void infer__vnni_q6_K_tile(int R, int T, int nb, const void *w, size_t w_stride,
                                                     const void *x, size_t x_stride, float *y, size_t ldy) {
#define INFER__GEMM_CASE(RR, TT) \
    if (R == RR && T == TT) { INFER__GEMM_K_BODY(RR, TT, infer__block_q6_K, infer__gemm_q6_K_vals, infer__gemm_q6_K_scales, INFER__Q6X_FIX, INFER__NOMINS); return; }
    INFER__GEMM_CASE(4, 4) INFER__GEMM_CASE(4, 3) INFER__GEMM_CASE(4, 2) INFER__GEMM_CASE(4, 1)
    INFER__GEMM_CASE(3, 4) INFER__GEMM_CASE(3, 3) INFER__GEMM_CASE(3, 2) INFER__GEMM_CASE(3, 1)
    INFER__GEMM_CASE(2, 4) INFER__GEMM_CASE(2, 3) INFER__GEMM_CASE(2, 2) INFER__GEMM_CASE(2, 1)
    INFER__GEMM_CASE(1, 4) INFER__GEMM_CASE(1, 3) INFER__GEMM_CASE(1, 2) INFER__GEMM_CASE(1, 1)
#undef INFER__GEMM_CASE
}

/* Q4_K: nibbles (u8) . y per sub-block of 32, scaled by d * scale; the
   mins, dmin * min * sum(y), come off once per block from the bsums */
INFER__AVX512VNNI_INLINE __m512i infer__gemm_q4_K_vals(const infer__block_q4_K *a, int c) {
    __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a->qs + 32 * c)));
    return _mm512_and_si512(_mm512_srlv_epi64(q, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)), _mm512_set1_epi8(0x0f));
}
INFER__AVX512VNNI_INLINE __m512 infer__gemm_q4_K_scales(const infer__block_q4_K *a, int c) {
    uint8_t sm[16];
    infer__k4_scales(a->scales, sm);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_inserti64x4(_mm512_set1_epi32(sm[2 * c]), _mm256_set1_epi32(sm[2 * c + 1]), 1)),
                         _mm512_set1_ps(_cvtsh_ss(a->d)));
}
/* per row: dmin * min of each sub-block of 32, as 16 int16 (each twice, to
   meet the 16 bsums); per token the bsums; summed as int32 pairs */
#define INFER__Q4K_MINS(R, T)                                                                                          \
    do {                                                                                                               \
        for (r_ = 0; r_ < R; r_++) {                                                                                   \
            const infer__block_q4_K *a_ = (const infer__block_q4_K *)((const uint8_t *)w + (size_t)r_ * w_stride) + b_; \
            uint8_t sm_[16];                                                                                           \
            __m256i mins_;                                                                                             \
            __m512 dm_ = _mm512_set1_ps(-_cvtsh_ss(a_->dmin));                                                         \
            infer__k4_scales(a_->scales, sm_);                                                                         \
            mins_ = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(sm_ + 8)),                  \
                                                          _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0))); \
            for (t_ = 0; t_ < T; t_++) {                                                                               \
                const infer__block_q8_K *x_ = (const infer__block_q8_K *)((const uint8_t *)x + (size_t)t_ * x_stride) + b_; \
                __m256i s_ = _mm256_madd_epi16(mins_, _mm256_loadu_si256((const __m256i *)x_->bsums));               \
                __m512 f_ = _mm512_cvtepi32_ps(_mm512_zextsi256_si512(s_));                                            \
                acc[r_][t_] = _mm512_fmadd_ps(_mm512_mul_ps(f_, _mm512_set1_ps(x_->d)), dm_, acc[r_][t_]);            \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)
#define INFER__NOXFIX(q) _mm512_setzero_si512()
INFER__AVX512VNNI_INLINE void infer__vnni_q4_K_tile(int R, int T, int nb, const void *w, size_t w_stride,
                                                     const void *x, size_t x_stride, float *y, size_t ldy) {
#define INFER__GEMM_CASE(RR, TT) \
    if (R == RR && T == TT) { INFER__GEMM_K_BODY(RR, TT, infer__block_q4_K, infer__gemm_q4_K_vals, infer__gemm_q4_K_scales, INFER__NOXFIX, INFER__Q4K_MINS); return; }
    INFER__GEMM_CASE(4, 4) INFER__GEMM_CASE(4, 3) INFER__GEMM_CASE(4, 2) INFER__GEMM_CASE(4, 1)
    INFER__GEMM_CASE(3, 4) INFER__GEMM_CASE(3, 3) INFER__GEMM_CASE(3, 2) INFER__GEMM_CASE(3, 1)
    INFER__GEMM_CASE(2, 4) INFER__GEMM_CASE(2, 3) INFER__GEMM_CASE(2, 2) INFER__GEMM_CASE(2, 1)
    INFER__GEMM_CASE(1, 4) INFER__GEMM_CASE(1, 3) INFER__GEMM_CASE(1, 2) INFER__GEMM_CASE(1, 1)
#undef INFER__GEMM_CASE
}
#undef INFER__NOXFIX
#undef INFER__Q4K_MINS
#undef INFER__Q6X_FIX
#undef INFER__NOMINS
#undef INFER__GEMM_K_BODY

#define INFER__GEMM_DRIVER(name, tile, qk)                                                                              \
    INFER__AVX512VNNI static void name(int n, const void *w, size_t w_stride, int n_rows, const void *x,             \
                                       size_t x_stride, int n_tok, float *y, size_t ldy) {                          \
        int r, t, nb = n / (qk);                                                                                     \
        for (r = 0; r < n_rows; r += 4)                                                                              \
            for (t = 0; t < n_tok; t += 4)                                                                           \
                tile(INFER__MIN(4, n_rows - r), INFER__MIN(4, n_tok - t), nb,                                        \
                     (const uint8_t *)w + (size_t)r * w_stride, w_stride, (const uint8_t *)x + (size_t)t * x_stride, \
                     x_stride, y + (size_t)t * ldy + r, ldy);                                                        \
    }
INFER__GEMM_DRIVER(infer__vnni_q8_0_gemm, infer__vnni_q8_0_tile, 32)
INFER__GEMM_DRIVER(infer__vnni_q4_0_gemm, infer__vnni_q4_0_tile, 32)
INFER__GEMM_DRIVER(infer__vnni_q5_0_gemm, infer__vnni_q5_0_tile, 32)
INFER__GEMM_DRIVER(infer__vnni_q6_K_gemm, infer__vnni_q6_K_tile, INFER__QK_K)
INFER__GEMM_DRIVER(infer__vnni_q4_K_gemm, infer__vnni_q4_K_tile, INFER__QK_K)
#undef INFER__GEMM_DRIVER
#undef INFER__LD
#undef INFER__VSCALE
#undef INFER__VH
#endif /* INFER__HAVE_X86 */

static int infer__simd_avx512_install(infer__kernels *k) {
#ifdef INFER__HAVE_X86
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
        return 0;
    /* what AVX2 has, AVX-512 machines have too; replace what is faster here */
    if (!infer__simd_avx2_install(k)) return 0;
    k->vec_dot[INFER_TYPE_F32] = infer__avx512_f32_dot;
    k->vec_dot[INFER_TYPE_F16] = infer__avx512_f16_dot;
    k->gemm[INFER_TYPE_F16] = infer__avx512_f16_gemm;
    k->vec_dot[INFER_TYPE_BF16] = infer__avx512_bf16_dot;
    k->from_float[INFER_TYPE_F16] = infer__avx512_f16_from_float;
    k->from_float[INFER_TYPE_BF16] = infer__avx512_bf16_from_float;
    if (__builtin_cpu_supports("avx512vnni")) {
        k->vec_dot[INFER_TYPE_Q8_0] = infer__vnni_q8_0_dot;
        k->vec_dot[INFER_TYPE_Q4_0] = infer__vnni_q4_0_dot;
        k->vec_dot[INFER_TYPE_Q4_1] = infer__vnni_q4_1_dot;
        k->vec_dot[INFER_TYPE_Q5_0] = infer__vnni_q5_0_dot;
        k->vec_dot[INFER_TYPE_Q5_1] = infer__vnni_q5_1_dot;
        k->gemm[INFER_TYPE_Q8_0] = infer__vnni_q8_0_gemm;
        k->gemm[INFER_TYPE_Q4_0] = infer__vnni_q4_0_gemm;
        k->gemm[INFER_TYPE_Q5_0] = infer__vnni_q5_0_gemm;
        k->gemm[INFER_TYPE_Q4_K] = infer__vnni_q4_K_gemm;
        k->gemm[INFER_TYPE_Q6_K] = infer__vnni_q6_K_gemm;
    }
    if (__builtin_cpu_supports("avx512bf16")) k->vec_dot[INFER_TYPE_BF16] = infer__avx512bf16_bf16_dot;
    return 1;
#else
    (void)k;
    return 0;
#endif
}
