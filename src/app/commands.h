// The subcommands of lingbot-map: their options and entry points.
#pragma once

#include "output/exporters.h"
#include "output/predictions.h"

#include <lingbot/options.h>

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lingbot {

struct InspectArgs {
  std::string model;
  std::string config;
  bool list_all = false;
};
void add_inspect_command(CLI::App& app, InspectArgs& args);
int run_inspect(const InspectArgs& args);

// Options shared by `run` and `bench`: the engine's (one flag per row of
// LINGBOT_OPTIONS, include/lingbot/options.h, so the CLI's defaults are the
// library's), the model config and logging.
struct EngineArgs {
  std::string config;
  Options options;
  bool kv_stats = false;
};

// The browser viewer's flags (run --view, view): src/viewer, docs/viewer.md.
struct ViewerArgs {
  bool enabled = false;            // run --view
  std::string host = "127.0.0.1";  // anything else is reachable from other machines (a warning says so)
  int port = 8080;                 // 0: any free port
  int downsample = 2;              // every N-th pixel in x and y is sent
};

struct RunArgs {
  EngineArgs engine;
  std::string model;
  std::string images;
  std::string out = "lingbot_output";
  double conf_threshold = 1.5;
  int first_k = 0;
  int stride = 1;
  // Videos and pipes instead of --images (src/video, docs/video.md).
  std::string video;         // a file, a camera (/dev/video0), or "-" for raw frames on stdin
  int fps = 10;              // a video is sampled to about this rate, as upstream demo.py
  bool rotate_cw90 = false;
  std::string input_format;  // rgb24 for stdin; an FFmpeg input format otherwise
  std::string input_size;    // WxH of raw stdin frames
  bool keyframe_interval_given = false;  // else demo.py's automatic interval for long inputs
  std::string emit;          // "jsonl": one JSON line per finished frame on stdout
  std::string sort = "natural";  // frame order in --images: natural, name or mtime
  std::string export_formats;  // --export: as `export --format`, written into --out as frames stream
  bool depth_exr = false;      // --depth-exr: --export depth also writes OpenEXR float depth
  // --export's point selection past --conf-threshold: export's flags, same meaning.
  double conf_percentile = -1;
  double voxel_size = 0;
  int downsample = 1;
  int64_t max_points = 0;
  std::string export_frames;  // --frames A:B, bounds from 0 (a stream's length is known only at its end)
  std::string sky_masks;       // --sky-masks DIR (empty with sky_masks_given: upstream's default folder)
  bool sky_masks_given = false;
  std::vector<std::string> command_line;  // argv, for manifest.json
  bool profile = false;  // LINGBOT_PROFILE: print the stage times at the end
  ViewerArgs viewer;     // --view: serve the live viewer while the run goes on
};
void add_run_command(CLI::App& app, RunArgs& args);
int run_run(const RunArgs& args);

struct BenchArgs {
  EngineArgs engine;
  int frames = 24;
  int height = 378;
  int width = 504;
  int warmup = 2;
  std::string images;  // optional real frames instead of random ones
  std::string json;    // optional: write the figures here
  bool profile = false;
  int intervals = 0;   // > 0: a line per this many streamed frames (long runs: what grows)
};
void add_bench_command(CLI::App& app, BenchArgs& args);
int run_bench(const BenchArgs& args);

struct ExportArgs {
  std::string result_dir;  // a `run --out` folder (or its predictions.npz)
  std::string formats;     // comma-separated: colmap, nerfstudio, glb, depth, ply
  std::string out;         // default: result_dir
  bool text = false;       // colmap: .txt instead of .bin
  bool depth_exr = false;  // depth: also OpenEXR float depth
  double conf_threshold = 1.5;
  double conf_percentile = -1;
  double voxel_size = 0;
  int downsample = 1;
  int64_t max_points = 0;
  std::string frames;  // "A:B"
  std::string sky_masks;  // --sky-masks DIR: confidence 0 where the masks say sky
};
void add_export_command(CLI::App& app, ExportArgs& args);
int run_export(const ExportArgs& args);
// `run --export F,...`: what `export --format F,...` would write into --out
// with run's --conf-threshold and --depth-exr, streamed as frames finish.
io::ExportOptions run_export_options(const RunArgs& run);
// A saved result (`run --out` folder or its predictions.npz), with the sky
// masks of `sky_masks` (a folder, or empty for none) applied to its
// confidence; shared by `export` and `view`.
io::Predictions load_predictions_masked(const std::string& result_dir, const std::string& sky_masks);

struct ViewArgs {
  std::string result_dir;  // a `run --out` folder (or its predictions.npz)
  double conf_threshold = 1.5;
  std::string sky_masks;  // --sky-masks DIR: confidence 0 where the masks say sky
  ViewerArgs viewer;
};
void add_view_command(CLI::App& app, ViewArgs& args);
int run_view(const ViewArgs& args);

// Where to get the official weights (printed when --model is missing).
extern const char* const kCheckpointHelp;

}  // namespace lingbot
