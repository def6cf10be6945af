// How the cuDNN convolutions choose each shape's algorithm (conv.h), in a
// header free of CUDA's for the backend options.
#pragma once

namespace lingbot::cuda {

// Heuristic: cuDNN's ranking, no trial runs. Measured: every algorithm timed
// once on the shape's first call (as PyTorch's cudnn.benchmark).
enum class ConvAlgorithm { Heuristic, Measured };

}  // namespace lingbot::cuda
