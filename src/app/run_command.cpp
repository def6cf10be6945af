// `lingbot-map run`: reconstruct a folder of frames, a video or a pipe of raw frames.
//
// Frames are decoded and preprocessed one at a time and streamed through the
// model; per-frame outputs go straight to temporary files, so memory does
// not grow with the number of frames. At the end --out holds
//   predictions.npz  pose_enc [S,9], depth [S,H,W,1], depth_conf [S,H,W],
//                    world_points [S,H,W,3], extrinsic [S,3,4] (camera-to-world),
//                    intrinsic [S,3,3], images [S,3,H,W] (upstream demo.py's keys),
//                    frames [S] (the input names, NumPy unicode)
//   trajectory.txt   camera-to-world poses, TUM format
//   points.ply       coloured points whose confidence exceeds --conf-threshold
//   manifest.json    which run wrote which files
// and, with --export F[,F...], what `export --format F` would write from
// that npz, written as the frames stream (run_outputs.h, stream_exporter.h)
// written as a transaction (run_outputs.h); a signal stops the run after the
// frame in flight with valid outputs for the frames done (interrupt.h).
#include "app/commands.h"
#include "app/flag_checks.h"
#include "app/engine_setup.h"
#include "app/live_view.h"
#include "app/process_stats.h"
#include "app/progress.h"
#include "app/interrupt.h"
#include "app/run_outputs.h"
#include "core/log.h"
#include "core/profiler.h"
#include "checkpoint/checkpoint.h"
#include "output/exporters.h"
#include "output/exr_writer.h"
#include "output/npz_writer.h"
#include "output/point_cloud_writer.h"
#include "image/preprocess.h"
#include "output/trajectory_writer.h"
#include "model/windowed_stream.h"
#include "video/frame_source.h"

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

namespace lingbot {

void add_run_command(CLI::App& app, RunArgs& a) {
  CLI::App* cmd =
      app.add_subcommand("run", "Reconstruct a folder of images or a video: cameras, depth and a point cloud");
  cmd->add_option("--model", a.model, "Checkpoint (.pt or .safetensors)");
  CLI::Option* images = cmd->add_option("--images", a.images, "Folder of .png / .jpg frames, in name order");
  CLI::Option* video =
      cmd->add_option("--video", a.video,
                      "Video file (anything FFmpeg decodes), a camera (/dev/video0), or - for raw frames on stdin");
  images->excludes(video);
  cmd->add_option("--fps", a.fps, "Sample a video to about this many frames per second (as demo.py; default 10)")
      ->check(at_least(1));
  cmd->add_flag("--rotate-cw90", a.rotate_cw90, "Turn video frames a quarter clockwise (after the stream's own rotation)");
  cmd->add_option("--input-format", a.input_format,
                  "With --video -: rgb24 (raw frames on stdin); otherwise an FFmpeg input format, e.g. v4l2");
  cmd->add_option("--input-size", a.input_size, "With --video -: the size WIDTHxHEIGHT of the raw frames");
  cmd->add_option("--emit", a.emit,
                  "jsonl: print one JSON line per finished frame on stdout (index, name, timestamp, "
                  "camera_to_world 3x4, intrinsic 3x3), as results arrive")
      ->check(CLI::IsMember({"jsonl"}));
  cmd->add_option("--out", a.out, "Output folder (created if missing)");
  cmd->add_option("--conf-threshold", a.conf_threshold, "Minimum depth confidence of points written to points.ply (and --export's point clouds)");
  cmd->add_option("--first-k", a.first_k, "Use only the first K frames (of a video: after --fps sampling), before --stride, as demo.py");
  cmd->add_option("--stride", a.stride, "Use every N-th of the frames --first-k leaves")
      ->check(at_least(1));
  cmd->add_option("--sort", a.sort,
                  "Frame order in --images: natural (frame_2 before frame_10), name (plain byte order, as "
                  "upstream) or mtime (oldest first)")
      ->check(CLI::IsMember({"natural", "name", "mtime"}));
  cmd->add_option("--export", a.export_formats,
                  "Also write these formats into --out as frames stream, as `export` would: colmap, nerfstudio, "
                  "glb, depth, ply (comma-separated)");
  cmd->add_flag("--depth-exr", a.depth_exr, "With --export depth: also OpenEXR float depth (builds with OpenEXR)");
  // --export's point selection, as export's flags (src/app/export_command.cpp).
  cmd->add_option("--conf-percentile", a.conf_percentile,
                  "--export: keep points at or above this percentile (0-100) of confidence instead (held to the end)")
      ->check(between(0, 100));
  cmd->add_option("--voxel-size", a.voxel_size, "--export: one point per voxel of this size, in world units (0: off)")
      ->check(at_least(0));
  cmd->add_option("--downsample", a.downsample, "--export: points from every N-th pixel in x and y")
      ->check(at_least(1));
  cmd->add_option("--max-points", a.max_points, "--export: at most this many points, taken evenly (0: no limit)")
      ->check(at_least(0));
  cmd->add_option("--frames", a.export_frames, "--export: points from frames A:B only (half-open, from 0)");
  CLI::Option* sky = cmd->add_option("--sky-masks", a.sky_masks,
                                     "Precomputed sky masks (upstream's --sky_mask_dir; without DIR: "
                                     "<images>_sky_masks): sky gets confidence 0 in points.ply and --export")
                         ->expected(0, 1);
  add_viewer_options(*cmd, a.viewer, true);
  add_engine_options(*cmd, a.engine,
                     {OptionGroup::Device, OptionGroup::Stream, OptionGroup::Preprocess, OptionGroup::Cuda});
  // demo.py picks a keyframe interval for long inputs unless one was given.
  const CLI::Option* keyframe_interval = cmd->get_option("--keyframe-interval");
  cmd->parse_complete_callback([&a, keyframe_interval, sky] {
    a.keyframe_interval_given = keyframe_interval->count() > 0;
    a.sky_masks_given = sky->count() > 0;
  });
}

namespace {

// --out, with any missing parents, made and checked for writing before the
// model loads: a typo in the folder must not cost a model load and a run.
void make_output_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status)) {
    LB_CHECK(fs::is_directory(status), "--out {}: exists and is not a folder", dir);
  } else {
    fs::create_directories(dir, ec);
    LB_CHECK(!ec, "--out {}: cannot create the folder: {}", dir, ec.message());
  }
  LB_CHECK(access(dir.c_str(), W_OK | X_OK) == 0, "--out {}: cannot write there: {}", dir, std::strerror(errno));
}

// --emit jsonl: a frame's camera as one line of JSON, for a process reading
// our stdout while the run goes on.
std::string frame_json_line(const FrameResult& r, const video::Frame& frame) {
  nlohmann::ordered_json pose = nlohmann::ordered_json::array(), intrinsic = nlohmann::ordered_json::array();
  for (int i = 0; i < 3; ++i) {
    pose.push_back({r.camera.camera_to_world[i][0], r.camera.camera_to_world[i][1], r.camera.camera_to_world[i][2],
                    r.camera.camera_to_world[i][3]});
    intrinsic.push_back({r.camera.intrinsic[i][0], r.camera.intrinsic[i][1], r.camera.intrinsic[i][2]});
  }
  const nlohmann::ordered_json line = {{"index", r.index},
                                       {"name", frame.name},
                                       {"timestamp", frame.timestamp},
                                       {"camera_to_world", pose},
                                       {"intrinsic", intrinsic}};
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

// The name predictions.npz records for a frame: the input file's name; a
// video's frames are NNNNNN, as upstream demo.py extracts them
// (<video>_frames/NNNNNN.jpg), which is also how its sky masks are named.
std::string frame_name(const video::Frame& frame, bool from_folder) {
  if (from_folder) return std::filesystem::path(frame.name).filename().string();
  return fmt::format("{:06d}", frame.index);
}

// The input names of the frames an --images run will use (after --first-k
// and --stride), in order; none for a video, whose frames are NNNNNN.
std::vector<std::string> selected_image_names(const RunArgs& a) {
  std::vector<std::string> names;
  if (a.images.empty()) return names;
  video::FrameSelector selector(1, a.stride, a.first_k);
  const std::vector<std::string> paths = io::list_images(a.images, io::parse_frame_order(a.sort));
  for (size_t i = 0; i < paths.size() && !selector.done(); ++i)
    if (selector.keep(static_cast<int64_t>(i))) names.push_back(std::filesystem::path(paths[i]).filename().string());
  return names;
}

// --sky-masks without a folder: upstream's default, beside the input.
std::string default_sky_mask_dir(const RunArgs& a) {
  namespace fs = std::filesystem;
  if (!a.images.empty()) {
    std::string dir = a.images;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir + "_sky_masks";
  }
  LB_CHECK(a.video != "-", "--sky-masks: give the folder (frames from stdin have no default)");
  const fs::path video(a.video);
  return (video.parent_path() / (video.stem().string() + "_frames_sky_masks")).string();
}

// Windowed mode's per-window alignment, as upstream's chunk_scales [W] and
// chunk_transforms [W, 4, 4] ([s R | t] without s: R and t, bottom row 0 0 0 1).
std::vector<io::NpzMember> window_alignments(const std::vector<Similarity>& windows) {
  const int64_t n = static_cast<int64_t>(windows.size());
  Tensor scales = Tensor::empty({n}), transforms = Tensor::empty({n, 4, 4});
  for (int64_t w = 0; w < n; ++w) {
    const Similarity& s = windows[static_cast<size_t>(w)];
    scales.f32()[w] = static_cast<float>(s.scale);
    float* T = transforms.f32() + w * 16;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) T[i * 4 + j] = static_cast<float>(s.rotation[i][j]);
      T[i * 4 + 3] = static_cast<float>(s.translation[i]);
    }
    T[12] = T[13] = T[14] = 0.0f;
    T[15] = 1.0f;
  }
  return {{"chunk_scales", nullptr, io::npy_file(scales)}, {"chunk_transforms", nullptr, io::npy_file(transforms)}};
}

// Upstream demo.py keeps every ceil(N / 320)-th frame in the KV cache when
// a streaming run of N > 320 frames was given no --keyframe-interval (a
// windowed run keeps 1).
int automatic_keyframe_interval(int64_t frames) {
  constexpr int64_t kFramesAtFullRate = 320;
  return frames > kFramesAtFullRate ? static_cast<int>((frames + kFramesAtFullRate - 1) / kFramesAtFullRate) : 1;
}

// In streaming mode every frame that leaves the KV window keeps its special
// tokens (upstream's semantics), so attention reads more keys with every
// frame; once those are a quarter of what it reads, say so, with what to do.
void warn_when_specials_pile_up(const FrameStream& model, int frame, bool& warned) {
  if (warned || frame % 64 != 0) return;
  const kv::CacheStats stats = model.cache_stats();
  if (stats.visible_tokens <= 0 || stats.special_tokens_retained * 4 < stats.visible_tokens) return;
  warned = true;
  log_info("frame {}: {} special tokens of {} evicted frames are kept (upstream's semantics), {:.0f}% of the {} "
           "keys attention reads; memory and time per frame keep growing with the video. For long videos use "
           "--keyframe-interval N, --mode windowed or kv_cache_camera_only (README: long videos)",
           frame, stats.special_tokens_retained, stats.frames_evicted,
           100.0 * stats.special_tokens_retained / stats.visible_tokens, stats.visible_tokens);
}

}  // namespace

int run_run(const RunArgs& a) {
  LB_CHECK(!a.model.empty(), "--model is required: {}", kCheckpointHelp);
  LB_CHECK(!a.images.empty() || !a.video.empty(), "give --images FOLDER or --video FILE");
  std::optional<io::ExportOptions> exports;
  if (!a.export_formats.empty()) {  // fail before the run, not after it
    exports = run_export_options(a);
    LB_CHECK(a.engine.options.dense, "--export needs the depth and points that --no-dense leaves out");
    if (exports->depth_exr) io::require_exr("--depth-exr");
  }
  LB_CHECK(!a.depth_exr || exports, "--depth-exr: only with --export depth");
  LB_CHECK(exports || (a.conf_percentile < 0 && a.voxel_size == 0 && a.downsample == 1 && a.max_points == 0 &&
                       a.export_frames.empty()),
           "--conf-percentile, --voxel-size, --downsample, --max-points, --frames: only with --export (they pick "
           "its points; points.ply keeps --conf-threshold alone)");
  const std::string sky_masks = !a.sky_masks_given ? std::string() : a.sky_masks.empty() ? default_sky_mask_dir(a) : a.sky_masks;
  if (!sky_masks.empty()) {
    LB_CHECK(a.engine.options.dense, "--sky-masks needs the depth confidence that --no-dense leaves out");
    // A missing folder or, for --images, a missing mask fails here, before the model loads.
    const io::SkyMasks masks(sky_masks);
    for (const std::string& name : selected_image_names(a)) masks.mask_path(name);
  }
  const ModelConfig config = load_config(a.engine);
  video::SourceOptions from;
  from.images = a.images;
  from.order = io::parse_frame_order(a.sort);
  from.video = a.video;
  from.input_format = a.input_format;
  from.input_size = a.input_size;
  from.preprocess = preprocess_options(a.engine.options, config);
  from.fps = a.fps;
  from.first_k = a.first_k;
  from.stride = a.stride;
  from.rotate_cw90 = a.rotate_cw90;
  std::unique_ptr<video::FrameSource> source = video::open_frame_source(from);
  const int64_t expected = source->expected_frames();
  const int H = source->height(), W = source->width();

  auto backend = make_backend(a.engine.options);
  StreamOptions options = stream_options(a.engine.options, config);
  if (a.profile) Profiler::set_enabled(true);
  if (!options.windowed && !a.keyframe_interval_given && automatic_keyframe_interval(expected) > 1) {
    options.keyframe_interval = automatic_keyframe_interval(expected);
    log_info("{} frames: keyframe interval {} (ceil({} / 320), as upstream demo.py; --keyframe-interval 1 keeps "
             "every frame)",
             expected, options.keyframe_interval, expected);
  }
  make_output_dir(a.out);
  // Before the model loads: a second run on this --out is refused at once.
  RunOutputSettings output_settings;
  output_settings.dir = a.out;
  output_settings.height = H;
  output_settings.width = W;
  output_settings.dense = options.keep_dense_outputs;
  output_settings.conf_threshold = a.conf_threshold;
  output_settings.command_line = a.command_line;
  output_settings.sky_masks = sky_masks;
  output_settings.frame_types = options.windowed;
  output_settings.exports = exports;
  if (exports) output_settings.export_names = io::export_names(selected_image_names(a));  // none for a video
  RunOutputs outputs(std::move(output_settings));
  InterruptHandlers interrupts;
  std::unique_ptr<viewer::LiveViewer> live;  // --view: pages fill in as frames finish
  if (a.viewer.enabled)
    live = open_live_viewer(a.viewer, {.width = W, .height = H, .expected_frames = static_cast<int>(expected),
                                       .initial_conf_threshold = a.conf_threshold});
  const auto t_load = std::chrono::steady_clock::now();
  const io::StateDict weights = io::load_state_dict(a.model);
  std::unique_ptr<FrameStream> model = make_frame_stream(*backend, weights, config, options);
  auto* windowed = dynamic_cast<WindowedStream*>(model.get());
  log_info("{} frames of {}x{} from {} | {} | {} KV cache, window {}, scale frames {}, keyframe interval {}{} | "
           "model loaded in {:.1f} s",
           expected >= 0 ? std::to_string(expected) : std::string("(count unknown)"), W, H, source->description(),
           backend->name(), kv::layout_name(options.cache_layout), options.cache.sliding_window,
           options.num_scale_frames, options.keyframe_interval,
           windowed ? fmt::format(" | windowed: {} frames per window, overlap {}, {} alignment",
                                  windowed->plan().window_frames, windowed->plan().overlap,
                                  options.window_align == WindowAlign::Sim3 ? "sim3" : "upstream")
                    : std::string(),
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());

  std::optional<io::SkyMasks> viewer_sky;  // --sky-masks applies to the page too
  if (live && !sky_masks.empty()) viewer_sky.emplace(sky_masks);

  // Frames are kept only until their results come back (the scale phase
  // holds num_scale_frames of them), for the images array and point colours.
  std::deque<video::Frame> held;
  int64_t first_held = 0;
  auto consume = [&](std::vector<FrameResult> results) {
    for (FrameResult& r : results) {
      const video::Frame& source_frame = held[static_cast<size_t>(r.index - first_held)];
      outputs.add(r, source_frame, frame_name(source_frame, !a.images.empty()));
      if (windowed) outputs.add_frame_type(static_cast<uint8_t>(r.role));
      if (live) {  // queues references; never waits
        viewer::FrameInput in = viewer_frame(r, source_frame);
        if (viewer_sky) mask_sky(in, *viewer_sky, frame_name(source_frame, !a.images.empty()));
        live->add_frame(std::move(in));
      }
      if (a.emit == "jsonl") {
        std::fputs(frame_json_line(r, source_frame).c_str(), stdout);
        std::fflush(stdout);
      }
    }
    // Drop frames whose results are all out.
    if (!results.empty()) {
      const int64_t done = results.back().index + 1;
      held.erase(held.begin(), held.begin() + (done - first_held));
      first_held = done;
    }
  };

  Progress progress(static_cast<int>(std::max<int64_t>(expected, 0)), "frames");
  const auto t0 = std::chrono::steady_clock::now();
  int S = 0;
  bool long_stream_warned = false;
  // A signal stops the loop between frames; the frames the model still holds are finished below.
  for (video::Frame frame; !InterruptHandlers::received() && source->next(frame); ++S) {
    held.push_back(std::move(frame));
    consume(model->push(held.back().image));
    progress.update(S + 1);
    warn_when_specials_pile_up(*model, S, long_stream_warned);
    if (a.engine.kv_stats) log_info("frame {}: {}", S, kv::format_stats(model->cache_stats()));
  }
  const int stopped_by = InterruptHandlers::received();
  if (stopped_by && S == 0) {
    log_warn("{}: stopped before the first frame; nothing written", signal_name(stopped_by));
    return 128 + stopped_by;
  }
  LB_CHECK(S > 0, "{}: no frames to reconstruct", source->description());
  const double decoder_wait = source->seconds_waited();
  source.reset();  // the decoder thread ends here
  consume(model->finish());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.done();

  const std::vector<std::string> written = outputs.finish(stopped_by ? signal_name(stopped_by) : std::string(),
                     windowed ? window_alignments(windowed->alignments()) : std::vector<io::NpzMember>{});
  std::string files;
  for (const std::string& f : written) files += (files.empty() ? "" : ", ") + f;
  log_info("{}{} frames in {:.2f} s ({:.2f} frames/s), peak RSS {:.0f} MB | {} | wrote {}: {}{}",
           stopped_by ? signal_name(stopped_by) + ": stopped after " : std::string(), outputs.frames(), seconds,
           outputs.frames() / seconds, peak_rss_bytes() / 1e6, kv::format_stats(model->cache_stats()), a.out, files,
           options.keep_dense_outputs ? fmt::format(" ({} points)", outputs.points()) : std::string());
  log_info("the model waited {:.2f} s for the {} ({:.1f}% of the run)", decoder_wait,
           a.video.empty() ? "image reader" : "decoder", 100 * decoder_wait / seconds);
  if (a.profile) std::printf("%s", Profiler::report().c_str());
  if (exports) {
    const io::ExportSummary& e = outputs.export_summary();
    log_info("--export {}: written as frames streamed into {} ({} points{}; {:.1f} ms per frame spent exporting)",
             a.export_formats, a.out, e.points,
             e.colmap_mean_reprojection_error >= 0
                 ? fmt::format(", COLMAP mean reprojection error {:.2g} px", e.colmap_mean_reprojection_error)
                 : std::string(),
             1000 * e.seconds / std::max<int64_t>(1, outputs.frames()));
  }
  if (stopped_by) return 128 + stopped_by;
  if (live) keep_serving(*live, S);
  return 0;
}

}  // namespace lingbot
