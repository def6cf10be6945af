// --sky-masks reaches the viewer: the page's copy of a frame's confidence
// is 0 where the frame's mask is sky (value 0, upstream's cached-mask
// semantics), the run's own tensor keeps the model's values; and `view`
// names a missing mask folder in one line.
#include "app/live_view.h"
#include "output/png_writer.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace lingbot;

TEST(LiveView, SkyMasksZeroThePagesConfidenceOnly) {
  const std::string dir = std::string(::testing::TempDir()) + "/lingbot_live_view_sky";
  std::filesystem::create_directories(dir);
  // 4 x 3 frame: the top row is sky (0), the rest not (255).
  const uint8_t mask[12] = {0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255};
  io::write_png8(dir + "/frame_7.png", mask, 4, 3, 1);
  Tensor conf = Tensor::empty({3, 4});
  for (int i = 0; i < 12; ++i) conf.f32()[i] = 2.0f + i;
  viewer::FrameInput in;
  in.depth_conf = conf;
  mask_sky(in, io::SkyMasks(dir), "frame_7.png");
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(in.depth_conf.f32()[i], i < 4 ? 0.0f : 2.0f + i) << i;
    EXPECT_EQ(conf.f32()[i], 2.0f + i) << i;  // the run's outputs keep the model's confidence
  }
}

TEST(LiveView, ViewNamesAMissingSkyMaskFolder) {
  const test::CommandResult r =
      test::run_shell(std::string(LINGBOT_CLI_PATH) + " view /nonexistent/result --sky-masks /nonexistent/masks");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/masks"), std::string::npos) << r.output;
}
