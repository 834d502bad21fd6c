/* wasm_gemm_check.c - the SIMD128 prompt tiles (gemm of simd_wasm.c)
   against their own vec_dot, row by row and token by token: they promise
   the same results to the bit (each token's block terms added in block
   order), so any difference fails. Random Q4_0 and Q4_1 weights (quantized
   from random floats), activations quantized by the table's own
   from_float, token counts 1 to 9 (tiles of four and what is left), rows
   of several lengths. Built with emcc -msimd128 and run under node
   (tests/CMakeLists.txt); elsewhere there is no wasm table and it says so. */
#include "infer_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng = 12345;
static float unif(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(void) {
    static const infer_type types[] = {INFER_TYPE_Q4_0, INFER_TYPE_Q4_1};
    static const int lengths[] = {32, 96, 576, 1536};
    infer__kernels k;
    int ti, li, n_tok, checks = 0, fails = 0;
    if (!infer__kernels_install(&k, INFER__ISA_WASM)) {
        printf("SKIPPED: not built for WebAssembly SIMD128 (emcc -msimd128)\n");
        return 77;
    }
    for (ti = 0; ti < 2; ti++) {
        infer_type t = types[ti], xt = infer__traits(t)->vec_dot_type;
        if (!k.gemm[t]) {
            printf("FAIL %s: no gemm in the wasm table\n", infer_type_name(t));
            fails++;
            continue;
        }
        for (li = 0; li < 4; li++) {
            int n = lengths[li], rows = 7, r, j;
            size_t ws = infer__row_size(t, n), xs = infer__row_size(xt, n);
            uint8_t *w = (uint8_t *)malloc(ws * rows), *x = (uint8_t *)malloc(xs * 9);
            float *f = (float *)malloc(sizeof(float) * n), *y = (float *)malloc(sizeof(float) * 9 * rows);
            for (r = 0; r < rows; r++) {
                for (j = 0; j < n; j++) f[j] = unif() * (r + 1);
                infer__traits(t)->quantize(f, w + r * ws, n);
            }
            for (r = 0; r < 9; r++) {
                for (j = 0; j < n; j++) f[j] = unif() * 3;
                k.from_float[xt](f, x + r * xs, n);
            }
            for (n_tok = 1; n_tok <= 9; n_tok++) {
                int tok;
                memset(y, 0, sizeof(float) * 9 * rows);
                k.gemm[t](n, w, ws, rows, x, xs, n_tok, y, (size_t)rows);
                for (tok = 0; tok < n_tok; tok++)
                    for (r = 0; r < rows; r++) {
                        float want = k.vec_dot[t](n, w + r * ws, x + tok * xs), got = y[tok * rows + r];
                        checks++;
                        if (memcmp(&want, &got, sizeof want)) {
                            if (fails++ < 10)
                                printf("FAIL %s n=%d n_tok=%d row %d token %d: gemm %.9g, vec_dot %.9g\n",
                                       infer_type_name(t), n, n_tok, r, tok, got, want);
                        }
                    }
            }
            free(w), free(x), free(f), free(y);
        }
    }
    printf("wasm gemm: %d checks, %d differ from vec_dot\n", checks, fails);
    return fails ? 1 : 0;
}
