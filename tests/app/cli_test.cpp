// The lingbot-map command line, end to end: what a user types and sees.
// `run` is checked against upstream's own outputs for the same frames
// (tests/fixtures/model_small, made by tools/reference/make_model_fixtures.py
// from upstream's PIL preprocessing and PyTorch model), so this test covers
// image decoding and preprocessing as well as the model.
#include "checkpoint/checkpoint.h"
#include "output/npz_reader.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace lingbot;

namespace {

using Result = test::CommandResult;

Result cli(const std::string& args) { return test::run_shell(std::string(LINGBOT_CLI_PATH) + " " + args); }

std::string small(const std::string& name) { return test::fixture_path("model_small/" + name); }
std::string out_dir(const std::string& name) { return std::string(::testing::TempDir()) + "/lingbot_cli_" + name; }

}  // namespace

TEST(Cli, WithoutArgumentsExplainsUsage) {
  const Result r = cli("");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("inspect"), std::string::npos) << r.output;
}

TEST(Cli, HelpListsTheEnvironmentVariables) {
  for (const std::string& args : {std::string("--help"), std::string("run --help"), std::string("bench --help")}) {
    const Result r = cli(args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
    for (const char* name : {"LINGBOT_CUDA_GRAPHS", "LINGBOT_CUDA_SYNC", "LINGBOT_CUDA_LANE_PRIORITY",
                             "LINGBOT_ATTENTION_KERNEL", "LINGBOT_CONV_ALGORITHM", "LINGBOT_PROFILE"})
      EXPECT_NE(r.output.find(name), std::string::npos) << args << ": " << name << "\n" << r.output;
  }
  // The engine's defaults as the library has them.
  EXPECT_NE(cli("run --help").output.find("(default: 2)"), std::string::npos);
}

// --help ends with the table of exit statuses, and the commands return
// what it says: 1 for a bad flag, 2 for a checkpoint inspect finds unfit.
TEST(Cli, HelpEndsWithTheExitStatusTable) {
  for (const std::string& args : {std::string("--help"), std::string("run --help"), std::string("inspect --help")}) {
    const Result r = cli(args);
    EXPECT_NE(r.output.find("Exit status:\n  0  success\n  1  an error the user can act on"), std::string::npos)
        << args << "\n" << r.output;
    EXPECT_NE(r.output.find("\n  2  inspect: the checkpoint does not fit"), std::string::npos) << r.output;
  }
  EXPECT_EQ(cli("run --kv-window -1").status, 1);
  EXPECT_EQ(cli("inspect " + small("weights.pt")).status, 2);  // the official config: nothing fits
}

namespace {

// The spin count libgomp runs with in the process that does the work: it
// prints its settings when loaded (OMP_DISPLAY_ENV=verbose), once per exec,
// so the last block is the one in force.
std::string spin_count_in_force(const std::string& environment) {
  const Result r = test::run_shell(environment + " OMP_DISPLAY_ENV=verbose " + LINGBOT_CLI_PATH + " --version");
  const std::string key = "GOMP_SPINCOUNT = '";
  const size_t at = r.output.rfind(key);
  if (r.status != 0 || at == std::string::npos) return "not shown: " + r.output;
  return r.output.substr(at + key.size(), r.output.find('\'', at + key.size()) - at - key.size());
}

}  // namespace

// OpenMP's idle threads sleep instead of spinning (2 threads were 4x slower
// than 1 beside a busy core, issue 22): passive waiting is spin count 0
// (libgomp's default is 300000), unless the user set the policy or the
// spin count, which are left as given.
TEST(Cli, OpenMpThreadsWaitPassivelyUnlessTheUserChose) {
  EXPECT_EQ(spin_count_in_force("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT"), "0");
  EXPECT_EQ(spin_count_in_force("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=12345"), "12345");
  EXPECT_EQ(spin_count_in_force("env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active"), "30000000000");
}

TEST(Cli, InspectReportsAMatchingCheckpoint) {
  const Result r = cli("inspect " + small("weights.pt") + " --config " + small("config.json"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("390,188"), std::string::npos) << r.output;  // parameters, as torch counted them
  EXPECT_NE(r.output.find("matches the config (358 tensors)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("aggregator.global_blocks"), std::string::npos) << r.output;
}

TEST(Cli, InspectReportsAMismatchByName) {
  const Result r = cli("inspect " + small("weights.pt"));  // the official config: nothing fits
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("does not fit the config"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mis-shaped"), std::string::npos) << r.output;
}

TEST(Cli, UserErrorsAreOneLineAndExitOne) {
  for (const std::string& args :
       {std::string("inspect /nonexistent/model.pt"), "inspect " + small("config.json"),
        "run --images " + test::fixture_path("courthouse"),
        "run --model " + small("weights.pt") + " --config " + small("config.json") + " --images /nonexistent/dir",
        "inspect " + small("weights.pt") + " --config /nonexistent/config.json"}) {
    const Result r = cli(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
  // Without --model, say where the official checkpoints are.
  EXPECT_NE(cli("run --images " + test::fixture_path("courthouse")).output.find("robbyant/lingbot-map"),
            std::string::npos);
}

TEST(Cli, RunReconstructsRealFramesLikeUpstream) {
  const std::string out = out_dir("run");
  const Result r = cli("run --model " + small("weights.pt") + " --config " + small("config.json") + " --images " +
                       test::fixture_path("courthouse") +
                       " --image-size 126 --num-scale-frames 3 --kv-window 4 --threads 2 --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto npz = io::read_npz(out + "/predictions.npz");
  const io::StateDict ref = io::load_state_dict(small("default.safetensors"));
  const io::StateDict inputs = io::load_state_dict(small("inputs.safetensors"));
  for (const char* key : {"pose_enc", "depth", "depth_conf", "world_points", "extrinsic", "intrinsic", "images"})
    ASSERT_TRUE(npz.count(key)) << key;
  EXPECT_EQ(npz.at("depth").shape(), (Shape{14, 70, 126, 1}));
  EXPECT_EQ(npz.at("world_points").shape(), (Shape{14, 70, 126, 3}));
  EXPECT_EQ(npz.at("images").shape(), (Shape{14, 3, 70, 126}));
  // Our decoding + preprocessing of the PNGs against upstream's (PIL).
  const Tensor expected_images = inputs.at("images_u8").to_dtype(DType::F32);
  Tensor ours_u8 = npz.at("images").clone();
  for (int64_t i = 0; i < ours_u8.numel(); ++i) ours_u8.f32()[i] *= 255.0f;
  EXPECT_LE(test::max_abs_diff(ours_u8, expected_images), 1.0 + 1e-3);
  for (const char* key : {"pose_enc", "depth", "depth_conf", "extrinsic", "intrinsic"}) {
    const double err = test::relative_error(npz.at(key), ref.at(key).to_dtype(DType::F32));
    EXPECT_LT(err, 1e-4) << key;
  }
  // Trajectory: a comment line, then one line per frame.
  std::ifstream traj(out + "/trajectory.txt");
  std::string line;
  int lines = 0;
  while (std::getline(traj, line)) lines += line.empty() || line[0] == '#' ? 0 : 1;
  EXPECT_EQ(lines, 14);
  // The PLY holds exactly the points whose confidence exceeds the default threshold (1.5).
  int64_t confident = 0;
  const Tensor& conf = npz.at("depth_conf");
  for (int64_t i = 0; i < conf.numel(); ++i) confident += conf.f32()[i] > 1.5f ? 1 : 0;
  std::ifstream ply(out + "/points.ply", std::ios::binary);
  std::string header;
  int64_t vertices = -1;
  while (std::getline(ply, line) && line != "end_header")
    if (line.rfind("element vertex ", 0) == 0) vertices = std::stoll(line.substr(15));
  EXPECT_EQ(vertices, confident);
}

TEST(Cli, NoDenseKeepsOnlyCameras) {
  const std::string out = out_dir("nodense");
  const Result r = cli("run --model " + small("weights.pt") + " --config " + small("config.json") + " --images " +
                       test::fixture_path("courthouse") +
                       " --image-size 126 --num-scale-frames 3 --kv-window 4 --no-dense --first-k 5 --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto npz = io::read_npz(out + "/predictions.npz");
  EXPECT_EQ(npz.count("depth"), 0u);
  EXPECT_EQ(npz.at("pose_enc").shape(), (Shape{5, 9}));
}

// bench prints only what it measured. A stream shorter than the scale phase
// has a phase 1 and nothing else; its phase 1 cannot exceed the command's
// own wall time (it once printed the machine's uptime); figures the stream
// was too short for are named as missing, not printed as 0 or -1.
TEST(Cli, BenchPrintsOnlyWhatItMeasured) {
  const std::string small_bench = "bench --config " + small("config.json") + " --height 70 --width 126 --threads 1";
  const auto start = std::chrono::steady_clock::now();
  const Result short_run = cli(small_bench + " --frames 2");
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(short_run.status, 0) << short_run.output;
  double phase1_ms = -1;
  const size_t at = short_run.output.find("phase 1 (2 scale frames together): ");
  ASSERT_NE(at, std::string::npos) << short_run.output;
  std::istringstream(short_run.output.substr(at + 35)) >> phase1_ms;
  EXPECT_GT(phase1_ms, 0) << short_run.output;
  EXPECT_LT(phase1_ms, wall_ms) << short_run.output;
  for (const char* never : {"FPS", "frame 10:", "-1.0 ms", "0.00 FPS", "steady-state median"})
    EXPECT_EQ(short_run.output.find(never), std::string::npos) << never << "\n" << short_run.output;
  EXPECT_NE(short_run.output.find("not measured:"), std::string::npos) << short_run.output;

  // Long enough for frame 10 and a steady state at pipeline depth 0.
  const Result longer = cli(small_bench + " --frames 12 --pipeline-depth 0");
  ASSERT_EQ(longer.status, 0) << longer.output;
  EXPECT_NE(longer.output.find("frame 10: "), std::string::npos) << longer.output;
  EXPECT_NE(longer.output.find("steady-state median: "), std::string::npos) << longer.output;
  EXPECT_NE(longer.output.find("over frames 7-11"), std::string::npos) << longer.output;  // second half of 3..11
}

// bench's host memory account: the load's peak, what stays after the load
// and the stream's own peak, printed and in --json, consistent with each
// other and with the whole run's peak RSS.
TEST(Cli, BenchAccountsForHostMemory) {
  const std::string json = out_dir("bench_memory.json");
  const Result r = cli("bench --config " + small("config.json") + " --height 70 --width 126 --threads 1 --frames 5 " +
                       "--json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("host memory: load peak "), std::string::npos) << r.output;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(json));
  const nlohmann::json& m = j.at("host_memory_mb");
  const double peak = j.at("peak_rss_mb").get<double>();
  const double load_peak = m.at("load_peak").get<double>(), after_load = m.at("after_load").get<double>();
  EXPECT_GT(after_load, 0.0);
  EXPECT_LE(after_load, load_peak);
  EXPECT_LE(load_peak, peak);
  if (!m.at("streaming_peak").is_null()) {  // Linux with clear_refs
    EXPECT_LE(m.at("streaming_peak").get<double>(), peak);
    EXPECT_EQ(std::max(load_peak, m.at("streaming_peak").get<double>()), peak);
  }
  // The weights are resident after the load.
  EXPECT_GE(after_load, m.at("weights").get<double>());
  std::filesystem::remove(json);
}

// bench --json lists every timed streamed frame; its steady-state median is
// the median of the second half of them.
TEST(Cli, BenchJsonListsEachTimedFrame) {
  const std::string json = out_dir("bench_frames.json");
  const Result r = cli("bench --config " + small("config.json") +
                       " --height 70 --width 126 --threads 1 --frames 7 --pipeline-depth 0 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(j.at("first_timed_frame").get<int>(), 3);  // the small model's 3 scale frames
  const std::vector<double> frames = j.at("frame_ms").get<std::vector<double>>();
  ASSERT_EQ(frames.size(), 4u);  // frames 3-6, each waited for (pipeline depth 0)
  for (double ms : frames) EXPECT_GT(ms, 0.0);
  std::vector<double> second_half(frames.begin() + 2, frames.end());
  std::sort(second_half.begin(), second_half.end());
  EXPECT_EQ(j.at("steady_median_ms").get<double>(), second_half[1]);
  EXPECT_TRUE(j.at("frame10_ms").is_null());
  std::filesystem::remove(json);
}

// A --json that cannot be written fails at once, before the model runs,
// and leaves no file.
TEST(Cli, BenchJsonIntoAMissingFolderFailsAtOnce) {
  const std::string json = out_dir("no_such_folder") + "/bench.json";
  const Result r = cli("bench --config " + small("config.json") + " --height 70 --width 126 --threads 1 --json " + json);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(json), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("phase 1"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(json));
}

// bench --intervals: a line per block of streamed frames with its median
// frame time, memory and the cache it left; the retained special tokens
// grow by 6 for every frame that leaves the 3 scale + 4 window frames.
TEST(Cli, BenchIntervalsReportEachBlock) {
  const Result r = cli("bench --config " + small("config.json") +
                       " --height 70 --width 126 --threads 1 --frames 23 --pipeline-depth 0 --intervals 10");
  ASSERT_EQ(r.status, 0) << r.output;
  // Streamed frames 3..22: blocks 3-12 and 13-22; frames seen 13 and 23, of
  // which 3 scale + 4 window frames stay listed: 6 and 16 evicted.
  for (const char* line : {"frames 3-12: median ", "frames 13-22: median "})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  EXPECT_NE(r.output.find("frames seen 13 stored 13 listed 7 (scale 3 + window 4) evicted 6 | retained specials 36"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("evicted 16 | retained specials 96"), std::string::npos) << r.output;
  EXPECT_EQ(cli("bench --mode windowed").status, 1);
}

// A mistyped flag value or an unknown flag is a user error: exit status 1
// (CLI11's own codes are 100-115), with one line naming the flag; --help is 0.
TEST(Cli, BadFlagsExitWithStatusOne) {
  for (const char* args : {"run --images . --sort size", "run --images . --no-such-flag", "bench --frames x",
                           "inspect"}) {
    const Result r = cli(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
  }
  const Result sort = cli("run --images . --sort size");
  EXPECT_NE(sort.output.find("--sort"), std::string::npos) << sort.output;
  EXPECT_EQ(cli("run --help").status, 0);
}

// Out-of-range numbers are refused before anything loads, in one short
// sentence naming the flag and the bound (CLI11's own validators printed
// the 300-digit range of a double).
TEST(Cli, OutOfRangeFlagsNameTheBound) {
  const std::string run = "run --model " + small("weights.pt") + " --images " + test::fixture_path("courthouse");
  const std::pair<const char*, const char*> cases[] = {
      {" --kv-window -1", "--kv-window: must be >= 1, got -1"},
      {" --num-scale-frames -1", "--num-scale-frames: must be >= 1, got -1"},
      {" --camera-iterations -2", "--camera-iterations: must be >= 1, got -2"},
      {" --threads -3", "--threads: must be >= 0, got -3"},
      {" --image-size 0", "--image-size: must be >= 1, got 0"},
      {" --pipeline-depth 5", "--pipeline-depth: must be between 0 and 2, got 5"},
      {" --stride x", "--stride: must be a number, got 'x'"},
  };
  for (const auto& [flag, message] : cases) {
    const Result r = cli(run + flag);
    EXPECT_EQ(r.status, 1) << flag << "\n" << r.output;
    const std::string first_line = r.output.substr(0, r.output.find('\n'));
    EXPECT_EQ(first_line, message) << flag;
  }
}

namespace {

// The small model's weights as a safetensors file with one more tensor than
// the model has (written here by hand: 8-byte header length, JSON, data).
std::string checkpoint_with_an_extra_tensor() {
  const io::StateDict state = io::load_state_dict(small("weights.pt"));
  nlohmann::ordered_json header;
  std::string data;
  auto add = [&](const std::string& name, const Tensor& t) {
    const Tensor f = t.to_dtype(DType::F32);
    const size_t begin = data.size();
    data.append(static_cast<const char*>(f.data()), static_cast<size_t>(f.nbytes()));
    header[name] = {{"dtype", "F32"}, {"shape", f.shape()}, {"data_offsets", {begin, data.size()}}};
  };
  for (const auto& [name, t] : state) add(name, t);
  Tensor extra = Tensor::zeros({2, 3});
  add("point_head.extra.weight", extra);
  const std::string json = header.dump();
  const uint64_t n = json.size();
  const std::string path = out_dir("extra_tensor.safetensors");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << json << data;
  return path;
}

}  // namespace

// A tensor the model does not use is never accepted without a word:
// inspect's verdict is "does not fit" with a non-zero status; run refuses
// the checkpoint, naming the tensor and the flag, before any frame is read,
// and with --allow-extra-tensors runs on it with the tensor named in a
// warning.
TEST(Cli, ExtraTensorsAreRefusedUnlessAllowed) {
  const std::string model = checkpoint_with_an_extra_tensor();
  const Result inspect = cli("inspect " + model + " --config " + small("config.json"));
  EXPECT_EQ(inspect.status, 2) << inspect.output;
  EXPECT_NE(inspect.output.find("1 unexpected (point_head.extra.weight)"), std::string::npos) << inspect.output;

  const std::string run = "run --model " + model + " --config " + small("config.json") + " --images " +
                          test::fixture_path("courthouse") + " --image-size 126 --first-k 4 --no-dense --out " +
                          out_dir("extra_tensor_run");
  std::filesystem::remove_all(out_dir("extra_tensor_run"));
  const Result refused = cli(run);
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_NE(refused.output.find("1 tensor the model does not use (point_head.extra.weight): refused"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("--allow-extra-tensors"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(out_dir("extra_tensor_run") + "/trajectory.txt")) << refused.output;

  const Result allowed = cli(run + " --allow-extra-tensors");
  EXPECT_EQ(allowed.status, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("warning: " + model + ": 1 tensor the model does not use (point_head.extra.weight)"),
            std::string::npos)
      << allowed.output;
}

// --threads beyond what the process can run at once is capped with a
// warning naming both numbers: under `taskset -c 0` one CPU is in the
// affinity mask, so 1000 threads become 1.
TEST(Cli, ThreadsAreCappedAtTheAffinityMask) {
  if (test::run_shell("taskset -c 0 true").status != 0) GTEST_SKIP() << "taskset cannot pin here";
  const Result r = test::run_shell("taskset -c 0 " + std::string(LINGBOT_CLI_PATH) + " run --model " +
                                   small("weights.pt") + " --config " + small("config.json") + " --images " +
                                   test::fixture_path("courthouse") +
                                   " --image-size 126 --first-k 2 --no-dense --device cpu --threads 1000 --out " +
                                   out_dir("threads_capped"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--threads 1000: more than this process can run at once"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 CPUs in its affinity mask); using 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu (1 threads"), std::string::npos) << r.output;
}

// --out is made with its parents, or refused with the reason, before the
// model loads (the log's "model loaded" line never appears).
TEST(Cli, OutIsCheckedBeforeTheModelLoads) {
  const std::string run = "run --model " + small("weights.pt") + " --config " + small("config.json") +
                          " --images " + test::fixture_path("courthouse") + " --image-size 126 --first-k 4 --no-dense";
  const std::string nested = out_dir("nested") + "/a/b";
  std::filesystem::remove_all(out_dir("nested"));
  const Result made = cli(run + " --out " + nested);
  EXPECT_EQ(made.status, 0) << made.output;
  EXPECT_TRUE(std::filesystem::exists(nested + "/trajectory.txt")) << made.output;

  const std::string file = out_dir("a_file");
  std::ofstream(file) << "x";
  const Result onto_file = cli(run + " --out " + file + "/sub");
  EXPECT_EQ(onto_file.status, 1) << onto_file.output;
  EXPECT_NE(onto_file.output.find("--out " + file + "/sub: cannot create the folder: "), std::string::npos)
      << onto_file.output;
  EXPECT_EQ(onto_file.output.find("model loaded"), std::string::npos) << onto_file.output;
}

// The CPU path runs where CUDA is absent (issue 22, item 7): lingbot-map
// links no CUDA library (the CUDA backend is the module liblingbot_cuda.so,
// loaded for --device cuda|auto), and with the CUDA libraries hidden
// (tests/tools/without_cuda_libraries.sh: a mount namespace) --device cpu
// runs, --device auto runs on the CPU saying why, and --device cuda is
// refused with the dynamic loader's reason.
TEST(Cli, RunsOnTheCpuWhereTheCudaLibrariesAreAbsent) {
  const Result needed = test::run_shell("readelf -d " + std::string(LINGBOT_CLI_PATH));
  ASSERT_EQ(needed.status, 0) << needed.output;
  for (const char* lib : {"libcudart", "libcublas", "libcudnn", "libcuda."})
    EXPECT_EQ(needed.output.find(lib), std::string::npos) << lib << "\n" << needed.output;
#ifndef LINGBOT_CUDA_MODULE_PATH
  GTEST_SKIP() << "built without the CUDA backend (no liblingbot_cuda.so to hide the CUDA libraries from)";
#else
  const std::string hide = std::string(LINGBOT_TEST_TOOLS_DIR) + "/without_cuda_libraries.sh" + " " +
                           LINGBOT_CUDA_MODULE_PATH + " " + LINGBOT_CLI_PATH + " run --model " + small("weights.pt") +
                           " --config " + small("config.json") + " --images " + test::fixture_path("courthouse") +
                           " --image-size 126 --first-k 4 --no-dense --out " + out_dir("without_cuda");
  const Result probe = test::run_shell(hide + " --device cpu");
  if (probe.status == 77) GTEST_SKIP() << probe.output;
  EXPECT_EQ(probe.status, 0) << probe.output;
  EXPECT_NE(probe.output.find("wrote "), std::string::npos) << probe.output;

  const Result automatic = test::run_shell(hide + " --device auto");
  EXPECT_EQ(automatic.status, 0) << automatic.output;
  EXPECT_NE(automatic.output.find("device auto: running on the CPU, CUDA is unavailable: libcudart.so"),
            std::string::npos)
      << automatic.output;
  EXPECT_NE(automatic.output.find("cannot open shared object file"), std::string::npos) << automatic.output;

  const Result cuda = test::run_shell(hide + " --device cuda");
  EXPECT_EQ(cuda.status, 1) << cuda.output;
  EXPECT_NE(cuda.output.find("error: device cuda: CUDA is unavailable: libcudart.so"), std::string::npos)
      << cuda.output;
#endif
}
