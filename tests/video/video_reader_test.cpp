// VideoReader: stream facts, pixels as FFmpeg's own program decodes them,
// the display-matrix rotation, damage and the one-line errors.
#include "core/error.h"
#include "video/video_reader.h"
#include "fuzz_regressions.h"
#include "video_test_support.h"

#include <gtest/gtest.h>

#include <vector>

using namespace lingbot;
using namespace lingbot::test;

namespace {

std::vector<video::DecodedFrame> decode_all(const std::string& path) {
  video::VideoReader reader(path);
  std::vector<video::DecodedFrame> frames;
  video::DecodedFrame f;
  while (reader.next(f)) frames.push_back(f);
  return frames;
}

// What `ffmpeg -i path -f rawvideo -pix_fmt rgb24` gives (the program
// applies the display matrix itself, as we do).
std::string ffmpeg_rgb24(const std::string& path) {
  const std::string raw = path + ".rgb";
  EXPECT_TRUE(ffmpeg("-i " + path + " -f rawvideo -pix_fmt rgb24 " + raw));
  return read_bytes(raw);
}

// The error `open` throws: one line starting with the file's name.
template <typename Open>
std::string one_line_error(const std::string& path, Open&& open) {
  try {
    open();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path, 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return what;
  }
  ADD_FAILURE() << path << ": no error";
  return "";
}

}  // namespace

TEST(VideoReader, ReportsTheStreamAndDecodesEveryFrame) {
  SKIP_WITHOUT_FFMPEG();
  const std::string path = make_pattern_video("facts.avi", 25, 12);
  video::VideoReader reader(path);
  EXPECT_EQ(reader.info().codec, "ffv1");
  EXPECT_EQ(reader.info().width, 64);
  EXPECT_EQ(reader.info().height, 48);
  EXPECT_EQ(reader.info().rotation_cw, 0);
  EXPECT_DOUBLE_EQ(reader.info().fps, 25.0);
  EXPECT_EQ(reader.info().frame_count, 12);
  const auto frames = decode_all(path);
  ASSERT_EQ(frames.size(), 12u);
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i].index, static_cast<int64_t>(i));
    EXPECT_NEAR(frames[i].timestamp, i / 25.0, 1e-9);
  }
}

TEST(VideoReader, PixelsMatchFfmpegsOwnDecoding) {
  SKIP_WITHOUT_FFMPEG();
  for (const std::string& codec : {std::string("ffv1"), std::string("libx264 -pix_fmt yuv420p")}) {
    const std::string path = make_pattern_video("pixels_" + codec.substr(0, 4) + ".mkv", 10, 4, codec);
    const std::string expected = ffmpeg_rgb24(path);
    std::string ours;
    for (const auto& f : decode_all(path)) ours.append(f.rgb.rgb.begin(), f.rgb.rgb.end());
    ASSERT_EQ(ours.size(), expected.size()) << codec;
    // Lossless RGB decodes to exactly its pixels; YUV 4:2:0 goes through
    // swscale with the program's own default (bicubic), so the same bytes too.
    EXPECT_TRUE(ours == expected) << codec;
  }
}

TEST(VideoReader, HonoursTheDisplayMatrixRotation) {
  SKIP_WITHOUT_FFMPEG();
  // Debian 12's ffmpeg 5.1 has no -display_rotation; the stream tag
  // "rotate" becomes an MP4 display matrix when the stream is copied.
  const std::string plain = make_pattern_video("upright.mp4", 10, 3, "libx264rgb -qp 0");
  const std::string upright = ffmpeg_rgb24(plain);
  for (int rotate : {90, 180, 270}) {
    const std::string path = temp_path("rotated" + std::to_string(rotate) + ".mp4");
    ASSERT_TRUE(ffmpeg("-i " + plain + " -c copy -metadata:s:v:0 rotate=" + std::to_string(rotate) + " " + path));
    video::VideoReader reader(path);
    const bool quarter = rotate != 180;
    EXPECT_EQ(reader.info().width, quarter ? 48 : 64) << rotate;
    EXPECT_EQ(reader.info().height, quarter ? 64 : 48) << rotate;
    const auto frames = decode_all(path);
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].rgb.width, reader.info().width);
    EXPECT_EQ(frames[0].rgb.height, reader.info().height);
    // The same upright pixels as the ffmpeg program shows...
    const std::string expected = ffmpeg_rgb24(path);
    std::string ours;
    for (const auto& f : frames) ours.append(f.rgb.rgb.begin(), f.rgb.rgb.end());
    EXPECT_TRUE(ours == expected) << "rotate=" << rotate << " degrees (ours turned " << reader.info().rotation_cw
                                  << " clockwise)";
    // ...which are the stored pixels turned against the display matrix's
    // angle (counter-clockwise, as ffprobe prints it). How ffmpeg turns the
    // tag into a matrix has changed between versions, so ask ffprobe.
    const std::string probe = temp_path("rotation.txt");
    ASSERT_EQ(std::system(("ffprobe -v error -select_streams v:0 -show_entries stream_side_data=rotation -of "
                           "default=nw=1:nk=1 " + path + " > " + probe).c_str()),
              0);
    const int ccw = std::stoi(read_bytes(probe));
    EXPECT_EQ(reader.info().rotation_cw, ((-ccw) % 360 + 360) % 360) << "rotate=" << rotate;
    EXPECT_NE(reader.info().rotation_cw, 0);
    io::RgbImage stored{64, 48, std::vector<uint8_t>(upright.begin(), upright.begin() + 64 * 48 * 3)};
    EXPECT_TRUE(video::rotate_clockwise(stored, reader.info().rotation_cw).rgb == frames[0].rgb.rgb) << rotate;
  }
}

TEST(VideoReader, TruncatedFileEndsAfterTheLastWholeFrame) {
  SKIP_WITHOUT_FFMPEG();
  const std::string path = make_pattern_video("whole.mkv", 10, 10);
  const std::string bytes = read_bytes(path);
  const std::string cut = temp_path("truncated.mkv");
  write_bytes(cut, bytes.substr(0, bytes.size() * 6 / 10));
  const auto frames = decode_all(cut);  // a warning, no error
  EXPECT_GT(frames.size(), 2u);
  EXPECT_LT(frames.size(), 10u);
  // The frames kept are intact.
  const auto all = decode_all(path);
  for (size_t i = 0; i < frames.size(); ++i) EXPECT_TRUE(frames[i].rgb.rgb == all[i].rgb.rgb) << i;
}

TEST(VideoReader, UserErrorsAreOneLineNamingTheFile) {
  SKIP_WITHOUT_FFMPEG();
  const std::string missing = temp_path("missing.mp4");
  std::remove(missing.c_str());
  EXPECT_NE(one_line_error(missing, [&] { video::VideoReader r(missing); }).find("no such file"), std::string::npos);

  const std::string empty = temp_path("empty.mp4");
  write_bytes(empty, "");
  EXPECT_NE(one_line_error(empty, [&] { video::VideoReader r(empty); }).find("empty"), std::string::npos);

  const std::string garbage = temp_path("garbage.mp4");
  std::string noise(4000, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
  write_bytes(garbage, noise);
  one_line_error(garbage, [&] { decode_all(garbage); });

  const std::string audio = temp_path("audio.wav");
  ASSERT_TRUE(ffmpeg("-f lavfi -i sine=duration=0.5 -c:a pcm_s16le " + audio));
  EXPECT_NE(one_line_error(audio, [&] { video::VideoReader r(audio); }).find("no video stream"), std::string::npos);

  // A codec FFmpeg does not know: FFV1's FourCC in the Matroska header changed.
  std::string mkv = read_bytes(make_pattern_video("known.mkv", 10, 2));
  const size_t fourcc = mkv.find("FFV1");
  ASSERT_NE(fourcc, std::string::npos);
  mkv.replace(fourcc, 4, "QQQ9");
  const std::string unknown = temp_path("unknown_codec.mkv");
  write_bytes(unknown, mkv);
  EXPECT_NE(one_line_error(unknown, [&] { video::VideoReader r(unknown); }).find("no decoder"), std::string::npos);

  const std::string folder = ::testing::TempDir();
  one_line_error(folder, [&] { video::VideoReader r(folder); });
}

TEST(VideoReader, RotateClockwiseTurnsPixels) {
  // 3x2:  a b c        90 cw:  d a      180:  f e d
  //       d e f                e b            c b a
  //                            f c
  io::RgbImage img{3, 2, {}};
  for (uint8_t v = 'a'; v <= 'f'; ++v) img.rgb.insert(img.rgb.end(), {v, v, v});
  auto letters = [](const io::RgbImage& i) {
    std::string s;
    for (size_t p = 0; p < i.rgb.size(); p += 3) s += static_cast<char>(i.rgb[p]);
    return std::to_string(i.width) + "x" + std::to_string(i.height) + ":" + s;
  };
  EXPECT_EQ(letters(video::rotate_clockwise(img, 0)), "3x2:abcdef");
  EXPECT_EQ(letters(video::rotate_clockwise(img, 90)), "2x3:daebfc");
  EXPECT_EQ(letters(video::rotate_clockwise(img, 180)), "3x2:fedcba");
  EXPECT_EQ(letters(video::rotate_clockwise(img, 270)), "2x3:cfbead");
}

// Inputs fuzz/fuzz_video.cpp once failed on (fuzz/regressions/fuzz_video/):
// each gives frames of the size the reader reports, or a one-line error
// naming the file. The y4m there made swscale write past the end of a
// tight RGB buffer (heap corruption); the reader now gives swscale padded
// rows.
TEST(VideoReader, FuzzRegressionsDecodeOrFailInOneLine) {
  if (!video::ffmpeg_available()) GTEST_SKIP() << "built without FFmpeg";
  const auto files = fuzz_regressions("fuzz_video");
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) {
    try {
      video::VideoReader reader(path.string());
      video::DecodedFrame frame;
      while (reader.next(frame)) {
        EXPECT_EQ(frame.rgb.width, reader.info().width) << path;
        EXPECT_EQ(frame.rgb.height, reader.info().height) << path;
        EXPECT_EQ(frame.rgb.rgb.size(), static_cast<size_t>(frame.rgb.width) * frame.rgb.height * 3) << path;
      }
    } catch (const Error& e) {
      EXPECT_TRUE(one_line_naming(e.what(), path.string())) << path << ": " << e.what();
    }
  }
}
