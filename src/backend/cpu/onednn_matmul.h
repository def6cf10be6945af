// Linear layers' matrix products through oneDNN's matmul primitives: float32
// operands (the fp32 mode, on packed weights) or bfloat16 ones (the bf16 mode,
// --cpu-dtype bf16), float32 sums, a float32 or bfloat16 result, with the
// bias, the activation (GELU, ReLU) and a residual update ("dst +=
// product") applied inside the primitive as post-ops, so the result is
// written once. For bf16 operands oneDNN runs AMX tiles where the CPU has
// them and AVX512-BF16 otherwise.
//
// A primitive is made once per shape and kept (the model has a handful of
// shapes: the scale phase's and the streamed frame's token counts times the
// four Linear layers of a block). Weights come in the model's [out, in]
// row-major layout, which oneDNN repacks into its blocked one inside every
// call (per thread, for every block of rows it takes), or already packed
// (pack_weights, once at load): then the call multiplies and nothing else.
// Call from serial code (oneDNN threads through OpenMP).
#pragma once

#include "backend/backend.h"
#include "core/dtype.h"

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

// How w[out, in] lies in memory: the model's row-major layout, the blocked
// one oneDNN's products read directly (pack_weights), or the AMX tiles' one
// our bf16 kernel reads (linear_amx.h; never passed to OnednnMatmuls).
enum class WeightLayout { RowMajor, Packed, AmxTiles };

class OnednnMatmuls {
 public:
  OnednnMatmuls();
  ~OnednnMatmuls();
  OnednnMatmuls(const OnednnMatmuls&) = delete;
  OnednnMatmuls& operator=(const OnednnMatmuls&) = delete;

  // dst[rows, out] (=|+=) act(x[rows, in] w[out, in]^T + bias[out]); x and w
  // of `operands` (DType::F32, or DType::BF16 as uint16_t bits), bias float32
  // or null, dst per `kind`. Activation applies only to MatmulDst::F32 and Bf16.
  void run(const MatmulShape& shape, DType operands, const void* x, const void* w, const float* bias,
           Activation act, MatmulDst kind, void* dst, WeightLayout layout = WeightLayout::RowMajor);

  // Whether w[out, in] has a packed layout other than the row-major one and
  // of the same size (every shape of the model: its dimensions are multiples
  // of oneDNN's blocks) that a blocked kernel reads, so that pack_weights can
  // fill a tensor of w's shape. Not where oneDNN is capped below AVX-512.
  bool packs(DType operands, int64_t in, int64_t out);
  // packed <- row_major in the blocked layout (packs() must hold), and back:
  // the same values, moved.
  void pack_weights(DType operands, int64_t in, int64_t out, const void* row_major, void* packed);
  void unpack_weights(DType operands, int64_t in, int64_t out, const void* packed, void* row_major);

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
