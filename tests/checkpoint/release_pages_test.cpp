// StateDict::release_pages on a checkpoint mapped from a real file: the
// tensor's resident pages go (the process's file-backed RSS falls by about
// its size), its values read back unchanged from the file, and a dict that
// is not a file mapping (a buffer in memory) is left alone.
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace lingbot;
using namespace lingbot::io;

namespace {

constexpr int64_t kBig = int64_t{1} << 20;  // float32 elements of "big": 4 MiB
constexpr int64_t kSmall = 3;

float big_value(int64_t i) { return static_cast<float>(i % 1000) - 500.0f; }

// A safetensors file: "big" [kBig] then "small" [kSmall], float32.
std::vector<uint8_t> safetensors_bytes() {
  const int64_t big_bytes = kBig * 4, small_bytes = kSmall * 4;
  std::string header = "{\"big\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(kBig) +
                       "],\"data_offsets\":[0," + std::to_string(big_bytes) +
                       "]},\"small\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(kSmall) +
                       "],\"data_offsets\":[" + std::to_string(big_bytes) + "," +
                       std::to_string(big_bytes + small_bytes) + "]}}";
  while (header.size() % 8 != 0) header += ' ';
  std::vector<uint8_t> out(8 + header.size() + static_cast<size_t>(big_bytes + small_bytes));
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  float* values = reinterpret_cast<float*>(out.data() + 8 + header.size());
  for (int64_t i = 0; i < kBig; ++i) values[i] = big_value(i);
  for (int64_t i = 0; i < kSmall; ++i) values[kBig + i] = 0.25f * static_cast<float>(i + 1);
  return out;
}

// RssFile from /proc/self/status: resident pages of file mappings.
size_t rss_file_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("RssFile:", 0) == 0) return std::stoull(line.substr(8)) * 1024;
  return 0;
}

// Sums every value (touching every page) and checks them.
void expect_values(const StateDict& sd) {
  const float* big = sd.at("big").f32();
  int64_t wrong = 0;
  for (int64_t i = 0; i < kBig; ++i) wrong += big[i] == big_value(i) ? 0 : 1;
  EXPECT_EQ(wrong, 0);
  const float* small = sd.at("small").f32();
  for (int64_t i = 0; i < kSmall; ++i) EXPECT_EQ(small[i], 0.25f * static_cast<float>(i + 1));
}

class ReleasePages : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("release_pages_" + std::to_string(::getpid()) + ".safetensors");
    const std::vector<uint8_t> bytes = safetensors_bytes();
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

}  // namespace

TEST_F(ReleasePages, GivesBackAMappedTensorsPagesAndItReadsBackUnchanged) {
  const StateDict sd = load_state_dict(path_.string());
  expect_values(sd);  // every page of "big" resident
  const size_t resident = rss_file_bytes();
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

  const size_t released = sd.release_pages("big");
  // Whole pages inside the tensor: all but the partial ones at its ends.
  EXPECT_GE(released, static_cast<size_t>(kBig * 4) - 2 * page);
  EXPECT_LE(released, static_cast<size_t>(kBig * 4));
  EXPECT_EQ(released % page, 0u);
  const size_t after = rss_file_bytes();
  EXPECT_LE(after + released / 2, resident) << "RssFile " << resident << " -> " << after;

  expect_values(sd);  // faulted back in from the file
  // "small" shares its page with the end of "big" only: it has no whole page.
  EXPECT_EQ(sd.release_pages("small"), 0u);
  expect_values(sd);
}

TEST_F(ReleasePages, LeavesADictReadFromMemoryAlone) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(safetensors_bytes());
  const StateDict sd = read_safetensors(*bytes, "in memory", bytes);
  // MADV_DONTNEED on heap memory would zero it; a dict that is no file
  // mapping must not be touched.
  EXPECT_EQ(sd.release_pages("big"), 0u);
  expect_values(sd);
}

TEST_F(ReleasePages, NamesAMissingTensor) {
  const StateDict sd = load_state_dict(path_.string());
  EXPECT_THROW(sd.release_pages("nope"), Error);
}
