#include "checkpoint/state_dict.h"

#include "core/error.h"
#include "core/printable.h"

#include <sys/mman.h>
#include <unistd.h>

namespace lingbot::io {

const Tensor* StateDict::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Tensor& StateDict::at(std::string_view name) const {
  const Tensor* t = find(name);
  if (t == nullptr) fail("{}: no tensor '{}'", source_, printable(name, 200));
  return *t;
}

size_t StateDict::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : entries_) n += t.nbytes();
  return n;
}

int64_t StateDict::total_elements() const {
  int64_t n = 0;
  for (const auto& [name, t] : entries_) n += t.numel();
  return n;
}

size_t StateDict::release_pages(std::string_view name) const {
  const Tensor& t = at(name);
  if (mapping_.empty() || t.nbytes() == 0) return 0;
  const auto begin = reinterpret_cast<uintptr_t>(t.data());
  const uintptr_t end = begin + t.nbytes();
  const auto map_begin = reinterpret_cast<uintptr_t>(mapping_.data());
  if (begin < map_begin || end > map_begin + mapping_.size()) return 0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = end / page * page;
  if (last <= first) return 0;
  // The mapping is private and read-only, so its pages are never dirty:
  // dropping them loses nothing that the file does not hold.
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

void StateDict::insert(std::string name, Tensor tensor) {
  const auto [it, added] = index_.emplace(name, entries_.size());
  if (added) {
    entries_.emplace_back(std::move(name), std::move(tensor));
  } else {
    entries_[it->second].second = std::move(tensor);
  }
}

}  // namespace lingbot::io
