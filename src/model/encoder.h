// The DINOv2 image encoder (ViT with register tokens): frames in, normalised
// patch tokens out. Upstream: layers/vision_transformer.py, used by
// aggregator/base.py with its "x_norm_patchtokens" output.
//
//   tokens = [cls + pos0, registers, patch_embed(normalise(image)) + pos]
//   tokens = blocks(tokens)           (self-attention within each frame)
//   out    = LayerNorm(tokens)[patch rows]
#pragma once

#include "model/model_config.h"
#include "model/transformer_block.h"

#include <vector>

namespace lingbot {

class Encoder {
 public:
  Encoder(Backend& be, const DeviceWeights& w, const ModelConfig& config);

  // images [S, 3, H, W] in [0, 1] (H, W multiples of the patch size) ->
  // normalised patch tokens [S * gh * gw, E] written into `out` (any float dtype).
  void forward(Workspace& ws, const Tensor& images, Tensor& out);

 private:
  void prepare_position_embedding(int gh, int gw);

  Backend& be_;
  const DeviceWeights& w_;
  ModelConfig config_;
  std::vector<BlockWeights> blocks_;
  Tensor cls_with_pos_;  // [1, E] on device (residual dtype)
  Tensor registers_;     // [R, E] on device (residual dtype)
  Tensor pos_patches_;   // [gh * gw, E] on device, for the current grid
  int grid_h_ = -1, grid_w_ = -1;
};

}  // namespace lingbot
