/* quants.c - weight formats: block layouts, dequantizing, quantizing the
   activations, and the dot products the matmul is built from, as plain C.
   These reference kernels are always compiled; simd_*.c override them per
   instruction set (cpu.c chooses). Each format converts the
   activation row once to its vec_dot_type (as llama.cpp does: Q8_0 for
   Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the 256-value
   formats of quants_k.c, F16 for F16, BF16 for BF16), so a weight row is
   then dotted without float conversion of the activations. The table at
   the end covers every GGUF type; quants_k.c holds the K-quant and IQ4
   kernels it names. */
#include "internal.h"
#include "quants.h"

#define INFER__H(x) infer__fp16_to_fp32(x)

/* ---- float formats ---- */

static void infer__f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void infer__f32_from_float(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static float infer__f32_dot(int n, const void *w, const void *x) {
    const float *a = (const float *)w, *b = (const float *)x;
    double s = 0;
    int i;
    for (i = 0; i < n; i++) s += (double)(a[i] * b[i]);
    return (float)s;
}

static void infer__f16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = (const uint16_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = INFER__H(s[i]);
}
static void infer__f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i;
    for (i = 0; i < n; i++) d[i] = infer__fp32_to_fp16(src[i]);
}
static float infer__f16_dot(int n, const void *w, const void *x) {
    return infer__f16_dot_llama((const uint16_t *)w, 1, (const uint16_t *)x, n);
}

static void infer__bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = (const uint16_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = infer__bf16_to_fp32(s[i]);
}
static void infer__bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i;
    for (i = 0; i < n; i++) d[i] = infer__fp32_to_bf16(src[i]);
}
static float infer__bf16_dot(int n, const void *w, const void *x) {
    const uint16_t *a = (const uint16_t *)w, *b = (const uint16_t *)x;
    double s = 0;
    int i;
    for (i = 0; i < n; i++) s += (double)(infer__bf16_to_fp32(a[i]) * infer__bf16_to_fp32(b[i]));
    return (float)s;
}

/* ---- 8-bit activation formats ---- */

static void infer__q8_0_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_0 *y = (infer__block_q8_0 *)dst;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, src += INFER__QK) {
        float amax = 0, d, id;
        for (j = 0; j < INFER__QK; j++) amax = INFER__MAX(amax, fabsf(src[j]));
        d = amax / 127.0f;
        id = amax != 0.0f ? 127.0f / amax : 0.0f;
        if (isinf(id)) id = 0.0f; /* subnormal amax: the scale is 0 anyway, and inf would not fit an int8 */
        y[b].d = infer__fp32_to_fp16(d);
        for (j = 0; j < INFER__QK; j++) y[b].qs[j] = (int8_t)nearbyintf(src[j] * id);
    }
}
static void infer__q8_0_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++) {
        float d = INFER__H(x[b].d);
        for (j = 0; j < INFER__QK; j++) *dst++ = x[b].qs[j] * d;
    }
}

static float infer__q8_0_dot(int n, const void *w, const void *xv) {
    const infer__block_q8_0 *a = (const infer__block_q8_0 *)w, *x = (const infer__block_q8_0 *)xv;
    float s = 0;
    int b, j;
    float acc[8] = {0};
    (void)s;
    for (b = 0; b < n / INFER__QK; b++) {
        float d = INFER__H(a[b].d) * INFER__H(x[b].d);
        int l;
        for (l = 0; l < 8; l++) {
            int sum = 0;
            for (j = 4 * l; j < 4 * l + 4; j++) sum += a[b].qs[j] * x[b].qs[j];
            acc[l] = infer__fmaf(d, (float)sum, acc[l]);
        }
    }
    return infer__hsum8(acc);
}

static void infer__q8_1_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, dst += INFER__QK)
        for (j = 0; j < INFER__QK; j++) dst[j] = INFER__H(x[b].d) * x[b].qs[j];
}

static void infer__q8_1_from_float(const float *src, void *dst, int64_t n) {
    infer__block_q8_1 *y = (infer__block_q8_1 *)dst;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, src += INFER__QK) {
        float amax = 0, d, id;
        int sum = 0;
        for (j = 0; j < INFER__QK; j++) amax = INFER__MAX(amax, fabsf(src[j]));
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) id = 0.0f; /* as in Q8_0 */
        for (j = 0; j < INFER__QK; j++) {
            y[b].qs[j] = (int8_t)infer__roundf(src[j] * id);
            sum += y[b].qs[j];
        }
        y[b].d = infer__fp32_to_fp16(d);
        y[b].s = infer__fp32_to_fp16((float)sum * d);
    }
}

/* ---- 4- and 5-bit weight formats ---- */

static void infer__q4_0_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_q4_0 *x = (const infer__block_q4_0 *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, dst += INFER__QK) {
        float d = INFER__H(x[b].d);
        for (j = 0; j < 16; j++) {
            dst[j] = ((x[b].qs[j] & 0x0f) - 8) * d;
            dst[j + 16] = ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}
static float infer__q4_0_dot(int n, const void *w, const void *xv) {
    const infer__block_q4_0 *a = (const infer__block_q4_0 *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    float s = 0;
    int b, j;
    for (b = 0; b < n / INFER__QK; b++) {
        int sum = 0;
        for (j = 0; j < 16; j++)
            sum += ((a[b].qs[j] & 0x0f) - 8) * x[b].qs[j] + ((a[b].qs[j] >> 4) - 8) * x[b].qs[j + 16];
        s += sum * (INFER__H(a[b].d) * INFER__H(x[b].d));
    }
    return s;
}

static void infer__q4_1_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_q4_1 *x = (const infer__block_q4_1 *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, dst += INFER__QK) {
        float d = INFER__H(x[b].d), m = INFER__H(x[b].m);
        for (j = 0; j < 16; j++) {
            dst[j] = (x[b].qs[j] & 0x0f) * d + m;
            dst[j + 16] = (x[b].qs[j] >> 4) * d + m;
        }
    }
}
static float infer__q4_1_dot(int n, const void *w, const void *xv) {
    const infer__block_q4_1 *a = (const infer__block_q4_1 *)w;
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)xv;
    float s = 0;
    int b, j;
    for (b = 0; b < n / INFER__QK; b++) {
        int sum = 0;
        for (j = 0; j < 16; j++) sum += (a[b].qs[j] & 0x0f) * x[b].qs[j] + (a[b].qs[j] >> 4) * x[b].qs[j + 16];
        s += sum * (INFER__H(a[b].d) * INFER__H(x[b].d)) + INFER__H(a[b].m) * INFER__H(x[b].s);
    }
    return s;
}

static void infer__q5_0_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_q5_0 *x = (const infer__block_q5_0 *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, dst += INFER__QK) {
        float d = INFER__H(x[b].d);
        uint32_t qh = infer__qh(x[b].qh);
        for (j = 0; j < 16; j++) {
            dst[j] = ((int)((x[b].qs[j] & 0x0f) | ((qh >> j) & 1) << 4) - 16) * d;
            dst[j + 16] = ((int)((x[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16) * d;
        }
    }
}
static float infer__q5_0_dot(int n, const void *w, const void *xv) {
    const infer__block_q5_0 *a = (const infer__block_q5_0 *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    float acc[8] = {0};
    int b, j;
    for (b = 0; b < n / INFER__QK; b++) {
        uint32_t qh = infer__qh(a[b].qh);
        int v[32], l;
        float d = INFER__H(a[b].d) * INFER__H(x[b].d);
        for (j = 0; j < 16; j++) {
            v[j] = (int)((a[b].qs[j] & 0x0f) | ((qh >> j) & 1) << 4) - 16;
            v[j + 16] = (int)((a[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16;
        }
        for (l = 0; l < 8; l++) {
            int sum = 0;
            for (j = 4 * l; j < 4 * l + 4; j++) sum += v[j] * x[b].qs[j];
            acc[l] = infer__fmaf(d, (float)sum, acc[l]);
        }
    }
    return infer__hsum8(acc);
}

static void infer__q5_1_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_q5_1 *x = (const infer__block_q5_1 *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, dst += INFER__QK) {
        float d = INFER__H(x[b].d), m = INFER__H(x[b].m);
        uint32_t qh = infer__qh(x[b].qh);
        for (j = 0; j < 16; j++) {
            dst[j] = ((x[b].qs[j] & 0x0f) | ((qh >> j) & 1) << 4) * d + m;
            dst[j + 16] = ((x[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) * d + m;
        }
    }
}
static float infer__q5_1_dot(int n, const void *w, const void *xv) {
    const infer__block_q5_1 *a = (const infer__block_q5_1 *)w;
    const infer__block_q8_1 *x = (const infer__block_q8_1 *)xv;
    float s = 0;
    int b, j;
    for (b = 0; b < n / INFER__QK; b++) {
        uint32_t qh = infer__qh(a[b].qh);
        int sum = 0;
        for (j = 0; j < 16; j++) {
            int lo = (int)((a[b].qs[j] & 0x0f) | ((qh >> j) & 1) << 4);
            int hi = (int)((a[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
            sum += lo * x[b].qs[j] + hi * x[b].qs[j + 16];
        }
        s += sum * (INFER__H(a[b].d) * INFER__H(x[b].d)) + INFER__H(a[b].m) * INFER__H(x[b].s);
    }
    return s;
}

/* ---- MXFP4 ---- */

static void infer__mxfp4_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_mxfp4 *x = (const infer__block_mxfp4 *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, dst += INFER__QK) {
        float d = infer__e8m0_half(x[b].e);
        for (j = 0; j < 16; j++) {
            dst[j] = d * infer__mxfp4_values[x[b].qs[j] & 0xF];
            dst[j + 16] = d * infer__mxfp4_values[x[b].qs[j] >> 4];
        }
    }
}

/* ggml's generic order: the block's two integer halves added, then one
   float multiply-add per block */
static float infer__mxfp4_dot(int n, const void *w, const void *xv) {
    const infer__block_mxfp4 *a = (const infer__block_mxfp4 *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    float s = 0;
    int b, j;
    for (b = 0; b < n / INFER__QK; b++) {
        float d = INFER__H(x[b].d) * infer__e8m0_half(a[b].e);
        int sumi1 = 0, sumi2 = 0;
        for (j = 0; j < 16; j++) {
            sumi1 += x[b].qs[j] * infer__mxfp4_values[a[b].qs[j] & 0xF];
            sumi2 += x[b].qs[j + 16] * infer__mxfp4_values[a[b].qs[j] >> 4];
        }
        s += d * (float)(sumi1 + sumi2);
    }
    return s;
}

/* ---- reference quantizers (llama.cpp's) ---- */

/* Q4_0: the signed value of largest magnitude m becomes -8: d = m / -8,
   q = min(15, trunc(x/d + 8.5)). */
static void infer__quantize_row_q4_0(const float *x, void *dst, int64_t n) {
    infer__block_q4_0 *y = (infer__block_q4_0 *)dst;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, x += INFER__QK) {
        float amax = 0, max = 0, d, id;
        for (j = 0; j < INFER__QK; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        d = max / -8;
        id = d != 0.0f ? 1 / d : 0.0f;
        y[b].d = infer__fp32_to_fp16(d);
        for (j = 0; j < 16; j++) {
            int q0 = INFER__MIN(15, (int)(x[j] * id + 8.5f)), q1 = INFER__MIN(15, (int)(x[j + 16] * id + 8.5f));
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* Q4_1: min and max; d = (max - min) / 15, q = trunc((x - min)/d + 0.5). */
static void infer__quantize_row_q4_1(const float *x, void *dst, int64_t n) {
    infer__block_q4_1 *y = (infer__block_q4_1 *)dst;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, x += INFER__QK) {
        float min = FLT_MAX, max = -FLT_MAX, d, id;
        for (j = 0; j < INFER__QK; j++) min = INFER__MIN(min, x[j]), max = INFER__MAX(max, x[j]);
        d = (max - min) / 15;
        id = d != 0.0f ? 1 / d : 0.0f;
        y[b].d = infer__fp32_to_fp16(d);
        y[b].m = infer__fp32_to_fp16(min);
        for (j = 0; j < 16; j++) {
            int q0 = INFER__MIN(15, (int)((x[j] - min) * id + 0.5f)), q1 = INFER__MIN(15, (int)((x[j + 16] - min) * id + 0.5f));
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

static void infer__put_qh(uint8_t qh[4], uint32_t v) {
    qh[0] = (uint8_t)v, qh[1] = (uint8_t)(v >> 8), qh[2] = (uint8_t)(v >> 16), qh[3] = (uint8_t)(v >> 24);
}

/* Q5_0: as Q4_0 with 32 levels: d = m / -16, q = min(31, trunc(x/d + 16.5)). */
static void infer__quantize_row_q5_0(const float *x, void *dst, int64_t n) {
    infer__block_q5_0 *y = (infer__block_q5_0 *)dst;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, x += INFER__QK) {
        float amax = 0, max = 0, d, id;
        uint32_t qh = 0;
        for (j = 0; j < INFER__QK; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        d = max / -16;
        id = d != 0.0f ? 1 / d : 0.0f;
        y[b].d = infer__fp32_to_fp16(d);
        for (j = 0; j < 16; j++) {
            int q0 = INFER__MIN(31, (int)(x[j] * id + 16.5f)), q1 = INFER__MIN(31, (int)(x[j + 16] * id + 16.5f));
            y[b].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        infer__put_qh(y[b].qh, qh);
    }
}

/* Q5_1: as Q4_1 with 32 levels. */
static void infer__quantize_row_q5_1(const float *x, void *dst, int64_t n) {
    infer__block_q5_1 *y = (infer__block_q5_1 *)dst;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, x += INFER__QK) {
        float min = FLT_MAX, max = -FLT_MAX, d, id;
        uint32_t qh = 0;
        for (j = 0; j < INFER__QK; j++) min = INFER__MIN(min, x[j]), max = INFER__MAX(max, x[j]);
        d = (max - min) / 31;
        id = d != 0.0f ? 1 / d : 0.0f;
        y[b].d = infer__fp32_to_fp16(d);
        y[b].m = infer__fp32_to_fp16(min);
        for (j = 0; j < 16; j++) {
            int q0 = INFER__MIN(31, (int)((x[j] - min) * id + 0.5f)), q1 = INFER__MIN(31, (int)((x[j + 16] - min) * id + 0.5f));
            y[b].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        infer__put_qh(y[b].qh, qh);
    }
}

/* Q8_0: d = amax / 127, q = round(x/d) (halves away from zero). */
static void infer__quantize_row_q8_0(const float *x, void *dst, int64_t n) {
    infer__block_q8_0 *y = (infer__block_q8_0 *)dst;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK; b++, x += INFER__QK) {
        float amax = 0, d, id;
        for (j = 0; j < INFER__QK; j++) amax = INFER__MAX(amax, fabsf(x[j]));
        d = amax / 127;
        id = d != 0.0f ? 1 / d : 0.0f;
        y[b].d = infer__fp32_to_fp16(d);
        for (j = 0; j < INFER__QK; j++) y[b].qs[j] = (int8_t)infer__roundf(x[j] * id);
    }
}

/* MXFP4 (ggml's reference): the exponent from the block's max magnitude
   (so that it lands on the grid's top, 12 * 2^(e-128) >= amax), each value
   the nearest grid point, the first on a tie. The exponent is clamped at 0
   where amax is below the subnormal scale (ggml's cast would wrap). */
static void infer__quantize_row_mxfp4(const float *x, void *dst, int64_t n) {
    infer__block_mxfp4 *y = (infer__block_mxfp4 *)dst;
    int64_t b;
    int j, i;
    for (b = 0; b < n / INFER__QK; b++, x += INFER__QK) {
        float amax = 0, d;
        uint8_t q[INFER__QK];
        for (j = 0; j < INFER__QK; j++) amax = INFER__MAX(amax, fabsf(x[j]));
        if (amax > 0) {
            float e = floorf(log2f(amax)) - 2 + 127;
            y[b].e = (uint8_t)(e < 0 ? 0 : e > 255 ? 255 : e);
        } else {
            y[b].e = 0;
        }
        d = infer__e8m0_half(y[b].e);
        for (j = 0; j < INFER__QK; j++) {
            float best = fabsf(infer__mxfp4_values[0] * d - x[j]);
            q[j] = 0;
            for (i = 1; i < 16; i++) {
                float err = fabsf(infer__mxfp4_values[i] * d - x[j]);
                if (err < best) best = err, q[j] = (uint8_t)i;
            }
        }
        for (j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
    }
}

/* ---- the table ---- */

/* Block sizes of every GGUF type, so any file's tensor table can be read;
   the ones with kernels are computable. */
static const infer__type_traits infer__type_table[INFER_TYPE_COUNT] = {
#define INFER__NONE(format, vdt) {format, 0, vdt, NULL, NULL, NULL, NULL}
    /* 0 */ {INFER__FORMAT_F32, 1, INFER_TYPE_F32, infer__f32_to_float, infer__f32_from_float, infer__f32_dot, infer__f32_from_float},
    /* 1 */ {INFER__FORMAT_F16, 1, INFER_TYPE_F16, infer__f16_to_float, infer__f16_from_float, infer__f16_dot, infer__f16_from_float},
    /* 2 */ {INFER__FORMAT_Q4_0, 1, INFER_TYPE_Q8_0, infer__q4_0_to_float, NULL, infer__q4_0_dot, infer__quantize_row_q4_0},
    /* 3 */ {INFER__FORMAT_Q4_1, 1, INFER_TYPE_Q8_1, infer__q4_1_to_float, NULL, infer__q4_1_dot, infer__quantize_row_q4_1},
    /* 4 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 5 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 6 */ {INFER__FORMAT_Q5_0, 1, INFER_TYPE_Q8_0, infer__q5_0_to_float, NULL, infer__q5_0_dot, infer__quantize_row_q5_0},
    /* 7 */ {INFER__FORMAT_Q5_1, 1, INFER_TYPE_Q8_1, infer__q5_1_to_float, NULL, infer__q5_1_dot, infer__quantize_row_q5_1},
    /* 8 */ {INFER__FORMAT_Q8_0, 1, INFER_TYPE_Q8_0, infer__q8_0_to_float, infer__q8_0_from_float, infer__q8_0_dot, infer__quantize_row_q8_0},
    /* 9 */ {INFER__FORMAT_Q8_1, 0, INFER_TYPE_Q8_1, infer__q8_1_to_float, infer__q8_1_from_float, NULL, NULL},
    /* 10 */ {INFER__FORMAT_Q2_K, 1, INFER_TYPE_Q8_K, infer__q2_K_to_float, NULL, infer__q2_K_dot, infer__quantize_row_q2_K},
    /* 11 */ {INFER__FORMAT_Q3_K, 1, INFER_TYPE_Q8_K, infer__q3_K_to_float, NULL, infer__q3_K_dot, infer__quantize_row_q3_K},
    /* 12 */ {INFER__FORMAT_Q4_K, 1, INFER_TYPE_Q8_K, infer__q4_K_to_float, NULL, infer__q4_K_dot, infer__quantize_row_q4_K},
    /* 13 */ {INFER__FORMAT_Q5_K, 1, INFER_TYPE_Q8_K, infer__q5_K_to_float, NULL, infer__q5_K_dot, infer__quantize_row_q5_K},
    /* 14 */ {INFER__FORMAT_Q6_K, 1, INFER_TYPE_Q8_K, infer__q6_K_to_float, NULL, infer__q6_K_dot, infer__quantize_row_q6_K},
    /* 15: activations only (no weight kernel) */
    /* 15 */ {INFER__FORMAT_Q8_K, 0, INFER_TYPE_Q8_K, infer__q8_K_to_float, infer__q8_K_from_float, NULL, infer__q8_K_from_float},
    /* 16 */ INFER__NONE(INFER__FORMAT_IQ2_XXS, INFER_TYPE_Q8_K),
    /* 17 */ INFER__NONE(INFER__FORMAT_IQ2_XS, INFER_TYPE_Q8_K),
    /* 18 */ INFER__NONE(INFER__FORMAT_IQ3_XXS, INFER_TYPE_Q8_K),
    /* 19 */ INFER__NONE(INFER__FORMAT_IQ1_S, INFER_TYPE_Q8_K),
    /* 20 */ {INFER__FORMAT_IQ4_NL, 1, INFER_TYPE_Q8_0, infer__iq4_nl_to_float, NULL, infer__iq4_nl_dot, infer__quantize_row_iq4_nl},
    /* 21 */ INFER__NONE(INFER__FORMAT_IQ3_S, INFER_TYPE_Q8_K),
    /* 22 */ INFER__NONE(INFER__FORMAT_IQ2_S, INFER_TYPE_Q8_K),
    /* 23 */ {INFER__FORMAT_IQ4_XS, 1, INFER_TYPE_Q8_K, infer__iq4_xs_to_float, NULL, infer__iq4_xs_dot, infer__quantize_row_iq4_xs},
    /* 24 */ INFER__NONE(INFER__FORMAT_I8, INFER_TYPE_F32),
    /* 25 */ INFER__NONE(INFER__FORMAT_I16, INFER_TYPE_F32),
    /* 26 */ INFER__NONE(INFER__FORMAT_I32, INFER_TYPE_F32),
    /* 27 */ INFER__NONE(INFER__FORMAT_I64, INFER_TYPE_F32),
    /* 28 */ INFER__NONE(INFER__FORMAT_F64, INFER_TYPE_F32),
    /* 29 */ INFER__NONE(INFER__FORMAT_IQ1_M, INFER_TYPE_Q8_K),
    /* 30 */ {INFER__FORMAT_BF16, 1, INFER_TYPE_BF16, infer__bf16_to_float, infer__bf16_from_float, infer__bf16_dot, infer__bf16_from_float},
    /* 31 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 32 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 33 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 34 */ INFER__NONE(INFER__FORMAT_TQ1_0, INFER_TYPE_Q8_K),
    /* 35 */ INFER__NONE(INFER__FORMAT_TQ2_0, INFER_TYPE_Q8_K),
    /* 36 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 37 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 38 */ INFER__NONE(INFER__FORMAT_UNASSIGNED, INFER_TYPE_F32),
    /* 39 */ {INFER__FORMAT_MXFP4, 1, INFER_TYPE_Q8_0, infer__mxfp4_to_float, NULL, infer__mxfp4_dot, infer__quantize_row_mxfp4},
#undef INFER__NONE
};

static const infer__type_traits *infer__traits(infer_type t) {
    return (unsigned)t < INFER_TYPE_COUNT ? &infer__type_table[t] : NULL;
}

static size_t infer__row_size(infer_type t, int64_t n) {
    const infer__type_traits *tt = infer__traits(t);
    return (size_t)(n / tt->block_size) * (size_t)tt->type_size;
}

INFERDEF const char *infer_type_name(infer_type t) {
    const infer__type_traits *tt = infer__traits(t);
    return tt && tt->name ? tt->name : "unknown";
}
