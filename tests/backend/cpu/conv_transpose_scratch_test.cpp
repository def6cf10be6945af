// The CPU backend's transposed convolutions keep their products in one
// scratch buffer from call to call (grown, never shrunk): calls of
// different sizes in both layouts on one backend, larger after smaller and
// smaller after larger, each against the naive transposed convolution in
// double.
#include "backend/backend.h"
#include "backend/naive_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace lingbot;
namespace naive = lingbot::test::naive;

namespace {

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = uniform(rng);
  return t;
}

double relative_error(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = double{got.f32()[i]} - want.f32()[i];
    num += d * d;
    den += double{want.f32()[i]} * want.f32()[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST(CpuConvTransposeScratch, CallsOfEverySizeOnOneBackendMatchNaive) {
  auto be = make_cpu_backend(2);
  std::mt19937 rng(11);
  struct Call {
    Shape x;
    int64_t c_out;
    int k;
    bool channels_last;
  };
  const Call calls[] = {
      {{1, 4, 2, 3}, 3, 2, true},   // small first
      {{2, 8, 5, 6}, 6, 4, true},   // then larger: the buffer grows
      {{1, 5, 3, 4}, 7, 3, false},  // smaller, channels first
      {{1, 3, 2, 2}, 2, 2, true},   // smallest, after the largest
      {{2, 8, 5, 6}, 6, 4, false},  // the largest again, channels first
  };
  for (const Call& c : calls) {
    const Tensor x = random_tensor(c.x, rng), w = random_tensor({c.x[1], c.c_out, c.k, c.k}, rng);
    const Tensor b = random_tensor({c.c_out}, rng);
    const Tensor want = naive::conv_transpose2d(x, w, &b, c.k);
    Tensor out = Tensor::empty(c.channels_last ? naive::channels_last(want).shape() : want.shape());
    for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = std::nanf("");
    if (c.channels_last) {
      be->conv_transpose2d_nhwc(naive::channels_last(x), w, &b, c.k, out);
      EXPECT_LT(relative_error(out, naive::channels_last(want)), 1e-6) << c.x[0] << "x" << c.x[1] << " k" << c.k;
    } else {
      be->conv_transpose2d(x, w, &b, c.k, out);
      EXPECT_LT(relative_error(out, want), 1e-6) << c.x[0] << "x" << c.x[1] << " k" << c.k;
    }
  }
}
