// The model's parameters on the compute device, by upstream state-dict name.
//
// Matrix weights of the encoder and aggregator are stored in the backend's
// compute dtype (bfloat16 on CUDA, float32 on CPU); vectors (norms, biases,
// LayerScale gains) and both heads stay float32, as upstream runs the heads
// with autocast off.
#pragma once

#include "backend/backend.h"
#include "io/state_dict.h"
#include "model/model_config.h"

#include <string>
#include <unordered_map>

namespace lingbot {

class DeviceWeights {
 public:
  // Checks the state dict against the config (throws a one-line summary of
  // missing / mis-shaped tensors) and uploads every expected tensor.
  DeviceWeights(Backend& backend, const io::StateDict& state, const ModelConfig& config);

  const Tensor& get(const std::string& name) const;
  const Tensor* find(const std::string& name) const;
  // A parameter as a float32 host tensor (for host-side precomputation such
  // as position-embedding interpolation).
  Tensor host(const std::string& name) const;
  size_t device_bytes() const { return bytes_; }

 private:
  std::unordered_map<std::string, Tensor> device_;
  std::unordered_map<std::string, Tensor> host_;  // the source tensors (views into the checkpoint)
  size_t bytes_ = 0;
};

}  // namespace lingbot
