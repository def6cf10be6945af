// `lingbot-map run`: reconstruct a folder of frames.
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
#include "app/engine_setup.h"
#include "app/process_stats.h"
#include "app/progress.h"
#include "core/log.h"
#include "core/profiler.h"
#include "checkpoint/checkpoint.h"
#include "output/npz_writer.h"
#include "output/point_cloud_writer.h"
#include "image/preprocess.h"
#include "output/trajectory_writer.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <memory>

namespace lingbot {

void add_run_command(CLI::App& app, RunArgs& a) {
  CLI::App* cmd = app.add_subcommand("run", "Reconstruct a folder of images: cameras, depth and a point cloud");
  cmd->add_option("--model", a.model, "Checkpoint (.pt or .safetensors)");
  cmd->add_option("--images", a.images, "Folder of .png / .jpg frames, in name order")->required();
  cmd->add_option("--out", a.out, "Output folder (created if missing)");
  cmd->add_option("--conf-threshold", a.conf_threshold, "Minimum depth confidence of points written to points.ply");
  cmd->add_option("--first-k", a.first_k, "Use only the first K frames");
  cmd->add_option("--stride", a.stride, "Use every N-th frame")->check(CLI::PositiveNumber);
  add_engine_options(*cmd, a.engine,
                     {OptionGroup::Device, OptionGroup::Stream, OptionGroup::Preprocess, OptionGroup::Cuda});
}

namespace {

void make_dir(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    LB_CHECK(S_ISDIR(st.st_mode), "--out {}: exists and is not a folder", dir);
    return;
  }
  LB_CHECK(mkdir(dir.c_str(), 0755) == 0, "--out {}: cannot create the folder", dir);
}

// Per-frame outputs gathered into predictions.npz at the end.
struct Outputs {
  std::unique_ptr<io::ArraySpool> pose_enc, extrinsic, intrinsic, depth, depth_conf, points, images;
};

}  // namespace

int run_run(const RunArgs& a) {
  LB_CHECK(!a.model.empty(), "--model is required: {}", kCheckpointHelp);
  std::vector<std::string> paths = io::list_images(a.images);
  if (a.stride > 1 || a.first_k > 0) {
    std::vector<std::string> kept;
    for (size_t i = 0; i < paths.size(); i += static_cast<size_t>(a.stride)) kept.push_back(paths[i]);
    if (a.first_k > 0 && kept.size() > static_cast<size_t>(a.first_k)) kept.resize(static_cast<size_t>(a.first_k));
    paths = std::move(kept);
  }
  const ModelConfig config = load_config(a.engine);
  io::FrameSource source(paths, preprocess_options(a.engine.options, config));
  const int S = source.size(), H = source.output_height(), W = source.output_width();

  auto backend = make_backend(a.engine.options);
  const StreamOptions options = stream_options(a.engine.options, config);
  if (a.profile) Profiler::set_enabled(true);
  const auto t_load = std::chrono::steady_clock::now();
  const io::StateDict weights = io::load_state_dict(a.model);
  StreamingModel model(*backend, weights, config, options);
  log_info("{} frames of {}x{} from {} | {} | {} KV cache, window {}, scale frames {}, keyframe interval {} | "
           "model loaded in {:.1f} s",
           S, W, H, a.images, backend->name(), kv::layout_name(options.cache_layout), options.cache.sliding_window,
           options.num_scale_frames, options.keyframe_interval,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());

  make_dir(a.out);
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
  std::vector<Tensor> held;
  int64_t first_held = 0;
  auto consume = [&](std::vector<FrameResult> results) {
    for (FrameResult& r : results) {
      const Tensor& frame = held[static_cast<size_t>(r.index - first_held)];
      Tensor pe = Tensor::from_vector(std::vector<float>(r.pose_enc.begin(), r.pose_enc.end()), {9});
      out.pose_enc->append(pe);
      Tensor ext = Tensor::empty({3, 4}), intr = Tensor::empty({3, 3});
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) ext.f32()[i * 4 + j] = static_cast<float>(r.camera.camera_to_world[i][j]);
        for (int j = 0; j < 3; ++j) intr.f32()[i * 3 + j] = static_cast<float>(r.camera.intrinsic[i][j]);
      }
      out.extrinsic->append(ext);
      out.intrinsic->append(intr);
      trajectory.add(static_cast<double>(r.index), r.camera.camera_to_world);
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

  Progress progress(S, "frames");
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < S; ++i) {
    held.push_back(source.frame(i));
    consume(model.push(held.back()));
    progress.update(i + 1);
    if (a.engine.kv_stats) log_info("frame {}: {}", i, kv::format_stats(model.cache_stats()));
  }
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
  return 0;
}

}  // namespace lingbot
