// Video files (and capture devices) in, through FFmpeg's libraries.
//
// VideoReader opens anything libavformat can demux and libavcodec can decode,
// picks the best video stream and hands out its frames one at a time as 8-bit
// RGB, rotated upright as the stream's display matrix asks (the rotation a
// phone stores instead of turning the pixels). Nothing is buffered beyond
// the decoder's own few frames, so memory does not grow with video length.
//
// Failures a user can cause are one-line lingbot::Errors naming the file:
// a missing, empty or unreadable file, no video stream, a codec this FFmpeg
// cannot decode. Damage after the first frame is not an error: next() logs a
// warning naming the frame and reports the end of the video, so everything
// decoded before it is kept.
#pragma once

#include "image/image.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace lingbot::video {

struct VideoInfo {
  std::string codec;             // decoder name, e.g. "h264"
  int width = 0, height = 0;     // as displayed: after the display-matrix rotation
  int rotation_cw = 0;           // 0, 90, 180, 270: clockwise turn applied to the stored pixels
  double fps = 0;                // the stream's average frame rate; 0 when the container does not say
  int64_t frame_count = -1;      // from the container (or its duration x fps); -1 when unknown
  bool frame_count_exact = false;  // frame_count is the container's own count, not an estimate
};

struct DecodedFrame {
  int64_t index = 0;      // decode order, from 0
  double timestamp = 0;   // seconds from the stream's start (index / fps when the stream has no times)
  io::RgbImage rgb;
};

class VideoReader {
 public:
  // `input_format`: a libavformat / libavdevice input name ("v4l2" for a
  // camera); empty lets libavformat probe the file. A path under /dev/video
  // selects "v4l2" by itself.
  explicit VideoReader(const std::string& path, const std::string& input_format = "");
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  const VideoInfo& info() const { return info_; }
  const std::string& path() const { return path_; }

  // The next frame, upright RGB of info().width x info().height. False at
  // the end of the video, or after a warning when the rest is damaged.
  bool next(DecodedFrame& frame);

  // Callable from another thread: makes a blocked read (a camera, a pipe)
  // return, after which next() reports the end without a warning.
  void request_stop();

 private:
  struct State;
  std::string path_;
  VideoInfo info_;
  std::unique_ptr<State> state_;
};

// False when this build has no FFmpeg (the reader then refuses every file).
bool ffmpeg_available();

// Turns an RGB image clockwise by 0, 90, 180 or 270 degrees.
io::RgbImage rotate_clockwise(const io::RgbImage& image, int degrees);

}  // namespace lingbot::video
