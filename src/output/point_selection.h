// Which world points an export writes (ply, glb, colmap, nerfstudio share it),
// so every format of one export holds the same cloud.
//
// Order of the filters: frames, every N-th pixel, non-finite points (always
// dropped), confidence (a fixed threshold, or a percentile of the remaining
// confidences), voxel grid (one point per occupied voxel: the most confident,
// kept as it was rather than averaged, so it still lies exactly on the ray of
// the pixel it came from), then at most --max-points, taken evenly.
//
// PointAccumulator applies them frame by frame (`run --export` streams into
// it; select_points() feeds it a saved result's frames), with the same
// answer either way. What it holds until finish():
//   * --conf-threshold, no --max-points: the kept points only (with
//     --voxel-size: one per occupied voxel, replaced when a later point of
//     the voxel is more confident), so memory follows the cloud, not the video;
//   * --max-points: "evenly" needs the final count, so the points that pass
//     the other filters are held and thinned at the end (exact, not bounded);
//   * --conf-percentile: the cut needs every candidate's confidence, so every
//     candidate point (after frames, --downsample, non-finite) is held until
//     the end; exact, and memory grows with the video (32 bytes a point).
#pragma once

#include "output/predictions.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace lingbot::io {

struct PointSelectionOptions {
  double conf_threshold = 1.5;   // keep confidence > this (as `run` does for points.ply)
  double conf_percentile = -1;   // in [0,100]: keep confidence >= this percentile instead; < 0: off
  double voxel_size = 0;         // world units; 0: off
  int downsample = 1;            // every N-th pixel in x and in y
  int64_t max_points = 0;        // 0: no limit
  int first_frame = 0;           // frames [first_frame, end_frame)
  int end_frame = -1;            // -1: to the last
};

// "A:B", "A:", ":B" (Python-style half-open; negative counts from the end) into the options.
void parse_frame_range(const std::string& text, int frames, PointSelectionOptions& options);

struct SelectedPoint {
  float xyz[3];
  uint8_t rgb[3];
  float confidence;
  int32_t frame;
  int32_t x, y;  // the pixel it came from
};

class PointAccumulator {
 public:
  // `end_frame` < 0: no end (the stream's length need not be known).
  explicit PointAccumulator(PointSelectionOptions options);

  // Frame `frame` of H x W: world points [H*W*3], confidence [H*W] (sky
  // already 0), images [3*H*W] in [0,1] (planar RGB). Frames in order.
  void add_frame(int frame, int height, int width, const float* world_points, const float* confidence,
                 const float* images);
  // The selection, in frame / pixel order; once.
  std::vector<SelectedPoint> finish();

  int64_t held() const;  // points held now (for tests and messages)

 private:
  struct VoxelKey {
    int64_t v[3];
    bool operator==(const VoxelKey&) const = default;
  };
  struct VoxelHash {
    size_t operator()(const VoxelKey& k) const;
  };
  bool defer_confidence() const { return o_.conf_percentile >= 0; }
  void keep(const SelectedPoint& s);  // past the confidence filter

  PointSelectionOptions o_;
  std::vector<SelectedPoint> points_;                               // candidates or kept points
  std::unordered_map<VoxelKey, SelectedPoint, VoxelHash> voxels_;  // --voxel-size, streaming
  bool finished_ = false;
};

// 8-bit colour of a planar [3, plane] float image in [0,1], as every writer rounds it.
inline uint8_t color_byte(float v) {
  return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f));
}

std::vector<SelectedPoint> select_points(const Predictions& p, const PointSelectionOptions& options);

}  // namespace lingbot::io
