// The AMX tile instructions the bf16 attention kernel uses, emulated in
// plain C++, so that the kernel's packing, strides and indexing can be
// checked on a CPU without AMX, as CI's (attention_amx_emulated_test.cpp).
// tests/CMakeLists.txt force-includes it ahead of the kernel's source in this
// folder's test binary: it takes <immintrin.h> first and then replaces the
// tile intrinsics (and AVX512-BF16's one conversion the kernel uses) with
// these functions, so that binary executes no tile or AVX512-BF16
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

// vcvtne2ps2bf16 (AVX512-BF16, which CI's CPU may lack): 32 float32 to
// bf16, b's 16 in the low half, a's in the high, rounded to nearest even.
// Integer arithmetic that needs only AVX-512F/BW (finite values: the kernel
// converts exponentials in [0, 1]; no subnormal flush, which changes no
// value above 2^-126).
inline __m256i round16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}
inline __m512bh cvtne2ps_pbh(__m512 a, __m512 b) {
  return (__m512bh)_mm512_inserti64x4(_mm512_castsi256_si512(round16(b)), round16(a), 1);
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
#define _mm512_cvtne2ps_pbh(a, b) amx_emulation::cvtne2ps_pbh(a, b)
