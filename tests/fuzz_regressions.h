// The inputs a fuzz target once failed on (fuzz/regressions/<target>/), for
// the tests that replay them through the reader the target drives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace lingbot::test {

inline std::vector<std::filesystem::path> fuzz_regressions(const std::string& target) {
  const std::filesystem::path dir =
      std::filesystem::path(LINGBOT_FIXTURES_DIR) / ".." / ".." / "fuzz" / "regressions" / target;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
  return files;
}

inline std::vector<uint8_t> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A message fit for a user: one line, starting with the name of the input.
inline bool one_line_naming(const std::string& message, const std::string& name) {
  return message.starts_with(name + ": ") && message.find('\n') == std::string::npos;
}

}  // namespace lingbot::test
