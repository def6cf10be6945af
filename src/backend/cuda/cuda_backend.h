// The CUDA backend: the model's ops on one NVIDIA GPU.
//
// Precision (see docs/cuda-backend.md): the encoder and aggregator run in
// bfloat16 (compute_dtype(); weights and activations bf16, every product and
// reduction accumulated in float32); the camera and DPT heads run in float32,
// their matrix products and convolutions on TF32 tensor cores unless
// CudaBackendOptions::allow_tf32 is false. Vectors (norm weights, biases,
// LayerScale gains) and RoPE tables are float32 on every path.
//
// Execution: every op only enqueues work on a non-default stream and returns
// (no device synchronisation inside an op), so a frame step can be captured
// into a CUDA graph once it has run once (the first run sizes every scratch
// buffer and picks every cuBLASLt/cuDNN algorithm). Ops go to the main
// stream, or to a second one between begin_side_branch() and
// end_side_branch(); each of the two has its own cuBLASLt and cuDNN
// workspaces and float32 scratch (a "lane"), so a branch and the main work
// can run at the same time. Transfers, graphs and KV cache tables use the
// main stream; a KV cache's kernels go where the ops go when it is called.
// synchronize() and download() wait for the streams.
//
// Memory: tensors on Device::CUDA come from cudaMalloc (registered with
// lingbot::register_device_allocator when the backend is made; the allocator
// serves the device of the backend made last). Host -> device copies made
// every frame (upload_into) go through pinned staging buffers, one per
// destination tensor, so they are asynchronous and capturable; those made
// once (upload_once_into) go straight from the host tensor.
#pragma once

#include "backend/backend.h"
#include "backend/op_contracts.h"
#include "backend/cuda/attention/attention_types.h"
#include "backend/cuda/cuda_backend_options.h"


#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>

namespace lingbot::cuda {

class Gemm;
class Conv;
class DeviceScratch;

// True when a CUDA device can be used (driver present, at least one GPU).
// Never throws.
bool device_available();
// Why no CUDA device can be used ("" when one can): the runtime's words, or
// device 0 older than sm_80 (device_capability.h). Never throws.
std::string device_unavailable_reason();

// Device memory for lingbot::Tensor on Device::CUDA, on `device` (what the
// backend registers with register_device_allocator when it is made).
DeviceAllocator tensor_allocator(int device);

std::unique_ptr<Backend> make_cuda_backend(int device = 0);

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::CUDA; }
  std::string name() const override;

  Tensor alloc(const Shape& shape, DType dtype) override;
  Tensor upload(const Tensor& host, DType dtype) override;
  void upload_into(const Tensor& host, Tensor& device) override;
  void upload_once_into(const Tensor& host, Tensor& device) override;
  Tensor download(const Tensor& device) override;
  Tensor alloc_host(const Shape& shape, DType dtype) override;  // page-locked
  void download_async(const Tensor& device, Tensor& host) override;
  std::shared_ptr<void> fence() override;  // a CUDA event recorded on the stream
  void wait(const std::shared_ptr<void>& fence) override;
  void fill(Tensor& t, float value) override;
  void convert(const Tensor& src, Tensor& dst) override;
  void synchronize() override;
  // Frees each lane's float32 scratch and cuDNN workspace (after a
  // multi-frame step whose batched convolutions grew it), waiting for both
  // lanes first; the next ops that need them allocate them again, so this
  // must not precede a captured step that would (StepGraphs runs each kind
  // of step directly once before recording it).
  void release_scratch() override;
  DType compute_dtype() const override { return DType::BF16; }
  size_t device_memory_in_use() const override;

  // CUDA graphs: capture on the backend's stream (thread-local mode), replay
  // with cudaGraphLaunch on the same stream, after whatever prepare() queued.
  bool supports_graphs() const override { return true; }
  void begin_capture() override;
  std::shared_ptr<void> end_capture() override;
  void replay(const std::shared_ptr<void>& graph) override;

  void begin_side_branch() override;
  void end_side_branch() override;
  void join_side_branch() override;

  std::unique_ptr<kv::KvCache> make_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                             const kv::TokenLayout& tokens, int num_blocks) override;

  void linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& out, Activation act) override;
  void linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                       Tensor& residual) override;
  void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& out) override;

  void split_qkv(const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm, const RopeTable* rope,
                 Tensor& q, Tensor& k, Tensor& v) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads, int head_dim,
                 Tensor& out) override;

  void copy_rows(const Tensor& src, Tensor& dst, const RowCopy& copy) override;
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_broadcast(Tensor& x, const Tensor& y) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void relu(const Tensor& x, Tensor& out) override;
  void silu(const Tensor& x, Tensor& out) override;
  void adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual, Tensor& out) override;

  void patchify(const Tensor& images, int patch, const std::array<float, 3>& mean,
                const std::array<float, 3>& std, Tensor& patches) override;
  void tokens_to_nchw(const Tensor& tokens, int h, int w, Tensor& maps) override;
  void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out) override;
  void conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) override;
  void resize_bilinear(const Tensor& x, const Tensor* add, Tensor& out) override;
  using Backend::resize_bilinear;
  void resize_bilinear_add_axes(const Tensor& x, const Tensor& by_col, const Tensor& by_row, Tensor& out) override;
  void conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out,
                   const ConvEpilogue& epilogue) override;
  using Backend::conv2d_nhwc;
  void conv_transpose2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) override;
  void resize_bilinear_nhwc(const Tensor& x, const Tensor* add, Tensor& out) override;
  void resize_bilinear_add_axes_nhwc(const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                     Tensor& out) override;

  // ---- beyond the Backend interface (graph capture, tests, benchmarks) ----
  cudaStream_t stream() const { return main_.stream; }  // the main stream
  cublasLtHandle_t cublaslt_handle() const;
  Gemm& gemm() { return *main_.gemm; }
  Conv& conv() { return *main_.conv; }
  const CudaBackendOptions& options() const { return options_; }
  // Refills the pinned staging buffer of `device` from `host` without
  // enqueueing the copy: for replaying a captured graph, whose copy node
  // reads that buffer (upload_into inside the capture recorded it). Call it
  // when the previous replay no longer reads the buffer (after it finished).
  void stage_upload(const Tensor& host, const Tensor& device);

 private:
  // What the shared contract checks (op_contracts.h) hold this backend's calls to.
  contracts::Target contract() const { return {Device::CUDA, compute_dtype(), residual_dtype()}; }
  struct Staging;
  Staging& staging_for(const Tensor& device);
  void after_op(const char* op);  // error check / optional synchronisation
  // Whether a product of N rows goes through the weight-streaming kernel.
  static bool streams_weights(DType x_type, DType out_type, int64_t N);
  // out[N, M] = x[N, K] w^T (+ bias) into `out` of `out_type`: the
  // weight-streaming kernel for float32 layers of a few rows, else cuBLASLt.
  void product(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, void* out, DType out_type,
               int64_t N, int64_t K, int64_t M);
  // A bfloat16 copy of a float32 bias, made on first use and kept: where
  // cuBLASLt takes no float32 bias with a bfloat16 output, rounding it on
  // the stream at every call cost a kernel per layer. The copy keeps a
  // reference to the source, so its address cannot be reused for other
  // values (biases are weights: never written after upload).
  const void* rounded_bias(const Tensor& bias);
  struct RoundedBias {
    Tensor source;
    Tensor rounded;
  };

  // A stream and what its ops need to themselves: cuBLASLt (workspace),
  // cuDNN (workspace) and float32 scratch (products before their epilogue
  // kernel, download conversions).
  struct Lane {
    cudaStream_t stream = nullptr;
    std::unique_ptr<Gemm> gemm;
    std::unique_ptr<Conv> conv;
    std::unique_ptr<DeviceScratch> scratch;
  };
  void make_lane(Lane& lane, int priority) const;
  int lane_priority(bool main) const;  // a stream priority for cudaStreamCreateWithPriority
  static void destroy_lane(Lane& lane) noexcept;

  CudaBackendOptions options_;
  std::string device_name_;
  Lane main_;
  std::unique_ptr<Lane> side_;  // made by the first side branch
  Lane* lane_ = &main_;         // where ops are enqueued now
  cudaEvent_t fork_event_ = nullptr;
  cudaEvent_t join_event_ = nullptr;
  std::map<const void*, std::unique_ptr<Staging>> staging_;  // by destination device pointer
  size_t staging_bytes_ = 0;
  std::map<const void*, RoundedBias> rounded_biases_;  // by the float32 bias's address
};

}  // namespace lingbot::cuda
