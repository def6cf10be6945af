// The 16-bit conversions against values whose encodings are known from the
// IEEE 754 / bfloat16 definitions, and round-trip invariants.
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace lingbot;

TEST(Half, KnownEncodings) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);      // largest finite half
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);          // overflow to +inf
  EXPECT_EQ(f32_to_f16(5.960464477539063e-08f), 0x0001);  // smallest subnormal 2^-24
  EXPECT_EQ(f32_to_f16(6.103515625e-05f), 0x0400);        // smallest normal 2^-14
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-1.5f), 0xbfc0);
  EXPECT_FLOAT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(bf16_to_f32(0x3eab), 0.333984375f);
}

TEST(Half, RoundTripOfRepresentableValues) {
  // Every finite half converts to float and back unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf/nan
    EXPECT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Half, RoundsToNearest) {
  // The conversion error is at most half a unit in the last place.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.f, 1000.f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng);
    const float h = f16_to_f32(f32_to_f16(x));
    const float b = bf16_to_f32(f32_to_bf16(x));
    const int e = std::ilogb(x);
    EXPECT_LE(std::fabs(h - x), std::ldexp(1.0f, e - 11) * 1.0001f) << x;
    EXPECT_LE(std::fabs(b - x), std::ldexp(1.0f, e - 8) * 1.0001f) << x;
  }
}
