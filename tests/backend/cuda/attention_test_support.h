// Helpers for the GPU attention and KV cache tests: device tensors, dtype
// rounding, poisoning, and comparisons that say where a result went wrong.
#pragma once

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "core/half.h"
#include "core/tensor.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace lingbot::cuda::test {

inline bool gpu_available() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

// Compute capability 9.x (the experimental wgmma kernel runs there only).
inline bool hopper() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  return major == 9;
}

#define LB_REQUIRE_GPU()                                                                      \
  do {                                                                                        \
    if (!::lingbot::cuda::test::gpu_available())                                             \
      GTEST_SKIP() << "no CUDA device: GPU tests run on the GPU machine (tools/device/gpu_check.sh)"; \
  } while (0)

// Device tensor of `shape`, uninitialised (device_malloc; freed with the tensor).
inline Tensor device_empty(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(shape_numel(shape), 1)) * dtype_size(dtype);
  void* p = device_malloc(bytes, "test tensor");
  return Tensor::wrap(p, shape, dtype, Device::CUDA, std::shared_ptr<void>(p, [](void* q) { device_free(q); }));
}

// Host float32 values as `dtype` would store them (bf16: round to nearest even).
inline Tensor round_to(const Tensor& host, DType dtype) {
  Tensor out = host.clone();
  if (dtype == DType::BF16) {
    for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = bf16_to_f32(f32_to_bf16(out.f32()[i]));
  }
  return out;
}

// Host float32 -> new device tensor of `dtype` (same shape).
inline Tensor upload(const Tensor& host, DType dtype) {
  Tensor dev = device_empty(host.shape(), dtype);
  if (dtype == DType::F32) {
    LB_CUDA_CHECK(cudaMemcpy(dev.data(), host.data(), host.nbytes(), cudaMemcpyHostToDevice));
  } else {
    std::vector<uint16_t> bits(static_cast<size_t>(host.numel()));
    for (int64_t i = 0; i < host.numel(); ++i) bits[static_cast<size_t>(i)] = f32_to_bf16(host.f32()[i]);
    LB_CUDA_CHECK(cudaMemcpy(dev.data(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  }
  return dev;
}

// Device tensor -> host float32 (synchronises the device first).
inline Tensor download(const Tensor& dev) {
  LB_CUDA_CHECK(cudaDeviceSynchronize());
  Tensor host = Tensor::empty(dev.shape());
  if (dev.dtype() == DType::F32) {
    LB_CUDA_CHECK(cudaMemcpy(host.data(), dev.data(), host.nbytes(), cudaMemcpyDeviceToHost));
  } else {
    std::vector<uint16_t> bits(static_cast<size_t>(dev.numel()));
    LB_CUDA_CHECK(cudaMemcpy(bits.data(), dev.data(), bits.size() * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < dev.numel(); ++i) host.f32()[i] = bf16_to_f32(bits[static_cast<size_t>(i)]);
  }
  return host;
}

// Every byte 0xff: NaN in float32 and in bf16, so an unwritten output shows.
inline void poison(Tensor& dev) { LB_CUDA_CHECK(cudaMemset(dev.data(), 0xff, dev.nbytes())); }

inline Tensor random_normal(const Shape& shape, std::mt19937& rng, float stddev = 1.f) {
  Tensor t = Tensor::empty(shape);
  std::normal_distribution<float> normal(0.f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = normal(rng);
  return t;
}

// Relative error bound per tensor for outputs of a dtype (see the tests for
// why): bf16 inputs and outputs vs the fp64 reference, or fp32.
inline double bound_for(DType dtype) { return dtype == DType::BF16 ? 1e-2 : 1e-5; }

// got and ref: float32 host tensors of `rows` x num_heads x head_dim, compared
// on the rows listed (ref_row r of `ref` against got row rows[r]). Passes when
// every value is finite, ||got - ref|| / ||ref|| <= bound over all of them,
// and every (row, head) vector is within 4 * bound of its reference (or of
// 4 * bound * the tensor's rms norm, for vectors near zero). On failure the
// message names the worst element as (query, head, dim).
inline ::testing::AssertionResult close_on_rows(const Tensor& got, const Tensor& ref, const std::vector<int64_t>& rows,
                                                int num_heads, int head_dim, double bound, const std::string& what) {
  const int64_t row = int64_t{num_heads} * head_dim;
  double num = 0, den = 0, worst_abs = 0;
  int64_t nonfinite = 0, first_nonfinite = -1, worst = -1;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t e = 0; e < row; ++e) {
      const double g = got.f32()[rows[r] * row + e];
      const double x = ref.f32()[static_cast<int64_t>(r) * row + e];
      if (!std::isfinite(g)) {
        if (nonfinite++ == 0) first_nonfinite = rows[r] * row + e;
        continue;
      }
      num += (g - x) * (g - x);
      den += x * x;
      if (std::fabs(g - x) > worst_abs) {
        worst_abs = std::fabs(g - x);
        worst = rows[r] * row + e;
      }
    }
  }
  auto where = [&](int64_t index) {
    return fmt::format("query {} head {} dim {}", index / row, (index % row) / head_dim, index % head_dim);
  };
  if (nonfinite > 0) {
    return ::testing::AssertionFailure() << what << ": " << nonfinite << " non-finite outputs (unwritten or NaN), "
                                         << "first at " << where(first_nonfinite);
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  const double rms = std::sqrt(den / std::max<double>(1, static_cast<double>(rows.size() * row)));
  // Worst (row, head) vector.
  double worst_vec = 0;
  int64_t worst_vec_at = -1;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int h = 0; h < num_heads; ++h) {
      double vn = 0, vd = 0;
      for (int c = 0; c < head_dim; ++c) {
        const int64_t e = int64_t{h} * head_dim + c;
        const double g = got.f32()[rows[r] * row + e];
        const double x = ref.f32()[static_cast<int64_t>(r) * row + e];
        vn += (g - x) * (g - x);
        vd += x * x;
      }
      const double v = std::sqrt(vn / std::max(vd, rms * rms * head_dim));
      if (v > worst_vec) {
        worst_vec = v;
        worst_vec_at = rows[r] * row + int64_t{h} * head_dim;
      }
    }
  }
  if (rel <= bound && worst_vec <= 4 * bound) {
    return ::testing::AssertionSuccess() << what << ": relative error " << rel << ", worst head vector " << worst_vec;
  }
  return ::testing::AssertionFailure()
         << what << ": relative error " << rel << " (bound " << bound << "), worst head vector " << worst_vec
         << " (bound " << 4 * bound << ") at " << (worst_vec_at >= 0 ? where(worst_vec_at) : "-")
         << "; worst element at " << (worst >= 0 ? where(worst) : "-") << ": got " << got.f32()[std::max<int64_t>(worst, 0)]
         << ", |diff| " << worst_abs;
}

inline std::vector<int64_t> all_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = i;
  return rows;
}

// Rows to check against the slow CPU reference: all of them when few, else
// the first and last, both sides of every 128-row tile boundary up to 8 tiles,
// and random others.
inline std::vector<int64_t> sample_rows(int64_t n, int64_t max_rows, std::mt19937& rng) {
  if (n <= max_rows) return all_rows(n);
  std::vector<int64_t> rows = {0, n - 1};
  for (int64_t t = 128; t < n && t <= 8 * 128; t += 128) {
    rows.push_back(t - 1);
    rows.push_back(t);
  }
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  while (static_cast<int64_t>(rows.size()) < max_rows) rows.push_back(pick(rng));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// Copies rows of a [n, ...] host float32 tensor.
inline Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  Shape shape = t.shape();
  const int64_t row = t.numel() / std::max<int64_t>(t.dim(0), 1);
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(shape);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::memcpy(out.f32() + static_cast<int64_t>(r) * row, t.f32() + rows[r] * row,
                static_cast<size_t>(row) * sizeof(float));
  }
  return out;
}

}  // namespace lingbot::cuda::test
