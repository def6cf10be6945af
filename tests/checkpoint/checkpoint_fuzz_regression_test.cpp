// Replays every input kept under fuzz/regressions/ (inputs that once crashed
// or hung a fuzz target) through all the entry points the fuzz targets use.
// Each must end in success or a one-line lingbot::Error. Also checks the
// torch pickle seeds through the fuzz_torch_pickle harness.
#include "checkpoint/checkpoint.h"
#include "checkpoint/pickle.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/torch_checkpoint.h"
#include "checkpoint/zip_archive.h"

#include "checkpoint_fixtures.h"
#include "zip_builder.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace lingbot;
using namespace lingbot::io;

namespace {

std::filesystem::path regressions_dir() {
  return std::filesystem::path(LINGBOT_FIXTURES_DIR) / ".." / ".." / "fuzz" / "regressions";
}

// Runs `f`; an Error is fine, as long as it is one line naming `name`.
template <typename F>
void expect_clean(const std::string& name, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.starts_with(name + ": ")) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

void replay(const std::vector<uint8_t>& data) {
  expect_clean("r.zip", [&] {
    const ZipArchive zip(data, "r.zip");
    for (const ZipEntry& e : zip.entries()) {
      try {
        zip.read(e, 1 << 20);
      } catch (const Error&) {
      }
    }
  });
  expect_clean("r.pkl", [&] { unpickle(data, "r.pkl").root().repr(300); });
  expect_clean("r.safetensors", [&] { read_safetensors(data, "r.safetensors", nullptr); });
  expect_clean("r.pt", [&] { load_state_dict(data, "r.pt", nullptr); });
  const std::vector<uint8_t> archive = test::torch_archive_around(data.data(), data.size());
  expect_clean("r.pt", [&] { read_torch_checkpoint(archive, "r.pt", nullptr); });
}

}  // namespace

TEST(CheckpointFuzzRegressions, KeptInputsFailCleanly) {
  const auto dir = regressions_dir();
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  size_t count = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
    SCOPED_TRACE(entry.path().string());
    replay(test::read_bytes(entry.path().string()));
    ++count;
  }
  RecordProperty("inputs", static_cast<int>(count));
}

TEST(CheckpointFuzzRegressions, TorchPickleSeedsLoadThroughTheHarness) {
  // The harness's storages are 1 KiB each: enough for every tensor of the seeds.
  const std::pair<const char*, size_t> seeds[] = {
      {"pickles/torch_basic_p2.pkl", 19}, {"pickles/torch_basic_p4.pkl", 19}, {"pickles/torch_v3.pkl", 1}};
  for (const auto& [file, tensors] : seeds) {
    SCOPED_TRACE(file);
    const auto pkl = test::read_bytes(test::checkpoint_fixture(file));
    const auto archive = test::torch_archive_around(pkl.data(), pkl.size());
    const StateDict sd = read_torch_checkpoint(archive, "seed.pt", nullptr);
    EXPECT_EQ(sd.size(), tensors);
  }
}
