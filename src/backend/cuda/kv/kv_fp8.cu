#include "backend/cuda/kv/kv_fp8.h"
#include "backend/cuda/kv/kv_append.h"
#include "backend/cuda/kv/fp8_decode.cuh"

#include "backend/cuda/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

namespace lingbot::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerCta = kThreads / 32;
constexpr int kBlocksPerSm = 2;
constexpr float kE4m3Max = 448.f;

// kv/fp8_e4m3.h's f32_to_e4m3 with device intrinsics, the same steps: round
// to nearest even, saturate to +-448, NaN to 0x7f.
__device__ __forceinline__ uint8_t to_e4m3(float x) {
  const uint32_t bits = __float_as_uint(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  const float a = __uint_as_float(abs_bits);
  if (a >= kE4m3Max) return static_cast<uint8_t>(sign | 0x7eu);
  if (a < 0.015625f) return static_cast<uint8_t>(sign | static_cast<uint32_t>(rintf(a * 512.f)));
  uint32_t code = (((abs_bits >> 23) - 120u) << 3) | ((abs_bits >> 20) & 0x7u);  // exponent - 127 + 7
  const uint32_t rest = abs_bits & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;
  if (code > 0x7eu) code = 0x7eu;
  return static_cast<uint8_t>(sign | code);
}

__device__ __forceinline__ float from_e4m3(uint32_t code) {  // stores never hold the NaN codes
  const uint32_t exp = (code >> 3) & 0xfu, man = code & 0x7u;
  const float magnitude = exp == 0 ? static_cast<float>(man) * (1.f / 512.f) : __uint_as_float(((exp + 120u) << 23) | (man << 20));
  return (code & 0x80u) ? -magnitude : magnitude;
}

__device__ __forceinline__ float load(const __nv_bfloat16* p, int i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load(const float* p, int i) { return p[i]; }

// One warp per (move, K or V, head): the slice's head_dim values.
template <typename In>
__global__ void __launch_bounds__(kThreads)
    kv_append_fp8_kernel(const KvTableHeader* table, int block, const In* k, const In* v, int num_heads, int head_dim) {
  const KvTableHeader& t = *table;
  const int lane = threadIdx.x % 32;
  const int64_t items = int64_t{t.num_moves} * 2 * num_heads;
  const int64_t block_offset = int64_t{block} * t.block_stride;
  const int64_t row_elems = int64_t{num_heads} * head_dim;
  for (int64_t item = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; item < items;
       item += int64_t{gridDim.x} * kWarpsPerCta) {
    const int64_t move = item / (2 * num_heads);
    const int rest = static_cast<int>(item - move * 2 * num_heads);
    const bool is_v = rest >= num_heads;
    const int head = is_v ? rest - num_heads : rest;
    const DeviceRowMove m = t.moves[move];
    uint8_t* dst = reinterpret_cast<uint8_t*>(m.dst + block_offset + (is_v ? t.v_offset : 0)) + head * head_dim;
    float* dst_scale =
        reinterpret_cast<float*>(m.dst_scales + block_offset + (is_v ? t.scale_v_offset : 0)) + head;
    if (m.src != nullptr) {  // a slot of the pool: codes and scale as stored
      const uint8_t* src =
          reinterpret_cast<const uint8_t*>(m.src + block_offset + (is_v ? t.v_offset : 0)) + head * head_dim;
      for (int c = lane; c < head_dim; c += 32) dst[c] = src[c];
      if (lane == 0) {
        *dst_scale =
            *(reinterpret_cast<const float*>(m.src_scales + block_offset + (is_v ? t.scale_v_offset : 0)) + head);
      }
      continue;
    }
    const In* src = (is_v ? v : k) + m.src_row * row_elems + int64_t{head} * head_dim;
    float amax = 0.f;
    for (int c = lane; c < head_dim; c += 32) amax = fmaxf(amax, fabsf(load(src, c)));
    for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    const float scale = amax > 0.f ? __fdiv_rn(amax, kE4m3Max) : 1.f;
    for (int c = lane; c < head_dim; c += 32) dst[c] = to_e4m3(__fdiv_rn(load(src, c), scale));
    if (lane == 0) *dst_scale = scale;
  }
}

// One warp per (visible page, K or V, slot, head).
__global__ void __launch_bounds__(kThreads)
    kv_dequantise_kernel(const KvTableHeader* table, int block, const KvTableHeader* staging, Fp8PageShape shape) {
  const KvTableHeader& t = *table;
  const KvTableHeader& out_table = *staging;
  const int lane = threadIdx.x % 32;
  const int64_t per_page = 2 * int64_t{shape.page_size} * shape.num_heads;
  const int64_t items = int64_t{t.num_pages} * per_page;
  const int64_t block_offset = int64_t{block} * t.block_stride;
  const int64_t row_elems = shape.code_row_bytes();
  for (int64_t item = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; item < items;
       item += int64_t{gridDim.x} * kWarpsPerCta) {
    const int64_t page = item / per_page;
    int64_t rest = item - page * per_page;
    const int kv = static_cast<int>(rest / (int64_t{shape.page_size} * shape.num_heads));
    rest -= int64_t{kv} * shape.page_size * shape.num_heads;
    const int64_t slot = rest / shape.num_heads;
    const int head = static_cast<int>(rest - slot * shape.num_heads);
    const char* base = t.page_ptrs[page] + block_offset;
    const uint8_t* codes =
        reinterpret_cast<const uint8_t*>(base) + (kv * int64_t{shape.page_size} + slot) * row_elems + head * shape.head_dim;
    const float scale = *(reinterpret_cast<const float*>(base + shape.codes_bytes() + kv * shape.scales_v_offset()) +
                          slot * shape.num_heads + head);
    __nv_bfloat16* out = reinterpret_cast<__nv_bfloat16*>(out_table.page_ptrs[page]) +
                         (kv * int64_t{shape.page_size} + slot) * row_elems + head * shape.head_dim;
    if (shape.head_dim == 64) {  // the model's heads: two codes in, two bf16 out per lane (aligned: 64-byte slices)
      const uint32_t pair = reinterpret_cast<const uint16_t*>(codes)[lane];
      reinterpret_cast<__nv_bfloat162*>(out)[lane] =
          __floats2bfloat162_rn(from_e4m3(pair & 0xffu) * scale, from_e4m3(pair >> 8) * scale);
      continue;
    }
    for (int c = lane; c < shape.head_dim; c += 32) out[c] = __float2bfloat16_rn(from_e4m3(codes[c]) * scale);
  }
}


// The same read-back, 16 codes per thread: one 16-byte load of codes, two
// 16-byte stores of bfloat16 (fp8_decode.cuh's arithmetic). A page's codes
// and scales are both laid out [kv][slot][head] (codes with head_dim more
// per entry), so code byte i's scale is scales[i / head_dim] and its
// bfloat16 lands at element i of the staging page: no per-item
// decomposition into page, slot and head. Needs head_dim % 16 == 0 (a load
// never straddles two heads) and 16-byte aligned pages
// (launch_kv_dequantise checks both).
__global__ void __launch_bounds__(kThreads)
    kv_dequantise_vector_kernel(const KvTableHeader* table, int block, const KvTableHeader* staging,
                                Fp8PageShape shape) {
  const KvTableHeader& t = *table;
  const KvTableHeader& out_table = *staging;
  const int chunks = static_cast<int>(shape.codes_bytes() / 16);  // per page
  const int chunks_per_head = shape.head_dim / 16;
  const int64_t block_offset = int64_t{block} * t.block_stride;
  for (int page = blockIdx.y; page < t.num_pages; page += gridDim.y) {
    const char* base = t.page_ptrs[page] + block_offset;
    const uint4* codes = reinterpret_cast<const uint4*>(base);
    const float* scales = reinterpret_cast<const float*>(base + shape.codes_bytes());
    uint4* out = reinterpret_cast<uint4*>(out_table.page_ptrs[page]);
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
      fp8::e4m3x16_to_bf16x16(__ldg(codes + c), __ldg(scales + c / chunks_per_head), out[2 * c], out[2 * c + 1]);
    }
  }
}


}  // namespace

void launch_kv_append_fp8(const KvTableHeader* table, int block, const void* k, const void* v, bool input_is_bf16,
                          const Fp8PageShape& shape, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(current_device_sm_count() * kBlocksPerSm);
  if (input_is_bf16) {
    kv_append_fp8_kernel<<<grid, kThreads, 0, stream>>>(table, block, static_cast<const __nv_bfloat16*>(k),
                                                        static_cast<const __nv_bfloat16*>(v), shape.num_heads,
                                                        shape.head_dim);
  } else {
    kv_append_fp8_kernel<<<grid, kThreads, 0, stream>>>(table, block, static_cast<const float*>(k),
                                                        static_cast<const float*>(v), shape.num_heads, shape.head_dim);
  }
  LB_CUDA_CHECK_LAUNCH();
}

void launch_kv_dequantise(const KvTableHeader* table, int block, const KvTableHeader* staging,
                          const Fp8PageShape& shape, cudaStream_t stream) {
  if (shape.head_dim % 16 == 0 && shape.page_bytes() % 16 == 0) {
    // One page's chunks across x (at most one chunk per thread), pages across
    // y: a fixed grid (it is recorded in CUDA graphs) whose CTAs each loop
    // over every gridDim.y-th visible page.
    const int64_t chunks = shape.codes_bytes() / 16;
    const unsigned x = static_cast<unsigned>(std::min<int64_t>((chunks + kThreads - 1) / kThreads, 1024));
    const unsigned y = static_cast<unsigned>(std::max(1, current_device_sm_count() * kBlocksPerSm * 8 / static_cast<int>(x)));
    kv_dequantise_vector_kernel<<<dim3(x, std::min(y, 64u)), kThreads, 0, stream>>>(table, block, staging, shape);
  } else {
    const unsigned grid = static_cast<unsigned>(current_device_sm_count() * kBlocksPerSm * 2);
    kv_dequantise_kernel<<<grid, kThreads, 0, stream>>>(table, block, staging, shape);
  }
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace lingbot::cuda
