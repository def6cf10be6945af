// Matrix products on the CPU through oneDNN's sgemm.
//
// oneDNN picks its kernels at run time from the CPU's features (CPUID), so
// one binary runs AVX-512 (or AVX2) kernels on every x86-64 CPU, including
// models it has never heard of. (Debian's OpenBLAS 0.3.21 chose its kernels
// by CPU model number and fell back to SSE3 ones on the GPU machine's Xeon;
// docs/PERF.md.) A product with one row (m == 1, the camera head's one-token
// Linears) runs oneDNN's matrix-vector kernel.
//
// oneDNN threads through OpenMP, sharing one thread team with our own loops;
// call these from serial code only (never inside an OpenMP region), where
// they use all the team's threads.
#pragma once

#include <cstdint>
#include <string>

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

// Threads used by oneDNN and by our OpenMP loops.
void set_num_threads(int threads);
int num_threads();
// The matrix products' kernel family, for the run header and benchmarks:
// "oneDNN 2.6.3 sgemm avx512_core_amx".
std::string gemm_name();

}  // namespace lingbot::cpu
