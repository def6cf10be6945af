#include "model/weights.h"

#include "model/checkpoint_check.h"

namespace lingbot {

namespace {

bool stored_in_compute_dtype(const std::string& name, const Tensor& t) {
  return t.ndim() >= 2 && name.rfind("aggregator.", 0) == 0;
}

}  // namespace

DeviceWeights::DeviceWeights(Backend& backend, const io::StateDict& state, const ModelConfig& config) {
  const CheckpointCheck check = check_checkpoint(state, config);
  LB_CHECK(check.ok(), "{}", check.summary(state.source()));
  for (const ExpectedTensor& e : expected_parameters(config)) {
    const Tensor& src = state.at(e.name);
    const DType dtype = stored_in_compute_dtype(e.name, src) ? backend.compute_dtype() : DType::F32;
    Tensor dev = backend.upload(src, dtype);
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
