// How a stream runs: the KV cache, the scale phase, keyframes, what is kept
// and how far results trail their frames.
//
// The defaults are the engine's (include/lingbot/options.h, the one list of
// options that the public API and the CLI share): a StreamOptions made
// without a config is what lingbot-map runs with the official model.
#pragma once

#include "kv/kv_cache.h"
#include "model/model_config.h"
#include "model/window_alignment.h"
#include "model/window_plan.h"

#include <lingbot/options.h>

#include <string_view>

namespace lingbot {

struct StreamOptions {
  kv::Layout cache_layout =
      std::string_view(option_defaults::kv_cache) == "dense" ? kv::Layout::Dense : kv::Layout::Paged;
  kv::CacheConfig cache;  // the aggregator's KV cache (defaults: the official config's)
  int num_scale_frames = 8;   // the official config's num_scale_frames
  int keyframe_interval = option_defaults::keyframe_interval;
  int camera_iterations = 4;  // the official config's camera_num_iterations
  bool keep_dense_outputs = option_defaults::dense;  // depth, confidence and points per frame
  // Frames the depth head takes in one pass in the scale phase (option
  // depth_head_batch); 0: 4 on a GPU in the default memory profile, else 1
  // (model/depth_head.h: the head's buffers scale with it, its values do not).
  int depth_head_batch = option_defaults::depth_head_batch;
  bool keep_pose_iterations = false;
  bool use_graphs = option_defaults::cuda_graphs;  // replay streaming steps as CUDA graphs where the backend can
  // How far a frame's results trail its push():
  //   0: every frame's results come from the push() that ran it;
  //   1: from the next push() (or finish()), so the read-back and the host
  //      post-processing of one frame overlap the device work of the next;
  //   2: as 1, and the heads (camera and depth) of a streaming frame run in
  //      the next frame's step, beside its encoder and aggregator, so the
  //      heads' small kernels fill the device instead of ending each step
  //      on their own; results come two pushes later.
  // The results are the same for every depth.
  int pipeline_depth = option_defaults::pipeline_depth;
  // Run on a checkpoint that also holds tensors the model does not use
  // (model/checkpoint_check.h: require_loadable); refused by default.
  bool allow_extra_tensors = option_defaults::allow_extra_tensors;
  // The low-memory profile (option memory_profile low): the scale phase's
  // multi-frame buffers are freed before the first streamed frame allocates
  // its own (waiting for the scale results to land), instead of one frame
  // later, so the two never coexist. The results do not change.
  bool low_memory = false;
  // The camera head's matrices in bfloat16 (option camera_head_weights):
  // Auto is bf16 where memory is the point (low_memory, or the CPU's bf16
  // mode), else float32 as upstream.
  enum class HeadWeights { Auto, F32, Bf16 };
  HeadWeights camera_head_weights = HeadWeights::Auto;
  // The depth head's feature maps (option depth_head_layout): channels last
  // (NHWC, faster on both backends) or first (NCHW, as upstream). The values
  // are the same up to the order of float32 sums.
  enum class MapsLayout { ChannelsLast, ChannelsFirst };
  MapsLayout depth_head_layout = MapsLayout::ChannelsLast;
  // Its maps and convolution weights in bfloat16 (option depth_head_dtype
  // bf16; channels last only) rather than float32.
  bool depth_head_bf16 = false;

  // Windowed mode (upstream inference_windowed): windows of the video, each
  // a fresh stream with its own scale phase, aligned into the first one's
  // frame (model/windowed_stream.h). Off: one stream over the whole video.
  bool windowed = false;
  WindowSettings window;
  WindowAlign window_align = WindowAlign::Upstream;

  // The settings a config file implies (the rest at their defaults).
  static StreamOptions from_config(const ModelConfig& config);

  bool operator==(const StreamOptions&) const = default;
};

}  // namespace lingbot
