// The bf16 mode's convolutions on AMX tiles, issued directly (the depth
// head's; maps float32 in the channels-last layout):
//
//   out[n, y, x, o] = act(sum over ky, kx, c of x[n, y s - p + ky, x s - p + kx, c] w[o, ky, kx, c]
//                         + bias[o] + residual[n, y, x, o])
//
// An implicit matrix product: an output pixel's inputs, taken in (ky, kx, c)
// order, are a row of x whose K = kernel^2 c_in values meet w's rows as
// stored (OHWI); inputs outside the map are zeros. x and w are rounded to
// bf16 (to nearest even) as they are packed into tiles, sums are float32:
// the arithmetic of oneDNN's convolution with bf16 operands, which the bf16
// mode runs where this kernel is not chosen. The rows of x are gathered per
// work item, 32 output pixels at a time, into the tiles' layout; the weights
// are packed once (conv_amx_pack_weights: the CPU backend keeps each layer's
// from its first call, since a small map's convolution takes less time than
// rounding and packing its 9.4 M weights). The 32 x 32 blocks of sums and
// their epilogue are the Linear kernel's (amx_tile_blocks.h).
//
// c_in and c_out must be multiples of 32 (the depth head's: 128 to 1,024;
// its last convolution, 32 -> 2 channels, stays with oneDNN). Call from
// serial code: the convolution threads through OpenMP.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/onednn_conv.h"  // ConvShape

#include <cstdint>

namespace lingbot::cpu {

// Whether the kernel takes this shape: channels last, c_in and c_out
// multiples of 32.
bool conv_amx_fits(const ConvShape& s);

// Whether this build has the kernel and this CPU and process may run it (as
// linear_amx_available()).
bool conv_amx_available();

// w (float32 [c_out, kernel, kernel, c_in]) rounded to bf16 and packed
// into the tiles' layout (linear_amx_pack_weights of w as a [c_out, kernel^2
// c_in] matrix): as many bf16 values as w.
Tensor conv_amx_pack_weights(const ConvShape& s, const float* w);

// out from x (float32, channels last: [n, h, w, c_in]) and w_tiles
// (conv_amx_pack_weights of the layer's w); bias and residual (out's shape)
// float32 or null; act None or Relu. out apart from x and residual.
void conv_amx_packed(const ConvShape& s, const float* x, const uint16_t* w_tiles, const float* bias,
                     const float* residual, Activation act, float* out);

// The same from w as it is, packed for this call.
void conv_amx(const ConvShape& s, const float* x, const float* w, const float* bias, const float* residual,
              Activation act, float* out);

namespace detail {
bool conv_amx_built();
// The kernel itself on w in the tile layout (linear_amx_pack_weights of w as
// a bf16 [c_out, kernel^2 c_in] matrix), without the availability check;
// strips: room for one strip of tiles per thread (omp_get_max_threads() x
// 32 x kernel^2 c_in bf16 values), 64-byte aligned.
void conv_amx_kernel(const ConvShape& s, const float* x, const uint16_t* w_tiles, const float* bias,
                     const float* residual, Activation act, float* out, uint16_t* strips);
// conv_amx_packed's and conv_amx's entries with the check left out (for the
// emulated-tile test).
void conv_amx_packed_unchecked(const ConvShape& s, const float* x, const uint16_t* w_tiles, const float* bias,
                               const float* residual, Activation act, float* out);
void conv_amx_unchecked(const ConvShape& s, const float* x, const float* w, const float* bias, const float* residual,
                        Activation act, float* out);
}  // namespace detail

}  // namespace lingbot::cpu
