#include "model/streaming_model.h"

#include "core/log.h"
#include "core/profiler.h"
#include "model/aggregator.h"
#include "model/camera_head.h"
#include "model/depth_head.h"
#include "model/weights.h"
#include "model/workspace.h"

#include <fmt/format.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>

namespace lingbot {

namespace {

MapLayout depth_head_layout_for(const StreamOptions& o) {
  return o.depth_head_layout == StreamOptions::MapsLayout::ChannelsFirst ? MapLayout::ChannelsFirst
                                                                          : MapLayout::ChannelsLast;
}

// Which parameters are kept in bfloat16 beyond the compute dtype's, and the
// layout of the depth head's convolution weights.
WeightStorage weight_storage_for(const Backend& be, const StreamOptions& o) {
  using H = StreamOptions::HeadWeights;
  const bool cpu_bf16 = be.device() == Device::CPU && be.compute_dtype() == DType::BF16;
  return {.camera_head_bf16 = o.camera_head_weights == H::Bf16 ||
                              (o.camera_head_weights == H::Auto && (o.low_memory || cpu_bf16)),
          .depth_head_channels_last = depth_head_layout_for(o) == MapLayout::ChannelsLast,
          .depth_head_bf16 = o.depth_head_bf16};
}

// The aggregator's page pool grows in small steps, so that it holds few pages
// it has not used (a chunk of four pages held up to three pages of all 24
// blocks for nothing: ~150 MB in fp8 at 378 x 504, ~570 MB in float32 on the
// CPU). On the CPU a page at a time. On the GPU cudaMalloc rounds every chunk
// up to 2 MiB, which one-page fp8 chunks (48.7 MiB) paid 1.3 MiB each for, so
// fp8 grows by two pages (0.6 MiB of rounding per chunk); bf16 keeps four,
// since its attention reads pages through one TMA map per chunk and fewer,
// larger chunks keep the maps few.
kv::CacheConfig cache_config_for(const Backend& be, kv::CacheConfig cache) {
  if (be.device() == Device::CPU) {
    cache.pool_growth_pages = 1;
  } else if (cache.dtype == kv::KvDtype::Fp8) {
    cache.pool_growth_pages = 2;
  }
  return cache;
}

// A frame whose outputs hold NaN or infinity (damaged input, or weights
// outside what the model was trained for) is named once, so that it cannot
// pass silently into the written results; the writers skip such points.
// `bad_depth`: how many of its depth values are not finite (counted where
// they are computed, so that the check costs no pass of its own).
void warn_if_not_finite(const FrameResult& r, int64_t bad_depth) {
  const bool pose_ok = std::all_of(r.pose_enc.begin(), r.pose_enc.end(), [](float x) { return std::isfinite(x); });
  if (pose_ok && bad_depth == 0) return;
  if (!pose_ok) {
    log_warn("frame {}: the predicted camera is not finite (pose_enc holds NaN or infinity)", r.index);
  } else {
    log_warn("frame {}: {} of {} depth values are not finite", r.index, bad_depth, r.depth.numel());
  }
}

// The scale phase's depth-head batch on a GPU in the default memory profile
// (StreamOptions::depth_head_batch 0): measured faster than 1 (and than 8,
// for which cuDNN picks slower full-resolution kernels), docs/PERF.md.
constexpr int kGpuDepthHeadBatch = 4;

// Gives the heap's free pages back to the system after a phase's buffers
// were freed: glibc serves allocations below its (adaptive) mmap threshold
// from the heap, and keeps what they free mapped.
void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace

StreamingModel::StreamingModel(Backend& backend, const io::StateDict& weights, const ModelConfig& config,
                               const StreamOptions& options)
    : StreamingModel(backend, StateDictWeights(weights), config, options) {}

StreamingModel::StreamingModel(Backend& backend, const WeightSource& weights, const ModelConfig& config,
                               const StreamOptions& options)
    : be_(backend),
      config_(config),
      options_(options),
      readback_(backend),
      phases_apart_(options.low_memory || backend.device() == Device::CPU),
      depth_head_batch_(options.depth_head_batch > 0                                 ? options.depth_head_batch
                        : backend.device() == Device::CUDA && !options.low_memory ? kGpuDepthHeadBatch
                                                                                   : 1) {
  LB_CHECK(options.num_scale_frames >= 1, "num_scale_frames must be >= 1, got {}", options.num_scale_frames);
  LB_CHECK(options.depth_head_batch >= 0, "depth_head_batch must be >= 0, got {}", options.depth_head_batch);
  LB_CHECK(options.keyframe_interval >= 1, "keyframe_interval must be >= 1, got {}", options.keyframe_interval);
  LB_CHECK(options.camera_iterations >= 1, "camera iterations must be >= 1, got {}", options.camera_iterations);
  LB_CHECK(options.pipeline_depth >= 0 && options.pipeline_depth <= 2, "pipeline_depth must be 0, 1 or 2, got {}",
           options.pipeline_depth);
  LB_CHECK(!options.depth_head_bf16 || depth_head_layout_for(options) == MapLayout::ChannelsLast,
           "depth_head_dtype bf16 needs depth_head_layout nhwc");
  LB_CHECK(!options.depth_head_bf16 || backend.compute_dtype() == DType::BF16,
           "depth_head_dtype bf16 needs a backend that computes in bfloat16: the GPU, or the CPU with --cpu-dtype bf16");
  kv::validate(options.cache);
  weights_ = std::make_unique<DeviceWeights>(backend, weights, config, options.allow_extra_tensors,
                                             weight_storage_for(backend, options));
  ws_ = std::make_unique<Workspace>(backend);
  aggregator_ = std::make_unique<Aggregator>(backend, *weights_, config, options.cache_layout,
                                             cache_config_for(backend, options.cache), options.num_scale_frames);
  camera_ = std::make_unique<CameraHead>(backend, *weights_, config, options.camera_iterations);
  depth_ = std::make_unique<DepthHead>(backend, *weights_, config, depth_head_layout_for(options),
                                       options.depth_head_bf16 ? DType::BF16 : DType::F32);
  graphs_ = std::make_unique<StepGraphs<StepOutputs>>(backend);
}

StreamingModel::~StreamingModel() = default;

std::vector<FrameResult> StreamingModel::push(const Tensor& frame) {
  LB_CHECK(frame.is_cpu() && frame.dtype() == DType::F32 && frame.ndim() == 3 && frame.dim(0) == 3,
           "frame {}: expected a float32 [3, H, W] image, got {}", frames_pushed_, frame.describe());
  const int p = config_.patch_size;
  LB_CHECK(frame.dim(1) % p == 0 && frame.dim(2) % p == 0 && frame.dim(1) > 0 && frame.dim(2) > 0,
           "frame {}: size {}x{} is not a multiple of the patch size {}", frames_pushed_, frame.dim(2), frame.dim(1),
           p);
  if (frames_pushed_ == 0) {
    stream_shape_ = frame.shape();
  } else {
    LB_CHECK(frame.shape() == stream_shape_, "frame {}: size {}x{} differs from the stream's {}x{} (reset first)",
             frames_pushed_, frame.dim(2), frame.dim(1), stream_shape_[2], stream_shape_[1]);
  }
  const int64_t index = frames_pushed_++;
  const size_t read_backs_before = readback_.in_flight();
  if (scale_frames_used_ == 0) {  // scale phase still filling
    // Each scale frame goes to the device as it arrives (the device is idle
    // until the last one), so the scale step starts without the copies.
    Tensor& images = ws_->get("in.images", {options_.num_scale_frames, 3, frame.dim(1), frame.dim(2)}, DType::F32);
    Tensor slot = images[static_cast<int64_t>(pending_.size())];
    be_.upload_once_into(frame, slot);
    pending_.push_back(frame);
    if (static_cast<int>(pending_.size()) < options_.num_scale_frames) return {};
    scale_frames_used_ = static_cast<int>(pending_.size());
    std::vector<Tensor> frames = std::move(pending_);
    pending_.clear();
    launch_step(frames, true, 0);
    // The scale phase's results come back with this push, whatever the
    // pipeline depth: the first streamed step waits for the scale step
    // before it starts (it frees or shrinks the scale phase's buffers), so
    // holding them back a push would only delay them, by that step's host
    // work, and leave them until the next frame arrives.
    return collect(0);
  } else {
    const bool keyframe =
        options_.keyframe_interval <= 1 || (index - scale_frames_used_) % options_.keyframe_interval == 0;
    launch_step({frame}, keyframe, index);
  }
  // Pipelined, the read-back this push started stays in flight and every
  // older one is collected (depth 2 delays results through the heads, not
  // through more read-backs in flight).
  const bool started_one = readback_.in_flight() > read_backs_before;
  return collect(options_.pipeline_depth >= 1 && started_one ? 1 : 0);
}

std::vector<FrameResult> StreamingModel::finish() {
  if (scale_frames_used_ == 0 && !pending_.empty()) {
    scale_frames_used_ = static_cast<int>(pending_.size());
    std::vector<Tensor> frames = std::move(pending_);
    pending_.clear();
    launch_step(frames, true, 0);
  }
  if (pending_heads_) launch_pending_heads();
  return collect(0);
}

void StreamingModel::reset() {
  readback_.discard_all();  // discarded, but the device must be done with the slots
  pending_heads_.reset();   // its results are discarded with the rest
  graphs_->clear();         // buffers may change with the next stream's size
  release_pending_ = false;  // the next stream's scale phase reuses what is left
  aggregator_->reset();
  camera_->reset();
  if (be_.device() == Device::CPU) {
    // On the CPU the workspace goes too: else the next scale phase would
    // allocate its buffers beside the streamed frames' ones. Nothing is in
    // flight there; a GPU may still read them (and its recorded graphs
    // refer to them), so it keeps them.
    ws_->clear();
    be_.release_scratch();
    aggregator_->release_scratch();
    trim_heap();
    scale_buffers_held_ = false;
  }
  pending_.clear();
  frames_pushed_ = 0;
  scale_frames_used_ = 0;
}

// Where the device part of a step leaves its results (workspace tensors).
struct StreamingModel::StepOutputs {
  Tensor* poses = nullptr;  // [iterations, S, 9]
  Tensor* raw = nullptr;    // [S, 2, H, W] or null without dense outputs
};

Tensor& StreamingModel::kept_layer(size_t i, int tokens) {
  // One frame's rows of an aggregator output layer ([T, 2E], float32).
  return ws_->get(fmt::format("heads.in{}", i), {tokens, 2 * config_.embed_dim}, DType::F32);
}

std::array<const Tensor*, 4> StreamingModel::kept_layers(int tokens) {
  std::array<const Tensor*, 4> layers{};
  for (size_t i = 0; i < layers.size(); ++i) layers[i] = &kept_layer(i, tokens);
  return layers;
}

void StreamingModel::compute_heads(const std::array<const Tensor*, 4>& layers, int S, int H, int W,
                                   const FrameGrid& grid, bool as_branches, StepOutputs& out) {
  const auto sync = [this] { be_.synchronize(); };
  const int T = grid.tokens();
  // The two heads read the aggregator's output and nothing of each other,
  // so the depth head can run as a side branch beside the camera head (on
  // the GPU the camera head's one-token layers leave most of the SMs idle).
  out.raw = nullptr;
  if (options_.keep_dense_outputs) {
    ProfileScope p("depth_head", sync);
    out.raw = &ws_->get("out.depth_raw", {S, 2, H, W}, DType::F32);
    if (as_branches) be_.begin_side_branch();
    depth_->forward(*ws_, layers, S, T, grid.num_special, grid.gh, grid.gw, *out.raw, depth_head_batch_);
    if (as_branches) be_.end_side_branch();
  }
  out.poses = &ws_->get("out.poses", {options_.camera_iterations, S, 9}, DType::F32);
  {
    ProfileScope p("camera_head", sync);
    camera_->compute(*ws_, *layers[3], T, *out.poses);
  }
  if (as_branches && options_.keep_dense_outputs) be_.join_side_branch();
}

void StreamingModel::compute_step(int S, int H, int W, bool defer_heads, const PendingHeads* pending,
                                  StepOutputs& out) {
  const auto sync = [this] { be_.synchronize(); };
  // An earlier frame's heads first, as a side branch: they read only its
  // kept aggregator output (and the camera head's own KV cache), while the
  // main work below writes only this frame's.
  out = StepOutputs{};
  if (pending != nullptr) {
    be_.begin_side_branch();
    compute_heads(kept_layers(pending->grid.tokens()), 1, pending->height, pending->width, pending->grid,
                  /*as_branches=*/false, out);
    be_.end_side_branch();
  }
  Tensor& images = ws_->get("in.images", {S, 3, H, W}, DType::F32);
  AggregatorOutput agg;
  {
    ProfileScope p("aggregator", sync);
    agg = aggregator_->compute(*ws_, images);
  }
  if (!defer_heads) {
    compute_heads(agg.layers, S, H, W, agg.grid, /*as_branches=*/true, out);
    return;
  }
  // Keep this frame's output for the next step's heads, once the earlier
  // frame's heads are done with the buffers.
  if (pending != nullptr) be_.join_side_branch();
  for (size_t i = 0; i < agg.layers.size(); ++i) be_.convert(*agg.layers[i], kept_layer(i, agg.grid.tokens()));
}

void StreamingModel::launch_step(const std::vector<Tensor>& frames, bool store, int64_t first_index) {
  const int S = static_cast<int>(frames.size());
  const int H = static_cast<int>(frames[0].dim(1)), W = static_cast<int>(frames[0].dim(2));
  const auto sync = [this] { be_.synchronize(); };
  ProfileScope whole("step", sync);
  std::optional<ProfileScope> part(std::in_place, "step: phase change", sync);

  // The scale phase's multi-frame buffers are freed once streaming has
  // started, so that the device's peak memory is the streaming steps':
  // the first single-frame step records which buffers it uses, and the
  // second frees the others before it enqueues anything. By then the scale
  // step has completed (its results were collected), no graph exists yet
  // (the first is recorded by this second step), and the step in flight
  // does not use them.
  if (release_pending_) {
    readback_.wait_all();  // the scale step's read-back may still run
    ws_->release_unused();
    release_pending_ = false;
  }
  if (S > 1) scale_buffers_held_ = true;
  if (S == 1 && scale_buffers_held_ && phases_apart_) {
    // Freed all before this step allocates its own, so the two phases'
    // buffers never coexist: it waits for the scale step's results to land. Nothing a streaming step reads survives from
    // the scale step in the workspace (each step writes its inputs in
    // prepare(), and the kept layers of pipelined heads start with this
    // step), and no graph has been recorded yet.
    readback_.wait_all();
    ws_->clear();
    trim_heap();
    scale_buffers_held_ = false;
  } else if (S == 1 && scale_buffers_held_) {
    // The scale step's batched depth head grew the convolutions' workspace
    // to several frames' need; it shrinks back to a streamed frame's here,
    // once the scale step is done with it (this waits for it, so the scale
    // step's heads do not share the GPU with this frame's work), and this
    // step (run directly, as the first of its kind) or the next one (the
    // first with pending heads) grows it again before any step is recorded.
    if (depth_head_batch_ > 1) be_.release_scratch();
    ws_->track_use();
    scale_buffers_held_ = false;
    release_pending_ = true;
  }

  // Host side first: frames to the device, cache bookkeeping, positions.
  part.emplace("step: frames to the device", sync);
  // Straight from the frames, no gathering copy: a streamed frame through
  // the destination's staging buffer (every step writes it). A full scale
  // phase's frames are there already (push() sent each as it came); one
  // cut short by finish() has a tensor of its own size.
  Tensor& images = ws_->get("in.images", {S, 3, H, W}, DType::F32);
  const bool sent_by_push = first_index == 0 && S == options_.num_scale_frames;
  for (int i = 0; i < S && !sent_by_push; ++i) {
    Tensor slot = images[i];
    if (S == 1) {
      be_.upload_into(frames[0], slot);
    } else {
      be_.upload_once_into(frames[static_cast<size_t>(i)], slot);
    }
  }
  part.emplace("step: cache and positions", sync);
  // With pipeline depth 2 a streaming frame's heads wait for the next step;
  // the camera head's cache step is then the pending frame's.
  const bool defer_heads = options_.pipeline_depth >= 2 && S == 1;
  const std::optional<PendingHeads> pending = pending_heads_;
  LB_ASSERT(!pending || S == 1);
  aggregator_->prepare(*ws_, S, H, W, store);
  if (pending) camera_->prepare(1, pending->store);
  if (!defer_heads) camera_->prepare(S, store);
  const bool camera_ran = pending || !defer_heads;

  // The device part: single frames replay a recorded graph once one exists.
  // Not while the profiler runs: its stage timings wait for the device,
  // which a capture forbids, and a replay would time nothing.
  part.reset();
  const PendingHeads* pending_ptr = pending ? &*pending : nullptr;
  const bool graphable = options_.use_graphs && be_.supports_graphs() && S == 1 && !Profiler::enabled();
  const StepKind kind{.store = store, .pending_heads = pending.has_value(), .pending_stored = pending && pending->store};
  const auto [outputs, run] = graphs_->run(
      kind, graphable, [&](StepOutputs& out) { compute_step(S, H, W, defer_heads, pending_ptr, out); });
  if (run == StepRun::Replayed) {  // the ops' host side did not run: tell the caches their step happened
    aggregator_->note_replayed();
    if (camera_ran) camera_->note_replayed();
  }
  part.emplace("step: finish", sync);
  aggregator_->finish();
  if (camera_ran) camera_->finish();

  // Results start for the host now; complete() reads them once they land.
  part.emplace("step: read-back start", sync);
  if (pending) {
    read_back(outputs, StepInfo{1, pending->height, pending->width, pending->store, pending->index});
  } else if (!defer_heads) {
    read_back(outputs, StepInfo{S, H, W, store, first_index});
  }
  pending_heads_.reset();
  if (defer_heads) {
    const int p = config_.patch_size;
    pending_heads_ = PendingHeads{.height = H,
                                  .width = W,
                                  .store = store,
                                  .index = first_index,
                                  .grid = FrameGrid{config_.num_special_tokens(), H / p, W / p}};
  }
}

void StreamingModel::launch_pending_heads() {
  const PendingHeads pending = *pending_heads_;
  pending_heads_.reset();
  camera_->prepare(1, pending.store);
  StepOutputs outputs;
  compute_heads(kept_layers(pending.grid.tokens()), 1, pending.height, pending.width, pending.grid,
                /*as_branches=*/true, outputs);
  camera_->finish();
  read_back(outputs, StepInfo{1, pending.height, pending.width, pending.store, pending.index});
}

void StreamingModel::read_back(const StepOutputs& outputs, const StepInfo& info) {
  readback_.enqueue(info, *outputs.poses, outputs.raw);
}

std::vector<FrameResult> StreamingModel::collect(size_t keep_in_flight) {
  std::vector<FrameResult> out;
  while (readback_.in_flight() > keep_in_flight) {
    ProfileScope post("download+postprocess");
    LandedStep landed;
    {
      ProfileScope wait("post: wait for the copy");
      landed = readback_.pop();
    }
    std::vector<FrameResult> r = complete(landed);
    std::move(r.begin(), r.end(), std::back_inserter(out));
  }
  return out;
}

std::vector<FrameResult> StreamingModel::complete(const LandedStep& step) {
  const StepInfo& info = step.info;
  const int S = info.frames, H = info.height, W = info.width;
  const int64_t plane = static_cast<int64_t>(H) * W;
  const float* poses = step.poses->f32();
  const int iters = options_.camera_iterations;
  std::vector<FrameResult> results(static_cast<size_t>(S));
  for (int i = 0; i < S; ++i) {
    FrameResult& r = results[static_cast<size_t>(i)];
    r.index = info.first_index + i;
    r.keyframe = info.store;
    r.role = r.index < scale_frames_used_ ? FrameRole::Scale
             : info.store                 ? FrameRole::Keyframe
                                          : FrameRole::NonKeyframe;
    r.height = H;
    r.width = W;
    const float* last = poses + ((iters - 1) * S + i) * 9;
    std::copy_n(last, 9, r.pose_enc.begin());
    if (options_.keep_pose_iterations) {
      for (int it = 0; it < iters; ++it) {
        std::array<float, 9> pe;
        std::copy_n(poses + (it * S + i) * 9, 9, pe.begin());
        r.pose_enc_iterations.push_back(pe);
      }
    }
    r.camera = decode_pose(r.pose_enc.data(), H, W);
    int64_t bad_depth = 0;
    if (step.raw != nullptr) {
      // Channel 0: depth = exp(x); channel 1: confidence = 1 + exp(x).
      std::optional<ProfileScope> stage(std::in_place, "post: depth, confidence");
      r.depth = Tensor::empty({H, W});
      r.depth_conf = Tensor::empty({H, W});
      r.world_points = Tensor::empty({H, W, 3});
      const float* d = step.raw->f32() + i * 2 * plane;
      float* depth = r.depth.f32();
      float* conf = r.depth_conf.f32();
#pragma omp parallel for schedule(static) reduction(+ : bad_depth) if (plane >= 16384)
      for (int64_t k = 0; k < plane; ++k) {
        depth[k] = std::exp(d[k]);
        conf[k] = 1.0f + std::exp(d[plane + k]);
        bad_depth += std::isfinite(depth[k]) ? 0 : 1;
      }
      stage.reset();
      stage.emplace("post: world points");
      unproject_depth(r.camera, depth, H, W, r.world_points.f32());
    }
    warn_if_not_finite(r, bad_depth);
  }
  return results;
}

kv::CacheStats StreamingModel::cache_stats() const {
  const kv::KvCache* c = aggregator_->cache();
  return c ? c->stats() : kv::CacheStats{};
}

size_t StreamingModel::weight_bytes() const { return weights_->device_bytes(); }
size_t StreamingModel::workspace_bytes() const { return ws_->bytes(); }

}  // namespace lingbot
