/* test_pack.c - packed weights (pack.c): every gemm_packed kernel against
   the vec_dot loop of the same instruction set, on random weights made
   with the reference quantizers, for row counts that leave partial groups
   and token counts that leave every remainder tile (and n = 576/1536,
   SmolLM's widths, for the 32-value formats). Each matrix is packed
   into a buffer of exactly pack_size bytes, so a read past the last group
   shows under ASan; outputs past n_rows must stay untouched. Equal up to
   float summation order (the bound of test_gemm.c); the scalar references
   on the packed layouts must equal the scalar vec_dot exactly. */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define MAX_R 100
#define MAX_T 140
#define SENTINEL 12345.0f

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float g_normal(void) {
    double u, v;
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    u = (double)((g_rng >> 11) + 1) / 9007199254740994.0;
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    v = (double)(g_rng >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* the scalar kernel table plus pack.c's packer and scalar reference kernel
   for type t, where it has them: the layouts are checked on any CPU */
static int scalar_table(infer_type t, infer__kernels *k) {
    infer__kernels_install(k, INFER__ISA_SCALAR);
    switch (t) {
    case INFER_TYPE_Q4_0:
        k->pack_size[t] = infer__pack_q4_0_size, k->pack[t] = infer__pack_q4_0, k->gemm_packed[t] = infer__pack_ref_q4_0;
        return 1;
    case INFER_TYPE_Q8_0:
        k->pack_size[t] = infer__pack_q8_0_size, k->pack[t] = infer__pack_q8_0, k->gemm_packed[t] = infer__pack_ref_q8_0;
        return 1;
    case INFER_TYPE_Q4_1:
        k->pack_size[t] = infer__pack_q4_1_size, k->pack[t] = infer__pack_q4_1, k->gemm_packed[t] = infer__pack_ref_q4_1;
        return 1;
    case INFER_TYPE_Q5_1:
        k->pack_size[t] = infer__pack_q5_1_size, k->pack[t] = infer__pack_q5_1, k->gemm_packed[t] = infer__pack_ref_q5_1;
        return 1;
    case INFER_TYPE_Q5_0:
        k->pack_size[t] = infer__pack_q5_0_size, k->pack[t] = infer__pack_q5_0, k->gemm_packed[t] = infer__pack_ref_q5_0;
        return 1;
    case INFER_TYPE_Q4_K:
        k->pack_size[t] = infer__pack_q4_K_size, k->pack[t] = infer__pack_q4_K, k->gemm_packed[t] = infer__pack_ref_q4_K;
        return 1;
    case INFER_TYPE_Q6_K:
        k->pack_size[t] = infer__pack_q6_K_size, k->pack[t] = infer__pack_q6_K, k->gemm_packed[t] = infer__pack_ref_q6_K;
        return 1;
    case INFER_TYPE_F16:
        k->pack_size[t] = infer__pack_f16_size, k->pack[t] = infer__pack_f16, k->gemm_packed[t] = infer__pack_ref_f16;
        return 1;
    default: return 0;
    }
}

typedef struct {
    infer_type t;
    int n;
    size_t ws, xs;
    uint8_t *w, *x;
    float *want, *bound; /* [tok][row] of the same ISA's vec_dot, and the error allowed */
    float *want_ref;     /* the scalar vec_dot */
} problem;

static void make_problem(problem *p, infer_type t, int n, const infer__kernels *k) {
    const infer__type_traits *tt = infer__traits(t), *vt = infer__traits(tt->vec_dot_type);
    float *wf = (float *)malloc(sizeof(float) * (size_t)n * MAX_R), *xf = (float *)malloc(sizeof(float) * (size_t)n * MAX_T);
    int r, j, i;
    p->t = t, p->n = n;
    p->ws = infer__row_size(t, n), p->xs = infer__row_size(tt->vec_dot_type, n);
    p->w = (uint8_t *)malloc(p->ws * MAX_R), p->x = (uint8_t *)malloc(p->xs * MAX_T);
    p->want = (float *)malloc(sizeof(float) * MAX_R * MAX_T);
    p->bound = (float *)malloc(sizeof(float) * MAX_R * MAX_T);
    p->want_ref = (float *)malloc(sizeof(float) * MAX_R * MAX_T);
    for (r = 0; r < MAX_R; r++) {
        for (i = 0; i < n; i++) wf[(size_t)r * n + i] = g_normal() * (r % 3 == 2 ? 1e-3f : 1.0f);
        if (tt->quantize)
            tt->quantize(wf + (size_t)r * n, p->w + r * p->ws, n);
        else
            tt->from_float(wf + (size_t)r * n, p->w + r * p->ws, n);
        tt->to_float(p->w + r * p->ws, wf + (size_t)r * n, n);
    }
    for (j = 0; j < MAX_T; j++) {
        for (i = 0; i < n; i++) xf[(size_t)j * n + i] = g_normal() * (j % 4 == 3 ? 50.0f : 1.0f);
        k->from_float[tt->vec_dot_type](xf + (size_t)j * n, p->x + j * p->xs, n);
        vt->to_float(p->x + j * p->xs, xf + (size_t)j * n, n);
    }
    for (j = 0; j < MAX_T; j++)
        for (r = 0; r < MAX_R; r++) {
            double s = 0;
            for (i = 0; i < n; i++) s += fabs((double)wf[(size_t)r * n + i] * xf[(size_t)j * n + i]);
            p->want[j * MAX_R + r] = k->vec_dot[t](n, p->w + r * p->ws, p->x + j * p->xs);
            p->want_ref[j * MAX_R + r] = tt->vec_dot(n, p->w + r * p->ws, p->x + j * p->xs);
            p->bound[j * MAX_R + r] = (float)((n / 4 + 64) * ldexp(1.0, -23) * s + 1e-30);
        }
    free(wf);
    free(xf);
}

static void free_problem(problem *p) {
    free(p->w), free(p->x), free(p->want), free(p->bound), free(p->want_ref);
}

/* whether k's F16 kernel takes nt tokens on the integer unit (see
   INFER__F16I_MIN_TOK), which rounds to 13 bits and so is checked apart */
static int is_f16_integer(const infer__kernels *k, infer_type t, int nt) {
#ifdef INFER__HAVE_X86
    return t == INFER_TYPE_F16 && nt >= INFER__F16I_MIN_TOK && k->gemm_packed[t] == infer__vnni_f16_gemm_packed;
#else
    (void)k, (void)t, (void)nt;
    return 0;
#endif
}

/* rows [r0, r0 + nr) of the problem through fn on a packing of rows
   [0, r0 + nr) (r0 a multiple of the group size), nt tokens; exact: compare
   with want_ref bit for bit */
static int run_one(const problem *p, const infer__kernels *k, infer__gemm_packed_fn fn, const char *what, int r0, int nr,
                   int nt, int exact) {
    size_t size = k->pack_size[p->t](p->n, r0 + nr), ldy = (size_t)nr + 3, off = infer__pack_offset(k, p->t, p->n, r0);
    uint8_t *packed = (uint8_t *)malloc(size);
    float *y = (float *)malloc(sizeof(float) * ldy * (MAX_T + 1));
    int fails = 0, j, r;
    size_t i;
    k->pack[p->t](p->w, p->ws, p->n, r0 + nr, packed);
    for (i = 0; i < ldy * (MAX_T + 1); i++) y[i] = SENTINEL;
    fn(p->n, packed + off, nr, p->x, p->xs, nt, y, ldy);
    for (j = 0; j <= MAX_T; j++)
        for (r = 0; r < (int)ldy; r++) {
            float got = y[(size_t)j * ldy + r];
            if (j >= nt || r >= nr) {
                if (got != SENTINEL && fails++ < 10)
                    printf("%s %s n=%d rows %d+%d x %d: wrote outside at tok %d row %d\n", what, infer_type_name(p->t),
                           p->n, r0, nr, nt, j, r);
                continue;
            }
            {
                int e = j * MAX_R + r0 + r;
                float want = exact ? p->want_ref[e] : p->want[e];
                int ok = exact ? got == want : fabsf(got - want) <= p->bound[e];
                if (!ok && fails++ < 10)
                    printf("%s %s n=%d rows %d+%d x %d: tok %d row %d: packed %.9g, vec_dot %.9g (bound %.3g)\n", what,
                           infer_type_name(p->t), p->n, r0, nr, nt, j, r0 + r, got, want, p->bound[e]);
            }
        }
    free(packed);
    free(y);
    return fails;
}

/* The default kernel gives a token the same bits alone as in a batch of
   nt (attention's verification of a draft in one pass relies on it: see
   test_depth). F16 and BF16 slice k by the batch's size, so they are not
   held to it. */
static int batch_invariant(const problem *p, const infer__kernels *k, const char *what, int nr, int nt) {
    size_t size = k->pack_size[p->t](p->n, nr);
    uint8_t *packed = (uint8_t *)malloc(size);
    float *all = (float *)malloc(sizeof(float) * (size_t)nr * nt), *one = (float *)malloc(sizeof(float) * (size_t)nr);
    int fails = 0, j, r;
    k->pack[p->t](p->w, p->ws, p->n, nr, packed);
    k->gemm_packed[p->t](p->n, packed, nr, p->x, p->xs, nt, all, (size_t)nr);
    for (j = 0; j < nt; j++) {
        k->gemm_packed[p->t](p->n, packed, nr, p->x + (size_t)j * p->xs, p->xs, 1, one, (size_t)nr);
        for (r = 0; r < nr; r++)
            if (memcmp(&one[r], &all[(size_t)j * nr + r], sizeof(float)) && fails++ < 10)
                printf("%s %s n=%d: token %d row %d alone %.9g, in a batch of %d %.9g\n", what, infer_type_name(p->t),
                       p->n, j, r, one[r], nt, all[(size_t)j * nr + r]);
    }
    free(packed), free(all), free(one);
    return fails;
}

static void check(infer_type t, const int *lens, int n_lens) {
    static const int rows[] = {1, 15, 16, 17, 33, 100};
    static const int toks[] = {1, 2, 5, 8, 13, 64};
    int fails = 0, n_run = 0, n_ordered = 0, n_invariant = 0, isa, li, ri, ti;
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
        infer__kernels k;
        /* isa 0: pack.c's scalar reference, equal to the scalar vec_dot bit for bit */
        int exact = isa == 0;
        if (exact ? !scalar_table(t, &k) : !infer__kernels_install(&k, (infer__isa)isa) || !k.gemm_packed[t]) continue;
        cr_assert(k.pack[t] && k.pack_size[t], "%s: gemm_packed without a packer", infer_type_name(t));
        for (li = 0; li < n_lens; li++) {
            problem p;
            const char *name = exact ? "scalar reference" : infer__isa_name((infer__isa)isa);
            make_problem(&p, t, lens[li], &k);
            for (ri = 0; ri < 6; ri++)
                for (ti = 0; ti < 6; ti++) {
                    if (is_f16_integer(&k, t, toks[ti])) continue; /* Test(pack, f16_integer) */
                    fails += run_one(&p, &k, k.gemm_packed[t], name, 0, rows[ri], toks[ti], exact);
                    n_run += !exact;
                }
            /* a later group's rows, as a thread's share of a matrix */
            fails += run_one(&p, &k, k.gemm_packed[t], name, 32, 68, 13, exact);
            fails += run_one(&p, &k, k.gemm_packed[t], name, 48, 3, 1, exact);
            if (!exact && t != INFER_TYPE_F16 && t != INFER_TYPE_BF16) {
                fails += batch_invariant(&p, &k, name, 33, 13);
                n_invariant++;
            }
            /* llama.cpp's order (match_llama): Q8_0, Q5_0 and Q4_K sum as
               the scalar kernels do, bit for bit; F16 exactly */
            if (!exact && k.gemm_packed_ordered[t]) {
                int bitwise = t == INFER_TYPE_Q8_0 || t == INFER_TYPE_Q5_0 || t == INFER_TYPE_Q4_K;
                for (ri = 0; ri < 6; ri++)
                    for (ti = 0; ti < 6; ti++)
                        fails += run_one(&p, &k, k.gemm_packed_ordered[t], "ordered", 0, rows[ri], toks[ti], bitwise);
                fails += run_one(&p, &k, k.gemm_packed_ordered[t], "ordered", 32, 68, 13, bitwise);
                n_ordered++;
            }
            free_problem(&p);
        }
    }
    cr_assert_eq(fails, 0, "%s: %d mismatches (see stdout)", infer_type_name(t), fails);
    if (n_invariant) cr_log_info("%s: a token alone and in a batch of 13 agree to the bit", infer_type_name(t));
    if (n_ordered) cr_log_info("%s: llama.cpp-ordered prompt kernel checked too", infer_type_name(t));
    if (!n_run) cr_log_info("%s: no packed kernel on this CPU: nothing compared", infer_type_name(t));
}

static const int lens_32[] = {256, 512, 2048, 576, 1536, 32, 160}; /* and odd block counts */
static const int lens_k[] = {256, 512, 2048};
static const int lens_f16[] = {256, 512, 2048, 576, 1, 17, 300}; /* any n: the slices' tails */

Test(pack, q4_0) { check(INFER_TYPE_Q4_0, lens_32, 7); }
Test(pack, q8_0) { check(INFER_TYPE_Q8_0, lens_32, 7); }
Test(pack, q5_0) { check(INFER_TYPE_Q5_0, lens_32, 7); }
Test(pack, q4_1) { check(INFER_TYPE_Q4_1, lens_32, 7); }
Test(pack, q5_1) { check(INFER_TYPE_Q5_1, lens_32, 7); }
Test(pack, q4_k) { check(INFER_TYPE_Q4_K, lens_k, 3); }
Test(pack, q6_k) { check(INFER_TYPE_Q6_K, lens_k, 3); }
Test(pack, f16) { check(INFER_TYPE_F16, lens_f16, 7); }
Test(pack, bf16) { check(INFER_TYPE_BF16, lens_f16, 7); }

/* the block rounding itself: the weights' 12-bit integers (shift 11) and
   the activations' 13-bit ones (shift 12), the largest in [2^shift,
   2047 * 2^(shift - 10)] (so 64 products sum in int32), each within half a
   step of its value */
Test(pack, f16_integer_block) {
    int fails = 0, b, i, shift;
    for (shift = 11; shift <= 12; shift++)
        for (b = 0; b < 2000; b++) {
            float v[64], s;
            int32_t q[64], top = 0, nv = 1 + b % 64;
            for (i = 0; i < nv; i++)
                v[i] = infer__fp16_to_fp32(infer__fp32_to_fp16(g_normal() * ldexpf(1.0f, b % 30 - 22) * (i % 5 ? 1.0f : 1e-3f)));
            s = infer__f16i_block(v, nv, shift, q);
            for (i = 0; i < nv; i++) {
                top = q[i] > top ? q[i] : -q[i] > top ? -q[i] : top;
                if (fabsf(v[i] - (float)q[i] * s) > s / 2 && fails++ < 10)
                    printf("shift %d block %d value %d: %.9g as %d x %.9g\n", shift, b, i, v[i], q[i], s);
            }
            /* below F16's normal range the binade stays -14, with fewer bits */
            if ((top < (1 << shift) || top > (2047 << (shift - 10))) && (top >= (1 << shift) || s != ldexpf(1.0f, -14 - shift)) &&
                fails++ < 10)
                printf("shift %d block %d: largest integer %d\n", shift, b, top);
        }
    cr_assert_eq(fails, 0, "%d blocks rounded wrong (see stdout)", fails);
}

/* The F16 prompt path on the integer unit. pack.c's reference is checked
   against the exact products: each value rounds by at most half its
   block's step: 2^-12 of the block's largest |weight|, 2^-13 of its
   largest |activation| (and a step of the fp32 sums besides). The AVX-512 kernel must then equal the reference
   bit for bit, for tails of k, partial groups, remainder tiles and a
   second chunk of tokens (past 128). */
Test(pack, f16_integer) {
    static const int lens[] = {256, 2048, 576, 1, 17, 300, 130};
    static const int rows[] = {1, 17, 100};
    static const int toks[] = {16, 17, 64, 140};
    infer__kernels k;
    int fails = 0, n_kernel = 0, li, ri, ti;
    int have = 0;
#ifdef INFER__HAVE_X86
    have = infer__kernels_install(&k, INFER__ISA_AVX512) && k.gemm_packed[INFER_TYPE_F16] == infer__vnni_f16_gemm_packed;
#endif
    if (!have) infer__kernels_install(&k, INFER__ISA_SCALAR);
    for (li = 0; li < 7; li++) {
        problem p;
        int n = lens[li], j, r, i;
        size_t size = infer__pack_f16_size(n, MAX_R), ldy = MAX_R + 3;
        uint8_t *packed = (uint8_t *)malloc(size);
        float *ref = (float *)malloc(sizeof(float) * ldy * MAX_T), *y = (float *)malloc(sizeof(float) * ldy * MAX_T);
        make_problem(&p, INFER_TYPE_F16, n, &k);
        infer__pack_f16(p.w, p.ws, n, MAX_R, packed);
        infer__pack_ref_f16_i16(n, packed, MAX_R, p.x, p.xs, MAX_T, ref, ldy);
        for (j = 0; j < MAX_T; j++)
            for (r = 0; r < MAX_R; r++) {
                const uint16_t *w = (const uint16_t *)(p.w + r * p.ws), *x = (const uint16_t *)(p.x + j * p.xs);
                double exact = 0, bound = 0;
                int b;
                for (b = 0; b < n; b += 64) {
                    double wm = 0, xm = 0, ws = 0, xs = 0;
                    for (i = b; i < n && i < b + 64; i++) {
                        double wv = infer__fp16_to_fp32(w[i]), xv = infer__fp16_to_fp32(x[i]);
                        exact += wv * xv;
                        wm = fmax(wm, fabs(wv)), xm = fmax(xm, fabs(xv));
                        ws += fabs(wv), xs += fabs(xv);
                        bound += fabs(wv * xv) * ldexp(1.0, -20); /* the float sums */
                    }
                    bound += ldexp(1.0, -12) * wm * xs + ldexp(1.0, -13) * xm * ws + 64 * ldexp(1.0, -25) * wm * xm;
                }
                if (!(fabs(ref[(size_t)j * ldy + r] - exact) <= bound) && fails++ < 10)
                    printf("f16 integer reference n=%d: tok %d row %d: %.9g, exact %.9g (bound %.3g)\n", n, j, r,
                           ref[(size_t)j * ldy + r], exact, bound);
            }
        for (ri = 0; have && ri < 3; ri++)
            for (ti = 0; ti < 4; ti++) {
                int nr = rows[ri], nt = toks[ti];
                for (i = 0; i < (int)(ldy * MAX_T); i++) y[i] = SENTINEL;
                k.gemm_packed[INFER_TYPE_F16](n, packed, nr, p.x, p.xs, nt, y, ldy);
                n_kernel++;
                for (j = 0; j < MAX_T; j++)
                    for (r = 0; r < (int)ldy; r++) {
                        float got = y[(size_t)j * ldy + r], want = j < nt && r < nr ? ref[(size_t)j * ldy + r] : SENTINEL;
                        if (got != want && fails++ < 10)
                            printf("f16 integer avx512 n=%d rows %d x %d: tok %d row %d: %.9g, reference %.9g\n", n, nr, nt,
                                   j, r, got, want);
                    }
            }
        free_problem(&p);
        free(packed), free(ref), free(y);
    }
    cr_assert_eq(fails, 0, "f16 integer path: %d mismatches (see stdout)", fails);
    if (!n_kernel) cr_log_info("f16 integer path: no AVX512-VNNI here: only the reference was checked");
}

/* The F16 kernels in llama.cpp's order (match_llama), bit for bit: a batch
   as tinyBLAS sums it (infer__f16_dot_llama), one token as
   ggml_vec_dot_f16 does (infer__f16_dot_llama_vec), packed and not. */
Test(pack, f16_llama_order_bitwise) {
    static const int lens[] = {64, 256, 576, 80, 200};
    int isa, li, fails = 0, n_run = 0;
    uint32_t seed = 12345;
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
        infer__kernels k;
        if (!infer__kernels_install(&k, (infer__isa)isa)) continue;
        for (li = 0; li < 5; li++) {
            int n = lens[li], rows = 37, nt, r, t, i;
            uint16_t *w = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)n * rows), *x = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)n * 3);
            float y[3 * 40];
            for (i = 0; i < n * rows; i++) seed = seed * 1664525u + 1013904223u, w[i] = infer__fp32_to_fp16(((int)(seed >> 9) % 2001 - 1000) / 700.0f);
            for (i = 0; i < n * 3; i++) seed = seed * 1664525u + 1013904223u, x[i] = infer__fp32_to_fp16(((int)(seed >> 9) % 2001 - 1000) / 300.0f);
            for (r = 0; r < rows; r++) {
                const uint16_t *wr = w + (size_t)r * n;
                fails += k.f16_dot_ordered(n, wr, x) != infer__f16_dot_llama(wr, 1, x, n);
                fails += k.f16_dot_ordered1(n, wr, x) != infer__f16_dot_llama_vec(wr, 1, x, n);
            }
            if (k.gemm_packed_ordered[INFER_TYPE_F16]) {
                uint8_t *packed = (uint8_t *)malloc(k.pack_size[INFER_TYPE_F16](n, rows));
                k.pack[INFER_TYPE_F16](w, (size_t)n * 2, n, rows, packed);
                for (nt = 1; nt <= 3; nt += 2) {
                    k.gemm_packed_ordered[INFER_TYPE_F16](n, packed, rows, x, (size_t)n * 2, nt, y, 40);
                    for (t = 0; t < nt; t++)
                        for (r = 0; r < rows; r++) {
                            float want = nt == 1 ? infer__f16_dot_llama_vec(w + (size_t)r * n, 1, x, n)
                                                 : infer__f16_dot_llama(w + (size_t)r * n, 1, x + (size_t)t * n, n);
                            if (y[t * 40 + r] != want && fails++ < 10)
                                printf("%s packed n=%d tok %d/%d row %d: %.9g, want %.9g\n", infer__isa_name((infer__isa)isa), n, t, nt, r, y[t * 40 + r], want);
                        }
                }
                free(packed);
            }
            free(w), free(x);
            n_run++;
        }
    }
    cr_assert_gt(n_run, 0);
    cr_assert_eq(fails, 0, "%d F16 sums out of llama.cpp's order", fails);
}
