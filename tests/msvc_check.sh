#!/bin/sh
# The MSVC branches of src/platform.h (atomics, cpuid, _BitScanForward,
# Win32 threads and files, no target attributes), compiled the one way this
# machine can: clang in MSVC mode (--target=*-pc-windows-msvc, _MSC_VER
# defined) over Wine's Windows and C runtime headers (Debian libwine-dev;
# MinGW-w64's headers disable __attribute__ for any _MSC_VER compiler,
# which breaks clang's own intrinsic headers). Not cl.exe: clang 14 in this
# mode declares intrinsics only for instruction sets given on the command
# line, so the x86 check names AVX2 and AVX-512 (the code still marks
# each kernel, and chooses among them at run time), and it links nothing.
#  - x64: infer.h's implementation compiled to an object, every warning an
#    error (-Wall), and the CLI's files, npc and simple (examples/os.h);
#  - ARM64: the same, syntax only (the NEON kernels, the ARM64 atomics).
# Wine's headers lack two UCRT declarations (fmaf, localtime_s), given
# here. Exits 77 where clang or Wine's headers are absent.
#     sh tests/msvc_check.sh SOURCE_DIR
set -e
src=$(cd "${1:-.}" && pwd)
wine_inc=/usr/include/wine/wine
if ! command -v clang >/dev/null 2>&1 || [ ! -f $wine_inc/windows/windows.h ] || [ ! -f /usr/include/stb/stb_ds.h ]; then
    echo "msvc_check: SKIPPED: needs clang, stb_ds and Wine's headers (Debian libwine-dev; sh scripts/deps.sh)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/stb/stb"
cp /usr/include/stb/stb_ds.h "$tmp/stb/stb/"
cat > "$tmp/ucrt_gaps.h" <<'H'
/* what the UCRT declares and Wine's msvcrt headers do not */
#include <time.h>
float fmaf(float x, float y, float z);
int localtime_s(struct tm *out, const time_t *t);
H
common="-fms-extensions -fms-compatibility -std=c99 -D_UCRT -Wall -Wno-unknown-pragmas -Wno-for-loop-analysis -Werror
    -include $tmp/ucrt_gaps.h -isystem $tmp/stb -idirafter $wine_inc/msvcrt -idirafter $wine_inc/windows -I$src"
x64="--target=x86_64-pc-windows-msvc -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16"
# Wine's winnt.h defines _InterlockedCompareExchange128 for clang, which has
# it as a builtin on ARM64: renamed out of the way
arm64="--target=aarch64-pc-windows-msvc -march=armv8.2-a+dotprod+i8mm -D_InterlockedCompareExchange128=wine_icx128"
printf '#define INFER_IMPLEMENTATION\n#include "infer.h"\n' > "$tmp/impl.c"
clang $x64 $common -O1 -c "$tmp/impl.c" -o "$tmp/impl.obj"
echo "msvc_check: x64: infer.h's implementation compiles (an object of $(wc -c < "$tmp/impl.obj") bytes)"
for f in "$src"/examples/infer.c "$src"/examples/infer_*.c "$src"/examples/npc.c "$src"/examples/simple.c; do
    case $f in */infer_serve.c) continue ;; esac # libmicrohttpd's: not built for Windows
    clang $x64 $common -fsyntax-only "$f"
done
echo "msvc_check: x64: the CLI's files, npc and simple compile"
clang $arm64 $common -fsyntax-only "$tmp/impl.c"
echo "msvc_check: ARM64: infer.h's implementation compiles (syntax)"
echo "msvc_check: ok"
