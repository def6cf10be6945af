#include "backend/cuda/cuda_check.h"

#include "core/error.h"

namespace lingbot::cuda {

void fail_cuda(cudaError_t error, const char* call, const char* file, int line) {
  fail("cuda: {} failed: {} ({}) at {}:{}", call, cudaGetErrorString(error), cudaGetErrorName(error), file, line);
}

void fail_kernel(const char* op, const char* problem) { fail("cuda backend: {}: {}", op, problem); }

}  // namespace lingbot::cuda
