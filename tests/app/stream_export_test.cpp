// `run --export` writes while frames stream (issue #17): what it leaves in
// --out must be what `export --format` writes from the same run's
// predictions.npz (compared byte for byte, then read by the real peers:
// COLMAP's model_analyzer, the Khronos glTF validator, an OpenEXR reader
// written from the file layout in tests/tools), and frame 0's files must be on
// disk while the run is still reading frames (no second pass at the end).
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using Result = lingbot::test::CommandResult;

namespace {

Result shell(const std::string& cmd) { return lingbot::test::run_shell(cmd); }
Result cli(const std::string& args) { return shell(std::string(LINGBOT_CLI_PATH) + " " + args); }

const std::string kTools = LINGBOT_TEST_TOOLS_DIR;
const std::string kPython = "/usr/bin/python3";  // Debian's, with python3-numpy (scripts/setup.sh)

std::string temp(const std::string& name) {
  const std::string d =
      std::string(::testing::TempDir()) + "/lingbot_stream_export_" + name + "_" + std::to_string(getpid());
  fs::remove_all(d);
  return d;
}

std::string model_args() {
  const std::string m = lingbot::test::fixture_path("model_small/");
  return "--model " + m + "weights.pt --config " + m + "config.json --image-size 126 --num-scale-frames 3 "
         "--kv-window 4 --threads 2";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::json json_line(const Result& r) {
  const size_t brace = r.output.rfind("\n{");
  return nlohmann::json::parse(brace == std::string::npos ? r.output : r.output.substr(brace + 1));
}

bool built_with_openexr() {
  // The build's own word: --depth-exr without OpenEXR is refused before anything is read.
  const Result r = cli("export /nonexistent --format depth --depth-exr");
  return r.output.find("built without OpenEXR") == std::string::npos;
}

// Every file `exported` holds is in `streamed` with the same bytes, and
// `streamed` holds nothing else but the run's own files.
void expect_same_files(const std::string& streamed, const std::string& exported) {
  std::set<std::string> run_files = {"predictions.npz", "trajectory.txt", "manifest.json", "points.ply"}, seen;
  int compared = 0;
  for (const auto& e : fs::recursive_directory_iterator(exported)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), exported).string();
    seen.insert(rel);
    ASSERT_TRUE(fs::exists(streamed + "/" + rel)) << rel << " is missing from the run's --out";
    EXPECT_EQ(read_file(e.path()), read_file(streamed + "/" + rel)) << rel << " differs";
    ++compared;
  }
  EXPECT_GT(compared, 0);
  for (const auto& e : fs::recursive_directory_iterator(streamed)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), streamed).string();
    EXPECT_TRUE(seen.count(rel) || run_files.count(rel)) << rel << ": written by the run, not by export";
  }
}

}  // namespace

TEST(StreamExport, RunExportEqualsExportOfItsNpzAndThePeersReadIt) {
  const bool exr = built_with_openexr();
  const std::string run = temp("run"), exported = temp("exported");
  const int frames = 6;
  const std::string exr_flag = exr ? " --depth-exr" : "";
  Result r = cli("-q run " + model_args() + " --images " + lingbot::test::fixture_path("courthouse") +
                 " --first-k " + std::to_string(frames) + " --out " + run +
                 " --export colmap,nerfstudio,glb,depth,ply --conf-threshold 1.2 --voxel-size 0.02 --downsample 2 "
                 "--frames 1:5" + exr_flag);
  ASSERT_EQ(r.status, 0) << r.output;
  r = cli("export " + run + " --format colmap,nerfstudio,glb,depth,ply --conf-threshold 1.2 --voxel-size 0.02 "
          "--downsample 2 --frames 1:5 --out " + exported + exr_flag);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_same_files(run, exported);

  // The peers on the streamed files.
  ASSERT_EQ(shell("command -v colmap").status, 0) << "colmap is not installed (scripts/setup.sh installs it)";
  r = shell("QT_QPA_PLATFORM=offscreen colmap model_analyzer --path " + run + "/sparse/0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Registered images: " + std::to_string(frames)), std::string::npos) << r.output;
  r = shell(kPython + " " + kTools + "/check_depth_png.py " + run + " " + run + "/predictions.npz");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(json_line(r)["frames"], frames);
  EXPECT_LE(json_line(r)["max_depth_error"].get<double>(), 0.0005 + 1e-6) << r.output;
  r = shell(kPython + " " + kTools + "/check_nerfstudio.py " + run + " " + run + "/predictions.npz");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_LT(json_line(r)["max_pose_error"].get<double>(), 1e-6) << r.output;
  if (shell("command -v node").status == 0 &&
      shell("cd " + kTools + " && flock /tmp/lingbot-tests-npm.lock sh -c 'test -d node_modules/gltf-validator "
            "-a -d node_modules/playwright-core || npm ci --no-audit --no-fund'").status == 0) {
    r = shell("node " + kTools + "/validate_gltf.mjs " + run + "/scene.glb");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(json_line(r)["errors"], 0) << r.output;
  }
  if (exr) {
    r = shell(kPython + " " + kTools + "/check_depth_exr.py " + run + " " + run + "/predictions.npz");
    ASSERT_EQ(r.status, 0) << r.output;
    const auto report = json_line(r);
    EXPECT_EQ(report["frames"], frames);
    EXPECT_EQ(report["max_difference"].get<double>(), 0.0) << report;  // floats, exactly
    EXPECT_EQ(report["channels"], nlohmann::json::array({"Z"})) << report;
    // How many blocks ZIP shrinks depends on the depth values (OpenEXR keeps
    // a block raw where zlib does not help): ExrWriter's own test checks the
    // ZIP path on an image that always compresses.
    if (shell("command -v exrheader").status == 0) {  // OpenEXR's own tool (Debian's openexr)
      r = shell("exrheader " + run + "/depth_exr/000000.exr");
      ASSERT_EQ(r.status, 0) << r.output;
      EXPECT_NE(r.output.find("Z, 32-bit floating-point"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("(0 0) - (125 69)"), std::string::npos) << r.output;  // 126 x 70
    }
  }
}

TEST(StreamExport, WindowedModeWithSkyMasksExportsTheAlignedFrames) {
  // Windowed mode hands a frame out only once its window is aligned: the
  // streamed files must hold those final values, as the npz does, with the
  // sky masks applied as `export --sky-masks` applies them.
  const std::string masks = temp("masks"), run = temp("windowed"), exported = temp("windowed_exported");
  std::string names;
  for (int i = 0; i < 8; ++i) names += " " + std::string(6 - std::to_string(i).size(), '0') + std::to_string(i) + ".png";
  ASSERT_EQ(shell(kPython + " " + kTools + "/make_sky_masks.py " + masks + " 126 70 20" + names).status, 0);
  Result r = cli("-q run " + model_args() + " --images " + lingbot::test::fixture_path("courthouse") +
                 " --first-k 8 --mode windowed --window-size 6 --overlap-size 4 --sky-masks " + masks + " --out " +
                 run + " --export depth,colmap,ply --conf-percentile 30 --max-points 500");
  ASSERT_EQ(r.status, 0) << r.output;
  r = cli("export " + run + " --format depth,colmap,ply --conf-percentile 30 --max-points 500 --sky-masks " + masks +
          " --out " + exported);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_same_files(run, exported);
  // The masks took effect: the sky rows of a depth PNG are 0 (invalid) in the streamed file.
  r = shell(kPython + " -c \"import sys; sys.path.insert(0, '" + kTools + "'); import check_depth_png as c; "
            "d = c.read_png('" + run + "/depth/000005.png'); print(int(d[:20].max()), int(d[20:].min() > 0))\"");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "0 1\n");
}

TEST(StreamExport, FrameZeroIsOnDiskWhileTheRunIsStillReadingFrames) {
  // Raw frames through a pipe we keep open: once the scale phase (3 frames)
  // is out, frame 0's depth PNG and image must exist while the run still
  // waits for input, before predictions.npz (written at the end) exists.
  const std::string out = temp("pipe");
  const int W = 64, H = 48;
  const std::string cmd = std::string(LINGBOT_CLI_PATH) + " -q run " + model_args() +
                          " --video - --input-format rgb24 --input-size " + std::to_string(W) + "x" +
                          std::to_string(H) + " --out " + out + " --export depth,nerfstudio > " + out +
                          ".log 2>&1";
  // A run that fails early closes the pipe: a write must then fail, not kill the test.
  std::signal(SIGPIPE, SIG_IGN);
  FILE* pipe = popen(cmd.c_str(), "w");
  ASSERT_NE(pipe, nullptr);
  std::vector<unsigned char> frame(static_cast<size_t>(W * H * 3));
  auto send = [&](int index) {
    for (size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<unsigned char>((i * 7 + index * 31) % 251);
    return std::fwrite(frame.data(), 1, frame.size(), pipe) == frame.size() && std::fflush(pipe) == 0;
  };
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(send(i));
  // Bounded wait for the model to load and finish the scale phase (no timing is asserted).
  bool appeared = false;
  for (int tries = 0; tries < 1200 && !appeared; ++tries) {
    appeared = fs::exists(out + "/depth/000000.png") && fs::exists(out + "/images/000000.png");
    if (!appeared) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const bool npz_before_end = fs::exists(out + "/predictions.npz");
  const bool transforms_before_end = fs::exists(out + "/transforms.json");
  for (int i = 4; i < 6; ++i) send(i);
  const int status = pclose(pipe);
  EXPECT_TRUE(appeared) << read_file(out + ".log");
  EXPECT_FALSE(npz_before_end);
  EXPECT_FALSE(transforms_before_end);  // written by finish(), from the whole stream's cameras
  EXPECT_EQ(status, 0) << read_file(out + ".log");
  EXPECT_TRUE(fs::exists(out + "/depth/000005.png"));
  EXPECT_TRUE(fs::exists(out + "/transforms.json"));
  EXPECT_TRUE(fs::exists(out + "/predictions.npz"));
}

TEST(StreamExport, ExportOnlyFlagsNeedExportAndDepthExrABuildWithOpenExr) {
  const Result r = cli("run " + model_args() + " --images " + lingbot::test::fixture_path("courthouse") +
                       " --out " + temp("exr_alone") + " --depth-exr");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "error: --depth-exr: only with --export depth\n");
  const Result v = cli("run " + model_args() + " --images " + lingbot::test::fixture_path("courthouse") +
                       " --out " + temp("voxel_alone") + " --voxel-size 0.1");
  EXPECT_EQ(v.status, 1) << v.output;
  EXPECT_EQ(v.output.rfind("error: --conf-percentile, --voxel-size", 0), 0u) << v.output;
  const Result f = cli("run " + model_args() + " --images " + lingbot::test::fixture_path("courthouse") +
                       " --out " + temp("frames_negative") + " --export ply --frames -3:");
  EXPECT_EQ(f.status, 1) << f.output;
  EXPECT_EQ(f.output.rfind("error: --frames -3:", 0), 0u) << f.output;
  if (!built_with_openexr()) {
    const Result e = cli("export /nonexistent --format depth --depth-exr");
    EXPECT_EQ(e.status, 1) << e.output;
    EXPECT_EQ(std::count(e.output.begin(), e.output.end(), '\n'), 1) << e.output;
  }
}

TEST(StreamExport, ASignalFinishesTheExportForTheFramesDone) {
  // As predictions.npz is written for the frames done, so are the exports,
  // and they are again what `export` makes of that npz.
  const std::string run = temp("signal"), exported = temp("signal_exported");
  std::string flags = model_args();  // 252-pixel frames: the run is still going when the signal lands
  flags.replace(flags.find("--image-size 126"), 16, "--image-size 252");
  const Result r = shell(kPython + " " + kTools + "/interrupt_run.py SIGINT 2 " + LINGBOT_CLI_PATH + " -q run " +
                         flags + " --images " + lingbot::test::fixture_path("courthouse") + " --emit jsonl --out " +
                         run + " --export depth,nerfstudio,colmap");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json report = json_line(r);
  ASSERT_FALSE(report["ended_before_signal"].get<bool>()) << report;
  EXPECT_EQ(report["status"], 130) << report;
  const nlohmann::json manifest = nlohmann::json::parse(read_file(run + "/manifest.json"));
  EXPECT_EQ(manifest["interrupted_by"], "SIGINT");
  const nlohmann::json transforms = nlohmann::json::parse(read_file(run + "/transforms.json"));
  EXPECT_EQ(transforms["frames"].size(), manifest["frames"].get<size_t>());
  EXPECT_LT(manifest["frames"].get<int>(), 14);
  const Result e = cli("export " + run + " --format depth,nerfstudio,colmap --out " + exported);
  ASSERT_EQ(e.status, 0) << e.output;
  expect_same_files(run, exported);
}

TEST(StreamExport, ASecondSignalLeavesNoHalfWrittenFile) {
  // A second Ctrl-C exits at once: the frames' files already written stay,
  // each whole; the end's files never appear, and no temporary is left.
  const std::string run = temp("second_signal");
  std::string flags = model_args();  // 518-pixel frames: the frame in flight outlasts the 10 ms between the signals
  flags.replace(flags.find("--image-size 126"), 16, "--image-size 518");
  const Result r = shell(kPython + " " + kTools + "/interrupt_run.py SIGINT 1 --twice " + LINGBOT_CLI_PATH +
                         " -q run " + flags + " --images " + lingbot::test::fixture_path("courthouse") +
                         " --emit jsonl --out " + run + " --export depth,nerfstudio,colmap");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json report = json_line(r);
  ASSERT_FALSE(report["ended_before_signal"].get<bool>()) << report;
  EXPECT_EQ(report["status"], 130) << report;
  for (const auto& e : fs::recursive_directory_iterator(run)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
    EXPECT_EQ(name.find(".part"), std::string::npos) << name;
    EXPECT_NE(name.rfind(".lingbot", 0), 0u) << name;
  }
  for (const char* end_file : {"transforms.json", "sparse/0/cameras.bin", "depth_scale.json", "predictions.npz"})
    EXPECT_FALSE(fs::exists(run + "/" + end_file)) << end_file;
  // Every depth PNG there decodes whole (the numpy reader asserts on a short file).
  const Result whole = shell(kPython + " -c \"import glob, sys; sys.path.insert(0, '" + kTools +
                             "'); import check_depth_png as c; "
                             "print(len([c.read_png(p) for p in glob.glob('" + run + "/depth*/*.png')]))\"");
  ASSERT_EQ(whole.status, 0) << whole.output;
}
