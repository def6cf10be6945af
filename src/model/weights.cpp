#include "model/weights.h"

#include "model/checkpoint_check.h"

namespace lingbot {

namespace {

bool stored_in_compute_dtype(const std::string& name, const Tensor& t) {
  return t.ndim() >= 2 && name.rfind("aggregator.", 0) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// src [rows, ...] (a weight) or [rows] (a bias), each row scaled by gain[row],
// in float32 (a new tensor: the source may be a view into the checkpoint).
Tensor scale_rows(const Tensor& src, const Tensor& gain, const std::string& name) {
  Tensor out = src.to_dtype(DType::F32).clone();
  const Tensor g = gain.to_dtype(DType::F32);
  const int64_t rows = out.dim(0);
  LB_CHECK(g.numel() == rows, "{}: LayerScale gain of {} values for {} output features", name, g.numel(), rows);
  const int64_t cols = out.numel() / rows;
  float* d = out.f32();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) d[r * cols + c] *= g.f32()[r];
  return out;
}

}  // namespace

std::string DeviceWeights::folded_gain(const std::string& name) {
  for (const char* param : {".weight", ".bias"}) {
    if (!ends_with(name, param)) continue;
    const std::string layer = name.substr(0, name.size() - std::string(param).size());
    if (ends_with(layer, ".attn.proj")) return layer.substr(0, layer.size() - 10) + ".ls1.gamma";
    if (ends_with(layer, ".mlp.fc2")) return layer.substr(0, layer.size() - 8) + ".ls2.gamma";
  }
  return "";
}

DeviceWeights::DeviceWeights(Backend& backend, const io::StateDict& state, const ModelConfig& config) {
  const CheckpointCheck check = check_checkpoint(state, config);
  LB_CHECK(check.ok(), "{}", check.summary(state.source()));
  for (const ExpectedTensor& e : expected_parameters(config)) {
    const Tensor& src = state.at(e.name);
    const DType dtype = stored_in_compute_dtype(e.name, src) ? backend.compute_dtype() : DType::F32;
    const std::string gain = folded_gain(e.name);
    Tensor dev = backend.upload(gain.empty() ? src : scale_rows(src, state.at(gain), e.name), dtype);
    bytes_ += dev.nbytes();
    device_.emplace(e.name, std::move(dev));
    host_.emplace(e.name, src);
  }
}

const Tensor* DeviceWeights::find(const std::string& name) const {
  auto it = device_.find(name);
  return it == device_.end() ? nullptr : &it->second;
}

const Tensor& DeviceWeights::get(const std::string& name) const {
  const Tensor* t = find(name);
  LB_CHECK(t != nullptr, "internal error: no weight '{}'", name);
  return *t;
}

Tensor DeviceWeights::host(const std::string& name) const {
  auto it = host_.find(name);
  LB_CHECK(it != host_.end(), "internal error: no weight '{}'", name);
  return it->second.to_dtype(DType::F32);
}

}  // namespace lingbot
