/* cpu.c - which kernels run here: the best instruction set the CPU has,
   found once per model as it loads (its contexts share it), or the one
   the INFER_ISA environment variable forces (scalar, avx2, avx512, neon,
   wasm) for tests and benchmarks. */
#include "internal.h"
#include "quants.h"

/* one token's F16 dot in llama.cpp's order, plain C */
static float infer__f16_dot_vec(int n, const void *w, const void *x) {
    return infer__f16_dot_llama_vec((const uint16_t *)w, 1, (const uint16_t *)x, n);
}

static const char *infer__isa_name(infer__isa isa) {
    static const char *names[] = {"scalar", "avx2", "avx512", "neon", "wasm"};
    return (unsigned)isa < INFER__ISA_COUNT ? names[isa] : "?";
}

static int infer__kernels_install(infer__kernels *k, infer__isa isa) {
    int t, ok;
    memset(k, 0, sizeof *k);
    for (t = 0; t < INFER_TYPE_COUNT; t++) {
        const infer__type_traits *tt = infer__traits((infer_type)t);
        k->vec_dot[t] = tt->vec_dot;
        /* a format with no activation form (Q4_0) still quantizes a row:
           the KV cache's keys and values */
        k->from_float[t] = tt->from_float ? tt->from_float : tt->quantize;
    }
    k->isa = isa;
    k->f16_dot_ordered = infer__traits(INFER_TYPE_F16)->vec_dot; /* the plain C one sums in that order */
    k->f16_dot_ordered1 = infer__f16_dot_vec;
    infer__vecmath_install(k); /* the plain C; the ISA's install replaces what it has */
    switch (isa) {
    case INFER__ISA_SCALAR: ok = 1; break;
    case INFER__ISA_AVX2: ok = infer__simd_avx2_install(k); break;
    case INFER__ISA_AVX512: ok = infer__simd_avx512_install(k); break;
    case INFER__ISA_NEON: ok = infer__simd_neon_install(k); break;
    case INFER__ISA_WASM: ok = infer__simd_wasm_install(k); break; /* SIMD128: only where compiled for it */
    default: ok = 0;
    }
    return ok;
}

static int infer__kernels_select(infer__kernels *k, infer_error *err) {
    const char *want = getenv("INFER_ISA");
    int isa;
    if (want && *want) {
        for (isa = 0; isa < INFER__ISA_COUNT; isa++)
            if (!strcmp(want, infer__isa_name((infer__isa)isa))) break;
        if (isa == INFER__ISA_COUNT) {
            infer__set_error(err, INFER_ERR_ARG, "INFER_ISA=%s is not one of scalar, avx2, avx512, neon, wasm", want);
            return 0;
        }
        if (!infer__kernels_install(k, (infer__isa)isa)) {
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "INFER_ISA=%s: this CPU or build cannot run it", want);
            return 0;
        }
        return 1;
    }
    for (isa = INFER__ISA_COUNT - 1; isa > 0; isa--)
        if (infer__kernels_install(k, (infer__isa)isa)) return 1;
    return infer__kernels_install(k, INFER__ISA_SCALAR);
}
