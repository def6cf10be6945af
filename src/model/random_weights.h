// Random weights for a config: the official architecture without a
// download, for benchmarks and smoke tests. Scales keep activations O(1)
// (matrices ~ N(0, 1/fan_in), norms ~ 1, LayerScale ~ 0.5), so the numbers
// flowing through the model look like a trained one's in magnitude.
#pragma once

#include "checkpoint/state_dict.h"
#include "model/model_config.h"

#include <cstdint>

namespace lingbot {

io::StateDict random_state_dict(const ModelConfig& config, uint64_t seed = 1);

}  // namespace lingbot
