/* vecmath.c - the elementwise math of the forward pass (the SiLU- and
   GELU-gated products and RMSNorm's sum of squares), plain C and, where the CPU has
   them, AVX-512 and AVX2 versions (NEON uses the plain C): per token these touch every activation,
   so in prompt processing they add up to a real share of the time.
   exp is evaluated like llama.cpp's vector exp (range reduction by ln 2, a
   polynomial, then scaling by 2^n), within about 2 ulp of expf. */
#include "internal.h"
#include "backend.h"
#include "quants.h"
#include "simd_x86.h"

/* g[i] = silu(g[i]) * u[i] */
static void infer__silu_mul_ref(float *g, const float *u, int n) {
    int i;
    for (i = 0; i < n; i++) g[i] = g[i] / (1.0f + infer__expf(-g[i])) * u[i];
}

/* g[i] = gelu(g[i]) * u[i], GELU as llama.cpp's CPU computes it: looked up
   in a table of every F16 value (table[h] = the F16 rounding of GELU(h)),
   with g rounded to F16 first; 0 below -10 and g itself above 10. */
static void infer__gelu_mul_ref(float *g, const float *u, int n, const float *table) {
    int i;
    for (i = 0; i < n; i++) {
        float x = g[i];
        g[i] = (x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[infer__fp32_to_fp16(x)]) * u[i];
    }
}

/* The sum of x[i]^2, each square rounded to float first (as llama.cpp's
   RMSNorm has it), summed in double. */
static double infer__sum_squares_ref(const float *x, int n) {
    double ss = 0;
    int i;
    for (i = 0; i < n; i++) ss += (double)(x[i] * x[i]);
    return ss;
}

/* The keys' running max over [lo, hi) of s scaled, from m. */
static float infer__scaled_max_ref(const float *s, int lo, int hi, float scale, float m) {
    int j;
    for (j = lo; j < hi; j++) m = INFER__MAX(m, s[j] * scale);
    return m;
}

/* The tile's sum in double, added to the running sum rescaled to the new
   max (its own statement for each rounding, as attention.c had them). */
static void infer__softmax_stats_ref(const float *s, int lo, int hi, float scale, float *m, float *l) {
    float mx;
    double sum = 0;
    int j;
    if (lo >= hi) return;
    mx = infer__scaled_max_ref(s, lo, hi, scale, *m);
    for (j = lo; j < hi; j++) sum += infer__expf(s[j] * scale - mx);
    *l = (float)((double)*l * infer__expf(*m - mx) + sum);
    *m = mx;
}

static void infer__softmax_probs_ref(const float *s, int n, int lo, int hi, float scale, float m, float inv,
                                     uint16_t *p) {
    int j;
    for (j = 0; j < n; j++) p[j] = j >= lo && j < hi ? infer__fp32_to_fp16(infer__expf(s[j] * scale - m) * inv) : 0;
}

static double infer__softmax_exp_ref(float *s, int n, int lo, int hi, float scale, float m) {
    double sum = 0;
    int j;
    for (j = 0; j < n; j++) {
        float x = s[j] * scale; /* its own statement: never contracted with the subtraction */
        s[j] = j >= lo && j < hi ? infer__expf(x - m) : 0.0f;
        sum += s[j];
    }
    return sum;
}

static void infer__probs_f16_ref(const float *e, int n, float inv, uint16_t *p) {
    int j;
    for (j = 0; j < n; j++) p[j] = infer__fp32_to_fp16(e[j] * inv);
}

/* Attention's q.K over a tile of an F16 cache (infer__kernels.qk_f16) for
   any ISA without its own: keys widened once into panels of 16, dim by
   dim (key j's dim d at (j / 16) 16 hd + 16 d + j % 16), then each score
   summed in dim order. An F16 x F16 product is exact in float, so a fused
   multiply-add and a multiply then add round alike: every ISA's qk_f16
   gives the same scores, bit for bit. The inner loop runs across 16 keys,
   which compilers vectorise without reordering a sum. */
static void infer__qk_f16_ref(int hd, const uint8_t *k, size_t k_stride, int kt, const uint16_t *q, size_t q_stride, int nq,
                              float *s, size_t lds, float *work) {
    int kp = (kt + 15) / 16 * 16, i, j, d, l;
    float *kd = work, *qf = work + (size_t)hd * kp;
    for (j = 0; j < kp; j++) {
        const uint16_t *kj = (const uint16_t *)(const void *)(k + (size_t)j * k_stride);
        float *at = kd + (size_t)(j / 16) * 16 * hd + j % 16;
        for (d = 0; d < hd; d++) at[16 * d] = j < kt ? infer__fp16_to_fp32(kj[d]) : 0.0f;
    }
    for (i = 0; i < nq; i++)
        for (d = 0; d < hd; d++) qf[(size_t)i * hd + d] = infer__fp16_to_fp32(q[(size_t)i * q_stride / 2 + d]);
    for (i = 0; i < nq; i++)
        for (j = 0; j < kt; j += 16) {
            const float *panel = kd + (size_t)j * hd, *qi = qf + (size_t)i * hd;
            float acc[16] = {0};
            for (d = 0; d < hd; d++)
                for (l = 0; l < 16; l++) acc[l] += qi[d] * panel[16 * d + l];
            memcpy(s + (size_t)i * lds + j, acc, (size_t)INFER__MIN(16, kt - j) * sizeof(float));
        }
}

/* acc[as d + l] = v[16 d + l] * p[l] + acc[as d + l], fused (attention's
   p.V in llama.cpp's lanes); written so compilers vectorise it */
static void infer__lanes16_fma_ref(float *acc, int as, const float *v, const float *p, int n) {
    int d, l;
    for (d = 0; d < n; d++)
        for (l = 0; l < 16; l++) acc[as * d + l] = infer__fmaf(v[16 * d + l], p[l], acc[as * d + l]);
}

/* Attention's p.V from a quantized cache (infer__kernels.pv_quant): key by
   key, each block's values times (p * scale), fused into acc; a key a row
   does not see (p = 0) adds nothing and is skipped. */
static void infer__pv_q8_0_ref(int hd, const uint8_t *v, size_t v_stride, int kt, const uint16_t *p, size_t ldp, int nq,
                               float *acc) {
    int i, j, b, d;
    for (j = 0; j < kt; j++) {
        const infer__block_q8_0 *row = (const infer__block_q8_0 *)(const void *)(v + (size_t)j * v_stride);
        for (i = 0; i < nq; i++) {
            float pij = infer__fp16_to_fp32(p[(size_t)i * ldp + j]), *a = acc + (size_t)i * hd;
            if (pij == 0) continue;
            for (b = 0; b < hd / 32; b++) {
                float c = pij * infer__fp16_to_fp32(row[b].d);
                for (d = 0; d < 32; d++) a[32 * b + d] = infer__fmaf(c, (float)row[b].qs[d], a[32 * b + d]);
            }
        }
    }
}

/* Q4_0: value d of a block is its nibble (low ones first) minus 8 */
static void infer__pv_q4_0_ref(int hd, const uint8_t *v, size_t v_stride, int kt, const uint16_t *p, size_t ldp, int nq,
                               float *acc) {
    int i, j, b, d;
    for (j = 0; j < kt; j++) {
        const infer__block_q4_0 *row = (const infer__block_q4_0 *)(const void *)(v + (size_t)j * v_stride);
        for (i = 0; i < nq; i++) {
            float pij = infer__fp16_to_fp32(p[(size_t)i * ldp + j]), *a = acc + (size_t)i * hd;
            if (pij == 0) continue;
            for (b = 0; b < hd / 32; b++) {
                float c = pij * infer__fp16_to_fp32(row[b].d);
                for (d = 0; d < 16; d++) {
                    a[32 * b + d] = infer__fmaf(c, (float)((row[b].qs[d] & 15) - 8), a[32 * b + d]);
                    a[32 * b + 16 + d] = infer__fmaf(c, (float)((row[b].qs[d] >> 4) - 8), a[32 * b + 16 + d]);
                }
            }
        }
    }
}

#ifdef INFER__HAVE_X86
INFER__AVX512 static void infer__avx512_lanes16_fma(float *acc, int as, const float *v, const float *p, int n) {
    __m512 pv = _mm512_loadu_ps(p);
    int d;
    for (d = 0; d < n; d++)
        _mm512_storeu_ps(acc + (size_t)as * d, _mm512_fmadd_ps(_mm512_loadu_ps(v + 16 * d), pv, _mm512_loadu_ps(acc + (size_t)as * d)));
}
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

/* e^x: x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor series to r^7
   (relative error below 1e-8 there), then times 2^n. */
INFER__AVX512_INLINE __m512 infer__avx512_exp(__m512 x) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-6f), r);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
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

/* The same in 8 lanes; without scalef, x is clamped to [-87, 88] first so
   that 2^n stays a normal float (silu then differs from the exact value by
   under 1e-36 where exp overflows or underflows). */
INFER__AVX2_INLINE __m256 infer__avx2_exp(__m256 x) {
    __m256 n, r, p;
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-6f), r);
    p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(
                                _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)));
}

/* The same in 8 lanes. */
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
#endif

static float infer__fmaf_ref(float x, float y, float z) { return infer__fmaf(x, y, z); }
static float infer__exp_llama_ref(float x) { return infer__exp_llama(x); }
#ifdef INFER__HAVE_X86
/* the FMA instruction, one rounding: correctly rounded as mathfn.c's */
INFER__AVX2_INLINE float infer__avx2_fma1(float x, float y, float z) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x), _mm_set_ss(y), _mm_set_ss(z)));
}
INFER__AVX2 static float infer__avx2_fmaf(float x, float y, float z) { return infer__avx2_fma1(x, y, z); }
INFER__AVX2 static float infer__avx2_exp_llama(float x) { INFER__EXP_LLAMA_BODY(x, infer__avx2_fma1) }
#endif

/* After the ISA's kernels are in: the elementwise math for that ISA. */
static void infer__vecmath_install(infer__kernels *k) {
    k->silu_mul = infer__silu_mul_ref;
    k->gelu_mul = infer__gelu_mul_ref;
    k->sum_squares = infer__sum_squares_ref;
    k->lanes16_fma = infer__lanes16_fma_ref;
    k->fmaf = infer__fmaf_ref;
    k->exp_llama = infer__exp_llama_ref;
    k->softmax_stats = infer__softmax_stats_ref;
    k->softmax_probs = infer__softmax_probs_ref;
    k->scaled_max = infer__scaled_max_ref;
    k->softmax_exp = infer__softmax_exp_ref;
    k->probs_f16 = infer__probs_f16_ref;
    if (!k->qk_f16) k->qk_f16 = infer__qk_f16_ref; /* the ISA's, where it has one */
    k->pv_quant[INFER_TYPE_Q8_0] = infer__pv_q8_0_ref;
    k->pv_quant[INFER_TYPE_Q4_0] = infer__pv_q4_0_ref;
#ifdef INFER__HAVE_X86
    if (k->isa == INFER__ISA_AVX2 || k->isa == INFER__ISA_AVX512) { /* 8 lanes hold a block's quarter: AVX-512 gains nothing */
        k->pv_quant[INFER_TYPE_Q8_0] = infer__avx2_pv_q8_0;
        k->pv_quant[INFER_TYPE_Q4_0] = infer__avx2_pv_q4_0;
        k->fmaf = infer__avx2_fmaf;
        k->exp_llama = infer__avx2_exp_llama;
        k->scaled_max = infer__avx2_scaled_max;
        k->softmax_exp = infer__avx2_softmax_exp;
        k->probs_f16 = infer__avx2_probs_f16;
    }
    if (k->isa == INFER__ISA_AVX2) {
        k->lanes16_fma = infer__avx2_lanes16_fma;
        k->silu_mul = infer__avx2_silu_mul;
        k->gelu_mul = infer__avx2_gelu_mul;
        k->sum_squares = infer__avx2_sum_squares;
        k->softmax_stats = infer__avx2_softmax_stats;
        k->softmax_probs = infer__avx2_softmax_probs;
    }
    if (k->isa == INFER__ISA_AVX512) {
        k->lanes16_fma = infer__avx512_lanes16_fma;
        k->silu_mul = infer__avx512_silu_mul;
        k->gelu_mul = infer__avx512_gelu_mul;
        k->sum_squares = infer__avx512_sum_squares;
        k->softmax_stats = infer__avx2_softmax_stats; /* the 16-lane versions below are not yet run on a CPU */
        k->softmax_probs = infer__avx2_softmax_probs;
        k->scaled_max = infer__avx512_scaled_max;
        k->softmax_exp = infer__avx512_softmax_exp;
        k->probs_f16 = infer__avx512_probs_f16;
    }
#endif
}
