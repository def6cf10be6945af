#include "backend/cpu/packed_weights.h"

#include "backend/cpu/linear_amx.h"
#include "core/error.h"

#include <mutex>
#include <unordered_map>

namespace lingbot::cpu {

// The data address of every live packed weight: its shape [out, in], type
// and layout.
struct PackedWeights::Registry {
  struct Entry {
    Shape shape;
    DType dtype;
    WeightLayout layout;
  };
  mutable std::mutex mutex;
  std::unordered_map<const void*, Entry> live;
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

Tensor PackedWeights::registered(Tensor storage, WeightLayout layout) {
  void* const data = storage.data();
  const Shape shape = storage.shape();
  const DType dtype = storage.dtype();
  auto memory = std::make_shared<Memory>(Memory{std::move(storage), registry_});
  {
    const std::lock_guard lock(registry_->mutex);
    registry_->live[data] = {shape, dtype, layout};
  }
  return Tensor::wrap(data, shape, dtype, Device::CPU, std::move(memory));
}

Tensor PackedWeights::pack(OnednnMatmuls& matmuls, const Tensor& w) {
  LB_CHECK(w.is_cpu() && (w.dtype() == DType::F32 || w.dtype() == DType::BF16) && w.ndim() == 2,
           "internal error: packed weights: expected a float32 or bf16 matrix on the cpu, got {}", w.describe());
  const int64_t out = w.dim(0), in = w.dim(1);
  if (!matmuls.packs(w.dtype(), in, out)) return Tensor();
  Tensor storage = Tensor::empty(w.shape(), w.dtype());
  matmuls.pack_weights(w.dtype(), in, out, w.data(), storage.data());
  return registered(std::move(storage), WeightLayout::Packed);
}

Tensor PackedWeights::pack_amx_tiles(const Tensor& w) {
  LB_CHECK(w.is_cpu() && w.dtype() == DType::BF16 && w.ndim() == 2,
           "internal error: packed weights: expected a bf16 matrix on the cpu, got {}", w.describe());
  const int64_t out = w.dim(0), in = w.dim(1);
  if (!linear_amx_fits(in, out)) return Tensor();
  Tensor storage = Tensor::empty(w.shape(), w.dtype());
  linear_amx_pack_weights(w.data_as<const uint16_t>(), in, out, storage.data_as<uint16_t>());
  return registered(std::move(storage), WeightLayout::AmxTiles);
}

WeightLayout PackedWeights::layout_of(const Tensor& w) const {
  if (!w.defined() || !w.is_cpu()) return WeightLayout::RowMajor;
  const std::lock_guard lock(registry_->mutex);
  const auto it = registry_->live.find(w.data());
  if (it == registry_->live.end()) return WeightLayout::RowMajor;
  LB_CHECK(it->second.shape == w.shape() && it->second.dtype == w.dtype(),
           "internal error: packed weights: a packed {}{} viewed as {}", dtype_name(it->second.dtype),
           shape_str(it->second.shape), w.describe());
  return it->second.layout;
}

Tensor PackedWeights::unpacked(OnednnMatmuls& matmuls, const Tensor& w) const {
  const WeightLayout layout = layout_of(w);
  LB_CHECK(layout != WeightLayout::RowMajor, "internal error: packed weights: {} is not packed", w.describe());
  Tensor plain = Tensor::empty(w.shape(), w.dtype());
  if (layout == WeightLayout::AmxTiles) {
    linear_amx_unpack_weights(w.data_as<const uint16_t>(), w.dim(1), w.dim(0), plain.data_as<uint16_t>());
  } else {
    matmuls.unpack_weights(w.dtype(), w.dim(1), w.dim(0), w.data(), plain.data());
  }
  return plain;
}

}  // namespace lingbot::cpu
