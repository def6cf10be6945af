// Device memory of the CUDA backend: plain cudaMalloc/cudaFree (never
// managed memory), counted and recorded by purpose in a ledger
// (backend/device_memory_account.h), and a scratch buffer that grows to the
// largest request it has seen.
//
// After the first run of a frame step every buffer has its final size, so
// later steps allocate nothing: the property CUDA graph capture needs. The
// allocation counter lets tests check it.
#pragma once

#include "backend/device_memory_account.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace lingbot::cuda {

// cudaMalloc on the current device, recorded in the ledger under `what`
// (the purpose: allocations with the same `what` are summed); throws
// lingbot::Error naming `what`, the size and the free memory when the device
// is full.
void* device_malloc(size_t bytes, const char* what);
void device_free(void* p) noexcept;
// Successful device_malloc calls since the process started.
int64_t device_allocation_count();
// The ledger's live and peak bytes by purpose, with cudaMemGetInfo's figures
// for the current device. Never throws for a CUDA error (the driver's
// figures are then -1).
DeviceMemoryAccount device_memory_account();
// Starts the ledger's peaks again from what is live now.
void reset_device_memory_peaks();
// Device memory the driver takes for the backend without a cudaMalloc of
// ours (an instantiated CUDA graph), measured by the caller as the fall of
// cudaMemGetInfo's free bytes across the call (so in the driver's 2 MiB
// pages): recorded in the ledger under `what` until forgotten.
void record_driver_memory(const void* key, int64_t bytes, const char* what);
void forget_driver_memory(const void* key) noexcept;
// cudaMemGetInfo's free bytes on the current device; 0 where it fails.
int64_t device_free_bytes() noexcept;

// Scratch memory for one purpose (a GEMM result before the residual update,
// a workspace). get() returns at least `bytes`; the pointer is valid until the
// next get() that grows the buffer. Growing waits for `stream` (work already
// enqueued may still read the old buffer) and is refused while `stream` is
// being captured into a CUDA graph.
class DeviceScratch {
 public:
  DeviceScratch(cudaStream_t stream, std::string what) : stream_(stream), what_(std::move(what)) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  void* get(size_t bytes);
  template <typename T>
  T* get_as(int64_t count) {
    return static_cast<T*>(get(static_cast<size_t>(count) * sizeof(T)));
  }
  size_t capacity() const { return capacity_; }
  // Frees the buffer (waiting for `stream` first); the next get() allocates
  // again. Refused while `stream` is being captured.
  void release();

 private:
  cudaStream_t stream_;
  std::string what_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Whether `stream` is being captured into a CUDA graph.
bool is_capturing(cudaStream_t stream);
// Throws if `stream` is being captured: `what` would break the capture.
void check_not_capturing(cudaStream_t stream, const char* what);

}  // namespace lingbot::cuda
