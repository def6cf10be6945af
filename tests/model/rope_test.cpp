// The 3D RoPE table (model/rope.h) against a direct evaluation of its
// definition (upstream's RoPE3D: per axis, angle = position x
// theta^(-2i / dim) in float64, axes in the order time, height, width;
// special tokens at (t, t) in height and width, patch p at
// (num_special + p / gw, num_special + p % gw)), element by element.
#include "model/rope.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lingbot {
namespace {

TEST(Rope3dTable, EveryElementIsItsAngleEvaluatedDirectly) {
  const FrameGrid grid{6, 3, 5};
  const std::array<int, 3> fhw{8, 12, 12};
  const int head_dim = 32, angles = head_dim / 2;
  const double theta = 100.0;
  const int64_t first = 7;
  const int frames = 3;
  Tensor cos, sin;
  rope3d_table(grid, head_dim, fhw, theta, first, frames, cos, sin);
  ASSERT_EQ(cos.shape(), (Shape{int64_t{frames} * grid.tokens(), angles}));
  ASSERT_EQ(sin.shape(), cos.shape());
  for (int f = 0; f < frames; ++f) {
    for (int t = 0; t < grid.tokens(); ++t) {
      const bool special = t < grid.num_special;
      const int h = special ? t : grid.num_special + (t - grid.num_special) / grid.gw;
      const int w = special ? t : grid.num_special + (t - grid.num_special) % grid.gw;
      const double pos[3] = {static_cast<double>(first + f), static_cast<double>(h), static_cast<double>(w)};
      int j = 0;
      for (int a = 0; a < 3; ++a) {
        for (int i = 0; i < fhw[static_cast<size_t>(a)] / 2; ++i, ++j) {
          const double angle = pos[a] * std::pow(theta, -2.0 * i / fhw[static_cast<size_t>(a)]);
          const int64_t at = (int64_t{f} * grid.tokens() + t) * angles + j;
          // One float rounding of the float64 value; the frequencies may
          // differ from std::pow's in the last bits of a double.
          ASSERT_NEAR(cos.f32()[at], std::cos(angle), 1e-6) << "frame " << f << " token " << t << " angle " << j;
          ASSERT_NEAR(sin.f32()[at], std::sin(angle), 1e-6) << "frame " << f << " token " << t << " angle " << j;
        }
      }
    }
  }
}

TEST(Rope3dTable, AxisDimsThatDoNotFillTheHeadAreRefused) {
  Tensor cos, sin;
  EXPECT_THROW(rope3d_table(FrameGrid{6, 2, 2}, 32, {8, 8, 8}, 100.0, 0, 1, cos, sin), Error);
}

}  // namespace
}  // namespace lingbot
