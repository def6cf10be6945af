#include "backend/cuda/gemm.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

#include <cublas_api.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace lingbot::cuda {

namespace {

[[noreturn]] void fail_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  fail("cublasLt: {} failed: {} ({}) at {}:{}", call, cublasGetStatusString(status), cublasGetStatusName(status), file,
       line);
}

#define LB_CUBLAS_CHECK(call)                                                       \
  do {                                                                              \
    const cublasStatus_t lb_cublas_status_ = (call);                                \
    if (lb_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::lingbot::cuda::fail_cublas(lb_cublas_status_, #call, __FILE__, __LINE__);   \
  } while (0)

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    default: fail("cuda backend: matrix products take float32 or bfloat16, got {}", dtype_name(t));
  }
}

// The largest power of two (up to 256) dividing the address; 256 for null.
int alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a == 0) return 256;
  return static_cast<int>(std::min<uintptr_t>(256, a & (~a + 1)));
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  LB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

template <typename T>
void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  LB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
}

std::string describe(const MatmulShape& s) {
  return fmt::format("{}x{}x{} (m x n x k, A{} B{}, {} x {} {} {})", s.m, s.n, s.k, s.transpose_a ? "^T" : "",
                     s.transpose_b ? "^T" : "", dtype_name(s.ab_type), dtype_name(s.ab_type),
                     s.accumulate ? "+=" : "->", dtype_name(s.d_type));
}

}  // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  float measured_us = -1;  // the chosen candidate's time per call in the trials, or -1 where none ran

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::Gemm(cudaStream_t stream, bool allow_tf32, size_t workspace_bytes, GemmAlgorithm choice)
    : stream_(stream),
      allow_tf32_(allow_tf32),
      choice_(choice),
      workspace_bytes_(workspace_bytes),
      bias_bf16_(stream, "bfloat16 biases") {
  LB_CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_ = device_malloc(workspace_bytes_, "the cuBLASLt workspace");
}

Gemm::~Gemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
  device_free(workspace_);  // cudaFree waits for the work that may still use it
}

Gemm::Plan* Gemm::find_plan(const Key& key, const Operands& operands) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  const MatmulShape& s = key.shape;
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute = s.ab_type == DType::F32 && allow_tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                            : CUBLAS_COMPUTE_32F;
  LB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (key.bias != BiasKind::None) {
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, key.bias == BiasKind::F32 ? CUDA_R_32F : CUDA_R_16BF);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, operands.bias);  // the heuristic reads its alignment
  }
  const cudaDataType_t ab = cuda_type(s.ab_type), dt = cuda_type(s.d_type);
  LB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, ab, s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k, s.lda));
  LB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, ab, s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n, s.ldb));
  LB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, dt, s.m, s.n, s.ldd));

  cublasLtMatmulPreference_t pref = nullptr;
  LB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  // A measured choice times the heuristic's first candidates; a problem
  // first met inside a graph capture takes the heuristic's choice, since
  // trial runs cannot be captured.
  const bool measure = choice_ == GemmAlgorithm::Measured && !is_capturing(stream_);
  constexpr int kHeuristicCandidates = 8, kMaxCandidates = 16;
  const int wanted = measure ? kMaxCandidates : kHeuristicCandidates;
  cublasLtMatmulHeuristicResult_t results[kMaxCandidates] = {};
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    set_preference(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes_));
    set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key.align_a));
    set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(key.align_b));
    set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key.align_d));
    set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key.align_d));
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, pref, wanted,
                                            results, &found);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // "Not supported" comes back as either status (the H200's cuBLASLt 13 says
  // INVALID_VALUE for a float32 bias with bfloat16 output): no plan, and the
  // caller falls back to another formulation.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE) LB_CUBLAS_CHECK(status);

  // Candidates come best first; without measuring, the first usable one is taken.
  std::vector<cublasLtMatmulAlgo_t> usable;
  for (int i = 0; i < found && status == CUBLAS_STATUS_SUCCESS; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= workspace_bytes_)
      usable.push_back(results[i].algo);
  if (usable.empty()) {
    plans_.emplace(key, nullptr);
    return nullptr;
  }
  plan->algo = usable.front();
  if (measure && usable.size() > 1) choose_by_measuring(*plan, usable, operands);
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

// Times each candidate on the call's own operands and keeps the fastest,
// unless it beats the heuristic's first by less than kMinGain: the trials'
// timings vary by a few percent, and a choice that followed them there
// would change from run to run (and with it the products' rounding) for
// nothing. The trials write D: the call's own output where the product
// overwrites it (the real call follows), a scratch matrix of D's size where
// the product adds into it. Each candidate runs once untimed (its first
// launch loads its kernel), then kRounds rounds of kCalls calls, timed by
// CUDA events; its time is its fastest round's mean. A candidate that fails
// to launch is passed over; the first candidate stays when all fail.
void Gemm::choose_by_measuring(Plan& plan, const std::vector<cublasLtMatmulAlgo_t>& candidates,
                               const Operands& operands) {
  constexpr int kRounds = 3, kCalls = 5;
  constexpr float kMinGain = 0.05f;
  const MatmulShape& s = operands.shape;
  void* d = operands.d;
  DeviceScratch trial_d(stream_, "cuBLASLt trial output");  // freed, once the trials are done, on leaving
  if (s.accumulate) d = trial_d.get(static_cast<size_t>(s.ldd * (s.n - 1) + s.m) * dtype_size(s.d_type));
  using Event = std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)>;
  auto make_event = [] {
    cudaEvent_t e = nullptr;
    LB_CUDA_CHECK(cudaEventCreate(&e));
    return Event(e, cudaEventDestroy);
  };
  const Event start = make_event(), stop = make_event();
  if (operands.bias) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, operands.bias);
  const float one = 1.0f, zero = 0.0f;
  float first_ms = -1, best_ms = -1;
  const cublasLtMatmulAlgo_t* best = nullptr;
  for (const cublasLtMatmulAlgo_t& algo : candidates) {
    auto call = [&] {
      return cublasLtMatmul(handle_, plan.desc, &one, operands.a, plan.a, operands.b, plan.b,
                            s.accumulate ? &one : &zero, d, plan.d, d, plan.d, &algo, workspace_, workspace_bytes_,
                            stream_);
    };
    if (call() != CUBLAS_STATUS_SUCCESS) continue;
    float fastest = -1;
    for (int r = 0; r < kRounds; ++r) {
      LB_CUDA_CHECK(cudaEventRecord(start.get(), stream_));
      for (int c = 0; c < kCalls; ++c) LB_CUBLAS_CHECK(call());
      LB_CUDA_CHECK(cudaEventRecord(stop.get(), stream_));
      LB_CUDA_CHECK(cudaEventSynchronize(stop.get()));
      float ms = 0;
      LB_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
      if (fastest < 0 || ms < fastest) fastest = ms;
    }
    if (&algo == &candidates.front()) first_ms = fastest;
    if (best_ms < 0 || fastest < best_ms) {
      best_ms = fastest;
      best = &algo;
    }
  }
  if (best && first_ms >= 0 && best_ms > (1.0f - kMinGain) * first_ms) {
    best = &candidates.front();
    best_ms = first_ms;
  }
  if (best) plan.algo = *best;
  plan.measured_us = best_ms < 0 ? -1.0f : best_ms * 1000.0f / kCalls;
}

size_t Gemm::measured_plan_count() const {
  return static_cast<size_t>(
      std::count_if(plans_.begin(), plans_.end(), [](const auto& p) { return p.second && p.second->measured_us >= 0; }));
}

void Gemm::run(const Plan& plan, const void* a, const void* b, const void* bias, void* d, bool accumulate) {
  if (bias) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float one = 1.0f, zero = 0.0f;
  // C is D (in place, same layout): beta = 0 leaves it unread; beta = 1
  // adds the product to what D holds.
  LB_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &one, a, plan.a, b, plan.b, accumulate ? &one : &zero, d, plan.d,
                                 d, plan.d, &plan.algo, workspace_, workspace_bytes_, stream_));
}

void Gemm::matmul(const MatmulShape& s, const void* a, const void* b, const float* bias, void* d,
                  const void* bias_bf16) {
  LB_CHECK(s.ab_type == DType::F32 || s.ab_type == DType::BF16,
           "cuda backend: matrix products take float32 or bfloat16 inputs, got {}", dtype_name(s.ab_type));
  LB_CHECK(s.d_type == DType::F32 || (s.d_type == DType::BF16 && s.ab_type == DType::BF16),
           "cuda backend: a {} matrix product cannot write {}", dtype_name(s.ab_type), dtype_name(s.d_type));
  LB_CHECK(s.m >= 0 && s.n >= 0 && s.k >= 0, "cuda backend: negative matrix product size {}", describe(s));
  if (s.m == 0 || s.n == 0) return;
  LB_CHECK(s.k > 0, "cuda backend: matrix product with an empty inner dimension: {}", describe(s));

  Key key;
  key.shape = s;
  key.align_a = alignment_of(a);
  key.align_b = alignment_of(b);
  key.align_d = alignment_of(d);

  if (bias == nullptr || s.d_type == DType::F32) {
    key.bias = bias ? BiasKind::F32 : BiasKind::None;
    key.align_bias = alignment_of(bias);
    const Plan* plan = find_plan(key, {s, a, b, bias, d});
    LB_CHECK(plan != nullptr, "cuBLASLt offers no algorithm for {}", describe(s));
    run(*plan, a, b, bias, d, s.accumulate);
    return;
  }
  // bfloat16 output with a bias.
  if (bias_path_ == BiasPath::Auto) {
    key.bias = BiasKind::F32;
    key.align_bias = alignment_of(bias);
    if (const Plan* plan = find_plan(key, {s, a, b, bias, d})) {
      run(*plan, a, b, bias, d, s.accumulate);
      return;
    }
  }
  const void* rounded = bias_bf16;
  if (rounded == nullptr) {
    void* scratch = bias_bf16_.get(static_cast<size_t>(s.m) * 2);
    kernels::convert(bias, DType::F32, scratch, DType::BF16, s.m, stream_);
    rounded = scratch;
  }
  key.bias = BiasKind::BF16;
  key.align_bias = alignment_of(rounded);
  const Plan* plan = find_plan(key, {s, a, b, rounded, d});
  LB_CHECK(plan != nullptr, "cuBLASLt offers no algorithm for {} with a bias", describe(s));
  run(*plan, a, b, rounded, d, s.accumulate);
}

void Gemm::linear(const void* x, const void* w, const float* bias, void* out, int64_t rows, int64_t in_f, int64_t out_f,
                  DType in_type, DType out_type, const void* bias_bf16, bool accumulate) {
  // Row-major out[rows, out_f] is column-major D = out^T (out_f x rows, ld out_f):
  //   out^T = w x^T, with w (row-major [out_f, in_f]) seen column-major as in_f x out_f
  //   (hence transposed) and x (row-major [rows, in_f]) column-major as in_f x rows.
  // The bias then runs along D's rows: one value per output feature.
  MatmulShape s;
  s.transpose_a = true;
  s.transpose_b = false;
  s.m = out_f;
  s.n = rows;
  s.k = in_f;
  s.lda = in_f;
  s.ldb = in_f;
  s.ldd = out_f;
  s.ab_type = in_type;
  s.d_type = out_type;
  s.accumulate = accumulate;
  matmul(s, w, x, bias, out, bias_bf16);
}

}  // namespace lingbot::cuda
