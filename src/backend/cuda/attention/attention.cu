// The attention kernels that are not the tensor-core one: the naive twin,
// the warp kernel (generic fallback, camera head) and the combine kernel that
// merges key splits; plus launch_attention(), which runs the chosen kernel.
// Host-side checks and choices are in attention.cpp; the Mma kernel is in
// attention_mma.cu. No fmt here: its compile-time format checks do not build
// under nvcc, so errors a user can cause are caught in attention.cpp.
#include "backend/cuda/attention/attention_kernels.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

namespace lingbot::cuda {

using attn::AttentionArgs;
using attn::DenseKeys;
using attn::PagedKeys;
using bf16 = __nv_bfloat16;

namespace {

// ---- naive twin: one thread per (query, head), fp64, two passes ------------

constexpr int kNaiveThreads = 128;

template <typename T, typename Keys>
__global__ void __launch_bounds__(kNaiveThreads) attention_naive_kernel(AttentionArgs<T> a, Keys keys) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;  // (query row, head)
  if (idx >= a.total_rows() * a.num_heads) return;
  const int64_t i = idx / a.num_heads;
  const int32_t head = static_cast<int32_t>(idx % a.num_heads);
  const int32_t group = static_cast<int32_t>(i / a.rows);
  const int D = a.head_dim;
  const auto view = attn::make_view(keys, group, head);
  const int32_t nk = view.num_keys();
  const T* qi = a.q + i * a.row_stride() + int64_t{head} * D;
  T* oi = a.out + i * a.row_stride() + int64_t{head} * D;
  if (nk == 0) {
    for (int c = 0; c < D; ++c) oi[c] = attn::from_f32<T>(0.f);
    return;
  }
  const double scale = 1.0 / sqrt(static_cast<double>(D));
  auto score = [&](int32_t j) {
    const T* kj = view.k_row_simple(j);
    double d = 0;
    for (int c = 0; c < D; ++c) d += static_cast<double>(attn::to_f32(qi[c])) * attn::to_f32(kj[c]);
    return d * scale;
  };
  double max_score = -INFINITY;
  for (int32_t j = 0; j < nk; ++j) max_score = fmax(max_score, score(j));
  double acc[kAttentionMaxHeadDim];
  for (int c = 0; c < D; ++c) acc[c] = 0;
  double denom = 0;
  for (int32_t j = 0; j < nk; ++j) {
    const double w = exp(score(j) - max_score);
    denom += w;
    const T* vj = view.v_row_simple(j);
    for (int c = 0; c < D; ++c) acc[c] += w * attn::to_f32(vj[c]);
  }
  for (int c = 0; c < D; ++c) oi[c] = attn::from_f32<T>(static_cast<float>(acc[c] / denom));
}

// ---- warp kernel: one warp per (query, head, key split) ---------------------
// Lane l holds dims l, l + 32, ... of q and of the accumulator. Keys go four
// at a time: four dot products (their loads in flight together), four
// butterfly sums, one online-softmax update.

constexpr int kWarpThreads = 128;
constexpr int kWarpsPerCta = kWarpThreads / 32;
constexpr int kPerLane = kAttentionMaxHeadDim / 32;
constexpr int kKeysPerStep = 4;

__device__ __forceinline__ float warp_all_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T, typename Keys>
__global__ void __launch_bounds__(kWarpThreads) attention_warp_kernel(AttentionArgs<T> a, Keys keys) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t item = int64_t{blockIdx.x} * kWarpsPerCta + (threadIdx.x >> 5);
  const int64_t nq = a.total_rows();
  if (item >= nq * a.num_heads * a.splits) return;  // whole warps only
  // item = (head * nq + i) * splits + split: neighbouring warps share a head
  // and (unsplit) read the same keys, which then come from L1/L2.
  const int32_t split = static_cast<int32_t>(item % a.splits);
  const int64_t i = (item / a.splits) % nq;
  const int32_t head = static_cast<int32_t>(item / (int64_t{a.splits} * nq));
  const int32_t group = static_cast<int32_t>(i / a.rows);
  const int D = a.head_dim;
  const auto view = attn::make_view(keys, group, head);
  int32_t kb, ke;
  attn::split_range(view.num_keys(), a.splits, split, 1, kb, ke);

  const T* qi = a.q + i * a.row_stride() + int64_t{head} * D;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int c = lane + 32 * k;
    qv[k] = c < D ? attn::to_f32(qi[c]) * a.scale_log2 : 0.f;  // scores in the exp2 domain
    acc[k] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int32_t j0 = kb; j0 < ke; j0 += kKeysPerStep) {
    float dot[kKeysPerStep];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      dot[u] = 0.f;
      if (j0 + u < ke) {
        const T* kj = view.k_row(j0 + u);
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
          const int c = lane + 32 * k;
          if (c < D) dot[u] = fmaf(qv[k], attn::to_f32(kj[c]), dot[u]);
        }
      }
    }
    float mx = m;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      dot[u] = warp_all_sum(dot[u]);
      if (j0 + u < ke) mx = fmaxf(mx, dot[u]);
    }
    const float alpha = attn::fast_exp2(m - mx);  // m = -inf on the first step: 0
    l *= alpha;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) acc[k] *= alpha;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      if (j0 + u < ke) {
        const float p = attn::fast_exp2(dot[u] - mx);
        l += p;
        const T* vj = view.v_row(j0 + u);
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
          const int c = lane + 32 * k;
          if (c < D) acc[k] = fmaf(p, attn::to_f32(vj[c]), acc[k]);
        }
      }
    }
    m = mx;
  }

  const float inv = l > 0.f ? 1.f / l : 0.f;
  if (a.splits == 1) {
    T* oi = a.out + i * a.row_stride() + int64_t{head} * D;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int c = lane + 32 * k;
      if (c < D) oi[c] = attn::from_f32<T>(acc[k] * inv);
    }
  } else {
    const int64_t ih = (int64_t{split} * nq + i) * a.num_heads + head;
    float* po = a.part_o + ih * D;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int c = lane + 32 * k;
      if (c < D) po[c] = acc[k] * inv;
    }
    if (lane == 0) a.part_lse[ih] = l > 0.f ? m + log2f(l) : -INFINITY;
  }
}

// ---- combine: merge the splits' normalised partials by their log-sum-exp ----
//   out = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M),  M = max_s lse_s
// An empty split has lse = -inf and weight 0; no keys at all gives 0.
// One warp per (query row, head, 32 dims): the lanes share the maximum, the
// weights and the denominator (warp reductions and shuffles over the
// splits), and each sums its dim over every split, so a few rows with many
// splits (the camera head: 16 heads, up to kMaxWarpSplits) still spread over
// many warps and their loads stay coalesced (32 consecutive dims).

constexpr int kCombineThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    attention_combine_kernel(const float* part_o, const float* part_lse, int32_t splits, int64_t rows_heads,
                             int32_t head_dim, T* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int chunks = (head_dim + 31) / 32;
  const int64_t total = rows_heads * head_dim;
  const int64_t warps = rows_heads * chunks;
  for (int64_t w = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; w < warps;
       w += int64_t{gridDim.x} * blockDim.x / 32) {  // uniform per warp: the shuffles see all 32 lanes
    const int64_t ih = w / chunks;                     // (query row, head)
    const int d = static_cast<int>(w % chunks) * 32 + lane;
    const bool active = d < head_dim;
    const int64_t e = ih * head_dim + (active ? d : 0);  // lanes past head_dim read dim 0 and store nothing
    float mx = -INFINITY;
    for (int32_t s = lane; s < splits; s += 32) mx = fmaxf(mx, part_lse[s * rows_heads + ih]);
    mx = warp_max(mx);
    if (mx == -INFINITY) {
      if (active) out[e] = attn::from_f32<T>(0.f);
      continue;
    }
    // 32 splits at a time: lane j weighs split s0 + j, and every lane takes
    // the weights from the others by shuffle, so the loop over splits only
    // loads partial outputs (independent loads, unrolled).
    float num = 0.f, den = 0.f;
    for (int32_t s0 = 0; s0 < splits; s0 += 32) {
      const float own = s0 + lane < splits ? attn::fast_exp2(part_lse[(s0 + lane) * rows_heads + ih] - mx) : 0.f;
      den += own;
      const int n = min(32, splits - s0);
#pragma unroll 8
      for (int j = 0; j < n; ++j) num = fmaf(__shfl_sync(0xffffffffu, own, j), part_o[(s0 + j) * total + e], num);
    }
    den = warp_sum(den);
    if (active) out[e] = attn::from_f32<T>(num / den);
  }
}

// The same merge for head_dim 64 and at most kCombine64MaxSplits splits
// (the tensor-core kernels' splits of one frame): one thread per (query row,
// head, 4 dims), 16 threads per row-head. Each reads the few log-sum-exps
// itself (the 16 threads of a row-head read the same ones: one cache line)
// and its 16-byte slice of every split's partial, all loads independent and
// in flight together; no shuffles, no reductions. The warp-per-32-dims
// kernel above spends most of its time in the chain load lse -> warp max ->
// weights -> loads -> warp sum, far from the bandwidth bound of the 14 MB
// that one frame's 978 x 16 heads x 3 splits move.
constexpr int kCombine64MaxSplits = 8;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    attention_combine64_kernel(const float* part_o, const float* part_lse, int32_t splits, int64_t rows_heads, T* out) {
  constexpr int kDim = 64;
  const int64_t total = rows_heads * kDim;
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;  // (row-head, 4 dims)
  if (i >= rows_heads * (kDim / 4)) return;
  const int64_t ih = i / (kDim / 4);
  const int64_t e = i * 4;  // first of this thread's 4 elements: ih * 64 + 4 (i % 16)
  float lse[kCombine64MaxSplits];
  float4 o[kCombine64MaxSplits];
  float mx = -INFINITY;
#pragma unroll
  for (int s = 0; s < kCombine64MaxSplits; ++s) {
    if (s < splits) {
      lse[s] = part_lse[s * rows_heads + ih];
      o[s] = *reinterpret_cast<const float4*>(part_o + s * total + e);
      mx = fmaxf(mx, lse[s]);
    }
  }
  float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
  float den = 0.f;
  if (mx != -INFINITY) {
#pragma unroll
    for (int s = 0; s < kCombine64MaxSplits; ++s) {
      if (s < splits) {
        const float w = attn::fast_exp2(lse[s] - mx);
        den += w;
        num.x = fmaf(w, o[s].x, num.x);
        num.y = fmaf(w, o[s].y, num.y);
        num.z = fmaf(w, o[s].z, num.z);
        num.w = fmaf(w, o[s].w, num.w);
      }
    }
  }
  const float inv = den > 0.f ? 1.f / den : 0.f;  // no keys at all: 0
  out[e] = attn::from_f32<T>(num.x * inv);
  out[e + 1] = attn::from_f32<T>(num.y * inv);
  out[e + 2] = attn::from_f32<T>(num.z * inv);
  out[e + 3] = attn::from_f32<T>(num.w * inv);
}

unsigned blocks_for(int64_t threads, int per_block) {
  return static_cast<unsigned>((threads + per_block - 1) / per_block);  // the host checked the size
}

}  // namespace

namespace attn {

template <typename T, typename Keys>
void launch_attention(AttentionKernel kernel, const AttentionArgs<T>& a, const Keys& keys, cudaStream_t stream) {
  const int64_t items = a.total_rows() * a.num_heads;
  if constexpr (std::is_same_v<Keys, PagedFp8Keys>) {
    (void)kernel;  // only wgmma-ws reads fp8 pages (the host checked)
    launch_attention_wgmma_ws(a, keys, stream);
  } else {
    switch (kernel) {
      case AttentionKernel::Naive:
        attention_naive_kernel<T, Keys><<<blocks_for(items, kNaiveThreads), kNaiveThreads, 0, stream>>>(a, keys);
        LB_CUDA_CHECK_LAUNCH();
        break;
      case AttentionKernel::Mma:
        if constexpr (std::is_same_v<T, bf16>) {
          launch_attention_mma(a, keys, stream);
          break;
        }
        [[fallthrough]];  // not reached: the host picks Mma for bf16 only
      case AttentionKernel::WgmmaWs:
        if constexpr (std::is_same_v<T, bf16>) {
          launch_attention_wgmma_ws(a, keys, stream);
          break;
        }
        [[fallthrough]];  // not reached: the host picks them for bf16 only
      case AttentionKernel::Warp:
      case AttentionKernel::Auto:
        attention_warp_kernel<T, Keys>
            <<<blocks_for(items * a.splits * 32, kWarpThreads), kWarpThreads, 0, stream>>>(a, keys);
        LB_CUDA_CHECK_LAUNCH();
        break;
    }
  }
  if (a.splits > 1 && a.head_dim == 64 && a.splits <= kCombine64MaxSplits) {
    attention_combine64_kernel<T><<<blocks_for(items * 16, kCombineThreads), kCombineThreads, 0, stream>>>(
        a.part_o, a.part_lse, a.splits, items, a.out);
    LB_CUDA_CHECK_LAUNCH();
  } else if (a.splits > 1) {
    const int64_t warps = items * ((a.head_dim + 31) / 32);
    const unsigned blocks = std::min<unsigned>(blocks_for(warps * 32, kCombineThreads), 65535u);
    attention_combine_kernel<T><<<blocks, kCombineThreads, 0, stream>>>(a.part_o, a.part_lse, a.splits, items,
                                                                        a.head_dim, a.out);
    LB_CUDA_CHECK_LAUNCH();
  }
}

template void launch_attention(AttentionKernel, const AttentionArgs<float>&, const DenseKeys<float>&, cudaStream_t);
template void launch_attention(AttentionKernel, const AttentionArgs<float>&, const PagedKeys<float>&, cudaStream_t);
template void launch_attention(AttentionKernel, const AttentionArgs<bf16>&, const DenseKeys<bf16>&, cudaStream_t);
template void launch_attention(AttentionKernel, const AttentionArgs<bf16>&, const PagedKeys<bf16>&, cudaStream_t);
template void launch_attention(AttentionKernel, const AttentionArgs<bf16>&, const PagedFp8Keys&, cudaStream_t);

}  // namespace attn
}  // namespace lingbot::cuda
