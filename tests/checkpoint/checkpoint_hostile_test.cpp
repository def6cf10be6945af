// Hostile and broken checkpoints: each must give one lingbot::Error whose
// single line names the file and the problem; never a crash, a hang, a huge
// allocation or code execution. Files and expected messages come from
// tools/reference/make_hostile_checkpoints.py (hostile/expected.json).
#include "checkpoint/checkpoint.h"

#include "checkpoint_fixtures.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

using namespace lingbot;
using namespace lingbot::io;
using lingbot::test::checkpoint_fixture;

namespace {

const nlohmann::json& expected() {
  static const nlohmann::json e = test::read_json(checkpoint_fixture("hostile/expected.json"));
  return e;
}

// Loads `bytes` from an exact-size heap buffer (so ASan sees any overread)
// and returns the error message, or "" if it loaded.
std::string load_error(const std::vector<uint8_t>& data, const std::string& name) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(data);
  try {
    const StateDict sd = load_state_dict(*bytes, name, bytes);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

TEST(CheckpointHostile, EachFileGivesItsOneLineError) {
  // Nothing in these files may run: this marker would appear if os.system did.
  const char* marker = "/tmp/lingbot_pwned_by_checkpoint";
  std::remove(marker);
  size_t errors = 0;
  for (const auto& entry : expected()["files"]) {
    if (!entry.contains("error")) continue;
    const std::string path = checkpoint_fixture("hostile/" + entry["file"].get<std::string>());
    const std::string want = entry["error"];
    SCOPED_TRACE(path);
    const auto start = std::chrono::steady_clock::now();
    try {
      load_state_dict(path);
      ADD_FAILURE() << "loaded without error, expected: " << want;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(msg.starts_with(path + ": ")) << msg;
      EXPECT_NE(msg.find(want), std::string::npos) << "message: " << msg << "\nexpected: " << want;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_LT(msg.size(), 600u) << msg;
      ++errors;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << "too slow: hostile input must not make the reader spin";
  }
  EXPECT_GE(errors, 60u);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(CheckpointHostile, SameErrorsFromExactSizeBuffers) {
  for (const auto& entry : expected()["files"]) {
    if (!entry.contains("error")) continue;
    const std::string file = entry["file"];
    SCOPED_TRACE(file);
    const std::string msg = load_error(test::read_bytes(checkpoint_fixture("hostile/" + file)), file);
    EXPECT_TRUE(msg.starts_with(file + ": ")) << msg;
    EXPECT_NE(msg.find(entry["error"].get<std::string>()), std::string::npos) << msg;
  }
}

TEST(CheckpointHostile, OddButValidFilesLoadWithNotes) {
  size_t checked = 0;
  for (const auto& entry : expected()["files"]) {
    if (!entry.contains("loads")) continue;
    const std::string path = checkpoint_fixture("hostile/" + entry["file"].get<std::string>());
    SCOPED_TRACE(path);
    const StateDict sd = load_state_dict(path);
    std::vector<std::string> names, skipped;
    for (const auto& [name, t] : sd) names.push_back(name);
    for (const auto& s : sd.skipped()) skipped.push_back(s.key);
    EXPECT_EQ(names, entry["loads"]["tensors"].get<std::vector<std::string>>());
    EXPECT_EQ(skipped, entry["loads"]["skipped"].get<std::vector<std::string>>());
    ++checked;
  }
  EXPECT_GE(checked, 1u);
}

TEST(CheckpointHostile, OsSystemInsideMetadataIsInertAndSkipped) {
  const char* marker = "/tmp/lingbot_pwned_by_checkpoint";
  std::remove(marker);
  const StateDict sd = load_state_dict(checkpoint_fixture("handmade/evil_metadata.pt"));
  ASSERT_EQ(sd.skipped().size(), 1u);
  EXPECT_EQ(sd.skipped()[0].key, "evil");
  EXPECT_NE(sd.skipped()[0].reason.find("system"), std::string::npos) << sd.skipped()[0].reason;
  EXPECT_TRUE(sd.contains("w_f32"));
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(CheckpointHostile, MissingFileAndDirectoryAreErrors) {
  EXPECT_THROW(load_state_dict("/nonexistent/model.pt"), Error);
  EXPECT_THROW(load_state_dict(checkpoint_fixture("hostile")), Error);
}

// Every prefix of a valid archive: an Error or (for the full file) success,
// never a crash or an overread.
TEST(CheckpointHostile, EveryTruncationOfAValidFileFailsCleanly) {
  for (const char* name : {"handmade/basic_v2.pt", "handmade/deflated.pt",
                           "handmade/basic.safetensors"}) {
    const std::vector<uint8_t> full = test::read_bytes(checkpoint_fixture(name));
    SCOPED_TRACE(name);
    for (size_t n = 0; n < full.size(); n += (n < 256 ? 1 : 7)) {
      const std::string msg =
          load_error(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(n)), "t");
      EXPECT_TRUE(msg.starts_with("t: ")) << "prefix " << n << ": '" << msg << "'";
    }
  }
}

// Single-byte corruption anywhere: success or an Error, never a crash.
TEST(CheckpointHostile, EveryCorruptedByteFailsCleanlyOrLoads) {
  for (const char* name : {"handmade/basic_v2.pt", "handmade/zip64_records.pt",
                           "handmade/basic.safetensors"}) {
    const std::vector<uint8_t> full = test::read_bytes(checkpoint_fixture(name));
    SCOPED_TRACE(name);
    for (size_t i = 0; i < full.size(); i += 3) {
      for (uint8_t flip : {uint8_t{0xff}, uint8_t{0x80}}) {
        std::vector<uint8_t> bad = full;
        bad[i] ^= flip;
        const std::string msg = load_error(bad, "c");
        EXPECT_TRUE(msg.empty() || msg.starts_with("c: ")) << "byte " << i << ": " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      }
    }
  }
}
