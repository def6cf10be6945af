// OnednnConvolutions (onednn_conv.h) against a naive convolution in double:
// float32 operands to float32 rounding, and bf16 operands (the bf16 mode on
// AMX CPUs) exactly as the naive convolution of the bf16-rounded input and
// weights, which differs measurably from the float32 one.
#include "backend/cpu/onednn_conv.h"

#include "backend/cpu/onednn_matmul.h"
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;

namespace {

std::vector<double> naive_conv(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b) {
  const int64_t oh = s.out_h(), ow = s.out_w();
  std::vector<double> out(static_cast<size_t>(s.n * s.c_out * oh * ow));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t co = 0; co < s.c_out; ++co)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double sum = b[static_cast<size_t>(co)];
          for (int64_t ci = 0; ci < s.c_in; ++ci)
            for (int64_t ky = 0; ky < s.kernel; ++ky)
              for (int64_t kx = 0; kx < s.kernel; ++kx) {
                const int64_t iy = y * s.stride - s.pad + ky, ix = xo * s.stride - s.pad + kx;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                sum += double{x[static_cast<size_t>(((n * s.c_in + ci) * s.h + iy) * s.w + ix)]} *
                       w[static_cast<size_t>(((co * s.c_in + ci) * s.kernel + ky) * s.kernel + kx)];
              }
          out[static_cast<size_t>(((n * s.c_out + co) * oh + y) * ow + xo)] = sum;
        }
  return out;
}

double relative(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

}  // namespace

TEST(OnednnConv, Float32AndBf16OperandsAgainstNaive) {
  const ConvShape s{1, 24, 13, 11, 20, 3, 1, 1};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(s.n * s.c_in * s.h * s.w)), w(static_cast<size_t>(s.c_out * s.c_in * 9)),
      b(static_cast<size_t>(s.c_out));
  for (float& v : x) v = normal(rng);
  for (float& v : w) v = normal(rng) * 0.1f;
  for (float& v : b) v = normal(rng);
  std::vector<float> out(static_cast<size_t>(s.n * s.c_out * s.out_h() * s.out_w()));

  OnednnConvolutions f32;
  f32.run(s, x.data(), w.data(), b.data(), out.data());
  const std::vector<double> exact = naive_conv(s, x, w, b);
  EXPECT_LT(relative(out, exact), 1e-6);

  if (!cpu_has_bf16_arithmetic()) GTEST_SKIP() << "bf16 operands: this CPU lacks AVX512-BF16";
  OnednnConvolutions bf16(/*bf16_operands=*/true);
  bf16.run(s, x.data(), w.data(), b.data(), out.data());
  const std::vector<double> of_rounded = naive_conv(s, rounded(x), rounded(w), b);
  EXPECT_LT(relative(out, of_rounded), 1e-6) << "the bf16 operands' products are exact, their sums float32";
  EXPECT_GT(relative(out, exact), 1e-4) << "the operands were not rounded to bf16";
}
