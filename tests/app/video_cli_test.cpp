// `lingbot-map run --video`, end to end, on videos the ffmpeg program makes
// during the test (skipped without it): a lossless video of the courthouse
// frames must give exactly what the frames give, as must the same frames
// piped in raw; damage, bad files, demo.py's automatic keyframe interval
// and --emit jsonl.
#include "output/npz_reader.h"
#include "test_support.h"
#include "video/video_reader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace lingbot;

namespace {

using Result = test::CommandResult;

// Runs a shell command line; `{cli}` in it stands for the lingbot-map binary.
Result shell(std::string command) {
  const std::string cli = LINGBOT_CLI_PATH;
  for (size_t at; (at = command.find("{cli}")) != std::string::npos;) command.replace(at, 5, cli);
  return test::run_shell(command);
}

bool can_make_videos() {
  return video::ffmpeg_available() && std::system("ffmpeg -version > /dev/null 2>&1") == 0;
}
#define SKIP_WITHOUT_FFMPEG() \
  if (!can_make_videos()) GTEST_SKIP() << "built without FFmpeg, or no ffmpeg program to make test videos"

std::string temp(const std::string& name) { return std::string(::testing::TempDir()) + "/lingbot_video_cli_" + name; }
std::string ffmpeg(const std::string& args) { return "ffmpeg -nostdin -loglevel error -y " + args; }

// The small model of tests/fixtures/model_small, as the other CLI tests run it.
std::string small_model() {
  const std::string dir = test::fixture_path("model_small/");
  return "--model " + dir + "weights.pt --config " + dir + "config.json --num-scale-frames 3 --kv-window 4 --threads 2";
}

int64_t frames_in(const std::string& out) { return io::read_npz(out + "/predictions.npz").at("pose_enc").shape()[0]; }

void expect_same_predictions(const std::string& out, const std::string& reference, const std::string& label) {
  const auto ours = io::read_npz(out + "/predictions.npz");
  const auto ref = io::read_npz(reference + "/predictions.npz");
  for (const char* key : {"pose_enc", "depth", "depth_conf", "world_points", "extrinsic", "intrinsic", "images"}) {
    ASSERT_TRUE(ours.count(key) && ref.count(key)) << label << ": " << key;
    ASSERT_EQ(ours.at(key).shape(), ref.at(key).shape()) << label << ": " << key;
    EXPECT_LE(test::relative_error(ours.at(key), ref.at(key)), 1e-5) << label << ": " << key;
  }
}

}  // namespace

TEST(VideoCli, LosslessVideoAndRawPipeGiveTheFramesPredictions) {
  SKIP_WITHOUT_FFMPEG();
  const std::string frames = test::fixture_path("courthouse");
  const std::string video = temp("courthouse.mkv");
  ASSERT_EQ(shell(ffmpeg("-framerate 10 -i " + frames + "/%06d.png -c:v ffv1 " + video)).status, 0);
  // 8 frames: past the 3 scale frames + window of 4, so eviction is covered.
  const std::string common = small_model() + " --image-size 126 --first-k 8";

  const std::string from_images = temp("from_images");
  Result r = shell("{cli} run " + common + " --images " + frames + " --out " + from_images);
  ASSERT_EQ(r.status, 0) << r.output;

  const std::string from_video = temp("from_video");
  r = shell("{cli} run " + common + " --video " + video + " --out " + from_video);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ffv1, 518x294, 10 fps"), std::string::npos) << r.output;
  expect_same_predictions(from_video, from_images, "--video");

  const std::string from_pipe = temp("from_pipe");
  r = shell(ffmpeg("-i " + video + " -f rawvideo -pix_fmt rgb24 -") + " | {cli} run " + common +
            " --video - --input-format rgb24 --input-size 518x294 --out " + from_pipe);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_same_predictions(from_pipe, from_images, "--video -");
}

TEST(VideoCli, SamplesTheVideoAndWritesItsTimes) {
  SKIP_WITHOUT_FFMPEG();
  const std::string video = temp("pattern25.avi");
  ASSERT_EQ(shell(ffmpeg("-f lavfi -i testsrc=size=64x48:rate=25 -frames:v 20 -c:v ffv1 " + video)).status, 0);
  const std::string out = temp("sampled");
  const Result r = shell("{cli} run " + small_model() + " --image-size 28 --no-dense --video " + video + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(frames_in(out), 10);  // 25 fps at --fps 10: every 2nd frame
  std::ifstream trajectory(out + "/trajectory.txt");
  std::string line;
  std::vector<std::string> times;
  while (std::getline(trajectory, line))
    if (!line.empty() && line[0] != '#') times.push_back(line.substr(0, line.find(' ')));
  ASSERT_EQ(times.size(), 10u);
  EXPECT_EQ(times[1], "0.080000");  // seconds into the video
}

TEST(VideoCli, DamageEndsWithAWarningAndKeepsTheFramesBefore) {
  SKIP_WITHOUT_FFMPEG();
  const std::string whole = temp("whole.mkv");
  ASSERT_EQ(shell(ffmpeg("-f lavfi -i testsrc=size=64x48:rate=10 -frames:v 10 -c:v ffv1 " + whole)).status, 0);
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = temp("cut.mkv");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 6 / 10);
  const std::string out = temp("cut_out");
  Result r = shell("{cli} run " + small_model() + " --image-size 28 --no-dense --fps 10 --video " + cut + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: " + cut + ": the file is damaged or truncated"), std::string::npos) << r.output;
  const int64_t kept = frames_in(out);
  EXPECT_GT(kept, 2);
  EXPECT_LT(kept, 10);

  // A partial last raw frame: dropped with a warning.
  const std::string pipe_out = temp("partial_pipe");
  r = shell("(" + ffmpeg("-i " + whole + " -frames:v 3 -f rawvideo -pix_fmt rgb24 -") +
            "; head -c 100 /dev/zero) | {cli} run " + small_model() +
            " --image-size 28 --no-dense --video - --input-format rgb24 --input-size 64x48 --out " + pipe_out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: stdin: the last frame is partial (100 of 9216 bytes)"), std::string::npos)
      << r.output;
  EXPECT_EQ(frames_in(pipe_out), 3);
}

TEST(VideoCli, BadVideosAreOneLineErrors) {
  SKIP_WITHOUT_FFMPEG();
  const std::string audio = temp("audio_only.m4a");
  ASSERT_EQ(shell(ffmpeg("-f lavfi -i sine=duration=0.5 -c:a aac " + audio)).status, 0);
  const std::string empty = temp("empty.mp4");
  std::ofstream{empty};
  const std::string garbage = temp("garbage.mkv");
  std::ofstream(garbage) << std::string(3000, 'x');
  const std::string missing = temp("missing.mp4");
  std::remove(missing.c_str());
  for (const auto& [file, says] : std::vector<std::pair<std::string, std::string>>{
           {audio, "no video stream"}, {empty, "empty file"}, {garbage, "not a video"}, {missing, "no such file"}}) {
    const Result r = shell("{cli} run " + small_model() + " --video " + file + " --out " + temp("bad"));
    EXPECT_EQ(r.status, 1) << file << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("error: " + file + ": ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  // Raw frames need their format and size.
  const Result r = shell("true | {cli} run " + small_model() + " --video - --out " + temp("bad"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--input-format rgb24"), std::string::npos) << r.output;
  // An empty pipe: the decoder thread's error reaches the user as one line.
  const Result empty_pipe = shell("true | {cli} run " + small_model() +
                                  " --video - --input-format rgb24 --input-size 64x48 --out " + temp("bad"));
  EXPECT_EQ(empty_pipe.status, 1) << empty_pipe.output;
  EXPECT_EQ(empty_pipe.output.rfind("error: stdin: no frames", 0), 0u) << empty_pipe.output;
  EXPECT_EQ(std::count(empty_pipe.output.begin(), empty_pipe.output.end(), '\n'), 1) << empty_pipe.output;
}

TEST(VideoCli, LongInputsGetDemoPysKeyframeInterval) {
  SKIP_WITHOUT_FFMPEG();
  // 330 frames after sampling (> 320): ceil(330 / 320) = 2, unless given.
  const std::string video = temp("long.avi");
  ASSERT_EQ(shell(ffmpeg("-f lavfi -i testsrc=size=32x16:rate=10 -frames:v 330 -c:v ffv1 " + video)).status, 0);
  const std::string run = "{cli} run " + small_model() + " --image-size 28 --no-dense --video " + video + " --out " +
                          temp("long_out");
  Result r = shell(run);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("330 frames: keyframe interval 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("keyframe interval 2 |"), std::string::npos) << r.output;
  r = shell(run + " --keyframe-interval 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("330 frames: keyframe interval"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("keyframe interval 1 |"), std::string::npos) << r.output;
  r = shell(run + " --first-k 320");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("keyframe interval 1 |"), std::string::npos) << r.output;
}

TEST(VideoCli, EmitJsonlPrintsEachFinishedFrameOnStdout) {
  SKIP_WITHOUT_FFMPEG();
  const std::string video = temp("emit.avi");
  ASSERT_EQ(shell(ffmpeg("-f lavfi -i testsrc=size=64x48:rate=10 -frames:v 6 -c:v ffv1 " + video)).status, 0);
  const std::string out = temp("emit_out");
  // stdout only: the log stays on stderr.
  const Result r = shell("{ {cli} run " + small_model() + " --image-size 28 --no-dense --emit jsonl --video " + video +
                         " --out " + out + " 2>/dev/null; }");
  ASSERT_EQ(r.status, 0) << r.output;
  const Tensor extrinsic = io::read_npz(out + "/predictions.npz").at("extrinsic");
  std::istringstream lines(r.output);
  std::string line;
  int n = 0;
  for (; std::getline(lines, line); ++n) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("index").get<int>(), n);
    EXPECT_EQ(j.at("name").get<std::string>(), video + " frame " + std::to_string(n));
    EXPECT_NEAR(j.at("timestamp").get<double>(), n / 10.0, 1e-9);
    ASSERT_EQ(j.at("intrinsic").size(), 3u);
    for (int row = 0; row < 3; ++row)
      for (int col = 0; col < 4; ++col)
        EXPECT_NEAR(j.at("camera_to_world")[row][col].get<double>(), extrinsic.f32()[(n * 3 + row) * 4 + col], 1e-5);
  }
  EXPECT_EQ(n, 6);
}

TEST(VideoCli, AnErrorAfterDecodingStartedStopsTheDecoderThread) {
  SKIP_WITHOUT_FFMPEG();
  // The decoder fills its queue and waits; then --out fails on the model's
  // side. The run must end with the one-line error, not hang.
  const std::string video = temp("queue.avi");
  ASSERT_EQ(shell(ffmpeg("-f lavfi -i testsrc=size=64x48:rate=10 -frames:v 40 -c:v ffv1 " + video)).status, 0);
  const std::string not_a_folder = temp("plain_file");
  std::ofstream(not_a_folder) << "x";
  const Result r = shell("timeout 60 {cli} run " + small_model() + " --image-size 28 --video " + video + " --out " +
                         not_a_folder);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("error: --out " + not_a_folder + ": exists and is not a folder"), std::string::npos)
      << r.output;
}
