// Which frames `run` gets: demo.py's sampling, --stride / --first-k, raw
// frames on a pipe, and a decoder thread that always stops.
#include "core/error.h"
#include "video/frame_source.h"
#include "video/raw_frame_reader.h"
#include "test_support.h"
#include "video_test_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fmt/format.h>
#include <filesystem>
#include <thread>
#include <vector>

using namespace lingbot;
using namespace lingbot::test;

namespace {

video::SourceOptions video_options(const std::string& path) {
  video::SourceOptions o;
  o.video = path;
  o.preprocess.image_size = 28;  // tiny frames: the decoding is under test here
  return o;
}

// The decoded-frame numbers of the frames a source gives ("<path> frame N").
std::vector<int> decoded_numbers(video::FrameSource& source) {
  std::vector<int> numbers;
  video::Frame f;
  while (source.next(f)) {
    EXPECT_EQ(f.index, static_cast<int64_t>(numbers.size()));
    numbers.push_back(std::stoi(f.name.substr(f.name.rfind(' ') + 1)));
  }
  return numbers;
}

std::vector<int> range(int from, int to, int step) {
  std::vector<int> v;
  for (int i = from; i < to; i += step) v.push_back(i);
  return v;
}

}  // namespace

TEST(Sampling, IntervalIsDemoPysRoundedRatio) {
  EXPECT_EQ(video::sampling_interval(30, 10), 3);
  EXPECT_EQ(video::sampling_interval(25, 10), 2);   // round(2.5) == 2: half to even
  EXPECT_EQ(video::sampling_interval(35, 10), 4);   // round(3.5) == 4
  EXPECT_EQ(video::sampling_interval(45, 10), 4);   // round(4.5) == 4
  EXPECT_EQ(video::sampling_interval(29.97, 10), 3);
  EXPECT_EQ(video::sampling_interval(60, 10), 6);
  EXPECT_EQ(video::sampling_interval(24, 10), 2);
  EXPECT_EQ(video::sampling_interval(15, 10), 2);   // round(1.5) == 2
  EXPECT_EQ(video::sampling_interval(5, 10), 1);    // max(1, round(0.5) == 0)
  EXPECT_EQ(video::sampling_interval(30, 30), 1);
  EXPECT_EQ(video::sampling_interval(0, 10), 3);    // no rate in the container: 30 fps
  EXPECT_THROW(video::sampling_interval(30, 0), Error);
}

// demo.py: paths = sampled[:first_k][::stride].
TEST(Sampling, SelectorAppliesIntervalThenFirstKThenStride) {
  video::FrameSelector selector(3, 2, 3);
  std::vector<int> kept;
  for (int i = 0; i < 40 && !selector.done(); ++i)
    if (selector.keep(i)) kept.push_back(i);
  EXPECT_EQ(kept, (std::vector<int>{0, 6}));  // sampled 0, 3, 6 (first 3), every 2nd of them
  EXPECT_EQ(video::FrameSelector(3, 2, 3).count_kept(40), 2);
  EXPECT_EQ(video::FrameSelector(1, 3, 7).count_kept(100), 3);  // [:7][::3] -> 0, 3, 6
  EXPECT_EQ(video::FrameSelector(3, 2, 0).count_kept(40), 7);  // 14 sampled: 0, 3, ..., 39; every 2nd
  EXPECT_EQ(video::FrameSelector(2, 1, 0).count_kept(25), 13);
  EXPECT_EQ(video::FrameSelector(1, 1, 0).count_kept(0), 0);
}

TEST(FrameSource, VideoIsSampledAsDemoPy) {
  SKIP_WITHOUT_FFMPEG();
  struct Case {
    int source_fps, frames, fps, stride, first_k;
    std::vector<int> expected;
  };
  const std::vector<Case> cases = {
      {25, 20, 10, 1, 0, range(0, 20, 2)},   // every 2nd
      {30, 30, 10, 1, 0, range(0, 30, 3)},   // every 3rd
      {10, 7, 10, 1, 0, range(0, 7, 1)},     // every frame
      {30, 30, 5, 1, 0, range(0, 30, 6)},
      {15, 9, 10, 1, 0, range(0, 9, 2)},
      {30, 30, 10, 2, 0, range(0, 30, 6)},   // --stride after sampling
      {30, 30, 10, 1, 4, {0, 3, 6, 9}},      // --first-k after sampling
      {30, 30, 10, 2, 3, {0, 6}},            // [:3][::2] of the sampled frames, as demo.py
  };
  for (const Case& c : cases) {
    const std::string label = std::to_string(c.source_fps) + "fps_" + std::to_string(c.frames);
    const std::string path = make_pattern_video("sampling_" + label + ".avi", c.source_fps, c.frames);
    video::SourceOptions o = video_options(path);
    o.fps = c.fps;
    o.stride = c.stride;
    o.first_k = c.first_k;
    auto source = video::open_frame_source(o);
    EXPECT_EQ(source->expected_frames(), static_cast<int64_t>(c.expected.size())) << label;
    EXPECT_EQ(source->width(), 28);
    EXPECT_EQ(decoded_numbers(*source), c.expected)
        << label << " at --fps " << c.fps << " --stride " << c.stride << " --first-k " << c.first_k;
  }
}

TEST(FrameSource, TimestampsAreSecondsIntoTheVideo) {
  SKIP_WITHOUT_FFMPEG();
  auto source = video::open_frame_source(video_options(make_pattern_video("times.avi", 25, 6)));
  std::vector<double> times;
  for (video::Frame f; source->next(f);) times.push_back(f.timestamp);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_NEAR(times[0], 0.0, 1e-9);
  EXPECT_NEAR(times[1], 0.08, 1e-9);
  EXPECT_NEAR(times[2], 0.16, 1e-9);
}

TEST(FrameSource, RotateCw90TurnsFramesAfterTheStreamsRotation) {
  SKIP_WITHOUT_FFMPEG();
  video::SourceOptions o = video_options(make_pattern_video("turn.avi", 10, 2));
  o.preprocess.mode = io::PreprocessOptions::Mode::Pad;  // keeps the whole frame: the padding shows the turn
  o.preprocess.image_size = 56;
  auto plain = video::open_frame_source(o);
  o.rotate_cw90 = true;
  auto turned = video::open_frame_source(o);
  EXPECT_EQ(plain->width(), 56);
  EXPECT_EQ(turned->width(), 56);
  video::Frame a, b;
  ASSERT_TRUE(plain->next(a));
  ASSERT_TRUE(turned->next(b));
  // Padded to 56x56 either way; the image inside is 56x42 in one, 42x56 in
  // the other: row 0 is padding white in the plain frame, column 0 in the turned one.
  const int64_t plane = 56 * 56;
  auto white_row0 = [&](const Tensor& t) {
    for (int x = 0; x < 56; ++x) if (t.f32()[x] != 1.0f || t.f32()[plane + x] != 1.0f) return false;
    return true;
  };
  auto white_col0 = [&](const Tensor& t) {
    for (int y = 0; y < 56; ++y) if (t.f32()[y * 56] != 1.0f || t.f32()[plane + y * 56] != 1.0f) return false;
    return true;
  };
  EXPECT_TRUE(white_row0(a.image) && !white_col0(a.image));
  EXPECT_TRUE(white_col0(b.image) && !white_row0(b.image));
}

TEST(FrameSource, RawFramesOnAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  // Two and a half 4x2 frames.
  std::string bytes;
  for (int i = 0; i < 4 * 2 * 3 * 5 / 2; ++i) bytes.push_back(static_cast<char>(i));
  ASSERT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fds[1]);
  video::RawFrameReader reader(fds[0], "stdin", 4, 2);
  video::DecodedFrame f;
  ASSERT_TRUE(reader.next(f));
  EXPECT_EQ(f.rgb.width, 4);
  EXPECT_EQ(f.rgb.rgb[5], 5);
  ASSERT_TRUE(reader.next(f));
  EXPECT_EQ(f.index, 1);
  EXPECT_EQ(f.rgb.rgb[0], 24);
  EXPECT_FALSE(reader.next(f));  // the half frame: a warning, dropped
  close(fds[0]);

  // Nothing, or less than one frame: errors naming stdin.
  for (size_t size : {size_t{0}, size_t{10}}) {
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(write(fds[1], bytes.data(), size), static_cast<ssize_t>(size));
    close(fds[1]);
    video::RawFrameReader short_reader(fds[0], "stdin", 4, 2);
    try {
      short_reader.next(f);
      ADD_FAILURE() << size << " bytes: no error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("stdin: ", 0), 0u) << e.what();
    }
    close(fds[0]);
  }
  EXPECT_EQ(video::parse_frame_size("518x294", "--input-size"), (std::pair<int, int>{518, 294}));
  for (const char* bad : {"518", "x294", "0x5", "5x-1", "axb", ""}) EXPECT_THROW(video::parse_frame_size(bad, "--input-size"), Error) << bad;
}

TEST(FrameSource, PipeSourceGivesPreprocessedFramesAndStopsWhenDropped) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  video::SourceOptions o;
  o.video = "-";
  o.input_format = "rgb24";
  o.input_size = "28x14";
  o.preprocess.image_size = 28;
  o.stdin_fd = fds[0];
  const std::string frame(28 * 14 * 3, '\x7f');
  ASSERT_EQ(write(fds[1], frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  {
    auto source = video::open_frame_source(o);
    EXPECT_EQ(source->expected_frames(), -1);
    video::Frame f;
    ASSERT_TRUE(source->next(f));
    EXPECT_EQ(f.image.shape(), (Shape{3, 14, 28}));
    EXPECT_FLOAT_EQ(f.image.f32()[0], 127.0f / 255.0f);
    // The writer stays open and silent: dropping the source must not wait for it.
    const auto t0 = std::chrono::steady_clock::now();
    source.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  }
  close(fds[1]);
  close(fds[0]);
}

// The run log's "the model waited X s for the decoder": time spent in next()
// for frames the decoding thread had not read yet, here a pipe whose writer
// holds the second frame back for 0.3 s; the first frame is not counted.
TEST(FrameSource, CountsTheTimeNextWaitedForTheDecoder) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  video::SourceOptions o;
  o.video = "-";
  o.input_format = "rgb24";
  o.input_size = "28x14";
  o.preprocess.image_size = 28;
  o.stdin_fd = fds[0];
  const std::string frame(28 * 14 * 3, '\x40');
  ASSERT_EQ(write(fds[1], frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  auto source = video::open_frame_source(o);
  video::Frame f;
  ASSERT_TRUE(source->next(f));
  EXPECT_EQ(source->seconds_waited(), 0.0);  // it was decoded before next() was called
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_EQ(write(fds[1], frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
    close(fds[1]);
  });
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(source->next(f));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  writer.join();
  EXPECT_GT(source->seconds_waited(), 0.2);
  EXPECT_LE(source->seconds_waited(), waited);
  EXPECT_FALSE(source->next(f));
  close(fds[0]);
}

// A folder is read on a thread ahead of the model: files the queue holds
// are already decoded (here deleted once read, and still given), and a
// damaged file fails in its turn, after the frames before it.
TEST(FrameSource, AFolderIsReadAheadAndItsErrorsComeInOrder) {
  const std::string dir = temp_path("read_ahead");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 4; ++i)
    std::filesystem::copy_file(fixture_path(fmt::format("courthouse/{:06d}.png", i)),
                               fmt::format("{}/{:06d}.png", dir, i));
  video::SourceOptions o;
  o.images = dir;
  o.preprocess.image_size = 56;
  o.queue_frames = 4;
  {
    auto source = video::open_frame_source(o);
    EXPECT_EQ(source->expected_frames(), 4);
    video::Frame f;
    ASSERT_TRUE(source->next(f));
    EXPECT_EQ(f.index, 0);
    std::this_thread::sleep_for(std::chrono::seconds(1));  // time to read the other three
    for (int i = 1; i < 4; ++i) std::filesystem::remove(fmt::format("{}/{:06d}.png", dir, i));
    for (int i = 1; i < 4; ++i) {
      ASSERT_TRUE(source->next(f)) << i;
      EXPECT_EQ(f.index, i);
      EXPECT_NE(f.name.find(fmt::format("{:06d}.png", i)), std::string::npos) << f.name;
      EXPECT_EQ(f.image.shape()[2], 56);
    }
    EXPECT_FALSE(source->next(f));
  }
  // Frames 0 and 1 whole, frame 2 damaged, frame 3 whole.
  for (int i = 1; i < 4; ++i)
    std::filesystem::copy_file(fixture_path(fmt::format("courthouse/{:06d}.png", i)),
                               fmt::format("{}/{:06d}.png", dir, i));
  std::filesystem::resize_file(fmt::format("{}/000002.png", dir), 100);
  auto source = video::open_frame_source(o);
  video::Frame f;
  ASSERT_TRUE(source->next(f));
  ASSERT_TRUE(source->next(f));
  EXPECT_EQ(f.index, 1);
  try {
    source->next(f);
    ADD_FAILURE() << "a damaged file gave no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("000002.png"), std::string::npos) << e.what();
  }
}

TEST(FrameSource, DroppingAVideoSourceMidwayStopsItsThread) {
  SKIP_WITHOUT_FFMPEG();
  video::SourceOptions o = video_options(make_pattern_video("long.avi", 10, 60));
  o.queue_frames = 2;
  for (int taken : {0, 1, 5}) {
    auto source = video::open_frame_source(o);
    video::Frame f;
    for (int i = 0; i < taken; ++i) ASSERT_TRUE(source->next(f));
    source.reset();  // joins the decoder, blocked on a full queue
  }
}

TEST(FrameSource, OptionErrorsNameTheFlag) {
  video::SourceOptions o;
  EXPECT_THROW(video::open_frame_source(o), Error);  // neither --images nor --video
  o.video = "-";
  try {
    video::open_frame_source(o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--input-format rgb24"), std::string::npos) << e.what();
  }
  o.input_format = "rgb24";
  EXPECT_THROW(video::open_frame_source(o), Error);  // no --input-size
  video::SourceOptions images;
  images.images = test::fixture_path("courthouse");
  images.rotate_cw90 = true;
  EXPECT_THROW(video::open_frame_source(images), Error);
}
