/* simd_selftest.c - every vector kernel against the scalar reference of
   quants.c, format by format, for each instruction set this CPU runs.
   A standalone program (no Criterion), so that it can be cross-compiled for
   aarch64 and run under qemu-user (tests/neon_check.sh); tests/test_simd.c
   includes it with SIMD_SELFTEST_NO_MAIN for the Criterion suite.

   Like test_kernels.c it compiles a private copy of the implementation
   (INFER_STATIC + INFER_IMPLEMENTATION) and calls only static internals.

   What is compared, on random data of several lengths and on edge values
   (zero, negative zero, subnormal and largest fp16 scales, subnormal and
   large activations, halves that round differently under nearbyint and
   roundf), never NaN:
   - from_float (Q8_0, Q8_1, F16, BF16 activations): the same bytes;
   - vec_dot: equal up to float summation order. The bound is
     (n/8 + 32) * 2^-23 * sum |w_i * x_i| (reassociated float sums of the
     terms), plus n * FLT_MIN * (1 + max|w|) * (1 + max|x|) for dpbf16ps,
     which reads subnormal inputs as zero;
   - gemm (prompt tiles, AVX2's and NEON's smmla ones): each output within
     that bound of the scalar vec_dot, and NEON's K-quant tiles bit for bit
     equal to NEON's own vec_dot. */
#include "infer_private.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t st_rng = 0x1234567;
static uint64_t st_next(void) {
    uint64_t z = (st_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double st_unif(void) { return (double)(st_next() >> 11) * (1.0 / 9007199254740992.0); }
static float st_normal(void) {
    double u = st_unif() + 1e-12, v = st_unif();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* kinds of activation rows */
enum { ST_X_NORMAL, ST_X_ZERO, ST_X_NEGZERO, ST_X_SUBNORMAL, ST_X_LARGE, ST_X_TIES, ST_X_MIXED, ST_X_KINDS };
static const char *st_x_names[] = {"normal", "zero", "-0", "subnormal", "large", "ties", "mixed"};

/* kinds of weight rows: how block scales (or float weights) are chosen */
enum { ST_W_NORMAL, ST_W_ZERO, ST_W_NEGZERO, ST_W_SUBNORMAL, ST_W_MAX, ST_W_MIXED, ST_W_KINDS };
static const char *st_w_names[] = {"normal", "zero-scale", "-0-scale", "subnormal-scale", "max-scale", "mixed"};

static void st_fill_x(float *x, int n, int kind) {
    int i;
    for (i = 0; i < n; i++) {
        float v = st_normal();
        switch (kind) {
        case ST_X_ZERO: v = 0.0f; break;
        case ST_X_NEGZERO: v = -0.0f; break;
        case ST_X_SUBNORMAL: v = v * 1e-39f; break;
        case ST_X_LARGE: v = v * 1500.0f; break; /* Q8_1's s = d * sum stays a finite half */
        case ST_X_TIES:
            /* each 32 block holds +-127 so the 8-bit scale is 1, and halves */
            v = (i % 32 == 0) ? 127.0f : (i % 32 == 1 ? -127.0f : (float)((int)(st_next() % 253) - 126) + 0.5f);
            break;
        case ST_X_MIXED: {
            int r = (int)(st_next() % 6);
            v = r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? v * 1e-41f : r == 3 ? v * 400.0f : v;
            break;
        }
        default: break;
        }
        x[i] = v;
    }
}

/* from_float test inputs may go further: up to the float range */
static void st_fill_x_wide(float *x, int n, int kind) {
    int i;
    st_fill_x(x, n, kind == ST_X_LARGE ? ST_X_NORMAL : kind);
    if (kind == ST_X_LARGE)
        for (i = 0; i < n; i++) x[i] *= (i % 3 == 0) ? 1e30f : (i % 3 == 1 ? 7e4f : 65519.0f);
}

static uint16_t st_scale(int kind) {
    uint16_t sign = (uint16_t)(st_next() & 1 ? 0x8000 : 0);
    switch (kind) {
    case ST_W_ZERO: return 0;
    case ST_W_NEGZERO: return 0x8000;
    case ST_W_SUBNORMAL: return (uint16_t)(sign | (1 + st_next() % 0x3ff));
    case ST_W_MAX: return (uint16_t)(sign | 0x7bff);
    case ST_W_MIXED: {
        static const uint16_t e[] = {0, 0x8000, 0x0001, 0x03ff, 0x7bff, 0xfbff, 0x3c00};
        if (st_next() % 2) return e[st_next() % 7];
    } /* fall through */
    default: return infer__fp32_to_fp16(st_normal() * 0.05f);
    }
}

/* where a block keeps its fp16 scales (the rest is random bytes) */
static int st_half_fields(infer_type t, int *off) {
    switch (t) {
    case INFER_TYPE_Q4_0: case INFER_TYPE_Q5_0: case INFER_TYPE_Q8_0: case INFER_TYPE_IQ4_NL: case INFER_TYPE_IQ4_XS:
        off[0] = 0; return 1;
    case INFER_TYPE_Q4_1: case INFER_TYPE_Q5_1: case INFER_TYPE_Q4_K: case INFER_TYPE_Q5_K:
        off[0] = 0, off[1] = 2; return 2;
    case INFER_TYPE_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case INFER_TYPE_Q3_K: off[0] = 108; return 1;
    case INFER_TYPE_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* a weight row of type t with n values */
static void st_fill_w(infer_type t, uint8_t *w, int n, int kind) {
    const infer__type_traits *tt = infer__traits(t);
    size_t bytes = infer__row_size(t, n), i;
    int b, nb = n / tt->block_size;
    if (t == INFER_TYPE_F32 || t == INFER_TYPE_F16 || t == INFER_TYPE_BF16) {
        for (b = 0; b < n; b++) {
            float v;
            uint16_t h = st_scale(kind == ST_W_NORMAL ? ST_W_NORMAL : kind);
            v = kind == ST_W_NORMAL ? st_normal() : infer__fp16_to_fp32(h);
            if (kind == ST_W_MAX && t != INFER_TYPE_F16) v = (st_next() & 1 ? -1 : 1) * 1e30f; /* sums stay finite */
            if (kind == ST_W_SUBNORMAL && t != INFER_TYPE_F16) v *= 1e-33f; /* float subnormals */
            if (t == INFER_TYPE_F32) memcpy(w + 4 * (size_t)b, &v, 4);
            else {
                uint16_t u = t == INFER_TYPE_F16 ? infer__fp32_to_fp16(v) : infer__fp32_to_bf16(v);
                memcpy(w + 2 * (size_t)b, &u, 2);
            }
        }
        return;
    }
    for (i = 0; i < bytes; i++) w[i] = (uint8_t)st_next();
    for (b = 0; b < nb; b++) {
        uint8_t *blk = w + (size_t)b * tt->type_size;
        int off[2], nf = st_half_fields(t, off), f;
        for (f = 0; f < nf; f++) {
            uint16_t d = st_scale(kind);
            memcpy(blk + off[f], &d, 2);
        }
        if (t == INFER_TYPE_MXFP4) { /* E8M0 exponents: normal ones, the subnormal 0 and 1, the largest */
            static const uint8_t e[] = {0, 1, 2, 127, 200, 254, 255};
            blk[0] = kind == ST_W_NORMAL ? (uint8_t)(118 + st_next() % 16)
                     : kind == ST_W_ZERO || kind == ST_W_NEGZERO || kind == ST_W_SUBNORMAL ? (uint8_t)(st_next() % 2)
                     : kind == ST_W_MAX ? (uint8_t)(254 + st_next() % 2) : e[st_next() % 7];
            if (kind == ST_W_MAX) /* grid values 0 and +-1 only, so that dots with most rows stay finite */
                for (i = 1; i < 17; i++) blk[i] &= 0x99;
        }
        if (t == INFER_TYPE_Q8_0)
            for (i = 2; i < 34; i++)
                if (blk[i] == 0x80 && kind != ST_W_MIXED) blk[i] = 0x81; /* -128 only sometimes */
    }
}

/* the activations dequantized (Q8_1 has no to_float in the table) */
static void st_x_values(infer_type vt, const uint8_t *xq, int n, float *out) {
    if (vt == INFER_TYPE_Q8_1) {
        int b, j;
        for (b = 0; b < n / 32; b++) {
            const uint8_t *blk = xq + (size_t)b * 36;
            uint16_t d;
            memcpy(&d, blk, 2);
            for (j = 0; j < 32; j++) out[b * 32 + j] = (float)(int8_t)blk[4 + j] * infer__fp16_to_fp32(d);
        }
        return;
    }
    infer__traits(vt)->to_float(xq, out, n);
}

/* sum |m_b| * (sum_b |x| + |s_b|) for the formats with a minimum */
static double st_min_terms(infer_type t, const uint8_t *w, const uint8_t *xq, const float *xf, int n) {
    double s = 0;
    int b, j;
    if (t == INFER_TYPE_Q4_K || t == INFER_TYPE_Q5_K || t == INFER_TYPE_Q2_K) {
        /* d * sum(scale * q * x) and dmin * sum(min * x) may cancel */
        int off[2] = {0, 0};
        st_half_fields(t, off);
        for (b = 0; b < n / 256; b++) {
            uint16_t dm;
            double ax = 0;
            memcpy(&dm, w + (size_t)b * infer__traits(t)->type_size + off[1], 2);
            for (j = 0; j < 256; j++) ax += fabs(xf[b * 256 + j]);
            s += fabs(infer__fp16_to_fp32(dm)) * 63 * ax;
        }
        return 2 * s;
    }
    if (t != INFER_TYPE_Q4_1 && t != INFER_TYPE_Q5_1) return 0;
    for (b = 0; b < n / 32; b++) {
        uint16_t m, xs;
        double ax = 0;
        memcpy(&m, w + (size_t)b * infer__traits(t)->type_size + 2, 2);
        memcpy(&xs, xq + (size_t)b * 36 + 2, 2);
        for (j = 0; j < 32; j++) ax += fabs(xf[b * 32 + j]);
        s += fabs(infer__fp16_to_fp32(m)) * (ax + fabs(infer__fp16_to_fp32(xs)));
    }
    return 2 * s;
}

typedef struct st_counts {
    int checks, failures;
} st_counts;

static void st_fail(st_counts *c, const char *fmt, ...) INFER__PRINTF(2, 3);
static void st_fail(st_counts *c, const char *fmt, ...) {
    va_list ap;
    c->failures++;
    if (c->failures > 20) return;
    va_start(ap, fmt);
    fputs("FAIL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

/* Where amax is so small (subnormal) that 127/amax overflows, the
   reference converts inf or NaN to int8, which C leaves undefined (and
   x86 and ARM answer differently); such a block's d is a zero half either
   way, so its values never count. Only d is compared there. */
static void st_mask_overflowing(const float *x, int n, infer_type vt, uint8_t *a, uint8_t *b) {
    int bs = (int)infer__traits(vt)->type_size, qk = infer__traits(vt)->block_size, head = vt == INFER_TYPE_Q8_K ? 4 : 2;
    int blk, j;
    for (blk = 0; blk < n / qk; blk++) {
        float amax = 0;
        volatile float id;
        for (j = 0; j < qk; j++) amax = INFER__MAX(amax, fabsf(x[blk * qk + j]));
        id = 127.0f / amax;
        if (amax != 0.0f && isinf(id)) {
            memset(a + (size_t)blk * bs + head, 0, (size_t)bs - head);
            memset(b + (size_t)blk * bs + head, 0, (size_t)bs - head);
        }
    }
}

static const int st_lens_block[] = {32, 64, 96, 256, 288, 512, 576, 768, 2048, 4096, 4096 + 96};
static const int st_lens_float[] = {1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 257, 1000, 4096, 4099};

/* one activation quantizer: vector bytes == scalar bytes */
static void st_check_from_float(st_counts *c, const char *isa, infer__from_float_fn ref, infer__from_float_fn got,
                                infer_type vt) {
    int li, kind, rep;
    const int *lens = vt == INFER_TYPE_F16 || vt == INFER_TYPE_BF16 ? st_lens_float : st_lens_block;
    int nl = vt == INFER_TYPE_F16 || vt == INFER_TYPE_BF16 ? (int)(sizeof st_lens_float / sizeof(int))
                                                            : (int)(sizeof st_lens_block / sizeof(int));
    if (!got || got == ref) return;
    for (li = 0; li < nl; li++)
        for (kind = 0; kind < ST_X_KINDS; kind++)
            for (rep = 0; rep < 3; rep++) {
                int n = lens[li];
                size_t bytes = infer__row_size(vt, n), i;
                if (n % infer__traits(vt)->block_size) continue;
                float *x = (float *)malloc((size_t)n * sizeof(float));
                uint8_t *a = (uint8_t *)malloc(bytes + 1), *b = (uint8_t *)malloc(bytes + 1);
                st_fill_x_wide(x, n, kind);
                memset(a, 0xa5, bytes + 1);
                memset(b, 0xa5, bytes + 1);
                ref(x, a, n);
                got(x, b, n);
                c->checks++;
                if (vt == INFER_TYPE_Q8_0 || vt == INFER_TYPE_Q8_1 || vt == INFER_TYPE_Q8_K) st_mask_overflowing(x, n, vt, a, b);
                if (memcmp(a, b, bytes + 1)) {
                    for (i = 0; i < bytes && a[i] == b[i]; i++) {}
                    st_fail(c, "%s from_float %s n=%d %s: byte %zu is %02x, scalar %02x", isa, infer_type_name(vt), n,
                            st_x_names[kind], i, b[i], a[i]);
                }
                free(x);
                free(a);
                free(b);
            }
}

/* llama.cpp's two F16 summing orders (quants.h: a batch's 16 lanes, one
   token's 64), bit for bit: contexts that match llama.cpp rely on them */
static void st_check_f16_orders(st_counts *c, const char *isa, const infer__kernels *k) {
    int li, kind;
    for (li = 0; li < (int)(sizeof st_lens_float / sizeof(int)); li++)
        for (kind = 0; kind < ST_X_KINDS; kind++) {
            int n = st_lens_float[li], i;
            float *fa = (float *)malloc((size_t)n * sizeof(float)), *fb = (float *)malloc((size_t)n * sizeof(float));
            uint16_t *a = (uint16_t *)malloc((size_t)n * 2), *b = (uint16_t *)malloc((size_t)n * 2);
            float want, got;
            st_fill_x(fa, n, kind);
            st_fill_x(fb, n, ST_X_KINDS - 1 - kind);
            for (i = 0; i < n; i++) a[i] = infer__fp32_to_fp16(fa[i]), b[i] = infer__fp32_to_fp16(fb[i]);
            c->checks += 2;
            want = infer__f16_dot_llama(a, 1, b, n), got = k->f16_dot_ordered(n, a, b);
            if (memcmp(&want, &got, sizeof want) && !(isnan(want) && isnan(got)))
                st_fail(c, "%s f16_dot_ordered n=%d %s: %.9g, llama.cpp's order %.9g", isa, n, st_x_names[kind], got, want);
            want = infer__f16_dot_llama_vec(a, 1, b, n), got = k->f16_dot_ordered1(n, a, b);
            if (memcmp(&want, &got, sizeof want) && !(isnan(want) && isnan(got)))
                st_fail(c, "%s f16_dot_ordered1 n=%d %s: %.9g, llama.cpp's order %.9g", isa, n, st_x_names[kind], got, want);
            free(fa);
            free(fb);
            free(a);
            free(b);
        }
}

/* The ordered attention's tile steps against their one-at-a-time forms,
   bit for bit: the scores against f16_dot_ordered(1) key by key, the exps'
   chunk sums and the rounded p.V against the plain C (ref). Ranges of keys
   start and end off a chunk's edge, and the row may end inside the tile. */
static void st_check_ordered_tile(st_counts *c, const char *isa, const infer__kernels *k, const infer__kernels *ref) {
    static const int dims[] = {64, 128, 256, 80};
    int di, one, kt = 37, nq = 5, i, j;
    for (di = 0; di < 4; di++)
        for (one = 0; one < 2; one++) {
            int n = dims[di];
            uint16_t *kk = (uint16_t *)malloc((size_t)kt * n * 2), *q = (uint16_t *)malloc((size_t)nq * n * 2);
            float *s = (float *)malloc((size_t)nq * kt * sizeof(float)), want, got;
            for (i = 0; i < kt * n; i++) kk[i] = infer__fp32_to_fp16((float)((i * 2654435761u >> 9) % 2001) / 1000.0f - 1.0f);
            for (i = 0; i < nq * n; i++) q[i] = infer__fp32_to_fp16((float)((i * 40503u >> 3) % 1999) / 997.0f - 1.0f);
            if (!k->f16_scores_ordered ||
                !k->f16_scores_ordered(n, one, (const uint8_t *)kk, (size_t)n * 2, kt, (const uint8_t *)q, (size_t)n * 2, nq, s, kt)) {
                if (k->f16_scores_ordered && n % (one ? 64 : 16) == 0)
                    st_fail(c, "%s f16_scores_ordered n=%d: declined a dim it should take", isa, n);
            } else {
                for (i = 0; i < nq; i++)
                    for (j = 0; j < kt; j++) {
                        want = (one ? k->f16_dot_ordered1 : k->f16_dot_ordered)(n, kk + (size_t)j * n, q + (size_t)i * n);
                        got = s[(size_t)i * kt + j];
                        c->checks++;
                        if (memcmp(&want, &got, sizeof want))
                            st_fail(c, "%s f16_scores_ordered n=%d%s key %d row %d: %.9g, one by one %.9g", isa, n,
                                    one ? " (one token)" : "", j, i, got, want);
                    }
            }
            free(kk), free(q), free(s);
        }
    { /* exps by chunks, then p.V of one chunk, from several starts and ends */
        float sc[80], e1[80], e2[80], ch1[16], ch2[16], v[3 * 16 * 24], acc1[24 * 16], acc2[24 * 16];
        static const int cuts[][4] = {{0, 0, 80, 79}, {3, 5, 56, 55}, {13, 2, 40, 80}, {0, 17, 18, 17}, {7, 0, 9, 200}};
        int ci, l;
        for (j = 0; j < 80; j++) sc[j] = (float)((j * 7919) % 113) / 9.0f - 6.0f;
        for (j = 0; j < 3 * 16 * 24; j++) v[j] = (float)((j * 31) % 41) / 20.0f - 1.0f;
        for (ci = 0; ci < 5; ci++) {
            int base = cuts[ci][0], lo = cuts[ci][1], hi = cuts[ci][2], last = cuts[ci][3];
            double w, g;
            for (l = 0; l < 16; l++) ch1[l] = ch2[l] = l == 3 ? 0.25f : 0.0f; /* a chunk begun in the tile before */
            memcpy(e1, sc, sizeof sc), memcpy(e2, sc, sizeof sc);
            w = ref->exp_chunks16(sc, e1, base, lo, hi, last, 0.125f, 2.5f, ch1, 1.5);
            g = k->exp_chunks16(sc, e2, base, lo, hi, last, 0.125f, 2.5f, ch2, 1.5);
            c->checks++;
            if (memcmp(&w, &g, sizeof w) || memcmp(e1, e2, sizeof e1) || memcmp(ch1, ch2, sizeof ch1))
                st_fail(c, "%s exp_chunks16 base %d [%d, %d) last %d: sum %.17g, the plain C %.17g%s", isa, base, lo, hi, last,
                        g, w, memcmp(e1, e2, sizeof e1) ? " (its exps differ)" : memcmp(ch1, ch2, sizeof ch1) ? " (its chunk differs)" : "");
            for (l = 1; l <= 3; l++) { /* one chunk, or three (lanes of any of them) */
                int a = lo % 16 + 16 * (l / 3), b = INFER__MIN(16 * l, lo % 16 + hi - lo);
                for (j = 0; j < 24 * 16; j++) acc1[j] = acc2[j] = (float)(j % 7) * 0.5f;
                ref->probs_fma16(acc1, 16, v, e1 + 20, a, b, 0.37f, 24, l);
                k->probs_fma16(acc2, 16, v, e1 + 20, a, b, 0.37f, 24, l);
                c->checks++;
                if (memcmp(acc1, acc2, sizeof acc1))
                    st_fail(c, "%s probs_fma16 %d chunk(s), lanes [%d, %d): not the plain C's", isa, l, a, b);
            }
        }
    }
}

/* ggml's fold of four accumulators of w lanes (acc[j w + l]) as each ISA
   adds them: (0 + 2) + (1 + 3), then AVX-512's halves and quarters (GCC's
   _mm512_reduce_add_ps), AVX2's halves, and the last four lanes as
   (0 + 1) + (2 + 3), AVX-512's as (0 + 2) + (1 + 3) */
static float st_ggml_fold(const float *acc, int w) {
    float v[16], q[4];
    int l;
    for (l = 0; l < w; l++) v[l] = (acc[l] + acc[2 * w + l]) + (acc[w + l] + acc[3 * w + l]);
    if (w == 16) {
        for (l = 0; l < 8; l++) v[l] = v[l + 8] + v[l];
        for (l = 0; l < 4; l++) q[l] = v[l + 4] + v[l];
        return (q[0] + q[2]) + (q[1] + q[3]);
    }
    if (w == 8)
        for (l = 0; l < 4; l++) v[l] = v[l] + v[l + 4];
    return (v[0] + v[1]) + (v[2] + v[3]);
}

/* ggml_vec_dot_f32 with vectors of w lanes, each lane's sum fused */
static float st_ggml_dot(const float *x, const float *y, int n, int w) {
    float acc[64] = {0}, sum;
    int i = 0, j;
    for (; i + 4 * w <= n; i += 4 * w)
        for (j = 0; j < 4 * w; j++) acc[j] = infer__fmaf(x[i + j], y[i + j], acc[j]);
    sum = st_ggml_fold(acc, w);
    for (; i < n; i++) {
        float p = x[i] * y[i];
        sum += p;
    }
    return sum;
}

/* ggml_ssm_scan's row with vectors of w lanes */
static float st_ggml_ssm_row(float *s, const float *s0, const float *B, const float *C, float dA, float x_dt, int n,
                             int w) {
    float acc[64] = {0}, sum;
    int i = 0, j;
    for (; i + 4 * w <= n; i += 4 * w)
        for (j = 0; j < 4 * w; j++) {
            float a = s0 ? s0[i + j] * dA : 0.0f, b = B[i + j] * x_dt;
            s[i + j] = a + b;
            acc[j] = infer__fmaf(s[i + j], C[i + j], acc[j]);
        }
    sum = st_ggml_fold(acc, w);
    for (; i < n; i++) {
        float a = s0 ? s0[i] * dA : 0.0f, b = B[i] * x_dt, p;
        s[i] = a + b;
        p = s[i] * C[i];
        sum += p;
    }
    return sum;
}

/* The recurrent layers' sums (f32_dot_ordered, f32_mad, ssm_row) of an
   ISA bit for bit against llama.cpp's order for its vector width (AVX2 8
   lanes, AVX-512 16, NEON 4; an ISA that keeps the plain C is skipped). */
static void st_check_recurrent(st_counts *c, const char *isa, const infer__kernels *k, const infer__kernels *ref) {
    int w = k->isa == INFER__ISA_AVX512 ? 16 : k->isa == INFER__ISA_AVX2 ? 8 : k->isa == INFER__ISA_NEON ? 4 : 0;
    int li, kind;
    if (!w || k->f32_dot_ordered == ref->f32_dot_ordered) return;
    for (li = 0; li < (int)(sizeof st_lens_float / sizeof(int)); li++)
        for (kind = 0; kind < ST_X_KINDS; kind++) {
            int n = st_lens_float[li], i, first;
            size_t bytes = (size_t)n * sizeof(float);
            float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes), *s0 = (float *)malloc(bytes);
            float *sa = (float *)malloc(bytes), *sb = (float *)malloc(bytes), want, got;
            st_fill_x(x, n, kind);
            st_fill_x(y, n, ST_X_KINDS - 1 - kind);
            st_fill_x(s0, n, ST_X_NORMAL);
            c->checks += 4;
            want = st_ggml_dot(x, y, n, w), got = k->f32_dot_ordered(x, y, n);
            if (memcmp(&want, &got, sizeof want) && !(isnan(want) && isnan(got)))
                st_fail(c, "%s f32_dot_ordered n=%d %s: %.9g, llama.cpp's order %.9g", isa, n, st_x_names[kind], got, want);
            memcpy(sa, s0, bytes), memcpy(sb, s0, bytes);
            for (i = 0; i < n; i++) sa[i] = infer__fmaf(x[i], 0.37f, sa[i]);
            k->f32_mad(sb, x, 0.37f, n);
            if (memcmp(sa, sb, bytes)) st_fail(c, "%s f32_mad n=%d %s: not fused value by value", isa, n, st_x_names[kind]);
            for (first = 0; first < 2; first++) { /* from a state, and from zeros */
                const float *from = first ? NULL : s0;
                want = st_ggml_ssm_row(sa, from, x, y, 0.93f, 0.61f, n, w);
                got = k->ssm_row(sb, from, x, y, 0.93f, 0.61f, n);
                if ((memcmp(&want, &got, sizeof want) && !(isnan(want) && isnan(got))) || memcmp(sa, sb, bytes))
                    st_fail(c, "%s ssm_row n=%d %s%s: %.9g, llama.cpp's order %.9g%s", isa, n, st_x_names[kind],
                            first ? " from zeros" : "", got, want, memcmp(sa, sb, bytes) ? " (its state differs)" : "");
            }
            for (first = 0; first < 2; first++) { /* the delta rule's row: the three passes it fuses */
                float d;
                c->checks++;
                for (i = 0; i < n; i++) sa[i] = first ? 0.0f : s0[i] * 0.93f;
                d = (0.25f - k->f32_dot_ordered(sa, x, n)) * 0.61f;
                k->f32_mad(sa, x, d, n);
                want = k->f32_dot_ordered(sa, y, n);
                memcpy(sb, s0, bytes); /* in place where it starts from a state */
                got = k->deltanet_row(sb, first ? NULL : sb, 0.93f, x, y, 0.25f, 0.61f, n);
                if ((memcmp(&want, &got, sizeof want) && !(isnan(want) && isnan(got))) || memcmp(sa, sb, bytes))
                    st_fail(c, "%s deltanet_row n=%d %s%s: %.9g, its passes %.9g%s", isa, n, st_x_names[kind],
                            first ? " from zeros" : "", got, want, memcmp(sa, sb, bytes) ? " (its state differs)" : "");
            }
            free(x), free(y), free(s0), free(sa), free(sb);
        }
    { /* the ordered attention's V chunk: exact conversions */
        uint16_t h[5 * 24];
        float a[5 * 16], b[5 * 16];
        int r, l;
        for (r = 0; r < 5 * 24; r++) h[r] = (uint16_t)((r * 2654435761u >> 7) & 0xfbffu); /* finite halves, subnormals too */
        for (r = 0; r < 5; r++)
            for (l = 0; l < 16; l++) a[16 * r + l] = infer__fp16_to_fp32(h[24 * r + l]);
        k->f16_rows16(h, 24, 5, b);
        c->checks++;
        if (memcmp(a, b, sizeof a)) st_fail(c, "%s f16_rows16: not the exact conversion", isa);
    }
}

/* The chunked scans' F32 product of an ISA against sums in double, within
   the rounding of k fused steps, over edge shapes (m and n past and short
   of the register tiles, strides wider than rows), with acc 0 and 1; and
   nothing written outside the m x n block. */
static void st_check_f32_gemm(st_counts *c, const char *isa, const infer__kernels *k, const infer__kernels *ref) {
    static const int ms[] = {1, 3, 4, 5, 17, 64}, ns[] = {1, 7, 8, 16, 31, 33, 64, 128}, ks[] = {1, 5, 63, 128};
    int mi, ni, ki, acc;
    if (k->f32_gemm == ref->f32_gemm) return;
    for (mi = 0; mi < (int)(sizeof ms / sizeof ms[0]); mi++)
        for (ni = 0; ni < (int)(sizeof ns / sizeof ns[0]); ni++)
            for (ki = 0; ki < (int)(sizeof ks / sizeof ks[0]); ki++)
                for (acc = 0; acc < 2; acc++) {
                    int m = ms[mi], n = ns[ni], kk = ks[ki], lda = kk + 3, ldb = n + 5, ldc = n + 2, i, j, l, bad = 0;
                    float *a = (float *)malloc(sizeof(float) * (size_t)(m + 1) * lda);
                    float *b = (float *)malloc(sizeof(float) * (size_t)kk * ldb);
                    float *cm = (float *)malloc(sizeof(float) * (size_t)(m + 1) * ldc);
                    for (i = 0; i < (m + 1) * lda; i++) a[i] = (float)((i * 2654435761u >> 9) % 2001) / 1000.0f - 1.0f;
                    for (i = 0; i < kk * ldb; i++) b[i] = (float)((i * 40503u + 7) % 1999) / 999.0f - 1.0f;
                    for (i = 0; i < (m + 1) * ldc; i++) cm[i] = (float)(i % 13) * 0.25f - 1.5f;
                    k->f32_gemm(cm, ldc, a, lda, b, ldb, m, n, kk, acc);
                    c->checks++;
                    for (i = 0; i < m + 1 && !bad; i++)
                        for (j = 0; j < ldc && !bad; j++) {
                            float before = (float)((i * ldc + j) % 13) * 0.25f - 1.5f, got = cm[(size_t)i * ldc + j];
                            double want = acc ? before : 0.0, mag = fabs(want);
                            if (i >= m || j >= n) { /* outside: untouched */
                                if (got != before) bad = 1;
                                continue;
                            }
                            for (l = 0; l < kk; l++) {
                                want += (double)a[(size_t)i * lda + l] * b[(size_t)l * ldb + j];
                                mag += fabs((double)a[(size_t)i * lda + l] * b[(size_t)l * ldb + j]);
                            }
                            if (!(fabs(got - want) <= (kk + 1) * 1.2e-7 * mag + 1e-30)) bad = 1;
                        }
                    if (bad)
                        st_fail(c, "%s f32_gemm m=%d n=%d k=%d acc=%d: c[%d][%d] off its sum, or written outside", isa, m,
                                n, kk, acc, i - 1, j - 1);
                    free(a), free(b), free(cm);
                }
}

/* one weight format's dot product: vector == scalar within the bound */
static void st_check_dot(st_counts *c, const char *isa, const infer__kernels *ref, infer__vec_dot_fn got,
                         infer_type t, int daz) {
    const infer__type_traits *tt = infer__traits(t);
    infer_type vt = tt->vec_dot_type;
    int is_float = tt->block_size == 1;
    const int *lens = is_float ? st_lens_float : st_lens_block;
    int nl = is_float ? (int)(sizeof st_lens_float / sizeof(int)) : (int)(sizeof st_lens_block / sizeof(int));
    int li, wk, xk;
    if (!got || got == ref->vec_dot[t]) return;
    for (li = 0; li < nl; li++)
        for (wk = 0; wk < ST_W_KINDS; wk++)
            for (xk = 0; xk < ST_X_KINDS; xk++) {
                int n = lens[li], i;
                uint8_t *w;
                if (n % tt->block_size) continue;
                w = (uint8_t *)malloc(infer__row_size(t, n));
                float *x = (float *)malloc((size_t)n * sizeof(float)), *wf = (float *)malloc((size_t)n * sizeof(float));
                float *xf = (float *)malloc((size_t)n * sizeof(float));
                uint8_t *xq = (uint8_t *)malloc(infer__row_size(vt, n) + 4);
                double sumabs = 0, tol, maxw = 0, maxx = 0;
                float r, g;
                st_fill_w(t, w, n, wk);
                st_fill_x(x, n, xk);
                if (vt == INFER_TYPE_F32) memcpy(xq, x, (size_t)n * 4);
                else ref->from_float[vt](x, xq, n);
                tt->to_float(w, wf, n);
                if (vt == INFER_TYPE_F32) memcpy(xf, x, (size_t)n * 4);
                else st_x_values(vt, xq, n, xf);
                for (i = 0; i < n; i++) {
                    sumabs += fabs((double)wf[i] * xf[i]);
                    if (fabs(wf[i]) > maxw) maxw = fabs(wf[i]);
                    if (fabs(xf[i]) > maxx) maxx = fabs(xf[i]);
                }
                sumabs += st_min_terms(t, w, xq, xf, n);
                tol = (n / 8 + 32) * ldexp(1.0, -23) * sumabs;
                if (daz) tol += n * (double)FLT_MIN * (1 + maxw) * (1 + maxx);
                r = ref->vec_dot[t](n, w, xq);
                g = got(n, w, xq);
                c->checks++;
                /* a dot past the float range (MXFP4's largest scales) has no
                   order to compare: only that both overflow */
                if ((isnan(r) || isnan(g) || fabs((double)r - g) > tol) && (isfinite(r) || isfinite(g)))
                    st_fail(c, "%s vec_dot %s n=%d w=%s x=%s: %.9g, scalar %.9g (allowed %.3g)", isa, infer_type_name(t), n,
                            st_w_names[wk], st_x_names[xk], g, r, tol);
                free(w);
                free(x);
                free(wf);
                free(xf);
                free(xq);
            }
}

/* one weight format's gemm (a prompt tile): every output y[t][r] against
   the scalar vec_dot of row r and token t within vec_dot's bound; with
   exact (a vec_dot the tile claims to reproduce), bit for bit equal to it.
   5 rows and 11 tokens: odd rows and tokens left over from pairs and from
   the token groups; rows and tokens of mixed kinds; ldy wider than the
   rows, the gaps checked untouched. */
static void st_check_gemm(st_counts *c, const char *isa, const infer__kernels *ref, infer__gemm_fn gemm,
                          infer__vec_dot_fn exact, infer_type t) {
    enum { ROWS = 5, TOKS = 11, LDY = ROWS + 3 };
    const infer__type_traits *tt = infer__traits(t);
    infer_type vt = tt->vec_dot_type;
    static const int lens[] = {32, 96, 256, 512, 1024};
    int li, rep, r, j, i;
    if (!gemm) return;
    for (li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++)
        for (rep = 0; rep < 3; rep++) {
            int n = lens[li];
            size_t wrow = infer__row_size(t, n), xrow;
            uint8_t *w, *xq;
            float *x, *wf, *xf, y[TOKS * LDY];
            if (n % tt->block_size) continue;
            xrow = vt == INFER_TYPE_F32 ? (size_t)n * 4 : infer__row_size(vt, n);
            w = (uint8_t *)malloc(wrow * ROWS);
            xq = (uint8_t *)malloc(xrow * TOKS + 4);
            x = (float *)malloc((size_t)n * sizeof(float));
            wf = (float *)malloc((size_t)n * ROWS * sizeof(float));
            xf = (float *)malloc((size_t)n * TOKS * sizeof(float));
            for (r = 0; r < ROWS; r++) {
                st_fill_w(t, w + r * wrow, n, (r + rep) % ST_W_KINDS);
                tt->to_float(w + r * wrow, wf + (size_t)r * n, n);
            }
            for (j = 0; j < TOKS; j++) {
                st_fill_x(x, n, (j + 2 * rep) % ST_X_KINDS);
                if (vt == INFER_TYPE_F32) memcpy(xq + j * xrow, x, (size_t)n * 4);
                else ref->from_float[vt](x, xq + j * xrow, n);
                if (vt == INFER_TYPE_F32) memcpy(xf + (size_t)j * n, x, (size_t)n * 4);
                else st_x_values(vt, xq + j * xrow, n, xf + (size_t)j * n);
            }
            for (i = 0; i < TOKS * LDY; i++) y[i] = 12345.0f;
            gemm(n, w, wrow, ROWS, xq, xrow, TOKS, y, LDY);
            for (j = 0; j < TOKS; j++)
                for (r = 0; r < LDY; r++) {
                    double sumabs = 0, tol;
                    float want, got = y[j * LDY + r];
                    c->checks++;
                    if (r >= ROWS) {
                        if (got != 12345.0f) st_fail(c, "%s gemm %s n=%d: wrote y[%d][%d], past its %d rows", isa,
                                                     infer_type_name(t), n, j, r, ROWS);
                        continue;
                    }
                    for (i = 0; i < n; i++) sumabs += fabs((double)wf[(size_t)r * n + i] * xf[(size_t)j * n + i]);
                    sumabs += st_min_terms(t, w + r * wrow, xq + j * xrow, xf + (size_t)j * n, n);
                    tol = (n / 8 + 32) * ldexp(1.0, -23) * sumabs;
                    want = ref->vec_dot[t](n, w + r * wrow, xq + j * xrow);
                    /* past the float range on both sides (MXFP4's largest
                       scales): no order to compare, as in st_check_dot */
                    if ((isnan(want) || isnan(got) || fabs((double)want - got) > tol) && (isfinite(want) || isfinite(got)))
                        st_fail(c, "%s gemm %s n=%d row %d token %d: %.9g, scalar %.9g (allowed %.3g)", isa,
                                infer_type_name(t), n, r, j, got, want, tol);
                    else if (exact) {
                        float e = exact(n, w + r * wrow, xq + j * xrow);
                        if (memcmp(&e, &got, sizeof e))
                            st_fail(c, "%s gemm %s n=%d row %d token %d: %.9g, not its vec_dot's %.9g", isa,
                                    infer_type_name(t), n, r, j, got, e);
                    }
                }
            free(w), free(xq), free(x), free(wf), free(xf);
        }
}

static const infer_type st_weight_types[] = {
    INFER_TYPE_F32,  INFER_TYPE_F16,  INFER_TYPE_BF16, INFER_TYPE_Q8_0,   INFER_TYPE_Q4_0,  INFER_TYPE_Q4_1, INFER_TYPE_Q5_0,
    INFER_TYPE_Q5_1, INFER_TYPE_Q2_K, INFER_TYPE_Q3_K, INFER_TYPE_Q4_K,   INFER_TYPE_Q5_K,  INFER_TYPE_Q6_K,
    INFER_TYPE_IQ4_NL, INFER_TYPE_IQ4_XS, INFER_TYPE_MXFP4};
static const infer_type st_act_types[] = {INFER_TYPE_Q8_0, INFER_TYPE_Q8_1, INFER_TYPE_Q8_K, INFER_TYPE_F16, INFER_TYPE_BF16};

/* Checks weight type t (or, with t < 0, every activation quantizer) on
   every instruction set this CPU runs; returns the failures. *n_isa counts
   the vector ISAs that replaced at least one of the kernels checked. */
static int st_check(int t, int *n_isa, int *n_checks) {
    infer__kernels ref, k;
    st_counts c = {0, 0};
    int isa, found = 0;
    infer__kernels_install(&ref, INFER__ISA_SCALAR);
    for (isa = 1; isa < INFER__ISA_COUNT; isa++) {
        const char *name = infer__isa_name((infer__isa)isa);
        int before = c.checks, i;
        if (!infer__kernels_install(&k, (infer__isa)isa)) continue;
        if (t < 0) {
            st_check_f16_orders(&c, name, &k);
            st_check_recurrent(&c, name, &k, &ref);
            st_check_f32_gemm(&c, name, &k, &ref);
            st_check_ordered_tile(&c, name, &k, &ref);
            for (i = 0; i < (int)(sizeof st_act_types / sizeof st_act_types[0]); i++)
                st_check_from_float(&c, name, ref.from_float[st_act_types[i]], k.from_float[st_act_types[i]],
                                    st_act_types[i]);
        } else {
            int daz = 0;
#ifdef INFER__HAVE_X86
            daz = t == INFER_TYPE_BF16 && k.vec_dot[t] == infer__avx512bf16_bf16_dot;
#endif
            st_check_dot(&c, name, &ref, k.vec_dot[t], (infer_type)t, daz);
            st_check_gemm(&c, name, &ref, k.gemm[t], NULL, (infer_type)t);
        }
        if (c.checks > before) found++;
    }
#ifdef INFER__HAVE_X86
    /* kernels the best install on this CPU hides behind a better one */
    if (t == INFER_TYPE_BF16 && infer__kernels_install(&k, INFER__ISA_AVX512)) {
        int before = c.checks;
        st_check_dot(&c, "avx512(no bf16)", &ref, infer__avx512_bf16_dot, INFER_TYPE_BF16, 0);
        if (c.checks > before) found++;
    }
#endif
#ifdef INFER__HAVE_NEON
    /* both block kernels: with sdot (when the CPU has it) and without */
    {
        infer__vec_dot_fn plain = NULL, dp = NULL;
        int before = c.checks;
        switch (t) {
        case INFER_TYPE_Q8_0: plain = infer__neon_q8_0_dot; dp = infer__neondp_q8_0_dot; break;
        case INFER_TYPE_Q4_0: plain = infer__neon_q4_0_dot; dp = infer__neondp_q4_0_dot; break;
        case INFER_TYPE_Q4_1: plain = infer__neon_q4_1_dot; dp = infer__neondp_q4_1_dot; break;
        case INFER_TYPE_Q5_0: plain = infer__neon_q5_0_dot; dp = infer__neondp_q5_0_dot; break;
        case INFER_TYPE_Q5_1: plain = infer__neon_q5_1_dot; dp = infer__neondp_q5_1_dot; break;
        case INFER_TYPE_Q2_K: plain = infer__neon_q2_K_dot; dp = infer__neondp_q2_K_dot; break;
        case INFER_TYPE_Q3_K: plain = infer__neon_q3_K_dot; dp = infer__neondp_q3_K_dot; break;
        case INFER_TYPE_Q4_K: plain = infer__neon_q4_K_dot; dp = infer__neondp_q4_K_dot; break;
        case INFER_TYPE_Q5_K: plain = infer__neon_q5_K_dot; dp = infer__neondp_q5_K_dot; break;
        case INFER_TYPE_Q6_K: plain = infer__neon_q6_K_dot; dp = infer__neondp_q6_K_dot; break;
        case INFER_TYPE_IQ4_NL: plain = infer__neon_iq4_nl_dot; dp = infer__neondp_iq4_nl_dot; break;
        case INFER_TYPE_IQ4_XS: plain = infer__neon_iq4_xs_dot; dp = infer__neondp_iq4_xs_dot; break;
        case INFER_TYPE_MXFP4: plain = infer__neon_mxfp4_dot; dp = infer__neondp_mxfp4_dot; break;
        default: break;
        }
        if (plain) {
            st_check_dot(&c, infer__cpu_has(INFER__CPU_DOTPROD) ? "neon(no dotprod)" : "neon(dotprod)", &ref,
                         infer__cpu_has(INFER__CPU_DOTPROD) ? plain : NULL, (infer_type)t, 0);
            if (!infer__cpu_has(INFER__CPU_DOTPROD)) (void)dp; /* sdot would trap here */
            if (c.checks > before) found++;
        }
    }
    /* the smmla tiles (installed above where the CPU has i8mm): the K
       formats' give their vec_dot's results exactly */
    if (t >= 0 && infer__cpu_has(INFER__CPU_I8MM) && infer__kernels_install(&k, INFER__ISA_NEON) && k.gemm[t]) {
        if (!k.gemm_unordered[t] && infer__traits((infer_type)t)->block_size == INFER__QK_K)
            st_check_gemm(&c, "neon(i8mm) = its vec_dot", &ref, k.gemm[t], k.vec_dot[t], (infer_type)t);
    }
#endif
    if (n_isa) *n_isa = found;
    if (n_checks) *n_checks = c.checks;
    return c.failures;
}

#ifndef SIMD_SELFTEST_NO_MAIN
int main(void) {
    int i, fails = 0, n_isa, n_checks, total = 0;
    int nt = (int)(sizeof st_weight_types / sizeof st_weight_types[0]);
    for (i = -1; i < nt; i++) {
        int t = i < 0 ? -1 : (int)st_weight_types[i];
        int f = st_check(t, &n_isa, &n_checks);
        printf("%-10s %s: %d checks on %d vector ISA(s), %d failed\n", t < 0 ? "from_float" : infer_type_name((infer_type)t),
               f ? "FAIL" : "ok", n_checks, n_isa, f);
        fails += f;
        total += n_checks;
    }
    {
        infer__kernels k;
        infer_error err;
        memset(&err, 0, sizeof err);
        if (infer__kernels_select(&k, &err)) printf("best ISA here: %s\n", infer__isa_name(k.isa));
#ifdef INFER__HAVE_NEON
        printf("dotprod: %s (vec_dot: the %s kernels)\n", infer__cpu_has(INFER__CPU_DOTPROD) ? "yes" : "no",
               infer__cpu_has(INFER__CPU_DOTPROD) ? "sdot" : "plain NEON");
        printf("i8mm: %s (prompts: %s)\n", infer__cpu_has(INFER__CPU_I8MM) ? "yes" : "no",
               infer__cpu_has(INFER__CPU_I8MM) ? "the smmla tiles, checked above" : "the vec_dot loop");
#endif
    }
    printf("%d passed, %d failed\n", total - fails, fails);
    return fails ? 1 : 0;
}
#endif
