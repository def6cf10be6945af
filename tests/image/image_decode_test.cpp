// Decoding against PIL: every synthetic PNG / JPEG variant (modes, bit
// depths, transparency, EXIF / XMP orientations) and the real courthouse
// frames give the pixels PIL gives after upstream's exif_transpose, RGBA
// compositing and convert("RGB").
#include "image/image.h"

#include "image_fixtures.h"

#include <gtest/gtest.h>

#include <cinttypes>

using namespace lingbot;
using namespace lingbot::io;
using namespace lingbot::test;

namespace {

uint64_t fnv1a64(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

}  // namespace

TEST(ImageDecode, MatchesPilOnEverySyntheticFile) {
  const auto& cases = preprocess_cases()["decode"];
  ASSERT_GE(cases.size(), 30u);
  std::printf("decoded pixels vs PIL %s:\n", preprocess_cases()["pillow_version"].get<std::string>().c_str());
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name + ": " + c["note"].get<std::string>());
    const RgbImage got = load_image(case_path(c["input"]));
    const RgbImage want = read_reference_png(case_path(c["expected"]));
    ASSERT_EQ(got.width, c["width"].get<int>());
    ASSERT_EQ(got.height, c["height"].get<int>());
    ASSERT_EQ(want.width, got.width);
    ASSERT_EQ(want.height, got.height);
    ASSERT_EQ(got.rgb.size(), want.rgb.size());
    const Agreement a = compare_bytes(got.rgb.data(), want.rgb.data(), got.rgb.size());
    report(name, a);
    EXPECT_LE(a.max_abs_diff, kOneLevel);
    // Lossless inputs leave no room for any difference at all.
    if (name.find(".png") != std::string::npos) {
      EXPECT_EQ(a.exact_fraction, 1.0);
    }
  }
}

TEST(ImageDecode, ProbeReadsTheDisplayedSizeFromHeaders) {
  for (const auto& c : preprocess_cases()["decode"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ImageInfo info = probe_image(case_path(c["input"]));
    EXPECT_EQ(info.width, c["width"].get<int>());
    EXPECT_EQ(info.height, c["height"].get<int>());
  }
  const ImageInfo jpeg = probe_image(case_path("inputs/jpeg_exif6.jpg"));
  EXPECT_EQ(jpeg.format, ImageFormat::Jpeg);
  EXPECT_EQ(jpeg.orientation, 6);
  EXPECT_EQ(jpeg.width, 32);  // stored 48x32, displayed rotated
  EXPECT_EQ(jpeg.height, 48);
  // The orientation of this PNG sits in an eXIf chunk after the pixel data.
  const ImageInfo png = probe_image(case_path("inputs/png_exif6_after_idat.png"));
  EXPECT_EQ(png.format, ImageFormat::Png);
  EXPECT_EQ(png.orientation, 6);
  // Content decides, not the name.
  EXPECT_EQ(probe_image(case_path("inputs/png_named.jpg")).format, ImageFormat::Png);
}

TEST(ImageDecode, CourthouseFramesMatchPilExactly) {
  const auto& hashes = preprocess_cases()["decode_hashes"];
  ASSERT_EQ(hashes.size(), 14u);
  for (const auto& h : hashes) {
    const std::string path = case_path(h["input"]);
    SCOPED_TRACE(path);
    const RgbImage img = load_image(path);
    EXPECT_EQ(img.width, h["width"].get<int>());
    EXPECT_EQ(img.height, h["height"].get<int>());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, fnv1a64(img.rgb));
    EXPECT_EQ(std::string(hex), h["fnv1a64"].get<std::string>()) << "decoded bytes differ from PIL's";
  }
}

// Pillow >= 10 reads a JPEG's XMP tiff:Orientation when EXIF has none; the
// Pillow that made the fixtures (9.4) does not, so the reference is the same
// pixels with the orientation given through EXIF.
TEST(ImageDecode, JpegXmpOrientationActsLikeExif) {
  for (const auto& c : preprocess_cases()["same_as"]) {
    SCOPED_TRACE(c["note"].get<std::string>());
    const RgbImage got = load_image(case_path(c["input"]));
    const RgbImage want = load_image(case_path("inputs/" + c["same_as"].get<std::string>()));
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.height, want.height);
    EXPECT_EQ(got.rgb, want.rgb);
  }
}

TEST(ImageDecode, DecodeFromMemoryEqualsLoadFromFile) {
  const std::string path = case_path("inputs/jpeg_progressive.jpg");
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const RgbImage a = decode_image(bytes.data(), bytes.size(), "memory");
  const RgbImage b = load_image(path);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.rgb, b.rgb);
}
