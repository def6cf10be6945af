// CUDA backend: the properties a frame step needs to be captured as a CUDA
// graph. After one warm-up run (which sizes every scratch buffer and picks
// every algorithm), a step allocates no device memory, and the same ops
// captured into a graph and replayed with a new input (refilled with
// stage_upload) give what an eager run on that input gives.
#include "backend_test_support.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"

#include <cuda_runtime_api.h>

namespace lingbot::cuda::backend_test {
namespace {

constexpr std::array<float, 3> kMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kStd = {0.229f, 0.224f, 0.225f};

// A miniature frame step touching every kind of op the model uses outside
// attention: a 28 x 42 frame, 14-pixel patches (2 x 3 grid), 64 channels in
// 4 heads of 16, then a small DPT-like tail in float32.
struct MiniStep {
  CudaBackend& be;
  Tensor frame = be.alloc({1, 3, 28, 42}, DType::F32);
  Tensor patches = be.alloc({6, 588}, DType::BF16);
  Tensor tokens = be.alloc({6, 64}, DType::BF16);
  Tensor normed = be.alloc({6, 64}, DType::BF16);
  Tensor qkv = be.alloc({6, 192}, DType::BF16);
  Tensor q = be.alloc({6, 64}, DType::BF16), k = be.alloc({6, 64}, DType::BF16), v = be.alloc({6, 64}, DType::BF16);
  Tensor hidden = be.alloc({6, 256}, DType::BF16);
  Tensor joined = be.alloc({6, 128}, DType::BF16);
  Tensor joined_f32 = be.alloc({6, 128}, DType::F32);
  Tensor maps = be.alloc({1, 128, 2, 3}, DType::F32);
  Tensor up = be.alloc({1, 32, 4, 6}, DType::F32);
  Tensor conv = be.alloc({1, 16, 4, 6}, DType::F32);
  Tensor big = be.alloc({1, 16, 7, 9}, DType::F32);

  Tensor w_embed = be.upload(random_host({64, 588}, 1, -0.07f, 0.07f), DType::BF16);
  Tensor b_embed = be.upload(random_host({64}, 2), DType::F32);
  Tensor ln_w = be.upload(random_host({64}, 3, 0.5f, 1.5f), DType::F32);
  Tensor ln_b = be.upload(random_host({64}, 4), DType::F32);
  Tensor w_qkv = be.upload(random_host({192, 64}, 5, -0.2f, 0.2f), DType::BF16);
  Tensor b_qkv = be.upload(random_host({192}, 6), DType::F32);
  Tensor qn_w = be.upload(random_host({16}, 7, 0.5f, 1.5f), DType::F32);
  Tensor kn_w = be.upload(random_host({16}, 8, 0.5f, 1.5f), DType::F32);
  Tensor cos = be.upload(random_host({6, 8}, 9), DType::F32);
  Tensor sin = be.upload(random_host({6, 8}, 10), DType::F32);
  Tensor w_fc1 = be.upload(random_host({256, 64}, 11, -0.2f, 0.2f), DType::BF16);
  Tensor b_fc1 = be.upload(random_host({256}, 12), DType::F32);
  Tensor w_fc2 = be.upload(random_host({64, 256}, 13, -0.1f, 0.1f), DType::BF16);
  Tensor b_fc2 = be.upload(random_host({64}, 14), DType::F32);
  Tensor gamma = be.upload(random_host({64}, 15), DType::F32);
  Tensor w_up = be.upload(random_host({128, 32, 2, 2}, 16, -0.15f, 0.15f), DType::F32);
  Tensor b_up = be.upload(random_host({32}, 17), DType::F32);
  Tensor w_conv = be.upload(random_host({16, 32, 3, 3}, 18, -0.1f, 0.1f), DType::F32);
  Tensor b_conv = be.upload(random_host({16}, 19), DType::F32);

  void run(const Tensor& host_frame) {
    be.upload_into(host_frame, frame);
    be.patchify(frame, 14, kMean, kStd, patches);
    be.linear(patches, w_embed, &b_embed, tokens, Activation::None);
    be.layer_norm(tokens, &ln_w, &ln_b, 1e-6f, normed);
    be.linear(normed, w_qkv, &b_qkv, qkv, Activation::None);
    const QkNorm norm{&qn_w, nullptr, &kn_w, nullptr, 1e-5f};
    const RopeTable rope{cos, sin, RopeTable::Pairs::HalfSplit};
    be.split_qkv(qkv, 4, 16, &norm, &rope, q, k, v);
    be.linear(q, w_fc1, &b_fc1, hidden, Activation::Gelu);
    be.linear_residual(hidden, w_fc2, &b_fc2, &gamma, tokens);
    be.concat_cols(tokens, v, joined);
    be.convert(joined, joined_f32);
    be.tokens_to_nchw(joined_f32, 2, 3, maps);
    be.conv_transpose2d(maps, w_up, &b_up, 2, up);
    be.conv2d(up, w_conv, &b_conv, 1, 1, conv);
    be.relu(conv, conv);
    be.resize_bilinear(conv, big);
  }
};

TEST(CudaBackendGraph, AllocatesNothingAfterTheFirstRun) {
  LB_REQUIRE_CUDA_DEVICE();
  MiniStep step{gpu()};
  const Tensor frame = random_host({1, 3, 28, 42}, 20, 0.0f, 1.0f);
  step.run(frame);
  gpu().synchronize();
  const int64_t before = device_allocation_count();
  for (int i = 0; i < 3; ++i) step.run(frame);
  gpu().synchronize();
  EXPECT_EQ(device_allocation_count(), before) << "device allocations during warmed-up steps";
}

TEST(CudaBackendGraph, CapturedStepReplaysLikeAnEagerRun) {
  LB_REQUIRE_CUDA_DEVICE();
  MiniStep step{gpu()};
  const Tensor frame_a = random_host({1, 3, 28, 42}, 21, 0.0f, 1.0f);
  const Tensor frame_b = random_host({1, 3, 28, 42}, 22, 0.0f, 1.0f);
  step.run(frame_a);  // warm-up: buffers sized, algorithms chosen
  const Tensor eager_a = gpu().download(step.big);
  step.run(frame_b);
  const Tensor eager_b = gpu().download(step.big);
  const Tensor eager_b_tokens = gpu().download(step.tokens);

  cudaStream_t stream = gpu().stream();
  cudaGraph_t graph = nullptr;
  LB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    step.run(frame_a);
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);  // leave capture mode for the next tests
    if (graph) (void)cudaGraphDestroy(graph);
    throw;
  }
  LB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  LB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  gpu().stage_upload(frame_b, step.frame);  // the captured copy node reads this buffer
  gpu().fill(step.big, std::numeric_limits<float>::quiet_NaN());
  LB_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  gpu().synchronize();
  EXPECT_TRUE(matches(step.big, eager_b, 1e-6, "graph replay on frame b vs eager run on frame b"));
  EXPECT_TRUE(matches(step.tokens, eager_b_tokens, 1e-6, "graph replay tokens vs eager tokens"));
  EXPECT_FALSE(matches(step.big, eager_a, 1e-2, "graph replay on frame b vs eager run on frame a"))
      << "the replay did not see the restaged input";

  LB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  LB_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
}  // namespace lingbot::cuda::backend_test
