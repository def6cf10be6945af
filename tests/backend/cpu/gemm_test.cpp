// The CPU matrix products (backend/cpu/gemm.h, oneDNN) against a naive
// double-precision triple loop: the three operand layouts, strided leading
// dimensions, accumulation, and the one-row (matrix-vector) shapes of the
// camera head.
#include "backend/cpu/gemm.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

using namespace lingbot::cpu;

namespace {

enum class Form { ABt, AB, AtB };

struct Case {
  Form form;
  int64_t m, n, k;
  bool accumulate;
};

void check(const Case& c, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  // a and b as stored: ABt a[m][k] b[n][k]; AB a[m][k] b[k][n]; AtB a[k][m] b[k][n].
  // Every leading dimension is 3 floats longer than the row, to test strides.
  const int64_t a_rows = c.form == Form::AtB ? c.k : c.m, a_cols = c.form == Form::AtB ? c.m : c.k;
  const int64_t b_rows = c.form == Form::ABt ? c.n : c.k, b_cols = c.form == Form::ABt ? c.k : c.n;
  const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = c.n + 3;
  std::vector<float> a(static_cast<size_t>(a_rows * lda)), b(static_cast<size_t>(b_rows * ldb));
  std::vector<float> out(static_cast<size_t>(c.m * ldc));
  for (float& x : a) x = normal(rng);
  for (float& x : b) x = normal(rng);
  for (float& x : out) x = normal(rng);
  const std::vector<float> before = out;
  auto at = [&](int64_t i, int64_t p) { return c.form == Form::AtB ? a[p * lda + i] : a[i * lda + p]; };
  auto bt = [&](int64_t p, int64_t j) { return c.form == Form::ABt ? b[j * ldb + p] : b[p * ldb + j]; };
  switch (c.form) {
    case Form::ABt: gemm_abt(c.m, c.n, c.k, a.data(), lda, b.data(), ldb, out.data(), ldc, c.accumulate); break;
    case Form::AB: gemm_ab(c.m, c.n, c.k, a.data(), lda, b.data(), ldb, out.data(), ldc, c.accumulate); break;
    case Form::AtB: gemm_atb(c.m, c.n, c.k, a.data(), lda, b.data(), ldb, out.data(), ldc, c.accumulate); break;
  }
  double worst = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double ref = c.accumulate ? before[static_cast<size_t>(i * ldc + j)] : 0.0;
      for (int64_t p = 0; p < c.k; ++p) ref += double{at(i, p)} * bt(p, j);
      // fp32 sums of k products of unit normals: error ~ sqrt(k) u |terms|.
      const double tol = 1e-5 * std::sqrt(static_cast<double>(c.k) + 1.0) * 4.0;
      worst = std::max(worst, std::fabs(out[static_cast<size_t>(i * ldc + j)] - ref) / tol);
    }
  EXPECT_LE(worst, 1.0) << "form " << static_cast<int>(c.form) << " m=" << c.m << " n=" << c.n << " k=" << c.k
                        << " accumulate=" << c.accumulate;
  // The padding beyond each row of c is never written.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldc; ++j)
      EXPECT_EQ(out[static_cast<size_t>(i * ldc + j)], before[static_cast<size_t>(i * ldc + j)]);
}

}  // namespace

TEST(Gemm, EveryFormMatchesANaiveProduct) {
  std::mt19937 rng(7);
  for (const Form form : {Form::ABt, Form::AB, Form::AtB})
    for (const bool accumulate : {false, true})
      for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
               {1, 1, 1}, {1, 300, 257}, {1, 64, 2048}, {7, 5, 3}, {33, 65, 129}, {200, 96, 64}, {3, 1, 50}})
        check({form, m, n, k, accumulate}, rng);
}

TEST(Gemm, EmptyProductsLeaveTheOutputAlone) {
  std::vector<float> a(4, 1.f), b(4, 1.f), out(4, 5.f);
  gemm_abt(0, 2, 2, a.data(), 2, b.data(), 2, out.data(), 2);
  gemm_abt(2, 0, 2, a.data(), 2, b.data(), 2, out.data(), 2);
  for (float x : out) EXPECT_EQ(x, 5.f);
  // k == 0: c = 0 (or c unchanged when accumulating), as BLAS defines it.
  gemm_abt(2, 2, 0, a.data(), 1, b.data(), 1, out.data(), 2, true);
  for (float x : out) EXPECT_EQ(x, 5.f);
  gemm_abt(2, 2, 0, a.data(), 1, b.data(), 1, out.data(), 2);
  for (float x : out) EXPECT_EQ(x, 0.f);
}
