// The op-contract tables (op_contracts_table.h) here, without a GPU: on the
// CPU backend, and on a stand-in with the CUDA backend's device and dtypes
// (tensors labelled Device::CUDA, bfloat16 compute) whose ops run the
// shared contract checks and nothing else. The stand-in shows that the
// table's violations break the contract itself under the CUDA backend's
// parameters, not a CPU-only rule; the real CUDA backend runs the same
// tables in tests/backend/cuda/op_contracts_cuda_test.cpp.
#include "op_contracts_table.h"

#include "backend/op_contracts.h"

namespace lingbot::test::contracts {
namespace {

namespace oc = lingbot::contracts;

// Host memory labelled as `device`; nothing ever reads it as device memory.
class ContractOnlyBackend final : public Backend {
 public:
  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "contract checks only (cuda, bfloat16)"; }
  DType compute_dtype() const override { return DType::BF16; }

  Tensor alloc(const Shape& shape, DType dtype) override {
    Tensor h = Tensor::empty(shape, dtype);
    return Tensor::wrap(h.data(), shape, dtype, Device::CUDA, std::shared_ptr<void>(h.data(), [h](void*) {}));
  }
  Tensor upload(const Tensor& host, DType dtype) override {
    oc::check_upload(target(), host);
    return alloc(host.shape(), dtype);
  }
  void upload_into(const Tensor& host, Tensor& device) override { oc::check_upload_into(target(), host, device); }
  Tensor download(const Tensor& device) override {
    oc::check_download(target(), device);
    return Tensor::zeros(device.shape());
  }
  void fill(Tensor& t, float) override { oc::check_fill(target(), t); }
  void convert(const Tensor& src, Tensor& dst) override { oc::check_convert(target(), src, dst); }
  void synchronize() override {}
  std::unique_ptr<kv::KvCache> make_kv_cache(kv::Layout, const kv::CacheConfig&, const kv::TokenLayout&,
                                             int) override {
    fail("contract-only backend: no KV cache");
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& out, Activation) override {
    oc::check_linear(target(), x, w, b, out);
  }
  void linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                       Tensor& residual) override {
    oc::check_linear_residual(target(), x, w, b, gamma, residual);
  }
  void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float, Tensor& out) override {
    oc::check_layer_norm(target(), x, w, b, out);
  }
  void split_qkv(const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm, const RopeTable* rope, Tensor& q,
                 Tensor& k, Tensor& v) override {
    oc::check_split_qkv(target(), qkv, num_heads, head_dim, norm, rope, q, k, v);
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads, int head_dim,
                 Tensor& out) override {
    oc::check_attention(target(), q, k, v, groups, num_heads, head_dim, out);
  }
  void copy_rows(const Tensor& src, Tensor& dst, const RowCopy& copy) override {
    oc::check_copy_rows(target(), src, dst, copy);
  }
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) override {
    oc::check_concat_cols(target(), a, b, out);
  }
  void add_broadcast(Tensor& x, const Tensor& y) override { oc::check_add_broadcast(target(), x, y); }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override { oc::check_add(target(), a, b, out); }
  void relu(const Tensor& x, Tensor& out) override { oc::check_unary(target(), "relu", x, out); }
  void silu(const Tensor& x, Tensor& out) override { oc::check_unary(target(), "silu", x, out); }
  void adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual, Tensor& out) override {
    oc::check_adaln_modulate(target(), xn, mod, residual, out);
  }
  void patchify(const Tensor& images, int patch, const std::array<float, 3>&, const std::array<float, 3>&,
                Tensor& patches) override {
    oc::check_patchify(target(), images, patch, patches);
  }
  void tokens_to_nchw(const Tensor& tokens, int h, int w, Tensor& maps) override {
    oc::check_tokens_to_nchw(target(), tokens, h, w, maps);
  }
  void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out) override {
    oc::check_conv2d(target(), x, w, b, stride, pad, out);
  }
  void conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) override {
    oc::check_conv_transpose2d(target(), x, w, b, k, out);
  }
  void resize_bilinear(const Tensor& x, const Tensor* add, Tensor& out) override {
    oc::check_resize_bilinear(target(), x, add, out);
  }
  void resize_bilinear_add_axes(const Tensor& x, const Tensor& by_col, const Tensor& by_row, Tensor& out) override {
    oc::check_resize_bilinear_add_axes(target(), x, by_col, by_row, out);
  }
  void conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out,
                   const ConvEpilogue& e) override {
    oc::check_conv2d(target(), x, w, b, stride, pad, out, MapLayout::ChannelsLast, e);
  }
  void conv_transpose2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) override {
    oc::check_conv_transpose2d(target(), x, w, b, k, out, MapLayout::ChannelsLast);
  }
  void resize_bilinear_nhwc(const Tensor& x, const Tensor* add, Tensor& out) override {
    oc::check_resize_bilinear(target(), x, add, out, MapLayout::ChannelsLast);
  }
  void resize_bilinear_add_axes_nhwc(const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                     Tensor& out) override {
    oc::check_resize_bilinear_add_axes(target(), x, by_col, by_row, out, MapLayout::ChannelsLast);
  }

 private:
  oc::Target target() const { return oc::Target::of(*this); }
};

const BackendUnderTest kCpu{"Cpu", [](std::string*) -> std::shared_ptr<Backend> { return make_cpu_backend(1); }};
const BackendUnderTest kCudaLike{"CudaLikeChecksOnly",
                                 [](std::string*) -> std::shared_ptr<Backend> {
                                   return std::make_shared<ContractOnlyBackend>();
                                 }};

INSTANTIATE_TEST_SUITE_P(Contracts, OpContractViolation,
                         ::testing::Combine(::testing::ValuesIn(violations()), ::testing::Values(kCpu, kCudaLike)),
                         violation_name);
INSTANTIATE_TEST_SUITE_P(Contracts, OpContractEdge,
                         ::testing::Combine(::testing::ValuesIn(edges()), ::testing::Values(kCpu, kCudaLike)),
                         edge_name);

// The contract's dtype rule follows the target: bfloat16 activations are
// refused on a float32 backend and accepted on a bfloat16 one.
TEST(OpContracts, ActivationDtypesFollowTheBackend) {
  const oc::Target cpu{Device::CPU, DType::F32, DType::F32};
  const oc::Target bf16{Device::CPU, DType::BF16, DType::F32};
  const Tensor x = Tensor::empty({4, 3}, DType::BF16);
  Tensor out = Tensor::empty({4, 3}, DType::BF16);
  EXPECT_THROW(oc::check_unary(cpu, "relu", x, out), Error);
  EXPECT_NO_THROW(oc::check_unary(bf16, "relu", x, out));
  const Tensor h = Tensor::empty({4, 3}, DType::F16);
  EXPECT_THROW(oc::check_unary(bf16, "relu", h, h), Error);
  EXPECT_TRUE(bf16.activation(DType::F32) && bf16.activation(DType::BF16) && !bf16.activation(DType::F16));
}

}  // namespace
}  // namespace lingbot::test::contracts
