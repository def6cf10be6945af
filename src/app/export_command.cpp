// `lingbot-map export RESULT_DIR --format F[,F...]`: a saved result
// (predictions.npz of `run --out`) in the formats other tools read. The
// writers live in src/output (exporters.h); this file is only the options.
#include "app/commands.h"
#include "app/flag_checks.h"
#include "core/error.h"
#include "core/log.h"
#include "output/exporters.h"
#include "output/exr_writer.h"
#include "output/sky_masks.h"

#include <filesystem>
#include <limits>
#include <optional>

namespace lingbot {

namespace {

// The point-selection options, shared with `run --export` through the same fields.
void add_point_options(CLI::App& cmd, ExportArgs& a) {
  cmd.add_option("--conf-threshold", a.conf_threshold, "Keep points whose depth confidence exceeds this (as run)");
  cmd.add_option("--conf-percentile", a.conf_percentile,
                 "Instead: keep points at or above this percentile (0-100) of confidence")
      ->check(between(0, 100));
  cmd.add_option("--voxel-size", a.voxel_size, "One point per voxel of this size, in world units (0: off)")
      ->check(at_least(0));
  cmd.add_option("--downsample", a.downsample, "Use every N-th pixel in x and y")->check(at_least(1));
  cmd.add_option("--max-points", a.max_points, "At most this many points, taken evenly (0: no limit)")
      ->check(at_least(0));
  cmd.add_option("--frames", a.frames, "Points from frames A:B only (half-open, Python-style)");
}

}  // namespace

void add_export_command(CLI::App& app, ExportArgs& a) {
  CLI::App* cmd = app.add_subcommand("export", "Write a saved result (run --out) as COLMAP, nerfstudio, glTF, depth PNGs");
  cmd->add_option("result_dir", a.result_dir, "A `run --out` folder holding predictions.npz")->required();
  cmd->add_option("--format", a.formats, "colmap, nerfstudio, glb, depth, ply (comma-separated)")->required();
  cmd->add_option("--out", a.out, "Output folder (default: RESULT_DIR)");
  cmd->add_flag("--text", a.text, "colmap: write the .txt model instead of .bin");
  cmd->add_flag("--depth-exr", a.depth_exr,
                "depth: also depth_exr/NAME.exr, the depth as 32-bit floats (builds with OpenEXR)");
  cmd->add_option("--sky-masks", a.sky_masks,
                  "Precomputed sky masks, one per frame named as its input (upstream's --sky_mask_dir): "
                  "sky gets confidence 0 in every format");
  add_point_options(*cmd, a);
}

namespace {

io::ExportOptions export_options(const ExportArgs& a, const io::Predictions& p) {
  io::ExportOptions o;
  o.formats = io::parse_export_formats(a.formats);
  // RESULT_DIR may name the .npz itself; the default output folder is then the one holding it.
  const std::filesystem::path result(a.result_dir);
  const std::string result_folder = std::filesystem::is_directory(result) ? a.result_dir
                                    : result.has_parent_path()            ? result.parent_path().string()
                                                                          : std::string(".");
  o.out_dir = a.out.empty() ? result_folder : a.out;
  o.colmap_text = a.text;
  o.depth_exr = a.depth_exr;
  o.points.conf_threshold = a.conf_threshold;
  o.points.conf_percentile = a.conf_percentile;
  o.points.voxel_size = a.voxel_size;
  o.points.downsample = a.downsample;
  o.points.max_points = a.max_points;
  if (!a.frames.empty()) io::parse_frame_range(a.frames, p.frames, o.points);
  return o;
}

}  // namespace

io::ExportOptions run_export_options(const RunArgs& run) {
  io::ExportOptions o;
  o.formats = io::parse_export_formats(run.export_formats, "--export");
  o.out_dir = run.out;
  o.depth_exr = run.depth_exr;
  o.points.conf_threshold = run.conf_threshold;
  o.points.conf_percentile = run.conf_percentile;
  o.points.voxel_size = run.voxel_size;
  o.points.downsample = run.downsample;
  o.points.max_points = run.max_points;
  if (!run.export_frames.empty()) {
    // Negative bounds count from the end, which a stream reaches only when it ends.
    LB_CHECK(run.export_frames.find('-') == std::string::npos,
             "--frames {}: run counts frames from 0 (the end of a stream is not known in advance); use "
             "`export --frames` for bounds from the end", run.export_frames);
    constexpr int kUnbounded = std::numeric_limits<int>::max();
    try {
      io::parse_frame_range(run.export_frames, kUnbounded, o.points);
    } catch (const std::exception&) {  // its message would name the stand-in frame count
      fail("--frames {}: expected A:B with 0 <= A < B (either side may be empty)", run.export_frames);
    }
    if (o.points.end_frame == kUnbounded) o.points.end_frame = -1;
  }
  return o;
}

io::Predictions load_predictions_masked(const std::string& result_dir, const std::string& sky_masks) {
  std::optional<io::SkyMasks> sky;
  if (!sky_masks.empty()) sky.emplace(sky_masks);  // a missing folder fails before the npz is read
  io::Predictions p = io::load_predictions(result_dir);
  if (sky) {
    const int64_t pixels = io::apply_sky_masks(*sky, p);
    log_info("--sky-masks {}: {} of {} pixels are sky (confidence 0)", sky_masks, pixels,
             int64_t{p.frames} * p.height * p.width);
  }
  return p;
}

int run_export(const ExportArgs& a) {
  io::parse_export_formats(a.formats);  // a typo fails before the (large) npz is read
  if (a.depth_exr) io::require_exr("--depth-exr");
  io::Predictions p = load_predictions_masked(a.result_dir, a.sky_masks);
  const io::ExportOptions o = export_options(a, p);
  const io::ExportSummary s = io::export_predictions(p, o);
  std::string formats;
  for (const std::string& f : o.formats) formats += (formats.empty() ? "" : ",") + f;
  log_info("exported {} frames of {}x{} as {} into {} ({} points{}) in {:.2f} s ({:.1f} ms per frame)", p.frames,
           p.width, p.height, formats, o.out_dir, s.points,
           s.colmap_mean_reprojection_error >= 0
               ? fmt::format(", COLMAP mean reprojection error {:.2g} px", s.colmap_mean_reprojection_error)
               : std::string(),
           s.seconds, 1000 * s.seconds / std::max(1, p.frames));
  return 0;
}

}  // namespace lingbot
