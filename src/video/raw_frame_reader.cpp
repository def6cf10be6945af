#include "video/raw_frame_reader.h"

#include "core/error.h"
#include "core/log.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace lingbot::video {

RawFrameReader::RawFrameReader(int fd, std::string name, int width, int height)
    : fd_(fd), name_(std::move(name)), width_(width), height_(height) {
  LB_CHECK(width > 0 && height > 0 && static_cast<int64_t>(width) * height <= io::kMaxImagePixels,
           "{}: invalid raw frame size {}x{}", name_, width, height);
}

bool RawFrameReader::next(DecodedFrame& frame) {
  if (finished_ || stop_) return false;
  const size_t frame_bytes = static_cast<size_t>(width_) * height_ * 3;
  frame.rgb.width = width_;
  frame.rgb.height = height_;
  frame.rgb.rgb.resize(frame_bytes);
  size_t got = 0;
  while (got < frame_bytes) {
    // Poll first, so that request_stop() is seen while a pipe stays silent.
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, 100);
    if (stop_) return false;
    if (ready < 0 && errno != EINTR) fail("{}: cannot read ({})", name_, std::strerror(errno));
    if (ready <= 0) continue;
    const ssize_t n = read(fd_, frame.rgb.rgb.data() + got, frame_bytes - got);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail("{}: cannot read ({})", name_, std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < frame_bytes) {
    finished_ = true;
    LB_CHECK(frames_ > 0 || got > 0, "{}: no frames (the input ended before the first {}x{} rgb24 frame)", name_,
             width_, height_);
    LB_CHECK(frames_ > 0, "{}: the input holds only {} bytes, less than one {}x{} rgb24 frame ({} bytes)", name_,
             got, width_, height_, frame_bytes);
    if (got > 0)
      log_warn("{}: the last frame is partial ({} of {} bytes) and is dropped; {} whole frames read", name_, got,
               frame_bytes, frames_);
    return false;
  }
  frame.index = frames_;
  frame.timestamp = static_cast<double>(frames_);
  ++frames_;
  return true;
}

std::pair<int, int> parse_frame_size(const std::string& text, const std::string& flag) {
  const auto x = text.find('x');
  auto number = [&](const std::string& part) {
    LB_CHECK(!part.empty() && part.size() <= 6 && part.find_first_not_of("0123456789") == std::string::npos,
             "{} {}: expected WIDTHxHEIGHT, e.g. 640x480", flag, text);
    return std::stoi(part);
  };
  LB_CHECK(x != std::string::npos, "{} {}: expected WIDTHxHEIGHT, e.g. 640x480", flag, text);
  const int w = number(text.substr(0, x)), h = number(text.substr(x + 1));
  LB_CHECK(w > 0 && h > 0, "{} {}: width and height must be positive", flag, text);
  return {w, h};
}

}  // namespace lingbot::video
