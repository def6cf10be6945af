// The balanced schedule of the warp-specialised attention kernel's
// three-consumer shape over the paged cache (attention_wgmma_ws.cu,
// attention_versions.md: wgmma v4 and v5): one persistent CTA per SM, each
// taking an equal share of the launch's work, cut into pieces along the keys.
//
// Why: three consumer warpgroups (192 query rows per CTA) do more work per
// SM than two, but one frame's 978 queries make, per head, five tiles of 192
// rows and a block of 18: 96 unequal CTAs, which no grid of key splits
// spreads evenly over 132 SMs. Here the work is a line of weighted steps
// instead, and CTA c takes the steps that start in units
// [c * share, (c + 1) * share):
//
//   per (group, head), in order, its query tiles: row blocks of 64, one per
//   consumer, three to a "full" tile; the blocks left over make "pair"
//   tiles of two (one pair, or with one block left two pairs from the last
//   full tile and it). A step is one key tile of 128 for the tile's
//   consumers; a full tile's step weighs kFullStepUnits, a pair's
//   kPairStepUnits (its two consumers do two thirds of the work, with less
//   overlap).
//
// No step loads more than one K/V tile. (wgmma v4 gave a block left over
// to all three consumers, each over a third of the keys: three K/V tiles
// per step, 3.06 us against 1.85; the CTAs holding one finished last.)
//
// A tile cut between CTAs leaves one partial result per piece in a slot of
// the split buffers (at most kBalancedSlots), which the combine kernel merges
// by log-sum-exp; the piece that covers a tile's first step also marks its
// unused slots empty (log-sum-exp -inf).
//
// The plan depends on the number of keys, which only the device knows when a
// captured graph replays (it is read from the KV table), so each CTA works it
// out itself; the host only sizes the grid and the slots. Evaluated on either
// side: tests/cuda/attention_schedule_test.cpp checks on the host that the
// pieces cover every (row block, key tile) exactly once.
#pragma once

#include "backend/cuda/fast_div.h"  // LB_HOST_DEVICE

#include <cstdint>

namespace lingbot::cuda::attn {

constexpr int32_t kBalancedConsumers = 3;
constexpr int32_t kBalancedRowBlock = 64;  // query rows per consumer
constexpr int32_t kBalancedKeyTile = 128;
// Step weights: a pair tile's step against a full tile's, 3 : 4 (the
// two-consumer kernel does 128 rows x 128 keys in ~0.71 of the time the
// three-consumer one takes for 192 rows; a pair inside the three-consumer
// kernel has its longer per-tile overheads).
constexpr int64_t kFullStepUnits = 4;
constexpr int64_t kPairStepUnits = 3;

// Full and pair tiles of `row_blocks` blocks of 64 rows (at least 2).
LB_HOST_DEVICE void balanced_tile_counts(int64_t row_blocks, int64_t& full, int64_t& pairs) {
  full = row_blocks / kBalancedConsumers;
  pairs = 0;
  if (row_blocks % kBalancedConsumers == 2) pairs = 1;
  if (row_blocks % kBalancedConsumers == 1) {  // the last full tile and the block left: two pairs
    full -= 1;
    pairs = 2;
  }
}
// Whether the schedule applies to `rows` queries: at least two row blocks
// (a single block would leave two consumers idle).
LB_HOST_DEVICE bool balanced_rows_fit(int64_t rows) { return rows > kBalancedRowBlock; }
// Query tiles of `rows` queries x `heads` heads (one group).
LB_HOST_DEVICE int64_t balanced_tiles(int64_t rows, int64_t heads) {
  int64_t full, pairs;
  balanced_tile_counts((rows + kBalancedRowBlock - 1) / kBalancedRowBlock, full, pairs);
  return heads * (full + pairs);
}
// The most pieces one CTA's share holds when there are at most as many
// tiles (balanced_tiles) as CTAs. A share is at most the average plus a
// unit and at least half a full tile; a tile is at least 3/4 of a full one,
// so a share meets at most 4 tiles (the host test checks the bound over a
// sweep of shapes). The kernel lists a CTA's pieces in shared memory.
constexpr int32_t kMaxBalancedPieces = 6;
// Partial-result slots per query row: a share of at least half a full
// tile cuts a tile into at most 3 pieces.
constexpr int32_t kBalancedSlots = 3;

struct BalancedPlan {
  int32_t num_keys = 0;
  int32_t key_tiles = 0;   // tiles of 128 keys with keys in them: 0 when there are none
  int32_t tile_steps = 1;  // steps of every query tile: key_tiles, at least 1
  int32_t full_tiles = 0;  // full query tiles per (group, head)
  int32_t pair_tiles = 0;  // pair tiles per (group, head): 0, 1 or 2
  int32_t heads = 1;
  int64_t full_units = 0;  // units of a full tile: tile_steps * kFullStepUnits
  int64_t pair_units = 0;
  int64_t units_per_head = 0;
  int64_t total_units = 0;
  int64_t share = 1;  // units per CTA
};

// `rows` queries per group (balanced_rows_fit), `groups * heads` (group,
// head) pairs, `ctas` CTAs in the launch.
LB_HOST_DEVICE BalancedPlan make_balanced_plan(int32_t num_keys, int32_t rows, int32_t groups, int32_t heads,
                                               int32_t ctas) {
  BalancedPlan p;
  p.num_keys = num_keys;
  p.key_tiles = (num_keys + kBalancedKeyTile - 1) / kBalancedKeyTile;
  // Even without keys every tile takes a step: its piece writes the empty
  // result (zeros, lse -inf) that the combine kernel turns into zeros.
  p.tile_steps = p.key_tiles > 1 ? p.key_tiles : 1;
  int64_t full, pairs;
  balanced_tile_counts((rows + kBalancedRowBlock - 1) / kBalancedRowBlock, full, pairs);
  p.full_tiles = static_cast<int32_t>(full);
  p.pair_tiles = static_cast<int32_t>(pairs);
  p.heads = heads;
  p.full_units = int64_t{p.tile_steps} * kFullStepUnits;
  p.pair_units = int64_t{p.tile_steps} * kPairStepUnits;
  p.units_per_head = full * p.full_units + pairs * p.pair_units;
  p.total_units = p.units_per_head * groups * heads;
  const int64_t even = (p.total_units + ctas - 1) / ctas;
  const int64_t half_tile = (p.full_units + 1) / 2;  // keeps pieces per tile within kBalancedSlots
  p.share = even > half_tile ? even : half_tile;
  if (p.share < kFullStepUnits) p.share = kFullStepUnits;  // every share holds a step start: pieces numbered without gaps
  return p;
}

// One CTA's piece of one query tile: key tiles [first_step, end_step) of
// (group, head) for `active` consumers, consumer c on query rows
// row0 + 64 c.
struct BalancedPiece {
  int32_t group = 0;
  int32_t head = 0;
  int32_t row0 = 0;
  int32_t active = kBalancedConsumers;  // 3 (full tile) or 2 (pair)
  int32_t first_step = 0;
  int32_t end_step = 0;  // first_step when there are no keys
  int32_t piece = 0;     // this piece's index among its tile's pieces (in key order): its split slot
  int32_t pieces = 1;    // how many pieces its tile is cut into
  LB_HOST_DEVICE int32_t steps() const { return end_step - first_step; }
};

// Walks CTA `cta`'s pieces in order: `next` fills `piece` and returns true
// while there is one. Step s of a tile belongs to the CTA whose units hold
// the step's first unit.
struct BalancedWalk {
  BalancedPlan plan;  // a copy: a pointer would put the plan in local memory on the device
  int32_t cta;
  int64_t pos;  // units
  int64_t end;

  LB_HOST_DEVICE static BalancedWalk of(const BalancedPlan& p, int32_t cta) {
    const int64_t begin = int64_t{cta} * p.share;
    const int64_t end = begin + p.share;
    return {p, cta, begin < p.total_units ? begin : p.total_units, end < p.total_units ? end : p.total_units};
  }

  LB_HOST_DEVICE bool next(BalancedPiece& out) {
    while (pos < end) {
      if (piece_at(out)) return true;
    }
    return false;
  }

 private:
  // The piece of the tile at `pos`, if the share holds the first unit of
  // one of its steps (it may hold only the middle of one); moves pos on.
  LB_HOST_DEVICE bool piece_at(BalancedPiece& out) {
    const BalancedPlan& p = plan;
    const int64_t gh = pos / p.units_per_head;
    const int64_t off = pos - gh * p.units_per_head;  // units within the (group, head)
    const int64_t full_part = int64_t{p.full_tiles} * p.full_units;
    int64_t tile_off;  // the tile's first unit within the (group, head)
    int64_t unit;      // units per step
    if (off < full_part) {
      const int64_t t = off / p.full_units;
      tile_off = t * p.full_units;
      unit = kFullStepUnits;
      out.row0 = static_cast<int32_t>(t * kBalancedConsumers * kBalancedRowBlock);
      out.active = kBalancedConsumers;
    } else {
      const int64_t b = (off - full_part) / p.pair_units;
      tile_off = full_part + b * p.pair_units;
      unit = kPairStepUnits;
      out.row0 = static_cast<int32_t>((int64_t{p.full_tiles} * kBalancedConsumers + 2 * b) * kBalancedRowBlock);
      out.active = 2;
    }
    const int64_t tile_start = gh * p.units_per_head + tile_off;  // on the line of units
    const int64_t len = int64_t{p.tile_steps} * unit;
    // Steps whose first unit lies in [pos, end): from ceil((pos - start) / unit).
    const int64_t s0 = (pos - tile_start + unit - 1) / unit;
    const int64_t stop = end - tile_start < len ? end - tile_start : len;
    const int64_t s1 = (stop + unit - 1) / unit;
    pos = tile_start + stop;
    if (s1 <= s0) return false;
    out.group = static_cast<int32_t>(gh / p.heads);
    out.head = static_cast<int32_t>(gh % p.heads);
    const int64_t real = s1 < p.key_tiles ? s1 : p.key_tiles;  // no keys: nothing to load
    out.first_step = static_cast<int32_t>(s0);
    out.end_step = static_cast<int32_t>(real > s0 ? real : s0);
    // Pieces of the tile: the CTAs that hold the first unit of one of its steps.
    auto owner = [&](int64_t step) { return (tile_start + step * unit) / p.share; };
    const int64_t first_cta = owner(0);
    out.piece = static_cast<int32_t>(cta - first_cta);
    out.pieces = static_cast<int32_t>(owner(p.tile_steps - 1) - first_cta + 1);
    return true;
  }
};

}  // namespace lingbot::cuda::attn
