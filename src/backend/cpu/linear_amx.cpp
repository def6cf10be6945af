// linear_amx()'s kernel (linear_amx.h): the bf16 mode's Linear products as
// AMX tile instructions (the blocks of sums and their epilogue:
// amx_tile_blocks.h).
//
// A work item is a range of 32-row strips times a range of columns, handed
// out to the threads as they free up. For each strip of its range the item
// runs over its 32-column blocks, each over the whole of K: the strip's
// packed x (32 rows x K, 64 KiB at K = 1,024) is read from L2 by every
// block, in consecutive lines, and the item's columns of w stay in L2 for
// all of its strips. A finished block is stored from the accumulators to a
// buffer and passes through the epilogue (bias, GELU, residual update or
// rounding to bf16) to dst while the tiles compute the next block.
// (Cutting K into chunks that keep a strip's x in L1 was measured: slower on
// most of the model's shapes, docs/PERF.md, "Linear products on AMX tiles".)
//
// Compiled with AMX and AVX-512 code generation, as every *_amx.cpp
// (src/CMakeLists.txt), and run only where linear_amx_available() holds; its
// helpers keep internal linkage, so none of its code reaches another ISA's
// callers.
#include "backend/cpu/linear_amx.h"

#include "backend/cpu/amx_tile_blocks.h"
#include "backend/cpu/attention_bf16.h"  // amx_begin_tiles, amx_end_tiles

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#include <omp.h>

#include <cstdint>

namespace lingbot::cpu {

namespace {

using namespace amx;

// x [rows, in] -> strips of tiles: strip s, k block kb, half h (rows
// 32 s + 16 h ..) at ((s * kbs + kb) * 2 + h) * 512; rows past `rows` zero.
void pack_strip(const uint16_t* x, int64_t rows, int64_t in, int64_t s, uint16_t* strips) {
  const int64_t kbs = in / 32;
  uint16_t* const base = strips + s * kbs * 2 * kTileElements;
  for (int r = 0; r < kStrip; ++r) {
    const int64_t row = s * kStrip + r;
    uint16_t* dst = base + (r / 16) * kTileElements + (r % 16) * 32;
    if (row >= rows) {
      for (int64_t kb = 0; kb < kbs; ++kb) _mm512_store_si512(dst + kb * 2 * kTileElements, _mm512_setzero_si512());
      continue;
    }
    const uint16_t* src = x + row * in;
    for (int64_t kb = 0; kb < kbs; ++kb)
      _mm512_store_si512(dst + kb * 2 * kTileElements, _mm512_loadu_si512(src + kb * 32));
  }
}

}  // namespace

namespace detail {

bool linear_amx_built() { return true; }

void linear_amx_kernel(const uint16_t* x, int64_t rows, int64_t in, const uint16_t* w_tiles, int64_t out,
                       const float* bias, Activation act, MatmulDst kind, void* dst, uint16_t* xs) {
  if (rows == 0 || out == 0) return;
  const int64_t strips = (rows + kStrip - 1) / kStrip;
  const Items items = cut(strips, out, omp_get_max_threads());
  const Epilogue e{bias, act, kind, dst, out};
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t s = 0; s < strips; ++s) pack_strip(x, rows, in, s, xs);
    alignas(64) static thread_local float sums[kStrip * 32];
    amx_begin_tiles();
    const int64_t kbs = in / 32;
    run_items(items, strips, rows, out, kbs, w_tiles, sums, e,
              [&](int64_t s) -> const uint16_t* { return xs + s * kbs * 2 * kTileElements; });
    amx_end_tiles();
  }
}

}  // namespace detail

}  // namespace lingbot::cpu

#else

namespace lingbot::cpu::detail {
bool linear_amx_built() { return false; }
void linear_amx_kernel(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, const float*, Activation, MatmulDst,
                       void*, uint16_t*) {}
}  // namespace lingbot::cpu::detail

#endif
