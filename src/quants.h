/* quants.h - the formats' block layouts (ggml's, byte for byte) and the helpers reading their packed fields, for every kernel. */
#ifndef INFER_QUANTS_H
#define INFER_QUANTS_H
#include "internal.h"

/* ---- 32-value formats (quants.c) ---- */

#define INFER__QK 32

typedef struct { uint16_t d; uint8_t qs[16]; } infer__block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } infer__block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } infer__block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } infer__block_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } infer__block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[32]; } infer__block_q8_1; /* s = d * sum(qs) */

/* The fifth bit of value j sits in bit j of the 32-bit qh. */
static uint32_t infer__qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

/* ---- 256-value formats and IQ4 (quants_k.c) ---- */

#define INFER__QK_K 256

/* 2 bits per value; 16 sub-blocks of 16 with a 4-bit scale and 4-bit min
   each; x = d * scale * q - dmin * min */
typedef struct {
    uint8_t scales[16]; /* low nibble scale, high nibble min */
    uint8_t qs[64];     /* value 32*k + l of each 128: bits 2k.. of qs[l] */
    uint16_t d, dmin;
} infer__block_q2_K;

/* 3 bits per value (2 in qs, the third in hmask); 16 sub-blocks of 16 with
   6-bit signed scales (offset 32); x = d * (scale - 32) * (q - 4) */
typedef struct {
    uint8_t hmask[32];  /* bit k of hmask[l]: third bit of value 32*k + l */
    uint8_t qs[64];
    uint8_t scales[12]; /* 16 six-bit scales, packed */
    uint16_t d;
} infer__block_q3_K;

/* 4 bits per value; 8 sub-blocks of 32 with 6-bit scale and min;
   x = d * scale * q - dmin * min */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12]; /* 8 six-bit scales and 8 six-bit mins, packed */
    uint8_t qs[128];    /* in each 64: low nibbles the first 32, high nibbles the next */
} infer__block_q4_K;

/* Q4_K plus a fifth bit per value in qh */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];     /* bit k of qh[l]: fifth bit of value 32*k + l */
    uint8_t qs[128];
} infer__block_q5_K;

/* 6 bits per value (4 in ql, 2 in qh); 16 sub-blocks of 16 with int8
   scales; x = d * scale * (q - 32) */
typedef struct {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
} infer__block_q6_K;

/* the activations the 256-value formats are dotted with */
typedef struct {
    float d;
    int8_t qs[256];
    int16_t bsums[16]; /* sum of each 16 consecutive qs */
} infer__block_q8_K;

/* 4-bit indices into infer__iq4nl_values; x = d * values[q] */
typedef struct {
    uint16_t d;
    uint8_t qs[16]; /* value j in the low nibble of qs[j], j + 16 in the high */
} infer__block_iq4_nl;

/* IQ4_NL's grid in 8 sub-blocks of 32 with 6-bit scales (offset 32);
   x = d * (scale - 32) * values[q] */
typedef struct {
    uint16_t d;
    uint16_t scales_h;   /* high 2 bits of sub-block scale k at bits 2k.. */
    uint8_t scales_l[4]; /* low 4 bits: sub-block 2i low nibble, 2i+1 high */
    uint8_t qs[128];
} infer__block_iq4_xs;

static const int8_t infer__iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                               1,    13,   25,  38,  53,  69,  89,  113};

/* Q4_K/Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes:
   j < 4 in the low 6 bits of bytes j and j+4; j >= 4 in the nibbles of
   byte j+4 with their top 2 bits in the spare bits of bytes j-4 and j. */
static void infer__scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 of Q4_K/Q5_K's six-bit scales (bytes 0..7) and mins (8..15) at
   once, word by word: the SIMD kernels load them as one vector. */
static void infer__k4_scales(const uint8_t *packed, uint8_t out[16]) {
    uint32_t u[4];
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    uint32_t mins_lo;
    memcpy(u, packed, 12);
    u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    mins_lo = u[1] & k1;
    u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    u[2] = mins_lo;
    u[0] &= k1;
    memcpy(out, u, 16);
}

/* Q3_K sub-block j's scale (offset removed): low 4 bits in a nibble of the
   first 8 bytes, high 2 bits in bytes 8..11. */
static int infer__scale_q3_K(int j, const uint8_t *s) {
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* value 128h + 32k + l (k = 0..3, l < 32) of a Q6_K block, 0..63 */
static int infer__q6_K_q(const infer__block_q6_K *x, int h, int k, int l) {
    const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
    int lo = k < 2 ? ql[32 * k + l] & 0xF : ql[32 * (k - 2) + l] >> 4;
    return lo | ((qh[l] >> (2 * k)) & 3) << 4;
}

/* llama.cpp's x86 order for 32-value blocks (its vec_dot and tinyBLAS
   tiles, which made ../shared/reference): 8 float lanes, lane l holding the
   products of values 4l..4l+3, each block added by one fused multiply-add
   per lane of d_w * d_x, and the lanes summed as its hsum_float_8 does. */
INFER__UNUSED static float infer__hsum8(const float *a) {
    float r0 = a[4] + a[0], r1 = a[5] + a[1], r2 = a[6] + a[2], r3 = a[7] + a[3];
    return (r0 + r2) + (r1 + r3);
}

/* The sum of 16 lanes as an AVX-512 horizontal add takes it: halves
   added (lane i with i + 8), then again, to one (lane is overwritten). */
INFER__UNUSED static float infer__sum16_tree(float *lane) {
    int i, l;
    for (l = 8; l >= 1; l /= 2)
        for (i = 0; i < l; i++) lane[i] = lane[i] + lane[i + l];
    return lane[0];
}

/* llama.cpp's F16 dot for a single token (ggml_vec_dot_f16 on AVX-512):
   four accumulators of 16 lanes over each 64 values (value i to
   accumulator i / 16 mod 4, lane i mod 16), added 0+2 and 1+3, then those
   two, then the tree; values past the last whole 64 added in double. a's
   values are a_stride apart (packed rows), b's contiguous. */
INFER__UNUSED static float infer__f16_dot_llama_vec(const uint16_t *a, size_t a_stride, const uint16_t *b, int n) {
    float acc[64] = {0};
    double sum;
    int i, l, np = n - n % 64;
    for (i = 0; i < np; i++)
        acc[i % 64] = infer__fmaf(infer__fp16_to_fp32(a[(size_t)i * a_stride]), infer__fp16_to_fp32(b[i]), acc[i % 64]);
    for (l = 0; l < 16; l++) acc[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]);
    sum = (double)infer__sum16_tree(acc);
    for (i = np; i < n; i++) sum += (double)(infer__fp16_to_fp32(a[(size_t)i * a_stride]) * infer__fp16_to_fp32(b[i]));
    return (float)sum;
}

/* F16 . F16 as llama.cpp's batches run on AVX-512 (its tinyBLAS): 16
   lanes, lane l taking values l, l + 16, ... by fused multiply-adds, then
   the tree. tinyBLAS takes whole vectors only; for other lengths llama.cpp
   falls back to ggml_vec_dot_f16, and so does this. */
INFER__UNUSED static float infer__f16_dot_llama(const uint16_t *a, size_t a_stride, const uint16_t *b, int n) {
    float lane[16] = {0};
    int i, l;
    if (n % 16) return infer__f16_dot_llama_vec(a, a_stride, b, n);
    for (i = 0; i < n; i += 16)
        for (l = 0; l < 16; l++)
            lane[l] = infer__fmaf(infer__fp16_to_fp32(a[(size_t)(i + l) * a_stride]), infer__fp16_to_fp32(b[i + l]), lane[l]);
    return infer__sum16_tree(lane);
}

#endif /* INFER_QUANTS_H */
