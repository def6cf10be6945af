// Checking the return codes of the CUDA runtime.
//
// Every runtime call of the backend goes through LB_CUDA_CHECK, every kernel
// launch is followed by LB_CUDA_CHECK_LAUNCH. A failure becomes a
// lingbot::Error whose one line names the call, the CUDA error and where it
// happened, e.g.
//   "cuda: cudaMalloc(&p, bytes) failed: out of memory (cudaErrorMemoryAllocation) at src/backend/cuda/cuda_backend.cu:57"
// cuBLASLt and cuDNN have their own checks next to their only users
// (gemm.cu, conv.cu).
#pragma once

#include <cuda_runtime_api.h>

namespace lingbot::cuda {

[[noreturn]] void fail_cuda(cudaError_t error, const char* call, const char* file, int line);
// "cuda backend: <op>: <problem>" for kernel launchers, which must not
// include fmt (it does not compile under nvcc in C++20 mode).
[[noreturn]] void fail_kernel(const char* op, const char* problem);

}  // namespace lingbot::cuda

#define LB_CUDA_CHECK(call)                                                 \
  do {                                                                      \
    const cudaError_t lb_cuda_status_ = (call);                             \
    if (lb_cuda_status_ != cudaSuccess)                                     \
      ::lingbot::cuda::fail_cuda(lb_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: reports a bad launch configuration at once
// (errors inside the kernel surface at the next synchronising call).
#define LB_CUDA_CHECK_LAUNCH() LB_CUDA_CHECK(cudaGetLastError())
