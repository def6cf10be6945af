// Helpers for the CUDA backend op tests (backend_*_test.cpp): the shared
// backends, random inputs, NaN-poisoned outputs and a comparison that says
// where and by how much a GPU result differs from the CPU reference.
//
// Every op test follows one pattern:
//   1. random float32 inputs on the host, rounded to the dtype the GPU op
//      reads (bfloat16 inputs: both sides see the same values);
//   2. the CPU backend (float32, the project's reference) computes the
//      expected result;
//   3. the GPU op writes into an output poisoned with NaN, so an element it
//      fails to write shows up as non-finite;
//   4. ||gpu - cpu|| / ||cpu|| must stay under a bound stated with the test.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/half.h"
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>

namespace lingbot::cuda::backend_test {

#define LB_REQUIRE_CUDA_DEVICE()                                                                 \
  do {                                                                                           \
    if (!::lingbot::cuda::device_available())                                                    \
      GTEST_SKIP() << "no CUDA device: the CUDA backend op tests run on the GPU machine";        \
  } while (0)

// Backends shared by all tests of the binary (made on first use): the GPU
// backend with TF32 allowed (the default), one with full float32, both
// checking for GPU errors after every op so that a failure names its op; and
// the CPU reference backend. Never destroyed: their destructors would run
// after the CUDA runtime has begun to unload at exit.
inline CudaBackend& gpu() {
  static CudaBackend* backend = [] {
    CudaBackendOptions o;
    o.sync_after_each_op = true;
    return new CudaBackend(o);
  }();
  return *backend;
}

inline CudaBackend& gpu_fp32() {
  static CudaBackend* backend = [] {
    CudaBackendOptions o;
    o.allow_tf32 = false;
    o.sync_after_each_op = true;
    return new CudaBackend(o);
  }();
  return *backend;
}

inline Backend& cpu() {
  static Backend* backend = make_cpu_backend(0).release();
  return *backend;
}

// Relative error bounds per tensor, ||gpu - cpu|| / ||cpu||. Why these sizes:
//   kExactBound   data movement: every element must be bit-identical.
//   kFp32Bound    float32 arithmetic in another order (sums of <= 4096 terms,
//                 float instead of the CPU's double statistics): observed
//                 ~1e-7 .. 1e-6; 1e-5 leaves room for long reductions.
//   kTf32Bound    TF32 tensor cores round each input to 10 mantissa bits
//                 (relative 2^-11 = 4.9e-4): products err by ~4e-4 RMS and
//                 so do their sums; 2e-3 is 5x that, while a wrong index or a
//                 missing term gives errors of order 1.
//   kBf16Bound    bfloat16 outputs are rounded to 8 mantissa bits (relative
//                 error uniform in +-2^-9, RMS 1.1e-3); one or two roundings
//                 stay under 5e-3.
constexpr double kExactBound = 0.0;
constexpr double kFp32Bound = 1e-5;
constexpr double kTf32Bound = 2e-3;
constexpr double kBf16Bound = 5e-3;

// Uniform random float32 host tensor in [lo, hi), reproducible from `seed`.
inline Tensor random_host(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = uniform(rng);
  return t;
}

// The values `host` (float32) takes once stored as `dtype`, as float32.
inline Tensor representable(const Tensor& host, DType dtype) {
  return dtype == DType::F32 ? host.clone() : host.to_dtype(dtype).to_dtype(DType::F32);
}

// Host float32 -> new GPU tensor of `dtype`.
inline Tensor to_gpu(const Tensor& host, DType dtype) { return gpu().upload(host, dtype); }

// New GPU tensor filled with NaN.
inline Tensor poisoned(const Shape& shape, DType dtype) {
  Tensor t = gpu().alloc(shape, dtype);
  gpu().fill(t, std::numeric_limits<float>::quiet_NaN());
  return t;
}

// New CPU float32 tensor filled with NaN (CPU outputs, so that a reference
// that forgets an element cannot pass either).
inline Tensor cpu_poisoned(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  std::fill(t.f32(), t.f32() + t.numel(), std::numeric_limits<float>::quiet_NaN());
  return t;
}

// Compares a GPU tensor (any float dtype) with a float32 host reference.
// Fails when an element is not finite, when the per-tensor relative error
// exceeds `bound` (kExactBound: when any element differs), or when the
// element counts differ; the message names `what`, the error, the worst
// element (index, got, want) and the first non-finite one.
inline ::testing::AssertionResult matches(const Tensor& gpu_result, const Tensor& reference, double bound,
                                          const std::string& what) {
  const Tensor got = gpu().download(gpu_result);
  if (got.numel() != reference.numel())
    return ::testing::AssertionFailure() << what << ": " << got.numel() << " elements, reference has "
                                         << reference.numel();
  const float* g = got.f32();
  const float* w = reference.f32();
  int64_t nonfinite = 0, first_nonfinite = -1, worst = -1, differing = 0;
  double num = 0, den = 0, worst_diff = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (!std::isfinite(g[i]) || !std::isfinite(w[i])) {
      if (nonfinite++ == 0) first_nonfinite = i;
      continue;
    }
    const double d = static_cast<double>(g[i]) - w[i];
    num += d * d;
    den += static_cast<double>(w[i]) * w[i];
    if (d != 0) ++differing;
    if (std::fabs(d) > worst_diff) {
      worst_diff = std::fabs(d);
      worst = i;
    }
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  const bool ok = nonfinite == 0 && (bound == kExactBound ? differing == 0 : rel <= bound);
  auto result = ok ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
  result << what << ": relative error " << rel << " (bound " << bound << ")";
  if (worst >= 0)
    result << ", worst element " << worst << " got " << g[worst] << " want " << w[worst] << ", " << differing
           << " of " << got.numel() << " differ";
  if (nonfinite > 0)
    result << "; " << nonfinite << " non-finite, first at " << first_nonfinite << " (got " << g[first_nonfinite]
           << ", want " << w[first_nonfinite] << "): an element the op did not write?";
  return result;
}

}  // namespace lingbot::cuda::backend_test
