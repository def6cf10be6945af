// The CPU bf16 mode (--cpu-dtype bf16) against upstream PyTorch fp32, on the
// small model's fixtures (tests/fixtures/model_small, see parity_test.cpp):
// the quality bar of a bf16 path, as the GPU's: pose_enc within 1e-2 and
// depth within 2e-2 relative error (||ours - ref|| / ||ref||) of upstream's
// fp32 outputs; depth_conf and world points are reported. Also: the bf16
// mode really runs in bf16 (its outputs differ from the fp32 mode's by far
// more than fp32 rounding, and its matrix weights take half the memory).
// Skipped on CPUs without AVX512-BF16, where make_cpu_backend refuses bf16.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/onednn_matmul.h"
#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "model/streaming_model.h"
#include "small_model_fixture.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>

using namespace lingbot;

namespace {

constexpr double kPoseTolerance = 1e-2;
constexpr double kDepthTolerance = 2e-2;

std::string fixture(const std::string& name) { return test::small_fixture(name); }

struct Outputs {
  Tensor pose_enc, depth, depth_conf, world_points_last;
  size_t weight_bytes = 0;
};

Outputs run_small_model(std::string_view dtype, kv::Layout layout) {
  const nlohmann::json manifest = test::read_json(fixture("manifest.json"));
  nlohmann::json variant;
  for (const auto& v : manifest["variants"])
    if (v["name"] == "default") variant = v;
  const ModelConfig config = ModelConfig::from_file(fixture("config.json"));
  const io::StateDict weights = io::load_state_dict(fixture("weights.pt"));
  const std::vector<Tensor> frames = test::small_model_frames();
  auto backend = make_cpu_backend(0, "auto", dtype);
  StreamingModel model(*backend, weights, config,
                       test::variant_options(config, variant, manifest["num_scale_frames"], layout));
  const std::vector<FrameResult> results = test::stream_all(model, frames);
  const int64_t S = static_cast<int64_t>(results.size());
  const int64_t H = manifest["height"], W = manifest["width"];
  Outputs out;
  out.pose_enc = Tensor::empty({S, 9});
  out.depth = Tensor::empty({S, H, W});
  out.depth_conf = Tensor::empty({S, H, W});
  for (int64_t i = 0; i < S; ++i) {
    const FrameResult& r = results[static_cast<size_t>(i)];
    std::copy_n(r.pose_enc.data(), 9, out.pose_enc.f32() + i * 9);
    std::copy_n(r.depth.f32(), H * W, out.depth.f32() + i * H * W);
    std::copy_n(r.depth_conf.f32(), H * W, out.depth_conf.f32() + i * H * W);
  }
  out.world_points_last = results.back().world_points;
  out.weight_bytes = model.weight_bytes();
  return out;
}

}  // namespace

TEST(ParityBf16, SmallModelWithinTheBf16BarOfUpstreamFp32) {
  if (!cpu::cpu_has_bf16_arithmetic()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  const nlohmann::json manifest = test::read_json(fixture("manifest.json"));
  const io::StateDict ref = io::load_state_dict(fixture("default.safetensors"));
  const auto reference = [&](const std::string& name) { return ref.at(name).to_dtype(DType::F32); };
  const int64_t last = static_cast<int64_t>(manifest["frames"].get<int>()) - 1;

  const Outputs fp32 = run_small_model("fp32", kv::Layout::Paged);
  for (const kv::Layout layout : {kv::Layout::Paged, kv::Layout::Dense}) {
    const Outputs bf16 = run_small_model("bf16", layout);
    const std::map<std::string, std::pair<double, double>> errors{
        {"pose_enc", {test::relative_error(bf16.pose_enc, reference("pose_enc")), kPoseTolerance}},
        {"depth", {test::relative_error(bf16.depth, reference("depth")), kDepthTolerance}},
        {"depth_conf", {test::relative_error(bf16.depth_conf, reference("depth_conf")), 0}},
        {"world_points_last",
         {test::relative_error(bf16.world_points_last, reference("world_points_f" + std::to_string(last))), 0}},
    };
    for (const auto& [name, e] : errors) {
      const auto [err, bar] = e;
      if (bar > 0) {
        EXPECT_LT(err, bar) << kv::layout_name(layout) << ": " << name << " relative error " << err;
      }
      std::printf("  bf16 %-6s %-18s vs upstream fp32 %.3g%s\n", std::string(kv::layout_name(layout)).c_str(),
                  name.c_str(), err, bar > 0 ? "" : " (reported)");
    }
    // It is bf16 arithmetic, not the fp32 path under another name: fp32
    // rounding would put the two within ~1e-6.
    const double from_fp32 = test::relative_error(bf16.pose_enc, fp32.pose_enc);
    std::printf("  bf16 %-6s pose_enc vs our fp32 %.3g\n", std::string(kv::layout_name(layout)).c_str(), from_fp32);
    EXPECT_GT(from_fp32, 1e-4);
    // The aggregator's matrices (nearly all of the weights) take half the bytes.
    EXPECT_LT(static_cast<double>(bf16.weight_bytes), 0.75 * static_cast<double>(fp32.weight_bytes))
        << bf16.weight_bytes << " vs " << fp32.weight_bytes;
  }
}

TEST(ParityBf16, UnknownCpuDtypeIsRefusedByName) {
  try {
    make_cpu_backend(0, "auto", "fp16");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-dtype fp16"), std::string::npos) << e.what();
  }
}

TEST(ParityBf16, Bf16WithTheAvx2KernelsIsRefusedByName) {
  if (!cpu::cpu_has_bf16_arithmetic()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  // Refused before any backend is made, so oneDNN's ISA is not capped here.
  try {
    make_cpu_backend(0, "avx2", "bf16");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-dtype bf16"), std::string::npos) << e.what();
  }
}
