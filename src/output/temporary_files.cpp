#include "output/temporary_files.h"

#include "core/error.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace lingbot::io {

namespace {

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096;
// A slot is in use while its first byte is not 0; the handler reads slots
// [0, used) and skips empty ones.
char slots[kSlots][kPathBytes];
std::atomic<int> used{0};
// Writers on several threads (a viewer's glb beside the run's files) register
// too; the handler only reads, so it takes no lock.
std::mutex slots_mutex;

}  // namespace

void register_temporary(const std::string& path) {
  LB_CHECK(path.size() < kPathBytes, "{}: path too long for a temporary file", path);
  const std::lock_guard<std::mutex> lock(slots_mutex);
  for (int i = 0; i < used.load(); ++i) {
    if (slots[i][0] == 0) {
      std::memcpy(slots[i] + 1, path.c_str() + 1, path.size());  // the first byte last: the slot turns on whole
      std::atomic_signal_fence(std::memory_order_seq_cst);
      slots[i][0] = path.empty() ? 0 : path[0];
      return;
    }
  }
  const int i = used.load();
  LB_CHECK(i < kSlots, "{}: more than {} temporary files at once", path, kSlots);
  std::memcpy(slots[i], path.c_str(), path.size() + 1);
  used.store(i + 1);
}

void unregister_temporary(const std::string& path) {
  const std::lock_guard<std::mutex> lock(slots_mutex);
  for (int i = 0; i < used.load(); ++i)
    if (slots[i][0] != 0 && path == slots[i]) slots[i][0] = 0;
}

void remove_registered_temporaries_signal_safe() {
  const int n = used.load();
  for (int i = 0; i < n; ++i)
    if (slots[i][0] != 0) unlink(slots[i]);
}

}  // namespace lingbot::io
