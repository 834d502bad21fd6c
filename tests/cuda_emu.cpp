/* cuda_emu.cpp - infer_cuda.cu compiled as C++ for the CPU with
   tests/cuda_emu.h standing in for the CUDA runtime: the GPU code's logic
   (block formats, kernels, graph capture and replay) checked on machines
   without a GPU by test_cuda_emu. */
#include "cuda_emu.h"

#include "../infer_cuda.cu"

/* The emulation's counters (cuda_emu.h), for tests, which declare these
   themselves: [0] kernels launched directly on a stream, [1] graph
   launches, [2] kernels run by graph launches, [3] cuBLAS GEMMs run,
   [4] memcpys run. */
extern "C" void infer_cuda_emu_counts(long long out[5]) {
    for (int i = 0; i < 5; i++) out[i] = emu_counts[i];
}
extern "C" void infer_cuda_emu_reset_counts(void) {
    for (int i = 0; i < 5; i++) emu_counts[i] = 0;
}
