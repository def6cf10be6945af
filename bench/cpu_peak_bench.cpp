// What the machine itself can do, as the yardstick for the CPU path's thread
// scaling (issue 19, docs/PERF.md "Threads"): the floating-point peak and the
// memory read bandwidth at each thread count. A virtual machine's CPUs may be
// hyperthreads of fewer cores; then the FMA peak stops growing at the number
// of physical cores, whatever lscpu reports, and no kernel can scale past it.
//
//   BM_FmaPeak/<threads>/<isa>/<dynamic>: independent fused multiply-adds on
//     registers (isa 0: AVX2 8-wide, 1: AVX-512 16-wide), no memory traffic;
//     GFLOP/s. dynamic:0 gives each thread an equal share, so the slowest
//     CPU sets the time; dynamic:1 hands the same work out in 64 chunks per
//     thread as threads free up (as the attention kernel's items are), so
//     the figure is what all the CPUs together deliver.
//   BM_ReadBandwidth/<threads>: a sum over 1 GiB of floats; GB/s.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kFmaSteps = 1 << 22;  // per thread per iteration
constexpr int kChains = 16;             // independent accumulators: hides the FMA latency on 2 ports

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t steps, float seed) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(seed + static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < steps; ++i) {
    // Unrolled whatever the optimisation level: a rolled loop keeps acc in
    // memory and measures store-to-load latency instead (a third of the peak).
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return _mm256_cvtss_f32(sum);  // one lane is enough to keep every chain live
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t steps, float seed) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < steps; ++i) {
    // Unrolled whatever the optimisation level: a rolled loop keeps acc in
    // memory and measures store-to-load latency instead (a third of the peak).
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_cvtss_f32(sum);
}
#endif

void BM_FmaPeak(benchmark::State& state) {
#if defined(__x86_64__)
  const int threads = static_cast<int>(state.range(0));
  const bool avx512 = state.range(1) == 1;
  const bool dynamic = state.range(2) == 1;
  if (avx512 ? !__builtin_cpu_supports("avx512f") : !__builtin_cpu_supports("avx2")) {
    state.SkipWithError("this CPU lacks that instruction set");
    return;
  }
  std::vector<float> sink(static_cast<size_t>(threads));
  constexpr int kChunksPerThread = 64;
  const int chunks = dynamic ? kChunksPerThread * threads : threads;
  const int64_t steps = dynamic ? kFmaSteps / kChunksPerThread : kFmaSteps;
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      float acc = 0.f;
#pragma omp for schedule(dynamic, 1) nowait
      for (int c = 0; c < chunks; ++c)
        acc += avx512 ? fma_avx512(steps, static_cast<float>(c)) : fma_avx2(steps, static_cast<float>(c));
      sink[static_cast<size_t>(t)] = acc;
    }
    benchmark::DoNotOptimize(sink.data());
  }
  const double lanes = avx512 ? 16 : 8;
  const double flops = 2.0 * lanes * kChains * static_cast<double>(steps) * chunks;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
#else
  state.SkipWithError("x86-64 only");
#endif
}

// Sums floats with four vector accumulators, so that the loads, not the
// latency of one chain of additions, set the pace.
#if defined(__x86_64__)
__attribute__((target("avx2"))) float sum_avx2(const float* p, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int a = 0; a < 4; ++a) acc[a] = _mm256_add_ps(acc[a], _mm256_loadu_ps(p + i + 8 * a));
  }
  const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  float total = 0.f;
  for (float x : lanes) total += x;
  for (; i < n; ++i) total += p[i];
  return total;
}
#endif

void BM_ReadBandwidth(benchmark::State& state) {
#if defined(__x86_64__)
  const int threads = static_cast<int>(state.range(0));
  static std::vector<float> data = [] {
    std::vector<float> d(size_t{1} << 28);  // 1 GiB, far beyond the caches
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i) d[static_cast<size_t>(i)] = 1.f;
    return d;
  }();
  const auto n = static_cast<int64_t>(data.size());
  std::vector<float> sink(static_cast<size_t>(threads));
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      const int64_t begin = n * t / threads;
      const int64_t end = n * (t + 1) / threads;
      sink[static_cast<size_t>(t)] = sum_avx2(data.data() + begin, end - begin);
    }
    benchmark::DoNotOptimize(sink.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n) * sizeof(float) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
#else
  state.SkipWithError("x86-64 only");
#endif
}

}  // namespace

BENCHMARK(BM_FmaPeak)
    ->ArgsProduct({{1, 2, 4, 8, 12, 16}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.3);
BENCHMARK(BM_ReadBandwidth)->DenseRange(1, 2)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
