#include "backend/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

namespace lingbot::cpu {

namespace {

int g_threads = 0;  // 0: not set, use the libraries' defaults

// Row-major c[m, n] = op(a) op(b) (+ c), op = transpose or not.
void sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f,
              a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), accumulate ? 1.0f : 0.0f, c,
              static_cast<blasint>(ldc));
}

}  // namespace

void gemm_abt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate) {
  sgemm(CblasNoTrans, CblasTrans, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void gemm_ab(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate) {
  sgemm(CblasNoTrans, CblasNoTrans, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void gemm_atb(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate) {
  sgemm(CblasTrans, CblasNoTrans, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void set_num_threads(int threads) {
  if (threads <= 0) return;
  g_threads = threads;
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
}

int num_threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }

const char* blas_name() { return openblas_get_config(); }

}  // namespace lingbot::cpu
