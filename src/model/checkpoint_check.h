// Does a checkpoint fit a model config? Missing, unexpected and mis-shaped
// tensors, by name — what `lingbot-map inspect` prints and what loading a
// model refuses to continue past.
#pragma once

#include "checkpoint/state_dict.h"
#include "model/model_config.h"

#include <string>
#include <vector>

namespace lingbot {

struct CheckpointCheck {
  struct Mismatch {
    std::string name;
    Shape expected;
    Shape found;
  };
  std::vector<std::string> missing;     // the config needs them, the file lacks them
  std::vector<std::string> unexpected;  // in the file, unknown to the config
  std::vector<Mismatch> mis_shaped;
  std::vector<std::string> non_float;   // present but not a float dtype
  int64_t expected_count = 0;
  int64_t parameter_count = 0;          // elements of the expected tensors found

  // The model can run on it (extra tensors are ignored).
  bool ok() const { return missing.empty() && mis_shaped.empty() && non_float.empty(); }
  // It holds exactly the model's tensors: `inspect`'s verdict.
  bool fits() const { return ok() && unexpected.empty(); }
  // One line: "model.pt does not fit the config: 3 missing (a, b, c), 1 mis-shaped (x: expected [2] found [3])".
  std::string summary(const std::string& source, size_t max_names = 5) const;
};

CheckpointCheck check_checkpoint(const io::StateDict& weights, const ModelConfig& config);

// What loading a model accepts: throws the summary when the model cannot run
// on the checkpoint, and refuses tensors the model does not use unless
// `allow_extra_tensors` (--allow-extra-tensors), naming the first few; when
// allowed they are named in a warning. Upstream demo.py loads with
// strict=False, which would accept them silently, but an unknown tensor
// usually means another variant of the model or renamed layers, whose
// results would be wrong without a word. No tensor of the official
// checkpoint is known to be extra (its key set is not recorded in this
// project), so none is accepted silently.
void require_loadable(const CheckpointCheck& check, const std::string& source, bool allow_extra_tensors);

}  // namespace lingbot
