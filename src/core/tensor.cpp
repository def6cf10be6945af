#include "core/tensor.h"

#include "core/half.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace lingbot {

namespace {

std::array<DeviceAllocator, 2>& allocators() {
  static std::array<DeviceAllocator, 2> table;
  return table;
}
std::mutex& allocators_mutex() {
  static std::mutex m;
  return m;
}

std::shared_ptr<void> allocate_cpu(size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) fail("out of memory: cannot allocate {} bytes", bytes);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

}  // namespace

std::string_view device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void register_device_allocator(Device d, DeviceAllocator alloc) {
  std::lock_guard lock(allocators_mutex());
  allocators()[static_cast<size_t>(d)] = std::move(alloc);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) LB_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  const size_t bytes = t.nbytes();
  if (device == Device::CPU) {
    t.owner_ = allocate_cpu(bytes);
  } else {
    DeviceAllocator alloc;
    {
      std::lock_guard lock(allocators_mutex());
      alloc = allocators()[static_cast<size_t>(device)];
    }
    LB_CHECK(alloc != nullptr, "no allocator registered for device '{}' (is the backend built?)",
             device_name(device));
    t.owner_ = alloc(bytes == 0 ? 1 : bytes);
  }
  t.data_ = t.owner_.get();
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype, Device::CPU);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device,
                    std::shared_ptr<void> owner) {
  Tensor t;
  t.data_ = data;
  t.owner_ = owner ? std::move(owner) : std::shared_ptr<void>(data, [](void*) {});
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  LB_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
           "from_vector: {} values for shape {}", values.size(), shape_str(shape));
  Tensor t = empty(shape, DType::F32);
  std::memcpy(t.data_, values.data(), values.size() * sizeof(float));
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  if (i < 0) i += n;
  LB_CHECK(i >= 0 && i < n, "dimension {} out of range for {}", i, describe());
  return shape_[static_cast<size_t>(i)];
}

float* Tensor::f32() const {
  LB_CHECK(dtype_ == DType::F32 && device_ == Device::CPU, "expected a float32 CPU tensor, got {}",
           describe());
  return static_cast<float*>(data_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape out = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      LB_CHECK(infer < 0, "reshape: more than one -1 in {}", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    LB_CHECK(known > 0 && numel() % known == 0, "reshape: cannot view {} as {}", describe(),
             shape_str(shape));
    out[static_cast<size_t>(infer)] = numel() / known;
  }
  LB_CHECK(shape_numel(out) == numel(), "reshape: cannot view {} as {}", describe(), shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(out);
  return t;
}

Tensor Tensor::slice(int64_t start, int64_t length) const {
  LB_CHECK(ndim() >= 1, "slice of a scalar");
  LB_CHECK(start >= 0 && length >= 0 && start + length <= shape_[0],
           "slice [{}, {}) out of range for {}", start, start + length, describe());
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  Tensor t = *this;
  t.shape_[0] = length;
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(start * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::operator[](int64_t i) const {
  Tensor t = slice(i, 1);
  t.shape_.erase(t.shape_.begin());
  return t;
}

Tensor Tensor::clone() const {
  LB_CHECK(is_cpu(), "clone: only CPU tensors ({}), use the backend for device copies", describe());
  Tensor t = empty(shape_, dtype_);
  std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::to_dtype(DType dtype) const {
  LB_CHECK(is_cpu(), "to_dtype: only CPU tensors ({})", describe());
  if (dtype == dtype_) return clone();
  const int64_t n = numel();
  // Everything goes through float32: these are weights and images, never
  // integer data that would lose precision.
  auto read = [&](int64_t i) -> float {
    switch (dtype_) {
      case DType::F32: return static_cast<const float*>(data_)[i];
      case DType::F64: return static_cast<float>(static_cast<const double*>(data_)[i]);
      case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data_)[i]);
      case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data_)[i]);
      case DType::U8: return static_cast<const uint8_t*>(data_)[i];
      case DType::I8: return static_cast<const int8_t*>(data_)[i];
      case DType::I16: return static_cast<const int16_t*>(data_)[i];
      case DType::I32: return static_cast<float>(static_cast<const int32_t*>(data_)[i]);
      case DType::I64: return static_cast<float>(static_cast<const int64_t*>(data_)[i]);
      case DType::Bool: return static_cast<const uint8_t*>(data_)[i] ? 1.f : 0.f;
    }
    return 0.f;
  };
  Tensor t = empty(shape_, dtype);
  for (int64_t i = 0; i < n; ++i) {
    const float v = read(i);
    switch (dtype) {
      case DType::F32: t.data_as<float>()[i] = v; break;
      case DType::F64: t.data_as<double>()[i] = v; break;
      case DType::F16: t.data_as<uint16_t>()[i] = f32_to_f16(v); break;
      case DType::BF16: t.data_as<uint16_t>()[i] = f32_to_bf16(v); break;
      default: fail("to_dtype: cannot convert {} to {}", dtype_name(dtype_), dtype_name(dtype));
    }
  }
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  LB_CHECK(is_cpu() && src.is_cpu(), "copy_from: CPU tensors only ({} <- {})", describe(),
           src.describe());
  LB_CHECK(shape_ == src.shape_ && dtype_ == src.dtype_, "copy_from: {} <- {}", describe(),
           src.describe());
  std::memcpy(data_, src.data_, nbytes());
}

std::string Tensor::describe() const {
  return fmt::format("{}{} on {}", dtype_name(dtype_), shape_str(shape_), device_name(device_));
}

}  // namespace lingbot
