// Where `run`'s frames come from: a folder of images, a video file (or a
// camera), or raw rgb24 frames on stdin, behind one interface so the command
// has a single loop. Frames come out preprocessed (image/preprocess.h) and
// already picked: a video's frames are sampled as upstream demo.py does,
// then --stride and --first-k apply (see docs/video.md).
//
// Every source is read on a thread of its own, a few frames ahead of the
// model (a bounded queue): a video or a pipe is decoded there, a folder's
// files are read and decoded there, so this work overlaps the model's while
// memory stays flat however long the video is.
#pragma once

#include "core/tensor.h"
#include "image/preprocess.h"

#include <cstdint>
#include <memory>
#include <string>

namespace lingbot::video {

// Upstream demo.py's video sampling: decoded frame i is kept when
// i % interval == 0, interval = max(1, round(source_fps / target_fps)) with
// Python's round (half to even) and source_fps 30 when the container gives 0.
int sampling_interval(double source_fps, int target_fps);

// The frames kept, decided one decoded frame at a time, in demo.py's order:
// every `interval`-th decoded frame is sampled; only the first `first_k`
// sampled frames count (0: all); of those every `stride`-th is used
// (upstream: paths[:first_k][::stride], for folders and videos alike).
class FrameSelector {
 public:
  FrameSelector(int interval, int stride, int first_k);
  // Call once for each decoded frame, in order: use this one?
  bool keep(int64_t decoded_index);
  // No later frame will be kept (--first-k sampled frames seen): stop decoding.
  bool done() const { return first_k_ > 0 && sampled_ >= first_k_; }
  // How many of `decoded` frames would be kept.
  int64_t count_kept(int64_t decoded) const;

 private:
  int interval_, stride_, first_k_;
  int64_t sampled_ = 0;  // sampled frames seen so far
};

struct Frame {
  int64_t index = 0;    // among the frames used: 0, 1, 2, ...
  std::string name;     // the file, or "<video> frame <decoded index>"
  double timestamp = 0; // seconds into a video; the frame number for folders and pipes
  Tensor image;         // float32 [3, height(), width()], preprocessed
};

struct SourceOptions {
  std::string images;        // a folder of .png / .jpg frames (in `order`), or
  io::FrameOrder order = io::FrameOrder::Natural;
  std::string video;         // a video file, a camera (/dev/video0), or "-" for raw frames on stdin
  std::string input_format;  // "rgb24" for stdin; otherwise an FFmpeg input format name (e.g. "v4l2"), or empty
  std::string input_size;    // WxH of raw frames on stdin
  io::PreprocessOptions preprocess;
  int fps = 10;              // target rate of a video's sampling
  int first_k = 0;
  int stride = 1;
  bool rotate_cw90 = false;  // turn frames a quarter clockwise (after the stream's own rotation)
  int queue_frames = 4;      // frames read and decoded ahead of the model
  int stdin_fd = 0;          // where "-" reads from (tests pass a pipe)
};

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // The next frame; false at the end.
  virtual bool next(Frame& frame) = 0;
  // How many frames next() will give, when known in advance (a folder, a
  // video whose container gives its length); -1 otherwise.
  virtual int64_t expected_frames() const = 0;
  // Size of the preprocessed frames.
  virtual int height() const = 0;
  virtual int width() const = 0;
  // One phrase for the log, e.g. "clip.mp4 (h264, 1920x1080, 30 fps, every 3rd frame)".
  virtual std::string description() const = 0;
  // Seconds next() has spent waiting for a frame the decoding thread had
  // not finished yet, the first frame excepted: 0 when decoding keeps ahead
  // of the model.
  virtual double seconds_waited() const { return 0; }
};

// Opens what `options` names (exactly one of images / video). Opening errors
// (a missing file, no video stream, ...) are thrown here, as one line.
std::unique_ptr<FrameSource> open_frame_source(const SourceOptions& options);

}  // namespace lingbot::video
