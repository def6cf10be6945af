#include "app/flag_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace lingbot {

namespace {

std::string show(double v) {  // 1 rather than 1.000000
  return v == std::floor(v) && std::fabs(v) < 1e15 ? fmt::format("{}", static_cast<long long>(v))
                                                   : fmt::format("{}", v);
}

CLI::Validator checked(double min, double max, std::string description) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0' || !std::isfinite(v))
          return fmt::format("must be a number, got '{}'", text);
        if (v < min || v > max) {
          if (max == std::numeric_limits<double>::infinity()) return fmt::format("must be >= {}, got {}", show(min), text);
          return fmt::format("must be between {} and {}, got {}", show(min), show(max), text);
        }
        return "";
      },
      std::move(description));
}

}  // namespace

CLI::Validator at_least(double min) {
  return checked(min, std::numeric_limits<double>::infinity(), fmt::format(">= {}", show(min)));
}

CLI::Validator between(double min, double max) {
  return checked(min, max, fmt::format("{} to {}", show(min), show(max)));
}

}  // namespace lingbot
