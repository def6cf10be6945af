// The whole streaming reconstruction model: frames in, cameras and depth
// out, one frame at a time (upstream GCTStream.inference_streaming).
//
// Protocol:
//   1. The first `num_scale_frames` frames are buffered and go through
//      together (they attend to each other bidirectionally); their results
//      all come back when the last of them is pushed.
//   2. Every later frame goes through alone and its result comes back at
//      once (with pipeline_depth 0; see below). With keyframe_interval N > 1 only every N-th of them is stored
//      in the KV caches; the others attend and leave no trace.
//   finish() runs a scale phase that is still short of frames (a stream
//   shorter than num_scale_frames) and returns every result not yet
//   returned; reset() starts a new video (discarding results not returned).
//   With StreamOptions::pipeline_depth = 1 each push() returns the results
//   of the step before it, with 2 (the default) those of the step two
//   pushes back, so call finish() at the end of a stream.
#pragma once

#include "backend/backend.h"
#include "checkpoint/state_dict.h"
#include "model/camera_geometry.h"
#include "model/model_config.h"
#include "model/readback_queue.h"
#include "model/rope.h"
#include "model/step_graphs.h"
#include "model/stream_options.h"
#include "model/weight_source.h"

#include <array>
#include <memory>
#include <optional>
#include <vector>

namespace lingbot {

class Aggregator;
class CameraHead;
class DepthHead;
class DeviceWeights;
class Workspace;

// A frame's part in its stream, with upstream windowed mode's frame_type codes.
enum class FrameRole : uint8_t { Scale = 0, Keyframe = 1, NonKeyframe = 2 };

struct FrameResult {
  int64_t index = 0;     // position in the stream, from 0
  bool keyframe = true;  // stored in the KV caches
  FrameRole role = FrameRole::Scale;
  std::array<float, 9> pose_enc{};
  std::vector<std::array<float, 9>> pose_enc_iterations;  // if keep_pose_iterations
  Camera camera;
  int height = 0;
  int width = 0;
  Tensor depth;         // [H, W] float32 host (empty unless keep_dense_outputs)
  Tensor depth_conf;    // [H, W]
  Tensor world_points;  // [H, W, 3]
};

// Frames in, results out: the interface of both ways to run a video,
// StreamingModel (one KV cache over the whole stream) and WindowedStream
// (model/windowed_stream.h). Results come back in frame order, each exactly
// once, as described above for StreamingModel.
class FrameStream {
 public:
  virtual ~FrameStream() = default;
  virtual std::vector<FrameResult> push(const Tensor& frame) = 0;
  virtual std::vector<FrameResult> finish() = 0;
  virtual void reset() = 0;
  virtual kv::CacheStats cache_stats() const = 0;
};

class StreamingModel : public FrameStream {
 public:
  StreamingModel(Backend& backend, const io::StateDict& weights, const ModelConfig& config,
                 const StreamOptions& options);
  // The weights read one tensor at a time (model/weight_source.h).
  StreamingModel(Backend& backend, const WeightSource& weights, const ModelConfig& config,
                 const StreamOptions& options);
  ~StreamingModel();
  StreamingModel(const StreamingModel&) = delete;
  StreamingModel& operator=(const StreamingModel&) = delete;

  // frame: [3, H, W] float32 host tensor in [0, 1]; H and W multiples of the
  // patch size and the same for every frame of a stream.
  std::vector<FrameResult> push(const Tensor& frame) override;
  std::vector<FrameResult> finish() override;
  void reset() override;

  const ModelConfig& config() const { return config_; }
  const StreamOptions& options() const { return options_; }
  int64_t frames_pushed() const { return frames_pushed_; }  // since construction or reset()
  kv::CacheStats cache_stats() const override;
  size_t weight_bytes() const;
  size_t workspace_bytes() const;

 private:
  // A streaming frame whose heads have not run yet (pipeline_depth 2): its
  // aggregator output waits in the workspace's "heads.in*" buffers.
  struct PendingHeads {
    int height = 0, width = 0;
    bool store = true;
    int64_t index = 0;
    FrameGrid grid;
  };

  struct StepOutputs;
  void launch_step(const std::vector<Tensor>& frames, bool store, int64_t first_index);
  // Runs the pending frame's heads on their own (the end of a stream).
  void launch_pending_heads();
  // Enqueues the read-back of a step's results.
  void read_back(const StepOutputs& outputs, const StepInfo& info);
  // Completes the oldest steps until at most `keep_in_flight` remain.
  std::vector<FrameResult> collect(size_t keep_in_flight);
  // The host post-processing of a step whose outputs have landed.
  std::vector<FrameResult> complete(const LandedStep& step);
  // The device part of a step. With `defer_heads` the aggregator's output
  // goes to the pending buffers instead of the heads; with `pending` the
  // heads of that earlier frame run as a side branch beside the aggregator.
  void compute_step(int frames, int height, int width, bool defer_heads, const PendingHeads* pending,
                    StepOutputs& out);
  // The pending frame's copy of aggregator output layer i, and all four.
  Tensor& kept_layer(size_t i, int tokens);
  std::array<const Tensor*, 4> kept_layers(int tokens);
  // Both heads on the given aggregator layers. With `as_branches` the depth
  // head runs as a side branch beside the camera head; without, in order.
  void compute_heads(const std::array<const Tensor*, 4>& layers, int frames, int height, int width,
                     const FrameGrid& grid, bool as_branches, StepOutputs& out);

  Backend& be_;
  ModelConfig config_;
  StreamOptions options_;
  std::unique_ptr<DeviceWeights> weights_;
  std::unique_ptr<Workspace> ws_;
  std::unique_ptr<Aggregator> aggregator_;
  std::unique_ptr<CameraHead> camera_;
  std::unique_ptr<DepthHead> depth_;
  std::vector<Tensor> pending_;  // scale-phase frames waiting for the phase to fill
  int64_t frames_pushed_ = 0;
  Shape stream_shape_;
  int scale_frames_used_ = 0;  // frames the scale phase actually had (0 until it ran)

  std::unique_ptr<StepGraphs<StepOutputs>> graphs_;  // recorded single-frame steps
  std::optional<PendingHeads> pending_heads_;
  ReadbackQueue readback_;
  bool scale_buffers_held_ = false;  // a scale phase ran; streaming has not started yet
  bool release_pending_ = false;     // free what the first streaming step did not use, at the next step
  // The scale phase's buffers are freed before the first streamed frame
  // allocates its own: the low-memory profile, and always on the CPU, whose
  // steps complete inside push(), so that waiting for the scale results
  // costs no overlap there.
  bool phases_apart_ = false;
  // Frames the depth head takes in one pass in the scale phase
  // (StreamOptions::depth_head_batch, resolved): the scale phase's head on
  // a GPU is mostly small kernels on the coarse levels, which a batch fills.
  int depth_head_batch_ = 1;
};

}  // namespace lingbot
