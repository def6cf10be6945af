#include "backend/cuda/kernel_launch.h"

#include "backend/cuda/cuda_check.h"

#include <cuda_runtime_api.h>

#include <atomic>

namespace lingbot::cuda {

namespace {

std::atomic<bool> g_allowed{true};

}  // namespace

void allow_programmatic_launch(bool allowed) { g_allowed.store(allowed, std::memory_order_relaxed); }

bool programmatic_launch_enabled() {
  if (!g_allowed.load(std::memory_order_relaxed)) return false;
  static thread_local int cached_device = -1;
  static thread_local bool cached = false;
  int device = 0;
  LB_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    int major = 0;
    LB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cached = major == 9;
    cached_device = device;
  }
  return cached;
}

}  // namespace lingbot::cuda
