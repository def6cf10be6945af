#include "backend/cuda/device_memory.h"

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

#include <algorithm>
#include <atomic>

namespace lingbot::cuda {

namespace {

std::atomic<int64_t> g_allocations{0};

// Never destroyed: tensors and scratch buffers of objects with static
// storage may be freed during exit, after a ledger would have been.
MemoryLedger& ledger() {
  static MemoryLedger* const instance = new MemoryLedger;
  return *instance;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

void* device_malloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it so later calls do not report it again
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    fail("cuda: out of memory allocating {:.1f} MiB for {} ({:.1f} MiB free of {:.1f} MiB)", bytes / kMiB, what,
         free_bytes / kMiB, total_bytes / kMiB);
  }
  LB_CUDA_CHECK(status);
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ledger().add(p, bytes, what);
  return p;
}

void device_free(void* p) noexcept {
  if (p == nullptr) return;
  ledger().remove(p);
  (void)cudaFree(p);  // a destructor's path: nothing sensible to do on failure
}

int64_t device_allocation_count() { return g_allocations.load(std::memory_order_relaxed); }

DeviceMemoryAccount device_memory_account() {
  DeviceMemoryAccount account = ledger().account();
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    account.device_in_use = static_cast<int64_t>(total_bytes - free_bytes);
    account.device_total = static_cast<int64_t>(total_bytes);
  } else {
    (void)cudaGetLastError();
  }
  size_t stack = 0;
  if (cudaDeviceGetLimit(&stack, cudaLimitStackSize) == cudaSuccess)
    account.thread_stack_bytes = static_cast<int64_t>(stack);
  else
    (void)cudaGetLastError();
  return account;
}

void reset_device_memory_peaks() { ledger().reset_peaks(); }

void record_driver_memory(const void* key, int64_t bytes, const char* what) {
  ledger().add(key, static_cast<size_t>(std::max<int64_t>(bytes, 0)), what);
}

void forget_driver_memory(const void* key) noexcept { ledger().remove(key); }

int64_t device_free_bytes() noexcept {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(free_bytes);
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  LB_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

void check_not_capturing(cudaStream_t stream, const char* what) {
  LB_CHECK(!is_capturing(stream), "cuda backend: {} during CUDA graph capture; run the step once before capturing it",
           what);
}

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);
    device_free(data_);
  }
}

void* DeviceScratch::get(size_t bytes) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  check_not_capturing(stream_, ("growing the scratch buffer '" + what_ + "'").c_str());
  // Round up to 2 MiB so that nearby sizes do not each cause a reallocation.
  constexpr size_t kGranule = size_t{2} << 20;
  const size_t grown = std::max(kGranule, (bytes + kGranule - 1) / kGranule * kGranule);
  release();  // the old buffer, once enqueued work is done with it
  data_ = device_malloc(grown, what_.c_str());
  capacity_ = grown;
  return data_;
}

void DeviceScratch::release() {
  if (data_ == nullptr) return;
  check_not_capturing(stream_, ("freeing the scratch buffer '" + what_ + "'").c_str());
  LB_CUDA_CHECK(cudaStreamSynchronize(stream_));  // enqueued work may still use it
  device_free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace lingbot::cuda
