// CpuBackend: memory, the KV cache factory and identification.
// The ops live in cpu_layers.cpp (token matrices) and cpu_image_ops.cpp (NCHW).
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/bf16_products_choice.h"
#include "backend/cpu/cpu_kv_cache.h"
#include "backend/cpu/bf16_kv_bridge.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/linear_amx.h"
#include "backend/cpu/gemm.h"
#include "core/half.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace lingbot {

std::unique_ptr<Backend> make_cpu_backend(int threads, std::string_view isa) {
  return make_cpu_backend(threads, isa, "fp32");
}

std::unique_ptr<Backend> make_cpu_backend(int threads, std::string_view isa, std::string_view dtype,
                                          std::string_view bf16_products) {
  LB_CHECK(dtype == "fp32" || dtype == "bf16", "--cpu-dtype {}: expected fp32 or bf16", dtype);
  LB_CHECK(bf16_products == "auto" || bf16_products == "amx" || bf16_products == "onednn" ||
               bf16_products == "widened",
           "--cpu-bf16-products {}: expected auto, amx, onednn or widened", bf16_products);
  const cpu::Isa kernels = cpu::resolve_isa(isa);
  const bool bf16 = dtype == "bf16";
  // Asking oneDNN about AMX fixes its ISA ceiling, so not where the backend
  // is about to cap it at AVX2 (--cpu-isa avx2: AVX2 has no bf16 products).
  // The choice may time both kernels: on the threads the backend will use.
  if (bf16 && threads > 0) cpu::set_num_threads(threads);
  cpu::Bf16Products products = cpu::Bf16Products::WidenedSgemm;
  if (bf16 && bf16_products == "amx") {
    LB_CHECK(kernels == cpu::Isa::Avx512 && cpu::linear_amx_available(),
             "--cpu-bf16-products amx: needs AMX-BF16 tiles (and --cpu-isa auto or avx512), which this CPU{} lacks",
             kernels == cpu::Isa::Avx512 ? "" : " under --cpu-isa avx2");
    products = cpu::Bf16Products::AmxTiles;
  } else if (bf16 && bf16_products == "onednn") {
    LB_CHECK(kernels == cpu::Isa::Avx512 && cpu::cpu_has_bf16_arithmetic(),
             "--cpu-bf16-products onednn: needs AVX512-BF16 (and --cpu-isa auto or avx512), which this CPU{} lacks",
             kernels == cpu::Isa::Avx512 ? "" : " under --cpu-isa avx2");
    products = cpu::Bf16Products::OnednnBf16;
  } else if (bf16 && bf16_products == "auto" && kernels == cpu::Isa::Avx512) {
    products = cpu::bf16_products_for_this_cpu();
  }
  return std::make_unique<cpu::CpuBackend>(threads, kernels, bf16 ? DType::BF16 : DType::F32, products);
}

namespace cpu {

Bf16Products bf16_products_for_this_cpu() { return bf16_products_choice().products; }

const char* bf16_products_name(Bf16Products products) {
  switch (products) {
    case Bf16Products::AmxTiles: return "AMX tiles";
    case Bf16Products::OnednnBf16: return "oneDNN bf16 matmul";
    case Bf16Products::WidenedSgemm: break;
  }
  return "bf16 widened to sgemm";
}

CpuBackend::CpuBackend(int threads, Isa isa, DType compute, Bf16Products products)
    : threads_(threads),
      isa_(isa),
      compute_(compute),
      bf16_products_(products),
      matmuls_(std::make_unique<OnednnMatmuls>()),
      convolutions_(std::make_unique<OnednnConvolutions>()) {
  LB_CHECK(compute == DType::F32 || compute == DType::BF16, "cpu backend: compute dtype {} (float32 or bfloat16)",
           dtype_name(compute));
  // oneDNN's bf16 matmuls on a CPU without bf16 instructions would be its
  // reference loops; only tests ask for them explicitly.
  LB_CHECK(compute == DType::F32 || products != Bf16Products::OnednnBf16 || cpu_has_bf16_arithmetic(),
           "--cpu-dtype bf16: oneDNN's bf16 matmuls need AVX512-BF16, which this CPU lacks");
  LB_CHECK(compute == DType::F32 || products != Bf16Products::AmxTiles || linear_amx_available(),
           "--cpu-dtype bf16: the AMX products need AMX-BF16 tiles, which this CPU lacks");
  use_isa(isa);
  limit_onednn_to(isa);
  if (threads > 0) set_num_threads(threads);
  // Where bf16 products are the faster (ours or oneDNN's on AMX, or bf16 dot
  // products at an FMA's rate) attention's products and the DPT convolutions
  // go the same way; with the widened kernel bf16 products would be the
  // slower ones.
  if (compute == DType::BF16 && products != Bf16Products::WidenedSgemm && isa == Isa::Avx512 &&
      bf16_attention_available()) {
    attention_products_ = AttentionProducts::Bf16;
    convolutions_ = std::make_unique<OnednnConvolutions>(/*bf16_operands=*/true);
  }
}

std::string CpuBackend::chosen_because() const {
  // Only for the kernel the CPU's default chose (tests pick theirs), and not
  // under --cpu-isa avx2, which takes the widened kernel without asking (and
  // where oneDNN's bf16 products would be its reference loops).
  if (isa_ != Isa::Avx512) return "";
  if (!cpu_has_bf16_arithmetic() && bf16_products_ == Bf16Products::WidenedSgemm) return " (no AVX512-BF16)";
  const Bf16ProductsChoice& choice = bf16_products_choice();
  return choice.products == bf16_products_ ? fmt::format(" ({})", choice.reason) : std::string();
}

std::string CpuBackend::name() const {
  // The fp32 mode's Linear layers run oneDNN's matmul on packed weights where
  // there is a packed layout, sgemm elsewhere (the camera head, --cpu-isa avx2).
  const std::string linear = compute_ == DType::F32 && matmuls_->packs(DType::F32, 1024, 1024)
                                 ? ", Linear layers: oneDNN matmul on packed weights"
                                 : "";
  return fmt::format("cpu ({} threads, {}{}, own kernels {}{})", num_threads(), gemm_name(), linear, isa_name(isa_),
                     compute_ != DType::BF16                          ? ""
                     : bf16_products_ != Bf16Products::WidenedSgemm
                         ? (bf16_products_ == Bf16Products::AmxTiles
                                ? ", bf16: Linear layers and convolutions on AMX tiles (ours), other products oneDNN matmul "
                                : ", bf16: oneDNN matmul ") +
                               bf16_matmul_name() + chosen_because() +
                               (attention_products_ == AttentionProducts::Bf16
                                    ? fmt::format(", attention bf16 on {}", detail::bf16_attention_kernel_name())
                                    : "")
                         : ", bf16: weights widened to sgemm" + chosen_because());
}

Tensor CpuBackend::alloc(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, Device::CPU); }

Tensor CpuBackend::upload(const Tensor& host, DType dtype) {
  contracts::check_upload(contract(), host);
  // Same type: share the memory (weights stay in the checkpoint's page-cache
  // mapping instead of being copied). Weights are never written to.
  if (host.dtype() == dtype) return host;
  return host.to_dtype(dtype);
}

Tensor CpuBackend::upload_linear_weight(const Tensor& host, DType dtype) {
  Tensor w = upload(host, dtype);
  if (w.ndim() != 2) return w;
  // bf16 weights for our AMX kernel, in the tiles' layout; for oneDNN's bf16
  // products they stay row-major: its AMX products ran no faster on packed
  // ones (docs/PERF.md, "The CPU path", 2026-12-06).
  if (dtype == DType::BF16 && bf16_products_ == Bf16Products::AmxTiles) {
    Tensor tiles = packed_weights_.pack_amx_tiles(w);
    return tiles.defined() ? tiles : w;
  }
  if (dtype != DType::F32) return w;
  Tensor packed = packed_weights_.pack(*matmuls_, w);
  return packed.defined() ? packed : w;
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
  if (packed_weights_.holds(device)) return packed_weights_.unpacked(*matmuls_, device).to_dtype(DType::F32);
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
  if (packed_weights_.holds(src)) {
    convert(packed_weights_.unpacked(*matmuls_, src), dst);
    return;
  }
  if (src.dtype() == dst.dtype()) {
    std::memcpy(dst.data(), src.data(), src.nbytes());
  } else {
    const Tensor converted = src.to_dtype(dst.dtype());
    std::memcpy(dst.data(), converted.data(), converted.nbytes());
  }
}

std::unique_ptr<kv::KvCache> CpuBackend::make_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                                       const kv::TokenLayout& tokens, int num_blocks) {
  const AttentionProducts products = attention_products_;
  auto make_store = [=](const kv::CacheConfig& c) { return make_cpu_store(layout, c, tokens, num_blocks, products); };
  return compute_ == DType::BF16 ? widen_bf16_for(config, make_store) : make_store(config);
}

}  // namespace cpu
}  // namespace lingbot
