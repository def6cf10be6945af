// Where DeviceWeights reads the model's parameters from, one tensor at a
// time. A source that makes or maps each tensor only when it is asked for
// lets the weights be uploaded without a whole second copy of the model
// (a float32 state dict) existing beside the backend's converted one.
#pragma once

#include "checkpoint/state_dict.h"
#include "model/model_config.h"

#include <string>

namespace lingbot {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Names the source in errors: a file path, or "random weights".
  virtual const std::string& name() const = 0;
  // Throws a one-line summary when the model cannot run on this source
  // (missing or mis-shaped tensors, extra ones unless allowed). Called once,
  // before any tensor is read.
  virtual void require_loadable(const ModelConfig& config, bool allow_extra_tensors) const = 0;
  // The parameter `name` of the config, in the source's dtype. The result
  // may share memory with the source: it is never written to.
  virtual Tensor tensor(const std::string& name) const = 0;
  // DeviceWeights keeps no reference to the memory of `name` any more (it
  // stores a converted copy): a source may give that memory back.
  virtual void done_with(const std::string& /*name*/) const {}
};

// A state dict (a checkpoint read from disk, or built in memory). Once a
// tensor has been converted, the pages of the mapped file that held it are
// given back (StateDict::release_pages).
class StateDictWeights final : public WeightSource {
 public:
  explicit StateDictWeights(const io::StateDict& state) : state_(state) {}
  const std::string& name() const override { return state_.source(); }
  void require_loadable(const ModelConfig& config, bool allow_extra_tensors) const override;
  Tensor tensor(const std::string& name) const override { return state_.at(name); }
  void done_with(const std::string& name) const override { state_.release_pages(name); }

 private:
  const io::StateDict& state_;
};

}  // namespace lingbot
