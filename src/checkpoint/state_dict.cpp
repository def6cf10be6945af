#include "checkpoint/state_dict.h"

#include "core/error.h"
#include "core/printable.h"

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

void StateDict::insert(std::string name, Tensor tensor) {
  const auto [it, added] = index_.emplace(name, entries_.size());
  if (added) {
    entries_.emplace_back(std::move(name), std::move(tensor));
  } else {
    entries_[it->second].second = std::move(tensor);
  }
}

}  // namespace lingbot::io
