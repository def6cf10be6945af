// Fast CPU attention: tiled online softmax (FlashAttention's recurrence) over
// keys held in spans, multithreaded with OpenMP.
//
// Version notes (figures: docs/PERF.md, "KV cache (CPU)" and "CPU"):
//   Rows:  one work item per (head, group of up to 8 query rows); dot
//          products over head_dim against a copied key block, scalar exp2.
//          Portable; used for few queries (the camera head) and in builds
//          without AVX2 (sanitizer builds).
//   Tiled: one work item per (head, tile of 128 queries), queries as SIMD
//          lanes (attention_tiled.h), built twice: with AVX2 vectors here
//          (16 lanes x 6 rows per register tile) and with AVX-512 ones in
//          attention_avx512.cpp (32 lanes x 12 rows), chosen at run time by
//          the ISA in use (cpu_isa.h).
#include "backend/cpu/attention.h"

#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/cpu_isa.h"
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
    LB_CHECK(kv[s].tokens == 0 || kv[s].element != KvElement::Fp8 ||
                 (kv[s].k_scale != nullptr && kv[s].v_scale != nullptr),
             "attention: fp8 span {} has no scales", s);
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

using tiled::KeyStream;
using tiled::kLog2e;
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
      KeyStream keys(kv.data(), kv.size(), num_heads, D, h);
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
// Tiled kernel: AVX2 + FMA vectors for attention_tiled.h.
// ---------------------------------------------------------------------------
#if LINGBOT_ATTENTION_AVX2

struct Avx2 {
  using Reg = __m256;
  static constexpr int kWidth = 8;        // floats per vector
  static constexpr int kLaneVectors = 2;  // 16 query lanes per register tile
  static constexpr int kTileRows = 6;     // 12 accumulators of the 16 registers
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  // 2^x for x <= 0 (inputs below -126 give 2^-126, negligible next to the
  // block maximum's 1). Degree-7 Taylor polynomial of e^(f ln 2) on
  // f in [-0.5, 0.5]: truncation error < 6e-9, below float rounding.
  static Reg exp2(Reg x) {
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
};

#endif  // LINGBOT_ATTENTION_AVX2

}  // namespace

namespace detail {

bool kernel_available(Kernel kernel) {
  switch (kernel) {
    case Kernel::TiledAvx2:
      return LINGBOT_ATTENTION_AVX2 != 0 && cpu_supports(Isa::Avx2);
    case Kernel::TiledAvx512:
      return avx512_kernels_built() && cpu_supports(Isa::Avx512);
    default:
      return true;
  }
}

bool tiled_kernel_available() { return tiled_kernel_for(isa_in_use()) != Kernel::Rows; }

Kernel tiled_kernel_for(Isa isa) {
  if (isa == Isa::Avx512 && kernel_available(Kernel::TiledAvx512)) return Kernel::TiledAvx512;
  if (kernel_available(Kernel::TiledAvx2)) return Kernel::TiledAvx2;
  return Kernel::Rows;
}

void attention_with(Kernel kernel, const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads,
                    int head_dim, float scale, float* out, int key_ranges) {
  check_arguments(q, nq, kv, num_heads, head_dim, out);
  LB_CHECK(kernel_available(kernel), "attention: kernel {} is not available in this build on this CPU",
           static_cast<int>(kernel));
  LB_CHECK(key_ranges >= 0 && key_ranges <= kMaxKeySplits, "attention: key_ranges {} is not 0 to {}", key_ranges,
           kMaxKeySplits);
  if (nq == 0) return;
  if (total_keys(kv) == 0) {
    std::fill(out, out + nq * num_heads * head_dim, 0.f);
    return;
  }
  // Tiled wins from a few queries on (lanes beyond nq are wasted, not wrong).
  if (kernel == Kernel::Auto) kernel = nq >= 4 ? Kernel::Tiled : Kernel::Rows;
  if (kernel == Kernel::Tiled) kernel = tiled_kernel_for(isa_in_use());
  if (kernel == Kernel::Rows) {
    attention_rows(q, nq, kv, num_heads, head_dim, scale, out);
    return;
  }
  // The tiled kernels' scratch, allocated here: nothing may throw inside
  // their parallel regions.
  const int threads = threads_for(nq, kv, num_heads, head_dim);
  const int query_tile = tiled::query_tile(nq, num_heads, threads);
  const KeyRanges ranges = KeyRanges::make(nq, total_keys(kv), num_heads, tiled::kKeyBlock, key_ranges);
  const KeyRangeRows range_rows =
      ranges.count > 1 ? KeyRangeRows::of_this_thread(ranges.count, nq, num_heads, head_dim) : KeyRangeRows{};
  std::vector<Scratch> scratch;
  std::vector<float*> per_thread;
  for (int t = 0; t < threads; ++t) {
    scratch.emplace_back(static_cast<size_t>(tiled::scratch_floats(head_dim, query_tile)));
    per_thread.push_back(scratch.back().get());
  }
  if (kernel == Kernel::TiledAvx512) {
    attention_tiled_avx512(q, nq, kv.data(), kv.size(), num_heads, head_dim, scale, out, threads, query_tile, ranges,
                           range_rows, per_thread.data());
  } else {
#if LINGBOT_ATTENTION_AVX2
    tiled::attention_tiled<Avx2>(q, nq, kv.data(), kv.size(), num_heads, head_dim, scale, out, threads, query_tile,
                                 ranges, range_rows, per_thread.data());
#endif
  }
  if (ranges.count > 1) combine_key_ranges(range_rows, ranges.count, nq, num_heads, head_dim, out);
}

}  // namespace detail

void attention(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
               float scale, float* out) {
  detail::attention_with(detail::Kernel::Auto, q, nq, kv, num_heads, head_dim, scale, out);
}

}  // namespace lingbot::cpu
