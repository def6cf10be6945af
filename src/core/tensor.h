// Tensor: a typed, shaped view of contiguous memory.
//
// A Tensor is a small value type: a pointer into a buffer, the buffer's
// owner (shared, so views keep their memory alive), an element type, a
// row-major shape and the device the memory lives on. All tensors are
// contiguous; slicing along the first dimension and reshaping keep that
// property, which is all the engine needs. Strided data from a checkpoint
// is made contiguous when it is loaded.
//
// Memory on a device other than the CPU comes from an allocator registered
// by that device's backend, so this header knows nothing about CUDA.
#pragma once

#include "core/dtype.h"
#include "core/error.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace lingbot {

enum class Device : uint8_t { CPU, CUDA };
std::string_view device_name(Device d);

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 3, 4]"
int64_t shape_numel(const Shape& s);

// Allocates `bytes` on a device and returns an owner whose deleter frees it.
using DeviceAllocator = std::function<std::shared_ptr<void>(size_t bytes)>;
void register_device_allocator(Device d, DeviceAllocator alloc);

class Tensor {
 public:
  Tensor() = default;

  // New, uninitialised tensor. CPU memory is 64-byte aligned.
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
  // New CPU tensor filled with zeros.
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32);
  // Wrap memory owned by someone else; `owner` keeps it alive.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device,
                     std::shared_ptr<void> owner);
  // CPU float32 tensor from values (tests, small constants).
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);

  bool defined() const { return owner_ != nullptr; }
  // What keeps the memory alive (shared with every view of it).
  const std::shared_ptr<void>& owner() const { return owner_; }

  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_cpu() const { return device_ == Device::CPU; }

  void* data() const { return data_; }
  template <typename T> T* data_as() const { return static_cast<T*>(data_); }
  float* f32() const;  // checked: CPU-side float32 only

  // Views (no copy).
  Tensor reshape(const Shape& shape) const;  // same numel; one dim may be -1
  Tensor slice(int64_t start, int64_t length) const;  // along dim 0
  Tensor operator[](int64_t i) const;  // index dim 0, dropping it

  // Copies.
  Tensor clone() const;                 // same device (CPU only here)
  Tensor to_dtype(DType dtype) const;   // CPU float conversions
  void copy_from(const Tensor& src);    // CPU, same shape and dtype

  std::string describe() const;  // "float32[2, 3] on cpu"

 private:
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
};

}  // namespace lingbot
