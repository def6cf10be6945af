#include "core/memory_pages.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace lingbot {

std::pair<uintptr_t, size_t> whole_pages(const void* first, int64_t bytes) {
#if defined(__linux__)
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(first);
  const uintptr_t lo = (begin + page - 1) / page * page;
  const uintptr_t hi = (begin + static_cast<uintptr_t>(bytes)) / page * page;
  return {lo, hi > lo ? hi - lo : 0};
#else
  (void)first;
  (void)bytes;
  return {0, 0};
#endif
}

void populate_for_write(void* first, int64_t bytes) {
  if (first == nullptr || bytes <= 0) return;
  volatile std::byte* p = static_cast<std::byte*>(first);
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  const auto [lo, length] = whole_pages(first, bytes);
  if (length > 0 && ::madvise(reinterpret_cast<void*>(lo), length, MADV_POPULATE_WRITE) == 0) {
    p[0] = p[0];  // the partial pages at either end
    p[bytes - 1] = p[bytes - 1];
    return;
  }
#endif
  constexpr int64_t kPage = 4096;
  for (int64_t i = 0; i < bytes; i += kPage) p[i] = p[i];
  p[bytes - 1] = p[bytes - 1];
}

}  // namespace lingbot
