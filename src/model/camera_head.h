// The causal camera head (upstream heads/camera_head.py, CameraCausalHead):
// the camera token of each frame (first token of the last selected
// aggregator output) is refined over `iterations` passes of a small
// transformer trunk whose attention runs through a KV cache of one camera
// token per stored frame, one cache per (iteration, trunk block).
//
//   tokens = LayerNorm(camera tokens)
//   for each iteration i:
//     m      = Linear(SiLU(embed_pose(previous pose or the learned empty pose)))
//     x      = gate * (LayerNorm_noaffine(tokens) * (1 + scale) + shift) + tokens
//     x      = trunk(x)                     (through cache i)
//     pose  += pose_branch(LayerNorm(x))    (the first iteration sets it)
//   output = [translation, quaternion, relu(field of view)] of the last pose
#pragma once

#include "model/model_config.h"
#include "model/transformer_block.h"

#include <memory>
#include <vector>

namespace lingbot {

class CameraHead {
 public:
  CameraHead(Backend& be, const DeviceWeights& w, const ModelConfig& config, int iterations);

  // A step in three parts, like Aggregator: prepare() (host: cache
  // bookkeeping), compute() (device only), finish() (host: commit or roll back).
  // tokens: the last selected aggregator output [S * T, 2E] (float32);
  // writes the activated pose encoding of each iteration into `poses`
  // [iterations, S, 9].
  void prepare(int frames, bool store);
  void compute(Workspace& ws, const Tensor& tokens, int tokens_per_frame, Tensor& poses);
  void finish();
  void note_replayed() { cache_->note_replayed_step(); }
  void reset();
  int iterations() const { return iterations_; }

 private:
  Backend& be_;
  const DeviceWeights& w_;
  CameraHeadConfig config_;
  int iterations_;
  std::vector<BlockWeights> trunk_;
  std::unique_ptr<kv::KvCache> cache_;  // blocks: iteration * trunk_depth + block
  int step_frames_ = 0;
};

}  // namespace lingbot
