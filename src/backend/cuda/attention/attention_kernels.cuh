// Device side of the attention kernels (CUDA sources only): the two key
// sources and small helpers shared by the kernels.
//
// make_view(keys, group, head) gives a View (dense_key_view.cuh,
// paged_key_view.cuh) with the number of keys and where key j's K and V
// head vectors live, by random access (k_row) or through a Cursor that walks
// the keys in order (the tensor-core kernels advance each cursor one tile at
// a time, which avoids a division per row).
#pragma once

#include "backend/cuda/attention/attention_launch.h"
#include "backend/cuda/attention/dense_key_view.cuh"
#include "backend/cuda/attention/paged_key_view.cuh"
#include "backend/cuda/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace lingbot::cuda::attn {


__device__ __forceinline__ float fast_exp2(float x) {  // 2^x, relative error ~2^-22; exp2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Two floats -> bf16x2 with `lo` in the low half (the lower column index).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// P of a key tile (the lane's wgmma accumulator registers of S, 4 per
// 8-key atom, exponentiated in place) packed into the A fragments of
// O += P V: k-step kk covers keys 16 kk .. 16 kk + 15, i.e. atoms 2 kk and
// 2 kk + 1. Used by the warpgroup-MMA kernel (wgmma-ws; dev/cuda keeps the retired
// wgmma v1, which shares it).
template <int kKSteps>
__device__ __forceinline__ void pack_p_fragments(const float (&s)[8 * kKSteps], uint32_t (&pa)[kKSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    pa[kk][0] = pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);  // atom 2kk, row lr
    pa[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);  // atom 2kk, row lr + 8
    pa[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);  // atom 2kk + 1, row lr
    pa[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);  // atom 2kk + 1, row lr + 8
  }
}

// Opts a kernel into more than 48 KiB of dynamic shared memory, once per
// kernel (a function attribute, not a stream operation: fine while a graph
// is being captured). Host code.
template <auto kKernel>
void allow_dynamic_smem(int bytes) {
  static const bool done = [bytes] {
    LB_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)done;
}

// The host side of the tensor-core kernels (mma.sync,
// wgmma-ws): a launch over tensor_core_grid() (`query_rows` per CTA) with
// `smem_bytes` of dynamic shared memory, and the kernel's resident CTAs per SM for the split choice
// (asked once per device; the query sees the shared-memory allowance).
template <auto kKernel, typename Keys>
void launch_tensor_core_kernel(const AttentionArgs<__nv_bfloat16>& args, const Keys& keys, int threads,
                               int smem_bytes, int query_rows, cudaStream_t stream) {
  if (smem_bytes > 0) allow_dynamic_smem<kKernel>(smem_bytes);
  kKernel<<<tensor_core_grid(args, query_rows), threads, smem_bytes, stream>>>(args, keys);
  LB_CUDA_CHECK_LAUNCH();
}

template <auto kKernel>
int tensor_core_ctas_per_sm(int threads, int smem_bytes) {
  static thread_local OccupancyCache cache;
  if (smem_bytes > 0) allow_dynamic_smem<kKernel>(smem_bytes);
  return resident_ctas_per_sm(cache, reinterpret_cast<const void*>(kKernel), threads, smem_bytes);
}

// ---- a warp's 16 query rows in the tensor-core fragment layouts ----------
// The tensor-core kernels (mma.sync, wgmma-ws) give each
// warp 16 query rows [first_row, first_row + 16) of the CTA's (group, head)
// in mma.sync's layouts, which wgmma's register fragments share: lane
// (lr = lane / 4, lc = lane % 4) holds rows lr and lr + 8.

// The A fragments of Q (head_dim 64 = 4 k-steps of 16): qf[kk][rh] and
// qf[kk][2 + rh] hold dims 16 kk + 2 lc (+1) and 16 kk + 8 + 2 lc (+1) of row
// lr + 8 rh; rows past a.rows are zeros.
__device__ __forceinline__ void load_q_fragments(const AttentionArgs<__nv_bfloat16>& a, int32_t group, int32_t head,
                                                 int32_t first_row, int lr, int lc, uint32_t (&qf)[4][4]) {
  constexpr int kD = 64;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const int32_t r = first_row + lr + 8 * rh;
    const __nv_bfloat16* qrow = a.q + (int64_t{group} * a.rows + r) * a.row_stride() + int64_t{head} * kD;
    const bool valid = r < a.rows;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      qf[kk][rh] = valid ? *reinterpret_cast<const uint32_t*>(qrow + 16 * kk + 2 * lc) : 0u;
      qf[kk][2 + rh] = valid ? *reinterpret_cast<const uint32_t*>(qrow + 16 * kk + 8 + 2 * lc) : 0u;
    }
  }
}

// The epilogue: o(j, e) is the output accumulator of column 8 j + 2 lc + e % 2
// of row lr + 8 (e / 2) (j < 8 atoms of 8 dims), l and m the lane's partial
// row sums and the rows' maxima (exp2 domain). Completes the row sums over
// the 4 lanes of a row, then writes the normalised row (splits == 1) or this
// split's partial output and log-sum-exp for the combine kernel.
template <typename Acc>
__device__ __forceinline__ void store_rows(const AttentionArgs<__nv_bfloat16>& a, int32_t group, int32_t head,
                                           int32_t split, int32_t first_row, int lr, int lc, Acc o,
                                           const float (&l)[2], const float (&m)[2]) {
  constexpr int kD = 64;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    float sum = l[rh];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int32_t r = first_row + lr + 8 * rh;
    if (r >= a.rows) continue;
    const int64_t i = int64_t{group} * a.rows + r;  // query row in q / out
    if (a.splits == 1) {
      __nv_bfloat16* orow = a.out + i * a.row_stride() + int64_t{head} * kD;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<uint32_t*>(orow + 8 * j + 2 * lc) = pack_bf16(o(j, 2 * rh) * inv, o(j, 2 * rh + 1) * inv);
      }
    } else {
      const int64_t ih = (int64_t{split} * a.total_rows() + i) * a.num_heads + head;
      float* prow = a.part_o + ih * kD;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<float2*>(prow + 8 * j + 2 * lc) = make_float2(o(j, 2 * rh) * inv, o(j, 2 * rh + 1) * inv);
      }
      if (lc == 0) a.part_lse[ih] = sum > 0.f ? m[rh] + log2f(sum) : -INFINITY;
    }
  }
}

// Key range [begin, end) of split `split` of `splits` over nk keys, cut in
// units of `granule` keys (a tile) so that only a split's last tile can be
// partial. Splits past the keys are empty (begin == end).
__device__ __forceinline__ void split_range(int32_t nk, int32_t splits, int32_t split, int32_t granule,
                                            int32_t& begin, int32_t& end) {
  const int32_t granules = (nk + granule - 1) / granule;
  const int32_t per_split = (granules + splits - 1) / splits;
  const int64_t b = int64_t{split} * per_split * granule;
  const int64_t e = b + int64_t{per_split} * granule;
  begin = static_cast<int32_t>(b < nk ? b : nk);
  end = static_cast<int32_t>(e < nk ? e : nk);
}

}  // namespace lingbot::cuda::attn
