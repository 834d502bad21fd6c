/* simd_avx512.c - AVX-512 versions of the kernels (with VNNI and BF16 where
   the CPU has them), compiled with target attributes. The AVX2 kernels are
   installed first; these replace them where 512-bit registers or the newer
   instructions pay: float formats at 16 lanes, the 8-bit dot products with
   VNNI's dpbusd (u8 x s8 summed into int32 in one instruction, at 256 bits
   since every block has its own scale), BF16 with dpbf16ps.
   dpbf16ps treats subnormal inputs and results as zero (it ignores MXCSR),
   as llama.cpp's kernel does; the test allows for that. */
#include "internal.h"
#include "quants.h"
#include "pack.h"
#include "simd_x86.h"

#ifdef INFER__HAVE_X86
INFER__AVX512_INTRINSICS_BEGIN /* GCC's false positives: platform.h */

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

/* one token's order: infer__f16_dot_llama_vec */
INFER__AVX512 static float infer__avx512_f16_dot_ordered1(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m512 s[4];
    float lane[16];
    double sum;
    int i = 0, j;
    for (j = 0; j < 4; j++) s[j] = _mm512_setzero_ps();
    for (; i + 64 <= n; i += 64)
        for (j = 0; j < 4; j++)
            s[j] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16 * j))),
                                   _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i + 16 * j))), s[j]);
    _mm512_storeu_ps(lane, _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3])));
    sum = (double)infer__sum16_tree(lane);
    for (; i < n; i++) sum += (double)(infer__fp16_to_fp32(a[i]) * infer__fp16_to_fp32(b[i]));
    return (float)sum;
}

/* llama.cpp's F16 order for a batch (tinyBLAS on AVX-512): one 16-lane
   chain, then the horizontal add's tree (infer__f16_dot_llama) */
INFER__AVX512 static float infer__avx512_f16_dot_ordered(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    __m512 s = _mm512_setzero_ps();
    float lane[16];
    int i;
    if (n % 16) return infer__avx512_f16_dot_ordered1(n, w, x);
    for (i = 0; i < n; i += 16)
        s = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))),
                            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i))), s);
    _mm512_storeu_ps(lane, s);
    return infer__sum16_tree(lane);
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

/* Four rows' sums of 16 lanes, each by one tree whatever the others hold
   (quarters 0+2 and 1+3, then those two, then lanes 0+2 and 1+3, then
   those two), as one vector. */
INFER__AVX512_INLINE __m128 infer__avx512_hsum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xee));
    __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xee));
    /* quarter k: row k's quarters 0+2 and 1+3 added */
    __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xdd));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v));
}

/* F16 GEMM for n up to INFER__F16_WIDE (attention's shapes): tokens 4 at a
   time widened to F32 once, rows 4 at a time each widened once a step for
   the tokens, 16 values a step (the last masked: zeros add exactly), and
   the rows of a tile fetched ahead. Every sum is value i in lane i % 16 at
   step i / 16, then infer__avx512_hsum4's tree; a last group of fewer
   than 4 rows repeats its last row, so a row sums alike wherever it falls
   and a token alike in any batch. */
INFER__AVX512_INLINE void infer__avx512_f16_wide_rows(const int T, int n, const uint8_t *w, size_t w_stride, int n_rows,
                                                      const float *xf, int n_pad, int ahead, float *y, size_t ldy) {
    int r, i, c, t;
    for (r = 0; r < n_rows; r += 4) {
        const uint8_t *w0 = w + (size_t)r * w_stride;
        const uint8_t *w1 = w + (size_t)INFER__MIN(r + 1, n_rows - 1) * w_stride;
        const uint8_t *w2 = w + (size_t)INFER__MIN(r + 2, n_rows - 1) * w_stride;
        const uint8_t *w3 = w + (size_t)INFER__MIN(r + 3, n_rows - 1) * w_stride;
        __m512 acc[4][4];
        for (t = 0; t < T; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
        for (c = ahead; c < ahead + 4; c++) /* past the last row too: a prefetch never faults */
            for (i = 0; i < n * 2; i += 64) _mm_prefetch((const char *)w0 + c * w_stride + i, _MM_HINT_T0);
        for (i = 0; i < n; i += 16) {
            __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
            __m512 k0 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w0 + 2 * (size_t)i));
            __m512 k1 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w1 + 2 * (size_t)i));
            __m512 k2 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w2 + 2 * (size_t)i));
            __m512 k3 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w3 + 2 * (size_t)i));
            for (t = 0; t < T; t++) {
                __m512 xv = _mm512_loadu_ps(xf + (size_t)t * n_pad + i);
                acc[t][0] = _mm512_fmadd_ps(k0, xv, acc[t][0]);
                acc[t][1] = _mm512_fmadd_ps(k1, xv, acc[t][1]);
                acc[t][2] = _mm512_fmadd_ps(k2, xv, acc[t][2]);
                acc[t][3] = _mm512_fmadd_ps(k3, xv, acc[t][3]);
            }
        }
        for (t = 0; t < T; t++) {
            __m128 s4 = infer__avx512_hsum4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]);
            if (n_rows - r >= 4) _mm_storeu_ps(y + (size_t)t * ldy + r, s4);
            else _mm_mask_storeu_ps(y + (size_t)t * ldy + r, (__mmask8)((1u << (n_rows - r)) - 1), s4);
        }
    }
}

INFER__AVX512 static void infer__avx512_f16_gemm_wide(int n, const uint8_t *w, size_t w_stride, int n_rows,
                                                    const uint8_t *x, size_t x_stride, int n_tok, float *y, size_t ldy) {
    float xf[4 * INFER__F16_WIDE];
    int n_pad = (n + 15) / 16 * 16, t0, t, i;
    int ahead = INFER__MAX(16, INFER__MIN(INFER__F16_AHEAD_MAX, INFER__F16_AHEAD / (2 * n)));
    for (t0 = 0; t0 < n_tok; t0 += 4) {
        int nt = INFER__MIN(4, n_tok - t0);
        for (t = 0; t < nt; t++)
            for (i = 0; i < n; i += 16) {
                __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
                _mm512_storeu_ps(xf + (size_t)t * n_pad + i,
                                 _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + (size_t)(t0 + t) * x_stride + 2 * (size_t)i)));
            }
        switch (nt) {
        case 4: infer__avx512_f16_wide_rows(4, n, w, w_stride, n_rows, xf, n_pad, ahead, y + (size_t)t0 * ldy, ldy); break;
        case 3: infer__avx512_f16_wide_rows(3, n, w, w_stride, n_rows, xf, n_pad, ahead, y + (size_t)t0 * ldy, ldy); break;
        case 2: infer__avx512_f16_wide_rows(2, n, w, w_stride, n_rows, xf, n_pad, ahead, y + (size_t)t0 * ldy, ldy); break;
        default: infer__avx512_f16_wide_rows(1, n, w, w_stride, n_rows, xf, n_pad, ahead, y + (size_t)t0 * ldy, ldy); break;
        }
    }
}

/* Attention's q.K for a prompt's many rows (infer__kernels.qk_f16): the
   operands widened as AVX2's kernel has them (infer__x86_qk_widen), then R
   query rows x 32 keys in registers (two panels of 16), each dim's q value
   broadcast; every score fused in dim order, as every ISA's qk_f16 is. */
#define INFER__QK512_ROWS 12
INFER__AVX512_INLINE void infer__avx512_qk_block(const int R, const int P, int hd, const float *qf, const float *panel,
                                                  int n_rows, int n_keys, float *s, size_t lds) {
    __m512 acc[INFER__QK512_ROWS][2];
    int r, d, c;
    INFER__UNROLL(12)
    for (r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (d = 0; d < hd; d++) {
        __m512 k0 = _mm512_loadu_ps(panel + 16 * d), k1 = P > 1 ? _mm512_loadu_ps(panel + 16 * hd + 16 * d) : k0;
        INFER__UNROLL(12)
        for (r = 0; r < R; r++) {
            __m512 b = _mm512_set1_ps(qf[(size_t)r * hd + d]);
            acc[r][0] = _mm512_fmadd_ps(b, k0, acc[r][0]);
            if (P > 1) acc[r][1] = _mm512_fmadd_ps(b, k1, acc[r][1]);
        }
    }
    for (r = 0; r < R && r < n_rows; r++)
        for (c = 0; c < P && 16 * c < n_keys; c++) {
            int m = INFER__MIN(16, n_keys - 16 * c);
            _mm512_mask_storeu_ps(s + (size_t)r * lds + 16 * c, (__mmask16)(m == 16 ? 0xffff : (1u << m) - 1), acc[r][c]);
        }
}

INFER__AVX512 static void infer__avx512_qk_f16(int hd, const uint8_t *k, size_t k_stride, int kt, const uint16_t *q,
                                               size_t q_stride, int nq, float *s, size_t lds, float *work) {
    int kp = (kt + 15) / 16 * 16, i, j, left, R = 4;
    const float *kd = work, *qf = work + (size_t)hd * kp;
    infer__x86_qk_widen(hd, k, k_stride, kt, q, q_stride, nq, 4, work);
    for (i = 0; i < nq; i += R) {
        /* rows in blocks of 12, the last in 4, 8 or 12 (rows past nq are zeros, not stored) */
        left = nq - i, R = left > 8 ? 12 : left > 4 ? 8 : 4;
        for (j = 0; j < kp; j += 32) {
            const float *qi = qf + (size_t)i * hd, *panel = kd + (size_t)j * hd;
            float *y = s + (size_t)i * lds + j;
            int P = kp - j >= 32 ? 2 : 1;
            if (R == 12 && P == 2) infer__avx512_qk_block(12, 2, hd, qi, panel, left, kt - j, y, lds);
            else if (R == 12) infer__avx512_qk_block(12, 1, hd, qi, panel, left, kt - j, y, lds);
            else if (R == 8 && P == 2) infer__avx512_qk_block(8, 2, hd, qi, panel, left, kt - j, y, lds);
            else if (R == 8) infer__avx512_qk_block(8, 1, hd, qi, panel, left, kt - j, y, lds);
            else if (P == 2) infer__avx512_qk_block(4, 2, hd, qi, panel, left, kt - j, y, lds);
            else infer__avx512_qk_block(4, 1, hd, qi, panel, left, kt - j, y, lds);
        }
    }
}

/* Attention's p.V for a prompt's many rows (infer__kernels.pv_f16): the
   tile of V widened to F32 once, key by key in panels of 16 values (8 x 8
   transposes of V's rows), and the probabilities to F32; then R rows x P
   panels in registers, each key's probability broadcast, the keys in order:
   one fused sum a value, no lanes to sum across. */
#define INFER__PV512_ROWS 6
INFER__AVX512_INLINE void infer__avx512_pv_block(const int R, const int P, int hd, int kt, const float *vd, const float *pf,
                                                  int ldp, float *acc) {
    __m512 a[INFER__PV512_ROWS][4];
    int r, c, j;
    INFER__UNROLL(8)
    for (r = 0; r < R; r++)
        INFER__UNROLL(4)
        for (c = 0; c < P; c++) a[r][c] = _mm512_loadu_ps(acc + (size_t)r * hd + 16 * c);
    for (j = 0; j < kt; j++) {
        __m512 v[4];
        INFER__UNROLL(4)
        for (c = 0; c < P; c++) v[c] = _mm512_loadu_ps(vd + (size_t)c * 16 * kt + 16 * (size_t)j);
        INFER__UNROLL(8)
        for (r = 0; r < R; r++) {
            __m512 b = _mm512_set1_ps(pf[(size_t)r * ldp + j]);
            INFER__UNROLL(4)
            for (c = 0; c < P; c++) a[r][c] = _mm512_fmadd_ps(b, v[c], a[r][c]);
        }
    }
    INFER__UNROLL(8)
    for (r = 0; r < R; r++)
        INFER__UNROLL(4)
        for (c = 0; c < P; c++) _mm512_storeu_ps(acc + (size_t)r * hd + 16 * c, a[r][c]);
}

INFER__AVX512 static void infer__avx512_pv_f16(int hd, const uint16_t *vt, size_t vt_stride, int kt, const uint16_t *p,
                                               size_t p_stride, int nq, float *acc, float *work) {
    int ldp = (kt + 15) / 16 * 16, d, j, c, i, n;
    float *vd = work, *pf = work + (size_t)hd * kt;
    /* vd: key j's value d at (d / 16) 16 kt + 16 j + d % 16 */
    for (d = 0; d < hd; d += 8)
        for (j = 0; j < kt; j += 8) {
            __m256 col[8];
            float *at = vd + (size_t)(d / 16) * 16 * kt + d % 16;
            infer__x86_t8x8_f16((const uint8_t *)(vt + (size_t)d * vt_stride + j), vt_stride * 2, 8, kt - j, col);
            for (c = 0; c < 8 && j + c < kt; c++) _mm256_storeu_ps(at + 16 * (size_t)(j + c), col[c]);
        }
    for (i = 0; i < nq; i++)
        for (j = 0; j < kt; j += 16) {
            __mmask16 m = (__mmask16)(kt - j >= 16 ? 0xffff : (1u << (kt - j)) - 1);
            _mm512_storeu_ps(pf + (size_t)i * ldp + j, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + (size_t)i * p_stride + j)));
        }
    for (i = 0; i < nq; i += n) {
        n = INFER__MIN(INFER__PV512_ROWS, nq - i);
        for (c = 0; c < hd / 16; c += 4) {
            const float *v = vd + (size_t)c * 16 * kt, *pr = pf + (size_t)i * ldp;
            float *ac = acc + (size_t)i * hd + 16 * c;
#define INFER__PV512_CASE(RR)                                                                            \
    case RR:                                                                                             \
        switch (INFER__MIN(4, hd / 16 - c)) {                                                            \
        case 1: infer__avx512_pv_block(RR, 1, hd, kt, v, pr, ldp, ac); break;                            \
        case 2: infer__avx512_pv_block(RR, 2, hd, kt, v, pr, ldp, ac); break;                            \
        case 3: infer__avx512_pv_block(RR, 3, hd, kt, v, pr, ldp, ac); break;                            \
        default: infer__avx512_pv_block(RR, 4, hd, kt, v, pr, ldp, ac); break;                           \
        }                                                                                                \
        break;
            switch (n) {
                INFER__PV512_CASE(1) INFER__PV512_CASE(2) INFER__PV512_CASE(3) INFER__PV512_CASE(4) INFER__PV512_CASE(5)
            default:
                INFER__PV512_CASE(6)
            }
#undef INFER__PV512_CASE
        }
    }
}

INFER__AVX512 static void infer__avx512_f16_gemm(int n, const void *w, size_t w_stride, int n_rows, const void *x,
                                                 size_t x_stride, int n_tok, float *y, size_t ldy) {
    int r, t;
    if (n <= INFER__F16_WIDE) {
        infer__avx512_f16_gemm_wide(n, (const uint8_t *)w, w_stride, n_rows, (const uint8_t *)x, x_stride, n_tok, y, ldy);
        return;
    }
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

/* simd_x86.h's bodies with the dot as one dpbusd */
INFER__X86_BLOCK_DOTS(INFER__AVX512VNNI, infer__vnni_q8_0_dot, infer__vnni_q4_0_dot, infer__vnni_q4_1_dot,
                      infer__vnni_q5_0_dot, infer__vnni_q5_1_dot, infer__vnni_dot_ss, infer__vnni_dot_us)

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
#define INFER__NOFIX(q) _mm512_setzero_si512()
#define INFER__SAME(q) (q)
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
#undef INFER__GEMM_DOT
#undef INFER__Q4_LD
#undef INFER__Q4X_FIX
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
INFER__GEMM_DRIVER(infer__vnni_q4_0_gemm, infer__vnni_q4_0_tile, 32)
INFER__GEMM_DRIVER(infer__vnni_q6_K_gemm, infer__vnni_q6_K_tile, INFER__QK_K)
#undef INFER__GEMM_DRIVER

/* ---- packed weights (pack.c's layouts): 16 rows in the lanes ----
   A tile is one group of 16 rows x T tokens: per 4 k-values one weight
   vector, dotted by dpbusd with each token's 4 activation bytes
   broadcast. The int32 sums of a block start at the activation-side
   offset correction (-8 or -128 times sum(x), per token and block, from a
   small table made once per call), so they equal vec_dot's integer sums;
   then one convert and FMA with d_w * d_x per block and token. */
#define INFER__PK_TMAX 12   /* tokens per tile: 2 * 12 accumulators */
#define INFER__PK_AUX 8192  /* (token, block) entries of the activation table, on the stack (64 KiB) */

INFER__AVX512VNNI_INLINE __m512i infer__pk_bcast(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* The one-token kernels share llama.cpp's summation order: eight
   float sums per row (lane l: values 4l .. 4l+3 of each 32-value block),
   added at the end as its hsum_float_8 does. */
INFER__AVX512_INLINE __m512 infer__pk_hsum8(const __m512 f[8]) {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(f[0], f[4]), _mm512_add_ps(f[2], f[6])),
                         _mm512_add_ps(_mm512_add_ps(f[1], f[5]), _mm512_add_ps(f[3], f[7])));
}
/* The rows of group g that exist (the last group may be partial). */
INFER__AVX512_INLINE __mmask16 infer__pk_rows_mask(int n_rows, int g) {
    int rem = n_rows - g * INFER__PACK_ROWS;
    return (__mmask16)(rem >= 16 ? 0xffff : (1u << rem) - 1);
}
/* -(off * each lane's sum of the block's 32 activations): what unsigned
   weights stored with +off take back, per lane. */
INFER__AVX512VNNI_INLINE void infer__pk_lane_corr(const int8_t *qs, int off, int32_t corr[8]) {
    __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)qs));
    _mm256_storeu_si256((__m256i *)corr, _mm256_mullo_epi32(sums, _mm256_set1_epi32(-off)));
}

/* per token t < n_tok and block b < nb of Q8_0 activations: d_x, and
   -off * sum(qs) */
INFER__AVX512VNNI_INLINE void infer__pk_q8_aux(const uint8_t *x, size_t x_stride, int n_tok, int nb, int off, float *dx,
                                               int32_t *cx) {
    int t, b;
    for (t = 0; t < n_tok; t++) {
        const infer__block_q8_0 *xb = (const infer__block_q8_0 *)(x + (size_t)t * x_stride);
        for (b = 0; b < nb; b++) {
            /* sad of (x + 128) against 0: four sums of 8 unsigned bytes */
            __m256i s = _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)xb[b].qs),
                                                         _mm256_set1_epi8((char)0x80)),
                                        _mm256_setzero_si256());
            __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi64(h, _mm_unpackhi_epi64(h, h));
            dx[t * nb + b] = _cvtsh_ss(xb[b].d);
            cx[t * nb + b] = -off * (_mm_cvtsi128_si32(h) - 32 * 128);
        }
    }
}

/* QB quant bytes per row and block: 16 (Q4_0, nibbles) or 32 (Q8_0). T <= 4
   splits each token's sum into two accumulators (lo/hi nibbles or even/odd
   words) so the dpbusd chains are half as long. */
INFER__AVX512VNNI_INLINE void infer__pk_tile_32(const int QB, const int T, int nb, const uint8_t *gp,
                                                const uint8_t *x, size_t x_stride, const float *dx, const int32_t *cx,
                                                int aux_stride, float *y, size_t ldy, __mmask16 m, int add) {
    __m512 f[INFER__PK_TMAX];
    __m512i a[INFER__PK_TMAX], a2[INFER__PK_TMAX];
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const int split = T <= 4;
    int b, j, t;
    for (t = 0; t < T; t++) f[t] = _mm512_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint8_t *q = gp + infer__pack_q_at(b, QB), *xq = x + (size_t)b * sizeof(infer__block_q8_0) + 2;
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + infer__pack_d_at(b, QB))));
        for (t = 0; t < T; t++) {
            a[t] = _mm512_set1_epi32(cx[t * aux_stride + b]);
            if (split) a2[t] = _mm512_setzero_si512();
        }
        if (QB == 16) {
            for (j = 0; j < 4; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(q + 64 * j));
                /* split: the high nibbles in place (16 * value), one op
                   instead of two; their sum is 16 times too large, exactly */
                __m512i lo = _mm512_and_si512(v, m4),
                        hi = split ? _mm512_xor_si512(v, lo) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                for (t = 0; t < T; t++) a[t] = _mm512_dpbusd_epi32(a[t], lo, infer__pk_bcast(xq + t * x_stride + 4 * j));
                for (t = 0; t < T; t++) {
                    __m512i xv = infer__pk_bcast(xq + t * x_stride + 16 + 4 * j);
                    if (split) a2[t] = _mm512_dpbusd_epi32(a2[t], hi, xv);
                    else a[t] = _mm512_dpbusd_epi32(a[t], hi, xv);
                }
            }
        } else {
            for (j = 0; j < 8; j += 2) {
                __m512i v0 = _mm512_loadu_si512((const void *)(q + 64 * j));
                __m512i v1 = _mm512_loadu_si512((const void *)(q + 64 * j + 64));
                for (t = 0; t < T; t++) a[t] = _mm512_dpbusd_epi32(a[t], v0, infer__pk_bcast(xq + t * x_stride + 4 * j));
                for (t = 0; t < T; t++) {
                    __m512i xv = infer__pk_bcast(xq + t * x_stride + 4 * j + 4);
                    if (split) a2[t] = _mm512_dpbusd_epi32(a2[t], v1, xv);
                    else a[t] = _mm512_dpbusd_epi32(a[t], v1, xv);
                }
            }
        }
        for (t = 0; t < T; t++) {
            __m512i s = !split ? a[t] : _mm512_add_epi32(a[t], QB == 16 ? _mm512_srai_epi32(a2[t], 4) : a2[t]);
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * aux_stride + b])), f[t]);
        }
    }
    for (t = 0; t < T; t++) {
        float *yt = y + (size_t)t * ldy;
        if (add) f[t] = _mm512_add_ps(f[t], _mm512_maskz_loadu_ps(m, yt));
        _mm512_mask_storeu_ps(yt, m, f[t]);
    }
}

INFER__AVX512VNNI_INLINE void infer__pk_tile_32_any(int QB, int T, int nb, const uint8_t *gp,
                                                    const uint8_t *x, size_t x_stride, const float *dx, const int32_t *cx,
                                                    int aux_stride, float *y, size_t ldy, __mmask16 m, int add) {
#define INFER__PK_CASE(QQ, TT) \
    case TT: infer__pk_tile_32(QQ, TT, nb, gp, x, x_stride, dx, cx, aux_stride, y, ldy, m, add); break;
    if (QB == 16) {
        switch (T) {
            INFER__PK_CASE(16, 1) INFER__PK_CASE(16, 2) INFER__PK_CASE(16, 3) INFER__PK_CASE(16, 4)
            INFER__PK_CASE(16, 5) INFER__PK_CASE(16, 6) INFER__PK_CASE(16, 7) INFER__PK_CASE(16, 8)
            INFER__PK_CASE(16, 9) INFER__PK_CASE(16, 10) INFER__PK_CASE(16, 11) default: INFER__PK_CASE(16, 12)
        }
    } else {
        switch (T) {
            INFER__PK_CASE(32, 1) INFER__PK_CASE(32, 2) INFER__PK_CASE(32, 3) INFER__PK_CASE(32, 4)
            INFER__PK_CASE(32, 5) INFER__PK_CASE(32, 6) INFER__PK_CASE(32, 7) INFER__PK_CASE(32, 8)
            INFER__PK_CASE(32, 9) INFER__PK_CASE(32, 10) INFER__PK_CASE(32, 11) default: INFER__PK_CASE(32, 12)
        }
    }
#undef INFER__PK_CASE
}

/* The driver: k in slices that keep the activation table on the stack,
   tokens in chunks that fit it, and per chunk every group with its weights
   kept hot in cache while the chunk's token tiles pass over them. */
INFER__AVX512VNNI_INLINE void infer__pk_gemm_32(int QB, int off, int n, const void *packed, int n_rows, const void *xv,
                                                size_t x_stride, int n_tok, float *y, size_t ldy) {
    float dx[INFER__PK_AUX];
    int32_t cx[INFER__PK_AUX];
    const uint8_t *x = (const uint8_t *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, k0, t0, t, g;
    size_t gbytes = infer__pack_group_bytes(n, QB);
    for (k0 = 0; k0 < nb; k0 += INFER__PK_AUX) {
        int kn = INFER__MIN(INFER__PK_AUX, nb - k0), chunk = INFER__PK_AUX / kn;
        if (chunk > INFER__PK_TMAX) chunk -= chunk % INFER__PK_TMAX;
        for (t0 = 0; t0 < n_tok; t0 += chunk) {
            int tc = INFER__MIN(chunk, n_tok - t0);
            const uint8_t *xc = x + (size_t)t0 * x_stride + (size_t)k0 * sizeof(infer__block_q8_0);
            infer__pk_q8_aux(xc, x_stride, tc, kn, off, dx, cx);
            for (g = 0; g < ng; g++) {
                /* k0 is even: a whole number of pairs in */
                const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes + infer__pack_q_at(k0, QB);
                __mmask16 m = infer__pk_rows_mask(n_rows, g);
                for (t = 0; t < tc; t += INFER__PK_TMAX)
                    infer__pk_tile_32_any(QB, INFER__MIN(INFER__PK_TMAX, tc - t), kn, gp, xc + (size_t)t * x_stride,
                                          x_stride, dx + t * kn, cx + t * kn, kn,
                                          y + (size_t)(t0 + t) * ldy + (size_t)g * INFER__PACK_ROWS, ldy, m, k0 > 0);
            }
        }
    }
}

/* One token against packed Q8_0 rows, summed in llama.cpp's order (its
   vec_dot and its tinyBLAS tiles alike): per row eight float sums, one per
   4-byte word of the 32-value blocks, each taking d_w * d_x times the
   word's integer dot block after block, then added as its hsum_float_8
   does. Float rounding is then the same as llama.cpp's, which matters on
   models that amplify the last bit (a generation step is memory-bound, so
   the extra converts cost nothing here). */
INFER__AVX512VNNI_INLINE void infer__vnni_q8_0_gemv_packed(int n, const void *packed, int n_rows, const void *xv,
                                                           float *y) {
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, g, b, j;
    size_t gbytes = infer__pack_group_bytes(n, 32);
    for (g = 0; g < ng; g++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
        __m512 f[8];
        for (j = 0; j < 8; j++) f[j] = _mm512_setzero_ps();
        for (b = 0; b < nb; b++) {
            const uint8_t *q = gp + infer__pack_q_at(b, 32);
            __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + infer__pack_d_at(b, 32)))),
                                     _mm512_set1_ps(_cvtsh_ss(x[b].d)));
            /* the weights carry +128 */
            int32_t corr[8];
            infer__pk_lane_corr(x[b].qs, 128, corr);
            for (j = 0; j < 8; j++) {
                __m512i s = _mm512_dpbusd_epi32(_mm512_set1_epi32(corr[j]), _mm512_loadu_si512((const void *)(q + 64 * j)),
                                                infer__pk_bcast((const uint8_t *)x[b].qs + 4 * j));
                f[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), f[j]);
            }
        }
        _mm512_mask_storeu_ps(y + (size_t)g * INFER__PACK_ROWS, infer__pk_rows_mask(n_rows, g), infer__pk_hsum8(f));
    }
}

/* The same for Q4_0: word j's low nibbles are the values of llama.cpp's
   lane j, its high nibbles those of lane 4 + j; the nibbles count from 0,
   so 8 * (the lane's sum of x) is taken back. */
INFER__AVX512VNNI static void infer__vnni_q4_0_gemv_packed(int n, const void *packed, int n_rows, const void *xv,
                                                           float *y) {
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, g, b, j;
    size_t gbytes = infer__pack_group_bytes(n, 16);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (g = 0; g < ng; g++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
        __m512 f[8];
        for (j = 0; j < 8; j++) f[j] = _mm512_setzero_ps();
        for (b = 0; b < nb; b++) {
            const uint8_t *q = gp + infer__pack_q_at(b, 16), *xq = (const uint8_t *)x[b].qs;
            __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + infer__pack_d_at(b, 16)))),
                                     _mm512_set1_ps(_cvtsh_ss(x[b].d)));
            int32_t corr[8];
            infer__pk_lane_corr(x[b].qs, 8, corr);
            for (j = 0; j < 4; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(q + 64 * j));
                __m512i lo = _mm512_dpbusd_epi32(_mm512_set1_epi32(corr[j]), _mm512_and_si512(v, m4),
                                                 infer__pk_bcast(xq + 4 * j));
                __m512i hi = _mm512_dpbusd_epi32(_mm512_set1_epi32(corr[4 + j]),
                                                 _mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                                 infer__pk_bcast(xq + 16 + 4 * j));
                f[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lo), f[j]);
                f[4 + j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(hi), f[4 + j]);
            }
        }
        _mm512_mask_storeu_ps(y + (size_t)g * INFER__PACK_ROWS, infer__pk_rows_mask(n_rows, g), infer__pk_hsum8(f));
    }
}

/* A token's sums are the same, bit for bit, alone and in a pass of a
   few (a draft verified in one pass must give what one-token passes give;
   sequences decoded together what each gives alone). Q4_0, Q4_1 and Q5_1
   take one token by the tiles (T = 1), as a batch; llama.cpp's one-token
   order is their ordered kernels' (contexts that match it). Q8_0 and Q5_0
   have batch kernels in llama.cpp's order, whose tokens sum alike in any
   batch: passes of up to INFER__PK_FEW tokens take those, longer prompts
   the tiles (about a third faster: TinyLlama Q8_0 pp256 172 to 185 t/s
   against 116 to 130). One Q8_0 token by the tiles fell outside the
   references' tolerance on synth-256-q8_0 (1.03% of the range, limit 1%). */
#define INFER__PK_FEW 64
INFER__AVX512VNNI static void infer__vnni_q8_0_gemm_packed_ordered(int n, const void *packed, int n_rows, const void *x,
                                                                   size_t x_stride, int n_tok, float *y, size_t ldy);
INFER__AVX512VNNI static void infer__vnni_q5_0_gemm_packed_ordered(int n, const void *packed, int n_rows, const void *x,
                                                                   size_t x_stride, int n_tok, float *y, size_t ldy);
INFER__AVX512VNNI static void infer__vnni_q8_0_gemm_packed(int n, const void *packed, int n_rows, const void *x,
                                                           size_t x_stride, int n_tok, float *y, size_t ldy) {
    if (n_tok <= INFER__PK_FEW) infer__vnni_q8_0_gemm_packed_ordered(n, packed, n_rows, x, x_stride, n_tok, y, ldy);
    else infer__pk_gemm_32(32, 128, n, packed, n_rows, x, x_stride, n_tok, y, ldy);
}
INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q4_0_gemm_packed, infer__pk_gemm_32, 16, 8)
/* Q4_0 for contexts that match llama.cpp: one token in its order, a batch by the tiles */
INFER__AVX512VNNI static void infer__vnni_q4_0_gemm_packed_ordered(int n, const void *packed, int n_rows, const void *x,
                                                                   size_t x_stride, int n_tok, float *y, size_t ldy) {
    if (n_tok == 1) infer__vnni_q4_0_gemv_packed(n, packed, n_rows, x, y);
    else infer__pk_gemm_32(16, 8, n, packed, n_rows, x, x_stride, n_tok, y, ldy);
}

/* Q5_0: Q4_0's nibbles with each lane's fifth bits added by a byte-masked
   add of 16 (pack.c keeps one 64-bit mask per lane and block). */
INFER__AVX512VNNI_INLINE __m512i infer__pk_q5_hi(__m512i v, const uint8_t *mask, int l) {
    uint64_t k;
    memcpy(&k, mask + 8 * l, 8);
    return _mm512_mask_add_epi8(v, _cvtu64_mask64(k), v, _mm512_set1_epi8(16));
}

INFER__AVX512VNNI_INLINE void infer__pk_tile_q5_0(const int T, int nb, const uint8_t *gp, const uint8_t *x,
                                                  size_t x_stride, const float *dx, const int32_t *cx, int aux_stride,
                                                  float *y, size_t ldy, __mmask16 m, int add) {
    __m512 f[INFER__PK_TMAX];
    __m512i a[INFER__PK_TMAX];
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    int b, j, t;
    for (t = 0; t < T; t++) f[t] = _mm512_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint8_t *o = gp + (size_t)b * INFER__PACK_Q5_0_BLOCK, *xq = x + (size_t)b * sizeof(infer__block_q8_0) + 2;
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 320)));
        for (t = 0; t < T; t++) a[t] = _mm512_set1_epi32(cx[t * aux_stride + b]);
        for (j = 0; j < 4; j++) {
            __m512i v = _mm512_loadu_si512((const void *)(o + 64 * j));
            __m512i lo = infer__pk_q5_hi(_mm512_and_si512(v, m4), o + 256, j);
            __m512i hi = infer__pk_q5_hi(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), o + 256, 4 + j);
            for (t = 0; t < T; t++) a[t] = _mm512_dpbusd_epi32(a[t], lo, infer__pk_bcast(xq + t * x_stride + 4 * j));
            for (t = 0; t < T; t++) a[t] = _mm512_dpbusd_epi32(a[t], hi, infer__pk_bcast(xq + t * x_stride + 16 + 4 * j));
        }
        for (t = 0; t < T; t++)
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[t]), _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * aux_stride + b])), f[t]);
    }
    for (t = 0; t < T; t++) {
        float *yt = y + (size_t)t * ldy;
        if (add) f[t] = _mm512_add_ps(f[t], _mm512_maskz_loadu_ps(m, yt));
        _mm512_mask_storeu_ps(yt, m, f[t]);
    }
}

/* One token in llama.cpp's lane order, as the Q4_0 one. */
INFER__AVX512VNNI_INLINE void infer__vnni_q5_0_gemv_packed(int n, const void *packed, int n_rows, const void *xv,
                                                           float *y) {
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, g, b, j;
    size_t gbytes = infer__pack_q5_0_group_bytes(n);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (g = 0; g < ng; g++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
        __m512 f[8];
        for (j = 0; j < 8; j++) f[j] = _mm512_setzero_ps();
        for (b = 0; b < nb; b++) {
            const uint8_t *o = gp + (size_t)b * INFER__PACK_Q5_0_BLOCK, *xq = (const uint8_t *)x[b].qs;
            __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 320))),
                                     _mm512_set1_ps(_cvtsh_ss(x[b].d)));
            int32_t corr[8];
            infer__pk_lane_corr(x[b].qs, 16, corr);
            for (j = 0; j < 4; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(o + 64 * j));
                __m512i lo = _mm512_dpbusd_epi32(_mm512_set1_epi32(corr[j]),
                                                 infer__pk_q5_hi(_mm512_and_si512(v, m4), o + 256, j),
                                                 infer__pk_bcast(xq + 4 * j));
                __m512i hi = _mm512_dpbusd_epi32(_mm512_set1_epi32(corr[4 + j]),
                                                 infer__pk_q5_hi(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), o + 256, 4 + j),
                                                 infer__pk_bcast(xq + 16 + 4 * j));
                f[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lo), f[j]);
                f[4 + j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(hi), f[4 + j]);
            }
        }
        _mm512_mask_storeu_ps(y + (size_t)g * INFER__PACK_ROWS, infer__pk_rows_mask(n_rows, g), infer__pk_hsum8(f));
    }
}

INFER__AVX512VNNI static void infer__vnni_q5_0_gemm_packed(int n, const void *packed, int n_rows, const void *xv,
                                                           size_t x_stride, int n_tok, float *y, size_t ldy) {
    float dx[INFER__PK_AUX];
    int32_t cx[INFER__PK_AUX];
    const uint8_t *x = (const uint8_t *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, k0, t0, t, g;
    size_t gbytes = infer__pack_q5_0_group_bytes(n);
    if (n_tok <= INFER__PK_FEW) { /* as Q8_0's */
        infer__vnni_q5_0_gemm_packed_ordered(n, packed, n_rows, xv, x_stride, n_tok, y, ldy);
        return;
    }
    for (k0 = 0; k0 < nb; k0 += INFER__PK_AUX) {
        int kn = INFER__MIN(INFER__PK_AUX, nb - k0), chunk = INFER__PK_AUX / kn;
        if (chunk > INFER__PK_TMAX) chunk -= chunk % INFER__PK_TMAX;
        for (t0 = 0; t0 < n_tok; t0 += chunk) {
            int tc = INFER__MIN(chunk, n_tok - t0);
            const uint8_t *xc = x + (size_t)t0 * x_stride + (size_t)k0 * sizeof(infer__block_q8_0);
            infer__pk_q8_aux(xc, x_stride, tc, kn, 16, dx, cx);
            for (g = 0; g < ng; g++) {
                const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes + (size_t)k0 * INFER__PACK_Q5_0_BLOCK;
                __mmask16 m = infer__pk_rows_mask(n_rows, g);
                for (t = 0; t < tc; t += 8) {
                    int tt = INFER__MIN(8, tc - t);
                    const uint8_t *xt = xc + (size_t)t * x_stride;
                    float *yt = y + (size_t)(t0 + t) * ldy + (size_t)g * INFER__PACK_ROWS;
#define INFER__PK_Q5(TT) \
    case TT: infer__pk_tile_q5_0(TT, kn, gp, xt, x_stride, dx + t * kn, cx + t * kn, kn, yt, ldy, m, k0 > 0); break;
                    switch (tt) {
                        INFER__PK_Q5(1) INFER__PK_Q5(2) INFER__PK_Q5(3) INFER__PK_Q5(4) INFER__PK_Q5(5) INFER__PK_Q5(6)
                        INFER__PK_Q5(7) default: INFER__PK_Q5(8)
                    }
#undef INFER__PK_Q5
                }
            }
        }
    }
}

/* Batches in llama.cpp's order (gemm_packed_ordered, for contexts that ask
   for it, and the default's passes of a few tokens): as the one-token
   kernels above, eight lane sums per row and token, block after block in
   one chain, then its hsum_float_8; T tokens share each weight vector.
   About twice the work of the tiles above. */
#define INFER__PKO_TMAX 3
#define INFER__PKO_AUX 1536 /* (token, block) entries: d_x and 8 lane corrections (54 KiB) */
#define INFER__PKO_GROUPS 4 /* groups a long batch takes together (their weights stay in cache) */

INFER__AVX512VNNI_INLINE void infer__pko_tile(const int Q5, const int T, int nb, const uint8_t *gp, const uint8_t *x,
                                              size_t x_stride, const float *dx, const int32_t *cx, int aux_stride,
                                              float *y, size_t ldy, __mmask16 m) {
    __m512 f[INFER__PKO_TMAX][8], d[INFER__PKO_TMAX];
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    int b, j, t;
    /* unrolled so the 8 * T sums stay in registers */
    INFER__UNROLL(8)
    for (j = 0; j < 8; j++)
        INFER__UNROLL(3)
        for (t = 0; t < T; t++) f[t][j] = _mm512_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint8_t *o = Q5 ? gp + (size_t)b * INFER__PACK_Q5_0_BLOCK : gp + infer__pack_q_at(b, 32);
        const uint8_t *xq = x + (size_t)b * sizeof(infer__block_q8_0) + 2;
        const int32_t *cb = cx + (size_t)b * 8;
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(Q5 ? o + 320 : gp + infer__pack_d_at(b, 32))));
        INFER__UNROLL(3)
        for (t = 0; t < T; t++) d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * aux_stride + b]));
        INFER__UNROLL(8)
        for (j = 0; j < 8; j++) {
            __m512i wv;
            if (Q5) {
                __m512i v = _mm512_loadu_si512((const void *)(o + 64 * (j & 3)));
                wv = infer__pk_q5_hi(_mm512_and_si512(j < 4 ? v : _mm512_srli_epi16(v, 4), m4), o + 256, j);
            } else {
                wv = _mm512_loadu_si512((const void *)(o + 64 * j));
            }
            INFER__UNROLL(3)
            for (t = 0; t < T; t++) {
                __m512i sj = _mm512_dpbusd_epi32(_mm512_set1_epi32(cb[(size_t)t * aux_stride * 8 + j]), wv,
                                                 infer__pk_bcast(xq + t * x_stride + (Q5 ? 16 * (j >> 2) + 4 * (j & 3) : 4 * j)));
                f[t][j] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(sj), f[t][j]);
            }
        }
    }
    for (t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy, m, infer__pk_hsum8(f[t]));
}

/* Q5: the Q5_0 layout, else Q8_0's; off: what the stored weights carry */
INFER__AVX512VNNI_INLINE void infer__pko_gemm(const int Q5, int n, const void *packed, int n_rows, const void *xv,
                                              size_t x_stride, int n_tok, float *y, size_t ldy) {
    float dx[INFER__PKO_AUX];
    int32_t cx[INFER__PKO_AUX * 8];
    const uint8_t *x = (const uint8_t *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, off = Q5 ? 16 : 128, chunk, t0, t, g, g0, g1, b;
    size_t gbytes = Q5 ? infer__pack_q5_0_group_bytes(n) : infer__pack_group_bytes(n, 32);
    if (nb > INFER__PKO_AUX) { /* no room for a token's table: one token at a time, same order */
        for (t = 0; t < n_tok; t++)
            (Q5 ? infer__vnni_q5_0_gemv_packed : infer__vnni_q8_0_gemv_packed)(n, packed, n_rows, x + (size_t)t * x_stride,
                                                                              y + (size_t)t * ldy);
        return;
    }
    chunk = INFER__PKO_AUX / nb;
    /* A batch whose table fits makes it once for every group. A longer one
       goes INFER__PKO_GROUPS groups at a time, each taking every chunk's
       table in turn (made again for each span of groups), so the weights
       are read from memory once, not once a chunk. */
    for (g0 = 0; g0 < ng; g0 = g1) {
        g1 = n_tok <= chunk ? ng : INFER__MIN(ng, g0 + INFER__PKO_GROUPS);
        for (t0 = 0; t0 < n_tok; t0 += chunk) {
            int tc = INFER__MIN(chunk, n_tok - t0);
            const uint8_t *xc = x + (size_t)t0 * x_stride;
            for (t = 0; t < tc; t++)
                for (b = 0; b < nb; b++) {
                    const infer__block_q8_0 *xb = (const infer__block_q8_0 *)(xc + (size_t)t * x_stride) + b;
                    dx[t * nb + b] = _cvtsh_ss(xb->d);
                    infer__pk_lane_corr(xb->qs, off, cx + ((size_t)t * nb + b) * 8);
                }
            for (g = g0; g < g1; g++) {
                const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
                __mmask16 m = infer__pk_rows_mask(n_rows, g);
                for (t = 0; t < tc; t += INFER__PKO_TMAX) {
                    int tt = INFER__MIN(INFER__PKO_TMAX, tc - t);
                    const uint8_t *xt = xc + (size_t)t * x_stride;
                    const int32_t *ct = cx + (size_t)t * nb * 8;
                    float *yt = y + (size_t)(t0 + t) * ldy + (size_t)g * INFER__PACK_ROWS;
                    if (tt == 3) infer__pko_tile(Q5, 3, nb, gp, xt, x_stride, dx + t * nb, ct, nb, yt, ldy, m);
                    else if (tt == 2) infer__pko_tile(Q5, 2, nb, gp, xt, x_stride, dx + t * nb, ct, nb, yt, ldy, m);
                    else infer__pko_tile(Q5, 1, nb, gp, xt, x_stride, dx + t * nb, ct, nb, yt, ldy, m);
                }
            }
        }
    }
}

INFER__AVX512VNNI static void infer__vnni_q8_0_gemm_packed_ordered(int n, const void *packed, int n_rows, const void *x,
                                                                   size_t x_stride, int n_tok, float *y, size_t ldy) {
    if (n_tok == 1) infer__vnni_q8_0_gemv_packed(n, packed, n_rows, x, y);
    else infer__pko_gemm(0, n, packed, n_rows, x, x_stride, n_tok, y, ldy);
}
INFER__AVX512VNNI static void infer__vnni_q5_0_gemm_packed_ordered(int n, const void *packed, int n_rows, const void *x,
                                                                   size_t x_stride, int n_tok, float *y, size_t ldy) {
    if (n_tok == 1) infer__vnni_q5_0_gemv_packed(n, packed, n_rows, x, y);
    else infer__pko_gemm(1, n, packed, n_rows, x, x_stride, n_tok, y, ldy);
}

/* Q4_1 and Q5_1 (activations Q8_1): the values count from 0, so the sums
   need no correction; each block adds m_w * s_x (s_x = d_x * sum(x)). */
INFER__AVX512VNNI_INLINE void infer__pk_tile_q_1(const int Q5, const int T, int nb, const uint8_t *gp, const uint8_t *x,
                                                 size_t x_stride, float *y, size_t ldy, __mmask16 m, int add) {
    const size_t bbytes = Q5 ? INFER__PACK_Q5_1_BLOCK : INFER__PACK_Q4_1_BLOCK, d_at = Q5 ? 320 : 256;
    __m512 f[INFER__PK_TMAX];
    __m512i a[INFER__PK_TMAX];
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    int b, j, t;
    for (t = 0; t < T; t++) f[t] = _mm512_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint8_t *o = gp + (size_t)b * bbytes;
        const infer__block_q8_1 *xb = (const infer__block_q8_1 *)(x + (size_t)b * sizeof(infer__block_q8_1));
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + d_at)));
        __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + d_at + 32)));
        for (t = 0; t < T; t++) a[t] = _mm512_setzero_si512();
        for (j = 0; j < 4; j++) {
            __m512i v = _mm512_loadu_si512((const void *)(o + 64 * j));
            __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            if (Q5) lo = infer__pk_q5_hi(lo, o + 256, j), hi = infer__pk_q5_hi(hi, o + 256, 4 + j);
            for (t = 0; t < T; t++) {
                const uint8_t *xq = (const uint8_t *)((const infer__block_q8_1 *)((const uint8_t *)xb + t * x_stride))->qs;
                a[t] = _mm512_dpbusd_epi32(a[t], lo, infer__pk_bcast(xq + 4 * j));
                a[t] = _mm512_dpbusd_epi32(a[t], hi, infer__pk_bcast(xq + 16 + 4 * j));
            }
        }
        for (t = 0; t < T; t++) {
            const infer__block_q8_1 *xt = (const infer__block_q8_1 *)((const uint8_t *)xb + t * x_stride);
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[t]), _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(xt->d))), f[t]);
            f[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(_cvtsh_ss(xt->s)), f[t]);
        }
    }
    for (t = 0; t < T; t++) {
        float *yt = y + (size_t)t * ldy;
        if (add) f[t] = _mm512_add_ps(f[t], _mm512_maskz_loadu_ps(m, yt));
        _mm512_mask_storeu_ps(yt, m, f[t]);
    }
}

/* One token in llama.cpp's order: eight lane sums, hsum_float_8, then the
   mins' sum (m * s per block, added in turn) on top. */
INFER__AVX512VNNI_INLINE void infer__pk_gemv_q_1(const int Q5, int n, const void *packed, int n_rows, const void *xv,
                                                 float *y) {
    const size_t bbytes = Q5 ? INFER__PACK_Q5_1_BLOCK : INFER__PACK_Q4_1_BLOCK, d_at = Q5 ? 320 : 256;
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, g, b, j;
    size_t gbytes = infer__pack_q_1_group_bytes(n, Q5);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (g = 0; g < ng; g++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
        __m512 f[8], summs = _mm512_setzero_ps();
        for (j = 0; j < 8; j++) f[j] = _mm512_setzero_ps();
        for (b = 0; b < nb; b++) {
            const uint8_t *o = gp + (size_t)b * bbytes, *xq = (const uint8_t *)x[b].qs;
            __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + d_at))),
                                     _mm512_set1_ps(_cvtsh_ss(x[b].d)));
            summs = _mm512_add_ps(summs, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + d_at + 32))),
                                                       _mm512_set1_ps(_cvtsh_ss(x[b].s))));
            for (j = 0; j < 4; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(o + 64 * j));
                __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (Q5) lo = infer__pk_q5_hi(lo, o + 256, j), hi = infer__pk_q5_hi(hi, o + 256, 4 + j);
                f[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
                                                                                 infer__pk_bcast(xq + 4 * j))), f[j]);
                f[4 + j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), hi,
                                                                                     infer__pk_bcast(xq + 16 + 4 * j))), f[4 + j]);
            }
        }
        _mm512_mask_storeu_ps(y + (size_t)g * INFER__PACK_ROWS, infer__pk_rows_mask(n_rows, g),
                              _mm512_add_ps(infer__pk_hsum8(f), summs));
    }
}

/* ORD: one token in llama.cpp's order (contexts that match it); else by
   the tiles, as in a batch */
INFER__AVX512VNNI_INLINE void infer__pk_gemm_q_1(const int Q5, const int ORD, int n, const void *packed, int n_rows,
                                                 const void *xv, size_t x_stride, int n_tok, float *y, size_t ldy) {
    const uint8_t *x = (const uint8_t *)xv;
    int nb = n / 32, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, t, g;
    size_t gbytes = infer__pack_q_1_group_bytes(n, Q5);
    if (ORD && n_tok == 1) {
        infer__pk_gemv_q_1(Q5, n, packed, n_rows, xv, y);
        return;
    }
    for (g = 0; g < ng; g++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)g * gbytes;
        __mmask16 m = infer__pk_rows_mask(n_rows, g);
        for (t = 0; t < n_tok; t += 8) {
            const uint8_t *xt = x + (size_t)t * x_stride;
            float *yt = y + (size_t)t * ldy + (size_t)g * INFER__PACK_ROWS;
#define INFER__PK_Q1(TT) \
    case TT: infer__pk_tile_q_1(Q5, TT, nb, gp, xt, x_stride, yt, ldy, m, 0); break;
            switch (INFER__MIN(8, n_tok - t)) {
                INFER__PK_Q1(1) INFER__PK_Q1(2) INFER__PK_Q1(3) INFER__PK_Q1(4) INFER__PK_Q1(5) INFER__PK_Q1(6)
                INFER__PK_Q1(7) default: INFER__PK_Q1(8)
            }
#undef INFER__PK_Q1
        }
    }
}

INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q4_1_gemm_packed, infer__pk_gemm_q_1, 0, 0)
INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q4_1_gemm_packed_ordered, infer__pk_gemm_q_1, 0, 1)
INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q5_1_gemm_packed, infer__pk_gemm_q_1, 1, 0)
INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q5_1_gemm_packed_ordered, infer__pk_gemm_q_1, 1, 1)

/* Q4_K and Q6_K (activations Q8_K): per sub-block an int32 sum per row and
   token (dpbusd, as above), converted and FMA'd with the sub-block's
   d * scale into a per-block float sum; the block's sum meets d_x once.
   Q4_K's mins: dmin * sum_j min_j * (sum of x over sub-block j), the
   integer part by dpwssd of the packed int16 min pairs with pairs of
   activation sums; Q6_K's -32 * sum(x) starts each sub-block's sum. */
#define INFER__PKK_TMAX 8
#define INFER__PKK_AUX 1024 /* (token, block) entries of the activation table (68 KiB) */

/* per token and block: d_x, and 16 int32: Q6_K: -32 * bsums[j]; Q4_K:
   words k < 4 with the int16 pair of sums over sub-blocks 2k, 2k+1 */
INFER__AVX512VNNI_INLINE void infer__pk_q8_K_aux(int q6, const uint8_t *x, size_t x_stride, int n_tok, int nb, float *dx,
                                                 int32_t *ci) {
    int t, b, j;
    for (t = 0; t < n_tok; t++) {
        const infer__block_q8_K *xb = (const infer__block_q8_K *)(x + (size_t)t * x_stride);
        for (b = 0; b < nb; b++) {
            int32_t *c = ci + ((size_t)t * nb + b) * 16;
            const int16_t *bs = xb[b].bsums;
            dx[t * nb + b] = xb[b].d;
            if (q6)
                for (j = 0; j < 16; j++) c[j] = -32 * bs[j];
            else
                for (j = 0; j < 4; j++)
                    c[j] = (int32_t)((uint32_t)(uint16_t)(bs[4 * j] + bs[4 * j + 1]) |
                                     (uint32_t)(uint16_t)(bs[4 * j + 2] + bs[4 * j + 3]) << 16);
        }
    }
}

/* Q4_K sub-block j's int32 sums per row and token into s[] (the 32
   nibbles of rows' sub-block j against x's 32 values) */
#define INFER__PKK_Q4_SUB(j)                                                                              \
    do {                                                                                                  \
        for (t = 0; t < T; t++) {                                                                         \
            s[t] = _mm512_setzero_si512();                                                                \
            if (split) s2[t] = _mm512_setzero_si512();                                                    \
        }                                                                                                 \
        for (k = 0; k < 8; k++) {                                                                         \
            __m512i v = _mm512_loadu_si512((const void *)(o + 448 + (((j) >> 1) * 8 + k) * 64));         \
            v = ((j) & 1) ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);     \
            for (t = 0; t < T; t++) {                                                                     \
                __m512i xv = infer__pk_bcast(xq + t * x_stride + 32 * (j) + 4 * k);                       \
                if (split && (k & 1)) s2[t] = _mm512_dpbusd_epi32(s2[t], v, xv);                          \
                else s[t] = _mm512_dpbusd_epi32(s[t], v, xv);                                             \
            }                                                                                             \
        }                                                                                                 \
        if (split)                                                                                        \
            for (t = 0; t < T; t++) s[t] = _mm512_add_epi32(s[t], s2[t]);                                 \
    } while (0)

/* Q6: Q6_K, else Q4_K; ORD: Q4_K summed in llama.cpp's order (slower) */
INFER__AVX512VNNI_INLINE void infer__pk_tile_k(const int Q6, const int ORD, const int T, int nb, const uint8_t *gp, const uint8_t *x,
                                               size_t x_stride, const float *dx, const int32_t *ci, int aux_stride,
                                               float *y, size_t ldy, __mmask16 m, int add) {
    __m512 f[INFER__PKK_TMAX], ba[INFER__PKK_TMAX], fm[INFER__PKK_TMAX];
    __m512i s[INFER__PKK_TMAX], s2[INFER__PKK_TMAX], is[INFER__PKK_TMAX];
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const int split = T <= 2; /* odd words into a second sum: shorter dpbusd chains when few tokens */
    int b, j, k, t;
    for (t = 0; t < T; t++) f[t] = fm[t] = _mm512_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint8_t *xq = x + (size_t)b * sizeof(infer__block_q8_K) + 4; /* qs, after the float d */
        if (Q6) {
            const uint8_t *o = gp + (size_t)b * INFER__PACK_Q6_K_BLOCK;
            const __m512i m30 = _mm512_set1_epi8(0x30);
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 256)));
            for (t = 0; t < T; t++) ba[t] = _mm512_setzero_ps();
            for (j = 0; j < 16; j++) {
                __m512 sc = _mm512_mul_ps(
                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(o + 16 * j)))), d);
                const uint8_t *sb = o + 320 + j * 192;
                __m512i lo = _mm512_loadu_si512((const void *)sb), lo2 = _mm512_loadu_si512((const void *)(sb + 64));
                __m512i hi = _mm512_loadu_si512((const void *)(sb + 128)), q[4];
                /* value = low 4 bits | top 2 bits << 4: (a & 0x0f) | b is ternlog 0xEA; the
                   16-bit shifts' spill into the neighbouring byte is masked off */
                q[0] = _mm512_ternarylogic_epi32(lo, m4, _mm512_and_si512(_mm512_slli_epi16(hi, 4), m30), 0xEA);
                q[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(lo, 4), m4, _mm512_and_si512(_mm512_slli_epi16(hi, 2), m30), 0xEA);
                q[2] = _mm512_ternarylogic_epi32(lo2, m4, _mm512_and_si512(hi, m30), 0xEA);
                q[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(lo2, 4), m4, _mm512_and_si512(_mm512_srli_epi16(hi, 2), m30), 0xEA);
                for (t = 0; t < T; t++) {
                    s[t] = _mm512_set1_epi32(ci[((size_t)t * aux_stride + b) * 16 + j]);
                    if (split) s2[t] = _mm512_setzero_si512();
                }
                for (k = 0; k < 4; k++) {
                    __m512i v = q[k];
                    for (t = 0; t < T; t++) {
                        __m512i xv = infer__pk_bcast(xq + t * x_stride + 16 * j + 4 * k);
                        if (split && (k & 1)) s2[t] = _mm512_dpbusd_epi32(s2[t], v, xv);
                        else s[t] = _mm512_dpbusd_epi32(s[t], v, xv);
                    }
                }
                for (t = 0; t < T; t++) {
                    if (split) s[t] = _mm512_add_epi32(s[t], s2[t]);
                    ba[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), sc, ba[t]);
                }
            }
        } else if (!ORD) {
            const uint8_t *o = gp + (size_t)b * INFER__PACK_Q4_K_BLOCK;
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 384)));
            __m512 nd = _mm512_xor_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 416))), _mm512_set1_ps(-0.0f));
            for (t = 0; t < T; t++) s[t] = _mm512_setzero_si512();
            for (k = 0; k < 4; k++) {
                __m512i mv = _mm512_loadu_si512((const void *)(o + 128 + 64 * k));
                for (t = 0; t < T; t++)
                    s[t] = _mm512_dpwssd_epi32(s[t], mv, _mm512_set1_epi32(ci[((size_t)t * aux_stride + b) * 16 + k]));
            }
            for (t = 0; t < T; t++) ba[t] = _mm512_mul_ps(_mm512_cvtepi32_ps(s[t]), nd);
            for (j = 0; j < 8; j++) {
                __m512 sc = _mm512_mul_ps(
                    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(o + 16 * j)))), d);
                INFER__PKK_Q4_SUB(j);
                for (t = 0; t < T; t++) ba[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), sc, ba[t]);
            }
        } else {
            /* llama.cpp's repacked Q4_K order: per block the scaled sub-block
               sums as one integer, times d * d_x into one chain, the mins'
               integer times dmin * d_x into another, subtracted at the end */
            const uint8_t *o = gp + (size_t)b * INFER__PACK_Q4_K_BLOCK;
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 384)));
            __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 416)));
            for (t = 0; t < T; t++) is[t] = _mm512_setzero_si512();
            for (k = 0; k < 4; k++) {
                __m512i mv = _mm512_loadu_si512((const void *)(o + 128 + 64 * k));
                for (t = 0; t < T; t++)
                    is[t] = _mm512_dpwssd_epi32(is[t], mv, _mm512_set1_epi32(ci[((size_t)t * aux_stride + b) * 16 + k]));
            }
            for (t = 0; t < T; t++) {
                __m512 dxt = _mm512_set1_ps(dx[t * aux_stride + b]);
                fm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), _mm512_mul_ps(dmin, dxt), fm[t]);
                is[t] = _mm512_setzero_si512();
            }
            for (j = 0; j < 8; j++) {
                __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(o + 16 * j)));
                INFER__PKK_Q4_SUB(j);
                for (t = 0; t < T; t++) is[t] = _mm512_add_epi32(is[t], _mm512_mullo_epi32(s[t], sc));
            }
            for (t = 0; t < T; t++)
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), _mm512_mul_ps(d, _mm512_set1_ps(dx[t * aux_stride + b])), f[t]);
            continue;
        }
        for (t = 0; t < T; t++) f[t] = _mm512_fmadd_ps(ba[t], _mm512_set1_ps(dx[t * aux_stride + b]), f[t]);
    }
    for (t = 0; t < T; t++) {
        float *yt = y + (size_t)t * ldy;
        f[t] = _mm512_sub_ps(f[t], fm[t]); /* Q4_K's mins (Q6_K: zero) */
        if (add) f[t] = _mm512_add_ps(f[t], _mm512_maskz_loadu_ps(m, yt));
        _mm512_mask_storeu_ps(yt, m, f[t]);
    }
}

#undef INFER__PKK_Q4_SUB

/* kind: 0 Q4_K, 1 Q6_K, 2 Q4_K in llama.cpp's order */
INFER__AVX512VNNI_INLINE void infer__pk_tile_k_any(int kind, int T, int nb, const uint8_t *gp, const uint8_t *x,
                                                   size_t x_stride, const float *dx, const int32_t *ci, int aux_stride,
                                                   float *y, size_t ldy, __mmask16 m, int add) {
#define INFER__PK_CASE(QQ, OO, TT) \
    case TT: infer__pk_tile_k(QQ, OO, TT, nb, gp, x, x_stride, dx, ci, aux_stride, y, ldy, m, add); break;
#define INFER__PK_CASES(QQ, OO)                                                                         \
    switch (T) {                                                                                        \
        INFER__PK_CASE(QQ, OO, 1) INFER__PK_CASE(QQ, OO, 2) INFER__PK_CASE(QQ, OO, 3) INFER__PK_CASE(QQ, OO, 4) \
        INFER__PK_CASE(QQ, OO, 5) INFER__PK_CASE(QQ, OO, 6) INFER__PK_CASE(QQ, OO, 7)                     \
        default: INFER__PK_CASE(QQ, OO, 8)                                                              \
    }
    if (kind == 1) INFER__PK_CASES(1, 0)
    else if (kind == 2) INFER__PK_CASES(0, 1)
    else INFER__PK_CASES(0, 0)
#undef INFER__PK_CASES
#undef INFER__PK_CASE
}

/* as infer__pk_gemm_32, with 256-value blocks */
INFER__AVX512VNNI_INLINE void infer__pk_gemm_k(int kind, int n, const void *packed, int n_rows, const void *xv,
                                               size_t x_stride, int n_tok, float *y, size_t ldy) {
    const int Q6 = kind == 1;
    float dx[INFER__PKK_AUX];
    int32_t ci[INFER__PKK_AUX * 16];
    const uint8_t *x = (const uint8_t *)xv;
    size_t bbytes = Q6 ? INFER__PACK_Q6_K_BLOCK : INFER__PACK_Q4_K_BLOCK;
    int nb = n / INFER__QK_K, ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, k0, t0, t, g;
    for (k0 = 0; k0 < nb; k0 += INFER__PKK_AUX) {
        int kn = INFER__MIN(INFER__PKK_AUX, nb - k0), chunk = INFER__PKK_AUX / kn;
        if (chunk > INFER__PKK_TMAX) chunk -= chunk % INFER__PKK_TMAX;
        for (t0 = 0; t0 < n_tok; t0 += chunk) {
            int tc = INFER__MIN(chunk, n_tok - t0);
            const uint8_t *xc = x + (size_t)t0 * x_stride + (size_t)k0 * sizeof(infer__block_q8_K);
            infer__pk_q8_K_aux(Q6, xc, x_stride, tc, kn, dx, ci);
            for (g = 0; g < ng; g++) {
                const uint8_t *gp = (const uint8_t *)packed + ((size_t)g * nb + k0) * bbytes;
                __mmask16 m = infer__pk_rows_mask(n_rows, g);
                for (t = 0; t < tc; t += INFER__PKK_TMAX)
                    infer__pk_tile_k_any(kind, INFER__MIN(INFER__PKK_TMAX, tc - t), kn, gp, xc + (size_t)t * x_stride,
                                         x_stride, dx + t * kn, ci + (size_t)t * kn * 16, kn,
                                         y + (size_t)(t0 + t) * ldy + (size_t)g * INFER__PACK_ROWS, ldy, m, k0 > 0);
            }
        }
    }
}

INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q4_K_gemm_packed, infer__pk_gemm_k, 0)
INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q4_K_gemm_packed_ordered, infer__pk_gemm_k, 2)
INFER__X86_PACKED_ENTRY(INFER__AVX512VNNI, infer__vnni_q6_K_gemm_packed, infer__pk_gemm_k, 1)

/* F16 x F16: the weights widened (vcvtph2ps, exact) and FMA'd with each
   token's value broadcast from a float copy of a slice of the activations
   (made once per slice, for a chunk of tokens). One token gets four
   accumulators over k, two tokens two, so the FMA chains overlap. */
#define INFER__PKF_TMAX 8
#define INFER__PKF_TC 32    /* tokens per chunk */
#define INFER__PKF_AUX 8192 /* floats of activations on the stack: a chunk's slice of k, 256 or more values */

INFER__AVX512_INLINE void infer__pk_tile_f16(const int T, int kn, const uint16_t *gw, const float *xf, int ks, float *y,
                                             size_t ldy, __mmask16 m, int add) {
    enum { NA = 4 };
    __m512 acc[INFER__PKF_TMAX][NA];
    const int na = T == 1 ? 4 : T == 2 ? 2 : 1;
    int k = 0, t, a;
    for (t = 0; t < T; t++)
        for (a = 0; a < na; a++) acc[t][a] = _mm512_setzero_ps();
    for (; k + na <= kn; k += na)
        for (a = 0; a < na; a++) {
            __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gw + (size_t)(k + a) * 16)));
            for (t = 0; t < T; t++) acc[t][a] = _mm512_fmadd_ps(w, _mm512_set1_ps(xf[t * ks + k + a]), acc[t][a]);
        }
    for (; k < kn; k++) {
        __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gw + (size_t)k * 16)));
        for (t = 0; t < T; t++) acc[t][0] = _mm512_fmadd_ps(w, _mm512_set1_ps(xf[t * ks + k]), acc[t][0]);
    }
    for (t = 0; t < T; t++) {
        float *yt = y + (size_t)t * ldy;
        __m512 s = acc[t][0];
        for (a = 1; a < na; a++) s = _mm512_add_ps(s, acc[t][a]);
        if (add) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, yt));
        _mm512_mask_storeu_ps(yt, m, s);
    }
}

INFER__AVX512 static void infer__avx512_f16_gemm_packed(int n, const void *packed, int n_rows, const void *xv,
                                                        size_t x_stride, int n_tok, float *y, size_t ldy) {
    float xf[INFER__PKF_AUX];
    size_t gbytes = ((size_t)n * INFER__PACK_ROWS * 2 + 63) & ~(size_t)63;
    int ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, t0, k0, t, g, i;
    for (t0 = 0; t0 < n_tok; t0 += INFER__PKF_TC) {
        /* few tokens, long slices: each group's weights read in long runs */
        int tc = INFER__MIN(INFER__PKF_TC, n_tok - t0), ks = INFER__PKF_AUX / tc / 16 * 16;
        for (k0 = 0; k0 < n; k0 += ks) {
            int kn = INFER__MIN(ks, n - k0);
            for (t = 0; t < tc; t++) {
                const uint16_t *x = (const uint16_t *)((const uint8_t *)xv + (size_t)(t0 + t) * x_stride) + k0;
                for (i = 0; i < kn; i += 16) {
                    __mmask16 mk = (__mmask16)(kn - i >= 16 ? 0xffff : (1u << (kn - i)) - 1);
                    _mm512_mask_storeu_ps(xf + t * ks + i, mk, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, x + i)));
                }
            }
            for (g = 0; g < ng; g++) {
                const uint16_t *gw = (const uint16_t *)((const uint8_t *)packed + (size_t)g * gbytes) + (size_t)k0 * 16;
                __mmask16 m = infer__pk_rows_mask(n_rows, g);
                for (t = 0; t < tc; t += INFER__PKF_TMAX) {
                    float *yt = y + (size_t)(t0 + t) * ldy + (size_t)g * INFER__PACK_ROWS;
                    const float *xt = xf + t * ks;
                    switch (INFER__MIN(INFER__PKF_TMAX, tc - t)) {
                    case 1: infer__pk_tile_f16(1, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    case 2: infer__pk_tile_f16(2, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    case 3: infer__pk_tile_f16(3, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    case 4: infer__pk_tile_f16(4, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    case 5: infer__pk_tile_f16(5, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    case 6: infer__pk_tile_f16(6, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    case 7: infer__pk_tile_f16(7, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    default: infer__pk_tile_f16(8, kn, gw, xt, ks, yt, ldy, m, k0 > 0); break;
                    }
                }
            }
        }
    }
}

/* One token in its own order (infer__f16_dot_llama_vec: llama.cpp takes
   ggml_vec_dot_f16 there): 64 accumulators a row, kept in memory. */
INFER__AVX512 static void infer__avx512_f16_gemv_packed_ordered(int n, const void *packed, int n_rows, const void *xv,
                                                                float *y) {
    size_t gbytes = ((size_t)n * INFER__PACK_ROWS * 2 + 63) & ~(size_t)63;
    int ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, np = n - n % 64, g, k, l;
    const uint16_t *x = (const uint16_t *)xv;
    for (g = 0; g < ng; g++) {
        const uint16_t *gw = (const uint16_t *)((const uint8_t *)packed + (size_t)g * gbytes);
        __m512 acc[64], lo, hi;
        __m512d tl, th;
        for (l = 0; l < 64; l++) acc[l] = _mm512_setzero_ps();
        for (k = 0; k < np; k++)
            acc[k % 64] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gw + (size_t)k * 16))),
                                          _mm512_set1_ps(infer__fp16_to_fp32(x[k])), acc[k % 64]);
        for (l = 0; l < 16; l++) acc[l] = _mm512_add_ps(_mm512_add_ps(acc[l], acc[32 + l]), _mm512_add_ps(acc[16 + l], acc[48 + l]));
        for (l = 8; l >= 1; l /= 2)
            for (k = 0; k < l; k++) acc[k] = _mm512_add_ps(acc[k], acc[k + l]);
        tl = _mm512_cvtps_pd(_mm512_castps512_ps256(acc[0]));
        th = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[0]), 1)));
        for (k = np; k < n; k++) { /* products rounded to float, summed in double */
            __m512 p = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gw + (size_t)k * 16))),
                                     _mm512_set1_ps(infer__fp16_to_fp32(x[k])));
            tl = _mm512_add_pd(tl, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
            th = _mm512_add_pd(th, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
        }
        lo = _mm512_castps256_ps512(_mm512_cvtpd_ps(tl));
        hi = _mm512_insertf32x8(lo, _mm512_cvtpd_ps(th), 1);
        _mm512_mask_storeu_ps(y + (size_t)g * INFER__PACK_ROWS, infer__pk_rows_mask(n_rows, g), hi);
    }
}

/* F16 x F16 in llama.cpp's order (gemm_packed_ordered): a batch per row
   and token in 16 lanes, lane l taking every k = l mod 16, then the tree;
   with 16 rows to a vector that is 16 accumulators, one per lane, added
   pairwise at the end. One token, and lengths that are not whole 16s,
   as ggml_vec_dot_f16 (the kernel above), as llama.cpp. */
INFER__AVX512 static void infer__avx512_f16_gemm_packed_ordered(int n, const void *packed, int n_rows, const void *xv,
                                                                size_t x_stride, int n_tok, float *y, size_t ldy) {
    size_t gbytes = ((size_t)n * INFER__PACK_ROWS * 2 + 63) & ~(size_t)63;
    int ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, t, g, k, l;
    if (n_tok == 1 || n % 16) {
        for (t = 0; t < n_tok; t++)
            infer__avx512_f16_gemv_packed_ordered(n, packed, n_rows, (const uint8_t *)xv + (size_t)t * x_stride,
                                                  y + (size_t)t * ldy);
        return;
    }
    for (g = 0; g < ng; g++) {
        const uint16_t *gw = (const uint16_t *)((const uint8_t *)packed + (size_t)g * gbytes);
        __mmask16 m = infer__pk_rows_mask(n_rows, g);
        for (t = 0; t < n_tok; t++) {
            const uint16_t *x = (const uint16_t *)((const uint8_t *)xv + (size_t)t * x_stride);
            __m512 acc[16];
            INFER__UNROLL(16)
            for (l = 0; l < 16; l++) acc[l] = _mm512_setzero_ps();
            for (k = 0; k < n; k += 16)
                INFER__UNROLL(16)
                for (l = 0; l < 16; l++)
                    acc[l] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gw + (size_t)(k + l) * 16))),
                                             _mm512_set1_ps(infer__fp16_to_fp32(x[k + l])), acc[l]);
            INFER__UNROLL(4)
            for (l = 8; l >= 1; l /= 2)
                INFER__UNROLL(8)
                for (k = 0; k < l; k++) acc[k] = _mm512_add_ps(acc[k], acc[k + l]);
            _mm512_mask_storeu_ps(y + (size_t)t * ldy + (size_t)g * INFER__PACK_ROWS, m, acc[0]);
        }
    }
}

/* F16 x F16 for prompts on the integer unit (INFER__F16I_MIN_TOK tokens or
   more): per slice of k, the activations become 13-bit integers per block
   of 64 (infer__pack_ref_f16_i16 is the reference), then each group's
   weights 12-bit ones, in pairs (k, k + 1) per 32-bit lane, dpwssd's
   operand; a tile of 32 rows x up to 6 tokens sums a block's 32 pairs in
   int32 and adds it in float at the block's two scales. dpwssd does two
   products per lane where an FMA does one; converting the weights costs
   a few percent of that, as a chunk of up to 128 tokens shares it. */
#define INFER__PKI_TC 128                      /* tokens per chunk */
#define INFER__PKI_NB (INFER__F16I_SLICE / 64) /* blocks per slice */
#define INFER__PKI_T 6                         /* tokens per register tile */

/* A block's binade e comes from the F16 bits: |v| orders as the unsigned
   15 bits, and e = max(exponent field, 1) - 15. The integers are the low
   16 bits of fma(v, 2^(shift - e), 1.5 * 2^23): adding 1.5 * 2^23 rounds
   to an integer (to even, as cvtps2dq) in the mantissa's low bits. */
#define INFER__PKI_MAGIC 12582912.0f

/* the float 2^(v - 127), v a lane's biased exponent */
#define INFER__PKI_POW2(v) _mm512_castsi512_ps(_mm512_slli_epi32(v, 23))

/* one block of a token's activations: nv values to 64 integers (zeros
   past nv) at q; returns the scale back, 2^(e - 12) */
INFER__AVX512_INLINE float infer__pki_x_block(const uint16_t *x, int nv, int16_t *q) {
    __m512i h0 = _mm512_maskz_loadu_epi16(nv >= 32 ? 0xffffffffu : (1u << nv) - 1, x);
    __m512i h1 = _mm512_maskz_loadu_epi16(nv >= 64 ? 0xffffffffu : nv <= 32 ? 0 : (1u << (nv - 32)) - 1, x + 32);
    __m512i a = _mm512_max_epu16(_mm512_and_si512(h0, _mm512_set1_epi16(0x7fff)), _mm512_and_si512(h1, _mm512_set1_epi16(0x7fff)));
    __m256i m8 = _mm256_max_epu16(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
    __m128i m4 = _mm_max_epu16(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
    /* the largest of 8: 0xffff minus the smallest of their complements */
    int top = 0xffff - _mm_extract_epi16(_mm_minpos_epu16(_mm_xor_si128(m4, _mm_set1_epi16(-1))), 0);
    int ef = INFER__MAX(top >> 10, 1), i;
    uint32_t sb = (uint32_t)(154 - ef) << 23, bb = (uint32_t)(ef + 100) << 23; /* 2^(12 - e), 2^(e - 12) */
    float sc, back;
    memcpy(&sc, &sb, 4), memcpy(&back, &bb, 4);
    for (i = 0; i < 4; i++) {
        __m512i h = i < 2 ? h0 : h1;
        __m256i hh = i % 2 ? _mm512_extracti64x4_epi64(h, 1) : _mm512_castsi512_si256(h);
        __m512 f = _mm512_fmadd_ps(_mm512_cvtph_ps(hh), _mm512_set1_ps(sc), _mm512_set1_ps(INFER__PKI_MAGIC));
        _mm256_storeu_si256((__m256i *)(q + 16 * i), _mm512_cvtepi32_epi16(_mm512_castps_si512(f)));
    }
    return back;
}

/* one block of a group's weights (w: k-major, 16 fp16 per k, so a vector
   holds values k, k + 1 of the 16 rows; nv values of k valid): 32 vectors
   of pairs at q; returns the 16 rows' scales back, 2^(e - 11) */
INFER__AVX512_INLINE __m512 infer__pki_w_block(const uint16_t *w, int nv, __m512i *q) {
    const __m512i idx = _mm512_set_epi16(62, 30, 60, 28, 58, 26, 56, 24, 54, 22, 52, 20, 50, 18, 48, 16, 46, 14, 44, 12,
                                         42, 10, 40, 8, 38, 6, 36, 4, 34, 2, 32, 0);
    __m512i mx = _mm512_setzero_si512(), mx1 = mx, ef;
    __m512 sc;
    int i;
#define INFER__PKI_WLOAD(i) \
    _mm512_maskz_loadu_epi16(2 * (i) + 1 < nv ? 0xffffffffu : 2 * (i) < nv ? 0xffffu : 0, w + 32 * (i))
    for (i = 0; i < 32; i += 2) { /* two chains */
        mx = _mm512_max_epu16(mx, _mm512_and_si512(INFER__PKI_WLOAD(i), _mm512_set1_epi16(0x7fff)));
        mx1 = _mm512_max_epu16(mx1, _mm512_and_si512(INFER__PKI_WLOAD(i + 1), _mm512_set1_epi16(0x7fff)));
    }
    mx = _mm512_max_epu16(mx, mx1);
    ef = _mm512_cvtepu16_epi32(_mm256_max_epu16(_mm512_castsi512_si256(mx), _mm512_extracti64x4_epi64(mx, 1)));
    ef = _mm512_max_epi32(_mm512_srli_epi32(ef, 10), _mm512_set1_epi32(1));
    sc = INFER__PKI_POW2(_mm512_sub_epi32(_mm512_set1_epi32(153), ef)); /* 2^(11 - e) */
    for (i = 0; i < 32; i++) {
        __m512i h = INFER__PKI_WLOAD(i);
        __m512 f0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), sc, _mm512_set1_ps(INFER__PKI_MAGIC));
        __m512 f1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), sc, _mm512_set1_ps(INFER__PKI_MAGIC));
        /* lane r: the low halves of f0's and f1's lane r */
        q[i] = _mm512_permutex2var_epi16(_mm512_castps_si512(f0), idx, _mm512_castps_si512(f1));
    }
#undef INFER__PKI_WLOAD
    return INFER__PKI_POW2(_mm512_add_epi32(ef, _mm512_set1_epi32(101)));
}

/* R groups (1 or 2: 16 or 32 rows; wq, ws: group r's at r * PKI_WQ,
   r * PKI_NB) x T tokens (xq: stride F16I_SLICE values; xs: stride PKI_NB
   scales) over nb blocks; y gets the slice's sums (added to it when add).
   Two groups share each broadcast of a token's pair. */
#define INFER__PKI_WQ (INFER__F16I_SLICE / 2) /* vectors of pairs per group and slice */
INFER__AVX512VNNI_INLINE void infer__pki_tile(const int R, const int T, int nb, const __m512i *wq, const __m512 *ws,
                                              const int16_t *xq, const float *xs, float *y, size_t ldy, __mmask16 m0,
                                              __mmask16 m1, int add) {
    __m512 acc[2][INFER__PKI_T];
    __m512i s[2][INFER__PKI_T];
    int b, p, t, r;
    for (r = 0; r < R; r++)
        for (t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (b = 0; b < nb; b++) {
        const __m512i *w = wq + 32 * b;
        const int16_t *x = xq + 64 * b;
        for (t = 0; t < T; t++) {
            __m512i xv = infer__pk_bcast((const uint8_t *)(x + t * INFER__F16I_SLICE));
            for (r = 0; r < R; r++) s[r][t] = _mm512_madd_epi16(w[r * INFER__PKI_WQ], xv);
        }
        INFER__UNROLL(32)
        for (p = 1; p < 32; p++) {
            const __m512i w0 = w[p], w1 = w[R > 1 ? INFER__PKI_WQ + p : p];
            for (t = 0; t < T; t++) {
                __m512i xv = infer__pk_bcast((const uint8_t *)(x + t * INFER__F16I_SLICE + 2 * p));
                s[0][t] = _mm512_dpwssd_epi32(s[0][t], w0, xv);
                if (R > 1) s[1][t] = _mm512_dpwssd_epi32(s[1][t], w1, xv);
            }
        }
        for (t = 0; t < T; t++) {
            __m512 xsc = _mm512_set1_ps(xs[t * INFER__PKI_NB + b]);
            for (r = 0; r < R; r++)
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][t]), _mm512_mul_ps(ws[r * INFER__PKI_NB + b], xsc), acc[r][t]);
        }
    }
    for (r = 0; r < R; r++)
        for (t = 0; t < T; t++) {
            float *yt = y + (size_t)t * ldy + r * INFER__PACK_ROWS;
            __mmask16 m = r ? m1 : m0;
            __m512 v = acc[r][t];
            if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, yt));
            _mm512_mask_storeu_ps(yt, m, v);
        }
}

INFER__AVX512VNNI static void infer__vnni_f16_gemm_packed(int n, const void *packed, int n_rows, const void *xv,
                                                          size_t x_stride, int n_tok, float *y, size_t ldy) {
    int16_t xq[INFER__PKI_TC * INFER__F16I_SLICE];
    float xs[INFER__PKI_TC * INFER__PKI_NB];
    __m512i wq[2 * INFER__PKI_WQ];
    __m512 ws[2 * INFER__PKI_NB];
    size_t gbytes = ((size_t)n * INFER__PACK_ROWS * 2 + 63) & ~(size_t)63;
    int ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, t0, k0, t, g, b, r;
    if (n_tok < INFER__F16I_MIN_TOK) {
        infer__avx512_f16_gemm_packed(n, packed, n_rows, xv, x_stride, n_tok, y, ldy);
        return;
    }
    for (t0 = 0; t0 < n_tok; t0 += INFER__PKI_TC) {
        int tc = INFER__MIN(INFER__PKI_TC, n_tok - t0);
        for (k0 = 0; k0 < n; k0 += INFER__F16I_SLICE) {
            int kn = INFER__MIN(INFER__F16I_SLICE, n - k0), nb = (kn + 63) / 64;
            for (t = 0; t < tc; t++) {
                const uint16_t *x = (const uint16_t *)((const uint8_t *)xv + (size_t)(t0 + t) * x_stride) + k0;
                for (b = 0; b < nb; b++)
                    xs[t * INFER__PKI_NB + b] =
                        infer__pki_x_block(x + 64 * b, INFER__MIN(64, kn - 64 * b), xq + t * INFER__F16I_SLICE + 64 * b);
            }
            for (g = 0; g < ng; g += 2) {
                const int R = INFER__MIN(2, ng - g);
                __mmask16 m0 = infer__pk_rows_mask(n_rows, g), m1 = R > 1 ? infer__pk_rows_mask(n_rows, g + 1) : 0;
                for (r = 0; r < R; r++) {
                    const uint16_t *gw = (const uint16_t *)((const uint8_t *)packed + (size_t)(g + r) * gbytes) + (size_t)k0 * 16;
                    for (b = 0; b < nb; b++)
                        ws[r * INFER__PKI_NB + b] =
                            infer__pki_w_block(gw + 64 * 16 * b, INFER__MIN(64, kn - 64 * b), wq + r * INFER__PKI_WQ + 32 * b);
                }
                for (t = 0; t < tc; t += INFER__PKI_T) {
                    float *yt = y + (size_t)(t0 + t) * ldy + (size_t)g * INFER__PACK_ROWS;
                    const int16_t *xt = xq + t * INFER__F16I_SLICE;
                    const float *st = xs + t * INFER__PKI_NB;
#define INFER__PKI_CASE(RR, TT) \
    case TT: infer__pki_tile(RR, TT, nb, wq, ws, xt, st, yt, ldy, m0, m1, k0 > 0); break;
                    if (R == 2) {
                        switch (INFER__MIN(INFER__PKI_T, tc - t)) {
                            INFER__PKI_CASE(2, 1) INFER__PKI_CASE(2, 2) INFER__PKI_CASE(2, 3) INFER__PKI_CASE(2, 4)
                            INFER__PKI_CASE(2, 5) default: INFER__PKI_CASE(2, 6)
                        }
                    } else {
                        switch (INFER__MIN(INFER__PKI_T, tc - t)) {
                            INFER__PKI_CASE(1, 1) INFER__PKI_CASE(1, 2) INFER__PKI_CASE(1, 3) INFER__PKI_CASE(1, 4)
                            INFER__PKI_CASE(1, 5) default: INFER__PKI_CASE(1, 6)
                        }
                    }
#undef INFER__PKI_CASE
                }
            }
        }
    }
}

/* BF16 x BF16 with dpbf16ps: a 32-bit lane holds a row's pair of values
   and the token's pair is broadcast straight from the activations, two
   products per lane and instruction (as the BF16 vec_dot, subnormals
   flushed). */
#define INFER__PKB_TMAX 8

INFER__AVX512BF16_INLINE __m512bh infer__pk_bcast_bf16(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return (__m512bh)_mm512_set1_epi32(v);
}

INFER__AVX512BF16_INLINE void infer__pk_tile_bf16(const int T, int n, const uint8_t *gw, const uint8_t *x, size_t x_stride,
                                                  float *y, size_t ldy, __mmask16 m) {
    enum { NA = 4 };
    __m512 acc[INFER__PKB_TMAX][NA];
    const int na = T == 1 ? 4 : T == 2 ? 2 : 1, np = n / 2;
    int p = 0, t, a;
    for (t = 0; t < T; t++)
        for (a = 0; a < na; a++) acc[t][a] = _mm512_setzero_ps();
    for (; p + na <= np; p += na)
        for (a = 0; a < na; a++) {
            __m512bh w = (__m512bh)_mm512_loadu_si512((const void *)(gw + (size_t)(p + a) * 64));
            for (t = 0; t < T; t++)
                acc[t][a] = _mm512_dpbf16_ps(acc[t][a], w, infer__pk_bcast_bf16(x + t * x_stride + 4 * (size_t)(p + a)));
        }
    for (; p < np; p++) {
        __m512bh w = (__m512bh)_mm512_loadu_si512((const void *)(gw + (size_t)p * 64));
        for (t = 0; t < T; t++)
            acc[t][0] = _mm512_dpbf16_ps(acc[t][0], w, infer__pk_bcast_bf16(x + t * x_stride + 4 * (size_t)p));
    }
    if (n & 1) { /* the last value alone: its pair's second weight is zero, and so is the activation read here */
        __m512bh w = (__m512bh)_mm512_loadu_si512((const void *)(gw + (size_t)np * 64));
        for (t = 0; t < T; t++) {
            uint16_t v;
            memcpy(&v, x + t * x_stride + 4 * (size_t)np, 2);
            acc[t][0] = _mm512_dpbf16_ps(acc[t][0], w, (__m512bh)_mm512_set1_epi32(v));
        }
    }
    for (t = 0; t < T; t++) {
        __m512 s = acc[t][0];
        for (a = 1; a < na; a++) s = _mm512_add_ps(s, acc[t][a]);
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, m, s);
    }
}

INFER__AVX512BF16 static void infer__avx512bf16_bf16_gemm_packed(int n, const void *packed, int n_rows, const void *xv,
                                                                 size_t x_stride, int n_tok, float *y, size_t ldy) {
    size_t gbytes = ((size_t)((n + 1) / 2) * INFER__PACK_ROWS * 4 + 63) & ~(size_t)63;
    int ng = (n_rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, t0, g;
    /* tokens in chunks whose activations stay in L1/L2 while every group passes over them */
    int chunk = INFER__MAX(INFER__PKB_TMAX, (int)((size_t)(256 << 10) / ((size_t)n * 2 + 1)) / INFER__PKB_TMAX * INFER__PKB_TMAX);
    for (t0 = 0; t0 < n_tok; t0 += chunk) {
        int tc = INFER__MIN(chunk, n_tok - t0), t;
        for (g = 0; g < ng; g++) {
            const uint8_t *gw = (const uint8_t *)packed + (size_t)g * gbytes;
            __mmask16 m = infer__pk_rows_mask(n_rows, g);
            for (t = t0; t < t0 + tc; t += INFER__PKB_TMAX) {
                const uint8_t *xt = (const uint8_t *)xv + (size_t)t * x_stride;
                float *yt = y + (size_t)t * ldy + (size_t)g * INFER__PACK_ROWS;
                switch (INFER__MIN(INFER__PKB_TMAX, t0 + tc - t)) {
                case 1: infer__pk_tile_bf16(1, n, gw, xt, x_stride, yt, ldy, m); break;
                case 2: infer__pk_tile_bf16(2, n, gw, xt, x_stride, yt, ldy, m); break;
                case 3: infer__pk_tile_bf16(3, n, gw, xt, x_stride, yt, ldy, m); break;
                case 4: infer__pk_tile_bf16(4, n, gw, xt, x_stride, yt, ldy, m); break;
                case 5: infer__pk_tile_bf16(5, n, gw, xt, x_stride, yt, ldy, m); break;
                case 6: infer__pk_tile_bf16(6, n, gw, xt, x_stride, yt, ldy, m); break;
                case 7: infer__pk_tile_bf16(7, n, gw, xt, x_stride, yt, ldy, m); break;
                default: infer__pk_tile_bf16(8, n, gw, xt, x_stride, yt, ldy, m); break;
                }
            }
        }
    }
}
/* ---- elementwise math and attention (vecmath.c has the plain C) ----
   Attention's p.V from a quantized cache stays AVX2's (8 lanes hold a
   block's quarter: 16 gain nothing there). */

INFER__AVX512 static void infer__avx512_lanes16_fma(float *acc, int as, const float *v, const float *p, int n) {
    __m512 pv = _mm512_loadu_ps(p);
    int d;
    for (d = 0; d < n; d++)
        _mm512_storeu_ps(acc + (size_t)as * d, _mm512_fmadd_ps(_mm512_loadu_ps(v + 16 * d), pv, _mm512_loadu_ps(acc + (size_t)as * d)));
}

/* e^x in 16 lanes (INFER__X86_EXP_TAYLOR) */
INFER__AVX512_INLINE __m512 infer__avx512_exp(__m512 x) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r, p;
    INFER__X86_EXP_TAYLOR(x, n, r, p, _mm512_fmadd_ps, _mm512_fnmadd_ps, _mm512_set1_ps);
    /* scalef saturates: e^x is inf above ~88.7 and 0 below ~-103 */
    return _mm512_scalef_ps(p, n);
}

/* Attention's softmax of a key tile (infer__kernels.softmax_stats and
   _probs) in 16 lanes: the keys outside [lo, hi) masked. */
INFER__AVX512_INLINE __mmask16 infer__avx512_seen(int j, int lo, int hi) {
    __m512i at = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(j));
    return _mm512_cmpge_epi32_mask(at, _mm512_set1_epi32(lo)) & _mm512_cmplt_epi32_mask(at, _mm512_set1_epi32(hi));
}

INFER__AVX512 static float infer__avx512_scaled_max(const float *s, int lo, int hi, float scale, float m) {
    __m512 vs = _mm512_set1_ps(scale), vmax = _mm512_set1_ps(-INFINITY);
    int j;
    if (lo >= hi) return m;
    for (j = lo - lo % 16; j < hi; j += 16) {
        __mmask16 seen = infer__avx512_seen(j, lo, hi);
        vmax = _mm512_mask_max_ps(vmax, seen, vmax, _mm512_mul_ps(_mm512_maskz_loadu_ps(seen, s + j), vs));
    }
    return INFER__MAX(m, _mm512_reduce_max_ps(vmax));
}

INFER__AVX512 static void infer__avx512_softmax_stats(const float *s, int lo, int hi, float scale, float *m, float *l) {
    __m512 vs = _mm512_set1_ps(scale), vmx;
    __m512d sum = _mm512_setzero_pd();
    float mx;
    int j;
    if (lo >= hi) return;
    mx = infer__avx512_scaled_max(s, lo, hi, scale, *m);
    vmx = _mm512_set1_ps(mx);
    for (j = lo - lo % 16; j < hi; j += 16) {
        __mmask16 seen = infer__avx512_seen(j, lo, hi);
        __m512 e = _mm512_maskz_mov_ps(seen, infer__avx512_exp(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(seen, s + j), vs), vmx)));
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    *l = (float)((double)*l * infer__expf(*m - mx) + _mm512_reduce_add_pd(sum));
    *m = mx;
}

INFER__AVX512 static void infer__avx512_softmax_probs(const float *s, int n, int lo, int hi, float scale, float m, float inv,
                                                      uint16_t *p) {
    __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(m), vinv = _mm512_set1_ps(inv);
    int j;
    for (j = 0; j < n; j += 16) {
        __mmask16 seen = infer__avx512_seen(j, lo, hi), in = (__mmask16)(n - j >= 16 ? 0xFFFF : (1u << (n - j)) - 1);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(seen & in, s + j), vs);
        __m512 e = _mm512_maskz_mov_ps(seen & in, _mm512_mul_ps(infer__avx512_exp(_mm512_sub_ps(x, vm)), vinv));
        __m256i h = _mm512_cvtps_ph(e, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (in == 0xFFFF) {
            _mm256_storeu_si256((__m256i *)(void *)(p + j), h);
        } else {
            uint16_t tmp[16];
            _mm256_storeu_si256((__m256i *)(void *)tmp, h);
            memcpy(p + j, tmp, (size_t)(n - j) * sizeof *p);
        }
    }
}

/* A row's softmax with its scores kept whole (kernels.softmax_exp and
   probs_f16; scaled_max is above) in 16 lanes; e's sum in 2 x 8 double
   lanes. */
INFER__AVX512 static double infer__avx512_softmax_exp(float *s, int n, int lo, int hi, float scale, float m) {
    __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(m);
    __m512d sum = _mm512_setzero_pd();
    int j;
    for (j = 0; j < n; j += 16) {
        __mmask16 in = (__mmask16)(n - j >= 16 ? 0xFFFF : (1u << (n - j)) - 1), seen = infer__avx512_seen(j, lo, hi) & in;
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(in, s + j), vs);
        __m512 e = _mm512_maskz_mov_ps(seen, infer__avx512_exp(_mm512_sub_ps(x, vm)));
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
        _mm512_mask_storeu_ps(s + j, in, e);
    }
    return _mm512_reduce_add_pd(sum);
}

INFER__AVX512 static void infer__avx512_probs_f16(const float *e, int n, float inv, uint16_t *p) {
    __m512 vinv = _mm512_set1_ps(inv);
    int j;
    for (j = 0; j < n; j += 16) {
        __mmask16 in = (__mmask16)(n - j >= 16 ? 0xFFFF : (1u << (n - j)) - 1);
        __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_maskz_loadu_ps(in, e + j), vinv),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(p + j, in, h);
    }
}

INFER__AVX512 static void infer__avx512_silu_mul(float *g, const float *u, int n) {
    int i;
    for (i = 0; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), infer__avx512_exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* The table lookup 16 lanes at a time: F16 rounding by vcvtps2ph, then a gather. */
INFER__AVX512 static void infer__avx512_gelu_mul(float *g, const float *u, int n, const float *table) {
    int i;
    for (i = 0; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m512 y = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, h, table, 4);
        y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(10.0f), _CMP_GE_OQ), y, x);
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-10.0f), _CMP_GT_OQ), y);
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

INFER__AVX512 static double infer__avx512_sum_squares(const float *x, int n) {
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int i;
    for (i = 0; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), sq = _mm512_mul_ps(v, v);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

/* ---- the recurrent layers' sums, in llama.cpp's AVX-512 order ---- */

/* ggml's fold of its four 16-lane accumulators: (0 + 2) + (1 + 3), then
   _mm512_reduce_add_ps as GCC has it (halves, quarters, lanes 0 + 2 and
   1 + 3, then those two), spelt out so that every compiler sums so */
INFER__AVX512 static float infer__avx512_fold4x16(__m512 s0, __m512 s1, __m512 s2, __m512 s3) {
    __m512 v = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
    __m256 h = _mm256_add_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), _mm512_castps512_ps256(v));
    __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    q = _mm_add_ps(q, _mm_shuffle_ps(q, q, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, _MM_SHUFFLE(1, 1, 1, 1))));
}

/* ggml_vec_dot_f32: fused sums over each 64, the rest in float */
INFER__AVX512 static float infer__avx512_f32_dot_ordered(const float *x, const float *y, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    float sum;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), s3);
    }
    sum = infer__avx512_fold4x16(s0, s1, s2, s3);
    for (; i < n; i++) {
        float p = x[i] * y[i];
        sum += p;
    }
    return sum;
}

/* a row of ggml_ssm_scan (as AVX2's, by 64) */
INFER__AVX512 static float infer__avx512_ssm_row(float *s, const float *s0, const float *B, const float *C, float dA,
                                                 float x_dt, int n) {
    __m512 acc[4], va = _mm512_set1_ps(dA), vx = _mm512_set1_ps(x_dt);
    float sum;
    int i = 0, j;
    for (j = 0; j < 4; j++) acc[j] = _mm512_setzero_ps();
    for (; i + 64 <= n; i += 64)
        for (j = 0; j < 4; j++) {
            int at = i + 16 * j;
            __m512 a = s0 ? _mm512_mul_ps(_mm512_loadu_ps(s0 + at), va) : _mm512_setzero_ps();
            a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_loadu_ps(B + at), vx));
            acc[j] = _mm512_fmadd_ps(a, _mm512_loadu_ps(C + at), acc[j]);
            _mm512_storeu_ps(s + at, a);
        }
    sum = infer__avx512_fold4x16(acc[0], acc[1], acc[2], acc[3]);
    for (; i < n; i++) {
        float a = s0 ? s0[i] * dA : 0.0f, b = B[i] * x_dt, p;
        s[i] = a + b;
        p = s[i] * C[i];
        sum += p;
    }
    return sum;
}

/* the chunked scans' F32 product: 4 rows of c by 32 columns in registers
   (a tail masked), each element's sum fused in p order; a block past the
   last row repeats it, unstored */
INFER__AVX512 static void infer__avx512_f32_gemm(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m,
                                                 int n, int k, int acc) {
    int i, j, p, r;
    for (i = 0; i < m; i += 4) {
        const float *ar[4];
        float *cr[4];
        int nr = infer__f32_gemm_rows4(a, lda, c, ldc, i, m, ar, cr);
        for (j = 0; j < n; j += 32) {
            int w = INFER__MIN(32, n - j);
            __mmask16 m0 = w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1);
            __mmask16 m1 = w >= 32 ? (__mmask16)0xffff : w > 16 ? (__mmask16)((1u << (w - 16)) - 1) : (__mmask16)0;
            __m512 c0[4], c1[4];
            for (r = 0; r < 4; r++) {
                c0[r] = acc ? _mm512_maskz_loadu_ps(m0, cr[r] + j) : _mm512_setzero_ps();
                c1[r] = acc ? _mm512_maskz_loadu_ps(m1, cr[r] + j + 16) : _mm512_setzero_ps();
            }
            for (p = 0; p < k; p++) {
                const float *bp = b + (size_t)p * ldb + j;
                __m512 b0 = _mm512_maskz_loadu_ps(m0, bp), b1 = _mm512_maskz_loadu_ps(m1, bp + 16);
                for (r = 0; r < 4; r++) {
                    __m512 av = _mm512_set1_ps(ar[r][p]);
                    c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
                    c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
                }
            }
            for (r = 0; r < nr; r++) {
                _mm512_mask_storeu_ps(cr[r] + j, m0, c0[r]);
                _mm512_mask_storeu_ps(cr[r] + j + 16, m1, c1[r]);
            }
        }
    }
}

/* a row of the gated delta rule (as AVX2's, by 64) */
INFER__AVX512 static float infer__avx512_deltanet_row(float *r, const float *r0, float decay, const float *k,
                                                      const float *q, float v, float beta, int n) {
    __m512 acc[4], vd = _mm512_set1_ps(decay), dd;
    float sum, d;
    int i, j, whole = n - n % 64;
    for (j = 0; j < 4; j++) acc[j] = _mm512_setzero_ps();
    for (i = 0; i < whole; i += 64)
        for (j = 0; j < 4; j++) {
            int at = i + 16 * j;
            __m512 x = r0 ? _mm512_mul_ps(_mm512_loadu_ps(r0 + at), vd) : _mm512_setzero_ps();
            _mm512_storeu_ps(r + at, x);
            acc[j] = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + at), acc[j]);
        }
    sum = infer__avx512_fold4x16(acc[0], acc[1], acc[2], acc[3]);
    for (i = whole; i < n; i++) {
        float x = r0 ? r0[i] * decay : 0.0f, p;
        r[i] = x;
        p = x * k[i];
        sum += p;
    }
    d = (v - sum) * beta;
    dd = _mm512_set1_ps(d);
    for (j = 0; j < 4; j++) acc[j] = _mm512_setzero_ps();
    for (i = 0; i < whole; i += 64)
        for (j = 0; j < 4; j++) {
            int at = i + 16 * j;
            __m512 x = _mm512_fmadd_ps(_mm512_loadu_ps(k + at), dd, _mm512_loadu_ps(r + at));
            _mm512_storeu_ps(r + at, x);
            acc[j] = _mm512_fmadd_ps(x, _mm512_loadu_ps(q + at), acc[j]);
        }
    sum = infer__avx512_fold4x16(acc[0], acc[1], acc[2], acc[3]);
    for (i = whole; i < n; i++) {
        float p;
        r[i] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(k[i]), _mm_set_ss(d), _mm_set_ss(r[i])));
        p = r[i] * q[i];
        sum += p;
    }
    return sum;
}

/* ---- the ordered attention's steps over a tile (kernels.f16_scores_ordered,
   exp_chunks16, probs_fma16), bit for bit as their one-at-a-time forms ---- */

/* Sixteen keys' 16 lanes each (l[j]) to their trees' sums (infer__sum16_tree),
   out[j]: each halving done for two keys in one register, so every add is
   the tree's own. After the four halvings lane 4r + c holds key r + 4c. */
INFER__AVX512_INLINE __m512 infer__avx512_trees16(const __m512 *l) {
    __m512 a[8], b[4], c0, c1;
    int j;
    for (j = 0; j < 8; j++) /* lanes i + 8: keys 2j, 2j + 1 in halves */
        a[j] = _mm512_add_ps(_mm512_shuffle_f32x4(l[2 * j], l[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(l[2 * j], l[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (j = 0; j < 4; j++) /* lanes i + 4: keys 4j .. 4j + 3 in quarters */
        b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* lanes i + 2: quarter r of c0 holds keys r, r + 4; of c1, r + 8, r + 12 */
    c0 = _mm512_add_ps(_mm512_shuffle_ps(b[0], b[1], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(b[0], b[1], _MM_SHUFFLE(3, 2, 3, 2)));
    c1 = _mm512_add_ps(_mm512_shuffle_ps(b[2], b[3], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(b[2], b[3], _MM_SHUFFLE(3, 2, 3, 2)));
    c0 = _mm512_add_ps(_mm512_shuffle_ps(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), c0);
}

INFER__AVX512 static int infer__avx512_f16_scores_ordered(int n, int one, const uint8_t *k, size_t k_stride, int kt,
                                                          const uint8_t *q, size_t q_stride, int nq, float *s, size_t lds) {
    __m512 l[16];
    float qf[512];
    int i, j0, j, d;
    if (n % (one ? 64 : 16) || n > 512) return 0;
    for (i = 0; i < nq; i++) {
        const uint16_t *qi = (const uint16_t *)(const void *)(q + (size_t)i * q_stride);
        for (d = 0; d < n; d += 16) _mm512_storeu_ps(qf + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(qi + d))));
        for (j0 = 0; j0 < kt; j0 += 16) {
            int nk = INFER__MIN(16, kt - j0);
            for (j = 0; j < 16; j++) {
                const uint16_t *kj = (const uint16_t *)(const void *)(k + (size_t)(j0 + j) * k_stride);
#define INFER__KH(at) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(kj + (at))))
                if (j >= nk) {
                    l[j] = _mm512_setzero_ps();
                } else if (one) { /* four accumulators over each 64, added 0 + 2 and 1 + 3 */
                    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                    for (d = 0; d < n; d += 64) {
                        a0 = _mm512_fmadd_ps(INFER__KH(d), _mm512_loadu_ps(qf + d), a0);
                        a1 = _mm512_fmadd_ps(INFER__KH(d + 16), _mm512_loadu_ps(qf + d + 16), a1);
                        a2 = _mm512_fmadd_ps(INFER__KH(d + 32), _mm512_loadu_ps(qf + d + 32), a2);
                        a3 = _mm512_fmadd_ps(INFER__KH(d + 48), _mm512_loadu_ps(qf + d + 48), a3);
                    }
                    l[j] = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
                } else { /* one chain of 16 lanes */
                    __m512 a = _mm512_setzero_ps();
                    for (d = 0; d < n; d += 16) a = _mm512_fmadd_ps(INFER__KH(d), _mm512_loadu_ps(qf + d), a);
                    l[j] = a;
                }
#undef INFER__KH
            }
            _mm512_mask_storeu_ps(s + (size_t)i * lds + j0, (__mmask16)((1u << nk) - 1), infer__avx512_trees16(l));
        }
    }
    return 1;
}

/* infer__exp_llama in 16 lanes: its fused steps, then 2^n by scalef (one
   rounding, as the scalar's product or ldexpf; 0 or inf past |n| > 192) */
INFER__AVX512_INLINE __m512 infer__avx512_exp_llama(__m512 x) {
    const __m512 shift = _mm512_set1_ps(12582912.0f);
    __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269502f), shift), shift);
    __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-06f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x));
    __m512 u = _mm512_mul_ps(b, b);
    __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0.00824739039f), b, _mm512_set1_ps(0.0418997668f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0.166683957f), b, _mm512_set1_ps(0.499991268f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0.999999404f), b, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(j, n);
}

INFER__AVX512 static double infer__avx512_exp_chunks16(const float *s, float *held, int base, int lo, int hi, int last,
                                                       float scale, float m, float *ch, double sum) {
    __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(m), c = _mm512_loadu_ps(ch);
    float lane[16];
    int a;
    if (lo >= hi) return sum;
    for (a = base + lo - (base + lo) % 16; a < base + hi; a += 16) {
        int j0 = a - base; /* the chunk's first position, as an index of s (may be below 0: masked) */
        __mmask16 seen = infer__avx512_seen(j0, lo, hi);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(seen, s + j0), vs);
        __m512 e = infer__avx512_exp_llama(_mm512_sub_ps(x, vm));
        c = _mm512_mask_mov_ps(c, seen, e);
        if (held) _mm512_mask_storeu_ps(held + j0, seen, e);
        if (j0 + 15 < hi || (last == hi - 1 && last < j0 + 16)) { /* the chunk ends, or the row does */
            _mm512_storeu_ps(lane, c);
            sum += (double)infer__sum16_tree(lane);
            c = _mm512_setzero_ps();
        }
    }
    _mm512_storeu_ps(ch, c);
    return sum;
}

/* each value's 16 lanes loaded once for all the chunks (at most 4) */
INFER__AVX512 static void infer__avx512_probs_fma16(float *acc, int as, const float *v, const float *e, int lo, int hi,
                                                    float inv, int n, int n_chunks) {
    __m512 p[4];
    const float *vc[4];
    int c, d, na = 0;
    if (n_chunks > 4) {
        for (c = 0; c < n_chunks; c += 4)
            infer__avx512_probs_fma16(acc, as, v + (size_t)16 * n * c, e + 16 * c, lo - 16 * c, hi - 16 * c, inv, n,
                                      INFER__MIN(4, n_chunks - c));
        return;
    }
    for (c = 0; c < n_chunks; c++) {
        __mmask16 seen = infer__avx512_seen(16 * c, lo, hi);
        if (!seen) continue;
        p[na] = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_maskz_loadu_ps(seen, e + 16 * c), _mm512_set1_ps(inv)),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        vc[na++] = v + (size_t)16 * n * c;
    }
    for (d = 0; d < n; d++) {
        __m512 a = _mm512_loadu_ps(acc + (size_t)as * d);
        for (c = 0; c < na; c++) a = _mm512_fmadd_ps(_mm512_loadu_ps(vc[c] + 16 * d), p[c], a);
        _mm512_storeu_ps(acc + (size_t)as * d, a);
    }
}

INFER__AVX512 static void infer__avx512_f16_rows16(const uint16_t *h, size_t stride, int rows, float *out) {
    int r;
    for (r = 0; r < rows; r++)
        _mm512_storeu_ps(out + 16 * r, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(h + (size_t)r * stride))));
}

INFER__AVX512_INTRINSICS_END
#endif /* INFER__HAVE_X86 */

static int infer__simd_avx512_install(infer__kernels *k) {
#ifdef INFER__HAVE_X86
    if (!infer__cpu_has(INFER__CPU_AVX512)) return 0;
    /* what AVX2 has, AVX-512 machines have too; replace what is faster here */
    if (!infer__simd_avx2_install(k)) return 0;
    /* a whole row's softmax; a tile's (softmax_stats and _probs) stays
       AVX2's: the 16-lane versions are not yet run on a CPU */
    k->scaled_max = infer__avx512_scaled_max;
    k->softmax_exp = infer__avx512_softmax_exp;
    k->probs_f16 = infer__avx512_probs_f16;
    k->vec_dot[INFER_TYPE_F32] = infer__avx512_f32_dot;
    k->vec_dot[INFER_TYPE_F16] = infer__avx512_f16_dot;
    k->gemm[INFER_TYPE_F16] = infer__avx512_f16_gemm;
    k->qk_f16 = infer__avx512_qk_f16;
    k->pv_f16 = infer__avx512_pv_f16;
    k->pack_size[INFER_TYPE_F16] = infer__pack_f16_size;
    k->pack[INFER_TYPE_F16] = infer__pack_f16;
    k->gemm_packed[INFER_TYPE_F16] = infer__avx512_f16_gemm_packed;
    k->gemm_packed_ordered[INFER_TYPE_F16] = infer__avx512_f16_gemm_packed_ordered;
    k->f16_dot_ordered = infer__avx512_f16_dot_ordered;
    k->f16_dot_ordered1 = infer__avx512_f16_dot_ordered1;
    k->vec_dot[INFER_TYPE_BF16] = infer__avx512_bf16_dot;
    k->from_float[INFER_TYPE_F16] = infer__avx512_f16_from_float;
    k->from_float[INFER_TYPE_BF16] = infer__avx512_bf16_from_float;
    k->lanes16_fma = infer__avx512_lanes16_fma;
    k->silu_mul = infer__avx512_silu_mul;
    k->gelu_mul = infer__avx512_gelu_mul;
    k->sum_squares = infer__avx512_sum_squares;
    k->f32_dot_ordered = infer__avx512_f32_dot_ordered; /* f32_mad stays AVX2's: each value alone */
    k->ssm_row = infer__avx512_ssm_row;
    k->deltanet_row = infer__avx512_deltanet_row;
    k->f32_gemm = infer__avx512_f32_gemm;
    k->f16_rows16 = infer__avx512_f16_rows16;
    k->f16_scores_ordered = infer__avx512_f16_scores_ordered;
    k->exp_chunks16 = infer__avx512_exp_chunks16;
    k->probs_fma16 = infer__avx512_probs_fma16;
    if (infer__cpu_has(INFER__CPU_AVX512_VNNI)) {
        k->vec_dot[INFER_TYPE_Q8_0] = infer__vnni_q8_0_dot;
        k->vec_dot[INFER_TYPE_Q4_0] = infer__vnni_q4_0_dot;
        k->vec_dot[INFER_TYPE_Q4_1] = infer__vnni_q4_1_dot;
        k->vec_dot[INFER_TYPE_Q5_0] = infer__vnni_q5_0_dot;
        k->vec_dot[INFER_TYPE_Q5_1] = infer__vnni_q5_1_dot;
        k->gemm[INFER_TYPE_Q4_0] = infer__vnni_q4_0_gemm;
        k->gemm[INFER_TYPE_Q6_K] = infer__vnni_q6_K_gemm;
        k->pack_size[INFER_TYPE_Q4_0] = infer__pack_q4_0_size;
        k->pack[INFER_TYPE_Q4_0] = infer__pack_q4_0;
        k->gemm_packed[INFER_TYPE_Q4_0] = infer__vnni_q4_0_gemm_packed;
        k->pack_size[INFER_TYPE_Q8_0] = infer__pack_q8_0_size;
        k->pack[INFER_TYPE_Q8_0] = infer__pack_q8_0;
        k->gemm_packed[INFER_TYPE_Q8_0] = infer__vnni_q8_0_gemm_packed;
        k->pack_size[INFER_TYPE_Q5_0] = infer__pack_q5_0_size;
        k->pack[INFER_TYPE_Q5_0] = infer__pack_q5_0;
        k->gemm_packed[INFER_TYPE_Q5_0] = infer__vnni_q5_0_gemm_packed;
        k->pack_size[INFER_TYPE_Q4_1] = infer__pack_q4_1_size;
        k->pack[INFER_TYPE_Q4_1] = infer__pack_q4_1;
        k->gemm_packed[INFER_TYPE_Q4_1] = infer__vnni_q4_1_gemm_packed;
        k->pack_size[INFER_TYPE_Q5_1] = infer__pack_q5_1_size;
        k->pack[INFER_TYPE_Q5_1] = infer__pack_q5_1;
        k->gemm_packed[INFER_TYPE_Q5_1] = infer__vnni_q5_1_gemm_packed;
        k->pack_size[INFER_TYPE_Q4_K] = infer__pack_q4_K_size;
        k->pack[INFER_TYPE_Q4_K] = infer__pack_q4_K;
        k->gemm_packed[INFER_TYPE_Q4_K] = infer__vnni_q4_K_gemm_packed;
        k->pack_size[INFER_TYPE_Q6_K] = infer__pack_q6_K_size;
        k->pack[INFER_TYPE_Q6_K] = infer__pack_q6_K;
        k->gemm_packed[INFER_TYPE_Q6_K] = infer__vnni_q6_K_gemm_packed;
        k->gemm_packed[INFER_TYPE_F16] = infer__vnni_f16_gemm_packed;
        k->gemm_packed_ordered[INFER_TYPE_Q8_0] = infer__vnni_q8_0_gemm_packed_ordered;
        k->gemm_packed_ordered[INFER_TYPE_Q5_0] = infer__vnni_q5_0_gemm_packed_ordered;
        k->gemm_packed_ordered[INFER_TYPE_Q4_0] = infer__vnni_q4_0_gemm_packed_ordered;
        k->gemm_packed_ordered[INFER_TYPE_Q4_1] = infer__vnni_q4_1_gemm_packed_ordered;
        k->gemm_packed_ordered[INFER_TYPE_Q5_1] = infer__vnni_q5_1_gemm_packed_ordered;
        k->gemm_packed_ordered[INFER_TYPE_Q4_K] = infer__vnni_q4_K_gemm_packed_ordered;
    }
    if (infer__cpu_has(INFER__CPU_AVX512_BF16)) {
        k->vec_dot[INFER_TYPE_BF16] = infer__avx512bf16_bf16_dot;
        k->pack_size[INFER_TYPE_BF16] = infer__pack_bf16_size;
        k->pack[INFER_TYPE_BF16] = infer__pack_bf16;
        k->gemm_packed[INFER_TYPE_BF16] = infer__avx512bf16_bf16_gemm_packed;
    }
    return 1;
#else
    (void)k;
    return 0;
#endif
}
