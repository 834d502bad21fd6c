/* cuda_kernels.cpp - gpt-oss's steps in infer_cuda.cu's kernels against
   plain double-precision references, on the emulated GPU (tests/cuda_emu.h;
   the kernels called directly, no model): attention sinks in every
   attention kernel (the tiled one over one share and over several, one of
   them empty, merged; llama.cpp's order for a batch and for a token
   alone), the router's bias and the margin of top-k-then-softmax gating,
   the experts' biases and the clamped SwiGLU (k_act_mul and the fused
   act+quantize kernel), the down bias in the weighted sum. Each attention
   case is also compared with the reference of the other choice (sinks or
   none), which it must not match: the sinks must show. A plain program:
   exits 1 on any failure. */
#include "cuda_emu.h"

#include "../infer_cuda.cu"

#include <vector>

static int passed, failed;

static void check(int good, const char *what, double got, double limit) {
    printf("%s %s: %.3g (limit %.3g)\n", good ? "ok  " : "FAIL", what, got, limit);
    if (good) passed++;
    else failed++;
}

static double urand(unsigned *s) { /* in [-0.5, 0.5) */
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 65536.0 - 0.5;
}

/* The attention problem: one sequence at positions 0..T-1, an F16 cache
   (K as rows, V transposed, as attention.c lays them out), 4 query heads
   over 2 KV heads of 64. */
enum { T = 200, N_HEADS = 4, N_KV = 2, GROUP = 2, HD = 64, SLOTS = 256, KV_DIM = N_KV * HD, Q_DIM = N_HEADS * HD };
struct att_case {
    std::vector<float> q;
    std::vector<__half> k, v;
    float sinks[N_HEADS];
    int pos[T], seq[T];
    uint8_t *kc[1], *vc[1];
};

/* Row (token at position p, head h): softmax over the keys 0..p and the
   sink (NULL: none) of q.k * scale, times V. q rounded to F16 as the
   kernels round it. */
static void ref_row(const att_case &a, const float *q, int p, int h, float scale, const float *sinks, double *out) {
    int kvh = h / GROUP;
    std::vector<double> s(p + 1);
    double m = -INFINITY, sum = 0;
    for (int j = 0; j <= p; j++) {
        double d = 0;
        for (int i = 0; i < HD; i++)
            d += (double)__half2float(__float2half_rn(q[h * HD + i])) * __half2float(a.k[(size_t)j * KV_DIM + kvh * HD + i]);
        s[j] = d * scale;
        m = fmax(m, s[j]);
    }
    if (sinks) m = fmax(m, sinks[h]);
    for (int j = 0; j <= p; j++) sum += exp(s[j] - m);
    if (sinks) sum += exp(sinks[h] - m);
    for (int d = 0; d < HD; d++) {
        double o = 0;
        for (int j = 0; j <= p; j++) o += exp(s[j] - m) / sum * __half2float(a.v[((size_t)kvh * HD + d) * SLOTS + j]);
        out[d] = o;
    }
}

/* out's rows (n tokens from position first) against the reference with and
   without the sinks: the worst difference from the one it must match
   (within the F16 rounding of the probabilities) and the largest from the
   one it must not. */
static void judge(const att_case &a, const float *out, int first, int n, float scale, int with_sinks, const char *what) {
    double worst = 0, apart = 0;
    char line[160];
    for (int t = 0; t < n; t++)
        for (int h = 0; h < N_HEADS; h++) {
            double r[HD], other[HD], e = 0, e2 = 0;
            const float *q = a.q.data() + (size_t)(first + t) * Q_DIM;
            ref_row(a, q, first + t, h, scale, with_sinks ? a.sinks : NULL, r);
            ref_row(a, q, first + t, h, scale, with_sinks ? NULL : a.sinks, other);
            for (int d = 0; d < HD; d++) {
                double g = out[(size_t)t * Q_DIM + h * HD + d];
                e = fmax(e, fabs(g - r[d]));
                e2 = fmax(e2, fabs(g - other[d]));
            }
            worst = fmax(worst, e);
            apart = fmax(apart, e2);
        }
    snprintf(line, sizeof line, "%s, sinks %s: worst difference from its reference", what, with_sinks ? "on" : "off");
    check(worst <= 1e-3, line, worst, 1e-3);
    snprintf(line, sizeof line, "%s, sinks %s: the other reference's distance (the sinks show)", what,
             with_sinks ? "on" : "off");
    check(apart >= 20 * 1e-3, line, apart, 20 * 1e-3);
}

/* k_attention's two phases and the merge: the prompt (every token, one
   share) or the last token alone with its keys in n_split shares. */
static void tiled(att_case &a, int with_sinks, int n_split) {
    int alone = n_split > 1, first = alone ? T - 1 : 0, n = alone ? 1 : T, rows = n * GROUP;
    int n_items = (rows + ATT_ROWS - 1) / ATT_ROWS, hdp = HD;
    float scale = 0.125f;
    std::vector<att_item> items(n_items);
    for (int i = 0; i < n_items; i++) items[i].first = 0, items[i].n_tok = n, items[i].r0 = ATT_ROWS * i;
    std::vector<float> part((size_t)n_items * N_KV * n_split * ATT_ROWS * (HD + 2)), out((size_t)n * Q_DIM);
    const float *q = a.q.data() + (size_t)first * Q_DIM;
    cudaFuncSetAttribute(k_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, att_shared(hdp).total);
    for (int phase = 0; phase < 2; phase++)
        INFER_LAUNCH(dim3(n_items, N_KV, n_split), 32 * ATT_WARPS, (size_t)att_shared(hdp).total, (cudaStream_t)0,
                     k_attention)(phase, q, Q_DIM, items.data(), a.pos + first, a.seq + first, a.kc, a.vc, 0, 1, SLOTS,
                                  (int)KV_F16, (size_t)KV_DIM * 2, GROUP, HD, 0, scale, 0.0f,
                                  with_sinks ? a.sinks : NULL, part.data());
    INFER_LAUNCH(dim3(n_items, N_KV), 128, 0, (cudaStream_t)0, k_attention_merge)(part.data(), items.data(), n_split,
                                                                                 GROUP, HD, out.data(), Q_DIM);
    judge(a, out.data(), first, n, scale, with_sinks,
          alone ? "k_attention, a token alone, 3 shares (one empty)" : "k_attention, a prompt of 200, 1 share");
}

/* k_attention_ordered: the whole prompt, or the last token alone. */
static void ordered(att_case &a, int with_sinks, int alone) {
    int first = alone ? T - 1 : 0, n = alone ? 1 : T;
    float scale = 0.125f;
    std::vector<float> out((size_t)n * Q_DIM), vacc((size_t)N_HEADS * HD * 64);
    std::vector<double> vtail((size_t)N_HEADS * HD);
    size_t shared = (size_t)(HD + ORD_TILE + 16 * HD) * sizeof(float);
    INFER_LAUNCH(dim3(n, N_HEADS), 32, shared, (cudaStream_t)0, k_attention_ordered)(
        a.q.data() + (size_t)first * Q_DIM, Q_DIM, a.pos + first, a.seq + first, n, a.kc, a.vc, 0, 1, SLOTS,
        (size_t)KV_DIM * 2, GROUP, HD, 0, scale, 0.0f, with_sinks ? a.sinks : NULL, vacc.data(), vtail.data(),
        out.data(), Q_DIM);
    judge(a, out.data(), first, n, scale, with_sinks,
          alone ? "k_attention_ordered, a token alone" : "k_attention_ordered, a prompt of 200");
}

static void attention_sinks(void) {
    att_case a;
    unsigned seed = 7;
    const float sinks[N_HEADS] = {3.0f, -0.5f, 6.0f, 4.5f};
    a.q.resize((size_t)T * Q_DIM), a.k.resize((size_t)SLOTS * KV_DIM), a.v.resize((size_t)KV_DIM * SLOTS);
    for (float &x : a.q) x = (float)urand(&seed) * 4;
    for (__half &x : a.k) x = __float2half_rn((float)urand(&seed) * 4);
    for (__half &x : a.v) x = __float2half_rn((float)urand(&seed) * 2);
    memcpy(a.sinks, sinks, sizeof sinks);
    for (int t = 0; t < T; t++) a.pos[t] = t, a.seq[t] = 0;
    a.kc[0] = (uint8_t *)a.k.data(), a.vc[0] = (uint8_t *)a.v.data();
    for (int with = 0; with < 2; with++) {
        tiled(a, with, 1);
        tiled(a, with, 3);
        ordered(a, with, 0);
        ordered(a, with, 1);
    }
}

static void experts(void) {
    enum { N_TOK = 3, N_EXPERT = 8, K = 2, WIDTH = 32, DIM = 4, PAIRS = N_TOK * K };
    unsigned seed = 11;
    float logits[N_TOK * N_EXPERT], bias[N_EXPERT], w[PAIRS], margin[N_TOK];
    int ex[PAIRS], pair_token[PAIRS], chose = 1;
    double worst_w = 0, worst_m = 0, worst = 0, worst_q = 0, step = 0;
    int clamped_g = 0, clamped_u = 0;
    for (float &x : logits) x = (float)urand(&seed) * 4;
    for (float &x : bias) x = (float)urand(&seed) * 8; /* large enough to change the choice */
    INFER_LAUNCH(1, 64, 0, (cudaStream_t)0, k_moe_choose)(logits, bias, N_TOK, N_EXPERT, K, 0, 1, 0, ex, w, pair_token,
                                                          margin, 1);
    for (int t = 0; t < N_TOK; t++) { /* top 2 of the biased logits, softmax over the two */
        float b[N_EXPERT], next = -INFINITY;
        int c0 = -1, c1 = -1;
        for (int e = 0; e < N_EXPERT; e++) b[e] = logits[t * N_EXPERT + e] + bias[e];
        for (int e = 0; e < N_EXPERT; e++)
            if (c0 < 0 || b[e] > b[c0]) c0 = e;
        for (int e = 0; e < N_EXPERT; e++)
            if (e != c0 && (c1 < 0 || b[e] > b[c1])) c1 = e;
        for (int e = 0; e < N_EXPERT; e++)
            if (e != c0 && e != c1) next = fmaxf(next, b[e]);
        chose &= ex[K * t] == c0 && ex[K * t + 1] == c1;
        worst_w = fmax(worst_w, fabs(w[K * t] - 1 / (1 + exp((double)b[c1] - b[c0]))));
        worst_m = fmax(worst_m, fabs(margin[t] - (1 - exp((double)next - b[c1]))));
    }
    check(chose, "k_moe_choose: the top 2 of the biased logits", chose, 1);
    check(worst_w <= 1e-6, "k_moe_choose: the softmax of the chosen", worst_w, 1e-6);
    check(worst_m <= 1e-5, "k_moe_choose: the margin 1 - e^(next - last)", worst_m, 1e-5);

    std::vector<float> g(PAIRS * WIDTH), u(PAIRS * WIDTH), g0, bg(N_EXPERT * WIDTH), bu(N_EXPERT * WIDTH);
    for (float &x : g) x = (float)urand(&seed) * 24;
    for (float &x : u) x = (float)urand(&seed) * 24;
    for (float &x : bg) x = (float)urand(&seed) * 4;
    for (float &x : bu) x = (float)urand(&seed) * 4;
    g0 = g;
    INFER_LAUNCH(1, 256, 0, (cudaStream_t)0, k_act_mul)(g.data(), u.data(), (size_t)PAIRS * WIDTH,
                                                       (int)INFER__ACT_SWIGLU_CLAMP, (const float *)NULL, bg.data(),
                                                       bu.data(), ex, WIDTH, WIDTH);
    for (int p = 0; p < PAIRS; p++)
        for (int i = 0; i < WIDTH; i++) {
            double gv = g0[p * WIDTH + i] + bg[ex[p] * WIDTH + i], uv = u[p * WIDTH + i] + bu[ex[p] * WIDTH + i], a;
            clamped_g += gv > 7, clamped_u += fabs(uv) > 7;
            gv = fmin(gv, 7.0), uv = fmax(-7.0, fmin(uv, 7.0));
            a = gv / (1 + exp(-1.702 * gv)) * (uv + 1);
            worst = fmax(worst, fabs(g[p * WIDTH + i] - a) / fmax(1.0, fabs(a)));
        }
    check(worst <= 1e-5 && clamped_g && clamped_u, "k_act_mul: clamped SwiGLU of the pairs' biased rows (relative)",
          worst, 1e-5);

    { /* the same activation fused into Q8_0 quantization: within half a step */
        std::vector<float> gq(WIDTH), uq(WIDTH), a(WIDTH);
        std::vector<int8_t> q8(WIDTH);
        float4 meta[1];
        double amax = 0;
        for (int i = 0; i < WIDTH; i++) {
            double gv, uv;
            gq[i] = (float)urand(&seed) * 24, uq[i] = (float)urand(&seed) * 24;
            gv = fmin(gq[i], 7.0), uv = fmax(-7.0, fmin(uq[i], 7.0));
            a[i] = (float)(gv / (1 + exp(-1.702 * gv)) * (uv + 1));
            amax = fmax(amax, fabs(a[i]));
        }
        INFER_LAUNCH(dim3(1, 1), 32, 0, (cudaStream_t)0, k_act_q8<ACT_Q8_0>)(
            gq.data(), uq.data(), (int)INFER__ACT_SWIGLU_CLAMP, (const float *)NULL, WIDTH, WIDTH, 1, q8.data(), meta);
        step = amax / 127;
        for (int i = 0; i < WIDTH; i++) worst_q = fmax(worst_q, fabs(q8[i] * meta[0].x - a[i]));
        check(worst_q <= 0.51 * step, "k_act_q8: clamped SwiGLU, quantized", worst_q, 0.51 * step);
    }

    {
        std::vector<float> y(PAIRS * DIM), bd(N_EXPERT * DIM), xb(N_TOK * DIM);
        for (float &x : y) x = (float)urand(&seed);
        for (float &x : bd) x = (float)urand(&seed);
        INFER_LAUNCH(N_TOK, 256, 0, (cudaStream_t)0, k_moe_sum)(y.data(), w, bd.data(), (const float *)NULL, ex, K, DIM,
                                                               xb.data());
        worst = 0;
        for (int t = 0; t < N_TOK; t++)
            for (int i = 0; i < DIM; i++) {
                double o = 0;
                for (int j = 0; j < K; j++) o += ((double)y[(t * K + j) * DIM + i] + bd[ex[t * K + j] * DIM + i]) * w[t * K + j];
                worst = fmax(worst, fabs(o - xb[t * DIM + i]));
            }
        check(worst <= 1e-6, "k_moe_sum: outputs with their expert's down bias, weighted", worst, 1e-6);
    }
}

int main(void) {
    attention_sinks();
    experts();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
