// Division by a run-time constant without a divide instruction, for kernels
// that map a key index to (page, slot) many times with the same page size.
//
// For a divisor d >= 1 let l = ceil(log2 d) (so 2^l >= d) and
//   mul = ceil(2^(31 + l) / d),  shift = 31 + l.
// Then for every 0 <= n < 2^31:   floor(n / d) == (n * mul) >> shift.
// Why: write mul = (2^(31+l) + e) / d with 0 <= e < d. Then
//   n * mul / 2^(31+l) = n/d + n*e / (d * 2^(31+l)),
// and the error term is < 2^31 / 2^(31+l) = 2^-l <= 1/d. With n/d = q + r/d,
// r <= d - 1, the sum stays below q + 1, so the floor is q.
// Overflow: mul <= 2^32 (d > 2^(l-1)), so n * mul < 2^31 * 2^32 + 2^31 < 2^64.
//
// Computed on the host (once per table), evaluated on either side; tests
// check it against `/` (tests/backend/cuda/attention_fast_div_test.cpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LB_HOST_DEVICE inline
#endif

namespace lingbot::cuda {

struct FastDiv {
  uint64_t mul = 1u << 31;  // d = 1: n * 2^31 >> 31 = n
  uint32_t shift = 31;
  int32_t divisor = 1;

  static FastDiv make(int32_t d) {  // d >= 1 (the caller checks)
    FastDiv f;
    f.divisor = d;
    uint32_t l = 0;
    while ((uint64_t{1} << l) < static_cast<uint64_t>(d)) ++l;
    f.shift = 31 + l;
    f.mul = ((uint64_t{1} << f.shift) + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d);
    return f;
  }

  // floor(n / divisor) for 0 <= n < 2^31.
  LB_HOST_DEVICE int32_t div(int32_t n) const {
    return static_cast<int32_t>((static_cast<uint64_t>(static_cast<uint32_t>(n)) * mul) >> shift);
  }
};

}  // namespace lingbot::cuda
