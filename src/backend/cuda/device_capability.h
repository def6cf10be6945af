// Which GPUs the CUDA backend runs on: compute capability 8.0 (Ampere) or
// newer, for bfloat16 tensor cores (mma.sync) and cp.async, which every
// tensor-core kernel here uses. Hopper (9.x) additionally runs the wgmma
// attention kernel; other GPUs run the sm_80 kernels, and GPUs newer than
// the build's targets JIT-compile them from the compute_80 PTX that the
// module embeds (CMakeLists.txt, tools/check_cuda_ptx.sh).
//
// A header free of CUDA's: the rule is plain arithmetic, tested without a GPU.
#pragma once

#include <string>
#include <string_view>

namespace lingbot::cuda {

inline constexpr int kMinimumComputeMajor = 8;
inline constexpr int kMinimumComputeMinor = 0;

// "" when a GPU of this compute capability can run the backend, else the
// one-line reason, naming the GPU, its capability and the minimum.
std::string unsupported_device_reason(std::string_view gpu_name, int major, int minor);

}  // namespace lingbot::cuda
