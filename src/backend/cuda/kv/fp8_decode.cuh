// e4m3 codes -> bfloat16 values, on the device (CUDA sources only): the
// arithmetic every reader of the fp8 KV cache shares, so that the read-back
// to staging pages (kv_fp8.cu) and the attention kernel that dequantises its
// key tiles in shared memory (attention_wgmma_ws.cu) give the same bits.
//
// The value of a code times its slot's scale, rounded once to bfloat16:
//   bf16_rn(from_e4m3(code) * scale)   (kv/fp8_e4m3.h's decoder)
//
// e4m3 -> f16 is a bit move: sign to bit 15, exponent and mantissa to bits
// 7-13, which is the code's value times 2^-8 (normals and subnormals alike,
// and the codes 0x7f / 0xff decode to +-480 as from_e4m3 does), so the 2^8
// is folded into the scale. f16 -> f32 is exact and (x * 2^8) * scale rounds
// like x * (2^8 * scale), so the result is from_e4m3(code) * scale bit for
// bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace lingbot::cuda::fp8 {

// The 2^8 that e4m3x4_to_f16x4 leaves out, to multiply into the scale.
constexpr float kF16Bias = 256.f;

// Four codes (byte i of w is code i) -> four f16 values times 2^-8, two per
// word, code 0 in the low half of lo.
__device__ __forceinline__ void e4m3x4_to_f16x4(uint32_t w, uint32_t& lo, uint32_t& hi) {
  lo = ((w & 0x7fu) << 7) | ((w & 0x80u) << 8) | ((w & 0x7f00u) << 15) | ((w & 0x8000u) << 16);
  hi = ((w & 0x7f0000u) >> 9) | ((w & 0x800000u) >> 8) | ((w & 0x7f000000u) >> 1) | (w & 0x80000000u);
}

// Two f16 values (from e4m3x4_to_f16x4) times scale (with kF16Bias folded
// in) -> bf16x2, rounded to nearest even.
__device__ __forceinline__ uint32_t scaled_bf16x2(uint32_t f16x2, float scale) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&f16x2));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// 16 codes (one 16-byte load) and their scale -> 16 bfloat16 values, the
// first 8 in lo, the rest in hi (16 bytes each).
__device__ __forceinline__ void e4m3x16_to_bf16x16(const uint4& w, float scale, uint4& lo, uint4& hi) {
  const float s = scale * kF16Bias;
  uint32_t h[8];
  e4m3x4_to_f16x4(w.x, h[0], h[1]);
  e4m3x4_to_f16x4(w.y, h[2], h[3]);
  e4m3x4_to_f16x4(w.z, h[4], h[5]);
  e4m3x4_to_f16x4(w.w, h[6], h[7]);
  lo = make_uint4(scaled_bf16x2(h[0], s), scaled_bf16x2(h[1], s), scaled_bf16x2(h[2], s), scaled_bf16x2(h[3], s));
  hi = make_uint4(scaled_bf16x2(h[4], s), scaled_bf16x2(h[5], s), scaled_bf16x2(h[6], s), scaled_bf16x2(h[7], s));
}

}  // namespace lingbot::cuda::fp8
