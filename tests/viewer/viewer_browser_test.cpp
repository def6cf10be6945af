// The viewer in a real browser: `run --view` on the small fixture model and
// the courthouse frames, with Debian's chromium driven headless through
// playwright-core (tests/tools/viewer_check.mjs). What the page holds
// (frames, cameras, points, the counts its sliders give) is checked against
// predictions.npz, which the same run wrote; the screenshot is decoded and
// must show something besides the background.
#include "output/npz_reader.h"
#include "test_support.h"
#include "viewer/frame_packet.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace lingbot;

namespace {

const std::string kTools = LINGBOT_TEST_TOOLS_DIR;
constexpr int kStride = 2;  // --view-downsample 2 (the default)

std::string temp(const std::string& name) {
  const std::string d =
      std::string(::testing::TempDir()) + "/lingbot_viewer_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

void need_browser_tools() {
  ASSERT_EQ(test::run_shell("command -v node && test -x /usr/bin/chromium").status, 0)
      << "node and chromium are needed (scripts/setup.sh installs nodejs and chromium)";
  // npm ci empties node_modules first: under one lock with tests/app/export_test.cpp's,
  // so that tests running side by side never see it half installed.
  const auto npm = test::run_shell("cd " + kTools + " && flock /tmp/lingbot-tests-npm.lock sh -c "
                                   "'test -d node_modules/gltf-validator -a -d node_modules/playwright-core || "
                                   "npm ci --no-audit --no-fund'");
  ASSERT_EQ(npm.status, 0) << npm.output;
}

// `run --view` on the small model in the background (`input` is what goes
// before the command, `run_flags` after it), the browser driver against it,
// then SIGINT to the run (which serves on after finishing until then).
// Returns the driver's report; the run must have exited 0.
nlohmann::json run_and_view(const std::string& dir, int frames, const std::string& input, const std::string& run_flags,
                            const std::string& driver_flags) {
  const std::string m = test::fixture_path("model_small/");
  const std::string script =
      input + std::string(LINGBOT_CLI_PATH) + " run --model " + m + "weights.pt --config " + m +
      "config.json --image-size 126 --num-scale-frames 3 --kv-window 4 " + run_flags + " --out " + dir +
      "/out --view --port 0 2> " + dir + "/run.log & run=$!\n"
      // A generous limit (a sanitizer build is slow): it only keeps a broken run from hanging the test.
      "node " + kTools + "/viewer_check.mjs --timeout 240 --log " + dir + "/run.log --frames " +
      std::to_string(frames) + " " + driver_flags + " > " + dir + "/report.json\n"
      "driver=$?\n"
      "kill -INT $run; wait $run; status=$?\n"
      "cat " + dir + "/run.log\n"
      "test $driver -eq 0 && test $status -eq 0\n";
  std::ofstream(dir + "/script.sh") << script;
  const test::CommandResult r = test::run_shell("bash " + dir + "/script.sh");
  EXPECT_EQ(r.status, 0) << r.output;
  const std::string report = test::run_shell("cat " + dir + "/report.json").output;
  return report.empty() ? nlohmann::json::object() : nlohmann::json::parse(report);
}

// What the page should hold, counted from predictions.npz: the points of
// every kStride-th pixel that are finite and whose confidence exceeds a threshold.
struct Expected {
  Tensor conf, xyz;
  int64_t count(float threshold, int downsample = 1) const {
    const int64_t S = conf.dim(0), H = conf.dim(1), W = conf.dim(2);
    int64_t n = 0;
    for (int64_t s = 0; s < S; ++s)
      for (int64_t y = 0; y < H; y += kStride * downsample)
        for (int64_t x = 0; x < W; x += kStride * downsample) {
          const int64_t p = (s * H + y) * W + x;
          const float* q = xyz.f32() + 3 * p;
          n += std::isfinite(q[0]) && std::isfinite(q[1]) && std::isfinite(q[2]) && conf.f32()[p] > threshold;
        }
    return n;
  }
};

Expected expected_from(const std::string& npz_path) {
  const auto npz = io::read_npz(npz_path);
  return {npz.at("depth_conf"), npz.at("world_points")};
}

// The slider's thresholds, from their definition (src/viewer/frame_packet.h).
float threshold(int level) { return static_cast<float>(std::exp2(level / 32.0)); }

}  // namespace

TEST(ViewerBrowser, RunViewFillsThePageWithEveryFrame) {
  need_browser_tools();
  const std::string dir = temp("run");
  constexpr int kFrames = 6;
  const nlohmann::json report =
      run_and_view(dir, kFrames, "", "--images " + test::fixture_path("courthouse") + " --first-k 6 --threads 2",
                   "--conf-levels 0,8,16 --downsample 1 --screenshot " + dir + "/shot.png --glb " + dir +
                       "/scene.glb");
  ASSERT_TRUE(report.contains("loaded")) << report;
  const Expected e = expected_from(dir + "/out/predictions.npz");
  const auto& loaded = report["loaded"];
  EXPECT_EQ(loaded["frames"], kFrames);
  EXPECT_EQ(loaded["cameras"], kFrames);
  EXPECT_EQ(loaded["path_length"], kFrames);
  EXPECT_EQ(loaded["end_frames"], kFrames);
  EXPECT_EQ(loaded["frame_indices"], nlohmann::json({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(loaded["points"].get<int64_t>(), e.count(threshold(0)));
  // The page starts at the run's --conf-threshold (1.5), as the nearest level: round(32 log2 1.5) = 19.
  EXPECT_EQ(loaded["visible_points"].get<int64_t>(), e.count(threshold(19)));
  for (int level : {0, 8, 16})
    EXPECT_EQ(report["by_conf_level"][std::to_string(level)].get<int64_t>(), e.count(threshold(level))) << level;
  EXPECT_NE(report["by_conf_level"]["0"], report["by_conf_level"]["16"]);  // the slider changed the count
  EXPECT_EQ(report["downsampled_points"].get<int64_t>(), e.count(threshold(16), 2));
  EXPECT_GT(report["screenshot"]["lit_pixels"].get<int64_t>(), 100) << report["screenshot"];
  EXPECT_TRUE(report["page_errors"].empty()) << report["page_errors"];

  // The GLB button's download: what the page shows, through the exporter's
  // writer, read by the Khronos validator (as tests/app/export_test.cpp does).
  const test::CommandResult v = test::run_shell("node " + kTools + "/validate_gltf.mjs " + dir + "/scene.glb");
  ASSERT_EQ(v.status, 0) << v.output;
  const auto glb = nlohmann::json::parse(v.output.substr(v.output.rfind("\n{") + 1));
  EXPECT_EQ(glb["errors"], 0) << glb;
  // The points shown (confidence level 16, downsampled by 2), 5 frustum vertices and one path vertex per camera.
  EXPECT_EQ(glb["counts"]["vertices"].get<int64_t>(), e.count(threshold(16), 2) + kFrames * 5 + kFrames) << glb;
}

TEST(ViewerBrowser, PagesThatCloseAndReloadMidStreamGetEverything) {
  need_browser_tools();
  const std::string dir = temp("reconnect");
  constexpr int kFrames = 14;  // the courthouse frames
  // The frames go in as raw RGB through a pipe (run --video -): the first
  // eight at once, the rest only once the pages have come and gone (the
  // driver's signal file), so both pages are certain to see a run in progress.
  const std::string feed = dir + "/frame.sh";
  std::ofstream(feed) << "ffmpeg -loglevel error -i \"$1\" -f rawvideo -pix_fmt rgb24 -\n";
  std::string input = "{ ";
  for (int i = 0; i < kFrames; ++i) {
    if (i == 8) input += "for i in $(seq 600); do test -e " + dir + "/reloaded && break; sleep 0.1; done; ";
    input += "bash " + feed + " " + test::fixture_path("courthouse") + "/" + std::string(5 - (i >= 10), '0') +
             std::to_string(i) + ".png; ";
  }
  input += "} | ";
  const nlohmann::json report = run_and_view(dir, kFrames, input, "--video - --input-format rgb24 --input-size 518x294 --threads 2",
                                             "--reconnect --signal " + dir + "/reloaded");
  ASSERT_TRUE(report.contains("loaded")) << report;
  EXPECT_FALSE(report["first_page"]["done"]) << "the first page saw the whole run: not a mid-stream test";
  EXPECT_FALSE(report["second_page_before_reload"]["done"]);
  const Expected e = expected_from(dir + "/out/predictions.npz");
  EXPECT_EQ(report["loaded"]["frames"], kFrames);
  EXPECT_EQ(report["loaded"]["cameras"], kFrames);
  EXPECT_EQ(report["loaded"]["points"].get<int64_t>(), e.count(threshold(0)));
  EXPECT_TRUE(report["page_errors"].empty()) << report["page_errors"];
}

TEST(ViewerCli, BadInputIsOneLineNamingIt) {
  const std::string cli = LINGBOT_CLI_PATH;
  test::CommandResult r = test::run_shell(cli + " view /nonexistent/result --port 0");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "error: /nonexistent/result: not found (expected a `lingbot-map run --out` folder)\n");
  r = test::run_shell(cli + " view /tmp --port 70000");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--port"), std::string::npos) << r.output;
}

TEST(ViewerCli, ServesBeforeTheModelLoadsAndWarnsAboutOtherHosts) {
  // A checkpoint that is not there: the run fails at the model load, after the viewer started.
  const std::string m = test::fixture_path("model_small/");
  const test::CommandResult r = test::run_shell(
      std::string(LINGBOT_CLI_PATH) + " run --model /nonexistent/weights.pt --config " + m + "config.json --images " +
      test::fixture_path("courthouse") + " --out " + temp("host") + "/out --view --host 0.0.0.0 --port 0");
  EXPECT_EQ(r.status, 1) << r.output;
  const size_t warning = r.output.find("--host 0.0.0.0: the viewer (and the reconstruction) can be reached from other");
  const size_t url = r.output.find("viewer: open http://0.0.0.0:");
  const size_t error = r.output.find("error: /nonexistent/weights.pt");
  EXPECT_NE(warning, std::string::npos) << r.output;
  EXPECT_NE(url, std::string::npos) << r.output;
  EXPECT_NE(error, std::string::npos) << r.output;
  EXPECT_LT(url, error) << r.output;
}
