#!/bin/sh
# The installed package, used from outside the tree: `cmake --install` of
# BUILD_DIR into a fresh prefix; then tests/install_project configured with
# find_package(infer) and built against infer::infer and against
# infer::shared (the installed libinfer.so, which it must load), and main.c
# built again with pkg-config's flags; all run on a model and must generate
# the same text as `infer run`.
#     sh tests/install_check.sh BUILD_DIR SOURCE_DIR MODEL
set -e
build=$1 src=$2 model=$3
[ -f "$model" ] || { echo "install_check: SKIPPED: $model is absent (../shared)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in include/infer.h include/infer_cuda.cu lib/cmake/infer/inferConfig.cmake lib/pkgconfig/infer.pc \
    lib/libinfer.so share/doc/infer/LICENSE; do
    [ -f "$tmp/prefix/$f" ] || { echo "install_check: FAILED: $f was not installed"; exit 1; }
done
cmake -S "$src/tests/install_project" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
by_cmake=$("$tmp/cmake-build/outside" "$model")
by_shared=$("$tmp/cmake-build/outside_shared" "$model")
if ldd "$tmp/cmake-build/outside_shared" >/dev/null 2>&1; then
    ldd "$tmp/cmake-build/outside_shared" | grep -q "$tmp/prefix/lib/libinfer.so" ||
        { echo "install_check: FAILED: outside_shared does not load the installed libinfer.so"; exit 1; }
fi
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" 
export PKG_CONFIG_PATH
cc -O1 -o "$tmp/outside-pc" "$src/tests/install_project/main.c" $(pkg-config --cflags --libs infer)
by_pkgconfig=$("$tmp/outside-pc" "$model")
expected=$("$build/infer" run -m "$model" -p "Once upon a time" -n 8 --temp 0 2>/dev/null)
[ -n "$by_cmake" ] || { echo "install_check: FAILED: the find_package build printed nothing"; exit 1; }
[ "$by_cmake" = "$expected" ] || { echo "install_check: FAILED: find_package build: '$by_cmake', infer run: '$expected'"; exit 1; }
[ "$by_pkgconfig" = "$expected" ] || { echo "install_check: FAILED: pkg-config build: '$by_pkgconfig', infer run: '$expected'"; exit 1; }
[ "$by_shared" = "$expected" ] || { echo "install_check: FAILED: infer::shared build: '$by_shared', infer run: '$expected'"; exit 1; }
echo "install_check: ok: find_package(infer) (infer::infer and infer::shared) and pkg-config builds generate '$expected'"
