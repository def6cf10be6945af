// examples/reconstruct_folder, run as a user would: on the small fixture
// model and the courthouse frames, its printed camera centres against
// upstream's for the same frames (tests/fixtures/model_small/default.safetensors,
// made by tools/reference/make_model_fixtures.py from upstream's PIL
// preprocessing and PyTorch model), at the CLI test's tolerance.
#include "checkpoint/checkpoint.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <sstream>

using namespace lingbot;

namespace {

using Result = test::CommandResult;

Result run_example(const std::string& args) {
  return test::run_shell(std::string(LINGBOT_RECONSTRUCT_FOLDER_PATH) + " " + args);
}

std::string small(const std::string& name) { return test::fixture_path("model_small/" + name); }

}  // namespace

TEST(ReconstructFolder, PrintsUpstreamsCameraCentres) {
  // The fixture's config has upstream's settings for these frames (3 scale
  // frames, window 4); the frames are 126 wide after preprocessing.
  const Result r = run_example(small("weights.pt") + " " + test::fixture_path("courthouse") + " config=" +
                               small("config.json") + " image_size=126 device=cpu threads=2");
  ASSERT_EQ(r.status, 0) << r.output;

  const Tensor extrinsic = io::load_state_dict(small("default.safetensors")).at("extrinsic").to_dtype(DType::F32);
  const int64_t frames = extrinsic.dim(0);  // [S, 3, 4] camera-to-world
  Tensor expected = Tensor::empty({frames, 3});
  for (int64_t i = 0; i < frames; ++i)
    for (int a = 0; a < 3; ++a) expected.f32()[i * 3 + a] = extrinsic.f32()[i * 12 + a * 4 + 3];

  Tensor printed = Tensor::zeros({frames, 3});
  std::istringstream lines(r.output);
  std::string line;
  int64_t next = 0;
  while (std::getline(lines, line)) {
    long long index = -1;
    float x = 0, y = 0, z = 0;
    if (std::sscanf(line.c_str(), "frame %lld camera centre %f %f %f", &index, &x, &y, &z) != 4) continue;
    ASSERT_EQ(index, next) << "frames in order, each once:\n" << r.output;
    ASSERT_LT(index, frames) << r.output;
    printed.f32()[index * 3 + 0] = x;
    printed.f32()[index * 3 + 1] = y;
    printed.f32()[index * 3 + 2] = z;
    ++next;
  }
  EXPECT_EQ(next, frames) << r.output;
  EXPECT_LT(test::relative_error(printed, expected), 1e-4) << r.output;
}

TEST(ReconstructFolder, ErrorsAreOneLine) {
  for (const std::string& args :
       {small("weights.pt") + " /nonexistent/folder config=" + small("config.json"),
        "/nonexistent/model.pt " + test::fixture_path("courthouse"),
        small("weights.pt") + " " + test::fixture_path("courthouse") + " kv_windw=3"}) {
    const Result r = run_example(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
}
