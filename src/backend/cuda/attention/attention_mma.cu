// The tensor-core attention kernel: bf16, head_dim 64, FlashAttention-2
// style. See attention.h for the contract and docs/attention-kernel.md for
// the design.
//
// One CTA = 4 warps = 128 query rows of one (group, head, key split); each
// warp owns 32 rows (two 16-row mma atoms) and keeps their Q fragments in
// registers. Keys stream through shared memory in tiles of 64 (K and V, two
// stages = 32 KiB, filled by cp.async while the previous tile is computed;
// each thread copies four 16-byte chunks of one key row of K and of V). Per
// tile, in two sub-blocks of 32 keys (one online-softmax step each, so that
// only 32 keys' scores are live; with all 64 the kernel needed more than 255
// registers and spilled):
//   S[32 x 32]  = Q[32 x 64] K^T          8 ldmatrix.x4 + 32 mma per warp
//   online softmax on S (fp32, exp2 domain), P = bf16(S) stays in registers
//   O[32 x 64] += P[32 x 32] V[32 x 64]   8 ldmatrix.x4.trans + 32 mma per warp
// Rows of a tile are 128 bytes = eight 16-byte chunks; chunk c of row r is
// stored at chunk c ^ (r & 7), so that the 8 rows one ldmatrix matrix reads
// hit 8 different bank groups (no conflicts), for K and V alike.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"), with lr = lane / 4 and lc = lane % 4:
//   A (16x16, row-major) a0:(lr, 2lc..+1) a1:(lr+8, 2lc..+1) a2:(lr, 2lc+8..+9) a3:(lr+8, 2lc+8..+9)
//   B (16x8, k x n)      b0:(k 2lc..+1, n lr) b1:(k 2lc+8..+9, n lr)
//   C (16x8, fp32)       c0:(lr, 2lc) c1:(lr, 2lc+1) c2:(lr+8, 2lc) c3:(lr+8, 2lc+1)
// ldmatrix (non-trans) gives lane l of an 8x8 matrix stored as 8 rows the
// elements (row l/4, cols 2(l%4), 2(l%4)+1); .trans gives (rows 2(l%4),
// 2(l%4)+1, col l/4). Hence:
//   K tile rows = keys, cols = dims: non-trans ldmatrix yields B of S = QK^T
//     (k = dim, n = key) directly;
//   V tile rows = keys, cols = dims: trans ldmatrix yields B of O = PV
//     (k = key, n = dim);
//   the C fragments of S for keys [16kk, 16kk+16) are the A fragments of P:
//     a0 = S[2kk].c0c1, a1 = S[2kk].c2c3, a2 = S[2kk+1].c0c1, a3 = S[2kk+1].c2c3.
#include "backend/cuda/attention/attention_kernels.cuh"

#include <cuda_bf16.h>

#include <type_traits>

namespace lingbot::cuda::attn {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kD = 64;
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBr = kMmaQueryRows;          // 128 query rows per CTA
constexpr int kRowsPerWarp = kBr / kWarps;  // 32: two 16-row atoms
constexpr int kBc = kMmaKeyTile;            // 64 keys per tile
constexpr int kSub = 32;                    // keys per online-softmax step (registers: see above)
constexpr int kSubAtoms = kSub / 8;         // 8-key mma atoms per step
constexpr int kChunks = kD * 2 / 16;        // 16-byte chunks per K/V row: 8
constexpr int kChunksPerThread = kBc * kChunks / kThreads;  // 4 of one row, per tile
static_assert(kBc % kSub == 0 && kSub % 16 == 0);
static_assert(kRowsPerWarp == 32 && kChunks == 8 && kChunksPerThread == 4 && kThreads == 2 * kBc);

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; src_bytes = 0 writes zeros and
// reads nothing.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// d += a * b (16x8x16, bf16 in, fp32 accumulate).
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Element offset of 16-byte chunk `chunk` of row `row` in a swizzled tile.
__device__ __forceinline__ int tile_offset(int row, int chunk) { return row * kD + ((chunk ^ (row & 7)) << 3); }

template <typename Keys>
__global__ void __launch_bounds__(kThreads, 2) attention_mma_kernel(AttentionArgs<bf16> a, Keys keys) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  __shared__ alignas(128) bf16 sk[2][kBc * kD];
  __shared__ alignas(128) bf16 sv[2][kBc * kD];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int lr = lane >> 2;  // row of the fragment layouts
  const int lc = lane & 3;   // column pair of the fragment layouts

  const int32_t q_tiles = (a.rows + kBr - 1) / kBr;
  const int32_t group = static_cast<int32_t>(blockIdx.x) / q_tiles;
  const int32_t row0 = (static_cast<int32_t>(blockIdx.x) % q_tiles) * kBr;  // in the group
  const int32_t head = static_cast<int32_t>(blockIdx.y);
  const int32_t split = static_cast<int32_t>(blockIdx.z);

  const auto view = make_view(keys, group, head);
  int32_t kb, ke;  // this split's keys [kb, ke); tile-aligned start
  split_range(view.num_keys(), a.splits, split, kBc, kb, ke);

  // Q fragments, kept for the whole loop: qf[atom][k-step of 16 dims][a0..a3].
  uint32_t qf[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) load_q_fragments(a, group, head, row0 + warp * kRowsPerWarp + mi * 16, lr, lc, qf[mi]);

  float o[2][8][4];  // O accumulators: [atom][8 dims][c0..c3]
  float m[2][2];     // running max per [atom][row lr / lr+8], exp2 domain
  float l[2][2];     // running sum of this lane's columns
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int dn = 0; dn < 8; ++dn) o[mi][dn][0] = o[mi][dn][1] = o[mi][dn][2] = o[mi][dn][3] = 0.f;
    m[mi][0] = m[mi][1] = -INFINITY;
    l[mi][0] = l[mi][1] = 0.f;
  }

  // Loader: thread copies chunks 4 * (tid % 2) + 0..3 of tile row tid / 2, K and V.
  // Its cursor points at that row's key in the next tile to load.
  const int load_row = tid >> 1;
  const int load_chunk0 = (tid & 1) * 4;
  auto cursor = view.seek(kb + load_row);

  auto load_tile = [&](int stage, int32_t tile_start) {
    const bool valid = tile_start + load_row < ke;
    // Past the split's keys: zeros (a zero V row times p = 0 adds nothing), nothing read.
    const bf16* k_src = valid ? view.k_at(cursor) : static_cast<const bf16*>(a.zero_fill_src);
    const bf16* v_src = valid ? view.v_at(cursor) : static_cast<const bf16*>(a.zero_fill_src);
    const int bytes = valid ? 16 : 0;
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = load_chunk0 + i;
      const int off = tile_offset(load_row, c);
      cp_async16(&sk[stage][off], valid ? k_src + c * 8 : k_src, bytes);
      cp_async16(&sv[stage][off], valid ? v_src + c * 8 : v_src, bytes);
    }
    view.advance(cursor, kBc);
  };

  const int32_t n_tiles = (ke - kb + kBc - 1) / kBc;
  if (n_tiles > 0) load_tile(0, kb);
  cp_async_commit();

  for (int32_t t = 0; t < n_tiles; ++t) {
    const int stage = t & 1;
    const int32_t tile_start = kb + t * kBc;
    if (t + 1 < n_tiles) load_tile(stage ^ 1, tile_start + kBc);
    cp_async_commit();
    cp_async_wait<1>();  // every group but the newest has landed: tile t is in `stage`
    __syncthreads();

    const bf16* ks = sk[stage];
    const bf16* vs = sv[stage];

    // The tile's keys in sub-blocks of kSub: one online-softmax step each.
    // Not unrolled, so that only one sub-block's scores are live (registers).
#pragma unroll 1
    for (int sb = 0; sb < kBc / kSub; ++sb) {
      const int key0 = sb * kSub;  // first key of the sub-block in the tile

      // S = Q K^T for this warp's 32 rows and the sub-block's keys.
      float s[2][kSubAtoms][4];
#pragma unroll
      for (int j = 0; j < kSubAtoms; ++j) {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) s[mi][j][0] = s[mi][j][1] = s[mi][j][2] = s[mi][j][3] = 0.f;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          // Matrices: keys key0+8j..+7 x dim chunks 4*half + 0..3 -> b0,b1 of k-steps 2*half, 2*half+1.
          const int row = key0 + 8 * j + (lane & 7);
          uint32_t b[4];
          ldmatrix_x4(b, ks + tile_offset(row, 4 * half + (lane >> 3)));
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            mma_16816(s[mi][j], qf[mi][2 * half], b[0], b[1]);
            mma_16816(s[mi][j], qf[mi][2 * half + 1], b[2], b[3]);
          }
        }
      }

      // Keys past the split's end (only in its last tile) get no weight.
      if (tile_start + key0 + kSub > ke) {
#pragma unroll
        for (int j = 0; j < kSubAtoms; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const bool outside = tile_start + key0 + 8 * j + 2 * lc + (e & 1) >= ke;
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) s[mi][j][e] = outside ? -INFINITY : s[mi][j][e];
          }
        }
      }

      // Online softmax per row (rh = 0: row lr, c0/c1; rh = 1: row lr + 8, c2/c3).
      float rescale[2][2];  // alpha = 2^(m_old - m_new) per row
      // A row's scores are spread over the 4 lanes of a quad: reduce with
      // xor-shuffles 1 and 2.
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) {
          float mx = -INFINITY;
#pragma unroll
          for (int j = 0; j < kSubAtoms; ++j) mx = fmaxf(mx, fmaxf(s[mi][j][2 * rh], s[mi][j][2 * rh + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(m[mi][rh], mx * a.scale_log2);
          const float m_use = m_new == -INFINITY ? 0.f : m_new;  // no finite score yet: avoid inf - inf
          const float alpha = fast_exp2(m[mi][rh] - m_use);
          float sum = 0.f;
#pragma unroll
          for (int j = 0; j < kSubAtoms; ++j) {
#pragma unroll
            for (int e = 2 * rh; e < 2 * rh + 2; ++e) {
              const float p = fast_exp2(fmaf(s[mi][j][e], a.scale_log2, -m_use));
              s[mi][j][e] = p;
              sum += p;
            }
          }
          l[mi][rh] = l[mi][rh] * alpha + sum;
          m[mi][rh] = m_new;
          rescale[mi][rh] = alpha;
        }
      }
      // O *= alpha per row. Once the running maxima settle, alpha is exactly 1
      // for every row of the warp most of the time: skip the 64 multiplies.
      const bool any_rescale = rescale[0][0] != 1.f || rescale[0][1] != 1.f || rescale[1][0] != 1.f ||
                               rescale[1][1] != 1.f;
      if (__any_sync(0xffffffffu, any_rescale)) {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
          for (int dn = 0; dn < 8; ++dn) {
            o[mi][dn][0] *= rescale[mi][0];
            o[mi][dn][1] *= rescale[mi][0];
            o[mi][dn][2] *= rescale[mi][1];
            o[mi][dn][3] *= rescale[mi][1];
          }
        }
      }

      // O += P V, 16 keys at a time.
#pragma unroll
      for (int kk = 0; kk < kSub / 16; ++kk) {
        uint32_t pa[2][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          pa[mi][0] = pack_bf16(s[mi][2 * kk][0], s[mi][2 * kk][1]);
          pa[mi][1] = pack_bf16(s[mi][2 * kk][2], s[mi][2 * kk][3]);
          pa[mi][2] = pack_bf16(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
          pa[mi][3] = pack_bf16(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < 4; ++dp) {
          // Matrices: (keys +0..7, dims 16dp..+7), (keys +8..15, same), (keys +0..7, dims 16dp+8..),
          // (keys +8..15, same) -> b0,b1 of dim atoms 2dp and 2dp+1.
          const int row = key0 + 16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8;
          uint32_t b[4];
          ldmatrix_x4_trans(b, vs + tile_offset(row, 2 * dp + (lane >> 4)));
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            mma_16816(o[mi][2 * dp], pa[mi], b[0], b[1]);
            mma_16816(o[mi][2 * dp + 1], pa[mi], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with `stage` before it is refilled
  }

  // Epilogue: full row sums, then the output (splits == 1) or the partials.
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
    store_rows(a, group, head, split, row0 + warp * kRowsPerWarp + mi * 16, lr, lc,
               [&](int j, int e) { return o[mi][j][e]; }, l[mi], m[mi]);
  }
#else
  __trap();  // built for a GPU without bf16 mma.sync; the host never picks this kernel there
#endif
}

}  // namespace

template <typename Keys>
void launch_attention_mma(const AttentionArgs<bf16>& args, const Keys& keys, cudaStream_t stream) {
  launch_tensor_core_kernel<attention_mma_kernel<Keys>>(args, keys, kThreads, 0, kMmaQueryRows, stream);
}

template void launch_attention_mma<DenseKeys<bf16>>(const AttentionArgs<bf16>&, const DenseKeys<bf16>&,
                                                    cudaStream_t);
template void launch_attention_mma<PagedKeys<bf16>>(const AttentionArgs<bf16>&, const PagedKeys<bf16>&,
                                                    cudaStream_t);

int attention_mma_ctas_per_sm() { return tensor_core_ctas_per_sm<attention_mma_kernel<PagedKeys<bf16>>>(kThreads, 0); }

}  // namespace lingbot::cuda::attn
