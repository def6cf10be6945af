// Raw frames from a pipe: rgb24, W*H*3 bytes per frame, back to back until
// the end of the input (what `ffmpeg -f rawvideo -pix_fmt rgb24 -` writes).
#pragma once

#include "video/video_reader.h"

#include <atomic>
#include <string>

namespace lingbot::video {

class RawFrameReader {
 public:
  // Reads from file descriptor `fd` (not closed here); `name` labels
  // messages ("stdin"). Frames are `width` x `height`.
  RawFrameReader(int fd, std::string name, int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }

  // The next whole frame; false at the end of the input. A partial last
  // frame is dropped with a warning; an input without one whole frame is an
  // error. Timestamps are frame numbers (raw frames carry no times).
  bool next(DecodedFrame& frame);

  // Callable from another thread: a blocked read gives up within 0.1 s.
  void request_stop() { stop_ = true; }

 private:
  int fd_;
  std::string name_;
  int width_, height_;
  int64_t frames_ = 0;
  bool finished_ = false;
  std::atomic<bool> stop_{false};
};

// "640x480" -> {640, 480}; an error naming `flag` otherwise.
std::pair<int, int> parse_frame_size(const std::string& text, const std::string& flag);

}  // namespace lingbot::video
