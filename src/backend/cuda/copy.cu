// Data movement: strided 2-D byte copies (copy_rows, concat_cols) and the
// token-matrix -> NCHW transpose of the DPT head.
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

#include <algorithm>

namespace lingbot::cuda::kernels {

namespace {

// dst[r * dst_pitch + u] = src[r * src_pitch + u] in units U (pitches in units).
template <typename U>
__global__ void copy_2d_kernel(U* dst, int64_t dst_pitch, const U* src, int64_t src_pitch, int64_t units_per_row,
                               int64_t height) {
  const int64_t n = units_per_row * height;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / units_per_row, u = i % units_per_row;
    dst[r * dst_pitch + u] = src[r * src_pitch + u];
  }
}

template <typename U>
void launch_copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes,
                    int64_t height, cudaStream_t stream) {
  constexpr int64_t s = sizeof(U);
  const int64_t units = width_bytes / s;
  copy_2d_kernel<U><<<grid_for(units * height), kThreads, 0, stream>>>(
      static_cast<U*>(dst), dst_pitch / s, static_cast<const U*>(src), src_pitch / s, units, height);
}

// Tiled transpose of each batch's [plane, channels] matrix into [channels, plane]:
// a 32 x 32 tile goes through shared memory so that both the reads (along
// channels) and the writes (along the plane) are coalesced. Block 32 x 8.
constexpr int kTile = 32;

template <typename T>
__global__ void tokens_to_nchw_kernel(const T* tokens, T* maps, int64_t plane, int64_t channels) {
  __shared__ T tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
  const int64_t b = blockIdx.z;
  const int64_t c0 = int64_t{blockIdx.x} * kTile;
  const T* src = tokens + b * plane * channels;
  T* dst = maps + b * plane * channels;
  // Tiles of positions stride over the plane (a full-resolution map has more than the grid's 65,535 rows of tiles).
  for (int64_t p0 = int64_t{blockIdx.y} * kTile; p0 < plane; p0 += int64_t{gridDim.y} * kTile) {
    for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
      const int64_t p = p0 + dy, c = c0 + threadIdx.x;
      if (p < plane && c < channels) tile[dy][threadIdx.x] = src[p * channels + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
      const int64_t c = c0 + dy, p = p0 + threadIdx.x;
      if (c < channels && p < plane) dst[c * plane + p] = tile[threadIdx.x][dy];
    }
    __syncthreads();  // the tile is read before the next one is written
  }
}

}  // namespace

void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes, int64_t height,
             cudaStream_t stream) {
  if (width_bytes == 0 || height == 0) return;
  // The widest unit that divides every address, pitch and the row length.
  const uint64_t bits = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) |
                        static_cast<uint64_t>(dst_pitch) | static_cast<uint64_t>(src_pitch) |
                        static_cast<uint64_t>(width_bytes);
  if ((bits & 15u) == 0) {
    launch_copy_2d<uint4>(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
  } else if ((bits & 7u) == 0) {
    launch_copy_2d<uint2>(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
  } else if ((bits & 3u) == 0) {
    launch_copy_2d<uint32_t>(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
  } else if ((bits & 1u) == 0) {
    launch_copy_2d<uint16_t>(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
  } else {
    launch_copy_2d<uint8_t>(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
  }
  LB_CUDA_CHECK_LAUNCH();
}

void tokens_to_nchw(const void* tokens, void* maps, DType dtype, int64_t batches, int64_t plane, int64_t channels,
                    cudaStream_t stream) {
  if (batches * plane * channels == 0) return;
  if (batches > 65535 || (channels + kTile - 1) / kTile > 65535)
    fail_kernel("tokens_to_nchw", "more than 65535 batches or 2 million channels");
  const int64_t position_tiles = std::min<int64_t>((plane + kTile - 1) / kTile, 65535);
  const dim3 grid(static_cast<unsigned>((channels + kTile - 1) / kTile), static_cast<unsigned>(position_tiles),
                  static_cast<unsigned>(batches));
  const dim3 block(kTile, 8);
  dispatch_float(dtype, "tokens_to_nchw", [&](auto tag) {
    using T = decltype(tag);
    tokens_to_nchw_kernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(tokens), static_cast<T*>(maps), plane,
                                                         channels);
  });
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace lingbot::cuda::kernels
