// The low-memory profile (StreamOptions::low_memory, option memory_profile
// low) on the CPU backend, which shares the mechanism with the GPU's: the
// scale phase's buffers are gone before the first streamed frame allocates
// its own, and the results are exactly those of the default profile.
#include "backend/backend.h"
#include "checkpoint/checkpoint.h"
#include "model/streaming_model.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <random>

using namespace lingbot;

namespace {

struct Fixture {
  ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  io::StateDict weights = io::load_state_dict(test::fixture_path("model_small/weights.pt"));
};

std::vector<Tensor> random_frames(int n, int h, int w, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<Tensor> frames;
  for (int i = 0; i < n; ++i) {
    Tensor f = Tensor::empty({3, h, w});
    for (int64_t k = 0; k < f.numel(); ++k) f.f32()[k] = u(rng);
    frames.push_back(f);
  }
  return frames;
}

std::vector<FrameResult> stream(StreamingModel& m, const std::vector<Tensor>& frames) {
  std::vector<FrameResult> out;
  for (const Tensor& f : frames)
    for (FrameResult& r : m.push(f)) out.push_back(std::move(r));
  for (FrameResult& r : m.finish()) out.push_back(std::move(r));
  return out;
}

}  // namespace

TEST(LowMemory, GivesTheDefaultProfilesResultsExactly) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  for (const int depth : {0, 2}) {
    StreamOptions opt = StreamOptions::from_config(fx.config);
    opt.pipeline_depth = depth;
    opt.keyframe_interval = 2;
    StreamOptions low = opt;
    low.low_memory = true;
    StreamingModel standard(*be, fx.weights, fx.config, opt);
    StreamingModel lean(*be, fx.weights, fx.config, low);
    // Two videos each: the second scale phase follows a reset().
    for (const uint32_t seed : {1u, 2u}) {
      const auto frames = random_frames(opt.num_scale_frames + 6, 42, 56, seed);
      const auto expected = stream(standard, frames);
      const auto got = stream(lean, frames);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].pose_enc, expected[i].pose_enc) << "depth " << depth << ", frame " << i;
        EXPECT_EQ(test::max_abs_diff(got[i].depth, expected[i].depth), 0.0) << "depth " << depth << ", frame " << i;
        EXPECT_EQ(test::max_abs_diff(got[i].world_points, expected[i].world_points), 0.0);
      }
      standard.reset();
      lean.reset();
    }
  }
}

TEST(LowMemory, FreesTheScalePhaseBeforeTheFirstStreamedFrame) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  StreamOptions opt = StreamOptions::from_config(fx.config);
  opt.pipeline_depth = 0;
  StreamOptions low = opt;
  low.low_memory = true;
  StreamingModel standard(*be, fx.weights, fx.config, opt);
  StreamingModel lean(*be, fx.weights, fx.config, low);
  const auto frames = random_frames(opt.num_scale_frames + 3, 42, 56, 3);
  const auto push_up_to = [&](StreamingModel& m, int count) {
    for (int i = static_cast<int>(m.frames_pushed()); i < count; ++i) m.push(frames[static_cast<size_t>(i)]);
  };
  const int scale = opt.num_scale_frames;
  push_up_to(standard, scale);
  push_up_to(lean, scale);
  const size_t scale_phase = standard.workspace_bytes();
  EXPECT_EQ(lean.workspace_bytes(), scale_phase) << "the scale phase itself is the same in both profiles";
  // After the first streamed frame the default profile still holds the
  // scale phase's buffers beside the streamed frame's; the low one holds
  // only the latter, which is what the default holds once it has freed
  // them (after the second streamed frame).
  push_up_to(standard, scale + 1);
  push_up_to(lean, scale + 1);
  const size_t lean_first = lean.workspace_bytes();
  EXPECT_GT(standard.workspace_bytes(), scale_phase) << "both phases' buffers at once";
  EXPECT_LT(lean_first, scale_phase);
  push_up_to(standard, scale + 2);
  push_up_to(lean, scale + 2);
  EXPECT_EQ(standard.workspace_bytes(), lean_first);
  EXPECT_EQ(lean.workspace_bytes(), lean_first);
}
