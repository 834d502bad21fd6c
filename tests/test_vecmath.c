/* test_vecmath.c - the elementwise kernels of every instruction set against
   the plain C ones: SiLU-gated product within a few ulp (exp is a
   polynomial there, not libm's), sums of squares to double rounding; and
   attention's kernels: p.V from a quantized cache to the bit, q.K for a
   prompt within F32 rounding. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Attention's p.V from a quantized V (kernels.pv_quant): every ISA gives
   the plain C sums to the bit (each product fused the same way, key by
   key), zero probabilities included, and writes no row past nq. */
Test(vecmath, pv_quant_every_isa_to_the_bit) {
    static const infer_type types[] = {INFER_TYPE_Q8_0, INFER_TYPE_Q4_0};
    enum { HD = 96, KT = 37, NQ = 5, LDP = 40 };
    infer__kernels ref, k;
    float vf[HD], init[NQ * HD], *want = (float *)malloc(sizeof(float) * NQ * HD);
    float *got = (float *)malloc(sizeof(float) * (NQ + 1) * HD);
    uint16_t p[NQ * LDP];
    int isa, ti, i, j, n_run = 0;
    cr_assert(infer__kernels_install(&ref, INFER__ISA_SCALAR));
    for (i = 0; i < NQ * LDP; i++) p[i] = infer__fp32_to_fp16(i % 7 == 3 ? 0.0f : 0.5f * (g_uniform() + 1.0f));
    for (ti = 0; ti < 2; ti++) {
        size_t row = infer__row_size(types[ti], HD);
        uint8_t *v = (uint8_t *)malloc(row * KT);
        for (j = 0; j < KT; j++) {
            for (i = 0; i < HD; i++) vf[i] = 3.0f * g_uniform();
            ref.from_float[types[ti]](vf, v + (size_t)j * row, HD);
        }
        for (i = 0; i < NQ * HD; i++) init[i] = g_uniform();
        for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
            if (!infer__kernels_install(&k, (infer__isa)isa)) continue;
            memcpy(got, init, sizeof(float) * NQ * HD); /* the accumulators start where a tile left them */
            got[NQ * HD] = 12345.0f;
            k.pv_quant[types[ti]](HD, v, row, KT, p, LDP, NQ, got);
            if (isa == INFER__ISA_SCALAR) {
                memcpy(want, got, sizeof(float) * NQ * HD);
                continue;
            }
            cr_expect_eq(memcmp(got, want, sizeof(float) * NQ * HD), 0, "%s, %s: p.V differs from plain C",
                         infer__isa_name((infer__isa)isa), infer__traits(types[ti])->name);
            cr_expect_eq(got[NQ * HD], 12345.0f, "%s wrote past its rows", infer__isa_name((infer__isa)isa));
            n_run++;
        }
        free(v);
    }
    free(want), free(got);
    cr_assert_gt(n_run, 0, "this CPU has no vector ISA to hold against plain C");
}

/* Attention's q.K for a prompt (kernels.qk_f16) against F16 dots in
   double, over odd tile widths, row counts and head sizes: within F32
   rounding of the sum, nothing written past a row's kt scores, and every
   ISA's scores the plain C kernel's bit for bit (so the browser's greedy
   tokens are native's). */
Test(vecmath, qk_f16_matches_the_dot) {
    enum { TILE = 256, LDS = TILE + 8, MAXHD = 128, MAXQ = 64 };
    static const int hds[] = {64, 80, 128}, kts[] = {1, 7, 16, 33, 200, 256}, nqs[] = {1, 3, 8, 10, 13, 64};
    uint16_t *kh = (uint16_t *)malloc(sizeof(uint16_t) * TILE * 3 * MAXHD), *qh = (uint16_t *)malloc(sizeof(uint16_t) * MAXQ * MAXHD);
    float *s = (float *)malloc(sizeof(float) * MAXQ * LDS), *s0 = (float *)malloc(sizeof(float) * MAXQ * LDS), *work = (float *)malloc(sizeof(float) * (MAXHD * TILE + (MAXQ + 8) * MAXHD));
    infer__kernels k, plain;
    int isa, a, b, c, i, j, d, n_run = 0;
    cr_assert(infer__kernels_install(&plain, INFER__ISA_SCALAR) && plain.qk_f16, "plain C has no qk_f16");
    for (i = 0; i < TILE * 3 * MAXHD; i++) kh[i] = infer__fp32_to_fp16(2.0f * g_uniform());
    for (i = 0; i < MAXQ * MAXHD; i++) qh[i] = infer__fp32_to_fp16(2.0f * g_uniform());
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
        if (!infer__kernels_install(&k, (infer__isa)isa) || !k.qk_f16) continue;
        for (a = 0; a < 3; a++)
            for (b = 0; b < 6; b++)
                for (c = 0; c < 6; c++) {
                    int hd = hds[a], kt = kts[b], nq = nqs[c];
                    size_t k_stride = (size_t)3 * hd * 2; /* a head's keys inside rows of three heads */
                    for (i = 0; i < nq * LDS; i++) s[i] = -7.0f;
                    k.qk_f16(hd, (const uint8_t *)(kh + hd), k_stride, kt, qh, (size_t)MAXHD * 2, nq, s, LDS, work);
                    plain.qk_f16(hd, (const uint8_t *)(kh + hd), k_stride, kt, qh, (size_t)MAXHD * 2, nq, s0, LDS, work);
                    for (i = 0; i < nq; i++)
                        for (j = 0; j < LDS; j++) {
                            double want = 0, mag = 0;
                            if (j >= kt) {
                                cr_assert_eq(s[i * LDS + j], -7.0f, "%s hd %d kt %d nq %d: wrote row %d's score %d",
                                             infer__isa_name((infer__isa)isa), hd, kt, nq, i, j);
                                continue;
                            }
                            for (d = 0; d < hd; d++) {
                                double x = (double)infer__fp16_to_fp32(qh[i * MAXHD + d]) *
                                           infer__fp16_to_fp32(kh[hd + j * 3 * hd + d]);
                                want += x, mag += fabs(x);
                            }
                            cr_assert(fabs(s[i * LDS + j] - want) <= hd * 6e-8 * mag + 1e-30, /* n ulp of the sum: F32 rounding */
                                      "%s hd %d kt %d nq %d: q%d.k%d = %.9g, want %.9g", infer__isa_name((infer__isa)isa), hd,
                                      kt, nq, i, j, s[i * LDS + j], want);
                            cr_assert(!memcmp(&s[i * LDS + j], &s0[i * LDS + j], sizeof(float)),
                                      "%s hd %d kt %d nq %d: q%d.k%d = %.9g, plain C's %.9g", infer__isa_name((infer__isa)isa),
                                      hd, kt, nq, i, j, s[i * LDS + j], s0[i * LDS + j]);
                        }
                    n_run++;
                }
    }
    free(kh), free(qh), free(s), free(s0), free(work);
    if (!n_run) cr_skip_test("no instruction set of this CPU has kernels.qk_f16");
}

/* Attention's p.V for a prompt's rows (kernels.pv_f16, where an ISA has
   it) against the plain sum it promises: acc[i hd + d] plus p_i[j] v_j[d]
   for j in order, one F32 add a key (F16 x F16 products are exact, so fused
   or not alike), to the bit; rows past nq untouched. The tile ends at its
   buffer's end, so a read past kt is one past the allocation (ASan). */
Test(vecmath, pv_f16_sums_keys_in_order) {
    enum { STRIDE = 300, MAXHD = 128, MAXQ = 64, LDP = 264 };
    static const int hds[] = {64, 80, 128}, kts[] = {1, 7, 8, 9, 16, 33, 200, 256}, nqs[] = {1, 3, 6, 7, 13, 64};
    uint16_t *vt = (uint16_t *)malloc(sizeof(uint16_t) * MAXHD * STRIDE), *p = (uint16_t *)malloc(sizeof(uint16_t) * MAXQ * LDP);
    float *acc = (float *)malloc(sizeof(float) * (MAXQ + 1) * MAXHD), *want = (float *)malloc(sizeof(float) * (MAXQ + 1) * MAXHD);
    float *work = (float *)malloc(sizeof(float) * (MAXHD * 256 + MAXQ * 256));
    infer__kernels k;
    int isa, a, b, c, i, j, d, n_run = 0;
    for (i = 0; i < MAXHD * STRIDE; i++) vt[i] = infer__fp32_to_fp16(2.0f * g_uniform());
    for (i = 0; i < MAXQ * LDP; i++) p[i] = infer__fp32_to_fp16(0.5f + 0.5f * g_uniform());
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
        if (!infer__kernels_install(&k, (infer__isa)isa) || !k.pv_f16) continue;
        for (a = 0; a < 3; a++)
            for (b = 0; b < 8; b++)
                for (c = 0; c < 6; c++) {
                    int hd = hds[a], kt = kts[b], nq = nqs[c];
                    /* hd rows of STRIDE positions, the tile the last kt of each */
                    const uint16_t *tile = vt + (MAXHD - hd) * STRIDE + (STRIDE - kt);
                    for (i = 0; i < (nq + 1) * hd; i++) acc[i] = want[i] = 3.0f * g_uniform();
                    for (i = 0; i < nq; i++)
                        for (d = 0; d < hd; d++) {
                            float s = want[i * hd + d];
                            for (j = 0; j < kt; j++) {
                                float pv = infer__fp16_to_fp32(p[i * LDP + j]) * infer__fp16_to_fp32(tile[(size_t)d * STRIDE + j]);
                                s = s + pv;
                            }
                            want[i * hd + d] = s;
                        }
                    k.pv_f16(hd, tile, STRIDE, kt, p, LDP, nq, acc, work);
                    for (i = 0; i <= nq; i++)
                        for (d = 0; d < hd; d++)
                            cr_assert(!memcmp(&acc[i * hd + d], &want[i * hd + d], sizeof(float)),
                                      "%s hd %d kt %d nq %d: row %d value %d = %.9g, want %.9g%s", infer__isa_name((infer__isa)isa),
                                      hd, kt, nq, i, d, acc[i * hd + d], want[i * hd + d], i == nq ? " (a row past nq)" : "");
                    n_run++;
                }
    }
    free(vt), free(p), free(acc), free(want), free(work);
    if (!n_run) cr_skip_test("no instruction set of this CPU has kernels.pv_f16");
}

/* Attention's softmax of a row kept whole (kernels.scaled_max,
   softmax_exp, probs_f16) on every ISA against plain C: the max exact;
   e^(x - max) within a few ulp, 0 outside [lo, hi); the sum to double
   rounding of those; probabilities within one F16 step; nothing written
   past n. Windows that start mid-vector and rows that see nothing too. */
Test(vecmath, softmax_kept_rows_every_isa) {
    static const int lens[] = {1, 7, 16, 17, 40, 256, 301};
    infer__kernels k;
    int isa, li, wi, i, n_run = 0;
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
        if (!infer__kernels_install(&k, (infer__isa)isa)) continue;
        for (li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++)
            for (wi = 0; wi < 4; wi++) {
                const char *name = infer__isa_name((infer__isa)isa);
                int n = lens[li], lo = wi == 1 ? n / 3 : wi == 3 ? n : 0, hi = wi == 2 ? n - n / 4 : n;
                float *s = (float *)malloc(sizeof(float) * (n + 1)), *x = (float *)malloc(sizeof(float) * n);
                uint16_t *p = (uint16_t *)malloc(sizeof(uint16_t) * (n + 1));
                float scale = 0.125f, m = -INFINITY, want_m = -INFINITY, inv;
                double sum, want_sum = 0;
                for (i = 0; i < n; i++) x[i] = s[i] = 40.0f * g_uniform();
                s[n] = 12345.0f, p[n] = 0x1234;
                for (i = lo; i < hi; i++) want_m = fmaxf(want_m, x[i] * scale);
                m = k.scaled_max(s, lo, hi, scale, m);
                cr_expect_eq(m, want_m, "%s n=%d [%d,%d): max %g, want %g", name, n, lo, hi, m, want_m);
                cr_expect_eq(k.scaled_max(s, lo, hi, scale, 1e30f), 1e30f, "%s: the running max is kept", name);
                sum = k.softmax_exp(s, n, lo, hi, scale, m);
                for (i = 0; i < n; i++) {
                    float want = i >= lo && i < hi ? expf(x[i] * scale - m) : 0.0f;
                    want_sum += want;
                    cr_expect(fabsf(s[i] - want) <= 4e-7f * want, "%s n=%d [%d,%d): e[%d] = %g, want %g", name, n, lo, hi,
                              i, s[i], want);
                }
                cr_expect(fabs(sum - want_sum) <= 1e-6 * want_sum, "%s n=%d: sum %.17g, want %.17g", name, n, sum,
                          want_sum);
                cr_expect_eq(s[n], 12345.0f, "%s wrote past n=%d", name, n);
                inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
                k.probs_f16(s, n, inv, p);
                for (i = 0; i < n; i++) {
                    float want = s[i] * inv, got = infer__fp16_to_fp32(p[i]);
                    cr_expect(fabsf(got - want) <= fmaxf(want / 1024.0f, 6e-8f), "%s n=%d: p[%d] = %g, want %g", name, n,
                              i, got, want);
                }
                cr_expect_eq(p[n], 0x1234, "%s wrote a probability past n=%d", name, n);
                free(s), free(x), free(p);
                n_run++;
            }
    }
    cr_assert_gt(n_run, 0);
}
