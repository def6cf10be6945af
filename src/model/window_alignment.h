// Bringing a window's predictions into the previous window's frame
// (windowed mode; see window_plan.h for the windows themselves).
//
// Two consecutive windows share `overlap` frames. The alignment is a
// similarity x -> s R x + t from the later window's world frame into the
// earlier one's (already aligned, so into the first window's frame), found
// on the shared frames:
//   * the anchor is the latest shared frame that is a keyframe (or scale
//     frame) in both windows, else the first shared frame;
//   * s is the median of the per-pixel depth ratios earlier / later over
//     every shared frame that is a keyframe in both (the anchor alone when
//     there is none), clamped to [1e-3, 1e3], as upstream;
//   * R and t come from the two windows' cameras of the anchor frame.
//
// How R and t come from the cameras is where the two methods differ:
//   WindowAlign::Upstream reproduces upstream's _pairwise_alignment and
//     _warp_predictions exactly. They read pose_enc[0:3] as the camera
//     centre and its quaternion as the camera-to-world rotation, but the
//     model's pose_enc is world-to-camera (its translation is t of
//     x_cam = R x_world + t, demo.py's postprocess inverts it), so the
//     result is not the similarity relating the two windows in general.
//   WindowAlign::Sim3 reads pose_enc as what it is: camera centres
//     C = -R^T t and camera-to-world rotations R^T. R = Rc_anchor,earlier
//     Rc_anchor,later^T; t is the least-squares translation over the shared
//     keyframes' centres, C_earlier - s R C_later averaged. Given two windows
//     related by a similarity, it recovers it (tests/model/window_alignment_test).
//
// After alignment every frame's pose_enc and depth change as the method
// says (depth x s; the fields of view stay), and its world points are
// unprojected again from the new depth and camera, as demo.py does from
// upstream's aligned pose_enc and depth.
#pragma once

#include "model/camera_geometry.h"

#include <array>
#include <span>

namespace lingbot {

enum class WindowAlign { Upstream, Sim3 };

struct Similarity {
  double scale = 1.0;
  Mat3 rotation{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  std::array<double, 3> translation{};
};

// What the alignment reads of one frame.
struct AlignmentFrame {
  std::array<float, 9> pose_enc{};
  const float* depth = nullptr;  // [H * W]
  bool keyframe = true;          // a scale frame or a keyframe (stored in its window's cache)
};

// The similarity from `later`'s frame into `earlier`'s. `earlier` holds the
// earlier window's last `overlap` frames (aligned), `later` the later
// window's first `overlap` frames (as predicted); both the same frames of
// the video, in order; `pixels` = H * W.
Similarity align_windows(WindowAlign method, std::span<const AlignmentFrame> earlier,
                         std::span<const AlignmentFrame> later, int64_t pixels);

// pose_enc of a frame of the later window, in the earlier window's frame.
std::array<float, 9> align_pose(WindowAlign method, const Similarity& sim, const std::array<float, 9>& pose_enc);

}  // namespace lingbot
