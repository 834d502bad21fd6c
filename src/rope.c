/* rope.c - RoPE: the angles of a position and the rotation of a head by them, for forward.c, sequence.c and gpu.c. */
#include "context.h"

/* cos and sin of the angles of position pos, as ggml's rope computes them:
   pair i turns by theta_i = pos * base^(-2i/n_rot) / freqs[i] (stepped by
   multiplication), interpolated by freq_scale, mixed back toward the
   unscaled angle by YaRN's ramp, and cos and sin scaled by the attention
   factor. freqs may be NULL. */
static void infer__rope_angles(float *cs, const infer__rope *r, const float *freqs, int pos) {
    float theta = (float)pos, step = infer__powf(r->base, -2.0f / (float)r->n_rot), lo = 0, hi = 0, mscale = r->attn_factor;
    int i;
    if (r->ext_factor != 0.0f) { /* YaRN's correction range of dimensions */
        float den = 2 * infer__logf(r->base), pi2 = 2 * 3.14159265358979323846f;
        lo = floorf((float)r->n_rot * infer__logf((float)r->n_ctx_orig / (r->beta_fast * pi2)) / den);
        hi = ceilf((float)r->n_rot * infer__logf((float)r->n_ctx_orig / (r->beta_slow * pi2)) / den);
        lo = INFER__MAX(0.0f, lo);
        hi = INFER__MIN((float)(r->n_rot - 1), hi);
        mscale *= 1.0f + 0.1f * infer__logf(1.0f / r->freq_scale);
    }
    for (i = 0; i < r->n_rot; i += 2) {
        float extrap = freqs ? theta / freqs[i / 2] : theta, a = r->freq_scale * extrap, sa, ca;
        if (r->ext_factor != 0.0f) {
            float y = ((float)(i / 2) - lo) / INFER__MAX(0.001f, hi - lo);
            float mix = (1 - INFER__MIN(1.0f, INFER__MAX(0.0f, y))) * r->ext_factor;
            a = a * (1 - mix) + extrap * mix;
        }
        infer__sincosf(a, &sa, &ca);
        cs[i] = ca * mscale;
        cs[i + 1] = sa * mscale;
        theta *= step;
    }
}

/* Rotates the first n_rot values of one head: pairs (2i, 2i+1), or with
   neox pairs (i, i + n_rot/2); pair i turns by the angle at cs[2i]. fused:
   the kernels whose fmaf contracts each as llama.cpp's build does; NULL:
   a multiply and an add. */
static void infer__rope_rotate(float *x, const float *cs, int n_rot, int neox, const infer__kernels *fused) {
    int i, half = n_rot / 2;
    for (i = 0; i < n_rot; i += 2) {
        int a = neox ? i / 2 : i, b = neox ? i / 2 + half : i + 1;
        float x0 = x[a], x1 = x[b];
        if (fused) {
            x[a] = fused->fmaf(x0, cs[i], -(x1 * cs[i + 1]));
            x[b] = fused->fmaf(x0, cs[i + 1], x1 * cs[i]);
        } else {
            x[a] = x0 * cs[i] - x1 * cs[i + 1];
            x[b] = x0 * cs[i + 1] + x1 * cs[i];
        }
    }
}
