/* test_mathfn.c - the engine's own math functions (mathfn.c) against the C
   library's double and long double ones: the float functions within 1 ulp
   over dense sweeps of their whole range (they are almost always correctly
   rounded: the bound asserted, 0.51 ulp, is what a wrong coefficient
   breaks), large sin and cos arguments as RoPE reaches (1e5 to 1e7
   radians and on), double exp and log within 1 ulp, pow within 1 ulp,
   fmaf correctly rounded (where MinGW's is not), C99's special values
   (Annex F), and the bits of a fixed sweep, the same on every platform. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static float mf_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t mf_fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t mf_rng = 0x9e3779b97f4a7c15ull;
static uint64_t mf_next(void) {
    mf_rng ^= mf_rng << 13;
    mf_rng ^= mf_rng >> 7;
    mf_rng ^= mf_rng << 17;
    return mf_rng;
}

/* |got - want| in ulps of float at want (0 where both are the same nan, inf
   or value; 1e9 where only one is inf or nan) */
static double mf_ulpf(float got, double want) {
    float w;
    int e;
    if (want != want) return got != got ? 0 : 1e9;
    w = infer__math_to_float(want);
    if (isinf(w)) return got == w ? 0 : 1e9; /* beyond FLT_MAX */
    if (got != got || isinf(got)) return 1e9;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
}

#if LDBL_MANT_DIG >= 64
static double mf_ulpd(double got, long double want) {
    int e;
    if (want != want) return got != got ? 0 : 1e9;
    if (fabsl(want) > DBL_MAX) return got == (double)want || (isinf(got) && (got > 0) == (want > 0)) ? 0 : 1e9;
    if (got != got || isinf(got)) return 1e9;
    frexpl(want, &e);
    return (double)(fabsl((long double)got - want) / ldexpl(1.0L, e - 53 < -1074 ? -1074 : e - 53));
}
#endif

/* the same value, zeros by sign, any nan for nan */
static int mf_same(double a, double b) { return (a != a && b != b) || (a == b && signbit(a) == signbit(b)); }

#define MF_BOUND 0.51 /* ulp: the float functions' measured worst is 0.5 and a hair */

/* worst error of f against ref over the floats with bits lo, lo + step, ... < hi */
#define MF_SWEEP(worst, at, lo, hi, step, got, want)                  \
    do {                                                              \
        uint64_t mf_u;                                                \
        for (mf_u = (lo); mf_u < (hi); mf_u += (step)) {              \
            float x = mf_float((uint32_t)mf_u);                       \
            double mf_e = mf_ulpf((got), (want));                     \
            if (mf_e > (worst)) (worst) = mf_e, (at) = x;             \
        }                                                             \
    } while (0)

Test(mathfn, expf_within_an_ulp) {
    double worst = 0;
    float at = 0;
    MF_SWEEP(worst, at, 0, 0x42d00000u, 29, infer__expf(x), exp((double)x));          /* 0 .. 104 */
    MF_SWEEP(worst, at, 0x80000000u, 0xc2d00000u, 29, infer__expf(x), exp((double)x)); /* -104 .. -0 */
    MF_SWEEP(worst, at, 0, 0xff800001u, 4099, infer__expf(x), exp((double)x));        /* everything, inf */
    /* the overflow and underflow thresholds, float by float */
    MF_SWEEP(worst, at, 0x42b17000u, 0x42b17400u, 1, infer__expf(x), exp((double)x));
    MF_SWEEP(worst, at, 0xc2cff000u, 0xc2d00400u, 1, infer__expf(x), exp((double)x));
    MF_SWEEP(worst, at, 0xc2ae0000u, 0xc2ae4000u, 1, infer__expf(x), exp((double)x));
    cr_expect(worst < MF_BOUND, "expf: %.4f ulp at %a", worst, at);
    cr_log_info("expf: at most %.6f ulp (at %a)", worst, at);
}

Test(mathfn, logf_within_an_ulp) {
    double worst = 0;
    float at = 0;
    MF_SWEEP(worst, at, 1, 0x7f800001u, 59, infer__logf(x), log((double)x)); /* subnormals .. inf */
    MF_SWEEP(worst, at, 0x3f700000u, 0x3f880000u, 1, infer__logf(x), log((double)x)); /* 0.94 .. 1.06, float by float */
    cr_expect(worst < MF_BOUND, "logf: %.4f ulp at %a", worst, at);
    cr_log_info("logf: at most %.6f ulp (at %a)", worst, at);
}

Test(mathfn, sinf_cosf_within_an_ulp) {
    double ws = 0, wc = 0;
    float as = 0, ac = 0;
    /* up to 2^28, then every magnitude to FLT_MAX */
    MF_SWEEP(ws, as, 0, 0x4d800000u, 61, infer__sinf(x), sin((double)x));
    MF_SWEEP(wc, ac, 0, 0x4d800000u, 61, infer__cosf(x), cos((double)x));
    MF_SWEEP(ws, as, 0x4d800000u, 0x7f800001u, 1021, infer__sinf(x), sin((double)x));
    MF_SWEEP(wc, ac, 0x4d800000u, 0x7f800001u, 1021, infer__cosf(x), cos((double)x));
    /* RoPE's angles at long positions: 1e5 .. 1e7 radians */
    MF_SWEEP(ws, as, 0x47c35000u, 0x4b189680u, 13, infer__sinf(x), sin((double)x));
    MF_SWEEP(wc, ac, 0x47c35000u, 0x4b189680u, 13, infer__cosf(x), cos((double)x));
    /* negative arguments */
    MF_SWEEP(ws, as, 0x80000000u, 0xff800001u, 1009, infer__sinf(x), sin((double)x));
    MF_SWEEP(wc, ac, 0x80000000u, 0xff800001u, 1009, infer__cosf(x), cos((double)x));
    cr_expect(ws < MF_BOUND, "sinf: %.4f ulp at %a", ws, as);
    cr_expect(wc < MF_BOUND, "cosf: %.4f ulp at %a", wc, ac);
    cr_log_info("sinf: at most %.6f ulp (at %a), cosf: %.6f (at %a)", ws, as, wc, ac);
}

Test(mathfn, sincosf_is_sinf_and_cosf) {
    int i;
    for (i = 0; i < 100000; i++) {
        float x = mf_float((uint32_t)mf_next()), s, c;
        if (x != x) continue;
        infer__sincosf(x, &s, &c);
        cr_assert(mf_same(s, infer__sinf(x)) && mf_same(c, infer__cosf(x)), "sincosf(%a)", x);
    }
}

Test(mathfn, tanhf_within_an_ulp) {
    double worst = 0;
    float at = 0;
    MF_SWEEP(worst, at, 0, 0x41300000u, 23, infer__tanhf(x), tanh((double)x)); /* 0 .. 11 */
    MF_SWEEP(worst, at, 0x80000000u, 0xc1300000u, 97, infer__tanhf(x), tanh((double)x));
    MF_SWEEP(worst, at, 0, 0xff800001u, 4099, infer__tanhf(x), tanh((double)x));
    cr_expect(worst < MF_BOUND, "tanhf: %.4f ulp at %a", worst, at);
    cr_log_info("tanhf: at most %.6f ulp (at %a)", worst, at);
}

Test(mathfn, powf_within_an_ulp) {
    double worst = 0;
    float ax = 0, ay = 0;
    int i;
    for (i = 0; i < 3000000; i++) {
        uint64_t r = mf_next();
        float x, y;
        double e;
        switch (i % 4) {
        case 0: /* anything finite and positive, y small enough that some results stay finite */
            x = mf_float((uint32_t)r & 0x7f7fffffu);
            y = mf_float((uint32_t)(r >> 32) & 0x3fffffffu) * ((r >> 63) ? -1.0f : 1.0f);
            break;
        case 1: /* RoPE's base^(-2i/n) */
            x = (float)(1000.0 + (double)(r % 1000000) * 10.0);
            y = -(float)(r >> 40 & 255) / 128.0f;
            break;
        case 2: /* near 1, large y */
            x = 1.0f + (float)((int32_t)(r & 0xffff) - 32768) * 0x1p-24f;
            y = (float)((int64_t)(r >> 16 & 0xffffff) - 0x800000) * 0.01f;
            break;
        default: /* negative x, integer y */
            x = -mf_float(0x3f000000u + ((uint32_t)r & 0x00ffffffu));
            y = (float)((int)(r >> 40 & 127) - 64);
            break;
        }
        e = mf_ulpf(infer__powf(x, y), pow((double)x, (double)y));
        if (e > worst) worst = e, ax = x, ay = y;
    }
    cr_expect(worst < MF_BOUND, "powf: %.4f ulp at %a^%a", worst, ax, ay);
    cr_log_info("powf: at most %.6f ulp (at %a^%a)", worst, ax, ay);
}

Test(mathfn, exp_log_pow_double) {
#if LDBL_MANT_DIG >= 64
    double we = 0, wl = 0, wp = 0, ae = 0, al = 0, px = 0, py = 0;
    int i;
    for (i = 0; i < 1000000; i++) {
        uint64_t r = mf_next(), b = mf_next() & 0x7fefffffffffffffull;
        double x = (double)(r >> 11) * 0x1p-53 * 1460.0 - 748.0, l, y, e;
        if (i & 1) x = ldexp(x, -(int)(r & 63)); /* near 0 too */
        e = mf_ulpd(infer__exp(x), expl((long double)x));
        if (e > we) we = e, ae = x;
        memcpy(&l, &b, sizeof l); /* every positive double, subnormals too */
        if (i % 3 == 0) l = 1.0 + ldexp((double)(int64_t)(mf_next() >> 20) * 0x1p-43, -(int)(r % 50)); /* near 1 */
        if (l > 0) {
            e = mf_ulpd(infer__log(l), logl((long double)l));
            if (e > wl) wl = e, al = l;
        }
        x = (double)(mf_next() >> 11) * 0x1p-53 * 100.0;
        y = ((double)(mf_next() >> 11) * 0x1p-53 * 2 - 1) * (i & 2 ? 700.0 / fabs(log(x)) : 4.0); /* |y log x| up to 700 */
        if (x > 0 && isfinite(y)) {
            e = mf_ulpd(infer__pow(x, y), powl((long double)x, (long double)y));
            if (e > wp) wp = e, px = x, py = y;
        }
    }
    cr_expect(we < 1.0, "exp: %.4f ulp at %a", we, ae);
    cr_expect(wl < 0.52, "log: %.4f ulp at %a", wl, al);
    cr_expect(wp < 1.0, "pow: %.4f ulp at %a^%a", wp, px, py);
    cr_log_info("exp: at most %.6f ulp (at %a), log %.6f (at %a), pow %.6f (at %a^%a)", we, ae, wl, al, wp, px, py);
#else
    cr_skip_test("long double is no wider than double here: no reference for exp and log");
#endif
}

/* glibc's fmaf is correctly rounded (MinGW's is not: checked by a case) */
Test(mathfn, fmaf_correctly_rounded) {
    static const float cases[][4] = {
        /* x, y, z, x y + z rounded once: MinGW's gives -0x1.353016p+33 */
        {-0x1.127372p+19f, 0x1.2066ccp+14f, 0x1p-77f, -0x1.353014p+33f},
        /* the product is a midpoint: z decides, however small */
        {0x1.000002p+0f, 0x1.8p+0f, 0x1p-100f, 0x1.800004p+0f},
        {0x1.000002p+0f, 0x1.8p+0f, -0x1p-100f, 0x1.800002p+0f},
        /* exact cancellation: +0 */
        {2.0f, 3.0f, -6.0f, 0.0f},
        /* subnormal results */
        {0x1p-75f, 0x1.8p-75f, 0x1p-149f, 0x1p-148f},
        {0x1.000002p-60f, 0x1p-60f, -0x1p-120f, 0x1p-143f},
        /* overflow and its edge */
        {0x1p127f, 2.0f, 0.0f, INFINITY},
        {0x1.fffffep127f, 1.0f, 0x1p103f, INFINITY},
        {0x1.fffffep127f, 1.0f, 0x1.fffffep102f, 0x1.fffffep127f},
    };
    int i, n = 0;
    for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        float got = infer__fmaf(cases[i][0], cases[i][1], cases[i][2]);
        cr_expect(mf_same(got, cases[i][3]), "fmaf(%a, %a, %a) = %a, want %a", cases[i][0], cases[i][1], cases[i][2],
                  got, cases[i][3]);
    }
    cr_expect(mf_same(infer__fmaf(-0.0f, 1.0f, -0.0f), -0.0f) && mf_same(infer__fmaf(-0.0f, 1.0f, 0.0f), 0.0f));
    cr_expect(isnan(infer__fmaf(INFINITY, 0.0f, 1.0f)) && isnan(infer__fmaf(INFINITY, 1.0f, -INFINITY)));
    cr_expect(infer__fmaf(INFINITY, 1.0f, 1.0f) == INFINITY && isnan(infer__fmaf(NAN, 1.0f, 1.0f)));
#if defined(__GLIBC__)
    for (i = 0; i < 4000000; i++) {
        uint64_t r = mf_next(), q = mf_next();
        uint32_t a = ((uint32_t)r & 0x807fffffu) | (uint32_t)(1 + (r >> 23 & 0xff) % 253) << 23;
        uint32_t b = ((uint32_t)(r >> 32) & 0x807fffffu) | (uint32_t)(1 + (r >> 55) % 253) << 23;
        float x = mf_float(a), y = mf_float(b), z, got, want;
        if (q & 1) { /* z next to -x y: cancellation, the rounding of the small rest */
            uint32_t p = mf_fbits(x * y) + (uint32_t)(q >> 1 & 7) - 3u;
            z = (q & 16) ? mf_float(p) : -mf_float(p);
        } else if ((q & 2) && x * y != 0.0f && isfinite(x * y)) { /* z far below x y: a tie broken by it */
            z = ldexpf((q & 4) ? 1.0f : -1.0f, ilogbf(x * y) - 24 - (int)(q >> 8 & 63));
        } else {
            z = mf_float(((uint32_t)(q >> 8) & 0x807fffffu) | (uint32_t)(1 + (q >> 40 & 0xff) % 253) << 23);
        }
        got = infer__fmaf(x, y, z);
        want = fmaf(x, y, z);
        if (!mf_same(got, want)) {
            cr_expect(0, "fmaf(%a, %a, %a) = %a, glibc's %a", x, y, z, got, want);
            if (++n > 5) break;
        }
    }
#endif
}

Test(mathfn, special_values) {
    static const float fv[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f, 3.0f, -3.0f, 0.25f, 1.5f,
                               0x1p-149f, -0x1p-149f, 0x1p-126f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN,
                               88.72283172607422f, 88.72283935546875f, -103.97207f, -103.972084f, -104.0f, 9.0f,
                               10.0f, 0x1p-12f, 16777216.0f, 16777217.0f, -16777215.0f, 1e5f, 1e7f, 3.0e38f};
    static const double dv[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 1.5, 0x1p-1074, 0x1p-1022,
                                DBL_MAX, -DBL_MAX, INFINITY, -INFINITY, NAN, 709.782712893384, 709.7827128933841,
                                -745.1332191019411, -745.1332191019412, -708.4, 1e-20, 9007199254740992.0,
                                -9007199254740991.0, 0x1.0000000000001p0, 0x1.fffffffffffffp-1};
    int nf = (int)(sizeof fv / sizeof fv[0]), nd = (int)(sizeof dv / sizeof dv[0]), i, j;
    for (i = 0; i < nf; i++) {
        float x = fv[i], s, c;
        infer__sincosf(x, &s, &c);
        cr_expect(mf_ulpf(infer__expf(x), exp((double)x)) < MF_BOUND, "expf(%a) = %a", x, infer__expf(x));
        cr_expect(mf_ulpf(infer__logf(x), log((double)x)) < MF_BOUND, "logf(%a) = %a", x, infer__logf(x));
        cr_expect(mf_ulpf(infer__tanhf(x), tanh((double)x)) < MF_BOUND, "tanhf(%a) = %a", x, infer__tanhf(x));
        cr_expect(mf_ulpf(s, sin((double)x)) < MF_BOUND, "sinf(%a) = %a", x, s);
        cr_expect(mf_ulpf(c, cos((double)x)) < MF_BOUND, "cosf(%a) = %a", x, c);
        /* the signs of zeros, which ulps do not see */
        if (x == 0) {
            cr_expect(mf_same(s, x) && mf_same(infer__tanhf(x), x) && c == 1.0f && infer__expf(x) == 1.0f);
            cr_expect(infer__logf(x) == -INFINITY && infer__log(x) == -INFINITY);
        }
        for (j = 0; j < nf; j++) {
            float y = fv[j], got = infer__powf(x, y);
            double want = pow((double)x, (double)y);
            cr_expect(mf_ulpf(got, want) < MF_BOUND && (want != 0 || mf_same(got, want)), "powf(%a, %a) = %a, want %a", x,
                      y, got, want);
        }
    }
    cr_expect(isnan(infer__logf(-1.0f)) && isnan(infer__log(-1.0)) && isnan(infer__logf(-INFINITY)));
    cr_expect(infer__logf(1.0f) == 0 && !signbit(infer__logf(1.0f)) && infer__log(1.0) == 0 && !signbit(infer__log(1.0)));
    cr_expect(infer__expf(-INFINITY) == 0 && !signbit(infer__expf(-INFINITY)) && infer__exp(-INFINITY) == 0);
    cr_expect(infer__tanhf(INFINITY) == 1.0f && infer__tanhf(-INFINITY) == -1.0f);
    /* C99 Annex F's pow: the same as the C library's, zeros by sign */
    for (i = 0; i < nd; i++)
        for (j = 0; j < nd; j++) {
            double x = dv[i], y = dv[j], got = infer__pow(x, y), want = pow(x, y);
            int special = x == 0 || y == 0 || isinf(x) || isinf(y) || isnan(x) || isnan(y) || x == 1 ||
                          (x < 0 && floor(y) != y);
            if (special) cr_expect(mf_same(got, want), "pow(%a, %a) = %a, want %a", x, y, got, want);
#if LDBL_MANT_DIG >= 64
            else cr_expect(mf_ulpd(got, powl((long double)x, (long double)y)) < 1.0, "pow(%a, %a) = %a", x, y, got);
#endif
        }
    for (i = 0; i < nd; i++) {
        double x = dv[i];
        if (isnan(x) || isinf(x) || x == 0) {
            cr_expect(mf_same(infer__exp(x), exp(x)), "exp(%a) = %a", x, infer__exp(x));
            cr_expect(mf_same(infer__log(x), log(x)), "log(%a) = %a", x, infer__log(x));
            continue;
        }
#if LDBL_MANT_DIG >= 64
        cr_expect(mf_ulpd(infer__exp(x), expl((long double)x)) < 1.0, "exp(%a) = %a", x, infer__exp(x));
        if (x > 0) cr_expect(mf_ulpd(infer__log(x), logl((long double)x)) < 0.52, "log(%a) = %a", x, infer__log(x));
#endif
        if (x < 0) cr_expect(isnan(infer__log(x)), "log(%a) = %a", x, infer__log(x));
    }
}

/* a value's bits for a hash, every nan as one (their payloads are the
   CPU's: an FMA instruction and mathfn.c's own fmaf keep different ones) */
static uint64_t mf_hash_f(uint64_t h, float f) {
    if (f != f) f = NAN;
    return infer__fnv(h, &f, sizeof f);
}

static uint64_t mf_hash_d(uint64_t h, double d) {
    if (d != d) d = NAN;
    return infer__fnv(h, &d, sizeof d);
}

/* Hashes of a fixed sweep of every function: whatever the platform, C
   library, compiler or instruction set, the same bits (the constants are
   Linux x86-64's; MinGW-w64 gave them under wine, and so did builds with
   -march=native in GCC's GNU mode and clang). A change to mathfn.c that
   moves a result changes these. */
Test(mathfn, same_bits_everywhere) {
    uint64_t h[9];
    uint32_t u;
    int i, k;
    static const uint64_t want[9] = {0x7e575f67810c93a9ull, 0x0aea90bccf7cd14eull, 0x5d5feb21d638f681ull,
                                     0x87a3327d8051c48dull, 0x30c70c78facca706ull, 0xfa8212d71d87331full,
                                     0x15f0804f6fab580cull, 0x88b57d42cfa4d518ull, 0xef7900ccc6b324deull};
    static const char *names[9] = {"expf", "logf", "powf", "sincosf", "tanhf", "fmaf", "exp", "log", "pow"};
    static const int slot[6] = {0, 1, 2, 3, 3, 4}; /* r[k]'s hash: sin and cos both in sincosf's */
    for (i = 0; i < 9; i++) h[i] = INFER__FNV_BASIS;
    for (u = 0; u < 0xff800000u; u += 997) {
        float x = mf_float(u), r[6];
        r[0] = infer__expf(x);
        r[1] = infer__logf(x);
        r[2] = infer__powf(x, -0.0625f);
        infer__sincosf(x, &r[3], &r[4]);
        r[5] = infer__tanhf(x);
        for (k = 0; k < 6; k++) h[slot[k]] = mf_hash_f(h[slot[k]], r[k]);
    }
    mf_rng = 12345;
    for (i = 0; i < 200000; i++) {
        uint64_t r = mf_next(), q = mf_next();
        float x = mf_float((uint32_t)r), y = mf_float((uint32_t)(r >> 32)), z = mf_float((uint32_t)q), f;
        double d, dx;
        memcpy(&dx, &q, sizeof dx);
        f = infer__fmaf(x, y, z);
        h[5] = mf_hash_f(h[5], f);
        d = infer__exp((double)(int64_t)r * 0x1p-53);
        h[6] = mf_hash_d(h[6], d);
        d = infer__log(dx);
        h[7] = mf_hash_d(h[7], d);
        d = infer__pow(fabs((double)x), (double)(int32_t)(q >> 32) * 0x1p-24);
        h[8] = mf_hash_d(h[8], d);
    }
    for (i = 0; i < 9; i++)
        cr_expect(h[i] == want[i], "%s: hash %016llx, want %016llx", names[i], (unsigned long long)h[i],
                  (unsigned long long)want[i]);
}

/* roundf: halves away from zero, the rest to nearest, against
   the C library's (glibc's is right; MinGW's rounded 0.49999997f up) over
   a sweep, and the cases that tell a plain x + 0.5 apart */
Test(mathfn, roundf_halves_away_from_zero) {
    static const float cases[] = {0.49999997f, -0.49999997f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 8388607.5f,
                                  8388608.0f, 16777217.0f, 0.0f, -0.0f, -0.3f, 1e-40f};
    uint32_t u;
    size_t i;
    int bad = 0;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert(mf_same(infer__roundf(cases[i]), roundf(cases[i])), "roundf(%.9g): %.9g, want %.9g", cases[i],
                  infer__roundf(cases[i]), roundf(cases[i]));
    }
    cr_assert(infer__roundf(INFINITY) == INFINITY && infer__roundf(NAN) != infer__roundf(NAN));
    for (u = 0; u < 0xff800000u; u += 1009) {
        float x = mf_float(u);
        bad += !mf_same(infer__roundf(x), roundf(x)) + !mf_same(infer__roundf(-x), roundf(-x));
    }
    cr_assert_eq(bad, 0, "%d floats round otherwise than glibc's roundf", bad);
}
