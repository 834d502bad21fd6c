/* test_vecmath.c - the elementwise kernels of every instruction set against
   the plain C ones: SiLU-gated product within a few ulp (exp is a
   polynomial there, not libm's), sums of squares to double rounding. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

static uint64_t g_rng = 0x0123456789abcdefull;
static float g_uniform(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

Test(vecmath, every_isa_matches_plain_c) {
    static const int lens[] = {1, 5, 15, 16, 17, 64, 100, 576, 1537};
    static const float spans[] = {1, 10, 100}; /* exp's arguments up to +-100: overflow and underflow too */
    int isa, li, si, i, n_run = 0;
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
        infer__kernels k;
        if (!infer__kernels_install(&k, (infer__isa)isa)) continue;
        for (li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++)
            for (si = 0; si < 3; si++) {
                int n = lens[li];
                float *g = (float *)malloc(sizeof(float) * (n + 1)), *u = (float *)malloc(sizeof(float) * n);
                float *x = (float *)malloc(sizeof(float) * n);
                double ss, want = 0;
                for (i = 0; i < n; i++) x[i] = g[i] = spans[si] * g_uniform(), u[i] = g_uniform();
                g[n] = 12345.0f; /* past the end: must stay */
                k.silu_mul(g, u, n);
                for (i = 0; i < n; i++) {
                    float ref = x[i] / (1.0f + expf(-x[i])) * u[i];
                    cr_expect(fabsf(g[i] - ref) <= 4e-7f * fabsf(ref) + 1e-30f, "%s n=%d: silu(%g)*%g = %g, want %g",
                              infer__isa_name((infer__isa)isa), n, x[i], u[i], g[i], ref);
                }
                cr_expect_eq(g[n], 12345.0f, "%s wrote past n=%d", infer__isa_name((infer__isa)isa), n);
                for (i = 0; i < n; i++) want += (double)(x[i] * x[i]);
                ss = k.sum_squares(x, n);
                cr_expect(fabs(ss - want) <= 1e-12 * want, "%s n=%d: sum of squares %.17g, want %.17g",
                          infer__isa_name((infer__isa)isa), n, ss, want);
                free(g), free(u), free(x);
                n_run++;
            }
    }
    cr_assert_gt(n_run, 0);
}
