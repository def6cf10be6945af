#include "output/exporters.h"

#include "core/error.h"
#include "core/log.h"
#include "output/atomic_file.h"
#include "output/colmap_writer.h"
#include "output/depth_image_writer.h"
#include "output/glb_writer.h"
#include "output/nerfstudio_writer.h"
#include "output/png_writer.h"
#include "output/point_cloud_writer.h"

#include <algorithm>
#include <chrono>

namespace lingbot::io {

namespace {

bool wants(const ExportOptions& o, const char* format) {
  return std::find(o.formats.begin(), o.formats.end(), format) != o.formats.end();
}

// images/NAME.png from the npz's float images: the pixels the cameras' intrinsics refer to.
void write_frame_images(const Predictions& p, const std::string& dir) {
  make_dirs(dir);
  const int64_t plane = int64_t{p.height} * p.width;
  std::vector<uint8_t> rgb(static_cast<size_t>(plane * 3));
  for (int f = 0; f < p.frames; ++f) {
    for (int64_t i = 0; i < plane; ++i) {
      const auto c = p.color(f, i);
      std::copy(c.begin(), c.end(), rgb.begin() + 3 * i);
    }
    write_png8(dir + "/" + p.frame_names[static_cast<size_t>(f)] + ".png", rgb.data(), p.width, p.height, 3);
  }
}

}  // namespace

const std::vector<std::string>& export_format_names() {
  static const std::vector<std::string> names = {"colmap", "nerfstudio", "glb", "depth", "ply"};
  return names;
}

std::vector<std::string> parse_export_formats(const std::string& list, const std::string& option) {
  std::vector<std::string> formats;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    const auto& known = export_format_names();
    LB_CHECK(std::find(known.begin(), known.end(), name) != known.end(),
             "{} '{}': unknown format (one or more of colmap, nerfstudio, glb, depth, ply, comma-separated)", option,
             name);
    if (std::find(formats.begin(), formats.end(), name) == formats.end()) formats.push_back(name);
    start = comma + 1;
  }
  return formats;
}

ExportSummary export_predictions(const Predictions& p, const ExportOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  LB_CHECK(p.height > 0, "{}: holds cameras only (a `run --no-dense` result); nothing to export but poses",
           p.path);
  make_dirs(o.out_dir);
  ExportSummary summary;
  std::vector<SelectedPoint> points;
  const bool needs_points = wants(o, "colmap") || wants(o, "nerfstudio") || wants(o, "glb") || wants(o, "ply");
  if (needs_points) points = select_points(p, o.points);
  summary.points = static_cast<int64_t>(points.size());

  std::vector<std::string> image_files;
  for (const std::string& name : p.frame_names) image_files.push_back(name + ".png");
  if (wants(o, "colmap") || wants(o, "nerfstudio")) write_frame_images(p, o.out_dir + "/images");
  if (wants(o, "colmap")) {
    const ColmapModelStats stats =
        write_colmap_model(p, points, image_files, o.out_dir + "/sparse/0", o.colmap_text);
    summary.colmap_mean_reprojection_error = stats.mean_reprojection_error;
  }
  if (wants(o, "nerfstudio")) {
    std::vector<std::string> paths;
    for (const std::string& f : image_files) paths.push_back("images/" + f);
    write_points_ply(o.out_dir + "/sparse_pc.ply", points);
    write_nerfstudio_transforms(p, paths, "sparse_pc.ply", o.out_dir + "/transforms.json");
  }
  if (wants(o, "glb")) write_glb(p, points, o.out_dir + "/scene.glb");
  if (wants(o, "depth")) write_depth_images(p, p.frame_names, o.out_dir);
  if (wants(o, "ply")) write_points_ply(o.out_dir + "/points.ply", points);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace lingbot::io
