// When a CPU loop is worth splitting across threads.
//
// Waking the OpenMP team costs microseconds, far more than small loops take
// (and much more on a loaded machine), so loops over fewer elements than
// this run on the calling thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace lingbot::cpu {

constexpr int64_t kParallelMinElements = 1 << 15;
inline bool parallel_worth(int64_t elements) { return elements >= kParallelMinElements; }

// memcpy split across the OpenMP team in 1 MiB pieces: the KV cache's row
// copies (4 MiB per frame and block at 378 x 504) and the page faults of
// freshly reserved memory they take are otherwise serial. Call from serial
// code; dst and src must not overlap.
inline void parallel_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPiece = size_t{1} << 20;
  const auto pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (int64_t i = 0; i < pieces; ++i) {
    const size_t offset = static_cast<size_t>(i) * kPiece;
    std::memcpy(static_cast<char*>(dst) + offset, static_cast<const char*>(src) + offset,
                std::min(kPiece, bytes - offset));
  }
}

// Touches one float per 4 KiB page of p[0, n) across the team, so that the
// kernel's page faults on newly reserved memory are taken in parallel now
// rather than one by one in a later serial pass.
inline void parallel_first_touch(float* p, int64_t n) {
  constexpr int64_t kPageFloats = 4096 / sizeof(float);
#pragma omp parallel for schedule(static) if (n > 256 * kPageFloats)
  for (int64_t i = 0; i < n; i += kPageFloats) p[i] = 0.0f;
}

}  // namespace lingbot::cpu
