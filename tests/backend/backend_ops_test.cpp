// The op table (backend_ops_table.h) on the CPU backend, with one thread
// and with two: the ops split their loops across threads above a size
// (backend/cpu/parallel.h) and the larger cases of the table cross it; and
// in the bf16 mode (--cpu-dtype bf16, compute_dtype() bfloat16: the table's
// `lowp` bounds, as for CUDA) with each kernel of its products: the widened
// sgemm, and oneDNN's bf16 matmul (skipped on CPUs without AVX512-BF16).
#include "backend_ops_table.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/linear_amx.h"
#include "backend/cpu/onednn_matmul.h"

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

BackendUnderTest cpu_bf16_backend(cpu::Bf16Products products) {
  const char* names[] = {"CpuBf16Amx", "CpuBf16Onednn", "CpuBf16Widened"};
  return {names[static_cast<int>(products)], [products](std::string* why) -> std::shared_ptr<Backend> {
            if (products == cpu::Bf16Products::AmxTiles && !cpu::linear_amx_available()) {
              *why = "this CPU lacks AMX-BF16 tiles (our AMX products)";
              return nullptr;
            }
            if (products == cpu::Bf16Products::OnednnBf16 && !cpu::cpu_has_bf16_arithmetic()) {
              *why = "this CPU lacks AVX512-BF16 (oneDNN's bf16 matmul)";
              return nullptr;
            }
            return std::make_shared<cpu::CpuBackend>(2, cpu::resolve_isa("auto"), DType::BF16, products);
          }};
}

INSTANTIATE_TEST_SUITE_P(BackendOps, OpTable,
                         ::testing::Combine(::testing::ValuesIn(op_cases()),
                                            ::testing::Values(cpu_backend(1), cpu_backend(2),
                                                              cpu_bf16_backend(cpu::Bf16Products::WidenedSgemm),
                                                              cpu_bf16_backend(cpu::Bf16Products::OnednnBf16),
                                                              cpu_bf16_backend(cpu::Bf16Products::AmxTiles))),
                         op_param_name);

}  // namespace
}  // namespace lingbot::test::ops
