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
    k->vec_dot[INFER_TYPE_BF16] = infer__avx512_bf16_dot;
    k->from_float[INFER_TYPE_F16] = infer__avx512_f16_from_float;
    k->from_float[INFER_TYPE_BF16] = infer__avx512_bf16_from_float;
    if (__builtin_cpu_supports("avx512vnni")) {
        k->vec_dot[INFER_TYPE_Q8_0] = infer__vnni_q8_0_dot;
        k->vec_dot[INFER_TYPE_Q4_0] = infer__vnni_q4_0_dot;
        k->vec_dot[INFER_TYPE_Q4_1] = infer__vnni_q4_1_dot;
        k->vec_dot[INFER_TYPE_Q5_0] = infer__vnni_q5_0_dot;
        k->vec_dot[INFER_TYPE_Q5_1] = infer__vnni_q5_1_dot;
    }
    if (__builtin_cpu_supports("avx512bf16")) k->vec_dot[INFER_TYPE_BF16] = infer__avx512bf16_bf16_dot;
    return 1;
#else
    (void)k;
    return 0;
#endif
}
