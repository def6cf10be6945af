#include "model/windowed_stream.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>

namespace lingbot {

WindowedStream::WindowedStream(Backend& backend, const io::StateDict& weights, const ModelConfig& config,
                               const StreamOptions& options)
    : model_(backend, weights, config, options),
      plan_(WindowPlan::from(options.window, options.num_scale_frames, options.keyframe_interval)),
      method_(options.window_align) {
  LB_CHECK(options.keep_dense_outputs,
           "mode windowed scales each window by its depth maps, so it needs them: drop --no-dense (dense off)");
  alignments_.emplace_back();
}

std::vector<FrameResult> WindowedStream::push(const Tensor& frame) {
  std::vector<FrameResult> out;
  if (window_pushed_ == plan_.window_frames) start_next_window(out);
  recent_.push_back(frame);
  if (static_cast<int>(recent_.size()) > plan_.overlap) recent_.pop_front();
  ++window_pushed_;
  take(model_.push(frame), out);
  return out;
}

std::vector<FrameResult> WindowedStream::finish() {
  std::vector<FrameResult> out;
  take(model_.finish(), out);
  // The current window is the last: everything it holds is the output.
  if (alignments_.size() == 1) {
    // A single window goes out as predicted (upstream aligns nothing then).
    for (FrameResult& r : waiting_) out.push_back(std::move(r));
  } else {
    // A later window always has its overlap and one frame more.
    LB_CHECK(similarity_.has_value(), "windowed mode: the window at frame {} has {} of its {} overlap frames",
             window_start_, waiting_.size(), plan_.overlap);
    for (FrameResult& r : tail_) out.push_back(std::move(r));
  }
  waiting_.clear();
  tail_.clear();
  return out;
}

void WindowedStream::reset() {
  model_.reset();
  window_start_ = 0;
  window_pushed_ = 0;
  recent_.clear();
  waiting_.clear();
  similarity_.reset();
  tail_.clear();
  prev_tail_.clear();
  alignments_.assign(1, Similarity{});
}

void WindowedStream::start_next_window(std::vector<FrameResult>& out) {
  std::vector<FrameResult> drained = model_.finish();
  // The next window's scale frames go to the model first, so that the
  // device runs its scale phase while the host finishes the window before:
  // aligning its last frames (after the first window, all of that window).
  // Their results, if any come back already, wait until then.
  model_.reset();
  const std::deque<Tensor> overlap = recent_;
  const size_t early = std::min(overlap.size(), static_cast<size_t>(std::max(plan_.scale_frames, 1)));
  std::vector<FrameResult> early_results;
  for (size_t f = 0; f < early; ++f)
    for (FrameResult& r : model_.push(overlap[f])) early_results.push_back(std::move(r));

  take(std::move(drained), out);
  if (alignments_.size() == 1) {
    // The first window, held whole until now, goes through the identity.
    similarity_ = Similarity{};
    std::vector<FrameResult> first = std::move(waiting_);
    waiting_.clear();
    for (FrameResult& r : first) place(std::move(r), out);
  }
  LB_CHECK(similarity_.has_value() && static_cast<int>(tail_.size()) == plan_.overlap,
           "windowed mode: window at frame {} ended with {} of {} overlap frames", window_start_, tail_.size(),
           plan_.overlap);
  prev_tail_ = std::move(tail_);
  tail_.clear();
  similarity_.reset();
  window_start_ += plan_.step();
  window_pushed_ = static_cast<int>(early);
  alignments_.emplace_back();  // filled in once the overlap's frames are back
  log_debug("window {} starts at frame {}", alignments_.size() - 1, window_start_);
  take(std::move(early_results), out);
  for (size_t f = early; f < overlap.size(); ++f) {
    ++window_pushed_;
    take(model_.push(overlap[f]), out);
  }
}

void WindowedStream::take(std::vector<FrameResult> results, std::vector<FrameResult>& out) {
  for (FrameResult& r : results) {
    r.index += window_start_;
    if (similarity_) {
      place(std::move(r), out);
      continue;
    }
    waiting_.push_back(std::move(r));
    if (alignments_.size() == 1 || static_cast<int>(waiting_.size()) < plan_.overlap) continue;
    // The overlap is back: align this window to the previous one.
    std::vector<AlignmentFrame> earlier, later;
    for (size_t f = 0; f < waiting_.size(); ++f) {
      earlier.push_back({prev_tail_[f].pose_enc, prev_tail_[f].depth.f32(), prev_tail_[f].role != FrameRole::NonKeyframe});
      later.push_back({waiting_[f].pose_enc, waiting_[f].depth.f32(), waiting_[f].role != FrameRole::NonKeyframe});
    }
    const int64_t pixels = static_cast<int64_t>(waiting_[0].height) * waiting_[0].width;
    similarity_ = align_windows(method_, earlier, later, pixels);
    alignments_.back() = *similarity_;
    std::vector<FrameResult> ready = std::move(waiting_);
    waiting_.clear();
    for (FrameResult& w : ready) place(std::move(w), out);
  }
}

void WindowedStream::place(FrameResult r, std::vector<FrameResult>& out) {
  align(r);
  if (r.index - window_start_ < plan_.step()) {
    out.push_back(std::move(r));
  } else {
    tail_.push_back(std::move(r));
  }
}

void WindowedStream::align(FrameResult& r) const {
  const Similarity& sim = *similarity_;
  r.pose_enc = align_pose(method_, sim, r.pose_enc);
  r.camera = decode_pose(r.pose_enc.data(), r.height, r.width);
  if (r.depth.defined()) {
    float* d = r.depth.f32();
    const float s = static_cast<float>(sim.scale);
    for (int64_t k = 0; k < r.depth.numel(); ++k) d[k] *= s;
    unproject_depth(r.camera, d, r.height, r.width, r.world_points.f32());
  }
}

std::unique_ptr<FrameStream> make_frame_stream(Backend& backend, const io::StateDict& weights,
                                               const ModelConfig& config, const StreamOptions& options) {
  if (options.windowed) return std::make_unique<WindowedStream>(backend, weights, config, options);
  return std::make_unique<StreamingModel>(backend, weights, config, options);
}

}  // namespace lingbot
