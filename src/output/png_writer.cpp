#include "output/png_writer.h"

#include "core/error.h"
#include "output/atomic_file.h"

#include <png.h>

#include <csetjmp>
#include <vector>

namespace lingbot::io {

namespace {

// libpng's full API rather than the simplified one: the simplified writer
// treats 16-bit data as linear light and would tag it with gAMA, which some
// readers apply to depth values.
void write_png(const std::string& path, const void* pixels, int width, int height, int channels, int bit_depth) {
  AtomicFile out(path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    fail("{}: out of memory in libpng", path);
  }
  const size_t sample_bytes = bit_depth / 8;
  const size_t row_bytes = static_cast<size_t>(width) * channels * sample_bytes;
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int y = 0; y < height; ++y)
    rows[y] = const_cast<png_bytep>(static_cast<const png_byte*>(pixels) + row_bytes * y);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fail("{}: write failed (libpng)", path);
  }
  png_init_io(png, out.file());
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), bit_depth,
               channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 3);  // a little larger, several times faster than the default 6
  png_write_info(png, info);
  if (bit_depth == 16) {
    const uint16_t probe = 1;
    if (*reinterpret_cast<const uint8_t*>(&probe) == 1) png_set_swap(png);  // little-endian host
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  out.commit();
}

}  // namespace

void write_png8(const std::string& path, const uint8_t* pixels, int width, int height, int channels) {
  LB_CHECK(channels == 1 || channels == 3, "internal error: {} channels", channels);
  write_png(path, pixels, width, height, channels, 8);
}

void write_png16(const std::string& path, const uint16_t* pixels, int width, int height) {
  write_png(path, pixels, width, height, 1, 16);
}

}  // namespace lingbot::io
