// The op-contract tables (tests/backend/op_contracts_table.h) on the CUDA
// backend: the same violations refused with the same op names as on the
// CPU backend, the same edges accepted. Every case skips with a message
// where no GPU is present.
#include "backend/op_contracts_table.h"

#include "backend/cuda/cuda_backend.h"

namespace lingbot::test::contracts {
namespace {

// One backend for the binary, made on first use and never destroyed (its
// destructor would run after the CUDA runtime has begun to unload at exit).
// It checks for errors after every op, so that an accepted edge that fails
// on the GPU names its op.
std::shared_ptr<Backend> shared_cuda(std::string* why) {
  if (!cuda::device_available()) {
    *why = "no CUDA device: the CUDA op-contract tables run on the GPU machine";
    return nullptr;
  }
  static cuda::CudaBackend* backend = [] {
    cuda::CudaBackendOptions options;
    options.sync_after_each_op = true;
    return new cuda::CudaBackend(options);
  }();
  return std::shared_ptr<Backend>(std::shared_ptr<Backend>(), backend);  // not owning
}

const BackendUnderTest kCuda{"Cuda", shared_cuda};

INSTANTIATE_TEST_SUITE_P(Contracts, OpContractViolation,
                         ::testing::Combine(::testing::ValuesIn(violations()), ::testing::Values(kCuda)),
                         violation_name);
INSTANTIATE_TEST_SUITE_P(Contracts, OpContractEdge,
                         ::testing::Combine(::testing::ValuesIn(edges()), ::testing::Values(kCuda)), edge_name);

}  // namespace
}  // namespace lingbot::test::contracts
