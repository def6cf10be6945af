// The compute backend: the one boundary between the model and a device.
//
// model/ is written once against this interface; backend/cpu and
// backend/cuda implement it. An op knows tensors, shapes and arithmetic, not
// which layer of which network calls it. All tensors passed to an op live on
// the backend's device and are contiguous; outputs are preallocated by the
// caller (see model/workspace.h), so a frame step allocates nothing once
// warmed up — which is what lets the CUDA backend capture it as a graph.
//
// Shapes are written [rows, cols] for 2-D row-major data: a "token matrix"
// is [tokens, channels], images and feature maps are NCHW. A matrix operand
// x[N, K] may be any tensor of N * K elements read as rows of K (the model
// passes [frames, tokens, channels] as one matrix). Activations are float32
// or the backend's compute_dtype() / residual_dtype(); parameter vectors
// (biases, gains, norm weights), RoPE tables, images and NCHW maps are
// float32. An output overlaps no input, except where an op says "may alias"
// (then it is that very tensor).
//
// Where the contracts are checked: backend/op_contracts.h, one check_<op>()
// per op, written once and called first by every backend's op, so every
// backend accepts and refuses the same calls with the same one-line
// messages. A backend then checks only its own limits (CUDA grid sizes, the
// attention kernels' head_dim cap, alignment of fast paths, the CPU's
// float32-only arithmetic).
#pragma once

#include "core/error.h"
#include "core/tensor.h"
#include "kv/kv_cache.h"

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace lingbot {

enum class Activation { None, Gelu, Relu };

// How a feature map [B, C, H, W] is laid out in memory: channels first
// (NCHW, PyTorch's) or channels last (NHWC, [B, H, W, C] in memory: a row of
// tokens is a pixel, and the GPU's convolutions run natively on it).
enum class MapLayout { ChannelsFirst, ChannelsLast };

// What a channels-last convolution does to its sums before they are stored:
//   out = act(conv(x, w) + b + residual)
// residual (same shape as out, float32) may be null.
struct ConvEpilogue {
  Activation act = Activation::None;
  const Tensor* residual = nullptr;
};

// Rotary position embedding applied to each head vector of q and k.
// Row r of cos/sin ([rows, head_dim/2], float32) holds the rotation of token
// r; a token t of the input uses row t % rows, so one frame's table serves
// every frame of a batch. `pairs` says which two elements of a head vector
// one angle rotates:
//   HalfSplit  (upstream's 2D RoPE): the head vector is two halves (y, x),
//              each half of size h rotates element i with i + h/2, i < h/2;
//              angle j < D/4 belongs to the first half, the rest to the second.
//   Interleaved (upstream's 3D RoPE): angle j rotates elements 2j and 2j+1.
struct RopeTable {
  enum class Pairs { HalfSplit, Interleaved };
  Tensor cos;  // [rows, head_dim / 2] on the backend's device
  Tensor sin;
  Pairs pairs = Pairs::HalfSplit;
};

// Optional per-head LayerNorm of q and k (upstream's qk-norm).
struct QkNorm {
  const Tensor* q_weight = nullptr;  // [head_dim]
  const Tensor* q_bias = nullptr;
  const Tensor* k_weight = nullptr;
  const Tensor* k_bias = nullptr;
  float eps = 1e-5f;
};

// Copy of `rows` rows of `cols` elements, repeated over `batches`:
//   dst[(dst_offset + b*dst_batch_stride + r) * cols + c] =
//   src[(src_offset + b*src_batch_stride + r) * cols + c]
// (strides in rows; a zero source stride broadcasts one block to every batch).
struct RowCopy {
  int64_t batches = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t src_offset = 0;
  int64_t src_batch_stride = 0;
  int64_t dst_offset = 0;
  int64_t dst_batch_stride = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "cpu (8 threads, OpenBLAS)", "cuda (NVIDIA H200)"

  // ---- memory -------------------------------------------------------------
  virtual Tensor alloc(const Shape& shape, DType dtype) = 0;  // uninitialised
  // Host tensor (any float dtype) -> new device tensor of `dtype`.
  virtual Tensor upload(const Tensor& host, DType dtype) = 0;
  // A Linear layer's weight [out, in] that only linear() and
  // linear_residual() will read: the backend may keep it in a layout of its
  // own (download() still gives its values back). Otherwise as upload().
  virtual Tensor upload_linear_weight(const Tensor& host, DType dtype) { return upload(host, dtype); }
  // Host -> existing device tensor of the same shape (converting dtype), for
  // a destination written every step: the backend may keep a page-locked
  // staging buffer for it, so the copy is asynchronous and can be recorded
  // into a graph.
  virtual void upload_into(const Tensor& host, Tensor& device) = 0;
  // The same for a destination written once (a scale step's frames and
  // positions), where setting up such a buffer would cost more than the
  // copy. The host tensor may be released as soon as the call returns.
  virtual void upload_once_into(const Tensor& host, Tensor& device) { upload_into(host, device); }
  // Device tensor -> new host float32 tensor.
  virtual Tensor download(const Tensor& device) = 0;
  virtual void fill(Tensor& t, float value) = 0;
  // Device-to-device copy converting the element type (same element count).
  virtual void convert(const Tensor& src, Tensor& dst) = 0;
  virtual void synchronize() = 0;

  // ---- asynchronous read-back ---------------------------------------------
  // Results leave the device while the next frame's work runs:
  // download_async() enqueues a copy into a host tensor from alloc_host()
  // (page-locked where that matters), fence() marks everything enqueued so
  // far, and wait() blocks until a fence has passed. The defaults suit a
  // backend whose ops complete before they return (the CPU).
  virtual Tensor alloc_host(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype); }
  // device -> host, same shape and dtype. The host data is valid once a
  // fence taken after this call has passed.
  virtual void download_async(const Tensor& device, Tensor& host);
  virtual std::shared_ptr<void> fence() { return nullptr; }
  virtual void wait(const std::shared_ptr<void>& fence) {}
  // Device memory in use now, in bytes (0 where not meaningful, e.g. the CPU).
  virtual size_t device_memory_in_use() const { return 0; }
  // Frees the scratch memory a backend keeps from call to call (sized by the
  // largest call so far, e.g. a multi-frame step's); later calls allocate
  // what they need again. Only between ops: nothing in flight may use it.
  virtual void release_scratch() {}
  // The dtype of the transformer stacks' residual stream. float32 on every
  // backend (as under PyTorch autocast): blocks read it through LayerNorm
  // into compute_dtype() matrix products and add their outputs back in float32.
  virtual DType residual_dtype() const { return DType::F32; }
  // The activation dtype of the big transformer stacks on this backend.
  virtual DType compute_dtype() const = 0;

  // ---- CUDA graphs ---------------------------------------------------------
  // The device work of a frame step, recorded once and replayed: between
  // begin_capture() and end_capture() ops are recorded, not run. A backend
  // without graphs keeps these no-ops and the caller runs the ops directly.
  virtual bool supports_graphs() const { return false; }
  virtual void begin_capture() {}
  virtual std::shared_ptr<void> end_capture() { return nullptr; }
  virtual void replay(const std::shared_ptr<void>& graph) {}

  // ---- concurrent branches -------------------------------------------------
  // The ops enqueued between begin_side_branch() and end_side_branch() form a
  // branch: it starts after everything enqueued before it and may run at the
  // same time as the ops enqueued after end_side_branch(), until
  // join_side_branch() makes all later work wait for it. A branch must not
  // write what the concurrent ops read or write; it may append to and
  // attend through a KV cache that the concurrent ops do not use, whose
  // step began (begin_step) before the branch did. Backends that run ops in
  // order keep these no-ops (in-order is a valid schedule).
  virtual void begin_side_branch() {}
  virtual void end_side_branch() {}
  virtual void join_side_branch() {}

  // A KV cache whose storage lives on this device.
  virtual std::unique_ptr<kv::KvCache> make_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                                     const kv::TokenLayout& tokens, int num_blocks) = 0;

  // ---- dense layers -------------------------------------------------------
  // out[N, M] = act(x[N, K] w[M, K]^T + b[M]). b may be null.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& out,
                      Activation act = Activation::None) = 0;
  // residual[N, M] += gamma[M] * (x[N, K] w[M, K]^T + b[M]). gamma may be null (= 1).
  // The transformer's "x = x + ls(proj(attn))" in one call.
  virtual void linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                               Tensor& residual) = 0;
  // out[N, C] = LayerNorm over C; w and b [C] may be null (no affine). out
  // may be x (in place) when both have one dtype.
  virtual void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& out) = 0;

  // ---- attention ----------------------------------------------------------
  // qkv[N, 3 * H * D] (q | k | v, heads inside each) -> q, k, v [N, H * D],
  // with optional per-head LayerNorm of q and k and then optional RoPE.
  virtual void split_qkv(const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm,
                         const RopeTable* rope, Tensor& q, Tensor& k, Tensor& v) = 0;
  // Self-attention inside each of `groups` equal groups of tokens:
  // q, k, v, out [groups * n, H * D]; softmax scale 1/sqrt(D).
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads,
                         int head_dim, Tensor& out) = 0;

  // ---- element-wise and data movement -------------------------------------
  virtual void copy_rows(const Tensor& src, Tensor& dst, const RowCopy& copy) = 0;
  // out[N, Ca + Cb] = [a | b] per row.
  virtual void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // x += y, where y's element count divides x's (y repeats over x's leading dims).
  virtual void add_broadcast(Tensor& x, const Tensor& y) = 0;
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;  // may alias
  virtual void relu(const Tensor& x, Tensor& out) = 0;                  // may alias
  virtual void silu(const Tensor& x, Tensor& out) = 0;                  // may alias
  // DiT-style adaptive LayerNorm modulation, per row:
  //   out = gate * (xn * (1 + scale) + shift) + residual, with [shift|scale|gate] = mod[N, 3C].
  virtual void adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual, Tensor& out) = 0;

  // ---- images and feature maps (NCHW) -------------------------------------
  // images[B, 3, H, W] in [0, 1] -> patches[B * (H/p) * (W/p), 3 * p * p]:
  // each row one patch, normalised per channel ((x - mean) / std), ordered
  // (channel, dy, dx) like a Conv2d weight [out, 3, p, p].
  virtual void patchify(const Tensor& images, int patch, const std::array<float, 3>& mean,
                        const std::array<float, 3>& std, Tensor& patches) = 0;
  // tokens[B, h * w, C] -> maps[B, C, h, w].
  virtual void tokens_to_nchw(const Tensor& tokens, int h, int w, Tensor& maps) = 0;
  // Conv2d, square kernel: x[B, Cin, H, W], w[Cout, Cin, k, k], b[Cout] or null.
  virtual void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out) = 0;
  // ConvTranspose2d with kernel == stride (no overlap): w[Cin, Cout, k, k].
  virtual void conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) = 0;
  // Bilinear resize with align_corners=True to out's H and W. With `add`,
  // out = resize(x) + add in the same pass, add repeating over out's leading
  // dims as in add_broadcast (the DPT head's position embedding).
  virtual void resize_bilinear(const Tensor& x, const Tensor* add, Tensor& out) = 0;
  void resize_bilinear(const Tensor& x, Tensor& out) { resize_bilinear(x, nullptr, out); }
  // The same with a term that varies along one axis per channel, given as
  // two small tables instead of a whole [C, H, W] tensor:
  //   out[n, c, y, x] = resize(x)[n, c, y, x] + (c < Cc ? by_col[c, x] : by_row[c - Cc, y])
  // by_col [Cc, W], by_row [Cr, H], Cc + Cr = C, float32. The DPT head's
  // full-resolution position embedding is such a term (sin/cos of x in its
  // first half of channels, of y in the second): 0.4 MB instead of 97 MB at
  // 378 x 504.
  virtual void resize_bilinear_add_axes(const Tensor& x, const Tensor& by_col, const Tensor& by_row, Tensor& out) = 0;

  // ---- feature maps, channels last (NHWC) ---------------------------------
  // The same operations on maps held as [B, H, W, C] (MapLayout above), for
  // a depth head that keeps its maps channels last from the tokens (which
  // already are [B, h, w, C]) to its last convolution. The maps of one op are
  // float32 or all bfloat16 (the depth head's option depth_head_dtype), the
  // weights in the maps' dtype; biases and the position tables stay float32,
  // and sums are float32 either way.
  // Conv2d, square kernel: x[B, H, W, Cin], w[Cout, k, k, Cin], b[Cout] or
  // null, out[B, OH, OW, Cout], with the epilogue applied (ConvEpilogue).
  virtual void conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out,
                           const ConvEpilogue& epilogue) = 0;
  void conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out) {
    conv2d_nhwc(x, w, b, stride, pad, out, ConvEpilogue{});
  }
  // ConvTranspose2d with kernel == stride: x[B, h, w, Cin], w[Cin, Cout, k, k]
  // (PyTorch's layout), out[B, h*k, w*k, Cout].
  virtual void conv_transpose2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) = 0;
  // resize_bilinear on [B, H, W, C]; `add` repeats over out's leading dims
  // (a channels-last [H, W, C] term).
  virtual void resize_bilinear_nhwc(const Tensor& x, const Tensor* add, Tensor& out) = 0;
  // resize_bilinear_add_axes on [B, H, W, C], the tables as there:
  //   out[n, y, x, c] = resize(x)[n, y, x, c] + (c < Cc ? by_col[c, x] : by_row[c - Cc, y]).
  virtual void resize_bilinear_add_axes_nhwc(const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                             Tensor& out) = 0;
};

// threads: 0 for OpenMP's default. isa: the cpu_isa option, "auto" (the best
// the CPU has), "avx2" or "avx512" (backend/cpu/cpu_isa.h); throws
// lingbot::Error for one the CPU lacks.
std::unique_ptr<Backend> make_cpu_backend(int threads, std::string_view isa = "auto");

}  // namespace lingbot
