// Depth maps as 16-bit PNGs (millimetres of the model's scale: value / 1000
// is the depth in the units of world_points), confidence as 8-bit PNGs, and
// depth_scale.json saying so.
//
//   depth:      round(depth * 1000); 0 where the depth is not finite or <= 0;
//               65535 where it exceeds 65.535 (clamped, so still "far")
//   confidence: round(255 * (1 - 1 / conf)); the model's confidence is
//               1 + exp(x) >= 1, so this is monotonic and conf = 1 / (1 - v / 255)
//   with depth_exr: also DIR/depth_exr/NAME.exr, the depth as 32-bit floats
//               (one channel Z, ZIP-compressed, lossless; 0 where the PNG
//               has 0), for builds with OpenEXR (exr_writer.h)
#pragma once

#include "output/predictions.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lingbot::io {

constexpr double kDepthUnitsPerWorldUnit = 1000.0;

uint16_t depth_to_png16(float depth);
uint8_t confidence_to_png8(float confidence);

// The folders the per-frame files go into.
void make_depth_dirs(const std::string& dir, bool depth_exr);
// One frame: DIR/depth/NAME.png, DIR/depth_conf/NAME.png (and
// DIR/depth_exr/NAME.exr), each renamed into place when whole. `conf` is
// sky-masked: confidence 0 (only a sky mask gives it) has no depth.
void write_depth_frame(const std::string& dir, const std::string& name, const float* depth, const float* conf,
                       int width, int height, bool depth_exr);
// DIR/depth_scale.json: how to read the files above.
void write_depth_scale(const std::string& dir, int width, int height, bool depth_exr);

}  // namespace lingbot::io
