// What the AMX kernels of the bf16 mode's products share (linear_amx.cpp,
// conv_amx.cpp): a product dst[rows, out] = x[rows, K] w[out, K]^T cut into
// 32-row strips of x packed as tiles, and 32 x 32 blocks of sums that stay in
// the accumulator tiles over the whole of K, then pass through the epilogue
// (bias, residual, GELU or ReLU, rounding) to dst.
//
// Tiles: all eight configured as 16 rows of 64 bytes. Each 32 x 32 block of
// sums keeps four accumulator tiles (0-3); per 32 of K it loads two 16-row
// tiles of x (4, 5) and two 16-column tiles of w (6, 7), and issues the four
// products they make, so every loaded tile feeds two products.
//
// Include only from files compiled with AMX and AVX-512 code generation
// (*_amx.cpp). Everything here has internal linkage and no library
// templates (std::min and the like) are used: an instance compiled with AMX
// code could be the one the linker keeps for callers built for another ISA.
#pragma once

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && defined(__AVX512BF16__)
#include "backend/backend.h"
#include "backend/cpu/exp2_avx512.h"
#include "backend/cpu/onednn_matmul.h"  // MatmulDst

#include <immintrin.h>

#include <cstdint>

namespace lingbot::cpu::amx {
namespace {

constexpr int kStrip = 32;            // rows of x per strip (two tiles)
constexpr int kMaxItemCols = 256;     // columns per item, at most
constexpr int kMaxItemStrips = 4;     // strips per item, at most
constexpr int kItemsPerThread = 2;    // items are made smaller until there are this many per thread
constexpr int kTileElements = 512;    // bf16 values in a 1 KiB tile

int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

// How a product is cut into items.
struct Items {
  int64_t strips_per_item, cols_per_item, strip_ranges, col_ranges;
};

Items cut(int64_t strips, int64_t out, int threads) {
  Items it{kMaxItemStrips, kMaxItemCols, 0, 0};
  auto count = [&] {
    it.strip_ranges = (strips + it.strips_per_item - 1) / it.strips_per_item;
    it.col_ranges = (out + it.cols_per_item - 1) / it.cols_per_item;
    return it.strip_ranges * it.col_ranges;
  };
  while (count() < int64_t{kItemsPerThread} * threads && it.strips_per_item > 1) it.strips_per_item /= 2;
  while (count() < int64_t{kItemsPerThread} * threads && it.cols_per_item > 64) it.cols_per_item /= 2;
  return it;
}

// GELU, x (1 + erf(x / sqrt 2)) / 2, with erf by Abramowitz and Stegun 7.1.26
// (absolute error 1.5e-7), the form the fp32 path's GELU uses.
__m512 gelu_erf(__m512 x) {
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752440f));
  const __m512 a = _mm512_abs_ps(z);
  // t = 1 / (1 + p a): rcp14's estimate (2^-14) and one Newton step, a few
  // float32 ulps, instead of a division (about 8 cycles a vector)
  const __m512 d = _mm512_fmadd_ps(a, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.f));
  const __m512 r = _mm512_rcp14_ps(d);
  const __m512 t = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.f)), r);
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  // e^(-a^2) = 2^(-a^2 log2 e)
  const __m512 e = avx512::exp2_nonpositive(_mm512_mul_ps(_mm512_mul_ps(a, a), _mm512_set1_ps(-1.4426950408889634f)));
  const __m512 erf_abs = _mm512_fnmadd_ps(_mm512_mul_ps(p, t), e, _mm512_set1_ps(1.f));
  // erf is odd: the sign of z on |erf|
  const __m512 sign = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32(INT32_MIN)));
  const __m512 erf = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(erf_abs), _mm512_castps_si512(sign)));
  return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), _mm512_add_ps(erf, _mm512_set1_ps(1.f)));
}

// What happens to a block of sums on its way to dst:
//   dst (= | +=) act(sums + bias + residual)
// bias per column, residual (float32, dst's layout) per element; either may
// be null. act: None, Gelu or Relu.
struct Epilogue {
  const float* bias;
  Activation act;
  MatmulDst kind;
  void* dst;
  int64_t out;  // dst's row length
  const float* residual = nullptr;
};

// Rows [r0, r1) of a finished 32 x 32 block of sums (row stride 32) into
// dst at (row0, col).
void finish_rows(const float* sums, int r0, int r1, int64_t row0, int64_t col, const Epilogue& e) {
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (e.bias != nullptr) {
    b0 = _mm512_loadu_ps(e.bias + col);
    b1 = _mm512_loadu_ps(e.bias + col + 16);
  }
  for (int r = r0; r < r1; ++r) {
    __m512 v0 = _mm512_add_ps(_mm512_load_ps(sums + r * 32), b0);
    __m512 v1 = _mm512_add_ps(_mm512_load_ps(sums + r * 32 + 16), b1);
    const int64_t at = (row0 + r) * e.out + col;
    if (e.residual != nullptr) {
      v0 = _mm512_add_ps(v0, _mm512_loadu_ps(e.residual + at));
      v1 = _mm512_add_ps(v1, _mm512_loadu_ps(e.residual + at + 16));
    }
    if (e.act == Activation::Gelu) {
      v0 = gelu_erf(v0);
      v1 = gelu_erf(v1);
    } else if (e.act == Activation::Relu) {
      v0 = _mm512_max_ps(v0, _mm512_setzero_ps());
      v1 = _mm512_max_ps(v1, _mm512_setzero_ps());
    }
    switch (e.kind) {
      case MatmulDst::F32: {
        float* d = static_cast<float*>(e.dst) + at;
        _mm512_storeu_ps(d, v0);
        _mm512_storeu_ps(d + 16, v1);
        break;
      }
      case MatmulDst::AddIntoF32: {
        float* d = static_cast<float*>(e.dst) + at;
        _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), v0));
        _mm512_storeu_ps(d + 16, _mm512_add_ps(_mm512_loadu_ps(d + 16), v1));
        break;
      }
      case MatmulDst::Bf16:
        _mm512_storeu_si512(static_cast<uint16_t*>(e.dst) + at, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
        break;
    }
  }
}

// A block whose sums wait in a buffer for their epilogue: rows [done, valid)
// still to go, to dst at (row0, col).
struct Pending {
  const float* sums = nullptr;
  int done = 0, valid = 0;
  int64_t row0 = 0, col = 0;

  void advance(int rows, const Epilogue& e) {
    if (sums == nullptr || done >= valid) return;
    const int to = done + rows < valid ? done + rows : valid;
    finish_rows(sums, done, to, row0, col, e);
    done = to;
  }
};

// The column blocks [c0, c1) of one strip: xs, the strip's x packed as
// tiles ([k block][half], kbs k blocks); `valid` of its 32 rows real, the
// first at dst row row0; w in the tile layout; sums, a thread's 32 x 32
// float32 buffer.
//
// The epilogue runs one block behind the tiles: block b's sums are stored to
// the buffer, and its rows pass through the epilogue a few per K step while
// the tiles compute block b + 1 into the accumulators; whatever rows are
// left go before block b + 1's sums are stored over them. A core retires in
// order, so vector work placed after a block's tile instructions would leave
// the tiles idle while it runs (GELU takes some 30 vector instructions per 16
// values); spread among them, it runs while the tile unit works. The caller
// finishes the last block of its work (pending.advance(kStrip, e)).
void run_strip(const uint16_t* xs, int64_t kbs, int valid, int64_t row0, const uint16_t* w_tiles, int64_t c0,
               int64_t c1, float* sums, Pending& pending, const Epilogue& e) {
  const int rows_per_step = static_cast<int>((kStrip + kbs - 1) / kbs);
  for (int64_t j = c0; j < c1; j += 32) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const uint16_t* w0 = w_tiles + (j / 16) * kbs * kTileElements;
    const uint16_t* w1 = w0 + kbs * kTileElements;
    for (int64_t kb = 0; kb < kbs; ++kb) {
      _tile_loadd(4, xs + kb * 2 * kTileElements, 64);
      _tile_loadd(5, xs + (kb * 2 + 1) * kTileElements, 64);
      _tile_loadd(6, w0 + kb * kTileElements, 64);
      _tile_loadd(7, w1 + kb * kTileElements, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
      pending.advance(rows_per_step, e);
    }
    pending.advance(kStrip, e);  // none left where K >= 32 x rows_per_step, as it always is
    _tile_stored(0, sums, 32 * 4);
    _tile_stored(1, sums + 16, 32 * 4);
    _tile_stored(2, sums + 16 * 32, 32 * 4);
    _tile_stored(3, sums + 16 * 32 + 16, 32 * 4);
    pending = Pending{sums, 0, valid, row0, j};
  }
}

// Every item of a product of `strips` strips (`rows` real rows) and `out`
// columns cut as `items`, handed out to the team's threads as they free up:
// each item runs its strips' column blocks (run_strip) and finishes its last
// block. strip_of(s) gives strip s's tiles, packing or gathering them first
// where the caller does that per item. Call inside a parallel region, with
// the tiles configured; `sums`: the calling thread's 32 x 32 float32 buffer.
template <typename StripOf>
void run_items(const Items& items, int64_t strips, int64_t rows, int64_t out, int64_t kbs, const uint16_t* w_tiles,
               float* sums, const Epilogue& e, StripOf strip_of) {
#pragma omp for schedule(dynamic) collapse(2)
  for (int64_t cr = 0; cr < items.col_ranges; ++cr)
    for (int64_t sr = 0; sr < items.strip_ranges; ++sr) {
      const int64_t s0 = sr * items.strips_per_item, s1 = smaller(strips, s0 + items.strips_per_item);
      const int64_t c0 = cr * items.cols_per_item, c1 = smaller(out, c0 + items.cols_per_item);
      Pending pending;
      for (int64_t s = s0; s < s1; ++s) {
        const int valid = static_cast<int>(smaller(kStrip, rows - s * kStrip));
        run_strip(strip_of(s), kbs, valid, s * kStrip, w_tiles, c0, c1, sums, pending, e);
      }
      pending.advance(kStrip, e);
    }
}

}  // namespace
}  // namespace lingbot::cpu::amx

#endif
