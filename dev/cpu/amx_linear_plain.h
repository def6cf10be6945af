// The simple Linear product on AMX tiles shared by the dev/cpu experiments
// (amx_matmul.cpp measures it against oneDNN; amx_matmul_blocked.cpp uses it
// as the twin of its blocked variants): bf16 conversions, W packed into the
// tiles' layout, and the plain kernel.
//
//   x [M, K] bf16 row-major (the activations as the model holds them),
//   W [N, K] bf16 row-major (a Linear weight), packed once into the tiles'
//   layout: tile (nb, kb) holds W[nb*16 + c][kb*32 + 2r + p] at [r][c][p]
//   (16 rows of 16 column pairs, 1 KiB), the "VNNI" order tdpbf16ps reads;
//   y [M, N] float32.
// Each work item is a 128 x 128 block of y; its 32 x 32 steps keep 4
// accumulator tiles, load 2 tiles of x straight from the row-major
// activations and 2 of W per 32 of K. M is padded to a multiple of 32.
#pragma once

#include "amx_tiles.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace amx_plain {

constexpr int kBlockM = 128, kBlockN = 128;

inline uint16_t to_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
inline float from_bf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline std::vector<uint16_t> pack_weights(const std::vector<uint16_t>& w, int n, int k) {
  std::vector<uint16_t> packed(static_cast<size_t>(n) * k);
  const int kbs = k / 32;
  for (int nb = 0; nb < n / 16; ++nb)
    for (int kb = 0; kb < kbs; ++kb) {
      uint16_t* tile = packed.data() + (static_cast<size_t>(nb) * kbs + kb) * 512;
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
          for (int p = 0; p < 2; ++p)
            tile[(r * 16 + c) * 2 + p] = w[static_cast<size_t>(nb * 16 + c) * k + kb * 32 + 2 * r + p];
    }
  return packed;
}

inline void amx_linear(const uint16_t* x, const uint16_t* packed, float* y, int m_padded, int n, int k) {
  const int kbs = k / 32;
  const int mblocks = (m_padded + kBlockM - 1) / kBlockM, nblocks = (n + kBlockN - 1) / kBlockN;
#pragma omp parallel
  {
    configure_tiles();
#pragma omp for schedule(static) collapse(2)
    for (int nb = 0; nb < nblocks; ++nb)
      for (int mb = 0; mb < mblocks; ++mb) {
        const int m_end = std::min(m_padded, (mb + 1) * kBlockM), n_end = std::min(n, (nb + 1) * kBlockN);
        for (int m = mb * kBlockM; m < m_end; m += 32)
          for (int j = nb * kBlockN; j < n_end; j += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            const uint16_t* a0 = x + static_cast<size_t>(m) * k;
            const uint16_t* a1 = a0 + static_cast<size_t>(16) * k;
            const uint16_t* b0 = packed + static_cast<size_t>(j / 16) * kbs * 512;
            const uint16_t* b1 = b0 + static_cast<size_t>(kbs) * 512;
            for (int kb = 0; kb < kbs; ++kb) {
              _tile_loadd(4, a0 + kb * 32, k * 2);
              _tile_loadd(5, a1 + kb * 32, k * 2);
              _tile_loadd(6, b0 + static_cast<size_t>(kb) * 512, 64);
              _tile_loadd(7, b1 + static_cast<size_t>(kb) * 512, 64);
              _tile_dpbf16ps(0, 4, 6);
              _tile_dpbf16ps(1, 4, 7);
              _tile_dpbf16ps(2, 5, 6);
              _tile_dpbf16ps(3, 5, 7);
            }
            float* c = y + static_cast<size_t>(m) * n + j;
            _tile_stored(0, c, n * 4);
            _tile_stored(1, c + 16, n * 4);
            _tile_stored(2, c + static_cast<size_t>(16) * n, n * 4);
            _tile_stored(3, c + static_cast<size_t>(16) * n + 16, n * 4);
          }
      }
    _tile_release();
  }
}

// The largest |y - x W^T| / sum |products| over every `step`-th row of y
// [m, n] (row stride n), the product taken in float64 from the same bf16
// values.
inline double max_error_vs_float64(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, const float* y,
                                   int m, int n, int k, int step) {
  double worst = 0;
#pragma omp parallel for reduction(max : worst)
  for (int i = 0; i < m; i += step) {
    for (int j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int c = 0; c < k; ++c) {
        const double p = static_cast<double>(from_bf16(x[static_cast<size_t>(i) * k + c])) *
                         from_bf16(w[static_cast<size_t>(j) * k + c]);
        ref += p;
        mag += std::fabs(p);
      }
      worst = std::max(worst, std::fabs(y[static_cast<size_t>(i) * n + j] - ref) / mag);
    }
  }
  return worst;
}

}  // namespace amx_plain
