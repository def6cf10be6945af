// LayerNorm over token rows.
//
// Statistics are float32, two passes like the CPU reference (mean, then the
// mean of squared deviations; no E[x^2] - mean^2 cancellation), and
// 1 / sqrtf(var + eps) with IEEE sqrt and division.
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

namespace lingbot::cuda::kernels {

namespace {


// ---- LayerNorm: one warp per row ------------------------------------------
// A row (1024 bfloat16 = 2 KB in the aggregator) is read three times: from
// DRAM for the mean, then from L1/L2 for the variance and the output. kVec:
// cols is a multiple of 8 and x, out are 16-byte aligned, so every row starts
// aligned and moves in groups of 8 elements (16-byte loads and stores). The
// input and output types may differ (a float32 residual stream normalised
// into a bfloat16 GEMM input). out may be x (same type): a lane writes only
// the groups it alone reads in the last pass, after the warp-wide reductions.
// 4 rows per block: one frame's 978 rows make 245 blocks, enough to spread
// over all SMs of an H200 (132).
constexpr int kLayerNormThreads = 128;
constexpr int kRowsPerBlock = kLayerNormThreads / 32;

template <typename TI, typename TO, bool kVec>
__global__ void layer_norm_kernel(const TI* x, TO* out, const float* w, const float* b, int64_t rows, int64_t cols,
                                  float eps) {
  const int lane = threadIdx.x % 32;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32; row < rows;
       row += int64_t{gridDim.x} * kRowsPerBlock) {  // uniform per warp: the shuffles see all 32 lanes
    const TI* xr = x + row * cols;
    TO* yr = out + row * cols;

    float sum = 0.0f;
    if constexpr (kVec) {
      for (int64_t j = lane; j < cols / 8; j += 32) {
        float v[8];
        load8(xr + j * 8, v);
#pragma unroll
        for (int e = 0; e < 8; ++e) sum += v[e];
      }
    } else {
      for (int64_t i = lane; i < cols; i += 32) sum += to_float(xr[i]);
    }
    const float mean = warp_sum(sum) * inv_cols;

    float squares = 0.0f;
    if constexpr (kVec) {
      for (int64_t j = lane; j < cols / 8; j += 32) {
        float v[8];
        load8(xr + j * 8, v);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float d = v[e] - mean;
          squares += d * d;
        }
      }
    } else {
      for (int64_t i = lane; i < cols; i += 32) {
        const float d = to_float(xr[i]) - mean;
        squares += d * d;
      }
    }
    const float inv_std = 1.0f / sqrtf(warp_sum(squares) * inv_cols + eps);

    if constexpr (kVec) {
      for (int64_t j = lane; j < cols / 8; j += 32) {
        float v[8];
        load8(xr + j * 8, v);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int64_t c = j * 8 + e;
          float o = (v[e] - mean) * inv_std;
          if (w) o *= w[c];
          if (b) o += b[c];
          v[e] = o;
        }
        store8(yr + j * 8, v);
      }
    } else {
      for (int64_t c = lane; c < cols; c += 32) {
        float o = (to_float(xr[c]) - mean) * inv_std;
        if (w) o *= w[c];
        if (b) o += b[c];
        yr[c] = from_float<TO>(o);
      }
    }
  }
}

// ---- LayerNorm with the row in registers ----------------------------------
// For rows of at most 32 x kGroups x 8 columns (aligned, cols % 8 == 0: the
// aggregator's 1024, the camera head's 2048): lane l owns the groups of 8
// columns [8 (l + 32 g), +8), g < kGroups, loads them once, and the three
// passes above run on registers. Same arithmetic as layer_norm_kernel
// (float32, two-pass variance, then * w, + b).
//
// One frame (978 x 1024, float32 in, bf16 out: 4 MB read, 2 MB written) is
// a single wave of 978 warps over 132 SMs, so the kernel lasts as long as one
// warp's chain load -> reduce -> reduce -> store. The chain is kept short:
// - all of a lane's row loads are issued before the first is used, so a
//   frame has its whole 4 MB in flight at once (~30 KB per SM);
// - weight and bias move in float4s (w and b: 16-byte aligned, checked on
//   the host). With kGroups <= 4 the lane's slice of them (kGroups x 64
//   bytes) is loaded once per warp, before the row loop: it does not depend
//   on the row and its latency hides behind the row's. Read as scalars in
//   the store loop instead, after the reductions, they cannot move above
//   the previous group's store (out might alias w), and every warp would end
//   with kGroups dependent L2 round trips, several times the ~2 us that
//   6 MB need at the H200's bandwidth. The price: ~128 registers, 16 resident warps per SM (a frame needs 7.4; the
//   7824-row scale phase keeps 16 x 2 KB of bf16 rows in flight per SM).
// - kGroups == 8 (2048 columns; the DPT head's 7776-row passes, many waves)
//   keeps w and b out of registers: 128 more per lane would halve the
//   resident warps that hide those passes' latency. It loads each group's
//   float4s in the store loop; __restrict__ (w and b are never written, and
//   never alias out) lets the compiler issue them ahead of earlier stores.
template <typename TI, typename TO, int kGroups>
__global__ void layer_norm_cached_kernel(const TI* x, TO* out, const float* __restrict__ w,
                                         const float* __restrict__ b, int64_t rows, int64_t cols, float eps) {
  constexpr bool kAffineInRegisters = kGroups <= 4;
  constexpr int kAffineGroups = kAffineInRegisters ? kGroups : 1;
  const int lane = threadIdx.x % 32;
  const int64_t groups = cols / 8;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  float wv[kAffineGroups][8], bv[kAffineGroups][8];  // kAffineInRegisters: w, b of this lane's groups
  if constexpr (kAffineInRegisters) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int64_t j = lane + 32 * g;
      if (j < groups) {
        if (w) load_floats<8>(w + j * 8, wv[g]);
        if (b) load_floats<8>(b + j * 8, bv[g]);
      }
    }
  }

  for (int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32; row < rows;
       row += int64_t{gridDim.x} * kRowsPerBlock) {  // uniform per warp: the shuffles see all 32 lanes
    const TI* xr = x + row * cols;
    TO* yr = out + row * cols;
    float v[kGroups][8];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {  // every load before any use: kGroups requests in flight per lane
      const int64_t j = lane + 32 * g;
      if (j < groups) load8(xr + j * 8, v[g]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if (lane + 32 * g < groups) {
#pragma unroll
        for (int e = 0; e < 8; ++e) sum += v[g][e];
      }
    }
    const float mean = warp_sum(sum) * inv_cols;
    float squares = 0.0f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if (lane + 32 * g < groups) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float d = v[g][e] - mean;
          squares += d * d;
        }
      }
    }
    const float inv_std = 1.0f / sqrtf(warp_sum(squares) * inv_cols + eps);
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int64_t j = lane + 32 * g;
      if (j < groups) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[g][e] = (v[g][e] - mean) * inv_std;
        if (w) {
          float wg[8];
          if constexpr (kAffineInRegisters) {
#pragma unroll
            for (int e = 0; e < 8; ++e) wg[e] = wv[g][e];
          } else {
            load_floats<8>(w + j * 8, wg);
          }
#pragma unroll
          for (int e = 0; e < 8; ++e) v[g][e] *= wg[e];
        }
        if (b) {
          float bg[8];
          if constexpr (kAffineInRegisters) {
#pragma unroll
            for (int e = 0; e < 8; ++e) bg[e] = bv[g][e];
          } else {
            load_floats<8>(b + j * 8, bg);
          }
#pragma unroll
          for (int e = 0; e < 8; ++e) v[g][e] += bg[e];
        }
        store8(yr + j * 8, v[g]);
      }
    }
  }
}

}  // namespace

void layer_norm(const void* x, DType x_type, void* out, DType out_type, const float* w, const float* b, int64_t rows,
                int64_t cols, float eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, 1, 1 << 20));
  const bool vec = cols % 8 == 0 && aligned16(x) && aligned16(out);
  const bool affine_vec = aligned16(w) && aligned16(b);  // float4 weights in the cached kernel; null: aligned
  dispatch_float(x_type, "layer_norm", [&](auto in_tag) {
    dispatch_float(out_type, "layer_norm", [&](auto out_tag) {
      using TI = decltype(in_tag);
      using TO = decltype(out_tag);
      const TI* px = static_cast<const TI*>(x);
      TO* po = static_cast<TO*>(out);
      if (vec && affine_vec && cols <= 32 * 4 * 8) {
        layer_norm_cached_kernel<TI, TO, 4><<<grid, kLayerNormThreads, 0, stream>>>(px, po, w, b, rows, cols, eps);
      } else if (vec && affine_vec && cols <= 32 * 8 * 8) {
        layer_norm_cached_kernel<TI, TO, 8><<<grid, kLayerNormThreads, 0, stream>>>(px, po, w, b, rows, cols, eps);
      } else if (vec) {
        layer_norm_kernel<TI, TO, true><<<grid, kLayerNormThreads, 0, stream>>>(px, po, w, b, rows, cols, eps);
      } else {
        layer_norm_kernel<TI, TO, false><<<grid, kLayerNormThreads, 0, stream>>>(px, po, w, b, rows, cols, eps);
      }
    });
  });
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace lingbot::cuda::kernels
