// The op-contract tables (tests/backend/op_contracts_table.h) on the CUDA
// backend: the same violations refused with the same op names as on the
// CPU backend, the same edges accepted. Every case skips with a message
// where no GPU is present.
#include "backend/op_contracts_table.h"

#include "backend/cuda/shared_cuda_backend.h"

namespace lingbot::test::contracts {
namespace {

std::shared_ptr<Backend> shared_cuda(std::string* why) { return shared_cuda_backend(why, "the CUDA op-contract tables"); }

const BackendUnderTest kCuda{"Cuda", shared_cuda};

INSTANTIATE_TEST_SUITE_P(Contracts, OpContractViolation,
                         ::testing::Combine(::testing::ValuesIn(violations()), ::testing::Values(kCuda)),
                         violation_name);
INSTANTIATE_TEST_SUITE_P(Contracts, OpContractEdge,
                         ::testing::Combine(::testing::ValuesIn(edges()), ::testing::Values(kCuda)), edge_name);

}  // namespace
}  // namespace lingbot::test::contracts
