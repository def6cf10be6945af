// PNG files out (libpng), each written through AtomicFile.
#pragma once

#include <cstdint>
#include <string>

namespace lingbot::io {

// channels 1 (grey) or 3 (RGB), 8-bit samples, rows top to bottom.
void write_png8(const std::string& path, const uint8_t* pixels, int width, int height, int channels);
// 16-bit grey, native-endian values (written big-endian, as PNG stores them).
void write_png16(const std::string& path, const uint16_t* pixels, int width, int height);

}  // namespace lingbot::io
