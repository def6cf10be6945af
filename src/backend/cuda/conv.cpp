#include "backend/cuda/conv.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "core/error.h"

#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <vector>

namespace lingbot::cuda {

namespace {

[[noreturn]] void fail_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  for (char& c : detail)
    if (c == '\n') c = ' ';  // one line
  fail("cudnn: {} failed: {} ({}) at {}:{}", call, cudnnGetErrorString(status), detail, file, line);
}

#define LB_CUDNN_CHECK(call)                                                      \
  do {                                                                            \
    const cudnnStatus_t lb_cudnn_status_ = (call);                                \
    if (lb_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                 \
      ::lingbot::cuda::fail_cudnn(lb_cudnn_status_, #call, __FILE__, __LINE__);   \
  } while (0)

// Algorithms needing more workspace than this are passed over.
constexpr size_t kMaxWorkspaceBytes = size_t{512} << 20;

int to_int(int64_t v, const ConvShape& s) {
  LB_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "cuda backend: conv2d {} is too large for cuDNN",
           s.describe());
  return static_cast<int>(v);
}

// Descriptors and algorithm of one convolution shape.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
  float measured_ms = -1;  // the trial run's time, or -1 where the heuristic chose

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "unknown";
  }
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default math";
    case CUDNN_TENSOR_OP_MATH: return "tensor ops";
    case CUDNN_FMA_MATH: return "fma";
    default: return "tensor ops with conversion";
  }
}

}  // namespace

std::string ConvShape::describe() const {
  if (channels_last)
    return fmt::format("NHWC{} [{}, {}, {}, {}] * [{}, {}, {}, {}] (stride {}, pad {})", bf16 ? " bfloat16" : "",
                       batches, height, width, in_channels, out_channels, kernel, kernel, in_channels, stride, pad);
  return fmt::format("[{}, {}, {}, {}] * [{}, {}, {}, {}] (stride {}, pad {})", batches, in_channels, height, width,
                     out_channels, in_channels, kernel, kernel, stride, pad);
}

struct Conv::Impl {
  cudaStream_t stream;
  bool allow_tf32;
  ConvAlgorithm choice;
  cudnnHandle_t handle = nullptr;
  DeviceScratch workspace;
  std::map<ConvShape, std::unique_ptr<ConvPlan>> plans;

  Impl(cudaStream_t s, bool tf32, ConvAlgorithm c)
      : stream(s), allow_tf32(tf32), choice(c), workspace(s, "the cuDNN workspace") {}
  ~Impl() {
    plans.clear();
    if (handle) cudnnDestroy(handle);
  }

  cudnnHandle_t get_handle() {
    if (handle == nullptr) {
      check_not_capturing(stream, "creating the cuDNN handle");
      LB_CUDNN_CHECK(cudnnCreate(&handle));
      LB_CUDNN_CHECK(cudnnSetStream(handle, stream));
    }
    return handle;
  }

  // The math type a candidate runs with: its own where tensor cores are
  // allowed (TF32 for float32, bf16 tensor cores for bfloat16), else FMA.
  // Empty for a candidate that would convert to float16.
  std::optional<cudnnMathType_t> math_for(const ConvShape& s, cudnnMathType_t candidate) const {
    if (candidate == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return std::nullopt;
    return allow_tf32 || s.bf16 ? candidate : CUDNN_FMA_MATH;
  }

  // Sets `math` on the plan's descriptor and returns the workspace `algo`
  // needs with it, or nothing if cuDNN refuses the pair or it needs more
  // than the cap.
  std::optional<size_t> try_algorithm(ConvPlan& plan, cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math) {
    if (cudnnSetConvolutionMathType(plan.conv, math) != CUDNN_STATUS_SUCCESS) return std::nullopt;
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x, plan.w, plan.conv, plan.y, algo, &bytes) !=
            CUDNN_STATUS_SUCCESS ||
        bytes > kMaxWorkspaceBytes)
      return std::nullopt;
    return bytes;
  }

  bool take(ConvPlan& plan, cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math) {
    const std::optional<size_t> bytes = try_algorithm(plan, algo, math);
    if (!bytes) return false;
    plan.algo = algo;
    plan.math = math;
    plan.workspace = *bytes;
    return true;
  }

  // Candidates best first from the heuristic; the first that cuDNN accepts
  // with its math type (see math_for) within the workspace cap.
  bool choose_by_heuristic(const ConvShape& s, ConvPlan& plan) {
    int max_count = 0;
    LB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> candidates(static_cast<size_t>(std::max(max_count, 1)));
    int returned = 0;
    LB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x, plan.w, plan.conv, plan.y, max_count,
                                                          &returned, candidates.data()));
    for (int i = 0; i < returned; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& p = candidates[static_cast<size_t>(i)];
      const std::optional<cudnnMathType_t> math = math_for(s, p.mathType);
      if (p.status == CUDNN_STATUS_SUCCESS && math && take(plan, p.algo, *math)) return true;
    }
    return false;
  }

  // Times every algorithm on the call's own tensors (y is written, which the
  // forward call overwrites) and takes the fastest usable one; false if
  // there is none or the search failed. The trials'
  // workspace is the largest any algorithm needs within the cap; if that
  // grew the buffer beyond what the choice needs, it is freed again so that
  // the next use allocates only that.
  bool choose_by_measuring(const ConvShape& s, ConvPlan& plan, cudnnMathType_t requested, const void* x,
                           const void* w, void* y) {
    size_t trial_bytes = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a)
      if (const auto bytes = try_algorithm(plan, static_cast<cudnnConvolutionFwdAlgo_t>(a), requested))
        trial_bytes = std::max(trial_bytes, *bytes);
    const size_t capacity_before = workspace.capacity();
    void* trial_space = trial_bytes > 0 ? workspace.get(trial_bytes) : nullptr;
    LB_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, requested));
    int max_count = 0;
    LB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> results(static_cast<size_t>(std::max(max_count, 1)));
    int returned = 0;
    // A failed search is not the user's error: the heuristic chooses instead.
    const cudnnStatus_t found = cudnnFindConvolutionForwardAlgorithmEx(
        handle, plan.x, x, plan.w, w, plan.conv, plan.y, y, max_count, &returned, results.data(), trial_space,
        trial_bytes);
    if (found != CUDNN_STATUS_SUCCESS) returned = 0;
    bool chosen = false;
    for (int i = 0; i < returned && !chosen; ++i) {  // fastest first
      const cudnnConvolutionFwdAlgoPerf_t& p = results[static_cast<size_t>(i)];
      const std::optional<cudnnMathType_t> math = math_for(s, p.mathType);
      if (p.status != CUDNN_STATUS_SUCCESS || !math || p.time < 0) continue;
      chosen = take(plan, p.algo, *math);
      if (chosen) plan.measured_ms = p.time;
    }
    if (workspace.capacity() > std::max(capacity_before, plan.workspace)) workspace.release();
    return chosen;
  }

  const ConvPlan& plan_for(const ConvShape& s, const void* x, const void* w, void* y) {
    if (auto it = plans.find(s); it != plans.end()) return *it->second;
    get_handle();
    auto plan = std::make_unique<ConvPlan>();
    LB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->x));
    LB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y));
    LB_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w));
    LB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv));
    // The dims are given as (n, c, h, w) either way; the format says how they lie in memory.
    const cudnnTensorFormat_t format = s.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    // bfloat16 maps and weights with float32 sums (cuDNN's pseudo-bf16
    // configuration); their products are exact in float32, so tensor cores
    // are allowed whatever the TF32 setting.
    const cudnnDataType_t data = s.bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    LB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->x, format, data, to_int(s.batches, s), to_int(s.in_channels, s),
                                              to_int(s.height, s), to_int(s.width, s)));
    LB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w, data, format, to_int(s.out_channels, s),
                                              to_int(s.in_channels, s), to_int(s.kernel, s), to_int(s.kernel, s)));
    const int pad = to_int(s.pad, s), stride = to_int(s.stride, s);
    LB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    const cudnnMathType_t requested = s.bf16 ? CUDNN_TENSOR_OP_MATH : allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    LB_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, requested));
    int n = 0, c = 0, oh = 0, ow = 0;
    LB_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &n, &c, &oh, &ow));
    LB_ASSERT(n == s.batches && c == s.out_channels && oh == s.out_height() && ow == s.out_width());
    LB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y, format, data, n, c, oh, ow));

    const bool chosen = (choice == ConvAlgorithm::Measured && !is_capturing(stream) &&
                         choose_by_measuring(s, *plan, requested, x, w, y)) ||
                        choose_by_heuristic(s, *plan);
    LB_CHECK(chosen, "cudnn: no usable forward algorithm for conv2d {}{}", s.describe(),
             allow_tf32 ? "" : " without TF32");
    return *plans.emplace(s, std::move(plan)).first->second;
  }
};

Conv::Conv(cudaStream_t stream, bool allow_tf32, ConvAlgorithm choice)
    : impl_(std::make_unique<Impl>(stream, allow_tf32, choice)) {}
Conv::~Conv() = default;

size_t Conv::plan_count() const { return impl_->plans.size(); }

void Conv::release_workspace() { impl_->workspace.release(); }

std::string Conv::describe_plan(const ConvShape& shape) const {
  const auto it = impl_->plans.find(shape);
  if (it == impl_->plans.end()) return {};
  const ConvPlan& plan = *it->second;
  const std::string how =
      plan.measured_ms >= 0 ? fmt::format("measured {:.3f} ms", plan.measured_ms) : std::string("heuristic");
  return fmt::format("{}, {}, workspace {:.1f} MiB ({})", algo_name(plan.algo), math_name(plan.math),
                     static_cast<double>(plan.workspace) / (1 << 20), how);
}

void Conv::forward(const ConvShape& s, const void* x, const void* w, void* y) {
  if (s.batches == 0 || s.out_channels == 0 || s.out_height() <= 0 || s.out_width() <= 0) return;
  const ConvPlan& plan = impl_->plan_for(s, x, w, y);
  void* workspace = plan.workspace > 0 ? impl_->workspace.get(plan.workspace) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  LB_CUDNN_CHECK(cudnnConvolutionForward(impl_->handle, &one, plan.x, x, plan.w, w, plan.conv, plan.algo, workspace,
                                         plan.workspace, &zero, plan.y, y));
}

}  // namespace lingbot::cuda
