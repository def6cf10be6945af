// Fast CPU attention: tiled online softmax (FlashAttention's recurrence) over
// keys held in spans, multithreaded with OpenMP.
//
// Version notes (figures: docs/PERF.md, "KV cache (CPU)"):
//   Rows:  one work item per (head, group of up to 8 query rows); dot
//          products over head_dim against a copied key block, scalar exp2.
//          Portable; used for few queries (the camera head) and in builds
//          without AVX2 (sanitizer builds).
//   Tiled: one work item per (head, tile of kQueryTile queries). Queries are
//          the SIMD lanes: with Qt = the tile's queries transposed to
//          [head_dim][lanes], a block of kKeyBlock keys is processed as
//            S[key][lane]  = sum_c K[key][c] * Qt[c][lane]        (scores)
//            m, l, P       = online softmax per lane (column)      (exp2 domain)
//            Ot[c][lane]   = Ot[c][lane] * alpha[lane] + sum_key V[key][c] * P[key][lane]
//          so every product is a broadcast-times-vector FMA (6 rows x 16 lanes
//          register tiles, 12 accumulators), the softmax statistics are
//          vectors across queries, and no transpose of K or V is needed. The
//          key block's rows for one head are copied to a small contiguous
//          buffer first: in the cache they sit num_heads*head_dim floats apart
//          (4 KiB for 16 x 64), which would alias the same L1 sets.
#include "backend/cpu/attention.h"

#include "core/error.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LINGBOT_ATTENTION_AVX2 1
#else
#define LINGBOT_ATTENTION_AVX2 0
#endif

namespace lingbot::cpu {

namespace detail {

void check_arguments(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
                     const float* out) {
  LB_CHECK(num_heads >= 1 && head_dim >= 1, "attention: num_heads ({}) and head_dim ({}) must be >= 1",
           num_heads, head_dim);
  LB_CHECK(nq >= 0, "attention: negative query count {}", nq);
  LB_CHECK(nq == 0 || (q != nullptr && out != nullptr), "attention: null q or out for {} queries", nq);
  for (size_t s = 0; s < kv.size(); ++s) {
    LB_CHECK(kv[s].tokens >= 0, "attention: span {} has a negative token count {}", s, kv[s].tokens);
    LB_CHECK(kv[s].tokens == 0 || (kv[s].k != nullptr && kv[s].v != nullptr),
             "attention: span {} has {} tokens but a null k or v", s, kv[s].tokens);
  }
}

int64_t total_keys(std::span<const KvSpan> kv) {
  int64_t n = 0;
  for (const KvSpan& s : kv) n += s.tokens;
  return n;
}

}  // namespace detail

namespace {

using detail::total_keys;

constexpr float kLog2e = 1.4426950408889634f;  // softmax in base 2: e^x = 2^(x log2 e)
constexpr int kKeyBlock = 64;                  // keys per online-softmax step
constexpr int kRowKeyBlock = 64;               // keys per step in the Rows kernel
constexpr int kRowGroup = 8;                   // query rows per work item in the Rows kernel
// Below this many flops a call runs on one thread: waking a team costs more
// than it saves (and much more on a loaded machine).
constexpr double kMinParallelFlops = 4e6;

int threads_for(int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim) {
  const double flops = 4.0 * static_cast<double>(nq) * static_cast<double>(total_keys(kv)) * num_heads * head_dim;
  return flops < kMinParallelFlops ? 1 : omp_get_max_threads();
}

// 64-byte aligned float scratch.
struct Scratch {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> mem;
  explicit Scratch(size_t floats) {
    const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    mem.reset(static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
    LB_CHECK(mem != nullptr, "attention: out of memory for {} floats of scratch", floats);
  }
  float* get() const { return mem.get(); }
};

// Walks the keys of all spans in order, handing out one head's K/V slices.
class KeyStream {
 public:
  KeyStream(std::span<const KvSpan> kv, int64_t row_floats, int64_t head_offset)
      : kv_(kv), row_floats_(row_floats), head_offset_(head_offset) {}

  // Copies the head slices of up to `max` next keys into kb, vb ([n][head_dim]).
  int next_block(int max, int head_dim, float* kb, float* vb) {
    int n = 0;
    while (n < max && span_ < kv_.size()) {
      const KvSpan& s = kv_[span_];
      if (token_ >= s.tokens) {
        ++span_;
        token_ = 0;
        continue;
      }
      const int64_t off = token_ * row_floats_ + head_offset_;
      std::memcpy(kb + int64_t{n} * head_dim, s.k + off, sizeof(float) * static_cast<size_t>(head_dim));
      std::memcpy(vb + int64_t{n} * head_dim, s.v + off, sizeof(float) * static_cast<size_t>(head_dim));
      ++token_;
      ++n;
    }
    return n;
  }

 private:
  std::span<const KvSpan> kv_;
  int64_t row_floats_;
  int64_t head_offset_;
  size_t span_ = 0;
  int64_t token_ = 0;
};

// ---------------------------------------------------------------------------
// Rows kernel: portable, any head_dim.
// ---------------------------------------------------------------------------

float dot(const float* a, const float* b, int n) {
  // Eight independent partial sums: the compiler vectorizes this without
  // needing to reassociate a single running sum.
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    for (int t = 0; t < 8; ++t) part[t] += a[c + t] * b[c + t];
  }
  float sum = 0;
  for (; c < n; ++c) sum += a[c] * b[c];
  for (int t = 0; t < 8; ++t) sum += part[t];
  return sum;
}

void attention_rows(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
                    float scale, float* out) {
  const int64_t row = int64_t{num_heads} * head_dim;
  const int64_t groups = (nq + kRowGroup - 1) / kRowGroup;
  const int64_t items = groups * num_heads;  // head-major, like the tiled kernel
  const int D = head_dim;
  const float qscale = scale * kLog2e;
  // Per thread: q rows and outputs [kRowGroup][D], a key and a value block
  // [kRowKeyBlock][D], scores [kRowGroup][kRowKeyBlock]. Allocated here:
  // nothing may throw inside the parallel region.
  const int64_t per_thread = 2 * kRowGroup * D + 2 * kRowKeyBlock * D + kRowGroup * kRowKeyBlock;
  const int threads = threads_for(nq, kv, num_heads, head_dim);
  std::vector<Scratch> scratch;
  for (int t = 0; t < threads; ++t) scratch.emplace_back(static_cast<size_t>(per_thread));
#pragma omp parallel num_threads(threads)
  {
    float* qs = scratch[static_cast<size_t>(omp_get_thread_num())].get();
    float* o = qs + kRowGroup * D;
    float* kb = o + kRowGroup * D;
    float* vb = kb + kRowKeyBlock * D;
    float* s = vb + kRowKeyBlock * D;
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int h = static_cast<int>(item / groups);
      const int64_t i0 = (item % groups) * kRowGroup;
      const int rows = static_cast<int>(std::min<int64_t>(kRowGroup, nq - i0));
      float m[kRowGroup], l[kRowGroup];
      for (int r = 0; r < rows; ++r) {
        const float* qi = q + (i0 + r) * row + int64_t{h} * D;
        for (int c = 0; c < D; ++c) qs[r * D + c] = qi[c] * qscale;
        std::fill(o + r * D, o + (r + 1) * D, 0.f);
        m[r] = -std::numeric_limits<float>::infinity();
        l[r] = 0;
      }
      KeyStream keys(kv, row, int64_t{h} * D);
      for (;;) {
        const int n = keys.next_block(kRowKeyBlock, D, kb, vb);
        if (n == 0) break;
        for (int r = 0; r < rows; ++r) {
          float* sr = s + r * kRowKeyBlock;
          float block_max = -std::numeric_limits<float>::infinity();
          for (int j = 0; j < n; ++j) {
            sr[j] = dot(qs + r * D, kb + int64_t{j} * D, D);
            block_max = std::max(block_max, sr[j]);
          }
          const float m_new = std::max(m[r], block_max);
          const float alpha = std::exp2(m[r] - m_new);  // 0 on the first block (m = -inf)
          float sum = 0;
          for (int j = 0; j < n; ++j) {
            sr[j] = std::exp2(sr[j] - m_new);
            sum += sr[j];
          }
          l[r] = l[r] * alpha + sum;
          m[r] = m_new;
          float* orow = o + r * D;
          for (int c = 0; c < D; ++c) orow[c] *= alpha;
        }
        // o[r] += sum_j p[r][j] v[j]: each value row is loaded once for the whole group.
        for (int j = 0; j < n; ++j) {
          const float* vj = vb + int64_t{j} * D;
          for (int r = 0; r < rows; ++r) {
            const float p = s[r * kRowKeyBlock + j];
            float* orow = o + r * D;
            for (int c = 0; c < D; ++c) orow[c] += p * vj[c];
          }
        }
      }
      for (int r = 0; r < rows; ++r) {
        float* oi = out + (i0 + r) * row + int64_t{h} * D;
        const float inv = 1.f / l[r];
        for (int c = 0; c < D; ++c) oi[c] = o[r * D + c] * inv;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Tiled kernel: AVX2 + FMA.
// ---------------------------------------------------------------------------
#if LINGBOT_ATTENTION_AVX2

constexpr int kLanes = 16;        // queries per register tile (two 8-float vectors)
constexpr int kQueryTile = 128;   // queries per work item (multiple of kLanes)
constexpr int kTileRows = 6;      // keys (scores) or head-dim rows (output) per register tile

// 2^x for x <= 0 (inputs below -126 give 2^-126, negligible next to the
// block maximum's 1). Degree-7 Taylor polynomial of e^(f ln 2) on
// f in [-0.5, 0.5]: truncation error < 6e-9, below float rounding.
inline __m256 exp2_avx2(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-126.f));
  x = _mm256_min_ps(x, _mm256_set1_ps(126.f));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(1.525273380405984e-05f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381608e-04f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618129107628477e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550410866482158e-02f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402265069591007e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931471805599453e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// s[r][lanes] = sum_c kb[r][c] * qt[c][lanes] for R keys, 16 lanes.
//   qt: [head_dim][qt_stride]  kb: [R][head_dim]  s: [R][s_stride]
template <int R>
inline void scores_tile(const float* qt, int64_t qt_stride, const float* kb, int head_dim, float* s,
                        int64_t s_stride) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int c = 0; c < head_dim; ++c) {
    const __m256 q0 = _mm256_loadu_ps(qt + c * qt_stride);
    const __m256 q1 = _mm256_loadu_ps(qt + c * qt_stride + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 k = _mm256_broadcast_ss(kb + r * head_dim + c);
      acc[r][0] = _mm256_fmadd_ps(k, q0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(k, q1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(s + r * s_stride, acc[r][0]);
    _mm256_storeu_ps(s + r * s_stride + 8, acc[r][1]);
  }
}

// ot[d0+r][lanes] = ot[d0+r][lanes] * alpha[lanes] + sum_j vb[j][d0+r] * p[j][lanes]
//   p: [n][p_stride]  vb: [n][head_dim]  ot: [head_dim][ot_stride]
template <int R>
inline void output_tile(const float* p, int64_t p_stride, int n, const float* vb, int head_dim, int d0,
                        float* ot, int64_t ot_stride, __m256 alpha0, __m256 alpha1) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm256_mul_ps(_mm256_loadu_ps(ot + (d0 + r) * ot_stride), alpha0);
    acc[r][1] = _mm256_mul_ps(_mm256_loadu_ps(ot + (d0 + r) * ot_stride + 8), alpha1);
  }
  for (int j = 0; j < n; ++j) {
    const __m256 p0 = _mm256_loadu_ps(p + j * p_stride);
    const __m256 p1 = _mm256_loadu_ps(p + j * p_stride + 8);
    const float* vj = vb + int64_t{j} * head_dim + d0;
    for (int r = 0; r < R; ++r) {
      const __m256 v = _mm256_broadcast_ss(vj + r);
      acc[r][0] = _mm256_fmadd_ps(v, p0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(v, p1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(ot + (d0 + r) * ot_stride, acc[r][0]);
    _mm256_storeu_ps(ot + (d0 + r) * ot_stride + 8, acc[r][1]);
  }
}

template <typename F>
inline void dispatch_rows(int rows, F&& f) {
  switch (rows) {
    case 6: f.template operator()<6>(); break;
    case 5: f.template operator()<5>(); break;
    case 4: f.template operator()<4>(); break;
    case 3: f.template operator()<3>(); break;
    case 2: f.template operator()<2>(); break;
    case 1: f.template operator()<1>(); break;
    default: break;
  }
}

void attention_tiled(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
                     float scale, float* out) {
  const int64_t row = int64_t{num_heads} * head_dim;
  const int64_t tiles = (nq + kQueryTile - 1) / kQueryTile;
  const int64_t items = tiles * num_heads;  // head-major: threads share a head's keys in cache
  const int D = head_dim;
  const float qscale = scale * kLog2e;
  // Per thread: Qt, Ot [D][QT]; S/P [kKeyBlock][QT]; K, V blocks [kKeyBlock][D]; m, l, alpha [QT].
  // Allocated here: nothing may throw inside the parallel region.
  constexpr int64_t QT = kQueryTile;
  const int64_t per_thread = 2 * D * QT + kKeyBlock * QT + 2 * kKeyBlock * D + 3 * QT;
  const int threads = threads_for(nq, kv, num_heads, head_dim);
  std::vector<Scratch> scratch;
  for (int t = 0; t < threads; ++t) scratch.emplace_back(static_cast<size_t>(per_thread));
#pragma omp parallel num_threads(threads)
  {
    float* qt = scratch[static_cast<size_t>(omp_get_thread_num())].get();
    float* ot = qt + D * QT;
    float* s = ot + D * QT;
    float* kb = s + kKeyBlock * QT;
    float* vb = kb + kKeyBlock * D;
    float* m = vb + kKeyBlock * D;
    float* l = m + QT;
    float* alpha = l + QT;

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int h = static_cast<int>(item / tiles);
      const int64_t i0 = (item % tiles) * QT;
      const int nt = static_cast<int>(std::min<int64_t>(QT, nq - i0));
      const int groups = (nt + kLanes - 1) / kLanes;  // 16-lane groups in use
      const int lanes = groups * kLanes;

      // Qt[c][r] = q[i0 + r, h, c] * scale * log2(e); padding lanes are 0.
      for (int r = 0; r < lanes; ++r) {
        const float* qi = r < nt ? q + (i0 + r) * row + int64_t{h} * D : nullptr;
        for (int c = 0; c < D; ++c) qt[c * QT + r] = qi ? qi[c] * qscale : 0.f;
      }
      for (int c = 0; c < D; ++c) std::fill(ot + c * QT, ot + c * QT + lanes, 0.f);
      std::fill(m, m + lanes, -std::numeric_limits<float>::infinity());
      std::fill(l, l + lanes, 0.f);

      KeyStream keys(kv, row, int64_t{h} * D);
      for (;;) {
        const int n = keys.next_block(kKeyBlock, D, kb, vb);
        if (n == 0) break;
        for (int g = 0; g < groups; ++g) {
          const int64_t lane0 = int64_t{g} * kLanes;
          // Scores S[j][lanes] for the block's n keys.
          for (int j0 = 0; j0 < n; j0 += kTileRows) {
            dispatch_rows(std::min(kTileRows, n - j0), [&]<int R>() {
              scores_tile<R>(qt + lane0, QT, kb + int64_t{j0} * D, D, s + j0 * QT + lane0, QT);
            });
          }
          // Online softmax per lane: new max, rescale factor, P = 2^(S - max), row sums.
          for (int half = 0; half < 2; ++half) {
            const int64_t c0 = lane0 + 8 * half;
            const __m256 m_old = _mm256_loadu_ps(m + c0);
            __m256 m_new = m_old;
            for (int j = 0; j < n; ++j) m_new = _mm256_max_ps(m_new, _mm256_loadu_ps(s + j * QT + c0));
            const __m256 a = exp2_avx2(_mm256_sub_ps(m_old, m_new));
            __m256 sum = _mm256_setzero_ps();
            for (int j = 0; j < n; ++j) {
              const __m256 pj = exp2_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j * QT + c0), m_new));
              _mm256_storeu_ps(s + j * QT + c0, pj);
              sum = _mm256_add_ps(sum, pj);
            }
            _mm256_storeu_ps(m + c0, m_new);
            _mm256_storeu_ps(l + c0, _mm256_fmadd_ps(_mm256_loadu_ps(l + c0), a, sum));
            _mm256_storeu_ps(alpha + c0, a);
          }
          // Ot = Ot * alpha + V^T P.
          const __m256 a0 = _mm256_loadu_ps(alpha + lane0);
          const __m256 a1 = _mm256_loadu_ps(alpha + lane0 + 8);
          for (int d0 = 0; d0 < D; d0 += kTileRows) {
            dispatch_rows(std::min(kTileRows, D - d0), [&]<int R>() {
              output_tile<R>(s + lane0, QT, n, vb, D, d0, ot + lane0, QT, a0, a1);
            });
          }
        }
      }

      // out[i0 + r, h, c] = Ot[c][r] / l[r]
      for (int r = 0; r < nt; ++r) {
        float* oi = out + (i0 + r) * row + int64_t{h} * D;
        const float inv = 1.f / l[r];
        for (int c = 0; c < D; ++c) oi[c] = ot[c * QT + r] * inv;
      }
    }
  }
}
#endif  // LINGBOT_ATTENTION_AVX2

}  // namespace

namespace detail {

bool tiled_kernel_available() { return LINGBOT_ATTENTION_AVX2 != 0; }

void attention_with(Kernel kernel, const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads,
                    int head_dim, float scale, float* out) {
  check_arguments(q, nq, kv, num_heads, head_dim, out);
  if (nq == 0) return;
  if (total_keys(kv) == 0) {
    std::fill(out, out + nq * num_heads * head_dim, 0.f);
    return;
  }
  // Tiled wins from a few queries on (lanes beyond nq are wasted, not wrong).
  if (kernel == Kernel::Auto) kernel = nq >= 4 ? Kernel::Tiled : Kernel::Rows;
#if LINGBOT_ATTENTION_AVX2
  if (kernel == Kernel::Tiled) {
    attention_tiled(q, nq, kv, num_heads, head_dim, scale, out);
    return;
  }
#endif
  attention_rows(q, nq, kv, num_heads, head_dim, scale, out);
}

}  // namespace detail

void attention(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
               float scale, float* out) {
  detail::attention_with(detail::Kernel::Auto, q, nq, kv, num_heads, head_dim, scale, out);
}

}  // namespace lingbot::cpu
