// Reading NumPy .npz archives (uncompressed or deflated members, little-
// endian, C-order arrays of the float, integer and bool types we use).
#pragma once

#include "core/tensor.h"

#include <map>
#include <string>

namespace lingbot::io {

// Every array of the archive by name (without ".npy"), as CPU tensors.
std::map<std::string, Tensor> read_npz(const std::string& path);

// One .npy file's bytes -> tensor; `name` is used in error messages.
Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name);

}  // namespace lingbot::io
