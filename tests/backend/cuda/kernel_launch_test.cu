// Programmatic dependent launch (backend/cuda/kernel_launch.cuh), on the GPU
// machine: that a kernel launched by launch_kernel really starts while the
// kernel before it is still running (else the option would buy nothing),
// that await_previous_kernels() then holds it until the previous kernel's
// writes are visible (else every kernel after the first would race), and
// that the option turns the early start off. Test kernels of their own:
// one that spins, and one that skips the wait on purpose to observe when
// it started.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_launch.cuh"

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <vector>

namespace lingbot::cuda {
namespace {

constexpr long long kSpinCycles = 200'000'000;  // ~0.1 s at the H100's clock: far beyond any launch latency

// Lets the next kernel launch, then spins until `started` is set or the
// cycles run out, and records whether it saw it.
__global__ void spin_until_started(const volatile int* started, int* saw_started) {
  await_previous_kernels();
  const long long begin = clock64();
  while (*started == 0 && clock64() - begin < kSpinCycles) {
  }
  *saw_started = *started;
}

// Skips await_previous_kernels() on purpose (no launch_kernel kernel may):
// marks that it is running while the kernel before may still be.
__global__ void mark_started(volatile int* started) { *started = 1; }

// Lets the next kernel launch, spins for a while, then writes `n` values.
__global__ void write_late(int* out, int n) {
  await_previous_kernels();
  const long long begin = clock64();
  while (clock64() - begin < kSpinCycles / 10) {
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = 1000 + i;
}

// Waits as every kernel here does, then copies.
__global__ void copy_after_wait(const int* in, int* out, int n) {
  await_previous_kernels();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i];
}

class ProgrammaticLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      GTEST_SKIP() << "no CUDA device: these tests run on the GPU machine";
    }
    LB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    allow_programmatic_launch(true);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  bool hopper() const {
    int device = 0, major = 0;
    LB_CUDA_CHECK(cudaGetDevice(&device));
    LB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major == 9;
  }
  // Whether the second kernel started while the first was still spinning.
  bool second_started_early() {
    int* flags = nullptr;  // [started, saw_started]
    LB_CUDA_CHECK(cudaMalloc(&flags, 2 * sizeof(int)));
    LB_CUDA_CHECK(cudaMemsetAsync(flags, 0, 2 * sizeof(int), stream_));
    launch_kernel(spin_until_started, 1, 1, 0, stream_, flags, flags + 1);
    launch_kernel(mark_started, 1, 1, 0, stream_, flags);
    int host[2] = {0, 0};
    LB_CUDA_CHECK(cudaMemcpyAsync(host, flags, sizeof(host), cudaMemcpyDeviceToHost, stream_));
    LB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    LB_CUDA_CHECK(cudaFree(flags));
    EXPECT_EQ(host[0], 1);  // the second kernel ran, early or not
    return host[1] == 1;
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(ProgrammaticLaunch, OnHopperTheNextKernelStartsWhileThePreviousRuns) {
  if (!hopper()) GTEST_SKIP() << "programmatic launches are on Hopper (compute capability 9.x) only";
  allow_programmatic_launch(true);
  ASSERT_TRUE(programmatic_launch_enabled());
  EXPECT_TRUE(second_started_early());
}

TEST_F(ProgrammaticLaunch, TurnedOffTheNextKernelWaitsForThePreviousToFinish) {
  allow_programmatic_launch(false);
  EXPECT_FALSE(programmatic_launch_enabled());
  EXPECT_FALSE(second_started_early());
}

TEST_F(ProgrammaticLaunch, AKernelThatAwaitsSeesThePreviousKernelsWrites) {
  for (const bool allowed : {true, false}) {
    SCOPED_TRACE(allowed ? "programmatic launch allowed" : "turned off");
    allow_programmatic_launch(allowed);
    constexpr int n = 4096;
    int *produced = nullptr, *copied = nullptr;
    LB_CUDA_CHECK(cudaMalloc(&produced, n * sizeof(int)));
    LB_CUDA_CHECK(cudaMalloc(&copied, n * sizeof(int)));
    LB_CUDA_CHECK(cudaMemsetAsync(produced, 0, n * sizeof(int), stream_));
    launch_kernel(write_late, 1, 256, 0, stream_, produced, n);
    launch_kernel(copy_after_wait, 1, 256, 0, stream_, produced, copied, n);
    std::vector<int> host(n, -1);
    LB_CUDA_CHECK(cudaMemcpyAsync(host.data(), copied, n * sizeof(int), cudaMemcpyDeviceToHost, stream_));
    LB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    LB_CUDA_CHECK(cudaFree(produced));
    LB_CUDA_CHECK(cudaFree(copied));
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += host[i] != 1000 + i;
    EXPECT_EQ(wrong, 0);
  }
}

}  // namespace
}  // namespace lingbot::cuda
