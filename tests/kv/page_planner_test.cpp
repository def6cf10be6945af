// PagePlanner: page accounting invariants, upstream's layout with default
// flags, exact rollback of non-keyframes, and pool growth.
#include "kv/page_planner.h"

#include "kv_test_support.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>

using namespace lingbot;
using namespace lingbot::kv;

namespace {

TokenLayout layout_of(int specials, int patches) {
  TokenLayout l;
  l.num_special = specials;
  l.num_patches = patches;
  l.num_heads = 1;
  l.head_dim = 2;
  return l;
}

// Upstream's FlashInferKVCacheManager bookkeeping for one block, transcribed
// (append_frame + evict_frames with default flags): which role each visible
// page has and how long the last page is. Page ids themselves are free to differ.
struct UpstreamPagedModel {
  int S, W, specials, page_size;
  int64_t frames = 0;
  int64_t scale_pages = 0, window_pages = 0, special_tokens = 0;
  void append_and_evict() {
    if (scale_pages < S) ++scale_pages; else ++window_pages;  // _write_patch_page routing
    special_tokens += specials;                                // _write_special_tokens
    ++frames;
    while (window_pages > W) --window_pages;                   // evict_frames
  }
  int64_t special_pages() const { return (special_tokens + page_size - 1) / page_size; }
  int64_t last_page_len() const {                              // compute_last_page_len
    if (special_pages() == 0) return page_size;
    const int64_t tail = special_tokens % page_size;
    return tail == 0 ? page_size : tail;
  }
};

}  // namespace

TEST(PagePlanner, DefaultFlagsGiveUpstreamsTwoStreamLayout) {
  CacheConfig c;
  c.sliding_window = 5;
  c.scale_frames = 3;
  const TokenLayout l = layout_of(6, 16);  // page size = 16 patches: a special page every 16/6 frames
  PagePlanner planner(c, l);
  EXPECT_EQ(planner.page_size(), 16);
  EXPECT_EQ(planner.stream_tokens_per_frame(), 6);
  EXPECT_EQ(planner.rider_tokens_per_frame(), 16);
  UpstreamPagedModel up{3, 5, 6, 16};
  std::vector<int32_t> scale_page_ids;
  for (int f = 0; f < 40; ++f) {
    const StepPlan& plan = planner.begin_step(1, true);
    up.append_and_evict();
    // Rows: 6 specials to the stream (one or two runs), 16 patches to slot 0 of one page.
    int64_t stream_rows = 0;
    int patch_runs = 0;
    for (const RowWrite& w : plan.writes) {
      if (w.src_row >= 6) {
        EXPECT_EQ(w.src_row, 6);
        EXPECT_EQ(w.slot, 0);
        EXPECT_EQ(w.count, 16);
        ++patch_runs;
      } else {
        EXPECT_EQ(w.src_row, stream_rows);
        stream_rows += w.count;
      }
    }
    EXPECT_EQ(stream_rows, 6);
    EXPECT_EQ(patch_runs, 1);
    EXPECT_TRUE(plan.copies.empty());

    const PageTable& t = plan.visible;
    const int64_t frame_pages = up.scale_pages + up.window_pages;
    ASSERT_EQ(t.num_pages(), frame_pages + up.special_pages()) << "frame " << f;
    EXPECT_EQ(t.last_page_len, up.last_page_len());
    EXPECT_EQ(t.page_size, 16);
    EXPECT_EQ(t.num_tokens(), frame_pages * 16 + up.special_tokens);
    // Order: scale pages (fixed once filled), then window pages, then the stream's pages.
    if (f == 2) scale_page_ids.assign(t.page_ids.begin(), t.page_ids.begin() + 3);
    if (f >= 2) {
      EXPECT_EQ(std::vector<int32_t>(t.page_ids.begin(), t.page_ids.begin() + 3), scale_page_ids);
    }
    EXPECT_EQ(std::vector<int32_t>(t.page_ids.end() - up.special_pages(), t.page_ids.end()),
              planner.special_pages());
    planner.end_step();
    planner.check_invariants();
  }
  // 40 frames: scale 3 + window 5 frame pages, ceil(240 / 16) = 15 special pages.
  EXPECT_EQ(planner.frame_pages().size(), 8u);
  EXPECT_EQ(planner.special_pages().size(), 15u);
  EXPECT_EQ(planner.special_tokens(), 240);
}

TEST(PagePlanner, PageSizeAndRoutingFollowTheFlags) {
  CacheConfig c;
  c.sliding_window = 4;
  c.scale_frames = 2;
  const TokenLayout l = layout_of(6, 10);
  {
    PagePlanner p(c, l);  // default: upstream
    EXPECT_EQ(p.page_size(), 10);
    EXPECT_FALSE(p.copies_on_eviction());
  }
  {
    CacheConfig cc = c;
    cc.camera_only = true;  // camera to the stream, 5 specials ride with the patches
    PagePlanner p(cc, l);
    EXPECT_EQ(p.stream_tokens_per_frame(), 1);
    EXPECT_EQ(p.page_size(), 15);
  }
  {
    CacheConfig cc = c;
    cc.cross_frame_special = false;  // nothing outlives its frame: pages hold whole frames
    PagePlanner p(cc, l);
    EXPECT_EQ(p.stream_tokens_per_frame(), 0);
    EXPECT_EQ(p.page_size(), 16);
    EXPECT_FALSE(p.copies_on_eviction());
  }
  {
    CacheConfig cc = c;
    cc.include_scale_frames = false;  // retention known only at eviction: copy then
    PagePlanner p(cc, l);
    EXPECT_EQ(p.page_size(), 16);
    EXPECT_TRUE(p.copies_on_eviction());
  }
  {
    PagePlanner p(c, layout_of(0, 1));  // 1-token frames never leave: all in the stream
    EXPECT_EQ(p.stream_tokens_per_frame(), 1);
    EXPECT_EQ(p.rider_tokens_per_frame(), 0);
    EXPECT_EQ(p.page_size(), PagePlanner::kStreamOnlyPageSize);
  }
}

TEST(PagePlanner, QuirkCopiesRetainedSpecialsFromTheEvictedPage) {
  CacheConfig c;
  c.sliding_window = 2;
  c.scale_frames = 1;
  c.include_scale_frames = false;
  c.camera_only = true;
  PagePlanner p(c, layout_of(6, 4));
  std::map<int64_t, int32_t> page_of_frame;
  for (int f = 0; f < 3; ++f) {
    p.begin_step(1, true);
    page_of_frame[f] = p.frame_pages().back().page;
    p.end_step();
  }
  // Frame 3: frame 0 dropped, frame 1 evicted with its camera token copied.
  const StepPlan& plan = p.begin_step(1, true);
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0].src_page, page_of_frame[1]);
  EXPECT_EQ(plan.copies[0].src_slot, 0);
  EXPECT_EQ(plan.copies[0].count, 1);
  EXPECT_EQ(plan.copies[0].dst_slot, 0);
  ASSERT_EQ(p.special_pages().size(), 1u);
  EXPECT_EQ(plan.copies[0].dst_page, p.special_pages()[0]);
  // Destination allocated before the evicted pages were released: never a source.
  EXPECT_NE(plan.copies[0].dst_page, page_of_frame[0]);
  EXPECT_NE(plan.copies[0].dst_page, page_of_frame[1]);
  EXPECT_EQ(plan.visible.num_tokens(), 2 * 10 + 1);
  p.end_step();
  p.check_invariants();
}

TEST(PagePlanner, NonKeyframeLeavesNoTrace) {
  CacheConfig c;
  c.sliding_window = 3;
  c.scale_frames = 2;
  c.pool_growth_pages = 2;
  PagePlanner p(c, layout_of(6, 4));
  for (int f = 0; f < 9; ++f) {
    p.begin_step(1, true);
    p.end_step();
  }
  const PageTable before = p.stored_table();
  const std::vector<int32_t> free_before = p.pool().free_stack();
  const int32_t pool_before = p.pool().pool_pages();
  const int64_t stream_before = p.special_tokens();
  for (int frames : {1, 3, 7}) {
    const StepPlan& plan = p.begin_step(frames, false);
    // Visible: the stored pages, the step's temporary pages, then the stream (with its specials).
    EXPECT_EQ(plan.visible.num_tokens(), before.num_tokens() + frames * 10);
    p.check_invariants();
    p.end_step();
    EXPECT_EQ(p.stored_table(), before);
    EXPECT_EQ(p.pool().free_stack(), free_before);
    EXPECT_EQ(p.pool().pool_pages(), pool_before);
    EXPECT_EQ(p.special_tokens(), stream_before);
    p.check_invariants();
  }
}

TEST(PagePlanner, PoolGrowsInChunksAndStaysBounded) {
  CacheConfig c;
  c.sliding_window = 6;
  c.scale_frames = 3;
  c.pool_growth_pages = 4;
  PagePlanner p(c, layout_of(6, 12));  // a special page every 2 frames
  EXPECT_EQ(p.pool().pool_pages(), 0);  // lazy
  for (int f = 0; f < 500; ++f) {
    const StepPlan& plan = p.begin_step(1, true);
    EXPECT_EQ(plan.pool_pages % 4, 0);
    p.end_step();
    // Frame pages never exceed S + W; the pool beyond the stream is S + W + 1 + one chunk at most.
    EXPECT_LE(p.frame_pages().size(), 9u);
    EXPECT_LE(p.pool().pool_pages() - static_cast<int32_t>(p.special_pages().size()), 9 + 1 + 4);
  }
  EXPECT_EQ(p.special_tokens(), 500 * 6);
}

TEST(PagePlanner, InvariantsHoldOnRandomSequences) {
  std::mt19937 rng(99);
  const int cases = test::iterations(3000);
  for (int n = 0; n < cases; ++n) {
    auto [c, l] = test::random_config(rng, 2);
    PagePlanner p(c, l);
    std::map<int64_t, int32_t> pinned;  // scale frame -> its page, must never change or free
    const int steps = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int s = 0; s < steps; ++s) {
      const int kind = std::uniform_int_distribution<int>(0, 19)(rng);
      if (kind == 0) {
        p.reset();
        EXPECT_EQ(p.pool().pool_pages(), 0);
        EXPECT_EQ(p.pool().used_pages(), 0);
        pinned.clear();
        continue;
      }
      const bool store = kind > 4;
      const int frames = kind % 5 == 1 ? std::uniform_int_distribution<int>(2, 9)(rng) : 1;
      const StepPlan& plan = p.begin_step(frames, store);
      ASSERT_NO_THROW(p.check_invariants()) << test::describe(c, l, 1);
      // Every row of the step written exactly once, inside page bounds.
      std::vector<int> hits(static_cast<size_t>(frames * l.tokens_per_frame()), 0);
      for (const RowWrite& w : plan.writes) {
        ASSERT_GE(w.slot, 0);
        ASSERT_LE(w.slot + w.count, plan.visible.page_size);
        ASSERT_LT(w.page, plan.pool_pages);
        for (int i = 0; i < w.count; ++i) ++hits[static_cast<size_t>(w.src_row + i)];
      }
      for (int h : hits) ASSERT_EQ(h, 1) << test::describe(c, l, 1);
      std::set<int32_t> visible(plan.visible.page_ids.begin(), plan.visible.page_ids.end());
      ASSERT_EQ(visible.size(), plan.visible.page_ids.size()) << "a page appears twice in the table";
      for (const SlotCopy& cp : plan.copies) {
        ASSERT_TRUE(visible.count(cp.dst_page));  // copies land in the stream
        ASSERT_FALSE(visible.count(cp.src_page)); // from pages of evicted frames
      }
      for (int32_t page : plan.visible.page_ids) ASSERT_TRUE(p.pool().is_used(page));
      if (plan.visible.num_pages() > 0) {
        ASSERT_GE(plan.visible.last_page_len, 1);
        ASSERT_LE(plan.visible.last_page_len, plan.visible.page_size);
      }
      p.end_step();
      ASSERT_NO_THROW(p.check_invariants()) << test::describe(c, l, 1);
      // Pinned scale pages.
      if (c.include_scale_frames && p.rider_tokens_per_frame() > 0) {
        for (int64_t i = 0; i < p.window().pinned_frames(); ++i) {
          const auto& fp = p.frame_pages()[static_cast<size_t>(i)];
          auto [it, fresh] = pinned.emplace(fp.frame, fp.page);
          ASSERT_EQ(it->second, fp.page) << "scale frame " << fp.frame << " changed page";
          ASSERT_TRUE(p.pool().is_used(fp.page));
        }
        ASSERT_EQ(static_cast<int64_t>(pinned.size()), p.window().pinned_frames());
      }
      ASSERT_EQ(p.pool().used_pages() + p.pool().free_pages(), p.pool().pool_pages());
    }
    p.reset();
    EXPECT_EQ(p.pool().used_pages(), 0);
    EXPECT_EQ(p.stored_table().num_pages(), 0);
  }
}
