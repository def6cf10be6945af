// The viewer's wire format (src/viewer/frame_packet.h): levels against their
// definitions written out naively, and a frame through encode and decode
// against the pixels it came from.
#include "viewer/frame_packet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace lingbot;
using namespace lingbot::viewer;

namespace {

// The definition: the largest k with c > 2^(k/32), found by trying every k.
int naive_confidence_level(float c) {
  int level = -1;
  for (int k = 0; k < kConfidenceLevels; ++k)
    if (c > static_cast<float>(std::exp2(k / 32.0))) level = k;
  return level;
}

int naive_grid_level(int gx, int gy) {
  int level = 0;
  while (level < kMaxGridLevel && gx % (2 << level) == 0 && gy % (2 << level) == 0) ++level;
  return level;
}

}  // namespace

TEST(ViewerWire, ConfidenceLevelIsTheLargestThresholdBelow) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log_conf(-1.0f, 9.0f);
  for (int i = 0; i < 20000; ++i) {
    const float c = std::exp2(log_conf(rng));
    ASSERT_EQ(confidence_level(c), naive_confidence_level(c)) << c;
  }
  for (int k = 0; k < kConfidenceLevels; ++k) {  // the thresholds themselves, and their neighbours
    const float t = static_cast<float>(std::exp2(k / 32.0));
    for (float c : {t, std::nextafter(t, 0.0f), std::nextafter(t, 1e9f)})
      ASSERT_EQ(confidence_level(c), naive_confidence_level(c)) << c;
  }
  EXPECT_EQ(confidence_level(std::numeric_limits<float>::quiet_NaN()), -1);
  EXPECT_EQ(confidence_level(1.0f), -1);
  EXPECT_EQ(confidence_level(1e30f), kConfidenceLevels - 1);
}

TEST(ViewerWire, GridLevelCountsCommonPowersOfTwo) {
  for (int gx = 0; gx < 40; ++gx)
    for (int gy = 0; gy < 40; ++gy) ASSERT_EQ(grid_level(gx, gy), naive_grid_level(gx, gy)) << gx << "," << gy;
}

TEST(ViewerWire, FrameRoundTripsItsKeptPixels) {
  const int H = 9, W = 13, stride = 2;
  FrameInput f;
  f.index = 4;
  f.timestamp = 2.5;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) f.camera_to_world[i][j] = 0.25 * (i * 4 + j) - 1;
  f.intrinsic = {{{100, 0, 6}, {0, 90, 4}, {0, 0, 1}}};
  f.world_points = Tensor::empty({H, W, 3});
  f.depth_conf = Tensor::empty({H, W});
  f.image = Tensor::empty({3, H, W});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t p = 0; p < int64_t(H) * W; ++p) {
    for (int c = 0; c < 3; ++c) f.world_points.f32()[3 * p + c] = -2 + 5 * u(rng) * (c + 1);
    f.depth_conf.f32()[p] = 0.5f + 3 * u(rng);
    for (int c = 0; c < 3; ++c) f.image.f32()[c * H * W + p] = u(rng);
  }
  f.world_points.f32()[3 * (2 * W + 4) + 1] = std::numeric_limits<float>::infinity();  // a kept pixel, not finite

  const std::string message = encode_frame(f, stride);
  EXPECT_EQ(message.size() % 4, 0u);
  const DecodedFrame d = decode_frame(message);
  EXPECT_EQ(d.index, 4);
  EXPECT_FLOAT_EQ(d.timestamp, 2.5f);
  EXPECT_FLOAT_EQ(d.camera_to_world[6], 0.5f);
  EXPECT_FLOAT_EQ(d.intrinsic[4], 90.0f);

  // The same selection, naively: every stride-th pixel, finite, confidence > 1.
  float lo[3] = {1e30f, 1e30f, 1e30f}, hi[3] = {-1e30f, -1e30f, -1e30f};
  std::vector<int64_t> kept;
  for (int y = 0; y < H; y += stride)
    for (int x = 0; x < W; x += stride) {
      const int64_t p = int64_t(y) * W + x;
      const float* q = f.world_points.f32() + 3 * p;
      if (!std::isfinite(q[0] + q[1] + q[2]) || !(f.depth_conf.f32()[p] > 1.0f)) continue;
      kept.push_back(p);
      for (int c = 0; c < 3; ++c) lo[c] = std::min(lo[c], q[c]), hi[c] = std::max(hi[c], q[c]);
    }
  ASSERT_EQ(d.points.size(), kept.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    const int64_t p = kept[i];
    const DecodedPoint& got = d.points[i];
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(got.xyz[c], f.world_points.f32()[3 * p + c], (hi[c] - lo[c]) / 65535 + 1e-5) << i;
      EXPECT_EQ(got.rgb[c], std::lround(f.image.f32()[c * H * W + p] * 255)) << i;
    }
    EXPECT_EQ(got.confidence_level, naive_confidence_level(f.depth_conf.f32()[p]));
    EXPECT_EQ(got.grid_level, naive_grid_level(int(p % W) / stride, int(p / W) / stride));
  }
  EXPECT_EQ(d.thumb_width, W);  // narrower than the thumbnail's limit: every pixel
  EXPECT_EQ(d.thumb_height, H);
}

TEST(ViewerWire, CameraOnlyFrameHasNoPoints) {
  FrameInput f;  // a --no-dense run's frame
  f.image = Tensor::zeros({3, 4, 4});
  const DecodedFrame d = decode_frame(encode_frame(f, 1));
  EXPECT_TRUE(d.points.empty());
}

TEST(ViewerWire, TruncatedFrameIsAnError) {
  FrameInput f;
  f.image = Tensor::zeros({3, 4, 4});
  f.world_points = Tensor::zeros({4, 4, 3});
  f.depth_conf = Tensor::from_vector(std::vector<float>(16, 2.0f), {4, 4});
  const std::string m = encode_frame(f, 1);
  EXPECT_THROW(decode_frame(std::string_view(m).substr(0, m.size() - 8)), Error);
}
