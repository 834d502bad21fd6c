/* pack.c - weights repacked at context creation so that SIMD lanes are output rows: packers and scalar references (pack.h: layouts). */
#include "internal.h"
#include "quants.h"
#include "pack.h"

/* Q4_0 and Q8_0 share the layout; they differ in quant bytes per block
   (16 or 32) and Q8_0's +128 (xor 0x80). */
static void infer__pack_32(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst, int qbytes, size_t bsize,
                           uint32_t flip) {
    size_t gbytes = infer__pack_group_bytes(n, qbytes), ng = infer__pack_groups(rows);
    int64_t nb = n / 32, b;
    size_t g;
    int r, j;
    memset(dst, 0, ng * gbytes);
    for (g = 0; g < ng; g++) {
        uint8_t *gp = (uint8_t *)dst + g * gbytes;
        for (r = 0; r < INFER__PACK_ROWS; r++) {
            int64_t row = (int64_t)g * INFER__PACK_ROWS + r;
            const uint8_t *src = (const uint8_t *)w + (size_t)row * w_stride;
            if (row >= rows) break;
            for (b = 0; b < nb; b++) {
                const uint8_t *blk = src + (size_t)b * bsize; /* fp16 d, then the quants */
                uint8_t *q = gp + infer__pack_q_at(b, qbytes);
                for (j = 0; j < qbytes / 4; j++) { /* a word at a time */
                    uint32_t v;
                    memcpy(&v, blk + 2 + 4 * j, 4);
                    v ^= flip;
                    memcpy(q + (j * INFER__PACK_ROWS + r) * 4, &v, 4);
                }
                memcpy(gp + infer__pack_d_at(b, qbytes) + 2 * r, blk, 2);
            }
        }
    }
}

INFER__UNUSED static void infer__pack_q4_0(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    infer__pack_32(w, w_stride, n, rows, dst, 16, sizeof(infer__block_q4_0), 0);
}
INFER__UNUSED static void infer__pack_q8_0(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    infer__pack_32(w, w_stride, n, rows, dst, 32, sizeof(infer__block_q8_0), 0x80808080u);
}

/* Scalar references on the packed layouts: the vec_dot kernels' sums in
   their order, so bit-exact with them; for tests and as the definition. */
static void infer__pack_ref_32(int n, const void *packed, int n_rows, const void *xv, size_t x_stride, int n_tok,
                               float *y, size_t ldy, int q4) {
    int qbytes = q4 ? 16 : 32, nb = n / 32, r, t, b, j, i;
    size_t gbytes = infer__pack_group_bytes(n, qbytes);
    for (r = 0; r < n_rows; r++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)(r / INFER__PACK_ROWS) * gbytes;
        int lane = r % INFER__PACK_ROWS;
        for (t = 0; t < n_tok; t++) {
            const infer__block_q8_0 *x = (const infer__block_q8_0 *)((const uint8_t *)xv + (size_t)t * x_stride);
            float s = 0, lanes[8] = {0}; /* Q8_0: llama.cpp's eight lane sums (quants.c) */
            for (b = 0; b < nb; b++) {
                const uint8_t *q = gp + infer__pack_q_at(b, qbytes);
                uint16_t d;
                int sum = 0;
                memcpy(&d, gp + infer__pack_d_at(b, qbytes) + 2 * lane, 2);
                for (j = 0; j < qbytes / 4; j++) {
                    int lane_sum = 0;
                    for (i = 0; i < 4; i++) {
                        int v = q[(j * INFER__PACK_ROWS + lane) * 4 + i];
                        if (q4)
                            sum += ((v & 0x0f) - 8) * x[b].qs[4 * j + i] + ((v >> 4) - 8) * x[b].qs[16 + 4 * j + i];
                        else
                            lane_sum += (v - 128) * x[b].qs[4 * j + i];
                    }
                    if (!q4)
                        lanes[j] = infer__fmaf(infer__fp16_to_fp32(d) * infer__fp16_to_fp32(x[b].d), (float)lane_sum, lanes[j]);
                }
                s += sum * (infer__fp16_to_fp32(d) * infer__fp16_to_fp32(x[b].d));
            }
            y[(size_t)t * ldy + r] = q4 ? s : infer__hsum8(lanes);
        }
    }
}
INFER__UNUSED static void infer__pack_ref_q4_0(int n, const void *packed, int n_rows, const void *x, size_t x_stride,
                                               int n_tok, float *y, size_t ldy) {
    infer__pack_ref_32(n, packed, n_rows, x, x_stride, n_tok, y, ldy, 1);
}
INFER__UNUSED static void infer__pack_ref_q8_0(int n, const void *packed, int n_rows, const void *x, size_t x_stride,
                                               int n_tok, float *y, size_t ldy) {
    infer__pack_ref_32(n, packed, n_rows, x, x_stride, n_tok, y, ldy, 0);
}

INFER__UNUSED static void infer__pack_q5_0(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    size_t gbytes = infer__pack_q5_0_group_bytes(n), ng = infer__pack_groups(rows), g;
    int64_t nb = n / 32, b;
    int r, j, l;
    memset(dst, 0, ng * gbytes);
    for (g = 0; g < ng; g++)
        for (r = 0; r < INFER__PACK_ROWS; r++) {
            int64_t row = (int64_t)g * INFER__PACK_ROWS + r;
            const infer__block_q5_0 *src = (const infer__block_q5_0 *)((const uint8_t *)w + (size_t)row * w_stride);
            if (row >= rows) break;
            for (b = 0; b < nb; b++) {
                uint8_t *o = (uint8_t *)dst + g * gbytes + (size_t)b * INFER__PACK_Q5_0_BLOCK;
                uint32_t qh = infer__qh(src[b].qh);
                for (j = 0; j < 4; j++) memcpy(o + (j * INFER__PACK_ROWS + r) * 4, src[b].qs + 4 * j, 4);
                for (l = 0; l < 8; l++) {
                    uint64_t m;
                    memcpy(&m, o + 256 + 8 * l, 8);
                    m |= (uint64_t)((qh >> (4 * l)) & 0xf) << (4 * r);
                    memcpy(o + 256 + 8 * l, &m, 8);
                }
                memcpy(o + 320 + 2 * r, &src[b].d, 2);
            }
        }
}

/* Scalar reference on the Q5_0 layout, bit-exact with the scalar vec_dot. */
INFER__UNUSED static void infer__pack_ref_q5_0(int n, const void *packed, int n_rows, const void *xv, size_t x_stride,
                                               int n_tok, float *y, size_t ldy) {
    int nb = n / 32, r, t, b, j, i;
    size_t gbytes = infer__pack_q5_0_group_bytes(n);
    for (r = 0; r < n_rows; r++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)(r / INFER__PACK_ROWS) * gbytes;
        int lane = r % INFER__PACK_ROWS;
        for (t = 0; t < n_tok; t++) {
            const infer__block_q8_0 *x = (const infer__block_q8_0 *)((const uint8_t *)xv + (size_t)t * x_stride);
            float lanes[8] = {0}; /* llama.cpp's eight lane sums (quants.c) */
            for (b = 0; b < nb; b++) {
                const uint8_t *o = gp + (size_t)b * INFER__PACK_Q5_0_BLOCK;
                uint16_t d;
                float dd;
                int lo[4] = {0}, hi[4] = {0};
                memcpy(&d, o + 320 + 2 * lane, 2);
                dd = infer__fp16_to_fp32(d) * infer__fp16_to_fp32(x[b].d);
                for (j = 0; j < 4; j++)
                    for (i = 0; i < 4; i++) {
                        int v = o[(j * INFER__PACK_ROWS + lane) * 4 + i], bit = 4 * lane + i;
                        uint64_t mlo, mhi;
                        memcpy(&mlo, o + 256 + 8 * j, 8);
                        memcpy(&mhi, o + 256 + 8 * (4 + j), 8);
                        lo[j] += ((int)((v & 0x0f) | ((mlo >> bit) & 1) << 4) - 16) * x[b].qs[4 * j + i];
                        hi[j] += ((int)((v >> 4) | ((mhi >> bit) & 1) << 4) - 16) * x[b].qs[16 + 4 * j + i];
                    }
                for (j = 0; j < 4; j++) {
                    lanes[j] = infer__fmaf(dd, (float)lo[j], lanes[j]);
                    lanes[4 + j] = infer__fmaf(dd, (float)hi[j], lanes[4 + j]);
                }
            }
            y[(size_t)t * ldy + r] = infer__hsum8(lanes);
        }
    }
}

static void infer__pack_q_1(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst, int q5) {
    size_t gbytes = infer__pack_q_1_group_bytes(n, q5), ng = infer__pack_groups(rows), g;
    size_t bbytes = q5 ? INFER__PACK_Q5_1_BLOCK : INFER__PACK_Q4_1_BLOCK, d_at = q5 ? 320 : 256;
    int64_t nb = n / 32, b;
    int r, j, l;
    memset(dst, 0, ng * gbytes);
    for (g = 0; g < ng; g++)
        for (r = 0; r < INFER__PACK_ROWS; r++) {
            int64_t row = (int64_t)g * INFER__PACK_ROWS + r;
            const uint8_t *src = (const uint8_t *)w + (size_t)row * w_stride;
            if (row >= rows) break;
            for (b = 0; b < nb; b++) {
                uint8_t *o = (uint8_t *)dst + g * gbytes + (size_t)b * bbytes;
                const uint8_t *qs;
                if (q5) {
                    const infer__block_q5_1 *blk = (const infer__block_q5_1 *)src + b;
                    uint32_t qh = infer__qh(blk->qh);
                    for (l = 0; l < 8; l++) {
                        uint64_t m;
                        memcpy(&m, o + 256 + 8 * l, 8);
                        m |= (uint64_t)((qh >> (4 * l)) & 0xf) << (4 * r);
                        memcpy(o + 256 + 8 * l, &m, 8);
                    }
                    qs = blk->qs;
                    memcpy(o + d_at + 2 * r, &blk->d, 2);
                    memcpy(o + d_at + 32 + 2 * r, &blk->m, 2);
                } else {
                    const infer__block_q4_1 *blk = (const infer__block_q4_1 *)src + b;
                    qs = blk->qs;
                    memcpy(o + d_at + 2 * r, &blk->d, 2);
                    memcpy(o + d_at + 32 + 2 * r, &blk->m, 2);
                }
                for (j = 0; j < 4; j++) memcpy(o + (j * INFER__PACK_ROWS + r) * 4, qs + 4 * j, 4);
            }
        }
}
INFER__UNUSED static void infer__pack_q4_1(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    infer__pack_q_1(w, w_stride, n, rows, dst, 0);
}
INFER__UNUSED static void infer__pack_q5_1(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    infer__pack_q_1(w, w_stride, n, rows, dst, 1);
}

/* Scalar reference on the Q4_1/Q5_1 layouts, bit-exact with the scalar vec_dot. */
static void infer__pack_ref_q_1(int n, const void *packed, int n_rows, const void *xv, size_t x_stride, int n_tok,
                                float *y, size_t ldy, int q5) {
    int nb = n / 32, r, t, b, j, i;
    size_t gbytes = infer__pack_q_1_group_bytes(n, q5), bbytes = q5 ? INFER__PACK_Q5_1_BLOCK : INFER__PACK_Q4_1_BLOCK;
    size_t d_at = q5 ? 320 : 256;
    for (r = 0; r < n_rows; r++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)(r / INFER__PACK_ROWS) * gbytes;
        int lane = r % INFER__PACK_ROWS;
        for (t = 0; t < n_tok; t++) {
            const infer__block_q8_1 *x = (const infer__block_q8_1 *)((const uint8_t *)xv + (size_t)t * x_stride);
            float s = 0;
            for (b = 0; b < nb; b++) {
                const uint8_t *o = gp + (size_t)b * bbytes;
                uint16_t d, m;
                int sum = 0;
                for (j = 0; j < 4; j++)
                    for (i = 0; i < 4; i++) {
                        int v = o[(j * INFER__PACK_ROWS + lane) * 4 + i], lo = v & 0x0f, hi = v >> 4;
                        if (q5) {
                            uint64_t mlo, mhi;
                            memcpy(&mlo, o + 256 + 8 * j, 8);
                            memcpy(&mhi, o + 256 + 8 * (4 + j), 8);
                            lo |= (int)((mlo >> (4 * lane + i)) & 1) << 4;
                            hi |= (int)((mhi >> (4 * lane + i)) & 1) << 4;
                        }
                        sum += lo * x[b].qs[4 * j + i] + hi * x[b].qs[16 + 4 * j + i];
                    }
                memcpy(&d, o + d_at + 2 * lane, 2);
                memcpy(&m, o + d_at + 32 + 2 * lane, 2);
                s += sum * (infer__fp16_to_fp32(d) * infer__fp16_to_fp32(x[b].d)) +
                     infer__fp16_to_fp32(m) * infer__fp16_to_fp32(x[b].s);
            }
            y[(size_t)t * ldy + r] = s;
        }
    }
}
INFER__UNUSED static void infer__pack_ref_q4_1(int n, const void *packed, int n_rows, const void *x, size_t x_stride,
                                               int n_tok, float *y, size_t ldy) {
    infer__pack_ref_q_1(n, packed, n_rows, x, x_stride, n_tok, y, ldy, 0);
}
INFER__UNUSED static void infer__pack_ref_q5_1(int n, const void *packed, int n_rows, const void *x, size_t x_stride,
                                               int n_tok, float *y, size_t ldy) {
    infer__pack_ref_q_1(n, packed, n_rows, x, x_stride, n_tok, y, ldy, 1);
}

INFER__UNUSED static void infer__pack_q4_K(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    size_t nb = (size_t)(n / INFER__QK_K), ng = infer__pack_groups(rows), g, b;
    int r, c, j;
    memset(dst, 0, ng * nb * INFER__PACK_Q4_K_BLOCK);
    for (g = 0; g < ng; g++)
        for (r = 0; r < INFER__PACK_ROWS; r++) {
            int64_t row = (int64_t)g * INFER__PACK_ROWS + r;
            const infer__block_q4_K *src = (const infer__block_q4_K *)((const uint8_t *)w + (size_t)row * w_stride);
            if (row >= rows) break;
            for (b = 0; b < nb; b++) {
                uint8_t *o = (uint8_t *)dst + (g * nb + b) * INFER__PACK_Q4_K_BLOCK;
                int16_t *mins = (int16_t *)(o + 128);
                for (c = 0; c < 4; c++)
                    for (j = 0; j < 8; j++) memcpy(o + 448 + ((c * 8 + j) * 16 + r) * 4, src[b].qs + 32 * c + 4 * j, 4);
                for (j = 0; j < 8; j++) {
                    uint8_t sc, m;
                    infer__scale_min_k4(j, src[b].scales, &sc, &m);
                    o[16 * j + r] = sc;
                    mins[((j / 2) * 16 + r) * 2 + j % 2] = m;
                }
                memcpy(o + 384 + 2 * r, &src[b].d, 2);
                memcpy(o + 416 + 2 * r, &src[b].dmin, 2);
            }
        }
}

INFER__UNUSED static void infer__pack_q6_K(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    size_t nb = (size_t)(n / INFER__QK_K), ng = infer__pack_groups(rows), g, b;
    int r, h, k, l, j;
    memset(dst, 0, ng * nb * INFER__PACK_Q6_K_BLOCK);
    for (g = 0; g < ng; g++)
        for (r = 0; r < INFER__PACK_ROWS; r++) {
            int64_t row = (int64_t)g * INFER__PACK_ROWS + r;
            const infer__block_q6_K *src = (const infer__block_q6_K *)((const uint8_t *)w + (size_t)row * w_stride);
            if (row >= rows) break;
            for (b = 0; b < nb; b++) {
                uint8_t *o = (uint8_t *)dst + (g * nb + b) * INFER__PACK_Q6_K_BLOCK;
                uint8_t q[INFER__QK_K];
                for (h = 0; h < 2; h++)
                    for (k = 0; k < 4; k++)
                        for (l = 0; l < 32; l++) q[128 * h + 32 * k + l] = (uint8_t)infer__q6_K_q(&src[b], h, k, l);
                for (j = 0; j < 16; j++)
                    for (l = 0; l < 4; l++) {
                        const uint8_t *v = q + 16 * j + l; /* words 0..3 of sub-block j at v[0], v[4], v[8], v[12] */
                        uint8_t *sb = o + 320 + j * 192 + r * 4 + l;
                        sb[0] = (uint8_t)((v[0] & 15) | (v[4] & 15) << 4);
                        sb[64] = (uint8_t)((v[8] & 15) | (v[12] & 15) << 4);
                        sb[128] = (uint8_t)(v[0] >> 4 | (v[4] >> 4) << 2 | (v[8] >> 4) << 4 | (v[12] >> 4) << 6);
                    }
                for (j = 0; j < 16; j++) o[16 * j + r] = (uint8_t)src[b].scales[j];
                memcpy(o + 256 + 2 * r, &src[b].d, 2);
            }
        }
}

/* the scalar kernels' sums, in their order, on the packed layouts */
INFER__UNUSED static void infer__pack_ref_q4_K(int n, const void *packed, int n_rows, const void *xv, size_t x_stride,
                                               int n_tok, float *y, size_t ldy) {
    int nb = n / INFER__QK_K, r, t, b, j, l;
    for (r = 0; r < n_rows; r++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)(r / INFER__PACK_ROWS) * nb * INFER__PACK_Q4_K_BLOCK;
        int lane = r % INFER__PACK_ROWS;
        for (t = 0; t < n_tok; t++) {
            const infer__block_q8_K *x = (const infer__block_q8_K *)((const uint8_t *)xv + (size_t)t * x_stride);
            float s = 0, sm = 0; /* llama.cpp's repacked order: two chains, subtracted at the end */
            for (b = 0; b < nb; b++) {
                const uint8_t *o = gp + (size_t)b * INFER__PACK_Q4_K_BLOCK;
                const int16_t *mins = (const int16_t *)(o + 128);
                const int16_t *bs = x[b].bsums;
                uint16_t d, dmin;
                int sumi = 0, summ = 0;
                for (j = 0; j < 4; j++) {
                    int s1 = 0, s2 = 0, sc1 = o[16 * (2 * j) + lane], sc2 = o[16 * (2 * j + 1) + lane];
                    int m1 = mins[(j * 16 + lane) * 2], m2 = mins[(j * 16 + lane) * 2 + 1];
                    for (l = 0; l < 32; l++) {
                        int q = o[448 + ((j * 8 + l / 4) * 16 + lane) * 4 + l % 4];
                        s1 += (q & 0xF) * x[b].qs[64 * j + l];
                        s2 += (q >> 4) * x[b].qs[64 * j + 32 + l];
                    }
                    sumi += sc1 * s1 + sc2 * s2;
                    summ += m1 * (bs[4 * j] + bs[4 * j + 1]) + m2 * (bs[4 * j + 2] + bs[4 * j + 3]);
                }
                memcpy(&d, o + 384 + 2 * lane, 2);
                memcpy(&dmin, o + 416 + 2 * lane, 2);
                s = infer__fmaf((float)sumi, infer__fp16_to_fp32(d) * x[b].d, s);
                sm = infer__fmaf((float)summ, infer__fp16_to_fp32(dmin) * x[b].d, sm);
            }
            y[(size_t)t * ldy + r] = s - sm;
        }
    }
}

INFER__UNUSED static void infer__pack_ref_q6_K(int n, const void *packed, int n_rows, const void *xv, size_t x_stride,
                                               int n_tok, float *y, size_t ldy) {
    int nb = n / INFER__QK_K, r, t, b, j, l;
    for (r = 0; r < n_rows; r++) {
        const uint8_t *gp = (const uint8_t *)packed + (size_t)(r / INFER__PACK_ROWS) * nb * INFER__PACK_Q6_K_BLOCK;
        int lane = r % INFER__PACK_ROWS;
        for (t = 0; t < n_tok; t++) {
            const infer__block_q8_K *x = (const infer__block_q8_K *)((const uint8_t *)xv + (size_t)t * x_stride);
            float s = 0;
            for (b = 0; b < nb; b++) {
                const uint8_t *o = gp + (size_t)b * INFER__PACK_Q6_K_BLOCK;
                uint16_t d;
                int sumi = 0;
                for (j = 0; j < 16; j++) {
                    int sj = 0;
                    for (l = 0; l < 16; l++) {
                        const uint8_t *sb = o + 320 + j * 192 + lane * 4 + l % 4;
                        int w = l / 4, q = ((sb[(w / 2) * 64] >> (4 * (w % 2))) & 15) | ((sb[128] >> (2 * w)) & 3) << 4;
                        sj += (q - 32) * x[b].qs[16 * j + l];
                    }
                    sumi += (int8_t)o[16 * j + lane] * sj;
                }
                memcpy(&d, o + 256 + 2 * lane, 2);
                s += x[b].d * infer__fp16_to_fp32(d) * sumi;
            }
            y[(size_t)t * ldy + r] = s;
        }
    }
}

INFER__UNUSED static void infer__pack_f16(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    size_t gbytes = INFER__PACK_ALIGN((size_t)n * INFER__PACK_ROWS * 2), ng = infer__pack_groups(rows), g;
    int64_t i;
    int r;
    memset(dst, 0, ng * gbytes);
    for (g = 0; g < ng; g++)
        for (r = 0; r < INFER__PACK_ROWS; r++) {
            int64_t row = (int64_t)g * INFER__PACK_ROWS + r;
            const uint16_t *src = (const uint16_t *)((const uint8_t *)w + (size_t)row * w_stride);
            uint16_t *o = (uint16_t *)((uint8_t *)dst + g * gbytes);
            if (row >= rows) break;
            for (i = 0; i < n; i++) o[i * INFER__PACK_ROWS + r] = src[i];
        }
}
/* as infer__f16_dot: llama.cpp's lanes */
INFER__UNUSED static void infer__pack_ref_f16(int n, const void *packed, int n_rows, const void *xv, size_t x_stride,
                                              int n_tok, float *y, size_t ldy) {
    size_t gbytes = INFER__PACK_ALIGN((size_t)n * INFER__PACK_ROWS * 2);
    int r, t;
    for (r = 0; r < n_rows; r++) {
        const uint16_t *o = (const uint16_t *)((const uint8_t *)packed + (size_t)(r / INFER__PACK_ROWS) * gbytes);
        for (t = 0; t < n_tok; t++) {
            const uint16_t *x = (const uint16_t *)((const uint8_t *)xv + (size_t)t * x_stride);
            y[(size_t)t * ldy + r] = infer__f16_dot_llama(o + r % INFER__PACK_ROWS, INFER__PACK_ROWS, x, n);
        }
    }
}

/* The integers of an F16 prompt (see INFER__F16I_MIN_TOK): v * 2^(shift -
   e) rounded to nearest even, e the binade of the block's largest |v|, at
   least -14 (F16's smallest normal one; an all-zero block's too), so the
   largest is below 2^(shift + 1): shift 11 for the weights' 12 bits, 12
   for the activations' 13. Returns 2^(e - shift), the scale back. */
static float infer__f16i_block(const float *v, int nv, int shift, int32_t *q) {
    float m = 0;
    int e = -14, i;
    for (i = 0; i < nv; i++) m = INFER__MAX(m, fabsf(v[i]));
    if (m > 0) frexpf(m, &e), e = INFER__MAX(e - 1, -14);
    for (i = 0; i < nv; i++) q[i] = (int32_t)nearbyintf(ldexpf(v[i], shift - e));
    return ldexpf(1.0f, e - shift);
}
/* The F16 prompt kernel's result, bit for bit: per slice of
   INFER__F16I_SLICE values, a float sum over its blocks of 64 of
   fma(int sum, scale_w * scale_x, sum), added to the slices before. */
INFER__UNUSED static void infer__pack_ref_f16_i16(int n, const void *packed, int n_rows, const void *xv,
                                                  size_t x_stride, int n_tok, float *y, size_t ldy) {
    size_t gbytes = INFER__PACK_ALIGN((size_t)n * INFER__PACK_ROWS * 2);
    int r, t, b, i;
    for (r = 0; r < n_rows; r++) {
        const uint16_t *o = (const uint16_t *)((const uint8_t *)packed + (size_t)(r / INFER__PACK_ROWS) * gbytes);
        for (t = 0; t < n_tok; t++) {
            const uint16_t *x = (const uint16_t *)((const uint8_t *)xv + (size_t)t * x_stride);
            float total = 0, acc = 0;
            for (b = 0; b < n; b += 64) {
                float wf[64], xf[64], sw, sx;
                int32_t qw[64], qx[64], sum = 0, nv = INFER__MIN(64, n - b);
                for (i = 0; i < nv; i++) {
                    wf[i] = infer__fp16_to_fp32(o[(size_t)(b + i) * INFER__PACK_ROWS + r % INFER__PACK_ROWS]);
                    xf[i] = infer__fp16_to_fp32(x[b + i]);
                }
                sw = infer__f16i_block(wf, nv, 11, qw);
                sx = infer__f16i_block(xf, nv, 12, qx);
                for (i = 0; i < nv; i++) sum += qw[i] * qx[i]; /* |sum| < 64 * 4095 * 8191 < 2^31 */
                acc = infer__fmaf((float)sum, sw * sx, acc);
                if ((b + 64) % INFER__F16I_SLICE == 0 || b + 64 >= n) {
                    total = b < INFER__F16I_SLICE ? acc : total + acc;
                    acc = 0;
                }
            }
            y[(size_t)t * ldy + r] = total;
        }
    }
}

INFER__UNUSED static void infer__pack_bf16(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst) {
    size_t gbytes = INFER__PACK_ALIGN((size_t)((n + 1) / 2) * INFER__PACK_ROWS * 4), ng = infer__pack_groups(rows), g;
    int64_t i;
    int r;
    memset(dst, 0, ng * gbytes);
    for (g = 0; g < ng; g++)
        for (r = 0; r < INFER__PACK_ROWS; r++) {
            int64_t row = (int64_t)g * INFER__PACK_ROWS + r;
            const uint16_t *src = (const uint16_t *)((const uint8_t *)w + (size_t)row * w_stride);
            uint16_t *o = (uint16_t *)((uint8_t *)dst + g * gbytes);
            if (row >= rows) break;
            for (i = 0; i < n; i++) o[((i / 2) * INFER__PACK_ROWS + r) * 2 + i % 2] = src[i];
        }
}

INFER__UNUSED static size_t infer__pack_offset(const infer__kernels *k, infer_type t, int64_t n, int64_t row) {
    return k->pack_size[t] ? k->pack_size[t](n, row) : 0;
}
