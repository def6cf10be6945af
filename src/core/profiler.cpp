#include "core/profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

namespace lingbot {

namespace {

struct Stage {
  double seconds = 0;
  long calls = 0;
};

std::atomic<bool>& state() {
  static std::atomic<bool> on{false};
  return on;
}
std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, Stage>& stages() {
  static std::map<std::string, Stage> s;
  return s;
}

}  // namespace

bool Profiler::enabled() { return state().load(std::memory_order_relaxed); }

void Profiler::set_enabled(bool on) { state() = on; }

void Profiler::add(const std::string& stage, double seconds) {
  std::lock_guard lock(mutex());
  Stage& s = stages()[stage];
  s.seconds += seconds;
  ++s.calls;
}

void Profiler::reset() {
  std::lock_guard lock(mutex());
  stages().clear();
}

std::string Profiler::report() {
  std::lock_guard lock(mutex());
  std::vector<std::pair<std::string, Stage>> rows(stages().begin(), stages().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double top = 0;  // stages nest; shares are of the largest (outermost) one
  for (const auto& r : rows) top = std::max(top, r.second.seconds);
  std::string out = fmt::format("{:<34} {:>12} {:>7} {:>10} {:>6}\n", "stage", "total ms", "calls", "ms/call", "share");
  for (const auto& [name, s] : rows)
    out += fmt::format("{:<34} {:>12.1f} {:>7} {:>10.3f} {:>5.1f}%\n", name, s.seconds * 1e3, s.calls,
                       s.seconds * 1e3 / s.calls, top > 0 ? 100 * s.seconds / top : 0.0);
  return out;
}

ProfileScope::ProfileScope(std::string stage, std::function<void()> sync)
    : on_(Profiler::enabled()), stage_(std::move(stage)), sync_(std::move(sync)) {
  if (!on_) return;
  if (sync_) sync_();
  start_ = std::chrono::steady_clock::now();
}

ProfileScope::~ProfileScope() {
  if (!on_) return;
  if (sync_) sync_();
  Profiler::add(stage_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

}  // namespace lingbot
