// WindowPolicy: the dense semantics, checked against hand-worked sequences
// and against an independent transcription of upstream's slicing (DictModel).
#include "kv/window_policy.h"

#include "kv_test_support.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

using namespace lingbot;
using namespace lingbot::kv;
using lingbot::kv::test::DictModel;

namespace {

std::vector<int64_t> listed(const WindowPolicy& w) { return {w.frames().begin(), w.frames().end()}; }

TokenLayout tiny_layout(int specials, int patches) {
  TokenLayout l;
  l.num_special = specials;
  l.num_patches = patches;
  l.num_heads = 1;
  l.head_dim = 2;
  return l;
}

CacheConfig window(int W, int S) {
  CacheConfig c;
  c.sliding_window = W;
  c.scale_frames = S;
  return c;
}

}  // namespace

TEST(WindowPolicy, DefaultFlagsKeepScaleFramesAndRetainSpecials) {
  // W = 2, S = 1, 2 specials + 1 patch. Worked by hand:
  //   f0..f2: [0,1,2] (3 <= W+S); f3: 4 > 3, evict position [1,2) = frame 1 -> [0,2,3];
  //   f4: evict frame 2 -> [0,3,4].
  WindowPolicy w(window(2, 1), tiny_layout(2, 1));
  for (int f = 0; f < 3; ++f) EXPECT_TRUE(w.store(1).empty());
  EXPECT_EQ(listed(w), (std::vector<int64_t>{0, 1, 2}));
  auto ev = w.store(1);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].frame, 1);
  EXPECT_TRUE(ev[0].retained);
  EXPECT_EQ(listed(w), (std::vector<int64_t>{0, 2, 3}));
  ev = w.store(1);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].frame, 2);
  EXPECT_EQ(listed(w), (std::vector<int64_t>{0, 3, 4}));
  EXPECT_EQ(w.retained_tokens(), 2 * 2);  // two frames x two specials
  EXPECT_EQ(w.pinned_frames(), 1);
  EXPECT_EQ(w.visible_tokens(), 4 + 3 * 3);
}

TEST(WindowPolicy, IncludeScaleFramesFalseQuirk) {
  // W = 2, S = 1, include_scale_frames = false. By hand:
  //   f3: list [0,1,2,3] -> evict [1,2) = frame 1 (retained), frame 0 dropped
  //       without retention, list = last 2 = [2,3];
  //   f4: [2,3,4] (3 <= W+S, no eviction: the quirk's pause);
  //   f5: [2,3,4,5] -> frame 3 retained, frame 2 dropped, list [4,5].
  CacheConfig c = window(2, 1);
  c.include_scale_frames = false;
  WindowPolicy w(c, tiny_layout(6, 3));
  for (int f = 0; f < 3; ++f) w.store(1);
  auto ev = w.store(1);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].frame, 0);
  EXPECT_FALSE(ev[0].retained);
  EXPECT_EQ(ev[1].frame, 1);
  EXPECT_TRUE(ev[1].retained);
  EXPECT_EQ(listed(w), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(w.store(1).empty());
  EXPECT_EQ(listed(w), (std::vector<int64_t>{2, 3, 4}));
  ev = w.store(1);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].frame, 2);
  EXPECT_FALSE(ev[0].retained);
  EXPECT_EQ(ev[1].frame, 3);
  EXPECT_TRUE(ev[1].retained);
  EXPECT_EQ(listed(w), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(w.retained_tokens(), 2 * 6);
  EXPECT_EQ(w.pinned_frames(), 0);
  EXPECT_EQ(w.frames_evicted(), 4);
}

TEST(WindowPolicy, MultiFrameStepEvictsOnceAfterAppendingAll) {
  // 5 frames at once into W = 2, S = 1: one eviction of positions [1, 3).
  WindowPolicy w(window(2, 1), tiny_layout(6, 3));
  auto ev = w.store(5);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].frame, 1);
  EXPECT_EQ(ev[1].frame, 2);
  EXPECT_EQ(listed(w), (std::vector<int64_t>{0, 3, 4}));
  // With the quirk, evicting once differs from evicting after every frame:
  // once = frame 0 dropped, frames 1-2 retained, list [3,4].
  CacheConfig c = window(2, 1);
  c.include_scale_frames = false;
  WindowPolicy q(c, tiny_layout(6, 3));
  ev = q.store(5);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_FALSE(ev[0].retained);
  EXPECT_TRUE(ev[1].retained && ev[2].retained);
  EXPECT_EQ(listed(q), (std::vector<int64_t>{3, 4}));
}

TEST(WindowPolicy, SingleTokenFramesAreNeverEvicted) {
  // The camera head: TokenLayout{0 specials, 1 patch}; upstream's `shape[3] > 1` check.
  WindowPolicy w(window(2, 1), tiny_layout(0, 1));
  EXPECT_FALSE(w.evicts());
  for (int f = 0; f < 100; ++f) EXPECT_TRUE(w.store(1).empty());
  EXPECT_EQ(w.frames().size(), 100u);
  EXPECT_EQ(w.visible_tokens(), 100);
}

TEST(WindowPolicy, RetainedTokensPerFrameFollowTheFlags) {
  CacheConfig c = window(2, 1);
  EXPECT_EQ(WindowPolicy(c, tiny_layout(6, 3)).retained_tokens_per_frame(), 6);
  c.camera_only = true;
  EXPECT_EQ(WindowPolicy(c, tiny_layout(6, 3)).retained_tokens_per_frame(), 1);
  EXPECT_EQ(WindowPolicy(c, tiny_layout(0, 3)).retained_tokens_per_frame(), 0);  // no specials to keep
  c.cross_frame_special = false;
  EXPECT_EQ(WindowPolicy(c, tiny_layout(6, 3)).retained_tokens_per_frame(), 0);
}

TEST(WindowPolicy, BadConfigIsAnError) {
  EXPECT_THROW(WindowPolicy(window(0, 1), tiny_layout(6, 3)), Error);
  EXPECT_THROW(WindowPolicy(window(2, -1), tiny_layout(6, 3)), Error);
  EXPECT_THROW(WindowPolicy(window(2, 1), tiny_layout(0, 0)), Error);
  WindowPolicy w(window(2, 1), tiny_layout(6, 3));
  EXPECT_THROW(w.store(0), Error);
}

TEST(WindowPolicy, MatchesUpstreamSlicingOnRandomSequences) {
  std::mt19937 rng(1234);
  const int cases = test::iterations(3000);
  for (int n = 0; n < cases; ++n) {
    auto [c, l] = test::random_config(rng, 2);
    WindowPolicy w(c, l);
    DictModel model(c, l);
    std::deque<int64_t> retained_frames;
    const int steps = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int s = 0; s < steps; ++s) {
      const int frames = std::uniform_int_distribution<int>(0, 5)(rng) == 0
                             ? std::uniform_int_distribution<int>(2, c.sliding_window + c.scale_frames + 3)(rng)
                             : 1;
      std::vector<int64_t> serials;
      for (int i = 0; i < frames; ++i) serials.push_back(w.frames_stored() + i);
      for (const auto& e : w.store(frames))
        if (e.retained) retained_frames.push_back(e.frame);
      model.store(serials);
      ASSERT_EQ(listed(w), model.frames()) << test::describe(c, l, 1) << " step " << s;
      ASSERT_EQ(w.retained_tokens(), model.retained_tokens()) << test::describe(c, l, 1);
      ASSERT_EQ(static_cast<int64_t>(retained_frames.size()) * w.retained_tokens_per_frame(), w.retained_tokens());
    }
  }
}
