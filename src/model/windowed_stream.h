// Windowed mode: upstream GCTStream.inference_windowed (fixed-interval
// keyframes), frame by frame.
//
// The video is cut into overlapping windows (model/window_plan.h); each runs
// as a fresh stream through one StreamingModel (reset between windows, the
// weights stay), with its own scale phase; the overlap's frames are pushed
// again at the start of the next window. Each window is brought into the
// previous window's (already aligned) frame by a similarity found on the
// overlap (model/window_alignment.h), so every window ends up in the first
// window's frame; the stitched output takes each frame from the latest
// window that holds it.
//
// Results come back in frame order, each frame once, like StreamingModel's,
// but later: a window's frames wait until its alignment is known (its
// first `overlap` frames have come back), and the last `overlap` frames of a
// window wait to see whether another window follows (it replaces them); the
// first window's frames all wait for the second window, because upstream
// passes them through the (identity) alignment, which normalises their
// quaternions, only when there is more than one window. Memory holds one
// window's results at most, never the video's.
#pragma once

#include "model/streaming_model.h"
#include "model/window_alignment.h"
#include "model/window_plan.h"

#include <deque>
#include <memory>
#include <optional>
#include <vector>

namespace lingbot {

class WindowedStream : public FrameStream {
 public:
  // options.windowed, options.window and options.window_align say how;
  // options.keep_dense_outputs must be on (windows are scaled by depth).
  WindowedStream(Backend& backend, const io::StateDict& weights, const ModelConfig& config,
                 const StreamOptions& options);

  std::vector<FrameResult> push(const Tensor& frame) override;
  std::vector<FrameResult> finish() override;
  void reset() override;
  kv::CacheStats cache_stats() const override { return model_.cache_stats(); }

  const WindowPlan& plan() const { return plan_; }
  // One per window begun: the similarity that took it into the first
  // window's frame (upstream's chunk_scales and chunk_transforms); the first
  // is the identity.
  const std::vector<Similarity>& alignments() const { return alignments_; }

 private:
  // Ends the current (whole) window and starts the next one with the
  // overlap's frames.
  void start_next_window(std::vector<FrameResult>& out);
  // Results of the current window's stream, in order.
  void take(std::vector<FrameResult> results, std::vector<FrameResult>& out);
  // A result of the current window, once its alignment is known: aligned,
  // then out (a frame no later window holds) or held in tail_.
  void place(FrameResult r, std::vector<FrameResult>& out);
  void align(FrameResult& r) const;

  StreamingModel model_;
  WindowPlan plan_;
  WindowAlign method_;
  int64_t window_start_ = 0;  // the current window's first frame, in the video
  int window_pushed_ = 0;     // frames pushed into the current window
  std::deque<Tensor> recent_;  // the last `overlap` frames pushed
  std::vector<FrameResult> waiting_;  // results of the current window waiting for its alignment
  std::optional<Similarity> similarity_;  // the current window's, once known
  std::vector<FrameResult> tail_;       // its aligned frames from `step` on (the next window's overlap)
  std::vector<FrameResult> prev_tail_;  // the previous window's, which this window is aligned to
  std::vector<Similarity> alignments_;
};

// The stream the options ask for: a WindowedStream when options.windowed,
// else a StreamingModel.
std::unique_ptr<FrameStream> make_frame_stream(Backend& backend, const io::StateDict& weights,
                                               const ModelConfig& config, const StreamOptions& options);

}  // namespace lingbot
