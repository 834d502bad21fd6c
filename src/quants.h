/* quants.h - what the CPU's kernels share beyond the formats themselves (formats.h): Q4_K's scales unpacked at once, llama.cpp's orders of summing. */
#ifndef INFER_QUANTS_H
#define INFER_QUANTS_H
#include "internal.h"
#include "formats.h"

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
