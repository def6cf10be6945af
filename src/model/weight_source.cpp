#include "model/weight_source.h"

#include "model/checkpoint_check.h"

namespace lingbot {

void StateDictWeights::require_loadable(const ModelConfig& config, bool allow_extra_tensors) const {
  lingbot::require_loadable(check_checkpoint(state_, config), state_.source(), allow_extra_tensors);
}

}  // namespace lingbot
