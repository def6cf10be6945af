// Pillow-compatible bicubic resizing of 8-bit RGB images.
//
// resize_bicubic(img, w, h) gives the same bytes as Pillow's
// img.resize((w, h), Image.Resampling.BICUBIC) on an "RGB" image (Pillow's
// libImaging/Resample.c, unchanged in behaviour from 9.x to 12.x):
//   * separable: a horizontal pass over only the rows the vertical pass will
//     read, rounded to 8 bits, then a vertical pass; a pass whose size does
//     not change is skipped, and an unchanged size is a plain copy;
//   * the cubic convolution kernel with a = -0.5, support 2 input pixels,
//     widened by the scale factor when shrinking (antialiasing);
//   * per-output weights computed in double, normalised to sum 1, then
//     stored as fixed point with 22 fractional bits; sums start at one half
//     (rounding) and are clipped to 0..255.
#pragma once

#include "image/image.h"

#include <cstdint>
#include <vector>

namespace lingbot::io {

RgbImage resize_bicubic(const RgbImage& image, int out_width, int out_height);

namespace detail {

// The weights of one axis: output sample i reads input samples
// first[i] .. first[i] + count[i] - 1 with weights[i * taps + j].
struct ResampleWeights {
  int taps = 0;  // row stride of `weights`: the most taps any output uses
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;  // fixed point, 22 fractional bits
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for BICUBIC over the
// box [0, in_size) -> out_size samples.
ResampleWeights bicubic_weights(int in_size, int out_size);

// The same resize with plain scalar loops only: the obviously-right twin the
// vectorised path is tested against.
RgbImage resize_bicubic_scalar(const RgbImage& image, int out_width, int out_height);

}  // namespace detail

}  // namespace lingbot::io
