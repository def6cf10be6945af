// Randomized property tests of the two CPU stores: for thousands of random
// sequences of steps (stored frames, non-keyframes, multi-frame steps,
// resets) under random flags, window/scale sizes and token counts,
//   paged visible multiset == dense visible multiset == DictModel's
// (token identities encoded in the K/V values), page accounting invariants
// hold, non-keyframes leave both stores bit-for-bit unchanged, and attention
// over paged == over dense == attention_reference within fp32 rounding.
#include "backend/cpu/attention.h"
#include "backend/cpu/paged_kv_cache.h"
#include "kv/kv_cache.h"

#include "kv_test_support.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace lingbot;
using namespace lingbot::kv;
using lingbot::kv::test::DictModel;
using lingbot::kv::test::TokenSet;
namespace kvt = lingbot::kv::test;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Stats both layouts must agree on.
void expect_same_semantic_stats(const CacheStats& d, const CacheStats& p, const std::string& where) {
  EXPECT_EQ(d.frames_seen, p.frames_seen) << where;
  EXPECT_EQ(d.frames_stored, p.frames_stored) << where;
  EXPECT_EQ(d.frames_listed, p.frames_listed) << where;
  EXPECT_EQ(d.scale_frames, p.scale_frames) << where;
  EXPECT_EQ(d.window_frames, p.window_frames) << where;
  EXPECT_EQ(d.frames_evicted, p.frames_evicted) << where;
  EXPECT_EQ(d.special_tokens_retained, p.special_tokens_retained) << where;
  EXPECT_EQ(d.visible_tokens, p.visible_tokens) << where;
}

}  // namespace

TEST(KvCacheProperty, PagedAndDenseShowTheSameTokens) {
  std::mt19937 rng(20240611);
  const int cases = kvt::iterations(2000, 32);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int n = 0; n < cases; ++n) {
    auto [config, layout] = kvt::random_config(rng, 2);
    const int blocks = pick(1, 3);
    const std::string what = kvt::describe(config, layout, blocks);
    auto dense = make_cpu_cache(Layout::Dense, config, layout, blocks);
    auto paged = make_cpu_cache(Layout::Paged, config, layout, blocks);
    const auto& planner = dynamic_cast<const cpu::PagedKvCache&>(*paged).planner();
    DictModel model(config, layout);
    int64_t serial = 0;  // every frame that passes, stored or not
    const int steps = pick(1, 60);
    for (int s = 0; s < steps; ++s) {
      const std::string where = what + " step " + std::to_string(s);
      const int kind = pick(0, 39);
      if (kind == 0) {
        const int64_t paged_reserved = paged->stats().bytes_reserved;
        const int64_t dense_reserved = dense->stats().bytes_reserved;
        dense->reset();
        paged->reset();
        model.reset();
        EXPECT_EQ(paged->stats().pages_in_use, 0) << where;
        EXPECT_EQ(paged->stats().pages_pool, 0) << where;
        // The memory stays for the next stream.
        EXPECT_EQ(paged->stats().bytes_reserved, paged_reserved) << where;
        EXPECT_EQ(dense->stats().bytes_reserved, dense_reserved) << where;
        continue;
      }
      const bool store = kind > 8;
      const int frames = kind % 8 == 1 ? pick(2, config.sliding_window + config.scale_frames + 3) : 1;
      std::vector<int64_t> serials;
      for (int i = 0; i < frames; ++i) serials.push_back(serial++);

      // A non-keyframe must leave no trace: remember everything visible now.
      std::vector<std::pair<Tensor, Tensor>> dense_before, paged_before;
      CacheStats dense_stats_before, paged_stats_before;
      PageTable table_before;
      std::vector<int32_t> free_before;
      if (!store) {
        for (int b = 0; b < blocks; ++b) {
          dense_before.push_back(dense->gather_visible(b));
          paged_before.push_back(paged->gather_visible(b));
        }
        dense_stats_before = dense->stats();
        paged_stats_before = paged->stats();
        table_before = planner.stored_table();
        free_before = planner.pool().free_stack();
      }

      dense->begin_step(frames, store);
      paged->begin_step(frames, store);
      if (store) model.store(serials);
      const TokenSet expected = model.visible(store ? std::vector<int64_t>{} : serials);

      std::vector<int> order(static_cast<size_t>(blocks));
      for (int b = 0; b < blocks; ++b) order[static_cast<size_t>(b)] = b;
      std::shuffle(order.begin(), order.end(), rng);
      for (int b : order) {
        const Tensor k = kvt::encoded_rows(layout, b, serials, false);
        const Tensor v = kvt::encoded_rows(layout, b, serials, true);
        dense->append(b, k, v);
        paged->append(b, k, v);
        std::string dense_error, paged_error;
        const TokenSet d = kvt::decode_rows(layout, b, dense->gather_visible(b), &dense_error);
        const TokenSet p = kvt::decode_rows(layout, b, paged->gather_visible(b), &paged_error);
        ASSERT_TRUE(dense_error.empty()) << where << ": dense " << dense_error;
        ASSERT_TRUE(paged_error.empty()) << where << ": paged " << paged_error;
        ASSERT_EQ(d, expected) << where << " block " << b << "\n dense " << kvt::describe(d)
                               << "\n model " << kvt::describe(expected);
        ASSERT_EQ(p, expected) << where << " block " << b << "\n paged " << kvt::describe(p)
                               << "\n model " << kvt::describe(expected);
      }
      ASSERT_NO_THROW(planner.check_invariants()) << where;
      dense->end_step();
      paged->end_step();
      ASSERT_NO_THROW(planner.check_invariants()) << where;
      expect_same_semantic_stats(dense->stats(), paged->stats(), where);
      ASSERT_EQ(dense->stats().visible_tokens, static_cast<int64_t>(model.visible().size())) << where;

      if (!store) {
        for (int b = 0; b < blocks; ++b) {
          const auto d = dense->gather_visible(b);
          const auto p = paged->gather_visible(b);
          ASSERT_TRUE(same_bytes(d.first, dense_before[static_cast<size_t>(b)].first) &&
                      same_bytes(d.second, dense_before[static_cast<size_t>(b)].second))
              << where << ": a non-keyframe changed the dense cache of block " << b;
          ASSERT_TRUE(same_bytes(p.first, paged_before[static_cast<size_t>(b)].first) &&
                      same_bytes(p.second, paged_before[static_cast<size_t>(b)].second))
              << where << ": a non-keyframe changed the paged cache of block " << b;
        }
        ASSERT_EQ(planner.stored_table(), table_before) << where;
        ASSERT_EQ(planner.pool().free_stack(), free_before) << where;
        const CacheStats ds = dense->stats(), ps = paged->stats();
        EXPECT_EQ(ps.pages_pool, paged_stats_before.pages_pool) << where;
        EXPECT_EQ(ps.pages_in_use, paged_stats_before.pages_in_use) << where;
        EXPECT_EQ(ps.special_stream_tokens, paged_stats_before.special_stream_tokens) << where;
        EXPECT_EQ(ds.visible_tokens, dense_stats_before.visible_tokens) << where;
        EXPECT_EQ(ds.frames_stored, dense_stats_before.frames_stored) << where;
        EXPECT_EQ(ds.frames_seen, dense_stats_before.frames_seen + frames) << where;
      }
    }
    // reset() returns every page (the memory stays for the next stream).
    paged->reset();
    dense->reset();
    EXPECT_EQ(paged->stats().pages_pool, 0);
    EXPECT_EQ(paged->stats().visible_tokens, 0);
    EXPECT_EQ(dense->stats().visible_tokens, 0);
    EXPECT_EQ(paged->gather_visible(0).first.dim(0), 0);
    EXPECT_EQ(dense->gather_visible(0).first.dim(0), 0);
  }
}

// Attention: paged and dense agree with each other and with the double-
// precision reference over the gathered visible set.
//
// Error bound. Both stores run the same fp32 kernel over the same key set in
// different orders; the reference is exact to ~1e-15 for fp32 inputs. The
// fp32 kernel's error has three parts, each a few units of roundoff
// u = 2^-24 = 6e-8 relative to max|v|: the scores (a head_dim-term dot
// product, error <= head_dim * u * sum|q_c k_c|, here |s| <= ~6 so <~ 2e-6
// absolute in the exponent, i.e. relative in the weights), the exp2
// polynomial (< 1e-7 relative), and the weighted sum over nk <= ~200 keys
// with per-block rescaling (<= ~nk * u worst case, ~sqrt(nk) * u typical).
// We allow 2e-5 * max|v|: comfortably above these (observed max ~1e-6),
// far below any real mistake (a missing or extra key changes the output by
// ~1/nk >= 5e-3 here).
//
// Every storage type (float32, bf16, fp8) is drawn: the reference then runs
// over the values as stored (gather_visible reads them back), so the bound
// is the same; that those stored values are the right roundings of the
// appended ones is kv_storage_test.cpp's business.
TEST(KvCacheProperty, AttentionOverPagedEqualsDenseEqualsReference) {
  std::mt19937 rng(777);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int cases = kvt::iterations(150);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  double worst = 0;
  for (int n = 0; n < cases; ++n) {
    auto [config, layout] = kvt::random_config(rng, pick(0, 1) ? 16 : 8);
    config.dtype = static_cast<KvDtype>(pick(0, 2));  // Auto (float32), Bf16, Fp8
    const int blocks = pick(1, 2);
    auto dense = make_cpu_cache(Layout::Dense, config, layout, blocks);
    auto paged = make_cpu_cache(Layout::Paged, config, layout, blocks);
    const int steps = pick(1, 25);
    for (int s = 0; s < steps; ++s) {
      const int kind = pick(0, 9);
      const bool store = kind > 2;
      const int frames = kind == 3 ? pick(2, 6) : 1;
      dense->begin_step(frames, store);
      paged->begin_step(frames, store);
      for (int b = 0; b < blocks; ++b) {
        const int64_t rows = int64_t{frames} * layout.tokens_per_frame();
        Tensor k = Tensor::empty({rows, layout.num_heads, layout.head_dim});
        Tensor v = Tensor::empty({rows, layout.num_heads, layout.head_dim});
        for (int64_t i = 0; i < k.numel(); ++i) k.f32()[i] = normal(rng);
        for (int64_t i = 0; i < v.numel(); ++i) v.f32()[i] = normal(rng);
        dense->append(b, k, v);
        paged->append(b, k, v);
        // Query counts on both sides of the tiled kernel's threshold.
        const int64_t nq = pick(0, 1) ? pick(1, 7) : pick(8, 40);
        Tensor q = Tensor::empty({nq, layout.num_heads, layout.head_dim});
        for (int64_t i = 0; i < q.numel(); ++i) q.f32()[i] = normal(rng);
        Tensor out_dense = Tensor::empty(q.shape()), out_paged = Tensor::empty(q.shape());
        Tensor out_ref = Tensor::empty(q.shape());
        dense->attend(b, q, out_dense);
        paged->attend(b, q, out_paged);
        const auto [gk, gv] = dense->gather_visible(b);
        const cpu::KvSpan span{gk.f32(), gv.f32(), gk.dim(0)};
        cpu::attention_reference(q.f32(), nq, {&span, 1}, layout.num_heads, layout.head_dim,
                                 1.f / std::sqrt(static_cast<float>(layout.head_dim)), out_ref.f32());
        double vmax = 0;
        for (int64_t i = 0; i < gv.numel(); ++i) vmax = std::max(vmax, std::fabs(double{gv.f32()[i]}));
        const double tol = 2e-5 * vmax;
        const double e_dense = lingbot::test::max_abs_diff(out_dense, out_ref);
        const double e_paged = lingbot::test::max_abs_diff(out_paged, out_ref);
        worst = std::max({worst, e_dense / vmax, e_paged / vmax});
        const std::string where =
            kvt::describe(config, layout, blocks) + " " + std::string(kv_dtype_name(config.dtype)) + " step " +
            std::to_string(s);
        ASSERT_LE(e_dense, tol) << where;
        ASSERT_LE(e_paged, tol) << where;
        ASSERT_LE(lingbot::test::max_abs_diff(out_dense, out_paged), tol);
      }
      dense->end_step();
      paged->end_step();
    }
  }
  RecordProperty("worst_error_over_max_v", std::to_string(worst));
}
