// Launchers of the backend's own CUDA kernels (everything that is not a
// cuBLASLt matrix product or a cuDNN convolution).
//
// Pointers are device pointers, element types are DType values; the backend
// has already checked shapes, devices and dtypes (cuda_backend.cu), the
// launchers only check the dtypes their kernels were compiled for. Every
// launcher enqueues on `stream` and returns at once; none synchronises.
// Shapes are row-major, written [rows, cols]; images and maps are NCHW.
#pragma once

#include "core/dtype.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lingbot::cuda::kernels {

// ---- elementwise (elementwise.cu) -----------------------------------------

// data[i] = value, i < n. float32, bfloat16 or float16.
void fill(void* data, DType dtype, int64_t n, float value, cudaStream_t stream);
// dst[i] = src[i] converted (round to nearest even), i < n; float32/bfloat16/float16 each way.
void convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n, cudaStream_t stream);

enum class Unary { Relu, Silu, Gelu };  // Gelu: the exact erf form, as nn.GELU()
// out[i] = op(x[i]); out may be x.
void unary(const void* x, void* out, DType dtype, int64_t n, Unary op, cudaStream_t stream);
// out[i] = a[i] + b[i]; out may be a or b.
void add(const void* a, const void* b, void* out, DType dtype, int64_t n, cudaStream_t stream);
// x[i] += y[i % m], i < n (m divides n).
void add_broadcast(void* x, DType x_type, int64_t n, const void* y, DType y_type, int64_t m, cudaStream_t stream);
// Per row r < rows, column c < cols, with [shift | scale | gate] = mod[r, 3 * cols]:
//   out[r, c] = gate * (xn[r, c] * (1 + scale) + shift) + residual[r, c]
void adaln_modulate(const void* xn, const void* mod, const void* residual, void* out, DType dtype, int64_t rows,
                    int64_t cols, cudaStream_t stream);
// residual[r, c] = residual[r, c] + gamma[c] * y[r, c]   (y float32 [rows, cols]; gamma [cols] or null = 1)
void residual_update(void* residual, DType dtype, const float* y, const float* gamma, int64_t rows, int64_t cols,
                     cudaStream_t stream);
// x[b, c, p] += bias[c] for x [batches, channels, plane] float32.
void add_channel_bias(float* x, const float* bias, int64_t batches, int64_t channels, int64_t plane,
                      cudaStream_t stream);

// ---- float32 products with few rows (gemv.cu) ------------------------------

// out[r, c] = sum_k x[r, k] w[c, k] + bias[c] for r < rows <= kGemvMaxRows,
// c < m: x [rows, k], w [m, k], out [rows, m], bias [m] or null; float32
// accumulation. For the camera head's one-token layers, which only stream
// their weights.
constexpr int64_t kGemvMaxRows = 8;
void gemv_f32(const float* x, const float* w, const float* bias, float* out, int64_t rows, int64_t k, int64_t m,
              cudaStream_t stream);
// The same with w in bfloat16 (uint16_t bits, widened exactly in float32):
// a matrix kept in bf16 for memory (camera_head_weights bf16). Any number of
// rows, kGemvMaxRows per pass over the weights.
void gemv_bf16_weights(const float* x, const void* w_bf16, const float* bias, float* out, int64_t rows, int64_t k,
                       int64_t m, cudaStream_t stream);

// ---- data movement (copy.cu) and image ops (image.cu) ----------------------

// `height` rows of `width_bytes` bytes: dst + r * dst_pitch <- src + r * src_pitch
// (pitches in bytes, may be 0 to broadcast one source row). Moves 16, 8, 4, 2 or
// 1 bytes at a time, the widest unit that every address and length allows.
void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes, int64_t height,
             cudaStream_t stream);
// maps[b, c, p] = tokens[b, p, c] for tokens [batches, plane, channels].
void tokens_to_nchw(const void* tokens, void* maps, DType dtype, int64_t batches, int64_t plane, int64_t channels,
                    cudaStream_t stream);
// images [B, 3, H, W] float32 -> patches [B * (H/p) * (W/p), 3 * p * p] of `patches_type`:
// patches[(b, py, px), (c, dy, dx)] = (images[b, c, py*p + dy, px*p + dx] - mean[c]) / stddev[c].
void patchify(const float* images, int64_t batches, int64_t height, int64_t width, int patch, const float mean[3],
              const float stddev[3], void* patches, DType patches_type, cudaStream_t stream);
// ConvTranspose2d with kernel == stride k, after its matrix product:
//   out[b, co, iy*k + ky, ix*k + kx] = y[(co, ky, kx), iy * w + ix] + bias[co]
// y float32 [cout * k * k, h * w] for one batch b; out float32 [batches, cout, h*k, w*k]; bias may be null.
void scatter_transposed_conv(const float* y, const float* bias, float* out, int64_t batch, int64_t cout, int64_t h,
                             int64_t w, int k, cudaStream_t stream);
// A term along one axis per channel (Backend::resize_bilinear_add_axes):
// channel c = plane % channels adds by_col[c, ox] for c < col_channels,
// else by_row[c - col_channels, oy]. channels == 0: none.
struct AxisTerm {
  const float* by_col = nullptr;
  const float* by_row = nullptr;
  int64_t col_channels = 0;
  int64_t channels = 0;
};
// Bilinear resize, align_corners=True, float coordinates exactly as backend/cpu/cpu_image_ops.cpp:
// x [planes, ih, iw] -> out [planes, oh, ow], float32; plus add[plane % add_planes] when add is not null,
// or the axis term.
void resize_bilinear(const float* x, const float* add, int64_t add_planes, float* out, int64_t planes, int64_t ih,
                     int64_t iw, int64_t oh, int64_t ow, cudaStream_t stream, const AxisTerm& axes = {});
// Channels last ([batches, h, w, channels]): maps of the dtype `maps`
// (float32 or bfloat16), sums in float32, bias and the axis term float32.
// out[p, c] = act(out[p, c] + bias[c] + residual[p, c]) over [pixels, channels]
// (a convolution's epilogue); bias, residual may be null, relu_out the act.
void conv_epilogue_nhwc(void* out, DType maps, const float* bias, const void* residual, bool relu_out,
                        int64_t pixels, int64_t channels, cudaStream_t stream);
// out[b, iy*k + ky, ix*k + kx, co] = y[(b, iy, ix), (co, ky, kx)] + bias[co]:
// y float32 [batches * h * w, cout * k * k]; bias may be null.
void scatter_transposed_conv_nhwc(const float* y, const float* bias, void* out, DType maps, int64_t batches,
                                  int64_t cout, int64_t h, int64_t w, int k, cudaStream_t stream);
// resize_bilinear on x [batches, ih, iw, channels] -> out [batches, oh, ow,
// channels]; add (maps' dtype): add_maps whole [oh, ow, channels] maps
// repeating over the batches, or the axis term (its channels field set), or
// neither.
void resize_bilinear_nhwc(const void* x, const void* add, int64_t add_maps, void* out, DType maps, int64_t batches,
                          int64_t channels, int64_t ih, int64_t iw, int64_t oh, int64_t ow, cudaStream_t stream,
                          const AxisTerm& axes = {});

// ---- normalisation (norm.cu) ----------------------------------------------

// out[r, :] = LayerNorm(x[r, :]) over `cols`, statistics in float32 (two passes:
// mean, then the mean of squared deviations); w, b float32 [cols] or null.
// x and out float32 or bfloat16, each its own; out may be x when the types match.
void layer_norm(const void* x, DType x_type, void* out, DType out_type, const float* w, const float* b, int64_t rows,
                int64_t cols, float eps, cudaStream_t stream);

// ---- attention input preparation (qkv_prepare.cu) --------------------------

// qkv [tokens, 3 * C] (q | k | v, C = heads * head_dim) -> q, k, v [tokens, C], with
// optional per-head LayerNorm of q and k and then optional RoPE (see RopeTable in
// backend/backend.h; token t uses table row t % rope_rows).
struct SplitQkv {
  const void* qkv = nullptr;
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::F32;  // of qkv, q, k and v
  int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  bool norm = false;  // per-head LayerNorm of q and k
  const float* q_weight = nullptr;  // [head_dim] or null, each of the four
  const float* q_bias = nullptr;
  const float* k_weight = nullptr;
  const float* k_bias = nullptr;
  float eps = 1e-5f;
  enum class Rope { None, HalfSplit, Interleaved } rope = Rope::None;
  const float* cos = nullptr;  // [rope_rows, head_dim / 2]
  const float* sin = nullptr;
  int64_t rope_rows = 0;
};
// Largest C = heads * head_dim split_qkv handles with normalisation or RoPE
// (q and k of one token are staged in 48 KB of shared memory).
constexpr int kSplitQkvMaxChannels = 6144;
void split_qkv(const SplitQkv& args, cudaStream_t stream);

}  // namespace lingbot::cuda::kernels
