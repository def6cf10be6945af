// The bf16 mode's Linear products on AMX tiles, issued directly (tile
// instructions, not a library), for CPUs with AMX-BF16:
//
//   dst (= | +=) act(x[rows, in] w[out, in]^T + bias[out])
//
// x and w bf16, sums float32, the bias, GELU and the residual update applied
// to each 32 x 32 block of sums before it leaves the core; dst bf16 or
// float32 as MatmulDst says. The same arithmetic as oneDNN's bf16 matmul
// (products of bf16 values are exact in float32); what differs is where the
// operands come from (docs/PERF.md, "Linear products on AMX tiles"):
//
//   - w is packed once at load into the tiles' layout (linear_amx_pack_weights);
//   - x is packed per call into 16 x 32 tiles of consecutive bytes, so the
//     tiles of a 32-row strip lie in consecutive cache lines instead of a
//     few L1 sets (rows of 1,024 or 4,096 bf16 lie 2 or 8 KiB apart);
//   - each 32 x 32 block of sums stays in the accumulators over the whole
//     of K, and a thread's work item (up to 4 strips x 256 columns) keeps
//     its columns of w in L2 for all of its strips.
//
// Every dimension but the rows must be a multiple of 32 (the model's: 1,024,
// 3,072, 4,096); rows are padded to 32 with zeros inside. Call from serial
// code: the product threads through OpenMP.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/onednn_matmul.h"

#include <cstdint>

namespace lingbot::cpu {

// Whether w[out, in] has the tile layout: both multiples of 32.
bool linear_amx_fits(int64_t in, int64_t out);

// w[out, in] row-major <-> the tile layout, the same number of bf16 values:
// tile (nb, kb) (1 KiB, at (nb * in / 32 + kb) * 512 elements) holds
// w[16 nb + c][32 kb + 2 r + p] at [r][c][p], the pairs tdpbf16ps reads as B.
void linear_amx_pack_weights(const uint16_t* w, int64_t in, int64_t out, uint16_t* tiles);
void linear_amx_unpack_weights(const uint16_t* tiles, int64_t in, int64_t out, uint16_t* w);

// Whether this build has the kernel (compiled with AMX code generation) and
// this CPU and process may run it (AMX-BF16, AVX512-BF16, the tile state
// granted by Linux).
bool linear_amx_available();

// dst per `kind` from x [rows, in] (bf16 bits) and w in the tile layout;
// bias float32 or null; act None or Gelu (the erf form), for MatmulDst::F32
// and Bf16 only.
void linear_amx(const uint16_t* x, int64_t rows, int64_t in, const uint16_t* w_tiles, int64_t out,
                const float* bias, Activation act, MatmulDst kind, void* dst);

namespace detail {
bool linear_amx_built();
// The kernel itself, without the availability check (the emulated-tile test
// calls it on CPUs without AMX); x_strips: room for x packed, rows rounded
// up to 32 times in bf16 values, 64-byte aligned.
void linear_amx_kernel(const uint16_t* x, int64_t rows, int64_t in, const uint16_t* w_tiles, int64_t out,
                       const float* bias, Activation act, MatmulDst kind, void* dst, uint16_t* x_strips);
// linear_amx's entry with the check left out (for that test).
void linear_amx_unchecked(const uint16_t* x, int64_t rows, int64_t in, const uint16_t* w_tiles, int64_t out,
                          const float* bias, Activation act, MatmulDst kind, void* dst);
}  // namespace detail

}  // namespace lingbot::cpu
