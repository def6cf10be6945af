// The vectorisable exp / erf / GELU of the CPU backend against libm in
// double precision, over dense sweeps of their whole useful range.
#include "backend/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace lingbot::cpu;

TEST(VectorMath, ExpIsWithinTwoUlpOfLibm) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.00173f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_vectorizable(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_EQ(exp_vectorizable(0.0f), 1.0f);
  // Clamped ends: tiny but normal and finite, never inf or NaN.
  EXPECT_GT(exp_vectorizable(-1000.0f), 0.0f);
  EXPECT_LT(exp_vectorizable(-1000.0f), 1e-37f);
  EXPECT_TRUE(std::isfinite(exp_vectorizable(1000.0f)));
}

TEST(VectorMath, ErfIsWithinItsStatedBound) {
  double worst = 0;
  for (float x = -6.0f; x <= 6.0f; x += 0.0001f)
    worst = std::max(worst, std::abs(erf_vectorizable(x) - std::erf(static_cast<double>(x))));
  EXPECT_LT(worst, 6e-7);
  EXPECT_EQ(erf_vectorizable(0.0f), 0.0f);
  EXPECT_EQ(erf_vectorizable(-1.5f), -erf_vectorizable(1.5f));  // odd
  EXPECT_EQ(erf_vectorizable(30.0f), 1.0f);
}

TEST(VectorMath, GeluMatchesTheErfForm) {
  double worst = 0;
  for (float x = -12.0f; x <= 12.0f; x += 0.0003f) {
    const double xd = x;
    const double ref = 0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0)));
    worst = std::max(worst, std::abs(gelu_vectorizable(x) - ref) / std::max(1.0, std::abs(xd)));
  }
  EXPECT_LT(worst, 3e-7);
}
