// The CPU backend: oneDNN for matrix products, OpenMP for everything else,
// kernels chosen per CPU at run time (cpu_isa.h). In float32 (the default) it
// is the portable reference path; its results are what the parity tests hold
// against upstream PyTorch at 1e-4. In bfloat16 (--cpu-dtype bf16)
// compute_dtype() is bf16: the encoder's and aggregator's matrix weights are
// stored in bf16 (half their memory) and their Linear layers take and give
// bf16 activations with float32 sums, by one of two kernels (Bf16Products);
// LayerNorm, q/k/v preparation and attention compute in float32 on widened
// bf16 rows; the residual stream and both heads stay float32 (as upstream's
// autocast).
#pragma once

#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/derived_weights.h"
#include "backend/cpu/onednn_conv.h"
#include "backend/cpu/onednn_matmul.h"
#include "backend/cpu/packed_weights.h"
#include "backend/op_contracts.h"

#include <string_view>
#include <vector>

namespace lingbot {

// make_cpu_backend with the cpu_dtype option: "fp32" or "bf16" (any other
// value throws lingbot::Error naming --cpu-dtype). bf16 runs on every CPU;
// its products take the kernel of the cpu_bf16_products option: "auto" (the
// faster for the CPU), "amx", "onednn" or "widened" (Bf16Products; one the
// CPU cannot run throws lingbot::Error naming --cpu-bf16-products).
std::unique_ptr<Backend> make_cpu_backend(int threads, std::string_view isa, std::string_view dtype,
                                          std::string_view bf16_products = "auto");

}  // namespace lingbot

namespace lingbot::cpu {

// How the bf16 mode multiplies bf16 activations by bf16 weights (both exact
// in float32, summed in float32: the same arithmetic, three kernels):
enum class Bf16Products {
  // Our own kernels on AMX tiles: the Linear layers (linear_amx.h), on
  // weights packed at load into the tiles' layout, bias, GELU and the
  // residual update in its epilogue; the depth head's convolutions on float32
  // maps where their channels fit the tiles (conv_amx.h), bias, residual and
  // ReLU in its epilogue; attention and the other convolutions as with
  // OnednnBf16. The default where the CPU has AMX-BF16.
  AmxTiles,
  // oneDNN's bf16 matmul primitives (onednn_matmul.h), bias, GELU and the
  // residual update fused: AMX tiles where the CPU has them. On AVX512-BF16
  // alone they run at 0.5-0.6x of fp32's sgemm on some cores and 2x on
  // others (bf16_products_choice.h).
  OnednnBf16,
  // The weights widened to float32 per call, then sgemm: fp32's speed less
  // the widening (5-17% at a frame's 978 rows, docs/PERF.md), on any CPU;
  // the default without AVX512-BF16.
  WidenedSgemm,
};
// The default for this CPU (bf16_products_choice.h).
Bf16Products bf16_products_for_this_cpu();
const char* bf16_products_name(Bf16Products products);

// `buffer` with room for at least n floats (its contents are not kept): how
// the backend's scratch buffers grow.
float* scratch_room(std::vector<float>& buffer, int64_t n);

class CpuBackend final : public Backend {
 public:
  // compute: DType::F32 or DType::BF16; products: the bf16 mode's kernel.
  CpuBackend(int threads, Isa isa, DType compute = DType::F32,
             Bf16Products products = Bf16Products::WidenedSgemm);

  Device device() const override { return Device::CPU; }
  std::string name() const override;

  Tensor alloc(const Shape& shape, DType dtype) override;
  Tensor upload(const Tensor& host, DType dtype) override;
  // A float32 weight is packed into oneDNN's blocked layout, a bf16 one
  // into the AMX tiles' with Bf16Products::AmxTiles (packed_weights.h).
  Tensor upload_linear_weight(const Tensor& host, DType dtype) override;
  void upload_into(const Tensor& host, Tensor& device) override;
  Tensor download(const Tensor& device) override;
  void fill(Tensor& t, float value) override;
  void convert(const Tensor& src, Tensor& dst) override;
  void synchronize() override {}
  void release_scratch() override { scratch_ = Scratch{}; }
  DType compute_dtype() const override { return compute_; }

  std::unique_ptr<kv::KvCache> make_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                             const kv::TokenLayout& tokens, int num_blocks) override;

  void linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& out, Activation act) override;
  void linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                       Tensor& residual) override;
  void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& out) override;

  void split_qkv(const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm, const RopeTable* rope,
                 Tensor& q, Tensor& k, Tensor& v) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads, int head_dim,
                 Tensor& out) override;

  void copy_rows(const Tensor& src, Tensor& dst, const RowCopy& copy) override;
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_broadcast(Tensor& x, const Tensor& y) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void relu(const Tensor& x, Tensor& out) override;
  void silu(const Tensor& x, Tensor& out) override;
  void adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual, Tensor& out) override;

  void patchify(const Tensor& images, int patch, const std::array<float, 3>& mean,
                const std::array<float, 3>& std, Tensor& patches) override;
  void tokens_to_nchw(const Tensor& tokens, int h, int w, Tensor& maps) override;
  void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out) override;
  void conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) override;
  void resize_bilinear(const Tensor& x, const Tensor* add, Tensor& out) override;
  using Backend::resize_bilinear;
  void resize_bilinear_add_axes(const Tensor& x, const Tensor& by_col, const Tensor& by_row, Tensor& out) override;
  void conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out,
                   const ConvEpilogue& epilogue) override;
  using Backend::conv2d_nhwc;
  void conv_transpose2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) override;
  void resize_bilinear_nhwc(const Tensor& x, const Tensor* add, Tensor& out) override;
  void resize_bilinear_add_axes_nhwc(const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                     Tensor& out) override;

 private:
  // What the shared contract checks (op_contracts.h) hold this backend's calls to.
  contracts::Target contract() const { return {Device::CPU, compute_dtype(), residual_dtype()}; }

  // Why the CPU's default took this backend's bf16 kernel, for name().
  std::string chosen_because() const;
  // w itself, or for weights in the AMX tiles' layout a row-major copy.
  Tensor row_major_bf16(const Tensor& w, WeightLayout layout) const;
  // The bf16 mode's Linear layers (weights in bf16).
  // `layout`: w's, as PackedWeights::holds found it.
  void linear_bf16(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* b, Activation act,
                   MatmulDst kind, void* dst, int64_t n, int64_t k, int64_t m);

  int threads_;
  Isa isa_;  // which build of our own kernels this backend calls
  DType compute_;  // F32, or BF16 in the bf16 mode
  Bf16Products bf16_products_;
  AttentionProducts attention_products_ = AttentionProducts::F32;  // Bf16: attention_bf16.h
  std::unique_ptr<OnednnMatmuls> matmuls_;  // the bf16 mode's primitives
  PackedWeights packed_weights_;             // the weights they read as they are
  // conv2d's oneDNN primitives and scratch, kept from call to call.
  std::unique_ptr<OnednnConvolutions> convolutions_;
  // The bf16 mode's convolution weights in the AMX tiles' layout
  // (conv_amx_pack_weights), packed at a layer's first call.
  DerivedWeights amx_conv_weights_;
  // Float32 scratch kept from call to call, each buffer as large as the
  // largest call so far needed (a scale step's: every frame's rows);
  // release_scratch() frees them.
  struct Scratch {
    // The bf16 mode's widened activations followed by, for a bfloat16
    // output, the float32 products: one buffer, as large as the largest
    // pair that one call needs, instead of two buffers each as large as
    // the largest of its own kind.
    std::vector<float> products;
    std::vector<float> weights;    // the bf16 mode's widened weights
    std::vector<float> sums;       // linear_residual's products before they are added
    std::vector<float> attention;  // one group's q, k, v and output, widened (the bf16 mode)
    std::vector<float> staging;    // patchify's rows before they are rounded to bfloat16
    std::vector<float> unscattered;  // conv_transpose2d's products before their scatter to the output
  } scratch_;
};

}  // namespace lingbot::cpu
