#include "video/frame_source.h"

#include "core/error.h"
#include "core/log.h"
#include "video/raw_frame_reader.h"
#include "video/video_reader.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <chrono>
#include <thread>
#include <utility>

namespace lingbot::video {

namespace {

// Python's round(): to nearest, ties to even (round(2.5) == 2).
int64_t round_half_even(double v) {
  const double lower = std::floor(v);
  const double fraction = v - lower;
  int64_t r = static_cast<int64_t>(lower);
  if (fraction > 0.5 || (fraction == 0.5 && r % 2 != 0)) ++r;
  return r;
}

std::string ordinal(int n) {
  if (n == 1) return "every";
  const int tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return fmt::format("every {}{}", n, suffix);
}

// --- a folder of images --------------------------------------------------

class FolderSource final : public FrameSource {
 public:
  explicit FolderSource(const SourceOptions& o)
      : folder_(o.images), frames_(pick(io::list_images(o.images, o.order), o.stride, o.first_k), o.preprocess) {}

  bool next(Frame& frame) override {
    if (next_ >= frames_.size()) return false;
    frame.index = next_;
    frame.name = frames_.paths()[static_cast<size_t>(next_)];
    frame.timestamp = static_cast<double>(next_);
    frame.image = frames_.frame(next_);
    ++next_;
    return true;
  }
  int64_t expected_frames() const override { return frames_.size(); }
  int height() const override { return frames_.output_height(); }
  int width() const override { return frames_.output_width(); }
  std::string description() const override { return folder_; }

 private:
  static std::vector<std::string> pick(std::vector<std::string> paths, int stride, int first_k) {
    FrameSelector selector(1, stride, first_k);
    std::vector<std::string> kept;
    for (size_t i = 0; i < paths.size() && !selector.done(); ++i)
      if (selector.keep(static_cast<int64_t>(i))) kept.push_back(std::move(paths[i]));
    return kept;
  }

  std::string folder_;
  io::FrameSource frames_;
  int next_ = 0;
};

// --- any source, read on a thread ahead of the model ------------------------

// Runs a source's next() on a thread of its own, at most `capacity` frames
// ahead, so that reading and decoding (a video's frames, a folder's files:
// tens of milliseconds for a 1080p PNG) overlaps the model's work instead of
// preceding each push. Frames, their order and an error (rethrown once the
// frames before it are taken) are the inner source's. The constructor waits
// for the first frame, so that a source which yields none (an empty pipe,
// damage at the start) fails there, before the model loads. Destroying it
// stops the thread: `interrupt` unblocks a read that waits on a camera or a
// pipe, so an error on the model's side never leaves the thread running.
class ReadAheadSource final : public FrameSource {
 public:
  ReadAheadSource(std::unique_ptr<FrameSource> inner, int capacity, std::function<void()> interrupt = {})
      : inner_(std::move(inner)),
        interrupt_(std::move(interrupt)),
        capacity_(static_cast<size_t>(std::max(1, capacity))) {
    worker_ = std::thread([this] { produce(); });
    std::exception_ptr early_error;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return !queue_.empty() || ended_; });
      if (queue_.empty()) early_error = std::exchange(error_, nullptr);
    }
    if (early_error) {
      worker_.join();  // it has ended; a constructor that throws runs no destructor
      std::rethrow_exception(early_error);
    }
  }
  ~ReadAheadSource() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    space_.notify_all();
    if (interrupt_) interrupt_();
    worker_.join();
  }

  bool next(Frame& frame) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (queue_.empty() && !ended_) {
      const auto start = std::chrono::steady_clock::now();
      ready_.wait(lock, [&] { return !queue_.empty() || ended_; });
      seconds_waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (!queue_.empty()) {
      frame = std::move(queue_.front());
      queue_.pop_front();
      space_.notify_one();
      return true;
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return false;
  }
  int64_t expected_frames() const override { return inner_->expected_frames(); }
  int height() const override { return inner_->height(); }
  int width() const override { return inner_->width(); }
  std::string description() const override { return inner_->description(); }
  double seconds_waited() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return seconds_waited_;
  }

 private:
  void produce() {
    try {
      for (Frame frame; !stop_requested() && inner_->next(frame);) {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock, [&] { return queue_.size() < capacity_ || stopping_; });
        if (stopping_) break;
        queue_.push_back(std::move(frame));
        ready_.notify_one();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    ready_.notify_all();
  }

  bool stop_requested() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopping_;
  }

  std::unique_ptr<FrameSource> inner_;
  std::function<void()> interrupt_;
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<Frame> queue_;
  bool ended_ = false, stopping_ = false;
  double seconds_waited_ = 0;  // in next(), for frames not yet read
  std::exception_ptr error_;
  std::thread worker_;  // last: started once everything above exists
};

// --- decoded frames: a video, a camera, a pipe ------------------------------

// Frames from `decode` (one decoded frame per call, false at the end): the
// ones `selector` picks, turned and preprocessed. Read on a thread of its
// own through ReadAheadSource.
class DecodedSource final : public FrameSource {
 public:
  using Decode = std::function<bool(DecodedFrame&)>;

  DecodedSource(std::string label, Decode decode, FrameSelector selector, int extra_rotation_cw,
                const io::PreprocessOptions& prep, int displayed_width, int displayed_height, int64_t expected,
                std::string description)
      : label_(std::move(label)),
        decode_(std::move(decode)),
        selector_(selector),
        rotation_cw_(extra_rotation_cw),
        prep_(prep),
        expected_(expected),
        description_(std::move(description)) {
    const bool quarter = rotation_cw_ % 180 != 0;
    const io::FrameGeometry g = io::frame_geometry(quarter ? displayed_height : displayed_width,
                                                   quarter ? displayed_width : displayed_height, prep_, label_);
    height_ = g.height;
    width_ = g.width;
  }

  bool next(Frame& frame) override {
    DecodedFrame decoded;
    while (!selector_.done() && decode_(decoded)) {
      if (!selector_.keep(decoded.index)) continue;
      frame.index = used_++;
      frame.name = fmt::format("{} frame {}", label_, decoded.index);
      frame.timestamp = decoded.timestamp;
      const io::RgbImage upright = rotate_clockwise(decoded.rgb, rotation_cw_);
      const io::FrameGeometry g = io::frame_geometry(upright.width, upright.height, prep_, frame.name);
      LB_CHECK(g.height == height_ && g.width == width_, "{}: preprocessed to {}x{}, not the stream's {}x{}",
               frame.name, g.width, g.height, width_, height_);
      frame.image = io::preprocess(upright, prep_);
      return true;
    }
    return false;
  }
  int64_t expected_frames() const override { return expected_; }
  int height() const override { return height_; }
  int width() const override { return width_; }
  std::string description() const override { return description_; }

 private:
  std::string label_;
  Decode decode_;
  FrameSelector selector_;
  int rotation_cw_;
  io::PreprocessOptions prep_;
  int64_t expected_;
  std::string description_;
  int height_ = 0, width_ = 0;
  int64_t used_ = 0;
};

std::unique_ptr<FrameSource> open_video(const SourceOptions& o) {
  LB_CHECK(o.input_format != "rgb24", "--input-format rgb24 is for raw frames on stdin (--video -), not {}",
           o.video);
  LB_CHECK(o.input_size.empty(), "--input-size is for raw frames on stdin (--video -), not {}", o.video);
  auto reader = std::make_shared<VideoReader>(o.video, o.input_format);
  const VideoInfo& info = reader->info();
  const int interval = sampling_interval(info.fps, o.fps);
  FrameSelector selector(interval, o.stride, o.first_k);
  const int64_t expected = info.frame_count >= 0 ? selector.count_kept(info.frame_count) : -1;
  std::string description = fmt::format("{} ({}, {}x{}{}, {} fps{}, {} frame)", o.video, info.codec, info.width,
                                        info.height,
                                        info.rotation_cw ? fmt::format(" turned {} degrees", info.rotation_cw) : "",
                                        info.fps > 0 ? fmt::format("{:.4g}", info.fps) : "unknown (taken as 30)",
                                        info.frame_count >= 0
                                            ? fmt::format(", {}{} frames", info.frame_count_exact ? "" : "about ",
                                                          info.frame_count)
                                            : "",
                                        ordinal(interval));
  return std::make_unique<ReadAheadSource>(
      std::make_unique<DecodedSource>(o.video, [reader](DecodedFrame& f) { return reader->next(f); }, selector,
                                      o.rotate_cw90 ? 90 : 0, o.preprocess, info.width, info.height, expected,
                                      std::move(description)),
      o.queue_frames, [reader] { reader->request_stop(); });
}

std::unique_ptr<FrameSource> open_stdin(const SourceOptions& o) {
  LB_CHECK(o.input_format == "rgb24", "--video -: raw frames on stdin need --input-format rgb24{}",
           o.input_format.empty() ? "" : fmt::format(" (got '{}')", o.input_format));
  LB_CHECK(!o.input_size.empty(), "--video -: raw frames on stdin need --input-size WIDTHxHEIGHT");
  const auto [w, h] = parse_frame_size(o.input_size, "--input-size");
  auto reader = std::make_shared<RawFrameReader>(o.stdin_fd, "stdin", w, h);
  FrameSelector selector(1, o.stride, o.first_k);  // raw frames carry no rate: no --fps sampling
  return std::make_unique<ReadAheadSource>(
      std::make_unique<DecodedSource>("stdin", [reader](DecodedFrame& f) { return reader->next(f); }, selector,
                                      o.rotate_cw90 ? 90 : 0, o.preprocess, w, h, -1,
                                      fmt::format("stdin (rgb24 {}x{})", w, h)),
      o.queue_frames, [reader] { reader->request_stop(); });
}

}  // namespace

int sampling_interval(double source_fps, int target_fps) {
  LB_CHECK(target_fps > 0, "--fps must be positive, got {}", target_fps);
  if (!(source_fps > 0)) source_fps = 30;  // upstream: cap.get(CAP_PROP_FPS) or 30
  return static_cast<int>(std::max<int64_t>(1, round_half_even(source_fps / target_fps)));
}

FrameSelector::FrameSelector(int interval, int stride, int first_k)
    : interval_(interval), stride_(stride), first_k_(first_k) {
  LB_CHECK(interval >= 1, "sampling interval must be >= 1, got {}", interval);
  LB_CHECK(stride >= 1, "--stride must be >= 1, got {}", stride);
  LB_CHECK(first_k >= 0, "--first-k must be >= 0, got {}", first_k);
}

bool FrameSelector::keep(int64_t decoded_index) {
  if (done() || decoded_index % interval_ != 0) return false;
  const int64_t sampled = sampled_++;  // its place among the sampled frames
  return sampled % stride_ == 0;
}

int64_t FrameSelector::count_kept(int64_t decoded) const {
  if (decoded <= 0) return 0;
  const int64_t sampled = (decoded + interval_ - 1) / interval_;
  const int64_t counted = first_k_ > 0 ? std::min<int64_t>(sampled, first_k_) : sampled;
  return (counted + stride_ - 1) / stride_;
}

std::unique_ptr<FrameSource> open_frame_source(const SourceOptions& o) {
  LB_CHECK(o.images.empty() != o.video.empty(), "give either --images or --video{}",
           o.images.empty() ? "" : " (not both)");
  if (!o.images.empty()) {
    LB_CHECK(!o.rotate_cw90, "--rotate-cw90 applies to --video, not to --images {}", o.images);
    LB_CHECK(o.input_format.empty() && o.input_size.empty(),
             "--input-format / --input-size apply to --video -, not to --images {}", o.images);
    return std::make_unique<ReadAheadSource>(std::make_unique<FolderSource>(o), o.queue_frames);
  }
  if (o.video == "-") return open_stdin(o);
  return open_video(o);
}

}  // namespace lingbot::video
