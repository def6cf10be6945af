// wgmma v1, retired: the attention kernel on Hopper's warpgroup MMA (wgmma,
// sm_90a) without warp specialisation. bf16, head_dim 64. Same contract,
// grid and key splits as the mma.sync kernel (src/backend/cuda/attention/
// attention_mma.cu). The warp-specialised kernel that ships
// (attention_wgmma_ws.cu) replaced it; it stays here as the simpler twin to
// measure that one against. attention_wgmma_main.cu checks it against the
// naive kernel and times it beside the kernels that ship.
//
// One CTA = 2 warpgroups = 256 threads = 128 query rows; warpgroup g owns
// rows [64g, 64g + 64), warp w of it rows 16w..16w+15 (as in mma.sync's
// fragment layouts). Per tile of 64 keys (K/V in shared memory, three
// stages, cp.async, the same 128-byte-row XOR swizzle as attention_mma.cu,
// which is exactly wgmma's 128B swizzle when a tile starts on a 1024-byte
// boundary):
//   S[64 x 64]  = Q[64 x 64] K^T     4 x wgmma m64n64k16, A = Q from registers,
//                                    B = K tile (K-major: keys are rows, dims contiguous)
//   online softmax on S (fp32, exp2), P = bf16(S) in registers
//   O[64 x 64] += P[64 x 64] V      4 x wgmma m64n64k16, A = P from registers,
//                                    B = V tile (MN-major: dims contiguous), transposed
// The fragment layouts (wgmma_ops.cuh) match mma.sync's, so the softmax
// code is the mma kernel's with 8 atoms.
//
// Overlap (FlashAttention-3's intra-warpgroup pipelining): at head_dim 64 the
// exponentials cost about as much SM time as the matrix products, so they
// must run while the tensor cores work. Iteration t issues S_t = Q K_t^T and
// then O += P_{t-1} V_{t-1} as two asynchronous wgmma groups, waits for the
// first only, computes the softmax of S_t while the second runs, and only
// then waits for it, rescales O and packs P_t. One barrier per tile: with
// three stages the tile loaded at iteration t (t + 1) goes into the stage of
// tile t - 2, which every warp finished with in iteration t - 1.
//
// Tile layout and shared-memory descriptors: wgmma_ops.cuh.
// cp.async writes shared memory through the generic proxy and wgmma reads it
// through the async proxy: every thread fences (fence.proxy.async) after its
// copies land and before the barrier that precedes the wgmmas.
#include "backend/cuda/attention/attention_kernels.cuh"
#include "backend/cuda/attention/wgmma_ops.cuh"

#include <cuda_bf16.h>

#include <type_traits>

namespace lingbot::cuda::attn {

namespace {

using bf16 = __nv_bfloat16;

using wg::kD;
constexpr int kThreads = 256;  // 2 warpgroups
constexpr int kBr = kMmaQueryRows;  // 128
constexpr int kBc = kMmaKeyTile;    // 64
constexpr int kStages = 3;
constexpr int kTileBytes = kBc * kD * 2;
// K and V tiles of every stage, plus slack to align the first to 1024 bytes.
constexpr int kSmemBytes = 2 * kStages * kTileBytes + 1024;
static_assert(kBc * kD * 2 % 1024 == 0);  // a tile is whole 1024-byte swizzle atoms
static_assert(kBr == 128 && kBc == 64 && kThreads * 2 == kBc * 8);

#if LB_WGMMA
using namespace wg;
#endif

template <typename Keys>
__global__ void __launch_bounds__(kThreads, 2) attention_wgmma_kernel(AttentionArgs<bf16> a, Keys keys) {
#if LB_WGMMA
  // kStages stages of K and V tiles, each starting on a 1024-byte boundary
  // of the shared address space (wgmma's 128B swizzle works on absolute
  // address bits), aligned by hand. Dynamic shared memory: 49 KiB is past
  // the static limit.
  constexpr int kTileElems = kBc * kD;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = smem_addr(smem_raw);
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr));
  auto k_tile = [&](int stage) { return tiles + stage * kTileElems; };
  auto v_tile = [&](int stage) { return tiles + (kStages + stage) * kTileElems; };

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;  // 0..7; warpgroup = warp / 4
  const int lr = lane >> 2;
  const int lc = lane & 3;

  const int32_t q_tiles = (a.rows + kBr - 1) / kBr;
  const int32_t group = static_cast<int32_t>(blockIdx.x) / q_tiles;
  const int32_t row0 = (static_cast<int32_t>(blockIdx.x) % q_tiles) * kBr;
  const int32_t head = static_cast<int32_t>(blockIdx.y);
  const int32_t split = static_cast<int32_t>(blockIdx.z);

  const auto view = make_view(keys, group, head);
  int32_t kb, ke;
  split_range(view.num_keys(), a.splits, split, kBc, kb, ke);

  // This warp's 16 query rows: warp * 16 .. (warpgroup g = warp / 4 holds 64 g ..).
  uint32_t qf[4][4];
  load_q_fragments(a, group, head, row0 + warp * 16, lr, lc, qf);

  float o[32];
#pragma unroll
  for (int e = 0; e < 32; ++e) o[e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // rows lr, lr + 8; exp2 domain
  float l[2] = {0.f, 0.f};
  uint32_t pa[4][4];  // P of the previous tile, bf16 A fragments of O += P V

  // Loader: 256 threads for 64 rows x 8 chunks of K and of V: thread copies
  // chunks 2 (tid % 4) and 2 (tid % 4) + 1 of row tid / 4.
  const int load_row = tid >> 2;
  const int load_chunk0 = (tid & 3) * 2;
  auto cursor = view.seek(kb + load_row);
  auto load_tile = [&](int stage, int32_t tile_start) {
    const bool valid = tile_start + load_row < ke;
    const bf16* k_src = valid ? view.k_at(cursor) : static_cast<const bf16*>(a.zero_fill_src);
    const bf16* v_src = valid ? view.v_at(cursor) : static_cast<const bf16*>(a.zero_fill_src);
    const int bytes = valid ? 16 : 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int c = load_chunk0 + i;
      const int off = tile_offset(load_row, c);
      cp_async16(k_tile(stage) + off, valid ? k_src + c * 8 : k_src, bytes);
      cp_async16(v_tile(stage) + off, valid ? v_src + c * 8 : v_src, bytes);
    }
    view.advance(cursor, kBc);
  };
  auto issue_pv = [&](int stage) {  // O += P V_stage, asynchronous
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      wgmma_m64n64k16<1>(o, pa[kk], v_desc(v_tile(stage), kk), true);
    }
    wgmma_commit();
  };

  const int32_t n_tiles = (ke - kb + kBc - 1) / kBc;
  if (n_tiles > 0) load_tile(0, kb);
  cp_async_commit();

  for (int32_t t = 0; t < n_tiles; ++t) {
    const int stage = t % kStages;
    const int32_t tile_start = kb + t * kBc;
    cp_async_wait0();     // this thread's copies of tile t have landed
    fence_proxy_async();  // ... and are visible to the async proxy (wgmma)
    __syncthreads();      // everyone's; and everyone is past iteration t - 1
    if (t + 1 < n_tiles) load_tile((t + 1) % kStages, tile_start + kBc);
    cp_async_commit();

    // S = Q K^T, then O += P_{t-1} V_{t-1}: two groups in flight.
    float s[32];
#pragma unroll
    for (int e = 0; e < 32; ++e) s[e] = 0.f;
    pin_registers(o);
    pin_registers(pa);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      wgmma_m64n64k16<0>(s, qf[kk], k_desc(k_tile(stage), kk), true);
    }
    wgmma_commit();
    if (t > 0) {
      issue_pv((t - 1) % kStages);
      wgmma_wait<1>();  // S is ready; the P V group may still run
    } else {
      wgmma_wait<0>();
    }
    pin_registers(s);

    if (tile_start + kBc > ke) {
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        const int key = tile_start + 8 * (e >> 2) + 2 * lc + (e & 1);
        if (key >= ke) s[e] = -INFINITY;
      }
    }

    // Online softmax (touches neither O nor P, which the tensor cores may
    // still be using); row rh: elements e with (e / 2) % 2 == rh.
    float alpha[2];
#pragma unroll
    for (int rh = 0; rh < 2; ++rh) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * rh], s[4 * j + 2 * rh + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[rh], mx * a.scale_log2);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      alpha[rh] = fast_exp2(m[rh] - m_use);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int e = 4 * j + 2 * rh; e < 4 * j + 2 * rh + 2; ++e) {
          const float p = fast_exp2(fmaf(s[e], a.scale_log2, -m_use));
          s[e] = p;
          sum += p;
        }
      }
      l[rh] = l[rh] * alpha[rh] + sum;
      m[rh] = m_new;
    }

    wgmma_wait<0>();  // O and the previous P are free again
    pin_registers(o);
    pin_registers(pa);
#pragma unroll
    for (int e = 0; e < 32; ++e) o[e] *= alpha[(e >> 1) & 1];
    pack_p_fragments<4>(s, pa);
  }
  if (n_tiles > 0) {  // the last tile's O += P V
    pin_registers(o);
    pin_registers(pa);
    wgmma_fence();
    issue_pv((n_tiles - 1) % kStages);
    wgmma_wait<0>();
    pin_registers(o);
  }

  store_rows(a, group, head, split, row0 + warp * 16, lr, lc, [&](int j, int e) { return o[4 * j + e]; }, l, m);
#else
  __trap();  // not built for sm_90a; the host picks this kernel only on Hopper
#endif
}

}  // namespace

template <typename Keys>
void launch_attention_wgmma(const AttentionArgs<bf16>& args, const Keys& keys, cudaStream_t stream) {
  launch_tensor_core_kernel<attention_wgmma_kernel<Keys>>(args, keys, kThreads, kSmemBytes, kMmaQueryRows, stream);
}

template void launch_attention_wgmma<DenseKeys<bf16>>(const AttentionArgs<bf16>&, const DenseKeys<bf16>&,
                                                      cudaStream_t);
template void launch_attention_wgmma<PagedKeys<bf16>>(const AttentionArgs<bf16>&, const PagedKeys<bf16>&,
                                                      cudaStream_t);

int attention_wgmma_ctas_per_sm() {
  return tensor_core_ctas_per_sm<attention_wgmma_kernel<PagedKeys<bf16>>>(kThreads, kSmemBytes);
}

}  // namespace lingbot::cuda::attn
