// linear_amx.h's parts that run on any CPU: the weights' tile layout, the
// availability check and the entry that gives the kernel (linear_amx.cpp,
// built for AMX) its room for the packed activations.
#include "backend/cpu/linear_amx.h"

#include "backend/cpu/cpu_isa.h"
#include "core/error.h"
#include "core/tensor.h"

#include <cstdint>

namespace lingbot::cpu {

namespace {

// Where w[o][i] lies in the tile layout.
int64_t tile_index(int64_t o, int64_t i, int64_t in) {
  const int64_t nb = o / 16, c = o % 16, kb = i / 32, r = (i % 32) / 2, p = i % 2;
  return (nb * (in / 32) + kb) * 512 + (r * 16 + c) * 2 + p;
}

}  // namespace

bool linear_amx_fits(int64_t in, int64_t out) { return in > 0 && out > 0 && in % 32 == 0 && out % 32 == 0; }

void linear_amx_pack_weights(const uint16_t* w, int64_t in, int64_t out, uint16_t* tiles) {
  LB_CHECK(linear_amx_fits(in, out), "internal error: linear (AMX): w [{}, {}] has no tile layout", out, in);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) tiles[tile_index(o, i, in)] = w[o * in + i];
}

void linear_amx_unpack_weights(const uint16_t* tiles, int64_t in, int64_t out, uint16_t* w) {
  LB_CHECK(linear_amx_fits(in, out), "internal error: linear (AMX): w [{}, {}] has no tile layout", out, in);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) w[o * in + i] = tiles[tile_index(o, i, in)];
}

bool linear_amx_available() { return detail::linear_amx_built() && amx_bf16_granted(); }

void linear_amx(const uint16_t* x, int64_t rows, int64_t in, const uint16_t* w_tiles, int64_t out, const float* bias,
                Activation act, MatmulDst kind, void* dst) {
  LB_CHECK(linear_amx_available(), "internal error: linear (AMX): no AMX tiles on this CPU or in this build");
  detail::linear_amx_unchecked(x, rows, in, w_tiles, out, bias, act, kind, dst);
}

namespace detail {

void linear_amx_unchecked(const uint16_t* x, int64_t rows, int64_t in, const uint16_t* w_tiles, int64_t out,
                          const float* bias, Activation act, MatmulDst kind, void* dst) {
  LB_CHECK(linear_amx_fits(in, out), "internal error: linear (AMX): w [{}, {}] has no tile layout", out, in);
  LB_CHECK(kind != MatmulDst::AddIntoF32 || act == Activation::None,
           "internal error: linear (AMX): a residual update takes no activation");
  LB_CHECK(act == Activation::None || act == Activation::Gelu, "internal error: linear (AMX): GELU or nothing");
  // Kept from call to call by the calling thread (linear_amx is called from
  // serial code); a tensor's memory is 64-byte aligned, as the kernel needs.
  thread_local Tensor x_strips;
  const int64_t values = (rows + 31) / 32 * 32 * in;
  if (!x_strips.defined() || x_strips.numel() < values) x_strips = Tensor::empty({values}, DType::BF16);
  linear_amx_kernel(x, rows, in, w_tiles, out, bias, act, kind, dst, x_strips.data_as<uint16_t>());
}

}  // namespace detail

}  // namespace lingbot::cpu
