// Preprocessing against upstream's load_and_preprocess_images, as run with
// PIL by tools/reference/make_preprocess_fixtures.py: both modes, image sizes
// 224 / 250 / 350 / 518, real and synthetic frames, sets of mixed sizes.
// Plus the size arithmetic, folder listing and streaming source.
#include "image/preprocess.h"

#include "image_fixtures.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

using namespace lingbot;
using namespace lingbot::io;
using namespace lingbot::test;
namespace fs = std::filesystem;

namespace {

PreprocessOptions options_of(const nlohmann::json& c) {
  PreprocessOptions o;
  o.mode = c["mode"] == "pad" ? PreprocessOptions::Mode::Pad : PreprocessOptions::Mode::Crop;
  o.image_size = c["image_size"];
  o.patch_size = c["patch_size"];
  return o;
}

// The stored reference: [S, 3, H, W] kept as a W x (S*H) RGB image.
std::vector<uint8_t> expected_chw(const nlohmann::json& c) {
  const RgbImage stored = read_reference_png(case_path(c["expected"]));
  const int s = c["shape"][0], h = c["shape"][2], w = c["shape"][3];
  EXPECT_EQ(stored.width, w);
  EXPECT_EQ(stored.height, s * h);
  std::vector<uint8_t> chw(static_cast<size_t>(s) * 3 * h * w);
  for (int f = 0; f < s; ++f)
    for (int ch = 0; ch < 3; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          chw[((static_cast<size_t>(f) * 3 + ch) * h + y) * w + x] = stored.row(f * h + y)[3 * x + ch];
  return chw;
}

std::vector<std::string> input_paths(const nlohmann::json& c) {
  std::vector<std::string> paths;
  for (const auto& p : c["inputs"]) paths.push_back(case_path(p));
  return paths;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("lingbot_preprocess_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void touch(const std::string& path, const std::string& content = "") { std::ofstream(path) << content; }

}  // namespace

TEST(PreprocessUpstream, MatchesPilEveryCase) {
  const auto& cases = preprocess_cases()["preprocess"];
  ASSERT_GE(cases.size(), 15u);
  std::printf("preprocessed tensors vs upstream with PIL %s:\n",
              preprocess_cases()["pillow_version"].get<std::string>().c_str());
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const Tensor got = load_images(input_paths(c), options_of(c));
    const Shape want_shape = {c["shape"][0], c["shape"][1], c["shape"][2], c["shape"][3]};
    ASSERT_EQ(got.shape(), want_shape);
    const std::vector<uint8_t> want = expected_chw(c);
    const Agreement a = compare_unit_floats(got.f32(), want.data(), want.size());
    report(name, a);
    EXPECT_LE(a.max_abs_diff, kOneLevel);
    // Without JPEG inputs (whose decoding depends on PIL's libjpeg build)
    // nothing but our own arithmetic is involved: demand PIL's exact values.
    if (c["inputs"].dump().find(".jpg") == std::string::npos) {
      EXPECT_EQ(a.exact_fraction, 1.0);
    }
  }
}

TEST(PreprocessUpstream, SingleImagePathAndStreamingSourceAgree) {
  for (const auto& c : preprocess_cases()["preprocess"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::vector<std::string> paths = input_paths(c);
    const Tensor batch = load_images(paths, options_of(c));
    const FrameSource source(paths, options_of(c));
    ASSERT_EQ(source.size(), static_cast<int>(paths.size()));
    EXPECT_EQ(source.output_height(), batch.dim(2));
    EXPECT_EQ(source.output_width(), batch.dim(3));
    for (int i = 0; i < source.size(); ++i) {
      const Tensor frame = source.frame(i);
      EXPECT_EQ(max_abs_diff(frame, batch[i]), 0.0);
    }
    if (paths.size() == 1) {
      const Tensor one = preprocess(load_image(paths[0]), options_of(c));
      EXPECT_EQ(one.shape(), (Shape{3, batch.dim(2), batch.dim(3)}));
      EXPECT_EQ(max_abs_diff(one, batch[0]), 0.0);
    }
  }
}

TEST(PreprocessUpstream, CourthouseAtItsOwnSizeIsTheDecodedImage) {
  // 518x294 frames: width already 518 and 294 = 21 * 14, so no resize.
  const RgbImage img = load_image(fixture_path("courthouse/000003.png"));
  const Tensor t = preprocess(img, PreprocessOptions{});
  ASSERT_EQ(t.shape(), (Shape{3, 294, 518}));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 294; y += 7)
      for (int x = 0; x < 518; x += 5)
        ASSERT_EQ(t.f32()[(c * 294 + y) * 518 + x], img.row(y)[3 * x + c] / 255.0f);
}

TEST(PreprocessGeometry, RoundsLikePython) {
  const PreprocessOptions crop518;  // crop, 518, 14
  // 1920x1080: 1080 * (518 / 1920) / 14 = 20.8125 -> 21 -> 294 rows.
  FrameGeometry g = frame_geometry(1920, 1080, crop518);
  EXPECT_EQ(g.resized_width, 518);
  EXPECT_EQ(g.resized_height, 294);
  EXPECT_EQ(g.height, 294);
  // Portrait 1080x1920 in crop mode: 1920 * 0.4796 / 14 = 65.78 -> 66 -> 924
  // rows, centre 518 kept from row (924 - 518) // 2 = 203.
  g = frame_geometry(1080, 1920, crop518);
  EXPECT_EQ(g.resized_height, 924);
  EXPECT_EQ(g.height, 518);
  EXPECT_EQ(g.top, -203);
  // Ties go to even: 231 / 14 = 16.5 -> 16 (half-up would give 17 * 14 = 238)
  // and 245 / 14 = 17.5 -> 18.
  PreprocessOptions crop224;
  crop224.image_size = 224;
  EXPECT_EQ(frame_geometry(224, 231, crop224).resized_height, 224);
  EXPECT_EQ(frame_geometry(224, 245, crop224).resized_height, 252);
  EXPECT_EQ(frame_geometry(224, 245, crop224).top, -14);
  // Pad mode, portrait: the height becomes 518, the width 1080 * 518 / 1920
  // / 14 = 20.8 -> 21 -> 294, centred with (518 - 294) // 2 = 112 on the left.
  PreprocessOptions pad518;
  pad518.mode = PreprocessOptions::Mode::Pad;
  g = frame_geometry(1080, 1920, pad518);
  EXPECT_EQ(g.resized_width, 294);
  EXPECT_EQ(g.resized_height, 518);
  EXPECT_EQ(g.width, 518);
  EXPECT_EQ(g.height, 518);
  EXPECT_EQ(g.left, 112);
  EXPECT_EQ(g.top, 0);
  // Landscape pad: 757 rows -> 392, padding 518 - 392 = 126 -> 63 above.
  EXPECT_EQ(frame_geometry(1000, 757, pad518).top, 63);  // 757 * 0.518 / 14 = 28.0 -> 392
}

TEST(PreprocessGeometry, ExtremeAspectRatiosAndBadOptionsAreErrors) {
  const PreprocessOptions crop518;
  // 10 * 518 / 10000 / 14 = 0.037 -> 0 rows: PIL would fail; we say why.
  try {
    frame_geometry(10000, 10, crop518, "wide.png");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wide.png"), std::string::npos) << e.what();
  }
  PreprocessOptions bad;
  bad.image_size = 0;
  EXPECT_THROW(frame_geometry(100, 100, bad), Error);
  bad.image_size = 518;
  bad.patch_size = -14;
  EXPECT_THROW(frame_geometry(100, 100, bad), Error);
}

TEST(ListImages, SortsByBytesAndFiltersExtensions) {
  TempDir dir;
  for (const char* name : {"b.PNG", "a.jpg", "c.JpEg", "Z.png", "10.png", "9.png", ".hidden.png", "notes.txt",
                           "archive.png.zip", "noext"}) {
    touch(dir / name);
  }
  fs::create_directories(dir / "folder.png");
  const std::vector<std::string> got = list_images(dir.str(), FrameOrder::Name);
  const std::vector<std::string> want = {dir / "10.png", dir / "9.png", dir / "Z.png",
                                         dir / "a.jpg",  dir / "b.PNG", dir / "c.JpEg"};
  EXPECT_EQ(got, want);
}

TEST(ListImages, NaturalOrderByDefaultAndSaysSoWhenItDiffers) {
  TempDir dir;
  for (const char* name : {"frame_10.png", "frame_2.png", "frame_1.png", "frame_02.png", "other.png"}) touch(dir / name);
  testing::internal::CaptureStderr();
  const std::vector<std::string> got = list_images(dir.str());
  const std::string log = testing::internal::GetCapturedStderr();
  const std::vector<std::string> want = {dir / "frame_1.png", dir / "frame_2.png", dir / "frame_02.png",
                                         dir / "frame_10.png", dir / "other.png"};
  EXPECT_EQ(got, want);
  EXPECT_NE(log.find("natural order (frame_1.png before frame_02.png)"), std::string::npos) << log;
  EXPECT_NE(log.find("--sort name"), std::string::npos) << log;

  // Zero-padded names (the usual case, the courthouse frames): the orders agree, nothing is said.
  testing::internal::CaptureStderr();
  const std::vector<std::string> padded = list_images(test::fixture_path("courthouse"));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(padded, list_images(test::fixture_path("courthouse"), FrameOrder::Name));
}

TEST(ListImages, NaturalLessComparesDigitRunsAsNumbers) {
  EXPECT_TRUE(natural_less("f2", "f10"));
  EXPECT_FALSE(natural_less("f10", "f2"));
  EXPECT_TRUE(natural_less("f2", "f02"));  // equal values: fewer leading zeros first
  EXPECT_FALSE(natural_less("f02", "f2"));
  EXPECT_TRUE(natural_less("a9b", "a10a"));
  EXPECT_TRUE(natural_less("a", "a0"));
  EXPECT_FALSE(natural_less("x", "x"));
  EXPECT_TRUE(natural_less("000001.png", "000002.png"));
  EXPECT_TRUE(natural_less("99999999999999999999999.png", "100000000000000000000000.png"));  // past 64 bits
  EXPECT_TRUE(natural_less("B", "a"));  // letters by bytes, as Name
}

TEST(ListImages, MtimeOrderIsOldestFirst) {
  TempDir dir;
  const auto now = fs::file_time_type::clock::now();
  const char* names[] = {"a.png", "b.png", "c.png"};
  const int age_s[] = {10, 30, 20};
  for (int i = 0; i < 3; ++i) {
    touch(dir / names[i]);
    fs::last_write_time(dir / names[i], now - std::chrono::seconds(age_s[i]));
  }
  const std::vector<std::string> want = {dir / "b.png", dir / "c.png", dir / "a.png"};
  EXPECT_EQ(list_images(dir.str(), FrameOrder::Mtime), want);
  EXPECT_EQ(parse_frame_order("mtime"), FrameOrder::Mtime);
  EXPECT_THROW(parse_frame_order("size"), Error);
}

TEST(ListImages, EmptyMissingOrImagelessFoldersAreErrors) {
  TempDir dir;
  const auto expect_error = [](const std::string& folder, const std::string& problem) {
    try {
      list_images(folder);
      ADD_FAILURE() << folder;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(folder), std::string::npos) << m;
      EXPECT_NE(m.find(problem), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      std::printf("  %s\n", m.c_str());
    }
  };
  fs::create_directories(dir / "empty");
  expect_error(dir / "empty", "no .png, .jpg or .jpeg images");
  expect_error(dir / "missing", "no such folder");
  fs::create_directories(dir / "text_only");
  touch(dir / "text_only/readme.txt", "hello");
  expect_error(dir / "text_only", "no .png, .jpg or .jpeg images");
  touch(dir / "file.png");
  expect_error(dir / "file.png", "not a folder");
}

TEST(FrameSource, ReadsOnlyHeadersUntilAFrameIsAsked) {
  TempDir dir;
  // A PNG whose header is intact but whose pixel data is cut off.
  std::ifstream in(case_path("inputs/portrait_333x777.png"), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string broken = dir / "b_broken.png";
  std::ofstream(broken, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  const std::string good = case_path("inputs/tiny_20x15.png");

  PreprocessOptions crop224;
  crop224.image_size = 224;
  const FrameSource source({good, broken}, crop224);  // probing both succeeds
  EXPECT_EQ(source.output_width(), 224);
  EXPECT_EQ(source.output_height(), 224);  // the portrait is 224 tall after its crop
  EXPECT_EQ(source.frame(0).shape(), (Shape{3, 224, 224}));
  try {
    source.frame(1);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(broken), std::string::npos) << e.what();
  }
  EXPECT_THROW(source.frame(2), Error);
  EXPECT_THROW(FrameSource({}, crop224), Error);
  EXPECT_THROW(load_images({good, dir / "missing.png"}, crop224), Error);
}

TEST(FrameSource, MixedSizesArePaddedWithWhiteAroundTheCentre) {
  // tiny_20x15 at crop 224 -> 224x168, strip_900x40 -> 224x14: padded to
  // 168 rows, the strip's 14 rows start at (168 - 14) // 2 = 77.
  PreprocessOptions crop224;
  crop224.image_size = 224;
  const FrameSource source({case_path("inputs/tiny_20x15.png"), case_path("inputs/strip_900x40.png")}, crop224);
  EXPECT_EQ(source.output_height(), 168);
  const Tensor strip = source.frame(1);
  const float* p = strip.f32();
  const int h = 168, w = 224;
  const int top = (168 - 14) / 2;
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < h; ++y) {
      const bool inside = y >= top && y < top + 14;
      if (!inside) {
        for (int x = 0; x < w; ++x) ASSERT_EQ(p[(c * h + y) * w + x], 1.0f) << c << "," << y << "," << x;
      }
    }
  }
  const Tensor alone = preprocess(load_image(case_path("inputs/strip_900x40.png")), crop224);
  ASSERT_EQ(alone.shape(), (Shape{3, 14, 224}));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 14; ++y)
      for (int x = 0; x < w; ++x)
        ASSERT_EQ(p[(c * h + top + y) * w + x], alone.f32()[(c * 14 + y) * w + x]);
}
