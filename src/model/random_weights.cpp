#include "model/random_weights.h"

#include <cmath>
#include <algorithm>
#include <random>

namespace lingbot {

io::StateDict random_state_dict(const ModelConfig& config, uint64_t seed) {
  io::StateDict sd("random weights", "random");
  uint64_t tensor_index = 0;
  for (const ExpectedTensor& e : expected_parameters(config)) {
    ++tensor_index;
    Tensor t = Tensor::empty(e.shape);
    float* p = t.f32();
    const int64_t n = t.numel();
    const std::string& name = e.name;
    const auto ends_with = [&](const char* s) {
      const std::string suffix(s);
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    // value = offset + scale * N(0, 1), or uniform in [lo, hi) for LayerScale.
    float offset = 0.0f, scale = 1.0f;
    const bool uniform = ends_with(".gamma");
    if (ends_with(".bias")) {
      scale = 0.02f;
    } else if (e.shape.size() == 1) {  // norm weights
      offset = 1.0f;
      scale = 0.1f;
    } else if (name.find("_token") == std::string::npos && name.find("pos_embed") == std::string::npos) {
      const bool transposed = name.find("resize_layers.0") != std::string::npos ||
                              name.find("resize_layers.1") != std::string::npos;
      const int64_t fan_in = transposed ? e.shape[0] : n / e.shape[0];
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
    sd.insert(name, std::move(t));
  }
  // Keep the field of view positive (it goes through a ReLU).
  if (const Tensor* b = sd.find("camera_head.pose_branch.fc2.bias")) {
    b->f32()[7] = 0.3f;
    b->f32()[8] = 0.3f;
  }
  return sd;
}

}  // namespace lingbot
