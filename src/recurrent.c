/* recurrent.c - the kernels of the layers that keep a fixed-size state per
   sequence instead of a KV cache (model.h's infer__layer_kind), each over
   one run of a sequence's tokens: the causal convolution over the last
   tokens, Mamba2's scan, the gated delta rule, and the norms after them.
   Each reads the state the pass starts from (src; NULL: zeros, a sequence
   that starts here) and writes the state it ends in (dst, which may be
   src): a pass that stops or fails leaves the state it read as it was.
   The numerics are llama.cpp's CPU ops' (ggml_ssm_conv, ggml_ssm_scan,
   ggml_gated_delta_net): float sums in their order, its softplus. */
#include "context.h"

static float infer__sigmoidf(float x) { return 1.0f / (1.0f + infer__expf(-x)); }
static float infer__siluf(float x) { return x / (1.0f + infer__expf(-x)); }
/* log(1 + e^x), x itself past 20 (llama.cpp's cut-off) */
static float infer__softplusf(float x) { return x > 20.0f ? x : infer__logf(1.0f + infer__expf(x)); }

/* The causal depthwise convolution of channels [c0, c1) of n tokens,
   in[t * ldi + ch] (u, or b * x where mul is given: LFM2's b at mul[t * ldi +
   ch]): out[t * ldo + ch] = sum over k of w[ch K + k] u[t - K + 1 + k], the
   K - 1 inputs before the first token from src (per channel, oldest
   first), then + bias[ch], then SiLU where asked; the last K - 1 inputs go
   to dst. out may be in: each input is read before its output lands. */
static void infer__rec_conv(const float *in, const float *mul, int ldi, float *out, int ldo, int n, int c0, int c1, int K,
                            const float *w, const float *bias, int silu, const float *src, float *dst) {
    int ch, t, k;
    for (ch = c0; ch < c1; ch++) {
        float win[16];
        const float *wc = w + (size_t)ch * K;
        for (k = 0; k < K - 1; k++) win[k] = src ? src[(size_t)ch * (K - 1) + k] : 0.0f;
        for (t = 0; t < n; t++) {
            float u = in[(size_t)t * ldi + ch], y = 0.0f;
            if (mul) u *= mul[(size_t)t * ldi + ch];
            win[K - 1] = u;
            for (k = 0; k < K; k++) y += win[k] * wc[k];
            if (bias) y += bias[ch];
            out[(size_t)t * ldo + ch] = silu ? infer__siluf(y) : y;
            for (k = 0; k < K - 1; k++) win[k] = win[k + 1];
        }
        for (k = 0; k < K - 1; k++) dst[(size_t)ch * (K - 1) + k] = win[k];
    }
}

/* Mamba2's scan of head h over n tokens. Token t's row of xbc (stride ld)
   holds x (inner: this head's head_dim values at h head_dim), then B and C
   (groups x ds each; head h reads group h / (heads / groups)); its dt is
   dt[t * ld + h]. Per channel i of the head, with s its ds values:
   s = s e^(softplus(dt + dt_bias) A) + B x softplus(..), y = s . C + D x,
   into y[t * ldy + h head_dim + i]. State: head_dim x ds a head. */
static void infer__rec_mamba2(const infer_model *m, const infer__layer *L, int h, const float *xbc, const float *dt,
                              int ld, float *y, int ldy, int n, const float *src, float *dst) {
    int hd = m->ssm_inner / m->ssm_heads, ds = m->ssm_state, g = h / (m->ssm_heads / m->ssm_groups), t, i, j;
    float A = ((const float *)L->ssm_a->data)[h], D = ((const float *)L->ssm_d->data)[h];
    float bias = ((const float *)L->dt_bias->data)[h];
    size_t at = (size_t)h * hd * ds;
    for (t = 0; t < n; t++) {
        const float *row = xbc + (size_t)t * ld, *x = row + (size_t)h * hd;
        const float *B = row + m->ssm_inner + (size_t)g * ds, *C = row + m->ssm_inner + (size_t)m->ssm_groups * ds + (size_t)g * ds;
        float sp = infer__softplusf(dt[(size_t)t * ld + h] + bias), dA = infer__expf(sp * A);
        const float *s_in = t == 0 ? (src ? src + at : NULL) : dst + at;
        float *s_out = dst + at, *yo = y + (size_t)t * ldy + (size_t)h * hd;
        for (i = 0; i < hd; i++) {
            float x_dt = x[i] * sp, sum = 0.0f;
            const float *si = s_in ? s_in + (size_t)i * ds : NULL;
            float *so = s_out + (size_t)i * ds;
            for (j = 0; j < ds; j++) {
                float s = (si ? si[j] * dA : 0.0f) + B[j] * x_dt;
                sum += s * C[j];
                so[j] = s;
            }
            yo[i] = sum + x[i] * D;
        }
    }
}

/* The gated delta rule of value head h over n tokens. Token t's row of qkv
   (stride ld) holds q and k (groups x ds each, L2-normed already; head h
   reads key head h mod groups) and v (heads x ds); ba[t * ldba + h] is
   beta's logit, ba[t * ldba + heads + h] alpha's. With S the head's ds x ds
   state kept as rows j of S's column j: S = e^g S; d = beta (v - S^T k);
   S += k d^T; o = S^T q / sqrt(ds), into o[t * ldo + h ds], where
   beta = sigmoid and g = softplus(alpha + dt_bias) a. */
static void infer__rec_deltanet(const infer_model *m, const infer__layer *L, int h, const float *qkv, int ld,
                                const float *ba, int ldba, float *o, int ldo, int n, const float *src, float *dst) {
    int ds = m->ssm_state, kh = h % m->ssm_groups, t, i, j;
    float a = ((const float *)L->ssm_a->data)[h], bias = ((const float *)L->dt_bias->data)[h];
    float scale = 1.0f / sqrtf((float)ds);
    size_t at = (size_t)h * ds * ds;
    for (t = 0; t < n; t++) {
        const float *row = qkv + (size_t)t * ld;
        const float *q = row + (size_t)kh * ds, *k = row + (size_t)m->ssm_groups * ds + (size_t)kh * ds;
        const float *v = row + 2 * (size_t)m->ssm_groups * ds + (size_t)h * ds;
        float beta = infer__sigmoidf(ba[(size_t)t * ldba + h]);
        float decay = infer__expf(infer__softplusf(ba[(size_t)t * ldba + m->ssm_heads + h] + bias) * a);
        const float *s_in = t == 0 ? (src ? src + at : NULL) : dst + at;
        float *out = o + (size_t)t * ldo + (size_t)h * ds;
        for (j = 0; j < ds; j++) {
            const float *ri = s_in ? s_in + (size_t)j * ds : NULL;
            float *r = dst + at + (size_t)j * ds, sk = 0.0f, d, sq = 0.0f;
            for (i = 0; i < ds; i++) {
                r[i] = ri ? ri[i] * decay : 0.0f;
                sk += r[i] * k[i];
            }
            d = (v[j] - sk) * beta;
            for (i = 0; i < ds; i++) {
                r[i] += k[i] * d;
                sq += r[i] * q[i];
            }
            out[j] = sq * scale;
        }
    }
}

/* x = x / max(|x|, eps) (llama.cpp's L2 norm: the sum of squares in double) */
static void infer__l2norm(float *x, int n, float eps) {
    double sum = 0;
    float scale;
    int i;
    for (i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (i = 0; i < n; i++) x[i] *= scale;
}

/* RMSNorm of n values times w, then times SiLU(z) (Qwen3.5's order), or
   SiLU(z) first (gate_first: Mamba2's). */
static void infer__gated_norm(const infer__kernels *kern, float *y, const float *z, const float *w, int n, float eps,
                              int gate_first) {
    float scale;
    int i;
    if (gate_first)
        for (i = 0; i < n; i++) y[i] = infer__siluf(z[i]) * y[i];
    scale = 1.0f / sqrtf((float)(kern->sum_squares(y, n) / n) + eps);
    for (i = 0; i < n; i++) y[i] = (y[i] * scale) * w[i];
    if (!gate_first)
        for (i = 0; i < n; i++) y[i] *= infer__siluf(z[i]);
}
