// From the camera head's pose encoding to cameras and 3D points (host side).
//
// Pose encoding (upstream "absT_quaR_FoV"): [tx, ty, tz, qx, qy, qz, qw,
// fov_h, fov_w]. The translation and quaternion give the world-to-camera
// extrinsic [R | t] (OpenCV axes: x right, y down, z forward); the fields
// of view give a pinhole intrinsic with the principal point at the image
// centre. Upstream: utils/pose_enc.py, utils/rotation.py, demo.py
// postprocess() (camera-to-world output) and GCTBase._unproject_depth_to_world.
#pragma once

#include <array>
#include <cstdint>

namespace lingbot {

using Mat3 = std::array<std::array<double, 3>, 3>;
using Mat34 = std::array<std::array<double, 4>, 3>;

struct Camera {
  Mat34 world_to_camera{};
  Mat34 camera_to_world{};
  Mat3 intrinsic{};
};

Mat3 quaternion_to_rotation(const double q_xyzw[4]);
// The inverse, as upstream's mat_to_quat (utils/rotation.py): of the four
// candidate quaternions the best-conditioned one, with w >= 0; x, y, z, w.
std::array<double, 4> quaternion_from_rotation(const Mat3& m);
Camera decode_pose(const float pose_enc[9], int height, int width);

// Pixel (x, y) with depth d -> world point, as upstream: K^-1 [x, y, 1] d,
// then camera-to-world (pixel coordinates are integer indices, no +0.5).
void unproject_depth(const Camera& camera, const float* depth, int height, int width, float* points_xyz);

}  // namespace lingbot
