// How the cuBLASLt matrix products choose each problem's algorithm
// (gemm.h), in a header free of CUDA's for the backend options.
#pragma once

namespace lingbot::cuda {

// Heuristic: cuBLASLt's first candidate, no trial runs. Measured: the
// heuristic's first candidates timed on the problem's first call, the
// fastest kept where it beats the first by at least 5%.
enum class GemmAlgorithm { Heuristic, Measured };

}  // namespace lingbot::cuda
