// conv_amx.h's parts that run on any CPU: the shapes it takes, the
// availability check, and the entry that packs the weights into the tiles'
// layout and gives the kernel (conv_amx.cpp, built for AMX) its room.
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

void conv_amx(const ConvShape& s, const float* x, const float* w, const float* bias, const float* residual,
              Activation act, float* out) {
  LB_CHECK(conv_amx_available(), "internal error: conv2d (AMX): no AMX tiles on this CPU or in this build");
  detail::conv_amx_unchecked(s, x, w, bias, residual, act, out);
}

namespace detail {

void conv_amx_unchecked(const ConvShape& s, const float* x, const float* w, const float* bias, const float* residual,
                        Activation act, float* out) {
  LB_CHECK(conv_amx_fits(s), "internal error: conv2d (AMX): {} -> {} channels, kernel {}, {} has no tile layout",
           s.c_in, s.c_out, s.kernel, s.channels_last ? "channels last" : "channels first");
  LB_CHECK(act == Activation::None || act == Activation::Relu, "internal error: conv2d (AMX): ReLU or nothing");
  const int64_t k = s.kernel * s.kernel * s.c_in;
  // Kept from call to call by the calling thread (the convolutions are
  // called from serial code); a tensor's memory is 64-byte aligned.
  thread_local Tensor rounded, tiles, strips;
  const auto room = [](Tensor& t, int64_t values) {
    if (!t.defined() || t.numel() < values) t = Tensor::empty({values}, DType::BF16);
    return t.data_as<uint16_t>();
  };
  uint16_t* const w_bf16 = room(rounded, s.c_out * k);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.c_out * k; ++i) w_bf16[i] = f32_to_bf16(w[i]);
  uint16_t* const w_tiles = room(tiles, s.c_out * k);
  linear_amx_pack_weights(w_bf16, k, s.c_out, w_tiles);
  uint16_t* const xs = room(strips, int64_t{omp_get_max_threads()} * 32 * k);
  conv_amx_kernel(s, x, w_tiles, bias, residual, act, out, xs);
}

}  // namespace detail

}  // namespace lingbot::cpu
