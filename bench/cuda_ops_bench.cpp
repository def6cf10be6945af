// CUDA backend ops outside attention at the aggregator's shapes (docs/PERF.md).
// Each timed interval enqueues the op kReps times on the backend's stream
// between two CUDA events (so host launch overhead overlaps GPU work) and
// reports the mean per op. Exits cleanly when there is no GPU.
//
//   BM_Linear/<N>/<M>/<K>/<measured>: bf16 linear with bias, out[N, M] = x[N,
//     K] w[M, K]^T; N = 978 (one frame) and 7824 (the 8-frame scale phase);
//     (M, K) = qkv (3072, 1024), attention projection (1024, 1024), fc1 (4096,
//     1024), fc2 (1024, 4096); the algorithm from cuBLASLt's heuristic
//     (measured:0) or timed (measured:1, --gemm-algorithm measured). TFLOP/s
//     counts 2 N M K.
//   BM_LinearGelu/<N>: fc1 with the separate erf-GELU pass.
//   BM_LinearResidual/<N>/<K>: proj (K = 1024) and fc2 (K = 4096) into the
//     residual with LayerScale.
//   BM_LinearIntoF32Residual/<N>/<K>/<measured>: the blocks' update as the
//     model runs it: proj or fc2 added into the float32 residual stream in
//     cuBLASLt's epilogue (LayerScale folded into the weights).
//   BM_LinearF32/<N>/<M>/<K>/<tf32>: the heads' float32 products (camera head
//     8 x 2048 -> 8192; DPT projection 7776 x 2048 -> 1024), TF32 or full fp32.
//   BM_LayerNorm/<N>: bf16 [N, 1024]; GB/s counts one read and one write.
//   BM_LayerNormF32In/<N>: the aggregator's norm1/norm2: float32 residual
//     stream [N, 1024] in, bf16 out; GB/s counts 4 + 2 bytes per element.
//   BM_SplitQkv/<N>: bf16 qkv [N, 3072] -> q, k, v with qk-norm and 2D RoPE;
//     GB/s counts the qkv read and the three writes.
//   BM_Conv2d/<case>/<bf16>/<measured>: the depth head's convolutions of one
//     378 x 504 frame, channels last, float32 maps with TF32 (bf16:0) or
//     bfloat16 maps (bf16:1), the algorithm from cuDNN's heuristic
//     (measured:0) or timed (measured:1); the label names the algorithm.

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/conv.h"
#include "backend/cuda/cuda_check.h"
#include "model/rope.h"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <random>

using namespace lingbot;
using lingbot::cuda::CudaBackend;

namespace {

constexpr int kReps = 10;

CudaBackend& backend(bool tf32 = true) {
  static CudaBackend* with_tf32 = new CudaBackend();
  static CudaBackend* without_tf32 = [] {
    cuda::CudaBackendOptions o;
    o.allow_tf32 = false;
    return new CudaBackend(o);
  }();
  return tf32 ? *with_tf32 : *without_tf32;
}

// The default backend, or one whose matrix products time their candidates.
CudaBackend& gemm_backend(bool measured) {
  static CudaBackend* timed = [] {
    cuda::CudaBackendOptions o;
    o.gemm_algorithm = cuda::GemmAlgorithm::Measured;
    return new CudaBackend(o);
  }();
  return measured ? *timed : backend();
}

Tensor random_device(CudaBackend& be, const Shape& shape, DType dtype, float scale = 1.0f, uint64_t seed = 1) {
  Tensor host = Tensor::empty(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = uniform(rng);
  return be.upload(host, dtype);
}

// Times `op` (kReps launches per interval) with CUDA events on the backend's stream.
void time_op(benchmark::State& state, CudaBackend& be, const std::function<void()>& op) {
  op();  // warm-up: plans, algorithms, scratch
  be.synchronize();
  cudaEvent_t start, stop;
  LB_CUDA_CHECK(cudaEventCreate(&start));
  LB_CUDA_CHECK(cudaEventCreate(&stop));
  for (auto _ : state) {
    LB_CUDA_CHECK(cudaEventRecord(start, be.stream()));
    for (int r = 0; r < kReps; ++r) op();
    LB_CUDA_CHECK(cudaEventRecord(stop, be.stream()));
    LB_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    LB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3 / kReps);
  }
  LB_CUDA_CHECK(cudaEventDestroy(start));
  LB_CUDA_CHECK(cudaEventDestroy(stop));
}

void set_rates(benchmark::State& state, double flops, double bytes) {
  if (flops > 0) state.counters["TFLOP/s"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  if (bytes > 0) state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Linear(benchmark::State& state) {
  const int64_t n = state.range(0), m = state.range(1), k = state.range(2);
  CudaBackend& be = gemm_backend(state.range(3) != 0);
  const Tensor x = random_device(be, {n, k}, DType::BF16);
  const Tensor w = random_device(be, {m, k}, DType::BF16, 0.03f);
  const Tensor b = random_device(be, {m}, DType::F32);
  Tensor out = be.alloc({n, m}, DType::BF16);
  time_op(state, be, [&] { be.linear(x, w, &b, out, Activation::None); });
  set_rates(state, 2.0 * n * m * k, 2.0 * (n * k + m * k + n * m));
}
BENCHMARK(BM_Linear)
    ->ArgNames({"N", "M", "K", "measured"})
    ->ArgsProduct({{978, 7824}, {3072}, {1024}, {0, 1}})
    ->ArgsProduct({{978, 7824}, {1024}, {1024}, {0, 1}})
    ->ArgsProduct({{978, 7824}, {4096}, {1024}, {0, 1}})
    ->ArgsProduct({{978, 7824}, {1024}, {4096}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_LinearGelu(benchmark::State& state) {
  const int64_t n = state.range(0), m = 4096, k = 1024;
  CudaBackend& be = backend();
  const Tensor x = random_device(be, {n, k}, DType::BF16);
  const Tensor w = random_device(be, {m, k}, DType::BF16, 0.03f);
  const Tensor b = random_device(be, {m}, DType::F32);
  Tensor out = be.alloc({n, m}, DType::BF16);
  time_op(state, be, [&] { be.linear(x, w, &b, out, Activation::Gelu); });
  set_rates(state, 2.0 * n * m * k, 0);
}
BENCHMARK(BM_LinearGelu)->ArgName("N")->Arg(978)->Arg(7824)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_LinearResidual(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = 1024;
  CudaBackend& be = backend();
  const Tensor x = random_device(be, {n, k}, DType::BF16);
  const Tensor w = random_device(be, {m, k}, DType::BF16, 0.03f);
  const Tensor b = random_device(be, {m}, DType::F32);
  const Tensor g = random_device(be, {m}, DType::F32, 0.1f);
  Tensor residual = random_device(be, {n, m}, DType::BF16);
  time_op(state, be, [&] { be.linear_residual(x, w, &b, &g, residual); });
  set_rates(state, 2.0 * n * m * k, 0);
}
BENCHMARK(BM_LinearResidual)
    ->ArgNames({"N", "K"})
    ->ArgsProduct({{978, 7824}, {1024, 4096}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_LinearIntoF32Residual(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = 1024;
  CudaBackend& be = gemm_backend(state.range(2) != 0);
  const Tensor x = random_device(be, {n, k}, DType::BF16);
  const Tensor w = random_device(be, {m, k}, DType::BF16, 0.03f);
  const Tensor b = random_device(be, {m}, DType::F32);
  Tensor residual = random_device(be, {n, m}, DType::F32);
  time_op(state, be, [&] { be.linear_residual(x, w, &b, nullptr, residual); });
  set_rates(state, 2.0 * n * m * k, 0);
}
BENCHMARK(BM_LinearIntoF32Residual)
    ->ArgNames({"N", "K", "measured"})
    ->ArgsProduct({{978, 7824}, {1024, 4096}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_LinearF32(benchmark::State& state) {
  const int64_t n = state.range(0), m = state.range(1), k = state.range(2);
  CudaBackend& be = backend(state.range(3) != 0);
  const Tensor x = random_device(be, {n, k}, DType::F32);
  const Tensor w = random_device(be, {m, k}, DType::F32, 0.03f);
  const Tensor b = random_device(be, {m}, DType::F32);
  Tensor out = be.alloc({n, m}, DType::F32);
  time_op(state, be, [&] { be.linear(x, w, &b, out, Activation::None); });
  set_rates(state, 2.0 * n * m * k, 0);
}
BENCHMARK(BM_LinearF32)
    ->ArgNames({"N", "M", "K", "tf32"})
    ->ArgsProduct({{8}, {8192}, {2048}, {1, 0}})
    ->ArgsProduct({{7776}, {1024}, {2048}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The camera head's layers while streaming (one token, float32 weights),
// through the backend: the weight-streaming kernel (gemv.cu). GB/s counts
// the weights, which dominate.
void BM_CameraLayer(benchmark::State& state) {
  const int64_t n = 1, m = state.range(0), k = state.range(1);
  CudaBackend& be = backend();
  const Tensor x = random_device(be, {n, k}, DType::F32);
  const Tensor w = random_device(be, {m, k}, DType::F32, 0.03f);
  const Tensor b = random_device(be, {m}, DType::F32);
  Tensor out = be.alloc({n, m}, DType::F32);
  time_op(state, be, [&] { be.linear(x, w, &b, out, Activation::None); });
  set_rates(state, 2.0 * n * m * k, 4.0 * m * k);
}
BENCHMARK(BM_CameraLayer)
    ->ArgNames({"M", "K"})
    ->Args({6144, 2048})
    ->Args({2048, 2048})
    ->Args({8192, 2048})
    ->Args({2048, 8192})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// LayerNorm of N x 1024 into bf16, from bf16 (f32_in 0) or from the float32
// residual stream (f32_in 1: the aggregator's case).
void BM_LayerNorm(benchmark::State& state) {
  const int64_t n = state.range(0), c = 1024;
  const DType in = state.range(1) != 0 ? DType::F32 : DType::BF16;
  CudaBackend& be = backend();
  const Tensor x = random_device(be, {n, c}, in);
  const Tensor w = random_device(be, {c}, DType::F32);
  const Tensor b = random_device(be, {c}, DType::F32);
  Tensor out = be.alloc({n, c}, DType::BF16);
  time_op(state, be, [&] { be.layer_norm(x, &w, &b, 1e-5f, out); });
  set_rates(state, 0, (static_cast<double>(dtype_size(in)) + 2.0) * n * c);
}
BENCHMARK(BM_LayerNorm)
    ->ArgNames({"N", "f32_in"})
    ->ArgsProduct({{978, 7824}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_SplitQkv(benchmark::State& state) {
  const int64_t n = state.range(0);
  constexpr int kHeads = 16, kHeadDim = 64;
  constexpr int64_t C = kHeads * kHeadDim;
  CudaBackend& be = backend();
  const Tensor qkv = random_device(be, {n, 3 * C}, DType::BF16);
  const Tensor qw = random_device(be, {kHeadDim}, DType::F32), qb = random_device(be, {kHeadDim}, DType::F32);
  const Tensor kw = random_device(be, {kHeadDim}, DType::F32), kb = random_device(be, {kHeadDim}, DType::F32);
  const QkNorm norm{&qw, &qb, &kw, &kb, 1e-5f};
  Tensor cos, sin;
  rope2d_table(FrameGrid{6, 27, 36}, kHeadDim, 100.0, cos, sin);
  const RopeTable rope{be.upload(cos, DType::F32), be.upload(sin, DType::F32), RopeTable::Pairs::HalfSplit};
  Tensor q = be.alloc({n, C}, DType::BF16), k = be.alloc({n, C}, DType::BF16), v = be.alloc({n, C}, DType::BF16);
  time_op(state, be, [&] { be.split_qkv(qkv, kHeads, kHeadDim, &norm, &rope, q, k, v); });
  set_rates(state, 0, 2.0 * (3 * n * C + 3 * n * C));
}
BENCHMARK(BM_SplitQkv)->ArgName("N")->Arg(978)->Arg(7824)->UseManualTime()->Unit(benchmark::kMicrosecond);

struct ConvBench {
  const char* name;
  int64_t cin, h, w, cout, k, stride;
};
// The depth head's convolutions of one 378 x 504 frame (patch grid 27 x 36),
// the largest by FLOPs first.
const ConvBench kConvs[] = {
    {"refinenet1 rcu 256@108x144 3x3 (x4)", 256, 108, 144, 256, 3, 1},
    {"output_conv1 256@216x288 -> 128 3x3", 256, 216, 288, 128, 3, 1},
    {"output_conv2.0 128@378x504 -> 32 3x3", 128, 378, 504, 32, 3, 1},
    {"refinenet1 out_conv 256@216x288 1x1", 256, 216, 288, 256, 1, 1},
    {"layer3_rn 1024@27x36 -> 256 3x3", 1024, 27, 36, 256, 3, 1},
    {"resize_layers.3 1024@27x36 3x3 stride 2", 1024, 27, 36, 1024, 3, 2},
    {"output_conv2.2 32@378x504 -> 2 1x1", 32, 378, 504, 2, 1, 1},
};

CudaBackend& conv_backend(bool measured) {
  static CudaBackend* heuristic = new CudaBackend();
  static CudaBackend* timed = [] {
    cuda::CudaBackendOptions o;
    o.conv_algorithm = cuda::ConvAlgorithm::Measured;
    return new CudaBackend(o);
  }();
  return measured ? *timed : *heuristic;
}

void BM_Conv2d(benchmark::State& state) {
  const ConvBench& c = kConvs[state.range(0)];
  const DType maps = state.range(1) != 0 ? DType::BF16 : DType::F32;
  CudaBackend& be = conv_backend(state.range(2) != 0);
  const int64_t oh = (c.h + 2 * (c.k / 2) - c.k) / c.stride + 1, ow = (c.w + 2 * (c.k / 2) - c.k) / c.stride + 1;
  const Tensor x = random_device(be, {1, c.h, c.w, c.cin}, maps);
  const Tensor w = random_device(be, {c.cout, c.k, c.k, c.cin}, maps, 0.02f);
  const Tensor b = random_device(be, {c.cout}, DType::F32);
  Tensor out = be.alloc({1, oh, ow, c.cout}, maps);
  time_op(state, be, [&] { be.conv2d_nhwc(x, w, &b, static_cast<int>(c.stride), static_cast<int>(c.k / 2), out); });
  cuda::ConvShape shape{.batches = 1, .in_channels = c.cin, .height = c.h, .width = c.w, .out_channels = c.cout,
                        .kernel = c.k, .stride = c.stride, .pad = c.k / 2, .channels_last = true,
                        .bf16 = maps == DType::BF16};
  state.SetLabel(fmt::format("{} | {}", c.name, be.conv().describe_plan(shape)));
  set_rates(state, 2.0 * oh * ow * c.cout * c.cin * c.k * c.k, 0);
}
BENCHMARK(BM_Conv2d)
    ->ArgNames({"case", "bf16", "measured"})
    ->ArgsProduct({benchmark::CreateDenseRange(0, 6, 1), {0, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  if (!cuda::device_available()) {
    std::printf("cuda_ops_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("device: %s\n", backend().name().c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
