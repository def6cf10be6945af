#include "backend/cuda/conv.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "core/error.h"

#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
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
  size_t workspace = 0;

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
  cudnnHandle_t handle = nullptr;
  DeviceScratch workspace;
  std::map<ConvShape, std::unique_ptr<ConvPlan>> plans;

  Impl(cudaStream_t s, bool tf32) : stream(s), allow_tf32(tf32), workspace(s, "the cuDNN workspace") {}
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

  const ConvPlan& plan_for(const ConvShape& s) {
    if (auto it = plans.find(s); it != plans.end()) return *it->second;
    cudnnHandle_t h = get_handle();
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
    const bool bf16 = s.bf16;
    const cudnnDataType_t data = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    const bool tensor_cores = allow_tf32 || bf16;
    LB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->x, format, data, to_int(s.batches, s), to_int(s.in_channels, s),
                                              to_int(s.height, s), to_int(s.width, s)));
    LB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w, data, format, to_int(s.out_channels, s),
                                              to_int(s.in_channels, s), to_int(s.kernel, s), to_int(s.kernel, s)));
    const int pad = to_int(s.pad, s), stride = to_int(s.stride, s);
    LB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    const cudnnMathType_t requested = tensor_cores ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    LB_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, requested));
    int n = 0, c = 0, oh = 0, ow = 0;
    LB_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &n, &c, &oh, &ow));
    LB_ASSERT(n == s.batches && c == s.out_channels && oh == s.out_height() && ow == s.out_width());
    LB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y, format, data, n, c, oh, ow));

    // Candidates best first. A candidate may name a math type other than the
    // descriptor's (see cuDNN's notes on cudnnGet); it is used with that math
    // type when it stays within float32/TF32 (bf16: its tensor cores), and
    // only if cuDNN accepts the pair (the workspace query fails otherwise).
    int max_count = 0;
    LB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> candidates(static_cast<size_t>(std::max(max_count, 1)));
    int returned = 0;
    LB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, plan->x, plan->w, plan->conv, plan->y, max_count, &returned,
                                                          candidates.data()));
    bool chosen = false;
    for (int i = 0; i < returned && !chosen; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& p = candidates[static_cast<size_t>(i)];
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;  // would round to float16
      const cudnnMathType_t math = tensor_cores ? p.mathType : CUDNN_FMA_MATH;
      if (cudnnSetConvolutionMathType(plan->conv, math) != CUDNN_STATUS_SUCCESS) continue;
      size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(h, plan->x, plan->w, plan->conv, plan->y, p.algo, &bytes) !=
              CUDNN_STATUS_SUCCESS ||
          bytes > kMaxWorkspaceBytes)
        continue;
      plan->algo = p.algo;
      plan->workspace = bytes;
      chosen = true;
    }
    LB_CHECK(chosen, "cudnn: no usable forward algorithm for conv2d {}{}", s.describe(),
             allow_tf32 ? "" : " without TF32");
    return *plans.emplace(s, std::move(plan)).first->second;
  }
};

Conv::Conv(cudaStream_t stream, bool allow_tf32) : impl_(std::make_unique<Impl>(stream, allow_tf32)) {}
Conv::~Conv() = default;

size_t Conv::plan_count() const { return impl_->plans.size(); }
void Conv::release_workspace() { impl_->workspace.release(); }

void Conv::forward(const ConvShape& s, const void* x, const void* w, void* y) {
  if (s.batches == 0 || s.out_channels == 0 || s.out_height() <= 0 || s.out_width() <= 0) return;
  const ConvPlan& plan = impl_->plan_for(s);
  void* workspace = plan.workspace > 0 ? impl_->workspace.get(plan.workspace) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  LB_CUDNN_CHECK(cudnnConvolutionForward(impl_->handle, &one, plan.x, x, plan.w, w, plan.conv, plan.algo, workspace,
                                         plan.workspace, &zero, plan.y, y));
}

}  // namespace lingbot::cuda
