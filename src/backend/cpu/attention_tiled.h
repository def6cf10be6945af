// The tiled attention kernel, written once over a SIMD type and compiled once
// per instruction set: attention.cpp instantiates it with AVX2 vectors,
// attention_avx512.cpp (built with AVX-512 code generation) with AVX-512 ones.
//
// Queries are the SIMD lanes. With Qt = a tile's queries transposed to
// [head_dim][lanes], a block of kKeyBlock keys is processed as
//   S[key][lane]  = sum_c K[key][c] * Qt[c][lane]        (scores)
//   m, l, P       = online softmax per lane (column)      (exp2 domain)
//   Ot[c][lane]   = Ot[c][lane] * alpha[lane] + sum_key V[key][c] * P[key][lane]
// so every product is a broadcast-times-vector FMA on register tiles of
// Simd::kTileRows rows x Simd::kLaneVectors vectors of lanes, the softmax
// statistics are vectors across queries, and no transpose of K or V is
// needed. AVX2's 16 registers hold 6 rows x 16 lanes (12 accumulators);
// AVX-512's 32 hold 8 rows x 48 lanes (24 accumulators), so each key and
// value element loaded feeds three times the queries, and 8 rows divide the
// 64 keys of a block and the model's head_dim 64 without a partial tile.
// Every query's sums run in the same order in both builds, whatever the
// tiling, so the two give identical results. A work item is one head, one
// tile of queries and one range of keys (attention_splits.h: ranges where
// (tile, head) pairs are few, merged by their log-sum-exps). Qt, Ot and S are kept lane
// group by lane group, each group's rows contiguous: with rows a power of two
// apart they would fall on a few L1 sets. The key block's rows for one head
// are copied to a small contiguous buffer first: in the cache they sit
// num_heads*head_dim floats apart (4 KiB for 16 x 64), which would alias the
// same L1 sets too.
//
// Everything here has internal linkage (the unnamed namespace) on purpose:
// each includer compiles it with its own ISA flags, and a shared inline
// definition could be merged by the linker into the AVX-512 copy and run on
// a CPU without AVX-512. For the same reason the kernel calls no inline
// library templates (std::fill, std::min on floats) that another translation
// unit might instantiate with other flags (plain loops instead), takes the
// spans as a pointer and a count, and leaves allocation and error checks
// (fmt's templates) to the caller, which is built for the baseline.
#pragma once

#include "backend/cpu/attention.h"
#include "backend/cpu/attention_splits.h"

#include <math.h>  // log2f: libm's, no inline code compiled with this file's flags
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace lingbot::cpu::tiled {
namespace {

constexpr float kLog2e = 1.4426950408889634f;  // softmax in base 2: e^x = 2^(x log2 e)
constexpr int kKeyBlock = 64;      // keys per online-softmax step
// Queries per work item: a multiple of every build's lanes (16 and 48).
// Each item copies every key block of its head out of the cache once, so
// the fewer items per head the fewer copies (against a full window, 70k
// keys x 512 bytes per head and item); but a few items per thread keep the
// threads evenly loaded. query_tile() picks between the two.
constexpr int kQueryTileStep = 48;
constexpr int kMaxQueryTile = 21 * kQueryTileStep;  // 1008: a whole frame's 978 tokens

inline int query_tile(int64_t nq, int num_heads, int threads) {
  const int64_t tiles_per_head = (2 * int64_t{threads} + num_heads - 1) / num_heads;  // >= 2 items per thread
  const int64_t per_tile = (nq + tiles_per_head - 1) / tiles_per_head;
  const int64_t rounded = (per_tile + kQueryTileStep - 1) / kQueryTileStep * kQueryTileStep;
  return static_cast<int>(rounded < kMaxQueryTile ? rounded : kMaxQueryTile);
}

// Floats of scratch each thread needs: Qt, Ot [D][QT]; S/P [kKeyBlock][QT]
// (each as [group][rows][kLanes]); K, V blocks [kKeyBlock][D]; m, l, alpha [QT].
constexpr int64_t scratch_floats(int head_dim, int query_tile) {
  return 2 * int64_t{head_dim} * query_tile + int64_t{kKeyBlock} * query_tile + 2 * int64_t{kKeyBlock} * head_dim +
         3 * int64_t{query_tile};
}

// The stored forms of a key or value element, read back to float32 (the
// formats of kv/fp8_e4m3.h and core/half.h, restated here with plain bit
// operations: see the note on internal linkage above).
inline float bf16_value(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float e4m3_value(uint8_t code) {  // the two NaN codes never occur in a store
  const uint32_t exp = (code >> 3) & 0xfu;
  const uint32_t man = code & 0x7u;
  float magnitude;
  if (exp == 0) {
    magnitude = static_cast<float>(man) * (1.f / 512.f);
  } else {
    const uint32_t bits = ((exp + 120u) << 23) | (man << 20);  // 2^(exp-7) * (1 + man/8)
    std::memcpy(&magnitude, &bits, 4);
  }
  return (code & 0x80u) ? -magnitude : magnitude;
}

// float32 -> bfloat16 bits, nearest even (finite values: keys and values).
inline uint16_t bf16_bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Walks the keys of all spans in order, handing out one head's K/V slices
// as float32 (dequantised from the span's stored element type), or as
// bfloat16 for the bf16 attention. A stream may cover only the keys
// [first, first + limit) of the spans taken together (a key split).
class KeyStream {
 public:
  KeyStream(const KvSpan* spans, size_t count, int num_heads, int head_dim, int head, int64_t first = 0,
            int64_t limit = std::numeric_limits<int64_t>::max())
      : spans_(spans), count_(count), num_heads_(num_heads), head_dim_(head_dim), head_(head), left_(limit) {
    while (span_ < count_ && first >= spans_[span_].tokens) {
      first -= spans_[span_].tokens;
      ++span_;
    }
    token_ = first;
  }

  // Copies the head slices of up to `max` next keys into kb, vb ([n][head_dim]).
  int next_block(int max, int head_dim, float* kb, float* vb) {
    return walk(max, [&](int n, const KvSpan& s, int64_t off, int64_t token) {
      float* kd = kb + int64_t{n} * head_dim;
      float* vd = vb + int64_t{n} * head_dim;
      if (s.element == KvElement::F32) {
        std::memcpy(kd, static_cast<const float*>(s.k) + off, sizeof(float) * static_cast<size_t>(head_dim));
        std::memcpy(vd, static_cast<const float*>(s.v) + off, sizeof(float) * static_cast<size_t>(head_dim));
      } else if (s.element == KvElement::Bf16) {
        const uint16_t* ks = static_cast<const uint16_t*>(s.k) + off;
        const uint16_t* vs = static_cast<const uint16_t*>(s.v) + off;
        for (int c = 0; c < head_dim; ++c) kd[c] = bf16_value(ks[c]);
        for (int c = 0; c < head_dim; ++c) vd[c] = bf16_value(vs[c]);
      } else {
        dequantise_fp8(s, off, token, kd, vd);
      }
    });
  }

  // The same keys as bfloat16 bits: bf16 spans copied as stored (exactly
  // what next_block() followed by rounding gives), float32 and fp8 ones read
  // back to float32 as above and rounded to nearest even. `row` is scratch
  // of 2 * head_dim floats.
  int next_block_bf16(int max, uint16_t* kb, uint16_t* vb, float* row) {
    const int D = head_dim_;
    return walk(max, [&](int n, const KvSpan& s, int64_t off, int64_t token) {
      uint16_t* kd = kb + int64_t{n} * D;
      uint16_t* vd = vb + int64_t{n} * D;
      if (s.element == KvElement::Bf16) {
        std::memcpy(kd, static_cast<const uint16_t*>(s.k) + off, sizeof(uint16_t) * static_cast<size_t>(D));
        std::memcpy(vd, static_cast<const uint16_t*>(s.v) + off, sizeof(uint16_t) * static_cast<size_t>(D));
        return;
      }
      const float* kf = static_cast<const float*>(s.k) + off;
      const float* vf = static_cast<const float*>(s.v) + off;
      if (s.element == KvElement::Fp8) {
        dequantise_fp8(s, off, token, row, row + D);
        kf = row;
        vf = row + D;
      }
      for (int c = 0; c < D; ++c) kd[c] = bf16_bits_of(kf[c]);
      for (int c = 0; c < D; ++c) vd[c] = bf16_bits_of(vf[c]);
    });
  }

 private:
  // Calls emit(n, span, offset of the head's slice, token) for up to `max`
  // next keys; returns how many.
  template <typename Emit>
  int walk(int max, Emit&& emit) {
    int n = 0;
    const int64_t row = int64_t{num_heads_} * head_dim_;
    const int64_t head_offset = int64_t{head_} * head_dim_;
    while (n < max && left_ > 0 && span_ < count_) {
      const KvSpan& s = spans_[span_];
      if (token_ >= s.tokens) {
        ++span_;
        token_ = 0;
        continue;
      }
      emit(n, s, token_ * row + head_offset, token_);
      ++token_;
      ++n;
      --left_;
    }
    return n;
  }

  void dequantise_fp8(const KvSpan& s, int64_t off, int64_t token, float* kd, float* vd) const {
    const uint8_t* ks = static_cast<const uint8_t*>(s.k) + off;
    const uint8_t* vs = static_cast<const uint8_t*>(s.v) + off;
    const float k_scale = s.k_scale[token * num_heads_ + head_];
    const float v_scale = s.v_scale[token * num_heads_ + head_];
    for (int c = 0; c < head_dim_; ++c) kd[c] = e4m3_value(ks[c]) * k_scale;
    for (int c = 0; c < head_dim_; ++c) vd[c] = e4m3_value(vs[c]) * v_scale;
  }

  const KvSpan* spans_;
  size_t count_;
  int num_heads_;
  int head_dim_;
  int head_;
  size_t span_ = 0;
  int64_t token_ = 0;
  int64_t left_;  // keys still to hand out
};

// Calls f.template operator()<R>() for R = rows, 1 <= rows <= kMax.
template <int kMax, typename F>
inline void with_rows(int rows, F&& f) {
  if constexpr (kMax >= 1) {
    if (rows == kMax) {
      f.template operator()<kMax>();
    } else {
      with_rows<kMax - 1>(rows, f);
    }
  }
}

// s[r][lanes] = sum_c kb[r][c] * qt[c][lanes] for R keys, Simd::kLaneVectors
// vectors of lanes.
//   qt: [head_dim][qt_stride]  kb: [R][head_dim]  s: [R][s_stride]
template <class Simd, int R>
inline void scores_tile(const float* qt, int64_t qt_stride, const float* kb, int head_dim, float* s,
                        int64_t s_stride) {
  using V = typename Simd::Reg;
  constexpr int W = Simd::kWidth;
  constexpr int NV = Simd::kLaneVectors;
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Simd::zero();
  for (int c = 0; c < head_dim; ++c) {
    V qv[NV];
    for (int v = 0; v < NV; ++v) qv[v] = Simd::load(qt + c * qt_stride + v * W);
    for (int r = 0; r < R; ++r) {
      const V k = Simd::broadcast(kb + r * head_dim + c);
      for (int v = 0; v < NV; ++v) acc[r][v] = Simd::fmadd(k, qv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) Simd::store(s + r * s_stride + v * W, acc[r][v]);
}

// ot[d0+r][lanes] = ot[d0+r][lanes] * alpha[lanes] + sum_j vb[j][d0+r] * p[j][lanes]
//   p: [n][p_stride]  vb: [n][head_dim]  ot: [head_dim][ot_stride]
//   alpha: kLaneVectors vectors of the lanes' rescale factors
template <class Simd, int R>
inline void output_tile(const float* p, int64_t p_stride, int n, const float* vb, int head_dim, int d0,
                        float* ot, int64_t ot_stride, const float* alpha) {
  using V = typename Simd::Reg;
  constexpr int W = Simd::kWidth;
  constexpr int NV = Simd::kLaneVectors;
  V acc[R][NV];
  for (int v = 0; v < NV; ++v) {
    const V a = Simd::load(alpha + v * W);
    for (int r = 0; r < R; ++r) acc[r][v] = Simd::mul(Simd::load(ot + (d0 + r) * ot_stride + v * W), a);
  }
  for (int j = 0; j < n; ++j) {
    V pv[NV];
    for (int v = 0; v < NV; ++v) pv[v] = Simd::load(p + j * p_stride + v * W);
    const float* vj = vb + int64_t{j} * head_dim + d0;
    for (int r = 0; r < R; ++r) {
      const V x = Simd::broadcast(vj + r);
      for (int v = 0; v < NV; ++v) acc[r][v] = Simd::fmadd(x, pv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) Simd::store(ot + (d0 + r) * ot_stride + v * W, acc[r][v]);
}

// out = softmax(scale q k^T) v over the keys of spans[0, count), on
// `threads` threads (OpenMP over heads x tiles of query_tile queries, a
// multiple of kQueryTileStep), thread t using scratch[t] (64-byte aligned,
// scratch_floats(head_dim, query_tile) floats). nq >= 1 and at least one key.
template <class Simd>
void attention_tiled(const float* q, int64_t nq, const KvSpan* spans, size_t count, int num_heads, int head_dim,
                     float scale, float* out, int threads, int query_tile, const KeyRanges& ranges,
                     const KeyRangeRows& range_rows, float* const* scratch) {
  using V = typename Simd::Reg;
  constexpr int W = Simd::kWidth;
  constexpr int kLanes = Simd::kLaneVectors * W;  // queries per register tile
  constexpr int kRows = Simd::kTileRows;
  static_assert(kQueryTileStep % kLanes == 0);
  const int64_t row = int64_t{num_heads} * head_dim;
  const int64_t tiles = (nq + query_tile - 1) / query_tile;
  // Head-major (threads share a head's keys in cache), then a pair's key
  // ranges together.
  const int64_t items = tiles * num_heads * ranges.count;
  const int D = head_dim;
  const float qscale = scale * kLog2e;
  const int64_t QT = query_tile;
  // Qt, Ot and S are stored group by group ([group][D or kKeyBlock][kLanes]):
  // a group's rows are then kLanes floats apart, contiguous, instead of QT
  // floats apart, where a power-of-two stride maps them onto a few L1 sets.
  const int64_t GQ = int64_t{D} * kLanes;
  constexpr int64_t GS = int64_t{kKeyBlock} * kLanes;
#pragma omp parallel num_threads(threads)
  {
    float* qt = scratch[omp_get_thread_num()];
    float* ot = qt + D * QT;
    float* s = ot + D * QT;
    float* kb = s + kKeyBlock * QT;
    float* vb = kb + kKeyBlock * D;
    float* m = vb + kKeyBlock * D;
    float* l = m + QT;
    float* alpha = l + QT;

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int range = static_cast<int>(item % ranges.count);
      const int64_t pair = item / ranges.count;
      const int h = static_cast<int>(pair / tiles);
      const int64_t i0 = (pair % tiles) * QT;
      const int nt = nq - i0 < QT ? static_cast<int>(nq - i0) : static_cast<int>(QT);
      const int groups = (nt + kLanes - 1) / kLanes;  // lane groups in use
      const int lanes = groups * kLanes;

      // Qt[g][c][lane] = q[i0 + g * kLanes + lane, h, c] * scale * log2(e);
      // padding lanes are 0.
      for (int r = 0; r < lanes; ++r) {
        const float* qi = r < nt ? q + (i0 + r) * row + int64_t{h} * D : nullptr;
        float* qg = qt + (r / kLanes) * GQ + r % kLanes;
        for (int c = 0; c < D; ++c) qg[c * kLanes] = qi ? qi[c] * qscale : 0.f;
      }
      for (int64_t i = 0; i < groups * GQ; ++i) ot[i] = 0.f;
      for (int r = 0; r < lanes; ++r) {
        m[r] = -std::numeric_limits<float>::infinity();
        l[r] = 0.f;
      }

      // The range's keys, by plain arithmetic (not KeyRanges' inline members:
      // see the note on internal linkage above).
      const int64_t first_key = range * ranges.keys_per_range;
      const int64_t left = ranges.num_keys - first_key;
      const int64_t range_keys = left < ranges.keys_per_range ? left : ranges.keys_per_range;
      KeyStream keys(spans, count, num_heads, D, h, first_key, range_keys);
      for (;;) {
        const int n = keys.next_block(kKeyBlock, D, kb, vb);
        if (n == 0) break;
        for (int g = 0; g < groups; ++g) {
          const int64_t lane0 = int64_t{g} * kLanes;
          const float* qg = qt + g * GQ;
          float* sg = s + g * GS;
          float* og = ot + g * GQ;
          // Scores S[j][lanes] for the block's n keys.
          for (int j0 = 0; j0 < n; j0 += kRows) {
            with_rows<kRows>(n - j0 < kRows ? n - j0 : kRows, [&]<int R>() {
              scores_tile<Simd, R>(qg, kLanes, kb + int64_t{j0} * D, D, sg + j0 * kLanes, kLanes);
            });
          }
          // Online softmax per lane: new max, rescale factor, P = 2^(S - max), row sums.
          for (int v = 0; v < Simd::kLaneVectors; ++v) {
            const int64_t c0 = lane0 + W * v;
            float* sv = sg + W * v;
            const V m_old = Simd::load(m + c0);
            V m_new = m_old;
            for (int j = 0; j < n; ++j) m_new = Simd::max(m_new, Simd::load(sv + j * kLanes));
            const V a = Simd::exp2(Simd::sub(m_old, m_new));  // 0 on the first block (m = -inf)
            V sum = Simd::zero();
            for (int j = 0; j < n; ++j) {
              const V pj = Simd::exp2(Simd::sub(Simd::load(sv + j * kLanes), m_new));
              Simd::store(sv + j * kLanes, pj);
              sum = Simd::add(sum, pj);
            }
            Simd::store(m + c0, m_new);
            Simd::store(l + c0, Simd::fmadd(Simd::load(l + c0), a, sum));
            Simd::store(alpha + c0, a);
          }
          // Ot = Ot * alpha + V^T P.
          for (int d0 = 0; d0 < D; d0 += kRows) {
            with_rows<kRows>(D - d0 < kRows ? D - d0 : kRows, [&]<int R>() {
              output_tile<Simd, R>(sg, kLanes, n, vb, D, d0, og, kLanes, alpha + lane0);
            });
          }
        }
      }

      // out[i0 + r, h, c] = Ot[g][c][lane] / l[r], r = g * kLanes + lane;
      // with key ranges into the range's rows, with the row's log-sum-exp.
      float* dst = ranges.count > 1 ? range_rows.rows + range * range_rows.rows_stride : out;
      float* lse = ranges.count > 1 ? range_rows.lse + range * range_rows.lse_stride : nullptr;
      for (int r = 0; r < nt; ++r) {
        float* oi = dst + (i0 + r) * row + int64_t{h} * D;
        const float* og = ot + (r / kLanes) * GQ + r % kLanes;
        const float inv = 1.f / l[r];
        for (int c = 0; c < D; ++c) oi[c] = og[c * kLanes] * inv;
        if (lse != nullptr) lse[(i0 + r) * num_heads + h] = m[r] + ::log2f(l[r]);
      }
    }
  }
}

}  // namespace
}  // namespace lingbot::cpu::tiled

namespace lingbot::cpu::detail {

// attention_tiled<Avx512> (attention_avx512.cpp); call only where
// avx512_kernels_built() and the CPU has AVX-512.
void attention_tiled_avx512(const float* q, int64_t nq, const KvSpan* spans, size_t count, int num_heads,
                            int head_dim, float scale, float* out, int threads, int query_tile,
                            const KeyRanges& ranges, const KeyRangeRows& range_rows, float* const* scratch);
// Whether this build compiled the AVX-512 kernels (x86-64 builds do).
bool avx512_kernels_built();

}  // namespace lingbot::cpu::detail
