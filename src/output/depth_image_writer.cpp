#include "output/depth_image_writer.h"

#include "output/atomic_file.h"
#include "output/exr_writer.h"
#include "output/png_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace lingbot::io {

uint16_t depth_to_png16(float depth) {
  if (!std::isfinite(depth) || depth <= 0) return 0;
  const double v = std::round(double{depth} * kDepthUnitsPerWorldUnit);
  return static_cast<uint16_t>(std::clamp(v, 0.0, 65535.0));
}

uint8_t confidence_to_png8(float confidence) {
  if (!std::isfinite(confidence) || confidence <= 1) return 0;
  return static_cast<uint8_t>(std::clamp(std::round(255.0 * (1.0 - 1.0 / confidence)), 0.0, 255.0));
}

void make_depth_dirs(const std::string& dir, bool depth_exr) {
  make_dirs(dir + "/depth");
  make_dirs(dir + "/depth_conf");
  if (depth_exr) make_dirs(dir + "/depth_exr");
}

void write_depth_frame(const std::string& dir, const std::string& name, const float* d, const float* c, int width,
                       int height, bool depth_exr) {
  const int64_t plane = int64_t{height} * width;
  std::vector<uint16_t> depth(static_cast<size_t>(plane));
  std::vector<uint8_t> conf(static_cast<size_t>(plane));
  for (int64_t i = 0; i < plane; ++i) {
    depth[static_cast<size_t>(i)] = c[i] == 0 ? 0 : depth_to_png16(d[i]);
    conf[static_cast<size_t>(i)] = confidence_to_png8(c[i]);
  }
  write_png16(dir + "/depth/" + name + ".png", depth.data(), width, height);
  write_png8(dir + "/depth_conf/" + name + ".png", conf.data(), width, height, 1);
  if (depth_exr) {
    std::vector<float> z(static_cast<size_t>(plane));
    for (int64_t i = 0; i < plane; ++i)
      z[static_cast<size_t>(i)] = c[i] == 0 || !std::isfinite(d[i]) || d[i] <= 0 ? 0.0f : d[i];
    write_exr_depth(dir + "/depth_exr/" + name + ".exr", z.data(), width, height);
  }
}

void write_depth_scale(const std::string& dir, int width, int height, bool depth_exr) {
  nlohmann::ordered_json scale;
  scale["depth_folder"] = "depth";
  scale["depth_encoding"] = "uint16 PNG, value = round(depth * 1000); 0 = invalid, 65535 = clamped";
  scale["depth_scale"] = 1.0 / kDepthUnitsPerWorldUnit;  // multiply a PNG value by this for depth
  scale["depth_unit"] = "millimetres of the model's scale (depth_scale * value = depth in world_points units)";
  scale["depth_is"] = "z in the camera frame (along the optical axis), not the distance along the ray";
  scale["confidence_folder"] = "depth_conf";
  scale["confidence_encoding"] = "uint8 PNG, value = round(255 * (1 - 1 / conf)); conf = 1 / (1 - value / 255)";
  if (depth_exr) {
    scale["depth_exr_folder"] = "depth_exr";
    scale["depth_exr_encoding"] = "OpenEXR, one FLOAT channel Z, depth in world_points units; 0 = invalid";
  }
  scale["width"] = width;
  scale["height"] = height;
  AtomicFile out(dir + "/depth_scale.json");
  out.write(scale.dump(2) + "\n");
  out.commit();
}

}  // namespace lingbot::io
