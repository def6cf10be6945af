// 2-D convolutions of the DPT head through cuDNN (float32, NCHW or NHWC;
// bfloat16 NHWC with float32 sums).
//
// Channels last (NHWC maps, KRSC weights) is the layout cuDNN's tensor-core
// kernels read and write natively; NCHW makes it transpose the input and
// the output of each convolution in kernels of their own.
//
// Descriptors and the algorithm are chosen once per shape and cached; the
// workspace is one buffer grown to the largest need. The algorithm comes
// from cuDNN's heuristic (cudnnGetConvolutionForwardAlgorithm_v7: no trial
// runs) or, with ConvAlgorithm::Measured, from timing every algorithm on the
// first call's own tensors (cudnnFindConvolutionForwardAlgorithmEx, as
// PyTorch's cudnn.benchmark); a shape first met while a CUDA graph is being
// captured falls back to the heuristic, since trial runs cannot be captured.
// TF32 (the PyTorch default for cuDNN convolutions) is allowed or not per
// backend: CUDNN_DEFAULT_MATH or CUDNN_FMA_MATH on a float32 descriptor.
// bfloat16 descriptors ask for CUDNN_TENSOR_OP_MATH, since the default math
// type leaves the choice of tensor cores to cuDNN. Conversions to float16
// (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) are never used.
// The cuDNN handle is created on the first convolution: it loads large
// libraries, which a run without a depth head never needs.
#pragma once

#include "backend/cuda/conv_algorithm.h"

#include <cuda_runtime_api.h>

#include <compare>
#include <cstdint>
#include <memory>
#include <string>

namespace lingbot::cuda {

struct ConvShape {
  int64_t batches = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel = 0, stride = 1, pad = 0;
  bool channels_last = false;  // x [n, h, w, c], w [k, r, s, c], y [n, oh, ow, k]; else NCHW and KCRS
  bool bf16 = false;           // x, w and y bfloat16 (sums in float32); else float32
  int64_t out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
  int64_t out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
  std::string describe() const;
  auto operator<=>(const ConvShape&) const = default;
};

class Conv {
 public:
  Conv(cudaStream_t stream, bool allow_tf32, ConvAlgorithm choice = ConvAlgorithm::Heuristic);
  ~Conv();
  Conv(const Conv&) = delete;
  Conv& operator=(const Conv&) = delete;

  // y[n, cout, oh, ow] = sum over (ci, ky, kx) of w[cout, ci, ky, kx] *
  // x[n, ci, oy*stride - pad + ky, ox*stride - pad + kx] (zero outside), no
  // bias; each tensor in the shape's layout and dtype.
  void forward(const ConvShape& shape, const void* x, const void* w, void* y);
  size_t plan_count() const;
  // The algorithm, math type and workspace of a cached shape and how they
  // were chosen (for benchmarks and bug reports); empty if there is no plan.
  std::string describe_plan(const ConvShape& shape) const;
  // Frees the workspace (grown to the largest convolution so far, e.g. a
  // multi-frame batch's); the next convolution that needs one allocates it.
  void release_workspace();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lingbot::cuda
