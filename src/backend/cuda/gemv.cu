// Float32 matrix products with a handful of rows: the camera head's linear
// layers while streaming (one camera token per frame, 2,048 channels, 16
// weight matrices of 17-67 MB per iteration, 4 iterations per frame: about
// 3.4 GB of weights read per frame for a few MFLOP).
//
// They are bound by reading the weights once, so the kernel is shaped for
// memory-level parallelism rather than arithmetic: one warp per output
// column m streams row m of w (contiguous) with 16-byte loads, several in
// flight per lane, and multiplies it with every input row (the inputs are
// small and stay in L1/L2); a warp reduction finishes each dot product.
// Measured on the H200 (docs/PERF.md): 3.1-3.5 TB/s of weights at the
// camera head's shapes, and full float32 where cuBLASLt ran them on TF32
// tensor cores (upstream runs the camera head in float32 without TF32).
//
// Accumulation in float32, in another order than cuBLASLt's or the CPU
// backend's: the results agree to float32 rounding of the sums.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

#include <algorithm>
#include <type_traits>

namespace lingbot::cuda::kernels {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

__device__ __forceinline__ float4 load_streaming(const float4* p) {
  // Weights are read once per call: do not keep them in L1.
  float4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

// Each row's dot product, summed across the warp, plus the bias: lane 0
// writes out[r, col].
template <int kRows>
__device__ __forceinline__ void store_sums(const float (&acc)[kRows], int lane, int64_t col, int64_t m,
                                           const float* __restrict__ bias, float* __restrict__ out) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0) out[r * m + col] = sum + (bias != nullptr ? bias[col] : 0.f);
  }
}

// out[r, m] = sum_k x[r, k] w[m, k] + bias[m], r < kRows.
// kVec: k % 4 == 0 and x, w 16-byte aligned, so rows move as float4.
template <int kRows, bool kVec>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                float* __restrict__ out, int64_t k, int64_t m) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t col = int64_t{blockIdx.x} * kWarpsPerBlock + (threadIdx.x >> 5);
  if (col >= m) return;
  const float* wrow = w + col * k;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;

  if constexpr (kVec) {
    const int64_t k4 = k / 4;
    const auto* w4 = reinterpret_cast<const float4*>(wrow);
    const auto* x4 = reinterpret_cast<const float4*>(x);
    int64_t i = lane;
    for (; i + 32 * (kUnroll - 1) < k4; i += 32 * kUnroll) {
      float4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = load_streaming(w4 + i + 32 * u);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float4 xv = x4[r * k4 + i + 32 * u];
          acc[r] = fmaf(xv.x, wv[u].x, fmaf(xv.y, wv[u].y, fmaf(xv.z, wv[u].z, fmaf(xv.w, wv[u].w, acc[r]))));
        }
      }
    }
    for (; i < k4; i += 32) {
      const float4 wv = load_streaming(w4 + i);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float4 xv = x4[r * k4 + i];
        acc[r] = fmaf(xv.x, wv.x, fmaf(xv.y, wv.y, fmaf(xv.z, wv.z, fmaf(xv.w, wv.w, acc[r]))));
      }
    }
  } else {
    for (int64_t i = lane; i < k; i += 32) {
      const float wv = wrow[i];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = fmaf(x[r * k + i], wv, acc[r]);
    }
  }
  store_sums<kRows>(acc, lane, col, m, bias, out);
}

// The same products with the weights kept in bfloat16 (camera_head_weights
// bf16): each 16-byte load brings 8 weights, widened exactly to float32 (a
// bf16 is the high half of a float32), so the arithmetic is gemv_kernel's on
// the rounded weights; half the bytes to stream. kVec: k % 8 == 0, x and w
// 16-byte aligned.
__device__ __forceinline__ uint4 load_streaming_u4(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ float bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

template <int kRows, bool kVec>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_bf16w_kernel(const float* __restrict__ x, const uint16_t* __restrict__ w, const float* __restrict__ bias,
                      float* __restrict__ out, int64_t k, int64_t m) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t col = int64_t{blockIdx.x} * kWarpsPerBlock + (threadIdx.x >> 5);
  if (col >= m) return;
  const uint16_t* wrow = w + col * k;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
  if constexpr (kVec) {
    const int64_t k8 = k / 8;
    const auto* w8 = reinterpret_cast<const uint4*>(wrow);
    const auto* x4 = reinterpret_cast<const float4*>(x);
    for (int64_t i = lane; i < k8; i += 32 * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (i + 32 * u < k8) wv[u] = load_streaming_u4(w8 + i + 32 * u);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (i + 32 * u >= k8) break;
        const int64_t j = i + 32 * u;  // weights 8j .. 8j + 7
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float4 a = x4[r * (k / 4) + 2 * j], b = x4[r * (k / 4) + 2 * j + 1];
          float s = acc[r];
          s = fmaf(a.x, bf16_lo(wv[u].x), s);
          s = fmaf(a.y, bf16_hi(wv[u].x), s);
          s = fmaf(a.z, bf16_lo(wv[u].y), s);
          s = fmaf(a.w, bf16_hi(wv[u].y), s);
          s = fmaf(b.x, bf16_lo(wv[u].z), s);
          s = fmaf(b.y, bf16_hi(wv[u].z), s);
          s = fmaf(b.z, bf16_lo(wv[u].w), s);
          s = fmaf(b.w, bf16_hi(wv[u].w), s);
          acc[r] = s;
        }
      }
    }
  } else {
    for (int64_t i = lane; i < k; i += 32) {
      const float wv = __uint_as_float(static_cast<uint32_t>(wrow[i]) << 16);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = fmaf(x[r * k + i], wv, acc[r]);
    }
  }
  store_sums<kRows>(acc, lane, col, m, bias, out);
}

// One launch of rows <= kGemvMaxRows: float32 weights (gemv_kernel) or
// bfloat16 ones (gemv_bf16w_kernel).
template <int kRows, typename W>
void launch(const float* x, const W* w, const float* bias, float* out, int64_t k, int64_t m, bool vec,
            cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((m + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const auto kernel = [&](auto vec_tag) {
    constexpr bool kVec = decltype(vec_tag)::value;
    if constexpr (std::is_same_v<W, float>) {
      gemv_kernel<kRows, kVec><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, bias, out, k, m);
    } else {
      gemv_bf16w_kernel<kRows, kVec><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, bias, out, k, m);
    }
  };
  if (vec) {
    kernel(std::true_type{});
  } else {
    kernel(std::false_type{});
  }
  LB_CUDA_CHECK_LAUNCH();
}

// launch<rows> for a run-time rows in 1 .. kGemvMaxRows.
template <typename W>
void launch_rows(const char* op, const float* x, const W* w, const float* bias, float* out, int64_t rows, int64_t k,
                 int64_t m, bool vec, cudaStream_t stream) {
  switch (rows) {
    case 1: launch<1>(x, w, bias, out, k, m, vec, stream); break;
    case 2: launch<2>(x, w, bias, out, k, m, vec, stream); break;
    case 3: launch<3>(x, w, bias, out, k, m, vec, stream); break;
    case 4: launch<4>(x, w, bias, out, k, m, vec, stream); break;
    case 5: launch<5>(x, w, bias, out, k, m, vec, stream); break;
    case 6: launch<6>(x, w, bias, out, k, m, vec, stream); break;
    case 7: launch<7>(x, w, bias, out, k, m, vec, stream); break;
    case 8: launch<8>(x, w, bias, out, k, m, vec, stream); break;
    default: fail_kernel(op, "more rows than kGemvMaxRows");
  }
}

}  // namespace

void gemv_bf16_weights(const float* x, const void* w_bf16, const float* bias, float* out, int64_t rows, int64_t k,
                       int64_t m, cudaStream_t stream) {
  if (rows == 0 || m == 0) return;
  const auto* w = static_cast<const uint16_t*>(w_bf16);
  // Any number of rows, kGemvMaxRows at a time: each chunk streams the
  // weights once more (the callers have a handful of rows).
  for (int64_t r0 = 0; r0 < rows; r0 += kGemvMaxRows) {
    const int64_t n = std::min<int64_t>(kGemvMaxRows, rows - r0);
    const float* xr = x + r0 * k;
    float* outr = out + r0 * m;
    const bool vec = k % 8 == 0 && aligned16(xr) && aligned16(w);
    launch_rows("gemv_bf16_weights", xr, w, bias, outr, n, k, m, vec, stream);
  }
}

void gemv_f32(const float* x, const float* w, const float* bias, float* out, int64_t rows, int64_t k, int64_t m,
              cudaStream_t stream) {
  if (rows == 0 || m == 0) return;
  const bool vec = k % 4 == 0 && aligned16(x) && aligned16(w);
  launch_rows("gemv_f32", x, w, bias, out, rows, k, m, vec, stream);
}

}  // namespace lingbot::cuda::kernels
