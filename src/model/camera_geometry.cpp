#include "model/camera_geometry.h"

#include <algorithm>
#include <cmath>

namespace lingbot {

Mat3 quaternion_to_rotation(const double q[4]) {
  const double i = q[0], j = q[1], k = q[2], r = q[3];
  const double two_s = 2.0 / (i * i + j * j + k * k + r * r);
  Mat3 m;
  m[0] = {1 - two_s * (j * j + k * k), two_s * (i * j - k * r), two_s * (i * k + j * r)};
  m[1] = {two_s * (i * j + k * r), 1 - two_s * (i * i + k * k), two_s * (j * k - i * r)};
  m[2] = {two_s * (i * k - j * r), two_s * (j * k + i * r), 1 - two_s * (i * i + j * j)};
  return m;
}

std::array<double, 4> quaternion_from_rotation(const Mat3& m) {
  const double m00 = m[0][0], m01 = m[0][1], m02 = m[0][2], m10 = m[1][0], m11 = m[1][1], m12 = m[1][2],
               m20 = m[2][0], m21 = m[2][1], m22 = m[2][2];
  // |r|, |i|, |j|, |k| times 2, each from the diagonal.
  const std::array<double, 4> q_abs = {
      std::sqrt(std::max(0.0, 1.0 + m00 + m11 + m22)), std::sqrt(std::max(0.0, 1.0 + m00 - m11 - m22)),
      std::sqrt(std::max(0.0, 1.0 - m00 + m11 - m22)), std::sqrt(std::max(0.0, 1.0 - m00 - m11 + m22))};
  // Candidate c is the quaternion (r, i, j, k) times 2 q_abs[c]; the one
  // with the largest q_abs divides best (argmax takes the first of equals).
  const std::array<std::array<double, 4>, 4> by_rijk = {{
      {q_abs[0] * q_abs[0], m21 - m12, m02 - m20, m10 - m01},
      {m21 - m12, q_abs[1] * q_abs[1], m10 + m01, m02 + m20},
      {m02 - m20, m10 + m01, q_abs[2] * q_abs[2], m12 + m21},
      {m10 - m01, m20 + m02, m21 + m12, q_abs[3] * q_abs[3]},
  }};
  const size_t c = static_cast<size_t>(std::max_element(q_abs.begin(), q_abs.end()) - q_abs.begin());
  const double denom = 2.0 * std::max(q_abs[c], 0.1);
  std::array<double, 4> xyzw = {by_rijk[c][1] / denom, by_rijk[c][2] / denom, by_rijk[c][3] / denom,
                                by_rijk[c][0] / denom};
  if (xyzw[3] < 0)
    for (double& v : xyzw) v = -v;
  return xyzw;
}

Camera decode_pose(const float pe[9], int height, int width) {
  Camera cam;
  const double q[4] = {pe[3], pe[4], pe[5], pe[6]};
  const Mat3 R = quaternion_to_rotation(q);
  const double t[3] = {pe[0], pe[1], pe[2]};
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      cam.world_to_camera[a][b] = R[a][b];
      cam.camera_to_world[a][b] = R[b][a];  // R^T
    }
    cam.world_to_camera[a][3] = t[a];
  }
  for (int a = 0; a < 3; ++a)  // -R^T t
    cam.camera_to_world[a][3] = -(R[0][a] * t[0] + R[1][a] * t[1] + R[2][a] * t[2]);
  const double fy = (height / 2.0) / std::tan(pe[7] / 2.0);
  const double fx = (width / 2.0) / std::tan(pe[8] / 2.0);
  cam.intrinsic = {{{fx, 0, width / 2.0}, {0, fy, height / 2.0}, {0, 0, 1}}};
  return cam;
}

void unproject_depth(const Camera& cam, const float* depth, int height, int width, float* out) {
  const double fx = cam.intrinsic[0][0], fy = cam.intrinsic[1][1];
  const double cx = cam.intrinsic[0][2], cy = cam.intrinsic[1][2];
  const Mat34& m = cam.camera_to_world;
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(height) * width >= 16384)
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const double d = depth[static_cast<int64_t>(y) * width + x];
      const double cxp = (x - cx) / fx * d, cyp = (y - cy) / fy * d, czp = d;
      float* p = out + (static_cast<int64_t>(y) * width + x) * 3;
      for (int a = 0; a < 3; ++a)
        p[a] = static_cast<float>(m[a][0] * cxp + m[a][1] * cyp + m[a][2] * czp + m[a][3]);
    }
  }
}

}  // namespace lingbot
