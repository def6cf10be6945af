// CPU matrix products on the model's shapes: OpenBLAS (what the CPU backend
// uses) against oneDNN's sgemm, when oneDNN is available. Issue 4 asks which
// BLAS to use; docs/PERF.md records the answer with these figures.
//
//   out[M, N] = x[M, K] w[N, K]^T   (a Linear layer: M tokens, K in, N out)
#include "backend/cpu/gemm.h"

#include <benchmark/benchmark.h>

#ifdef LINGBOT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <random>
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

void BM_OpenBLAS(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Matrices t(m, n, k);
  for (auto _ : state) {
    lingbot::cpu::gemm_abt(m, n, k, t.x.data(), k, t.w.data(), k, t.out.data(), n);
    benchmark::DoNotOptimize(t.out.data());
  }
  report(state, m, n, k);
}

#ifdef LINGBOT_HAVE_DNNL
void BM_oneDNN(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Matrices t(m, n, k);
  for (auto _ : state) {
    // Row-major: out = x * w^T.
    dnnl_sgemm('N', 'T', m, n, k, 1.0f, t.x.data(), k, t.w.data(), k, 0.0f, t.out.data(), n);
    benchmark::DoNotOptimize(t.out.data());
  }
  report(state, m, n, k);
}
#endif

// Shapes of one frame (978 tokens at 378x504) and of the 8-frame scale phase:
// qkv (1024 -> 3072), proj (1024 -> 1024), fc1 (1024 -> 4096), fc2 (4096 -> 1024).
void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {978, 7824}) {
    b->Args({m, 3072, 1024});
    b->Args({m, 1024, 1024});
    b->Args({m, 4096, 1024});
    b->Args({m, 1024, 4096});
  }
  b->ArgNames({"M", "N", "K"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_OpenBLAS)->Apply(shapes);
#ifdef LINGBOT_HAVE_DNNL
BENCHMARK(BM_oneDNN)->Apply(shapes);
#endif
BENCHMARK_MAIN();
