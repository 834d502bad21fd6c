#!/bin/sh
# Builds infer.h and runs every test, twice: an optimised build, and a debug
# build under AddressSanitizer and UndefinedBehaviorSanitizer. Installs what
# it needs first. Tests that need ../shared skip, saying so, without it.
set -e
cd "$(dirname "$0")/.."
sh scripts/deps.sh
python3 amalgamate.py --check
jobs=2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j$jobs
(cd build && ctest --output-on-failure -j$jobs)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFER_SANITIZE=ON >/dev/null
cmake --build build-asan -j$jobs
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$jobs)
