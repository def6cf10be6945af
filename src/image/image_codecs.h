// The PNG and JPEG decoders behind load_image() / probe_image().
//
// Internal to src/io. Each decoder returns the stored (not yet oriented)
// image already converted to RGB the way PIL's convert("RGB") does, after the
// alpha compositing upstream applies to "RGBA" images, plus the metadata the
// orientation is resolved from.
#pragma once

#include "image/image.h"
#include "image/image_orientation.h"

#include <cstdio>
#include <string>

namespace lingbot::io::detail {

struct DecodedImage {
  RgbImage pixels;  // as stored in the file
  OrientationMetadata orientation;
};

// Header facts without the pixels.
struct StoredImageInfo {
  int width = 0, height = 0;  // as stored in the file
  OrientationMetadata orientation;
};

DecodedImage decode_png(const uint8_t* data, size_t size, const std::string& name);
DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name);

// Read from the current position (the start of the file).
StoredImageInfo probe_png(std::FILE* file, const std::string& name);
StoredImageInfo probe_jpeg(std::FILE* file, const std::string& name);

// Image.alpha_composite(opaque white, (value, alpha)) for one channel:
// Pillow's AlphaComposite.c integer arithmetic with the destination fixed to
// (255, 255, 255, 255).
inline uint8_t composite_over_white(unsigned value, unsigned alpha) {
  if (alpha == 0) return 255;  // a fully transparent source leaves the destination
  constexpr unsigned kPrecisionBits = 7;
  constexpr unsigned dst_alpha = 255, dst_value = 255;
  const unsigned blend = dst_alpha * (255 - alpha);
  const unsigned out_alpha_255 = alpha * 255 + blend;
  const unsigned coef1 = alpha * 255 * 255 * (1u << kPrecisionBits) / out_alpha_255;
  const unsigned coef2 = 255 * (1u << kPrecisionBits) - coef1;
  const unsigned tmp = value * coef1 + dst_value * coef2 + (0x80u << kPrecisionBits);
  // Pillow's SHIFTFORDIV255: a rounded division by 255 for these ranges.
  return static_cast<uint8_t>((((tmp >> 8) + tmp) >> 8) >> kPrecisionBits);
}

// PIL's decompression-bomb limit (see kMaxImagePixels).
void check_pixel_count(int64_t width, int64_t height, const std::string& name);

}  // namespace lingbot::io::detail
