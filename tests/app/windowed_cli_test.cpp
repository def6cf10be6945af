// `lingbot-map run --mode windowed`, end to end on the courthouse frames:
// the CLI's predictions.npz against upstream's inference_windowed on the same
// frames (tests/fixtures/model_small/window_w6_o4.safetensors), with the
// windowed keys upstream adds (frame_type, chunk_scales, chunk_transforms),
// and the option errors.
#include "checkpoint/checkpoint.h"
#include "output/npz_reader.h"
#include "test_support.h"

#include <gtest/gtest.h>

using namespace lingbot;

namespace {

std::string cli() { return LINGBOT_CLI_PATH; }
std::string temp(const std::string& name) { return std::string(::testing::TempDir()) + "/lingbot_windowed_" + name; }

std::string small_model() {
  const std::string dir = test::fixture_path("model_small/");
  return "--model " + dir + "weights.pt --config " + dir + "config.json --num-scale-frames 3 --kv-window 4 --threads 2";
}

TEST(WindowedCli, RunMatchesUpstreamsInferenceWindowed) {
  const std::string out = temp("w6_o4");
  const test::CommandResult r =
      test::run_shell(cli() + " -q run " + small_model() + " --images " + test::fixture_path("courthouse") +
                      " --image-size 126 --mode windowed --window-size 6 --overlap-size 4 --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto npz = io::read_npz(out + "/predictions.npz");
  const io::StateDict ref = io::load_state_dict(test::fixture_path("model_small/window_w6_o4.safetensors"));
  for (const char* key : {"pose_enc", "extrinsic", "intrinsic", "chunk_scales", "chunk_transforms"}) {
    ASSERT_TRUE(npz.count(key)) << key;
    const Tensor theirs = ref.at(key).to_dtype(DType::F32);
    ASSERT_EQ(npz.at(key).numel(), theirs.numel()) << key;
    EXPECT_LT(test::relative_error(npz.at(key), theirs), 1e-4) << key;
  }
  ASSERT_TRUE(npz.count("frame_type"));
  const Tensor& type = npz.at("frame_type");
  ASSERT_EQ(type.dtype(), DType::U8);
  ASSERT_EQ(type.shape(), Shape({14}));
  for (int64_t i = 0; i < 14; ++i)
    EXPECT_EQ(type.data_as<uint8_t>()[i], static_cast<uint8_t>(ref.at("frame_type").to_dtype(DType::F32).f32()[i]));
  EXPECT_EQ(npz.at("chunk_transforms").shape(), Shape({5, 4, 4}));
  // Depth of the last frame (from the last window, scaled into the first's units).
  Tensor depth13 = Tensor::empty({70, 126});
  std::copy_n(npz.at("depth").f32() + 13 * 70 * 126, 70 * 126, depth13.f32());
  EXPECT_LT(test::relative_error(depth13, ref.at("depth_f13").to_dtype(DType::F32)), 1e-4);
}

TEST(WindowedCli, BadWindowSettingsAreOneLineUserErrors) {
  const std::string base = cli() + " -q run " + small_model() + " --images " + test::fixture_path("courthouse") +
                           " --image-size 126 --out " + temp("bad");
  const test::CommandResult overlap = test::run_shell(base + " --mode windowed --window-size 5 --overlap-size 8");
  EXPECT_EQ(overlap.status, 1) << overlap.output;
  EXPECT_NE(overlap.output.find("must be smaller than a window"), std::string::npos) << overlap.output;
  const test::CommandResult no_dense = test::run_shell(base + " --mode windowed --no-dense");
  EXPECT_EQ(no_dense.status, 1) << no_dense.output;
  EXPECT_NE(no_dense.output.find("--no-dense"), std::string::npos) << no_dense.output;
  const test::CommandResult mode = test::run_shell(base + " --mode sliding");
  EXPECT_EQ(mode.status, 1) << mode.output;
}

// In streaming mode the specials of evicted frames pile up (upstream's
// semantics); a long run says so once, with what to do. 70 frames of the
// small model: 51 tokens a frame, 7 listed, 6 specials kept per evicted
// frame, so by frame 64 they are well past a quarter of the keys.
TEST(LongStreams, RunSaysWhenRetainedSpecialsPileUp) {
  const std::string raw = "head -c " + std::to_string(70 * 126 * 70 * 3) + " /dev/urandom | ";
  const test::CommandResult r = test::run_shell(raw + cli() + " run " + small_model() +
                                                " --video - --input-format rgb24 --input-size 126x70 --image-size 126 "
                                                "--no-dense --keyframe-interval 1 --out " + temp("long"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("frame 64: 348 special tokens of 58 evicted frames are kept"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--mode windowed"), std::string::npos) << r.output;
}

}  // namespace
