// Cases shared by the AMX convolution kernel's tests: on the CPU's own tiles
// (conv_amx_test.cpp, where the CPU has AMX) and on emulated ones
// (amx_emulated/conv_amx_emulated_test.cpp, everywhere). Each runs a
// convolution through the kernel and holds it to a float64 reference
// computed here, directly from the definition (a loop over output pixels,
// taps and channels), on the inputs and weights rounded to bf16 as the
// kernel must: then the bias, the residual and ReLU.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/onednn_conv.h"
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
#include <utility>
#include <vector>

namespace lingbot::cpu::conv_amx_cases {

struct Case {
  ConvShape shape;
  bool bias, residual;
  Activation act;
  std::string name() const {
    const ConvShape& s = shape;
    return std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c_in) +
           " -> " + std::to_string(s.c_out) + " k" + std::to_string(s.kernel) + " s" + std::to_string(s.stride) +
           " p" + std::to_string(s.pad) + (bias ? " bias" : "") + (residual ? " residual" : "") +
           (act == Activation::Relu ? " relu" : "");
  }
};

inline ConvShape nhwc(int64_t n, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int64_t kernel, int stride,
                      int pad) {
  ConvShape s{n, c_in, h, w, c_out, kernel, stride, pad};
  s.channels_last = true;
  return s;
}

// Pixel counts around the 32-pixel strips and across images and map rows,
// padding on every side, stride 2, 1 x 1 kernels, output channels within
// one item and across several (items are at most 256 channels), and every
// epilogue.
inline std::vector<Case> cases() {
  return {
      {nhwc(1, 5, 7, 64, 32, 3, 1, 1), true, false, Activation::Relu},     // 35 pixels: a partial second strip
      {nhwc(2, 6, 5, 32, 96, 3, 2, 1), false, true, Activation::None},     // stride 2: 2 x 3 x 3 pixels
      {nhwc(1, 9, 11, 96, 288, 1, 1, 0), true, false, Activation::None},   // 1 x 1, several channel items
      {nhwc(1, 17, 13, 256, 64, 3, 1, 1), true, true, Activation::Relu},   // the depth head's residual unit
      {nhwc(3, 4, 4, 128, 32, 3, 1, 0), true, false, Activation::None},    // no padding: 2 x 2 per image
      {nhwc(1, 1, 1, 32, 32, 3, 1, 1), false, false, Activation::Relu},    // one pixel, only the centre tap
  };
}

// The kernel under test: out from x and w (float32 as given: rounding them
// to bf16 is the kernel's part).
using Kernel = std::function<void(const Case&, const std::vector<float>& x, const std::vector<float>& w,
                                  const float* bias, const float* residual, float* out)>;

// Runs one case and checks every output, and that nothing past them was
// written; the output into *result where given.
inline void check(const Case& c, const Kernel& kernel, std::vector<float>* result = nullptr, uint32_t seed = 5) {
  SCOPED_TRACE(c.name());
  const ConvShape& s = c.shape;
  const int64_t oh = s.out_h(), ow = s.out_w(), k = s.kernel * s.kernel * s.c_in;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(s.n * s.h * s.w * s.c_in)), w(static_cast<size_t>(s.c_out * k));
  for (float& v : x) v = normal(rng);
  for (float& v : w) v = normal(rng) * 0.1f;
  std::vector<float> bias(static_cast<size_t>(s.c_out)), residual(static_cast<size_t>(s.n * oh * ow * s.c_out));
  for (float& v : bias) v = normal(rng);
  for (float& v : residual) v = normal(rng);

  const size_t n = residual.size(), guard = static_cast<size_t>(s.c_out);
  std::vector<float> out(n + guard, NAN);
  kernel(c, x, w, c.bias ? bias.data() : nullptr, c.residual ? residual.data() : nullptr, out.data());

  const auto b16 = [](float v) { return static_cast<double>(bf16_to_f32(f32_to_bf16(v))); };
  for (int64_t img = 0; img < s.n; ++img)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo)
        for (int64_t o = 0; o < s.c_out; ++o) {
          double sum = 0, mag = 1e-30;
          for (int64_t ky = 0; ky < s.kernel; ++ky)
            for (int64_t kx = 0; kx < s.kernel; ++kx) {
              const int64_t iy = y * s.stride - s.pad + ky, ix = xo * s.stride - s.pad + kx;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int64_t ci = 0; ci < s.c_in; ++ci) {
                const double p = b16(x[static_cast<size_t>(((img * s.h + iy) * s.w + ix) * s.c_in + ci)]) *
                                 b16(w[static_cast<size_t>(((o * s.kernel + ky) * s.kernel + kx) * s.c_in + ci)]);
                sum += p;
                mag += std::fabs(p);
              }
            }
          const size_t at = static_cast<size_t>(((img * oh + y) * ow + xo) * s.c_out + o);
          if (c.bias) sum += bias[static_cast<size_t>(o)], mag += std::fabs(bias[static_cast<size_t>(o)]);
          if (c.residual) sum += residual[at], mag += std::fabs(residual[at]);
          const double want = c.act == Activation::Relu ? std::max(sum, 0.0) : sum;
          const double got = out[at];
          ASSERT_TRUE(std::isfinite(got)) << "image " << img << " y " << y << " x " << xo << " channel " << o;
          // float32 sums: a few ulps of the magnitude.
          ASSERT_LE(std::fabs(got - want), 1e-6 * mag + 1e-6)
              << "image " << img << " y " << y << " x " << xo << " channel " << o << ": got " << got << ", want "
              << want;
        }
  for (size_t g = n; g < n + guard; ++g) EXPECT_TRUE(std::isnan(out[g])) << "written past the output at " << g - n;
  out.resize(n);
  if (result != nullptr) *result = std::move(out);
}

// The same case at two OpenMP thread counts gives the same bits: the items
// follow the thread count, each sum's order must not.
inline void check_same_bits(const Case& c, const Kernel& kernel, int threads_a, int threads_b) {
  const int saved = omp_get_max_threads();
  std::vector<float> a, b;
  omp_set_num_threads(threads_a);
  check(c, kernel, &a);
  omp_set_num_threads(threads_b);
  check(c, kernel, &b);
  omp_set_num_threads(saved);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

}  // namespace lingbot::cpu::conv_amx_cases
