// The cases of the bf16 attention's tests (attention_bf16_test.cpp, and the
// AMX kernel on emulated tiles, amx_emulated/): bf16-valued q, k and v in
// spans of several storage types, and the check of a kernel's output
// against the double-precision reference over the same values. Its one
// rounding beyond the reference is P's to bfloat16 (relative 2^-9 per
// weight), so each output may move by 2^-9 of max|v| plus float32 noise.
#pragma once

#include "backend/cpu/attention.h"
#include "core/half.h"
#include "kv/fp8_e4m3.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace lingbot::cpu::bf16_attention_cases {

inline float bf16_valued(float x) { return bf16_to_f32(f32_to_bf16(x)); }

struct Case {
  int64_t nq;
  int heads, dim;
  std::vector<int64_t> span_tokens;
  float magnitude = 1.f;
  // How the spans after the first are stored (the first is float32).
  KvElement storage = KvElement::F32;
};

// fp8 spans' scales: powers of two, so that every stored value (a 4-bit
// e4m3 significand times the scale) is a bfloat16 value and the bound below
// holds unchanged; what is tested is that codes and scales are read back.
constexpr float kFp8KScale = 0.5f, kFp8VScale = 0.25f;

struct Data {
  std::vector<float> q, k, v;
  std::vector<std::vector<uint16_t>> k16, v16;
  std::vector<std::vector<uint8_t>> k8, v8;
  std::vector<std::vector<float>> k8_scale, v8_scale;
  std::vector<KvSpan> spans;
  double vmax = 0;
};

inline Data make(const Case& c, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  Data d;
  const int64_t row = int64_t{c.heads} * c.dim;
  int64_t nk = 0;
  for (int64_t t : c.span_tokens) nk += t;
  d.q.resize(static_cast<size_t>(c.nq * row));
  d.k.resize(static_cast<size_t>(nk * row));
  d.v.resize(static_cast<size_t>(nk * row));
  for (float& x : d.q) x = bf16_valued(normal(rng) * c.magnitude);
  for (float& x : d.k) x = bf16_valued(normal(rng) * c.magnitude);
  for (float& x : d.v) x = bf16_valued(normal(rng));
  int64_t at = 0;
  for (size_t s = 0; s < c.span_tokens.size(); ++s) {
    const int64_t t = c.span_tokens[s];
    float* k = d.k.data() + at * row;
    float* v = d.v.data() + at * row;
    const auto elements = static_cast<size_t>(t * row);
    if (s > 0 && c.storage == KvElement::Bf16) {
      auto& k16 = d.k16.emplace_back(elements);
      auto& v16 = d.v16.emplace_back(elements);
      for (size_t i = 0; i < elements; ++i) {
        k16[i] = f32_to_bf16(k[i]);
        v16[i] = f32_to_bf16(v[i]);
      }
      d.spans.push_back({k16.data(), v16.data(), t, KvElement::Bf16});
    } else if (s > 0 && c.storage == KvElement::Fp8) {
      auto& k8 = d.k8.emplace_back(elements);
      auto& v8 = d.v8.emplace_back(elements);
      auto& ks = d.k8_scale.emplace_back(static_cast<size_t>(t * c.heads), kFp8KScale);
      auto& vs = d.v8_scale.emplace_back(static_cast<size_t>(t * c.heads), kFp8VScale);
      for (size_t i = 0; i < elements; ++i) {  // the reference reads the stored values
        k8[i] = kv::f32_to_e4m3(k[i] / kFp8KScale);
        v8[i] = kv::f32_to_e4m3(v[i] / kFp8VScale);
        k[i] = kv::e4m3_to_f32(k8[i]) * kFp8KScale;
        v[i] = kv::e4m3_to_f32(v8[i]) * kFp8VScale;
      }
      d.spans.push_back({k8.data(), v8.data(), t, KvElement::Fp8, ks.data(), vs.data()});
    } else {
      d.spans.push_back({k, v, t});
    }
    at += t;
  }
  for (float x : d.v) d.vmax = std::max(d.vmax, std::fabs(double{x}));
  return d;
}


// A kernel under test: attention_bf16()'s arguments.
using Kernel = std::function<void(const float* q, int64_t nq, const std::vector<KvSpan>& spans, int heads, int dim,
                                  float scale, float* out)>;

// Query counts around the 16- and 32-row paddings and the 512-query tiles,
// key counts around the 256-key blocks, several spans, head_dims 32 to 128,
// large scores, float32, bfloat16 and fp8 storage.
inline std::vector<Case> reference_cases() {
  return {
      {16, 2, 64, {5}},
      {1, 1, 64, {7}},  // below the products' tiles: padded rows
      {17, 3, 64, {300, 1, 511}},
      {300, 2, 64, {512, 513}},
      {600, 2, 64, {256, 257}},  // two query tiles, full key blocks and a partial one
      {1100, 1, 64, {40}},       // three query tiles
      {40, 1, 32, {1000}},
      {70, 2, 128, {257, 31}},
      {64, 2, 64, {700}, 4.f},  // scores up to ~1000: the running max moves
      {33, 2, 64, {100, 600, 9}, 1.f, KvElement::Bf16},
      {50, 2, 64, {100, 600, 9}, 1.f, KvElement::Fp8},
  };
}

inline void expect_within_ps_rounding(const Kernel& kernel) {
  std::mt19937 rng(2026);
  for (const Case& c : reference_cases()) {
    const Data d = make(c, rng);
    const int64_t n = c.nq * c.heads * c.dim;
    std::vector<float> got(static_cast<size_t>(n), -7.f), want(static_cast<size_t>(n));
    const float scale = 1.f / std::sqrt(static_cast<float>(c.dim));
    kernel(d.q.data(), c.nq, d.spans, c.heads, c.dim, scale, got.data());
    attention_reference(d.q.data(), c.nq, d.spans, c.heads, c.dim, scale, want.data());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
    const double bound = (std::ldexp(1.0, -9) + 1e-5) * d.vmax;
    EXPECT_LE(worst, bound) << "nq " << c.nq << " heads " << c.heads << " dim " << c.dim << " spans "
                            << c.span_tokens.size();
    EXPECT_GT(worst, 0.0) << "P is rounded to bf16: some difference from the fp64 reference is expected";
  }
}

}  // namespace lingbot::cpu::bf16_attention_cases
