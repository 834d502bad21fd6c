/* vecmath.c - the elementwise math of the forward pass (the SiLU- and
   GELU-gated products, RMSNorm's sum of squares, the recurrent layers'
   dots and rows) and attention's softmax, q.K and p.V, in plain C: the
   kernels every ISA starts from.
   An ISA's own versions (simd_avx2.c, simd_avx512.c) replace these in
   its install; NEON and WASM use the plain C but for q.K. */
#include "internal.h"
#include "backend.h"
#include "quants.h"

/* g[i] = silu(g[i]) * u[i] */
static void infer__silu_mul_ref(float *g, const float *u, int n) {
    int i;
    for (i = 0; i < n; i++) g[i] = g[i] / (1.0f + infer__expf(-g[i])) * u[i];
}

/* gpt-oss's experts: g = min(g, 7), u = clamp(u, -7, 7), then
   g * sigmoid(1.702 g) * (u + 1), in ggml's steps (swiglu_oai) */
static void infer__swiglu_clamp_ref(float *g, const float *u, int n) {
    const float alpha = 1.702f, limit = 7.0f;
    int i;
    for (i = 0; i < n; i++) {
        float x = INFER__MIN(g[i], limit), y = INFER__MAX(INFER__MIN(u[i], limit), -limit);
        g[i] = x / (1.0f + infer__expf(alpha * (-x))) * (y + 1.0f);
    }
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

/* x . y as llama.cpp's plain C has it (ggml_vec_dot_f32 without SIMD):
   each product rounded to float, summed in double. */
static float infer__f32_dot_ordered_ref(const float *x, const float *y, int n) {
    double sum = 0;
    int i;
    for (i = 0; i < n; i++) sum += (double)(x[i] * y[i]);
    return (float)sum;
}

/* y += x v, rounded twice (ggml_vec_mad_f32 without SIMD). */
static void infer__f32_mad_ref(float *y, const float *x, float v, int n) {
    int i;
    for (i = 0; i < n; i++) {
        float p = x[i] * v;
        y[i] += p;
    }
}

/* A row of Mamba2's scan without SIMD: s = s0 dA + B x_dt, summed into
   s . C in float, in order (ggml_ssm_scan's loop past its vectors). */
static float infer__ssm_row_ref(float *s, const float *s0, const float *B, const float *C, float dA, float x_dt, int n) {
    float sum = 0.0f;
    int i;
    for (i = 0; i < n; i++) {
        float a = s0 ? s0[i] * dA : 0.0f, b = B[i] * x_dt, p;
        s[i] = a + b;
        p = s[i] * C[i];
        sum += p;
    }
    return sum;
}

/* A row of the gated delta rule without SIMD: the three passes above. */
static float infer__deltanet_row_ref(float *r, const float *r0, float decay, const float *k, const float *q, float v,
                                     float beta, int n) {
    float d;
    int i;
    for (i = 0; i < n; i++) r[i] = r0 ? r0[i] * decay : 0.0f;
    d = (v - infer__f32_dot_ordered_ref(r, k, n)) * beta;
    infer__f32_mad_ref(r, k, d, n);
    return infer__f32_dot_ordered_ref(r, q, n);
}

/* The chunked scans' product without SIMD: each row of c as axpys of b's
   rows in p order, each product rounded, then added. */
static void infer__f32_gemm_ref(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n, int k,
                                int acc) {
    int i, j, p;
    for (i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        if (!acc)
            for (j = 0; j < n; j++) ci[j] = 0.0f;
        for (p = 0; p < k; p++) {
            const float *bp = b + (size_t)p * ldb;
            float av = a[(size_t)i * lda + p];
            for (j = 0; j < n; j++) {
                float t = av * bp[j];
                ci[j] += t;
            }
        }
    }
}

static void infer__f16_rows16_ref(const uint16_t *h, size_t stride, int rows, float *out) {
    int r, l;
    for (r = 0; r < rows; r++)
        for (l = 0; l < 16; l++) out[16 * r + l] = infer__fp16_to_fp32(h[(size_t)r * stride + l]);
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

/* The ordered attention's exps of a row's keys in a tile, summed by
   chunks of 16 positions (each chunk's lanes by the tree, into double) */
static double infer__exp_chunks16_ref(const float *s, float *held, int base, int lo, int hi, int last, float scale, float m,
                                      float *ch, double sum) {
    int j;
    for (j = lo; j < hi; j++) {
        float x = s[j] * scale; /* its own statement: never contracted with the subtraction */
        ch[(base + j) % 16] = infer__exp_llama(x - m);
        if (held) held[j] = ch[(base + j) % 16];
        if ((base + j) % 16 == 15 || j == last) { /* a chunk's end, or the row's last key */
            sum += (double)infer__sum16_tree(ch);
            memset(ch, 0, 16 * sizeof(float));
        }
    }
    return sum;
}

/* p.V of chunks of 16 keys in lanes, the probabilities rounded to F16 */
static void infer__probs_fma16_ref(float *acc, int as, const float *v, const float *e, int lo, int hi, float inv, int n,
                                   int n_chunks) {
    float p[16];
    int c, l;
    for (c = 0; c < n_chunks; c++) {
        int a = INFER__MAX(lo - 16 * c, 0), b = INFER__MIN(hi - 16 * c, 16);
        if (a >= b) continue;
        for (l = 0; l < 16; l++) p[l] = l >= a && l < b ? infer__fp16_to_fp32(infer__fp32_to_fp16(e[16 * c + l] * inv)) : 0.0f;
        infer__lanes16_fma_ref(acc, as, v + (size_t)16 * n * c, p, n);
    }
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

static float infer__fmaf_ref(float x, float y, float z) { return infer__fmaf(x, y, z); }
static float infer__exp_llama_ref(float x) { return infer__exp_llama(x); }

/* Before the ISA's kernels are in (cpu.c): the plain C, which an ISA's
   install replaces where it has its own. */
static void infer__vecmath_install(infer__kernels *k) {
    k->silu_mul = infer__silu_mul_ref;
    k->swiglu_clamp = infer__swiglu_clamp_ref;
    k->gelu_mul = infer__gelu_mul_ref;
    k->sum_squares = infer__sum_squares_ref;
    k->f32_dot_ordered = infer__f32_dot_ordered_ref;
    k->f32_mad = infer__f32_mad_ref;
    k->ssm_row = infer__ssm_row_ref;
    k->deltanet_row = infer__deltanet_row_ref;
    k->f32_gemm = infer__f32_gemm_ref;
    k->f16_rows16 = infer__f16_rows16_ref;
    k->lanes16_fma = infer__lanes16_fma_ref;
    k->exp_chunks16 = infer__exp_chunks16_ref;
    k->probs_fma16 = infer__probs_fma16_ref;
    k->fmaf = infer__fmaf_ref;
    k->exp_llama = infer__exp_llama_ref;
    k->softmax_stats = infer__softmax_stats_ref;
    k->softmax_probs = infer__softmax_probs_ref;
    k->scaled_max = infer__scaled_max_ref;
    k->softmax_exp = infer__softmax_exp_ref;
    k->probs_f16 = infer__probs_f16_ref;
    k->qk_f16 = infer__qk_f16_ref;
    k->pv_quant[INFER_TYPE_Q8_0] = infer__pv_q8_0_ref;
    k->pv_quant[INFER_TYPE_Q4_0] = infer__pv_q4_0_ref;
}
