// How much a measured choice among cuBLASLt's candidates could give over its
// heuristic's first pick, on the aggregator's matrix products.
//
// For each product of a transformer block (one frame: 978 rows; the scale
// phase: 7,824) the heuristic is asked for up to 32 candidates; each is
// timed with CUDA events (5 warm-up calls, then 9 rounds of 20 calls,
// median round) and the table lists the first candidate's time beside the
// fastest one's. Shapes as Gemm::linear passes them: D (out_f x rows,
// column-major) = W^T X with the bias in the epilogue; bf16 out with a bf16
// bias, or float32 D += product with a float32 bias (the residual update).
//
// Built with -DLINGBOT_DEV=ON (gemm_candidates_dev), or alone on the GPU machine:
//   g++ -O2 -std=c++20 dev/cuda/gemm_candidates.cpp -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64 -lcublasLt -lcudart -o /tmp/gemm_candidates && /tmp/gemm_candidates
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_LT(x)                                                              \
  do {                                                                           \
    cublasStatus_t s_ = (x);                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                           \
      std::fprintf(stderr, "%s: status %d (line %d)\n", #x, int(s_), __LINE__); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

struct Problem {
  const char* name;
  int rows, in_f, out_f;
  bool residual;  // float32 D += product; else bf16 D = product
};

int main() {
  const Problem problems[] = {
      {"qkv", 978, 1024, 3072, false},   {"proj", 978, 1024, 1024, true},   {"fc1", 978, 1024, 4096, false},
      {"fc2", 978, 4096, 1024, true},    {"qkv", 7824, 1024, 3072, false},  {"proj", 7824, 1024, 1024, true},
      {"fc1", 7824, 1024, 4096, false},  {"fc2", 7824, 4096, 1024, true},
  };
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  const size_t workspace_bytes = size_t{32} << 20;
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  void *x, *w, *d, *bias;
  CHECK_CUDA(cudaMalloc(&x, size_t{7824} * 4096 * 2));
  CHECK_CUDA(cudaMalloc(&w, size_t{4096} * 4096 * 2));
  CHECK_CUDA(cudaMalloc(&d, size_t{7824} * 4096 * 4));
  CHECK_CUDA(cudaMalloc(&bias, 4096 * 4));
  CHECK_CUDA(cudaMemset(x, 0x3c, size_t{7824} * 4096 * 2));  // bf16 ~0.01
  CHECK_CUDA(cudaMemset(w, 0x3c, size_t{4096} * 4096 * 2));
  CHECK_CUDA(cudaMemset(d, 0, size_t{7824} * 4096 * 4));
  CHECK_CUDA(cudaMemset(bias, 0, 4096 * 4));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  std::printf("%-5s %5s %5s %5s  %-8s %10s %10s %5s %10s  %s\n", "op", "rows", "in", "out", "D", "first us",
              "best us", "rank", "TFLOP/s", "candidates (us, heuristic order)");
  for (const Problem& p : problems) {
    cublasLtMatmulDesc_t desc;
    CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    // cuBLASLt takes no float32 bias with a bfloat16 D (Gemm rounds it to bf16 first).
    const cudaDataType_t bias_type = p.residual ? CUDA_R_32F : CUDA_R_16BF;
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    cublasLtMatrixLayout_t la, lb, ld;
    CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, p.in_f, p.out_f, p.in_f));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, p.in_f, p.rows, p.in_f));
    CHECK_LT(cublasLtMatrixLayoutCreate(&ld, p.residual ? CUDA_R_32F : CUDA_R_16BF, p.out_f, p.rows, p.out_f));
    cublasLtMatmulPreference_t pref;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = workspace_bytes;
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    constexpr int kMax = 32;
    cublasLtMatmulHeuristicResult_t results[kMax] = {};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, kMax, results, &found);
    if (st != CUBLAS_STATUS_SUCCESS) {
      std::printf("%s: no heuristic (%d)\n", p.name, int(st));
      continue;
    }
    const float one = 1.0f, zero = 0.0f;
    const float* beta = p.residual ? &one : &zero;
    std::vector<float> times;
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) {
        times.push_back(-1);
        continue;
      }
      auto call = [&] {
        return cublasLtMatmul(lt, desc, &one, w, la, x, lb, beta, d, ld, d, ld, &results[i].algo, workspace,
                              workspace_bytes, stream);
      };
      bool ok = true;
      for (int r = 0; r < 5 && ok; ++r) ok = call() == CUBLAS_STATUS_SUCCESS;
      if (!ok) {
        times.push_back(-1);
        continue;
      }
      std::vector<float> rounds;
      for (int r = 0; r < 9; ++r) {
        CHECK_CUDA(cudaEventRecord(start, stream));
        for (int c = 0; c < 20; ++c) call();
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        rounds.push_back(ms * 1000.0f / 20.0f);
      }
      std::nth_element(rounds.begin(), rounds.begin() + 4, rounds.end());
      times.push_back(rounds[4]);
    }
    CHECK_CUDA(cudaGetLastError());
    int best = -1;
    for (int i = 0; i < found; ++i)
      if (times[i] > 0 && (best < 0 || times[i] < times[best])) best = i;
    const double flop = 2.0 * p.rows * p.in_f * p.out_f;
    std::printf("%-5s %5d %5d %5d  %-8s %10.2f %10.2f %5d %10.1f  ", p.name, p.rows, p.in_f, p.out_f,
                p.residual ? "f32+=" : "bf16", times[0], best >= 0 ? times[best] : -1.0f, best,
                best >= 0 ? flop / (times[best] * 1e-6) / 1e12 : 0.0);
    for (int i = 0; i < found; ++i) std::printf("%.1f ", times[i]);
    std::printf("\n");
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
  }
  return 0;
}
