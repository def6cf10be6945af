// Reading NumPy .npz archives (uncompressed or deflated members, little-
// endian, C-order arrays of the float, integer and bool types we use).
#pragma once

#include "core/tensor.h"

#include <map>
#include <string>
#include <vector>

namespace lingbot::io {

// Every array of the archive by name (without ".npy"), as CPU tensors.
// A NumPy unicode array '<Un' of shape [...] comes back as int32 code points
// [..., n], zero-padded (decode_strings() turns it into UTF-8).
std::map<std::string, Tensor> read_npz(const std::string& path);

// A unicode array from read_npz() ([S, n] int32 code points) as UTF-8 strings.
std::vector<std::string> decode_strings(const Tensor& code_points, const std::string& name);

// One .npy file's bytes -> tensor; `name` is used in error messages.
Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name);

}  // namespace lingbot::io
