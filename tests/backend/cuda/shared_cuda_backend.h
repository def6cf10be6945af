// The CUDA backend the table-driven tests of this binary share (the op
// table, the op contracts): made on first use and never destroyed (its
// destructor would run after the CUDA runtime has begun to unload at exit).
// It checks for errors after every op, so that a failure names its op.
#pragma once

#include "backend/cuda/cuda_backend.h"

#include <memory>
#include <string>

namespace lingbot::test {

// Null, with `why` set to a message naming `what`, where no GPU is present.
inline std::shared_ptr<Backend> shared_cuda_backend(std::string* why, const char* what) {
  if (!cuda::device_available()) {
    *why = std::string("no CUDA device: ") + what + " runs on the GPU machine";
    return nullptr;
  }
  static cuda::CudaBackend* backend = [] {
    cuda::CudaBackendOptions options;
    options.sync_after_each_op = true;
    return new cuda::CudaBackend(options);
  }();
  return std::shared_ptr<Backend>(std::shared_ptr<Backend>(), backend);  // not owning
}

}  // namespace lingbot::test
