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
# The CUDA variant (-DINFER_CUDA=ON), wherever nvcc is (CI has it but no
# GPU): built, so it cannot rot, and the CPU tests run with it.
# INFER_DEVICE=cpu stands in for auto, which would otherwise say on every
# run that there is no GPU; test_cuda checks device selection itself and,
# given a GPU, the GPU against the CPU. Left out here, as they test nothing
# this build changes: neon_qemu (the NEON kernels under qemu, ~5 min), the
# reference tests forced to each instruction set and thread count, and
# compile_check (infer.h alone, INFER_CUDA included, whatever the build).
nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
    cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DINFER_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
    cmake --build build-cuda -j$jobs
    (cd build-cuda && INFER_DEVICE=cpu ctest --output-on-failure -j$jobs \
        -E '^(neon_qemu|test_reference_.+|compile_check)$')
else
    echo "test.sh: no nvcc (PATH, /usr/local/cuda/bin): the CUDA build (-DINFER_CUDA=ON) is not checked"
fi
