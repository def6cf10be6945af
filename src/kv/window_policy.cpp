#include "kv/window_policy.h"

#include <algorithm>

namespace lingbot::kv {

WindowPolicy::WindowPolicy(const CacheConfig& config, const TokenLayout& layout) : config_(config) {
  validate(config);
  validate(layout);
  tokens_per_frame_ = layout.tokens_per_frame();
  evicts_ = tokens_per_frame_ > 1;
  // Upstream keeps tokens [camera, scale] = the frame's specials, or only the
  // camera token (index 0). A layout without specials retains nothing.
  if (config.cross_frame_special) {
    retained_per_frame_ = config.camera_only ? std::min(1, layout.num_special) : layout.num_special;
  }
}

const std::vector<WindowPolicy::Eviction>& WindowPolicy::store(int num_frames) {
  LB_CHECK(num_frames >= 1, "kv cache: a step stores at least one frame, got {}", num_frames);
  last_evictions_.clear();
  for (int i = 0; i < num_frames; ++i) frames_.push_back(next_frame_++);

  const int64_t W = config_.sliding_window;
  const int64_t S = config_.scale_frames;
  const int64_t n = static_cast<int64_t>(frames_.size());
  if (!evicts_ || n <= W + S) return last_evictions_;

  // Positions [S, n - W) are evicted (non-empty: W >= 1 and n > W + S), their
  // specials retained if cross_frame_special. Positions [0, S) stay when
  // include_scale_frames; otherwise they leave too, WITHOUT retention (the quirk).
  const bool retain = retained_per_frame_ > 0;
  const int64_t first_evicted = config_.include_scale_frames ? S : 0;
  for (int64_t pos = first_evicted; pos < n - W; ++pos) {
    last_evictions_.push_back({frames_[static_cast<size_t>(pos)], retain && pos >= S});
  }
  if (retain) retained_frames_ += n - W - S;
  evicted_total_ += n - W - first_evicted;
  frames_.erase(frames_.begin() + first_evicted, frames_.begin() + (n - W));
  return last_evictions_;
}

void WindowPolicy::reset() {
  frames_.clear();
  next_frame_ = 0;
  retained_frames_ = 0;
  evicted_total_ = 0;
  last_evictions_.clear();
}

int64_t WindowPolicy::pinned_frames() const {
  if (!config_.include_scale_frames) return 0;
  return std::min<int64_t>(config_.scale_frames, static_cast<int64_t>(frames_.size()));
}

int64_t WindowPolicy::visible_tokens() const {
  return retained_tokens() + static_cast<int64_t>(frames_.size()) * tokens_per_frame_;
}

void WindowPolicy::report(CacheStats& s) const {
  s.frames_stored = frames_stored();
  s.frames_listed = static_cast<int64_t>(frames_.size());
  s.scale_frames = pinned_frames();
  s.window_frames = s.frames_listed - s.scale_frames;
  s.frames_evicted = frames_evicted();
  s.special_tokens_retained = retained_tokens();
  s.visible_tokens = visible_tokens();
}

}  // namespace lingbot::kv
