// Replays the inputs fuzz/fuzz_image.cpp once failed on
// (fuzz/regressions/fuzz_image/): each decodes to an image of the size it
// reports, or fails with one line naming the input, from memory and from a
// file alike. (The PNG there read a zero-length chunk into a null pointer,
// undefined behaviour that only the sanitizer builds see.)
#include "core/error.h"
#include "fuzz_regressions.h"
#include "image/image.h"

#include <gtest/gtest.h>

using namespace lingbot;

TEST(ImageFuzzRegressions, EachDecodesOrFailsInOneLine) {
  const auto files = test::fuzz_regressions("fuzz_image");
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) {
    const std::vector<uint8_t> bytes = test::file_bytes(path);
    try {
      const io::RgbImage image = io::decode_image(bytes.data(), bytes.size(), "r.img");
      EXPECT_EQ(image.rgb.size(), static_cast<size_t>(image.width) * image.height * 3) << path;
    } catch (const Error& e) {
      EXPECT_TRUE(test::one_line_naming(e.what(), "r.img")) << path << ": " << e.what();
    }
    try {
      const io::ImageInfo info = io::probe_image(path.string());
      EXPECT_GT(info.width, 0) << path;
    } catch (const Error& e) {
      EXPECT_TRUE(test::one_line_naming(e.what(), path.string())) << path << ": " << e.what();
    }
  }
}
