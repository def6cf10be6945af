// When a CPU loop is worth splitting across threads.
//
// Waking the OpenMP team costs microseconds, far more than small loops take
// (and much more on a loaded machine), so loops over fewer elements than
// this run on the calling thread.
#pragma once

#include <cstdint>

namespace lingbot::cpu {

constexpr int64_t kParallelMinElements = 1 << 15;
inline bool parallel_worth(int64_t elements) { return elements >= kParallelMinElements; }

}  // namespace lingbot::cpu
