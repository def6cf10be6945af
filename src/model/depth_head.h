// The DPT depth head (upstream heads/dpt_head.py, DPTHead with output_dim 2):
// four aggregator layers become a feature pyramid (project, add a UV
// position embedding, resize to 4x / 2x / 1x / 0.5x of the patch grid),
// are fused from coarse to fine by RefineNet blocks, upsampled to the image
// size and turned into a depth and a confidence channel.
//
// Upstream's residual conv unit applies its ReLU in place on the unit's
// input, so its skip connection adds relu(x), not x. The official weights
// were trained that way and so is this port.
//
// The feature maps are held in either layout (MapLayout): channels first as
// upstream, or channels last, where the tokens already are [frames, h, w,
// C], a convolution's bias, ReLU and residual add go into one epilogue
// pass, and cuDNN runs its convolutions without transposing in and out.
// Channels last needs the convolution weights as [Cout, k, k, Cin]
// (WeightStorage::depth_head_channels_last); the values are the same either
// way up to the order of float32 sums.
//
// Channels last, the maps can also be bfloat16 (option depth_head_dtype:
// upstream runs the head in float32): every map after the projections, and
// the convolution weights (WeightStorage::depth_head_bf16), with float32
// sums, biases and position terms; the raw output is widened to float32
// before the activations. Half the bytes of every map and bf16 tensor cores
// for the convolutions on a GPU; on the CPU the ops widen them (tests).
#pragma once

#include "model/model_config.h"
#include "model/transformer_block.h"
#include "model/weights.h"
#include "model/position_embedding.h"
#include "model/workspace.h"

#include <array>
#include <map>
#include <string_view>

namespace lingbot {

// Whether the parameter `name` is a weight of one of the depth head's
// Conv2d layers (not its ConvTranspose2d or 1x1 projections): the tensors
// that channels-last storage keeps as [Cout, k, k, Cin].
bool is_depth_head_conv_weight(std::string_view name);
// Those and the weights of its two ConvTranspose2d layers: every weight that
// multiplies a map, kept in the maps' dtype (WeightStorage::depth_head_bf16).
bool is_depth_head_map_weight(std::string_view name);

// [a, b, c, d] -> [a, c, d, b] in float32 on the host: a Conv2d weight
// [Cout, Cin, k, k] as [Cout, k, k, Cin], a map [n, C, h, w] as [n, h, w, C].
Tensor channels_last_on_host(const Tensor& t);

class DepthHead {
 public:
  // layout: the feature maps' layout; ChannelsLast needs the weights stored
  // with WeightStorage::depth_head_channels_last. maps: their dtype, F32, or
  // BF16 with ChannelsLast and WeightStorage::depth_head_bf16.
  DepthHead(Backend& be, const DeviceWeights& w, const ModelConfig& config,
            MapLayout layout = MapLayout::ChannelsFirst, DType maps = DType::F32);

  // layers: the 4 selected aggregator outputs [S * T, 2E] (float32); the
  // frames' patch grid and image size. Writes the raw two-channel output
  // (before exp / 1 + exp) into `out` [S, 2, H, W]. The frames go through
  // the head `batch` at a time: the head has no cross-frame interaction, so
  // any batch gives the same values, and its buffers (most of them
  // full-resolution maps, about 0.36 GB per frame at 378 x 504) scale with
  // the batch, while a larger batch keeps a GPU busier on the coarse levels.
  void forward(Workspace& ws, const std::array<const Tensor*, 4>& layers, int frames, int tokens_per_frame,
               int num_special, int gh, int gw, Tensor& out, int batch = 1);

 private:
  // The head on frames [first, first + count) of the layers; out [count, 2, H, W].
  void forward_frames(Workspace& ws, const std::array<const Tensor*, 4>& layers, int first, int count,
                      int tokens_per_frame, int num_special, int gh, int gw, Tensor& out);
  // A map's shape [n, c, h, w] in this head's layout, and its height and width.
  Shape map_shape(int64_t n, int64_t c, int64_t h, int64_t w) const;
  int64_t map_height(const Tensor& t) const;
  int64_t map_width(const Tensor& t) const;
  // The parameter `layer`.weight / .bias as a convolution in this head's
  // layout: out = act(conv(x) + bias + residual).
  void conv(const Tensor& x, const std::string& layer, bool bias, int stride, int pad, Tensor& out,
            const ConvEpilogue& epilogue = {});
  // Residual conv unit: relu(x) -> conv -> relu -> conv, plus relu(x). x is overwritten by relu(x).
  void residual_unit(Workspace& ws, const std::string& prefix, Tensor& x, Tensor& out);
  // RefineNet fusion: (x [+ unit1(skip)]) -> unit2 -> resize to (h, w) -> 1x1 conv.
  // `resized`: where the upsampled map goes (null: a buffer of its own).
  void fuse(Workspace& ws, int index, Tensor& x, Tensor* skip, int h, int w, Tensor& out, Tensor* resized = nullptr);
  const Tensor& position_embedding(int channels, int h, int w, double aspect);

  Backend& be_;
  const DeviceWeights& w_;
  ModelConfig config_;
  MapLayout layout_;
  DType maps_;
  std::map<std::array<int, 3>, Tensor> pos_embed_;  // (channels, h, w) -> [C, h, w] or [h, w, C] on device
  // The full-resolution one by axis (97 MB whole at 378 x 504): (channels,
  // h, w) -> its by_col and by_row tables on device.
  std::map<std::array<int, 3>, AxisEmbedding> pos_embed_axes_;
  const AxisEmbedding& position_embedding_axes(int channels, int h, int w, double aspect);
};

}  // namespace lingbot
