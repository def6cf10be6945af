// 2-D convolutions of the DPT head through cuDNN (float32, NCHW or NHWC;
// bfloat16 NHWC with float32 sums).
//
// Channels last (NHWC maps, KRSC weights) is the layout cuDNN's tensor-core
// kernels read and write natively; NCHW makes it transpose the input and
// the output of each convolution in kernels of their own.
//
// Descriptors and the algorithm are chosen once per shape with cuDNN's
// heuristic (cudnnGetConvolutionForwardAlgorithm_v7: no trial runs, so the
// first frame stays fast and nothing is allocated for benchmarking) and
// cached; the workspace is one buffer grown to the largest need. TF32 (the
// PyTorch default for cuDNN convolutions) is allowed or not per backend:
// CUDNN_DEFAULT_MATH or CUDNN_FMA_MATH on the descriptor. Conversions to
// float16 (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) are never used.
// The cuDNN handle is created on the first convolution: it loads large
// libraries, which a run without a depth head never needs.
#pragma once

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
  Conv(cudaStream_t stream, bool allow_tf32);
  ~Conv();
  Conv(const Conv&) = delete;
  Conv& operator=(const Conv&) = delete;

  // y[n, cout, oh, ow] = sum over (ci, ky, kx) of w[cout, ci, ky, kx] *
  // x[n, ci, oy*stride - pad + ky, ox*stride - pad + kx] (zero outside), no
  // bias; each tensor in the shape's layout and dtype.
  void forward(const ConvShape& shape, const void* x, const void* w, void* y);
  size_t plan_count() const;
  // Frees the workspace (grown to the largest convolution so far, e.g. a
  // multi-frame batch's); the next convolution that needs one allocates it.
  void release_workspace();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lingbot::cuda
