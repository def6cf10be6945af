// Windowed mode against upstream's GCTStream.inference_windowed (fp32).
//
// tests/fixtures/model_small/window_*.safetensors were made by
// tools/reference/make_window_fixtures.py: upstream's own windowed inference
// (window list, fresh cache and scale phase per window, pairwise Sim(3),
// warp, stitching) on the small model and its 14 frames, for four settings
// (overlap from overlap_size and from overlap_keyframes, keyframe interval 1
// and 2, overlaps shorter and longer than the scale phase). Every window
// setting runs with both cache layouts; each tensor must be within 1e-4
// relative error of upstream's, the frame types and the window count exact.
#include "backend/backend.h"
#include "checkpoint/checkpoint.h"
#include "model/windowed_stream.h"
#include "small_model_fixture.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <map>

using namespace lingbot;

namespace {

constexpr double kTolerance = 1e-4;

struct WindowedRun {
  std::vector<FrameResult> results;
  std::vector<Similarity> alignments;
};

StreamOptions window_options(const ModelConfig& config, const nlohmann::json& manifest, const nlohmann::json& v,
                             kv::Layout layout) {
  StreamOptions o = StreamOptions::from_config(config);
  o.num_scale_frames = manifest["num_scale_frames"];
  o.cache.scale_frames = o.num_scale_frames;
  o.cache_layout = layout;
  o.keyframe_interval = v["keyframe_interval"];
  o.windowed = true;
  o.window.window_size = v["window_size"];
  o.window.overlap_size = v["overlap_size"];
  o.window.overlap_keyframes = v["overlap_keyframes"].is_null() ? 0 : int(v["overlap_keyframes"]);
  o.window_align = WindowAlign::Upstream;
  return o;
}

WindowedRun run_windowed(const StreamOptions& options, int pipeline_depth) {
  const ModelConfig config = ModelConfig::from_file(test::small_fixture("config.json"));
  const io::StateDict weights = io::load_state_dict(test::small_fixture("weights.pt"));
  auto backend = make_cpu_backend(0);
  StreamOptions o = options;
  o.pipeline_depth = pipeline_depth;
  WindowedStream stream(*backend, weights, config, o);
  WindowedRun run;
  for (const Tensor& frame : test::small_model_frames())
    for (FrameResult& r : stream.push(frame)) run.results.push_back(std::move(r));
  for (FrameResult& r : stream.finish()) run.results.push_back(std::move(r));
  run.alignments = stream.alignments();
  return run;
}

std::map<std::string, Tensor> outputs_of(const WindowedRun& run, const nlohmann::json& v) {
  const int64_t S = static_cast<int64_t>(run.results.size());
  std::map<std::string, Tensor> out;
  Tensor pose = Tensor::empty({S, 9}), ext = Tensor::empty({S, 3, 4}), intr = Tensor::empty({S, 3, 3});
  Tensor type = Tensor::empty({S});
  for (int64_t i = 0; i < S; ++i) {
    const FrameResult& r = run.results[static_cast<size_t>(i)];
    std::copy_n(r.pose_enc.data(), 9, pose.f32() + i * 9);
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 4; ++b) ext.f32()[i * 12 + a * 4 + b] = static_cast<float>(r.camera.camera_to_world[a][b]);
      for (int b = 0; b < 3; ++b) intr.f32()[i * 9 + a * 3 + b] = static_cast<float>(r.camera.intrinsic[a][b]);
    }
    type.f32()[i] = static_cast<float>(r.role);
  }
  out["pose_enc"] = pose;
  out["extrinsic"] = ext;
  out["intrinsic"] = intr;
  out["frame_type"] = type;
  const int64_t W = static_cast<int64_t>(run.alignments.size());
  Tensor scales = Tensor::empty({W}), transforms = Tensor::empty({W, 4, 4});
  for (int64_t w = 0; w < W; ++w) {
    const Similarity& s = run.alignments[static_cast<size_t>(w)];
    scales.f32()[w] = static_cast<float>(s.scale);
    float* T = transforms.f32() + w * 16;
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) T[a * 4 + b] = static_cast<float>(s.rotation[a][b]);
      T[a * 4 + 3] = static_cast<float>(s.translation[a]);
    }
    T[12] = T[13] = T[14] = 0.0f;
    T[15] = 1.0f;
  }
  out["chunk_scales"] = scales;
  out["chunk_transforms"] = transforms;
  for (int f : v["dense_frames"]) {
    const FrameResult& r = run.results[static_cast<size_t>(f)];
    out["depth_f" + std::to_string(f)] = r.depth;
    out["depth_conf_f" + std::to_string(f)] = r.depth_conf;
    out["world_points_f" + std::to_string(f)] = r.world_points;
  }
  return out;
}

class WindowedParity : public ::testing::TestWithParam<std::string> {};

TEST_P(WindowedParity, BothLayoutsMatchUpstream) {
  const nlohmann::json manifest = test::read_json(test::small_fixture("window_manifest.json"));
  nlohmann::json v;
  for (const auto& x : manifest["variants"])
    if (x["name"] == GetParam()) v = x;
  ASSERT_FALSE(v.is_null()) << GetParam();
  const ModelConfig config = ModelConfig::from_file(test::small_fixture("config.json"));
  const io::StateDict ref = io::load_state_dict(test::small_fixture(v["file"]));

  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    const WindowedRun run = run_windowed(window_options(config, manifest, v, layout), 2);
    ASSERT_EQ(run.results.size(), static_cast<size_t>(manifest["frames"]));
    for (size_t i = 0; i < run.results.size(); ++i) EXPECT_EQ(run.results[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(run.alignments.size(), v["windows"].size());
    for (const auto& [name, ours] : outputs_of(run, v)) {
      const Tensor theirs = ref.at(name).to_dtype(DType::F32);
      ASSERT_EQ(ours.numel(), theirs.numel()) << name;
      const double err = test::relative_error(ours, theirs);
      if (name == "frame_type") {
        EXPECT_EQ(err, 0.0) << name;
      } else {
        EXPECT_LT(err, kTolerance) << GetParam() << " / " << kv::layout_name(layout) << ": " << name;
      }
      std::printf("  %-12s %-6s %-22s vs upstream %.3g\n", GetParam().c_str(),
                  std::string(kv::layout_name(layout)).c_str(), name.c_str(), err);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Upstream, WindowedParity, ::testing::Values("w6_o4", "w5_okf2_kf2", "w8_o3", "w4_o2_kf2"));

// How far results trail their frames does not change them.
TEST(Windowed, PipelineDepthDoesNotChangeResults) {
  const nlohmann::json manifest = test::read_json(test::small_fixture("window_manifest.json"));
  const nlohmann::json& v = manifest["variants"][0];
  const ModelConfig config = ModelConfig::from_file(test::small_fixture("config.json"));
  const StreamOptions o = window_options(config, manifest, v, kv::Layout::Paged);
  const WindowedRun a = run_windowed(o, 0), b = run_windowed(o, 2);
  ASSERT_EQ(a.results.size(), b.results.size());
  for (size_t i = 0; i < a.results.size(); ++i) {
    EXPECT_EQ(a.results[i].pose_enc, b.results[i].pose_enc) << i;
    EXPECT_EQ(test::relative_error(a.results[i].depth, b.results[i].depth), 0.0) << i;
  }
}

// A video no longer than one window is one stream: windowed mode gives the
// streaming results unchanged (upstream aligns nothing then).
TEST(Windowed, OneWindowIsTheStream) {
  const nlohmann::json manifest = test::read_json(test::small_fixture("window_manifest.json"));
  const ModelConfig config = ModelConfig::from_file(test::small_fixture("config.json"));
  nlohmann::json v = manifest["variants"][0];
  v["window_size"] = 64;
  StreamOptions o = window_options(config, manifest, v, kv::Layout::Paged);
  const WindowedRun windowed = run_windowed(o, 2);
  o.windowed = false;
  const io::StateDict weights = io::load_state_dict(test::small_fixture("weights.pt"));
  auto backend = make_cpu_backend(0);
  StreamingModel model(*backend, weights, config, o);
  const std::vector<FrameResult> streamed = test::stream_all(model, test::small_model_frames());
  ASSERT_EQ(windowed.alignments.size(), 1u);
  ASSERT_EQ(windowed.results.size(), streamed.size());
  for (size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(windowed.results[i].pose_enc, streamed[i].pose_enc) << i;
    EXPECT_EQ(test::relative_error(windowed.results[i].world_points, streamed[i].world_points), 0.0) << i;
  }
}

}  // namespace
