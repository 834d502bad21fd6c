/* simd_avx2.c - AVX2+FMA versions of the kernels, compiled with target
   attributes so the same binary still runs on CPUs without them. */
#include "internal.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define INFER__HAVE_X86 1
#endif

static int infer__simd_avx2_install(infer__kernels *k) {
#ifdef INFER__HAVE_X86
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
    (void)k;
    return 1;
#else
    (void)k;
    return 0;
#endif
}
