// CUDA backend: side branches (begin_side_branch / end_side_branch /
// join_side_branch), which let the depth head run beside the camera head.
// The two workloads below both use cuBLASLt, cuDNN or the float32 scratch
// buffer, the resources a branch must not share with the main work; run
// concurrently (eagerly and as a replayed graph) they must give what they
// give in order, and what the CPU reference gives.
#include "backend_test_support.h"

#include "backend/cuda/cuda_check.h"

#include <cuda_runtime_api.h>

namespace lingbot::cuda::backend_test {
namespace {

// A DPT-like float32 chain (the branch): a transposed convolution (cuBLASLt
// into the scratch buffer, then a scatter), a convolution (cuDNN) and a
// 64-row float32 linear layer (cuBLASLt).
struct BranchWork {
  Tensor maps, w_up, b_up, w_conv, b_conv, w_lin, b_lin;
  Tensor up, conv, lin;

  void alloc(Backend& be) {
    up = be.alloc({2, 32, 48, 48}, DType::F32);
    conv = be.alloc({2, 16, 48, 48}, DType::F32);
    lin = be.alloc({64, 256}, DType::F32);
  }
  void run(Backend& be) {
    be.conv_transpose2d(maps, w_up, &b_up, 2, up);
    be.conv2d(up, w_conv, &b_conv, 1, 1, conv);
    be.relu(conv, conv);
    be.linear(conv.reshape({64, 1152}), w_lin, &b_lin, lin, Activation::None);
  }
};

// Transformer-like bf16 work on the main stream: a residual update through
// the scratch buffer (cuBLASLt, then the epilogue kernel), LayerNorm and a
// one-row float32 layer (the weight-streaming kernel).
struct MainWork {
  Tensor x, w_fc, b_fc, gamma, residual, ln_w, ln_b, normed, row, w_row, b_row, row_out;

  void run(Backend& be) {
    be.linear_residual(x, w_fc, &b_fc, &gamma, residual);
    be.layer_norm(residual, &ln_w, &ln_b, 1e-6f, normed);
    be.linear(row, w_row, &b_row, row_out, Activation::None);
  }
};

struct Inputs {
  Tensor maps = random_host({2, 64, 24, 24}, 31);
  Tensor w_up = random_host({64, 32, 2, 2}, 32, -0.1f, 0.1f);
  Tensor b_up = random_host({32}, 33);
  Tensor w_conv = random_host({16, 32, 3, 3}, 34, -0.06f, 0.06f);
  Tensor b_conv = random_host({16}, 35);
  Tensor w_lin = random_host({256, 1152}, 36, -0.03f, 0.03f);
  Tensor b_lin = random_host({256}, 37);
  Tensor x = representable(random_host({2048, 1024}, 38), DType::BF16);
  Tensor w_fc = representable(random_host({1024, 1024}, 39, -0.03f, 0.03f), DType::BF16);
  Tensor b_fc = random_host({1024}, 40);
  Tensor gamma = random_host({1024}, 41, 0.5f, 1.5f);
  Tensor residual = random_host({2048, 1024}, 42);
  Tensor ln_w = random_host({1024}, 43, 0.5f, 1.5f);
  Tensor ln_b = random_host({1024}, 44);
  Tensor row = random_host({1, 2048}, 45);
  Tensor w_row = random_host({4096, 2048}, 46, -0.02f, 0.02f);
  Tensor b_row = random_host({4096}, 47);
};

void bind(Backend& be, const Inputs& in, BranchWork& b, MainWork& m, DType compute) {
  auto up = [&](const Tensor& t, DType d) { return be.device() == Device::CPU ? t.clone() : be.upload(t, d); };
  b.maps = up(in.maps, DType::F32);
  b.w_up = up(in.w_up, DType::F32);
  b.b_up = up(in.b_up, DType::F32);
  b.w_conv = up(in.w_conv, DType::F32);
  b.b_conv = up(in.b_conv, DType::F32);
  b.w_lin = up(in.w_lin, DType::F32);
  b.b_lin = up(in.b_lin, DType::F32);
  b.alloc(be);
  m.x = up(in.x, compute);
  m.w_fc = up(in.w_fc, compute);
  m.b_fc = up(in.b_fc, DType::F32);
  m.gamma = up(in.gamma, DType::F32);
  m.residual = up(in.residual, DType::F32);
  m.ln_w = up(in.ln_w, DType::F32);
  m.ln_b = up(in.ln_b, DType::F32);
  m.normed = be.alloc({2048, 1024}, compute);
  m.row = up(in.row, DType::F32);
  m.w_row = up(in.w_row, DType::F32);
  m.b_row = up(in.b_row, DType::F32);
  m.row_out = be.alloc({1, 4096}, DType::F32);
}

// One step: the branch's work beside the main work, or everything in order.
void step(Backend& be, BranchWork& b, MainWork& m, bool branch) {
  if (branch) be.begin_side_branch();
  b.run(be);
  if (branch) be.end_side_branch();
  m.run(be);
  if (branch) be.join_side_branch();
}

struct Results {
  Tensor lin, conv, residual, normed, row_out;
};

Results download(Backend& be, const BranchWork& b, const MainWork& m) {
  be.synchronize();
  return {be.download(b.lin), be.download(b.conv), be.download(m.residual), be.download(m.normed),
          be.download(m.row_out)};
}

TEST(CudaBackendBranch, SideBranchGivesTheInOrderResults) {
  LB_REQUIRE_CUDA_DEVICE();
  const Inputs in;
  // The CPU reference: float32, in order (its branches are no-ops).
  BranchWork cb;
  MainWork cm;
  bind(cpu(), in, cb, cm, DType::F32);
  step(cpu(), cb, cm, true);
  const Results want{cb.lin, cb.conv, cm.residual, cm.normed, cm.row_out};

  // A backend of its own, without the test backends' synchronisation after
  // every op, so that the branch really runs beside the main work.
  CudaBackend be;
  BranchWork gb;
  MainWork gm;
  bind(be, in, gb, gm, DType::BF16);
  step(be, gb, gm, false);
  const Results in_order = download(be, gb, gm);

  bind(be, in, gb, gm, DType::BF16);  // fresh inputs (the residual was updated)
  step(be, gb, gm, true);
  be.synchronize();
  EXPECT_TRUE(matches(gb.lin, in_order.lin, 1e-6, "branch: linear after the convolutions"));
  EXPECT_TRUE(matches(gb.conv, in_order.conv, 1e-6, "branch: convolution"));
  EXPECT_TRUE(matches(gm.residual, in_order.residual, 1e-6, "main: residual update"));
  EXPECT_TRUE(matches(gm.normed, in_order.normed, 1e-6, "main: LayerNorm"));
  EXPECT_TRUE(matches(gm.row_out, in_order.row_out, 1e-6, "main: one-row layer"));

  EXPECT_TRUE(matches(gb.conv, want.conv, kTf32Bound, "branch convolution vs CPU"));
  EXPECT_TRUE(matches(gb.lin, want.lin, kTf32Bound, "branch linear vs CPU"));
  EXPECT_TRUE(matches(gm.residual, want.residual, kBf16Bound, "main residual vs CPU"));
  EXPECT_TRUE(matches(gm.row_out, want.row_out, kFp32Bound, "main one-row layer vs CPU"));
}

TEST(CudaBackendBranch, CapturedBranchReplaysLikeTheEagerRun) {
  LB_REQUIRE_CUDA_DEVICE();
  const Inputs in;
  CudaBackend be;
  BranchWork gb;
  MainWork gm;
  bind(be, in, gb, gm, DType::BF16);
  step(be, gb, gm, true);  // warm-up: the side stream, buffers and algorithms
  bind(be, in, gb, gm, DType::BF16);
  step(be, gb, gm, true);
  const Results eager = download(be, gb, gm);

  bind(be, in, gb, gm, DType::BF16);
  be.begin_capture();
  try {
    step(be, gb, gm, true);
  } catch (...) {
    (void)be.end_capture();
    throw;
  }
  const std::shared_ptr<void> graph = be.end_capture();
  be.fill(gb.lin, std::numeric_limits<float>::quiet_NaN());
  be.fill(gb.conv, std::numeric_limits<float>::quiet_NaN());
  be.fill(gm.row_out, std::numeric_limits<float>::quiet_NaN());
  be.replay(graph);
  be.synchronize();
  EXPECT_TRUE(matches(gb.lin, eager.lin, 1e-6, "replayed branch: linear"));
  EXPECT_TRUE(matches(gb.conv, eager.conv, 1e-6, "replayed branch: convolution"));
  EXPECT_TRUE(matches(gm.residual, eager.residual, 1e-6, "replayed main: residual update"));
  EXPECT_TRUE(matches(gm.row_out, eager.row_out, 1e-6, "replayed main: one-row layer"));
}

TEST(CudaBackendBranch, MisnestedBranchesAreRefused) {
  LB_REQUIRE_CUDA_DEVICE();
  CudaBackend be;
  EXPECT_THROW(be.end_side_branch(), Error);
  be.begin_side_branch();
  EXPECT_THROW(be.begin_side_branch(), Error);
  EXPECT_THROW(be.join_side_branch(), Error);
  be.end_side_branch();
  be.join_side_branch();
  be.synchronize();
}

}  // namespace
}  // namespace lingbot::cuda::backend_test
