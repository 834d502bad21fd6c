/* recurrent.c - the kernels of the layers that keep a fixed-size state per
   sequence instead of a KV cache (model.h's infer__layer_kind), each over
   one run of a sequence's tokens: the causal convolution over the last
   tokens, Mamba2's scan, the gated delta rule, and the norms after them.
   Each reads the state the pass starts from (src; NULL: zeros, a sequence
   that starts here) and writes the state it ends in (dst, which may be
   src): a pass that stops or fails leaves the state it read as it was.
   The numerics are llama.cpp's CPU ops' (ggml_ssm_conv, ggml_ssm_scan,
   ggml_gated_delta_net): their sums in their order on this ISA (the
   kernel table's deltanet_row, ssm_row), its softplus. */
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
   to dst. out may be in: each input is read before its output lands.
   A token at a time over 64 channels at once (the weights turned to a row
   per tap, the window a row per token, padded to 64 so that every loop
   has one length the compiler can vector), each channel's sum in tap order
   as ggml_ssm_conv has it. */
#define INFER__CONV_LANES 64
static void infer__rec_conv(const float *in, const float *mul, int ldi, float *out, int ldo, int n, int c0, int c1, int K,
                            const float *w, const float *bias, int silu, const float *src, float *dst) {
    float wt[16][INFER__CONV_LANES], win[16][INFER__CONV_LANES], y[INFER__CONV_LANES], b[INFER__CONV_LANES];
    int b0, j, k, t;
    for (b0 = c0; b0 < c1; b0 += INFER__CONV_LANES) {
        int nb = INFER__MIN(INFER__CONV_LANES, c1 - b0);
        memset(wt, 0, sizeof wt), memset(win, 0, sizeof win), memset(b, 0, sizeof b);
        for (j = 0; j < nb; j++) {
            for (k = 0; k < K; k++) wt[k][j] = w[(size_t)(b0 + j) * K + k];
            if (src)
                for (k = 0; k < K - 1; k++) win[k][j] = src[(size_t)(b0 + j) * (K - 1) + k];
            if (bias) b[j] = bias[b0 + j];
        }
        for (t = 0; t < n; t++) {
            const float *u = in + (size_t)t * ldi + b0, *m = mul ? mul + (size_t)t * ldi + b0 : NULL;
            float *o = out + (size_t)t * ldo + b0;
            for (j = 0; j < nb; j++) win[K - 1][j] = m ? u[j] * m[j] : u[j];
            for (j = 0; j < INFER__CONV_LANES; j++) y[j] = 0.0f;
            for (k = 0; k < K; k++)
                for (j = 0; j < INFER__CONV_LANES; j++) {
                    float p = wt[k][j] * win[k][j];
                    y[j] += p;
                }
            if (bias)
                for (j = 0; j < INFER__CONV_LANES; j++) y[j] += b[j];
            for (j = 0; j < nb; j++) o[j] = silu ? infer__siluf(y[j]) : y[j];
            memmove(win[0], win[1], (size_t)(K - 1) * sizeof win[0]);
        }
        for (j = 0; j < nb; j++)
            for (k = 0; k < K - 1; k++) dst[(size_t)(b0 + j) * (K - 1) + k] = win[k][j];
    }
}

/* Mamba2's scan of head h over n tokens. Token t's row of xbc (stride ld)
   holds x (inner: this head's head_dim values at h head_dim), then B and C
   (groups x ds each; head h reads group h / (heads / groups)); its dt is
   dt[t * ld + h]. Per channel i of the head, with s its ds values:
   s = s e^(softplus(dt + dt_bias) A) + B x softplus(..), y = s . C + D x
   (the ISA's ssm_row), into y[t * ldy + h head_dim + i]. State: head_dim
   x ds a head. */
static void infer__rec_mamba2(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                              const float *xbc, const float *dt, int ld, float *y, int ldy, int n, const float *src,
                              float *dst) {
    int hd = m->ssm_inner / m->ssm_heads, ds = m->ssm_state, g = h / (m->ssm_heads / m->ssm_groups), t, i;
    float A = ((const float *)L->ssm_a->data)[h], D = ((const float *)L->ssm_d->data)[h];
    float bias = ((const float *)L->dt_bias->data)[h];
    size_t at = (size_t)h * hd * ds;
    for (t = 0; t < n; t++) {
        const float *row = xbc + (size_t)t * ld, *x = row + (size_t)h * hd;
        const float *B = row + m->ssm_inner + (size_t)g * ds, *C = row + m->ssm_inner + (size_t)m->ssm_groups * ds + (size_t)g * ds;
        float sp = infer__softplusf(dt[(size_t)t * ld + h] + bias), dA = infer__expf(sp * A);
        const float *s_in = t == 0 ? (src ? src + at : NULL) : dst + at;
        float *yo = y + (size_t)t * ldy + (size_t)h * hd;
        for (i = 0; i < hd; i++) {
            float dx = x[i] * D;
            yo[i] = kern->ssm_row(dst + at + (size_t)i * ds, s_in ? s_in + (size_t)i * ds : NULL, B, C, dA, x[i] * sp, ds) + dx;
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
static void infer__rec_deltanet(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                                const float *qkv, int ld, const float *ba, int ldba, float *o, int ldo, int n,
                                const float *src, float *dst) {
    int ds = m->ssm_state, kh = h % m->ssm_groups, t, j;
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
        for (j = 0; j < ds; j++) /* row j alone: llama.cpp's passes over S, a row at a time */
            out[j] = kern->deltanet_row(dst + at + (size_t)j * ds, s_in ? s_in + (size_t)j * ds : NULL, decay, k, q, v[j],
                                        beta, ds) * scale;
    }
}

/* The scans of a prompt's run in chunks of INFER__REC_CHUNK tokens, their
   sums as matrix products (the kernel table's f32_gemm): the same
   recurrences as above, unrolled over a chunk in closed form, the decays
   as e^ of differences of their logarithms' running sums (each at most 1,
   so none overflows). Their rounding differs from the token-at-a-time
   order's (llama.cpp's), which runs shorter than INFER__REC_CHUNK_MIN. */
static size_t infer__rec_scratch_floats(const infer_model *m) {
    size_t ds = (size_t)m->ssm_state, C = INFER__REC_CHUNK, hd = m->ssm_heads ? (size_t)(m->ssm_inner / m->ssm_heads) : 0;
    size_t delta = ds * ds + 2 * ds * C + 2 * C * C + 3 * C, mamba = ds * hd + C * C + C * hd + 2 * C;
    return m->n_recurrent ? INFER__MAX(delta, mamba) : 0;
}

/* e[i] = e^(L[t] - L[i]) for i <= t, 0 for t < i < nc: a chunk's decays
   from token i to token t, with the softmax's vector exp */
static void infer__rec_decays(const infer__kernels *kern, float *e, const float *L, int t, int nc) {
    int i;
    for (i = 0; i < nc; i++) e[i] = -L[i];
    kern->softmax_exp(e, nc, 0, t + 1, 1.0f, -L[t]);
}

/* The shared products' floats for a batch of n_batch tokens: Mamba2's
   (infer__rec_mamba2_chunk_shared), per group and token; none otherwise. */
static size_t infer__rec_shared_floats(const infer_model *m, int n_batch) {
    int l;
    for (l = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == INFER__LAYER_MAMBA2)
            return (size_t)m->ssm_groups * n_batch * (INFER__REC_CHUNK + m->ssm_state);
    return 0;
}

/* What the heads of Mamba2 group g share in a chunk of nc tokens (rows,
   after the convolution): C B^T (nc rows of INFER__REC_CHUNK) and B^T (ds
   rows of nc), nc (INFER__REC_CHUNK + ds) floats at out. Computed once per
   group, not once per head: Granite's 48 heads share one. */
static void infer__rec_mamba2_chunk_shared(const infer__kernels *kern, const infer_model *m, int g, const float *rows,
                                           int ld, int nc, float *out) {
    int ds = m->ssm_state, t, s;
    const float *B = rows + m->ssm_inner + (size_t)g * ds;
    const float *Cm = rows + m->ssm_inner + (size_t)m->ssm_groups * ds + (size_t)g * ds;
    float *BT = out + (size_t)nc * INFER__REC_CHUNK;
    for (t = 0; t < nc; t++)
        for (s = 0; s < ds; s++) BT[(size_t)s * nc + t] = B[(size_t)t * ld + s];
    kern->f32_gemm(out, INFER__REC_CHUNK, Cm, ld, BT, nc, nc, nc, ds, 0);
}

/* Mamba2's scan of head h (as infer__rec_mamba2's) over n tokens in
   chunks, w its scratch, shared what infer__rec_mamba2_chunk_shared made
   of the n tokens' chunks, one after another. With L the running sum of
   log decays (sp A) and M0 the state a chunk starts from: Y = e^L C M0^T
   + W X + D X, where W = (C B^T) e^(L_t - L_i) sp_i for i <= t; then M^T
   = e^(L_last) M0^T + B^T (X sp e^(L_last - L)). The state is kept
   transposed (state x channel) meanwhile. */
static void infer__rec_mamba2_chunked(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                                      const float *xbc, const float *dt, int ld, const float *shared, float *y, int ldy,
                                      int n, const float *src, float *dst, float *w) {
    int hd = m->ssm_inner / m->ssm_heads, ds = m->ssm_state, g = h / (m->ssm_heads / m->ssm_groups), C = INFER__REC_CHUNK;
    float A = ((const float *)L->ssm_a->data)[h], D = ((const float *)L->ssm_d->data)[h];
    float bias = ((const float *)L->dt_bias->data)[h];
    float *MT = w, *W = MT + (size_t)ds * hd, *X = W + (size_t)C * C, *Ls = X + (size_t)C * hd, *sp = Ls + C;
    size_t at = (size_t)h * hd * ds;
    int c0, t, i, s;
    for (i = 0; i < hd; i++)
        for (s = 0; s < ds; s++) MT[(size_t)s * hd + i] = src ? src[at + (size_t)i * ds + s] : 0.0f;
    for (c0 = 0; c0 < n; c0 += C) {
        int nc = INFER__MIN(C, n - c0);
        const float *rows = xbc + (size_t)c0 * ld, *x = rows + (size_t)h * hd;
        const float *Cm = rows + m->ssm_inner + (size_t)m->ssm_groups * ds + (size_t)g * ds;
        const float *CB = shared + (size_t)c0 * (C + ds), *BT = CB + (size_t)nc * C;
        float *yo = y + (size_t)c0 * ldy + (size_t)h * hd, lsum = 0.0f, last;
        for (t = 0; t < nc; t++) {
            sp[t] = infer__softplusf(dt[(size_t)(c0 + t) * ld + h] + bias);
            lsum += sp[t] * A;
            Ls[t] = lsum;
        }
        last = Ls[nc - 1];
        for (t = 0; t < nc; t++) {
            float *wt = W + (size_t)t * C;
            infer__rec_decays(kern, wt, Ls, t, nc);
            for (i = 0; i <= t; i++) wt[i] *= CB[(size_t)t * C + i] * sp[i];
        }
        kern->f32_gemm(yo, ldy, Cm, ld, MT, hd, nc, hd, ds, 0); /* C M0^T */
        for (t = 0; t < nc; t++) {
            float e = infer__expf(Ls[t]);
            for (i = 0; i < hd; i++) yo[(size_t)t * ldy + i] *= e;
        }
        kern->f32_gemm(yo, ldy, W, C, x, ld, nc, hd, nc, 1); /* + W X */
        for (t = 0; t < nc; t++) {
            float e = sp[t] * infer__expf(last - Ls[t]);
            for (i = 0; i < hd; i++) {
                float xi = x[(size_t)t * ld + i];
                yo[(size_t)t * ldy + i] += xi * D;
                X[(size_t)t * hd + i] = xi * e;
            }
        }
        {
            float e = infer__expf(last);
            for (i = 0; i < ds * hd; i++) MT[i] *= e;
        }
        kern->f32_gemm(MT, hd, BT, nc, X, hd, ds, hd, nc, 1); /* + B^T X sp e^(last - L) */
    }
    for (i = 0; i < hd; i++)
        for (s = 0; s < ds; s++) dst[at + (size_t)i * ds + s] = MT[(size_t)s * hd + i];
}

/* The gated delta rule of value head h (as infer__rec_deltanet's) over n
   tokens in chunks, w its scratch. With S0 the state a chunk starts from
   (key x value, kept so meanwhile) and G the running sum of log decays:
   the updates D solve D_t = beta_t (v_t - e^G_t S0^T k_t) - sum over i < t
   of beta_t e^(G_t - G_i) (k_t . k_i) D_i (forward substitution); then
   O = (e^G Q S0 + [e^(G_t - G_i) q_t . k_i, i <= t] D) / sqrt(ds) and
   S = e^(G_last) S0 + (K e^(G_last - G))^T D. */
static void infer__rec_deltanet_chunked(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                                        const float *qkv, int ld, const float *ba, int ldba, float *o, int ldo, int n,
                                        const float *src, float *dst, float *w) {
    int ds = m->ssm_state, kh = h % m->ssm_groups, C = INFER__REC_CHUNK, c0, t, i, j;
    float a = ((const float *)L->ssm_a->data)[h], bias = ((const float *)L->dt_bias->data)[h];
    float scale = 1.0f / sqrtf((float)ds);
    float *S = w, *KT = S + (size_t)ds * ds, *Dl = KT + (size_t)ds * C, *A = Dl + (size_t)C * ds, *QK = A + (size_t)C * C,
          *G = QK + (size_t)C * C, *beta = G + C, *ex = beta + C;
    size_t at = (size_t)h * ds * ds, qo = (size_t)kh * ds, ko = (size_t)m->ssm_groups * ds + qo;
    size_t vo = 2 * (size_t)m->ssm_groups * ds + (size_t)h * ds;
    for (j = 0; j < ds; j++)
        for (i = 0; i < ds; i++) S[(size_t)i * ds + j] = src ? src[at + (size_t)j * ds + i] : 0.0f;
    for (c0 = 0; c0 < n; c0 += C) {
        int nc = INFER__MIN(C, n - c0);
        const float *rows = qkv + (size_t)c0 * ld;
        float *out = o + (size_t)c0 * ldo + (size_t)h * ds, gsum = 0.0f, last;
        for (t = 0; t < nc; t++) {
            const float *bt = ba + (size_t)(c0 + t) * ldba;
            beta[t] = infer__sigmoidf(bt[h]);
            gsum += infer__softplusf(bt[m->ssm_heads + h] + bias) * a;
            G[t] = gsum;
        }
        last = G[nc - 1];
        for (t = 0; t < nc; t++)
            for (i = 0; i < ds; i++) KT[(size_t)i * C + t] = rows[(size_t)t * ld + ko + i];
        kern->f32_gemm(A, C, rows + ko, ld, KT, C, nc, nc, ds, 0);   /* K K^T */
        kern->f32_gemm(QK, C, rows + qo, ld, KT, C, nc, nc, ds, 0);  /* Q K^T */
        kern->f32_gemm(Dl, ds, rows + ko, ld, S, ds, nc, ds, ds, 0); /* K S0 */
        for (t = 0; t < nc; t++) {
            const float *v = rows + (size_t)t * ld + vo;
            float e = infer__expf(G[t]);
            for (j = 0; j < ds; j++) Dl[(size_t)t * ds + j] = beta[t] * (v[j] - e * Dl[(size_t)t * ds + j]);
        }
        for (t = 1; t < nc; t++) {
            infer__rec_decays(kern, ex, G, t, nc);
            for (i = 0; i < t; i++) A[(size_t)t * C + i] *= -beta[t] * ex[i];
            kern->f32_gemm(Dl + (size_t)t * ds, ds, A + (size_t)t * C, C, Dl, ds, 1, ds, t, 1);
        }
        kern->f32_gemm(out, ldo, rows + qo, ld, S, ds, nc, ds, ds, 0); /* Q S0 */
        for (t = 0; t < nc; t++) {
            float e = infer__expf(G[t]) * scale;
            for (j = 0; j < ds; j++) out[(size_t)t * ldo + j] *= e;
            infer__rec_decays(kern, ex, G, t, nc);
            for (i = 0; i < nc; i++) QK[(size_t)t * C + i] *= ex[i] * scale; /* 0 past t */
        }
        kern->f32_gemm(out, ldo, QK, C, Dl, ds, nc, ds, nc, 1);
        for (t = 0; t < nc; t++) {
            float e = infer__expf(last - G[t]);
            for (i = 0; i < ds; i++) KT[(size_t)i * C + t] *= e;
        }
        {
            float e = infer__expf(last);
            for (i = 0; i < ds * ds; i++) S[i] *= e;
        }
        kern->f32_gemm(S, ds, KT, C, Dl, ds, ds, ds, nc, 1); /* + (K e^(last - G))^T D */
    }
    for (j = 0; j < ds; j++)
        for (i = 0; i < ds; i++) dst[at + (size_t)j * ds + i] = S[(size_t)i * ds + j];
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
