// resize_bicubic against PIL's Image.resize(..., BICUBIC) on random pixels
// (every case stresses rounding and clipping), plus invariants that need no
// reference at all.
#include "image/resize.h"

#include "image_fixtures.h"

#include <gtest/gtest.h>

#include <random>

using namespace lingbot;
using namespace lingbot::io;
using namespace lingbot::test;

TEST(ResizeBicubic, MatchesPil) {
  const auto& cases = preprocess_cases()["resize"];
  ASSERT_GE(cases.size(), 10u);
  std::printf("resize_bicubic vs PIL %s:\n", preprocess_cases()["pillow_version"].get<std::string>().c_str());
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const RgbImage in = read_reference_png(case_path(c["input"]));
    ASSERT_EQ(in.width, c["width"].get<int>());
    ASSERT_EQ(in.height, c["height"].get<int>());
    const RgbImage want = read_reference_png(case_path(c["expected"]));
    const RgbImage got = resize_bicubic(in, c["out_width"], c["out_height"]);
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.height, want.height);
    const Agreement a = compare_bytes(got.rgb.data(), want.rgb.data(), got.rgb.size());
    report(name, a);
    EXPECT_LE(a.max_abs_diff, kOneLevel);
    EXPECT_EQ(a.exact_fraction, 1.0);  // integer arithmetic: aim for Pillow's exact bytes
  }
}

TEST(ResizeBicubic, FastPathEqualsScalarTwin) {
  // The vectorised horizontal pass against the plain loops, on random
  // pixels and sizes (shrinking, enlarging, odd tap counts, 1-pixel sides).
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> side(1, 300);
  for (int trial = 0; trial < 60; ++trial) {
    RgbImage in;
    in.width = side(rng);
    in.height = side(rng) / 3 + 1;
    in.rgb.resize(in.row_bytes() * in.height);
    for (auto& v : in.rgb) v = static_cast<uint8_t>(rng());
    const int w = side(rng), h = side(rng) / 3 + 1;
    const RgbImage fast = resize_bicubic(in, w, h);
    const RgbImage plain = detail::resize_bicubic_scalar(in, w, h);
    ASSERT_EQ(fast.rgb, plain.rgb) << in.width << "x" << in.height << " -> " << w << "x" << h;
  }
}

TEST(ResizeBicubic, ConstantImagesStayConstant) {
  // Normalised weights sum to one, so a flat image must come out flat at
  // any scale, including the clipped extremes.
  for (const uint8_t value : {uint8_t{0}, uint8_t{1}, uint8_t{128}, uint8_t{254}, uint8_t{255}}) {
    RgbImage in;
    in.width = 53;
    in.height = 31;
    in.rgb.assign(in.row_bytes() * in.height, value);
    for (const auto& [w, h] : {std::pair{7, 5}, std::pair{53, 97}, std::pair{200, 31}, std::pair{1, 1}}) {
      const RgbImage out = resize_bicubic(in, w, h);
      ASSERT_EQ(out.width, w);
      ASSERT_EQ(out.height, h);
      for (uint8_t v : out.rgb) ASSERT_EQ(v, value) << w << "x" << h;
    }
  }
}

TEST(ResizeBicubic, SameSizeIsACopy) {
  RgbImage in;
  in.width = 9;
  in.height = 4;
  std::mt19937 rng(7);
  for (int i = 0; i < 9 * 4 * 3; ++i) in.rgb.push_back(static_cast<uint8_t>(rng()));
  EXPECT_EQ(resize_bicubic(in, 9, 4).rgb, in.rgb);
}

TEST(ResizeBicubic, WeightsFollowPillowsLayout) {
  // Support 2 input pixels when enlarging, 2 * scale when shrinking; taps
  // = 2 * ceil(support) + 1; each output's weights sum to one in 22-bit
  // fixed point up to one rounding step per tap.
  const auto up = detail::bicubic_weights(10, 25);
  EXPECT_EQ(up.taps, 5);
  const auto down = detail::bicubic_weights(1000, 224);  // scale 4.46 -> support 8.93
  EXPECT_EQ(down.taps, 2 * 9 + 1);
  for (const auto* w : {&up, &down}) {
    for (size_t i = 0; i < w->first.size(); ++i) {
      ASSERT_LE(w->count[i], w->taps);
      ASSERT_GE(w->first[i], 0);
      int64_t sum = 0;
      for (int j = 0; j < w->count[i]; ++j) sum += w->weights[i * w->taps + j];
      EXPECT_NEAR(static_cast<double>(sum), 1 << 22, w->count[i]);
    }
  }
  // Output 0 of the 10 -> 25 enlargement: centre 0.2, window [-1.8, 2.2):
  // input pixels whose centres (x + 0.5) fall inside and exist are 0 and 1.
  EXPECT_EQ(up.first[0], 0);
  EXPECT_EQ(up.count[0], 2);
  // Output 12: centre 5.0, window [3, 7): pixels 3..6.
  EXPECT_EQ(up.first[12], 3);
  EXPECT_EQ(up.count[12], 4);
}

TEST(ResizeBicubic, BadSizesAreErrors) {
  RgbImage in;
  in.width = 2;
  in.height = 2;
  in.rgb.assign(12, 0);
  EXPECT_THROW(resize_bicubic(in, 0, 5), Error);
  EXPECT_THROW(resize_bicubic(in, 5, -1), Error);
  EXPECT_THROW(resize_bicubic(RgbImage{}, 5, 5), Error);
}
