// Random weights for a config: the official architecture without a
// download, for benchmarks and smoke tests. Scales keep activations O(1)
// (matrices ~ N(0, 1/fan_in), norms ~ 1, LayerScale ~ 0.5), so the numbers
// flowing through the model look like a trained one's in magnitude.
//
// RandomWeights makes each tensor when it is asked for (so a model built
// from it never holds a whole float32 copy of the weights beside its own);
// random_state_dict makes them all at once. Both give the same values for
// the same config and seed.
#pragma once

#include "checkpoint/state_dict.h"
#include "model/model_config.h"
#include "model/weight_source.h"

#include <cstdint>
#include <string>
#include <unordered_map>

namespace lingbot {

class RandomWeights final : public WeightSource {
 public:
  explicit RandomWeights(const ModelConfig& config, uint64_t seed = 1);
  const std::string& name() const override { return name_; }
  // Holds every tensor of the config by construction.
  void require_loadable(const ModelConfig&, bool) const override {}
  Tensor tensor(const std::string& name) const override;

 private:
  std::string name_ = "random weights";
  uint64_t seed_;
  // Each tensor's position in expected_parameters (it seeds the tensor's
  // generators) and shape.
  std::unordered_map<std::string, std::pair<uint64_t, Shape>> index_;
};

io::StateDict random_state_dict(const ModelConfig& config, uint64_t seed = 1);

}  // namespace lingbot
