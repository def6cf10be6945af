// The op table (tests/backend/backend_ops_table.h) on the CUDA backend:
// bfloat16 activations for the Compute cases, float32 (TF32 products and
// convolutions) for the F32 ones, against the same naive reference and
// table as the CPU backend. Every case skips with a message where no GPU
// is present.
#include "backend/backend_ops_table.h"

#include "backend/cuda/cuda_backend.h"

namespace lingbot::test::ops {
namespace {

// One backend for the binary, made on first use and never destroyed (its
// destructor would run after the CUDA runtime has begun to unload at exit).
// It checks for errors after every op, so that a failure names its op.
std::shared_ptr<Backend> shared_cuda(std::string* why) {
  if (!cuda::device_available()) {
    *why = "no CUDA device: the CUDA op table runs on the GPU machine";
    return nullptr;
  }
  static cuda::CudaBackend* backend = [] {
    cuda::CudaBackendOptions options;
    options.sync_after_each_op = true;
    return new cuda::CudaBackend(options);
  }();
  return std::shared_ptr<Backend>(std::shared_ptr<Backend>(), backend);  // not owning
}

INSTANTIATE_TEST_SUITE_P(BackendOps, OpTable,
                         ::testing::Combine(::testing::ValuesIn(op_cases()),
                                            ::testing::Values(BackendUnderTest{"Cuda", shared_cuda})),
                         op_param_name);

}  // namespace
}  // namespace lingbot::test::ops
