/* simd_x86.h - what the x86 kernels (simd_avx2.c, simd_avx512.c) share: intrinsics, target attributes, AVX2 helpers. */
#ifndef INFER_SIMD_X86_H
#define INFER_SIMD_X86_H
#include "internal.h"

#ifdef INFER__HAVE_X86
#include <immintrin.h>

/* vecmath.c's plain C, which finishes a row's tail past the last full vector */
static void infer__silu_mul_ref(float *g, const float *u, int n);
static void infer__gelu_mul_ref(float *g, const float *u, int n, const float *table);
static double infer__sum_squares_ref(const float *x, int n);

/* each kernel marked with its instruction set (platform.h), chosen at run
   time by cpu.c */
#define INFER__AVX2_ISA "avx2,fma,f16c"
#define INFER__AVX2 INFER__TARGET(INFER__AVX2_ISA)
#define INFER__AVX2_INLINE INFER__TARGET_INLINE(INFER__AVX2_ISA)
#define INFER__AVX512_ISA "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define INFER__AVX512 INFER__TARGET(INFER__AVX512_ISA)
#define INFER__AVX512_INLINE INFER__TARGET_INLINE(INFER__AVX512_ISA)
#define INFER__AVX512VNNI INFER__TARGET(INFER__AVX512_ISA ",avx512vnni")
#define INFER__AVX512VNNI_INLINE INFER__TARGET_INLINE(INFER__AVX512_ISA ",avx512vnni")
#define INFER__AVX512BF16 INFER__TARGET(INFER__AVX512_ISA ",avx512bf16")
#define INFER__AVX512BF16_INLINE INFER__TARGET_INLINE(INFER__AVX512_ISA ",avx512bf16")

/* F16 products short enough (attention's: q.K over a head, p.V over a tile
   of keys) for the "wide" kernels: the tokens widened to F32 once, rows
   fetched ahead about INFER__F16_AHEAD bytes (16 to INFER__F16_AHEAD_MAX
   rows), since V's rows, a few hundred keys long, are too short a stream
   for the hardware's prefetcher */
#define INFER__F16_WIDE 512
#ifndef INFER__F16_AHEAD
#define INFER__F16_AHEAD 8192
#endif
#ifndef INFER__F16_AHEAD_MAX
#define INFER__F16_AHEAD_MAX 64
#endif

INFER__AVX2_INLINE float infer__avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* int32 sums of 4 neighbouring products u8 * s8 (|products| fit maddubs) */
INFER__AVX2_INLINE __m256i infer__avx2_dot_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
/* the same for s8 * s8, moving the sign of a onto b (b is never -128) */
INFER__AVX2_INLINE __m256i infer__avx2_dot_ss(__m256i a, __m256i b) {
    return infer__avx2_dot_us(_mm256_abs_epi8(a), _mm256_sign_epi8(b, a));
}

/* 16 bytes of nibbles: the low ones in bytes 0..15, the high in 16..31 */
INFER__AVX2_INLINE __m256i infer__avx2_nibbles(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}
/* bit j of the 32-bit qh as 0x10 in byte j (the fifth bit of Q5 values) */
INFER__AVX2_INLINE __m256i infer__avx2_fifth_bits(const uint8_t *qh) {
    uint32_t h;
    __m256i b;
    memcpy(&h, qh, 4);
    b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                            _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0));
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfell));
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

/* ---- the 32-value block formats dotted with 8-bit activations ----
   One body each for AVX2 and AVX-512 VNNI, which differ only in the dot
   instruction: DOT_SS(a, b) and DOT_US(u, s) give 8 int32 sums of 4
   neighbouring products, s8 x s8 and u8 x s8 (infer__avx2_dot_ss and _us:
   maddubs pairs; VNNI's dpbusd at once). A block's sum is exact either
   way, so both give the same bits. The bodies take n, w and xv; LOADW
   (a block) gives the weights as 32 bytes, signed for the _0 formats
   (value - offset), unsigned for the _1 ones. */
#define INFER__X86_F16(h) _cvtsh_ss(h) /* F16C: exact, as infer__fp16_to_fp32 */
#define INFER__X86_SCALE(a, x) _mm256_set1_ps(INFER__X86_F16((a).d) * INFER__X86_F16((x).d))
#define INFER__X86_LOAD32(p) _mm256_loadu_si256((const __m256i *)(p))
#define INFER__X86_Q8_0_W(a) INFER__X86_LOAD32((a).qs)
#define INFER__X86_Q4_0_W(a) _mm256_sub_epi8(infer__avx2_nibbles((a).qs), _mm256_set1_epi8(8))
#define INFER__X86_Q4_1_W(a) infer__avx2_nibbles((a).qs)
#define INFER__X86_Q5_1_W(a) _mm256_or_si256(infer__avx2_nibbles((a).qs), infer__avx2_fifth_bits((a).qh))
#define INFER__X86_Q5_0_W(a) _mm256_sub_epi8(INFER__X86_Q5_1_W(a), _mm256_set1_epi8(16))
/* a block's products, scaled, fused into acc */
#define INFER__X86_BLOCK_FMA(acc, a, x, q) acc = _mm256_fmadd_ps(INFER__X86_SCALE(a, x), _mm256_cvtepi32_ps(q), acc)

/* Q8_0 and Q5_0: one chain, block after block (llama.cpp's order) */
#define INFER__X86_DOT_0(BLOCK, LOADW, DOT_SS)                                                                     \
    const BLOCK *a = (const BLOCK *)w;                                                                             \
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;                                                    \
    __m256 acc = _mm256_setzero_ps();                                                                              \
    int b, nb = n / 32;                                                                                            \
    for (b = 0; b < nb; b++)                                                                                       \
        INFER__X86_BLOCK_FMA(acc, a[b], x[b], DOT_SS(LOADW(a[b]), INFER__X86_LOAD32(x[b].qs)));                    \
    return infer__avx2_hsum(acc);

/* Q4_0: even and odd blocks in two chains, added at the end */
#define INFER__X86_DOT_Q4_0(DOT_SS)                                                                                \
    const infer__block_q4_0 *a = (const infer__block_q4_0 *)w;                                                     \
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;                                                    \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                                                 \
    int b = 0, nb = n / 32;                                                                                        \
    for (; b + 2 <= nb; b += 2) {                                                                                  \
        __m256i p0 = DOT_SS(INFER__X86_Q4_0_W(a[b]), INFER__X86_LOAD32(x[b].qs));                                  \
        __m256i p1 = DOT_SS(INFER__X86_Q4_0_W(a[b + 1]), INFER__X86_LOAD32(x[b + 1].qs));                          \
        INFER__X86_BLOCK_FMA(acc0, a[b], x[b], p0);                                                                \
        INFER__X86_BLOCK_FMA(acc1, a[b + 1], x[b + 1], p1);                                                        \
    }                                                                                                              \
    for (; b < nb; b++)                                                                                            \
        INFER__X86_BLOCK_FMA(acc0, a[b], x[b], DOT_SS(INFER__X86_Q4_0_W(a[b]), INFER__X86_LOAD32(x[b].qs)));       \
    return infer__avx2_hsum(_mm256_add_ps(acc0, acc1));

/* Q4_1 and Q5_1 (Q8_1 activations): the blocks' m * s summed apart */
#define INFER__X86_DOT_1(BLOCK, LOADW, DOT_US)                                                                     \
    const BLOCK *a = (const BLOCK *)w;                                                                             \
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)xv;                                                    \
    __m256 acc = _mm256_setzero_ps();                                                                              \
    float ms = 0;                                                                                                  \
    int b, nb = n / 32;                                                                                            \
    for (b = 0; b < nb; b++) {                                                                                     \
        INFER__X86_BLOCK_FMA(acc, a[b], x[b], DOT_US(LOADW(a[b]), INFER__X86_LOAD32(x[b].qs)));                    \
        ms += INFER__X86_F16(a[b].m) * INFER__X86_F16(x[b].s);                                                     \
    }                                                                                                              \
    return infer__avx2_hsum(acc) + ms;

/* The five, with the caller's target attribute and names */
#define INFER__X86_BLOCK_DOTS(TARGET, Q8_0_DOT, Q4_0_DOT, Q4_1_DOT, Q5_0_DOT, Q5_1_DOT, DOT_SS, DOT_US)            \
    TARGET static float Q8_0_DOT(int n, const void *w, const void *xv) {                                           \
        INFER__X86_DOT_0(infer__block_q8_0, INFER__X86_Q8_0_W, DOT_SS)                                             \
    }                                                                                                              \
    TARGET static float Q4_0_DOT(int n, const void *w, const void *xv) { INFER__X86_DOT_Q4_0(DOT_SS) }             \
    TARGET static float Q4_1_DOT(int n, const void *w, const void *xv) {                                           \
        INFER__X86_DOT_1(infer__block_q4_1, INFER__X86_Q4_1_W, DOT_US)                                             \
    }                                                                                                              \
    TARGET static float Q5_0_DOT(int n, const void *w, const void *xv) {                                           \
        INFER__X86_DOT_0(infer__block_q5_0, INFER__X86_Q5_0_W, DOT_SS)                                             \
    }                                                                                                              \
    TARGET static float Q5_1_DOT(int n, const void *w, const void *xv) {                                           \
        INFER__X86_DOT_1(infer__block_q5_1, INFER__X86_Q5_1_W, DOT_US)                                             \
    }

/* A packed product (infer__gemm_packed_fn) that is its file's driver for
   one format: the driver takes the leading arguments given here (which
   format, which order), then the product's own. */
#define INFER__X86_PACKED_ENTRY(TARGET, name, driver, ...)                                                         \
    TARGET static void name(int n, const void *packed, int n_rows, const void *x, size_t x_stride, int n_tok,    \
                            float *y, size_t ldy) {                                                                \
        driver(__VA_ARGS__, n, packed, n_rows, x, x_stride, n_tok, y, ldy);                                        \
    }

/* The vector exp's core, for AVX2's 8 lanes and AVX-512's 16 (FMADD,
   FNMADD and SET1 that width's intrinsics): x = n ln2 + r with n = x / ln2
   rounded (given) and ln2 in two parts, so |r| <= ln2/2; p = e^r by its
   Taylor series to r^7 in Horner's form (relative error below 1e-8
   there). Each caller scales p by 2^n. */
#define INFER__X86_EXP_TAYLOR(x, n, r, p, FMADD, FNMADD, SET1)                                                     \
    r = FNMADD(n, SET1(0.693145751953125f), x);                                                                    \
    r = FNMADD(n, SET1(1.428606765330187e-6f), r);                                                                 \
    p = SET1(1.0f / 5040);                                                                                         \
    p = FMADD(p, r, SET1(1.0f / 720));                                                                             \
    p = FMADD(p, r, SET1(1.0f / 120));                                                                             \
    p = FMADD(p, r, SET1(1.0f / 24));                                                                              \
    p = FMADD(p, r, SET1(1.0f / 6));                                                                               \
    p = FMADD(p, r, SET1(0.5f));                                                                                   \
    p = FMADD(p, r, SET1(1.0f));                                                                                   \
    p = FMADD(p, r, SET1(1.0f))

/* 8 rows of 8 F16 values transposed to F32: out[c] is value c of rows 0-7.
   Row r is at src + r stride; rows from n on are zeros, and values from
   m on (m < 8: a tail, read no further) are zeros. */
#define INFER__LOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
INFER__AVX2_INLINE void infer__x86_t8x8_f16(const uint8_t *src, size_t stride, int n, int m, __m256 out[8]) {
    __m256 r[8], u[8], v[8];
    int i;
    INFER__UNROLL(8)
    for (i = 0; i < 8; i++) {
        if (i >= n) {
            r[i] = _mm256_setzero_ps();
        } else if (m >= 8) {
            r[i] = INFER__LOADH(src + (size_t)i * stride);
        } else {
            uint16_t t[8] = {0};
            memcpy(t, src + (size_t)i * stride, (size_t)m * 2);
            r[i] = INFER__LOADH(t);
        }
    }
    INFER__UNROLL(4)
    for (i = 0; i < 8; i += 2) {
        u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    INFER__UNROLL(2)
    for (i = 0; i < 8; i += 4) {
        v[i] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        v[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* v[0..3]: values 0, 1, 2, 3 (| 4 5 6 7 in the high halves) of rows 0-3; v[4..7] of rows 4-7 */
    INFER__UNROLL(4)
    for (i = 0; i < 4; i++) {
        out[i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x20);
        out[4 + i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x31);
    }
}

/* Attention's q.K kernels' operands (infer__kernels.qk_f16), widened to F32
   in work: key j's dim d at (j / 16) 16 hd + 16 d + j % 16 (panels of 16
   keys, dim by dim; keys past kt zero, to kt rounded up to 16), then the
   query rows at hd (kt rounded up to 16), row i's dim d at i hd + d, zero
   rows up to nq rounded up to pad. */
INFER__AVX2_INLINE void infer__x86_qk_widen(int hd, const uint8_t *k, size_t k_stride, int kt, const uint16_t *q,
                                            size_t q_stride, int nq, int pad, float *work) {
    int kp = (kt + 15) / 16 * 16, j, d, i;
    float *kd = work, *qf = work + (size_t)hd * kp;
    for (j = 0; j < kp; j += 8)
        for (d = 0; d < hd; d += 8) {
            __m256 col[8];
            float *at = kd + (size_t)(j / 16) * 16 * hd + j % 16;
            infer__x86_t8x8_f16(k + (size_t)j * k_stride + (size_t)d * 2, k_stride, kt - j, 8, col);
            INFER__UNROLL(8)
            for (i = 0; i < 8; i++) _mm256_storeu_ps(at + (size_t)(d + i) * 16, col[i]);
        }
    for (i = 0; i < (nq + pad - 1) / pad * pad; i++)
        for (d = 0; d < hd; d += 8)
            _mm256_storeu_ps(qf + (size_t)i * hd + d, i < nq ? INFER__LOADH(q + (size_t)i * q_stride / 2 + d) : _mm256_setzero_ps());
}

#endif /* INFER__HAVE_X86 */

#endif /* INFER_SIMD_X86_H */
