// Matrix products on the CPU through OpenBLAS.
//
// Row-major wrappers with the shapes our layers use. OpenBLAS runs its own
// thread pool; call these from serial code only (never inside an OpenMP
// region) so the two pools do not oversubscribe the cores.
#pragma once

#include <cstdint>

namespace lingbot::cpu {

// c[m, n] = a[m, k] * b[n, k]^T  (+ c if accumulate). Leading dimensions are
// the row lengths of the row-major matrices.
void gemm_abt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate = false);
// c[m, n] = a[m, k] * b[k, n]  (+ c if accumulate).
void gemm_ab(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate = false);

// c[m, n] = a[k, m]^T * b[k, n]  (+ c if accumulate).
void gemm_atb(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate = false);

// Threads used by OpenBLAS and by our OpenMP loops.
void set_num_threads(int threads);
int num_threads();
const char* blas_name();  // "OpenBLAS 0.3.21 ..." for logs and benchmarks

}  // namespace lingbot::cpu
