// The CPU backend: float32 everywhere, oneDNN for matrix products, OpenMP
// for everything else, kernels chosen per CPU at run time (cpu_isa.h). It is
// the portable reference path; its results are what the parity tests hold
// against upstream PyTorch at 1e-4.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/onednn_conv.h"
#include "backend/op_contracts.h"

#include <vector>

namespace lingbot::cpu {

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, Isa isa);

  Device device() const override { return Device::CPU; }
  std::string name() const override;

  Tensor alloc(const Shape& shape, DType dtype) override;
  Tensor upload(const Tensor& host, DType dtype) override;
  void upload_into(const Tensor& host, Tensor& device) override;
  Tensor download(const Tensor& device) override;
  void fill(Tensor& t, float value) override;
  void convert(const Tensor& src, Tensor& dst) override;
  void synchronize() override {}
  DType compute_dtype() const override { return DType::F32; }

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

 private:
  // What the shared contract checks (op_contracts.h) hold this backend's calls to.
  contracts::Target contract() const { return {Device::CPU, compute_dtype(), residual_dtype()}; }

  int threads_;
  Isa isa_;  // which build of our own kernels this backend calls
  // conv2d's oneDNN primitives and scratch, kept from call to call.
  std::unique_ptr<OnednnConvolutions> convolutions_;
};

}  // namespace lingbot::cpu
