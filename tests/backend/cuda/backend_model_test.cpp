// End to end on the GPU: the small LingBot-Map of tests/fixtures/model_small
// (every part present, fixed random weights, 14 real frames, scale 3, window
// 4, five KV-cache variants; see tests/model/parity_test.cpp) run by the CUDA
// backend, bfloat16 aggregator and float32 (TF32) heads, against upstream's
// float32 outputs, with the bars of issue 5 for the bf16 path: pose
// encodings within 1e-2 and depth (and confidence) within 2e-2 relative per
// tensor. Both cache layouts; they must also agree with each other.
// Every error is printed, so a failure shows how far off each output is.
#include "backend_test_support.h"
#include "backend/backend.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "model/streaming_model.h"
#include "small_model_fixture.h"
#include "test_support.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace lingbot::cuda::backend_test {
namespace {

constexpr double kPoseBar = 1e-2;
constexpr double kDepthBar = 2e-2;

std::string fixture(const std::string& name) { return lingbot::test::small_fixture(name); }
using lingbot::test::read_json;

// How run_on_gpu streams the small model: the options that the tests below
// vary, the rest the variant's.
struct RunSetup {
  kv::Layout layout = kv::Layout::Paged;
  int pipeline_depth = 0;
  kv::KvDtype kv_dtype = kv::KvDtype::Auto;
  bool on_cpu = false;  // the CPU backend instead (the fp8 comparison below)
  StreamOptions::HeadWeights head = StreamOptions::HeadWeights::Auto;
  int depth_head_batch = 0;
  bool depth_head_bf16 = false;
};

// pose_enc, pose_enc_iter and the depth maps the variant's reference holds.
std::map<std::string, Tensor> run_on_gpu(const nlohmann::json& variant, int num_scale_frames, int H, int W,
                                         const RunSetup& run = {}) {
  const ModelConfig config = ModelConfig::from_file(fixture("config.json"));
  const io::StateDict weights = io::load_state_dict(fixture("weights.pt"));
  StreamOptions options = lingbot::test::variant_options(config, variant, num_scale_frames, run.layout);
  options.pipeline_depth = run.pipeline_depth;
  options.cache.dtype = run.kv_dtype;
  options.camera_head_weights = run.head;
  options.depth_head_batch = run.depth_head_batch;
  options.depth_head_bf16 = run.depth_head_bf16;
  std::unique_ptr<Backend> cpu_backend = run.on_cpu ? make_cpu_backend(0) : nullptr;
  StreamingModel model(run.on_cpu ? *cpu_backend : gpu(), weights, config, options);
  const std::vector<FrameResult> results = lingbot::test::stream_all(model, lingbot::test::small_model_frames());

  std::map<std::string, Tensor> out;
  const int64_t S = static_cast<int64_t>(results.size());
  const int64_t iters = static_cast<int64_t>(results.at(0).pose_enc_iterations.size());
  Tensor pose = Tensor::empty({S, 9}), pose_iter = Tensor::empty({S, iters, 9});
  for (int64_t i = 0; i < S; ++i) {
    const FrameResult& r = results[static_cast<size_t>(i)];
    std::copy_n(r.pose_enc.data(), 9, pose.f32() + i * 9);
    for (int64_t it = 0; it < iters; ++it)
      std::copy_n(r.pose_enc_iterations[static_cast<size_t>(it)].data(), 9, pose_iter.f32() + (i * iters + it) * 9);
  }
  out["pose_enc"] = pose;
  out["pose_enc_iter"] = pose_iter;
  if (variant["name"] == "default") {
    Tensor depth = Tensor::empty({S, H, W}), conf = Tensor::empty({S, H, W});
    for (int64_t i = 0; i < S; ++i) {
      std::copy_n(results[static_cast<size_t>(i)].depth.f32(), H * W, depth.f32() + i * H * W);
      std::copy_n(results[static_cast<size_t>(i)].depth_conf.f32(), H * W, conf.f32() + i * H * W);
    }
    out["depth"] = depth;
    out["depth_conf"] = conf;
  } else {
    for (int fr : variant["depth_frames"]) {
      out["depth_f" + std::to_string(fr)] = results.at(static_cast<size_t>(fr)).depth;
      out["depth_conf_f" + std::to_string(fr)] = results.at(static_cast<size_t>(fr)).depth_conf;
    }
  }
  return out;
}

// The manifest's entry for one variant (null if none has that name).
nlohmann::json variant_named(const nlohmann::json& manifest, const std::string& name) {
  for (const auto& v : manifest["variants"])
    if (v["name"] == name) return v;
  return nullptr;
}

// One variant of the small model's fixtures: its reference outputs, the
// frames' size and the scale frames, and runs of it on the GPU.
struct SmallCase {
  nlohmann::json variant;
  io::StateDict reference;
  int H = 0, W = 0, S = 0;
  explicit SmallCase(const std::string& name) {
    const nlohmann::json manifest = read_json(fixture("manifest.json"));
    variant = variant_named(manifest, name);
    LB_CHECK(!variant.is_null(), "the fixtures' manifest has no variant {}", name);
    reference = io::load_state_dict(fixture(variant["file"]));
    H = manifest["height"];
    W = manifest["width"];
    S = manifest["num_scale_frames"];
  }
  std::map<std::string, Tensor> run(const RunSetup& setup = {}) const { return run_on_gpu(variant, S, H, W, setup); }
  Tensor expected(const std::string& name) const { return reference.at(name).to_dtype(DType::F32); }
};

class CudaBackendModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaBackendModel, Bf16PathMeetsTheIssueBars) {
  LB_REQUIRE_CUDA_DEVICE();
  const SmallCase c(GetParam());

  std::map<std::string, Tensor> by_layout[2];
  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    by_layout[static_cast<int>(layout)] = c.run({.layout = layout});
    for (const auto& [name, ours] : by_layout[static_cast<int>(layout)]) {
      const Tensor theirs = c.expected(name);
      ASSERT_EQ(ours.numel(), theirs.numel()) << name;
      const double err = lingbot::test::relative_error(ours, theirs);
      const double bar = name.rfind("pose", 0) == 0 ? kPoseBar : kDepthBar;
      EXPECT_LT(err, bar) << GetParam() << " / " << kv::layout_name(layout) << ": " << name;
      std::printf("  cuda %-24s %-6s %-16s vs upstream fp32 %.3g (bar %.0e)\n", GetParam().c_str(),
                  std::string(kv::layout_name(layout)).c_str(), name.c_str(), err, bar);
    }
  }
  // Same keys in another order; in bf16 the rounding of the attention
  // outputs differs, so the layouts agree to well within the bars only.
  for (const auto& [name, dense] : by_layout[0]) {
    const double err = lingbot::test::relative_error(by_layout[1].at(name), dense);
    EXPECT_LT(err, 0.5 * (name.rfind("pose", 0) == 0 ? kPoseBar : kDepthBar)) << GetParam() << ": paged vs dense "
                                                                               << name;
  }
}

// The fp8 KV cache (--kv-dtype fp8) on the GPU: the issue's bars against
// upstream fp32, dense == paged within half the bars, the distance from the
// GPU's bf16 cache reported, and the CPU fp8 path (the same codes for the
// same K/V; the rest of the model in bf16 vs fp32) within the bars.
TEST_P(CudaBackendModel, Fp8KvCacheMeetsTheIssueBars) {
  LB_REQUIRE_CUDA_DEVICE();
  const SmallCase c(GetParam());
  const auto bf16 = c.run();
  const auto cpu_fp8 = c.run({.kv_dtype = kv::KvDtype::Fp8, .on_cpu = true});
  std::map<std::string, Tensor> by_layout[2];
  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    by_layout[static_cast<int>(layout)] = c.run({.layout = layout, .kv_dtype = kv::KvDtype::Fp8});
    for (const auto& [name, ours] : by_layout[static_cast<int>(layout)]) {
      const double err = lingbot::test::relative_error(ours, c.expected(name));
      const double bar = name.rfind("pose", 0) == 0 ? kPoseBar : kDepthBar;
      const double from_bf16 = lingbot::test::relative_error(ours, bf16.at(name));
      const double from_cpu = lingbot::test::relative_error(ours, cpu_fp8.at(name));
      EXPECT_LT(err, bar) << GetParam() << " / " << kv::layout_name(layout) << ": " << name;
      EXPECT_LT(from_cpu, bar) << GetParam() << " / " << kv::layout_name(layout) << ": " << name << " vs cpu fp8";
      std::printf("  cuda fp8 kv %-24s %-6s %-16s vs upstream fp32 %.3g (bar %.0e), vs bf16 kv %.3g, vs cpu fp8 %.3g\n",
                  GetParam().c_str(), std::string(kv::layout_name(layout)).c_str(), name.c_str(), err, bar, from_bf16,
                  from_cpu);
    }
  }
  for (const auto& [name, dense] : by_layout[0]) {
    const double err = lingbot::test::relative_error(by_layout[1].at(name), dense);
    EXPECT_LT(err, 0.5 * (name.rfind("pose", 0) == 0 ? kPoseBar : kDepthBar)) << GetParam() << ": paged vs dense "
                                                                               << name;
  }
}

// The camera head's matrices kept in bfloat16 (camera_head_weights bf16, the
// low-memory profile's default) through the weight-streaming kernel's bf16
// variant, with fp8 KV as the profile has it: within the bars of upstream
// fp32, moved from the float32 head by the weights' rounding only (the
// depth outputs not at all: the depth head never reads the camera head).
TEST_P(CudaBackendModel, CameraHeadBf16WeightsMeetTheBar) {
  LB_REQUIRE_CUDA_DEVICE();
  const SmallCase c(GetParam());
  using HW = StreamOptions::HeadWeights;
  const auto f32_head = c.run({.pipeline_depth = 2, .kv_dtype = kv::KvDtype::Fp8, .head = HW::F32});
  const auto bf16_head = c.run({.pipeline_depth = 2, .kv_dtype = kv::KvDtype::Fp8, .head = HW::Bf16});
  for (const auto& [name, ours] : bf16_head) {
    const double err = lingbot::test::relative_error(ours, c.expected(name));
    const double bar = name.rfind("pose", 0) == 0 ? kPoseBar : kDepthBar;
    const double moved = lingbot::test::relative_error(ours, f32_head.at(name));
    EXPECT_LT(err, bar) << GetParam() << ": " << name;
    if (name.rfind("pose", 0) == 0) {
      EXPECT_GT(moved, 1e-5) << GetParam() << ": " << name << " (were the weights rounded?)";
    } else {
      EXPECT_EQ(moved, 0.0) << GetParam() << ": " << name;
    }
    std::printf("  cuda camera head bf16, fp8 kv %-24s %-16s vs upstream fp32 %.3g (bar %.0e), vs float32 head %.3g\n",
                GetParam().c_str(), name.c_str(), err, bar, moved);
  }
}

// Deferred heads (pipeline depth 2: a frame's heads run as a side branch of
// the next frame's captured step, the camera head's KV cache on the side
// stream) give the results of the in-order steps (depth 0). Both run the
// same kernels on the same data, so they agree to float32 rounding.
TEST_P(CudaBackendModel, DeferredHeadsGiveTheInOrderResults) {
  LB_REQUIRE_CUDA_DEVICE();
  const SmallCase c(GetParam());
  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    const auto in_order = c.run({.layout = layout});
    const auto deferred = c.run({.layout = layout, .pipeline_depth = 2});
    for (const auto& [name, want] : in_order) {
      const double err = lingbot::test::relative_error(deferred.at(name), want);
      EXPECT_LT(err, 1e-5) << GetParam() << " / " << kv::layout_name(layout) << ": " << name;
      std::printf("  cuda %-24s %-6s %-16s deferred heads vs in order %.3g\n", GetParam().c_str(),
                  std::string(kv::layout_name(layout)).c_str(), name.c_str(), err);
    }
  }
}

// The scale phase's depth head in batches (the GPU's default, here all 3
// scale frames in one pass; 2 leaves a last batch of one) against frame by
// frame. cuDNN may pick another algorithm for another batch, so the bar is
// the TF32 convolutions' rounding (backend_test_support.h), not bit-identity.
TEST_P(CudaBackendModel, DepthHeadBatchesGiveTheFrameByFrameResults) {
  LB_REQUIRE_CUDA_DEVICE();
  const SmallCase c(GetParam());
  const auto run = [&](int batch) {
    return c.run({.pipeline_depth = 2, .depth_head_batch = batch});
  };
  const auto frame_by_frame = run(1);
  for (int batch : {0, 2}) {
    const auto batched = run(batch);
    for (const auto& [name, want] : frame_by_frame) {
      const double err = lingbot::test::relative_error(batched.at(name), want);
      EXPECT_LT(err, kTf32Bound) << GetParam() << ": " << name << ", depth_head_batch " << batch;
      std::printf("  cuda %-24s %-16s depth_head_batch %d vs 1: %.3g\n", GetParam().c_str(), name.c_str(), batch,
                  err);
    }
  }
}

// The depth head in bfloat16 (depth_head_dtype bf16): within the bars of
// upstream fp32, really bf16 (moved from the float32 head by more than TF32
// rounding would), and the poses untouched (the camera head never reads the
// depth head). The pipeline-depth-2 run also covers the deferred heads.
TEST_P(CudaBackendModel, DepthHeadInBf16MeetsTheBar) {
  LB_REQUIRE_CUDA_DEVICE();
  const SmallCase c(GetParam());
  const auto f32_head = c.run({.pipeline_depth = 2});
  const auto bf16_head = c.run({.pipeline_depth = 2, .depth_head_bf16 = true});
  for (const auto& [name, ours] : bf16_head) {
    const double err = lingbot::test::relative_error(ours, c.expected(name));
    const bool pose = name.rfind("pose", 0) == 0;
    const double bar = pose ? kPoseBar : kDepthBar;
    const double moved = lingbot::test::relative_error(ours, f32_head.at(name));
    EXPECT_LT(err, bar) << GetParam() << ": " << name;
    if (pose) {
      EXPECT_EQ(moved, 0.0) << GetParam() << ": " << name;
    } else {
      EXPECT_GT(moved, 1e-4) << GetParam() << ": " << name << " (were the maps bfloat16?)";
    }
    std::printf("  cuda depth head bf16 %-24s %-16s vs upstream fp32 %.3g (bar %.0e), vs float32 head %.3g\n",
                GetParam().c_str(), name.c_str(), err, bar, moved);
  }
}

INSTANTIATE_TEST_SUITE_P(SmallModel, CudaBackendModel,
                         ::testing::Values("default", "keyframe2", "camera_only", "no_cross_frame_special",
                                           "no_scale_frames_in_cache"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lingbot::cuda::backend_test
