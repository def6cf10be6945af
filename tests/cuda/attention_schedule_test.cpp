// The balanced schedule of the wgmma-ws attention kernel
// (attention_schedule.h), on the host (CI): for a sweep of key counts,
// query counts, heads and grid sizes, walking every CTA's pieces must cover
// each (group, head, query row block, key tile) exactly once, cut each tile
// into numbered pieces in key order, give no CTA more than its share of
// units, and stay within the kernel's limits (pieces per CTA, partial-result
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

  // (group, head, row block) -> how often each key tile was covered.
  std::map<std::tuple<int, int, int>, std::vector<int>> covered;
  // (group, head, first row) -> the pieces seen: (first step, piece, pieces).
  std::map<std::tuple<int, int, int>, std::vector<std::tuple<int, int, int>>> pieces_of;
  most_pieces = 0;
  for (int32_t cta = 0; cta < c.ctas; ++cta) {
    auto walk = attn::BalancedWalk::of(plan, cta);
    attn::BalancedPiece p;
    int n = 0;
    int64_t units = 0;
    while (walk.next(p)) {
      ++n;
      EXPECT_GE(p.group, 0);
      EXPECT_LT(p.group, c.groups);
      EXPECT_GE(p.head, 0);
      EXPECT_LT(p.head, c.heads);
      EXPECT_TRUE(p.active == 2 || p.active == 3) << p.active;
      EXPECT_LE(0, p.first_step);
      EXPECT_LE(p.first_step, p.end_step);
      EXPECT_LE(p.end_step, key_tiles);
      EXPECT_GE(p.piece, 0);
      EXPECT_LT(p.piece, p.pieces);
      EXPECT_LE(p.pieces, attn::kBalancedSlots);
      EXPECT_EQ(p.row0 % attn::kBalancedRowBlock, 0);
      units += (p.active == 3 ? attn::kFullStepUnits : attn::kPairStepUnits) * std::max(1, p.steps());
      for (int k = 0; k < p.active; ++k) {
        const int block = p.row0 / attn::kBalancedRowBlock + k;
        ASSERT_LT(block, row_blocks);
        auto& tiles = covered[{p.group, p.head, block}];
        tiles.resize(static_cast<size_t>(key_tiles));
        for (int32_t t = p.first_step; t < p.end_step; ++t) ++tiles[static_cast<size_t>(t)];
      }
      pieces_of[{p.group, p.head, p.row0}].emplace_back(p.first_step, p.piece, p.pieces);
    }
    // A CTA's steps start in its share; the last may run on past it.
    EXPECT_LE(units, plan.share + attn::kFullStepUnits - 1) << "cta " << cta;
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
}

}  // namespace

TEST(CudaAttentionSchedule, OneFrameAgainstTheFullWindow) {
  // The official model: 978 queries = 16 row blocks per head: four full
  // tiles and two pairs (the last full tile and the block left over), 552
  // key tiles, 16 heads on 132 SMs: 16 x (4 x 4 + 2 x 3) x 552 units, 1472
  // per CTA.
  int pieces = 0;
  check_case({70584, 978, 1, 16, 132}, pieces);
  EXPECT_LE(pieces, attn::kMaxBalancedPieces);
  const attn::BalancedPlan plan = attn::make_balanced_plan(70584, 978, 1, 16, 132);
  EXPECT_EQ(plan.full_tiles, 4);
  EXPECT_EQ(plan.pair_tiles, 2);
  EXPECT_EQ(plan.key_tiles, 552);
  EXPECT_EQ(plan.total_units, 16 * (4 * 4 + 2 * 3) * 552);
  EXPECT_EQ(plan.share, 1472);
}

TEST(CudaAttentionSchedule, CoversEveryShape) {
  int most = 0;
  for (int32_t ctas : {1, 7, 114, 132}) {
    for (int32_t heads : {1, 2, 16}) {
      for (int32_t rows : {65, 128, 129, 191, 192, 193, 256, 257, 320, 978, 2000}) {
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
      EXPECT_EQ(p.steps(), 0);
      first_pieces += p.piece == 0;
    }
  }
  EXPECT_EQ(first_pieces, 16 * 6);
}
