// Every export format behind one call, shared by `lingbot-map export` and
// `run --export`. Files land directly in `out_dir`:
//   images/NAME.png                       the saved (preprocessed) frames (colmap, nerfstudio)
//   sparse/0/{cameras,images,points3D}.bin  (.txt with text)          colmap
//   transforms.json, sparse_pc.ply                                     nerfstudio
//   scene.glb                                                          glb
//   depth/NAME.png, depth_conf/NAME.png, depth_scale.json              depth
//   depth_exr/NAME.exr                                   depth with depth_exr
//   points.ply                                                         ply
#pragma once

#include "output/point_selection.h"
#include "output/predictions.h"

#include <string>
#include <vector>

namespace lingbot::io {

struct ExportOptions {
  std::vector<std::string> formats;  // colmap, nerfstudio, glb, depth, ply
  std::string out_dir;
  bool colmap_text = false;
  bool depth_exr = false;  // depth: also depth_exr/NAME.exr (builds with OpenEXR)
  PointSelectionOptions points;
};

// The names `formats` may hold.
const std::vector<std::string>& export_format_names();
// "colmap,glb" -> {"colmap", "glb"}; an unknown name is a one-line error naming `option`.
std::vector<std::string> parse_export_formats(const std::string& list, const std::string& option = "--format");

struct ExportSummary {
  int64_t points = 0;
  double colmap_mean_reprojection_error = -1;  // -1: no colmap export
  double seconds = 0;
};

// A saved result, frame by frame through StreamingExporter (stream_exporter.h).
ExportSummary export_predictions(const Predictions& p, const ExportOptions& options);

}  // namespace lingbot::io
