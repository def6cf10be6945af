#include "backend/cpu/attention_bf16.h"

#include "backend/cpu/attention_splits.h"
#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/onednn_matmul.h"
#include "core/error.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lingbot::cpu {

namespace {

using dnnl::memory;
using Dt = memory::data_type;

// Every work item reads all of its head's keys and values, so the fewer
// query tiles per head the less of that traffic (a full window's keys are
// 18 MB per head); S and P of a tile stay in L2 (768 KiB at 512 x 256).
constexpr int kMaxQueryTile = detail::kBf16MaxQueryTile;
constexpr int kKeyBlock = detail::kBf16KeyBlock;
constexpr int kRowStep = 16;        // oneDNN's query tiles are padded to a multiple of this (AMX: 32)

// The two products of one work item's shape (query tile rows, head_dim).
struct Products {
  dnnl::matmul scores;  // S[rows][kKeyBlock] = Q[rows][D] . K[kKeyBlock][D]^T
  dnnl::matmul values;  // O[rows][D] += P[rows][kKeyBlock] . V[kKeyBlock][D]
  memory::desc q, k, s, p, v, o;
};

Products make_products(const dnnl::engine& engine, int rows, int head_dim) {
  Products p;
  const int64_t M = rows, D = head_dim, N = kKeyBlock;
  p.q = memory::desc({M, D}, Dt::bf16, {D, 1});
  p.k = memory::desc({D, N}, Dt::bf16, {1, D});  // K [N][D] row-major, read as K^T
  p.s = memory::desc({M, N}, Dt::f32, {N, 1});
  p.p = memory::desc({M, N}, Dt::bf16, {N, 1});
  p.v = memory::desc({N, D}, Dt::bf16, {D, 1});
  p.o = memory::desc({M, D}, Dt::f32, {D, 1});
  p.scores = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.q, p.k, p.s), engine));
  dnnl::post_ops accumulate;
  accumulate.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(accumulate);
  p.values = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.p, p.v, p.o), attr, engine));
  return p;
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
std::unique_ptr<T[], AlignedFree> aligned_array(size_t count) {
  const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  auto* p = static_cast<T*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
  LB_CHECK(p != nullptr, "attention (bf16): out of memory for {} bytes of scratch", bytes);
  return std::unique_ptr<T[], AlignedFree>(p);
}

// One thread's primitives (per tile height), stream and buffers (those of
// both kernels: kp and vp are the AMX kernel's packed keys and values).
struct Lane {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::pair<int, int>, Products> products;  // (rows, head_dim)
  int head_dim = 0;
  std::unique_ptr<uint16_t[], AlignedFree> q, k, v, kp, vp, p;
  std::unique_ptr<float[], AlignedFree> s, o, row, m, l;

  void reserve(int dim) {
    if (dim == head_dim) return;
    head_dim = dim;
    q = aligned_array<uint16_t>(size_t{kMaxQueryTile} * dim);
    k = aligned_array<uint16_t>(size_t{kKeyBlock} * dim);
    v = aligned_array<uint16_t>(size_t{kKeyBlock} * dim);
    kp = aligned_array<uint16_t>(size_t{kKeyBlock} * dim);
    vp = aligned_array<uint16_t>(size_t{kKeyBlock} * dim);
    p = aligned_array<uint16_t>(size_t{kMaxQueryTile} * kKeyBlock);
    s = aligned_array<float>(size_t{kMaxQueryTile} * kKeyBlock);
    o = aligned_array<float>(size_t{kMaxQueryTile} * dim);
    row = aligned_array<float>(size_t{2} * dim);
    m = aligned_array<float>(kMaxQueryTile);
    l = aligned_array<float>(kMaxQueryTile);
  }
  Products& products_for(int rows, int dim) {
    auto it = products.find({rows, dim});
    if (it == products.end()) it = products.emplace(std::make_pair(rows, dim), make_products(engine, rows, dim)).first;
    return it->second;
  }
  detail::AmxScratch amx() const {
    return {q.get(), k.get(), v.get(), kp.get(), vp.get(), s.get(), p.get(), o.get(), m.get(), l.get(), row.get()};
  }
};

// Each calling thread's lanes, one per OpenMP thread of its team: a primitive
// and a stream are used by one thread at a time.
std::vector<std::unique_ptr<Lane>>& lanes_of_this_thread() {
  thread_local std::vector<std::unique_ptr<Lane>> lanes;
  return lanes;
}

// Queries split into equal tiles of at most max_rows rows (a frame's 978
// into two of 489), each padded to `step`. A query's result is the same in
// any tile.
int query_tile_rows(int64_t nq, int step, int max_rows) {
  const int64_t tiles = (nq + max_rows - 1) / max_rows;
  const int64_t rows = (nq + tiles - 1) / tiles;
  return static_cast<int>((rows + step - 1) / step * step);
}

// The CPU has AMX-BF16 and grants the tiles (cpu_isa.h), and this build has
// the tile kernel and the AVX-512 softmax it calls.
bool amx_tiles_granted() {
  return detail::amx_attention_built() && detail::bf16_attention_avx512_built() && amx_bf16_granted();
}

// The softmax step's instance for this CPU: AVX512-BF16's conversion where
// it has it (Zen 4, Cooper Lake and later Intel cores), integer rounding elsewhere.
void softmax_step(const float* s, int rows, int n, int ld, float c, float* m, float* l, float* o, int head_dim,
                  uint16_t* p) {
  static const auto step = cpu_has_bf16_arithmetic() ? detail::bf16_softmax_step_avx512bf16
                                                     : detail::bf16_softmax_step_avx512;
  step(s, rows, n, ld, c, m, l, o, head_dim, p);
}

// One work item: head h, queries [i0, i0 + rows) of nq, padded to `tile`,
// against the keys and into the target of `item`.
void run_item(Lane& lane, Products& pr, const float* q, int64_t nq, const KvSpan* spans, size_t count, int num_heads,
              int D, float c, const detail::Bf16ItemTarget& item, int h, int64_t i0, int tile) {
  const int rows = static_cast<int>(std::min<int64_t>(tile, nq - i0));
  const int64_t row = int64_t{num_heads} * D;
  detail::bf16_round_rows_avx512(q + i0 * row + int64_t{h} * D, row, rows, D, lane.q.get(), D);
  std::fill(lane.q.get() + int64_t{rows} * D, lane.q.get() + int64_t{tile} * D, uint16_t{0});
  std::fill(lane.o.get(), lane.o.get() + int64_t{tile} * D, 0.f);
  std::fill(lane.m.get(), lane.m.get() + tile, -std::numeric_limits<float>::infinity());
  std::fill(lane.l.get(), lane.l.get() + tile, 0.f);
  memory mq(pr.q, lane.engine, lane.q.get()), mk(pr.k, lane.engine, lane.k.get()), ms(pr.s, lane.engine, lane.s.get());
  memory mp(pr.p, lane.engine, lane.p.get()), mv(pr.v, lane.engine, lane.v.get()), mo(pr.o, lane.engine, lane.o.get());
  const std::unordered_map<int, memory> scores_args{{DNNL_ARG_SRC, mq}, {DNNL_ARG_WEIGHTS, mk}, {DNNL_ARG_DST, ms}};
  const std::unordered_map<int, memory> values_args{{DNNL_ARG_SRC, mp}, {DNNL_ARG_WEIGHTS, mv}, {DNNL_ARG_DST, mo}};
  tiled::KeyStream keys(spans, count, num_heads, D, h, item.first_key, item.key_count);
  for (;;) {
    const int n = keys.next_block_bf16(kKeyBlock, lane.k.get(), lane.v.get(), lane.row.get());
    if (n == 0) break;
    if (n < kKeyBlock) {  // padding keys: zero K (scores masked anyway) and zero V (P is 0 there)
      std::fill(lane.k.get() + int64_t{n} * D, lane.k.get() + int64_t{kKeyBlock} * D, uint16_t{0});
      std::fill(lane.v.get() + int64_t{n} * D, lane.v.get() + int64_t{kKeyBlock} * D, uint16_t{0});
    }
    pr.scores.execute(lane.stream, scores_args);
    softmax_step(lane.s.get(), tile, n, kKeyBlock, c, lane.m.get(), lane.l.get(), lane.o.get(), D, lane.p.get());
    pr.values.execute(lane.stream, values_args);
  }
  lane.stream.wait();
  for (int r = 0; r < rows; ++r) {
    const float inv = 1.f / lane.l[r];  // l >= 1: the row's maximum contributes 2^0
    const float* orow = lane.o.get() + int64_t{r} * D;
    float* dst = item.out + (i0 + r) * row + int64_t{h} * D;
    for (int d = 0; d < D; ++d) dst[d] = orow[d] * inv;
    if (item.lse != nullptr) item.lse[(i0 + r) * num_heads + h] = lane.m[r] + std::log2(lane.l[r]);
  }
}

}  // namespace

bool bf16_attention_available() {
  static const bool available = [] {
    if (!detail::bf16_attention_avx512_built() || !cpu_supports(Isa::Avx512)) return false;
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      make_products(engine, kMaxQueryTile, 64);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}

void attention_bf16(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim, float scale,
                    float* out) {
  detail::attention_bf16_with(detail::Bf16Kernel::Auto, q, nq, kv, num_heads, head_dim, scale, out);
}

namespace detail {

bool bf16_kernel_available(Bf16Kernel kernel, int head_dim) {
  const bool amx = amx_tiles_granted() && head_dim % 32 == 0 && head_dim <= 256;
  switch (kernel) {
    case Bf16Kernel::Amx: return amx;
    case Bf16Kernel::Onednn: return bf16_attention_available();
    case Bf16Kernel::Auto: return amx || bf16_attention_available();
  }
  return false;
}

const char* bf16_attention_kernel_name() {
  return bf16_kernel_available(Bf16Kernel::Amx, 64) ? "AMX tiles" : "oneDNN matmul";
}

int bf16_query_tile(int64_t nq, int num_heads, int key_ranges, int threads, int step) {
  int bound = kBf16MaxQueryTile;
  auto items = [&](int rows) {
    const int tile = query_tile_rows(nq, step, rows);
    return (nq + tile - 1) / tile * num_heads * key_ranges;
  };
  while (bound > kBf16MinQueryTile && items(bound) < int64_t{kBf16ItemsPerThread} * threads) bound /= 2;
  return query_tile_rows(nq, step, bound);
}

void attention_bf16_with(Bf16Kernel kernel, const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads,
                         int head_dim, float scale, float* out, int max_tile_rows, int key_splits) {
  check_arguments(q, nq, kv, num_heads, head_dim, out);
  LB_CHECK(max_tile_rows == 0 || (max_tile_rows >= kAmxRowStep && max_tile_rows <= kMaxQueryTile &&
                                  max_tile_rows % kAmxRowStep == 0),
           "attention (bf16): max_tile_rows {} is not 0 or a multiple of {} up to {}", max_tile_rows, kAmxRowStep,
           kMaxQueryTile);
  LB_CHECK(key_splits >= 0 && key_splits <= kMaxKeySplits, "attention (bf16): key_splits {} is not 0 to {}",
           key_splits, kMaxKeySplits);
  if (kernel == Bf16Kernel::Auto) {
    kernel = bf16_kernel_available(Bf16Kernel::Amx, head_dim) ? Bf16Kernel::Amx : Bf16Kernel::Onednn;
  }
  const bool amx = kernel == Bf16Kernel::Amx;
  if (amx) {
    LB_CHECK(bf16_kernel_available(kernel, head_dim),
             "attention (bf16): the AMX kernel needs AMX-BF16 granted by the OS and a head_dim that is a multiple of "
             "32 up to 256 (got {})",
             head_dim);
  } else {
    LB_CHECK(bf16_kernel_available(kernel, head_dim), "attention (bf16): needs AVX-512 and oneDNN bf16 matmul on this CPU");
  }
  if (nq == 0) return;
  const int64_t num_keys = total_keys(kv);
  if (num_keys == 0) {
    std::fill(out, out + nq * num_heads * head_dim, 0.f);
    return;
  }
  const KeyRanges ranges = KeyRanges::make(nq, num_keys, num_heads, kKeyBlock, key_splits);
  const int splits = ranges.count;
  const int step = amx ? kAmxRowStep : kRowStep;
  const int tile = max_tile_rows > 0 ? query_tile_rows(nq, step, max_tile_rows)
                                     : bf16_query_tile(nq, num_heads, splits, omp_get_max_threads(), step);
  const int64_t tiles = (nq + tile - 1) / tile;
  const int64_t items = tiles * num_heads * splits;
  const KeyRangeRows parts = splits > 1 ? KeyRangeRows::of_this_thread(splits, nq, num_heads, head_dim) : KeyRangeRows{};
  // Item i: range i % splits of (head, query tile) i / splits, so a pair's
  // ranges are handed out together.
  auto target = [&](int64_t item) {
    const int s = static_cast<int>(item % splits);
    detail::Bf16ItemTarget t;
    t.first_key = ranges.first(s);
    t.key_count = ranges.keys(s);
    t.out = splits > 1 ? parts.rows_of(s) : out;
    t.lse = splits > 1 ? parts.lse_of(s) : nullptr;
    return t;
  };
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), items));
  // Lanes, buffers and primitives are made here: nothing may throw inside
  // the parallel region.
  auto& lanes = lanes_of_this_thread();
  std::vector<Products*> products;
  try {
    while (static_cast<int>(lanes.size()) < threads) lanes.push_back(std::make_unique<Lane>());
    for (int t = 0; t < threads; ++t) {
      lanes[static_cast<size_t>(t)]->reserve(head_dim);
      if (!amx) products.push_back(&lanes[static_cast<size_t>(t)]->products_for(tile, head_dim));
    }
  } catch (const dnnl::error& e) {
    fail("attention (bf16): oneDNN could not make its products for {} queries, head_dim {} ({})", tile, head_dim,
         e.what());
  }
  const float c = scale * tiled::kLog2e;
  std::atomic<bool> failed{false};
  std::string failure;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    Lane& lane = *lanes[static_cast<size_t>(t)];
    if (amx) amx_begin_tiles();
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      if (failed.load(std::memory_order_relaxed)) continue;
      const int64_t pair = item / splits;
      const int h = static_cast<int>(pair / tiles);
      const int64_t i0 = (pair % tiles) * tile;
      const detail::Bf16ItemTarget where = target(item);
      if (amx) {
        amx_attention_item(q, nq, kv.data(), kv.size(), num_heads, head_dim, c, where, h, i0, tile, lane.amx());
        continue;
      }
      try {
        run_item(lane, *products[static_cast<size_t>(t)], q, nq, kv.data(), kv.size(), num_heads, head_dim, c, where,
                 h, i0, tile);
      } catch (const dnnl::error& e) {
#pragma omp critical(lingbot_attention_bf16_failure)
        {
          if (!failed.exchange(true)) failure = e.what();
        }
      }
    }
    if (amx) amx_end_tiles();
  }
  if (failed) fail("attention (bf16): oneDNN failed ({})", failure);
  if (splits > 1) combine_key_ranges(parts, splits, nq, num_heads, head_dim, out);
}

}  // namespace detail

}  // namespace lingbot::cpu
