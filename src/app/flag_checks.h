// Validators for numeric flags whose failures read as one plain sentence:
// "--kv-window: must be >= 1, got -1" (CLI11's own PositiveNumber and Range
// print the full range of a double, a 300-digit number).
#pragma once

#include <CLI/CLI.hpp>

namespace lingbot {

CLI::Validator at_least(double min);               // value >= min
CLI::Validator between(double min, double max);    // min <= value <= max

}  // namespace lingbot
