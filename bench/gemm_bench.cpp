// CPU matrix products (and the bf16 mode's convolutions) on the model's shapes: the CPU backend's (oneDNN's
// sgemm, gemm.h) against OpenBLAS where it is installed. docs/PERF.md records
// why the backend moved from OpenBLAS to oneDNN with these figures.
//
//   out[M, N] = x[M, K] w[N, K]^T   (a Linear layer: M tokens, K in, N out)
//
// OPENBLAS_CORETYPE=SkylakeX (or Haswell) overrides OpenBLAS's choice of
// kernels; LINGBOT_CPU_ISA=avx2 caps oneDNN at AVX2.
#include "backend/cpu/bf16_convert.h"
#include "backend/cpu/conv_amx.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/linear_amx.h"
#include "backend/cpu/onednn_matmul.h"

#include <benchmark/benchmark.h>

#ifdef LINGBOT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include <random>
#include <utility>
#include <vector>

namespace {

struct Matrices {
  std::vector<float> x, w, out;
  Matrices(int64_t m, int64_t n, int64_t k) : x(m * k), w(n * k), out(m * n) {
    std::mt19937 rng(1);
    std::normal_distribution<float> d;
    for (float& v : x) v = d(rng);
    for (float& v : w) v = d(rng);
  }
};

void report(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}

void BM_Backend(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Matrices t(m, n, k);
  state.SetLabel(lingbot::cpu::gemm_name());
  for (auto _ : state) {
    lingbot::cpu::gemm_abt(m, n, k, t.x.data(), k, t.w.data(), k, t.out.data(), n);
    benchmark::DoNotOptimize(t.out.data());
  }
  report(state, m, n, k);
}

// The bf16 mode's product (--cpu-dtype bf16, onednn_matmul.h): bf16 x and w,
// float32 sums, bf16 out; range(3) = 1 also times rounding x from float32
// first, as a block's first product of a float32 input does.
void BM_Bf16Matmul(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  if (!lingbot::cpu::cpu_has_bf16_arithmetic()) {
    state.SkipWithError("no AVX512-BF16");
    return;
  }
  Matrices t(m, n, k);
  std::vector<uint16_t> x(t.x.size()), w(t.w.size()), out(t.out.size());
  lingbot::cpu::bf16_from_f32(t.x.data(), x.data(), m * k);
  lingbot::cpu::bf16_from_f32(t.w.data(), w.data(), n * k);
  lingbot::cpu::OnednnMatmuls matmuls;
  state.SetLabel(lingbot::cpu::bf16_matmul_name());
  for (auto _ : state) {
    matmuls.run({m, k, n}, lingbot::DType::BF16, x.data(), w.data(), nullptr, lingbot::Activation::None,
                lingbot::cpu::MatmulDst::Bf16, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  report(state, m, n, k);
}

// The same product on weights packed once beforehand (packed_weights.h), as
// the bf16 mode's encoder and aggregator run them.
void BM_Bf16MatmulPacked(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  if (!lingbot::cpu::cpu_has_bf16_arithmetic()) {
    state.SkipWithError("no AVX512-BF16");
    return;
  }
  lingbot::cpu::OnednnMatmuls matmuls;
  if (!matmuls.packs(lingbot::DType::BF16, k, n)) {
    state.SkipWithError("no packed layout for this shape");
    return;
  }
  Matrices t(m, n, k);
  std::vector<uint16_t> x(t.x.size()), w(t.w.size()), packed(t.w.size()), out(t.out.size());
  lingbot::cpu::bf16_from_f32(t.x.data(), x.data(), m * k);
  lingbot::cpu::bf16_from_f32(t.w.data(), w.data(), n * k);
  matmuls.pack_weights(lingbot::DType::BF16, k, n, w.data(), packed.data());
  state.SetLabel(lingbot::cpu::bf16_matmul_name() + ", packed");
  for (auto _ : state) {
    matmuls.run({m, k, n}, lingbot::DType::BF16, x.data(), packed.data(), nullptr, lingbot::Activation::None,
                lingbot::cpu::MatmulDst::Bf16, out.data(), lingbot::cpu::WeightLayout::Packed);
    benchmark::DoNotOptimize(out.data());
  }
  report(state, m, n, k);
}

// The fp32 mode's Linear as the model calls it (CpuBackend::linear, with the
// bias, and GELU on the fc1 shape): on weights packed at upload
// (upload_linear_weight: oneDNN's matmul, bias and GELU inside it), or
// row-major ones (upload: sgemm, then a bias and activation pass).
void f32_linear(benchmark::State& state, bool packed) {
  using namespace lingbot;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Matrices t(m, n, k);
  cpu::CpuBackend backend(0, cpu::resolve_isa("auto"));
  Tensor x = Tensor::empty({m, k}), host_w = Tensor::empty({n, k}), bias = Tensor::empty({n});
  std::copy(t.x.begin(), t.x.end(), x.f32());
  std::copy(t.w.begin(), t.w.end(), host_w.f32());
  for (int64_t i = 0; i < n; ++i) bias.f32()[i] = 0.01f * static_cast<float>(i % 7);
  const Tensor w = packed ? backend.upload_linear_weight(host_w, DType::F32) : backend.upload(host_w, DType::F32);
  const Activation act = n == 4 * k ? Activation::Gelu : Activation::None;
  Tensor out = Tensor::empty({m, n});
  state.SetLabel(packed ? "oneDNN matmul, packed weights" : cpu::gemm_name());
  for (auto _ : state) {
    backend.linear(x, w, &bias, out, act);
    benchmark::DoNotOptimize(out.data());
  }
  report(state, m, n, k);
}
void BM_F32Linear(benchmark::State& state) { f32_linear(state, false); }
void BM_F32LinearPacked(benchmark::State& state) { f32_linear(state, true); }

// The bf16 mode's Linear as the model calls it (CpuBackend::linear, bf16 x,
// w and out, no bias), with the kernel for CPUs without AMX: the weights
// widened to float32, then sgemm. Against BM_Backend: the widening's cost.
void BM_Bf16LinearWidened(benchmark::State& state) {
  using namespace lingbot;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Matrices t(m, n, k);
  cpu::CpuBackend backend(0, cpu::resolve_isa("auto"), DType::BF16, cpu::Bf16Products::WidenedSgemm);
  Tensor x = Tensor::empty({m, k}), w = Tensor::empty({n, k});
  std::copy(t.x.begin(), t.x.end(), x.f32());
  std::copy(t.w.begin(), t.w.end(), w.f32());
  const Tensor xb = x.to_dtype(DType::BF16), wb = w.to_dtype(DType::BF16);
  Tensor out = Tensor::empty({m, n}, DType::BF16);
  state.SetLabel(backend.name());
  for (auto _ : state) {
    backend.linear(xb, wb, nullptr, out, Activation::None);
    benchmark::DoNotOptimize(out.data());
  }
  report(state, m, n, k);
}

// The bf16 mode's Linear as the model's blocks call it (CpuBackend::linear:
// bf16 x and out, the bias, GELU on the fc1 shape) on weights packed at
// upload, by the kernel range(3) names: 0 oneDNN's matmul, 1 our AMX tiles
// (linear_amx.h; skipped where the CPU has no AMX).
void BM_Bf16Linear(benchmark::State& state) {
  using namespace lingbot;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool amx = state.range(3) == 1;
  if (!cpu::cpu_has_bf16_arithmetic() || (amx && !cpu::linear_amx_available())) {
    state.SkipWithError(amx ? "no AMX-BF16" : "no AVX512-BF16");
    return;
  }
  Matrices t(m, n, k);
  cpu::CpuBackend backend(0, cpu::resolve_isa("auto"), DType::BF16,
                          amx ? cpu::Bf16Products::AmxTiles : cpu::Bf16Products::OnednnBf16);
  Tensor x = Tensor::empty({m, k}), host_w = Tensor::empty({n, k}), bias = Tensor::empty({n});
  std::copy(t.x.begin(), t.x.end(), x.f32());
  std::copy(t.w.begin(), t.w.end(), host_w.f32());
  for (int64_t i = 0; i < n; ++i) bias.f32()[i] = 0.01f * static_cast<float>(i % 7);
  const Tensor xb = x.to_dtype(DType::BF16);
  const Tensor w = backend.upload_linear_weight(host_w, DType::BF16);
  const Activation act = n == 4 * k ? Activation::Gelu : Activation::None;
  Tensor out = Tensor::empty({m, n}, DType::BF16);
  state.SetLabel(std::string(amx ? "ours, AMX tiles" : cpu::bf16_matmul_name()) + (act == Activation::Gelu ? ", GELU" : ""));
  for (auto _ : state) {
    backend.linear(xb, w, &bias, out, act);
    benchmark::DoNotOptimize(out.data());
  }
  report(state, m, n, k);
}
void bf16_linear_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t kernel : {0, 1})
    for (int64_t m : {978, 7824})
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{3072, 1024}, {1024, 1024}, {4096, 1024}, {1024, 4096}})
        b->Args({m, n, k, kernel});
  b->ArgNames({"M", "N", "K", "amx"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

// The bf16 mode's convolutions as the depth head calls them
// (CpuBackend::conv2d_nhwc: float32 channels-last maps, bf16 operands, the
// bias and ReLU) by the kernel range(6) names: 0 oneDNN's convolution, 1 our
// AMX tiles (conv_amx.h, its weights packed at the first call as the
// model's are; skipped where the CPU has no AMX). range(0..5): the
// input's height, width and channels, the output channels, the kernel and
// the stride (padding kernel / 2).
void BM_Bf16Conv(benchmark::State& state) {
  using namespace lingbot;
  const int64_t h = state.range(0), w = state.range(1), cin = state.range(2), cout = state.range(3),
                k = state.range(4);
  const bool amx = state.range(6) == 1;
  if (!cpu::cpu_has_bf16_arithmetic() || (amx && !cpu::conv_amx_available())) {
    state.SkipWithError(amx ? "no AMX-BF16" : "no AVX512-BF16");
    return;
  }
  const int stride = static_cast<int>(state.range(5)), pad = static_cast<int>(k / 2);
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  cpu::CpuBackend backend(0, cpu::resolve_isa("auto"), DType::BF16,
                          amx ? cpu::Bf16Products::AmxTiles : cpu::Bf16Products::OnednnBf16);
  Tensor x = Tensor::empty({1, h, w, cin}), weight = Tensor::empty({cout, k, k, cin}), bias = Tensor::empty({cout});
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = normal(rng);
  for (int64_t i = 0; i < weight.numel(); ++i) weight.f32()[i] = 0.05f * normal(rng);
  for (int64_t i = 0; i < cout; ++i) bias.f32()[i] = 0.01f * static_cast<float>(i % 7);
  Tensor out = Tensor::empty({1, oh, ow, cout});
  state.SetLabel(amx ? "ours, AMX tiles" : "oneDNN convolution, bf16 operands");
  for (auto _ : state) {
    backend.conv2d_nhwc(x, weight, &bias, stride, pad, out, {.act = Activation::Relu});
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * oh * ow * cout * cin * k * k * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
// The depth head's convolutions at 378 x 504 that carry its FLOPs: the
// residual units and layer_rn at 108 x 144, output_conv1 at 216 x 288, the
// 1 x 1 out_conv, and the strided one at 27 x 36.
void bf16_conv_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t kernel : {0, 1}) {
    b->Args({108, 144, 256, 256, 3, 1, kernel});
    b->Args({216, 288, 256, 128, 3, 1, kernel});
    b->Args({108, 144, 256, 256, 1, 1, kernel});
    b->Args({27, 36, 1024, 1024, 3, 2, kernel});
  }
  b->ArgNames({"H", "W", "Cin", "Cout", "K", "S", "amx"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

#ifdef LINGBOT_HAVE_OPENBLAS
void BM_OpenBLAS(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Matrices t(m, n, k);
  state.SetLabel(openblas_get_corename());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, t.x.data(), k, t.w.data(), k, 0.0f,
                t.out.data(), n);
    benchmark::DoNotOptimize(t.out.data());
  }
  report(state, m, n, k);
}
#endif

// Shapes of one frame (978 tokens at 378x504) and of the 8-frame scale phase:
// qkv (1024 -> 3072), proj (1024 -> 1024), fc1 (1024 -> 4096), fc2 (4096 -> 1024);
// and the camera head's one-token Linears (M = 1: a matrix-vector product).
void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {978, 7824}) {
    b->Args({m, 3072, 1024});
    b->Args({m, 1024, 1024});
    b->Args({m, 4096, 1024});
    b->Args({m, 1024, 4096});
  }
  b->Args({1, 2048, 2048});
  b->Args({1, 6144, 2048});
  b->ArgNames({"M", "N", "K"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_Backend)->Apply(shapes);
BENCHMARK(BM_F32Linear)->Apply(shapes);
BENCHMARK(BM_F32LinearPacked)->Apply(shapes);
BENCHMARK(BM_Bf16Matmul)->Apply(shapes);
BENCHMARK(BM_Bf16MatmulPacked)->Apply(shapes);
BENCHMARK(BM_Bf16LinearWidened)->Apply(shapes);
BENCHMARK(BM_Bf16Linear)->Apply(bf16_linear_shapes);
BENCHMARK(BM_Bf16Conv)->Apply(bf16_conv_shapes);
#ifdef LINGBOT_HAVE_OPENBLAS
BENCHMARK(BM_OpenBLAS)->Apply(shapes);
#endif
BENCHMARK_MAIN();
