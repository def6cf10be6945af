// Camera trajectories in the TUM RGB-D format: one line per frame,
//   timestamp tx ty tz qx qy qz qw
// the camera-to-world pose (camera centre and orientation in the world
// frame). Timestamps are frame indices unless the caller has real times.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lingbot::io {

class TumTrajectoryWriter {
 public:
  explicit TumTrajectoryWriter(const std::string& path);
  ~TumTrajectoryWriter();
  TumTrajectoryWriter(const TumTrajectoryWriter&) = delete;
  TumTrajectoryWriter& operator=(const TumTrajectoryWriter&) = delete;

  // camera_to_world: rows of [R | t]. A pose that is not finite is left
  // out (counted), so that every line a reader sees is a pose.
  void add(double timestamp, const std::array<std::array<double, 4>, 3>& camera_to_world);
  void close();
  int64_t skipped_non_finite() const { return skipped_; }

 private:
  std::string path_;
  FILE* file_ = nullptr;
  int64_t skipped_ = 0;
};

// Unit quaternion (x, y, z, w) of a rotation matrix, w >= 0.
std::array<double, 4> rotation_to_quaternion(const std::array<std::array<double, 4>, 3>& m);

}  // namespace lingbot::io
