// The bf16 mode's matrix products (--cpu-dtype bf16) through oneDNN's matmul
// primitives: bfloat16 activations and weights, float32 sums, a float32 or
// bfloat16 result, with the bias, the activation (GELU, ReLU) and a residual
// update ("dst += product") applied inside the primitive as post-ops, so the
// result is written once. oneDNN runs AMX tiles where the CPU has them and
// AVX512-BF16 otherwise.
//
// A primitive is made once per shape and kept (the model has a handful of
// shapes: the scale phase's and the streamed frame's token counts times the
// four Linear layers of a block). Weights stay in the model's [out, in]
// row-major layout; oneDNN packs them as it goes. Call from serial code
// (oneDNN threads through OpenMP).
#pragma once

#include "backend/backend.h"

#include <cstdint>
#include <memory>
#include <string>

namespace lingbot::cpu {

struct MatmulShape {
  int64_t rows, in, out;  // x[rows, in], w[out, in], dst[rows, out]
};

enum class MatmulDst {
  F32,         // dst = product (float32)
  Bf16,        // dst = product (bfloat16)
  AddIntoF32,  // dst += product (float32): the transformer's residual update
};

class OnednnMatmuls {
 public:
  OnednnMatmuls();
  ~OnednnMatmuls();
  OnednnMatmuls(const OnednnMatmuls&) = delete;
  OnednnMatmuls& operator=(const OnednnMatmuls&) = delete;

  // dst[rows, out] (=|+=) act(x[rows, in] w[out, in]^T + bias[out]); x and w
  // bfloat16 (uint16_t bits), bias float32 or null, dst per `kind`.
  // Activation applies only to MatmulDst::F32 and Bf16.
  void run(const MatmulShape& shape, const uint16_t* x, const uint16_t* w, const float* bias, Activation act,
           MatmulDst kind, void* dst);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The implementation oneDNN picks for the bf16 mode's products (a frame's
// qkv shape), for the run header: "brg:avx512_core_amx" (AMX tiles),
// "brg:avx512_core_bf16" (AVX512-BF16); anything else is a slow fallback.
std::string bf16_matmul_name();

// Whether this CPU has bfloat16 arithmetic in hardware (AVX512-BF16, which
// every CPU with AMX-BF16 also has): what --cpu-dtype bf16 requires.
bool cpu_has_bf16_arithmetic();
// Whether it also has AMX-BF16 tiles (and the OS lets this process use
// them), where oneDNN's bf16 products run many times faster than fp32 ones.
// On AVX512-BF16 alone they are slower than fp32 (docs/PERF.md).
bool cpu_has_amx_bf16();

}  // namespace lingbot::cpu
