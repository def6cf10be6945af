// Hostile and broken files: each is a lingbot::Error whose message is one
// line naming the file, never a crash (these tests also run under ASan/UBSan).
#include "image/image.h"

#include "image_fixtures.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

using namespace lingbot;
using namespace lingbot::io;
using namespace lingbot::test;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint32_t be32(const uint8_t* p) { return (uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }
void put_be32(uint8_t* p, uint32_t v) {
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

// Offset of the first chunk of this type (its length field), or 0.
size_t find_chunk(const std::vector<uint8_t>& png, const char* type) {
  for (size_t at = 8; at + 8 <= png.size();) {
    if (std::memcmp(png.data() + at + 4, type, 4) == 0) return at;
    at += 12 + be32(png.data() + at);
  }
  return 0;
}

void fix_crc(std::vector<uint8_t>& png, size_t chunk) {
  const uint32_t length = be32(png.data() + chunk);
  const uint32_t crc = crc32(0, png.data() + chunk + 4, length + 4);
  put_be32(png.data() + chunk + 8 + length, crc);
}

class ImageErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lingbot_image_errors_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // The call fails with a one-line lingbot::Error that names `path` and says `problem`.
  static void expect_error(const std::function<void()>& call, const std::string& path, const std::string& problem) {
    try {
      call();
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      EXPECT_NE(message.find(problem), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      std::printf("  %s\n", message.c_str());
    }
  }

  fs::path dir_;
};

}  // namespace

TEST_F(ImageErrors, CorruptPngData) {
  std::vector<uint8_t> png = read_bytes(case_path("inputs/png_rgb8.png"));
  const size_t idat = find_chunk(png, "IDAT");
  ASSERT_GT(idat, 0u);
  // Damage the compressed pixels: first with the CRC left stale, then with it repaired.
  for (size_t i = 0; i < 12; ++i) png[idat + 8 + 20 + i] ^= 0x5A;
  const std::string stale = write("corrupt_crc.png", png);
  expect_error([&] { load_image(stale); }, stale, "corrupt PNG");
  fix_crc(png, idat);
  const std::string bad_zlib = write("corrupt_zlib.png", png);
  expect_error([&] { load_image(bad_zlib); }, bad_zlib, "corrupt PNG");
}

TEST_F(ImageErrors, TruncatedPng) {
  const std::vector<uint8_t> png = read_bytes(case_path("inputs/portrait_333x777.png"));
  const std::string path = write("truncated.png", {png.begin(), png.begin() + static_cast<long>(png.size() / 2)});
  expect_error([&] { load_image(path); }, path, "corrupt PNG");
  const std::string header_only = write("header_only.png", {png.begin(), png.begin() + 20});
  expect_error([&] { load_image(header_only); }, header_only, "truncated");
  expect_error([&] { probe_image(header_only); }, header_only, "truncated");
}

TEST_F(ImageErrors, TruncatedJpeg) {
  const std::vector<uint8_t> jpeg = read_bytes(case_path("inputs/landscape_1000x750.jpg"));
  const std::string path = write("truncated.jpg", {jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2)});
  expect_error([&] { load_image(path); }, path, "truncated");
  // Headers intact, so probing (which reads no pixel data) still works.
  EXPECT_EQ(probe_image(path).width, 1000);
  const std::string in_header = write("truncated_header.jpg", {jpeg.begin(), jpeg.begin() + 300});
  expect_error([&] { load_image(in_header); }, in_header, "corrupt JPEG");
  expect_error([&] { probe_image(in_header); }, in_header, "corrupt JPEG");
  // A progressive file cut short.
  const std::vector<uint8_t> progressive = read_bytes(case_path("inputs/jpeg_progressive.jpg"));
  const std::string cut = write("cut_progressive.jpg", {progressive.begin(), progressive.end() - 40});
  expect_error([&] { load_image(cut); }, cut, "truncated");
}

TEST_F(ImageErrors, JpegGarbageAfterSoi) {
  std::vector<uint8_t> bytes = {0xFF, 0xD8, 0xFF};
  for (int i = 0; i < 500; ++i) bytes.push_back(static_cast<uint8_t>(i * 37));
  const std::string path = write("garbage.jpg", bytes);
  expect_error([&] { load_image(path); }, path, "corrupt JPEG");
}

TEST_F(ImageErrors, TextFileNamedPng) {
  const std::string text = "this is not an image\n";
  const std::string path = write("notes.png", {text.begin(), text.end()});
  expect_error([&] { load_image(path); }, path, "not a PNG or JPEG image");
  expect_error([&] { probe_image(path); }, path, "not a PNG or JPEG image");
}

TEST_F(ImageErrors, EmptyMissingAndDirectory) {
  const std::string empty = write("empty.jpg", {});
  expect_error([&] { load_image(empty); }, empty, "empty file");
  const std::string missing = (dir_ / "missing.png").string();
  expect_error([&] { load_image(missing); }, missing, "cannot open");
  expect_error([&] { probe_image(missing); }, missing, "cannot open");
  const std::string folder = (dir_ / "folder.png").string();
  fs::create_directories(folder);
  expect_error([&] { load_image(folder); }, folder, "cannot read");
}

TEST_F(ImageErrors, DecompressionBombIsRefusedBeforeAllocating) {
  std::vector<uint8_t> png = read_bytes(case_path("inputs/png_rgb8.png"));
  const size_t ihdr = find_chunk(png, "IHDR");
  put_be32(png.data() + ihdr + 8, 100000);
  put_be32(png.data() + ihdr + 12, 100000);
  fix_crc(png, ihdr);
  const std::string path = write("bomb.png", png);
  expect_error([&] { load_image(path); }, path, "exceeds the limit");
  expect_error([&] { probe_image(path); }, path, "exceeds the limit");
  put_be32(png.data() + ihdr + 8, 0);
  fix_crc(png, ihdr);
  const std::string zero = write("zero_width.png", png);
  expect_error([&] { load_image(zero); }, zero, "invalid image size");
}

TEST_F(ImageErrors, EveryTruncationOfASmallPngIsAnErrorOrTheImage) {
  // Cut a small file at every length: a clean error each time (or, once the
  // pixels are complete, the image itself: PIL needs no IEND either).
  const std::vector<uint8_t> png = read_bytes(case_path("inputs/png_palette4.png"));
  const RgbImage full = load_image(case_path("inputs/png_palette4.png"));
  for (size_t n = 0; n < png.size(); ++n) {
    const std::string path = write("cut.png", {png.begin(), png.begin() + static_cast<long>(n)});
    try {
      const RgbImage img = load_image(path);
      EXPECT_EQ(img.rgb, full.rgb) << "cut at " << n;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    }
  }
}

TEST_F(ImageErrors, EveryTruncationOfASmallJpegIsAnError) {
  const std::vector<uint8_t> jpeg = read_bytes(case_path("inputs/jpeg_444.jpg"));
  for (size_t n = 0; n + 2 < jpeg.size(); n += 7) {  // everything short of the EOI marker
    const std::string path = write("cut.jpg", {jpeg.begin(), jpeg.begin() + static_cast<long>(n)});
    EXPECT_THROW(load_image(path), Error) << "cut at " << n;
  }
}
