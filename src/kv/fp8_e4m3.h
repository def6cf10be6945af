// The fp8 KV cache's number format, stated once for every store (CPU and
// CUDA): OCP FP8 E4M3 ("e4m3fn", as torch.float8_e4m3fn and CUDA's
// __nv_fp8_e4m3) with one float32 scale per token row of one head.
//
// e4m3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, one NaN
// pattern per sign (S.1111.111); largest finite 448, smallest normal 2^-6,
// subnormals m * 2^-9. Encoding rounds to nearest, ties to even, and
// saturates to +-448 (CUDA's __NV_SATFINITE), so no stored value is NaN
// unless its input was.
//
// Scale: a head's slice of one token (head_dim values) is stored as
// codes = e4m3(x / s) with s = max|x| / 448 (s = 1 for an all-zero slice),
// and read back as e4m3_to_f32(code) * s. Why per token and head rather than
// per page and head: the value stored for a token then depends on that token
// alone, so the dense and the paged layouts hold bit-identical keys (their
// answers differ only by the order of the softmax sums), a page filled over
// several appends (the special-token stream) never needs its scale changed or
// its earlier tokens requantised, a slot copy moves a token with its scale,
// and one outlier token (special tokens are often large) cannot take the
// resolution of its page neighbours. The price: 4 bytes of scale per 64 fp8
// bytes (head_dim 64), 53% of bf16's memory instead of 50%.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace lingbot::kv {

inline constexpr float kE4m3Max = 448.f;

// The exact value of an e4m3 code (NaN for the two NaN codes).
inline float e4m3_to_f32(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exp = (code >> 3) & 0xfu;
  const uint32_t man = code & 0x7u;
  if (exp == 0xfu && man == 0x7u) return std::nanf("");
  float magnitude;
  if (exp == 0) {
    magnitude = static_cast<float>(man) * (1.f / 512.f);  // subnormal: m * 2^-9
  } else {
    const uint32_t bits = ((exp - 7u + 127u) << 23) | (man << 20);
    std::memcpy(&magnitude, &bits, 4);
  }
  uint32_t out;
  std::memcpy(&out, &magnitude, 4);
  out |= sign;
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

// Round to nearest even, saturating to +-448; NaN stays NaN (0x7f / 0xff).
inline uint8_t f32_to_e4m3(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  float a;
  std::memcpy(&a, &abs_bits, 4);
  if (a >= kE4m3Max) return static_cast<uint8_t>(sign | 0x7eu);  // saturate (also infinity)
  if (a < 0.015625f) {
    // Subnormal range: a multiple of 2^-9, rounded to nearest even by the
    // default rounding mode. 8 * 2^-9 = 2^-6 is code 0x08, the smallest normal.
    const auto m = static_cast<uint32_t>(std::nearbyint(a * 512.f));
    return static_cast<uint8_t>(sign | m);
  }
  // Normal: keep 3 of float32's 23 mantissa bits, ties to even; a carry out
  // of the mantissa moves to the exponent, which the addition does by itself.
  const uint32_t exp = (abs_bits >> 23) - 127u + 7u;  // 1 .. 15
  uint32_t code = (exp << 3) | ((abs_bits >> 20) & 0x7u);
  const uint32_t rest = abs_bits & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;
  if (code > 0x7eu) code = 0x7eu;  // 464 and 480 round past 448: saturate
  return static_cast<uint8_t>(sign | code);
}

// The scale of a slice whose largest magnitude is `amax`.
inline float e4m3_scale_for(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }

// codes[i] = e4m3(x[i] / s) for one slice of n values; returns s.
inline float quantise_e4m3(const float* x, int n, uint8_t* codes) {
  float amax = 0.f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float s = e4m3_scale_for(amax);
  for (int i = 0; i < n; ++i) codes[i] = f32_to_e4m3(x[i] / s);
  return s;
}

}  // namespace lingbot::kv
