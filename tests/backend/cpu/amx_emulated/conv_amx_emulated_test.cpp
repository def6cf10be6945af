// The bf16 mode's convolution kernel (src/backend/cpu/conv_amx.cpp) on
// emulated tiles (amx_emulation.h, force-included into this binary's copy of
// the kernel): its gathering of each output pixel's window (padding, stride,
// strips across map rows and images), its items and epilogues, against the
// float64 reference of conv_amx_cases.h. On a CPU without AMX, as CI's, this
// is what checks that code; ConvAmx.MatchesFloat64OnThisCpusTiles runs the
// same cases on real tiles where the CPU has AMX.
#include "backend/cpu/conv_amx.h"
#include "backend/cpu/cpu_isa.h"

#include "../conv_amx_cases.h"

#include <gtest/gtest.h>

#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;
using namespace lingbot::cpu::conv_amx_cases;

namespace {

bool can_run() { return detail::conv_amx_built() && cpu_supports(Isa::Avx512); }

void emulated(const Case& c, const std::vector<float>& x, const std::vector<float>& w, const float* bias,
              const float* residual, float* out) {
  detail::conv_amx_unchecked(c.shape, x.data(), w.data(), bias, residual, c.act, out);
}

}  // namespace

TEST(ConvAmxEmulated, MatchesFloat64) {
  if (!can_run()) GTEST_SKIP() << "needs AVX-512 (the kernel's gathering and epilogue)";
  for (const Case& c : cases()) check(c, emulated);
}

TEST(ConvAmxEmulated, SameBitsOnOneAndThreeThreads) {
  if (!can_run()) GTEST_SKIP() << "needs AVX-512 (the kernel's gathering and epilogue)";
  check_same_bits(cases()[3], emulated, 1, 3);
}
