/* test_gemm.c - every GEMM kernel (a tile of weight rows x tokens) against
   the vec_dot loop of the same instruction set, on random data, with row
   and token counts that leave every kind of remainder tile and an odd
   number of blocks. Equal up to float summation order: the bound is
   (n/4 + 64) * 2^-23 * sum |w_i * x_i| over the dequantized values. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float g_normal(void) {
    double u, v;
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    u = (double)((g_rng >> 11) + 1) / 9007199254740994.0;
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    v = (double)(g_rng >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* exact: the kernel claims its vec_dot's results to the bit (where it is
   not marked gemm_unordered: NEON's smmla tiles scale otherwise) */
static int check_type(infer_type t, int exact, int *n_run) {
    static const int rows[] = {1, 2, 3, 4, 5, 7, 9, 13};
    static const int toks[] = {2, 3, 4, 5, 8, 11};
    const infer__type_traits *tt = infer__traits(t), *vt = infer__traits(tt->vec_dot_type);
    int lens_small[] = {32, 64, 96, 160, 576, 1536}, lens_k[] = {256, 512, 768, 1536};
    int lens_float[] = {1, 7, 8, 15, 16, 17, 33, 100, 576, 1537};
    int *lens = tt->block_size == 256 ? lens_k : tt->block_size == 1 ? lens_float : lens_small;
    int n_lens = tt->block_size == 256 ? 4 : tt->block_size == 1 ? 10 : 6, fails = 0, isa, li, ri, ti, r, j, i;
    for (isa = 1; isa < INFER__ISA_COUNT; isa++) {
        infer__kernels k;
        if (!infer__kernels_install(&k, (infer__isa)isa) || !k.gemm[t]) continue;
        for (li = 0; li < n_lens; li++) {
            int n = lens[li], max_r = 13, max_t = 11;
            size_t ws = infer__row_size(t, n), xs = infer__row_size(tt->vec_dot_type, n);
            uint8_t *w = (uint8_t *)malloc(ws * max_r), *x = (uint8_t *)malloc(xs * max_t);
            float *f = (float *)malloc(sizeof(float) * n * (max_r + max_t)), *wf = f, *xf = f + (size_t)n * max_r;
            size_t ldy = 17;
            float *y = (float *)malloc(sizeof(float) * ldy * max_t);
            for (r = 0; r < max_r; r++) {
                for (i = 0; i < n; i++) wf[(size_t)r * n + i] = g_normal() * (r % 3 == 2 ? 1e-3f : 1.0f);
                if (tt->quantize)
                    tt->quantize(wf + (size_t)r * n, w + r * ws, n);
                else
                    tt->from_float(wf + (size_t)r * n, w + r * ws, n);
                tt->to_float(w + r * ws, wf + (size_t)r * n, n);
            }
            for (j = 0; j < max_t; j++) {
                for (i = 0; i < n; i++) xf[(size_t)j * n + i] = g_normal() * (j % 4 == 3 ? 50.0f : 1.0f);
                k.from_float[tt->vec_dot_type](xf + (size_t)j * n, x + j * xs, n);
                vt->to_float(x + j * xs, xf + (size_t)j * n, n);
            }
            for (ri = 0; ri < 8; ri++)
                for (ti = 0; ti < 6; ti++) {
                    int nr = rows[ri], nt = toks[ti];
                    for (i = 0; i < (int)(ldy * max_t); i++) y[i] = 12345.0f;
                    k.gemm[t](n, w, ws, nr, x, xs, nt, y, ldy);
                    (*n_run)++;
                    for (j = 0; j < max_t; j++)
                        for (r = 0; r < (int)ldy; r++) {
                            float got = y[(size_t)j * ldy + r];
                            if (j >= nt || r >= nr) {
                                if (got != 12345.0f) {
                                    if (fails++ < 10)
                                        printf("%s %s n=%d %dx%d: wrote outside the tile at tok %d row %d\n",
                                               infer__isa_name((infer__isa)isa), tt->name, n, nr, nt, j, r);
                                }
                                continue;
                            }
                            {
                                float want = k.vec_dot[t](n, w + r * ws, x + j * xs);
                                double s = 0, bound;
                                for (i = 0; i < n; i++) s += fabs((double)wf[(size_t)r * n + i] * xf[(size_t)j * n + i]);
                                bound = (n / 4 + 64) * ldexp(1.0, -23) * s + 1e-30;
                                if (!(fabs((double)got - want) <= bound) ||
                                    (exact && !k.gemm_unordered[t] && memcmp(&got, &want, sizeof got))) {
                                    if (fails++ < 10)
                                        printf("%s %s n=%d %dx%d tok %d row %d: gemm %.9g, vec_dot %.9g (bound %.3g)\n",
                                               infer__isa_name((infer__isa)isa), tt->name, n, nr, nt, j, r, got, want,
                                               bound);
                                }
                            }
                        }
                }
            free(w);
            free(x);
            free(f);
            free(y);
        }
    }
    return fails;
}

static void check_exact(infer_type t, int exact) {
    int n_run = 0, fails = check_type(t, exact, &n_run);
    cr_assert_eq(fails, 0, "%s: %d mismatches (see stdout)", infer_type_name(t), fails);
    if (!n_run) cr_log_info("%s: no GEMM kernel on this CPU: nothing compared", infer_type_name(t));
}

static void check(infer_type t) { check_exact(t, 0); }

Test(gemm, f16) { check(INFER_TYPE_F16); }
Test(gemm, q8_0) { check(INFER_TYPE_Q8_0); }
Test(gemm, q4_0) { check(INFER_TYPE_Q4_0); }
Test(gemm, q5_0) { check(INFER_TYPE_Q5_0); }
Test(gemm, q4_k) { check(INFER_TYPE_Q4_K); }
Test(gemm, q6_k) { check(INFER_TYPE_Q6_K); }
/* MXFP4's tiles sum each (row, token) as its vec_dot does: bit-equal */
Test(gemm, mxfp4) { check_exact(INFER_TYPE_MXFP4, 1); }
