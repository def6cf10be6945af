// Loading a checkpoint's state dict, whatever its format.
//
//   StateDict sd = lingbot::io::load_state_dict("lingbot-map-long.pt");
//   const Tensor& w = sd.at("aggregator.patch_embed.proj.weight");
//
// The format is recognised from the first bytes, not the file name:
//   "PK\3\4"                      a torch.save zip archive (checkpoint/torch_checkpoint.h)
//   u64 length, then '{'          safetensors (checkpoint/safetensors.h)
//   pickle of torch's magic       legacy torch.save: an error saying how to re-save
// The file is memory-mapped and tensors point into the mapping, so loading
// a multi-gigabyte checkpoint costs little RAM up front (see state_dict.h:
// those tensors are read-only).
#pragma once

#include "checkpoint/state_dict.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace lingbot::io {

enum class CheckpointFormat { Torch, Safetensors, LegacyTorch, Unknown };

// Sniffs the format from the first bytes.
CheckpointFormat detect_checkpoint_format(std::span<const uint8_t> bytes);

// Maps `path` and reads its state dict. Throws a one-line lingbot::Error
// naming the file and the problem.
StateDict load_state_dict(const std::string& path);

// The same from bytes in memory (fuzzing, tests, embedded data).
// `display_name` stands for the path in messages; `owner` keeps `bytes`
// alive for as long as the returned tensors (may be null if the caller
// guarantees that).
StateDict load_state_dict(std::span<const uint8_t> bytes, const std::string& display_name,
                          std::shared_ptr<void> owner);

}  // namespace lingbot::io
