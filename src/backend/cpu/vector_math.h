// Element-wise functions written so that a loop over them vectorises: no
// branches and no calls into libm, whose expf/erff are scalar. The CPU
// path's GELU evaluates erf on every MLP activation (4 M values per block at
// 378 x 504, 72 blocks per frame), where glibc's erff alone took longer than
// a fifth of the block's matrix products.
#pragma once

#include <bit>
#include <cstdint>

namespace lingbot::cpu {

// e^x, relative error below 2e-7 for x in [-87.3, 88] (inputs outside are
// clamped: e^x there is below the smallest normal float or near its
// largest). Range reduction x = n ln2 + r, |r| <= ln2 / 2 (ln2 split in a
// high and a low part, Cody-Waite), then a degree-7 Taylor polynomial for
// e^r and the exponent bits for 2^n.
inline float exp_vectorizable(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.0f ? 88.0f : x;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + kRoundMagic) - kRoundMagic;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 127]
  return p * std::bit_cast<float>(bits);
}

// erf(x): Abramowitz and Stegun 7.1.26 (the approximation PyTorch's
// vectorised CPU GELU uses), odd in x. Absolute error 1.5e-7 in exact
// arithmetic, below 6e-7 evaluated in float (1 - p t e^(-x^2) cancels near
// 0); GELU's x (1 + erf) / 2 keeps it below 3e-7 max(1, |x|).
inline float erf_vectorizable(float x) {
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - p * t * exp_vectorizable(-a * a);
  return x < 0.0f ? -y : y;
}

// GELU with the exact (erf) form, as torch.nn.GELU() by default.
inline float gelu_vectorizable(float x) { return 0.5f * x * (1.0f + erf_vectorizable(x * 0.70710678118654752440f)); }

}  // namespace lingbot::cpu
