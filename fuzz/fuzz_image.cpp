// libFuzzer target: the PNG and JPEG decoders (image/image_png.cpp,
// image/image_jpeg.cpp, EXIF orientation through libexif) from memory, and
// the header-only probe (probe_image, which walks PNG chunks and JPEG
// markers itself) from a file.
#include "core/error.h"
#include "fuzz_common.h"
#include "fuzz_temp_file.h"
#include "image/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lingbot;
  try {
    const io::RgbImage image = io::decode_image(data, size, "fuzz.img");
    if (image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3) {
      std::fprintf(stderr, "decoded %dx%d into %zu bytes\n", image.width, image.height, image.rgb.size());
      std::abort();
    }
    fuzz::keep(fuzz::touch(image.rgb));
  } catch (const Error& e) {
    fuzz::check_error(e, "fuzz.img");
  }
  const std::string& path = fuzz::write_temp_file(data, size, ".img");
  try {
    const io::ImageInfo info = io::probe_image(path);
    fuzz::keep(static_cast<uint64_t>(info.width) + info.height + info.orientation);
  } catch (const Error& e) {
    fuzz::check_error(e, path.c_str());
  }
  return 0;
}
