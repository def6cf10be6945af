// Helpers shared by every test binary.
#pragma once

#include "core/tensor.h"

#include <string>

namespace lingbot::test {

std::string fixture_path(const std::string& name);      // tests/fixtures/<name>

// A shell command line's exit status and its stdout and stderr together
// (status -1 if it did not exit normally): how the CLI and example tests run
// the programs, as a user would.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_shell(const std::string& command);

// ||a - b|| / ||b|| over all elements (float32 CPU tensors of equal numel),
// accumulated in double: the per-tensor parity measure of the project.
double relative_error(const Tensor& a, const Tensor& b);
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace lingbot::test
