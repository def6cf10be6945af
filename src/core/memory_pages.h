// Host memory at the granularity of the kernel's pages: faulting a range in
// ahead of writing it, and the whole pages of a range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace lingbot {

// The whole pages of [first, first + bytes): (address, length), or an empty
// range (also where the system has no pages to speak of).
std::pair<uintptr_t, size_t> whole_pages(const void* first, int64_t bytes);

// Faults in the memory of [first, first + bytes) for writing. One
// madvise(MADV_POPULATE_WRITE) maps the whole range in the kernel, where
// touching a page at a time takes a fault per page, and faults from several
// threads of one process contend inside the kernel (a parallel loop that
// writes new memory waits on them). Kernels before 5.14 (and sandboxes that
// lack the call) refuse it: then each page is touched from this thread.
void populate_for_write(void* first, int64_t bytes);

}  // namespace lingbot
