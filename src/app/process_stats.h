// Resource figures of this process, for logs and benchmarks.
#pragma once

#include <cstddef>

namespace lingbot {

size_t peak_rss_bytes();     // VmHWM from /proc/self/status (0 if unavailable)
size_t current_rss_bytes();  // VmRSS

}  // namespace lingbot
