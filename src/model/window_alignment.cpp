#include "model/window_alignment.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace lingbot {

namespace {

using Vec3 = std::array<double, 3>;

Mat3 multiply(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) c[i][j] += a[i][k] * b[k][j];
  return c;
}

Mat3 transpose(const Mat3& a) {
  Mat3 t{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) t[i][j] = a[j][i];
  return t;
}

Vec3 rotate(const Mat3& a, const Vec3& v) {
  Vec3 r{};
  for (int i = 0; i < 3; ++i) r[i] = a[i][0] * v[0] + a[i][1] * v[1] + a[i][2] * v[2];
  return r;
}

Mat3 rotation_of(const std::array<float, 9>& pe) {
  const double q[4] = {pe[3], pe[4], pe[5], pe[6]};
  return quaternion_to_rotation(q);
}

Vec3 translation_of(const std::array<float, 9>& pe) { return {pe[0], pe[1], pe[2]}; }

// Camera centre of a world-to-camera pose encoding: -R^T t.
Vec3 centre_of(const std::array<float, 9>& pe) {
  const Vec3 c = rotate(transpose(rotation_of(pe)), translation_of(pe));
  return {-c[0], -c[1], -c[2]};
}

// Median of earlier / later depth over the given frames' pixels, as
// upstream's _depth_ratio_scale: ratios in float, pixels where either depth
// is not finite or the later one is within float epsilon of 0 left out, the
// lower of the two middle values for an even count (torch.median), 1 when
// no pixel is left, clamped to [1e-3, 1e3].
double depth_ratio_scale(std::span<const AlignmentFrame> earlier, std::span<const AlignmentFrame> later,
                         const std::vector<size_t>& frames, int64_t pixels) {
  std::vector<float> ratios;
  ratios.reserve(frames.size() * static_cast<size_t>(pixels));
  for (size_t f : frames) {
    const float* a = earlier[f].depth;
    const float* b = later[f].depth;
    LB_CHECK(a != nullptr && b != nullptr, "windowed mode needs depth maps to align windows");
    for (int64_t p = 0; p < pixels; ++p) {
      if (std::isfinite(a[p]) && std::isfinite(b[p]) && std::fabs(b[p]) > std::numeric_limits<float>::epsilon())
        ratios.push_back(a[p] / b[p]);
    }
  }
  if (ratios.empty()) return 1.0;
  const auto middle = ratios.begin() + static_cast<std::ptrdiff_t>((ratios.size() - 1) / 2);
  std::nth_element(ratios.begin(), middle, ratios.end());
  return std::clamp(static_cast<double>(*middle), 1e-3, 1e3);
}

}  // namespace

Similarity align_windows(WindowAlign method, std::span<const AlignmentFrame> earlier,
                         std::span<const AlignmentFrame> later, int64_t pixels) {
  LB_CHECK(earlier.size() == later.size() && !earlier.empty(), "window alignment: {} and {} shared frames",
           earlier.size(), later.size());
  // Shared frames that are keyframes in both windows; the anchor is the last.
  std::vector<size_t> paired;
  for (size_t f = 0; f < earlier.size(); ++f)
    if (earlier[f].keyframe && later[f].keyframe) paired.push_back(f);
  if (paired.empty()) paired.push_back(0);
  const size_t anchor = paired.back();

  Similarity sim;
  sim.scale = depth_ratio_scale(earlier, later, paired, pixels);
  const std::array<float, 9>& a = earlier[anchor].pose_enc;
  const std::array<float, 9>& b = later[anchor].pose_enc;
  if (method == WindowAlign::Upstream) {
    // pose_enc read as (camera centre, camera-to-world quaternion).
    sim.rotation = multiply(rotation_of(a), transpose(rotation_of(b)));
    const Vec3 rb = rotate(sim.rotation, translation_of(b));
    for (int i = 0; i < 3; ++i) sim.translation[i] = a[i] - sim.scale * rb[i];
  } else {
    // Camera-to-world rotations are R^T: R = Ra^T (Rb^T)^T = Ra^T Rb.
    sim.rotation = multiply(transpose(rotation_of(a)), rotation_of(b));
    for (size_t f : paired) {
      const Vec3 ca = centre_of(earlier[f].pose_enc);
      const Vec3 rb = rotate(sim.rotation, centre_of(later[f].pose_enc));
      for (int i = 0; i < 3; ++i) sim.translation[i] += (ca[i] - sim.scale * rb[i]) / static_cast<double>(paired.size());
    }
  }
  return sim;
}

std::array<float, 9> align_pose(WindowAlign method, const Similarity& sim, const std::array<float, 9>& pe) {
  Mat3 rotation;  // what goes into the quaternion
  Vec3 translation;
  if (method == WindowAlign::Upstream) {
    rotation = multiply(sim.rotation, rotation_of(pe));
    const Vec3 r = rotate(sim.rotation, translation_of(pe));
    for (int i = 0; i < 3; ++i) translation[i] = sim.scale * r[i] + sim.translation[i];
  } else {
    // Camera-to-world R Rc = R R_w^T, so world-to-camera R_w R^T; the centre
    // moves as a point, s R C + t, and t_w = -R_w' C'.
    rotation = multiply(rotation_of(pe), transpose(sim.rotation));
    const Vec3 r = rotate(sim.rotation, centre_of(pe));
    Vec3 centre;
    for (int i = 0; i < 3; ++i) centre[i] = sim.scale * r[i] + sim.translation[i];
    const Vec3 t = rotate(rotation, centre);
    for (int i = 0; i < 3; ++i) translation[i] = -t[i];
  }
  const std::array<double, 4> q = quaternion_from_rotation(rotation);
  std::array<float, 9> out = pe;
  for (int i = 0; i < 3; ++i) out[static_cast<size_t>(i)] = static_cast<float>(translation[i]);
  for (int i = 0; i < 4; ++i) out[static_cast<size_t>(3 + i)] = static_cast<float>(q[i]);
  return out;
}

}  // namespace lingbot
