// Bulk conversions between float32 and bfloat16 on the CPU (the bf16 mode's
// activations at the edges of its matrix products). Round to nearest even,
// NaN kept a quiet NaN, as core/half.h's scalar conversions (and PyTorch's
// .to(torch.bfloat16)); the loops are branch-free so that they vectorise.
// Parallel over the thread team for large arrays: call from serial code.
#pragma once

#include "backend/cpu/parallel.h"

#include <cstdint>
#include <cstring>

namespace lingbot::cpu {

inline void bf16_from_f32(const float* src, uint16_t* dst, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &src[i], 4);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    dst[i] = static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded);
  }
}

inline void f32_from_bf16(const uint16_t* src, float* dst, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&dst[i], &bits, 4);
  }
}

// The same, serial: for one row inside a parallel loop.
inline void bf16_from_f32_row(const float* src, uint16_t* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &src[i], 4);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    dst[i] = static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded);
  }
}

inline void f32_from_bf16_row(const uint16_t* src, float* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&dst[i], &bits, 4);
  }
}

}  // namespace lingbot::cpu
