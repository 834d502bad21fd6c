#!/bin/sh
# infer.h builds warning-free (-Werror) as C99 with gcc and clang, as C++
# (g++ and clang++ at -O0 and -O2),
# with INFER_STATIC, and beside a program that uses stb_ds itself (its own
# STB_DS_IMPLEMENTATION and short names) without a clash.
set -e
src=${1:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags="-Wall -Wextra -pedantic -Werror -I$src -c"
cat > "$tmp/impl.c" <<'C'
#define INFER_IMPLEMENTATION
#include "infer.h"
C
cat > "$tmp/static.c" <<'C'
#define INFER_STATIC
#define INFER_IMPLEMENTATION
#include "infer.h"
int main(void) { infer_sampler_params p = infer_sampler_default_params(); return p.top_k == 40 ? 0 : 1; }
C
# A program using stb_ds with short names in the same file as infer's
# implementation (stb_ds included first, as infer.h documents) ...
cat > "$tmp/user_same.c" <<'C'
#define _XOPEN_SOURCE 700 /* strict C99 hides POSIX otherwise (see infer.h) */
#include <stb/stb_ds.h>
#define INFER_IMPLEMENTATION
#include "infer.h"
int user_same(void) { int *a = NULL; arrput(a, 1); arrput(a, 2); { int n = (int)arrlen(a); arrfree(a); return n; } }
C
# ... and one that compiles stb_ds's implementation itself elsewhere.
cat > "$tmp/user_main.c" <<'C'
#define STB_DS_IMPLEMENTATION
#include <stb/stb_ds.h>
#include "infer.h"
int user_same(void);
int main(void) { struct { char *key; int value; } *h = NULL; shput(h, "x", 3);
  return (shget(h, "x") == 3 && user_same() == 2 && infer_type_name(INFER_TYPE_Q4_0)[0] == 'Q') ? 0 : 1; }
C
# Two private copies (INFER_STATIC in two files) link into one program.
cat > "$tmp/static2.c" <<'C'
#define INFER_STATIC
#define INFER_IMPLEMENTATION
#include "infer.h"
int static2(void) { return infer_model_default_params().vocab_only; }
C
cat > "$tmp/static1.c" <<'C'
#define INFER_STATIC
#define INFER_IMPLEMENTATION
#include "infer.h"
int static2(void);
int main(void) { return static2() + infer_model_default_params().vocab_only; }
C
for cc in gcc clang; do
    command -v $cc >/dev/null 2>&1 || { echo "skip $cc: not installed"; continue; }
    $cc -std=c99 $flags "$tmp/impl.c" -o "$tmp/impl_$cc.o"
    $cc -std=c99 -Wall -Wextra -pedantic -Werror -I"$src" "$tmp/static.c" -o "$tmp/static_$cc" -lm -lpthread
    "$tmp/static_$cc"
    $cc -std=c99 -Wall -Wextra -pedantic -Werror -I"$src" "$tmp/static1.c" "$tmp/static2.c" -o "$tmp/static2_$cc" -lm -lpthread
    "$tmp/static2_$cc"
    $cc -std=c99 $flags "$tmp/user_same.c" -o "$tmp/user_same.o"
    $cc -std=c99 $flags "$tmp/user_main.c" -o "$tmp/user_main.o"
    $cc "$tmp/user_same.o" "$tmp/user_main.o" -o "$tmp/user_$cc" -lm -lpthread
    "$tmp/user_$cc"
    echo "$cc: ok"
done
# The implementation's side of the CUDA backend (INFER_CUDA: calls into
# infer_cuda.cu, compiled, not linked), and the backend interface alone, as
# infer_cuda.cu includes it (INFER_BACKEND_INTERFACE, no implementation).
cat > "$tmp/backend.c" <<'C'
#define INFER_BACKEND_INTERFACE
#include "infer.h"
int backend_ok(const infer_model *m, const infer_backend_batch *b, const infer__kv_cache *kv) {
    return m->n_layers + m->layers[0].window + b->n + kv->n_seq + INFER_BACKEND_UNSUPPORTED;
}
C
for cc in gcc clang; do
    command -v $cc >/dev/null 2>&1 || continue
    $cc -std=c99 $flags -DINFER_CUDA "$tmp/impl.c" -o "$tmp/impl_cuda_$cc.o"
    $cc -std=c99 $flags "$tmp/backend.c" -o "$tmp/backend_$cc.o"
    echo "$cc INFER_CUDA: ok"
done
# As C++ (what a game engine's build does), at -O0 and -O2: optimisation
# changes what GCC warns about (its -Wmaybe-uninitialized runs after
# inlining), and -Werror fails on any warning.
for cxx in g++ clang++; do
    command -v $cxx >/dev/null 2>&1 || { echo "skip $cxx: not installed"; continue; }
    for opt in -O0 -O2; do
        $cxx -x c++ -std=c++11 $opt $flags "$tmp/impl.c" -o "$tmp/impl_$cxx.o"
    done
    $cxx -x c++ -std=c++11 $flags -DINFER_CUDA "$tmp/impl.c" -o "$tmp/impl_cuda_$cxx.o"
    echo "$cxx (-O0, -O2): ok"
done
