// Scalar conversions between float32 and the 16-bit float formats.
//
// bfloat16 is the top half of a float32; float16 is IEEE binary16. Both
// conversions from float32 round to nearest even, like PyTorch's .to().
#pragma once

#include <cstdint>
#include <cstring>

namespace lingbot {

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;  // signed zero
    } else {        // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) { man <<= 1; --exp; }
      man &= 0x3ffu;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / nan
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;                 // nan
  if (abs >= 0x477ff000u) return sign | 0x7c00u;                // overflow -> inf
  if (abs < 0x38800000u) {                                      // subnormal or zero
    if (abs < 0x33000000u) return sign;
    const uint32_t e = abs >> 23;
    uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(e);  // value = mantissa24 * 2^(e-150); units of 2^-24
    const uint32_t half_bit = 1u << (shift - 1);
    uint32_t r = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    if (rem > half_bit || (rem == half_bit && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);  // round to nearest even
  return sign | static_cast<uint16_t>(r >> 13);
}

}  // namespace lingbot
