// The warp-specialised attention kernel on Hopper (sm_90a): wgmma v2 and v3
// in attention_versions.md, FlashAttention-3's structure. bf16, head_dim 64;
// same contract and key splits as the other tensor-core kernels
// (attention_launch.h), 64 query rows per consumer warpgroup.
//
// Why a new structure: in wgmma v1 (attention_wgmma.cu) every warp loads,
// waits at a CTA-wide barrier, multiplies and exponentiates, so the tensor
// cores, the exponential unit and the issue slots take turns instead of
// overlapping (counted in attention_versions.md). Here the roles are split:
//
//   warpgroup 0, the producer: copies K/V tiles into a ring of kStages
//     shared-memory stages with cp.async and tells the consumers a stage is
//     full through an mbarrier (cp.async.mbarrier.arrive: the producer never
//     waits for its own copies). It gives most of its registers back
//     (setmaxnreg) to the consumers.
//   warpgroups 1.. kConsumers, the consumers: 64 query rows each. Per tile t:
//       wait until stage t is full
//       [turn] issue S_t = Q K_t^T and O += P_{t-1} V_{t-1}  [pass the turn]
//       wait for S_t; online softmax of S_t while P_{t-1} V_{t-1} runs
//       wait for it; release stage t - 1 to the producer; rescale O, pack P_t
//     The turn goes round the consumers through named barriers (ping-pong
//     with two): they issue their matrix products in turn, so one's softmax
//     runs while another's products occupy the tensor cores.
//
// Two shapes (WsShape): two consumers, 192-key tiles, 4 stages of 48 KiB
// (the paged cache and frame blocks: one frame's 978 rows x 16 heads = 128
// CTAs fill 128 of the H200's 132 SMs in one wave without key splits); three
// consumers, 128-key tiles, 6 stages of 32 KiB, Q in shared memory (long
// dense groups: the scale phase). One CTA per SM either way.
//
// Memory ordering: cp.async writes shared memory through the generic proxy
// and wgmma reads it through the async proxy, so each consumer thread
// fences (fence.proxy.async) after the mbarrier wait that made the copies
// visible to it and before its wgmmas (and after staging Q). A stage is
// refilled only after every consumer warp has arrived on its "empty"
// mbarrier, which it does after waiting for the wgmma group that read it.
#include "backend/cuda/attention_kernels.cuh"
#include "backend/cuda/attention_schedule.h"
#include "backend/cuda/wgmma_ops.cuh"

#include <cuda_bf16.h>

#include <type_traits>

namespace lingbot::cuda::attn {

namespace {

using bf16 = __nv_bfloat16;
using wg::kD;

// Two shapes, by the number of consumer warpgroups (attention_versions.md,
// wgmma v2 and v3):
//   2 consumers: 128 query rows per CTA, 192-key tiles, 4 stages of 48 KiB;
//     registers 40 (producer) and 232 (consumers).
//   3 consumers: 192 query rows per CTA, 128-key tiles (S is kKeyTile / 2
//     registers per thread, and a consumer gets only 160), 6 stages of
//     32 KiB; FlashAttention-3's shape at head_dim 64: a third warp per
//     scheduler hides more of each softmax's latency.
template <int kConsumers>
struct WsShape;
template <>
struct WsShape<2> {
  // 192 keys measured on the H200 against 128: 736 against 780 us for the
  // full window. Larger tiles spread the per-tile costs (barriers, row
  // maxima, the rescale of O) over more keys; 256 would not fit the
  // registers.
  static constexpr int kKeyTile = 192;
  static constexpr int kStages = 4;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  static constexpr bool kQInSmem = false;  // Q's A fragments stay in registers
};
template <>
struct WsShape<3> {
  static constexpr int kKeyTile = 128;
  static constexpr int kStages = 6;
  static constexpr int kProducerRegs = 32;
  static constexpr int kConsumerRegs = 160;
  // Q's fragments (16 registers) would not fit beside S, O and P: Q is read
  // from shared memory by S's wgmma instead.
  static constexpr bool kQInSmem = true;
};

constexpr int kWarpgroup = 128;
// Producer: 128 threads, thread = (chunk tid % 8, row tid / 8 + 16 i).
constexpr int kRowsPerPass = 16;
// Barriers first (2 per stage), then the tiles from the next 1024-byte
// boundary of the shared address space (the swizzle works on absolute
// address bits): at most 1024 bytes of slack.
// With kQInSmem the CTA's queries follow the tiles (128 bytes per row).
__host__ __device__ constexpr int smem_bytes(int key_tile, int stages, int q_rows) {
  return 2 * stages * 8 + 1024 + 2 * stages * key_tile * kD * 2 + q_rows * kD * 2;
}
// Named barriers of the ping-pong: consumer c waits on kTurnBarrier + c;
// each is shared by two warpgroups (the waiter and the one passing).
[[maybe_unused]] constexpr int kTurnBarrier = 1;
// Named barrier of consumer c's own warpgroup (kQInSmem: Q staged): 4 + c.
[[maybe_unused]] constexpr int kQBarrier = 4;
constexpr int kTurnThreads = 2 * kWarpgroup;
static_assert(kRowsPerPass * 8 == kWarpgroup);

template <int kConsumers>
constexpr int threads_of() {
  return kWarpgroup * (1 + kConsumers);
}
// One query tile's work for one CTA: `tiles` key tiles of (group, head)
// from key kb, keys past ke masked, for the tile's `active` consumers,
// consumer c on query rows row0 + 64 c. The partial result goes to split
// slot `piece`.
struct Work {
  int32_t group = 0;
  int32_t head = 0;
  int32_t row0 = 0;
  int32_t kb = 0;
  int32_t ke = 0;
  int32_t tiles = 0;
  int32_t active = 0;  // balanced schedule: 3 (full tile) or 2 (pair); grid schedule: set from the rows
  int32_t piece = 0;   // grid schedule: the key split
  int32_t pieces = 1;  // balanced schedule: pieces of the tile
  // The work's first key tile's place in the stage ring: the tiles of the
  // CTA's earlier works.
  int32_t ring = 0;
};

template <int kConsumers>
constexpr int smem_of() {
  using Shape = WsShape<kConsumers>;
  return smem_bytes(Shape::kKeyTile, Shape::kStages, Shape::kQInSmem ? kConsumers * 64 : 0);
}
// The balanced schedule lists the CTA's pieces after the queries: a count
// and up to kMaxBalancedPieces Works.
constexpr int kPieceListBytes = 16 + kMaxBalancedPieces * static_cast<int>(sizeof(Work));

#if LB_WGMMA
using namespace wg;
#endif

// kBalanced: the balanced schedule (attention_schedule.h; three consumers):
// the grid is one CTA per SM and each takes its pieces in turn, the stage
// ring and the consumers' turn running on across them. Otherwise the grid
// schedule: one CTA per (query tile, head, key split).
template <int kConsumers, bool kBalanced, typename Keys>
__global__ void __launch_bounds__(threads_of<kConsumers>(), 1)
    attention_wgmma_ws_kernel(AttentionArgs<bf16> a, Keys keys) {
#if LB_WGMMA
  using Shape = WsShape<kConsumers>;
  constexpr int kStages = Shape::kStages;
  constexpr int kConsumerThreads = kConsumers * kWarpgroup;
  constexpr int kBr = kConsumers * 64;  // query rows per CTA: 64 per consumer
  constexpr int kBc = Shape::kKeyTile;  // S = Q K^T is one wgmma m64n{kBc}k16 per k-step
  static_assert(kBc == 128 || kBc == 192);
  static_assert(!kBalanced || (kConsumers == kBalancedConsumers && kBc == kBalancedKeyTile));
  static_assert(kWarpgroup * Shape::kProducerRegs + kConsumerThreads * Shape::kConsumerRegs <= 65536);
  constexpr int kTileElems = kBc * kD;
  constexpr int kTileBytes = kTileElems * 2;
  constexpr int kPasses = kBc / kRowsPerPass;
  static_assert(kTileBytes % 1024 == 0 && kBc % kRowsPerPass == 0 && smem_of<kConsumers>() <= 227 * 1024);
  constexpr int kAtoms = kBc / 8;    // 8-column atoms of S per thread row
  constexpr int kKSteps = kBc / 16;  // k-steps of O += P V
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kBarrierBytes = 2 * kStages * 8;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem_raw);  // [kStages]: tile landed
  uint64_t* empty = full + kStages;                        // [kStages]: tile read by every consumer warp
  const uint32_t tiles_addr = smem_addr(smem_raw + kBarrierBytes);
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw + kBarrierBytes + (((tiles_addr + 1023u) & ~1023u) - tiles_addr));
  auto k_tile = [&](int stage) { return tiles + stage * kTileElems; };
  auto v_tile = [&](int stage) { return tiles + (kStages + stage) * kTileElems; };

  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / kWarpgroup;

  // The CTA's work: one Work from its place in the grid, or its pieces of
  // the balanced plan, listed by thread 0 in shared memory after the
  // queries (kept out of the registers, which the consumers' tile loop
  // needs all of). for_each_work(fn) calls fn(work, more_after) in order;
  // more_after: a later work of this CTA has key tiles.
  Work grid_work;
  [[maybe_unused]] int32_t* piece_count = nullptr;  // [0]: pieces, [1]: their key tiles
  [[maybe_unused]] Work* pieces = nullptr;
  int active = kConsumers;  // consumers with query rows
  if constexpr (kBalanced) {
    piece_count = reinterpret_cast<int32_t*>(tiles + 2 * kStages * kTileElems + kBr * kD);
    pieces = reinterpret_cast<Work*>(piece_count + 4);
    if (tid == 0) {
      const BalancedPlan plan = make_balanced_plan(make_view(keys, 0, 0).num_keys(), a.rows, a.groups,
                                                   a.num_heads, static_cast<int32_t>(gridDim.x));
      auto walk = BalancedWalk::of(plan, static_cast<int32_t>(blockIdx.x));
      BalancedPiece piece;
      int32_t n = 0, ring = 0;
      while (n < kMaxBalancedPieces && walk.next(piece)) {
        Work& w = pieces[n++];
        w.ring = ring;
        ring += piece.steps();
        w.group = piece.group;
        w.head = piece.head;
        w.row0 = piece.row0;
        w.kb = piece.first_step * kBc;
        w.ke = min(piece.end_step * kBc, plan.num_keys);
        w.tiles = piece.steps();
        w.active = piece.active;
        w.piece = piece.piece;
        w.pieces = piece.pieces;
      }
      piece_count[0] = n;
      piece_count[1] = ring;
    }
  } else {
    const int32_t q_tiles = (a.rows + kBr - 1) / kBr;
    grid_work.group = static_cast<int32_t>(blockIdx.x) / q_tiles;
    grid_work.row0 = (static_cast<int32_t>(blockIdx.x) % q_tiles) * kBr;
    grid_work.head = static_cast<int32_t>(blockIdx.y);
    grid_work.piece = static_cast<int32_t>(blockIdx.z);
    split_range(make_view(keys, grid_work.group, grid_work.head).num_keys(), a.splits, grid_work.piece, kBc,
                grid_work.kb, grid_work.ke);
    grid_work.tiles = (grid_work.ke - grid_work.kb + kBc - 1) / kBc;
    // Consumers with query rows in this tile; the others leave at once (a
    // partial last tile with rows for fewer consumers than the shape has), so
    // the tile costs the SM only the products of its active consumers.
    active = min(kConsumers, static_cast<int>((a.rows - grid_work.row0 + 63) / 64));
    grid_work.active = active;
  }
  auto for_each_work = [&](auto&& fn) {
    if constexpr (kBalanced) {
      for (int32_t p = 0; p < piece_count[0]; ++p) fn(pieces[p], pieces[p].ring + pieces[p].tiles < piece_count[1]);
    } else {
      fn(grid_work, false);
    }
  };

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], kWarpgroup);   // every producer thread's copies
      mbarrier_init(&empty[s], active * 4);  // every active consumer warp (balanced: 12, see release_stage)
    }
  }
  __syncthreads();
  // Whether the CTA has any key tile to process (then its consumers take turns).
  bool has_tiles;
  if constexpr (kBalanced) {
    has_tiles = piece_count[1] > 0;
  } else {
    has_tiles = grid_work.tiles > 0;
  }

  if (warpgroup == 0) {
    // ---- producer ----
    release_registers<Shape::kProducerRegs>();
    const int chunk = tid & 7;
    const int first_row = tid >> 3;
    for_each_work([&](const Work& w, bool) {
      const auto view = make_view(keys, w.group, w.head);
      auto cursor = view.seek(w.kb + first_row);
      // This thread's rows of a tile, first_row + 16 i, are keys first_key +
      // 16 i. When a tile's keys span at most two pages (pages of at least
      // kBc keys, or dense keys), they are addressed from one Span per tile;
      // smaller pages walk the cursor row by row.
      const bool by_span = view.span_keys() >= kBc;
      for (int32_t t = 0; t < w.tiles; ++t) {
        const int32_t g = w.ring + t;
        const int stage = g % kStages;
        if (g >= kStages) mbarrier_wait(&empty[stage], static_cast<uint32_t>((g / kStages - 1) & 1));
        const int32_t first_key = w.kb + t * kBc + first_row;
        auto copy_row = [&](int i, const bf16* k_row, const bf16* v_row) {
          const bool valid = first_key + kRowsPerPass * i < w.ke;
          const bf16* zero = static_cast<const bf16*>(a.zero_fill_src);
          const int off = tile_offset(first_row + kRowsPerPass * i, chunk);
          cp_async16(k_tile(stage) + off, valid ? k_row + chunk * 8 : zero, valid ? 16 : 0);
          cp_async16(v_tile(stage) + off, valid ? v_row + chunk * 8 : zero, valid ? 16 : 0);
        };
        if (by_span) {
          if (first_key < w.ke) {
            // Keys of the next page among this thread's valid rows?
            const int32_t to_next_page = view.span_keys() - cursor.slot_in_span();
            const bool next_page = to_next_page <= kBc - kRowsPerPass && first_key + to_next_page < w.ke;
            const auto span = view.span_from(cursor, next_page);
#pragma unroll
            for (int i = 0; i < kPasses; ++i) {
              copy_row(i, view.k_in(span, kRowsPerPass * i), view.v_in(span, kRowsPerPass * i));
            }
          } else {
#pragma unroll
            for (int i = 0; i < kPasses; ++i) copy_row(i, nullptr, nullptr);  // all zero-filled
          }
          view.advance(cursor, kBc);
        } else {
#pragma unroll
          for (int i = 0; i < kPasses; ++i) {
            const bool valid = first_key + kRowsPerPass * i < w.ke;
            copy_row(i, valid ? view.k_at(cursor) : nullptr, valid ? view.v_at(cursor) : nullptr);
            view.advance(cursor, kRowsPerPass);
          }
        }
        cp_async_arrive(&full[stage]);
      }
    });
    cp_async_wait0();  // leave no copy in flight behind an exited thread
    return;
  }

  // ---- consumers ----
  claim_registers<Shape::kConsumerRegs>();
  // (Broadcast from lane 0 in the balanced schedule: see `ring` below.)
  const int consumer = kBalanced ? __shfl_sync(0xffffffffu, warpgroup - 1, 0) : warpgroup - 1;
  if (consumer >= active) return;
  const int warp_row = 16 * (((tid - kWarpgroup) >> 5) & 3);  // the warp's rows within its consumer's 64
  const int lane = tid & 31;
  const int lr = lane >> 2;
  const int lc = lane & 3;

  // Descriptors of stage 0's tiles; stage s, k-step kk lie s * kTileBytes
  // plus 32 kk (K: 16 dims further along the rows) or 2048 kk (V: 16 keys
  // further down) bytes on.
  const DescBase k_base = DescBase::of(k_desc(k_tile(0), 0));
  const DescBase v_base = DescBase::of(v_desc(v_tile(0), 0));

  // The turn goes round the work's active consumers: each issues its
  // products after the one before it (consumer 0 after the last), one issue
  // per key tile. A lone consumer has no turn to take. The last consumer of
  // the first work opens; the last issue of a work hands the turn to the
  // next work's consumer 0 (each named barrier counts its waiter and
  // whichever warpgroup passes).
  const int my_turn = kTurnBarrier + consumer;
  {
    const int first_active = kBalanced ? (piece_count[0] > 0 ? pieces[0].active : 0) : active;
    if (first_active > 1 && consumer == first_active - 1 && has_tiles) {
      named_barrier_arrive(kTurnBarrier, kTurnThreads);
    }
  }

  // One work, for this consumer if it has rows in it.
  auto consume = [&](const Work& w, bool more_after) {
    const int work_active = kBalanced ? w.active : active;
    if (consumer >= work_active) return;
    const bool ping_pong = work_active > 1;
    const int next_turn = kTurnBarrier + (consumer + 1) % work_active;
    const int32_t my_row0 = w.row0 + 64 * consumer;
    // The work's place in the stage ring, broadcast from lane 0 so that the
    // compiler knows it is the same in every thread and keeps the stage
    // arithmetic and the wgmma descriptors in uniform registers. (Read from
    // shared memory as it is, every descriptor was built per thread and
    // moved over with R2UR, 32 more instructions in the consumers' issue
    // phase per tile.)
    const int32_t ring = __shfl_sync(0xffffffffu, w.ring, 0);
    // Q: A fragments in registers, or this consumer's 64 rows in shared
    // memory (the tiles' swizzled layout; rows past a.rows are zeros), written
    // with 4-byte stores (q is only 4-byte aligned) before the first wgmma
    // reads them through the async proxy. (The previous work's wgmmas have
    // all completed: it waited for them.)
    [[maybe_unused]] uint32_t qf[4][4];
    [[maybe_unused]] DescBase q_base{};
    if constexpr (Shape::kQInSmem) {
      bf16* q_tile = tiles + 2 * kStages * kTileElems + consumer * 64 * kD;
      // (opaque: in the balanced schedule's loop over pieces the 16 row
      // addresses would otherwise be hoisted and held, and the consumers spill.)
      const int ct = opaque(tid - kWarpgroup * (1 + consumer));  // 0..127
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int word = ct + kWarpgroup * i;  // 32 4-byte words per row
        const int r = word / 32, d = 2 * (word % 32);
        const int32_t row = my_row0 + r;
        uint32_t v = 0;
        if (row < a.rows) {
          v = *reinterpret_cast<const uint32_t*>(a.q + (int64_t{w.group} * a.rows + row) * a.row_stride() +
                                                 int64_t{w.head} * kD + d);
        }
        *reinterpret_cast<uint32_t*>(q_tile + tile_offset(r, d / 8) + d % 8) = v;
      }
      fence_proxy_async();
      named_barrier_sync(kQBarrier + consumer, kWarpgroup);
      q_base = DescBase::of(k_desc(q_tile, 0));
    } else {
      load_q_fragments(a, w.group, w.head, my_row0 + warp_row, lr, lc, qf);
    }

    float o[32];
#pragma unroll
    for (int e = 0; e < 32; ++e) o[e] = 0.f;
    float m[2] = {-INFINITY, -INFINITY};  // rows lr, lr + 8; exp2 domain
    float l[2] = {0.f, 0.f};
    uint32_t pa[kKSteps][4];  // P of the previous tile: A fragments of O += P V, k-steps of 16 keys

    auto issue_pv = [&](int stage) {
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        wgmma_m64n64k16<1>(o, pa[kk], v_base.at(stage * kTileBytes + 2048 * kk), true);
      }
      wgmma_commit();
    };
    // A stage is free once every active consumer warp has read it: in the
    // grid schedule each arrives once; in the balanced one the barriers
    // expect 12 (three consumers' warps) and a pair's warps stand for the
    // third consumer: the first warp of each counts 3.
    auto release_stage = [&](int stage) {
      __syncwarp();
      if (lane == 0) {
        if constexpr (kBalanced) {
          const bool first_warp = ((tid - kWarpgroup) >> 5 & 3) == 0;
          mbarrier_arrive(&empty[stage], first_warp ? 4 * kConsumers / work_active - 3 : 1);
        } else {
          mbarrier_arrive(&empty[stage]);
        }
      }
    };
    // The turn passes on after every issue but the CTA's last, the last
    // consumer's at the work's last tile (every work opens with consumer 0).
    // no_pass_at: the tile whose issue keeps the turn.
    const int32_t no_pass_at = !more_after && consumer == work_active - 1 ? w.tiles - 1 : -1;

    // One tile; kFirst: there is no previous P V to issue. (Peeled rather than
    // branched on: a wgmma under a run-time condition makes ptxas serialise
    // every wgmma of the kernel.)
    auto step = [&](int32_t i, int32_t tile_start, auto first) {
      constexpr bool kFirst = decltype(first)::value;
      const int32_t g = ring + i;
      const int stage = g % kStages;
      const int prev_stage = (g - 1) % kStages;
      mbarrier_wait(&full[stage], static_cast<uint32_t>((g / kStages) & 1));
      fence_proxy_async();

      float s[kBc / 2];  // the first k-step overwrites it (scale-d = 0)
      pin_registers(o);
      pin_registers(pa);
      if (ping_pong) named_barrier_sync(my_turn, kTurnThreads);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (Shape::kQInSmem) {
          static_assert(kBc == 128);
          wgmma_m64n128k16_ss(s, q_base.at(32 * kk), k_base.at(stage * kTileBytes + 32 * kk), kk > 0);
        } else {
          static_assert(kBc == 192);
          wgmma_m64n192k16(s, qf[kk], k_base.at(stage * kTileBytes + 32 * kk), kk > 0);
        }
      }
      wgmma_commit();
      if constexpr (!kFirst) issue_pv(prev_stage);
      if (ping_pong && i != no_pass_at) named_barrier_arrive(next_turn, kTurnThreads);
      if constexpr (kFirst) {
        wgmma_wait<0>();
      } else {
        wgmma_wait<1>();  // S is ready; the P V group may still run
      }
      pin_registers(s);

      // Online softmax; touches neither O nor P, which the tensor cores may
      // still be reading. Row rh: elements e with (e / 2) % 2 == rh. Maxima
      // and sums in four independent chains (one warp per scheduler runs its
      // softmax at a time, so latency shows).
      float alpha[2];
      auto softmax = [&](auto partial) {
        constexpr bool kPartial = decltype(partial)::value;
        if constexpr (kPartial) {
#pragma unroll
          for (int e = 0; e < kBc / 2; ++e) {
            const int key = tile_start + 8 * (e >> 2) + 2 * lc + (e & 1);
            if (key >= w.ke) s[e] = -INFINITY;
          }
        }
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) {
          float mx4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
          for (int j = 0; j < kAtoms; ++j) {
            mx4[j & 3] = fmaxf(mx4[j & 3], fmaxf(s[4 * j + 2 * rh], s[4 * j + 2 * rh + 1]));
          }
          float mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(m[rh], mx * a.scale_log2);
          const float m_use = m_new == -INFINITY ? 0.f : m_new;
          alpha[rh] = fast_exp2(m[rh] - m_use);
          float sum4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
          for (int j = 0; j < kAtoms; ++j) {
#pragma unroll
            for (int e = 4 * j + 2 * rh; e < 4 * j + 2 * rh + 2; ++e) {
              const float p = fast_exp2(fmaf(s[e], a.scale_log2, -m_use));
              s[e] = p;
              sum4[j & 3] += p;
            }
          }
          l[rh] = l[rh] * alpha[rh] + ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
          m[rh] = m_new;
        }
      };
      if (tile_start + kBc > w.ke) {
        softmax(std::true_type{});
      } else {
        softmax(std::false_type{});
      }

      wgmma_wait<0>();  // O and the previous P are free again; so is the previous tile's stage
      pin_registers(o);
      pin_registers(pa);
      if constexpr (!kFirst) release_stage(prev_stage);
#pragma unroll
      for (int e = 0; e < 32; ++e) o[e] *= alpha[(e >> 1) & 1];
      pack_p_fragments<kKSteps>(s, pa);
    };
    if (w.tiles > 0) {
      int32_t tile_start = w.kb;
      step(0, tile_start, std::true_type{});
      for (int32_t i = 1; i < w.tiles; ++i) {
        tile_start += kBc;
        step(i, tile_start, std::false_type{});
      }
      const int32_t last_own = w.tiles - 1;
      // The last tile's O += P V.
      pin_registers(o);
      pin_registers(pa);
      wgmma_fence();
      issue_pv((ring + last_own) % kStages);
      wgmma_wait<0>();
      pin_registers(o);
      if constexpr (kBalanced) release_stage((ring + last_own) % kStages);  // the ring runs on into the next work
    }

    store_rows(a, w.group, w.head, w.piece, my_row0 + warp_row, lr, lc, [&](int j, int e) { return o[4 * j + e]; }, l,
               m);
    if constexpr (kBalanced) {
      // The tile's first piece marks the slots no piece fills as empty.
      const int32_t used = w.pieces;
      if (w.piece == 0 && lc == 0) {
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) {
          const int32_t r = my_row0 + warp_row + lr + 8 * rh;
          if (r >= a.rows) continue;
          const int64_t i = int64_t{w.group} * a.rows + r;
          for (int32_t s = used; s < kBalancedSlots; ++s) {
            a.part_lse[(int64_t{s} * a.total_rows() + i) * a.num_heads + w.head] = -INFINITY;
          }
        }
      }
    }
  };
  for_each_work(consume);
#else
  __trap();  // not built for sm_90a; the host picks this kernel only on Hopper
#endif
}

template <int kConsumers, typename Keys>
void launch_shape(const AttentionArgs<bf16>& args, const Keys& keys, cudaStream_t stream) {
  launch_tensor_core_kernel<attention_wgmma_ws_kernel<kConsumers, false, Keys>>(
      args, keys, threads_of<kConsumers>(), smem_of<kConsumers>(), kConsumers * 64, stream);
}

void launch_balanced(const AttentionArgs<bf16>& args, const PagedKeys<bf16>& keys, cudaStream_t stream) {
  constexpr auto kKernel = attention_wgmma_ws_kernel<kBalancedConsumers, true, PagedKeys<bf16>>;
  constexpr int kSmem = smem_of<kBalancedConsumers>() + kPieceListBytes;
  static_assert(kSmem <= 227 * 1024);
  allow_dynamic_smem<kKernel>(kSmem);
  kKernel<<<static_cast<unsigned>(args.balanced_ctas), threads_of<kBalancedConsumers>(),
            kSmem, stream>>>(args, keys);
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename Keys>
void launch_attention_wgmma_ws(const AttentionArgs<bf16>& args, const Keys& keys, cudaStream_t stream) {
  if constexpr (std::is_same_v<Keys, PagedKeys<bf16>>) {
    if (args.balanced_ctas > 0) {
      launch_balanced(args, keys, stream);
      return;
    }
  }
  if (wgmma_ws_consumers(keys) == 3) {
    launch_shape<3>(args, keys, stream);
  } else {
    launch_shape<2>(args, keys, stream);
  }
}

template void launch_attention_wgmma_ws<DenseKeys<bf16>>(const AttentionArgs<bf16>&, const DenseKeys<bf16>&,
                                                         cudaStream_t);
template void launch_attention_wgmma_ws<PagedKeys<bf16>>(const AttentionArgs<bf16>&, const PagedKeys<bf16>&,
                                                         cudaStream_t);

int attention_wgmma_ws_ctas_per_sm(int consumers) {
  if (consumers == 3) {
    return tensor_core_ctas_per_sm<attention_wgmma_ws_kernel<3, false, DenseKeys<bf16>>>(threads_of<3>(), smem_of<3>());
  }
  return tensor_core_ctas_per_sm<attention_wgmma_ws_kernel<2, false, DenseKeys<bf16>>>(threads_of<2>(), smem_of<2>());
}

}  // namespace lingbot::cuda::attn
