// Decoding PNG and JPEG files into 8-bit RGB, the way upstream sees them.
//
// Upstream (lingbot_map/utils/load_fn.py) opens every frame with PIL and does
//   img = ImageOps.exif_transpose(Image.open(path))
//   if img.mode == "RGBA": img = Image.alpha_composite(white, img)
//   img = img.convert("RGB")
// load_image() reproduces that pixel for pixel:
//   * the format is chosen by the file's first bytes, never its extension;
//   * PIL's mode for each PNG colour type / bit depth is honoured, including
//     its quirks: 16-bit samples keep their high byte, except 16-bit
//     grayscale, which PIL opens as 32-bit integers and clips to 0..255 on
//     convert("RGB"); gray+alpha (8-bit) and palette transparency are NOT
//     composited (convert("RGB") just drops alpha), while 8/16-bit RGBA and
//     16-bit gray+alpha (which PIL opens as "RGBA") are composited onto white;
//   * JPEG goes through libjpeg-turbo with PIL's settings (islow DCT, fancy
//     upsampling), 4-channel JPEGs are read as Adobe-inverted CMYK and mapped
//     to RGB with PIL's integer formula;
//   * the EXIF orientation (1..8) is applied last, from JPEG APP1 "Exif"
//     segments, PNG eXIf chunks or "Raw profile type exif" text, falling back
//     to an XMP tiff:Orientation as recent Pillow does.
// Every failure is a lingbot::Error with one line: "<path>: <problem>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lingbot::io {

// RGB8 pixels, row-major, interleaved: rgb[(y * width + x) * 3 + channel].
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;

  size_t row_bytes() const { return static_cast<size_t>(width) * 3; }
  const uint8_t* row(int y) const { return rgb.data() + static_cast<size_t>(y) * row_bytes(); }
  uint8_t* row(int y) { return rgb.data() + static_cast<size_t>(y) * row_bytes(); }
};

enum class ImageFormat { Png, Jpeg };

// What probe_image() learns from the headers alone.
struct ImageInfo {
  ImageFormat format = ImageFormat::Png;
  int width = 0, height = 0;  // as displayed, i.e. after the EXIF orientation
  int orientation = 1;        // EXIF orientation 1..8 (1: as stored)
};

// Decodes `path` to RGB exactly as upstream's PIL calls do (see above).
RgbImage load_image(const std::string& path);

// Same, from bytes already in memory; `name` only labels error messages.
RgbImage decode_image(const uint8_t* data, size_t size, const std::string& name);

// Size after orientation, reading headers and metadata only: a JPEG is read
// up to its first scan, a PNG's chunks are walked with seeks past pixel data.
ImageInfo probe_image(const std::string& path);

// PIL refuses images above twice Image.MAX_IMAGE_PIXELS (a "decompression
// bomb"); so do we, before allocating anything.
constexpr int64_t kMaxImagePixels = 2 * int64_t{89478485};

}  // namespace lingbot::io
