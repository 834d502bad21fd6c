/* cuda_emu.cpp - infer_cuda.cu compiled as C++ for the CPU with
   tests/cuda_emu.h standing in for the CUDA runtime: the GPU code's logic
   (block formats, kernels, graph capture and replay) checked on machines
   without a GPU by test_cuda_emu. */
#include "cuda_emu.h"

#include "../infer_cuda.cu"
