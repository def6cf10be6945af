#include "backend/cpu/bf16_kv_bridge.h"

#include "backend/cpu/bf16_convert.h"
#include "core/error.h"

namespace lingbot::cpu {

namespace {

class Bf16KvBridge final : public kv::KvCache {
 public:
  Bf16KvBridge(const kv::CacheConfig& config, StoreFactory make)
      : config_(config), make_(std::move(make)), store_(make_(config)) {}

  void begin_step(int num_frames, bool store) override {
    store_->begin_step(num_frames, store);
    step_frames_ = num_frames;
    step_stores_ = store;
  }
  // The CPU stores take bfloat16 rows as they are (kv_rows.h), so k and v
  // go straight through.
  void append(int block, const Tensor& k, const Tensor& v) override {
    if (!storage_chosen_) choose_storage(k);
    store_->append(block, k, v);
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
  void end_step() override {
    store_->end_step();
    storage_chosen_ = true;  // from here on the store holds what it holds
  }
  void reset() override { store_->reset(); }
  void release_scratch() override {
    q_ = out_ = Tensor();
    store_->release_scratch();
  }
  kv::CacheStats stats() const override { return store_->stats(); }
  const kv::TokenLayout& layout() const override { return store_->layout(); }
  const kv::CacheConfig& config() const override { return store_->config(); }
  int num_blocks() const override { return store_->num_blocks(); }
  bool in_step() const override { return store_->in_step(); }
  std::pair<Tensor, Tensor> gather_visible(int block) const override { return store_->gather_visible(block); }

 private:
  // kv-dtype auto: bfloat16 storage when the keys come in bfloat16 (the
  // aggregator's: bf16 products' outputs, so stored exactly), float32 when
  // they come in float32 (the camera head's trunk, float32 as upstream's).
  // Decided at the first append, before anything is stored.
  void choose_storage(const Tensor& k) {
    storage_chosen_ = true;
    if (k.dtype() != DType::BF16 || config_.dtype != kv::KvDtype::Auto) return;
    kv::CacheConfig bf16 = config_;
    bf16.dtype = kv::KvDtype::Bf16;
    store_ = make_(bf16);
    store_->begin_step(step_frames_, step_stores_);
  }

  // t as float32: itself, or widened into `buffer` (kept between calls).
  static const Tensor& widened(const Tensor& t, Tensor& buffer) {
    if (t.dtype() == DType::F32) return t;
    LB_CHECK(t.dtype() == DType::BF16, "kv cache (cpu): expected float32 or bfloat16, got {}", t.describe());
    if (buffer.shape() != t.shape()) buffer = Tensor::empty(t.shape(), DType::F32);
    f32_from_bf16(t.data_as<const uint16_t>(), buffer.f32(), t.numel());
    return buffer;
  }

  kv::CacheConfig config_;
  StoreFactory make_;
  std::unique_ptr<kv::KvCache> store_;
  bool storage_chosen_ = false;
  int step_frames_ = 0;
  bool step_stores_ = false;
  Tensor q_, out_;  // float32 staging, reused from step to step
};

}  // namespace

std::unique_ptr<kv::KvCache> widen_bf16_for(const kv::CacheConfig& config, StoreFactory make_store) {
  return std::make_unique<Bf16KvBridge>(config, std::move(make_store));
}

}  // namespace lingbot::cpu
