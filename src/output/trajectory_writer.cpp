#include "output/trajectory_writer.h"

#include "core/error.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace lingbot::io {

std::array<double, 4> rotation_to_quaternion(const std::array<std::array<double, 4>, 3>& m) {
  // Shepperd's method: pivot on the largest of w, x, y, z for stability.
  const double trace = m[0][0] + m[1][1] + m[2][2];
  double x, y, z, w;
  if (trace > 0) {
    const double s = 2.0 * std::sqrt(trace + 1.0);
    w = 0.25 * s;
    x = (m[2][1] - m[1][2]) / s;
    y = (m[0][2] - m[2][0]) / s;
    z = (m[1][0] - m[0][1]) / s;
  } else if (m[0][0] > m[1][1] && m[0][0] > m[2][2]) {
    const double s = 2.0 * std::sqrt(1.0 + m[0][0] - m[1][1] - m[2][2]);
    w = (m[2][1] - m[1][2]) / s;
    x = 0.25 * s;
    y = (m[0][1] + m[1][0]) / s;
    z = (m[0][2] + m[2][0]) / s;
  } else if (m[1][1] > m[2][2]) {
    const double s = 2.0 * std::sqrt(1.0 + m[1][1] - m[0][0] - m[2][2]);
    w = (m[0][2] - m[2][0]) / s;
    x = (m[0][1] + m[1][0]) / s;
    y = 0.25 * s;
    z = (m[1][2] + m[2][1]) / s;
  } else {
    const double s = 2.0 * std::sqrt(1.0 + m[2][2] - m[0][0] - m[1][1]);
    w = (m[1][0] - m[0][1]) / s;
    x = (m[0][2] + m[2][0]) / s;
    y = (m[1][2] + m[2][1]) / s;
    z = 0.25 * s;
  }
  const double n = std::sqrt(x * x + y * y + z * z + w * w);
  const double sign = w < 0 ? -1.0 : 1.0;
  return {sign * x / n, sign * y / n, sign * z / n, sign * w / n};
}

TumTrajectoryWriter::TumTrajectoryWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) fail("{}: cannot create: {}", path, std::strerror(errno));
  std::fprintf(file_, "# timestamp tx ty tz qx qy qz qw (camera-to-world, TUM RGB-D format)\n");
}

TumTrajectoryWriter::~TumTrajectoryWriter() {
  if (file_) std::fclose(file_);
}

void TumTrajectoryWriter::add(double t, const std::array<std::array<double, 4>, 3>& m) {
  for (const auto& row : m)
    for (const double v : row)
      if (!std::isfinite(v)) {
        ++skipped_;
        return;
      }
  const auto q = rotation_to_quaternion(m);
  std::fprintf(file_, "%.6f %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", t, m[0][3], m[1][3], m[2][3], q[0], q[1], q[2],
               q[3]);
}

void TumTrajectoryWriter::close() {
  if (!file_) return;
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) fail("{}: cannot finish writing: {}", path_, std::strerror(errno));
}

}  // namespace lingbot::io
