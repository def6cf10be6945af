// Depth maps as 16-bit PNGs (millimetres of the model's scale: value / 1000
// is the depth in the units of world_points), confidence as 8-bit PNGs, and
// depth_scale.json saying so.
//
//   depth:      round(depth * 1000); 0 where the depth is not finite or <= 0;
//               65535 where it exceeds 65.535 (clamped, so still "far")
//   confidence: round(255 * (1 - 1 / conf)); the model's confidence is
//               1 + exp(x) >= 1, so this is monotonic and conf = 1 / (1 - v / 255)
#pragma once

#include "output/predictions.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lingbot::io {

constexpr double kDepthUnitsPerWorldUnit = 1000.0;

uint16_t depth_to_png16(float depth);
uint8_t confidence_to_png8(float confidence);

// DIR/depth/NAME.png, DIR/depth_conf/NAME.png per frame, DIR/depth_scale.json.
void write_depth_images(const Predictions& p, const std::vector<std::string>& frame_names, const std::string& dir);

}  // namespace lingbot::io
