/* simd_wasm.c - WebAssembly SIMD128 versions of the kernels, for a build
   with emcc -msimd128 (examples/web/). WebAssembly has no run-time feature
   detection: a module either validates with SIMD128 or not at all, so the
   table is chosen at compile time (__wasm_simd128__). The dots of F16,
   Q8_0, Q4_0, Q4_1, Q4_K, Q6_K and MXFP4 sum in the scalar kernels' order
   and give their results (F32 sums in lanes, not in a double); quantizers
   are byte-exact. SIMD128 has no fused multiply-add (only the relaxed-SIMD
   proposal has), so where the scalar kernel fuses, the product is either
   exact in a float or taken in a double. Bit-equal results matter here:
   the browser's greedy tokens are checked against the native build's,
   and a near-tie (SmolLM2 has one 0.03 apart in its first 24 tokens)
   follows the last bit. */
#include "internal.h"
#include "quants.h"

#if defined(__wasm_simd128__)
#define INFER__HAVE_WASM_SIMD 1
#include <wasm_simd128.h>

#define INFER__WASM_INLINE INFER__FORCE_INLINE

INFER__WASM_INLINE float infer__wasm_hsum(v128_t v) {
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 2)) +
           (wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 3));
}
INFER__WASM_INLINE int infer__wasm_hsum_i32(v128_t v) {
    return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
           wasm_i32x4_extract_lane(v, 3);
}
INFER__WASM_INLINE float infer__wasm_hmax(v128_t v) {
    float a = wasm_f32x4_extract_lane(v, 0), b = wasm_f32x4_extract_lane(v, 1);
    float c = wasm_f32x4_extract_lane(v, 2), d = wasm_f32x4_extract_lane(v, 3);
    a = a > b ? a : b;
    c = c > d ? c : d;
    return a > c ? a : c;
}

/* int32 lane j = a[4j..4j+3] . b[4j..4j+3] of two int8x16: the grouping of
   NEON's sdot and of llama.cpp's x86 lanes, so the float sums that follow
   add up in the same order as theirs */
INFER__WASM_INLINE v128_t infer__wasm_dot4(v128_t a, v128_t b) {
    v128_t lo = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_low_i8x16(b));
    v128_t hi = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_high_i8x16(b));
    return wasm_i32x4_add(wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6), wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7));
}

/* ---- float formats ---- */

static float infer__wasm_f32_dot(int n, const void *w, const void *x) {
    const float *a = (const float *)w, *b = (const float *)x;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    float s;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
        s1 = wasm_f32x4_add(s1, wasm_f32x4_mul(wasm_v128_load(a + i + 4), wasm_v128_load(b + i + 4)));
        s2 = wasm_f32x4_add(s2, wasm_f32x4_mul(wasm_v128_load(a + i + 8), wasm_v128_load(b + i + 8)));
        s3 = wasm_f32x4_add(s3, wasm_f32x4_mul(wasm_v128_load(a + i + 12), wasm_v128_load(b + i + 12)));
    }
    for (; i + 4 <= n; i += 4) s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
    s = infer__wasm_hsum(wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* four halves to floats, exactly: the half's exponent and mantissa shifted
   into a float's and scaled by 2^112 (which also makes subnormal halves
   right), infinities and NaNs given the float's all-ones exponent, then
   the sign. No SIMD128 instruction converts halves. */
INFER__WASM_INLINE v128_t infer__wasm_f16_to_f32(v128_t h) {
    v128_t mag = wasm_v128_and(h, wasm_i32x4_splat(0x7fff));
    v128_t f = wasm_f32x4_mul(wasm_i32x4_shl(mag, 13), wasm_f32x4_splat(0x1p112f));
    v128_t special = wasm_i32x4_ge(mag, wasm_i32x4_splat(0x7c00));
    f = wasm_v128_bitselect(wasm_v128_or(wasm_i32x4_shl(mag, 13), wasm_i32x4_splat(0x7f800000)), f, special);
    return wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}
INFER__WASM_INLINE v128_t infer__wasm_load_f16(const uint16_t *p) { return infer__wasm_f16_to_f32(wasm_u32x4_load16x4(p)); }
/* four scattered halves (block scales) as floats: a scalar conversion
   each cost more than a block's integer products */
#define INFER__WH4(a, b, c, d) infer__wasm_f16_to_f32(wasm_i32x4_make((a), (b), (c), (d)))

static float infer__wasm_f16_dot(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    float lane[16];
    int i;
    if (n % 16) return infer__f16_dot_llama_vec(a, 1, b, n);
    for (i = 0; i < n; i += 16) {
        s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(infer__wasm_load_f16(a + i), infer__wasm_load_f16(b + i)));
        s1 = wasm_f32x4_add(s1, wasm_f32x4_mul(infer__wasm_load_f16(a + i + 4), infer__wasm_load_f16(b + i + 4)));
        s2 = wasm_f32x4_add(s2, wasm_f32x4_mul(infer__wasm_load_f16(a + i + 8), infer__wasm_load_f16(b + i + 8)));
        s3 = wasm_f32x4_add(s3, wasm_f32x4_mul(infer__wasm_load_f16(a + i + 12), infer__wasm_load_f16(b + i + 12)));
    }
    wasm_v128_store(lane, s0), wasm_v128_store(lane + 4, s1), wasm_v128_store(lane + 8, s2), wasm_v128_store(lane + 12, s3);
    return infer__sum16_tree(lane);
}

/* Attention's q.K (infer__kernels.qk_f16), the plain C kernel's layout and
   sums: keys widened into panels of 16, dim by dim, then 2 query rows x
   16 keys, each dim's q value splatted. A product of halves is exact, so
   multiply then add is the other ISAs' fused sum, bit for bit. */
static void infer__wasm_qk_f16(int hd, const uint8_t *k, size_t k_stride, int kt, const uint16_t *q, size_t q_stride, int nq,
                               float *s, size_t lds, float *work) {
    int kp = (kt + 15) / 16 * 16, i, j, d, t;
    float *kd = work, *qf = work + (size_t)hd * kp;
    for (j = 0; j < kp; j++) {
        const uint16_t *kj = (const uint16_t *)(const void *)(k + (size_t)j * k_stride);
        float *at = kd + (size_t)(j / 16) * 16 * hd + j % 16, w[4];
        for (d = 0; d + 4 <= hd; d += 4) {
            wasm_v128_store(w, j < kt ? infer__wasm_load_f16(kj + d) : wasm_f32x4_splat(0));
            at[16 * d] = w[0], at[16 * (d + 1)] = w[1], at[16 * (d + 2)] = w[2], at[16 * (d + 3)] = w[3];
        }
        for (; d < hd; d++) at[16 * d] = j < kt ? infer__fp16_to_fp32(kj[d]) : 0.0f;
    }
    for (i = 0; i < (nq + 1) / 2 * 2; i++)
        for (d = 0; d < hd; d++) qf[(size_t)i * hd + d] = i < nq ? infer__fp16_to_fp32(q[(size_t)i * q_stride / 2 + d]) : 0.0f;
    for (i = 0; i < nq; i += 2)
        for (j = 0; j < kt; j += 16) {
            const float *panel = kd + (size_t)j * hd, *q0 = qf + (size_t)i * hd, *q1 = q0 + hd;
            v128_t a[2][4], kv[4], b;
            float out[2][16];
            for (t = 0; t < 4; t++) a[0][t] = a[1][t] = wasm_f32x4_splat(0);
            for (d = 0; d < hd; d++) {
                for (t = 0; t < 4; t++) kv[t] = wasm_v128_load(panel + 16 * d + 4 * t);
                b = wasm_f32x4_splat(q0[d]);
                for (t = 0; t < 4; t++) a[0][t] = wasm_f32x4_add(a[0][t], wasm_f32x4_mul(b, kv[t]));
                b = wasm_f32x4_splat(q1[d]);
                for (t = 0; t < 4; t++) a[1][t] = wasm_f32x4_add(a[1][t], wasm_f32x4_mul(b, kv[t]));
            }
            for (t = 0; t < 4; t++) wasm_v128_store(out[0] + 4 * t, a[0][t]), wasm_v128_store(out[1] + 4 * t, a[1][t]);
            for (t = 0; t < 2 && i + t < nq; t++)
                memcpy(s + (size_t)(i + t) * lds + j, out[t], (size_t)INFER__MIN(16, kt - j) * sizeof(float));
        }
}

/* ---- 8-bit activations ---- */

INFER__WASM_INLINE float infer__wasm_amax32(const v128_t v[8]) {
    v128_t m = wasm_f32x4_abs(v[0]);
    int j;
    for (j = 1; j < 8; j++) m = wasm_f32x4_max(m, wasm_f32x4_abs(v[j]));
    return infer__wasm_hmax(m);
}
/* eight vectors of int32 in -127..127 to 32 int8 */
INFER__WASM_INLINE void infer__wasm_store32(int8_t *out, const v128_t q[8]) {
    v128_t h0 = wasm_i16x8_narrow_i32x4(q[0], q[1]), h1 = wasm_i16x8_narrow_i32x4(q[2], q[3]);
    v128_t h2 = wasm_i16x8_narrow_i32x4(q[4], q[5]), h3 = wasm_i16x8_narrow_i32x4(q[6], q[7]);
    wasm_v128_store(out, wasm_i8x16_narrow_i16x8(h0, h1));
    wasm_v128_store(out + 16, wasm_i8x16_narrow_i16x8(h2, h3));
}

static void infer__wasm_q8_0_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_0 *y = (infer__block_q8_0 *)dst;
    int64_t b;
    for (b = 0; b < n / 32; b++, src += 32) {
        v128_t v[8], q[8];
        float amax, id;
        int j;
        for (j = 0; j < 8; j++) v[j] = wasm_v128_load(src + 4 * j);
        amax = infer__wasm_amax32(v);
        y[b].d = infer__fp32_to_fp16(amax / 127.0f);
        id = amax != 0.0f ? 127.0f / amax : 0.0f;
        if (isinf(id)) id = 0.0f; /* a subnormal amax, as quants.c */
        /* f32x4.nearest rounds ties to even: nearbyintf in the default mode */
        for (j = 0; j < 8; j++)
            q[j] = wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(wasm_f32x4_mul(v[j], wasm_f32x4_splat(id))));
        infer__wasm_store32(y[b].qs, q);
    }
}

/* roundf (ties away from zero), which SIMD128 lacks: truncate, then one
   step away from zero where the part cut off was at least a half (the
   difference of a float and its truncation is exact) */
INFER__WASM_INLINE v128_t infer__wasm_round_away(v128_t v) {
    v128_t t = wasm_f32x4_trunc(v);
    v128_t up = wasm_f32x4_ge(wasm_f32x4_abs(wasm_f32x4_sub(v, t)), wasm_f32x4_splat(0.5f));
    v128_t step = wasm_v128_or(wasm_f32x4_splat(1.0f), wasm_v128_and(v, wasm_i32x4_splat((int32_t)0x80000000u)));
    return wasm_f32x4_add(t, wasm_v128_and(up, step));
}

static void infer__wasm_q8_1_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_1 *y = (infer__block_q8_1 *)dst;
    int64_t b;
    for (b = 0; b < n / 32; b++, src += 32) {
        v128_t v[8], q[8], s = wasm_i32x4_splat(0);
        float amax, d, id;
        int j;
        for (j = 0; j < 8; j++) v[j] = wasm_v128_load(src + 4 * j);
        amax = infer__wasm_amax32(v);
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) id = 0.0f;
        for (j = 0; j < 8; j++) {
            q[j] = wasm_i32x4_trunc_sat_f32x4(infer__wasm_round_away(wasm_f32x4_mul(v[j], wasm_f32x4_splat(id))));
            s = wasm_i32x4_add(s, q[j]);
        }
        y[b].d = infer__fp32_to_fp16(d);
        y[b].s = infer__fp32_to_fp16((float)infer__wasm_hsum_i32(s) * d);
        infer__wasm_store32(y[b].qs, q);
    }
}

static void infer__wasm_q8_K_from_float(const float *x, void *dst, int64_t n) {
    infer__block_q8_K *y = (infer__block_q8_K *)dst;
    int64_t b;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        v128_t m = wasm_f32x4_splat(0);
        float amax, max = 0, iscale;
        int j, k;
        for (j = 0; j < INFER__QK_K; j += 4) m = wasm_f32x4_max(m, wasm_f32x4_abs(wasm_v128_load(x + j)));
        amax = infer__wasm_hmax(m);
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
            v128_t q[8], s0 = wasm_i32x4_splat(0), s1 = s0;
            for (k = 0; k < 8; k++)
                q[k] = wasm_i32x4_min(wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(
                                          wasm_f32x4_mul(wasm_v128_load(x + j + 4 * k), wasm_f32x4_splat(iscale)))),
                                      wasm_i32x4_splat(127));
            for (k = 0; k < 4; k++) {
                s0 = wasm_i32x4_add(s0, q[k]);
                s1 = wasm_i32x4_add(s1, q[k + 4]);
            }
            y[b].bsums[j / 16] = (int16_t)infer__wasm_hsum_i32(s0);
            y[b].bsums[j / 16 + 1] = (int16_t)infer__wasm_hsum_i32(s1);
            infer__wasm_store32(y[b].qs + j, q);
        }
        y[b].d = 1 / iscale;
    }
}

/* ---- 32-value block formats ----
   Integer products in SIMD, summed in the scalar kernels' float order. */

#define INFER__WH(x) infer__fp16_to_fp32(x)
#define INFER__WNIB_LO(q) wasm_v128_and((q), wasm_i8x16_splat(0x0f))
#define INFER__WNIB_HI(q) wasm_u8x16_shr((q), 4)

/* acc + d * ints in four lanes, rounded once as fmaf rounds: the product
   of a float and an integer of at most 17 bits is exact in a double, and
   so is, almost always, its sum with acc (a double rounding could differ
   only where that sum is not exact and its rounding lands on a float's
   halfway point) */
INFER__WASM_INLINE v128_t infer__wasm_fma_i32(v128_t acc, v128_t ints, v128_t d2) {
    v128_t lo = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(ints), d2), wasm_f64x2_promote_low_f32x4(acc));
    v128_t hi = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(wasm_i32x4_shuffle(ints, ints, 2, 3, 2, 3)), d2),
                               wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(acc, acc, 2, 3, 2, 3)));
    return wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(lo), wasm_f32x4_demote_f64x2_zero(hi), 0, 1, 4, 5);
}

/* quants.c's order: eight lanes (bytes 4l..4l+3 of each block), each
   block added by a fused multiply-add of its scale, then infer__hsum8 */
static float infer__wasm_q8_0_dot(int n, const void *w, const void *xv) {
    const infer__block_q8_0 *a = (const infer__block_q8_0 *)w, *x = (const infer__block_q8_0 *)xv;
    v128_t lo = wasm_f32x4_splat(0), hi = lo;
    float acc[8];
    int b, nb = n / 32;
    float dd[4];
    for (b = 0; b < nb; b++) {
        v128_t d;
        if (b % 4 == 0 && b + 4 <= nb) /* four blocks' scales converted at once */
            wasm_v128_store(dd, wasm_f32x4_mul(INFER__WH4(a[b].d, a[b + 1].d, a[b + 2].d, a[b + 3].d),
                                               INFER__WH4(x[b].d, x[b + 1].d, x[b + 2].d, x[b + 3].d)));
        d = wasm_f64x2_splat((double)(b < nb / 4 * 4 ? dd[b % 4] : INFER__WH(a[b].d) * INFER__WH(x[b].d)));
        lo = infer__wasm_fma_i32(lo, infer__wasm_dot4(wasm_v128_load(a[b].qs), wasm_v128_load(x[b].qs)), d);
        hi = infer__wasm_fma_i32(hi, infer__wasm_dot4(wasm_v128_load(a[b].qs + 16), wasm_v128_load(x[b].qs + 16)), d);
    }
    wasm_v128_store(acc, lo), wasm_v128_store(acc + 4, hi);
    return infer__hsum8(acc);
}

/* Q4_0 and Q4_1 sum as quants.c's scalar kernels do: each block's
   integer sum times its scale, added to the total block after block.
   Without a fused multiply-add, lanes of float sums (simd_neon.c's order)
   rounded differently enough to flip a near-tie of SmolLM2's greedy
   choice; this order gives the scalar kernels' results to the bit. The
   block sums are made four blocks at a time: a 4x4 transpose of their
   lanes, then one multiply for the four scales. */
INFER__WASM_INLINE v128_t infer__wasm_hsum4_i32(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* A block's 32 products in four int32 lanes whose sum is the block's:
   products as int16 (|w| <= 15, |x| <= 127), the four halves added (at
   most 4 * 15 * 127, no overflow), then pairs widened. Which bytes land
   in which lane does not matter here: only the block's total is used. */
INFER__WASM_INLINE v128_t infer__wasm_nibble_block(v128_t lo, v128_t hi, const int8_t *x) {
    v128_t x0 = wasm_v128_load(x), x1 = wasm_v128_load(x + 16);
    v128_t p = wasm_i16x8_add(wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(lo, x0), wasm_i16x8_extmul_high_i8x16(lo, x0)),
                              wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(hi, x1), wasm_i16x8_extmul_high_i8x16(hi, x1)));
    return wasm_i32x4_extadd_pairwise_i16x8(p);
}

INFER__WASM_INLINE v128_t infer__wasm_q4_0_block(const infer__block_q4_0 *a, const infer__block_q8_0 *x) {
    const v128_t off = wasm_i8x16_splat(8);
    v128_t q = wasm_v128_load(a->qs);
    return infer__wasm_nibble_block(wasm_i8x16_sub(INFER__WNIB_LO(q), off), wasm_i8x16_sub(INFER__WNIB_HI(q), off), x->qs);
}

INFER__WASM_INLINE v128_t infer__wasm_q4_1_block(const infer__block_q4_1 *a, const infer__block_q8_1 *x) {
    v128_t q = wasm_v128_load(a->qs);
    return infer__wasm_nibble_block(INFER__WNIB_LO(q), INFER__WNIB_HI(q), x->qs);
}

/* vec_dot of Q4_0 or Q4_1: four blocks' sums at a time, each scaled and
   (Q4_1) given its m * s term, then added to the total block by block */
#define INFER__WASM_NIBBLE_DOT(NAME, WBLOCK, XBLOCK, BLOCKSUM, MINS4, MINS1)                                     \
    static float NAME(int n, const void *w, const void *xv) {                                                    \
        const WBLOCK *a = (const WBLOCK *)w;                                                                      \
        const XBLOCK *x = (const XBLOCK *)xv;                                                                     \
        float s = 0, t[4];                                                                                        \
        int b = 0, nb = n / 32;                                                                                   \
        for (; b + 4 <= nb; b += 4) {                                                                             \
            v128_t sums = infer__wasm_hsum4_i32(BLOCKSUM(a + b, x + b), BLOCKSUM(a + b + 1, x + b + 1),           \
                                                BLOCKSUM(a + b + 2, x + b + 2), BLOCKSUM(a + b + 3, x + b + 3));  \
            v128_t d = wasm_f32x4_mul(INFER__WH4(a[b].d, a[b + 1].d, a[b + 2].d, a[b + 3].d),                    \
                                      INFER__WH4(x[b].d, x[b + 1].d, x[b + 2].d, x[b + 3].d));                    \
            wasm_v128_store(t, MINS4(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sums), d), a + b, x + b));          \
            s += t[0], s += t[1], s += t[2], s += t[3];                                                           \
        }                                                                                                         \
        for (; b < nb; b++)                                                                                       \
            s += MINS1(infer__wasm_hsum_i32(BLOCKSUM(a + b, x + b)) * (INFER__WH(a[b].d) * INFER__WH(x[b].d)), a + b, \
                       x + b);                                                                                    \
        return s;                                                                                                 \
    }
#define INFER__WASM_DOT_NO_MINS(v, a, x) (v)
#define INFER__WASM_DOT_Q4_1_MINS4(v, a, x)                                                                       \
    wasm_f32x4_add((v), wasm_f32x4_mul(INFER__WH4((a)[0].m, (a)[1].m, (a)[2].m, (a)[3].m),                       \
                                       INFER__WH4((x)[0].s, (x)[1].s, (x)[2].s, (x)[3].s)))
#define INFER__WASM_DOT_Q4_1_MINS1(v, a, x) ((v) + INFER__WH((a)->m) * INFER__WH((x)->s))
INFER__WASM_NIBBLE_DOT(infer__wasm_q4_0_dot, infer__block_q4_0, infer__block_q8_0, infer__wasm_q4_0_block,
                       INFER__WASM_DOT_NO_MINS, INFER__WASM_DOT_NO_MINS)
INFER__WASM_NIBBLE_DOT(infer__wasm_q4_1_dot, infer__block_q4_1, infer__block_q8_1, infer__wasm_q4_1_block,
                       INFER__WASM_DOT_Q4_1_MINS4, INFER__WASM_DOT_Q4_1_MINS1)
#undef INFER__WASM_NIBBLE_DOT
#undef INFER__WASM_DOT_NO_MINS
#undef INFER__WASM_DOT_Q4_1_MINS4
#undef INFER__WASM_DOT_Q4_1_MINS1

/* MXFP4: Q4_0's nibble products with E2M1's doubled grid looked up by a
   swizzle (|w| <= 12, so the int16 sums still fit), each block's integer
   sum times xd * 2^(e-128) added in block order, as the scalar kernel:
   its results to the bit, and no lanes scaled apart (2^127 scales would
   overflow them where the scalar sum does not) */
INFER__WASM_INLINE v128_t infer__wasm_mxfp4_block(const infer__block_mxfp4 *a, const infer__block_q8_0 *x) {
    const v128_t grid = wasm_v128_load(infer__mxfp4_values);
    v128_t q = wasm_v128_load(a->qs);
    return infer__wasm_nibble_block(wasm_i8x16_swizzle(grid, INFER__WNIB_LO(q)), wasm_i8x16_swizzle(grid, INFER__WNIB_HI(q)),
                                    x->qs);
}

static float infer__wasm_mxfp4_dot(int n, const void *w, const void *xv) {
    const infer__block_mxfp4 *a = (const infer__block_mxfp4 *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    float s = 0, t[4];
    int b = 0, nb = n / 32;
    for (; b + 4 <= nb; b += 4) {
        v128_t sums = infer__wasm_hsum4_i32(infer__wasm_mxfp4_block(a + b, x + b), infer__wasm_mxfp4_block(a + b + 1, x + b + 1),
                                            infer__wasm_mxfp4_block(a + b + 2, x + b + 2),
                                            infer__wasm_mxfp4_block(a + b + 3, x + b + 3));
        v128_t e = wasm_f32x4_make(infer__e8m0_half(a[b].e), infer__e8m0_half(a[b + 1].e), infer__e8m0_half(a[b + 2].e),
                                   infer__e8m0_half(a[b + 3].e));
        v128_t d = wasm_f32x4_mul(INFER__WH4(x[b].d, x[b + 1].d, x[b + 2].d, x[b + 3].d), e);
        wasm_v128_store(t, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(sums)));
        s += t[0], s += t[1], s += t[2], s += t[3];
    }
    for (; b < nb; b++)
        s += INFER__WH(x[b].d) * infer__e8m0_half(a[b].e) * (float)infer__wasm_hsum_i32(infer__wasm_mxfp4_block(a + b, x + b));
    return s;
}

/* The prompt tile: a row of Q4_0 or Q4_1 weights against four tokens at a
   time, each block's nibbles unpacked once for the four, the tokens in
   the lanes of one float vector. Each lane adds its token's block terms
   in block order, as the vec_dot above and the scalar kernel do: the same
   results to the bit, with a quarter of the unpacking and one vector add
   for four tokens' totals. Tokens left over (fewer than four) go through
   vec_dot. */
#define INFER__WASM_GEMM(NAME, WBLOCK, XBLOCK, BLOCKSUM, MINS, DOT)                                              \
    static void NAME(int n, const void *w, size_t w_stride, int n_rows, const void *x, size_t x_stride, int n_tok, \
                     float *y, size_t ldy) {                                                                      \
        int nb = n / 32, r, t, b, k;                                                                              \
        for (r = 0; r < n_rows; r++) {                                                                            \
            const WBLOCK *a = (const WBLOCK *)((const uint8_t *)w + (size_t)r * w_stride);                        \
            for (t = 0; t + 4 <= n_tok; t += 4) {                                                                 \
                const XBLOCK *xs[4];                                                                              \
                v128_t s = wasm_f32x4_splat(0);                                                                   \
                float out[4];                                                                                     \
                for (k = 0; k < 4; k++) xs[k] = (const XBLOCK *)((const uint8_t *)x + (size_t)(t + k) * x_stride); \
                for (b = 0; b < nb; b++) {                                                                        \
                    v128_t sums = infer__wasm_hsum4_i32(BLOCKSUM(a + b, xs[0] + b), BLOCKSUM(a + b, xs[1] + b),   \
                                                        BLOCKSUM(a + b, xs[2] + b), BLOCKSUM(a + b, xs[3] + b));  \
                    v128_t d = wasm_f32x4_mul(wasm_f32x4_splat(INFER__WH(a[b].d)),                                \
                                              INFER__WH4(xs[0][b].d, xs[1][b].d, xs[2][b].d, xs[3][b].d));        \
                    s = wasm_f32x4_add(s, MINS(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sums), d), a + b, xs, b)); \
                }                                                                                                 \
                wasm_v128_store(out, s);                                                                          \
                for (k = 0; k < 4; k++) y[(size_t)(t + k) * ldy + r] = out[k];                                   \
            }                                                                                                     \
            for (; t < n_tok; t++) y[(size_t)t * ldy + r] = DOT(n, a, (const uint8_t *)x + (size_t)t * x_stride); \
        }                                                                                                         \
    }
#define INFER__WASM_NO_MINS(v, a, xs, b) (v)
/* Q4_1's m * s terms, added to the scaled sums as the scalar kernel adds them */
#define INFER__WASM_Q4_1_MINS(v, a, xs, b)                                                                        \
    wasm_f32x4_add((v), wasm_f32x4_mul(wasm_f32x4_splat(INFER__WH((a)->m)),                                       \
                                       INFER__WH4(xs[0][b].s, xs[1][b].s, xs[2][b].s, xs[3][b].s)))
INFER__WASM_GEMM(infer__wasm_q4_0_gemm, infer__block_q4_0, infer__block_q8_0, infer__wasm_q4_0_block, INFER__WASM_NO_MINS,
                 infer__wasm_q4_0_dot)
INFER__WASM_GEMM(infer__wasm_q4_1_gemm, infer__block_q4_1, infer__block_q8_1, infer__wasm_q4_1_block, INFER__WASM_Q4_1_MINS,
                 infer__wasm_q4_1_dot)
#undef INFER__WASM_GEMM
#undef INFER__WASM_NO_MINS
#undef INFER__WASM_Q4_1_MINS

/* ---- K-quants ----
   Integer sums per super-block, scaled once in the reference's float
   order, so these give the scalar kernels' results exactly. */

static float infer__wasm_q4_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q4_K *a = (const infer__block_q4_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float s = 0, accm = 0; /* llama.cpp's repacked Q4_K order, as simd_neon.c */
    int b, j;
    for (b = 0; b < n / INFER__QK_K; b++) {
        uint8_t sm[16];
        const uint8_t *q = a[b].qs;
        const int8_t *y = x[b].qs;
        const int16_t *bs = x[b].bsums;
        int sumi = 0, summ = 0;
        infer__k4_scales(a[b].scales, sm);
        for (j = 0; j < 4; j++, q += 32, y += 64) {
            v128_t q0 = wasm_v128_load(q), q1 = wasm_v128_load(q + 16);
            v128_t p1 = wasm_i32x4_add(infer__wasm_dot4(INFER__WNIB_LO(q0), wasm_v128_load(y)),
                                       infer__wasm_dot4(INFER__WNIB_LO(q1), wasm_v128_load(y + 16)));
            v128_t p2 = wasm_i32x4_add(infer__wasm_dot4(INFER__WNIB_HI(q0), wasm_v128_load(y + 32)),
                                       infer__wasm_dot4(INFER__WNIB_HI(q1), wasm_v128_load(y + 48)));
            sumi += sm[2 * j] * infer__wasm_hsum_i32(p1) + sm[2 * j + 1] * infer__wasm_hsum_i32(p2);
            summ += sm[8 + 2 * j] * (bs[4 * j] + bs[4 * j + 1]) + sm[8 + 2 * j + 1] * (bs[4 * j + 2] + bs[4 * j + 3]);
        }
        s = infer__fmaf((float)sumi, infer__fp16_to_fp32(a[b].d) * x[b].d, s);
        accm = infer__fmaf((float)summ, infer__fp16_to_fp32(a[b].dmin) * x[b].d, accm);
    }
    return s - accm;
}

static float infer__wasm_q6_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q6_K *a = (const infer__block_q6_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    const v128_t m4 = wasm_i8x16_splat(0x0f), m2 = wasm_i8x16_splat(3), k32 = wasm_i8x16_splat(32);
    float s = 0;
    int b, h, k;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *y = x[b].qs;
        int sumi = 0;
        for (h = 0; h < 2; h++) {
            const uint8_t *ql = a[b].ql + 64 * h;
            v128_t L[4], H0 = wasm_v128_load(a[b].qh + 32 * h), H1 = wasm_v128_load(a[b].qh + 32 * h + 16);
            L[0] = wasm_v128_load(ql), L[1] = wasm_v128_load(ql + 16);
            L[2] = wasm_v128_load(ql + 32), L[3] = wasm_v128_load(ql + 48);
            for (k = 0; k < 4; k++, y += 32) {
                /* values 0..31 of this quarter: the low nibbles of L[0..1], then of
                   L[2..3], then their high nibbles; two bits of qh on top */
                v128_t lo0 = k < 2 ? wasm_v128_and(L[2 * k], m4) : wasm_u8x16_shr(L[2 * (k - 2)], 4);
                v128_t lo1 = k < 2 ? wasm_v128_and(L[2 * k + 1], m4) : wasm_u8x16_shr(L[2 * (k - 2) + 1], 4);
                v128_t v0 = wasm_i8x16_sub(wasm_v128_or(lo0, wasm_i8x16_shl(wasm_v128_and(H0, m2), 4)), k32);
                v128_t v1 = wasm_i8x16_sub(wasm_v128_or(lo1, wasm_i8x16_shl(wasm_v128_and(H1, m2), 4)), k32);
                sumi += a[b].scales[8 * h + 2 * k] * infer__wasm_hsum_i32(infer__wasm_dot4(v0, wasm_v128_load(y))) +
                        a[b].scales[8 * h + 2 * k + 1] * infer__wasm_hsum_i32(infer__wasm_dot4(v1, wasm_v128_load(y + 16)));
                H0 = wasm_u8x16_shr(H0, 2);
                H1 = wasm_u8x16_shr(H1, 2);
            }
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi;
    }
    return s;
}
#undef INFER__WH
#undef INFER__WH4
#undef INFER__WNIB_LO
#undef INFER__WNIB_HI
#endif /* __wasm_simd128__ */

static int infer__simd_wasm_install(infer__kernels *k) {
#ifdef INFER__HAVE_WASM_SIMD
    k->vec_dot[INFER_TYPE_F32] = infer__wasm_f32_dot;
    k->vec_dot[INFER_TYPE_F16] = infer__wasm_f16_dot;
    k->qk_f16 = infer__wasm_qk_f16;
    k->vec_dot[INFER_TYPE_Q8_0] = infer__wasm_q8_0_dot;
    k->vec_dot[INFER_TYPE_Q4_0] = infer__wasm_q4_0_dot;
    k->vec_dot[INFER_TYPE_Q4_1] = infer__wasm_q4_1_dot;
    k->gemm[INFER_TYPE_Q4_0] = infer__wasm_q4_0_gemm;
    k->gemm[INFER_TYPE_Q4_1] = infer__wasm_q4_1_gemm;
    k->vec_dot[INFER_TYPE_Q4_K] = infer__wasm_q4_K_dot;
    k->vec_dot[INFER_TYPE_Q6_K] = infer__wasm_q6_K_dot;
    k->vec_dot[INFER_TYPE_MXFP4] = infer__wasm_mxfp4_dot;
    k->from_float[INFER_TYPE_Q8_0] = infer__wasm_q8_0_from_float;
    k->from_float[INFER_TYPE_Q8_1] = infer__wasm_q8_1_from_float;
    k->from_float[INFER_TYPE_Q8_K] = infer__wasm_q8_K_from_float;
    return 1;
#else
    (void)k;
    return 0;
#endif
}
