// conv_amx()'s kernel (conv_amx.h): the bf16 mode's convolutions as AMX tile
// instructions, an implicit matrix product over output pixels.
//
// A work item is a range of 32-pixel strips times a range of output
// channels (the Linear kernel's cut). For each strip of its range the item
// gathers the strip's inputs into a per-thread buffer of tiles (row r of
// the strip: output pixel 32 s + r; its K values in (ky, kx, c) order,
// rounded to bf16), then runs the strip's 32-channel blocks over the whole
// of K (amx_tile_blocks.h). A strip is gathered once per range of output
// channels: once per call for the depth head's 128- and 256-channel
// convolutions on its large maps (one range of up to 256 channels, and
// strips enough for the items), more often where the cut narrows the ranges.
//
// Compiled with AMX and AVX-512 code generation, as every *_amx.cpp
// (src/CMakeLists.txt), and run only where conv_amx_available() holds.
#include "backend/cpu/conv_amx.h"

#include "backend/cpu/amx_tile_blocks.h"
#include "backend/cpu/attention_bf16.h"  // amx_begin_tiles, amx_end_tiles

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#include <omp.h>

#include <cstdint>

namespace lingbot::cpu {

namespace {

using namespace amx;

// The pixels a convolution's strips run over and where their inputs lie.
struct Geometry {
  const ConvShape& s;
  int64_t oh, ow, pixels;
  int64_t cbs, kbs;  // 32-channel blocks of c_in; k blocks of a row (kernel^2 cbs)
};

// Strip s's rows into xs as tiles ([k block][half], as the Linear kernel
// packs x): each output pixel's kernel x kernel windows of c_in channels,
// rounded to bf16; taps outside the map and pixels past the last are zeros.
void gather_strip(const float* x, const Geometry& g, int64_t s, uint16_t* xs) {
  const ConvShape& sh = g.s;
  const __m512i zero = _mm512_setzero_si512();
  for (int r = 0; r < kStrip; ++r) {
    uint16_t* const row = xs + (r / 16) * kTileElements + (r % 16) * 32;
    const int64_t p = s * kStrip + r;
    if (p >= g.pixels) {
      for (int64_t kb = 0; kb < g.kbs; ++kb) _mm512_store_si512(row + kb * 2 * kTileElements, zero);
      continue;
    }
    const int64_t n = p / (g.oh * g.ow), y = p / g.ow % g.oh, xo = p % g.ow;
    for (int64_t ky = 0; ky < sh.kernel; ++ky) {
      const int64_t iy = y * sh.stride - sh.pad + ky;
      for (int64_t kx = 0; kx < sh.kernel; ++kx) {
        const int64_t ix = xo * sh.stride - sh.pad + kx;
        uint16_t* dst = row + (ky * sh.kernel + kx) * g.cbs * 2 * kTileElements;
        if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) {
          for (int64_t cb = 0; cb < g.cbs; ++cb) _mm512_store_si512(dst + cb * 2 * kTileElements, zero);
          continue;
        }
        const float* src = x + ((n * sh.h + iy) * sh.w + ix) * sh.c_in;
        for (int64_t cb = 0; cb < g.cbs; ++cb) {
          const __m512 lo = _mm512_loadu_ps(src + cb * 32), hi = _mm512_loadu_ps(src + cb * 32 + 16);
          _mm512_store_si512(dst + cb * 2 * kTileElements, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
      }
    }
  }
}

}  // namespace

namespace detail {

bool conv_amx_built() { return true; }

void conv_amx_kernel(const ConvShape& s, const float* x, const uint16_t* w_tiles, const float* bias,
                     const float* residual, Activation act, float* out, uint16_t* strip_room) {
  const int64_t oh = s.out_h(), ow = s.out_w();
  const Geometry g{s, oh, ow, s.n * oh * ow, s.c_in / 32, s.kernel * s.kernel * (s.c_in / 32)};
  if (g.pixels == 0 || s.c_out == 0) return;
  const int64_t strips = (g.pixels + kStrip - 1) / kStrip;
  const Items items = cut(strips, s.c_out, omp_get_max_threads());
  Epilogue e{bias, act, MatmulDst::F32, out, s.c_out};
  e.residual = residual;
#pragma omp parallel
  {
    alignas(64) static thread_local float sums[kStrip * 32];
    // This thread's strip: 32 rows x K bf16 (144 KiB for a 3 x 3 x 256 window).
    uint16_t* const xs = strip_room + omp_get_thread_num() * g.kbs * 2 * kTileElements;
    amx_begin_tiles();
    // A strip is gathered when its item reaches it. The previous strip's
    // last block may still be in its epilogue then: that reads the sums, not
    // the strip, so the strip may be overwritten.
    run_items(items, strips, g.pixels, s.c_out, g.kbs, w_tiles, sums, e, [&](int64_t st) -> const uint16_t* {
      gather_strip(x, g, st, xs);
      return xs;
    });
    amx_end_tiles();
  }
}

}  // namespace detail

}  // namespace lingbot::cpu

#else

namespace lingbot::cpu::detail {
bool conv_amx_built() { return false; }
void conv_amx_kernel(const ConvShape&, const float*, const uint16_t*, const float*, const float*, Activation, float*,
                     uint16_t*) {}
}  // namespace lingbot::cpu::detail

#endif
