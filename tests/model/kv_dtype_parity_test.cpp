// The KV cache's storage types (--kv-dtype bf16 | fp8) on the small model
// against upstream fp32: the quality bars of issue #20 (pose_enc <= 1e-2,
// depth <= 2e-2 relative, ||ours - ref|| / ||ref||), the other tensors and
// the distance from the float32 cache reported, and dense == paged in each
// storage type.
//
// Dense and paged: both stores round a token row from that row alone (a
// scale per token and head for fp8, kv/fp8_e4m3.h), so given the same K/V
// they hold bit-identical values and their attention differs only in the
// order of the softmax sums, at fp32 rounding (tests/kv: the attention
// property test, every storage type). Through the network, though, those
// fp32-rounding differences reach the next global block's K/V, and where one
// lands on the other side of a bf16 or e4m3 rounding boundary that element
// differs by a whole storage step (2^-9 or 2^-4 relative). So end to end the
// layouts agree to a few such flips: measured on this model (2026-12-02)
// at most 5.8e-5 (bf16) and 1.2e-4 (fp8), world points the most sensitive,
// against 2e-5 for the float32 cache, and 7-70x below each tensor's
// distance from the float32 cache run; bounded here at 2e-4 and 1e-3.
#include "backend/backend.h"
#include "checkpoint/checkpoint.h"
#include "model/streaming_model.h"
#include "small_model_fixture.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

using namespace lingbot;

namespace {

constexpr double kPoseBar = 1e-2;
constexpr double kDepthBar = 2e-2;

struct Small {
  nlohmann::json manifest = test::read_json(test::small_fixture("manifest.json"));
  nlohmann::json variant;
  ModelConfig config = ModelConfig::from_file(test::small_fixture("config.json"));
  io::StateDict weights = io::load_state_dict(test::small_fixture("weights.pt"));
  std::vector<Tensor> frames = test::small_model_frames();
  io::StateDict ref;
  Small() {
    for (const auto& v : manifest["variants"])
      if (v["name"] == "default") variant = v;
    ref = io::load_state_dict(test::small_fixture(variant["file"]));
  }
  Tensor reference(const std::string& name) const { return ref.at(name).to_dtype(DType::F32); }
};

// pose_enc, depth, depth_conf and world points of every frame, stacked.
std::map<std::string, Tensor> run(const Small& s, kv::Layout layout, kv::KvDtype dtype) {
  auto backend = make_cpu_backend(0);
  StreamOptions opt = test::variant_options(s.config, s.variant, s.manifest["num_scale_frames"], layout);
  opt.cache.dtype = dtype;
  StreamingModel model(*backend, s.weights, s.config, opt);
  const std::vector<FrameResult> results = test::stream_all(model, s.frames);
  const auto S = static_cast<int64_t>(results.size());
  const int64_t H = s.manifest["height"], W = s.manifest["width"];
  std::map<std::string, Tensor> out;
  out["pose_enc"] = Tensor::empty({S, 9});
  out["depth"] = Tensor::empty({S, H, W});
  out["depth_conf"] = Tensor::empty({S, H, W});
  for (int64_t i = 0; i < S; ++i) {
    const FrameResult& r = results[static_cast<size_t>(i)];
    std::copy_n(r.pose_enc.data(), 9, out["pose_enc"].f32() + i * 9);
    std::copy_n(r.depth.f32(), H * W, out["depth"].f32() + i * H * W);
    std::copy_n(r.depth_conf.f32(), H * W, out["depth_conf"].f32() + i * H * W);
  }
  for (int64_t f : {int64_t{0}, S / 2, S - 1})
    out["world_points_f" + std::to_string(f)] = results[static_cast<size_t>(f)].world_points;
  return out;
}

}  // namespace

class KvDtypeParity : public ::testing::TestWithParam<kv::KvDtype> {};

TEST_P(KvDtypeParity, MeetsTheQualityBarsInBothLayouts) {
  const kv::KvDtype dtype = GetParam();
  const Small s;
  const auto fp32_cache = run(s, kv::Layout::Paged, kv::KvDtype::Auto);
  const auto bf16_cache = run(s, kv::Layout::Paged, kv::KvDtype::Bf16);
  std::map<std::string, Tensor> by_layout[2];
  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    by_layout[static_cast<int>(layout)] = run(s, layout, dtype);
    for (const auto& [name, ours] : by_layout[static_cast<int>(layout)]) {
      const double err = test::relative_error(ours, s.reference(name));
      const double from_fp32 = test::relative_error(ours, fp32_cache.at(name));
      const double from_bf16 = test::relative_error(ours, bf16_cache.at(name));
      std::printf("  kv %-4s %-6s %-18s vs upstream %.3g   vs the float32 cache %.3g   vs the bf16 cache %.3g\n",
                  std::string(kv::kv_dtype_name(dtype)).c_str(), std::string(kv::layout_name(layout)).c_str(),
                  name.c_str(), err, from_fp32, from_bf16);
      if (name == "pose_enc") EXPECT_LT(err, kPoseBar) << name;
      if (name == "depth") EXPECT_LT(err, kDepthBar) << name;
    }
  }
  for (const auto& [name, dense] : by_layout[0]) {
    const double err = test::relative_error(by_layout[1].at(name), dense);
    std::printf("  kv %-4s paged vs dense %-18s %.3g\n", std::string(kv::kv_dtype_name(dtype)).c_str(),
                name.c_str(), err);
    EXPECT_LT(err, dtype == kv::KvDtype::Fp8 ? 1e-3 : 2e-4) << "paged vs dense " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(SmallModel, KvDtypeParity, ::testing::Values(kv::KvDtype::Bf16, kv::KvDtype::Fp8),
                         [](const auto& info) { return std::string(kv::kv_dtype_name(info.param)); });
