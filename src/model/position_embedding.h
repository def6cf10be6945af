// Position embeddings computed on the host, once per input resolution.
#pragma once

#include "core/tensor.h"

namespace lingbot {

// DINOv2: resize the learned [M*M, C] patch position embedding to a gh x gw
// grid with antialiased bicubic interpolation (PyTorch's
// interpolate(mode="bicubic", antialias=True), align_corners=False: Keys
// cubic with a = -0.5 and the support widened by the scale when shrinking).
// Returns [gh*gw, C]; the identity when the grid is unchanged.
Tensor interpolate_pos_embed(const Tensor& patch_pos, int M, int gh, int gw);

// DPT head: the sinusoidal embedding of a normalised UV grid of h x w points
// for an image of aspect `width / height`, times 0.1, as [C, h, w]
// (upstream heads/utils.py: create_uv_grid + position_grid_to_embed).
Tensor dpt_pos_embed(int channels, int h, int w, double aspect);
// The same embedding by axis: its first channels / 2 channels depend on x
// only and the rest on y only, so it is by_col [C/2, w] (channel c at column
// x) and by_row [C/2, h] (channel C/2 + c at row y), the same values.
struct AxisEmbedding {
  Tensor by_col, by_row;
};
AxisEmbedding dpt_pos_embed_axes(int channels, int h, int w, double aspect);

}  // namespace lingbot
