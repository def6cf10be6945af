// 2-D convolutions on the CPU through oneDNN's convolution primitives (the
// DPT head's), which run direct AVX-512 / AVX2 kernels on blocked layouts
// (issue 19's profile had them at 155-185 GFLOP/s on the DPT shapes, where
// the im2col + GEMM they replace ran at 41-128).
//
// A primitive is made once per shape and kept with a buffer for the weights
// in the layout it wants (reordered into it on each call); the NCHW
// activations are reordered in and out through two scratch buffers that grow
// and are kept, so a call after the first allocates and zero-fills nothing.
// Bias is applied inside the primitive. Call from serial code (oneDNN
// threads through OpenMP).
#pragma once

#include <cstdint>
#include <memory>

namespace lingbot::cpu {

struct ConvShape {
  int64_t n, c_in, h, w;  // input: [n][c_in][h][w], or [n][h][w][c_in] channels last
  int64_t c_out, kernel;  // weights [c_out][c_in][kernel][kernel], or [c_out][kernel][kernel][c_in]
  int stride, pad;        // the same in both directions
  bool channels_last = false;  // NHWC activations and OHWI weights (else NCHW and OIHW)
  int64_t out_h() const { return (h + 2 * pad - kernel) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - kernel) / stride + 1; }
};

class OnednnConvolutions {
 public:
  // bf16_operands: the input and the weights are rounded to bfloat16 on
  // their way into the primitive's layouts (float32 sums and output): the
  // bf16 mode's convolutions on AMX CPUs. Otherwise float32 throughout.
  explicit OnednnConvolutions(bool bf16_operands = false);
  ~OnednnConvolutions();
  OnednnConvolutions(const OnednnConvolutions&) = delete;
  OnednnConvolutions& operator=(const OnednnConvolutions&) = delete;

  // out[n][c_out][out_h][out_w] = conv(x, w) + bias (bias may be null);
  // x, w and out in the shape's layouts, out apart from x.
  void run(const ConvShape& shape, const float* x, const float* w, const float* bias, float* out);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace lingbot::cpu
