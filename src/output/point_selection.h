// Which world points an export writes (ply, glb, colmap, nerfstudio share it),
// so every format of one export holds the same cloud.
//
// Order of the filters: frames, every N-th pixel, non-finite points (always
// dropped), confidence (a fixed threshold, or a percentile of the remaining
// confidences), voxel grid (one point per occupied voxel: the most confident,
// kept as it was rather than averaged, so it still lies exactly on the ray of
// the pixel it came from), then at most --max-points, taken evenly.
#pragma once

#include "output/predictions.h"

#include <cstdint>
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

std::vector<SelectedPoint> select_points(const Predictions& p, const PointSelectionOptions& options);

}  // namespace lingbot::io
