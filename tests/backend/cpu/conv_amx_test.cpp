// The bf16 mode's convolution kernel on AMX tiles (backend/cpu/conv_amx.h):
// the shapes it takes everywhere, the kernel on this CPU's tiles where it has
// AMX (elsewhere amx_emulated/conv_amx_emulated_test.cpp runs the same cases
// on emulated tiles).
#include "backend/cpu/conv_amx.h"

#include "conv_amx_cases.h"

#include <gtest/gtest.h>

#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;
using namespace lingbot::cpu::conv_amx_cases;

namespace {

void on_this_cpu(const Case& c, const std::vector<float>& x, const std::vector<float>& w, const float* bias,
                 const float* residual, float* out) {
  conv_amx(c.shape, x.data(), w.data(), bias, residual, c.act, out);
}

}  // namespace

TEST(ConvAmx, TakesChannelsLastMultiplesOf32) {
  EXPECT_TRUE(conv_amx_fits(nhwc(1, 108, 144, 256, 256, 3, 1, 1)));
  EXPECT_TRUE(conv_amx_fits(nhwc(1, 27, 36, 1024, 1024, 3, 2, 1)));
  EXPECT_FALSE(conv_amx_fits(nhwc(1, 378, 504, 32, 2, 1, 1, 0)));  // the depth head's last: 2 channels out
  EXPECT_FALSE(conv_amx_fits(nhwc(1, 378, 504, 3, 32, 3, 1, 1)));
  ConvShape nchw = nhwc(1, 8, 8, 64, 64, 3, 1, 1);
  nchw.channels_last = false;
  EXPECT_FALSE(conv_amx_fits(nchw));
}

TEST(ConvAmx, MatchesFloat64OnThisCpusTiles) {
  if (!conv_amx_available()) GTEST_SKIP() << "this CPU has no AMX-BF16 tiles (or Linux did not grant them)";
  for (const Case& c : cases()) check(c, on_this_cpu);
}

TEST(ConvAmx, SameBitsOnAnyThreadCount) {
  if (!conv_amx_available()) GTEST_SKIP() << "this CPU has no AMX-BF16 tiles (or Linux did not grant them)";
  check_same_bits(cases()[3], on_this_cpu, 1, omp_get_max_threads());
}
