// CpuBackend: memory, the KV cache factory and identification.
// The ops live in cpu_layers.cpp (token matrices) and cpu_image_ops.cpp (NCHW).
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace lingbot {

std::unique_ptr<Backend> make_cpu_backend(int threads, std::string_view isa) {
  return std::make_unique<cpu::CpuBackend>(threads, cpu::resolve_isa(isa));
}

namespace cpu {

CpuBackend::CpuBackend(int threads, Isa isa)
    : threads_(threads), isa_(isa), convolutions_(std::make_unique<OnednnConvolutions>()) {
  use_isa(isa);
  limit_onednn_to(isa);
  if (threads > 0) set_num_threads(threads);
}

std::string CpuBackend::name() const { return fmt::format("cpu ({} threads, {}, own kernels {})", num_threads(), gemm_name(), isa_name(isa_));
}

Tensor CpuBackend::alloc(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, Device::CPU); }

Tensor CpuBackend::upload(const Tensor& host, DType dtype) {
  contracts::check_upload(contract(), host);
  // Same type: share the memory (weights stay in the checkpoint's page-cache
  // mapping instead of being copied). Weights are never written to.
  if (host.dtype() == dtype) return host;
  return host.to_dtype(dtype);
}

void CpuBackend::upload_into(const Tensor& host, Tensor& device) {
  contracts::check_upload_into(contract(), host, device);
  if (host.dtype() == device.dtype()) {
    device.copy_from(host);
  } else {
    device.copy_from(host.to_dtype(device.dtype()));
  }
}

Tensor CpuBackend::download(const Tensor& device) {
  contracts::check_download(contract(), device);
  return device.to_dtype(DType::F32);
}

void CpuBackend::fill(Tensor& t, float value) {
  contracts::check_fill(contract(), t);
  LB_CHECK(t.dtype() == DType::F32, "fill: the cpu backend fills float32 tensors only, got {}", t.describe());
  float* p = t.f32();
  std::fill(p, p + t.numel(), value);
}

void CpuBackend::convert(const Tensor& src, Tensor& dst) {
  contracts::check_convert(contract(), src, dst);
  if (src.dtype() == dst.dtype()) {
    std::memcpy(dst.data(), src.data(), src.nbytes());
  } else {
    const Tensor converted = src.to_dtype(dst.dtype());
    std::memcpy(dst.data(), converted.data(), converted.nbytes());
  }
}

std::unique_ptr<kv::KvCache> CpuBackend::make_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                                       const kv::TokenLayout& tokens, int num_blocks) {
  return kv::make_cpu_cache(layout, config, tokens, num_blocks);
}

}  // namespace cpu
}  // namespace lingbot
