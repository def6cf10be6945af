// Which GPUs the CUDA backend accepts (backend/cuda/device_capability.h):
// plain arithmetic, checked without a GPU; and, on the GPU machine, that the
// device there passes and that the ledger sees the backend's allocations and
// its CUDA graphs, and what the low-memory profile saves.
#include "backend_test_support.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_capability.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm.h"

#include <gtest/gtest.h>


namespace lingbot::cuda {
namespace {

// What the ledger holds for one purpose now, in bytes.
int64_t live(const char* what) {
  for (const MemoryUse& u : device_memory_account().uses)
    if (u.what == what) return u.live_bytes;
  return 0;
}

TEST(CudaDeviceCapability, RefusesGpusOlderThanAmpereInOneLine) {
  const std::string why = unsupported_device_reason("Tesla T4", 7, 5);
  EXPECT_EQ(why, "Tesla T4 is sm_75 (compute capability 7.5); the CUDA backend needs sm_80 (Ampere) or newer");
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_NE(unsupported_device_reason("Tesla V100", 7, 0), "");
  EXPECT_NE(unsupported_device_reason("GTX 1080", 6, 1), "");
}

TEST(CudaDeviceCapability, AcceptsAmpereAndEverythingNewer) {
  for (const auto& [major, minor] : {std::pair{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}})
    EXPECT_EQ(unsupported_device_reason("gpu", major, minor), "") << major << "." << minor;
}

TEST(CudaDeviceCapability, TheGpuHereIsAccepted) {
  if (!device_available()) GTEST_SKIP() << "no usable CUDA device: " << device_unavailable_reason();
  EXPECT_EQ(device_unavailable_reason(), "");
}

TEST(CudaDeviceMemoryAccount, LedgerSeesAllocationsAndTheDriverSeesMore) {
  if (!device_available()) GTEST_SKIP() << "no usable CUDA device: " << device_unavailable_reason();
  CudaBackend backend;
  const DeviceMemoryAccount before = device_memory_account();
  constexpr int64_t kBytes = int64_t{64} << 20;
  int64_t live_with = 0;
  {
    Tensor t = backend.alloc({kBytes / 4}, DType::F32);
    const DeviceMemoryAccount with = device_memory_account();
    live_with = with.live_bytes;
    EXPECT_EQ(with.live_bytes - before.live_bytes, kBytes);
    EXPECT_GE(with.peak_bytes, with.live_bytes);
    EXPECT_GE(with.device_in_use, with.live_bytes) << "cudaMemGetInfo counts the context too";
    EXPECT_GT(with.device_total, with.device_in_use);
  }
  const DeviceMemoryAccount after = device_memory_account();
  EXPECT_EQ(live_with - after.live_bytes, kBytes) << "freed tensors leave the ledger";
  EXPECT_GE(after.peak_bytes, live_with);
}

TEST(CudaDeviceMemoryAccount, RecordsEachGraphWhileItLives) {
  if (!device_available()) GTEST_SKIP() << "no usable CUDA device: " << device_unavailable_reason();
  const std::string graphs = "CUDA graphs (as the driver's free memory fell)";
  const auto graphs_held = [&] {
    for (const MemoryUse& u : device_memory_account().uses)
      if (u.what == graphs) return u.allocations;
    return int64_t{0};
  };
  CudaBackend backend;
  Tensor t = backend.alloc({1024}, DType::F32);
  backend.fill(t, 0.0f);  // outside the capture: nothing to allocate inside it
  const int64_t before = graphs_held();
  backend.begin_capture();
  backend.fill(t, 1.0f);
  std::shared_ptr<void> graph = backend.end_capture();
  EXPECT_EQ(graphs_held(), before + 1);
  backend.replay(graph);
  backend.synchronize();
  graph.reset();
  EXPECT_EQ(graphs_held(), before);
}

// Every backend lowers the CUDA context's per-thread stack limit, for which
// the driver reserves local memory for every thread the GPU can hold
// (bench's account prints it); the kernels still run (the driver raises the
// limit for a kernel that needs more), as every other CUDA test shows.
TEST(CudaDeviceMemoryAccount, EveryBackendLowersTheThreadStackLimit) {
  if (!device_available()) GTEST_SKIP() << "no usable CUDA device: " << device_unavailable_reason();
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 1024), cudaSuccess);  // the driver's default
  EXPECT_EQ(device_memory_account().thread_stack_bytes, 1024);
  CudaBackend backend;
  EXPECT_LE(device_memory_account().thread_stack_bytes, static_cast<int64_t>(CudaBackendOptions::kThreadStackBytes));
  Tensor t = backend.alloc({1024}, DType::F32);
  backend.fill(t, 1.0f);
  backend.synchronize();
}

// memory_profile low's part of the backend (CudaBackendOptions::low_memory):
// a 4 MiB cuBLASLt workspace per lane instead of 32 MiB, with products that
// still match the CPU's at the aggregator's and the heads' shapes (the
// heuristic passes over algorithms that need more workspace).
TEST(CudaDeviceMemoryAccount, TheLowMemoryBackendKeepsTheCublasLtWorkspaceSmall) {
  LB_REQUIRE_CUDA_DEVICE();
  using backend_test::cpu;
  (void)backend_test::gpu();  // the shared backend (which matches() downloads through) exists before "before"
  const int64_t before = live("the cuBLASLt workspace");
  CudaBackendOptions options;
  options.low_memory = true;
  CudaBackend low(options);
  EXPECT_EQ(live("the cuBLASLt workspace") - before, static_cast<int64_t>(Gemm::kLowMemoryWorkspaceBytes))
      << "one lane's cuBLASLt workspace";

  struct Case {
    const char* name;
    int64_t rows, in, out;
    DType type;
    double bound;
  };
  const Case cases[] = {{"qkv, bf16", 978, 1024, 3072, DType::BF16, 1e-4},
                        {"MLP fc2 (long sums), bf16", 978, 4096, 1024, DType::BF16, 1e-4},
                        {"8 scale frames' MLP fc1, bf16", 8 * 978, 1024, 4096, DType::BF16, 1e-4},
                        {"DPT projection, float32 (TF32)", 999, 2048, 256, DType::F32, backend_test::kTf32Bound}};
  uint64_t seed = 9200;
  for (const Case& c : cases) {
    const Tensor x = backend_test::random_host({c.rows, c.in}, seed += 10);
    const Tensor w = backend_test::random_host({c.out, c.in}, seed + 1, -0.03f, 0.03f);
    Tensor expected = Tensor::empty({c.rows, c.out});
    cpu().linear(x.to_dtype(c.type).to_dtype(DType::F32), w.to_dtype(c.type).to_dtype(DType::F32), nullptr, expected);
    Tensor out = low.alloc({c.rows, c.out}, DType::F32);
    low.linear(low.upload(x, c.type), low.upload(w, c.type), nullptr, out, Activation::None);
    low.synchronize();
    EXPECT_TRUE(backend_test::matches(out, expected, c.bound, c.name));
  }
}

// release_scratch() gives back what a multi-frame step grew (the scale
// phase's batched depth head: cuDNN's workspace for a batch of maps), and
// the next convolution allocates what it needs again and still computes.
TEST(CudaDeviceMemoryAccount, ReleasedScratchLeavesTheLedgerAndComesBack) {
  LB_REQUIRE_CUDA_DEVICE();
  using backend_test::cpu;
  (void)backend_test::gpu();
  const int64_t before = live("the cuDNN workspace");
  CudaBackend backend;
  const auto conv = [&](int64_t frames, uint64_t seed) {
    const Tensor x = backend_test::random_host({frames, 256, 108, 144}, seed);
    const Tensor w = backend_test::random_host({256, 256, 3, 3}, seed + 1, -0.02f, 0.02f);
    Tensor expected = Tensor::empty({frames, 256, 108, 144});
    cpu().conv2d(x, w, nullptr, 1, 1, expected);
    Tensor out = backend.alloc({frames, 256, 108, 144}, DType::F32);
    backend.conv2d(backend.upload(x, DType::F32), backend.upload(w, DType::F32), nullptr, 1, 1, out);
    backend.synchronize();
    EXPECT_TRUE(backend_test::matches(out, expected, backend_test::kTf32Bound, "conv after release"));
  };
  conv(4, 9300);
  const int64_t grown = live("the cuDNN workspace") - before;
  std::printf("cuDNN workspace for 4 maps of 256@108x144: %lld MB\n", static_cast<long long>(grown >> 20));
  backend.release_scratch();
  EXPECT_EQ(live("the cuDNN workspace"), before) << "released";
  conv(1, 9310);
  EXPECT_LE(live("the cuDNN workspace") - before, grown) << "one map needs no more than four";
}

}  // namespace
}  // namespace lingbot::cuda
