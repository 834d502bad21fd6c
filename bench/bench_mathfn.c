/* bench_mathfn - nanoseconds per call of mathfn.c's functions against the C
   library's, over 4096 arguments in the range the engine gives each (SiLU's
   and softmax's exp arguments, soft-capping's tanh, RoPE's angles, ...),
   the median of rounds that alternate the two. Not a test.

       bench_mathfn [rounds]   (default 15) */
#include "../tests/infer_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096
#define REPS 200

static float g_x[N], g_y[N], g_z[N];
static volatile float g_sink;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* one timing: ns per call of expr over the N arguments, REPS times; the
   results summed so that nothing is left out */
#define BENCH_ONE(out, expr)                                      \
    do {                                                          \
        double t0 = now_ns();                                     \
        float acc = 0;                                            \
        int r, i;                                                 \
        for (r = 0; r < REPS; r++)                                \
            for (i = 0; i < N; i++) {                             \
                float x = g_x[i], y = g_y[i], z = g_z[i];         \
                (void)y, (void)z;                                 \
                acc += (expr);                                    \
            }                                                     \
        g_sink = acc;                                             \
        (out) = (now_ns() - t0) / ((double)REPS * N);             \
    } while (0)

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void fill(float lo, float hi) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int i;
    for (i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        g_x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
        g_y[i] = (float)((s >> 20 & 0xfffff) * (1.0 / 1048576.0)) - 0.5f;
        g_z[i] = g_x[i] * g_y[i];
    }
}

#define ROW(name, lo, hi, libm_expr, own_expr)                                                           \
    do {                                                                                               \
        double a[64], b[64];                                                                           \
        int k;                                                                                         \
        fill(lo, hi);                                                                                  \
        for (k = 0; k < rounds; k++) {                                                                 \
            BENCH_ONE(a[k], libm_expr);                                                                \
            BENCH_ONE(b[k], own_expr);                                                                 \
        }                                                                                              \
        printf("%-8s [%8g, %8g]   %6.2f   %6.2f   %5.2fx\n", name, (double)(lo), (double)(hi), median(a, rounds), \
               median(b, rounds), median(b, rounds) / median(a, rounds));                              \
    } while (0)

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    if (rounds < 1) rounds = 1;
    if (rounds > 64) rounds = 64;
    printf("ns per call, median of %d rounds (C library, then infer__)\n", rounds);
    printf("function range                  libm     own    own/libm\n");
    ROW("expf", -30.0f, 0.0f, expf(x), infer__expf(x));
    ROW("expf", -20.0f, 20.0f, expf(x), infer__expf(x));
    ROW("silu", -20.0f, 20.0f, x / (1.0f + expf(-x)), x / (1.0f + infer__expf(-x)));
    ROW("tanhf", -3.0f, 3.0f, tanhf(x), infer__tanhf(x));
    ROW("sinf", 0.0f, 1e5f, sinf(x), infer__sinf(x));
    ROW("cosf", 0.0f, 1e5f, cosf(x), infer__cosf(x));
    ROW("logf", 1e-3f, 1e3f, logf(x), infer__logf(x));
    ROW("powf", 1e3f, 1e6f, powf(x, y), infer__powf(x, y));
    ROW("fmaf", -1e3f, 1e3f, fmaf(x, y, z), infer__fmaf(x, y, z));
    ROW("exp", -30.0f, 0.0f, (float)exp((double)x), (float)infer__exp((double)x));
    ROW("log", 1.0f, 1e5f, (float)log((double)x), (float)infer__log((double)x));
    ROW("pow", 1.0f, 4096.0f, (float)pow((double)x, (double)y), (float)infer__pow((double)x, (double)y));
    return 0;
}
