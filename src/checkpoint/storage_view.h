// Turning (storage bytes, dtype, shape, strides, offset) into a Tensor.
//
// Both checkpoint formats describe a tensor as a strided window on a byte
// buffer that lives inside the mapped file. A contiguous, aligned window
// becomes a zero-copy Tensor that keeps the file alive; anything else
// (transposed or strided views, broadcast zero strides, misaligned data) is
// copied into a new contiguous CPU tensor, because lingbot::Tensor is always
// contiguous.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace lingbot::io {

struct StridedLayout {
  Shape shape;                   // elements per dimension
  std::vector<int64_t> strides;  // in elements, same length as shape
  int64_t offset = 0;            // first element, in elements from the storage start
};

// Row-major (C-contiguous) strides for `shape`.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// True when `layout` visits elements in row-major order with no gaps (size-1
// dimensions may have any stride, as in torch's is_contiguous()).
bool is_contiguous(const StridedLayout& layout);

// Checks that `layout` stays inside `storage` (element size from `dtype`)
// and returns the tensor. `what` names the tensor in errors, e.g.
// "model.pt: tensor 'blocks.0.w'". `copy_budget` is decreased by the bytes
// of any copy; a copy larger than what is left is an error (hostile strides
// cannot make us allocate without bound).
Tensor tensor_from_storage(std::span<const uint8_t> storage, const std::shared_ptr<void>& owner,
                           DType dtype, const StridedLayout& layout, const std::string& what,
                           uint64_t& copy_budget);

}  // namespace lingbot::io
