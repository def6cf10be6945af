// The attention input preparation, one pass per token: the split of the
// fused qkv projection into q, k and v, the per-head LayerNorm of q and k
// (qk-norm) and RoPE (both pairings, see backend.h RopeTable).
//
// qk-norm statistics are float32, two passes like the CPU reference (mean,
// then the mean of squared deviations), and 1 / sqrtf(var + eps) with IEEE
// sqrt and division, as in norm.cu.
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

namespace lingbot::cuda::kernels {

namespace {

// ---- split_qkv: one block per token ---------------------------------------
// The token's q and k (2C values) are staged in shared memory as float32,
// normalised per head in place (one warp per head vector), then each output
// element is computed from its own value and its RoPE partner and stored.
// v is copied through unchanged. kVec: C is a multiple of the pack and all
// four tensors are 16-byte aligned.

// Element i of the head vector x after RoPE with this token's cos/sin row
// (the formulas of rotate() in backend/cpu/cpu_layers.cpp).
__device__ __forceinline__ float rope_element(const float* x, int i, int head_dim, SplitQkv::Rope mode,
                                              const float* cos, const float* sin) {
  switch (mode) {
    case SplitQkv::Rope::None:
      return x[i];
    case SplitQkv::Rope::Interleaved: {  // angle j rotates (2j, 2j + 1)
      const int j = i / 2;
      return (i % 2 == 0) ? x[i] * cos[j] - x[i + 1] * sin[j] : x[i - 1] * sin[j] + x[i] * cos[j];
    }
    case SplitQkv::Rope::HalfSplit: {  // halves (y, x); in a half, ii < h/2 pairs with ii + h/2
      const int half = head_dim / 2, quarter = head_dim / 4;
      const int part = i / half, ii = i % half;
      const float* p = x + part * half;
      const int j = part * quarter + ii % quarter;
      if (ii < quarter) return p[ii] * cos[j] - p[ii + quarter] * sin[j];
      return p[ii] * cos[j] + p[ii - quarter] * sin[j];
    }
  }
  return x[i];
}

template <typename T, bool kVec>
__global__ void split_qkv_kernel(SplitQkv a) {
  extern __shared__ float staged[];  // [2, C]: q then k of the current token
  constexpr int P = kPack<T>;
  const int D = a.head_dim;
  const int64_t C = int64_t{a.heads} * D;
  const T* qkv = static_cast<const T*>(a.qkv);
  T* const q_out = static_cast<T*>(a.q);
  T* const k_out = static_cast<T*>(a.k);
  T* v_out = static_cast<T*>(a.v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;

  for (int64_t t = blockIdx.x; t < a.tokens; t += gridDim.x) {
    const T* row = qkv + t * 3 * C;  // [q | k | v] of token t
    if constexpr (kVec) {
      for (int64_t j = threadIdx.x; j < 2 * C / P; j += blockDim.x) {
        float f[P];
        load_pack(row + j * P, f);
#pragma unroll
        for (int e = 0; e < P; ++e) staged[j * P + e] = f[e];
      }
      for (int64_t j = threadIdx.x; j < C / P; j += blockDim.x)
        *reinterpret_cast<uint4*>(v_out + t * C + j * P) = *reinterpret_cast<const uint4*>(row + 2 * C + j * P);
    } else {
      for (int64_t i = threadIdx.x; i < 2 * C; i += blockDim.x) staged[i] = to_float(row[i]);
      for (int64_t i = threadIdx.x; i < C; i += blockDim.x) v_out[t * C + i] = row[2 * C + i];
    }
    __syncthreads();

    if (a.norm) {
      for (int seg = warp; seg < 2 * a.heads; seg += warps) {  // head vector `seg` of [q heads | k heads]
        float* x = staged + int64_t{seg} * D;
        const bool is_q = seg < a.heads;
        const float* w = is_q ? a.q_weight : a.k_weight;
        const float* b = is_q ? a.q_bias : a.k_bias;
        float sum = 0.0f;
        for (int i = lane; i < D; i += 32) sum += x[i];
        const float mean = warp_sum(sum) / static_cast<float>(D);
        float squares = 0.0f;
        for (int i = lane; i < D; i += 32) {
          const float d = x[i] - mean;
          squares += d * d;
        }
        const float inv_std = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(D) + a.eps);
        for (int i = lane; i < D; i += 32) {
          float o = (x[i] - mean) * inv_std;
          if (w) o *= w[i];
          if (b) o += b[i];
          x[i] = o;
        }
      }
      __syncthreads();
    }

    const float* cos = nullptr;
    const float* sin = nullptr;
    if (a.rope != SplitQkv::Rope::None) {
      const int64_t table_row = t % a.rope_rows;
      cos = a.cos + table_row * (D / 2);
      sin = a.sin + table_row * (D / 2);
    }
    if constexpr (kVec) {
      for (int64_t j = threadIdx.x; j < 2 * C / P; j += blockDim.x) {
        const int64_t first = j * P;  // a pack never straddles q and k: C % P == 0
        const int s = static_cast<int>(first / C);
        float o[P];
#pragma unroll
        for (int e = 0; e < P; ++e) {
          const int64_t idx = first + e;
          const int i = static_cast<int>(idx % D);
          o[e] = rope_element(staged + (idx - i), i, D, a.rope, cos, sin);
        }
        store_pack((s == 0 ? q_out : k_out) + t * C + (first - s * C), o);
      }
    } else {
      for (int64_t idx = threadIdx.x; idx < 2 * C; idx += blockDim.x) {
        const int s = static_cast<int>(idx / C);
        const int i = static_cast<int>(idx % D);
        (s == 0 ? q_out : k_out)[t * C + (idx - s * C)] =
            from_float<T>(rope_element(staged + (idx - i), i, D, a.rope, cos, sin));
      }
    }
    __syncthreads();  // the next token overwrites `staged`
  }
}

constexpr int kSplit64Dim = 64;

// ---- split_qkv for head_dim 64, 16-byte packs: several heads per warp -----
// The aggregator's case (16 heads of 64; bfloat16, 978 tokens a frame: 6 MB
// read, 6 MB written, 48 calls a frame). Each lane moves one 16-byte pack of
// P = kPack<T> elements (8 bfloat16 or 4 float32) of q, k and v, so a head
// vector of 64 takes kLanes = 64 / P lanes (8 or 16) and a warp holds
// 32 / kLanes vectors (4 or 2) of consecutive (token, head) items:
//   lane l: item (the warp's first item + l / kLanes),
//           elements [P (l % kLanes), +P) of that head's q, k and v vectors.
// A warp-wide load moves 512 contiguous bytes (a warp per head vector with
// a bf16 pair per lane would move 128), and a frame's 3912 warps (bfloat16) are one wave on an H200
// (the launch bound keeps the kernel at 64 registers, so 4 blocks of 256
// fit an SM: 132 x 32 warps), each lane with its three 16-byte loads in
// flight together (~45 KB per SM).
// qk-norm reduces over the kLanes lanes of a vector (xor shuffles by less
// than kLanes stay inside the group; every lane takes part, so the masks are
// full-warp). RoPE: an interleaved pair (2m, 2m + 1) lies inside one pack (P
// is even); in the half-split layout a pack lies inside one quarter of 16
// elements (P divides 16), and its partners i +- 16 are the pack of lane
// l ^ (16 / P). Same arithmetic as the generic kernel (float32, two-pass
// variance, the RoPE formulas of rope_element). Needs qkv, q, k, v, the
// qk-norm parameters and the RoPE tables 16-byte aligned (checked on the
// host; the table rows of 32 floats keep that alignment).
template <typename T>
inline constexpr int kSplit64ItemsPerWarp = 32 * kPack<T> / kSplit64Dim;

// Per-head LayerNorm of a 64-vector held as packs of P by kLanes lanes; w, b
// (optional): the LayerNorm's [64] weight and bias, this lane's slice
// [first, first + P) read with float4s (L1 hits: every warp reads the same
// 256 bytes of each).
template <int P>
__device__ __forceinline__ void head_norm64_pack(float (&x)[P], int first, const float* w, const float* b, float eps) {
  constexpr int kLanes = kSplit64Dim / P;
  float sum = 0.0f;
#pragma unroll
  for (int e = 0; e < P; ++e) sum += x[e];
  const float mean = group_sum<kLanes>(sum) * (1.0f / kSplit64Dim);
  float squares = 0.0f;
#pragma unroll
  for (int e = 0; e < P; ++e) {
    const float d = x[e] - mean;
    squares += d * d;
  }
  const float inv_std = 1.0f / sqrtf(group_sum<kLanes>(squares) * (1.0f / kSplit64Dim) + eps);
#pragma unroll
  for (int e = 0; e < P; ++e) x[e] = (x[e] - mean) * inv_std;
  if (w) {
    float wv[P];
    load_floats<P>(w + first, wv);
#pragma unroll
    for (int e = 0; e < P; ++e) x[e] *= wv[e];
  }
  if (b) {
    float bv[P];
    load_floats<P>(b + first, bv);
#pragma unroll
    for (int e = 0; e < P; ++e) x[e] += bv[e];
  }
}

// Half-split RoPE of a pack. c, s: the angles of its P elements;
// first_quarter: the pack lies in elements [0, 16) or [32, 48), whose
// partners are 16 further on (x cos - partner sin), else 16 back
// (x cos + partner sin).
template <int P>
__device__ __forceinline__ void rope_half_split_pack(float (&x)[P], const float (&c)[P], const float (&s)[P],
                                                     bool first_quarter) {
  constexpr int kPartnerLane = 16 / P;  // lane distance of 16 elements
  float partner[P];
#pragma unroll
  for (int e = 0; e < P; ++e) partner[e] = __shfl_xor_sync(0xffffffffu, x[e], kPartnerLane);
#pragma unroll
  for (int e = 0; e < P; ++e)
    x[e] = first_quarter ? x[e] * c[e] - partner[e] * s[e] : x[e] * c[e] + partner[e] * s[e];
}

// Interleaved RoPE of a pack: angle m of c, s rotates elements (2m, 2m + 1).
template <int P>
__device__ __forceinline__ void rope_interleaved_pack(float (&x)[P], const float (&c)[P], const float (&s)[P]) {
#pragma unroll
  for (int m = 0; m < P / 2; ++m) {
    const float x0 = x[2 * m], x1 = x[2 * m + 1];
    x[2 * m] = x0 * c[m] - x1 * s[m];
    x[2 * m + 1] = x0 * s[m] + x1 * c[m];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 4) split_qkv64_pack_kernel(SplitQkv a) {
  constexpr int P = kPack<T>;
  constexpr int kLanes = kSplit64Dim / P;  // lanes per head vector
  constexpr int kItemsPerWarp = kSplit64ItemsPerWarp<T>;
  const int lane = threadIdx.x % 32;
  const int first = (lane % kLanes) * P;  // this lane's first element of its head vector, in [0, 64)
  const int64_t C = int64_t{a.heads} * kSplit64Dim;
  const int64_t items = a.tokens * a.heads;  // (token, head) pairs, token-major like qkv's rows
  const T* qkv = static_cast<const T*>(a.qkv);
  T* const q_out = static_cast<T*>(a.q);
  T* const k_out = static_cast<T*>(a.k);
  T* const v_out = static_cast<T*>(a.v);

  // This lane's first angle in a table row of 32. Half-split: element i of
  // half h (i in [0, 32)) uses angle 16 h + i % 16, so the pack's P angles are
  // consecutive; interleaved: its P / 2 pairs use angles first / 2, ...
  const bool half_split = a.rope == SplitQkv::Rope::HalfSplit;
  const int angle0 = half_split ? (first / 32) * 16 + first % 16 : first / 2;
  const bool first_quarter = first % 32 < 16;

  const int64_t stride = int64_t{gridDim.x} * (blockDim.x / 32) * kItemsPerWarp;
  for (int64_t base = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32 * kItemsPerWarp; base < items;
       base += stride) {  // uniform per warp: the shuffles see all 32 lanes
    const int64_t item = base + lane / kLanes;
    const bool in_range = item < items;
    // A group past the last item redoes the last one without storing it, so
    // that its lanes still take part in the shuffles.
    const int64_t it = in_range ? item : items - 1;
    const int64_t t = it / a.heads;
    const int64_t col = (it % a.heads) * kSplit64Dim + first;  // in [0, C)
    const T* row = qkv + t * 3 * C;  // [q | k | v] of token t
    float q[P], k[P];
    load_pack(row + col, q);
    load_pack(row + C + col, k);
    const uint4 v = *reinterpret_cast<const uint4*>(row + 2 * C + col);  // v is copied bit for bit
    float c[P], s[P];  // this pack's angles (the first P / 2 when interleaved)
    if (a.rope != SplitQkv::Rope::None) {
      const int64_t table_row = (t % a.rope_rows) * (kSplit64Dim / 2) + angle0;
      if (half_split) {
        load_floats<P>(a.cos + table_row, c);
        load_floats<P>(a.sin + table_row, s);
      } else {
        load_floats<P / 2>(a.cos + table_row, c);
        load_floats<P / 2>(a.sin + table_row, s);
      }
    }
    if (a.norm) {
      head_norm64_pack(q, first, a.q_weight, a.q_bias, a.eps);
      head_norm64_pack(k, first, a.k_weight, a.k_bias, a.eps);
    }
    if (a.rope == SplitQkv::Rope::HalfSplit) {
      rope_half_split_pack(q, c, s, first_quarter);
      rope_half_split_pack(k, c, s, first_quarter);
    } else if (a.rope == SplitQkv::Rope::Interleaved) {
      rope_interleaved_pack(q, c, s);
      rope_interleaved_pack(k, c, s);
    }
    if (in_range) {
      store_pack(q_out + t * C + col, q);
      store_pack(k_out + t * C + col, k);
      *reinterpret_cast<uint4*>(v_out + t * C + col) = v;
    }
  }
}

}  // namespace

void split_qkv(const SplitQkv& a, cudaStream_t stream) {
  if (a.tokens == 0) return;
  const int64_t C = int64_t{a.heads} * a.head_dim;
  const int64_t esize = static_cast<int64_t>(dtype_size(a.dtype));
  // Head dim 64 (the encoder's plain split too): one pass, one launch, in
  // 16-byte packs, when every pointer the kernel reads with them is aligned
  // (C = 64 heads is a whole number of packs); other views (never the
  // model's) take the generic kernel below.
  const bool packs_aligned = aligned16(a.qkv) && aligned16(a.q) && aligned16(a.k) && aligned16(a.v) &&
                             aligned16(a.q_weight) && aligned16(a.q_bias) && aligned16(a.k_weight) &&
                             aligned16(a.k_bias) && aligned16(a.cos) && aligned16(a.sin);  // null: aligned
  const bool float_type = a.dtype == DType::BF16 || a.dtype == DType::F32;
  if (a.head_dim == kSplit64Dim && packs_aligned && float_type) {
    dispatch_float(a.dtype, "split_qkv", [&](auto tag) {
      using T = decltype(tag);
      constexpr int64_t kItemsPerBlock = kThreads / 32 * kSplit64ItemsPerWarp<T>;
      const unsigned grid = static_cast<unsigned>(
          std::min<int64_t>((a.tokens * a.heads + kItemsPerBlock - 1) / kItemsPerBlock, int64_t{1} << 20));
      split_qkv64_pack_kernel<T><<<grid, kThreads, 0, stream>>>(a);
    });
    LB_CUDA_CHECK_LAUNCH();
    return;
  }
  if (!a.norm && a.rope == SplitQkv::Rope::None) {  // a plain split: three strided copies
    void* outs[3] = {a.q, a.k, a.v};
    for (int s = 0; s < 3; ++s)
      copy_2d(outs[s], C * esize, static_cast<const char*>(a.qkv) + s * C * esize, 3 * C * esize, C * esize, a.tokens,
              stream);
    return;
  }
  if (C > kSplitQkvMaxChannels) fail_kernel("split_qkv", "more channels than kSplitQkvMaxChannels with qk-norm or RoPE");
  const size_t shared = static_cast<size_t>(2 * C) * sizeof(float);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(a.tokens, int64_t{1} << 20));
  dispatch_float(a.dtype, "split_qkv", [&](auto tag) {
    using T = decltype(tag);
    if (C % kPack<T> == 0 && aligned16(a.qkv) && aligned16(a.q) && aligned16(a.k) && aligned16(a.v)) {
      split_qkv_kernel<T, true><<<grid, kThreads, shared, stream>>>(a);
    } else {
      split_qkv_kernel<T, false><<<grid, kThreads, shared, stream>>>(a);
    }
  });
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace lingbot::cuda::kernels
