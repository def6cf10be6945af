// Linear weights kept in the layout their matrix products read, packed once
// at load instead of inside every product: oneDNN's blocked layout
// (OnednnMatmuls::pack_weights: the fp32 mode) or the AMX tiles' (linear_amx.h:
// the bf16 mode on CPUs with AMX).
//
// A packed weight is an ordinary float32 or bf16 tensor of the weight's
// shape [out, in] whose bytes are in that layout; only this registry knows. It knows a
// tensor by its data while that memory lives: the memory's owner removes it
// from the registry when it is freed, so no later tensor at the same address
// is taken for a packed one.
#pragma once

#include "backend/cpu/onednn_matmul.h"
#include "core/tensor.h"

#include <memory>

namespace lingbot::cpu {

class PackedWeights {
 public:
  PackedWeights();
  ~PackedWeights();

  // A new tensor with w's values packed (w: float32 or bf16 [out, in],
  // row-major), or an undefined tensor where w's shape has no packed layout.
  Tensor pack(OnednnMatmuls& matmuls, const Tensor& w);
  // The same in the AMX tiles' layout (w: bf16).
  Tensor pack_amx_tiles(const Tensor& w);
  // The layout of w: Packed or AmxTiles for a tensor pack() or
  // pack_amx_tiles() made, whole (not a view of a part); else RowMajor.
  WeightLayout layout_of(const Tensor& w) const;
  bool holds(const Tensor& w) const { return layout_of(w) != WeightLayout::RowMajor; }
  // A packed weight's values in the row-major layout (a new tensor).
  Tensor unpacked(OnednnMatmuls& matmuls, const Tensor& w) const;

 private:
  struct Registry;
  struct Memory;
  // Registers storage (filled) as a packed weight of its shape and type.
  Tensor registered(Tensor storage, WeightLayout layout);
  std::shared_ptr<Registry> registry_;
};

}  // namespace lingbot::cpu
