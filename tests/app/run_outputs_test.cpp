// `run`'s outputs as a transaction (issue #22 item 1) and the frame names and
// sky masks exports use (issue #17), end to end with the small fixture model.
// Every output is read back by an independent reader: NumPy and zipfile
// (tests/tools/check_run_outputs.py), COLMAP itself for the frame names, and
// counts recomputed here from the npz for the sky masks.
#include "output/npz_reader.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace lingbot;
namespace fs = std::filesystem;

namespace {

using Result = test::CommandResult;
const std::string kTools = LINGBOT_TEST_TOOLS_DIR;
const std::string kPython = "/usr/bin/python3";  // Debian's, with python3-numpy (scripts/setup.sh)
const std::string kCli = LINGBOT_CLI_PATH;

Result shell(const std::string& cmd) { return test::run_shell(cmd); }

std::string temp(const std::string& name) {
  const std::string d = std::string(::testing::TempDir()) + "/lingbot_run_outputs_" + name + "_" + std::to_string(getpid());
  fs::remove_all(d);
  return d;
}

// The model and engine flags of every run here (126 x 70 frames).
std::string model_flags() {
  const std::string m = test::fixture_path("model_small/");
  return "--model " + m + "weights.pt --config " + m + "config.json --image-size 126 --num-scale-frames 3 "
         "--kv-window 4 --threads 1";
}

std::string run_images(const std::string& images, const std::string& out, const std::string& extra = "") {
  return kCli + " -q run " + model_flags() + " --images " + images + " --out " + out + " " + extra;
}

std::string courthouse() { return test::fixture_path("courthouse"); }

nlohmann::json last_json_line(const Result& r) {
  const size_t brace = r.output.rfind("\n{");
  return nlohmann::json::parse(brace == std::string::npos ? r.output : r.output.substr(brace + 1));
}

nlohmann::json check_outputs(const std::string& out) {
  const Result r = shell(kPython + " " + kTools + "/check_run_outputs.py " + out);
  EXPECT_EQ(r.status, 0) << r.output;
  return last_json_line(r);
}

// The invariants of any finished or interrupted run's folder.
void expect_whole(const nlohmann::json& c, int64_t frames, bool dense = true) {
  EXPECT_TRUE(c["npz_bad_member"].is_null()) << c;
  EXPECT_EQ(c["npz_frames"], nlohmann::json::array({frames})) << c;
  EXPECT_EQ(c["trajectory_lines"], frames) << c;
  EXPECT_EQ(c["trajectory_bad_lines"], 0) << c;
  EXPECT_TRUE(c["trajectory_ends_with_newline"].get<bool>()) << c;
  EXPECT_EQ(c["manifest_frames"], frames) << c;
  EXPECT_TRUE(c["manifest_sizes_match"].get<bool>()) << c;
  EXPECT_EQ(c["temporaries"], nlohmann::json::array()) << c;
  EXPECT_FALSE(c["lock_left"].get<bool>()) << c;
  if (dense) {
    EXPECT_EQ(c["ply_header_points"], c["ply_body_points"]) << c;
    EXPECT_EQ(c["ply_header_points"], c["npz_confident_points"]) << c;
  } else {
    EXPECT_FALSE(c.contains("ply_header_points")) << c;
  }
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// A second run on an --out that a first run holds is refused at once with one
// line; the first (fed frames through a pipe, so it is surely still running)
// finishes whole; the earlier result's trajectory.txt is untouched until then.
TEST(RunOutputs, ASecondRunOnTheSameOutIsRefused) {
  const std::string dir = temp("concurrent"), out = dir + "/out";
  fs::create_directories(dir);
  ASSERT_EQ(shell(run_images(courthouse(), out, "--first-k 3")).status, 0);
  const std::string earlier_trajectory = file_text(out + "/trajectory.txt");
  const std::string frame_bytes = std::to_string(64 * 48 * 3);
  const std::string script =
      "set -u; cd " + dir + " && mkfifo frames || exit 1; (timeout 120 " + kCli + " -q run " + model_flags() +
      " --video - --input-format rgb24 --input-size 64x48 --out out < frames > first.log 2>&1; echo $? > first.rc) & "
      "exec 3> frames; head -c $((" + frame_bytes + " * 4)) /dev/urandom >&3; "
      "for i in $(seq 600); do [ -s out/.lingbot.lock ] && break; sleep 0.05; done; "
      "cp out/trajectory.txt trajectory_while_first_runs.txt; " +
      run_images(courthouse(), "out", "--first-k 2") + " > second.log 2>&1; echo $? > second.rc; "
      "head -c $((" + frame_bytes + " * 3)) /dev/urandom >&3; exec 3>&-; wait";
  const Result r = shell(script);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string second = file_text(dir + "/second.log");
  EXPECT_EQ(file_text(dir + "/second.rc"), "1\n") << second;
  EXPECT_EQ(second.rfind("error: --out out: another lingbot-map run (pid ", 0), 0u) << second;
  EXPECT_EQ(std::count(second.begin(), second.end(), '\n'), 1) << second;
  EXPECT_EQ(file_text(dir + "/first.rc"), "0\n") << file_text(dir + "/first.log");
  EXPECT_EQ(file_text(dir + "/trajectory_while_first_runs.txt"), earlier_trajectory);
  const nlohmann::json c = check_outputs(out);
  expect_whole(c, 7);
  EXPECT_EQ(c["frames"][0], "000000");  // a pipe's frames are numbered
}

// SIGINT, SIGTERM and SIGHUP at a random frame: exit 130 / 143 / 129 with
// whole outputs for every frame that finished.
TEST(RunOutputs, EachSignalStopsTheRunWithWholeOutputs) {
  std::mt19937 random(std::random_device{}());
  const struct {
    const char* name;
    int status;
  } signals[] = {{"SIGINT", 130}, {"SIGTERM", 143}, {"SIGHUP", 129}};
  for (const auto& s : signals) {
    const int k = std::uniform_int_distribution<int>(1, 6)(random);
    const std::string out = temp(std::string("signal_") + s.name);
    // 252-pixel frames: slow enough that the run is still going when the signal lands.
    std::string flags = model_flags();
    flags.replace(flags.find("--image-size 126"), 16, "--image-size 252");
    const std::string command = kCli + " -q run " + flags + " --images " + courthouse() +
                                " --emit jsonl --out " + out;
    const Result r = shell(kPython + " " + kTools + "/interrupt_run.py " + s.name + " " + std::to_string(k) + " " + command);
    ASSERT_EQ(r.status, 0) << r.output;
    const nlohmann::json run = last_json_line(r);
    SCOPED_TRACE(std::string(s.name) + " after frame " + std::to_string(k) + ": " + run.dump());
    ASSERT_FALSE(run["ended_before_signal"].get<bool>()) << "the run ended before it could be signalled";
    EXPECT_EQ(run["status"], s.status);
    const nlohmann::json c = check_outputs(out);
    const int64_t frames = c["manifest_frames"];
    EXPECT_GE(frames, k);
    EXPECT_LT(frames, 14);
    EXPECT_EQ(frames, run["reported_in_all"]);  // every frame reported on stdout is in the files
    expect_whole(c, frames);
    EXPECT_EQ(c["manifest_interrupted_by"], s.name);
  }
}

// A second Ctrl-C stops at once: no outputs, no temporaries, no lock file left.
TEST(RunOutputs, ASecondSignalStopsAtOnceLeavingNothing) {
  const std::string out = temp("second_signal");
  std::string flags = model_flags();  // 518-pixel frames: the frame in flight outlasts the 10 ms between the signals
  flags.replace(flags.find("--image-size 126"), 16, "--image-size 518");
  const Result r = shell(kPython + " " + kTools + "/interrupt_run.py SIGINT 1 --twice " + kCli + " -q run " + flags +
                         " --images " + courthouse() + " --emit jsonl --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json run = last_json_line(r);
  ASSERT_FALSE(run["ended_before_signal"].get<bool>()) << run;
  EXPECT_EQ(run["status"], 130) << run;
  EXPECT_TRUE(fs::is_empty(out)) << run;
}

// A lock file and temporaries left by a run that was killed (SIGKILL: no
// cleanup) are taken over and removed, each with a log line.
TEST(RunOutputs, ADeadRunsLockAndTemporariesAreTakenOver) {
  const std::string out = temp("stale_lock");
  fs::create_directories(out);
  const Result dead = shell("sh -c 'echo $$'");  // a pid that has exited
  ASSERT_EQ(dead.status, 0);
  const std::string pid = dead.output.substr(0, dead.output.find('\n'));
  std::ofstream(out + "/.lingbot.lock") << pid << "\n";
  std::ofstream(out + "/.lingbot-" + pid + "-0badf00d-world_points") << "half a spool";
  const Result r = shell(kCli + " run " + model_flags() + " --images " + courthouse() + " --first-k 3 --out " + out + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("took over the lock of run " + pid + ", which is no longer running"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("removing .lingbot-" + pid + "-0badf00d-world_points"), std::string::npos) << r.output;
  expect_whole(check_outputs(out), 3);
}

// A --no-dense re-run into a dense run's folder leaves no points.ply of the
// earlier run behind, and says so.
TEST(RunOutputs, ANoDenseRerunRemovesTheEarlierPointCloud) {
  const std::string out = temp("no_dense");
  ASSERT_EQ(shell(run_images(courthouse(), out, "--first-k 3")).status, 0);
  ASSERT_TRUE(fs::exists(out + "/points.ply"));
  const Result r = shell(kCli + " run " + model_flags() + " --no-dense --images " + courthouse() +
                         " --first-k 4 --out " + out + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(out + "/points.ply"));
  EXPECT_NE(r.output.find("removed points.ply, written by an earlier run"), std::string::npos) << r.output;
  const nlohmann::json c = check_outputs(out);
  expect_whole(c, 4, /*dense=*/false);
  EXPECT_EQ(c["manifest_files"], nlohmann::json::array({"predictions.npz", "trajectory.txt"}));
}

// A disk that fills: a tmpfs of a few MB in a private mount namespace (root
// only; CI runs as root). The failing run ends with one line, leaves the
// earlier run's files byte for byte, and no temporary or partial file.
TEST(RunOutputs, AFullDiskIsOneLineAndKeepsTheEarlierFiles) {
  const std::string dir = temp("full_disk");
  fs::create_directories(dir + "/mnt");
  const Result probe = shell("unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs " + dir + "/mnt' 2>&1");
  if (probe.status != 0) GTEST_SKIP() << "no private tmpfs here (needs root and mount namespaces): " << probe.output;
  const std::string out = dir + "/mnt/out";
  const std::string script =
      "mount -t tmpfs -o size=2500k tmpfs " + dir + "/mnt && " + run_images(courthouse(), out, "--first-k 3") +
      " && md5sum " + out + "/* > " + dir + "/before.md5 && (" + run_images(courthouse(), out) + " > " + dir +
      "/full.log 2>&1; echo $? > " + dir + "/full.rc) && md5sum " + out + "/* > " + dir + "/after.md5 && ls -A " + out +
      " > " + dir + "/after.ls";
  const Result r = shell("unshare -m sh -c '" + script + "' 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string log = file_text(dir + "/full.log");
  EXPECT_EQ(file_text(dir + "/full.rc"), "1\n") << log;
  EXPECT_EQ(log.rfind("error: ", 0), 0u) << log;
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_EQ(file_text(dir + "/before.md5"), file_text(dir + "/after.md5"));
  EXPECT_EQ(file_text(dir + "/after.ls"), "manifest.json\npoints.ply\npredictions.npz\ntrajectory.txt\n");
}

// The end of a run needs the outputs' size plus one chunk (< 1 MiB at this
// frame size), not a second copy of predictions.npz: a tmpfs of that size holds
// a whole run.
TEST(RunOutputs, TheEndOfARunNeedsNoSecondCopyOfTheArrays) {
  const std::string dir = temp("peak");
  fs::create_directories(dir + "/mnt");
  const Result probe = shell("unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs " + dir + "/mnt' 2>&1");
  if (probe.status != 0) GTEST_SKIP() << "no private tmpfs here (needs root and mount namespaces): " << probe.output;
  ASSERT_EQ(shell(run_images(courthouse(), dir + "/reference")).status, 0);
  uintmax_t total = 0, npz = fs::file_size(dir + "/reference/predictions.npz");
  for (const auto& e : fs::directory_iterator(dir + "/reference")) total += (e.file_size() + 4095) / 4096 * 4096;
  // Room for the outputs, one chunk (1 MiB), the lock file's page and a few pages of slack.
  const uintmax_t room = total + (1u << 20) + 8 * 4096;
  ASSERT_LT(room, total + npz / 2) << "the frames are too small to tell the designs apart";
  const Result r = shell("unshare -m sh -c 'mount -t tmpfs -o size=" + std::to_string(room) + " tmpfs " + dir +
                         "/mnt && " + run_images(courthouse(), dir + "/mnt/out") + "' 2>&1");
  EXPECT_EQ(r.status, 0) << "room " << room << " for " << total << " bytes of outputs\n" << r.output;
}

// Frames named as the inputs: predictions.npz records the file names, and
// COLMAP's images, the images/ and depth/ files and nerfstudio's paths follow.
TEST(RunOutputs, ExportsNameFramesAfterTheInputFiles) {
  ASSERT_EQ(shell("command -v colmap").status, 0) << "colmap is not installed (scripts/setup.sh installs it)";
  const std::string dir = temp("names"), images = dir + "/images in", out = dir + "/out";
  fs::create_directories(images);
  const std::vector<std::string> names = {"IMG_0007.png", "IMG_0011.png", "IMG_0100.png", "zz last.png"};
  for (size_t i = 0; i < names.size(); ++i)
    fs::copy_file(courthouse() + "/00000" + std::to_string(i) + ".png", images + "/" + names[i]);
  Result r = shell(run_images("'" + images + "'", out, "--export colmap,nerfstudio,depth"));
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json c = check_outputs(out);
  EXPECT_EQ(c["frames"], nlohmann::json(names));
  const std::string converted = dir + "/colmap_text";
  fs::create_directories(converted);
  r = shell("QT_QPA_PLATFORM=offscreen colmap model_converter --input_path " + out + "/sparse/0 --output_path " +
            converted + " --output_type TXT 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  // images.txt: "IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME" then a line of points.
  std::vector<std::string> colmap_names;
  std::istringstream text(file_text(converted + "/images.txt"));
  bool pose_line = true;
  for (std::string line; std::getline(text, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (pose_line) {
      std::istringstream fields(line);
      std::string f;
      for (int i = 0; i < 9; ++i) fields >> f;
      std::string name;
      std::getline(fields >> std::ws, name);
      colmap_names.push_back(name);
    }
    pose_line = !pose_line;
  }
  std::sort(colmap_names.begin(), colmap_names.end());
  EXPECT_EQ(colmap_names, (std::vector<std::string>{"IMG_0007.png", "IMG_0011.png", "IMG_0100.png", "zz last.png"}));
  for (const std::string& n : names) {
    EXPECT_TRUE(fs::exists(out + "/images/" + n)) << n;
    EXPECT_TRUE(fs::exists(out + "/depth/" + n)) << n;
  }
  const nlohmann::json transforms = nlohmann::json::parse(file_text(out + "/transforms.json"));
  EXPECT_EQ(transforms["frames"][0]["file_path"], "images/IMG_0007.png");
}

// Sky masks as upstream caches them: the sky's points leave points.ply (run)
// and every export; a mask of twice the frame's size is resized; a missing
// mask is one line naming the file.
TEST(RunOutputs, SkyMasksRemoveTheSkyFromEveryPointCloud) {
  const std::string dir = temp("sky"), images = dir + "/frames", out = dir + "/out";
  fs::create_directories(images);
  for (int i = 0; i < 3; ++i)
    fs::copy_file(courthouse() + "/00000" + std::to_string(i) + ".png", images + "/" + std::to_string(i) + ".png");
  // Frames are 126 x 70; the sky is the top 20 rows (at twice the size for frame 2: 40 of 140).
  constexpr int kSkyRows = 20, kW = 126, kH = 70;
  ASSERT_EQ(shell(kPython + " " + kTools + "/make_sky_masks.py " + images + "_sky_masks 126 70 20 0.png 1.png").status, 0);
  ASSERT_EQ(shell(kPython + " " + kTools + "/make_sky_masks.py " + images + "_sky_masks 252 140 40 2.png").status, 0);
  Result r = shell(run_images(images, out, "--sky-masks --export ply --conf-threshold 1.2") + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  // Expected: finite confident points below the sky rows, counted from the npz.
  const auto npz = io::read_npz(out + "/predictions.npz");
  const Tensor& conf = npz.at("depth_conf");
  const Tensor& xyz = npz.at("world_points");
  int64_t below_sky = 0, in_sky = 0;
  for (int64_t i = 0; i < conf.numel(); ++i) {
    const float* q = xyz.f32() + 3 * i;
    const bool keep = conf.f32()[i] > 1.2f && std::isfinite(q[0]) && std::isfinite(q[1]) && std::isfinite(q[2]);
    const bool sky = (i % (kW * kH)) / kW < kSkyRows;
    (sky ? in_sky : below_sky) += keep;
  }
  ASSERT_GT(in_sky, 0) << "the test needs confident points in the masked rows";
  auto ply_points = [&](const std::string& path) {
    const std::string ply = file_text(path);
    const size_t at = ply.find("element vertex ");
    return at == std::string::npos ? -1 : std::stoll(ply.substr(at + 15));
  };
  EXPECT_EQ(ply_points(out + "/points.ply"), below_sky);  // run's own cloud
  // export (run --export ply rewrote points.ply with the export's selection, the same points).
  const std::string exported = dir + "/exported";
  r = shell(kCli + " export " + out + " --format ply,glb --conf-threshold 1.2 --sky-masks " + images +
            "_sky_masks --out " + exported + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(ply_points(exported + "/points.ply"), below_sky);
  r = shell(kCli + " export " + out + " --format ply --conf-threshold 1.2 --out " + dir + "/unmasked 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(ply_points(dir + "/unmasked/points.ply"), below_sky + in_sky);

  fs::remove(images + "_sky_masks/1.png");
  r = shell(run_images(images, dir + "/not_run", "--sky-masks") + " 2>&1");  // refused before the model loads
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.rfind("error: --sky-masks " + images + "_sky_masks: no mask for frame '1.png'", 0), 0u) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/not_run"));
  r = shell(kCli + " export " + out + " --format ply --sky-masks " + images + "_sky_masks --out " + dir + "/missing");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.rfind("error: --sky-masks ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(images + "_sky_masks/1.png"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}
