// The bf16 mode's Linear kernel (src/backend/cpu/linear_amx.cpp) on emulated
// tiles (amx_emulation.h, force-included into this binary's copy of the
// kernel): its packing of the activations, its strips, chunks of K, items,
// padding rows and epilogues, against the float64 reference of
// linear_amx_cases.h. On a CPU without AMX, as CI's, this is what checks that
// code; LinearAmx.MatchesFloat64OnThisCpusTiles runs the same cases on real
// tiles where the CPU has AMX.
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/linear_amx.h"

#include "../linear_amx_cases.h"

#include <gtest/gtest.h>

#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;
using namespace lingbot::cpu::linear_amx_cases;

namespace {

bool can_run() { return detail::linear_amx_built() && cpu_supports(Isa::Avx512); }

void emulated(const Case& c, const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, const float* bias,
              void* dst) {
  std::vector<uint16_t> tiles(w.size());
  linear_amx_pack_weights(w.data(), c.in, c.out, tiles.data());
  detail::linear_amx_unchecked(x.data(), c.rows, c.in, tiles.data(), c.out, bias, c.act, c.kind, dst);
}

}  // namespace

TEST(LinearAmxEmulated, MatchesFloat64) {
  if (!can_run()) GTEST_SKIP() << "needs AVX-512 (the kernel's packing and epilogue)";
  for (const Case& c : cases()) check(c, emulated);
}

// Items follow the thread count; each sum's order does not.
TEST(LinearAmxEmulated, SameBitsOnOneAndThreeThreads) {
  if (!can_run()) GTEST_SKIP() << "needs AVX-512 (the kernel's packing and epilogue)";
  check_same_bits({70, 512, 288, true, Activation::None, MatmulDst::F32}, emulated, 1, 3);
}
