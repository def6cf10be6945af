// Which GPUs the CUDA backend accepts (backend/cuda/device_capability.h):
// plain arithmetic, checked without a GPU; and, on the GPU machine, that the
// device there passes and that the ledger sees the backend's allocations and
// its CUDA graphs.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_capability.h"
#include "backend/cuda/device_memory.h"

#include <gtest/gtest.h>

namespace lingbot::cuda {
namespace {

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

}  // namespace
}  // namespace lingbot::cuda
