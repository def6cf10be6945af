// The op table (tests/backend/backend_ops_table.h) on the CUDA backend:
// bfloat16 activations for the Compute cases, float32 (TF32 products and
// convolutions) for the F32 ones, against the same naive reference and
// table as the CPU backend. Every case skips with a message where no GPU
// is present.
#include "backend/backend_ops_table.h"

#include "backend/cuda/shared_cuda_backend.h"

namespace lingbot::test::ops {
namespace {

std::shared_ptr<Backend> shared_cuda(std::string* why) { return shared_cuda_backend(why, "the CUDA op table"); }

INSTANTIATE_TEST_SUITE_P(BackendOps, OpTable,
                         ::testing::Combine(::testing::ValuesIn(op_cases()),
                                            ::testing::Values(BackendUnderTest{"Cuda", shared_cuda})),
                         op_param_name);

}  // namespace
}  // namespace lingbot::test::ops
