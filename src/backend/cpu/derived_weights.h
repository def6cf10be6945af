// Tensors derived from weights (their values rounded and packed into a
// kernel's layout, say), made at a weight's first use and kept for the
// later ones.
//
// A weight is known by its data address, shape and type while its memory
// lives: each entry holds a weak reference to the memory's owner, so that a
// tensor at the same address after the first was freed (or a view of
// another shape there) gets a derived tensor of its own, and the entries of
// freed weights are dropped as new ones are made. The weights' values must
// not change while they live (a model's weights do not).
#pragma once

#include "core/tensor.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace lingbot::cpu {

class DerivedWeights {
 public:
  // What make(w) gave at w's first use, or make(w) now.
  template <typename Make>
  Tensor get(const Tensor& w, Make make) {
    const std::lock_guard lock(mutex_);
    if (const auto it = entries_.find(w.data()); it != entries_.end() && it->second.matches(w)) return it->second.derived;
    std::erase_if(entries_, [](const auto& entry) { return entry.second.source.expired(); });
    Tensor derived = make(w);
    entries_[w.data()] = Entry{w.owner(), w.shape(), w.dtype(), derived};
    return derived;
  }

  // How many derived tensors are kept.
  size_t size() const {
    const std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct Entry {
    std::weak_ptr<void> source;
    Shape shape;
    DType dtype;
    Tensor derived;
    bool matches(const Tensor& w) const { return source.lock() == w.owner() && shape == w.shape() && dtype == w.dtype(); }
  };
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Entry> entries_;
};

}  // namespace lingbot::cpu
