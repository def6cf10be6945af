#include "model/random_weights.h"

#include "core/error.h"

#include <cmath>
#include <algorithm>
#include <random>

namespace lingbot {

namespace {

// The tensor `name` of `shape`, the `tensor_index`-th of the config (from 1).
Tensor random_tensor(const std::string& name, const Shape& shape, uint64_t tensor_index, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  float* p = t.f32();
  const int64_t n = t.numel();
  // value = offset + scale * N(0, 1), or uniform in [lo, hi) for LayerScale.
  float offset = 0.0f, scale = 1.0f;
  const bool uniform = name.ends_with(".gamma");
  if (name.ends_with(".bias")) {
    scale = 0.02f;
  } else if (shape.size() == 1) {  // norm weights
    offset = 1.0f;
    scale = 0.1f;
  } else if (name.find("_token") == std::string::npos && name.find("pos_embed") == std::string::npos) {
    const bool transposed = name.find("resize_layers.0") != std::string::npos ||
                            name.find("resize_layers.1") != std::string::npos;
    const int64_t fan_in = transposed ? shape[0] : n / shape[0];
    scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
  }
  // Chunks with their own generators, so the fill runs in parallel and
  // the values do not depend on the thread count.
  constexpr int64_t kChunk = int64_t{1} << 16;
#pragma omp parallel for schedule(static) if (n > 4 * kChunk)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull ^ (tensor_index << 32) ^ static_cast<uint64_t>(c0 / kChunk));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> u(0.4f, 0.8f);
    const int64_t c1 = std::min(n, c0 + kChunk);
    for (int64_t i = c0; i < c1; ++i) p[i] = uniform ? u(rng) : offset + scale * normal(rng);
  }
  // Keep the field of view positive (it goes through a ReLU).
  if (name == "camera_head.pose_branch.fc2.bias" && n > 8) {
    p[7] = 0.3f;
    p[8] = 0.3f;
  }
  return t;
}

}  // namespace

RandomWeights::RandomWeights(const ModelConfig& config, uint64_t seed) : seed_(seed) {
  uint64_t tensor_index = 0;
  for (const ExpectedTensor& e : expected_parameters(config)) index_.emplace(e.name, std::pair(++tensor_index, e.shape));
}

Tensor RandomWeights::tensor(const std::string& name) const {
  const auto it = index_.find(name);
  LB_CHECK(it != index_.end(), "internal error: random weights have no tensor '{}'", name);
  return random_tensor(name, it->second.second, it->second.first, seed_);
}

io::StateDict random_state_dict(const ModelConfig& config, uint64_t seed) {
  io::StateDict sd("random weights", "random");
  uint64_t tensor_index = 0;
  for (const ExpectedTensor& e : expected_parameters(config))
    sd.insert(e.name, random_tensor(e.name, e.shape, ++tensor_index, seed));
  return sd;
}

}  // namespace lingbot
