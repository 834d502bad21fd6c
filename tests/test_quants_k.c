/* test_quants_k.c - the K-quant and IQ4 formats (quants_k.c) and the
   reference quantizers of every format (quants.c, quants_k.c).
   Like test_kernels.c this compiles its own private copy of the
   implementation (INFER_STATIC + INFER_IMPLEMENTATION) to reach the static
   kernels through infer__traits(t); nothing here or in testutil.c refers
   to the library's extern symbols (both copies in one program would clash
   on the private stb_ds functions).
   What is checked: block layouts (sizes, and every value of random blocks
   against a decoder written here from ggml's layouts, index by index);
   quantize -> dequantize error against what a plain uniform quantizer of
   the same bits would give; edge rows (zeros, -0.0, constants, huge and
   tiny magnitudes, one outlier); Q8_K activations; dot products against
   the float dot of the dequantized weights; and byte-for-byte equality
   with llama.cpp's own quantization of ../shared's models. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state = 1;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(void) {
    double u = urand(), v = urand();
    return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* A weight format, and what a plain uniform quantizer of the same bits
   per value and sub-block size would do (sym: levels span +-max|x|;
   else they span min(x, 0)..max(x)). */
typedef struct fmt {
    infer_type t;
    int bits, sub, sym;
} fmt;

static const fmt FMTS[] = {
    {INFER_TYPE_Q4_0, 4, 32, 1},  {INFER_TYPE_Q4_1, 4, 32, 0},  {INFER_TYPE_Q5_0, 5, 32, 1},
    {INFER_TYPE_Q5_1, 5, 32, 0},  {INFER_TYPE_Q8_0, 8, 32, 1},  {INFER_TYPE_Q2_K, 2, 16, 0},
    {INFER_TYPE_Q3_K, 3, 16, 1},  {INFER_TYPE_Q4_K, 4, 32, 0},  {INFER_TYPE_Q5_K, 5, 32, 0},
    {INFER_TYPE_Q6_K, 6, 16, 1},  {INFER_TYPE_IQ4_NL, 4, 32, 1}, {INFER_TYPE_IQ4_XS, 4, 32, 1},
};
#define N_FMTS (int)(sizeof FMTS / sizeof FMTS[0])

static const infer__type_traits *T(infer_type t) { return infer__traits(t); }

/* quantize then dequantize n values (n a multiple of 256) */
static void round_trip(infer_type t, const float *x, float *out, int n) {
    void *q = calloc(1, infer__row_size(t, n));
    T(t)->quantize(x, q, n);
    T(t)->to_float(q, out, n);
    free(q);
}

/* the RMSE a uniform quantizer with exact float scales would have:
   step^2/12 per value, the step being the sub-block's span over its levels */
static double expected_rmse(const fmt *f, const float *x, int n) {
    double s = 0;
    int b, j;
    for (b = 0; b < n / f->sub; b++) {
        double lo = 0, hi = 0, amax = 0, step;
        for (j = 0; j < f->sub; j++) {
            double v = x[b * f->sub + j];
            lo = fmin(lo, v), hi = fmax(hi, v), amax = fmax(amax, fabs(v));
        }
        step = (f->sym ? 2 * amax : hi - lo) / ((1 << f->bits) - 1);
        s += step * step / 12 * f->sub;
    }
    return sqrt(s / n);
}

static double rmse(const float *a, const float *b, int n) {
    double s = 0;
    int i;
    for (i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / n);
}

/* ---- layouts -------------------------------------------------------------- */

Test(quants_k, traits_and_block_structs) {
    static const struct { infer_type t; size_t size; int bs; infer_type vdt; } want[] = {
        {INFER_TYPE_Q2_K, sizeof(infer__block_q2_K), 256, INFER_TYPE_Q8_K},
        {INFER_TYPE_Q3_K, sizeof(infer__block_q3_K), 256, INFER_TYPE_Q8_K},
        {INFER_TYPE_Q4_K, sizeof(infer__block_q4_K), 256, INFER_TYPE_Q8_K},
        {INFER_TYPE_Q5_K, sizeof(infer__block_q5_K), 256, INFER_TYPE_Q8_K},
        {INFER_TYPE_Q6_K, sizeof(infer__block_q6_K), 256, INFER_TYPE_Q8_K},
        {INFER_TYPE_Q8_K, sizeof(infer__block_q8_K), 256, INFER_TYPE_Q8_K},
        {INFER_TYPE_IQ4_NL, sizeof(infer__block_iq4_nl), 32, INFER_TYPE_Q8_0},
        {INFER_TYPE_IQ4_XS, sizeof(infer__block_iq4_xs), 256, INFER_TYPE_Q8_K},
        {INFER_TYPE_MXFP4, sizeof(infer__block_mxfp4), 32, INFER_TYPE_Q8_0},
    };
    static const size_t ggml_size[] = {84, 110, 144, 176, 210, 292, 18, 136, 17};
    size_t i;
    int f;
    for (i = 0; i < sizeof want / sizeof want[0]; i++) {
        const infer__type_traits *tt = T(want[i].t);
        cr_assert_eq(want[i].size, ggml_size[i], "%s block struct is %zu bytes, ggml's is %zu", tt->name, want[i].size,
                     ggml_size[i]);
        cr_assert_eq((size_t)tt->type_size, ggml_size[i], "%s", tt->name);
        cr_assert_eq(tt->block_size, want[i].bs, "%s", tt->name);
        cr_assert_eq(tt->vec_dot_type, want[i].vdt, "%s", tt->name);
        cr_assert_not_null(tt->to_float, "%s", tt->name);
    }
    for (f = 0; f < N_FMTS; f++) {
        const infer__type_traits *tt = T(FMTS[f].t);
        cr_assert(tt->is_supported && tt->to_float && tt->vec_dot && tt->quantize, "%s lacks a kernel", tt->name);
        cr_assert_not_null(T(tt->vec_dot_type)->from_float, "%s: no from_float for %s", tt->name,
                           T(tt->vec_dot_type)->name);
    }
    cr_assert_not_null(T(INFER_TYPE_F32)->quantize);
    cr_assert_not_null(T(INFER_TYPE_F16)->quantize);
    cr_assert_not_null(T(INFER_TYPE_BF16)->quantize);
    cr_assert_null(T((infer_type)16)->quantize); /* IQ2_XXS */
}

/* Value i (0..255, or 0..31 for IQ4_NL) of one block, decoded from ggml's
   layout description value by value. */
static const int8_t IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* FP4 E2M1: sign, 2 exponent bits, 1 mantissa bit (OCP MX spec) */
static const double MXFP4_E2M1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};

static float h2f(const uint8_t *p) { return infer__fp16_to_fp32((uint16_t)(p[0] | p[1] << 8)); }

/* 6-bit scale and min j of Q4_K/Q5_K's 12 bytes */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63, *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

static float ref_value(infer_type t, const uint8_t *b, int i) {
    int h = i / 128, r = i % 128, l = i % 32, sub16 = i / 16, sub32 = i / 32;
    switch (t) {
    case INFER_TYPE_Q2_K: { /* scales[16] qs[64] d dmin */
        int q = (b[16 + 32 * h + l] >> (2 * (r / 32))) & 3;
        return h2f(b + 80) * (b[sub16] & 15) * q - h2f(b + 82) * (b[sub16] >> 4);
    }
    case INFER_TYPE_Q3_K: { /* hmask[32] qs[64] scales[12] d */
        const uint8_t *s = b + 96;
        int q = ((b[32 + 32 * h + l] >> (2 * (r / 32))) & 3) + 4 * ((b[i % 32] >> (i / 32)) & 1) - 4;
        int lo = sub16 < 8 ? s[sub16] & 15 : s[sub16 - 8] >> 4, hi = (s[8 + sub16 % 4] >> (2 * (sub16 / 4))) & 3;
        return h2f(b + 108) * ((lo | hi << 4) - 32) * q;
    }
    case INFER_TYPE_Q4_K:   /* d dmin scales[12] qs[128] */
    case INFER_TYPE_Q5_K: { /* d dmin scales[12] qh[32] qs[128] */
        int sc, m, q5 = t == INFER_TYPE_Q5_K, q;
        const uint8_t *qs = b + 16 + (q5 ? 32 : 0);
        k4_scale_min(b + 4, sub32, &sc, &m);
        q = (qs[32 * (i / 64) + l] >> (4 * (sub32 % 2))) & 15;
        if (q5) q |= ((b[16 + l] >> sub32) & 1) << 4;
        return h2f(b) * sc * q - h2f(b + 2) * m;
    }
    case INFER_TYPE_Q6_K: { /* ql[128] qh[64] scales[16] d */
        int k = r / 32;
        int lo = (b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15, hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
        return h2f(b + 208) * (int8_t)b[192 + sub16] * ((lo | hi << 4) - 32);
    }
    case INFER_TYPE_IQ4_NL: /* d qs[16] */
        return h2f(b) * IQ4NL[(b[2 + i % 16] >> (4 * (i / 16))) & 15];
    case INFER_TYPE_IQ4_XS: { /* d scales_h(16 bits) scales_l[4] qs[128] */
        int sh = b[2] | b[3] << 8, j = i % 32;
        int ls = ((b[4 + sub32 / 2] >> (4 * (sub32 % 2))) & 15) | ((sh >> (2 * sub32)) & 3) << 4;
        return h2f(b) * (ls - 32) * IQ4NL[(b[8 + 16 * sub32 + j % 16] >> (4 * (j / 16))) & 15];
    }
    case INFER_TYPE_MXFP4: /* e qs[16]: 2^(e-127) times E2M1's value */
        return (float)ldexp(MXFP4_E2M1[(b[1 + i % 16] >> (4 * (i / 16))) & 15], b[0] - 127);
    case INFER_TYPE_Q8_K: {
        float d;
        memcpy(&d, b, 4);
        return d * (int8_t)b[4 + i];
    }
    default: return NAN;
    }
}

/* random bytes, with each fp16 scale made a finite value near 2^-6 */
static void random_block(infer_type t, uint8_t *b) {
    static const struct { infer_type t; int off[2]; } scale_at[] = {
        {INFER_TYPE_Q2_K, {80, 82}}, {INFER_TYPE_Q3_K, {108, -1}}, {INFER_TYPE_Q4_K, {0, 2}}, {INFER_TYPE_Q5_K, {0, 2}},
        {INFER_TYPE_Q6_K, {208, -1}}, {INFER_TYPE_IQ4_NL, {0, -1}}, {INFER_TYPE_IQ4_XS, {0, -1}},
    };
    size_t i, k;
    for (i = 0; i < (size_t)T(t)->type_size; i++) b[i] = (uint8_t)rng_next();
    for (i = 0; i < sizeof scale_at / sizeof scale_at[0]; i++)
        if (scale_at[i].t == t)
            for (k = 0; k < 2; k++)
                if (scale_at[i].off[k] >= 0) {
                    uint16_t h = infer__fp32_to_fp16((float)((urand() * 2 - 1) * 0.03));
                    b[scale_at[i].off[k]] = (uint8_t)h, b[scale_at[i].off[k] + 1] = (uint8_t)(h >> 8);
                }
    if (t == INFER_TYPE_Q8_K) {
        float d = (float)(urand() * 0.01);
        memcpy(b, &d, 4);
    }
}

Test(quants_k, to_float_matches_layout_random_blocks) {
    static const infer_type ts[] = {INFER_TYPE_Q2_K, INFER_TYPE_Q3_K, INFER_TYPE_Q4_K,   INFER_TYPE_Q5_K,
                                    INFER_TYPE_Q6_K, INFER_TYPE_Q8_K, INFER_TYPE_IQ4_NL, INFER_TYPE_IQ4_XS,
                                    INFER_TYPE_MXFP4};
    uint8_t blk[4 * 292];
    float out[4 * 256];
    size_t k;
    int rep, i;
    rng_state = 11;
    for (k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        const infer__type_traits *tt = T(ts[k]);
        for (rep = 0; rep < 50; rep++) {
            for (i = 0; i < 4; i++) random_block(ts[k], blk + i * tt->type_size);
            tt->to_float(blk, out, 4 * tt->block_size);
            for (i = 0; i < 4 * tt->block_size; i++) {
                float want = ref_value(ts[k], blk + (i / tt->block_size) * tt->type_size, i % tt->block_size);
                cr_assert(out[i] == want || fabsf(out[i] - want) <= 1e-6f * (1 + fabsf(want)), "%s: value %d is %g, layout says %g",
                          tt->name, i, out[i], want);
            }
        }
    }
}

/* ---- quantize -> dequantize ------------------------------------------------ */

/* Error of each format's quantizer on Gaussian and uniform rows at three
   magnitudes, as a multiple of a plain uniform quantizer's (exact float
   scale per sub-block). llama.cpp's searches beat that plain quantizer
   (ratios 0.79..1.0) despite storing their scales in 6 or fewer bits; at
   1e-3 the fp16 super-block scales lose precision (subnormal), which
   costs up to ~1.5x. */
Test(quants_k, round_trip_error_vs_uniform_quantizer) {
    enum { N = 4096 };
    static float x[N], y[N];
    static const double mags[] = {1e-3, 1.0, 1e3};
    int f, dist, m, i;
    char line[512];
    for (dist = 0; dist < 2; dist++)
        for (m = 0; m < 3; m++) {
            int len = snprintf(line, sizeof line, "%s x%g: rmse/uniform", dist ? "uniform" : "gauss", mags[m]);
            rng_state = 7;
            for (i = 0; i < N; i++) x[i] = (float)((dist ? urand() * 2 - 1 : gauss()) * mags[m]);
            for (f = 0; f < N_FMTS; f++) {
                double ours, want, limit = mags[m] < 0.01 ? 1.6 : 1.05;
                round_trip(FMTS[f].t, x, y, N);
                ours = rmse(x, y, N);
                want = expected_rmse(&FMTS[f], x, N);
                cr_assert(ours <= limit * want, "%s (%s x%g): rmse %g, a uniform quantizer gets %g", T(FMTS[f].t)->name,
                          dist ? "uniform" : "gauss", mags[m], ours, want);
                len += snprintf(line + len, sizeof line - (size_t)len, " %s %.3f", T(FMTS[f].t)->name, ours / want);
            }
            cr_log_info("%s", line);
        }
}

/* Sub-blocks of very different magnitudes in one super-block: the small
   ones keep their own relative precision as far as their 6-bit (4-bit
   for Q2_K) sub-block scales allow. */
Test(quants_k, mixed_magnitudes_in_a_super_block) {
    enum { N = 1024 };
    static float x[N], y[N];
    int f, i;
    rng_state = 3;
    for (i = 0; i < N; i++) x[i] = (float)(gauss() * ((i / 32) % 2 ? 1.0 : 0.05));
    for (f = 0; f < N_FMTS; f++) {
        double ours, want;
        round_trip(FMTS[f].t, x, y, N);
        ours = rmse(x, y, N);
        want = expected_rmse(&FMTS[f], x, N);
        cr_assert(ours <= 1.3 * want, "%s: rmse %g, a uniform quantizer gets %g", T(FMTS[f].t)->name, ours, want);
    }
}

/* ---- edge rows ---------------------------------------------------------------- */

static void check_finite(const char *what, const char *name, const float *y, int n) {
    int i;
    for (i = 0; i < n; i++) cr_assert(isfinite(y[i]), "%s, %s: value %d is %g", name, what, i, y[i]);
}

Test(quants_k, zeros_and_negative_zeros) {
    enum { N = 512 };
    static float x[N], y[N], act[N];
    static uint8_t q[N * 2], q2[N * 2], xq[N * 2];
    int f, i, sign;
    rng_state = 5;
    for (i = 0; i < N; i++) act[i] = (float)gauss();
    for (f = 0; f < N_FMTS; f++) {
        const infer__type_traits *tt = T(FMTS[f].t), *at = T(tt->vec_dot_type);
        size_t rs = infer__row_size(FMTS[f].t, N);
        for (sign = 0; sign < 2; sign++) {
            for (i = 0; i < N; i++) x[i] = sign ? -0.0f : 0.0f;
            tt->quantize(x, q, N);
            tt->to_float(q, y, N);
            for (i = 0; i < N; i++) cr_assert(y[i] == 0.0f, "%s: all-%s row gives %g at %d", tt->name, sign ? "-0" : "0", y[i], i);
            at->from_float(act, xq, N);
            cr_assert(tt->vec_dot(N, q, xq) == 0.0f, "%s: zero row dots to %g", tt->name, tt->vec_dot(N, q, xq));
        }
        /* -0.0 in place of +0.0 among other values changes nothing */
        for (i = 0; i < N; i++) x[i] = i % 3 ? (float)gauss() : 0.0f;
        tt->quantize(x, q, N);
        for (i = 0; i < N; i++)
            if (x[i] == 0.0f) x[i] = -0.0f;
        tt->quantize(x, q2, N);
        cr_assert(!memcmp(q, q2, rs), "%s: -0.0 quantizes differently from 0.0", tt->name);
    }
}

Test(quants_k, constant_rows) {
    enum { N = 512 };
    static float x[N], y[N];
    static const float cs[] = {1.0f, -1.0f, 0.3712f, -2.5e3f, 7e-3f};
    size_t c;
    int f, i;
    for (f = 0; f < N_FMTS; f++)
        for (c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            for (i = 0; i < N; i++) x[i] = cs[c];
            round_trip(FMTS[f].t, x, y, N);
            /* one level of the grid lands on c up to the fp16 (and, for
               the K formats, 6-bit scale) rounding of the scales */
            for (i = 0; i < N; i++)
                cr_assert(fabsf(y[i] - cs[c]) <= 0.02f * fabsf(cs[c]), "%s: constant %g comes back as %g", T(FMTS[f].t)->name,
                          cs[c], y[i]);
        }
}

Test(quants_k, huge_tiny_and_outliers) {
    enum { N = 512 };
    static float x[N], y[N];
    static const double mags[] = {3e4, 1e-6};
    int f, m, i;
    for (f = 0; f < N_FMTS; f++) {
        const char *name = T(FMTS[f].t)->name;
        for (m = 0; m < 2; m++) {
            double amax = 0, err = 0;
            rng_state = 9;
            for (i = 0; i < N; i++) x[i] = (float)((urand() * 2 - 1) * mags[m]), amax = fmax(amax, fabs(x[i]));
            round_trip(FMTS[f].t, x, y, N);
            check_finite(m ? "tiny" : "huge", name, y, N);
            err = rmse(x, y, N);
            /* huge rows keep their precision; tiny ones may underflow the
               fp16 scales to zero but never exceed the values themselves */
            if (m == 0)
                cr_assert(err <= 1.05 * expected_rmse(&FMTS[f], x, N), "%s huge: rmse %g", name, err);
            else
                for (i = 0; i < N; i++) cr_assert(fabsf(y[i]) <= 1.5 * amax, "%s tiny: %g from %g", name, y[i], x[i]);
        }
        /* one outlier 1000x the rest: it survives within a few percent */
        rng_state = 10;
        for (i = 0; i < N; i++) x[i] = (float)(gauss() * 0.01);
        x[77] = 10.0f;
        round_trip(FMTS[f].t, x, y, N);
        check_finite("outlier", name, y, N);
        cr_assert(fabsf(y[77] - 10.0f) <= 0.6f, "%s: outlier 10 comes back as %g", name, y[77]);
    }
}

/* ---- Q8_K activations -------------------------------------------------------- */

Test(quants_k, q8_K_from_float) {
    enum { N = 1024 };
    static float x[N];
    static infer__block_q8_K q[N / 256];
    int b, i, rep;
    rng_state = 21;
    for (rep = 0; rep < 20; rep++) {
        for (i = 0; i < N; i++) x[i] = (float)(gauss() * (rep + 1) * 0.1);
        if (rep == 3) x[5] = -100.0f;  /* a negative largest value */
        if (rep == 4) x[300] = 100.0f; /* a positive one */
        infer__q8_K_from_float(x, q, N);
        for (b = 0; b < N / 256; b++) {
            const float *xb = x + 256 * b;
            float amax = 0, max = 0;
            int k;
            for (i = 0; i < 256; i++)
                if (fabsf(xb[i]) > amax) amax = fabsf(xb[i]), max = xb[i];
            /* the largest magnitude is -127, so d = -max/127 */
            cr_assert(fabsf(q[b].d - -max / 127) <= 1e-6f * amax, "block %d: d %g for max %g", b, q[b].d, max);
            for (i = 0; i < 256; i++) {
                cr_assert(q[b].qs[i] >= -127 && q[b].qs[i] <= 127);
                cr_assert(fabsf(q[b].qs[i] * q[b].d - xb[i]) <= 0.5f * fabsf(q[b].d) * 1.0001f, "block %d value %d: %g vs %g",
                          b, i, q[b].qs[i] * q[b].d, xb[i]);
                if (xb[i] == max) cr_assert_eq(q[b].qs[i], -127);
            }
            for (k = 0; k < 16; k++) {
                int s = 0;
                for (i = 0; i < 16; i++) s += q[b].qs[16 * k + i];
                cr_assert_eq(q[b].bsums[k], s, "block %d: bsums[%d] %d, want %d", b, k, q[b].bsums[k], s);
            }
        }
    }
    memset(x, 0, sizeof x);
    x[600] = -0.0f;
    memset(q, 0x55, sizeof q);
    infer__q8_K_from_float(x, q, N);
    for (b = 0; b < N / 256; b++) {
        cr_assert(q[b].d == 0.0f);
        for (i = 0; i < 256; i++) cr_assert_eq(q[b].qs[i], 0);
        for (i = 0; i < 16; i++) cr_assert_eq(q[b].bsums[i], 0);
    }
}

/* ---- dot products -------------------------------------------------------------- */

/* w (quantized) . x against the double dot of the dequantized w with x
   itself. Activation quantization errs by at most half a step per value:
   |x - q*d| <= d/2 + (for Q8_0's fp16 d) 127*|d - fp16(d)|, so the
   difference is bounded by sum over blocks of that times sum |w|. */
static void check_dot(const fmt *f, const float *w, const float *x, int n, int exact) {
    const infer__type_traits *tt = T(f->t), *at = T(tt->vec_dot_type);
    int ab = at->block_size, b, i;
    void *wq = calloc(1, infer__row_size(f->t, n)), *xq = calloc(1, infer__row_size(tt->vec_dot_type, n));
    float *wd = (float *)malloc(sizeof(float) * (size_t)n);
    double want = 0, bound = 0, mag = 0, got;
    tt->quantize(w, wq, n);
    tt->to_float(wq, wd, n);
    at->from_float(x, xq, n);
    for (b = 0; b < n / ab; b++) {
        double amax = 0, sw = 0;
        for (i = b * ab; i < (b + 1) * ab; i++) {
            want += (double)wd[i] * x[i];
            mag += fabs((double)wd[i] * x[i]);
            amax = fmax(amax, fabs(x[i]));
            sw += fabs(wd[i]);
        }
        bound += amax / 127 * (0.5 + (ab == 32 ? 127.0 / 2048 : 0)) * sw;
    }
    got = tt->vec_dot(n, wq, xq);
    if (exact) bound = 0;
    bound += 2e-6 * mag + 1e-30;
    cr_assert(fabs(got - want) <= bound, "%s%s: dot %.7g, float dot of the dequantized weights %.7g (bound %.3g)", tt->name,
              exact ? " (exact activations)" : "", got, want, bound);
    free(wq);
    free(xq);
    free(wd);
}

Test(quants_k, vec_dot_vs_float_dot) {
    enum { N = 2048 };
    static float w[N], x[N];
    int f, rep, i;
    rng_state = 31;
    for (f = 0; f < N_FMTS; f++)
        for (rep = 0; rep < 20; rep++) {
            double ws = rep % 4 == 0 ? 1e-2 : rep % 4 == 1 ? 1.0 : 30.0;
            for (i = 0; i < N; i++) w[i] = (float)(gauss() * ws * (rep % 2 ? 1.0 : 1 + (i / 16) % 5));
            for (i = 0; i < N; i++) x[i] = (float)(gauss() * (rep % 3 ? 1.0 : 100.0));
            check_dot(&FMTS[f], w, x, N, 0);
            /* activations on the 8-bit grid with d = 1/64 exactly (the
               block's largest magnitude is 127/64): nothing is lost, so the
               dot must equal the float one up to rounding */
            for (i = 0; i < N; i++) x[i] = (float)((int)(urand() * 255) - 127) / 64.0f;
            for (i = 0; i < N; i += 32) x[i + (int)(urand() * 32)] = (rep % 2 ? 127 : -127) / 64.0f;
            check_dot(&FMTS[f], w, x, N, 1);
        }
}

/* MXFP4 is no uniform quantizer (power-of-two scales, E2M1's uneven
   grid), so it is checked against its definition instead: the exponent
   puts the block's max magnitude in [4, 8) * 2^(e-127) (E2M1's top
   binade, so 6 * 2^(e-127) may clip it), and each value is the nearest
   grid point (the smaller index on a tie). Rows span the exponent range,
   subnormal scales included. */
Test(quants_k, mxfp4_quantize_is_the_definition) {
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static uint8_t q[N / 32 * 17];
    static const double mags[] = {1e-39, 1e-30, 1e-3, 1.0, 1e3, 1e30, 5e36};
    int m, b, i, k;
    rng_state = 41;
    for (m = 0; m < (int)(sizeof mags / sizeof mags[0]); m++) {
        for (i = 0; i < N; i++) x[i] = (float)(gauss() * mags[m] * (1 + (i / 32) % 7));
        for (i = 0; i < N; i += 97) x[i] = 0.0f;
        T(INFER_TYPE_MXFP4)->quantize(x, q, N);
        T(INFER_TYPE_MXFP4)->to_float(q, y, N);
        for (b = 0; b < N / 32; b++) {
            const uint8_t *blk = q + 17 * b;
            double amax = 0, s;
            int e;
            for (i = 0; i < 32; i++) amax = fmax(amax, fabs(x[32 * b + i]));
            frexp(amax, &e); /* amax in [2^(e-1), 2^e) */
            e = e - 1 - 2 + 127;
            if (e < 0) e = 0;
            cr_assert_eq(blk[0], e, "mag %g block %d: exponent %d, want %d", mags[m], b, blk[0], e);
            s = ldexp(1, blk[0] - 127);
            for (i = 0; i < 32; i++) {
                double v = x[32 * b + i], best = INFINITY;
                int want = 0, got = (blk[1 + i % 16] >> (4 * (i / 16))) & 15;
                for (k = 0; k < 16; k++)
                    if (fabs(MXFP4_E2M1[k] * s - v) < best) best = fabs(MXFP4_E2M1[k] * s - v), want = k;
                cr_assert(fabs(MXFP4_E2M1[got] * s - v) == best, "mag %g value %d (%g): code %d, nearest is %d", mags[m],
                          32 * b + i, v, got, want);
                cr_assert_eq(y[32 * b + i], (float)(MXFP4_E2M1[got] * s));
            }
        }
    }
}

Test(quants_k, mxfp4_vec_dot_vs_float_dot) {
    enum { N = 2048 };
    static const fmt f = {INFER_TYPE_MXFP4, 4, 32, 1};
    static float w[N], x[N];
    int rep, i;
    rng_state = 43;
    for (rep = 0; rep < 20; rep++) {
        double ws = rep % 4 == 0 ? 1e-2 : rep % 4 == 1 ? 1.0 : 30.0;
        for (i = 0; i < N; i++) w[i] = (float)(gauss() * ws * (rep % 2 ? 1.0 : 1 + (i / 16) % 5));
        for (i = 0; i < N; i++) x[i] = (float)(gauss() * (rep % 3 ? 1.0 : 100.0));
        check_dot(&f, w, x, N, 0);
        for (i = 0; i < N; i++) x[i] = (float)((int)(urand() * 255) - 127) / 64.0f;
        for (i = 0; i < N; i += 32) x[i + (int)(urand() * 32)] = (rep % 2 ? 127 : -127) / 64.0f;
        check_dot(&f, w, x, N, 1);
    }
}

/* ---- against llama.cpp's own quantization ---------------------------------------- */

/* Every quantized tensor of ../shared/models/DST.gguf equals, byte for
   byte, our quantization of the same tensor of SRC.gguf (F16, the file
   llama.cpp's llama-quantize made DST from, without an importance matrix). */
static void check_same_as_llama_cpp(const char *src_name, const char *dst_name) {
    char sp[512], dp[512];
    infer_error err;
    infer_gguf *src, *dst;
    int64_t i;
    long blocks = 0, same = 0, tensors = 0;
    snprintf(sp, sizeof sp, "%s/models/%s.gguf", INFER_SHARED_DIR, src_name);
    snprintf(dp, sizeof dp, "%s/models/%s.gguf", INFER_SHARED_DIR, dst_name);
    src = infer_gguf_open(sp, &err);
    cr_assert_not_null(src, "%s", err.msg);
    dst = infer_gguf_open(dp, &err);
    cr_assert_not_null(dst, "%s", err.msg);
    for (i = 0; i < dst->n_tensors; i++) {
        const infer__tensor *t = &dst->tensors[i], *s;
        const infer__type_traits *tt = T(t->type);
        int64_t n = t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1), b;
        float *x;
        uint8_t *q;
        if (t->type == INFER_TYPE_F32 || t->type == INFER_TYPE_F16) continue;
        s = infer__gguf_tensor(src, t->name);
        cr_assert(s && s->type == INFER_TYPE_F16 && s->nbytes == (size_t)n * 2, "%s: no F16 %s in %s", dst_name, t->name,
                  src_name);
        cr_assert_not_null(tt->quantize, "%s: %s has no quantizer", t->name, tt->name);
        x = (float *)malloc(sizeof(float) * (size_t)n);
        q = (uint8_t *)malloc(t->nbytes);
        infer__f16_to_float(s->data, x, n);
        tt->quantize(x, q, n);
        for (b = 0; b < n / tt->block_size; b++) {
            const uint8_t *ours = q + b * tt->type_size, *theirs = (const uint8_t *)t->data + b * tt->type_size;
            blocks++;
            if (!memcmp(ours, theirs, (size_t)tt->type_size)) same++;
        }
        tensors++;
        free(x);
        free(q);
    }
    cr_log_info("%s: %ld tensors, %ld of %ld blocks identical to llama.cpp's", dst_name, tensors, same, blocks);
    cr_expect(tensors > 0, "%s has no quantized tensors", dst_name);
    cr_expect_eq(same, blocks, "%s: %ld of %ld blocks differ from llama.cpp's quantization", dst_name, blocks - same, blocks);
    infer_gguf_close(src);
    infer_gguf_close(dst);
}

Test(quants_k, quantizers_match_llama_cpp_bytes) {
    static const char *synth[] = {"q8_0", "q4_0", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m"};
    static const char *tiny[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0"};
    char name[64];
    size_t i;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no llama.cpp-quantized models to compare with");
    for (i = 0; i < sizeof synth / sizeof synth[0]; i++) {
        snprintf(name, sizeof name, "synth-256-%s", synth[i]);
        check_same_as_llama_cpp("synth-256-f16", name);
    }
    for (i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        snprintf(name, sizeof name, "tinystories-656k-%s", tiny[i]);
        check_same_as_llama_cpp("tinystories-656k-f16", name);
    }
}
