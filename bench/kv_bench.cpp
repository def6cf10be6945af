// KV cache bookkeeping and store costs per frame step (docs/PERF.md, "KV cache (CPU)").
//
// Configuration: the aggregator's global blocks: W = 64, S = 8, 972 patches +
// 6 specials per frame, 16 heads x 64, default flags. Every benchmark first
// streams enough frames to reach the steady state (scale + full window,
// evicting every step), then times one frame step per iteration.
//
//   BM_PlannerStep/<store>: the paged policy alone (PagePlanner: window
//     decision, page routing, frees, visible table). One plan serves all 24
//     blocks, so this is the whole per-frame-step bookkeeping cost.
//   BM_WindowPolicyStep: the dense policy alone (WindowPolicy::store).
//   BM_StoreStep/<layout 0 dense, 1 paged>/<blocks>/<store>: a CPU store's full step without
//     attention: begin_step, append(block) for every block (row copies
//     into pages or frame slots, retained-special copies), end_step.
#include "backend/cpu/paged_kv_cache.h"
#include "kv/kv_cache.h"
#include "kv/page_planner.h"
#include "kv/window_policy.h"

#include <benchmark/benchmark.h>

#include <random>

using namespace lingbot;
using namespace lingbot::kv;

namespace {

TokenLayout aggregator_layout() {
  TokenLayout l;
  l.num_special = 6;
  l.num_patches = 972;
  l.num_heads = 16;
  l.head_dim = 64;
  return l;
}

constexpr int kWarmupFrames = 200;  // > S + W: the window is full and evicts each step

void BM_PlannerStep(benchmark::State& state) {
  const bool store = state.range(0) != 0;
  PagePlanner planner(CacheConfig{}, aggregator_layout());
  for (int f = 0; f < kWarmupFrames; ++f) {
    planner.begin_step(1, true);
    planner.end_step();
  }
  for (auto _ : state) {
    const StepPlan& plan = planner.begin_step(1, store);
    benchmark::DoNotOptimize(plan.visible.page_ids.data());
    planner.end_step();
  }
  state.SetLabel(store ? "keyframe" : "non-keyframe");
}

void BM_WindowPolicyStep(benchmark::State& state) {
  WindowPolicy window(CacheConfig{}, aggregator_layout());
  for (int f = 0; f < kWarmupFrames; ++f) window.store(1);
  for (auto _ : state) benchmark::DoNotOptimize(window.store(1).data());
}

void BM_StoreStep(benchmark::State& state) {
  const auto layout_kind = state.range(0) == 0 ? Layout::Dense : Layout::Paged;
  const int blocks = static_cast<int>(state.range(1));
  const bool store = state.range(2) != 0;
  const TokenLayout l = aggregator_layout();
  auto cache = make_cpu_cache(layout_kind, CacheConfig{}, l, blocks);
  Tensor k = Tensor::empty({l.tokens_per_frame(), l.num_heads, l.head_dim});
  Tensor v = Tensor::empty(k.shape());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < k.numel(); ++i) k.f32()[i] = u(rng), v.f32()[i] = u(rng);
  auto step = [&](bool keyframe) {
    cache->begin_step(1, keyframe);
    for (int b = 0; b < blocks; ++b) cache->append(b, k, v);
    cache->end_step();
  };
  for (int f = 0; f < 80; ++f) step(true);  // S + W = 72: evicting from here on
  for (auto _ : state) step(store);
  const CacheStats s = cache->stats();
  state.counters["blocks"] = blocks;
  state.counters["GiB_reserved"] = static_cast<double>(s.bytes_reserved) / (1 << 30);
  state.counters["copy_GB/s"] = benchmark::Counter(
      2.0 * static_cast<double>(k.nbytes()) * blocks * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(layout_name(layout_kind)) + (store ? " keyframe" : " non-keyframe"));
}

}  // namespace

BENCHMARK(BM_PlannerStep)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_WindowPolicyStep)->Unit(benchmark::kMicrosecond);
// 24 blocks at fp32 hold ~14 GiB of K/V (each block: 72 frame pages + stream of
// 8 MiB pages); the 4-block rows show the same per-block cost with less memory.
BENCHMARK(BM_StoreStep)
    ->ArgsProduct({{0, 1}, {4, 24}, {1, 0}})
    ->ArgNames({"layout", "blocks", "store"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
