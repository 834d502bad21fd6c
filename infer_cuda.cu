/* infer_cuda.cu - the CUDA backend of infer.h (not built yet).

   When it exists, compiling the implementation with INFER_CUDA defined and
   linking this file (built with nvcc) will move the forward pass to an
   NVIDIA GPU behind the same internal backend interface the CPU path uses.
   Until then this translation unit is empty, and asking infer.h for
   INFER_DEVICE_CUDA fails with a clear error. */
