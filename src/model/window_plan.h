// Windowed mode's frame arithmetic, as upstream GCTStream.inference_windowed
// (gct_stream_window.py, fixed-interval keyframes) does it.
//
// A window is one fresh stream: its first `scale_frames` frames run together
// (the scale phase), the rest one at a time with every keyframe_interval-th
// of them stored. window_size counts keyframes, the scale frames included,
// so a window spans
//     scale_frames + (window_size - scale_frames) * keyframe_interval
// frames. Consecutive windows share `overlap` frames: the later window
// starts `step = window_frames - overlap` frames after the earlier one and
// re-runs those frames (as its scale phase, when the overlap covers it), and
// the overlap is what brings it into the earlier window's frame.
//
// The overlap, in frames: overlap_keyframes (when set) as
// max(scale_frames, overlap_keyframes * keyframe_interval), else
// overlap_size. Upstream's list of windows is then
//     [start, min(start + window_frames, S)) for start = 0, step, 2 step, ...
// up to the first that reaches the end; every window but the last is whole,
// and every frame belongs to the stitched output exactly once: window k
// contributes its frames before the next window's start, the last window
// all of its frames.
#pragma once

#include <lingbot/options.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace lingbot {

// The window options (include/lingbot/options.h); the scale frames and the
// keyframe interval are the stream's own (StreamOptions).
struct WindowSettings {
  int window_size = option_defaults::window_size;              // keyframes per window, the scale frames included
  int overlap_size = option_defaults::overlap_size;            // frames shared by consecutive windows
  int overlap_keyframes = option_defaults::overlap_keyframes;  // if > 0, the overlap in keyframes; 0: unset

  bool operator==(const WindowSettings&) const = default;
};

struct WindowPlan {
  int scale_frames = 0;   // of each window (the last may have fewer frames than this)
  int window_frames = 0;  // frames of a whole window
  int overlap = 0;        // frames shared by consecutive windows
  int step() const { return window_frames - overlap; }

  // Checks the settings; throws lingbot::Error naming the option at fault
  // (an overlap that leaves a window no frame of its own, for one).
  static WindowPlan from(const WindowSettings& settings, int num_scale_frames, int keyframe_interval);

  // The windows of a video of `frames` frames, [first, end) each, in order:
  // upstream's list (for a known length; the streaming code finds the same
  // windows without knowing it).
  std::vector<std::pair<int64_t, int64_t>> windows(int64_t frames) const;
};

}  // namespace lingbot
