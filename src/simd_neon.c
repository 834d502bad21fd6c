/* simd_neon.c - ARM NEON (AArch64) versions of the kernels, with the
   dotprod extension (sdot: four int8 products summed into an int32 lane)
   where the CPU has it, and prompt tiles on the i8mm extension (smmla: a
   2x2 tile of int8 dot products) where it has that: each compiled with a
   target attribute and chosen at run time from the kernel's hwcaps. Same
   numerics as simd_avx2.c: equal to the scalar reference up to float
   summation order, quantizers byte-exact. */
#include "internal.h"
#include "quants.h"

#ifdef INFER__HAVE_NEON
#include <arm_neon.h>

#define INFER__NEON_INLINE INFER__FORCE_INLINE
/* dotprod and i8mm as platform.h marks them */
#define INFER__NEON_DOTPROD INFER__TARGET_DOTPROD

/* ---- float formats ---- */

/* The float formats' dots differ only in their loads: LOAD(p) gives the
   4 values at p as floats, ONE(v) one value. 16 values at a time in four
   chains of 4 lanes (INFER__NEON_FMA16, over a, b, i, n and s0..s3),
   then 4 at a time into the first, the chains added, the tail one by one. */
#define INFER__NEON_FMA16(LOAD)                                                                                    \
    for (; i + 16 <= n; i += 16) {                                                                                 \
        s0 = vfmaq_f32(s0, LOAD(a + i), LOAD(b + i));                                                              \
        s1 = vfmaq_f32(s1, LOAD(a + i + 4), LOAD(b + i + 4));                                                      \
        s2 = vfmaq_f32(s2, LOAD(a + i + 8), LOAD(b + i + 8));                                                      \
        s3 = vfmaq_f32(s3, LOAD(a + i + 12), LOAD(b + i + 12));                                                    \
    }
#define INFER__NEON_DOT_BODY(T, LOAD, ONE)                                                                         \
    const T *a = (const T *)w, *b = (const T *)x;                                                                  \
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0), s3 = vdupq_n_f32(0);                \
    float s;                                                                                                       \
    int i = 0;                                                                                                     \
    INFER__NEON_FMA16(LOAD)                                                                                        \
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, LOAD(a + i), LOAD(b + i));                                       \
    s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));                                               \
    for (; i < n; i++) s += ONE(a[i]) * ONE(b[i]);                                                                 \
    return s;
#define INFER__NLOADH(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))
#define INFER__NLOADBF(p) vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16))
#define INFER__NSAME(v) (v)

static float infer__neon_f32_dot(int n, const void *w, const void *x) {
    INFER__NEON_DOT_BODY(float, vld1q_f32, INFER__NSAME)
}
static float infer__neon_f16_dot(int n, const void *w, const void *x) {
    INFER__NEON_DOT_BODY(uint16_t, INFER__NLOADH, infer__fp16_to_fp32)
}
static float infer__neon_bf16_dot(int n, const void *w, const void *x) {
    INFER__NEON_DOT_BODY(uint16_t, INFER__NLOADBF, infer__bf16_to_fp32)
}
/* one token's order (infer__f16_dot_llama_vec): its four 16-lane
   accumulators as sixteen of 4 lanes (s[j] holds lanes 4j..4j+3), added as
   it adds them, then the tree; the values past the last whole 64 in double */
static float infer__neon_f16_dot_ordered1(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    float32x4_t s[16];
    float lane[16];
    double sum;
    int i = 0, j;
    for (j = 0; j < 16; j++) s[j] = vdupq_n_f32(0);
    for (; i + 64 <= n; i += 64)
        for (j = 0; j < 16; j++) s[j] = vfmaq_f32(s[j], INFER__NLOADH(a + i + 4 * j), INFER__NLOADH(b + i + 4 * j));
    for (j = 0; j < 4; j++) /* lane l: (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]) */
        vst1q_f32(lane + 4 * j, vaddq_f32(vaddq_f32(s[j], s[8 + j]), vaddq_f32(s[4 + j], s[12 + j])));
    sum = (double)infer__sum16_tree(lane);
    for (; i < n; i++) sum += (double)(infer__fp16_to_fp32(a[i]) * infer__fp16_to_fp32(b[i]));
    return (float)sum;
}
/* llama.cpp's F16 order as AVX-512 runs it: 16 lanes in four chains,
   then the tree (infer__f16_dot_llama) */
static float infer__neon_f16_dot_ordered(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0), s3 = vdupq_n_f32(0);
    float lane[16];
    int i = 0;
    if (n % 16) return infer__neon_f16_dot_ordered1(n, w, x); /* as llama.cpp: its one-token order */
    INFER__NEON_FMA16(INFER__NLOADH)
    vst1q_f32(lane, s0), vst1q_f32(lane + 4, s1), vst1q_f32(lane + 8, s2), vst1q_f32(lane + 12, s3);
    return infer__sum16_tree(lane);
}
#undef INFER__NSAME
#undef INFER__NLOADBF
#undef INFER__NLOADH
#undef INFER__NEON_DOT_BODY
#undef INFER__NEON_FMA16

static void infer__neon_f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(d + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) d[i] = infer__fp32_to_fp16(src[i]);
}

/* round to nearest even on the bits, NaN kept quiet: as infer__fp32_to_bf16 */
static void infer__neon_bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(src + i));
        uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
        uint32x4_t r = vshrq_n_u32(vaddq_u32(u, vaddq_u32(lsb, vdupq_n_u32(0x7fff))), 16);
        uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
        r = vbslq_u32(nan, vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(64)), r);
        vst1_u16(d + i, vmovn_u32(r));
    }
    for (; i < n; i++) d[i] = infer__fp32_to_bf16(src[i]);
}

/* ---- 8-bit activations ---- */

INFER__NEON_INLINE float infer__neon_amax32(const float32x4_t v[8]) {
    float32x4_t m = vmaxq_f32(vmaxq_f32(vmaxq_f32(vabsq_f32(v[0]), vabsq_f32(v[1])), vmaxq_f32(vabsq_f32(v[2]), vabsq_f32(v[3]))),
                              vmaxq_f32(vmaxq_f32(vabsq_f32(v[4]), vabsq_f32(v[5])), vmaxq_f32(vabsq_f32(v[6]), vabsq_f32(v[7]))));
    return vmaxvq_f32(m);
}
/* eight vectors of int32 in -127..127 to 32 int8 */
INFER__NEON_INLINE void infer__neon_store32(int8_t *out, const int32x4_t q[8]) {
    int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1])), h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    int16x8_t h2 = vcombine_s16(vmovn_s32(q[4]), vmovn_s32(q[5])), h3 = vcombine_s16(vmovn_s32(q[6]), vmovn_s32(q[7]));
    vst1q_s8(out, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
    vst1q_s8(out + 16, vcombine_s8(vmovn_s16(h2), vmovn_s16(h3)));
}

static void infer__neon_q8_0_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_0 *y = (infer__block_q8_0 *)dst;
    int64_t b;
    for (b = 0; b < n / 32; b++, src += 32) {
        float32x4_t v[8];
        int32x4_t q[8];
        float amax, id;
        int j;
        for (j = 0; j < 8; j++) v[j] = vld1q_f32(src + 4 * j);
        amax = infer__neon_amax32(v);
        y[b].d = infer__fp32_to_fp16(amax / 127.0f);
        id = amax != 0.0f ? 127.0f / amax : 0.0f;
        /* fcvtns: to nearest, ties to even - nearbyintf in the default mode */
        for (j = 0; j < 8; j++) q[j] = vcvtnq_s32_f32(vmulq_n_f32(v[j], id));
        infer__neon_store32(y[b].qs, q);
    }
}

static void infer__neon_q8_1_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_1 *y = (infer__block_q8_1 *)dst;
    int64_t b;
    for (b = 0; b < n / 32; b++, src += 32) {
        float32x4_t v[8];
        int32x4_t q[8], s = vdupq_n_s32(0);
        float amax, d, id;
        int j;
        for (j = 0; j < 8; j++) v[j] = vld1q_f32(src + 4 * j);
        amax = infer__neon_amax32(v);
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        /* fcvtas: to nearest, ties away from zero - roundf */
        for (j = 0; j < 8; j++) {
            q[j] = vcvtaq_s32_f32(vmulq_n_f32(v[j], id));
            s = vaddq_s32(s, q[j]);
        }
        y[b].d = infer__fp32_to_fp16(d);
        y[b].s = infer__fp32_to_fp16((float)vaddvq_s32(s) * d);
        infer__neon_store32(y[b].qs, q);
    }
}

/* ---- block formats ---- */

/* 16 bytes of nibbles: low ones (values 0..15) and high ones (16..31) */
#define INFER__NIB_LO(q) vreinterpretq_s8_u8(vandq_u8((q), vdupq_n_u8(0x0f)))
#define INFER__NIB_HI(q) vreinterpretq_s8_u8(vshrq_n_u8((q), 4))

/* bit j of qh as 0x10 in byte j, for values 0..15 (lo) and 16..31 (hi) */
INFER__NEON_INLINE void infer__neon_fifth_bits(const uint8_t *qh, int8x16_t *lo, int8x16_t *hi) {
    static const uint8_t idx_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t idx_hi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t h;
    uint8x16_t hv, m = vld1q_u8(bits), f = vdupq_n_u8(0x10);
    memcpy(&h, qh, 4);
    hv = vreinterpretq_u8_u32(vdupq_n_u32(h));
    *lo = vreinterpretq_s8_u8(vandq_u8(vtstq_u8(vqtbl1q_u8(hv, vld1q_u8(idx_lo)), m), f));
    *hi = vreinterpretq_s8_u8(vandq_u8(vtstq_u8(vqtbl1q_u8(hv, vld1q_u8(idx_hi)), m), f));
}

/* int32 lane j += a[4j..4j+3] . b[4j..4j+3] without the dotprod extension
   (the same grouping as sdot, so both variants round alike) */
INFER__NEON_INLINE int32x4_t infer__neon_dot_plain(int32x4_t acc, int8x16_t a, int8x16_t b) {
    int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b)), hi = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}

/* The 32-value block kernels add up in llama.cpp's x86 order (which made
   ../shared/reference): eight float lanes, lane j holding bytes 4j..4j+3
   of each block, fused multiply-add of the block's scale, then its
   8-to-1 horizontal sum. Here lanes 0-3 are lo and 4-7 hi. The synth
   models amplify rounding, so matching the order matters there. */
INFER__NEON_INLINE float infer__neon_hsum8(float32x4_t lo, float32x4_t hi) {
    float32x4_t r = vaddq_f32(hi, lo);
    return (vgetq_lane_f32(r, 0) + vgetq_lane_f32(r, 2)) + (vgetq_lane_f32(r, 1) + vgetq_lane_f32(r, 3));
}
#define INFER__NEON_PDOT(acc, a, b) infer__neon_dot_plain((acc), (a), (b))
#define INFER__NH(x) infer__fp16_to_fp32(x)

/* A block's 32 weights as two int8x16_t, wl (values 0..15) and wh (16..31) */
#define INFER__NEON_Q8_0_W(a, wl, wh) (wl = vld1q_s8((a).qs), wh = vld1q_s8((a).qs + 16))
#define INFER__NEON_Q4_1_W(a, wl, wh) (wl = INFER__NIB_LO(vld1q_u8((a).qs)), wh = INFER__NIB_HI(vld1q_u8((a).qs)))
#define INFER__NEON_Q4_0_W(a, wl, wh)                                                                              \
    (INFER__NEON_Q4_1_W(a, wl, wh), wl = vsubq_s8(wl, vdupq_n_s8(8)), wh = vsubq_s8(wh, vdupq_n_s8(8)))
#define INFER__NEON_Q5_1_W(a, wl, wh)                                                                              \
    do {                                                                                                           \
        int8x16_t hl_, hh_;                                                                                        \
        infer__neon_fifth_bits((a).qh, &hl_, &hh_);                                                                \
        INFER__NEON_Q4_1_W(a, wl, wh);                                                                             \
        wl = vorrq_s8(wl, hl_), wh = vorrq_s8(wh, hh_);                                                            \
    } while (0)
#define INFER__NEON_Q5_0_W(a, wl, wh)                                                                              \
    do {                                                                                                           \
        INFER__NEON_Q5_1_W(a, wl, wh);                                                                             \
        wl = vsubq_s8(wl, vdupq_n_s8(16)), wh = vsubq_s8(wh, vdupq_n_s8(16));                                      \
    } while (0)
/* a block's two halves dotted with x's (DOT: sdot or its plain form), scaled by d, fused into lo and hi */
#define INFER__NEON_BLOCK_FMA(DOT, wl, wh, xq, d)                                                                  \
    lo = vfmaq_f32(lo, vcvtq_f32_s32(DOT(vdupq_n_s32(0), wl, vld1q_s8(xq))), d);                                   \
    hi = vfmaq_f32(hi, vcvtq_f32_s32(DOT(vdupq_n_s32(0), wh, vld1q_s8((xq) + 16))), d)

/* The blocks of a row (over a, x, b and nb, into lo and hi), with MINS
   after each block's products (a statement, or none) */
#define INFER__NEON_BLOCKS(WEIGHTS, DOT, MINS)                                                                     \
    for (b = 0; b < nb; b++) {                                                                                     \
        float32x4_t d = vdupq_n_f32(INFER__NH(a[b].d) * INFER__NH(x[b].d));                                        \
        int8x16_t wl, wh;                                                                                          \
        WEIGHTS(a[b], wl, wh);                                                                                     \
        INFER__NEON_BLOCK_FMA(DOT, wl, wh, x[b].qs, d);                                                            \
        MINS;                                                                                                      \
    }
/* Q8_0, Q4_0 and Q5_0 (Q8_0 activations), over n, w and xv */
#define INFER__NEON_DOT_0(BLOCK, WEIGHTS, DOT)                                                                     \
    const BLOCK *a = (const BLOCK *)w;                                                                             \
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;                                                    \
    float32x4_t lo = vdupq_n_f32(0), hi = vdupq_n_f32(0);                                                          \
    int b, nb = n / 32;                                                                                            \
    INFER__NEON_BLOCKS(WEIGHTS, DOT, )                                                                             \
    return infer__neon_hsum8(lo, hi);
/* Q4_1 and Q5_1 (Q8_1 activations): the blocks' m * s summed apart */
#define INFER__NEON_DOT_1(BLOCK, WEIGHTS, DOT)                                                                     \
    const BLOCK *a = (const BLOCK *)w;                                                                             \
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)xv;                                                    \
    float32x4_t lo = vdupq_n_f32(0), hi = vdupq_n_f32(0);                                                          \
    float ms = 0;                                                                                                  \
    int b, nb = n / 32;                                                                                            \
    INFER__NEON_BLOCKS(WEIGHTS, DOT, ms += INFER__NH(a[b].m) * INFER__NH(x[b].s))                                  \
    return infer__neon_hsum8(lo, hi) + ms;

/* The five block kernels, once with sdot and once without. */
#define INFER__NEON_BLOCK_DOT(SUF, ATTR, FMT, BODY, WEIGHTS, DOT)                                                  \
    ATTR static float infer__neon##SUF##_##FMT##_dot(int n, const void *w, const void *xv) {                       \
        BODY(infer__block_##FMT, WEIGHTS, DOT)                                                                     \
    }
#define INFER__NEON_BLOCK_KERNELS(SUF, ATTR, DOT)                                                                  \
    INFER__NEON_BLOCK_DOT(SUF, ATTR, q8_0, INFER__NEON_DOT_0, INFER__NEON_Q8_0_W, DOT)                             \
    INFER__NEON_BLOCK_DOT(SUF, ATTR, q4_0, INFER__NEON_DOT_0, INFER__NEON_Q4_0_W, DOT)                             \
    INFER__NEON_BLOCK_DOT(SUF, ATTR, q4_1, INFER__NEON_DOT_1, INFER__NEON_Q4_1_W, DOT)                             \
    INFER__NEON_BLOCK_DOT(SUF, ATTR, q5_0, INFER__NEON_DOT_0, INFER__NEON_Q5_0_W, DOT)                             \
    INFER__NEON_BLOCK_DOT(SUF, ATTR, q5_1, INFER__NEON_DOT_1, INFER__NEON_Q5_1_W, DOT)

INFER__NEON_BLOCK_KERNELS(, INFER__UNUSED, INFER__NEON_PDOT)
INFER__NEON_BLOCK_KERNELS(dp, INFER__NEON_DOTPROD, INFER__NEON_SDOT)
#undef INFER__NEON_BLOCK_KERNELS
#undef INFER__NEON_BLOCK_DOT
#undef INFER__NEON_DOT_1
#undef INFER__NEON_DOT_0
#undef INFER__NEON_BLOCKS
#undef INFER__NEON_BLOCK_FMA
#undef INFER__NEON_Q5_0_W
#undef INFER__NEON_Q5_1_W
#undef INFER__NEON_Q4_0_W
#undef INFER__NEON_Q4_1_W
#undef INFER__NEON_Q8_0_W

/* ---- K-quants and IQ4 ----
   Integer sums per super-block, scaled once in the reference's float order,
   so these give the scalar kernels' results exactly. */

static void infer__neon_q8_K_from_float(const float *x, void *dst, int64_t n) {
    infer__block_q8_K *y = (infer__block_q8_K *)dst;
    int64_t b;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        float32x4_t m = vdupq_n_f32(0);
        float amax, max = 0, iscale;
        int j, k;
        for (j = 0; j < INFER__QK_K; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
        amax = vmaxvq_f32(m);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        for (j = 0; j < INFER__QK_K; j++) /* the first value of largest magnitude */
            if (fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        iscale = -127.0f / max;
        for (j = 0; j < INFER__QK_K; j += 32) {
            int32x4_t q[8], s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0);
            for (k = 0; k < 8; k++)
                q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), iscale)), vdupq_n_s32(127));
            for (k = 0; k < 4; k++) {
                s0 = vaddq_s32(s0, q[k]);
                s1 = vaddq_s32(s1, q[k + 4]);
            }
            y[b].bsums[j / 16] = (int16_t)vaddvq_s32(s0);
            y[b].bsums[j / 16 + 1] = (int16_t)vaddvq_s32(s1);
            infer__neon_store32(y[b].qs + j, q);
        }
        y[b].d = 1 / iscale;
    }
}

static const int8_t infer__neon_iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

#define INFER__U2S(v) vreinterpretq_s8_u8(v)
#define INFER__NEON_K_KERNELS(SUF, ATTR, DOT)                                                                     \
    ATTR static float infer__neon##SUF##_q2_K_dot(int n, const void *w, const void *xv) {                        \
        const infer__block_q2_K *a = (const infer__block_q2_K *)w;                                               \
        const infer__block_q8_K *x = (const infer__block_q8_K *)xv;                                              \
        const uint8x16_t m3 = vdupq_n_u8(3);                                                                     \
        float s = 0;                                                                                             \
        int b, h, j, k;                                                                                          \
        for (b = 0; b < n / INFER__QK_K; b++) {                                                                  \
            const int8_t *y = x[b].qs;                                                                           \
            const uint8_t *sc = a[b].scales;                                                                     \
            int sumi = 0, summ = 0;                                                                              \
            for (k = 0; k < 16; k++) summ += x[b].bsums[k] * (sc[k] >> 4);                                       \
            for (h = 0; h < 2; h++) {                                                                            \
                uint8x16_t q0 = vld1q_u8(a[b].qs + 32 * h), q1 = vld1q_u8(a[b].qs + 32 * h + 16);                \
                for (j = 0; j < 4; j++, y += 32) {                                                               \
                    sumi += (sc[8 * h + 2 * j] & 0xF) *                                                          \
                                vaddvq_s32(DOT(vdupq_n_s32(0), INFER__U2S(vandq_u8(q0, m3)), vld1q_s8(y))) +    \
                            (sc[8 * h + 2 * j + 1] & 0xF) *                                                      \
                                vaddvq_s32(DOT(vdupq_n_s32(0), INFER__U2S(vandq_u8(q1, m3)), vld1q_s8(y + 16))); \
                    q0 = vshrq_n_u8(q0, 2);                                                                      \
                    q1 = vshrq_n_u8(q1, 2);                                                                      \
                }                                                                                                \
            }                                                                                                    \
            s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi - x[b].d * infer__fp16_to_fp32(a[b].dmin) * summ;   \
        }                                                                                                        \
        return s;                                                                                                \
    }                                                                                                            \
    ATTR static float infer__neon##SUF##_q3_K_dot(int n, const void *w, const void *xv) {                        \
        const infer__block_q3_K *a = (const infer__block_q3_K *)w;                                               \
        const infer__block_q8_K *x = (const infer__block_q8_K *)xv;                                              \
        const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);                                                \
        const int8x16_t k4 = vdupq_n_s8(4);                                                                      \
        float s = 0;                                                                                             \
        int b, h, j;                                                                                             \
        for (b = 0; b < n / INFER__QK_K; b++) {                                                                  \
            const int8_t *y = x[b].qs;                                                                           \
            uint8x16_t hm0 = vld1q_u8(a[b].hmask), hm1 = vld1q_u8(a[b].hmask + 16);                              \
            int sumi = 0;                                                                                        \
            for (h = 0; h < 2; h++) {                                                                            \
                uint8x16_t q0 = vld1q_u8(a[b].qs + 32 * h), q1 = vld1q_u8(a[b].qs + 32 * h + 16);                \
                for (j = 0; j < 4; j++, y += 32) {                                                               \
                    int8x16_t v0 = vsubq_s8(INFER__U2S(vorrq_u8(vandq_u8(q0, m3), vshlq_n_u8(vandq_u8(hm0, one), 2))), k4); \
                    int8x16_t v1 = vsubq_s8(INFER__U2S(vorrq_u8(vandq_u8(q1, m3), vshlq_n_u8(vandq_u8(hm1, one), 2))), k4); \
                    sumi += infer__scale_q3_K(8 * h + 2 * j, a[b].scales) *                                      \
                                vaddvq_s32(DOT(vdupq_n_s32(0), v0, vld1q_s8(y))) +                               \
                            infer__scale_q3_K(8 * h + 2 * j + 1, a[b].scales) *                                  \
                                vaddvq_s32(DOT(vdupq_n_s32(0), v1, vld1q_s8(y + 16)));                           \
                    q0 = vshrq_n_u8(q0, 2);                                                                      \
                    q1 = vshrq_n_u8(q1, 2);                                                                      \
                    hm0 = vshrq_n_u8(hm0, 1);                                                                    \
                    hm1 = vshrq_n_u8(hm1, 1);                                                                    \
                }                                                                                                \
            }                                                                                                    \
            s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi;                                                    \
        }                                                                                                        \
        return s;                                                                                                \
    }                                                                                                            \
    ATTR static float infer__neon##SUF##_q4_K_dot(int n, const void *w, const void *xv) {                        \
        const infer__block_q4_K *a = (const infer__block_q4_K *)w;                                               \
        const infer__block_q8_K *x = (const infer__block_q8_K *)xv;                                              \
        const uint8x16_t m4 = vdupq_n_u8(0x0f);                                                                  \
        float s = 0, accm = 0; /* llama.cpp's repacked Q4_K order */                                             \
        int b, j;                                                                                                \
        for (b = 0; b < n / INFER__QK_K; b++) {                                                                  \
            uint8_t sm[16];                                                                                      \
            const uint8_t *q = a[b].qs;                                                                          \
            const int8_t *y = x[b].qs;                                                                           \
            const int16_t *bs = x[b].bsums;                                                                      \
            int sumi = 0, summ = 0;                                                                              \
            infer__k4_scales(a[b].scales, sm);                                                                   \
            for (j = 0; j < 4; j++, q += 32, y += 64) {                                                          \
                uint8x16_t q0 = vld1q_u8(q), q1 = vld1q_u8(q + 16);                                              \
                int32x4_t p1 = DOT(DOT(vdupq_n_s32(0), INFER__U2S(vandq_u8(q0, m4)), vld1q_s8(y)),               \
                                   INFER__U2S(vandq_u8(q1, m4)), vld1q_s8(y + 16));                              \
                int32x4_t p2 = DOT(DOT(vdupq_n_s32(0), INFER__U2S(vshrq_n_u8(q0, 4)), vld1q_s8(y + 32)),         \
                                   INFER__U2S(vshrq_n_u8(q1, 4)), vld1q_s8(y + 48));                             \
                sumi += sm[2 * j] * vaddvq_s32(p1) + sm[2 * j + 1] * vaddvq_s32(p2);                             \
                summ += sm[8 + 2 * j] * (bs[4 * j] + bs[4 * j + 1]) +                                            \
                        sm[8 + 2 * j + 1] * (bs[4 * j + 2] + bs[4 * j + 3]);                                     \
            }                                                                                                    \
            s = fmaf((float)sumi, infer__fp16_to_fp32(a[b].d) * x[b].d, s);                                      \
            accm = fmaf((float)summ, infer__fp16_to_fp32(a[b].dmin) * x[b].d, accm);                             \
        }                                                                                                        \
        s -= accm;                                                                                                \
        return s;                                                                                                \
    }                                                                                                            \
    ATTR static float infer__neon##SUF##_q5_K_dot(int n, const void *w, const void *xv) {                        \
        const infer__block_q5_K *a = (const infer__block_q5_K *)w;                                               \
        const infer__block_q8_K *x = (const infer__block_q8_K *)xv;                                              \
        const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1), two = vdupq_n_u8(2);                        \
        float s = 0;                                                                                             \
        int b, j;                                                                                                \
        for (b = 0; b < n / INFER__QK_K; b++) {                                                                  \
            uint8_t sm[16];                                                                                      \
            const uint8_t *q = a[b].qs;                                                                          \
            const int8_t *y = x[b].qs;                                                                           \
            const int16_t *bs = x[b].bsums;                                                                      \
            uint8x16_t h0 = vld1q_u8(a[b].qh), h1 = vld1q_u8(a[b].qh + 16);                                      \
            int sumi = 0, summ = 0;                                                                              \
            infer__k4_scales(a[b].scales, sm);                                                                   \
            for (j = 0; j < 4; j++, q += 32, y += 64) {                                                          \
                uint8x16_t q0 = vld1q_u8(q), q1 = vld1q_u8(q + 16);                                              \
                uint8x16_t l0 = vorrq_u8(vandq_u8(q0, m4), vshlq_n_u8(vandq_u8(h0, one), 4));                    \
                uint8x16_t l1 = vorrq_u8(vandq_u8(q1, m4), vshlq_n_u8(vandq_u8(h1, one), 4));                    \
                uint8x16_t u0 = vorrq_u8(vshrq_n_u8(q0, 4), vshlq_n_u8(vandq_u8(h0, two), 3));                   \
                uint8x16_t u1 = vorrq_u8(vshrq_n_u8(q1, 4), vshlq_n_u8(vandq_u8(h1, two), 3));                   \
                int32x4_t p1 = DOT(DOT(vdupq_n_s32(0), INFER__U2S(l0), vld1q_s8(y)), INFER__U2S(l1), vld1q_s8(y + 16)); \
                int32x4_t p2 = DOT(DOT(vdupq_n_s32(0), INFER__U2S(u0), vld1q_s8(y + 32)), INFER__U2S(u1),        \
                                   vld1q_s8(y + 48));                                                            \
                h0 = vshrq_n_u8(h0, 2);                                                                          \
                h1 = vshrq_n_u8(h1, 2);                                                                          \
                sumi += sm[2 * j] * vaddvq_s32(p1) + sm[2 * j + 1] * vaddvq_s32(p2);                             \
                summ += sm[8 + 2 * j] * (bs[4 * j] + bs[4 * j + 1]) +                                            \
                        sm[8 + 2 * j + 1] * (bs[4 * j + 2] + bs[4 * j + 3]);                                     \
            }                                                                                                    \
            s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi - x[b].d * infer__fp16_to_fp32(a[b].dmin) * summ;   \
        }                                                                                                        \
        return s;                                                                                                \
    }                                                                                                            \
    ATTR static float infer__neon##SUF##_q6_K_dot(int n, const void *w, const void *xv) {                        \
        const infer__block_q6_K *a = (const infer__block_q6_K *)w;                                               \
        const infer__block_q8_K *x = (const infer__block_q8_K *)xv;                                              \
        const uint8x16_t m4 = vdupq_n_u8(0x0f), m2 = vdupq_n_u8(3);                                              \
        const int8x16_t k32 = vdupq_n_s8(32);                                                                    \
        float s = 0;                                                                                             \
        int b, h, k;                                                                                             \
        for (b = 0; b < n / INFER__QK_K; b++) {                                                                  \
            const int8_t *y = x[b].qs;                                                                           \
            int sumi = 0;                                                                                        \
            for (h = 0; h < 2; h++) {                                                                            \
                const uint8_t *ql = a[b].ql + 64 * h;                                                            \
                uint8x16_t L[4], H0 = vld1q_u8(a[b].qh + 32 * h), H1 = vld1q_u8(a[b].qh + 32 * h + 16);          \
                L[0] = vld1q_u8(ql), L[1] = vld1q_u8(ql + 16), L[2] = vld1q_u8(ql + 32), L[3] = vld1q_u8(ql + 48); \
                for (k = 0; k < 4; k++, y += 32) {                                                               \
                    uint8x16_t lo0 = k < 2 ? vandq_u8(L[2 * k], m4) : vshrq_n_u8(L[2 * (k - 2)], 4);             \
                    uint8x16_t lo1 = k < 2 ? vandq_u8(L[2 * k + 1], m4) : vshrq_n_u8(L[2 * (k - 2) + 1], 4);     \
                    int8x16_t v0 = vsubq_s8(INFER__U2S(vorrq_u8(lo0, vshlq_n_u8(vandq_u8(H0, m2), 4))), k32);    \
                    int8x16_t v1 = vsubq_s8(INFER__U2S(vorrq_u8(lo1, vshlq_n_u8(vandq_u8(H1, m2), 4))), k32);    \
                    sumi += a[b].scales[8 * h + 2 * k] * vaddvq_s32(DOT(vdupq_n_s32(0), v0, vld1q_s8(y))) +      \
                            a[b].scales[8 * h + 2 * k + 1] * vaddvq_s32(DOT(vdupq_n_s32(0), v1, vld1q_s8(y + 16))); \
                    H0 = vshrq_n_u8(H0, 2);                                                                      \
                    H1 = vshrq_n_u8(H1, 2);                                                                      \
                }                                                                                                \
            }                                                                                                    \
            s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi;                                                    \
        }                                                                                                        \
        return s;                                                                                                \
    }                                                                                                            \
    ATTR static float infer__neon##SUF##_iq4_nl_dot(int n, const void *w, const void *xv) {                      \
        const infer__block_iq4_nl *a = (const infer__block_iq4_nl *)w;                                           \
        const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;                                              \
        const int8x16_t grid = vld1q_s8(infer__neon_iq4_grid);                                                   \
        float32x4_t s0 = vdupq_n_f32(0);                                                                         \
        int b, nb = n / 32;                                                                                      \
        for (b = 0; b < nb; b++) {                                                                               \
            uint8x16_t q = vld1q_u8(a[b].qs);                                                                    \
            int32x4_t p = DOT(DOT(vdupq_n_s32(0), vqtbl1q_s8(grid, vandq_u8(q, vdupq_n_u8(0x0f))), vld1q_s8(x[b].qs)), \
                              vqtbl1q_s8(grid, vshrq_n_u8(q, 4)), vld1q_s8(x[b].qs + 16));                       \
            s0 = vmlaq_n_f32(s0, vcvtq_f32_s32(p), infer__fp16_to_fp32(a[b].d) * infer__fp16_to_fp32(x[b].d));   \
        }                                                                                                        \
        return vaddvq_f32(s0);                                                                                   \
    }                                                                                                            \
    ATTR static float infer__neon##SUF##_mxfp4_dot(int n, const void *w, const void *xv) {                       \
        const infer__block_mxfp4 *a = (const infer__block_mxfp4 *)w;                                             \
        const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;                                              \
        const int8x16_t grid = vld1q_s8(infer__mxfp4_values);                                                    \
        float s = 0; /* each block's sum scaled and added in order, as the plain C (2^127 scales) */            \
        int b, nb = n / 32;                                                                                      \
        for (b = 0; b < nb; b++) {                                                                               \
            uint8x16_t q = vld1q_u8(a[b].qs);                                                                    \
            int32x4_t p = DOT(DOT(vdupq_n_s32(0), vqtbl1q_s8(grid, vandq_u8(q, vdupq_n_u8(0x0f))), vld1q_s8(x[b].qs)), \
                              vqtbl1q_s8(grid, vshrq_n_u8(q, 4)), vld1q_s8(x[b].qs + 16));                       \
            s += infer__fp16_to_fp32(x[b].d) * infer__e8m0_half(a[b].e) * (float)vaddvq_s32(p);                  \
        }                                                                                                        \
        return s;                                                                                                \
    }                                                                                                            \
    ATTR static float infer__neon##SUF##_iq4_xs_dot(int n, const void *w, const void *xv) {                      \
        const infer__block_iq4_xs *a = (const infer__block_iq4_xs *)w;                                           \
        const infer__block_q8_K *x = (const infer__block_q8_K *)xv;                                              \
        const int8x16_t grid = vld1q_s8(infer__neon_iq4_grid);                                                   \
        float s = 0;                                                                                             \
        int b, k;                                                                                                \
        for (b = 0; b < n / INFER__QK_K; b++) {                                                                  \
            int sumi = 0;                                                                                        \
            for (k = 0; k < 8; k++) {                                                                            \
                int ls = (((a[b].scales_l[k / 2] >> (4 * (k % 2))) & 0xF) | ((a[b].scales_h >> (2 * k)) & 3) << 4) - 32; \
                uint8x16_t q = vld1q_u8(a[b].qs + 16 * k);                                                       \
                int32x4_t p = DOT(DOT(vdupq_n_s32(0), vqtbl1q_s8(grid, vandq_u8(q, vdupq_n_u8(0x0f))),           \
                                      vld1q_s8(x[b].qs + 32 * k)),                                               \
                                  vqtbl1q_s8(grid, vshrq_n_u8(q, 4)), vld1q_s8(x[b].qs + 32 * k + 16));          \
                sumi += ls * vaddvq_s32(p);                                                                      \
            }                                                                                                    \
            s += infer__fp16_to_fp32(a[b].d) * x[b].d * sumi;                                                    \
        }                                                                                                        \
        return s;                                                                                                \
    }

INFER__NEON_K_KERNELS(, INFER__UNUSED, INFER__NEON_PDOT)
INFER__NEON_K_KERNELS(dp, INFER__NEON_DOTPROD, INFER__NEON_SDOT)

/* ---- i8mm: prompt tiles with smmla ----
   smmla multiplies a 2x8 int8 matrix by the transpose of another 2x8 one
   into a 2x2 int32 tile: with two weight rows in one operand and two
   tokens' activations in the other, one instruction gives the four dot
   products (row, token) of 8 values. The tiles below take rows in pairs
   and tokens in pairs (an odd last row or token is paired with itself and
   the copy's results dropped), a row pair's blocks unpacked once for up to
   INFER__NEON_MM_TOK tokens. */
#define INFER__NEON_MM_TOK 8
#define INFER__NEON_I8MM INFER__TARGET_I8MM

/* rows a and b (16 int8 each) as two smmla operands: a[0..7] b[0..7] and
   a[8..15] b[8..15] */
INFER__NEON_INLINE void infer__neon_pair_rows(int8x16_t a, int8x16_t b, int8x16_t out[2]) {
    int64x2_t a64 = vreinterpretq_s64_s8(a), b64 = vreinterpretq_s64_s8(b);
    out[0] = vreinterpretq_s8_s64(vzip1q_s64(a64, b64));
    out[1] = vreinterpretq_s8_s64(vzip2q_s64(a64, b64));
}

/* the 2x2 tile of 32 values: w[0..3] two rows' paired operands, x[0..3]
   two tokens'; lanes (row 0, token 0), (0, 1), (1, 0), (1, 1) */
#define INFER__NEON_MM32(w, x)                                                                                      \
    INFER__NEON_MMLA(INFER__NEON_MMLA(INFER__NEON_MMLA(INFER__NEON_MMLA(vdupq_n_s32(0), (w)[0], (x)[0]), (w)[1], (x)[1]), \
                                      (w)[2], (x)[2]),                                                                 \
                     (w)[3], (x)[3])

/* rows r, r + 1 of a gemm's output tile (tokens t, t + 1 in its lanes) to
   y, the copies of an odd last row or token left out */
INFER__NEON_INLINE void infer__neon_mm_store(float *y, size_t ldy, int r, int n_rows, int t, int n_tok, float32x4_t v) {
    float lane[4];
    vst1q_f32(lane, v);
    y[(size_t)t * ldy + r] = lane[0];
    if (t + 1 < n_tok) y[(size_t)(t + 1) * ldy + r] = lane[1];
    if (r + 1 < n_rows) {
        y[(size_t)t * ldy + r + 1] = lane[2];
        if (t + 1 < n_tok) y[(size_t)(t + 1) * ldy + r + 1] = lane[3];
    }
}

/* The 32-value block formats. Each block's integer dot comes whole out of
   smmla, so it is scaled once per block, not per four products as in
   vec_dot (llama.cpp's x86 order): the same products summed otherwise,
   which is why contexts that match llama.cpp leave these tiles
   (gemm_unordered). DECODE(block, lo, hi) gives a weight block's 32 values
   as int8 (what vec_dot dots with the activations) and WD(block) its scale
   (the f16 d, or MXFP4's power of two); a format with a min (Q4_1, Q5_1)
   adds WMIN(weight block) * XSUM(activation block) per block as vec_dot
   does (the others: 0). Each lane is one (row, token) pair scaled and
   added block by block, so MXFP4's largest scales overflow only where its
   vec_dot does. */
#define INFER__NEON_MM_BLOCK_GEMM(NAME, WBLK, XBLK, DECODE, WD, WMIN, XSUM)                                         \
    INFER__NEON_I8MM static void NAME(int n, const void *w, size_t w_stride, int n_rows, const void *xv,          \
                                      size_t x_stride, int n_tok, float *y, size_t ldy) {                          \
        int nb = n / 32, r, t0, b, p, i;                                                                           \
        for (r = 0; r < n_rows; r += 2) {                                                                          \
            const WBLK *w0 = (const WBLK *)((const uint8_t *)w + (size_t)r * w_stride);                           \
            const WBLK *w1 = r + 1 < n_rows ? (const WBLK *)((const uint8_t *)w0 + w_stride) : w0;                 \
            for (t0 = 0; t0 < n_tok; t0 += INFER__NEON_MM_TOK) {                                                   \
                int nt = INFER__MIN(INFER__NEON_MM_TOK, n_tok - t0), np = (nt + 1) / 2;                            \
                const XBLK *xt[INFER__NEON_MM_TOK];                                                                \
                float32x4_t acc[INFER__NEON_MM_TOK / 2], ms[INFER__NEON_MM_TOK / 2];                               \
                for (i = 0; i < 2 * np; i++)                                                                       \
                    xt[i] = (const XBLK *)((const uint8_t *)xv + (size_t)(t0 + INFER__MIN(i, nt - 1)) * x_stride); \
                for (p = 0; p < np; p++) acc[p] = ms[p] = vdupq_n_f32(0);                                          \
                for (b = 0; b < nb; b++) {                                                                         \
                    int8x16_t lo0, hi0, lo1, hi1, wp[4];                                                           \
                    float32x4_t wd = vcombine_f32(vdup_n_f32(WD(&w0[b])), vdup_n_f32(WD(&w1[b])));                 \
                    float32x4_t wm = vcombine_f32(vdup_n_f32(WMIN(&w0[b])), vdup_n_f32(WMIN(&w1[b])));             \
                    DECODE(&w0[b], lo0, hi0);                                                                      \
                    DECODE(&w1[b], lo1, hi1);                                                                      \
                    infer__neon_pair_rows(lo0, lo1, wp);                                                           \
                    infer__neon_pair_rows(hi0, hi1, wp + 2);                                                       \
                    for (p = 0; p < np; p++) {                                                                     \
                        const XBLK *xa = &xt[2 * p][b], *xb = &xt[2 * p + 1][b];                                   \
                        int8x16_t xp[4];                                                                           \
                        float32x2_t xd = {INFER__NH(xa->d), INFER__NH(xb->d)}, xs = {XSUM(xa), XSUM(xb)};          \
                        infer__neon_pair_rows(vld1q_s8(xa->qs), vld1q_s8(xb->qs), xp);                             \
                        infer__neon_pair_rows(vld1q_s8(xa->qs + 16), vld1q_s8(xb->qs + 16), xp + 2);               \
                        acc[p] = vfmaq_f32(acc[p], vcvtq_f32_s32(INFER__NEON_MM32(wp, xp)),                        \
                                           vmulq_f32(wd, vcombine_f32(xd, xd)));                                   \
                        ms[p] = vmlaq_f32(ms[p], wm, vcombine_f32(xs, xs));                                        \
                    }                                                                                              \
                }                                                                                                  \
                for (p = 0; p < np; p++)                                                                           \
                    infer__neon_mm_store(y, ldy, r, n_rows, t0 + 2 * p, n_tok, vaddq_f32(acc[p], ms[p]));          \
            }                                                                                                      \
        }                                                                                                          \
    }
#define INFER__MM_NOMIN(blk) 0.0f
#define INFER__MM_D(blk) INFER__NH((blk)->d)
#define INFER__MM_E8M0(blk) infer__e8m0_half((blk)->e)
#define INFER__MM_MIN(blk) INFER__NH((blk)->m)
#define INFER__MM_XSUM(blk) INFER__NH((blk)->s)
#define INFER__MM_Q8_0(a, lo, hi) (lo = vld1q_s8((a)->qs), hi = vld1q_s8((a)->qs + 16))
#define INFER__MM_Q4_0(a, lo, hi)                                                                                  \
    (lo = vsubq_s8(INFER__NIB_LO(vld1q_u8((a)->qs)), vdupq_n_s8(8)), hi = vsubq_s8(INFER__NIB_HI(vld1q_u8((a)->qs)), vdupq_n_s8(8)))
#define INFER__MM_Q4_1(a, lo, hi) (lo = INFER__NIB_LO(vld1q_u8((a)->qs)), hi = INFER__NIB_HI(vld1q_u8((a)->qs)))
#define INFER__MM_Q5_0(a, lo, hi)                                                                                  \
    (infer__neon_fifth_bits((a)->qh, &lo, &hi), lo = vsubq_s8(vorrq_s8(INFER__NIB_LO(vld1q_u8((a)->qs)), lo), vdupq_n_s8(16)), \
     hi = vsubq_s8(vorrq_s8(INFER__NIB_HI(vld1q_u8((a)->qs)), hi), vdupq_n_s8(16)))
#define INFER__MM_Q5_1(a, lo, hi)                                                                                  \
    (infer__neon_fifth_bits((a)->qh, &lo, &hi), lo = vorrq_s8(INFER__NIB_LO(vld1q_u8((a)->qs)), lo),                 \
     hi = vorrq_s8(INFER__NIB_HI(vld1q_u8((a)->qs)), hi))
/* IQ4_NL and MXFP4: each nibble an index into a table of 16 int8 values */
#define INFER__MM_NIB_TABLE(table, a, lo, hi)                                                                      \
    (lo = vqtbl1q_s8(vld1q_s8(table), vandq_u8(vld1q_u8((a)->qs), vdupq_n_u8(0x0f))),                              \
     hi = vqtbl1q_s8(vld1q_s8(table), vshrq_n_u8(vld1q_u8((a)->qs), 4)))
#define INFER__MM_IQ4_NL(a, lo, hi) INFER__MM_NIB_TABLE(infer__neon_iq4_grid, a, lo, hi)
#define INFER__MM_MXFP4(a, lo, hi) INFER__MM_NIB_TABLE(infer__mxfp4_values, a, lo, hi)
INFER__NEON_MM_BLOCK_GEMM(infer__neonmm_q8_0_gemm, infer__block_q8_0, infer__block_q8_0, INFER__MM_Q8_0, INFER__MM_D,
                          INFER__MM_NOMIN, INFER__MM_NOMIN)
INFER__NEON_MM_BLOCK_GEMM(infer__neonmm_q4_0_gemm, infer__block_q4_0, infer__block_q8_0, INFER__MM_Q4_0, INFER__MM_D,
                          INFER__MM_NOMIN, INFER__MM_NOMIN)
INFER__NEON_MM_BLOCK_GEMM(infer__neonmm_q4_1_gemm, infer__block_q4_1, infer__block_q8_1, INFER__MM_Q4_1, INFER__MM_D,
                          INFER__MM_MIN, INFER__MM_XSUM)
INFER__NEON_MM_BLOCK_GEMM(infer__neonmm_q5_0_gemm, infer__block_q5_0, infer__block_q8_0, INFER__MM_Q5_0, INFER__MM_D,
                          INFER__MM_NOMIN, INFER__MM_NOMIN)
INFER__NEON_MM_BLOCK_GEMM(infer__neonmm_q5_1_gemm, infer__block_q5_1, infer__block_q8_1, INFER__MM_Q5_1, INFER__MM_D,
                          INFER__MM_MIN, INFER__MM_XSUM)
INFER__NEON_MM_BLOCK_GEMM(infer__neonmm_iq4_nl_gemm, infer__block_iq4_nl, infer__block_q8_0, INFER__MM_IQ4_NL, INFER__MM_D,
                          INFER__MM_NOMIN, INFER__MM_NOMIN)
INFER__NEON_MM_BLOCK_GEMM(infer__neonmm_mxfp4_gemm, infer__block_mxfp4, infer__block_q8_0, INFER__MM_MXFP4, INFER__MM_E8M0,
                          INFER__MM_NOMIN, INFER__MM_NOMIN)
#undef INFER__NEON_MM_BLOCK_GEMM
#undef INFER__MM_NOMIN
#undef INFER__MM_D
#undef INFER__MM_E8M0
#undef INFER__MM_MIN
#undef INFER__MM_XSUM
#undef INFER__MM_Q8_0
#undef INFER__MM_Q4_0
#undef INFER__MM_Q4_1
#undef INFER__MM_Q5_0
#undef INFER__MM_Q5_1
#undef INFER__MM_IQ4_NL
#undef INFER__MM_MXFP4
#undef INFER__MM_NIB_TABLE

/* The K-quants and IQ4_XS: a super-block unpacked to 256 int8 values, a
   scale per 16 values and (Q2_K, Q4_K, Q5_K) a min per 16, which give
   vec_dot's integers sumi = sum_g sc[g] (q . y over group g) and
   summ = sum_g mn[g] bsums[g]; these are scaled as vec_dot scales them,
   so the tiles give vec_dot's results exactly. */
typedef struct infer__neon_kblock {
    int8_t q[INFER__QK_K];
    int32_t sc[16];
    int16_t mn[16];
    float d, dmin;
} infer__neon_kblock;
enum { INFER__NK_Q2_K, INFER__NK_Q3_K, INFER__NK_Q4_K, INFER__NK_Q5_K, INFER__NK_Q6_K, INFER__NK_IQ4_XS };

INFER__NEON_INLINE void infer__neon_unpack_q2_K(const infer__block_q2_K *a, infer__neon_kblock *o) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    int h, j, g;
    for (h = 0; h < 2; h++) {
        uint8x16_t q0 = vld1q_u8(a->qs + 32 * h), q1 = vld1q_u8(a->qs + 32 * h + 16);
        for (j = 0; j < 4; j++) {
            vst1q_s8(o->q + 128 * h + 32 * j, INFER__U2S(vandq_u8(q0, m3)));
            vst1q_s8(o->q + 128 * h + 32 * j + 16, INFER__U2S(vandq_u8(q1, m3)));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
        }
    }
    for (g = 0; g < 16; g++) o->sc[g] = a->scales[g] & 0xF, o->mn[g] = (int16_t)(a->scales[g] >> 4);
    o->d = infer__fp16_to_fp32(a->d), o->dmin = infer__fp16_to_fp32(a->dmin);
}

INFER__NEON_INLINE void infer__neon_unpack_q3_K(const infer__block_q3_K *a, infer__neon_kblock *o) {
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    const int8x16_t k4 = vdupq_n_s8(4);
    uint8x16_t hm0 = vld1q_u8(a->hmask), hm1 = vld1q_u8(a->hmask + 16);
    int h, j, g;
    for (h = 0; h < 2; h++) {
        uint8x16_t q0 = vld1q_u8(a->qs + 32 * h), q1 = vld1q_u8(a->qs + 32 * h + 16);
        for (j = 0; j < 4; j++) {
            vst1q_s8(o->q + 128 * h + 32 * j,
                     vsubq_s8(INFER__U2S(vorrq_u8(vandq_u8(q0, m3), vshlq_n_u8(vandq_u8(hm0, one), 2))), k4));
            vst1q_s8(o->q + 128 * h + 32 * j + 16,
                     vsubq_s8(INFER__U2S(vorrq_u8(vandq_u8(q1, m3), vshlq_n_u8(vandq_u8(hm1, one), 2))), k4));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
            hm0 = vshrq_n_u8(hm0, 1);
            hm1 = vshrq_n_u8(hm1, 1);
        }
    }
    for (g = 0; g < 16; g++) o->sc[g] = infer__scale_q3_K(g, a->scales), o->mn[g] = 0;
    o->d = infer__fp16_to_fp32(a->d), o->dmin = 0;
}

/* Q4_K and Q5_K (qh: Q5_K's fifth bits, or NULL) */
INFER__NEON_INLINE void infer__neon_unpack_q45_K(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                                 infer__neon_kblock *o) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1), two = vdupq_n_u8(2);
    uint8x16_t h0 = qh ? vld1q_u8(qh) : vdupq_n_u8(0), h1 = qh ? vld1q_u8(qh + 16) : vdupq_n_u8(0);
    uint8_t sm[16];
    int j, g;
    for (j = 0; j < 4; j++) {
        uint8x16_t q0 = vld1q_u8(qs + 32 * j), q1 = vld1q_u8(qs + 32 * j + 16);
        vst1q_s8(o->q + 64 * j, INFER__U2S(vorrq_u8(vandq_u8(q0, m4), vshlq_n_u8(vandq_u8(h0, one), 4))));
        vst1q_s8(o->q + 64 * j + 16, INFER__U2S(vorrq_u8(vandq_u8(q1, m4), vshlq_n_u8(vandq_u8(h1, one), 4))));
        vst1q_s8(o->q + 64 * j + 32, INFER__U2S(vorrq_u8(vshrq_n_u8(q0, 4), vshlq_n_u8(vandq_u8(h0, two), 3))));
        vst1q_s8(o->q + 64 * j + 48, INFER__U2S(vorrq_u8(vshrq_n_u8(q1, 4), vshlq_n_u8(vandq_u8(h1, two), 3))));
        h0 = vshrq_n_u8(h0, 2);
        h1 = vshrq_n_u8(h1, 2);
    }
    infer__k4_scales(scales, sm);
    for (g = 0; g < 16; g++) o->sc[g] = sm[g / 2], o->mn[g] = sm[8 + g / 2];
}

INFER__NEON_INLINE void infer__neon_unpack_q6_K(const infer__block_q6_K *a, infer__neon_kblock *o) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m2 = vdupq_n_u8(3);
    const int8x16_t k32 = vdupq_n_s8(32);
    int h, k, g;
    for (h = 0; h < 2; h++) {
        const uint8_t *ql = a->ql + 64 * h;
        uint8x16_t L[4], H0 = vld1q_u8(a->qh + 32 * h), H1 = vld1q_u8(a->qh + 32 * h + 16);
        L[0] = vld1q_u8(ql), L[1] = vld1q_u8(ql + 16), L[2] = vld1q_u8(ql + 32), L[3] = vld1q_u8(ql + 48);
        for (k = 0; k < 4; k++) {
            uint8x16_t lo0 = k < 2 ? vandq_u8(L[2 * k], m4) : vshrq_n_u8(L[2 * (k - 2)], 4);
            uint8x16_t lo1 = k < 2 ? vandq_u8(L[2 * k + 1], m4) : vshrq_n_u8(L[2 * (k - 2) + 1], 4);
            vst1q_s8(o->q + 128 * h + 32 * k, vsubq_s8(INFER__U2S(vorrq_u8(lo0, vshlq_n_u8(vandq_u8(H0, m2), 4))), k32));
            vst1q_s8(o->q + 128 * h + 32 * k + 16, vsubq_s8(INFER__U2S(vorrq_u8(lo1, vshlq_n_u8(vandq_u8(H1, m2), 4))), k32));
            H0 = vshrq_n_u8(H0, 2);
            H1 = vshrq_n_u8(H1, 2);
        }
    }
    for (g = 0; g < 16; g++) o->sc[g] = a->scales[g], o->mn[g] = 0;
    o->d = infer__fp16_to_fp32(a->d), o->dmin = 0;
}

INFER__NEON_INLINE void infer__neon_unpack_iq4_xs(const infer__block_iq4_xs *a, infer__neon_kblock *o) {
    const int8x16_t grid = vld1q_s8(infer__neon_iq4_grid);
    int k;
    for (k = 0; k < 8; k++) {
        uint8x16_t q = vld1q_u8(a->qs + 16 * k);
        int ls = (((a->scales_l[k / 2] >> (4 * (k % 2))) & 0xF) | ((a->scales_h >> (2 * k)) & 3) << 4) - 32;
        vst1q_s8(o->q + 32 * k, vqtbl1q_s8(grid, vandq_u8(q, vdupq_n_u8(0x0f))));
        vst1q_s8(o->q + 32 * k + 16, vqtbl1q_s8(grid, vshrq_n_u8(q, 4)));
        o->sc[2 * k] = o->sc[2 * k + 1] = ls;
        o->mn[2 * k] = o->mn[2 * k + 1] = 0;
    }
    o->d = infer__fp16_to_fp32(a->d), o->dmin = 0;
}

INFER__NEON_INLINE void infer__neon_unpack_k(int kind, const uint8_t *blk, infer__neon_kblock *o) {
    switch (kind) {
    case INFER__NK_Q2_K: infer__neon_unpack_q2_K((const infer__block_q2_K *)(const void *)blk, o); break;
    case INFER__NK_Q3_K: infer__neon_unpack_q3_K((const infer__block_q3_K *)(const void *)blk, o); break;
    case INFER__NK_Q4_K: {
        const infer__block_q4_K *a = (const infer__block_q4_K *)(const void *)blk;
        infer__neon_unpack_q45_K(a->scales, a->qs, NULL, o);
        o->d = infer__fp16_to_fp32(a->d), o->dmin = infer__fp16_to_fp32(a->dmin);
        break;
    }
    case INFER__NK_Q5_K: {
        const infer__block_q5_K *a = (const infer__block_q5_K *)(const void *)blk;
        infer__neon_unpack_q45_K(a->scales, a->qs, a->qh, o);
        o->d = infer__fp16_to_fp32(a->d), o->dmin = infer__fp16_to_fp32(a->dmin);
        break;
    }
    case INFER__NK_Q6_K: infer__neon_unpack_q6_K((const infer__block_q6_K *)(const void *)blk, o); break;
    default: infer__neon_unpack_iq4_xs((const infer__block_iq4_xs *)(const void *)blk, o); break;
    }
}

INFER__NEON_INLINE int infer__neon_dot16_s16(const int16_t *a, const int16_t *b) {
    int16x8_t a0 = vld1q_s16(a), a1 = vld1q_s16(a + 8), b0 = vld1q_s16(b), b1 = vld1q_s16(b + 8);
    int32x4_t s = vmull_s16(vget_low_s16(a0), vget_low_s16(b0));
    s = vmlal_high_s16(s, a0, b0);
    s = vmlal_s16(s, vget_low_s16(a1), vget_low_s16(b1));
    return vaddvq_s32(vmlal_high_s16(s, a1, b1));
}

/* the block's integers into the running sums, in vec_dot's float order
   (accm: Q4_K's mins, a chain of their own) */
INFER__NEON_INLINE void infer__neon_k_scale(int kind, float *s, float *accm, int sumi, int summ, float xd,
                                            const infer__neon_kblock *o) {
    switch (kind) {
    case INFER__NK_Q2_K:
    case INFER__NK_Q5_K: *s += xd * o->d * sumi - xd * o->dmin * summ; break;
    case INFER__NK_Q4_K:
        *s = fmaf((float)sumi, o->d * xd, *s);
        *accm = fmaf((float)summ, o->dmin * xd, *accm);
        break;
    case INFER__NK_IQ4_XS: *s += o->d * xd * sumi; break;
    default: *s += xd * o->d * sumi; break;
    }
}

INFER__NEON_I8MM INFER__FORCE_INLINE void
infer__neonmm_k_gemm(int kind, size_t block_bytes, int n, const void *w, size_t w_stride, int n_rows, const void *xv,
                     size_t x_stride, int n_tok, float *y, size_t ldy) {
    int nb = n / INFER__QK_K, r, t0, b, p, i, g;
    int has_mins = kind == INFER__NK_Q2_K || kind == INFER__NK_Q4_K || kind == INFER__NK_Q5_K;
    infer__neon_kblock kb[2];
    int8x16_t wp[32];
    int32x4_t sc[16];
    for (r = 0; r < n_rows; r += 2) {
        const uint8_t *w0 = (const uint8_t *)w + (size_t)r * w_stride, *w1 = r + 1 < n_rows ? w0 + w_stride : w0;
        for (t0 = 0; t0 < n_tok; t0 += INFER__NEON_MM_TOK) {
            int nt = INFER__MIN(INFER__NEON_MM_TOK, n_tok - t0), np = (nt + 1) / 2;
            const infer__block_q8_K *xt[INFER__NEON_MM_TOK];
            float s[INFER__NEON_MM_TOK][2], accm[INFER__NEON_MM_TOK][2];
            for (i = 0; i < 2 * np; i++) {
                xt[i] = (const infer__block_q8_K *)((const uint8_t *)xv + (size_t)(t0 + INFER__MIN(i, nt - 1)) * x_stride);
                s[i][0] = s[i][1] = accm[i][0] = accm[i][1] = 0;
            }
            for (b = 0; b < nb; b++) {
                infer__neon_unpack_k(kind, w0 + (size_t)b * block_bytes, &kb[0]);
                infer__neon_unpack_k(kind, w1 + (size_t)b * block_bytes, &kb[1]);
                for (g = 0; g < 16; g++) {
                    int32_t s4[4];
                    s4[0] = s4[1] = kb[0].sc[g], s4[2] = s4[3] = kb[1].sc[g];
                    sc[g] = vld1q_s32(s4);
                    infer__neon_pair_rows(vld1q_s8(kb[0].q + 16 * g), vld1q_s8(kb[1].q + 16 * g), wp + 2 * g);
                }
                for (p = 0; p < np; p++) {
                    const infer__block_q8_K *x2[2];
                    int32x4_t sumi = vdupq_n_s32(0);
                    int32_t lane[4];
                    int rr, tt;
                    x2[0] = &xt[2 * p][b], x2[1] = &xt[2 * p + 1][b];
                    for (g = 0; g < 16; g++) {
                        int8x16_t xp[2];
                        infer__neon_pair_rows(vld1q_s8(x2[0]->qs + 16 * g), vld1q_s8(x2[1]->qs + 16 * g), xp);
                        sumi = vmlaq_s32(sumi, INFER__NEON_MMLA(INFER__NEON_MMLA(vdupq_n_s32(0), wp[2 * g], xp[0]), wp[2 * g + 1], xp[1]),
                                         sc[g]);
                    }
                    vst1q_s32(lane, sumi);
                    for (rr = 0; rr < 2; rr++)
                        for (tt = 0; tt < 2; tt++)
                            infer__neon_k_scale(kind, &s[2 * p + tt][rr], &accm[2 * p + tt][rr], lane[2 * rr + tt],
                                                has_mins ? infer__neon_dot16_s16(kb[rr].mn, x2[tt]->bsums) : 0,
                                                x2[tt]->d, &kb[rr]);
                }
            }
            for (i = 0; i < nt; i++) {
                y[(size_t)(t0 + i) * ldy + r] = s[i][0] - accm[i][0];
                if (r + 1 < n_rows) y[(size_t)(t0 + i) * ldy + r + 1] = s[i][1] - accm[i][1];
            }
        }
    }
}
#define INFER__NEON_MM_K_GEMM(NAME, KIND, BLK)                                                                       \
    INFER__NEON_I8MM static void NAME(int n, const void *w, size_t w_stride, int n_rows, const void *x,            \
                                      size_t x_stride, int n_tok, float *y, size_t ldy) {                          \
        infer__neonmm_k_gemm(KIND, sizeof(BLK), n, w, w_stride, n_rows, x, x_stride, n_tok, y, ldy);              \
    }
INFER__NEON_MM_K_GEMM(infer__neonmm_q2_K_gemm, INFER__NK_Q2_K, infer__block_q2_K)
INFER__NEON_MM_K_GEMM(infer__neonmm_q3_K_gemm, INFER__NK_Q3_K, infer__block_q3_K)
INFER__NEON_MM_K_GEMM(infer__neonmm_q4_K_gemm, INFER__NK_Q4_K, infer__block_q4_K)
INFER__NEON_MM_K_GEMM(infer__neonmm_q5_K_gemm, INFER__NK_Q5_K, infer__block_q5_K)
INFER__NEON_MM_K_GEMM(infer__neonmm_q6_K_gemm, INFER__NK_Q6_K, infer__block_q6_K)
INFER__NEON_MM_K_GEMM(infer__neonmm_iq4_xs_gemm, INFER__NK_IQ4_XS, infer__block_iq4_xs)
#undef INFER__NEON_MM_K_GEMM
#undef INFER__NEON_MM32
#undef INFER__NEON_K_KERNELS
#undef INFER__U2S
#undef INFER__NEON_PDOT
#undef INFER__NIB_LO
#undef INFER__NIB_HI
#undef INFER__NH


/* ---- the recurrent layers' sums, in llama.cpp's NEON order ---- */

/* ggml's fold of its four 4-lane accumulators: (0 + 2) + (1 + 3), then
   vaddvq_f32's pairs */
INFER__NEON_INLINE float infer__neon_fold4x4(float32x4_t s0, float32x4_t s1, float32x4_t s2, float32x4_t s3) {
    return vaddvq_f32(vaddq_f32(vaddq_f32(s0, s2), vaddq_f32(s1, s3)));
}

/* ggml_vec_dot_f32: fused sums over each 16, the rest in float */
static float infer__neon_f32_dot_ordered(const float *x, const float *y, int n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    float sum;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(x + i), vld1q_f32(y + i));
        s1 = vfmaq_f32(s1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    sum = infer__neon_fold4x4(s0, s1, s2, s3);
    for (; i < n; i++) {
        float p = x[i] * y[i];
        sum += p;
    }
    return sum;
}

/* ggml_vec_mad_f32: y += x v, each value fused */
static void infer__neon_f32_mad(float *y, const float *x, float v, int n) {
    float32x4_t vv = vdupq_n_f32(v);
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), vld1q_f32(x + i), vv));
    for (; i < n; i++) y[i] = vgetq_lane_f32(vfmaq_f32(vdupq_n_f32(y[i]), vdupq_n_f32(x[i]), vv), 0);
}

/* a row of ggml_ssm_scan: s = s0 dA + B x_dt, s . C fused by 16 */
static float infer__neon_ssm_row(float *s, const float *s0, const float *B, const float *C, float dA, float x_dt, int n) {
    float32x4_t acc[4], va = vdupq_n_f32(dA), vx = vdupq_n_f32(x_dt);
    float sum;
    int i = 0, j;
    for (j = 0; j < 4; j++) acc[j] = vdupq_n_f32(0.0f);
    for (; i + 16 <= n; i += 16)
        for (j = 0; j < 4; j++) {
            int at = i + 4 * j;
            float32x4_t a = s0 ? vmulq_f32(vld1q_f32(s0 + at), va) : vdupq_n_f32(0.0f);
            a = vaddq_f32(a, vmulq_f32(vld1q_f32(B + at), vx));
            acc[j] = vfmaq_f32(acc[j], a, vld1q_f32(C + at));
            vst1q_f32(s + at, a);
        }
    sum = infer__neon_fold4x4(acc[0], acc[1], acc[2], acc[3]);
    for (; i < n; i++) {
        float a = s0 ? s0[i] * dA : 0.0f, b = B[i] * x_dt, p;
        s[i] = a + b;
        p = s[i] * C[i];
        sum += p;
    }
    return sum;
}
/* the chunked scans' F32 product: 4 rows of c by 8 columns in registers,
   the columns past the last 8 one at a time, each element's sum fused in p
   order; a block past the last row repeats it, unstored */
static void infer__neon_f32_gemm(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n, int k,
                                 int acc) {
    int i, j, p, r;
    for (i = 0; i < m; i += 4) {
        const float *ar[4];
        float *cr[4];
        int nr = infer__f32_gemm_rows4(a, lda, c, ldc, i, m, ar, cr);
        for (j = 0; j + 8 <= n; j += 8) {
            float32x4_t c0[4], c1[4];
            for (r = 0; r < 4; r++) {
                c0[r] = acc ? vld1q_f32(cr[r] + j) : vdupq_n_f32(0.0f);
                c1[r] = acc ? vld1q_f32(cr[r] + j + 4) : vdupq_n_f32(0.0f);
            }
            for (p = 0; p < k; p++) {
                const float *bp = b + (size_t)p * ldb + j;
                float32x4_t b0 = vld1q_f32(bp), b1 = vld1q_f32(bp + 4);
                for (r = 0; r < 4; r++) {
                    c0[r] = vfmaq_n_f32(c0[r], b0, ar[r][p]);
                    c1[r] = vfmaq_n_f32(c1[r], b1, ar[r][p]);
                }
            }
            for (r = 0; r < nr; r++) vst1q_f32(cr[r] + j, c0[r]), vst1q_f32(cr[r] + j + 4, c1[r]);
        }
        for (; j < n; j++)
            for (r = 0; r < nr; r++) {
                float32x4_t s = vdupq_n_f32(acc ? cr[r][j] : 0.0f);
                for (p = 0; p < k; p++) s = vfmaq_f32(s, vdupq_n_f32(ar[r][p]), vdupq_n_f32(b[(size_t)p * ldb + j]));
                cr[r][j] = vgetq_lane_f32(s, 0);
            }
    }
}

/* a row of the gated delta rule (as AVX2's, by 16) */
static float infer__neon_deltanet_row(float *r, const float *r0, float decay, const float *k, const float *q, float v,
                                      float beta, int n) {
    float32x4_t acc[4], vd = vdupq_n_f32(decay), dd;
    float sum, d;
    int i, j, whole = n - n % 16;
    for (j = 0; j < 4; j++) acc[j] = vdupq_n_f32(0.0f);
    for (i = 0; i < whole; i += 16)
        for (j = 0; j < 4; j++) {
            int at = i + 4 * j;
            float32x4_t x = r0 ? vmulq_f32(vld1q_f32(r0 + at), vd) : vdupq_n_f32(0.0f);
            vst1q_f32(r + at, x);
            acc[j] = vfmaq_f32(acc[j], x, vld1q_f32(k + at));
        }
    sum = infer__neon_fold4x4(acc[0], acc[1], acc[2], acc[3]);
    for (i = whole; i < n; i++) {
        float x = r0 ? r0[i] * decay : 0.0f, p;
        r[i] = x;
        p = x * k[i];
        sum += p;
    }
    d = (v - sum) * beta;
    dd = vdupq_n_f32(d);
    for (j = 0; j < 4; j++) acc[j] = vdupq_n_f32(0.0f);
    for (i = 0; i < whole; i += 16)
        for (j = 0; j < 4; j++) {
            int at = i + 4 * j;
            float32x4_t x = vfmaq_f32(vld1q_f32(r + at), vld1q_f32(k + at), dd);
            vst1q_f32(r + at, x);
            acc[j] = vfmaq_f32(acc[j], x, vld1q_f32(q + at));
        }
    sum = infer__neon_fold4x4(acc[0], acc[1], acc[2], acc[3]);
    for (i = whole; i < n; i++) {
        float p;
        r[i] = vgetq_lane_f32(vfmaq_f32(vdupq_n_f32(r[i]), vdupq_n_f32(k[i]), dd), 0);
        p = r[i] * q[i];
        sum += p;
    }
    return sum;
}

static void infer__neon_f16_rows16(const uint16_t *h, size_t stride, int rows, float *out) {
    int r, l;
    for (r = 0; r < rows; r++)
        for (l = 0; l < 16; l += 4) vst1q_f32(out + 16 * r + l, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + (size_t)r * stride + l))));
}
#endif /* INFER__HAVE_NEON */

static int infer__simd_neon_install(infer__kernels *k) {
#ifdef INFER__HAVE_NEON
    int dp = infer__cpu_has(INFER__CPU_DOTPROD);
    k->vec_dot[INFER_TYPE_F32] = infer__neon_f32_dot;
    k->vec_dot[INFER_TYPE_F16] = infer__neon_f16_dot;
    k->f16_dot_ordered = infer__neon_f16_dot_ordered;
    k->f16_dot_ordered1 = infer__neon_f16_dot_ordered1;
    k->f32_dot_ordered = infer__neon_f32_dot_ordered;
    k->f32_mad = infer__neon_f32_mad;
    k->ssm_row = infer__neon_ssm_row;
    k->deltanet_row = infer__neon_deltanet_row;
    k->f32_gemm = infer__neon_f32_gemm;
    k->f16_rows16 = infer__neon_f16_rows16;
    k->vec_dot[INFER_TYPE_BF16] = infer__neon_bf16_dot;
    k->vec_dot[INFER_TYPE_Q8_0] = dp ? infer__neondp_q8_0_dot : infer__neon_q8_0_dot;
    k->vec_dot[INFER_TYPE_Q4_0] = dp ? infer__neondp_q4_0_dot : infer__neon_q4_0_dot;
    k->vec_dot[INFER_TYPE_Q4_1] = dp ? infer__neondp_q4_1_dot : infer__neon_q4_1_dot;
    k->vec_dot[INFER_TYPE_Q5_0] = dp ? infer__neondp_q5_0_dot : infer__neon_q5_0_dot;
    k->vec_dot[INFER_TYPE_Q5_1] = dp ? infer__neondp_q5_1_dot : infer__neon_q5_1_dot;
    k->from_float[INFER_TYPE_F16] = infer__neon_f16_from_float;
    k->from_float[INFER_TYPE_BF16] = infer__neon_bf16_from_float;
    k->from_float[INFER_TYPE_Q8_0] = infer__neon_q8_0_from_float;
    k->from_float[INFER_TYPE_Q8_1] = infer__neon_q8_1_from_float;
    k->from_float[INFER_TYPE_Q8_K] = infer__neon_q8_K_from_float;
    k->vec_dot[INFER_TYPE_Q2_K] = dp ? infer__neondp_q2_K_dot : infer__neon_q2_K_dot;
    k->vec_dot[INFER_TYPE_Q3_K] = dp ? infer__neondp_q3_K_dot : infer__neon_q3_K_dot;
    k->vec_dot[INFER_TYPE_Q4_K] = dp ? infer__neondp_q4_K_dot : infer__neon_q4_K_dot;
    k->vec_dot[INFER_TYPE_Q5_K] = dp ? infer__neondp_q5_K_dot : infer__neon_q5_K_dot;
    k->vec_dot[INFER_TYPE_Q6_K] = dp ? infer__neondp_q6_K_dot : infer__neon_q6_K_dot;
    k->vec_dot[INFER_TYPE_IQ4_NL] = dp ? infer__neondp_iq4_nl_dot : infer__neon_iq4_nl_dot;
    k->vec_dot[INFER_TYPE_IQ4_XS] = dp ? infer__neondp_iq4_xs_dot : infer__neon_iq4_xs_dot;
    k->vec_dot[INFER_TYPE_MXFP4] = dp ? infer__neondp_mxfp4_dot : infer__neon_mxfp4_dot;
    if (infer__cpu_has(INFER__CPU_I8MM)) { /* prompts: smmla tiles */
        static const infer_type unordered[] = {INFER_TYPE_Q8_0, INFER_TYPE_Q4_0, INFER_TYPE_Q4_1,
                                               INFER_TYPE_Q5_0, INFER_TYPE_Q5_1, INFER_TYPE_IQ4_NL,
                                               INFER_TYPE_MXFP4};
        size_t i;
        k->gemm[INFER_TYPE_Q8_0] = infer__neonmm_q8_0_gemm;
        k->gemm[INFER_TYPE_Q4_0] = infer__neonmm_q4_0_gemm;
        k->gemm[INFER_TYPE_Q4_1] = infer__neonmm_q4_1_gemm;
        k->gemm[INFER_TYPE_Q5_0] = infer__neonmm_q5_0_gemm;
        k->gemm[INFER_TYPE_Q5_1] = infer__neonmm_q5_1_gemm;
        k->gemm[INFER_TYPE_IQ4_NL] = infer__neonmm_iq4_nl_gemm;
        k->gemm[INFER_TYPE_MXFP4] = infer__neonmm_mxfp4_gemm;
        k->gemm[INFER_TYPE_Q2_K] = infer__neonmm_q2_K_gemm;
        k->gemm[INFER_TYPE_Q3_K] = infer__neonmm_q3_K_gemm;
        k->gemm[INFER_TYPE_Q4_K] = infer__neonmm_q4_K_gemm;
        k->gemm[INFER_TYPE_Q5_K] = infer__neonmm_q5_K_gemm;
        k->gemm[INFER_TYPE_Q6_K] = infer__neonmm_q6_K_gemm;
        k->gemm[INFER_TYPE_IQ4_XS] = infer__neonmm_iq4_xs_gemm;
        for (i = 0; i < sizeof unordered / sizeof unordered[0]; i++) k->gemm_unordered[unordered[i]] = 1;
    }
    return 1;
#else
    (void)k;
    return 0;
#endif
}
