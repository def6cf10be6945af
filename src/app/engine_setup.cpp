#include "app/engine_setup.h"

#include "core/log.h"

#ifdef LINGBOT_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace lingbot {

void add_engine_options(CLI::App& cmd, EngineArgs& a) {
  cmd.add_option("--config", a.config, "Model config JSON (default: the official architecture)");
  cmd.add_option("--device", a.device, "cpu, cuda or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd.add_option("--kv-cache", a.kv_cache, "KV cache layout: paged or dense")->check(CLI::IsMember({"paged", "dense"}));
  cmd.add_option("--num-scale-frames", a.num_scale_frames,
                 "Frames processed together at the start, also kept in the KV cache (default: config, 8)");
  cmd.add_option("--kv-window", a.kv_window, "Sliding window of the KV cache in frames (default: config, 64)");
  cmd.add_option("--keyframe-interval", a.keyframe_interval,
                 "Keep every N-th frame after the scale frames in the KV cache (1: every frame)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--camera-iterations", a.camera_iterations, "Camera head refinement iterations (default: config, 4)");
  cmd.add_option("--threads", a.threads, "CPU threads (default: all cores)");
  cmd.add_option("--pipeline-depth", a.pipeline_depth,
                 "2: run a frame's heads beside the next frame's aggregator and read its results back while the "
                 "frame after runs (default; results two frames later); 1: only the read-back; 0: wait for each frame")
      ->check(CLI::Range(0, 2));
  cmd.add_flag("--kv-stats", a.kv_stats, "Log KV cache occupancy after every frame");
}

std::unique_ptr<Backend> make_backend(const EngineArgs& a) {
  std::string device = a.device;
  if (device == "auto") {
#ifdef LINGBOT_WITH_CUDA
    device = cuda::device_available() ? "cuda" : "cpu";
#else
    device = "cpu";
#endif
  }
  if (device == "cuda") {
#ifdef LINGBOT_WITH_CUDA
    return cuda::make_cuda_backend();
#else
    fail("--device cuda: this build of lingbot-map has no CUDA backend (configure with -DLINGBOT_CUDA=ON)");
#endif
  }
  return make_cpu_backend(a.threads);
}

ModelConfig load_config(const EngineArgs& a) {
  return a.config.empty() ? ModelConfig::official() : ModelConfig::from_file(a.config);
}

StreamOptions stream_options(const EngineArgs& a, const ModelConfig& config) {
  StreamOptions o = StreamOptions::from_config(config);
  // As upstream demo.py: --num_scale_frames sets both the scale phase and
  // the KV cache's pinned scale frames.
  if (a.num_scale_frames >= 0) {
    LB_CHECK(a.num_scale_frames >= 1, "--num-scale-frames must be >= 1, got {}", a.num_scale_frames);
    o.num_scale_frames = a.num_scale_frames;
    o.cache.scale_frames = a.num_scale_frames;
  }
  if (a.kv_window >= 0) {
    LB_CHECK(a.kv_window >= 1, "--kv-window must be >= 1, got {}", a.kv_window);
    o.cache.sliding_window = a.kv_window;
  }
  if (a.camera_iterations >= 0) {
    LB_CHECK(a.camera_iterations >= 1, "--camera-iterations must be >= 1, got {}", a.camera_iterations);
    o.camera_iterations = a.camera_iterations;
  }
  o.keyframe_interval = a.keyframe_interval;
  o.pipeline_depth = a.pipeline_depth;
  o.cache_layout = a.kv_cache == "dense" ? kv::Layout::Dense : kv::Layout::Paged;
  return o;
}

}  // namespace lingbot
