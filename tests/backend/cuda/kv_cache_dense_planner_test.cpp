// Host-side logic of the GPU KV cache, tested without a GPU (these run in CI):
//   - the whole-frame PagePlanner: its plans, executed on host pages, show exactly the
//     visible token multiset of upstream's dictionary cache (kvt::DictModel,
//     an independent model), with consistent page accounting; a non-keyframe
//     leaves the stored table and the pool's free stack as they were;
//   - row_moves(): running a step's moves all at once (every source read
//     before any destination is written, as one GPU kernel may) leaves the
//     same visible keys as running the plan's writes and then its copies in
//     order, for the plans of both planners.
#include "backend/cuda/kv/kv_table.h"
#include "kv/page_planner.h"

#include "kv/kv_test_support.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace lingbot;
using namespace lingbot::cuda;
namespace kvt = lingbot::kv::test;
using lingbot::kv::PagePlanner;
using lingbot::kv::PageRouting;

namespace {
// The device store's Dense layout: whole-frame pages, retained specials copied at eviction.
PagePlanner whole_frame_planner(kv::CacheConfig config, const kv::TokenLayout& layout, int32_t pool_growth_pages) {
  config.pool_growth_pages = pool_growth_pages;
  return PagePlanner(config, layout, PageRouting::WholeFrames);
}
}  // namespace

namespace {

// Page memory on the host: page[kv][slot][row floats].
class HostPages {
 public:
  HostPages(int32_t page_size, int64_t row) : page_size_(page_size), row_(row) {}

  void ensure(int32_t pool_pages) {
    while (static_cast<int32_t>(pages_.size()) < pool_pages) {
      pages_.emplace_back(static_cast<size_t>(2 * page_size_ * row_), -1.f);
    }
  }
  float* k(int32_t page, int64_t slot) { return pages_.at(static_cast<size_t>(page)).data() + slot * row_; }
  float* v(int32_t page, int64_t slot) { return k(page, slot) + int64_t{page_size_} * row_; }

  // The CPU paged store's order: all writes, then all copies.
  void execute_plan(const kv::StepPlan& plan, const Tensor& k_in, const Tensor& v_in) {
    ensure(plan.pool_pages);
    for (const kv::RowWrite& w : plan.writes) {
      for (int32_t i = 0; i < w.count; ++i) {
        std::memcpy(k(w.page, w.slot + i), k_in.f32() + (w.src_row + i) * row_, bytes());
        std::memcpy(v(w.page, w.slot + i), v_in.f32() + (w.src_row + i) * row_, bytes());
      }
    }
    for (const kv::SlotCopy& c : plan.copies) {
      for (int32_t i = 0; i < c.count; ++i) {
        std::memcpy(k(c.dst_page, c.dst_slot + i), k(c.src_page, c.src_slot + i), bytes());
        std::memcpy(v(c.dst_page, c.dst_slot + i), v(c.src_page, c.src_slot + i), bytes());
      }
    }
  }

  // All moves at once: read every source, then write every destination.
  void execute_moves(const std::vector<RowMove>& moves, int32_t pool_pages, const Tensor& k_in, const Tensor& v_in) {
    ensure(pool_pages);
    std::vector<std::vector<float>> read;
    for (const RowMove& m : moves) {
      const float* ks = m.src_page < 0 ? k_in.f32() + m.src * row_ : k(m.src_page, m.src);
      const float* vs = m.src_page < 0 ? v_in.f32() + m.src * row_ : v(m.src_page, m.src);
      std::vector<float> r(ks, ks + row_);
      r.insert(r.end(), vs, vs + row_);
      read.push_back(std::move(r));
    }
    for (size_t i = 0; i < moves.size(); ++i) {
      std::memcpy(k(moves[i].dst_page, moves[i].dst_slot), read[i].data(), bytes());
      std::memcpy(v(moves[i].dst_page, moves[i].dst_slot), read[i].data() + row_, bytes());
    }
  }

  std::pair<Tensor, Tensor> gather(const kv::PageTable& t, int heads, int head_dim) {
    const int64_t n = t.num_tokens();
    Tensor k_out = Tensor::empty({n, heads, head_dim}), v_out = Tensor::empty({n, heads, head_dim});
    int64_t at = 0;
    for (int32_t i = 0; i < t.num_pages(); ++i) {
      for (int32_t s = 0; s < t.page_len(i); ++s, ++at) {
        std::memcpy(k_out.f32() + at * row_, k(t.page_ids[static_cast<size_t>(i)], s), bytes());
        std::memcpy(v_out.f32() + at * row_, v(t.page_ids[static_cast<size_t>(i)], s), bytes());
      }
    }
    return {std::move(k_out), std::move(v_out)};
  }

 private:
  size_t bytes() const { return static_cast<size_t>(row_) * sizeof(float); }
  int32_t page_size_;
  int64_t row_;
  std::vector<std::vector<float>> pages_;
};

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

TEST(CudaKvDensePlanner, ShowsTheDictionaryCacheTokens) {
  std::mt19937 rng(909);
  const int cases = kvt::iterations(1500);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int n = 0; n < cases; ++n) {
    auto [config, layout] = kvt::random_config(rng, 2);
    const std::string what = kvt::describe(config, layout, 1);
    PagePlanner planner = whole_frame_planner(config, layout, pick(1, 4));
    HostPages pages(planner.page_size(), layout.row_floats());
    kvt::DictModel model(config, layout);
    int64_t serial = 0;
    const int steps = pick(1, 60);
    for (int s = 0; s < steps; ++s) {
      const std::string where = what + " step " + std::to_string(s);
      const int kind = pick(0, 39);
      if (kind == 0) {
        planner.reset();
        model.reset();
        pages = HostPages(planner.page_size(), layout.row_floats());
        EXPECT_EQ(planner.pool().pool_pages(), 0) << where;
        continue;
      }
      const bool store = kind > 8;
      const int frames = kind % 8 == 1 ? pick(2, config.sliding_window + config.scale_frames + 3) : 1;
      std::vector<int64_t> serials;
      for (int i = 0; i < frames; ++i) serials.push_back(serial++);
      const kv::PageTable table_before = planner.stored_table();
      const std::vector<int32_t> free_before = planner.pool().free_stack();
      const int32_t pool_before = planner.pool().pool_pages();

      const kv::StepPlan& plan = planner.begin_step(frames, store);
      if (store) model.store(serials);
      ASSERT_NO_THROW(planner.check_invariants()) << where;
      const Tensor k = kvt::encoded_rows(layout, 0, serials, false);
      const Tensor v = kvt::encoded_rows(layout, 0, serials, true);
      pages.execute_plan(plan, k, v);
      std::string error;
      const kvt::TokenSet got =
          kvt::decode_rows(layout, 0, pages.gather(plan.visible, layout.num_heads, layout.head_dim), &error);
      ASSERT_TRUE(error.empty()) << where << ": " << error;
      const kvt::TokenSet want = model.visible(store ? std::vector<int64_t>{} : serials);
      ASSERT_EQ(got, want) << where << "\n planner " << kvt::describe(got) << "\n model   " << kvt::describe(want);
      planner.end_step();
      ASSERT_NO_THROW(planner.check_invariants()) << where;
      if (!store) {
        EXPECT_EQ(planner.stored_table(), table_before) << where;
        EXPECT_EQ(planner.pool().free_stack(), free_before) << where;
        EXPECT_EQ(planner.pool().pool_pages(), pool_before) << where;
      }
      EXPECT_EQ(planner.stored_table().num_tokens(), static_cast<int64_t>(model.visible().size())) << where;
    }
  }
}

// Runs random steps through a planner twice over host pages: once executing
// the plan (writes, then copies), once executing row_moves(plan) all at once.
template <typename Planner>
void check_moves_match_plans(Planner& planner, const kv::TokenLayout& layout, std::mt19937& rng,
                             const std::string& what) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  HostPages by_plan(planner.page_size(), layout.row_floats());
  HostPages by_moves(planner.page_size(), layout.row_floats());
  int64_t serial = 0;
  const int steps = pick(1, 40);
  for (int s = 0; s < steps; ++s) {
    const bool store = pick(0, 3) != 0;
    const int frames = pick(0, 4) == 0 ? pick(2, 12) : 1;
    std::vector<int64_t> serials;
    for (int i = 0; i < frames; ++i) serials.push_back(serial++);
    const kv::StepPlan& plan = planner.begin_step(frames, store);
    const Tensor k = kvt::encoded_rows(layout, 0, serials, false);
    const Tensor v = kvt::encoded_rows(layout, 0, serials, true);
    by_plan.execute_plan(plan, k, v);
    by_moves.execute_moves(row_moves(plan), plan.pool_pages, k, v);
    const auto a = by_plan.gather(plan.visible, layout.num_heads, layout.head_dim);
    const auto b = by_moves.gather(plan.visible, layout.num_heads, layout.head_dim);
    ASSERT_TRUE(same_values(a.first, b.first) && same_values(a.second, b.second))
        << what << " step " << s << ": row moves and plan disagree";
    planner.end_step();
  }
}

TEST(CudaKvDensePlanner, RowMovesEqualThePlans) {
  std::mt19937 rng(910);
  const int cases = kvt::iterations(600);
  for (int n = 0; n < cases; ++n) {
    auto [config, layout] = kvt::random_config(rng, 2);
    const std::string what = kvt::describe(config, layout, 1);
    kv::PagePlanner paged(config, layout);
    ASSERT_NO_FATAL_FAILURE(check_moves_match_plans(paged, layout, rng, what + " paged"));
    PagePlanner dense = whole_frame_planner(config, layout, config.pool_growth_pages);
    ASSERT_NO_FATAL_FAILURE(check_moves_match_plans(dense, layout, rng, what + " dense"));
  }
}

// A plan where a frame is stored and evicted in the same step (more new
// frames than the window) with retention: its specials are copied from a page
// written in that very step, so the moves must read the input rows.
TEST(CudaKvDensePlanner, SameStepEvictionReadsTheInput) {
  kv::CacheConfig c;
  c.sliding_window = 1;
  c.scale_frames = 0;
  kv::TokenLayout l;
  l.num_special = 2;
  l.num_patches = 3;
  l.num_heads = 1;
  l.head_dim = 2;
  PagePlanner planner = whole_frame_planner(c, l, 2);
  const kv::StepPlan& plan = planner.begin_step(3, true);  // frames 0, 1 evicted at once, frame 2 stays
  ASSERT_EQ(plan.copies.size(), 2u);
  const std::vector<RowMove> moves = row_moves(plan);
  int from_input = 0;
  for (const RowMove& m : moves) from_input += m.src_page < 0;
  EXPECT_EQ(from_input, static_cast<int>(moves.size()));  // 15 rows + 4 copied specials, all from the input
  EXPECT_EQ(moves.size(), 15u + 4u);
  planner.end_step();
}
