// Cases shared by the AMX Linear kernel's tests: on the CPU's own tiles
// (linear_amx_test.cpp, where the CPU has AMX) and on emulated ones
// (amx_emulated/linear_amx_emulated_test.cpp, everywhere). Each runs a
// product through the kernel and holds it to a float64 reference computed
// here from the same bf16 values: sums of exact products, the bias, GELU by
// std::erf, then the residual update or the rounding to bf16.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/onednn_matmul.h"
#include "core/half.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace lingbot::cpu::linear_amx_cases {

using lingbot::bf16_to_f32;
using lingbot::f32_to_bf16;

struct Case {
  int64_t rows, in, out;
  bool bias;
  Activation act;
  MatmulDst kind;
  std::string name() const {
    const char* kinds[] = {"F32", "Bf16", "AddIntoF32"};
    return std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(out) + (bias ? " bias" : "") +
           (act == Activation::Gelu ? " gelu" : "") + " " + kinds[static_cast<int>(kind)];
  }
};

// The shapes: row counts around the 32-row strips (1, 31, 33, 70), short
// and long K, column counts within one item and across several (items are
// at most 256 columns), and every output kind.
inline std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t rows : {1, 31, 33, 70})
    for (auto [in, out] : {std::pair<int64_t, int64_t>{64, 32}, {512, 96}, {96, 288}}) {
      all.push_back({rows, in, out, true, Activation::None, MatmulDst::F32});
      all.push_back({rows, in, out, true, Activation::Gelu, MatmulDst::Bf16});
      all.push_back({rows, in, out, false, Activation::None, MatmulDst::AddIntoF32});
    }
  all.push_back({70, 512, 288, false, Activation::Gelu, MatmulDst::F32});
  all.push_back({33, 512, 96, true, Activation::None, MatmulDst::Bf16});
  all.push_back({33, 512, 96, true, Activation::None, MatmulDst::AddIntoF32});
  return all;
}

// The kernel under test: dst per kind from x [rows, in] bf16 and w [out, in]
// bf16 row-major (the runner packs it as the kernel wants).
using Kernel = std::function<void(const Case&, const std::vector<uint16_t>& x, const std::vector<uint16_t>& w,
                                  const float* bias, void* dst)>;

// Runs one case and checks every element of dst, and that nothing past its
// rows was written.
inline void check(const Case& c, const Kernel& kernel, uint32_t seed = 3) {
  SCOPED_TRACE(c.name());
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<uint16_t> x(static_cast<size_t>(c.rows * c.in)), w(static_cast<size_t>(c.out * c.in));
  for (auto& v : x) v = f32_to_bf16(normal(rng));
  for (auto& v : w) v = f32_to_bf16(normal(rng) * 0.2f);
  std::vector<float> bias(static_cast<size_t>(c.out));
  for (auto& v : bias) v = normal(rng);
  std::vector<float> residual(static_cast<size_t>(c.rows * c.out));
  for (auto& v : residual) v = normal(rng);

  // dst with a guard row after it, poisoned.
  const size_t n = static_cast<size_t>(c.rows * c.out), guard = static_cast<size_t>(c.out);
  std::vector<float> dst_f32(n + guard, NAN);
  std::vector<uint16_t> dst_bf16(n + guard, 0x7fc1);  // a NaN's bits
  if (c.kind == MatmulDst::AddIntoF32) std::copy(residual.begin(), residual.end(), dst_f32.begin());
  void* dst = c.kind == MatmulDst::Bf16 ? static_cast<void*>(dst_bf16.data()) : static_cast<void*>(dst_f32.data());
  kernel(c, x, w, c.bias ? bias.data() : nullptr, dst);

  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t o = 0; o < c.out; ++o) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < c.in; ++k) {
        const double p = static_cast<double>(bf16_to_f32(x[i * c.in + k])) * bf16_to_f32(w[o * c.in + k]);
        sum += p;
        mag += std::fabs(p);
      }
      if (c.bias) sum += bias[o];
      mag += std::fabs(c.bias ? bias[o] : 0.0) + 1e-30;
      double want = sum;
      if (c.act == Activation::Gelu) want = 0.5 * sum * (1.0 + std::erf(sum / std::sqrt(2.0)));
      const size_t at = static_cast<size_t>(i * c.out + o);
      if (c.kind == MatmulDst::AddIntoF32) {
        want += residual[at];
        mag += std::fabs(residual[at]);
      }
      const double got = c.kind == MatmulDst::Bf16 ? bf16_to_f32(dst_bf16[at]) : dst_f32[at];
      // float32 sums: a few ulps of the magnitude; GELU's erf: 3e-7 absolute;
      // bf16 output: half an ulp of bf16 (2^-9 relative) on top.
      double bound = 1e-6 * mag + 1e-6;
      if (c.kind == MatmulDst::Bf16) bound += std::fabs(want) * std::ldexp(1.0, -8);
      ASSERT_TRUE(std::isfinite(got)) << "row " << i << " col " << o;
      const double err = std::fabs(got - want);
      ASSERT_LE(err, bound) << "row " << i << " col " << o << ": got " << got << ", want " << want;
    }
  for (size_t g = n; g < n + guard; ++g) {
    if (c.kind == MatmulDst::Bf16) {
      ASSERT_EQ(dst_bf16[g], 0x7fc1) << "written past the rows at " << g - n;
    } else {
      ASSERT_TRUE(std::isnan(dst_f32[g])) << "written past the rows at " << g - n;
    }
  }
}

// Runs one case through `kernel` at each of two OpenMP thread counts
// (checking each as above) and expects the same bits: the kernel's items
// follow the thread count, each sum's order must not.
inline void check_same_bits(const Case& c, const Kernel& kernel, int threads_a, int threads_b) {
  std::vector<float> results[2];
  const int saved = omp_get_max_threads();
  for (int i = 0; i < 2; ++i) {
    omp_set_num_threads(i == 0 ? threads_a : threads_b);
    check(c, [&](const Case& cc, const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, const float* bias,
                 void* d) {
      kernel(cc, x, w, bias, d);
      results[i].assign(static_cast<float*>(d), static_cast<float*>(d) + cc.rows * cc.out);
    });
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)), 0);
}

}  // namespace lingbot::cpu::linear_amx_cases
