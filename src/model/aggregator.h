// The streaming aggregator (upstream aggregator/stream.py, AggregatorStream):
// per frame, special tokens [camera, registers, scale] are put before the
// encoder's patch tokens, then `depth` pairs of
//   frame block  - attention inside each frame, 2D RoPE
//   global block - attention across frames through the KV cache, 3D RoPE
// run in turn. The outputs of the selected pairs (frame output | global
// output, 2E channels) feed the heads.
//
// One call is one step of the streaming protocol: the scale frames together
// (phase 1), or one frame (phase 2). A step with store=false is a
// non-keyframe: it attends to the cache and its own tokens, stores nothing
// and does not advance the frame counter.
#pragma once

#include "model/encoder.h"
#include "model/rope.h"

#include <array>
#include <memory>

namespace lingbot {

struct AggregatorOutput {
  std::array<const Tensor*, 4> layers{};  // [S * T, 2E] each, float32 (the heads' dtype)
  FrameGrid grid;
  int frames = 0;
};

class Aggregator {
 public:
  Aggregator(Backend& be, const DeviceWeights& w, const ModelConfig& config, kv::Layout layout,
             const kv::CacheConfig& cache_config, int num_scale_frames);

  // One step, in three parts so that the device part can be captured and
  // replayed as a CUDA graph:
  //   prepare()  host: cache bookkeeping, positions, per-step uploads
  //   compute()  device only: reads images and what prepare() uploaded
  //   finish()   host: commits or rolls back the cache, advances the counter
  void prepare(Workspace& ws, int frames, int height, int width, bool store);
  AggregatorOutput compute(Workspace& ws, const Tensor& images);
  void finish();
  // The device part ran from a replayed graph instead of compute().
  void note_replayed() { cache_->note_replayed_step(); }
  AggregatorOutput forward(Workspace& ws, const Tensor& images, bool store);  // all three
  void reset();
  // Frees the KV cache's staging memory (the stored keys and values stay).
  void release_scratch() {
    if (cache_) cache_->release_scratch();
  }

  int64_t frames_stored() const { return frames_stored_; }
  const kv::KvCache* cache() const { return cache_.get(); }

 private:
  void prepare_for_grid(const FrameGrid& grid);
  const Tensor& special_block(int64_t position);

  Backend& be_;
  const DeviceWeights& w_;
  ModelConfig config_;
  kv::Layout layout_;
  kv::CacheConfig cache_config_;
  int num_scale_frames_;
  Encoder encoder_;
  std::vector<BlockWeights> frame_blocks_;
  std::vector<BlockWeights> global_blocks_;
  std::unique_ptr<kv::KvCache> cache_;  // created on first use, per token layout
  FrameGrid grid_{};
  RopeTable rope2d_;                     // one frame's rows
  std::array<Tensor, 3> special_blocks_;  // [6, E]: first frame, other scale frames, later frames
  int64_t frames_stored_ = 0;  // the 3D RoPE frame index of the next stored frame

  // The step being run (set by prepare()).
  struct Step {
    int frames = 0;
    bool store = false;
    std::vector<const Tensor*> specials;  // per frame: its special-token block
    RopeTable rope_global;                // 3D (this step's frame indices) or 2D
    bool active = false;
  } step_;
};

}  // namespace lingbot
