// Internals of the attention kernels shared by the host code (attention.cpp,
// compiled by the C++ compiler) and the kernels (attention.cu,
// attention_mma.cu): the launch arguments, the two sources of keys as plain
// data, and the launchers. Device-side helpers are in attention_kernels.cuh.
//
// Key sources. A kernel is written once against a source; both index the
// keys of one (group, head) as j = 0 .. num_keys-1:
//   DenseKeys: group g's keys are rows [g*n, (g+1)*n) of k and v
//              [groups*n][num_heads*head_dim].
//   PagedKeys: key j is slot j % page_size of visible page j / page_size in
//              the cache's device table (kv_table.h), for block `block`;
//              num_keys is read from the table on the device.
#pragma once

#include "backend/cuda/attention/attention_types.h"
#include "backend/cuda/kv/kv_table.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace lingbot::cuda::attn {

constexpr float kLog2e = 1.4426950408889634f;

// The queries and outputs of one launch.
//   q, out:   [groups * rows][num_heads * head_dim]
//   part_o:   [splits][groups * rows][num_heads][head_dim]  (splits > 1)
//   part_lse: [splits][groups * rows][num_heads]            (log2 domain)
template <typename T>
struct AttentionArgs {
  const T* q = nullptr;
  T* out = nullptr;
  int32_t groups = 1;
  int32_t rows = 0;  // queries per group
  int32_t num_heads = 1;
  int32_t head_dim = 1;
  float scale_log2 = 0;  // log2(e) / sqrt(head_dim): scores in the exp2 domain
  int32_t splits = 1;    // 1: normalise and write `out`; > 1: write the partials, then combine
  float* part_o = nullptr;
  float* part_lse = nullptr;
  // A 16-byte aligned device address that the tensor-core kernels' zero-fill
  // copies (cp.async with 0 source bytes) name; nothing is read from it.
  const void* zero_fill_src = nullptr;

  LB_HOST_DEVICE int64_t row_stride() const { return int64_t{num_heads} * head_dim; }
  LB_HOST_DEVICE int64_t total_rows() const { return int64_t{groups} * rows; }
};

template <typename T>
struct DenseKeys {
  const T* k = nullptr;
  const T* v = nullptr;
  int64_t stride = 0;  // elements per row: num_heads * head_dim
  int32_t n = 0;       // keys per group
  int32_t head_dim = 0;
};

template <typename T>
struct PagedKeys {
  const KvTableHeader* table = nullptr;  // device
  int32_t block = 0;
  int32_t head_dim = 0;
};

// The fp8 cache's pages (kv/kv_fp8.h's layout: e4m3 codes and a float32
// scale per slot and head), read by the wgmma-ws kernel, which turns each
// key tile into bfloat16 in shared memory (fp8_decode.cuh's arithmetic, the
// same bits as the read-back to staging pages). Queries and outputs are
// bfloat16.
struct PagedFp8Keys {
  const KvTableHeader* table = nullptr;  // device
  int32_t block = 0;
  int32_t head_dim = 0;
};

// Runs `kernel` (Naive, Warp, Mma or WgmmaWs; the last two only for bf16) and, when
// args.splits > 1, the combine kernel. Defined in attention.cu for
// T = float, __nv_bfloat16 and both sources.
template <typename T, typename Keys>
void launch_attention(AttentionKernel kernel, const AttentionArgs<T>& args, const Keys& keys, cudaStream_t stream);

// The tensor-core kernel (attention_mma.cu): bf16, head_dim 64.
template <typename Keys>
void launch_attention_mma(const AttentionArgs<__nv_bfloat16>& args, const Keys& keys, cudaStream_t stream);
// Resident CTAs per SM of the Mma kernel (occupancy API), for split choice.
int attention_mma_ctas_per_sm();
// The warp-specialised wgmma kernel (attention_wgmma_ws.cu): bf16, head_dim
// 64, sm_90a; the Mma kernel's contract and splits; the grid's query tiles
// follow its shape (below).
template <typename Keys>
void launch_attention_wgmma_ws(const AttentionArgs<__nv_bfloat16>& args, const Keys& keys, cudaStream_t stream);
// Its two shapes: 2 consumer warpgroups (128 queries per CTA) or 3 (192).
// Three run the long dense groups of the scale phase (7,824 keys) faster
// (a third warp per scheduler hides more of each softmax). They stay off the paged cache: one
// frame's 978 queries make 6 x 16 CTAs of 192 (the last with 18 rows), and
// no key split spreads those over 132 SMs better than 8 x 16 CTAs of 128 do
// in one wave; nor short dense groups (a frame block's 978 keys), where the
// longer prologue and coarser tiles cost more than the third consumer gains.
constexpr int64_t kWsKeysForThreeConsumers = 2048;
template <typename T>
int wgmma_ws_consumers(const DenseKeys<T>& keys) {
  return keys.n >= kWsKeysForThreeConsumers ? 3 : 2;
}
template <typename T>
int wgmma_ws_consumers(const PagedKeys<T>&) {
  return 2;
}
inline int wgmma_ws_consumers(const PagedFp8Keys&) { return 2; }
inline int wgmma_ws_query_rows(int consumers) { return 64 * consumers; }
// Keys per tile of the two-consumer shape, which runs the paged cache: the
// box of the cache's TMA tensor maps (tensor_map.h) is one such tile.
constexpr int kWsPagedKeyTile = 192;
int attention_wgmma_ws_ctas_per_sm(int consumers);
constexpr int kMmaQueryRows = 128;  // queries per CTA of the mma.sync kernel
constexpr int kMmaKeyTile = 64;     // keys per shared-memory tile

// The grid of the tensor-core kernels: (groups x tiles of `query_rows`
// queries, heads, key splits).
template <typename T>
inline dim3 tensor_core_grid(const AttentionArgs<T>& a, int query_rows) {
  const int64_t q_tiles = (a.rows + query_rows - 1) / query_rows;
  return dim3(static_cast<unsigned>(int64_t{a.groups} * q_tiles), static_cast<unsigned>(a.num_heads),
              static_cast<unsigned>(a.splits));
}

// Resident CTAs per SM of `kernel` on the current device (occupancy API,
// at least 1), asked once per device and kept in `cache`: the query must
// not run while a graph is being captured.
struct OccupancyCache {
  int device = -1;
  int ctas = 0;
};
int resident_ctas_per_sm(OccupancyCache& cache, const void* kernel, int threads, size_t dynamic_smem_bytes);

}  // namespace lingbot::cuda::attn
