// `lingbot-map export`, end to end: the small fixture model reconstructs the
// courthouse frames, then every format is exported and read by the real
// peers: COLMAP itself (model_analyzer, model_converter), the Khronos glTF
// validator (npm gltf-validator, tests/tools), Python's json and a zlib/numpy
// PNG reader (tests/tools/*.py) against numpy's reading of predictions.npz.
// Expected values come from predictions.npz, never from the exporters.
#include "output/npz_reader.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

using namespace lingbot;

namespace {

using Result = test::CommandResult;

Result shell(const std::string& cmd) { return test::run_shell(cmd); }

Result cli(const std::string& args) { return shell(std::string(LINGBOT_CLI_PATH) + " " + args); }

const std::string kTools = LINGBOT_TEST_TOOLS_DIR;
// ctest runs each test in its own process, two at a time: each process reconstructs
// these frames into its own folder (a few seconds at this size).
constexpr int kFrames = 6;
const std::string kPython = "/usr/bin/python3";  // Debian's, with python3-numpy (scripts/setup.sh)

std::string temp(const std::string& name) {
  const std::string d =
      std::string(::testing::TempDir()) + "/lingbot_export_cli_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(d);
  return d;
}

nlohmann::json json_line(const Result& r) {
  const size_t brace = r.output.rfind("\n{");
  return nlohmann::json::parse(brace == std::string::npos ? r.output : r.output.substr(brace + 1));
}

// Files a failed or finished export may not leave behind: AtomicFile's temporaries.
bool has_temporaries(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
  return false;
}

class Export : public ::testing::Test {
 protected:
  static std::string result_;     // a `run --out` folder
  static int64_t confident_;      // finite world points with confidence > 1.5, counted from the npz
  static void SetUpTestSuite() {
    result_ = temp("result");
    const std::string m = test::fixture_path("model_small/");
    const Result r = cli("-q run --model " + m + "weights.pt --config " + m + "config.json --images " +
                         test::fixture_path("courthouse") +
                         " --image-size 126 --num-scale-frames 3 --kv-window 4 --threads 2 --first-k " +
                         std::to_string(kFrames) + " --out " + result_);
    ASSERT_EQ(r.status, 0) << r.output;
    const auto npz = io::read_npz(result_ + "/predictions.npz");
    const Tensor& conf = npz.at("depth_conf");
    const Tensor& xyz = npz.at("world_points");
    confident_ = 0;
    for (int64_t i = 0; i < conf.numel(); ++i) {
      const float* q = xyz.f32() + 3 * i;
      confident_ += conf.f32()[i] > 1.5f && std::isfinite(q[0]) && std::isfinite(q[1]) && std::isfinite(q[2]);
    }
  }
};
std::string Export::result_;
int64_t Export::confident_ = 0;

}  // namespace

TEST_F(Export, ColmapReadsTheModelAndItsTextMatchesOurs) {
  ASSERT_EQ(shell("command -v colmap").status, 0) << "colmap is not installed (scripts/setup.sh installs it)";
  const std::string out = temp("colmap");
  Result r = cli("export " + result_ + " --format colmap --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(has_temporaries(out));
  // COLMAP is a Qt program; its command-line tools need no display with the offscreen platform.
  const std::string colmap = "QT_QPA_PLATFORM=offscreen colmap ";
  r = shell(colmap + "model_analyzer --path " + out + "/sparse/0");
  ASSERT_EQ(r.status, 0) << r.output;
  auto number = [&](const std::string& label) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.output, m, std::regex(label + ":\\s*([0-9.eE+-]+)"))) << label << r.output;
    return m.empty() ? -1.0 : std::stod(m[1]);
  };
  EXPECT_EQ(number("Cameras"), kFrames);
  EXPECT_EQ(number("Registered images"), kFrames);
  EXPECT_EQ(number("Points"), static_cast<double>(confident_));
  EXPECT_EQ(number("Observations"), static_cast<double>(confident_));
  EXPECT_LT(number("Mean reprojection error"), 1e-3);

  // COLMAP's own text conversion against our --text output, and the reprojection
  // error recomputed from COLMAP's text (poses, PINHOLE parameters, POINTS2D).
  const std::string converted = temp("colmap_converted"), text = temp("colmap_text");
  std::filesystem::create_directories(converted);
  r = shell(colmap + "model_converter --input_path " + out + "/sparse/0 --output_path " + converted +
            " --output_type TXT");
  ASSERT_EQ(r.status, 0) << r.output;
  r = cli("export " + result_ + " --format colmap --text --out " + text);
  ASSERT_EQ(r.status, 0) << r.output;
  r = shell(kPython + " " + kTools + "/check_colmap_text.py " + converted + " " + text + "/sparse/0");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto report = json_line(r);
  EXPECT_EQ(report["points"], confident_);
  EXPECT_EQ(report["observations"], confident_);
  EXPECT_LT(report["mean_reprojection_error"].get<double>(), 1e-3) << report;  // float world points: ~1e-5
  EXPECT_LT(report["max_reprojection_error"].get<double>(), 1e-2) << report;
  EXPECT_LT(report["max_relative_difference"].get<double>(), 1e-9) << report;
  // --text writes only the text model; COLMAP reads that as well.
  r = shell(colmap + "model_analyzer --path " + text + "/sparse/0");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Registered images: " + std::to_string(kFrames)), std::string::npos) << r.output;
}

TEST_F(Export, NerfstudioPosesUndoToTheSavedExtrinsics) {
  const std::string out = temp("nerfstudio");
  Result r = cli("export " + result_ + " --format nerfstudio --voxel-size 0.05 --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  r = shell(kPython + " " + kTools + "/check_nerfstudio.py " + out + " " + result_ + "/predictions.npz");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto report = json_line(r);
  EXPECT_EQ(report["frames"], kFrames);
  EXPECT_LT(report["max_pose_error"].get<double>(), 1e-6) << report;
  EXPECT_LT(report["max_intrinsic_error"].get<double>(), 1e-6) << report;
  EXPECT_EQ(report["missing_images"], 0);
  EXPECT_GT(report["ply_vertices"].get<int64_t>(), 0);
  EXPECT_LT(report["ply_vertices"].get<int64_t>(), confident_);  // the voxel grid thinned the cloud
}

TEST_F(Export, GlbPassesTheKhronosValidator) {
  ASSERT_EQ(shell("command -v node").status, 0) << "node is not installed (scripts/setup.sh installs nodejs)";
  // Under the lock tests/viewer's browser tests take for the same folder.
  const Result npm = shell("cd " + kTools + " && flock /tmp/lingbot-tests-npm.lock sh -c "
                           "'test -d node_modules/gltf-validator -a -d node_modules/playwright-core || "
                           "npm ci --no-audit --no-fund'");
  ASSERT_EQ(npm.status, 0) << npm.output;
  const std::string out = temp("glb");
  Result r = cli("export " + result_ + " --format glb --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  r = shell("node " + kTools + "/validate_gltf.mjs " + out + "/scene.glb");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto report = json_line(r);
  EXPECT_EQ(report["errors"], 0) << report;
  EXPECT_EQ(report["warnings"], 0) << report;
  // Points, 5 frustum vertices per camera, one path vertex per camera.
  EXPECT_EQ(report["counts"]["vertices"], confident_ + kFrames * 5 + kFrames) << report;
  EXPECT_EQ(report["counts"]["drawCalls"], 3) << report;
}

TEST_F(Export, DepthPngsHoldTheDepthWithinQuantisation) {
  const std::string out = temp("depth");
  Result r = cli("export " + result_ + " --format depth --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  r = shell(kPython + " " + kTools + "/check_depth_png.py " + out + " " + result_ + "/predictions.npz");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto report = json_line(r);
  EXPECT_EQ(report["frames"], kFrames);
  EXPECT_LE(report["max_depth_error"].get<double>(), 0.0005 + 1e-6) << report;
  EXPECT_LE(report["max_confidence_levels"].get<double>(), 1) << report;
}

TEST_F(Export, BadInputIsOneLineNamingTheFile) {
  const std::string empty = temp("empty");
  std::filesystem::create_directories(empty);
  const std::string file = temp("plain_file");
  std::ofstream(file) << "not a folder";
  const std::string partial = temp("partial");
  std::filesystem::create_directories(partial);
  ASSERT_EQ(shell(kPython + " -c \"import numpy as np; np.savez('" + partial +
                  "/predictions.npz', extrinsic=np.zeros((2,3,4),np.float32), intrinsic=np.zeros((2,3,3),np.float32))\"")
                .status,
            0);
  struct Case {
    std::string args, names;
  };
  for (const Case& c : {Case{"export " + empty + " --format colmap", empty + "/predictions.npz"},
                        Case{"export " + partial + " --format glb", "'depth'"},
                        Case{"export " + result_ + " --format glb --out " + file + "/sub", file + ": exists and is not a folder"},
                        Case{"export " + result_ + " --format colmap,obj", "'obj'"},
                        Case{"export " + result_ + " --format ply --frames 9:3", "--frames"}}) {
    const Result r = cli(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.names), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(has_temporaries(empty));
}

TEST(RunExport, RunWritesTheExportsIntoOut) {
  const std::string out = temp("run_export");
  const std::string m = test::fixture_path("model_small/");
  const std::string run = "run --model " + m + "weights.pt --config " + m + "config.json --images " +
                          test::fixture_path("courthouse") +
                          " --image-size 126 --num-scale-frames 3 --kv-window 4 --first-k 4 --threads 2 --out " + out;
  Result r = cli(run + " --export glb,depth");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/scene.glb"));
  EXPECT_TRUE(std::filesystem::exists(out + "/depth/000003.png"));
  EXPECT_TRUE(std::filesystem::exists(out + "/depth_scale.json"));
  EXPECT_FALSE(std::filesystem::exists(out + "/depth/000004.png"));
  // A bad format is reported before the run starts.
  r = cli(run + "_bad --export glb,obj");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.rfind("error: --export 'obj'", 0), 0u) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out + "_bad"));
}
