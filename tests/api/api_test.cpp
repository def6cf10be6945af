// The public API (include/lingbot/lingbot.h): what it returns is what the
// engine's StreamingModel returns for the same frames, frames in any of its
// forms are preprocessed like the CLI's, and every bad input is a one-line
// lingbot::Error naming the problem.
#include <lingbot/lingbot.h>

#include "api/option_table.h"
#include "backend/backend.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "small_model_fixture.h"

#include <gtest/gtest.h>

#include <regex>

namespace {

using lingbot::FrameOutput;
using lingbot::Options;

std::string small(const std::string& name) { return lingbot::test::small_fixture(name); }

Options cpu_options() {
  Options o;
  o.device = "cpu";
  o.threads = 1;
  return o;
}

// Every output of `stream` for `push` over the frames, then finish().
template <typename Push>
std::vector<FrameOutput> stream_all(lingbot::Stream& stream, int frames, Push push) {
  std::vector<FrameOutput> out;
  for (int i = 0; i < frames; ++i)
    for (FrameOutput& r : push(i)) out.push_back(std::move(r));
  for (FrameOutput& r : stream.finish()) out.push_back(std::move(r));
  return out;
}

void expect_same(const std::vector<FrameOutput>& a, const std::vector<FrameOutput>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].keyframe, b[i].keyframe);
    EXPECT_EQ(a[i].pose_enc, b[i].pose_enc) << "frame " << i;
    EXPECT_EQ(a[i].camera_to_world, b[i].camera_to_world) << "frame " << i;
    EXPECT_EQ(a[i].depth, b[i].depth) << "frame " << i;
    EXPECT_EQ(a[i].world_points, b[i].world_points) << "frame " << i;
  }
}

std::vector<float> values(const lingbot::Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

// The message of the lingbot::Error that f throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const lingbot::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Api, OutputsAreStreamingModelsOnTheSameFrames) {
  const std::vector<lingbot::Tensor> frames = lingbot::test::small_model_frames();
  const lingbot::Model model(small("weights.pt"), small("config.json"), cpu_options());
  lingbot::Stream stream = model.open_stream();
  const std::vector<FrameOutput> got = stream_all(stream, static_cast<int>(frames.size()), [&](int i) {
    const lingbot::Tensor& f = frames[static_cast<size_t>(i)];
    return stream.push_preprocessed(std::span<const float>(f.f32(), static_cast<size_t>(f.numel())),
                                    static_cast<int>(f.dim(2)), static_cast<int>(f.dim(1)));
  });

  // The engine itself, with the library's default stream options.
  const lingbot::ModelConfig config = lingbot::ModelConfig::from_file(small("config.json"));
  const lingbot::io::StateDict weights = lingbot::io::load_state_dict(small("weights.pt"));
  auto backend = lingbot::make_cpu_backend(1);
  lingbot::StreamingModel engine(*backend, weights, config, lingbot::StreamOptions::from_config(config));
  const std::vector<lingbot::FrameResult> expected = lingbot::test::stream_all(engine, frames);

  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const lingbot::FrameResult& e = expected[i];
    EXPECT_EQ(got[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(got[i].index, e.index);
    EXPECT_EQ(got[i].keyframe, e.keyframe);
    EXPECT_EQ(got[i].pose_enc, e.pose_enc) << "frame " << i;
    EXPECT_EQ(got[i].camera_to_world, e.camera.camera_to_world) << "frame " << i;
    EXPECT_EQ(got[i].intrinsic, e.camera.intrinsic) << "frame " << i;
    EXPECT_EQ(got[i].height, e.height);
    EXPECT_EQ(got[i].width, e.width);
    EXPECT_EQ(got[i].depth, values(e.depth)) << "frame " << i;
    EXPECT_EQ(got[i].confidence, values(e.depth_conf)) << "frame " << i;
    EXPECT_EQ(got[i].world_points, values(e.world_points)) << "frame " << i;
    const std::array<double, 3> centre = got[i].camera_centre();
    for (int a = 0; a < 3; ++a) EXPECT_EQ(centre[a], e.camera.camera_to_world[a][3]);
  }
  EXPECT_EQ(got[0].depth.size(), static_cast<size_t>(got[0].height * got[0].width));
  EXPECT_EQ(got[0].world_points.size(), 3 * got[0].depth.size());
}

TEST(Api, FilesAndRgbBuffersArePreprocessedLikeTheCli) {
  Options options = cpu_options();
  options.image_size = 126;
  const lingbot::Model model(small("weights.pt"), small("config.json"), options);
  std::vector<std::string> paths = lingbot::list_images(lingbot::test::fixture_path("courthouse"));
  paths.resize(5);
  const int n = static_cast<int>(paths.size());

  lingbot::Stream from_files = model.open_stream();
  const auto files = stream_all(from_files, n, [&](int i) { return from_files.push_file(paths[i]); });
  lingbot::Stream from_rgb = model.open_stream();
  const auto rgb = stream_all(from_rgb, n, [&](int i) {
    const lingbot::io::RgbImage image = lingbot::io::load_image(paths[i]);
    return from_rgb.push_rgb(image.rgb, image.width, image.height);
  });
  expect_same(files, rgb);

  // What `lingbot-map run` streams: the frames of a FrameSource.
  lingbot::io::PreprocessOptions prep;
  prep.image_size = 126;
  const lingbot::io::FrameSource source(paths, prep);
  lingbot::Stream from_source = model.open_stream();
  const auto cli_frames = stream_all(from_source, n, [&](int i) {
    const lingbot::Tensor f = source.frame(i);
    return from_source.push_preprocessed(std::span<const float>(f.f32(), static_cast<size_t>(f.numel())),
                                         source.output_width(), source.output_height());
  });
  expect_same(files, cli_frames);
  EXPECT_EQ(files[0].width, 126);
  EXPECT_EQ(files[0].height, 70);
}

TEST(Api, FinishAndResetStartNewVideos) {
  const std::vector<lingbot::Tensor> frames = lingbot::test::small_model_frames();
  const lingbot::Model model(small("weights.pt"), small("config.json"), cpu_options());
  lingbot::Stream stream = model.open_stream();
  auto push = [&](int i) {
    const lingbot::Tensor& f = frames[static_cast<size_t>(i)];
    return stream.push_preprocessed(std::span<const float>(f.f32(), static_cast<size_t>(f.numel())),
                                    static_cast<int>(f.dim(2)), static_cast<int>(f.dim(1)));
  };
  // Shorter than the scale phase (3 frames): all comes from finish().
  EXPECT_TRUE(push(0).empty());
  EXPECT_TRUE(push(1).empty());
  EXPECT_EQ(stream.frames_pushed(), 2);
  const std::vector<FrameOutput> short_video = stream.finish();
  ASSERT_EQ(short_video.size(), 2u);
  EXPECT_EQ(short_video[1].index, 1);
  EXPECT_TRUE(stream.finish().empty());

  stream.reset();
  EXPECT_EQ(stream.frames_pushed(), 0);
  const auto first = stream_all(stream, 6, push);
  stream.reset();
  push(3);  // a video cut short: its results are dropped by the reset
  stream.reset();
  const auto again = stream_all(stream, 6, push);
  ASSERT_EQ(first.size(), 6u);
  expect_same(first, again);
}

TEST(Api, StreamsOutliveTheirModelAndDenseOffKeepsOnlyCameras) {
  const std::vector<lingbot::Tensor> frames = lingbot::test::small_model_frames();
  Options options = cpu_options();
  options.dense = false;
  std::optional<lingbot::Model> model(std::in_place, small("weights.pt"), small("config.json"), options);
  lingbot::Stream stream = model->open_stream();
  model.reset();
  const auto out = stream_all(stream, 4, [&](int i) {
    const lingbot::Tensor& f = frames[static_cast<size_t>(i)];
    return stream.push_preprocessed(std::span<const float>(f.f32(), static_cast<size_t>(f.numel())),
                                    static_cast<int>(f.dim(2)), static_cast<int>(f.dim(1)));
  });
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(out[3].depth.empty());
  EXPECT_TRUE(out[3].world_points.empty());
  EXPECT_NE(out[3].camera_to_world[2][2], 0.0);
}

TEST(Api, BadInputsAreOneLineErrorsNamingTheProblem) {
  const lingbot::Model model(small("weights.pt"), small("config.json"), cpu_options());
  lingbot::Stream stream = model.open_stream();
  const std::vector<uint8_t> rgb(10 * 14 * 3);
  const std::vector<float> chw(3 * 28 * 42);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {error_of([&] { stream.push_rgb(rgb, 10, 15); }), "needs 450 bytes, the buffer holds 420"},
      {error_of([&] { stream.push_rgb(rgb, 0, 14); }), "width and height must be positive, got 0x14"},
      {error_of([&] { stream.push_preprocessed(chw, 42, 27); }), "needs 3402 floats"},
      {error_of([&] { stream.push_preprocessed(chw, 41, 28); }), "needs 3444 floats"},
      {error_of([&] { stream.push_preprocessed(std::vector<float>(3 * 28 * 40), 40, 28); }),
       "40x28 is not a multiple of the patch size 14"},
      {error_of([&] { stream.push_file("/nonexistent/frame.png"); }), "/nonexistent/frame.png"},
      {error_of([] { lingbot::Model("/nonexistent/model.pt", small("config.json"), cpu_options()); }),
       "/nonexistent/model.pt"},
      {error_of([] { lingbot::Model(small("weights.pt"), "/nonexistent/config.json", cpu_options()); }),
       "/nonexistent/config.json"},
      {error_of([] { lingbot::Model(small("weights.pt"), "", cpu_options()); }), "does not fit the config"},
      {error_of([] {
         Options o = cpu_options();
         o.kv_window = 0;
         lingbot::Model(small("weights.pt"), small("config.json"), o);
       }),
       "option kv_window must be >= 1, got 0"},
      {error_of([] {
         Options o = cpu_options();
         o.pipeline_depth = 3;
         lingbot::Model(small("weights.pt"), small("config.json"), o);
       }),
       "option pipeline_depth must be in [0, 2], got 3"},
      {error_of([] {
         Options o;
         o.kv_cache = "flat";
         lingbot::Model(small("weights.pt"), small("config.json"), o);
       }),
       "option kv_cache must be one of paged, dense, got 'flat'"},
      {error_of([] { lingbot::list_images("/nonexistent/folder"); }), "/nonexistent/folder"},
  };
  for (const auto& [message, expected] : cases) {
    EXPECT_NE(message.find(expected), std::string::npos) << "'" << message << "' lacks '" << expected << "'";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // The stream is still usable after refused pushes.
  EXPECT_TRUE(stream.push_preprocessed(chw, 42, 28).empty());
}

TEST(Api, SetOptionParsesByName) {
  Options o;
  lingbot::set_option(o, "kv_window", "32");
  lingbot::set_option(o, "dense", "false");
  lingbot::set_option(o, "device", "cpu");
  lingbot::set_option(o, "pipeline_depth", "0");
  EXPECT_EQ(o.kv_window, 32);
  EXPECT_FALSE(o.dense);
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.pipeline_depth, 0);
  EXPECT_NE(error_of([&] { lingbot::set_option(o, "kv_windw", "3"); }).find("unknown option 'kv_windw'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lingbot::set_option(o, "threads", "4x"); }).find("option threads: '4x' is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lingbot::set_option(o, "dense", "maybe"); }).find("option dense"), std::string::npos);
  EXPECT_NE(error_of([&] { lingbot::set_option(o, "device", "gpu"); }).find("one of cpu, cuda, auto"),
            std::string::npos);
}

TEST(Api, VersionIsMajorMinorPatch) {
  EXPECT_TRUE(std::regex_match(lingbot::version(), std::regex(R"(\d+\.\d+\.\d+)"))) << lingbot::version();
}
