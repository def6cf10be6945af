#include "backend/cpu/packed_weights.h"

#include "core/error.h"

#include <mutex>
#include <unordered_map>

namespace lingbot::cpu {

// The data address of every live packed weight and its shape [out, in].
struct PackedWeights::Registry {
  mutable std::mutex mutex;
  std::unordered_map<const void*, std::pair<Shape, DType>> live;
};

// Owns a packed weight's memory; takes it off the registry as it is freed.
struct PackedWeights::Memory {
  Tensor storage;
  std::shared_ptr<Registry> registry;
  ~Memory() {
    const std::lock_guard lock(registry->mutex);
    registry->live.erase(storage.data());
  }
};

PackedWeights::PackedWeights() : registry_(std::make_shared<Registry>()) {}
PackedWeights::~PackedWeights() = default;

Tensor PackedWeights::pack(OnednnMatmuls& matmuls, const Tensor& w) {
  LB_CHECK(w.is_cpu() && (w.dtype() == DType::F32 || w.dtype() == DType::BF16) && w.ndim() == 2,
           "internal error: packed weights: expected a float32 or bf16 matrix on the cpu, got {}", w.describe());
  const int64_t out = w.dim(0), in = w.dim(1);
  if (!matmuls.packs(w.dtype(), in, out)) return Tensor();
  Tensor storage = Tensor::empty(w.shape(), w.dtype());
  matmuls.pack_weights(w.dtype(), in, out, w.data(), storage.data());
  void* const data = storage.data();
  auto memory = std::make_shared<Memory>(Memory{std::move(storage), registry_});
  {
    const std::lock_guard lock(registry_->mutex);
    registry_->live[data] = {w.shape(), w.dtype()};
  }
  return Tensor::wrap(data, w.shape(), w.dtype(), Device::CPU, std::move(memory));
}

bool PackedWeights::holds(const Tensor& w) const {
  if (!w.defined() || !w.is_cpu()) return false;
  const std::lock_guard lock(registry_->mutex);
  const auto it = registry_->live.find(w.data());
  if (it == registry_->live.end()) return false;
  LB_CHECK(it->second.first == w.shape() && it->second.second == w.dtype(),
           "internal error: packed weights: a packed {}{} viewed as {}", dtype_name(it->second.second),
           shape_str(it->second.first), w.describe());
  return true;
}

Tensor PackedWeights::unpacked(OnednnMatmuls& matmuls, const Tensor& w) const {
  LB_CHECK(holds(w), "internal error: packed weights: {} is not packed", w.describe());
  Tensor plain = Tensor::empty(w.shape(), w.dtype());
  matmuls.unpack_weights(w.dtype(), w.dim(1), w.dim(0), w.data(), plain.data());
  return plain;
}

}  // namespace lingbot::cpu
