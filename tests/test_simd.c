/* test_simd.c - the vector kernels of every instruction set this CPU runs
   against the scalar reference, format by format (the checks themselves
   are in simd_selftest.c, which also runs alone under qemu for NEON). */
#define SIMD_SELFTEST_NO_MAIN
#include "simd_selftest.c"

#include <criterion/criterion.h>

static void check(int t) {
    int n_isa = 0, n_checks = 0, fails = st_check(t, &n_isa, &n_checks);
    cr_assert_eq(fails, 0, "%s: %d of %d comparisons failed (see stdout)",
                 t < 0 ? "from_float" : infer_type_name((infer_type)t), fails, n_checks);
    if (!n_isa) cr_log_info("no vector kernels for this format on this CPU: nothing compared");
}

Test(simd, from_float_bytes) { check(-1); }
Test(simd, f32) { check(INFER_TYPE_F32); }
Test(simd, f16) { check(INFER_TYPE_F16); }
Test(simd, bf16) { check(INFER_TYPE_BF16); }
Test(simd, q8_0) { check(INFER_TYPE_Q8_0); }
Test(simd, q4_0) { check(INFER_TYPE_Q4_0); }
Test(simd, q4_1) { check(INFER_TYPE_Q4_1); }
Test(simd, q5_0) { check(INFER_TYPE_Q5_0); }
Test(simd, q5_1) { check(INFER_TYPE_Q5_1); }
Test(simd, q2_k) { check(INFER_TYPE_Q2_K); }
Test(simd, q3_k) { check(INFER_TYPE_Q3_K); }
Test(simd, q4_k) { check(INFER_TYPE_Q4_K); }
Test(simd, q5_k) { check(INFER_TYPE_Q5_K); }
Test(simd, q6_k) { check(INFER_TYPE_Q6_K); }
Test(simd, iq4_nl) { check(INFER_TYPE_IQ4_NL); }
Test(simd, iq4_xs) { check(INFER_TYPE_IQ4_XS); }
Test(simd, mxfp4) { check(INFER_TYPE_MXFP4); }

/* INFER_ISA picks or refuses an instruction set; the best one is used otherwise */
Test(simd, isa_selection) {
    infer__kernels k;
    infer_error err;
    int isa;
    memset(&err, 0, sizeof err);
    setenv("INFER_ISA", "scalar", 1);
    cr_assert(infer__kernels_select(&k, &err));
    cr_assert_eq(k.isa, INFER__ISA_SCALAR);
    setenv("INFER_ISA", "sse9", 1);
    cr_assert_not(infer__kernels_select(&k, &err));
    cr_assert(strstr(err.msg, "INFER_ISA=sse9"));
    for (isa = 1; isa < INFER__ISA_COUNT; isa++) {
        infer__kernels probe;
        int can = infer__kernels_install(&probe, (infer__isa)isa);
        setenv("INFER_ISA", infer__isa_name((infer__isa)isa), 1);
        cr_assert_eq(infer__kernels_select(&k, &err), can, "%s", infer__isa_name((infer__isa)isa));
        if (can) cr_assert_eq(k.isa, isa);
    }
    unsetenv("INFER_ISA");
    cr_assert(infer__kernels_select(&k, &err));
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        cr_assert_eq(k.isa, INFER__ISA_AVX512);
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        cr_assert_eq(k.isa, INFER__ISA_AVX2);
#endif
}
