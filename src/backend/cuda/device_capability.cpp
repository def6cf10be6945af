#include "backend/cuda/device_capability.h"

#include <fmt/format.h>

namespace lingbot::cuda {

std::string unsupported_device_reason(std::string_view gpu_name, int major, int minor) {
  if (major > kMinimumComputeMajor || (major == kMinimumComputeMajor && minor >= kMinimumComputeMinor)) return "";
  return fmt::format("{} is sm_{}{} (compute capability {}.{}); the CUDA backend needs sm_{}{} (Ampere) or newer",
                     gpu_name, major, minor, major, minor, kMinimumComputeMajor, kMinimumComputeMinor);
}

}  // namespace lingbot::cuda
