#include "output/exporters.h"

#include "core/error.h"
#include "core/log.h"
#include "output/stream_exporter.h"

#include <algorithm>
#include <chrono>

namespace lingbot::io {

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
  // The saved frames through the streaming exporter `run --export` uses, so both write the same files.
  StreamingExporter exporter(o, p.height, p.width);
  const int64_t plane = int64_t{p.height} * p.width;
  for (int f = 0; f < p.frames; ++f)
    exporter.add({p.frame_names[static_cast<size_t>(f)], p.extrinsic.f32() + 12 * f, p.intrinsic.f32() + 9 * f,
                  p.depth.f32() + plane * f, p.depth_conf.f32() + plane * f, p.world_points.f32() + 3 * plane * f,
                  p.images.f32() + 3 * plane * f});
  ExportSummary summary = exporter.finish();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace lingbot::io
