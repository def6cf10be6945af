// Where a GPU's memory goes: the CUDA backend's own count of what it
// allocated, by purpose, beside what the driver says is in use.
//
// Every cudaMalloc of the backend goes through one place (backend/cuda/
// device_memory.h), which records it here under the name of what it is for
// ("a tensor", "kv cache pages", "the cuBLASLt workspace", ...), and every
// cudaFree removes it. The ledger keeps the bytes live now and the most that
// were ever live at once (the peak that has to fit on the card), in total
// and per purpose; instantiated CUDA graphs are in it too, as much as the
// driver's free memory fell when each was made. Whatever the driver reports
// in use beyond the ledger's live bytes is the CUDA context, the libraries'
// own allocations (cuBLASLt, cuDNN) and the driver's rounding.
//
// This header needs no CUDA: the program formats the account that the
// CUDA module (liblingbot_cuda.so) hands it (backend/cuda_module.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace lingbot {

// One purpose's share of the allocations.
struct MemoryUse {
  std::string what;
  int64_t live_bytes = 0;   // held now
  int64_t peak_bytes = 0;   // the most this purpose held at once
  int64_t allocations = 0;  // held now
  bool operator==(const MemoryUse&) const = default;
};

// The account: the ledger's figures and the driver's.
struct DeviceMemoryAccount {
  std::vector<MemoryUse> uses;  // largest live first
  int64_t live_bytes = 0;       // sum of uses[].live_bytes
  int64_t peak_bytes = 0;       // the most that was live at once (<= the sum of the per-use peaks)
  int64_t device_in_use = -1;   // cudaMemGetInfo's total - free (the whole device); -1: unknown
  int64_t device_total = -1;
  // The CUDA context's per-thread stack limit (cudaLimitStackSize), for
  // which the driver reserves local memory for every thread the GPU can
  // hold at once: part of what is outside the ledger. -1: unknown.
  int64_t thread_stack_bytes = -1;
  // device_in_use - live_bytes: context, libraries, rounding (0 when unknown).
  int64_t outside_ledger() const { return device_in_use >= 0 ? device_in_use - live_bytes : 0; }
};

// Thread-safe record of live allocations by purpose.
class MemoryLedger {
 public:
  void add(const void* p, size_t bytes, std::string_view what);
  // Unknown pointers (null, or memory from elsewhere) are ignored.
  void remove(const void* p);
  DeviceMemoryAccount account() const;  // without the driver's figures
  // Forgets the peaks: from now on they are the most held since this call
  // (e.g. to see a later phase's peak apart from the start's).
  void reset_peaks();

 private:
  struct Block {
    size_t bytes;
    std::string what;
  };
  mutable std::mutex mutex_;
  std::map<const void*, Block> blocks_;
  std::map<std::string, MemoryUse, std::less<>> uses_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
};

// Several lines, in MB (10^6 bytes, as the rest of bench's figures):
//   device memory: 11780 MB in use of 150000 (cudaMemGetInfo), 10650 MB allocated by lingbot (peak 11020 MB),
//     1130 MB outside it (CUDA context, cuBLASLt's and cuDNN's own)
//   kv cache pages 7260 MB (peak 7260 MB, 24 allocations)
//   ...
std::string format_memory_account(const DeviceMemoryAccount& account);

}  // namespace lingbot
