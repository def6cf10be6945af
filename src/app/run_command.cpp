// `lingbot-map run`: reconstruct a folder of frames, a video or a pipe of raw frames.
//
// Frames are decoded and preprocessed one at a time and streamed through the
// model; per-frame outputs go straight to temporary files, so memory does
// not grow with the number of frames. At the end --out holds
//   predictions.npz  pose_enc [S,9], depth [S,H,W,1], depth_conf [S,H,W],
//                    world_points [S,H,W,3], extrinsic [S,3,4] (camera-to-world),
//                    intrinsic [S,3,3], images [S,3,H,W] (upstream demo.py's keys)
//   trajectory.txt   camera-to-world poses, TUM format
//   points.ply       coloured points whose confidence exceeds --conf-threshold
#include "app/commands.h"
#include "app/flag_checks.h"
#include "app/engine_setup.h"
#include "app/live_view.h"
#include "app/process_stats.h"
#include "app/progress.h"
#include "core/log.h"
#include "core/profiler.h"
#include "checkpoint/checkpoint.h"
#include "output/exporters.h"
#include "output/npz_writer.h"
#include "output/point_cloud_writer.h"
#include "image/preprocess.h"
#include "output/trajectory_writer.h"
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
  cmd->add_option("--conf-threshold", a.conf_threshold, "Minimum depth confidence of points written to points.ply");
  cmd->add_option("--first-k", a.first_k, "Use only the first K frames (of a video: after --fps sampling), before --stride, as demo.py");
  cmd->add_option("--stride", a.stride, "Use every N-th of the frames --first-k leaves")
      ->check(at_least(1));
  cmd->add_option("--sort", a.sort,
                  "Frame order in --images: natural (frame_2 before frame_10), name (plain byte order, as "
                  "upstream) or mtime (oldest first)")
      ->check(CLI::IsMember({"natural", "name", "mtime"}));
  cmd->add_option("--export", a.export_formats,
                  "At the end, `export` the result: colmap, nerfstudio, glb, depth, ply (comma-separated)");
  add_viewer_options(*cmd, a.viewer, true);
  add_engine_options(*cmd, a.engine,
                     {OptionGroup::Device, OptionGroup::Stream, OptionGroup::Preprocess, OptionGroup::Cuda});
  // demo.py picks a keyframe interval for long inputs unless one was given.
  const CLI::Option* keyframe_interval = cmd->get_option("--keyframe-interval");
  cmd->parse_complete_callback([&a, keyframe_interval] { a.keyframe_interval_given = keyframe_interval->count() > 0; });
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

// Per-frame outputs gathered into predictions.npz at the end.
struct Outputs {
  std::unique_ptr<io::ArraySpool> pose_enc, extrinsic, intrinsic, depth, depth_conf, points, images;
};

// Upstream demo.py keeps every ceil(N / 320)-th frame in the KV cache when
// a streaming run of N > 320 frames was given no --keyframe-interval.
int automatic_keyframe_interval(int64_t frames) {
  constexpr int64_t kFramesAtFullRate = 320;
  return frames > kFramesAtFullRate ? static_cast<int>((frames + kFramesAtFullRate - 1) / kFramesAtFullRate) : 1;
}

}  // namespace

int run_run(const RunArgs& a) {
  LB_CHECK(!a.model.empty(), "--model is required: {}", kCheckpointHelp);
  LB_CHECK(!a.images.empty() || !a.video.empty(), "give --images FOLDER or --video FILE");
  if (!a.export_formats.empty()) {  // fail before the run, not after it
    io::parse_export_formats(a.export_formats, "--export");
    LB_CHECK(a.engine.options.dense, "--export needs the depth and points that --no-dense leaves out");
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
  if (!a.keyframe_interval_given && automatic_keyframe_interval(expected) > 1) {
    options.keyframe_interval = automatic_keyframe_interval(expected);
    log_info("{} frames: keyframe interval {} (ceil({} / 320), as upstream demo.py; --keyframe-interval 1 keeps "
             "every frame)",
             expected, options.keyframe_interval, expected);
  }
  make_output_dir(a.out);
  std::unique_ptr<viewer::LiveViewer> live;  // --view: pages fill in as frames finish
  if (a.viewer.enabled)
    live = open_live_viewer(a.viewer, {.width = W, .height = H, .expected_frames = static_cast<int>(expected),
                                       .initial_conf_threshold = a.conf_threshold});
  const auto t_load = std::chrono::steady_clock::now();
  const io::StateDict weights = io::load_state_dict(a.model);
  StreamingModel model(*backend, weights, config, options);
  log_info("{} frames of {}x{} from {} | {} | {} KV cache, window {}, scale frames {}, keyframe interval {} | "
           "model loaded in {:.1f} s",
           expected >= 0 ? std::to_string(expected) : std::string("(count unknown)"), W, H, source->description(),
           backend->name(), kv::layout_name(options.cache_layout), options.cache.sliding_window,
           options.num_scale_frames, options.keyframe_interval,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());

  const std::string tmp = a.out + "/.lingbot-";
  Outputs out;
  out.pose_enc = std::make_unique<io::ArraySpool>("pose_enc", DType::F32, Shape{9}, tmp + "pose_enc");
  out.extrinsic = std::make_unique<io::ArraySpool>("extrinsic", DType::F32, Shape{3, 4}, tmp + "extrinsic");
  out.intrinsic = std::make_unique<io::ArraySpool>("intrinsic", DType::F32, Shape{3, 3}, tmp + "intrinsic");
  std::unique_ptr<io::PlyWriter> ply;
  if (options.keep_dense_outputs) {
    out.depth = std::make_unique<io::ArraySpool>("depth", DType::F32, Shape{H, W, 1}, tmp + "depth");
    out.depth_conf = std::make_unique<io::ArraySpool>("depth_conf", DType::F32, Shape{H, W}, tmp + "depth_conf");
    out.points = std::make_unique<io::ArraySpool>("world_points", DType::F32, Shape{H, W, 3}, tmp + "world_points");
    out.images = std::make_unique<io::ArraySpool>("images", DType::F32, Shape{3, H, W}, tmp + "images");
    ply = std::make_unique<io::PlyWriter>(a.out + "/points.ply");
  }
  io::TumTrajectoryWriter trajectory(a.out + "/trajectory.txt");

  // Frames are kept only until their results come back (the scale phase
  // holds num_scale_frames of them), for the images array and point colours.
  std::deque<video::Frame> held;
  int64_t first_held = 0;
  auto consume = [&](std::vector<FrameResult> results) {
    for (FrameResult& r : results) {
      const video::Frame& source_frame = held[static_cast<size_t>(r.index - first_held)];
      const Tensor& frame = source_frame.image;
      Tensor pe = Tensor::from_vector(std::vector<float>(r.pose_enc.begin(), r.pose_enc.end()), {9});
      out.pose_enc->append(pe);
      Tensor ext = Tensor::empty({3, 4}), intr = Tensor::empty({3, 3});
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) ext.f32()[i * 4 + j] = static_cast<float>(r.camera.camera_to_world[i][j]);
        for (int j = 0; j < 3; ++j) intr.f32()[i * 3 + j] = static_cast<float>(r.camera.intrinsic[i][j]);
      }
      out.extrinsic->append(ext);
      out.intrinsic->append(intr);
      trajectory.add(source_frame.timestamp, r.camera.camera_to_world);
      if (live) live->add_frame(viewer_frame(r, source_frame));  // queues references; never waits
      if (a.emit == "jsonl") {
        std::fputs(frame_json_line(r, source_frame).c_str(), stdout);
        std::fflush(stdout);
      }
      if (ply) {
        out.depth->append(r.depth.reshape({H, W, 1}));
        out.depth_conf->append(r.depth_conf);
        out.points->append(r.world_points);
        out.images->append(frame);
        const int64_t plane = static_cast<int64_t>(H) * W;
        for (int64_t p = 0; p < plane; ++p) {
          if (!(r.depth_conf.f32()[p] > a.conf_threshold)) continue;
          const float* xyz = r.world_points.f32() + 3 * p;
          auto c = [&](int ch) {
            return static_cast<uint8_t>(std::lround(std::clamp(frame.f32()[ch * plane + p], 0.0f, 1.0f) * 255.0f));
          };
          ply->add(xyz[0], xyz[1], xyz[2], c(0), c(1), c(2));
        }
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
  for (video::Frame frame; source->next(frame); ++S) {
    held.push_back(std::move(frame));
    consume(model.push(held.back().image));
    progress.update(S + 1);
    if (a.engine.kv_stats) log_info("frame {}: {}", S, kv::format_stats(model.cache_stats()));
  }
  LB_CHECK(S > 0, "{}: no frames to reconstruct", source->description());
  source.reset();  // the decoder thread ends here
  consume(model.finish());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.done();

  io::NpzWriter npz(a.out + "/predictions.npz");
  for (auto* spool : {&out.pose_enc, &out.depth, &out.depth_conf, &out.points, &out.extrinsic, &out.intrinsic,
                      &out.images})
    if (*spool) (*spool)->copy_into(npz);
  npz.close();
  trajectory.close();
  if (ply) ply->finish();
  log_info("{} frames in {:.2f} s ({:.2f} frames/s), peak RSS {:.0f} MB | {} | wrote {}/predictions.npz, "
           "trajectory.txt{}",
           S, seconds, S / seconds, peak_rss_bytes() / 1e6, kv::format_stats(model.cache_stats()), a.out,
           ply ? fmt::format(", points.ply ({} points)", ply->points()) : std::string());
  if (a.profile) std::printf("%s", Profiler::report().c_str());
  const int status = a.export_formats.empty() ? 0 : run_export(export_after_run(a));
  if (live) keep_serving(*live, S);
  return status;
}

}  // namespace lingbot
