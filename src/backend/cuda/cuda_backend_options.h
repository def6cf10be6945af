// The CUDA backend's settings, in a header free of CUDA's: the code that
// loads the backend as a module (backend/cuda_module.h) and the option
// table (api/option_table.h) build them without the CUDA toolkit.
#pragma once

#include "backend/cuda/attention/attention_types.h"
#include "backend/cuda/conv_algorithm.h"
#include "backend/cuda/gemm_algorithm.h"

#include <lingbot/options.h>

namespace lingbot::cuda {

// The defaults are the engine's (include/lingbot/options.h: cuda_sync,
// lane_priority, attention_kernel); the library reads no environment
// variables (lingbot-map maps its LINGBOT_CUDA_* ones onto these).
struct CudaBackendOptions {
  int device = 0;
  // TF32 tensor cores for the float32 matrix products and convolutions (the
  // heads). Off: full float32 (CUBLAS_COMPUTE_32F, CUDNN_FMA_MATH).
  bool allow_tf32 = true;
  // Scheduling priority of the two lanes' streams (and of the kernels a
  // graph captured from them): Equal, or the main lane's work first, with
  // the side branch filling what the main work leaves idle.
  enum class LanePriority { Equal, Main };
  LanePriority lane_priority = LanePriority::Equal;
  // Wait for the stream after every op and report the first failing op by
  // name (debugging; defeats asynchrony).
  bool sync_after_each_op = option_defaults::cuda_sync;
  // What the automatic attention kernel choice picks on Hopper where a
  // tensor-core kernel applies: Auto (WgmmaWs), Mma or WgmmaWs
  // (attention/attention.h).
  AttentionKernel attention_kernel = AttentionKernel::Auto;
  // How each convolution shape's cuDNN algorithm is chosen (conv.h).
  ConvAlgorithm conv_algorithm = ConvAlgorithm::Heuristic;
  // How each matrix product's cuBLASLt algorithm is chosen (gemm.h).
  GemmAlgorithm gemm_algorithm = GemmAlgorithm::Heuristic;
  // The backend's part of memory_profile low: each lane's cuBLASLt
  // workspace is 4 MiB instead of 32 (its heuristic passes over algorithms
  // that need more). cuDNN's workspace keeps its size: its TF32 convolutions
  // use it to transpose the DPT head's NCHW maps, and without it they fall
  // back to slower kernels.
  bool low_memory = false;
  // The CUDA context's per-thread stack limit, lowered to this by every
  // backend (never raised). The driver reserves local memory for that stack
  // for every thread the GPU can hold at once, about 270 MB at its default
  // of 1 KiB on an H100 or H200, and raises the limit itself at the launch
  // of a kernel that needs more; our kernels and the libraries' need less.
  static constexpr size_t kThreadStackBytes = 256;
};

}  // namespace lingbot::cuda
