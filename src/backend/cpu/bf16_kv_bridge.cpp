#include "backend/cpu/bf16_kv_bridge.h"

#include "backend/cpu/bf16_convert.h"
#include "core/error.h"

namespace lingbot::cpu {

namespace {

class Bf16KvBridge final : public kv::KvCache {
 public:
  explicit Bf16KvBridge(std::unique_ptr<kv::KvCache> store) : store_(std::move(store)) {}

  void begin_step(int num_frames, bool store) override { store_->begin_step(num_frames, store); }
  void append(int block, const Tensor& k, const Tensor& v) override {
    if (k.dtype() != DType::BF16 && v.dtype() != DType::BF16) return store_->append(block, k, v);
    store_->append(block, widened(k, k_), widened(v, v_));
  }
  void attend(int block, const Tensor& q, Tensor& out) override {
    if (q.dtype() != DType::BF16 && out.dtype() != DType::BF16) return store_->attend(block, q, out);
    const Tensor& q32 = widened(q, q_);
    if (out_.shape() != out.shape() || out_.dtype() != DType::F32) out_ = Tensor::empty(out.shape(), DType::F32);
    store_->attend(block, q32, out_);
    if (out.dtype() == DType::BF16) {
      bf16_from_f32(out_.f32(), out.data_as<uint16_t>(), out.numel());
    } else {
      out.copy_from(out_);
    }
  }
  void end_step() override { store_->end_step(); }
  void reset() override { store_->reset(); }
  kv::CacheStats stats() const override { return store_->stats(); }
  const kv::TokenLayout& layout() const override { return store_->layout(); }
  const kv::CacheConfig& config() const override { return store_->config(); }
  int num_blocks() const override { return store_->num_blocks(); }
  bool in_step() const override { return store_->in_step(); }
  std::pair<Tensor, Tensor> gather_visible(int block) const override { return store_->gather_visible(block); }

 private:
  // t as float32: itself, or widened into `buffer` (kept between calls).
  static const Tensor& widened(const Tensor& t, Tensor& buffer) {
    if (t.dtype() == DType::F32) return t;
    LB_CHECK(t.dtype() == DType::BF16, "kv cache (cpu): expected float32 or bfloat16, got {}", t.describe());
    if (buffer.shape() != t.shape()) buffer = Tensor::empty(t.shape(), DType::F32);
    f32_from_bf16(t.data_as<const uint16_t>(), buffer.f32(), t.numel());
    return buffer;
  }

  std::unique_ptr<kv::KvCache> store_;
  Tensor k_, v_, q_, out_;  // float32 staging, reused from step to step
};

}  // namespace

std::unique_ptr<kv::KvCache> widen_bf16_for(std::unique_ptr<kv::KvCache> store) {
  return std::make_unique<Bf16KvBridge>(std::move(store));
}

}  // namespace lingbot::cpu
