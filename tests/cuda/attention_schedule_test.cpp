// The balanced schedule of the wgmma-ws attention kernel
// (attention_schedule.h), on the host (CI): for a sweep of key counts,
// query counts, heads and grid sizes, walking every CTA's pieces must cover
// each (group, head, query row block, key tile) exactly once, cut each tile
// into numbered pieces in key order, give no CTA more than its share of
// steps, and stay within the kernel's limits (pieces per CTA, partial-result
// slots). The device evaluates the same inline functions.
#include "backend/cuda/attention_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace attn = lingbot::cuda::attn;

namespace {

struct Case {
  int32_t num_keys, rows, groups, heads, ctas;
};

// Walks every CTA of `c` and checks the invariants above; `most_pieces`:
// the most pieces any CTA got.
void check_case(const Case& c, int& most_pieces) {
  SCOPED_TRACE(testing::Message() << "keys " << c.num_keys << ", rows " << c.rows << ", groups " << c.groups
                                  << ", heads " << c.heads << ", ctas " << c.ctas);
  const attn::BalancedPlan plan = attn::make_balanced_plan(c.num_keys, c.rows, c.groups, c.heads, c.ctas);
  const int32_t key_tiles = (c.num_keys + attn::kBalancedKeyTile - 1) / attn::kBalancedKeyTile;
  const int32_t row_blocks = (c.rows + attn::kBalancedRowBlock - 1) / attn::kBalancedRowBlock;
  const int32_t third = (std::max(key_tiles, 1) + 2) / 3;
  ASSERT_EQ(plan.third, third);
  ASSERT_EQ(plan.share % third, 0);

  // (group, head, row block) -> how often each key tile was covered.
  std::map<std::tuple<int, int, int>, std::vector<int>> covered;
  // (group, head, first row) -> the pieces seen: (first step, piece, pieces).
  std::map<std::tuple<int, int, int>, std::vector<std::tuple<int, int, int>>> pieces_of;
  most_pieces = 0;
  for (int32_t cta = 0; cta < c.ctas; ++cta) {
    auto walk = attn::BalancedWalk::of(plan, cta);
    attn::BalancedPiece p;
    int n = 0;
    int64_t steps = 0;
    while (walk.next(p)) {
      ++n;
      EXPECT_GE(p.group, 0);
      EXPECT_LT(p.group, c.groups);
      EXPECT_GE(p.head, 0);
      EXPECT_LT(p.head, c.heads);
      EXPECT_LE(0, p.first_step);
      EXPECT_LE(p.first_step, p.end_step);
      EXPECT_EQ(p.third, third);
      // Every piece starts at a third of its tile (where the other CTAs
      // read), a tile's first at step 0.
      EXPECT_EQ(p.first_step % third, 0);
      EXPECT_EQ(p.piece == 0, p.first_step == 0);
      EXPECT_LE(p.used_slots(), attn::kBalancedSlots);
      EXPECT_EQ(p.row0 % attn::kBalancedRowBlock, 0);
      EXPECT_LT(p.row0, c.rows);
      steps += std::max(1, p.steps());
      // Key tiles of each consumer's row block: a full tile's consumers
      // share the key tiles (step = key tile); a lone block's consumer k
      // has key tiles k * third + step.
      for (int k = 0; k < attn::kBalancedConsumers; ++k) {
        const int block = p.row0 / attn::kBalancedRowBlock + (p.lone ? 0 : k);
        ASSERT_LT(block, row_blocks);
        auto& tiles = covered[{p.group, p.head, block}];
        tiles.resize(static_cast<size_t>(key_tiles));
        for (int32_t s = p.first_step; s < p.end_step; ++s) {
          const int32_t t = p.lone ? k * third + s : s;
          if (p.lone && t >= key_tiles) continue;  // past the keys: an empty tile
          ASSERT_LT(t, key_tiles);
          ++tiles[static_cast<size_t>(t)];
        }
      }
      pieces_of[{p.group, p.head, p.row0}].emplace_back(p.first_step, p.piece, p.pieces);
    }
    EXPECT_LE(steps, plan.share) << "cta " << cta;
    most_pieces = std::max(most_pieces, n);
  }
  // Every row block of every (group, head) has every key tile exactly once.
  EXPECT_EQ(covered.size(), static_cast<size_t>(c.groups) * c.heads * row_blocks);
  for (const auto& [key, tiles] : covered) {
    for (size_t t = 0; t < tiles.size(); ++t) {
      ASSERT_EQ(tiles[t], 1) << "block " << std::get<2>(key) << " of head " << std::get<1>(key) << ", key tile " << t;
    }
  }
  // Each tile's pieces are numbered 0 .. pieces - 1 in key order, and agree on their count.
  for (auto& [key, list] : pieces_of) {
    std::sort(list.begin(), list.end());
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(std::get<1>(list[i]), static_cast<int>(i));
      EXPECT_EQ(std::get<2>(list[i]), static_cast<int>(list.size()));
    }
  }
  // Shares: the fewest whole thirds that hold an even split of the work.
  const int64_t even = (plan.total_steps + c.ctas - 1) / c.ctas;
  EXPECT_GE(plan.share, even);
  EXPECT_LT(plan.share - third, std::max<int64_t>(even, 1));
}

}  // namespace

TEST(CudaAttentionSchedule, OneFrameAgainstTheFullWindow) {
  // The official model: 978 queries x 16 heads against 70,584 keys (552
  // tiles of 128, thirds of 184), 132 SMs: five full tiles and one lone
  // block per head, 16 x 16 thirds of work, so two thirds per CTA.
  int pieces = 0;
  check_case({70584, 978, 1, 16, 132}, pieces);
  EXPECT_LE(pieces, attn::kMaxBalancedPieces);
  const attn::BalancedPlan plan = attn::make_balanced_plan(70584, 978, 1, 16, 132);
  EXPECT_EQ(plan.full_tiles, 5);
  EXPECT_EQ(plan.lone_blocks, 1);
  EXPECT_EQ(plan.key_tiles, 552);
  EXPECT_EQ(plan.third, 184);
  EXPECT_EQ(plan.total_steps, 16 * (5 * 552 + 184));
  EXPECT_EQ(plan.share, 2 * 184);
}

TEST(CudaAttentionSchedule, CoversEveryShape) {
  int most = 0;
  for (int32_t ctas : {1, 7, 114, 132}) {
    for (int32_t heads : {1, 2, 16}) {
      for (int32_t rows : {1, 5, 64, 65, 128, 129, 191, 192, 193, 320, 978, 2000}) {
        for (int32_t keys : {0, 1, 127, 128, 129, 300, 385, 3913, 9733, 70584}) {
          int pieces = 0;
          check_case({keys, rows, 1, heads, ctas}, pieces);
          if (attn::balanced_tiles(rows, heads) <= ctas) most = std::max(most, pieces);
          if (HasFailure()) return;
        }
      }
    }
  }
  // The bound the kernel's piece list relies on (the host runs the balanced
  // schedule only where balanced_tiles <= ctas).
  EXPECT_LE(most, attn::kMaxBalancedPieces);
  ::testing::Test::RecordProperty("most_pieces", most);
}

TEST(CudaAttentionSchedule, SeveralGroups) {
  int pieces = 0;
  for (int32_t groups : {2, 3}) check_case({1000, 200, groups, 4, 20}, pieces);
}

TEST(CudaAttentionSchedule, NoKeysStillGivesEveryTileAPiece) {
  // Every tile must write its (empty) partial results so that the combine
  // pass reads no stale slot: each tile has a first piece, and no piece
  // loads a key tile.
  const attn::BalancedPlan plan = attn::make_balanced_plan(0, 978, 1, 16, 132);
  int first_pieces = 0;
  for (int32_t cta = 0; cta < 132; ++cta) {
    auto walk = attn::BalancedWalk::of(plan, cta);
    attn::BalancedPiece p;
    while (walk.next(p)) {
      EXPECT_EQ(p.tiles(), 0);
      first_pieces += p.piece == 0;
    }
  }
  EXPECT_EQ(first_pieces, 16 * 6);
}
