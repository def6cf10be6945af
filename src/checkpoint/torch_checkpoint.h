// Reading the state dict out of a torch.save archive, without Python.
//
// What torch.save (PyTorch >= 1.6, "zipfile serialization") writes, all
// members stored uncompressed under one folder whose name ("prefix") is the
// file's base name, or "archive" when saving to a buffer:
//   <prefix>/data.pkl         the object graph, pickled (protocol 2)
//   <prefix>/byteorder        "little" or "big" (absent in files before 1.12)
//   <prefix>/data/<key>       one member per storage, raw bytes, 64-aligned
//   <prefix>/version, .format_version, .storage_alignment, .data/...
// In the pickle a tensor is a call
//   torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
//                                   requires_grad, backward_hooks[, metadata])
// whose storage is a persistent id
//   ('storage', torch.FloatStorage, '<key>', 'cpu' | 'cuda:0', numel)
// and a state dict is a collections.OrderedDict of name -> tensor.
//
// The reader interprets exactly those records; every other global is inert
// (see checkpoint/pickle.h). The state dict is the top-level dict, or the dict under
// its "model" or "state_dict" key (the first of these holding tensors,
// "model" first, as upstream demo.py's ckpt.get("model", ckpt)). Its
// non-tensor entries are skipped and listed in StateDict::skipped().
#pragma once

#include "checkpoint/state_dict.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace lingbot::io {

// Reads a torch.save zip archive held in `bytes`. Tensors point into
// `bytes` where possible; `owner` (may be null if the caller keeps `bytes`
// alive longer than the result) is what keeps them valid. `display_name`
// starts every error message.
StateDict read_torch_checkpoint(std::span<const uint8_t> bytes, const std::string& display_name,
                                std::shared_ptr<void> owner);

// True when `bytes` start like a legacy (pre-1.6, non-zip) torch.save file:
// a pickle of torch's magic number 0x1950a86a20f9469cfc6c.
bool is_legacy_torch_file(std::span<const uint8_t> bytes);

// The one-line message for such a file: what it is and how to re-save it.
std::string legacy_torch_message(const std::string& display_name);

}  // namespace lingbot::io
