// EXIF orientation: reading the tag and turning pixels upright.
//
// Internal to the image decoders (image.cpp, image_png.cpp, image_jpeg.cpp).
// The rules follow Pillow's Image.getexif() + ImageOps.exif_transpose():
//   * the Orientation tag (0x0112) is read from IFD0 of the EXIF block only;
//   * when IFD0 has no Orientation tag, an XMP packet's first
//     `tiff:Orientation="N"` or `<tiff:Orientation>N` supplies it;
//   * values other than 2..8 (or a tag with several values) change nothing.
// Metadata that cannot be parsed counts as "no orientation" (we are more
// lenient than PIL, which may raise on a malformed EXIF block).
#pragma once

#include "image/image.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace lingbot::io::detail {

// The orientation metadata found in a file, before interpretation.
struct OrientationMetadata {
  bool has_exif = false;
  std::vector<uint8_t> exif;  // TIFF structure, with or without "Exif\0\0" in front
  std::string xmp;            // XMP packet text (empty: none)
};

// 1..8, following the precedence above.
int resolve_orientation(const OrientationMetadata& meta);

// Width/height swap for orientations 5..8 (those that transpose the image).
bool orientation_swaps_axes(int orientation);

// The upright image for a stored image with this EXIF orientation; PIL's
// transposes: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM,
// 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90. 1 returns `image`.
RgbImage apply_orientation(RgbImage image, int orientation);

}  // namespace lingbot::io::detail
