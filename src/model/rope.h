// Rotary position tables, computed on the host in upstream's precision.
//
// Token positions inside a frame of `num_special` special tokens followed by
// a patch grid of gh x gw:
//   2D RoPE (frame blocks; global blocks when 3D RoPE is off):
//     special tokens at (y, x) = (0, 0), patch (r, c) at (r + 1, c + 1);
//     angles in float32 like upstream's RotaryPositionEmbedding2D.
//   3D RoPE (global blocks): special token i at (t, h, w) = (f, i, i), patch
//     (r, c) at (f, num_special + r, num_special + c), f the global frame
//     index; angles in float64 then rounded, like upstream's WanRotaryPosEmbed.
// Tables are [tokens, head_dim / 2] cos and sin (see RopeTable in backend.h).
#pragma once

#include "core/tensor.h"

#include <array>
#include <cstdint>

namespace lingbot {

struct FrameGrid {
  int num_special = 6;
  int gh = 0;  // patch rows
  int gw = 0;  // patch columns
  int tokens() const { return num_special + gh * gw; }
};

// [tokens, head_dim/2] cos and sin, HalfSplit pairing.
void rope2d_table(const FrameGrid& grid, int head_dim, double base, Tensor& cos, Tensor& sin);

// Rows for frames f_first .. f_first + num_frames - 1 (frame after frame),
// Interleaved pairing; fhw = per-axis dims (t, h, w), summing to head_dim.
void rope3d_table(const FrameGrid& grid, int head_dim, const std::array<int, 3>& fhw, double theta,
                  int64_t f_first, int num_frames, Tensor& cos, Tensor& sin);

}  // namespace lingbot
