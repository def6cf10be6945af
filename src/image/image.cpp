// load_image / probe_image: format by content, then the decoder, then the
// EXIF orientation (see image.h for the PIL behaviour reproduced).
#include "image/image.h"

#include "core/error.h"
#include "image/image_codecs.h"
#include "image/image_orientation.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

namespace lingbot::io {

namespace detail {

void check_pixel_count(int64_t width, int64_t height, const std::string& name) {
  LB_CHECK(width > 0 && height > 0, "{}: invalid image size {}x{}", name, width, height);
  LB_CHECK(height <= kMaxImagePixels / width,
           "{}: image size {}x{} exceeds the limit of {} pixels (PIL refuses it as a decompression bomb)",
           name, width, height, kMaxImagePixels);
}

}  // namespace detail

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_file(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  LB_CHECK(file != nullptr, "{}: cannot open ({})", path, std::strerror(errno));
  return file;
}

std::vector<uint8_t> read_whole_file(const std::string& path) {
  File file = open_file(path);
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (;;) {
    const size_t n = std::fread(chunk, 1, sizeof chunk, file.get());
    bytes.insert(bytes.end(), chunk, chunk + n);
    if (n < sizeof chunk) break;
  }
  LB_CHECK(!std::ferror(file.get()), "{}: cannot read ({})", path, std::strerror(errno));
  return bytes;
}

// Format by magic bytes, as PIL's plugins accept them.
std::optional<ImageFormat> sniff_format(const uint8_t* data, size_t size) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::Png;
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::Jpeg;
  return std::nullopt;
}

ImageFormat require_format(const uint8_t* data, size_t size, const std::string& name) {
  LB_CHECK(size > 0, "{}: empty file", name);
  const std::optional<ImageFormat> format = sniff_format(data, size);
  LB_CHECK(format.has_value(), "{}: not a PNG or JPEG image (unrecognised content)", name);
  return *format;
}

}  // namespace

RgbImage decode_image(const uint8_t* data, size_t size, const std::string& name) {
  const ImageFormat format = require_format(data, size, name);
  detail::DecodedImage decoded = format == ImageFormat::Png ? detail::decode_png(data, size, name)
                                                            : detail::decode_jpeg(data, size, name);
  const int orientation = detail::resolve_orientation(decoded.orientation);
  return detail::apply_orientation(std::move(decoded.pixels), orientation);
}

RgbImage load_image(const std::string& path) {
  const std::vector<uint8_t> bytes = read_whole_file(path);
  return decode_image(bytes.data(), bytes.size(), path);
}

ImageInfo probe_image(const std::string& path) {
  File file = open_file(path);
  uint8_t head[8] = {};
  const size_t n = std::fread(head, 1, sizeof head, file.get());
  LB_CHECK(!std::ferror(file.get()), "{}: cannot read ({})", path, std::strerror(errno));
  ImageInfo info;
  info.format = require_format(head, n, path);
  std::rewind(file.get());
  const detail::StoredImageInfo stored = info.format == ImageFormat::Png
                                             ? detail::probe_png(file.get(), path)
                                             : detail::probe_jpeg(file.get(), path);
  info.orientation = detail::resolve_orientation(stored.orientation);
  const bool swap = detail::orientation_swaps_axes(info.orientation);
  info.width = swap ? stored.height : stored.width;
  info.height = swap ? stored.width : stored.height;
  return info;
}

}  // namespace lingbot::io
