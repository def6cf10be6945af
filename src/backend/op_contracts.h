// Each Backend op's argument contract, written once and checked for every
// backend.
//
// backend.h documents what each op takes; the functions here check it, so
// that the CPU and the CUDA backend accept and refuse the same calls. Every
// op of a backend starts with its check_<op>(); after it the backend checks
// only what is its own (the CUDA kernels' grid sizes, the attention
// kernels' head_dim cap, the alignment a fast path needs, the CPU's float32
// only). What a check covers is what does not depend on the device:
//   - every tensor is allocated and lives on the backend's device;
//   - dtypes: activations (token matrices, q/k/v, feature rows) are float32
//     or the backend's compute_dtype() / residual_dtype()
//     (Target::activation); parameter vectors (biases, gains, norm
//     weights), RoPE tables, images and NCHW maps are float32; copy_rows
//     moves any dtype; fill and convert take float dtypes;
//   - ranks, shapes and element counts as backend.h writes them: "x[N, K]"
//     is any tensor of N * K elements whose rows are K long (the model
//     passes [S, T, E] tensors as [S * T, E] matrices);
//   - sizes: positive head counts, kernels, strides, patch sizes; copy_rows'
//     blocks inside both tensors;
//   - aliasing: an output may be an input only where backend.h says "may
//     alias" (and then it is that very tensor, never a partial overlap);
//     elsewhere no output overlaps an input.
// A violation throws lingbot::Error with one line that names the op, the
// argument and the shapes, e.g.
//   copy_rows: block 2 of 3: dst rows [90, 100) past dst's 96 rows (dst float32[96, 64] on cpu)
// The checks are a few integer comparisons per tensor: they never touch
// tensor data or the device (the CUDA ops run inside graph capture), and a
// message is formatted only when a check fails.
#pragma once

#include "backend/backend.h"

#include <cstdint>

namespace lingbot::contracts {

// The backend a call is checked for: where its tensors live and which float
// types its activations take.
struct Target {
  Device device = Device::CPU;
  DType compute = DType::F32;   // Backend::compute_dtype()
  DType residual = DType::F32;  // Backend::residual_dtype()

  static Target of(const Backend& be) { return {be.device(), be.compute_dtype(), be.residual_dtype()}; }
  // float32, compute or residual.
  bool activation(DType t) const { return t == DType::F32 || t == compute || t == residual; }
};

// What the checks work out on the way; the ops use them as they are.
struct MatrixDims {
  int64_t rows, cols;
};
struct LinearDims {
  int64_t n, k, m;  // x[n, k], w[m, k], out[n, m]
};
struct ConcatDims {
  int64_t rows, a_cols, b_cols;
};
struct Nchw {
  int64_t n, c, h, w;
};
struct TokenMaps {
  int64_t batches, plane, channels;  // tokens[batches, plane, channels]
};
struct MapDims {
  Nchw in, out;
};
struct ConvDims {
  Nchw in, out;
  int64_t kernel;
};

// ---- memory -----------------------------------------------------------------
void check_upload(const Target& t, const Tensor& host);
void check_upload_into(const Target& t, const Tensor& host, const Tensor& device);
void check_download(const Target& t, const Tensor& device);
void check_download_async(const Target& t, const Tensor& device, const Tensor& host);
void check_fill(const Target& t, const Tensor& x);
void check_convert(const Target& t, const Tensor& src, const Tensor& dst);

// ---- dense layers -------------------------------------------------------------
LinearDims check_linear(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& out);
LinearDims check_linear_residual(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b,
                                 const Tensor* gamma, const Tensor& residual);
// rows x cols = x's rows, each normalised over its cols.
MatrixDims check_layer_norm(const Target& t, const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& out);

// ---- attention ----------------------------------------------------------------
// rows = tokens, cols = num_heads * head_dim.
MatrixDims check_split_qkv(const Target& t, const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm,
                           const RopeTable* rope, const Tensor& q, const Tensor& k, const Tensor& v);
// rows = tokens per group, cols = num_heads * head_dim.
MatrixDims check_attention(const Target& t, const Tensor& q, const Tensor& k, const Tensor& v, int groups,
                           int num_heads, int head_dim, const Tensor& out);

// ---- element-wise and data movement ---------------------------------------------
void check_copy_rows(const Target& t, const Tensor& src, const Tensor& dst, const RowCopy& copy);
ConcatDims check_concat_cols(const Target& t, const Tensor& a, const Tensor& b, const Tensor& out);
void check_add_broadcast(const Target& t, const Tensor& x, const Tensor& y);
void check_add(const Target& t, const Tensor& a, const Tensor& b, const Tensor& out);
// relu, silu: `op` names the op in messages.
void check_unary(const Target& t, const char* op, const Tensor& x, const Tensor& out);
MatrixDims check_adaln_modulate(const Target& t, const Tensor& xn, const Tensor& mod, const Tensor& residual,
                                const Tensor& out);

// ---- images and feature maps ------------------------------------------------------
Nchw check_patchify(const Target& t, const Tensor& images, int patch, const Tensor& patches);
TokenMaps check_tokens_to_nchw(const Target& t, const Tensor& tokens, int h, int w, const Tensor& maps);
// The map ops in either layout (MapLayout): the channels-last ones are the
// *_nhwc ops, named so in messages. Maps are float32; channels last they may
// be bfloat16 on a backend that computes in it, with the weights, residual
// and added term like x and the bias and position tables float32.
// `epilogue`: conv2d_nhwc's (a ReLU or none, a residual shaped like out).
ConvDims check_conv2d(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad,
                      const Tensor& out, MapLayout layout = MapLayout::ChannelsFirst,
                      const ConvEpilogue& epilogue = {});
ConvDims check_conv_transpose2d(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, int k,
                                const Tensor& out, MapLayout layout = MapLayout::ChannelsFirst);
MapDims check_resize_bilinear(const Target& t, const Tensor& x, const Tensor* add, const Tensor& out,
                              MapLayout layout = MapLayout::ChannelsFirst);
MapDims check_resize_bilinear_add_axes(const Target& t, const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                       const Tensor& out, MapLayout layout = MapLayout::ChannelsFirst);

}  // namespace lingbot::contracts
