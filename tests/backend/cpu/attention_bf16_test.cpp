// cpu::attention_bf16 (attention_bf16.h), each of its kernels (oneDNN's
// products, AMX tiles where the CPU has them) against the double-precision
// reference over the same bf16-valued q, k and v (attention_bf16_cases.h);
// also: no keys, thread-count independence, the AMX kernel against
// oneDNN's, and their shared softmax step against exact exponentials. Each
// kernel is skipped where it cannot run.
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/attention_splits.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/onednn_matmul.h"

#include "attention_bf16_cases.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;
using namespace lingbot::cpu::bf16_attention_cases;
using detail::Bf16Kernel;

namespace {

class AttentionBf16 : public ::testing::TestWithParam<Bf16Kernel> {
 protected:
  void SetUp() override {
    if (!detail::bf16_kernel_available(GetParam(), 64)) GTEST_SKIP() << "this kernel cannot run on this CPU";
  }
  void run(const float* q, int64_t nq, const std::vector<KvSpan>& spans, int heads, int dim, float scale,
           float* out, int max_tile_rows = 0, int key_splits = 0) const {
    detail::attention_bf16_with(GetParam(), q, nq, spans, heads, dim, scale, out, max_tile_rows, key_splits);
  }
  // Case c's outputs from two runs (each given the case and its output),
  // which must be identical.
  template <class First, class Second>
  void expect_identical(uint32_t seed, const Case& c, First&& first, Second&& second) const {
    std::mt19937 rng(seed);
    const Data d = make(c, rng);
    const auto n = static_cast<size_t>(c.nq * c.heads * c.dim);
    std::vector<float> a(n), b(n);
    first(d, a.data());
    second(d, b.data());
    EXPECT_EQ(a, b);
  }
};

}  // namespace

TEST_P(AttentionBf16, MatchesTheReferenceWithinPsRounding) {
  expect_within_ps_rounding([this](const float* q, int64_t nq, const std::vector<KvSpan>& spans, int heads, int dim,
                                   float scale, float* out) { run(q, nq, spans, heads, dim, scale, out); });
}

TEST_P(AttentionBf16, NoKeysGivesZeros) {
  std::vector<float> q(20 * 64, 1.f), out(20 * 64, 5.f);
  run(q.data(), 20, {}, 1, 64, 0.125f, out.data());
  for (float x : out) ASSERT_EQ(x, 0.f);
}

// Also where the keys are split (the second case: 2 work items, so its keys
// are cut in two), as the split count depends on the shapes only.
TEST_P(AttentionBf16, ResultsDoNotDependOnTheThreadCount) {
  const int saved = omp_get_max_threads();
  for (const Case& c : {Case{600, 4, 64, {900, 200}}, Case{100, 2, 64, {5000, 3300}}}) {
    auto with_threads = [&](int threads) {
      return [&, threads](const Data& d, float* out) {
        omp_set_num_threads(threads);
        run(d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f, out);
        omp_set_num_threads(saved);
      };
    };
    expect_identical(7, c, with_threads(1), with_threads(std::max(2, saved)));
  }
  EXPECT_EQ(key_splits_for(100, 8300, 2), 2);
}

// Keys cut into ranges (across spans, at key blocks), each range's rows
// merged by its log-sum-exp: the softmax over all keys.
TEST_P(AttentionBf16, KeySplitsMatchTheReferenceWithinPsRounding) {
  for (int splits : {2, 3, 4}) {
    SCOPED_TRACE(splits);
    expect_within_ps_rounding([this, splits](const float* q, int64_t nq, const std::vector<KvSpan>& spans, int heads,
                                             int dim, float scale, float* out) {
      run(q, nq, spans, heads, dim, scale, out, detail::kBf16MaxQueryTile, splits);
    });
  }
  std::vector<float> q(20 * 64, 1.f), out(q.size());
  EXPECT_THROW(run(q.data(), 20, {}, 1, 64, 0.125f, out.data(), detail::kBf16MaxQueryTile, 5), lingbot::Error);
}

// A query's result does not depend on which tile of queries it shares a
// work item with: the kernel shortens the tiles for many threads
// (bf16_query_tile), and attention_bench compares fixed bounds.
TEST_P(AttentionBf16, ResultsDoNotDependOnTheQueryTile) {
  const Case c{600, 2, 64, {700, 300}};
  auto with_tiles_of = [&](int rows) {
    return [&, rows](const Data& d, float* out) { run(d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f, out, rows); };
  };
  expect_identical(8, c, with_tiles_of(detail::kBf16MaxQueryTile), with_tiles_of(128));
  std::vector<float> q(20 * 64, 1.f), out(q.size());
  EXPECT_THROW(run(q.data(), 20, {}, 1, 64, 0.125f, out.data(), 100), lingbot::Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionBf16, ::testing::Values(Bf16Kernel::Onednn, Bf16Kernel::Amx),
                         [](const ::testing::TestParamInfo<Bf16Kernel>& info) {
                           return std::string(info.param == Bf16Kernel::Amx ? "Amx" : "Onednn");
                         });

// The two kernels sum the same exact products in different orders, so they
// agree to float32 rounding but for P's rounding where a weight lies near a
// bf16 tie: far inside the reference bound.
TEST(AttentionBf16Kernels, AmxAgreesWithOnednn) {
  if (!detail::bf16_kernel_available(Bf16Kernel::Amx, 64) || !detail::bf16_kernel_available(Bf16Kernel::Onednn, 64)) {
    GTEST_SKIP() << "needs both kernels (AMX)";
  }
  std::mt19937 rng(9);
  const Case c{978, 4, 64, {972, 972, 12}, 1.f, KvElement::Bf16};
  const Data d = make(c, rng);
  std::vector<float> amx(d.q.size()), onednn(d.q.size());
  detail::attention_bf16_with(Bf16Kernel::Amx, d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f, amx.data());
  detail::attention_bf16_with(Bf16Kernel::Onednn, d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f, onednn.data());
  double worst = 0;
  for (size_t i = 0; i < amx.size(); ++i) worst = std::max(worst, std::fabs(double{amx[i]} - onednn[i]));
  EXPECT_LE(worst, 1e-4 * d.vmax);
}

// Query tiles of 512 rows, halved down to 128 while the items are fewer
// than 8 per thread.
TEST(AttentionBf16Kernels, ShortensQueryTilesForManyThreads) {
  EXPECT_EQ(detail::bf16_query_tile(978, 16, 1, 2, 32), 512);     // 2 x 16 items for 2 threads
  EXPECT_EQ(detail::bf16_query_tile(978, 16, 1, 8, 32), 256);     // 4 x 16 for 8
  EXPECT_EQ(detail::bf16_query_tile(978, 16, 1, 16, 32), 128);    // 8 x 16 for 16
  EXPECT_EQ(detail::bf16_query_tile(978, 16, 1, 64, 32), 128);    // no shorter
  EXPECT_EQ(detail::bf16_query_tile(978, 16, 4, 16, 32), 512);    // the full window's 4 key splits: 128 items
  EXPECT_EQ(detail::bf16_query_tile(7824, 16, 1, 16, 16), 496);   // the scale phase: 16 tiles of 489 -> 496
}

TEST(AttentionBf16Kernels, AutoNamesItsKernel) {
  const std::string name = detail::bf16_attention_kernel_name();
  EXPECT_EQ(name, detail::bf16_kernel_available(Bf16Kernel::Amx, 64) ? "AMX tiles" : "oneDNN matmul");
  if (detail::bf16_kernel_available(Bf16Kernel::Amx, 64)) {
    EXPECT_FALSE(detail::bf16_kernel_available(Bf16Kernel::Amx, 48)) << "head_dim must be a multiple of 32";
  }
}

// The softmax step both kernels share (bf16_softmax_avx512.h, through the
// oneDNN kernel's two instances: P rounded by integer arithmetic, and by
// AVX512-BF16's conversion where the CPU has it): against exponentials
// computed in double, over two key blocks, the second one short (keys and
// padding) and moving some rows' maximum but not others'.
class Bf16SoftmaxStep : public ::testing::TestWithParam<bool> {};

TEST_P(Bf16SoftmaxStep, MatchesExactExponentials) {
  if (!detail::bf16_attention_avx512_built() || !cpu_supports(Isa::Avx512)) GTEST_SKIP() << "needs AVX-512";
  const bool native = GetParam();
  if (native && !cpu_has_bf16_arithmetic()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const auto step = native ? detail::bf16_softmax_step_avx512bf16 : detail::bf16_softmax_step_avx512;
  constexpr int rows = 4, ld = detail::kBf16KeyBlock, dim = 64;
  const float c = 0.125f * 1.4426950408889634f;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 6.f);
  std::vector<float> m(rows, -std::numeric_limits<float>::infinity()), l(rows, 0.f), o(rows * dim);
  std::vector<uint16_t> p(rows * ld);
  for (const int n : {ld, 70}) {
    std::vector<float> s(rows * ld);
    for (int r = 0; r < rows; ++r) {
      // Rows 0 and 1 get larger scores in the second block (their maximum moves), rows 2 and 3 smaller.
      const float shift = n == ld ? 0.f : (r < 2 ? 40.f : -40.f);
      for (int j = 0; j < ld; ++j) s[r * ld + j] = j < n ? normal(rng) + shift : 1e30f;  // padding: never read as a key
    }
    for (float& x : o) x = normal(rng);
    const std::vector<float> m0 = m, l0 = l, o0 = o;
    step(s.data(), rows, n, ld, c, m.data(), l.data(), o.data(), dim, p.data());
    for (int r = 0; r < rows; ++r) {
      float block_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n; ++j) block_max = std::max(block_max, s[r * ld + j] * c);
      const double m_new = std::max<double>(m0[r], block_max);
      EXPECT_EQ(m[r], static_cast<float>(m_new)) << "row " << r << ", " << n << " keys";
      const double alpha = std::isinf(m0[r]) ? 0.0 : std::exp2(m0[r] - m_new);
      double sum = 0;
      for (int j = 0; j < ld; ++j) {
        uint32_t bits = uint32_t{p[r * ld + j]} << 16;
        float got;
        std::memcpy(&got, &bits, 4);
        if (j >= n) {
          EXPECT_EQ(got, 0.f) << "padding key " << j << " of row " << r;
          continue;
        }
        const double exact = std::exp2(double{s[r * ld + j]} * c - m_new);
        sum += exact;
        // P is rounded to bf16 (8 significant bits: at most 2^-8 relative) from a value within 1e-5 of exact.
        EXPECT_NEAR(got, exact, exact * (std::ldexp(1.0, -8) + 1e-5) + 1e-37) << "row " << r << ", key " << j;
      }
      EXPECT_NEAR(l[r], l0[r] * alpha + sum, 1e-5 * (l0[r] * alpha + sum)) << "row " << r << ", " << n << " keys";
      for (int d = 0; d < dim; ++d) {
        // The first block leaves O alone (the kernels start it at 0); later ones scale it by alpha.
        const double want = std::isinf(m0[r]) ? o0[r * dim + d] : o0[r * dim + d] * alpha;
        EXPECT_NEAR(o[r * dim + d], want, 1e-6 * std::fabs(want) + 1e-30) << "row " << r << ", dim " << d;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rounding, Bf16SoftmaxStep, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Avx512Bf16") : std::string("Integer");
                         });
