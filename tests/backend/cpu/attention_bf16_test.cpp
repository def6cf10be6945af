// cpu::attention_bf16 (attention_bf16.h), each of its kernels (oneDNN's
// products, AMX tiles where the CPU has them) against the double-precision
// reference over the same bf16-valued q, k and v (attention_bf16_cases.h);
// also: no keys, thread-count independence, the AMX kernel against
// oneDNN's. Each kernel is skipped where it cannot run.
#include "backend/cpu/attention_bf16.h"

#include "attention_bf16_cases.h"

#include <gtest/gtest.h>
#include <omp.h>

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
           float* out) const {
    detail::attention_bf16_with(GetParam(), q, nq, spans, heads, dim, scale, out);
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

TEST_P(AttentionBf16, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937 rng(7);
  const Case c{600, 4, 64, {900, 200}};
  const Data d = make(c, rng);
  const int64_t n = c.nq * c.heads * c.dim;
  std::vector<float> one(static_cast<size_t>(n)), many(static_cast<size_t>(n));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  run(d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f, one.data());
  omp_set_num_threads(std::max(2, saved));
  run(d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f, many.data());
  omp_set_num_threads(saved);
  EXPECT_EQ(one, many);
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

TEST(AttentionBf16Kernels, AutoNamesItsKernel) {
  const std::string name = detail::bf16_attention_kernel_name();
  EXPECT_EQ(name, detail::bf16_kernel_available(Bf16Kernel::Amx, 64) ? "AMX tiles" : "oneDNN matmul");
  if (detail::bf16_kernel_available(Bf16Kernel::Amx, 64)) {
    EXPECT_FALSE(detail::bf16_kernel_available(Bf16Kernel::Amx, 48)) << "head_dim must be a multiple of 32";
  }
}
