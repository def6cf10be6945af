// Resource figures of this process, for logs and benchmarks.
#pragma once

#include <cstddef>

namespace lingbot {

size_t peak_rss_bytes();     // VmHWM from /proc/self/status (0 if unavailable)
size_t current_rss_bytes();  // VmRSS
// Starts a new peak: VmHWM becomes the current RSS (Linux's clear_refs "5"),
// so that one phase's peak can be told from an earlier one's. False where
// the kernel does not offer it (peak_rss_bytes then keeps the whole run's).
bool reset_peak_rss();

}  // namespace lingbot
