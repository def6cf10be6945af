// conv_amx.h's parts that run on any CPU: the shapes it takes, the
// availability check, the weights' packing into the tiles' layout and the
// entries that give the kernel (conv_amx.cpp, built for AMX) its room.
#include "backend/cpu/conv_amx.h"

#include "backend/cpu/linear_amx.h"
#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"

#include <omp.h>

#include <cstdint>

namespace lingbot::cpu {

bool conv_amx_fits(const ConvShape& s) {
  return s.channels_last && s.kernel >= 1 && s.stride >= 1 && s.pad >= 0 && linear_amx_fits(s.c_in, s.c_out);
}

bool conv_amx_available() { return detail::conv_amx_built() && linear_amx_available(); }

Tensor conv_amx_pack_weights(const ConvShape& s, const float* w) {
  LB_CHECK(conv_amx_fits(s), "internal error: conv2d (AMX): {} -> {} channels, kernel {}, {} has no tile layout",
           s.c_in, s.c_out, s.kernel, s.channels_last ? "channels last" : "channels first");
  const int64_t k = s.kernel * s.kernel * s.c_in;
  const Tensor rounded = Tensor::empty({s.c_out * k}, DType::BF16);
  uint16_t* const w_bf16 = rounded.data_as<uint16_t>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.c_out * k; ++i) w_bf16[i] = f32_to_bf16(w[i]);
  Tensor tiles = Tensor::empty({s.c_out * k}, DType::BF16);
  linear_amx_pack_weights(w_bf16, k, s.c_out, tiles.data_as<uint16_t>());
  return tiles;
}

void conv_amx_packed(const ConvShape& s, const float* x, const uint16_t* w_tiles, const float* bias,
                     const float* residual, Activation act, float* out) {
  LB_CHECK(conv_amx_available(), "internal error: conv2d (AMX): no AMX tiles on this CPU or in this build");
  detail::conv_amx_packed_unchecked(s, x, w_tiles, bias, residual, act, out);
}

void conv_amx(const ConvShape& s, const float* x, const float* w, const float* bias, const float* residual,
              Activation act, float* out) {
  LB_CHECK(conv_amx_available(), "internal error: conv2d (AMX): no AMX tiles on this CPU or in this build");
  detail::conv_amx_unchecked(s, x, w, bias, residual, act, out);
}

namespace detail {

void conv_amx_packed_unchecked(const ConvShape& s, const float* x, const uint16_t* w_tiles, const float* bias,
                               const float* residual, Activation act, float* out) {
  LB_CHECK(conv_amx_fits(s), "internal error: conv2d (AMX): {} -> {} channels, kernel {}, {} has no tile layout",
           s.c_in, s.c_out, s.kernel, s.channels_last ? "channels last" : "channels first");
  LB_CHECK(act == Activation::None || act == Activation::Relu, "internal error: conv2d (AMX): ReLU or nothing");
  const int64_t k = s.kernel * s.kernel * s.c_in;
  // One strip of tiles per thread, kept from call to call by the calling
  // thread; a tensor's memory is 64-byte aligned.
  thread_local Tensor strips;
  const int64_t values = int64_t{omp_get_max_threads()} * 32 * k;
  if (!strips.defined() || strips.numel() < values) strips = Tensor::empty({values}, DType::BF16);
  conv_amx_kernel(s, x, w_tiles, bias, residual, act, out, strips.data_as<uint16_t>());
}

void conv_amx_unchecked(const ConvShape& s, const float* x, const float* w, const float* bias, const float* residual,
                        Activation act, float* out) {
  const Tensor tiles = conv_amx_pack_weights(s, w);
  conv_amx_packed_unchecked(s, x, tiles.data_as<const uint16_t>(), bias, residual, act, out);
}

}  // namespace detail

}  // namespace lingbot::cpu
