#include "model/window_plan.h"

#include "core/error.h"

#include <algorithm>

namespace lingbot {

WindowPlan WindowPlan::from(const WindowSettings& s, int num_scale_frames, int keyframe_interval) {
  LB_CHECK(num_scale_frames >= 1, "num_scale_frames must be >= 1, got {}", num_scale_frames);
  LB_CHECK(keyframe_interval >= 1, "keyframe_interval must be >= 1, got {}", keyframe_interval);
  LB_CHECK(s.window_size >= 1, "window_size must be >= 1, got {}", s.window_size);
  WindowPlan p;
  p.scale_frames = num_scale_frames;
  p.window_frames = num_scale_frames + std::max(s.window_size - num_scale_frames, 0) * keyframe_interval;
  if (s.overlap_keyframes > 0) {
    p.overlap = std::max(num_scale_frames, s.overlap_keyframes * keyframe_interval);
  } else {
    LB_CHECK(s.overlap_size >= 1, "overlap_size must be >= 1, got {}", s.overlap_size);
    p.overlap = s.overlap_size;
  }
  // Upstream would go on with windows that contribute no frame of their own
  // (its step falls to 1 and their results are all dropped by the stitching).
  LB_CHECK(p.overlap < p.window_frames,
           "the overlap ({} frames{}) must be smaller than a window ({} frames: num_scale_frames {} + "
           "(window_size {} - {}) x keyframe_interval {}); lower it or raise window_size",
           p.overlap, s.overlap_keyframes > 0 ? ", from overlap_keyframes" : ", overlap_size", p.window_frames,
           num_scale_frames, s.window_size, num_scale_frames, keyframe_interval);
  return p;
}

std::vector<std::pair<int64_t, int64_t>> WindowPlan::windows(int64_t frames) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (frames <= 0) return out;
  if (window_frames >= frames) return {{0, frames}};
  for (int64_t start = 0;; start += step()) {
    const int64_t end = std::min<int64_t>(start + window_frames, frames);
    out.emplace_back(start, end);
    if (end == frames) break;
  }
  return out;
}

}  // namespace lingbot
