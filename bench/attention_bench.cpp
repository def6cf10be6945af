// CPU attention throughput (docs/PERF.md, "KV cache (CPU)").
//
// FLOPs counted as 4 * Nq * Nk * head_dim per head (QK^T and PV, a
// multiply-add = 2). Keys are laid out as the paged cache hands them to the
// kernel: one span per page of 972 patch tokens, then the special stream.
//
//   BM_AttentionFullWindow/<threads>/<ranges>: one frame of 978 queries
//     against a full window: (S + W) * 972 patch tokens + 6 specials per
//     stored frame (72 stored frames: 70,416 keys), 16 heads, head_dim 64;
//     the keys cut as attention() does (0: 4 ranges) or not (1).
//   BM_AttentionSelf/<threads>: plain self-attention of one frame (978 x 978),
//     the encoder's and the frame blocks' case.
//   BM_AttentionTiledSelf/<threads>/<isa>: the same with the AVX2 (0) or the
//     AVX-512 (1) build of the tiled kernel.
//   BM_Attention{Tiled,Rows,Naive}Small/<threads>: 128 queries x 8 frames of keys
//     (7,824), where the naive double-precision reference still runs in seconds.
//   BM_AttentionBf16FullWindow/<threads>/<kernel>/<tile>/<splits>,
//   BM_AttentionBf16Self/<threads>/<kernel>/<tile>:
//     the bf16 mode's attention (attention_bf16.h; kernel 0 oneDNN's products,
//     1 AMX tiles; at most <tile> queries per work item; the keys cut into
//     <splits> ranges; 0 for either: as the model chooses, which for the full
//     window is 4 ranges and 512-row tiles) on the same problems, keys and
//     values stored as bfloat16 (as the bf16 mode's KV store keeps them and
//     its self-attention passes a block's own k and v).
#include "backend/cpu/attention.h"
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/bf16_convert.h"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

using namespace lingbot::cpu;

namespace {

constexpr int kHeads = 16;
constexpr int kHeadDim = 64;
constexpr int kPatches = 972;
constexpr int kSpecials = 6;
constexpr int kTokensPerFrame = kPatches + kSpecials;

struct Problem {
  std::vector<float> q, k, v, out;
  std::vector<KvSpan> spans;
  int64_t nq = 0, nk = 0;
};

// `frames` frame pages of kPatches keys, then kSpecials * frames special keys.
Problem make_problem(int64_t nq, int frames) {
  Problem p;
  p.nq = nq;
  p.nk = int64_t{frames} * kTokensPerFrame;
  const int64_t row = int64_t{kHeads} * kHeadDim;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  p.q.resize(static_cast<size_t>(nq * row));
  p.out.resize(p.q.size());
  p.k.resize(static_cast<size_t>(p.nk * row));
  p.v.resize(p.k.size());
  for (float& x : p.q) x = normal(rng);
  for (float& x : p.k) x = normal(rng);
  for (float& x : p.v) x = normal(rng);
  int64_t at = 0;
  for (int f = 0; f < frames; ++f, at += kPatches) {
    p.spans.push_back({p.k.data() + at * row, p.v.data() + at * row, kPatches});
  }
  p.spans.push_back({p.k.data() + at * row, p.v.data() + at * row, int64_t{frames} * kSpecials});
  return p;
}

Problem make_self(int64_t n) {
  Problem p = make_problem(n, 1);
  p.spans = {{p.k.data(), p.v.data(), n}};
  p.nk = n;
  return p;
}

// Times attend(q, out) on `threads` threads over p's shape and reports GFLOP/s.
template <typename Attend>
void time_attention(benchmark::State& state, const Problem& p, int threads, Attend&& attend) {
  omp_set_num_threads(threads);
  const float scale = 1.f / std::sqrt(static_cast<float>(kHeadDim));
  for (auto _ : state) {
    attend(scale);
    benchmark::DoNotOptimize(p.out.data());
  }
  const double flops = 4.0 * static_cast<double>(p.nq) * static_cast<double>(p.nk) * kHeadDim * kHeads;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The problem with its keys and values stored as bfloat16 (the values rounded).
struct Bf16Problem {
  Problem p;
  std::vector<uint16_t> k, v;
};

Bf16Problem with_bf16_keys(Problem p) {
  Bf16Problem b;
  b.k.resize(p.k.size());
  b.v.resize(p.v.size());
  bf16_from_f32(p.k.data(), b.k.data(), static_cast<int64_t>(p.k.size()));
  bf16_from_f32(p.v.data(), b.v.data(), static_cast<int64_t>(p.v.size()));
  const int64_t row = int64_t{kHeads} * kHeadDim;
  for (KvSpan& s : p.spans) {
    const int64_t at = (static_cast<const float*>(s.k) - p.k.data()) / row;
    s = {b.k.data() + at * row, b.v.data() + at * row, s.tokens, KvElement::Bf16};
  }
  b.p = std::move(p);
  return b;
}

void run_bf16(benchmark::State& state, Problem& p, int splits) {
  const auto kernel = state.range(1) == 0 ? detail::Bf16Kernel::Onednn : detail::Bf16Kernel::Amx;
  if (!detail::bf16_kernel_available(kernel, kHeadDim)) {
    state.SkipWithError("this CPU or build lacks that kernel");
    return;
  }
  const int tile_rows = static_cast<int>(state.range(2));
  time_attention(state, p, static_cast<int>(state.range(0)), [&](float scale) {
    detail::attention_bf16_with(kernel, p.q.data(), p.nq, p.spans, kHeads, kHeadDim, scale, p.out.data(), tile_rows,
                                splits);
  });
}

void run(benchmark::State& state, Problem& p, detail::Kernel kernel, bool naive) {
  time_attention(state, p, static_cast<int>(state.range(0)), [&](float scale) {
    if (naive) {
      attention_reference(p.q.data(), p.nq, p.spans, kHeads, kHeadDim, scale, p.out.data());
    } else {
      detail::attention_with(kernel, p.q.data(), p.nq, p.spans, kHeads, kHeadDim, scale, p.out.data());
    }
  });
  state.counters["Nq"] = static_cast<double>(p.nq);
  state.counters["Nk"] = static_cast<double>(p.nk);
}

void BM_AttentionFullWindow(benchmark::State& state) {
  static Problem p = make_problem(kTokensPerFrame, 72);
  const int ranges = static_cast<int>(state.range(1));
  time_attention(state, p, static_cast<int>(state.range(0)), [&](float scale) {
    detail::attention_with(detail::Kernel::Auto, p.q.data(), p.nq, p.spans, kHeads, kHeadDim, scale, p.out.data(),
                           ranges);
  });
}
void BM_AttentionSelf(benchmark::State& state) {
  static Problem p = make_self(kTokensPerFrame);
  run(state, p, detail::Kernel::Auto, false);
}
// The tiled kernel of each ISA on the same problem: args = threads, ISA (0 AVX2, 1 AVX-512).
void BM_AttentionTiledSelf(benchmark::State& state) {
  static Problem p = make_self(kTokensPerFrame);
  const auto kernel = state.range(1) == 0 ? detail::Kernel::TiledAvx2 : detail::Kernel::TiledAvx512;
  if (!detail::kernel_available(kernel)) {
    state.SkipWithError("this CPU or build lacks that kernel");
    return;
  }
  run(state, p, kernel, false);
}
void BM_AttentionTiledSmall(benchmark::State& state) {
  static Problem p = make_problem(128, 8);
  run(state, p, detail::Kernel::Tiled, false);
}
void BM_AttentionRowsSmall(benchmark::State& state) {
  static Problem p = make_problem(128, 8);
  run(state, p, detail::Kernel::Rows, false);
}
void BM_AttentionNaiveSmall(benchmark::State& state) {
  static Problem p = make_problem(128, 8);
  run(state, p, detail::Kernel::Auto, true);
}

void BM_AttentionBf16FullWindow(benchmark::State& state) {
  static Bf16Problem b = with_bf16_keys(make_problem(kTokensPerFrame, 72));
  run_bf16(state, b.p, static_cast<int>(state.range(3)));
}
void BM_AttentionBf16Self(benchmark::State& state) {
  static Bf16Problem b = with_bf16_keys(make_self(kTokensPerFrame));
  run_bf16(state, b.p, 0);
}

// Few queries (the camera head, a non-tiled shape): args = nq, kernel (0 tiled, 1 rows), 1 thread.
void BM_AttentionFewQueries(benchmark::State& state) {
  static Problem p = make_problem(8, 8);
  Problem view = p;
  view.nq = state.range(0);
  const auto kernel = state.range(1) == 0 ? detail::Kernel::Tiled : detail::Kernel::Rows;
  time_attention(state, view, 1, [&](float scale) {
    detail::attention_with(kernel, view.q.data(), view.nq, view.spans, kHeads, kHeadDim, scale, view.out.data());
  });
}

}  // namespace

BENCHMARK(BM_AttentionFewQueries)->ArgsProduct({{1, 2, 4, 8}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionFullWindow)
    ->ArgsProduct({{1, 2, 4, 8, 12, 16}, {0, 1}})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_AttentionSelf)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionTiledSelf)->ArgsProduct({{1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionTiledSmall)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionRowsSmall)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionBf16FullWindow)
    ->ArgsProduct({{1, 2, 4, 8, 16}, {0, 1}, {0, detail::kBf16MaxQueryTile, 256, 128}, {0, 1, 2, 4}})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_AttentionBf16Self)
    ->ArgsProduct({{1, 2, 16}, {0, 1}, {0, detail::kBf16MaxQueryTile, 256, 128}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionNaiveSmall)->Arg(1)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

BENCHMARK_MAIN();
