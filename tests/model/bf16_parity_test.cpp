// The CPU bf16 mode (--cpu-dtype bf16) against upstream PyTorch fp32, on the
// small model's fixtures (tests/fixtures/model_small, see parity_test.cpp):
// the quality bar of a bf16 path, as the GPU's: pose_enc within 1e-2 and
// depth within 2e-2 relative error (||ours - ref|| / ||ref||) of upstream's
// fp32 outputs; depth_conf and world points are reported. Both kernels of
// the bf16 products run (cpu_backend.h, Bf16Products: oneDNN's bf16 matmul
// where the CPU has AVX512-BF16, and the widened sgemm everywhere). Also:
// the mode really is bf16 (its outputs differ from the fp32 mode's by far
// more than fp32 rounding, and its weights take much less memory).
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/linear_amx.h"
#include "backend/cpu/onednn_matmul.h"
#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "model/streaming_model.h"
#include "small_model_fixture.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <tuple>

using namespace lingbot;

namespace {

constexpr double kPoseTolerance = 1e-2;
constexpr double kDepthTolerance = 2e-2;

std::string fixture(const std::string& name) { return test::small_fixture(name); }

struct Outputs {
  Tensor pose_enc, depth, depth_conf, world_points_last;
  size_t weight_bytes = 0;
};

Outputs run_small_model(DType compute, cpu::Bf16Products products, kv::Layout layout,
                        StreamOptions::HeadWeights head = StreamOptions::HeadWeights::Auto,
                        bool depth_head_bf16 = false) {
  const nlohmann::json manifest = test::read_json(fixture("manifest.json"));
  nlohmann::json variant;
  for (const auto& v : manifest["variants"])
    if (v["name"] == "default") variant = v;
  const ModelConfig config = ModelConfig::from_file(fixture("config.json"));
  const io::StateDict weights = io::load_state_dict(fixture("weights.pt"));
  const std::vector<Tensor> frames = test::small_model_frames();
  auto backend = std::make_unique<cpu::CpuBackend>(0, cpu::resolve_isa("auto"), compute, products);
  StreamOptions options = test::variant_options(config, variant, manifest["num_scale_frames"], layout);
  options.camera_head_weights = head;
  options.depth_head_bf16 = depth_head_bf16;
  StreamingModel model(*backend, weights, config, options);
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
  const nlohmann::json manifest = test::read_json(fixture("manifest.json"));
  const io::StateDict ref = io::load_state_dict(fixture("default.safetensors"));
  const auto reference = [&](const std::string& name) { return ref.at(name).to_dtype(DType::F32); };
  const int64_t last = static_cast<int64_t>(manifest["frames"].get<int>()) - 1;

  const Outputs fp32 = run_small_model(DType::F32, cpu::Bf16Products::WidenedSgemm, kv::Layout::Paged);
  std::vector<cpu::Bf16Products> kernels{cpu::Bf16Products::WidenedSgemm};
  if (cpu::cpu_has_bf16_arithmetic()) {
    kernels.push_back(cpu::Bf16Products::OnednnBf16);
  } else {
    std::printf("  oneDNN bf16 matmul: this CPU lacks AVX512-BF16, skipped\n");
  }
  if (cpu::linear_amx_available()) {
    kernels.push_back(cpu::Bf16Products::AmxTiles);
  } else {
    std::printf("  AMX tiles: this CPU lacks AMX-BF16, skipped (the kernel's own tests run it emulated)\n");
  }
  for (const cpu::Bf16Products products : kernels) {
    // Both layouts on both kernels: with oneDNN's products on an AVX-512 CPU
    // the stores attend with bf16 products too (attention_bf16.h).
    for (const kv::Layout layout : {kv::Layout::Paged, kv::Layout::Dense}) {
      const Outputs bf16 = run_small_model(DType::BF16, products, layout);
      const std::string where = fmt::format("{}, {}", cpu::bf16_products_name(products), kv::layout_name(layout));
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
          EXPECT_LT(err, bar) << where << ": " << name << " relative error " << err;
        }
        std::printf("  %-30s %-18s vs upstream fp32 %.3g%s\n", where.c_str(), name.c_str(), err,
                    bar > 0 ? "" : " (reported)");
      }
      // It is bf16 arithmetic, not the fp32 path under another name: fp32
      // rounding would put the two within ~1e-6.
      const double from_fp32 = test::relative_error(bf16.pose_enc, fp32.pose_enc);
      std::printf("  %-30s pose_enc vs our fp32 %.3g\n", where.c_str(), from_fp32);
      EXPECT_GT(from_fp32, 1e-4) << where;
      // The aggregator's matrices (nearly all of the weights) take half the bytes.
      EXPECT_LT(static_cast<double>(bf16.weight_bytes), 0.75 * static_cast<double>(fp32.weight_bytes))
          << bf16.weight_bytes << " vs " << fp32.weight_bytes;
    }
  }
}

// The camera head's matrices kept in bfloat16 (camera_head_weights; the
// default of the bf16 mode above and of the low-memory profile): its
// products stay float32, so only the weights' rounding moves the poses. In
// the fp32 mode (the GPU's camera head computes in float32 too) and in the
// bf16 mode against its own float32 camera head; the bars are the bf16 bars.
TEST(ParityBf16, CameraHeadWeightsInBf16WithinTheBar) {
  using H = StreamOptions::HeadWeights;
  const io::StateDict ref = io::load_state_dict(fixture("default.safetensors"));
  const Tensor pose_ref = ref.at("pose_enc").to_dtype(DType::F32);
  const Tensor depth_ref = ref.at("depth").to_dtype(DType::F32);
  for (const DType compute : {DType::F32, DType::BF16}) {
    const Outputs f32_head = run_small_model(compute, cpu::Bf16Products::WidenedSgemm, kv::Layout::Paged, H::F32);
    const Outputs bf16_head = run_small_model(compute, cpu::Bf16Products::WidenedSgemm, kv::Layout::Paged, H::Bf16);
    const double pose = test::relative_error(bf16_head.pose_enc, pose_ref);
    const double depth = test::relative_error(bf16_head.depth, depth_ref);
    const double moved = test::relative_error(bf16_head.pose_enc, f32_head.pose_enc);
    std::printf("  %s mode, camera head bf16: pose_enc vs upstream fp32 %.3g (float32 head %.3g), depth %.3g; "
                "pose_enc moved %.3g by the head's weights\n",
                dtype_name(compute).data(), pose, test::relative_error(f32_head.pose_enc, pose_ref), depth, moved);
    EXPECT_LT(pose, kPoseTolerance);
    EXPECT_LT(depth, kDepthTolerance);
    // The weights really were rounded (float32 rounding alone is ~1e-7) ...
    EXPECT_GT(moved, 1e-5);
    // ... and the depth head never reads the camera head.
    EXPECT_EQ(test::max_abs_diff(bf16_head.depth, f32_head.depth), 0.0);
    EXPECT_LT(bf16_head.weight_bytes, f32_head.weight_bytes);
  }
}

// The depth head in bfloat16 (depth_head_dtype bf16) in the bf16 mode: the
// CPU computes its maps widened, each op's output rounded to bfloat16 as on
// the GPU. Within the depth bar of upstream fp32, moved from the float32
// head by the maps' rounding, the poses untouched, and the head's
// convolution weights in half the bytes.
TEST(ParityBf16, DepthHeadInBf16WithinTheBar) {
  using H = StreamOptions::HeadWeights;
  const io::StateDict ref = io::load_state_dict(fixture("default.safetensors"));
  const Tensor depth_ref = ref.at("depth").to_dtype(DType::F32);
  const Outputs f32_head = run_small_model(DType::BF16, cpu::Bf16Products::WidenedSgemm, kv::Layout::Paged);
  const Outputs bf16_head =
      run_small_model(DType::BF16, cpu::Bf16Products::WidenedSgemm, kv::Layout::Paged, H::Auto, true);
  const double depth = test::relative_error(bf16_head.depth, depth_ref);
  const double conf = test::relative_error(bf16_head.depth_conf, ref.at("depth_conf").to_dtype(DType::F32));
  const double moved = test::relative_error(bf16_head.depth, f32_head.depth);
  std::printf("  depth head bf16: depth vs upstream fp32 %.3g (float32 head %.3g), depth_conf %.3g; depth moved %.3g\n",
              depth, test::relative_error(f32_head.depth, depth_ref), conf, moved);
  EXPECT_LT(depth, kDepthTolerance);
  EXPECT_GT(moved, 1e-4);  // float32 maps would be within ~1e-6
  EXPECT_EQ(test::max_abs_diff(bf16_head.pose_enc, f32_head.pose_enc), 0.0);
  EXPECT_LT(bf16_head.weight_bytes, f32_head.weight_bytes);
}

// The option's rules: channels last only, and a backend computing in
// bfloat16 (the CPU's fp32 mode has no bfloat16 maps).
TEST(ParityBf16, DepthHeadInBf16IsRefusedWhereItCannotRun) {
  const ModelConfig config = ModelConfig::from_file(fixture("config.json"));
  const io::StateDict weights = io::load_state_dict(fixture("weights.pt"));
  const auto refused = [&](DType compute, StreamOptions::MapsLayout layout, const std::string& says) {
    auto backend = std::make_unique<cpu::CpuBackend>(0, cpu::resolve_isa("auto"), compute,
                                                     cpu::Bf16Products::WidenedSgemm);
    StreamOptions options = StreamOptions::from_config(config);
    options.depth_head_bf16 = true;
    options.depth_head_layout = layout;
    try {
      StreamingModel model(*backend, weights, config, options);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(DType::F32, StreamOptions::MapsLayout::ChannelsLast, "computes in bfloat16");
  refused(DType::BF16, StreamOptions::MapsLayout::ChannelsFirst, "depth_head_layout nhwc");
}

TEST(ParityBf16, UnknownCpuDtypeIsRefusedByName) {
  try {
    make_cpu_backend(0, "auto", "fp16");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-dtype fp16"), std::string::npos) << e.what();
  }
}

// --cpu-bf16-products picks the bf16 mode's product kernel (each one named
// in the run header), and one this CPU cannot run is an error naming the flag.
TEST(ParityBf16, ProductsOptionPicksTheKernelOrSaysWhyNot) {
  try {
    make_cpu_backend(0, "auto", "bf16", "mkl");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-bf16-products mkl"), std::string::npos) << e.what();
  }
  EXPECT_NE(make_cpu_backend(0, "auto", "bf16", "widened")->name().find("widened"), std::string::npos);
  for (const auto& [choice, available, says] :
       {std::tuple{"onednn", cpu::cpu_has_bf16_arithmetic(), "bf16: oneDNN matmul"},
        std::tuple{"amx", cpu::linear_amx_available(), "Linear layers and convolutions on AMX tiles"}}) {
    if (available) {
      const std::string name = make_cpu_backend(0, "auto", "bf16", choice)->name();
      EXPECT_NE(name.find(says), std::string::npos) << name;
    } else {
      try {
        make_cpu_backend(0, "auto", "bf16", choice);
        ADD_FAILURE() << choice << ": expected an error on this CPU";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("--cpu-bf16-products ") + choice), std::string::npos)
            << e.what();
      }
    }
  }
}

TEST(ParityBf16, RunsWithTheAvx2KernelsByWideningItsProducts) {
  // --cpu-isa avx2 --cpu-dtype bf16: AVX2 has no bf16 products, so the
  // widened sgemm; the run header says so. (oneDNN asked first, so that
  // the AVX2 backend cannot cap it for the tests after this one.)
  static_cast<void>(cpu::cpu_has_amx_bf16());
  const std::unique_ptr<Backend> backend = make_cpu_backend(0, "avx2", "bf16");
  EXPECT_EQ(backend->compute_dtype(), DType::BF16);
  EXPECT_NE(backend->name().find("widened"), std::string::npos) << backend->name();
}

TEST(ParityBf16, CliOptionReachesTheBackend) {
  // The option table's plumbing (src/api/option_table.cpp, make_backend):
  // --cpu-dtype bf16 on the command line gives a bf16 backend, named in the
  // run header; the small model, 4 frames.
  const std::string cli = std::string(LINGBOT_CLI_PATH) + " bench --device cpu --threads 1 --config " +
                          fixture("config.json") + " --frames 4 --height 70 --width 126 --num-scale-frames 2";
  const test::CommandResult bf16 = test::run_shell(cli + " --cpu-dtype bf16 2>&1");
  EXPECT_EQ(bf16.status, 0) << bf16.output;
  EXPECT_NE(bf16.output.find(", bf16: "), std::string::npos) << bf16.output;
  const test::CommandResult fp32 = test::run_shell(cli + " 2>&1");
  EXPECT_EQ(fp32.status, 0) << fp32.output;
  EXPECT_EQ(fp32.output.find(", bf16: "), std::string::npos) << fp32.output;
}
