// Matrix products through cuBLASLt, with the bias fused into the epilogue.
//
// Two precisions (the backend's two kinds of layers):
//   bfloat16 x bfloat16 -> bfloat16 or float32, float32 accumulation
//     (the encoder and the aggregator);
//   float32 x float32 -> float32, on TF32 tensor cores when allowed
//     (CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to 10-bit mantissas,
//     float32 accumulation), else full float32 (the camera and DPT heads).
// GELU is not fused: cuBLASLt's GELU epilogues use the tanh approximation,
// upstream's nn.GELU() is the exact erf form (the backend applies it in its
// own kernel, see kernels::unary).
//
// Plans (descriptors, layouts and the algorithm: cuBLASLt's heuristic's
// first usable pick, or with GemmAlgorithm::Measured the fastest of its
// first 16 candidates timed on the problem's first call, where it is at
// least 5% faster than the first) are made once per problem — shape,
// types, and the alignment of every pointer, which decides which kernels
// are legal — and cached: frame after frame the same problems come back,
// and a cached call allocates nothing and does no host work beyond a map
// lookup. The workspace is one buffer,
// allocated up front: 32 MiB, or 4 MiB in the low-memory profile (the
// heuristic then passes over algorithms that need more).
#pragma once

#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_algorithm.h"
#include "core/dtype.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace lingbot::cuda {

// D = op(A) op(B) (+ bias per row of D), in cuBLAS's column-major terms:
// D is m x n with leading dimension ldd; op(A) is m x k (A stored k x m when
// transposed), op(B) is k x n (B stored n x k when transposed).
struct MatmulShape {
  bool transpose_a = false;
  bool transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  DType ab_type = DType::F32;  // of A and B: F32 or BF16
  DType d_type = DType::F32;   // F32, or BF16 for BF16 inputs
  // D += product (C = D, beta = 1) instead of D = product: a residual
  // update in the product's epilogue, with no pass of its own.
  bool accumulate = false;
  auto operator<=>(const MatmulShape&) const = default;
};

class Gemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  static constexpr size_t kLowMemoryWorkspaceBytes = size_t{4} << 20;

  Gemm(cudaStream_t stream, bool allow_tf32, size_t workspace_bytes = kWorkspaceBytes,
       GemmAlgorithm choice = GemmAlgorithm::Heuristic);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Row-major linear layer: out[rows, out_f] = x[rows, in_f] w[out_f, in_f]^T (+ bias[out_f]).
  // x and w of `in_type` (F32 or BF16); out of `out_type` (BF16 inputs: BF16 or F32;
  // F32 inputs: F32); bias float32 or null. accumulate: out += instead of out =.
  void linear(const void* x, const void* w, const float* bias, void* out, int64_t rows, int64_t in_f, int64_t out_f,
              DType in_type, DType out_type, const void* bias_bf16 = nullptr, bool accumulate = false);
  // The general product (bias: float32 [m] or null).
  // bias_bf16: null, or the bias already rounded to bfloat16 (a constant
  // copy the caller keeps), used where the bias must be rounded instead of
  // rounding it again on the stream at every call.
  void matmul(const MatmulShape& shape, const void* a, const void* b, const float* bias, void* d,
              const void* bias_bf16 = nullptr);

  cublasLtHandle_t handle() const { return handle_; }
  cudaStream_t stream() const { return stream_; }
  bool allow_tf32() const { return allow_tf32_; }
  size_t plan_count() const { return plans_.size(); }
  // Plans whose algorithm was chosen by timing the candidates (GemmAlgorithm::Measured).
  size_t measured_plan_count() const;

  // How a float32 bias reaches a bfloat16 output. Auto: passed as float32 to
  // the epilogue when cuBLASLt offers an algorithm for that (checked once per
  // problem), else first rounded to bfloat16 in a scratch buffer (as
  // upstream's autocast does with the bias). Tests force the second way to
  // cover it.
  enum class BiasPath { Auto, RoundToBf16 };
  void set_bias_path(BiasPath path) { bias_path_ = path; }

 private:
  enum class BiasKind : uint8_t { None, F32, BF16 };
  struct Key {
    MatmulShape shape;
    BiasKind bias = BiasKind::None;
    // Alignment in bytes (up to 256) of each pointer: cuBLASLt's kernels
    // need some of them (16 bytes for vector loads); slices of a tensor
    // are less aligned than the tensor.
    int align_a = 256, align_b = 256, align_d = 256, align_bias = 256;
    auto operator<=>(const Key&) const = default;
  };
  struct Plan;
  // The call a plan is made for: a measured choice times its candidates on these.
  struct Operands {
    const MatmulShape& shape;
    const void* a;
    const void* b;
    const void* bias;
    void* d;
  };

  // The plan for `key`, made on first use; null when cuBLASLt offers no algorithm.
  Plan* find_plan(const Key& key, const Operands& operands);
  void choose_by_measuring(Plan& plan, const std::vector<cublasLtMatmulAlgo_t>& candidates, const Operands& operands);
  void run(const Plan& plan, const void* a, const void* b, const void* bias, void* d, bool accumulate);

  cudaStream_t stream_;
  bool allow_tf32_;
  GemmAlgorithm choice_;
  BiasPath bias_path_ = BiasPath::Auto;
  cublasLtHandle_t handle_ = nullptr;
  size_t workspace_bytes_;
  void* workspace_ = nullptr;
  DeviceScratch bias_bf16_;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // null entries: no algorithm for that key
};

}  // namespace lingbot::cuda
