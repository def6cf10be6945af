// CudaBackend: memory and transfers, and the dispatch of each op to cuBLASLt
// (gemm.h), cuDNN (conv.h), the attention and KV cache code (attention.h,
// cuda_kv_cache.h) or the backend's own kernels (kernels.h). Every op first
// checks its arguments against the contract shared with the CPU backend
// (backend/op_contracts.h); what is checked here after it is this backend's
// own limits (grid sizes, the qk-norm/RoPE kernel's channel cap, int-indexed
// rows).
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/conv.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_capability.h"
#include "backend/cuda/kv/cuda_kv_cache.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/graph_capture.h"
#include "backend/cuda/kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace lingbot::cuda {

namespace {

// Pinned staging memory kept for upload_into; beyond this the buffers of
// destinations not seen recently are released (after waiting for the stream).
constexpr size_t kMaxStagingBytes = size_t{512} << 20;

bool is_float16_32(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// An optional float32 parameter vector (the contract checked its dtype and size).
const float* f32_or_null(const Tensor* t) { return t != nullptr ? t->data_as<const float>() : nullptr; }

// cuDNN's description of a checked convolution.
ConvShape conv_shape(const contracts::ConvDims& d, int stride, int pad, bool channels_last) {
  ConvShape s;
  s.batches = d.in.n;
  s.in_channels = d.in.c;
  s.height = d.in.h;
  s.width = d.in.w;
  s.out_channels = d.out.c;
  s.kernel = d.kernel;
  s.stride = stride;
  s.pad = pad;
  s.channels_last = channels_last;
  return s;
}

char* bytes_at(const Tensor& t, int64_t element) {
  return static_cast<char*>(t.data()) + element * static_cast<int64_t>(dtype_size(t.dtype()));
}

// Host tensor -> `bytes` of `dtype` at `dst` (host memory).
void write_host_as(const Tensor& host, DType dtype, void* dst) {
  if (host.dtype() == dtype) {
    std::memcpy(dst, host.data(), host.nbytes());
  } else {
    const Tensor converted = host.to_dtype(dtype);  // throws for non-float targets
    std::memcpy(dst, converted.data(), converted.nbytes());
  }
}

}  // namespace

// ---- creation ---------------------------------------------------------------

bool device_available() { return device_unavailable_reason().empty(); }

std::string device_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: not an error for the caller
    return fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
  }
  if (count == 0) return "no CUDA device";
  // Device 0 is the one `device auto` and `device cuda` use.
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return "the properties of CUDA device 0 cannot be read";
  }
  return unsupported_device_reason(prop.name, prop.major, prop.minor);
}

DeviceAllocator tensor_allocator(int device) {
  return [device](size_t bytes) -> std::shared_ptr<void> {
    int current = -1;
    LB_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device) LB_CUDA_CHECK(cudaSetDevice(device));
    return std::shared_ptr<void>(device_malloc(bytes, "a tensor"), [](void* p) { device_free(p); });
  };
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  CudaBackendOptions options;
  options.device = device;
  return std::make_unique<CudaBackend>(options);
}

struct CudaBackend::Staging {
  void* host = nullptr;  // pinned, `bytes` long
  size_t bytes = 0;
  cudaEvent_t copied = nullptr;  // recorded after the latest copy out of `host`
  bool pending = false;          // `copied` was recorded (outside a capture)

  Staging() = default;
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() {
    if (copied) {
      (void)cudaEventSynchronize(copied);
      (void)cudaEventDestroy(copied);
    }
    if (host) (void)cudaFreeHost(host);
  }
};

CudaBackend::CudaBackend(const CudaBackendOptions& options) : options_(options) {
  LB_CHECK(options_.attention_kernel == AttentionKernel::Auto || options_.attention_kernel == AttentionKernel::Mma ||
               options_.attention_kernel == AttentionKernel::WgmmaWs,
           "cuda backend: attention_kernel must be auto, mma or wgmma-ws, got {}",
           attention_kernel_name(options_.attention_kernel));
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    fail("cuda backend: no usable CUDA device: {} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
  }
  LB_CHECK(options_.device >= 0 && options_.device < count, "cuda backend: device {} requested, {} present",
           options_.device, count);
  LB_CUDA_CHECK(cudaSetDevice(options_.device));
  cudaDeviceProp prop{};
  LB_CUDA_CHECK(cudaGetDeviceProperties(&prop, options_.device));
  if (const std::string why_not = unsupported_device_reason(prop.name, prop.major, prop.minor); !why_not.empty())
    fail("cuda backend: {}", why_not);
  device_name_ = fmt::format("{}, sm_{}{}, {} SMs, {:.0f} GiB", prop.name, prop.major, prop.minor,
                             prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1 << 30));

  register_device_allocator(Device::CUDA, tensor_allocator(options_.device));
  // Only lowered, never raised: the driver raises it for kernels that need
  // more, and the process may hold other backends (or other CUDA code).
  // Memory, not correctness: a driver that refuses keeps its own limit
  // (bench's memory account prints the one in force).
  size_t stack = 0;
  if (cudaDeviceGetLimit(&stack, cudaLimitStackSize) == cudaSuccess && stack > CudaBackendOptions::kThreadStackBytes)
    (void)cudaDeviceSetLimit(cudaLimitStackSize, CudaBackendOptions::kThreadStackBytes);
  (void)cudaGetLastError();

  make_lane(main_, lane_priority(true));
  try {
    LB_CUDA_CHECK(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming));
    LB_CUDA_CHECK(cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming));
  } catch (...) {
    destroy_lane(main_);
    throw;
  }
}

CudaBackend::~CudaBackend() {
  (void)cudaStreamSynchronize(main_.stream);
  if (side_) (void)cudaStreamSynchronize(side_->stream);
  staging_.clear();
  if (side_) destroy_lane(*side_);
  destroy_lane(main_);
  (void)cudaEventDestroy(fork_event_);
  (void)cudaEventDestroy(join_event_);
}

int CudaBackend::lane_priority(bool main) const {
  if (options_.lane_priority == CudaBackendOptions::LanePriority::Equal) return 0;
  int least = 0, greatest = 0;  // numerically greatest > least
  LB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return main ? greatest : least;
}

void CudaBackend::make_lane(Lane& lane, int priority) const {
  LB_CUDA_CHECK(cudaStreamCreateWithPriority(&lane.stream, cudaStreamNonBlocking, priority));
  try {
    lane.gemm = std::make_unique<Gemm>(lane.stream, options_.allow_tf32,
                                       options_.low_memory ? Gemm::kLowMemoryWorkspaceBytes : Gemm::kWorkspaceBytes,
                                       options_.gemm_algorithm);
    lane.conv = std::make_unique<Conv>(lane.stream, options_.allow_tf32, options_.conv_algorithm);
    lane.scratch = std::make_unique<DeviceScratch>(lane.stream, "float32 scratch");
  } catch (...) {
    destroy_lane(lane);
    throw;
  }
}

void CudaBackend::destroy_lane(Lane& lane) noexcept {
  lane.scratch.reset();
  lane.conv.reset();
  lane.gemm.reset();
  if (lane.stream) (void)cudaStreamDestroy(lane.stream);
  lane.stream = nullptr;
}

std::string CudaBackend::name() const { return fmt::format("cuda ({})", device_name_); }

cublasLtHandle_t CudaBackend::cublaslt_handle() const { return main_.gemm->handle(); }

void CudaBackend::after_op(const char* op) {
  if (!options_.sync_after_each_op || is_capturing(lane_->stream)) return;
  const cudaError_t status = cudaStreamSynchronize(lane_->stream);
  if (status != cudaSuccess)
    fail("cuda backend: {} failed on the GPU: {} ({})", op, cudaGetErrorString(status), cudaGetErrorName(status));
}

void CudaBackend::synchronize() {
  LB_CUDA_CHECK(cudaStreamSynchronize(main_.stream));
  if (side_) LB_CUDA_CHECK(cudaStreamSynchronize(side_->stream));
}

void CudaBackend::release_scratch() {
  check_not_capturing(main_.stream, "releasing the backend's scratch");
  synchronize();
  for (Lane* lane : {&main_, side_.get()}) {
    if (lane == nullptr) continue;
    lane->scratch->release();
    lane->conv->release_workspace();
  }
}

// ---- concurrent branches ------------------------------------------------------
// A fork and a join are an event each (recorded on one stream, waited for on
// the other): outside a capture they order the two streams, inside one they
// become the graph's edges, so a replay runs the branch beside the main work.

void CudaBackend::begin_side_branch() {
  LB_CHECK(lane_ == &main_, "cuda backend: begin_side_branch inside a side branch");
  if (!side_) {
    check_not_capturing(main_.stream, "creating the side branch's stream (run the step once before capturing it)");
    side_ = std::make_unique<Lane>();
    make_lane(*side_, lane_priority(false));
  }
  LB_CUDA_CHECK(cudaEventRecord(fork_event_, main_.stream));
  LB_CUDA_CHECK(cudaStreamWaitEvent(side_->stream, fork_event_, 0));
  lane_ = side_.get();
}

void CudaBackend::end_side_branch() {
  LB_CHECK(lane_ != &main_, "cuda backend: end_side_branch without begin_side_branch");
  lane_ = &main_;
}

void CudaBackend::join_side_branch() {
  LB_CHECK(lane_ == &main_, "cuda backend: join_side_branch inside a side branch");
  if (!side_) return;
  LB_CUDA_CHECK(cudaEventRecord(join_event_, side_->stream));
  LB_CUDA_CHECK(cudaStreamWaitEvent(main_.stream, join_event_, 0));
}

size_t CudaBackend::device_memory_in_use() const {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
  return total_bytes - free_bytes;  // whole device, CUDA context included
}

// ---- CUDA graphs (graph_capture.h) ---------------------------------------------

void CudaBackend::begin_capture() { begin_graph_capture(main_.stream); }

std::shared_ptr<void> CudaBackend::end_capture() {
  return end_graph_capture(main_.stream, options_.lane_priority != CudaBackendOptions::LanePriority::Equal);
}

void CudaBackend::replay(const std::shared_ptr<void>& graph) {
  launch_graph(graph, main_.stream);
  after_op("graph replay");
}

// ---- memory and transfers ---------------------------------------------------

Tensor CudaBackend::alloc(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, Device::CUDA); }

Tensor CudaBackend::upload(const Tensor& host, DType dtype) {
  contracts::check_upload(contract(), host);
  Tensor dev = alloc(host.shape(), dtype);
  if (host.numel() == 0) return dev;
  if (host.dtype() == dtype) {
    LB_CUDA_CHECK(cudaMemcpyAsync(dev.data(), host.data(), host.nbytes(), cudaMemcpyHostToDevice, main_.stream));
  } else if (is_float16_32(host.dtype()) && is_float16_32(dtype)) {
    // Raw bytes up, converted on the device (weights: fast, and no host
    // copy), in pieces of at most 4 Mi elements: the scratch they pass
    // through stays that size for the process's life, so it must not grow to
    // the largest converted matrix (the camera head's float32 fc1, 67 MB).
    constexpr int64_t kPiece = int64_t{4} << 20;
    const size_t in_size = dtype_size(host.dtype()), out_size = dtype_size(dtype);
    void* raw = main_.scratch->get(static_cast<size_t>(std::min(host.numel(), kPiece)) * in_size);
    for (int64_t first = 0; first < host.numel(); first += kPiece) {
      const int64_t n = std::min(kPiece, host.numel() - first);
      // Stream order keeps this copy behind the previous piece's conversion.
      LB_CUDA_CHECK(cudaMemcpyAsync(raw, static_cast<const char*>(host.data()) + first * in_size,
                                    static_cast<size_t>(n) * in_size, cudaMemcpyHostToDevice, main_.stream));
      kernels::convert(raw, host.dtype(), static_cast<char*>(dev.data()) + first * out_size, dtype, n, main_.stream);
    }
  } else {
    const Tensor converted = host.to_dtype(dtype);
    LB_CUDA_CHECK(cudaMemcpyAsync(dev.data(), converted.data(), converted.nbytes(), cudaMemcpyHostToDevice, main_.stream));
    synchronize();  // before `converted` is released
    return dev;
  }
  synchronize();  // the host tensor may be released as soon as we return
  return dev;
}

CudaBackend::Staging& CudaBackend::staging_for(const Tensor& device) {
  auto it = staging_.find(device.data());
  if (it != staging_.end() && it->second->bytes == device.nbytes()) return *it->second;
  check_not_capturing(main_.stream, "allocating a pinned staging buffer for upload_into");
  if (it != staging_.end()) {
    staging_bytes_ -= it->second->bytes;
    staging_.erase(it);  // waits for its last copy
  }
  if (staging_bytes_ + device.nbytes() > kMaxStagingBytes) {
    synchronize();
    staging_.clear();
    staging_bytes_ = 0;
  }
  auto s = std::make_unique<Staging>();
  LB_CUDA_CHECK(cudaHostAlloc(&s->host, device.nbytes() == 0 ? 1 : device.nbytes(), cudaHostAllocDefault));
  s->bytes = device.nbytes();
  LB_CUDA_CHECK(cudaEventCreateWithFlags(&s->copied, cudaEventDisableTiming));
  staging_bytes_ += s->bytes;
  return *staging_.emplace(device.data(), std::move(s)).first->second;
}

void CudaBackend::stage_upload(const Tensor& host, const Tensor& device) {
  contracts::check_upload_into(contract(), host, device);  // the first half of an upload_into
  Staging& s = staging_for(device);
  if (s.pending) LB_CUDA_CHECK(cudaEventSynchronize(s.copied));
  write_host_as(host, device.dtype(), s.host);
}

void CudaBackend::upload_into(const Tensor& host, Tensor& device) {
  contracts::check_upload_into(contract(), host, device);
  if (device.numel() == 0) return;
  Staging& s = staging_for(device);
  const bool in_capture = is_capturing(main_.stream);
  // The previous copy out of this buffer must be done before it is rewritten.
  // (Inside a capture nothing is waited for: synchronize before capturing.)
  if (s.pending && !in_capture) LB_CUDA_CHECK(cudaEventSynchronize(s.copied));
  write_host_as(host, device.dtype(), s.host);
  LB_CUDA_CHECK(cudaMemcpyAsync(device.data(), s.host, device.nbytes(), cudaMemcpyHostToDevice, main_.stream));
  if (!in_capture) {
    LB_CUDA_CHECK(cudaEventRecord(s.copied, main_.stream));
    s.pending = true;
  }
  after_op("upload_into");
}

void CudaBackend::upload_once_into(const Tensor& host, Tensor& device) {
  contracts::check_upload_into(contract(), host, device);
  if (device.numel() == 0) return;
  // From pageable memory the copy has taken the bytes when it returns (the
  // driver stages them), so `host` and `converted` may go right after.
  const Tensor converted = host.dtype() == device.dtype() ? host : host.to_dtype(device.dtype());
  LB_CUDA_CHECK(
      cudaMemcpyAsync(device.data(), converted.data(), device.nbytes(), cudaMemcpyHostToDevice, main_.stream));
  after_op("upload_once_into");
}

Tensor CudaBackend::download(const Tensor& device) {
  contracts::check_download(contract(), device);
  Tensor host = Tensor::empty(device.shape(), DType::F32);
  if (device.numel() == 0) return host;
  if (device.dtype() == DType::F32) {
    LB_CUDA_CHECK(cudaMemcpyAsync(host.data(), device.data(), device.nbytes(), cudaMemcpyDeviceToHost, main_.stream));
  } else if (is_float16_32(device.dtype())) {
    float* widened = main_.scratch->get_as<float>(device.numel());
    kernels::convert(device.data(), device.dtype(), widened, DType::F32, device.numel(), main_.stream);
    LB_CUDA_CHECK(cudaMemcpyAsync(host.data(), widened, host.nbytes(), cudaMemcpyDeviceToHost, main_.stream));
  } else {
    Tensor raw = Tensor::empty(device.shape(), device.dtype());
    LB_CUDA_CHECK(cudaMemcpyAsync(raw.data(), device.data(), device.nbytes(), cudaMemcpyDeviceToHost, main_.stream));
    synchronize();
    return raw.to_dtype(DType::F32);
  }
  synchronize();
  return host;
}

Tensor CudaBackend::alloc_host(const Shape& shape, DType dtype) {
  check_not_capturing(main_.stream, "allocating page-locked host memory");
  const int64_t n = shape_numel(shape);
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  void* p = nullptr;
  LB_CUDA_CHECK(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault));
  return Tensor::wrap(p, shape, dtype, Device::CPU, std::shared_ptr<void>(p, [](void* q) { (void)cudaFreeHost(q); }));
}

void CudaBackend::download_async(const Tensor& device, Tensor& host) {
  contracts::check_download_async(contract(), device, host);
  if (device.numel() == 0) return;
  LB_CUDA_CHECK(cudaMemcpyAsync(host.data(), device.data(), device.nbytes(), cudaMemcpyDeviceToHost, main_.stream));
  after_op("download_async");
}

std::shared_ptr<void> CudaBackend::fence() {
  check_not_capturing(main_.stream, "recording a read-back fence");
  cudaEvent_t e = nullptr;
  LB_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::shared_ptr<void> owner(e, [](void* p) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  LB_CUDA_CHECK(cudaEventRecord(e, main_.stream));
  return owner;
}

void CudaBackend::wait(const std::shared_ptr<void>& fence) {
  if (fence) LB_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(fence.get())));
}

void CudaBackend::fill(Tensor& t, float value) {
  contracts::check_fill(contract(), t);
  kernels::fill(t.data(), t.dtype(), t.numel(), value, lane_->stream);
  after_op("fill");
}

void CudaBackend::convert(const Tensor& src, Tensor& dst) {
  contracts::check_convert(contract(), src, dst);
  if (src.dtype() == dst.dtype()) {
    if (src.numel() > 0 && src.data() != dst.data())
      LB_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, lane_->stream));
  } else {
    kernels::convert(src.data(), src.dtype(), dst.data(), dst.dtype(), src.numel(), lane_->stream);
  }
  after_op("convert");
}

std::unique_ptr<kv::KvCache> CudaBackend::make_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                                        const kv::TokenLayout& tokens, int num_blocks) {
  // A cache uploads its tables on the main stream (begin_step runs outside
  // any branch) and launches its kernels where the backend's ops go when
  // append and attend are called: inside a side branch, the side stream.
  auto cache = make_cuda_kv_cache(layout, config, tokens, num_blocks, main_.stream, [this] { return lane_->stream; });
  static_cast<CudaKvCache&>(*cache).set_auto_attention(options_.attention_kernel);
  return cache;
}

// ---- dense layers -------------------------------------------------------------

// Float32 layers of a few rows (the camera head while streaming) go through
// the weight-streaming kernel (gemv.cu, full float32), everything else
// through cuBLASLt.
bool CudaBackend::streams_weights(DType x_type, DType out_type, int64_t N) {
  return x_type == DType::F32 && out_type == DType::F32 && N <= kernels::kGemvMaxRows;
}

// out[N, M] = x[N, K] w[M, K]^T (+ bias), by the weight-streaming kernel or cuBLASLt.
void CudaBackend::product(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, void* out,
                          DType out_type, int64_t N, int64_t K, int64_t M) {
  const float* b = f32_or_null(bias);
  if (x.dtype() == DType::F32 && w.dtype() == DType::BF16) {  // a float32 product of weights kept in bf16
    LB_CHECK(out_type == DType::F32, "{}: weights kept in bfloat16 under a float32 x give float32 output", op);
    kernels::gemv_bf16_weights(static_cast<const float*>(x.data()), w.data(), b, static_cast<float*>(out), N, K, M,
                               lane_->stream);
    return;
  }
  if (streams_weights(x.dtype(), out_type, N)) {
    kernels::gemv_f32(static_cast<const float*>(x.data()), static_cast<const float*>(w.data()), b,
                      static_cast<float*>(out), N, K, M, lane_->stream);
  } else {
    const void* b16 = bias && out_type == DType::BF16 ? rounded_bias(*bias) : nullptr;
    lane_->gemm->linear(x.data(), w.data(), b, out, N, K, M, x.dtype(), out_type, b16);
  }
}

const void* CudaBackend::rounded_bias(const Tensor& bias) {
  auto it = rounded_biases_.find(bias.data());
  if (it != rounded_biases_.end() && it->second.source.numel() == bias.numel()) return it->second.rounded.data();
  check_not_capturing(lane_->stream, "rounding a bias to bfloat16 (run a step once before capturing it)");
  RoundedBias r{bias, alloc(bias.shape(), DType::BF16)};
  kernels::convert(bias.data(), DType::F32, r.rounded.data(), DType::BF16, bias.numel(), lane_->stream);
  LB_CUDA_CHECK(cudaStreamSynchronize(lane_->stream));  // ready for either stream from here on
  const void* p = r.rounded.data();
  rounded_biases_.insert_or_assign(bias.data(), std::move(r));
  return p;
}

void CudaBackend::linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& out, Activation act) {
  const char* op = "linear";
  const auto [N, K, M] = contracts::check_linear(contract(), x, w, b, out);
  product(op, x, w, b, out.data(), out.dtype(), N, K, M);
  // nn.GELU() is the erf form; cuBLASLt's GELU epilogue is the tanh one, so
  // the activation is a pass of its own (on the rounded output, as upstream).
  if (act == Activation::Gelu) kernels::unary(out.data(), out.data(), out.dtype(), out.numel(), kernels::Unary::Gelu, lane_->stream);
  if (act == Activation::Relu) kernels::unary(out.data(), out.data(), out.dtype(), out.numel(), kernels::Unary::Relu, lane_->stream);
  after_op(op);
}

void CudaBackend::linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                                  Tensor& residual) {
  const char* op = "linear_residual";
  const auto [N, K, M] = contracts::check_linear_residual(contract(), x, w, b, gamma, residual);
  // Without a gain, a float32 residual takes the product (with its bias)
  // straight into cuBLASLt's epilogue: residual += product, accumulated in
  // float32, no pass of its own (the transformer blocks' case: the model
  // folds LayerScale into the weights, see model/weights.h). The weight-
  // streaming kernel has no such epilogue.
  const bool bf16_weights_f32_x = x.dtype() == DType::F32 && w.dtype() == DType::BF16;
  if (gamma == nullptr && residual.dtype() == DType::F32 && !streams_weights(x.dtype(), DType::F32, N) &&
      !bf16_weights_f32_x) {
    lane_->gemm->linear(x.data(), w.data(), f32_or_null(b), residual.data(), N, K, M, x.dtype(),
                        DType::F32, nullptr, /*accumulate=*/true);
    after_op(op);
    return;
  }
  // Otherwise the product (with its bias) in float32, then one pass
  // residual = residual + gamma * product, rounded once to the residual's dtype.
  float* y = lane_->scratch->get_as<float>(N * M);
  product(op, x, w, b, y, DType::F32, N, K, M);
  kernels::residual_update(residual.data(), residual.dtype(), y, f32_or_null(gamma), N, M, lane_->stream);
  after_op(op);
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& out) {
  const char* op = "layer_norm";
  // The output may have another type than the input (a float32 residual
  // stream normalised into a bfloat16 matrix-product input); in place only
  // with one type (the contract).
  const auto [N, C] = contracts::check_layer_norm(contract(), x, w, b, out);
  kernels::layer_norm(x.data(), x.dtype(), out.data(), out.dtype(), f32_or_null(w), f32_or_null(b), N, C, eps,
                      lane_->stream);
  after_op(op);
}

// ---- attention --------------------------------------------------------------------

void CudaBackend::split_qkv(const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm, const RopeTable* rope,
                            Tensor& q, Tensor& k, Tensor& v) {
  const char* op = "split_qkv";
  const auto [N, C] = contracts::check_split_qkv(contract(), qkv, num_heads, head_dim, norm, rope, q, k, v);

  kernels::SplitQkv a;
  a.qkv = qkv.data();
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.dtype = qkv.dtype();
  a.tokens = N;
  a.heads = num_heads;
  a.head_dim = head_dim;
  if (norm) {
    a.norm = true;
    a.q_weight = f32_or_null(norm->q_weight);
    a.q_bias = f32_or_null(norm->q_bias);
    a.k_weight = f32_or_null(norm->k_weight);
    a.k_bias = f32_or_null(norm->k_bias);
    a.eps = norm->eps;
  }
  if (rope) {
    a.rope = rope->pairs == RopeTable::Pairs::HalfSplit ? kernels::SplitQkv::Rope::HalfSplit
                                                        : kernels::SplitQkv::Rope::Interleaved;
    a.cos = rope->cos.data_as<const float>();
    a.sin = rope->sin.data_as<const float>();
    a.rope_rows = rope->cos.dim(0);
  }
  LB_CHECK((a.rope == kernels::SplitQkv::Rope::None && !a.norm) || C <= kernels::kSplitQkvMaxChannels,
           "split_qkv: qk-norm and RoPE support up to {} channels (heads x head_dim), got {}",
           kernels::kSplitQkvMaxChannels, C);
  kernels::split_qkv(a, lane_->stream);
  after_op(op);
}

void CudaBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads, int head_dim,
                            Tensor& out) {
  const char* op = "attention";
  contracts::check_attention(contract(), q, k, v, groups, num_heads, head_dim, out);
  // attention_dense adds the kernels' own limits (head_dim, rows, alignment).
  attention_dense(q, k, v, groups, num_heads, head_dim, out, lane_->stream, options_.attention_kernel);
  after_op(op);
}

// ---- element-wise and data movement ------------------------------------------

void CudaBackend::copy_rows(const Tensor& src, Tensor& dst, const RowCopy& c) {
  const char* op = "copy_rows";
  // The contract also keeps the blocks apart in dst: they are copied in parallel.
  contracts::check_copy_rows(contract(), src, dst, c);
  if (c.batches == 0 || c.rows == 0) return;
  const int64_t row_bytes = c.cols * static_cast<int64_t>(dtype_size(src.dtype()));
  kernels::copy_2d(bytes_at(dst, c.dst_offset * c.cols), c.dst_batch_stride * row_bytes,
                   bytes_at(src, c.src_offset * c.cols), c.src_batch_stride * row_bytes, c.rows * row_bytes, c.batches,
                   lane_->stream);
  after_op(op);
}

void CudaBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* op = "concat_cols";
  const auto [n, ca, cb] = contracts::check_concat_cols(contract(), a, b, out);
  const int64_t es = static_cast<int64_t>(dtype_size(out.dtype()));
  kernels::copy_2d(out.data(), (ca + cb) * es, a.data(), ca * es, ca * es, n, lane_->stream);
  kernels::copy_2d(bytes_at(out, ca), (ca + cb) * es, b.data(), cb * es, cb * es, n, lane_->stream);
  after_op(op);
}

void CudaBackend::add_broadcast(Tensor& x, const Tensor& y) {
  const char* op = "add_broadcast";
  contracts::check_add_broadcast(contract(), x, y);
  const int64_t n = x.numel(), m = y.numel();
  kernels::add_broadcast(x.data(), x.dtype(), n, y.data(), y.dtype(), m, lane_->stream);
  after_op(op);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* op = "add";
  contracts::check_add(contract(), a, b, out);
  kernels::add(a.data(), b.data(), out.data(), out.dtype(), out.numel(), lane_->stream);
  after_op(op);
}

void CudaBackend::relu(const Tensor& x, Tensor& out) {
  contracts::check_unary(contract(), "relu", x, out);
  kernels::unary(x.data(), out.data(), x.dtype(), x.numel(), kernels::Unary::Relu, lane_->stream);
  after_op("relu");
}

void CudaBackend::silu(const Tensor& x, Tensor& out) {
  contracts::check_unary(contract(), "silu", x, out);
  kernels::unary(x.data(), out.data(), x.dtype(), x.numel(), kernels::Unary::Silu, lane_->stream);
  after_op("silu");
}

void CudaBackend::adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual, Tensor& out) {
  const char* op = "adaln_modulate";
  const auto [N, C] = contracts::check_adaln_modulate(contract(), xn, mod, residual, out);
  kernels::adaln_modulate(xn.data(), mod.data(), residual.data(), out.data(), xn.dtype(), N, C, lane_->stream);
  after_op(op);
}

// ---- images and feature maps ---------------------------------------------------

void CudaBackend::patchify(const Tensor& images, int patch, const std::array<float, 3>& mean,
                           const std::array<float, 3>& std, Tensor& patches) {
  const char* op = "patchify";
  const contracts::Nchw s = contracts::check_patchify(contract(), images, patch, patches);
  kernels::patchify(images.data_as<const float>(), s.n, s.h, s.w, patch, mean.data(), std.data(), patches.data(),
                    patches.dtype(), lane_->stream);
  after_op(op);
}

void CudaBackend::tokens_to_nchw(const Tensor& tokens, int h, int w, Tensor& maps) {
  const char* op = "tokens_to_nchw";
  const auto [B, hw, C] = contracts::check_tokens_to_nchw(contract(), tokens, h, w, maps);
  LB_CHECK(B <= 65535 && C <= 65535 * 32, "tokens_to_nchw: {} maps of {} channels exceed the kernel's grid", B, C);
  kernels::tokens_to_nchw(tokens.data(), maps.data(), tokens.dtype(), B, hw, C, lane_->stream);
  after_op(op);
}

void CudaBackend::conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out) {
  const char* op = "conv2d";
  const contracts::ConvDims d = contracts::check_conv2d(contract(), x, w, b, stride, pad, out);
  const contracts::Nchw& o = d.out;
  lane_->conv->forward(conv_shape(d, stride, pad, false), x.data_as<const float>(), w.data_as<const float>(),
                       out.data_as<float>());
  if (const float* bias = f32_or_null(b))
    kernels::add_channel_bias(out.data_as<float>(), bias, o.n, o.c, o.h * o.w, lane_->stream);
  after_op(op);
}

void CudaBackend::conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) {
  const char* op = "conv_transpose2d";
  const contracts::ConvDims d = contracts::check_conv_transpose2d(contract(), x, w, b, k, out);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  const float* bias = f32_or_null(b);
  // Kernel == stride: every output pixel has exactly one input pixel, so per batch
  //   y[(co, ky, kx), p] = sum_ci w[ci, (co, ky, kx)] x[ci, p]
  // is one matrix product, then a scatter to (iy*k + ky, ix*k + kx) adds the bias.
  // Column-major: y^T (hw x okk) = x^T (hw x Cin, x stored as is) * w (w stored okk x Cin, transposed).
  const int64_t hw = in.h * in.w, okk = o.c * k * k;
  MatmulShape s;
  s.transpose_a = false;
  s.transpose_b = true;
  s.m = hw;
  s.n = okk;
  s.k = in.c;
  s.lda = hw;
  s.ldb = okk;
  s.ldd = hw;
  s.ab_type = DType::F32;
  s.d_type = DType::F32;
  float* y = lane_->scratch->get_as<float>(okk * hw);
  for (int64_t n = 0; n < in.n; ++n) {
    lane_->gemm->matmul(s, x.data_as<const float>() + n * in.c * hw, w.data(), nullptr, y);
    kernels::scatter_transposed_conv(y, bias, out.data_as<float>(), n, o.c, in.h, in.w, k, lane_->stream);
  }
  after_op(op);
}

void CudaBackend::resize_bilinear(const Tensor& x, const Tensor* add, Tensor& out) {
  const char* op = "resize_bilinear";
  const contracts::MapDims d = contracts::check_resize_bilinear(contract(), x, add, out);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  LB_CHECK(o.w <= std::numeric_limits<int>::max() && in.w <= std::numeric_limits<int>::max(),
           "resize_bilinear: rows of {} -> {} pixels are wider than the kernel indexes", in.w, o.w);
  // The added tensor: whole output planes, repeated over the leading ones.
  const float* a = f32_or_null(add);
  const int64_t add_planes = add != nullptr ? add->numel() / (o.h * o.w) : 0;
  kernels::resize_bilinear(x.data_as<const float>(), a, add_planes, out.data_as<float>(), in.n * in.c, in.h, in.w, o.h,
                           o.w, lane_->stream);
  after_op(op);
}

void CudaBackend::resize_bilinear_add_axes(const Tensor& x, const Tensor& by_col, const Tensor& by_row, Tensor& out) {
  const char* op = "resize_bilinear_add_axes";
  const contracts::MapDims d = contracts::check_resize_bilinear_add_axes(contract(), x, by_col, by_row, out);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  LB_CHECK(o.w <= std::numeric_limits<int>::max() && in.w <= std::numeric_limits<int>::max(),
           "resize_bilinear_add_axes: rows of {} -> {} pixels are wider than the kernel indexes", in.w, o.w);
  const kernels::AxisTerm axes{by_col.data_as<const float>(), by_row.data_as<const float>(), by_col.dim(0), o.c};
  kernels::resize_bilinear(x.data_as<const float>(), nullptr, 0, out.data_as<float>(), in.n * in.c, in.h, in.w, o.h,
                           o.w, lane_->stream, axes);
  after_op(op);
}

// ---- channels last ----------------------------------------------------------

void CudaBackend::conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out,
                              const ConvEpilogue& epilogue) {
  const char* op = "conv2d_nhwc";
  const contracts::ConvDims d =
      contracts::check_conv2d(contract(), x, w, b, stride, pad, out, MapLayout::ChannelsLast, epilogue);
  ConvShape shape = conv_shape(d, stride, pad, true);
  shape.bf16 = x.dtype() == DType::BF16;
  lane_->conv->forward(shape, x.data(), w.data(), out.data());
  kernels::conv_epilogue_nhwc(out.data(), out.dtype(), f32_or_null(b),
                              epilogue.residual != nullptr ? epilogue.residual->data() : nullptr,
                              epilogue.act == Activation::Relu, d.out.n * d.out.h * d.out.w, d.out.c, lane_->stream);
  after_op(op);
}

void CudaBackend::conv_transpose2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) {
  const char* op = "conv_transpose2d_nhwc";
  const contracts::ConvDims d = contracts::check_conv_transpose2d(contract(), x, w, b, k, out, MapLayout::ChannelsLast);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  // Kernel == stride: each input pixel (a row of x) gives a k x k block of
  // output pixels, y[p, (co, ky, kx)] = sum_ci x[p, ci] w[ci, (co, ky, kx)]:
  // one matrix product over every pixel of every batch, then a scatter that
  // adds the bias. Column-major: y^T (okk x P) = w^T (w stored as is: okk x
  // Cin) * x^T (x stored as is: Cin x P). The sums y are float32 for bfloat16
  // maps too, rounded once in the scatter after the bias.
  const int64_t pixels = in.n * in.h * in.w, okk = o.c * k * k;
  MatmulShape s;
  s.transpose_a = false;
  s.transpose_b = false;
  s.m = okk;
  s.n = pixels;
  s.k = in.c;
  s.lda = okk;
  s.ldb = in.c;
  s.ldd = okk;
  s.ab_type = x.dtype();
  s.d_type = DType::F32;
  float* y = lane_->scratch->get_as<float>(okk * pixels);
  lane_->gemm->matmul(s, w.data(), x.data(), nullptr, y);
  kernels::scatter_transposed_conv_nhwc(y, f32_or_null(b), out.data(), out.dtype(), in.n, o.c, in.h, in.w, k,
                                        lane_->stream);
  after_op(op);
}

void CudaBackend::resize_bilinear_nhwc(const Tensor& x, const Tensor* add, Tensor& out) {
  const char* op = "resize_bilinear_nhwc";
  const contracts::MapDims d = contracts::check_resize_bilinear(contract(), x, add, out, MapLayout::ChannelsLast);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  LB_CHECK(o.w * o.c <= std::numeric_limits<int>::max() && in.w * in.c <= std::numeric_limits<int>::max(),
           "resize_bilinear_nhwc: rows of {} -> {} pixels of {} channels are wider than the kernel indexes", in.w,
           o.w, o.c);
  const int64_t add_maps = add != nullptr ? add->numel() / (o.h * o.w * o.c) : 0;
  kernels::resize_bilinear_nhwc(x.data(), add != nullptr ? add->data() : nullptr, add_maps, out.data(), out.dtype(),
                                o.n, o.c, in.h, in.w, o.h, o.w, lane_->stream);
  after_op(op);
}

void CudaBackend::resize_bilinear_add_axes_nhwc(const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                                Tensor& out) {
  const char* op = "resize_bilinear_add_axes_nhwc";
  const contracts::MapDims d =
      contracts::check_resize_bilinear_add_axes(contract(), x, by_col, by_row, out, MapLayout::ChannelsLast);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  LB_CHECK(o.w * o.c <= std::numeric_limits<int>::max() && in.w * in.c <= std::numeric_limits<int>::max(),
           "resize_bilinear_add_axes_nhwc: rows of {} -> {} pixels of {} channels are wider than the kernel indexes",
           in.w, o.w, o.c);
  const kernels::AxisTerm axes{by_col.data_as<const float>(), by_row.data_as<const float>(), by_col.dim(0), o.c};
  kernels::resize_bilinear_nhwc(x.data(), nullptr, 0, out.data(), out.dtype(), o.n, o.c, in.h, in.w, o.h, o.w,
                                lane_->stream, axes);
  after_op(op);
}

}  // namespace lingbot::cuda
