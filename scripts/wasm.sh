#!/bin/sh
# The WebAssembly build: installs what it needs (scripts/deps.sh: Debian's
# emscripten, nodejs, chromium, chromium-driver, selenium), then configures
# and builds examples/web/ with emcc (cmake/emscripten.cmake) into BUILD_DIR
# (build-wasm by default): BUILD_DIR/web is the site (the page, the module
# with threads and the one without), and the wasm tests are registered
# there (ctest -L wasm; they compare with the native CLI at NATIVE_CLI,
# build/infer by default).
#   usage: sh scripts/wasm.sh [BUILD_DIR [NATIVE_CLI]]
set -e
cd "$(dirname "$0")/.."
dir=${1:-build-wasm}
cli=${2:-$(pwd)/build/infer}
[ -n "$INFER_SKIP_DEPS" ] || sh scripts/deps.sh
cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$(pwd)/cmake/emscripten.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DINFER_NATIVE_CLI="$cli" >/dev/null
cmake --build "$dir" -j2
echo "wasm.sh: the site is $dir/web (serve it with COOP/COEP for threads: python3 examples/web/serve.py $dir/web)"
