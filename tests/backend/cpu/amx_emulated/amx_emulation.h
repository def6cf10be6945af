// The AMX tile instructions the bf16 attention kernel uses, emulated in
// plain C++, so that the kernel's packing, strides and indexing can be
// checked on a CPU without AMX, as CI's (attention_amx_emulated_test.cpp).
// tests/CMakeLists.txt force-includes it ahead of the kernel's source in this
// folder's test binary: it takes <immintrin.h> first and then replaces the
// tile intrinsics with these functions, so that binary executes no tile
// instruction (and its AMX kernel is this emulation, not the tiles).
//
// Semantics (Intel SDM, AMX): 8 tiles of 16 rows x 64 bytes (the kernel's
// configuration); tdpbf16ps C[m][n] += sum_k A[m][2k] B[k][2n] + A[m][2k+1]
// B[k][2n+1], bf16 products summed in float32.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace amx_emulation {

struct Tiles {
  alignas(64) unsigned char bytes[8][16][64];
};
inline thread_local Tiles tiles;

inline float bf16_value(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline void load(int t, const void* base, long stride) {
  for (int r = 0; r < 16; ++r) std::memcpy(tiles.bytes[t][r], static_cast<const char*>(base) + r * stride, 64);
}
inline void store(int t, void* base, long stride) {
  for (int r = 0; r < 16; ++r) std::memcpy(static_cast<char*>(base) + r * stride, tiles.bytes[t][r], 64);
}
inline void zero(int t) { std::memset(tiles.bytes[t], 0, sizeof tiles.bytes[t]); }
inline void dpbf16ps(int c, int a, int b) {
  float acc[16][16];
  uint16_t am[16][32], bm[16][32];
  std::memcpy(acc, tiles.bytes[c], sizeof acc);
  std::memcpy(am, tiles.bytes[a], sizeof am);
  std::memcpy(bm, tiles.bytes[b], sizeof bm);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n)
      for (int k = 0; k < 16; ++k)
        acc[m][n] += bf16_value(am[m][2 * k]) * bf16_value(bm[k][2 * n]) +
                     bf16_value(am[m][2 * k + 1]) * bf16_value(bm[k][2 * n + 1]);
  std::memcpy(tiles.bytes[c], acc, sizeof acc);
}

}  // namespace amx_emulation

#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#define _tile_loadd(t, base, stride) amx_emulation::load(t, base, stride)
#define _tile_stored(t, base, stride) amx_emulation::store(t, base, stride)
#define _tile_zero(t) amx_emulation::zero(t)
#define _tile_dpbf16ps(c, a, b) amx_emulation::dpbf16ps(c, a, b)
#define _tile_loadconfig(config) ((void)(config))
#define _tile_release() ((void)0)
