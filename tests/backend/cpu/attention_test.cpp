// cpu::attention (every kernel: rows, tiled AVX2, tiled AVX-512) against the double-precision reference, over
// many span layouts, shapes and score ranges; plus argument errors.
#include "backend/cpu/attention.h"
#include "backend/cpu/attention_splits.h"

#include "kv/kv_test_support.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;

namespace {

struct Problem {
  int64_t nq;
  int heads, dim;
  std::vector<int64_t> span_tokens;
  float magnitude = 1.f;  // scales q and k: large values stress the online max
};

struct Data {
  std::vector<float> q, k, v;
  std::vector<KvSpan> spans;
  double vmax = 0;
};

Data make(const Problem& p, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  Data d;
  const int64_t row = int64_t{p.heads} * p.dim;
  int64_t nk = 0;
  for (int64_t t : p.span_tokens) nk += t;
  d.q.resize(static_cast<size_t>(p.nq * row));
  d.k.resize(static_cast<size_t>(nk * row));
  d.v.resize(static_cast<size_t>(nk * row));
  for (float& x : d.q) x = normal(rng) * p.magnitude;
  for (float& x : d.k) x = normal(rng) * p.magnitude;
  for (float& x : d.v) {
    x = normal(rng);
    d.vmax = std::max(d.vmax, std::fabs(double{x}));
  }
  int64_t at = 0;
  for (int64_t t : p.span_tokens) {
    d.spans.push_back({d.k.data() + at * row, d.v.data() + at * row, t});
    at += t;
  }
  return d;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double{a[i]} - b[i]));
  return m;
}

void check(const Problem& p, detail::Kernel kernel, std::mt19937& rng, int key_ranges = 0) {
  const Data d = make(p, rng);
  const float scale = 1.f / std::sqrt(static_cast<float>(p.dim));
  std::vector<float> out(d.q.size(), -1.f), ref(d.q.size(), -2.f);
  detail::attention_with(kernel, d.q.data(), p.nq, d.spans, p.heads, p.dim, scale, out.data(), key_ranges);
  attention_reference(d.q.data(), p.nq, d.spans, p.heads, p.dim, scale, ref.data());
  // fp32 roundoff (see kv_cache_property_test.cpp for the reasoning); scores
  // of magnitude ~|q||k| scale*m^2*dim add a relative error ~ dim*u*|s| to
  // the weights, hence the extra factor for large magnitudes.
  const double score_scale = std::max(1.0, double{p.magnitude} * p.magnitude * std::sqrt(static_cast<double>(p.dim)));
  const double tol = 2e-5 * d.vmax * score_scale;
  EXPECT_LE(max_diff(out, ref), tol) << "nq=" << p.nq << " heads=" << p.heads << " dim=" << p.dim
                                     << " spans=" << p.span_tokens.size() << " magnitude=" << p.magnitude
                                     << " kernel=" << static_cast<int>(kernel) << " key_ranges=" << key_ranges;
}

// The kernels this machine can run (CI's has AVX-512, so all of them there).
std::vector<detail::Kernel> runnable_kernels() {
  std::vector<detail::Kernel> kernels;
  for (detail::Kernel k : {detail::Kernel::Rows, detail::Kernel::TiledAvx2, detail::Kernel::TiledAvx512})
    if (detail::kernel_available(k)) kernels.push_back(k);
  return kernels;
}

}  // namespace

TEST(Attention, EveryKernelMatchesTheReference) {
  std::mt19937 rng(5);
  const std::vector<Problem> problems = {
      {1, 1, 1, {1}},
      {1, 16, 128, {300}},            // camera head shape: one query, head_dim 128
      {5, 3, 5, {7, 0, 13}},          // odd head_dim, an empty span
      {8, 2, 64, {64}},
      {16, 2, 64, {63, 1, 65}},       // blocks that straddle spans
      {17, 4, 16, {1, 1, 1, 100}},
      {130, 2, 64, {200, 37}},        // a partial last query tile
      {200, 1, 8, {5}},               // fewer keys than one block
      {40, 2, 64, {500}, 4.f},        // scores up to ~100: online max must rescale correctly
      {33, 2, 32, {250, 250}, 8.f},
      {145, 2, 64, {70, 75}},         // one query past a 144-query tile
      {300, 3, 24, {129}},            // several tiles; head_dim not a multiple of the tiles' rows
  };
  for (const Problem& p : problems) {
    for (detail::Kernel k : runnable_kernels()) check(p, k, rng);
    check(p, detail::Kernel::Auto, rng);
  }
}

TEST(Attention, TheIsaInUsePicksItsTiledKernel) {
  // Release builds compile the AVX2 kernel (sanitizer builds may not: then Rows).
  const bool avx2 = detail::kernel_available(detail::Kernel::TiledAvx2);
  EXPECT_EQ(detail::tiled_kernel_for(Isa::Avx2), avx2 ? detail::Kernel::TiledAvx2 : detail::Kernel::Rows);
  if (cpu_supports(Isa::Avx512)) {
    EXPECT_TRUE(detail::kernel_available(detail::Kernel::TiledAvx512));
    EXPECT_EQ(detail::tiled_kernel_for(Isa::Avx512), detail::Kernel::TiledAvx512);
  } else {
    EXPECT_FALSE(detail::kernel_available(detail::Kernel::TiledAvx512));
    EXPECT_THROW(detail::attention_with(detail::Kernel::TiledAvx512, nullptr, 0, {}, 1, 1, 1.f, nullptr), Error);
  }
}

TEST(Attention, RandomShapes) {
  std::mt19937 rng(11);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int cases = kv::test::iterations(200);
  for (int n = 0; n < cases; ++n) {
    Problem p;
    p.nq = pick(1, 150);
    p.heads = pick(1, 4);
    const int dims[] = {1, 2, 7, 8, 16, 24, 64, 128};
    p.dim = dims[pick(0, 7)];
    const int spans = pick(1, 6);
    for (int s = 0; s < spans; ++s) p.span_tokens.push_back(pick(0, 90));
    if (p.span_tokens[0] == 0) p.span_tokens[0] = 1;
    const std::vector<detail::Kernel> kernels = runnable_kernels();
    check(p, kernels[static_cast<size_t>(pick(0, static_cast<int>(kernels.size()) - 1))], rng);
  }
}

// Keys cut into ranges (across spans, at the 64-key blocks), each range's
// rows merged by its log-sum-exp: the softmax over all keys.
TEST(Attention, KeyRangesMatchTheReference) {
  std::mt19937 rng(21);
  const std::vector<Problem> problems = {
      {16, 2, 64, {63, 1, 65}},        // 3 blocks across spans
      {130, 2, 64, {200, 37, 300}},    // ranges across span ends
      {40, 2, 64, {500}, 4.f},         // large scores: the ranges' maxima differ
      {300, 3, 24, {129, 129}},
  };
  for (const Problem& p : problems) {
    for (detail::Kernel k : runnable_kernels()) {
      if (k == detail::Kernel::Rows) continue;  // the tiled kernels cut keys
      for (int ranges : {2, 3, 4}) check(p, k, rng, ranges);
    }
  }
  std::vector<float> q(16, 0.f), out(16);
  EXPECT_THROW(detail::attention_with(detail::Kernel::Auto, q.data(), 1, {}, 1, 4, 1.f, out.data(), 5), Error);
}

TEST(Attention, ManyThreadsGiveTheSameResultAsOne) {
  // Work items are independent and the key ranges follow the shapes only, so
  // the thread count must not change a bit (the second problem's keys are
  // cut into two ranges).
  std::mt19937 rng(3);
  for (const Problem& p : {Problem{100, 4, 64, {300, 200}}, Problem{100, 2, 64, {5000, 3300}}}) {
    const Data d = make(p, rng);
    std::vector<float> a(d.q.size()), b(d.q.size());
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    attention(d.q.data(), p.nq, d.spans, p.heads, p.dim, 0.125f, a.data());
    omp_set_num_threads(std::max(2, saved));
    attention(d.q.data(), p.nq, d.spans, p.heads, p.dim, 0.125f, b.data());
    omp_set_num_threads(saved);
    EXPECT_EQ(a, b);
  }
  EXPECT_EQ(key_splits_for(100, 8300, 2), 2);
}

TEST(Attention, NoKeysGivesZeros) {
  std::vector<float> q(2 * 3 * 4, 1.f), out(q.size(), 7.f), ref(q.size(), 7.f);
  attention(q.data(), 2, {}, 3, 4, 0.5f, out.data());
  attention_reference(q.data(), 2, {}, 3, 4, 0.5f, ref.data());
  for (float x : out) EXPECT_EQ(x, 0.f);
  for (float x : ref) EXPECT_EQ(x, 0.f);
}

TEST(Attention, BadArgumentsAreErrors) {
  std::vector<float> q(16, 0.f), out(16), k(16, 0.f);
  const KvSpan good{k.data(), k.data(), 4};
  const KvSpan negative{k.data(), k.data(), -1};
  const KvSpan null_k{nullptr, k.data(), 2};
  EXPECT_THROW(attention(q.data(), 1, {&good, 1}, 0, 4, 1.f, out.data()), Error);
  EXPECT_THROW(attention(q.data(), 1, {&good, 1}, 4, 0, 1.f, out.data()), Error);
  EXPECT_THROW(attention(q.data(), -1, {&good, 1}, 1, 4, 1.f, out.data()), Error);
  EXPECT_THROW(attention(nullptr, 1, {&good, 1}, 1, 4, 1.f, out.data()), Error);
  EXPECT_THROW(attention(q.data(), 1, {&negative, 1}, 1, 4, 1.f, out.data()), Error);
  EXPECT_THROW(attention(q.data(), 1, {&null_k, 1}, 1, 4, 1.f, out.data()), Error);
  EXPECT_THROW(attention_reference(q.data(), 1, {&null_k, 1}, 1, 4, 1.f, out.data()), Error);
}

// Both tiled builds add the same products in the same order for every query
// (only the register tiling differs), so their outputs are identical: the
// ISA a run picks cannot change its numbers.
TEST(Attention, TheTiledBuildsAgreeBitForBit) {
  if (!detail::kernel_available(detail::Kernel::TiledAvx2) || !detail::kernel_available(detail::Kernel::TiledAvx512))
    GTEST_SKIP() << "needs a CPU with AVX-512";
  std::mt19937 rng(11);
  const std::vector<Problem> problems = {{978, 4, 64, {978}},
                                        {145, 2, 64, {64, 1, 200}},
                                        {37, 3, 24, {129}, 4.f},
                                        {1000, 1, 64, {3000}},
                                        {200, 2, 64, {5000, 3300}}};  // keys in two ranges
  for (const Problem& p : problems) {
    const Data d = make(p, rng);
    const float scale = 1.f / std::sqrt(static_cast<float>(p.dim));
    std::vector<float> avx2(d.q.size()), avx512(d.q.size());
    detail::attention_with(detail::Kernel::TiledAvx2, d.q.data(), p.nq, d.spans, p.heads, p.dim, scale, avx2.data());
    detail::attention_with(detail::Kernel::TiledAvx512, d.q.data(), p.nq, d.spans, p.heads, p.dim, scale,
                           avx512.data());
    EXPECT_EQ(std::memcmp(avx2.data(), avx512.data(), avx2.size() * sizeof(float)), 0)
        << "nq=" << p.nq << " dim=" << p.dim << ": largest difference " << max_diff(avx2, avx512);
  }
}
