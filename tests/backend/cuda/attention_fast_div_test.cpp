// FastDiv (fast_div.h), the multiply-shift division the paged attention
// kernels use to find a key's page: against `/` for every divisor up to 2^12
// with the numerators near multiples of it, and random pairs over the whole
// int32 range. Runs on the host (CI); the device evaluates the same inline
// function.
#include "backend/cuda/fast_div.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

using lingbot::cuda::FastDiv;

TEST(CudaFastDiv, MatchesDivisionForSmallDivisors) {
  for (int32_t d = 1; d <= 4096; ++d) {
    const FastDiv f = FastDiv::make(d);
    for (int32_t q : {0, 1, 2, 3, 7, 100, 1000, 65535, 1 << 20}) {
      for (int32_t delta : {-1, 0, 1}) {
        const int64_t n64 = int64_t{q} * d + delta;
        if (n64 < 0 || n64 > std::numeric_limits<int32_t>::max()) continue;
        const auto n = static_cast<int32_t>(n64);
        ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
      }
    }
    const int32_t top = std::numeric_limits<int32_t>::max();
    ASSERT_EQ(f.div(top), top / d) << top << " / " << d;
  }
}

TEST(CudaFastDiv, MatchesDivisionForRandomPairs) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> numerator(0, std::numeric_limits<int32_t>::max());
  std::uniform_int_distribution<int32_t> divisor(1, std::numeric_limits<int32_t>::max());
  for (int i = 0; i < 2000000; ++i) {
    const int32_t d = i % 3 == 0 ? divisor(rng) : (divisor(rng) >> (i % 31));
    const int32_t n = numerator(rng);
    const FastDiv f = FastDiv::make(d < 1 ? 1 : d);
    ASSERT_EQ(f.div(n), n / f.divisor) << n << " / " << f.divisor;
  }
}
