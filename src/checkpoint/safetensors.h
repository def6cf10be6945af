// Reading .safetensors files.
//
// Layout (github.com/huggingface/safetensors):
//   u64 little-endian N | N bytes of JSON header | data buffer
// The header maps each tensor name to {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]} (offsets relative to the data buffer), plus
// an optional "__metadata__" object of string -> string.
//
// Validated like the reference implementation: header length sane
// (<= 100 MB) and inside the file, JSON well formed with exactly those
// fields, dtype known, shape x element size == end - begin, offsets inside
// the buffer, tensors neither overlapping nor leaving gaps, names unique.
// Tensors are zero-copy views of the buffer (copied only if misaligned).
#pragma once

#include "checkpoint/state_dict.h"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

namespace lingbot::io {

// Reads a safetensors file held in `bytes`; see read_torch_checkpoint for
// `display_name` and `owner`.
StateDict read_safetensors(std::span<const uint8_t> bytes, const std::string& display_name,
                           std::shared_ptr<void> owner);

// The "__metadata__" object of the header (empty if absent).
std::map<std::string, std::string> read_safetensors_metadata(std::span<const uint8_t> bytes,
                                                             const std::string& display_name);

// True when `bytes` start like a safetensors file: 8-byte length, then '{'.
bool looks_like_safetensors(std::span<const uint8_t> bytes);

}  // namespace lingbot::io
