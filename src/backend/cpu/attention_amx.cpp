// attention_bf16()'s kernel on AMX tiles (attention_bf16.h): both products
// issued as tile instructions directly, instead of through oneDNN
// primitives, with the keys and values packed once per key block into the
// layout the tiles read.
//
// A work item is one head and a tile of queries (bf16, padded to 32 rows).
// Per key block of up to kBf16KeyBlock keys (bf16, padded to 32 keys):
//   Kp  the block's keys as the B operand of S = Q K^T: tile (g, kk) holds,
//       for keys 16g .. 16g + 15 and dims 32kk .. 32kk + 31, row r = the
//       16 keys' dim pairs (2r, 2r + 1): a 16 x 16 transpose of 32-bit pairs;
//   Vp  the block's values as the B operand of O += P V: tile (kg, dg) holds,
//       for keys 32kg .. 32kg + 31 and dims 16dg .. 16dg + 15, row r = the
//       two keys 2r, 2r + 1 interleaved, dim by dim.
// Then, for each group of 32 query rows: S [32][block] (4 accumulator tiles
// per 32 keys, stored), the online softmax step (bf16_softmax_avx512.h, the
// oneDNN kernel's, which also rescales O by alpha), and O += P V with O's
// rows loaded into the accumulator tiles, 32 dims at a time, and stored
// back; the groups overlap in a software pipeline (BlockPipeline below).
// Every product sum is float32 (tdpbf16ps), as in oneDNN's kernel; P is
// rounded to bf16 as there.
//
// Tiles: all eight configured as 16 rows of 64 bytes. In each 32 x 32 step
// tiles 0-3 accumulate, 4-5 hold two 16-row slices of the A operand and 6-7
// two B tiles: two A and two B loads feed four products.
//
// This file alone is compiled with AMX and AVX-512 code generation
// (src/CMakeLists.txt) and runs only where the CPU has AMX-BF16 (and
// AVX512-BF16) and Linux grants the tiles (bf16_kernel_available(Bf16Kernel::Amx, ...)); like the
// AVX-512 files it instantiates no library template and keeps its helpers
// to internal linkage, so none of its code can reach another ISA's callers.
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/bf16_softmax_avx512.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#include <math.h>  // log2f: libm's, as the softmax step's exp2f

#include <cstring>

namespace lingbot::cpu::detail {

namespace {

constexpr int kTileBytes = 1024;             // 16 rows x 64 bytes
constexpr int kTileElements = kTileBytes / 2;  // bf16 elements of a tile

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Keys 16g .. 16g + 15 of k ([n][D] bf16), dims 32kk .. 32kk + 31, into one
// B tile: dst[r][c] (32-bit pairs) = k32[16g + c][16kk + r].
void pack_key_tile(const uint16_t* k, int D, int g, int kk, uint16_t* dst) {
  uint32_t rows[16][16];
  for (int c = 0; c < 16; ++c) std::memcpy(rows[c], k + (int64_t{16} * g + c) * D + 32 * kk, 64);
  uint32_t tile[16][16];
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) tile[r][c] = rows[c][r];
  std::memcpy(dst, tile, kTileBytes);
}

// Keys 32kg .. 32kg + 31 of v ([n][D] bf16), dims 16dg .. 16dg + 15, into one
// B tile: row r interleaves keys 2r and 2r + 1.
void pack_value_tile(const uint16_t* v, int D, int kg, int dg, uint16_t* dst) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int r = 0; r < 16; ++r) {
    const uint16_t* even = v + (int64_t{32} * kg + 2 * r) * D + 16 * dg;
    const __m512i both = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + D)), 1);
    _mm512_storeu_si512(dst + r * 32, _mm512_permutexvar_epi16(interleave, both));
  }
}

// 32 float32 -> bf16 bits, nearest even (every AMX CPU has AVX512-BF16).
__m512i round32_bf16(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

}  // namespace

bool amx_attention_built() { return true; }

void amx_begin_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

void amx_end_tiles() { _tile_release(); }

namespace {

// One 256-key block of a work item, its 32-row groups in a software
// pipeline: while group g's softmax runs on the vector units, the tiles
// compute group g + 1's scores and add group g - 1's P V into its O. The
// tile instructions run asynchronously beside the vector code, but a core
// retires in order, so they are interleaved with the softmax in small
// chunks (8 tile products, ~128 cycles, between a few rows of softmax):
// enough independent vector work to cover each chunk without filling the
// reorder buffer. S and P are double-buffered by group parity.
class BlockPipeline {
 public:
  BlockPipeline(const AmxScratch& w, int tile, int D, int n, float c)
      : w_(w), groups_(tile / 32), D_(D), ksteps_(D / 32), n_(n), padded_((n + 31) / 32 * 32), c_(c) {}

  void run() {
    for (int j = 0; j < padded_ / 32; ++j) scores_chunk(0, j);
    for (int g = 0; g < groups_; ++g) {
      const int s_chunks = g + 1 < groups_ ? padded_ / 32 : 0;
      const int pv_chunks = g >= 1 ? value_chunks() : 0;
      const int total = s_chunks + pv_chunks;
      int row = 0;
      for (int i = 0; i < total; ++i) {
        if (i < s_chunks) {
          scores_chunk(g + 1, i);
        } else {
          values_chunk(g - 1, i - s_chunks);
        }
        const int until = 32 * (i + 1) / total;
        softmax_rows(g, row, until);
        row = until;
      }
      softmax_rows(g, row, 32);
    }
    for (int i = 0; i < value_chunks(); ++i) values_chunk(groups_ - 1, i);
  }

 private:
  static constexpr int ld = kBf16KeyBlock;  // row stride of S and P
  static constexpr int kKeyGroupsPerChunk = 2;  // 32-key groups of P V per chunk

  float* scores(int g) const { return w_.s + (g & 1) * 32 * ld; }
  uint16_t* weights(int g) const { return w_.p + (g & 1) * 32 * ld; }
  int key_groups() const { return padded_ / 32; }
  int chunks_per_dims() const { return (key_groups() + kKeyGroupsPerChunk - 1) / kKeyGroupsPerChunk; }
  int value_chunks() const { return D_ / 32 * chunks_per_dims(); }

  // S[32][32] of group g, keys 32j .. 32j + 31.
  void scores_chunk(int g, int j) const {
    const uint16_t* q0 = w_.q + int64_t{32} * g * D_;
    const uint16_t* b0 = w_.kp + int64_t{2 * j} * ksteps_ * kTileElements;
    const uint16_t* b1 = b0 + int64_t{ksteps_} * kTileElements;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int kk = 0; kk < ksteps_; ++kk) {
      _tile_loadd(4, q0 + 32 * kk, D_ * 2);
      _tile_loadd(5, q0 + 16 * D_ + 32 * kk, D_ * 2);
      _tile_loadd(6, b0 + kk * kTileElements, 64);
      _tile_loadd(7, b1 + kk * kTileElements, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    float* s = scores(g) + 32 * j;
    _tile_stored(0, s, ld * 4);
    _tile_stored(1, s + 16, ld * 4);
    _tile_stored(2, s + 16 * ld, ld * 4);
    _tile_stored(3, s + 16 * ld + 16, ld * 4);
  }

  // Chunk i of group g's O[32][D] += P V: dims 32 (i / chunks_per_dims())
  // onwards, a run of key groups; O's tiles stay loaded across the run's
  // chunks (the softmax between them touches no tile).
  void values_chunk(int g, int i) const {
    const int d = 32 * (i / chunks_per_dims());
    const int kg0 = i % chunks_per_dims() * kKeyGroupsPerChunk;
    const int kg1 = kg0 + kKeyGroupsPerChunk < key_groups() ? kg0 + kKeyGroupsPerChunk : key_groups();
    float* o0 = w_.o + int64_t{32} * g * D_ + d;
    if (kg0 == 0) {
      _tile_loadd(0, o0, D_ * 4);
      _tile_loadd(1, o0 + 16, D_ * 4);
      _tile_loadd(2, o0 + 16 * D_, D_ * 4);
      _tile_loadd(3, o0 + 16 * D_ + 16, D_ * 4);
    }
    const uint16_t* p = weights(g);
    for (int kg = kg0; kg < kg1; ++kg) {
      const uint16_t* b0 = w_.vp + (int64_t{kg} * (D_ / 16) + d / 16) * kTileElements;
      _tile_loadd(4, p + 32 * kg, ld * 2);
      _tile_loadd(5, p + 16 * ld + 32 * kg, ld * 2);
      _tile_loadd(6, b0, 64);
      _tile_loadd(7, b0 + kTileElements, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    if (kg1 == key_groups()) {
      _tile_stored(0, o0, D_ * 4);
      _tile_stored(1, o0 + 16, D_ * 4);
      _tile_stored(2, o0 + 16 * D_, D_ * 4);
      _tile_stored(3, o0 + 16 * D_ + 16, D_ * 4);
    }
  }

  // The softmax step of group g's rows [r0, r1).
  void softmax_rows(int g, int r0, int r1) const {
    if (r1 <= r0) return;
    const int r = 32 * g + r0;
    avx512::bf16_softmax_step(scores(g) + r0 * ld, r1 - r0, n_, ld, c_, w_.m + r, w_.l + r, w_.o + int64_t{r} * D_, D_,
                              weights(g) + r0 * ld, round32_bf16);
  }

  const AmxScratch& w_;
  int groups_, D_, ksteps_, n_, padded_;
  float c_;
};

}  // namespace

void amx_attention_item(const float* q, int64_t nq, const KvSpan* spans, size_t count, int num_heads, int D,
                        float c, const Bf16ItemTarget& item, int h, int64_t i0, int tile, const AmxScratch& w) {
  const int rows = static_cast<int>(nq - i0 < tile ? nq - i0 : tile);
  const int64_t row = int64_t{num_heads} * D;
  const int ksteps = D / 32;  // 32 dims per product step
  bf16_round_rows_avx512(q + i0 * row + int64_t{h} * D, row, rows, D, w.q, D);
  for (int64_t i = int64_t{rows} * D; i < int64_t{tile} * D; ++i) w.q[i] = 0;
  for (int64_t i = 0; i < int64_t{tile} * D; ++i) w.o[i] = 0.f;
  for (int r = 0; r < tile; ++r) {
    w.m[r] = -__builtin_inff();
    w.l[r] = 0.f;
  }
  tiled::KeyStream keys(spans, count, num_heads, D, h, item.first_key, item.key_count);
  for (;;) {
    const int n = keys.next_block_bf16(kBf16KeyBlock, w.k, w.v, w.row);
    if (n == 0) break;
    const int padded = (n + 31) / 32 * 32;
    for (int64_t i = int64_t{n} * D; i < int64_t{padded} * D; ++i) {  // scores masked; P is 0 there
      w.k[i] = 0;
      w.v[i] = 0;
    }
    for (int g = 0; g < padded / 16; ++g)
      for (int kk = 0; kk < ksteps; ++kk) pack_key_tile(w.k, D, g, kk, w.kp + (int64_t{g} * ksteps + kk) * kTileElements);
    for (int kg = 0; kg < padded / 32; ++kg)
      for (int dg = 0; dg < D / 16; ++dg)
        pack_value_tile(w.v, D, kg, dg, w.vp + (int64_t{kg} * (D / 16) + dg) * kTileElements);
    BlockPipeline(w, tile, D, n, c).run();
  }
  for (int r = 0; r < rows; ++r) {
    const __m512 inv = _mm512_set1_ps(1.f / w.l[r]);  // l >= 1: the row's maximum contributes 2^0
    const float* orow = w.o + int64_t{r} * D;
    float* dst = item.out + (i0 + r) * row + int64_t{h} * D;
    for (int d = 0; d < D; d += 16) _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_loadu_ps(orow + d), inv));
    if (item.lse != nullptr) item.lse[(i0 + r) * num_heads + h] = w.m[r] + ::log2f(w.l[r]);
  }
}

}  // namespace lingbot::cpu::detail

#else  // a build without AMX code generation

namespace lingbot::cpu::detail {
bool amx_attention_built() { return false; }
void amx_begin_tiles() {}
void amx_end_tiles() {}
void amx_attention_item(const float*, int64_t, const KvSpan*, size_t, int, int, float, const Bf16ItemTarget&, int,
                        int64_t, int, const AmxScratch&) {}
}  // namespace lingbot::cpu::detail

#endif
