// The op table (backend_ops_table.h) on the CPU backend, with one thread
// and with two: the ops split their loops across threads above a size
// (backend/cpu/parallel.h) and the larger cases of the table cross it.
#include "backend_ops_table.h"

namespace lingbot::test::ops {
namespace {

// A new backend for every test: make_cpu_backend(threads) sets the process's
// OpenMP thread count and the ISA of the CPU kernels, so each test must make
// its own.
BackendUnderTest cpu_backend(int threads) {
  return {fmt::format("Cpu{}", threads), [threads](std::string*) -> std::shared_ptr<Backend> {
            return make_cpu_backend(threads);
          }};
}

INSTANTIATE_TEST_SUITE_P(BackendOps, OpTable,
                         ::testing::Combine(::testing::ValuesIn(op_cases()),
                                            ::testing::Values(cpu_backend(1), cpu_backend(2))),
                         op_param_name);

}  // namespace
}  // namespace lingbot::test::ops
