#include "backend/cpu/gemm.h"

#include "core/error.h"

#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>

namespace lingbot::cpu {

namespace {

int g_threads = 0;  // 0: not set, use OpenMP's default

// Row-major c[m, n] = op(a) op(b) (+ c), op = 'N' (as is) or 'T' (transposed).
void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: c = 0, or c unchanged when accumulating (oneDNN leaves c alone)
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  const dnnl_status_t status =
      dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  LB_CHECK(status == dnnl_success, "oneDNN sgemm ({}{}, m={} n={} k={}) failed with status {}", ta, tb, m, n, k,
           static_cast<int>(status));
}

const char* dnnl_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

void gemm_abt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate) {
  sgemm('N', 'T', m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void gemm_ab(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate) {
  sgemm('N', 'N', m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void gemm_atb(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate) {
  sgemm('T', 'N', m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void set_num_threads(int threads) {
  if (threads <= 0) return;
  g_threads = threads;
  omp_set_num_threads(threads);
}

int num_threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }

std::string gemm_name() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{} sgemm {}", v->major, v->minor, v->patch,
                     dnnl_isa_name(dnnl_get_effective_cpu_isa()));
}

}  // namespace lingbot::cpu
