// The warp-specialised attention kernel on Hopper (sm_90a), FlashAttention-3's
// structure (docs/attention-kernel.md). bf16, head_dim 64;
// same contract and key splits as the other tensor-core kernels
// (attention_launch.h), 64 query rows per consumer warpgroup.
//
// Why warp specialisation: in a kernel where every warp loads, waits at a
// CTA-wide barrier, multiplies and exponentiates (the retired wgmma v1 in
// dev/cuda/attention_wgmma.cu), the tensor cores, the exponential unit and
// the issue slots take turns instead of overlapping. Here the roles are split:
//
//   warpgroup 0, the producer: copies K/V tiles into a ring of kStages
//     shared-memory stages and tells the consumers a stage is full through
//     an mbarrier. A tile of the paged cache that lies inside one page is
//     two TMA boxes (the cache's tensor maps, tensor_map.h) issued by one
//     thread, whose bytes complete the barrier; other tiles are copied row
//     by row with cp.async (cp.async.mbarrier.arrive: the producer never
//     waits for its own copies); TMA frees the producer's issue slots
//     from thousands of 16-byte requests per tile. The producer gives
//     most of its registers back (setmaxnreg) to the consumers.
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
// visible to it and before its wgmmas (and after staging Q). TMA writes
// through the async proxy; its thread fences before a box lands where
// cp.async wrote last. A stage is refilled only after every consumer warp
// has arrived on its "empty" mbarrier, which it does after waiting for the
// wgmma group that read it.
#include "backend/cuda/attention/attention_kernels.cuh"
#include "backend/cuda/attention/wgmma_ops.cuh"
#include "backend/cuda/kv/fp8_decode.cuh"

#include <cuda_bf16.h>

#include <type_traits>

namespace lingbot::cuda::attn {

namespace {

using bf16 = __nv_bfloat16;
using wg::kD;

// Two shapes, by the number of consumer warpgroups:
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
  // 192 keys rather than 128: larger tiles spread the per-tile costs
  // (barriers, row maxima, the rescale of O) over more keys, which wins
  // about 6% on the full window; 256 would not fit the registers.
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
template <int kConsumers>
constexpr int smem_of() {
  using Shape = WsShape<kConsumers>;
  return smem_bytes(Shape::kKeyTile, Shape::kStages, Shape::kQInSmem ? kConsumers * 64 : 0);
}

#if LB_WGMMA
using namespace wg;
#endif

#if LB_WGMMA
// The producer for the fp8 cache (PagedFp8Keys): each tile's codes and
// scales are read with plain 16-byte loads, turned into bfloat16 in
// registers (fp8_decode.cuh: the read-back's bits) and stored into the
// stage in the bf16 tiles' swizzled layout, so the consumers run unchanged.
// Thread = (quarter tid % 4 of a head row: 16 codes, two 16-byte chunks of
// the stage; row tid / 4 + 32 i). Rows past the keys are zeros (V must be:
// their P is 0, but 0 * NaN is not). The stores are generic-proxy writes
// that wgmma reads through the async proxy: each thread fences before it
// arrives on the stage's barrier, and the consumers fence again after
// their wait, as for cp.async.
template <int kBc, int kStages>
__device__ __forceinline__ void produce_fp8_tiles(const PagedFp8View& view, int32_t kb, int32_t ke, int32_t n_tiles,
                                                  int tid, uint64_t* full, uint64_t* empty, bf16* tiles) {
  constexpr int kRows = kWarpgroup / 4;  // rows per pass
  constexpr int kPasses = kBc / kRows;
  constexpr int kTileElems = kBc * kD;
  static_assert(kBc % kRows == 0);
  const int quarter = tid & 3;
  const int first_row = tid >> 2;
  auto cursor = view.seek(kb + first_row);
  const bool by_span = view.span_keys() >= kBc;
  // Loads in groups of kGroup passes, every load of a group issued before
  // the first conversion (a load under the row's validity test would wait
  // for the previous pass's stores): rows past the keys load row 0's codes
  // and are zeroed after. The first group's loads go out before the wait
  // for the stage (they only fill registers). Three groups of two: all six
  // passes' codes would not fit the producer's registers.
  constexpr int kGroup = 2;
  static_assert(kPasses % kGroup == 0);
  struct Loaded {
    uint4 k[kGroup], v[kGroup];
    float k_scale[kGroup], v_scale[kGroup];
  };
  for (int32_t t = 0; t < n_tiles; ++t) {
    const int stage = t % kStages;
    const int32_t first_key = kb + t * kBc + first_row;
    const bool any = first_key < ke;
    // Keys of the next page among this thread's valid rows? (by span only)
    const int32_t to_next_page = view.span_keys() - cursor.slot_in_span();
    const bool next_page = any && to_next_page <= kBc - kRows && first_key + to_next_page < ke;
    const auto span = by_span && any ? view.span_from(cursor, next_page) : PagedFp8View::Span{};
    auto row_of = [&](int i) {  // pass i's row, or the first for rows past the keys
      const bool valid = first_key + kRows * i < ke;
      if (by_span) return view.row_in(span, valid ? kRows * i : 0);
      auto c = cursor;
      if (valid) view.advance(c, kRows * i);
      return view.row_at(c);
    };
    auto load = [&](int g, Loaded& l) {
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        const PagedFp8View::Row r = row_of(g + j);
        l.k[j] = __ldg(reinterpret_cast<const uint4*>(r.k) + quarter);
        l.v[j] = __ldg(reinterpret_cast<const uint4*>(view.v_codes(r)) + quarter);
        l.k_scale[j] = __ldg(r.k_scale);
        l.v_scale[j] = __ldg(view.v_scale(r));
      }
    };
    bf16* k_tile = tiles + stage * kTileElems;
    bf16* v_tile = tiles + (kStages + stage) * kTileElems;
    auto store = [&](int g, const Loaded& l) {
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        const int i = g + j;
        uint4 klo = make_uint4(0u, 0u, 0u, 0u), khi = klo, vlo = klo, vhi = klo;
        if (first_key + kRows * i < ke) {
          fp8::e4m3x16_to_bf16x16(l.k[j], l.k_scale[j], klo, khi);
          fp8::e4m3x16_to_bf16x16(l.v[j], l.v_scale[j], vlo, vhi);
        }
        const int row = first_row + kRows * i;
        *reinterpret_cast<uint4*>(k_tile + tile_offset(row, 2 * quarter)) = klo;
        *reinterpret_cast<uint4*>(k_tile + tile_offset(row, 2 * quarter + 1)) = khi;
        *reinterpret_cast<uint4*>(v_tile + tile_offset(row, 2 * quarter)) = vlo;
        *reinterpret_cast<uint4*>(v_tile + tile_offset(row, 2 * quarter + 1)) = vhi;
      }
    };
    Loaded l;
    if (any) load(0, l);
    if (t >= kStages) mbarrier_wait(&empty[stage], static_cast<uint32_t>((t / kStages - 1) & 1));
#pragma unroll
    for (int g = 0; g < kPasses; g += kGroup) {
      if (any && g > 0) load(g, l);
      store(g, l);
    }
    view.advance(cursor, kBc);
    fence_proxy_async();
    mbarrier_arrive(&full[stage]);
  }
}
#endif

template <int kConsumers, typename Keys>
__global__ void __launch_bounds__(threads_of<kConsumers>(), 1)
    attention_wgmma_ws_kernel(AttentionArgs<bf16> a, Keys keys) {
#if LB_WGMMA
  constexpr bool kFp8 = std::is_same_v<Keys, PagedFp8Keys>;
  using Shape = WsShape<kConsumers>;
  constexpr int kStages = Shape::kStages;
  constexpr int kConsumerThreads = kConsumers * kWarpgroup;
  constexpr int kBr = kConsumers * 64;  // query rows per CTA: 64 per consumer
  constexpr int kBc = Shape::kKeyTile;  // S = Q K^T is one wgmma m64n{kBc}k16 per k-step
  static_assert(kBc == 128 || kBc == 192);
  // The fp8 producer holds two passes' codes and scales in registers.
  constexpr int kProducerRegs = kFp8 ? 56 : Shape::kProducerRegs;
  constexpr int kConsumerRegs = kFp8 ? 224 : Shape::kConsumerRegs;
  static_assert(kWarpgroup * kProducerRegs + kConsumerThreads * kConsumerRegs <= 65536);
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

  const int32_t q_tiles = (a.rows + kBr - 1) / kBr;
  const int32_t group = static_cast<int32_t>(blockIdx.x) / q_tiles;
  const int32_t row0 = (static_cast<int32_t>(blockIdx.x) % q_tiles) * kBr;
  const int32_t head = static_cast<int32_t>(blockIdx.y);
  const int32_t split = static_cast<int32_t>(blockIdx.z);

  const auto view = make_view(keys, group, head);
  int32_t kb, ke;
  split_range(view.num_keys(), a.splits, split, kBc, kb, ke);
  const int32_t n_tiles = (ke - kb + kBc - 1) / kBc;

  // Consumers with query rows in this tile; the others leave at once (a
  // partial last tile with rows for fewer consumers than the shape has), so
  // the tile costs the SM only the products of its active consumers.
  const int active = min(kConsumers, static_cast<int>((a.rows - row0 + 63) / 64));
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], kWarpgroup);   // every producer thread's copies
      mbarrier_init(&empty[s], active * 4);  // every active consumer warp
    }
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---- producer ----
    release_registers<kProducerRegs>();
    if constexpr (kFp8) {  // fp8 pages, dequantised into the stages
      produce_fp8_tiles<kBc, kStages>(view, kb, ke, n_tiles, tid, full, empty, tiles);
    } else {
      const int chunk = tid & 7;
      const int first_row = tid >> 3;
      auto cursor = view.seek(kb + first_row);
      // This thread's rows of a tile, first_row + 16 i, are keys first_key +
      // 16 i. When a tile's keys span at most two pages (pages of at least
      // kBc keys, or dense keys), they are addressed from one Span per tile;
      // smaller pages walk the cursor row by row.
      const bool by_span = view.span_keys() >= kBc;
      // TMA (the cache's tensor maps): a tile whose keys lie in one page and
      // are all in this split is one box of K and one of V, copied by thread
      // 0; the other tiles (across a page boundary, or past the keys) are
      // copied row by row as below.
      constexpr bool kViewTma = decltype(view)::kTma;
      bool tma = false;
      if constexpr (kViewTma) {
        tma = view.tma_ready(kBc);
        if (tma && tid == 0) {
          for (int32_t c = 0; c < view.tma_maps(); ++c) tensormap_acquire(view.tma_map(c));
        }
      }
      for (int32_t t = 0; t < n_tiles; ++t) {
        const int stage = t % kStages;
        if (t >= kStages) mbarrier_wait(&empty[stage], static_cast<uint32_t>((t / kStages - 1) & 1));
        const int32_t tile_start = kb + t * kBc;
        if constexpr (kViewTma) {
          if (tma && tile_start + kBc <= ke && view.tma_fits(tile_start, kBc)) {
            // The barrier expects 128 arrivals: thread 0's (with the bytes)
            // and 127 more, made by one lane per warp.
            if (tid == 0) {
              const auto box = view.tma_tile(tile_start);
              fence_proxy_async();  // the stage's last cp.async writes before these
              mbarrier_arrive_expect_tx(&full[stage], 2 * kTileBytes);
              tma_load_4d(k_tile(stage), box.map, 0, head, box.slot, box.kv_page, &full[stage]);
              tma_load_4d(v_tile(stage), box.map, 0, head, box.slot, box.kv_page + 1, &full[stage]);
              mbarrier_arrive(&full[stage], 31u);
            } else if ((tid & 31) == 0) {
              mbarrier_arrive(&full[stage], 32u);
            }
            view.advance(cursor, kBc);
            continue;
          }
        }
        const int32_t first_key = tile_start + first_row;
        auto copy_row = [&](int i, const bf16* k_row, const bf16* v_row) {
          const bool valid = first_key + kRowsPerPass * i < ke;
          const bf16* zero = static_cast<const bf16*>(a.zero_fill_src);
          const int off = tile_offset(first_row + kRowsPerPass * i, chunk);
          cp_async16(k_tile(stage) + off, valid ? k_row + chunk * 8 : zero, valid ? 16 : 0);
          cp_async16(v_tile(stage) + off, valid ? v_row + chunk * 8 : zero, valid ? 16 : 0);
        };
        if (by_span) {
          if (first_key < ke) {
            // Keys of the next page among this thread's valid rows?
            const int32_t to_next_page = view.span_keys() - cursor.slot_in_span();
            const bool next_page = to_next_page <= kBc - kRowsPerPass && first_key + to_next_page < ke;
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
            const bool valid = first_key + kRowsPerPass * i < ke;
            copy_row(i, valid ? view.k_at(cursor) : nullptr, valid ? view.v_at(cursor) : nullptr);
            view.advance(cursor, kRowsPerPass);
          }
        }
        cp_async_arrive(&full[stage]);
      }
      cp_async_wait0();  // leave no copy in flight behind an exited thread
    }
    return;
  }

  // ---- consumers ----
  claim_registers<kConsumerRegs>();
  const int consumer = warpgroup - 1;
  if (consumer >= active) return;
  const int cwarp = (tid - kWarpgroup) >> 5;  // rows 16 cwarp .. 16 cwarp + 15 of the CTA's kBr
  const int lane = tid & 31;
  const int lr = lane >> 2;
  const int lc = lane & 3;

  // Q: A fragments in registers, or this consumer's 64 rows in shared
  // memory (the tiles' swizzled layout; rows past a.rows are zeros), written
  // with 4-byte stores (q is only 4-byte aligned) before the first wgmma
  // reads them through the async proxy.
  [[maybe_unused]] uint32_t qf[4][4];
  [[maybe_unused]] DescBase q_base{};
  if constexpr (Shape::kQInSmem) {
    bf16* q_tile = tiles + 2 * kStages * kTileElems + consumer * 64 * kD;
    const int ct = tid - kWarpgroup * (1 + consumer);  // 0..127
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int word = ct + kWarpgroup * i;  // 32 4-byte words per row
      const int r = word / 32, d = 2 * (word % 32);
      const int32_t row = row0 + consumer * 64 + r;
      uint32_t v = 0;
      if (row < a.rows) {
        v = *reinterpret_cast<const uint32_t*>(a.q + (int64_t{group} * a.rows + row) * a.row_stride() +
                                               int64_t{head} * kD + d);
      }
      *reinterpret_cast<uint32_t*>(q_tile + tile_offset(r, d / 8) + d % 8) = v;
    }
    fence_proxy_async();
    named_barrier_sync(kQBarrier + consumer, kWarpgroup);
    q_base = DescBase::of(k_desc(q_tile, 0));
  } else {
    load_q_fragments(a, group, head, row0 + cwarp * 16, lr, lc, qf);
  }

  float o[32];
#pragma unroll
  for (int e = 0; e < 32; ++e) o[e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // rows lr, lr + 8; exp2 domain
  float l[2] = {0.f, 0.f};
  uint32_t pa[kKSteps][4];  // P of the previous tile: A fragments of O += P V, k-steps of 16 keys

  // Descriptors of stage 0's tiles; stage s, k-step kk lie s * kTileBytes
  // plus 32 kk (K: 16 dims further along the rows) or 2048 kk (V: 16 keys
  // further down) bytes on.
  const DescBase k_base = DescBase::of(k_desc(k_tile(0), 0));
  const DescBase v_base = DescBase::of(v_desc(v_tile(0), 0));
  auto issue_pv = [&](int stage) {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      wgmma_m64n64k16<1>(o, pa[kk], v_base.at(stage * kTileBytes + 2048 * kk), true);
    }
    wgmma_commit();
  };
  auto release_stage = [&](int stage) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[stage]);
  };
  // The turn goes round: consumer c issues after c - 1, consumer 0 after the
  // last one's previous tile.
  // A lone consumer has no turn to take.
  const bool ping_pong = active > 1;
  const int my_turn = kTurnBarrier + consumer;
  const int next_turn = kTurnBarrier + (consumer + 1) % active;
  const int last = active - 1;
  if (ping_pong && consumer == last && n_tiles > 0) named_barrier_arrive(kTurnBarrier, kTurnThreads);  // 0 starts

  // One tile; kFirst: there is no previous P V to issue. (Peeled rather than
  // branched on: a wgmma under a run-time condition makes ptxas serialise
  // every wgmma of the kernel.)
  auto step = [&](int32_t t, auto first) {
    constexpr bool kFirst = decltype(first)::value;
    const int stage = t % kStages;
    const int32_t tile_start = kb + t * kBc;
    mbarrier_wait(&full[stage], static_cast<uint32_t>((t / kStages) & 1));
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
    if constexpr (!kFirst) issue_pv((t - 1) % kStages);
    // The last consumer passes the turn after every tile but its last
    // (consumer 0 has no tile left to wait for then); the others after every
    // tile.
    if (ping_pong && (consumer != last || t + 1 < n_tiles)) named_barrier_arrive(next_turn, kTurnThreads);
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
          if (key >= ke) s[e] = -INFINITY;
        }
      }
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
        float mx4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < kAtoms; ++j) mx4[j & 3] = fmaxf(mx4[j & 3], fmaxf(s[4 * j + 2 * rh], s[4 * j + 2 * rh + 1]));
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
    if (tile_start + kBc > ke) {
      softmax(std::true_type{});
    } else {
      softmax(std::false_type{});
    }

    wgmma_wait<0>();  // O and the previous P are free again; so is stage t - 1
    pin_registers(o);
    pin_registers(pa);
    if constexpr (!kFirst) release_stage((t - 1) % kStages);
#pragma unroll
    for (int e = 0; e < 32; ++e) o[e] *= alpha[(e >> 1) & 1];
    pack_p_fragments<kKSteps>(s, pa);
  };
  if (n_tiles > 0) step(0, std::true_type{});
  for (int32_t t = 1; t < n_tiles; ++t) step(t, std::false_type{});
  if (n_tiles > 0) {  // the last tile's O += P V
    pin_registers(o);
    pin_registers(pa);
    wgmma_fence();
    issue_pv((n_tiles - 1) % kStages);
    wgmma_wait<0>();
    pin_registers(o);
  }

  store_rows(a, group, head, split, row0 + cwarp * 16, lr, lc, [&](int j, int e) { return o[4 * j + e]; }, l, m);
#else
  __trap();  // not built for sm_90a; the host picks this kernel only on Hopper
#endif
}

template <int kConsumers, typename Keys>
void launch_shape(const AttentionArgs<bf16>& args, const Keys& keys, cudaStream_t stream) {
  launch_tensor_core_kernel<attention_wgmma_ws_kernel<kConsumers, Keys>>(
      args, keys, threads_of<kConsumers>(), smem_of<kConsumers>(), kConsumers * 64, stream);
}

}  // namespace

template <typename Keys>
void launch_attention_wgmma_ws(const AttentionArgs<bf16>& args, const Keys& keys, cudaStream_t stream) {
  if constexpr (std::is_same_v<Keys, PagedFp8Keys>) {
    launch_shape<2>(args, keys, stream);  // the paged cache's shape (wgmma_ws_consumers)
  } else if (wgmma_ws_consumers(keys) == 3) {
    launch_shape<3>(args, keys, stream);
  } else {
    launch_shape<2>(args, keys, stream);
  }
}

template void launch_attention_wgmma_ws<DenseKeys<bf16>>(const AttentionArgs<bf16>&, const DenseKeys<bf16>&,
                                                         cudaStream_t);
template void launch_attention_wgmma_ws<PagedKeys<bf16>>(const AttentionArgs<bf16>&, const PagedKeys<bf16>&,
                                                         cudaStream_t);
template void launch_attention_wgmma_ws<PagedFp8Keys>(const AttentionArgs<bf16>&, const PagedFp8Keys&, cudaStream_t);

int attention_wgmma_ws_ctas_per_sm(int consumers) {
  if (consumers == 3) {
    return tensor_core_ctas_per_sm<attention_wgmma_ws_kernel<3, DenseKeys<bf16>>>(threads_of<3>(), smem_of<3>());
  }
  return tensor_core_ctas_per_sm<attention_wgmma_ws_kernel<2, DenseKeys<bf16>>>(threads_of<2>(), smem_of<2>());
}

}  // namespace lingbot::cuda::attn
