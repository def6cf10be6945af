// For readers that take a path (probe_image, read_npz, VideoReader): each
// input is written to one file per fuzzer process, named as the error
// messages must name it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lingbot::fuzz {

// Writes `data` to a file of its own under TMPDIR (or /tmp) and returns its
// path; the same path for every input of this process.
inline const std::string& write_temp_file(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [&] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/lingbot_fuzz_" + std::to_string(getpid()) + suffix;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace lingbot::fuzz
