/* quants_k.c - the K-quant and IQ4 formats, plain C: Q2_K..Q6_K and IQ4_XS
   (256-value super-blocks, dotted against Q8_K activations), IQ4_NL
   (32-value blocks dotted against Q8_0), and Q8_K itself. Block layouts are
   ggml's, byte for byte; the dot products add integer products per
   sub-block and scale once per (super-)block, as ggml's generic code does.
   The quantizers are llama.cpp's reference (no importance matrix) ones:
   make_qkx2_quants (a scale and a min, refined by weighted least squares
   over a range of trial scales) for Q2_K/Q4_K/Q5_K, make_qx_quants (signed,
   trial scales around nmax) for Q6_K, make_q3_quants (signed, iterative
   per-value refinement) for Q3_K, and a best-of-15-scales search over the
   non-linear grid for IQ4_NL/IQ4_XS. Sub-block scales are then quantized
   against one fp16 super-block scale, and every value is re-quantized with
   the scale it will really be multiplied by. */
#include "internal.h"
#include "quants.h"

#define INFER__GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even (the float adder rounds for us), for
   |f| < 2^22; larger magnitudes saturate, NaN gives 0. */
static int infer__nearest_int(float f) {
    float v;
    int32_t i;
    if (!(fabsf(f) <= 4194303.0f)) return f > 0 ? 4194303 : f < 0 ? -4194303 : 0;
    v = f + 12582912.0f;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* ---- Q8_K ---- */

static void infer__q8_K_from_float(const float *x, void *dst, int64_t n) {
    infer__block_q8_K *y = (infer__block_q8_K *)dst;
    int64_t b;
    int j, k;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        float max = 0, amax = 0, iscale;
        for (j = 0; j < INFER__QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) amax = ax, max = x[j];
        }
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the largest magnitude becomes -127 (so d carries the sign) */
        iscale = -127.0f / max;
        for (j = 0; j < INFER__QK_K; j++) y[b].qs[j] = (int8_t)INFER__MIN(127, infer__nearest_int(iscale * x[j]));
        for (j = 0; j < INFER__QK_K / 16; j++) {
            int sum = 0;
            for (k = 0; k < 16; k++) sum += y[b].qs[16 * j + k];
            y[b].bsums[j] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

static void infer__q8_K_to_float(const void *src, float *dst, int64_t n) {
    const infer__block_q8_K *x = (const infer__block_q8_K *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / INFER__QK_K; b++)
        for (j = 0; j < INFER__QK_K; j++) *dst++ = x[b].d * x[b].qs[j];
}

/* ---- Q2_K ---- */

static void infer__q2_K_to_float(const void *src, float *y, int64_t n) {
    const infer__block_q2_K *x = (const infer__block_q2_K *)src;
    int64_t b;
    int h, k, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        float d = infer__fp16_to_fp32(x[b].d), dmin = infer__fp16_to_fp32(x[b].dmin);
        for (h = 0; h < 2; h++) {
            const uint8_t *q = x[b].qs + 32 * h;
            for (k = 0; k < 8; k++) { /* sub-block 8h + k: 16 values, bits 2(k/2).. of q[16(k%2) + l] */
                uint8_t sc = x[b].scales[8 * h + k];
                float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
                int shift = 2 * (k / 2);
                const uint8_t *qq = q + 16 * (k % 2);
                for (l = 0; l < 16; l++) *y++ = dl * ((qq[l] >> shift) & 3) - ml;
            }
        }
    }
}

static float infer__q2_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q2_K *a = (const infer__block_q2_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float s = 0;
    int b, h, k, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *q8 = x[b].qs;
        int sumi = 0, summ = 0;
        for (k = 0; k < 16; k++) summ += x[b].bsums[k] * (a[b].scales[k] >> 4);
        for (h = 0; h < 2; h++) {
            const uint8_t *q = a[b].qs + 32 * h;
            for (k = 0; k < 8; k++, q8 += 16) {
                int shift = 2 * (k / 2), sum = 0;
                const uint8_t *qq = q + 16 * (k % 2);
                for (l = 0; l < 16; l++) sum += q8[l] * ((qq[l] >> shift) & 3);
                sumi += (a[b].scales[8 * h + k] & 0xF) * sum;
            }
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi - x[b].d * infer__fp16_to_fp32(a[b].dmin) * summ;
    }
    return s;
}

/* ---- Q3_K ---- */

static void infer__q3_K_to_float(const void *src, float *y, int64_t n) {
    const infer__block_q3_K *x = (const infer__block_q3_K *)src;
    int64_t b;
    int h, k, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        float d = infer__fp16_to_fp32(x[b].d);
        for (h = 0; h < 2; h++) {
            const uint8_t *q = x[b].qs + 32 * h;
            for (k = 0; k < 8; k++) {
                int shift = 2 * (k / 2), hbit = 4 * h + k / 2, off = 16 * (k % 2);
                float dl = d * infer__scale_q3_K(8 * h + k, x[b].scales);
                for (l = 0; l < 16; l++)
                    *y++ = dl * (((q[off + l] >> shift) & 3) - ((x[b].hmask[off + l] >> hbit) & 1 ? 0 : 4));
            }
        }
    }
}

static float infer__q3_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q3_K *a = (const infer__block_q3_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float s = 0;
    int b, h, k, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *q8 = x[b].qs;
        int sumi = 0;
        for (h = 0; h < 2; h++) {
            const uint8_t *q = a[b].qs + 32 * h;
            for (k = 0; k < 8; k++, q8 += 16) {
                int shift = 2 * (k / 2), hbit = 4 * h + k / 2, off = 16 * (k % 2), sum = 0;
                for (l = 0; l < 16; l++)
                    sum += q8[l] * (((q[off + l] >> shift) & 3) - ((a[b].hmask[off + l] >> hbit) & 1 ? 0 : 4));
                sumi += infer__scale_q3_K(8 * h + k, a[b].scales) * sum;
            }
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi;
    }
    return s;
}

/* ---- Q4_K ---- */

static void infer__q4_K_to_float(const void *src, float *y, int64_t n) {
    const infer__block_q4_K *x = (const infer__block_q4_K *)src;
    int64_t b;
    int j, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        float d = infer__fp16_to_fp32(x[b].d), dmin = infer__fp16_to_fp32(x[b].dmin);
        const uint8_t *q = x[b].qs;
        for (j = 0; j < 4; j++, q += 32) {
            uint8_t sc1, m1, sc2, m2;
            float d1, dm1, d2, dm2;
            infer__scale_min_k4(2 * j, x[b].scales, &sc1, &m1);
            infer__scale_min_k4(2 * j + 1, x[b].scales, &sc2, &m2);
            d1 = d * sc1, dm1 = dmin * m1, d2 = d * sc2, dm2 = dmin * m2;
            for (l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - dm1;
            for (l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - dm2;
        }
    }
}

static float infer__q4_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q4_K *a = (const infer__block_q4_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float acc = 0, accm = 0;
    int b, j, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const uint8_t *q = a[b].qs;
        const int8_t *q8 = x[b].qs;
        const int16_t *bs = x[b].bsums;
        int sumi = 0, summ = 0;
        for (j = 0; j < 4; j++, q += 32, q8 += 64) {
            uint8_t sc1, m1, sc2, m2;
            int s1 = 0, s2 = 0;
            infer__scale_min_k4(2 * j, a[b].scales, &sc1, &m1);
            infer__scale_min_k4(2 * j + 1, a[b].scales, &sc2, &m2);
            for (l = 0; l < 32; l++) {
                s1 += (q[l] & 0xF) * q8[l];
                s2 += (q[l] >> 4) * q8[l + 32];
            }
            sumi += sc1 * s1 + sc2 * s2;
            summ += m1 * (bs[4 * j] + bs[4 * j + 1]) + m2 * (bs[4 * j + 2] + bs[4 * j + 3]);
        }
        acc = infer__fmaf((float)sumi, infer__fp16_to_fp32(a[b].d) * x[b].d, acc);
        accm = infer__fmaf((float)summ, infer__fp16_to_fp32(a[b].dmin) * x[b].d, accm);
    }
    return acc - accm;
}

/* ---- Q5_K ---- */

static void infer__q5_K_to_float(const void *src, float *y, int64_t n) {
    const infer__block_q5_K *x = (const infer__block_q5_K *)src;
    int64_t b;
    int j, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        float d = infer__fp16_to_fp32(x[b].d), dmin = infer__fp16_to_fp32(x[b].dmin);
        const uint8_t *q = x[b].qs;
        for (j = 0; j < 4; j++, q += 32) {
            uint8_t sc1, m1, sc2, m2;
            float d1, dm1, d2, dm2;
            infer__scale_min_k4(2 * j, x[b].scales, &sc1, &m1);
            infer__scale_min_k4(2 * j + 1, x[b].scales, &sc2, &m2);
            d1 = d * sc1, dm1 = dmin * m1, d2 = d * sc2, dm2 = dmin * m2;
            for (l = 0; l < 32; l++) *y++ = d1 * ((q[l] & 0xF) | ((x[b].qh[l] >> (2 * j)) & 1) << 4) - dm1;
            for (l = 0; l < 32; l++) *y++ = d2 * ((q[l] >> 4) | ((x[b].qh[l] >> (2 * j + 1)) & 1) << 4) - dm2;
        }
    }
}

static float infer__q5_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q5_K *a = (const infer__block_q5_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float s = 0;
    int b, j, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const uint8_t *q = a[b].qs, *qh = a[b].qh;
        const int8_t *q8 = x[b].qs;
        const int16_t *bs = x[b].bsums;
        int sumi = 0, summ = 0;
        for (j = 0; j < 4; j++, q += 32, q8 += 64) {
            uint8_t sc1, m1, sc2, m2;
            int s1 = 0, s2 = 0;
            infer__scale_min_k4(2 * j, a[b].scales, &sc1, &m1);
            infer__scale_min_k4(2 * j + 1, a[b].scales, &sc2, &m2);
            for (l = 0; l < 32; l++) {
                s1 += ((q[l] & 0xF) | ((qh[l] >> (2 * j)) & 1) << 4) * q8[l];
                s2 += ((q[l] >> 4) | ((qh[l] >> (2 * j + 1)) & 1) << 4) * q8[l + 32];
            }
            sumi += sc1 * s1 + sc2 * s2;
            summ += m1 * (bs[4 * j] + bs[4 * j + 1]) + m2 * (bs[4 * j + 2] + bs[4 * j + 3]);
        }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi - x[b].d * infer__fp16_to_fp32(a[b].dmin) * summ;
    }
    return s;
}

/* ---- Q6_K ---- */

static void infer__q6_K_to_float(const void *src, float *y, int64_t n) {
    const infer__block_q6_K *x = (const infer__block_q6_K *)src;
    int64_t b;
    int h, k, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        float d = infer__fp16_to_fp32(x[b].d);
        for (h = 0; h < 2; h++)
            for (k = 0; k < 4; k++)
                for (l = 0; l < 32; l++)
                    *y++ = d * x[b].scales[8 * h + 2 * k + l / 16] * (infer__q6_K_q(&x[b], h, k, l) - 32);
    }
}

static float infer__q6_K_dot(int n, const void *w, const void *xv) {
    const infer__block_q6_K *a = (const infer__block_q6_K *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float s = 0;
    int b, h, k, l;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *q8 = x[b].qs;
        int sumi = 0;
        for (h = 0; h < 2; h++)
            for (k = 0; k < 4; k++, q8 += 32) {
                int s1 = 0, s2 = 0;
                for (l = 0; l < 16; l++) {
                    s1 += (infer__q6_K_q(&a[b], h, k, l) - 32) * q8[l];
                    s2 += (infer__q6_K_q(&a[b], h, k, l + 16) - 32) * q8[l + 16];
                }
                sumi += a[b].scales[8 * h + 2 * k] * s1 + a[b].scales[8 * h + 2 * k + 1] * s2;
            }
        s += x[b].d * infer__fp16_to_fp32(a[b].d) * sumi;
    }
    return s;
}

/* ---- IQ4_NL, IQ4_XS ---- */

static void infer__iq4_nl_to_float(const void *src, float *y, int64_t n) {
    const infer__block_iq4_nl *x = (const infer__block_iq4_nl *)src;
    int64_t b;
    int j;
    for (b = 0; b < n / 32; b++, y += 32) {
        float d = infer__fp16_to_fp32(x[b].d);
        for (j = 0; j < 16; j++) {
            y[j] = d * infer__iq4nl_values[x[b].qs[j] & 0xF];
            y[j + 16] = d * infer__iq4nl_values[x[b].qs[j] >> 4];
        }
    }
}

static float infer__iq4_nl_dot(int n, const void *w, const void *xv) {
    const infer__block_iq4_nl *a = (const infer__block_iq4_nl *)w;
    const infer__block_q8_0 *x = (const infer__block_q8_0 *)xv;
    float s = 0;
    int b, j;
    for (b = 0; b < n / 32; b++) {
        int sum = 0;
        for (j = 0; j < 16; j++)
            sum += infer__iq4nl_values[a[b].qs[j] & 0xF] * x[b].qs[j] + infer__iq4nl_values[a[b].qs[j] >> 4] * x[b].qs[j + 16];
        s += infer__fp16_to_fp32(a[b].d) * infer__fp16_to_fp32(x[b].d) * sum;
    }
    return s;
}

static void infer__iq4_xs_to_float(const void *src, float *y, int64_t n) {
    const infer__block_iq4_xs *x = (const infer__block_iq4_xs *)src;
    int64_t b;
    int k, j;
    for (b = 0; b < n / INFER__QK_K; b++) {
        float d = infer__fp16_to_fp32(x[b].d);
        for (k = 0; k < 8; k++, y += 32) {
            const uint8_t *q = x[b].qs + 16 * k;
            float dl = d * infer__iq4_xs_scale(&x[b], k);
            for (j = 0; j < 16; j++) {
                y[j] = dl * infer__iq4nl_values[q[j] & 0xF];
                y[j + 16] = dl * infer__iq4nl_values[q[j] >> 4];
            }
        }
    }
}

static float infer__iq4_xs_dot(int n, const void *w, const void *xv) {
    const infer__block_iq4_xs *a = (const infer__block_iq4_xs *)w;
    const infer__block_q8_K *x = (const infer__block_q8_K *)xv;
    float s = 0;
    int b, k, j;
    for (b = 0; b < n / INFER__QK_K; b++) {
        const int8_t *q8 = x[b].qs;
        int sumi = 0;
        for (k = 0; k < 8; k++, q8 += 32) {
            const uint8_t *q = a[b].qs + 16 * k;
            int sum = 0;
            for (j = 0; j < 16; j++)
                sum += infer__iq4nl_values[q[j] & 0xF] * q8[j] + infer__iq4nl_values[q[j] >> 4] * q8[j + 16];
            sumi += infer__iq4_xs_scale(&a[b], k) * sum;
        }
        s += infer__fp16_to_fp32(a[b].d) * x[b].d * sumi;
    }
    return s;
}

/* ======================================================================
   Quantizers (llama.cpp's reference algorithms, no importance matrix)
   ====================================================================== */

/* An unsigned nmax+1-level grid with a scale and a min for n values
   (min <= 0 always: the grid starts at or below 0). Starts from the
   min/max fit, then tries iscale = (nmax + rmin + rdelta*is)/(max - min)
   for is = 0..nstep, solving the weighted least-squares scale and min for
   each rounding and keeping the one of least weighted error (absolute
   error if use_mad, else squared). Returns the scale; *the_min = -min. */
static float infer__make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                                     uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad) {
    float min = x[0], max = x[0], sum_w = weights[0], sum_x = sum_w * x[0];
    float iscale, scale, best_mad = 0;
    int i, is;
    for (i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    iscale = nmax / (max - min);
    scale = 1 / iscale;
    for (i = 0; i < n; i++) {
        int l = infer__nearest_int(iscale * (x[i] - min));
        float diff;
        L[i] = (uint8_t)INFER__MAX(0, INFER__MIN(nmax, l));
        diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_mad += weights[i] * diff;
    }
    for (is = 0; is <= nstep; is++) {
        float sum_l = 0, sum_l2 = 0, sum_xl = 0, D;
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        for (i = 0; i < n; i++) {
            int l = infer__nearest_int(iscale * (x[i] - min));
            l = INFER__MAX(0, INFER__MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            sum_l += weights[i] * l;
            sum_l2 += weights[i] * l * l;
            sum_xl += weights[i] * l * x[i];
        }
        D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            float mad = 0;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            for (i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                mad += weights[i] * diff;
            }
            if (mad < best_mad) {
                for (i = 0; i < n; i++) L[i] = Laux[i];
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* A signed grid -nmax..nmax-1 (stored +nmax) for n values, weighted by x^2:
   the value of largest magnitude maps to -nmax, then scales
   -(nmax + 0.1*is)/max for is = -9..9 are tried, keeping the rounding whose
   least-squares scale explains most of x. Returns that scale. */
static float infer__make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0, iscale, sumlx = 0, suml2 = 0, scale, best;
    int i, is;
    for (i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) amax = ax, max = x[i];
    }
    if (amax < INFER__GROUP_MAX_EPS) {
        for (i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    iscale = -nmax / max;
    for (i = 0; i < n; i++) {
        int l = infer__nearest_int(iscale * x[i]);
        float w = x[i] * x[i];
        l = INFER__MAX(-nmax, INFER__MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    scale = suml2 ? sumlx / suml2 : 0.0f;
    best = scale * sumlx;
    for (is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (i = 0; i < n; i++) {
            int l = infer__nearest_int(iscale * x[i]);
            float w = x[i] * x[i];
            l = INFER__MAX(-nmax, INFER__MIN(nmax - 1, l));
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (i = 0; i < n; i++) {
                int l = infer__nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + INFER__MAX(-nmax, INFER__MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's signed grid -nmax..nmax-1 (stored +nmax): starts from the max
   mapping to -nmax, then moves single values to the level the current
   least-squares scale prefers while that improves the fit (up to 5
   sweeps; weights x^2). Returns the scale. */
static float infer__make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0, iscale, sumlx = 0, suml2 = 0;
    int i, itry;
    for (i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) amax = ax, max = x[i];
    }
    if (amax < INFER__GROUP_MAX_EPS) {
        for (i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    iscale = -nmax / max;
    for (i = 0; i < n; i++) {
        int l = infer__nearest_int(iscale * x[i]);
        float w = x[i] * x[i];
        l = INFER__MAX(-nmax, INFER__MIN(nmax - 1, l));
        L[i] = (int8_t)l;
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = infer__nearest_int(x[i] * sl2 / slx);
                new_l = INFER__MAX(-nmax, INFER__MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

static void infer__quantize_row_q2_K(const float *x, void *dst, int64_t n) {
    infer__block_q2_K *y = (infer__block_q2_K *)dst;
    uint8_t L[INFER__QK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    int64_t b;
    int j, l;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        float max_scale = 0, max_min = 0;
        for (j = 0; j < 16; j++) {
            for (l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = infer__make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = 15.0f / max_scale;
            for (j = 0; j < 16; j++) y[b].scales[j] = (uint8_t)INFER__MIN(15, infer__nearest_int(iscale * scales[j]));
            y[b].d = infer__fp32_to_fp16(max_scale / 15.0f);
        } else {
            for (j = 0; j < 16; j++) y[b].scales[j] = 0;
            y[b].d = infer__fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            float iscale = 15.0f / max_min;
            for (j = 0; j < 16; j++) {
                int m = INFER__MAX(0, INFER__MIN(15, infer__nearest_int(iscale * mins[j])));
                y[b].scales[j] = (uint8_t)(y[b].scales[j] | m << 4);
            }
            y[b].dmin = infer__fp32_to_fp16(max_min / 15.0f);
        } else {
            y[b].dmin = infer__fp32_to_fp16(0.f);
        }
        for (j = 0; j < 16; j++) {
            float d = infer__fp16_to_fp32(y[b].d) * (y[b].scales[j] & 0xF), dm;
            if (d == 0.0f) continue;
            dm = infer__fp16_to_fp32(y[b].dmin) * (y[b].scales[j] >> 4);
            for (l = 0; l < 16; l++) {
                int q = infer__nearest_int((x[16 * j + l] + dm) / d);
                L[16 * j + l] = (uint8_t)INFER__MAX(0, INFER__MIN(3, q));
            }
        }
        for (j = 0; j < INFER__QK_K; j += 128)
            for (l = 0; l < 32; l++)
                y[b].qs[j / 4 + l] =
                    (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
}

static void infer__quantize_row_q3_K(const float *x, void *dst, int64_t n) {
    infer__block_q3_K *y = (infer__block_q3_K *)dst;
    int8_t L[INFER__QK_K];
    float scales[16];
    int64_t b;
    int j, l;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        float max_scale = 0, amax = 0;
        int m;
        uint8_t hm;
        for (j = 0; j < 16; j++) {
            scales[j] = infer__make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) amax = fabsf(scales[j]), max_scale = scales[j];
        }
        memset(y[b].scales, 0, sizeof y[b].scales);
        if (max_scale != 0.0f) {
            float iscale = -32.0f / max_scale;
            for (j = 0; j < 16; j++) {
                int q = INFER__MAX(-32, INFER__MIN(31, infer__nearest_int(iscale * scales[j]))) + 32;
                if (j < 8)
                    y[b].scales[j] = (uint8_t)(q & 0xF);
                else
                    y[b].scales[j - 8] = (uint8_t)(y[b].scales[j - 8] | (q & 0xF) << 4);
                y[b].scales[j % 4 + 8] = (uint8_t)(y[b].scales[j % 4 + 8] | (q >> 4) << (2 * (j / 4)));
            }
            y[b].d = infer__fp32_to_fp16(1 / iscale);
        } else {
            y[b].d = infer__fp32_to_fp16(0.f);
        }
        for (j = 0; j < 16; j++) {
            float d = infer__fp16_to_fp32(y[b].d) * infer__scale_q3_K(j, y[b].scales);
            if (d == 0.0f) continue;
            for (l = 0; l < 16; l++) {
                int q = infer__nearest_int(x[16 * j + l] / d);
                L[16 * j + l] = (int8_t)(INFER__MAX(-4, INFER__MIN(3, q)) + 4);
            }
        }
        /* the high bit of value 32k + l goes to bit k of hmask[l] */
        memset(y[b].hmask, 0, sizeof y[b].hmask);
        m = 0;
        hm = 1;
        for (j = 0; j < INFER__QK_K; j++) {
            if (L[j] > 3) {
                y[b].hmask[m] |= hm;
                L[j] = (int8_t)(L[j] - 4);
            }
            if (++m == 32) m = 0, hm = (uint8_t)(hm << 1);
        }
        for (j = 0; j < INFER__QK_K; j += 128)
            for (l = 0; l < 32; l++)
                y[b].qs[j / 4 + l] =
                    (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
}

/* Q4_K and Q5_K share everything but the grid (nmax 15 or 31, with the
   trial range llama.cpp uses for each) and the packing of the fifth bit. */
static void infer__quantize_q45_K(const float *x, uint16_t *dd, uint16_t *ddmin, uint8_t *packed_scales, uint8_t *L,
                                  int nmax) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8], max_scale = 0, max_min = 0, inv_scale, inv_min;
    int j, l;
    for (j = 0; j < 8; j++) {
        float sum_x2 = 0, av_x;
        for (l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        av_x = sqrtf(sum_x2 / 32);
        for (l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = infer__make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                            nmax == 15 ? -1.0f : -0.5f, 0.1f, nmax == 15 ? 20 : 15, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (j = 0; j < 8; j++) {
        int ls = INFER__MAX(0, INFER__MIN(63, infer__nearest_int(inv_scale * scales[j])));
        int lm = INFER__MAX(0, INFER__MIN(63, infer__nearest_int(inv_min * mins[j])));
        if (j < 4) {
            packed_scales[j] = (uint8_t)ls;
            packed_scales[j + 4] = (uint8_t)lm;
        } else {
            packed_scales[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            packed_scales[j - 4] = (uint8_t)(packed_scales[j - 4] | (ls >> 4) << 6);
            packed_scales[j] = (uint8_t)(packed_scales[j] | (lm >> 4) << 6);
        }
    }
    *dd = infer__fp32_to_fp16(max_scale / 63.0f);
    *ddmin = infer__fp32_to_fp16(max_min / 63.0f);
    for (j = 0; j < 8; j++) {
        uint8_t sc, m;
        float d, dm;
        infer__scale_min_k4(j, packed_scales, &sc, &m);
        d = infer__fp16_to_fp32(*dd) * sc;
        if (d == 0.0f) continue;
        dm = infer__fp16_to_fp32(*ddmin) * m;
        for (l = 0; l < 32; l++) {
            int q = infer__nearest_int((x[32 * j + l] + dm) / d);
            L[32 * j + l] = (uint8_t)INFER__MAX(0, INFER__MIN(nmax, q));
        }
    }
}

static void infer__quantize_row_q4_K(const float *x, void *dst, int64_t n) {
    infer__block_q4_K *y = (infer__block_q4_K *)dst;
    uint8_t L[INFER__QK_K];
    int64_t b;
    int j, l;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        uint8_t *q = y[b].qs;
        infer__quantize_q45_K(x, &y[b].d, &y[b].dmin, y[b].scales, L, 15);
        for (j = 0; j < INFER__QK_K; j += 64, q += 32)
            for (l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

static void infer__quantize_row_q5_K(const float *x, void *dst, int64_t n) {
    infer__block_q5_K *y = (infer__block_q5_K *)dst;
    uint8_t L[INFER__QK_K];
    int64_t b;
    int j, l;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        uint8_t *q = y[b].qs;
        infer__quantize_q45_K(x, &y[b].d, &y[b].dmin, y[b].scales, L, 31);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (j = 0; j < 4; j++, q += 32)
            for (l = 0; l < 32; l++) {
                int l1 = L[64 * j + l], l2 = L[64 * j + l + 32];
                y[b].qh[l] = (uint8_t)(y[b].qh[l] | (l1 >> 4) << (2 * j) | (l2 >> 4) << (2 * j + 1));
                q[l] = (uint8_t)((l1 & 0xF) | (l2 & 0xF) << 4);
            }
    }
}

static void infer__quantize_row_q6_K(const float *x, void *dst, int64_t n) {
    infer__block_q6_K *y = (infer__block_q6_K *)dst;
    int8_t L[INFER__QK_K];
    float scales[16];
    int64_t b;
    int j, l;
    for (b = 0; b < n / INFER__QK_K; b++, x += INFER__QK_K) {
        float max_scale = 0, max_abs_scale = 0, iscale;
        uint8_t *ql = y[b].ql, *qh = y[b].qh;
        for (j = 0; j < 16; j++) {
            scales[j] = infer__make_qx_quants(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs_scale) max_abs_scale = fabsf(scales[j]), max_scale = scales[j];
        }
        if (max_abs_scale < INFER__GROUP_MAX_EPS) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        iscale = -128.0f / max_scale;
        y[b].d = infer__fp32_to_fp16(1 / iscale);
        for (j = 0; j < 16; j++) y[b].scales[j] = (int8_t)INFER__MIN(127, infer__nearest_int(iscale * scales[j]));
        for (j = 0; j < 16; j++) {
            float d = infer__fp16_to_fp32(y[b].d) * y[b].scales[j];
            if (d == 0.0f) continue;
            for (l = 0; l < 16; l++) {
                int q = infer__nearest_int(x[16 * j + l] / d);
                L[16 * j + l] = (int8_t)(INFER__MAX(-32, INFER__MIN(31, q)) + 32);
            }
        }
        for (j = 0; j < INFER__QK_K; j += 128, ql += 64, qh += 32)
            for (l = 0; l < 32; l++) {
                int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | (q3 & 0xF) << 4);
                ql[l + 32] = (uint8_t)((q2 & 0xF) | (q4 & 0xF) << 4);
                qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
    }
}

/* index of the grid value nearest to x (the lower on a tie) */
static int infer__best_index_iq4(float x) {
    const int8_t *v = infer__iq4nl_values;
    int lo = 0, hi = 15;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < v[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/* One IQ4 super-block of nsub sub-blocks of 32 (1 for IQ4_NL, 8 for
   IQ4_XS): per sub-block, weights x^2, the max mapped to the grid's -127
   end and then to (-127 + t)/max for t = -7..7, keeping the least-squares
   scale that explains most; for IQ4_XS those scales are then quantized to
   6 bits against d = -max_scale/32 and the values re-indexed. */
static void infer__quantize_iq4(const float *x, int nsub, uint16_t *dh, uint8_t *q4, uint16_t *scales_h,
                                uint8_t *scales_l) {
    const int8_t *values = infer__iq4nl_values;
    uint8_t L[INFER__QK_K];
    float scales[8], max_scale = 0, amax_scale = 0;
    int ib, j, itry;
    memset(L, 0, sizeof L);
    for (ib = 0; ib < nsub; ib++) {
        const float *xb = x + 32 * ib;
        uint8_t *Lb = L + 32 * ib;
        float amax = 0, max = 0, d, id, sumqx = 0, sumq2 = 0, best;
        for (j = 0; j < 32; j++) {
            float ax = fabsf(xb[j]);
            if (ax > amax) amax = ax, max = xb[j];
        }
        scales[ib] = 0;
        if (amax < INFER__GROUP_MAX_EPS) continue;
        d = -max / values[0];
        id = 1 / d;
        for (j = 0; j < 32; j++) {
            int l = infer__best_index_iq4(id * xb[j]);
            float q = values[l], w = xb[j] * xb[j];
            Lb[j] = (uint8_t)l;
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : d;
        best = d * sumqx;
        for (itry = -7; itry <= 7; itry++) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (j = 0; j < 32; j++) {
                float q = values[infer__best_index_iq4(id * xb[j])], w = xb[j] * xb[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if (fabsf(d) > amax_scale) amax_scale = fabsf(d), max_scale = d;
    }
    if (nsub > 1) {
        float d = -max_scale / 32, id;
        *dh = infer__fp32_to_fp16(d);
        id = d != 0.0f ? 1 / d : 0.0f;
        *scales_h = 0;
        for (ib = 0; ib < nsub; ib++) {
            int l = INFER__MAX(-32, INFER__MIN(31, infer__nearest_int(id * scales[ib])));
            float dl = d * l, idl = dl != 0.0f ? 1 / dl : 0.0f;
            for (j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)infer__best_index_iq4(idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0)
                scales_l[ib / 2] = (uint8_t)(l & 0xF);
            else
                scales_l[ib / 2] = (uint8_t)(scales_l[ib / 2] | (l & 0xF) << 4);
            *scales_h = (uint16_t)(*scales_h | (l >> 4) << (2 * ib));
        }
    } else {
        float id = scales[0] != 0.0f ? 1 / scales[0] : 0.0f;
        *dh = infer__fp32_to_fp16(scales[0]);
        for (j = 0; j < 32; j++) L[j] = (uint8_t)infer__best_index_iq4(id * x[j]);
    }
    for (ib = 0; ib < nsub; ib++)
        for (j = 0; j < 16; j++) q4[16 * ib + j] = (uint8_t)(L[32 * ib + j] | L[32 * ib + 16 + j] << 4);
}

static void infer__quantize_row_iq4_nl(const float *x, void *dst, int64_t n) {
    infer__block_iq4_nl *y = (infer__block_iq4_nl *)dst;
    int64_t b;
    for (b = 0; b < n / 32; b++) infer__quantize_iq4(x + 32 * b, 1, &y[b].d, y[b].qs, NULL, NULL);
}

static void infer__quantize_row_iq4_xs(const float *x, void *dst, int64_t n) {
    infer__block_iq4_xs *y = (infer__block_iq4_xs *)dst;
    int64_t b;
    for (b = 0; b < n / INFER__QK_K; b++)
        infer__quantize_iq4(x + INFER__QK_K * b, 8, &y[b].d, y[b].qs, &y[b].scales_h, y[b].scales_l);
}
