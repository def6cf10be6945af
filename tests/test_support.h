// Helpers shared by every test binary.
#pragma once

#include "core/tensor.h"

#include <string>

namespace lingbot::test {

std::string fixture_path(const std::string& name);      // tests/fixtures/<name>

// ||a - b|| / ||b|| over all elements (float32 CPU tensors of equal numel),
// accumulated in double: the per-tensor parity measure of the project.
double relative_error(const Tensor& a, const Tensor& b);
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace lingbot::test
