#include "backend/cpu/bf16_weights_gemv.h"

#include "backend/cpu/parallel.h"

#include <algorithm>
#include <bit>
#include <vector>

namespace lingbot::cpu {

namespace {

// Rows [r0, r0 + rows) of x against weight rows [c0, c1): each weight row is
// widened once into `wide` and dotted with every x row.
void pass(const float* x, int64_t rows, int64_t k, const uint16_t* w, int64_t c0, int64_t c1, int64_t m,
          const float* bias, float* out, bool accumulate, std::vector<float>& wide) {
  wide.resize(static_cast<size_t>(k));
  float* wf = wide.data();
  for (int64_t c = c0; c < c1; ++c) {
    const uint16_t* wr = w + c * k;
#pragma omp simd
    for (int64_t i = 0; i < k; ++i) wf[i] = std::bit_cast<float>(static_cast<uint32_t>(wr[i]) << 16);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * k;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < k; ++i) s += xr[i] * wf[i];
      const float v = s + (bias != nullptr ? bias[c] : 0.f);
      float& o = out[r * m + c];
      o = accumulate ? o + v : v;
    }
  }
}

}  // namespace

void bf16_weights_gemv(const float* x, int64_t n, int64_t k, const uint16_t* w, int64_t m, const float* bias,
                       float* out, bool accumulate) {
  for (int64_t r0 = 0; r0 < n; r0 += kBf16WeightsRowsPerPass) {
    const int64_t rows = std::min(kBf16WeightsRowsPerPass, n - r0);
    const float* xr = x + r0 * k;
    float* outr = out + r0 * m;
    // Column blocks across the threads: each reads its own weight rows.
    constexpr int64_t kColumnsPerItem = 16;
    const int64_t items = (m + kColumnsPerItem - 1) / kColumnsPerItem;
#pragma omp parallel if (parallel_worth(m * k))
    {
      std::vector<float> wide;
#pragma omp for schedule(static)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t c0 = item * kColumnsPerItem, c1 = std::min(m, c0 + kColumnsPerItem);
        pass(xr, rows, k, w, c0, c1, m, bias, outr, accumulate, wide);
      }
    }
  }
}

}  // namespace lingbot::cpu
