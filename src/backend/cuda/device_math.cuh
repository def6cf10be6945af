// Device-side building blocks shared by the kernels: element types, 16-byte
// packs, warp reductions, launch geometry and the host-side dtype dispatch.
//
// Every kernel computes in float32 and rounds once when it stores (bfloat16
// and float16 round to nearest even, like the host conversions in
// core/half.h and PyTorch's .to()).
#pragma once

#include "backend/cuda/cuda_check.h"
#include "core/dtype.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace lingbot::cuda {

// ---- element conversions --------------------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// ---- 16-byte packs --------------------------------------------------------
// kPack<T> consecutive elements moved with one 128-bit load or store. The
// caller guarantees 16-byte alignment (checked on the host, see aligned16).

template <typename T> inline constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <typename T>
struct alignas(16) Pack {
  T v[kPack<T>];
};

template <typename T>
__device__ __forceinline__ void load_pack(const T* p, float (&out)[kPack<T>]) {
  Pack<T> pk;
  *reinterpret_cast<uint4*>(&pk) = *reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < kPack<T>; ++i) out[i] = to_float(pk.v[i]);
}

template <typename T>
__device__ __forceinline__ void store_pack(T* p, const float (&in)[kPack<T>]) {
  Pack<T> pk;
#pragma unroll
  for (int i = 0; i < kPack<T>; ++i) pk.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&pk);
}

// 8 consecutive elements as float32: one 16-byte pack of 16-bit values, two
// of float32 (layer_norm's unit, whatever its input and output types).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&out)[8]) {
  constexpr int P = kPack<T>;
#pragma unroll
  for (int h = 0; h < 8 / P; ++h) {
    float part[P];
    load_pack(p + h * P, part);
#pragma unroll
    for (int e = 0; e < P; ++e) out[h * P + e] = part[e];
  }
}

template <typename T>
__device__ __forceinline__ void store8(T* p, const float (&in)[8]) {
  constexpr int P = kPack<T>;
#pragma unroll
  for (int h = 0; h < 8 / P; ++h) {
    float part[P];
#pragma unroll
    for (int e = 0; e < P; ++e) part[e] = in[h * P + e];
    store_pack(p + h * P, part);
  }
}

// N consecutive float32 values into out[0, N): 16-byte loads when N is a
// multiple of 4 (p 16-byte aligned), else 8-byte ones (N even, p 8-byte
// aligned). out may be longer than N.
template <int N, int M>
__device__ __forceinline__ void load_floats(const float* p, float (&out)[M]) {
  static_assert(N <= M && N % 2 == 0, "whole float2s");
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 q = reinterpret_cast<const float4*>(p)[i];
      out[4 * i] = q.x;
      out[4 * i + 1] = q.y;
      out[4 * i + 2] = q.z;
      out[4 * i + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float2 q = reinterpret_cast<const float2*>(p)[i];
      out[2 * i] = q.x;
      out[2 * i + 1] = q.y;
    }
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// ---- reductions -----------------------------------------------------------

// Sum over each group of kLanes consecutive lanes (a power of two <= 32);
// every lane of the warp takes part and gets its group's sum.
template <int kLanes>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_sum(float v) { return group_sum<32>(v); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// ---- activations (the same float formulas as backend/cpu/cpu_layers.cpp) --

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float relu(float x) { return x > 0.0f ? x : 0.0f; }

// ---- launch geometry ------------------------------------------------------

constexpr int kThreads = 256;

// Grid-stride kernels launch at most this many blocks: ~30 per SM of an H200
// keep every SM busy, while one block per handful of elements (the DPT head's
// full-resolution passes: ~100,000 blocks) made block scheduling the limit.
inline constexpr int64_t kMaxGridStrideBlocks = 4096;

// Blocks for a grid-stride loop over `items` work items of one thread each.
// Capped: the loops stride over the rest.
inline unsigned grid_for(int64_t items, int threads = kThreads) {
  const int64_t blocks = (items + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxGridStrideBlocks));
}

// A grid for work laid out as rows of `cols` contiguous elements, where
// something per row (a bias, a source row) is worked out once: blockIdx.y
// strides over rows, blockIdx.x and threadIdx.x over the columns, with no
// 64-bit division or modulo per element.
inline dim3 rows_grid(int64_t rows, int64_t cols, int threads = kThreads) {
  const int64_t gx = std::clamp<int64_t>((cols + threads - 1) / threads, 1, kMaxGridStrideBlocks);
  const int64_t gy = std::clamp<int64_t>(rows, 1, std::max<int64_t>(1, kMaxGridStrideBlocks / gx));
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
}

// ---- host-side dispatch on the element type --------------------------------
// f(T{}) with T the C++ type of `t`; only the types a kernel was written for.
// (No fmt here: see fail_kernel in cuda_check.h.)

template <typename F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::BF16: f(__nv_bfloat16{}); return;
    default: fail_kernel(op, "supports float32 and bfloat16 only");
  }
}

template <typename F>
void dispatch_float_or_half(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::BF16: f(__nv_bfloat16{}); return;
    case DType::F16: f(__half{}); return;
    default: fail_kernel(op, "supports float32, bfloat16 and float16 only");
  }
}

}  // namespace lingbot::cuda
