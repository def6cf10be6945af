#include "backend/device_memory_account.h"

#include <fmt/format.h>

#include <algorithm>

namespace lingbot {

void MemoryLedger::add(const void* p, size_t bytes, std::string_view what) {
  std::lock_guard lock(mutex_);
  const auto [it, inserted] = blocks_.try_emplace(p, Block{bytes, std::string(what)});
  if (!inserted) return;  // already recorded (cannot happen with a working allocator)
  auto use = uses_.find(what);
  if (use == uses_.end()) use = uses_.emplace(std::string(what), MemoryUse{std::string(what)}).first;
  const auto b = static_cast<int64_t>(bytes);
  use->second.live_bytes += b;
  use->second.allocations += 1;
  use->second.peak_bytes = std::max(use->second.peak_bytes, use->second.live_bytes);
  live_ += b;
  peak_ = std::max(peak_, live_);
}

void MemoryLedger::remove(const void* p) {
  std::lock_guard lock(mutex_);
  const auto it = blocks_.find(p);
  if (it == blocks_.end()) return;
  const auto b = static_cast<int64_t>(it->second.bytes);
  MemoryUse& use = uses_.find(it->second.what)->second;
  use.live_bytes -= b;
  use.allocations -= 1;
  live_ -= b;
  blocks_.erase(it);
}

DeviceMemoryAccount MemoryLedger::account() const {
  std::lock_guard lock(mutex_);
  DeviceMemoryAccount a;
  for (const auto& [what, use] : uses_) a.uses.push_back(use);
  std::stable_sort(a.uses.begin(), a.uses.end(), [](const MemoryUse& x, const MemoryUse& y) {
    return x.live_bytes != y.live_bytes ? x.live_bytes > y.live_bytes : x.peak_bytes > y.peak_bytes;
  });
  a.live_bytes = live_;
  a.peak_bytes = peak_;
  return a;
}

void MemoryLedger::reset_peaks() {
  std::lock_guard lock(mutex_);
  for (auto& [what, use] : uses_) use.peak_bytes = use.live_bytes;
  peak_ = live_;
}

std::string format_memory_account(const DeviceMemoryAccount& a) {
  const auto mb = [](int64_t bytes) { return static_cast<double>(bytes) / 1e6; };
  std::string out;
  if (a.device_in_use >= 0) {
    const std::string stack =
        a.thread_stack_bytes >= 0 ? fmt::format(" with a {} B stack per thread", a.thread_stack_bytes) : "";
    out = fmt::format("device memory: {:.0f} MB in use of {:.0f} (cudaMemGetInfo), {:.0f} MB allocated by lingbot "
                      "(peak {:.0f} MB), {:.0f} MB outside it (CUDA context{}, cuBLASLt's and cuDNN's own)\n",
                      mb(a.device_in_use), mb(a.device_total), mb(a.live_bytes), mb(a.peak_bytes),
                      mb(a.outside_ledger()), stack);
  } else {
    out = fmt::format("device memory: {:.0f} MB allocated by lingbot (peak {:.0f} MB)\n", mb(a.live_bytes),
                      mb(a.peak_bytes));
  }
  for (const MemoryUse& u : a.uses)
    out += fmt::format("  {} {:.0f} MB (peak {:.0f} MB, {} allocation{})\n", u.what, mb(u.live_bytes),
                       mb(u.peak_bytes), u.allocations, u.allocations == 1 ? "" : "s");
  return out;
}

}  // namespace lingbot
