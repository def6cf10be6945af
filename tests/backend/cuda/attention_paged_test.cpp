// GPU attention over pages (attention_paged) with a hand-built page pool and
// device table (kv_table.h): every kernel and split count against the CPU
// fp64 reference over the same keys gathered on the host, the fast kernels
// against the naive twin, and "needle" queries whose output must be one
// chosen key's value (first key, last key, page and tile edges). Slots that
// are not visible (other pages, the tail of the last page) hold NaN, so a
// kernel that reads outside the visible keys produces NaN. Error bounds as in
// attention_dense_test.cpp.
#include "backend/cpu/attention.h"
#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_launch.h"
#include "backend/cuda/kv/kv_table.h"
#include "backend/cuda/kv/tensor_map.h"

#include "attention_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

using namespace lingbot;
using namespace lingbot::cuda;
namespace ct = lingbot::cuda::test;

namespace {

// A pool of pages for `blocks` blocks, one allocation laid out as the cache
// lays out one chunk: [block][page][kv][slot][head][dim]. The visible keys are
// the pages `visible` in order, the last one holding `last_len` tokens.
// With `tma` the table also carries the chunk's tensor map where the cache
// would make one (bf16, head_dim 64, pages of at least a key tile), so the
// wgmma-ws kernel copies the tiles inside a page with TMA.
struct PagedKeysFixture {
  int pool_pages, page_size, heads, head_dim, blocks;
  DType dtype;
  std::vector<int32_t> visible;
  int32_t last_len = 0;
  Tensor host;  // float32, same layout, values as the dtype stores them (NaN where not visible)
  Tensor dev;
  std::unique_ptr<KvTable> table;

  int64_t row() const { return int64_t{heads} * head_dim; }
  int64_t page_elems() const { return 2 * int64_t{page_size} * row(); }
  int64_t block_elems() const { return pool_pages * page_elems(); }
  int64_t num_keys() const { return visible.empty() ? 0 : int64_t(visible.size() - 1) * page_size + last_len; }

  // Host pointer of key `j`'s K row in block `b` (V = + page_size * row()).
  const float* key_row(int b, int64_t j) const {
    const int32_t page = visible[static_cast<size_t>(j / page_size)];
    return host.f32() + b * block_elems() + page * page_elems() + (j % page_size) * row();
  }

  // K and V of block b's visible keys, in order: [n, heads, head_dim] each.
  std::pair<Tensor, Tensor> gather(int b) const {
    const int64_t n = num_keys();
    Tensor k = Tensor::empty({n, heads, head_dim}), v = Tensor::empty({n, heads, head_dim});
    for (int64_t j = 0; j < n; ++j) {
      std::memcpy(k.f32() + j * row(), key_row(b, j), static_cast<size_t>(row()) * sizeof(float));
      std::memcpy(v.f32() + j * row(), key_row(b, j) + int64_t{page_size} * row(),
                  static_cast<size_t>(row()) * sizeof(float));
    }
    return {std::move(k), std::move(v)};
  }
};

std::unique_ptr<PagedKeysFixture> make_fixture(int pool_pages, int page_size, int heads, int head_dim, int blocks,
                                               DType dtype, std::vector<int32_t> visible, int32_t last_len,
                                               std::mt19937& rng, bool tma = true) {
  auto f = std::make_unique<PagedKeysFixture>();
  *f = PagedKeysFixture{pool_pages, page_size, heads, head_dim, blocks, dtype, std::move(visible), last_len,
                        Tensor(), Tensor(), nullptr};
  f->host = Tensor::empty({blocks, pool_pages, 2, page_size, heads, head_dim});
  std::fill(f->host.f32(), f->host.f32() + f->host.numel(), std::numeric_limits<float>::quiet_NaN());
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < f->num_keys(); ++j) {
      float* k = const_cast<float*>(f->key_row(b, j));
      for (int64_t e = 0; e < f->row(); ++e) k[e] = normal(rng);
      for (int64_t e = 0; e < f->row(); ++e) k[int64_t{page_size} * f->row() + e] = normal(rng);
    }
  }
  f->host = ct::round_to(f->host, dtype);
  f->dev = ct::upload(f->host, dtype);

  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  KvTableHeader h;
  h.num_keys = static_cast<int32_t>(f->num_keys());
  h.num_pages = static_cast<int32_t>(f->visible.size());
  h.page_size = page_size;
  h.num_moves = 0;
  h.page_div = FastDiv::make(page_size);
  h.row_bytes = f->row() * elem;
  h.v_offset = int64_t{page_size} * h.row_bytes;
  h.block_stride = f->block_elems() * elem;
  std::vector<char*> ptrs;
  for (int32_t p : f->visible) ptrs.push_back(static_cast<char*>(f->dev.data()) + p * f->page_elems() * elem);
  f->table = std::make_unique<KvTable>(nullptr);
  std::optional<TensorMap> map;
  if (tma && dtype == DType::BF16) {
    map = kv_chunk_tensor_map({f->dev.data(), int64_t{2} * blocks * pool_pages, page_size, heads, head_dim},
                              attn::kWsPagedKeyTile);
  }
  if (map) {
    h.pages_per_chunk = pool_pages;
    h.tma_box_rows = attn::kWsPagedKeyTile;
    h.num_tensor_maps = 1;
    f->table->upload(h, ptrs, {}, f->visible, {*map});
  } else {
    f->table->upload(h, ptrs, {});
  }
  return f;
}

// Pages [0, pool) in a random order, the first `count` of them.
std::vector<int32_t> random_pages(int pool, int count, std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(pool));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(static_cast<size_t>(count));
  return ids;
}

Tensor reference(const PagedKeysFixture& f, int block, const Tensor& q) {
  const auto [k, v] = f.gather(block);
  const cpu::KvSpan span{k.f32(), v.f32(), k.dim(0)};
  Tensor out = Tensor::empty(q.shape());
  cpu::attention_reference(q.f32(), q.dim(0), {&span, 1}, f.heads, f.head_dim,
                           1.f / std::sqrt(static_cast<float>(f.head_dim)), out.f32());
  return out;
}

Tensor run(const PagedKeysFixture& f, int block, const Tensor& dq, AttentionKernel kernel, int splits,
           DeviceScratch& scratch) {
  Tensor out = ct::device_empty(dq.shape(), dq.dtype());
  ct::poison(out);
  attention_paged(dq, f.table->device(), block, f.heads, f.head_dim, out, scratch, nullptr, kernel, splits);
  LB_CUDA_CHECK(cudaGetLastError());
  return ct::download(out);
}

struct Variant {
  AttentionKernel kernel;
  int splits;
};

// The Hopper kernel runs in tests of its own (CudaAttentionWgmmaWs), so that a fault there cannot hide the other
// kernels' results. Auto: the portable kernels.
AttentionKernel g_only = AttentionKernel::Auto;

std::vector<Variant> variants_for(DType dtype, int head_dim) {
  if (g_only != AttentionKernel::Auto) {
    if (dtype != DType::BF16 || head_dim != 64) return {};
    return {{g_only, 0}, {g_only, 1}, {g_only, 3}, {g_only, 64}};
  }
  std::vector<Variant> v = {{AttentionKernel::Warp, 0}, {AttentionKernel::Warp, 1}, {AttentionKernel::Warp, 3},
                            {AttentionKernel::Auto, 0}};
  if (dtype == DType::BF16 && head_dim == 64) {
    for (int s : {0, 1, 2, 3, 7, 64}) v.push_back({AttentionKernel::Mma, s});
  }
  return v;
}

// Every variant on all rows vs the naive twin, and on sampled rows vs the CPU reference.
void check_all(const PagedKeysFixture& f, int block, int64_t nq, int max_ref_rows, std::mt19937& rng,
               const std::string& what) {
  SCOPED_TRACE(what);
  DeviceScratch scratch(nullptr, "test splits");
  const Tensor q = ct::round_to(ct::random_normal({nq, f.heads, f.head_dim}, rng), f.dtype);
  const Tensor dq = ct::upload(q, f.dtype);
  const double bound = ct::bound_for(f.dtype);

  const std::vector<int64_t> rows = ct::sample_rows(nq, max_ref_rows, rng);
  const Tensor q_rows = ct::take_rows(q, rows);
  const Tensor ref = reference(f, block, q_rows);
  // The naive twin on the sampled rows (it is slow at full size).
  const Tensor naive_rows = run(f, block, ct::upload(q_rows, f.dtype), AttentionKernel::Naive, 0, scratch);
  EXPECT_TRUE(ct::close_on_rows(naive_rows, ref, ct::all_rows(static_cast<int64_t>(rows.size())), f.heads,
                                f.head_dim, bound, "naive vs cpu reference"));
  for (const Variant& var : variants_for(f.dtype, f.head_dim)) {
    const std::string name = fmt::format("{} splits {}", attention_kernel_name(var.kernel), var.splits);
    const Tensor got = run(f, block, dq, var.kernel, var.splits, scratch);
    const auto r = ct::close_on_rows(got, ref, rows, f.heads, f.head_dim, bound, name + " vs cpu reference");
    EXPECT_TRUE(r);
    ::testing::Test::RecordProperty(what + " " + name, r.message());
    // Every row finite (the check on the sampled rows covers only those).
    int64_t bad = 0;
    for (int64_t e = 0; e < got.numel(); ++e) bad += !std::isfinite(got.f32()[e]);
    EXPECT_EQ(bad, 0) << name << ": non-finite outputs";
  }
}

// With no visible keys every output is exactly zero (5 queries, and 200:
// several query tiles, the last partial).
void check_no_keys(std::mt19937& rng) {
  DeviceScratch scratch(nullptr, "test splits");
  for (DType dtype : {DType::BF16, DType::F32}) {
    auto f = make_fixture(2, 64, 2, 64, 1, dtype, {}, 0, rng);
    for (int64_t nq : {5, 200}) {
      const Tensor dq = ct::upload(ct::random_normal({nq, 2, 64}, rng), dtype);
      for (const Variant& var : variants_for(dtype, 64)) {
        const Tensor got = run(*f, 0, dq, var.kernel, var.splits, scratch);
        for (int64_t e = 0; e < got.numel(); ++e) {
          ASSERT_EQ(got.f32()[e], 0.f) << attention_kernel_name(var.kernel) << " splits " << var.splits << ", "
                                       << nq << " queries, element " << e;
        }
      }
    }
  }
}

void check_needles(std::mt19937& rng) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    const int page_size = 97, heads = 2, d = 64;
    auto f = make_fixture(45, page_size, heads, d, 2, dtype, random_pages(45, 41, rng), 33, rng);
    const int64_t nk = f->num_keys();
    std::vector<int64_t> targets = {0, 1, nk - 2, nk - 1};
    for (int64_t p = page_size; p < nk; p += page_size) targets.insert(targets.end(), {p - 1, p});
    for (int64_t t = 64; t < nk; t += 64 * 7) targets.insert(targets.end(), {t - 1, t});
    std::uniform_int_distribution<int64_t> pick(0, nk - 1);
    for (int i = 0; i < 40; ++i) targets.push_back(pick(rng));
    const auto nq = static_cast<int64_t>(targets.size());
    const int64_t row = int64_t{heads} * d;
    Tensor q = Tensor::empty({nq, heads, d});
    Tensor expected = Tensor::empty({nq, heads, d});
    const int block = 1;
    for (int64_t i = 0; i < nq; ++i) {
      const float* kt = f->key_row(block, targets[static_cast<size_t>(i)]);
      for (int h = 0; h < heads; ++h) {
        double norm = 0;
        for (int c = 0; c < d; ++c) norm += double(kt[h * d + c]) * kt[h * d + c];
        for (int c = 0; c < d; ++c) {
          q.f32()[i * row + h * d + c] = static_cast<float>(60.0 * std::sqrt(double(d)) * kt[h * d + c] / std::sqrt(norm));
        }
      }
      std::memcpy(expected.f32() + i * row, kt + int64_t{page_size} * row, static_cast<size_t>(row) * sizeof(float));
    }
    const Tensor dq = ct::upload(ct::round_to(q, dtype), dtype);
    DeviceScratch scratch(nullptr, "test splits");
    std::vector<Variant> variants = variants_for(dtype, d);
    variants.push_back({AttentionKernel::Naive, 0});
    for (const Variant& var : variants) {
      const Tensor got = run(*f, block, dq, var.kernel, var.splits, scratch);
      EXPECT_TRUE(ct::close_on_rows(got, expected, ct::all_rows(nq), heads, d, ct::bound_for(dtype),
                                    fmt::format("{} splits {} {} needles (query i -> key targets[i])",
                                                attention_kernel_name(var.kernel), var.splits, dtype_name(dtype))));
    }
  }
}

}  // namespace

// One frame against a full window of the official model: 978 queries, 72
// frame pages of 972 patch tokens + the special stream (600 tokens of a last
// page), 16 heads x 64, bf16; the pages in a shuffled order of a larger pool.
TEST(CudaAttentionPaged, FullWindow) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(11);
  auto f = make_fixture(76, 972, 16, 64, 1, DType::BF16, random_pages(76, 73, rng), 600, rng);
  check_all(*f, 0, 978, 16, rng, "full window 978 x 70584");
}

TEST(CudaAttentionPaged, OddShapes) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(12);
  struct Shape_ {
    int pool, pages, page_size, last, heads, head_dim;
    int64_t nq;
    DType dtype;
  };
  const Shape_ shapes[] = {
      {3, 1, 1, 1, 2, 64, 5, DType::BF16},         // one key
      {4, 2, 1, 1, 2, 64, 3, DType::BF16},         // pages of one token
      {40, 37, 3, 2, 1, 64, 129, DType::BF16},     // tiny pages, a tile spans many
      {12, 9, 64, 64, 2, 64, 128, DType::BF16},    // pages = tiles
      {12, 9, 65, 1, 2, 64, 127, DType::BF16},     // pages one longer than a tile, last page one token
      {6, 4, 200, 137, 3, 64, 300, DType::BF16},
      {6, 4, 200, 137, 3, 64, 300, DType::F32},
      {5, 3, 97, 50, 2, 16, 40, DType::BF16},      // the small model's head sizes
      {5, 3, 97, 50, 2, 32, 40, DType::F32},
      {30, 25, 256, 11, 16, 128, 1, DType::F32},   // the camera head: one query, f32, 16 x 128
      {30, 25, 256, 11, 16, 128, 4, DType::F32},
      {30, 25, 256, 11, 4, 128, 2, DType::BF16},
  };
  for (const Shape_& s : shapes) {
    // Two blocks; the keys of block 1 (block stride applied).
    auto f = make_fixture(s.pool, s.page_size, s.heads, s.head_dim, 2, s.dtype, random_pages(s.pool, s.pages, rng),
                          s.last, rng);
    check_all(*f, 1, s.nq, 48, rng,
              fmt::format("{} pages of {} (last {}), {} heads x {}, {} queries, {}", s.pages, s.page_size, s.last,
                          s.heads, s.head_dim, s.nq, dtype_name(s.dtype)));
  }
}

TEST(CudaAttentionPaged, NoKeysGivesZeros) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(13);
  check_no_keys(rng);
}

// Query i targets one key t(i): q = 60 * sqrt(D) * k_t / |k_t|, so the score
// of k_t beats every other by far and the output must be v_t. Targets: the
// first and last keys, both sides of every page edge, of tile edges, and
// random keys.
TEST(CudaAttentionPaged, EveryKeyPositionIsReachable) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(14);
  check_needles(rng);
}

TEST(CudaAttentionPaged, SplitChoiceFillsTheGpu) {
  LB_REQUIRE_GPU();
  // One frame of 978 queries x 16 heads: 128 CTAs of 128 rows; splits must
  // bring the CTA count to at least the number of SMs.
  int device = 0, sms = 0;
  LB_CUDA_CHECK(cudaGetDevice(&device));
  LB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int splits = attention_paged_splits(AttentionKernel::Mma, 978, 16);
  EXPECT_GE(128 * splits, sms) << splits << " splits";
  EXPECT_LE(splits, 16);
  EXPECT_EQ(attention_paged_splits(AttentionKernel::Mma, 8 * 978, 16), 1);  // the scale phase fills it alone
  // The camera head (one query, 16 heads) splits its keys over at least one
  // warp per SM, but into no more than kMaxWarpSplits parts (each split's
  // partial output is read again by the combine pass).
  const int camera_splits = attention_paged_splits(AttentionKernel::Warp, 1, 16);
  EXPECT_GE(camera_splits * 16, sms);
  EXPECT_LE(camera_splits, kMaxWarpSplits);
  ::testing::Test::RecordProperty("splits_978x16", splits);
}

namespace {

// A Hopper kernel (sm_90a) pinned for the full window, odd pages, and needles.
void check_hopper_kernel(AttentionKernel kernel, const std::string& name, unsigned seed) {
  g_only = kernel;
  std::mt19937 rng(seed);
  auto full = make_fixture(76, 972, 16, 64, 1, DType::BF16, random_pages(76, 73, rng), 600, rng);
  check_all(*full, 0, 978, 16, rng, name + " full window 978 x 70584");
  auto odd = make_fixture(40, 37, 2, 64, 2, DType::BF16, random_pages(40, 37, rng), 5, rng);
  check_all(*odd, 1, 129, 48, rng, name + " pages of 37");
  auto one = make_fixture(3, 1, 2, 64, 2, DType::BF16, random_pages(3, 1, rng), 1, rng);
  check_all(*one, 1, 5, 48, rng, name + " one key");
  // 320 queries (query tiles of 128, the last half full) against 5 pages of
  // 972 keys (key tiles that straddle page ends).
  auto mid = make_fixture(12, 972, 4, 64, 1, DType::BF16, random_pages(12, 5, rng), 100, rng);
  check_all(*mid, 0, 320, 48, rng, name + " 320 queries x 3988 keys");
  // The same without tensor maps: every tile copied row by row.
  auto mid_rows = make_fixture(12, 972, 4, 64, 1, DType::BF16, random_pages(12, 5, rng), 100, rng, false);
  check_all(*mid_rows, 0, 320, 48, rng, name + " 320 queries x 3988 keys, no TMA");
  // Pages of 200 keys: of the 192-key tiles only the first (keys 0-191)
  // lies inside one page (TMA); the others straddle a page end.
  auto short_pages = make_fixture(9, 200, 3, 64, 2, DType::BF16, random_pages(9, 7, rng), 137, rng);
  check_all(*short_pages, 1, 300, 48, rng, name + " pages of 200");
  check_no_keys(rng);
  check_needles(rng);
  g_only = AttentionKernel::Auto;
}

}  // namespace

// The warp-specialised kernel (attention_wgmma_ws.cu), on Hopper only.
TEST(CudaAttentionWgmmaWs, PagedShapes) {
  LB_REQUIRE_GPU();
  if (!ct::hopper()) GTEST_SKIP() << "the wgmma-ws kernel runs on Hopper (sm_90) only";
  check_hopper_kernel(AttentionKernel::WgmmaWs, "wgmma-ws", 16);
}
