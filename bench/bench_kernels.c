/* bench_kernels - speed of every vec_dot (and activation quantizer) per
   instruction set this CPU runs: nanoseconds per 4096-value row and values
   per nanosecond, mean +- stddev over runs. Not a test.

       bench_kernels [runs] [n]        (defaults: 10 runs, n = 4096)

   The rows (64 of them) stay in cache, so this measures the kernels'
   arithmetic, not memory bandwidth. Like the tests it compiles its own copy
   of the implementation and calls its static internals. */
#include "../tests/infer_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 64

static const infer_type weight_types[] = {INFER_TYPE_F32,  INFER_TYPE_F16,  INFER_TYPE_BF16,   INFER_TYPE_Q8_0,
                                          INFER_TYPE_Q4_0, INFER_TYPE_Q4_1, INFER_TYPE_Q5_0,   INFER_TYPE_Q5_1,
                                          INFER_TYPE_Q2_K, INFER_TYPE_Q3_K, INFER_TYPE_Q4_K,   INFER_TYPE_Q5_K,
                                          INFER_TYPE_Q6_K, INFER_TYPE_IQ4_NL, INFER_TYPE_IQ4_XS};
static const infer_type act_types[] = {INFER_TYPE_Q8_0, INFER_TYPE_Q8_1, INFER_TYPE_Q8_K, INFER_TYPE_F16, INFER_TYPE_BF16};

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static volatile float sink;

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    int i;
    for (i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* times fn over enough calls for ~20 ms, returns ns per call */
static double time_dot(infer__vec_dot_fn fn, int n, const uint8_t *w, size_t row, const void *x) {
    long iters = 0, target = 1;
    double t0, t1;
    float acc = 0;
    for (;;) {
        long i;
        t0 = infer__now_ms();
        for (i = 0; i < target; i++) acc += fn(n, w + (size_t)(i % ROWS) * row, x);
        t1 = infer__now_ms();
        iters = target;
        if (t1 - t0 > 20) break;
        target *= 2;
    }
    sink = acc;
    return (t1 - t0) * 1e6 / (double)iters;
}

static double time_quant(infer__from_float_fn fn, const float *x, void *out, int n) {
    long iters = 0, target = 1;
    double t0, t1;
    for (;;) {
        long i;
        t0 = infer__now_ms();
        for (i = 0; i < target; i++) fn(x, out, n);
        t1 = infer__now_ms();
        iters = target;
        if (t1 - t0 > 20) break;
        target *= 2;
    }
    return (t1 - t0) * 1e6 / (double)iters;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 10, n = argc > 2 ? atoi(argv[2]) : 4096;
    infer__kernels ks[INFER__ISA_COUNT];
    int have[INFER__ISA_COUNT], isa, ti, r;
    float *xf;
    double *v;
    if (runs < 1 || n < 256 || n % 256) {
        fprintf(stderr, "usage: bench_kernels [runs] [n, a multiple of 256]\n");
        return 2;
    }
    xf = (float *)malloc((size_t)n * ROWS * sizeof(float));
    v = (double *)malloc((size_t)runs * sizeof(double));
    for (r = 0; r < n * ROWS; r++) xf[r] = frand();
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) have[isa] = infer__kernels_install(&ks[isa], (infer__isa)isa);
    printf("vec_dot, one row of %d values (%d rows in cache), ns per row: mean +- stddev over %d runs\n", n, ROWS, runs);
    printf("%-8s", "format");
    for (isa = 0; isa < INFER__ISA_COUNT; isa++)
        if (have[isa]) printf(" %22s", infer__isa_name((infer__isa)isa));
    printf("   best speed-up\n");
    for (ti = 0; ti < (int)(sizeof weight_types / sizeof weight_types[0]); ti++) {
        infer_type t = weight_types[ti];
        const infer__type_traits *tt = infer__traits(t);
        infer_type vt = tt->vec_dot_type;
        size_t row = infer__row_size(t, n);
        uint8_t *w, *xq;
        double scalar_mean = 0, best = 0;
        if (!tt->vec_dot || !tt->quantize) continue;
        w = (uint8_t *)malloc(row * ROWS);
        xq = (uint8_t *)malloc((size_t)n * sizeof(float) + 64);
        for (r = 0; r < ROWS; r++) tt->quantize(xf + (size_t)r * n, w + (size_t)r * row, n);
        if (vt == INFER_TYPE_F32) memcpy(xq, xf, (size_t)n * sizeof(float));
        else ks[0].from_float[vt](xf, xq, n);
        printf("%-8s", tt->name);
        for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
            double mean, sd;
            if (!have[isa]) continue;
            for (r = 0; r < runs; r++) v[r] = time_dot(ks[isa].vec_dot[t], n, w, row, xq);
            stats(v, runs, &mean, &sd);
            if (isa == 0) scalar_mean = mean;
            else if (!best || mean < best) best = mean;
            printf(" %12.1f +- %7.1f", mean, sd);
        }
        printf("   %6.1fx\n", best ? scalar_mean / best : 1.0);
        fflush(stdout);
        free(w);
        free(xq);
    }
    printf("\nfrom_float (activation quantizer), %d values, ns per row\n", n);
    for (ti = 0; ti < (int)(sizeof act_types / sizeof act_types[0]); ti++) {
        infer_type t = act_types[ti];
        uint8_t *out = (uint8_t *)malloc((size_t)n * sizeof(float));
        double scalar_mean = 0, best = 0;
        printf("%-8s", infer_type_name(t));
        for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
            double mean, sd;
            if (!have[isa]) continue;
            for (r = 0; r < runs; r++) v[r] = time_quant(ks[isa].from_float[t], xf, out, n);
            stats(v, runs, &mean, &sd);
            if (isa == 0) scalar_mean = mean;
            else if (!best || mean < best) best = mean;
            printf(" %12.1f +- %7.1f", mean, sd);
        }
        printf("   %6.1fx\n", best ? scalar_mean / best : 1.0);
        free(out);
    }
    free(xf);
    free(v);
    return 0;
}
