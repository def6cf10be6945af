// The balanced schedule of the warp-specialised attention kernel's
// three-consumer shape over the paged cache (attention_wgmma_ws.cu,
// attention_versions.md: wgmma v4): one persistent CTA per SM, each taking an
// equal share of the launch's work, cut into pieces along the keys.
//
// Why: three consumer warpgroups (192 query rows per CTA) do ~15% more work
// per SM than two, but one frame's 978 queries make, per head, five tiles of
// 192 rows and a block of 18: 96 unequal CTAs, which no grid of key splits
// spreads evenly over 132 SMs. Here the work is a line of equal steps
// instead, and CTA c takes steps [c * share, (c + 1) * share):
//
//   per (group, head), in order: the full query tiles (3 row blocks of 64,
//   one per consumer), one step per key tile of 128 (rounded up to three
//   "thirds" of `third` steps; steps past the keys are empty); then the row blocks
//   left over (rows / 64 % 3 of them, "lone" blocks), whose three consumers
//   share the block's rows and split its keys in three ranges, a third
//   each: step s is key tile s of each consumer's third.
//
// Every step is then three consumer-tiles of work. A query tile (or lone
// block) cut between CTAs leaves one partial result per piece (and per
// consumer, for a lone block) in a slot of the split buffers, which the
// combine kernel merges by log-sum-exp; the piece that covers a tile's first
// step also marks its unused slots empty (log-sum-exp -inf).
//
// Where the CTAs read: shares are whole multiples of a third of a full
// tile's steps, so every piece starts at a third of its tile, and at any
// moment the CTAs read keys at three places (as many as the lone blocks'
// consumers), each shared by every head. With shares cut anywhere, each
// CTA read its own place and 5.9% of the reads hit L2 (77% for the grid
// schedule; Nsight Compute, round 36); aligned, 35-40% (round 37-38).
//
// Measured (H200, rounds 40-41): 960 queries (no lone block) 680 us against
// 730 for the grid schedule (408 against 381 TFLOP/s); 978 queries 887-890
// us against 726-730. A lone block's step costs 3.06 us against 1.85 for a
// full tile's: it needs three K/V tiles per step, and a consumer holding
// two of the six stages (or one, finishing each tile's P V before its next)
// leaves the producer little to load ahead. The CTAs that hold a lone
// third finish last.
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
// Query tiles and lone blocks of `rows` queries x `heads` heads (one group).
LB_HOST_DEVICE int64_t balanced_tiles(int64_t rows, int64_t heads) {
  const int64_t row_blocks = (rows + kBalancedRowBlock - 1) / kBalancedRowBlock;
  return heads * (row_blocks / kBalancedConsumers + row_blocks % kBalancedConsumers);
}
// The most pieces one CTA's share holds when there are at most as many
// tiles (balanced_tiles) as CTAs. A share of k thirds meets at most k + 1
// tiles (every tile is at least a third long), and k = ceil(total / (third
// x ctas)) <= 3 since each tile is at most three thirds (the host test
// checks the bound over a sweep of shapes). The kernel lists a CTA's pieces
// in shared memory.
constexpr int32_t kMaxBalancedPieces = 6;
// Partial-result slots per query row. A share is at least a third, so a
// full tile (three thirds) is cut into at most 4 pieces (slots 0..3) and a
// lone block (one third) into at most 2, of three consumer partials each
// (slots 3 * piece + consumer).
constexpr int32_t kBalancedSlots = 6;

struct BalancedPlan {
  int32_t num_keys = 0;
  int32_t key_tiles = 0;    // tiles of 128 keys with keys in them: 0 when there are none
  int32_t third = 1;        // a third of the key tiles (at least 1), rounded up: a lone row block's steps
  int32_t tile_steps = 3;   // steps of a full query tile: three thirds
  int32_t full_tiles = 0;   // full query tiles per (group, head)
  int32_t lone_blocks = 0;  // lone row blocks per (group, head): 0, 1 or 2
  int32_t heads = 1;
  int64_t steps_per_head = 0;
  int64_t total_steps = 0;
  int64_t share = 1;  // steps per CTA: a multiple of `third`
};

// `rows` queries per group, `groups * heads` (group, head) pairs, `ctas`
// CTAs in the launch.
LB_HOST_DEVICE BalancedPlan make_balanced_plan(int32_t num_keys, int32_t rows, int32_t groups, int32_t heads,
                                               int32_t ctas) {
  BalancedPlan p;
  p.num_keys = num_keys;
  p.key_tiles = (num_keys + kBalancedKeyTile - 1) / kBalancedKeyTile;
  // Even without keys every tile takes a step: its piece writes the empty
  // result (zeros, lse -inf) that the combine kernel turns into zeros.
  p.third = ((p.key_tiles > 1 ? p.key_tiles : 1) + kBalancedConsumers - 1) / kBalancedConsumers;
  p.tile_steps = kBalancedConsumers * p.third;
  const int32_t row_blocks = (rows + kBalancedRowBlock - 1) / kBalancedRowBlock;
  p.full_tiles = row_blocks / kBalancedConsumers;
  p.lone_blocks = row_blocks % kBalancedConsumers;
  p.heads = heads;
  p.steps_per_head = int64_t{p.full_tiles} * p.tile_steps + int64_t{p.lone_blocks} * p.third;
  p.total_steps = p.steps_per_head * groups * heads;
  const int64_t even = (p.total_steps + ctas - 1) / ctas;
  const int64_t thirds = (even + p.third - 1) / p.third;
  p.share = (thirds > 1 ? thirds : 1) * p.third;
  return p;
}

// One CTA's piece of one query tile or lone block, steps [first_step,
// end_step) of it. A full tile's step s is key tile s (a piece ends at the
// last key tile, and may be empty when it starts past it); a lone block's
// step s is key tile c * third + s for consumer c (tiles past the keys are
// loaded as zeros and masked).
struct BalancedPiece {
  int32_t group = 0;
  int32_t head = 0;
  int32_t row0 = 0;      // first query row of the tile (consumer c: row0 + 64 c) or of the lone block
  bool lone = false;     // a lone row block: every consumer has rows [row0, row0 + 64) and its own third of the keys
  int32_t first_step = 0;
  int32_t end_step = 0;  // first_step when there are no keys
  int32_t third = 1;     // the plan's: a lone block's consumer c starts at key tile c * third
  int32_t piece = 0;     // this piece's index among its tile's pieces (in key order)
  int32_t pieces = 1;    // how many pieces its tile is cut into
  LB_HOST_DEVICE int32_t steps() const { return end_step - first_step; }
  // Key tiles the CTA loads: one per step, or one per consumer and step.
  LB_HOST_DEVICE int32_t tiles() const { return lone ? kBalancedConsumers * steps() : steps(); }
  // The split slot of consumer c's partial result, and the first unused slot of the tile.
  LB_HOST_DEVICE int32_t slot(int32_t consumer) const { return lone ? kBalancedConsumers * piece + consumer : piece; }
  LB_HOST_DEVICE int32_t used_slots() const { return lone ? kBalancedConsumers * pieces : pieces; }
};

// Walks CTA `cta`'s pieces in order: `next` fills `piece` and returns true
// while there is one.
struct BalancedWalk {
  BalancedPlan plan;  // a copy: a pointer would put the plan in local memory on the device
  int32_t cta;
  int64_t pos;
  int64_t end;

  LB_HOST_DEVICE static BalancedWalk of(const BalancedPlan& p, int32_t cta) {
    const int64_t begin = int64_t{cta} * p.share;
    const int64_t end = begin + p.share;
    return {p, cta, begin < p.total_steps ? begin : p.total_steps, end < p.total_steps ? end : p.total_steps};
  }

  LB_HOST_DEVICE bool next(BalancedPiece& out) {
    const BalancedPlan& p = plan;
    if (pos >= end) return false;
    const int64_t gh = pos / p.steps_per_head;
    const int64_t off = pos - gh * p.steps_per_head;  // step within the (group, head)
    const int64_t full_steps = int64_t{p.full_tiles} * p.tile_steps;
    int64_t tile_off;  // the tile's first step within the (group, head)
    int64_t len;       // its steps
    if (off < full_steps) {
      const int64_t t = off / p.tile_steps;
      tile_off = t * p.tile_steps;
      len = p.tile_steps;
      out.row0 = static_cast<int32_t>(t * kBalancedConsumers * kBalancedRowBlock);
      out.lone = false;
    } else {
      const int64_t b = (off - full_steps) / p.third;
      tile_off = full_steps + b * p.third;
      len = p.third;
      out.row0 = static_cast<int32_t>((int64_t{p.full_tiles} * kBalancedConsumers + b) * kBalancedRowBlock);
      out.lone = true;
    }
    const int64_t tile_start = gh * p.steps_per_head + tile_off;  // on the line of steps
    const int64_t s0 = pos - tile_start;
    const int64_t s1 = (end - tile_start < len) ? end - tile_start : len;
    out.group = static_cast<int32_t>(gh / p.heads);
    out.head = static_cast<int32_t>(gh % p.heads);
    out.first_step = static_cast<int32_t>(s0);
    const int64_t last = out.lone ? (p.key_tiles > 0 ? s1 : s0) : (s1 < p.key_tiles ? s1 : p.key_tiles);
    out.end_step = static_cast<int32_t>(last > s0 ? last : s0);
    out.third = p.third;
    const int64_t first_cta = tile_start / p.share;
    out.piece = static_cast<int32_t>(cta - first_cta);
    out.pieces = static_cast<int32_t>((tile_start + len - 1) / p.share - first_cta + 1);
    pos = tile_start + s1;
    return true;
  }
};

}  // namespace lingbot::cuda::attn
