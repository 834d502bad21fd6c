/* test_kernels.c - the weight formats and half-precision conversions.
   These live in static functions, so this file compiles its own private
   copy of the implementation (INFER_STATIC + INFER_IMPLEMENTATION) and
   calls infer__fp16_to_fp32, infer__traits(t)->to_float / from_float /
   vec_dot directly. Expected values come from reference code written here
   from the documented layouts (ggml's block formats, IEEE binary16,
   bfloat16), not from the implementation.
   Linking: nothing here or in testutil.c refers to the library's extern
   symbols, so the linker never pulls libinfer.a's object in. It must stay
   that way, so the program holds one copy of each function. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- reference conversions ------------------------------------------------- */

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE binary16 decoded by its definition */
static float ref_h2f(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) return m ? NAN : (sign ? -INFINITY : INFINITY);
    v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (float)(sign ? -v : v);
}

static int h_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int bf_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

static uint64_t rng_state = 1;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }

/* the nearest half to x by exhaustive search over the positive halves,
   ties to the even one; overflow past 65520 to inf */
static uint16_t ref_f2h(float x) {
    double a = fabs((double)x);
    uint16_t sign = signbit(x) ? 0x8000 : 0, lo = 0, hi = 0x7bff;
    if (isnan(x)) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00;
    /* largest half <= a */
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (ref_h2f(mid) <= a) lo = mid;
        else hi = (uint16_t)(mid - 1);
    }
    if (lo < 0x7bff) {
        double d0 = a - ref_h2f(lo), d1 = ref_h2f((uint16_t)(lo + 1)) - a;
        if (d1 < d0 || (d1 == d0 && (lo & 1))) lo++;
    }
    return sign | lo;
}

/* ---- fp16 ------------------------------------------------------------------- */

Test(fp16, decode_all_65536) {
    uint32_t h;
    for (h = 0; h < 65536; h++) {
        float got = infer__fp16_to_fp32((uint16_t)h), want = ref_h2f((uint16_t)h);
        if (h_is_nan((uint16_t)h)) {
            cr_assert(isnan(got), "half %04x (NaN) decodes to %g", h, got);
            cr_assert_eq(signbit(got) != 0, (h & 0x8000) != 0, "half %04x: NaN sign lost", h);
        } else {
            cr_assert_eq(fbits(got), fbits(want), "half %04x decodes to %a, want %a", h, got, want);
        }
    }
}

Test(fp16, round_trip_all_65536) {
    uint32_t h;
    for (h = 0; h < 65536; h++) {
        uint16_t back = infer__fp32_to_fp16(infer__fp16_to_fp32((uint16_t)h));
        if (h_is_nan((uint16_t)h)) cr_assert(h_is_nan(back), "NaN %04x came back as %04x", h, back);
        else cr_assert_eq(back, h, "half %04x came back as %04x", h, back);
    }
}

Test(fp16, halfway_cases_round_to_even) {
    uint32_t h;
    for (h = 0; h < 0x7bff; h++) {
        /* a and b adjacent halves; their midpoint is exact in float */
        float a = ref_h2f((uint16_t)h), b = ref_h2f((uint16_t)(h + 1));
        float mid = (float)(((double)a + (double)b) / 2);
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        uint32_t s;
        cr_assert_eq((double)mid, ((double)a + (double)b) / 2);
        for (s = 0; s <= 0x8000; s += 0x8000) {
            float m = s ? -mid : mid;
            cr_assert_eq(infer__fp32_to_fp16(m), (uint16_t)(s | even), "midpoint %a of %04x,%04x -> %04x, want %04x",
                         m, h, h + 1, infer__fp32_to_fp16(m), s | even);
            /* one float below / above the midpoint goes to the nearer one */
            cr_assert_eq(infer__fp32_to_fp16(nextafterf(m, 0.0f)), (uint16_t)(s | h), "just below midpoint of %04x", h);
            cr_assert_eq(infer__fp32_to_fp16(nextafterf(m, s ? -INFINITY : INFINITY)), (uint16_t)(s | (h + 1)),
                         "just above midpoint of %04x", h);
        }
    }
}

Test(fp16, special_values) {
    cr_assert_eq(infer__fp32_to_fp16(0.0f), 0x0000);
    cr_assert_eq(infer__fp32_to_fp16(-0.0f), 0x8000);
    cr_assert_eq(infer__fp32_to_fp16(INFINITY), 0x7c00);
    cr_assert_eq(infer__fp32_to_fp16(-INFINITY), 0xfc00);
    cr_assert(h_is_nan(infer__fp32_to_fp16(NAN)));
    cr_assert(h_is_nan(infer__fp32_to_fp16(bitsf(0x7f800001u))), "NaN with a low payload became %04x",
              infer__fp32_to_fp16(bitsf(0x7f800001u)));
    cr_assert(h_is_nan(infer__fp32_to_fp16(bitsf(0xffc00000u))));
    cr_assert_eq(infer__fp32_to_fp16(65504.0f), 0x7bff);
    cr_assert_eq(infer__fp32_to_fp16(65519.99f), 0x7bff);
    cr_assert_eq(infer__fp32_to_fp16(65520.0f), 0x7c00, "65520 is halfway to 2^16: rounds (to even) to inf");
    cr_assert_eq(infer__fp32_to_fp16(1e10f), 0x7c00);
    cr_assert_eq(infer__fp32_to_fp16(-1e10f), 0xfc00);
    cr_assert_eq(infer__fp32_to_fp16(FLT_MAX), 0x7c00);
    /* subnormals */
    cr_assert_eq(infer__fp32_to_fp16(5.9604644775390625e-08f), 0x0001, "2^-24 is the smallest subnormal");
    cr_assert_eq(infer__fp32_to_fp16(2.98023223876953125e-08f), 0x0000, "2^-25 is halfway to 0: even is 0");
    cr_assert_eq(infer__fp32_to_fp16(nextafterf(2.98023223876953125e-08f, 1.0f)), 0x0001);
    cr_assert_eq(infer__fp32_to_fp16(-2.98023223876953125e-08f), 0x8000);
    cr_assert_eq(infer__fp32_to_fp16(1e-30f), 0x0000);
    cr_assert_eq(infer__fp32_to_fp16(-1e-30f), 0x8000);
    cr_assert_eq(infer__fp32_to_fp16(bitsf(1)), 0x0000, "float subnormal");
    cr_assert_eq(infer__fp32_to_fp16(6.103515625e-05f), 0x0400, "2^-14 is the smallest normal");
    cr_assert_eq(infer__fp32_to_fp16(6.097555160522461e-05f), 0x03ff, "largest subnormal");
    cr_assert_eq(infer__fp16_to_fp32(0x0001), 5.9604644775390625e-08f);
    cr_assert_eq(infer__fp16_to_fp32(0x03ff), 6.097555160522461e-05f);
    cr_assert(isinf(infer__fp16_to_fp32(0x7c00)) && infer__fp16_to_fp32(0x7c00) > 0);
    cr_assert(isinf(infer__fp16_to_fp32(0xfc00)) && infer__fp16_to_fp32(0xfc00) < 0);
    cr_assert_eq(fbits(infer__fp16_to_fp32(0x8000)), 0x80000000u, "-0 keeps its sign");
}

Test(fp16, random_floats_round_to_nearest) {
    int i;
    rng_state = 16;
    for (i = 0; i < 200000; i++) {
        /* exponents from deep below the subnormals to past the overflow */
        float x = (float)ldexp(urand() + 0.5, (int)(rng_next() % 52) - 34);
        uint16_t got, want;
        if (rng_next() & 1) x = -x;
        if (i % 4 == 0) x = bitsf(fbits(x) & 0xffffe000u);            /* exact in half (when in range) */
        if (i % 4 == 1) x = bitsf((fbits(x) & 0xffffe000u) | 0x1000u); /* a halfway case */
        got = infer__fp32_to_fp16(x);
        want = ref_f2h(x);
        cr_assert_eq(got, want, "%a -> %04x, nearest half is %04x", x, got, want);
    }
}

/* ---- bf16 ------------------------------------------------------------------- */

Test(bf16, decode_and_round_trip_all_65536) {
    uint32_t h;
    for (h = 0; h < 65536; h++) {
        float f = infer__bf16_to_fp32((uint16_t)h);
        uint16_t back = infer__fp32_to_bf16(f);
        if (bf_is_nan((uint16_t)h)) {
            cr_assert(isnan(f));
            cr_assert(bf_is_nan(back), "bf16 NaN %04x came back as %04x", h, back);
        } else {
            cr_assert_eq(fbits(f), h << 16, "bf16 %04x decodes to %08x", h, fbits(f));
            cr_assert_eq(back, h, "bf16 %04x came back as %04x", h, back);
        }
    }
}

Test(bf16, halfway_cases_round_to_even) {
    uint32_t h;
    for (h = 0; h < 0x7f80; h++) {
        uint32_t s;
        for (s = 0; s <= 0x8000; s += 0x8000) {
            uint32_t base = (s | h) << 16;
            uint16_t even = (uint16_t)(s | ((h & 1) ? h + 1 : h));
            cr_assert_eq(infer__fp32_to_bf16(bitsf(base | 0x8000)), even, "midpoint above %04x", s | h);
            cr_assert_eq(infer__fp32_to_bf16(bitsf(base | 0x7fff)), (uint16_t)(s | h), "just below midpoint of %04x",
                         s | h);
            cr_assert_eq(infer__fp32_to_bf16(bitsf(base | 0x8001)), (uint16_t)(s | (h + 1)),
                         "just above midpoint of %04x", s | h);
            cr_assert_eq(infer__fp32_to_bf16(bitsf(base | 0x0001)), (uint16_t)(s | h));
        }
    }
}

Test(bf16, special_values) {
    cr_assert_eq(infer__fp32_to_bf16(0.0f), 0x0000);
    cr_assert_eq(infer__fp32_to_bf16(-0.0f), 0x8000);
    cr_assert_eq(infer__fp32_to_bf16(INFINITY), 0x7f80);
    cr_assert_eq(infer__fp32_to_bf16(-INFINITY), 0xff80);
    cr_assert(bf_is_nan(infer__fp32_to_bf16(NAN)));
    cr_assert(bf_is_nan(infer__fp32_to_bf16(bitsf(0x7f800001u))), "NaN with a low payload became %04x",
              infer__fp32_to_bf16(bitsf(0x7f800001u)));
    cr_assert(bf_is_nan(infer__fp32_to_bf16(bitsf(0xff800001u))));
    cr_assert_eq(infer__fp32_to_bf16(FLT_MAX), 0x7f80, "FLT_MAX rounds up to inf");
    cr_assert_eq(infer__fp32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(infer__fp32_to_bf16(bitsf(0x00010000u)), 0x0001, "float subnormals keep their bits");
}

/* ---- block formats ---------------------------------------------------------- */

typedef struct fmt {
    infer_type type;
    const char *name;
    int block_size, type_size;
    infer_type vec_dot_type;
    int has_min;    /* value = q*d + m */
    int bits;       /* 4, 5 or 8 (signed) */
    int offset;     /* value = (q - offset) * d when no min */
} fmt;

static const fmt quant_fmts[] = {
    {INFER_TYPE_Q4_0, "Q4_0", 32, 18, INFER_TYPE_Q8_0, 0, 4, 8},
    {INFER_TYPE_Q4_1, "Q4_1", 32, 20, INFER_TYPE_Q8_1, 1, 4, 0},
    {INFER_TYPE_Q5_0, "Q5_0", 32, 22, INFER_TYPE_Q8_0, 0, 5, 16},
    {INFER_TYPE_Q5_1, "Q5_1", 32, 24, INFER_TYPE_Q8_1, 1, 5, 0},
    {INFER_TYPE_Q8_0, "Q8_0", 32, 34, INFER_TYPE_Q8_0, 0, 8, 0},
};
#define N_QFMT ((int)(sizeof quant_fmts / sizeof quant_fmts[0]))

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Writes one block of the ggml layout: q holds the 32 codes (0..15, 0..31,
   or -128..127 for Q8_0). */
static void pack_block(const fmt *f, const int *q, uint16_t d, uint16_t m, uint8_t *out) {
    int j;
    uint8_t *p = out;
    put16(p, d), p += 2;
    if (f->has_min) put16(p, m), p += 2;
    if (f->bits == 8) {
        for (j = 0; j < 32; j++) p[j] = (uint8_t)(int8_t)q[j];
        p += 32;
    } else {
        if (f->bits == 5) {
            uint32_t qh = 0;
            for (j = 0; j < 32; j++) qh |= (uint32_t)((q[j] >> 4) & 1) << j;
            p[0] = (uint8_t)qh, p[1] = (uint8_t)(qh >> 8), p[2] = (uint8_t)(qh >> 16), p[3] = (uint8_t)(qh >> 24);
            p += 4;
        }
        for (j = 0; j < 16; j++) p[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        p += 16;
    }
    cr_assert_eq(p - out, f->type_size, "%s: packed %td bytes", f->name, p - out);
}

static float ref_value(const fmt *f, int q, float d, float m) {
    if (f->has_min) return (float)q * d + m;
    return (float)(q - f->offset) * d;
}

static int random_code(const fmt *f) {
    if (f->bits == 8) return (int)(rng_next() % 256) - 128;
    return (int)(rng_next() % (1u << f->bits));
}

/* a random finite half: normal with an exponent in [emin, emax], either sign */
static uint16_t random_half(int emin, int emax) {
    int e = emin + (int)(rng_next() % (unsigned)(emax - emin + 1));
    return (uint16_t)((rng_next() & 1) << 15 | (unsigned)(e + 15) << 10 | (rng_next() & 1023));
}

/* n values of random blocks; fills expected with the reference values */
static uint8_t *random_blocks(const fmt *f, int n, float *expected, int edge) {
    int nb = n / 32, b, j;
    uint8_t *w = (uint8_t *)malloc((size_t)nb * (size_t)f->type_size);
    static const uint16_t edge_d[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0x1400};
    for (b = 0; b < nb; b++) {
        int q[32];
        uint16_t d, m = 0;
        float df, mf;
        if (edge) {
            d = edge_d[(size_t)b % (sizeof edge_d / sizeof edge_d[0])];
            m = edge_d[(size_t)(b * 7 + 3) % (sizeof edge_d / sizeof edge_d[0])];
        } else {
            d = random_half(-12, 2);
            m = random_half(-10, 3);
        }
        for (j = 0; j < 32; j++) {
            q[j] = random_code(f);
            if (edge && b % 3 == 0) q[j] = j % 2 ? (f->bits == 8 ? -128 : (1 << f->bits) - 1) : (f->bits == 8 ? 127 : 0);
        }
        pack_block(f, q, d, m, w + (size_t)b * (size_t)f->type_size);
        df = ref_h2f(d);
        mf = ref_h2f(m);
        for (j = 0; j < 32; j++) expected[b * 32 + j] = ref_value(f, q[j], df, mf);
    }
    return w;
}

Test(kernels, traits_match_ggml_layouts) {
    int i;
    for (i = 0; i < N_QFMT; i++) {
        const fmt *f = &quant_fmts[i];
        const infer__type_traits *tt = infer__traits(f->type);
        cr_assert_not_null(tt);
        cr_assert_str_eq(tt->name, f->name);
        cr_assert_eq(tt->block_size, f->block_size, "%s block size", f->name);
        cr_assert_eq(tt->type_size, f->type_size, "%s block bytes", f->name);
        cr_assert_eq(tt->vec_dot_type, f->vec_dot_type, "%s activations", f->name);
        cr_assert(tt->is_supported && tt->to_float && tt->vec_dot, "%s has kernels", f->name);
        cr_assert_eq(infer__row_size(f->type, 4096), (size_t)4096 / 32 * (size_t)f->type_size);
    }
    cr_assert_eq(infer__traits(INFER_TYPE_Q8_1)->type_size, 36);
    cr_assert_eq(infer__traits(INFER_TYPE_F32)->type_size, 4);
    cr_assert_eq(infer__traits(INFER_TYPE_F16)->type_size, 2);
    cr_assert_eq(infer__traits(INFER_TYPE_BF16)->type_size, 2);
    cr_assert_eq(infer__traits(INFER_TYPE_F16)->vec_dot_type, INFER_TYPE_F16);
    cr_assert_eq(infer__traits(INFER_TYPE_BF16)->vec_dot_type, INFER_TYPE_BF16);
    cr_assert_eq(infer__traits(INFER_TYPE_Q4_K)->block_size, 256);
    cr_assert_eq(infer__traits(INFER_TYPE_Q4_K)->type_size, 144);
    cr_assert_eq(infer__traits(INFER_TYPE_Q6_K)->type_size, 210);
    cr_assert_null(infer__traits(INFER_TYPE_COUNT));
}

static void check_to_float(const fmt *f, int edge) {
    enum { N = 32 * 40 };
    static float expected[N], got[N];
    uint8_t *w = random_blocks(f, N, expected, edge);
    int i;
    for (i = 0; i < N; i++) got[i] = NAN;
    infer__traits(f->type)->to_float(w, got, N);
    for (i = 0; i < N; i++)
        cr_assert_eq(got[i], expected[i], "%s%s: value %d is %a, want %a", f->name, edge ? " (edge)" : "", i, got[i],
                     expected[i]);
    /* a part of a row: just the blocks asked for */
    for (i = 0; i < N; i++) got[i] = 12345.0f;
    infer__traits(f->type)->to_float(w + f->type_size, got, 64);
    for (i = 0; i < 64; i++) cr_assert_eq(got[i], expected[32 + i]);
    cr_assert_eq(got[64], 12345.0f, "%s: to_float wrote past n", f->name);
    free(w);
}

Test(kernels, to_float_exact_random_blocks) {
    int i;
    rng_state = 100;
    for (i = 0; i < N_QFMT; i++) check_to_float(&quant_fmts[i], 0);
}

Test(kernels, to_float_exact_edge_blocks) {
    int i;
    rng_state = 101;
    for (i = 0; i < N_QFMT; i++) check_to_float(&quant_fmts[i], 1);
}

Test(kernels, to_float_known_block) {
    /* one hand-made Q4_0 block: d = 0.5, codes j % 16 -> (j % 16 - 8) / 2 */
    uint8_t blk[18];
    float out[32];
    int j;
    blk[0] = 0x00, blk[1] = 0x38; /* 0x3800 = 0.5 */
    for (j = 0; j < 16; j++) blk[2 + j] = (uint8_t)(j | (15 - j) << 4);
    infer__traits(INFER_TYPE_Q4_0)->to_float(blk, out, 32);
    for (j = 0; j < 16; j++) {
        cr_assert_eq(out[j], (j - 8) * 0.5f, "low nibble %d", j);
        cr_assert_eq(out[j + 16], (7 - j) * 0.5f, "high nibble %d", j);
    }
    /* one Q5_1 block: d = 1, m = -16, code j gets its fifth bit from qh bit j */
    {
        uint8_t b5[24];
        memset(b5, 0, sizeof b5);
        b5[1] = 0x3c;             /* d = 1.0 */
        b5[2] = 0x00, b5[3] = 0xcc; /* m = -16.0 */
        b5[4] = 0xff, b5[5] = 0x00, b5[6] = 0x00, b5[7] = 0x80; /* values 0-7 and 31 have bit 4 */
        for (j = 0; j < 16; j++) b5[8 + j] = (uint8_t)(3 | 5 << 4);
        infer__traits(INFER_TYPE_Q5_1)->to_float(b5, out, 32);
        for (j = 0; j < 32; j++) {
            int code = (j < 16 ? 3 : 5) + ((j < 8 || j == 31) ? 16 : 0);
            cr_assert_eq(out[j], (float)code - 16.0f, "Q5_1 value %d is %g", j, out[j]);
        }
    }
}

/* ---- float formats -------------------------------------------------------- */

Test(kernels, float_formats_to_and_from_float) {
    enum { N = 1000 };
    static float x[N], got[N];
    static uint16_t h[N], hb[N];
    int i;
    rng_state = 200;
    for (i = 0; i < N; i++) x[i] = (float)((urand() - 0.5) * ldexp(1.0, (int)(rng_next() % 40) - 20));
    infer__traits(INFER_TYPE_F32)->from_float(x, got, N);
    cr_assert_eq(memcmp(got, x, sizeof x), 0);
    infer__traits(INFER_TYPE_F32)->to_float(x, got, N);
    cr_assert_eq(memcmp(got, x, sizeof x), 0);

    infer__traits(INFER_TYPE_F16)->from_float(x, h, N);
    for (i = 0; i < N; i++) cr_assert_eq(h[i], ref_f2h(x[i]), "F16 from_float of %a", x[i]);
    infer__traits(INFER_TYPE_F16)->to_float(h, got, N);
    for (i = 0; i < N; i++) cr_assert_eq(got[i], ref_h2f(h[i]));

    infer__traits(INFER_TYPE_BF16)->from_float(x, hb, N);
    infer__traits(INFER_TYPE_BF16)->to_float(hb, got, N);
    for (i = 0; i < N; i++) {
        /* within half a bf16 step (2^-8 relative) */
        cr_assert_leq(fabs((double)got[i] - x[i]), fabs((double)x[i]) * ldexp(1.0, -8) * 1.0000001, "BF16 of %a is %a",
                      x[i], got[i]);
        cr_assert_eq((uint32_t)hb[i] << 16, fbits(got[i]));
    }
}

/* ---- dot products ------------------------------------------------------------ */

static double dot_ref(const float *w, const float *x, int n) {
    double s = 0;
    int i;
    for (i = 0; i < n; i++) s += (double)w[i] * (double)x[i];
    return s;
}

static void *quantize_activations(infer_type vdt, const float *x, int n) {
    const infer__type_traits *vt = infer__traits(vdt);
    void *xq = malloc(infer__row_size(vdt, n) + 64);
    cr_assert_not_null(vt->from_float);
    vt->from_float(x, xq, n);
    return xq;
}

/* The error an 8-bit activation block may add: each x within d/2 of its
   code, d = amax/127 rounded to fp16 (2^-11) and codes rounded, so per value
   |w| * amax * (1/254 + 2^-10); for the min formats the fp16 sum term s adds
   |m| * 32 * amax * 2^-10 per block. */
static double q8_bound(const fmt *f, const float *wf, const float *mins, const float *x, int n) {
    double bound = 0, mag = 0;
    int b, j;
    for (b = 0; b < n / 32; b++) {
        double amax = 0, sw = 0;
        for (j = 0; j < 32; j++) {
            amax = fmax(amax, fabs(x[b * 32 + j]));
            sw += fabs(wf[b * 32 + j]);
            mag += fabs((double)wf[b * 32 + j] * x[b * 32 + j]);
        }
        bound += sw * amax * (1.0 / 254 + ldexp(1.0, -10));
        if (f->has_min) bound += fabs(mins[b]) * 32 * amax * ldexp(1.0, -10);
    }
    return bound + 1e-5 * mag + 1e-30;
}

static void random_x(float *x, int n, double amax_lo, double amax_hi) {
    int i, b;
    for (b = 0; b < n / 32; b++) {
        double amax = amax_lo * pow(amax_hi / amax_lo, urand());
        for (i = 0; i < 32; i++) x[b * 32 + i] = (float)((2 * urand() - 1) * amax);
        if (b % 5 == 1) x[b * 32 + (int)(rng_next() % 32)] = 0.0f;
        if (b % 5 == 2) x[b * 32 + (int)(rng_next() % 32)] = -0.0f;
    }
}

static void check_dot(const fmt *f, int n, int edge, int trials) {
    float *x = (float *)malloc(sizeof(float) * (size_t)n), *wf = (float *)malloc(sizeof(float) * (size_t)n);
    float *mins = (float *)malloc(sizeof(float) * (size_t)(n / 32));
    const infer__type_traits *tt = infer__traits(f->type);
    int t, b;
    double worst = 0;
    for (t = 0; t < trials; t++) {
        uint8_t *w = random_blocks(f, n, wf, edge);
        void *xq;
        double want, got, bound;
        for (b = 0; b < n / 32; b++)
            mins[b] = f->has_min ? ref_h2f((uint16_t)(w[(size_t)b * f->type_size + 2] |
                                                      w[(size_t)b * f->type_size + 3] << 8))
                                 : 0.0f;
        random_x(x, n, 0.05, 100.0);
        if (edge && t == 0) memset(x, 0, sizeof(float) * (size_t)n); /* all zero activations */
        xq = quantize_activations(f->vec_dot_type, x, n);
        got = tt->vec_dot(n, w, xq);
        want = dot_ref(wf, x, n);
        bound = q8_bound(f, wf, mins, x, n);
        cr_assert(isfinite(got), "%s n=%d trial %d: dot is %g", f->name, n, t, got);
        cr_assert_leq(fabs(got - want), bound, "%s n=%d%s trial %d: dot %.9g, float dot %.9g, error %.3g > bound %.3g",
                      f->name, n, edge ? " edge" : "", t, got, want, fabs(got - want), bound);
        if (bound > 0) worst = fmax(worst, fabs(got - want) / bound);
        free(w);
        free(xq);
    }
    cr_log_info("%s n=%d%s: worst error %.2f of the bound", f->name, n, edge ? " edge" : "", worst);
    free(x);
    free(wf);
    free(mins);
}

Test(kernels, vec_dot_random) {
    int i;
    rng_state = 300;
    for (i = 0; i < N_QFMT; i++) {
        check_dot(&quant_fmts[i], 32, 0, 50);
        check_dot(&quant_fmts[i], 256, 0, 50);
        check_dot(&quant_fmts[i], 4096, 0, 5);
    }
}

Test(kernels, vec_dot_edge_values) {
    int i;
    rng_state = 301;
    for (i = 0; i < N_QFMT; i++) check_dot(&quant_fmts[i], 320, 1, 20);
}

Test(kernels, vec_dot_zero_activations_give_zero) {
    enum { N = 256 };
    static float x[N], wf[N];
    int i;
    rng_state = 302;
    for (i = 0; i < N_QFMT; i++) {
        const fmt *f = &quant_fmts[i];
        uint8_t *w = random_blocks(f, N, wf, 0);
        void *xq = quantize_activations(f->vec_dot_type, x, N);
        float d = infer__traits(f->type)->vec_dot(N, w, xq);
        cr_assert_eq(d, 0.0f, "%s: dot with zero activations is %g", f->name, d);
        free(w);
        free(xq);
    }
}

Test(kernels, q8_0_activation_round_trip) {
    enum { N = 32 * 64 };
    static float x[N], back[N];
    int b, j;
    void *xq;
    rng_state = 303;
    random_x(x, N, 0.05, 1000.0);
    xq = quantize_activations(INFER_TYPE_Q8_0, x, N);
    infer__traits(INFER_TYPE_Q8_0)->to_float(xq, back, N);
    for (b = 0; b < N / 32; b++) {
        double amax = 0;
        for (j = 0; j < 32; j++) amax = fmax(amax, fabs(x[b * 32 + j]));
        for (j = 0; j < 32; j++) {
            double e = fabs((double)back[b * 32 + j] - x[b * 32 + j]);
            cr_assert_leq(e, amax * (1.0 / 254 + ldexp(1.0, -10)), "block %d value %d: %g -> %g", b, j, x[b * 32 + j],
                          back[b * 32 + j]);
        }
    }
    free(xq);
}

static void check_float_dot(infer_type type, double rel) {
    enum { N = 1024 };
    static float x[N], wf[N];
    static uint16_t wh[N];
    const infer__type_traits *tt = infer__traits(type);
    int t, i;
    for (t = 0; t < 20; t++) {
        void *w, *xq;
        double want, got, mag = 0, sw = 0;
        random_x(x, N, 0.01, 100.0);
        for (i = 0; i < N; i++) {
            if (type == INFER_TYPE_F32) {
                wf[i] = (float)((2 * urand() - 1) * ldexp(1.0, (int)(rng_next() % 20) - 10));
            } else if (type == INFER_TYPE_F16) {
                wh[i] = i % 50 == 0 ? (uint16_t)(rng_next() % 0x400) : random_half(-14, 8); /* some subnormals */
                wf[i] = ref_h2f(wh[i]);
            } else {
                wh[i] = (uint16_t)((rng_next() & 0x8000) | (0x3800 + rng_next() % 0x1000));
                wf[i] = bitsf((uint32_t)wh[i] << 16);
            }
            mag += fabs((double)wf[i] * x[i]);
            sw += fabs(wf[i]);
        }
        w = type == INFER_TYPE_F32 ? (void *)wf : (void *)wh;
        xq = quantize_activations(tt->vec_dot_type, x, N);
        got = tt->vec_dot(N, w, xq);
        want = dot_ref(wf, x, N);
        cr_assert_leq(fabs(got - want), rel * mag + ldexp(sw, -24), "%s: dot %.9g, float dot %.9g", tt->name, got, want);
        free(xq);
    }
}

Test(kernels, vec_dot_float_formats) {
    rng_state = 400;
    /* activations rounded to the weight's format: 2^-24, 2^-11, 2^-8 */
    check_float_dot(INFER_TYPE_F32, ldexp(1.0, -22));
    check_float_dot(INFER_TYPE_F16, ldexp(1.0, -10));
    check_float_dot(INFER_TYPE_BF16, ldexp(1.0, -7));
}
