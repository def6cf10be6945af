// The attention kernel choice, in a header free of fmt (the CUDA sources
// include it; see attention.h for what each kernel does).
#pragma once

#include <cstdint>

namespace lingbot::cuda {

// WgmmaWs runs on sm_90a only (attention.h says which Auto picks).
enum class AttentionKernel : uint8_t { Auto, Naive, Warp, Mma, WgmmaWs };

// The naive and warp kernels keep head vectors in fixed arrays of this size.
constexpr int kAttentionMaxHeadDim = 256;

}  // namespace lingbot::cuda
