// The GPU KV cache (cuda_kv_cache.h) against the CPU stores over random step
// sequences: stored frames, non-keyframes, multi-frame steps and resets under
// random values of all five flags, window and scale sizes and token counts,
// K/V in bf16 or f32.
//   - visible keys: the GPU paged store holds exactly the CPU paged store's
//     rows in the same order (same planner); the GPU dense store holds the
//     same multiset of rows as the CPU dense store (its order differs);
//   - a non-keyframe leaves both GPU stores bit for bit as they were;
//   - attention: GPU dense and GPU paged against the fp64 reference over the
//     CPU dense store's keys (bounds as in attention_dense_test.cpp), and
//     against each other (dense == paged on the GPU);
//   - stats: as the CPU stores report them (bytes scaled to the dtype).
// And with fp8 storage (--kv-dtype fp8) in all four: the GPU stores hold the
// CPU fp8 stores' codes and scales exactly (both quantise the same bf16
// input with the same arithmetic, kv/fp8_e4m3.h), and GPU attention over
// them (read back to bf16) matches the fp64 reference over the CPU's
// dequantised keys.
#include "backend/cpu/attention.h"
#include "backend/cuda/kv/cuda_kv_cache.h"
#include "backend/cuda/kv/kv_append.h"
#include "kv/kv_cache.h"

#include "attention_test_support.h"
#include "kv/kv_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace lingbot;
using namespace lingbot::cuda;
namespace ct = lingbot::cuda::test;
namespace kvt = lingbot::kv::test;

// Host only (runs without a GPU). The append's copy unit is the common
// alignment of the row size and the two source addresses, at most 16 bytes.
// Device allocations aligned to 2 GiB or more once made it negative (the
// lowest set bit taken as an int), and append refused aligned tensors
// (round 19, a 7824-row scale step at 0x7fcd80000000).
TEST(CudaKvAppend, UnitIsTheCommonAlignmentOfRowsAndAddresses) {
  EXPECT_EQ(kv_append_unit_bytes(2048, 0x7fcd80000000u, 0x7fccac000000u), 16);  // 2 GiB-aligned k
  EXPECT_EQ(kv_append_unit_bytes(2048, uintptr_t{1} << 32, uintptr_t{1} << 40), 16);
  EXPECT_EQ(kv_append_unit_bytes(2048, 0x1000, 0x1008), 8);
  EXPECT_EQ(kv_append_unit_bytes(2048, 0x1004, 0x1000), 4);
  EXPECT_EQ(kv_append_unit_bytes(6, 0x1000, 0x1000), 2);  // rows of 3 bfloat16
  EXPECT_EQ(kv_append_unit_bytes(2048, 0x1001, 0x1000), 1);
  EXPECT_EQ(kv_append_unit_bytes(0, 0, 0), 16);
}

namespace {

using Rows = std::vector<std::vector<float>>;

Rows sorted_rows(const std::pair<Tensor, Tensor>& kv) {
  const int64_t n = kv.first.dim(0);
  const int64_t row = n == 0 ? 0 : kv.first.numel() / n;
  Rows rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto& r = rows[static_cast<size_t>(i)];
    r.assign(kv.first.f32() + i * row, kv.first.f32() + (i + 1) * row);
    r.insert(r.end(), kv.second.f32() + i * row, kv.second.f32() + (i + 1) * row);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

Tensor reference_attention(const kv::TokenLayout& l, const std::pair<Tensor, Tensor>& kv, const Tensor& q) {
  const cpu::KvSpan span{kv.first.f32(), kv.second.f32(), kv.first.dim(0)};
  Tensor out = Tensor::empty(q.shape());
  cpu::attention_reference(q.f32(), q.dim(0), {&span, 1}, l.num_heads, l.head_dim,
                           1.f / std::sqrt(static_cast<float>(l.head_dim)), out.f32());
  return out;
}

// dtype: the GPU store's element type where the CPU store holds float32;
// F32 where both hold the same storage type (fp8).
void expect_same_stats(const kv::CacheStats& cpu, const kv::CacheStats& gpu, DType dtype, bool paged,
                       const std::string& where, bool compare_reserved = true) {
  EXPECT_EQ(gpu.frames_seen, cpu.frames_seen) << where;
  EXPECT_EQ(gpu.frames_stored, cpu.frames_stored) << where;
  EXPECT_EQ(gpu.frames_listed, cpu.frames_listed) << where;
  EXPECT_EQ(gpu.scale_frames, cpu.scale_frames) << where;
  EXPECT_EQ(gpu.window_frames, cpu.window_frames) << where;
  EXPECT_EQ(gpu.frames_evicted, cpu.frames_evicted) << where;
  EXPECT_EQ(gpu.special_tokens_retained, cpu.special_tokens_retained) << where;
  EXPECT_EQ(gpu.visible_tokens, cpu.visible_tokens) << where;
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  EXPECT_EQ(gpu.bytes_in_use, cpu.bytes_in_use / 4 * elem) << where;
  if (paged) {
    EXPECT_EQ(gpu.page_size, cpu.page_size) << where;
    EXPECT_EQ(gpu.pages_pool, cpu.pages_pool) << where;
    EXPECT_EQ(gpu.pages_in_use, cpu.pages_in_use) << where;
    EXPECT_EQ(gpu.pages_free, cpu.pages_free) << where;
    EXPECT_EQ(gpu.frame_pages, cpu.frame_pages) << where;
    EXPECT_EQ(gpu.special_pages, cpu.special_pages) << where;
    EXPECT_EQ(gpu.special_stream_tokens, cpu.special_stream_tokens) << where;
    if (compare_reserved) {
      EXPECT_EQ(gpu.bytes_reserved, cpu.bytes_reserved / 4 * elem) << where;
    }
  }
}

// The aggregator's token layout: 6 specials + 972 patches, 16 heads x 64.
kv::TokenLayout aggregator_tokens() {
  kv::TokenLayout l;
  l.num_special = 6;
  l.num_patches = 972;
  l.num_heads = 16;
  l.head_dim = 64;
  return l;
}

// Four caches fed the same steps: CPU dense, CPU paged, GPU dense, GPU paged.
struct Quad {
  std::unique_ptr<kv::KvCache> cpu_dense, cpu_paged, gpu_dense, gpu_paged;
  bool fp8;  // every store keeps e4m3 codes (config.dtype Fp8)
  // Every paged store keeps its memory across reset() for the next stream,
  // but the stores grow in different steps from there on. So the reserved
  // bytes are compared only until the first reset.
  bool was_reset = false;
  Quad(const kv::CacheConfig& c, const kv::TokenLayout& l, int blocks)
      : cpu_dense(kv::make_cpu_cache(kv::Layout::Dense, c, l, blocks)),
        cpu_paged(kv::make_cpu_cache(kv::Layout::Paged, c, l, blocks)),
        gpu_dense(make_cuda_kv_cache(kv::Layout::Dense, c, l, blocks, nullptr)),
        gpu_paged(make_cuda_kv_cache(kv::Layout::Paged, c, l, blocks, nullptr)),
        fp8(c.dtype == kv::KvDtype::Fp8) {}
  std::vector<kv::KvCache*> all() { return {cpu_dense.get(), cpu_paged.get(), gpu_dense.get(), gpu_paged.get()}; }
};

// One step through all four caches, with every check. q_rows: queries per attend.
void run_step(Quad& caches, const kv::TokenLayout& l, int blocks, int frames, bool store, DType dtype, int64_t q_rows,
              std::mt19937& rng, const std::string& where) {
  std::vector<std::pair<Tensor, Tensor>> gpu_dense_before, gpu_paged_before;
  if (!store) {
    for (int b = 0; b < blocks; ++b) {
      gpu_dense_before.push_back(caches.gpu_dense->gather_visible(b));
      gpu_paged_before.push_back(caches.gpu_paged->gather_visible(b));
    }
  }
  for (kv::KvCache* c : caches.all()) c->begin_step(frames, store);
  std::vector<int> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const int64_t rows = int64_t{frames} * l.tokens_per_frame();
  // fp8: the GPU reads the stored values back to bf16 (one more rounding
  // of K and V than the CPU reference sees).
  const double bound = ct::bound_for(dtype) * (caches.fp8 ? 2 : 1);
  for (int b : order) {
    const Tensor k = ct::round_to(ct::random_normal({rows, l.num_heads, l.head_dim}, rng), dtype);
    const Tensor v = ct::round_to(ct::random_normal({rows, l.num_heads, l.head_dim}, rng), dtype);
    caches.cpu_dense->append(b, k, v);
    caches.cpu_paged->append(b, k, v);
    const Tensor dk = ct::upload(k, dtype), dv = ct::upload(v, dtype);
    caches.gpu_dense->append(b, dk, dv);
    caches.gpu_paged->append(b, dk, dv);

    const auto cpu_keys = caches.cpu_dense->gather_visible(b);
    const auto paged_cpu = caches.cpu_paged->gather_visible(b);
    const auto paged_gpu = caches.gpu_paged->gather_visible(b);
    ASSERT_TRUE(same_values(paged_gpu.first, paged_cpu.first) && same_values(paged_gpu.second, paged_cpu.second))
        << where << " block " << b << ": the GPU paged store's visible keys differ from the CPU paged store's ("
        << paged_gpu.first.dim(0) << " vs " << paged_cpu.first.dim(0) << " keys)";
    const auto dense_gpu = caches.gpu_dense->gather_visible(b);
    ASSERT_EQ(dense_gpu.first.dim(0), cpu_keys.first.dim(0)) << where << " block " << b;
    ASSERT_TRUE(sorted_rows(dense_gpu) == sorted_rows(cpu_keys))
        << where << " block " << b << ": the GPU dense store's visible keys differ from the CPU dense store's";

    const Tensor q = ct::round_to(ct::random_normal({q_rows, l.num_heads, l.head_dim}, rng), dtype);
    const Tensor dq = ct::upload(q, dtype);
    const Tensor ref = reference_attention(l, cpu_keys, q);
    Tensor out_dense = ct::device_empty(dq.shape(), dtype), out_paged = ct::device_empty(dq.shape(), dtype);
    ct::poison(out_dense);
    ct::poison(out_paged);
    caches.gpu_dense->attend(b, dq, out_dense);
    caches.gpu_paged->attend(b, dq, out_paged);
    const Tensor got_dense = ct::download(out_dense), got_paged = ct::download(out_paged);
    const auto all = ct::all_rows(q_rows);
    ASSERT_TRUE(ct::close_on_rows(got_dense, ref, all, l.num_heads, l.head_dim, bound, where + " gpu dense"));
    ASSERT_TRUE(ct::close_on_rows(got_paged, ref, all, l.num_heads, l.head_dim, bound, where + " gpu paged"));
    ASSERT_TRUE(ct::close_on_rows(got_dense, got_paged, all, l.num_heads, l.head_dim, 2 * bound,
                                  where + " gpu dense vs gpu paged"));
  }
  for (kv::KvCache* c : caches.all()) c->end_step();
  // fp8: both sides hold codes and scales (the same bytes per token); the
  // reserved bytes differ (the CPU blocks' 64-byte rounding, the GPU's staging).
  const DType scale = caches.fp8 ? DType::F32 : dtype;
  expect_same_stats(caches.cpu_dense->stats(), caches.gpu_dense->stats(), scale, false, where + " dense stats");
  expect_same_stats(caches.cpu_paged->stats(), caches.gpu_paged->stats(), scale, true, where + " paged stats",
                    !caches.fp8 && !caches.was_reset);
  if (!store) {
    for (int b = 0; b < blocks; ++b) {
      const auto d = caches.gpu_dense->gather_visible(b);
      const auto p = caches.gpu_paged->gather_visible(b);
      const auto& d0 = gpu_dense_before[static_cast<size_t>(b)];
      const auto& p0 = gpu_paged_before[static_cast<size_t>(b)];
      ASSERT_TRUE(same_values(d.first, d0.first) && same_values(d.second, d0.second))
          << where << ": a non-keyframe changed the GPU dense cache of block " << b;
      ASSERT_TRUE(same_values(p.first, p0.first) && same_values(p.second, p0.second))
          << where << ": a non-keyframe changed the GPU paged cache of block " << b;
    }
  }
}

}  // namespace

TEST(CudaKvCache, MatchesCpuStoresOverRandomSteps) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(4242);
  const int cases = kvt::iterations(60);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int n = 0; n < cases; ++n) {
    const int dims[] = {16, 32, 64, 64};
    auto [config, layout] = kvt::random_config(rng, dims[pick(0, 3)]);
    const DType dtype = pick(0, 1) ? DType::BF16 : DType::F32;
    const int blocks = pick(1, 3);
    const std::string what = kvt::describe(config, layout, blocks) + " " + std::string(dtype_name(dtype));
    Quad caches(config, layout, blocks);
    const int steps = pick(1, 30);
    for (int s = 0; s < steps; ++s) {
      const std::string where = what + " step " + std::to_string(s);
      const int kind = pick(0, 39);
      if (kind == 0) {
        const int64_t cpu_reserved = caches.cpu_paged->stats().bytes_reserved;
        const int64_t gpu_paged_reserved = caches.gpu_paged->stats().bytes_reserved;
        const int64_t gpu_dense_reserved = caches.gpu_dense->stats().bytes_reserved;
        for (kv::KvCache* c : caches.all()) c->reset();
        caches.was_reset = true;
        EXPECT_EQ(caches.gpu_paged->stats().bytes_reserved, gpu_paged_reserved) << where << ": the pool is kept";
        EXPECT_EQ(caches.gpu_dense->stats().bytes_reserved, gpu_dense_reserved) << where << ": the pool is kept";
        EXPECT_EQ(caches.cpu_paged->stats().bytes_reserved, cpu_reserved) << where << ": the CPU pool is kept";
        continue;
      }
      const bool store = kind > 9;
      const int frames = kind % 8 == 1 ? pick(2, config.sliding_window + config.scale_frames + 3) : 1;
      const int64_t q_rows = pick(0, 1) ? pick(1, 7) : pick(8, 140);
      ASSERT_NO_FATAL_FAILURE(run_step(caches, layout, blocks, frames, store, dtype, q_rows, rng, where));
    }
  }
}

// fp8 storage in all four stores (bf16 K/V in, as the aggregator appends
// them on the GPU), over random step sequences and flags.
TEST(CudaKvCache, Fp8MatchesCpuFp8StoresOverRandomSteps) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(4343);
  const int cases = kvt::iterations(40);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int n = 0; n < cases; ++n) {
    const int dims[] = {16, 32, 64, 64};
    auto [config, layout] = kvt::random_config(rng, dims[pick(0, 3)]);
    config.dtype = kv::KvDtype::Fp8;
    const int blocks = pick(1, 3);
    const std::string what = kvt::describe(config, layout, blocks) + " fp8";
    Quad caches(config, layout, blocks);
    const int steps = pick(1, 30);
    for (int s = 0; s < steps; ++s) {
      const std::string where = what + " step " + std::to_string(s);
      const int kind = pick(0, 39);
      if (kind == 0) {
        for (kv::KvCache* c : caches.all()) c->reset();
        continue;
      }
      const bool store = kind > 9;
      const int frames = kind % 8 == 1 ? pick(2, config.sliding_window + config.scale_frames + 3) : 1;
      const int64_t q_rows = pick(0, 1) ? pick(1, 7) : pick(8, 140);
      ASSERT_NO_FATAL_FAILURE(run_step(caches, layout, blocks, frames, store, DType::BF16, q_rows, rng, where));
    }
  }
}

// Every attention kernel over the fp8 store (the staging pages they read are
// bf16): the mma.sync kernel (sm_80 path, also forced on Hopper), wgmma-ws
// (Hopper) and the warp kernel, on the aggregator's layout, a whole frame of
// queries for the tensor-core kernels, against the fp64 reference over the
// CPU fp8 store's dequantised keys; dense and paged GPU stores both.
TEST(CudaKvCache, Fp8EveryAttentionKernel) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(79);
  const kv::TokenLayout l = aggregator_tokens();
  kv::CacheConfig c;
  c.sliding_window = 3;
  c.scale_frames = 1;
  c.dtype = kv::KvDtype::Fp8;
  auto cpu = kv::make_cpu_cache(kv::Layout::Dense, c, l, 1);
  auto dense = make_cuda_kv_cache(kv::Layout::Dense, c, l, 1, nullptr);
  auto paged = make_cuda_kv_cache(kv::Layout::Paged, c, l, 1, nullptr);
  std::vector<AttentionKernel> kernels = {AttentionKernel::Mma, AttentionKernel::Warp};
  if (ct::hopper()) kernels.push_back(AttentionKernel::WgmmaWs);
  for (int s = 0; s < 6; ++s) {
    for (kv::KvCache* cache : {cpu.get(), dense.get(), paged.get()}) cache->begin_step(1, true);
    const int64_t n = l.tokens_per_frame();
    const Tensor k = ct::round_to(ct::random_normal({n, l.num_heads, l.head_dim}, rng), DType::BF16);
    const Tensor v = ct::round_to(ct::random_normal({n, l.num_heads, l.head_dim}, rng), DType::BF16);
    cpu->append(0, k, v);
    const Tensor dk = ct::upload(k, DType::BF16), dv = ct::upload(v, DType::BF16);
    dense->append(0, dk, dv);
    paged->append(0, dk, dv);
    if (s >= 4) {  // evictions have happened: retained specials, the window, the scale frame
      const auto keys = cpu->gather_visible(0);
      for (AttentionKernel kernel : kernels) {
        const int64_t q_rows = kernel == AttentionKernel::Warp ? 24 : n;
        const Tensor q = ct::round_to(ct::random_normal({q_rows, l.num_heads, l.head_dim}, rng), DType::BF16);
        const Tensor dq = ct::upload(q, DType::BF16);
        // The reference over a few rows only (a naive fp64 loop).
        const std::vector<int64_t> rows = {0, 1, 7, q_rows / 2, q_rows - 1};
        Tensor q_few = Tensor::empty({static_cast<int64_t>(rows.size()), l.num_heads, l.head_dim});
        for (size_t i = 0; i < rows.size(); ++i)
          std::memcpy(q_few.f32() + static_cast<int64_t>(i) * l.row_floats(), q.f32() + rows[i] * l.row_floats(),
                      static_cast<size_t>(l.row_floats()) * sizeof(float));
        const Tensor ref = reference_attention(l, keys, q_few);  // row i: query rows[i]
        for (kv::KvCache* cache : {dense.get(), paged.get()}) {
          dynamic_cast<CudaKvCache&>(*cache).set_attention(kernel);
          Tensor out = ct::device_empty(dq.shape(), DType::BF16);
          ct::poison(out);
          cache->attend(0, dq, out);
          const std::string where = fmt::format("step {} kernel {} {}", s, attention_kernel_name(kernel),
                                                kv::layout_name(cache->stats().layout));
          ASSERT_TRUE(ct::close_on_rows(ct::download(out), ref, rows, l.num_heads, l.head_dim,
                                        2 * ct::bound_for(DType::BF16), where));
        }
      }
    }
    for (kv::KvCache* cache : {cpu.get(), dense.get(), paged.get()}) cache->end_step();
  }
  EXPECT_EQ(paged->stats().storage, "e4m3");
}

// The aggregator's token layout (6 specials + 972 patches, 16 heads x 64,
// bf16) with a small window: frame pages of 972 (paged) / 978 (dense)
// tokens, evictions, a scale phase of 3 frames, non-keyframes, and
// include_scale_frames = false (the quirk, with page-to-stream copies).
TEST(CudaKvCache, AggregatorLayout) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(77);
  const kv::TokenLayout l = aggregator_tokens();
  for (int variant = 0; variant < 3; ++variant) {
    const bool include_scale = variant != 1;
    kv::CacheConfig c;
    c.sliding_window = 3;
    c.scale_frames = 2;
    c.include_scale_frames = include_scale;
    if (variant == 2) c.dtype = kv::KvDtype::Fp8;  // the fp8 store on the real layout, every kernel by Auto
    c.pool_growth_pages = 2;
    const int blocks = 2;
    Quad caches(c, l, blocks);
    const std::string what = fmt::format("aggregator layout W=3 S=2 include_scale_frames={} kv {}", include_scale,
                                         kv::kv_dtype_name(c.dtype));
    // The stores are compared in full; attention only for a few query rows,
    // because the CPU reference is a naive fp64 loop (a full 3-frame scale
    // phase against it took minutes).
    constexpr int64_t kQueryRows = 16;
    ASSERT_NO_FATAL_FAILURE(
        run_step(caches, l, blocks, 3, true, DType::BF16, kQueryRows, rng, what + " scale phase"));
    for (int s = 0; s < 10; ++s) {
      const bool store = s % 3 != 2;
      ASSERT_NO_FATAL_FAILURE(run_step(caches, l, blocks, 1, store, DType::BF16, kQueryRows, rng,
                                       what + " step " + std::to_string(s)));
    }
  }
}

// The pages' memory outlives reset(): a second stream of the same size
// allocates nothing and still holds what the CPU stores hold; a stream of
// another element type gets pages of its own size.
TEST(CudaKvCache, ASecondStreamReusesThePagesOfTheFirst) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(78);
  const kv::TokenLayout l = aggregator_tokens();
  kv::CacheConfig c;
  c.sliding_window = 3;
  c.scale_frames = 2;
  c.pool_growth_pages = 1;
  const int blocks = 2;
  constexpr int64_t kQueryRows = 8;
  Quad caches(c, l, blocks);
  auto stream = [&](DType dtype, const std::string& what) {
    ASSERT_NO_FATAL_FAILURE(run_step(caches, l, blocks, 2, true, dtype, kQueryRows, rng, what + " scale step"));
    for (int s = 0; s < 6; ++s)
      ASSERT_NO_FATAL_FAILURE(
          run_step(caches, l, blocks, 1, true, dtype, kQueryRows, rng, what + " step " + std::to_string(s)));
  };
  auto reset = [&] {
    for (kv::KvCache* k : caches.all()) k->reset();
    caches.was_reset = true;
  };
  ASSERT_NO_FATAL_FAILURE(stream(DType::BF16, "first stream"));
  const kv::CacheStats paged = caches.gpu_paged->stats(), dense = caches.gpu_dense->stats();
  ASSERT_GT(paged.bytes_allocated_total, 0);
  reset();
  ASSERT_NO_FATAL_FAILURE(stream(DType::BF16, "second stream"));
  EXPECT_EQ(caches.gpu_paged->stats().bytes_allocated_total, paged.bytes_allocated_total)
      << "the second stream's paged store allocated pages again";
  EXPECT_EQ(caches.gpu_dense->stats().bytes_allocated_total, dense.bytes_allocated_total)
      << "the second stream's dense store allocated pages again";
  EXPECT_EQ(caches.gpu_paged->stats().bytes_reserved, paged.bytes_reserved);

  // float32 rows are twice as long: the kept bf16 pages are freed, not reused.
  reset();
  ASSERT_NO_FATAL_FAILURE(stream(DType::F32, "float32 stream"));
  EXPECT_EQ(caches.gpu_paged->stats().bytes_reserved, 2 * paged.bytes_reserved);
  EXPECT_EQ(caches.gpu_paged->stats().bytes_allocated_total, 3 * paged.bytes_allocated_total);
}

// TMA against row-by-row copies (CudaKvCache::set_tma): two paged caches of
// the aggregator's layout fed the same steps, several pool chunks (one
// tensor map each) and two blocks; a whole frame's queries attend to each.
// Both copies put the same bytes in shared memory for the same kernel, so
// the outputs must be identical, bit for bit.
TEST(CudaKvCache, TmaCopiesMatchRowCopies) {
  LB_REQUIRE_GPU();
  if (!ct::hopper()) GTEST_SKIP() << "TMA copies are made by the wgmma-ws kernel, on Hopper (sm_90) only";
  std::mt19937 rng(78);
  const kv::TokenLayout l = aggregator_tokens();
  kv::CacheConfig c;
  c.sliding_window = 4;
  c.scale_frames = 2;
  c.pool_growth_pages = 2;
  const int blocks = 2;
  auto tma = make_cuda_kv_cache(kv::Layout::Paged, c, l, blocks, nullptr);
  auto rows = make_cuda_kv_cache(kv::Layout::Paged, c, l, blocks, nullptr);
  dynamic_cast<CudaKvCache&>(*rows).set_tma(false);
  for (auto* cache : {tma.get(), rows.get()}) dynamic_cast<CudaKvCache&>(*cache).set_attention(AttentionKernel::WgmmaWs);
  const int64_t q_rows = l.tokens_per_frame();
  for (int s = 0; s < 9; ++s) {
    const int frames = s == 0 ? 2 : 1;
    const int64_t n = int64_t{frames} * l.tokens_per_frame();
    for (auto* cache : {tma.get(), rows.get()}) cache->begin_step(frames, true);
    for (int b = 0; b < blocks; ++b) {
      const Tensor dk = ct::upload(ct::round_to(ct::random_normal({n, l.num_heads, l.head_dim}, rng), DType::BF16),
                                   DType::BF16);
      const Tensor dv = ct::upload(ct::round_to(ct::random_normal({n, l.num_heads, l.head_dim}, rng), DType::BF16),
                                   DType::BF16);
      const Tensor dq = ct::upload(
          ct::round_to(ct::random_normal({q_rows, l.num_heads, l.head_dim}, rng), DType::BF16), DType::BF16);
      Tensor out_tma = ct::device_empty(dq.shape(), DType::BF16), out_rows = ct::device_empty(dq.shape(), DType::BF16);
      ct::poison(out_tma);
      ct::poison(out_rows);
      tma->append(b, dk, dv);
      rows->append(b, dk, dv);
      tma->attend(b, dq, out_tma);
      rows->attend(b, dq, out_rows);
      const Tensor a = ct::download(out_tma), r = ct::download(out_rows);
      ASSERT_EQ(std::memcmp(a.f32(), r.f32(), static_cast<size_t>(a.numel()) * sizeof(float)), 0)
          << "step " << s << " block " << b << " (" << tma->stats().visible_tokens
          << " visible keys): TMA and row copies gave different outputs";
    }
    for (auto* cache : {tma.get(), rows.get()}) cache->end_step();
  }
  // The first cache's table did carry tensor maps, one per chunk; the second's none.
  auto header = [](kv::KvCache& cache) {
    KvTableHeader h;
    LB_CUDA_CHECK(cudaMemcpy(&h, dynamic_cast<CudaKvCache&>(cache).device_table(), sizeof(h), cudaMemcpyDeviceToHost));
    return h;
  };
  const KvTableHeader with = header(*tma), without = header(*rows);
  EXPECT_GE(with.num_tensor_maps, 2);
  EXPECT_NE(with.tensor_maps, nullptr);
  EXPECT_EQ(without.num_tensor_maps, 0);
  EXPECT_EQ(without.tensor_maps, nullptr);
}

// fp8 pages read inside the wgmma-ws kernel (each key tile dequantised in
// shared memory) against the read-back to bf16 staging pages before the
// same kernel (CudaKvCache::set_fp8_read_back): both put the same bfloat16
// values in the kernel's tiles, so the outputs must be identical, bit for
// bit. Two caches per case fed the same steps: the aggregator's layout
// (pages of 972 and 978 keys: tiles addressed by span, a tile across a page
// end), the paged and dense layouts, two blocks, forced key splits, a whole
// frame of queries and a partial query tile; and small random layouts
// (pages of a few keys: tiles walked row by row, partial tiles, no keys).
TEST(CudaKvCache, Fp8InKernelGivesTheReadBacksBits) {
  LB_REQUIRE_GPU();
  if (!ct::hopper()) GTEST_SKIP() << "fp8 pages are read in the kernel by wgmma-ws, on Hopper (sm_90) only";
  std::mt19937 rng(80);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  struct Case {
    kv::CacheConfig config;
    kv::TokenLayout tokens;
    kv::Layout layout;
    int splits;
    int steps;
  };
  std::vector<Case> cases;
  for (kv::Layout layout : {kv::Layout::Paged, kv::Layout::Dense}) {
    for (int splits : {0, 2, 3}) {
      kv::CacheConfig c;
      c.sliding_window = 3;
      c.scale_frames = 2;
      c.pool_growth_pages = 2;
      cases.push_back({c, aggregator_tokens(), layout, splits, 7});
    }
  }
  for (int n = 0; n < kvt::iterations(12); ++n) {
    auto [c, l] = kvt::random_config(rng, 64);
    l.num_heads = 2;  // 16-byte aligned fp8 pages whatever the page size (the kernel's loads)
    cases.push_back({c, l, pick(0, 1) ? kv::Layout::Paged : kv::Layout::Dense, pick(0, 1) ? 0 : pick(1, 4),
                     pick(1, 12)});
  }
  const int blocks = 2;
  for (const Case& cs : cases) {
    kv::CacheConfig c = cs.config;
    c.dtype = kv::KvDtype::Fp8;
    const kv::TokenLayout& l = cs.tokens;
    const std::string what = kvt::describe(c, l, blocks) +
                             fmt::format(" {} splits {}", kv::layout_name(cs.layout), cs.splits);
    auto fused = make_cuda_kv_cache(cs.layout, c, l, blocks, nullptr);
    auto staged = make_cuda_kv_cache(cs.layout, c, l, blocks, nullptr);
    auto& fused_cache = dynamic_cast<CudaKvCache&>(*fused);
    auto& staged_cache = dynamic_cast<CudaKvCache&>(*staged);
    fused_cache.set_fp8_read_back(false);
    staged_cache.set_fp8_read_back(true);
    for (CudaKvCache* cache : {&fused_cache, &staged_cache}) cache->set_attention(AttentionKernel::WgmmaWs, cs.splits);
    ASSERT_TRUE(fused_cache.fp8_in_kernel()) << what;
    ASSERT_FALSE(staged_cache.fp8_in_kernel()) << what;
    for (int s = 0; s < cs.steps; ++s) {
      const int frames = s == 0 ? std::max(1, c.scale_frames) : 1;
      const bool store = s % 4 != 3;
      const int64_t n = int64_t{frames} * l.tokens_per_frame();
      for (kv::KvCache* cache : {fused.get(), staged.get()}) cache->begin_step(frames, store);
      for (int b = 0; b < blocks; ++b) {
        const Tensor dk = ct::upload(ct::round_to(ct::random_normal({n, l.num_heads, l.head_dim}, rng), DType::BF16),
                                     DType::BF16);
        const Tensor dv = ct::upload(ct::round_to(ct::random_normal({n, l.num_heads, l.head_dim}, rng), DType::BF16),
                                     DType::BF16);
        fused->append(b, dk, dv);
        staged->append(b, dk, dv);
        for (int64_t q_rows : {std::max<int64_t>(n, 1), int64_t{70}}) {
          const Tensor dq = ct::upload(
              ct::round_to(ct::random_normal({q_rows, l.num_heads, l.head_dim}, rng), DType::BF16), DType::BF16);
          Tensor out_fused = ct::device_empty(dq.shape(), DType::BF16);
          Tensor out_staged = ct::device_empty(dq.shape(), DType::BF16);
          ct::poison(out_fused);
          ct::poison(out_staged);
          fused->attend(b, dq, out_fused);
          staged->attend(b, dq, out_staged);
          const Tensor a = ct::download(out_fused), r = ct::download(out_staged);
          ASSERT_EQ(std::memcmp(a.f32(), r.f32(), static_cast<size_t>(a.numel()) * sizeof(float)), 0)
              << what << " step " << s << " block " << b << " (" << fused->stats().visible_tokens << " visible keys, "
              << q_rows << " queries): the kernel's own dequantisation and the read-back gave different outputs";
        }
      }
      for (kv::KvCache* cache : {fused.get(), staged.get()}) cache->end_step();
    }
    // No staging pages for the cache that reads fp8 in the kernel.
    EXPECT_LT(fused->stats().bytes_reserved, staged->stats().bytes_reserved) << what;
  }
}

// The camera head's caches: one token per frame, never evicted, f32, 16 heads
// x 128, one query per frame; long enough to fill several 256-token stream
// pages (and pool chunks) in the dense layout.
TEST(CudaKvCache, CameraHeadLayoutLongStream) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(78);
  kv::TokenLayout l;
  l.num_special = 1;
  l.num_patches = 0;
  l.num_heads = 16;
  l.head_dim = 128;
  kv::CacheConfig c;  // defaults: W = 64, S = 8 (no effect: 1-token frames are never evicted)
  Quad caches(c, l, 1);
  for (int s = 0; s < 700; ++s) {
    const bool store = s % 5 != 4;
    const bool check = s < 3 || s % 97 == 0 || s == 699;
    if (check) {
      ASSERT_NO_FATAL_FAILURE(run_step(caches, l, 1, 1, store, DType::F32, 1, rng, "camera step " + std::to_string(s)));
      continue;
    }
    // Unchecked steps: feed all four caches the same values, cheaply.
    for (kv::KvCache* cache : caches.all()) cache->begin_step(1, store);
    const Tensor k = ct::random_normal({1, 16, 128}, rng), v = ct::random_normal({1, 16, 128}, rng);
    caches.cpu_dense->append(0, k, v);
    caches.cpu_paged->append(0, k, v);
    const Tensor dk = ct::upload(k, DType::F32), dv = ct::upload(v, DType::F32);
    caches.gpu_dense->append(0, dk, dv);
    caches.gpu_paged->append(0, dk, dv);
    for (kv::KvCache* cache : caches.all()) cache->end_step();
  }
  EXPECT_GT(caches.gpu_dense->stats().bytes_reserved, 0);
}

TEST(CudaKvCache, RejectsMisuse) {
  LB_REQUIRE_GPU();
  kv::TokenLayout l;
  l.num_special = 1;
  l.num_patches = 3;
  l.num_heads = 2;
  l.head_dim = 16;
  kv::CacheConfig c;
  auto cache = make_cuda_kv_cache(kv::Layout::Paged, c, l, 2, nullptr);
  const Tensor k_bf16 = ct::device_empty({4, 2, 16}, DType::BF16);
  const Tensor k_f32 = ct::device_empty({4, 2, 16}, DType::F32);
  const Tensor wrong_rows = ct::device_empty({5, 2, 16}, DType::BF16);
  const Tensor host = Tensor::empty({4, 2, 16});
  Tensor q = ct::device_empty({3, 2, 16}, DType::F32);
  Tensor out = ct::device_empty({3, 2, 16}, DType::F32);
  EXPECT_THROW(cache->append(0, k_bf16, k_bf16), Error);  // outside a step
  cache->begin_step(1, true);
  EXPECT_THROW(cache->attend(0, q, out), Error);            // before append
  EXPECT_THROW(cache->append(0, wrong_rows, wrong_rows), Error);
  EXPECT_THROW(cache->append(0, host, host), Error);        // on the cpu
  EXPECT_THROW(cache->append(0, k_bf16, k_f32), Error);     // mixed dtypes
  cache->append(0, k_bf16, k_bf16);                         // fixes the dtype: bf16
  EXPECT_THROW(cache->append(1, k_f32, k_f32), Error);      // another dtype
  EXPECT_THROW(cache->attend(0, q, out), Error);            // f32 queries for a bf16 cache
  EXPECT_THROW(cache->end_step(), Error);                   // block 1 not appended
  cache->append(1, k_bf16, k_bf16);
  cache->end_step();
  cache->reset();                                           // frees the dtype too
  cache->begin_step(1, true);
  cache->append(0, k_f32, k_f32);
  cache->append(1, k_f32, k_f32);
  EXPECT_NO_THROW(cache->attend(1, q, out));
  cache->end_step();
}

// append() and attend() captured once in a CUDA graph and replayed for every
// later step, with begin_step() / end_step() on the host around each replay
// and new K/V/q copied into the same buffers: the outputs and the visible
// keys must match a CPU store fed the same values. The pool keeps growing
// after the capture (new chunks, new special pages), non-keyframes included.
TEST(CudaKvCache, StepsReplayFromACapturedGraph) {
  LB_REQUIRE_GPU();
  kv::TokenLayout l;
  l.num_special = 6;
  l.num_patches = 40;
  l.num_heads = 2;
  l.head_dim = 64;
  kv::CacheConfig c;
  c.sliding_window = 3;
  c.scale_frames = 2;
  c.pool_growth_pages = 2;
  const int blocks = 2;
  const DType dtype = DType::BF16;
  const int64_t rows = l.tokens_per_frame();
  std::mt19937 rng(99);
  for (kv::Layout layout : {kv::Layout::Paged, kv::Layout::Dense}) {
    const std::string what = std::string(kv::layout_name(layout)) + " graph";
    cudaStream_t stream = nullptr;
    LB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto gpu = make_cuda_kv_cache(layout, c, l, blocks, stream);
    auto cpu = kv::make_cpu_cache(kv::Layout::Dense, c, l, blocks);
    std::vector<Tensor> dk, dv, dq, dout;
    for (int b = 0; b < blocks; ++b) {
      dk.push_back(ct::device_empty({rows, l.num_heads, l.head_dim}, dtype));
      dv.push_back(ct::device_empty({rows, l.num_heads, l.head_dim}, dtype));
      dq.push_back(ct::device_empty({rows, l.num_heads, l.head_dim}, dtype));
      dout.push_back(ct::device_empty({rows, l.num_heads, l.head_dim}, dtype));
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    for (int s = 0; s < 24; ++s) {
      const std::string where = what + " step " + std::to_string(s);
      const bool store = s < 2 || s % 4 != 3;
      // New values into the same device buffers (ordered on the stream before the step's kernels).
      std::vector<Tensor> k, v, q;
      for (int b = 0; b < blocks; ++b) {
        k.push_back(ct::round_to(ct::random_normal({rows, l.num_heads, l.head_dim}, rng), dtype));
        v.push_back(ct::round_to(ct::random_normal({rows, l.num_heads, l.head_dim}, rng), dtype));
        q.push_back(ct::round_to(ct::random_normal({rows, l.num_heads, l.head_dim}, rng), dtype));
        // The previous step's work on `stream` has finished (synchronised below), so plain
        // synchronous copies cannot race with it.
        for (auto [host, dev] : {std::pair{&k[b], &dk[b]}, std::pair{&v[b], &dv[b]}, std::pair{&q[b], &dq[b]}}) {
          std::vector<uint16_t> bits(static_cast<size_t>(host->numel()));
          for (int64_t i = 0; i < host->numel(); ++i) bits[static_cast<size_t>(i)] = f32_to_bf16(host->f32()[i]);
          LB_CUDA_CHECK(cudaMemcpy(dev->data(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
        }
        LB_CUDA_CHECK(cudaMemsetAsync(dout[b].data(), 0xff, dout[b].nbytes(), stream));  // NaN: unwritten shows
      }
      cpu->begin_step(1, store);
      gpu->begin_step(1, store);
      auto run_blocks = [&] {
        for (int b = 0; b < blocks; ++b) {
          gpu->append(b, dk[b], dv[b]);
          gpu->attend(b, dq[b], dout[b]);
        }
      };
      if (s == 0) {
        run_blocks();  // the first step runs eagerly: it allocates and sizes the scratch
      } else {
        if (s == 1) {
          LB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
          run_blocks();
          LB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
          LB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        }
        LB_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        if (s > 1) gpu->note_replayed_step();  // the host did not call append/attend this step
      }
      LB_CUDA_CHECK(cudaStreamSynchronize(stream));
      for (int b = 0; b < blocks; ++b) cpu->append(b, k[b], v[b]);
      for (int b = 0; b < blocks; ++b) {
        const auto cpu_keys = cpu->gather_visible(b);
        const auto gpu_keys = gpu->gather_visible(b);
        ASSERT_TRUE(sorted_rows(gpu_keys) == sorted_rows(cpu_keys)) << where << " block " << b;
        const Tensor ref = reference_attention(l, cpu_keys, q[b]);
        ASSERT_TRUE(ct::close_on_rows(ct::download(dout[b]), ref, ct::all_rows(rows), l.num_heads, l.head_dim,
                                      ct::bound_for(dtype), where + " block " + std::to_string(b)));
      }
      cpu->end_step();
      gpu->end_step();
    }
    EXPECT_GT(gpu->stats().bytes_reserved, 0);
    LB_CUDA_CHECK(cudaGraphExecDestroy(exec));
    LB_CUDA_CHECK(cudaGraphDestroy(graph));
    gpu.reset();
    LB_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}
