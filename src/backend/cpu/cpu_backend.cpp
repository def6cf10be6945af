// CpuBackend: memory, the KV cache factory and identification.
// The ops live in cpu_layers.cpp (token matrices) and cpu_image_ops.cpp (NCHW).
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/bf16_kv_bridge.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm.h"
#include "core/half.h"
#include "core/log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace lingbot {

std::unique_ptr<Backend> make_cpu_backend(int threads, std::string_view isa) {
  return make_cpu_backend(threads, isa, "fp32");
}

std::unique_ptr<Backend> make_cpu_backend(int threads, std::string_view isa, std::string_view dtype) {
  LB_CHECK(dtype == "fp32" || dtype == "bf16", "--cpu-dtype {}: expected fp32 or bf16", dtype);
  const cpu::Isa kernels = cpu::resolve_isa(isa);
  if (dtype == "bf16") {
    // oneDNN's bf16 matmuls on a CPU without bf16 instructions would be its
    // reference loops (many times slower than fp32): refuse instead.
    LB_CHECK(cpu::cpu_has_bf16_arithmetic(),
             "--cpu-dtype bf16: this CPU lacks AVX512-BF16 (and AMX-BF16); use --cpu-dtype fp32");
    LB_CHECK(kernels == cpu::Isa::Avx512, "--cpu-dtype bf16: needs --cpu-isa auto or avx512, not {}",
             cpu::isa_name(kernels));
    if (!cpu::cpu_has_amx_bf16())
      log_warn("--cpu-dtype bf16: this CPU has AVX512-BF16 but no AMX; its bf16 matrix products are correct but "
               "slower than fp32 (docs/PERF.md); the mode still halves the weight memory");
  }
  return std::make_unique<cpu::CpuBackend>(threads, kernels, dtype == "bf16" ? DType::BF16 : DType::F32);
}

namespace cpu {

CpuBackend::CpuBackend(int threads, Isa isa, DType compute)
    : threads_(threads),
      isa_(isa),
      compute_(compute),
      matmuls_(std::make_unique<OnednnMatmuls>()),
      convolutions_(std::make_unique<OnednnConvolutions>()) {
  LB_CHECK(compute == DType::F32 || compute == DType::BF16, "cpu backend: compute dtype {} (float32 or bfloat16)",
           dtype_name(compute));
  use_isa(isa);
  limit_onednn_to(isa);
  if (threads > 0) set_num_threads(threads);
}

std::string CpuBackend::name() const {
  return fmt::format("cpu ({} threads, {}, own kernels {}{})", num_threads(), gemm_name(), isa_name(isa_),
                     compute_ == DType::BF16 ? ", bf16 matmul " + bf16_matmul_name() : "");
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
  if (t.dtype() == DType::BF16) {
    uint16_t* p = t.data_as<uint16_t>();
    std::fill(p, p + t.numel(), f32_to_bf16(value));
    return;
  }
  LB_CHECK(t.dtype() == DType::F32, "fill: the cpu backend fills float32 or bfloat16 tensors, got {}",
           t.describe());
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
  auto store = kv::make_cpu_cache(layout, config, tokens, num_blocks);
  return compute_ == DType::BF16 ? widen_bf16_for(std::move(store)) : std::move(store);
}

}  // namespace cpu
}  // namespace lingbot
