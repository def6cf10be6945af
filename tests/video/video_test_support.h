// Small videos made during the test by the ffmpeg program (scripts/setup.sh
// installs it; tests skip without it), in the test's temporary folder.
#pragma once

#include "image/image.h"
#include "video/video_reader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace lingbot::test {

inline bool have_ffmpeg_program() {
  static const bool found = std::system("ffmpeg -version > /dev/null 2>&1") == 0;
  return found;
}

#define SKIP_WITHOUT_FFMPEG()                                                                  \
  do {                                                                                         \
    if (!::lingbot::video::ffmpeg_available()) GTEST_SKIP() << "built without FFmpeg";         \
    if (!::lingbot::test::have_ffmpeg_program()) GTEST_SKIP() << "no ffmpeg program to make test videos"; \
  } while (0)

inline std::string temp_path(const std::string& name) { return std::string(::testing::TempDir()) + "/lbv_" + name; }

// Runs `ffmpeg -y <args>` quietly; true on success.
inline bool ffmpeg(const std::string& args) {
  return std::system(("ffmpeg -nostdin -loglevel error -y " + args).c_str()) == 0;
}

// A test pattern of `frames` frames at `fps`, 64x48, stored losslessly
// (FFV1 keeps the RGB pixels exactly), in `path` (the extension picks the container).
inline std::string make_pattern_video(const std::string& name, int fps, int frames, const std::string& codec = "ffv1") {
  const std::string path = temp_path(name);
  const bool ok = ffmpeg("-f lavfi -i testsrc=size=64x48:rate=" + std::to_string(fps) + " -frames:v " +
                         std::to_string(frames) + " -c:v " + codec + " " + path);
  EXPECT_TRUE(ok) << "ffmpeg could not make " << path;
  return path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace lingbot::test
