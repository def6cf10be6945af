#include "checkpoint/storage_view.h"

#include "core/error.h"

#include <cstring>

namespace lingbot::io {

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  // Unsigned arithmetic: an empty tensor may have dimensions whose product
  // overflows (e.g. [0, 2^40, 2^40]); its strides are never used to address
  // memory, so wrapping is harmless there, and it is not undefined.
  std::vector<int64_t> strides(shape.size());
  uint64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = static_cast<int64_t>(stride);
    stride *= static_cast<uint64_t>(shape[i]);
  }
  return strides;
}

bool is_contiguous(const StridedLayout& layout) {
  int64_t expected = 1;
  for (size_t i = layout.shape.size(); i-- > 0;) {
    if (layout.shape[i] == 1) continue;
    if (layout.strides[i] != expected) return false;
    expected *= layout.shape[i];
  }
  return true;
}

namespace {

// Copies a strided window into contiguous memory, one innermost row at a time.
void gather(const uint8_t* base, size_t elem, const StridedLayout& layout, uint8_t* out) {
  const size_t nd = layout.shape.size();
  if (nd == 0) {
    std::memcpy(out, base + static_cast<size_t>(layout.offset) * elem, elem);
    return;
  }
  const int64_t inner = layout.shape[nd - 1];
  const int64_t inner_stride = layout.strides[nd - 1];
  std::vector<int64_t> index(nd, 0);  // odometer over all but the last dimension
  while (true) {
    int64_t start = layout.offset;
    for (size_t d = 0; d + 1 < nd; ++d) start += index[d] * layout.strides[d];
    const uint8_t* src = base + static_cast<size_t>(start) * elem;
    if (inner_stride == 1) {
      std::memcpy(out, src, static_cast<size_t>(inner) * elem);
      out += static_cast<size_t>(inner) * elem;
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        std::memcpy(out, src + static_cast<size_t>(j * inner_stride) * elem, elem);
        out += elem;
      }
    }
    size_t d = nd - 1;
    while (d > 0) {
      --d;
      if (++index[d] < layout.shape[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (nd == 1) return;
  }
}

}  // namespace

Tensor tensor_from_storage(std::span<const uint8_t> storage, const std::shared_ptr<void>& owner,
                           DType dtype, const StridedLayout& layout, const std::string& what,
                           uint64_t& copy_budget) {
  const size_t elem = dtype_size(dtype);
  const size_t nd = layout.shape.size();
  if (layout.strides.size() != nd)
    fail("{}: shape {} has {} dimensions but {} strides are given", what, shape_str(layout.shape),
         nd, layout.strides.size());
  if (layout.offset < 0) fail("{}: negative storage offset {}", what, layout.offset);

  // numel and the furthest element reached, without overflow.
  int64_t numel = 1;
  int64_t last = layout.offset;  // index of the last element visited
  for (size_t d = 0; d < nd; ++d) {
    const int64_t size = layout.shape[d];
    if (size < 0) fail("{}: negative dimension in shape {}", what, shape_str(layout.shape));
    if (__builtin_mul_overflow(numel, size, &numel))
      fail("{}: shape {} has too many elements", what, shape_str(layout.shape));
  }
  if (numel == 0) return Tensor::empty(layout.shape, dtype);  // touches no storage
  for (size_t d = 0; d < nd; ++d) {
    int64_t reach = 0;
    if (layout.strides[d] < 0)
      fail("{}: negative stride {} in dimension {}", what, layout.strides[d], d);
    if (__builtin_mul_overflow(layout.shape[d] - 1, layout.strides[d], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      fail("{}: strides reach beyond any storage", what);
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), uint64_t{elem}, &nbytes))
    fail("{}: shape {} is too large", what, shape_str(layout.shape));

  const uint64_t storage_elems = storage.size() / elem;
  if (static_cast<uint64_t>(last) >= storage_elems)
    fail("{}: {} with strides [{}] at offset {} needs {} elements, its storage holds {} "
         "({} bytes)",
         what, shape_str(layout.shape), fmt::join(layout.strides, ", "), layout.offset,
         static_cast<uint64_t>(last) + 1, storage_elems, storage.size());

  const uint8_t* first = storage.data() + static_cast<size_t>(layout.offset) * elem;
  const bool aligned = reinterpret_cast<uintptr_t>(first) % elem == 0;
  if (is_contiguous(layout) && aligned) {
    // Zero-copy: the tensor aliases the mapped file (read-only memory).
    return Tensor::wrap(const_cast<uint8_t*>(first), layout.shape, dtype, Device::CPU, owner);
  }
  if (nbytes > copy_budget)
    fail("{}: making this strided view contiguous needs {} bytes, more than the {} allowed "
         "for copies from this file",
         what, nbytes, copy_budget);
  copy_budget -= nbytes;
  Tensor t = Tensor::empty(layout.shape, dtype);
  gather(storage.data(), elem, layout, static_cast<uint8_t*>(t.data()));
  return t;
}

}  // namespace lingbot::io
